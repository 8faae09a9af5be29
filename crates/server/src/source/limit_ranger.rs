//! LimitRange, as kube-apiserver's `LimitRanger` admission plugin applies it
//! (`plugin/pkg/admission/limitranger/admission.go`).
//!
//! ## Guarantees
//! - **Which writes.** Creates of Pods, updates of Pods through `pods/{name}/resize` (kube's
//!   `SupportsAttributes`: defaults before the resize strategy, validation after it), and
//!   creates and updates of PersistentVolumeClaims, in a namespace that has LimitRanges
//!   (writes of another subresource are left alone, as are updates of an object being
//!   deleted). Every LimitRange of the namespace applies, in name order.
//!   The LimitRanges are read from their cache; when it has none for the namespace, once more
//!   after proving it fresh (kube's live lookup), so a LimitRange created just before is seen.
//! - **Defaults** (pods on create, before the pod's validation and quota admission, so a
//!   ResourceQuota sees the defaulted requests): for each container and init container, each
//!   resource of a `type: Container` item's `default` (limits) and `defaultRequest`
//!   (requests) the container does not state is filled in, in kube's canonical form. A
//!   request the client left out but whose limit it gave is the limit already (kube's
//!   decoding default, before admission). The pod is annotated as kube does it:
//!   `kubernetes.io/limit-ranger: LimitRanger plugin set: cpu, memory request for container
//!   app; cpu limit for init container setup` (each LimitRange that sets something writes the
//!   annotation anew: the last one's stays). The pod's QoS class is taken again afterwards.
//!   The items' own defaults (`default` from `max`, `defaultRequest` from `default` then
//!   `min`, kube's `SetDefaults_LimitRangeItem`) apply to LimitRanges stored before they were
//!   defaulted too.
//! - **Validation** (after the object's own validation): `type: Container` `min`, `max`,
//!   `maxLimitRequestRatio` per container and init container; `type: Pod` the same against
//!   the pod's requests and limits as kube's `podRequests` / `podLimits` (containers summed,
//!   init containers' maximum, sidecars added; no overhead); `type: PersistentVolumeClaim`
//!   `min` / `max` against the claim's `spec.resources.requests`. A violation is kube's 403,
//!   the errors of the first LimitRange that has any aggregated as `utilerrors.NewAggregate`
//!   (duplicates dropped; one alone without brackets): `pods "p" is forbidden: [maximum cpu
//!   usage per Container is 1, but limit is 2, minimum memory usage per Container is 64Mi, but
//!   request is 32Mi]`. Amounts compare as kube's (in thousandths, rounded up, unless too
//!   large), and print in kube's canonical form.
//! - **Order.** kube ranges over Go maps, so the order of several errors of one item and kind
//!   (two resources over `max`) varies there; here resources go in name order.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::resource_quota::{self, NANOS, Quantity};

/// The annotation kube's plugin sets on a pod it defaulted.
pub const ANNOTATION: &str = "kubernetes.io/limit-ranger";

/// Whether writes of (`group`, `plural`) are the plugin's.
#[must_use]
pub fn applies(group: &str, plural: &str) -> bool {
    group.is_empty() && matches!(plural, "pods" | "persistentvolumeclaims")
}

/// A LimitRange's items, with their defaults.
fn items(range: &Value) -> Vec<Value> {
    let mut items: Vec<Value> = range
        .pointer("/spec/limits")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    items
        .iter_mut()
        .for_each(watchkeeper_api::defaults::limit_range_item_defaults);
    items
}

fn item_type(item: &Value) -> &str {
    item.get("type").and_then(Value::as_str).unwrap_or_default()
}

/// kube's `defaultContainerResourceRequirements`: (requests, limits), the later item's value
/// kept where two name the same resource.
fn container_defaults(items: &[Value]) -> (BTreeMap<String, Quantity>, BTreeMap<String, Quantity>) {
    let (mut requests, mut limits) = (BTreeMap::new(), BTreeMap::new());
    for item in items.iter().filter(|item| item_type(item) == "Container") {
        requests.extend(resource_quota::quantities(item.get("defaultRequest")));
        limits.extend(resource_quota::quantities(item.get("default")));
    }
    (requests, limits)
}

/// Fills what `container` leaves out of `side` (`requests` / `limits`) from `defaults`; the
/// names it filled, in order.
fn fill(container: &mut Value, side: &str, defaults: &BTreeMap<String, Quantity>) -> Vec<String> {
    let mut set = Vec::new();
    let Some(container) = container.as_object_mut() else {
        return set;
    };
    let has = |container: &Map<String, Value>, name: &str| {
        container
            .get("resources")
            .and_then(|r| r.get(side))
            .and_then(|list| list.get(name))
            .is_some()
    };
    for (name, quantity) in defaults {
        if has(container, name) {
            continue;
        }
        let resources = container
            .entry("resources")
            .or_insert_with(|| Value::Object(Map::new()));
        if !resources.is_object() {
            *resources = Value::Object(Map::new());
        }
        let list = resources
            .as_object_mut()
            .map(|r| r.entry(side).or_insert_with(|| Value::Object(Map::new())));
        if let Some(list) = list {
            if !list.is_object() {
                *list = Value::Object(Map::new());
            }
            if let Some(list) = list.as_object_mut() {
                list.insert(name.clone(), Value::String(quantity.to_string()));
                set.push(name.clone());
            }
        }
    }
    set
}

/// The plugin's mutation of a pod being created (kube's `PodMutateLimitFunc` for each of
/// `ranges`, in order): the defaults and the annotation. Whether it changed anything.
pub fn default_pod(ranges: &[Value], pod: &mut Value) -> bool {
    let mut changed = false;
    for range in ranges {
        let (requests, limits) = container_defaults(&items(range));
        if requests.is_empty() && limits.is_empty() {
            continue;
        }
        let mut notes = Vec::new();
        for (field, prefix) in [
            ("containers", "container"),
            ("initContainers", "init container"),
        ] {
            let Some(containers) = pod
                .pointer_mut(&format!("/spec/{field}"))
                .and_then(Value::as_array_mut)
            else {
                continue;
            };
            for container in containers {
                let set_limits = fill(container, "limits", &limits);
                let set_requests = fill(container, "requests", &requests);
                let name = container
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                if !set_requests.is_empty() {
                    notes.push(format!(
                        "{} request for {prefix} {name}",
                        set_requests.join(", ")
                    ));
                }
                if !set_limits.is_empty() {
                    notes.push(format!(
                        "{} limit for {prefix} {name}",
                        set_limits.join(", ")
                    ));
                }
            }
        }
        if notes.is_empty() {
            continue;
        }
        changed = true;
        if let Some(metadata) = pod.get_mut("metadata").and_then(Value::as_object_mut) {
            let annotations = metadata
                .entry("annotations")
                .or_insert_with(|| Value::Object(Map::new()));
            if !annotations.is_object() {
                *annotations = Value::Object(Map::new());
            }
            if let Some(annotations) = annotations.as_object_mut() {
                annotations.insert(
                    ANNOTATION.to_owned(),
                    Value::String(format!("LimitRanger plugin set: {}", notes.join("; "))),
                );
            }
        }
    }
    if changed {
        let qos = watchkeeper_api::defaults::pod_qos_class(pod.get("spec").unwrap_or(&Value::Null));
        if let Some(status) = pod.get_mut("status").and_then(Value::as_object_mut)
            && status.contains_key("qosClass")
        {
            status.insert("qosClass".to_owned(), Value::from(qos));
        }
    }
    changed
}

type List = BTreeMap<String, Quantity>;

/// `nanos` in units of `unit` billionths, rounded up (kube's `ScaledValue`).
fn scaled(nanos: i128, unit: i128) -> i128 {
    nanos.div_euclid(unit) + i128::from(nanos.rem_euclid(unit) != 0)
}

/// kube's `requestLimitEnforcedValues`: the three at a common precision, thousandths when
/// none is too large for them.
fn comparable(
    request: Option<Quantity>,
    limit: Option<Quantity>,
    enforced: Quantity,
) -> (i128, i128, i128) {
    const MAX_MILLI_VALUE: i128 = (i64::MAX / 1000) as i128;
    let nanos = |q: Option<Quantity>| q.map_or(0, Quantity::nanos);
    let all = [nanos(request), nanos(limit), enforced.nanos()];
    let unit = if all.iter().all(|n| scaled(*n, NANOS) <= MAX_MILLI_VALUE) {
        NANOS / 1000
    } else {
        NANOS
    };
    (
        scaled(all[0], unit),
        scaled(all[1], unit),
        scaled(all[2], unit),
    )
}

fn min_constraint(
    kind: &str,
    name: &str,
    enforced: Quantity,
    requests: &List,
    limits: &List,
) -> Option<String> {
    let (request, limit) = (requests.get(name).copied(), limits.get(name).copied());
    let (observed_request, observed_limit, enforced_value) = comparable(request, limit, enforced);
    let Some(request) = request else {
        return Some(format!(
            "minimum {name} usage per {kind} is {enforced}.  No request is specified"
        ));
    };
    if observed_request < enforced_value {
        return Some(format!(
            "minimum {name} usage per {kind} is {enforced}, but request is {request}"
        ));
    }
    match limit {
        Some(limit) if observed_limit < enforced_value => Some(format!(
            "minimum {name} usage per {kind} is {enforced}, but limit is {limit}"
        )),
        _ => None,
    }
}

fn max_constraint(
    kind: &str,
    name: &str,
    enforced: Quantity,
    requests: &List,
    limits: &List,
) -> Option<String> {
    let (request, limit) = (requests.get(name).copied(), limits.get(name).copied());
    let (observed_request, observed_limit, enforced_value) = comparable(request, limit, enforced);
    let Some(limit) = limit else {
        return Some(format!(
            "maximum {name} usage per {kind} is {enforced}.  No limit is specified"
        ));
    };
    if observed_limit > enforced_value {
        return Some(format!(
            "maximum {name} usage per {kind} is {enforced}, but limit is {limit}"
        ));
    }
    match request {
        Some(request) if observed_request > enforced_value => Some(format!(
            "maximum {name} usage per {kind} is {enforced}, but request is {request}"
        )),
        _ => None,
    }
}

/// kube's `maxRequestConstraint` (claims: only requests count).
fn max_request_constraint(
    kind: &str,
    name: &str,
    enforced: Quantity,
    requests: &List,
) -> Option<String> {
    let request = requests.get(name).copied();
    let (observed_request, _, enforced_value) = comparable(request, None, enforced);
    let Some(request) = request else {
        return Some(format!(
            "maximum {name} usage per {kind} is {enforced}.  No request is specified"
        ));
    };
    (observed_request > enforced_value)
        .then(|| format!("maximum {name} usage per {kind} is {enforced}, but request is {request}"))
}

#[allow(clippy::cast_precision_loss)]
fn ratio_constraint(
    kind: &str,
    name: &str,
    enforced: Quantity,
    requests: &List,
    limits: &List,
) -> Option<String> {
    let (request, limit) = (requests.get(name).copied(), limits.get(name).copied());
    let (observed_request, observed_limit, _) = comparable(request, limit, enforced);
    if request.is_none() || observed_request == 0 {
        return Some(format!(
            "{name} max limit to request ratio per {kind} is {enforced}, but no request is specified or request is 0"
        ));
    }
    if limit.is_none() || observed_limit == 0 {
        return Some(format!(
            "{name} max limit to request ratio per {kind} is {enforced}, but no limit is specified or limit is 0"
        ));
    }
    let observed = observed_limit as f64 / observed_request as f64;
    let value = scaled(enforced.nanos(), NANOS);
    let (compared, max) = if value <= i128::from(i64::MAX / 1000) {
        (
            observed * 1000.0,
            scaled(enforced.nanos(), NANOS / 1000) as f64,
        )
    } else {
        (observed, value as f64)
    };
    (compared > max).then(|| {
        format!(
            "{name} max limit to request ratio per {kind} is {enforced}, but provided ratio is {observed:.6}"
        )
    })
}

/// An item's `min`, `max` and `maxLimitRequestRatio` against `requests` and `limits`.
fn check_all(kind: &str, item: &Value, requests: &List, limits: &List, errors: &mut Vec<String>) {
    for (name, enforced) in resource_quota::quantities(item.get("min")) {
        errors.extend(min_constraint(kind, &name, enforced, requests, limits));
    }
    for (name, enforced) in resource_quota::quantities(item.get("max")) {
        errors.extend(max_constraint(kind, &name, enforced, requests, limits));
    }
    for (name, enforced) in resource_quota::quantities(item.get("maxLimitRequestRatio")) {
        errors.extend(ratio_constraint(kind, &name, enforced, requests, limits));
    }
}

/// kube's `PodValidateLimitFunc` for one LimitRange's items.
fn pod_errors(items: &[Value], pod: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    for item in items {
        match item_type(item) {
            "Container" => {
                for field in ["containers", "initContainers"] {
                    let containers = pod
                        .pointer(&format!("/spec/{field}"))
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten();
                    for container in containers {
                        let requests =
                            resource_quota::quantities(container.pointer("/resources/requests"));
                        let limits =
                            resource_quota::quantities(container.pointer("/resources/limits"));
                        check_all("Container", item, &requests, &limits, &mut errors);
                    }
                }
            }
            "Pod" => {
                // kube's plugin sums without the overhead.
                let mut bare = pod.clone();
                if let Some(spec) = bare.get_mut("spec").and_then(Value::as_object_mut) {
                    spec.remove("overhead");
                }
                let requests = resource_quota::pod_resources(&bare, "requests");
                let limits = resource_quota::pod_resources(&bare, "limits");
                check_all("Pod", item, &requests, &limits, &mut errors);
            }
            _ => {}
        }
    }
    errors
}

/// kube's `PersistentVolumeClaimValidateLimitFunc` for one LimitRange's items.
fn claim_errors(items: &[Value], claim: &Value) -> Vec<String> {
    let kind = "PersistentVolumeClaim";
    let requests = resource_quota::quantities(claim.pointer("/spec/resources/requests"));
    let mut errors = Vec::new();
    for item in items.iter().filter(|item| item_type(item) == kind) {
        for (name, enforced) in resource_quota::quantities(item.get("min")) {
            errors.extend(min_constraint(
                kind,
                &name,
                enforced,
                &requests,
                &List::new(),
            ));
        }
        for (name, enforced) in resource_quota::quantities(item.get("max")) {
            errors.extend(max_request_constraint(kind, &name, enforced, &requests));
        }
    }
    errors
}

/// The plugin's validation of `object` (of core `plural`) against `ranges`: the refusal's
/// message (after `<resource> "<name>" is forbidden: `) for the first LimitRange it
/// violates.
#[must_use]
pub fn refusal(plural: &str, ranges: &[Value], object: &Value) -> Option<String> {
    for range in ranges {
        let items = items(range);
        let errors = match plural {
            "pods" => pod_errors(&items, object),
            "persistentvolumeclaims" => claim_errors(&items, object),
            _ => Vec::new(),
        };
        if !errors.is_empty() {
            return Some(watchkeeper_api::field::aggregate(&errors));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn range(limits: Value) -> Value {
        json!({"metadata": {"name": "lr"}, "spec": {"limits": limits}})
    }

    fn pod(containers: Value) -> Value {
        json!({"metadata": {"name": "p"}, "spec": {"containers": containers},
               "status": {"phase": "Pending", "qosClass": "BestEffort"}})
    }

    #[test]
    fn defaults_fill_what_containers_leave_out_and_say_so() {
        let ranges = [range(json!([{"type": "Container",
            "default": {"cpu": "0.5", "memory": "512Mi"},
            "defaultRequest": {"cpu": "100m", "memory": "256Mi"}}]))];
        let mut p = pod(json!([
            {"name": "app"},
            {"name": "side", "resources": {"limits": {"cpu": "1"}, "requests": {"cpu": "1"}}}
        ]));
        p["spec"]["initContainers"] = json!([{"name": "setup"}]);
        assert!(default_pod(&ranges, &mut p));
        assert_eq!(
            p["spec"]["containers"][0]["resources"],
            json!({"limits": {"cpu": "500m", "memory": "512Mi"},
                   "requests": {"cpu": "100m", "memory": "256Mi"}})
        );
        assert_eq!(
            p["spec"]["containers"][1]["resources"],
            json!({"limits": {"cpu": "1", "memory": "512Mi"},
                   "requests": {"cpu": "1", "memory": "256Mi"}})
        );
        assert_eq!(
            p["metadata"]["annotations"][ANNOTATION],
            "LimitRanger plugin set: cpu, memory request for container app; cpu, memory limit for container app; memory request for container side; memory limit for container side; cpu, memory request for init container setup; cpu, memory limit for init container setup"
        );
        assert_eq!(p["status"]["qosClass"], "Burstable");
    }

    #[test]
    fn items_default_from_max_and_min_and_nothing_to_set_is_no_change() {
        let ranges = [range(json!([{"type": "Container", "max": {"cpu": "2"},
                                    "min": {"memory": "64Mi"}}]))];
        let mut p = pod(json!([{"name": "app"}]));
        assert!(default_pod(&ranges, &mut p));
        assert_eq!(
            p["spec"]["containers"][0]["resources"],
            json!({"limits": {"cpu": "2"}, "requests": {"cpu": "2", "memory": "64Mi"}})
        );
        let before = p.clone();
        assert!(!default_pod(&ranges, &mut p));
        assert_eq!(p, before);
        let mut none = pod(json!([{"name": "app"}]));
        assert!(!default_pod(&[], &mut none));
        assert!(none["metadata"].get("annotations").is_none());
    }

    #[test]
    fn container_limits_in_kube_s_words() {
        let ranges = [range(json!([{"type": "Container",
            "max": {"cpu": "1"}, "min": {"memory": "64Mi"},
            "maxLimitRequestRatio": {"cpu": "2"}}]))];
        let p = pod(json!([{"name": "app", "resources": {
            "limits": {"cpu": "2", "memory": "1Gi"},
            "requests": {"cpu": "500m", "memory": "32Mi"}}}]));
        assert_eq!(
            refusal("pods", &ranges, &p).unwrap(),
            "[minimum memory usage per Container is 64Mi, but request is 32Mi, maximum cpu usage per Container is 1, but limit is 2, cpu max limit to request ratio per Container is 2, but provided ratio is 4.000000]"
        );
        let one = pod(json!([{"name": "app", "resources": {
            "limits": {"cpu": "1", "memory": "1Gi"},
            "requests": {"cpu": "100m", "memory": "1Gi"}}}]));
        assert_eq!(
            refusal("pods", &ranges, &one).unwrap(),
            "cpu max limit to request ratio per Container is 2, but provided ratio is 10.000000"
        );
        let unstated = pod(json!([{"name": "a"}, {"name": "b"}]));
        // The same error twice is one, without brackets.
        let only_max = [range(json!([{"type": "Container", "max": {"cpu": "1"}}]))];
        assert_eq!(
            refusal("pods", &only_max, &unstated).unwrap(),
            "maximum cpu usage per Container is 1.  No limit is specified"
        );
        let fits = pod(json!([{"name": "app", "resources": {
            "limits": {"cpu": "1", "memory": "64Mi"},
            "requests": {"cpu": "0.5", "memory": "64Mi"}}}]));
        assert_eq!(refusal("pods", &ranges, &fits), None);
    }

    #[test]
    fn pod_limits_against_the_sums_and_claims_against_requests() {
        let ranges = [range(json!([{"type": "Pod", "max": {"cpu": "1500m"}}]))];
        let p = pod(json!([
            {"name": "a", "resources": {"limits": {"cpu": "1"}, "requests": {"cpu": "1"}}},
            {"name": "b", "resources": {"limits": {"cpu": "1"}, "requests": {"cpu": "1"}}}
        ]));
        assert_eq!(
            refusal("pods", &ranges, &p).unwrap(),
            "maximum cpu usage per Pod is 1500m, but limit is 2"
        );
        let claims = [range(json!([{"type": "PersistentVolumeClaim",
            "max": {"storage": "5Gi"}, "min": {"storage": "1Gi"}}]))];
        let claim = |size: &str| json!({"spec": {"resources": {"requests": {"storage": size}}}});
        assert_eq!(
            refusal("persistentvolumeclaims", &claims, &claim("10Gi")).unwrap(),
            "maximum storage usage per PersistentVolumeClaim is 5Gi, but request is 10Gi"
        );
        assert_eq!(
            refusal("persistentvolumeclaims", &claims, &claim("500Mi")).unwrap(),
            "minimum storage usage per PersistentVolumeClaim is 1Gi, but request is 500Mi"
        );
        assert_eq!(
            refusal("persistentvolumeclaims", &claims, &claim("5Gi")),
            None
        );
    }

    #[test]
    fn amounts_compare_in_thousandths_rounded_up() {
        let ranges = [range(json!([{"type": "Container", "max": {"cpu": "1m"}}]))];
        // 1.0001m rounds up to 2m: over 1m, as kube's MilliValue has it.
        let p = pod(json!([{"name": "a", "resources": {"limits": {"cpu": "1000100n"}}}]));
        assert!(refusal("pods", &ranges, &p).is_some());
        let q = pod(json!([{"name": "a", "resources": {"limits": {"cpu": "1000000n"}}}]));
        assert_eq!(refusal("pods", &ranges, &q), None);
    }
}

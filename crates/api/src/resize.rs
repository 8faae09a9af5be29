//! The `resize` subresource of pods (`kubectl patch pod P --subresource resize`, in-place pod
//! vertical scaling, beta and on by default in 1.33), with kube-apiserver 1.33's strategy
//! (`pkg/registry/core/pod/strategy.go`: `podResizeStrategy`, `dropNonResizeUpdates`) and
//! validation (`pkg/apis/core/validation`: `ValidatePodResize`, `validateContainerResize`,
//! `validatePodResizeContainerOrdering`).
//!
//! ## Guarantees
//! - A write through the subresource changes only the `resources` and `resizePolicy` of the
//!   pod's containers and init containers: everything else of the stored pod (the rest of the
//!   spec, `status`, labels, annotations, owners, finalizers) stays as it is, whatever the body
//!   says, and is silently dropped, as kube drops it
//!   ([`crate::pod_subresources::stored_with_spec`]). `metadata.generation` goes up by one
//!   when the spec changed.
//! - Containers are matched by index: a body with more or fewer containers (init containers),
//!   or another name at an index, is refused, 422 `spec.containers: Forbidden: containers may
//!   not be added or removed on resize` / `spec.containers[i].name: Forbidden: containers may
//!   not be renamed or reordered on resize` (`initContainers` alike).
//! - Refused whole (422, one cause with no field, kube's `: Forbidden: ...` message): a pod with
//!   pod-level resources (`pods with pod-level resources cannot be resized`), a static (mirror)
//!   pod (`static pods cannot be resized`), a Windows pod (`windows pods cannot be resized`).
//! - 422 `spec: Invalid value: "<stored QoS class>": Pod QOS Class may not change as a result
//!   of resizing` when the new resources make another QoS class (computed by value, summed
//!   over containers and init containers, cpu and memory only, kube's `ComputePodQOS`);
//!   `spec: Forbidden: Pod running on node without support for resize` when the first running
//!   container's status has no `resources` (kube's version-skew guard).
//! - For each container and each restartable init container (sidecar, `restartPolicy:
//!   Always`): `...resources.requests: Forbidden: resource requests cannot be removed`,
//!   `...resources.limits: Forbidden: resource limits cannot be removed`, and unless the
//!   container's memory `resizePolicy` is `RestartContainer`,
//!   `...resources.limits[memory]: Forbidden: memory limits cannot be decreased unless
//!   resizePolicy is RestartContainer` (or `cannot be added`, a limit where there was none).
//! - Only cpu and memory may change: another resource changed, or a `resizePolicy` changed
//!   (1.33 compares the whole container but its cpu and memory), is `spec: Forbidden: only cpu
//!   and memory resources are mutable` (for a sidecar `only cpu and memory resources for
//!   sidecar containers are mutable`; any change to another init container's is `resources for
//!   non-sidecar init containers are immutable`).
//! - The pod is then validated whole as any pod write is (requests within limits, the
//!   `resizePolicy` rules of [`crate::kinds`]).
//!
//! ## Differences from kube-apiserver
//! - kube gathers the metadata and spec validation errors and the resize errors into one
//!   list; here a resize refusal is answered first, the pod's own validation after it.
//! - When the containers' number differs, kube validates the body as sent and may list more
//!   errors of it beside the ordering one; here only the QoS, node-support and ordering causes
//!   are answered.

use serde_json::{Map, Value};

use crate::error::ApiError;
use crate::field::{Cause, forbidden, go_quote, invalid};
use crate::pod_subresources::{containers, name_of, stored_with_spec};
use crate::quantity::Quantity;
use crate::resources::ResourceDef;

/// The subresource's name.
pub const SUBRESOURCE: &str = "resize";

/// Whether `def` is core/v1 pods, which has the subresource.
#[must_use]
pub fn has_resize(def: &ResourceDef) -> bool {
    crate::pod_subresources::is_pods(def)
}

/// kube's mirror pod annotation: a static pod's.
const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// The pod `old` with the resources and resize policies of `new`'s containers (and `new`'s
/// metadata fields the write path keeps), checked as kube-apiserver 1.33 checks a resize.
///
/// # Errors
/// 422 Invalid, see the module docs.
pub fn update(def: &ResourceDef, old: &Value, new: &Value) -> Result<Value, ApiError> {
    let name = old
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if let Some(message) = refused_whole(old, new) {
        return Err(root_forbidden(def, name, message));
    }
    let (old_containers, new_containers) =
        (containers(old, "containers"), containers(new, "containers"));
    let (old_inits, new_inits) = (
        containers(old, "initContainers"),
        containers(new, "initContainers"),
    );
    // kube's `dropNonResizeUpdates`: by index, and only when every name is where it was;
    // otherwise the body's lists are validated as sent (and refused for their order).
    let merged_containers = merged(&new_containers, &old_containers);
    let merged_inits = merged(&new_inits, &old_inits);
    let mut spec = old
        .get("spec")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    for (key, list) in [
        (
            "containers",
            merged_containers.as_ref().unwrap_or(&new_containers),
        ),
        (
            "initContainers",
            merged_inits.as_ref().unwrap_or(&new_inits),
        ),
    ] {
        if list.is_empty() {
            spec.remove(key);
        } else {
            spec.insert(key.to_owned(), Value::Array(list.clone()));
        }
    }
    let pod = stored_with_spec(old, new, spec);
    let mut causes = Vec::new();
    if qos_class(old) != computed_qos_class(&pod) {
        let stored = pod
            .pointer("/status/qosClass")
            .and_then(Value::as_str)
            .unwrap_or_default();
        causes.push(invalid(
            "spec",
            &go_quote(stored),
            "Pod QOS Class may not change as a result of resizing",
        ));
    }
    if !resize_supported(old) {
        causes.push(forbidden(
            "spec",
            "Pod running on node without support for resize",
        ));
    }
    ordering_causes("containers", &new_containers, &old_containers, &mut causes);
    ordering_causes("initContainers", &new_inits, &old_inits, &mut causes);
    if !causes.is_empty() {
        return Err(ApiError::invalid(def, name, causes));
    }
    let new_containers = containers(&pod, "containers");
    let new_inits = containers(&pod, "initContainers");
    for (index, (was, is)) in old_inits.iter().zip(&new_inits).enumerate() {
        if restartable(was) {
            let path = format!("spec.initContainers[{index}].resources");
            container_resize_causes(is, was, &path, &mut causes);
        }
    }
    for (index, (was, is)) in old_containers.iter().zip(&new_containers).enumerate() {
        let path = format!("spec.containers[{index}].resources");
        container_resize_causes(is, was, &path, &mut causes);
    }
    for (was, is) in old_containers.iter().zip(&new_containers) {
        if !same_but_cpu_and_memory(is, was) {
            causes.push(forbidden(
                "spec",
                "only cpu and memory resources are mutable",
            ));
        }
    }
    for (was, is) in old_inits.iter().zip(&new_inits) {
        if restartable(is) {
            if !same_but_cpu_and_memory(is, was) {
                causes.push(forbidden(
                    "spec",
                    "only cpu and memory resources for sidecar containers are mutable",
                ));
            }
        } else if !same_container(is, was) {
            causes.push(forbidden(
                "spec",
                "resources for non-sidecar init containers are immutable",
            ));
        }
    }
    if !causes.is_empty() {
        return Err(ApiError::invalid(def, name, causes));
    }
    Ok(pod)
}

/// The refusals of the whole pod, each kube's early return of one error at the root path.
fn refused_whole(old: &Value, new: &Value) -> Option<&'static str> {
    let pod_level = |pod: &Value| {
        ["requests", "limits"].iter().any(|side| {
            pod.pointer(&format!("/spec/resources/{side}"))
                .and_then(Value::as_object)
                .is_some_and(|list| !list.is_empty())
        })
    };
    if pod_level(old) || pod_level(new) {
        return Some("pods with pod-level resources cannot be resized");
    }
    let mirror = old
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .is_some_and(|annotations| annotations.contains_key(MIRROR_ANNOTATION));
    if mirror {
        return Some("static pods cannot be resized");
    }
    if old.pointer("/spec/os/name").and_then(Value::as_str) == Some("windows") {
        return Some("windows pods cannot be resized");
    }
    None
}

/// kube's `field.Forbidden(field.NewPath(""), message)` alone in an Invalid: its message
/// prints the empty path before `: Forbidden: ...`, its cause has no field.
fn root_forbidden(def: &ResourceDef, name: &str, message: &str) -> ApiError {
    let mut error = ApiError::invalid(def, name, vec![forbidden("", message)]);
    error.message = format!(
        "{} {} is invalid: : Forbidden: {message}",
        def.kind,
        go_quote(name)
    );
    if let Some(causes) = error
        .details
        .as_mut()
        .and_then(|details| details.get_mut("causes"))
        .and_then(Value::as_array_mut)
    {
        for cause in causes.iter_mut().filter_map(Value::as_object_mut) {
            cause.remove("field");
        }
    }
    error
}

/// kube's `dropNonResizeUpdatesForContainers`: the old containers with the new ones'
/// `resources` and `resizePolicy`, `None` when a name is not where it was (or the number
/// differs): the body's list is then taken as sent.
fn merged(new: &[Value], old: &[Value]) -> Option<Vec<Value>> {
    if new.len() != old.len() || new.iter().zip(old).any(|(n, o)| name_of(n) != name_of(o)) {
        return None;
    }
    let mut out = old.to_vec();
    for (container, wanted) in out.iter_mut().zip(new) {
        let Some(container) = container.as_object_mut() else {
            continue;
        };
        for key in ["resources", "resizePolicy"] {
            match wanted.get(key) {
                Some(value) => container.insert(key.to_owned(), value.clone()),
                None => container.remove(key),
            };
        }
    }
    Some(out)
}

/// kube's `validatePodResizeContainerOrdering` for one list.
fn ordering_causes(list: &str, new: &[Value], old: &[Value], causes: &mut Vec<Cause>) {
    if new.len() != old.len() {
        causes.push(forbidden(
            &format!("spec.{list}"),
            &format!("{list} may not be added or removed on resize"),
        ));
        return;
    }
    for (index, (is, was)) in new.iter().zip(old).enumerate() {
        if name_of(is) != name_of(was) {
            causes.push(forbidden(
                &format!("spec.{list}[{index}].name"),
                &format!("{list} may not be renamed or reordered on resize"),
            ));
        }
    }
}

/// An init container that restarts (a sidecar).
fn restartable(container: &Value) -> bool {
    container.get("restartPolicy").and_then(Value::as_str) == Some("Always")
}

/// A container's `resources.<side>` as a map (absent, `null` and empty alike, as kube's
/// semantic equality has it).
fn resource_list(container: &Value, side: &str) -> Map<String, Value> {
    container
        .pointer(&format!("/resources/{side}"))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

fn quantity(value: &Value) -> Option<Quantity> {
    value.as_str().and_then(Quantity::parse)
}

/// kube's `validateContainerResize`.
fn container_resize_causes(new: &Value, old: &Value, path: &str, causes: &mut Vec<Cause>) {
    let removed = |side: &str| {
        let (new, old) = (resource_list(new, side), resource_list(old, side));
        old.len() > new.len() || old.keys().any(|name| !new.contains_key(name))
    };
    if removed("requests") {
        causes.push(forbidden(
            &format!("{path}.requests"),
            "resource requests cannot be removed",
        ));
    }
    if removed("limits") {
        causes.push(forbidden(
            &format!("{path}.limits"),
            "resource limits cannot be removed",
        ));
    }
    let memory_policy = new
        .get("resizePolicy")
        .and_then(Value::as_array)
        .and_then(|policies| {
            policies
                .iter()
                .find(|p| p.get("resourceName").and_then(Value::as_str) == Some("memory"))
        })
        .and_then(|policy| policy.get("restartPolicy").and_then(Value::as_str))
        .unwrap_or_default();
    if matches!(memory_policy, "NotRequired" | "") {
        let new_limit = resource_list(new, "limits").get("memory").cloned();
        let old_limit = resource_list(old, "limits").get("memory").cloned();
        let at = format!("{path}.limits[memory]");
        match (new_limit, old_limit) {
            (Some(is), Some(was)) => {
                if let (Some(is), Some(was)) = (quantity(&is), quantity(&was))
                    && is < was
                {
                    causes.push(forbidden(
                        &at,
                        "memory limits cannot be decreased unless resizePolicy is RestartContainer",
                    ));
                }
            }
            (Some(_), None) => causes.push(forbidden(
                &at,
                "memory limits cannot be added unless resizePolicy is RestartContainer",
            )),
            _ => {}
        }
    }
}

/// A resource list with its quantities by value (kube's semantic equality compares
/// quantities with `Cmp`): the names, each with its value in billionths (or its text when it
/// does not parse).
fn by_value(list: &Map<String, Value>) -> Vec<(String, String)> {
    list.iter()
        .map(|(name, value)| {
            let value =
                quantity(value).map_or_else(|| value.to_string(), |q| q.nanos().to_string());
            (name.clone(), value)
        })
        .collect()
}

/// A container as kube's semantic equality sees it, its resource lists by value and its
/// empty lists and maps as absent.
fn semantic(container: &Value) -> Value {
    let mut container = container.clone();
    if let Some(map) = container.as_object_mut() {
        if let Some(resources) = map.get_mut("resources").and_then(Value::as_object_mut) {
            for side in ["limits", "requests"] {
                let list = resources
                    .get(side)
                    .and_then(Value::as_object)
                    .map(by_value)
                    .unwrap_or_default();
                if list.is_empty() {
                    resources.remove(side);
                } else {
                    resources.insert(side.to_owned(), serde_json::json!(list));
                }
            }
            if resources
                .get("claims")
                .is_some_and(|c| c.as_array().is_none_or(Vec::is_empty))
            {
                resources.remove("claims");
            }
        }
        if map
            .get("resources")
            .is_some_and(|r| r.as_object().is_none_or(Map::is_empty))
        {
            map.remove("resources");
        }
        if map
            .get("resizePolicy")
            .is_some_and(|p| p.as_array().is_none_or(Vec::is_empty))
        {
            map.remove("resizePolicy");
        }
    }
    container
}

fn same_container(new: &Value, old: &Value) -> bool {
    semantic(new) == semantic(old)
}

/// kube's `dropCPUMemoryResourcesFromContainer` then its comparison: `new` with its cpu and
/// memory taken from `old` (a list `old` has none of is dropped whole, and so are the
/// resource claims) equals `old`.
fn same_but_cpu_and_memory(new: &Value, old: &Value) -> bool {
    let munged_list = |side: &str| -> Option<Map<String, Value>> {
        let old_list = resource_list(old, side);
        if old
            .pointer(&format!("/resources/{side}"))
            .is_none_or(Value::is_null)
        {
            return None;
        }
        let mut list = resource_list(new, side);
        for name in ["cpu", "memory"] {
            list.remove(name);
            if let Some(value) = old_list.get(name) {
                list.insert(name.to_owned(), value.clone());
            }
        }
        Some(list)
    };
    let mut resources = Map::new();
    for side in ["limits", "requests"] {
        if let Some(list) = munged_list(side) {
            resources.insert(side.to_owned(), Value::Object(list));
        }
    }
    let mut munged = new.clone();
    if let Some(map) = munged.as_object_mut() {
        map.insert("resources".to_owned(), Value::Object(resources));
    }
    same_container(&munged, old)
}

/// kube's `GetPodQOS`: the stored class, computed when there is none.
fn qos_class(pod: &Value) -> &'static str {
    match pod.pointer("/status/qosClass").and_then(Value::as_str) {
        Some("Guaranteed") => "Guaranteed",
        Some("Burstable") => "Burstable",
        Some("BestEffort") => "BestEffort",
        _ => computed_qos_class(pod),
    }
}

/// kube's `ComputePodQOS` without pod-level resources (refused before): requests and limits
/// of cpu and memory above zero, summed over containers and init containers; BestEffort
/// without any, Guaranteed when every container limits both and the sums of requests equal
/// the sums of limits, Burstable otherwise.
fn computed_qos_class(pod: &Value) -> &'static str {
    let mut requests: Map<String, Value> = Map::new();
    let mut limits: Map<String, Value> = Map::new();
    let mut guaranteed = true;
    let add = |sums: &mut Map<String, Value>, name: &str, amount: Quantity| {
        let sum = sums
            .get(name)
            .and_then(quantity)
            .map_or(amount, |sum| sum.plus(amount));
        sums.insert(name.to_owned(), Value::String(sum.to_string()));
    };
    for container in containers(pod, "containers")
        .iter()
        .chain(&containers(pod, "initContainers"))
    {
        for (name, value) in resource_list(container, "requests") {
            if let Some(amount) = quantity(&value).filter(|q| *q > Quantity::zero())
                && matches!(name.as_str(), "cpu" | "memory")
            {
                add(&mut requests, &name, amount);
            }
        }
        let mut limited = Vec::new();
        for (name, value) in resource_list(container, "limits") {
            if let Some(amount) = quantity(&value).filter(|q| *q > Quantity::zero())
                && matches!(name.as_str(), "cpu" | "memory")
            {
                limited.push(name.clone());
                add(&mut limits, &name, amount);
            }
        }
        if !(limited.iter().any(|n| n == "cpu") && limited.iter().any(|n| n == "memory")) {
            guaranteed = false;
        }
    }
    if requests.is_empty() && limits.is_empty() {
        return "BestEffort";
    }
    if guaranteed {
        guaranteed = requests.iter().all(|(name, request)| {
            limits
                .get(name)
                .and_then(quantity)
                .zip(quantity(request))
                .is_some_and(|(limit, request)| limit == request)
        });
    }
    if guaranteed && requests.len() == limits.len() {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

/// kube's `isPodResizeRequestSupported`: the first running container's status has
/// `resources` (its node reports them, so it resizes); true without a running container.
fn resize_supported(pod: &Value) -> bool {
    pod.pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .and_then(|statuses| {
            statuses
                .iter()
                .find(|s| s.pointer("/state/running").is_some_and(|r| !r.is_null()))
        })
        .is_none_or(|status| status.get("resources").is_some_and(|r| !r.is_null()))
}

#[cfg(test)]
#[path = "resize_tests.rs"]
mod tests;

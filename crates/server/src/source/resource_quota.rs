//! ResourceQuota, as kube-apiserver's `ResourceQuota` admission plugin and
//! kube-controller-manager's resource quota controller do it between them (this server has no
//! controller manager, so it does the controller's part at write time).
//!
//! ## Guarantees
//! - **Object counts are enforced.** A create of an object counted by a quota in its
//!   namespace (`count/<resource>[.<group>]`, and for core resources the names `pods`,
//!   `services`, `secrets`, `configmaps`, `persistentvolumeclaims`, `replicationcontrollers`,
//!   `resourcequotas`; for Services also `services.loadbalancers` and `services.nodeports`,
//!   counted as kube's service evaluator does: 1 per LoadBalancer, and per NodePort or
//!   LoadBalancer Service its number of ports — only those with a node port when a load
//!   balancer opts out of them) that would take the usage above the quota's `hard` value is
//!   refused with kube-apiserver's 403: `configmaps "c3" is forbidden: exceeded quota: q,
//!   requested: count/configmaps=1, used: count/configmaps=2, limited: count/configmaps=2`. A
//!   pod that is `Succeeded` or `Failed`, or terminating past its `deletionTimestamp` plus
//!   `deletionGracePeriodSeconds` at the write's time, charges only `count/pods` (not `pods`
//!   nor compute), as kube's pod evaluator (`QuotaV1Pod`) has it; a quota's shown usage
//!   catches up with time at the next resync (`controllers::quota_resync`).
//! - **Compute and storage are enforced** as kube's pod and claim evaluators charge them: a
//!   pod charges `requests.cpu` (also `cpu`), `requests.memory` (`memory`),
//!   `requests.ephemeral-storage` (`ephemeral-storage`), their `limits.*`, `hugepages-*`
//!   (`requests.hugepages-*`) and extended resources (`requests.example.com/gpu`) — its
//!   containers' sum, at least each init container's, sidecars (init containers that restart)
//!   added, plus `spec.overhead` (kube's `PodRequests` / `PodLimits`); a claim charges
//!   `requests.storage` and, for its storage class, `<class>.storageclass.storage.k8s.io/
//!   requests.storage` and `.../persistentvolumeclaims`. Amounts are Kubernetes quantities
//!   (`500m`, `1.5Gi`, `2e3`), exact to a billionth (finer is rounded up, as kube parses), and
//!   shown in kube's canonical form (`used: requests.cpu=1500m`, `requests.memory=256Mi`).
//!   A quota that limits `cpu`, `memory` or their `requests.` / `limits.` names makes every
//!   container of a pod state them: kube's `failed quota: q: must specify limits.cpu for:
//!   app; limits.memory for: app` (403).
//! - **Exact under concurrency, at a cost independent of the namespace's size.** A write that
//!   only adds usage builds on the usage its quota states (`status.used` plus the write's
//!   charge, as kube's admission does) and a write that gives usage back on it minus what it
//!   gives back, so a create or a delete costs the same with 10 or 10,000 objects in the
//!   namespace; a write the stated usage would refuse, one that gives back what the stated
//!   usage may not hold (a pod that time alone stopped charging, [`charge_is_stated`], or
//!   more than it states), or a quota that does not state every name it limits, counts the
//!   namespace from the caches once they are proven fresh, which corrects what time or a
//!   writer behind the server's back changed — so no refusal rests on a stale usage (kube's
//!   admission refuses on `status.used` until its controller recalculates). Either way the
//!   write's
//!   transaction also writes the quota's new `status.used` under a compare of the quota's
//!   revision: two writes that read the same usage cannot both commit (kube-apiserver
//!   serialises them the same way, through the quota's status update); the loser reads
//!   again.
//! - **Usage is shown.** Creating or updating a quota fills `status.hard` (from `spec.hard`)
//!   and `status.used` (the usage now), as the controller does; every charged create and
//!   delete writes the new `status.used` in its own transaction, so `kubectl describe quota`
//!   shows the usage at once.
//! - **Updates are charged** by what they change: a Service turned into a LoadBalancer past
//!   `services.loadbalancers`, a claim grown past `requests.storage`, is refused as kube's
//!   service and claim evaluators refuse it; an update that gives usage back (a pod that
//!   finished, a LoadBalancer turned into a ClusterIP) lowers `status.used` in its own
//!   transaction (kube's controller does it a moment later).
//! - **Scopes select pods** as kube's pod evaluator selects them: a quota with `scopes` or a
//!   `scopeSelector` charges only the pods that meet every requirement — `Terminating`
//!   (`activeDeadlineSeconds` ≥ 0) and `NotTerminating`, `BestEffort` (no container, init
//!   containers included, nor the pod requests or limits CPU or memory) and `NotBestEffort`,
//!   `PriorityClass` (`In`, `NotIn`, `Exists` on `priorityClassName`),
//!   `CrossNamespacePodAffinity` (an affinity term naming namespaces or a namespace selector)
//!   — and no other kind of object ([`selects`]); its usage counts only those pods, and a pod
//!   it does not select is not asked to state what it limits.
//! - **Limited resources** (the plugin's `ResourceQuotaConfiguration`,
//!   [`limited_resources`], from `--admission-control-config-file`): a create (an update of a
//!   Service or a claim) of a listed resource whose usage has a name containing one of the
//!   entry's `matchContains` is refused unless a quota of its namespace that selects it
//!   limits that name — kube's 403 `insufficient quota to consume: requests.cpu` — even in a
//!   namespace with no quota at all; a pod meeting one of the entry's `matchScopes` needs a
//!   quota with a requirement of that scope that it meets, else kube's plain error (a 500
//!   without a reason) `insufficient quota to match these scopes: [{PriorityClass In
//!   [high]}]` ([`uncovered`]). The namespace's quotas are read from their cache.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

pub use watchkeeper_api::quantity::{Format, NANOS, Quantity};

/// The core resources whose quota name is also their plain plural (kube's legacy names).
const LEGACY: [&str; 7] = [
    "pods",
    "services",
    "secrets",
    "configmaps",
    "persistentvolumeclaims",
    "replicationcontrollers",
    "resourcequotas",
];

/// The Service usages beside its counts.
const SERVICE_USAGES: [&str; 2] = ["services.loadbalancers", "services.nodeports"];

/// A pod's compute names kube's pod evaluator charges beside its counts (hugepages and
/// extended resources aside).
const POD_COMPUTE: [&str; 9] = [
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
];

/// The names a quota may limit that make every container state them (kube's pod
/// evaluator's `validationSet`).
const STATED: [&str; 6] = [
    "cpu",
    "memory",
    "requests.cpu",
    "requests.memory",
    "limits.cpu",
    "limits.memory",
];

/// A claim's storage-class names: `<class>` then this then `requests.storage` or
/// `persistentvolumeclaims`.
const STORAGE_CLASS_SUFFIX: &str = ".storageclass.storage.k8s.io/";

/// An extended resource's name (kube's `IsExtendedResourceName`): qualified with a domain
/// that is not `kubernetes.io`, and not itself a `requests.` name.
fn is_extended(name: &str) -> bool {
    name.contains('/') && !name.contains("kubernetes.io/") && !name.starts_with("requests.")
}

/// Whether the quota name `name` charges objects of (`group`, `plural`).
#[must_use]
pub fn applies(group: &str, plural: &str, name: &str) -> bool {
    let count = if group.is_empty() {
        format!("count/{plural}")
    } else {
        format!("count/{plural}.{group}")
    };
    if name == count || (group.is_empty() && LEGACY.contains(&plural) && name == plural) {
        return true;
    }
    if !group.is_empty() {
        return false;
    }
    match plural {
        "services" => SERVICE_USAGES.contains(&name),
        "pods" => {
            POD_COMPUTE.contains(&name)
                || name.starts_with("hugepages-")
                || name.strip_prefix("requests.").is_some_and(|resource| {
                    resource.starts_with("hugepages-") || is_extended(resource)
                })
        }
        "persistentvolumeclaims" => {
            name == "requests.storage"
                || name
                    .split_once(STORAGE_CLASS_SUFFIX)
                    .is_some_and(|(class, what)| {
                        !class.is_empty()
                            && (what == "requests.storage" || what == "persistentvolumeclaims")
                    })
        }
        _ => false,
    }
}

/// The resource (group, plural) whose objects a quota name charges, if it is one this
/// module enforces.
#[must_use]
pub fn charged_resource(name: &str) -> Option<(String, String)> {
    if let Some(resource) = name.strip_prefix("count/") {
        return Some(match resource.split_once('.') {
            Some((plural, group)) => (group.to_owned(), plural.to_owned()),
            None => (String::new(), resource.to_owned()),
        });
    }
    LEGACY
        .iter()
        .find(|plural| applies("", plural, name))
        .map(|plural| (String::new(), (*plural).to_owned()))
}

/// Whether a pod is charged for more than `count/pods` at `now_unix_seconds`, as kube's
/// `QuotaV1Pod` (`pkg/quota/v1/evaluator/core/pods.go`) has it: not when it has finished
/// (`Succeeded` or `Failed`), nor when it is being deleted and `now` is past its
/// `deletionTimestamp` plus `deletionGracePeriodSeconds` (stuck terminating, e.g. on a lost
/// node; kube adds the period to the timestamp, which already includes it, and so does this).
/// `count/pods` counts every pod in storage; `pods` and the compute names only these.
fn charged_for_life(pod: &Value, now_unix_seconds: i64) -> bool {
    let phase = pod.pointer("/status/phase").and_then(Value::as_str);
    if matches!(phase, Some("Succeeded" | "Failed")) {
        return false;
    }
    let metadata = pod.get("metadata");
    let deleted_at = metadata
        .and_then(|m| m.get("deletionTimestamp"))
        .and_then(Value::as_str)
        .and_then(watchkeeper_api::time::unix_from_rfc3339);
    let grace = metadata
        .and_then(|m| m.get("deletionGracePeriodSeconds"))
        .and_then(Value::as_i64);
    match (deleted_at, grace) {
        (Some(at), Some(grace)) => now_unix_seconds <= at.saturating_add(grace),
        _ => true,
    }
}

/// Whether the usage a quota states holds what `object` of (`group`, `plural`) charges at
/// `now_unix_seconds`: every charge but a pod's depends on the object alone, and every write
/// of it keeps the stated usage; a pod that time alone stopped charging (terminating past its
/// grace period, not finished) may or may not be in it, as a count may have run since.
#[must_use]
pub fn charge_is_stated(group: &str, plural: &str, object: &Value, now_unix_seconds: i64) -> bool {
    let finished = matches!(
        object.pointer("/status/phase").and_then(Value::as_str),
        Some("Succeeded" | "Failed")
    );
    !group.is_empty() || plural != "pods" || finished || charged_for_life(object, now_unix_seconds)
}

/// A map of quantities by resource name (`requests` / `limits` of a container).
pub(crate) fn quantities(list: Option<&Value>) -> BTreeMap<String, Quantity> {
    list.and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(name, value)| Some((name.clone(), Quantity::parse(value.as_str()?)?)))
        .collect()
}

/// `into += add`, per name (kube's `addResourceList`).
fn add_all(into: &mut BTreeMap<String, Quantity>, add: &BTreeMap<String, Quantity>) {
    for (name, quantity) in add {
        let sum = into.get(name).map_or(*quantity, |had| had.plus(*quantity));
        into.insert(name.clone(), sum);
    }
}

/// `into = max(into, other)`, per name (kube's `maxResourceList`).
fn max_all(into: &mut BTreeMap<String, Quantity>, other: &BTreeMap<String, Quantity>) {
    for (name, quantity) in other {
        let max = into
            .get(name)
            .map_or(*quantity, |had| had.max_of(*quantity));
        into.insert(name.clone(), max);
    }
}

/// A pod's requests or limits (`which`), as kube's `PodRequests` / `PodLimits`: the
/// containers' sum, sidecars (init containers with `restartPolicy: Always`) added, at least
/// each other init container's with the sidecars started before it, plus `spec.overhead`
/// (for limits, only to those the pod has).
pub(crate) fn pod_resources(pod: &Value, which: &str) -> BTreeMap<String, Quantity> {
    let containers = |field: &str| -> Vec<&Value> {
        pod.pointer(&format!("/spec/{field}"))
            .and_then(Value::as_array)
            .map(|list| list.iter().collect())
            .unwrap_or_default()
    };
    let of = |container: &Value| quantities(container.pointer(&format!("/resources/{which}")));
    let mut total = BTreeMap::new();
    for container in containers("containers") {
        add_all(&mut total, &of(container));
    }
    let mut sidecars = BTreeMap::new();
    let mut init = BTreeMap::new();
    for container in containers("initContainers") {
        let own = of(container);
        if container.get("restartPolicy").and_then(Value::as_str) == Some("Always") {
            add_all(&mut total, &own);
            add_all(&mut sidecars, &own);
            max_all(&mut init, &sidecars);
        } else {
            let mut with_sidecars = own;
            add_all(&mut with_sidecars, &sidecars);
            max_all(&mut init, &with_sidecars);
        }
    }
    max_all(&mut total, &init);
    let overhead = quantities(pod.pointer("/spec/overhead"));
    if which == "limits" {
        // kube adds the overhead to the limits a pod has, not to absent ones.
        for (name, quantity) in overhead {
            if let Some(limit) = total.get_mut(&name) {
                *limit = limit.plus(quantity);
            }
        }
    } else {
        add_all(&mut total, &overhead);
    }
    total
}

/// What requests and limits charge (kube's `podComputeUsageHelper`), for a pod's totals or
/// one container's.
fn compute_charges(
    requests: &BTreeMap<String, Quantity>,
    limits: &BTreeMap<String, Quantity>,
) -> BTreeMap<String, Quantity> {
    let mut charges = BTreeMap::new();
    for resource in ["cpu", "memory", "ephemeral-storage"] {
        if let Some(request) = requests.get(resource) {
            charges.insert(resource.to_owned(), *request);
            charges.insert(format!("requests.{resource}"), *request);
        }
        if let Some(limit) = limits.get(resource) {
            charges.insert(format!("limits.{resource}"), *limit);
        }
    }
    for (resource, request) in requests {
        if resource.starts_with("hugepages-") {
            charges.insert(resource.clone(), *request);
            charges.insert(format!("requests.{resource}"), *request);
        } else if is_extended(resource) {
            charges.insert(format!("requests.{resource}"), *request);
        }
    }
    charges
}

/// Everything `object` of (`group`, `plural`) charges at `now_unix_seconds`, by quota name:
/// its counts, and a Service's, pod's or claim's usages (see the module docs). Names it does
/// not use are absent (a pod without a cpu request charges no `requests.cpu`; a finished pod,
/// or one terminating past its grace period, only `count/pods`).
#[must_use]
pub fn charges(
    group: &str,
    plural: &str,
    object: &Value,
    now_unix_seconds: i64,
) -> BTreeMap<String, Quantity> {
    let mut charges = BTreeMap::new();
    let one = Quantity::count(1);
    if group.is_empty() {
        charges.insert(format!("count/{plural}"), one);
        if LEGACY.contains(&plural) {
            charges.insert(plural.to_owned(), one);
        }
    } else {
        charges.insert(format!("count/{plural}.{group}"), one);
        return charges;
    }
    match plural {
        "services" => {
            let kind = object.pointer("/spec/type").and_then(Value::as_str);
            let ports = object
                .pointer("/spec/ports")
                .and_then(Value::as_array)
                .map_or(&[][..], Vec::as_slice);
            let count = |n: usize| Quantity::count(i64::try_from(n).unwrap_or(i64::MAX));
            let node_ports = match kind {
                Some("NodePort") => ports.len(),
                Some("LoadBalancer")
                    if object.pointer("/spec/allocateLoadBalancerNodePorts")
                        == Some(&Value::Bool(false)) =>
                {
                    ports
                        .iter()
                        .filter(|port| {
                            port.get("nodePort").and_then(Value::as_i64).unwrap_or(0) != 0
                        })
                        .count()
                }
                Some("LoadBalancer") => ports.len(),
                _ => 0,
            };
            charges.insert(
                "services.loadbalancers".to_owned(),
                count(usize::from(kind == Some("LoadBalancer"))),
            );
            charges.insert("services.nodeports".to_owned(), count(node_ports));
        }
        "pods" if !charged_for_life(object, now_unix_seconds) => {
            charges.remove("pods");
        }
        "pods" => {
            let requests = pod_resources(object, "requests");
            let limits = pod_resources(object, "limits");
            charges.extend(compute_charges(&requests, &limits));
        }
        "persistentvolumeclaims" => {
            let class = object
                .pointer("/metadata/annotations/volume.beta.kubernetes.io~1storage-class")
                .or_else(|| object.pointer("/spec/storageClassName"))
                .and_then(Value::as_str)
                .filter(|class| !class.is_empty());
            if let Some(class) = class {
                charges.insert(
                    format!("{class}{STORAGE_CLASS_SUFFIX}persistentvolumeclaims"),
                    one,
                );
            }
            let storage = object
                .pointer("/spec/resources/requests/storage")
                .and_then(Value::as_str)
                .and_then(Quantity::parse);
            if let Some(storage) = storage {
                charges.insert("requests.storage".to_owned(), storage);
                if let Some(class) = class {
                    charges.insert(
                        format!("{class}{STORAGE_CLASS_SUFFIX}requests.storage"),
                        storage,
                    );
                }
            }
        }
        _ => {}
    }
    charges
}

/// Whether `quota` (a ResourceQuota body) has scopes (`spec.scopes` or `spec.scopeSelector`):
/// it then charges only the pods its scopes select.
#[must_use]
pub fn is_scoped(quota: &Value) -> bool {
    !scope_requirements(quota).is_empty()
}

/// One scope requirement: `spec.scopes` entries are `Exists` requirements of their scope.
struct ScopeRequirement<'a> {
    scope: &'a str,
    operator: &'a str,
    values: Vec<&'a str>,
}

/// Every scope requirement of `quota`: its `spec.scopes` and its `scopeSelector`'s
/// `matchExpressions` (all must hold, as kube ANDs them).
fn scope_requirements(quota: &Value) -> Vec<ScopeRequirement<'_>> {
    let mut requirements: Vec<ScopeRequirement<'_>> = quota
        .pointer("/spec/scopes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(|scope| ScopeRequirement {
            scope,
            operator: "Exists",
            values: Vec::new(),
        })
        .collect();
    for expression in quota
        .pointer("/spec/scopeSelector/matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        requirements.push(requirement_of(expression));
    }
    requirements
}

/// Whether `pod` is of QoS class BestEffort: no container (init containers included) and not
/// the pod itself requests or limits CPU or memory (kube's `GetPodQOS`).
fn best_effort(pod: &Value) -> bool {
    let states = |resources: Option<&Value>| {
        ["requests", "limits"].iter().any(|which| {
            resources
                .and_then(|r| r.get(*which))
                .and_then(Value::as_object)
                .is_some_and(|amounts| {
                    amounts.iter().any(|(name, amount)| {
                        (name == "cpu" || name == "memory")
                            && Quantity::parse(amount.as_str().unwrap_or("0"))
                                .is_some_and(|q| q != Quantity::zero())
                    })
                })
        })
    };
    let containers = ["/spec/containers", "/spec/initContainers"]
        .iter()
        .filter_map(|path| pod.pointer(path).and_then(Value::as_array))
        .flatten();
    !states(pod.pointer("/spec/resources"))
        && !containers
            .into_iter()
            .any(|container| states(container.get("resources")))
}

/// Whether `pod` names other namespaces in a pod (anti-)affinity term (kube's
/// `CrossNamespacePodAffinity` scope).
fn cross_namespace_affinity(pod: &Value) -> bool {
    ["podAffinity", "podAntiAffinity"].iter().any(|kind| {
        let Some(affinity) = pod.pointer(&format!("/spec/affinity/{kind}")) else {
            return false;
        };
        let required = affinity
            .get("requiredDuringSchedulingIgnoredDuringExecution")
            .and_then(Value::as_array)
            .into_iter()
            .flatten();
        let preferred = affinity
            .get("preferredDuringSchedulingIgnoredDuringExecution")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|weighted| weighted.get("podAffinityTerm"));
        required.chain(preferred).any(|term| {
            term.get("namespaces")
                .and_then(Value::as_array)
                .is_some_and(|names| !names.is_empty())
                || term.get("namespaceSelector").is_some_and(|s| !s.is_null())
        })
    })
}

/// Whether `pod` meets one scope requirement, as kube's pod evaluator decides it.
fn meets(pod: &Value, requirement: &ScopeRequirement<'_>) -> bool {
    match requirement.scope {
        "Terminating" => pod
            .pointer("/spec/activeDeadlineSeconds")
            .and_then(Value::as_i64)
            .is_some_and(|seconds| seconds >= 0),
        "NotTerminating" => pod
            .pointer("/spec/activeDeadlineSeconds")
            .is_none_or(Value::is_null),
        "BestEffort" => best_effort(pod),
        "NotBestEffort" => !best_effort(pod),
        "CrossNamespacePodAffinity" => cross_namespace_affinity(pod),
        "PriorityClass" => {
            let class = pod
                .pointer("/spec/priorityClassName")
                .and_then(Value::as_str)
                .unwrap_or("");
            // kube matches a label set `{PriorityClass: <name>}` (the key always present).
            match requirement.operator {
                "Exists" => !class.is_empty(),
                "In" => requirement.values.contains(&class),
                "NotIn" => !requirement.values.contains(&class),
                _ => false,
            }
        }
        _ => false,
    }
}

/// Whether `quota` charges `object` of (`group`, `plural`): every unscoped quota does; a
/// scoped one charges only pods its every scope requirement selects (kube's other evaluators
/// match no scope).
#[must_use]
pub fn selects(quota: &Value, group: &str, plural: &str, object: &Value) -> bool {
    let requirements = scope_requirements(quota);
    requirements.is_empty()
        || (group.is_empty()
            && plural == "pods"
            && requirements
                .iter()
                .all(|requirement| meets(object, requirement)))
}

/// The limits of `quota` that charge objects of (`group`, `plural`): `(name, hard)`. Empty
/// for one that limits none of them, and for a scoped quota unless they are pods (which of
/// them it charges: [`selects`]); a hard value that is not a quantity is not enforced.
#[must_use]
pub fn limits(quota: &Value, group: &str, plural: &str) -> Vec<(String, Quantity)> {
    if is_scoped(quota) && !(group.is_empty() && plural == "pods") {
        return Vec::new();
    }
    let Some(hard) = quota.pointer("/spec/hard").and_then(Value::as_object) else {
        return Vec::new();
    };
    hard.iter()
        .filter(|(name, _)| applies(group, plural, name))
        .filter_map(|(name, value)| Some((name.clone(), Quantity::parse(value.as_str()?)?)))
        .collect()
}

/// kube's refusal of a pod that does not state what a quota limits (its pod evaluator's
/// `Constraints`): `must specify limits.cpu for: app; limits.memory for: app`, for the
/// names among `limited` that every container must state. `None` when nothing is missing
/// or the object is not a pod.
#[must_use]
pub fn unstated(
    group: &str,
    plural: &str,
    limited: &[(String, Quantity)],
    object: &Value,
) -> Option<String> {
    if !group.is_empty() || plural != "pods" {
        return None;
    }
    let required: BTreeSet<&str> = limited
        .iter()
        .map(|(name, _)| name.as_str())
        .filter(|name| STATED.contains(name))
        .collect();
    if required.is_empty() {
        return None;
    }
    let mut missing: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for field in ["containers", "initContainers"] {
        let containers = object
            .pointer(&format!("/spec/{field}"))
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice);
        for container in containers {
            let stated = compute_charges(
                &quantities(container.pointer("/resources/requests")),
                &quantities(container.pointer("/resources/limits")),
            );
            let name = container.get("name").and_then(Value::as_str).unwrap_or("");
            for resource in &required {
                if !stated.contains_key(*resource) {
                    missing.entry(resource).or_default().insert(name.to_owned());
                }
            }
        }
    }
    if missing.is_empty() {
        return None;
    }
    let each: Vec<String> = missing
        .iter()
        .map(|(resource, containers)| {
            let names: Vec<&str> = containers.iter().map(String::as_str).collect();
            format!("{resource} for: {}", names.join(","))
        })
        .collect();
    Some(format!("must specify {}", each.join("; ")))
}

/// kube-apiserver's refusal text when adding `requested` (by name) to `used` (by name) passes
/// a limit of the quota `quota_name` (`limits` as [`limits`] gives them); `None` when it fits.
/// Only names the request charges something of are checked.
#[must_use]
pub fn exceeded(
    quota_name: &str,
    limits: &[(String, Quantity)],
    used: &BTreeMap<String, Quantity>,
    requested: &BTreeMap<String, Quantity>,
) -> Option<String> {
    let used_of = |name: &str| used.get(name).copied().unwrap_or_else(Quantity::zero);
    // (name, requested, used, hard) of each limit the request passes.
    let mut failed: Vec<(&String, [Quantity; 3])> = limits
        .iter()
        .filter_map(|(name, hard)| {
            // kube removes what the request does not add (`RemoveZeros`) before it checks.
            let asked = *requested.get(name).filter(|asked| asked.nanos() > 0)?;
            let now = used_of(name);
            (now.plus(asked) > *hard).then_some((name, [asked, now, *hard]))
        })
        .collect();
    if failed.is_empty() {
        return None;
    }
    failed.sort_by(|a, b| a.0.cmp(b.0));
    let list = |which: usize| {
        failed
            .iter()
            .map(|(name, amounts)| format!("{name}={}", amounts[which]))
            .collect::<Vec<_>>()
            .join(",")
    };
    Some(format!(
        "exceeded quota: {quota_name}, requested: {}, used: {}, limited: {}",
        list(0),
        list(1),
        list(2),
    ))
}

/// `quota` with `status.hard` from `spec.hard` and `status.used` set for `used` (other
/// `status.used` entries kept only for names still limited), as the controller writes them.
#[must_use]
pub fn with_status(mut quota: Value, used: &BTreeMap<String, Quantity>) -> Value {
    let hard = quota
        .pointer("/spec/hard")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let old_used = quota
        .pointer("/status/used")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut new_used = Map::new();
    for name in hard.keys() {
        if let Some(amount) = used.get(name) {
            new_used.insert(name.clone(), Value::String(amount.to_string()));
        } else if let Some(value) = old_used.get(name) {
            new_used.insert(name.clone(), value.clone());
        }
    }
    if let Some(object) = quota.as_object_mut() {
        let mut status = Map::new();
        status.insert("hard".to_owned(), Value::Object(hard));
        status.insert("used".to_owned(), Value::Object(new_used));
        object.insert("status".to_owned(), Value::Object(status));
    }
    quota
}

/// The quota controller's service account name (kube-controller-manager's; the user of
/// `crate::controllers::quota_resync`'s writes).
pub const CONTROLLER: &str = "resourcequota-controller";

/// The user of the quota controller's writes: the only writer of a quota's `status` whose
/// write is recounted (a client's is kept as written until its next resync).
pub const CONTROLLER_USER: &str = "system:serviceaccount:kube-system:resourcequota-controller";

/// The most quotas waiting in [`Recounts`]; past it a marked quota waits for the periodic
/// resync instead.
pub const MAX_PENDING_RECOUNTS: usize = 10_000;

/// Quotas to count again soon, as kube's quota controller recalculates a quota it has just
/// seen created or its `spec.hard` changed: a write counts from the caches as they are, and
/// an object written at the same moment (the namespace controller's `kube-root-ca.crt` beside
/// a quota made right after its namespace) may be in neither the count nor charged to a quota
/// its admission did not see yet. Marked after the quota's write commits; drained by
/// `crate::controllers::quota_resync`, which proves the caches fresh first.
///
/// Bounds: at most [`MAX_PENDING_RECOUNTS`] quotas, each once.
#[derive(Debug, Default)]
pub struct Recounts {
    pending: std::sync::Mutex<std::collections::BTreeSet<(String, String)>>,
    wake: tokio::sync::Notify,
}

impl Recounts {
    /// Marks the quota `namespace/name` to be counted again.
    pub fn mark(&self, namespace: &str, name: &str) {
        let mut pending = self
            .pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if pending.len() < MAX_PENDING_RECOUNTS {
            pending.insert((namespace.to_owned(), name.to_owned()));
        }
        drop(pending);
        self.wake.notify_one();
    }

    /// The quotas marked since the last call, waiting for one when none is.
    pub async fn marked(&self) -> std::collections::BTreeSet<(String, String)> {
        loop {
            let taken = std::mem::take(
                &mut *self
                    .pending
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner),
            );
            if !taken.is_empty() {
                return taken;
            }
            self.wake.notified().await;
        }
    }
}

/// A `limitedResources` entry of the plugin's configuration (kube's `LimitedResource`):
/// objects of `api_group`/`resource` whose usage names contain one of `match_contains`, or
/// pods that meet one of `match_scopes`, may only be created where a quota covers that name
/// or scope.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LimitedResource {
    /// `apiGroup` (empty: the core group).
    pub api_group: String,
    /// `resource`.
    pub resource: String,
    /// `matchContains`.
    pub match_contains: Vec<String>,
    /// `matchScopes`: `{scopeName, operator, values}` requirements.
    pub match_scopes: Vec<Value>,
}

/// The configuration's kinds by `apiVersion` (kube's resourcequota scheme).
const CONFIG_KINDS: [(&str, &str); 3] = [
    ("apiserver.config.k8s.io/v1", "ResourceQuotaConfiguration"),
    ("resourcequota.admission.k8s.io/v1beta1", "Configuration"),
    ("resourcequota.admission.k8s.io/v1alpha1", "Configuration"),
];

/// Where kube's plugin makes its configuration scheme (named in its decoding errors).
const CONFIG_SCHEME: &str = "k8s.io/apiserver/pkg/admission/plugin/resourcequota/config.go:32";

/// A list of strings at `key` of `value` (`[]` when absent).
fn strings(value: &Value, key: &str) -> Result<Vec<String>, String> {
    match value.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| {
                item.as_str().map(str::to_owned).ok_or_else(|| {
                    format!("json: cannot unmarshal into Go struct field LimitedResource.limitedResources.{key} of type string")
                })
            })
            .collect(),
        Some(_) => Err(format!(
            "json: cannot unmarshal into Go struct field LimitedResource.limitedResources.{key} of type []string"
        )),
    }
}

/// The plugin's `limitedResources` from its configuration `value` (`None`: none given),
/// decoded and validated as kube's `LoadConfiguration` and `ValidateConfiguration` do.
///
/// # Errors
/// kube's decoding error or its aggregated field errors.
pub fn limited_resources(value: Option<&Value>) -> Result<Vec<LimitedResource>, String> {
    let Some(value) = value else {
        return Ok(Vec::new());
    };
    let api_version = value
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    let kind = CONFIG_KINDS
        .iter()
        .find(|(version, _)| *version == api_version)
        .map_or("ResourceQuotaConfiguration", |(_, kind)| kind);
    let versions: Vec<&str> = CONFIG_KINDS
        .iter()
        .filter(|(_, k)| *k == kind)
        .map(|(version, _)| *version)
        .collect();
    super::plugin_config::config_kind(value, &versions, kind, CONFIG_SCHEME)?;
    let items = match value.get("limitedResources") {
        None | Some(Value::Null) => &[][..],
        Some(Value::Array(items)) => items.as_slice(),
        Some(_) => {
            return Err("json: cannot unmarshal into Go struct field Configuration.limitedResources of type []LimitedResource".to_owned());
        }
    };
    let mut limited = Vec::new();
    let mut errors = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let text = |key: &str| {
            item.get(key)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned()
        };
        let entry = LimitedResource {
            api_group: text("apiGroup"),
            resource: text("resource"),
            match_contains: strings(item, "matchContains")?,
            match_scopes: item
                .get("matchScopes")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
        };
        if entry.resource.is_empty() {
            errors.push(format!("limitedResources[{i}].resource: Required value"));
        }
        limited.push(entry);
    }
    if errors.is_empty() {
        Ok(limited)
    } else {
        Err(watchkeeper_api::field::aggregate(&errors))
    }
}

/// Why a create is refused for want of a covering quota.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Uncovered {
    /// kube's 403 `insufficient quota to consume: <names>`.
    Resources(String),
    /// kube's plain error (a 500 without a reason) `insufficient quota to match these
    /// scopes: [...]`.
    Scopes(String),
}

/// A scope requirement as Go's `%v` prints a `ScopedResourceSelectorRequirement`:
/// `{PriorityClass In [a b]}`.
fn printed(requirement: &ScopeRequirement<'_>) -> String {
    format!(
        "{{{} {} [{}]}}",
        requirement.scope,
        requirement.operator,
        requirement.values.join(" ")
    )
}

/// A scope selector's expression (a quota's `matchExpressions` entry, a limited resource's
/// `matchScopes` entry) as a requirement.
fn requirement_of(value: &Value) -> ScopeRequirement<'_> {
    let text = |key: &str| value.get(key).and_then(Value::as_str).unwrap_or("");
    ScopeRequirement {
        scope: text("scopeName"),
        operator: text("operator"),
        values: value
            .get("values")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect(),
    }
}

/// kube's check of `limited` resources (its `CheckRequest` before any amount) on a write of
/// `object` of (`group`, `plural`) in a namespace holding `quotas`: every usage name of the
/// object that a limited entry matches must be limited by a quota that selects the object,
/// and every `matchScopes` requirement a pod meets must share its scope with a requirement of
/// some quota that the pod meets. The object's usage is taken at `now_unix_seconds`.
///
/// # Errors
/// The refusal.
pub fn uncovered(
    limited: &[LimitedResource],
    (group, plural): (&str, &str),
    (object, now_unix_seconds): (&Value, i64),
    quotas: &[&Value],
) -> Result<(), Uncovered> {
    let relevant: Vec<&LimitedResource> = limited
        .iter()
        .filter(|l| l.api_group == group && l.resource == plural)
        .collect();
    if relevant.is_empty() {
        return Ok(());
    }
    let usage = charges(group, plural, object, now_unix_seconds);
    let needed: BTreeSet<&str> = relevant
        .iter()
        .flat_map(|l| {
            let contains = &l.match_contains;
            usage
                .iter()
                .filter(|(_, amount)| **amount > Quantity::zero())
                .map(|(name, _)| name.as_str())
                .filter(move |name| contains.iter().any(|m| name.contains(m.as_str())))
        })
        .collect();
    let covered: BTreeSet<String> = quotas
        .iter()
        .filter(|quota| selects(quota, group, plural, object))
        .flat_map(|quota| limits(quota, group, plural))
        .map(|(name, _)| name)
        .collect();
    let missing: Vec<&str> = needed
        .into_iter()
        .filter(|name| !covered.contains(*name))
        .collect();
    if !missing.is_empty() {
        return Err(Uncovered::Resources(format!(
            "insufficient quota to consume: {}",
            missing.join(",")
        )));
    }
    if !(group.is_empty() && plural == "pods") {
        return Ok(());
    }
    let met: BTreeSet<&str> = quotas
        .iter()
        .flat_map(|quota| scope_requirements(quota))
        .filter(|requirement| meets(object, requirement))
        .map(|requirement| requirement.scope)
        .collect();
    let unmet: Vec<String> = relevant
        .iter()
        .flat_map(|l| l.match_scopes.iter().map(requirement_of))
        .filter(|requirement| meets(object, requirement) && !met.contains(requirement.scope))
        .map(|requirement| printed(&requirement))
        .collect();
    if unmet.is_empty() {
        Ok(())
    } else {
        Err(Uncovered::Scopes(format!(
            "insufficient quota to match these scopes: [{}]",
            unmet.join(" ")
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Limited resources need a covering quota, in kube's words; the configuration is read
    /// and validated as kube's.
    #[test]
    fn limited_resources_need_a_covering_quota() {
        let config = json!({"apiVersion": "apiserver.config.k8s.io/v1",
            "kind": "ResourceQuotaConfiguration", "limitedResources": [
                {"resource": "pods", "matchContains": ["cpu"],
                 "matchScopes": [{"scopeName": "PriorityClass", "operator": "In",
                    "values": ["high", "top"]}]},
                {"resource": "persistentvolumeclaims", "matchContains": ["storage"]}]});
        let limited = limited_resources(Some(&config)).unwrap();
        assert_eq!(limited.len(), 2);
        let pod = |class: &str| {
            json!({"spec": {"priorityClassName": class, "containers": [{"name": "c",
                "resources": {"requests": {"cpu": "1"}}}]}})
        };
        let pods = ("", "pods");
        assert_eq!(
            uncovered(&limited, pods, (&pod(""), 0), &[]),
            Err(Uncovered::Resources(
                "insufficient quota to consume: cpu,requests.cpu".to_owned()
            ))
        );
        let cpu = json!({"spec": {"hard": {"requests.cpu": "4", "cpu": "4"}}});
        assert_eq!(uncovered(&limited, pods, (&pod(""), 0), &[&cpu]), Ok(()));
        assert_eq!(
            uncovered(&limited, pods, (&pod("high"), 0), &[&cpu]),
            Err(Uncovered::Scopes(
                "insufficient quota to match these scopes: [{PriorityClass In [high top]}]"
                    .to_owned()
            ))
        );
        let scoped = json!({"spec": {"hard": {"pods": "4"}, "scopeSelector": {"matchExpressions":
            [{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}}});
        assert_eq!(
            uncovered(&limited, pods, (&pod("high"), 0), &[&cpu, &scoped]),
            Ok(())
        );
        // Other resources are not limited.
        let map = json!({"data": {}});
        assert_eq!(
            uncovered(&limited, ("", "configmaps"), (&map, 0), &[]),
            Ok(())
        );
        let bad = json!({"apiVersion": "resourcequota.admission.k8s.io/v1beta1",
            "kind": "Configuration", "limitedResources": [{"matchContains": ["x"]}, {}]});
        assert_eq!(
            limited_resources(Some(&bad)).unwrap_err(),
            "[limitedResources[0].resource: Required value, limitedResources[1].resource: Required value]"
        );
        assert!(
            limited_resources(Some(&json!({"apiVersion": "v1", "kind": "Configuration"})))
                .unwrap_err()
                .starts_with(r#"no kind "Configuration" is registered for version "/v1""#)
        );
    }

    /// Scopes select pods as kube's pod evaluator does, every requirement together, and no
    /// other object.
    #[test]
    fn scopes_select_pods() {
        let quota = |scopes: Value, selector: Value| {
            json!({"spec": {"hard": {"pods": "5"}, "scopes": scopes,
                "scopeSelector": {"matchExpressions": selector}}})
        };
        let container = |resources: Value| json!({"name": "c", "resources": resources});
        let pod = |spec: Value| json!({"spec": spec});
        let bare = pod(json!({"containers": [container(json!({}))]}));
        let sized = pod(json!({"containers": [container(json!({"requests": {"cpu": "100m"}}))]}));
        let zero = pod(json!({"containers": [container(json!({"limits": {"memory": "0"}}))]}));
        let init_sized = pod(json!({"containers": [container(json!({}))],
            "initContainers": [container(json!({"limits": {"memory": "1Gi"}}))]}));
        let gpu_only =
            pod(json!({"containers": [container(json!({"limits": {"example.com/gpu": "1"}}))]}));
        let deadline = pod(json!({"containers": [], "activeDeadlineSeconds": 30}));
        let high = pod(json!({"containers": [], "priorityClassName": "high"}));
        let cross = pod(json!({"containers": [], "affinity": {"podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1,
                "podAffinityTerm": {"topologyKey": "k", "namespaceSelector": {}}}]}}}));
        let near = pod(json!({"containers": [], "affinity": {"podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "k"}]}}}));

        let best_effort = quota(json!(["BestEffort"]), json!([]));
        for (object, selected) in [
            (&bare, true),
            (&zero, true),
            (&gpu_only, true),
            (&sized, false),
            (&init_sized, false),
        ] {
            assert_eq!(
                selects(&best_effort, "", "pods", object),
                selected,
                "{object}"
            );
        }
        let not_best_effort = quota(json!(["NotBestEffort"]), json!([]));
        assert!(selects(&not_best_effort, "", "pods", &sized));
        assert!(!selects(&not_best_effort, "", "pods", &bare));
        let terminating = quota(json!(["Terminating"]), json!([]));
        assert!(selects(&terminating, "", "pods", &deadline));
        assert!(!selects(&terminating, "", "pods", &bare));
        let not_terminating = quota(json!(["NotTerminating"]), json!([]));
        assert!(!selects(&not_terminating, "", "pods", &deadline));
        assert!(selects(&not_terminating, "", "pods", &bare));
        let cross_namespace = quota(json!(["CrossNamespacePodAffinity"]), json!([]));
        assert!(selects(&cross_namespace, "", "pods", &cross));
        assert!(!selects(&cross_namespace, "", "pods", &near));

        let class = |operator: &str, values: Value| {
            quota(
                json!([]),
                json!([{"scopeName": "PriorityClass", "operator": operator, "values": values}]),
            )
        };
        assert!(selects(
            &class("In", json!(["high", "low"])),
            "",
            "pods",
            &high
        ));
        assert!(!selects(&class("In", json!(["low"])), "", "pods", &high));
        assert!(selects(&class("NotIn", json!(["low"])), "", "pods", &high));
        assert!(selects(&class("NotIn", json!(["low"])), "", "pods", &bare));
        assert!(selects(&class("Exists", json!(null)), "", "pods", &high));
        assert!(!selects(&class("Exists", json!(null)), "", "pods", &bare));
        // Every requirement together: a best-effort pod of class high.
        let both = quota(
            json!(["BestEffort"]),
            json!([{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]),
        );
        assert!(selects(&both, "", "pods", &high));
        assert!(!selects(&both, "", "pods", &bare));
        // Scopes select no other object; unscoped quotas select everything.
        assert!(!selects(&best_effort, "", "configmaps", &json!({})));
        assert!(selects(
            &json!({"spec": {"hard": {"pods": "1"}}}),
            "",
            "configmaps",
            &json!({})
        ));
        assert!(is_scoped(&both) && !is_scoped(&json!({"spec": {"scopeSelector": null}})));
    }

    fn q(text: &str) -> Quantity {
        Quantity::parse(text).unwrap_or_else(|| panic!("{text} parses"))
    }

    #[test]
    fn quantities_parse_and_print_as_kube_does() {
        // (written, canonical) pairs from kube's quantity tests and common manifests.
        for (written, canonical) in [
            ("0", "0"),
            ("1", "1"),
            ("1000", "1k"),
            ("1500", "1500"),
            ("1.5", "1500m"),
            ("500m", "500m"),
            ("1000m", "1"),
            ("0.1", "100m"),
            (".5", "500m"),
            ("100Mi", "100Mi"),
            ("1024Mi", "1Gi"),
            ("1.5Gi", "1536Mi"),
            ("512", "512"),
            ("2048", "2048"),
            ("1Ki", "1Ki"),
            ("1k", "1k"),
            ("1M", "1M"),
            ("128974848", "128974848"),
            ("129e6", "129e6"),
            ("1e3", "1e3"),
            ("5n", "5n"),
            ("1.5u", "1500n"),
            ("2E", "2E"),
            ("-1", "-1"),
            ("+3", "3"),
        ] {
            assert_eq!(q(written).to_string(), canonical, "{written}");
        }
        assert_eq!(
            q("0.5Ki").to_string(),
            "512",
            "below 1024 falls back to decimal"
        );
        assert_eq!(q("1.1n"), q("2n"), "past a billionth rounds up");
        assert_eq!(q("1Gi"), q("1073741824"));
        assert!(q("1Gi") > q("1G"));
        assert_eq!(q("1e+3"), q("1k"));
        for bad in [
            "", "x", "1.2.3", "1Kb", "1e", "m", "--1", "1 Gi", "1e99", "1e3.5",
        ] {
            assert_eq!(Quantity::parse(bad), None, "{bad:?}");
        }
        // Sums keep their first term's format; a sum from zero takes the first term's.
        assert_eq!(q("128Mi").plus(q("128Mi")).to_string(), "256Mi");
        assert_eq!(q("100m").plus(q("1")).to_string(), "1100m");
        assert_eq!(Quantity::zero().plus(q("1Gi")).to_string(), "1Gi");
        assert_eq!(q("1").minus(q("2")).to_string(), "0");
    }

    #[test]
    fn names_and_resources_both_ways() {
        assert!(applies("", "configmaps", "count/configmaps"));
        assert!(applies("", "configmaps", "configmaps"));
        assert!(!applies("", "events", "events"));
        assert!(applies("apps", "deployments", "count/deployments.apps"));
        assert!(!applies("apps", "deployments", "requests.cpu"));
        for name in [
            "requests.cpu",
            "cpu",
            "limits.memory",
            "hugepages-2Mi",
            "requests.hugepages-2Mi",
            "requests.example.com/gpu",
        ] {
            assert!(applies("", "pods", name), "{name}");
            assert_eq!(
                charged_resource(name),
                Some((String::new(), "pods".to_owned()))
            );
        }
        for name in [
            "limits.example.com/gpu",
            "requests.kubernetes.io/x",
            "storage",
        ] {
            assert!(!applies("", "pods", name), "{name}");
        }
        for name in [
            "requests.storage",
            "gold.storageclass.storage.k8s.io/requests.storage",
            "gold.storageclass.storage.k8s.io/persistentvolumeclaims",
        ] {
            assert!(applies("", "persistentvolumeclaims", name), "{name}");
            assert_eq!(
                charged_resource(name),
                Some((String::new(), "persistentvolumeclaims".to_owned()))
            );
        }
        assert_eq!(
            charged_resource("count/deployments.apps"),
            Some(("apps".to_owned(), "deployments".to_owned()))
        );
        assert_eq!(
            charged_resource("services.nodeports"),
            Some((String::new(), "services".to_owned()))
        );
        assert_eq!(charged_resource("services.other"), None);
        let running = json!({"spec": {"containers": [{"resources": {"requests": {"cpu": "1"}}}]},
            "status": {"phase": "Running"}});
        assert_eq!(
            charges("", "pods", &running, 0).len(),
            4,
            "count/pods, pods, cpu, requests.cpu"
        );
        let mut done = running.clone();
        done["status"]["phase"] = json!("Succeeded");
        assert_eq!(
            charges("", "pods", &done, 0)
                .into_keys()
                .collect::<Vec<_>>(),
            ["count/pods"]
        );
        let failed_map = json!({"status": {"phase": "Failed"}});
        assert_eq!(charges("", "configmaps", &failed_map, 0).len(), 2);
    }

    /// kube's `QuotaV1Pod`: a terminating pod is charged until its `deletionTimestamp` plus
    /// `deletionGracePeriodSeconds`, then only `count/pods`.
    #[test]
    fn pods_terminating_past_their_grace_charge_only_their_count() {
        let at = 1_767_225_600; // 2026-01-01T00:00:00Z
        let terminating = json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z",
            "deletionGracePeriodSeconds": 30},
            "spec": {"containers": [{"resources": {"requests": {"cpu": "1"}}}]},
            "status": {"phase": "Running"}});
        assert_eq!(charges("", "pods", &terminating, at + 30).len(), 4);
        assert_eq!(
            charges("", "pods", &terminating, at + 31)
                .into_keys()
                .collect::<Vec<_>>(),
            ["count/pods"]
        );
        let mut no_period = terminating.clone();
        no_period["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("deletionGracePeriodSeconds");
        assert_eq!(charges("", "pods", &no_period, at + 3600).len(), 4);
    }

    #[test]
    fn services_charge_load_balancers_and_node_ports() {
        let service = |spec: Value| charges("", "services", &json!({"spec": spec}), 0);
        let two_ports = json!([{"port": 80}, {"port": 443, "nodePort": 30001}]);
        let lb = service(json!({"type": "LoadBalancer", "ports": two_ports}));
        assert_eq!(lb["services.loadbalancers"], Quantity::count(1));
        assert_eq!(lb["services.nodeports"], Quantity::count(2));
        assert_eq!(lb["count/services"], Quantity::count(1));
        let lb_without = service(json!({"type": "LoadBalancer", "ports": two_ports,
            "allocateLoadBalancerNodePorts": false}));
        assert_eq!(lb_without["services.nodeports"], Quantity::count(1));
        let node_port = service(json!({"type": "NodePort", "ports": two_ports}));
        assert_eq!(node_port["services.loadbalancers"], Quantity::count(0));
        assert_eq!(node_port["services.nodeports"], Quantity::count(2));
        assert_eq!(
            service(json!({"ports": two_ports}))["services.nodeports"],
            Quantity::count(0)
        );
    }

    #[test]
    fn pods_charge_as_kube_s_pod_requests_and_limits() {
        let container = |name: &str, requests: Value, limits: Value| json!({"name": name, "resources": {"requests": requests, "limits": limits}});
        let pod = json!({"spec": {
            "containers": [
                container("a", json!({"cpu": "100m", "memory": "128Mi"}), json!({"cpu": "200m"})),
                container("b", json!({"cpu": "200m", "memory": "128Mi", "example.com/gpu": "1",
                    "hugepages-2Mi": "4Mi"}), json!({"cpu": "1"})),
            ],
            "initContainers": [
                // Larger than the containers' sum: the pod requests at least this.
                container("setup", json!({"cpu": "500m"}), json!({})),
                // A sidecar: added to the sum, and counted under the init containers after it.
                {"name": "proxy", "restartPolicy": "Always",
                    "resources": {"requests": {"memory": "64Mi"}}},
                container("late", json!({"memory": "300Mi"}), json!({})),
            ],
            "overhead": {"cpu": "10m", "memory": "1Mi"},
        }});
        let charged = charges("", "pods", &pod, 0);
        let at = |name: &str| charged.get(name).map(ToString::to_string);
        assert_eq!(at("pods").as_deref(), Some("1"));
        assert_eq!(at("count/pods").as_deref(), Some("1"));
        // cpu: max(100m + 200m, 500m) + 10m overhead.
        assert_eq!(at("requests.cpu").as_deref(), Some("510m"));
        assert_eq!(at("cpu").as_deref(), Some("510m"));
        // memory: max(128Mi + 128Mi + 64Mi sidecar, 300Mi + 64Mi) + 1Mi.
        assert_eq!(at("requests.memory").as_deref(), Some("365Mi"));
        // limits: 200m + 1 (no overhead for memory, which has no limit).
        assert_eq!(at("limits.cpu").as_deref(), Some("1210m"));
        assert_eq!(at("limits.memory"), None);
        assert_eq!(at("requests.example.com/gpu").as_deref(), Some("1"));
        assert_eq!(at("hugepages-2Mi").as_deref(), Some("4Mi"));
        assert_eq!(at("requests.hugepages-2Mi").as_deref(), Some("4Mi"));
        assert_eq!(at("requests.ephemeral-storage"), None);
    }

    #[test]
    fn claims_charge_storage_by_class() {
        let claim = json!({"spec": {"storageClassName": "gold",
            "resources": {"requests": {"storage": "10Gi"}}}});
        let charged = charges("", "persistentvolumeclaims", &claim, 0);
        assert_eq!(charged["requests.storage"].to_string(), "10Gi");
        assert_eq!(
            charged["gold.storageclass.storage.k8s.io/requests.storage"].to_string(),
            "10Gi"
        );
        assert_eq!(
            charged["gold.storageclass.storage.k8s.io/persistentvolumeclaims"],
            Quantity::count(1)
        );
        assert_eq!(charged["persistentvolumeclaims"], Quantity::count(1));
        let annotated = json!({"metadata": {"annotations":
            {"volume.beta.kubernetes.io/storage-class": "silver"}},
            "spec": {"storageClassName": "gold"}});
        let charged = charges("", "persistentvolumeclaims", &annotated, 0);
        assert!(charged.contains_key("silver.storageclass.storage.k8s.io/persistentvolumeclaims"));
        assert!(!charged.contains_key("requests.storage"));
    }

    #[test]
    fn the_refusals_in_kube_apiserver_s_words() {
        let quota = json!({"spec": {"hard": {"count/configmaps": "2", "configmaps": "5", "requests.cpu": "1"}}});
        let found = limits(&quota, "", "configmaps");
        assert_eq!(found.len(), 2);
        let at = |n: i64| {
            BTreeMap::from([
                ("count/configmaps".to_owned(), Quantity::count(n)),
                ("configmaps".to_owned(), Quantity::count(n)),
            ])
        };
        assert_eq!(exceeded("q", &found, &at(1), &at(1)), None);
        assert_eq!(
            exceeded("q", &found, &at(2), &at(1)).unwrap(),
            "exceeded quota: q, requested: count/configmaps=1, used: count/configmaps=2, limited: count/configmaps=2"
        );
        assert_eq!(
            exceeded("q", &found, &at(5), &at(1)).unwrap(),
            "exceeded quota: q, requested: configmaps=1,count/configmaps=1, used: configmaps=5,count/configmaps=5, limited: configmaps=5,count/configmaps=2"
        );
        // A request that does not charge a limited name never fails on it.
        assert_eq!(exceeded("q", &found, &at(9), &BTreeMap::new()), None);
        let scoped = json!({"spec": {"hard": {"pods": "1"}, "scopes": ["BestEffort"]}});
        assert_eq!(limits(&scoped, "", "pods"), [("pods".to_owned(), q("1"))]);
        assert!(limits(&scoped, "", "configmaps").is_empty());

        let compute =
            json!({"spec": {"hard": {"requests.cpu": "1", "limits.memory": "1Gi", "pods": "10"}}});
        let found = limits(&compute, "", "pods");
        let used = BTreeMap::from([("requests.cpu".to_owned(), q("800m"))]);
        let requested = BTreeMap::from([
            ("requests.cpu".to_owned(), q("500m")),
            ("limits.memory".to_owned(), q("512Mi")),
        ]);
        assert_eq!(
            exceeded("compute", &found, &used, &requested).unwrap(),
            "exceeded quota: compute, requested: requests.cpu=500m, used: requests.cpu=800m, limited: requests.cpu=1"
        );
        let pod = json!({"spec": {"containers": [
            {"name": "app", "resources": {"requests": {"cpu": "1"}}},
            {"name": "log", "resources": {"limits": {"memory": "1Gi"}, "requests": {"cpu": "1"}}},
        ], "initContainers": [{"name": "init"}]}});
        assert_eq!(
            unstated("", "pods", &found, &pod).unwrap(),
            "must specify limits.memory for: app,init; requests.cpu for: init"
        );
        assert_eq!(unstated("", "configmaps", &found, &pod), None);
        let storage_only = limits(
            &json!({"spec": {"hard": {"requests.ephemeral-storage": "1Gi"}}}),
            "",
            "pods",
        );
        assert_eq!(
            unstated("", "pods", &storage_only, &pod),
            None,
            "only cpu and memory must be stated"
        );
    }

    #[test]
    fn the_controller_writes_as_its_service_account() {
        assert_eq!(
            CONTROLLER_USER,
            format!("system:serviceaccount:kube-system:{CONTROLLER}")
        );
    }

    #[test]
    fn status_as_the_controller_writes_it() {
        let quota = json!({"spec": {"hard": {"count/configmaps": "2", "requests.cpu": "1"}},
            "status": {"used": {"requests.cpu": "0", "gone": "3"}}});
        let used = BTreeMap::from([("count/configmaps".to_owned(), Quantity::count(1000))]);
        assert_eq!(
            with_status(quota, &used)["status"],
            json!({"hard": {"count/configmaps": "2", "requests.cpu": "1"},
                "used": {"count/configmaps": "1k", "requests.cpu": "0"}})
        );
    }
}

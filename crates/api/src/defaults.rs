//! Defaults of the built-in kinds, as kube-apiserver's defaulting functions
//! (`pkg/apis/{core,apps}/v1/defaults.go`) and create strategies set them.
//!
//! ## Guarantees
//! - A field is only ever *added* where the object leaves it out (absent or `null`; for the
//!   few fields whose Go defaulting reads a zero value as unset — a probe's periods and
//!   thresholds, a host port on the host network, an empty `httpGet` path or scheme, an empty
//!   field selector or role API group — that zero too); any other value the client sent is
//!   never changed. So defaulting is idempotent, and an object read back and written again is
//!   unchanged by it.
//! - The only removals: the pod spec fields whose feature gate is off by default in kube 1.33
//!   (`resourceClaims` and containers' `resources.claims` of `DynamicResourceAllocation`, the
//!   pod-level `resources` of `PodLevelResources`) are dropped from pods and templates, as
//!   kube's `dropDisabledPodFields` does, so they are neither validated nor stored.
//! - Pod-only defaults (`enableServiceLinks`, requests from limits, host ports on the host
//!   network) are a Pod's, never a template's, as kube's `SetDefaults_Pod`.
//! - Defaults are applied on every create and update (kube-apiserver defaults every decoded
//!   body), before validation and the generation check.
//! - Create-time status ([`create_status`]): a Pod without `status.phase` gets `Pending` and
//!   its QoS class; a Service without `status` gets `{"loadBalancer": {}}`. (kube-apiserver
//!   resets a created Pod's status whatever the client sent; this server keeps a status the
//!   client set, as it has no kubelet or controllers to set it later.)
//! - `metadata.generation` is kept only for the kinds whose kube-apiserver strategy keeps it
//!   ([`keeps_generation`]).
//!
//! The table is data: [`DEFAULTS`] lists `(kind, path, value)` rows; paths walk maps by key
//! (creating missing ones, as Go's nested structs always exist) and every item of an existing
//! list with `[]`.
//! Rules that depend on other fields (image pull policy, target port, requests from limits,
//! Service policies by type, a LimitRange's item defaults) are the few functions below the
//! table.
//!
//! Not done here: a Service's address fields (`clusterIP`, `clusterIPs`, `ipFamilies`,
//! `ipFamilyPolicy`: the server's Service registry fills them, knowing the service CIDRs and the
//! addresses in use), and admission plugins' additions (service account token volumes, default
//! tolerations, priority).

use serde_json::{Map, Value, json};

use crate::resources::ResourceDef;

/// Where the pod template's spec lives in each workload kind.
const POD_SPEC_PATHS: &[(&str, &str, &str)] = &[
    ("", "Pod", "spec"),
    ("apps", "Deployment", "spec.template.spec"),
    ("apps", "ReplicaSet", "spec.template.spec"),
    ("apps", "StatefulSet", "spec.template.spec"),
    ("apps", "DaemonSet", "spec.template.spec"),
    ("batch", "Job", "spec.template.spec"),
    ("batch", "CronJob", "spec.jobTemplate.spec.template.spec"),
    ("", "ReplicationController", "spec.template.spec"),
    ("", "PodTemplate", "template.spec"),
];

/// Defaults of a pod spec (`SetDefaults_PodSpec`, `SetDefaults_Container`, volume sources),
/// relative to the spec.
const POD_SPEC_DEFAULTS: &[(&str, &str)] = &[
    ("dnsPolicy", r#""ClusterFirst""#),
    ("restartPolicy", r#""Always""#),
    ("terminationGracePeriodSeconds", "30"),
    ("securityContext", "{}"),
    ("schedulerName", r#""default-scheduler""#),
    (
        "containers[].terminationMessagePath",
        r#""/dev/termination-log""#,
    ),
    ("containers[].terminationMessagePolicy", r#""File""#),
    ("containers[].resources", "{}"),
    ("containers[].ports[].protocol", r#""TCP""#),
    (
        "initContainers[].terminationMessagePath",
        r#""/dev/termination-log""#,
    ),
    ("initContainers[].terminationMessagePolicy", r#""File""#),
    ("initContainers[].resources", "{}"),
    ("initContainers[].ports[].protocol", r#""TCP""#),
    (
        "ephemeralContainers[].terminationMessagePath",
        r#""/dev/termination-log""#,
    ),
    (
        "ephemeralContainers[].terminationMessagePolicy",
        r#""File""#,
    ),
    ("ephemeralContainers[].resources", "{}"),
    ("ephemeralContainers[].ports[].protocol", r#""TCP""#),
    // A volume's source is a pointer in Go: defaulted where the volume has it, never made.
    ("volumes[].secret?.defaultMode", "420"),
    ("volumes[].configMap?.defaultMode", "420"),
    ("volumes[].projected?.defaultMode", "420"),
    ("volumes[].downwardAPI?.defaultMode", "420"),
];

/// Defaults of the kinds themselves (`SetDefaults_Deployment`, `SetDefaults_StatefulSet`, ...).
/// Values are JSON.
pub const DEFAULTS: &[(&str, &str, &str, &str)] = &[
    ("apps", "Deployment", "spec.replicas", "1"),
    (
        "apps",
        "Deployment",
        "spec.strategy.type",
        r#""RollingUpdate""#,
    ),
    ("apps", "Deployment", "spec.revisionHistoryLimit", "10"),
    ("apps", "Deployment", "spec.progressDeadlineSeconds", "600"),
    ("apps", "ReplicaSet", "spec.replicas", "1"),
    ("apps", "StatefulSet", "spec.replicas", "1"),
    (
        "apps",
        "StatefulSet",
        "spec.podManagementPolicy",
        r#""OrderedReady""#,
    ),
    (
        "apps",
        "StatefulSet",
        "spec.updateStrategy.type",
        r#""RollingUpdate""#,
    ),
    ("apps", "StatefulSet", "spec.revisionHistoryLimit", "10"),
    (
        "apps",
        "StatefulSet",
        "spec.persistentVolumeClaimRetentionPolicy",
        r#"{"whenDeleted":"Retain","whenScaled":"Retain"}"#,
    ),
    (
        "apps",
        "DaemonSet",
        "spec.updateStrategy.type",
        r#""RollingUpdate""#,
    ),
    ("apps", "DaemonSet", "spec.revisionHistoryLimit", "10"),
    ("", "ReplicationController", "spec.replicas", "1"),
    ("batch", "Job", "spec.parallelism", "1"),
    ("batch", "Job", "spec.backoffLimit", "6"),
    ("batch", "Job", "spec.completionMode", r#""NonIndexed""#),
    ("batch", "Job", "spec.suspend", "false"),
    ("batch", "CronJob", "spec.concurrencyPolicy", r#""Allow""#),
    ("batch", "CronJob", "spec.suspend", "false"),
    ("batch", "CronJob", "spec.successfulJobsHistoryLimit", "3"),
    ("batch", "CronJob", "spec.failedJobsHistoryLimit", "1"),
    (
        "",
        "PersistentVolumeClaim",
        "spec.volumeMode",
        r#""Filesystem""#,
    ),
    (
        "",
        "PersistentVolume",
        "spec.persistentVolumeReclaimPolicy",
        r#""Retain""#,
    ),
    ("", "PersistentVolume", "spec.volumeMode", r#""Filesystem""#),
    ("", "PersistentVolumeClaim", "status.phase", r#""Pending""#),
    ("", "PersistentVolume", "status.phase", r#""Pending""#),
    (
        "autoscaling",
        "HorizontalPodAutoscaler",
        "spec.minReplicas",
        "1",
    ),
    (
        "autoscaling",
        "HorizontalPodAutoscaler",
        "spec.metrics",
        r#"[{"type":"Resource","resource":{"name":"cpu","target":{"type":"Utilization","averageUtilization":80}}}]"#,
    ),
    (
        "storage.k8s.io",
        "StorageClass",
        "reclaimPolicy",
        r#""Delete""#,
    ),
    (
        "storage.k8s.io",
        "StorageClass",
        "volumeBindingMode",
        r#""Immediate""#,
    ),
    (
        "scheduling.k8s.io",
        "PriorityClass",
        "preemptionPolicy",
        r#""PreemptLowerPriority""#,
    ),
    (
        "networking.k8s.io",
        "NetworkPolicy",
        "spec.ingress[].ports[].protocol",
        r#""TCP""#,
    ),
    (
        "networking.k8s.io",
        "NetworkPolicy",
        "spec.egress[].ports[].protocol",
        r#""TCP""#,
    ),
    ("", "Service", "spec.type", r#""ClusterIP""#),
    ("", "Service", "spec.sessionAffinity", r#""None""#),
    ("", "Service", "spec.ports[].protocol", r#""TCP""#),
    ("", "Secret", "type", r#""Opaque""#),
    ("", "Endpoints", "subsets[].ports[].protocol", r#""TCP""#),
    (
        "discovery.k8s.io",
        "EndpointSlice",
        "ports[].protocol",
        r#""TCP""#,
    ),
    ("storage.k8s.io", "CSIDriver", "spec.attachRequired", "true"),
    (
        "storage.k8s.io",
        "CSIDriver",
        "spec.podInfoOnMount",
        "false",
    ),
    (
        "storage.k8s.io",
        "CSIDriver",
        "spec.storageCapacity",
        "false",
    ),
    (
        "storage.k8s.io",
        "CSIDriver",
        "spec.fsGroupPolicy",
        r#""ReadWriteOnceWithFSType""#,
    ),
    (
        "storage.k8s.io",
        "CSIDriver",
        "spec.requiresRepublish",
        "false",
    ),
    ("storage.k8s.io", "CSIDriver", "spec.seLinuxMount", "false"),
    (
        "admissionregistration.k8s.io",
        "ValidatingAdmissionPolicy",
        "spec.failurePolicy",
        r#""Fail""#,
    ),
];

/// The `rollingUpdate` defaults of a `RollingUpdate` strategy: `(group, kind, strategy path,
/// rollingUpdate value)`.
const ROLLING_UPDATE_DEFAULTS: &[(&str, &str, &str, &str)] = &[
    (
        "apps",
        "Deployment",
        "spec.strategy",
        r#"{"maxUnavailable":"25%","maxSurge":"25%"}"#,
    ),
    (
        "apps",
        "StatefulSet",
        "spec.updateStrategy",
        r#"{"partition":0}"#,
    ),
    (
        "apps",
        "DaemonSet",
        "spec.updateStrategy",
        r#"{"maxUnavailable":1,"maxSurge":0}"#,
    ),
];

/// Whether kube-apiserver keeps `metadata.generation` for this kind: the workloads, pods (since
/// v1.33), endpoint slices and every custom resource; not config maps, secrets, services,
/// namespaces, nodes, events, endpoints, service accounts or leases.
#[must_use]
pub fn keeps_generation(def: &ResourceDef) -> bool {
    if !def.is_builtin() {
        return true;
    }
    matches!(
        (def.group.as_str(), def.kind.as_str()),
        ("", "Pod" | "ReplicationController")
            | ("apps" | "batch" | "policy", _)
            | ("discovery.k8s.io", "EndpointSlice")
            | ("networking.k8s.io", "Ingress" | "NetworkPolicy")
    ) || crate::kinds::keeps_generation(def)
}

/// Places `value` at `path` (dotted keys, `[]` for every item of a list) under `object`
/// where it is absent or null. Missing or null maps on the way are created (Go's nested
/// structs always exist) unless the key ends in `?` (a pointer in Go: the default applies
/// only where the map is there), lists are never created, and a value of another type on the
/// way stops the default.
fn set_default(object: &mut Value, path: &str, value: &Value) {
    let mut segments = path.splitn(2, '.');
    let head = segments.next().unwrap_or("");
    let rest = segments.next();
    let (head, optional) = match head.strip_suffix('?') {
        Some(head) => (head, true),
        None => (head, false),
    };
    let (key, each) = match head.strip_suffix("[]") {
        Some(key) => (key, true),
        None => (head, false),
    };
    if optional && map_is_absent(object, key) {
        return;
    }
    let Value::Object(map) = object else {
        return;
    };
    match (rest, each) {
        (None, false) => {
            if map.get(key).is_none_or(Value::is_null) {
                map.insert(key.to_owned(), value.clone());
            }
        }
        (None, true) => {}
        (Some(rest), true) => {
            if let Some(Value::Array(items)) = map.get_mut(key) {
                for item in items {
                    set_default(item, rest, value);
                }
            }
        }
        (Some(rest), false) => {
            // Go's nested structs always exist, so missing maps on the way are created.
            let child = map
                .entry(key.to_owned())
                .or_insert_with(|| Value::Object(Map::new()));
            if child.is_null() {
                *child = Value::Object(Map::new());
            }
            set_default(child, rest, value);
        }
    }
}

/// Whether `object` has no map (nor anything else but null) under `key`.
fn map_is_absent(object: &Value, key: &str) -> bool {
    object.get(key).is_none_or(Value::is_null)
}

fn get_mut<'a>(object: &'a mut Value, path: &str) -> Option<&'a mut Value> {
    path.split('.')
        .try_fold(object, |value, key| value.as_object_mut()?.get_mut(key))
}

/// `Always` for an image tagged `latest` or not tagged, `IfNotPresent` otherwise (a digest
/// counts as a tag), as `SetDefaults_Container`.
fn image_pull_policy(image: &str) -> &'static str {
    if image.contains('@') {
        return "IfNotPresent";
    }
    let last = image.rsplit('/').next().unwrap_or(image);
    match last.rsplit_once(':') {
        Some((_, "latest")) | None => "Always",
        Some(_) => "IfNotPresent",
    }
}

/// Container rules that depend on other fields: image pull policy, and requests defaulted
/// from limits (`SetDefaults_Pod`).
/// A container's defaults; `pod` for a Pod's own containers and init containers, which
/// alone get requests from their limits (kube's `SetDefaults_Pod`, not its templates').
fn container_defaults(container: &mut Value, pod: bool) {
    let Value::Object(map) = container else {
        return;
    };
    if map.get("imagePullPolicy").is_none_or(Value::is_null)
        && let Some(image) = map.get("image").and_then(Value::as_str)
    {
        let policy = image_pull_policy(image);
        map.insert("imagePullPolicy".into(), Value::from(policy));
    }
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(Value::Object(probe)) = map.get_mut(probe) {
            // `SetDefaults_Probe`: Go's zero is unset.
            for (key, default) in [
                ("timeoutSeconds", 1),
                ("periodSeconds", 10),
                ("successThreshold", 1),
                ("failureThreshold", 3),
            ] {
                if probe
                    .get(key)
                    .is_none_or(|v| v.is_null() || v.as_i64() == Some(0))
                {
                    probe.insert(key.to_owned(), Value::from(default));
                }
            }
            http_get_defaults(probe.get_mut("httpGet"));
        }
    }
    for hook in ["postStart", "preStop"] {
        if let Some(handler) = map.get_mut("lifecycle").and_then(|l| l.get_mut(hook)) {
            http_get_defaults(handler.get_mut("httpGet"));
        }
    }
    for env in map
        .get_mut("env")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        field_ref_defaults(env.pointer_mut("/valueFrom/fieldRef"));
    }
    if !pod {
        return;
    }
    if let Some(Value::Object(resources)) = map.get_mut("resources")
        && let Some(Value::Object(limits)) = resources.get("limits").cloned()
    {
        let requests = resources
            .entry("requests")
            .or_insert_with(|| Value::Object(Map::new()));
        if requests.is_null() {
            *requests = Value::Object(Map::new());
        }
        if let Value::Object(requests) = requests {
            for (name, quantity) in limits {
                requests.entry(name).or_insert(quantity);
            }
        }
    }
}

/// Whether a string field Go defaults when it is empty is so (absent, `null` or `""`).
fn empty_text(value: &Value) -> bool {
    value.is_null() || value.as_str() == Some("")
}

/// `SetDefaults_HTTPGetAction`: path `/`, scheme `HTTP` where empty.
fn http_get_defaults(action: Option<&mut Value>) {
    if let Some(Value::Object(action)) = action {
        for (key, default) in [("path", "/"), ("scheme", "HTTP")] {
            if action.get(key).is_none_or(empty_text) {
                action.insert(key.to_owned(), Value::from(default));
            }
        }
    }
}

/// `SetDefaults_ObjectFieldSelector`: `apiVersion: v1` where empty.
fn field_ref_defaults(selector: Option<&mut Value>) {
    if let Some(Value::Object(selector)) = selector
        && selector.get("apiVersion").is_none_or(empty_text)
    {
        selector.insert("apiVersion".to_owned(), Value::from("v1"));
    }
}

/// A pod spec's defaults; `pod` for a Pod's own spec, which alone gets
/// `enableServiceLinks`, requests from limits and, on the host's network, host ports
/// (kube's `SetDefaults_Pod`: "only materializes in the Pod object", not in templates).
fn pod_spec_defaults(spec: &mut Value, pod: bool) {
    if !spec.is_object() {
        return;
    }
    drop_disabled_fields(spec);
    service_account_alias(spec);
    for (path, value) in POD_SPEC_DEFAULTS {
        let value: Value = serde_json::from_str(value).unwrap_or(Value::Null);
        set_default(spec, path, &value);
    }
    for list in ["containers", "initContainers", "ephemeralContainers"] {
        if let Some(Value::Array(containers)) = spec.get_mut(list) {
            let own = pod && list != "ephemeralContainers";
            containers
                .iter_mut()
                .for_each(|container| container_defaults(container, own));
        }
    }
    for volume in spec
        .get_mut("volumes")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        for item in volume
            .pointer_mut("/downwardAPI/items")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            field_ref_defaults(item.get_mut("fieldRef"));
        }
    }
    if !pod {
        return;
    }
    set_default(spec, "enableServiceLinks", &Value::Bool(true));
    if spec.get("hostNetwork").and_then(Value::as_bool) == Some(true) {
        // `defaultHostNetworkPorts`: a port's host port is its container port.
        for list in ["containers", "initContainers"] {
            for port in spec
                .get_mut(list)
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
                .filter_map(|c| c.get_mut("ports").and_then(Value::as_array_mut))
                .flatten()
            {
                if let Value::Object(port) = port
                    && port
                        .get("hostPort")
                        .is_none_or(|v| v.is_null() || v.as_i64() == Some(0))
                    && let Some(number) = port.get("containerPort").cloned()
                {
                    port.insert("hostPort".to_owned(), number);
                }
            }
        }
    }
}

/// kube's `v1.PodSpec` conversions (`pkg/apis/core/v1/conversion.go`): the deprecated
/// `serviceAccount` is an alias of `serviceAccountName`. Read in, it names the account only
/// when `serviceAccountName` is empty; written out, it repeats `serviceAccountName`. So a pod
/// spec (a pod's or a template's, e.g. after `kubectl set serviceaccount`) holds both, equal.
fn service_account_alias(spec: &mut Value) {
    let Some(map) = spec.as_object_mut() else {
        return;
    };
    let named = |key: &str| {
        map.get(key)
            .and_then(Value::as_str)
            .filter(|name| !name.is_empty())
            .map(str::to_owned)
    };
    if let Some(name) = named("serviceAccountName").or_else(|| named("serviceAccount")) {
        map.insert("serviceAccountName".to_owned(), Value::String(name.clone()));
        map.insert("serviceAccount".to_owned(), Value::String(name));
    }
}

/// kube 1.33's `dropDisabledPodFields` for the gates off by default there:
/// `DynamicResourceAllocation` (beta, off) drops `resourceClaims` and every container's
/// `resources.claims`; `PodLevelResources` (alpha) drops the pod-level `resources`. An old
/// object never holds them (they were dropped when it was written), so kube's "unless the
/// old object uses them" never applies.
fn drop_disabled_fields(spec: &mut Value) {
    let Some(map) = spec.as_object_mut() else {
        return;
    };
    map.remove("resourceClaims");
    map.remove("resources");
    for list in ["containers", "initContainers", "ephemeralContainers"] {
        for container in map
            .get_mut(list)
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            if let Some(resources) = container
                .get_mut("resources")
                .and_then(Value::as_object_mut)
            {
                resources.remove("claims");
            }
        }
    }
}

/// RoleBindings' and ClusterRoleBindings' defaults (`SetDefaults_RoleBinding`,
/// `SetDefaults_Subject`): the role's API group, and each user's or group's.
fn role_binding_defaults(object: &mut Value) {
    const RBAC: &str = "rbac.authorization.k8s.io";
    if let Some(Value::Object(role)) = object.get_mut("roleRef")
        && role.get("apiGroup").is_none_or(empty_text)
    {
        role.insert("apiGroup".to_owned(), Value::from(RBAC));
    }
    for subject in object
        .get_mut("subjects")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        let Value::Object(subject) = subject else {
            continue;
        };
        let group = match subject.get("kind").and_then(Value::as_str) {
            // A service account's group is `""`, which Go leaves out.
            Some("User" | "Group") => RBAC,
            _ => continue,
        };
        if subject.get("apiGroup").is_none_or(empty_text) {
            subject.insert("apiGroup".to_owned(), Value::from(group));
        }
    }
}

/// Service rules that depend on the type (`SetDefaults_Service`). The address fields
/// (`clusterIP`, `clusterIPs`, `ipFamilies`, `ipFamilyPolicy`) are not defaults: the Service
/// registry fills them on create and update, knowing the cluster's ranges (as kube-apiserver's
/// `normalizeClusterIPs` and `initIPFamilyFields` do).
fn service_defaults(object: &mut Value) {
    let Some(spec) = get_mut(object, "spec") else {
        return;
    };
    let service_type = spec
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP")
        .to_owned();
    if let Some(Value::Array(ports)) = spec.get_mut("ports") {
        for port in ports {
            if let Value::Object(port) = port
                && port
                    .get("targetPort")
                    .is_none_or(|t| t.is_null() || *t == json!(0))
                && let Some(number) = port.get("port").cloned()
            {
                port.insert("targetPort".into(), number);
            }
        }
    }
    let Value::Object(spec) = spec else {
        return;
    };
    if service_type == "ExternalName" {
        return;
    }
    spec.entry("internalTrafficPolicy")
        .or_insert_with(|| Value::from("Cluster"));
    if matches!(service_type.as_str(), "NodePort" | "LoadBalancer") {
        spec.entry("externalTrafficPolicy")
            .or_insert_with(|| Value::from("Cluster"));
    }
    if service_type == "LoadBalancer" {
        spec.entry("allocateLoadBalancerNodePorts")
            .or_insert(Value::Bool(true));
    }
    if spec.get("sessionAffinity").and_then(Value::as_str) == Some("ClientIP") {
        spec.entry("sessionAffinityConfig")
            .or_insert_with(|| json!({"clientIP": {"timeoutSeconds": 10800}}));
    }
}

/// Applies the defaults of `def`'s kind to `object` in place (built-in kinds only; custom
/// resources are left as they are).
pub fn apply_defaults(def: &ResourceDef, object: &mut Value) {
    if !def.is_builtin() || !object.is_object() {
        return;
    }
    let (group, kind) = (def.group.as_str(), def.kind.as_str());
    if (group, kind, def.version.as_str()) == ("autoscaling", "HorizontalPodAutoscaler", "v1") {
        // `autoscaling/v1`'s own defaults (the table's rows are v2's, the storage version's,
        // which the conversion to v2 meets: no metric is kube's implicit cpu target).
        set_default(object, "spec.minReplicas", &Value::from(1));
        return;
    }
    // Rules that read other fields first, before the table fills them.
    match (group, kind) {
        ("batch", "Job") => job_defaults(object),
        ("networking.k8s.io", "NetworkPolicy") => network_policy_defaults(object),
        ("", "LimitRange") => {
            if let Some(Value::Array(items)) = object.pointer_mut("/spec/limits") {
                items.iter_mut().for_each(limit_range_item_defaults);
            }
        }
        _ => {}
    }
    for (row_group, row_kind, path, value) in DEFAULTS {
        if *row_group == group && *row_kind == kind {
            let value: Value = serde_json::from_str(value).unwrap_or(Value::Null);
            set_default(object, path, &value);
        }
    }
    for (row_group, row_kind, strategy, value) in ROLLING_UPDATE_DEFAULTS {
        // The kind first: the strategy's path is built and read only for the rows' own kinds.
        if *row_group != group || *row_kind != kind {
            continue;
        }
        let rolling = get_mut(object, &format!("{strategy}.type"))
            .is_some_and(|t| t.as_str() == Some("RollingUpdate"));
        if rolling {
            let value: Value = serde_json::from_str(value).unwrap_or(Value::Null);
            set_default(object, &format!("{strategy}.rollingUpdate"), &value);
        }
    }
    if (group, kind) == ("", "Service") {
        service_defaults(object);
    }
    crate::kinds::apply_defaults(def, object);
    if group == "rbac.authorization.k8s.io" && matches!(kind, "RoleBinding" | "ClusterRoleBinding")
    {
        role_binding_defaults(object);
    }
    for (row_group, row_kind, path) in POD_SPEC_PATHS {
        if *row_group == group
            && *row_kind == kind
            && let Some(spec) = get_mut(object, path)
        {
            pod_spec_defaults(spec, (group, kind) == ("", "Pod"));
        }
    }
}

/// The object's `spec` map, created when absent or null (Go's nested structs always exist);
/// `None` when `spec` holds another type (the schema check reports it).
fn spec_map(object: &mut Value) -> Option<&mut Map<String, Value>> {
    let map = object.as_object_mut()?;
    let spec = map.entry("spec").or_insert(Value::Null);
    if spec.is_null() {
        *spec = json!({});
    }
    spec.as_object_mut()
}

/// `SetDefaults_Job`: `completions` is 1 when neither it nor `parallelism` is set; without a
/// `podFailurePolicy`, `podReplacementPolicy` is `TerminatingOrFailed` (`Failed` with one).
fn job_defaults(object: &mut Value) {
    // A Job without labels takes its pod template's (where its metadata is at hand: creates).
    let template_labels = object.pointer("/spec/template/metadata/labels").cloned();
    if let Some(Value::Object(labels)) = template_labels
        && let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut)
        && meta
            .get("labels")
            .and_then(Value::as_object)
            .is_none_or(Map::is_empty)
    {
        meta.insert("labels".to_owned(), Value::Object(labels));
    }
    let Some(spec) = spec_map(object) else {
        return;
    };
    let unset = |spec: &Map<String, Value>, key: &str| spec.get(key).is_none_or(Value::is_null);
    if unset(spec, "completions") && unset(spec, "parallelism") {
        spec.insert("completions".to_owned(), json!(1));
    }
    if unset(spec, "podReplacementPolicy") {
        let policy = if unset(spec, "podFailurePolicy") {
            "TerminatingOrFailed"
        } else {
            "Failed"
        };
        spec.insert("podReplacementPolicy".to_owned(), json!(policy));
    }
}

/// `SetDefaults_NetworkPolicy`: without `policyTypes`, `Ingress`, and `Egress` too when the
/// policy has egress rules.
fn network_policy_defaults(object: &mut Value) {
    let Some(spec) = spec_map(object) else {
        return;
    };
    if spec
        .get("policyTypes")
        .and_then(Value::as_array)
        .is_some_and(|types| !types.is_empty())
    {
        return;
    }
    let egress = spec
        .get("egress")
        .and_then(Value::as_array)
        .is_some_and(|rules| !rules.is_empty());
    let types = if egress {
        json!(["Ingress", "Egress"])
    } else {
        json!(["Ingress"])
    };
    spec.insert("policyTypes".to_owned(), types);
}

/// A Pod's QoS class (`qos.GetPodQOS`) over cpu and memory: `BestEffort` with no requests or
/// limits, `Guaranteed` when every container limits both and requests equal limits,
/// `Burstable` otherwise. Quantities are compared as written (after requests are defaulted
/// from limits), not by value.
#[must_use]
pub fn pod_qos_class(spec: &Value) -> &'static str {
    let mut any = false;
    let mut guaranteed = true;
    for list in ["containers", "initContainers"] {
        for container in spec
            .get(list)
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default()
        {
            let resources = container.get("resources");
            let side = |name: &str, resource: &str| {
                resources
                    .and_then(|r| r.get(name))
                    .and_then(|m| m.get(resource))
                    .filter(|v| !v.is_null())
            };
            for resource in ["cpu", "memory"] {
                let (request, limit) = (side("requests", resource), side("limits", resource));
                any |= request.is_some() || limit.is_some();
                if limit.is_none() || request != limit {
                    guaranteed = false;
                }
            }
        }
    }
    match (any, guaranteed) {
        (false, _) => "BestEffort",
        (true, true) => "Guaranteed",
        (true, false) => "Burstable",
    }
}

/// A LimitRange item's defaults (`SetDefaults_LimitRangeItem`), for `type: Container` only:
/// `default` from `max` where it has none, then `defaultRequest` from `default`, then from
/// `min`. Values are copied as written.
pub fn limit_range_item_defaults(item: &mut Value) {
    let Value::Object(item) = item else {
        return;
    };
    if item.get("type").and_then(Value::as_str) != Some("Container") {
        return;
    }
    let list = |item: &Map<String, Value>, field: &str| -> Map<String, Value> {
        item.get(field)
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default()
    };
    let (max, min) = (list(item, "max"), list(item, "min"));
    let mut default = list(item, "default");
    for (name, value) in max {
        default.entry(name).or_insert(value);
    }
    let mut default_request = list(item, "defaultRequest");
    for (name, value) in default.iter().chain(&min) {
        default_request
            .entry(name.clone())
            .or_insert_with(|| value.clone());
    }
    if !default.is_empty() {
        item.insert("default".to_owned(), Value::Object(default));
    }
    if !default_request.is_empty() {
        item.insert("defaultRequest".to_owned(), Value::Object(default_request));
    }
}

/// The status kube-apiserver gives a new object of this kind, filled in where the client left
/// it out: Pod `phase: Pending` and `qosClass`, Service `loadBalancer: {}`.
pub fn create_status(def: &ResourceDef, object: &mut Value) {
    if !def.is_builtin() || !def.group.is_empty() {
        return;
    }
    let Value::Object(map) = object else {
        return;
    };
    match def.kind.as_str() {
        "Pod" => {
            let qos = pod_qos_class(map.get("spec").unwrap_or(&Value::Null));
            let status = map
                .entry("status")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(status) = status {
                status
                    .entry("phase")
                    .or_insert_with(|| Value::from("Pending"));
                status.entry("qosClass").or_insert_with(|| Value::from(qos));
            }
        }
        "Service" => {
            let status = map
                .entry("status")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(status) = status {
                status
                    .entry("loadBalancer")
                    .or_insert_with(|| Value::Object(Map::new()));
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pull_policies() {
        assert_eq!(image_pull_policy("nginx"), "Always");
        assert_eq!(image_pull_policy("nginx:latest"), "Always");
        assert_eq!(image_pull_policy("nginx:1.25"), "IfNotPresent");
        assert_eq!(image_pull_policy("registry:5000/nginx"), "Always");
        assert_eq!(image_pull_policy("registry:5000/nginx:1"), "IfNotPresent");
        assert_eq!(image_pull_policy("nginx@sha256:abc"), "IfNotPresent");
    }

    #[test]
    fn set_default_never_overrides_and_creates_maps_not_lists() {
        let mut object = json!({"spec": {"replicas": 3, "ports": 5}});
        set_default(&mut object, "spec.replicas", &json!(1));
        set_default(&mut object, "spec.strategy.type", &json!("RollingUpdate"));
        set_default(&mut object, "spec.template.spec.dnsPolicy", &json!("x"));
        set_default(&mut object, "spec.containers[].image", &json!("x"));
        set_default(&mut object, "spec.ports.protocol", &json!("TCP"));
        // A pointer's default only where it is there.
        set_default(&mut object, "spec.secret?.defaultMode", &json!(420));
        set_default(
            &mut object,
            "spec.template?.spec.hostNetwork",
            &json!(false),
        );
        assert_eq!(
            object,
            json!({"spec": {"replicas": 3, "ports": 5, "strategy": {"type": "RollingUpdate"},
                            "template": {"spec": {"dnsPolicy": "x", "hostNetwork": false}}}})
        );
        let mut pod = json!({"spec": {"volumes": [{"name": "a", "emptyDir": {}},
            {"name": "b", "secret": {"secretName": "s"}}]}});
        set_default(&mut pod, "spec.volumes[].secret?.defaultMode", &json!(420));
        assert_eq!(
            pod["spec"]["volumes"],
            json!([{"name": "a", "emptyDir": {}},
                {"name": "b", "secret": {"secretName": "s", "defaultMode": 420}}])
        );
    }

    #[test]
    fn service_account_is_an_alias_of_service_account_name() {
        let alias = |spec: Value| {
            let mut spec = spec;
            service_account_alias(&mut spec);
            spec
        };
        assert_eq!(
            alias(json!({"serviceAccountName": "a"})),
            json!({"serviceAccountName": "a", "serviceAccount": "a"})
        );
        assert_eq!(
            alias(json!({"serviceAccount": "old"})),
            json!({"serviceAccountName": "old", "serviceAccount": "old"})
        );
        // The new field wins.
        assert_eq!(
            alias(json!({"serviceAccountName": "new", "serviceAccount": "old"})),
            json!({"serviceAccountName": "new", "serviceAccount": "new"})
        );
        assert_eq!(alias(json!({"dnsPolicy": "x"})), json!({"dnsPolicy": "x"}));
    }
}

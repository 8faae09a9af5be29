//! Defaults of the built-in kinds, as kube-apiserver 1.33's defaulting functions
//! (`pkg/apis/*/v1/defaults.go`, autoscaling's `v2`, with the nested defaulters each group's
//! `zz_generated.defaults.go` calls: every pod spec, container, probe, volume source and claim
//! spec wherever it is) and create strategies set them.
//!
//! ## Guarantees
//! - A field is only ever *added* where the object leaves it out (absent or `null`; where
//!   kube's Go defaulter tests a zero value — a string that is no pointer (`dnsPolicy`, a
//!   port's `protocol`, a Service's `type`, a strategy's `type`, ...), a list's length (an
//!   HPA's `metrics`, a NetworkPolicy's `policyTypes`), a probe's periods and thresholds, a
//!   host port on the host network, an empty `httpGet` path or scheme, field selector or role
//!   API group, a Service's target port `0` or `""` — that zero too); any other value the
//!   client sent is never changed. So defaulting is idempotent, and an object read back and
//!   written again is unchanged by it.
//! - The only removals and replacements: the pod spec fields whose feature gate is off by
//!   default in kube 1.33 (`resourceClaims` and containers' `resources.claims` of
//!   `DynamicResourceAllocation`, the pod-level `resources` of `PodLevelResources`, `image`
//!   volumes and their mounts of `ImageVolume`, projected volumes' `clusterTrustBundle`
//!   sources of `ClusterTrustBundleProjection`) are dropped from pods and templates, as
//!   kube's `dropDisabledPodFields` does, so they are neither validated nor stored (the
//!   documentation's image volume examples go in without their volume, as on a default kube
//!   1.33); `VolumeAttributesClass`'s `spec.volumeAttributesClassName` is dropped from
//!   PersistentVolumeClaims and PersistentVolumes likewise (claim templates, a StatefulSet's
//!   or an ephemeral volume's, keep it: not compared with kube here);
//!   a Service with `sessionAffinity: None` loses its
//!   `sessionAffinityConfig`, and one with `ClientIP` whose config has no timeout gets
//!   `{"clientIP": {"timeoutSeconds": 10800}}` in its place (`SetDefaults_Service`); a
//!   quantity in a resource list (containers' requests and limits, overhead, claims', nodes',
//!   quotas', LimitRanges', PersistentVolumes') finer than thousandths is rounded away from
//!   zero to them (`SetDefaults_ResourceList`: `0.0001` is `1m`).
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
//! (creating missing ones, as Go's nested structs always exist, but for a key ending in `?`,
//! a Go pointer) and every item of an existing list with `[]`. Shared parts are tables of
//! their own, applied wherever kube's generated defaulters call them: the pod spec's, volume
//! sources' (pods' volumes and PersistentVolumes), claim specs' (claims, StatefulSets' claim
//! templates, ephemeral volumes).
//! Rules that depend on other fields (image pull policy, target port, requests from limits,
//! Service policies by type, strategies' rolling updates, a Job's limits, a LimitRange's item
//! defaults, labels and selectors from templates) are the few functions below the tables.
//!
//! Feature gates as kube 1.33 ships them: `JobPodReplacementPolicy` and
//! `JobBackoffLimitPerIndex` on (`podReplacementPolicy`, the largest `backoffLimit` with a
//! limit per index); `StatefulSetAutoDeletePVC` on (the claim retention policy);
//! `ImageVolume`, `PodLevelResources`, `HPAConfigurableTolerance`, `ClusterTrustBundleProjection`
//! and `VolumeAttributesClass` off (no image volumes, pod-level requests, tolerance defaults,
//! trust bundle projections or volume attributes classes).
//!
//! Not done here: a Service's address fields (`clusterIP`, `clusterIPs`, `ipFamilies`,
//! `ipFamilyPolicy`: the server's Service registry fills them, knowing the service CIDRs and the
//! addresses in use), and admission plugins' additions (service account token volumes, default
//! tolerations, priority).

use serde_json::{Map, Value, json};

use crate::quantity::Quantity;
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
    ("dnsPolicy!", r#""ClusterFirst""#),
    ("restartPolicy!", r#""Always""#),
    ("terminationGracePeriodSeconds", "30"),
    ("securityContext", "{}"),
    ("schedulerName!", r#""default-scheduler""#),
    (
        "containers[].terminationMessagePath!",
        r#""/dev/termination-log""#,
    ),
    ("containers[].terminationMessagePolicy!", r#""File""#),
    ("containers[].resources", "{}"),
    ("containers[].ports[].protocol!", r#""TCP""#),
    (
        "initContainers[].terminationMessagePath!",
        r#""/dev/termination-log""#,
    ),
    ("initContainers[].terminationMessagePolicy!", r#""File""#),
    ("initContainers[].resources", "{}"),
    ("initContainers[].ports[].protocol!", r#""TCP""#),
    (
        "ephemeralContainers[].terminationMessagePath!",
        r#""/dev/termination-log""#,
    ),
    (
        "ephemeralContainers[].terminationMessagePolicy!",
        r#""File""#,
    ),
    ("ephemeralContainers[].resources", "{}"),
    ("ephemeralContainers[].ports[].protocol!", r#""TCP""#),
    // A volume's source is a pointer in Go: defaulted where the volume has it, never made.
    ("volumes[].secret?.defaultMode", "420"),
    ("volumes[].configMap?.defaultMode", "420"),
    ("volumes[].projected?.defaultMode", "420"),
    ("volumes[].downwardAPI?.defaultMode", "420"),
    (
        "volumes[].projected?.sources[].serviceAccountToken?.expirationSeconds",
        "3600",
    ),
];

/// Defaults of a PersistentVolumeClaim's spec (`SetDefaults_PersistentVolumeClaimSpec`),
/// wherever one is: a claim's, a StatefulSet's claim templates', a pod's ephemeral volumes'.
const CLAIM_SPEC_DEFAULTS: &[(&str, &str)] = &[("volumeMode", r#""Filesystem""#)];

/// Where kube's generated defaulters round resource lists (`SetDefaults_ResourceList`),
/// relative to a pod spec.
const POD_SPEC_RESOURCE_LISTS: &[&str] = &[
    "containers[].resources.limits",
    "containers[].resources.requests",
    "initContainers[].resources.limits",
    "initContainers[].resources.requests",
    "ephemeralContainers[].resources.limits",
    "ephemeralContainers[].resources.requests",
    "overhead",
    "volumes[].ephemeral.volumeClaimTemplate.spec.resources.limits",
    "volumes[].ephemeral.volumeClaimTemplate.spec.resources.requests",
];

/// The kinds' own resource lists kube rounds: `(group, kind, path)`.
const RESOURCE_LISTS: &[(&str, &str, &str)] = &[
    ("", "PersistentVolumeClaim", "spec.resources.limits"),
    ("", "PersistentVolumeClaim", "spec.resources.requests"),
    ("", "PersistentVolumeClaim", "status.capacity"),
    ("", "PersistentVolumeClaim", "status.allocatedResources"),
    (
        "apps",
        "StatefulSet",
        "spec.volumeClaimTemplates[].spec.resources.limits",
    ),
    (
        "apps",
        "StatefulSet",
        "spec.volumeClaimTemplates[].spec.resources.requests",
    ),
    ("", "PersistentVolume", "spec.capacity"),
    ("", "Node", "status.capacity"),
    ("", "Node", "status.allocatable"),
    ("", "ResourceQuota", "spec.hard"),
    ("", "ResourceQuota", "status.hard"),
    ("", "ResourceQuota", "status.used"),
    ("", "LimitRange", "spec.limits[].max"),
    ("", "LimitRange", "spec.limits[].min"),
    ("", "LimitRange", "spec.limits[].default"),
    ("", "LimitRange", "spec.limits[].defaultRequest"),
    ("", "LimitRange", "spec.limits[].maxLimitRequestRatio"),
];

/// Where claim specs are: `(group, kind, path of the spec)`; a pod spec's ephemeral volumes'
/// are [`pod_spec_defaults`]'s.
const CLAIM_SPEC_PATHS: &[(&str, &str, &str)] = &[
    ("", "PersistentVolumeClaim", "spec"),
    ("apps", "StatefulSet", "spec.volumeClaimTemplates[].spec"),
];

/// The defaults of the volume sources a PersistentVolume shares with pods' volumes (their
/// `+default` markers in `k8s.io/api/core/v1`, `SetDefaults_HostPathVolumeSource`), relative
/// to the source's parent (a PersistentVolume's `spec`, a pod volume).
const VOLUME_SOURCE_DEFAULTS: &[(&str, &str)] = &[
    ("hostPath?.type", r#""""#),
    ("iscsi?.iscsiInterface!", r#""default""#),
    ("rbd?.pool!", r#""rbd""#),
    ("rbd?.user!", r#""admin""#),
    ("rbd?.keyring!", r#""/etc/ceph/keyring""#),
    ("azureDisk?.cachingMode", r#""ReadWrite""#),
    ("azureDisk?.fsType", r#""ext4""#),
    ("azureDisk?.readOnly", "false"),
    ("azureDisk?.kind", r#""Shared""#),
    ("scaleIO?.storageMode!", r#""ThinProvisioned""#),
    ("scaleIO?.fsType!", r#""xfs""#),
];

/// Defaults of the kinds themselves (`SetDefaults_Deployment`, `SetDefaults_StatefulSet`, ...).
/// Values are JSON.
pub const DEFAULTS: &[(&str, &str, &str, &str)] = &[
    ("apps", "Deployment", "spec.replicas", "1"),
    (
        "apps",
        "Deployment",
        "spec.strategy.type!",
        r#""RollingUpdate""#,
    ),
    ("apps", "Deployment", "spec.revisionHistoryLimit", "10"),
    ("apps", "Deployment", "spec.progressDeadlineSeconds", "600"),
    ("apps", "ReplicaSet", "spec.replicas", "1"),
    ("apps", "StatefulSet", "spec.replicas", "1"),
    (
        "apps",
        "StatefulSet",
        "spec.podManagementPolicy!",
        r#""OrderedReady""#,
    ),
    ("apps", "StatefulSet", "spec.revisionHistoryLimit", "10"),
    // Each of the retention policy's fields on its own (`StatefulSetAutoDeletePVC`, on).
    (
        "apps",
        "StatefulSet",
        "spec.persistentVolumeClaimRetentionPolicy.whenDeleted!",
        r#""Retain""#,
    ),
    (
        "apps",
        "StatefulSet",
        "spec.persistentVolumeClaimRetentionPolicy.whenScaled!",
        r#""Retain""#,
    ),
    (
        "apps",
        "DaemonSet",
        "spec.updateStrategy.type!",
        r#""RollingUpdate""#,
    ),
    ("apps", "DaemonSet", "spec.revisionHistoryLimit", "10"),
    ("", "ReplicationController", "spec.replicas", "1"),
    ("batch", "Job", "spec.parallelism", "1"),
    ("batch", "Job", "spec.completionMode", r#""NonIndexed""#),
    ("batch", "Job", "spec.suspend", "false"),
    // Since kube 1.29 (kubernetes#120206): the selector is generated unless it is true.
    ("batch", "Job", "spec.manualSelector", "false"),
    ("batch", "CronJob", "spec.concurrencyPolicy!", r#""Allow""#),
    ("batch", "CronJob", "spec.suspend", "false"),
    ("batch", "CronJob", "spec.successfulJobsHistoryLimit", "3"),
    ("batch", "CronJob", "spec.failedJobsHistoryLimit", "1"),
    (
        "",
        "PersistentVolume",
        "spec.persistentVolumeReclaimPolicy!",
        r#""Retain""#,
    ),
    ("", "PersistentVolume", "spec.volumeMode", r#""Filesystem""#),
    ("", "PersistentVolumeClaim", "status.phase!", r#""Pending""#),
    // kube's `SetObjectDefaults_StatefulSet` gives each claim template a claim's defaults.
    (
        "apps",
        "StatefulSet",
        "spec.volumeClaimTemplates[].status.phase!",
        r#""Pending""#,
    ),
    ("", "PersistentVolume", "status.phase!", r#""Pending""#),
    (
        "autoscaling",
        "HorizontalPodAutoscaler",
        "spec.minReplicas",
        "1",
    ),
    (
        "autoscaling",
        "HorizontalPodAutoscaler",
        "spec.metrics!",
        r#"[{"type":"Resource","resource":{"name":"cpu","target":{"type":"Utilization","averageUtilization":80}}}]"#,
    ),
    // `SetDefaults_HorizontalPodAutoscalerBehavior`: a behavior's rules left out are kube's
    // (scale-down's stabilization window is left out: the controller's flag decides it).
    (
        "autoscaling",
        "HorizontalPodAutoscaler",
        "spec.behavior?.scaleUp.stabilizationWindowSeconds",
        "0",
    ),
    (
        "autoscaling",
        "HorizontalPodAutoscaler",
        "spec.behavior?.scaleUp.selectPolicy",
        r#""Max""#,
    ),
    (
        "autoscaling",
        "HorizontalPodAutoscaler",
        "spec.behavior?.scaleUp.policies",
        r#"[{"type":"Pods","value":4,"periodSeconds":15},{"type":"Percent","value":100,"periodSeconds":15}]"#,
    ),
    (
        "autoscaling",
        "HorizontalPodAutoscaler",
        "spec.behavior?.scaleDown.selectPolicy",
        r#""Max""#,
    ),
    (
        "autoscaling",
        "HorizontalPodAutoscaler",
        "spec.behavior?.scaleDown.policies",
        r#"[{"type":"Percent","value":100,"periodSeconds":15}]"#,
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
    // `SetDefaults_ServiceReference` of kube-aggregator's `v1` (a pointer: only when sent).
    (
        "apiregistration.k8s.io",
        "APIService",
        "spec.service?.port",
        "443",
    ),
    ("", "Service", "spec.type!", r#""ClusterIP""#),
    ("", "Service", "spec.sessionAffinity!", r#""None""#),
    ("", "Service", "spec.ports[].protocol!", r#""TCP""#),
    ("", "Secret", "type!", r#""Opaque""#),
    ("", "Endpoints", "subsets[].ports[].protocol!", r#""TCP""#),
    ("discovery.k8s.io", "EndpointSlice", "ports[].name", r#""""#),
    (
        "networking.k8s.io",
        "IngressClass",
        "spec.parameters?.scope",
        r#""Cluster""#,
    ),
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

/// The `rollingUpdate` defaults of a `RollingUpdate` strategy, each field on its own (kube's
/// `SetDefaults_Deployment` and `SetDefaults_DaemonSet` fill each field left out, whatever
/// else `rollingUpdate` holds): `(group, kind, strategy path, field, value)`. A StatefulSet's
/// are [`stateful_set_strategy`]'s.
const ROLLING_UPDATE_DEFAULTS: &[(&str, &str, &str, &str, &str)] = &[
    (
        "apps",
        "Deployment",
        "spec.strategy",
        "maxUnavailable",
        r#""25%""#,
    ),
    (
        "apps",
        "Deployment",
        "spec.strategy",
        "maxSurge",
        r#""25%""#,
    ),
    (
        "apps",
        "DaemonSet",
        "spec.updateStrategy",
        "maxUnavailable",
        "1",
    ),
    ("apps", "DaemonSet", "spec.updateStrategy", "maxSurge", "0"),
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
/// way stops the default. A last key ending in `!` is one whose Go defaulter tests its zero
/// value (`== ""` on a string that is no pointer, `len(..) == 0` on a list): an empty string
/// or list there is replaced too.
fn set_default(object: &mut Value, path: &str, value: &Value) {
    let mut segments = path.splitn(2, '.');
    let head = segments.next().unwrap_or("");
    let rest = segments.next();
    let (head, optional) = match head.strip_suffix('?') {
        Some(head) => (head, true),
        None => (head, false),
    };
    let (head, zero_unset) = match head.strip_suffix('!') {
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
            let empty =
                |v: &Value| v.as_str() == Some("") || v.as_array().is_some_and(Vec::is_empty);
            let unset = |v: &Value| v.is_null() || (zero_unset && empty(v));
            if map.get(key).is_none_or(unset) {
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

/// Calls `f` on each value at `path` (dotted keys, `[]` for every item of a list) that is
/// there; nothing is created.
fn for_each_at(value: &mut Value, path: &str, f: &mut dyn FnMut(&mut Value)) {
    let (head, rest) = match path.split_once('.') {
        Some((head, rest)) => (head, Some(rest)),
        None => (path, None),
    };
    let (key, each) = match head.strip_suffix("[]") {
        Some(key) => (key, true),
        None => (head, false),
    };
    let Some(child) = value.as_object_mut().and_then(|map| map.get_mut(key)) else {
        return;
    };
    let mut visit = |item: &mut Value| match rest {
        Some(rest) => for_each_at(item, rest, f),
        None => f(item),
    };
    if !each {
        visit(child);
    } else if let Value::Array(items) = child {
        items.iter_mut().for_each(visit);
    }
}

/// `SetDefaults_ResourceList`: each quantity of a resource list rounded away from zero to
/// thousandths (`0.0001` is `1m`); quantities already whole thousandths, and anything that
/// is no quantity, are left as sent.
fn round_resource_list(list: &mut Value) {
    let Value::Object(list) = list else {
        return;
    };
    for quantity in list.values_mut() {
        let text = match quantity {
            Value::String(text) => text.clone(),
            Value::Number(number) => number.to_string(),
            _ => continue,
        };
        if let Some(rounded) = Quantity::parse(&text).and_then(Quantity::rounded_to_milli) {
            *quantity = Value::String(rounded.to_string());
        }
    }
}

fn get_mut<'a>(object: &'a mut Value, path: &str) -> Option<&'a mut Value> {
    path.split('.')
        .try_fold(object, |value, key| value.as_object_mut()?.get_mut(key))
}

/// `Always` for an image tagged `latest`, or with neither tag nor digest; `IfNotPresent`
/// otherwise, as `SetDefaults_Container` (`parsers.ParseImageName`: `name:latest@digest` is
/// tagged `latest`, `name@digest` has no tag).
fn image_pull_policy(image: &str) -> &'static str {
    let (name, digest) = match image.split_once('@') {
        Some((name, _)) => (name, true),
        None => (image, false),
    };
    let last = name.rsplit('/').next().unwrap_or(name);
    match last.rsplit_once(':') {
        Some((_, "latest")) => "Always",
        None if !digest => "Always",
        _ => "IfNotPresent",
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
            // `GRPCAction.Service`'s `+default=""`.
            if let Some(Value::Object(grpc)) = probe.get_mut("grpc")
                && grpc.get("service").is_none_or(Value::is_null)
            {
                grpc.insert("service".to_owned(), Value::from(""));
            }
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

/// Applies `rows` (`(path, JSON value)`, as [`set_default`] reads them) under `prefix` (a
/// path of the same form, or `""` for `object` itself).
fn apply_rows(object: &mut Value, prefix: &str, rows: &[(&str, &str)]) {
    for (path, value) in rows {
        let value: Value = serde_json::from_str(value).unwrap_or(Value::Null);
        if prefix.is_empty() {
            set_default(object, path, &value);
        } else {
            set_default(object, &format!("{prefix}.{path}"), &value);
        }
    }
}

/// A pod volume's defaults (`SetDefaults_Volume` and the nested defaulters kube's
/// `zz_generated.defaults.go` calls on each volume): a volume naming no source is an
/// `emptyDir`; its source's defaults ([`VOLUME_SOURCE_DEFAULTS`], the table's `volumes[]`
/// rows); an ephemeral volume's claim spec ([`CLAIM_SPEC_DEFAULTS`]); the `fieldRef`s of
/// downward API items, in a `downwardAPI` volume or a projected one's sources.
fn volume_defaults(volume: &mut Value) {
    let Value::Object(map) = volume else {
        return;
    };
    if map
        .iter()
        .all(|(key, value)| key == "name" || value.is_null())
    {
        map.insert("emptyDir".to_owned(), json!({}));
    }
    apply_rows(volume, "", VOLUME_SOURCE_DEFAULTS);
    apply_rows(
        volume,
        "ephemeral?.volumeClaimTemplate?.spec",
        CLAIM_SPEC_DEFAULTS,
    );
    for source in volume
        .pointer_mut("/projected/sources")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        if let Some(items) = source.get_mut("downwardAPI") {
            downward_api_items(items);
        }
    }
    if let Some(own) = volume.get_mut("downwardAPI") {
        downward_api_items(own);
    }
}

/// `SetDefaults_ObjectFieldSelector` on each item of a downward API source.
fn downward_api_items(source: &mut Value) {
    for item in source
        .get_mut("items")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        field_ref_defaults(item.get_mut("fieldRef"));
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
    apply_rows(spec, "", POD_SPEC_DEFAULTS);
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
        volume_defaults(volume);
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
/// `resources.claims`; `PodLevelResources` (alpha) drops the pod-level `resources`;
/// `ImageVolume` (beta, off) drops every `image` volume and the containers' mounts of it
/// (`dropImageVolumes`); `ClusterTrustBundleProjection` (beta, off) drops the
/// `clusterTrustBundle` of every projected volume's sources, leaving the source empty
/// (`dropDisabledClusterTrustBundleProjection`). An old object never holds them (they were
/// dropped when it was written), so kube's "unless the old object uses them" never applies.
/// Differs from kube: an object stored by an earlier version of this server, which kept
/// image volumes and trust bundle projections, loses them on its next update (kube keeps
/// what the old object uses), and a Pod's update is then refused as a spec change.
fn drop_disabled_fields(spec: &mut Value) {
    let Some(map) = spec.as_object_mut() else {
        return;
    };
    map.remove("resourceClaims");
    map.remove("resources");
    let mut image_volumes = Vec::new();
    if let Some(Value::Array(volumes)) = map.get_mut("volumes") {
        volumes.retain(|volume| {
            let image = volume.get("image").is_some_and(|source| !source.is_null());
            if image && let Some(name) = volume.get("name").and_then(Value::as_str) {
                image_volumes.push(name.to_owned());
            }
            !image
        });
        for source in volumes
            .iter_mut()
            .filter_map(|volume| volume.pointer_mut("/projected/sources"))
            .filter_map(Value::as_array_mut)
            .flatten()
        {
            if let Value::Object(source) = source {
                source.remove("clusterTrustBundle");
            }
        }
    }
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
            if !image_volumes.is_empty()
                && let Some(Value::Array(mounts)) = container.get_mut("volumeMounts")
            {
                mounts.retain(|mount| {
                    mount
                        .get("name")
                        .and_then(Value::as_str)
                        .is_none_or(|name| !image_volumes.iter().any(|image| image == name))
                });
            }
        }
    }
}

/// kube 1.33's `DropDisabledFields` of claims (`pkg/api/persistentvolumeclaim`) and
/// `DropDisabledSpecFields` of volumes (`pkg/api/persistentvolume`): `VolumeAttributesClass`
/// (beta, off) drops `spec.volumeAttributesClassName`. An old object never holds it (it was
/// dropped when it was written).
fn drop_volume_attributes_class(object: &mut Value) {
    if let Some(Value::Object(spec)) = object.get_mut("spec") {
        spec.remove("volumeAttributesClassName");
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

/// Service rules that depend on the type (`SetDefaults_Service`), after the table has set
/// `type` and `sessionAffinity`: with affinity `None`, no `sessionAffinityConfig`; with
/// `ClientIP` and no timeout, the 10800 s one; a port's target port (unset, 0 or `""`) is its
/// port; an externally accessible Service (`NodePort`, `LoadBalancer`, or `ClusterIP` with
/// external IPs) gets `externalTrafficPolicy: Cluster`; `ClusterIP`, `NodePort` and
/// `LoadBalancer` get `internalTrafficPolicy: Cluster`; a `LoadBalancer` gets
/// `allocateLoadBalancerNodePorts: true` and its status ingresses with an IP `ipMode: VIP`.
/// The address fields (`clusterIP`, `clusterIPs`, `ipFamilies`, `ipFamilyPolicy`) are not
/// defaults: the Service registry fills them on create and update, knowing the cluster's
/// ranges (as kube-apiserver's `normalizeClusterIPs` and `initIPFamilyFields` do).
fn service_defaults(object: &mut Value) {
    let Some(Value::Object(spec)) = object.get_mut("spec") else {
        return;
    };
    let service_type = spec
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP")
        .to_owned();
    let unset = |map: &Map<String, Value>, key: &str| map.get(key).is_none_or(Value::is_null);
    match spec.get("sessionAffinity").and_then(Value::as_str) {
        Some("None") => {
            spec.remove("sessionAffinityConfig");
        }
        Some("ClientIP")
            if spec
                .get("sessionAffinityConfig")
                .and_then(|c| c.get("clientIP"))
                .and_then(|c| c.get("timeoutSeconds"))
                .is_none_or(Value::is_null) =>
        {
            spec.insert(
                "sessionAffinityConfig".to_owned(),
                json!({"clientIP": {"timeoutSeconds": 10800}}),
            );
        }
        _ => {}
    }
    if let Some(Value::Array(ports)) = spec.get_mut("ports") {
        for port in ports {
            if let Value::Object(port) = port
                && port
                    .get("targetPort")
                    .is_none_or(|t| t.is_null() || *t == json!(0) || *t == json!(""))
                && let Some(number) = port.get("port").cloned()
            {
                port.insert("targetPort".into(), number);
            }
        }
    }
    let external_ips = spec
        .get("externalIPs")
        .and_then(Value::as_array)
        .is_some_and(|ips| !ips.is_empty());
    let externally_accessible = matches!(service_type.as_str(), "NodePort" | "LoadBalancer")
        || (service_type == "ClusterIP" && external_ips);
    if externally_accessible && spec.get("externalTrafficPolicy").is_none_or(empty_text) {
        spec.insert("externalTrafficPolicy".to_owned(), json!("Cluster"));
    }
    if matches!(
        service_type.as_str(),
        "ClusterIP" | "NodePort" | "LoadBalancer"
    ) && unset(spec, "internalTrafficPolicy")
    {
        spec.insert("internalTrafficPolicy".to_owned(), json!("Cluster"));
    }
    if service_type != "LoadBalancer" {
        return;
    }
    if unset(spec, "allocateLoadBalancerNodePorts") {
        spec.insert("allocateLoadBalancerNodePorts".to_owned(), json!(true));
    }
    for ingress in object
        .pointer_mut("/status/loadBalancer/ingress")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        if let Value::Object(ingress) = ingress
            && ingress
                .get("ip")
                .and_then(Value::as_str)
                .is_some_and(|ip| !ip.is_empty())
            && unset(ingress, "ipMode")
        {
            ingress.insert("ipMode".to_owned(), json!("VIP"));
        }
    }
}

/// `SetDefaults_StatefulSet`'s strategy: with no type, `RollingUpdate` and an empty
/// `rollingUpdate` where it has none; then a `RollingUpdate` strategy's `rollingUpdate`, where
/// there is one, gets `partition: 0` (a strategy sent as `type: RollingUpdate` alone stays
/// without one, as in kube).
fn stateful_set_strategy(object: &mut Value) {
    let Some(spec) = spec_map(object) else {
        return;
    };
    let strategy = spec.entry("updateStrategy").or_insert(Value::Null);
    if strategy.is_null() {
        *strategy = json!({});
    }
    let Value::Object(strategy) = strategy else {
        return;
    };
    if strategy.get("type").is_none_or(empty_text) {
        strategy.insert("type".to_owned(), json!("RollingUpdate"));
        let rolling = strategy.entry("rollingUpdate").or_insert(Value::Null);
        if rolling.is_null() {
            *rolling = json!({});
        }
    }
    if strategy.get("type").and_then(Value::as_str) == Some("RollingUpdate")
        && let Some(Value::Object(rolling)) = strategy.get_mut("rollingUpdate")
        && rolling.get("partition").is_none_or(Value::is_null)
    {
        rolling.insert("partition".to_owned(), json!(0));
    }
}

/// Whether a map field is unset as Go's `len(map) == 0` reads it: absent, null or `{}`.
fn empty_map(value: Option<&Value>) -> bool {
    value.is_none_or(|v| v.is_null() || v.as_object().is_some_and(Map::is_empty))
}

/// A Job's or ReplicationController's labels, when it has none, are its pod template's
/// (`SetDefaults_Job`, `SetDefaults_ReplicationController`: where the template has labels,
/// `{}` included, as Go's non-nil map).
fn labels_from_template(object: &mut Value) {
    let template_labels = object.pointer("/spec/template/metadata/labels").cloned();
    if let Some(Value::Object(labels)) = template_labels
        && let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut)
        && empty_map(meta.get("labels"))
    {
        meta.insert("labels".to_owned(), Value::Object(labels));
    }
}

/// `SetDefaults_ReplicationController`: where the template has labels, they are the
/// selector when it has none, and the controller's labels when it has none.
fn replication_controller_defaults(object: &mut Value) {
    let template_labels = object.pointer("/spec/template/metadata/labels").cloned();
    let Some(Value::Object(labels)) = template_labels else {
        return;
    };
    if let Some(Value::Object(spec)) = object.get_mut("spec")
        && empty_map(spec.get("selector"))
    {
        spec.insert("selector".to_owned(), Value::Object(labels));
    }
    labels_from_template(object);
}

/// `SetDefaults_NodeStatus`: a status with a capacity and no allocatable resources can
/// allocate its capacity.
fn node_defaults(object: &mut Value) {
    if let Some(Value::Object(status)) = object.get_mut("status")
        && status.get("allocatable").is_none_or(Value::is_null)
        && let Some(capacity) = status.get("capacity").filter(|c| !empty_map(Some(c)))
    {
        let capacity = capacity.clone();
        status.insert("allocatable".to_owned(), capacity);
    }
}

/// A stored object as kube-apiserver reads it for an update's validation: kube defaults what
/// it decodes, so an object written before a default existed compares as if it had it. Only
/// the kinds whose update rules compare whole specs with the stored one (StatefulSets' and
/// Jobs', `kinds::apps`, `kinds::batch`) pay for the copy; others are handed over as stored.
#[must_use]
pub fn stored_as_read<'a>(def: &ResourceDef, old: &'a Value) -> std::borrow::Cow<'a, Value> {
    match (def.group.as_str(), def.kind.as_str()) {
        ("apps", "StatefulSet") | ("batch", "Job") => {
            let mut old = old.clone();
            apply_defaults(def, &mut old);
            std::borrow::Cow::Owned(old)
        }
        _ => std::borrow::Cow::Borrowed(old),
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
        ("apps", "StatefulSet") => stateful_set_strategy(object),
        ("", "ReplicationController") => replication_controller_defaults(object),
        ("", "Node") => node_defaults(object),
        ("", "PersistentVolume") => {
            drop_volume_attributes_class(object);
            if let Some(spec) = object.get_mut("spec") {
                apply_rows(spec, "", VOLUME_SOURCE_DEFAULTS);
            }
        }
        ("", "PersistentVolumeClaim") => drop_volume_attributes_class(object),
        ("networking.k8s.io", "NetworkPolicy") => network_policy_defaults(object),
        ("", "LimitRange") => {
            if let Some(Value::Array(items)) = object.pointer_mut("/spec/limits") {
                items.iter_mut().for_each(limit_range_item_defaults);
            }
        }
        _ => {}
    }
    let rows = KindRows::of(group, kind);
    for (path, value) in &rows.defaults {
        set_default(object, path, value);
    }
    for path in &rows.claim_specs {
        apply_rows(object, path, CLAIM_SPEC_DEFAULTS);
    }
    for (strategy, field, value) in &rows.rolling_updates {
        let rolling = get_mut(object, &format!("{strategy}.type"))
            .is_some_and(|t| t.as_str() == Some("RollingUpdate"));
        if rolling {
            set_default(object, &format!("{strategy}.rollingUpdate.{field}"), value);
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
    for path in &rows.pod_specs {
        if let Some(spec) = get_mut(object, path) {
            pod_spec_defaults(spec, (group, kind) == ("", "Pod"));
            for list in POD_SPEC_RESOURCE_LISTS {
                for_each_at(spec, list, &mut round_resource_list);
            }
        }
    }
    // Last, as kube's generated defaulters round after the kinds' own copies (requests from
    // limits, allocatable from capacity, a LimitRange's defaults from its bounds).
    for path in &rows.resource_lists {
        for_each_at(object, path, &mut round_resource_list);
    }
}

/// One kind's rows of the tables above, their values parsed: built once, so a write reads
/// its kind's rows without scanning every table (most kinds, a ConfigMap's among them, have
/// none).
#[derive(Default)]
struct KindRows {
    /// [`DEFAULTS`]: `(path, value)`.
    defaults: Vec<(&'static str, Value)>,
    /// [`CLAIM_SPEC_PATHS`]' paths.
    claim_specs: Vec<&'static str>,
    /// [`ROLLING_UPDATE_DEFAULTS`]: `(strategy path, field, value)`.
    rolling_updates: Vec<(&'static str, &'static str, Value)>,
    /// [`POD_SPEC_PATHS`]' paths.
    pod_specs: Vec<&'static str>,
    /// [`RESOURCE_LISTS`]' paths.
    resource_lists: Vec<&'static str>,
}

impl KindRows {
    fn of<'a>(group: &'a str, kind: &'a str) -> &'a KindRows {
        type Index = std::collections::HashMap<(&'static str, &'static str), KindRows>;
        static INDEX: std::sync::OnceLock<Index> = std::sync::OnceLock::new();
        static NONE: KindRows = KindRows {
            defaults: Vec::new(),
            claim_specs: Vec::new(),
            rolling_updates: Vec::new(),
            pod_specs: Vec::new(),
            resource_lists: Vec::new(),
        };
        let index = INDEX.get_or_init(|| {
            let mut index = Index::new();
            let parse = |value: &str| serde_json::from_str(value).unwrap_or(Value::Null);
            for (group, kind, path, value) in DEFAULTS {
                let rows = index.entry((group, kind)).or_default();
                rows.defaults.push((path, parse(value)));
            }
            for (group, kind, path) in CLAIM_SPEC_PATHS {
                index
                    .entry((group, kind))
                    .or_default()
                    .claim_specs
                    .push(path);
            }
            for (group, kind, strategy, field, value) in ROLLING_UPDATE_DEFAULTS {
                let rows = index.entry((group, kind)).or_default();
                rows.rolling_updates.push((strategy, field, parse(value)));
            }
            for (group, kind, path) in POD_SPEC_PATHS {
                index.entry((group, kind)).or_default().pod_specs.push(path);
            }
            for (group, kind, path) in RESOURCE_LISTS {
                index
                    .entry((group, kind))
                    .or_default()
                    .resource_lists
                    .push(path);
            }
            index
        });
        index.get(&(group, kind)).unwrap_or(&NONE)
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

/// `SetDefaults_Job`: `completions` is 1 when neither it nor `parallelism` is set;
/// `backoffLimit` 6 (the largest int32 with `backoffLimitPerIndex`); the failure policy's
/// condition patterns' `status` `True`; without a `podFailurePolicy`, `podReplacementPolicy`
/// is `TerminatingOrFailed` (`Failed` with one; `JobPodReplacementPolicy` is on in 1.33).
fn job_defaults(object: &mut Value) {
    // A Job without labels takes its pod template's (where its metadata is at hand: creates).
    labels_from_template(object);
    let Some(spec) = spec_map(object) else {
        return;
    };
    let unset = |spec: &Map<String, Value>, key: &str| spec.get(key).is_none_or(Value::is_null);
    if unset(spec, "completions") && unset(spec, "parallelism") {
        spec.insert("completions".to_owned(), json!(1));
    }
    if unset(spec, "backoffLimit") {
        // With a limit per index (`JobBackoffLimitPerIndex`, GA in 1.33), the Job's own is
        // Go's largest int32.
        let limit = if unset(spec, "backoffLimitPerIndex") {
            6
        } else {
            i32::MAX
        };
        spec.insert("backoffLimit".to_owned(), json!(limit));
    }
    // A pod failure policy's condition patterns match `status: "True"` unless they say.
    for pattern in spec
        .get_mut("podFailurePolicy")
        .and_then(|p| p.get_mut("rules"))
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(|rule| rule.get_mut("onPodConditions"))
        .filter_map(Value::as_array_mut)
        .flatten()
        .filter_map(Value::as_object_mut)
    {
        if pattern.get("status").is_none_or(empty_text) {
            pattern.insert("status".to_owned(), json!("True"));
        }
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
        assert_eq!(image_pull_policy("nginx:latest@sha256:abc"), "Always");
        assert_eq!(image_pull_policy("nginx:1@sha256:abc"), "IfNotPresent");
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

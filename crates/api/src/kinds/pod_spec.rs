//! A pod spec's validation as kube-apiserver's `ValidatePodSpec` applies it
//! (`pkg/apis/core/validation/validation.go`, Kubernetes 1.33 with its default feature gates),
//! for a Pod's own spec and every pod template (ReplicationControllers, Deployments,
//! ReplicaSets, StatefulSets, DaemonSets, Jobs, CronJobs' job templates, PodTemplates), and
//! apimachinery's `ValidateLabelSelector` for the workloads' selectors.
//!
//! ## Guarantees
//! - Every refusal is one cause of kube's 422 Invalid with kube's path, reason and wording, in
//!   the order kube's validation appends them: volumes (`ValidateVolumes`), containers
//!   (`validateContainers`), init containers, ephemeral containers, then the pod-level fields
//!   (host network ports, `restartPolicy`, `dnsPolicy`, `nodeSelector`, `securityContext`,
//!   `affinity`, `dnsConfig`, readiness and scheduling gates, topology spread constraints,
//!   Windows host-process rules, `hostUsers`, `serviceAccountName`, `nodeName`,
//!   `activeDeadlineSeconds`, `hostname`, `subdomain`, `tolerations`, `hostAliases`,
//!   `priorityClassName`, `runtimeClassName`, `preemptionPolicy`, `overhead`, `os` and the
//!   fields the OS forbids). A Pod's annotations ([`pod_annotations`]) come before its spec,
//!   the annotations-against-fields checks ([`annotations_match_fields`]) after it. kube's own quirks in paths are kept (`volumeMounts.subPath`
//!   without the index, `downwarAPI` in the more-than-one-source error, the projected
//!   sources' `conflicting duplicate paths` on the volume's path).
//! - Volumes: DNS-label names, unique; exactly one source (`must specify a volume type`,
//!   `may not specify more than 1 volume type`) with the required fields of each source
//!   (hostPath's path and type, secret's and configMap's names, items' keys and relative
//!   paths, modes between 0 and 0777, emptyDir's size limit, persistentVolumeClaim's claim
//!   name, downwardAPI and projected items, csi's driver, ephemeral's claim template,
//!   nfs, gitRepo and the legacy in-tree sources' required fields).
//! - Containers (init and ephemeral ones too): names, images (templates' too), the
//!   `terminationMessagePolicy` and `imagePullPolicy` enums, ports (IANA service names,
//!   unique; port numbers; protocol; host port conflicts), `env` (names as kube's relaxed
//!   rule, on by default since 1.32: printable ASCII but `=`; `valueFrom` with exactly one
//!   source and its fields), `envFrom`, `volumeMounts` (known volume, unique mount paths,
//!   relative `subPath` without `..`, propagation, recursive read-only), `volumeDevices`,
//!   `resources` (standard or extended resource names, non-negative quantities, integer
//!   extended resources, requests not above limits and equal to them for extended resources
//!   and hugepages, hugepages' page-size multiples and their need of cpu or memory),
//!   probes and lifecycle handlers (exactly one handler, non-negative numbers,
//!   `successThreshold` 1 for liveness and startup, ports, schemes, header names, sleep
//!   within the grace period), `securityContext` (user and group IDs, `procMount`, seccomp
//!   and AppArmor profiles, `allowPrivilegeEscalation: false` with `privileged` or
//!   `CAP_SYS_ADMIN`, `windowsOptions`' GMSA spec name and size and `runAsUserName` as
//!   `DOMAIN\USER`), `resizePolicy` (`cpu` or `memory` once each, `NotRequired` or
//!   `RestartContainer`, only `NotRequired` when the pod's `restartPolicy` is `Never`; init
//!   containers may set it, `InPlacePodVerticalScaling` being on in 1.33), a downward API
//!   `resourceFieldRef`'s `divisor` (`1m` or `1` for cpu, `1` to `1Ei` in powers of 1000 or
//!   1024 for memory, ephemeral storage and hugepages, in canonical form; zero is unset), and
//!   the container `restartPolicy` (init containers: only `Always`, which alone allows their
//!   probes and lifecycle; regular containers: none).
//! - Pod-level rules: `overhead` as a container's limits (`spec.overhead.limits[cpu]`);
//!   Windows host-process containers (`windowsOptions.hostProcess` of a container agrees
//!   with the pod's when both are set; a pod with one has only such containers and
//!   `hostNetwork`); `hostUsers: false` forbids `hostNetwork`, `hostPID` and `hostIPC`
//!   (kube's paths `spec.HostPID`, `spec.HostIPC` kept) and alone allows an `Unmasked`
//!   `procMount`; `os.name: linux` forbids `windowsOptions` on the pod and its containers,
//!   `windows` the Linux-only fields (pod: `appArmorProfile`, `seLinuxOptions`, `hostUsers`,
//!   `hostPID`, `hostIPC`, `seccompProfile`, `fsGroup`, `fsGroupChangePolicy`, `sysctls`,
//!   `shareProcessNamespace`, `runAsUser`, `runAsGroup`, `supplementalGroups`,
//!   `supplementalGroupsPolicy`, `seLinuxChangePolicy`; containers: `appArmorProfile`,
//!   `seLinuxOptions`, `seccompProfile`, `capabilities`, `readOnlyRootFilesystem`,
//!   `privileged`, `allowPrivilegeEscalation`, `procMount`, `runAsUser`, `runAsGroup`), only
//!   when the OS name itself is valid; pod (anti-)affinity terms' `matchLabelKeys` and
//!   `mismatchLabelKeys` are label names that need a `labelSelector`, and a `matchLabelKeys`
//!   key may be neither in `mismatchLabelKeys` nor twice in the selector once a created Pod's
//!   keys are merged into it (kube's path for that one, `...[0][0]`, kept).
//! - A Pod update that changes `status.podIPs`, `status.hostIPs` or `status.hostIP` gets
//!   kube's `validatePodIPs` / `validateHostIPs` ([`status_ips`]; the invalid lists and
//!   duplicates printed as Go's `%#v`, `[]core.PodIP{core.PodIP{IP:"10.0.0.1"}}`).
//! - IP addresses (`hostAliases`, `dnsConfig.nameservers`, status IPs) as kube 1.33 reads them:
//!   `StrictIPCIDRValidation` is alpha there, so only what `ParseIPSloppy` cannot read is
//!   refused; non-canonical forms (`010.1.1.1`, `::ffff:1.2.3.4`) pass.
//! - Annotations (a Pod's `metadata.annotations`, a template's `<path>.annotations`):
//!   seccomp ones (`seccomp.security.alpha.kubernetes.io/pod`,
//!   `container.seccomp.security.alpha.kubernetes.io/<name>`) name `runtime/default`,
//!   `docker/default`, `unconfined` or `localhost/<relative path>` (kube's path: the key as a
//!   child, `metadata.annotations.seccomp.security.alpha.kubernetes.io/pod`); AppArmor ones
//!   (`container.apparmor.security.beta.kubernetes.io/<name>`) name a container of the spec
//!   and `runtime/default`, `unconfined` or `localhost/...`. On a Pod's create and in every
//!   template, a seccomp or AppArmor profile field and its annotation agree (`... type in
//!   annotation and field must match`, `... profile in annotation and field must match`;
//!   AppArmor not compared for a Windows pod).
//! - Fields whose feature gate is off by default in 1.33 are never validated here: the
//!   defaults drop them first (`resourceClaims` and containers' `resources.claims` of
//!   `DynamicResourceAllocation`, the pod-level `resources` of `PodLevelResources`, `image`
//!   volumes and their mounts of `ImageVolume`, projected `clusterTrustBundle` sources of
//!   `ClusterTrustBundleProjection`): the image volume checks below (`reference`, no
//!   `subPath`) are kept for the gate's sake, but no write reaches them.
//! - Fields the server's defaults fill before validation (`restartPolicy`, `dnsPolicy`,
//!   pull and termination message policies, port protocols, probe thresholds, the grace
//!   period, field selectors' `apiVersion`) are never refused for being absent or empty:
//!   kube's defaulting would have filled them too.
//! - Label selectors (`label_selector`): `matchLabels` as labels, `matchExpressions`'
//!   operators (`not a valid selector operator`), values required for `In`/`NotIn` and
//!   forbidden for `Exists`/`DoesNotExist`, keys as label names, values as label values.
//! - No input panics: a field of the wrong JSON type reads as absent.
//!
//! Where kube prints a Go struct as the invalid value (a security context, a seccomp
//! profile), the value here is the field's JSON (as elsewhere in [`crate::kinds`]): kube's
//! `%#v` of those structs prints their pointer fields as memory addresses, so it has no
//! stable form to copy. A label key or value with several faults gets kube's first message
//! only; annotations with several faults are reported in key order (kube walks a Go map, in
//! no fixed order).
//!
//! Not checked (kube checks them): privileged containers and host-process pods (allowed, as
//! a cluster with `--allow-privileged` does: kube's `disallowed by cluster policy` is never
//! raised); the other pod-specific annotations (mirror pod, tolerations, deletion cost) and
//! AppArmor annotations added or removed by an update; a Pod's status IPs set on create or
//! left unchanged by an update (kube resets a created Pod's status; this server keeps it, see
//! [`status_ips`]). (A template's labels and annotations are checked by the workloads
//! module, before its spec, as kube's `ValidatePodTemplateSpec`.)

use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::Value;

use super::access::{get, list, text};
use crate::field::{Cause, duplicate, forbidden, go_quote, invalid, not_supported, required};
use crate::names::{
    validate_dns1123_label, validate_dns1123_subdomain, validate_label_value,
    validate_qualified_name,
};
use crate::pod_security::{
    APPARMOR_ANNOTATION_PREFIX, SECCOMP_CONTAINER_ANNOTATION_PREFIX, SECCOMP_POD_ANNOTATION,
};
use crate::quantity::Quantity;

/// kube's `fileModeErrorMsg`.
const FILE_MODE: &str = "must be a number between 0 and 0777 (octal), both inclusive";
/// apimachinery's `IsNegativeErrorMsg`.
const NEGATIVE: &str = "must be greater than or equal to 0";
/// `InclusiveRangeError(1, 65535)`.
const PORT_RANGE: &str = "must be between 1 and 65535, inclusive";
/// `InclusiveRangeError(0, math.MaxInt32)`, for user and group IDs.
const ID_RANGE: &str = "must be between 0 and 2147483647, inclusive";
const RELAXED_ENV: &str = "a valid environment variable name must consist only of printable ASCII characters other than '='";
const HTTP_HEADER: &str = "a valid HTTP header must consist of alphanumeric characters or '-' (e.g. 'X-Header-Name', regex used for validation is '[-A-Za-z0-9]+')";
const SYSCTL: &str = "must have at most 253 characters and match regex ^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$";
const SEARCH_WITH_UNDERSCORE: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '_', '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '_?[a-z0-9]([-_a-z0-9]*[a-z0-9])?(\\._?[a-z0-9]([-_a-z0-9]*[a-z0-9])?)*')";
const INIT_ONLY_ALWAYS: &str = "may not be set for init containers without restartPolicy=Always";

/// The volume sources in the order kube's `validateVolumeSource` checks them: the JSON key,
/// and the path child kube names in its more-than-one-source error.
const VOLUME_SOURCES: &[(&str, &str)] = &[
    ("emptyDir", "emptyDir"),
    ("hostPath", "hostPath"),
    ("gitRepo", "gitRepo"),
    ("gcePersistentDisk", "gcePersistentDisk"),
    ("awsElasticBlockStore", "awsElasticBlockStore"),
    ("secret", "secret"),
    ("nfs", "nfs"),
    ("iscsi", "iscsi"),
    ("glusterfs", "glusterfs"),
    ("flocker", "flocker"),
    ("persistentVolumeClaim", "persistentVolumeClaim"),
    ("rbd", "rbd"),
    ("cinder", "cinder"),
    ("cephfs", "cephFS"),
    ("quobyte", "quobyte"),
    ("downwardAPI", "downwarAPI"),
    ("fc", "fc"),
    ("flexVolume", "flexVolume"),
    ("configMap", "configMap"),
    ("azureFile", "azureFile"),
    ("vsphereVolume", "vsphereVolume"),
    ("photonPersistentDisk", "photonPersistentDisk"),
    ("portworxVolume", "portworxVolume"),
    ("azureDisk", "azureDisk"),
    ("storageos", "storageos"),
    ("projected", "projected"),
    ("scaleIO", "scaleIO"),
    ("csi", "csi"),
    ("ephemeral", "ephemeral"),
    ("image", "image"),
];

/// `Required value` for each field of [`SIMPLE_SOURCES`]' `key` source that `source` leaves
/// empty, under `{at}.{child}` (a pod volume's path, or a PersistentVolume's `spec`).
pub(super) fn simple_source_required(key: &str, source: &Value, at: &str, causes: &mut Vec<Cause>) {
    let Some((_, child, fields)) = SIMPLE_SOURCES.iter().find(|(k, ..)| *k == key) else {
        return;
    };
    for field in *fields {
        let missing = match source.get(*field) {
            Some(Value::String(s)) => s.is_empty(),
            Some(Value::Array(a)) => a.is_empty(),
            _ => true,
        };
        if missing {
            causes.push(required(&format!("{at}.{child}.{field}"), ""));
        }
    }
}

/// The legacy in-tree sources whose validation is only required string or list fields:
/// the JSON key, the path child kube validates under, and the required fields.
pub(super) const SIMPLE_SOURCES: &[(&str, &str, &[&str])] = &[
    ("gcePersistentDisk", "persistentDisk", &["pdName"]),
    (
        "awsElasticBlockStore",
        "awsElasticBlockStore",
        &["volumeID"],
    ),
    ("iscsi", "iscsi", &["targetPortal", "iqn"]),
    ("glusterfs", "glusterfs", &["endpoints", "path"]),
    ("rbd", "rbd", &["monitors", "image"]),
    ("cinder", "cinder", &["volumeID"]),
    ("cephfs", "cephfs", &["monitors"]),
    ("flexVolume", "flexVolume", &["driver"]),
    ("azureFile", "azureFile", &["secretName", "shareName"]),
    ("vsphereVolume", "vsphereVolume", &["volumePath"]),
    ("photonPersistentDisk", "photonPersistentDisk", &["pdID"]),
    ("portworxVolume", "portworxVolume", &["volumeID"]),
    ("azureDisk", "azureDisk", &["diskName", "diskURI"]),
    ("storageos", "storageos", &["volumeName"]),
    ("scaleIO", "scaleIO", &["gateway", "system", "volumeName"]),
];

/// The downward API field paths a volume file may name (`validVolumeDownwardAPIFieldPathExpressions`).
const VOLUME_FIELD_PATHS: &[&str] = &[
    "metadata.annotations",
    "metadata.labels",
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
];

/// The downward API field paths an environment variable may name.
const ENV_FIELD_PATHS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
    "spec.serviceAccountName",
    "status.hostIP",
    "status.hostIPs",
    "status.podIP",
    "status.podIPs",
];

/// The field labels kube's v1 downward API converts (`ConvertDownwardAPIFieldLabel`).
const CONVERTIBLE_FIELD_PATHS: &[&str] = &[
    "metadata.annotations",
    "metadata.labels",
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.serviceAccountName",
    "spec.schedulerName",
    "status.phase",
    "status.hostIP",
    "status.hostIPs",
    "status.podIP",
    "status.podIPs",
];

const CONTAINER_RESOURCE_FIELDS: &[&str] = &[
    "limits.cpu",
    "limits.ephemeral-storage",
    "limits.memory",
    "requests.cpu",
    "requests.ephemeral-storage",
    "requests.memory",
];

/// kube's `standardResources`.
const STANDARD_RESOURCES: &[&str] = &[
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    "pods",
    "resourcequotas",
    "services",
    "replicationcontrollers",
    "secrets",
    "configmaps",
    "persistentvolumeclaims",
    "storage",
    "requests.storage",
    "services.nodeports",
    "services.loadbalancers",
];

/// kube's `integerResources`.
const INTEGER_RESOURCES: &[&str] = &[
    "pods",
    "resourcequotas",
    "services",
    "replicationcontrollers",
    "secrets",
    "configmaps",
    "persistentvolumeclaims",
    "services.nodeports",
    "services.loadbalancers",
];

/// What the containers see of the pod: its valid volumes, grace period and kind.
struct Pod<'a> {
    volumes: HashMap<&'a str, &'a Value>,
    grace: Option<i64>,
    /// The pod does not set `hostUsers: false`.
    host_users: bool,
    /// The pod's `restartPolicy` is `Never` (its containers' resize policies must not
    /// restart them).
    restart_never: bool,
}

/// `field.NotFound(path, value)`.
fn not_found(path: &str, printed: &str) -> Cause {
    (
        path.to_owned(),
        format!("Not found: {printed}"),
        "FieldValueNotFound".to_owned(),
    )
}

/// The integer at `key`, if it is one.
pub(super) fn int(value: &Value, key: &str) -> Option<i64> {
    let number = value.get(key)?;
    number.as_i64().or_else(|| {
        number
            .as_f64()
            .filter(|f| f.fract() == 0.0 && f.abs() < 9.2e18)
            .map(|f| f as i64)
    })
}

fn boolean(value: &Value, key: &str) -> Option<bool> {
    value.get(key).and_then(Value::as_bool)
}

/// A quantity as JSON holds it (a string, or a number).
pub(super) fn quantity(value: &Value) -> Option<Quantity> {
    match value {
        Value::String(s) => Quantity::parse(s),
        Value::Number(n) => Quantity::parse(&n.to_string()),
        _ => None,
    }
}

/// Go's `%#v` of a `[]string`.
fn go_strings(values: &[Value]) -> String {
    let quoted: Vec<String> = values
        .iter()
        .map(|v| go_quote(v.as_str().unwrap_or("")))
        .collect();
    format!("[]string{{{}}}", quoted.join(", "))
}

/// The JSON of a struct kube prints with `%#v` (see the module's docs).
fn json_value(value: &Value) -> String {
    value.to_string()
}

fn check_label(path: &str, name: &str, causes: &mut Vec<Cause>) {
    for message in crate::names::qualified_name_problems(name) {
        causes.push(invalid(path, &go_quote(name), &message));
    }
}

fn check_label_value(path: &str, value: &str, causes: &mut Vec<Cause>) {
    if let Err(message) = validate_label_value(value) {
        causes.push(invalid(path, &go_quote(value), &message));
    }
}

pub(super) fn check_dns_label(path: &str, value: &str, causes: &mut Vec<Cause>) {
    if let Err(message) = validate_dns1123_label(value) {
        causes.push(invalid(path, &go_quote(value), &message));
    }
}

pub(super) fn check_subdomain(path: &str, value: &str, causes: &mut Vec<Cause>) {
    if let Err(message) = validate_dns1123_subdomain(value) {
        causes.push(invalid(path, &go_quote(value), &message));
    }
}

/// `ValidateLabels`: each key a label name, each value a label value, at `path`.
pub(super) fn labels(map: Option<&Value>, path: &str, causes: &mut Vec<Cause>) {
    let Some(map) = map.and_then(Value::as_object) else {
        return;
    };
    for (key, value) in map {
        check_label(path, key, causes);
        check_label_value(path, value.as_str().unwrap_or(""), causes);
    }
}

/// apimachinery's `ValidateLabelSelector` (invalid label values refused) of the selector at
/// `path`.
pub(crate) fn label_selector(selector: Option<&Value>, path: &str, causes: &mut Vec<Cause>) {
    let Some(selector) = selector.filter(|s| !s.is_null()) else {
        return;
    };
    labels(
        selector.get("matchLabels"),
        &format!("{path}.matchLabels"),
        causes,
    );
    for (i, requirement) in list(selector, "matchExpressions").iter().enumerate() {
        let at = format!("{path}.matchExpressions[{i}]");
        let values = list(requirement, "values");
        match text(requirement, "operator") {
            "In" | "NotIn" if values.is_empty() => causes.push(required(
                &format!("{at}.values"),
                "must be specified when `operator` is 'In' or 'NotIn'",
            )),
            "Exists" | "DoesNotExist" if !values.is_empty() => causes.push(forbidden(
                &format!("{at}.values"),
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => causes.push(invalid(
                &format!("{at}.operator"),
                &go_quote(other),
                "not a valid selector operator",
            )),
        }
        check_label(&format!("{at}.key"), text(requirement, "key"), causes);
        for (v, value) in values.iter().enumerate() {
            check_label_value(
                &format!("{at}.values[{v}]"),
                value.as_str().unwrap_or(""),
                causes,
            );
        }
    }
}

/// kube's `ValidatePodSpec` of the spec at `path` (see the module's guarantees); `pod` for
/// a Pod's own spec, `name` its name (for generic ephemeral volumes' claims), `create` when
/// the Pod is being created.
pub(crate) fn validate(
    spec: Option<&Value>,
    path: &str,
    pod: bool,
    name: &str,
    create: bool,
    causes: &mut Vec<Cause>,
) {
    let empty = Value::Null;
    let spec = spec.unwrap_or(&empty);
    let host_users = boolean(spec, "hostUsers") != Some(false);
    let volumes = validate_volumes(spec, path, if pod { name } else { "" }, causes);
    let context = Pod {
        volumes,
        grace: int(spec, "terminationGracePeriodSeconds"),
        host_users,
        restart_never: text(spec, "restartPolicy") == "Never",
    };
    containers(spec, path, &context, causes);
    init_containers(spec, path, &context, causes);
    ephemeral_containers(spec, path, &context, causes);
    host_network_ports(spec, path, pod, causes);
    let policy = text(spec, "restartPolicy");
    if !matches!(policy, "" | "Always" | "OnFailure" | "Never") {
        causes.push(not_supported(
            &format!("{path}.restartPolicy"),
            &go_quote(policy),
            &["Always", "OnFailure", "Never"],
        ));
    }
    let dns = text(spec, "dnsPolicy");
    if !matches!(
        dns,
        "" | "ClusterFirstWithHostNet" | "ClusterFirst" | "Default" | "None"
    ) {
        causes.push(not_supported(
            &format!("{path}.dnsPolicy"),
            &go_quote(dns),
            &["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"],
        ));
    }
    labels(
        spec.get("nodeSelector"),
        &format!("{path}.nodeSelector"),
        causes,
    );
    pod_security_context(spec, path, causes);
    if let Some(affinity) = get(spec, "affinity") {
        validate_affinity(affinity, &format!("{path}.affinity"), causes);
    }
    dns_config(spec, path, causes);
    for (i, gate) in list(spec, "readinessGates").iter().enumerate() {
        check_label(
            &format!("{path}.readinessGates[{i}].conditionType"),
            text(gate, "conditionType"),
            causes,
        );
    }
    let mut gates = HashSet::new();
    for (i, gate) in list(spec, "schedulingGates").iter().enumerate() {
        let at = format!("{path}.schedulingGates[{i}]");
        let gate = text(gate, "name");
        check_label(&at, gate, causes);
        if !gates.insert(gate) {
            causes.push(duplicate(&at, &go_quote(gate)));
        }
    }
    topology_spread(spec, path, causes);
    windows_host_process(spec, path, causes);
    host_users_namespaces(spec, path, causes);
    for (key, check) in [
        (
            "serviceAccountName",
            check_subdomain as fn(&str, &str, &mut Vec<Cause>),
        ),
        ("nodeName", check_subdomain),
    ] {
        let value = text(spec, key);
        if !value.is_empty() {
            check(&format!("{path}.{key}"), value, causes);
        }
    }
    if let Some(deadline) = get(spec, "activeDeadlineSeconds") {
        let seconds = deadline.as_i64().unwrap_or(0);
        if !(1..=i64::from(i32::MAX)).contains(&seconds) {
            causes.push(invalid(
                &format!("{path}.activeDeadlineSeconds"),
                &seconds.to_string(),
                "must be between 1 and 2147483647, inclusive",
            ));
        }
    }
    for key in ["hostname", "subdomain"] {
        let value = text(spec, key);
        if !value.is_empty() {
            check_dns_label(&format!("{path}.{key}"), value, causes);
        }
    }
    tolerations(
        list(spec, "tolerations"),
        &format!("{path}.tolerations"),
        causes,
    );
    for (i, alias) in list(spec, "hostAliases").iter().enumerate() {
        let at = format!("{path}.hostAliases[{i}]");
        check_ip(&format!("{at}.ip"), text(alias, "ip"), causes);
        for (j, host) in list(alias, "hostnames").iter().enumerate() {
            check_subdomain(
                &format!("{at}.hostnames[{j}]"),
                host.as_str().unwrap_or(""),
                causes,
            );
        }
    }
    let class = text(spec, "priorityClassName");
    if !class.is_empty() {
        check_subdomain(&format!("{path}.priorityClassName"), class, causes);
    }
    if let Some(runtime) = get(spec, "runtimeClassName") {
        check_subdomain(
            &format!("{path}.runtimeClassName"),
            runtime.as_str().unwrap_or(""),
            causes,
        );
    }
    if let Some(preemption) = get(spec, "preemptionPolicy") {
        let at = format!("{path}.preemptionPolicy");
        match preemption.as_str().unwrap_or("") {
            "PreemptLowerPriority" | "Never" => {}
            "" => causes.push(required(&at, "")),
            other => causes.push(not_supported(
                &at,
                &go_quote(other),
                &["PreemptLowerPriority", "Never"],
            )),
        }
    }
    if let Some(overhead) = get(spec, "overhead") {
        // `validateOverhead`: the container checks of `limits` set to the overhead.
        let limits = serde_json::json!({ "limits": overhead });
        resource_requirements(&limits, &format!("{path}.overhead"), causes);
    }
    if let Some(os) = get(spec, "os") {
        match text(os, "name") {
            "" => causes.push(required(&format!("{path}.os.name"), "cannot be empty")),
            "linux" => linux_only(spec, path, causes),
            "windows" => windows_only(spec, path, causes),
            other => causes.push(not_supported(
                &format!("{path}.os"),
                &go_quote(other),
                &["linux", "windows"],
            )),
        }
    }
    // What kube checks of a Pod beyond its spec (`validatePodMetadataAndSpec`,
    // `ValidatePodCreate`), or of a template (`ValidatePodTemplateSpec`).
    if pod {
        for key in ["containers", "initContainers"] {
            for (i, container) in list(spec, key).iter().enumerate() {
                image_whitespace(container, &format!("{path}.{key}[{i}]"), causes);
            }
        }
        if create {
            if !list(spec, "ephemeralContainers").is_empty() {
                causes.push(forbidden(
                    &format!("{path}.ephemeralContainers"),
                    "cannot be set on create",
                ));
            }
            if !text(spec, "nodeName").is_empty() && !list(spec, "schedulingGates").is_empty() {
                causes.push(forbidden(
                    &format!("{path}.nodeName"),
                    "cannot be set until all schedulingGates have been cleared",
                ));
            }
        }
    } else if !list(spec, "ephemeralContainers").is_empty() {
        causes.push(forbidden(
            &format!("{path}.ephemeralContainers"),
            "ephemeral containers not allowed in pod template",
        ));
    }
}

/// `validateContainerOnlyForPod`.
fn image_whitespace(container: &Value, at: &str, causes: &mut Vec<Cause>) {
    let image = text(container, "image");
    if image.trim() != image {
        causes.push(invalid(
            &format!("{at}.image"),
            &go_quote(image),
            "must not have leading or trailing whitespace",
        ));
    }
}

/// `ValidateVolumes`: the causes of the volumes, and the valid ones by name.
fn validate_volumes<'a>(
    spec: &'a Value,
    path: &str,
    pod_name: &str,
    causes: &mut Vec<Cause>,
) -> HashMap<&'a str, &'a Value> {
    let volumes = list(spec, "volumes");
    let created: HashSet<String> = if pod_name.is_empty() {
        HashSet::new()
    } else {
        volumes
            .iter()
            .filter(|v| get(v, "ephemeral").is_some())
            .map(|v| format!("{pod_name}-{}", text(v, "name")))
            .collect()
    };
    let mut valid = HashMap::new();
    for (i, volume) in volumes.iter().enumerate() {
        let at = format!("{path}.volumes[{i}]");
        let name = text(volume, "name");
        let mut found = Vec::new();
        volume_source(volume, &at, name, pod_name, &mut found);
        if name.is_empty() {
            found.push(required(&format!("{at}.name"), ""));
        } else {
            check_dns_label(&format!("{at}.name"), name, &mut found);
        }
        if valid.contains_key(name) {
            found.push(duplicate(&format!("{at}.name"), &go_quote(name)));
        }
        if found.is_empty() {
            valid.insert(name, volume);
        } else {
            causes.append(&mut found);
        }
        if let Some(claim) = get(volume, "persistentVolumeClaim") {
            let claim = text(claim, "claimName");
            if created.contains(claim) {
                causes.push(invalid(
                    &format!("{at}.persistentVolumeClaim.claimName"),
                    &go_quote(claim),
                    "must not reference a PVC that gets created for an ephemeral volume",
                ));
            }
        }
    }
    valid
}

/// `validateVolumeSource`.
pub(super) fn volume_source(
    volume: &Value,
    at: &str,
    name: &str,
    pod_name: &str,
    causes: &mut Vec<Cause>,
) {
    let mut count = 0;
    for (key, child) in VOLUME_SOURCES {
        let Some(source) = get(volume, key) else {
            continue;
        };
        if count > 0 {
            causes.push(forbidden(
                &format!("{at}.{child}"),
                "may not specify more than 1 volume type",
            ));
            continue;
        }
        count += 1;
        let here = format!("{at}.{key}");
        match *key {
            "emptyDir" => {
                if source
                    .get("sizeLimit")
                    .and_then(quantity)
                    .is_some_and(|q| q < Quantity::zero())
                {
                    causes.push(forbidden(
                        &format!("{here}.sizeLimit"),
                        "SizeLimit field must be a valid resource quantity",
                    ));
                }
            }
            "hostPath" => host_path(source, &here, causes),
            "gitRepo" => {
                if text(source, "repository").is_empty() {
                    causes.push(required(&format!("{here}.repository"), ""));
                }
                local_descending(
                    text(source, "directory"),
                    &format!("{here}.directory"),
                    causes,
                );
            }
            "secret" => {
                if text(source, "secretName").is_empty() {
                    causes.push(required(&format!("{here}.secretName"), ""));
                }
                items_with_mode(source, &here, causes);
            }
            "configMap" => {
                if text(source, "name").is_empty() {
                    causes.push(required(&format!("{here}.name"), ""));
                }
                items_with_mode(source, &here, causes);
            }
            "nfs" => nfs(source, &here, causes),
            "persistentVolumeClaim" => {
                if text(source, "claimName").is_empty() {
                    causes.push(required(&format!("{here}.claimName"), ""));
                }
            }
            "downwardAPI" => {
                default_mode(source, &here, causes);
                for file in list(source, "items") {
                    downward_api_file(file, &here, causes);
                }
            }
            "projected" => projected(source, &here, causes),
            "csi" => {
                csi_driver(text(source, "driver"), &format!("{here}.driver"), causes);
                if let Some(secret) = get(source, "nodePublishSecretRef") {
                    let secret = text(secret, "name");
                    if secret.is_empty() {
                        causes.push(required(&format!("{here}.nodePublishSecretRef.name"), ""));
                    } else {
                        check_subdomain(&format!("{here}.name"), secret, causes);
                    }
                }
            }
            "ephemeral" => {
                ephemeral(source, &here, causes);
                if !pod_name.is_empty() && !name.is_empty() {
                    let claim = format!("{pod_name}-{name}");
                    if let Err(message) = validate_dns1123_subdomain(&claim) {
                        causes.push(invalid(
                            &format!("{here}.name"),
                            &go_quote(name),
                            &format!("PVC name {}: {message}", go_quote(&claim)),
                        ));
                    }
                }
            }
            "flocker" => {
                let (dataset, uuid) = (text(source, "datasetName"), text(source, "datasetUUID"));
                if dataset.is_empty() && uuid.is_empty() {
                    causes.push(required(
                        &here,
                        "one of datasetName and datasetUUID is required",
                    ));
                }
                if !dataset.is_empty() && !uuid.is_empty() {
                    causes.push(invalid(
                        &here,
                        "\"resource\"",
                        "datasetName and datasetUUID can not be specified simultaneously",
                    ));
                }
                if dataset.contains('/') {
                    causes.push(invalid(
                        &format!("{here}.datasetName"),
                        &go_quote(dataset),
                        "must not contain '/'",
                    ));
                }
            }
            "fc" => {
                let (wwns, wwids) = (list(source, "targetWWNs"), list(source, "wwids"));
                if wwns.is_empty() && wwids.is_empty() {
                    causes.push(required(
                        &format!("{here}.targetWWNs"),
                        "must specify either targetWWNs or wwids, but not both",
                    ));
                }
                if !wwns.is_empty() && !wwids.is_empty() {
                    causes.push(invalid(
                        &format!("{here}.targetWWNs"),
                        &go_strings(wwns),
                        "targetWWNs and wwids can not be specified simultaneously",
                    ));
                }
                if !wwns.is_empty() {
                    match int(source, "lun") {
                        None => causes.push(required(
                            &format!("{here}.lun"),
                            "lun is required if targetWWNs is specified",
                        )),
                        Some(lun) if !(0..=255).contains(&lun) => causes.push(invalid(
                            &format!("{here}.lun"),
                            &lun.to_string(),
                            "must be between 0 and 255, inclusive",
                        )),
                        Some(_) => {}
                    }
                }
            }
            "quobyte" => {
                if text(source, "registry").is_empty() {
                    causes.push(required(
                        &format!("{here}.registry"),
                        "must be a host:port pair or multiple pairs separated by commas",
                    ));
                }
                if text(source, "volume").is_empty() {
                    causes.push(required(&format!("{here}.volume"), ""));
                }
            }
            _ => {
                simple_source_required(key, source, at, causes);
            }
        }
    }
    if count == 0 {
        causes.push(required(at, "must specify a volume type"));
    }
}

/// `validateNFSVolumeSource` (pods' volumes and PersistentVolumes): a server and an absolute
/// path.
pub(super) fn nfs(source: &Value, here: &str, causes: &mut Vec<Cause>) {
    let path = text(source, "path");
    if text(source, "server").is_empty() {
        causes.push(required(&format!("{here}.server"), ""));
    }
    if path.is_empty() {
        causes.push(required(&format!("{here}.path"), ""));
    }
    if !path.starts_with('/') {
        causes.push(invalid(
            &format!("{here}.path"),
            &go_quote(path),
            "must be an absolute path",
        ));
    }
}

/// `validateHostPathVolumeSource`.
pub(super) fn host_path(source: &Value, here: &str, causes: &mut Vec<Cause>) {
    let path = text(source, "path");
    if path.is_empty() {
        causes.push(required(&format!("{here}.path"), ""));
        return;
    }
    no_backsteps(path, &format!("{here}.path"), causes);
    if let Some(kind) = get(source, "type") {
        let kind = kind.as_str().unwrap_or("");
        let supported = [
            "",
            "BlockDevice",
            "CharDevice",
            "Directory",
            "DirectoryOrCreate",
            "File",
            "FileOrCreate",
            "Socket",
        ];
        if !supported.contains(&kind) {
            causes.push(not_supported(
                &format!("{here}.type"),
                &go_quote(kind),
                &supported,
            ));
        }
    }
}

/// A source's `defaultMode` between 0 and 0777.
fn default_mode(source: &Value, here: &str, causes: &mut Vec<Cause>) {
    mode(source, "defaultMode", here, causes);
}

fn mode(source: &Value, key: &str, here: &str, causes: &mut Vec<Cause>) {
    if let Some(mode) = int(source, key)
        && !(0..=0o777).contains(&mode)
    {
        causes.push(invalid(
            &format!("{here}.{key}"),
            &mode.to_string(),
            FILE_MODE,
        ));
    }
}

/// A secret's or config map's `defaultMode` and `items`.
fn items_with_mode(source: &Value, here: &str, causes: &mut Vec<Cause>) {
    default_mode(source, here, causes);
    for (i, item) in list(source, "items").iter().enumerate() {
        key_to_path(item, &format!("{here}.items[{i}]"), causes);
    }
}

/// `validateKeyToPath`.
fn key_to_path(item: &Value, at: &str, causes: &mut Vec<Cause>) {
    if text(item, "key").is_empty() {
        causes.push(required(&format!("{at}.key"), ""));
    }
    let path = text(item, "path");
    if path.is_empty() {
        causes.push(required(&format!("{at}.path"), ""));
    }
    local_non_reserved(path, &format!("{at}.path"), causes);
    mode(item, "mode", at, causes);
}

/// `validatePathNoBacksteps`.
pub(super) fn no_backsteps(path: &str, at: &str, causes: &mut Vec<Cause>) {
    if path.split(['/', '\\']).any(|part| part == "..") {
        causes.push(invalid(at, &go_quote(path), "must not contain '..'"));
    }
}

/// `validateLocalDescendingPath`: relative, without `..`.
fn local_descending(path: &str, at: &str, causes: &mut Vec<Cause>) {
    if path.starts_with('/') {
        causes.push(invalid(at, &go_quote(path), "must be a relative path"));
    }
    no_backsteps(path, at, causes);
}

/// `ValidateLocalNonReservedPath`.
fn local_non_reserved(path: &str, at: &str, causes: &mut Vec<Cause>) {
    local_descending(path, at, causes);
    if path.starts_with("..") && !path.starts_with("../") {
        causes.push(invalid(at, &go_quote(path), "must not start with '..'"));
    }
}

/// `validateDownwardAPIVolumeFile`, its errors under `at` (kube does not index the items).
fn downward_api_file(file: &Value, at: &str, causes: &mut Vec<Cause>) {
    let path = text(file, "path");
    if path.is_empty() {
        causes.push(required(&format!("{at}.path"), ""));
    }
    local_non_reserved(path, &format!("{at}.path"), causes);
    let field_ref = get(file, "fieldRef");
    let resource_ref = get(file, "resourceFieldRef");
    if let Some(selector) = field_ref {
        object_field_selector(
            selector,
            VOLUME_FIELD_PATHS,
            &format!("{at}.fieldRef"),
            causes,
        );
        if resource_ref.is_some() {
            causes.push(invalid(
                at,
                "\"resource\"",
                "fieldRef and resourceFieldRef can not be specified simultaneously",
            ));
        }
    } else if let Some(selector) = resource_ref {
        resource_field_selector(selector, &format!("{at}.resourceFieldRef"), true, causes);
    } else {
        causes.push(required(
            at,
            "one of fieldRef and resourceFieldRef is required",
        ));
    }
    mode(file, "mode", at, causes);
}

/// `validateObjectFieldSelector` (an empty `apiVersion` is kube's default `v1`).
fn object_field_selector(selector: &Value, supported: &[&str], at: &str, causes: &mut Vec<Cause>) {
    let version = match text(selector, "apiVersion") {
        "" => "v1",
        other => other,
    };
    let path = text(selector, "fieldPath");
    if path.is_empty() {
        causes.push(required(&format!("{at}.fieldPath"), ""));
        return;
    }
    let subscripted = split_subscript(path);
    let label = subscripted.map_or(path, |(base, _)| base);
    let conversion = if version != "v1" {
        Some(format!("unsupported pod version: {version}"))
    } else if !CONVERTIBLE_FIELD_PATHS.contains(&label) {
        Some(format!("field label not supported: {path}"))
    } else {
        None
    };
    if let Some(problem) = conversion {
        causes.push(invalid(
            &format!("{at}.fieldPath"),
            &go_quote(path),
            &format!("error converting fieldPath: {problem}"),
        ));
        return;
    }
    match subscripted {
        Some(("metadata.annotations", key)) => check_label(at, &key.to_lowercase(), causes),
        Some(("metadata.labels", key)) => check_label(at, key, causes),
        Some((base, _)) => causes.push(invalid(at, &go_quote(base), "does not support subscript")),
        None if !supported.contains(&path) => causes.push(not_supported(
            &format!("{at}.fieldPath"),
            &go_quote(path),
            supported,
        )),
        None => {}
    }
}

/// `fieldpath.SplitMaybeSubscriptedPath`: `metadata.labels['key']` as its path and key.
fn split_subscript(path: &str) -> Option<(&str, &str)> {
    let inner = path.strip_suffix("']")?;
    let (base, key) = inner.split_once("['")?;
    (!base.is_empty()).then_some((base, key))
}

/// `validateContainerResourceFieldSelector`, with its divisor.
fn resource_field_selector(selector: &Value, at: &str, volume: bool, causes: &mut Vec<Cause>) {
    let resource = text(selector, "resource");
    if volume && text(selector, "containerName").is_empty() {
        causes.push(required(&format!("{at}.containerName"), ""));
    } else if resource.is_empty() {
        causes.push(required(&format!("{at}.resource"), ""));
    } else if !CONTAINER_RESOURCE_FIELDS.contains(&resource)
        && !resource.starts_with("requests.hugepages-")
        && !resource.starts_with("limits.hugepages-")
    {
        causes.push(not_supported(
            &format!("{at}.resource"),
            &go_quote(resource),
            CONTAINER_RESOURCE_FIELDS,
        ));
    }
    resource_divisor(resource, get(selector, "divisor"), at, causes);
}

/// `validateProjectedVolumeSource`.
fn projected(source: &Value, here: &str, causes: &mut Vec<Cause>) {
    default_mode(source, here, causes);
    let mut paths: HashSet<&str> = HashSet::new();
    for (i, item) in list(source, "sources").iter().enumerate() {
        let at = format!("{here}.sources[{i}]");
        let mut count = 0;
        for kind in ["secret", "configMap"] {
            let Some(projection) = get(item, kind) else {
                continue;
            };
            count += 1;
            let name = text(projection, "name");
            if name.is_empty() {
                causes.push(required(&format!("{at}.{kind}.name"), ""));
            }
            for (j, entry) in list(projection, "items").iter().enumerate() {
                key_to_path(entry, &format!("{at}.{kind}.items[{j}]"), causes);
                let path = text(entry, "path");
                if !path.is_empty() && !paths.insert(path) {
                    causes.push(invalid(
                        here,
                        &go_quote(name),
                        "conflicting duplicate paths",
                    ));
                }
            }
        }
        if let Some(downward) = get(item, "downwardAPI") {
            count += 1;
            for file in list(downward, "items") {
                downward_api_file(file, &format!("{at}.downwardAPI"), causes);
                let path = text(file, "path");
                if !path.is_empty() && !paths.insert(path) {
                    causes.push(invalid(
                        here,
                        &go_quote(path),
                        "conflicting duplicate paths",
                    ));
                }
            }
        }
        if let Some(token) = get(item, "serviceAccountToken") {
            count += 1;
            // kube defaults an absent expiration to an hour.
            let seconds = int(token, "expirationSeconds").unwrap_or(3600);
            if seconds < 600 {
                causes.push(invalid(
                    &format!("{at}.serviceAccountToken.expirationSeconds"),
                    &seconds.to_string(),
                    "may not specify a duration less than 10 minutes",
                ));
            }
            if seconds > 1 << 32 {
                causes.push(invalid(
                    &format!("{at}.serviceAccountToken.expirationSeconds"),
                    &seconds.to_string(),
                    "may not specify a duration larger than 2^32 seconds",
                ));
            }
            let path = text(token, "path");
            if path.is_empty() {
                causes.push(required(&format!("{here}.path"), ""));
            } else {
                local_non_reserved(path, &format!("{here}.path"), causes);
            }
        }
        if get(item, "clusterTrustBundle").is_some() {
            count += 1;
        }
        if count > 1 {
            causes.push(forbidden(
                &at,
                "may not specify more than 1 volume type per source",
            ));
        }
    }
}

/// `ValidateCSIDriverName`.
pub(super) fn csi_driver(driver: &str, at: &str, causes: &mut Vec<Cause>) {
    if driver.is_empty() {
        causes.push(required(at, ""));
    }
    if driver.len() > 63 {
        causes.push(crate::field::too_long(at, 63));
    }
    if let Err(message) = validate_dns1123_subdomain(&driver.to_lowercase()) {
        causes.push(invalid(at, &go_quote(driver), &message));
    }
}

/// `validateEphemeralVolumeSource`, minimal: a claim template with access modes and a
/// storage request.
fn ephemeral(source: &Value, here: &str, causes: &mut Vec<Cause>) {
    let Some(template) = get(source, "volumeClaimTemplate") else {
        causes.push(required(&format!("{here}.volumeClaimTemplate"), ""));
        return;
    };
    let spec_path = format!("{here}.volumeClaimTemplate.spec");
    let empty = Value::Null;
    let spec = get(template, "spec").unwrap_or(&empty);
    if list(spec, "accessModes").is_empty() {
        causes.push(required(
            &format!("{spec_path}.accessModes"),
            "at least 1 access mode is required",
        ));
    }
    let storage = spec
        .get("resources")
        .and_then(|r| r.get("requests"))
        .and_then(|r| r.get("storage"));
    if storage.is_none_or(Value::is_null) {
        causes.push(required(&format!("{spec_path}.resources[storage]"), ""));
    }
}

/// `validateContainers`.
fn containers(spec: &Value, path: &str, pod: &Pod, causes: &mut Vec<Cause>) {
    let at = format!("{path}.containers");
    let all = list(spec, "containers");
    if all.is_empty() {
        causes.push(required(&at, ""));
        return;
    }
    let mut names = HashSet::new();
    for (i, container) in all.iter().enumerate() {
        let here = format!("{at}[{i}]");
        container_common(container, &here, pod, causes);
        let name = text(container, "name");
        if !names.insert(name) {
            causes.push(duplicate(&format!("{here}.name"), &go_quote(name)));
        }
        handlers_and_probes(container, &here, pod, causes);
        if get(container, "restartPolicy").is_some() {
            causes.push(forbidden(
                &format!("{here}.restartPolicy"),
                "may not be set for non-init containers",
            ));
        }
    }
    host_port_conflicts(all, &at, 0, causes);
}

/// A container's lifecycle and probes (`validateLifecycle`, `validate*Probe`).
fn handlers_and_probes(container: &Value, here: &str, pod: &Pod, causes: &mut Vec<Cause>) {
    if let Some(lifecycle) = get(container, "lifecycle") {
        for hook in ["postStart", "preStop"] {
            if let Some(handler) = get(lifecycle, hook) {
                validate_handler(
                    handler,
                    &format!("{here}.lifecycle.{hook}"),
                    true,
                    pod,
                    causes,
                );
            }
        }
    }
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(value) = get(container, probe) {
            validate_probe(value, &format!("{here}.{probe}"), probe, pod, causes);
        }
    }
}

/// `validateInitContainers`.
fn init_containers(spec: &Value, path: &str, pod: &Pod, causes: &mut Vec<Cause>) {
    let at = format!("{path}.initContainers");
    let mut names: HashSet<&str> = list(spec, "containers")
        .iter()
        .map(|c| text(c, "name"))
        .collect();
    for (i, container) in list(spec, "initContainers").iter().enumerate() {
        let here = format!("{at}[{i}]");
        container_common(container, &here, pod, causes);
        let mut always = false;
        if let Some(policy) = get(container, "restartPolicy") {
            let policy = policy.as_str().unwrap_or("");
            always = policy == "Always";
            if !always {
                causes.push(not_supported(
                    &format!("{here}.restartPolicy"),
                    &go_quote(policy),
                    &["Always"],
                ));
            }
        }
        let name = text(container, "name");
        if names.contains(name) {
            causes.push(duplicate(&format!("{here}.name"), &go_quote(name)));
        } else if !name.is_empty() {
            names.insert(name);
        }
        host_port_conflicts(std::slice::from_ref(container), &at, 0, causes);
        if always {
            handlers_and_probes(container, &here, pod, causes);
        } else {
            for key in [
                "lifecycle",
                "livenessProbe",
                "readinessProbe",
                "startupProbe",
            ] {
                if get(container, key).is_some() {
                    causes.push(forbidden(&format!("{here}.{key}"), INIT_ONLY_ALWAYS));
                }
            }
        }
    }
}

/// `validateEphemeralContainers`, minimal: the common checks, unique names, an existing
/// target, the fields an ephemeral container may not set.
fn ephemeral_containers(spec: &Value, path: &str, pod: &Pod, causes: &mut Vec<Cause>) {
    let ephemeral = list(spec, "ephemeralContainers");
    if ephemeral.is_empty() {
        return;
    }
    let others: HashSet<&str> = list(spec, "containers")
        .iter()
        .chain(list(spec, "initContainers"))
        .map(|c| text(c, "name"))
        .collect();
    let mut names = others.clone();
    for (i, container) in ephemeral.iter().enumerate() {
        let here = format!("{path}.ephemeralContainers[{i}]");
        container_common(container, &here, pod, causes);
        image_whitespace(container, &here, causes);
        let name = text(container, "name");
        if !names.insert(name) {
            causes.push(duplicate(&format!("{here}.name"), &go_quote(name)));
        }
        let target = text(container, "targetContainerName");
        if !target.is_empty() && !others.contains(target) {
            causes.push(not_found(
                &format!("{here}.targetContainerName"),
                &go_quote(target),
            ));
        }
        for key in [
            "ports",
            "resources",
            "livenessProbe",
            "readinessProbe",
            "startupProbe",
            "lifecycle",
            "resizePolicy",
            "restartPolicy",
        ] {
            let set = match container.get(key) {
                None | Some(Value::Null) => false,
                Some(Value::Array(items)) => !items.is_empty(),
                Some(Value::Object(map)) => {
                    key != "resources" || map.values().any(|v| !is_empty_value(v))
                }
                Some(_) => true,
            };
            if set {
                causes.push(forbidden(
                    &format!("{here}.{key}"),
                    "cannot be set for an Ephemeral Container",
                ));
            }
        }
        for (m, mount) in list(container, "volumeMounts").iter().enumerate() {
            for key in ["subPath", "subPathExpr"] {
                if !text(mount, key).is_empty() {
                    causes.push(forbidden(
                        &format!("{here}.volumeMounts[{m}].{key}"),
                        "cannot be set for an Ephemeral Container",
                    ));
                }
            }
        }
    }
}

fn is_empty_value(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Object(map) => map.is_empty(),
        Value::Array(items) => items.is_empty(),
        _ => false,
    }
}

/// `validateContainerCommon`.
fn container_common(container: &Value, here: &str, pod: &Pod, causes: &mut Vec<Cause>) {
    let name = text(container, "name");
    if name.is_empty() {
        causes.push(required(&format!("{here}.name"), ""));
    } else {
        check_dns_label(&format!("{here}.name"), name, causes);
    }
    // Pods' and templates' alike (`validateContainerCommon` has no exception).
    if text(container, "image").is_empty() {
        causes.push(required(&format!("{here}.image"), ""));
    }
    let policy = text(container, "terminationMessagePolicy");
    if !matches!(policy, "" | "File" | "FallbackToLogsOnError") {
        causes.push(not_supported(
            &format!("{here}.terminationMessagePolicy"),
            &go_quote(policy),
            &["File", "FallbackToLogsOnError"],
        ));
    }
    container_ports(list(container, "ports"), &format!("{here}.ports"), causes);
    env(list(container, "env"), &format!("{here}.env"), causes);
    env_from(
        list(container, "envFrom"),
        &format!("{here}.envFrom"),
        causes,
    );
    let mounts = list(container, "volumeMounts");
    let devices = list(container, "volumeDevices");
    volume_mounts(
        container,
        mounts,
        devices,
        &format!("{here}.volumeMounts"),
        pod,
        causes,
    );
    volume_devices(
        mounts,
        devices,
        &format!("{here}.volumeDevices"),
        pod,
        causes,
    );
    let pull = text(container, "imagePullPolicy");
    if !matches!(pull, "" | "Always" | "IfNotPresent" | "Never") {
        causes.push(not_supported(
            &format!("{here}.imagePullPolicy"),
            &go_quote(pull),
            &["Always", "IfNotPresent", "Never"],
        ));
    }
    if let Some(resources) = get(container, "resources") {
        resource_requirements(resources, &format!("{here}.resources"), causes);
    }
    resize_policy(
        list(container, "resizePolicy"),
        &format!("{here}.resizePolicy"),
        pod.restart_never,
        causes,
    );
    if let Some(context) = get(container, "securityContext") {
        security_context(
            context,
            &format!("{here}.securityContext"),
            pod.host_users,
            causes,
        );
    }
}

/// `validation.IsValidPortName`'s messages.
pub(super) fn port_name_messages(name: &str) -> Vec<&'static str> {
    let mut messages = Vec::new();
    if name.len() > 15 {
        messages.push("must be no more than 15 characters");
    }
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        messages.push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)");
    }
    if !name.bytes().any(|b| b.is_ascii_lowercase()) {
        messages.push("must contain at least one letter (a-z)");
    }
    if name.contains("--") {
        messages.push("must not contain consecutive hyphens");
    }
    if name.starts_with('-') || name.ends_with('-') {
        messages.push("must not begin or end with a hyphen");
    }
    messages
}

/// `validateContainerPorts`.
fn container_ports(ports: &[Value], at: &str, causes: &mut Vec<Cause>) {
    let mut names = HashSet::new();
    for (i, port) in ports.iter().enumerate() {
        let here = format!("{at}[{i}]");
        let name = text(port, "name");
        if !name.is_empty() {
            let messages = port_name_messages(name);
            if !messages.is_empty() {
                for message in messages {
                    causes.push(invalid(&format!("{here}.name"), &go_quote(name), message));
                }
            } else if !names.insert(name) {
                causes.push(duplicate(&format!("{here}.name"), &go_quote(name)));
            }
        }
        match int(port, "containerPort").unwrap_or(0) {
            0 => causes.push(required(&format!("{here}.containerPort"), "")),
            number if !(1..=65535).contains(&number) => causes.push(invalid(
                &format!("{here}.containerPort"),
                &number.to_string(),
                PORT_RANGE,
            )),
            _ => {}
        }
        let host = int(port, "hostPort").unwrap_or(0);
        if host != 0 && !(1..=65535).contains(&host) {
            causes.push(invalid(
                &format!("{here}.hostPort"),
                &host.to_string(),
                PORT_RANGE,
            ));
        }
        // Absent is defaulted (TCP): only a value sent is checked.
        let protocol = text(port, "protocol");
        if !protocol.is_empty() {
            port_protocol(Some(protocol), &here, causes);
        }
    }
}

/// A port's `protocol` at `at` (`None`: absent or empty, where kube requires it): `TCP`,
/// `UDP` or `SCTP` (containers', Services' and endpoints' ports alike).
pub(super) fn port_protocol(protocol: Option<&str>, at: &str, causes: &mut Vec<Cause>) {
    match protocol {
        None => causes.push(required(&format!("{at}.protocol"), "")),
        Some("TCP" | "UDP" | "SCTP") => {}
        Some(other) => causes.push(not_supported(
            &format!("{at}.protocol"),
            &go_quote(other),
            &["SCTP", "TCP", "UDP"],
        )),
    }
}

/// `AccumulateUniqueHostPorts` over `containers`, indexed from `first` under `at`.
fn host_port_conflicts(containers: &[Value], at: &str, first: usize, causes: &mut Vec<Cause>) {
    let mut seen = HashSet::new();
    for (c, container) in containers.iter().enumerate() {
        for (p, port) in list(container, "ports").iter().enumerate() {
            let host = int(port, "hostPort").unwrap_or(0);
            if host == 0 {
                continue;
            }
            let key = format!("{}/{}/{host}", text(port, "protocol"), text(port, "hostIP"));
            if seen.contains(&key) {
                causes.push(duplicate(
                    &format!("{at}[{}].ports[{p}].hostPort", first + c),
                    &go_quote(&key),
                ));
            } else {
                seen.insert(key);
            }
        }
    }
}

/// `IsRelaxedEnvVarName` (RelaxedEnvironmentVariableValidation, on by default).
fn relaxed_env_name(name: &str, at: &str, causes: &mut Vec<Cause>) {
    if name.is_empty() {
        causes.push(invalid(
            at,
            "\"\"",
            "environment variable name must be non-empty",
        ));
    }
    if name.chars().any(|c| !(' '..='~').contains(&c) || c == '=') {
        causes.push(invalid(at, &go_quote(name), RELAXED_ENV));
    }
}

/// `ValidateEnv`.
fn env(vars: &[Value], at: &str, causes: &mut Vec<Cause>) {
    for (i, var) in vars.iter().enumerate() {
        let here = format!("{at}[{i}]");
        let name = text(var, "name");
        if name.is_empty() {
            causes.push(required(&format!("{here}.name"), ""));
        } else {
            relaxed_env_name(name, &format!("{here}.name"), causes);
        }
        let Some(from) = get(var, "valueFrom") else {
            continue;
        };
        let at = format!("{here}.valueFrom");
        let mut count = 0;
        if let Some(selector) = get(from, "fieldRef") {
            count += 1;
            object_field_selector(selector, ENV_FIELD_PATHS, &format!("{at}.fieldRef"), causes);
        }
        if let Some(selector) = get(from, "resourceFieldRef") {
            count += 1;
            resource_field_selector(selector, &format!("{at}.resourceFieldRef"), false, causes);
        }
        for key in ["configMapKeyRef", "secretKeyRef"] {
            if let Some(selector) = get(from, key) {
                count += 1;
                key_selector(selector, &format!("{at}.{key}"), causes);
            }
        }
        if count == 0 {
            causes.push(invalid(
                &at,
                "\"\"",
                "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`",
            ));
        } else if !text(var, "value").is_empty() {
            causes.push(invalid(
                &at,
                "\"\"",
                "may not be specified when `value` is not empty",
            ));
        } else if count > 1 {
            causes.push(invalid(
                &at,
                "\"\"",
                "may not have more than one field specified at a time",
            ));
        }
    }
}

/// `validateConfigMapKeySelector` / `validateSecretKeySelector`.
fn key_selector(selector: &Value, at: &str, causes: &mut Vec<Cause>) {
    check_subdomain(&format!("{at}.name"), text(selector, "name"), causes);
    let key = text(selector, "key");
    if key.is_empty() {
        causes.push(required(&format!("{at}.key"), ""));
    } else {
        crate::names::config_key(|| format!("{at}.key"), key, causes);
    }
}

/// `ValidateEnvFrom`.
fn env_from(sources: &[Value], at: &str, causes: &mut Vec<Cause>) {
    for (i, source) in sources.iter().enumerate() {
        let here = format!("{at}[{i}]");
        let prefix = text(source, "prefix");
        if !prefix.is_empty() {
            relaxed_env_name(prefix, &format!("{here}.prefix"), causes);
        }
        let mut count = 0;
        for key in ["configMapRef", "secretRef"] {
            let Some(reference) = get(source, key) else {
                continue;
            };
            count += 1;
            let name = text(reference, "name");
            let path = format!("{here}.{key}.name");
            if name.is_empty() {
                causes.push(required(&path, ""));
            } else {
                // `NameIsDNSSubdomain(name, prefix=true)`: a trailing dash is allowed.
                let masked = match name.strip_suffix('-') {
                    Some(stem) if !stem.is_empty() => format!("{stem}a"),
                    _ => name.to_owned(),
                };
                if let Err(message) = validate_dns1123_subdomain(&masked) {
                    causes.push(invalid(&path, &go_quote(name), &message));
                }
            }
        }
        if count == 0 {
            causes.push(invalid(
                at,
                "\"\"",
                "must specify one of: `configMapRef` or `secretRef`",
            ));
        } else if count > 1 {
            causes.push(invalid(
                at,
                "\"\"",
                "may not have more than one field specified at a time",
            ));
        }
    }
}

/// `ValidateVolumeMounts`.
fn volume_mounts(
    container: &Value,
    mounts: &[Value],
    devices: &[Value],
    at: &str,
    pod: &Pod,
    causes: &mut Vec<Cause>,
) {
    let device_names: HashSet<&str> = devices.iter().map(|d| text(d, "name")).collect();
    let device_paths: HashSet<&str> = devices.iter().map(|d| text(d, "devicePath")).collect();
    let mut paths = HashSet::new();
    let privileged = container
        .get("securityContext")
        .and_then(|c| boolean(c, "privileged"))
        == Some(true);
    for (i, mount) in mounts.iter().enumerate() {
        let here = format!("{at}[{i}]");
        let name = text(mount, "name");
        let path = text(mount, "mountPath");
        if name.is_empty() {
            causes.push(required(&format!("{here}.name"), ""));
        }
        if !pod.volumes.contains_key(name) {
            causes.push(not_found(&format!("{here}.name"), &go_quote(name)));
        }
        if path.is_empty() {
            causes.push(required(&format!("{here}.mountPath"), ""));
        }
        if !paths.insert(path) {
            causes.push(invalid(
                &format!("{here}.mountPath"),
                &go_quote(path),
                "must be unique",
            ));
        }
        if device_names.contains(name) {
            causes.push(invalid(
                &format!("{here}.name"),
                &go_quote(name),
                "must not already exist in volumeDevices",
            ));
        }
        if device_paths.contains(path) {
            causes.push(invalid(
                &format!("{here}.mountPath"),
                &go_quote(path),
                "must not already exist as a path in volumeDevices",
            ));
        }
        let sub_path = text(mount, "subPath");
        let sub_path_expr = text(mount, "subPathExpr");
        if pod
            .volumes
            .get(name)
            .is_some_and(|v| get(v, "image").is_some())
        {
            for (key, value) in [("subPath", sub_path), ("subPathExpr", sub_path_expr)] {
                if !value.is_empty() {
                    causes.push(invalid(
                        &format!("{here}.{key}"),
                        &go_quote(value),
                        "not allowed in image volume sources",
                    ));
                }
            }
        }
        if !sub_path.is_empty() {
            local_descending(sub_path, &format!("{at}.subPath"), causes);
        }
        if !sub_path_expr.is_empty() {
            if !sub_path.is_empty() {
                causes.push(invalid(
                    &format!("{here}.subPathExpr"),
                    &go_quote(sub_path_expr),
                    "subPathExpr and subPath are mutually exclusive",
                ));
            }
            local_descending(sub_path_expr, &format!("{at}.subPathExpr"), causes);
        }
        let propagation = get(mount, "mountPropagation").map(|p| p.as_str().unwrap_or(""));
        if let Some(propagation) = propagation {
            let at = format!("{at}.mountPropagation");
            if !matches!(propagation, "Bidirectional" | "HostToContainer" | "None") {
                causes.push(not_supported(
                    &at,
                    &go_quote(propagation),
                    &["Bidirectional", "HostToContainer", "None"],
                ));
            }
            if propagation == "Bidirectional" && !privileged {
                causes.push(forbidden(
                    &at,
                    "Bidirectional mount propagation is available only to privileged containers",
                ));
            }
        }
        if let Some(recursive) = get(mount, "recursiveReadOnly") {
            let at = format!("{at}.recursiveReadOnly");
            match recursive.as_str().unwrap_or("") {
                "Disabled" => {}
                "Enabled" | "IfPossible" => {
                    if boolean(mount, "readOnly") != Some(true) {
                        causes.push(forbidden(
                            &at,
                            "may only be specified when readOnly is true",
                        ));
                    }
                    if propagation.is_some_and(|p| p != "None") {
                        causes.push(forbidden(
                            &at,
                            "may only be specified when mountPropagation is None or not specified",
                        ));
                    }
                }
                other => causes.push(not_supported(
                    &at,
                    &go_quote(other),
                    &["Disabled", "Enabled", "IfPossible"],
                )),
            }
        }
    }
}

/// `ValidateVolumeDevices`.
fn volume_devices(
    mounts: &[Value],
    devices: &[Value],
    at: &str,
    pod: &Pod,
    causes: &mut Vec<Cause>,
) {
    let mount_names: HashSet<&str> = mounts.iter().map(|m| text(m, "name")).collect();
    let mount_paths: HashSet<&str> = mounts.iter().map(|m| text(m, "mountPath")).collect();
    let (mut names, mut paths) = (HashSet::new(), HashSet::new());
    for (i, device) in devices.iter().enumerate() {
        let here = format!("{at}[{i}]");
        let name = text(device, "name");
        let path = text(device, "devicePath");
        let volume = pod.volumes.get(name);
        let claim = volume.is_some_and(|v| {
            get(v, "persistentVolumeClaim").is_some() || get(v, "ephemeral").is_some()
        });
        if name.is_empty() {
            causes.push(required(&format!("{here}.name"), ""));
        }
        if names.contains(name) {
            causes.push(invalid(
                &format!("{here}.name"),
                &go_quote(name),
                "must be unique",
            ));
        }
        if volume.is_some() && !claim {
            causes.push(invalid(
                &format!("{here}.name"),
                &go_quote(name),
                "can only use volume source type of PersistentVolumeClaim or Ephemeral for block mode",
            ));
        }
        if volume.is_none() {
            causes.push(not_found(&format!("{here}.name"), &go_quote(name)));
        }
        if path.is_empty() {
            causes.push(required(&format!("{here}.devicePath"), ""));
        }
        if paths.contains(path) {
            causes.push(invalid(
                &format!("{here}.devicePath"),
                &go_quote(path),
                "must be unique",
            ));
        }
        if !path.is_empty() && path.split(['/', '\\']).any(|p| p == "..") {
            causes.push(invalid(
                &format!("{here}.devicePath"),
                &go_quote(path),
                "can not contain backsteps ('..')",
            ));
        } else {
            paths.insert(path);
        }
        if mount_names.contains(name) {
            causes.push(invalid(
                &format!("{here}.name"),
                &go_quote(name),
                "must not already exist in volumeMounts",
            ));
        }
        if mount_paths.contains(path) {
            causes.push(invalid(
                &format!("{here}.devicePath"),
                &go_quote(path),
                "must not already exist as a path in volumeMounts",
            ));
        }
        if !name.is_empty() {
            names.insert(name);
        }
    }
}

fn is_native_resource(name: &str) -> bool {
    !name.contains('/') || name.contains("kubernetes.io/")
}

fn is_hugepages(name: &str) -> bool {
    name.starts_with("hugepages-")
}

/// `IsQuotaHugePageResourceName`: `hugepages-<size>` or `requests.hugepages-<size>`.
pub(super) fn is_quota_hugepages(name: &str) -> bool {
    is_hugepages(name) || name.starts_with("requests.hugepages-")
}

/// `IsExtendedResourceName`.
fn is_extended_resource(name: &str) -> bool {
    !is_native_resource(name)
        && !name.starts_with("requests.")
        && validate_qualified_name(&format!("requests.{name}")).is_ok()
}

/// `IsOvercommitAllowed`.
pub(super) fn overcommit_allowed(name: &str) -> bool {
    is_native_resource(name) && !is_hugepages(name)
}

/// `validateResourceName`: a qualified name, standard unless it has a prefix. (kube prints
/// the name of its own messages, a `core.ResourceName`, through its `String()`: unquoted.)
pub(super) fn any_resource_name(name: &str, at: &str, causes: &mut Vec<Cause>) {
    let problems = crate::names::qualified_name_problems(name);
    if !problems.is_empty() {
        for message in problems {
            causes.push(invalid(at, &go_quote(name), &message));
        }
    } else if !name.contains('/')
        && !STANDARD_RESOURCES.contains(&name)
        && !is_quota_hugepages(name)
    {
        causes.push(invalid(
            at,
            name,
            "must be a standard resource type or fully qualified",
        ));
    }
}

/// `validateContainerResourceName`.
pub(super) fn resource_name(name: &str, at: &str, causes: &mut Vec<Cause>) {
    let quoted = name;
    any_resource_name(name, at, causes);
    if !name.contains('/') {
        if !matches!(name, "cpu" | "memory" | "ephemeral-storage") && !is_hugepages(name) {
            causes.push(invalid(
                at,
                quoted,
                "must be a standard resource for containers",
            ));
        }
    } else if !is_native_resource(name) && !is_extended_resource(name) {
        causes.push(invalid(
            at,
            quoted,
            "doesn't follow extended resource name standard",
        ));
    }
}

/// `ValidateResourceQuantityValue` and the hugepages' page-size multiple.
pub(super) fn resource_quantity(name: &str, amount: Quantity, at: &str, causes: &mut Vec<Cause>) {
    if amount < Quantity::zero() {
        causes.push(invalid(at, &go_quote(&amount.to_string()), NEGATIVE));
    }
    if (INTEGER_RESOURCES.contains(&name) || is_extended_resource(name))
        && amount.nanos() % crate::quantity::NANOS != 0
    {
        causes.push(invalid(
            at,
            &go_quote(&amount.to_string()),
            "must be an integer",
        ));
    }
}

fn hugepages_multiple(name: &str, amount: Quantity, at: &str, causes: &mut Vec<Cause>) {
    let page = Quantity::parse(&name["hugepages-".len()..]);
    let divisible = match page {
        Some(page) if page.nanos() > 0 => amount.nanos() % page.nanos() == 0,
        _ => false,
    };
    if !divisible && amount.nanos() > 0 {
        causes.push(invalid(
            at,
            &go_quote(&amount.to_string()),
            &format!("{amount} is not positive integer multiple of {name}"),
        ));
    }
}

/// `ValidateContainerResourceRequirements` (claims not checked).
fn resource_requirements(resources: &Value, at: &str, causes: &mut Vec<Cause>) {
    let read = |key: &str| -> BTreeMap<&str, Option<Quantity>> {
        resources
            .get(key)
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .map(|(name, value)| (name.as_str(), quantity(value)))
            .collect()
    };
    let (limits, requests) = (read("limits"), read("requests"));
    let (limit_path, request_path) = (format!("{at}.limits"), format!("{at}.requests"));
    let (mut compute, mut huge) = (false, false);
    for (name, amount) in &limits {
        let here = format!("{limit_path}[{name}]");
        resource_name(name, &here, causes);
        if let Some(amount) = amount {
            resource_quantity(name, *amount, &here, causes);
            if is_hugepages(name) {
                hugepages_multiple(name, *amount, &here, causes);
            }
        }
        huge |= is_hugepages(name);
        compute |= matches!(*name, "cpu" | "memory");
    }
    for (name, amount) in &requests {
        let here = format!("{request_path}[{name}]");
        resource_name(name, &here, causes);
        let Some(amount) = amount else {
            continue;
        };
        resource_quantity(name, *amount, &here, causes);
        match limits.get(name) {
            Some(Some(limit)) => {
                if amount != limit && !overcommit_allowed(name) {
                    causes.push(invalid(
                        &request_path,
                        &go_quote(&amount.to_string()),
                        &format!("must be equal to {name} limit of {limit}"),
                    ));
                } else if amount > limit {
                    causes.push(invalid(
                        &request_path,
                        &go_quote(&amount.to_string()),
                        &format!("must be less than or equal to {name} limit of {limit}"),
                    ));
                }
            }
            Some(None) => {}
            None if !overcommit_allowed(name) => causes.push(required(
                &limit_path,
                "Limit must be set for non overcommitable resources",
            )),
            None => {}
        }
        if is_hugepages(name) {
            huge = true;
            hugepages_multiple(name, *amount, &here, causes);
        }
        compute |= matches!(*name, "cpu" | "memory");
    }
    if huge && !compute {
        causes.push(forbidden(at, "HugePages require cpu or memory"));
    }
}

/// A user or group ID between 0 and `MaxInt32`.
fn id_range(context: &Value, key: &str, at: &str, causes: &mut Vec<Cause>) {
    if let Some(id) = int(context, key)
        && !(0..=i64::from(i32::MAX)).contains(&id)
    {
        causes.push(invalid(&format!("{at}.{key}"), &id.to_string(), ID_RANGE));
    }
}

/// `ValidateSecurityContext` (a container's).
fn security_context(context: &Value, at: &str, host_users: bool, causes: &mut Vec<Cause>) {
    id_range(context, "runAsUser", at, causes);
    id_range(context, "runAsGroup", at, causes);
    if let Some(proc_mount) = get(context, "procMount") {
        let proc_mount = proc_mount.as_str().unwrap_or("");
        if !matches!(proc_mount, "Default" | "Unmasked") {
            causes.push(not_supported(
                &format!("{at}.procMount"),
                &go_quote(proc_mount),
                &["Default", "Unmasked"],
            ));
        }
        if host_users && proc_mount == "Unmasked" {
            causes.push(invalid(
                &format!("{at}.procMount"),
                &go_quote(proc_mount),
                "`hostUsers` must be false to use `Unmasked`",
            ));
        }
    }
    if let Some(profile) = get(context, "seccompProfile") {
        seccomp_profile(profile, &format!("{at}.seccompProfile"), causes);
    }
    if boolean(context, "allowPrivilegeEscalation") == Some(false) {
        if boolean(context, "privileged") == Some(true) {
            causes.push(invalid(
                at,
                &json_value(context),
                "cannot set `allowPrivilegeEscalation` to false and `privileged` to true",
            ));
        }
        if let Some(capabilities) = get(context, "capabilities") {
            for added in list(capabilities, "add") {
                if added.as_str() == Some("CAP_SYS_ADMIN") {
                    causes.push(invalid(
                        at,
                        &json_value(context),
                        "cannot set `allowPrivilegeEscalation` to false and `capabilities.Add` CAP_SYS_ADMIN",
                    ));
                }
            }
        }
    }
    if let Some(options) = get(context, "windowsOptions") {
        windows_options(options, &format!("{at}.windowsOptions"), causes);
    }
    if let Some(profile) = get(context, "appArmorProfile") {
        app_armor_profile(profile, &format!("{at}.appArmorProfile"), causes);
    }
}

/// `validateSeccompProfileField`.
fn seccomp_profile(profile: &Value, at: &str, causes: &mut Vec<Cause>) {
    let kind = text(profile, "type");
    match kind {
        "Localhost" | "RuntimeDefault" | "Unconfined" => {}
        "" => causes.push(required(
            &format!("{at}.type"),
            "type is required when seccompProfile is set",
        )),
        other => causes.push(not_supported(
            &format!("{at}.type"),
            &go_quote(other),
            &["Localhost", "RuntimeDefault", "Unconfined"],
        )),
    }
    let local = get(profile, "localhostProfile");
    if kind == "Localhost" {
        match local {
            None => causes.push(required(
                &format!("{at}.localhostProfile"),
                "must be set when seccomp type is Localhost",
            )),
            Some(local) => local_descending(
                local.as_str().unwrap_or(""),
                &format!("{at}.localhostProfile"),
                causes,
            ),
        }
    } else if local.is_some() {
        causes.push(invalid(
            &format!("{at}.localhostProfile"),
            &json_value(profile),
            "can only be set when seccomp type is Localhost",
        ));
    }
}

/// `ValidateAppArmorProfileField`.
pub(crate) fn app_armor_profile(profile: &Value, at: &str, causes: &mut Vec<Cause>) {
    let local = get(profile, "localhostProfile");
    let local_path = format!("{at}.localhostProfile");
    match text(profile, "type") {
        "Localhost" => match local.map(|l| l.as_str().unwrap_or("")) {
            None => causes.push(required(
                &local_path,
                "must be set when AppArmor type is Localhost",
            )),
            Some(local) => {
                if local.trim() != local {
                    causes.push(invalid(
                        &local_path,
                        &go_quote(local),
                        "must not be padded with whitespace",
                    ));
                } else if local.is_empty() {
                    causes.push(required(
                        &local_path,
                        "must be set when AppArmor type is Localhost",
                    ));
                }
                if local.len() > 4095 {
                    causes.push(crate::field::too_long(&local_path, 4095));
                }
            }
        },
        "RuntimeDefault" | "Unconfined" => {
            if let Some(local) = local {
                causes.push(invalid(
                    &local_path,
                    &go_quote(local.as_str().unwrap_or("")),
                    "can only be set when AppArmor type is Localhost",
                ));
            }
        }
        "" => causes.push(required(
            &format!("{at}.type"),
            "type is required when appArmorProfile is set",
        )),
        other => causes.push(not_supported(
            &format!("{at}.type"),
            &go_quote(other),
            &["Localhost", "RuntimeDefault", "Unconfined"],
        )),
    }
}

/// `validateProbe` and the liveness, readiness and startup rules.
fn validate_probe(probe: &Value, at: &str, kind: &str, pod: &Pod, causes: &mut Vec<Cause>) {
    validate_handler(probe, at, false, pod, causes);
    for (key, default) in [
        ("initialDelaySeconds", 0),
        ("timeoutSeconds", 1),
        ("periodSeconds", 10),
        ("successThreshold", 1),
        ("failureThreshold", 3),
    ] {
        let value = int(probe, key).unwrap_or(default);
        if value < 0 {
            causes.push(invalid(
                &format!("{at}.{key}"),
                &value.to_string(),
                NEGATIVE,
            ));
        }
    }
    let grace = get(probe, "terminationGracePeriodSeconds");
    if let Some(seconds) = grace.and_then(Value::as_i64)
        && seconds <= 0
    {
        causes.push(invalid(
            &format!("{at}.terminationGracePeriodSeconds"),
            &seconds.to_string(),
            "must be greater than 0",
        ));
    }
    match kind {
        "readinessProbe" => {
            if let Some(grace) = grace {
                causes.push(invalid(
                    &format!("{at}.terminationGracePeriodSeconds"),
                    &crate::field::go_value(grace),
                    "must not be set for readinessProbes",
                ));
            }
        }
        _ => {
            let success = int(probe, "successThreshold").unwrap_or(1);
            if success != 1 {
                causes.push(invalid(
                    &format!("{at}.successThreshold"),
                    &success.to_string(),
                    "must be 1",
                ));
            }
        }
    }
}

/// `validateHandler`: exactly one of exec, httpGet, tcpSocket, grpc (probes) or sleep
/// (lifecycle hooks).
fn validate_handler(
    handler: &Value,
    at: &str,
    lifecycle: bool,
    pod: &Pod,
    causes: &mut Vec<Cause>,
) {
    let kinds: &[&str] = if lifecycle {
        &["exec", "httpGet", "tcpSocket", "sleep"]
    } else {
        &["exec", "httpGet", "tcpSocket", "grpc"]
    };
    let mut count = 0;
    for kind in kinds {
        let Some(action) = get(handler, kind) else {
            continue;
        };
        let here = format!("{at}.{kind}");
        if count > 0 {
            causes.push(forbidden(&here, "may not specify more than 1 handler type"));
            continue;
        }
        count += 1;
        match *kind {
            "exec" => {
                if list(action, "command").is_empty() {
                    causes.push(required(&format!("{here}.command"), ""));
                }
            }
            "httpGet" => {
                if action.get("path").and_then(Value::as_str) == Some("") {
                    causes.push(required(&format!("{here}.path"), ""));
                }
                port_num_or_name(action.get("port"), &format!("{here}.port"), causes);
                let scheme = text(action, "scheme");
                if !matches!(scheme, "" | "HTTP" | "HTTPS") {
                    causes.push(not_supported(
                        &format!("{here}.scheme"),
                        &go_quote(scheme),
                        &["HTTP", "HTTPS"],
                    ));
                }
                for header in list(action, "httpHeaders") {
                    let name = text(header, "name");
                    if name.is_empty()
                        || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                    {
                        causes.push(invalid(
                            &format!("{here}.httpHeaders"),
                            &go_quote(name),
                            HTTP_HEADER,
                        ));
                    }
                }
            }
            "tcpSocket" => port_num_or_name(action.get("port"), &format!("{here}.port"), causes),
            "grpc" => {
                let port = int(action, "port").unwrap_or(0);
                if !(1..=65535).contains(&port) {
                    causes.push(invalid(
                        &format!("{here}.port"),
                        &port.to_string(),
                        PORT_RANGE,
                    ));
                }
            }
            _ => {
                // sleep, with PodLifecycleSleepActionAllowZero (on by default).
                let seconds = int(action, "seconds").unwrap_or(0);
                if let Some(grace) = pod.grace
                    && (seconds < 0 || seconds > grace)
                {
                    causes.push(invalid(
                        &here,
                        &seconds.to_string(),
                        &format!(
                            "must be non-negative and less than terminationGracePeriodSeconds ({grace})"
                        ),
                    ));
                }
            }
        }
    }
    if count == 0 {
        causes.push(required(at, "must specify a handler type"));
    }
}

/// `ValidatePortNumOrName` of an int-or-string port.
pub(super) fn port_num_or_name(port: Option<&Value>, at: &str, causes: &mut Vec<Cause>) {
    match port {
        Some(Value::String(name)) => {
            for message in port_name_messages(name) {
                causes.push(invalid(at, &go_quote(name), message));
            }
        }
        other => {
            let number = other.and_then(Value::as_i64).unwrap_or(0);
            if !(1..=65535).contains(&number) {
                causes.push(invalid(at, &number.to_string(), PORT_RANGE));
            }
        }
    }
}

/// `validatePodHostNetworkDeps`.
fn host_network_ports(spec: &Value, path: &str, pod: bool, causes: &mut Vec<Cause>) {
    if boolean(spec, "hostNetwork") != Some(true) {
        return;
    }
    for (i, container) in list(spec, "containers").iter().enumerate() {
        for (p, port) in list(container, "ports").iter().enumerate() {
            let host = int(port, "hostPort").unwrap_or(0);
            let container_port = int(port, "containerPort").unwrap_or(0);
            if (pod || host != 0) && host != container_port {
                causes.push(invalid(
                    &format!("{path}.containers[{i}].ports[{p}].hostPort"),
                    &host.to_string(),
                    "must match `containerPort` when `hostNetwork` is true",
                ));
            }
        }
    }
}

/// `validatePodSpecSecurityContext` (the v1 pod's `hostNetwork`, `hostPID` and `hostIPC`
/// are the spec's).
fn pod_security_context(spec: &Value, path: &str, causes: &mut Vec<Cause>) {
    let Some(context) = get(spec, "securityContext") else {
        return;
    };
    let at = format!("{path}.securityContext");
    id_range(context, "fsGroup", &at, causes);
    id_range(context, "runAsUser", &at, causes);
    id_range(context, "runAsGroup", &at, causes);
    for (g, group) in list(context, "supplementalGroups").iter().enumerate() {
        if let Some(id) = group.as_i64()
            && !(0..=i64::from(i32::MAX)).contains(&id)
        {
            causes.push(invalid(
                &format!("{at}.supplementalGroups[{g}]"),
                &id.to_string(),
                ID_RANGE,
            ));
        }
    }
    if boolean(spec, "shareProcessNamespace") == Some(true)
        && boolean(spec, "hostPID") == Some(true)
    {
        causes.push(invalid(
            &format!("{at}.shareProcessNamespace"),
            "true",
            "ShareProcessNamespace and HostPID cannot both be enabled",
        ));
    }
    let mut names = HashSet::new();
    for (i, sysctl) in list(context, "sysctls").iter().enumerate() {
        let here = format!("{at}.sysctls[{i}].name");
        let name = text(sysctl, "name");
        if name.is_empty() {
            causes.push(required(&here, ""));
        } else if !sysctl_name_ok(name) {
            causes.push(invalid(&here, &go_quote(name), SYSCTL));
        } else if names.contains(name) {
            causes.push(duplicate(&here, &go_quote(name)));
        }
        let normalized = normalize_sysctl(name);
        let net = normalized.starts_with("net.");
        let ipc = normalized.starts_with("kernel.shm")
            || normalized.starts_with("kernel.msg")
            || normalized == "kernel.sem"
            || normalized.starts_with("fs.mqueue.");
        if boolean(spec, "hostNetwork") == Some(true) && net {
            causes.push(invalid(
                &here,
                &go_quote(name),
                "may not be specified when 'hostNetwork' is true",
            ));
        } else if boolean(spec, "hostIPC") == Some(true) && ipc {
            causes.push(invalid(
                &here,
                &go_quote(name),
                "may not be specified when 'hostIPC' is true",
            ));
        }
        names.insert(name);
    }
    for (key, supported) in [("fsGroupChangePolicy", &["Always", "OnRootMismatch"][..])] {
        if let Some(value) = get(context, key) {
            let value = value.as_str().unwrap_or("");
            if !supported.contains(&value) {
                causes.push(not_supported(
                    &format!("{at}.{key}"),
                    &go_quote(value),
                    supported,
                ));
            }
        }
    }
    if let Some(profile) = get(context, "seccompProfile") {
        seccomp_profile(profile, &format!("{at}.seccompProfile"), causes);
    }
    if let Some(options) = get(context, "windowsOptions") {
        windows_options(options, &format!("{at}.windowsOptions"), causes);
    }
    if let Some(profile) = get(context, "appArmorProfile") {
        app_armor_profile(profile, &format!("{at}.appArmorProfile"), causes);
    }
    for (key, supported) in [
        ("supplementalGroupsPolicy", &["Merge", "Strict"][..]),
        ("seLinuxChangePolicy", &["MountOption", "Recursive"][..]),
    ] {
        if let Some(value) = get(context, key) {
            let value = value.as_str().unwrap_or("");
            if !supported.contains(&value) {
                causes.push(not_supported(
                    &format!("{at}.{key}"),
                    &go_quote(value),
                    supported,
                ));
            }
        }
    }
}

/// `IsValidSysctlName`: segments of `[a-z0-9]([-_a-z0-9]*[a-z0-9])?` joined by `.` or `/`.
fn sysctl_name_ok(name: &str) -> bool {
    name.len() <= 253
        && name.split(['.', '/']).all(|segment| {
            let bytes = segment.as_bytes();
            let edge = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
            !bytes.is_empty()
                && edge(bytes[0])
                && edge(bytes[bytes.len() - 1])
                && bytes.iter().all(|&b| edge(b) || b == b'-' || b == b'_')
        })
}

/// A sysctl name with `/` separators in its dotted form (`NormalizeName`).
fn normalize_sysctl(name: &str) -> String {
    match name.find(['.', '/']) {
        Some(i) if name.as_bytes()[i] == b'/' => name
            .chars()
            .map(|c| match c {
                '/' => '.',
                '.' => '/',
                c => c,
            })
            .collect(),
        _ => name.to_owned(),
    }
}

/// `validateAffinity`.
fn validate_affinity(affinity: &Value, at: &str, causes: &mut Vec<Cause>) {
    if let Some(node) = get(affinity, "nodeAffinity") {
        let here = format!("{at}.nodeAffinity");
        if let Some(selector) = get(node, "requiredDuringSchedulingIgnoredDuringExecution") {
            node_selector(
                selector,
                &format!("{here}.requiredDuringSchedulingIgnoredDuringExecution"),
                causes,
            );
        }
        let preferred = format!("{here}.preferredDuringSchedulingIgnoredDuringExecution");
        for (i, term) in list(node, "preferredDuringSchedulingIgnoredDuringExecution")
            .iter()
            .enumerate()
        {
            weight(term, &format!("{preferred}[{i}]"), causes);
            if let Some(preference) = get(term, "preference") {
                node_selector_term(
                    preference,
                    &format!("{preferred}[{i}].preference"),
                    false,
                    causes,
                );
            }
        }
    }
    for kind in ["podAffinity", "podAntiAffinity"] {
        let Some(pod) = get(affinity, kind) else {
            continue;
        };
        let here = format!("{at}.{kind}");
        let required_path = format!("{here}.requiredDuringSchedulingIgnoredDuringExecution");
        for (i, term) in list(pod, "requiredDuringSchedulingIgnoredDuringExecution")
            .iter()
            .enumerate()
        {
            pod_affinity_term(term, &format!("{required_path}[{i}]"), causes);
        }
        let preferred = format!("{here}.preferredDuringSchedulingIgnoredDuringExecution");
        for (i, term) in list(pod, "preferredDuringSchedulingIgnoredDuringExecution")
            .iter()
            .enumerate()
        {
            weight(term, &format!("{preferred}[{i}]"), causes);
            let empty = Value::Null;
            pod_affinity_term(
                get(term, "podAffinityTerm").unwrap_or(&empty),
                &format!("{preferred}[{i}].podAffinityTerm"),
                causes,
            );
        }
    }
}

/// `ValidateNodeSelector` (label values checked): at least one term, each a valid term.
pub(super) fn node_selector(selector: &Value, at: &str, causes: &mut Vec<Cause>) {
    let terms_path = format!("{at}.nodeSelectorTerms");
    let terms = list(selector, "nodeSelectorTerms");
    if terms.is_empty() {
        causes.push(required(
            &terms_path,
            "must have at least one node selector term",
        ));
    }
    for (i, term) in terms.iter().enumerate() {
        node_selector_term(term, &format!("{terms_path}[{i}]"), true, causes);
    }
}

fn weight(term: &Value, at: &str, causes: &mut Vec<Cause>) {
    let weight = int(term, "weight").unwrap_or(0);
    if !(1..=100).contains(&weight) {
        causes.push(invalid(
            &format!("{at}.weight"),
            &weight.to_string(),
            "must be in the range 1-100",
        ));
    }
}

/// `ValidateNodeSelectorTerm`; `values` when the label values are checked (required terms).
fn node_selector_term(term: &Value, at: &str, values: bool, causes: &mut Vec<Cause>) {
    for (j, requirement) in list(term, "matchExpressions").iter().enumerate() {
        let here = format!("{at}.matchExpressions[{j}]");
        let given = list(requirement, "values");
        match text(requirement, "operator") {
            "In" | "NotIn" if given.is_empty() => causes.push(required(
                &format!("{here}.values"),
                "must be specified when `operator` is 'In' or 'NotIn'",
            )),
            "Exists" | "DoesNotExist" if !given.is_empty() => causes.push(forbidden(
                &format!("{here}.values"),
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )),
            "Gt" | "Lt" if given.len() != 1 => causes.push(required(
                &format!("{here}.values"),
                "must be specified single value when `operator` is 'Lt' or 'Gt'",
            )),
            "In" | "NotIn" | "Exists" | "DoesNotExist" | "Gt" | "Lt" => {}
            other => causes.push(invalid(
                &format!("{here}.operator"),
                &go_quote(other),
                "not a valid selector operator",
            )),
        }
        check_label(&format!("{here}.key"), text(requirement, "key"), causes);
        if values {
            for (v, value) in given.iter().enumerate() {
                check_label_value(
                    &format!("{here}.values[{v}]"),
                    value.as_str().unwrap_or(""),
                    causes,
                );
            }
        }
    }
    for (j, requirement) in list(term, "matchFields").iter().enumerate() {
        let here = format!("{at}.matchFields[{j}]");
        let given = list(requirement, "values");
        match text(requirement, "operator") {
            "In" | "NotIn" => {
                if given.len() != 1 {
                    causes.push(required(
                        &format!("{here}.values"),
                        "must be only one value when `operator` is 'In' or 'NotIn' for node field selector",
                    ));
                }
            }
            other => causes.push(invalid(
                &format!("{here}.operator"),
                &go_quote(other),
                "not a valid selector operator",
            )),
        }
        let key = text(requirement, "key");
        if key == "metadata.name" {
            for (v, value) in given.iter().enumerate() {
                check_subdomain(
                    &format!("{here}.values[{v}]"),
                    value.as_str().unwrap_or(""),
                    causes,
                );
            }
        } else {
            causes.push(invalid(
                &format!("{here}.key"),
                &go_quote(key),
                "not a valid field selector key",
            ));
        }
    }
}

/// `validatePodAffinityTerm` (its label keys lists not checked).
fn pod_affinity_term(term: &Value, at: &str, causes: &mut Vec<Cause>) {
    label_selector(
        term.get("labelSelector"),
        &format!("{at}.labelSelector"),
        causes,
    );
    label_selector(
        term.get("namespaceSelector"),
        &format!("{at}.namespaceSelector"),
        causes,
    );
    for namespace in list(term, "namespaces") {
        check_dns_label(
            &format!("{at}.namespace"),
            namespace.as_str().unwrap_or(""),
            causes,
        );
    }
    match_label_keys(term, at, causes);
    let key = text(term, "topologyKey");
    if key.is_empty() {
        causes.push(required(&format!("{at}.topologyKey"), "can not be empty"));
    }
    check_label(&format!("{at}.topologyKey"), key, causes);
}

/// `validatePodDNSConfig` (relaxed search validation, on by default).
fn dns_config(spec: &Value, path: &str, causes: &mut Vec<Cause>) {
    let at = format!("{path}.dnsConfig");
    let config = get(spec, "dnsConfig");
    if text(spec, "dnsPolicy") == "None" {
        let Some(config) = config else {
            causes.push(required(
                &at,
                "must provide `dnsConfig` when `dnsPolicy` is None",
            ));
            return;
        };
        if list(config, "nameservers").is_empty() {
            causes.push(required(
                &format!("{at}.nameservers"),
                "must provide at least one DNS nameserver when `dnsPolicy` is None",
            ));
            return;
        }
    }
    let Some(config) = config else {
        return;
    };
    let nameservers = list(config, "nameservers");
    if nameservers.len() > 3 {
        causes.push(invalid(
            &format!("{at}.nameservers"),
            &go_strings(nameservers),
            "must not have more than 3 nameservers",
        ));
    }
    for (i, server) in nameservers.iter().enumerate() {
        check_ip(
            &format!("{at}.nameservers[{i}]"),
            server.as_str().unwrap_or(""),
            causes,
        );
    }
    let searches = list(config, "searches");
    if searches.len() > 32 {
        causes.push(invalid(
            &format!("{at}.searches"),
            &go_strings(searches),
            "must not have more than 32 search paths",
        ));
    }
    let total: usize = searches
        .iter()
        .map(|s| s.as_str().unwrap_or("").len())
        .sum::<usize>()
        + searches.len().saturating_sub(1);
    if total > 2048 {
        causes.push(invalid(
            &format!("{at}.searches"),
            &go_strings(searches),
            "must not have more than 2048 characters (including spaces) in the search list",
        ));
    }
    for (i, search) in searches.iter().enumerate() {
        let search = search.as_str().unwrap_or("");
        if search == "." {
            continue;
        }
        let trimmed = search.strip_suffix('.').unwrap_or(search);
        let here = format!("{at}.searches[{i}]");
        if trimmed.len() > 253 {
            causes.push(invalid(
                &here,
                &go_quote(trimmed),
                "must be no more than 253 characters",
            ));
        }
        if !trimmed.split('.').all(label_with_underscore_ok) {
            causes.push(invalid(&here, &go_quote(trimmed), SEARCH_WITH_UNDERSCORE));
        }
    }
    for (i, option) in list(config, "options").iter().enumerate() {
        if text(option, "name").is_empty() {
            causes.push(required(&format!("{at}.options[{i}]"), "must not be empty"));
        }
    }
}

/// `_?[a-z0-9]([-_a-z0-9]*[a-z0-9])?`.
fn label_with_underscore_ok(label: &str) -> bool {
    let label = label.strip_prefix('_').unwrap_or(label);
    let bytes = label.as_bytes();
    let edge = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    !bytes.is_empty()
        && edge(bytes[0])
        && edge(bytes[bytes.len() - 1])
        && bytes.iter().all(|&b| edge(b) || b == b'-' || b == b'_')
}

/// An IP address `ParseIPSloppy` cannot read: kube 1.33's `IsValidIPForLegacyField` with
/// `StrictIPCIDRValidation` off (alpha, so off by default), which accepts the non-canonical
/// forms (IPv4 parts with leading zeros, IPv4-mapped IPv6) the strict check refuses.
pub(super) fn check_ip(at: &str, ip: &str, causes: &mut Vec<Cause>) {
    if !crate::strfmt::is_ip_sloppy(ip) {
        causes.push(invalid(at, &go_quote(ip), IP_MESSAGE));
    }
}

/// kube's `IsValidIP` message.
pub(super) const IP_MESSAGE: &str = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)";

/// `ValidateTolerations`.
pub(crate) fn tolerations(tolerations: &[Value], at: &str, causes: &mut Vec<Cause>) {
    for (i, toleration) in tolerations.iter().enumerate() {
        let here = format!("{at}[{i}]");
        let key = text(toleration, "key");
        let operator = text(toleration, "operator");
        let effect = text(toleration, "effect");
        let value = text(toleration, "value");
        if !key.is_empty() {
            check_label(&format!("{here}.key"), key, causes);
        }
        if key.is_empty() && operator != "Exists" {
            causes.push(invalid(
                &format!("{here}.operator"),
                &go_quote(operator),
                "operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
            ));
        }
        if get(toleration, "tolerationSeconds").is_some() && effect != "NoExecute" {
            causes.push(invalid(
                &format!("{here}.effect"),
                &go_quote(effect),
                "effect must be 'NoExecute' when `tolerationSeconds` is set",
            ));
        }
        match operator {
            "Equal" | "" => {
                if let Err(message) = validate_label_value(value) {
                    causes.push(invalid(
                        &format!("{here}.operator"),
                        &go_quote(value),
                        &message,
                    ));
                }
            }
            "Exists" => {
                if !value.is_empty() {
                    causes.push(invalid(
                        &format!("{here}.operator"),
                        &go_quote(value),
                        "value must be empty when `operator` is 'Exists'",
                    ));
                }
            }
            other => causes.push(not_supported(
                &format!("{here}.operator"),
                &go_quote(other),
                &["Equal", "Exists"],
            )),
        }
        if !effect.is_empty() && !matches!(effect, "NoSchedule" | "PreferNoSchedule" | "NoExecute")
        {
            causes.push(not_supported(
                &format!("{here}.effect"),
                &go_quote(effect),
                &["NoSchedule", "PreferNoSchedule", "NoExecute"],
            ));
        }
    }
}

/// `validateTopologySpreadConstraints`.
fn topology_spread(spec: &Value, path: &str, causes: &mut Vec<Cause>) {
    let constraints = list(spec, "topologySpreadConstraints");
    for (i, constraint) in constraints.iter().enumerate() {
        let here = format!("{path}.topologySpreadConstraints[{i}]");
        let skew = int(constraint, "maxSkew").unwrap_or(0);
        if skew <= 0 {
            causes.push(invalid(
                &format!("{here}.maxSkew"),
                &skew.to_string(),
                "must be greater than zero",
            ));
        }
        let key = text(constraint, "topologyKey");
        if key.is_empty() {
            causes.push(required(&format!("{here}.topologyKey"), "can not be empty"));
        }
        let action = text(constraint, "whenUnsatisfiable");
        if !matches!(action, "DoNotSchedule" | "ScheduleAnyway") {
            causes.push(not_supported(
                &format!("{here}.whenUnsatisfiable"),
                &go_quote(action),
                &["DoNotSchedule", "ScheduleAnyway"],
            ));
        }
        if constraints[i + 1..].iter().any(|other| {
            text(other, "topologyKey") == key && text(other, "whenUnsatisfiable") == action
        }) {
            causes.push(duplicate(
                &format!("{here}.{{topologyKey, whenUnsatisfiable}}"),
                &go_quote(&format!("{{{key}, {action}}}")),
            ));
        }
        if let Some(domains) = get(constraint, "minDomains") {
            let domains = domains.as_i64().unwrap_or(0);
            if domains <= 0 {
                causes.push(invalid(
                    &format!("{here}.minDomains"),
                    &domains.to_string(),
                    "must be greater than zero",
                ));
            }
            if action != "DoNotSchedule" {
                causes.push(invalid(
                    &format!("{here}.minDomains"),
                    &domains.to_string(),
                    &format!(
                        "can only use minDomains if whenUnsatisfiable=DoNotSchedule, not {action}"
                    ),
                ));
            }
        }
        for key in ["nodeAffinityPolicy", "nodeTaintsPolicy"] {
            if let Some(policy) = get(constraint, key) {
                let policy = policy.as_str().unwrap_or("");
                if !matches!(policy, "Honor" | "Ignore") {
                    causes.push(not_supported(
                        &format!("{here}.{key}"),
                        &go_quote(policy),
                        &["Honor", "Ignore"],
                    ));
                }
            }
        }
        let selector = get(constraint, "labelSelector");
        let match_keys = list(constraint, "matchLabelKeys");
        if !match_keys.is_empty() {
            let keys_path = format!("{here}.matchLabelKeys");
            let mut selected: HashSet<&str> = HashSet::new();
            if let Some(selector) = selector {
                if let Some(labels) = selector.get("matchLabels").and_then(Value::as_object) {
                    selected.extend(labels.keys().map(String::as_str));
                }
                selected.extend(
                    list(selector, "matchExpressions")
                        .iter()
                        .map(|e| text(e, "key")),
                );
            } else {
                causes.push(forbidden(
                    &keys_path,
                    "must not be specified when labelSelector is not set",
                ));
            }
            for (k, key) in match_keys.iter().enumerate() {
                let key = key.as_str().unwrap_or("");
                check_label(&format!("{keys_path}[{k}]"), key, causes);
                if selected.contains(key) {
                    causes.push(invalid(
                        &format!("{keys_path}[{k}]"),
                        &go_quote(key),
                        "exists in both matchLabelKeys and labelSelector",
                    ));
                }
            }
        }
        label_selector(selector, &format!("{here}.labelSelector"), causes);
    }
}

/// Every container of the spec with its path, in kube's `VisitContainersWithPath` order:
/// init containers, containers, then ephemeral containers.
fn all_containers<'a>(spec: &'a Value, path: &str) -> Vec<(String, &'a Value)> {
    crate::pod_security::containers_at(spec, path).collect()
}

/// `validateResizePolicy`: each resource named once, `cpu` or `memory`; each policy
/// `NotRequired` or `RestartContainer`, and `NotRequired` in a pod that never restarts.
fn resize_policy(policies: &[Value], at: &str, restart_never: bool, causes: &mut Vec<Cause>) {
    let mut seen = HashSet::new();
    for (i, policy) in policies.iter().enumerate() {
        let name = text(policy, "resourceName");
        if !seen.insert(name) {
            causes.push(duplicate(&format!("{at}[{i}]"), &go_quote(name)));
        }
        match name {
            "cpu" | "memory" => {}
            "" => causes.push(required(at, "")),
            other => causes.push(not_supported(at, &go_quote(other), &["cpu", "memory"])),
        }
        let restart = text(policy, "restartPolicy");
        match restart {
            "NotRequired" | "RestartContainer" => {}
            "" => causes.push(required(at, "")),
            other => causes.push(not_supported(
                at,
                &go_quote(other),
                &["NotRequired", "RestartContainer"],
            )),
        }
        if restart_never && restart != "NotRequired" {
            causes.push(invalid(
                at,
                &go_quote(restart),
                "must be 'NotRequired' when `restartPolicy` is 'Never'",
            ));
        }
    }
}

/// The divisors kube accepts for byte quantities (memory, ephemeral storage, hugepages).
const BYTE_DIVISORS: &[&str] = &[
    "1", "1k", "1M", "1G", "1T", "1P", "1E", "1Ki", "1Mi", "1Gi", "1Ti", "1Pi", "1Ei",
];

/// `validateContainerResourceDivisor`: a set, non-zero divisor is one of the values the
/// resource supports (compared in canonical form, so `1000m` is `1`).
fn resource_divisor(resource: &str, divisor: Option<&Value>, at: &str, causes: &mut Vec<Cause>) {
    let Some(divisor) = divisor
        .and_then(quantity)
        .filter(|d| *d != Quantity::zero())
    else {
        return;
    };
    let canonical = divisor.to_string();
    let bytes = BYTE_DIVISORS.contains(&canonical.as_str());
    let here = format!("{at}.divisor");
    let message = match resource {
        "limits.cpu" | "requests.cpu" if !matches!(canonical.as_str(), "1m" | "1") => {
            Some("only divisor's values 1m and 1 are supported with the cpu resource")
        }
        "limits.memory" | "requests.memory" if !bytes => Some(
            "only divisor's values 1, 1k, 1M, 1G, 1T, 1P, 1E, 1Ki, 1Mi, 1Gi, 1Ti, 1Pi, 1Ei are supported with the memory resource",
        ),
        "limits.ephemeral-storage" | "requests.ephemeral-storage" if !bytes => Some(
            "only divisor's values 1, 1k, 1M, 1G, 1T, 1P, 1E, 1Ki, 1Mi, 1Gi, 1Ti, 1Pi, 1Ei are supported with the local ephemeral storage resource",
        ),
        _ => None,
    };
    if let Some(message) = message {
        causes.push(invalid(&here, &go_quote(resource), message));
    }
    if (resource.starts_with("requests.hugepages-") || resource.starts_with("limits.hugepages-"))
        && !bytes
    {
        causes.push(invalid(
            &here,
            &go_quote(resource),
            "only divisor's values 1, 1k, 1M, 1G, 1T, 1P, 1E, 1Ki, 1Mi, 1Gi, 1Ti, 1Pi, 1Ei are supported with the hugepages resource",
        ));
    }
}

/// `validateMatchLabelKeysAndMismatchLabelKeys` of a pod (anti-)affinity term at `at`: the
/// keys are label names and need a `labelSelector`; a `matchLabelKeys` key may not be in the
/// selector twice (kube's path for that one is the term's, indexed) nor in
/// `mismatchLabelKeys`.
fn match_label_keys(term: &Value, at: &str, causes: &mut Vec<Cause>) {
    let selector = get(term, "labelSelector");
    let matches: Vec<&str> = list(term, "matchLabelKeys")
        .iter()
        .map(|k| k.as_str().unwrap_or(""))
        .collect();
    let mismatches: Vec<&str> = list(term, "mismatchLabelKeys")
        .iter()
        .map(|k| k.as_str().unwrap_or(""))
        .collect();
    for (field, keys) in [
        ("matchLabelKeys", &matches),
        ("mismatchLabelKeys", &mismatches),
    ] {
        if keys.is_empty() {
            continue;
        }
        let here = format!("{at}.{field}");
        if selector.is_none() {
            causes.push(forbidden(
                &here,
                "must not be specified when labelSelector is not set",
            ));
            continue;
        }
        for (i, key) in keys.iter().enumerate() {
            check_label(&format!("{here}[{i}]"), key, causes);
        }
    }
    if let Some(selector) = selector {
        // Go's map assignment: a key listed twice maps to its last index.
        let index: HashMap<&str, usize> =
            matches.iter().enumerate().map(|(i, k)| (*k, i)).collect();
        let mut keys: HashSet<&str> = selector
            .get("matchLabels")
            .and_then(Value::as_object)
            .into_iter()
            .flat_map(|m| m.keys().map(String::as_str))
            .collect();
        for expression in list(selector, "matchExpressions") {
            let key = text(expression, "key");
            if let Some(i) = index.get(key)
                && keys.contains(key)
            {
                causes.push(invalid(
                    &format!("{at}[{i}]"),
                    &go_quote(key),
                    "exists in both matchLabelKeys and labelSelector",
                ));
            }
            keys.insert(key);
        }
    }
    for (i, key) in matches.iter().enumerate() {
        if mismatches.contains(key) {
            causes.push(invalid(
                &format!("{at}.matchLabelKeys[{i}]"),
                &go_quote(key),
                "exists in both matchLabelKeys and mismatchLabelKeys",
            ));
        }
    }
}

/// The `hostProcess` of a security context's `windowsOptions`.
fn host_process(context: Option<&Value>) -> Option<bool> {
    context
        .and_then(|c| get(c, "windowsOptions"))
        .and_then(|w| boolean(w, "hostProcess"))
}

/// `validateWindowsHostProcessPod`: a container's `hostProcess` agrees with the pod's when
/// both are set; a pod with any host-process container has only such containers and the
/// host network. (kube's `disallowed by cluster policy` is not raised: privileged
/// containers are allowed, see the module's docs.)
fn windows_host_process(spec: &Value, path: &str, causes: &mut Vec<Cause>) {
    let pod = host_process(get(spec, "securityContext"));
    let containers = all_containers(spec, path);
    let mut host_processes = 0;
    for (here, container) in &containers {
        let own = host_process(get(container, "securityContext"));
        if let (Some(pod), Some(own)) = (pod, own)
            && pod != own
        {
            causes.push(invalid(
                &format!("{here}.securityContext.windowsOptions.hostProcess"),
                &own.to_string(),
                &format!(
                    "pod hostProcess value must be identical if both are specified, was {pod}"
                ),
            ));
        }
        if own.or(pod) == Some(true) {
            host_processes += 1;
        }
    }
    if host_processes == 0 {
        return;
    }
    if host_processes != containers.len() {
        causes.push(invalid(
            path,
            "\"\"",
            "If pod contains any hostProcess containers then all containers must be HostProcess containers",
        ));
    }
    if boolean(spec, "hostNetwork") != Some(true) {
        causes.push(invalid(
            &format!("{path}.hostNetwork"),
            "false",
            "hostNetwork must be true if pod contains any hostProcess containers",
        ));
    }
}

/// `validateHostUsers`: a pod in its own user namespace (`hostUsers: false`) shares none of
/// the host's others (kube's paths, `HostPID` and `HostIPC` capitalised, kept).
fn host_users_namespaces(spec: &Value, path: &str, causes: &mut Vec<Cause>) {
    if boolean(spec, "hostUsers") != Some(false) {
        return;
    }
    for (key, child) in [
        ("hostNetwork", "hostNetwork"),
        ("hostPID", "HostPID"),
        ("hostIPC", "HostIPC"),
    ] {
        if boolean(spec, key) == Some(true) {
            causes.push(forbidden(
                &format!("{path}.{child}"),
                "when `pod.Spec.HostUsers` is false",
            ));
        }
    }
}

/// `validateLinux`: no Windows options on the pod or any container.
fn linux_only(spec: &Value, path: &str, causes: &mut Vec<Cause>) {
    let pod = get(spec, "securityContext").map(|c| (format!("{path}.securityContext"), c));
    let containers = all_containers(spec, path)
        .into_iter()
        .filter_map(|(here, c)| {
            get(c, "securityContext").map(|c| (format!("{here}.securityContext"), c))
        });
    for (at, context) in pod.into_iter().chain(containers) {
        if get(context, "windowsOptions").is_some() {
            causes.push(forbidden(
                &format!("{at}.windowsOptions"),
                "windows options cannot be set for a linux pod",
            ));
        }
    }
}

/// The pod-level fields a Windows pod may not set, in `validateWindows`' order: the field
/// (under `securityContext` or, for the namespaces and user namespace, the spec) and its
/// path child.
const WINDOWS_POD_FIELDS: &[(bool, &str)] = &[
    (true, "appArmorProfile"),
    (true, "seLinuxOptions"),
    (false, "hostUsers"),
    (false, "hostPID"),
    (false, "hostIPC"),
    (true, "seccompProfile"),
    (true, "fsGroup"),
    (true, "fsGroupChangePolicy"),
    (true, "sysctls"),
    (false, "shareProcessNamespace"),
    (true, "runAsUser"),
    (true, "runAsGroup"),
    (true, "supplementalGroups"),
    (true, "supplementalGroupsPolicy"),
    (true, "seLinuxChangePolicy"),
];

/// The container security context fields a Windows pod's containers may not set.
const WINDOWS_CONTAINER_FIELDS: &[&str] = &[
    "appArmorProfile",
    "seLinuxOptions",
    "seccompProfile",
    "capabilities",
    "readOnlyRootFilesystem",
    "privileged",
    "allowPrivilegeEscalation",
    "procMount",
    "runAsUser",
    "runAsGroup",
];

/// `validateWindows`: the Linux-only fields of the pod and its containers are unset.
fn windows_only(spec: &Value, path: &str, causes: &mut Vec<Cause>) {
    const MESSAGE: &str = "cannot be set for a windows pod";
    let empty = Value::Null;
    let context = get(spec, "securityContext").unwrap_or(&empty);
    for &(in_context, key) in WINDOWS_POD_FIELDS {
        let set = match (in_context, key) {
            // Go's `HostPID`/`HostIPC` are plain booleans: only `true` counts as set.
            (false, "hostPID" | "hostIPC") => boolean(spec, key) == Some(true),
            (false, _) => get(spec, key).is_some(),
            (true, "sysctls") => !list(context, key).is_empty(),
            (true, _) => get(context, key).is_some(),
        };
        if set {
            let at = if in_context {
                format!("{path}.securityContext.{key}")
            } else {
                format!("{path}.{key}")
            };
            causes.push(forbidden(&at, MESSAGE));
        }
    }
    for (here, container) in all_containers(spec, path) {
        let Some(context) = get(container, "securityContext") else {
            continue;
        };
        for key in WINDOWS_CONTAINER_FIELDS {
            if get(context, key).is_some() {
                causes.push(forbidden(&format!("{here}.securityContext.{key}"), MESSAGE));
            }
        }
    }
}

/// `validateWindowsSecurityContextOptions` of the `windowsOptions` at `at`: the GMSA
/// credential spec's name and size, and `runAsUserName` as `DOMAIN\USER`.
fn windows_options(options: &Value, at: &str, causes: &mut Vec<Cause>) {
    if let Some(name) = get(options, "gmsaCredentialSpecName") {
        check_subdomain(
            &format!("{at}.gmsaCredentialSpecName"),
            name.as_str().unwrap_or(""),
            causes,
        );
    }
    if let Some(spec) = get(options, "gmsaCredentialSpec") {
        let spec = spec.as_str().unwrap_or("");
        let here = format!("{at}.gmsaCredentialSpec");
        if spec.is_empty() {
            causes.push(invalid(
                &here,
                "\"\"",
                "gmsaCredentialSpec cannot be an empty string",
            ));
        } else if spec.len() > 64 * 1024 {
            causes.push(invalid(
                &here,
                &go_quote(spec),
                "gmsaCredentialSpec size must be under 64 KiB",
            ));
        }
    }
    if let Some(name) = get(options, "runAsUserName") {
        let name = name.as_str().unwrap_or("");
        let here = format!("{at}.runAsUserName");
        for message in run_as_user_name(name) {
            causes.push(invalid(&here, &go_quote(name), &message));
        }
    }
}

/// What kube says of a Windows `runAsUserName`, in its order.
fn run_as_user_name(name: &str) -> Vec<String> {
    if name.is_empty() {
        return vec!["runAsUserName cannot be an empty string".to_owned()];
    }
    if name.chars().any(|c| c.is_ascii_control()) {
        return vec!["runAsUserName cannot contain control characters".to_owned()];
    }
    let parts: Vec<&str> = name.split('\\').collect();
    if parts.len() > 2 {
        return vec!["runAsUserName cannot contain more than one backslash".to_owned()];
    }
    let (domain, user) = match parts.as_slice() {
        [domain, user] => (Some(*domain), *user),
        _ => (None, name),
    };
    let mut messages = Vec::new();
    if domain.is_some_and(|d| d.len() >= 256) {
        messages.push("runAsUserName's Domain length must be under 256 characters".to_owned());
    }
    if domain.is_some_and(|d| !netbios_domain(d) && !dns_domain(d)) {
        messages
            .push("runAsUserName's Domain doesn't match the NetBios nor the DNS format".to_owned());
    }
    if user.is_empty() {
        messages.push("runAsUserName's User cannot be empty".to_owned());
    } else if user.len() > 104 {
        messages
            .push("runAsUserName's User length must not be longer than 104 characters".to_owned());
    }
    if !user.is_empty() && user.chars().all(|c| c == '.' || c == ' ') {
        messages.push("runAsUserName's User cannot contain only periods or spaces".to_owned());
    }
    if user.chars().any(|c| "\"/\\:;|=,+*?<>@[]".contains(c)) {
        messages.push(
            "runAsUserName's User cannot contain the following characters: \"/\\:;|=,+*?<>@[]"
                .to_owned(),
        );
    }
    messages
}

/// kube's NetBIOS domain pattern: 1 to 15 characters but `\/:*?"<>|`, not starting with `.`.
fn netbios_domain(domain: &str) -> bool {
    let banned = |c: char| "\\/:*?\"<>|".contains(c);
    let count = domain.chars().count();
    (1..=15).contains(&count) && !domain.starts_with('.') && !domain.chars().any(banned)
}

/// kube's DNS domain pattern: dot-separated labels of ASCII letters, digits and inner `-`,
/// at most 63 characters each.
fn dns_domain(domain: &str) -> bool {
    domain.split('.').all(|label| {
        let bytes = label.as_bytes();
        (1..=63).contains(&bytes.len())
            && bytes[0].is_ascii_alphanumeric()
            && bytes[bytes.len() - 1].is_ascii_alphanumeric()
            && bytes
                .iter()
                .all(|b| b.is_ascii_alphanumeric() || *b == b'-')
    })
}

/// The annotations of a Pod or pod template's metadata (`metadata`, at `path`).
fn annotation_map(metadata: Option<&Value>) -> Option<&serde_json::Map<String, Value>> {
    metadata
        .and_then(|m| get(m, "annotations"))
        .and_then(Value::as_object)
}

/// `ValidateSeccompProfile` of a seccomp annotation's value.
fn seccomp_annotation(value: &str, at: &str, causes: &mut Vec<Cause>) {
    match value {
        "runtime/default" | "docker/default" | "unconfined" => {}
        _ => match value.strip_prefix("localhost/") {
            Some(profile) => local_descending(profile, at, causes),
            None => causes.push(invalid(
                at,
                &go_quote(value),
                "must be a valid seccomp profile",
            )),
        },
    }
}

/// The seccomp and AppArmor parts of kube's `ValidatePodSpecificAnnotations` for the
/// annotations of `metadata` (at `path`, e.g. `metadata.annotations`) of a pod or template
/// whose spec is `spec`: seccomp annotations name a valid profile (kube's paths: the key as
/// a child, `metadata.annotations.seccomp.security.alpha.kubernetes.io/pod`); AppArmor ones
/// name a container of the spec and a valid profile.
pub(crate) fn pod_annotations(
    metadata: Option<&Value>,
    spec: Option<&Value>,
    path: &str,
    causes: &mut Vec<Cause>,
) {
    let Some(annotations) = annotation_map(metadata) else {
        return;
    };
    let value = |v: &Value| v.as_str().unwrap_or("").to_owned();
    if let Some(profile) = annotations.get(SECCOMP_POD_ANNOTATION) {
        seccomp_annotation(
            &value(profile),
            &format!("{path}.{SECCOMP_POD_ANNOTATION}"),
            causes,
        );
    }
    for (key, profile) in annotations {
        if key.starts_with(SECCOMP_CONTAINER_ANNOTATION_PREFIX) {
            seccomp_annotation(&value(profile), &format!("{path}.{key}"), causes);
        }
    }
    let empty = Value::Null;
    let spec = spec.unwrap_or(&empty);
    let containers = all_containers(spec, "spec");
    for (key, profile) in annotations {
        let Some(container) = key.strip_prefix(APPARMOR_ANNOTATION_PREFIX) else {
            continue;
        };
        let here = format!("{path}[{key}]");
        if !containers.iter().any(|(_, c)| text(c, "name") == container) {
            causes.push(invalid(&here, &go_quote(container), "container not found"));
        }
        let profile = value(profile);
        if !(matches!(profile.as_str(), "" | "runtime/default" | "unconfined")
            || profile.starts_with("localhost/"))
        {
            causes.push(invalid(
                &here,
                &go_quote(&profile),
                &format!("invalid AppArmor profile name: {}", go_quote(&profile)),
            ));
        }
    }
}

/// kube's `validateSeccompAnnotationsAndFields` and
/// `validateAppArmorAnnotationsAndFieldsMatchOnCreate` (a Pod's create, a template): where a
/// container (or, for seccomp, the pod) has both a profile field and the matching
/// annotation, they agree. AppArmor is not compared for a Windows pod.
pub(crate) fn annotations_match_fields(
    metadata: Option<&Value>,
    spec: Option<&Value>,
    path: &str,
    causes: &mut Vec<Cause>,
) {
    let (Some(annotations), Some(spec)) = (annotation_map(metadata), spec) else {
        return;
    };
    let pod_context = get(spec, "securityContext");
    let profile_of = |context: Option<&Value>, key: &str| -> Option<Value> {
        context.and_then(|c| get(c, key)).cloned()
    };
    let containers = all_containers(spec, path);
    if let (Some(profile), Some(annotation)) = (
        profile_of(pod_context, "seccompProfile"),
        annotations.get(SECCOMP_POD_ANNOTATION),
    ) {
        let at = format!("{path}.securityContext.seccompProfile");
        profile_matches(&profile, annotation, &at, &SECCOMP_MATCH, causes);
    }
    for (here, container) in &containers {
        let context = get(container, "securityContext");
        let Some(profile) = profile_of(context, "seccompProfile") else {
            continue;
        };
        let key = format!(
            "{SECCOMP_CONTAINER_ANNOTATION_PREFIX}{}",
            text(container, "name")
        );
        if let Some(annotation) = annotations.get(&key) {
            let at = format!("{here}.securityContext.seccompProfile");
            profile_matches(&profile, annotation, &at, &SECCOMP_MATCH, causes);
        }
    }
    if get(spec, "os").is_some_and(|os| text(os, "name") == "windows") {
        return;
    }
    let pod_profile = profile_of(pod_context, "appArmorProfile");
    for (here, container) in &containers {
        let context = get(container, "securityContext");
        let Some(profile) = profile_of(context, "appArmorProfile").or_else(|| pod_profile.clone())
        else {
            continue;
        };
        let key = format!("{APPARMOR_ANNOTATION_PREFIX}{}", text(container, "name"));
        if let Some(annotation) = annotations.get(&key) {
            let at = format!("{here}.securityContext.appArmorProfile");
            profile_matches(&profile, annotation, &at, &APPARMOR_MATCH, causes);
        }
    }
}

/// How a profile field's type reads as an annotation value, for one of seccomp or AppArmor.
struct ProfileAnnotations {
    unconfined: &'static [&'static str],
    runtime_default: &'static [&'static str],
    localhost_prefix: &'static str,
    /// `seccomp` or `apparmor`, as kube's messages name them.
    name: &'static str,
}

const SECCOMP_MATCH: ProfileAnnotations = ProfileAnnotations {
    unconfined: &["unconfined"],
    runtime_default: &["runtime/default", "docker/default"],
    localhost_prefix: "localhost/",
    name: "seccomp",
};

const APPARMOR_MATCH: ProfileAnnotations = ProfileAnnotations {
    unconfined: &["unconfined"],
    runtime_default: &["runtime/default"],
    localhost_prefix: "localhost/",
    name: "apparmor",
};

/// `validate*AnnotationsAndFieldsMatch`: the field's profile `type` (and for `Localhost`
/// its `localhostProfile`) against the annotation's value.
fn profile_matches(
    profile: &Value,
    annotation: &Value,
    at: &str,
    kind: &ProfileAnnotations,
    causes: &mut Vec<Cause>,
) {
    let annotation = annotation.as_str().unwrap_or("");
    let type_mismatch = || {
        forbidden(
            &format!("{at}.type"),
            &format!("{} type in annotation and field must match", kind.name),
        )
    };
    match text(profile, "type") {
        "Unconfined" if !kind.unconfined.contains(&annotation) => causes.push(type_mismatch()),
        "RuntimeDefault" if !kind.runtime_default.contains(&annotation) => {
            causes.push(type_mismatch());
        }
        "Localhost" => match annotation.strip_prefix(kind.localhost_prefix) {
            None => causes.push(type_mismatch()),
            Some(name) if profile.get("localhostProfile").and_then(Value::as_str) != Some(name) => {
                causes.push(forbidden(
                    &format!("{at}.localhostProfile"),
                    &format!("{} profile in annotation and field must match", kind.name),
                ));
            }
            Some(_) => {}
        },
        _ => {}
    }
}

/// Go's `%#v` of a `[]core.PodIP` / `[]core.HostIP` (`kind` the element type's name).
fn go_ips(kind: &str, ips: &[&str]) -> String {
    let items: Vec<String> = ips
        .iter()
        .map(|ip| format!("core.{kind}{{IP:{}}}", go_quote(ip)))
        .collect();
    format!("[]core.{kind}{{{}}}", items.join(", "))
}

/// kube's `validatePodIPs` and `validateHostIPs` of a Pod's status, as `ValidatePodStatusUpdate`
/// runs them; checked when an update changes `status.podIPs`, `status.hostIPs` or
/// `status.hostIP` (a status the client set on create is kept, not validated, see the
/// module's docs). Each IP is one `ParseIPSloppy` reads (kube 1.33: strict forms gated off);
/// `hostIPs[0]` is `hostIP`; no IP twice; at most one of each family. (With an unreadable IP
/// among several, kube also reports an internal error of its dual-stack check; that one is
/// left out.)
pub(crate) fn status_ips(pod: &Value, old: &Value, causes: &mut Vec<Cause>) {
    let status = |object: &Value, key: &str| object.pointer(&format!("/status/{key}")).cloned();
    if ["podIPs", "hostIPs", "hostIP"]
        .iter()
        .all(|key| status(pod, key) == status(old, key))
    {
        return;
    }
    let empty = Value::Null;
    let current = pod.get("status").unwrap_or(&empty);
    let ips =
        |key: &str| -> Vec<&str> { list(current, key).iter().map(|ip| text(ip, "ip")).collect() };
    let pod_ips = ips("podIPs");
    for (i, ip) in pod_ips.iter().enumerate() {
        check_ip(&format!("status.podIPs[{i}]"), ip, causes);
    }
    if pod_ips.len() > 1 {
        family_count("status.podIPs", "PodIP", &pod_ips, causes);
        unique_ips("status.podIPs", "PodIP", &pod_ips, causes);
    }
    let host_ips = ips("hostIPs");
    let Some(first) = host_ips.first() else {
        return;
    };
    if *first != text(current, "hostIP") {
        causes.push(invalid(
            "status.hostIPs[0].ip",
            &go_quote(first),
            "must be equal to `hostIP`",
        ));
    }
    for (i, ip) in host_ips.iter().enumerate() {
        check_ip(&format!("status.hostIPs[{i}]"), ip, causes);
    }
    if host_ips.len() > 1 {
        unique_ips("status.hostIPs", "HostIP", &host_ips, causes);
        family_count("status.hostIPs", "HostIP", &host_ips, causes);
    }
}

/// `IsDualStackIPStrings` and the length check: more than one IP are one of each family.
fn family_count(at: &str, kind: &str, ips: &[&str], causes: &mut Vec<Cause>) {
    let families: Option<Vec<bool>> = ips
        .iter()
        .map(|ip| crate::strfmt::ip_is_v6_sloppy(ip))
        .collect();
    let Some(families) = families else {
        return;
    };
    let dual = families.contains(&true) && families.contains(&false);
    if !dual || ips.len() > 2 {
        causes.push(invalid(
            at,
            &go_ips(kind, ips),
            "may specify no more than one IP for each IP family",
        ));
    }
}

/// No IP listed twice (`Duplicate value: core.PodIP{IP:"..."}`).
fn unique_ips(at: &str, kind: &str, ips: &[&str], causes: &mut Vec<Cause>) {
    let mut seen = HashSet::new();
    for (i, ip) in ips.iter().enumerate() {
        if !seen.insert(*ip) {
            causes.push(duplicate(
                &format!("{at}[{i}]"),
                &format!("core.{kind}{{IP:{}}}", go_quote(ip)),
            ));
        }
    }
}

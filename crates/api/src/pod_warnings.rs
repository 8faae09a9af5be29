//! kube-apiserver's warnings about pods and pod templates (`pkg/api/pod/warnings.go`,
//! `GetWarningsForPod` and `GetWarningsForPodTemplate`), which its pod and workload strategies
//! return from `WarningsOnCreate` and `WarningsOnUpdate` and kubectl prints as `Warning:`.
//!
//! ## Guarantees
//! - **Which writes**: a pod's create and every update of the pod itself (not a subresource);
//!   a workload's create, and an update that moves its `metadata.generation` (a change of its
//!   spec), for the template at kube's path (`spec.template`, a CronJob's
//!   `spec.jobTemplate.spec.template`, a PodTemplate's `template`) ([`for_write`]).
//! - **What**, in kube's order and words, each prefixed with kube's field path (under the
//!   template's path for a workload): deprecated node labels in `nodeSelector`, node affinity
//!   terms and topology spread keys; topology spread constraints and pod (anti-)affinity terms
//!   with a null `labelSelector`; the deprecated `scheduler.alpha.kubernetes.io/critical-pod`
//!   and `security.alpha.kubernetes.io/(unsafe-)sysctls` annotations; deprecated and removed
//!   volume plugins; projected sources that reuse a service account token's path; duplicate
//!   host alias IPs; duplicate or empty image pull secret names; fractional memory and
//!   ephemeral-storage amounts (overhead, requests, limits), printed canonical; seccomp
//!   annotations without the field; (templates only) AppArmor annotations without the field;
//!   environment variables that hide an earlier one; `hostIP` without `hostPort`, and
//!   duplicate, overlapping or ambiguous container ports, and duplicate port names; a negative
//!   `terminationGracePeriodSeconds`.
//! - A created Pod's AppArmor annotations are warned about where kube's pod strategy warns
//!   while it syncs them to fields (`applyAppArmorVersionSkew`):
//!   [`crate::kinds::workloads::created_warnings`].
//! - **Not done**: the warnings about an ephemeral volume's claim template spec (kube's
//!   `GetWarningsForPersistentVolumeClaimSpec`).

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use crate::field::go_string as text;
use crate::pod_security::{containers_with_paths as containers, items, template_path};

/// kube's deprecated node labels and what to say of them.
const DEPRECATED_NODE_LABELS: [(&str, &str); 8] = [
    (
        "beta.kubernetes.io/arch",
        r#"deprecated since v1.14; use "kubernetes.io/arch" instead"#,
    ),
    (
        "beta.kubernetes.io/os",
        r#"deprecated since v1.14; use "kubernetes.io/os" instead"#,
    ),
    (
        "failure-domain.beta.kubernetes.io/region",
        r#"deprecated since v1.17; use "topology.kubernetes.io/region" instead"#,
    ),
    (
        "failure-domain.beta.kubernetes.io/zone",
        r#"deprecated since v1.17; use "topology.kubernetes.io/zone" instead"#,
    ),
    (
        "beta.kubernetes.io/instance-type",
        r#"deprecated since v1.17; use "node.kubernetes.io/instance-type" instead"#,
    ),
    ("app.kubernetes.io/created-by", "deprecated since v1.9"),
    (
        "scheduler.alpha.kubernetes.io/preferAvoidPods",
        "deprecated since v1.22; use Taints and Tolerations instead",
    ),
    (
        "node-role.kubernetes.io/master",
        r#"use "node-role.kubernetes.io/control-plane" instead"#,
    ),
];

/// kube's deprecated pod annotations and what to say of them.
const DEPRECATED_ANNOTATIONS: [(&str, &str); 3] = [
    (
        "scheduler.alpha.kubernetes.io/critical-pod",
        r#"non-functional in v1.16+; use the "priorityClassName" field instead"#,
    ),
    (
        "security.alpha.kubernetes.io/sysctls",
        r#"non-functional in v1.11+; use the "sysctls" field instead"#,
    ),
    (
        "security.alpha.kubernetes.io/unsafe-sysctls",
        r#"non-functional in v1.11+; use the "sysctls" field instead"#,
    ),
];

/// kube's deprecated volume plugins: the JSON key, the name kube's path gives it, the message.
const DEPRECATED_VOLUMES: [(&str, &str, &str); 9] = [
    (
        "photonPersistentDisk",
        "photonPersistentDisk",
        "deprecated in v1.11, non-functional in v1.16+",
    ),
    ("gitRepo", "gitRepo", "deprecated in v1.11"),
    (
        "scaleIO",
        "scaleIO",
        "deprecated in v1.16, non-functional in v1.22+",
    ),
    (
        "flocker",
        "flocker",
        "deprecated in v1.22, non-functional in v1.25+",
    ),
    (
        "storageos",
        "storageOS",
        "deprecated in v1.22, non-functional in v1.25+",
    ),
    (
        "quobyte",
        "quobyte",
        "deprecated in v1.22, non-functional in v1.25+",
    ),
    (
        "glusterfs",
        "glusterfs",
        "deprecated in v1.25, non-functional in v1.26+",
    ),
    (
        "cephfs",
        "cephfs",
        "deprecated in v1.28, non-functional in v1.31+",
    ),
    (
        "rbd",
        "rbd",
        "deprecated in v1.28, non-functional in v1.31+",
    ),
];

const SECCOMP_POD_ANNOTATION: &str = "seccomp.security.alpha.kubernetes.io/pod";
const SECCOMP_CONTAINER_ANNOTATION_PREFIX: &str = "container.seccomp.security.alpha.kubernetes.io/";
const APPARMOR_ANNOTATION_PREFIX: &str = "container.apparmor.security.beta.kubernetes.io/";
const NULL_SELECTOR: &str = "a null labelSelector results in matching no pod";

/// The warnings of a write of `object` of (`group`, `plural`) (`subresource` empty for the
/// object itself; `old` on updates), as kube's strategies give them.
#[must_use]
pub fn for_write(
    group: &str,
    plural: &str,
    subresource: &str,
    old: Option<&Value>,
    object: &Value,
) -> Vec<String> {
    if !subresource.is_empty() {
        return Vec::new();
    }
    if group.is_empty() && plural == "pods" {
        return warnings("", object, false);
    }
    let Some(path) = template_path(group, plural) else {
        return Vec::new();
    };
    let generation = |object: &Value| object.pointer("/metadata/generation").cloned();
    if old.is_some_and(|old| generation(old) == generation(object)) {
        return Vec::new();
    }
    let pointer = format!("/{}", path.replace('.', "/"));
    match object.pointer(&pointer).filter(|t| !t.is_null()) {
        Some(template) => warnings(&format!("{path}."), template, true),
        None => Vec::new(),
    }
}

/// A pod's or a template's (`template`) warnings; `prefix` leads every path (`spec.template.`).
fn warnings(prefix: &str, pod: &Value, template: bool) -> Vec<String> {
    let mut out = Vec::new();
    let spec = pod.get("spec").unwrap_or(&Value::Null);
    let annotations = pod.pointer("/metadata/annotations").unwrap_or(&Value::Null);
    let at = |path: &str| format!("{prefix}{path}");
    node_labels(&mut out, &at, spec);
    for (key, message) in DEPRECATED_ANNOTATIONS {
        if annotations.get(key).is_some() {
            out.push(format!(
                "{}: {message}",
                at(&format!("metadata.annotations[{key}]"))
            ));
        }
    }
    volumes(&mut out, &at, spec);
    duplicates(&mut out, &at, spec);
    if let Some(overhead) = spec.get("overhead") {
        for resource in BYTE_RESOURCES {
            fractional(&mut out, &at("spec.overhead"), overhead, resource);
        }
    }
    let has_field = |object: &Value, field: &str| {
        object
            .get("securityContext")
            .and_then(|sc| sc.get(field))
            .is_some_and(|f| !f.is_null())
    };
    if !has_field(spec, "seccompProfile") && annotations.get(SECCOMP_POD_ANNOTATION).is_some() {
        out.push(format!(
            r#"{}: non-functional in v1.27+; use the "seccompProfile" field instead"#,
            at(&format!("metadata.annotations[{SECCOMP_POD_ANNOTATION}]"))
        ));
    }
    let pod_app_armor = has_field(spec, "appArmorProfile");
    for (path, container) in containers(spec) {
        let name = text(container.get("name"));
        let seccomp = format!("{SECCOMP_CONTAINER_ANNOTATION_PREFIX}{name}");
        if !has_field(container, "seccompProfile") && annotations.get(&seccomp).is_some() {
            out.push(format!(
                r#"{}: non-functional in v1.27+; use the "seccompProfile" field instead"#,
                at(&format!("metadata.annotations[{seccomp}]"))
            ));
        }
        let app_armor = format!("{APPARMOR_ANNOTATION_PREFIX}{name}");
        if template
            && !pod_app_armor
            && !has_field(container, "appArmorProfile")
            && annotations.get(&app_armor).is_some()
        {
            out.push(format!(
                r#"{}: deprecated since v1.30; use the "appArmorProfile" field instead"#,
                at(&format!("metadata.annotations[{app_armor}]"))
            ));
        }
        let here = at(&path);
        for resource in BYTE_RESOURCES {
            for kind in ["limits", "requests"] {
                if let Some(amounts) = container.pointer(&format!("/resources/{kind}")) {
                    fractional(
                        &mut out,
                        &format!("{here}.resources.{kind}"),
                        amounts,
                        resource,
                    );
                }
            }
        }
        hidden_env(&mut out, &here, container);
    }
    ports(&mut out, &at, spec);
    if spec
        .get("terminationGracePeriodSeconds")
        .and_then(Value::as_i64)
        .is_some_and(|seconds| seconds < 0)
    {
        out.push(format!(
            "{}: must be >= 0; negative values are invalid and will be treated as 1",
            at("spec.terminationGracePeriodSeconds")
        ));
    }
    for affinity in ["podAffinity", "podAntiAffinity"] {
        let Some(terms) = spec.pointer(&format!("/affinity/{affinity}")) else {
            continue;
        };
        let base = format!("spec.affinity.{affinity}");
        for (i, term) in items(terms, "requiredDuringSchedulingIgnoredDuringExecution")
            .iter()
            .enumerate()
        {
            if null(term.get("labelSelector")) {
                out.push(format!(
                    "{}: {NULL_SELECTOR}",
                    at(&format!(
                        "{base}.requiredDuringSchedulingIgnoredDuringExecution[{i}].labelSelector"
                    ))
                ));
            }
        }
        for (i, term) in items(terms, "preferredDuringSchedulingIgnoredDuringExecution")
            .iter()
            .enumerate()
        {
            if null(term.pointer("/podAffinityTerm/labelSelector")) {
                out.push(format!(
                    "{}: {NULL_SELECTOR}",
                    at(&format!(
                        "{base}.preferredDuringSchedulingIgnoredDuringExecution[{i}].podAffinityTerm.labelSelector"
                    ))
                ));
            }
        }
    }
    out
}

fn null(value: Option<&Value>) -> bool {
    value.is_none_or(Value::is_null)
}

fn deprecated_node_label(key: &str) -> Option<&'static str> {
    DEPRECATED_NODE_LABELS
        .iter()
        .find(|(label, _)| *label == key)
        .map(|(_, message)| *message)
}

fn node_labels(out: &mut Vec<String>, at: &impl Fn(&str) -> String, spec: &Value) {
    if let Some(selector) = spec.get("nodeSelector").and_then(Value::as_object) {
        for key in selector.keys() {
            if let Some(message) = deprecated_node_label(key) {
                out.push(format!(
                    "{}: {message}",
                    at(&format!("spec.nodeSelector[{key}]"))
                ));
            }
        }
    }
    let term = |out: &mut Vec<String>, term: &Value, path: String| {
        for (j, expression) in items(term, "matchExpressions").iter().enumerate() {
            let key = text(expression.get("key"));
            if let Some(message) = deprecated_node_label(&key) {
                out.push(format!(
                    "{}: {key} is {message}",
                    at(&format!("{path}.matchExpressions[{j}].key"))
                ));
            }
        }
    };
    if let Some(node) = spec.pointer("/affinity/nodeAffinity") {
        let required = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution";
        if let Some(terms) = node.get("requiredDuringSchedulingIgnoredDuringExecution") {
            for (i, t) in items(terms, "nodeSelectorTerms").iter().enumerate() {
                term(out, t, format!("{required}.nodeSelectorTerms[{i}]"));
            }
        }
        let preferred =
            "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution";
        for (i, t) in items(node, "preferredDuringSchedulingIgnoredDuringExecution")
            .iter()
            .enumerate()
        {
            let preference = t.get("preference").unwrap_or(&Value::Null);
            term(out, preference, format!("{preferred}[{i}].preference"));
        }
    }
    for (i, constraint) in items(spec, "topologySpreadConstraints").iter().enumerate() {
        let path = format!("spec.topologySpreadConstraints[{i}]");
        let key = text(constraint.get("topologyKey"));
        if let Some(message) = deprecated_node_label(&key) {
            out.push(format!(
                "{}: {key} is {message}",
                at(&format!("{path}.topologyKey"))
            ));
        }
        if null(constraint.get("labelSelector")) {
            out.push(format!(
                "{}: {NULL_SELECTOR}",
                at(&format!("{path}.labelSelector"))
            ));
        }
    }
}

fn volumes(out: &mut Vec<String>, at: &impl Fn(&str) -> String, spec: &Value) {
    let volumes = items(spec, "volumes");
    for (i, volume) in volumes.iter().enumerate() {
        for (key, shown, message) in DEPRECATED_VOLUMES {
            if !null(volume.get(key)) {
                out.push(format!(
                    "{}: {message}",
                    at(&format!("spec.volumes[{i}].{shown}"))
                ));
            }
        }
    }
    let token_paths: HashSet<String> = volumes
        .iter()
        .flat_map(projected_sources)
        .filter_map(|source| source.get("serviceAccountToken"))
        .filter(|token| !token.is_null())
        .map(|token| text(token.get("path")))
        .collect();
    if token_paths.is_empty() {
        return;
    }
    for (i, volume) in volumes.iter().enumerate() {
        let base = format!("spec.volumes[{i}].projected.sources");
        let mut reused = |path: &Value, at_path: String| {
            let path = text(Some(path));
            if token_paths.contains(&path) {
                out.push(format!(
                    "{}: has duplicated path with ServiceAccountToken {path:?}",
                    at(&at_path)
                ));
            }
        };
        for source in projected_sources(volume) {
            for (key, shown) in [
                ("configMap", "configMap"),
                ("secret", "secrets"),
                ("downwardAPI", "downwardAPI"),
            ] {
                let Some(projection) = source.get(key).filter(|p| !p.is_null()) else {
                    continue;
                };
                for (j, item) in items(projection, "items").iter().enumerate() {
                    reused(
                        item.get("path").unwrap_or(&Value::Null),
                        format!("{base}.{shown}[{j}]"),
                    );
                }
            }
            if let Some(bundle) = source.get("clusterTrustBundle").filter(|b| !b.is_null()) {
                reused(
                    bundle.get("path").unwrap_or(&Value::Null),
                    format!("{base}.ClusterTrustBundle"),
                );
            }
        }
    }
}

/// A projected volume's sources (none for another volume).
fn projected_sources(volume: &Value) -> &[Value] {
    items(volume.get("projected").unwrap_or(&Value::Null), "sources")
}

/// Duplicate host alias IPs; duplicate and empty image pull secret names.
fn duplicates(out: &mut Vec<String>, at: &impl Fn(&str) -> String, spec: &Value) {
    let mut seen = HashSet::new();
    for (i, alias) in items(spec, "hostAliases").iter().enumerate() {
        let ip = text(alias.get("ip"));
        if !seen.insert(ip.clone()) {
            out.push(format!(
                "{}: duplicate ip {ip:?}",
                at(&format!("spec.hostAliases[{i}].ip"))
            ));
        }
    }
    let secrets = items(spec, "imagePullSecrets");
    let mut seen = HashSet::new();
    for (i, secret) in secrets.iter().enumerate() {
        let name = text(secret.get("name"));
        if !seen.insert(name.clone()) {
            out.push(format!(
                "{}: duplicate name {name:?}",
                at(&format!("spec.imagePullSecrets[{i}].name"))
            ));
        }
    }
    for (i, secret) in secrets.iter().enumerate() {
        let name = text(secret.get("name"));
        if name.is_empty() {
            out.push(format!(
                "{}: invalid empty name {name:?}",
                at(&format!("spec.imagePullSecrets[{i}].name"))
            ));
        }
    }
}

/// The resources counted in whole bytes.
const BYTE_RESOURCES: [&str; 2] = ["memory", "ephemeral-storage"];

/// A resource list's (at `path`) amount of `resource` when it is not whole bytes.
fn fractional(out: &mut Vec<String>, path: &str, amounts: &Value, resource: &str) {
    let Some(amount) = amounts.get(resource) else {
        return;
    };
    let written = text(Some(amount));
    let Some(quantity) = crate::quantity::Quantity::parse(&written) else {
        return;
    };
    if quantity.nanos() % 1_000_000_000 != 0 {
        let shown = crate::quantity::canonical(&written).unwrap_or(written);
        out.push(format!(
            "{path}[{resource}]: fractional byte value {shown:?} is invalid, must be an integer"
        ));
    }
}

/// Environment variables that hide an earlier one of the same name in a way apply may drop.
fn hidden_env(out: &mut Vec<String>, container_path: &str, container: &Value) {
    let env = items(container, "env");
    if env.len() < 2 {
        return;
    }
    let mut seen = HashSet::new();
    for (i, variable) in env.iter().enumerate() {
        let name = text(variable.get("name"));
        if seen.insert(name.clone()) {
            continue;
        }
        let value = text(variable.get("value"));
        let reference = format!("$({name})");
        if !null(variable.get("valueFrom")) || value == reference || !value.contains(&reference) {
            out.push(format!(
                "{container_path}.env[{i}]: hides previous definition of {name:?}, which may be dropped when using apply"
            ));
        }
    }
}

/// A container port as kube compares them: host IP and port, and its Go `%+v`.
struct Port {
    path: String,
    host_ip: String,
    host_port: i64,
}

fn ports(out: &mut Vec<String>, at: &impl Fn(&str) -> String, spec: &Value) {
    let mut all: HashMap<String, Vec<Port>> = HashMap::new();
    let mut names: HashMap<String, String> = HashMap::new();
    for (path, container) in containers(spec) {
        for (i, port) in items(container, "ports").iter().enumerate() {
            let here = at(&format!("{path}.ports[{i}]"));
            let host_ip = text(port.get("hostIP"));
            let host_port = port.get("hostPort").and_then(Value::as_i64).unwrap_or(0);
            let container_port = port
                .get("containerPort")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            let protocol = text(port.get("protocol"));
            if !host_ip.is_empty() && host_port == 0 {
                out.push(format!(
                    "{here}: hostIP set without hostPort: {{Name:{} HostPort:{host_port} ContainerPort:{container_port} Protocol:{protocol} HostIP:{host_ip}}}",
                    text(port.get("name"))
                ));
            }
            let others = all
                .entry(format!("{container_port}/{protocol}"))
                .or_default();
            for other in others.iter() {
                let (a, b) = (host_ip.is_empty(), other.host_ip.is_empty());
                let kind = if host_ip == other.host_ip && host_port == other.host_port {
                    "duplicate"
                } else if host_port == 0 || other.host_port == 0 {
                    "overlapping"
                } else if host_port == other.host_port && a != b {
                    "dangerously ambiguous"
                } else {
                    continue;
                };
                out.push(format!(
                    "{here}: {kind} port definition with {}",
                    other.path
                ));
            }
            let name = text(port.get("name"));
            if !name.is_empty() {
                match names.get(&name) {
                    Some(first) => out.push(format!(
                        "{here}: duplicate port name {name:?} with {first}, services and probes that select ports by name will use {first}"
                    )),
                    None => {
                        names.insert(name, here.clone());
                    }
                }
            }
            others.push(Port {
                path: here,
                host_ip,
                host_port,
            });
        }
    }
}

#[cfg(test)]
mod tests;

//! kube-apiserver's `NodeRestriction` admission plugin, off by default
//! (`--enable-admission-plugins=NodeRestriction`, as kubeadm runs it;
//! `plugin/pkg/admission/noderestriction`): what a kubelet's identity may write.
//!
//! ## Guarantees
//! - Only a node's requests are looked at: a user whose name starts with `system:node:` and
//!   who is in the group `system:nodes` (kube's `NodeIdentity`); `system:node:` alone is
//!   kube's 403 `could not determine node from user "system:node:"`.
//! - **Nodes**: a node writes only its own Node (`node "a" is not allowed to modify node
//!   "b"`); it may not create itself with a `configSource` nor change it to another non-nil
//!   one, may not change its taints (`node "a" is not allowed to modify taints`), and may not
//!   add, change or remove labels under `node-restriction.kubernetes.io/` or the
//!   `kubernetes.io` / `k8s.io` labels kubelets do not own (kube's `IsKubeletLabel` list:
//!   hostname, zone, region, instance type, OS, architecture, `kubelet.kubernetes.io/` and
//!   `node.kubernetes.io/`), in kube's words.
//! - **Pods**: a node creates only mirror pods (the `kubernetes.io/config.mirror`
//!   annotation) bound to itself, owned by exactly its own Node as controller (the owner's UID
//!   its Node's; no `blockOwnerDeletion`), naming no service account, secret, config map,
//!   cluster trust bundle or claim; it deletes only pods bound to itself, updates a pod only
//!   through `status` (a pod bound to itself, labels and resource claim statuses unchanged),
//!   and writes no other pod subresource but `eviction`, which is not looked at here.
//! - **Leases**: only in `kube-node-lease`, only the one named after the node.
//! - **CSINodes**: only the one named after the node (`can only access CSINode with the same
//!   name as the requesting node`).
//! - **PersistentVolumeClaims**: a node writes only their `status` (any other write is kube's
//!   `may only update PVC status`), and there changes only `status.capacity`,
//!   `status.conditions`, `status.allocatedResources` and `status.allocatedResourceStatuses`
//!   (kube 1.33's `RecoverVolumeExpansionFailure` is on by default): anything else is kube's
//!   `node "a" is not allowed to update fields other than status.quantity and
//!   status.conditions: ...` — where kube prints a `cmp.Diff` of the two claims, this server
//!   names the fields that differ.
//! - **ServiceAccount tokens** (`serviceaccounts/token`, served by `crate::http::token`): a
//!   node's TokenRequest must be bound to a pod ([`token_pod`]: `node requested token not
//!   bound to a pod`, `... with a pod binding without a uid`) that exists (its 404), has that
//!   UID and is scheduled on the node ([`token_pod_checked`], kube's words).
//! - **Evictions** (served outside the store's write path, `crate::http::pods`): a node evicts only pods bound to itself
//!   ([`eviction_checked`]: `node a can only evict pods with spec.nodeName set to itself`),
//!   checked before the eviction's own checks.
//! - **CertificateSigningRequests**: a node's request for the `kubelet-serving` or
//!   `kube-apiserver-client-kubelet` signer must name it (`CN=system:node:<node>`): kube's
//!   `can only create a node CSR with CN=system:node:a`, `unable to parse csr: ...`
//!   (kube 1.33's `AllowInsecureKubeletCertificateSigningRequests` is off by default).
//! - Not done: ResourceSlices (this server does not serve `resource.k8s.io`).

use serde_json::Value;
use watchkeeper_api::resources::ResourceDef;

/// kube's `nodeUserNamePrefix`.
const NODE_PREFIX: &str = "system:node:";
/// kube's `user.NodesGroup`.
const NODES_GROUP: &str = "system:nodes";
/// The annotation that marks a mirror pod.
const MIRROR: &str = "kubernetes.io/config.mirror";
/// Labels a kubelet sets on its Node (kube's `kubeletLabels`).
const KUBELET_LABELS: [&str; 11] = [
    "kubernetes.io/hostname",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "beta.kubernetes.io/instance-type",
    "node.kubernetes.io/instance-type",
    "kubernetes.io/os",
    "kubernetes.io/arch",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/arch",
];

/// The node a user is (kube's `NodeIdentity`): `None` for a user that is no node.
#[must_use]
pub fn node_of<'u>(name: &'u str, groups: &[String]) -> Option<&'u str> {
    let node = name.strip_prefix(NODE_PREFIX)?;
    groups.iter().any(|g| g == NODES_GROUP).then_some(node)
}

/// The node a user is, for the requests NodeRestriction checks outside the store's write
/// path (tokens, evictions): `None` for a user that is no node.
///
/// # Errors
/// kube's 403 message for `system:node:` without a name.
pub fn requesting_node<'u>(name: &'u str, groups: &[String]) -> Result<Option<&'u str>, String> {
    match node_of(name, groups) {
        Some("") => Err(format!("could not determine node from user {name:?}")),
        node => Ok(node),
    }
}

/// NodeRestriction on `node`'s eviction of `pod`.
///
/// # Errors
/// kube's 403 message.
pub fn eviction_checked(node: &str, pod: &Value) -> Result<(), String> {
    if text(pod, "/spec/nodeName") == node {
        Ok(())
    } else {
        Err(format!(
            "node {node} can only evict pods with spec.nodeName set to itself"
        ))
    }
}

/// A write a node makes.
#[derive(Clone, Copy, Debug)]
pub enum Write<'a> {
    /// A create of the object.
    Create(&'a Value),
    /// An update of the old object into the new.
    Update(&'a Value, &'a Value),
    /// A delete of the object.
    Delete(&'a Value),
}

/// Why a node's write is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// kube's 403, with its message.
    Forbidden(String),
    /// The node's own Node does not exist (kube passes the lookup's 404 on).
    NodeNotFound,
}

fn forbidden<T>(message: String) -> Result<T, Refusal> {
    Err(Refusal::Forbidden(message))
}

fn text<'v>(value: &'v Value, pointer: &str) -> &'v str {
    value
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// NodeRestriction on `write` of `def` (`subresource`) by `node`, whose Node's UID
/// `node_uid` looks up (`None`: no such Node).
///
/// # Errors
/// kube's refusal.
pub fn admit(
    node: &str,
    def: &ResourceDef,
    subresource: &str,
    write: Write<'_>,
    node_uid: &dyn Fn() -> Option<String>,
) -> Result<(), Refusal> {
    if node.is_empty() {
        return forbidden(format!(
            "could not determine node from user \"{NODE_PREFIX}\""
        ));
    }
    match (def.group.as_str(), def.plural.as_str()) {
        ("", "pods") => admit_pod(node, subresource, write, node_uid),
        ("", "nodes") => admit_node(node, write),
        ("coordination.k8s.io", "leases") => admit_lease(node, write),
        ("storage.k8s.io", "csinodes") => admit_csi_node(node, write),
        ("", "persistentvolumeclaims") => admit_claim(node, subresource, write),
        ("certificates.k8s.io", "certificatesigningrequests") => match (subresource, write) {
            ("", Write::Create(csr)) => admit_csr(node, csr),
            _ => Ok(()),
        },
        _ => Ok(()),
    }
}

fn admit_pod(
    node: &str,
    subresource: &str,
    write: Write<'_>,
    node_uid: &dyn Fn() -> Option<String>,
) -> Result<(), Refusal> {
    match (subresource, write) {
        ("", Write::Create(pod)) => admit_mirror_pod(node, pod, node_uid),
        ("", Write::Delete(pod)) if text(pod, "/spec/nodeName") != node => forbidden(format!(
            "node {node:?} can only delete pods with spec.nodeName set to itself"
        )),
        ("", Write::Delete(_)) => Ok(()),
        ("", Write::Update(..)) => forbidden(format!(
            "unexpected operation \"UPDATE\", node {node:?} can only create and delete mirror pods"
        )),
        ("status", Write::Update(old, new)) => {
            if text(old, "/spec/nodeName") != node {
                return forbidden(format!(
                    "node {node:?} can only update pod status for pods with spec.nodeName set to itself"
                ));
            }
            if labels(old) != labels(new) {
                return forbidden(format!(
                    "node {node:?} cannot update labels through pod status"
                ));
            }
            let claims = |pod: &Value| pod.pointer("/status/resourceClaimStatuses").cloned();
            if claims(old) != claims(new) {
                return forbidden(format!(
                    "node {node:?} cannot update resource claim statues"
                ));
            }
            Ok(())
        }
        ("status", Write::Create(_)) => forbidden("unexpected operation \"CREATE\"".to_owned()),
        ("status", Write::Delete(_)) => forbidden("unexpected operation \"DELETE\"".to_owned()),
        ("eviction", _) => Ok(()),
        (other, _) => forbidden(format!(
            "unexpected pod subresource {other:?}, only 'status' and 'eviction' are allowed"
        )),
    }
}

fn labels(object: &Value) -> serde_json::Map<String, Value> {
    object
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

fn admit_mirror_pod(
    node: &str,
    pod: &Value,
    node_uid: &dyn Fn() -> Option<String>,
) -> Result<(), Refusal> {
    if pod
        .pointer(&format!(
            "/metadata/annotations/{}",
            MIRROR.replace('/', "~1")
        ))
        .is_none()
    {
        return forbidden(format!(
            "pod does not have {MIRROR:?} annotation, node {node:?} can only create mirror pods"
        ));
    }
    if text(pod, "/spec/nodeName") != node {
        return forbidden(format!(
            "node {node:?} can only create pods with spec.nodeName set to itself"
        ));
    }
    let owners = pod
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    let owner = match owners {
        [one] => one,
        [] => {
            return forbidden(format!(
                "node {node:?} can only create pods with an owner reference set to itself"
            ));
        }
        _ => {
            return forbidden(format!(
                "node {node:?} can only create pods with a single owner reference set to itself"
            ));
        }
    };
    if text(owner, "/apiVersion") != "v1"
        || text(owner, "/kind") != "Node"
        || text(owner, "/name") != node
    {
        return forbidden(format!(
            "node {node:?} can only create pods with an owner reference set to itself"
        ));
    }
    if owner.get("controller").and_then(Value::as_bool) != Some(true) {
        return forbidden(format!(
            "node {node:?} can only create pods with a controller owner reference set to itself"
        ));
    }
    if owner.get("blockOwnerDeletion").and_then(Value::as_bool) == Some(true) {
        return forbidden(format!(
            "node {node:?} must not set blockOwnerDeletion on an owner reference"
        ));
    }
    let uid = node_uid().ok_or(Refusal::NodeNotFound)?;
    let owner_uid = text(owner, "/uid");
    if owner_uid != uid {
        return forbidden(format!(
            "node {node} UID mismatch: expected {owner_uid} got {uid}"
        ));
    }
    let spec = pod.get("spec").unwrap_or(&Value::Null);
    if !text(spec, "/serviceAccountName").is_empty() {
        return forbidden(format!(
            "node {node:?} can not create pods that reference a service account"
        ));
    }
    let (secrets, config_maps, bundles, claims) = references(spec);
    for (found, what) in [
        (secrets, "secrets"),
        (config_maps, "configmaps"),
        (bundles, "clustertrustbundles"),
        (claims, "persistentvolumeclaims"),
    ] {
        if found {
            return forbidden(format!(
                "node {node:?} can not create pods that reference {what}"
            ));
        }
    }
    Ok(())
}

/// Whether a pod spec references secrets, config maps, cluster trust bundles and claims
/// (kube's `VisitPodSecretNames` and `VisitPodConfigmapNames` over every container and
/// volume).
fn references(spec: &Value) -> (bool, bool, bool, bool) {
    let volumes = spec
        .get("volumes")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    let containers: Vec<&Value> = ["initContainers", "containers", "ephemeralContainers"]
        .iter()
        .filter_map(|list| spec.get(*list).and_then(Value::as_array))
        .flatten()
        .collect();
    let env_refers = |kind: &str| {
        containers.iter().any(|c| {
            let from = c
                .get("envFrom")
                .and_then(Value::as_array)
                .into_iter()
                .flatten();
            let env = c.get("env").and_then(Value::as_array).into_iter().flatten();
            from.clone().any(|f| f.get(format!("{kind}Ref")).is_some())
                || env
                    .clone()
                    .any(|e| e.pointer(&format!("/valueFrom/{kind}KeyRef")).is_some())
        })
    };
    let projected = |source: &str| {
        volumes.iter().any(|v| {
            v.pointer("/projected/sources")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .any(|s| s.get(source).is_some())
        })
    };
    let volume_has = |pointers: &[&str]| {
        volumes
            .iter()
            .any(|v| pointers.iter().any(|p| v.pointer(p).is_some()))
    };
    let secrets = spec
        .get("imagePullSecrets")
        .and_then(Value::as_array)
        .is_some_and(|s| !s.is_empty())
        || env_refers("secret")
        || projected("secret")
        || volume_has(&[
            "/secret",
            "/azureFile/secretName",
            "/cephfs/secretRef",
            "/cinder/secretRef",
            "/flexVolume/secretRef",
            "/iscsi/secretRef",
            "/rbd/secretRef",
            "/scaleIO/secretRef",
            "/storageos/secretRef",
            "/csi/nodePublishSecretRef",
        ]);
    let config_maps =
        env_refers("configMap") || projected("configMap") || volume_has(&["/configMap"]);
    let bundles = projected("clusterTrustBundle");
    let claims = volume_has(&["/persistentVolumeClaim"]);
    (secrets, config_maps, bundles, claims)
}

fn admit_node(node: &str, write: Write<'_>) -> Result<(), Refusal> {
    let (new, old) = match write {
        Write::Create(new) => (new, None),
        Write::Update(old, new) => (new, Some(old)),
        Write::Delete(old) => (old, None),
    };
    let requested = text(new, "/metadata/name");
    if requested != node {
        return forbidden(format!(
            "node {node:?} is not allowed to modify node {requested:?}"
        ));
    }
    let config_source = |n: &Value| {
        n.pointer("/spec/configSource")
            .filter(|c| !c.is_null())
            .cloned()
    };
    match write {
        Write::Create(_) => {
            if config_source(new).is_some() {
                return forbidden(format!(
                    "node {node:?} is not allowed to create pods with a non-nil configSource"
                ));
            }
            let forbidden_labels = forbidden_labels(&labels(new), &serde_json::Map::new());
            if !forbidden_labels.is_empty() {
                return forbidden(format!(
                    "node {node:?} is not allowed to set the following labels: {}",
                    forbidden_labels.join(", ")
                ));
            }
        }
        Write::Update(..) => {
            let old = old.unwrap_or(&Value::Null);
            if config_source(new).is_some() && config_source(new) != config_source(old) {
                return forbidden(format!(
                    "node {node:?} is not allowed to update configSource to a new non-nil configSource"
                ));
            }
            let taints = |n: &Value| {
                n.pointer("/spec/taints")
                    .filter(|t| t.as_array().is_some_and(|a| !a.is_empty()))
                    .cloned()
            };
            if taints(new) != taints(old) {
                return forbidden(format!("node {node:?} is not allowed to modify taints"));
            }
            let forbidden_labels = forbidden_labels(&labels(new), &labels(old));
            if !forbidden_labels.is_empty() {
                return forbidden(format!(
                    "is not allowed to modify labels: {}",
                    forbidden_labels.join(", ")
                ));
            }
        }
        Write::Delete(_) => {}
    }
    Ok(())
}

/// The label keys changed between `new` and `old` that a node may not set (kube's
/// `getForbiddenLabels`), sorted.
fn forbidden_labels(
    new: &serde_json::Map<String, Value>,
    old: &serde_json::Map<String, Value>,
) -> Vec<String> {
    let changed: std::collections::BTreeSet<&String> = new
        .iter()
        .filter(|(k, v)| old.get(*k) != Some(v))
        .chain(old.iter().filter(|(k, v)| new.get(*k) != Some(v)))
        .map(|(k, _)| k)
        .collect();
    let under = |namespace: &str, domain: &str| {
        namespace == domain || namespace.ends_with(&format!(".{domain}"))
    };
    changed
        .into_iter()
        .filter(|key| {
            let namespace = key.split_once('/').map_or("", |(ns, _)| ns);
            let restricted = under(namespace, "node-restriction.kubernetes.io");
            let kubernetes = under(namespace, "kubernetes.io") || under(namespace, "k8s.io");
            let kubelet = KUBELET_LABELS.contains(&key.as_str())
                || under(namespace, "kubelet.kubernetes.io")
                || under(namespace, "node.kubernetes.io");
            restricted || (kubernetes && !kubelet)
        })
        .cloned()
        .collect()
}

fn admit_lease(node: &str, write: Write<'_>) -> Result<(), Refusal> {
    let lease = match write {
        Write::Create(lease) | Write::Update(_, lease) | Write::Delete(lease) => lease,
    };
    if text(lease, "/metadata/namespace") != "kube-node-lease" {
        return forbidden(
            "can only access leases in the \"kube-node-lease\" system namespace".to_owned(),
        );
    }
    if text(lease, "/metadata/name") != node {
        return forbidden(
            "can only access node lease with the same name as the requesting node".to_owned(),
        );
    }
    Ok(())
}

/// The pod a node's TokenRequest must be bound to (its `spec.boundObjectRef`, `reference`):
/// its name and UID.
///
/// # Errors
/// kube's 403 message.
pub fn token_pod(reference: Option<&Value>) -> Result<(&str, &str), String> {
    let field = |key: &str| reference.map_or("", |r| text(r, &format!("/{key}")));
    if reference.is_none()
        || field("apiVersion") != "v1"
        || field("kind") != "Pod"
        || field("name").is_empty()
    {
        return Err("node requested token not bound to a pod".to_owned());
    }
    if field("uid").is_empty() {
        return Err("node requested token with a pod binding without a uid".to_owned());
    }
    Ok((field("name"), field("uid")))
}

/// NodeRestriction on a node's TokenRequest bound to the pod `pod` (found by [`token_pod`]'s
/// name) through a reference of UID `uid`.
///
/// # Errors
/// kube's 403 message.
pub fn token_pod_checked(node: &str, uid: &str, pod: &Value) -> Result<(), String> {
    if text(pod, "/metadata/uid") != uid {
        return Err(format!(
            "the UID in the bound object reference ({uid}) does not match the UID in record. The object might have been deleted and then recreated"
        ));
    }
    if text(pod, "/spec/nodeName") != node {
        return Err("node requested token bound to a pod scheduled on a different node".to_owned());
    }
    Ok(())
}

/// The signers whose requests a node makes for itself.
const KUBELET_SIGNERS: [&str; 2] = [
    "kubernetes.io/kubelet-serving",
    "kubernetes.io/kube-apiserver-client-kubelet",
];

fn admit_csr(node: &str, csr: &Value) -> Result<(), Refusal> {
    if !KUBELET_SIGNERS.contains(&text(csr, "/spec/signerName")) {
        return Ok(());
    }
    let (_, common_name) = watchkeeper_api::certificates::csr_subject(text(csr, "/spec/request"))
        .or_else(|error| forbidden(format!("unable to parse csr: {error}")))?;
    if common_name == format!("{NODE_PREFIX}{node}") {
        Ok(())
    } else {
        forbidden(format!(
            "can only create a node CSR with CN={NODE_PREFIX}{node}"
        ))
    }
}

fn admit_csi_node(node: &str, write: Write<'_>) -> Result<(), Refusal> {
    let (Write::Create(object) | Write::Update(object, _) | Write::Delete(object)) = write;
    if text(object, "/metadata/name") == node {
        Ok(())
    } else {
        forbidden("can only access CSINode with the same name as the requesting node".to_owned())
    }
}

/// A claim as kube compares it for a node's status write: without the resource version,
/// the managed fields and the status fields a node may change.
fn claim_compared(claim: &Value) -> Value {
    let mut claim = claim.clone();
    if let Some(metadata) = claim.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.remove("resourceVersion");
        metadata.remove("managedFields");
    }
    if let Some(status) = claim.get_mut("status").and_then(Value::as_object_mut) {
        for key in [
            "capacity",
            "conditions",
            "allocatedResources",
            "allocatedResourceStatuses",
        ] {
            status.remove(key);
        }
    }
    if let Some(object) = claim.as_object_mut() {
        // Go's struct: an empty status is no status.
        if object
            .get("status")
            .is_some_and(|s| s.as_object().is_some_and(serde_json::Map::is_empty))
        {
            object.remove("status");
        }
    }
    claim
}

/// The top-level fields (`metadata.labels`, `status.phase`, `spec`) that differ between
/// `a` and `b`.
fn differing(a: &Value, b: &Value) -> Vec<String> {
    let mut paths = Vec::new();
    let empty = serde_json::Map::new();
    let fields = |v: &Value| v.as_object().cloned().unwrap_or_default();
    let (a, b) = (fields(a), fields(b));
    let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    for key in keys {
        let (x, y) = (a.get(key), b.get(key));
        if x == y {
            continue;
        }
        let nested = matches!(key.as_str(), "metadata" | "status");
        let inner = |v: Option<&Value>| v.and_then(Value::as_object).unwrap_or(&empty).clone();
        if nested {
            let (x, y) = (inner(x), inner(y));
            let names: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for name in names {
                if x.get(name) != y.get(name) {
                    paths.push(format!("{key}.{name}"));
                }
            }
        } else {
            paths.push(key.clone());
        }
    }
    paths
}

fn admit_claim(node: &str, subresource: &str, write: Write<'_>) -> Result<(), Refusal> {
    if subresource != "status" {
        return forbidden("may only update PVC status".to_owned());
    }
    let Write::Update(old, new) = write else {
        let operation = if matches!(write, Write::Create(_)) {
            "CREATE"
        } else {
            "DELETE"
        };
        return forbidden(format!("unexpected operation {operation:?}"));
    };
    let (old, new) = (claim_compared(old), claim_compared(new));
    if old == new {
        return Ok(());
    }
    forbidden(format!(
        "node {node:?} is not allowed to update fields other than status.quantity and status.conditions: {}",
        differing(&old, &new).join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn def(group: &str, plural: &str) -> ResourceDef {
        watchkeeper_api::resources::builtin_resources()
            .into_iter()
            .find(|d| d.group == group && d.plural == plural)
            .unwrap()
    }

    fn refused(result: Result<(), Refusal>) -> String {
        match result {
            Err(Refusal::Forbidden(message)) => message,
            other => panic!("not refused: {other:?}"),
        }
    }

    const UID: &str = "uid-a";

    fn uid() -> Option<String> {
        Some(UID.to_owned())
    }

    fn mirror(node: &str) -> Value {
        json!({"metadata": {"name": "m", "annotations": {MIRROR: "x"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node,
                "uid": UID, "controller": true}]},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]}})
    }

    #[test]
    fn only_nodes_are_nodes() {
        let nodes = vec!["system:nodes".to_owned()];
        assert_eq!(node_of("system:node:a", &nodes), Some("a"));
        assert_eq!(node_of("system:node:a", &[]), None);
        assert_eq!(node_of("alice", &nodes), None);
        let pods = def("", "pods");
        assert_eq!(
            refused(admit("", &pods, "", Write::Create(&mirror("a")), &uid)),
            "could not determine node from user \"system:node:\""
        );
    }

    #[test]
    fn a_node_creates_only_its_own_mirror_pods() {
        let pods = def("", "pods");
        let create = |pod: &Value| admit("a", &pods, "", Write::Create(pod), &uid);
        assert_eq!(create(&mirror("a")), Ok(()));
        let mut plain = mirror("a");
        plain["metadata"]["annotations"] = json!({});
        assert_eq!(
            refused(create(&plain)),
            "pod does not have \"kubernetes.io/config.mirror\" annotation, node \"a\" can only create mirror pods"
        );
        let mut elsewhere = mirror("a");
        elsewhere["spec"]["nodeName"] = json!("b");
        assert_eq!(
            refused(create(&elsewhere)),
            "node \"a\" can only create pods with spec.nodeName set to itself"
        );
        let mut secret = mirror("a");
        secret["spec"]["volumes"] = json!([{"name": "s", "secret": {"secretName": "x"}}]);
        assert_eq!(
            refused(create(&secret)),
            "node \"a\" can not create pods that reference secrets"
        );
        let mut stranger = mirror("a");
        stranger["metadata"]["ownerReferences"][0]["uid"] = json!("other");
        assert_eq!(
            refused(create(&stranger)),
            "node a UID mismatch: expected other got uid-a"
        );
        assert_eq!(
            admit("a", &pods, "", Write::Create(&mirror("a")), &|| None),
            Err(Refusal::NodeNotFound)
        );
        let bound = json!({"metadata": {"name": "p"}, "spec": {"nodeName": "b"}});
        assert_eq!(
            refused(admit("a", &pods, "", Write::Delete(&bound), &uid)),
            "node \"a\" can only delete pods with spec.nodeName set to itself"
        );
        assert_eq!(
            refused(admit(
                "a",
                &pods,
                "status",
                Write::Update(&bound, &bound),
                &uid
            )),
            "node \"a\" can only update pod status for pods with spec.nodeName set to itself"
        );
        assert_eq!(
            refused(admit("a", &pods, "binding", Write::Create(&bound), &uid)),
            "unexpected pod subresource \"binding\", only 'status' and 'eviction' are allowed"
        );
    }

    #[test]
    fn a_node_writes_only_itself_and_not_its_taints_or_restricted_labels() {
        let nodes = def("", "nodes");
        let node =
            |name: &str, labels: Value| json!({"metadata": {"name": name, "labels": labels}});
        let a = node("a", json!({"kubernetes.io/hostname": "a"}));
        assert_eq!(admit("a", &nodes, "", Write::Create(&a), &uid), Ok(()));
        assert_eq!(
            refused(admit(
                "a",
                &nodes,
                "",
                Write::Create(&node("b", json!({}))),
                &uid
            )),
            "node \"a\" is not allowed to modify node \"b\""
        );
        let steering = node(
            "a",
            json!({"node-restriction.kubernetes.io/pool": "x", "node-role.kubernetes.io/master": ""}),
        );
        assert_eq!(
            refused(admit("a", &nodes, "", Write::Create(&steering), &uid)),
            "node \"a\" is not allowed to set the following labels: node-restriction.kubernetes.io/pool, node-role.kubernetes.io/master"
        );
        let mut tainted = a.clone();
        tainted["spec"] = json!({"taints": [{"key": "k", "effect": "NoSchedule"}]});
        assert_eq!(
            refused(admit("a", &nodes, "", Write::Update(&tainted, &a), &uid)),
            "node \"a\" is not allowed to modify taints"
        );
        let relabelled = node("a", json!({"kubernetes.io/hostname": "a", "team": "x"}));
        assert_eq!(
            admit("a", &nodes, "status", Write::Update(&a, &relabelled), &uid),
            Ok(())
        );
    }

    #[test]
    fn a_node_holds_only_its_lease() {
        let leases = def("coordination.k8s.io", "leases");
        let lease = |ns: &str, name: &str| json!({"metadata": {"namespace": ns, "name": name}});
        assert_eq!(
            admit(
                "a",
                &leases,
                "",
                Write::Create(&lease("kube-node-lease", "a")),
                &uid
            ),
            Ok(())
        );
        assert_eq!(
            refused(admit(
                "a",
                &leases,
                "",
                Write::Create(&lease("kube-node-lease", "b")),
                &uid
            )),
            "can only access node lease with the same name as the requesting node"
        );
        assert_eq!(
            refused(admit(
                "a",
                &leases,
                "",
                Write::Create(&lease("default", "a")),
                &uid
            )),
            "can only access leases in the \"kube-node-lease\" system namespace"
        );
    }

    #[test]
    fn csi_nodes_and_claims_are_the_node_s_own() {
        let csinodes = def("storage.k8s.io", "csinodes");
        let named = |name: &str| json!({"metadata": {"name": name}});
        assert!(admit("a", &csinodes, "", Write::Create(&named("a")), &uid).is_ok());
        assert_eq!(
            refused(admit("a", &csinodes, "", Write::Delete(&named("b")), &uid)),
            "can only access CSINode with the same name as the requesting node"
        );
        let claims = def("", "persistentvolumeclaims");
        let claim = json!({"metadata": {"name": "c", "resourceVersion": "1",
            "labels": {"app": "x"}}, "spec": {"resources": {"requests": {"storage": "1Gi"}}},
            "status": {"phase": "Bound"}});
        assert_eq!(
            refused(admit("a", &claims, "", Write::Create(&claim), &uid)),
            "may only update PVC status"
        );
        let mut grown = claim.clone();
        grown["metadata"]["resourceVersion"] = json!("2");
        grown["status"]["capacity"] = json!({"storage": "2Gi"});
        grown["status"]["conditions"] = json!([{"type": "Resizing", "status": "True"}]);
        assert!(admit("a", &claims, "status", Write::Update(&claim, &grown), &uid).is_ok());
        let mut relabelled = grown.clone();
        relabelled["metadata"]["labels"] = json!({"app": "y"});
        relabelled["status"]["phase"] = json!("Lost");
        assert_eq!(
            refused(admit(
                "a",
                &claims,
                "status",
                Write::Update(&claim, &relabelled),
                &uid
            )),
            r#"node "a" is not allowed to update fields other than status.quantity and status.conditions: metadata.labels, status.phase"#
        );
    }

    #[test]
    fn a_node_s_tokens_are_bound_to_its_pods() {
        assert_eq!(
            token_pod(None).unwrap_err(),
            "node requested token not bound to a pod"
        );
        let secret = json!({"apiVersion": "v1", "kind": "Secret", "name": "s", "uid": "u"});
        assert!(token_pod(Some(&secret)).is_err());
        let no_uid = json!({"apiVersion": "v1", "kind": "Pod", "name": "p"});
        assert_eq!(
            token_pod(Some(&no_uid)).unwrap_err(),
            "node requested token with a pod binding without a uid"
        );
        let bound = json!({"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u"});
        assert_eq!(token_pod(Some(&bound)).unwrap(), ("p", "u"));
        let pod = json!({"metadata": {"uid": "u"}, "spec": {"nodeName": "a"}});
        assert!(token_pod_checked("a", "u", &pod).is_ok());
        assert_eq!(
            token_pod_checked("b", "u", &pod).unwrap_err(),
            "node requested token bound to a pod scheduled on a different node"
        );
        assert!(
            token_pod_checked("a", "v", &pod)
                .unwrap_err()
                .starts_with("the UID in the bound object reference (v) does not match")
        );
    }
}

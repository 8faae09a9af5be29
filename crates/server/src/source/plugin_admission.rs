//! kube-apiserver's admission plugins that look at one object (and, for some, the cached
//! StorageClasses or the authorization chain): `AlwaysPullImages`, `DenyServiceExternalIPs`,
//! `LimitPodHardAntiAffinityTopology`, `ExtendedResourceToleration`, `PodNodeSelector`,
//! `AlwaysDeny` (off by
//! default, turned on by `--enable-admission-plugins`) and `CertificateSubjectRestriction`,
//! `CertificateApproval`, `CertificateSigning`, `PersistentVolumeClaimResize`,
//! `StorageObjectInUseProtection` (on by default)
//! (`plugin/pkg/admission/alwayspullimages`, `network/denyserviceexternalips`, `antiaffinity`,
//! `extendedresourcetoleration`, `podnodeselector`, `deny`, `certificates/*`, `storage/persistentvolume/resize`). Each runs only when its switch in
//! [`AdmissionPlugins`] is on; none looks at a subresource's write.
//!
//! ## Guarantees
//! - **AlwaysPullImages** ([`mutate`], with the in-process mutating plugins): a created pod's
//!   containers, init containers and ephemeral containers all get `imagePullPolicy: Always`;
//!   so does an updated pod's, when the update brings an image none of the old pod's
//!   containers had (kube's `isUpdateWithNoNewImages`: an update that keeps the images keeps
//!   the policies).
//! - **ExtendedResourceToleration** ([`mutate`], creates and updates): a pod whose containers
//!   or init containers request an extended resource (a name with a `/` outside
//!   `kubernetes.io/`, not `requests.`-prefixed) tolerates the `NoSchedule` taint of that
//!   name (`operator: Exists`), added in name order unless it already has that toleration.
//! - **PodNodeSelector** ([`namespace_node_selector`], creates only): a pod created in a
//!   namespace annotated `scheduler.alpha.kubernetes.io/node-selector: "k=v,..."` gets those
//!   labels in its `nodeSelector`; one that asks another value for a key is kube's 403 `pod node
//!   label selector conflicts with its namespace node label selector`; an annotation that is
//!   not `k=v` pairs is the 500 of kube's plain error `invalid selector: [...]`. Its
//!   configuration (`podNodeSelectorPluginConfig`, in `--admission-control-config-file` or
//!   kube's legacy unversioned file: [`node_selectors`]) gives namespaces without the
//!   annotation the `clusterDefaultNodeSelector`, and bounds a namespace's pods to the
//!   whitelist named after it: a pod whose (merged) selector has a label the whitelist does
//!   not is kube's 403 `pod node label selector labels conflict with its namespace
//!   whitelist`. Without one there is no default and no whitelist, as in kube.
//! - **StorageObjectInUseProtection** ([`mutate`], on by default, creates only): a created
//!   PersistentVolumeClaim gets the finalizer `kubernetes.io/pvc-protection`, a
//!   PersistentVolume `kubernetes.io/pv-protection` (once); `crate::controllers::storage_protection`
//!   removes them once the object is deleted and nothing uses it.
//! - **DenyServiceExternalIPs** ([`validate`]): a Service created with `spec.externalIPs`, or
//!   updated to one its old self did not list, is kube's 403 `Use of external IPs is denied by
//!   admission control`; removing addresses is allowed.
//! - **LimitPodHardAntiAffinityTopology** ([`validate`]): a pod (create or update) whose
//!   required pod anti-affinity terms use another topology key than
//!   `kubernetes.io/hostname` is kube's 403 `affinity.PodAntiAffinity.RequiredDuringScheduling
//!   has TopologyKey zone but only key kubernetes.io/hostname is allowed`.
//! - **CertificateSubjectRestriction** ([`validate`], creates only): a
//!   CertificateSigningRequest for the `kubernetes.io/kube-apiserver-client` signer whose
//!   request's subject names the organization `system:masters` is kube's 403 `use of
//!   kubernetes.io/kube-apiserver-client signer with system:masters group is not allowed`; a
//!   request that does not decode is kube's 403 `failed to parse CSR: ...`.
//! - **PersistentVolumeClaimResize** ([`claim_resize`], on by default, updates only): a claim
//!   whose `spec.resources.requests.storage` grows must be `Bound` (kube's 403 `Only bound
//!   persistent volume claims can be expanded`) and keep a storage class (its
//!   `volume.beta.kubernetes.io/storage-class` annotation, else `spec.storageClassName`) that
//!   exists and sets `allowVolumeExpansion: true` (kube's 403 `only dynamically provisioned pvc
//!   can be resized and the storageclass that provisions the pvc must support resize`).
//! - **CertificateApproval** and **CertificateSigning** ([`signer_permission`], on by
//!   default, updates only): a write of a CertificateSigningRequest's `approval` needs the
//!   user be authorized to `approve` `signers` (`certificates.k8s.io`) named after the old
//!   request's signer, or `<domain>/*` (kube's `IsAuthorizedForSignerName`), else kube's 403
//!   `user not permitted to approve requests with signerName "example.com/x"`; a write of its
//!   `status` that changes the certificate or the conditions needs `sign` the same way (`user
//!   not permitted to sign requests with signerName ...`). The authorization chain is
//!   `--authorization-mode`'s (the default AlwaysAllow allows all).
//! - **OwnerReferencesPermissionEnforcement** ([`owner_references`], creates and updates,
//!   not `pods/status`): an update that changes `metadata.ownerReferences` needs `delete` on
//!   the object (kube's 403 `cannot set an ownerRef on a resource you can't delete: <reason>,
//!   <error>`); a write that newly sets `blockOwnerDeletion: true` on a reference needs
//!   `update` on the owner's `finalizers` subresource (`cannot set blockOwnerDeletion if an
//!   ownerReference refers to a resource you can't set finalizers on: ...`), the owner's
//!   resource found from its `apiVersion` and `kind` among the served ones (`cannot set
//!   blockOwnerDeletion in this case because cannot find RESTMapping for APIVersion v1 Kind
//!   Nope: no matches for kind "Nope" in version "v1"`).
//! - **AlwaysDeny** ([`deny_all`], deprecated in kube): every create, update and delete is
//!   kube's 403 `admission control is denying all modifications`.
//! - Not done: AlwaysPullImages' validating half (which refuses a policy a mutating webhook
//!   set back to another value after this plugin ran).

use std::collections::BTreeSet;

use serde_json::Value;
use watchkeeper_api::resources::ResourceDef;

use super::pod_admission::AdmissionPlugins;

/// The signer `CertificateSubjectRestriction` guards.
const CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client";

/// The only topology key `LimitPodHardAntiAffinityTopology` allows.
const HOSTNAME: &str = "kubernetes.io/hostname";

/// The kinds of container a pod spec lists (kube's `VisitContainersWithPath`).
const CONTAINER_LISTS: [&str; 3] = ["initContainers", "containers", "ephemeralContainers"];

/// Whether the write is of `group`/`plural` itself (no subresource).
fn is(def: &ResourceDef, subresource: &str, group: &str, plural: &str) -> bool {
    subresource.is_empty() && def.group == group && def.plural == plural
}

/// The images of `pod`'s containers of every kind.
fn images(pod: &Value) -> BTreeSet<&str> {
    CONTAINER_LISTS
        .iter()
        .filter_map(|list| pod.pointer(&format!("/spec/{list}")))
        .filter_map(Value::as_array)
        .flatten()
        .map(|c| c.get("image").and_then(Value::as_str).unwrap_or_default())
        .collect()
}

/// The mutating plugins of this module on a write of `object` over `old` (`None` on a
/// create), in place.
pub fn mutate(
    plugins: &AdmissionPlugins,
    def: &ResourceDef,
    subresource: &str,
    old: Option<&Value>,
    object: &mut Value,
) {
    if plugins.storage_object_in_use_protection && old.is_none() {
        protect(def, subresource, object);
    }
    if !is(def, subresource, "", "pods") {
        return;
    }
    if plugins.extended_resource_toleration {
        tolerate_extended_resources(object);
    }
    if !plugins.always_pull_images {
        return;
    }
    if let Some(old) = old {
        let before = images(old);
        if images(object).iter().all(|image| before.contains(image)) {
            return;
        }
    }
    for list in CONTAINER_LISTS {
        let containers = object
            .pointer_mut(&format!("/spec/{list}"))
            .and_then(Value::as_array_mut);
        for container in containers.into_iter().flatten() {
            if let Some(container) = container.as_object_mut() {
                container.insert("imagePullPolicy".to_owned(), Value::from("Always"));
            }
        }
    }
}

/// The claims' finalizer (StorageObjectInUseProtection adds it; the controller
/// `controllers::storage_protection` removes it once nothing uses the claim).
pub const PVC_FINALIZER: &str = "kubernetes.io/pvc-protection";

/// The volumes' finalizer (as [`PVC_FINALIZER`]).
pub const PV_FINALIZER: &str = "kubernetes.io/pv-protection";

/// StorageObjectInUseProtection on a created claim or volume: its finalizer, once.
fn protect(def: &ResourceDef, subresource: &str, object: &mut Value) {
    let finalizer = if is(def, subresource, "", "persistentvolumeclaims") {
        PVC_FINALIZER
    } else if is(def, subresource, "", "persistentvolumes") {
        PV_FINALIZER
    } else {
        return;
    };
    let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let finalizers = metadata
        .entry("finalizers")
        .or_insert_with(|| Value::Array(Vec::new()));
    if let Some(list) = finalizers.as_array_mut()
        && !list.iter().any(|f| f == finalizer)
    {
        list.push(Value::from(finalizer));
    }
}

/// ExtendedResourceToleration on `pod`, in place.
fn tolerate_extended_resources(pod: &mut Value) {
    let extended: BTreeSet<String> = ["containers", "initContainers"]
        .iter()
        .filter_map(|list| pod.pointer(&format!("/spec/{list}")))
        .filter_map(Value::as_array)
        .flatten()
        .filter_map(|c| c.pointer("/resources/requests").and_then(Value::as_object))
        .flat_map(serde_json::Map::keys)
        .filter(|name| {
            name.contains('/') && !name.contains("kubernetes.io/") && !name.starts_with("requests.")
        })
        .cloned()
        .collect();
    if extended.is_empty() {
        return;
    }
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    let tolerations = spec
        .entry("tolerations")
        .or_insert_with(|| Value::Array(Vec::new()));
    let Some(tolerations) = tolerations.as_array_mut() else {
        return;
    };
    for name in extended {
        let wanted = serde_json::json!({"key": name, "operator": "Exists", "effect": "NoSchedule"});
        let held = tolerations.iter().any(|t| {
            let field = |k: &str| t.get(k).and_then(Value::as_str).unwrap_or_default();
            field("key") == name
                && field("operator") == "Exists"
                && field("effect") == "NoSchedule"
                && field("value").is_empty()
        });
        if !held {
            tolerations.push(wanted);
        }
    }
}

/// The validating plugins of this module on a write of `object` over `old` (`None` on a
/// create).
///
/// # Errors
/// The refusing plugin's message (kube's 403 Forbidden of the object).
pub fn validate(
    plugins: &AdmissionPlugins,
    def: &ResourceDef,
    subresource: &str,
    old: Option<&Value>,
    object: &Value,
) -> Result<(), String> {
    if let Some(denied) = deny_all(plugins) {
        return Err(denied);
    }
    if plugins.deny_service_external_ips && is(def, subresource, "", "services") {
        deny_external_ips(old, object)?;
    }
    if plugins.limit_pod_hard_anti_affinity_topology && is(def, subresource, "", "pods") {
        hostname_anti_affinity(object)?;
    }
    if plugins.certificate_subject_restriction
        && old.is_none()
        && is(
            def,
            subresource,
            "certificates.k8s.io",
            "certificatesigningrequests",
        )
    {
        no_masters(object)?;
    }
    Ok(())
}

/// PersistentVolumeClaimResize on an update of the claim `old` into `new`; `classes` gives
/// the StorageClasses (asked only when the request grows).
///
/// # Errors
/// kube's refusal.
pub fn claim_resize(
    def: &ResourceDef,
    subresource: &str,
    (old, new): (&Value, &Value),
    classes: &dyn Fn() -> Vec<Value>,
) -> Result<(), String> {
    if !is(def, subresource, "", "persistentvolumeclaims") {
        return Ok(());
    }
    let storage = |claim: &Value| {
        claim
            .pointer("/spec/resources/requests/storage")
            .and_then(Value::as_str)
            .and_then(watchkeeper_api::quantity::Quantity::parse)
            .map_or(0, watchkeeper_api::quantity::Quantity::nanos)
    };
    if storage(new) <= storage(old) {
        return Ok(());
    }
    if old.pointer("/status/phase").and_then(Value::as_str) != Some("Bound") {
        return Err("Only bound persistent volume claims can be expanded".to_owned());
    }
    let class = |claim: &Value| {
        claim
            .pointer("/metadata/annotations/volume.beta.kubernetes.io~1storage-class")
            .or_else(|| claim.pointer("/spec/storageClassName"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let name = class(new);
    let expands = !name.is_empty()
        && name == class(old)
        && classes().iter().any(|c| {
            c.pointer("/metadata/name").and_then(Value::as_str) == Some(name.as_str())
                && c.get("allowVolumeExpansion").and_then(Value::as_bool) == Some(true)
        });
    if expands {
        Ok(())
    } else {
        Err("only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize".to_owned())
    }
}

/// CertificateApproval and CertificateSigning on an update of the request `old` into `new`;
/// `authorized(verb, signer)` asks the authorization chain about `signers`.
///
/// # Errors
/// kube's refusal.
pub fn signer_permission(
    plugins: &AdmissionPlugins,
    def: &ResourceDef,
    subresource: &str,
    (old, new): (&Value, &Value),
    authorized: &dyn Fn(&str, &str) -> bool,
) -> Result<(), String> {
    if def.group != "certificates.k8s.io" || def.plural != "certificatesigningrequests" {
        return Ok(());
    }
    let verb = match subresource {
        "approval" if plugins.certificate_approval => "approve",
        "status" if plugins.certificate_signing => {
            let field = |csr: &Value, key: &str| {
                csr.pointer(&format!("/status/{key}"))
                    .filter(|v| !v.is_null() && v.as_array().is_none_or(|a| !a.is_empty()))
                    .cloned()
            };
            let same = |key: &str| field(old, key) == field(new, key);
            if same("certificate") && same("conditions") {
                return Ok(());
            }
            "sign"
        }
        _ => return Ok(()),
    };
    let signer = old
        .pointer("/spec/signerName")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let domain = signer.split('/').next().unwrap_or_default();
    if authorized(verb, signer) || authorized(verb, &format!("{domain}/*")) {
        return Ok(());
    }
    Err(format!(
        "user not permitted to {verb} requests with signerName {signer:?}"
    ))
}

/// What an admission plugin asks the authorization chain (kube's `AttributesRecord` of a
/// resource request).
#[derive(Clone, Copy, Debug)]
pub struct Access<'a> {
    /// The verb.
    pub verb: &'a str,
    /// The API group.
    pub group: &'a str,
    /// The resource (plural).
    pub resource: &'a str,
    /// The subresource, or empty.
    pub subresource: &'a str,
    /// The namespace, or empty.
    pub namespace: &'a str,
    /// The object's name.
    pub name: &'a str,
}

/// The `ownerReferences` of `object`.
fn owner_refs(object: &Value) -> &[Value] {
    object
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice)
}

/// OwnerReferencesPermissionEnforcement on a write of `new` (of `def`, `subresource`) over
/// `old` (`None` on a create). `authorize` answers `None` when allowed, else kube's
/// `<reason>, <error>`; `plural_of(apiVersion, kind)` finds a served resource.
///
/// # Errors
/// kube's refusal.
pub fn owner_references(
    def: &ResourceDef,
    subresource: &str,
    (old, new): (Option<&Value>, &Value),
    authorize: &dyn Fn(&Access<'_>) -> Option<String>,
    plural_of: &dyn Fn(&str, &str) -> Option<String>,
) -> Result<(), String> {
    if def.group.is_empty() && def.plural == "pods" && subresource == "status" {
        return Ok(());
    }
    let before = old.map_or(&[][..], owner_refs);
    if owner_refs(new) == before {
        return Ok(());
    }
    let text = |value: &Value, key: &str| {
        value
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let metadata = new.get("metadata").unwrap_or(&Value::Null);
    let (namespace, name) = (text(metadata, "namespace"), text(metadata, "name"));
    if old.is_some() {
        let access = Access {
            verb: "delete",
            group: &def.group,
            resource: &def.plural,
            subresource,
            namespace: &namespace,
            name: &name,
        };
        if let Some(why) = authorize(&access) {
            return Err(format!(
                "cannot set an ownerRef on a resource you can't delete: {why}"
            ));
        }
    }
    let blocking = |r: &Value| r.get("blockOwnerDeletion").and_then(Value::as_bool) == Some(true);
    let newly_blocking = owner_refs(new).iter().filter(|r| blocking(r)).filter(|r| {
        !before
            .iter()
            .any(|b| b.get("uid") == r.get("uid") && blocking(b))
    });
    for reference in newly_blocking {
        let (api_version, kind) = (text(reference, "apiVersion"), text(reference, "kind"));
        let plural = plural_of(&api_version, &kind).ok_or_else(|| {
            format!(
                "cannot set blockOwnerDeletion in this case because cannot find RESTMapping for APIVersion {api_version} Kind {kind}: no matches for kind {kind:?} in version {api_version:?}"
            )
        })?;
        let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
        let access = Access {
            verb: "update",
            group,
            resource: &plural,
            subresource: "finalizers",
            namespace: &namespace,
            name: &text(reference, "name"),
        };
        if let Some(why) = authorize(&access) {
            return Err(format!(
                "cannot set blockOwnerDeletion if an ownerReference refers to a resource you can't set finalizers on: {why}"
            ));
        }
    }
    Ok(())
}

/// AlwaysDeny's refusal, when it runs.
#[must_use]
pub fn deny_all(plugins: &AdmissionPlugins) -> Option<String> {
    plugins
        .always_deny
        .then(|| "admission control is denying all modifications".to_owned())
}

/// Why PodNodeSelector refuses a pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SelectorRefusal {
    /// kube's 403, with its message.
    Forbidden(String),
    /// kube's 500 `Internal error occurred: ...`, with its message.
    Internal(String),
    /// kube's 500 of a plain error (no reason), with its message.
    Plain(String),
}

/// PodNodeSelector's configuration (kube's `podNodeSelectorPluginConfig`): the cluster's
/// default node selector (`clusterDefaultNodeSelector`) and each namespace's whitelist (the
/// namespace's name), as `k=v,...` selectors.
pub type NodeSelectors = std::collections::BTreeMap<String, String>;

/// PodNodeSelector's configuration from `value` (the legacy file, or an
/// `AdmissionConfiguration` entry's): its `podNodeSelectorPluginConfig` map, the key matched
/// without regard to case as Go's decoder matches it. Like kube's `readConfig`, this never
/// fails: what does not decode is left out (here: entries whose value is not a string).
#[must_use]
pub fn node_selectors(value: Option<&Value>) -> NodeSelectors {
    let map = value
        .and_then(Value::as_object)
        .and_then(|fields| {
            fields
                .iter()
                .find(|(key, _)| key.eq_ignore_ascii_case("podNodeSelectorPluginConfig"))
        })
        .and_then(|(_, map)| map.as_object());
    map.into_iter()
        .flatten()
        .filter_map(|(key, value)| Some((key.clone(), value.as_str()?.to_owned())))
        .collect()
}

/// kube's `labels.ConvertSelectorToLabelsMap`: `k=v,...` as labels.
fn selector_labels(text: &str) -> Result<serde_json::Map<String, Value>, SelectorRefusal> {
    let mut selector = serde_json::Map::new();
    for label in text.split(',').filter(|_| !text.is_empty()) {
        let parts: Vec<&str> = label.split('=').collect();
        let [key, value] = parts.as_slice() else {
            return Err(SelectorRefusal::Plain(format!(
                "invalid selector: [{}]",
                parts.join(" ")
            )));
        };
        selector.insert(key.trim().to_owned(), Value::from(value.trim()));
    }
    Ok(selector)
}

/// PodNodeSelector on a created `pod` in the namespace named `name`, whose object is
/// `namespace` (`None`: it does not exist), with the cluster's `selectors`, in place.
///
/// # Errors
/// kube's refusal.
pub fn namespace_node_selector(
    pod: &mut Value,
    namespace: Option<&Value>,
    name: &str,
    selectors: &NodeSelectors,
) -> Result<(), SelectorRefusal> {
    let namespace = namespace
        .ok_or_else(|| SelectorRefusal::Internal(format!("namespace {name} does not exist")))?;
    let annotation = namespace
        .pointer("/metadata/annotations/scheduler.alpha.kubernetes.io~1node-selector")
        .and_then(Value::as_str);
    let cluster_default = || {
        selectors
            .get("clusterDefaultNodeSelector")
            .map_or("", String::as_str)
    };
    let mut selector = selector_labels(annotation.unwrap_or_else(cluster_default))?;
    let own = pod
        .pointer("/spec/nodeSelector")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    if selector
        .iter()
        .any(|(key, value)| own.get(key).is_some_and(|v| v != value))
    {
        return Err(SelectorRefusal::Forbidden(
            "pod node label selector conflicts with its namespace node label selector".to_owned(),
        ));
    }
    selector.extend(own);
    let whitelist = selector_labels(selectors.get(name).map_or("", String::as_str))?;
    let allowed = whitelist.is_empty()
        || selector
            .iter()
            .all(|(key, value)| whitelist.get(key) == Some(value));
    if !allowed {
        return Err(SelectorRefusal::Forbidden(
            "pod node label selector labels conflict with its namespace whitelist".to_owned(),
        ));
    }
    if !selector.is_empty()
        && let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut)
    {
        spec.insert("nodeSelector".to_owned(), Value::Object(selector));
    }
    Ok(())
}

/// `spec.externalIPs` of a Service.
fn external_ips(service: &Value) -> Vec<&str> {
    service
        .pointer("/spec/externalIPs")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

/// DenyServiceExternalIPs: only addresses `old` already had.
fn deny_external_ips(old: Option<&Value>, service: &Value) -> Result<(), String> {
    let before = old.map(external_ips).unwrap_or_default();
    if external_ips(service).iter().all(|ip| before.contains(ip)) {
        Ok(())
    } else {
        Err("Use of external IPs is denied by admission control".to_owned())
    }
}

/// LimitPodHardAntiAffinityTopology: required anti-affinity terms only per host.
fn hostname_anti_affinity(pod: &Value) -> Result<(), String> {
    let terms = pod
        .pointer("/spec/affinity/podAntiAffinity/requiredDuringSchedulingIgnoredDuringExecution")
        .and_then(Value::as_array)
        .into_iter()
        .flatten();
    for term in terms {
        let key = term
            .get("topologyKey")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if key != HOSTNAME {
            return Err(format!(
                "affinity.PodAntiAffinity.RequiredDuringScheduling has TopologyKey {key} but only key {HOSTNAME} is allowed"
            ));
        }
    }
    Ok(())
}

/// CertificateSubjectRestriction: no `system:masters` organization for the client signer.
fn no_masters(csr: &Value) -> Result<(), String> {
    if csr.pointer("/spec/signerName").and_then(Value::as_str) != Some(CLIENT_SIGNER) {
        return Ok(());
    }
    let request = csr
        .pointer("/spec/request")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let (organizations, _) = watchkeeper_api::certificates::csr_subject(request)
        .map_err(|error| format!("failed to parse CSR: {error}"))?;
    if organizations.iter().any(|o| o == "system:masters") {
        return Err(format!(
            "use of {CLIENT_SIGNER} signer with system:masters group is not allowed"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine as _;
    use serde_json::json;

    fn all_on() -> AdmissionPlugins {
        AdmissionPlugins {
            always_pull_images: true,
            deny_service_external_ips: true,
            limit_pod_hard_anti_affinity_topology: true,
            ..AdmissionPlugins::default()
        }
    }

    fn def(group: &str, plural: &str) -> ResourceDef {
        watchkeeper_api::resources::builtin_resources()
            .into_iter()
            .find(|d| d.group == group && d.plural == plural)
            .unwrap()
    }

    #[test]
    fn pull_policies_become_always_only_with_new_images() {
        let pods = def("", "pods");
        let mut pod = json!({"spec": {"containers": [{"name": "c", "image": "a",
            "imagePullPolicy": "IfNotPresent"}], "initContainers": [{"name": "i", "image": "b"}]}});
        mutate(&all_on(), &pods, "", None, &mut pod);
        assert_eq!(pod["spec"]["containers"][0]["imagePullPolicy"], "Always");
        assert_eq!(
            pod["spec"]["initContainers"][0]["imagePullPolicy"],
            "Always"
        );
        // An update with the old images keeps what it says.
        let old = pod.clone();
        pod["spec"]["containers"][0]["imagePullPolicy"] = json!("Never");
        mutate(&all_on(), &pods, "", Some(&old), &mut pod);
        assert_eq!(pod["spec"]["containers"][0]["imagePullPolicy"], "Never");
        pod["spec"]["containers"][0]["image"] = json!("new");
        mutate(&all_on(), &pods, "", Some(&old), &mut pod);
        assert_eq!(pod["spec"]["containers"][0]["imagePullPolicy"], "Always");
        // Off, or a subresource: untouched.
        let mut other = json!({"spec": {"containers": [{"name": "c", "image": "a"}]}});
        mutate(&AdmissionPlugins::default(), &pods, "", None, &mut other);
        mutate(&all_on(), &pods, "status", None, &mut other);
        assert!(
            other["spec"]["containers"][0]
                .get("imagePullPolicy")
                .is_none()
        );
    }

    #[test]
    fn extended_resources_are_tolerated_once() {
        let pods = def("", "pods");
        let on = AdmissionPlugins {
            extended_resource_toleration: true,
            ..AdmissionPlugins::default()
        };
        let mut pod = json!({"spec": {"containers": [{"name": "c", "resources": {"requests":
            {"cpu": "1", "nvidia.com/gpu": "1", "hugepages-2Mi": "1Mi",
             "example.kubernetes.io/x": "1"}}}],
            "initContainers": [{"name": "i", "resources": {"requests": {"acme.io/fpga": "1"}}}]}});
        mutate(&on, &pods, "", None, &mut pod);
        let expected = json!([
            {"key": "acme.io/fpga", "operator": "Exists", "effect": "NoSchedule"},
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]);
        assert_eq!(pod["spec"]["tolerations"], expected);
        mutate(&on, &pods, "", Some(&pod.clone()), &mut pod);
        assert_eq!(pod["spec"]["tolerations"], expected);
    }

    #[test]
    fn namespaces_give_pods_their_node_selector() {
        let namespace = |selector: &str| {
            json!({"metadata": {"name": "ns", "annotations":
                {"scheduler.alpha.kubernetes.io/node-selector": selector}}})
        };
        let mut pod = json!({"spec": {"nodeSelector": {"disk": "ssd"}}});
        let none = NodeSelectors::new();
        namespace_node_selector(
            &mut pod,
            Some(&namespace("zone=a, env = prod")),
            "ns",
            &none,
        )
        .unwrap();
        assert_eq!(
            pod["spec"]["nodeSelector"],
            json!({"disk": "ssd", "zone": "a", "env": "prod"})
        );
        let mut other = json!({"spec": {"nodeSelector": {"zone": "b"}}});
        assert_eq!(
            namespace_node_selector(&mut other, Some(&namespace("zone=a")), "ns", &none),
            Err(SelectorRefusal::Forbidden(
                "pod node label selector conflicts with its namespace node label selector"
                    .to_owned()
            ))
        );
        assert_eq!(
            namespace_node_selector(&mut other, Some(&namespace("zone")), "ns", &none),
            Err(SelectorRefusal::Plain(
                "invalid selector: [zone]".to_owned()
            ))
        );
        let mut plain = json!({"spec": {}});
        let bare = json!({"metadata": {"name": "ns"}});
        namespace_node_selector(&mut plain, Some(&bare), "ns", &none).unwrap();
        assert!(plain["spec"].get("nodeSelector").is_none());
        assert_eq!(
            namespace_node_selector(&mut plain, None, "gone", &none),
            Err(SelectorRefusal::Internal(
                "namespace gone does not exist".to_owned()
            ))
        );
        // The configuration: a cluster default for namespaces without the annotation, and
        // a namespace's whitelist.
        let config = json!({"podNodeSelectorPluginConfig": {
            "clusterDefaultNodeSelector": "tier=shared", "ns": "tier=shared,disk=ssd", "n": 1}});
        let selectors = node_selectors(Some(&config));
        assert_eq!(selectors.len(), 2);
        let mut defaulted = json!({"spec": {"nodeSelector": {"disk": "ssd"}}});
        namespace_node_selector(&mut defaulted, Some(&bare), "ns", &selectors).unwrap();
        assert_eq!(
            defaulted["spec"]["nodeSelector"],
            json!({"tier": "shared", "disk": "ssd"})
        );
        let mut outside = json!({"spec": {"nodeSelector": {"disk": "hdd"}}});
        assert_eq!(
            namespace_node_selector(&mut outside, Some(&bare), "ns", &selectors),
            Err(SelectorRefusal::Forbidden(
                "pod node label selector labels conflict with its namespace whitelist".to_owned()
            ))
        );
        // The annotation wins over the cluster default (and the whitelist still holds).
        let mut annotated = json!({"spec": {}});
        namespace_node_selector(
            &mut annotated,
            Some(&namespace("disk=ssd")),
            "ns",
            &selectors,
        )
        .unwrap();
        assert_eq!(annotated["spec"]["nodeSelector"], json!({"disk": "ssd"}));
    }

    #[test]
    fn external_ips_only_shrink() {
        let services = def("", "services");
        let with = |ips: Value| json!({"spec": {"externalIPs": ips}});
        let denied = "Use of external IPs is denied by admission control";
        let on = all_on();
        assert_eq!(
            validate(&on, &services, "", None, &with(json!(["1.2.3.4"]))).unwrap_err(),
            denied
        );
        assert!(validate(&on, &services, "", None, &with(json!([]))).is_ok());
        let old = with(json!(["1.2.3.4", "5.6.7.8"]));
        assert!(validate(&on, &services, "", Some(&old), &with(json!(["5.6.7.8"]))).is_ok());
        assert_eq!(
            validate(&on, &services, "", Some(&old), &with(json!(["9.9.9.9"]))).unwrap_err(),
            denied
        );
        let off = AdmissionPlugins::default();
        assert!(validate(&off, &services, "", None, &with(json!(["1.2.3.4"]))).is_ok());
    }

    #[test]
    fn anti_affinity_is_per_host_only() {
        let pods = def("", "pods");
        let pod = |key: &str| {
            json!({"spec": {"affinity": {"podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": HOSTNAME}, {"topologyKey": key}]}}}})
        };
        assert!(validate(&all_on(), &pods, "", None, &pod(HOSTNAME)).is_ok());
        assert_eq!(
            validate(&all_on(), &pods, "", None, &pod("zone")).unwrap_err(),
            "affinity.PodAntiAffinity.RequiredDuringScheduling has TopologyKey zone but only key kubernetes.io/hostname is allowed"
        );
    }

    #[test]
    fn claims_grow_only_bound_and_by_an_expandable_class() {
        let claims = def("", "persistentvolumeclaims");
        let claim = |size: &str, phase: &str, class: &str| {
            json!({"spec": {"storageClassName": class,
                "resources": {"requests": {"storage": size}}}, "status": {"phase": phase}})
        };
        let classes = || {
            vec![
                json!({"metadata": {"name": "fast"}, "allowVolumeExpansion": true}),
                json!({"metadata": {"name": "fixed"}}),
            ]
        };
        let resize = |old: &Value, new: &Value| claim_resize(&claims, "", (old, new), &classes);
        let bound = claim("1Gi", "Bound", "fast");
        assert!(resize(&bound, &claim("2Gi", "Bound", "fast")).is_ok());
        assert!(resize(&bound, &claim("1024Mi", "Bound", "fast")).is_ok());
        assert_eq!(
            resize(
                &claim("1Gi", "Pending", "fast"),
                &claim("2Gi", "Pending", "fast")
            )
            .unwrap_err(),
            "Only bound persistent volume claims can be expanded"
        );
        let refused = "only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize";
        let fixed = claim("1Gi", "Bound", "fixed");
        assert_eq!(
            resize(&fixed, &claim("2Gi", "Bound", "fixed")).unwrap_err(),
            refused
        );
        let missing = claim("1Gi", "Bound", "gone");
        assert_eq!(
            resize(&missing, &claim("2Gi", "Bound", "gone")).unwrap_err(),
            refused
        );
    }

    #[test]
    fn approving_and_signing_need_the_signer_s_permission() {
        let csrs = def("certificates.k8s.io", "certificatesigningrequests");
        let on = AdmissionPlugins::default();
        let old = json!({"spec": {"signerName": "example.com/x"}});
        let approved = json!({"spec": {"signerName": "example.com/x"},
            "status": {"conditions": [{"type": "Approved", "status": "True"}]}});
        let nobody = |_: &str, _: &str| false;
        assert_eq!(
            signer_permission(&on, &csrs, "approval", (&old, &approved), &nobody).unwrap_err(),
            r#"user not permitted to approve requests with signerName "example.com/x""#
        );
        let domain = |verb: &str, name: &str| verb == "approve" && name == "example.com/*";
        assert!(signer_permission(&on, &csrs, "approval", (&old, &approved), &domain).is_ok());
        let mut signed = approved.clone();
        signed["status"]["certificate"] = json!("Y2VydA==");
        assert_eq!(
            signer_permission(&on, &csrs, "status", (&approved, &signed), &domain).unwrap_err(),
            r#"user not permitted to sign requests with signerName "example.com/x""#
        );
        // A status write that changes neither is not looked at; off, nothing is.
        assert!(signer_permission(&on, &csrs, "status", (&signed, &signed), &nobody).is_ok());
        let off = AdmissionPlugins::none();
        assert!(signer_permission(&off, &csrs, "approval", (&old, &approved), &nobody).is_ok());
    }

    #[test]
    fn owner_references_need_delete_and_the_owner_s_finalizers() {
        let pods = def("", "pods");
        let with = |refs: Value| json!({"metadata": {"name": "p", "namespace": "ns", "ownerReferences": refs}});
        let owner = |block: bool| {
            json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u",
                "blockOwnerDeletion": block}])
        };
        let plural_of = |version: &str, kind: &str| {
            (version == "apps/v1" && kind == "ReplicaSet").then(|| "replicasets".to_owned())
        };
        let denied =
            |access: &Access<'_>| (access.verb == "update").then(|| "no rule, <nil>".to_owned());
        let plain = with(json!([]));
        // A create may set references, not a blocking one without the owner's finalizers.
        assert!(
            owner_references(&pods, "", (None, &with(owner(false))), &denied, &plural_of).is_ok()
        );
        assert_eq!(
            owner_references(&pods, "", (None, &with(owner(true))), &denied, &plural_of)
                .unwrap_err(),
            "cannot set blockOwnerDeletion if an ownerReference refers to a resource you can't set finalizers on: no rule, <nil>"
        );
        let no_delete =
            |access: &Access<'_>| (access.verb == "delete").then(|| ", <nil>".to_owned());
        assert_eq!(
            owner_references(
                &pods,
                "",
                (Some(&plain), &with(owner(false))),
                &no_delete,
                &plural_of
            )
            .unwrap_err(),
            "cannot set an ownerRef on a resource you can't delete: , <nil>"
        );
        // Unchanged references, or pods/status: not looked at.
        let owned = with(owner(true));
        assert!(owner_references(&pods, "", (Some(&owned), &owned), &denied, &plural_of).is_ok());
        assert!(
            owner_references(&pods, "status", (Some(&plain), &owned), &denied, &plural_of).is_ok()
        );
        let stranger = with(
            json!([{"apiVersion": "v1", "kind": "Nope", "name": "x", "uid": "u",
            "blockOwnerDeletion": true}]),
        );
        assert_eq!(
            owner_references(&pods, "", (None, &stranger), &|_| None, &plural_of).unwrap_err(),
            r#"cannot set blockOwnerDeletion in this case because cannot find RESTMapping for APIVersion v1 Kind Nope: no matches for kind "Nope" in version "v1""#
        );
    }

    fn csr(organization: &str, signer: &str) -> Value {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::new()).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, organization);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "me");
        let pem = params.serialize_request(&key).unwrap().pem().unwrap();
        let request = base64::engine::general_purpose::STANDARD.encode(pem);
        json!({"spec": {"signerName": signer, "request": request}})
    }

    #[test]
    fn masters_cannot_ask_the_client_signer() {
        let csrs = def("certificates.k8s.io", "certificatesigningrequests");
        let on = AdmissionPlugins::default();
        assert_eq!(
            validate(&on, &csrs, "", None, &csr("system:masters", CLIENT_SIGNER)).unwrap_err(),
            "use of kubernetes.io/kube-apiserver-client signer with system:masters group is not allowed"
        );
        assert!(validate(&on, &csrs, "", None, &csr("team", CLIENT_SIGNER)).is_ok());
        let kubelet = "kubernetes.io/kube-apiserver-client-kubelet";
        assert!(validate(&on, &csrs, "", None, &csr("system:masters", kubelet)).is_ok());
        let garbage = json!({"spec": {"signerName": CLIENT_SIGNER, "request": "aGVsbG8="}});
        assert_eq!(
            validate(&on, &csrs, "", None, &garbage).unwrap_err(),
            "failed to parse CSR: PEM block type must be CERTIFICATE REQUEST"
        );
        // Updates (approval, status) are not looked at.
        let old = csr("system:masters", CLIENT_SIGNER);
        assert!(validate(&on, &csrs, "", Some(&old), &old).is_ok());
    }
}

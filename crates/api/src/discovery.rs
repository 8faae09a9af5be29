//! Discovery documents: `/version`, `/api`, `/apis`, `/apis/{group}`, `/api/v1` and
//! `/apis/{group}/{version}`, in the legacy (unaggregated) shapes that kubectl, kube-rs and the
//! Python client accept, and the aggregated documents (`apidiscovery.k8s.io/v2` and `v2beta1`,
//! `APIGroupDiscoveryList`) that kubectl, client-go and kube-rs ask for first on `/api` and
//! `/apis` ([`negotiate_discovery`], [`aggregated_discovery`]).
//!
//! Guarantees:
//! - The aggregated and legacy documents describe the same resources, verbs and subresources
//!   (both are built from the same [`ResourceDef`]s and [`subresources`]); a test compares them.
//! - Only what the server serves is listed: `status` where kube-apiserver has it (and every
//!   custom resource, whose `/status` the server serves), `namespaces/finalize`.
//! - Each stored resource of an `APIResourceList` carries kube's `storageVersionHash` of the
//!   version its objects are stored at ([`storage_version_hash`]; a test compares every
//!   built-in one with kube's own table); reviews, `componentstatuses` and subresources have
//!   none, as in kube.
//! - The aggregated document carries an `ETag` (a hash of its JSON); a request whose
//!   `If-None-Match` names it gets 304, as kube-apiserver does.

use serde_json::{Value, json};

use crate::resources::{ResourceDef, compare_kube_versions};

/// The Kubernetes minor version the server reports. kubectl-dispatcher picks its bundled
/// kubectl by this number, so it must be one it ships (1.27-1.33).
pub const KUBERNETES_MINOR: &str = "33";

/// The verbs every served resource supports.
pub const VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// Resources that take only `create` and are never stored or watched — the access and
/// identity reviews the server answers from its authorizer: `(group, version, plural, kind,
/// namespaced)`. Discovery lists them with the verb `create`.
pub const REVIEW_RESOURCES: &[(&str, &str, &str, &str, bool)] = &[
    (
        "authorization.k8s.io",
        "v1",
        "selfsubjectaccessreviews",
        "SelfSubjectAccessReview",
        false,
    ),
    (
        "authorization.k8s.io",
        "v1",
        "subjectaccessreviews",
        "SubjectAccessReview",
        false,
    ),
    (
        "authorization.k8s.io",
        "v1",
        "localsubjectaccessreviews",
        "LocalSubjectAccessReview",
        true,
    ),
    (
        "authorization.k8s.io",
        "v1",
        "selfsubjectrulesreviews",
        "SelfSubjectRulesReview",
        false,
    ),
    (
        "authentication.k8s.io",
        "v1",
        "selfsubjectreviews",
        "SelfSubjectReview",
        false,
    ),
    (
        "authentication.k8s.io",
        "v1",
        "tokenreviews",
        "TokenReview",
        false,
    ),
];

fn is_review(def: &ResourceDef) -> bool {
    REVIEW_RESOURCES
        .iter()
        .any(|(g, v, p, _, _)| *g == def.group && *v == def.version && *p == def.plural)
        || is_bindings(def)
}

/// Whether `def` is one of the resources kube-apiserver answers only to create, without
/// storage: the reviews and core `bindings`.
#[must_use]
pub fn is_create_only(def: &ResourceDef) -> bool {
    is_review(def)
}

/// The create-only resources ([`is_create_only`]) as discovery lists them.
#[must_use]
pub fn create_only_defs() -> Vec<ResourceDef> {
    let mut defs = vec![ResourceDef::named("", "v1", "bindings", "Binding", true)];
    defs.extend(
        REVIEW_RESOURCES
            .iter()
            .map(|&(group, version, plural, kind, namespaced)| {
                ResourceDef::named(group, version, plural, kind, namespaced)
            }),
    );
    defs
}

/// Core `v1` `bindings`: the older form of `pods/binding` kube-apiserver still lists (first
/// of the core resources), create only and without storage of its own, as the reviews.
fn is_bindings(def: &ResourceDef) -> bool {
    def.group.is_empty() && def.version == "v1" && def.plural == "bindings"
}

/// The served resources plus the review resources, core `bindings` and the read-only
/// `componentstatuses` (beside the other core `v1` resources), as discovery lists them.
fn with_reviews(defs: &[ResourceDef]) -> Vec<ResourceDef> {
    let mut all = defs.to_vec();
    for &(group, version, plural, kind, namespaced) in REVIEW_RESOURCES {
        if !all.iter().any(|d| d.group == group && d.plural == plural) {
            all.push(ResourceDef::named(group, version, plural, kind, namespaced));
        }
    }
    if let Some(first_core) = all
        .iter()
        .position(|d| d.group.is_empty() && d.version == "v1")
        && !all.iter().any(is_bindings)
    {
        all.insert(
            first_core,
            ResourceDef::named("", "v1", "bindings", "Binding", true),
        );
    }
    if let Some(last_core) = all
        .iter()
        .rposition(|d| d.group.is_empty() && d.version == "v1")
        && !all.iter().any(crate::componentstatus::is_component_status)
    {
        all.insert(last_core + 1, crate::componentstatus::def());
    }
    all
}

/// The verbs discovery lists for a resource.
fn verbs_of(def: &ResourceDef) -> &'static [&'static str] {
    if is_review(def) {
        &["create"]
    } else if crate::componentstatus::is_component_status(def) {
        crate::componentstatus::VERBS
    } else {
        VERBS
    }
}

/// The verbs of a `status` subresource.
const STATUS_VERBS: &[&str] = &["get", "patch", "update"];

/// Built-in resources that have no `status` subresource in kube-apiserver.
const WITHOUT_STATUS: &[(&str, &str)] = &[
    ("", "configmaps"),
    ("", "secrets"),
    ("", "endpoints"),
    ("", "events"),
    ("", "serviceaccounts"),
    ("coordination.k8s.io", "leases"),
    ("discovery.k8s.io", "endpointslices"),
    ("", "limitranges"),
    ("", "podtemplates"),
    ("networking.k8s.io", "networkpolicies"),
    ("networking.k8s.io", "ingressclasses"),
    ("networking.k8s.io", "ipaddresses"),
    ("rbac.authorization.k8s.io", "roles"),
    ("rbac.authorization.k8s.io", "rolebindings"),
    ("rbac.authorization.k8s.io", "clusterroles"),
    ("rbac.authorization.k8s.io", "clusterrolebindings"),
    ("storage.k8s.io", "storageclasses"),
    ("scheduling.k8s.io", "priorityclasses"),
    (
        "admissionregistration.k8s.io",
        "validatingwebhookconfigurations",
    ),
    (
        "admissionregistration.k8s.io",
        "mutatingwebhookconfigurations",
    ),
    ("node.k8s.io", "runtimeclasses"),
    ("storage.k8s.io", "csidrivers"),
    ("storage.k8s.io", "csinodes"),
    ("storage.k8s.io", "csistoragecapacities"),
    ("apps", "controllerrevisions"),
    (
        "admissionregistration.k8s.io",
        "validatingadmissionpolicybindings",
    ),
];

/// Whether a resource has the `scale` subresource (an `autoscaling/v1` `Scale` over its
/// `spec.replicas`).
#[must_use]
pub fn has_scale(def: &ResourceDef) -> bool {
    matches!(
        (def.group.as_str(), def.plural.as_str()),
        ("apps", "deployments" | "replicasets" | "statefulsets") | ("", "replicationcontrollers")
    )
}

/// The subresources served for a resource, each with its verbs: those its CRD declares for a
/// CRD's resource; otherwise `status` unless the resource is a built-in without one, `scale`
/// where [`has_scale`], and the kind's own (`finalize` for namespaces, pods' `binding`,
/// `ephemeralcontainers`, `eviction` and `resize`, CSRs' `approval`, service accounts' `token`).
#[must_use]
pub fn subresources(def: &ResourceDef) -> Vec<(&'static str, &'static [&'static str])> {
    let mut out = Vec::new();
    if is_review(def) || crate::componentstatus::is_component_status(def) {
        return out;
    }
    if let Some(declared) = &def.declared_subresources {
        for sub in ["status", "scale"] {
            if declared.iter().any(|d| d == sub) {
                out.push((sub, STATUS_VERBS));
            }
        }
        return out;
    }
    if !WITHOUT_STATUS.contains(&(def.group.as_str(), def.plural.as_str())) {
        out.push(("status", STATUS_VERBS));
    }
    if has_scale(def) {
        out.push(("scale", STATUS_VERBS));
    }
    if crate::certificates::has_approval(def) {
        out.push((crate::certificates::APPROVAL, STATUS_VERBS));
    }
    if def.group.is_empty() && def.plural == "namespaces" {
        out.push(("finalize", &["update"][..]));
    }
    if def.group.is_empty() && def.plural == "pods" {
        out.push(("attach", &["create", "get"][..]));
        out.push(("binding", &["create"][..]));
        out.push((crate::ephemeral::SUBRESOURCE, STATUS_VERBS));
        out.push(("eviction", &["create"][..]));
        out.push(("exec", &["create", "get"][..]));
        out.push(("log", &["get"][..]));
        out.push(("portforward", &["create", "get"][..]));
        out.push(("proxy", PROXY_VERBS));
        out.push((crate::resize::SUBRESOURCE, STATUS_VERBS));
    }
    if def.group.is_empty() && matches!(def.plural.as_str(), "services" | "nodes") {
        out.push(("proxy", PROXY_VERBS));
    }
    if def.group.is_empty() && def.plural == "serviceaccounts" {
        out.push(("token", &["create"][..]));
    }
    out
}

/// The verbs of the `proxy` subresources (kube's connect verbs for every proxied method).
const PROXY_VERBS: &[&str] = &["create", "delete", "get", "patch", "update"];

/// [`subresource_kind`] of `def`'s subresource `sub`: a `proxy` subresource's is its
/// resource's options kind (`PodProxyOptions`, `ServiceProxyOptions`, `NodeProxyOptions`).
#[must_use]
pub fn subresource_kind_of(
    def: &ResourceDef,
    sub: &str,
) -> Option<(&'static str, &'static str, &'static str)> {
    if sub == "proxy" && def.group.is_empty() {
        let kind = match def.plural.as_str() {
            "pods" => "PodProxyOptions",
            "services" => "ServiceProxyOptions",
            "nodes" => "NodeProxyOptions",
            _ => return None,
        };
        return Some(("", "v1", kind));
    }
    subresource_kind(sub)
}

/// The kind a subresource takes and answers, as `(group, version, kind)`, where it is not the
/// resource's own: `Scale`, `Binding`, `Eviction`.
#[must_use]
pub fn subresource_kind(sub: &str) -> Option<(&'static str, &'static str, &'static str)> {
    match sub {
        "scale" => Some(("autoscaling", "v1", "Scale")),
        "binding" => Some(("", "v1", "Binding")),
        "eviction" => Some(("policy", "v1", "Eviction")),
        "attach" => Some(("", "v1", "PodAttachOptions")),
        "exec" => Some(("", "v1", "PodExecOptions")),
        "portforward" => Some(("", "v1", "PodPortForwardOptions")),
        "token" => Some(("authentication.k8s.io", "v1", "TokenRequest")),
        _ => None,
    }
}

/// Go's names for the build target, as `/version` reports `platform`.
fn platform() -> String {
    let os = std::env::consts::OS;
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        other => other,
    };
    format!("{os}/{arch}")
}

/// `/version`: every field k8s-openapi's `version::Info` requires.
#[must_use]
pub fn version_info() -> Value {
    json!({
        "major": "1",
        "minor": KUBERNETES_MINOR,
        // Since 1.33 (compatibility versions): the version emulated, and the oldest one
        // whose control plane this one can work with (one minor below).
        "emulationMajor": "1",
        "emulationMinor": KUBERNETES_MINOR,
        "minCompatibilityMajor": "1",
        "minCompatibilityMinor": (KUBERNETES_MINOR.parse::<u32>().unwrap_or(1) - 1).to_string(),
        "gitVersion": format!("v1.{KUBERNETES_MINOR}.0-watchkeeper"),
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "1970-01-01T00:00:00Z",
        "goVersion": "n/a (rust)",
        "compiler": "rustc",
        "platform": platform(),
    })
}

/// `/api` with an empty server address (clients do not use it).
#[must_use]
pub fn api_versions() -> Value {
    api_versions_with_address("")
}

/// `/api` naming the address clients reach the server at, e.g. `127.0.0.1:6443`.
#[must_use]
pub fn api_versions_with_address(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    })
}

/// kube-apiserver's APIService priorities of the group/versions it serves, `(group, version,
/// groupPriorityMinimum, versionPriority)`: `DefaultGenericAPIServicePriorities` merged with
/// kube-apiserver's own (`cmd/kube-apiserver/app/aggregator.go`). They order the groups of
/// discovery and are the specs of the APIServices registered for them
/// (`controllers::apiservices` in the server).
pub const API_SERVICE_PRIORITIES: &[(&str, &str, i32, i32)] = &[
    ("", "v1", 18000, 1),
    ("apps", "v1", 17800, 15),
    ("events.k8s.io", "v1", 17750, 15),
    ("events.k8s.io", "v1beta1", 17750, 5),
    ("authentication.k8s.io", "v1", 17700, 15),
    ("authentication.k8s.io", "v1beta1", 17700, 9),
    ("authentication.k8s.io", "v1alpha1", 17700, 1),
    ("authorization.k8s.io", "v1", 17600, 15),
    ("autoscaling", "v1", 17500, 15),
    ("autoscaling", "v2", 17500, 30),
    ("autoscaling", "v2beta1", 17500, 9),
    ("autoscaling", "v2beta2", 17500, 1),
    ("batch", "v1", 17400, 15),
    ("batch", "v1beta1", 17400, 9),
    ("batch", "v2alpha1", 17400, 9),
    ("certificates.k8s.io", "v1", 17300, 15),
    ("certificates.k8s.io", "v1beta1", 17300, 9),
    ("certificates.k8s.io", "v1alpha1", 17300, 1),
    ("networking.k8s.io", "v1", 17200, 15),
    ("networking.k8s.io", "v1beta1", 17200, 9),
    ("policy", "v1", 17100, 15),
    ("policy", "v1beta1", 17100, 9),
    ("rbac.authorization.k8s.io", "v1", 17000, 15),
    ("storage.k8s.io", "v1", 16800, 15),
    ("storage.k8s.io", "v1beta1", 16800, 9),
    ("storage.k8s.io", "v1alpha1", 16800, 1),
    ("apiextensions.k8s.io", "v1", 16700, 15),
    ("admissionregistration.k8s.io", "v1", 16700, 15),
    ("admissionregistration.k8s.io", "v1beta1", 16700, 12),
    ("admissionregistration.k8s.io", "v1alpha1", 16700, 9),
    ("scheduling.k8s.io", "v1", 16600, 15),
    ("coordination.k8s.io", "v1", 16500, 15),
    ("coordination.k8s.io", "v1beta1", 16500, 13),
    ("coordination.k8s.io", "v1alpha2", 16500, 12),
    ("node.k8s.io", "v1", 16300, 15),
    ("node.k8s.io", "v1beta1", 16300, 9),
    ("node.k8s.io", "v1alpha1", 16300, 1),
    ("discovery.k8s.io", "v1", 16200, 15),
    ("discovery.k8s.io", "v1beta1", 16200, 12),
    ("resource.k8s.io", "v1beta2", 16200, 15),
    ("resource.k8s.io", "v1beta1", 16200, 9),
    ("resource.k8s.io", "v1alpha3", 16200, 1),
    ("flowcontrol.apiserver.k8s.io", "v1", 16100, 21),
    ("flowcontrol.apiserver.k8s.io", "v1beta3", 16100, 18),
    ("flowcontrol.apiserver.k8s.io", "v1beta2", 16100, 15),
    ("flowcontrol.apiserver.k8s.io", "v1beta1", 16100, 12),
    ("flowcontrol.apiserver.k8s.io", "v1alpha1", 16100, 9),
    ("internal.apiserver.k8s.io", "v1alpha1", 16000, 9),
    ("storagemigration.k8s.io", "v1beta1", 15800, 9),
];

/// The `groupPriorityMinimum` and `versionPriority` of `group`/`version` in
/// [`API_SERVICE_PRIORITIES`]; `None` for a group/version kube-apiserver registers no
/// APIService for at start (its own `apiregistration.k8s.io`, or a custom resource's).
#[must_use]
pub fn api_service_priority(group: &str, version: &str) -> Option<(i32, i32)> {
    API_SERVICE_PRIORITIES
        .iter()
        .find(|(g, v, _, _)| *g == group && *v == version)
        .map(|&(_, _, group_priority, version_priority)| (group_priority, version_priority))
}

/// The `groupPriorityMinimum` the APIServices of a CustomResourceDefinition's group/versions
/// get (kube's `crdRegistrationController`), and their `versionPriority`.
pub const CUSTOM_GROUP_PRIORITY: (i32, i32) = (1000, 100);

/// Where `group` sorts among the groups of discovery: kube-aggregator lists its own
/// `apiregistration.k8s.io` first, then the groups by their APIServices' highest
/// `groupPriorityMinimum` (a custom resource's group has 1000).
fn group_rank(group: &str) -> i32 {
    if group == "apiregistration.k8s.io" {
        return i32::MAX;
    }
    API_SERVICE_PRIORITIES
        .iter()
        .filter(|(g, _, _, _)| *g == group)
        .map(|&(_, _, priority, _)| priority)
        .max()
        .unwrap_or(CUSTOM_GROUP_PRIORITY.0)
}

/// A group/version an APIService hands to a Service (`spec.service`: kube-aggregator proxies
/// it) that the server does not serve itself. Discovery lists it (`/apis`, `/apis/{group}`)
/// with the APIService's priorities, as kube's aggregator lists every APIService's group
/// whether or not its Service answers; its paths answer 503 (the server proxies to no Service).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteGroupVersion {
    /// `spec.group`.
    pub group: String,
    /// `spec.version`.
    pub version: String,
    /// `spec.groupPriorityMinimum`.
    pub group_priority: i32,
    /// `spec.versionPriority`.
    pub version_priority: i32,
}

impl RemoteGroupVersion {
    /// Whether this is `group`/`version`'s.
    #[must_use]
    pub fn is(&self, group: &str, version: &str) -> bool {
        self.group == group && self.version == version
    }
}

/// Whether the server itself serves `group`/`version` (a resource of its own there, the
/// review APIs included).
#[must_use]
pub fn serves_group_version(defs: &[ResourceDef], group: &str, version: &str) -> bool {
    with_reviews(defs)
        .iter()
        .any(|d| d.group == group && d.version == version)
}

/// The named groups in kube-aggregator's order (`SortedByGroupAndVersion`): by their
/// APIServices' `groupPriorityMinimum`, highest first (`apiregistration.k8s.io` before every
/// other, [`group_rank`]; a remote group/version's own), groups of equal priority by name
/// (every CustomResourceDefinition's group has the same, lower one). A group's versions by
/// their `versionPriority`, highest first, then in Kubernetes' version priority
/// ([`compare_kube_versions`]; a custom resource's versions all have 100), so its preferred
/// version is the most stable, newest one.
fn groups<'a>(
    defs: &'a [ResourceDef],
    remote: &'a [RemoteGroupVersion],
) -> Vec<(&'a str, Vec<&'a str>)> {
    let mut groups: Vec<(&str, Vec<&str>)> = Vec::new();
    let named = defs
        .iter()
        .filter(|d| !d.group.is_empty())
        .map(|d| (d.group.as_str(), d.version.as_str()))
        .chain(
            remote
                .iter()
                .map(|r| (r.group.as_str(), r.version.as_str())),
        );
    for (group, version) in named {
        match groups.iter_mut().find(|(g, _)| *g == group) {
            Some((_, versions)) => {
                if !versions.contains(&version) {
                    versions.push(version);
                }
            }
            None => groups.push((group, vec![version])),
        }
    }
    let remote_of = |group: &str, version: &str| remote.iter().find(|r| r.is(group, version));
    let rank = |group: &str, versions: &[&str]| {
        versions
            .iter()
            .filter_map(|v| remote_of(group, v).map(|r| r.group_priority))
            .chain(
                versions
                    .iter()
                    .any(|v| remote_of(group, v).is_none())
                    .then(|| group_rank(group)),
            )
            .max()
            .unwrap_or_else(|| group_rank(group))
    };
    groups.sort_by(|a, b| {
        rank(b.0, &b.1)
            .cmp(&rank(a.0, &a.1))
            .then_with(|| a.0.cmp(b.0))
    });
    for (group, versions) in &mut groups {
        let priority = |version: &str| match remote_of(group, version) {
            Some(remote) => remote.version_priority,
            None => {
                api_service_priority(group, version).map_or(CUSTOM_GROUP_PRIORITY.1, |(_, v)| v)
            }
        };
        versions.sort_by(|a, b| {
            priority(b)
                .cmp(&priority(a))
                .then_with(|| compare_kube_versions(a, b))
        });
    }
    groups
}

fn group_body(group: &str, versions: &[&str]) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    json!({
        "name": group,
        "preferredVersion": versions[0].clone(),
        "versions": versions,
    })
}

/// `/apis`: an `APIGroupList` of every named group, the remote group/versions' included (the
/// first version listed is preferred).
#[must_use]
pub fn api_group_list(defs: &[ResourceDef], remote: &[RemoteGroupVersion]) -> Value {
    let defs = &with_reviews(defs);
    let groups: Vec<Value> = groups(defs, remote)
        .iter()
        .map(|(group, versions)| group_body(group, versions))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/{group}`: an `APIGroup`, `None` for an unknown group (or the core group).
#[must_use]
pub fn api_group(
    defs: &[ResourceDef],
    remote: &[RemoteGroupVersion],
    group: &str,
) -> Option<Value> {
    let defs = &with_reviews(defs);
    let groups = groups(defs, remote);
    let (name, versions) = groups.iter().find(|(g, _)| *g == group)?;
    let mut body = group_body(name, versions);
    body["kind"] = json!("APIGroup");
    body["apiVersion"] = json!("v1");
    Some(body)
}

/// kube-apiserver's `storageVersionHash` of objects stored as `api_version` `kind`
/// (`discovery.StorageVersionHash`): the standard base64 of the first 8 bytes of the SHA-256
/// of `group/version/kind` (`/v1/ConfigMap` for the core group), computed by `sha256`, which
/// the caller supplies (the server's crypto library; this crate has none).
#[must_use]
pub fn storage_version_hash(
    api_version: &str,
    kind: &str,
    sha256: impl FnOnce(&[u8]) -> [u8; 32],
) -> String {
    use base64::Engine;
    let gvk = if api_version.contains('/') {
        format!("{api_version}/{kind}")
    } else {
        format!("/{api_version}/{kind}")
    };
    base64::engine::general_purpose::STANDARD.encode(&sha256(gvk.as_bytes())[..8])
}

/// The version kube-apiserver 1.33 stores a built-in resource's objects at, which its
/// discovery hashes ([`storage_version_hash`]): the served version, but for IPAddresses and
/// ServiceCIDRs, GA in 1.33 and still stored at `v1beta1` there (a release behind, so a
/// downgrade reads them). This server stores them at `v1`; discovery names kube's version, so
/// a client comparing hashes across servers sees one value.
#[must_use]
pub fn builtin_storage_api_version(def: &ResourceDef) -> String {
    match (def.group.as_str(), def.plural.as_str()) {
        ("networking.k8s.io", "ipaddresses" | "servicecidrs") => {
            "networking.k8s.io/v1beta1".to_owned()
        }
        _ => def.api_version(),
    }
}

/// Whether kube-apiserver lists a `storageVersionHash` for `def`: every resource kept in
/// storage, not the create-only reviews nor `componentstatuses` (their REST storage
/// provides no storage version).
fn has_storage(def: &ResourceDef) -> bool {
    !is_review(def) && !crate::componentstatus::is_component_status(def)
}

/// One entry of an `APIResourceList`.
fn api_resource(def: &ResourceDef, hash: &dyn Fn(&ResourceDef) -> Option<String>) -> Value {
    let mut resource = json!({
        "name": def.plural,
        "singularName": def.singular,
        "namespaced": def.namespaced,
        "kind": def.kind,
        "verbs": verbs_of(def),
    });
    if !def.short_names.is_empty() {
        resource["shortNames"] = json!(def.short_names);
    }
    if !def.categories.is_empty() {
        resource["categories"] = json!(def.categories);
    }
    if has_storage(def)
        && let Some(hash) = hash(def)
    {
        resource["storageVersionHash"] = json!(hash);
    }
    resource
}

/// `/api/v1` (group `""`) or `/apis/{group}/{version}`: an `APIResourceList`, `None` when no
/// resource is served at that group and version. `hash` gives a served resource's
/// `storageVersionHash` ([`storage_version_hash`] of its storage version; `None` leaves it out).
#[must_use]
pub fn api_resource_list(
    defs: &[ResourceDef],
    group: &str,
    version: &str,
    hash: &dyn Fn(&ResourceDef) -> Option<String>,
) -> Option<Value> {
    let defs = &with_reviews(defs);
    let resources: Vec<Value> = defs
        .iter()
        .filter(|d| d.group == group && d.version == version)
        .map(|def| api_resource(def, hash))
        .collect();
    if resources.is_empty() {
        return None;
    }
    let mut resources = resources;
    for def in defs
        .iter()
        .filter(|d| d.group == group && d.version == version)
    {
        for (sub, verbs) in subresources(def) {
            let mut entry = json!({
                "name": format!("{}/{sub}", def.plural),
                "singularName": "",
                "namespaced": def.namespaced,
                "kind": def.kind,
                "verbs": verbs,
            });
            if let Some((group, version, kind)) = subresource_kind_of(def, sub) {
                if !group.is_empty() {
                    entry["group"] = json!(group);
                    entry["version"] = json!(version);
                }
                entry["kind"] = json!(kind);
            }
            resources.push(entry);
        }
    }
    let group_version = if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    };
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }))
}

/// The aggregated discovery versions a client may ask for. Both have the same shape; they
/// differ in `apiVersion` and the content type answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AggregatedVersion {
    /// `apidiscovery.k8s.io/v2` (Kubernetes 1.30 and later).
    V2,
    /// `apidiscovery.k8s.io/v2beta1` (kubectl and client-go 1.26-1.29).
    V2Beta1,
}

/// The group of the aggregated discovery types.
pub const DISCOVERY_GROUP: &str = "apidiscovery.k8s.io";
/// The kind a client names in `as=` to ask for aggregated discovery.
pub const DISCOVERY_LIST_KIND: &str = "APIGroupDiscoveryList";

impl AggregatedVersion {
    fn version(self) -> &'static str {
        match self {
            AggregatedVersion::V2 => "v2",
            AggregatedVersion::V2Beta1 => "v2beta1",
        }
    }

    /// The document's `apiVersion`.
    #[must_use]
    pub fn api_version(self) -> &'static str {
        match self {
            AggregatedVersion::V2 => "apidiscovery.k8s.io/v2",
            AggregatedVersion::V2Beta1 => "apidiscovery.k8s.io/v2beta1",
        }
    }

    /// The `Content-Type` of the answer, which is how clients tell aggregated from legacy.
    #[must_use]
    pub fn content_type(self) -> &'static str {
        match self {
            AggregatedVersion::V2 => {
                "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
            }
            AggregatedVersion::V2Beta1 => {
                "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
            }
        }
    }
}

/// Which document `/api` or `/apis` answers for an `Accept` header: the first range (by
/// weight, then the client's order) the server can serve as JSON decides. A range asking for
/// aggregated discovery in protobuf, or for any other conversion (`as=Table`, ...), is skipped
/// as kube-apiserver's discovery restrictions skip it; `None` (the legacy document) when no
/// range asks for aggregated discovery in JSON before a plain JSON range.
#[must_use]
pub fn negotiate_discovery(accept: Option<&str>) -> Option<AggregatedVersion> {
    for range in crate::negotiate::parse_accept(accept) {
        if !range.accepts_json() {
            continue;
        }
        if !range.converts() {
            return None;
        }
        for version in [AggregatedVersion::V2, AggregatedVersion::V2Beta1] {
            if range.converts_to(DISCOVERY_GROUP, version.version(), DISCOVERY_LIST_KIND) {
                return Some(version);
            }
        }
    }
    None
}

fn group_version_kind(def: &ResourceDef) -> Value {
    json!({"group": def.group, "version": def.version, "kind": def.kind})
}

/// One `APIResourceDiscovery`.
fn resource_discovery(def: &ResourceDef) -> Value {
    let mut resource = json!({
        "resource": def.plural,
        "responseKind": group_version_kind(def),
        "scope": if def.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": def.singular,
        "verbs": verbs_of(def),
    });
    if !def.short_names.is_empty() {
        resource["shortNames"] = json!(def.short_names);
    }
    if !def.categories.is_empty() {
        resource["categories"] = json!(def.categories);
    }
    let subresources: Vec<Value> = subresources(def)
        .into_iter()
        .map(|(sub, verbs)| {
            let kind = match subresource_kind_of(def, sub) {
                Some((group, version, kind)) => {
                    json!({"group": group, "version": version, "kind": kind})
                }
                None => group_version_kind(def),
            };
            json!({"subresource": sub, "responseKind": kind, "verbs": verbs})
        })
        .collect();
    if !subresources.is_empty() {
        resource["subresources"] = json!(subresources);
    }
    resource
}

/// One `APIGroupDiscovery`: the group's versions in order (the first is preferred).
fn group_discovery(
    defs: &[ResourceDef],
    remote: &[RemoteGroupVersion],
    group: &str,
    versions: &[&str],
) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .map(|version| {
            if remote.iter().any(|r| r.is(group, version)) {
                // kube-aggregator's entry for an APIService whose Service it could not read
                // discovery from: the version, stale, without resources.
                return json!({"version": version, "freshness": "Stale"});
            }
            let resources: Vec<Value> = defs
                .iter()
                .filter(|d| d.group == group && d.version == *version)
                .map(resource_discovery)
                .collect();
            json!({"version": version, "resources": resources, "freshness": "Current"})
        })
        .collect();
    let metadata = if group.is_empty() {
        json!({"creationTimestamp": null})
    } else {
        json!({"name": group, "creationTimestamp": null})
    };
    json!({"metadata": metadata, "versions": versions})
}

/// The aggregated discovery document of `/api` (`core`: the core group only) or `/apis` (every
/// named group, in the order of [`api_group_list`]; a remote group/version as kube-aggregator
/// lists one whose Service's discovery it could not read: `Stale`, without resources).
#[must_use]
pub fn aggregated_discovery(
    defs: &[ResourceDef],
    remote: &[RemoteGroupVersion],
    core: bool,
    version: AggregatedVersion,
) -> Value {
    let defs = &with_reviews(defs);
    let items: Vec<Value> = if core {
        if defs.iter().any(|d| d.group.is_empty()) {
            let mut versions: Vec<&str> = Vec::new();
            for def in defs.iter().filter(|d| d.group.is_empty()) {
                if !versions.contains(&def.version.as_str()) {
                    versions.push(&def.version);
                }
            }
            vec![group_discovery(defs, &[], "", &versions)]
        } else {
            Vec::new()
        }
    } else {
        groups(defs, remote)
            .iter()
            .map(|(group, versions)| group_discovery(defs, remote, group, versions))
            .collect()
    };
    json!({
        "kind": DISCOVERY_LIST_KIND,
        "apiVersion": version.api_version(),
        "metadata": {},
        "items": items,
    })
}

/// The `ETag` of a discovery document's JSON text, quoted as the header carries it: a stable
/// content hash (clients only compare it), the same for every media type as kube-apiserver's.
#[must_use]
pub fn discovery_etag(body: &str) -> String {
    format!("\"{:016X}\"", crate::hash::fnv1a(body.as_bytes()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn versions_sort_by_kubernetes_priority() {
        // The order of Kubernetes' CRD versioning documentation, with v0 and alphas added.
        let mut versions = vec![
            "foo1",
            "v1alpha1",
            "v12alpha1",
            "v1",
            "v11beta2",
            "v10beta3",
            "v3beta1",
            "v2",
            "v10",
            "v11alpha2",
            "foo10",
            "v1beta1",
            "v0",
            "v2alpha1",
        ];
        versions.sort_by(|a, b| super::compare_kube_versions(a, b));
        assert_eq!(
            versions,
            [
                "v10",
                "v2",
                "v1",
                "v0",
                "v11beta2",
                "v10beta3",
                "v3beta1",
                "v1beta1",
                "v12alpha1",
                "v11alpha2",
                "v2alpha1",
                "v1alpha1",
                "foo1",
                "foo10"
            ]
        );
    }

    use super::*;
    use crate::resources::builtin_resources;

    /// [`api_resource_list`] with no storage version hashes.
    fn api_resource_list_of(defs: &[ResourceDef], group: &str, version: &str) -> Option<Value> {
        api_resource_list(defs, group, version, &|_| None)
    }

    #[test]
    fn storage_version_hash_names_group_version_kind() {
        let mut seen = Vec::new();
        let hash = storage_version_hash("v1", "ConfigMap", |bytes| {
            seen.push(String::from_utf8(bytes.to_vec()).unwrap());
            let mut out = [0u8; 32];
            out[..8].copy_from_slice(b"abcdefgh");
            out[8] = 1;
            out
        });
        assert_eq!(seen, ["/v1/ConfigMap"]);
        assert_eq!(hash, "YWJjZGVmZ2g=");
        let mut seen = Vec::new();
        let zeros = storage_version_hash("apps/v1", "Deployment", |bytes| {
            seen.push(String::from_utf8(bytes.to_vec()).unwrap());
            [0; 32]
        });
        assert_eq!(seen, ["apps/v1/Deployment"]);
        assert_eq!(zeros, "AAAAAAAAAAA=");
    }

    #[test]
    fn reviews_and_component_statuses_have_no_storage_version_hash() {
        let defs = builtin_resources();
        let hash = |_: &ResourceDef| Some("h".to_owned());
        let core = api_resource_list(&defs, "", "v1", &hash).unwrap();
        for entry in core["resources"].as_array().unwrap() {
            let name = entry["name"].as_str().unwrap();
            let expected =
                !(name == "componentstatuses" || name == "bindings" || name.contains('/'));
            assert_eq!(
                entry.get("storageVersionHash").is_some(),
                expected,
                "{entry}"
            );
        }
        let authz = api_resource_list(&defs, "authorization.k8s.io", "v1", &hash).unwrap();
        for entry in authz["resources"].as_array().unwrap() {
            assert!(entry.get("storageVersionHash").is_none(), "{entry}");
        }
    }

    #[test]
    fn custom_groups_follow_kubernetes_ones_by_name_and_prefer_their_most_stable_version() {
        let mut defs = builtin_resources();
        let template = defs[0].clone();
        for (group, version) in [
            ("widgets.example.com", "v1alpha1"),
            ("widgets.example.com", "v1"),
            ("widgets.example.com", "v2beta1"),
            ("apples.example.com", "v1"),
        ] {
            let mut def = template.clone();
            def.group = group.to_owned();
            def.version = version.to_owned();
            defs.push(def);
        }
        let list = api_group_list(&defs, &[]);
        let groups = list["groups"].as_array().unwrap();
        let names: Vec<&str> = groups.iter().map(|g| g["name"].as_str().unwrap()).collect();
        assert_eq!(
            names[names.len() - 2..],
            ["apples.example.com", "widgets.example.com"]
        );
        let widgets = api_group(&defs, &[], "widgets.example.com").unwrap();
        assert_eq!(widgets["preferredVersion"]["version"], "v1");
        let versions: Vec<&str> = widgets["versions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["version"].as_str().unwrap())
            .collect();
        assert_eq!(versions, ["v1", "v2beta1", "v1alpha1"]);
    }

    #[test]
    fn version_document() {
        let version = version_info();
        assert_eq!(version["major"], "1");
        assert_eq!(version["minor"], "33");
        assert_eq!(version["gitVersion"], "v1.33.0-watchkeeper");
        assert_eq!(version["emulationMinor"], "33");
        assert_eq!(version["minCompatibilityMinor"], "32");
        for key in [
            "gitCommit",
            "gitTreeState",
            "buildDate",
            "goVersion",
            "compiler",
            "platform",
        ] {
            assert!(version[key].is_string(), "{key}");
        }
    }

    /// The groups' names of an `APIGroupList`, in its order.
    fn group_names(list: &Value) -> Vec<&str> {
        list["groups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["name"].as_str().unwrap())
            .collect()
    }

    #[test]
    fn root_documents() {
        assert_eq!(
            api_versions_with_address("127.0.0.1:8080"),
            json!({"kind": "APIVersions", "versions": ["v1"],
                   "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1:8080"}]})
        );
        let list = api_group_list(&builtin_resources(), &[]);
        assert_eq!(list["kind"], "APIGroupList");
        let names = group_names(&list);
        assert_eq!(
            names,
            // kube-apiserver 1.33's `/apis`: kube-aggregator's own group, then by priority.
            [
                "apiregistration.k8s.io",
                "apps",
                "authentication.k8s.io",
                "authorization.k8s.io",
                "autoscaling",
                "batch",
                "certificates.k8s.io",
                "networking.k8s.io",
                "policy",
                "rbac.authorization.k8s.io",
                "storage.k8s.io",
                "admissionregistration.k8s.io",
                "scheduling.k8s.io",
                "coordination.k8s.io",
                "node.k8s.io",
                "discovery.k8s.io",
                "flowcontrol.apiserver.k8s.io",
            ]
        );
        assert_eq!(
            list["groups"][1],
            json!({"name": "apps", "versions": [{"groupVersion": "apps/v1", "version": "v1"}],
                   "preferredVersion": {"groupVersion": "apps/v1", "version": "v1"}})
        );
        let apps = api_group(&builtin_resources(), &[], "apps").unwrap();
        assert_eq!(apps["kind"], "APIGroup");
        assert_eq!(apps["apiVersion"], "v1");
        assert!(api_group(&builtin_resources(), &[], "").is_none());
        assert!(api_group(&builtin_resources(), &[], "example.com").is_none());
        let autoscaling = api_group(&builtin_resources(), &[], "autoscaling").unwrap();
        assert_eq!(
            autoscaling["preferredVersion"]["groupVersion"],
            "autoscaling/v2"
        );
    }

    /// Goal: an APIService's group/version handed to a Service takes the place its own
    /// priorities give it, as kube-aggregator orders APIServices: a group by the highest
    /// `groupPriorityMinimum` of its versions, a version by its `versionPriority` (so a remote
    /// version above the served one's becomes the preferred one); what the server serves
    /// itself is not a remote group/version.
    #[test]
    fn remote_group_versions_take_their_priorities_place() {
        let remote =
            |group: &str, version: &str, group_priority, version_priority| RemoteGroupVersion {
                group: group.to_owned(),
                version: version.to_owned(),
                group_priority,
                version_priority,
            };
        let defs = builtin_resources();
        let (apps_group, apps_version) = api_service_priority("apps", "v1").unwrap();
        let remote = [
            remote("metrics.k8s.io", "v1beta1", 100, 100),
            remote("first.example.com", "v1", 1_000_000, 1),
            remote("apps", "v2", apps_group, apps_version + 1),
        ];
        let list = api_group_list(&defs, &remote);
        let names = group_names(&list);
        assert_eq!(&names[..2], ["apiregistration.k8s.io", "first.example.com"]);
        assert_eq!(names.last(), Some(&"metrics.k8s.io"));
        let apps = api_group(&defs, &remote, "apps").unwrap();
        assert_eq!(apps["preferredVersion"]["version"], "v2");
        assert_eq!(apps["versions"][1]["version"], "v1");
        assert_eq!(
            api_group(&defs, &remote, "metrics.k8s.io").unwrap()["versions"],
            json!([{"groupVersion": "metrics.k8s.io/v1beta1", "version": "v1beta1"}])
        );
        assert!(serves_group_version(&defs, "apps", "v1"));
        assert!(
            serves_group_version(&defs, "authorization.k8s.io", "v1"),
            "a review API"
        );
        assert!(!serves_group_version(&defs, "metrics.k8s.io", "v1beta1"));
    }

    #[test]
    fn resource_lists() {
        let defs = builtin_resources();
        let core = api_resource_list_of(&defs, "", "v1").unwrap();
        assert_eq!(core["groupVersion"], "v1");
        assert_eq!(core["kind"], "APIResourceList");
        let resources = core["resources"].as_array().unwrap();
        // The create-only bindings, 15 resources and the read-only componentstatuses; 8
        // status subresources
        // (namespaces, nodes, pods, services, persistentvolumeclaims, persistentvolumes,
        // resourcequotas, replicationcontrollers); replicationcontrollers/scale;
        // namespaces/finalize; pods/attach, pods/binding, pods/ephemeralcontainers,
        // pods/eviction, pods/exec, pods/log, pods/portforward and pods/resize; pods/proxy,
        // services/proxy and nodes/proxy; serviceaccounts/token.
        assert_eq!(resources.len(), 39);
        for (name, kind) in [
            ("pods/proxy", "PodProxyOptions"),
            ("services/proxy", "ServiceProxyOptions"),
            ("nodes/proxy", "NodeProxyOptions"),
        ] {
            let entry = resources.iter().find(|r| r["name"] == name).unwrap();
            assert_eq!(
                *entry,
                json!({"name": name, "singularName": "", "namespaced": name != "nodes/proxy",
                    "kind": kind, "verbs": ["create", "delete", "get", "patch", "update"]})
            );
        }
        assert_eq!(
            resources[0],
            json!({"name": "bindings", "singularName": "binding", "namespaced": true,
                "kind": "Binding", "verbs": ["create"]})
        );
        let cs = resources
            .iter()
            .find(|r| r["name"] == "componentstatuses")
            .unwrap();
        assert_eq!(
            cs,
            &json!({"name": "componentstatuses", "singularName": "componentstatus",
                "namespaced": false, "kind": "ComponentStatus", "verbs": ["get", "list"],
                "shortNames": ["cs"]})
        );
        assert!(!resources.iter().any(|r| {
            r["name"]
                .as_str()
                .unwrap()
                .starts_with("componentstatuses/")
        }));
        let token = resources
            .iter()
            .find(|r| r["name"] == "serviceaccounts/token")
            .unwrap();
        assert_eq!(
            (&token["group"], &token["version"], &token["kind"]),
            (
                &json!("authentication.k8s.io"),
                &json!("v1"),
                &json!("TokenRequest")
            )
        );
        assert_eq!(token["verbs"], json!(["create"]));
        let eviction = resources
            .iter()
            .find(|r| r["name"] == "pods/eviction")
            .unwrap();
        assert_eq!(
            (&eviction["group"], &eviction["version"], &eviction["kind"]),
            (&json!("policy"), &json!("v1"), &json!("Eviction"))
        );
        assert_eq!(eviction["verbs"], json!(["create"]));
        let rc_scale = resources
            .iter()
            .find(|r| r["name"] == "replicationcontrollers/scale")
            .unwrap();
        assert_eq!(
            (&rc_scale["group"], &rc_scale["version"], &rc_scale["kind"]),
            (&json!("autoscaling"), &json!("v1"), &json!("Scale"))
        );
        let pod_status = resources
            .iter()
            .find(|r| r["name"] == "pods/status")
            .unwrap();
        assert_eq!(
            *pod_status,
            json!({"name": "pods/status", "singularName": "", "namespaced": true, "kind": "Pod",
                   "verbs": ["get", "patch", "update"]})
        );
        assert!(resources.iter().any(|r| r["name"] == "namespaces/finalize"));
        assert!(!resources.iter().any(|r| r["name"] == "configmaps/status"));
        let pods = resources.iter().find(|r| r["name"] == "pods").unwrap();
        assert_eq!(
            *pods,
            json!({"name": "pods", "singularName": "pod", "namespaced": true, "kind": "Pod",
                   "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
                   "shortNames": ["po"], "categories": ["all"]})
        );
        let configmaps = resources
            .iter()
            .find(|r| r["name"] == "configmaps")
            .unwrap();
        assert!(configmaps.get("categories").is_none());
        let nodes = resources.iter().find(|r| r["name"] == "nodes").unwrap();
        assert_eq!(nodes["namespaced"], false);
        let apps = api_resource_list_of(&defs, "apps", "v1").unwrap();
        assert_eq!(apps["groupVersion"], "apps/v1");
        // 5 resources (controllerrevisions without a status), 4 status and 3 scale
        // subresources (not daemonsets).
        assert_eq!(apps["resources"].as_array().unwrap().len(), 12);
        let storage = api_resource_list_of(&defs, "storage.k8s.io", "v1").unwrap();
        let names: Vec<&str> = storage["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "storageclasses",
                "csidrivers",
                "csinodes",
                "volumeattachments",
                "csistoragecapacities",
                "volumeattachments/status"
            ]
        );
        let capacities = &storage["resources"][4];
        assert_eq!(capacities["namespaced"], true);
        let flowcontrol =
            api_resource_list_of(&defs, "flowcontrol.apiserver.k8s.io", "v1").unwrap();
        assert_eq!(flowcontrol["resources"].as_array().unwrap().len(), 4);
        let admission = api_resource_list_of(&defs, "admissionregistration.k8s.io", "v1").unwrap();
        let policies = admission["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == "validatingadmissionpolicies")
            .unwrap();
        assert_eq!(policies["categories"], json!(["api-extensions"]));
        assert!(
            admission["resources"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["name"] == "validatingadmissionpolicies/status")
        );
        assert!(
            !admission["resources"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["name"] == "validatingadmissionpolicybindings/status")
        );
        let node = api_resource_list_of(&defs, "node.k8s.io", "v1").unwrap();
        assert_eq!(
            node["resources"],
            json!([{"name": "runtimeclasses", "singularName": "runtimeclass", "namespaced": false,
                    "kind": "RuntimeClass", "verbs": VERBS}])
        );
        assert!(api_resource_list_of(&defs, "apps", "v2").is_none());
        assert!(api_resource_list_of(&defs, "batch", "v2").is_none());
        let rbac = api_resource_list_of(&defs, "rbac.authorization.k8s.io", "v1").unwrap();
        assert_eq!(rbac["resources"].as_array().unwrap().len(), 4);
    }

    #[test]
    fn negotiation_follows_the_first_range_served_as_json() {
        let v2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
        let v2beta1 = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList";
        let proto = "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
        // client-go 1.30+: protobuf first (not served), then JSON v2, v2beta1, plain JSON.
        let client_go = format!("{proto},{v2},{v2beta1},application/json");
        assert_eq!(
            negotiate_discovery(Some(&client_go)),
            Some(AggregatedVersion::V2)
        );
        assert_eq!(
            negotiate_discovery(Some(&format!("{v2beta1},application/json"))),
            Some(AggregatedVersion::V2Beta1)
        );
        assert_eq!(negotiate_discovery(Some("application/json")), None);
        assert_eq!(negotiate_discovery(None), None);
        assert_eq!(
            negotiate_discovery(Some(&format!("application/json,{v2}"))),
            None
        );
        assert_eq!(
            negotiate_discovery(Some(&format!("application/json;q=0.5,{v2}"))),
            Some(AggregatedVersion::V2)
        );
        // Another conversion, an unknown version or a protobuf-only header: legacy.
        assert_eq!(
            negotiate_discovery(Some("application/json;as=Table;v=v1;g=meta.k8s.io")),
            None
        );
        assert_eq!(
            negotiate_discovery(Some(
                "application/json;g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList"
            )),
            None
        );
        assert_eq!(negotiate_discovery(Some(proto)), None);
    }

    #[test]
    fn aggregated_documents_list_what_the_legacy_ones_do() {
        let defs = builtin_resources();
        let core = aggregated_discovery(&defs, &[], true, AggregatedVersion::V2);
        assert_eq!(core["kind"], "APIGroupDiscoveryList");
        assert_eq!(core["apiVersion"], "apidiscovery.k8s.io/v2");
        assert_eq!(core["metadata"], json!({}));
        let items = core["items"].as_array().unwrap();
        assert_eq!(items.len(), 1);
        assert_eq!(items[0]["metadata"], json!({"creationTimestamp": null}));
        let pods = items[0]["versions"][0]["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["resource"] == "pods")
            .unwrap();
        assert_eq!(
            *pods,
            json!({"resource": "pods",
                   "responseKind": {"group": "", "version": "v1", "kind": "Pod"},
                   "scope": "Namespaced", "singularResource": "pod",
                   "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
                   "shortNames": ["po"], "categories": ["all"],
                   "subresources": [{"subresource": "status",
                                     "responseKind": {"group": "", "version": "v1", "kind": "Pod"},
                                     "verbs": ["get", "patch", "update"]},
                                    {"subresource": "attach",
                                     "responseKind": {"group": "", "version": "v1", "kind": "PodAttachOptions"},
                                     "verbs": ["create", "get"]},
                                    {"subresource": "binding",
                                     "responseKind": {"group": "", "version": "v1", "kind": "Binding"},
                                     "verbs": ["create"]},
                                    {"subresource": "ephemeralcontainers",
                                     "responseKind": {"group": "", "version": "v1", "kind": "Pod"},
                                     "verbs": ["get", "patch", "update"]},
                                    {"subresource": "eviction",
                                     "responseKind": {"group": "policy", "version": "v1", "kind": "Eviction"},
                                     "verbs": ["create"]},
                                    {"subresource": "exec",
                                     "responseKind": {"group": "", "version": "v1", "kind": "PodExecOptions"},
                                     "verbs": ["create", "get"]},
                                    {"subresource": "log",
                                     "responseKind": {"group": "", "version": "v1", "kind": "Pod"},
                                     "verbs": ["get"]},
                                    {"subresource": "portforward",
                                     "responseKind": {"group": "", "version": "v1", "kind": "PodPortForwardOptions"},
                                     "verbs": ["create", "get"]},
                                    {"subresource": "proxy",
                                     "responseKind": {"group": "", "version": "v1", "kind": "PodProxyOptions"},
                                     "verbs": ["create", "delete", "get", "patch", "update"]},
                                    {"subresource": "resize",
                                     "responseKind": {"group": "", "version": "v1", "kind": "Pod"},
                                     "verbs": ["get", "patch", "update"]}]})
        );
        let named = aggregated_discovery(&defs, &[], false, AggregatedVersion::V2Beta1);
        assert_eq!(named["apiVersion"], "apidiscovery.k8s.io/v2beta1");
        // Every resource and subresource of the legacy lists, and nothing else.
        let mut legacy = Vec::new();
        let mut group_versions = vec![(String::new(), "v1".to_owned())];
        for group in api_group_list(&defs, &[])["groups"].as_array().unwrap() {
            for version in group["versions"].as_array().unwrap() {
                group_versions.push((
                    group["name"].as_str().unwrap().to_owned(),
                    version["version"].as_str().unwrap().to_owned(),
                ));
            }
        }
        for (group, version) in &group_versions {
            for r in api_resource_list_of(&defs, group, version).unwrap()["resources"]
                .as_array()
                .unwrap()
            {
                legacy.push(format!(
                    "{group}/{version}/{}/{}",
                    r["name"].as_str().unwrap(),
                    r["verbs"]
                ));
            }
        }
        let mut aggregated = Vec::new();
        for doc in [&core, &named] {
            for item in doc["items"].as_array().unwrap() {
                let group = item["metadata"]["name"].as_str().unwrap_or("");
                for version in item["versions"].as_array().unwrap() {
                    assert_eq!(version["freshness"], "Current");
                    let v = version["version"].as_str().unwrap();
                    for r in version["resources"].as_array().unwrap() {
                        let name = r["resource"].as_str().unwrap();
                        aggregated.push(format!("{group}/{v}/{name}/{}", r["verbs"]));
                        for sub in r["subresources"].as_array().into_iter().flatten() {
                            let sub_name = sub["subresource"].as_str().unwrap();
                            aggregated
                                .push(format!("{group}/{v}/{name}/{sub_name}/{}", sub["verbs"]));
                        }
                    }
                }
            }
        }
        legacy.sort();
        aggregated.sort();
        assert_eq!(legacy, aggregated);
        let groups: Vec<&str> = named["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(groups.len(), 17);
        assert_eq!(
            groups[..3],
            ["apiregistration.k8s.io", "apps", "authentication.k8s.io"]
        );
    }

    #[test]
    fn etags_follow_the_content() {
        let a = discovery_etag("{\"items\":[]}");
        assert!(a.starts_with('"') && a.ends_with('"') && a.len() == 18);
        assert_eq!(a, discovery_etag("{\"items\":[]}"));
        assert_ne!(a, discovery_etag("{\"items\":[1]}"));
    }
}

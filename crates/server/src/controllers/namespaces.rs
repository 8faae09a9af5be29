//! The namespace controller: kube-controller-manager's `namespace` controller for a server
//! over a store. A DELETE of a namespace with spec finalizers (`kubernetes`, which every
//! namespace gets) only marks it (`deletionTimestamp`, `status.phase: Terminating`; creates in
//! it are then refused); this controller deletes everything the namespace holds through the
//! ordinary write path, so objects with finalizers of their own stay until those are removed
//! and dependents elsewhere are collected, and once nothing is left removes the `kubernetes`
//! finalizer (through `namespaces/{name}/finalize`, the only write that changes
//! `spec.finalizers`, as with kube-apiserver), after which the namespace goes (when no other
//! finalizer holds it).
//!
//! It also gives every active namespace its `default` ServiceAccount, and gives it again when
//! it is deleted (kube's serviceaccounts controller).
//!
//! It learns of namespaces being deleted, and of deletions inside them, from the reflector
//! ([`Observer`]), and looks at such a namespace again after each deletion in it, after a
//! relist, and, when a write failed, after a delay that doubles with each failure in a row
//! ([`RETRY_BASE`] to [`RETRY_MAX`], [`super::Retries`]). What it holds: the names of the namespaces
//! being deleted (bounded by the namespaces in the store).
//!
//! While a namespace is being deleted, its `status.conditions` are kube's controller's five
//! (`NamespaceDeletionDiscoveryFailure`, `NamespaceDeletionGroupVersionParsingFailure`,
//! `NamespaceDeletionContentFailure`, `NamespaceContentRemaining`,
//! `NamespaceFinalizersRemaining`) with its reasons and messages: what stays once its
//! contents are deleted (objects with finalizers, by resource and by finalizer, e.g. `Some
//! finalizers are remaining: example.com/hold in 1 resource instances`), written through the
//! `status` subresource only when they change.
//!
//! And it gives every active namespace kube's `kube-root-ca.crt` ConfigMap (kube's
//! root-ca-cert-publisher): `data` exactly `{"ca.crt": <the root CA bundle>}` (see
//! `http::connection::root_ca_bundle`) and the annotation `kubernetes.io/description`; a
//! ConfigMap of that name that is deleted, or changed by a client to say anything else, is
//! written back. One whose `ca.crt` another server's publisher wrote is left as it is (servers
//! sharing a store with different bundles would otherwise rewrite each other's without end;
//! give them the same `--root-ca-file`, and delete the ConfigMaps after changing it).
//!
//! And, with `--client-ca-file` or `--requestheader-client-ca-file`, `kube-system` gets kube-apiserver's
//! `extension-apiserver-authentication` ConfigMap (its cluster authentication trust
//! controller; aggregated API servers, metrics-server and webhooks read the client CA from
//! it): `client-ca-file` holds the certificates it held and then those of `--client-ca-file`
//! it did not (kube's `combineUniqueCertificates`: servers sharing a store with different
//! client CAs each add theirs, and a rotation keeps the old one); with request-header
//! authentication, `requestheader-client-ca-file` is combined the same way and each of
//! `requestheader-username-headers`, `-uid-headers`, `-group-headers`,
//! `-extra-headers-prefix` and `-allowed-names` is the JSON list it held followed by this
//! server's values it lacked (kube's `combinedClusterAuthenticationInfo`); without it, the
//! `requestheader-*` keys are kept as they are. Any other key is dropped (kube rebuilds the
//! data from what it reads); a deleted or changed ConfigMap is written again. A certificate
//! bundle that does not parse is replaced (kube's controller fails and retries on it).

use std::collections::BTreeSet;

pub use crate::config::tls::AuthenticationInfo;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use watchkeeper_api::ResourceDef;
use watchkeeper_api::gc::{DeletePolicy, Propagation};
use watchkeeper_core::{Change, Object, Revision};

use super::Retries;
use crate::source::feed::Observer;
use crate::source::read::Freshness;
use crate::source::store::{Collect, StoreSource};

/// How long a namespace whose look failed first waits before it is looked at again; each
/// further failure in a row doubles it, up to [`RETRY_MAX`] (kube's namespace controller's
/// 5 ms and 60 s).
pub const RETRY_BASE: Duration = Duration::from_millis(5);

/// The longest wait between two looks at a namespace that keeps failing.
pub const RETRY_MAX: Duration = Duration::from_secs(60);

/// The finalizer this controller removes once the namespace is empty.
const FINALIZER: &str = "kubernetes";

/// Its service account's name, as kube-controller-manager's (its writes' user).
const CONTROLLER: &str = "namespace-controller";

/// The service account every active namespace has (kube's serviceaccounts controller).
const DEFAULT_SERVICE_ACCOUNT: &str = "default";

/// The ConfigMap of the root CA bundle every active namespace has (kube's
/// root-ca-cert-publisher).
const ROOT_CA_CONFIG_MAP: &str = "kube-root-ca.crt";

/// Its one key.
const ROOT_CA_KEY: &str = "ca.crt";

/// The annotation that says what it is for, and kube's wording of it.
const DESCRIPTION_ANNOTATION: &str = "kubernetes.io/description";
const ROOT_CA_DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters.";

#[derive(Debug, Default)]
struct State {
    /// Namespaces being deleted.
    terminating: BTreeSet<String>,
    /// Namespaces to look at.
    queued: BTreeSet<String>,
    /// The newest revision told.
    revision: Revision,
}

impl super::Queued for State {
    fn queued(&mut self) -> (&mut BTreeSet<String>, Revision) {
        (&mut self.queued, self.revision)
    }
}

/// The namespace controller (see the module docs).
#[derive(Debug, Default)]
pub struct NamespaceController {
    queue: super::NameQueue<State>,
    /// What every namespace's `kube-root-ca.crt` says (PEM; empty without TLS), `None` when
    /// `--enable-root-ca-cert-publisher` is off.
    root_ca: Option<String>,
    /// What `kube-system`'s `extension-apiserver-authentication` publishes; `None` without
    /// `--client-ca-file` and `--requestheader-client-ca-file`.
    authentication: Option<AuthenticationInfo>,
}

/// kube-apiserver's cluster authentication trust ConfigMap, in [`AUTHENTICATION_NAMESPACE`].
const AUTHENTICATION_CONFIG_MAP: &str = "extension-apiserver-authentication";

/// Where [`AUTHENTICATION_CONFIG_MAP`] is.
const AUTHENTICATION_NAMESPACE: &str = "kube-system";

/// Its key for the client CA bundle.
const CLIENT_CA_KEY: &str = "client-ca-file";

/// The certificate blocks of a PEM bundle, each written as
/// [`crate::http::connection::pem_bundle`] writes it (so equal certificates compare equal);
/// `None` when it does not parse.
fn certificate_blocks(bundle: &str) -> Option<Vec<String>> {
    let blocks = pem::parse_many(bundle).ok()?;
    Some(
        blocks
            .iter()
            .filter(|block| block.tag() == "CERTIFICATE")
            .map(|block| crate::http::connection::pem_bundle([block.contents()]))
            .collect(),
    )
}

/// A ConfigMap key holding a JSON list of strings (kube's `jsonSerializeStringSlice`), read
/// leniently (anything else is an empty list).
fn string_list(data: Option<&serde_json::Map<String, Value>>, key: &str) -> Vec<String> {
    data.and_then(|data| data.get(key))
        .and_then(Value::as_str)
        .and_then(|text| serde_json::from_str::<Vec<String>>(text).ok())
        .unwrap_or_default()
}

/// `existing`'s certificates of the PEM bundle at `key`, then those of `ours` it lacks
/// (kube's `combineUniqueCertificates`).
fn combined_certificates(
    data: Option<&serde_json::Map<String, Value>>,
    key: &str,
    ours: Option<&str>,
) -> Vec<String> {
    let mut certificates = data
        .and_then(|data| data.get(key))
        .and_then(Value::as_str)
        .and_then(certificate_blocks)
        .unwrap_or_default();
    for certificate in ours.and_then(certificate_blocks).unwrap_or_default() {
        if !certificates.contains(&certificate) {
            certificates.push(certificate);
        }
    }
    certificates
}

/// What kube's cluster authentication trust controller writes to
/// `kube-system/extension-apiserver-authentication`, which is `existing` (`None`: absent), for
/// it to hold `info` (see the module docs): nothing when it does.
fn authentication_write(
    existing: Option<&Value>,
    info: &AuthenticationInfo,
) -> Option<Collect<'static>> {
    let data = existing
        .and_then(|body| body.get("data"))
        .and_then(Value::as_object);
    let certificates = combined_certificates(data, CLIENT_CA_KEY, info.client_ca.as_deref());
    let mut wanted: serde_json::Map<String, Value> = match &info.request_header {
        // Without request-header authentication here, what another server wrote is kept.
        None => data
            .into_iter()
            .flatten()
            .filter(|(key, _)| key.starts_with("requestheader-"))
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect(),
        // kube's `combinedClusterAuthenticationInfo`: the CA bundles and each list joined,
        // what was there first.
        Some((ca, config)) => {
            let mut wanted = serde_json::Map::new();
            let front_proxy =
                combined_certificates(data, "requestheader-client-ca-file", Some(ca.as_str()));
            wanted.insert(
                "requestheader-client-ca-file".to_owned(),
                json!(front_proxy.concat()),
            );
            for (key, ours) in [
                ("requestheader-username-headers", &config.username_headers),
                ("requestheader-uid-headers", &config.uid_headers),
                ("requestheader-group-headers", &config.group_headers),
                (
                    "requestheader-extra-headers-prefix",
                    &config.extra_headers_prefix,
                ),
                ("requestheader-allowed-names", &config.allowed_names),
            ] {
                let mut list = string_list(data, key);
                for value in ours {
                    if !list.contains(value) {
                        list.push(value.clone());
                    }
                }
                wanted.insert(key.to_owned(), json!(json!(list).to_string()));
            }
            wanted
        }
    };
    if !certificates.is_empty() {
        wanted.insert(CLIENT_CA_KEY.to_owned(), json!(certificates.concat()));
    }
    let Some(body) = existing else {
        return Some(Collect::Create(
            json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": AUTHENTICATION_CONFIG_MAP, "namespace": AUTHENTICATION_NAMESPACE},
            "data": wanted}),
        ));
    };
    if body.get("data").and_then(Value::as_object) == Some(&wanted) {
        return None;
    }
    // A merge patch that leaves `data` exactly `wanted`.
    let mut patch: serde_json::Map<String, Value> = data
        .into_iter()
        .flatten()
        .filter(|(key, _)| !wanted.contains_key(*key))
        .map(|(key, _)| (key.clone(), Value::Null))
        .collect();
    patch.extend(wanted);
    Some(Collect::Patch(json!({"data": patch})))
}

fn is_namespaces(def: &ResourceDef) -> bool {
    def.group.is_empty() && def.plural == "namespaces"
}

/// The field manager of the root CA publisher's writes (every server's).
const ROOT_CA_MANAGER: &str = "watchkeeper-root-ca-cert-publisher";

/// What the root CA publisher writes to `namespace`'s `kube-root-ca.crt`, which is `existing`
/// (`None`: absent), for it to say exactly `bundle` with kube's description: nothing when it
/// does — or when its `ca.crt` is another server's publisher's (servers sharing a store with
/// different bundles would otherwise rewrite each other's without end; they should be given
/// the same `--root-ca-file`).
fn root_ca_write(
    existing: Option<&Value>,
    namespace: &str,
    bundle: &str,
) -> Option<Collect<'static>> {
    let Some(body) = existing else {
        return Some(Collect::Create(
            json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": ROOT_CA_CONFIG_MAP, "namespace": namespace,
                "annotations": {DESCRIPTION_ANNOTATION: ROOT_CA_DESCRIPTION}},
            "data": {ROOT_CA_KEY: bundle}}),
        ));
    };
    let data = body.get("data").and_then(Value::as_object);
    let only_ca = data.is_some_and(|data| data.len() == 1 && data.contains_key(ROOT_CA_KEY));
    let says = |bundle: &str| {
        only_ca
            && data
                .and_then(|d| d.get(ROOT_CA_KEY))
                .and_then(Value::as_str)
                == Some(bundle)
    };
    let described = body
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(DESCRIPTION_ANNOTATION))
        .and_then(Value::as_str)
        .is_some_and(|text| !text.is_empty());
    // Who owns `data.ca.crt` now: the last to set it (an update takes the fields it changes).
    let owners: Vec<&str> = body
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|entry| entry.pointer("/fieldsV1/f:data/f:ca.crt").is_some())
        .filter_map(|entry| entry.get("manager").and_then(Value::as_str))
        .collect();
    let published = !owners.is_empty() && owners.iter().all(|owner| *owner == ROOT_CA_MANAGER);
    if described && (says(bundle) || (only_ca && published)) {
        return None;
    }
    // A merge patch that leaves `data` exactly the bundle.
    let mut data_patch: serde_json::Map<String, Value> = data
        .into_iter()
        .flatten()
        .map(|(key, _)| (key.clone(), Value::Null))
        .collect();
    data_patch.insert(ROOT_CA_KEY.into(), json!(bundle));
    Some(Collect::Patch(json!({
        "metadata": {"annotations": {DESCRIPTION_ANNOTATION: ROOT_CA_DESCRIPTION}},
        "data": data_patch,
    })))
}

fn is_config_maps(def: &ResourceDef) -> bool {
    def.group.is_empty() && def.plural == "configmaps"
}

impl NamespaceController {
    /// A controller that knows of no namespace yet and publishes `root_ca` in each (none:
    /// no `kube-root-ca.crt`), and `authentication` in
    /// `kube-system/extension-apiserver-authentication` (none: no such ConfigMap).
    #[must_use]
    pub fn new(
        root_ca: Option<String>,
        authentication: Option<AuthenticationInfo>,
    ) -> Arc<NamespaceController> {
        Arc::new(NamespaceController {
            root_ca,
            authentication,
            ..NamespaceController::default()
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.queue.lock()
    }

    fn saw_namespace(state: &mut State, object: &Object) {
        if object
            .body()
            .pointer("/metadata/deletionTimestamp")
            .is_some()
        {
            state.terminating.insert(object.name().to_owned());
        } else {
            state.terminating.remove(object.name());
        }
        // Active: its `default` service account is looked at; terminating: its contents.
        state.queued.insert(object.name().to_owned());
    }

    /// Runs the controller with `context` until `shutdown` turns true.
    pub async fn run(
        self: Arc<Self>,
        context: super::Context,
        shutdown: tokio::sync::watch::Receiver<bool>,
    ) {
        self.queue
            .run(
                Retries::new(RETRY_BASE, RETRY_MAX),
                |name, revision| {
                    let (this, context) = (&self, &context);
                    async move { this.look(context, &name, revision).await }
                },
                "namespace deletion",
                shutdown,
            )
            .await;
    }

    /// Creates the `default` service account of the active `namespace` when it has none (kube's
    /// serviceaccounts controller; it is created again when deleted).
    async fn ensure_service_account(
        source: &StoreSource,
        served: &[Arc<crate::cache::Resource>],
        fresh: &Freshness,
        namespace: &str,
        revision: Revision,
    ) -> Result<(), watchkeeper_api::ApiError> {
        let Some(accounts) = served.iter().find(|r| {
            r.def.group.is_empty() && r.def.plural == "serviceaccounts" && r.conversion.is_none()
        }) else {
            return Ok(());
        };
        fresh.wait(accounts.cache(), revision).await?;
        let key = watchkeeper_core::object_key(namespace, DEFAULT_SERVICE_ACCOUNT);
        if accounts.cache().get(&key).0.is_some() {
            return Ok(());
        }
        let account = json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": DEFAULT_SERVICE_ACCOUNT, "namespace": namespace}});
        let target = (namespace, DEFAULT_SERVICE_ACCOUNT);
        let write = Collect::Create(account);
        Self::keep(
            source,
            fresh,
            served,
            accounts,
            "service-account-controller",
            target,
            write,
        )
        .await
    }

    /// Writes what a namespace is kept with (its `default` account, its root CA) as
    /// `controller`; a write another server made first (409), or one the namespace no longer
    /// takes because it began terminating (403) or went (404), is no failure.
    async fn keep(
        source: &StoreSource,
        fresh: &Freshness,
        served: &[Arc<crate::cache::Resource>],
        resource: &crate::cache::Resource,
        controller: &str,
        target: (&str, &str),
        write: Collect<'_>,
    ) -> Result<(), watchkeeper_api::ApiError> {
        match source
            .collect(fresh, served, resource, controller, target, write)
            .await
        {
            Err(error) if error.code == 409 || error.code == 403 || error.code == 404 => Ok(()),
            other => other,
        }
    }

    /// Gives `kube-system` kube-apiserver's `extension-apiserver-authentication` ConfigMap with
    /// `--client-ca-file`'s certificates, or writes back the one it has when it lacks them or
    /// says anything else (see the module docs).
    async fn ensure_authentication_info(
        &self,
        source: &StoreSource,
        served: &[Arc<crate::cache::Resource>],
        fresh: &Freshness,
        revision: Revision,
    ) -> Result<(), watchkeeper_api::ApiError> {
        let Some(info) = &self.authentication else {
            return Ok(());
        };
        let Some(config_maps) = served.iter().find(|r| is_config_maps(&r.def)) else {
            return Ok(());
        };
        fresh.wait(config_maps.cache(), revision).await?;
        let key = watchkeeper_core::object_key(AUTHENTICATION_NAMESPACE, AUTHENTICATION_CONFIG_MAP);
        let existing = config_maps.cache().get(&key).0;
        let Some(write) = authentication_write(existing.as_ref().map(|o| o.body()), info) else {
            return Ok(());
        };
        Self::keep(
            source,
            fresh,
            served,
            config_maps,
            "cluster-authentication-trust",
            (AUTHENTICATION_NAMESPACE, AUTHENTICATION_CONFIG_MAP),
            write,
        )
        .await
    }

    /// Gives the active `namespace` its `kube-root-ca.crt` ConfigMap, or writes back the one it
    /// has when it says anything else (kube's root-ca-cert-publisher).
    async fn ensure_root_ca(
        &self,
        source: &StoreSource,
        served: &[Arc<crate::cache::Resource>],
        fresh: &Freshness,
        namespace: &str,
        revision: Revision,
    ) -> Result<(), watchkeeper_api::ApiError> {
        let Some(root_ca) = &self.root_ca else {
            return Ok(());
        };
        let Some(config_maps) = served.iter().find(|r| is_config_maps(&r.def)) else {
            return Ok(());
        };
        fresh.wait(config_maps.cache(), revision).await?;
        let key = watchkeeper_core::object_key(namespace, ROOT_CA_CONFIG_MAP);
        let existing = config_maps.cache().get(&key).0;
        let Some(write) = root_ca_write(existing.as_ref().map(|o| o.body()), namespace, root_ca)
        else {
            return Ok(());
        };
        let target = (namespace, ROOT_CA_CONFIG_MAP);
        Self::keep(
            source,
            fresh,
            served,
            config_maps,
            "root-ca-cert-publisher",
            target,
            write,
        )
        .await
    }

    /// Deletes what `namespace` holds if it is being deleted; removes its finalizer once it
    /// holds nothing; gives an active one its `default` service account and its
    /// `kube-root-ca.crt`.
    async fn look(
        &self,
        context: &super::Context,
        namespace: &str,
        revision: Revision,
    ) -> Result<(), watchkeeper_api::ApiError> {
        let (source, fresh) = (&context.source, &context.fresh);
        let served = context.registry.load();
        let Some(namespaces) = served.iter().find(|r| is_namespaces(&r.def)).cloned() else {
            return Ok(());
        };
        fresh.wait(namespaces.cache(), revision).await?;
        let Some(object) = namespaces.cache().get(namespace).0 else {
            self.lock().terminating.remove(namespace);
            return Ok(());
        };
        let body = object.body();
        if body.pointer("/metadata/deletionTimestamp").is_none() {
            self.lock().terminating.remove(namespace);
            Self::ensure_service_account(source, &served, fresh, namespace, revision).await?;
            if namespace == AUTHENTICATION_NAMESPACE {
                self.ensure_authentication_info(source, &served, fresh, revision)
                    .await?;
            }
            return self
                .ensure_root_ca(source, &served, fresh, namespace, revision)
                .await;
        }
        let finalizers: Vec<&Value> = body
            .pointer("/spec/finalizers")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .collect();
        if !finalizers.iter().any(|f| f.as_str() == Some(FINALIZER)) {
            return Ok(());
        }
        let prefix = format!("{namespace}/");
        let mut remaining = 0usize;
        let mut left = Remaining::default();
        for resource in served
            .iter()
            .filter(|r| r.def.namespaced && r.conversion.is_none())
        {
            fresh.wait(resource.cache(), revision).await?;
            let contents: Vec<Arc<Object>> = resource
                .cache()
                .latest()
                .range(Some(&prefix), None)
                .cloned()
                .collect();
            remaining += contents.len();
            for object in contents {
                let body = object.body();
                left.count(&resource.def, body);
                if body.pointer("/metadata/deletionTimestamp").is_some() {
                    continue;
                }
                let uid = body
                    .pointer("/metadata/uid")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let policy = DeletePolicy::propagating(Propagation::Background);
                match source
                    .collect(
                        fresh,
                        &served,
                        resource,
                        CONTROLLER,
                        (namespace, object.name()),
                        Collect::Delete { uid, policy },
                    )
                    .await
                {
                    Ok(()) => {}
                    Err(error) if error.code == 404 || error.code == 409 => {}
                    Err(error) => return Err(error),
                }
            }
        }
        let write = |change: Collect<'static>| {
            let (served, namespaces) = (&served, &namespaces);
            async move {
                match source
                    .collect(
                        fresh,
                        served,
                        namespaces,
                        CONTROLLER,
                        ("", namespace),
                        change,
                    )
                    .await
                {
                    Err(error) if error.code == 404 => Ok(()),
                    other => other,
                }
            }
        };
        let version = object.resource_version().to_string();
        if let Some(status) = left.conditions(body, &source_time()) {
            // The finalizer's removal needs the namespace as written: looked at again once
            // its status change is told.
            return write(Collect::PatchStatus(json!({
                "metadata": {"resourceVersion": version},
                "status": status,
            })))
            .await;
        }
        if remaining > 0 {
            // Looked at again after each deletion in it.
            return Ok(());
        }
        let kept: Vec<&Value> = finalizers
            .into_iter()
            .filter(|f| f.as_str() != Some(FINALIZER))
            .collect();
        // Through `finalize`, as kube's namespace controller: the only write that changes
        // `spec.finalizers`.
        write(Collect::PatchFinalize(json!({
            "metadata": {"resourceVersion": version},
            "spec": {"finalizers": kept},
        })))
        .await
    }
}

/// The time as conditions carry it (RFC 3339, seconds).
fn source_time() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

/// The condition types kube's namespace controller keeps on a namespace being deleted, in
/// its order, with the reason and message each has when nothing is wrong
/// (`pkg/controller/namespace/deletion/status_condition_utils.go`).
const CONDITIONS: [(&str, &str, &str); 5] = [
    (
        "NamespaceDeletionDiscoveryFailure",
        "ResourcesDiscovered",
        "All resources successfully discovered",
    ),
    (
        "NamespaceDeletionGroupVersionParsingFailure",
        "ParsedGroupVersions",
        "All legacy kube types successfully parsed",
    ),
    (
        "NamespaceDeletionContentFailure",
        "ContentDeleted",
        "All content successfully deleted, may be waiting on finalization",
    ),
    (
        "NamespaceContentRemaining",
        "ContentRemoved",
        "All content successfully removed",
    ),
    (
        "NamespaceFinalizersRemaining",
        "ContentRemoved",
        "All content successfully removed",
    ),
];

/// What stays in a namespace being deleted once this look's deletions are done: objects
/// with finalizers (deleted, they are only marked), by resource and by finalizer — what
/// kube's controller counts when it lists a resource again after deleting its objects.
#[derive(Debug, Default)]
struct Remaining {
    /// `{plural}.{group}` (`configmaps.` for the core group) → objects.
    by_resource: std::collections::BTreeMap<String, usize>,
    /// Finalizer → objects.
    by_finalizer: std::collections::BTreeMap<String, usize>,
}

impl Remaining {
    fn count(&mut self, def: &ResourceDef, body: &Value) {
        let finalizers = body
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .filter(|f| !f.is_empty());
        let Some(finalizers) = finalizers else {
            return;
        };
        *self
            .by_resource
            .entry(format!("{}.{}", def.plural, def.group))
            .or_default() += 1;
        for finalizer in finalizers.iter().filter_map(Value::as_str) {
            *self.by_finalizer.entry(finalizer.to_owned()).or_default() += 1;
        }
    }

    /// The namespace's `status` with kube's deletion conditions for what remains, or `None`
    /// when the namespace (`body`) has them already (kube writes only a change; a
    /// condition's `lastTransitionTime` moves only when its status does).
    fn conditions(&self, body: &Value, now: &str) -> Option<Value> {
        let old: Vec<Value> = body
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let mut conditions = old.clone();
        for (kind, ok_reason, ok_message) in CONDITIONS {
            // kube's lists: sorted, `<resource> has <n> resource instances` and
            // `<finalizer> in <n> resource instances`.
            let listed = |counts: &std::collections::BTreeMap<String, usize>, joint: &str| {
                let each: Vec<String> = counts
                    .iter()
                    .map(|(what, n)| format!("{what} {joint} {n} resource instances"))
                    .collect();
                each.join(", ")
            };
            let (status, reason, message) = match kind {
                "NamespaceContentRemaining" if !self.by_resource.is_empty() => (
                    "True",
                    "SomeResourcesRemain",
                    format!(
                        "Some resources are remaining: {}",
                        listed(&self.by_resource, "has")
                    ),
                ),
                "NamespaceFinalizersRemaining" if !self.by_finalizer.is_empty() => (
                    "True",
                    "SomeFinalizerRemain",
                    format!(
                        "Some finalizers are remaining: {}",
                        listed(&self.by_finalizer, "in")
                    ),
                ),
                _ => ("False", ok_reason, ok_message.to_owned()),
            };
            let new = json!({"type": kind, "status": status, "lastTransitionTime": now,
                "reason": reason, "message": message});
            match conditions.iter_mut().find(|c| c["type"] == kind) {
                None => conditions.push(new),
                Some(condition) => {
                    if condition["status"] != status {
                        condition["lastTransitionTime"] = json!(now);
                    }
                    condition["status"] = json!(status);
                    condition["reason"] = json!(reason);
                    condition["message"] = json!(message);
                }
            }
        }
        (conditions != old).then(|| {
            let mut status = body.get("status").cloned().unwrap_or_else(|| json!({}));
            status["conditions"] = Value::Array(conditions);
            status
        })
    }
}

impl Observer for NamespaceController {
    fn reset(&self, def: &ResourceDef, revision: Revision, objects: &[Arc<Object>]) {
        let mut state = self.lock();
        state.revision = state.revision.max(revision);
        if is_namespaces(def) {
            for object in objects {
                Self::saw_namespace(&mut state, object);
            }
        }
        // Anything may have gone in the gap: look at every namespace being deleted again.
        let terminating = state.terminating.clone();
        state.queued.extend(terminating);
        self.queue.release(state);
    }

    fn changes(&self, def: &ResourceDef, revision: Revision, changes: &[Change]) {
        let mut state = self.lock();
        state.revision = state.revision.max(revision);
        if is_namespaces(def) {
            for change in changes {
                match &change.object {
                    Some(object) => Self::saw_namespace(&mut state, object),
                    None => {
                        state.terminating.remove(&*change.key);
                    }
                }
            }
        } else if def.namespaced {
            let accounts = def.group.is_empty() && def.plural == "serviceaccounts";
            let config_maps = is_config_maps(def);
            for change in changes {
                let (namespace, name) = change.key.split_once('/').unwrap_or(("", ""));
                let deleted = change.object.is_none();
                // A deletion in a terminating namespace, of its `default` service account or
                // its `kube-root-ca.crt`; or any change to the latter (it may say something
                // else now).
                if (deleted
                    && (state.terminating.contains(namespace)
                        || (accounts && name == DEFAULT_SERVICE_ACCOUNT)))
                    || (config_maps && name == ROOT_CA_CONFIG_MAP)
                    || (config_maps
                        && namespace == AUTHENTICATION_NAMESPACE
                        && name == AUTHENTICATION_CONFIG_MAP)
                {
                    state.queued.insert(namespace.to_owned());
                }
            }
        }
        self.queue.release(state);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With request-header authentication the front proxy's CA and lists join what another
    /// server published, in kube's JSON; without it they are kept as they are.
    #[test]
    fn request_header_settings_are_published_joined_with_what_was_there() {
        let ca = |name: &str| {
            let params = rcgen::CertificateParams::new(vec![name.to_owned()]).unwrap();
            params
                .self_signed(&rcgen::KeyPair::generate().unwrap())
                .unwrap()
                .pem()
        };
        let (theirs, ours, client) = (ca("theirs"), ca("ours"), ca("client"));
        let existing = json!({"data": {
            "requestheader-client-ca-file": theirs,
            "requestheader-username-headers": "[\"X-Other-User\"]",
            "requestheader-allowed-names": "[\"front-proxy-client\"]",
            "stray": "x"}});
        let config = crate::config::tls::RequestHeaderConfig {
            client_ca_file: "/unused".into(),
            allowed_names: vec!["front-proxy-client".to_owned()],
            username_headers: vec!["X-Remote-User".to_owned()],
            uid_headers: vec![],
            group_headers: vec!["X-Remote-Group".to_owned()],
            extra_headers_prefix: vec!["X-Remote-Extra-".to_owned()],
        };
        let info = AuthenticationInfo {
            client_ca: Some(client.clone()),
            request_header: Some((ours.clone(), config)),
        };
        let Some(Collect::Patch(patch)) = authentication_write(Some(&existing), &info) else {
            panic!("a patch")
        };
        let data = &patch["data"];
        assert_eq!(data["stray"], Value::Null, "dropped");
        assert_eq!(
            data["requestheader-username-headers"],
            "[\"X-Other-User\",\"X-Remote-User\"]"
        );
        assert_eq!(data["requestheader-uid-headers"], "[]");
        assert_eq!(data["requestheader-group-headers"], "[\"X-Remote-Group\"]");
        assert_eq!(
            data["requestheader-extra-headers-prefix"],
            "[\"X-Remote-Extra-\"]"
        );
        assert_eq!(
            data["requestheader-allowed-names"],
            "[\"front-proxy-client\"]"
        );
        let bundle = data["requestheader-client-ca-file"].as_str().unwrap();
        assert_eq!(certificate_blocks(bundle).unwrap().len(), 2);
        assert!(bundle.starts_with(theirs.replace("\r\n", "\n").trim_end()));
        assert_eq!(
            certificate_blocks(data[CLIENT_CA_KEY].as_str().unwrap()).unwrap(),
            certificate_blocks(&client).unwrap()
        );
        // Written as it should be: nothing more to write.
        let mut written = existing.clone();
        let written_data = written["data"].as_object_mut().unwrap();
        for (key, value) in patch["data"].as_object().unwrap() {
            if value.is_null() {
                written_data.remove(key);
            } else {
                written_data.insert(key.clone(), value.clone());
            }
        }
        assert!(authentication_write(Some(&written), &info).is_none());
        // Without request-header authentication here, another server's keys are kept.
        let client_only = AuthenticationInfo {
            client_ca: Some(client),
            request_header: None,
        };
        let Some(Collect::Patch(patch)) = authentication_write(Some(&existing), &client_only)
        else {
            panic!("a patch")
        };
        assert_eq!(
            patch["data"]["requestheader-username-headers"],
            existing["data"]["requestheader-username-headers"]
        );
        assert_eq!(patch["data"]["stray"], Value::Null);
    }

    fn owned_by(manager: &str, ca: &str) -> Value {
        json!({"metadata": {"annotations": {DESCRIPTION_ANNOTATION: "d"},
            "managedFields": [{"manager": manager, "operation": "Update",
                "fieldsV1": {"f:data": {"f:ca.crt": {}}}}]},
            "data": {ROOT_CA_KEY: ca}})
    }

    /// Written when absent or changed by a client; left when it says the bundle, or when
    /// another server's publisher wrote its own bundle (no rewriting each other's).
    #[test]
    fn the_root_ca_is_written_back_unless_a_publisher_wrote_it() {
        assert!(matches!(
            root_ca_write(None, "ns", "A"),
            Some(Collect::Create(_))
        ));
        assert!(root_ca_write(Some(&owned_by(ROOT_CA_MANAGER, "A")), "ns", "A").is_none());
        assert!(root_ca_write(Some(&owned_by(ROOT_CA_MANAGER, "B")), "ns", "A").is_none());
        let Some(Collect::Patch(patch)) =
            root_ca_write(Some(&owned_by("kubectl-edit", "B")), "ns", "A")
        else {
            panic!("a client's change is written back");
        };
        assert_eq!(patch["data"], json!({"ca.crt": "A"}));
        let mut extra = owned_by(ROOT_CA_MANAGER, "B");
        extra["data"]["x"] = json!("y");
        let Some(Collect::Patch(patch)) = root_ca_write(Some(&extra), "ns", "A") else {
            panic!("another key is taken out");
        };
        assert_eq!(patch["data"], json!({"ca.crt": "A", "x": null}));
        let mut undescribed = owned_by(ROOT_CA_MANAGER, "A");
        undescribed["metadata"]["annotations"] = json!({});
        assert!(root_ca_write(Some(&undescribed), "ns", "A").is_some());
    }
}

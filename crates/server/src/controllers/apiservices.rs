//! The APIServices of kube-apiserver's aggregator, for a server over a store: those it
//! registers for the group/versions it serves and for CustomResourceDefinitions (kube-
//! aggregator's `autoregister` controller, fed by `apiServicesToRegister` and the
//! `crdRegistrationController`), and every APIService's `Available` condition (its local and
//! remote availability controllers).
//!
//! ## Guarantees
//! - Registration follows `autoregister`'s table (`checkAPIService`). Each built-in
//!   group/version served at start that kube-apiserver registers
//!   ([`watchkeeper_api::discovery::API_SERVICE_PRIORITIES`]; not `apiregistration.k8s.io`
//!   itself) is wanted as `VERSION.GROUP` (`v1.` for the core group) with its group and version
//!   priorities and the label `kube-aggregator.kubernetes.io/automanaged: onstart`, synced once
//!   after start: created when missing (the start's bootstrap writes the missing ones first,
//!   as this controller would leave them: [`started`], `crate::bootstrap`, so that a start
//!   writes nothing behind its readiness), its spec set back when it is managed `onstart`,
//!   was there at start and differs; deleted by a client afterwards, it stays deleted until
//!   the next start, as kube's does. Each group/version a CustomResourceDefinition serves is wanted
//!   with priorities 1000 and 100 and the label `"true"`, kept in sync: created, its spec set
//!   back, and deleted once no CRD serves it; nothing of a CRD's is looked at before the CRDs
//!   were first told (as kube's controllers wait for their informers), so a start never
//!   deletes one whose CRD it has not read yet. An APIService without the label (a client's)
//!   is never touched.
//! - Every APIService gets kube's `Available` condition: `True`, `Local`, `Local APIServices
//!   are always available` without `spec.service`; for a Service reference, kube's checks in
//!   kube's order and words (`ServiceNotFound`; for a `ClusterIP` Service `ServicePortError`,
//!   `EndpointsNotFound`, `MissingEndpoints` from its EndpointSlices); a reference that passes
//!   them is `False`, `FailedDiscoveryCheck`, since this server does not proxy to aggregated
//!   API servers (the message says so, after kube's `failing or missing response from URL`).
//!   `lastTransitionTime` moves only when the status does; nothing is written when status,
//!   reason and message are already those. Re-checked when the APIService, its Service or an
//!   EndpointSlice of its namespace changes.
//! - Writes go through the ordinary write path with the resource version read as precondition
//!   (status through `/status`); a refused write (gone, changed since, created by another
//!   server over the same etcd) waits for the change that caused it; a failure retries with
//!   [`super::Retries`]' back-off.
//!
//! ## Bounds
//! The served version names of each CRD, the Service each APIService names and the names
//! queued: bounded by the store's quota of CRDs and APIServices.
//!
//! ## Differs from kube
//! Discovery lists the groups the server serves, whatever their APIServices say (kube's
//! aggregator stops serving a group whose APIService is deleted). A group/version whose
//! APIService names a Service is listed and answers 503, as kube's does while that Service
//! does not answer (`crate::http::discovery`): this server proxies to no Service.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};
use watchkeeper_api::discovery::{CUSTOM_GROUP_PRIORITY, api_service_priority};
use watchkeeper_api::gc::{DeletePolicy, Propagation};
use watchkeeper_api::{ApiError, ResourceDef, crd};
use watchkeeper_core::gotext::go_quote;
use watchkeeper_core::{Change, Object, Revision};

use super::Retries;
use crate::source::feed::Observer;
use crate::source::store::Collect;

/// The first retry delay of a failed look.
pub const RETRY_BASE: Duration = Duration::from_millis(5);

/// The longest retry delay.
pub const RETRY_MAX: Duration = Duration::from_secs(1000);

/// Its writes' name.
pub const CONTROLLER: &str = "kube-aggregator";

/// kube-aggregator's `AutoRegisterManagedLabel`.
pub const MANAGED_LABEL: &str = "kube-aggregator.kubernetes.io/automanaged";

/// The label's value of APIServices synced once at start.
const ON_START: &str = "onstart";

/// The label's value of APIServices kept in sync (a CRD's).
const CONTINUOUSLY: &str = "true";

/// The EndpointSlice label naming its Service.
const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// The APIService a group/version is registered as.
#[must_use]
pub fn name_of(group: &str, version: &str) -> String {
    format!("{version}.{group}")
}

#[derive(Debug, Default)]
struct State {
    /// The served (group, version)s of every CRD, by CRD name.
    crds: BTreeMap<String, BTreeSet<(String, String)>>,
    /// Whether the CRDs were told.
    crds_known: bool,
    /// The APIServices whose look waits for the CRDs to be told.
    waiting_for_crds: BTreeSet<String>,
    /// The Service each APIService names, `(namespace, name)`.
    services: BTreeMap<String, (String, String)>,
    /// The APIServices the store held at the first look (kube's `apiServicesAtStart`); `None`
    /// until then.
    at_start: Option<BTreeSet<String>>,
    /// Those whose registration was looked at successfully once (`syncedSuccessfully`).
    synced: BTreeSet<String>,
    /// Those to look at.
    queued: BTreeSet<String>,
    /// The newest revision told.
    revision: Revision,
}

impl super::Queued for State {
    fn queued(&mut self) -> (&mut BTreeSet<String>, Revision) {
        (&mut self.queued, self.revision)
    }
}

impl State {
    /// The APIServices naming a Service of `namespace` (`name`: that one only).
    fn naming(&self, namespace: &str, name: Option<&str>) -> Vec<String> {
        self.services
            .iter()
            .filter(|(_, (ns, svc))| ns == namespace && name.is_none_or(|n| n == svc))
            .map(|(apiservice, _)| apiservice.clone())
            .collect()
    }

    /// Whether some CRD serves the APIService `name`, and its group and version.
    fn custom(&self, name: &str) -> Option<(String, String)> {
        self.crds
            .values()
            .flatten()
            .find(|(group, version)| name_of(group, version) == name)
            .cloned()
    }
}

/// The controller (see the module docs).
#[derive(Debug)]
pub struct ApiServices {
    /// The built-in APIServices wanted: their specs by name ([`built_in`]).
    built_in: BTreeMap<String, Value>,
    queue: super::NameQueue<State>,
}

/// The spec kube registers `group`/`version` with, as stored (Go's `omitempty` drops the
/// core group's empty `group`).
fn spec(group: &str, version: &str, (group_priority, version_priority): (i32, i32)) -> Value {
    let mut spec = json!({"group": group, "version": version,
        "groupPriorityMinimum": group_priority, "versionPriority": version_priority});
    if group.is_empty()
        && let Some(map) = spec.as_object_mut()
    {
        map.remove("group");
    }
    spec
}

/// The built-in APIServices kube-apiserver registers for `defs` (the stored resources served
/// at start): for their group/versions, the other versions served from their storage
/// (`events.k8s.io/v1`) and the reviews', those of
/// [`watchkeeper_api::discovery::API_SERVICE_PRIORITIES`], their specs
/// by name.
#[must_use]
pub fn built_in(defs: &[ResourceDef]) -> BTreeMap<String, Value> {
    let views: Vec<ResourceDef> = defs
        .iter()
        .flat_map(watchkeeper_api::versions::builtin_views)
        .map(|(view, _)| view)
        .collect();
    defs.iter()
        .chain(&views)
        .map(|d| (d.group.as_str(), d.version.as_str()))
        .chain(
            watchkeeper_api::discovery::REVIEW_RESOURCES
                .iter()
                .map(|&(group, version, ..)| (group, version)),
        )
        .filter_map(|(group, version)| {
            let priority = api_service_priority(group, version)?;
            Some((name_of(group, version), spec(group, version, priority)))
        })
        .collect()
}

/// The built-in APIService `name` with `spec` as the controller would leave it after its
/// first look (label `onstart`, `Available` `Local` since `now`), for the bootstrap to write
/// where absent, so that a start writes none of them behind its readiness.
#[must_use]
pub fn started(name: &str, spec: &Value, now: &str) -> Value {
    let (status, reason, message) = availability(&json!({"spec": spec}), None, &[]);
    json!({
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": name, "labels": {MANAGED_LABEL: ON_START}},
        "spec": spec,
        "status": {"conditions": [{"type": "Available", "status": status,
            "lastTransitionTime": now, "reason": reason, "message": message}]},
    })
}

/// The (group, version)s a CRD's body serves.
fn served_versions(body: &Value) -> BTreeSet<(String, String)> {
    let group = body
        .pointer("/spec/group")
        .and_then(Value::as_str)
        .unwrap_or_default();
    body.pointer("/spec/versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|v| v["served"].as_bool() == Some(true))
        .filter_map(|v| v["name"].as_str())
        .map(|version| (group.to_owned(), version.to_owned()))
        .collect()
}

/// The Service an APIService's body names, `(namespace, name)`.
fn service_of(body: &Value) -> Option<(String, String)> {
    let service = body.pointer("/spec/service").filter(|s| s.is_object())?;
    let text = |key: &str| service[key].as_str().unwrap_or_default().to_owned();
    Some((text("namespace"), text("name")))
}

fn is_apiservices(def: &ResourceDef) -> bool {
    def.group == "apiregistration.k8s.io" && def.plural == "apiservices"
}

fn is_services(def: &ResourceDef) -> bool {
    def.group.is_empty() && def.plural == "services"
}

fn is_endpoint_slices(def: &ResourceDef) -> bool {
    def.group == "discovery.k8s.io" && def.plural == "endpointslices"
}

/// What the registration of one APIService does (`checkAPIService`'s table).
#[derive(Debug, PartialEq)]
pub enum Registration {
    /// Nothing.
    Keep,
    /// Create this object.
    Create(Value),
    /// Replace the spec by this one.
    SetSpec(Value),
    /// Delete it.
    Delete,
}

/// `checkAPIService`: what to do about the APIService `current` (`None`: absent) given the
/// `desired` spec and label value (`None`: not wanted), whether it was there at start and
/// whether its registration was looked at successfully before.
#[must_use]
pub fn registration(
    name: &str,
    desired: Option<(&Value, &str)>,
    current: Option<&Value>,
    at_start: bool,
    synced: bool,
) -> Registration {
    let managed = current
        .and_then(|c| {
            c.pointer(&format!(
                "/metadata/labels/{}",
                MANAGED_LABEL.replace('/', "~1")
            ))
        })
        .and_then(Value::as_str);
    match (desired, current) {
        (None, None) => Registration::Keep,
        (Some((_, ON_START)), _) if synced => Registration::Keep,
        (Some((spec, label)), None) => Registration::Create(json!({
            "apiVersion": "apiregistration.k8s.io/v1",
            "kind": "APIService",
            "metadata": {"name": name, "labels": {MANAGED_LABEL: label}},
            "spec": spec,
        })),
        (_, Some(_)) if !matches!(managed, Some(ON_START | CONTINUOUSLY)) => Registration::Keep,
        (_, Some(_)) if managed == Some(ON_START) && (!at_start || synced) => Registration::Keep,
        (None, Some(_)) => Registration::Delete,
        (Some((spec, _)), Some(current)) => {
            if current.get("spec") == Some(spec) {
                Registration::Keep
            } else {
                Registration::SetSpec(spec.clone())
            }
        }
    }
}

/// The `Available` condition's status, reason and message for the APIService `body`, reading
/// `service` (its Service's body, if any) and `slices` (the EndpointSlices of its namespace).
#[must_use]
pub fn availability(
    body: &Value,
    service: Option<&Value>,
    slices: &[&Value],
) -> (&'static str, &'static str, String) {
    let Some(reference) = body.pointer("/spec/service").filter(|s| s.is_object()) else {
        return (
            "True",
            "Local",
            "Local APIServices are always available".to_owned(),
        );
    };
    let name = reference["name"].as_str().unwrap_or_default();
    let namespace = reference["namespace"].as_str().unwrap_or_default();
    let port = reference["port"].as_i64().unwrap_or(443);
    let Some(service) = service else {
        return (
            "False",
            "ServiceNotFound",
            format!("service/{name} in {} is not present", go_quote(namespace)),
        );
    };
    let kind = service
        .pointer("/spec/type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP");
    if kind == "ClusterIP" {
        let port_name = service
            .pointer("/spec/ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|p| p["port"].as_i64() == Some(port))
            .map(|p| p["name"].as_str().unwrap_or_default());
        let Some(port_name) = port_name else {
            return (
                "False",
                "ServicePortError",
                format!(
                    "service/{name} in {} is not listening on port {port}",
                    go_quote(namespace)
                ),
            );
        };
        let slices: Vec<&Value> = slices
            .iter()
            .copied()
            .filter(|s| {
                s.pointer(&format!(
                    "/metadata/labels/{}",
                    SERVICE_NAME_LABEL.replace('/', "~1")
                ))
                .and_then(Value::as_str)
                    == Some(name)
            })
            .collect();
        if slices.is_empty() {
            return (
                "False",
                "EndpointsNotFound",
                format!(
                    "cannot find endpointslices for service/{name} in {}",
                    go_quote(namespace)
                ),
            );
        }
        let available = slices.iter().any(|slice| {
            let ready = slice["endpoints"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|e| {
                    e.pointer("/conditions/ready")
                        .and_then(Value::as_bool)
                        .unwrap_or(true)
                });
            let port = slice["ports"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|p| p["name"].as_str() == Some(port_name) && p["port"].is_i64());
            ready && port
        });
        if !available {
            return (
                "False",
                "MissingEndpoints",
                format!(
                    "endpointslices for service/{name} in {} have no addresses with port name {}",
                    go_quote(namespace),
                    go_quote(port_name)
                ),
            );
        }
    }
    let host = if kind == "ExternalName" {
        service.pointer("/spec/externalName")
    } else {
        service.pointer("/spec/clusterIP")
    }
    .and_then(Value::as_str)
    .unwrap_or_default();
    let host = if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_owned()
    };
    let group = body
        .pointer("/spec/group")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let version = body
        .pointer("/spec/version")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let path = if group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{group}/{version}")
    };
    (
        "False",
        "FailedDiscoveryCheck",
        format!(
            "failing or missing response from https://{host}:{port}{path}: this server does not proxy to aggregated API servers"
        ),
    )
}

/// The conditions of `body` with its `Available` one set to `(status, reason, message)` as
/// kube's `SetAPIServiceCondition` sets it (the transition time moves only with the status);
/// `None` when it is already that.
fn with_available(
    body: &Value,
    (status, reason, message): (&str, &str, &str),
    now: &str,
) -> Option<Vec<Value>> {
    let mut conditions: Vec<Value> = body
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    match conditions.iter_mut().find(|c| c["type"] == "Available") {
        Some(current) => {
            if current["status"] == status
                && current["reason"] == reason
                && current["message"] == message
            {
                return None;
            }
            if current["status"] != status {
                current["status"] = json!(status);
                current["lastTransitionTime"] = json!(now);
            }
            current["reason"] = json!(reason);
            current["message"] = json!(message);
        }
        None => conditions.push(json!({"type": "Available", "status": status,
            "lastTransitionTime": now, "reason": reason, "message": message})),
    }
    Some(conditions)
}

/// Writes `change` to the APIService `name`; a refusal because it is gone, changed or
/// created since is no failure (the change that caused it tells the controller again).
async fn write(
    context: &super::Context,
    served: &crate::cache::Served,
    apiservices: &Arc<crate::cache::Resource>,
    name: &str,
    change: Collect<'_>,
) -> Result<(), ApiError> {
    match context
        .source
        .collect(
            &context.fresh,
            served,
            apiservices,
            CONTROLLER,
            ("", name),
            change,
        )
        .await
    {
        Err(error) if matches!(error.code, 404 | 409) => Ok(()),
        other => other,
    }
}

impl ApiServices {
    /// A controller that registers `built_in` ([`built_in`]) and the CRDs' group/versions.
    #[must_use]
    pub fn new(built_in: BTreeMap<String, Value>) -> Arc<ApiServices> {
        Arc::new(ApiServices {
            built_in,
            queue: super::NameQueue::default(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.queue.lock()
    }

    /// Runs the controller with `context` until `shutdown` turns true.
    pub async fn run(
        self: Arc<Self>,
        context: super::Context,
        shutdown: tokio::sync::watch::Receiver<bool>,
    ) {
        let names: Vec<String> = self.built_in.keys().cloned().collect();
        {
            let mut state = self.lock();
            state.queued.extend(names);
            self.queue.release(state);
        }
        self.queue
            .run(
                Retries::new(RETRY_BASE, RETRY_MAX),
                |name, revision| {
                    let (this, context) = (&self, &context);
                    async move { this.look(context, &name, revision).await }
                },
                "APIService registration",
                shutdown,
            )
            .await;
    }

    /// Registers the APIService `name` a step, or sets its `Available` condition.
    async fn look(
        &self,
        context: &super::Context,
        name: &str,
        revision: Revision,
    ) -> Result<(), ApiError> {
        let served = context.registry.load();
        let Some(apiservices) = served
            .find("apiregistration.k8s.io", "v1", "apiservices")
            .cloned()
        else {
            return Ok(());
        };
        if self.lock().at_start.is_none() {
            // kube's `apiServicesAtStart` is its informer's first list: those the store holds
            // now (a first reset can be older, when the caches rebuild their history).
            let now = context.source.current_revision().await?;
            context.fresh.wait(apiservices.cache(), now).await?;
            let names: BTreeSet<String> = apiservices
                .cache()
                .latest()
                .range(None, None)
                .map(|o| o.name().to_owned())
                .collect();
            self.lock().at_start.get_or_insert(names);
        }
        context.fresh.wait(apiservices.cache(), revision).await?;
        let current = apiservices.cache().get(name).0;
        let current = current.as_ref().map(|o| o.body());
        let (desired, at_start, synced) = {
            let mut state = self.lock();
            if !state.crds_known && !self.built_in.contains_key(name) {
                // Which CRDs there are is not known yet (kube's controllers wait for their
                // informers): looked at once it is, not deleted meanwhile.
                state.waiting_for_crds.insert(name.to_owned());
                return Ok(());
            }
            let at_start = state
                .at_start
                .as_ref()
                .is_some_and(|names| names.contains(name));
            let desired = match self.built_in.get(name) {
                Some(spec) => Some((spec.clone(), ON_START)),
                None => state.custom(name).map(|(group, version)| {
                    (spec(&group, &version, CUSTOM_GROUP_PRIORITY), CONTINUOUSLY)
                }),
            };
            (desired, at_start, state.synced.contains(name))
        };
        let step = registration(
            name,
            desired.as_ref().map(|(spec, label)| (spec, *label)),
            current,
            at_start,
            synced,
        );
        let write = |change| write(context, &served, &apiservices, name, change);
        let uid = current
            .and_then(|c| c.pointer("/metadata/uid"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let version = current
            .and_then(|c| c.pointer("/metadata/resourceVersion"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let wrote = step != Registration::Keep;
        let result = match step {
            Registration::Keep => Ok(()),
            Registration::Create(object) => write(Collect::Create(object)).await,
            Registration::Delete => {
                write(Collect::Delete {
                    uid: &uid,
                    policy: DeletePolicy::propagating(Propagation::Background),
                })
                .await
            }
            Registration::SetSpec(desired) => {
                let mut spec: Map<String, Value> = current
                    .and_then(|c| c.get("spec"))
                    .and_then(Value::as_object)
                    .map(|old| old.keys().map(|k| (k.clone(), Value::Null)).collect())
                    .unwrap_or_default();
                if let Some(desired) = desired.as_object() {
                    spec.extend(desired.clone());
                }
                write(Collect::Patch(json!({
                    "metadata": {"resourceVersion": version},
                    "spec": spec,
                })))
                .await
            }
        };
        result?;
        if desired.is_some() {
            self.lock().synced.insert(name.to_owned());
        }
        let Some(current) = current else {
            return Ok(());
        };
        if wrote {
            // Told again once the write is cached.
            return Ok(());
        }
        let service = match service_of(current) {
            Some((namespace, service)) => {
                let services = served.find("", "v1", "services").cloned();
                let slices = served
                    .find("discovery.k8s.io", "v1", "endpointslices")
                    .cloned();
                for resource in services.iter().chain(slices.iter()) {
                    context.fresh.wait(resource.cache(), revision).await?;
                }
                let object = services.as_ref().and_then(|s| {
                    s.cache()
                        .get(&watchkeeper_core::object_key(&namespace, &service))
                        .0
                });
                let prefix = format!("{namespace}/");
                let slices: Vec<Arc<Object>> = slices
                    .map(|s| {
                        s.cache()
                            .latest()
                            .range(Some(&prefix), None)
                            .cloned()
                            .collect()
                    })
                    .unwrap_or_default();
                Some((object, slices))
            }
            None => None,
        };
        let (status, reason, message) = match &service {
            Some((object, slices)) => {
                let slices: Vec<&Value> = slices.iter().map(|s| s.body()).collect();
                availability(current, object.as_ref().map(|o| o.body()), &slices)
            }
            None => availability(current, None, &[]),
        };
        let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
        let Some(conditions) = with_available(current, (status, reason, &message), &now) else {
            return Ok(());
        };
        write(Collect::PatchStatus(json!({
            "metadata": {"resourceVersion": version},
            "status": {"conditions": conditions},
        })))
        .await
    }
}

impl Observer for ApiServices {
    fn reset(&self, def: &ResourceDef, revision: Revision, objects: &[Arc<Object>]) {
        let mut state = self.lock();
        state.revision = state.revision.max(revision);
        if is_apiservices(def) {
            let names: BTreeSet<String> = objects.iter().map(|o| o.name().to_owned()).collect();
            state.services = objects
                .iter()
                .filter_map(|o| Some((o.name().to_owned(), service_of(o.body())?)))
                .collect();
            state.queued.extend(names);
            state.queued.extend(self.built_in.keys().cloned());
            let custom: Vec<String> = state
                .crds
                .values()
                .flatten()
                .map(|(g, v)| name_of(g, v))
                .collect();
            state.queued.extend(custom);
        } else if crd::is_crd(def) {
            let before: Vec<String> = state
                .crds
                .values()
                .flatten()
                .map(|(g, v)| name_of(g, v))
                .collect();
            state.crds = objects
                .iter()
                .map(|o| (o.name().to_owned(), served_versions(o.body())))
                .collect();
            let after: Vec<String> = state
                .crds
                .values()
                .flatten()
                .map(|(g, v)| name_of(g, v))
                .collect();
            state.queued.extend(before);
            state.crds_known = true;
            let waiting = std::mem::take(&mut state.waiting_for_crds);
            state.queued.extend(waiting);
            state.queued.extend(after);
        } else if is_services(def) || is_endpoint_slices(def) {
            let all: Vec<String> = state.services.keys().cloned().collect();
            state.queued.extend(all);
        }
        self.queue.release(state);
    }

    fn changes(&self, def: &ResourceDef, revision: Revision, changes: &[Change]) {
        let apiservices = is_apiservices(def);
        let crds = crd::is_crd(def);
        let services = is_services(def);
        let slices = is_endpoint_slices(def);
        if !(apiservices || crds || services || slices) {
            return;
        }
        let mut state = self.lock();
        state.revision = state.revision.max(revision);
        for change in changes {
            if apiservices {
                let name = change.key.to_string();
                match change.object.as_ref().and_then(|o| service_of(o.body())) {
                    Some(service) => state.services.insert(name.clone(), service),
                    None => state.services.remove(&name),
                };
                state.queued.insert(name);
            } else if crds {
                let name = change.key.to_string();
                let before = state.crds.remove(&name).unwrap_or_default();
                let after = change
                    .object
                    .as_ref()
                    .map(|o| served_versions(o.body()))
                    .unwrap_or_default();
                let names: Vec<String> = before
                    .iter()
                    .chain(after.iter())
                    .map(|(g, v)| name_of(g, v))
                    .collect();
                if change.object.is_some() {
                    state.crds.insert(name, after);
                }
                state.queued.extend(names);
            } else {
                let (namespace, name) = change.key.split_once('/').unwrap_or(("", &change.key));
                let affected = if services {
                    state.naming(namespace, Some(name))
                } else {
                    // A deleted slice names no Service: every APIService of its namespace.
                    state.naming(namespace, None)
                };
                state.queued.extend(affected);
            }
        }
        self.queue.release(state);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn managed(label: &str) -> Value {
        json!({"metadata": {"name": "v1.apps", "labels": {MANAGED_LABEL: label}},
            "spec": {"group": "apps", "version": "v1", "groupPriorityMinimum": 17800,
                "versionPriority": 15}})
    }

    /// kube's `checkAPIService` table, row by row.
    #[test]
    fn registration_follows_kubes_table() {
        let desired = spec("apps", "v1", (17800, 15));
        let on_start = Some((&desired, ON_START));
        let always = Some((&desired, CONTINUOUSLY));
        let name = "v1.apps";
        // 2: not found.
        assert_eq!(
            registration(name, None, None, false, false),
            Registration::Keep
        );
        assert!(matches!(
            registration(name, on_start, None, false, false),
            Registration::Create(_)
        ));
        assert_eq!(
            registration(name, on_start, None, false, true),
            Registration::Keep
        );
        assert!(matches!(
            registration(name, always, None, false, true),
            Registration::Create(_)
        ));
        // 3: a client's.
        let mut unmanaged = managed("x");
        unmanaged["metadata"]["labels"] = json!({});
        unmanaged["spec"]["versionPriority"] = json!(1);
        for d in [None, on_start, always] {
            assert_eq!(
                registration(name, d, Some(&unmanaged), true, false),
                Registration::Keep
            );
        }
        // 4: on start, not there at start.
        let mut stale = managed(ON_START);
        stale["spec"]["versionPriority"] = json!(1);
        assert_eq!(
            registration(name, None, Some(&stale), false, false),
            Registration::Keep
        );
        assert_eq!(
            registration(name, always, Some(&stale), false, false),
            Registration::Keep
        );
        // 5: on start, there at start: once.
        assert_eq!(
            registration(name, None, Some(&stale), true, false),
            Registration::Delete
        );
        assert_eq!(
            registration(name, on_start, Some(&stale), true, false),
            Registration::SetSpec(desired.clone())
        );
        assert_eq!(
            registration(name, on_start, Some(&stale), true, true),
            Registration::Keep
        );
        assert_eq!(
            registration(name, None, Some(&stale), true, true),
            Registration::Keep
        );
        // 6: always: every time.
        let mut custom = managed(CONTINUOUSLY);
        custom["spec"]["versionPriority"] = json!(1);
        assert_eq!(
            registration(name, None, Some(&custom), false, true),
            Registration::Delete
        );
        assert_eq!(
            registration(name, always, Some(&custom), false, true),
            Registration::SetSpec(desired.clone())
        );
        assert_eq!(
            registration(name, always, Some(&managed(CONTINUOUSLY)), false, true),
            Registration::Keep
        );
    }

    fn remote(port: i64) -> Value {
        json!({"spec": {"group": "metrics.k8s.io", "version": "v1beta1",
            "service": {"namespace": "kube-system", "name": "metrics-server", "port": port}}})
    }

    #[test]
    fn availability_is_kubes_in_kubes_order() {
        let local = json!({"spec": {"group": "apps", "version": "v1"}});
        assert_eq!(
            availability(&local, None, &[]),
            (
                "True",
                "Local",
                "Local APIServices are always available".to_owned()
            )
        );
        assert_eq!(
            availability(&remote(443), None, &[]),
            (
                "False",
                "ServiceNotFound",
                "service/metrics-server in \"kube-system\" is not present".to_owned()
            )
        );
        let service = json!({"spec": {"type": "ClusterIP", "clusterIP": "10.96.0.9",
            "ports": [{"name": "https", "port": 443}]}});
        assert_eq!(
            availability(&remote(8443), Some(&service), &[]).1,
            "ServicePortError"
        );
        assert_eq!(
            availability(&remote(443), Some(&service), &[]),
            (
                "False",
                "EndpointsNotFound",
                "cannot find endpointslices for service/metrics-server in \"kube-system\""
                    .to_owned()
            )
        );
        let slice = |ready: bool, port: &str| {
            json!({"metadata": {"labels": {SERVICE_NAME_LABEL: "metrics-server"}},
                "endpoints": [{"addresses": ["10.0.0.1"], "conditions": {"ready": ready}}],
                "ports": [{"name": port, "port": 4443}]})
        };
        let (unready, other_port, ready) = (
            slice(false, "https"),
            slice(true, "http"),
            slice(true, "https"),
        );
        assert_eq!(
            availability(&remote(443), Some(&service), &[&unready, &other_port]),
            (
                "False",
                "MissingEndpoints",
                "endpointslices for service/metrics-server in \"kube-system\" have no addresses with port name \"https\"".to_owned()
            )
        );
        assert_eq!(
            availability(&remote(443), Some(&service), &[&unready, &ready]),
            (
                "False",
                "FailedDiscoveryCheck",
                "failing or missing response from https://10.96.0.9:443/apis/metrics.k8s.io/v1beta1: this server does not proxy to aggregated API servers".to_owned()
            )
        );
    }

    #[test]
    fn the_transition_time_moves_with_the_status_only() {
        let body = json!({"status": {"conditions": [{"type": "Available", "status": "False",
            "lastTransitionTime": "then", "reason": "ServiceNotFound", "message": "m"}]}});
        assert_eq!(
            with_available(&body, ("False", "ServiceNotFound", "m"), "now"),
            None
        );
        let moved = with_available(&body, ("False", "MissingEndpoints", "n"), "now").unwrap();
        assert_eq!(moved[0]["lastTransitionTime"], "then");
        assert_eq!(moved[0]["reason"], "MissingEndpoints");
        let moved = with_available(&body, ("True", "Local", "l"), "now").unwrap();
        assert_eq!(moved[0]["lastTransitionTime"], "now");
        let first = with_available(&json!({}), ("True", "Local", "l"), "now").unwrap();
        assert_eq!(first.len(), 1);
    }
}

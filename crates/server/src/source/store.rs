//! The store source: a store (embedded, memory or etcd) under one registry prefix is the
//! source of truth; watchkeeper is the API server over it.
//!
//! ## Reads
//! The reflection lists the whole registry prefix at one revision and watches it from the
//! next: one store watch covers every resource, so every store revision reaches every cache (a
//! revision with changes for a resource is dispatched to it, one without is a progress
//! notification for it). The caches' resource versions therefore track the store's revision
//! closely, and a consistent read (read the store's current revision, wait until the cache has
//! it) needs no progress request — which etcd 3.4.23 cannot answer safely. A compaction past
//! the resume revision relists; a failed or ended watch relists after a back-off.
//!
//! ## Writes
//! Creates, updates and deletes are compare-and-swap transactions on the store. Guaranteed
//! updates (PATCH, PUT, server-side apply of an existing object) start from the object in the
//! cache as it is, without first proving the cache fresh: the transaction compares the
//! object's revision, so a stale base is refused by the store, never written. On a conflict
//! they wait until the cache has reached the revision the failed transaction reported and
//! retry from the cache, without re-reading or re-decoding the store. What an attempt decides
//! without a transaction — not found, a failed precondition, a refused patch or object,
//! nothing to change — is final only from a cache proven fresh (the store's current revision
//! read, the cache waited for); from an unproven one the update proves it and runs again
//! (counted in `watchkeeper_update_unproven_retries_total`), as kube-apiserver refetches from
//! etcd when an attempt from its cached object fails. A write thus waits for the cache only
//! for its own revision, not also for every write committed before it, and in etcd mode reads
//! no revision from etcd first (BENCHMARKS.md, invocation AP: +28-54 % writes/s on the etcd
//! store). Deletes prove the cache first; a create needs no proof (the store's compare refuses
//! a name that is taken), and server-side apply proves it only before it creates. A write that
//! changes nothing is not written. Every write waits (at most the fresh wait) until the cache has its
//! revision before answering, so a client reads its own writes at `resourceVersion=0` too.
//! `dryRun=All` runs the same paths (validation, defaults, namespace checks, preconditions,
//! conflicts) and stops before the transaction: nothing is stored, watched or counted, and the
//! answer is the object that would have been stored (a create's without a resource version, an
//! update's at the revision it would replace). Other `dryRun` values are kube-apiserver's 422.
//! A write run as a heavy request (`crate::offload`) whose request is gone stops at its next
//! phase boundary — after the body's decode, after a create's field checks and before it is
//! stored, after an update's attempt (patch, merge or apply, admission, validation) and before
//! its storage encoding — so nothing of it is written past that point. A small write to a
//! large object (its stored length at least `--heavy-request-body-bytes`) runs the attempt,
//! the storage encoding and the answer's encoding through `Offload::in_place`: the runtime
//! worker's other tasks are handed to another thread first; the watch's decode of a value that
//! large hands it on too (`Offload::hand_on`, without a slot).
//!
//! ## Deletes
//! A DELETE answers as kube-apiserver's generic store: the object when it stays for its
//! finalizers (200, or 202 for `orphanDependents: false`); when it is removed, the object for
//! the registries with `ReturnDeletedObject` and otherwise `finalizeDelete`'s Success Status.
//! A DELETE of a collection answers the list it read before deleting. A CRD's first DELETE
//! only marks it (cleanup finalizer, `Terminating` condition); the CRD finalizer
//! (`controllers::crd_finalizer`) deletes its objects, and creates of them are refused
//! meanwhile.
//!
//! ## Errors
//! Store errors map by variant to kube-apiserver's answers ([`store_error`]).

use crate::cache::wake_relay::after_watchers;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::Response;
use bytes::Bytes;
use serde_json::{Map, Value, json};
use watchkeeper_api::gc::{self, DeletePolicy};
use watchkeeper_api::graceful::Graceful;
use watchkeeper_api::query::{FieldValidation, Options, WriteOptionsKind};
use watchkeeper_api::schema::{Pruning, StrictField};
use watchkeeper_api::{
    ApiError, CreateContext, PatchType, ResourceDef, apply, prepare_create, prepare_update,
    prepare_update_decoded,
};
use watchkeeper_core::pointer::Pointer as _;
use watchkeeper_core::{Change, Object, Revision, object_key};
use watchkeeper_store::{
    AnyStore, BackendError, Compare, EventKind, KeySelector, KeyValue, RangeError, RangeRequest,
    StartKey, Store, StoreError, TxnError, TxnOp, TxnRequest, Watch, WatchError, WatchItem,
};

use crate::cache::{Origin, Resource};
use crate::http::boxed::pinned_in_place;
use crate::offload::phase_boundary;
use crate::request::ResourceRequest;
use crate::respond::{Warnings, json_response, now_unix};
use crate::source::catalog::VersionsBound;
use crate::source::decode::{Identity, decode_stored, decode_written, decodes_as_is};
use crate::source::event_rate_limit;
use crate::source::feed::{Feed, Item, Listed, ReflectorStatus, Stop};
use crate::source::handover::{Handover, Offer, Outcome, with_revision};
use crate::source::limit_ranger;
use crate::source::node_restriction;
use crate::source::plugin_admission;
use crate::source::pod_toleration_restriction;
use crate::source::read::{self, Freshness, PathCounters};
use crate::source::resource_quota::{self, Quantity};
use crate::source::service_ips::{self, Allocators, NodePorts, OutOfRange, Refused, ServiceIps};
use crate::source::{object_admission, pod_admission, pod_security, policy_admission};

/// Attempts of a guaranteed update before it gives up with 409 (Kubernetes retries until the
/// request times out; a bound keeps a pathological hot key from spinning forever).
const GUARANTEED_UPDATE_ATTEMPTS: usize = 100;

/// The store source.
#[derive(Debug, Clone)]
pub struct StoreSource {
    store: AnyStore,
    /// The registry prefix, without a trailing slash (`/registry`).
    prefix: String,
    /// Objects per page of the reflector's store list.
    list_page: usize,
    /// Consistent GETs from the cache (true) or the store (false).
    consistent_get_from_cache: bool,
    counters: Arc<PathCounters>,
    status: Arc<ReflectorStatus>,
    /// History rebuilding (`--rebuild-history`): how many store revisions back the first list
    /// is taken, to be replayed; `None` lists at the current revision.
    rebuild_window: Option<u64>,
    /// Over etcd, the freshness nudge; the first list of a history rebuild takes its target
    /// revision from one ([`crate::source::nudge`]).
    nudge: Option<Arc<crate::source::nudge::Nudge>>,
    /// Written objects offered by the write path to the reflector (see [`Handover`]).
    handover: Arc<Handover>,
    /// ClusterIP and node port allocation for Services (see [`super::service_ips`]).
    service_ips: Option<Arc<Allocators>>,
    /// `--max-custom-resource-versions`: CRD writes that would pass it are refused.
    custom_versions: Arc<VersionsBound>,
    /// `--cache-memory-bytes`: creates and growing updates that would pass it are refused.
    cache_memory: Arc<crate::source::cache_memory::CacheMemory>,
    /// `--enable-garbage-collector`: DELETEs give objects the `orphan` and
    /// `foregroundDeletion` finalizers (see [`watchkeeper_api::gc`]); off, they never do.
    garbage_collection: bool,
    /// `--disable-admission-plugins`: which admission plugins run.
    admission: pod_admission::AdmissionPlugins,
    /// PodSecurity's configuration (`--admission-control-config-file`).
    pod_security: Arc<watchkeeper_api::pod_security::Configuration>,
    /// The other admission plugins' configurations (`--admission-control-config-file`):
    /// EventRateLimit's, PodTolerationRestriction's, PodNodeSelector's, ResourceQuota's and
    /// ImagePolicyWebhook's.
    plugin_configs: Arc<crate::config::AdmissionConfig>,
    /// Heavy phases of writes with small bodies (a small patch of a large object) run in
    /// place with the runtime worker handed on (see `crate::offload`).
    offload: Arc<crate::offload::Offload>,
    /// The admission webhooks' plugins (`crate::source::webhook`); without them none is called.
    webhooks: Option<Arc<crate::source::webhook::Webhooks>>,
    /// With RBAC in `--authorization-mode`: the authorizer that checks writes of RBAC
    /// objects for escalation ([`crate::auth::rbac::escalation`]).
    rbac_escalation: Option<Arc<crate::auth::Auth>>,
    /// The `authorizer` of admission policies ([`crate::auth::cel`]); without it an
    /// expression naming `authorizer` is skipped.
    policy_authorizer: Option<Arc<dyn watchkeeper_api::admission_policy::Authorizer>>,
    /// Quotas to count again once the caches have caught up with their write (see
    /// [`resource_quota::Recounts`]).
    quota_recounts: Arc<resource_quota::Recounts>,
}

/// A CRD as its first DELETE leaves it (kube's CRD registry `Delete`): `deletionTimestamp`
/// `now` (no grace period is set), the cleanup finalizer added, the `Terminating` condition
/// True `InstanceDeletionPending`.
fn crd_marked_for_deletion(crd: &Value, now: &str) -> Value {
    let mut marked = crd.clone();
    if let Some(metadata) = marked.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.insert("deletionTimestamp".to_owned(), json!(now));
        let finalizers = metadata.entry("finalizers").or_insert_with(|| json!([]));
        if !finalizers.is_array() {
            *finalizers = json!([]);
        }
        if let Some(list) = finalizers.as_array_mut()
            && !list
                .iter()
                .any(|f| f.as_str() == Some(watchkeeper_api::crd::CLEANUP_FINALIZER))
        {
            list.push(json!(watchkeeper_api::crd::CLEANUP_FINALIZER));
        }
    }
    let (reason, message) = watchkeeper_api::crd::TERMINATING_PENDING;
    watchkeeper_api::crd::set_condition(&mut marked, ("Terminating", "True", reason, message), now);
    marked
}

/// The built-in resources whose keys a CRD's could overlap in the store, which a CRD's
/// deletion never deletes (kube's `OverlappingBuiltInResources`).
#[must_use]
pub fn overlaps_built_in(group: &str, plural: &str) -> bool {
    matches!(
        (group, plural),
        ("apiregistration.k8s.io", "apiservices")
            | ("apiextensions.k8s.io", "customresourcedefinitions")
    )
}

/// Whether `resource` is the CustomResourceDefinitions, whose objects the caches' memory bound
/// counts twice ([`crate::source::cache_memory::CacheMemory::admit`]).
fn is_definitions(resource: &Resource) -> bool {
    resource.def.group == "apiextensions.k8s.io"
        && resource.def.plural == "customresourcedefinitions"
}

/// Whether a DELETE that removes an object of `def` answers the object (the registries that
/// set `ReturnDeletedObject: true`, `pkg/registry/*/*/storage/storage.go`: core `pods`,
/// `services`, `namespaces`, `serviceaccounts`, `resourcequotas`, `podtemplates`,
/// `persistentvolumes`, `persistentvolumeclaims`; `storage.k8s.io` `storageclasses`,
/// `volumeattachments`, `csidrivers`, `csinodes`, `volumeattributesclasses`; every
/// `resource.k8s.io` resource) rather than kube's `finalizeDelete` Status. An object that
/// stays (finalizers) is answered by every registry.
fn returns_deleted_object(def: &ResourceDef) -> bool {
    match def.group.as_str() {
        "" => matches!(
            def.plural.as_str(),
            "pods"
                | "services"
                | "namespaces"
                | "serviceaccounts"
                | "resourcequotas"
                | "podtemplates"
                | "persistentvolumes"
                | "persistentvolumeclaims"
        ),
        "storage.k8s.io" => matches!(
            def.plural.as_str(),
            "storageclasses"
                | "volumeattachments"
                | "csidrivers"
                | "csinodes"
                | "volumeattributesclasses"
        ),
        "resource.k8s.io" => true,
        _ => false,
    }
}

/// The answer to a DELETE that removed `object` of a registry that does not return it
/// (kube's `finalizeDelete`): a Success Status whose details name it, its group (left out
/// for the core group), its resource (in `kind`, as kube sets it) and its uid.
fn deleted_status(def: &ResourceDef, object: &Value) -> Value {
    let text = |path: &str| object.pointer(path).and_then(Value::as_str).unwrap_or("");
    let mut details = Map::new();
    details.insert("name".to_owned(), json!(text("/metadata/name")));
    if !def.group.is_empty() {
        details.insert("group".to_owned(), json!(def.group));
    }
    details.insert("kind".to_owned(), json!(def.plural));
    let uid = text("/metadata/uid");
    if !uid.is_empty() {
        details.insert("uid".to_owned(), json!(uid));
    }
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details})
}

/// The answer to a DELETE of a collection: the list read before the deletions, as a LIST of
/// the same page answers it (kind `<Kind>List`, `metadata.resourceVersion`, `continue` and
/// `remainingItemCount` when limited, every item's cached encoding). Its size is known, so a
/// client that asked for protobuf gets it converted.
fn deleted_list(resource: &Resource, page: read::ListPage) -> Response {
    let mut metadata = json!({"resourceVersion": page.revision.to_string()});
    if let Some(token) = &page.continue_token {
        metadata["continue"] = json!(token);
    }
    if let Some(remaining) = page.remaining {
        metadata["remainingItemCount"] = json!(remaining);
    }
    let head = format!(
        "{{\"kind\":\"{}\",\"apiVersion\":\"{}\",\"metadata\":{metadata},\"items\":[",
        resource.def.list_kind(),
        resource.def.api_version()
    );
    let body = crate::http::list_body::ListBody::new(
        &resource.cache().metrics().encode,
        crate::http::list_body::Framing::Json(watchkeeper_core::Encoding::Json),
        head.into(),
        page.items,
        64 * 1024,
    );
    json_response(StatusCode::OK, axum::body::Body::new(body))
}

/// The namespaces kube-apiserver never deletes (its NamespaceLifecycle admission).
const IMMORTAL_NAMESPACES: [&str; 3] = ["default", "kube-system", "kube-public"];

/// Whether `def` is the core namespaces.
fn is_namespaces(def: &ResourceDef) -> bool {
    def.group.is_empty() && def.plural == "namespaces"
}

/// How many `spec.finalizers` a namespace has.
fn namespace_finalizers(namespace: &Value) -> usize {
    namespace
        .pointer("/spec/finalizers")
        .and_then(Value::as_array)
        .map_or(0, Vec::len)
}

/// What the garbage collector writes (see [`StoreSource::collect`]).
pub enum Collect<'a> {
    /// Delete the object, if its uid is `uid`, with `policy`.
    Delete {
        /// The uid the object must have.
        uid: &'a str,
        /// The deletion's propagation.
        policy: DeletePolicy,
    },
    /// Delete the object, if its uid is `uid`, with a grace period of 0 (a pod on a node goes
    /// at once, as kube-controller-manager's pod garbage collector deletes it) and the kind's
    /// default propagation.
    DeleteNow {
        /// The uid the object must have.
        uid: &'a str,
    },
    /// Apply this JSON merge patch.
    Patch(Value),
    /// Apply this JSON merge patch to the `status` subresource.
    PatchStatus(Value),
    /// Apply this JSON merge patch to a namespace's `finalize` subresource.
    PatchFinalize(Value),
    /// Create this object.
    Create(Value),
}

/// How a create's transaction ended, when it did not write.
enum NotCreated {
    /// Refused (the key is taken, the store failed).
    Refused(ApiError),
    /// A record the create claimed (a Service's address or node port) was taken first; the
    /// store was at this revision.
    AddressTaken(Revision),
}

/// What a Service write claims.
enum Claimed {
    /// The records' compares and puts for the write's transaction.
    Claims(Vec<(Compare, TxnOp)>),
    /// An asked value's record is newer than the cache: try again once the cache has this
    /// revision.
    Unseen(Revision),
}

/// Times a create counted by a namespace's ResourceQuotas counts again after another counted
/// write committed first, before it gives up with 409.
const QUOTA_ATTEMPTS: usize = 16;

/// Claims of an address one Service create tries before it gives up (each failed claim waits
/// for the cache to see the Service that took the address).
const ADDRESS_ATTEMPTS: usize = 16;

/// The message of a write the store refused for its quota, as kube-apiserver answers etcd's
/// `ErrGRPCNoSpace` (the client's error text, passed through `ErrorToAPIStatus`).
pub const NO_SPACE_MESSAGE: &str = "etcdserver: mvcc: database space exceeded";

/// A store error as kube-apiserver answers it, by variant: the store unavailable 503
/// ServiceUnavailable; a request the store refuses as too large (etcd's "request is too
/// large", or its "too many operations in txn request" for a write that claims more records
/// than `--max-txn-ops`) 413 RequestEntityTooLarge; a write refused for the store's quota (the memory and
/// embedded stores' `--store-quota-bytes`, or etcd's `--quota-backend-bytes`) 500 with no
/// reason and etcd's message, as kube-apiserver's `ErrorToAPIStatus` answers an error that is
/// not a Status (`StatusReasonUnknown`, the message the error's text; kubectl prints `Error
/// from server: etcdserver: mvcc: database space exceeded`); anything else — a storage error (disk, corrupt data), an
/// invalid transaction, a closed store — 500 InternalError. A compare that does not hold is
/// not an error: the write paths answer it with 409 (AlreadyExists on create, Conflict on
/// update and delete).
#[must_use]
pub fn store_error(error: impl Into<StoreError>) -> ApiError {
    let error = error.into();
    if error == StoreError::Txn(TxnError::NoSpace) {
        return ApiError::new(500, "", NO_SPACE_MESSAGE);
    }
    let backend = match &error {
        StoreError::Range(RangeError::Backend(backend))
        | StoreError::Txn(TxnError::Backend(backend))
        | StoreError::Watch(WatchError::Backend(backend)) => Some(backend),
        _ => None,
    };
    match backend {
        Some(BackendError::Unavailable(message)) => {
            ApiError::service_unavailable(format!("the store is unavailable: {message}"))
        }
        Some(BackendError::Storage(message)) if message.contains("request is too large") => {
            ApiError::request_entity_too_large(format!(
                "the store refused the request as too large: {message}"
            ))
        }
        // etcd's `--max-txn-ops` (128 by default): a write whose transaction claims more
        // records than that (a Service's node ports are claimed in its own transaction, one
        // record each) is too large for this store, not a server failure.
        Some(BackendError::Storage(message))
            if message.contains("too many operations in txn request") =>
        {
            ApiError::request_entity_too_large(format!(
                "the store refused the request as too large: {message} (one write claims a record per node port and address it allocates, in one transaction; etcd's --max-txn-ops bounds them)"
            ))
        }
        _ => ApiError::internal(format!("the store failed: {error}")),
    }
}

impl StoreSource {
    /// The store source over `store`.
    #[must_use]
    pub fn new(
        store: AnyStore,
        prefix: &str,
        list_page: usize,
        consistent_get_from_cache: bool,
        counters: Arc<PathCounters>,
        status: Arc<ReflectorStatus>,
    ) -> StoreSource {
        StoreSource {
            store,
            prefix: prefix.to_owned(),
            list_page,
            consistent_get_from_cache,
            counters,
            status,
            rebuild_window: None,
            nudge: None,
            handover: Arc::default(),
            service_ips: None,
            garbage_collection: true,
            admission: pod_admission::AdmissionPlugins::default(),
            pod_security: Arc::default(),
            plugin_configs: Arc::default(),
            offload: Arc::new(crate::offload::Offload::new(0, 1)),
            webhooks: None,
            rbac_escalation: None,
            policy_authorizer: None,
            quota_recounts: Arc::default(),
            custom_versions: Arc::new(VersionsBound::new(
                crate::config::defaults::MAX_CUSTOM_RESOURCE_VERSIONS,
            )),
            cache_memory: Arc::default(),
        }
    }

    /// With `bound` on the custom resource versions the store's CRDs may serve
    /// (`--max-custom-resource-versions`; the catalog's, so both count alike).
    #[must_use]
    pub fn with_custom_resource_versions(mut self, bound: Arc<VersionsBound>) -> StoreSource {
        self.custom_versions = bound;
        self
    }

    /// The bound on the custom resource versions served.
    #[must_use]
    pub fn custom_resource_versions(&self) -> &Arc<VersionsBound> {
        &self.custom_versions
    }

    /// With `memory` bounding the caches' live objects (`--cache-memory-bytes`).
    #[must_use]
    pub fn with_cache_memory(
        mut self,
        memory: Arc<crate::source::cache_memory::CacheMemory>,
    ) -> StoreSource {
        self.cache_memory = memory;
        self
    }

    /// The bound on the caches' live objects.
    #[must_use]
    pub fn cache_memory(&self) -> &Arc<crate::source::cache_memory::CacheMemory> {
        &self.cache_memory
    }

    /// With or without kube-apiserver's side of garbage collection (`--enable-garbage-collector`,
    /// on by default): DELETEs give objects the finalizers their propagation policy asks for.
    #[must_use]
    pub fn with_garbage_collection(mut self, enabled: bool) -> StoreSource {
        self.garbage_collection = enabled;
        self
    }

    /// With `offload` deciding which writes' phases are heavy (`--heavy-request-body-bytes`;
    /// without it none is).
    #[must_use]
    pub fn with_offload(mut self, offload: Arc<crate::offload::Offload>) -> StoreSource {
        self.offload = offload;
        self
    }

    /// With the admission webhooks called through `webhooks` (`crate::source::webhook`).
    #[must_use]
    pub fn with_webhooks(mut self, webhooks: Arc<crate::source::webhook::Webhooks>) -> StoreSource {
        self.webhooks = Some(webhooks);
        self
    }

    /// The admission webhooks' plugins, when they run.
    #[must_use]
    pub fn webhooks(&self) -> Option<&Arc<crate::source::webhook::Webhooks>> {
        self.webhooks.as_ref()
    }

    /// With writes of RBAC objects checked for escalation by `auth` (when RBAC is one of its
    /// modes; see [`crate::auth::rbac::escalation`]).
    #[must_use]
    pub fn with_rbac_escalation_check(
        mut self,
        auth: Option<Arc<crate::auth::Auth>>,
    ) -> StoreSource {
        self.rbac_escalation = auth;
        self
    }

    /// With admission policies' `authorizer` checks decided by `auth`'s chain
    /// ([`crate::auth::cel`]).
    #[must_use]
    pub fn with_policy_authorizer(mut self, auth: Arc<crate::auth::Auth>) -> StoreSource {
        self.policy_authorizer = Some(crate::auth::cel::policy_authorizer(auth));
        self
    }

    /// With only the admission plugins `admission` says (`--disable-admission-plugins`).
    #[must_use]
    pub fn with_admission(mut self, admission: pod_admission::AdmissionPlugins) -> StoreSource {
        self.admission = admission;
        self
    }

    /// With PodSecurity's defaults and exemptions from `--admission-control-config-file`.
    #[must_use]
    pub fn with_pod_security(
        mut self,
        config: watchkeeper_api::pod_security::Configuration,
    ) -> StoreSource {
        self.pod_security = Arc::new(config);
        self
    }

    /// With the other admission plugins' configurations (`--admission-control-config-file`;
    /// PodSecurity's is [`Self::with_pod_security`]'s).
    #[must_use]
    pub fn with_plugin_configs(mut self, configs: crate::config::AdmissionConfig) -> StoreSource {
        self.plugin_configs = Arc::new(configs);
        self
    }

    /// With ClusterIP allocation from `ranges` (one, or one of each IP family, the primary
    /// first) and node port allocation from `ports` (first, last) for Services.
    #[must_use]
    pub fn with_service_ips(
        mut self,
        ranges: &[crate::config::IpRange],
        ports: (u16, u16),
    ) -> StoreSource {
        self.service_ips = Some(Arc::new(Allocators::new(ranges, ports, &self.prefix)));
        self
    }

    /// The Service allocators, when this source allocates (they are the reflector's
    /// [`crate::source::feed::Observer`] of Services and IPAddresses).
    #[must_use]
    pub fn service_ips(&self) -> Option<Arc<Allocators>> {
        self.service_ips.clone()
    }

    /// With history rebuilding: the reflector's first list is taken `window` store revisions
    /// before the current one (never below the store's compaction) and the watch replays the
    /// revisions since, so each cache starts with the history a running server would have had
    /// (bounded by the cache's own capacity) and clients resume from resource versions they
    /// saw before a restart or on a sibling instance. `None` (the default) lists at the
    /// current revision: the history starts empty, as kube-apiserver's does.
    #[must_use]
    pub fn with_history_rebuild(mut self, window: Option<u64>) -> StoreSource {
        self.rebuild_window = window;
        self
    }

    /// With the freshness nudge over etcd (see [`crate::source::nudge`]).
    #[must_use]
    pub fn with_nudge(mut self, nudge: Option<Arc<crate::source::nudge::Nudge>>) -> StoreSource {
        self.nudge = nudge;
        self
    }

    /// The registry prefix its keys are under, without a trailing slash (`/registry`).
    #[must_use]
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The store.
    #[must_use]
    pub fn store(&self) -> &AnyStore {
        &self.store
    }

    /// The writes' offers to the reflector (see [`Handover`]).
    #[must_use]
    pub fn handover(&self) -> &Arc<Handover> {
        &self.handover
    }

    /// The quotas marked to be counted again (see [`resource_quota::Recounts`]).
    #[must_use]
    pub fn quota_recounts(&self) -> &Arc<resource_quota::Recounts> {
        &self.quota_recounts
    }

    /// The store's current revision.
    ///
    /// # Errors
    /// As [`store_error`].
    pub async fn current_revision(&self) -> Result<Revision, ApiError> {
        self.store.current_revision().await.map_err(store_error)
    }

    /// Whether consistent GETs read the store rather than the cache (`--consistent-get-from-cache=false`).
    #[must_use]
    pub fn gets_from_store(&self) -> bool {
        !self.consistent_get_from_cache
    }

    /// A consistent GET read and decoded from the store (the switch off, as before KEP-6404).
    ///
    /// # Errors
    /// 404 when absent, 500 when the stored value is not a JSON object, store errors.
    pub async fn get(
        &self,
        resource: &Resource,
        namespace: &str,
        name: &str,
    ) -> Result<Arc<Object>, ApiError> {
        self.counters.store_gets.fetch_add(1, Ordering::Relaxed);
        let kv = self
            .store
            .get(Bytes::from(resource.store_key(namespace, name)))
            .await
            .map_err(store_error)?
            .ok_or_else(|| ApiError::not_found(&resource.def, name))?;
        self.counters
            .request_decodes
            .fetch_add(1, Ordering::Relaxed);
        // Converted by the CRD's webhook (`webhook::conversion`) from the version it was
        // stored at: another version's object, or the storage version's possibly stored at an
        // earlier version.
        let webhook = match (
            &resource.webhook,
            &resource.earlier_stored,
            &resource.conversion,
        ) {
            (Some(view), _, Some(conversion)) => {
                Some((&**view, conversion.storage_api_version().to_owned()))
            }
            (None, Some(earlier), _) => Some((&*earlier.view, resource.def.api_version())),
            _ => None,
        };
        if let Some((view, storage_version)) = webhook {
            let mut stored: Value =
                watchkeeper_api::go_json::parse_stored(&kv.value).map_err(|_| {
                    ApiError::internal(format!("the stored object {name:?} is not valid JSON"))
                })?;
            if let Some(map) = stored.as_object_mut()
                && !map.get("apiVersion").is_some_and(Value::is_string)
            {
                map.insert("apiVersion".to_owned(), Value::String(storage_version));
            }
            let body = view
                .convert_one(stored, &resource.def.api_version())
                .await?;
            return crate::source::decode::decode(
                &resource.def,
                body,
                Identity::Key {
                    namespace,
                    name,
                    revision: kv.mod_revision,
                },
            )
            .map_err(ApiError::internal);
        }
        let custom = resource.custom();
        let schema = custom.as_ref().and_then(|c| c.schema.as_deref());
        // Another version of a custom resource: read with the storage version's schema,
        // then converted and pruned by this version's.
        let (stored_schema, view_schema) = match &resource.storage_schema {
            Some(storage) => (Some(&**storage), schema),
            None => (schema, None),
        };
        let object = decode_stored(
            &resource.def,
            stored_schema,
            namespace,
            name,
            kv.mod_revision,
            &kv.value,
        )
        .map_err(|_| ApiError::internal(format!("the stored object {name:?} is not valid JSON")))?;
        match &resource.conversion {
            Some(conversion) => {
                crate::source::decode::convert(&resource.def, conversion, view_schema, &object)
                    .map_err(ApiError::internal)
            }
            None => Ok(object),
        }
    }

    /// A write (create, update, patch, delete, deletecollection) applied to the store.
    ///
    /// # Errors
    /// As kube-apiserver: 400 bad body, 404, 409, 413, 415, 422, 500, 503, 504.
    pub async fn write(
        &self,
        fresh: &Freshness,
        request: &ResourceRequest<'_>,
        resource: &Resource,
        resources: &[Arc<Resource>],
    ) -> Result<Response, ApiError> {
        self.write_managed(fresh, request, resource, resources, None)
            .await
    }

    /// [`StoreSource::write`] of a create or update whose managed fields were decided by a
    /// server-side apply at another version of the resource (`http::converted`): with
    /// `managers`, the object is stored with them as they are (no `Update` entry for the
    /// request's manager).
    ///
    /// # Errors
    /// As [`StoreSource::write`].
    pub async fn write_managed(
        &self,
        fresh: &Freshness,
        request: &ResourceRequest<'_>,
        resource: &Resource,
        resources: &[Arc<Resource>],
        managers: Option<apply::Managers>,
    ) -> Result<Response, ApiError> {
        let headers = &request.context.headers;
        let body = protobuf_to_json(&resource.def, headers, request.context.body.clone())?;
        phase_boundary().await;
        let options_kind = match request.context.method {
            Method::POST => WriteOptionsKind::Create,
            Method::PUT => WriteOptionsKind::Update,
            Method::PATCH => WriteOptionsKind::Patch,
            _ => WriteOptionsKind::Delete,
        };
        let body_dry_run = if options_kind == WriteOptionsKind::Delete {
            delete_options_dry_run(&body)
        } else {
            Vec::new()
        };
        let is_apply = options_kind == WriteOptionsKind::Patch
            && headers
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .and_then(PatchType::from_content_type)
                == Some(PatchType::Apply);
        let options = watchkeeper_api::query::write_options(
            request.context.query.as_deref(),
            &body_dry_run,
            options_kind,
            is_apply,
        )?;
        let manager = options.field_manager.clone().unwrap_or_else(|| {
            watchkeeper_api::apply::default_manager(
                headers
                    .get(header::USER_AGENT)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default(),
            )
        });
        let writer = Writer {
            source: self,
            user: &request.context.user,
            fresh,
            resources,
            dry_run: options.dry_run,
            manager,
            subresource: request.target.subresource.unwrap_or_default().to_owned(),
            force: options.force,
            time: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
            field_validation: options.field_validation,
            warnings: std::sync::Mutex::new(Warnings::new()),
            managers,
            quota_counted: std::sync::atomic::AtomicBool::new(false),
        };
        let namespace = request.target.namespace;
        match self
            .write_with(&writer, request, resource, namespace, body)
            .await
        {
            Ok(response) => Ok(writer.with_warnings(response)),
            Err(error) => Err(writer.with_warnings_on_error(error)),
        }
    }

    /// A write of one of the server's own controllers ([`crate::controllers`]), named
    /// `controller` as kube-controller-manager's service accounts are
    /// (`generic-garbage-collector`, `namespace-controller`): a DELETE of `namespace/name`
    /// whose uid must be `uid`, with `policy`, a JSON merge `patch` of it (a
    /// `metadata.resourceVersion` in it is a precondition), or a create of an object in
    /// `namespace`. As the user `system:serviceaccount:kube-system:<controller>`, field manager
    /// `watchkeeper-<controller>`.
    ///
    /// # Errors
    /// As [`Self::write`]: 404 when the object is gone, 409 when it changed (another uid, a
    /// newer resource version).
    pub async fn collect(
        &self,
        fresh: &Freshness,
        resources: &[Arc<Resource>],
        resource: &Resource,
        controller: &str,
        (namespace, name): (&str, &str),
        change: Collect<'_>,
    ) -> Result<(), ApiError> {
        let user = crate::auth::User {
            name: format!("system:serviceaccount:kube-system:{controller}"),
            uid: String::new(),
            groups: vec![
                "system:serviceaccounts".to_owned(),
                "system:serviceaccounts:kube-system".to_owned(),
                "system:authenticated".to_owned(),
            ],
            extra: Default::default(),
        };
        let writer = Writer {
            source: self,
            user: &user,
            fresh,
            resources,
            dry_run: false,
            manager: format!("watchkeeper-{controller}"),
            subresource: match change {
                Collect::PatchStatus(_) => "status".to_owned(),
                Collect::PatchFinalize(_) => "finalize".to_owned(),
                _ => String::new(),
            },
            force: false,
            time: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
            field_validation: FieldValidation::Ignore,
            warnings: std::sync::Mutex::new(Warnings::new()),
            managers: None,
            quota_counted: std::sync::atomic::AtomicBool::new(false),
        };
        match change {
            Collect::Delete { uid, policy } => {
                let options = json!({"preconditions": {"uid": uid}});
                writer
                    .delete(resource, namespace, name, &options, policy)
                    .await?;
            }
            Collect::DeleteNow { uid } => {
                let options = json!({"preconditions": {"uid": uid}, "gracePeriodSeconds": 0});
                writer
                    .delete(resource, namespace, name, &options, DeletePolicy::default())
                    .await?;
            }
            Collect::Patch(patch) | Collect::PatchStatus(patch) | Collect::PatchFinalize(patch) => {
                writer
                    .patch(
                        resource,
                        namespace,
                        name,
                        PatchType::Merge,
                        Bytes::from(patch.to_string()),
                    )
                    .await?;
            }
            Collect::Create(object) => {
                let raw = object.to_string();
                let namespace = resource.def.namespaced.then_some(namespace);
                writer
                    .create(resource, namespace, object, raw.as_bytes())
                    .await?;
            }
        }
        Ok(())
    }

    /// [`Self::write`] once the options are parsed.
    async fn write_with(
        &self,
        writer: &Writer<'_>,
        request: &ResourceRequest<'_>,
        resource: &Resource,
        namespace: Option<&str>,
        body: Bytes,
    ) -> Result<Response, ApiError> {
        let headers = &request.context.headers;
        match (&request.context.method, request.target.name) {
            (&Method::POST, None) => {
                // kube's `customresource_handler`: no creates while the CRD terminates.
                if resource.custom().is_some_and(|custom| custom.terminating) {
                    let mut error = ApiError::method_not_allowed(
                        "create not allowed while custom resource definition is terminating",
                    );
                    error.details =
                        Some(json!({"group": resource.def.group, "kind": resource.def.plural}));
                    return Err(error);
                }
                // Each write's path is boxed where it is made (`crate::http::boxed`): inline, the
                // largest of them set the size of this future and of every one around it, up to
                // the request's, and each await copied it up a level (~10 KB per PATCH).
                let object = decode_object(resource, &body)?;
                let created =
                    pinned_in_place(|| writer.create(resource, namespace, object, &body)).await?;
                Ok(json_response(
                    StatusCode::CREATED,
                    watchkeeper_api::object_body(&resource.answered_form(created)),
                ))
            }
            (&Method::PUT, Some(name)) => {
                let object = decode_object(resource, &body)?;
                let updated = pinned_in_place(|| {
                    writer.update(resource, namespace.unwrap_or_default(), name, object, &body)
                })
                .await?;
                Ok(updated.answer(StatusCode::OK, resource, writer).await)
            }
            (&Method::PATCH, Some(name)) => {
                let patch_type = patch_type(headers)?;
                if body.is_empty() {
                    return Err(ApiError::bad_request("the patch is empty".to_owned()));
                }
                if patch_type == PatchType::Apply {
                    let (applied, created) = pinned_in_place(|| {
                        writer.apply(resource, namespace.unwrap_or_default(), name, &body)
                    })
                    .await?;
                    let code = if created {
                        StatusCode::CREATED
                    } else {
                        StatusCode::OK
                    };
                    return Ok(applied.answer(code, resource, writer).await);
                }
                let patched = pinned_in_place(|| {
                    writer.patch(
                        resource,
                        namespace.unwrap_or_default(),
                        name,
                        patch_type,
                        body,
                    )
                })
                .await?;
                Ok(patched.answer(StatusCode::OK, resource, writer).await)
            }
            (&Method::DELETE, Some(name)) => {
                // No body, or JSON `null` (Go decodes it into empty DeleteOptions): defaults.
                // kube-apiserver reads the options from the query when there is no body.
                let (options, policy) = if body.is_empty() || body.trim_ascii() == b"null" {
                    let query = request.context.query.as_deref();
                    (
                        grace_period_of_query(query),
                        DeletePolicy::from_query(query)?,
                    )
                } else {
                    let options = delete_options(&body, false)?;
                    let policy = DeletePolicy::from_options(&options)?;
                    (options, policy)
                };
                let (deleted, gone) = pinned_in_place(|| {
                    writer.delete(
                        resource,
                        namespace.unwrap_or_default(),
                        name,
                        &options,
                        policy,
                    )
                })
                .await?;
                // kube-apiserver: 202 when the object stays and cascading deletion was asked
                // with `orphanDependents: false`.
                let code = if !gone && policy.orphan_dependents == Some(false) {
                    StatusCode::ACCEPTED
                } else {
                    StatusCode::OK
                };
                let answer = if gone && !returns_deleted_object(&resource.def) {
                    deleted_status(&resource.def, &deleted)
                } else {
                    deleted
                };
                Ok(json_response(code, watchkeeper_api::object_body(&answer)))
            }
            (&Method::DELETE, None) => {
                let policy = if body.is_empty() || body.trim_ascii() == b"null" {
                    DeletePolicy::from_query(request.context.query.as_deref())?
                } else {
                    DeletePolicy::from_options(&delete_options(&body, true)?)?
                };
                // Boxed: its state (17 KB, each object's delete in turn) is the largest of
                // these, and inline it set the size of every request's future (the answer's,
                // allocated per request whatever it does: BENCHMARKS.md, invocation BT).
                let options = &request.options;
                let listed = pinned_in_place(|| {
                    writer.delete_collection(resource, namespace, options, policy)
                })
                .await?;
                Ok(deleted_list(resource, listed))
            }
            (method, _) => Err(ApiError::method_not_allowed_on_resource(method)),
        }
    }
}

/// The write paths of one request.
struct Writer<'a> {
    source: &'a StoreSource,
    /// Who writes (a CertificateSigningRequest records its requester).
    user: &'a crate::auth::User,
    fresh: &'a Freshness,
    resources: &'a [Arc<Resource>],
    /// `dryRun=All`: every check runs, nothing is written.
    dry_run: bool,
    /// The field manager of the write (`fieldManager`, or the User-Agent's).
    manager: String,
    /// The subresource written (`status`), or empty.
    subresource: String,
    /// `force=true` of an apply.
    force: bool,
    /// The time managed fields entries record (RFC 3339, seconds).
    time: String,
    /// `fieldValidation`: what fields the kind does not declare make of the write.
    field_validation: FieldValidation,
    /// Warnings for the answer's `Warning` headers (unknown fields under `Warn`).
    warnings: std::sync::Mutex<Warnings>,
    /// The managed fields a create or update stores as they are (a server-side apply at
    /// another version decided them: [`StoreSource::write_managed`]).
    managers: Option<apply::Managers>,
    /// A ResourceQuota written got its status from a count ([`Self::recounts_quota`]): once
    /// committed it is counted again after the caches catch up.
    quota_counted: std::sync::atomic::AtomicBool,
}

impl Writer<'_> {
    /// Drops the fields `object`'s kind does not declare (as kube-apiserver's decoding into
    /// the Go type does, or a custom resource's structural schema prunes them) and returns
    /// what a strict decoder reports of them. A JSON `body` of a built-in kind is read again
    /// for its duplicate fields and the order of its text, as Go's strict decoder reports
    /// them; a custom resource's body gives its duplicate fields in the text's order, then
    /// the pruned paths, sorted, as kube-apiserver's unstructured decoding and pruning report
    /// them; without a body (a patch's result) the unknown fields come in key order. The
    /// object is then what decoding into the kind's Go struct leaves
    /// ([`watchkeeper_api::protobuf::gostruct::normalize`]: `omitempty` zeros left out, nulls
    /// and absent fields as Go's zero values; a custom resource's `metadata` only).
    ///
    /// # Errors
    /// 413 when the Go zero values would make the object larger than the server stores
    /// (`gostruct::normalize`'s bound); the object is then to be dropped.
    fn strict_fields(
        &self,
        resource: &Resource,
        object: &mut Value,
        body: Option<&[u8]>,
    ) -> Result<Vec<StrictField>, ApiError> {
        let def = &resource.def;
        let custom = resource.custom();
        if let Some(schema) = custom.as_ref().and_then(|c| c.schema.as_deref()) {
            let pruned = watchkeeper_api::structural::prune_and_default(schema, object);
            watchkeeper_api::protobuf::gostruct::normalize(def, object)?;
            let mut fields = body
                .and_then(watchkeeper_api::schema::duplicate_fields)
                .unwrap_or_default();
            fields.extend(pruned.into_iter().map(StrictField::Unknown));
            return Ok(fields);
        }
        let unknown = watchkeeper_api::schema::prune_unknown_fields(def, object);
        watchkeeper_api::protobuf::gostruct::normalize(def, object)?;
        Ok(
            match body.and_then(|raw| watchkeeper_api::schema::strict_fields(def, raw)) {
                Some(fields) => fields,
                None => unknown.into_iter().map(StrictField::Unknown).collect(),
            },
        )
    }

    /// Applies `fieldValidation` to what a strict decoder reports: nothing more (`Ignore`),
    /// one warning each (`Warn`), or the write refused with `refuse`'s error (`Strict`).
    fn validate_fields(
        &self,
        fields: Vec<String>,
        refuse: impl FnOnce() -> ApiError,
    ) -> Result<(), ApiError> {
        if fields.is_empty() {
            return Ok(());
        }
        match self.field_validation {
            FieldValidation::Ignore => Ok(()),
            FieldValidation::Strict => Err(refuse()),
            FieldValidation::Warn => {
                for warning in fields {
                    self.warn(warning);
                }
                Ok(())
            }
        }
    }

    /// Adds a warning for the answer's `Warning` headers (once: a guaranteed update may run
    /// the same patch again after a conflict; bounded as kube bounds them, [`Warnings`]).
    fn warn(&self, warning: String) {
        self.warnings
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .add(warning);
    }

    /// A create or update body: its unknown and duplicate fields (see [`Self::strict_fields`])
    /// dropped and validated; `Strict` refuses them with 400 `Kind in version "v" cannot be
    /// handled as a Kind: strict decoding error: unknown field "spec.x"`, as kube-apiserver's
    /// `transformDecodeError` words it.
    fn checked_fields(
        &self,
        resource: &Resource,
        object: &mut Value,
        body: &[u8],
    ) -> Result<(), ApiError> {
        let fields = self.strict_fields(resource, object, Some(body))?;
        self.validate_fields(fields.iter().map(ToString::to_string).collect(), || {
            watchkeeper_api::schema::strict_body_error(&resource.def, &fields)
        })
    }

    /// What a strict decoder reports of a patch body itself (`fieldValidation` other than
    /// `Ignore`): the duplicate fields of a merge or strategic merge patch, the unknown and
    /// duplicate fields of a JSON patch's operations.
    fn patch_fields(&self, patch_type: PatchType, patch: &[u8]) -> Vec<StrictField> {
        if self.field_validation == FieldValidation::Ignore {
            return Vec::new();
        }
        match patch_type {
            PatchType::Json => {
                watchkeeper_api::schema::json_patch_fields(patch).unwrap_or_default()
            }
            PatchType::Merge | PatchType::StrategicMerge => {
                watchkeeper_api::schema::duplicate_fields_or_none(patch)
            }
            PatchType::Apply => Vec::new(),
        }
    }

    /// A patched object: the patch's own strict errors (`patch_fields`), then its result's
    /// unknown fields (dropped), validated; `Strict` refuses them with kube-apiserver's 422 on
    /// the field `patch` ([`watchkeeper_api::patch::strict_patch_error`]). A built-in kind's
    /// object whose decode check found nothing for the pruning walk to do (`pruning`) is not
    /// walked again.
    fn checked_patch(
        &self,
        resource: &Resource,
        object: &mut Value,
        (patch_type, patch): (PatchType, &[u8]),
        patch_fields: &[StrictField],
        pruning: Pruning,
    ) -> Result<(), ApiError> {
        let custom_schema = resource
            .custom()
            .is_some_and(|custom| custom.schema.is_some());
        // Without the pruning walk (`strict_fields` normalises after it), the object is still
        // made what decoding into the kind's Go struct leaves.
        let walk = pruning == Pruning::Needed || custom_schema;
        if !walk && patch_fields.is_empty() {
            return watchkeeper_api::protobuf::gostruct::normalize(&resource.def, object);
        }
        let patched = (self.field_validation == FieldValidation::Strict).then(|| object.clone());
        let mut fields = patch_fields.to_vec();
        if walk {
            fields.extend(self.strict_fields(resource, object, None)?);
        } else {
            watchkeeper_api::protobuf::gostruct::normalize(&resource.def, object)?;
        }
        self.validate_fields(fields.iter().map(ToString::to_string).collect(), || {
            watchkeeper_api::patch::strict_patch_error(
                patch_type,
                patched.as_ref().unwrap_or(object),
                patch,
                &fields,
            )
        })
    }

    /// The repeated keys of an apply body (`duplicates`, from
    /// [`apply::config::duplicate_keys`]), validated once the apply succeeded, as
    /// kube-apiserver checks them: `Strict` refuses with 400 `error strict decoding YAML: ...`,
    /// `Warn` names each (`line 10: key "paused" already set in map`).
    fn checked_keys(&self, duplicates: &[String]) -> Result<(), ApiError> {
        self.validate_fields(duplicates.to_vec(), || {
            apply::config::duplicate_keys_error(duplicates)
        })
    }

    /// `response` with one `Warning: 299 - "..."` header per warning, as kube-apiserver
    /// sends them.
    fn with_warnings(&self, response: Response) -> Response {
        self.warnings
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .on(response)
    }

    /// `error` with the warnings recorded before the write was refused (the strict decoder's
    /// unknown fields come before admission and validation): kube-apiserver's warning recorder
    /// puts each in the answer's headers when it is recorded, so a 422 (or any refusal after
    /// decoding) carries them too.
    fn with_warnings_on_error(&self, mut error: ApiError) -> ApiError {
        let warnings = self
            .warnings
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !warnings.is_empty() {
            let extra = error.extra.get_or_insert_default();
            if extra.warnings.is_empty() {
                extra.warnings = warnings.texts().map(str::to_owned).collect();
            }
        }
        error
    }

    /// [`Writer::consistent`] boxed where it is made: a rare wait in the update loop (a dry
    /// run, a retry from a cache not proven fresh) whose ~3.4 KB of state, awaited inline,
    /// was part of every write's future and of each of its moves (see `crate::http::boxed`).
    async fn consistent_boxed(&self, resource: &Resource) -> Result<Revision, ApiError> {
        pinned_in_place(|| self.consistent(resource)).await
    }

    /// Proves the cache fresh: reads the store's current revision and waits until the cache
    /// has it.
    async fn consistent(&self, resource: &Resource) -> Result<Revision, ApiError> {
        let revision = self.source.current_revision().await?;
        self.fresh.wait(resource.cache(), revision).await?;
        Ok(revision)
    }

    /// Waits (bounded, best effort) until the cache has a revision we just wrote.
    async fn settle(&self, resource: &Resource, revision: Revision) {
        let _ = tokio::time::timeout(
            self.fresh.wait,
            after_watchers(resource.cache().wait_fresh(revision)),
        )
        .await;
    }

    async fn txn(&self, request: TxnRequest) -> Result<watchkeeper_store::TxnResponse, ApiError> {
        self.source.store.txn(request).await.map_err(store_error)
    }

    /// Checks that a namespace exists (and is not terminating) before a create of `name` (of
    /// `def`) in it, refusing as kube-apiserver's NamespaceLifecycle admission; with only
    /// NamespaceExists on, that it exists; with neither, nothing.
    async fn ensure_namespace(
        &self,
        def: &ResourceDef,
        namespace: &str,
        name: &str,
    ) -> Result<(), ApiError> {
        let plugins = self.source.admission;
        if !plugins.namespace_lifecycle
            && !plugins.namespace_exists
            && !plugins.namespace_auto_provision
        {
            return Ok(());
        }
        let Some(namespaces) = self.resources.iter().find(|r| {
            r.def.group.is_empty() && r.def.version == "v1" && r.def.plural == "namespaces"
        }) else {
            return Ok(());
        };
        let cache = namespaces.cache();
        let mut found = cache.get(namespace).0;
        if found.is_none() {
            self.consistent(namespaces).await?;
            found = cache.get(namespace).0;
        }
        if found.is_none() && plugins.namespace_auto_provision && !self.dry_run {
            self.provision_namespace(namespaces, def, (namespace, name))
                .await?;
            found = cache.get(namespace).0;
        }
        if !plugins.namespace_lifecycle && !plugins.namespace_exists {
            return Ok(());
        }
        match found {
            None => Err(ApiError::namespace_not_found(namespace)),
            Some(ns)
                if plugins.namespace_lifecycle
                    && ns.body().pointer("/metadata/deletionTimestamp").is_some() =>
            {
                let message = format!(
                    "unable to create new content in namespace {namespace} because it is being terminated"
                );
                let mut refusal = ApiError::forbidden(def, name, &message);
                if let Some(details) = refusal.details.as_mut() {
                    details["causes"] = json!([{"reason": "NamespaceTerminating",
                        "message": message, "field": "metadata.namespace"}]);
                }
                Err(refusal)
            }
            Some(_) => Ok(()),
        }
    }

    /// kube's NamespaceAutoProvision: creates the missing `namespace` before a create of
    /// `name` (of `def`) in it (one that already exists by then is fine); the namespace's own
    /// refusal is the create's 403.
    async fn provision_namespace(
        &self,
        namespaces: &Resource,
        def: &ResourceDef,
        (namespace, name): (&str, &str),
    ) -> Result<(), ApiError> {
        let body = json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": namespace}});
        let raw = body.to_string();
        let created = Box::pin(self.create(namespaces, None, body, raw.as_bytes())).await;
        match created {
            Ok(_) => {}
            Err(error) if error.code == 409 => {}
            Err(error) => return Err(ApiError::forbidden(def, name, error.message)),
        }
        self.consistent(namespaces).await.map(drop)
    }

    /// CREATE.
    async fn create(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        body: Value,
        raw: &[u8],
    ) -> Result<Value, ApiError> {
        let mut body = body;
        self.checked_fields(resource, &mut body, raw)?;
        phase_boundary().await;
        let name = body
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        // kube's store refuses a create that names a resource version (a number but 0; a
        // dry run never reaches the store), after validation and admission, as a plain error.
        let versioned = body
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .and_then(|rv| rv.parse::<u64>().ok())
            .is_some_and(|rv| rv != 0);
        let context = self.create_context(resource, namespace, &name).await?;
        self.created_warnings(resource, &body);
        let object = prepare_create(&resource.def, body, &context)?;
        let object = self.admit_created(resource, namespace, object).await?;
        if versioned && !self.dry_run {
            return Err(ApiError::new(
                500,
                "",
                "resourceVersion should not be set on objects to be created",
            ));
        }
        let custom = resource.custom();
        let managers = self.managers.clone().unwrap_or_else(|| {
            apply::update(
                &resource.def,
                None,
                &object,
                apply::Managers::new(),
                self.field_writer(custom_schema(custom.as_deref())),
                &self.time,
            )
        });
        phase_boundary().await;
        self.store_new(resource, namespace, object, &managers).await
    }

    /// What a create needs besides the body, once the namespace is known to exist.
    async fn create_context<'n>(
        &self,
        resource: &Resource,
        namespace: Option<&'n str>,
        name: &str,
    ) -> Result<CreateContext<'n>, ApiError> {
        if resource.def.namespaced {
            let namespace = namespace.ok_or_else(|| {
                ApiError::bad_request("the namespace is required to create a namespaced object: use /namespaces/{namespace}/...".to_owned())
            })?;
            self.ensure_namespace(&resource.def, namespace, name)
                .await?;
        }
        Ok(CreateContext {
            namespace,
            uid: uuid::Uuid::new_v4().to_string(),
            creation_timestamp: self.time.clone(),
            random_suffix: random_suffix(),
        })
    }

    /// What a kind checks beyond metadata once an object is prepared (`old` on updates): a
    /// CustomResourceDefinition gets the status kube-apiserver's naming and establishing
    /// controllers give it (its names against every other served resource; a client's own
    /// status is not kept); a write of `pods/{name}/ephemeralcontainers` changes only the
    /// pod's ephemeral containers ([`watchkeeper_api::ephemeral::update`]), one of
    /// `pods/{name}/resize` only its containers' resources ([`watchkeeper_api::resize::update`]),
    /// one of
    /// `certificatesigningrequests/{name}/approval` only its conditions
    /// ([`watchkeeper_api::certificates::approval_update`]), its main endpoint and `status`
    /// what kube's strategies keep ([`watchkeeper_api::certificates::prepare_update`]), and a
    /// created request names its requester ([`watchkeeper_api::certificates::prepare_create`]); an object of a
    /// CRD's resource gets the `status` subresource's rules when the CRD has it, then its
    /// schema's defaults and pruning, then is validated against the schema. The kinds of
    /// [`watchkeeper_api::kinds`] get their `status` subresource's rules where they have one,
    /// then kube's validation. A Service gets
    /// what the registry fills before allocating ([`service_ips::prepare`]); a write of
    /// `services/{name}/status` keeps the stored spec.
    fn admit(
        &self,
        resource: &Resource,
        old: Option<&Value>,
        mut object: Value,
    ) -> Result<Value, ApiError> {
        if resource.def.group.is_empty()
            && resource.def.plural == "services"
            && self.subresource == "status"
            && let (Some(old), Some(object)) = (old, object.as_object_mut())
        {
            // kube-apiserver's `serviceStatusStrategy`: a status write keeps the spec (so it
            // can not take an address or node port without claiming it).
            match old.get("spec") {
                Some(spec) => object.insert("spec".to_owned(), spec.clone()),
                None => object.remove("spec"),
            };
        }
        if resource.def.group.is_empty()
            && resource.def.plural == "pods"
            && self.subresource == "status"
            && let Some(qos) = old.and_then(|old| old.pointer("/status/qosClass"))
            && object
                .pointer("/status/qosClass")
                .is_none_or(|q| q.as_str().is_none_or(str::is_empty))
            && let Some(map) = object.as_object_mut()
        {
            // kube-apiserver's `podStatusStrategy.PrepareForUpdate`: a status without its QoS
            // class (old kubelets dropped it) keeps the stored one, which never changes.
            let status = map
                .entry("status")
                .or_insert_with(|| Value::Object(serde_json::Map::new()));
            if !status.is_object() {
                *status = Value::Object(serde_json::Map::new());
            }
            if let Value::Object(status) = status {
                status.insert("qosClass".to_owned(), qos.clone());
            }
        }
        let keeps_status = (self.subresource.is_empty()
            && watchkeeper_api::kinds::main_endpoint_keeps_status(&resource.def))
            || (self.subresource == "finalize"
                && resource.def.group.is_empty()
                && resource.def.plural == "namespaces");
        if keeps_status && let (Some(old), Some(map)) = (old, object.as_object_mut()) {
            // kube-apiserver's main strategies' `PrepareForUpdate` (and the namespace's
            // finalize strategy's): the stored status, whatever the body says (a `kubectl
            // replace` of a manifest without one is taken, one with another is not).
            match old.get("status") {
                Some(status) => map.insert("status".to_owned(), status.clone()),
                None => map.remove("status"),
            };
        }
        if resource.def.group.is_empty()
            && resource.def.plural == "namespaces"
            && self.subresource != "finalize"
            && let (Some(old), Some(map)) = (old, object.as_object_mut())
        {
            // kube-apiserver's `namespaceStrategy.PrepareForUpdate` (and its status
            // strategy's): `spec.finalizers` change only through `namespaces/{name}/finalize`.
            let finalizers = old.pointer("/spec/finalizers").cloned();
            let spec = map
                .entry("spec")
                .or_insert_with(|| Value::Object(serde_json::Map::new()));
            if let Value::Object(spec) = spec {
                match finalizers {
                    Some(finalizers) => spec.insert("finalizers".to_owned(), finalizers),
                    None => spec.remove("finalizers"),
                };
            }
        }
        if let Some(allocators) = self.service_allocators(resource) {
            service_ips::prepare(old, &mut object, &allocators.families()).map_err(|causes| {
                let name = object
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                ApiError::invalid(&resource.def, name, causes)
            })?;
            // kube-apiserver's allocator refuses an asked address or node port outside its
            // range before the Service is validated; what is taken is known at the claim.
            let ips = service_ips::ip_requests(old, &object);
            let ports = service_ips::port_requests(old, &object);
            match allocators.out_of_range(&ips, &ports) {
                Some(OutOfRange::Ip(range, ip)) => {
                    let ip = ip.to_string();
                    return Err(ip_refusal(
                        resource,
                        &object,
                        range,
                        &ip,
                        Refused::NotInRange,
                    ));
                }
                Some(OutOfRange::Port(slot, port)) => {
                    let node_ports = allocators.ports();
                    let why = Refused::NotInRange;
                    return Err(port_refusal(resource, &object, node_ports, slot, port, why));
                }
                None => {}
            }
        }
        if resource.def.group.is_empty()
            && resource.def.plural == "resourcequotas"
            && self.recounts_quota(old, &object)
        {
            object = self.quota_with_usage(object);
            self.quota_counted
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
        if watchkeeper_api::crd::is_crd(&resource.def) {
            let name = object
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let others: Vec<watchkeeper_api::crd::TakenNames> = self
                .resources
                .iter()
                .filter(|r| !(r.origin == Origin::Definition && r.name() == name))
                .map(|r| watchkeeper_api::crd::TakenNames::of(&r.def))
                .collect();
            let status_write = self.subresource == "status";
            if status_write && let (Some(old), Some(map)) = (old, object.as_object_mut()) {
                // kube's status strategy: a write of `status` keeps the stored spec.
                match old.get("spec") {
                    Some(spec) => map.insert("spec".to_owned(), spec.clone()),
                    None => map.remove("spec"),
                };
            }
            watchkeeper_api::crd::set_status(
                &mut object,
                old.and_then(|old| old.get("status")),
                &others,
                status_write,
                &self.time,
            );
            let causes = watchkeeper_api::crd::stored_versions_causes(&object);
            if !causes.is_empty() {
                return Err(ApiError::invalid(&resource.def, &name, causes));
            }
        } else if self.subresource == watchkeeper_api::ephemeral::SUBRESOURCE
            && watchkeeper_api::ephemeral::has_ephemeral_containers(&resource.def)
            && let Some(old) = old
        {
            object = watchkeeper_api::ephemeral::update(&resource.def, old, &object)?;
        } else if self.subresource == watchkeeper_api::resize::SUBRESOURCE
            && watchkeeper_api::resize::has_resize(&resource.def)
            && let Some(old) = old
        {
            object = watchkeeper_api::resize::update(&resource.def, old, &object)?;
        } else if watchkeeper_api::certificates::has_approval(&resource.def) && old.is_none() {
            watchkeeper_api::certificates::prepare_create(
                &mut object,
                &self.user.name,
                &self.user.uid,
                &self.user.groups,
            );
        } else if self.subresource == watchkeeper_api::certificates::APPROVAL
            && watchkeeper_api::certificates::has_approval(&resource.def)
            && let Some(old) = old
        {
            object = watchkeeper_api::certificates::approval_update(old, &object, &self.time);
        } else if watchkeeper_api::certificates::has_approval(&resource.def)
            && let Some(old) = old
        {
            object = watchkeeper_api::certificates::prepare_update(&self.subresource, old, object);
        } else if watchkeeper_api::kinds::has_status_rules(&resource.def) {
            object =
                watchkeeper_api::kinds::status_rules(&resource.def, &self.subresource, old, object);
            if old.is_none()
                && let Some(status) = watchkeeper_api::kinds::created_status(&resource.def)
                && let Some(map) = object.as_object_mut()
            {
                map.insert("status".to_owned(), status);
            }
        } else if self.subresource == "status"
            && resource.def.has_go_type()
            && let Some(old) = old
        {
            // The other kinds' status strategies (pods, nodes, namespaces, services, volumes
            // and claims, quotas, autoscalers, ...): a write of `status` keeps the stored
            // spec; a pod's also its owner references (kube's `podStatusStrategy`).
            object = watchkeeper_api::crd::spec_kept(old, object);
            if resource.def.group.is_empty()
                && resource.def.plural == "pods"
                && let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut)
            {
                match old.pointer("/metadata/ownerReferences") {
                    Some(owners) => meta.insert("ownerReferences".to_owned(), owners.clone()),
                    None => meta.remove("ownerReferences"),
                };
            }
        } else if let Some(custom) = resource.custom() {
            if custom.status {
                object = watchkeeper_api::crd::status_rules(&self.subresource, old, object);
            }
            if let Some(schema) = &custom.schema {
                // A create, update or patch pruned it already, with its report
                // (`strict_fields`); the defaults again after the status rules.
                watchkeeper_api::structural::prune_and_default(schema, &mut object);
                let check = if custom.status && self.subresource == "status" && old.is_some() {
                    watchkeeper_api::structural::check_custom_status
                } else {
                    watchkeeper_api::structural::check_custom
                };
                check(&resource.def, schema, custom.rules.as_ref(), &object, old)?;
            }
        }
        // kube's RBAC storage refuses an escalation before the object is validated.
        if let Some(auth) = &self.source.rbac_escalation
            && let Some(rbac) = auth.rbac()
        {
            crate::auth::rbac::escalation::check_write(
                auth,
                rbac,
                self.user,
                &resource.def,
                old,
                &object,
            )?;
        }
        match old {
            // kube's status strategies validate the status (and what a status write may change).
            Some(old) if self.subresource == "status" => {
                watchkeeper_api::kinds::validate_status(&resource.def, &object, old)?;
            }
            _ => watchkeeper_api::kinds::validate_write(
                &resource.def,
                &self.subresource,
                &object,
                old.map(|old| watchkeeper_api::defaults::stored_as_read(&resource.def, old))
                    .as_deref(),
            )?,
        }
        if let Some(old) = old
            && resource.def.group.is_empty()
            && resource.def.plural == "pods"
            && self.subresource.is_empty()
        {
            // Subresources (status, binding, ephemeral containers) change what they own.
            watchkeeper_api::kinds::validate_pod_update(&resource.def, &object, old)?;
        }
        Ok(object)
    }

    /// ValidatingAdmissionPolicy on a write turning `old` into `object` ([`policy_admission`]):
    /// its warnings kept for the answer.
    ///
    /// # Errors
    /// A `Deny` binding's denial.
    fn admit_policies(
        &self,
        resource: &Resource,
        object: Option<&Value>,
        old: Option<&Value>,
    ) -> Result<(), ApiError> {
        if !self.source.admission.validating_admission_policy {
            return Ok(());
        }
        let write = policy_admission::Write {
            resource,
            subresource: &self.subresource,
            object,
            old,
            user: self.user,
            dry_run: self.dry_run,
            manager: &self.manager,
        };
        let authorizer = self.source.policy_authorizer.as_ref();
        for warning in policy_admission::admit(self.resources, &write, authorizer)? {
            self.warn(warning);
        }
        Ok(())
    }

    /// The write of `object` (`None` on a delete) over `old` (`None` on a create), as
    /// admission sees it.
    fn admitted_write<'w>(
        &'w self,
        resource: &'w Resource,
        object: Option<&'w Value>,
        old: Option<&'w Value>,
    ) -> policy_admission::Write<'w> {
        policy_admission::Write {
            resource,
            subresource: &self.subresource,
            object,
            old,
            user: self.user,
            dry_run: self.dry_run,
            manager: &self.manager,
        }
    }

    /// Whether a mutating webhook could be called: the plugin runs and a configuration is in
    /// its cache.
    fn mutating_webhooks_configured(&self) -> bool {
        self.source.webhooks.is_some()
            && self.source.admission.mutating_admission_webhook
            && crate::source::webhook::configured(self.resources, "mutatingwebhookconfigurations")
    }

    /// The mutating admission webhooks on `object` (over `old` on updates), after the
    /// in-process mutating plugins ([`crate::source::webhook`]): the object they leave.
    ///
    /// # Errors
    /// A webhook's refusal, or a failed call under `failurePolicy: Fail`.
    async fn mutating_webhooks(
        &self,
        resource: &Resource,
        old: Option<&Value>,
        object: Value,
    ) -> Result<Value, ApiError> {
        let Some(webhooks) = self.source.webhooks.as_ref() else {
            return Ok(object);
        };
        if !self.source.admission.mutating_admission_webhook {
            return Ok(object);
        }
        // The webhooks are given the object as each leaves it.
        let write = self.admitted_write(resource, None, old);
        let (mut mutated, changed) = webhooks
            .mutate(self.resources, &write, object, &|warning| {
                self.warn(warning);
            })
            .await?;
        if changed {
            // What a patch added that the kind does not declare is dropped, as kube's
            // decoding of the patched object into its type (or a CRD's pruning) drops it.
            // Its Go zero values are bounded as a body's are.
            self.strict_fields(resource, &mut mutated, None)?;
        }
        Ok(mutated)
    }

    /// The validating admission webhooks on a write of `object` over `old`, after
    /// ValidatingAdmissionPolicy ([`crate::source::webhook`]).
    ///
    /// # Errors
    /// A webhook's refusal, or a failed call under `failurePolicy: Fail`.
    async fn validating_webhooks(
        &self,
        resource: &Resource,
        object: Option<&Value>,
        old: Option<&Value>,
    ) -> Result<(), ApiError> {
        let Some(webhooks) = self.source.webhooks.as_ref() else {
            return Ok(());
        };
        if !self.source.admission.validating_admission_webhook {
            return Ok(());
        }
        let write = self.admitted_write(resource, object, old);
        webhooks
            .validate(self.resources, &write, &|warning| self.warn(warning))
            .await
    }

    /// A prepared create admitted: LimitRanger's defaults ([`limit_ranger`]) before the
    /// object's own checks ([`Self::admit`]), then kube's validating admission in its order:
    /// LimitRanger's limits, PodSecurity, ValidatingAdmissionPolicy.
    ///
    /// # Errors
    /// The object's refusal; LimitRanger's, PodSecurity's or a policy's refusal; a freshness
    /// failure.
    async fn admit_created(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        mut object: Value,
    ) -> Result<Value, ApiError> {
        let ranges = self.limit_ranges(resource, namespace).await?;
        if resource.def.plural == "pods" {
            limit_ranger::default_pod(&ranges, &mut object);
        }
        match (resource.def.group.as_str(), resource.def.plural.as_str()) {
            ("", "pods") if self.subresource.is_empty() => {
                // kube's ServiceAccount, Priority and DefaultTolerationSeconds, after
                // LimitRanger.
                let plugins = self.source.admission;
                if plugins.service_account
                    && let Some(namespace) = namespace
                {
                    let account = self
                        .service_account(namespace, pod_admission::account_named(&object))
                        .await?
                        .ok_or_else(|| {
                            let name = pod_admission::account_named(&object);
                            forbidden_object(
                                resource,
                                &object,
                                format!("error looking up service account {namespace}/{name}: serviceaccount \"{name}\" not found"),
                            )
                        })?;
                    pod_admission::admit_service_account(&mut object, &account, &random_suffix());
                }
                if plugins.pod_node_selector
                    && let Some(namespace) = namespace
                {
                    self.pod_node_selector(resource, namespace, &mut object)?;
                }
                if plugins.priority {
                    let wanted = pod_admission::class_named(&object);
                    let classes = self
                        .classes("scheduling.k8s.io", "priorityclasses", wanted)
                        .await?;
                    pod_admission::admit_priority(&mut object, &classes)
                        .map_err(|message| forbidden_object(resource, &object, message))?;
                }
                if plugins.default_toleration_seconds {
                    pod_admission::default_tolerations(&mut object);
                }
                if let Some(namespace) = namespace {
                    self.pod_toleration_restriction(namespace, &mut object, true)?;
                }
                if plugins.runtime_class {
                    let wanted = object
                        .pointer("/spec/runtimeClassName")
                        .and_then(Value::as_str)
                        .map(str::to_owned);
                    if wanted.is_some() {
                        let classes = self
                            .classes("node.k8s.io", "runtimeclasses", wanted.as_deref())
                            .await?;
                        pod_admission::admit_runtime_class(&mut object, &classes)
                            .map_err(|message| forbidden_object(resource, &object, message))?;
                    }
                }
            }
            ("", "persistentvolumeclaims")
                if self.subresource.is_empty() && self.source.admission.default_storage_class =>
            {
                let classes = self.cached_classes("storage.k8s.io", "storageclasses");
                object_admission::default_storage_class(&mut object, &classes);
            }
            ("networking.k8s.io", "ingresses")
                if self.subresource.is_empty() && self.source.admission.default_ingress_class =>
            {
                let classes = self.cached_classes("networking.k8s.io", "ingressclasses");
                object_admission::default_ingress_class(&mut object, &classes);
            }
            ("", "nodes")
                if self.subresource.is_empty()
                    && self.source.admission.taint_nodes_by_condition =>
            {
                object_admission::taint_not_ready(&mut object);
            }
            ("scheduling.k8s.io", "priorityclasses") if self.source.admission.priority => {
                let classes = self.cached_classes("scheduling.k8s.io", "priorityclasses");
                if let Some(message) = pod_admission::default_conflict(&object, &classes, true) {
                    return Err(forbidden_object(resource, &object, message));
                }
            }
            _ => {}
        }
        self.optional_plugins_mutate(resource, None, &mut object);
        self.node_restriction(resource, node_restriction::Write::Create(&object))?;
        // kube's MutatingAdmissionWebhook, after the in-process mutating plugins.
        let object = self.mutating_webhooks(resource, None, object).await?;
        let mut object = self.admit(resource, None, object)?;
        self.pod_warnings(resource, None, &object);
        self.limits_hold(resource, &ranges, &object)?;
        self.image_policy(resource, &mut object).await?;
        self.pod_security(resource, None, &object)?;
        self.optional_plugins_validate(resource, None, &object)?;
        // kube's validating admission order: LimitRanger, PodSecurity, then the policies,
        // then the validating webhooks.
        self.admit_policies(resource, Some(&object), None)?;
        self.validating_webhooks(resource, Some(&object), None)
            .await?;
        Ok(object)
    }

    /// kube's optional mutating plugins ([`plugin_admission::mutate`]) on a write of `object`
    /// over `old`.
    fn optional_plugins_mutate(
        &self,
        resource: &Resource,
        old: Option<&Value>,
        object: &mut Value,
    ) {
        let plugins = &self.source.admission;
        plugin_admission::mutate(plugins, &resource.def, &self.subresource, old, object);
    }

    /// PodNodeSelector ([`plugin_admission::namespace_node_selector`]) on a pod created in
    /// `namespace`, whose object is read from its cache.
    fn pod_node_selector(
        &self,
        resource: &Resource,
        namespace: &str,
        pod: &mut Value,
    ) -> Result<(), ApiError> {
        let found = self.cached_namespace(namespace);
        let namespace_object = found.as_ref().map(|ns| ns.body());
        let selectors = &self.source.plugin_configs.node_selectors;
        plugin_admission::namespace_node_selector(pod, namespace_object, namespace, selectors)
            .map_err(|refusal| match refusal {
                plugin_admission::SelectorRefusal::Forbidden(message) => {
                    forbidden_object(resource, pod, message)
                }
                plugin_admission::SelectorRefusal::Internal(message) => ApiError::internal(message),
                plugin_admission::SelectorRefusal::Plain(message) => {
                    ApiError::new(500, "", message)
                }
            })
    }

    /// Whether ImagePolicyWebhook judges this write of `resource` (a pod's, or its ephemeral
    /// containers').
    fn image_policy_runs(&self, resource: &Resource) -> bool {
        self.source.admission.image_policy_webhook
            && self.source.plugin_configs.image_policy.is_some()
            && resource.def.group.is_empty()
            && resource.def.plural == "pods"
            && (self.subresource.is_empty()
                || self.subresource == watchkeeper_api::ephemeral::SUBRESOURCE)
    }

    /// ImagePolicyWebhook ([`crate::source::image_policy`]) on a write of `pod`: kube's 403,
    /// or the pod annotated when admitted in spite of a failed webhook.
    async fn image_policy(&self, resource: &Resource, pod: &mut Value) -> Result<(), ApiError> {
        if !self.image_policy_runs(resource) {
            return Ok(());
        }
        let Some(policy) = &self.source.plugin_configs.image_policy else {
            return Ok(());
        };
        // The webhooks' bound of an answer (`--max-request-body-bytes`).
        let answer_bytes_max = self
            .source
            .webhooks
            .as_ref()
            .map_or(usize::MAX, |webhooks| webhooks.client().answer_bytes_max());
        let namespace = pod
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let write = crate::source::image_policy::PodWrite {
            namespace: &namespace,
            subresource: &self.subresource,
        };
        match policy.admit(pod, write, answer_bytes_max).await {
            Ok(()) => Ok(()),
            Err(message) => Err(forbidden_object(resource, pod, message)),
        }
    }

    /// The namespace `name` as its cache holds it.
    fn cached_namespace(&self, name: &str) -> Option<Arc<Object>> {
        self.served_resource("", "namespaces")
            .and_then(|namespaces| namespaces.cache().get(name).0)
    }

    /// PodTolerationRestriction ([`pod_toleration_restriction`]) on a pod written in
    /// `namespace` (`create`d or updated), whose object is read from its cache: kube's plain
    /// error (a 500 without a reason), or the namespace's 404.
    fn pod_toleration_restriction(
        &self,
        namespace: &str,
        pod: &mut Value,
        create: bool,
    ) -> Result<(), ApiError> {
        if !self.source.admission.pod_toleration_restriction {
            return Ok(());
        }
        let found = self
            .cached_namespace(namespace)
            .ok_or_else(|| ApiError::namespace_not_found(namespace))?;
        let config = &self.source.plugin_configs.pod_toleration_restriction;
        pod_toleration_restriction::admit(pod, found.body(), create, config)
            .map_err(|message| ApiError::new(500, "", message))
    }

    /// NodeRestriction ([`node_restriction`]) on a node's `write` of `resource`: its refusal
    /// (403, or the 404 of the node's own missing Node).
    fn node_restriction(
        &self,
        resource: &Resource,
        write: node_restriction::Write<'_>,
    ) -> Result<(), ApiError> {
        if !self.source.admission.node_restriction {
            return Ok(());
        }
        let Some(node) = node_restriction::node_of(&self.user.name, &self.user.groups) else {
            return Ok(());
        };
        let nodes = self
            .resources
            .iter()
            .find(|r| r.def.group.is_empty() && r.def.plural == "nodes");
        let node_uid = || {
            let found = nodes?.cache().get(node).0?;
            let uid = found.body().pointer("/metadata/uid")?.as_str()?.to_owned();
            Some(uid)
        };
        let object = match write {
            node_restriction::Write::Create(object)
            | node_restriction::Write::Update(_, object)
            | node_restriction::Write::Delete(object) => object,
        };
        node_restriction::admit(node, &resource.def, &self.subresource, write, &node_uid).map_err(
            |refusal| match (refusal, nodes) {
                (node_restriction::Refusal::Forbidden(message), _) => {
                    forbidden_object(resource, object, message)
                }
                (node_restriction::Refusal::NodeNotFound, Some(nodes)) => {
                    ApiError::not_found(&nodes.def, node)
                }
                (node_restriction::Refusal::NodeNotFound, None) => {
                    forbidden_object(resource, object, format!("nodes {node:?} not found"))
                }
            },
        )
    }

    /// kube's optional validating plugins ([`plugin_admission::validate`]) on a write of
    /// `object` over `old`: their 403.
    fn optional_plugins_validate(
        &self,
        resource: &Resource,
        old: Option<&Value>,
        object: &Value,
    ) -> Result<(), ApiError> {
        let plugins = &self.source.admission;
        plugin_admission::validate(plugins, &resource.def, &self.subresource, old, object)
            .map_err(|message| forbidden_object(resource, object, message))?;
        if plugins.event_rate_limit
            && !self.dry_run
            && let Some(limiter) = &self.source.plugin_configs.event_rate_limit
            && event_rate_limit::is_core_event(
                &resource.def.group,
                &resource.def.plural,
                &self.subresource,
            )
        {
            let namespace = object
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let write = event_rate_limit::EventWrite {
                namespace,
                user: &self.user.name,
                event: object,
            };
            // kube's `NewTooManyRequestsError`: no retry-after.
            limiter.accept(write).map_err(|message| {
                ApiError::new(
                    429,
                    "TooManyRequests",
                    format!("Too many requests: {message}"),
                )
            })?;
        }
        if let Some(old) = old
            && plugins.persistent_volume_claim_resize
        {
            let classes = || self.cached_classes("storage.k8s.io", "storageclasses");
            plugin_admission::claim_resize(
                &resource.def,
                &self.subresource,
                (old, object),
                &classes,
            )
            .map_err(|message| forbidden_object(resource, object, message))?;
        }
        let Some(authorizer) = self.source.policy_authorizer.as_ref() else {
            return Ok(());
        };
        // Made for the first check that needs it (most writes need none).
        let user = std::cell::LazyCell::new(|| {
            json!({"username": self.user.name, "uid": self.user.uid,
                "groups": self.user.groups})
        });
        // kube's `<reason>, <error>` of a denial (`<nil>`: no error).
        let authorize = |access: &plugin_admission::Access<'_>| {
            let target = watchkeeper_api::admission_policy::CheckTarget::Resource {
                group: access.group.to_owned(),
                resource: access.resource.to_owned(),
                subresource: access.subresource.to_owned(),
                namespace: access.namespace.to_owned(),
                name: access.name.to_owned(),
            };
            let decision = authorizer.check(&user, access.verb, &target);
            (!decision.allowed).then(|| {
                let error = if decision.error.is_empty() {
                    "<nil>"
                } else {
                    decision.error.as_str()
                };
                format!("{}, {error}", decision.reason)
            })
        };
        if let Some(old) = old {
            let authorized = |verb: &str, signer: &str| {
                let access = plugin_admission::Access {
                    verb,
                    group: "certificates.k8s.io",
                    resource: "signers",
                    subresource: "",
                    namespace: "",
                    name: signer,
                };
                authorize(&access).is_none()
            };
            let write = (old, object);
            plugin_admission::signer_permission(
                plugins,
                &resource.def,
                &self.subresource,
                write,
                &authorized,
            )
            .map_err(|message| forbidden_object(resource, object, message))?;
        }
        if plugins.owner_references_permission_enforcement {
            let plural_of = |api_version: &str, kind: &str| {
                let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
                self.resources
                    .iter()
                    .find(|r| {
                        r.def.group == group && r.def.version == version && r.def.kind == kind
                    })
                    .map(|r| r.def.plural.clone())
            };
            let write = (old, object);
            plugin_admission::owner_references(
                &resource.def,
                &self.subresource,
                write,
                &authorize,
                &plural_of,
            )
            .map_err(|message| forbidden_object(resource, object, message))?;
        }
        Ok(())
    }

    /// The warnings of kube's create strategies while they prepare the object (a Pod's
    /// deprecated AppArmor annotations: [`watchkeeper_api::kinds::workloads::created_warnings`]).
    fn created_warnings(&self, resource: &Resource, object: &Value) {
        for warning in watchkeeper_api::kinds::workloads::created_warnings(&resource.def, object) {
            self.warn(warning);
        }
    }

    /// kube's pod and pod template warnings (its strategies' `WarningsOnCreate` and
    /// `WarningsOnUpdate`, once the object is validated) added to the answer's
    /// ([`watchkeeper_api::pod_warnings`]).
    fn pod_warnings(&self, resource: &Resource, old: Option<&Value>, object: &Value) {
        let def = &resource.def;
        let warnings = watchkeeper_api::pod_warnings::for_write(
            &def.group,
            &def.plural,
            &self.subresource,
            old,
            object,
        );
        for warning in warnings {
            self.warn(warning);
        }
    }

    /// PodSecurity (validating, after the kind's own checks) on a write of `object` (`old` on
    /// updates): its refusal, or its warnings added to the answer's ([`pod_security`]).
    fn pod_security(
        &self,
        resource: &Resource,
        old: Option<&Value>,
        object: &Value,
    ) -> Result<(), ApiError> {
        if !self.source.admission.pod_security {
            return Ok(());
        }
        let warnings = pod_security::admit(
            &self.source.pod_security,
            self.resources,
            &resource.def,
            &self.user.name,
            (&self.subresource, old),
            object,
        )?;
        for warning in warnings {
            self.warn(warning);
        }
        Ok(())
    }

    /// LimitRanger on an update: a PersistentVolumeClaim's (not one being deleted), or a pod's
    /// through `pods/{name}/resize`, against its namespace's LimitRanges as the cache has them
    /// (kube validates no other pod update).
    fn limits_updated(
        &self,
        resource: &Resource,
        old: &Value,
        new: &Value,
    ) -> Result<(), ApiError> {
        let resize = self.subresource == watchkeeper_api::resize::SUBRESOURCE;
        if !(resource.def.plural == "persistentvolumeclaims" || resize)
            || old.pointer("/metadata/deletionTimestamp").is_some()
        {
            return Ok(());
        }
        let Some(namespace) = new.pointer("/metadata/namespace").and_then(Value::as_str) else {
            return Ok(());
        };
        let ranges = self.cached_limit_ranges(resource, namespace);
        self.limits_hold(resource, &ranges, new)
    }

    /// 403 when `object` violates one of `ranges`.
    fn limits_hold(
        &self,
        resource: &Resource,
        ranges: &[Value],
        object: &Value,
    ) -> Result<(), ApiError> {
        match limit_ranger::refusal(&resource.def.plural, ranges, object) {
            Some(message) => {
                let name = object
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                Err(ApiError::forbidden(&resource.def, name, message))
            }
            None => Ok(()),
        }
    }

    /// Whether LimitRanger looks at a write of `resource` through this subresource: the main
    /// endpoint, or `pods/{name}/resize` (kube's `SupportsAttributes`).
    fn limit_ranger_subresource(&self, resource: &Resource) -> bool {
        self.subresource.is_empty()
            || (self.subresource == watchkeeper_api::resize::SUBRESOURCE
                && watchkeeper_api::resize::has_resize(&resource.def))
    }

    /// The LimitRanges of `namespace` that apply to a write of `resource` (none for another
    /// resource or a subresource but a pod's `resize`), from their cache.
    fn cached_limit_ranges(&self, resource: &Resource, namespace: &str) -> Vec<Value> {
        if !self.source.admission.limit_ranger
            || !self.limit_ranger_subresource(resource)
            || !limit_ranger::applies(&resource.def.group, &resource.def.plural)
        {
            return Vec::new();
        }
        let Some(ranges) = self.limit_range_resource() else {
            return Vec::new();
        };
        let prefix = format!("{namespace}/");
        ranges
            .cache()
            .latest()
            .range(Some(&prefix), None)
            .take_while(|range| range.key().starts_with(&prefix))
            .map(|range| range.body().clone())
            .collect()
    }

    /// [`Self::cached_limit_ranges`], looked up again once the cache is proven fresh when it
    /// has none (kube's live lookup).
    async fn limit_ranges(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
    ) -> Result<Vec<Value>, ApiError> {
        let Some(namespace) = namespace.filter(|n| !n.is_empty()) else {
            return Ok(Vec::new());
        };
        if !self.source.admission.limit_ranger
            || !self.limit_ranger_subresource(resource)
            || !limit_ranger::applies(&resource.def.group, &resource.def.plural)
        {
            return Ok(Vec::new());
        }
        let found = self.cached_limit_ranges(resource, namespace);
        if !found.is_empty() {
            return Ok(found);
        }
        if let Some(ranges) = self.limit_range_resource() {
            self.consistent(ranges).await?;
        }
        Ok(self.cached_limit_ranges(resource, namespace))
    }

    /// The service account `name` of `namespace` (its body), `None` when it does not exist:
    /// from its cache, then once the cache is proven fresh; the `default` account, which the
    /// namespace controller creates a moment after its namespace, is looked for up to 10
    /// times 100 ms apart (kube's ServiceAccount admission retries for it alike).
    async fn service_account(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Value>, ApiError> {
        let Some(accounts) = self.served_resource("", "serviceaccounts") else {
            return Ok(None);
        };
        let key = watchkeeper_core::object_key(namespace, name);
        let lookups = if name == "default" { 10 } else { 1 };
        for lookup in 0..=lookups {
            if let Some(account) = accounts.cache().get(&key).0 {
                return Ok(Some(account.body().clone()));
            }
            if lookup == lookups {
                break;
            }
            if lookup > 0 {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            self.consistent(accounts).await?;
        }
        Ok(None)
    }

    /// The served (`group`, `plural`) resource at its stored version (not a converted view).
    fn served_resource(&self, group: &str, plural: &str) -> Option<&Resource> {
        policy_admission::served(self.resources, group, plural)
    }

    /// Every object of the class kind (`group`, `plural`), as its cache has them (kube's
    /// listers).
    fn cached_classes(&self, group: &str, plural: &str) -> Vec<Value> {
        policy_admission::cached_objects(self.served_resource(group, plural), None)
    }

    /// [`Self::cached_classes`], looked up again once their cache is proven fresh when it
    /// does not hold `wanted`.
    async fn classes(
        &self,
        group: &str,
        plural: &str,
        wanted: Option<&str>,
    ) -> Result<Vec<Value>, ApiError> {
        let found = self.cached_classes(group, plural);
        let Some(wanted) = wanted else {
            return Ok(found);
        };
        let named =
            |class: &Value| class.pointer("/metadata/name").and_then(Value::as_str) == Some(wanted);
        if found.iter().any(named) {
            return Ok(found);
        }
        if let Some(classes) = self.served_resource(group, plural) {
            self.consistent(classes).await?;
        }
        Ok(self.cached_classes(group, plural))
    }

    /// The served `limitranges` resource.
    fn limit_range_resource(&self) -> Option<&Resource> {
        self.resources
            .iter()
            .find(|r| {
                r.def.group.is_empty() && r.def.version == "v1" && r.def.plural == "limitranges"
            })
            .map(|r| &**r)
    }

    /// `--max-custom-resource-versions` for a write of a CustomResourceDefinition (`old` on
    /// updates) that is prepared and admitted: a write that makes it serve more versions is
    /// counted against the versions the other CRDs in the store serve, from their cache proven
    /// fresh ([`VersionsBound::check`]). The guard, when there is one, is held until the
    /// write's transaction has answered, so this server's next such write counts after it.
    ///
    /// # Errors
    /// 403 Forbidden past the bound; a store or freshness failure.
    async fn custom_versions_admitted(
        &self,
        resource: &Resource,
        old: Option<&Value>,
        object: &Value,
    ) -> Result<Option<tokio::sync::MutexGuard<'_, ()>>, ApiError> {
        if !watchkeeper_api::crd::is_crd(&resource.def) {
            return Ok(None);
        }
        // Boxed where it is made: awaited inline, its ~7 KB state was in every write's future
        // and copied into it on every write of any kind (see `crate::http::boxed`).
        pinned_in_place(|| async move {
            let name = object
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let versions = (
                old.map_or(0, watchkeeper_api::crd::served_versions),
                watchkeeper_api::crd::served_versions(object),
            );
            let others = async {
                self.consistent(resource).await?;
                Ok(resource
                    .cache()
                    .latest()
                    .range(None, None)
                    .filter(|crd| crd.name() != name)
                    .map(|crd| watchkeeper_api::crd::served_versions(crd.body()))
                    .fold(0, usize::saturating_add))
            };
            self.source
                .custom_versions
                .check(&resource.def, name, versions, others)
                .await
        })
        .await
    }

    /// Deletes every object of the resource the CustomResourceDefinition `crd` defines
    /// (before the CRD itself, as kube-apiserver's finalizer does), 100 keys per transaction.
    /// The keys come from the store under the resource's prefix, not from its cache: a CRD
    /// being deleted is no longer served, so its cache may be stopped already.
    async fn delete_definition_objects(&self, crd: &Value) -> Result<(), ApiError> {
        let text = |path: &str| {
            crd.pointer(path)
                .and_then(Value::as_str)
                .unwrap_or_default()
        };
        let (group, plural) = (text("/spec/group"), text("/spec/names/plural"));
        if group.is_empty() || plural.is_empty() || overlaps_built_in(group, plural) {
            return Ok(());
        }
        let prefix = Bytes::from(format!("{}/{group}/{plural}/", self.source.prefix));
        let mut start: Option<Bytes> = None;
        loop {
            let mut range = RangeRequest::prefix(prefix.clone()).with_limit(100);
            if let Some(after) = start.take() {
                range = range.starting(StartKey::Exclusive(after));
            }
            let page = self.source.store.range(range).await.map_err(store_error)?;
            let mut request = TxnRequest::default();
            for kv in &page.kvs {
                request = request.then(TxnOp::Delete {
                    key: kv.key.clone(),
                });
            }
            if !page.kvs.is_empty() {
                self.txn(request).await?;
            }
            match page.kvs.last() {
                Some(last) if page.more => start = Some(last.key.clone()),
                _ => return Ok(()),
            }
        }
    }

    /// The managed fields writer of this request, for an object typed by `custom` (a custom
    /// resource's structural schema, from [`custom_schema`]) or by its built-in kind (`None`).
    fn field_writer<'s>(&'s self, custom: Option<&'s Value>) -> apply::Writer<'s> {
        apply::Writer {
            manager: &self.manager,
            subresource: &self.subresource,
            schema: custom,
        }
    }

    /// Stores a prepared new object with its managers (a dry run checks that the name is free).
    async fn store_new(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        object: Value,
        managers: &apply::Managers,
    ) -> Result<Value, ApiError> {
        let Some(allocators) = self.service_allocators(resource) else {
            return self
                .store_claimed(resource, namespace, object, managers, Vec::new())
                .await
                .map_err(|refusal| match refusal {
                    NotCreated::Refused(error) => error,
                    NotCreated::AddressTaken(_) => {
                        ApiError::internal("a record that was not claimed")
                    }
                });
        };
        // The first scan takes the lowest free slot; one after a lost race starts anywhere.
        let mut rotate = 0u128;
        for _ in 0..ADDRESS_ATTEMPTS {
            let mut object = object.clone();
            let claims = match self
                .claim_service(resource, allocators, None, &mut object, rotate)
                .await?
            {
                Claimed::Claims(claims) => claims,
                Claimed::Unseen(revision) => {
                    self.fresh.wait(resource.cache(), revision).await?;
                    continue;
                }
            };
            match self
                .store_claimed(resource, namespace, object, managers, claims)
                .await
            {
                Ok(created) => return Ok(created),
                Err(NotCreated::Refused(error)) => return Err(error),
                Err(NotCreated::AddressTaken(revision)) => {
                    // Another write took an address or a port: once the cache has its
                    // Service the next claim skips it (or refuses an asked one); it starts at a
                    // random point, away from the other writes.
                    self.fresh.wait(resource.cache(), revision).await?;
                    rotate = u128::from(rand::random::<u64>());
                }
            }
        }
        Err(ApiError::internal(
            "failed to allocate a serviceIP: too many concurrent allocations",
        ))
    }

    /// The Service allocators, when `resource` is `services` written without a subresource.
    fn service_allocators(&self, resource: &Resource) -> Option<&Arc<Allocators>> {
        self.source.service_ips.as_ref().filter(|_| {
            resource.def.group.is_empty()
                && resource.def.plural == "services"
                && self.subresource.is_empty()
        })
    }

    /// The claims of a Service create (`old` absent) or update, once [`service_ips::prepare`]d
    /// (in [`Self::admit`]): the addresses and node ports `object` gets that `old` did not
    /// hold, set in `object`, with their records' compares and puts for the write's
    /// transaction (validated before, in [`Self::admit`]). `rotate` starts the scans for
    /// free values.
    async fn claim_service(
        &self,
        resource: &Resource,
        allocators: &Allocators,
        old: Option<&Value>,
        object: &mut Value,
        rotate: u128,
    ) -> Result<Claimed, ApiError> {
        let name = object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let namespace = object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let owner = format!("{namespace}/{name}");
        let ip_requests = service_ips::ip_requests(old, object);
        let port_requests = service_ips::port_requests(old, object);
        let mut claims = Vec::new();
        if !ip_requests.is_empty() || !port_requests.is_empty() {
            // Read before the allocators' index is: it has every change up to this revision.
            let cached = resource.cache().latest().revision();
            let store = &self.source.store;
            if !ip_requests.is_empty() {
                // Each claimed address's IPAddress, as the allocator stores it.
                let record = |ip| {
                    let uid = uuid::Uuid::new_v4().to_string();
                    let object = service_ips::ip_address(ip, (&namespace, &name), &uid, &self.time);
                    stored_value(&object)
                };
                let mut claimed = Vec::new();
                for (family, asked) in ip_requests {
                    let ips = allocators.ips(family).ok_or_else(|| {
                        ApiError::internal(format!("no range of the family {}", family.name()))
                    })?;
                    match allocators
                        .claim_ip((family, asked), cached, store, record, rotate)
                        .await?
                    {
                        Ok(claim) => {
                            claimed.push((family, claim.ip));
                            claims.push((claim.compare, claim.put));
                        }
                        Err(Refused::Unseen(revision)) => return Ok(Claimed::Unseen(revision)),
                        Err(Refused::Full) => {
                            return Err(ApiError::internal(
                                "failed to allocate a serviceIP: range is full",
                            ));
                        }
                        Err(why) => {
                            let ip = asked.map(|ip| ip.to_string()).unwrap_or_default();
                            return Err(ip_refusal(resource, object, ips, &ip, why));
                        }
                    }
                }
                service_ips::set_cluster_ips(object, &claimed);
            }
            if !port_requests.is_empty() {
                let node_ports = allocators.ports();
                match allocators
                    .claim_ports(&port_requests, cached, store, &owner, rotate)
                    .await?
                {
                    Ok(ports) => {
                        service_ips::set_node_ports(object, &ports);
                        claims.extend(ports.into_iter().filter_map(|p| p.record));
                    }
                    Err((_, _, Refused::Unseen(revision))) => {
                        return Ok(Claimed::Unseen(revision));
                    }
                    Err((slot, port, why)) => {
                        return Err(port_refusal(resource, object, node_ports, slot, port, why));
                    }
                }
            }
        }
        Ok(Claimed::Claims(claims))
    }

    /// The deletes of the IPAddresses of the addresses the Service `old` of `resource` holds and
    /// `new` (none: the Service goes) does not, for the write's transaction: those whose
    /// `parentRef` names the Service, each on its mod revision as read (see `service_ips`).
    /// None for other resources, or without allocation.
    async fn released_ip_addresses(
        &self,
        resource: &Resource,
        old: &Value,
        new: Option<&Value>,
    ) -> Result<Vec<(Compare, TxnOp)>, ApiError> {
        let Some(allocators) = self
            .source
            .service_ips
            .as_ref()
            .filter(|_| resource.def.group.is_empty() && resource.def.plural == "services")
        else {
            return Ok(Vec::new());
        };
        // Boxed where it is made, as `custom_versions_admitted`: ~4.4 KB of state.
        pinned_in_place(|| async move {
            let text = |path: &str| {
                old.pointer(path)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
            };
            let (namespace, name) = (text("/metadata/namespace"), text("/metadata/name"));
            let mut releases = Vec::new();
            for ip in service_ips::released(old, new) {
                let key = allocators.ip_address_key(ip);
                let found = self
                    .source
                    .store
                    .range(watchkeeper_store::RangeRequest::key(key.clone()))
                    .await
                    .map_err(store_error)?
                    .kvs;
                for kv in found.into_iter().filter(|kv| kv.key == key) {
                    let parent_is_this = serde_json::from_slice::<Value>(&kv.value)
                        .is_ok_and(|object| service_ips::names_service(&object, namespace, name));
                    if parent_is_this {
                        releases.push((
                            Compare::ModRevision {
                                key: key.clone(),
                                revision: kv.mod_revision,
                            },
                            TxnOp::Delete { key: key.clone() },
                        ));
                    }
                }
            }
            Ok(releases)
        })
        .await
    }

    /// Stores a new object, with the allocation records of a Service's address and node ports
    /// (`claims`: each record's compare and put), in one transaction.
    async fn store_claimed(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        mut object: Value,
        managers: &apply::Managers,
        claims: Vec<(Compare, TxnOp)>,
    ) -> Result<Value, NotCreated> {
        apply::set_managed_fields(&mut object, managers);
        watchkeeper_api::size::check_stored_size(&object).map_err(NotCreated::Refused)?;
        let name = object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let namespace = namespace.unwrap_or_default();
        if self.dry_run {
            // As kube-apiserver's dry-run storage: AlreadyExists when the key is taken, else the
            // object that would be stored (without a resource version: none was assigned).
            self.consistent(resource)
                .await
                .map_err(NotCreated::Refused)?;
            if resource
                .cache()
                .get(&object_key(namespace, &name))
                .0
                .is_some()
            {
                return Err(NotCreated::Refused(ApiError::already_exists(
                    &resource.def,
                    &name,
                )));
            }
            // Quota admission runs for a dry run too; nothing is written.
            self.quota_claims(resource, namespace, &name, None, Some(&object))
                .await
                .map_err(NotCreated::Refused)?;
            self.custom_versions_admitted(resource, None, &object)
                .await
                .map_err(NotCreated::Refused)?;
            return Ok(object);
        }
        let key = Bytes::from(resource.store_key(namespace, &name));
        let value = stored_value(&resource.stored_form(&object));
        self.source
            .cache_memory
            .admit(&object, value.len(), None, is_definitions(resource))
            .map_err(NotCreated::Refused)?;
        for _ in 0..QUOTA_ATTEMPTS {
            let quotas = self
                .quota_claims(resource, namespace, &name, None, Some(&object))
                .await
                .map_err(NotCreated::Refused)?;
            // Held until the transaction has answered.
            let _admitted = self
                .custom_versions_admitted(resource, None, &object)
                .await
                .map_err(NotCreated::Refused)?;
            let mut request = TxnRequest::default()
                .when(Compare::Absent { key: key.clone() })
                .then(TxnOp::Put {
                    key: key.clone(),
                    value: value.clone(),
                });
            for (compare, put) in claims.iter().chain(&quotas) {
                request = request.when(compare.clone()).then(put.clone());
            }
            let response = self.txn(request).await.map_err(NotCreated::Refused)?;
            if response.succeeded {
                self.settle(resource, response.revision).await;
                self.quota_committed(namespace, &name);
                return Ok(with_revision(object, response.revision));
            }
            let exists = response.current.first().is_some_and(|(_, kv)| kv.is_some());
            if exists {
                return Err(NotCreated::Refused(ApiError::already_exists(
                    &resource.def,
                    &name,
                )));
            }
            // The compares after the object's own: the allocation records, then the quotas.
            let quota_moved = response
                .current
                .get(1 + claims.len()..)
                .unwrap_or_default()
                .iter()
                .zip(&quotas)
                .any(|((_, kv), (compare, _))| !compare.holds(kv.as_ref()));
            if !quota_moved {
                return Err(NotCreated::AddressTaken(response.revision));
            }
            // Another write counted against a quota first: count again once the caches have it.
            self.wait_quota_caches(resource, response.revision)
                .await
                .map_err(NotCreated::Refused)?;
        }
        Err(NotCreated::Refused(ApiError::conflict(
            &resource.def,
            &name,
            "Operation cannot be fulfilled: too many concurrent writes counted by the namespace's resource quotas, please retry",
        )))
    }

    /// The ResourceQuotas of `namespace` that charge objects of `resource`
    /// ([`resource_quota`]), for a write that turns `old` into `new` (a create has no `old`,
    /// a delete no `new`): for each, the compare of its revision and the put of its new
    /// `status.used` — the usage the quota states with what the write adds and takes away,
    /// or, for a write that the stated usage would refuse or that takes away what it may not
    /// hold, the namespace's usage taken from the caches once proven fresh, with the same. None (and no store read) when no quota in the cache
    /// limits the resource there, or the write changes nothing a quota limits.
    ///
    /// # Errors
    /// 403 Forbidden in kube-apiserver's words when a write would pass a limit, or a pod
    /// created does not state what a quota limits; a store or freshness failure.
    async fn quota_claims(
        &self,
        resource: &Resource,
        namespace: &str,
        name: &str,
        old: Option<&Value>,
        new: Option<&Value>,
    ) -> Result<Vec<(Compare, TxnOp)>, ApiError> {
        // Nothing to claim or refuse unless quota admission is on for a namespaced write and
        // either the limited-resources configuration checks it (a create, an update of a
        // Service or a claim) or a quota of the namespace limits the resource (other than the
        // quota written): looked at without awaiting, so that most writes skip the rest.
        if !self.source.admission.resource_quota || !resource.def.namespaced || namespace.is_empty()
        {
            return Ok(Vec::new());
        }
        let Some(quotas) = self.quota_resource() else {
            return Ok(Vec::new());
        };
        // kube's evaluators look at creates, and at updates of Services and claims.
        let (group, plural) = (resource.def.group.as_str(), resource.def.plural.as_str());
        let looked_at = old.is_none()
            || (group.is_empty() && matches!(plural, "services" | "persistentvolumeclaims"));
        let checked =
            new.is_some() && looked_at && !self.source.plugin_configs.limited_resources.is_empty();
        let found = quotas_limiting(&quotas.cache().latest(), &resource.def, namespace, name);
        if !checked && found.is_empty() {
            return Ok(Vec::new());
        }
        // Boxed where it is made, as `custom_versions_admitted`: ~3.7 KB of state, in every
        // namespaced write's future and copied into it when awaited inline.
        pinned_in_place(|| async move {
            use std::collections::BTreeMap;
            let prefix = format!("{namespace}/");
            // The write's time: a pod terminating past its grace period is no longer charged.
            // Read only when a quota is there to charge (most writes have none to look at).
            let write_time = || {
                watchkeeper_api::time::unix_from_rfc3339(&self.time)
                    .unwrap_or_else(crate::respond::now_unix)
            };
            if checked && let Some(new) = new {
                let snapshot = quotas.cache().latest();
                let all: Vec<&Value> = snapshot
                    .range(Some(&prefix), None)
                    .take_while(|quota| quota.key().starts_with(&prefix))
                    .map(|quota| quota.body())
                    .collect();
                let limited = &self.source.plugin_configs.limited_resources;
                resource_quota::uncovered(limited, (group, plural), (new, write_time()), &all)
                    .map_err(|refusal| match refusal {
                        resource_quota::Uncovered::Resources(message) => {
                            ApiError::forbidden(&resource.def, name, message)
                        }
                        resource_quota::Uncovered::Scopes(message) => {
                            ApiError::new(500, "", message)
                        }
                    })?;
            }
            if found.is_empty() {
                return Ok(Vec::new());
            }
            let now = write_time();
            if old.is_none()
                && let Some(new) = new
            {
                // kube checks a pod's containers on create, before any amount, for the quotas
                // that select it.
                for quota in &found {
                    if !resource_quota::selects(quota.body(), group, plural, new) {
                        continue;
                    }
                    let limits = resource_quota::limits(quota.body(), group, plural);
                    if let Some(message) = resource_quota::unstated(group, plural, &limits, new) {
                        let message = format!("failed quota: {}: {message}", quota.name());
                        return Err(ApiError::forbidden(&resource.def, name, message));
                    }
                }
            }
            // What the write adds to and takes from each limited name of `quota`: the charges of
            // `old` and `new` that it selects (a scoped quota selects only some pods).
            let delta = |quota: &Value| {
                let charged = |object: Option<&Value>| {
                    object
                        .filter(|object| resource_quota::selects(quota, group, plural, object))
                        .map_or_else(BTreeMap::new, |o| {
                            resource_quota::charges(group, plural, o, now)
                        })
                };
                let (before, after) = (charged(old), charged(new));
                let mut added: BTreeMap<String, Quantity> = BTreeMap::new();
                let mut taken: BTreeMap<String, Quantity> = BTreeMap::new();
                for (limited, _) in resource_quota::limits(quota, group, plural) {
                    let zero = Quantity::zero();
                    let was = before.get(&limited).copied().unwrap_or(zero);
                    let is = after.get(&limited).copied().unwrap_or(zero);
                    match is.cmp(&was) {
                        std::cmp::Ordering::Greater => {
                            added.insert(limited, zero.plus(is).minus(was));
                        }
                        std::cmp::Ordering::Less => {
                            taken.insert(limited, zero.plus(was).minus(is));
                        }
                        std::cmp::Ordering::Equal => {}
                    }
                }
                (added, taken)
            };
            if found.iter().all(|quota| {
                let (added, taken) = delta(quota.body());
                added.is_empty() && taken.is_empty()
            }) {
                return Ok(Vec::new());
            }
            self.consistent(resource).await?;
            let found = quotas_limiting(&quotas.cache().latest(), &resource.def, namespace, name);
            // What a quota says its namespace uses, when it names every name it limits: a write
            // that only adds builds on it, as kube's admission does (`status.used` plus the
            // write's charge), so a create costs the same however many objects the namespace
            // holds; a write that gives usage back builds on it minus what it gives back. Every
            // charged write keeps `status.used` in its own transaction, and the transaction
            // compares the quota's revision, so two writes that read the same usage cannot both
            // commit. A write the stated usage would refuse counts again instead, and so does one
            // giving back what the stated usage may not hold (a pod time alone stopped charging,
            // or more than stated): that corrects what time or a writer behind the server's back
            // changed before anything is refused on it.
            let stated = |body: &Value, limits: &[(String, Quantity)]| {
                let used = resource_quota::quantities(body.pointer("/status/used"));
                limits
                    .iter()
                    .map(|(limited, _)| Some((limited.clone(), *used.get(limited)?)))
                    .collect::<Option<BTreeMap<String, Quantity>>>()
            };
            // What the namespace uses now (`old` included, `new` not yet), from the counted
            // resource's cache at least as new as the quotas read: every charged write also
            // writes its quotas, so a quota unchanged from the revision read here (the
            // transaction's compare) means nothing it counts changed after it. A count from a
            // cache behind the quota's revision could miss a write the quota already holds (two
            // servers, each cache dispatched on its own). Taken once, when a quota needs it.
            let seen = found
                .iter()
                .map(|quota| quota.resource_version())
                .max()
                .unwrap_or_default();
            let mut snapshot = None;
            let mut claims = Vec::new();
            for quota in found {
                let body = quota.body();
                let limits = resource_quota::limits(body, group, plural);
                let (added, taken) = delta(body);
                // A write the stated usage would refuse counts again first, so no refusal rests
                // on a usage time or a writer behind the server's back made stale (a pod
                // terminating past its grace period, which kube's admission still counts until
                // its controller's next resync).
                let used = stated(body, &limits).filter(|used| {
                    let gives_back_what_is_stated = taken.is_empty()
                        || (old.is_none_or(|old| {
                            resource_quota::charge_is_stated(group, plural, old, now)
                        }) && taken.iter().all(|(limited, amount)| {
                            used.get(limited).is_some_and(|u| u >= amount)
                        }));
                    gives_back_what_is_stated
                        && resource_quota::exceeded(quota.name(), &limits, used, &added).is_none()
                });
                let used = match used {
                    Some(used) => used,
                    None => {
                        if snapshot.is_none() {
                            self.fresh.wait(resource.cache(), seen).await?;
                            snapshot = Some(resource.cache().latest());
                        }
                        let Some(snapshot) = &snapshot else {
                            return Err(ApiError::internal(
                                "a resource quota that needs counting was not counted",
                            ));
                        };
                        let mut used: BTreeMap<String, Quantity> = limits
                            .iter()
                            .map(|(limited, _)| (limited.clone(), Quantity::zero()))
                            .collect();
                        for counted in snapshot
                            .range(Some(&prefix), None)
                            .take_while(|o| o.key().starts_with(&prefix))
                            .filter(|o| resource_quota::selects(body, group, plural, o.body()))
                        {
                            let charged =
                                resource_quota::charges(group, plural, counted.body(), now);
                            for (limited, total) in &mut used {
                                if let Some(charge) = charged.get(limited) {
                                    *total = total.plus(*charge);
                                }
                            }
                        }
                        used
                    }
                };
                if let Some(message) =
                    resource_quota::exceeded(quota.name(), &limits, &used, &added)
                {
                    return Err(ApiError::forbidden(&resource.def, name, message));
                }
                let used = used
                    .into_iter()
                    .map(|(limited, now)| {
                        let zero = Quantity::zero();
                        let plus = added.get(&limited).copied().unwrap_or(zero);
                        let minus = taken.get(&limited).copied().unwrap_or(zero);
                        (limited, now.plus(plus).minus(minus))
                    })
                    .collect();
                let updated = resource_quota::with_status(body.clone(), &used);
                let key = Bytes::from(quotas.store_key(quota.namespace(), quota.name()));
                claims.push((
                    Compare::ModRevision {
                        key: key.clone(),
                        revision: quota.resource_version(),
                    },
                    TxnOp::Put {
                        key,
                        value: stored_value(&quotas.stored_form(&updated)),
                    },
                ));
            }
            Ok(claims)
        })
        .await
    }

    /// A write committed: a ResourceQuota whose status it counted is counted again once the
    /// caches have caught up (see [`resource_quota::Recounts`]); the controller's own recount
    /// is not.
    fn quota_committed(&self, namespace: &str, name: &str) {
        if self
            .quota_counted
            .swap(false, std::sync::atomic::Ordering::Relaxed)
            && self.user.name != resource_quota::CONTROLLER_USER
        {
            self.source.quota_recounts.mark(namespace, name);
        }
    }

    /// Whether this write of a ResourceQuota (`old` before it, `object` as written) gets its
    /// status from a count, as kube's quota controller reacts to it: a new quota, a change of
    /// `spec.hard` (its `updateQuota`), and the controller's own resync
    /// ([`crate::controllers::quota_resync`]). A client's write of `status` is kept as written
    /// (kube's `resourcequotaStatusStrategy`; the controller ignores the update and resets it
    /// on its next resync), and any other write keeps the stored status (kube's main strategy
    /// restores the old status, and the controller ignores a write that leaves `spec.hard`).
    fn recounts_quota(&self, old: Option<&Value>, object: &Value) -> bool {
        let Some(old) = old else { return true };
        if self.subresource == "status" {
            return self.user.name == resource_quota::CONTROLLER_USER;
        }
        old.pointer("/spec/hard") != object.pointer("/spec/hard")
            || object.get("status") != old.get("status")
    }

    /// A ResourceQuota as kube's quota controller leaves it: `status.hard` from `spec.hard`,
    /// `status.used` the count of each object count it limits in its namespace, from the
    /// caches as they are (every counted create and delete then keeps it current).
    fn quota_with_usage(&self, quota: Value) -> Value {
        let namespace = quota
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let prefix = format!("{namespace}/");
        let quota_name = quota
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let now = watchkeeper_api::time::unix_from_rfc3339(&self.time)
            .unwrap_or_else(crate::respond::now_unix);
        let mut used = std::collections::BTreeMap::new();
        let hard: Vec<String> = quota
            .pointer("/spec/hard")
            .and_then(Value::as_object)
            .map(|hard| hard.keys().cloned().collect())
            .unwrap_or_default();
        for name in hard {
            let Some((group, plural)) = resource_quota::charged_resource(&name) else {
                continue;
            };
            let Some(counted) = self.resources.iter().find(|r| {
                r.def.namespaced
                    && r.def.group == group
                    && r.def.plural == plural
                    && r.conversion.is_none()
            }) else {
                continue;
            };
            let snapshot = counted.cache().latest();
            // A quota counting quotas counts itself, as the controller sees it once written
            // (on a create the cache does not hold it yet).
            let itself = group.is_empty() && plural == "resourcequotas";
            let own_key = format!("{prefix}{quota_name}");
            let total = snapshot
                .range(Some(&prefix), None)
                .take_while(|o| o.key().starts_with(&prefix))
                .filter(|o| !(itself && **o.key() == *own_key))
                .filter(|o| resource_quota::selects(&quota, &group, &plural, o.body()))
                .filter_map(|o| {
                    resource_quota::charges(&group, &plural, o.body(), now)
                        .get(&name)
                        .copied()
                })
                .fold(Quantity::zero(), Quantity::plus);
            let total = if itself {
                resource_quota::charges(&group, &plural, &quota, now)
                    .get(&name)
                    .map_or(total, |own| total.plus(*own))
            } else {
                total
            };
            used.insert(name, total);
        }
        resource_quota::with_status(quota, &used)
    }

    /// The ResourceQuota resource, when served.
    fn quota_resource(&self) -> Option<&Resource> {
        self.resources
            .iter()
            .find(|r| {
                r.def.group.is_empty() && r.def.version == "v1" && r.def.plural == "resourcequotas"
            })
            .map(|r| &**r)
    }

    /// Waits until the counted resource's and the quotas' caches have `revision`.
    async fn wait_quota_caches(
        &self,
        resource: &Resource,
        revision: Revision,
    ) -> Result<(), ApiError> {
        self.fresh.wait(resource.cache(), revision).await?;
        if let Some(quotas) = self.quota_resource() {
            self.fresh.wait(quotas.cache(), revision).await?;
        }
        Ok(())
    }

    /// UPDATE (PUT). With `metadata.resourceVersion` in the body it is a precondition
    /// (409 on mismatch); without, a guaranteed update.
    async fn update(
        &self,
        resource: &Resource,
        namespace: &str,
        name: &str,
        body: Value,
        raw: &[u8],
    ) -> Result<Written, ApiError> {
        // kube's update handler's `checkName`: a body without a name is refused too.
        let body_name = body.pointer("/metadata/name").and_then(Value::as_str);
        if body_name != Some(name) {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({}) does not match the name on the URL ({name})",
                body_name.unwrap_or_default()
            )));
        }
        let precondition = match body.pointer("/metadata/resourceVersion") {
            None | Some(Value::Null) => None,
            Some(Value::String(rv)) if rv.is_empty() => None,
            Some(Value::String(rv)) => Some(rv.parse::<Revision>().map_err(|_| {
                ApiError::bad_request(format!("invalid resourceVersion {rv:?} in the object: a resource version is a non-negative integer"))
            })?),
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "invalid resourceVersion {other} in the object: expected a string"
                )));
            }
        };
        // Custom resources and CRDs need the version they replace (kube's strategies do not
        // allow unconditional updates of them); others may leave it out.
        let conditional_only = resource.custom().is_some() || is_definitions(resource);
        self.guaranteed_update(resource, namespace, name, precondition, |_current| {
            if precondition.is_none() && conditional_only {
                return Err(ApiError::unconditional_update(&resource.def, name));
            }
            let mut new = body.clone();
            self.checked_fields(resource, &mut new, raw)?;
            if new.pointer("/metadata/name").is_none()
                && let Some(metadata) = new.get_mut("metadata").and_then(Value::as_object_mut)
            {
                metadata.insert("name".to_owned(), Value::String(name.to_owned()));
            }
            Ok(Desired {
                managers: self.managers.clone(),
                ..Desired::unchecked(new)
            })
        })
        .await
    }

    /// PATCH: a guaranteed update applying `patch` to the current object.
    async fn patch(
        &self,
        resource: &Resource,
        namespace: &str,
        name: &str,
        patch_type: PatchType,
        patch: Bytes,
    ) -> Result<Written, ApiError> {
        let patch_fields = self.patch_fields(patch_type, &patch);
        // kube-apiserver decodes a JSON or merge patch strictly into its operation type first
        // unless `fieldValidation=Ignore` (400 `error decoding patch: ...`). A merge patch that
        // applies decoded as an object (or null), so it is checked only when applying fails.
        let strict = self.field_validation != FieldValidation::Ignore;
        let decode_error = || {
            strict
                .then(|| watchkeeper_api::patch::strict_decode_error(patch_type, &patch))
                .flatten()
        };
        self.guaranteed_update(resource, namespace, name, None, |old| {
            if patch_type == PatchType::Json
                && let Some(error) = decode_error()
            {
                return Err(error);
            }
            let (mut new, pruning) =
                watchkeeper_api::apply_patch_checked(&resource.def, patch_type, old, &patch)
                    .map_err(|error| decode_error().unwrap_or(error))?;
            self.checked_patch(
                resource,
                &mut new,
                (patch_type, &patch),
                &patch_fields,
                pruning,
            )?;
            // kube's patcher's `checkName`: a patch that removes or changes the name (a root
            // `$patch: delete` leaves `{}`) is refused.
            let patched_name = new
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if patched_name != name {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({patched_name}) does not match the name on the URL ({name})"
                )));
            }
            // A patch that sets `metadata.resourceVersion` asks for optimistic concurrency, as
            // with kube-apiserver: it applies only to that version.
            fn version(object: &Value) -> Option<&str> {
                object
                    .at("/metadata/resourceVersion")
                    .and_then(Value::as_str)
            }
            if let Some(wanted) = version(&new)
                && version(old).is_some_and(|current| current != wanted)
            {
                return Err(ApiError::conflict_modified(&resource.def, name));
            }
            // `apply_patch` checked that the result decodes into the kind.
            Ok(Desired {
                decoded: true,
                ..Desired::unchecked(new)
            })
        })
        .await
    }

    /// Server-side apply: merges the configuration into the object (creating it when absent)
    /// with field ownership; `true` when it created the object.
    async fn apply(
        &self,
        resource: &Resource,
        namespace: &str,
        name: &str,
        body: &Bytes,
    ) -> Result<(Written, bool), ApiError> {
        let def = &resource.def;
        let mut config = apply::config::parse_configuration(body)?;
        let custom = resource.custom();
        // Fields the type does not declare: a built-in kind's schema, or a custom resource's
        // structural schema (whose pruning names them; the copy is not kept).
        let unknown = match custom_schema(custom.as_deref()) {
            Some(schema) => {
                watchkeeper_api::structural::prune_and_default(schema, &mut config.clone())
            }
            None => watchkeeper_api::schema::prune_unknown_fields(def, &mut config),
        };
        if !unknown.is_empty() {
            let namespace = if def.namespaced { namespace } else { "" };
            return Err(watchkeeper_api::schema::apply_unknown_fields_error(
                def, namespace, name, &unknown,
            ));
        }
        if let Some(body_name) = config.pointer("/metadata/name").and_then(Value::as_str)
            && body_name != name
        {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        let precondition = match config.pointer("/metadata/resourceVersion") {
            Some(Value::String(rv)) if !rv.is_empty() => Some(rv.parse::<Revision>().map_err(|_| {
                ApiError::bad_request(format!("invalid resourceVersion {rv:?} in the object: a resource version is a non-negative integer"))
            })?),
            _ => None,
        };
        let duplicates = if self.field_validation == FieldValidation::Ignore {
            Vec::new()
        } else {
            apply::config::duplicate_keys(body)
        };
        phase_boundary().await;
        // An object the cache holds is updated (the update proves what it must); a create, or
        // a 404 for a precondition, only from a cache proven fresh.
        let mut proven = false;
        for _ in 0..GUARANTEED_UPDATE_ATTEMPTS {
            if resource
                .cache()
                .get(&object_key(namespace, name))
                .0
                .is_some()
            {
                let updated = self
                    .guaranteed_update(resource, namespace, name, precondition, |old| {
                        let (mut merged, managers) = apply::apply(
                            def,
                            Some(old),
                            &config,
                            self.field_writer(custom_schema(custom.as_deref())),
                            self.force,
                            &self.time,
                        )?;
                        watchkeeper_api::protobuf::gostruct::normalize(def, &mut merged)?;
                        self.checked_keys(&duplicates)?;
                        Ok(Desired {
                            managers: Some(managers),
                            ..Desired::unchecked(merged)
                        })
                    })
                    .await;
                match updated {
                    // Proven gone (the update proves a cache before it answers 404).
                    Err(error) if error.code == 404 => {
                        proven = true;
                        continue;
                    }
                    other => return other.map(|object| (object, false)),
                }
            }
            if !proven {
                self.consistent(resource).await?;
                proven = true;
                continue;
            }
            if precondition.is_some() {
                return Err(ApiError::not_found(def, name));
            }
            let (mut merged, managers) = apply::apply(
                def,
                None,
                &config,
                self.field_writer(custom_schema(custom.as_deref())),
                self.force,
                &self.time,
            )?;
            self.checked_keys(&duplicates)?;
            watchkeeper_api::protobuf::gostruct::normalize(def, &mut merged)?;
            if let Some(metadata) = merged.get_mut("metadata").and_then(Value::as_object_mut) {
                metadata.insert("name".to_owned(), Value::String(name.to_owned()));
            }
            let namespace = def.namespaced.then_some(namespace);
            let context = self.create_context(resource, namespace, name).await?;
            self.created_warnings(resource, &merged);
            let object = prepare_create(def, merged, &context)?;
            let object = self.admit_created(resource, namespace, object).await?;
            match self.store_new(resource, namespace, object, &managers).await {
                Err(error) if error.code == 409 => {
                    self.consistent(resource).await?;
                }
                other => return other.map(|object| (Written::Value(object), true)),
            }
        }
        Err(ApiError::conflict(
            def,
            name,
            "too many concurrent updates; please try again",
        ))
    }

    /// The guaranteed update loop (see the module docs). `mutate` maps the current object to
    /// the desired one.
    async fn guaranteed_update(
        &self,
        resource: &Resource,
        namespace: &str,
        name: &str,
        precondition: Option<Revision>,
        mutate: impl Fn(&Value) -> Result<Desired, ApiError>,
    ) -> Result<Written, ApiError> {
        let cache = resource.cache();
        let cache_key = object_key(namespace, name);
        let store_key = Bytes::from(resource.store_key(namespace, name));
        let counters = &self.source.counters;
        // The first attempt starts from the cache as it is: the transaction's compare on the
        // object's revision refuses a stale base. What the object decides without a
        // transaction (not found, a precondition, a refusal, nothing to change, a dry run's
        // answer) is final only on a cache proven fresh (kube-apiserver: a cached object that
        // fails is refetched from etcd before the failure counts).
        let mut proven = false;
        if self.dry_run {
            self.consistent_boxed(resource).await?;
            proven = true;
        }
        // A Service's claims scan from the lowest free value; after a lost race from anywhere.
        let mut rotate = 0u128;
        for _ in 0..GUARANTEED_UPDATE_ATTEMPTS {
            let (current, _) = cache.get(&cache_key);
            // A large object makes the attempt heavy whatever the body (see `offload`).
            let size = current.as_ref().map_or(0, |object| object.size_hint());
            let offload = &self.source.offload;
            let attempt = self
                .update_attempt(resource, (name, size), current, precondition, &mutate)
                .await;
            phase_boundary().await;
            let (current, mut new) = match attempt {
                Err(_) | Ok(UpdateAttempt::Unchanged(_)) if !proven => {
                    counters.unproven_retries.fetch_add(1, Ordering::Relaxed);
                    self.consistent_boxed(resource).await?;
                    proven = true;
                    continue;
                }
                Err(error) => return Err(error),
                Ok(UpdateAttempt::Unchanged(current)) => {
                    if !self.dry_run {
                        counters.noop_writes.fetch_add(1, Ordering::Relaxed);
                    }
                    // The object as it is: the cache's, whose encoding is the answer.
                    return Ok(Written::Cached(current));
                }
                Ok(UpdateAttempt::Changed { current, new }) => (current, new),
            };
            let expected = precondition.unwrap_or(current.resource_version());
            // A Service's new addresses and node ports are claimed in the update's own
            // transaction (see `service_ips`).
            let mut claims = Vec::new();
            if let Some(allocators) = self.service_allocators(resource) {
                // Boxed where it is made (Services only), as `custom_versions_admitted`.
                let claimed = pinned_in_place(|| {
                    self.claim_service(resource, allocators, Some(current.body()), &mut new, rotate)
                })
                .await;
                let Some(claimed) = self.unless_unproven(resource, &mut proven, claimed).await?
                else {
                    continue;
                };
                match claimed {
                    Claimed::Claims(made) => claims = made,
                    Claimed::Unseen(revision) => {
                        self.fresh.wait(cache, revision).await?;
                        continue;
                    }
                }
            }
            // `--max-custom-resource-versions`; held until the transaction has answered.
            let admitted = self
                .custom_versions_admitted(resource, Some(current.body()), &new)
                .await;
            let Some(_admitted) = self
                .unless_unproven(resource, &mut proven, admitted)
                .await?
            else {
                continue;
            };
            // kube's `ShouldDeleteDuringUpdate`: an update removes an object being deleted
            // once no finalizer is left, unless it waits for a grace period (a pod marked for
            // its grace period stays until deleted again).
            let finalized = new.at("/metadata/deletionTimestamp").is_some()
                && current
                    .body()
                    .pointer("/metadata/deletionGracePeriodSeconds")
                    .and_then(Value::as_i64)
                    .unwrap_or(0)
                    == 0
                && new
                    .at("/metadata/finalizers")
                    .and_then(Value::as_array)
                    .is_none_or(Vec::is_empty)
                // A namespace goes once its spec finalizers are gone too.
                && (!is_namespaces(&resource.def) || namespace_finalizers(&new) == 0);
            // What the update adds to or takes from the namespace's quotas (a deletion lowers
            // the usage they show, as a DELETE without finalizers does); admitted for a dry
            // run too.
            let after = (!finalized).then_some(&new);
            let quota = self
                .quota_claims(resource, namespace, name, Some(current.body()), after)
                .await;
            let Some(quota) = self.unless_unproven(resource, &mut proven, quota).await? else {
                continue;
            };
            if self.dry_run {
                // What would be stored, at the revision it would replace.
                return Ok(Written::Value(with_revision(
                    new,
                    current.resource_version(),
                )));
            }
            // The IPAddresses of the addresses the update drops (or the deletion frees) go
            // with it (see `service_ips`).
            let released = self
                .released_ip_addresses(resource, current.body(), (!finalized).then_some(&new))
                .await?;
            phase_boundary().await;
            // A CRD whose last finalizer goes takes its objects with it, as on a DELETE.
            if finalized && watchkeeper_api::crd::is_crd(&resource.def) {
                pinned_in_place(|| self.delete_definition_objects(&new)).await?;
            }
            let (operation, written) = if finalized {
                (
                    TxnOp::Delete {
                        key: store_key.clone(),
                    },
                    Pending::Kept(new),
                )
            } else {
                // The old object's encoding is the size of the new one's stored value but for
                // what the write changed.
                let capacity = if current.is_encoded(watchkeeper_core::Encoding::Json) {
                    current
                        .encoded(watchkeeper_core::Encoding::Json, &cache.metrics().encode)
                        .len()
                        + 64
                } else if current.size_hint() > 0 {
                    // The length of the old object's stored value.
                    current.size_hint() + 64
                } else {
                    0
                };
                let (value, slot) = offload
                    .in_place(capacity, || {
                        stored_value_sized(&resource.stored_form(&new), capacity)
                    })
                    .await;
                self.source.cache_memory.admit(
                    &new,
                    value.len(),
                    Some(current.as_ref()),
                    is_definitions(resource),
                )?;
                let written = if answers_from_cache(resource, namespace, name, &new) {
                    // Offered with the resource version it was read at, which the decode
                    // replaces in place (`Object::new`): taking it out here and putting it
                    // back there was two allocations and two frees per write.
                    Pending::Offered(self.source.handover.offer(
                        store_key.clone(),
                        value.clone(),
                        new,
                        slot,
                    ))
                } else {
                    Pending::Kept(new)
                };
                (
                    TxnOp::Put {
                        key: store_key.clone(),
                        value,
                    },
                    written,
                )
            };
            let mut request = TxnRequest::default()
                .when(Compare::ModRevision {
                    key: store_key.clone(),
                    revision: expected,
                })
                .then(operation);
            // A deleted Service claims nothing.
            if finalized {
                claims.clear();
            }
            let claimed = !claims.is_empty() || !released.is_empty();
            let quota_claimed = !quota.is_empty();
            for (compare, put) in claims.into_iter().chain(released).chain(quota) {
                request = request.when(compare).then(put);
            }
            let response = self.txn(request).await?;
            if response.succeeded {
                self.settle(resource, response.revision).await;
                self.quota_committed(namespace, name);
                return Ok(written.at(response.revision));
            }
            drop(written);
            let object_revision = response
                .current
                .first()
                .and_then(|(_, kv)| kv.as_ref().map(|kv| kv.mod_revision));
            if claimed && object_revision == Some(expected) {
                // The object is as it was: another write took an address or a port (or moved
                // a quota's usage). Once the caches have it the next claim skips it (or
                // refuses an asked one), starting at a random point.
                if quota_claimed {
                    self.wait_quota_caches(resource, response.revision).await?;
                } else {
                    self.fresh.wait(cache, response.revision).await?;
                }
                proven = true;
                rotate = u128::from(rand::random::<u64>());
                continue;
            }
            counters.conflicts.fetch_add(1, Ordering::Relaxed);
            if quota_claimed && object_revision == Some(expected) {
                // A quota's usage moved first: again once its cache has it.
                self.wait_quota_caches(resource, response.revision).await?;
                proven = true;
                continue;
            }
            if precondition.is_some() {
                return Err(ApiError::conflict_modified(&resource.def, name));
            }
            // Retry from the cache once it has what the store reported: no store read, no decode.
            // The cache then holds the object as of the store's revision: proven fresh for it.
            let seen = response
                .current
                .first()
                .and_then(|(_, kv)| kv.as_ref().map(|kv| kv.mod_revision))
                .unwrap_or(response.revision);
            self.fresh.wait(cache, seen.max(response.revision)).await?;
            proven = true;
        }
        Err(ApiError::conflict(
            &resource.def,
            name,
            "too many concurrent updates; please try again",
        ))
    }

    /// An update attempt's check decided from a base the cache may not have proven fresh
    /// (`proven` false): a refusal then only proves the cache and says to try again (`None`),
    /// as kube-apiserver refetches a cached object that fails before the failure counts; from
    /// a proven cache the refusal is the answer.
    async fn unless_unproven<T>(
        &self,
        resource: &Resource,
        proven: &mut bool,
        outcome: Result<T, ApiError>,
    ) -> Result<Option<T>, ApiError> {
        match outcome {
            Ok(value) => Ok(Some(value)),
            Err(_) if !*proven => {
                self.source
                    .counters
                    .unproven_retries
                    .fetch_add(1, Ordering::Relaxed);
                self.consistent_boxed(resource).await?;
                *proven = true;
                Ok(None)
            }
            Err(error) => Err(error),
        }
    }

    /// One attempt's object: `current` (the cache's, `None` if it has none, its stored
    /// length `size`) mapped by `mutate`, prepared, given to the in-process mutating plugins,
    /// then the mutating webhooks, then admitted and given its managed fields, then given to
    /// the validating webhooks (a write that changes nothing too, as kube's update loop
    /// admits it); or why not. The synchronous phases run in place when the object is large
    /// (see `offload`): one phase without a mutating webhook configuration, two around the
    /// mutating webhooks' calls with one.
    async fn update_attempt(
        &self,
        resource: &Resource,
        (name, size): (&str, usize),
        current: Option<Arc<Object>>,
        precondition: Option<Revision>,
        mutate: &impl Fn(&Value) -> Result<Desired, ApiError>,
    ) -> Result<UpdateAttempt, ApiError> {
        let offload = &self.source.offload;
        let attempt = if self.mutating_webhooks_configured() {
            let mut prepared = offload
                .in_place(size, || {
                    self.update_prepared(resource, name, current, precondition, mutate)
                })
                .await?;
            prepared.new = self
                .mutating_webhooks(resource, Some(prepared.current.body()), prepared.new)
                .await?;
            offload
                .in_place(size, || self.update_admitted(resource, prepared))
                .await?
        } else {
            // One phase, as before there were webhooks to call between the two.
            offload
                .in_place(size, || {
                    self.update_prepared(resource, name, current, precondition, mutate)
                        .and_then(|prepared| self.update_admitted(resource, prepared))
                })
                .await?
        };
        let mut attempt = attempt;
        match &mut attempt {
            UpdateAttempt::Changed { current, new } => {
                self.image_policy(resource, new).await?;
                self.validating_webhooks(resource, Some(&*new), Some(current.body()))
                    .await?;
            }
            UpdateAttempt::Unchanged(current) => {
                let body = current.body();
                if self.image_policy_runs(resource) {
                    // A write that changes nothing is judged too; a failed-open annotation
                    // would change it, and is not kept.
                    self.image_policy(resource, &mut body.clone()).await?;
                }
                self.validating_webhooks(resource, Some(body), Some(body))
                    .await?;
            }
        }
        Ok(attempt)
    }

    /// An attempt's object up to the in-process mutating plugins (see
    /// [`Self::update_attempt`]).
    fn update_prepared(
        &self,
        resource: &Resource,
        name: &str,
        current: Option<Arc<Object>>,
        precondition: Option<Revision>,
        mutate: &impl Fn(&Value) -> Result<Desired, ApiError>,
    ) -> Result<Prepared, ApiError> {
        let current = current.ok_or_else(|| ApiError::not_found(&resource.def, name))?;
        if let Some(precondition) = precondition
            && precondition != current.resource_version()
        {
            return Err(ApiError::conflict_modified(&resource.def, name));
        }
        let old = current.body();
        let Desired {
            object: mut desired,
            managers,
            decoded,
        } = mutate(old)?;
        // A patch's result was checked whole already, and the update drops its
        // `managedFields`: the list is moved out of it, not copied (an update's body is
        // checked with it, below).
        let base = if decoded {
            apply::Base::take(&mut desired)
        } else {
            apply::Base::of(&desired)
        };
        let new = if decoded {
            prepare_update_decoded(&resource.def, old, desired)?
        } else {
            prepare_update(&resource.def, old, desired)?
        };
        let mut new = new;
        match (resource.def.group.as_str(), resource.def.plural.as_str()) {
            ("", "pods") if self.subresource.is_empty() => {
                if self.source.admission.priority {
                    pod_admission::keep_priority(&mut new, old);
                }
                // kube's DefaultTolerationSeconds admits updates too (`NewHandler(Create,
                // Update)`): a replaced manifest gets the tolerations its pod was created with.
                if self.source.admission.default_toleration_seconds {
                    pod_admission::default_tolerations(&mut new);
                }
                let namespace = new
                    .pointer("/metadata/namespace")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                self.pod_toleration_restriction(&namespace, &mut new, false)?;
            }
            ("", "pods") if self.subresource == watchkeeper_api::resize::SUBRESOURCE => {
                // LimitRanger's defaults, before the resize strategy takes the containers'
                // resources from the body (kube's mutating admission, then the strategy).
                if let Some(namespace) = new.pointer("/metadata/namespace").and_then(Value::as_str)
                {
                    let ranges = self.cached_limit_ranges(resource, namespace);
                    limit_ranger::default_pod(&ranges, &mut new);
                }
            }
            ("scheduling.k8s.io", "priorityclasses") if self.source.admission.priority => {
                let classes = self.cached_classes("scheduling.k8s.io", "priorityclasses");
                if let Some(message) = pod_admission::default_conflict(&new, &classes, false) {
                    return Err(forbidden_object(resource, &new, message));
                }
            }
            _ => {}
        }
        self.optional_plugins_mutate(resource, Some(old), &mut new);
        self.node_restriction(resource, node_restriction::Write::Update(old, &new))?;
        Ok(Prepared {
            current,
            new,
            managers,
            base,
        })
    }

    /// A prepared attempt admitted: the object's own checks, the validating plugins, its
    /// managed fields (see [`Self::update_attempt`]).
    fn update_admitted(
        &self,
        resource: &Resource,
        prepared: Prepared,
    ) -> Result<UpdateAttempt, ApiError> {
        let Prepared {
            current,
            new,
            managers,
            base,
        } = prepared;
        let old = current.body();
        let mut new = self.admit(resource, Some(old), new)?;
        self.pod_warnings(resource, Some(old), &new);
        self.limits_updated(resource, old, &new)?;
        self.pod_security(resource, Some(old), &new)?;
        self.optional_plugins_validate(resource, Some(old), &new)?;
        self.admit_policies(resource, Some(&new), Some(old))?;
        match managers {
            Some(managers) => apply::set_managed_fields(&mut new, &managers),
            None => apply::update_managed_fields(
                &resource.def,
                old,
                &mut new,
                base,
                self.field_writer(custom_schema(resource.custom().as_deref())),
                &self.time,
            ),
        }
        watchkeeper_api::size::check_stored_size(&new)?;
        if same_but_revision(&new, old) {
            return Ok(UpdateAttempt::Unchanged(current));
        }
        Ok(UpdateAttempt::Changed { current, new })
    }

    /// Writes `marked` (an object a DELETE marks instead of removing: a deletionTimestamp,
    /// finalizers, a terminating status) over `current` if it is still the stored one; the
    /// marked object at its new revision (a dry run: at the current one, nothing written), or
    /// `None` after a conflict (counted, and the cache brought to the conflicting revision, so
    /// the caller's next attempt reads it).
    async fn put_marked(
        &self,
        resource: &Resource,
        (namespace, name): (&str, &str),
        current: &Object,
        marked: Value,
    ) -> Result<Option<Value>, ApiError> {
        if self.dry_run {
            return Ok(Some(with_revision(marked, current.resource_version())));
        }
        let key = Bytes::from(resource.store_key(namespace, name));
        let request = TxnRequest::default()
            .when(Compare::ModRevision {
                key: key.clone(),
                revision: current.resource_version(),
            })
            .then(TxnOp::Put {
                key,
                value: stored_value(&resource.stored_form(&marked)),
            });
        let response = self.txn(request).await?;
        if response.succeeded {
            self.settle(resource, response.revision).await;
            return Ok(Some(with_revision(marked, response.revision)));
        }
        self.source
            .counters
            .conflicts
            .fetch_add(1, Ordering::Relaxed);
        self.fresh.wait(resource.cache(), response.revision).await?;
        Ok(None)
    }

    /// DELETE of one object; `true` when it is gone. Objects with finalizers (their own, or
    /// the `orphan` / `foregroundDeletion` one `policy` gives them, see [`gc`]) get a
    /// deletionTimestamp and stay until the finalizers are removed; a DELETE of an object
    /// already being deleted changes only its GC finalizers, as `policy` asks. A namespace
    /// with spec finalizers terminates (the namespace controller deletes what it holds, see
    /// `controllers::namespaces`); one without is deleted at once with everything in it;
    /// `default`, `kube-system` and `kube-public` may not be deleted.
    async fn delete(
        &self,
        resource: &Resource,
        namespace: &str,
        name: &str,
        options: &Value,
        policy: DeletePolicy,
    ) -> Result<(Value, bool), ApiError> {
        if self.source.garbage_collection
            && policy.is_default()
            && (
                resource.def.group.as_str(),
                resource.def.version.as_str(),
                resource.def.plural.as_str(),
            ) == ("batch", "v1", "jobs")
        {
            self.warn(gc::JOB_ORPHAN_WARNING.to_owned());
        }
        if (resource.def.group.as_str(), resource.def.plural.as_str())
            == ("scheduling.k8s.io", "priorityclasses")
            && watchkeeper_api::kinds::SYSTEM_PRIORITY_CLASSES
                .iter()
                .any(|(system, _, _)| *system == name)
        {
            // kube-apiserver's priority class storage, before it looks for the object.
            return Err(ApiError::forbidden(
                &resource.def,
                name,
                "this is a system priority class and cannot be deleted",
            ));
        }
        let cache = resource.cache();
        self.consistent(resource).await?;
        let precondition_uid = options
            .pointer("/preconditions/uid")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let precondition_rv = options
            .pointer("/preconditions/resourceVersion")
            .and_then(Value::as_str)
            .map(|rv| {
                rv.parse::<Revision>().map_err(|_| {
                    ApiError::bad_request(format!("invalid preconditions.resourceVersion {rv:?}"))
                })
            })
            .transpose()?;
        for _ in 0..GUARANTEED_UPDATE_ATTEMPTS {
            let (current, _) = cache.get(&object_key(namespace, name));
            let current = current.ok_or_else(|| ApiError::not_found(&resource.def, name))?;
            let body = current.body();
            if let Some(uid) = &precondition_uid {
                let actual = body
                    .pointer("/metadata/uid")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                if uid != actual {
                    return Err(ApiError::conflict(
                        &resource.def,
                        name,
                        format!(
                            "Precondition failed: UID in precondition: {uid}, UID in object meta: {actual}"
                        ),
                    ));
                }
            }
            if let Some(rv) = precondition_rv
                && rv != current.resource_version()
            {
                return Err(ApiError::conflict(
                    &resource.def,
                    name,
                    format!(
                        "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                        current.resource_version()
                    ),
                ));
            }
            self.node_restriction(resource, node_restriction::Write::Delete(body))?;
            if let Some(message) = plugin_admission::deny_all(&self.source.admission) {
                return Err(forbidden_object(resource, body, message));
            }
            self.admit_policies(resource, None, Some(body))?;
            self.validating_webhooks(resource, None, Some(body)).await?;
            // A CRD's first DELETE only marks it (kube's CRD registry `Delete`): a
            // deletionTimestamp, the cleanup finalizer and the `Terminating` condition; the
            // CRD finalizer (`controllers::crd_finalizer`) deletes its objects, then removes
            // the finalizer, and the CRD goes. The answer is the CRD (200).
            if watchkeeper_api::crd::is_crd(&resource.def)
                && body.pointer("/metadata/deletionTimestamp").is_none()
            {
                let marked = crd_marked_for_deletion(body, &self.time);
                if let Some(marked) = self
                    .put_marked(resource, (namespace, name), &current, marked)
                    .await?
                {
                    return Ok((marked, false));
                }
                continue;
            }
            let gc_finalizers = self
                .source
                .garbage_collection
                .then(|| gc::deletion_finalizers(&resource.def, body, policy))
                .flatten();
            // A pod on a node is deleted gracefully: marked, and left for its kubelet (none
            // here) or a delete with a grace period of 0 (`graceful`'s docs).
            if resource.def.group.is_empty() && resource.def.plural == "pods" {
                match watchkeeper_api::graceful::pod_deletion(body, options, now_unix()) {
                    Graceful::Now => {}
                    Graceful::Pending => return Ok((body.clone(), false)),
                    Graceful::Mark(mut marked) => {
                        if let Some(finalizers) = &gc_finalizers
                            && let Some(metadata) =
                                marked.get_mut("metadata").and_then(Value::as_object_mut)
                        {
                            metadata.insert("finalizers".to_owned(), json!(finalizers));
                        }
                        if let Some(marked) = self
                            .put_marked(resource, (namespace, name), &current, marked)
                            .await?
                        {
                            return Ok((marked, false));
                        }
                        continue;
                    }
                }
            }
            let has_finalizers = match &gc_finalizers {
                Some(finalizers) => !finalizers.is_empty(),
                None => body
                    .pointer("/metadata/finalizers")
                    .and_then(Value::as_array)
                    .is_some_and(|f| !f.is_empty()),
            };
            if is_namespaces(&resource.def) {
                if self.source.admission.namespace_lifecycle && IMMORTAL_NAMESPACES.contains(&name)
                {
                    // kube-apiserver's NamespaceLifecycle admission.
                    return Err(ApiError::forbidden(
                        &resource.def,
                        name,
                        "this namespace may not be deleted",
                    ));
                }
                // A namespace with spec finalizers (`kubernetes`) terminates: it is marked, and
                // the namespace controller deletes what it holds, then removes the finalizer
                // (see `controllers::namespaces`).
                if namespace_finalizers(body) > 0 {
                    if body.pointer("/metadata/deletionTimestamp").is_some() {
                        return Ok((body.clone(), false));
                    }
                    let mut marked = body.clone();
                    if let Some(metadata) =
                        marked.get_mut("metadata").and_then(Value::as_object_mut)
                    {
                        metadata.insert("deletionTimestamp".to_owned(), json!(self.time));
                        metadata.insert("deletionGracePeriodSeconds".to_owned(), json!(0));
                    }
                    marked["status"] = json!({"phase": "Terminating"});
                    if let Some(marked) = self
                        .put_marked(resource, (namespace, name), &current, marked)
                        .await?
                    {
                        return Ok((marked, false));
                    }
                    continue;
                }
                if !self.dry_run {
                    self.delete_namespace_contents(name).await?;
                }
            }
            if watchkeeper_api::crd::is_crd(&resource.def) && !has_finalizers && !self.dry_run {
                self.delete_definition_objects(body).await?;
            }
            let store_key = Bytes::from(resource.store_key(namespace, name));
            let (operation, result) = if has_finalizers {
                let deleting = body.pointer("/metadata/deletionTimestamp").is_some();
                // A pod marked for its grace period, deleted with a period of 0: its period
                // becomes 0 while its finalizers hold it (`graceful::forced`).
                let forced = (resource.def.group.is_empty() && resource.def.plural == "pods")
                    .then(|| watchkeeper_api::graceful::forced(body))
                    .flatten();
                if deleting && gc_finalizers.is_none() && forced.is_none() {
                    return Ok((body.clone(), false));
                }
                let mut marked = forced.unwrap_or_else(|| body.clone());
                if let Some(metadata) = marked.get_mut("metadata").and_then(Value::as_object_mut) {
                    if !deleting {
                        metadata.insert(
                            "deletionTimestamp".to_owned(),
                            Value::String(
                                humantime::format_rfc3339_seconds(std::time::SystemTime::now())
                                    .to_string(),
                            ),
                        );
                        metadata.insert("deletionGracePeriodSeconds".to_owned(), json!(0));
                        // kube-apiserver's `markAsDeleting`: a kind that keeps a generation
                        // counts the deletion as a change of the spec.
                        if let Some(generation) = metadata
                            .get("generation")
                            .and_then(Value::as_i64)
                            .filter(|g| *g > 0)
                        {
                            metadata.insert("generation".to_owned(), json!(generation + 1));
                        }
                    }
                    if let Some(finalizers) = gc_finalizers {
                        metadata.insert("finalizers".to_owned(), json!(finalizers));
                    }
                }
                (
                    TxnOp::Put {
                        key: store_key.clone(),
                        value: stored_value(&resource.stored_form(&marked)),
                    },
                    marked,
                )
            } else {
                (
                    TxnOp::Delete {
                        key: store_key.clone(),
                    },
                    body.clone(),
                )
            };
            if self.dry_run {
                return Ok(if has_finalizers {
                    (with_revision(result, current.resource_version()), false)
                } else {
                    (result, true)
                });
            }
            // A deletion lowers the usage its namespace's quotas show.
            let quotas = if has_finalizers {
                Vec::new()
            } else {
                self.quota_claims(resource, namespace, name, Some(body), None)
                    .await?
            };
            // The deleted Service's IPAddresses go with it (see `service_ips`).
            let released = if has_finalizers {
                Vec::new()
            } else {
                self.released_ip_addresses(resource, body, None).await?
            };
            let mut request = TxnRequest::default()
                .when(Compare::ModRevision {
                    key: store_key,
                    revision: current.resource_version(),
                })
                .then(operation);
            for (compare, put) in released.into_iter().chain(quotas) {
                request = request.when(compare).then(put);
            }
            let response = self.txn(request).await?;
            if response.succeeded {
                self.settle(resource, response.revision).await;
                return Ok(if has_finalizers {
                    (with_revision(result, response.revision), false)
                } else {
                    (result, true)
                });
            }
            self.source
                .counters
                .conflicts
                .fetch_add(1, Ordering::Relaxed);
            self.wait_quota_caches(resource, response.revision).await?;
        }
        Err(ApiError::conflict(
            &resource.def,
            name,
            "too many concurrent updates; please try again",
        ))
    }

    /// Deletes every object in a namespace, across namespaced resources.
    async fn delete_namespace_contents(&self, namespace: &str) -> Result<(), ApiError> {
        // Another version of a stored resource shares its keys: deleted with that resource.
        for resource in self
            .resources
            .iter()
            .filter(|r| r.def.namespaced && r.conversion.is_none())
        {
            let snapshot = resource.cache().latest();
            let prefix = format!("{namespace}/");
            let objects: Vec<Arc<Object>> = snapshot.range(Some(&prefix), None).cloned().collect();
            for object in objects {
                let key = Bytes::from(resource.store_key(namespace, object.name()));
                // A Service's IPAddresses go with it (see `service_ips`), read again should one
                // change first; the last attempt deletes the Service alone (an IPAddress left
                // is an orphan, which the next claim of its address takes over).
                for attempt in 1..=ADDRESS_ATTEMPTS {
                    let released = if attempt < ADDRESS_ATTEMPTS {
                        self.released_ip_addresses(resource, object.body(), None)
                            .await?
                    } else {
                        Vec::new()
                    };
                    let alone = released.is_empty();
                    let mut request =
                        TxnRequest::default().then(TxnOp::Delete { key: key.clone() });
                    for (compare, delete) in released {
                        request = request.when(compare).then(delete);
                    }
                    if self.txn(request).await?.succeeded || alone {
                        break;
                    }
                }
            }
        }
        Ok(())
    }

    /// DELETE of a collection: every object matching the selectors (one page of them when
    /// the request has a `limit`), each deleted as by a DELETE of it (so objects with
    /// finalizers are only marked). Returns the list as it was read before the deletions
    /// (kube-apiserver's `DeleteCollection` answers that list: the objects as listed, the
    /// list's resource version, and its `continue` when limited).
    async fn delete_collection(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        options: &Options,
        policy: DeletePolicy,
    ) -> Result<read::ListPage, ApiError> {
        let page = read::list(
            resource,
            namespace,
            options,
            self.fresh,
            self.source.current_revision(),
        )
        .await
        .map_err(read::ReadError::into_api)?;
        for object in &page.items {
            match self
                .delete(
                    resource,
                    object.namespace(),
                    object.name(),
                    &Value::Null,
                    policy,
                )
                .await
            {
                Ok(_) => {}
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        Ok(page)
    }
}

/// What one attempt of a guaranteed update makes of the cache's object.
enum UpdateAttempt {
    /// The update changes nothing but the revision: the object is the answer.
    Unchanged(Arc<Object>),
    /// `new` replaces `current`.
    Changed { current: Arc<Object>, new: Value },
}

/// An update attempt's object before admission: the current object, the new one, the
/// managed fields the mutation decided (server-side apply) and those it starts from.
struct Prepared {
    current: Arc<Object>,
    new: Value,
    managers: Option<apply::Managers>,
    base: apply::Base,
}

/// What a guaranteed update's `mutate` makes of the current object.
struct Desired {
    /// The object to store.
    object: Value,
    /// Its managed fields, when the mutation decided them (server-side apply).
    managers: Option<apply::Managers>,
    /// Whether the object is already known to decode into its kind (a patch's result), so
    /// the update need not walk the schema again.
    decoded: bool,
}

impl Desired {
    /// `object`, its managed fields to be computed and its decoding to be checked.
    fn unchecked(object: Value) -> Desired {
        Desired {
            object,
            managers: None,
            decoded: false,
        }
    }
}

/// The value stored for an object: its JSON without `metadata.resourceVersion`, in
/// kube-apiserver's field order ([`watchkeeper_core::order`]), written straight from `object`
/// (no copy of it is made; one serialization per write).
fn stored_value(object: &Value) -> Bytes {
    stored_value_sized(object, 0).0
}

/// [`stored_value`] written into a buffer of `capacity` bytes to start with (the expected
/// size, so a large object's text is not copied as the buffer doubles), and where the
/// resource version goes in it (`None` without a metadata map): the cache object decoded from
/// it takes its JSON encoding from these bytes ([`Object::with_json_written`]).
/// The ResourceQuotas of `namespace` in `snapshot` that limit objects of `def`. A quota
/// written or deleted (`name`, when `def` is ResourceQuotas) is not charged for itself:
/// deleted, it goes in the same transaction; written, it counts itself when its status is
/// filled.
fn quotas_limiting(
    snapshot: &watchkeeper_core::Snapshot,
    def: &ResourceDef,
    namespace: &str,
    name: &str,
) -> Vec<Arc<watchkeeper_core::Object>> {
    let (group, plural) = (def.group.as_str(), def.plural.as_str());
    let itself = group.is_empty() && plural == "resourcequotas";
    let prefix = format!("{namespace}/");
    snapshot
        .range(Some(&prefix), None)
        .take_while(|quota| quota.key().starts_with(&prefix))
        .filter(|quota| !(itself && quota.name() == name))
        .filter(|quota| !resource_quota::limits(quota.body(), group, plural).is_empty())
        .cloned()
        .collect()
}

fn stored_value_sized(
    object: &Value,
    capacity: usize,
) -> (Bytes, Option<watchkeeper_core::order::RevisionSlot>) {
    // `serde_json::to_vec`'s first buffer is 128 bytes.
    let mut out = Vec::with_capacity(capacity.max(128));
    let slot = watchkeeper_core::order::write_object_without_revision(&mut out, object);
    (Bytes::from(out), slot)
}

/// `object` without `metadata.resourceVersion`: the value [`stored_value`] serializes.
#[cfg(test)]
fn without_revision(mut object: Value) -> Value {
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.remove("resourceVersion");
    }
    object
}

/// What a write answers with.
#[derive(Debug)]
enum Written {
    /// An object, encoded for the answer.
    Value(Value),
    /// An object as the cache holds it: its cached encoding (shared with every watcher and
    /// reader) is the answer.
    Cached(Arc<Object>),
}

impl Written {
    /// The answer: the object in kube-apiserver's order and framing
    /// ([`watchkeeper_api::object_body`]); a cached object's shared encoding and the newline,
    /// which are exactly that text, without a copy.
    /// [`Self::respond`], in place with the runtime worker handed on when a cached object's
    /// stored length makes its encoding heavy (see `crate::offload`).
    async fn answer(self, code: StatusCode, resource: &Resource, writer: &Writer<'_>) -> Response {
        let size = match &self {
            Written::Cached(object) if !object.is_encoded(watchkeeper_core::Encoding::Json) => {
                object.size_hint()
            }
            _ => 0,
        };
        writer
            .source
            .offload
            .in_place(size, || self.respond(code, resource))
            .await
    }

    fn respond(self, code: StatusCode, resource: &Resource) -> Response {
        match self {
            Written::Cached(object) if !is_status(object.body()) => {
                let encoded = object
                    .encoded(
                        watchkeeper_core::Encoding::Json,
                        &resource.cache().metrics().encode,
                    )
                    .clone();
                json_response(
                    code,
                    crate::respond::pieces([encoded, Bytes::from_static(b"\n")]),
                )
            }
            Written::Cached(object) => {
                json_response(code, watchkeeper_api::object_body(object.body()))
            }
            Written::Value(object) if !is_status(&object) => json_response(
                code,
                watchkeeper_api::object_body(&resource.answered_form(object)),
            ),
            Written::Value(object) => json_response(code, watchkeeper_api::object_body(&object)),
        }
    }
}

/// Whether [`watchkeeper_api::object_body`] writes `object` as a `Status`.
fn is_status(object: &Value) -> bool {
    object.get("kind").and_then(Value::as_str) == Some("Status")
}

/// A guaranteed update's object while its transaction runs.
enum Pending {
    /// Kept by the writer.
    Kept(Value),
    /// Offered to the reflector (see [`Handover`]).
    Offered(Offer),
}

impl Pending {
    /// The object written at `revision`.
    fn at(self, revision: Revision) -> Written {
        match self {
            Pending::Kept(object) => Written::Value(with_revision(object, revision)),
            Pending::Offered(offer) => match offer.outcome(revision) {
                Outcome::Cached(object) => Written::Cached(object),
                Outcome::Value(object) => Written::Value(object),
            },
        }
    }
}

/// Whether the cache object the reflector decodes from the stored value of `object` (the
/// prepared object of a write at `namespace/name` of `resource`, with its managed fields) is
/// `object` itself at the written revision, so that its cached encoding can be the answer:
/// the resource is stored as served (no conversion), and decoding changes nothing —
/// `apiVersion` and `kind` are there (and the kind is not `Status`, which answers are
/// written differently), `metadata` is a map naming the key's name and namespace (none for a
/// cluster-scoped resource).
fn answers_from_cache(resource: &Resource, namespace: &str, name: &str, object: &Value) -> bool {
    resource.conversion.is_none() && decodes_unchanged(&resource.def, namespace, name, object)
}

/// The part of [`answers_from_cache`] that reads the object.
fn decodes_unchanged(def: &ResourceDef, namespace: &str, name: &str, object: &Value) -> bool {
    let identity = Identity::Key {
        namespace,
        name,
        revision: 0,
    };
    def.namespaced != namespace.is_empty()
        && !is_status(object)
        && decodes_as_is(def, object, identity)
}

/// Whether two objects differ at most in `metadata.resourceVersion` (a no-op write), as
/// comparing copies without it would say, without copying them.
fn same_but_revision(a: &Value, b: &Value) -> bool {
    let (Value::Object(a), Value::Object(b)) = (a, b) else {
        return a == b;
    };
    a.len() == b.len()
        && a.iter().all(|(key, value)| match (b.get(key), value) {
            (Some(Value::Object(other)), Value::Object(mine)) if key == "metadata" => {
                let entries = |map: &Map<String, Value>| {
                    map.len() - usize::from(map.contains_key("resourceVersion"))
                };
                entries(mine) == entries(other)
                    && mine
                        .iter()
                        .filter(|(key, _)| *key != "resourceVersion")
                        .all(|(key, value)| other.get(key) == Some(value))
            }
            (other, _) => other == Some(value),
        })
}

/// kube's 403 for `object` of `resource`: `pods "p" is forbidden: <message>`.
fn forbidden_object(resource: &Resource, object: &Value, message: String) -> ApiError {
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    ApiError::forbidden(&resource.def, name, message)
}

/// Five random lowercase alphanumerics for `generateName`.
fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    (0..5)
        .map(|_| ALPHABET[rand::random_range(0..ALPHABET.len())] as char)
        .collect()
}

/// A protobuf body decoded to JSON bytes for `def` (so create, update and delete read JSON
/// whatever the client sent); other bodies unchanged.
fn protobuf_to_json(
    def: &ResourceDef,
    headers: &HeaderMap,
    body: Bytes,
) -> Result<Bytes, ApiError> {
    let protobuf = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(watchkeeper_api::is_protobuf_media_type);
    if !protobuf || body.is_empty() {
        return Ok(body);
    }
    let value = watchkeeper_api::decode_protobuf(def, &body)?;
    let json = Bytes::from(value.to_string());
    // The audit log keeps the decoded body (it cannot log protobuf).
    crate::audit::context::request_body(&json);
    Ok(json)
}

/// The `dryRun` values of a DELETE body's `DeleteOptions` (none when the body is empty or not
/// a JSON object; the delete path reports a bad body itself).
fn delete_options_dry_run(body: &Bytes) -> Vec<String> {
    serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|options| match options.get("dryRun") {
            Some(Value::Array(values)) => Some(
                values
                    .iter()
                    .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
                    .collect(),
            ),
            _ => None,
        })
        .unwrap_or_default()
}

/// A DELETE's body read as kube-apiserver's handlers decode it into `DeleteOptions`
/// (`endpoints/handlers/delete.go`); every refusal there is an error that is not a Status,
/// which kube answers 500 with the error's text (`ErrorToAPIStatus`): a body of another
/// kind decodes into that kind (`decoded object cannot be converted to DeleteOptions`; for
/// a single object the options' own scheme knows only the meta kinds: `no kind "Pod" is
/// registered ...`), a field of the wrong JSON type is Go's `json: cannot unmarshal ...`, and
/// a body Go's `encoding/json` does not read is its `couldn't get version/kind; json parse
/// error: ...` ([`watchkeeper_api::go_json::decode`]). (kube-apiserver answers these 400 from
/// v1.35, kubernetes#133358; v1.33's handler answers the error as it is.)
/// The DeleteOptions a DELETE without a body carries in its query, as far as the store reads
/// them here: `gracePeriodSeconds` (already checked to parse by `DeletePolicy::from_query`).
fn grace_period_of_query(query: Option<&str>) -> Value {
    query
        .into_iter()
        .flat_map(|q| q.split('&'))
        .filter_map(|pair| pair.strip_prefix("gracePeriodSeconds="))
        .find_map(|value| value.parse::<i64>().ok())
        .map_or(Value::Null, |period| json!({"gracePeriodSeconds": period}))
}

fn delete_options(body: &Bytes, collection: bool) -> Result<Value, ApiError> {
    let options =
        watchkeeper_api::go_json::decode(body).map_err(|cause| ApiError::new(500, "", cause))?;
    let unknown = |message: String| ApiError::new(500, "", message);
    let kind = options.get("kind").and_then(Value::as_str).unwrap_or("");
    if !kind.is_empty() && kind != "DeleteOptions" {
        // The meta kinds the options' scheme (meta internal version) registers.
        const META_KINDS: [&str; 13] = [
            "ListOptions",
            "GetOptions",
            "CreateOptions",
            "UpdateOptions",
            "PatchOptions",
            "Status",
            "WatchEvent",
            "APIVersions",
            "APIGroupList",
            "APIGroup",
            "APIResourceList",
            "Table",
            "PartialObjectMetadata",
        ];
        if collection || META_KINDS.contains(&kind) {
            return Err(unknown(
                "decoded object cannot be converted to DeleteOptions".to_owned(),
            ));
        }
        let version = options
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("");
        return Err(unknown(format!(
            "no kind {kind:?} is registered for version {version:?} in scheme \"k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme/register.go:27\""
        )));
    }
    // Go's text for a value of the wrong JSON type.
    let json_type = |value: &Value| match value {
        Value::String(_) => "string".to_owned(),
        Value::Number(n) => format!("number {n}"),
        Value::Bool(_) => "bool".to_owned(),
        Value::Array(_) => "array".to_owned(),
        Value::Object(_) => "object".to_owned(),
        Value::Null => "null".to_owned(),
    };
    let mismatch = |value: &Value, field: &str, go_type: &str| {
        let value = match value {
            Value::Number(_) => "number".to_owned(),
            other => json_type(other),
        };
        unknown(format!(
            "json: cannot unmarshal {value} into Go struct field DeleteOptions.{field} of type {go_type}"
        ))
    };
    let Some(map) = options.as_object() else {
        return Ok(options);
    };
    for (field, value) in map {
        if value.is_null() {
            continue;
        }
        match field.as_str() {
            "gracePeriodSeconds" => match value {
                Value::Number(n) if n.as_i64().is_some() => {}
                Value::Number(n) => {
                    return Err(unknown(format!(
                        "json: cannot unmarshal number {n} into Go struct field DeleteOptions.gracePeriodSeconds of type int64"
                    )));
                }
                other => return Err(mismatch(other, field, "int64")),
            },
            "orphanDependents" if !value.is_boolean() => {
                return Err(mismatch(value, field, "bool"));
            }
            "propagationPolicy" if !value.is_string() => {
                return Err(mismatch(value, field, "v1.DeletionPropagation"));
            }
            "dryRun" => match value {
                Value::Array(values) => {
                    if let Some(bad) = values.iter().find(|v| !v.is_string() && !v.is_null()) {
                        return Err(mismatch(bad, field, "string"));
                    }
                }
                other => return Err(mismatch(other, field, "[]string")),
            },
            "preconditions" => match value {
                Value::Object(preconditions) => {
                    for (key, value) in preconditions {
                        if (key == "uid" || key == "resourceVersion")
                            && !value.is_string()
                            && !value.is_null()
                        {
                            let go_type = if key == "uid" { "types.UID" } else { "string" };
                            return Err(mismatch(value, &format!("preconditions.{key}"), go_type));
                        }
                    }
                }
                other => return Err(mismatch(other, field, "v1.Preconditions")),
            },
            _ => {}
        }
    }
    Ok(options)
}

/// A create or update body as the object it holds, refused in kube-apiserver's words
/// ([`watchkeeper_api::go_json`]).
fn decode_object(resource: &Resource, body: &Bytes) -> Result<Value, ApiError> {
    let def = &resource.def;
    if def.is_builtin() {
        watchkeeper_api::schema::decode_body(def, body)
    } else {
        // A custom resource's numbers as kube holds them once stored (`1.0` is 1).
        watchkeeper_api::go_json::decode_custom_object(&def.kind, &def.version, body)
    }
}

/// A custom resource's structural schema (`None` for built-in kinds and custom resources
/// without one).
fn custom_schema(custom: Option<&watchkeeper_api::crd::CustomResource>) -> Option<&Value> {
    custom.and_then(|custom| custom.schema.as_deref())
}

fn patch_type(headers: &HeaderMap) -> Result<PatchType, ApiError> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let media_type = content_type.split(';').next().unwrap_or_default().trim();
    PatchType::from_content_type(media_type).ok_or_else(|| {
        ApiError::unsupported_media_type(format!(
            "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json (got {content_type:?})"
        ))
    })
}

/// The store's side of a reflection: every feed under the registry prefix.
#[derive(Debug)]
pub struct StoreLister {
    source: StoreSource,
    /// The registry prefix with a trailing slash (`/registry/`).
    prefix: String,
}

/// An open store watch, routed to the feeds.
pub struct StoreEvents {
    watch: Watch,
    router: Router,
    /// Large values are decoded with the runtime worker handed on (see `crate::offload`).
    offload: Arc<crate::offload::Offload>,
}

/// Routes keys to feeds and decodes values.
#[derive(Clone)]
struct Router {
    prefix: String,
    routes: Arc<Vec<(String, bool)>>,
    defs: Arc<Vec<ResourceDef>>,
    /// Each feed's read schema ([`Feed::read_schema`]).
    schemas: Arc<Vec<Option<Arc<Value>>>>,
    /// The feeds whose objects keep the version they were stored at ([`Feed::as_stored`]).
    as_stored: Arc<Vec<bool>>,
    status: Arc<ReflectorStatus>,
    /// The writes' offers, for a watch's puts (lists decode what they read).
    handover: Option<Arc<Handover>>,
}

impl Router {
    /// Which feed a key belongs to, and the object's namespace and name.
    fn route<'k>(&self, key: &'k str) -> Option<(usize, &'k str, &'k str)> {
        let rest = key.strip_prefix(&self.prefix)?;
        let (index, (storage_prefix, namespaced)) = self
            .routes
            .iter()
            .enumerate()
            .filter(|(_, (p, _))| rest.starts_with(p.as_str()))
            .max_by_key(|(_, (p, _))| p.len())?;
        let rest = &rest[storage_prefix.len()..];
        if *namespaced {
            let (namespace, name) = rest.split_once('/')?;
            (!namespace.is_empty() && !name.is_empty() && !name.contains('/'))
                .then_some((index, namespace, name))
        } else {
            (!rest.is_empty() && !rest.contains('/')).then_some((index, "", rest))
        }
    }

    fn decode_put(&self, index: usize, namespace: &str, name: &str, kv: &KeyValue) -> Change {
        let identity = Identity::Key {
            namespace,
            name,
            revision: kv.mod_revision,
        };
        let handed_over = self.handover.as_ref().and_then(|handover| {
            handover.take(&kv.key, &kv.value, |body, slot| {
                decode_written(&self.defs[index], body, identity, &kv.value, slot)
            })
        });
        let decoded = match handed_over {
            Some(decoded) => {
                self.status.handovers.fetch_add(1, Ordering::Relaxed);
                decoded
            }
            None if self.as_stored.get(index).copied().unwrap_or(false) => {
                self.status.decodes.fetch_add(1, Ordering::Relaxed);
                crate::source::decode::decode_stored_as_stored(
                    &self.defs[index],
                    namespace,
                    name,
                    kv.mod_revision,
                    &kv.value,
                )
            }
            None => {
                self.status.decodes.fetch_add(1, Ordering::Relaxed);
                decode_stored(
                    &self.defs[index],
                    self.schemas[index].as_deref(),
                    namespace,
                    name,
                    kv.mod_revision,
                    &kv.value,
                )
            }
        };
        match decoded {
            Ok(object) => Change::put(object),
            Err(error) => {
                self.status.decode_errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(
                    key = %String::from_utf8_lossy(&kv.key),
                    %error,
                    "store value is not a JSON object; treating the key as absent"
                );
                Change::delete(object_key(namespace, name))
            }
        }
    }
}

impl Router {
    /// The objects of feed `index` at exactly `revision`: its prefix read a page at a time at
    /// that revision, each key routed (a key of a resource with a longer prefix is not this
    /// feed's) and decoded as the reflector decodes it.
    async fn objects_at(
        &self,
        source: &StoreSource,
        index: usize,
        revision: Revision,
    ) -> Result<Vec<Arc<Object>>, RangeError> {
        let prefix = Bytes::from(format!("{}{}", self.prefix, self.routes[index].0));
        let mut objects = Vec::new();
        let mut start: Option<Bytes> = None;
        loop {
            let mut request = RangeRequest::prefix(prefix.clone())
                .with_limit(source.list_page)
                .at_revision(revision);
            if let Some(key) = start.take() {
                request = request.starting(StartKey::Exclusive(key));
            }
            let page = source.store.range(request).await?;
            for kv in &page.kvs {
                let key = String::from_utf8_lossy(&kv.key);
                // Versions of one resource share its storage prefix: a key is this feed's
                // when it routes to that prefix (to whichever of them), and is decoded as
                // this feed's.
                if let Some((feed, namespace, name)) = self.route(&key)
                    && self.routes[feed].0 == self.routes[index].0
                    && let Change {
                        object: Some(object),
                        ..
                    } = self.decode_put(index, namespace, name, kv)
                {
                    objects.push(object);
                }
            }
            match (page.more, page.kvs.last()) {
                (true, Some(last)) => start = Some(last.key.clone()),
                _ => break,
            }
        }
        Ok(objects)
    }
}

impl StoreSource {
    /// The objects of `resources[index]` in the store at exactly `revision`, read and decoded
    /// as the reflector does (for the consistency checker; its decodes are not counted as the
    /// reflector's).
    ///
    /// # Errors
    /// The store cannot be read at `revision` (compacted, unavailable).
    pub async fn objects_at(
        &self,
        resources: &[Arc<Resource>],
        index: usize,
        revision: Revision,
    ) -> Result<Vec<Arc<Object>>, RangeError> {
        let registry = format!("{}/", self.prefix);
        let router = Router {
            routes: Arc::new(
                resources
                    .iter()
                    .map(|r| {
                        let storage = r.key_prefix.strip_prefix(&registry).unwrap_or_default();
                        (storage.to_owned(), r.def.namespaced)
                    })
                    .collect(),
            ),
            defs: Arc::new(resources.iter().map(|r| r.def.clone()).collect()),
            schemas: Arc::new(
                resources
                    .iter()
                    .map(|r| {
                        // A view (another version) reads its storage version's objects.
                        let custom = if r.conversion.is_some() {
                            resources
                                .iter()
                                .find(|s| s.conversion.is_none() && s.name() == r.name())
                                .and_then(|s| s.custom())
                        } else {
                            r.custom()
                        };
                        custom.and_then(|c| c.schema.clone())
                    })
                    .collect(),
            ),
            as_stored: Arc::new(Vec::new()),
            status: Arc::new(ReflectorStatus::default()),
            prefix: registry,
            handover: None,
        };
        router.objects_at(self, index, revision).await
    }
}

impl StoreLister {
    /// The objects of feed `index` at exactly `revision` (a relist of that feed alone).
    ///
    /// # Errors
    /// [`Stop::Restart`] when the store cannot be read at `revision`.
    pub async fn list_feed(
        &self,
        feeds: &[Feed],
        index: usize,
        revision: Revision,
    ) -> Result<Vec<Arc<Object>>, Stop> {
        self.router(feeds)
            .objects_at(&self.source, index, revision)
            .await
            .map_err(|e| Stop::Restart(e.to_string()))
    }

    /// The reflection of `source` (its feeds, which may change between a watch and the
    /// next, are given to each list and watch).
    #[must_use]
    pub fn new(source: &StoreSource) -> StoreLister {
        StoreLister {
            source: source.clone(),
            prefix: format!("{}/", source.prefix),
        }
    }

    /// Routes keys to `feeds` by their storage prefixes and scopes.
    fn router(&self, feeds: &[Feed]) -> Router {
        Router {
            prefix: self.prefix.clone(),
            routes: Arc::new(
                feeds
                    .iter()
                    .map(|f| (f.storage_prefix.clone(), f.def.namespaced))
                    .collect(),
            ),
            defs: Arc::new(feeds.iter().map(|f| f.def.clone()).collect()),
            schemas: Arc::new(feeds.iter().map(|f| f.read_schema.clone()).collect()),
            as_stored: Arc::new(feeds.iter().map(|f| f.as_stored).collect()),
            status: self.source.status.clone(),
            handover: None,
        }
    }

    /// Lists everything under the prefix at one revision, a page at a time: the current one,
    /// or, for the first list with history rebuilding ([`StoreSource::with_history_rebuild`]),
    /// the revision `window` before it (the store's compaction floor if that is later), with
    /// [`Listed::ready_at`] the current one.
    ///
    /// # Errors
    /// [`Stop::Restart`] when the store cannot be read.
    pub async fn list(&self, feeds: &[Feed], first: bool) -> Result<Listed, Stop> {
        let Some(window) = self.source.rebuild_window.filter(|_| first) else {
            return self
                .list_at(feeds, None)
                .await
                .map_err(|e| Stop::Restart(e.to_string()));
        };
        // Over etcd the target is a nudge's revision: the replay ends at an event of its own
        // watch even when the store's revision moved on outside the prefix.
        let current = match &self.source.nudge {
            Some(nudge) => nudge.now().await.map_err(Stop::Restart)?,
            None => self
                .source
                .store
                .current_revision()
                .await
                .map_err(|e| Stop::Restart(e.to_string()))?,
        };
        let start = current.saturating_sub(window).max(1);
        let listed = match self.list_at(feeds, Some(start)).await {
            Err(RangeError::Compacted {
                compact_revision, ..
            }) => self.list_at(feeds, Some(compact_revision)).await,
            other => other,
        };
        let mut listed = listed.map_err(|e| Stop::Restart(e.to_string()))?;
        listed.ready_at = current.max(listed.revision);
        tracing::info!(
            from = listed.revision,
            to = listed.ready_at,
            "rebuilding the caches' history from the store"
        );
        Ok(listed)
    }

    /// Lists everything under the prefix at `at` (`None`: the current revision).
    async fn list_at(&self, feeds: &[Feed], at: Option<Revision>) -> Result<Listed, RangeError> {
        let router = self.router(feeds);
        let mut per_feed: Vec<Vec<Arc<Object>>> = vec![Vec::new(); feeds.len()];
        let mut revision = at.unwrap_or(0);
        let mut start: Option<Bytes> = None;
        let mut loaded = 0usize;
        loop {
            let mut request = RangeRequest::prefix(Bytes::from(self.prefix.clone()))
                .with_limit(self.source.list_page);
            if revision != 0 {
                request = request.at_revision(revision);
            }
            if let Some(key) = start.take() {
                request = request.starting(StartKey::Exclusive(key));
            }
            let page = self.source.store.range(request).await?;
            revision = page.revision;
            for kv in &page.kvs {
                let key = String::from_utf8_lossy(&kv.key);
                if let Some((index, namespace, name)) = router.route(&key)
                    && let Change {
                        object: Some(object),
                        ..
                    } = router.decode_put(index, namespace, name, kv)
                {
                    per_feed[index].push(object);
                }
            }
            loaded += page.kvs.len();
            if loaded > 0 && loaded % 100_000 < self.source.list_page {
                tracing::info!(loaded, revision, "loading the store");
            }
            match (page.more, page.kvs.last()) {
                (true, Some(last)) => start = Some(last.key.clone()),
                _ => break,
            }
        }
        Ok(Listed {
            revision,
            objects: per_feed,
            ready_at: revision,
        })
    }

    /// Watches the whole prefix after `after`.
    pub async fn watch(&self, feeds: &[Feed], after: Revision) -> Result<StoreEvents, Stop> {
        let watch = self
            .source
            .store
            .watch(
                KeySelector::Prefix(Bytes::from(self.prefix.clone())),
                after + 1,
            )
            .await
            .map_err(|e| Stop::Restart(e.to_string()))?;
        Ok(StoreEvents {
            watch,
            router: Router {
                handover: Some(self.source.handover.clone()),
                ..self.router(feeds)
            },
            offload: self.source.offload.clone(),
        })
    }

    /// Records the newest store revision seen.
    pub fn observed(&self, revision: Revision) {
        self.source
            .status
            .store_revision
            .fetch_max(revision, Ordering::Relaxed);
    }
}

impl StoreEvents {
    /// The next revision, progress notification or end of the watch.
    pub async fn next(&mut self) -> Item {
        match self.watch.next().await {
            Some(WatchItem::Revision { revision, events }) => {
                let mut changes: BTreeMap<usize, Vec<Change>> = BTreeMap::new();
                for event in &events {
                    let key = String::from_utf8_lossy(&event.kv.key);
                    let Some((index, namespace, name)) = self.router.route(&key) else {
                        continue;
                    };
                    let change = match event.kind {
                        EventKind::Put => {
                            let router = &self.router;
                            self.offload.hand_on(event.kv.value.len(), || {
                                router.decode_put(index, namespace, name, &event.kv)
                            })
                        }
                        EventKind::Delete => Change::delete(object_key(namespace, name)),
                    };
                    changes.entry(index).or_default().push(change);
                }
                Item::Changes(revision, changes)
            }
            Some(WatchItem::Progress { revision }) => Item::Progress(revision),
            Some(WatchItem::Compacted {
                requested,
                compact_revision,
            }) => Item::Stopped(Stop::Relist(format!(
                "the store compacted past the cache (requested {requested}, compacted to {compact_revision})"
            ))),
            Some(WatchItem::Failed(error)) => {
                Item::Stopped(Stop::Restart(format!("the store watch failed: {error}")))
            }
            None => Item::Stopped(Stop::Restart("the store watch ended".to_owned())),
        }
    }
}

/// A Service claim reads the records of the values it looks at from the store, one key each.
impl service_ips::Records for AnyStore {
    type Error = ApiError;

    async fn read(&self, key: Bytes) -> Result<Option<KeyValue>, ApiError> {
        let found = self
            .range(RangeRequest::key(key.clone()))
            .await
            .map_err(store_error)?;
        Ok(found.kvs.into_iter().find(|kv| kv.key == key))
    }
}

/// kube-apiserver's refusal of an asked cluster IP (`allocIPs`): 422 on `spec.clusterIPs`.
fn ip_refusal(
    resource: &Resource,
    service: &Value,
    ips: &ServiceIps,
    ip: &str,
    why: Refused,
) -> ApiError {
    let why = if why == Refused::NotInRange {
        format!(
            "the provided IP ({ip}) is not in the valid range. The range of valid IPs is {}",
            ips.range()
        )
    } else {
        "provided IP is already allocated".to_owned()
    };
    let listed = service
        .pointer("/spec/clusterIPs")
        .and_then(Value::as_array)
        .map(|ips| {
            ips.iter()
                .map(|ip| ip.as_str().unwrap_or_default().to_owned())
                .collect::<Vec<_>>()
        });
    let cause = (
        "spec.clusterIPs".to_owned(),
        format!(
            "Invalid value: {}: failed to allocate IP {ip}: {why}",
            service_ips::go_strings(listed.as_deref())
        ),
        "FieldValueInvalid".to_owned(),
    );
    ApiError::invalid(&resource.def, service_name(service), vec![cause])
}

/// kube-apiserver's refusal of a node port (`initNodePorts`, `allocHealthCheckNodePort`): 422
/// on an asked port's `nodePort`, 500 for a health check node port or a full range.
fn port_refusal(
    resource: &Resource,
    service: &Value,
    node_ports: &NodePorts,
    slot: service_ips::Slot,
    port: u64,
    why: Refused,
) -> ApiError {
    let why = match why {
        Refused::NotInRange => format!(
            "provided port is not in the valid range. The range of valid ports is {}",
            node_ports.describe()
        ),
        Refused::Full => "range is full".to_owned(),
        _ => "provided port is already allocated".to_owned(),
    };
    match slot {
        // kube-apiserver answers a health check node port it can not give with an internal
        // error.
        service_ips::Slot::Health if port == 0 => ApiError::internal(format!(
            "failed to allocate a HealthCheck NodePort 0: {why}"
        )),
        service_ips::Slot::Health => ApiError::internal(format!(
            "failed to allocate requested HealthCheck NodePort {port}: {why}"
        )),
        service_ips::Slot::Port(_) if port == 0 => {
            ApiError::internal(format!("failed to allocate a nodePort: {why}"))
        }
        service_ips::Slot::Port(index) => {
            let cause = (
                format!("spec.ports[{index}].nodePort"),
                format!("Invalid value: {port}: {why}"),
                "FieldValueInvalid".to_owned(),
            );
            ApiError::invalid(&resource.def, service_name(service), vec![cause])
        }
    }
}

fn service_name(service: &Value) -> &str {
    service
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::decode::{decode, decode_sized};

    /// The object without its resource version (what is stored).
    fn strip_revision(object: &Value) -> Value {
        let mut object = object.clone();
        if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            metadata.remove("resourceVersion");
        }
        object
    }

    #[test]
    fn store_errors_map_by_variant() {
        let unavailable = store_error(RangeError::Backend(BackendError::Unavailable(
            "etcd: connection refused".to_owned(),
        )));
        assert_eq!(
            (unavailable.code, unavailable.reason.as_str()),
            (503, "ServiceUnavailable")
        );
        let storage = store_error(TxnError::Backend(BackendError::Storage(
            "corrupt page".to_owned(),
        )));
        assert_eq!(
            (storage.code, storage.reason.as_str()),
            (500, "InternalError")
        );
        let too_large = store_error(TxnError::Backend(BackendError::Storage(
            "etcd: etcdserver: request is too large".to_owned(),
        )));
        assert_eq!(
            (too_large.code, too_large.reason.as_str()),
            (413, "RequestEntityTooLarge")
        );
        let too_many = store_error(TxnError::Backend(BackendError::Storage(
            "etcd: etcdserver: too many operations in txn request".to_owned(),
        )));
        assert_eq!(
            (too_many.code, too_many.reason.as_str()),
            (413, "RequestEntityTooLarge")
        );
        assert!(
            too_many.message.contains("--max-txn-ops"),
            "{}",
            too_many.message
        );
        let duplicate = store_error(TxnError::DuplicateKey(Bytes::from_static(b"/registry/x")));
        assert_eq!(duplicate.code, 500);
        // kube-apiserver over a full etcd: 500, no reason, etcd's error text.
        let full = store_error(TxnError::NoSpace);
        assert_eq!(
            full.to_status(),
            serde_json::json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                "status": "Failure", "message": "etcdserver: mvcc: database space exceeded",
                "code": 500})
        );
    }

    /// The no-op check says what comparing copies without the resource version says.
    #[test]
    fn a_no_op_write_is_one_that_changes_only_the_resource_version() {
        let objects = [
            json!({"metadata": {"name": "a", "resourceVersion": "1"}, "data": {"k": "v"}}),
            json!({"metadata": {"name": "a", "resourceVersion": "2"}, "data": {"k": "v"}}),
            json!({"metadata": {"name": "a"}, "data": {"k": "v"}}),
            json!({"data": {"k": "v"}, "metadata": {"resourceVersion": "1", "name": "a"}}),
            json!({"metadata": {"name": "a", "resourceVersion": "1"}, "data": {"k": "w"}}),
            json!({"metadata": {"name": "b", "resourceVersion": "1"}, "data": {"k": "v"}}),
            json!({"metadata": {"resourceVersion": "1"}, "data": {"k": "v"}}),
            json!({"metadata": {"name": "a", "uid": "1"}, "data": {"k": "v"}}),
            json!({"metadata": "x", "data": {"k": "v"}}),
            json!({"data": {"k": "v"}}),
            json!("x"),
        ];
        for a in &objects {
            for b in &objects {
                assert_eq!(
                    same_but_revision(a, b),
                    strip_revision(a) == strip_revision(b),
                    "{a} vs {b}"
                );
            }
        }
    }

    /// Objects a write may store: floats (which must round-trip), escapes, deep nesting,
    /// odd metadata.
    fn written_objects() -> Vec<Value> {
        vec![
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "ns", "resourceVersion": "7", "labels": {"x": "y"}, "managedFields": [{"manager": "m", "operation": "Update", "fieldsV1": {"f:data": {"f:k": {}}}}]}, "data": {"k": "v\u{e9}\"q\\\n\u{1}", "empty": ""}}),
            json!({"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "a", "namespace": "ns"}, "spec": {"ratio": 0.1, "tiny": 5e-324, "huge": 1.797_693_134_862_315_7e308, "third": 1.0 / 3.0, "negative": -2.5e-7, "zero": -0.0, "int": 1.0, "big": u64::MAX, "small": i64::MIN, "list": [1, 2.5, null, true, "s", {"deep": [[{"x": 0.30000000000000004}]]}]}}),
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a", "resourceVersion": "1"}, "spec": {"finalizers": ["kubernetes"]}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "other"}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b", "namespace": "ns"}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}),
            json!({"apiVersion": "v1", "metadata": {"name": "a", "namespace": "ns"}}),
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {"name": "a", "namespace": "ns"}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": 1, "namespace": "ns"}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": "x"}),
            json!({"metadata": {"name": "a", "namespace": "ns"}}),
            json!({}),
            json!("x"),
        ]
    }

    fn def(plural: &str) -> ResourceDef {
        watchkeeper_api::builtin_resources()
            .into_iter()
            .find(|d| d.plural == plural)
            .unwrap()
    }

    /// What the writer hands over (the object, with the resource version it was read at) is
    /// but for that version what parsing the stored bytes gives, whatever the object, once
    /// its numbers are as a body read by kube's rules holds them (`go_json::ReadBack`: `1.0`
    /// is 1, `-0.0` 0, `u64::MAX` a float; the stored bytes are written the same way):
    /// serializing and parsing round-trips (sorted maps, `float_roundtrip`). So a cache
    /// object decoded from it (the version replaced) is the one decoded from the bytes.
    #[test]
    fn handed_over_values_are_the_stored_bytes_parsed() {
        let configmaps = def("configmaps");
        for object in written_objects() {
            let object =
                watchkeeper_api::go_json::parse_read_back(&serde_json::to_vec(&object).unwrap())
                    .unwrap();
            let bytes = stored_value(&object);
            let parsed: Value = serde_json::from_slice(&bytes).unwrap();
            let handed = without_revision(object.clone());
            assert_eq!(parsed, handed, "{object}");
            for capacity in [0, 1, 64, bytes.len(), 100_000] {
                assert_eq!(stored_value_sized(&object, capacity).0, bytes, "{object}");
            }
            let identity = Identity::Key {
                namespace: "ns",
                name: "a",
                revision: 12,
            };
            match (
                decode(&configmaps, object.clone(), identity),
                decode_stored(&configmaps, None, "ns", "a", 12, &bytes),
            ) {
                (Ok(from_value), Ok(from_bytes)) => {
                    assert_eq!(from_value.body(), from_bytes.body(), "{object}");
                    assert_eq!(from_value.key(), from_bytes.key());
                    assert_eq!(from_value.labels(), from_bytes.labels());
                    assert_eq!(from_value.fields(), from_bytes.fields());
                    assert_eq!(from_value.resource_version(), 12);
                }
                (Err(_), Err(_)) => {}
                (a, b) => panic!("{object}: {a:?} vs {b:?}"),
            }
        }
    }

    /// When the writer answers from the cache object decoded from what it handed over, the
    /// answer is byte for byte what encoding its own object at the written revision gives.
    #[test]
    fn answers_from_the_cache_are_the_written_objects() {
        let stats = watchkeeper_core::EncodeStats::default();
        let mut answered = 0;
        for def in [def("configmaps"), def("namespaces")] {
            for object in written_objects() {
                let namespace = if def.namespaced { "ns" } else { "" };
                if !decodes_unchanged(&def, namespace, "a", &object) {
                    continue;
                }
                answered += 1;
                let identity = Identity::Key {
                    namespace,
                    name: "a",
                    revision: 31,
                };
                let expected = watchkeeper_api::object_body(&with_revision(object.clone(), 31));
                // As the reflector decodes a handed-over value: told the stored value's size,
                // and its encoding made from the stored value.
                let (stored, slot) = stored_value_sized(&object, 0);
                let written =
                    decode_written(&def, object.clone(), identity, &stored, slot.as_ref()).unwrap();
                assert!(written.is_encoded(watchkeeper_core::Encoding::Json));
                for cached in [
                    decode(&def, without_revision(object.clone()), identity).unwrap(),
                    decode_sized(
                        &def,
                        without_revision(object.clone()),
                        identity,
                        stored.len(),
                    )
                    .unwrap(),
                    written,
                ] {
                    let mut answer = cached
                        .encoded(watchkeeper_core::Encoding::Json, &stats)
                        .to_vec();
                    answer.push(b'\n');
                    assert_eq!(String::from_utf8(answer).unwrap(), expected, "{object}");
                }
            }
        }
        assert_eq!(answered, 4, "the objects cover both outcomes");
    }

    /// The stored value is byte for byte what copying the object without its resource
    /// version and writing the copy in kube-apiserver's order writes.
    #[test]
    fn stored_values_leave_out_the_resource_version_without_a_copy() {
        let objects = [
            json!({"metadata": {"name": "a", "resourceVersion": "7", "labels": {"x": "y"}}, "data": {"k": "v\u{e9}\"q"}}),
            json!({"apiVersion": "v1", "metadata": {"resourceVersion": "1"}, "spec": [1, 2.5, null, true]}),
            json!({"metadata": {"name": "no-revision"}, "kind": "ConfigMap"}),
            json!({"metadata": "not an object", "data": {"resourceVersion": "kept"}}),
            json!({"spec": {"metadata": {"resourceVersion": "nested, kept"}}}),
            json!({}),
            json!("x"),
            json!(42),
        ];
        for object in &objects {
            let mut expected = Vec::new();
            watchkeeper_core::order::write_object(&mut expected, &strip_revision(object));
            assert_eq!(stored_value(object), Bytes::from(expected), "{object}");
        }
    }
}

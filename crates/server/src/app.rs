//! The server's state and its read and write paths over the caches and the store.
//!
//! ## Reads (KEP-2340, KEP-4988, KEP-6404)
//! - A consistent LIST or GET (`resourceVersion` unset) reads the store's current revision,
//!   waits until the cache has dispatched it (at most `fresh_wait`; then 504 Timeout with
//!   `retryAfterSeconds: 1`, never a silent fallback), and serves the cache's state.
//! - `resourceVersion=0`: the cache as it is. `resourceVersion=N`: wait for N, then the latest
//!   state (NotOlderThan) or exactly the snapshot at N (Exact, 410 if gone).
//! - Pages are served from the snapshot at the first page's revision; the continue token
//!   carries that revision and the last key, and is validated (garbage: 400; expired: 410).
//!
//! ## Writes
//! Creates, updates and deletes are compare-and-swap transactions on the store. Guaranteed
//! updates (PATCH, and PUT without a resourceVersion) start from the object in the cache; on a
//! conflict they wait until the cache has reached the revision the failed transaction reported
//! and retry from the cache, without re-reading or re-decoding the store. A write that changes
//! nothing is not written. Every write waits until the cache has its revision before answering,
//! so a client reads its own writes at `resourceVersion=0` too.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use serde_json::{Value, json};
use watchkeeper_api::{ApiError, CreateContext, ResourceDef, prepare_create, prepare_update};
use watchkeeper_core::{Encoding, Object, Revision, Snapshot, WatchCache, WatchQueue, object_key};
use watchkeeper_store::{AnyStore, Compare, Store, TxnOp, TxnRequest};

use crate::cache::{CacheDriver, Clock};
use crate::config::ServeConfig;
use crate::source::reflector::{ReflectorStatus, decode};
use watchkeeper_api::query::{Match, Options, ResourceVersion};

/// One served resource: its definition, cache and store prefix.
#[derive(Debug)]
pub struct Resource {
    /// The definition.
    pub def: ResourceDef,
    /// The cache and its threads.
    pub driver: CacheDriver,
    /// Store key prefix of its objects, with a trailing slash (`/registry/pods/`).
    pub key_prefix: String,
}

impl Resource {
    /// The cache.
    #[must_use]
    pub fn cache(&self) -> &WatchCache {
        &self.driver.cache
    }

    /// The store key of an object.
    #[must_use]
    pub fn store_key(&self, namespace: &str, name: &str) -> String {
        if self.def.namespaced {
            format!("{}{namespace}/{name}", self.key_prefix)
        } else {
            format!("{}{name}", self.key_prefix)
        }
    }
}

/// Counters of the write and read paths (for `/metrics` and the benchmarks).
#[derive(Debug, Default)]
pub struct PathCounters {
    /// Update conflicts seen by guaranteed updates.
    pub conflicts: AtomicU64,
    /// Writes skipped because they changed nothing.
    pub noop_writes: AtomicU64,
    /// Consistent GETs served from the store (switch off).
    pub store_gets: AtomicU64,
    /// Objects decoded on the request path (GETs from the store).
    pub request_decodes: AtomicU64,
    /// Consistent reads that timed out waiting for the cache.
    pub fresh_timeouts: AtomicU64,
}

/// An open watch stream, for `/debug/watchers`.
#[derive(Debug, Clone)]
pub struct WatchInfo {
    /// Resource plural (with group).
    pub resource: String,
    /// Namespace scope.
    pub namespace: Option<String>,
    /// Label selector as sent.
    pub label_selector: String,
    /// Field selector as sent.
    pub field_selector: String,
    /// Client user agent.
    pub user_agent: String,
    /// The authenticated user's name.
    pub user: String,
    /// When it started (core clock).
    pub started: watchkeeper_core::Instant,
    /// The queue (state, fill, position).
    pub queue: Arc<WatchQueue>,
    /// The client's address, when the transport reports it.
    pub client: Option<std::net::SocketAddr>,
}

/// Everything a request handler needs.
#[derive(Debug)]
pub struct App {
    /// The configuration.
    pub config: ServeConfig,
    /// The store.
    pub store: AnyStore,
    /// Served resources.
    pub resources: Vec<Arc<Resource>>,
    /// Their definitions (for discovery).
    pub defs: Vec<ResourceDef>,
    /// The reflector's status.
    pub reflector: Arc<ReflectorStatus>,
    /// The clock shared with the caches.
    pub clock: Clock,
    /// Read and write path counters.
    pub counters: PathCounters,
    /// Open watch streams by stream id.
    pub watches: Mutex<BTreeMap<u64, WatchInfo>>,
    /// Next stream id.
    pub next_watch: AtomicU64,
    /// Request counts and latencies.
    pub requests: crate::operator::metrics::RequestMetrics,
    /// Flips to true on shutdown: watch streams end.
    pub shutdown: tokio::sync::watch::Receiver<bool>,
    /// Who may do what (`--token-auth-file`, `--authorization-policy-file`).
    pub auth: crate::auth::Auth,
    /// Caching-proxy mode: the upstream API server that is the source of truth (writes and
    /// consistent reads go through it); `None` in the store modes.
    pub upstream: Option<Arc<crate::source::upstream::Upstream>>,
    /// The operator view's counters and timeline (`/debug/*`, `/ui/`).
    pub debug: crate::operator::debug::DebugState,
    /// Request limits' state (see `limits`).
    pub limits: Arc<crate::limits::Limits>,
}

pub use watchkeeper_api::query::ContinueToken;

/// The answer to a list: the objects of one page and the list's metadata.
#[derive(Debug)]
pub struct ListPage {
    /// Objects in key order.
    pub items: Vec<Arc<Object>>,
    /// The list's resource version.
    pub revision: Revision,
    /// The continue token, if there is more.
    pub continue_token: Option<String>,
    /// How many items remain after this page (when known).
    pub remaining: Option<usize>,
}

/// Attempts of a guaranteed update before it gives up with 409 (Kubernetes retries until the
/// request times out; a bound keeps a pathological hot key from spinning forever).
const GUARANTEED_UPDATE_ATTEMPTS: usize = 100;

impl App {
    /// Finds a served resource.
    #[must_use]
    pub fn resource(&self, group: &str, version: &str, plural: &str) -> Option<&Arc<Resource>> {
        self.resources
            .iter()
            .find(|r| r.def.group == group && r.def.version == version && r.def.plural == plural)
    }

    /// The namespaces resource.
    #[must_use]
    pub fn namespaces(&self) -> Option<&Arc<Resource>> {
        self.resource("", "v1", "namespaces")
    }

    /// 429 until the first list is loaded (as Kubernetes does for an unready cache).
    ///
    /// # Errors
    /// 429 TooManyRequests with Retry-After.
    pub fn ensure_ready(&self) -> Result<(), ApiError> {
        if self.reflector.ready.load(Ordering::Acquire) {
            Ok(())
        } else {
            Err(ApiError::too_many_requests(
                "storage is (re)initializing".to_owned(),
                1,
            ))
        }
    }

    /// Waits until `cache` has dispatched `revision`, at most `fresh_wait`.
    ///
    /// # Errors
    /// 504 "Too large resource version" with `retryAfterSeconds: 1`.
    pub async fn wait_fresh(&self, cache: &WatchCache, revision: Revision) -> Result<(), ApiError> {
        if cache.dispatched() >= revision {
            return Ok(());
        }
        match tokio::time::timeout(self.config.fresh_wait, cache.wait_fresh(revision)).await {
            Ok(_) => Ok(()),
            Err(_) => {
                self.counters.fresh_timeouts.fetch_add(1, Ordering::Relaxed);
                Err(too_large(revision, cache.dispatched()))
            }
        }
    }

    /// Proves the cache fresh for a consistent read: reads the store's current revision and
    /// waits until the cache has it. Returns that revision.
    ///
    /// # Errors
    /// 504 on timeout, 503 when the store cannot be read.
    pub async fn consistent(&self, cache: &WatchCache) -> Result<Revision, ApiError> {
        let revision =
            self.store.current_revision().await.map_err(|e| {
                ApiError::service_unavailable(format!("cannot read the store: {e}"))
            })?;
        self.wait_fresh(cache, revision).await?;
        Ok(revision)
    }

    /// The snapshot a read with these options is served from.
    async fn read_snapshot(
        &self,
        resource: &Resource,
        options: &Options,
    ) -> Result<Snapshot, ApiError> {
        let cache = resource.cache();
        match (options.resource_version, options.resource_version_match) {
            (ResourceVersion::Latest, _) => {
                self.consistent(cache).await?;
                Ok(cache.latest())
            }
            (ResourceVersion::Any, _) => Ok(cache.latest()),
            (ResourceVersion::At(revision), Some(Match::Exact)) => {
                self.wait_fresh(cache, revision).await?;
                cache.snapshot_at(revision).map_err(|e| match e {
                    watchkeeper_core::ReadError::TooOld { requested, .. } => {
                        ApiError::gone(format!("too old resource version: {requested}"))
                    }
                    watchkeeper_core::ReadError::TooLarge { requested, current } => {
                        too_large(requested, current)
                    }
                })
            }
            (ResourceVersion::At(revision), _) => {
                self.wait_fresh(cache, revision).await?;
                Ok(cache.latest())
            }
        }
    }

    /// LIST.
    ///
    /// # Errors
    /// As Kubernetes: 400 bad options, 410 expired continue token, 504 not fresh.
    pub async fn list(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        options: &Options,
    ) -> Result<ListPage, ApiError> {
        let cache = resource.cache();
        let (snapshot, start_after) = match &options.continue_token {
            Some(token) => {
                if options.resource_version_match.is_some()
                    || !matches!(options.resource_version, ResourceVersion::Latest)
                {
                    return Err(ApiError::bad_request(
                        "specifying resource version is not allowed when using continue".to_owned(),
                    ));
                }
                let token = ContinueToken::decode(token)?;
                let snapshot = cache.snapshot_at(token.revision).map_err(|_| {
                    ApiError::gone("The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.".to_owned())
                })?;
                (snapshot, Some(token.start_after))
            }
            None => (self.read_snapshot(resource, options).await?, None),
        };
        let prefix = namespace.map(|ns| format!("{ns}/"));
        let limit = if options.limit == 0 {
            usize::MAX
        } else {
            options.limit
        };
        let mut items = Vec::new();
        let mut matching = snapshot
            .range(prefix.as_deref(), start_after.as_deref())
            .filter(|o| options.labels.matches(o.labels()) && options.fields.matches(o.fields()));
        for object in matching.by_ref() {
            items.push(object.clone());
            if items.len() == limit {
                break;
            }
        }
        let remaining = if items.len() == limit {
            matching.count()
        } else {
            0
        };
        let continue_token = (remaining > 0).then(|| {
            ContinueToken {
                revision: snapshot.revision(),
                start_after: items
                    .last()
                    .map(|o| o.key().to_string())
                    .unwrap_or_default(),
            }
            .encode()
        });
        Ok(ListPage {
            items,
            revision: snapshot.revision(),
            continue_token,
            remaining: (remaining > 0).then_some(remaining),
        })
    }

    /// GET of one object: the encoded body.
    ///
    /// # Errors
    /// 404, 410, 504.
    pub async fn get(
        &self,
        resource: &Resource,
        namespace: &str,
        name: &str,
        options: &Options,
    ) -> Result<Bytes, ApiError> {
        let cache = resource.cache();
        let key = object_key(namespace, name);
        if options.resource_version == ResourceVersion::Latest
            && !self.config.consistent_get_from_cache
        {
            // The switch: consistent GETs read and decode from the store, as before KEP-6404.
            self.counters.store_gets.fetch_add(1, Ordering::Relaxed);
            let kv = self
                .store
                .get(Bytes::from(resource.store_key(namespace, name)))
                .await
                .map_err(store_read_error)?
                .ok_or_else(|| ApiError::not_found(&resource.def, name))?;
            self.counters
                .request_decodes
                .fetch_add(1, Ordering::Relaxed);
            let object = decode(&resource.def, namespace, name, &kv).ok_or_else(|| {
                ApiError::internal(format!("the stored object {name:?} is not valid JSON"))
            })?;
            return Ok(object
                .encoded(Encoding::Json, &cache.metrics().encode)
                .clone());
        }
        let snapshot = self.read_snapshot(resource, options).await?;
        let object = snapshot
            .get(&key)
            .ok_or_else(|| ApiError::not_found(&resource.def, name))?;
        Ok(object
            .encoded(Encoding::Json, &cache.metrics().encode)
            .clone())
    }

    /// Checks that a namespace exists (and is not terminating) before a create in it.
    async fn ensure_namespace(&self, namespace: &str) -> Result<(), ApiError> {
        let Some(namespaces) = self.namespaces() else {
            return Ok(());
        };
        let cache = namespaces.cache();
        let mut found = cache.get(namespace).0;
        if found.is_none() {
            self.consistent(cache).await?;
            found = cache.get(namespace).0;
        }
        match found {
            None => Err(ApiError::namespace_not_found(namespace)),
            Some(ns) if ns.body().pointer("/metadata/deletionTimestamp").is_some() => {
                Err(ApiError::new(
                    403,
                    "Forbidden",
                    format!(
                        "unable to create new content in namespace {namespace} because it is being terminated"
                    ),
                ))
            }
            Some(_) => Ok(()),
        }
    }

    /// The value stored for an object: its JSON without `metadata.resourceVersion`.
    fn stored_value(object: &Value) -> Bytes {
        let mut object = object.clone();
        if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            metadata.remove("resourceVersion");
        }
        Bytes::from(serde_json::to_vec(&object).unwrap_or_default())
    }

    fn with_revision(mut object: Value, revision: Revision) -> Value {
        if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            metadata.insert(
                "resourceVersion".to_owned(),
                Value::String(revision.to_string()),
            );
        }
        object
    }

    /// Waits (bounded, best effort) until the cache has a revision we just wrote.
    async fn settle(&self, cache: &WatchCache, revision: Revision) {
        let _ = tokio::time::timeout(self.config.fresh_wait, cache.wait_fresh(revision)).await;
    }

    /// CREATE.
    ///
    /// # Errors
    /// 400/422 invalid object, 404 missing namespace, 409 exists, 413 too large.
    pub async fn create(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        body: Value,
    ) -> Result<Value, ApiError> {
        if resource.def.namespaced {
            let namespace = namespace.ok_or_else(|| {
                ApiError::bad_request("the namespace is required to create a namespaced object: use /namespaces/{namespace}/...".to_owned())
            })?;
            self.ensure_namespace(namespace).await?;
        }
        let context = CreateContext {
            namespace,
            uid: uuid::Uuid::new_v4().to_string(),
            creation_timestamp: humantime::format_rfc3339_seconds(std::time::SystemTime::now())
                .to_string(),
            random_suffix: random_suffix(),
        };
        let object = prepare_create(&resource.def, body, &context)?;
        let name = object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let namespace = namespace.unwrap_or_default();
        let key = Bytes::from(resource.store_key(namespace, &name));
        let response = self
            .store
            .txn(
                TxnRequest::default()
                    .when(Compare::Absent { key: key.clone() })
                    .then(TxnOp::Put {
                        key,
                        value: Self::stored_value(&object),
                    }),
            )
            .await
            .map_err(store_write_error)?;
        if !response.succeeded {
            return Err(ApiError::already_exists(&resource.def, &name));
        }
        self.settle(resource.cache(), response.revision).await;
        Ok(Self::with_revision(object, response.revision))
    }

    /// UPDATE (PUT). With `metadata.resourceVersion` in the body it is a precondition
    /// (409 on mismatch); without, a guaranteed update.
    ///
    /// # Errors
    /// 400/422 invalid, 404 missing, 409 conflict.
    pub async fn update(
        &self,
        resource: &Resource,
        namespace: &str,
        name: &str,
        body: Value,
    ) -> Result<Value, ApiError> {
        let body_name = body.pointer("/metadata/name").and_then(Value::as_str);
        if body_name.is_some_and(|n| n != name) {
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
        self.guaranteed_update(resource, namespace, name, precondition, |_current| {
            let mut new = body.clone();
            if new.pointer("/metadata/name").is_none()
                && let Some(metadata) = new.get_mut("metadata").and_then(Value::as_object_mut)
            {
                metadata.insert("name".to_owned(), Value::String(name.to_owned()));
            }
            Ok(new)
        })
        .await
    }

    /// PATCH: a guaranteed update applying `patch` to the current object.
    ///
    /// # Errors
    /// 400 malformed patch, 404, 409, 415, 422.
    pub async fn patch(
        &self,
        resource: &Resource,
        namespace: &str,
        name: &str,
        patch_type: watchkeeper_api::PatchType,
        patch: Bytes,
    ) -> Result<Value, ApiError> {
        self.guaranteed_update(resource, namespace, name, None, |old| {
            watchkeeper_api::apply_patch(&resource.def, patch_type, old, &patch)
        })
        .await
    }

    /// The guaranteed update loop (see the module docs). `mutate` maps the current object to
    /// the desired one.
    async fn guaranteed_update(
        &self,
        resource: &Resource,
        namespace: &str,
        name: &str,
        precondition: Option<Revision>,
        mutate: impl Fn(&Value) -> Result<Value, ApiError>,
    ) -> Result<Value, ApiError> {
        let cache = resource.cache();
        let cache_key = object_key(namespace, name);
        let store_key = Bytes::from(resource.store_key(namespace, name));
        // Start from a cache proven fresh, so a write never builds on a stale object.
        self.consistent(cache).await?;
        for _ in 0..GUARANTEED_UPDATE_ATTEMPTS {
            let (current, _) = cache.get(&cache_key);
            let current = current.ok_or_else(|| ApiError::not_found(&resource.def, name))?;
            let expected = precondition.unwrap_or(current.resource_version());
            if let Some(precondition) = precondition
                && precondition != current.resource_version()
            {
                return Err(ApiError::conflict(
                    &resource.def,
                    name,
                    "the object has been modified; please apply your changes to the latest version and try again",
                ));
            }
            let old = current.body();
            let desired = mutate(old)?;
            let new = prepare_update(&resource.def, old, desired)?;
            if strip_revision(&new) == strip_revision(old) {
                self.counters.noop_writes.fetch_add(1, Ordering::Relaxed);
                return Ok(old.clone());
            }
            let finalized = new.pointer("/metadata/deletionTimestamp").is_some()
                && new
                    .pointer("/metadata/finalizers")
                    .and_then(Value::as_array)
                    .is_none_or(Vec::is_empty);
            let operation = if finalized {
                TxnOp::Delete {
                    key: store_key.clone(),
                }
            } else {
                TxnOp::Put {
                    key: store_key.clone(),
                    value: Self::stored_value(&new),
                }
            };
            let response = self
                .store
                .txn(
                    TxnRequest::default()
                        .when(Compare::ModRevision {
                            key: store_key.clone(),
                            revision: expected,
                        })
                        .then(operation),
                )
                .await
                .map_err(store_write_error)?;
            if response.succeeded {
                self.settle(cache, response.revision).await;
                return Ok(Self::with_revision(new, response.revision));
            }
            self.counters.conflicts.fetch_add(1, Ordering::Relaxed);
            if precondition.is_some() {
                return Err(ApiError::conflict(
                    &resource.def,
                    name,
                    "the object has been modified; please apply your changes to the latest version and try again",
                ));
            }
            // Retry from the cache once it has what the store reported: no store read, no decode.
            let seen = response
                .current
                .first()
                .and_then(|(_, kv)| kv.as_ref().map(|kv| kv.mod_revision))
                .unwrap_or(response.revision);
            self.wait_fresh(cache, seen.max(response.revision)).await?;
        }
        Err(ApiError::conflict(
            &resource.def,
            name,
            "too many concurrent updates; please try again",
        ))
    }

    /// DELETE of one object. Objects with finalizers get a deletionTimestamp and stay until
    /// the finalizers are removed. Deleting a namespace deletes everything in it.
    ///
    /// # Errors
    /// 404, 409 (preconditions).
    pub async fn delete(
        &self,
        resource: &Resource,
        namespace: &str,
        name: &str,
        options: &Value,
    ) -> Result<Value, ApiError> {
        let cache = resource.cache();
        self.consistent(cache).await?;
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
            let has_finalizers = body
                .pointer("/metadata/finalizers")
                .and_then(Value::as_array)
                .is_some_and(|f| !f.is_empty());
            if resource.def.group.is_empty() && resource.def.plural == "namespaces" {
                self.delete_namespace_contents(name).await?;
            }
            let store_key = Bytes::from(resource.store_key(namespace, name));
            let (operation, result) = if has_finalizers {
                if body.pointer("/metadata/deletionTimestamp").is_some() {
                    return Ok(body.clone());
                }
                let mut marked = body.clone();
                if let Some(metadata) = marked.get_mut("metadata").and_then(Value::as_object_mut) {
                    metadata.insert(
                        "deletionTimestamp".to_owned(),
                        Value::String(
                            humantime::format_rfc3339_seconds(std::time::SystemTime::now())
                                .to_string(),
                        ),
                    );
                    metadata.insert("deletionGracePeriodSeconds".to_owned(), json!(0));
                }
                (
                    TxnOp::Put {
                        key: store_key.clone(),
                        value: Self::stored_value(&marked),
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
            let response = self
                .store
                .txn(
                    TxnRequest::default()
                        .when(Compare::ModRevision {
                            key: store_key,
                            revision: current.resource_version(),
                        })
                        .then(operation),
                )
                .await
                .map_err(store_write_error)?;
            if response.succeeded {
                self.settle(cache, response.revision).await;
                return Ok(if has_finalizers {
                    Self::with_revision(result, response.revision)
                } else {
                    result
                });
            }
            self.counters.conflicts.fetch_add(1, Ordering::Relaxed);
            self.wait_fresh(cache, response.revision).await?;
        }
        Err(ApiError::conflict(
            &resource.def,
            name,
            "too many concurrent updates; please try again",
        ))
    }

    /// Deletes every object in a namespace, across namespaced resources.
    async fn delete_namespace_contents(&self, namespace: &str) -> Result<(), ApiError> {
        for resource in self.resources.iter().filter(|r| r.def.namespaced) {
            let snapshot = resource.cache().latest();
            let prefix = format!("{namespace}/");
            let names: Vec<String> = snapshot
                .range(Some(&prefix), None)
                .map(|o| o.name().to_owned())
                .collect();
            for name in names {
                let key = Bytes::from(resource.store_key(namespace, &name));
                self.store
                    .txn(TxnRequest::default().then(TxnOp::Delete { key }))
                    .await
                    .map_err(store_write_error)?;
            }
        }
        Ok(())
    }

    /// DELETE of a collection: every object matching the selectors.
    ///
    /// # Errors
    /// As [`App::delete`].
    pub async fn delete_collection(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        options: &Options,
    ) -> Result<usize, ApiError> {
        let page = self.list(resource, namespace, options).await?;
        let mut deleted = 0;
        for object in page.items {
            match self
                .delete(resource, object.namespace(), object.name(), &Value::Null)
                .await
            {
                Ok(_) => deleted += 1,
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        Ok(deleted)
    }

    /// Registers an open watch stream for `/debug/watchers`; returns its id.
    pub fn register_watch(&self, info: WatchInfo) -> u64 {
        let id = self.next_watch.fetch_add(1, Ordering::Relaxed);
        self.watches
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(id, info);
        id
    }

    /// Forgets a watch stream.
    pub fn unregister_watch(&self, id: u64) {
        self.watches
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&id);
    }
}

/// 503 for a store that cannot be written.
fn store_write_error(error: impl std::fmt::Display) -> ApiError {
    ApiError::service_unavailable(format!("cannot write to the store: {error}"))
}

/// 503 for a store that cannot be read.
pub(crate) fn store_read_error(error: impl std::fmt::Display) -> ApiError {
    ApiError::service_unavailable(format!("cannot read the store: {error}"))
}

/// The object without its resource version, to detect no-op writes.
fn strip_revision(object: &Value) -> Value {
    let mut object = object.clone();
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.remove("resourceVersion");
    }
    object
}

/// 504 Timeout "Too large resource version", as the watch cache answers.
#[must_use]
pub fn too_large(requested: Revision, current: Revision) -> ApiError {
    let mut error = ApiError::timeout(
        format!("Too large resource version: {requested}, current: {current}"),
        1,
    );
    error.details = Some(json!({
        "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
        "retryAfterSeconds": 1,
    }));
    error
}

/// Five random lowercase alphanumerics for `generateName`.
fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    (0..5)
        .map(|_| ALPHABET[rand::random_range(0..ALPHABET.len())] as char)
        .collect()
}

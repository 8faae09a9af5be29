//! The garbage collector: kube-controller-manager's `garbagecollector` for a server over a
//! store (`--enable-garbage-collector`, on by default; never in caching-proxy mode, where the
//! upstream cluster collects). It deletes objects whose owners are gone and carries out the
//! finalizers a DELETE gave an owner (see [`watchkeeper_api::gc`]):
//!
//! - **Background** (the default of most kinds): the owner went at once; each dependent whose
//!   every owner reference is now dangling (no object of that kind and name, or one with
//!   another uid) is deleted, with the policy its own GC finalizer asks (Background
//!   otherwise), so chains cascade. A dependent that still has a live owner only loses the
//!   references to the gone ones. An object *created* with references to owners that do not
//!   exist is deleted the same way, as kube's collector does.
//! - **Foreground** (`foregroundDeletion` finalizer): every dependent is deleted (in the
//!   foreground itself when it has dependents of its own); the finalizer is removed, and the
//!   owner goes, once no dependent with `blockOwnerDeletion: true` is left.
//! - **Orphan** (`orphan` finalizer, the default of core `v1` ReplicationControllers and
//!   `batch/v1` Jobs): the references to the owner are removed from every dependent, then the
//!   finalizer, and the owner goes; the dependents stay.
//!
//! Owners are looked up as kube's collector does: an owner of a namespaced kind in the
//! dependent's namespace (a namespaced owner elsewhere does not count); a cluster-scoped
//! dependent's reference to a namespaced kind, or to a kind the server has not served since
//! it started, is unresolvable and never makes the dependent go. An owner of a kind served
//! once (a CRD since deleted) is looked up in the store, whenever the collector first looks
//! at its dependent: where each kind is stored is learned from the kind's first list, before
//! any of its objects is told, never from a look that happened to come while it was served.
//!
//! ## How it learns and decides
//! The reflector tells it every object it feeds the caches ([`Observer`]), on its own task
//! and before the caches dispatch them: the collector keeps only what it needs (the owner
//! references of objects that have some, indexed by owner kind and name) and queues the
//! objects to look at, then wakes its task. The task decides from the caches once they have
//! dispatched everything it was told (a cache read after that wait), and writes through the
//! ordinary write path ([`StoreSource::collect`]): a DELETE with the dependent's uid as
//! precondition, or a merge patch (a finalizer's removal carries the owner's resource
//! version). A write that fails (a conflict, a cache behind, the store down) is queued again
//! after a delay that doubles with each failure in a row ([`RETRY_BASE`] to [`RETRY_MAX`],
//! [`super::Retries`]): an object that keeps failing is retried on its own schedule, not each
//! time something else wakes the collector. A relist of a resource (after a compaction, or a new CRD's first list)
//! rebuilds what the collector knows of it and looks again at every dependent of its kind,
//! so a deletion missed in the gap is still collected.
//!
//! ## Bounds
//! What it holds is bounded by the objects in the store (itself bounded by
//! `--store-quota-bytes`): one entry per object with owner references, and queues that are
//! sets of objects (an object queued twice is looked at once). It writes at most
//! [`CONCURRENT_WRITES`] objects at a time.
//!
//! A foreground chain that loops back (`a` owns `b`, `b` owns `a`, both blocking) is broken
//! as kube breaks it: a dependent deleted in the foreground while one of its own dependents
//! is too first makes its references non-blocking (`unblockOwnerReferences`).
//!
//! ## Not done
//! kube's `OwnerRefInvalidNamespace` events. Several servers over one etcd each run a
//! collector (their writes are preconditioned: a second finds the object gone or changed).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio::time::Instant;
use watchkeeper_api::gc::{self, DeletePolicy, OwnerRef, Propagation};
use watchkeeper_api::{ApiError, ResourceDef};
use watchkeeper_core::pointer::Pointer as _;
use watchkeeper_core::{Change, Object, Revision, object_key};

use super::Retries;
use crate::cache::{Registry, Resource, name_of};
use crate::source::feed::Observer;
use crate::source::read::Freshness;
use crate::source::store::{Collect, StoreSource};

/// How long a failed look at an object first waits before it is tried again; each further
/// failure in a row doubles it, up to [`RETRY_MAX`] (kube-controller-manager's queues' 5 ms
/// and 1,000 s). Not tunables: a retry changes when, never whether, an object is collected.
pub const RETRY_BASE: Duration = Duration::from_millis(5);

/// The longest wait between two looks at an object that keeps failing.
pub const RETRY_MAX: Duration = Duration::from_secs(1000);

/// The most objects the collector writes at once (kube-controller-manager's default of
/// `--concurrent-gc-syncs` is 20).
pub const CONCURRENT_WRITES: usize = 16;

/// An object: its stored resource's name (`replicasets.apps`) and cache key (`ns/name`, or
/// `name`), both shared with the cache's (no copy per change told).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Node {
    resource: Arc<str>,
    key: Arc<str>,
}

/// A stored resource's name for [`Node`]s, made on first use: a change to an object that has
/// no owner references, while no object has any, needs none (an allocation and a copy per
/// write otherwise).
struct ResourceName<'a> {
    def: &'a ResourceDef,
    name: std::cell::OnceCell<Arc<str>>,
}

impl<'a> ResourceName<'a> {
    fn new(def: &'a ResourceDef) -> ResourceName<'a> {
        ResourceName {
            def,
            name: std::cell::OnceCell::new(),
        }
    }

    fn get(&self) -> Arc<str> {
        self.name.get_or_init(|| name_of(self.def).into()).clone()
    }
}

impl Node {
    fn namespace(&self) -> &str {
        self.key
            .split_once('/')
            .map_or("", |(namespace, _)| namespace)
    }

    fn name(&self) -> &str {
        self.key
            .split_once('/')
            .map_or(&*self.key, |(_, name)| name)
    }
}

/// An owner as a dependent names it: kind, name, and the dependent's namespace (where a
/// namespaced owner must be).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Owner {
    group: String,
    kind: String,
    namespace: String,
    name: String,
}

/// What the collector knows and has to do.
#[derive(Debug, Default)]
struct State {
    /// Owner references of every object that has some, as last told.
    refs: HashMap<Node, Vec<OwnerRef>>,
    /// The objects naming an owner, by the owner's group, kind and name.
    by_owner: HashMap<(String, String, String), HashSet<Node>>,
    /// Dependents to look at (are their owners there?).
    dependents: BTreeSet<Node>,
    /// Possible owners being deleted with a GC finalizer, to carry out.
    owners: BTreeSet<Owner>,
    /// The newest revision told: the caches are read once they have it.
    revision: Revision,
}

impl State {
    fn index(&mut self, node: &Node, refs: Vec<OwnerRef>) {
        let old = if refs.is_empty() {
            self.refs.remove(node)
        } else {
            self.refs.insert(node.clone(), refs.clone())
        }
        .unwrap_or_default();
        if old == refs {
            return;
        }
        for owner in &old {
            if refs.contains(owner) {
                continue;
            }
            let key = (owner.group.clone(), owner.kind.clone(), owner.name.clone());
            if !refs.iter().any(|r| r.uid == owner.uid)
                && let Some(set) = self.by_owner.get_mut(&key)
            {
                set.remove(node);
                if set.is_empty() {
                    self.by_owner.remove(&key);
                }
            }
            // An owner in the foreground may have waited for this dependent (no longer
            // named, or no longer blocking).
            self.owners.insert(Owner {
                group: owner.group.clone(),
                kind: owner.kind.clone(),
                namespace: node.namespace().to_owned(),
                name: owner.name.clone(),
            });
        }
        for owner in &refs {
            self.by_owner
                .entry((owner.group.clone(), owner.kind.clone(), owner.name.clone()))
                .or_default()
                .insert(node.clone());
        }
        if !refs.is_empty() {
            self.dependents.insert(node.clone());
        }
    }

    fn put(&mut self, def: &ResourceDef, resource: &ResourceName<'_>, object: &Object) {
        let body = object.body();
        let refs = gc::owner_refs(body);
        // No object has references and this one has none: nothing to index (no node made
        // and hashed to find that it is not there).
        if !refs.is_empty() || !self.refs.is_empty() {
            let node = Node {
                resource: resource.get(),
                key: object.key().clone(),
            };
            self.index(&node, refs);
        }
        if watchkeeper_api::crd::is_crd(def) {
            // A CRD changed (marked for deletion, say, or no longer established): the
            // dependents of its kind's objects are looked at again now and when it goes (a
            // kind no longer served is looked up in the store, see `kinds`).
            let text = |path: &str| body.at(path).and_then(Value::as_str).unwrap_or("");
            let (group, kind) = (text("/spec/group"), text("/spec/names/kind"));
            self.look_at_dependents_of_kind(|g, k| g == group && k == kind);
        }
        if body.at("/metadata/deletionTimestamp").is_some()
            && (gc::has_finalizer(body, gc::ORPHAN) || gc::has_finalizer(body, gc::FOREGROUND))
        {
            self.owners.insert(Owner {
                group: def.group.clone(),
                kind: def.kind.clone(),
                namespace: object.namespace().to_owned(),
                name: object.name().to_owned(),
            });
        }
    }

    fn delete(&mut self, def: &ResourceDef, resource: &ResourceName<'_>, key: &Arc<str>) {
        let node = Node {
            resource: resource.get(),
            key: key.clone(),
        };
        let (namespace, name) = (node.namespace(), node.name());
        self.index(&node, Vec::new());
        self.look_at_dependents_of(def, namespace, name);
        if watchkeeper_api::crd::is_crd(def) {
            // `plural.group`: every kind of its group.
            let group = name.split_once('.').map_or("", |(_, group)| group);
            self.look_at_dependents_of_kind(|g, _| g == group);
        }
    }

    /// The objects whose references name the object `name` of `def` (in `namespace` when
    /// the kind is namespaced) with `uid`, each with whether that reference blocks.
    fn dependents_naming(
        &self,
        def: &ResourceDef,
        namespace: &str,
        name: &str,
        uid: &str,
    ) -> Vec<(Node, bool)> {
        self.by_owner
            .get(&(def.group.clone(), def.kind.clone(), name.to_owned()))
            .into_iter()
            .flatten()
            .filter(|d| !def.namespaced || d.namespace() == namespace)
            .filter_map(|d| {
                let named = self.refs.get(d)?.iter().find(|r| r.uid == uid)?;
                Some((d.clone(), named.block))
            })
            .collect()
    }

    /// Queues every dependent naming an owner of a kind `matches` (group, kind).
    fn look_at_dependents_of_kind(&mut self, matches: impl Fn(&str, &str) -> bool) {
        let queued: Vec<Node> = self
            .by_owner
            .iter()
            .filter(|((group, kind, _), _)| matches(group, kind))
            .flat_map(|(_, set)| set.iter().cloned())
            .collect();
        self.dependents.extend(queued);
    }

    /// Queues the dependents that name an object of `def` called `name` (in `namespace` when
    /// the kind is namespaced).
    fn look_at_dependents_of(&mut self, def: &ResourceDef, namespace: &str, name: &str) {
        if let Some(set) =
            self.by_owner
                .get(&(def.group.clone(), def.kind.clone(), name.to_owned()))
        {
            let queued: Vec<Node> = set
                .iter()
                .filter(|d| !def.namespaced || d.namespace() == namespace)
                .cloned()
                .collect();
            self.dependents.extend(queued);
        }
    }
}

/// What the collector did, for `/metrics`.
#[derive(Debug, Default)]
pub struct Counters {
    /// Objects deleted because their owners were gone or deleted in the foreground.
    pub deleted: AtomicU64,
    /// Owner references removed from dependents (dangling ones, and an orphaning owner's).
    pub orphaned: AtomicU64,
    /// GC finalizers removed from owners (their deletion carried out).
    pub finalized: AtomicU64,
    /// Looks at an object that failed and were queued again.
    pub retries: AtomicU64,
    /// Objects whose last look failed, waiting for their next (gauge).
    pub failing: AtomicU64,
}

/// The garbage collector (see the module docs).
#[derive(Debug)]
pub struct GarbageCollector {
    state: Mutex<State>,
    wake: Notify,
    counters: Counters,
    /// Where the objects of each kind the reflector has listed are stored, by group and
    /// kind: learned from the kind's first list (told before any of its objects, and before
    /// it is served), kept after the kind stops being served (a CRD deleted), when its
    /// objects are looked up in the store.
    kinds: Mutex<HashMap<(String, String), StoredKind>>,
}

/// Where a kind's objects are stored (see [`Resource::store_key`]).
#[derive(Clone, Debug)]
struct StoredKind {
    namespaced: bool,
    /// Its keys' part under the registry prefix ([`ResourceDef::storage_prefix`]).
    storage: String,
}

impl StoredKind {
    fn of(def: &ResourceDef) -> StoredKind {
        StoredKind {
            namespaced: def.namespaced,
            storage: def.storage_prefix(),
        }
    }

    /// The store key of `namespace/name` under the registry `prefix` (`/registry`).
    fn store_key(&self, prefix: &str, namespace: &str, name: &str) -> String {
        let storage = &self.storage;
        if self.namespaced {
            format!("{prefix}/{storage}/{namespace}/{name}")
        } else {
            format!("{prefix}/{storage}/{name}")
        }
    }
}

/// What an owner reference with `uid` finds in the object `body` of its kind and name.
fn found_in(body: &Value, uid: &str) -> Found {
    if body.at("/metadata/uid").and_then(Value::as_str) != Some(uid) {
        return Found::Dangling;
    }
    if body.at("/metadata/deletionTimestamp").is_some() && gc::has_finalizer(body, gc::FOREGROUND) {
        return Found::Waiting;
    }
    Found::Solid
}

impl GarbageCollector {
    /// A collector that knows nothing yet.
    #[must_use]
    pub fn new() -> Arc<GarbageCollector> {
        Arc::new(GarbageCollector {
            state: Mutex::new(State::default()),
            wake: Notify::new(),
            counters: Counters::default(),
            kinds: Mutex::default(),
        })
    }

    /// What it did.
    #[must_use]
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Objects with owner references it knows of.
    #[must_use]
    pub fn dependents(&self) -> usize {
        self.lock().refs.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs the collector with `context` until `shutdown` turns true.
    pub async fn run(
        self: Arc<Self>,
        context: super::Context,
        shutdown: tokio::sync::watch::Receiver<bool>,
    ) {
        super::until_shutdown(self.clone().collect(context), shutdown).await;
    }

    async fn collect(self: Arc<Self>, context: super::Context) {
        let worker = Worker {
            collector: &self,
            source: &context.source,
            registry: &context.registry,
            fresh: &context.fresh,
        };
        let mut retries: Retries<Work> = Retries::new(RETRY_BASE, RETRY_MAX);
        loop {
            retries.wait(&self.wake).await;
            let due = retries.take_due(Instant::now());
            if !due.is_empty() {
                let mut state = self.lock();
                for work in due {
                    match work {
                        Work::Dependent(node) => state.dependents.insert(node),
                        Work::Owner(owner) => state.owners.insert(owner),
                    };
                }
            }
            loop {
                let (owners, dependents, revision) = {
                    let mut state = self.lock();
                    (
                        std::mem::take(&mut state.owners),
                        std::mem::take(&mut state.dependents),
                        state.revision,
                    )
                };
                if owners.is_empty() && dependents.is_empty() {
                    break;
                }
                let work = owners
                    .into_iter()
                    .map(Work::Owner)
                    .chain(dependents.into_iter().map(Work::Dependent));
                let looked = futures_util::stream::iter(work)
                    .map(|work| async {
                        let outcome = worker.look(&work, revision).await;
                        if let Err(error) = &outcome {
                            tracing::debug!(?work, %error.message, "garbage collection failed; retrying");
                        }
                        (work, outcome.is_ok())
                    })
                    .buffer_unordered(CONCURRENT_WRITES)
                    .collect::<Vec<(Work, bool)>>()
                    .await;
                let now = Instant::now();
                for (work, done) in looked {
                    if done {
                        retries.forget(&work);
                    } else {
                        self.counters.retries.fetch_add(1, Ordering::Relaxed);
                        retries.failed(work, now);
                    }
                }
                self.counters
                    .failing
                    .store(retries.failing() as u64, Ordering::Relaxed);
            }
        }
    }
}

impl Observer for GarbageCollector {
    fn reset(&self, def: &ResourceDef, revision: Revision, objects: &[Arc<Object>]) {
        // Where the kind is stored, known before any of its objects is (see `kinds`).
        self.kinds
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert((def.group.clone(), def.kind.clone()), StoredKind::of(def));
        let resource = ResourceName::new(def);
        let mut state = self.lock();
        state.revision = state.revision.max(revision);
        let resource_name = resource.get();
        // What the list no longer holds was deleted in a gap the collector did not see.
        let present: HashSet<(&str, &str)> =
            objects.iter().map(|o| (o.namespace(), o.name())).collect();
        let gone: Vec<Node> = state
            .refs
            .keys()
            .filter(|n| {
                n.resource == resource_name && !present.contains(&(n.namespace(), n.name()))
            })
            .cloned()
            .collect();
        for node in gone {
            state.index(&node, Vec::new());
        }
        for object in objects {
            state.put(def, &resource, object);
        }
        // Any of this kind's objects may have gone in the gap: look at all their dependents.
        state.look_at_dependents_of_kind(|group, kind| group == def.group && kind == def.kind);
        drop(state);
        self.wake.notify_one();
    }

    fn changes(&self, def: &ResourceDef, revision: Revision, changes: &[Change]) {
        let resource = ResourceName::new(def);
        let mut state = self.lock();
        state.revision = state.revision.max(revision);
        for change in changes {
            match &change.object {
                Some(object) => state.put(def, &resource, object),
                None => state.delete(def, &resource, &change.key),
            }
        }
        let queued = !state.dependents.is_empty() || !state.owners.is_empty();
        drop(state);
        if queued {
            self.wake.notify_one();
        }
    }
}

/// A list for a merge patch: `null` (the field removed, as Go's `omitempty` stores an empty
/// list) when empty.
fn list_or_null(items: Vec<&Value>) -> Value {
    if items.is_empty() {
        Value::Null
    } else {
        Value::Array(items.into_iter().cloned().collect())
    }
}

/// One look the task takes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Work {
    /// A dependent: are its owners there?
    Dependent(Node),
    /// A possible owner being deleted with a GC finalizer.
    Owner(Owner),
}

/// An owner reference, resolved against what the caches hold.
enum Found {
    /// The owner is there and not being deleted in the foreground (or cannot be resolved).
    Solid,
    /// No such owner (none of that kind and name, or one with another uid).
    Dangling,
    /// The owner is being deleted in the foreground.
    Waiting,
}

struct Worker<'a> {
    collector: &'a GarbageCollector,
    source: &'a StoreSource,
    registry: &'a Registry,
    fresh: &'a Freshness,
}

impl Worker<'_> {
    async fn look(&self, work: &Work, revision: Revision) -> Result<(), ApiError> {
        match work {
            Work::Dependent(node) => self.dependent(node, revision).await,
            Work::Owner(owner) => self.owner(owner, revision).await,
        }
    }

    /// The stored resource `node` is an object of, while it is served.
    fn served(&self, node: &Node) -> Option<Arc<Resource>> {
        self.registry
            .load()
            .iter()
            .find(|r| r.conversion.is_none() && *r.name() == *node.resource)
            .cloned()
    }

    /// The stored resource of `group`/`kind`, while it is served.
    fn stored(&self, group: &str, kind: &str) -> Option<Arc<Resource>> {
        self.registry
            .load()
            .iter()
            .find(|r| r.def.group == group && r.def.kind == kind && r.conversion.is_none())
            .cloned()
    }

    /// The object `namespace/name` of a kind no longer served, read from the store (its
    /// cache is stopped).
    async fn read_stored(
        &self,
        kind: &StoredKind,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Value>, ApiError> {
        let key = bytes::Bytes::from(kind.store_key(self.source.prefix(), namespace, name));
        let kv = watchkeeper_store::Store::get(self.source.store(), key)
            .await
            .map_err(crate::source::store::store_error)?;
        Ok(kv.and_then(|kv| watchkeeper_api::go_json::parse_stored(&kv.value).ok()))
    }

    /// The object `namespace/name` of `resource` once its cache has `revision`.
    async fn read(
        &self,
        resource: &Resource,
        namespace: &str,
        name: &str,
        revision: Revision,
    ) -> Result<Option<Arc<Object>>, ApiError> {
        self.fresh.wait(resource.cache(), revision).await?;
        Ok(resource.cache().get(&object_key(namespace, name)).0)
    }

    /// Writes `change`; `false` when the object was gone (someone else got there first: the
    /// next change told says what is left).
    async fn write(
        &self,
        resource: &Resource,
        object: (&str, &str),
        change: Collect<'_>,
    ) -> Result<bool, ApiError> {
        let served = self.registry.load();
        match self
            .source
            .collect(
                self.fresh,
                &served,
                resource,
                "generic-garbage-collector",
                object,
                change,
            )
            .await
        {
            Ok(()) => Ok(true),
            Err(error) if error.code == 404 => Ok(false),
            Err(error) => Err(error),
        }
    }

    /// kube's `attemptToDeleteItem`.
    async fn dependent(&self, node: &Node, revision: Revision) -> Result<(), ApiError> {
        let Some(resource) = self.served(node) else {
            // Its resource is no longer served (a CRD deleted, or its resource stopped for a
            // while): nothing to collect now. When served again, its list (told once it is)
            // indexes and looks at it again.
            self.collector.lock().index(node, Vec::new());
            return Ok(());
        };
        let Some(object) = self
            .read(&resource, node.namespace(), node.name(), revision)
            .await?
        else {
            self.collector.lock().index(node, Vec::new());
            return Ok(());
        };
        let body = object.body();
        if body.at("/metadata/deletionTimestamp").is_some() {
            // Being deleted; its own foreground deletion is an owner's work.
            return Ok(());
        }
        let refs = gc::owner_refs(body);
        if refs.is_empty() {
            return Ok(());
        }
        let (mut solid, mut dangling, mut waiting) = (0, Vec::new(), Vec::new());
        for owner in &refs {
            match self
                .resolve(&resource.def, node.namespace(), owner, revision)
                .await?
            {
                Found::Solid => solid += 1,
                Found::Dangling => dangling.push(owner.uid.as_str()),
                Found::Waiting => waiting.push(owner.uid.as_str()),
            }
        }
        let uid = body
            .at("/metadata/uid")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let target = (node.namespace(), node.name());
        if solid > 0 {
            if dangling.is_empty() && waiting.is_empty() {
                return Ok(());
            }
            // Still owned: only the references to gone (or going) owners are removed.
            let removed: Vec<&str> = dangling.iter().chain(&waiting).copied().collect();
            let kept: Vec<&Value> = body
                .at("/metadata/ownerReferences")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter(|r| {
                    r.get("uid")
                        .and_then(Value::as_str)
                        .is_none_or(|u| !removed.contains(&u))
                })
                .collect();
            let patch = json!({"metadata": {"ownerReferences": list_or_null(kept), "uid": uid}});
            if self.write(&resource, target, Collect::Patch(patch)).await? {
                self.collector
                    .counters
                    .orphaned
                    .fetch_add(removed.len() as u64, Ordering::Relaxed);
            }
            return Ok(());
        }
        let has_dependents = self
            .collector
            .lock()
            .by_owner
            .get(&(
                resource.def.group.clone(),
                resource.def.kind.clone(),
                node.name().to_owned(),
            ))
            .is_some_and(|set| !set.is_empty());
        let propagation = if !waiting.is_empty() && has_dependents {
            // kube's cycle breaking: a dependent of this object that is itself being deleted
            // in the foreground may be waiting for it while its owner waits for it; this
            // object's references stop blocking first, so the owner is not held by it.
            if self
                .dependent_deleting_dependents(&resource, node, uid, revision)
                .await?
            {
                let unblocked: Vec<Value> = body
                    .at("/metadata/ownerReferences")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .map(|r| {
                        let mut r = r.clone();
                        if r.get("blockOwnerDeletion").and_then(Value::as_bool) == Some(true) {
                            r["blockOwnerDeletion"] = Value::Bool(false);
                        }
                        r
                    })
                    .collect();
                let patch = json!({"metadata": {"ownerReferences": unblocked, "uid": uid}});
                self.write(&resource, target, Collect::Patch(patch)).await?;
            }
            Propagation::Foreground
        } else if gc::has_finalizer(body, gc::ORPHAN) {
            Propagation::Orphan
        } else if gc::has_finalizer(body, gc::FOREGROUND) {
            Propagation::Foreground
        } else {
            Propagation::Background
        };
        let policy = DeletePolicy::propagating(propagation);
        if self
            .write(&resource, target, Collect::Delete { uid, policy })
            .await?
        {
            self.collector
                .counters
                .deleted
                .fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Whether an object naming `node` (of `resource`, uid `uid`) as its owner is being
    /// deleted in the foreground.
    async fn dependent_deleting_dependents(
        &self,
        resource: &Resource,
        node: &Node,
        uid: &str,
        revision: Revision,
    ) -> Result<bool, ApiError> {
        let dependents = self.collector.lock().dependents_naming(
            &resource.def,
            node.namespace(),
            node.name(),
            uid,
        );
        for (dependent, _) in dependents {
            let Some(served) = self.served(&dependent) else {
                continue;
            };
            if let Some(object) = self
                .read(&served, dependent.namespace(), dependent.name(), revision)
                .await?
            {
                let body = object.body();
                if body.at("/metadata/deletionTimestamp").is_some()
                    && gc::has_finalizer(body, gc::FOREGROUND)
                {
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }

    /// Whether `owner`, named by a dependent of `dependent` in `namespace`, is there.
    async fn resolve(
        &self,
        dependent: &ResourceDef,
        namespace: &str,
        owner: &OwnerRef,
        revision: Revision,
    ) -> Result<Found, ApiError> {
        let served = self.stored(&owner.group, &owner.kind);
        let known = match &served {
            Some(_) => None,
            // A kind the server has not listed since it started (none of its objects could be
            // seen): unresolvable, never collected for it.
            None => match self
                .collector
                .kinds
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(&(owner.group.clone(), owner.kind.clone()))
            {
                Some(kind) => Some(kind.clone()),
                None => return Ok(Found::Solid),
            },
        };
        let namespaced = served.as_ref().map_or_else(
            || known.as_ref().is_some_and(|k| k.namespaced),
            |r| r.def.namespaced,
        );
        let namespace = match (namespaced, dependent.namespaced) {
            (true, true) => namespace,
            // A cluster-scoped dependent cannot name a namespaced owner: unresolvable.
            (true, false) => return Ok(Found::Solid),
            (false, _) => "",
        };
        Ok(match (&served, &known) {
            (Some(resource), _) => self
                .read(resource, namespace, &owner.name, revision)
                .await?
                .map_or(Found::Dangling, |object| {
                    found_in(object.body(), &owner.uid)
                }),
            // Served once (a CRD since deleted or being replaced): the store says.
            (None, Some(kind)) => self
                .read_stored(kind, namespace, &owner.name)
                .await?
                .map_or(Found::Dangling, |body| found_in(&body, &owner.uid)),
            (None, None) => Found::Solid,
        })
    }

    /// kube's `processDeletingDependentsItem` and `orphanDependents`.
    async fn owner(&self, owner: &Owner, revision: Revision) -> Result<(), ApiError> {
        let Some(resource) = self.stored(&owner.group, &owner.kind) else {
            return Ok(());
        };
        let namespace = if resource.def.namespaced {
            owner.namespace.as_str()
        } else {
            ""
        };
        let Some(object) = self
            .read(&resource, namespace, &owner.name, revision)
            .await?
        else {
            return Ok(());
        };
        let body = object.body();
        if body.at("/metadata/deletionTimestamp").is_none() {
            return Ok(());
        }
        let orphan = gc::has_finalizer(body, gc::ORPHAN);
        let foreground = gc::has_finalizer(body, gc::FOREGROUND);
        if !orphan && !foreground {
            return Ok(());
        }
        let uid = body
            .at("/metadata/uid")
            .and_then(Value::as_str)
            .unwrap_or_default();
        // The dependents that name this very object.
        let dependents =
            self.collector
                .lock()
                .dependents_naming(&resource.def, namespace, &owner.name, uid);
        let mut blocking = false;
        for (node, block) in &dependents {
            let Some(dependent) = self.served(node) else {
                continue;
            };
            let Some(object) = self
                .read(&dependent, node.namespace(), node.name(), revision)
                .await?
            else {
                continue;
            };
            let body = object.body();
            if orphan {
                let kept: Vec<&Value> = body
                    .at("/metadata/ownerReferences")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter(|r| r.get("uid").and_then(Value::as_str) != Some(uid))
                    .collect();
                let dependent_uid = body.at("/metadata/uid").cloned();
                let patch = json!({"metadata": {"ownerReferences": list_or_null(kept), "uid": dependent_uid}});
                if self
                    .write(
                        &dependent,
                        (node.namespace(), node.name()),
                        Collect::Patch(patch),
                    )
                    .await?
                {
                    self.collector
                        .counters
                        .orphaned
                        .fetch_add(1, Ordering::Relaxed);
                }
            } else {
                blocking |= *block;
                if body.at("/metadata/deletionTimestamp").is_none() {
                    self.collector.lock().dependents.insert(node.clone());
                    self.collector.wake.notify_one();
                }
            }
        }
        if blocking {
            // Removed when the last blocking dependent is gone (its deletion queues this
            // owner again).
            return Ok(());
        }
        let finalizer = if orphan { gc::ORPHAN } else { gc::FOREGROUND };
        let kept: Vec<&Value> = body
            .at("/metadata/finalizers")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|f| f.as_str() != Some(finalizer))
            .collect();
        let patch = json!({"metadata": {
            "finalizers": list_or_null(kept),
            "resourceVersion": object.resource_version().to_string(),
        }});
        if self
            .write(&resource, (namespace, &owner.name), Collect::Patch(patch))
            .await?
        {
            self.collector
                .counters
                .finalized
                .fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }
}

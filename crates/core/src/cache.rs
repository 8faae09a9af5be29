//! The cache's shared state, its handle for readers and watch registration, and the mailboxes
//! that carry watcher ownership between the dispatcher and the catch-up worker.
//!
//! ## Who owns what
//! - [`Data`] (history, snapshots, the current state and resource version) is written only by
//!   the [`Dispatcher`](crate::Dispatcher), under a write lock held for one revision's append.
//!   The catch-up worker and readers (LIST, GET, watch registration) take the read lock briefly
//!   and copy out what they need (`Arc` clones), never iterating under it.
//! - `dispatched` is the last revision the dispatcher has dispatched to synced watchers
//!   (events or progress). It is the resync point.
//! - A watcher is owned by exactly one actor at a time. It moves by message:
//!   registration → dispatcher; dispatcher → worker when it stalls (or starts behind);
//!   worker → dispatcher when it has caught up. Only the owner writes its queue.
//!
//! ## Every queue on the core's side is bounded
//! The core never blocks an actor on a full queue, so its queues are bounded by what they
//! carry rather than by a capacity that would have to refuse:
//! - the mailboxes carry watcher *ownership*: a watcher is in at most one `Register`,
//!   `Resync` or `Unsynced` message at a time and produces at most one `Cancel`, so each
//!   mailbox holds at most one message per watch (the server bounds watches by its watch
//!   slots), and each actor empties its mailbox at every step;
//! - the drain signal holds at most one id per owned watcher per producer step (a queue
//!   empties again only after a push; a consumer-driven refill raises once until taken back)
//!   plus one per closed watch;
//! - the store's progress is one high-water mark per cache ([`ProgressMark`]), not a message
//!   per store revision;
//! - each watcher's queue holds at most its capacity (one oversized revision admitted into an
//!   empty queue, and the final end), whoever produces it.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, Waker};

use crate::config::{CacheConfig, ConfigError, WatchMode};
use crate::event::WatchItem;
use crate::history::History;
use crate::metrics::Metrics;
use crate::object::{Object, Revision};
use crate::queue::{DrainSignal, Pop, WatchEnd, WatchQueue, WatcherState};
use crate::request::{Selection, WatchRequest, WatchStart, WatcherId};
use crate::snapshot::{Snapshot, Snapshots, StateMap};
use crate::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use crate::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
use crate::time::Instant;
use crate::watcher::Watcher;
use crate::{CatchUpWorker, Dispatcher};

/// The data under the cache lock.
#[derive(Debug)]
pub(crate) struct Data {
    pub(crate) history: History,
    pub(crate) snapshots: Snapshots,
    /// The current state (equal to the newest snapshot's).
    pub(crate) state: StateMap,
    /// The cache's resource version: the newest event's, or higher after a progress
    /// notification.
    pub(crate) revision: Revision,
    /// Bumped when the cache is re-initialised; watchers of an older epoch get a 410.
    pub(crate) epoch: u64,
}

impl Drop for Data {
    /// The cache is going away: what its history held and others still hold (the queues of
    /// watchers it ended, their snapshots) counts as released, once its own snapshots are gone.
    fn drop(&mut self) {
        self.snapshots.clear();
        self.history.let_go_all();
        self.history.settle();
    }
}

/// A queue of messages to one actor, with an optional hook that wakes the actor's thread.
pub(crate) struct Mailbox<T> {
    queue: Mutex<VecDeque<T>>,
    notify: OnceLock<Box<dyn Fn() + Send + Sync>>,
}

impl<T> std::fmt::Debug for Mailbox<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mailbox").finish_non_exhaustive()
    }
}

impl<T> Default for Mailbox<T> {
    fn default() -> Self {
        Mailbox {
            queue: Mutex::new(VecDeque::new()),
            notify: OnceLock::new(),
        }
    }
}

impl<T> Mailbox<T> {
    fn lock(&self) -> MutexGuard<'_, VecDeque<T>> {
        self.queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Queues `message`; wakes the actor only when the mailbox was empty (the actor takes
    /// everything at once, so a non-empty mailbox already has a wake-up on its way: a burst
    /// of N messages, such as N watchers stalling on one revision, costs one wake-up).
    pub(crate) fn send(&self, message: T) {
        let was_empty = {
            let mut queue = self.lock();
            let was_empty = queue.is_empty();
            queue.push_back(message);
            was_empty
        };
        if was_empty && let Some(notify) = self.notify.get() {
            notify();
        }
    }

    pub(crate) fn take_all(&self, out: &mut VecDeque<T>) {
        let mut queue = self.lock();
        out.append(&mut queue);
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    pub(crate) fn set_notify(&self, notify: Box<dyn Fn() + Send + Sync>) {
        // Only the first hook is kept; drivers install one at start.
        let _ = self.notify.set(notify);
    }
}

/// Messages to the dispatcher.
#[derive(Debug)]
pub(crate) enum ToDispatcher {
    /// A new watch.
    Register(Box<Watcher>, WatchStart),
    /// The worker caught this watcher up to its position; the dispatcher pushes the few events
    /// it dispatched since and adds it to the synced set.
    Resync(Box<Watcher>),
    /// The client went away.
    Cancel(WatcherId),
}

/// Messages to the catch-up worker.
#[derive(Debug)]
pub(crate) enum ToWorker {
    /// A watcher the worker now owns: it stalled, started behind the live stream, or needs its
    /// initial state streamed.
    Unsynced(Box<Watcher>),
}

/// [`ProgressMark`]'s state bit: the mark rose since the driver last took it.
const MARK_PENDING: u8 = 1;
/// [`ProgressMark`]'s state bit: a reader or a waiting watch wants the mark applied promptly.
const MARK_DEMANDED: u8 = 2;

/// The store's progress for one cache as one high-water mark, instead of one progress message
/// per store revision (with R resources, a message per revision costs R sends and R wake-ups
/// per write).
///
/// ## Protocol (what makes it safe)
/// - The reflector sends every revision that has changes for this cache to the dispatcher's
///   driver first, then calls [`ProgressMark::advance`] with the store revision it has seen.
/// - The dispatcher's driver, when woken, calls [`ProgressMark::take`] *before* it drains its
///   revision channel, dispatches what it drained, and then calls
///   [`Dispatcher::handle_progress`](crate::Dispatcher::handle_progress) with the taken mark.
///   Every revision at or below the mark was sent before the mark was raised (release/acquire),
///   so it was drained before the progress is applied: progress never overtakes a revision.
/// - Wake-ups coalesce: the notify hook runs only when the mark goes from taken to pending,
///   so a burst of store revisions costs one wake-up of the dispatcher.
/// - **Wake-ups only on demand.** A store revision with nothing for this cache changes nothing
///   a watcher of it receives; what needs the mark applied promptly is a reader waiting for
///   the cache to be fresh ([`WatchCache::wait_fresh`]: consistent reads) or a watch waiting
///   for a future start revision. So the mark wakes the driver only while one of those waits
///   (the *demand*, kept by the cache and the dispatcher under the waiters' lock); otherwise it
///   is raised silently and applied at the driver's next wake-up — its next revision, a timer
///   of its watchers, or (while it has watchers) the idle timeout
///   (`--driver-dispatcher-idle-ms`, 1 s), so bookmarks never lag more than that; a cache
///   without watchers or readers waiting has nobody to show its resource version to promptly
///   and is woken by its next input. With R resources a write used to wake R − 1
///   dispatcher threads for nothing (issue 15: ~0.8 ms of CPU per write with 33 resources);
///   Kubernetes' cacher likewise asks etcd for a progress notification only when a consistent
///   read needs one (`RequestWatchProgress`). Demand and pending share one atomic word:
///   whichever of `advance` and `set_demand` comes second sees the other and wakes the driver
///   (the loom model `demand_and_a_new_mark_always_wake_the_driver`).
#[derive(Default)]
pub struct ProgressMark {
    mark: AtomicU64,
    /// [`MARK_PENDING`] and [`MARK_DEMANDED`]: one word, so that whichever of an advance and
    /// a demand comes second sees the other (read-modify-writes of one location are totally
    /// ordered; two flags would need sequentially consistent fences).
    state: AtomicU8,
    /// The highest revision with changes sent to the dispatcher's input.
    sent: AtomicU64,
    notify: OnceLock<Box<dyn Fn() + Send + Sync>>,
}

impl std::fmt::Debug for ProgressMark {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProgressMark")
            .field("mark", &self.mark.load(Ordering::Relaxed))
            .field("state", &self.state.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl ProgressMark {
    /// Reflector side: the store reached `revision` (after every revision with changes for
    /// this cache up to it was sent). Wakes the dispatcher's driver if the mark was taken and
    /// someone waits for it.
    pub fn advance(&self, revision: Revision) {
        let previous = self.mark.fetch_max(revision, Ordering::AcqRel);
        if previous < revision {
            let state = self.state.fetch_or(MARK_PENDING, Ordering::AcqRel);
            if state & MARK_PENDING == 0 && state & MARK_DEMANDED != 0 {
                self.wake();
            }
        }
    }

    /// Whether anyone waits for the mark to be applied (see the type's docs). Raising it
    /// while the mark is pending wakes the driver.
    pub(crate) fn set_demand(&self, wanted: bool) {
        if wanted {
            let state = self.state.fetch_or(MARK_DEMANDED, Ordering::AcqRel);
            if state & MARK_PENDING != 0 {
                self.wake();
            }
        } else {
            self.state.fetch_and(!MARK_DEMANDED, Ordering::AcqRel);
        }
    }

    /// Reflector side: a revision (or relist) with changes for this cache at `revision` went
    /// into the dispatcher's input (for [`WatchCache::reflected`]).
    pub fn note_sent(&self, revision: Revision) {
        self.sent.fetch_max(revision, Ordering::AcqRel);
    }

    /// Whether a reader or a waiting watch wants the mark applied promptly.
    #[must_use]
    pub fn is_demanded(&self) -> bool {
        self.state.load(Ordering::Acquire) & MARK_DEMANDED != 0
    }

    fn wake(&self) {
        if let Some(notify) = self.notify.get() {
            notify();
        }
    }

    /// Dispatcher's driver side: the mark (call before draining the revision channel; see the
    /// protocol). Later advances wake the driver again.
    pub fn take(&self) -> Revision {
        // A read-modify-write, not a store: reading the pending bit of the advance it clears
        // makes that advance's mark visible to the load below. With a plain store the load
        // could return an older mark while the flag is already cleared — the newer revision
        // hidden until the next advance (the loom model
        // `the_progress_mark_never_hides_a_revision_from_the_driver` finds that outcome).
        self.state.fetch_and(!MARK_PENDING, Ordering::AcqRel);
        self.mark.load(Ordering::Acquire)
    }

    /// Whether the mark advanced since the last take.
    #[must_use]
    pub fn is_pending(&self) -> bool {
        self.state.load(Ordering::Acquire) & MARK_PENDING != 0
    }

    /// Installs the hook that wakes the dispatcher's driver. Only the first hook is kept.
    pub fn set_notify(&self, notify: Box<dyn Fn() + Send + Sync>) {
        let _ = self.notify.set(notify);
    }
}

/// Everything both actors and all readers share.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) config: CacheConfig,
    pub(crate) data: RwLock<Data>,
    pub(crate) dispatched: AtomicU64,
    pub(crate) to_dispatcher: Mailbox<ToDispatcher>,
    pub(crate) to_worker: Mailbox<ToWorker>,
    pub(crate) drain: Arc<DrainSignal>,
    pub(crate) progress: Arc<ProgressMark>,
    pub(crate) metrics: Metrics,
    /// The account this cache's memory is also counted in, with other caches'
    /// ([`WatchCache::account_in`]).
    account: OnceLock<Arc<crate::metrics::MemoryAccount>>,
    next_id: AtomicU64,
    fresh_waiters: Mutex<Vec<(Revision, Waker)>>,
}

impl Drop for Shared {
    /// The cache's objects and history leave the shared account with it.
    fn drop(&mut self) {
        if let Some(account) = self.account.get() {
            account.leave(
                self.metrics.object_bytes.get() + self.metrics.definition_bytes.get(),
                self.metrics.history_bytes.get(),
            );
        }
    }
}

impl Shared {
    pub(crate) fn read(&self) -> RwLockReadGuard<'_, Data> {
        self.data
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn write(&self) -> RwLockWriteGuard<'_, Data> {
        self.data
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn dispatched(&self) -> Revision {
        self.dispatched.load(Ordering::Acquire)
    }

    /// Adds `delta` bytes to the live objects' weight (and the shared total). Called with the
    /// data's write lock held, where the state changes.
    pub(crate) fn count_object_bytes(&self, delta: i64) {
        if delta == 0 {
            return;
        }
        self.metrics.object_bytes.add(delta);
        if let Some(account) = self.account.get() {
            account.objects.add(delta);
        }
    }

    /// Sets the history's byte count to `bytes` (and moves the shared account by the
    /// difference). Called with the data's write lock held, where the history changes.
    pub(crate) fn set_history_bytes(&self, bytes: usize) {
        let bytes = i64::try_from(bytes).unwrap_or(i64::MAX);
        let delta = bytes - self.metrics.history_bytes.get();
        self.metrics.history_bytes.set(bytes);
        if let Some(account) = self.account.get() {
            account.histories.add(delta);
        }
    }

    /// The shared account, if any.
    pub(crate) fn account(&self) -> Option<&crate::metrics::MemoryAccount> {
        self.account.get().map(Arc::as_ref)
    }

    /// The shared account, if any, as versions released into it keep it
    /// ([`crate::Object::release`]).
    pub(crate) fn shared_account(&self) -> Option<&Arc<crate::metrics::MemoryAccount>> {
        self.account.get()
    }

    /// The dispatcher's side of the progress demand: wanted while a reader waits for
    /// freshness or `waiting_watchers` (watches waiting for a future start revision). Under
    /// the waiters' lock, ordered with every waiter's registration.
    pub(crate) fn update_progress_demand(&self, waiting_watchers: bool) {
        let waiters = self
            .fresh_waiters
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.progress
            .set_demand(waiting_watchers || !waiters.is_empty());
        drop(waiters);
    }

    /// Publishes a new dispatched revision and wakes readers waiting for it.
    pub(crate) fn set_dispatched(&self, revision: Revision) {
        self.dispatched.store(revision, Ordering::Release);
        let ready: Vec<Waker> = {
            let mut waiters = self
                .fresh_waiters
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if waiters.is_empty() {
                return;
            }
            let mut ready = Vec::new();
            waiters.retain(|(wanted, waker)| {
                if *wanted <= revision {
                    ready.push(waker.clone());
                    false
                } else {
                    true
                }
            });
            ready
        };
        for waker in ready {
            waker.wake();
        }
    }
}

/// Why a read at a resource version cannot be served.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadError {
    /// 410: the snapshot at that revision was evicted.
    TooOld {
        /// What was asked for.
        requested: Revision,
        /// The oldest revision still readable.
        oldest: Revision,
    },
    /// The cache has not reached that revision yet.
    TooLarge {
        /// What was asked for.
        requested: Revision,
        /// The cache's resource version.
        current: Revision,
    },
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::TooOld { requested, .. } => {
                write!(f, "too old resource version: {requested}")
            }
            ReadError::TooLarge { requested, current } => write!(
                f,
                "Too large resource version: {requested}, current: {current}"
            ),
        }
    }
}

impl std::error::Error for ReadError {}

/// What the history holds now, for operators and reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HistoryInfo {
    /// The oldest revision the history can replay.
    pub oldest: Revision,
    /// The newest event's revision.
    pub newest: Revision,
    /// Events held.
    pub len: usize,
    /// Current capacity.
    pub capacity: usize,
    /// When the oldest event entered the cache.
    pub oldest_time: Option<Instant>,
    /// The cache's resource version.
    pub revision: Revision,
}

/// How far one position is behind the newest event in the history, for operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HistoryLag {
    /// Buffered events above the position (whether or not the watcher selects them): an upper
    /// bound on what a watcher there is owed. Below the history's floor, every buffered event.
    pub events: usize,
    /// When the first of them entered the cache; `None` when there is none.
    pub oldest_owed: Option<Instant>,
}

/// The weight of every object of `state` ([`Object::weight`]).
pub(crate) fn state_weight(state: &StateMap) -> i64 {
    let bytes: usize = state.values().map(|object| object.weight()).sum();
    i64::try_from(bytes).unwrap_or(i64::MAX)
}

/// A handle to one watch cache: registration of watches and reads. Cheap to clone and usable
/// from any thread. The two actors that move events, [`Dispatcher`] and [`CatchUpWorker`],
/// are returned beside it by [`WatchCache::new`].
#[derive(Clone, Debug)]
pub struct WatchCache {
    shared: Arc<Shared>,
}

impl WatchCache {
    /// A cache loaded with `objects` listed at `list_revision`, and its two actors.
    ///
    /// # Errors
    /// The configuration is invalid.
    pub fn new(
        config: CacheConfig,
        list_revision: Revision,
        objects: impl IntoIterator<Item = Arc<Object>>,
    ) -> Result<(WatchCache, Dispatcher, CatchUpWorker), ConfigError> {
        config.validate()?;
        let mut state = StateMap::new_sync();
        for object in objects {
            state.insert_mut(object.key().clone(), object);
        }
        let mut snapshots = Snapshots::default();
        snapshots.push(Snapshot::new(list_revision, state.clone()));
        let history = History::new(&config, list_revision);
        let metrics = Metrics::default();
        metrics.object_bytes.set(state_weight(&state));
        metrics.history_capacity.set(history.capacity() as i64);
        let shared = Arc::new(Shared {
            config,
            data: RwLock::new(Data {
                history,
                snapshots,
                state,
                revision: list_revision,
                epoch: 0,
            }),
            dispatched: AtomicU64::new(list_revision),
            to_dispatcher: Mailbox::default(),
            to_worker: Mailbox::default(),
            drain: Arc::default(),
            progress: Arc::default(),
            metrics,
            account: OnceLock::new(),
            next_id: AtomicU64::new(1),
            fresh_waiters: Mutex::new(Vec::new()),
        });
        Ok((
            WatchCache {
                shared: shared.clone(),
            },
            Dispatcher::new(shared.clone()),
            CatchUpWorker::new(shared),
        ))
    }

    /// Also counts the live objects' weight (`Metrics::object_bytes`) and the history's
    /// (`Metrics::history_bytes`) in `account`, which several caches share: from now on every
    /// change adds its difference, the history keeps to the account's budget (see
    /// [`crate::metrics::MemoryAccount`]), events it lets go while watchers still hold them
    /// count as released until dropped, and the cache's share leaves the account when the
    /// cache is dropped. A second call is ignored.
    pub fn account_in(&self, account: Arc<crate::metrics::MemoryAccount>) {
        let mut data = self.shared.write();
        if self.shared.account.set(account.clone()).is_ok() {
            data.history.set_account(account.clone());
            account.join(
                self.shared.metrics.object_bytes.get() + self.shared.metrics.definition_bytes.get(),
                self.shared.metrics.history_bytes.get(),
            );
        }
    }

    /// Sets what the served resource holds beyond its objects, in bytes (a custom resource's
    /// schema, as its server measures it): counted with the live objects in the shared account
    /// ([`WatchCache::account_in`]) until the next call or the cache's end. Called by the one
    /// owner of the definition.
    pub fn set_definition_bytes(&self, bytes: usize) {
        let _data = self.shared.write();
        let bytes = i64::try_from(bytes).unwrap_or(i64::MAX);
        let delta = bytes - self.shared.metrics.definition_bytes.get();
        self.shared.metrics.definition_bytes.set(bytes);
        if let Some(account) = self.shared.account.get() {
            account.objects.add(delta);
        }
    }

    /// Registers a watch. The watch is placed by the dispatcher at its next step; everything
    /// it will ever receive, errors included, arrives through the returned [`Watch`].
    pub fn watch(&self, request: WatchRequest, now: Instant) -> Watch {
        let config = &self.shared.config;
        let capacity = request
            .queue_capacity
            .unwrap_or_else(|| config.queue_capacity_for(self.shared.read().history.capacity()))
            .max(1);
        // A queue sized by the cache grows for a consumer that reads (see `crate::queue`); one
        // whose size the watch asked for, or a legacy-mode one (Kubernetes' fixed channel),
        // keeps it.
        let capacity_max = match (request.queue_capacity, config.mode) {
            (None, WatchMode::StallResume) => config.queue_capacity_max,
            _ => capacity,
        };
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        let queue = Arc::new(
            WatchQueue::with_drain_signal(capacity, self.shared.drain.clone(), id)
                .growing_to(capacity_max),
        );
        let watcher = Watcher {
            id,
            queue: queue.clone(),
            selection: Arc::new(Selection::new(&request, config.trigger_field.as_deref())),
            allow_bookmarks: request.allow_bookmarks,
            deadline: request.deadline,
            position: 0,
            last_sent: 0,
            reached_live: false,
            catchup_events: 0,
            initial: None,
            initial_bookmark_owed: false,
            in_initial_phase: true,
            last_progress: now,
            unsynced_since: now,
            passes_waited: 0,
            fresh_stall: true,
            epoch: 0,
        };
        self.shared.metrics.watchers.add(1);
        self.shared
            .to_dispatcher
            .send(ToDispatcher::Register(Box::new(watcher), request.start));
        Watch {
            id,
            queue,
            shared: self.shared.clone(),
        }
    }

    /// The cache's resource version.
    #[must_use]
    pub fn revision(&self) -> Revision {
        self.shared.read().revision
    }

    /// The last revision dispatched to watchers; reads at or below it are fresh.
    #[must_use]
    pub fn dispatched(&self) -> Revision {
        self.shared.dispatched()
    }

    /// The current state.
    #[must_use]
    pub fn latest(&self) -> Snapshot {
        let data = self.shared.read();
        Snapshot::new(data.revision, data.state.clone())
    }

    /// The state at exactly `revision` (for `resourceVersionMatch=Exact` and continue tokens).
    ///
    /// # Errors
    /// [`ReadError::TooOld`] when it was evicted, [`ReadError::TooLarge`] when the cache has not
    /// reached it.
    pub fn snapshot_at(&self, revision: Revision) -> Result<Snapshot, ReadError> {
        let data = self.shared.read();
        if revision > data.revision {
            return Err(ReadError::TooLarge {
                requested: revision,
                current: data.revision,
            });
        }
        let floor = data.history.servable_floor();
        match data.snapshots.at(revision) {
            Some(snapshot) if revision >= floor => {
                Ok(Snapshot::new(revision, snapshot_map(snapshot)))
            }
            _ => Err(ReadError::TooOld {
                requested: revision,
                oldest: floor,
            }),
        }
    }

    /// The object under `key` now, with the cache's resource version.
    #[must_use]
    pub fn get(&self, key: &str) -> (Option<Arc<Object>>, Revision) {
        let data = self.shared.read();
        (data.state.get(key).cloned(), data.revision)
    }

    /// Ready once the cache has dispatched `revision`; registers `cx` to be woken otherwise.
    pub fn poll_fresh(&self, revision: Revision, cx: &mut Context<'_>) -> Poll<Revision> {
        let dispatched = self.shared.dispatched();
        if dispatched >= revision {
            return Poll::Ready(dispatched);
        }
        {
            let mut waiters = self
                .shared
                .fresh_waiters
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            waiters.push((revision, cx.waker().clone()));
            // Under the waiters' lock, so the dispatcher cannot withdraw the demand before it
            // has seen this waiter (`Shared::update_progress_demand`).
            self.shared.progress.set_demand(true);
        }
        // Re-check: the dispatcher may have published between the load and the push.
        let dispatched = self.shared.dispatched();
        if dispatched >= revision {
            return Poll::Ready(dispatched);
        }
        Poll::Pending
    }

    /// A future that completes once the cache has dispatched `revision` (the wait-until-fresh
    /// primitive of consistent reads). The caller bounds it with its own timeout (the core has
    /// no clock); on timeout Kubernetes answers 504 with `retryAfterSeconds: 1`.
    #[must_use]
    pub fn wait_fresh(&self, revision: Revision) -> WaitFresh {
        WaitFresh {
            cache: self.clone(),
            revision,
        }
    }

    /// What the history holds now.
    #[must_use]
    pub fn history_info(&self) -> HistoryInfo {
        let data = self.shared.read();
        HistoryInfo {
            oldest: data.history.oldest(),
            newest: data.history.newest(),
            len: data.history.len(),
            capacity: data.history.capacity(),
            oldest_time: data.history.oldest_time(),
            revision: data.revision,
        }
    }

    /// How far each of `positions` is behind the newest event, in the same order, under one
    /// brief read lock (a binary search per position).
    #[must_use]
    pub fn history_lag(&self, positions: &[Revision]) -> Vec<HistoryLag> {
        let data = self.shared.read();
        positions
            .iter()
            .map(|&position| {
                let (events, oldest_owed) = data.history.lag(position);
                HistoryLag {
                    events,
                    oldest_owed,
                }
            })
            .collect()
    }

    /// The store revision this cache reflects, for lag figures: the dispatched revision, or
    /// the progress mark when everything sent to the dispatcher is dispatched (the mark is
    /// applied lazily, see [`ProgressMark`], so the dispatched revision alone would show an
    /// unwritten resource lagging by up to the driver's idle wake-up). Not for reads: a read
    /// that must be fresh waits with [`WatchCache::wait_fresh`].
    #[must_use]
    pub fn reflected(&self) -> Revision {
        let dispatched = self.shared.dispatched();
        let progress = &self.shared.progress;
        if dispatched >= progress.sent.load(Ordering::Acquire) {
            dispatched.max(progress.mark.load(Ordering::Acquire))
        } else {
            dispatched
        }
    }

    /// The cache's progress high-water mark (see [`ProgressMark`] for the protocol).
    #[must_use]
    pub fn progress_mark(&self) -> Arc<ProgressMark> {
        self.shared.progress.clone()
    }

    /// The cache's metrics.
    #[must_use]
    pub fn metrics(&self) -> &Metrics {
        &self.shared.metrics
    }

    /// The cache's configuration.
    #[must_use]
    pub fn config(&self) -> &CacheConfig {
        &self.shared.config
    }
}

fn snapshot_map(snapshot: &Snapshot) -> StateMap {
    snapshot.map_clone()
}

/// History events a consumer reads per read lock when it refills its own queue: its queue's
/// capacity, within these bounds (a selective watcher reads several stretches per refill).
const REFILL_STRETCH_MIN: usize = 16;
const REFILL_STRETCH_MAX: usize = 256;

/// See [`WatchCache::wait_fresh`].
#[derive(Debug)]
pub struct WaitFresh {
    cache: WatchCache,
    revision: Revision,
}

impl Future for WaitFresh {
    type Output = Revision;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Revision> {
        self.cache.poll_fresh(self.revision, cx)
    }
}

/// One registered watch: the consumer end of its queue. Dropping it cancels the watch.
#[derive(Debug)]
pub struct Watch {
    id: WatcherId,
    queue: Arc<WatchQueue>,
    shared: Arc<Shared>,
}

impl Watch {
    /// The watcher's id.
    #[must_use]
    pub fn id(&self) -> WatcherId {
        self.id
    }

    /// The queue (for its state, capacity and fill).
    #[must_use]
    pub fn queue(&self) -> &Arc<WatchQueue> {
        &self.queue
    }

    /// Pops the next item, or the end once every item was delivered.
    pub fn try_pop(&self) -> Pop {
        self.refill();
        self.queue.try_pop()
    }

    /// Consumer-driven catch-up: when the queue is empty and the worker has handed its
    /// production to this consumer, refill it from the history (see [`crate::catchup`]).
    fn refill(&self) {
        let shared = &self.shared;
        self.queue.refill_with(|items, refill, capacity| {
            let dispatched = shared.dispatched();
            let mut events = Vec::new();
            let mut batch = Vec::new();
            loop {
                events.clear();
                {
                    // A short read lock per stretch: the dispatcher's appends are never held
                    // up by a consumer's filtering.
                    let data = shared.read();
                    if refill.position < data.history.servable_floor() {
                        // Aged out: the worker delivers the 410 after what is queued.
                        return items.is_empty();
                    }
                    data.history.read_after(
                        refill.position,
                        capacity.clamp(REFILL_STRETCH_MIN, REFILL_STRETCH_MAX),
                        &mut events,
                    );
                }
                // Only what the dispatcher has dispatched: the hand-off point is never above it.
                let cut = events.partition_point(|e| e.revision() <= dispatched);
                events.truncate(cut);
                if events.is_empty() {
                    // The end of the dispatched history: stuck (the worker hands it off) once
                    // the consumer has taken what is queued.
                    return items.is_empty();
                }
                let mut index = 0;
                while index < events.len() {
                    let revision = refill
                        .selection
                        .select_revision(&events, &mut index, &mut batch);
                    if !batch.is_empty() {
                        // Whole revisions only; an empty queue admits any revision.
                        if !items.is_empty() && items.len() + batch.len() > capacity {
                            return false;
                        }
                        refill.pushed += batch.len() as u64;
                        shared
                            .metrics
                            .watcher_deferred_events
                            .add(batch.len() as u64);
                        items.extend(batch.drain(..));
                    }
                    refill.position = revision;
                }
                if items.len() >= capacity {
                    return false;
                }
            }
        });
    }

    /// Pops up to `max` items (see [`WatchQueue::poll_pop_many`]).
    pub fn poll_pop_many(
        &self,
        cx: &mut Context<'_>,
        max: usize,
        out: &mut Vec<WatchItem>,
    ) -> Poll<Option<WatchEnd>> {
        self.refill();
        self.queue.poll_pop_many(cx, max, out)
    }

    /// Pops up to `max` items, and whether `cx`'s waker is registered: when nothing was
    /// popped, or when the pop emptied a queue only pushes refill (see
    /// [`WatchQueue::poll_pop_many_parking`]). Until the waker fires, a poll would find
    /// nothing new.
    pub fn poll_pop_many_parking(
        &self,
        cx: &mut Context<'_>,
        max: usize,
        out: &mut Vec<WatchItem>,
    ) -> (Poll<Option<WatchEnd>>, bool) {
        self.refill();
        self.queue.poll_pop_many_parking(cx, max, out)
    }

    /// Whether the watch has ended (its end is queued).
    #[must_use]
    pub fn state(&self) -> WatcherState {
        self.queue.state()
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.queue.close();
        self.shared
            .to_dispatcher
            .send(ToDispatcher::Cancel(self.id));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_progress_mark_keeps_the_highest_revision_and_coalesces_wake_ups() {
        let wakes = Arc::new(AtomicU64::new(0));
        let mark = ProgressMark::default();
        let counter = wakes.clone();
        mark.set_notify(Box::new(move || {
            counter.fetch_add(1, Ordering::Relaxed);
        }));
        // A reader waits (without demand the mark wakes nobody: the test below).
        mark.set_demand(true);
        for revision in [5, 7, 6, 9] {
            mark.advance(revision);
        }
        assert_eq!(
            wakes.load(Ordering::Relaxed),
            1,
            "one wake-up for the burst"
        );
        assert!(mark.is_pending());
        assert_eq!(mark.take(), 9);
        assert!(!mark.is_pending());
        mark.advance(9);
        assert_eq!(wakes.load(Ordering::Relaxed), 1, "no advance, no wake-up");
        mark.advance(10);
        assert_eq!(wakes.load(Ordering::Relaxed), 2);
        assert_eq!(mark.take(), 10);
    }

    /// Goal: a store revision with nothing for a cache wakes its dispatcher only while
    /// someone waits for the mark (issue 15: R − 1 wake-ups per write otherwise), and demand
    /// that arrives while the mark is pending wakes it at once.
    #[test]
    fn the_progress_mark_wakes_the_driver_only_on_demand() {
        let (wakes, hook) = counter();
        let mark = ProgressMark::default();
        mark.set_notify(hook);
        mark.advance(5);
        mark.advance(6);
        assert_eq!(wakes.load(Ordering::Relaxed), 0, "nobody waits: no wake-up");
        assert!(mark.is_pending(), "the mark is raised all the same");
        mark.set_demand(true);
        assert_eq!(
            wakes.load(Ordering::Relaxed),
            1,
            "demand on a pending mark wakes"
        );
        assert_eq!(mark.take(), 6);
        mark.advance(7);
        assert_eq!(
            wakes.load(Ordering::Relaxed),
            2,
            "with demand every new mark wakes"
        );
        mark.advance(8);
        assert_eq!(wakes.load(Ordering::Relaxed), 2, "coalesced until taken");
        assert_eq!(mark.take(), 8);
        mark.set_demand(false);
        mark.advance(9);
        assert_eq!(
            wakes.load(Ordering::Relaxed),
            2,
            "demand withdrawn: silent again"
        );
        assert_eq!(mark.take(), 9);
    }

    /// Goal: lag figures count a lazily applied mark as reflected, but never while a
    /// revision with changes is still on its way to the dispatcher.
    #[test]
    fn reflected_counts_the_mark_only_behind_everything_sent() {
        let (cache, mut dispatcher, _worker) =
            WatchCache::new(CacheConfig::default(), 0, Vec::new()).expect("config");
        let mark = cache.progress_mark();
        mark.advance(10);
        assert_eq!(
            cache.reflected(),
            10,
            "nothing sent: the mark is what it reflects"
        );
        mark.note_sent(12);
        mark.advance(15);
        assert_eq!(cache.reflected(), 0, "revision 12 is not dispatched yet");
        let object = Arc::new(Object::new(
            "default",
            "p",
            std::collections::BTreeMap::new(),
            std::collections::BTreeMap::new(),
            12,
            serde_json::json!({"metadata": {"name": "p", "namespace": "default"}}),
        ));
        dispatcher.handle_revision(Instant::ZERO, 12, vec![crate::Change::put(object)]);
        assert_eq!(cache.reflected(), 15);
    }

    /// Goal: a reader waiting for freshness raises the demand under the waiters' lock, and
    /// the dispatcher withdraws it only once nobody waits.
    #[test]
    fn a_fresh_waiter_holds_the_demand_until_it_is_served() {
        let (cache, mut dispatcher, _worker) =
            WatchCache::new(CacheConfig::default(), 0, Vec::new()).expect("config");
        let (wakes, hook) = counter();
        cache.progress_mark().set_notify(hook);
        cache.progress_mark().advance(3);
        let mut cx = Context::from_waker(Waker::noop());
        assert!(cache.poll_fresh(3, &mut cx).is_pending());
        assert!(cache.progress_mark().is_demanded());
        assert_eq!(
            wakes.load(Ordering::Relaxed),
            1,
            "the pending mark is wanted now"
        );
        dispatcher.publish_progress_demand();
        assert!(
            cache.progress_mark().is_demanded(),
            "withdrawn while a reader still waits"
        );
        let mark = cache.progress_mark().take();
        dispatcher.handle_progress(Instant::ZERO, mark);
        assert_eq!(cache.poll_fresh(3, &mut cx), Poll::Ready(3));
        dispatcher.publish_progress_demand();
        assert!(
            !cache.progress_mark().is_demanded(),
            "nobody waits any more"
        );
        let mut request = crate::WatchRequest::new(crate::WatchStart::After(10));
        request.queue_capacity = Some(10);
        let _watch = cache.watch(request, Instant::ZERO);
        dispatcher.handle_messages(Instant::ZERO);
        assert_eq!(dispatcher.waiting_len(), 1);
        dispatcher.publish_progress_demand();
        assert!(
            cache.progress_mark().is_demanded(),
            "a watch waiting for a future revision wants it too"
        );
    }

    fn counter() -> (Arc<AtomicU64>, Box<dyn Fn() + Send + Sync>) {
        let count = Arc::new(AtomicU64::new(0));
        let hook = count.clone();
        (
            count,
            Box::new(move || {
                hook.fetch_add(1, Ordering::Relaxed);
            }),
        )
    }

    #[test]
    fn a_mailbox_wakes_its_actor_when_it_stops_being_empty() {
        let mailbox: Mailbox<u32> = Mailbox::default();
        let (wakes, hook) = counter();
        mailbox.set_notify(hook);
        mailbox.send(1);
        mailbox.send(2);
        assert_eq!(
            wakes.load(Ordering::Relaxed),
            1,
            "one wake-up for the burst"
        );
        let mut taken = VecDeque::new();
        mailbox.take_all(&mut taken);
        assert_eq!(taken, [1, 2]);
        mailbox.send(3);
        assert_eq!(wakes.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn the_drain_signal_wakes_the_worker_on_the_first_raise_after_a_take() {
        let drain = DrainSignal::default();
        let (wakes, hook) = counter();
        drain.set_notify(Arc::from(hook));
        drain.raise(1);
        drain.raise(2);
        assert_eq!(
            wakes.load(Ordering::Relaxed),
            1,
            "one wake-up until the worker takes"
        );
        assert!(drain.is_raised() && drain.is_pending(2) && !drain.is_pending(3));
        let mut ids = Vec::new();
        drain.take(&mut ids);
        assert_eq!(ids, [1, 2]);
        assert!(!drain.is_raised() && !drain.is_pending(1));
        drain.raise(3);
        assert_eq!(wakes.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn a_cache_has_one_progress_mark_for_its_reflector_and_its_driver() {
        let (cache, _dispatcher, _worker) =
            WatchCache::new(CacheConfig::default(), 0, Vec::new()).unwrap();
        let reflector = cache.progress_mark();
        let driver = cache.clone().progress_mark();
        reflector.advance(4);
        assert!(driver.is_pending());
        assert_eq!(driver.take(), 4);
    }
}

//! The dispatcher: appends each revision to the history and delivers it to synced watchers.
//!
//! ## Never waits (stall-resume mode)
//! The dispatcher offers each revision to every synced watcher that selects it with one
//! non-blocking, all-or-nothing push. When a watcher's queue cannot take the revision, the
//! watcher becomes *unsynced*: its position is set to the revision minus one (never lower than
//! it was), it leaves the synced set, and it is handed to the catch-up worker, which from then
//! on is the only writer of its queue. The dispatcher offers unsynced watchers nothing, so a
//! stalled client costs the live path one failed push, once. Before that, a full queue whose
//! consumer emptied it since its last growth doubles (up to `queue_capacity_max`) and takes
//! the revision: a reader that was late for a burst of up to twice its capacity keeps its
//! place on the live path (a larger one stalls it once, and the queue has grown for the next),
//! so the queue's size follows the bursts its consumer has shown it absorbs (see
//! [`crate::queue`]; counted in `watch_queue_growths`). A consumer that never emptied it
//! stalls as before.
//!
//! ## Resync
//! When the worker has caught a watcher up to position `p`, it sends it back. Between two
//! revisions the dispatcher pushes the events in `(p, dispatched]` itself (a few at most: the
//! worker hands over only at the end of the history) and adds the watcher to the synced set,
//! or, if that push fails, hands it back with the new position. The resync point is therefore
//! the last dispatched revision and the live path never has an event to skip; the skip check
//! stays as a safety net and counts into `watcher_skipped_events`, which must stay zero.
//!
//! ## Bookmarks
//! Synced watchers that allow bookmarks get one about every `bookmark_interval`, and one
//! `bookmark_before_deadline` before their deadline, at the last dispatched revision, and only
//! when that revision is above the last one they were sent. Unsynced watchers get none. A
//! bookmark that does not fit is skipped, never a reason to stall.
//!
//! ## Shutdown
//! [`Dispatcher::handle_shutdown`] ends every watcher it owns with [`WatchEnd::Shutdown`]
//! after what is queued: a synced watcher that allows bookmarks first gets a final bookmark at
//! the last dispatched revision (it has every event up to it, so a client that resumes from
//! that bookmark on another instance, or on this one restarted, misses nothing and sees
//! nothing twice — kube-apiserver sends the same bookmark on shutdown, KEP-1904). A watcher
//! waiting for a future revision ends without one. From then on the dispatcher keeps
//! applying revisions (in-flight writes wait for them), ends each new registration at once,
//! and ends each watcher the catch-up worker hands back the same way, once it has pushed the
//! events dispatched since (so a reader that catches up during the grace period gets its
//! final bookmark too). The final bookmark bypasses the queue's capacity, like the end.
//!
//! ## Legacy mode
//! For comparison with Kubernetes before KEP-6268: after the non-blocking pushes, blocked
//! watchers are waited for on a shared time budget (refilled at
//! `legacy_budget_refill_per_second`, capped at `legacy_budget_max`, taken whole for each
//! revision). While it waits the dispatcher accepts no revision (`is_blocked`); the driver
//! calls [`Dispatcher::retry_blocked`] when consumers make room and
//! [`Dispatcher::handle_timeout`] at [`Dispatcher::poll_timeout`]. Watchers still blocked when
//! the budget runs out are force-closed as `unresponsive`.
//!
//! ## Driving contract
//! Call from one thread at a time, with non-decreasing `now`:
//! [`handle_revision`](Dispatcher::handle_revision) for each revision from the store (only
//! while not blocked), [`handle_progress`](Dispatcher::handle_progress) for progress
//! notifications, [`handle_reset`](Dispatcher::handle_reset) after a relist,
//! [`handle_messages`](Dispatcher::handle_messages) when the mailbox hook fires, and
//! [`handle_timeout`](Dispatcher::handle_timeout) at or after
//! [`poll_timeout`](Dispatcher::poll_timeout). Every `handle_*` call drains the mailbox first.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::hash::BuildHasherDefault;
use std::sync::Arc;
use std::time::Duration;

use crate::cache::{Shared, ToDispatcher, ToWorker};
use crate::config::WatchMode;
use crate::event::{Event, SharedEvent, WatchItem};
use crate::history::CapacityChange;
use crate::object::{Object, Revision};
use crate::queue::{PushResult, TerminationReason, WatchEnd, WatcherState};
use crate::request::{Route, WatchStart, WatcherId};
use crate::snapshot::{Snapshot, StateMap};
use crate::time::Instant;
use crate::watcher::{InitialPhase, Watcher};

/// A hash map with a fixed hasher: lookups only, or iteration whose order depends only on the
/// sequence of inserts, so runs are reproducible.
pub(crate) type DetHashMap<K, V> = HashMap<K, V, BuildHasherDefault<DefaultHasher>>;

/// One change to apply: the object under `key` becomes `object` (`None`: deleted).
#[derive(Clone, Debug)]
pub struct Change {
    /// The cache key (see [`crate::object::object_key`]).
    pub key: Arc<str>,
    /// The new object, or `None` for a deletion.
    pub object: Option<Arc<Object>>,
}

impl Change {
    /// A create or update.
    #[must_use]
    pub fn put(object: Arc<Object>) -> Change {
        Change {
            key: object.key().clone(),
            object: Some(object),
        }
    }

    /// A deletion.
    #[must_use]
    pub fn delete(key: impl Into<Arc<str>>) -> Change {
        Change {
            key: key.into(),
            object: None,
        }
    }
}

/// What dispatching one revision did, for the simulator's cost model and for benchmarks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DispatchReport {
    /// Events in the revision (after dropping deletions of absent keys).
    pub events: usize,
    /// Watchers visited and evaluated against their selection (sum over events).
    pub evaluated: usize,
    /// Items pushed to synced watchers.
    pub pushed: usize,
    /// Watchers that stalled on this revision.
    pub stalled: usize,
    /// Watchers (legacy mode) blocked on this revision.
    pub blocked: usize,
}

/// A synced watcher in its slot.
#[derive(Debug)]
struct Slot {
    watcher: Watcher,
    route: Route,
    /// Index of this slot in `routes[route]`.
    route_index: usize,
    /// When its next bookmark is due, if scheduled.
    bookmark_due: Option<Instant>,
}

/// A watcher waiting for the cache to reach its start revision.
#[derive(Debug)]
struct Waiting {
    watcher: Box<Watcher>,
    /// Start with the initial state (else: events after `revision`).
    initial_state: bool,
    /// Give up with 504 at this time (initial-state waits only).
    give_up_at: Option<Instant>,
}

/// Legacy mode: a revision whose pushes are blocked on full queues.
#[derive(Debug)]
struct Blocked {
    /// Slots still blocked, with the items they are owed.
    pending: Vec<(usize, Vec<WatchItem>)>,
    /// When the budget taken for this revision runs out.
    budget_deadline: Instant,
}

/// The live path of one cache (see the module docs).
#[derive(Debug)]
pub struct Dispatcher {
    shared: Arc<Shared>,
    slots: Vec<Option<Slot>>,
    free_slots: Vec<usize>,
    by_id: DetHashMap<WatcherId, usize>,
    routes: DetHashMap<Route, Vec<usize>>,
    /// How many of `routes` are scopes of each shape ([`scope_shape`]): an event looks up
    /// only the shapes some watcher routes by (each look-up hashes the route).
    scope_routes: [usize; 4],
    /// Watchers whose start revision is above the dispatched revision, by start revision.
    waiting: BTreeMap<(Revision, WatcherId), Waiting>,
    waiting_by_id: DetHashMap<WatcherId, Revision>,
    /// (due, id) of bookmark timers; stale entries are skipped when popped.
    bookmarks: BTreeSet<(Instant, WatcherId)>,
    /// (deadline, id) of synced and waiting watchers.
    deadlines: BTreeSet<(Instant, WatcherId)>,
    /// (give up, start revision, id) of initial-state waits.
    wait_give_ups: BTreeSet<(Instant, Revision, WatcherId)>,
    last_now: Instant,
    legacy_budget: Duration,
    legacy_refilled_at: Instant,
    blocked: Option<Blocked>,
    /// Legacy mode: a progress notification that arrived while a revision was blocked.
    held_progress: Revision,
    /// Scratch: (slot, event index, item) matches of the current revision.
    matches: Vec<(usize, u32, WatchItem)>,
    /// Scratch: the items of one watcher's batch.
    batch: Vec<WatchItem>,
    inbox: VecDeque<ToDispatcher>,
    /// [`Dispatcher::handle_shutdown`] was called: no watcher joins the synced set again.
    shutting_down: bool,
}

/// The shape of a scope route, an index into [`Dispatcher::scope_routes`]: whether it names
/// a namespace (2) and a name (1). `None` for a trigger route.
fn scope_shape(route: &Route) -> Option<usize> {
    match route {
        Route::Scope(namespace, name) => {
            Some(2 * usize::from(namespace.is_some()) + usize::from(name.is_some()))
        }
        Route::Trigger(_) => None,
    }
}

/// An object's weight as a gauge's difference.
fn weight_of(object: &Object) -> i64 {
    i64::try_from(object.weight()).unwrap_or(i64::MAX)
}

impl Dispatcher {
    pub(crate) fn new(shared: Arc<Shared>) -> Dispatcher {
        let legacy_budget = shared.config.legacy_budget_max;
        Dispatcher {
            shared,
            slots: Vec::new(),
            free_slots: Vec::new(),
            by_id: DetHashMap::default(),
            routes: DetHashMap::default(),
            scope_routes: [0; 4],
            waiting: BTreeMap::new(),
            waiting_by_id: DetHashMap::default(),
            bookmarks: BTreeSet::new(),
            deadlines: BTreeSet::new(),
            wait_give_ups: BTreeSet::new(),
            last_now: Instant::ZERO,
            legacy_budget,
            legacy_refilled_at: Instant::ZERO,
            blocked: None,
            held_progress: 0,
            matches: Vec::new(),
            batch: Vec::new(),
            inbox: VecDeque::new(),
            shutting_down: false,
        }
    }

    /// Installs the hook called when a message arrives for the dispatcher (registration,
    /// resync, cancel), so a driver thread can wake up. Only the first hook is kept.
    pub fn set_notify(&self, notify: Box<dyn Fn() + Send + Sync>) {
        self.shared.to_dispatcher.set_notify(notify);
    }

    /// The number of synced watchers.
    #[must_use]
    pub fn synced_len(&self) -> usize {
        self.by_id.len()
    }

    /// The number of watchers waiting for a future start revision.
    #[must_use]
    pub fn waiting_len(&self) -> usize {
        self.waiting.len()
    }

    /// Tells the cache's progress mark whether a prompt wake-up is wanted: while a reader
    /// waits for freshness or a watch waits for a future start revision (see
    /// [`crate::ProgressMark`]). A threaded driver calls it before it waits for input.
    pub fn publish_progress_demand(&self) {
        self.shared.update_progress_demand(!self.waiting.is_empty());
    }

    /// Legacy mode: whether a revision is still being pushed to blocked watchers. No revision
    /// may be handed in while blocked.
    #[must_use]
    pub fn is_blocked(&self) -> bool {
        self.blocked.is_some()
    }

    /// Whether messages are waiting that [`Dispatcher::handle_messages`] would handle now.
    /// While a legacy-mode revision is blocked, messages wait for it and this is `false`.
    #[must_use]
    pub fn has_messages(&self) -> bool {
        self.blocked.is_none() && !self.shared.to_dispatcher.is_empty()
    }

    /// The earliest time at which [`Dispatcher::handle_timeout`] has work.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        // Bookmarks wait while a legacy revision is blocked; reporting their (past) due time
        // would make a driver spin.
        let bookmarks = if self.blocked.is_some() {
            None
        } else {
            self.bookmarks.first().map(|(t, _)| *t)
        };
        [
            bookmarks,
            self.deadlines.first().map(|(t, _)| *t),
            self.wait_give_ups.first().map(|(t, _, _)| *t),
            self.blocked.as_ref().map(|b| b.budget_deadline),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Checks the dispatcher's invariants (tests, the model proptests and the simulator call
    /// it after every step; it costs a walk of every synced and waiting watcher):
    /// - the watcher indexes agree: every synced watcher is in exactly one live slot, reached
    ///   by its id and from its route at its recorded index, free slots are exactly the empty
    ///   ones, and its bookmark and deadline timers are indexed;
    /// - the synced and waiting sets are disjoint, and the waiting indexes agree;
    /// - a synced watcher is at the dispatched revision: nothing it was sent, and nothing in
    ///   its queue, is above it (outside a blocked legacy revision), and its queue is marked
    ///   synced;
    /// - queues hold only whole revisions, in order.
    ///
    /// # Errors
    /// The first invariant found broken, described.
    pub fn check_invariants(&self) -> Result<(), String> {
        let dispatched = self.shared.dispatched();
        let live = self.slots.iter().filter(|s| s.is_some()).count();
        if live != self.by_id.len() {
            return Err(format!("{live} live slots, {} ids", self.by_id.len()));
        }
        let mut free = self.free_slots.clone();
        free.sort_unstable();
        free.dedup();
        if free.len() != self.free_slots.len()
            || free
                .iter()
                .any(|&f| self.slots.get(f).is_none_or(Option::is_some))
            || free.len() + live != self.slots.len()
        {
            return Err("free slots are not exactly the empty ones".to_owned());
        }
        let mut routed = 0;
        for (route, bucket) in &self.routes {
            if bucket.is_empty() {
                return Err(format!("empty route {route:?} kept"));
            }
            for (index, &slot) in bucket.iter().enumerate() {
                let Some(entry) = self.slots.get(slot).and_then(Option::as_ref) else {
                    return Err(format!("route {route:?} reaches empty slot {slot}"));
                };
                if &entry.route != route || entry.route_index != index {
                    return Err(format!("slot {slot} misplaced in route {route:?}"));
                }
                routed += 1;
            }
        }
        if routed != live {
            return Err(format!("{routed} routed slots, {live} live"));
        }
        let mut shapes = [0; 4];
        for shape in self.routes.keys().filter_map(scope_shape) {
            shapes[shape] += 1;
        }
        if shapes != self.scope_routes {
            return Err(format!(
                "scope routes counted {:?}, held {shapes:?}",
                self.scope_routes
            ));
        }
        for (&id, &slot) in &self.by_id {
            let Some(entry) = self.slots.get(slot).and_then(Option::as_ref) else {
                return Err(format!("watcher {id} indexed at empty slot {slot}"));
            };
            let watcher = &entry.watcher;
            if watcher.id != id {
                return Err(format!("slot {slot} holds {} not {id}", watcher.id));
            }
            if self.waiting_by_id.contains_key(&id) {
                return Err(format!("watcher {id} both synced and waiting"));
            }
            if let Some(due) = entry.bookmark_due
                && !self.bookmarks.contains(&(due, id))
            {
                return Err(format!("watcher {id}'s bookmark timer is not indexed"));
            }
            if let Some(deadline) = watcher.deadline
                && !self.deadlines.contains(&(deadline, id))
            {
                return Err(format!("watcher {id}'s deadline is not indexed"));
            }
            let closed = watcher.queue.is_closed();
            if !closed && watcher.queue.state() != WatcherState::Synced {
                return Err(format!(
                    "synced watcher {id} marked {:?}",
                    watcher.queue.state()
                ));
            }
            if self.blocked.is_none()
                && (watcher.position > dispatched
                    || watcher.last_sent > dispatched
                    || watcher.queue.last_pushed() > dispatched)
            {
                return Err(format!(
                    "synced watcher {id} above the dispatched revision {dispatched}"
                ));
            }
            watcher
                .queue
                .check()
                .map_err(|e| format!("watcher {id}: {e}"))?;
        }
        if self.waiting.len() != self.waiting_by_id.len() {
            return Err("waiting indexes disagree".to_owned());
        }
        for (&(revision, id), waiting) in &self.waiting {
            if self.waiting_by_id.get(&id) != Some(&revision) || waiting.watcher.id != id {
                return Err(format!("waiting watcher {id} misindexed"));
            }
        }
        for &(_, id) in &self.deadlines {
            if !self.by_id.contains_key(&id) && !self.waiting_by_id.contains_key(&id) {
                return Err(format!(
                    "deadline of watcher {id} that the dispatcher does not own"
                ));
            }
        }
        Ok(())
    }

    /// Whether the dispatcher owns watcher `id` (synced or waiting to start).
    pub(crate) fn owns(&self, id: WatcherId) -> bool {
        self.by_id.contains_key(&id) || self.waiting_by_id.contains_key(&id)
    }

    fn advance(&mut self, now: Instant) {
        debug_assert!(now >= self.last_now, "time went backwards");
        self.last_now = self.last_now.max(now);
    }

    /// Handles pending messages: registrations, resyncs and cancels.
    pub fn handle_messages(&mut self, now: Instant) {
        self.advance(now);
        self.drain_inbox(now);
    }

    /// Appends one revision to the history and delivers it to synced watchers.
    ///
    /// # Panics
    /// If `changes` is empty, `revision` is not above the cache's resource version, or the
    /// dispatcher is blocked (legacy mode).
    pub fn handle_revision(
        &mut self,
        now: Instant,
        revision: Revision,
        changes: Vec<Change>,
    ) -> DispatchReport {
        assert!(!changes.is_empty(), "a revision has changes");
        assert!(
            self.blocked.is_none(),
            "no revision may be dispatched while legacy pushes are blocked"
        );
        self.advance(now);
        self.drain_inbox(now);
        // A revision with changes proves the store passed every revision before it with
        // nothing for this cache (its revisions arrive in order): the cache is at
        // `revision - 1` even if that progress was not applied yet (the mark is applied
        // lazily). Without this, a watch waiting for `revision - 1` would start below it — an
        // initial state labelled with an older resource version than it asked for.
        if revision > 1 {
            self.apply_progress(now, revision - 1);
        }
        let events = self.apply(now, revision, changes);
        // Watchers waiting for a start revision below this one begin here.
        self.promote_waiting(now, revision - 1);
        let report = self.dispatch(now, revision, &events);
        if self.blocked.is_none() {
            self.finish_revision(now, revision);
        }
        report
    }

    /// The store's revision advanced to `revision` without changes for this resource.
    pub fn handle_progress(&mut self, now: Instant, revision: Revision) {
        self.advance(now);
        self.drain_inbox(now);
        if self.blocked.is_some() {
            // Applied once the blocked revision is done.
            self.held_progress = self.held_progress.max(revision);
            return;
        }
        self.apply_progress(now, revision);
    }

    fn apply_progress(&mut self, now: Instant, revision: Revision) {
        let mut data = self.shared.write();
        if revision <= data.revision {
            return;
        }
        data.revision = revision;
        drop(data);
        self.finish_revision(now, revision);
    }

    /// The cache was re-listed at `revision` (after the store compacted past it): the state is
    /// replaced, the history restarts, and every watcher gets an in-stream 410 after its
    /// backlog, so clients re-list too. Never a silent gap.
    pub fn handle_reset(
        &mut self,
        now: Instant,
        revision: Revision,
        objects: impl IntoIterator<Item = Arc<Object>>,
    ) {
        self.advance(now);
        self.drain_inbox(now);
        let mut state = StateMap::new_sync();
        for object in objects {
            state.insert_mut(object.key().clone(), object);
        }
        // Counted before the reset is published: whoever observes the reloaded state (an
        // object only the list has, a watcher's 410) also observes the count.
        self.shared.metrics.cache_resets.inc();
        let weight = crate::cache::state_weight(&state);
        let live = state.clone();
        let replaced = {
            let mut data = self.shared.write();
            self.shared
                .count_object_bytes(weight - self.shared.metrics.object_bytes.get());
            data.history.reset(revision);
            self.shared.set_history_bytes(0);
            data.snapshots.clear();
            data.snapshots.push(Snapshot::new(revision, state.clone()));
            data.history.settle();
            data.revision = revision;
            data.epoch += 1;
            std::mem::replace(&mut data.state, state)
        };
        // The objects the list replaced (a new decode of each, or gone) are no longer live: one
        // still held elsewhere (by a queued event or initial-state item) counts as released,
        // as the versions the reset history let go do.
        if let Some(account) = self.shared.shared_account() {
            for (key, object) in replaced.iter() {
                let kept = live.get(key).is_some_and(|now| Arc::ptr_eq(now, object));
                // The replaced map holds one reference; another is a holder outside the cache.
                if !kept && Arc::strong_count(object) > 1 {
                    crate::Object::release(object, account);
                }
            }
        }
        drop(replaced);
        self.blocked = None;
        let floor = revision;
        let ids: Vec<WatcherId> = self.by_id.keys().copied().collect();
        for id in ids {
            if let Some(watcher) = self.remove_synced(id) {
                let position = self.shared.dispatched();
                self.end(watcher, expired(position, floor, true));
            }
        }
        let waiting: Vec<Waiting> = std::mem::take(&mut self.waiting).into_values().collect();
        self.waiting_by_id.clear();
        self.wait_give_ups.clear();
        for waiting in waiting {
            let position = waiting.watcher.position;
            self.end(*waiting.watcher, expired(position, floor, false));
        }
        self.deadlines.clear();
        self.bookmarks.clear();
        self.shared.set_dispatched(revision);
    }

    /// The server is shutting down: every watcher this dispatcher owns ends after its queued
    /// items, a synced one that allows bookmarks with a final bookmark at the dispatched
    /// revision first; later registrations and hand-backs end the same way (see "Shutdown"
    /// in the module docs). Idempotent.
    ///
    /// # Panics
    /// If the dispatcher is blocked (legacy mode): like a revision, shutdown waits for it.
    pub fn handle_shutdown(&mut self, now: Instant) {
        assert!(
            self.blocked.is_none(),
            "shutdown waits for a blocked legacy revision"
        );
        self.advance(now);
        self.drain_inbox(now);
        if self.shutting_down {
            return;
        }
        self.shutting_down = true;
        let mut ids: Vec<WatcherId> = self.by_id.keys().copied().collect();
        ids.sort_unstable();
        for id in ids {
            if let Some(watcher) = self.remove_synced(id) {
                self.end_at_shutdown(watcher);
            }
        }
        let waiting: Vec<Waiting> = std::mem::take(&mut self.waiting).into_values().collect();
        self.waiting_by_id.clear();
        self.wait_give_ups.clear();
        for waiting in waiting {
            self.end(*waiting.watcher, WatchEnd::Shutdown);
        }
        self.deadlines.clear();
        self.bookmarks.clear();
    }

    /// Whether [`Dispatcher::handle_shutdown`] was called.
    #[must_use]
    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down
    }

    /// Ends a watcher that has every selected event up to the dispatched revision: a final
    /// bookmark there if it allows bookmarks, then [`WatchEnd::Shutdown`].
    fn end_at_shutdown(&mut self, mut watcher: Watcher) {
        if watcher.allow_bookmarks {
            let dispatched = self.shared.dispatched();
            watcher.queue.push_unbounded(&[WatchItem::Bookmark {
                revision: dispatched,
                initial_events_end: false,
            }]);
            watcher.last_sent = dispatched;
            self.shared.metrics.bookmarks_sent.inc();
        }
        self.end(watcher, WatchEnd::Shutdown);
    }

    /// Handles every timer due at `now`: bookmarks, deadlines, start-revision waits that gave
    /// up, and (legacy) the end of the dispatch budget.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.advance(now);
        self.drain_inbox(now);
        if let Some(blocked) = &self.blocked {
            if blocked.budget_deadline <= now {
                self.expire_blocked(now);
            } else {
                self.retry_blocked(now);
            }
        }
        while let Some(&(due, id)) = self.deadlines.first() {
            if due > now {
                break;
            }
            self.deadlines.pop_first();
            if let Some(watcher) = self.remove_synced(id) {
                self.end(watcher, WatchEnd::Deadline);
            } else if let Some(revision) = self.waiting_by_id.remove(&id)
                && let Some(waiting) = self.waiting.remove(&(revision, id))
            {
                self.end(*waiting.watcher, WatchEnd::Deadline);
            }
        }
        while let Some(&(due, revision, id)) = self.wait_give_ups.first() {
            if due > now {
                break;
            }
            self.wait_give_ups.pop_first();
            if let Some(waiting) = self.waiting.remove(&(revision, id)) {
                self.waiting_by_id.remove(&id);
                let current = self.shared.dispatched();
                self.end(
                    *waiting.watcher,
                    WatchEnd::TooLargeResourceVersion {
                        requested: revision,
                        current,
                    },
                );
            }
        }
        if self.blocked.is_none() {
            self.send_due_bookmarks(now);
        }
    }

    /// Legacy mode: retries the blocked pushes (call when consumers made room).
    pub fn retry_blocked(&mut self, now: Instant) {
        self.advance(now);
        let Some(mut blocked) = self.blocked.take() else {
            return;
        };
        let revision = self.shared.read().revision;
        blocked.pending.retain(|(slot, items)| {
            let Some(entry) = self.slots[*slot].as_mut() else {
                return false;
            };
            match entry.watcher.queue.push_batch(items) {
                PushResult::Pushed => {
                    entry.watcher.last_sent = revision;
                    false
                }
                PushResult::Full => true,
                PushResult::Closed => false,
            }
        });
        if blocked.pending.is_empty() {
            // Unused budget goes back.
            self.legacy_budget = (self.legacy_budget
                + blocked.budget_deadline.saturating_duration_since(now))
            .min(self.shared.config.legacy_budget_max);
            self.finish_revision(now, revision);
        } else {
            self.blocked = Some(blocked);
        }
    }

    fn expire_blocked(&mut self, now: Instant) {
        let Some(blocked) = self.blocked.take() else {
            return;
        };
        let revision = self.shared.read().revision;
        for (slot, _) in blocked.pending {
            let id = match &self.slots[slot] {
                Some(entry) => entry.watcher.id,
                None => continue,
            };
            if let Some(watcher) = self.remove_synced(id) {
                self.end(watcher, WatchEnd::Unresponsive);
            }
        }
        self.legacy_budget = Duration::ZERO;
        self.finish_revision(now, revision);
    }

    /// Builds the revision's events, applies them to the state and appends them to the history
    /// with a snapshot, all under one write lock.
    fn apply(
        &mut self,
        now: Instant,
        revision: Revision,
        changes: Vec<Change>,
    ) -> Vec<SharedEvent> {
        let metrics = &self.shared.metrics;
        let mut data = self.shared.write();
        assert!(
            revision > data.revision,
            "revision {revision} is not above the cache's {}",
            data.revision
        );
        let mut events = Vec::with_capacity(changes.len());
        let mut weight = 0i64;
        for change in changes {
            let prev = data.state.get(&change.key).cloned();
            match &change.object {
                Some(object) => {
                    data.state.insert_mut(change.key.clone(), object.clone());
                    weight += weight_of(object);
                }
                None => {
                    if prev.is_none() {
                        // Deleting what the cache does not hold changes nothing visible.
                        continue;
                    }
                    data.state.remove_mut(&change.key);
                }
            }
            if let Some(prev) = &prev {
                weight -= weight_of(prev);
            }
            events.push(Arc::new(Event::new(revision, change.object, prev)));
        }
        self.shared.count_object_bytes(weight);
        data.revision = revision;
        if events.is_empty() {
            return events;
        }
        let (change, _evicted) = data.history.append_revision(&events, now);
        self.shared.set_history_bytes(data.history.bytes());
        if let Some(target) = self
            .shared
            .account()
            .and_then(|account| account.history_target(data.history.bytes()))
        {
            data.history.evict_to(target);
            self.shared.set_history_bytes(data.history.bytes());
        }
        match change {
            Some(CapacityChange::Grew(capacity)) => {
                metrics.history_capacity_increases.inc();
                metrics.history_capacity.set(capacity as i64);
            }
            Some(CapacityChange::Shrank(capacity)) => {
                metrics.history_capacity_decreases.inc();
                metrics.history_capacity.set(capacity as i64);
            }
            None => {}
        }
        let snapshot = Snapshot::new(revision, data.state.clone());
        data.snapshots.push(snapshot);
        let floor = data.history.servable_floor();
        data.snapshots.trim(floor);
        data.history.settle();
        metrics.events_dispatched.add(events.len() as u64);
        metrics.revisions_dispatched.inc();
        events
    }

    /// Offers one revision to the synced watchers that select it.
    fn dispatch(
        &mut self,
        now: Instant,
        revision: Revision,
        events: &[SharedEvent],
    ) -> DispatchReport {
        let mut report = DispatchReport {
            events: events.len(),
            ..DispatchReport::default()
        };
        let mut matches = std::mem::take(&mut self.matches);
        matches.clear();
        for (index, event) in events.iter().enumerate() {
            report.evaluated += self.collect_matches(index as u32, event, &mut matches);
        }
        if events.len() > 1 {
            // Group each watcher's items, keeping the store's order within the revision.
            matches.sort_by_key(|(slot, index, _)| (*slot, *index));
        }
        let mut stalled: Vec<usize> = Vec::new();
        let mut closed: Vec<usize> = Vec::new();
        let mut blocked: Vec<(usize, Vec<WatchItem>)> = Vec::new();
        let mut start = 0;
        while start < matches.len() {
            let slot = matches[start].0;
            let mut end = start + 1;
            while end < matches.len() && matches[end].0 == slot {
                end += 1;
            }
            let group = &mut matches[start..end];
            start = end;
            let Some(entry) = self.slots[slot].as_mut() else {
                continue;
            };
            if entry.watcher.last_sent >= revision {
                // Safety net: the resync point is the last dispatched revision, so this never
                // happens; counted so a test can prove it.
                self.shared
                    .metrics
                    .watcher_skipped_events
                    .add(group.len() as u64);
                continue;
            }
            let queue = &entry.watcher.queue;
            // Moved, not cloned: `matches` is cleared before its next use, and a full or
            // closed queue does not consume the iterator (the items stay for a second push
            // after a growth, or for `blocked`).
            let mut pushed = queue.push_items(group.iter_mut().map(|(_, _, item)| take_item(item)));
            if pushed == PushResult::Full
                && self.shared.config.mode == WatchMode::StallResume
                && queue.grow_after_drain().is_some()
            {
                // Its consumer emptied the queue since it last grew: a burst it was late for,
                // not a consumer that cannot keep up (see `crate::queue`).
                self.shared.metrics.watch_queue_growths.inc();
                pushed = queue.push_items(group.iter_mut().map(|(_, _, item)| take_item(item)));
            }
            match pushed {
                PushResult::Pushed => {
                    entry.watcher.last_sent = revision;
                    report.pushed += group.len();
                }
                PushResult::Full => match self.shared.config.mode {
                    WatchMode::StallResume => stalled.push(slot),
                    WatchMode::Legacy => {
                        blocked.push((
                            slot,
                            group.iter_mut().map(|(_, _, i)| take_item(i)).collect(),
                        ));
                    }
                },
                PushResult::Closed => closed.push(slot),
            }
        }
        self.shared.metrics.live_pushes.add(report.pushed as u64);
        self.matches = matches;
        report.stalled = stalled.len();
        report.blocked = blocked.len();
        for slot in closed {
            self.drop_slot(slot);
        }
        for slot in stalled {
            self.stall(now, slot, revision);
        }
        if !blocked.is_empty() {
            self.block(now, blocked);
        }
        report
    }

    fn collect_matches(
        &self,
        index: u32,
        event: &SharedEvent,
        out: &mut Vec<(usize, u32, WatchItem)>,
    ) -> usize {
        let object = event
            .object()
            .or(event.prev())
            .expect("an event has an object");
        // Reference-count bumps, not allocations: the object holds these as `Arc<str>`.
        let namespace = object.namespace_arc().clone();
        let name = object.name_arc().clone();
        let mut evaluated = 0;
        let mut visit = |route: &Route| {
            if let Some(slots) = self.routes.get(route) {
                evaluated += slots.len();
                for &slot in slots {
                    let entry = self.slots[slot].as_ref().expect("routed slots are live");
                    let selection = &entry.watcher.selection;
                    let event_type = match route {
                        // The event's own scope routes (below): namespace and name match.
                        Route::Scope(..) => selection.event_type_in_scope(event),
                        Route::Trigger(_) => selection.event_type(event),
                    };
                    if let Some(event_type) = event_type {
                        out.push((
                            slot,
                            index,
                            WatchItem::Event {
                                event_type,
                                event: event.clone(),
                            },
                        ));
                    }
                }
            }
        };
        if self.routes.is_empty() {
            return 0;
        }
        // Only the shapes some watcher routes by are looked up (most caches' watchers route
        // by one or two), in the same order.
        let routed = |route: &Route| scope_shape(route).is_some_and(|s| self.scope_routes[s] > 0);
        for route in [
            Route::Scope(None, None),
            Route::Scope(Some(namespace.clone()), None),
            Route::Scope(None, Some(name.clone())),
            Route::Scope(Some(namespace), Some(name)),
        ] {
            if routed(&route) {
                visit(&route);
            }
        }
        if let Some(field) = &self.shared.config.trigger_field {
            let new_value = event.object().map(|o| o.field(field));
            let old_value = event.prev().map(|o| o.field(field));
            if let Some(value) = new_value {
                visit(&Route::Trigger(Arc::from(value)));
            }
            if let Some(value) = old_value
                && Some(value) != new_value
            {
                visit(&Route::Trigger(Arc::from(value)));
            }
        }
        evaluated
    }

    /// Publishes the dispatched revision and starts the watchers waiting for it.
    fn finish_revision(&mut self, now: Instant, revision: Revision) {
        self.shared.set_dispatched(revision);
        self.promote_waiting(now, revision);
        let held = std::mem::take(&mut self.held_progress);
        if held > revision {
            self.apply_progress(now, held);
        }
    }

    /// Starts waiting watchers whose start revision is at or below `revision`, which must be
    /// the dispatched revision or the one just below the revision being dispatched.
    fn promote_waiting(&mut self, now: Instant, revision: Revision) {
        while let Some(entry) = self.waiting.first_entry() {
            let (start, _) = *entry.key();
            if start > revision {
                break;
            }
            let waiting = entry.remove();
            self.waiting_by_id.remove(&waiting.watcher.id);
            if let Some(give_up) = waiting.give_up_at {
                self.wait_give_ups
                    .remove(&(give_up, start, waiting.watcher.id));
            }
            if let Some(deadline) = waiting.watcher.deadline {
                self.deadlines.remove(&(deadline, waiting.watcher.id));
            }
            if waiting.initial_state {
                self.start_initial_state(now, *waiting.watcher);
            } else {
                let mut watcher = *waiting.watcher;
                watcher.position = start;
                watcher.last_sent = start;
                self.add_synced(now, watcher);
            }
        }
    }

    fn drain_inbox(&mut self, now: Instant) {
        if self.blocked.is_some() {
            // Legacy mode, mid-revision: a watcher registered now would miss the revision
            // being pushed. Messages wait until the revision is done.
            return;
        }
        self.shared.to_dispatcher.take_all(&mut self.inbox);
        while let Some(message) = self.inbox.pop_front() {
            match message {
                ToDispatcher::Register(watcher, start) => self.register(now, *watcher, start),
                ToDispatcher::Resync(watcher) => self.resync(now, *watcher),
                ToDispatcher::Cancel(id) => self.cancel(id),
            }
        }
    }

    fn register(&mut self, now: Instant, mut watcher: Watcher, start: WatchStart) {
        if watcher.queue.is_closed() {
            self.forget(&watcher);
            return;
        }
        if self.shutting_down {
            self.end(watcher, WatchEnd::Shutdown);
            return;
        }
        let (dispatched, floor, epoch) = {
            let data = self.shared.read();
            (
                self.shared.dispatched(),
                data.history.servable_floor(),
                data.epoch,
            )
        };
        watcher.epoch = epoch;
        match start {
            WatchStart::Now => {
                watcher.position = dispatched;
                watcher.last_sent = dispatched;
                self.add_synced(now, watcher);
            }
            WatchStart::After(revision) if revision < floor => {
                watcher.position = revision;
                self.end(watcher, expired(revision, floor, false));
            }
            WatchStart::After(revision) if revision == dispatched => {
                watcher.position = revision;
                watcher.last_sent = revision;
                self.add_synced(now, watcher);
            }
            WatchStart::After(revision) if revision > dispatched => {
                watcher.position = revision;
                self.add_waiting(watcher, revision, false, None);
            }
            WatchStart::After(revision) if self.shared.config.mode == WatchMode::Legacy => {
                self.legacy_replay_history(now, watcher, revision);
            }
            WatchStart::After(revision) => {
                // Behind the live stream: the catch-up worker serves it from the history,
                // exactly like a watcher that stalled (one resync path).
                watcher.position = revision;
                watcher.last_sent = revision;
                self.hand_to_worker(now, watcher);
            }
            WatchStart::InitialState { min_revision } => match min_revision {
                Some(min) if min > dispatched => {
                    let give_up = now + self.shared.config.fresh_wait_max;
                    self.add_waiting(watcher, min, true, Some(give_up));
                }
                _ => self.start_initial_state(now, watcher),
            },
        }
    }

    /// Captures the current state in O(1) and hands the watcher to the worker, which streams it
    /// (the initial state is served by the same resync path as a stalled watcher).
    fn start_initial_state(&mut self, now: Instant, mut watcher: Watcher) {
        // The state at the dispatched revision: in legacy mode the dispatcher can be blocked
        // in the middle of a revision whose state is already applied.
        let dispatched = self.shared.dispatched();
        let snapshot = {
            let data = self.shared.read();
            let map = data
                .snapshots
                .at(dispatched)
                .map_or_else(|| data.state.clone(), Snapshot::map_clone);
            Snapshot::new(dispatched, map)
        };
        if self.shared.config.mode == WatchMode::Legacy {
            self.legacy_replay_initial(now, watcher, &snapshot);
            return;
        }
        watcher.position = snapshot.revision();
        watcher.last_sent = 0;
        watcher.initial = Some(InitialPhase {
            snapshot,
            after_key: None,
        });
        watcher.last_progress = now;
        self.hand_to_worker(now, watcher);
    }

    /// Legacy mode, as Kubernetes before KEP-6268: a watch that starts behind replays its
    /// initial state on its own, outside the queue's bound (Kubernetes' per-watcher
    /// `processInterval`), and meanwhile takes live events into its bounded queue like any
    /// synced watcher; if they overflow, the budget runs out and it is force-closed.
    fn legacy_replay_initial(&mut self, now: Instant, mut watcher: Watcher, snapshot: &Snapshot) {
        let mut items: Vec<WatchItem> = snapshot
            .range(watcher.selection.key_prefix().as_deref(), None)
            .filter(|object| watcher.selection.matches(object))
            .map(|object| WatchItem::Initial(object.clone()))
            .collect();
        if watcher.allow_bookmarks {
            items.push(WatchItem::Bookmark {
                revision: snapshot.revision(),
                initial_events_end: true,
            });
        }
        watcher.queue.push_unbounded(&items);
        watcher.position = snapshot.revision();
        watcher.last_sent = snapshot.revision();
        self.add_synced(now, watcher);
    }

    /// Legacy mode: the replay of a watch that starts at an old revision (see
    /// [`Dispatcher::legacy_replay_initial`]).
    fn legacy_replay_history(&mut self, now: Instant, mut watcher: Watcher, from: Revision) {
        let dispatched = self.shared.dispatched();
        let mut events = Vec::new();
        self.shared
            .read()
            .history
            .read_range(from, dispatched, &mut events);
        let items: Vec<WatchItem> = events
            .iter()
            .filter_map(|event| {
                watcher
                    .selection
                    .event_type(event)
                    .map(|event_type| WatchItem::Event {
                        event_type,
                        event: event.clone(),
                    })
            })
            .collect();
        watcher.queue.push_unbounded(&items);
        watcher.position = dispatched;
        watcher.last_sent = dispatched;
        self.add_synced(now, watcher);
    }

    fn add_waiting(
        &mut self,
        watcher: Watcher,
        revision: Revision,
        initial_state: bool,
        give_up_at: Option<Instant>,
    ) {
        let id = watcher.id;
        if let Some(deadline) = watcher.deadline {
            self.deadlines.insert((deadline, id));
        }
        if let Some(give_up) = give_up_at {
            self.wait_give_ups.insert((give_up, revision, id));
        }
        self.waiting_by_id.insert(id, revision);
        self.waiting.insert(
            (revision, id),
            Waiting {
                watcher: Box::new(watcher),
                initial_state,
                give_up_at,
            },
        );
    }

    fn resync(&mut self, now: Instant, mut watcher: Watcher) {
        if watcher.queue.is_closed() {
            self.shared.metrics.stalled_watchers.add(-1);
            self.forget(&watcher);
            return;
        }
        let dispatched = self.shared.dispatched();
        let mut events = Vec::new();
        let (floor, epoch) = {
            let data = self.shared.read();
            if watcher.position < dispatched && watcher.position >= data.history.servable_floor() {
                data.history
                    .read_range(watcher.position, dispatched, &mut events);
            }
            (data.history.servable_floor(), data.epoch)
        };
        debug_assert!(
            watcher.position <= dispatched,
            "the worker hands over at most at the dispatched revision"
        );
        if watcher.epoch != epoch || watcher.position < floor {
            self.shared.metrics.stalled_watchers.add(-1);
            let reached_live = watcher.reached_live;
            let position = watcher.position;
            self.end(watcher, expired(position, floor, reached_live));
            return;
        }
        // Push the few events dispatched since the worker's last scan, a revision at a time.
        let mut index = 0;
        while index < events.len() {
            let revision = events[index].revision();
            self.batch.clear();
            while index < events.len() && events[index].revision() == revision {
                if let Some(event_type) = watcher.selection.event_type(&events[index]) {
                    self.batch.push(WatchItem::Event {
                        event_type,
                        event: events[index].clone(),
                    });
                }
                index += 1;
            }
            if self.batch.is_empty() {
                continue;
            }
            match watcher.queue.push_batch(&self.batch) {
                PushResult::Pushed => {
                    watcher.position = revision;
                    watcher.last_sent = revision;
                    watcher.catchup_events += self.batch.len() as u64;
                    self.shared
                        .metrics
                        .watcher_deferred_events
                        .add(self.batch.len() as u64);
                }
                PushResult::Full => {
                    watcher.position = revision - 1;
                    self.shared
                        .to_worker
                        .send(ToWorker::Unsynced(Box::new(watcher)));
                    return;
                }
                PushResult::Closed => {
                    self.shared.metrics.stalled_watchers.add(-1);
                    self.forget(&watcher);
                    return;
                }
            }
        }
        watcher.position = dispatched;
        let metrics = &self.shared.metrics;
        metrics.watcher_catchup_rounds.inc();
        metrics
            .watcher_catchup_events
            .observe(watcher.catchup_events);
        metrics.stalled_watchers.add(-1);
        watcher.catchup_events = 0;
        watcher.reached_live = true;
        watcher.in_initial_phase = false;
        if self.shutting_down {
            self.end_at_shutdown(watcher);
            return;
        }
        self.add_synced(now, watcher);
    }

    fn cancel(&mut self, id: WatcherId) {
        if let Some(watcher) = self.remove_synced(id) {
            self.forget(&watcher);
        } else if let Some(revision) = self.waiting_by_id.remove(&id)
            && let Some(waiting) = self.waiting.remove(&(revision, id))
        {
            if let Some(give_up) = waiting.give_up_at {
                self.wait_give_ups.remove(&(give_up, revision, id));
            }
            if let Some(deadline) = waiting.watcher.deadline {
                self.deadlines.remove(&(deadline, id));
            }
            self.forget(&waiting.watcher);
        }
        // Otherwise the worker owns it (it sees the closed queue) or it already ended.
    }

    fn add_synced(&mut self, now: Instant, mut watcher: Watcher) {
        // On the live stream: past its initial phase for good.
        watcher.reached_live = true;
        watcher.in_initial_phase = false;
        let route = watcher.selection.route();
        let slot = match self.free_slots.pop() {
            Some(slot) => slot,
            None => {
                self.slots.push(None);
                self.slots.len() - 1
            }
        };
        let bucket = match self.routes.entry(route.clone()) {
            std::collections::hash_map::Entry::Occupied(bucket) => bucket.into_mut(),
            std::collections::hash_map::Entry::Vacant(vacant) => {
                if let Some(shape) = scope_shape(&route) {
                    self.scope_routes[shape] += 1;
                }
                vacant.insert(Vec::new())
            }
        };
        bucket.push(slot);
        let route_index = bucket.len() - 1;
        let id = watcher.id;
        // Counted before the watcher's queue says it is synced.
        self.shared.metrics.synced_watchers.add(1);
        watcher.queue.set_state(WatcherState::Synced);
        if let Some(deadline) = watcher.deadline {
            self.deadlines.insert((deadline, id));
        }
        let bookmark_due = self.next_bookmark(now, &watcher);
        if let Some(due) = bookmark_due {
            self.bookmarks.insert((due, id));
        }
        self.by_id.insert(id, slot);
        self.slots[slot] = Some(Slot {
            watcher,
            route,
            route_index,
            bookmark_due,
        });
    }

    fn next_bookmark(&self, now: Instant, watcher: &Watcher) -> Option<Instant> {
        if !watcher.allow_bookmarks {
            return None;
        }
        // Kubernetes' `cacheWatcher.nextBookmarkTime`: the earlier of one interval from now
        // and `bookmark_before_deadline` before the deadline; none once that instant passed
        // (a watch registered exactly at it is due at once, one registered later gets none).
        let config = &self.shared.config;
        let mut due = now + config.bookmark_interval;
        if let Some(deadline) = watcher.deadline {
            if deadline.as_nanos() < config.bookmark_before_deadline.as_nanos() as u64 {
                return None;
            }
            due = due.min(deadline.saturating_sub(config.bookmark_before_deadline));
            if due < now {
                return None;
            }
        }
        Some(due)
    }

    /// Removes a synced watcher from every index and returns it.
    fn remove_synced(&mut self, id: WatcherId) -> Option<Watcher> {
        let slot = self.by_id.remove(&id)?;
        let entry = self.slots[slot].take().expect("indexed slots are live");
        let bucket = self
            .routes
            .get_mut(&entry.route)
            .expect("a synced watcher's route exists");
        bucket.swap_remove(entry.route_index);
        if let Some(&moved) = bucket.get(entry.route_index) {
            self.slots[moved]
                .as_mut()
                .expect("routed slots are live")
                .route_index = entry.route_index;
        }
        if bucket.is_empty() {
            self.routes.remove(&entry.route);
            if let Some(shape) = scope_shape(&entry.route) {
                self.scope_routes[shape] -= 1;
            }
        }
        if let Some(due) = entry.bookmark_due {
            self.bookmarks.remove(&(due, id));
        }
        if let Some(deadline) = entry.watcher.deadline {
            self.deadlines.remove(&(deadline, id));
        }
        self.free_slots.push(slot);
        self.shared.metrics.synced_watchers.add(-1);
        Some(entry.watcher)
    }

    fn drop_slot(&mut self, slot: usize) {
        let id = match &self.slots[slot] {
            Some(entry) => entry.watcher.id,
            None => return,
        };
        if let Some(watcher) = self.remove_synced(id) {
            self.forget(&watcher);
        }
    }

    /// A synced watcher's push failed: it becomes unsynced at `revision - 1`.
    fn stall(&mut self, now: Instant, slot: usize, revision: Revision) {
        let id = match &self.slots[slot] {
            Some(entry) => entry.watcher.id,
            None => return,
        };
        let Some(mut watcher) = self.remove_synced(id) else {
            return;
        };
        // Every selected event up to revision - 1 is queued (it was synced); revision is in the
        // history (appended before dispatch), so a pass re-offers it.
        watcher.position = watcher.position.max(revision - 1);
        self.shared.metrics.watcher_stalls.inc();
        self.hand_to_worker(now, watcher);
    }

    fn hand_to_worker(&mut self, now: Instant, mut watcher: Watcher) {
        // Counted before the watcher's queue says it is unsynced.
        self.shared.metrics.stalled_watchers.add(1);
        watcher.unsynced_since = now;
        watcher.queue.publish_unsynced(now, watcher.position);
        watcher.fresh_stall = true;
        watcher.catchup_events = 0;
        watcher.queue.set_state(if watcher.initial.is_some() {
            WatcherState::Initial
        } else {
            WatcherState::Unsynced
        });
        self.shared
            .to_worker
            .send(ToWorker::Unsynced(Box::new(watcher)));
    }

    fn block(&mut self, now: Instant, pending: Vec<(usize, Vec<WatchItem>)>) {
        let config = &self.shared.config;
        let elapsed = now.saturating_duration_since(self.legacy_refilled_at);
        self.legacy_refilled_at = now;
        let refill = config
            .legacy_budget_refill_per_second
            .mul_f64(elapsed.as_secs_f64());
        let budget = (self.legacy_budget + refill).min(config.legacy_budget_max);
        // The budget is taken whole for this revision; what is left is returned.
        self.legacy_budget = Duration::ZERO;
        self.blocked = Some(Blocked {
            pending,
            budget_deadline: now + budget,
        });
        if budget.is_zero() {
            self.expire_blocked(now);
        }
    }

    fn send_due_bookmarks(&mut self, now: Instant) {
        let dispatched = self.shared.dispatched();
        while let Some(&(due, id)) = self.bookmarks.first() {
            if due > now {
                break;
            }
            self.bookmarks.pop_first();
            let Some(&slot) = self.by_id.get(&id) else {
                continue;
            };
            let next = {
                let entry = self.slots[slot].as_ref().expect("indexed slots are live");
                // The pre-deadline instant is served once (Kubernetes re-examines it a
                // second later and drops it).
                self.next_bookmark(now, &entry.watcher)
                    .filter(|&next| next > now)
            };
            let entry = self.slots[slot].as_mut().expect("indexed slots are live");
            if entry.bookmark_due != Some(due) {
                continue;
            }
            if dispatched > entry.watcher.last_sent {
                let item = WatchItem::Bookmark {
                    revision: dispatched,
                    initial_events_end: false,
                };
                if entry.watcher.queue.push(item) == PushResult::Pushed {
                    entry.watcher.last_sent = dispatched;
                    self.shared.metrics.bookmarks_sent.inc();
                }
            }
            entry.bookmark_due = next;
            if let Some(next) = next {
                self.bookmarks.insert((next, id));
            }
        }
    }

    /// Ends `watcher` with `end`, counted first: a client that has read the end (the 410,
    /// the closed stream) reads the termination and one watcher fewer in the metrics.
    fn end(&mut self, watcher: Watcher, end: WatchEnd) {
        self.shared.metrics.terminated(end.reason());
        self.shared.metrics.watchers.add(-1);
        watcher.queue.push_end(end);
    }

    /// The client went away: no end to deliver, just forget it.
    fn forget(&mut self, watcher: &Watcher) {
        if watcher.queue.was_cut() {
            self.shared
                .metrics
                .terminated(TerminationReason::MemoryPressure);
        }
        watcher.queue.set_state(WatcherState::Ended);
        self.shared.metrics.watchers.add(-1);
    }
}

/// Moves a matched item out of the dispatcher's match list (which is cleared before its next
/// use), leaving a bookmark that allocates nothing: one reference-count pair per delivery
/// fewer than a clone.
fn take_item(item: &mut WatchItem) -> WatchItem {
    std::mem::replace(
        item,
        WatchItem::Bookmark {
            revision: 0,
            initial_events_end: false,
        },
    )
}

/// The 410 for a watcher at `position` when the history's floor is `floor`.
pub(crate) fn expired(position: Revision, floor: Revision, reached_live: bool) -> WatchEnd {
    WatchEnd::Expired {
        position,
        floor,
        reason: if reached_live {
            TerminationReason::ResourceExpired
        } else {
            TerminationReason::ResourceExpiredInitial
        },
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::{CacheConfig, WatchCache, WatchRequest, WatchStart};

    /// A dispatcher with three synced watchers (the second cancelled, leaving a free slot) and
    /// one waiting for a future revision.
    fn dispatcher_with_watchers() -> (Vec<crate::Watch>, Dispatcher) {
        let now = Instant::ZERO + Duration::from_secs(1);
        let (cache, mut dispatcher, _worker) =
            WatchCache::new(CacheConfig::default(), 5, Vec::new()).unwrap();
        let mut watches: Vec<_> = (0..3)
            .map(|_| {
                let mut request = WatchRequest::new(WatchStart::Now);
                request.deadline = Some(now + Duration::from_secs(60));
                cache.watch(request, now)
            })
            .collect();
        watches.push(cache.watch(WatchRequest::new(WatchStart::After(9)), now));
        dispatcher.handle_messages(now);
        watches[1].queue().close();
        dispatcher.handle_revision(now, 6, vec![object("a", 6)]);
        dispatcher.handle_messages(now);
        assert_eq!((dispatcher.synced_len(), dispatcher.waiting_len()), (2, 1));
        assert_eq!(dispatcher.free_slots.len(), 1);
        assert_eq!(dispatcher.check_invariants(), Ok(()));
        (watches, dispatcher)
    }

    /// A driver thread sleeps until the dispatcher has a message: the hook wakes it on a
    /// registration (and on every later message), and only the first hook is kept.
    #[test]
    fn the_notify_hook_wakes_the_driver_on_a_registration() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let now = Instant::ZERO + Duration::from_secs(1);
        let (cache, dispatcher, _worker) =
            WatchCache::new(CacheConfig::default(), 5, Vec::new()).unwrap();
        let calls = Arc::new(AtomicUsize::new(0));
        let counted = calls.clone();
        dispatcher.set_notify(Box::new(move || {
            counted.fetch_add(1, Ordering::SeqCst);
        }));
        dispatcher.set_notify(Box::new(|| panic!("only the first hook is kept")));
        assert!(!dispatcher.has_messages());
        let _watch = cache.watch(WatchRequest::new(WatchStart::Now), now);
        assert!(calls.load(Ordering::SeqCst) >= 1);
        assert!(dispatcher.has_messages());
    }

    /// What a consumer sees when its watch ends by a reset: the metrics read by its waker,
    /// run when the end is queued (the first moment a client can know of it).
    struct EndProbe {
        cache: WatchCache,
        seen: std::sync::Mutex<Option<(u64, i64, u64, Revision)>>,
    }

    impl std::task::Wake for EndProbe {
        fn wake(self: Arc<Self>) {
            self.wake_by_ref();
        }

        fn wake_by_ref(self: &Arc<Self>) {
            let metrics = self.cache.metrics();
            let terminations = TerminationReason::ALL
                .iter()
                .map(|&reason| metrics.terminations(reason))
                .sum();
            *self.seen.lock().unwrap() = Some((
                metrics.cache_resets.get(),
                metrics.watchers.get(),
                terminations,
                self.cache.latest().revision(),
            ));
        }
    }

    /// A reset is counted, its state served, and its watchers' ends counted (one watcher
    /// fewer) before the end reaches a consumer: a client that has read the 410 and then
    /// reads the metrics or the cache sees all of it. (The watcher gauge was lowered after
    /// the end was queued.)
    #[test]
    fn a_reset_and_the_ends_it_makes_are_counted_before_a_consumer_sees_an_end() {
        let now = Instant::ZERO + Duration::from_secs(1);
        let (cache, mut dispatcher, _worker) =
            WatchCache::new(CacheConfig::default(), 5, Vec::new()).unwrap();
        let watch = cache.watch(WatchRequest::new(WatchStart::Now), now);
        dispatcher.handle_messages(now);
        let probe = Arc::new(EndProbe {
            cache: cache.clone(),
            seen: std::sync::Mutex::new(None),
        });
        let waker = std::task::Waker::from(probe.clone());
        let mut out = Vec::new();
        let polled = watch.poll_pop_many(&mut std::task::Context::from_waker(&waker), 10, &mut out);
        assert!(polled.is_pending(), "nothing queued yet: {polled:?}");
        dispatcher.handle_reset(
            now,
            9,
            [object("a", 9)].map(|change| change.object.unwrap()),
        );
        let seen = probe.seen.lock().unwrap().take();
        assert_eq!(
            seen,
            Some((1, 0, 1, 9)),
            "(resets, watchers, ends, revision) at the end"
        );
    }

    /// The driving contract (non-decreasing `now`) is checked in debug builds: a driver whose
    /// clock went backwards is told at once rather than mis-scheduling timers.
    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "time went backwards")]
    fn time_going_backwards_is_refused_in_debug_builds() {
        let (cache, mut dispatcher, _worker) =
            WatchCache::new(CacheConfig::default(), 5, Vec::new()).unwrap();
        let now = Instant::ZERO + Duration::from_secs(2);
        let _watch = cache.watch(WatchRequest::new(WatchStart::Now), now);
        dispatcher.handle_messages(now);
        dispatcher.handle_timeout(Instant::ZERO + Duration::from_secs(1));
    }

    /// Goal: caches that share a [`crate::metrics::MemoryAccount`] count their live objects
    /// and histories in it exactly (puts, updates, deletes, resets, a cache dropped); past the
    /// histories' budget a history above its fair share trims on its own next append, never
    /// another's and never its newest revision, so the histories stay below twice the budget.
    #[test]
    fn caches_sharing_an_account_keep_their_histories_to_its_budget() {
        use crate::metrics::MemoryAccount;
        let now = Instant::ZERO + Duration::from_secs(1);
        let sized = |name: &str, revision: Revision, bytes: usize| {
            Change::put(Arc::new(
                crate::Object::new(
                    "ns",
                    name,
                    std::collections::BTreeMap::new(),
                    std::collections::BTreeMap::new(),
                    revision,
                    serde_json::json!({"kind": "ConfigMap", "data": {"x": "y".repeat(bytes)}}),
                )
                .with_size_hint(bytes),
            ))
        };
        let weight = |change: &Change| change.object.as_ref().unwrap().weight() as i64;
        let budget = 1 << 20;
        let account = Arc::new(MemoryAccount::new(budget));
        let (a, mut dispatch_a, _wa) =
            WatchCache::new(CacheConfig::default(), 1, Vec::new()).unwrap();
        let (b, mut dispatch_b, _wb) =
            WatchCache::new(CacheConfig::default(), 1, Vec::new()).unwrap();
        a.account_in(account.clone());
        b.account_in(account.clone());
        a.account_in(account.clone());
        assert_eq!(account.caches(), 2, "a second call is ignored");
        // A's history: ten updates of one 100 KB object, about 2 MB counted (each event holds
        // the version it made and the one it replaced): past the budget of 1 MiB once...
        let mut versions = Vec::new();
        for revision in 2..12 {
            let change = sized("big", revision, 100_000);
            versions.push(weight(&change));
            dispatch_a.handle_revision(now, revision, vec![change]);
        }
        let history = |cache: &WatchCache| cache.metrics().history_bytes.get();
        assert_eq!(account.objects.get(), versions[9]);
        assert_eq!(account.histories.get(), history(&a));
        // ... where A, above its share (half the budget), trimmed to it on its appends.
        let share = (budget / 2) as i64;
        assert!(history(&a) <= share, "{} > {share}", history(&a));
        assert!(history(&a) > share / 2, "{}", history(&a));
        assert!(a.history_info().oldest > 2, "A evicted its oldest");
        // B appends small objects: within its share, it keeps them all.
        for revision in 2..6 {
            dispatch_b.handle_revision(
                now,
                revision,
                vec![sized(&format!("s{revision}"), revision, 10)],
            );
        }
        assert_eq!(b.history_info().oldest, 2, "B evicted nothing");
        assert_eq!(
            account.histories.get(),
            history(&a) + history(&b),
            "the account is the sum"
        );
        // A delete and a reset move the account exactly; a dropped cache leaves it.
        dispatch_b.handle_revision(now, 6, vec![Change::delete("ns/s2")]);
        assert_eq!(
            account.objects.get(),
            versions[9] + b.metrics().object_bytes.get()
        );
        dispatch_a.handle_reset(now, 20, Vec::new());
        assert_eq!(history(&a), 0);
        assert_eq!(account.objects.get(), b.metrics().object_bytes.get());
        assert_eq!(account.histories.get(), history(&b));
        drop((b, dispatch_b, _wb));
        assert_eq!(
            (
                account.caches(),
                account.objects.get(),
                account.histories.get()
            ),
            (1, 0, 0)
        );
    }

    /// A put of `big` at `revision` whose object counts 100 KB (its size hint).
    fn big_put(revision: Revision) -> Change {
        Change::put(Arc::new(
            crate::Object::new(
                "ns",
                "big",
                std::collections::BTreeMap::new(),
                std::collections::BTreeMap::new(),
                revision,
                serde_json::json!({"kind": "ConfigMap"}),
            )
            .with_size_hint(100_000),
        ))
    }

    /// An account with `budget` for its histories, and how many times its released-versions
    /// hook fired.
    fn counting_account(
        budget: usize,
    ) -> (
        Arc<crate::metrics::MemoryAccount>,
        Arc<std::sync::atomic::AtomicUsize>,
    ) {
        let account = Arc::new(crate::metrics::MemoryAccount::new(budget));
        let over = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = over.clone();
        account.on_released_over(Box::new(move || {
            counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }));
        (account, over)
    }

    /// Goal: what a served resource's definition holds beyond its objects counts in the
    /// shared account with the live objects, moves by its difference when set again, is
    /// counted when set before the cache joins the account, and leaves it with the cache.
    #[test]
    fn a_definition_s_bytes_count_with_the_objects_until_the_cache_goes() {
        use crate::metrics::MemoryAccount;
        let account = Arc::new(MemoryAccount::new(0));
        let (a, _da, _wa) = WatchCache::new(CacheConfig::default(), 1, Vec::new()).unwrap();
        a.account_in(account.clone());
        a.set_definition_bytes(1_000);
        assert_eq!(account.objects.get(), 1_000);
        a.set_definition_bytes(600);
        assert_eq!(account.objects.get(), 600);
        assert_eq!(a.metrics().definition_bytes.get(), 600);
        let (b, _db, _wb) = WatchCache::new(CacheConfig::default(), 1, Vec::new()).unwrap();
        b.set_definition_bytes(50);
        b.account_in(account.clone());
        assert_eq!(account.objects.get(), 650, "counted when it joins");
        drop((a, _da, _wa));
        assert_eq!(account.objects.get(), 50, "left with its cache");
    }

    /// Goal: what only the cache itself still holds when its history lets an event go (the
    /// snapshots it keeps down to the new floor) is never counted as released, not even for
    /// the length of a step: with no watcher, a history trimmed at every write never fires
    /// the hook, though one version is past the released budget.
    #[test]
    fn versions_only_the_cache_holds_are_never_released() {
        use std::sync::atomic::Ordering;
        let now = Instant::ZERO + Duration::from_secs(1);
        let (account, over) = counting_account(150_000);
        let (cache, mut dispatcher, _worker) =
            WatchCache::new(CacheConfig::default(), 1, Vec::new()).unwrap();
        cache.account_in(account.clone());
        for revision in 2..12 {
            dispatcher.handle_revision(now, revision, vec![big_put(revision)]);
        }
        assert!(cache.history_info().oldest > 3, "the history was trimmed");
        assert_eq!(account.released.get(), 0);
        assert_eq!(over.load(Ordering::Relaxed), 0, "never past the budget");
    }

    /// Goal: a version the cache lets go while a watcher's queue still holds it (through an
    /// event) counts as released, exactly once, until dropped, and the hook fires past the
    /// released budget; cutting the never-reading watcher's queue drops them all and ends it with a
    /// 410 (`memory_pressure`, its position below the floor), its owner drops it and counts
    /// it, while a watcher that reads is not cut and goes on. A version nobody else holds is
    /// not released, and a reset releases what a queue still holds (the versions its events
    /// replaced and the objects the list replaced).
    #[test]
    fn events_queues_hold_beyond_the_history_count_until_cut() {
        use crate::queue::Pop;
        use std::sync::atomic::Ordering;
        let now = Instant::ZERO + Duration::from_secs(1);
        let sized = big_put;
        let (account, over) = counting_account(1 << 20);
        let (cache, mut dispatcher, mut worker) =
            WatchCache::new(CacheConfig::default(), 1, Vec::new()).unwrap();
        cache.account_in(account.clone());
        let stalled = cache.watch(WatchRequest::new(WatchStart::Now), now);
        let reader = cache.watch(WatchRequest::new(WatchStart::Now), now);
        dispatcher.handle_messages(now);
        let capacity = stalled.queue().capacity();
        // Unread: nothing released while the history holds everything.
        dispatcher.handle_revision(now, 2, vec![sized(2)]);
        while let Pop::Item(_) = reader.try_pop() {}
        assert_eq!(account.released.get(), 0);
        // Twelve more versions of 100 KB (each event counts its version and the one it
        // replaced): the history keeps to its 1 MiB budget, and the stalled queue holds the
        // rest of its first `capacity` events; the reader pops everything.
        for revision in 3..15 {
            dispatcher.handle_revision(now, revision, vec![sized(revision)]);
            while let Pop::Item(_) = reader.try_pop() {}
            dispatcher.handle_messages(now);
            worker.run_pass(now);
        }
        let oldest = cache.history_info().oldest;
        let held_up_to = 1 + capacity as Revision;
        assert!(oldest > 3 && oldest <= held_up_to, "oldest {oldest}");
        let weight = sized(3).object.unwrap().weight() as i64;
        // The events at revisions 2..oldest were let go while the stalled queue held them:
        // the versions they replaced (2..oldest - 1; 2 was a creation) are neither live nor in
        // the history, and each counts once.
        let expected = weight * (oldest as i64 - 3);
        assert_eq!(account.released.get(), expected);
        assert!(account.released_over(), "{expected} > half of 1 MiB");
        assert!(over.load(Ordering::Relaxed) > 0, "the hook fired");
        assert!(
            cache.metrics().stalled_watchers.get() == 1,
            "the stalled one went unsynced"
        );
        // Cut: the reader's queue holds nothing released, the stalled one is ended.
        assert!(!reader.queue().cut_released());
        assert!(stalled.queue().cut_released());
        assert!(!stalled.queue().cut_released(), "once");
        assert_eq!(account.released.get(), 0, "every released version dropped");
        match stalled.try_pop() {
            Pop::End(WatchEnd::Expired {
                position,
                floor,
                reason,
            }) => {
                assert_eq!(reason, TerminationReason::MemoryPressure);
                assert_eq!(position, 1);
                assert!(
                    floor >= oldest - 1 - 1 && position < floor,
                    "{position} {floor}"
                );
            }
            other => panic!("{other:?}"),
        }
        // Its owner (the worker: it stalled) drops it and counts it; the reader goes on.
        worker.run_pass(now);
        dispatcher.handle_revision(now, 15, vec![sized(15)]);
        dispatcher.handle_messages(now);
        worker.run_pass(now);
        assert_eq!(
            cache
                .metrics()
                .terminations(TerminationReason::MemoryPressure),
            1
        );
        assert!(matches!(reader.try_pop(), Pop::Item(item) if item.revision() == 15));
        assert_eq!(
            account.released.get(),
            0,
            "the reader held nothing released"
        );
        // A reset releases what a queue still holds: fill the reader's queue, then relist.
        // The event of revision 16 holds the version it replaced (the history let it go) and
        // its own, live until the list replaced it.
        dispatcher.handle_revision(now, 16, vec![sized(16)]);
        dispatcher.handle_reset(now, 20, Vec::new());
        let queued = [15, 16].map(|revision| sized(revision).object.unwrap().weight() as i64);
        assert_eq!(
            account.released.get(),
            queued.iter().sum::<i64>(),
            "revision 16 is still queued"
        );
        drop(reader);
        assert_eq!(account.released.get(), 0);
    }

    fn object(name: &str, revision: Revision) -> Change {
        Change::put(Arc::new(crate::Object::new(
            "ns",
            name,
            std::collections::BTreeMap::new(),
            std::collections::BTreeMap::new(),
            revision,
            serde_json::json!({"kind": "ConfigMap"}),
        )))
    }

    /// `has_messages` tells a driver whether `handle_messages` has work now: not before a
    /// message, not after it was handled, and not while a legacy revision is blocked (messages
    /// wait for it).
    #[test]
    fn has_messages_is_what_handle_messages_would_do_now() {
        let now = Instant::ZERO + Duration::from_secs(1);
        let config = CacheConfig {
            mode: crate::WatchMode::Legacy,
            ..CacheConfig::default()
        };
        let (cache, mut dispatcher, _worker) = WatchCache::new(config, 5, Vec::new()).unwrap();
        assert!(!dispatcher.has_messages());
        let mut request = WatchRequest::new(WatchStart::Now);
        request.queue_capacity = Some(1);
        let _slow = cache.watch(request, now);
        assert!(dispatcher.has_messages());
        dispatcher.handle_messages(now);
        assert!(!dispatcher.has_messages());
        assert_eq!((dispatcher.synced_len(), dispatcher.waiting_len()), (1, 0));
        dispatcher.handle_revision(now, 6, vec![object("a", 6)]);
        dispatcher.handle_revision(now, 7, vec![object("b", 7)]);
        assert!(dispatcher.is_blocked());
        let _later = cache.watch(WatchRequest::new(WatchStart::Now), now);
        assert!(
            !dispatcher.has_messages(),
            "it waits for the blocked revision"
        );
    }

    fn broken(dispatcher: &Dispatcher) -> String {
        let found = dispatcher.check_invariants();
        assert!(found.is_err(), "not found");
        found.unwrap_err()
    }

    /// The invariant checker finds each kind of broken index and state (the tests and the
    /// simulator rely on it; cargo-mutants showed that weakening it would fail no other test,
    /// since the invariants hold).
    #[test]
    fn the_invariant_checker_finds_broken_slots_routes_and_waits() {
        let (_watches, mut d) = dispatcher_with_watchers();
        // A free slot listed twice; an empty slot not listed.
        let free = d.free_slots[0];
        d.free_slots.push(free);
        assert!(broken(&d).contains("free slots"));
        d.free_slots.clear();
        assert!(broken(&d).contains("free slots"));
        d.free_slots.push(free);
        assert_eq!(d.check_invariants(), Ok(()));
        // A slot at another index than its route says.
        let slot = *d.by_id.values().next().unwrap();
        d.slots[slot].as_mut().unwrap().route_index += 1;
        assert!(broken(&d).contains("misplaced"));
        d.slots[slot].as_mut().unwrap().route_index -= 1;
        // A watcher filed under another id.
        let (&id, &slot) = d.by_id.iter().next().unwrap();
        d.by_id.remove(&id);
        d.by_id.insert(id + 100, slot);
        assert!(broken(&d).contains("holds"));
        d.by_id.remove(&(id + 100));
        d.by_id.insert(id, slot);
        assert_eq!(d.check_invariants(), Ok(()));
        // A waiting watcher indexed at another revision.
        let (&waiting_id, &revision) = d.waiting_by_id.iter().next().unwrap();
        d.waiting_by_id.insert(waiting_id, revision + 1);
        assert!(broken(&d).contains("misindexed"));
        d.waiting_by_id.insert(waiting_id, revision);
        // A deadline of a watcher nobody owns.
        let (due, _) = *d.deadlines.iter().next().unwrap();
        d.deadlines.insert((due, 999));
        assert!(broken(&d).contains("does not own"));
        d.deadlines.remove(&(due, 999));
        assert_eq!(d.check_invariants(), Ok(()));
        // A shape of scope route counted that no route has (its look-ups would be skipped).
        let shape = (0..4).find(|&s| d.scope_routes[s] == 0).unwrap();
        d.scope_routes[shape] += 1;
        assert!(broken(&d).contains("scope routes"));
        d.scope_routes[shape] -= 1;
        assert_eq!(d.check_invariants(), Ok(()));
    }

    /// What dispatching a revision reports (the simulator's cost model and the benchmarks
    /// read it): its events, the watchers evaluated against them, the items pushed.
    #[test]
    fn a_dispatch_reports_its_events_evaluations_and_pushes() {
        let (_watches, mut d) = dispatcher_with_watchers();
        let now = Instant::ZERO + Duration::from_secs(1);
        let report = d.handle_revision(now, 7, vec![object("a", 7), object("b", 7)]);
        assert_eq!(
            report,
            DispatchReport {
                events: 2,
                evaluated: 4,
                pushed: 4,
                stalled: 0,
                blocked: 0,
            }
        );
    }

    /// The dispatcher owns exactly its synced and waiting watchers (the cross-actor check
    /// that no watcher is both synced and unsynced rests on it).
    #[test]
    fn the_dispatcher_owns_its_synced_and_waiting_watchers_only() {
        let (watches, d) = dispatcher_with_watchers();
        assert!(d.owns(watches[0].id()) && d.owns(watches[2].id()), "synced");
        assert!(d.owns(watches[3].id()), "waiting");
        assert!(!d.owns(watches[1].id()), "gone");
        assert!(!d.owns(999));
        // Operators read the same count from the synced-watchers gauge.
        assert_eq!(d.shared.metrics.synced_watchers.get(), 2);
    }

    /// A synced watcher is marked synced and nothing about it is above the dispatched
    /// revision: its position, what it was last sent, what its queue last took — each alone.
    #[test]
    fn the_invariant_checker_finds_a_synced_watcher_ahead_or_mismarked() {
        let (_watches, mut d) = dispatcher_with_watchers();
        let dispatched = d.shared.dispatched();
        let slot = *d.by_id.values().next().unwrap();
        fn watcher(d: &mut Dispatcher, slot: usize) -> &mut Watcher {
            &mut d.slots[slot].as_mut().unwrap().watcher
        }
        watcher(&mut d, slot)
            .queue
            .set_state(WatcherState::Unsynced);
        assert!(broken(&d).contains("marked Unsynced"));
        watcher(&mut d, slot).queue.set_state(WatcherState::Synced);
        watcher(&mut d, slot).position = dispatched + 1;
        assert!(broken(&d).contains("above the dispatched revision"));
        watcher(&mut d, slot).position = dispatched;
        watcher(&mut d, slot).last_sent = dispatched + 1;
        assert!(broken(&d).contains("above the dispatched revision"));
        watcher(&mut d, slot).last_sent = dispatched;
        assert_eq!(d.check_invariants(), Ok(()));
        let bookmark = WatchItem::Bookmark {
            revision: dispatched + 1,
            initial_events_end: false,
        };
        assert_eq!(
            watcher(&mut d, slot).queue.push(bookmark),
            PushResult::Pushed
        );
        assert!(broken(&d).contains("above the dispatched revision"));
    }
}

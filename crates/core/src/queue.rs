//! The bounded queue between the cache and one watch connection.
//!
//! ## One producer at a time
//! Exactly one actor writes a watcher's queue at any moment: the dispatcher while the watcher
//! is synced (or waiting to start), the catch-up worker while it is unsynced. Ownership moves
//! only by message between the two (see [`crate::cache`]), so pushes are never concurrent and
//! the queue is FIFO in revision order. The consumer (the HTTP response body, or a simulated
//! client) pops concurrently; the mutex only guards that pair.
//!
//! ## Back-pressure becomes "unsynced"
//! Pushes never block. A push of a revision's items either fits whole or fails with
//! [`PushResult::Full`], and the producer then records the watcher's position and moves on.
//! When the transport cannot take more (TCP or HTTP/2 window full), the consumer stops
//! popping, the queue fills, and the next push fails: transport back-pressure turns into an
//! unsynced watcher with no extra mechanism.
//!
//! ## Atomic revisions
//! A batch (all of one revision's items for this watcher) is admitted whole if it fits, or if
//! the queue is empty (so a revision larger than the queue still makes progress), and refused
//! whole otherwise. The queue never holds part of a revision.
//!
//! ## The end
//! A terminal [`WatchEnd`] is delivered after every queued item, and it bypasses the
//! capacity: a watcher whose position aged out gets its backlog and then one 410.
//!
//! ## Growth: slack for consumers that read
//! A queue starts at its capacity (Kubernetes' size on a new cache is 10 events) and may grow
//! up to a bound fixed at its creation ([`WatchQueue::growing_to`]; `queue_capacity_max` for
//! a cache's watchers, no growth for a queue whose size the watch asked for).
//! [`WatchQueue::grow_after_drain`] doubles the capacity (never past the bound) and only if a
//! pop emptied the queue since the last growth (or since it was created): the consumer has
//! shown that it reads everything queued, so a full queue is a burst it was late for (its
//! task's scheduling, a late writer), not a consumer that cannot keep up. The producer (the
//! dispatcher, for a synced watcher) asks for it when a push finds the queue full, and pushes
//! again; only then does the watcher go unsynced. A consumer that never reads never empties
//! its queue and keeps its first capacity (so the memory a never-reading client pins is that
//! capacity, not the bound); one that reads slower than the writes empties it at most once
//! before it falls behind, so it grows at most once before it stalls. A queue's capacity
//! never shrinks; its memory follows what it holds (the items' storage grows on demand).

use std::collections::VecDeque;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, Waker};

use crate::event::WatchItem;
use crate::object::Revision;
use crate::request::{Selection, WatcherId};

pub use crate::metrics::TerminationReason;
use crate::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use crate::sync::{Mutex, MutexGuard};
use crate::time::Instant;

/// Raised by a consumer that empties the queue of a watcher the catch-up worker owns (or that
/// closes it): that watcher can take events again (or must be dropped), so it becomes one of
/// the worker's candidates at its next pass, and that pass comes at the normal period, not the
/// idle one (a slow reader is not held to one queue per idle period). It carries the watchers'
/// ids, so the worker never has to look at a watcher that has neither room nor news; the
/// worker's notify hook wakes a driver thread when the first id arrives after a pass.
#[derive(Default)]
pub(crate) struct DrainSignal {
    raised: AtomicBool,
    ids: Mutex<Vec<WatcherId>>,
    notify: OnceLock<Arc<dyn Fn() + Send + Sync>>,
}

impl std::fmt::Debug for DrainSignal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DrainSignal")
            .field("raised", &self.raised.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl DrainSignal {
    fn ids(&self) -> MutexGuard<'_, Vec<WatcherId>> {
        self.ids
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Watcher `id`'s queue was emptied (or closed) while the worker owns it.
    pub(crate) fn raise(&self, id: WatcherId) {
        self.ids().push(id);
        if !self.raised.swap(true, Ordering::AcqRel)
            && let Some(notify) = self.notify.get()
        {
            notify();
        }
    }

    pub(crate) fn is_raised(&self) -> bool {
        self.raised.load(Ordering::Acquire)
    }

    /// Whether `id` was raised since the last take (for invariant checks).
    pub(crate) fn is_pending(&self, id: WatcherId) -> bool {
        self.ids().contains(&id)
    }

    /// Moves the ids raised since the last take into `out`.
    pub(crate) fn take(&self, out: &mut Vec<WatcherId>) {
        let mut ids = self.ids();
        self.raised.store(false, Ordering::Release);
        out.append(&mut ids);
    }

    pub(crate) fn set_notify(&self, notify: Arc<dyn Fn() + Send + Sync>) {
        let _ = self.notify.set(notify);
    }
}

/// Why a watch ended. Delivered after every queued item.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WatchEnd {
    /// 410 Gone, reason Expired: the watcher's position is older than the history holds.
    /// Message: `too old resource version: {position} ({floor})`.
    Expired {
        /// The watcher's position (every event up to it was delivered).
        position: Revision,
        /// The lowest servable position at the time (`oldest - 1`).
        floor: Revision,
        /// `resource_expired` or `resource_expired_initial`.
        reason: TerminationReason,
    },
    /// 504 Timeout: the requested resource version stayed above the cache's for too long.
    TooLargeResourceVersion {
        /// What the client asked for.
        requested: Revision,
        /// The cache's resource version when it gave up.
        current: Revision,
    },
    /// Legacy mode: force-closed because its queue stayed full past the dispatch budget.
    Unresponsive,
    /// Still in its initial phase, it accepted nothing for the configured timeout.
    InitialNoProgress,
    /// Its deadline (the request's `timeoutSeconds`) passed: a clean end of stream.
    Deadline,
    /// The cache is shutting down.
    Shutdown,
}

impl WatchEnd {
    /// The termination reason, for `terminated_watchers_total{reason}`.
    #[must_use]
    pub fn reason(&self) -> TerminationReason {
        match self {
            WatchEnd::Expired { reason, .. } => *reason,
            WatchEnd::TooLargeResourceVersion { .. } => TerminationReason::TooLargeResourceVersion,
            WatchEnd::Unresponsive => TerminationReason::Unresponsive,
            WatchEnd::InitialNoProgress => TerminationReason::InitialNoProgress,
            WatchEnd::Deadline => TerminationReason::Deadline,
            WatchEnd::Shutdown => TerminationReason::Shutdown,
        }
    }
}

/// The result of a push.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub enum PushResult {
    /// Every item was queued.
    Pushed,
    /// Nothing was queued: the batch does not fit.
    Full,
    /// Nothing was queued: the consumer is gone.
    Closed,
}

/// What a pop found.
#[derive(Clone, Debug)]
pub enum Pop {
    /// The next item.
    Item(WatchItem),
    /// Every item was delivered; this is how the watch ended.
    End(WatchEnd),
    /// Nothing to deliver yet.
    Empty,
}

/// The watcher's state as operators see it (`/debug/watchers`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatcherState {
    /// Registered, not yet placed.
    Pending,
    /// Served by the live path.
    Synced,
    /// Served from history by the catch-up worker.
    Unsynced,
    /// Streaming its initial state.
    Initial,
    /// Ended.
    Ended,
}

#[derive(Debug)]
struct Inner {
    items: VecDeque<WatchItem>,
    /// The capacity in items (grows, never shrinks: see the module docs).
    capacity: usize,
    /// Set when a pop empties the queue; cleared when the capacity grows.
    emptied_since_growth: bool,
    end: Option<WatchEnd>,
    consumer_waker: Option<Waker>,
    consumer_closed: bool,
    /// Ended by [`WatchQueue::cut_released`]: to its producers it is as if the consumer went
    /// away (pushes fail and the owner drops the watcher), while the consumer still reads the
    /// end.
    cut: bool,
    /// Set by the consumer when a pop empties the queue; taken by the catch-up worker.
    drained: bool,
    /// The revision of the last item pushed.
    last_pushed: Revision,
    /// The revision of the last event pushed.
    last_event: Revision,
    /// Set if an event was ever pushed at or below the last event's revision: a revision
    /// split across two pushes (checked by `check_invariants`; never set).
    split: bool,
    /// Consumer-driven catch-up: while installed, the consumer is the queue's only producer
    /// and refills it from the history when it finds it empty (see [`crate::catchup`]).
    refill: Option<Refill>,
}

/// What a consumer needs to refill its own queue from the history: installed by the catch-up
/// worker (which then does not write the queue) and taken back by it before anyone else
/// writes the queue again.
#[derive(Debug)]
pub(crate) struct Refill {
    /// Every selected event up to here is queued; the consumer continues above it.
    pub(crate) position: Revision,
    /// The watcher's selection (the same copy the live path and passes use).
    pub(crate) selection: Arc<Selection>,
    /// Events the consumer queued since the refill was installed.
    pub(crate) pushed: u64,
    /// The consumer found nothing more to take (the end of the dispatched history, or a
    /// position below the floor) and raised the drain signal; it stops until taken back.
    pub(crate) stuck: bool,
}

/// What the actor that owns a watcher last published about it, for operators
/// (`/debug/watchers`): read with [`WatchQueue::progress`].
///
/// The owner publishes with relaxed stores when it changes hands (a stall) and at the end of
/// every catch-up pass; the values are reports, never read back by the core for a decision, so
/// they cannot change what any watcher receives. The times are the driver's [`Instant`]s (the
/// core reads no clock).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WatcherProgress {
    /// Every selected event up to this revision has been queued, as of the last publication
    /// (zero until the catch-up worker first publishes it; a synced watcher is at the cache's
    /// dispatched revision, which the dispatcher does not republish per watcher).
    pub position: Revision,
    /// When it last went unsynced (or started behind the live stream); `None` until then.
    pub unsynced_since: Option<Instant>,
    /// Catch-up passes in a row that found it with room in its queue and did not serve it.
    pub passes_waited: u64,
}

/// The atomics behind [`WatcherProgress`]; `unsynced_since` is stored as nanoseconds plus one
/// (zero for none).
#[derive(Debug, Default)]
struct Published {
    position: AtomicU64,
    unsynced_since: AtomicU64,
    passes_waited: AtomicU64,
}

/// What one look at a queue found ([`WatchQueue::inspect`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Look {
    /// The consumer went away.
    pub(crate) closed: bool,
    /// Free slots.
    pub(crate) free: usize,
    /// The capacity (it may have grown).
    pub(crate) capacity: usize,
    /// A pop drained the queue since the last look.
    pub(crate) drained: bool,
}

/// A bounded single-producer, single-consumer queue of watch items (see the module docs).
#[derive(Debug)]
pub struct WatchQueue {
    inner: Mutex<Inner>,
    /// The largest capacity [`WatchQueue::grow_after_drain`] may reach.
    capacity_max: usize,
    state: AtomicU8,
    published: Published,
    /// Raised (with the watcher's id) when a pop empties the queue, or the consumer closes it,
    /// while the catch-up worker owns the watcher.
    drain: Option<(Arc<DrainSignal>, WatcherId)>,
}

impl WatchQueue {
    /// An empty queue holding at most `capacity` items, which does not grow (see
    /// [`WatchQueue::growing_to`]).
    ///
    /// # Panics
    /// If `capacity` is zero.
    #[must_use]
    pub fn new(capacity: usize) -> WatchQueue {
        assert!(capacity > 0, "a watch queue holds at least one item");
        WatchQueue {
            inner: Mutex::new(Inner {
                items: VecDeque::new(),
                capacity,
                emptied_since_growth: false,
                end: None,
                consumer_waker: None,
                consumer_closed: false,
                cut: false,
                drained: false,
                last_pushed: 0,
                last_event: 0,
                split: false,
                refill: None,
            }),
            capacity_max: capacity,
            state: AtomicU8::new(WatcherState::Pending as u8),
            published: Published::default(),
            drain: None,
        }
    }

    /// [`WatchQueue::new`], raising `drain` with `id` whenever a pop empties the queue (or the
    /// consumer closes it) while the catch-up worker owns the watcher (unsynced or streaming
    /// its initial state).
    pub(crate) fn with_drain_signal(
        capacity: usize,
        drain: Arc<DrainSignal>,
        id: WatcherId,
    ) -> WatchQueue {
        WatchQueue {
            drain: Some((drain, id)),
            ..WatchQueue::new(capacity)
        }
    }

    /// This queue, allowed to grow up to `capacity_max` items (see the module docs); a bound
    /// below the capacity means no growth.
    #[must_use]
    pub fn growing_to(self, capacity_max: usize) -> WatchQueue {
        WatchQueue {
            capacity_max,
            ..self
        }
    }

    /// Doubles the capacity, up to the bound set by [`WatchQueue::growing_to`], if a pop
    /// emptied the queue since the last growth (see the module docs). Returns the new capacity
    /// if it grew.
    pub fn grow_after_drain(&self) -> Option<usize> {
        let mut inner = self.lock();
        if !inner.emptied_since_growth || inner.capacity >= self.capacity_max {
            return None;
        }
        inner.emptied_since_growth = false;
        inner.capacity = inner.capacity.saturating_mul(2).min(self.capacity_max);
        Some(inner.capacity)
    }

    /// Raises the drain signal with this watcher's id (the consumer is stuck, or it closed).
    pub(crate) fn raise_drain(&self) {
        if let Some((drain, id)) = &self.drain {
            drain.raise(*id);
        }
    }

    /// After a pop emptied the queue (or the consumer closed it): tell the worker if it owns
    /// the watcher.
    fn emptied(&self) {
        if let Some((drain, id)) = &self.drain
            && matches!(self.state(), WatcherState::Unsynced | WatcherState::Initial)
        {
            drain.raise(*id);
        }
    }

    /// What the watcher's owner last published about it (see [`WatcherProgress`]).
    #[must_use]
    pub fn progress(&self) -> WatcherProgress {
        let since = self.published.unsynced_since.load(Ordering::Relaxed);
        WatcherProgress {
            position: self.published.position.load(Ordering::Relaxed),
            unsynced_since: since.checked_sub(1).map(Instant::from_nanos),
            passes_waited: self.published.passes_waited.load(Ordering::Relaxed),
        }
    }

    /// Publishes that the watcher went unsynced at `now` at `position`.
    pub(crate) fn publish_unsynced(&self, now: Instant, position: Revision) {
        self.published
            .unsynced_since
            .store(now.as_nanos().saturating_add(1), Ordering::Relaxed);
        self.published.position.store(position, Ordering::Relaxed);
        self.published.passes_waited.store(0, Ordering::Relaxed);
    }

    /// Publishes the owner's position and passes waited.
    pub(crate) fn publish_progress(&self, position: Revision, passes_waited: u64) {
        self.published.position.store(position, Ordering::Relaxed);
        self.published
            .passes_waited
            .store(passes_waited, Ordering::Relaxed);
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding this lock cannot leave the queue inconsistent (every update is
        // a single push or pop), so a poisoned lock is still usable.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The capacity in items now (it may have grown since the queue was created).
    #[must_use]
    pub fn capacity(&self) -> usize {
        self.lock().capacity
    }

    /// Items queued now.
    #[must_use]
    pub fn len(&self) -> usize {
        self.lock().items.len()
    }

    /// Whether nothing is queued.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Free slots now.
    #[must_use]
    pub fn free(&self) -> usize {
        let inner = self.lock();
        inner.capacity.saturating_sub(inner.items.len())
    }

    /// Whether the consumer went away (or the watch was cut: [`WatchQueue::cut_released`]):
    /// the owner drops the watcher.
    #[must_use]
    pub fn is_closed(&self) -> bool {
        let inner = self.lock();
        inner.consumer_closed || inner.cut
    }

    /// Whether the watch was cut by [`WatchQueue::cut_released`].
    #[must_use]
    pub fn was_cut(&self) -> bool {
        self.lock().cut
    }

    /// Ends the watch at once, dropping everything queued, if its queue holds a version the
    /// cache let go ([`crate::Object::is_released`]: an event's object or the one it replaced,
    /// or an initial-state object). Returns whether it did.
    ///
    /// Called when released versions are past their memory budget
    /// ([`crate::metrics::MemoryAccount`]): a client that does not read its watch must not keep
    /// alive what the cache gave up. The end is the 410 of a position below the floor (reason
    /// [`TerminationReason::MemoryPressure`]): the client has every item up to the first
    /// dropped one, and the cache no longer holds what it would need to go on. This is the one
    /// end that comes before the backlog: the backlog itself is what is held. The producers
    /// see the queue as closed and drop the watcher (counting the reason); the consumer reads
    /// the end next. A look costs one pass over the queued items.
    pub fn cut_released(&self) -> bool {
        let dropped;
        let waker = {
            let mut inner = self.lock();
            if inner.cut || inner.consumer_closed {
                return false;
            }
            let holds_released = |item: &WatchItem| match item {
                WatchItem::Event { event, .. } => event.holds_released(),
                WatchItem::Initial(object) => object.is_released(),
                WatchItem::Bookmark { .. } => false,
            };
            // The cache no longer holds anything at or below the newest such item's revision.
            let Some(floor) = inner
                .items
                .iter()
                .filter(|item| holds_released(item))
                .map(WatchItem::revision)
                .max()
            else {
                return false;
            };
            // The client has everything before the first item (and an initial item's
            // revision is its object's): claimed no higher than below the floor.
            let position = inner
                .items
                .front()
                .map_or(0, WatchItem::revision)
                .min(floor)
                .saturating_sub(1);
            inner.cut = true;
            // Freed after the lock: the versions they hold may be large.
            dropped = std::mem::take(&mut inner.items);
            inner.end = Some(WatchEnd::Expired {
                position,
                floor,
                reason: TerminationReason::MemoryPressure,
            });
            inner.consumer_waker.take()
        };
        self.set_state(WatcherState::Ended);
        if let Some(waker) = waker {
            waker.wake();
        }
        // A worker that owns the watcher looks at it at once (an unknown id is ignored).
        self.raise_drain();
        drop(dropped);
        true
    }

    /// The watcher's state, for operators.
    #[must_use]
    pub fn state(&self) -> WatcherState {
        match self.state.load(Ordering::Relaxed) {
            0 => WatcherState::Pending,
            1 => WatcherState::Synced,
            2 => WatcherState::Unsynced,
            3 => WatcherState::Initial,
            _ => WatcherState::Ended,
        }
    }

    pub(crate) fn set_state(&self, state: WatcherState) {
        self.state.store(state as u8, Ordering::Relaxed);
    }

    /// The revision of the last item pushed.
    #[must_use]
    pub fn last_pushed(&self) -> Revision {
        self.lock().last_pushed
    }

    /// Pushes one revision's items for this watcher, all or nothing (see the module docs).
    pub(crate) fn push_batch(&self, items: &[WatchItem]) -> PushResult {
        self.push_items(items.iter().cloned())
    }

    /// [`WatchQueue::push_batch`] over items the caller hands over, so it need not collect
    /// them: the iterator is consumed only when the items are pushed (not when the queue is
    /// full or closed), so it may move them out of the caller's storage.
    pub(crate) fn push_items(&self, items: impl ExactSizeIterator<Item = WatchItem>) -> PushResult {
        let count = items.len();
        let waker = {
            let mut inner = self.lock();
            if inner.consumer_closed || inner.cut {
                return PushResult::Closed;
            }
            debug_assert!(inner.end.is_none(), "push after the end");
            if !inner.items.is_empty() && inner.items.len() + count > inner.capacity {
                return PushResult::Full;
            }
            let mut batch_revision = None;
            for item in items {
                inner.last_pushed = item.revision();
                if matches!(item, WatchItem::Event { .. }) {
                    // One push is one revision: a later push of the same revision would split it.
                    if batch_revision != Some(item.revision()) {
                        if item.revision() <= inner.last_event {
                            inner.split = true;
                        }
                        batch_revision = Some(item.revision());
                    }
                    inner.last_event = item.revision();
                }
                inner.items.push_back(item);
            }
            inner.consumer_waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
        PushResult::Pushed
    }

    /// Checks what the queue can tell alone: no revision was ever split across two pushes, and
    /// the queued items are in revision order.
    pub(crate) fn check(&self) -> Result<(), String> {
        let inner = self.lock();
        if inner.split {
            return Err("a revision was pushed in two parts".to_owned());
        }
        let mut last = 0;
        for item in &inner.items {
            if let WatchItem::Event { .. } = item {
                if item.revision() < last {
                    return Err(format!("event {} queued after {last}", item.revision()));
                }
                last = item.revision();
            }
        }
        Ok(())
    }

    /// Queues items regardless of the capacity: legacy mode's replay of a watch (Kubernetes'
    /// per-watcher replay before KEP-6268 was not bounded by the input channel), and the one
    /// final bookmark of a shutdown (which, like the end, must not be refused).
    pub(crate) fn push_unbounded(&self, items: &[WatchItem]) {
        let waker = {
            let mut inner = self.lock();
            if inner.consumer_closed || inner.cut {
                return;
            }
            for item in items {
                inner.last_pushed = item.revision();
                inner.items.push_back(item.clone());
            }
            inner.consumer_waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// Pushes one item (a bookmark or an initial-state object).
    pub(crate) fn push(&self, item: WatchItem) -> PushResult {
        self.push_batch(std::slice::from_ref(&item))
    }

    /// Ends the watch after the queued items. Idempotent: the first end wins.
    pub(crate) fn push_end(&self, end: WatchEnd) {
        let waker = {
            let mut inner = self.lock();
            if inner.end.is_none() {
                inner.end = Some(end);
            }
            inner.consumer_waker.take()
        };
        self.set_state(WatcherState::Ended);
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// One look at the queue for a catch-up pass, under one lock (see [`Look`]); clears the
    /// drained flag.
    pub(crate) fn inspect(&self) -> Look {
        let mut inner = self.lock();
        Look {
            closed: inner.consumer_closed || inner.cut,
            free: inner.capacity.saturating_sub(inner.items.len()),
            capacity: inner.capacity,
            drained: std::mem::take(&mut inner.drained),
        }
    }

    /// Hands the production of this queue to its consumer (consumer-driven catch-up). Returns
    /// the refill back when the consumer is gone.
    pub(crate) fn install_refill(&self, refill: Refill) -> Result<(), Refill> {
        let waker = {
            let mut inner = self.lock();
            if inner.consumer_closed || inner.cut {
                return Err(refill);
            }
            debug_assert!(inner.refill.is_none(), "one refill at a time");
            inner.refill = Some(refill);
            // A consumer parked on an empty queue has something to do now: refill it.
            inner.consumer_waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
        Ok(())
    }

    /// Takes the production of this queue back from its consumer.
    pub(crate) fn take_refill(&self) -> Option<Refill> {
        self.lock().refill.take()
    }

    /// Where the consumer's refill stands, if it produces this queue now.
    pub(crate) fn refill_position(&self) -> Option<Revision> {
        self.lock().refill.as_ref().map(|r| r.position)
    }

    /// Whether the consumer produces this queue now.
    pub(crate) fn has_refill(&self) -> bool {
        self.lock().refill.is_some()
    }

    /// Runs `fill` with the queue's items and its refill when the queue is empty and a refill
    /// is installed and not stuck (the consumer side of consumer-driven catch-up). `fill`
    /// pushes whole revisions and returns whether the consumer is stuck; then the drain
    /// signal is raised so the worker takes the watcher back.
    pub(crate) fn refill_with(
        &self,
        fill: impl FnOnce(&mut VecDeque<WatchItem>, &mut Refill, usize) -> bool,
    ) {
        let stuck = {
            let mut inner = self.lock();
            let inner = &mut *inner;
            if !inner.items.is_empty() || inner.consumer_closed || inner.end.is_some() {
                return;
            }
            let Some(refill) = inner.refill.as_mut() else {
                return;
            };
            if refill.stuck {
                return;
            }
            let stuck = fill(&mut inner.items, refill, inner.capacity);
            // The queue was empty: every item is new (whole revisions, in order).
            let mut previous = None;
            for item in &inner.items {
                if matches!(item, WatchItem::Event { .. }) && previous != Some(item.revision()) {
                    if item.revision() <= inner.last_event {
                        inner.split = true;
                    }
                    previous = Some(item.revision());
                    inner.last_event = item.revision();
                }
            }
            if let Some(last) = inner.items.back() {
                inner.last_pushed = last.revision();
            }
            refill.stuck = stuck;
            stuck
        };
        if stuck {
            self.raise_drain();
        }
    }

    /// Pops the next item, or the end once every item was delivered.
    pub fn try_pop(&self) -> Pop {
        let mut inner = self.lock();
        let was_empty = inner.items.is_empty();
        let pop = Self::pop_locked(&mut inner);
        let emptied = !was_empty && inner.items.is_empty() && inner.refill.is_none();
        drop(inner);
        if emptied {
            self.emptied();
        }
        pop
    }

    fn pop_locked(inner: &mut Inner) -> Pop {
        match inner.items.pop_front() {
            Some(item) => {
                if inner.items.is_empty() {
                    inner.drained = true;
                    inner.emptied_since_growth = true;
                }
                Pop::Item(item)
            }
            None => match &inner.end {
                Some(end) => Pop::End(end.clone()),
                None => Pop::Empty,
            },
        }
    }

    /// Pops up to `max` items into `out`. Returns the end if every item has been delivered and
    /// the watch ended. Registers `cx`'s waker when it finds nothing — unless the queue holds
    /// a refill its consumer has yet to make (installed after the consumer's last refill):
    /// then it wakes `cx`'s waker at once, so the consumer polls again and makes it.
    pub fn poll_pop_many(
        &self,
        cx: &mut Context<'_>,
        max: usize,
        out: &mut Vec<WatchItem>,
    ) -> Poll<Option<WatchEnd>> {
        self.pop_many(cx, max, out, false).0
    }

    /// [`WatchQueue::poll_pop_many`], also registering `cx`'s waker when the pop empties the
    /// queue, in the same lock, if only a push or the end can give the consumer more (no
    /// refill of its own to make, no end queued): then `true` with the items. Until that
    /// waker fires the consumer's next poll would find the queue empty and register the same
    /// waker, so it may answer `Pending` without looking (a watch response is polled again
    /// right after each chunk: one lock per delivery less). A push while the consumer is still
    /// running wakes it, as a push after that next poll would.
    pub fn poll_pop_many_parking(
        &self,
        cx: &mut Context<'_>,
        max: usize,
        out: &mut Vec<WatchItem>,
    ) -> (Poll<Option<WatchEnd>>, bool) {
        self.pop_many(cx, max, out, true)
    }

    /// Both pops: `park_on_empty` registers the waker when the pop empties the queue too.
    fn pop_many(
        &self,
        cx: &mut Context<'_>,
        max: usize,
        out: &mut Vec<WatchItem>,
        park_on_empty: bool,
    ) -> (Poll<Option<WatchEnd>>, bool) {
        let mut inner = self.lock();
        let take = inner.items.len().min(max);
        if take > 0 {
            out.extend(inner.items.drain(..take));
            let mut parked = false;
            if inner.items.is_empty() {
                inner.drained = true;
                inner.emptied_since_growth = true;
                let refilled_by_consumer = inner.refill.is_some();
                // (A cut queues its end: `end` covers it.)
                if park_on_empty && !refilled_by_consumer && inner.end.is_none() {
                    inner.consumer_waker = Some(cx.waker().clone());
                    parked = true;
                }
                drop(inner);
                if !refilled_by_consumer {
                    self.emptied();
                }
            }
            return (Poll::Ready(None), parked);
        }
        if let Some(end) = &inner.end {
            return (Poll::Ready(Some(end.clone())), false);
        }
        // A refill not yet stuck in an empty queue was installed after the consumer last
        // refilled (a refill it runs either queues something or is stuck: see
        // `WatchQueue::refill_with`), while its waker was not registered here: nothing else
        // will wake it (the worker left the watcher to it), so it is woken now to make it.
        if inner.refill.as_ref().is_some_and(|refill| !refill.stuck) {
            drop(inner);
            cx.waker().wake_by_ref();
            return (Poll::Pending, false);
        }
        inner.consumer_waker = Some(cx.waker().clone());
        (Poll::Pending, true)
    }

    /// The consumer is gone: pushes fail from now on and the owner drops the watcher.
    pub fn close(&self) {
        {
            let mut inner = self.lock();
            inner.consumer_closed = true;
            inner.items.clear();
        }
        // The worker looks only at watchers with news: this is news.
        self.emptied();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bookmark(revision: Revision) -> WatchItem {
        WatchItem::Bookmark {
            revision,
            initial_events_end: false,
        }
    }

    /// Each termination reason has its own metric label (operators tell them apart by it):
    /// the reason's name in snake case.
    #[test]
    fn every_termination_reason_has_its_own_snake_case_label() {
        for reason in TerminationReason::ALL {
            let mut expected = String::new();
            for c in format!("{reason:?}").chars() {
                if c.is_ascii_uppercase() && !expected.is_empty() {
                    expected.push('_');
                }
                expected.push(c.to_ascii_lowercase());
            }
            assert_eq!(reason.as_str(), expected);
        }
        let labels: std::collections::BTreeSet<_> =
            TerminationReason::ALL.iter().map(|r| r.as_str()).collect();
        assert_eq!(labels.len(), TerminationReason::ALL.len());
    }

    /// A queue grows only after its consumer emptied it, by doubling, at most once per
    /// emptying, never past its bound; one without a bound never grows.
    #[test]
    fn a_queue_grows_by_doubling_only_after_its_consumer_emptied_it() {
        let queue = WatchQueue::new(2).growing_to(6);
        assert_eq!(
            queue.push_batch(&[bookmark(1), bookmark(1)]),
            PushResult::Pushed
        );
        assert_eq!(queue.push(bookmark(2)), PushResult::Full);
        assert_eq!(queue.grow_after_drain(), None, "never emptied: no growth");
        assert!(matches!(queue.try_pop(), Pop::Item(_)));
        assert_eq!(queue.grow_after_drain(), None, "popped, but not empty");
        assert!(matches!(queue.try_pop(), Pop::Item(_)));
        assert_eq!(queue.grow_after_drain(), Some(4));
        assert_eq!(queue.grow_after_drain(), None, "once per emptying");
        assert_eq!((queue.capacity(), queue.free()), (4, 4));
        assert_eq!(
            queue.push_batch(&[bookmark(3), bookmark(3), bookmark(3), bookmark(3)]),
            PushResult::Pushed
        );
        assert_eq!(queue.push(bookmark(4)), PushResult::Full);
        let mut out = Vec::new();
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        assert!(queue.poll_pop_many(&mut cx, 64, &mut out).is_ready());
        assert_eq!(out.len(), 4);
        assert_eq!(queue.grow_after_drain(), Some(6), "the bound, not 8");
        assert!(matches!(queue.try_pop(), Pop::Empty));
        assert_eq!(queue.push(bookmark(5)), PushResult::Pushed);
        assert!(matches!(queue.try_pop(), Pop::Item(_)));
        assert_eq!(queue.grow_after_drain(), None, "at the bound");
        let fixed = WatchQueue::new(2);
        assert_eq!(fixed.push(bookmark(1)), PushResult::Pushed);
        assert!(matches!(fixed.try_pop(), Pop::Item(_)));
        assert_eq!(fixed.grow_after_drain(), None, "no bound set: fixed size");
    }

    #[test]
    fn batches_are_all_or_nothing_and_end_follows_the_backlog() {
        let queue = WatchQueue::new(3);
        assert_eq!(
            queue.push_batch(&[bookmark(1), bookmark(1)]),
            PushResult::Pushed
        );
        assert_eq!(
            queue.push_batch(&[bookmark(2), bookmark(2)]),
            PushResult::Full
        );
        assert_eq!(queue.len(), 2);
        assert_eq!(queue.push(bookmark(3)), PushResult::Pushed);
        queue.push_end(WatchEnd::Deadline);
        let mut revisions = Vec::new();
        loop {
            match queue.try_pop() {
                Pop::Item(item) => revisions.push(item.revision()),
                Pop::End(end) => {
                    assert_eq!(end, WatchEnd::Deadline);
                    break;
                }
                Pop::Empty => panic!("end lost"),
            }
        }
        assert_eq!(revisions, [1, 1, 3]);
        assert!(queue.inspect().drained, "drained");
        assert!(!queue.inspect().drained, "cleared");
    }

    /// What operators (and the worker's retry rounds) read of a queue: its free slots and the
    /// revision of the last item pushed.
    #[test]
    fn free_slots_and_the_last_pushed_revision() {
        let queue = WatchQueue::new(3);
        assert_eq!((queue.free(), queue.last_pushed()), (3, 0));
        assert_eq!(
            queue.push_batch(&[bookmark(4), bookmark(4)]),
            PushResult::Pushed
        );
        assert_eq!((queue.free(), queue.last_pushed()), (1, 4));
        assert_eq!(queue.push(bookmark(6)), PushResult::Pushed);
        assert_eq!((queue.free(), queue.last_pushed()), (0, 6));
        assert!(matches!(queue.try_pop(), Pop::Item(_)));
        assert_eq!((queue.free(), queue.last_pushed()), (1, 6));
    }

    #[test]
    fn progress_reports_what_the_owner_published() {
        let queue = WatchQueue::new(2);
        assert_eq!(queue.progress(), WatcherProgress::default());
        // The origin itself is a valid time: "none" is not confused with Instant::ZERO.
        queue.publish_unsynced(Instant::ZERO, 7);
        assert_eq!(
            queue.progress(),
            WatcherProgress {
                position: 7,
                unsynced_since: Some(Instant::ZERO),
                passes_waited: 0,
            }
        );
        queue.publish_progress(9, 3);
        let progress = queue.progress();
        assert_eq!((progress.position, progress.passes_waited), (9, 3));
        assert_eq!(progress.unsynced_since, Some(Instant::ZERO));
        queue.publish_unsynced(Instant::from_nanos(5), 10);
        assert_eq!(
            queue.progress().unsynced_since,
            Some(Instant::from_nanos(5))
        );
        assert_eq!(queue.progress().passes_waited, 0);
    }

    fn event(revision: Revision, name: &str) -> WatchItem {
        let object = Arc::new(crate::object::Object::new(
            "ns",
            name,
            std::collections::BTreeMap::new(),
            std::collections::BTreeMap::new(),
            revision,
            serde_json::json!({"metadata": {"name": name, "namespace": "ns"}}),
        ));
        WatchItem::Event {
            event_type: crate::event::EventType::Added,
            event: Arc::new(crate::event::Event::new(revision, Some(object), None)),
        }
    }

    #[test]
    fn check_finds_a_revision_pushed_in_two_parts() {
        let queue = WatchQueue::new(8);
        // Two events of one revision in one push, then the next revision: whole revisions.
        assert_eq!(
            queue.push_batch(&[event(1, "a"), event(1, "b")]),
            PushResult::Pushed
        );
        assert_eq!(queue.push_batch(&[event(2, "a")]), PushResult::Pushed);
        assert_eq!(queue.check(), Ok(()));
        // A later push of an earlier revision splits it.
        assert_eq!(queue.push_batch(&[event(2, "b")]), PushResult::Pushed);
        let err = queue.check().unwrap_err();
        assert!(err.contains("two parts"), "{err}");
    }

    #[test]
    fn pop_many_takes_at_most_max_then_parks() {
        let queue = WatchQueue::new(4);
        for revision in 1..=3 {
            assert_eq!(queue.push(bookmark(revision)), PushResult::Pushed);
        }
        let waker = Waker::noop();
        let mut cx = Context::from_waker(waker);
        let mut out = Vec::new();
        assert_eq!(queue.poll_pop_many(&mut cx, 2, &mut out), Poll::Ready(None));
        assert_eq!(
            out.iter().map(WatchItem::revision).collect::<Vec<_>>(),
            [1, 2]
        );
        out.clear();
        assert_eq!(queue.poll_pop_many(&mut cx, 2, &mut out), Poll::Ready(None));
        assert_eq!(out.iter().map(WatchItem::revision).collect::<Vec<_>>(), [3]);
        out.clear();
        assert!(queue.poll_pop_many(&mut cx, 2, &mut out).is_pending());
        assert!(out.is_empty());
    }

    #[test]
    fn only_a_pop_that_empties_an_owned_queue_raises_the_drain_signal() {
        let raised = |drain: &DrainSignal| {
            let mut ids = Vec::new();
            drain.take(&mut ids);
            ids
        };
        let drain = Arc::new(DrainSignal::default());
        let queue = WatchQueue::with_drain_signal(4, drain.clone(), 7);
        queue.set_state(WatcherState::Unsynced);
        // Nothing to pop: no news for the worker.
        assert!(matches!(queue.try_pop(), Pop::Empty));
        assert!(raised(&drain).is_empty());
        assert_eq!(queue.push(bookmark(1)), PushResult::Pushed);
        assert_eq!(queue.push(bookmark(2)), PushResult::Pushed);
        // A pop that leaves an item: nothing yet; the one that empties it: raised once.
        assert!(matches!(queue.try_pop(), Pop::Item(_)));
        assert!(raised(&drain).is_empty());
        assert!(matches!(queue.try_pop(), Pop::Item(_)));
        assert_eq!(raised(&drain), [7]);
        // The same through pop_many.
        assert_eq!(queue.push(bookmark(3)), PushResult::Pushed);
        let waker = Waker::noop();
        let mut cx = Context::from_waker(waker);
        let mut out = Vec::new();
        assert_eq!(queue.poll_pop_many(&mut cx, 8, &mut out), Poll::Ready(None));
        assert_eq!(raised(&drain), [7]);
        // While the consumer holds the refill it refills the queue itself: emptying it is no
        // news for the worker, by either pop.
        assert_eq!(queue.push(bookmark(4)), PushResult::Pushed);
        assert_eq!(queue.push(bookmark(5)), PushResult::Pushed);
        let selection = Arc::new(Selection::new(
            &crate::WatchRequest::new(crate::WatchStart::Now),
            None,
        ));
        let refill = Refill {
            position: 5,
            selection,
            pushed: 0,
            stuck: false,
        };
        assert!(queue.install_refill(refill).is_ok());
        assert!(matches!(queue.try_pop(), Pop::Item(_)));
        out.clear();
        assert_eq!(queue.poll_pop_many(&mut cx, 8, &mut out), Poll::Ready(None));
        assert!(raised(&drain).is_empty());
        assert_eq!(queue.push(bookmark(6)), PushResult::Pushed);
        assert!(matches!(queue.try_pop(), Pop::Item(_)));
        assert!(raised(&drain).is_empty());
    }

    /// A waker that counts its wakes.
    #[derive(Default)]
    struct Count(std::sync::atomic::AtomicUsize);

    impl std::task::Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Goal: a pop that empties the queue registers the consumer's waker with it, exactly
    /// when only a push or the end can bring the consumer more: the next push, the end and
    /// a refill to make each wake it; a pop that leaves items, empties a queue its consumer
    /// refills, or takes the end registers nothing.
    #[test]
    fn a_pop_that_empties_the_queue_parks_the_consumer_with_it() {
        let count = Arc::new(Count::default());
        let woken = || count.0.load(Ordering::Relaxed);
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        let mut out = Vec::new();
        let queue = WatchQueue::new(4);
        assert_eq!(queue.push(bookmark(1)), PushResult::Pushed);
        assert_eq!(queue.push(bookmark(2)), PushResult::Pushed);
        // Leaves an item: not parked, and a push wakes nobody.
        assert_eq!(
            queue.poll_pop_many_parking(&mut cx, 1, &mut out),
            (Poll::Ready(None), false)
        );
        assert_eq!(queue.push(bookmark(3)), PushResult::Pushed);
        assert_eq!(woken(), 0);
        // Empties it: parked, and the next push wakes the consumer (once).
        assert_eq!(
            queue.poll_pop_many_parking(&mut cx, 8, &mut out),
            (Poll::Ready(None), true)
        );
        assert_eq!(
            out.iter().map(WatchItem::revision).collect::<Vec<_>>(),
            [1, 2, 3]
        );
        assert_eq!(queue.push(bookmark(4)), PushResult::Pushed);
        assert_eq!(woken(), 1);
        assert_eq!(queue.push(bookmark(5)), PushResult::Pushed);
        assert_eq!(woken(), 1);
        // Parked again by an emptying pop: the end wakes it, and is what it reads next.
        out.clear();
        assert_eq!(
            queue.poll_pop_many_parking(&mut cx, 8, &mut out),
            (Poll::Ready(None), true)
        );
        queue.push_end(WatchEnd::Deadline);
        assert_eq!(woken(), 2);
        assert_eq!(
            queue.poll_pop_many_parking(&mut cx, 8, &mut out),
            (Poll::Ready(Some(WatchEnd::Deadline)), false)
        );
        // `poll_pop_many` does not register at an emptying pop: a push then wakes nobody.
        let plain = WatchQueue::new(4);
        assert_eq!(plain.push(bookmark(1)), PushResult::Pushed);
        assert_eq!(plain.poll_pop_many(&mut cx, 8, &mut out), Poll::Ready(None));
        let before = woken();
        assert_eq!(plain.push(bookmark(2)), PushResult::Pushed);
        assert_eq!(woken(), before);
        // Nothing found: parked (the waker registered), as `poll_pop_many` does.
        let queue = WatchQueue::new(4);
        assert_eq!(
            queue.poll_pop_many_parking(&mut cx, 8, &mut out),
            (Poll::Pending, true)
        );
        // An emptying pop with the end already queued behind the items: not parked.
        assert_eq!(queue.push(bookmark(6)), PushResult::Pushed);
        queue.push_end(WatchEnd::Deadline);
        let before = woken();
        assert_eq!(
            queue.poll_pop_many_parking(&mut cx, 8, &mut out),
            (Poll::Ready(None), false)
        );
        assert_eq!(woken(), before);
        // A queue its consumer refills: emptying it registers nothing (the consumer's next
        // poll refills it).
        let queue = WatchQueue::new(4);
        assert_eq!(queue.push(bookmark(7)), PushResult::Pushed);
        assert!(queue.install_refill(refill_at(7)).is_ok());
        assert_eq!(
            queue.poll_pop_many_parking(&mut cx, 8, &mut out),
            (Poll::Ready(None), false)
        );
        // An emptying pop parks; installing a refill then wakes the consumer.
        let queue = WatchQueue::new(4);
        assert_eq!(queue.push(bookmark(8)), PushResult::Pushed);
        assert_eq!(
            queue.poll_pop_many_parking(&mut cx, 8, &mut out),
            (Poll::Ready(None), true)
        );
        let before = woken();
        assert!(queue.install_refill(refill_at(8)).is_ok());
        assert_eq!(woken(), before + 1, "the consumer must refill now");
    }

    #[test]
    fn installing_a_refill_wakes_a_parked_consumer() {
        let count = Arc::new(Count::default());
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        let queue = WatchQueue::new(2);
        let mut out = Vec::new();
        assert!(queue.poll_pop_many(&mut cx, 8, &mut out).is_pending());
        let selection = Arc::new(Selection::new(
            &crate::WatchRequest::new(crate::WatchStart::Now),
            None,
        ));
        let refill = Refill {
            position: 0,
            selection,
            pushed: 0,
            stuck: false,
        };
        assert!(queue.install_refill(refill).is_ok());
        assert_eq!(
            count.0.load(Ordering::Relaxed),
            1,
            "the consumer must refill now"
        );
        assert!(queue.has_refill());
        queue.close();
        assert!(queue.take_refill().is_some());
    }

    /// Goal: a refill installed while its consumer runs — woken (its waker taken) and past its
    /// own refill, not yet at its pop — is not lost: the pop that finds the queue empty wakes
    /// the consumer again instead of parking it (the worker left the watcher to its consumer,
    /// so nothing else would: a watch in its initial phase then ended 30 s later with
    /// `initial_no_progress`, the likely cause of stop 66's CI failure). A stuck refill parks
    /// it as before.
    #[test]
    fn a_refill_installed_while_the_consumer_runs_wakes_it_at_its_pop() {
        let count = Arc::new(Count::default());
        let woken = || count.0.load(Ordering::Relaxed);
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        let queue = WatchQueue::new(4);
        let mut out = Vec::new();
        // Parked, then woken by a push (which takes the waker) and running: it took the item.
        assert_eq!(
            queue.poll_pop_many_parking(&mut cx, 8, &mut out),
            (Poll::Pending, true)
        );
        assert_eq!(queue.push(bookmark(1)), PushResult::Pushed);
        assert_eq!(woken(), 1);
        assert_eq!(queue.poll_pop_many(&mut cx, 8, &mut out), Poll::Ready(None));
        // It has refilled (nothing to refill yet) when the worker installs one: no waker to wake.
        queue.refill_with(|_, _, _| unreachable!("no refill installed yet"));
        assert!(queue.install_refill(refill_at(1)).is_ok());
        assert_eq!(woken(), 1);
        // Its pop finds nothing: woken again, not parked, for both pops.
        assert_eq!(
            queue.poll_pop_many_parking(&mut cx, 8, &mut out),
            (Poll::Pending, false)
        );
        assert_eq!(woken(), 2);
        assert_eq!(queue.poll_pop_many(&mut cx, 8, &mut out), Poll::Pending);
        assert_eq!(woken(), 3);
        // Its next refill finds nothing more: stuck, and the pop parks it (the worker takes the
        // refill back, raised by the drain signal).
        queue.refill_with(|items, _, _| items.is_empty());
        assert_eq!(
            queue.poll_pop_many_parking(&mut cx, 8, &mut out),
            (Poll::Pending, true)
        );
        assert_eq!(woken(), 3);
        assert!(queue.take_refill().is_some_and(|refill| refill.stuck));
    }

    fn refill_at(position: Revision) -> Refill {
        Refill {
            position,
            selection: Arc::new(Selection::new(
                &crate::WatchRequest::new(crate::WatchStart::Now),
                None,
            )),
            pushed: 0,
            stuck: false,
        }
    }

    /// A consumer refills only an empty queue that is still open and not ended: nothing is
    /// ever queued after the end.
    #[test]
    fn a_consumer_refills_nothing_after_the_end() {
        let queue = WatchQueue::new(2);
        assert!(queue.install_refill(refill_at(0)).is_ok());
        queue.push_end(WatchEnd::Deadline);
        queue.refill_with(|_, _, _| panic!("refilled after the end"));
        assert!(matches!(queue.try_pop(), Pop::End(WatchEnd::Deadline)));
        let closed = WatchQueue::new(2);
        assert!(closed.install_refill(refill_at(0)).is_ok());
        closed.close();
        closed.refill_with(|_, _, _| panic!("refilled after the consumer went away"));
    }

    /// The queue's own check also covers what a consumer refilled: whole revisions after what
    /// was queued before, a revision queued again is found.
    #[test]
    fn check_finds_a_revision_a_refill_queued_again() {
        let queue = WatchQueue::new(4);
        assert_eq!(queue.push_batch(&[event(5, "a")]), PushResult::Pushed);
        assert!(matches!(queue.try_pop(), Pop::Item(_)));
        assert!(queue.install_refill(refill_at(5)).is_ok());
        queue.refill_with(|items, _, _| {
            items.extend([event(6, "a"), event(6, "b"), event(7, "a")]);
            false
        });
        assert_eq!(queue.check(), Ok(()));
        assert_eq!(queue.last_pushed(), 7);
        while let Pop::Item(_) = queue.try_pop() {}
        queue.refill_with(|items, _, _| {
            items.push_back(event(7, "b"));
            false
        });
        let err = queue.check().unwrap_err();
        assert!(err.contains("two parts"), "{err}");
    }

    #[test]
    fn an_oversized_batch_enters_an_empty_queue() {
        let queue = WatchQueue::new(1);
        assert_eq!(
            queue.push_batch(&[bookmark(1), bookmark(1), bookmark(1)]),
            PushResult::Pushed
        );
        assert_eq!(queue.push(bookmark(2)), PushResult::Full);
        queue.close();
        assert_eq!(queue.push(bookmark(2)), PushResult::Closed);
    }

    /// Goal: a queue is cut only when an item holds a released version (an event's previous
    /// or own object, an initial-state object); the cut drops the backlog, replaces an end
    /// still waiting behind it, is delivered next to the consumer, and from then on the queue
    /// is closed to its producers (pushes, a refill) but not to its consumer; a second cut
    /// does nothing.
    #[test]
    fn a_cut_drops_the_backlog_and_closes_the_queue_to_its_producers() {
        let account = Arc::new(crate::metrics::MemoryAccount::new(0));
        let object = |revision: Revision| {
            Arc::new(crate::object::Object::new(
                "ns",
                "a",
                std::collections::BTreeMap::new(),
                std::collections::BTreeMap::new(),
                revision,
                serde_json::json!({"metadata": {"name": "a", "namespace": "ns"}}),
            ))
        };
        let (v1, v2, v3) = (object(1), object(2), object(3));
        let update =
            |new: &Arc<crate::object::Object>, old: &Arc<crate::object::Object>| WatchItem::Event {
                event_type: crate::event::EventType::Modified,
                event: Arc::new(crate::event::Event::new(
                    new.resource_version(),
                    Some(new.clone()),
                    Some(old.clone()),
                )),
            };
        let queue = WatchQueue::new(8);
        assert_eq!(queue.push_batch(&[bookmark(1)]), PushResult::Pushed);
        assert_eq!(queue.push_batch(&[update(&v2, &v1)]), PushResult::Pushed);
        assert_eq!(queue.push_batch(&[update(&v3, &v2)]), PushResult::Pushed);
        queue.push_end(WatchEnd::Deadline);
        let initial = WatchQueue::new(8);
        assert_eq!(
            initial.push(WatchItem::Initial(v3.clone())),
            PushResult::Pushed
        );
        assert!(
            !queue.cut_released() && !initial.cut_released(),
            "nothing released"
        );
        crate::object::Object::release(&v1, &account);
        assert!(!initial.cut_released(), "it holds only the third version");
        assert!(!queue.is_closed());
        let weight = v1.weight() as i64;
        drop(v1);
        assert_eq!(account.released.get(), weight, "held by the queue");
        assert!(queue.cut_released());
        assert_eq!(account.released.get(), 0, "the backlog was dropped");
        assert!(!queue.cut_released(), "once");
        assert!(queue.is_closed() && queue.was_cut());
        assert_eq!(queue.state(), WatcherState::Ended);
        assert_eq!(queue.push(bookmark(5)), PushResult::Closed);
        assert!(queue.install_refill(refill_at(4)).is_err());
        match queue.try_pop() {
            Pop::End(WatchEnd::Expired {
                position,
                floor,
                reason: TerminationReason::MemoryPressure,
            }) => assert_eq!((position, floor), (0, 2)),
            other => panic!("{other:?}"),
        }
        // An initial-state object released: cut too.
        crate::object::Object::release(&v3, &account);
        assert!(initial.cut_released());
    }
}

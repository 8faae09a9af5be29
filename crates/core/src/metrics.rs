//! Counters, gauges and histograms of one cache, read by the server's `/metrics`, the
//! simulator and the benchmarks.
//!
//! Each cache owns its own [`Metrics`]; an exporter labels them by resource, so gauges such as
//! `stalled_watchers` stay correct when several caches share one registry. Everything is a
//! relaxed atomic: the numbers are reports, never used for decisions.
//!
//! Where a client can see what is counted, the count comes first: a reset is counted before
//! its state is published, a watcher's end (`terminations`, one watcher fewer) before the end
//! is queued for its client, a watcher's move to synced or unsynced before its queue says so.
//! A client that has seen the effect and then reads the metrics (on the same thread as the
//! effect's publication, or through anything that orders it after, such as a request) reads
//! the count. Counts of items pushed to a watcher's queue (`watcher_deferred_events`,
//! `pass_pushes`, `bookmarks_sent`) are made just after the push succeeds, so they may trail
//! what its client has read by one push.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// A histogram with power-of-two bucket bounds `1, 2, 4, ..., 2^(BUCKETS-1)` and `+Inf`.
#[derive(Debug)]
pub struct Histogram {
    buckets: [AtomicU64; Histogram::BUCKETS + 1],
    sum: AtomicU64,
    count: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            sum: AtomicU64::new(0),
            count: AtomicU64::new(0),
        }
    }
}

impl Histogram {
    /// Finite buckets.
    pub const BUCKETS: usize = 21;

    /// Records one observation.
    pub fn observe(&self, value: u64) {
        let index = if value <= 1 {
            0
        } else {
            (64 - (value - 1).leading_zeros() as usize).min(Self::BUCKETS)
        };
        self.buckets[index].fetch_add(1, Ordering::Relaxed);
        self.sum.fetch_add(value, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    /// Upper bound of finite bucket `index`.
    #[must_use]
    pub fn bound(index: usize) -> u64 {
        1 << index
    }

    /// Cumulative counts per bucket (the last is `+Inf`), the sum and the count.
    #[must_use]
    pub fn snapshot(&self) -> (Vec<u64>, u64, u64) {
        let mut cumulative = Vec::with_capacity(Self::BUCKETS + 1);
        let mut total = 0;
        for bucket in &self.buckets {
            total += bucket.load(Ordering::Relaxed);
            cumulative.push(total);
        }
        (
            cumulative,
            self.sum.load(Ordering::Relaxed),
            self.count.load(Ordering::Relaxed),
        )
    }

    /// Number of observations.
    #[must_use]
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }
}

/// A monotonically increasing counter.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Adds `n`.
    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }

    /// Adds one.
    pub fn inc(&self) {
        self.add(1);
    }

    /// The current value.
    #[must_use]
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A value that goes up and down.
#[derive(Debug, Default)]
pub struct Gauge(AtomicI64);

impl Gauge {
    /// Adds `n` (may be negative).
    pub fn add(&self, n: i64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }

    /// Sets the value.
    pub fn set(&self, n: i64) {
        self.0.store(n, Ordering::Relaxed);
    }

    /// The current value.
    #[must_use]
    pub fn get(&self) -> i64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// The memory of several caches, counted together ([`crate::WatchCache::account_in`]): their
/// live objects and their histories, in [`crate::weight`]'s units ([`crate::Object::weight`]).
///
/// The histories share a budget: when their total passes it, a history that appends while it
/// holds more than its fair share (the budget over the number of caches) evicts its oldest
/// revisions down to that share (never its newest revision). A history never evicts for
/// another's sake, so the total can pass the budget by what the histories above their share
/// held when it was crossed; each of them trims on its next append. Their total therefore
/// stays below about twice the budget, and a resource written by a hostile client gives up its
/// own history first, not the others'.
///
/// ## Released versions
/// A version of an object the cache lets go — neither live nor in a history or the cache's
/// own snapshots any more — while something else still holds it (a watcher's queue that its
/// consumer has not read, through an event or as an initial-state item; a watch's snapshot;
/// a request) is *released*: its weight moves to [`MemoryAccount::released`] until its last
/// holder drops it ([`crate::Object::is_released`]; each version counted once). A client
/// that stops reading its watches could otherwise keep alive, in its queues, versions the
/// histories gave up for the budget: three never-reading watchers of a resource whose 1.4 MB
/// objects were rewritten kept 1 GB alive beyond a 256 MiB bound. Released versions have half
/// the histories' budget of their own; past it the account calls the hook set with
/// [`MemoryAccount::on_released_over`], whose owner ends the watches that hold them
/// ([`crate::WatchQueue::cut_released`]).
#[derive(Default)]
pub struct MemoryAccount {
    /// The bytes the caches' live objects weigh.
    pub objects: Gauge,
    /// The bytes the caches' histories count (each its `history_bytes`).
    pub histories: Gauge,
    /// The bytes released versions weigh (see above), still held elsewhere.
    pub released: Gauge,
    /// The histories' budget in bytes (0: none).
    history_budget: usize,
    /// The caches counted here.
    caches: Gauge,
    /// Called when a release takes `released` past its budget.
    released_over: std::sync::OnceLock<Box<dyn Fn() + Send + Sync>>,
}

impl std::fmt::Debug for MemoryAccount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryAccount")
            .field("objects", &self.objects)
            .field("histories", &self.histories)
            .field("released", &self.released)
            .field("history_budget", &self.history_budget)
            .field("caches", &self.caches)
            .finish_non_exhaustive()
    }
}

impl MemoryAccount {
    /// An account whose histories share `history_budget` bytes (0: no budget).
    #[must_use]
    pub fn new(history_budget: usize) -> MemoryAccount {
        MemoryAccount {
            history_budget,
            ..MemoryAccount::default()
        }
    }

    /// The histories' budget (0: none).
    #[must_use]
    pub fn history_budget(&self) -> usize {
        self.history_budget
    }

    /// The caches counted here.
    #[must_use]
    pub fn caches(&self) -> i64 {
        self.caches.get()
    }

    pub(crate) fn join(&self, objects: i64, history: i64) {
        self.caches.add(1);
        self.objects.add(objects);
        self.histories.add(history);
    }

    pub(crate) fn leave(&self, objects: i64, history: i64) {
        self.caches.add(-1);
        self.objects.add(-objects);
        self.histories.add(-history);
    }

    /// The bytes released versions may weigh before the watches holding them are ended: half
    /// the histories' budget (0: none).
    #[must_use]
    pub fn released_budget(&self) -> usize {
        self.history_budget / 2
    }

    /// Whether released versions weigh more than their budget.
    #[must_use]
    pub fn released_over(&self) -> bool {
        let budget = self.released_budget();
        budget > 0 && usize::try_from(self.released.get()).unwrap_or(0) > budget
    }

    /// Sets what is called, from the thread that released an event, each time a release leaves
    /// the released versions above their budget (only the first hook set is kept). It should
    /// only wake whoever ends the watches holding them.
    pub fn on_released_over(&self, hook: Box<dyn Fn() + Send + Sync>) {
        let _ = self.released_over.set(hook);
    }

    /// Counts `bytes` more of released versions.
    pub(crate) fn release(&self, bytes: usize) {
        self.released.add(i64::try_from(bytes).unwrap_or(i64::MAX));
        if self.released_over()
            && let Some(hook) = self.released_over.get()
        {
            hook();
        }
    }

    /// A released version of `bytes` was dropped by its last holder.
    pub(crate) fn unrelease(&self, bytes: usize) {
        self.released.add(-i64::try_from(bytes).unwrap_or(i64::MAX));
    }

    /// What a history of `bytes` should trim to: `None` while the histories are within their
    /// budget or this one is within its share.
    #[must_use]
    pub fn history_target(&self, bytes: usize) -> Option<usize> {
        if self.history_budget == 0 {
            return None;
        }
        let total = usize::try_from(self.histories.get()).unwrap_or(0);
        if total <= self.history_budget {
            return None;
        }
        let caches = usize::try_from(self.caches.get()).unwrap_or(1).max(1);
        let share = self.history_budget / caches;
        (bytes > share).then_some(share)
    }
}

/// Everything one cache counts. Names follow KEP-6268's metric list without the
/// `apiserver_watch_cache_` prefix, which the exporter adds.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Transitions from synced to unsynced (`watcher_stalls_total`).
    pub watcher_stalls: Counter,
    /// Full queues of synced watchers that grew instead of stalling, because their consumer
    /// had emptied them since their last growth (`watch_queue_growths_total`).
    pub watch_queue_growths: Counter,
    /// Events pushed by catch-up passes rather than the live path
    /// (`watcher_deferred_events_total`).
    pub watcher_deferred_events: Counter,
    /// Transitions from unsynced back to synced (`watcher_catchup_rounds_total`).
    pub watcher_catchup_rounds: Counter,
    /// Events pushed to one watcher between going unsynced and resyncing
    /// (`watcher_catchup_events`); its count equals `watcher_catchup_rounds`.
    pub watcher_catchup_events: Histogram,
    /// Unsynced watchers now (`stalled_watchers`).
    pub stalled_watchers: Gauge,
    /// Synced watchers now.
    pub synced_watchers: Gauge,
    /// Watchers registered and not yet ended.
    pub watchers: Gauge,
    /// Events the live path skipped because they were at or below a watcher's position
    /// (`watcher_skipped_events_total`). Must stay zero: the resync point is the last
    /// dispatched revision.
    pub watcher_skipped_events: Counter,
    /// Terminations by reason (`terminated_watchers_total{reason}`).
    pub terminated_watchers: [Counter; TerminationReason::ALL.len()],
    /// Serializations (`serializations_total`).
    pub encode: EncodeStats,
    /// Events appended and dispatched (`events_dispatched_total`).
    pub events_dispatched: Counter,
    /// Revisions dispatched.
    pub revisions_dispatched: Counter,
    /// Pushes made by the live path.
    pub live_pushes: Counter,
    /// Bookmarks queued.
    pub bookmarks_sent: Counter,
    /// History capacity in events.
    pub history_capacity: Gauge,
    /// Bytes the history's events count against `history_bytes_max` (see [`crate::history`]).
    pub history_bytes: Gauge,
    /// Bytes the live objects weigh ([`crate::Object::weight`]): the state at the cache's
    /// revision; the history's older versions are in `history_bytes`.
    pub object_bytes: Gauge,
    /// Bytes the served resource holds beyond its objects, as its server reports them
    /// ([`crate::WatchCache::set_definition_bytes`]: a custom resource's schema), counted with
    /// the objects in a shared account.
    pub definition_bytes: Gauge,
    /// Times the history doubled.
    pub history_capacity_increases: Counter,
    /// Times the history halved.
    pub history_capacity_decreases: Counter,
    /// Catch-up passes run.
    pub passes: Counter,
    /// History intervals opened by passes (each a history read under the lock).
    pub pass_interval_opens: Counter,
    /// History events scanned by passes.
    pub pass_events_scanned: Counter,
    /// Snapshot objects scanned by passes (initial states).
    pub pass_objects_scanned: Counter,
    /// Pushes made by passes (events, initial objects and bookmarks).
    pub pass_pushes: Counter,
    /// Members served per pass.
    pub pass_members: Histogram,
    /// Pass duration in microseconds, as reported by the driver.
    pub pass_duration_micros: Histogram,
    /// Watchers re-listed after the cache was re-initialised.
    pub cache_resets: Counter,
}

impl Metrics {
    /// Counts a termination.
    pub fn terminated(&self, reason: TerminationReason) {
        self.terminated_watchers[reason.index()].inc();
    }

    /// Terminations for one reason.
    #[must_use]
    pub fn terminations(&self, reason: TerminationReason) -> u64 {
        self.terminated_watchers[reason.index()].get()
    }
}

/// Why the cache ended a watch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TerminationReason {
    /// Legacy force-close.
    Unresponsive,
    /// A watcher that had reached the live stream aged out of the history.
    ResourceExpired,
    /// A watcher that never reached the live stream aged out of the history.
    ResourceExpiredInitial,
    /// No progress during the initial phase.
    InitialNoProgress,
    /// The request deadline passed.
    Deadline,
    /// The requested resource version never arrived.
    TooLargeResourceVersion,
    /// The cache shut down.
    Shutdown,
    /// Its queue held versions the cache had let go while released versions were past their
    /// memory budget: ended at once, without that backlog ([`WatchQueue::cut_released`]).
    MemoryPressure,
}

impl TerminationReason {
    /// Every reason, in label order.
    pub const ALL: [TerminationReason; 8] = [
        TerminationReason::Unresponsive,
        TerminationReason::ResourceExpired,
        TerminationReason::ResourceExpiredInitial,
        TerminationReason::InitialNoProgress,
        TerminationReason::Deadline,
        TerminationReason::TooLargeResourceVersion,
        TerminationReason::Shutdown,
        TerminationReason::MemoryPressure,
    ];

    /// The metric label.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            TerminationReason::Unresponsive => "unresponsive",
            TerminationReason::ResourceExpired => "resource_expired",
            TerminationReason::ResourceExpiredInitial => "resource_expired_initial",
            TerminationReason::InitialNoProgress => "initial_no_progress",
            TerminationReason::Deadline => "deadline",
            TerminationReason::TooLargeResourceVersion => "too_large_resource_version",
            TerminationReason::Shutdown => "shutdown",
            TerminationReason::MemoryPressure => "memory_pressure",
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

/// Counts serializations, so benchmarks can report serializations per event.
#[derive(Debug, Default)]
pub struct EncodeStats {
    serializations: AtomicU64,
}

impl EncodeStats {
    /// Serializations performed so far.
    #[must_use]
    pub fn serializations(&self) -> u64 {
        self.serializations.load(Ordering::Relaxed)
    }

    /// Counts one serialization.
    pub(crate) fn count(&self) {
        self.serializations.fetch_add(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_cumulative_powers_of_two() {
        let histogram = Histogram::default();
        for value in [0, 1, 2, 3, 4, 1000, u64::MAX / 2] {
            histogram.observe(value);
        }
        let (cumulative, _, count) = histogram.snapshot();
        assert_eq!(count, 7);
        assert_eq!(cumulative[0], 2); // 0 and 1
        assert_eq!(cumulative[1], 3); // 2
        assert_eq!(cumulative[2], 5); // 3, 4
        assert_eq!(cumulative[10], 6); // 1000 <= 1024
        assert_eq!(*cumulative.last().unwrap(), 7);
    }
}

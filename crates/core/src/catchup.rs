//! The catch-up worker: serves unsynced watchers from the history in shared, bounded passes,
//! until they rejoin the live stream on the same connection.
//!
//! ## Who is served
//! Every pass first checks *every* unsynced watcher: one whose client went away is dropped; one
//! whose position fell below the history's floor (`oldest - 1`) gets one in-stream 410
//! *after* its already-queued backlog (reason `resource_expired` if it had ever reached the
//! live stream, `resource_expired_initial` otherwise); one past its deadline ends; one still in
//! its initial phase that accepted nothing for `initial_no_progress_timeout` is terminated
//! (`initial_no_progress`) and releases the snapshot it pins. A slow but progressing watcher is
//! never terminated for being slow.
//!
//! The candidates are the remaining unsynced watchers with room in their queue, ordered by the
//! free share of their queue (a share, so small and large queues compare fairly), then
//! new-or-drained since their last service, then rotation from a cursor that persists across
//! passes (positions at or above it first). At most `pass_members_max` are served.
//!
//! ## Cohorts: one history read per stretch, shared
//! The first unserved candidate leads a cohort. The pass opens one history interval at its
//! position (charged `interval_open_cost` scan units) and scans up to the remaining scan budget.
//! Every unserved candidate whose position the scan passes joins. Each member is offered every
//! event it selects above its position, a revision at a time, with a non-blocking push; the
//! events are the very `Arc`s the history holds, whose encodings are cached once for everybody
//! (so a pass never wraps or serializes per watcher). A member whose push fails keeps its
//! position and is owed the rest; owed members whose queue has room again at the end of the
//! pass are re-offered in up to two rounds. A member that accepted everything moves to the last
//! scanned revision, even when nothing in the stretch was for it: scope-filtered watchers cross
//! unrelated churn in one scan.
//!
//! ## Initial state
//! A watch with `sendInitialEvents` is served by the same passes: its initial state is streamed
//! from the snapshot captured at registration (each scanned object costs one scan unit), then
//! the initial-events-end bookmark if it allows bookmarks, then the history from the
//! snapshot's revision.
//!
//! ## Hand-off
//! A member that accepted everything and whose scan reached the end of the history is sent
//! back to the dispatcher at that position; the dispatcher pushes the few events it dispatched
//! since and adds it to the synced set (see [`crate::dispatcher`]). Only the owner of a watcher
//! writes its queue, so order and single delivery hold across the transitions.
//!
//! ## Bounds and periods
//! A pass serves at most `pass_members_max` watchers, spends at most `pass_scan_units_max` scan
//! units and `pass_pushes_max` pushes (plus the same again for retry rounds), and gives a member
//! at most one queue capacity per cohort. It runs every `pass_period_normal`; after a pass that
//! left a draining member owed or spent its push budget, every busy period (the measured pass
//! duration times `pass_busy_factor`, clamped to `[pass_period_busy_min, pass_period_busy_max]`)
//! so passes take about a tenth of a core; after a pass that served and expired nothing, every
//! `pass_period_idle`. A new stall resets the period to normal, and so does a consumer that
//! empties the queue of a watcher the worker owns (the queue raises a drain signal and wakes
//! the driver): otherwise a reader slower than the writes but faster than one queue per idle
//! period would be held to one queue per idle period and never catch up (the resync benchmark
//! measured it).
//!
//! ## Driving contract
//! Call from one thread at a time, with non-decreasing `now`: [`CatchUpWorker::run_pass`] at or
//! after [`CatchUpWorker::poll_timeout`], then optionally
//! [`CatchUpWorker::record_pass_duration`] with the pass's measured (or, in the simulator,
//! modelled) duration so the busy period can scale.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use crate::cache::{Shared, ToDispatcher, ToWorker};
use crate::config::CandidateOrder;
use crate::dispatcher::expired;
use crate::event::{SharedEvent, WatchItem};
use crate::object::{Revision, object_key};
use crate::queue::{PushResult, WatchEnd, WatcherState};
use crate::time::Instant;
use crate::watcher::{Watcher, WatcherId};

/// What one pass did, for the simulator, benchmarks and tests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PassReport {
    /// Unsynced watchers before the pass (after taking in new ones).
    pub unsynced_before: usize,
    /// Unsynced watchers with room.
    pub candidates: usize,
    /// Watchers served (cohort members and initial-state members).
    pub members: usize,
    /// Cohorts formed (history intervals opened).
    pub cohorts: usize,
    /// History events scanned.
    pub events_scanned: usize,
    /// Snapshot objects scanned for initial states.
    pub objects_scanned: usize,
    /// Items pushed in the main rounds.
    pub pushes: usize,
    /// Items pushed in the end-of-pass retry rounds.
    pub retry_pushes: usize,
    /// Watchers handed back to the dispatcher.
    pub resynced: usize,
    /// Watchers ended with a 410.
    pub expired: usize,
    /// Watchers ended for another reason (deadline, initial no progress).
    pub ended: usize,
    /// Watchers dropped because their client went away.
    pub dropped: usize,
    /// Candidates with room that were not served (over the member cap or the budgets).
    pub waited: usize,
    /// Served watchers and how many passes each had waited with room before being served.
    pub served: Vec<(WatcherId, u64)>,
    /// Whether the pass ends busy (a draining member owed, or the push budget spent).
    pub busy: bool,
}

enum Offer {
    AcceptedAll,
    /// Not everything was pushed; `queue_full` tells a full queue from a spent budget.
    Owed {
        queue_full: bool,
    },
    Closed,
}

/// A candidate's ordering key.
struct Candidate {
    id: WatcherId,
    free_share_millionths: u64,
    new_or_drained: bool,
    position: Revision,
    initial: bool,
}

/// A cohort's scanned stretch, kept for the retry rounds.
struct Stretch {
    events: Vec<SharedEvent>,
    last_scanned: Revision,
    reached_end: bool,
}

/// Serves unsynced watchers (see the module docs).
#[derive(Debug)]
pub struct CatchUpWorker {
    shared: Arc<Shared>,
    /// The unsynced watchers this worker owns, by id (deterministic order).
    unsynced: BTreeMap<WatcherId, Watcher>,
    /// The rotation cursor: the last scanned revision of the last cohort served.
    cursor: Revision,
    last_pass_at: Option<Instant>,
    next_pass_at: Option<Instant>,
    period: Duration,
    last_pass_duration: Duration,
    last_pass_busy: bool,
    last_now: Instant,
    inbox: VecDeque<ToWorker>,
}

impl CatchUpWorker {
    pub(crate) fn new(shared: Arc<Shared>) -> CatchUpWorker {
        let period = shared.config.pass_period_normal;
        CatchUpWorker {
            shared,
            unsynced: BTreeMap::new(),
            cursor: 0,
            last_pass_at: None,
            next_pass_at: None,
            period,
            last_pass_duration: Duration::ZERO,
            last_pass_busy: false,
            last_now: Instant::ZERO,
            inbox: VecDeque::new(),
        }
    }

    /// Installs the hook called when a watcher is handed to the worker, so a driver thread can
    /// wake up. Only the first hook is kept.
    pub fn set_notify(&self, notify: Box<dyn Fn() + Send + Sync>) {
        let notify: Arc<dyn Fn() + Send + Sync> = Arc::from(notify);
        let again = notify.clone();
        self.shared.to_worker.set_notify(Box::new(move || again()));
        self.shared.drain.set_notify(notify);
    }

    /// Unsynced watchers owned now (not counting those still in the mailbox).
    #[must_use]
    pub fn unsynced_len(&self) -> usize {
        self.unsynced.len()
    }

    /// The current pass period.
    #[must_use]
    pub fn period(&self) -> Duration {
        self.period
    }

    /// When the next pass is due, or `None` when there is nothing to serve.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        let has_new = !self.shared.to_worker.is_empty();
        if self.unsynced.is_empty() && !has_new {
            return None;
        }
        let scheduled = self.next_pass_at.unwrap_or(self.last_now);
        if has_new || self.shared.drain.is_raised() {
            // A new stall resets the period to normal; so does a consumer that emptied the
            // queue of a watcher the worker owns (it has room now: do not make it wait for
            // the idle period).
            let normal = self
                .last_pass_at
                .map_or(self.last_now, |t| t + self.shared.config.pass_period_normal);
            return Some(scheduled.min(normal));
        }
        Some(scheduled)
    }

    /// Runs a pass if one is due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) -> Option<PassReport> {
        match self.poll_timeout() {
            Some(due) if due <= now => Some(self.run_pass(now)),
            _ => None,
        }
    }

    /// Reports how long the last pass took, so the busy period keeps passes under
    /// `1 / pass_busy_factor` of a core.
    pub fn record_pass_duration(&mut self, duration: Duration) {
        self.last_pass_duration = duration;
        self.shared
            .metrics
            .pass_duration_micros
            .observe(u64::try_from(duration.as_micros()).unwrap_or(u64::MAX));
        if self.last_pass_busy {
            self.set_busy_period();
        }
        // Whatever the period, the next pass starts no sooner than `duration * factor` after
        // this one, so the worker never takes more than 1/factor of a core, however large the
        // passes get (the simulator showed 41 ms passes back to back at a million watchers).
        if let (Some(last), Some(next)) = (self.last_pass_at, self.next_pass_at) {
            let floor = last + duration * self.shared.config.pass_busy_factor;
            self.next_pass_at = Some(next.max(floor));
        }
    }

    fn set_busy_period(&mut self) {
        let config = &self.shared.config;
        self.period = (self.last_pass_duration * config.pass_busy_factor)
            .clamp(config.pass_period_busy_min, config.pass_period_busy_max);
        if let Some(last) = self.last_pass_at {
            self.next_pass_at = Some(last + self.period);
        }
    }

    /// Runs one bounded pass now (see the module docs).
    pub fn run_pass(&mut self, now: Instant) -> PassReport {
        debug_assert!(now >= self.last_now, "time went backwards");
        self.last_now = self.last_now.max(now);
        let mut report = PassReport::default();
        let mut new_stalls = false;
        // Queues emptied from here on raise the signal again for the next pass.
        self.shared.drain.take();
        self.shared.to_worker.take_all(&mut self.inbox);
        while let Some(ToWorker::Unsynced(watcher)) = self.inbox.pop_front() {
            new_stalls = true;
            self.unsynced.insert(watcher.id, *watcher);
        }
        report.unsynced_before = self.unsynced.len();
        self.end_unservable(now, &mut report);
        let mut candidates = self.candidates();
        report.candidates = candidates.len();
        if candidates.len() > self.shared.config.pass_members_max {
            for candidate in &candidates[self.shared.config.pass_members_max..] {
                if let Some(watcher) = self.unsynced.get_mut(&candidate.id) {
                    watcher.passes_waited += 1;
                }
            }
            report.waited += candidates.len() - self.shared.config.pass_members_max;
            candidates.truncate(self.shared.config.pass_members_max);
        }
        let served = self.serve(now, &candidates, &mut report);
        for (candidate, served) in candidates.iter().zip(&served) {
            if let Some(watcher) = self.unsynced.get_mut(&candidate.id) {
                if *served {
                    watcher.passes_waited = 0;
                    watcher.fresh_stall = false;
                } else {
                    watcher.passes_waited += 1;
                    report.waited += 1;
                }
            }
        }
        // For operators: every owned watcher's position and passes waited, as of this pass.
        for watcher in self.unsynced.values() {
            watcher
                .queue
                .publish_progress(watcher.position, watcher.passes_waited);
        }
        self.shared.metrics.passes.inc();
        self.shared
            .metrics
            .pass_members
            .observe(report.members as u64);
        self.schedule(now, &report, new_stalls);
        report
    }

    fn schedule(&mut self, now: Instant, report: &PassReport, new_stalls: bool) {
        let config = &self.shared.config;
        self.last_pass_at = Some(now);
        self.last_pass_busy = report.busy;
        if report.busy {
            self.set_busy_period();
        } else if new_stalls {
            self.period = config.pass_period_normal;
        } else if report.members == 0 && report.expired == 0 && report.ended == 0 {
            self.period = config.pass_period_idle;
        } else {
            self.period = config.pass_period_normal;
        }
        self.next_pass_at = if self.unsynced.is_empty() {
            None
        } else {
            Some(now + self.period)
        };
    }

    /// Ends every unsynced watcher that can no longer be served.
    fn end_unservable(&mut self, now: Instant, report: &mut PassReport) {
        let (floor, epoch) = {
            let data = self.shared.read();
            (data.history.servable_floor(), data.epoch)
        };
        let config = &self.shared.config;
        let mut ending: Vec<(WatcherId, Option<WatchEnd>)> = Vec::new();
        for (id, watcher) in &self.unsynced {
            let end = if watcher.queue.is_closed() {
                None
            } else if watcher.epoch != epoch || watcher.position < floor {
                Some(expired(watcher.position, floor, watcher.reached_live))
            } else if watcher.deadline.is_some_and(|d| d <= now) {
                Some(WatchEnd::Deadline)
            } else if watcher.in_initial_phase
                && now.saturating_duration_since(watcher.last_progress)
                    >= config.initial_no_progress_timeout
            {
                Some(WatchEnd::InitialNoProgress)
            } else {
                continue;
            };
            ending.push((*id, end));
        }
        let metrics = &self.shared.metrics;
        for (id, end) in ending {
            let watcher = self.unsynced.remove(&id).expect("listed above");
            metrics.stalled_watchers.add(-1);
            metrics.watchers.add(-1);
            match end {
                Some(end) => {
                    if matches!(end, WatchEnd::Expired { .. }) {
                        report.expired += 1;
                    } else {
                        report.ended += 1;
                    }
                    metrics.terminated(end.reason());
                    watcher.queue.push_end(end);
                }
                None => {
                    report.dropped += 1;
                    watcher.queue.set_state(WatcherState::Ended);
                }
            }
            // Dropping the watcher releases its pinned snapshot, if any.
        }
    }

    /// The unsynced watchers with room, in service order.
    fn candidates(&mut self) -> Vec<Candidate> {
        let mut candidates = Vec::new();
        for (id, watcher) in &mut self.unsynced {
            let (closed, free, drained) = watcher.queue.inspect();
            if drained {
                watcher.fresh_stall = true;
            }
            if free == 0 || closed {
                continue;
            }
            candidates.push(Candidate {
                id: *id,
                free_share_millionths: (free as u64 * 1_000_000) / watcher.queue.capacity() as u64,
                new_or_drained: watcher.fresh_stall,
                position: watcher.position,
                initial: watcher.initial.is_some(),
            });
        }
        let cursor = self.cursor;
        let rotation = |c: &Candidate| (u8::from(c.position < cursor), c.position, c.id);
        match self.shared.config.candidate_order {
            CandidateOrder::FreeShareThenRotation => candidates.sort_by(|a, b| {
                b.free_share_millionths
                    .cmp(&a.free_share_millionths)
                    .then(b.new_or_drained.cmp(&a.new_or_drained))
                    .then(rotation(a).cmp(&rotation(b)))
            }),
            CandidateOrder::RotationOnly => candidates.sort_by_key(rotation),
            CandidateOrder::OldestFirst => candidates.sort_by_key(|c| (c.position, c.id)),
        }
        candidates
    }

    /// Serves the candidates in order within the pass budgets. Returns which were served.
    fn serve(
        &mut self,
        now: Instant,
        candidates: &[Candidate],
        report: &mut PassReport,
    ) -> Vec<bool> {
        let config = self.shared.config.clone();
        let mut served = vec![false; candidates.len()];
        let mut scan_left = config.pass_scan_units_max;
        let mut pushes_left = config.pass_pushes_max;
        let mut stretches: Vec<Stretch> = Vec::new();
        // (candidate index, stretch index) of members owed events at the end of their cohort.
        let mut owed: Vec<(usize, usize)> = Vec::new();
        let mut resync: Vec<WatcherId> = Vec::new();
        for lead in 0..candidates.len() {
            if served[lead] {
                continue;
            }
            if scan_left == 0 || pushes_left == 0 {
                break;
            }
            if candidates[lead].initial {
                served[lead] = true;
                report.members += 1;
                self.note_served(candidates[lead].id, report);
                let finished = self.serve_initial(
                    now,
                    candidates[lead].id,
                    &mut scan_left,
                    &mut pushes_left,
                    report,
                );
                if !finished && pushes_left == 0 {
                    report.busy = true;
                }
                continue;
            }
            if scan_left <= config.interval_open_cost {
                break;
            }
            scan_left -= config.interval_open_cost;
            let lead_position = candidates[lead].position;
            let stretch = {
                // Scan only what the dispatcher has dispatched: the history can briefly hold a
                // revision the dispatcher is still delivering (or, in legacy mode, is blocked
                // on), and the hand-off point must never be above the dispatched revision.
                let dispatched = self.shared.dispatched();
                let data = self.shared.read();
                let mut events = Vec::new();
                data.history
                    .read_after(lead_position, scan_left, &mut events);
                let cut = events.partition_point(|e| e.revision() <= dispatched);
                events.truncate(cut);
                let last_scanned = events.last().map_or(lead_position, |e| e.revision());
                Stretch {
                    reached_end: last_scanned >= dispatched.min(data.history.newest()),
                    last_scanned: last_scanned.max(lead_position),
                    events,
                }
            };
            scan_left = scan_left.saturating_sub(stretch.events.len());
            report.cohorts += 1;
            report.events_scanned += stretch.events.len();
            self.shared.metrics.pass_interval_opens.inc();
            self.shared
                .metrics
                .pass_events_scanned
                .add(stretch.events.len() as u64);
            // The cohort: the lead and every unserved candidate the scan passes.
            let members: Vec<usize> = (lead..candidates.len())
                .filter(|&j| {
                    let c = &candidates[j];
                    !served[j]
                        && !c.initial
                        && c.position >= lead_position
                        && (c.position < stretch.last_scanned || stretch.reached_end)
                })
                .collect();
            for &member in &members {
                served[member] = true;
                report.members += 1;
                self.note_served(candidates[member].id, report);
                let offer = self.offer(
                    now,
                    candidates[member].id,
                    &stretch,
                    &mut pushes_left,
                    report,
                    false,
                );
                match offer {
                    Offer::AcceptedAll => {
                        if stretch.reached_end {
                            resync.push(candidates[member].id);
                        }
                    }
                    Offer::Owed { queue_full } => {
                        if !queue_full {
                            report.busy = true;
                        }
                        owed.push((member, stretches.len()));
                    }
                    Offer::Closed => {}
                }
            }
            self.cursor = stretch.last_scanned;
            stretches.push(stretch);
        }
        // End-of-pass retry rounds for owed members whose queue has room again.
        let mut retry_left = config.pass_pushes_max;
        for _round in 0..2 {
            if owed.is_empty() || retry_left == 0 {
                break;
            }
            let mut still_owed = Vec::new();
            for (member, stretch_index) in owed {
                let id = candidates[member].id;
                let has_room = self.unsynced.get(&id).is_some_and(|w| w.queue.free() > 0);
                if !has_room {
                    still_owed.push((member, stretch_index));
                    continue;
                }
                let stretch = &stretches[stretch_index];
                match self.offer(now, id, stretch, &mut retry_left, report, true) {
                    Offer::AcceptedAll => {
                        if stretch.reached_end {
                            resync.push(id);
                        }
                    }
                    Offer::Owed { .. } => still_owed.push((member, stretch_index)),
                    Offer::Closed => {}
                }
            }
            owed = still_owed;
        }
        if !owed.is_empty() {
            // A member is still owed events: it is draining (it had room when the pass began)
            // or the budget ran out; either way the next pass should come sooner.
            report.busy = true;
        }
        for id in resync {
            if let Some(watcher) = self.unsynced.remove(&id) {
                report.resynced += 1;
                self.shared
                    .to_dispatcher
                    .send(ToDispatcher::Resync(Box::new(watcher)));
            }
        }
        served
    }

    fn note_served(&self, id: WatcherId, report: &mut PassReport) {
        if let Some(watcher) = self.unsynced.get(&id) {
            report.served.push((id, watcher.passes_waited));
        }
    }

    /// Offers a member every event of `stretch` it selects above its position.
    fn offer(
        &mut self,
        now: Instant,
        id: WatcherId,
        stretch: &Stretch,
        pushes_left: &mut usize,
        report: &mut PassReport,
        retry: bool,
    ) -> Offer {
        let metrics = &self.shared.metrics;
        let Some(watcher) = self.unsynced.get_mut(&id) else {
            return Offer::Closed;
        };
        let mut member_left = watcher.queue.capacity();
        if watcher.initial_bookmark_owed {
            let item = WatchItem::Bookmark {
                revision: watcher.position,
                initial_events_end: true,
            };
            match watcher.queue.push(item) {
                PushResult::Pushed => {
                    watcher.initial_bookmark_owed = false;
                    watcher.last_sent = watcher.position;
                    watcher.last_progress = now;
                    *pushes_left = pushes_left.saturating_sub(1);
                    count_push(report, retry, 1);
                    metrics.pass_pushes.inc();
                }
                PushResult::Full => return Offer::Owed { queue_full: true },
                PushResult::Closed => return Offer::Closed,
            }
        }
        let events = &stretch.events;
        let start = events.partition_point(|e| e.revision() <= watcher.position);
        let mut batch: Vec<WatchItem> = Vec::new();
        let mut index = start;
        while index < events.len() {
            let revision = events[index].revision();
            batch.clear();
            while index < events.len() && events[index].revision() == revision {
                if let Some(event_type) = watcher.selection.event_type(&events[index]) {
                    batch.push(WatchItem::Event {
                        event_type,
                        event: events[index].clone(),
                    });
                }
                index += 1;
            }
            if batch.is_empty() {
                continue;
            }
            if *pushes_left == 0 || member_left == 0 {
                return Offer::Owed { queue_full: false };
            }
            match watcher.queue.push_batch(&batch) {
                PushResult::Pushed => {
                    let n = batch.len();
                    watcher.position = revision;
                    watcher.last_sent = revision;
                    watcher.catchup_events += n as u64;
                    watcher.last_progress = now;
                    *pushes_left = pushes_left.saturating_sub(n);
                    member_left = member_left.saturating_sub(n);
                    count_push(report, retry, n);
                    metrics.pass_pushes.add(n as u64);
                    metrics.watcher_deferred_events.add(n as u64);
                }
                PushResult::Full => return Offer::Owed { queue_full: true },
                PushResult::Closed => return Offer::Closed,
            }
        }
        // Everything it selects in the stretch is queued: it has every event up to the last
        // scanned revision, whether or not any was for it.
        watcher.position = watcher.position.max(stretch.last_scanned);
        Offer::AcceptedAll
    }

    /// Streams a watcher's initial state from its pinned snapshot. Returns whether the state
    /// was fully streamed.
    fn serve_initial(
        &mut self,
        now: Instant,
        id: WatcherId,
        scan_left: &mut usize,
        pushes_left: &mut usize,
        report: &mut PassReport,
    ) -> bool {
        let metrics = &self.shared.metrics;
        let Some(watcher) = self.unsynced.get_mut(&id) else {
            return false;
        };
        let Some(phase) = watcher.initial.as_mut() else {
            return true;
        };
        let snapshot = phase.snapshot.clone();
        let selection = watcher.selection.clone();
        let single_key = match (&selection.namespace, &selection.name) {
            (Some(namespace), Some(name)) => Some(object_key(namespace, name)),
            _ => None,
        };
        let prefix = selection.key_prefix();
        let after_key = phase.after_key.clone();
        let mut finished = true;
        let mut scanned = 0;
        let objects: Box<dyn Iterator<Item = &Arc<crate::Object>>> = match &single_key {
            Some(key) => Box::new(
                snapshot
                    .get(key)
                    .filter(|_| after_key.is_none())
                    .into_iter(),
            ),
            None => Box::new(snapshot.range(prefix.as_deref(), after_key.as_deref())),
        };
        for object in objects {
            if *scan_left == 0 || *pushes_left == 0 {
                finished = false;
                break;
            }
            *scan_left -= 1;
            scanned += 1;
            if selection.matches(object) {
                match watcher.queue.push(WatchItem::Initial(object.clone())) {
                    PushResult::Pushed => {
                        *pushes_left -= 1;
                        report.pushes += 1;
                        metrics.pass_pushes.inc();
                        watcher.last_progress = now;
                    }
                    PushResult::Full | PushResult::Closed => {
                        finished = false;
                        break;
                    }
                }
            }
            phase.after_key = Some(object.key().clone());
        }
        report.objects_scanned += scanned;
        metrics.pass_objects_scanned.add(scanned as u64);
        if finished {
            watcher.position = snapshot.revision();
            watcher.initial = None;
            watcher.initial_bookmark_owed = watcher.allow_bookmarks;
            watcher.queue.set_state(WatcherState::Unsynced);
        }
        finished
    }
}

fn count_push(report: &mut PassReport, retry: bool, n: usize) {
    if retry {
        report.retry_pushes += n;
    } else {
        report.pushes += n;
    }
}

//! The simulation engine: the real [`Dispatcher`] and [`CatchUpWorker`] stepped on a virtual
//! clock in one thread, a simulated store writing revisions, and simulated clients taking items
//! from their [`Watch`] queues.
//!
//! ## Time
//! Virtual time is nanoseconds since the start. Everything that happens is an event in one
//! priority queue ordered by `(time, sequence)`, so ties break by insertion order and a run is
//! a pure function of the scenario, the seed and the code.
//!
//! ## Virtual cores
//! The dispatcher and the worker each have a `busy_until`. A call into the core happens at the
//! moment the core is free; its cost ([`CostTable`]) is computed from the counts the core
//! reports, and the core stays busy for that long. What the call pushed becomes visible to
//! clients at the end of the call: a client woken by it reads at the end, and a client that
//! happens to read in between stamps the item no earlier than that end. So an event's delivery
//! latency includes the writes queued before the dispatcher, the dispatcher's own work and, in
//! legacy mode, the time it spends blocked on full queues.
//!
//! ## Clients
//! A client reads as fast as items arrive (woken through the queue's waker) or at a rate
//! (events/s and/or bytes/s, token bucket). It serializes every item it takes through the core
//! (`WatchItem::encoded`), so serializations are counted by the core. Stalls, disconnects,
//! voluntary reconnects, deadlines and 410s are modelled per client with its own PRNG stream.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

use watchkeeper_core::{
    CacheConfig, CatchUpWorker, Change, Dispatcher, Encoding, FieldSelector, Instant,
    LabelSelector, Revision, TerminationReason, Watch, WatchCache, WatchEnd, WatchItem,
    WatchRequest, WatchStart, WatcherId, WatcherState,
};

use crate::costs::CostTable;
use crate::model::Store;
use crate::oracle::{ConnCheck, ScopeSel, Selection, Violation};
use crate::report::{
    Episode, GroupStats, Outcome, PassStats, Sample, Termination, ViolationRecord,
};
use crate::rng::{Rng, TraceHash};
use crate::scenario::{Group, Scenario, Scope, Start};
use crate::stats::LogHistogram;

const NS: f64 = 1e9;
const NEVER: u64 = u64::MAX;
/// Items a client takes per read at most (a bound on one read's work).
const READ_BATCH_MAX: usize = 4096;
/// Smallest interval between two reads of a rate-limited client.
const READ_TICK_MIN_NS: u64 = 1_000_000;
/// Steps at one instant before the engine declares a livelock.
const STEPS_PER_INSTANT_MAX: u64 = 50_000_000;
/// Violations kept in the report (all are counted).
const VIOLATIONS_KEPT_MAX: usize = 100;
/// Terminations listed in the report (all are counted).
const TERMINATIONS_KEPT_MAX: usize = 20_000;
/// Resync episodes listed in the report.
const EPISODES_KEPT_MAX: usize = 20_000;

fn secs_to_ns(s: f64) -> u64 {
    (s.max(0.0) * NS).round() as u64
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    Write,
    Dispatcher,
    Worker,
    Read(u32),
    Connect(u32),
    StallStart {
        client: u32,
        until: u64,
    },
    StallEnd(u32),
    Reconnect(u32),
    Disconnect {
        client: u32,
        backoff: u64,
        offline: u64,
    },
    Halt(u32),
    Sample,
    Drain,
}

struct ReadyWaker {
    client: u32,
    ready: Arc<Mutex<Vec<u32>>>,
}

impl Wake for ReadyWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.ready
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(self.client);
    }
}

/// Per-connection state of a client.
struct Conn {
    watch: Watch,
    id: WatcherId,
    check: ConnCheck,
    /// `Now` starts learn their start from the dispatcher.
    pending_now: bool,
}

struct Client {
    group: u32,
    rng: Rng,
    waker: Waker,
    selection: Selection,
    read_rate: f64,
    bytes_rate: f64,
    tokens: f64,
    byte_tokens: f64,
    refilled_at: u64,
    reaction_ns: u64,
    conn: Option<Conn>,
    connections: u32,
    read_at: Option<u64>,
    stalled_until: u64,
    offline_until: u64,
    last_rv: Option<Revision>,
    needs_relist: bool,
    terminated: bool,
    ever_connected: bool,
    reconnect_pending: bool,
    unsynced_since: Option<u64>,
    resumed: Option<(u64, usize, Revision)>,
    latency_count: u64,
    latency_sum: u128,
    latency_max: u64,
    latency: Option<Box<LogHistogram>>,
}

struct GroupRt {
    spec: Group,
    labels: Option<Arc<LabelSelector>>,
    healthy: bool,
    stats: GroupStats,
    latency: LogHistogram,
    resync_after_resume: LogHistogram,
}

struct Pending {
    rv: Revision,
    changes: Vec<Change>,
}

/// One run of one variant.
pub(crate) struct World<'a> {
    scenario: &'a Scenario,
    seed: u64,
    costs: &'a CostTable,
    cache: WatchCache,
    dispatcher: Dispatcher,
    worker: CatchUpWorker,
    store: Store,
    now: u64,
    end_ns: u64,
    drain_ns: u64,
    draining: bool,
    warmup_ns: u64,
    events: BinaryHeap<Reverse<(u64, u64, Ev)>>,
    seq: u64,
    steps_at_now: (u64, u64),
    incoming: VecDeque<Pending>,
    incoming_max: usize,
    dispatch_end: Vec<u64>,
    disp_busy_until: u64,
    disp_wake: Option<u64>,
    disp_busy_ns: f64,
    disp_blocked_since: Option<u64>,
    disp_blocked_ns: u64,
    message_cost_ns: f64,
    pending_now: Vec<u32>,
    worker_busy_until: u64,
    worker_wake: Option<u64>,
    worker_busy_ns: f64,
    pass_end: u64,
    pass_served: Vec<WatcherId>,
    last_pass_start: Option<u64>,
    clients_halted_until: u64,
    clients: Vec<Client>,
    /// Dispatcher and worker steps so far (for the invariant checks' sampling).
    core_ops: u64,
    /// Clients last observed unsynced: re-observed whenever the dispatcher takes hand-offs,
    /// so a resync is timed when it happens, not at the client's next read.
    unsynced_clients: std::collections::BTreeSet<u32>,
    groups: Vec<GroupRt>,
    ready: Arc<Mutex<Vec<u32>>>,
    buf: Vec<WatchItem>,
    hash: TraceHash,
    // Outputs.
    terminations: Vec<Termination>,
    terminations_total: u64,
    violations: Vec<ViolationRecord>,
    safety_violations: u64,
    liveness_violations: u64,
    episodes: Vec<Episode>,
    samples: Vec<Sample>,
    pass_stats: PassStats,
    client_cpu_ns: f64,
    relist_objects: u64,
    events_taken: u64,
    connections_checked: u64,
    client_reconnects: u64,
}

impl<'a> World<'a> {
    pub(crate) fn new(
        scenario: &'a Scenario,
        config: CacheConfig,
        costs: &'a CostTable,
        seed: u64,
    ) -> World<'a> {
        let store = Store::new(scenario, seed);
        let (cache, dispatcher, worker) =
            WatchCache::new(config, store.list_revision, store.initial_objects())
                .expect("validated configuration");
        let ready = Arc::new(Mutex::new(Vec::new()));
        let write_rate = scenario.writes.rate;
        let mut groups = Vec::new();
        let mut clients = Vec::new();
        for (g, spec) in scenario.groups.iter().enumerate() {
            let labels = spec
                .label_selector
                .as_deref()
                .map(|s| Arc::new(LabelSelector::parse(s).expect("validated selector")));
            let healthy = spec.healthy.unwrap_or(
                spec.stalls.is_empty()
                    && spec.disconnects.is_empty()
                    && spec.reconnect_every_s.is_none()
                    && (spec.read_rate == 0.0 || spec.read_rate > 2.0 * write_rate),
            );
            for i in 0..spec.count {
                let index = clients.len() as u32;
                let mut rng = Rng::new(seed, 1000 + u64::from(index));
                let jitter = 1.0 + spec.read_jitter * rng.symmetric();
                let scope = match spec.scope {
                    Scope::Cluster => ScopeSel::Cluster,
                    Scope::Namespace => {
                        ScopeSel::Namespace((i % scenario.objects.namespaces) as u32)
                    }
                    Scope::Object => ScopeSel::Slot((i % scenario.objects.count) as u32),
                    Scope::Node => ScopeSel::Node((i % scenario.objects.nodes) as u32),
                    Scope::Hot => ScopeSel::Slot(store.hot_slot.expect("validated hot object")),
                };
                clients.push(Client {
                    group: g as u32,
                    rng,
                    waker: Waker::from(Arc::new(ReadyWaker {
                        client: index,
                        ready: ready.clone(),
                    })),
                    selection: Selection {
                        scope,
                        labels: labels.clone(),
                    },
                    read_rate: (spec.read_rate * jitter).max(0.0),
                    bytes_rate: (spec.read_bytes_rate * jitter).max(0.0),
                    tokens: 1.0,
                    byte_tokens: 0.0,
                    refilled_at: 0,
                    reaction_ns: (spec.reaction_us * 1000.0) as u64,
                    conn: None,
                    connections: 0,
                    read_at: None,
                    stalled_until: 0,
                    offline_until: 0,
                    last_rv: None,
                    needs_relist: false,
                    terminated: false,
                    ever_connected: false,
                    reconnect_pending: false,
                    unsynced_since: None,
                    resumed: None,
                    latency_count: 0,
                    latency_sum: 0,
                    latency_max: 0,
                    latency: (spec.count <= scenario.per_watcher_detail_max)
                        .then(|| Box::new(LogHistogram::default())),
                });
            }
            groups.push(GroupRt {
                spec: spec.clone(),
                labels,
                healthy,
                stats: GroupStats {
                    name: spec.name.clone(),
                    watchers: spec.count,
                    healthy,
                    ..GroupStats::default()
                },
                latency: LogHistogram::default(),
                resync_after_resume: LogHistogram::default(),
            });
        }
        let end_ns = secs_to_ns(scenario.duration_s);
        World {
            scenario,
            seed,
            costs,
            cache,
            dispatcher,
            worker,
            store,
            now: 0,
            end_ns,
            drain_ns: end_ns + secs_to_ns(scenario.drain_s),
            draining: false,
            warmup_ns: secs_to_ns(scenario.warmup_s),
            events: BinaryHeap::new(),
            seq: 0,
            steps_at_now: (0, 0),
            incoming: VecDeque::new(),
            incoming_max: 0,
            dispatch_end: Vec::new(),
            disp_busy_until: 0,
            disp_wake: None,
            disp_busy_ns: 0.0,
            disp_blocked_since: None,
            disp_blocked_ns: 0,
            message_cost_ns: 0.0,
            pending_now: Vec::new(),
            worker_busy_until: 0,
            worker_wake: None,
            worker_busy_ns: 0.0,
            pass_end: 0,
            pass_served: Vec::new(),
            last_pass_start: None,
            clients_halted_until: 0,
            clients,
            core_ops: 0,
            unsynced_clients: std::collections::BTreeSet::new(),
            groups,
            ready,
            buf: Vec::new(),
            hash: TraceHash::default(),
            terminations: Vec::new(),
            terminations_total: 0,
            violations: Vec::new(),
            safety_violations: 0,
            liveness_violations: 0,
            episodes: Vec::new(),
            samples: Vec::new(),
            pass_stats: PassStats::default(),
            client_cpu_ns: 0.0,
            relist_objects: 0,
            events_taken: 0,
            connections_checked: 0,
            client_reconnects: 0,
        }
    }

    fn at(&mut self, time: u64, ev: Ev) {
        self.seq += 1;
        self.events.push(Reverse((time, self.seq, ev)));
    }

    fn instant(&self) -> Instant {
        Instant::from_nanos(self.now)
    }

    fn seconds(&self) -> f64 {
        self.now as f64 / NS
    }

    /// Schedules every input of the scenario that is known up front.
    fn schedule_inputs(&mut self) {
        let scenario = self.scenario;
        self.at(0, Ev::Write);
        self.at(0, Ev::Sample);
        self.at(self.end_ns, Ev::Drain);
        for (h, halt) in scenario.halts.iter().enumerate() {
            self.at(secs_to_ns(halt.at_s), Ev::Halt(h as u32));
        }
        let mut first = 0usize;
        for (g, spec) in scenario.groups.iter().enumerate() {
            let mut group_rng = Rng::new(self.seed_of_group(g), 0);
            for i in 0..spec.count {
                let c = (first + i) as u32;
                let start = spec.start_at_s + spec.start_spread_s * group_rng.unit();
                self.at(secs_to_ns(start), Ev::Connect(c));
                if let Some(every) = spec.reconnect_every_s
                    && every > 0.0
                {
                    self.at(secs_to_ns(start + every), Ev::Reconnect(c));
                }
            }
            for stall in &spec.stalls {
                let mut at = stall.at_s;
                loop {
                    if at >= scenario.duration_s {
                        break;
                    }
                    for i in 0..spec.count {
                        if !group_rng.chance(stall.fraction) && stall.fraction < 1.0 {
                            continue;
                        }
                        let c = (first + i) as u32;
                        let start = at + stall.jitter_s * group_rng.unit();
                        let until = if group_rng.chance(stall.never_recover_fraction) {
                            NEVER
                        } else {
                            secs_to_ns(start + stall.duration_s)
                        };
                        self.at(secs_to_ns(start), Ev::StallStart { client: c, until });
                    }
                    match stall.every_s {
                        Some(every) if every > 0.0 => at += every,
                        _ => break,
                    }
                }
            }
            for d in &spec.disconnects {
                for i in 0..spec.count {
                    if !group_rng.chance(d.fraction) && d.fraction < 1.0 {
                        continue;
                    }
                    let jitter = 1.0 + spec.reconnect_jitter * group_rng.symmetric();
                    self.at(
                        secs_to_ns(d.at_s),
                        Ev::Disconnect {
                            client: (first + i) as u32,
                            backoff: secs_to_ns(d.backoff_s * jitter),
                            offline: secs_to_ns(d.offline_s),
                        },
                    );
                }
            }
            first += spec.count;
        }
    }

    fn seed_of_group(&self, g: usize) -> u64 {
        // Group streams are independent of client streams and of the store's.
        Rng::new(self.seed, 500 + g as u64).next_u64()
    }

    /// Runs to the end and returns the outcome.
    pub(crate) fn run(mut self, variant: &str) -> Outcome {
        self.schedule_inputs();
        while let Some(Reverse((time, _, ev))) = self.events.pop() {
            if time > self.drain_ns {
                break;
            }
            debug_assert!(time >= self.now);
            if time == self.steps_at_now.0 {
                self.steps_at_now.1 += 1;
                assert!(
                    self.steps_at_now.1 < STEPS_PER_INSTANT_MAX,
                    "livelock at {time} ns: {ev:?}"
                );
            } else {
                self.steps_at_now = (time, 0);
            }
            self.now = time;
            self.handle(ev);
        }
        self.now = self.drain_ns;
        self.finish(variant)
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Write => self.write(),
            Ev::Dispatcher => {
                if self.disp_wake == Some(self.now) {
                    self.disp_wake = None;
                }
                self.step_dispatcher();
            }
            Ev::Worker => {
                if self.worker_wake == Some(self.now) {
                    self.worker_wake = None;
                }
                self.step_worker();
            }
            Ev::Read(c) => {
                if self.clients[c as usize].read_at == Some(self.now) {
                    self.clients[c as usize].read_at = None;
                    self.read(c);
                }
            }
            Ev::Connect(c) => self.connect(c),
            Ev::StallStart { client, until } => {
                if !self.draining {
                    let cl = &mut self.clients[client as usize];
                    cl.stalled_until = cl.stalled_until.max(until);
                    if until != NEVER {
                        self.at(until, Ev::StallEnd(client));
                    }
                }
            }
            Ev::StallEnd(c) => self.stall_end(c),
            Ev::Reconnect(c) => self.voluntary_reconnect(c),
            Ev::Disconnect {
                client,
                backoff,
                offline,
            } => {
                if !self.draining {
                    self.disconnect(client, backoff, offline);
                }
            }
            Ev::Halt(h) => {
                let halt = &self.scenario.halts[h as usize];
                let until = self.now + secs_to_ns(halt.duration_s);
                if halt.dispatcher {
                    self.disp_busy_until = self.disp_busy_until.max(until);
                    self.wake_dispatcher(until);
                }
                if halt.worker {
                    self.worker_busy_until = self.worker_busy_until.max(until);
                    self.wake_worker(until);
                }
                if halt.clients {
                    self.clients_halted_until = self.clients_halted_until.max(until);
                }
            }
            Ev::Sample => {
                self.sample();
                let next = self.now + secs_to_ns(self.scenario.sample_interval_s);
                if next <= self.drain_ns {
                    self.at(next, Ev::Sample);
                }
            }
            Ev::Drain => self.start_drain(),
        }
    }

    // ---------------------------------------------------------------- store and dispatcher

    fn write(&mut self) {
        if self.draining || self.now >= self.end_ns {
            return;
        }
        let t = self.seconds();
        let (rate, _) = self.store.rate_at(t);
        if rate > 0.0 {
            let (rv, changes) = self.store.write(self.now, t);
            for entry in self.store.entries.iter().rev().take_while(|e| e.rv == rv) {
                self.hash.record(&[0, self.now, rv, u64::from(entry.slot)]);
            }
            self.incoming.push_back(Pending { rv, changes });
            self.incoming_max = self.incoming_max.max(self.incoming.len());
            self.dispatch_end.push(NEVER);
            self.wake_dispatcher(self.now);
        }
        let gap = self.store.next_gap_s(t);
        self.at(self.now + secs_to_ns(gap).max(1), Ev::Write);
    }

    fn wake_dispatcher(&mut self, time: u64) {
        let time = time.max(self.now);
        if self.disp_wake.is_none_or(|w| time < w) {
            self.disp_wake = Some(time);
            self.at(time, Ev::Dispatcher);
        }
    }

    fn wake_worker(&mut self, time: u64) {
        let time = time.max(self.now);
        if self.worker_wake.is_none_or(|w| time < w) {
            self.worker_wake = Some(time);
            self.at(time, Ev::Worker);
        }
    }

    fn step_dispatcher(&mut self) {
        let now = self.now;
        if now < self.disp_busy_until {
            self.wake_dispatcher(self.disp_busy_until);
            return;
        }
        let instant = self.instant();
        let before = self.cache.dispatched();
        let mut cost = 0.0;
        let mut did = false;
        let mut handed_back = false;
        if self.dispatcher.has_messages() {
            self.dispatcher.handle_messages(instant);
            cost += std::mem::take(&mut self.message_cost_ns);
            did = true;
            handed_back = true;
        }
        if self
            .dispatcher
            .poll_timeout()
            .is_some_and(|t| t.as_nanos() <= now)
        {
            self.dispatcher.handle_timeout(instant);
            cost += self.costs.dispatch_timeout_ns;
            did = true;
        }
        let mut dispatched_rv = None;
        if !self.dispatcher.is_blocked()
            && let Some(p) = self.incoming.pop_front()
        {
            {
                let report = self.dispatcher.handle_revision(instant, p.rv, p.changes);
                cost += std::mem::take(&mut self.message_cost_ns);
                cost += self.costs.dispatch(&report);
                self.hash.record(&[
                    1,
                    now,
                    p.rv,
                    report.events as u64,
                    report.evaluated as u64,
                    report.pushed as u64,
                    report.stalled as u64,
                    report.blocked as u64,
                ]);
                dispatched_rv = Some(p.rv);
                did = true;
            }
        }
        self.resolve_now_starts(before);
        if handed_back {
            let watched: Vec<u32> = self.unsynced_clients.iter().copied().collect();
            for c in watched {
                self.observe_state(c);
            }
        }
        let end = now + cost.round() as u64;
        if let Some(rv) = dispatched_rv {
            let i = (rv - self.store.list_revision - 1) as usize;
            self.dispatch_end[i] = end;
        }
        self.disp_busy_until = end;
        self.disp_busy_ns += cost;
        self.track_blocked();
        self.after_core_op(end);
        if !self.incoming.is_empty() && !self.dispatcher.is_blocked() {
            self.wake_dispatcher(end);
        }
        if self.dispatcher.has_messages() {
            self.wake_dispatcher(end);
        }
        if let Some(t) = self.dispatcher.poll_timeout() {
            let t = t.as_nanos().max(end);
            // A timer the call did not consume must not spin at the same instant.
            let t = if t <= now && !did { now + 1_000 } else { t };
            self.wake_dispatcher(t);
        }
        self.wake_worker_if_needed(end);
    }

    fn track_blocked(&mut self) {
        match (self.dispatcher.is_blocked(), self.disp_blocked_since) {
            (true, None) => self.disp_blocked_since = Some(self.now),
            (false, Some(since)) => {
                self.disp_blocked_ns += self.now - since;
                self.disp_blocked_since = None;
            }
            _ => {}
        }
    }

    fn wake_worker_if_needed(&mut self, not_before: u64) {
        if let Some(t) = self.worker.poll_timeout() {
            self.wake_worker(t.as_nanos().max(not_before).max(self.worker_busy_until));
        }
    }

    /// Connections that started `Now` learn their start: the dispatched revision at the moment
    /// the dispatcher placed them (before any revision the same call dispatched).
    fn resolve_now_starts(&mut self, dispatched_before: Revision) {
        for c in std::mem::take(&mut self.pending_now) {
            let client = &mut self.clients[c as usize];
            if let Some(conn) = &mut client.conn
                && conn.pending_now
            {
                conn.pending_now = false;
                conn.check.start_after(&self.store, dispatched_before);
            }
        }
    }

    /// After a core call that ends at `end`: woken clients read then.
    fn after_core_op(&mut self, end: u64) {
        self.core_ops += 1;
        // Debug builds (the simulator's tests) check both actors' invariants after every core
        // step while the population is small, and every 1,024th step beyond (a check walks
        // every watcher); release builds (the figures) do not pay for it.
        if cfg!(debug_assertions)
            && (self.clients.len() <= 2_000 || self.core_ops.is_multiple_of(1_024))
            && let Err(broken) = watchkeeper_core::check_invariants(&self.dispatcher, &self.worker)
        {
            panic!("core invariant broken at {} ns: {broken}", self.now);
        }
        let ready: Vec<u32> = std::mem::take(
            &mut *self
                .ready
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        for c in ready {
            let reaction = self.clients[c as usize].reaction_ns;
            self.schedule_read(c, end + reaction);
        }
    }

    fn step_worker(&mut self) {
        let now = self.now;
        if now < self.worker_busy_until {
            self.wake_worker(self.worker_busy_until);
            return;
        }
        if self.dispatcher.is_blocked() {
            // Legacy mode: while a revision is half dispatched the history already holds it,
            // and a pass would hand a watcher back above the dispatched revision (the core's
            // `Dispatcher::resync` asserts against that). Passes wait for the dispatcher;
            // Kubernetes' legacy path has no passes at all.
            return;
        }
        match self.worker.poll_timeout() {
            None => return,
            Some(t) if t.as_nanos() > now => {
                self.wake_worker(t.as_nanos());
                return;
            }
            Some(_) => {}
        }
        let report = self.worker.run_pass(self.instant());
        let cost = self.costs.pass(&report);
        let duration = std::time::Duration::from_nanos(cost.round() as u64);
        self.worker.record_pass_duration(duration);
        let end = now + duration.as_nanos() as u64;
        self.worker_busy_until = end;
        self.worker_busy_ns += cost;
        self.pass_end = end;
        self.pass_served = report.served.iter().map(|(id, _)| *id).collect();
        self.pass_served.sort_unstable();
        self.hash.record(&[
            2,
            now,
            report.members as u64,
            report.cohorts as u64,
            report.events_scanned as u64,
            report.objects_scanned as u64,
            report.pushes as u64,
            report.retry_pushes as u64,
            report.resynced as u64,
            report.expired as u64,
        ]);
        let period = self.last_pass_start.map(|s| now - s);
        self.last_pass_start = Some(now);
        let starvation = self.scenario.starvation_passes_max;
        self.pass_stats.record(&report, cost, period, starvation);
        self.message_cost_ns += self.costs.dispatch_message_ns * report.resynced as f64;
        self.after_core_op(end);
        if self.dispatcher.has_messages() {
            self.wake_dispatcher(end.max(self.disp_busy_until));
        }
        self.wake_worker_if_needed(end);
    }

    // ---------------------------------------------------------------- clients

    fn schedule_read(&mut self, c: u32, time: u64) {
        let time = time.max(self.now);
        let client = &mut self.clients[c as usize];
        if client.read_at.is_none_or(|t| time < t) {
            client.read_at = Some(time);
            self.at(time, Ev::Read(c));
        }
    }

    fn connect(&mut self, c: u32) {
        let now = self.now;
        let instant = self.instant();
        let spec = &self.groups[self.clients[c as usize].group as usize].spec;
        let client = &self.clients[c as usize];
        if client.conn.is_some() {
            return;
        }
        let start = if client.needs_relist {
            WatchStart::InitialState { min_revision: None }
        } else if let Some(rv) = client.last_rv {
            WatchStart::After(rv)
        } else {
            match spec.start {
                Start::Now => WatchStart::Now,
                Start::InitialState => WatchStart::InitialState { min_revision: None },
                Start::History => {
                    let info = self.cache.history_info();
                    WatchStart::After(info.oldest.saturating_sub(1))
                }
            }
        };
        let mut request = WatchRequest::new(start);
        request.allow_bookmarks =
            spec.bookmarks || matches!(start, WatchStart::InitialState { .. });
        request.queue_capacity = spec.queue_capacity;
        request.labels = spec
            .label_selector
            .as_deref()
            .map_or_else(LabelSelector::everything, |s| {
                LabelSelector::parse(s).expect("validated")
            });
        let mut fields = Vec::new();
        match client.selection.scope {
            ScopeSel::Cluster => {}
            ScopeSel::Namespace(ns) => {
                request.namespace = Some(self.store.namespaces[ns as usize].clone());
            }
            ScopeSel::Slot(slot) => {
                let ns = self.store.slot_ns(slot);
                request.namespace = Some(self.store.namespaces[ns as usize].clone());
                fields.push(format!(
                    "metadata.name={}",
                    Store::slot_name(slot, Some(slot) == self.store.hot_slot)
                ));
            }
            ScopeSel::Node(node) => {
                fields.push(format!("spec.nodeName={}", Store::node_name(node)))
            }
        }
        if !fields.is_empty() {
            request.fields = FieldSelector::parse(&fields.join(",")).expect("valid field selector");
        }
        if let Some(deadline) = spec.deadline_s {
            let jitter = 1.0 + spec.deadline_jitter * self.clients[c as usize].rng.symmetric();
            request.deadline = Some(Instant::from_nanos(now + secs_to_ns(deadline * jitter)));
        }
        let watch = self.cache.watch(request, instant);
        let id = watch.id();
        let client = &mut self.clients[c as usize];
        let (after, pending_now, initial) = match start {
            WatchStart::Now => (None, true, false),
            WatchStart::After(rv) => (Some(rv), false, false),
            WatchStart::InitialState { .. } => (None, false, true),
        };
        let mut check = ConnCheck::new(client.selection.clone(), after, initial);
        if let Some(rv) = after {
            check.start_after(&self.store, rv);
        }
        client.conn = Some(Conn {
            watch,
            id,
            check,
            pending_now,
        });
        client.connections += 1;
        if client.ever_connected {
            self.client_reconnects += 1;
        }
        client.ever_connected = true;
        client.reconnect_pending = false;
        client.unsynced_since = None;
        client.resumed = None;
        if pending_now {
            self.pending_now.push(c);
        }
        self.connections_checked += 1;
        self.message_cost_ns += self.costs.dispatch_message_ns;
        self.wake_dispatcher(now.max(self.disp_busy_until));
        self.schedule_read(c, now);
    }

    /// The client closes its connection (a cancel reaches the dispatcher).
    fn close(&mut self, c: u32) {
        let client = &mut self.clients[c as usize];
        if let Some(conn) = client.conn.take() {
            drop(conn.watch);
            self.message_cost_ns += self.costs.dispatch_message_ns;
            self.wake_dispatcher(self.now.max(self.disp_busy_until));
        }
    }

    fn voluntary_reconnect(&mut self, c: u32) {
        if self.draining {
            return;
        }
        let g = self.clients[c as usize].group as usize;
        let every = self.groups[g].spec.reconnect_every_s.unwrap_or(0.0);
        if self.clients[c as usize].conn.is_some() {
            self.close(c);
            self.connect(c);
        }
        if every > 0.0 {
            self.at(self.now + secs_to_ns(every), Ev::Reconnect(c));
        }
    }

    fn disconnect(&mut self, c: u32, backoff: u64, offline: u64) {
        if self.clients[c as usize].conn.is_none() {
            return;
        }
        self.close(c);
        let client = &mut self.clients[c as usize];
        client.offline_until = self.now + offline;
        if !client.reconnect_pending {
            client.reconnect_pending = true;
            self.at(self.now + backoff, Ev::Connect(c));
        }
    }

    fn stall_end(&mut self, c: u32) {
        let now = self.now;
        let client = &mut self.clients[c as usize];
        if client.stalled_until > now || client.stalled_until == 0 {
            return;
        }
        client.stalled_until = 0;
        if let Some(conn) = &client.conn
            && conn.check.is_started()
            && !conn.check.in_initial()
        {
            let backlog = conn.check.remaining(&self.store);
            client.resumed = Some((now, backlog, self.store.revision));
        }
        self.schedule_read(c, now);
    }

    fn start_drain(&mut self) {
        self.draining = true;
        for c in 0..self.clients.len() as u32 {
            let client = &mut self.clients[c as usize];
            if client.stalled_until != NEVER {
                client.stalled_until = 0;
            }
            client.offline_until = 0;
            if client.conn.is_some() {
                self.schedule_read(c, self.now);
            }
        }
    }

    fn read(&mut self, c: u32) {
        let now = self.now;
        if now < self.clients_halted_until {
            self.schedule_read(c, self.clients_halted_until);
            return;
        }
        let draining = self.draining;
        let client = &mut self.clients[c as usize];
        if client.conn.is_none() || client.stalled_until > now || client.offline_until > now {
            if client.offline_until > now && client.conn.is_some() {
                let t = client.offline_until;
                self.schedule_read(c, t);
            }
            return;
        }
        let limited = !draining && (client.read_rate > 0.0 || client.bytes_rate > 0.0);
        let mut budget = READ_BATCH_MAX;
        if limited {
            let elapsed = (now - client.refilled_at) as f64 / NS;
            client.refilled_at = now;
            if client.read_rate > 0.0 {
                let cap = (client.read_rate * 0.002).max(1.0);
                client.tokens = (client.tokens + elapsed * client.read_rate).min(cap);
                budget = budget.min(client.tokens.floor() as usize);
            }
            if client.bytes_rate > 0.0 {
                let cap = (client.bytes_rate * 0.002).max(1.0);
                client.byte_tokens = (client.byte_tokens + elapsed * client.bytes_rate).min(cap);
                if client.byte_tokens <= 0.0 {
                    budget = 0;
                }
            }
            if budget == 0 {
                let wait = self.refill_wait(c);
                self.schedule_read(c, now + wait);
                return;
            }
        }
        let mut taken = 0usize;
        let mut ended = None;
        let mut buf = std::mem::take(&mut self.buf);
        loop {
            let client = &mut self.clients[c as usize];
            let Some(conn) = &client.conn else { break };
            let want = if client.bytes_rate > 0.0 && limited {
                1
            } else {
                (budget - taken).min(256)
            };
            if want == 0 {
                break;
            }
            buf.clear();
            let mut cx = Context::from_waker(&client.waker);
            match conn.watch.poll_pop_many(&mut cx, want, &mut buf) {
                Poll::Ready(None) => {
                    for item in buf.drain(..) {
                        self.take(c, item);
                        taken += 1;
                    }
                    let client = &mut self.clients[c as usize];
                    if limited && client.bytes_rate > 0.0 && client.byte_tokens <= 0.0 {
                        break;
                    }
                }
                Poll::Ready(Some(end)) => {
                    ended = Some(end);
                    break;
                }
                Poll::Pending => break,
            }
        }
        self.buf = buf;
        let client = &mut self.clients[c as usize];
        if limited {
            client.tokens -= taken as f64;
        }
        self.observe_state(c);
        if let Some(end) = ended {
            self.ended(c, end);
        } else if taken > 0 {
            // More may be queued: read again at the next tick (rate) or right away (fast).
            let next = if limited {
                now + self.refill_wait(c).max(READ_TICK_MIN_NS)
            } else {
                now + self.clients[c as usize].reaction_ns.max(1)
            };
            self.schedule_read(c, next);
        }
        // The queue's drain signal (a consumer emptied its queue, or a consumer-driven one is
        // stuck at the end of the history) wakes the worker's thread in the server: here it
        // brings the worker's next step forward.
        self.wake_worker_if_needed(now);
        if taken > 0 && self.dispatcher.is_blocked() {
            self.dispatcher.retry_blocked(self.instant());
            self.track_blocked();
            self.after_core_op(now);
            if !self.dispatcher.is_blocked() {
                self.wake_dispatcher(now.max(self.disp_busy_until));
                self.wake_worker_if_needed(now);
            }
        }
    }

    fn refill_wait(&self, c: u32) -> u64 {
        let client = &self.clients[c as usize];
        let mut wait: f64 = 0.0;
        if client.read_rate > 0.0 && client.tokens < 1.0 {
            wait = wait.max((1.0 - client.tokens) / client.read_rate);
        }
        if client.bytes_rate > 0.0 && client.byte_tokens <= 0.0 {
            wait = wait.max((1.0 - client.byte_tokens) / client.bytes_rate);
        }
        secs_to_ns(wait).max(READ_TICK_MIN_NS)
    }

    fn take(&mut self, c: u32, item: WatchItem) {
        let now = self.now;
        let stats = &self.cache.metrics().encode;
        let before = stats.serializations();
        let encoded = item.encoded(Encoding::Json, stats);
        let bytes = encoded.as_ref().map_or(0, |(_, b)| b.len());
        if stats.serializations() > before {
            self.client_cpu_ns += self.costs.serialization(bytes);
        }
        let client = &mut self.clients[c as usize];
        client.byte_tokens -= bytes as f64;
        let g = client.group as usize;
        let Some(conn) = &mut client.conn else { return };
        let violation = match &item {
            WatchItem::Event { event_type, event } => {
                let rv = event.revision();
                client.last_rv = Some(rv);
                self.events_taken += 1;
                self.groups[g].stats.events += 1;
                // Latency: from commit to taken, no earlier than the end of the core call that
                // made the item visible.
                let i = (rv - self.store.list_revision - 1) as usize;
                let mut stamp = now.max(self.dispatch_end[i]);
                if now < self.pass_end && self.pass_served.binary_search(&conn.id).is_ok() {
                    stamp = stamp.max(self.pass_end);
                }
                let latency = stamp.saturating_sub(self.store.commit_time(rv));
                if now >= self.warmup_ns {
                    self.groups[g].latency.record(latency);
                    client.latency_count += 1;
                    client.latency_sum += u128::from(latency);
                    client.latency_max = client.latency_max.max(latency);
                    if let Some(h) = &mut client.latency {
                        h.record(latency);
                    }
                }
                self.hash.record(&[3, now, u64::from(c), rv]);
                match self.store.slot_of_key(event.key()) {
                    Some(slot) => conn.check.event(&self.store, rv, slot, *event_type),
                    None => Some(Violation {
                        guarantee: watchkeeper_core::Guarantee::Unique,
                        message: format!("unknown key {}", event.key()),
                    }),
                }
            }
            WatchItem::Initial(object) => {
                self.relist_objects += 1;
                self.groups[g].stats.relist_objects += 1;
                self.hash
                    .record(&[4, now, u64::from(c), object.resource_version()]);
                match self.store.slot_of_key(object.key()) {
                    Some(slot) => conn.check.initial_object(object.resource_version(), slot),
                    None => Some(Violation {
                        guarantee: watchkeeper_core::Guarantee::InitialState,
                        message: format!("unknown key {}", object.key()),
                    }),
                }
            }
            WatchItem::Bookmark {
                revision,
                initial_events_end,
            } => {
                if !conn.check.in_initial() || *initial_events_end {
                    client.last_rv = Some(*revision);
                }
                if *initial_events_end {
                    client.needs_relist = false;
                }
                self.hash.record(&[5, now, u64::from(c), *revision]);
                conn.check
                    .bookmark(&self.store, *revision, *initial_events_end)
            }
        };
        if let Some(v) = violation {
            self.violation(c, v, true);
        }
    }

    fn violation(&mut self, c: u32, v: Violation, safety: bool) {
        if safety {
            self.safety_violations += 1;
        } else {
            self.liveness_violations += 1;
        }
        if self.violations.len() < VIOLATIONS_KEPT_MAX {
            let client = &self.clients[c as usize];
            self.violations.push(ViolationRecord {
                time_s: self.seconds(),
                group: self.groups[client.group as usize].spec.name.clone(),
                watcher: c,
                connection: client.connections,
                guarantee: v.guarantee.to_string(),
                message: v.message,
                safety,
            });
        }
    }

    /// Watches the core's view of the watcher to time resyncs.
    fn observe_state(&mut self, c: u32) {
        let now = self.now;
        let client = &mut self.clients[c as usize];
        let Some(conn) = &client.conn else {
            self.unsynced_clients.remove(&c);
            return;
        };
        match conn.watch.state() {
            WatcherState::Unsynced | WatcherState::Initial if client.unsynced_since.is_none() => {
                client.unsynced_since = Some(now);
                self.unsynced_clients.insert(c);
            }
            WatcherState::Synced => {
                self.unsynced_clients.remove(&c);
                let Some(since) = client.unsynced_since.take() else {
                    return;
                };
                let resumed = client.resumed.take().filter(|(t, _, _)| *t >= since);
                let g = client.group as usize;
                let read_rate = client.read_rate;
                let (after_resume_s, backlog, selected_rate, fluid_bound_s) = match resumed {
                    Some((t, backlog, rv_at_resume)) => {
                        let after = (now - t) as f64 / NS;
                        let selected = conn.check.selected_between(
                            &self.store,
                            rv_at_resume + 1,
                            self.store.revision,
                        );
                        let rate = if after > 0.0 {
                            selected as f64 / after
                        } else {
                            0.0
                        };
                        let bound = if read_rate > 0.0 && read_rate > rate {
                            Some(backlog as f64 / (read_rate - rate))
                        } else if read_rate == 0.0 {
                            Some(0.0)
                        } else {
                            None
                        };
                        (Some(after), Some(backlog), Some(rate), bound)
                    }
                    None => (None, None, None, None),
                };
                if let Some(after) = after_resume_s {
                    self.groups[g].resync_after_resume.record(secs_to_ns(after));
                }
                self.groups[g].stats.resyncs += 1;
                if self.episodes.len() < EPISODES_KEPT_MAX {
                    self.episodes.push(Episode {
                        watcher: c,
                        group: self.groups[g].spec.name.clone(),
                        read_rate,
                        unsynced_s: (now - since) as f64 / NS,
                        after_resume_s,
                        backlog_events: backlog,
                        selected_write_rate: selected_rate,
                        fluid_bound_s,
                    });
                }
            }
            _ => {}
        }
    }

    fn ended(&mut self, c: u32, end: WatchEnd) {
        let reason = end.reason();
        let now = self.now;
        self.close(c);
        let client = &mut self.clients[c as usize];
        let g = client.group as usize;
        client.terminated = true;
        self.terminations_total += 1;
        *self.groups[g]
            .stats
            .terminations
            .entry(reason.as_str().to_owned())
            .or_default() += 1;
        self.hash.record(&[6, now, u64::from(c), reason as u64]);
        if self.terminations.len() < TERMINATIONS_KEPT_MAX {
            self.terminations.push(Termination {
                time_s: now as f64 / NS,
                group: self.groups[g].spec.name.clone(),
                watcher: c,
                connection: client.connections,
                reason: reason.as_str().to_owned(),
            });
        }
        let spec = &self.groups[g].spec;
        let jitter = 1.0 + spec.reconnect_jitter * client.rng.symmetric();
        let backoff = secs_to_ns(spec.reconnect_backoff_s * jitter);
        let (delay, relist) = match reason {
            TerminationReason::Deadline => (0, false),
            TerminationReason::ResourceExpired
            | TerminationReason::ResourceExpiredInitial
            | TerminationReason::MemoryPressure => {
                if !spec.relist_on_expired {
                    return;
                }
                (backoff, true)
            }
            TerminationReason::Shutdown => return,
            _ => (backoff, false),
        };
        if relist || (client.last_rv.is_none() && spec.start == Start::InitialState) {
            client.needs_relist = true;
            client.last_rv = None;
        }
        if !client.reconnect_pending {
            client.reconnect_pending = true;
            self.at(now + delay, Ev::Connect(c));
        }
    }

    fn sample(&mut self) {
        let metrics = self.cache.metrics();
        let mut queued = 0usize;
        let mut capacity = 0usize;
        let mut connected = 0usize;
        for client in &self.clients {
            if let Some(conn) = &client.conn {
                let q = conn.watch.queue();
                queued += q.len();
                capacity += q.capacity();
                connected += 1;
            }
        }
        let terminations: Vec<u64> = TerminationReason::ALL
            .iter()
            .map(|r| metrics.terminations(*r))
            .collect();
        self.samples.push(Sample {
            time_s: self.seconds(),
            unsynced: metrics.stalled_watchers.get(),
            synced: metrics.synced_watchers.get(),
            connected,
            queued_items: queued,
            queue_occupancy: if capacity > 0 {
                queued as f64 / capacity as f64
            } else {
                0.0
            },
            incoming: self.incoming.len(),
            terminations: terminations.iter().sum(),
            history_len: self.cache.history_info().len,
        });
    }

    // ---------------------------------------------------------------- the end

    fn finish(mut self, variant: &str) -> Outcome {
        // Liveness: every open, never-terminated connection whose client can read must hold
        // every selected event.
        let mut liveness = Vec::new();
        for (c, client) in self.clients.iter().enumerate() {
            let Some(conn) = &client.conn else { continue };
            if client.terminated || client.stalled_until == NEVER || conn.check.is_broken() {
                continue;
            }
            if conn.check.in_initial() || !conn.check.is_started() {
                liveness.push((
                    c as u32,
                    Violation {
                        guarantee: watchkeeper_core::Guarantee::Reliable,
                        message: "the initial state or start was never completed".to_owned(),
                    },
                ));
                continue;
            }
            let remaining = conn.check.remaining(&self.store);
            if remaining > 0 {
                liveness.push((
                    c as u32,
                    Violation {
                        guarantee: watchkeeper_core::Guarantee::Reliable,
                        message: format!(
                            "{remaining} selected events never arrived (state {:?})",
                            conn.watch.state()
                        ),
                    },
                ));
            }
        }
        for (c, v) in liveness {
            self.violation(c, v, false);
        }
        if let Some(since) = self.disp_blocked_since {
            self.disp_blocked_ns += self.now - since;
        }
        crate::report::build(self.into_parts(variant))
    }

    fn into_parts(self, variant: &str) -> crate::report::Parts {
        let metrics = self.cache.metrics();
        let mut groups = Vec::new();
        let mut per_watcher = Vec::new();
        let mut worst = Vec::new();
        for (g, rt) in self.groups.into_iter().enumerate() {
            let mut stats = rt.stats;
            stats.latency_ms = rt.latency.summary(1e6);
            stats.resync_after_resume_s = rt.resync_after_resume.summary(1e9);
            stats.latency_cdf_ms = rt.latency.cdf(1e6);
            let _ = rt.labels;
            let _ = rt.healthy;
            for (c, client) in self.clients.iter().enumerate() {
                if client.group as usize != g {
                    continue;
                }
                stats.connections += u64::from(client.connections);
                if let Some(h) = &client.latency {
                    per_watcher.push((c as u32, rt.spec.name.clone(), h.summary(1e6)));
                }
                if client.latency_count > 0 {
                    worst.push((client.latency_max, c as u32, rt.spec.name.clone()));
                }
            }
            groups.push((stats, rt.latency));
        }
        worst.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        worst.truncate(10);
        let events_dispatched = metrics.events_dispatched.get();
        crate::report::Parts {
            variant: variant.to_owned(),
            trace_hash: self.hash.value(),
            duration_s: self.scenario.duration_s,
            revisions: self.store.revision - self.store.list_revision,
            events_dispatched,
            events_taken: self.events_taken,
            serializations: metrics.encode.serializations(),
            relist_objects: self.relist_objects,
            terminations: self.terminations,
            terminations_total: self.terminations_total,
            groups,
            per_watcher,
            worst: worst
                .into_iter()
                .map(|(max, c, g)| (c, g, max as f64 / 1e6))
                .collect(),
            violations: self.violations,
            safety_violations: self.safety_violations,
            liveness_violations: self.liveness_violations,
            episodes: self.episodes,
            samples: self.samples,
            pass_stats: self.pass_stats,
            dispatcher_busy_s: self.disp_busy_ns / NS,
            dispatcher_blocked_s: self.disp_blocked_ns as f64 / NS,
            worker_busy_s: self.worker_busy_ns / NS,
            client_serialization_cpu_s: self.client_cpu_ns / NS,
            incoming_max: self.incoming_max,
            connections: self.connections_checked,
            client_reconnects: self.client_reconnects,
            watcher_stalls: metrics.watcher_stalls.get(),
            catchup_rounds: metrics.watcher_catchup_rounds.get(),
            deferred_events: metrics.watcher_deferred_events.get(),
            skipped_events: metrics.watcher_skipped_events.get(),
            live_pushes: metrics.live_pushes.get(),
            bookmarks_sent: metrics.bookmarks_sent.get(),
            history_capacity: metrics.history_capacity.get(),
            total_s: self.drain_ns as f64 / NS,
        }
    }
}

//! One priority level's seats and queues (kube's `fairqueuing/queueset`), shuffle sharding
//! (kube's `shufflesharding.Dealer`) and the level's seat demand (kube's `Integrator`).
//!
//! ## Guarantees
//! - A request takes the seats of its [`Work`] (the work estimator's: several for a large
//!   LIST, and a mutating request's `final_seats` while `additional_latency` runs on after it
//!   finished). At most `limit` seats of a limited level are taken at once, except by one
//!   request wider than the whole limit, which runs alone once nothing else does (kube's
//!   `canAccommodateSeatsLocked`). `limit` is the level's current limit, which borrowing
//!   moves between its lower and upper limit ([`Level::set_limit`]); a limit of 0 still
//!   runs one request when none runs (kube's dispatch would wait for the next adjustment).
//!   An exempt level grants every request at once (its seats are only counted).
//! - A `Reject` level grants a request at once when its seats fit, else refuses it
//!   (`concurrency-limit`). A queuing level puts every request at the back of one queue of
//!   its flow's hand (the hand's queue with the least estimated work waiting, visited from a
//!   rotating offset, as kube's `shuffleShardLocked`), or refuses it when that queue already
//!   holds `queueLengthLimit` and the level's seats are all taken (`queue-full`); then it
//!   dispatches as much as it can.
//! - Dispatch is kube's fair queuing by virtual time: the level's virtual clock `R` advances
//!   at `min(seats asked, limit) / active queues` seat-seconds per second; a queue's next
//!   dispatch `R` starts at the clock when the queue becomes active and grows by each
//!   dispatched request's work (`seats × 3 ms + final seats × additional latency`); the head
//!   of the queue with the smallest virtual finish (next dispatch `R` + the head's work) is
//!   dispatched, when its seats fit, else nothing is dispatched until seats free (a wide
//!   request is not overtaken, so it does not starve). Ties go round-robin. A flow with many
//!   requests thus takes its share, not the others'.
//! - A waiting request that is not granted by its wait limit is taken out of its queue and
//!   refused (`time-out`); one whose client went away (its future dropped) is taken out too
//!   (`cancelled`). A seat is never lost: a grant that finds its waiter gone is given back.
//! - Seat demand (seats taken plus seats waiting) is integrated over time; each borrowing
//!   period reads and resets it ([`Level::take_demand`]).
//! - Time is tokio's clock (paused in the unit tests, so fairness is tested without waiting).
//! - A request's final seats are given back by a timer task after its additional latency
//!   (one task per such request, for at most that latency: [`super::work`] bounds it).
//! - Memory: the waiting of a level are at most `queues × queueLengthLimit` (a
//!   reconfiguration re-deals those already waiting to the new queues, which may hold more
//!   for as long as they wait).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};

use tokio::sync::oneshot;
use tokio::time::Instant;

use axum::http::{Method, Uri};

use super::rules::FlowBy;

/// Why a request was refused (kube's `reason` label of
/// `apiserver_flowcontrol_rejected_requests_total`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// Its queue was full.
    QueueFull,
    /// A `Reject` level had no free seat.
    ConcurrencyLimit,
    /// It waited its whole wait limit.
    TimeOut,
    /// Its client went away while it waited.
    Cancelled,
}

impl Reason {
    /// Every reason, in the order of [`FlowCounts::rejected`].
    pub const ALL: [Reason; 4] = [
        Reason::QueueFull,
        Reason::ConcurrencyLimit,
        Reason::TimeOut,
        Reason::Cancelled,
    ];

    /// kube's label value.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::QueueFull => "queue-full",
            Reason::ConcurrencyLimit => "concurrency-limit",
            Reason::TimeOut => "time-out",
            Reason::Cancelled => "cancelled",
        }
    }
}

/// kube's `estimatedServiceDuration` (G): the virtual time a seat is charged at dispatch.
pub const ESTIMATED_SERVICE: Duration = Duration::from_millis(3);

/// The bounds of `apiserver_flowcontrol_request_wait_duration_seconds`, seconds (kube's
/// `requestDurationSecondsBuckets`).
pub const WAIT_BUCKETS: [f64; 13] = [
    0.0, 0.005, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 15.0, 30.0,
];

/// The bounds of `apiserver_flowcontrol_work_estimated_seats` (kube's).
pub const SEATS_BUCKETS: [f64; 4] = [1.0, 2.0, 4.0, 10.0];

/// A histogram over fixed bounds (kube's buckets for its metric): `N` counts, the last past
/// every bound, and the sum in millionths.
#[derive(Debug)]
pub struct Histogram<const N: usize> {
    counts: [AtomicU64; N],
    sum_millionths: AtomicU64,
}

impl<const N: usize> Default for Histogram<N> {
    fn default() -> Histogram<N> {
        Histogram {
            counts: std::array::from_fn(|_| AtomicU64::new(0)),
            sum_millionths: AtomicU64::new(0),
        }
    }
}

impl<const N: usize> Histogram<N> {
    /// Counts `value` in the first bucket of `bounds` (`N - 1` of them) it is not above.
    fn observe(&self, bounds: &[f64], value: f64) {
        let index = bounds
            .iter()
            .position(|&bound| value <= bound)
            .unwrap_or(bounds.len())
            .min(N - 1);
        self.counts[index].fetch_add(1, Ordering::Relaxed);
        // Saturating float-to-integer conversion; the values are durations and seats.
        let millionths = (value * 1e6).round() as u64;
        self.sum_millionths.fetch_add(millionths, Ordering::Relaxed);
    }

    /// The sum, the count and (bound, observations in that bucket alone) of the finite
    /// buckets of `bounds`.
    #[must_use]
    pub fn snapshot(&self, bounds: &[f64]) -> (f64, u64, Vec<(f64, u64)>) {
        let counts: Vec<u64> = self
            .counts
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
        let sum = self.sum_millionths.load(Ordering::Relaxed) as f64 / 1e6;
        let buckets = bounds.iter().copied().zip(counts.iter().copied());
        (sum, counts.iter().sum(), buckets.collect())
    }
}

/// Waits in a queue, seconds, over [`WAIT_BUCKETS`].
pub type WaitHistogram = Histogram<{ WAIT_BUCKETS.len() + 1 }>;

/// Estimated seats over [`SEATS_BUCKETS`].
pub type SeatsHistogram = Histogram<{ SEATS_BUCKETS.len() + 1 }>;

impl WaitHistogram {
    fn observe_wait(&self, wait: Duration) {
        self.observe(&WAIT_BUCKETS, wait.as_secs_f64());
    }
}

/// Requests of one (FlowSchema, priority level) pair, for `/metrics`.
#[derive(Debug, Default)]
pub struct FlowCounts {
    /// Waiting in a queue now.
    pub waiting: AtomicI64,
    /// Holding seats now.
    pub executing: AtomicI64,
    /// Seats asked by those waiting now.
    pub waiting_seats: AtomicI64,
    /// Seats held now (a mutating request's final seats included until they are released).
    pub executing_seats: AtomicI64,
    /// Granted seats so far.
    pub dispatched: AtomicU64,
    /// Refused so far, by [`Reason`].
    pub rejected: [AtomicU64; 4],
    /// Waits of a limited level's requests: refused (`execute="false"`) and granted (`"true"`).
    pub waits: [WaitHistogram; 2],
    /// The seats estimated for a limited level's requests.
    pub estimated_seats: SeatsHistogram,
    /// Times its request was the next to dispatch but its seats did not fit (kube's
    /// `request_dispatch_no_accommodation_total`).
    pub no_accommodation: AtomicU64,
}

impl FlowCounts {
    fn add(counter: &AtomicI64, delta: usize, sign: i64) {
        counter.fetch_add(
            sign * i64::try_from(delta).unwrap_or(i64::MAX),
            Ordering::Relaxed,
        );
    }

    /// Counts a refusal.
    pub fn reject(&self, reason: Reason) {
        self.rejected[reason as usize].fetch_add(1, Ordering::Relaxed);
    }
}

/// The work of a request, as kube's work estimator gives it (`WorkEstimate`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Work {
    /// Seats held while it executes.
    pub seats: usize,
    /// Seats held after it finished, for `additional_latency` (watch fan-out).
    pub final_seats: usize,
    /// How long `final_seats` are held after it finished.
    pub additional_latency: Duration,
}

impl Work {
    /// One seat, nothing after.
    pub const ONE: Work = Work {
        seats: 1,
        final_seats: 0,
        additional_latency: Duration::ZERO,
    };

    /// The seats it holds (kube's `MaxSeats`).
    #[must_use]
    pub fn max_seats(&self) -> usize {
        self.seats.max(self.final_seats).max(1)
    }

    /// Its work in seat-seconds (kube's `totalWork`: initial plus final work).
    #[must_use]
    pub fn total(&self) -> f64 {
        self.seats as f64 * ESTIMATED_SERVICE.as_secs_f64()
            + self.final_seats as f64 * self.additional_latency.as_secs_f64()
    }
}

/// How a level queues: `limitResponse.queuing`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Queuing {
    /// `queues`.
    pub queues: usize,
    /// `handSize` (at most `queues`).
    pub hand_size: usize,
    /// `queueLengthLimit`.
    pub queue_length_limit: usize,
}

/// What a level grants: its configuration, as kube derives it from the object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LevelConfig {
    /// Every request at once (`type: Exempt`).
    pub exempt: bool,
    /// Seats by its shares (kube's nominal concurrency limit).
    pub nominal: usize,
    /// Nominal less what it lends (`lendablePercent`).
    pub lower: usize,
    /// Nominal plus what it may borrow (`borrowingLimitPercent`).
    pub upper: usize,
    /// The most seats the work estimator gives one of its requests (kube's
    /// `MaxSeatsTracker`; 0 when unset).
    pub max_seats: usize,
    /// Queues, or `None` to refuse at once (`limitResponse.type: Reject`).
    pub queuing: Option<Queuing>,
}

impl LevelConfig {
    /// A level of `limit` seats neither lending nor borrowing.
    #[must_use]
    pub fn fixed(limit: usize, queuing: Option<Queuing>) -> LevelConfig {
        LevelConfig {
            exempt: false,
            nominal: limit,
            lower: limit,
            upper: limit,
            max_seats: 0,
            queuing,
        }
    }
}

/// A time-weighted record of a value (kube's `fairqueuing.Integrator`).
#[derive(Clone, Copy, Debug)]
struct Integrator {
    since: Instant,
    last: Instant,
    value: f64,
    /// Integrals of the value and of its square over time, since `since`.
    integral: f64,
    integral_squares: f64,
    max: f64,
}

/// What an [`Integrator`] saw over a period (kube's `IntegratorResults`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DemandSample {
    /// The period's length, seconds.
    pub duration: f64,
    /// Its time-weighted average.
    pub average: f64,
    /// Its time-weighted standard deviation.
    pub deviation: f64,
    /// Its largest value.
    pub max: f64,
}

impl Integrator {
    fn new(now: Instant) -> Integrator {
        Integrator {
            since: now,
            last: now,
            value: 0.0,
            integral: 0.0,
            integral_squares: 0.0,
            max: 0.0,
        }
    }

    fn set(&mut self, now: Instant, value: f64) {
        self.update(now);
        self.value = value;
        self.max = self.max.max(value);
    }

    fn update(&mut self, now: Instant) {
        let dt = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = now;
        self.integral += self.value * dt;
        self.integral_squares += self.value * self.value * dt;
    }

    /// The period's results; a new period starts at the current value.
    fn reset(&mut self, now: Instant) -> DemandSample {
        self.update(now);
        let duration = now.saturating_duration_since(self.since).as_secs_f64();
        let (average, deviation) = if duration > 0.0 {
            let average = self.integral / duration;
            let variance = self.integral_squares / duration - average * average;
            (average, variance.max(0.0).sqrt())
        } else {
            (f64::NAN, f64::NAN)
        };
        let sample = DemandSample {
            duration,
            average,
            deviation,
            max: self.max,
        };
        let value = self.value;
        *self = Integrator {
            value,
            max: value,
            ..Integrator::new(now)
        };
        sample
    }
}

/// One priority level's live state.
#[derive(Debug)]
pub struct Level {
    inner: Mutex<Inner>,
    /// Its refusals, for their `Retry-After`.
    dropped: Mutex<super::retry_after::Dropped>,
    /// Its refusals since it was created, by [`Reason`] (the debug dumps' totals).
    refusals: [AtomicU64; 4],
}

#[derive(Debug)]
struct Queue {
    waiting: VecDeque<Waiter>,
    /// Seats asked by its waiting.
    waiting_seats: usize,
    /// Work (seat-seconds) of its waiting.
    waiting_work: f64,
    /// Its requests holding seats, and their seats.
    executing: usize,
    seats_in_use: usize,
    /// kube's `nextDispatchR`.
    next_dispatch: f64,
}

impl Queue {
    fn new() -> Queue {
        Queue {
            waiting: VecDeque::new(),
            waiting_seats: 0,
            waiting_work: 0.0,
            executing: 0,
            seats_in_use: 0,
            next_dispatch: 0.0,
        }
    }

    fn is_active(&self) -> bool {
        !self.waiting.is_empty() || self.executing > 0
    }
}

#[derive(Debug)]
struct Inner {
    config: LevelConfig,
    /// The current limit (kube's `currentCL`).
    limit: usize,
    executing: usize,
    seats_in_use: usize,
    waiting: usize,
    seats_waiting: usize,
    queues: Vec<Queue>,
    /// Bumped when the queues are dealt again (a seat's queue index is then stale).
    generation: u64,
    /// The queue the next dispatch looks at after (kube's `robinIndex`).
    robin: usize,
    /// Requests put in a queue so far (the offset of the next hand's visit).
    enqueues: usize,
    next_id: u64,
    /// The virtual clock (kube's `currentR`), seat-seconds per queue.
    virtual_now: f64,
    /// Requests granted since the level was created (kube's `totRequestsDispatched`).
    dispatched: u64,
    /// Its requests holding seats, by id, for the debug dumps (as many as `executing`).
    running: HashMap<u64, Running>,
    last_sync: Instant,
    demand: Integrator,
}

#[derive(Debug)]
struct Waiter {
    id: u64,
    hash: u64,
    work: Work,
    arrival_virtual: f64,
    flow: Arc<FlowCounts>,
    described: Described,
    grant: oneshot::Sender<Seat>,
}

/// A request holding seats, as the debug dumps show it.
#[derive(Debug)]
struct Running {
    work: Work,
    /// Its queue (and the queues' generation then), `None` when granted without queuing.
    queue: Option<(u64, usize)>,
    started: SystemTime,
    described: Described,
}

/// A request's seats in its level, given back when dropped (which dispatches the waiting);
/// a mutating request's final seats are given back after its additional latency.
#[derive(Debug)]
pub struct Seat {
    level: Arc<Level>,
    flow: Arc<FlowCounts>,
    /// Its key in the level's running requests.
    id: u64,
    work: Work,
    /// Its queue (and the queues' generation then), `None` when granted without queuing.
    queue: Option<(u64, usize)>,
}

impl Drop for Seat {
    fn drop(&mut self) {
        FlowCounts::add(&self.flow.executing, 1, -1);
        let lingering = self.work.final_seats > 0 && !self.work.additional_latency.is_zero();
        let handle = tokio::runtime::Handle::try_current()
            .ok()
            .filter(|_| lingering);
        let mut failed = Vec::new();
        {
            let mut inner = self.level.lock();
            inner.sync_time(Instant::now());
            inner.executing -= 1;
            inner.running.remove(&self.id);
            if let Some(queue) = inner.queue_of(self.queue) {
                queue.executing -= 1;
            }
            if handle.is_none() {
                inner.release(self.work.max_seats(), self.queue, &self.flow);
            }
            inner.dispatch(&self.level, &mut failed);
        }
        drop(failed);
        if let Some(handle) = handle {
            let (level, flow, seats, queue) = (
                self.level.clone(),
                self.flow.clone(),
                self.work.max_seats(),
                self.queue,
            );
            let latency = self.work.additional_latency;
            handle.spawn(async move {
                tokio::time::sleep(latency).await;
                let mut failed = Vec::new();
                {
                    let mut inner = level.lock();
                    inner.sync_time(Instant::now());
                    inner.release(seats, queue, &flow);
                    inner.dispatch(&level, &mut failed);
                }
                drop(failed);
            });
        }
    }
}

/// Deals a hand of `hand_size` distinct queues of `deck_size` from `hash` (kube's
/// `shufflesharding.Dealer.Deal`: mixed-radix digits of the hash, each skipping the cards
/// dealt before), calling `pick` with each in dealing order.
pub fn deal(mut hash: u64, deck_size: usize, hand_size: usize, mut pick: impl FnMut(usize)) {
    let mut remainders = Vec::with_capacity(hand_size);
    for i in 0..hand_size.min(deck_size) {
        let radix = (deck_size - i) as u64;
        remainders.push((hash % radix) as usize);
        hash /= radix;
    }
    for i in 0..remainders.len() {
        let mut card = remainders[i];
        for j in (0..i).rev() {
            if card >= remainders[j] {
                card += 1;
            }
        }
        pick(card);
    }
}

/// A level's limits and seat use now, for `/metrics`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LevelState {
    /// Seats by its shares.
    pub nominal: usize,
    /// Its lower limit.
    pub lower: usize,
    /// Its upper limit.
    pub upper: usize,
    /// Its current limit.
    pub current: usize,
    /// Seats held now.
    pub seats_in_use: usize,
    /// Seats asked by the waiting now.
    pub seats_waiting: usize,
}

impl Level {
    /// A level with nobody in it, its current limit its nominal one.
    #[must_use]
    pub fn new(config: LevelConfig) -> Arc<Level> {
        let now = Instant::now();
        Arc::new(Level {
            inner: Mutex::new(Inner {
                config,
                limit: config.nominal,
                executing: 0,
                seats_in_use: 0,
                waiting: 0,
                seats_waiting: 0,
                queues: (0..config.queuing.map_or(0, |q| q.queues))
                    .map(|_| Queue::new())
                    .collect(),
                generation: 0,
                robin: 0,
                enqueues: 0,
                next_id: 0,
                virtual_now: 0.0,
                dispatched: 0,
                running: HashMap::new(),
                last_sync: now,
                demand: Integrator::new(now),
            }),
            dropped: Mutex::default(),
            refusals: Default::default(),
        })
    }

    /// Counts a refusal of one of its requests (in `flow` and in the level's totals).
    fn count_refusal(&self, flow: &FlowCounts, reason: Reason) {
        flow.reject(reason);
        self.refusals[reason as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// What kube's debug dumps show of the level now (kube's `queueSet.Dump`): its queues
    /// with their waiting and executing requests, the requests executing without a queue,
    /// and its totals since it was created.
    #[must_use]
    pub fn dump(&self) -> LevelDump {
        let refused = |reason: Reason| self.refusals[reason as usize].load(Ordering::Relaxed);
        let inner = self.lock();
        let mut queues: Vec<QueueDump> = inner
            .queues
            .iter()
            .map(|queue| QueueDump {
                waiting: queue
                    .waiting
                    .iter()
                    .map(|waiter| RequestDump {
                        described: waiter.described.clone(),
                        work: waiter.work,
                        started: None,
                    })
                    .collect(),
                executing_requests: Vec::new(),
                executing: queue.executing,
                seats_in_use: queue.seats_in_use,
                next_dispatch: queue.next_dispatch,
            })
            .collect();
        let mut queueless = Vec::new();
        let mut running: Vec<(&u64, &Running)> = inner.running.iter().collect();
        running.sort_by_key(|(id, _)| **id);
        for (_, request) in running {
            let dumped = RequestDump {
                described: request.described.clone(),
                work: request.work,
                started: Some(request.started),
            };
            match request.queue {
                Some((generation, index)) if generation == inner.generation => {
                    if let Some(queue) = queues.get_mut(index) {
                        queue.executing_requests.push(dumped);
                    }
                }
                _ => queueless.push(dumped),
            }
        }
        LevelDump {
            queues,
            queueless,
            waiting: inner.waiting,
            executing: inner.executing,
            dispatched: inner.dispatched,
            rejected: refused(Reason::QueueFull) + refused(Reason::ConcurrencyLimit),
            timed_out: refused(Reason::TimeOut),
            cancelled: refused(Reason::Cancelled),
        }
    }

    /// Counts a refusal in the Unix second `now`; the `Retry-After` to answer, seconds.
    pub fn refused(&self, now: i64) -> i64 {
        let mut dropped = self.dropped.lock().unwrap_or_else(PoisonError::into_inner);
        dropped.record(now);
        dropped.retry_after()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The level's configuration now.
    #[must_use]
    pub fn config(&self) -> LevelConfig {
        self.lock().config
    }

    /// Its limits and seat use now.
    #[must_use]
    pub fn state(&self) -> LevelState {
        let inner = self.lock();
        LevelState {
            nominal: inner.config.nominal,
            lower: inner.config.lower,
            upper: inner.config.upper,
            current: inner.limit,
            seats_in_use: inner.seats_in_use,
            seats_waiting: inner.seats_waiting,
        }
    }

    /// Requests holding seats now.
    #[must_use]
    pub fn executing(&self) -> usize {
        self.lock().executing
    }

    /// Requests waiting now.
    #[must_use]
    pub fn waiting(&self) -> usize {
        self.lock().waiting
    }

    /// Sets the current limit (borrowing) and dispatches what it lets through.
    pub fn set_limit(self: &Arc<Self>, limit: usize) {
        let mut failed = Vec::new();
        {
            let mut inner = self.lock();
            inner.sync_time(Instant::now());
            inner.limit = limit;
            inner.dispatch(self, &mut failed);
        }
        drop(failed);
    }

    /// The seat demand since the last call (kube's `seatDemandIntegrator.Reset`).
    pub fn take_demand(&self) -> DemandSample {
        self.lock().demand.reset(Instant::now())
    }

    /// Applies a new configuration: the waiting are dealt again to the new queues when their
    /// number changed, and granted the seats it frees.
    pub fn reconfigure(self: &Arc<Self>, config: LevelConfig) {
        let mut failed = Vec::new();
        {
            let mut inner = self.lock();
            inner.sync_time(Instant::now());
            inner.config = config;
            if let Some(queuing) = config.queuing
                && queuing.queues != inner.queues.len()
            {
                let waiting: Vec<Waiter> = inner
                    .queues
                    .iter_mut()
                    .flat_map(|queue| queue.waiting.drain(..))
                    .collect();
                inner.queues = (0..queuing.queues).map(|_| Queue::new()).collect();
                inner.generation += 1;
                inner.robin = 0;
                for waiter in waiting {
                    let index = inner.shuffle_shard(waiter.hash);
                    inner.place(index, waiter);
                }
            }
            inner.dispatch(self, &mut failed);
        }
        drop(failed);
    }

    /// Seats for a request of `work` of the flow `hash` (counted in `flow`), waiting at most
    /// until `wait_until` when the level queues.
    ///
    /// # Errors
    /// Why it was refused (counted in `flow`).
    pub async fn admit(
        self: &Arc<Self>,
        hash: u64,
        work: Work,
        flow: &Arc<FlowCounts>,
        wait_until: Instant,
        described: Described,
    ) -> Result<Seat, Reason> {
        let arrival = Instant::now();
        let refused = |reason| {
            self.count_refusal(flow, reason);
            flow.waits[0].observe_wait(Instant::now().saturating_duration_since(arrival));
            Err(reason)
        };
        let (mut granted, mut waiting) = {
            let mut inner = self.lock();
            inner.sync_time(arrival);
            let config = inner.config;
            if config.exempt {
                return Ok(inner.start(self, flow, work, None, described));
            }
            flow.estimated_seats
                .observe(&SEATS_BUCKETS, work.max_seats() as f64);
            let Some(queuing) = config.queuing else {
                if !inner.fits(work.max_seats()) {
                    return refused(Reason::ConcurrencyLimit);
                }
                flow.waits[1].observe_wait(Duration::ZERO);
                return Ok(inner.start(self, flow, work, None, described));
            };
            let index = inner.shuffle_shard(hash);
            inner.enqueues += 1;
            if inner.seats_in_use >= inner.limit
                && inner.queues[index].waiting.len() >= queuing.queue_length_limit
            {
                return refused(Reason::QueueFull);
            }
            let (grant, granted) = oneshot::channel();
            let id = inner.next_id;
            inner.next_id += 1;
            let waiter = Waiter {
                id,
                hash,
                work,
                arrival_virtual: inner.virtual_now,
                flow: flow.clone(),
                described,
                grant,
            };
            inner.push(index, waiter);
            let mut failed = Vec::new();
            inner.dispatch(self, &mut failed);
            drop(inner);
            drop(failed);
            (
                granted,
                Waiting {
                    level: self.clone(),
                    id,
                    flow: flow.clone(),
                    done: false,
                },
            )
        };
        let outcome = match tokio::time::timeout_at(wait_until, &mut granted).await {
            Ok(Ok(seat)) => Ok(seat),
            // Not granted in time: out of its queue, unless a grant came meanwhile.
            Err(_) if waiting.remove() => Err(Reason::TimeOut),
            Err(_) => granted.try_recv().map_err(|_| Reason::Cancelled),
            Ok(Err(_)) => Err(Reason::Cancelled),
        };
        waiting.done = true;
        let waited = Instant::now().saturating_duration_since(arrival);
        match outcome {
            Ok(seat) => {
                flow.waits[1].observe_wait(waited);
                Ok(seat)
            }
            Err(reason) => refused(reason),
        }
    }
}

/// A request in a queue; taken out when dropped before it was granted or refused (its client
/// went away).
struct Waiting {
    level: Arc<Level>,
    id: u64,
    flow: Arc<FlowCounts>,
    done: bool,
}

impl Waiting {
    /// Takes the request out of its queue; `false` when it is not there (it was granted).
    fn remove(&self) -> bool {
        let mut inner = self.level.lock();
        inner.sync_time(Instant::now());
        for index in 0..inner.queues.len() {
            let queue = &mut inner.queues[index];
            if let Some(at) = queue.waiting.iter().position(|w| w.id == self.id)
                && let Some(waiter) = queue.waiting.remove(at)
            {
                inner.unqueued(index, &waiter);
                inner.bound_next_dispatch(index);
                return true;
            }
        }
        false
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if !self.done && self.remove() {
            self.level.count_refusal(&self.flow, Reason::Cancelled);
        }
    }
}

impl Inner {
    /// Advances the virtual clock to `now` (kube's `syncTimeLocked`).
    fn sync_time(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.last_sync).as_secs_f64();
        self.last_sync = now;
        let (mut active, mut asked) = (0usize, 0usize);
        for queue in &self.queues {
            asked += queue.seats_in_use + queue.waiting_seats;
            if queue.is_active() {
                active += 1;
            }
        }
        if active > 0 {
            let ratio = asked.min(self.limit) as f64 / active as f64;
            self.virtual_now += ratio * elapsed;
        }
    }

    fn note_demand(&mut self) {
        let demand = (self.seats_in_use + self.seats_waiting) as f64;
        self.demand.set(self.last_sync, demand);
    }

    fn queue_of(&mut self, queue: Option<(u64, usize)>) -> Option<&mut Queue> {
        match queue {
            Some((generation, index)) if generation == self.generation => {
                self.queues.get_mut(index)
            }
            _ => None,
        }
    }

    /// Whether `seats` can be taken now (kube's `canAccommodateSeatsLocked`).
    fn fits(&self, seats: usize) -> bool {
        if self.config.exempt {
            true
        } else if seats > self.limit {
            self.executing == 0
        } else {
            self.seats_in_use + seats <= self.limit
        }
    }

    /// The queue of the flow `hash`: the one of its hand with the least work waiting,
    /// visited from an offset that turns with each request queued.
    fn shuffle_shard(&self, hash: u64) -> usize {
        let hand_size = self.config.queuing.map_or(1, |q| q.hand_size.max(1));
        let mut hand = Vec::with_capacity(hand_size);
        deal(hash, self.queues.len(), hand_size, |index| hand.push(index));
        let offset = self.enqueues % hand.len().max(1);
        let mut best: Option<(usize, f64)> = None;
        for i in 0..hand.len() {
            let index = hand[(offset + i) % hand.len()];
            let work = self.queues[index].waiting_work;
            if best.is_none_or(|(_, least)| work < least) {
                best = Some((index, work));
            }
        }
        best.map_or(0, |(index, _)| index)
    }

    /// Puts a new waiter at the back of the queue `index`, counted.
    fn push(&mut self, index: usize, waiter: Waiter) {
        let seats = waiter.work.max_seats();
        FlowCounts::add(&waiter.flow.waiting, 1, 1);
        FlowCounts::add(&waiter.flow.waiting_seats, seats, 1);
        self.waiting += 1;
        self.seats_waiting += seats;
        self.place(index, waiter);
        self.note_demand();
    }

    /// Puts `waiter` at the back of the queue `index` (a queue becoming active starts at the
    /// virtual clock: kube's `enqueueToBoundLocked`).
    fn place(&mut self, index: usize, waiter: Waiter) {
        let now = self.virtual_now;
        let queue = &mut self.queues[index];
        if !queue.is_active() {
            queue.next_dispatch = now;
        }
        queue.waiting_seats += waiter.work.max_seats();
        queue.waiting_work += waiter.work.total();
        queue.waiting.push_back(waiter);
    }

    /// Counts `waiter` out of the queue `index` (it was taken out of it).
    fn unqueued(&mut self, index: usize, waiter: &Waiter) {
        let seats = waiter.work.max_seats();
        FlowCounts::add(&waiter.flow.waiting, 1, -1);
        FlowCounts::add(&waiter.flow.waiting_seats, seats, -1);
        let queue = &mut self.queues[index];
        queue.waiting_seats -= seats;
        queue.waiting_work = (queue.waiting_work - waiter.work.total()).max(0.0);
        if queue.waiting.is_empty() {
            queue.waiting_work = 0.0;
        }
        self.waiting -= 1;
        self.seats_waiting -= seats;
        self.note_demand();
    }

    /// Dispatch in the virtual world does not precede arrival (kube's anti-windup
    /// `boundNextDispatchLocked`).
    fn bound_next_dispatch(&mut self, index: usize) {
        let queue = &mut self.queues[index];
        if let Some(head) = queue.waiting.front() {
            queue.next_dispatch = queue.next_dispatch.max(head.arrival_virtual);
        }
    }

    /// Seats for a request, counted.
    fn start(
        &mut self,
        level: &Arc<Level>,
        flow: &Arc<FlowCounts>,
        work: Work,
        queue: Option<usize>,
        described: Described,
    ) -> Seat {
        let seats = work.max_seats();
        self.executing += 1;
        self.dispatched += 1;
        self.seats_in_use += seats;
        let queue = queue.map(|index| {
            let q = &mut self.queues[index];
            q.executing += 1;
            q.seats_in_use += seats;
            q.next_dispatch += work.total();
            (self.generation, index)
        });
        self.note_demand();
        FlowCounts::add(&flow.executing, 1, 1);
        FlowCounts::add(&flow.executing_seats, seats, 1);
        flow.dispatched.fetch_add(1, Ordering::Relaxed);
        let id = self.next_id;
        self.next_id += 1;
        self.running.insert(
            id,
            Running {
                work,
                queue,
                started: SystemTime::now(),
                described,
            },
        );
        Seat {
            level: level.clone(),
            flow: flow.clone(),
            id,
            work,
            queue,
        }
    }

    /// Gives back `seats` of a finished request.
    fn release(&mut self, seats: usize, queue: Option<(u64, usize)>, flow: &FlowCounts) {
        self.seats_in_use -= seats;
        if let Some(queue) = self.queue_of(queue) {
            queue.seats_in_use -= seats;
        }
        FlowCounts::add(&flow.executing_seats, seats, -1);
        self.note_demand();
    }

    /// The queue whose head is dispatched next, if its seats fit now (kube's
    /// `findDispatchQueueToBoundLocked`).
    fn next_queue(&mut self) -> Option<usize> {
        let count = self.queues.len();
        let mut best: Option<(usize, f64)> = None;
        let mut robin = self.robin;
        for _ in 0..count {
            robin = (robin + 1) % count;
            let queue = &self.queues[robin];
            if let Some(head) = queue.waiting.front() {
                let finish = queue.next_dispatch + head.work.total();
                if best.is_none_or(|(_, least)| finish < least) {
                    best = Some((robin, finish));
                }
            }
        }
        self.robin = robin;
        let (index, _) = best?;
        let head = self.queues[index].waiting.front()?;
        if !self.fits(head.work.max_seats()) {
            head.flow.no_accommodation.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        self.robin = index;
        Some(index)
    }

    /// Grants seats to the waiting while they fit (kube's `dispatchAsMuchAsPossibleLocked`);
    /// grants whose waiter is gone are put in `failed` (to be dropped outside the lock).
    fn dispatch(&mut self, level: &Arc<Level>, failed: &mut Vec<Seat>) {
        // kube's loop stops at `seats in use < limit`; a level whose current limit is 0
        // still runs one request when nothing runs (as `fits` lets a wide one run alone).
        while self.waiting > 0 && (self.seats_in_use < self.limit || self.executing == 0) {
            let Some(index) = self.next_queue() else {
                return;
            };
            let Some(waiter) = self.queues[index].waiting.pop_front() else {
                return;
            };
            self.unqueued(index, &waiter);
            let seat = self.start(
                level,
                &waiter.flow,
                waiter.work,
                Some(index),
                waiter.described,
            );
            self.bound_next_dispatch(index);
            if let Err(seat) = waiter.grant.send(seat) {
                failed.push(seat);
            }
        }
    }
}
// What a level shows of itself to the debug dumps ([`super::dump`], which prints them).

/// What the dumps tell of a request, kept from its classification until it finished (moved
/// from its queue entry to its seat's record: no allocation of its own).
#[derive(Clone, Debug)]
pub struct Described {
    /// The FlowSchema that matched it.
    pub flow_schema: Arc<str>,
    /// What tells its flow apart.
    pub flow_by: FlowBy,
    /// The (impersonated) user's name.
    pub user: String,
    /// Its method.
    pub method: Method,
    /// Its URI.
    pub uri: Uri,
    /// When it arrived at its level.
    pub arrival: SystemTime,
}

impl Default for Described {
    fn default() -> Described {
        Described {
            flow_schema: Arc::from(""),
            flow_by: FlowBy::Nothing,
            user: String::new(),
            method: Method::GET,
            uri: Uri::from_static("/"),
            arrival: SystemTime::UNIX_EPOCH,
        }
    }
}

/// A request waiting or executing in a level (kube's `debug.RequestDump`).
#[derive(Debug)]
pub struct RequestDump {
    /// Who asked what.
    pub described: Described,
    /// Its work estimate.
    pub work: Work,
    /// When it was granted its seats (`None` while it waits).
    pub started: Option<SystemTime>,
}

/// One queue of a level (kube's `debug.QueueDump`).
#[derive(Debug)]
pub struct QueueDump {
    /// Its waiting requests, head first.
    pub waiting: Vec<RequestDump>,
    /// Its requests holding seats.
    pub executing_requests: Vec<RequestDump>,
    /// How many of its requests hold seats.
    pub executing: usize,
    /// The seats they hold.
    pub seats_in_use: usize,
    /// Its next dispatch's virtual time (kube's `nextDispatchR`), seat-seconds.
    pub next_dispatch: f64,
}

/// One level (kube's `debug.QueueSetDump`).
#[derive(Debug)]
pub struct LevelDump {
    /// Its queues (none for an exempt or a `Reject` level).
    pub queues: Vec<QueueDump>,
    /// Its requests holding seats granted without a queue.
    pub queueless: Vec<RequestDump>,
    /// Requests waiting now.
    pub waiting: usize,
    /// Requests holding seats now.
    pub executing: usize,
    /// Requests granted since it was created.
    pub dispatched: u64,
    /// Requests refused at once (queue full, concurrency limit) since it was created.
    pub rejected: u64,
    /// Requests refused at the end of their wait since it was created.
    pub timed_out: u64,
    /// Requests whose client went away while they waited, since it was created.
    pub cancelled: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn queuing(queues: usize, hand_size: usize, queue_length_limit: usize) -> LevelConfig {
        LevelConfig::fixed(
            1,
            Some(Queuing {
                queues,
                hand_size,
                queue_length_limit,
            }),
        )
    }

    fn far() -> tokio::time::Instant {
        tokio::time::Instant::now() + std::time::Duration::from_secs(3600)
    }

    #[test]
    fn a_hand_is_distinct_cards_of_the_deck() {
        for hash in [0, 1, 7, 12345, u64::MAX, 0xdead_beef_cafe] {
            let mut hand = Vec::new();
            deal(hash, 64, 6, |card| hand.push(card));
            assert_eq!(hand.len(), 6);
            assert!(hand.iter().all(|&card| card < 64), "{hand:?}");
            assert_eq!(hand.iter().collect::<BTreeSet<_>>().len(), 6, "{hand:?}");
        }
        // kube's dealer: the first card is the hash modulo the deck, the next ones skip the
        // cards dealt before.
        let mut hand = Vec::new();
        deal(3 + 10 * 3, 10, 2, |card| hand.push(card));
        assert_eq!(hand, [3, 4]);
        let mut hand = Vec::new();
        deal(5 + 10 * 2, 10, 2, |card| hand.push(card));
        assert_eq!(hand, [5, 2]);
    }

    #[test]
    fn hands_spread_over_the_deck() {
        let mut seen = BTreeSet::new();
        for flow in 0..200u64 {
            deal(flow.wrapping_mul(0x9e37_79b9_7f4a_7c15), 16, 2, |card| {
                seen.insert(card);
            });
        }
        assert_eq!(seen.len(), 16);
    }

    #[tokio::test]
    async fn a_reject_level_refuses_past_its_seats() {
        let level = Level::new(LevelConfig::fixed(2, None));
        let flow = Arc::new(FlowCounts::default());
        let first = level
            .admit(1, Work::ONE, &flow, far(), Described::default())
            .await
            .unwrap();
        let _second = level
            .admit(2, Work::ONE, &flow, far(), Described::default())
            .await
            .unwrap();
        assert_eq!(
            level
                .admit(3, Work::ONE, &flow, far(), Described::default())
                .await
                .unwrap_err(),
            Reason::ConcurrencyLimit
        );
        drop(first);
        assert!(
            level
                .admit(3, Work::ONE, &flow, far(), Described::default())
                .await
                .is_ok()
        );
        assert_eq!(
            flow.rejected[Reason::ConcurrencyLimit as usize].load(Ordering::Relaxed),
            1
        );
    }

    #[tokio::test(start_paused = true)]
    async fn waiting_requests_are_served_in_order_and_flows_take_turns() {
        let level = Level::new(queuing(8, 1, 10));
        let flow = Arc::new(FlowCounts::default());
        let held = level
            .admit(0, Work::ONE, &flow, far(), Described::default())
            .await
            .unwrap();
        // Flow `a` queues three, then flow `b` one; `a`'s and `b`'s queues differ.
        let (a, b) = (0u64, 1u64);
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for (name, hash) in [("a1", a), ("a2", a), ("a3", a), ("b1", b)] {
            let queued = level.clone();
            let flow = flow.clone();
            let order = order.clone();
            tasks.push(tokio::spawn(async move {
                let seat = queued
                    .admit(hash, Work::ONE, &flow, far(), Described::default())
                    .await
                    .unwrap();
                order.lock().unwrap().push(name);
                drop(seat);
            }));
            while level.waiting() < tasks.len() {
                tokio::task::yield_now().await;
            }
        }
        drop(held);
        for task in tasks {
            task.await.unwrap();
        }
        // `b1` does not wait for any of `a`: the seat held was `a`'s, so `a`'s queue is
        // further on in virtual time.
        assert_eq!(*order.lock().unwrap(), ["b1", "a1", "a2", "a3"]);
        assert_eq!(level.executing(), 0);
        assert_eq!(flow.waiting.load(Ordering::Relaxed), 0);
    }

    #[tokio::test]
    async fn full_queues_and_expired_waits_are_refused() {
        let level = Level::new(queuing(1, 1, 1));
        let flow = Arc::new(FlowCounts::default());
        let _held = level
            .admit(0, Work::ONE, &flow, far(), Described::default())
            .await
            .unwrap();
        let waiter = {
            let level = level.clone();
            let flow = flow.clone();
            tokio::spawn(async move {
                level
                    .admit(0, Work::ONE, &flow, far(), Described::default())
                    .await
                    .map(drop)
            })
        };
        while level.waiting() < 1 {
            tokio::task::yield_now().await;
        }
        assert_eq!(
            level
                .admit(0, Work::ONE, &flow, far(), Described::default())
                .await
                .unwrap_err(),
            Reason::QueueFull
        );
        // A wait limit already passed: out of the queue (the queue had room once the
        // waiter left).
        waiter.abort();
        let _ = waiter.await;
        assert_eq!(level.waiting(), 0);
        assert_eq!(
            flow.rejected[Reason::Cancelled as usize].load(Ordering::Relaxed),
            1
        );
        assert_eq!(
            level
                .admit(
                    0,
                    Work::ONE,
                    &flow,
                    tokio::time::Instant::now(),
                    Described::default()
                )
                .await
                .unwrap_err(),
            Reason::TimeOut
        );
        assert_eq!(level.waiting(), 0);
        assert_eq!(level.executing(), 1);
    }

    #[tokio::test]
    async fn a_larger_limit_grants_the_waiting() {
        let level = Level::new(queuing(4, 2, 10));
        let flow = Arc::new(FlowCounts::default());
        let _held = level
            .admit(0, Work::ONE, &flow, far(), Described::default())
            .await
            .unwrap();
        let waiter = {
            let level = level.clone();
            let flow = flow.clone();
            tokio::spawn(async move {
                level
                    .admit(9, Work::ONE, &flow, far(), Described::default())
                    .await
            })
        };
        while level.waiting() < 1 {
            tokio::task::yield_now().await;
        }
        level.reconfigure(queuing(16, 4, 10));
        assert_eq!(level.waiting(), 1);
        level.set_limit(2);
        let seat = waiter.await.unwrap().unwrap();
        assert_eq!(level.executing(), 2);
        drop(seat);
        assert_eq!(level.executing(), 1);
    }

    /// A request waiting in a level, counted alone: its seat once granted.
    struct Pending {
        name: &'static str,
        counts: Arc<FlowCounts>,
        task: Option<tokio::task::JoinHandle<Result<Seat, Reason>>>,
    }

    impl Pending {
        fn granted(&self) -> bool {
            self.counts.dispatched.load(Ordering::Relaxed) > 0
        }
    }

    /// Queues `requests` (name, flow hash, work) one after another.
    async fn queue_all(level: &Arc<Level>, requests: &[(&'static str, u64, Work)]) -> Vec<Pending> {
        let mut pending = Vec::new();
        for &(name, hash, work) in requests {
            let counts = Arc::new(FlowCounts::default());
            let task = {
                let (level, counts) = (level.clone(), counts.clone());
                tokio::spawn(async move {
                    level
                        .admit(hash, work, &counts, far(), Described::default())
                        .await
                })
            };
            let before = level.waiting();
            while level.waiting() == before {
                tokio::task::yield_now().await;
            }
            pending.push(Pending {
                name,
                counts,
                task: Some(task),
            });
        }
        pending
    }

    /// Serves `pending` on a one-seat level once `held` is given back, each granted request
    /// finishing at once; the names in the order they were granted.
    async fn serve_one_at_a_time(held: Seat, mut pending: Vec<Pending>) -> Vec<&'static str> {
        let mut order = Vec::new();
        drop(held);
        while order.len() < pending.len() {
            let next = pending
                .iter_mut()
                .find(|p| p.granted() && p.task.is_some())
                .expect("a request is granted whenever the seat is free");
            order.push(next.name);
            let seat = next.task.take().unwrap().await.unwrap().unwrap();
            drop(seat);
        }
        order
    }

    #[tokio::test(start_paused = true)]
    async fn a_flood_does_not_starve_a_flow_with_few_requests() {
        let level = Level::new(queuing(16, 1, 50));
        let flow = Arc::new(FlowCounts::default());
        let held = level
            .admit(99, Work::ONE, &flow, far(), Described::default())
            .await
            .unwrap();
        // Flow 0 queues ten, then flow 1 two (their queues differ: 0 and 1 of 16).
        let mut requests = Vec::new();
        for name in ["a1", "a2", "a3", "a4", "a5", "a6", "a7", "a8", "a9", "a10"] {
            requests.push((name, 0, Work::ONE));
        }
        requests.push(("b1", 1, Work::ONE));
        requests.push(("b2", 1, Work::ONE));
        let pending = queue_all(&level, &requests).await;
        let order = serve_one_at_a_time(held, pending).await;
        // Virtual finish times alternate the two queues while both wait: b's two are served
        // among the first four, not after a's ten (first come, first served).
        let last_b = order
            .iter()
            .rposition(|name| name.starts_with('b'))
            .unwrap();
        assert!(last_b < 4, "{order:?}");
        assert_eq!(order.len(), 12);
    }

    #[tokio::test(start_paused = true)]
    async fn a_wide_request_waits_for_its_seats_and_is_not_starved() {
        let level = Level::new(LevelConfig::fixed(
            2,
            Some(Queuing {
                queues: 16,
                hand_size: 1,
                queue_length_limit: 50,
            }),
        ));
        let flow = Arc::new(FlowCounts::default());
        let first = level
            .admit(99, Work::ONE, &flow, far(), Described::default())
            .await
            .unwrap();
        let second = level
            .admit(99, Work::ONE, &flow, far(), Described::default())
            .await
            .unwrap();
        let wide = Work {
            seats: 2,
            ..Work::ONE
        };
        let mut requests = vec![("wide", 2, wide)];
        for name in ["n1", "n2", "n3", "n4", "n5", "n6"] {
            requests.push((name, 1, Work::ONE));
        }
        let mut pending = queue_all(&level, &requests).await;
        assert_eq!(level.state().seats_waiting, 8);
        // Seats free one at a time; narrow requests run in them until the wide one is the
        // next by virtual finish; then nothing runs until it has both seats.
        drop(first);
        drop(second);
        let mut narrow_before = 0;
        while !pending[0].granted() {
            assert!(level.state().seats_in_use <= 2);
            let next = pending[1..]
                .iter_mut()
                .find(|p| p.granted() && p.task.is_some())
                .expect("a narrow request holds a seat while the wide one waits");
            narrow_before += 1;
            drop(next.task.take().unwrap().await.unwrap().unwrap());
        }
        assert!(
            narrow_before <= 3,
            "{narrow_before} narrow requests went first"
        );
        // It was the next to dispatch at least once while its seats did not fit.
        assert!(pending[0].counts.no_accommodation.load(Ordering::Relaxed) >= 1);
        let (_, count, buckets) = pending[0].counts.estimated_seats.snapshot(&SEATS_BUCKETS);
        assert_eq!((count, buckets[1]), (1, (2.0, 1)));
        assert_eq!(level.state().seats_in_use, 2);
        assert_eq!(level.executing(), 1);
        let seat = pending[0].task.take().unwrap().await.unwrap().unwrap();
        drop(seat);
        assert!(pending[1..].iter().any(|p| !p.granted()) || narrow_before == 6);
    }

    #[tokio::test(start_paused = true)]
    async fn seat_demand_is_integrated_over_time() {
        let level = Level::new(LevelConfig::fixed(4, None));
        let flow = Arc::new(FlowCounts::default());
        let _ = level.take_demand();
        let wide = Work {
            seats: 2,
            ..Work::ONE
        };
        let seat = level
            .admit(1, wide, &flow, far(), Described::default())
            .await
            .unwrap();
        tokio::time::advance(std::time::Duration::from_secs(1)).await;
        drop(seat);
        tokio::time::advance(std::time::Duration::from_secs(1)).await;
        let sample = level.take_demand();
        assert!((sample.duration - 2.0).abs() < 1e-9, "{sample:?}");
        assert!((sample.average - 1.0).abs() < 1e-9, "{sample:?}");
        assert!((sample.deviation - 1.0).abs() < 1e-9, "{sample:?}");
        assert!((sample.max - 2.0).abs() < 1e-9, "{sample:?}");
        // A new period starts at the current demand.
        tokio::time::advance(std::time::Duration::from_secs(1)).await;
        let sample = level.take_demand();
        assert_eq!((sample.average, sample.max), (0.0, 0.0));
    }

    #[tokio::test(start_paused = true)]
    async fn final_seats_are_held_for_the_additional_latency() {
        let level = Level::new(LevelConfig::fixed(4, None));
        let flow = Arc::new(FlowCounts::default());
        let work = Work {
            seats: 1,
            final_seats: 3,
            additional_latency: std::time::Duration::from_millis(50),
        };
        let seat = level
            .admit(1, work, &flow, far(), Described::default())
            .await
            .unwrap();
        assert_eq!(level.state().seats_in_use, 3);
        drop(seat);
        assert_eq!(level.executing(), 0);
        assert_eq!(level.state().seats_in_use, 3);
        tokio::time::sleep(std::time::Duration::from_millis(60)).await;
        assert_eq!(level.state().seats_in_use, 0);
        assert_eq!(flow.executing_seats.load(Ordering::Relaxed), 0);
    }
}

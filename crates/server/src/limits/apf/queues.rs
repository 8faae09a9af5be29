//! One priority level's seats and queues (kube's `fairqueuing/queueset`), and shuffle sharding
//! (kube's `shufflesharding.Dealer`).
//!
//! ## Guarantees
//! - At most `limit` requests of a limited level hold a [`Seat`] at once; an exempt level
//!   grants every request at once (its seats are only counted).
//! - A request is granted a seat at once only when nobody of its level waits (no overtaking).
//!   Otherwise a `Reject` level refuses it (`concurrency-limit`); a queuing level puts it at
//!   the back of one queue of its flow's hand (the hand's queue with the fewest waiting,
//!   the first dealt on a tie, as kube's `shuffleShardLocked` with one seat per request),
//!   or refuses it when that queue already holds `queueLengthLimit` (`queue-full`).
//! - When a seat frees, the waiting are granted seats while seats are free, taking the head
//!   of the next non-empty queue in turn (round-robin across queues; kube orders by virtual
//!   finish time, which for requests of equal cost is the same interleaving of flows): a flow
//!   whose queue is long waits for itself, not for the others.
//! - A waiting request that is not granted by its wait limit is taken out of its queue and
//!   refused (`time-out`); one whose client went away (its future dropped) is taken out too
//!   (`cancelled`). A seat is never lost: a grant that finds its waiter gone is given back.
//! - Memory: the waiting of a level are at most `queues × queueLengthLimit` (a
//!   reconfiguration re-deals those already waiting to the new queues, which may hold more
//!   for as long as they wait).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::oneshot;

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

/// Requests of one (FlowSchema, priority level) pair, for `/metrics`.
#[derive(Debug, Default)]
pub struct FlowCounts {
    /// Waiting in a queue now.
    pub waiting: AtomicI64,
    /// Holding a seat now.
    pub executing: AtomicI64,
    /// Refused so far, by [`Reason`].
    pub rejected: [AtomicU64; 4],
}

impl FlowCounts {
    fn add(counter: &AtomicI64, delta: i64) {
        counter.fetch_add(delta, Ordering::Relaxed);
    }

    /// Counts a refusal.
    pub fn reject(&self, reason: Reason) {
        self.rejected[reason as usize].fetch_add(1, Ordering::Relaxed);
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

/// What a level grants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LevelConfig {
    /// Every request at once (`type: Exempt`).
    pub exempt: bool,
    /// Seats (its concurrency limit).
    pub limit: usize,
    /// Queues, or `None` to refuse at once (`limitResponse.type: Reject`).
    pub queuing: Option<Queuing>,
}

/// One priority level's live state.
#[derive(Debug)]
pub struct Level {
    inner: Mutex<Inner>,
    /// Its refusals, for their `Retry-After`.
    dropped: Mutex<super::retry_after::Dropped>,
}

#[derive(Debug)]
struct Inner {
    config: LevelConfig,
    executing: usize,
    queues: Vec<VecDeque<Waiter>>,
    waiting: usize,
    /// The queue the next dispatch looks at first.
    next: usize,
    next_id: u64,
}

#[derive(Debug)]
struct Waiter {
    id: u64,
    hash: u64,
    flow: Arc<FlowCounts>,
    grant: oneshot::Sender<Seat>,
}

/// A request's seat in its level, given back when dropped (which grants it to the next
/// waiting request).
#[derive(Debug)]
pub struct Seat {
    level: Arc<Level>,
    flow: Arc<FlowCounts>,
}

impl Drop for Seat {
    fn drop(&mut self) {
        FlowCounts::add(&self.flow.executing, -1);
        let mut failed = Vec::new();
        {
            let mut inner = self.level.lock();
            inner.executing -= 1;
            inner.dispatch(&self.level, &mut failed);
        }
        // Grants whose waiter was gone, given back outside the lock.
        drop(failed);
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

impl Level {
    /// A level with nobody in it.
    #[must_use]
    pub fn new(config: LevelConfig) -> Arc<Level> {
        Arc::new(Level {
            inner: Mutex::new(Inner {
                config,
                executing: 0,
                queues: (0..config.queuing.map_or(0, |q| q.queues))
                    .map(|_| VecDeque::new())
                    .collect(),
                waiting: 0,
                next: 0,
                next_id: 0,
            }),
            dropped: Mutex::default(),
        })
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

    /// Requests holding a seat now.
    #[must_use]
    pub fn executing(&self) -> usize {
        self.lock().executing
    }

    /// Requests waiting now.
    #[must_use]
    pub fn waiting(&self) -> usize {
        self.lock().waiting
    }

    /// Applies a new configuration: the waiting are dealt again to the new queues when their
    /// number changed, and granted the seats a larger limit frees.
    pub fn reconfigure(self: &Arc<Self>, config: LevelConfig) {
        let mut failed = Vec::new();
        {
            let mut inner = self.lock();
            inner.config = config;
            if let Some(queuing) = config.queuing
                && queuing.queues != inner.queues.len()
            {
                let waiting: Vec<Waiter> = inner.queues.drain(..).flatten().collect();
                inner.queues = (0..queuing.queues).map(|_| VecDeque::new()).collect();
                inner.next = 0;
                for waiter in waiting {
                    let index = inner.choose(waiter.hash);
                    inner.queues[index].push_back(waiter);
                }
            }
            inner.dispatch(self, &mut failed);
        }
        drop(failed);
    }

    /// A seat for a request of the flow `hash` (counted in `flow`), waiting at most until
    /// `wait_until` when the level queues.
    ///
    /// # Errors
    /// Why it was refused (counted in `flow`).
    pub async fn admit(
        self: &Arc<Self>,
        hash: u64,
        flow: &Arc<FlowCounts>,
        wait_until: tokio::time::Instant,
    ) -> Result<Seat, Reason> {
        let (mut granted, mut waiting) = {
            let mut inner = self.lock();
            let config = inner.config;
            if config.exempt || (inner.waiting == 0 && inner.executing < config.limit) {
                inner.executing += 1;
                FlowCounts::add(&flow.executing, 1);
                return Ok(Seat {
                    level: self.clone(),
                    flow: flow.clone(),
                });
            }
            let refused = |reason| {
                flow.reject(reason);
                Err(reason)
            };
            let Some(queuing) = config.queuing else {
                return refused(Reason::ConcurrencyLimit);
            };
            let index = inner.choose(hash);
            if inner.queues[index].len() >= queuing.queue_length_limit {
                return refused(Reason::QueueFull);
            }
            let (grant, granted) = oneshot::channel();
            let id = inner.next_id;
            inner.next_id += 1;
            inner.queues[index].push_back(Waiter {
                id,
                hash,
                flow: flow.clone(),
                grant,
            });
            inner.waiting += 1;
            FlowCounts::add(&flow.waiting, 1);
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
        if let Err(reason) = outcome {
            flow.reject(reason);
        }
        outcome
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
        for queue in &mut inner.queues {
            if let Some(at) = queue.iter().position(|w| w.id == self.id) {
                queue.remove(at);
                inner.waiting -= 1;
                FlowCounts::add(&self.flow.waiting, -1);
                return true;
            }
        }
        false
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if !self.done && self.remove() {
            self.flow.reject(Reason::Cancelled);
        }
    }
}

impl Inner {
    /// The queue of the flow `hash`: the one of its hand with the fewest waiting.
    fn choose(&self, hash: u64) -> usize {
        let hand_size = self.config.queuing.map_or(1, |q| q.hand_size.max(1));
        let mut best: Option<(usize, usize)> = None;
        deal(hash, self.queues.len(), hand_size, |index| {
            let length = self.queues[index].len();
            if best.is_none_or(|(_, shortest)| length < shortest) {
                best = Some((index, length));
            }
        });
        best.map_or(0, |(index, _)| index)
    }

    /// Grants seats to the waiting while seats are free, a queue at a time in turn; grants
    /// whose waiter is gone are put in `failed` (to be dropped outside the lock).
    fn dispatch(&mut self, level: &Arc<Level>, failed: &mut Vec<Seat>) {
        while self.waiting > 0 && (self.config.exempt || self.executing < self.config.limit) {
            let count = self.queues.len();
            let Some(index) = (0..count)
                .map(|k| (self.next + k) % count)
                .find(|&index| !self.queues[index].is_empty())
            else {
                return;
            };
            self.next = (index + 1) % count;
            let Some(waiter) = self.queues[index].pop_front() else {
                return;
            };
            self.waiting -= 1;
            FlowCounts::add(&waiter.flow.waiting, -1);
            self.executing += 1;
            FlowCounts::add(&waiter.flow.executing, 1);
            let seat = Seat {
                level: level.clone(),
                flow: waiter.flow,
            };
            if let Err(seat) = waiter.grant.send(seat) {
                failed.push(seat);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn queuing(queues: usize, hand_size: usize, queue_length_limit: usize) -> LevelConfig {
        LevelConfig {
            exempt: false,
            limit: 1,
            queuing: Some(Queuing {
                queues,
                hand_size,
                queue_length_limit,
            }),
        }
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
        let level = Level::new(LevelConfig {
            exempt: false,
            limit: 2,
            queuing: None,
        });
        let flow = Arc::new(FlowCounts::default());
        let first = level.admit(1, &flow, far()).await.unwrap();
        let _second = level.admit(2, &flow, far()).await.unwrap();
        assert_eq!(
            level.admit(3, &flow, far()).await.unwrap_err(),
            Reason::ConcurrencyLimit
        );
        drop(first);
        assert!(level.admit(3, &flow, far()).await.is_ok());
        assert_eq!(
            flow.rejected[Reason::ConcurrencyLimit as usize].load(Ordering::Relaxed),
            1
        );
    }

    #[tokio::test]
    async fn waiting_requests_are_served_in_order_and_flows_take_turns() {
        let level = Level::new(queuing(8, 1, 10));
        let flow = Arc::new(FlowCounts::default());
        let held = level.admit(0, &flow, far()).await.unwrap();
        // Flow `a` queues three, then flow `b` one; `a`'s and `b`'s queues differ.
        let (a, b) = (0u64, 1u64);
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for (name, hash) in [("a1", a), ("a2", a), ("a3", a), ("b1", b)] {
            let queued = level.clone();
            let flow = flow.clone();
            let order = order.clone();
            tasks.push(tokio::spawn(async move {
                let seat = queued.admit(hash, &flow, far()).await.unwrap();
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
        // `b1` does not wait for all of `a`.
        assert_eq!(*order.lock().unwrap(), ["a1", "b1", "a2", "a3"]);
        assert_eq!(level.executing(), 0);
        assert_eq!(flow.waiting.load(Ordering::Relaxed), 0);
    }

    #[tokio::test]
    async fn full_queues_and_expired_waits_are_refused() {
        let level = Level::new(queuing(1, 1, 1));
        let flow = Arc::new(FlowCounts::default());
        let _held = level.admit(0, &flow, far()).await.unwrap();
        let waiter = {
            let level = level.clone();
            let flow = flow.clone();
            tokio::spawn(async move { level.admit(0, &flow, far()).await.map(drop) })
        };
        while level.waiting() < 1 {
            tokio::task::yield_now().await;
        }
        assert_eq!(
            level.admit(0, &flow, far()).await.unwrap_err(),
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
                .admit(0, &flow, tokio::time::Instant::now())
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
        let _held = level.admit(0, &flow, far()).await.unwrap();
        let waiter = {
            let level = level.clone();
            let flow = flow.clone();
            tokio::spawn(async move { level.admit(9, &flow, far()).await })
        };
        while level.waiting() < 1 {
            tokio::task::yield_now().await;
        }
        level.reconfigure(LevelConfig {
            limit: 2,
            ..queuing(16, 4, 10)
        });
        let seat = waiter.await.unwrap().unwrap();
        assert_eq!(level.executing(), 2);
        drop(seat);
        assert_eq!(level.executing(), 1);
    }
}

//! Wakes watch responses in bulk from inside the runtime.
//!
//! A watch response's task parks on its core queue and is woken by the cache's dispatcher
//! thread (live events) or catch-up thread (a pass). Those threads are not the runtime's: a
//! task woken from outside goes to the runtime's shared injection queue (a lock per wake) and an
//! idle worker is unparked with a `futex` call, once per woken task — for one write and 1,000
//! watchers, 1,000 foreign wake-ups, each of which can start a worker that then finds a task
//! holding a single event.
//!
//! The driver runs each dispatch step and each catch-up pass inside [`batched`]: the step's
//! wake-ups of watch responses (whose tasks registered a [`RelayWaker`]) are held to its end;
//! then, when there are more than [`RELAY_MIN`], they are handed to the relay task in one
//! append and one notification, and the relay task wakes them from a worker, onto that
//! worker's own run queue (no lock, no unpark per task) — what a fan-out done on a runtime
//! thread gets for free; fewer are woken directly. No worker is woken while the dispatcher is
//! still pushing the rest of the fan-out.
//!
//! Readers waiting for the cache to be fresh ([`after_watchers`]: a writer waiting for its own
//! revision before it answers, a consistent read) are held by the same step and woken after
//! its watch responses: a step's `finish_revision` releases the writer, and without this its
//! answer would take the worker before the watchers of the revision it wrote. Measured
//! (BENCHMARKS.md, invocation AK): holding or relaying the watch responses' wake-ups alone cut
//! the CPU per delivered event at 10,000 watchers by a quarter or more, but added 100-280 µs to
//! the median latency of a lone healthy watcher next to 100 catching-up companions — the
//! writer's answer went first.
//!
//! A step that hands its watch responses to the relay puts its readers on the relay's
//! *express list* instead; so does a step that wakes its watch responses directly (or none)
//! while the runtime's injection queue holds more than [`RELAY_MIN`] tasks (the relay its
//! thread last woke through; a thread that never did wakes them directly). The first runtime
//! thread to look wakes them: every watch response, when it is polled, and the relay task,
//! before the watch responses it takes (a direct step notifies the relay, whose run is then
//! the fallback). Woken from the dispatcher's thread, a reader goes to the tail of the
//! injection queue — behind the watch responses woken from outside and those that overflowed
//! the workers' local queues into it: a round of the runtime's queue per wait (BENCHMARKS.md,
//! invocation AP: a PATCH waited 97 ms at the median for its own revision at 10,000 watchers;
//! 3.6 ms from the end of its revision's step at 1,000 watchers × 1,000 writes/s, 1.2 ms with
//! the express list; a PATCH's p99 at 10,000 watchers × 100 writes/s 585-909 ms, 38-150 ms
//! once direct steps use it behind a long queue too). Behind the relayed watch responses on
//! the relay's list it waited for every one of them to run (invocation AO). With a short
//! injection queue a direct step keeps AK's order: always using the express list there cost a
//! lone healthy watcher 85-170 µs at the median (AP5: the relay's extra wake-up).
//!
//! ## Guarantees
//! - No wake-up is lost or delayed past the end of the step that made it: a batch is flushed
//!   when its step ends (also by unwinding); a waker appended to the relay's list after the
//!   relay took the list either notifies it (the list was empty) or is taken with the list it
//!   joined; `Notify` keeps a permit when the relay is not waiting.
//! - Within a step that wakes watch responses directly, they are woken before its readers (or
//!   before its readers go on the express list), in the order they were woken. A relayed step
//!   puts its readers on the express list before it hands over its watch responses. Readers on
//!   the express list are woken no later than by the relay task's next run (which the step
//!   guarantees: it notified the relay, or joined a list the relay has yet to take), before
//!   the watch responses that run takes.
//! - A wake-up outside a batch (a runtime thread, any other thread) wakes the task directly,
//!   as before the relay existed.
//! - A [`RelayWaker`] is marked woken before its wake-up is passed on or collected
//!   ([`RelayWaker::take_woken`]), so a consumer polled for any reason can tell whether its
//!   waker fired since it last looked: a watch response parked on an empty queue answers the
//!   polls that its own wake-ups did not cause (hyper's poll after each flush, socket
//!   readiness) without taking the queue's locks.
//! - When the relay stops (its [`WakeRelay`] dropped, or its runtime shut down), every waker
//!   on its express list and then on its list is woken, in their order, and later wake-ups go
//!   directly to their tasks.
//!
//! ## Overload
//! A batch holds at most one waker per parked watch response (a queue hands its waker out once
//! per park), so it and the relay's list are bounded by the open watches. Under CPU pressure
//! the relay's own scheduling delay lets more events accumulate per woken response, which is
//! what makes a busy server's socket writes larger.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Wake, Waker};

/// A step that wakes more watch responses than this hands them to the relay task; fewer are
/// woken directly (see the module docs).
pub const RELAY_MIN: usize = 128;

thread_local! {
    /// The wake-ups collected by this thread's current [`batched`] step, if one runs.
    static BATCH: RefCell<Option<Batch>> = const { RefCell::new(None) };
    /// The relay of this thread's last step that woke a watch response through one (a driver
    /// thread serves one server's cache): the express list of its direct steps.
    static LAST_RELAY: RefCell<Option<Arc<Shared>>> = const { RefCell::new(None) };
    /// The watch responses' list of this thread's last step that woke them directly, emptied,
    /// for the next step (at most [`RELAY_MIN`] wakers' room: ~2 KiB per thread): a step of
    /// 100 watch responses had grown a new one six times (4 KB allocated per write,
    /// BENCHMARKS.md invocation BT).
    static SPARE: RefCell<Vec<Waker>> = const { RefCell::new(Vec::new()) };
}

/// One step's wake-ups, held to its end: watch responses' and, released after them, readers'
/// waiting for the cache to be fresh ([`after_watchers`]).
#[derive(Default)]
struct Batch {
    /// The relay of the step's watch responses (one server's: a driver thread serves one).
    relay: Option<Arc<Shared>>,
    watchers: Vec<Waker>,
    readers: Vec<Waker>,
}

/// Runs `step` with this thread's wake-ups of watch responses and fresh-waiting readers held,
/// then wakes them (see the module docs). A nested call runs inside the outer batch.
pub fn batched<R>(step: impl FnOnce() -> R) -> R {
    struct Flush;
    impl Drop for Flush {
        fn drop(&mut self) {
            if let Some(batch) = BATCH.with(|b| b.borrow_mut().take()) {
                flush(batch);
            }
        }
    }
    let outermost = BATCH.with(|b| {
        let mut b = b.borrow_mut();
        if b.is_some() {
            false
        } else {
            *b = Some(Batch {
                watchers: SPARE.with(RefCell::take),
                ..Batch::default()
            });
            true
        }
    });
    if !outermost {
        return step();
    }
    let _flush = Flush;
    step()
}

/// Wakes a step's held wake-ups: the watch responses first, then the readers, so that a
/// writer's answer (a reader of its own revision) does not take the worker before the watchers
/// of that revision; when the watch responses go to the relay, or the runtime's injection
/// queue is long, the readers go on the relay's express list (see the module docs).
fn flush(batch: Batch) {
    let Batch {
        relay,
        mut watchers,
        readers,
    } = batch;
    let relay = match relay {
        Some(shared) => {
            LAST_RELAY.with(|last| *last.borrow_mut() = Some(shared.clone()));
            Some(shared)
        }
        None => LAST_RELAY.with(|last| last.borrow().clone()),
    };
    let Some(shared) = relay.filter(|shared| !shared.stopped.load(Ordering::SeqCst)) else {
        for waker in watchers.into_iter().chain(readers) {
            waker.wake();
        }
        return;
    };
    if watchers.len() <= RELAY_MIN {
        for waker in watchers.drain(..) {
            waker.wake();
        }
        if watchers.capacity() <= RELAY_MIN {
            SPARE.with(|spare| *spare.borrow_mut() = watchers);
        }
        if readers.is_empty() {
            return;
        }
        // Woken from here, a reader waits behind every task in the injection queue: when it
        // holds more than a relayed step would hand over, the express list instead.
        if shared.runtime.global_queue_depth() <= RELAY_MIN {
            for waker in readers {
                waker.wake();
            }
            return;
        }
        shared.push_express(readers);
        // The relay's run is the readers' wake-up if no watch response looks first.
        shared.notify.notify_one();
    } else {
        // Before the watch responses: the relay wakes the express list after taking its
        // list, so it cannot take these watch responses without these readers.
        shared.push_express(readers);
        shared.relayed.fetch_add(1, Ordering::Relaxed);
        let first = {
            let mut pending = shared.lock();
            let was_empty = pending.is_empty();
            pending.extend(watchers);
            was_empty
        };
        if first {
            shared.notify.notify_one();
        }
    }
    // Stopped while this was appended: the stop may have taken the lists before the push.
    if shared.stopped.load(Ordering::SeqCst) {
        shared.stop();
    }
}

/// Waits for `wait` (a cache's `wait_fresh`) with its wake-up released after the watch
/// responses' of the same dispatcher step, or put on the relay's express list (see `flush`
/// and the module docs).
pub async fn after_watchers<F: std::future::Future>(wait: F) -> F::Output {
    let mut wait = std::pin::pin!(wait);
    // Made again only when the task's own waker changes.
    let mut reader: Option<Arc<Reader>> = None;
    std::future::poll_fn(|cx| {
        let current = match reader.take() {
            Some(reader) if reader.task.will_wake(cx.waker()) => reader,
            _ => Arc::new(Reader {
                task: cx.waker().clone(),
            }),
        };
        let waker = Waker::from(current.clone());
        reader = Some(current);
        wait.as_mut()
            .poll(&mut std::task::Context::from_waker(&waker))
    })
    .await
}

/// A fresh-waiting reader's waker: held by a running [`batched`] step, direct otherwise.
struct Reader {
    task: Waker,
}

impl Wake for Reader {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let held = BATCH.with(|b| match b.borrow_mut().as_mut() {
            Some(batch) => {
                batch.readers.push(self.task.clone());
                true
            }
            None => false,
        });
        if !held {
            self.task.wake_by_ref();
        }
    }
}

struct Shared {
    /// The relay's runtime's figures (the depth of its injection queue).
    runtime: tokio::runtime::RuntimeMetrics,
    /// Watch responses to wake.
    pending: Mutex<Vec<Waker>>,
    /// Readers released by relayed steps, and by direct steps behind a long injection queue,
    /// woken by the first runtime thread to look.
    express: Mutex<Vec<Waker>>,
    /// Set (after the push) while `express` may hold readers: one load for the lookers.
    express_pending: AtomicBool,
    notify: tokio::sync::Notify,
    stopped: AtomicBool,
    /// Batches handed to the relay task so far.
    relayed: std::sync::atomic::AtomicU64,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Waker>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn express_lock(&self) -> std::sync::MutexGuard<'_, Vec<Waker>> {
        self.express.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Puts `readers` on the express list (see the module docs).
    fn push_express(&self, readers: Vec<Waker>) {
        if !readers.is_empty() {
            self.express_lock().extend(readers);
            self.express_pending.store(true, Ordering::Release);
        }
    }

    /// Wakes the readers on the express list. A push after the flag is cleared sets it again,
    /// so a reader is either taken here or seen by the next look.
    fn wake_express(&self) {
        if self.express_pending.load(Ordering::Relaxed)
            && self.express_pending.swap(false, Ordering::AcqRel)
        {
            let readers = std::mem::take(&mut *self.express_lock());
            for reader in readers {
                reader.wake();
            }
        }
    }

    /// Stops relaying: later wake-ups go directly to their tasks, queued ones are woken now.
    fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        let readers = std::mem::take(&mut *self.express_lock());
        for reader in readers {
            reader.wake();
        }
        let pending = std::mem::take(&mut *self.lock());
        for waker in pending {
            waker.wake();
        }
    }
}

/// The relay of one server (see the module docs). Dropping it stops the relay task.
pub struct WakeRelay {
    shared: Arc<Shared>,
}

impl WakeRelay {
    /// Starts the relay task on the current runtime.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    #[must_use]
    pub fn start() -> WakeRelay {
        let shared = Arc::new(Shared {
            runtime: tokio::runtime::Handle::current().metrics(),
            pending: Mutex::new(Vec::new()),
            express: Mutex::new(Vec::new()),
            express_pending: AtomicBool::new(false),
            notify: tokio::sync::Notify::new(),
            stopped: AtomicBool::new(false),
            relayed: std::sync::atomic::AtomicU64::new(0),
        });
        tokio::spawn(run(shared.clone()));
        WakeRelay { shared }
    }

    /// Batches handed to the relay task so far (the others were woken directly).
    #[must_use]
    pub fn batches_relayed(&self) -> u64 {
        self.shared.relayed.load(Ordering::Relaxed)
    }

    /// Wakes the readers on the express list, if any: called by watch responses when they are
    /// polled (one atomic load when there are none; see the module docs).
    pub fn wake_express(&self) {
        self.shared.wake_express();
    }

    /// A waker that wakes `task` through the relay.
    #[must_use]
    pub fn waker(&self, task: &Waker) -> RelayWaker {
        let forward = Arc::new(Forward {
            shared: self.shared.clone(),
            task: task.clone(),
            woken: AtomicBool::new(false),
        });
        RelayWaker {
            waker: Waker::from(forward.clone()),
            forward,
        }
    }
}

impl std::fmt::Debug for WakeRelay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WakeRelay")
            .field("pending", &self.shared.lock().len())
            .finish()
    }
}

impl Drop for WakeRelay {
    fn drop(&mut self) {
        self.shared.stop();
        // The relay task ends at its next poll.
        self.shared.notify.notify_one();
    }
}

/// A task's waker behind the relay; kept by the watch response and reused while the task's
/// own waker stays the same.
pub struct RelayWaker {
    forward: Arc<Forward>,
    waker: Waker,
}

impl RelayWaker {
    /// Whether this wakes the same task as `task`.
    #[must_use]
    pub fn wakes(&self, task: &Waker) -> bool {
        self.forward.task.will_wake(task)
    }

    /// The waker to register.
    #[must_use]
    pub fn waker(&self) -> &Waker {
        &self.waker
    }

    /// Whether [`RelayWaker::waker`] was woken since the last call, clearing the mark. The
    /// mark is set before the wake-up is passed on, so a poll that the wake-up causes sees it:
    /// a consumer that registered this waker and found nothing can tell, at its next poll,
    /// whether anything could have changed since (its task is also polled for other reasons:
    /// hyper polls a body again after each flush and on socket readiness).
    pub fn take_woken(&self) -> bool {
        self.forward.woken.swap(false, Ordering::SeqCst)
    }
}

struct Forward {
    shared: Arc<Shared>,
    task: Waker,
    /// Woken since [`RelayWaker::take_woken`] last looked.
    woken: AtomicBool,
}

impl Wake for Forward {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // Before the task can be polled for this wake-up (see `RelayWaker::take_woken`).
        self.woken.store(true, Ordering::SeqCst);
        let collected = !self.shared.stopped.load(Ordering::SeqCst)
            && BATCH.with(|b| match b.borrow_mut().as_mut() {
                // Another server's relay (tests run several in one process): directly.
                Some(batch)
                    if batch
                        .relay
                        .as_ref()
                        .is_none_or(|relay| Arc::ptr_eq(relay, &self.shared)) =>
                {
                    batch.relay.get_or_insert_with(|| self.shared.clone());
                    batch.watchers.push(self.task.clone());
                    true
                }
                _ => false,
            });
        if !collected {
            self.task.wake_by_ref();
        }
    }
}

async fn run(shared: Arc<Shared>) {
    struct StopOnDrop(Arc<Shared>);
    impl Drop for StopOnDrop {
        fn drop(&mut self) {
            self.0.stop();
        }
    }
    let guard = StopOnDrop(shared);
    let mut batch = Vec::new();
    loop {
        guard.0.notify.notified().await;
        if guard.0.stopped.load(Ordering::SeqCst) {
            return;
        }
        std::mem::swap(&mut *guard.0.lock(), &mut batch);
        guard.0.wake_express();
        for waker in batch.drain(..) {
            waker.wake();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn counts(n: usize) -> Vec<Arc<Count>> {
        (0..n)
            .map(|_| Arc::new(Count(AtomicUsize::new(0))))
            .collect()
    }

    fn seen(counts: &[Arc<Count>]) -> Vec<usize> {
        counts.iter().map(|c| c.0.load(Ordering::SeqCst)).collect()
    }

    /// Turns a test on a two-worker runtime gives the relay task before it counts a wake-up
    /// as lost (a lost one never arrives). The relay may run on the other worker, whose thread
    /// can be off its core for a while when the whole suite runs on two cores: 100,000 turns
    /// once passed without the relay running at all (no failure in 200 runs of the test
    /// alone nor in 15 of the crate's unit tests).
    const TURNS: usize = 20_000_000;

    /// Gives the relay task turns until `counts` reach `expected` (a lost wake-up never
    /// arrives; the bound is in turns, not time: [`TURNS`]).
    async fn until_seen(counts: &[Arc<Count>], expected: &[usize]) {
        for _ in 0..TURNS {
            let now = seen(counts);
            assert!(now.iter().zip(expected).all(|(s, e)| s <= e), "{now:?}");
            if now == expected {
                return;
            }
            tokio::task::yield_now().await;
        }
        assert_eq!(
            seen(counts),
            expected,
            "every wake-up reaches its task once"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_relay_waker_tells_whether_it_was_woken_since_it_was_last_asked() {
        let relay = WakeRelay::start();
        let pair = counts(2);
        let task = Waker::from(pair[0].clone());
        let waker = relay.waker(&task);
        assert!(waker.wakes(&task));
        assert!(!waker.take_woken(), "a new waker was not woken");
        // Directly (outside a step), in a step woken directly, and relayed: each wake-up
        // marks it before the task can be polled for it, and the mark is read once.
        waker.waker().wake_by_ref();
        assert_eq!(seen(&pair), [1, 0], "woken directly");
        assert!(waker.take_woken());
        assert!(!waker.take_woken(), "the mark is cleared by reading it");
        let clone = waker.waker().clone();
        std::thread::spawn(move || batched(move || clone.wake()))
            .join()
            .expect("waking thread");
        assert!(waker.take_woken(), "woken by a step");
        until_seen(&pair, &[2, 0]).await;
        let others = relay_wakers(&relay, &counts(RELAY_MIN));
        let first = relay.waker(&Waker::from(pair[1].clone()));
        let relayed = first.waker().clone();
        std::thread::spawn(move || {
            batched(move || {
                relayed.wake_by_ref();
                for waker in &others {
                    waker.wake_by_ref();
                }
            });
        })
        .join()
        .expect("waking thread");
        assert!(
            first.take_woken(),
            "marked when collected, before the relay runs"
        );
        until_seen(&pair, &[2, 1]).await;
        assert!(!first.take_woken());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_large_batch_goes_through_the_relay_and_reaches_every_task_once_per_wake() {
        let relay = WakeRelay::start();
        let counts = counts(RELAY_MIN * 2);
        let wakers = relay_wakers(&relay, &counts);
        std::thread::spawn(move || {
            for round in 0..20 {
                batched(|| {
                    for (i, waker) in wakers.iter().enumerate() {
                        if (i + round) % 3 != 0 {
                            waker.wake_by_ref();
                        }
                    }
                    // Held to the end of the step.
                    assert!(
                        BATCH.with(|b| b.borrow().as_ref().is_some_and(|b| !b.watchers.is_empty()))
                    );
                });
            }
        })
        .join()
        .expect("waking thread");
        assert_eq!(
            relay.batches_relayed(),
            20,
            "a batch above RELAY_MIN goes to the relay"
        );
        let expected: Vec<usize> = (0..RELAY_MIN * 2)
            .map(|i| (0..20).filter(|round| (i + round) % 3 != 0).count())
            .collect();
        until_seen(&counts, &expected).await;
    }

    /// Records the order in which tasks are woken.
    struct Ordered {
        id: usize,
        log: Arc<Mutex<Vec<usize>>>,
    }
    impl Wake for Ordered {
        fn wake(self: Arc<Self>) {
            self.log.lock().expect("log").push(self.id);
        }
    }

    /// A log of wake-ups and a maker of tasks (wakers) that append their id to it.
    fn ordered_tasks() -> (
        Arc<Mutex<Vec<usize>>>,
        impl Fn(usize) -> Waker + Clone + Send + 'static,
    ) {
        let log = Arc::new(Mutex::new(Vec::new()));
        let task = {
            let log = log.clone();
            move |id| {
                Waker::from(Arc::new(Ordered {
                    id,
                    log: log.clone(),
                }))
            }
        };
        (log, task)
    }

    /// Woken directly, a step's reader comes after its watch responses; with them handed to
    /// the relay, it goes on the express list (woken by the first look), not behind them on
    /// the relay's list (which holds them in their order).
    #[test]
    fn a_reader_released_in_a_step_follows_its_direct_watch_responses_not_the_relayed_ones() {
        for watchers in [1, RELAY_MIN, RELAY_MIN + 1, 3 * RELAY_MIN] {
            let (_runtime, relay, _, _) = idle_relay(0);
            let (log, task) = ordered_tasks();
            let reader = task(usize::MAX);
            let wakers: Vec<Waker> = (0..watchers)
                .map(|id| relay.waker(&task(id)).waker().clone())
                .collect();
            relayed_step_with_a_reader(&relay, &wakers, &reader, watchers > RELAY_MIN);
            let mut expected: Vec<usize> = (0..watchers).collect();
            if watchers > RELAY_MIN {
                assert!(
                    log.lock().expect("log").is_empty(),
                    "relayed: the reader waits on the express list, not on the dispatcher's thread"
                );
                // A watch response's poll looks (here, this thread).
                relay.wake_express();
                assert_eq!(
                    *log.lock().expect("log"),
                    [usize::MAX],
                    "the first look wakes the reader, the watch responses are on the relay's list"
                );
                relay.wake_express();
                assert_eq!(log.lock().expect("log").len(), 1, "woken once");
                assert_eq!(relay.batches_relayed(), 1);
                // The list in its order (the relay's task never runs here): stopping the relay
                // wakes it.
                drop(relay);
                expected.insert(0, usize::MAX);
            } else {
                expected.push(usize::MAX);
            }
            assert_eq!(*log.lock().expect("log"), expected, "{watchers} watchers");
        }
    }

    /// A relay whose task never runs (its runtime is not driven after the start) and `n`
    /// counting tasks' relay wakers.
    fn idle_relay(
        n: usize,
    ) -> (
        tokio::runtime::Runtime,
        WakeRelay,
        Vec<Arc<Count>>,
        Vec<Waker>,
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let relay = runtime.block_on(async { WakeRelay::start() });
        let counts = counts(n);
        let wakers = relay_wakers(&relay, &counts);
        (runtime, relay, counts, wakers)
    }

    fn relay_wakers(relay: &WakeRelay, counts: &[Arc<Count>]) -> Vec<Waker> {
        counts
            .iter()
            .map(|c| relay.waker(&Waker::from(c.clone())).waker().clone())
            .collect()
    }

    #[test]
    fn a_small_batch_and_a_wake_outside_a_batch_are_direct() {
        // The relay task never runs here: only direct wake-ups can reach the counts.
        let (_runtime, relay, counts, wakers) = idle_relay(RELAY_MIN);
        batched(|| {
            for waker in &wakers {
                waker.wake_by_ref();
            }
            assert_eq!(
                seen(&counts),
                vec![0; RELAY_MIN],
                "held to the end of the step"
            );
        });
        assert_eq!(seen(&counts), vec![1; RELAY_MIN]);
        // The step's list is kept, emptied (no waker held), for this thread's next step.
        let spare = || SPARE.with(|spare| (spare.borrow().len(), spare.borrow().capacity()));
        assert_eq!(spare(), (0, RELAY_MIN));
        wakers[0].wake_by_ref();
        assert_eq!(seen(&counts)[0], 2);
        batched(|| {
            assert_eq!(spare(), (0, 0), "taken by the step");
            for waker in &wakers {
                waker.wake_by_ref();
            }
        });
        let mut expected = vec![2; RELAY_MIN];
        expected[0] = 3;
        assert_eq!(
            seen(&counts),
            expected,
            "every wake-up once, through the kept list"
        );
        assert_eq!(spare(), (0, RELAY_MIN));
        assert_eq!(relay.batches_relayed(), 0);
    }

    #[test]
    fn a_batch_is_flushed_when_its_step_unwinds_and_a_stopped_relay_wakes_directly() {
        let (_runtime, relay, counts, wakers) = idle_relay(RELAY_MIN + 1);
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            batched(|| {
                for waker in &wakers {
                    waker.wake_by_ref();
                }
                panic!("the step failed");
            })
        }));
        assert!(unwound.is_err());
        // Handed to the relay (whose task this runtime never runs) when the step unwound:
        // stopping the relay wakes them.
        assert_eq!(relay.shared.lock().len(), RELAY_MIN + 1);
        assert_eq!(seen(&counts), vec![0; RELAY_MIN + 1]);
        drop(relay);
        assert_eq!(seen(&counts), vec![1; RELAY_MIN + 1]);
        batched(|| {
            for waker in &wakers {
                waker.wake_by_ref();
            }
        });
        assert_eq!(seen(&counts), vec![2; RELAY_MIN + 1]);
    }

    /// One step that releases a reader (a future that completes once released, polled with
    /// `reader`) and wakes `watchers`; `relayed` says whether the step must have gone to the
    /// relay.
    fn relayed_step_with_a_reader(
        relay: &WakeRelay,
        watchers: &[Waker],
        reader: &Waker,
        relayed: bool,
    ) {
        let released = Arc::new(AtomicBool::new(false));
        let slot = Arc::new(Mutex::new(None::<Waker>));
        let mut wait = Box::pin(after_watchers({
            let (released, slot) = (released.clone(), slot.clone());
            std::future::poll_fn(move |cx| {
                if released.load(Ordering::SeqCst) {
                    return std::task::Poll::Ready(());
                }
                *slot.lock().expect("slot") = Some(cx.waker().clone());
                std::task::Poll::Pending
            })
        }));
        let mut cx = std::task::Context::from_waker(reader);
        assert!(wait.as_mut().poll(&mut cx).is_pending());
        let before = relay.batches_relayed();
        batched(|| {
            released.store(true, Ordering::SeqCst);
            slot.lock()
                .expect("slot")
                .take()
                .expect("registered")
                .wake();
            for waker in watchers {
                waker.wake_by_ref();
            }
        });
        assert_eq!(
            relay.batches_relayed(),
            before + u64::from(relayed),
            "relayed: {relayed}"
        );
    }

    /// Nobody else looks: the relay task's own run wakes the express list's readers, before
    /// the watch responses it takes, each once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_relay_task_wakes_a_relayed_steps_readers_before_its_watch_responses() {
        let relay = WakeRelay::start();
        let (log, task) = ordered_tasks();
        let watchers: Vec<Waker> = (0..=RELAY_MIN)
            .map(|id| relay.waker(&task(id)).waker().clone())
            .collect();
        let reader = task(usize::MAX);
        let relay = std::thread::spawn(move || {
            for _ in 0..10 {
                relayed_step_with_a_reader(&relay, &watchers, &reader, true);
            }
            relay
        })
        .join()
        .expect("dispatching thread");
        let mut expected = Vec::new();
        for _ in 0..10 {
            expected.push(usize::MAX);
            expected.extend(0..=RELAY_MIN);
        }
        for _ in 0..TURNS {
            if log.lock().expect("log").len() >= expected.len() {
                break;
            }
            tokio::task::yield_now().await;
        }
        let seen = log.lock().expect("log").clone();
        // The ten steps may reach the relay in one take or several: per take, the readers
        // first. Every reader and watch response is woken once per step.
        assert_eq!(seen.len(), expected.len(), "each wake-up once");
        let mut sorted = seen.clone();
        sorted.sort_unstable();
        let mut want = expected.clone();
        want.sort_unstable();
        assert_eq!(sorted, want);
        assert_eq!(seen[0], usize::MAX, "a take wakes its readers first");
        drop(relay);
    }

    /// A step that wakes its watch responses directly (or none) releases its readers directly
    /// after them while the runtime's injection queue is short; behind more than
    /// [`RELAY_MIN`] tasks there, onto the express list of the relay its thread last woke
    /// through, and the relay's own run wakes them when no watch response looks first. A
    /// thread that never woke through a relay wakes them directly.
    #[test]
    fn a_direct_steps_readers_go_on_the_express_list_only_behind_a_long_injection_queue() {
        std::thread::spawn(|| {
            let (runtime, relay, counts, wakers) = idle_relay(RELAY_MIN + 1);
            let (log, task) = ordered_tasks();
            let reader = task(usize::MAX);
            let readers = || {
                log.lock()
                    .expect("log")
                    .iter()
                    .filter(|id| **id == usize::MAX)
                    .count()
            };
            // Never woke through a relay, then a short injection queue: direct, after the
            // step's watch responses.
            relayed_step_with_a_reader(&relay, &[], &reader, false);
            assert_eq!(readers(), 1, "woken directly");
            relayed_step_with_a_reader(&relay, &wakers[..1], &reader, false);
            assert_eq!(readers(), 2, "woken directly");
            assert_eq!(seen(&counts)[0], 1, "the watch response first");
            // More than RELAY_MIN tasks woken from outside the (idle) runtime wait in its
            // injection queue.
            for _ in 0..=RELAY_MIN {
                drop(runtime.spawn(async {}));
            }
            assert!(relay.shared.runtime.global_queue_depth() > RELAY_MIN);
            for watchers in [&wakers[..1], &[]] {
                let before = readers();
                relayed_step_with_a_reader(&relay, watchers, &reader, false);
                assert_eq!(readers(), before, "not on the dispatcher's thread");
                relay.wake_express();
                assert_eq!(readers(), before + 1, "by the first look");
                relay.wake_express();
                assert_eq!(readers(), before + 1, "once");
            }
            assert_eq!(seen(&counts)[0], 2, "woken directly, not through the relay");
            // Nobody looks: the relay's run (notified by the step) wakes the reader.
            let before = readers();
            relayed_step_with_a_reader(&relay, &[], &reader, false);
            assert_eq!(readers(), before);
            runtime.block_on(async {
                for _ in 0..100 {
                    tokio::task::yield_now().await;
                }
            });
            assert_eq!(readers(), before + 1, "the relay's run woke the reader");
        })
        .join()
        .expect("a thread of its own: no relay learnt before");
    }

    #[test]
    fn a_stopped_relay_wakes_its_express_readers_before_its_watch_responses() {
        let (_runtime, relay, _, _) = idle_relay(0);
        let (log, task) = ordered_tasks();
        let watchers: Vec<Waker> = (0..=RELAY_MIN)
            .map(|id| relay.waker(&task(id)).waker().clone())
            .collect();
        relayed_step_with_a_reader(&relay, &watchers, &task(usize::MAX), true);
        assert!(log.lock().expect("log").is_empty());
        drop(relay);
        let mut expected = vec![usize::MAX];
        expected.extend(0..=RELAY_MIN);
        assert_eq!(*log.lock().expect("log"), expected);
    }
}

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
//! writer's answer went first. A step that hands its watch responses to the relay wakes its
//! readers directly once they are handed over, not behind them on the relay's list: there a
//! writer's answer waited for every watch response of its revision to run (a whole round of
//! the runtime's queue per write at 10,000 watchers), which held back the writers and with
//! them the events each watch response finds per wake-up (invocation AO: 10,000 watchers × 100
//! writes/s, 2.2-2.9 against 2.9-3.4 µs of CPU per delivered event).
//!
//! ## Guarantees
//! - No wake-up is lost or delayed past the end of the step that made it: a batch is flushed
//!   when its step ends (also by unwinding); a waker appended to the relay's list after the
//!   relay took the list either notifies it (the list was empty) or is taken with the list it
//!   joined; `Notify` keeps a permit when the relay is not waiting.
//! - Within a step, watch responses are woken before readers, in the order they were woken;
//!   when they go to the relay, they are handed to it before the readers are woken.
//! - A wake-up outside a batch (a runtime thread, any other thread) wakes the task directly,
//!   as before the relay existed.
//! - When the relay stops (its [`WakeRelay`] dropped, or its runtime shut down), every waker
//!   on its list is woken, in its order, and later wake-ups go directly to their tasks.
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
            *b = Some(Batch::default());
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
/// of that revision; when the watch responses go to the relay, the readers are woken once they
/// are handed over (see the module docs).
fn flush(batch: Batch) {
    let Batch {
        relay,
        watchers,
        readers,
    } = batch;
    let relay =
        relay.filter(|shared| watchers.len() > RELAY_MIN && !shared.stopped.load(Ordering::SeqCst));
    let Some(shared) = relay else {
        for waker in watchers.into_iter().chain(readers) {
            waker.wake();
        }
        return;
    };
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
    // Stopped while this was appended: the stop may have taken the list before the push.
    if shared.stopped.load(Ordering::SeqCst) {
        shared.stop();
    }
    // Not behind the watch responses on the relay's list, where a writer's answer would wait
    // for every one of them to run.
    for reader in readers {
        reader.wake();
    }
}

/// Waits for `wait` (a cache's `wait_fresh`) with its wake-up released after the watch
/// responses' of the same dispatcher step, or once they are handed to the relay (see
/// [`flush`]).
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
    pending: Mutex<Vec<Waker>>,
    notify: tokio::sync::Notify,
    stopped: AtomicBool,
    /// Batches handed to the relay task so far.
    relayed: std::sync::atomic::AtomicU64,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Waker>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Stops relaying: later wake-ups go directly to their tasks, queued ones are woken now.
    fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
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
            pending: Mutex::new(Vec::new()),
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

    /// A waker that wakes `task` through the relay.
    #[must_use]
    pub fn waker(&self, task: &Waker) -> RelayWaker {
        let forward = Arc::new(Forward {
            shared: self.shared.clone(),
            task: task.clone(),
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
}

struct Forward {
    shared: Arc<Shared>,
    task: Waker,
}

impl Wake for Forward {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
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

    /// Gives the relay task turns until `counts` reach `expected` (a lost wake-up never
    /// arrives; the bound is in turns, not time).
    async fn until_seen(counts: &[Arc<Count>], expected: &[usize]) {
        for _ in 0..100_000 {
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

    /// Woken directly, a step's reader comes after its watch responses; with them handed to
    /// the relay, it is woken at the step's end, not behind them on the relay's list (which
    /// holds them in their order).
    #[test]
    fn a_reader_released_in_a_step_follows_its_direct_watch_responses_not_the_relayed_ones() {
        for watchers in [1, RELAY_MIN, RELAY_MIN + 1, 3 * RELAY_MIN] {
            let (_runtime, relay, _, _) = idle_relay(0);
            let log = Arc::new(Mutex::new(Vec::new()));
            let task = |id| {
                Waker::from(Arc::new(Ordered {
                    id,
                    log: log.clone(),
                }))
            };
            // The reader: registers its waker, completes once released.
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
            let reader = task(usize::MAX);
            let mut cx = std::task::Context::from_waker(&reader);
            assert!(wait.as_mut().poll(&mut cx).is_pending());
            let wakers: Vec<Waker> = (0..watchers)
                .map(|id| relay.waker(&task(id)).waker().clone())
                .collect();
            batched(|| {
                // Released first, as `finish_revision` releases a writer after the pushes.
                released.store(true, Ordering::SeqCst);
                slot.lock()
                    .expect("slot")
                    .take()
                    .expect("registered")
                    .wake();
                for waker in &wakers {
                    waker.wake_by_ref();
                }
                assert!(
                    log.lock().expect("log").is_empty(),
                    "held to the end of the step"
                );
            });
            let mut expected: Vec<usize> = (0..watchers).collect();
            if watchers > RELAY_MIN {
                assert_eq!(
                    *log.lock().expect("log"),
                    [usize::MAX],
                    "the reader is woken at the step's end, the watch responses are on the relay's list"
                );
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
        wakers[0].wake_by_ref();
        assert_eq!(seen(&counts)[0], 2);
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
}

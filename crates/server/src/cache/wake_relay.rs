//! Wakes watch responses in bulk from inside the runtime.
//!
//! A watch response's task parks on its core queue and is woken by the cache's dispatcher
//! thread (live events) or catch-up thread (a pass). Those threads are not the runtime's: a
//! task woken from outside goes to the runtime's shared injection queue (a lock per wake) and an
//! idle worker is unparked with a `futex` call, once per woken task — for one write and 1,000
//! watchers, 1,000 foreign wake-ups, each of which can start a worker that then finds a task
//! holding a single event.
//!
//! The driver runs each dispatch step and each catch-up pass inside [`batched`]: the first
//! [`RELAY_MIN`] wake-ups of watch responses (whose tasks registered a [`RelayWaker`]) that the
//! step makes are direct, as they come; the rest are held and, when the step ends, handed to
//! the relay task in one append and one notification; the relay task wakes them from a worker,
//! onto that worker's own run queue (no lock, no unpark per task) — what a fan-out done on a
//! runtime thread gets for free.
//!
//! Why not every wake-up: the relay is one more task between the write and the watcher, and a
//! wake-up held to the end of its step comes after the step's other wake-ups (the writer's
//! answer among them). Measured (BENCHMARKS.md, invocation AK), relaying every wake-up, or
//! holding every wake-up of a step to its end, cut the CPU per delivered event at 10,000
//! watchers by a quarter or more but added ~100-280 µs to the median latency of a lone healthy
//! watcher next to 100 catching-up companions; a step that wakes a few watchers now wakes them
//! exactly as before the relay existed.
//!
//! ## Guarantees
//! - No wake-up is lost or delayed past the end of the step that made it: the held part of a
//!   batch is flushed when its step ends (also by unwinding); a waker appended to the relay's list after the
//!   relay took the list either notifies it (the list was empty) or is taken with the list it
//!   joined; `Notify` keeps a permit when the relay is not waiting.
//! - A wake-up outside a batch (a runtime thread, any other thread) wakes the task directly,
//!   as before the relay existed.
//! - When the relay stops (its [`WakeRelay`] dropped, or its runtime shut down), every waker
//!   on its list is woken and later wake-ups go directly to their tasks.
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

/// One step's wake-ups: how many there were, and those beyond the first [`RELAY_MIN`] (woken
/// directly as they came), held for the relay.
struct Batch {
    count: usize,
    held: Vec<Arc<Forward>>,
}

/// Runs `step` with this thread's wake-ups of watch responses collected, then wakes them (see
/// the module docs). A nested call runs inside the outer batch.
pub fn batched<R>(step: impl FnOnce() -> R) -> R {
    struct Flush;
    impl Drop for Flush {
        fn drop(&mut self) {
            if let Some(batch) = BATCH.with(|b| b.borrow_mut().take()) {
                flush(batch.held);
            }
        }
    }
    let outermost = BATCH.with(|b| {
        let mut b = b.borrow_mut();
        if b.is_some() {
            false
        } else {
            *b = Some(Batch {
                count: 0,
                held: Vec::new(),
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

fn flush(batch: Vec<Arc<Forward>>) {
    if batch.is_empty() {
        return;
    }
    let shared = batch[0].shared.clone();
    if shared.stopped.load(Ordering::SeqCst) {
        for forward in batch {
            forward.task.wake_by_ref();
        }
        return;
    }
    shared.relayed.fetch_add(1, Ordering::Relaxed);
    let first = {
        let mut pending = shared.lock();
        let was_empty = pending.is_empty();
        for forward in &batch {
            if Arc::ptr_eq(&forward.shared, &shared) {
                pending.push(forward.task.clone());
            } else {
                // Another server's relay (tests run several in one process): directly.
                forward.task.wake_by_ref();
            }
        }
        was_empty
    };
    if first {
        shared.notify.notify_one();
    }
    // Stopped while this was appended: the stop may have taken the list before the push.
    if shared.stopped.load(Ordering::SeqCst) {
        shared.stop();
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
                Some(batch) => {
                    batch.count += 1;
                    let hold = batch.count > RELAY_MIN;
                    if hold {
                        batch.held.push(self.clone());
                    }
                    hold
                }
                None => false,
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
                    // Those beyond RELAY_MIN wait for the end of the step.
                    assert!(
                        BATCH.with(|b| b.borrow().as_ref().is_some_and(|b| !b.held.is_empty()))
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
            assert_eq!(seen(&counts), vec![1; RELAY_MIN], "woken as they came");
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
        // The first RELAY_MIN went directly; the last was handed to the relay (whose task
        // this runtime never runs) when the step unwound: stopping the relay wakes it.
        assert_eq!(relay.shared.lock().len(), 1);
        assert_eq!(seen(&counts)[RELAY_MIN], 0);
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

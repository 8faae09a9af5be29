//! Heavy requests off the runtime workers: a request whose body is large is handled on a thread
//! of tokio's blocking pool, a bounded number at once, and stops at its next phase boundary
//! once its request is gone.
//!
//! ## Guarantees
//! - A request whose body is at least `--heavy-request-body-bytes` (see the limits config)
//!   is handled whole — the body's YAML or protobuf decode, the JSON decode, the patch, merge or
//!   apply, admission and validation, the storage encoding, the answer's encoding — on a
//!   thread of tokio's blocking pool ([`Offload::run`]), which drives the handler's future and
//!   its waits there (`Handle::block_on`: timers and sockets stay with the runtime's drivers).
//!   A runtime worker only waits for its answer, so the other connections on that worker are
//!   served meanwhile and the request's deadline still answers kube's 504 at its time (the
//!   limits layer drops the wait).
//! - At most `--max-heavy-requests` run at once (default: one per CPU), so no client makes
//!   the server start threads without bound. Another heavy request waits for a slot, in
//!   arrival order (tokio's fair semaphore), within its own deadline: one whose deadline
//!   passes while it waits gets the limits layer's 504 like any slow request and never takes
//!   a thread. (Waiting rather than kube's 429: the waiters are already bounded by the
//!   in-flight limits — `--max-mutating-requests-inflight` and the user's share — and their
//!   bodies already read; a 429 would make a client resend the same large body.)
//! - Dropped (its deadline passed or its client went), the work stops at its next phase
//!   boundary: the next await of its future or a [`phase_boundary`] between two synchronous
//!   phases (after the body's decode, after the patch/apply and admission, before the storage
//!   encoding, before the answer's encoding). The phase in progress runs to its end on its
//!   blocking thread, holding its slot, never a runtime worker; nothing a stopped write had
//!   not yet committed is written (the same cut as a handler dropped at its deadline).
//! - A phase that a large stored object makes heavy while the body is small (a small patch
//!   of a large object: the update's attempt, its storage encoding and the answer's encoding,
//!   sized by the object's stored length) runs in place under one of the same slots, with the runtime worker's
//!   other tasks handed to another thread first (tokio's `block_in_place`,
//!   [`Offload::in_place`]): the other connections are served meanwhile, but its own deadline
//!   answers only once that phase ends (its task is the one blocked); counted as
//!   `outcome="in_place"`.
//! - The reflector's decode of a stored value of at least the threshold hands the worker on
//!   the same way ([`Offload::hand_on`]) but takes no slot: heavy writes hold the slots while
//!   they wait for the reflector to reach their revision, so it never waits for one (it is
//!   one task: at most one thread). A watch's `Table` frames whose objects' sizes times the
//!   printer columns reach the threshold are made the same way (`http::watch`): a watch is one
//!   task, and its body cannot wait for a slot.
//! - An answer's conversion that a large result makes heavy — a LIST's `Table` (its objects'
//!   stored sizes), a YAML answer (its JSON's length) — runs the same way, under the same
//!   threshold and slots ([`Offload::compute`]); inside a heavy request it runs on that
//!   request's thread. A `Table` checks [`stopped`] every few rows, so one whose request is
//!   gone frees its slot and thread within a few rows' work (a custom resource's printer
//!   columns can make each row cost millions of steps: 1000 filter columns over 2000-item
//!   arrays went on for minutes after its 504, every heavy slot taken by a few such LISTs).
//! - A request with a smaller body is handled as before on the worker: no thread hop, no
//!   allocation; each phase boundary it passes costs one thread-local read, each in-place
//!   candidate a comparison of the object's size.
//! - A heavy request holds its slot for its whole handling, its waits included (the store's
//!   commit, the cache reaching its revision): the bound is on threads, not on CPU, so
//!   `--max-heavy-requests` above the CPU count lets heavy writes overlap those waits.
//! - Each heavy request, phase run in place or hand-on, once finished, tells the memory
//!   release (`memory_release`), which gives the memory its transient copies freed back to
//!   the system at most once per `--memory-release-interval-ms`.
//! - Counted in `/metrics`: `watchkeeper_heavy_requests_total{outcome="answered"|"stopped"|"in_place"}`,
//!   the gauges `watchkeeper_heavy_requests_running` and `watchkeeper_heavy_requests_waiting`.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};

use tokio::sync::{Semaphore, oneshot};
use watchkeeper_api::ApiError;

use crate::memory_release::Release;

/// The heavy-request pool: its threshold, its slots and its counts.
#[derive(Debug)]
pub struct Offload {
    /// Bodies of at least this many bytes are heavy; 0: none is.
    threshold: usize,
    /// `--max-heavy-requests` slots.
    slots: Arc<Semaphore>,
    /// What the jobs share with the pool (counts, the test hold).
    shared: Arc<Shared>,
    /// Told when a heavy request or phase finished.
    release: Option<Arc<Release>>,
}

#[derive(Debug, Default)]
struct Shared {
    answered: AtomicU64,
    stopped: AtomicU64,
    in_place: AtomicU64,
    running: AtomicUsize,
    waiting: AtomicUsize,
    /// Jobs waiting at a held boundary.
    held_jobs: AtomicUsize,
    /// Whether phase boundaries hold their jobs ([`Offload::hold_at_boundaries`]).
    held: Mutex<bool>,
    released: Condvar,
    /// `held`'s value, read without the lock on every boundary.
    holding: AtomicBool,
}

/// One heavy request's state, seen by its phase boundaries.
#[derive(Debug)]
struct Job {
    /// Its request is gone (the caller's wait was dropped).
    cancelled: AtomicBool,
    shared: Arc<Shared>,
}

tokio::task_local! {
    /// The heavy request the current task runs, if any.
    static JOB: Arc<Job>;
}

impl Offload {
    /// A pool for bodies of at least `threshold` bytes (0: none), `slots` at once (at least
    /// one).
    #[must_use]
    pub fn new(threshold: usize, slots: usize) -> Offload {
        Offload {
            threshold,
            slots: Arc::new(Semaphore::new(slots.max(1))),
            shared: Arc::new(Shared::default()),
            release: None,
        }
    }

    /// The same pool, telling `release` when each heavy request or phase finished.
    #[must_use]
    pub fn with_release(mut self, release: Arc<Release>) -> Offload {
        self.release = Some(release);
        self
    }

    /// A heavy request or phase finished: its transient copies are free to give back.
    fn finished(&self) {
        if let Some(release) = &self.release {
            release.after_heavy();
        }
    }

    /// Whether a request with a body of `body_len` bytes is handled off the workers.
    #[must_use]
    pub fn is_heavy(&self, body_len: usize) -> bool {
        self.threshold != 0 && body_len >= self.threshold
    }

    /// Runs `work` on a blocking-pool thread once a slot is free (see the module docs); when
    /// this future is dropped, `work` stops at its next phase boundary.
    ///
    /// # Errors
    /// 500 when `work` panicked.
    pub async fn run<F>(&self, work: F) -> Result<F::Output, ApiError>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let waiting = Counted::new(&self.shared.waiting);
        let Ok(slot) = self.slots.clone().acquire_owned().await else {
            return Err(ApiError::internal("the heavy request slots are closed"));
        };
        drop(waiting);
        let job = Arc::new(Job {
            cancelled: AtomicBool::new(false),
            shared: self.shared.clone(),
        });
        let (gone, gone_seen) = oneshot::channel::<()>();
        let _stop_when_dropped = StopWhenDropped {
            job: job.clone(),
            _gone: gone,
        };
        let runtime = tokio::runtime::Handle::current();
        let shared = self.shared.clone();
        let done = tokio::task::spawn_blocking(move || {
            let _slot = slot;
            let _running = Counted::new(&shared.running);
            let output = runtime.block_on(JOB.scope(job, async move {
                tokio::select! {
                    biased;
                    _ = gone_seen => None,
                    output = work => Some(output),
                }
            }));
            let outcome = if output.is_some() {
                &shared.answered
            } else {
                &shared.stopped
            };
            outcome.fetch_add(1, Ordering::Relaxed);
            output
        })
        .await;
        self.finished();
        match done {
            Ok(Some(output)) => Ok(output),
            // Only once this future was dropped; kept for completeness.
            Ok(None) => Err(ApiError::internal("the heavy request was stopped")),
            Err(error) => Err(ApiError::internal(format!(
                "the heavy request failed: {error}"
            ))),
        }
    }

    /// `work`, one synchronous phase over `size` bytes (an answer's conversion), on the
    /// blocking pool through [`Self::run`] when `size` is heavy; at once, where it is, when it
    /// is not or when this task already is a heavy request's (its thread is the pool's, and a
    /// second slot could wait for its own).
    ///
    /// # Errors
    /// 500 when `work` panicked on the pool.
    pub async fn compute<T, W>(&self, size: usize, work: W) -> Result<T, ApiError>
    where
        T: Send + 'static,
        W: FnOnce() -> T + Send + 'static,
    {
        if !self.is_heavy(size) || JOB.try_with(|_| ()).is_ok() {
            return Ok(work());
        }
        self.run(async move {
            phase_boundary().await;
            let output = work();
            // A phase that saw its request gone ([`stopped`]) and cut its work short is
            // counted stopped, its output dropped.
            phase_boundary().await;
            output
        })
        .await
    }

    /// `phase`, one synchronous phase of a request over an input of `size` bytes that its
    /// body did not announce (a small patch of a large stored object): when `size` is heavy,
    /// run where it is under one of the slots, but with the runtime worker's other tasks
    /// handed to another thread first (tokio's `block_in_place`), so they are not held up;
    /// at once otherwise, inside a heavy request, or off a multi-threaded runtime (where
    /// there is no worker to hand on).
    pub async fn in_place<T>(&self, size: usize, phase: impl FnOnce() -> T) -> T {
        let multi_thread = tokio::runtime::Handle::try_current().is_ok_and(|runtime| {
            runtime.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread
        });
        if !self.is_heavy(size) || !multi_thread || JOB.try_with(|_| ()).is_ok() {
            return phase();
        }
        let waiting = Counted::new(&self.shared.waiting);
        let slot = self.slots.acquire().await;
        drop(waiting);
        let _running = Counted::new(&self.shared.running);
        let output = tokio::task::block_in_place(|| {
            self.shared.wait_while_held();
            phase()
        });
        drop(slot);
        self.shared.in_place.fetch_add(1, Ordering::Relaxed);
        self.finished();
        output
    }

    /// `phase` of the one task that must not wait for a request's slot (the reflector decoding
    /// a large stored value, which heavy writes holding the slots wait for): when `size` is
    /// heavy, with the runtime worker's other tasks handed to another thread first, as
    /// [`Self::in_place`] but without a slot (one task takes at most one thread) and never
    /// held; at once otherwise.
    pub fn hand_on<T>(&self, size: usize, phase: impl FnOnce() -> T) -> T {
        let multi_thread = tokio::runtime::Handle::try_current().is_ok_and(|runtime| {
            runtime.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread
        });
        if !self.is_heavy(size) || !multi_thread || JOB.try_with(|_| ()).is_ok() {
            return phase();
        }
        let output = tokio::task::block_in_place(phase);
        self.shared.in_place.fetch_add(1, Ordering::Relaxed);
        self.finished();
        output
    }

    /// Heavy requests that ran to their answer, and those stopped at a phase boundary once
    /// their request was gone.
    #[must_use]
    pub fn outcomes(&self) -> (u64, u64) {
        (
            self.shared.answered.load(Ordering::Relaxed),
            self.shared.stopped.load(Ordering::Relaxed),
        )
    }

    /// The memory release's counts ([`Release::counts`]); zeros without one.
    #[must_use]
    pub fn release_counts(&self) -> (u64, f64, u64) {
        self.release
            .as_ref()
            .map_or((0, 0.0, 0), |release| release.counts())
    }

    /// Heavy phases run in place ([`Self::in_place`]).
    #[must_use]
    pub fn in_place_phases(&self) -> u64 {
        self.shared.in_place.load(Ordering::Relaxed)
    }

    /// Heavy requests running on a blocking thread now, and those waiting for a slot.
    #[must_use]
    pub fn running_and_waiting(&self) -> (usize, usize) {
        (
            self.shared.running.load(Ordering::Relaxed),
            self.shared.waiting.load(Ordering::Relaxed),
        )
    }

    /// A test hook: until the guard is dropped, every heavy request blocks its thread at its
    /// next phase boundary, and every heavy phase run in place at its start (as a long
    /// synchronous phase would), counted in [`Self::held`].
    /// Costs a heavy request one atomic read per boundary when nothing holds them.
    #[must_use]
    pub fn hold_at_boundaries(&self) -> HoldGuard {
        *self
            .shared
            .held
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = true;
        self.shared.holding.store(true, Ordering::Release);
        HoldGuard {
            shared: self.shared.clone(),
        }
    }

    /// Heavy requests blocked at a held boundary now.
    #[must_use]
    pub fn held(&self) -> usize {
        self.shared.held_jobs.load(Ordering::Acquire)
    }
}

impl Shared {
    /// Blocks this thread while [`Offload::hold_at_boundaries`] holds (counted in `held_jobs`).
    fn wait_while_held(&self) {
        if !self.holding.load(Ordering::Acquire) {
            return;
        }
        self.held_jobs.fetch_add(1, Ordering::AcqRel);
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        while *held {
            held = self
                .released
                .wait(held)
                .unwrap_or_else(PoisonError::into_inner);
        }
        drop(held);
        self.held_jobs.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Releases the boundaries [`Offload::hold_at_boundaries`] held, when dropped.
#[derive(Debug)]
pub struct HoldGuard {
    shared: Arc<Shared>,
}

impl Drop for HoldGuard {
    fn drop(&mut self) {
        let mut held = self
            .shared
            .held
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *held = false;
        self.shared.holding.store(false, Ordering::Release);
        self.shared.released.notify_all();
    }
}

/// Marks the job stopped, and wakes its future to see it, when the caller's wait is dropped
/// (or done: the job has then finished anyway).
struct StopWhenDropped {
    job: Arc<Job>,
    _gone: oneshot::Sender<()>,
}

impl Drop for StopWhenDropped {
    fn drop(&mut self) {
        self.job.cancelled.store(true, Ordering::Release);
    }
}

/// A gauge held up while this lives.
struct Counted<'a>(&'a AtomicUsize);

impl<'a> Counted<'a> {
    fn new(gauge: &'a AtomicUsize) -> Counted<'a> {
        gauge.fetch_add(1, Ordering::Relaxed);
        Counted(gauge)
    }
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Whether the heavy request this thread works for is gone (its deadline passed or its client
/// went): a long synchronous phase (a `Table` of many rows) checks it as it goes and stops
/// early, its output then dropped at the next [`phase_boundary`]. Outside a heavy request,
/// `false`.
#[must_use]
pub fn stopped() -> bool {
    JOB.try_with(|job| job.cancelled.load(Ordering::Acquire))
        .unwrap_or(false)
}

/// A boundary between two synchronous phases of a request's work. Outside a heavy request it
/// returns at once. In one whose request is gone it never returns, so the job's future is
/// dropped there (the pool's select sees the request gone) instead of starting the next
/// phase; held by [`Offload::hold_at_boundaries`], it blocks its thread until released.
pub async fn phase_boundary() {
    let Ok(job) = JOB.try_with(Arc::clone) else {
        return;
    };
    job.shared.wait_while_held();
    if job.cancelled.load(Ordering::Acquire) {
        std::future::pending::<()>().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_bodies_at_the_threshold_are_heavy_and_zero_turns_it_off() {
        let offload = Offload::new(1024, 2);
        assert!(!offload.is_heavy(1023));
        assert!(offload.is_heavy(1024));
        assert!(!Offload::new(0, 2).is_heavy(usize::MAX));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn work_runs_off_the_worker_and_answers() {
        let offload = Offload::new(1, 1);
        let worker = std::thread::current().id();
        let ran_on = offload
            .run(async {
                phase_boundary().await;
                std::thread::current().id()
            })
            .await
            .unwrap();
        assert_ne!(ran_on, worker);
        assert_eq!(offload.outcomes(), (1, 0));
        assert_eq!(offload.running_and_waiting(), (0, 0));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_heavy_phase_leaves_the_worker_once_and_a_light_one_stays() {
        let offload = Arc::new(Offload::new(1024, 1));
        let worker = std::thread::current().id();
        let here = || std::thread::current().id();
        assert_eq!(offload.compute(1023, here).await.unwrap(), worker);
        assert_ne!(offload.compute(1024, here).await.unwrap(), worker);
        // Inside a heavy request a heavy phase runs on the request's own thread, without
        // waiting for a second slot (there is one).
        let inner = offload.clone();
        let (outer, inner) = offload
            .run(async move { (here(), inner.compute(1024, here).await.unwrap()) })
            .await
            .unwrap();
        assert_eq!(outer, inner);
        assert_ne!(outer, worker);
        assert_eq!(offload.outcomes(), (2, 0));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_heavy_phase_in_place_off_a_multi_threaded_runtime_runs_inline() {
        let offload = Offload::new(1024, 1);
        assert_eq!(offload.in_place(4096, || 7).await, 7);
        assert_eq!(offload.in_place_phases(), 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_heavy_phase_in_place_is_counted_and_a_light_one_is_not() {
        let offload = Offload::new(1024, 1);
        assert_eq!(offload.in_place(1023, || 1).await, 1);
        assert_eq!(offload.in_place_phases(), 0);
        assert_eq!(offload.in_place(1024, || 2).await, 2);
        assert_eq!(offload.in_place_phases(), 1);
        let worker = std::thread::current().id();
        assert_eq!(
            offload.hand_on(1023, || std::thread::current().id()),
            worker
        );
        assert_eq!(offload.hand_on(1024, || 3), 3);
        assert_eq!(offload.in_place_phases(), 2);
        assert_eq!(offload.running_and_waiting(), (0, 0));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn dropped_work_stops_at_its_next_boundary() {
        let offload = Arc::new(Offload::new(1, 1));
        let phases = Arc::new(AtomicUsize::new(0));
        let hold = offload.hold_at_boundaries();
        let counted = phases.clone();
        let run = tokio::spawn({
            let offload = offload.clone();
            async move {
                offload
                    .run(async move {
                        counted.fetch_add(1, Ordering::SeqCst);
                        phase_boundary().await;
                        counted.fetch_add(1, Ordering::SeqCst);
                    })
                    .await
            }
        });
        // The job blocks its thread at the boundary; this worker is free to go on.
        while offload.held() == 0 {
            tokio::task::yield_now().await;
        }
        // A second request waits for the only slot.
        let waiting = tokio::spawn({
            let offload = offload.clone();
            async move { offload.run(async {}).await }
        });
        while offload.running_and_waiting() != (1, 1) {
            tokio::task::yield_now().await;
        }
        run.abort();
        assert!(run.await.unwrap_err().is_cancelled());
        drop(hold);
        waiting.await.unwrap().unwrap();
        assert_eq!(
            phases.load(Ordering::SeqCst),
            1,
            "the second phase never ran"
        );
        assert_eq!(offload.outcomes(), (1, 1));
    }
}

//! Drives one resource's watch cache on real threads: the dispatcher on one OS thread fed by a
//! channel, the catch-up worker on another, both with the wall clock converted to the core's
//! [`Instant`]. (The simulator drives the same core single-threaded on a virtual clock.)
//!
//! The dispatcher runs on its own OS thread rather than as a tokio task: under saturation a
//! task competes with connection tasks and falls behind.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, OnceLock};
use std::thread::{JoinHandle, Thread};
use std::time::Duration;

use watchkeeper_core::{
    CacheConfig, CatchUpWorker, Change, Dispatcher, Instant, Object, PassReport, Revision,
    WatchCache,
};

/// Converts the wall clock into the core's [`Instant`].
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    origin: std::time::Instant,
}

impl Clock {
    /// A clock whose origin is now.
    #[must_use]
    pub fn new() -> Clock {
        Clock {
            origin: std::time::Instant::now(),
        }
    }

    /// Now, for the core.
    #[must_use]
    pub fn now(&self) -> Instant {
        Instant::from_nanos(u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX))
    }

    /// How long from now until `at` (zero if past).
    #[must_use]
    pub fn until(&self, at: Instant) -> Duration {
        at.saturating_duration_since(self.now())
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}

/// How long the threads sleep when nothing wakes them (`--driver-*-ms`): bounds on how late
/// a timer-driven step (a deadline, a bookmark, a catch-up pass) can run after its time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DriverWaits {
    /// The dispatcher's longest wait for input [default: 1 s].
    pub dispatcher_idle: Duration,
    /// The dispatcher's poll for room while a legacy-mode revision is blocked on full queues
    /// [default: 1 ms].
    pub blocked_poll: Duration,
    /// The catch-up worker's longest park [default: 100 ms].
    pub worker_idle: Duration,
}

impl Default for DriverWaits {
    fn default() -> DriverWaits {
        DriverWaits {
            dispatcher_idle: Duration::from_secs(1),
            blocked_poll: Duration::from_millis(1),
            worker_idle: Duration::from_millis(100),
        }
    }
}

/// Called on the catch-up thread after every pass: its report, the wall-clock instant the pass
/// started, and how long it ran.
pub type PassHook = Box<dyn FnMut(&PassReport, std::time::Instant, Duration) + Send>;

/// Input to a dispatcher thread.
#[derive(Debug)]
pub enum Input {
    /// One revision's changes for this resource.
    Revision(Revision, Vec<Change>),
    /// The store reached this revision with nothing for this resource.
    Progress(Revision),
    /// The resource was (re)listed at this revision.
    Reset(Revision, Vec<Arc<Object>>),
    /// The dispatcher's mailbox has messages.
    Wake,
    /// Stop the threads.
    Stop,
}

/// One resource's cache and the threads that drive it.
#[derive(Debug)]
pub struct CacheDriver {
    /// The cache handle.
    pub cache: WatchCache,
    input: Sender<Input>,
    stop: Arc<AtomicBool>,
    worker_thread: Arc<OnceLock<Thread>>,
    threads: Vec<JoinHandle<()>>,
}

/// Why a cache's driver did not start.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    /// The cache configuration is refused (the field is named).
    #[error(transparent)]
    Config(#[from] watchkeeper_core::ConfigError),
    /// A thread could not be spawned.
    #[error("cannot start the {thread} thread: {source}")]
    Thread {
        /// `dispatcher` or `catch-up`.
        thread: &'static str,
        /// The spawn error.
        #[source]
        source: std::io::Error,
    },
}

impl CacheDriver {
    /// Starts the dispatcher and worker threads of a cache named `name`.
    ///
    /// # Errors
    /// The configuration is invalid or a thread could not start.
    pub fn start(
        name: &str,
        config: CacheConfig,
        clock: Clock,
    ) -> Result<CacheDriver, DriverError> {
        CacheDriver::start_with(name, config, clock, DriverWaits::default())
    }

    /// [`CacheDriver::start`] with the threads' waits.
    ///
    /// # Errors
    /// The configuration is invalid or a thread could not start.
    pub fn start_with(
        name: &str,
        config: CacheConfig,
        clock: Clock,
        waits: DriverWaits,
    ) -> Result<CacheDriver, DriverError> {
        CacheDriver::start_observed(name, config, clock, waits, None)
    }

    /// [`CacheDriver::start_with`], calling `on_pass` on the catch-up thread after every pass
    /// with its report, the wall-clock instant it started and its duration (the benchmarks'
    /// view of each pass; the server passes `None`).
    ///
    /// # Errors
    /// The configuration is invalid or a thread could not start.
    pub fn start_observed(
        name: &str,
        config: CacheConfig,
        clock: Clock,
        waits: DriverWaits,
        on_pass: Option<PassHook>,
    ) -> Result<CacheDriver, DriverError> {
        let (cache, dispatcher, worker) = WatchCache::new(config, 0, Vec::new())?;
        let (input, receiver) = std::sync::mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let wake = input.clone();
        dispatcher.set_notify(Box::new(move || {
            let _ = wake.send(Input::Wake);
        }));
        let worker_thread: Arc<OnceLock<Thread>> = Arc::new(OnceLock::new());
        let hook = worker_thread.clone();
        worker.set_notify(Box::new(move || {
            if let Some(thread) = hook.get() {
                thread.unpark();
            }
        }));
        let dispatcher_handle = std::thread::Builder::new()
            .name(format!("dispatch-{name}"))
            .spawn(move || run_dispatcher(dispatcher, &receiver, clock, waits))
            .map_err(|source| DriverError::Thread {
                thread: "dispatcher",
                source,
            })?;
        let worker_stop = stop.clone();
        let worker_handle = std::thread::Builder::new()
            .name(format!("catchup-{name}"))
            .spawn(move || run_worker(worker, &worker_stop, clock, waits, on_pass))
            .map_err(|source| DriverError::Thread {
                thread: "catch-up",
                source,
            })?;
        let _ = worker_thread.set(worker_handle.thread().clone());
        Ok(CacheDriver {
            cache,
            input,
            stop,
            worker_thread,
            threads: vec![dispatcher_handle, worker_handle],
        })
    }

    /// A sender for the reflector.
    #[must_use]
    pub fn sender(&self) -> Sender<Input> {
        self.input.clone()
    }

    /// Stops both threads and waits for them.
    pub fn shutdown(&mut self) {
        self.stop.store(true, Ordering::Release);
        let _ = self.input.send(Input::Stop);
        if let Some(thread) = self.worker_thread.get() {
            thread.unpark();
        }
        for handle in self.threads.drain(..) {
            let _ = handle.join();
        }
    }
}

impl Drop for CacheDriver {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn run_dispatcher(
    mut dispatcher: Dispatcher,
    receiver: &Receiver<Input>,
    clock: Clock,
    waits: DriverWaits,
) {
    // Inputs held while a legacy-mode revision is blocked on full queues.
    let mut held: VecDeque<Input> = VecDeque::new();
    loop {
        let mut timeout = dispatcher
            .poll_timeout()
            .map_or(waits.dispatcher_idle, |at| clock.until(at))
            .min(waits.dispatcher_idle);
        if dispatcher.is_blocked() {
            // Legacy mode waits on consumers; poll for room often.
            timeout = timeout.min(waits.blocked_poll);
        }
        let input = if !dispatcher.is_blocked() && !held.is_empty() {
            held.pop_front()
        } else {
            match receiver.recv_timeout(timeout) {
                Ok(input) => Some(input),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => return,
            }
        };
        let now = clock.now();
        match input {
            Some(Input::Stop) => return,
            Some(Input::Wake) => dispatcher.handle_messages(now),
            Some(input) if dispatcher.is_blocked() => held.push_back(input),
            Some(Input::Revision(revision, changes)) => {
                if !changes.is_empty() {
                    let _ = dispatcher.handle_revision(now, revision, changes);
                } else {
                    dispatcher.handle_progress(now, revision);
                }
            }
            Some(Input::Progress(revision)) => dispatcher.handle_progress(now, revision),
            Some(Input::Reset(revision, objects)) => {
                dispatcher.handle_reset(now, revision, objects)
            }
            None => {}
        }
        if dispatcher.is_blocked() {
            dispatcher.retry_blocked(now);
        }
        if dispatcher.poll_timeout().is_some_and(|at| at <= now) {
            dispatcher.handle_timeout(now);
        }
    }
}

fn run_worker(
    mut worker: CatchUpWorker,
    stop: &AtomicBool,
    clock: Clock,
    waits: DriverWaits,
    mut on_pass: Option<PassHook>,
) {
    while !stop.load(Ordering::Acquire) {
        let now = clock.now();
        match worker.poll_timeout() {
            Some(at) if at <= now => {
                let started = std::time::Instant::now();
                let report = worker.run_pass(now);
                let elapsed = started.elapsed();
                worker.record_pass_duration(elapsed);
                if let Some(hook) = &mut on_pass {
                    hook(&report, started, elapsed);
                }
            }
            Some(at) => std::thread::park_timeout(clock.until(at).min(waits.worker_idle)),
            None => std::thread::park_timeout(waits.worker_idle),
        }
    }
}

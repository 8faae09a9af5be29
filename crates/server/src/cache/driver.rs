//! Drives one resource's watch cache on real threads: the dispatcher on one OS thread fed by a
//! channel, the catch-up worker on another, both with the wall clock converted to the core's
//! [`Instant`]. (The simulator drives the same core single-threaded on a virtual clock.)
//!
//! The dispatcher runs on its own OS thread rather than as a tokio task: under saturation a
//! task competes with connection tasks and falls behind. A small fan-out does not need the
//! thread: while the cache has at most [`DriverWaits::inline_watchers_max`] watchers and
//! nothing is queued for the thread, the sender dispatches a revision itself, under the lock
//! the thread holds whenever it is not waiting for input — one thread wake-up less between a
//! write and its watchers (a healthy watcher's median delivery in-process 49-63 → 12-13 µs,
//! BENCHMARKS.md invocation BO). A message for the dispatcher (a registration, a cancel, a
//! watcher the catch-up worker hands back) is handled the same way by the mailbox's hook, on
//! the thread that sent it, instead of waking the dispatcher's thread: a wake-up that also
//! sent the revisions written meanwhile through the thread (1-2 % of them beside 100
//! reconnecting watchers, invocation BP). The dispatcher is the same state machine either
//! way; the lock only decides whose thread steps it. The catch-up worker's thread starts
//! with the first work handed to it (a watcher that stalls, a drain, a watch whose initial
//! state the worker serves): most resources never have an unsynced watcher, and a server with
//! many resources (CRDs) would otherwise keep an idle thread for each. Every piece of work
//! reaches the worker through the hook that starts or wakes it, so none waits for a thread
//! that is not there.
//!
//! ## Guarantees
//! - **Bounded input, back-pressure, no drops.** Revisions and resets reach the dispatcher
//!   through a channel of at most [`INPUT_CAPACITY`] inputs; a sender that finds it full waits
//!   ([`InputSender::send`] blocks, [`InputSender::send_async`] yields) until the dispatcher
//!   takes one. Nothing is dropped or reordered.
//! - **Progress is one high-water mark per cache**, not a message per store revision: a store
//!   revision without changes for this resource raises the cache's
//!   [`ProgressMark`](watchkeeper_core::ProgressMark) (no channel slot, and a burst of them
//!   costs the dispatcher one wake-up; none unless a consistent read or a watch from a future
//!   revision waits for it — otherwise it is applied at the next wake-up: within
//!   `dispatcher_idle` while the cache has watchers, at its next input without). The
//!   dispatcher applies a mark only after every input
//!   sent before it was raised (the mark's protocol), so progress never overtakes a revision.
//! - **One order.** A revision (or the mailbox's messages) is handled on the sender's thread
//!   only when the count of inputs sent through the channel and not yet handled is zero, read
//!   under the dispatcher's lock (the thread lowers it only after handling an input, under
//!   that lock): nothing in the channel is overtaken. The sender never waits for the lock (it takes the channel when the
//!   lock is held), nor dispatches while a legacy revision is blocked; an inline step that
//!   blocks one, or makes a timer earlier than the thread's own wake-up, wakes the thread.
//!   The mailbox's hook runs after the message is queued and holds no lock of the core, and
//!   no sender of a message holds one either (a registration, a watch's drop, the catch-up
//!   worker between its reads of the history): the inline step's own locks cannot be held by
//!   its caller. A message sent from within a step finds the dispatcher's lock taken and wakes
//!   the thread as before.
//! - **Wake-ups coalesce** and never wait: the dispatcher's mailbox and the mark wake it with a
//!   flag and a non-blocking send; when the channel is full the inputs in it wake it anyway,
//!   and every input handled drains the mailbox.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::thread::{JoinHandle, Thread};
use std::time::Duration;

use flume::{Receiver, RecvTimeoutError, Sender};

use super::wake_relay;
use watchkeeper_core::{
    CacheConfig, CatchUpWorker, Change, Dispatcher, Instant, Object, PassReport, ProgressMark,
    Revision, WatchCache,
};

/// The most revisions and resets the reflector may send ahead of a dispatcher before it waits
/// (1 s of writes at 1,000 revisions/s; the changes of each are already decoded objects the
/// cache will hold anyway). Not a tunable: it only decides when the reflector feels the
/// dispatcher's pace, never what a client sees.
pub const INPUT_CAPACITY: usize = 1_000;

/// [`DriverWaits::inline_watchers_max`]'s default: a step that pushes to at most this many
/// watchers costs some 35 µs of CPU (the dispatcher threads spent 0.13-0.14 µs per delivered
/// event at 1,000 watchers × 1,000 writes/s), short enough to run on the reflector's runtime
/// worker; larger fan-outs keep the dispatcher's own thread, where inline dispatch slowed the
/// writes (BENCHMARKS.md, invocation BO).
pub const INLINE_WATCHERS_MAX: usize = 256;

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

/// The driver's tunables (`--driver-*`): how long the threads sleep when nothing wakes them —
/// bounds on how late a timer-driven step (a deadline, a bookmark, a catch-up pass) can run
/// after its time — and when a revision is dispatched on the sender's thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DriverWaits {
    /// The dispatcher's longest wait for input while its cache has timers (watchers' bookmarks
    /// and deadlines) [default: 1 s]; also the longest a progress mark nobody waits for stays
    /// unapplied then (see `ProgressMark`). A cache without timers waits for its next input.
    pub dispatcher_idle: Duration,
    /// The dispatcher's poll for room while a legacy-mode revision is blocked on full queues
    /// [default: 1 ms].
    pub blocked_poll: Duration,
    /// The catch-up worker's longest park while it owns unsynced watchers or has work due
    /// [default: 100 ms]; an idle worker parks until it is handed work.
    pub worker_idle: Duration,
    /// A revision is dispatched on the thread that sends it (the reflector's task), and the
    /// dispatcher's mailbox handled on the thread that sends a message to it, without waking
    /// the dispatcher thread, while the cache has at most this many synced and waiting
    /// watchers and nothing is queued for the thread [default: 256, watchers; 0: always on the
    /// dispatcher thread]. See [`InputSender::send`].
    pub inline_watchers_max: usize,
}

impl Default for DriverWaits {
    fn default() -> DriverWaits {
        DriverWaits {
            dispatcher_idle: Duration::from_secs(1),
            blocked_poll: Duration::from_millis(1),
            worker_idle: Duration::from_millis(100),
            inline_watchers_max: INLINE_WATCHERS_MAX,
        }
    }
}

/// Called on the catch-up thread after every pass: its report, the wall-clock instant the pass
/// started, and how long it ran.
pub type PassHook = Box<dyn FnMut(&PassReport, std::time::Instant, Duration) + Send>;

/// Input to a dispatcher thread, as the reflector sends it through an [`InputSender`].
#[derive(Debug)]
pub enum Input {
    /// One revision's changes for this resource (no changes: as [`Input::Progress`]).
    Revision(Revision, Vec<Change>),
    /// The store reached this revision with nothing for this resource (raises the progress
    /// mark; takes no channel slot).
    Progress(Revision),
    /// The resource was (re)listed at this revision.
    Reset(Revision, Vec<Arc<Object>>),
    /// The dispatcher's mailbox or progress mark has news (the driver's own wake-up).
    Wake,
    /// The server is shutting down: end every watch, with a final bookmark at the dispatched
    /// revision for those that allow bookmarks ([`Dispatcher::handle_shutdown`]); revisions
    /// sent before it are dispatched first, later ones still applied.
    Shutdown,
    /// Stop the threads.
    Stop,
}

/// The dispatcher thread is gone (the cache stopped); the input was not delivered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stopped;

impl std::fmt::Display for Stopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the cache's dispatcher stopped")
    }
}

impl std::error::Error for Stopped {}

/// The dispatcher's input channel with a count of the inputs sent through it and not yet
/// handled (taken or not): the inline path ([`InputSender::send`]) may handle a revision on the
/// sender's thread only while that count is zero, so nothing overtakes what is in the channel.
#[derive(Clone, Debug)]
struct Channel {
    sender: Sender<Input>,
    /// Inputs sent and not yet handled by the dispatcher thread.
    queued: Arc<AtomicUsize>,
}

/// Takes back a send's count unless the send went through (a failed or abandoned send).
struct Counted<'a> {
    queued: &'a AtomicUsize,
    sent: bool,
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        if !self.sent {
            self.queued.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

impl Channel {
    fn count(&self) -> Counted<'_> {
        self.queued.fetch_add(1, Ordering::SeqCst);
        Counted {
            queued: &self.queued,
            sent: false,
        }
    }

    fn send(&self, input: Input) -> Result<(), Stopped> {
        let mut counted = self.count();
        self.sender.send(input).map_err(|_| Stopped)?;
        counted.sent = true;
        Ok(())
    }

    async fn send_async(&self, input: Input) -> Result<(), Stopped> {
        let mut counted = self.count();
        self.sender.send_async(input).await.map_err(|_| Stopped)?;
        counted.sent = true;
        Ok(())
    }

    fn try_send(&self, input: Input) -> bool {
        let mut counted = self.count();
        counted.sent = self.sender.try_send(input).is_ok();
        counted.sent
    }

    fn is_disconnected(&self) -> bool {
        self.sender.is_disconnected()
    }

    fn len(&self) -> usize {
        self.sender.len()
    }
}

/// Wakes the dispatcher thread without ever waiting: one pending wake-up at a time.
#[derive(Debug)]
struct Waker {
    pending: AtomicBool,
    input: Channel,
}

impl Waker {
    /// `pending` is true exactly while an [`Input::Wake`] is on its way: the dispatcher clears
    /// it when it takes that input, *before* it drains its mailbox, so a message queued before
    /// the clear is drained by that wake-up and one queued after it sends a new one. (It used
    /// to be cleared on any input: a Wake taken from the channel behind other inputs left it
    /// set with nothing on its way, and the next registration waited for an unrelated input —
    /// hidden while every write woke every dispatcher with progress.)
    fn wake(&self) {
        if !self.pending.swap(true, Ordering::SeqCst) && !self.input.try_send(Input::Wake) {
            // Full: the inputs queued wake the dispatcher, and each one drains the mailbox
            // and looks at the mark; a later wake-up must send again. Disconnected: nobody to
            // wake.
            self.pending.store(false, Ordering::SeqCst);
        }
    }
}

/// The dispatcher and what its thread and the inline path share, under one lock: the thread
/// holds it except while it waits for input; a sender takes it only if it is free.
struct State {
    dispatcher: Dispatcher,
    /// When the waiting thread looks at the dispatcher's timers next on its own (`None`: not
    /// before its next input). An inline step that makes an earlier timer wakes the thread.
    wakes_at: Option<Instant>,
}

/// The shared dispatcher of a [`CacheDriver`] (see [`InputSender::send`]'s inline path).
#[derive(Clone)]
struct Shared {
    state: Arc<Mutex<State>>,
    waker: Arc<Waker>,
    clock: Clock,
    /// The inline path is taken while the cache has at most this many watchers (synced and
    /// waiting; see [`DriverWaits::inline_watchers_max`]).
    inline_max: usize,
    /// Revisions dispatched on their sender's thread.
    inline_steps: Arc<std::sync::atomic::AtomicU64>,
    /// The thread is waiting for input without the lock (tests).
    #[cfg(test)]
    idle: Arc<AtomicBool>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared").finish_non_exhaustive()
    }
}

impl Shared {
    /// The dispatcher, unless a step panicked while holding it (a bug in the core): the
    /// thread then stops, as it did when it was the only one stepping the dispatcher, and
    /// sends fail with [`Stopped`] once its channel closes.
    fn lock(&self) -> Option<std::sync::MutexGuard<'_, State>> {
        self.state.lock().ok()
    }

    /// Handles a revision on the caller's thread if nothing is ahead of it (see
    /// [`step_inline`]); otherwise hands it back for the channel.
    fn try_inline(&self, input: Input) -> Result<(), Input> {
        step_inline(&self.state, &self.waker, self.clock, self.inline_max, input)?;
        self.inline_steps.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

/// Handles `input` — a revision, or [`Input::Wake`] for the messages in the dispatcher's
/// mailbox — on the caller's thread if nothing is ahead of it: no input in the channel or
/// being handled, the dispatcher's lock free, no legacy revision blocked, and few enough
/// watchers that the step is short. Otherwise hands the input back, for the channel.
fn step_inline(
    state: &Mutex<State>,
    waker: &Waker,
    clock: Clock,
    inline_max: usize,
    input: Input,
) -> Result<(), Input> {
    if !matches!(input, Input::Revision(..) | Input::Wake)
        || waker.input.queued.load(Ordering::SeqCst) != 0
    {
        return Err(input);
    }
    let mut state = match state.try_lock() {
        Ok(state) => state,
        Err(_) => return Err(input),
    };
    let dispatcher = &mut state.dispatcher;
    if waker.input.queued.load(Ordering::SeqCst) != 0
        || dispatcher.is_blocked()
        || inline_max == 0
        || dispatcher.synced_len() + dispatcher.waiting_len() > inline_max
    {
        return Err(input);
    }
    let now = clock.now();
    // The step's wake-ups of watch responses go out together at its end, as on the thread.
    wake_relay::batched(|| {
        let _ = handle_input(dispatcher, now, input);
        if dispatcher.poll_timeout().is_some_and(|at| at <= now) {
            dispatcher.handle_timeout(now);
        }
        if dispatcher.has_messages() {
            dispatcher.handle_messages(now);
        }
    });
    dispatcher.publish_progress_demand();
    let timer = dispatcher.poll_timeout();
    let wake = dispatcher.is_blocked()
        || timer.is_some_and(|at| state.wakes_at.is_none_or(|wakes| at < wakes));
    drop(state);
    if wake {
        waker.wake();
    }
    Ok(())
}

/// What the reflector holds for one cache: revisions and resets go through the bounded
/// channel (a full channel makes the sender wait), progress raises the cache's mark.
///
/// An input sender may also feed the caches of other versions of the same stored resource
/// ([`InputSender::with_view`]): each revision, list and progress it sends is converted and
/// sent to them too, so every version's cache holds the same keys at the same revisions, and
/// each event is converted (and later encoded) once per version, not once per watcher.
#[derive(Clone, Debug)]
pub struct InputSender {
    input: Channel,
    /// The dispatcher, for revisions handled on the sender's thread.
    shared: Shared,
    progress: Arc<ProgressMark>,
    views: Vec<ViewInput>,
    /// Relays of other versions converted elsewhere ([`InputSender::with_relay`]).
    relays: Vec<RelayInput>,
    /// The cache fed, to wait until it has applied what was sent ([`InputSender::applied`]).
    cache: WatchCache,
}

/// Another version's feed that converts off the reflector's path (a CRD's conversion
/// webhook, `source::webhook::conversion`): handed every revision, list and progress this
/// sender sends, in order, before this cache gets it; it must never wait.
pub type Relay = Arc<dyn Fn(&Input) + Send + Sync>;

/// A [`Relay`] fed through a sender.
#[derive(Clone)]
struct RelayInput(Relay);

impl std::fmt::Debug for RelayInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RelayInput").finish_non_exhaustive()
    }
}

/// How an object of the stored version becomes the object of a view (another version); `None`
/// when it cannot (the view's cache skips it, logged).
pub type ViewConvert = Arc<dyn Fn(&Arc<Object>) -> Option<Arc<Object>> + Send + Sync>;

/// The cache of another version fed through the same sender.
#[derive(Clone)]
struct ViewInput {
    input: InputSender,
    convert: ViewConvert,
}

impl std::fmt::Debug for ViewInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ViewInput").finish_non_exhaustive()
    }
}

impl ViewInput {
    /// `input` as the view's cache receives it: revisions and lists converted, progress as
    /// it is; the driver's own inputs (wake-up, shutdown, stop) are not forwarded.
    fn convert(&self, input: &Input) -> Option<Input> {
        let convert = |object: &Arc<Object>| (self.convert)(object);
        match input {
            Input::Revision(revision, changes) => Some(Input::Revision(
                *revision,
                changes
                    .iter()
                    .filter_map(|change| match &change.object {
                        Some(object) => convert(object).map(Change::put),
                        None => Some(change.clone()),
                    })
                    .collect(),
            )),
            Input::Progress(revision) => Some(Input::Progress(*revision)),
            Input::Reset(revision, objects) => Some(Input::Reset(
                *revision,
                objects.iter().filter_map(convert).collect(),
            )),
            Input::Wake | Input::Shutdown | Input::Stop => None,
        }
    }
}

impl InputSender {
    /// This sender, also feeding `view` (another version's cache) with objects converted by
    /// `convert`.
    #[must_use]
    pub fn with_view(mut self, view: InputSender, convert: ViewConvert) -> InputSender {
        self.views.push(ViewInput {
            input: view,
            convert,
        });
        self
    }

    /// This sender, also handing what it sends to `relay` (see [`Relay`]). Unlike a view's,
    /// a relay's cache is not waited for by [`InputSender::applied`]: it converts at its own
    /// pace, and its reads wait for their own freshness.
    #[must_use]
    pub fn with_relay(mut self, relay: Relay) -> InputSender {
        self.relays.push(RelayInput(relay));
        self
    }

    /// Routes an input: progress (and a revision without changes) to the mark, the rest to
    /// the channel. Returns the input the channel must carry, if any.
    fn route(&self, input: Input) -> Option<Input> {
        match input {
            Input::Progress(revision) => {
                self.progress.advance(revision);
                None
            }
            Input::Revision(revision, changes) if changes.is_empty() => {
                self.progress.advance(revision);
                None
            }
            Input::Revision(revision, _) | Input::Reset(revision, _) => {
                self.progress.note_sent(revision);
                Some(input)
            }
            input => Some(input),
        }
    }

    /// Sends `input`, waiting (blocking the thread) while the channel is full. For threads;
    /// async code uses [`InputSender::send_async`]. A revision is dispatched on the calling
    /// thread instead when the cache is small and idle (see the module docs); the call then
    /// returns once it is dispatched.
    ///
    /// # Errors
    /// The dispatcher stopped.
    pub fn send(&self, input: Input) -> Result<(), Stopped> {
        if self.input.is_disconnected() {
            return Err(Stopped);
        }
        for view in &self.views {
            if let Some(converted) = view.convert(&input) {
                // A stopped view (its CRD version no longer served) does not stop the others.
                let _ = view.input.send(converted);
            }
        }
        for relay in &self.relays {
            (relay.0)(&input);
        }
        match self.route(input) {
            Some(input) => match self.shared.try_inline(input) {
                Ok(()) => Ok(()),
                Err(input) => self.input.send(input),
            },
            None => Ok(()),
        }
    }

    /// Waits until the cache, and each view's that still runs, has applied every revision,
    /// reset and progress sent up to `revision`: from then on its reads serve them (taken
    /// from the channel is not enough — the dispatcher applies what it took after).
    pub async fn applied(&self, revision: Revision) {
        self.cache.wait_fresh(revision).await;
        for view in &self.views {
            if !view.input.input.is_disconnected() {
                view.input.cache.wait_fresh(revision).await;
            }
        }
    }

    /// Inputs sent and not yet taken by the dispatcher (at most [`INPUT_CAPACITY`]).
    #[must_use]
    pub fn queued(&self) -> usize {
        self.input.len()
    }

    /// [`InputSender::send_async`] of an [`Input::Progress`], which never waits: the mark of
    /// this cache and of every view raised, nothing sent on a channel. The reflector sends one
    /// to each other resource per revision (~50 per write), without an `async` call's state
    /// machine each.
    ///
    /// # Errors
    /// The dispatcher stopped.
    pub fn progress(&self, revision: Revision) -> Result<(), Stopped> {
        if self.input.is_disconnected() {
            return Err(Stopped);
        }
        for view in &self.views {
            // A stopped view (its CRD version no longer served) does not stop the others.
            let _ = view.input.progress(revision);
        }
        if !self.relays.is_empty() {
            let progress = Input::Progress(revision);
            for relay in &self.relays {
                (relay.0)(&progress);
            }
        }
        self.progress.advance(revision);
        Ok(())
    }

    /// Sends `input`, yielding while the channel is full (back-pressure on the reflector).
    ///
    /// # Errors
    /// The dispatcher stopped.
    pub async fn send_async(&self, input: Input) -> Result<(), Stopped> {
        if self.input.is_disconnected() {
            return Err(Stopped);
        }
        for view in &self.views {
            if let Some(converted) = view.convert(&input) {
                // A stopped view (its CRD version no longer served) does not stop the others.
                let _ = Box::pin(view.input.send_async(converted)).await;
            }
        }
        for relay in &self.relays {
            (relay.0)(&input);
        }
        match self.route(input) {
            Some(input) => match self.shared.try_inline(input) {
                Ok(()) => Ok(()),
                Err(input) => self.input.send_async(input).await,
            },
            None => Ok(()),
        }
    }
}

/// One resource's cache and the threads that drive it.
#[derive(Debug)]
pub struct CacheDriver {
    /// The cache handle.
    pub cache: WatchCache,
    input: InputSender,
    stop: Arc<AtomicBool>,
    worker: Arc<WorkerSlot>,
    threads: Vec<JoinHandle<()>>,
}

/// The catch-up worker's thread: not started until the first work reaches the worker's hook.
#[derive(Debug)]
struct WorkerSlot {
    /// The running thread, for the hook's wake-up without the lock.
    thread: OnceLock<Thread>,
    state: Mutex<WorkerState>,
}

enum WorkerState {
    /// Not started: what the thread will run, and its name.
    Idle(Box<WorkerStart>, String),
    Running(JoinHandle<()>),
    Stopped,
}

impl std::fmt::Debug for WorkerState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            WorkerState::Idle(..) => "Idle",
            WorkerState::Running(_) => "Running",
            WorkerState::Stopped => "Stopped",
        })
    }
}

/// What the catch-up thread runs.
struct WorkerStart {
    worker: CatchUpWorker,
    stop: Arc<AtomicBool>,
    clock: Clock,
    waits: DriverWaits,
    on_pass: Option<PassHook>,
}

impl WorkerSlot {
    /// The worker's hook: wakes its thread, starting it on the first call. A thread that cannot
    /// be started is logged and tried again at the next call (its worker is kept).
    fn notify(self: &Arc<Self>) {
        if let Some(thread) = self.thread.get() {
            thread.unpark();
            return;
        }
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        match std::mem::replace(&mut *state, WorkerState::Stopped) {
            WorkerState::Running(handle) => {
                handle.thread().unpark();
                *state = WorkerState::Running(handle);
            }
            WorkerState::Stopped => {}
            WorkerState::Idle(start, name) => {
                // The start goes to the thread through a cell, so a failed spawn keeps it.
                let cell = Arc::new(Mutex::new(Some(start)));
                let taken = cell.clone();
                let slot = Arc::downgrade(self);
                let spawned = std::thread::Builder::new()
                    .name(name.clone())
                    // Moves shared objects and drops them flat: no deep walk.
                    .stack_size(watchkeeper_core::stack::CACHE_THREAD_STACK)
                    .spawn(move || {
                        let start = taken.lock().unwrap_or_else(PoisonError::into_inner).take();
                        if let (Some(start), Some(slot)) = (start, slot.upgrade()) {
                            // Reachable by the hook before the first look at the worker's
                            // state, so an idle worker may park without a timeout.
                            let _ = slot.thread.set(std::thread::current());
                            drop(slot);
                            let WorkerStart {
                                worker,
                                stop,
                                clock,
                                waits,
                                on_pass,
                            } = *start;
                            run_worker(worker, &stop, clock, waits, on_pass);
                        }
                    });
                match spawned {
                    Ok(handle) => {
                        let _ = self.thread.set(handle.thread().clone());
                        *state = WorkerState::Running(handle);
                    }
                    Err(error) => {
                        tracing::error!(thread = %name, %error, "cannot start a catch-up thread; retrying at the next hand-off");
                        let start = cell.lock().unwrap_or_else(PoisonError::into_inner).take();
                        if let Some(start) = start {
                            *state = WorkerState::Idle(start, name);
                        }
                    }
                }
            }
        }
    }

    /// Stops the thread, if it started, and waits for it (`stop` is already raised).
    fn stop(&self) {
        let state = std::mem::replace(
            &mut *self.state.lock().unwrap_or_else(PoisonError::into_inner),
            WorkerState::Stopped,
        );
        if let WorkerState::Running(handle) = state {
            handle.thread().unpark();
            let _ = handle.join();
        }
    }

    /// Whether the thread has started (tests).
    #[cfg(test)]
    fn started(&self) -> bool {
        self.thread.get().is_some()
    }
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
        /// `dispatcher` (a catch-up thread that cannot start is logged and retried).
        thread: &'static str,
        /// The spawn error.
        #[source]
        source: std::io::Error,
    },
}

impl CacheDriver {
    /// Starts the dispatcher thread of a cache named `name`; its catch-up thread starts with
    /// the first work handed to the worker.
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
        let (sender, receiver) = flume::bounded(INPUT_CAPACITY);
        let input = Channel {
            sender,
            queued: Arc::new(AtomicUsize::new(0)),
        };
        let stop = Arc::new(AtomicBool::new(false));
        let waker = Arc::new(Waker {
            pending: AtomicBool::new(false),
            input: input.clone(),
        });
        let progress = cache.progress_mark();
        let wake = waker.clone();
        progress.set_notify(Box::new(move || wake.wake()));
        let state = Arc::new(Mutex::new(State {
            dispatcher,
            wakes_at: None,
        }));
        // A message for the dispatcher (a registration, a cancel, a watcher the catch-up
        // worker hands back) is handled on its sender's thread as a small idle cache's
        // revision is; otherwise the hook wakes the thread. Weak: the mailbox lives in the
        // dispatcher the hook steps.
        let (hook_state, wake) = (Arc::downgrade(&state), waker.clone());
        let inline_max = waits.inline_watchers_max;
        state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .dispatcher
            .set_notify(Box::new(move || {
                let handled = hook_state.upgrade().is_some_and(|state| {
                    step_inline(&state, &wake, clock, inline_max, Input::Wake).is_ok()
                });
                if !handled {
                    wake.wake();
                }
            }));
        let shared = Shared {
            state,
            waker,
            clock,
            inline_max,
            inline_steps: Arc::default(),
            #[cfg(test)]
            idle: Arc::default(),
        };
        let input = InputSender {
            input,
            shared: shared.clone(),
            progress: progress.clone(),
            views: Vec::new(),
            relays: Vec::new(),
            cache: cache.clone(),
        };
        let slot = Arc::new(WorkerSlot {
            thread: OnceLock::new(),
            state: Mutex::new(WorkerState::Idle(
                Box::new(WorkerStart {
                    worker,
                    stop: stop.clone(),
                    clock,
                    waits,
                    on_pass,
                }),
                format!("catchup-{name}"),
            )),
        });
        let hook = Arc::downgrade(&slot);
        if let WorkerState::Idle(start, _) =
            &*slot.state.lock().unwrap_or_else(PoisonError::into_inner)
        {
            start.worker.set_notify(Box::new(move || {
                if let Some(slot) = hook.upgrade() {
                    slot.notify();
                }
            }));
        }
        let dispatcher_stop = stop.clone();
        let dispatcher_handle = std::thread::Builder::new()
            .name(format!("dispatch-{name}"))
            // Moves shared objects and drops them flat: no deep walk.
            .stack_size(watchkeeper_core::stack::CACHE_THREAD_STACK)
            .spawn(move || {
                let inputs = Inputs {
                    receiver,
                    progress,
                    stop: dispatcher_stop,
                };
                run_dispatcher(&shared, &inputs, waits);
            })
            .map_err(|source| DriverError::Thread {
                thread: "dispatcher",
                source,
            })?;
        Ok(CacheDriver {
            cache,
            input,
            stop,
            worker: slot,
            threads: vec![dispatcher_handle],
        })
    }

    /// A sender for the reflector.
    #[must_use]
    pub fn sender(&self) -> InputSender {
        self.input.clone()
    }

    /// Revisions dispatched on their sender's thread so far (the rest went through the
    /// dispatcher's thread).
    #[must_use]
    pub fn inline_steps(&self) -> u64 {
        self.input.shared.inline_steps.load(Ordering::SeqCst)
    }

    /// Ends every watch of this cache after what it was owed, with a final bookmark at the
    /// dispatched revision for those that allow bookmarks (see [`Input::Shutdown`]); the
    /// threads keep running (writes in flight still wait for the cache).
    pub async fn end_watches(&self) {
        let _ = self.input.send_async(Input::Shutdown).await;
    }

    /// Stops both threads and waits for them.
    pub fn shutdown(&mut self) {
        self.stop.store(true, Ordering::Release);
        let _ = self.input.input.send(Input::Stop);
        self.worker.stop();
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

/// The dispatcher thread's side of its inputs.
struct Inputs {
    receiver: Receiver<Input>,
    progress: Arc<ProgressMark>,
    stop: Arc<AtomicBool>,
}

fn run_dispatcher(shared: &Shared, inputs: &Inputs, waits: DriverWaits) {
    let clock = shared.clock;
    let queued = &shared.waker.input.queued;
    // A progress mark taken but not applied yet, and how many inputs must still be taken from
    // the channel before it applies: those that were in it when the mark was taken (every
    // revision at or below the mark was sent before it was raised, and the channel is FIFO).
    let mut mark: Revision = 0;
    let mut owed: usize = 0;
    // An input taken from the channel after an inline step left a legacy revision blocked:
    // handled once that revision is done (still counted as queued, so nothing overtakes it).
    let mut held: Option<Input> = None;
    let Some(mut state) = shared.lock() else {
        return;
    };
    loop {
        if state.dispatcher.is_blocked() {
            // Legacy mode waits on consumers: inputs stay in the channel (the reflector feels
            // the back-pressure); poll for room often.
            if inputs.stop.load(Ordering::Acquire) {
                return;
            }
            let wait = state
                .dispatcher
                .poll_timeout()
                .map_or(waits.blocked_poll, |at| clock.until(at))
                .min(waits.blocked_poll);
            drop(state);
            std::thread::sleep(wait);
            let Some(locked) = shared.lock() else {
                return;
            };
            state = locked;
            let now = clock.now();
            let dispatcher = &mut state.dispatcher;
            dispatcher.retry_blocked(now);
            if dispatcher.poll_timeout().is_some_and(|at| at <= now) {
                dispatcher.handle_timeout(now);
            }
            continue;
        }
        // A store revision without changes for this resource wakes this thread only while a
        // reader or a waiting watch needs it (see `ProgressMark`); otherwise the mark is
        // applied at the next wake-up: while the cache has timers (its watchers' bookmarks and
        // deadlines), at the latest after `dispatcher_idle`; without any, at its next input
        // (a revision, a registration, a demand). A cache nobody watches costs no wake-ups:
        // its resource version is what it last dispatched or was asked to prove, which is all
        // a read at "any" version may get (kube-apiserver's cacher likewise moves a resource
        // version only on events and progress it asked for).
        let input = if let Some(input) = held.take() {
            Ok(Some(input))
        } else {
            state.dispatcher.publish_progress_demand();
            let timer = state.dispatcher.poll_timeout();
            state.wakes_at = timer;
            // The lock is free while the thread waits: a sender may handle a revision
            // itself then (`Shared::try_inline`).
            drop(state);
            #[cfg(test)]
            shared.idle.store(true, Ordering::SeqCst);
            let input = match timer {
                Some(at) => {
                    match inputs
                        .receiver
                        .recv_timeout(clock.until(at).min(waits.dispatcher_idle))
                    {
                        Ok(input) => Ok(Some(input)),
                        Err(RecvTimeoutError::Timeout) => Ok(None),
                        Err(RecvTimeoutError::Disconnected) => Err(()),
                    }
                }
                None => inputs.receiver.recv().map(Some).map_err(|_| ()),
            };
            #[cfg(test)]
            shared.idle.store(false, Ordering::SeqCst);
            let Some(locked) = shared.lock() else {
                return;
            };
            state = locked;
            input
        };
        let Ok(mut input) = input else {
            return;
        };
        if inputs.progress.is_pending() {
            mark = mark.max(inputs.progress.take());
            owed = inputs.receiver.len() + usize::from(input.is_some());
        }
        loop {
            if let Some(next) = input.take() {
                if state.dispatcher.is_blocked() && !matches!(next, Input::Stop) {
                    // An inline step blocked: this input (a revision, or the wake-up that
                    // step sent) waits for the blocked revision.
                    held = Some(next);
                    break;
                }
                owed = owed.saturating_sub(1);
                if matches!(next, Input::Wake) {
                    // From here on a wake-up sends again; what it announces is drained now.
                    shared.waker.pending.store(false, Ordering::SeqCst);
                }
                // One input's wake-ups of watch responses go out together when it is
                // handled, in bulk through the relay when there are many (`wake_relay`).
                let now = clock.now();
                let dispatcher = &mut state.dispatcher;
                let stop = wake_relay::batched(|| handle_input(dispatcher, now, next));
                queued.fetch_sub(1, Ordering::SeqCst);
                if stop {
                    return;
                }
            }
            if owed == 0 || state.dispatcher.is_blocked() {
                break;
            }
            match inputs.receiver.try_recv() {
                Ok(next) => input = Some(next),
                Err(_) => {
                    // Only this thread takes from the channel: everything that was in it
                    // when the mark was taken has been handled.
                    owed = 0;
                    break;
                }
            }
        }
        let now = clock.now();
        let dispatcher = &mut state.dispatcher;
        wake_relay::batched(|| {
            if mark > 0 && owed == 0 && !dispatcher.is_blocked() {
                dispatcher.handle_progress(now, std::mem::take(&mut mark));
            }
            if dispatcher.poll_timeout().is_some_and(|at| at <= now) {
                dispatcher.handle_timeout(now);
            }
            if dispatcher.has_messages() {
                // Belt and braces: never wait with a message in the mailbox.
                dispatcher.handle_messages(now);
            }
        });
    }
}

/// Handles one input (never called while a legacy revision is blocked). Returns whether to
/// stop.
fn handle_input(dispatcher: &mut Dispatcher, now: Instant, input: Input) -> bool {
    match input {
        Input::Stop => return true,
        Input::Wake => dispatcher.handle_messages(now),
        Input::Revision(revision, changes) => {
            if changes.is_empty() {
                dispatcher.handle_progress(now, revision);
            } else {
                let _ = dispatcher.handle_revision(now, revision, changes);
            }
        }
        Input::Progress(revision) => dispatcher.handle_progress(now, revision),
        Input::Reset(revision, objects) => dispatcher.handle_reset(now, revision, objects),
        Input::Shutdown => dispatcher.handle_shutdown(now),
    }
    false
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
                // A pass wakes the watch responses it filled in bulk (see `wake_relay`).
                let report = wake_relay::batched(|| worker.run_pass(now));
                let elapsed = started.elapsed();
                worker.record_pass_duration(elapsed);
                if let Some(hook) = &mut on_pass {
                    hook(&report, started, elapsed);
                }
            }
            Some(at) => std::thread::park_timeout(clock.until(at).min(waits.worker_idle)),
            // Nothing unsynced, nothing handed over, no drain: the next work arrives through
            // the mailbox or the drain signal, whose hook unparks this thread (a park token
            // set before the park returns at once), and shutdown unparks it. An idle cache's
            // worker costs no wake-ups (it woke every `worker_idle`: ten times a second for
            // each of the ~30 resources, about 3 % of the server's CPU at 100 watchers ×
            // 100 writes/s).
            None => std::thread::park(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use watchkeeper_core::{Pop, WatchItem, WatchMode, WatchRequest, WatchStart};

    use super::*;

    fn pod(name: &str, revision: Revision) -> Arc<Object> {
        Arc::new(Object::new(
            "ns",
            name,
            BTreeMap::new(),
            BTreeMap::new(),
            revision,
            serde_json::json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": "ns"}}),
        ))
    }

    fn wait_dispatched(cache: &WatchCache, revision: Revision) -> Revision {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
            .block_on(cache.wait_fresh(revision))
    }

    fn events(watch: &watchkeeper_core::Watch) -> Vec<Revision> {
        let mut out = Vec::new();
        while let Pop::Item(item) = watch.try_pop() {
            if let WatchItem::Event { event, .. } = item {
                out.push(event.revision());
            }
        }
        out
    }

    /// Goal: at most one `Input::Wake` is on its way at a time, and a wake-up that finds the
    /// channel full does not leave the flag set with nothing on its way (the next wake-up,
    /// once there is room, sends again: nothing waits for an unrelated input).
    #[test]
    fn a_wake_that_finds_the_channel_full_sends_again_later() {
        let (sender, receiver) = flume::bounded(1);
        let waker = Waker {
            pending: AtomicBool::new(false),
            input: Channel {
                sender,
                queued: Arc::new(AtomicUsize::new(0)),
            },
        };
        waker.wake();
        waker.wake();
        assert_eq!(receiver.len(), 1, "one Wake on its way, not two");
        assert!(waker.pending.load(Ordering::SeqCst));
        // The dispatcher takes it (and clears the flag, as `run_dispatcher` does), then the
        // channel fills with something else.
        assert!(matches!(receiver.try_recv(), Ok(Input::Wake)));
        waker.pending.store(false, Ordering::SeqCst);
        assert!(waker.input.try_send(Input::Progress(1)), "room");
        waker.wake();
        assert!(
            !waker.pending.load(Ordering::SeqCst),
            "a Wake that could not be sent is not on its way"
        );
        assert!(matches!(receiver.try_recv(), Ok(Input::Progress(1))));
        waker.wake();
        assert!(matches!(receiver.try_recv(), Ok(Input::Wake)));
    }

    /// Goal: progress is a mark, not a message: a store revision without changes takes no
    /// channel slot, and the mark never overtakes a revision (the cache ends at the last
    /// revision, every change delivered once, in order).
    #[test]
    fn progress_raises_the_mark_and_never_overtakes_a_revision() {
        let clock = Clock::new();
        let mut driver = CacheDriver::start("pods", CacheConfig::default(), clock).expect("driver");
        let cache = driver.cache.clone();
        let sender = driver.sender();
        for revision in 1..=100 {
            // The reflector's way (`progress`) and the channel's (`send`) alike.
            if revision % 2 == 0 {
                sender.progress(revision).expect("sent");
            } else {
                sender.send(Input::Progress(revision)).expect("sent");
            }
            // At most the one coalesced wake-up is in the channel.
            assert!(sender.queued() <= 1, "progress took channel slots");
        }
        assert_eq!(wait_dispatched(&cache, 100), 100);
        let mut request = WatchRequest::new(WatchStart::Now);
        request.queue_capacity = Some(1_000);
        let watch = cache.watch(request, clock.now());
        wait_registered(&cache);
        let mut changed = Vec::new();
        for revision in 101..=700 {
            if revision % 3 == 0 {
                sender.send(Input::Progress(revision)).expect("sent");
            } else {
                let change = Change::put(pod(&format!("p{}", revision % 7), revision));
                sender
                    .send(Input::Revision(revision, vec![change]))
                    .expect("sent");
                changed.push(revision);
            }
        }
        sender.progress(705).expect("sent");
        assert_eq!(wait_dispatched(&cache, 705), 705);
        assert_eq!(cache.revision(), 705);
        assert_eq!(events(&watch), changed);
        driver.shutdown();
        assert_eq!(sender.send(Input::Progress(706)), Err(Stopped));
        assert_eq!(sender.progress(707), Err(Stopped));
    }

    /// Goal: a store revision with nothing for this resource wakes the dispatcher only when
    /// someone waits for it — and then it does, at once: a watch from a future revision and a
    /// consistent reader are served by progress alone, with the idle wake-up an hour away.
    #[test]
    fn progress_wakes_the_dispatcher_for_a_waiting_watch_and_reader() {
        let clock = Clock::new();
        let waits = DriverWaits {
            dispatcher_idle: Duration::from_secs(3_600),
            ..DriverWaits::default()
        };
        let mut driver =
            CacheDriver::start_with("pods", CacheConfig::default(), clock, waits).expect("driver");
        let cache = driver.cache.clone();
        let sender = driver.sender();
        sender.send(Input::Progress(10)).expect("sent");
        assert!(
            !cache.progress_mark().is_demanded(),
            "nobody waits: the mark stays silent"
        );
        // A reader needs revision 10: its demand wakes the dispatcher for the pending mark.
        assert_eq!(wait_dispatched(&cache, 10), 10);
        // A watch from revision 50 waits for the cache; progress to 60 starts it.
        let mut request = WatchRequest::new(WatchStart::After(50));
        request.queue_capacity = Some(100);
        let watch = cache.watch(request, clock.now());
        sender.send(Input::Progress(60)).expect("sent");
        // Bounded, not timed: without the waiting watch's demand it starts only at the idle
        // wake-up an hour away.
        let give_up = std::time::Instant::now() + Duration::from_secs(60);
        while cache.metrics().synced_watchers.get() < 1 {
            assert!(
                std::time::Instant::now() < give_up,
                "progress did not start the waiting watch"
            );
            std::thread::yield_now();
        }
        let change = Change::put(pod("p", 61));
        sender
            .send(Input::Revision(61, vec![change]))
            .expect("sent");
        assert_eq!(wait_dispatched(&cache, 61), 61);
        assert_eq!(events(&watch), vec![61]);
        driver.shutdown();
    }

    /// Goal: the input is bounded and applies back-pressure, never drops: while a legacy-mode
    /// revision is blocked on a full queue, the channel fills to its bound and the sender
    /// waits; once the consumer reads, every revision is delivered in order.
    #[test]
    fn a_full_input_makes_the_sender_wait_and_drops_nothing() {
        let config = CacheConfig {
            mode: WatchMode::Legacy,
            legacy_budget_max: Duration::from_secs(3_600),
            ..CacheConfig::default()
        };
        let clock = Clock::new();
        let mut driver = CacheDriver::start("pods", config, clock).expect("driver");
        let cache = driver.cache.clone();
        let mut request = WatchRequest::new(WatchStart::Now);
        request.queue_capacity = Some(10);
        let watch = cache.watch(request, clock.now());
        wait_registered(&cache);
        let sender = driver.sender();
        let total = (INPUT_CAPACITY + 20) as Revision;
        let writer = std::thread::spawn(move || {
            for revision in 1..=total {
                let change = Change::put(pod("p", revision));
                sender
                    .send(Input::Revision(revision, vec![change]))
                    .expect("sent");
            }
        });
        let probe = driver.sender();
        // The watcher's queue fills, the dispatcher blocks, and the channel fills behind it.
        while probe.queued() < INPUT_CAPACITY {
            std::thread::yield_now();
        }
        assert!(!writer.is_finished(), "the writer waits for room");
        let mut seen = Vec::new();
        while seen.last() != Some(&total) {
            seen.extend(events(&watch));
            std::thread::yield_now();
        }
        writer.join().expect("writer");
        assert_eq!(seen, (1..=total).collect::<Vec<_>>(), "nothing dropped");
        driver.shutdown();
    }

    /// Goal: the catch-up thread starts with the first stall, not before; an idle catch-up
    /// worker parks without a timeout and is woken by what hands it work. A watcher that
    /// stalls on a cache whose worker owns nothing (its timed park an hour away) is caught up,
    /// and so is one that stalls again after the worker went idle.
    #[test]
    fn an_idle_worker_is_woken_by_a_stall_not_by_a_timer() {
        let clock = Clock::new();
        let waits = DriverWaits {
            worker_idle: Duration::from_secs(3_600),
            ..DriverWaits::default()
        };
        let mut driver =
            CacheDriver::start_with("pods", CacheConfig::default(), clock, waits).expect("driver");
        let cache = driver.cache.clone();
        let mut request = WatchRequest::new(WatchStart::Now);
        request.queue_capacity = Some(2);
        let watch = cache.watch(request, clock.now());
        wait_registered(&cache);
        assert!(
            !driver.worker.started(),
            "no catch-up thread before anything is handed to the worker"
        );
        let sender = driver.sender();
        let mut revision = 0;
        let mut expected = Vec::new();
        for round in 0..2 {
            // Five revisions into a queue of two: the watcher stalls, the worker serves it.
            for _ in 0..5 {
                revision += 1;
                let change = Change::put(pod("p", revision));
                sender
                    .send(Input::Revision(revision, vec![change]))
                    .expect("sent");
                expected.push(revision);
            }
            assert_eq!(wait_dispatched(&cache, revision), revision);
            // Bounded, not timed: without the stall's wake-up the worker sleeps an hour.
            let give_up = std::time::Instant::now() + Duration::from_secs(60);
            let mut seen = Vec::new();
            while seen.len() < 5 {
                assert!(
                    std::time::Instant::now() < give_up,
                    "round {round}: the idle worker was not woken (got {seen:?})"
                );
                seen.extend(events(&watch));
                std::thread::yield_now();
            }
            assert_eq!(seen, expected[expected.len() - 5..], "round {round}");
            assert!(
                cache.metrics().watcher_stalls.get() > round,
                "round {round} stalled"
            );
            assert!(driver.worker.started(), "the stall started the thread");
            // Resynced, the worker owns nothing and goes back to its untimed park.
            while cache.metrics().synced_watchers.get() < 1 {
                assert!(
                    std::time::Instant::now() < give_up,
                    "round {round}: not resynced"
                );
                std::thread::yield_now();
            }
        }
        driver.shutdown();
    }

    /// Goal: a small idle cache's revision is dispatched by its sender (no thread hand-off),
    /// and with `inline_watchers_max` 0 never: `send` returns with the event already in the
    /// watch's queue. The thread may hold the lock for a moment after a registration, so a
    /// send can still take the channel; a hundred sends, each after the thread went idle,
    /// must not all do.
    #[test]
    fn a_small_idle_cache_dispatches_on_the_sender_s_thread() {
        for (inline_max, inline) in [(INLINE_WATCHERS_MAX, true), (0, false)] {
            let clock = Clock::new();
            let waits = DriverWaits {
                inline_watchers_max: inline_max,
                ..DriverWaits::default()
            };
            let mut driver = CacheDriver::start_with("pods", CacheConfig::default(), clock, waits)
                .expect("driver");
            let cache = driver.cache.clone();
            let watch = cache.watch(WatchRequest::new(WatchStart::Now), clock.now());
            wait_registered(&cache);
            let sender = driver.sender();
            let mut seen = Vec::new();
            for revision in 1..=100 {
                sender
                    .send(Input::Revision(
                        revision,
                        vec![Change::put(pod("p", revision))],
                    ))
                    .expect("sent");
                if driver.inline_steps() == revision {
                    assert_eq!(
                        cache.dispatched(),
                        revision,
                        "dispatched before send returned"
                    );
                }
                wait_dispatched(&cache, revision);
                seen.extend(events(&watch));
            }
            assert_eq!(
                seen,
                (1..=100).collect::<Vec<_>>(),
                "every event once, in order"
            );
            if inline {
                assert!(
                    driver.inline_steps() > 0,
                    "no revision was dispatched inline"
                );
            } else {
                assert_eq!(driver.inline_steps(), 0, "inline with the path off");
            }
            driver.shutdown();
        }
    }

    /// Goal: revisions dispatched by the sender never overtake inputs queued for the thread.
    /// The test holds the dispatcher's lock now and then (as the thread does while it works),
    /// so the writer's next revisions take the channel, and registrations from this thread
    /// keep waking the dispatcher through it; in between, revisions are dispatched inline.
    /// Every watch sees each revision from its start once, in order, with no gap.
    #[test]
    fn inline_and_queued_revisions_keep_one_order() {
        let clock = Clock::new();
        let mut driver = CacheDriver::start("pods", CacheConfig::default(), clock).expect("driver");
        let cache = driver.cache.clone();
        let shared = driver.input.shared.clone();
        let sender = driver.sender();
        // The thread, idle with nothing to time, waits without the lock: the first revision
        // is dispatched inline.
        wait_idle(&driver);
        sender
            .send(Input::Revision(1, vec![Change::put(pod("p", 1))]))
            .expect("sent");
        assert_eq!(
            driver.inline_steps(),
            1,
            "an idle cache's revision went inline"
        );
        let total: Revision = 3_000;
        let go = Arc::new(AtomicBool::new(false));
        let writer = std::thread::spawn({
            let go = go.clone();
            move || {
                while !go.load(Ordering::SeqCst) {
                    std::thread::yield_now();
                }
                for revision in 2..=total {
                    sender
                        .send(Input::Revision(
                            revision,
                            vec![Change::put(pod("p", revision))],
                        ))
                        .expect("sent");
                    std::thread::yield_now();
                }
            }
        });
        let probe = driver.sender();
        let mut watches = Vec::new();
        let mut holds = 0;
        // Bounded, not timed: a dispatcher that died leaves the writer waiting for room.
        let give_up = std::time::Instant::now() + Duration::from_secs(60);
        while !writer.is_finished() {
            assert!(
                std::time::Instant::now() < give_up,
                "the writer never finished"
            );
            if holds < 20 {
                let state = shared.lock().expect("not poisoned");
                go.store(true, Ordering::SeqCst);
                while probe.queued() == 0 && !writer.is_finished() {
                    std::thread::yield_now();
                }
                drop(state);
                holds += 1;
            }
            if watches.len() < 100 {
                let mut request = WatchRequest::new(WatchStart::Now);
                request.allow_bookmarks = false;
                watches.push((cache.watch(request, clock.now()), Vec::new()));
            }
            for (watch, seen) in &mut watches {
                seen.extend(events(watch));
            }
        }
        writer.join().expect("writer");
        while cache.dispatched() < total {
            assert!(std::time::Instant::now() < give_up, "not all dispatched");
            std::thread::yield_now();
        }
        // A watch that stalled may still be being caught up.
        let mut checked = 0;
        for (watch, mut seen) in watches {
            seen.extend(events(&watch));
            while !seen.is_empty() && seen.last() != Some(&total) {
                assert!(
                    std::time::Instant::now() < give_up,
                    "a watch missed the end"
                );
                std::thread::yield_now();
                seen.extend(events(&watch));
            }
            if let Some(&first) = seen.first() {
                assert_eq!(
                    seen,
                    (first..=total).collect::<Vec<_>>(),
                    "a gap or a reorder"
                );
                checked += 1;
            }
        }
        assert!(checked > 0, "no watch saw a revision");
        assert!(
            driver.inline_steps() < total,
            "the held lock sent revisions through the channel"
        );
        driver.shutdown();
    }

    /// Goal: a step that panics on the sender's thread (a bug in the core: here a revision
    /// sent twice) stops the cache as a panic on the dispatcher's thread did: later sends
    /// fail with `Stopped` instead of stepping a dispatcher left half-way.
    #[test]
    fn a_panic_in_an_inline_step_stops_the_cache() {
        let clock = Clock::new();
        let mut driver = CacheDriver::start("pods", CacheConfig::default(), clock).expect("driver");
        let sender = driver.sender();
        wait_idle(&driver);
        let revision = |n: Revision| Input::Revision(n, vec![Change::put(pod("p", n))]);
        sender.send(revision(1)).expect("sent");
        assert_eq!(driver.inline_steps(), 1);
        let again =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sender.send(revision(1))));
        assert!(again.is_err(), "a revision sent twice panics in the core");
        // Bounded, not timed: the thread stops at its next look at the dispatcher.
        let give_up = std::time::Instant::now() + Duration::from_secs(60);
        let mut next = 2;
        while sender.send(revision(next)) != Err(Stopped) {
            assert!(
                std::time::Instant::now() < give_up,
                "the cache never stopped"
            );
            assert_eq!(
                driver.inline_steps(),
                1,
                "nothing is dispatched inline after a panic"
            );
            next += 1;
            std::thread::yield_now();
        }
        driver.shutdown();
    }

    /// Goal: a small idle cache's registration and cancel are handled by the thread that
    /// makes them (the mailbox's hook, no thread hand-off): the watcher is synced before
    /// `watch` returns and gone before the drop returns; with `inline_watchers_max` 0 the
    /// dispatcher's thread handles both, and the cache dispatches either way.
    #[test]
    fn a_small_idle_cache_registers_and_cancels_a_watch_on_the_caller_s_thread() {
        for (inline_max, inline) in [(INLINE_WATCHERS_MAX, true), (0, false)] {
            let clock = Clock::new();
            // No timer wakes the idle thread (an hour's idle wake-up, watches without
            // bookmarks): only the hook's wake-up can take the dispatcher from the caller.
            let waits = DriverWaits {
                inline_watchers_max: inline_max,
                dispatcher_idle: Duration::from_secs(3_600),
                ..DriverWaits::default()
            };
            let mut driver = CacheDriver::start_with("pods", CacheConfig::default(), clock, waits)
                .expect("driver");
            let cache = driver.cache.clone();
            let synced = || cache.metrics().synced_watchers.get();
            let request = || {
                let mut request = WatchRequest::new(WatchStart::Now);
                request.allow_bookmarks = false;
                request
            };
            for round in 0..20 {
                wait_idle(&driver);
                let watch = cache.watch(request(), clock.now());
                if inline {
                    assert_eq!(
                        synced(),
                        1,
                        "round {round}: registered before watch returned"
                    );
                }
                wait_registered(&cache);
                wait_idle(&driver);
                drop(watch);
                if inline {
                    assert_eq!(synced(), 0, "round {round}: cancelled before drop returned");
                }
                while synced() > 0 {
                    std::thread::yield_now();
                }
            }
            // Either way the cache still dispatches, inline or not.
            let watch = cache.watch(request(), clock.now());
            wait_registered(&cache);
            wait_idle(&driver);
            driver
                .sender()
                .send(Input::Revision(1, vec![Change::put(pod("p", 1))]))
                .expect("sent");
            wait_dispatched(&cache, 1);
            assert_eq!(events(&watch), vec![1]);
            assert_eq!(
                driver.inline_steps(),
                u64::from(inline),
                "the revision inline only with the path on"
            );
            driver.shutdown();
        }
    }

    /// Waits until the dispatcher thread waits for input with nothing queued: the next
    /// revision sent is dispatched inline.
    fn wait_idle(driver: &CacheDriver) {
        let shared = &driver.input.shared;
        while !shared.idle.load(Ordering::SeqCst) || driver.input.queued() > 0 {
            std::thread::yield_now();
        }
    }

    fn wait_registered(cache: &WatchCache) {
        while cache.metrics().synced_watchers.get() < 1 {
            std::thread::yield_now();
        }
    }
}

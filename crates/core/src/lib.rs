//! # watchkeeper-core
//!
//! The sans-IO heart of watchkeeper: a versioned in-memory cache of one resource's objects, fed
//! by one upstream stream of revisions, that fans events out to many watchers so that a slow
//! watcher never delays a healthy one and is never terminated while the history still holds
//! what it needs (KEP-6268, target design).
//!
//! ## Data flow
//! store → reflector → [`Dispatcher::handle_revision`] → history and snapshots → live dispatch
//! to synced watchers' [`WatchQueue`]s → clients. A watcher whose queue is full becomes
//! unsynced and moves to the [`CatchUpWorker`], which has its consumer refill it from the
//! history (or serves it in shared, bounded passes, [`CatchUpDesign`]) and hands it back to the
//! dispatcher when it reaches the present.
//!
//! ## Guarantees (named as etcd's robustness tests name them)
//! - **Ordered**: a watcher receives events in revision order, and within a revision in the
//!   store's order.
//! - **Unique**: no event is delivered twice to a watcher, across any number of stalls and
//!   resyncs.
//! - **Atomic**: a revision's events that a watcher selects are queued together; no resume
//!   point (position, bookmark, 410) falls inside a revision.
//! - **Reliable**: from its start until it ends, a watcher receives every event it selects, with
//!   no gap; the only alternative is an honest in-stream 410 when the history no longer holds
//!   what it needs, delivered after its backlog.
//! - **Resumable**: a watch started after the last revision (event or bookmark) a client saw
//!   continues exactly where the old one stopped, as long as the history holds it.
//! - **Bookmarkable**: a bookmark's revision is at or above every event delivered before it and
//!   resuming from it loses nothing; no bookmark is sent while a watcher is unsynced, so no
//!   bookmark ever moves a client's resource version backwards.
//!
//! Every checker of these guarantees names a violation with one [`Guarantee`], which also names
//! what a client of the server can check on top of them (initial state, selection, honest 410,
//! linearizable reads, durability).
//!
//! ## Overload
//! - A watcher that cannot keep up is never waited for and never force-closed for a full queue
//!   (stall-resume mode). It costs the live path one failed push, then nothing until it
//!   resyncs. Its memory is bounded by its queue; the events it is owed stay in the shared
//!   history.
//! - Catch-up work follows the work that can be done, not the unsynced population: by default
//!   an unsynced watcher's own consumer refills its queue from the shared history as fast as it
//!   reads (events keep their cached encodings), and the worker only finds expiries, deadlines
//!   and timeouts through indexes, streams initial states and hands watchers back; a watcher
//!   that never reads costs nothing after its stall. Passes are bounded (members, scan units,
//!   pushes) and paced to about a tenth of a core; the dispatcher pays only for the final
//!   hand-off of the last few events.
//! - A watcher slower than the write rate eventually ages out of the history window and gets
//!   one 410 (`resource_expired`); a watch stuck in its initial phase is ended after
//!   `initial_no_progress_timeout` without progress (`initial_no_progress`).
//! - Memory: every object's decoded weight is estimated once when it is built
//!   ([`weight`], [`Object::weight`]); the history is bounded in those bytes, and caches that
//!   share a [`metrics::MemoryAccount`] count their live objects and histories in it, their
//!   histories trimming to a shared budget (the server refuses writes past its bound).
//! - [`WatchMode::Legacy`] reproduces Kubernetes' pre-KEP behaviour for comparison.
//!
//! ## Driving contract
//! The core reads no clock, spawns no threads and uses no randomness; every input carries
//! `now` ([`Instant`]), every timer is reported by a `poll_timeout` query, and iteration order
//! is deterministic. Three parties drive it:
//! - the **reflector** calls [`Dispatcher::handle_revision`], [`Dispatcher::handle_progress`]
//!   and [`Dispatcher::handle_reset`] (through whatever thread owns the dispatcher);
//! - the **dispatcher's driver** also calls [`Dispatcher::handle_messages`] when the mailbox
//!   hook ([`Dispatcher::set_notify`]) fires and [`Dispatcher::handle_timeout`] at
//!   [`Dispatcher::poll_timeout`];
//! - the **worker's driver** calls [`CatchUpWorker::run_pass`] at
//!   [`CatchUpWorker::poll_timeout`] (woken early by [`CatchUpWorker::set_notify`]) and reports
//!   the pass's duration with [`CatchUpWorker::record_pass_duration`].
//!
//! Readers and watch registration go through the cloneable [`WatchCache`] handle from any
//! thread. The server runs the dispatcher and the worker on their own threads; the simulator
//! and the tests step both from one thread with a virtual clock. The code is the same.

pub mod cache;
pub mod catchup;
pub mod config;
pub mod dispatcher;
pub mod event;
pub mod gonum;
pub mod gotext;
pub mod guarantee;
pub mod history;
pub mod metrics;
pub mod object;
pub mod order;
pub mod pointer;
pub mod queue;
pub mod request;
pub mod selector;
pub mod snapshot;
pub mod stack;
mod sync;
pub mod time;
pub mod watcher;
pub mod weight;

#[cfg(all(test, watchkeeper_loom))]
mod loom_models;

pub use cache::{HistoryInfo, HistoryLag, ProgressMark, ReadError, WaitFresh, Watch, WatchCache};
pub use catchup::{CatchUpWorker, PassReport, check_invariants};
pub use config::{CacheConfig, CandidateOrder, CatchUpDesign, ConfigError, WatchMode};
pub use dispatcher::{Change, DispatchReport, Dispatcher};
pub use event::{Event, EventKind, EventType, SharedEvent, WatchItem};
pub use guarantee::Guarantee;
pub use metrics::Metrics;
pub use object::{
    Attributes, EncodeStats, Encoding, ExternalEncoder, Object, Revision, object_key,
};
pub use queue::{
    Pop, PushResult, TerminationReason, WatchEnd, WatchQueue, WatcherProgress, WatcherState,
};
pub use request::{WatchRequest, WatchStart, WatcherId};
pub use selector::{FieldSelector, LabelSelector, Lookup, SelectorError};
pub use snapshot::Snapshot;
pub use time::Instant;

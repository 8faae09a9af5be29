//! The per-watcher state that moves between the dispatcher and the catch-up worker (what a
//! watch asks for and selects: [`crate::request`]).

use std::sync::Arc;

use crate::object::Revision;
use crate::queue::WatchQueue;
use crate::request::{Selection, WatcherId};
use crate::snapshot::Snapshot;
use crate::time::Instant;

/// Streaming progress through a watch's initial state.
#[derive(Debug)]
pub(crate) struct InitialPhase {
    /// The state being streamed; pinned until the phase ends.
    pub(crate) snapshot: Snapshot,
    /// The last key pushed, so the next pass resumes after it.
    pub(crate) after_key: Option<Arc<str>>,
}

/// One watcher's state. Owned by exactly one actor at a time: the dispatcher while synced or
/// waiting to start, the catch-up worker while unsynced; it moves between them by message.
#[derive(Debug)]
pub(crate) struct Watcher {
    pub(crate) id: WatcherId,
    pub(crate) queue: Arc<WatchQueue>,
    pub(crate) selection: Arc<Selection>,
    pub(crate) allow_bookmarks: bool,
    pub(crate) deadline: Option<Instant>,
    /// Every selected event with a revision at or below this has been queued, and every
    /// selected event above it is still to be offered. For a synced watcher the dispatcher
    /// keeps it at the last dispatched revision lazily (it is exact again on a stall).
    pub(crate) position: Revision,
    /// The revision of the last item queued (events or bookmarks): a bookmark is only sent
    /// above it, so the client's resource version never moves backwards.
    pub(crate) last_sent: Revision,
    /// Whether the watcher ever reached the live stream (picks the 410 reason).
    pub(crate) reached_live: bool,
    /// Events pushed by passes since it went unsynced (`watcher_catchup_events`).
    pub(crate) catchup_events: u64,
    /// Present while the initial state is being streamed.
    pub(crate) initial: Option<InitialPhase>,
    /// Whether the initial-events-end bookmark is still owed (after the initial state).
    pub(crate) initial_bookmark_owed: bool,
    /// Still in the initial phase (initial state or history replay before first resync).
    pub(crate) in_initial_phase: bool,
    /// When it last accepted an item while in its initial phase.
    pub(crate) last_progress: Instant,
    /// When it went unsynced (for operators and the simulator).
    pub(crate) unsynced_since: Instant,
    /// Catch-up passes that found it with room but did not serve it.
    pub(crate) passes_waited: u64,
    /// Marked by the worker when it is new to the unsynced set.
    pub(crate) fresh_stall: bool,
    /// Set when the watcher's cache epoch ended (a relist); it must get a 410.
    pub(crate) epoch: u64,
}

//! What an operator looks at: the debug API and page (`/debug/*`, `/ui/`, see [`debug`]) and
//! `/metrics` (see [`metrics`]). Both only read: they see the server through [`Observed`],
//! a set of borrowed views the HTTP layer hands them, and never change what a watcher gets.

pub mod debug;
pub mod metrics;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::cache::Clock;
use crate::limits::Limits;
use crate::source::Source;
use crate::source::feed::ReflectorStatus;
use crate::source::read::PathCounters;

/// What the operator view reads.
#[derive(Clone, Debug)]
pub struct Observed<'a> {
    /// The watch mode's name (`stall-resume`, `legacy`).
    pub mode: &'a str,
    /// The clock shared with the caches.
    pub clock: Clock,
    /// Served resources (the registry's view when the operator view was taken).
    pub resources: Arc<crate::cache::Served>,
    /// Open watch streams.
    pub watches: &'a WatchRegistry,
    /// The reflector's status.
    pub reflector: &'a ReflectorStatus,
    /// The operator view's own counters and timeline.
    pub debug: &'a debug::DebugState,
    /// Read and write path counters.
    pub counters: &'a PathCounters,
    /// Request counts and latencies.
    pub requests: &'a metrics::RequestMetrics,
    /// Request limits' state.
    pub limits: &'a Limits,
    /// The heavy requests' pool.
    pub offload: &'a crate::offload::Offload,
    /// The source (store counters, upstream traffic).
    pub source: &'a Source,
    /// The cache consistency checker's counts.
    pub consistency: &'a crate::source::consistency::ConsistencyChecker,
    /// The store compaction rounds' outcomes.
    pub compaction: &'a crate::source::compaction::CompactionCounters,
    /// The garbage collector, when it runs.
    pub garbage_collector: Option<&'a crate::controllers::garbage_collector::GarbageCollector>,
    /// The audit log's counters, when it is on.
    pub audit: Option<&'a crate::audit::Audit>,
    /// The encryption configuration's reloads, when they are on.
    pub encryption_reload: Option<&'a crate::source::encryption_reload::Reloading>,
}

/// An open watch stream, for `/debug/watchers`.
#[derive(Debug, Clone)]
pub struct WatchInfo {
    /// Resource plural (with group).
    pub resource: String,
    /// Namespace scope.
    pub namespace: Option<String>,
    /// Label selector as sent.
    pub label_selector: String,
    /// Field selector as sent.
    pub field_selector: String,
    /// Client user agent.
    pub user_agent: String,
    /// The authenticated user's name.
    pub user: String,
    /// When it started (core clock).
    pub started: watchkeeper_core::Instant,
    /// The queue (state, fill, position).
    pub queue: Arc<watchkeeper_core::WatchQueue>,
    /// The client's address, when the transport reports it.
    pub client: Option<std::net::SocketAddr>,
}

/// The open watch streams by stream id.
#[derive(Debug, Default)]
pub struct WatchRegistry {
    watches: Mutex<BTreeMap<u64, WatchInfo>>,
    next: AtomicU64,
}

impl WatchRegistry {
    /// Registers an open watch stream; returns its id.
    pub fn register(&self, info: WatchInfo) -> u64 {
        let id = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        self.lock().insert(id, info);
        id
    }

    /// Forgets a watch stream.
    pub fn unregister(&self, id: u64) {
        self.lock().remove(&id);
    }

    /// The streams (watch registration waits while this is held).
    pub fn lock(&self) -> MutexGuard<'_, BTreeMap<u64, WatchInfo>> {
        self.watches
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

//! What the reflector works with: the feeds of the caches, the status it reports, and what a
//! source's list and watch yield ([`Listed`], [`Item`], [`Stop`]).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::time::Duration;

use watchkeeper_api::ResourceDef;
use watchkeeper_core::{Change, Object, Revision};

use crate::cache::InputSender;

/// What the reflector feeds for one resource.
#[derive(Debug)]
pub struct Feed {
    /// The resource.
    pub def: ResourceDef,
    /// Its key prefix below the registry prefix, with a trailing slash (`pods/`).
    pub storage_prefix: String,
    /// The resource's dispatcher thread (bounded: a send waits while it is behind).
    pub input: InputSender,
    /// A custom resource's storage version's schema, applied to every object read from the
    /// store ([`crate::source::decode::decode_stored`]); `None` for the built-in kinds.
    pub read_schema: Option<Arc<serde_json::Value>>,
    /// Objects read from the store keep the `apiVersion` they were stored at, no schema
    /// applied ([`crate::source::decode::decode_stored_as_stored`]): a CRD's objects stored
    /// at earlier versions, converted by its webhook on their way to the caches
    /// (`webhook::conversion`).
    pub as_stored: bool,
}

/// What the reflector tells of every object it feeds the caches (the garbage collector's
/// graph, [`crate::controllers::garbage_collector`]; the RBAC index, [`crate::auth::rbac`],
/// in both modes). Called on the reflector's task before
/// the caches have the revision: quick, and never waits. A custom resource started (a CRD
/// established, or its resource started again) is reset once it is served, and before any
/// of its changes is told: a look the reset queues finds the resource served.
pub trait Observer: Send + Sync + std::fmt::Debug {
    /// A resource's cache is (re)initialised with `objects` at `revision`.
    fn reset(&self, def: &ResourceDef, revision: Revision, objects: &[Arc<Object>]);
    /// One revision's changes for one resource.
    fn changes(&self, def: &ResourceDef, revision: Revision, changes: &[Change]);
}

/// Shared reflector status.
#[derive(Debug, Default)]
pub struct ReflectorStatus {
    /// Set once every cache has loaded its first list.
    pub ready: AtomicBool,
    /// The newest store revision the reflector has seen (store modes).
    pub store_revision: AtomicU64,
    /// Lists done (the first and every relist).
    pub lists: AtomicU64,
    /// Objects decoded from store values.
    pub decodes: AtomicU64,
    /// Objects of a watch's puts decoded from the value their writer handed over instead of
    /// from the stored bytes (see [`crate::source::handover`]).
    pub handovers: AtomicU64,
    /// Store values that could not be decoded (skipped, logged).
    pub decode_errors: AtomicU64,
}

/// The retry back-off of the reflector (`--reflector-backoff-*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    /// The first delay, and the delay again after a watch made progress.
    pub initial: Duration,
    /// The longest delay.
    pub max: Duration,
}

impl Backoff {
    /// The delay after `delay`: twice as long, at most [`Backoff::max`].
    #[must_use]
    pub fn next(&self, delay: Duration) -> Duration {
        (delay * 2).min(self.max)
    }
}

/// A delay between half and all of `base`.
#[must_use]
pub fn jitter(base: Duration) -> Duration {
    base.mul_f64(rand::random::<f64>() * 0.5 + 0.5)
}

/// Why a list or watch stopped.
#[derive(Debug)]
pub enum Stop {
    /// The resume point is gone (compaction, 410) or the stream broke the rules: relist now.
    Relist(String),
    /// A transient failure: resume from the last revision, after a back-off unless the watch
    /// made progress.
    Resume(String),
    /// A failure the source does not resume from: relist after a back-off.
    Restart(String),
}

/// A complete list at one revision.
pub struct Listed {
    /// The revision of the list.
    pub revision: Revision,
    /// The objects of each feed, in the order of the feeds.
    pub objects: Vec<Vec<Arc<Object>>>,
    /// When the list is older than the source (history rebuilding): the source's revision
    /// when it was taken, which the watch must replay up to before the caches count as
    /// loaded; otherwise the list's own revision.
    pub ready_at: Revision,
}

/// One item of a watch.
pub enum Item {
    /// One revision's changes, by feed index (feeds without changes get progress).
    Changes(Revision, BTreeMap<usize, Vec<Change>>),
    /// The source reached this revision with no change for these feeds.
    Progress(Revision),
    /// The watch stopped.
    Stopped(Stop),
}

//! Errors as values: one enum per operation, all convertible into [`StoreError`].
//!
//! Messages are short and lowercase so callers can embed them (`"range failed: {e}"`).

use bytes::Bytes;

/// A failure of the storage medium itself, common to every operation.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BackendError {
    /// The backend cannot be reached right now (etcd down, connection lost); retrying may
    /// help.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// The backend failed in a way retrying will not fix (disk error, corrupt data).
    #[error("storage error: {0}")]
    Storage(String),
}

/// A failed [`range`](crate::Store::range) or
/// [`current_revision`](crate::Store::current_revision).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RangeError {
    /// The requested revision is below the compaction floor.
    #[error("revision {requested} is compacted (compaction floor is {compact_revision})")]
    Compacted {
        /// The revision asked for.
        requested: u64,
        /// The oldest readable revision (for etcd: found by a probe; at least
        /// `requested + 1` if the probe fails).
        compact_revision: u64,
    },
    /// The requested revision does not exist yet.
    #[error("revision {requested} is in the future (current revision is {current})")]
    FutureRevision {
        /// The revision asked for.
        requested: u64,
        /// The current revision.
        current: u64,
    },
    /// See [`BackendError`].
    #[error(transparent)]
    Backend(#[from] BackendError),
}

/// A failed [`txn`](crate::Store::txn). A compare that does not hold is not an error:
/// it is `TxnResponse { succeeded: false, .. }`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TxnError {
    /// Two ops of one transaction write the same key.
    #[error("duplicate key in transaction: {0:?}")]
    DuplicateKey(Bytes),
    /// The store is full: the transaction puts, and applying it would take the store above
    /// its quota (see [`crate::quota`]), or etcd refused it for its own quota (etcd's
    /// `ErrNoSpace`, whose wording this is). From the memory and embedded stores nothing of
    /// it was applied; etcd may have applied it anyway (it checks its quota before a write and
    /// again when applying it, and the second check only raises its alarm: etcd's maintenance
    /// guide), as kube-apiserver over etcd may answer this for a write that happened.
    #[error("mvcc: database space exceeded")]
    NoSpace,
    /// See [`BackendError`].
    #[error(transparent)]
    Backend(#[from] BackendError),
}

/// A failed [`watch`](crate::Store::watch), or the reason a watch stream ended with
/// [`WatchItem::Failed`](crate::WatchItem::Failed).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WatchError {
    /// The store was closed or dropped.
    #[error("store closed")]
    Closed,
    /// See [`BackendError`].
    #[error(transparent)]
    Backend(#[from] BackendError),
}

/// A failed [`compact`](crate::Store::compact).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CompactError {
    /// The store is already compacted at or above the requested revision.
    #[error("revision {requested} is already compacted (compaction floor is {compact_revision})")]
    AlreadyCompacted {
        /// The revision asked for.
        requested: u64,
        /// The current compaction floor (for etcd: at least `requested`).
        compact_revision: u64,
    },
    /// The requested revision does not exist yet.
    #[error("cannot compact future revision {requested} (current revision is {current})")]
    FutureRevision {
        /// The revision asked for.
        requested: u64,
        /// The current revision.
        current: u64,
    },
    /// See [`BackendError`].
    #[error(transparent)]
    Backend(#[from] BackendError),
}

/// A store could not be opened or its configuration is invalid.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OpenError {
    /// A configuration value is out of range.
    #[error("invalid store config: {0}")]
    InvalidConfig(String),
    /// See [`BackendError`].
    #[error(transparent)]
    Backend(#[from] BackendError),
}

/// Any store error.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// See [`RangeError`].
    #[error("range failed: {0}")]
    Range(#[from] RangeError),
    /// See [`TxnError`].
    #[error("txn failed: {0}")]
    Txn(#[from] TxnError),
    /// See [`WatchError`].
    #[error("watch failed: {0}")]
    Watch(#[from] WatchError),
    /// See [`CompactError`].
    #[error("compaction failed: {0}")]
    Compact(#[from] CompactError),
    /// See [`OpenError`].
    #[error("open failed: {0}")]
    Open(#[from] OpenError),
}

pub(crate) fn storage(e: impl std::fmt::Display) -> BackendError {
    BackendError::Storage(e.to_string())
}

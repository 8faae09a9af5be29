//! Request, response and event types shared by every backend.
//!
//! Revisions are etcd's: one global, strictly increasing `u64` counter. Every transaction
//! that changes at least one key creates exactly one new revision, shared by all of its
//! events. Revision `0` is never a real revision; in requests it means "the latest".

use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;

/// One version of one key, as etcd's `mvccpb.KeyValue`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyValue {
    /// The key, raw bytes.
    pub key: Bytes,
    /// The value, raw bytes. Empty for a deletion tombstone.
    pub value: Bytes,
    /// Revision at which the key was (last) created; `0` in a deletion tombstone.
    pub create_revision: u64,
    /// Revision of the change that produced this version.
    pub mod_revision: u64,
    /// Number of writes since creation: `1` for a fresh key; `0` in a deletion tombstone.
    pub version: u64,
}

/// What a change did to a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// The key was created or overwritten.
    Put,
    /// The key was deleted.
    Delete,
}

/// One change to one key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// Put or delete.
    pub kind: EventKind,
    /// The key after the change. For a delete this is etcd's tombstone: the key, an empty
    /// value, `mod_revision` = the deleting revision, `create_revision` = `version` = 0.
    pub kv: KeyValue,
    /// The key before the change; `None` when the key did not exist (a create). The etcd
    /// backend can also leave it `None` when etcd had already compacted the old version.
    pub prev_kv: Option<KeyValue>,
}

impl Event {
    /// The revision of this change (`kv.mod_revision`).
    pub fn revision(&self) -> u64 {
        self.kv.mod_revision
    }
}

/// Which keys a range read or a watch covers.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum KeySelector {
    /// Exactly this key.
    Key(Bytes),
    /// Every key starting with these bytes (an empty prefix selects every key).
    Prefix(Bytes),
}

impl KeySelector {
    /// A single key.
    pub fn key(key: impl Into<Bytes>) -> Self {
        Self::Key(key.into())
    }

    /// Every key with this prefix.
    pub fn prefix(prefix: impl Into<Bytes>) -> Self {
        Self::Prefix(prefix.into())
    }
}

/// Where a paged range read continues from (a Kubernetes `continue` token decodes to this).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum StartKey {
    /// Start at this key, including it.
    Inclusive(Bytes),
    /// Start just after this key (the last key of the previous page).
    Exclusive(Bytes),
}

/// A range read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RangeRequest {
    /// The keys to read.
    pub keys: KeySelector,
    /// The revision to read at; `0` means the latest.
    pub revision: u64,
    /// The most key-values to return; `0` means no limit.
    pub limit: usize,
    /// Continue a paged read from this key (intersected with `keys`).
    pub start: Option<StartKey>,
}

impl RangeRequest {
    /// Read one key at the latest revision.
    pub fn key(key: impl Into<Bytes>) -> Self {
        Self::new(KeySelector::key(key))
    }

    /// Read every key with this prefix at the latest revision.
    pub fn prefix(prefix: impl Into<Bytes>) -> Self {
        Self::new(KeySelector::prefix(prefix))
    }

    /// Read the selected keys at the latest revision, without limit.
    pub fn new(keys: KeySelector) -> Self {
        Self {
            keys,
            revision: 0,
            limit: 0,
            start: None,
        }
    }

    /// Read at `revision` (`0` = latest).
    #[must_use]
    pub fn at_revision(mut self, revision: u64) -> Self {
        self.revision = revision;
        self
    }

    /// Return at most `limit` key-values (`0` = no limit).
    #[must_use]
    pub fn with_limit(mut self, limit: usize) -> Self {
        self.limit = limit;
        self
    }

    /// Continue from `start`.
    #[must_use]
    pub fn starting(mut self, start: StartKey) -> Self {
        self.start = Some(start);
        self
    }
}

/// The result of a range read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RangeResponse {
    /// Matching live key-values in ascending key order.
    pub kvs: Vec<KeyValue>,
    /// True when `limit` cut the result short and more keys match.
    pub more: bool,
    /// The revision the read was served at (the requested one, or the latest).
    pub revision: u64,
}

/// A condition of a transaction. All conditions of a transaction must hold (AND).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Compare {
    /// The key exists and its `mod_revision` equals `revision`.
    ModRevision {
        /// The key to check.
        key: Bytes,
        /// The expected `mod_revision`.
        revision: u64,
    },
    /// The key does not exist (etcd: `create_revision == 0`).
    Absent {
        /// The key to check.
        key: Bytes,
    },
    /// The key exists (etcd: `create_revision > 0`).
    Present {
        /// The key to check.
        key: Bytes,
    },
}

impl Compare {
    /// The key this condition looks at.
    pub fn key(&self) -> &Bytes {
        match self {
            Compare::ModRevision { key, .. }
            | Compare::Absent { key }
            | Compare::Present { key } => key,
        }
    }

    /// Whether the condition holds for the key's current version (`None` = absent).
    pub fn holds(&self, current: Option<&KeyValue>) -> bool {
        match self {
            Compare::ModRevision { revision, .. } => {
                current.is_some_and(|kv| kv.mod_revision == *revision)
            }
            Compare::Absent { .. } => current.is_none(),
            Compare::Present { .. } => current.is_some(),
        }
    }
}

/// A write inside a transaction.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TxnOp {
    /// Create or overwrite a key.
    Put {
        /// The key.
        key: Bytes,
        /// The new value.
        value: Bytes,
    },
    /// Delete a key. Deleting a missing key is a no-op (no event).
    Delete {
        /// The key.
        key: Bytes,
    },
}

impl TxnOp {
    /// The key this operation writes.
    pub fn key(&self) -> &Bytes {
        match self {
            TxnOp::Put { key, .. } | TxnOp::Delete { key } => key,
        }
    }
}

/// An etcd-style transaction: if every compare holds, apply every op at one new revision.
///
/// A key may appear in at most one op (etcd rejects duplicates the same way).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TxnRequest {
    /// Conditions, ANDed. Empty means "always".
    pub compares: Vec<Compare>,
    /// Writes applied when every condition holds.
    pub success: Vec<TxnOp>,
    /// Never refused by the memory and embedded stores' quota: for the server's own
    /// bookkeeping that is bounded by construction (see [`crate::quota`]); never for a
    /// client's write. etcd ignores it (its own quota applies to everything).
    pub quota_exempt: bool,
}

impl TxnRequest {
    /// An unconditional put of one key.
    pub fn put(key: impl Into<Bytes>, value: impl Into<Bytes>) -> Self {
        Self {
            compares: Vec::new(),
            success: vec![TxnOp::Put {
                key: key.into(),
                value: value.into(),
            }],
            quota_exempt: false,
        }
    }

    /// An unconditional delete of one key.
    pub fn delete(key: impl Into<Bytes>) -> Self {
        Self {
            compares: Vec::new(),
            success: vec![TxnOp::Delete { key: key.into() }],
            quota_exempt: false,
        }
    }

    /// Add a condition.
    #[must_use]
    pub fn when(mut self, compare: Compare) -> Self {
        self.compares.push(compare);
        self
    }

    /// Add a write.
    #[must_use]
    pub fn then(mut self, op: TxnOp) -> Self {
        self.success.push(op);
        self
    }

    /// Mark the transaction [`quota_exempt`](Self::quota_exempt).
    #[must_use]
    pub fn exempt_from_quota(mut self) -> Self {
        self.quota_exempt = true;
        self
    }
}

/// The result of a transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnResponse {
    /// Whether every compare held (and the ops were applied).
    pub succeeded: bool,
    /// On success with changes: the new revision of this transaction. Otherwise (failure,
    /// or success that changed nothing): the current revision the transaction was
    /// evaluated at.
    pub revision: u64,
    /// On success: the events this transaction produced, in op order (a delete of a
    /// missing key produces none). Empty on failure.
    pub events: Vec<Event>,
    /// On failure: each compared key (in compare order) with its current version, `None`
    /// when absent. Empty on success.
    pub current: Vec<(Bytes, Option<KeyValue>)>,
}

/// One item of a watch stream.
///
/// `Compacted` and `Failed` are terminal: the stream ends after them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WatchItem {
    /// Every selected event of one revision, never split across items, in op order.
    Revision {
        /// The revision shared by all `events`.
        revision: u64,
        /// The events (at least one).
        events: Vec<Event>,
    },
    /// Every selected change with revision `<= revision` has been delivered.
    Progress {
        /// The revision the watch has caught up to.
        revision: u64,
    },
    /// The watch needed revisions that are compacted away. Terminal: restart from a fresh
    /// read (`range` at latest), then watch from its revision + 1.
    Compacted {
        /// The next revision the watch needed.
        requested: u64,
        /// The store's compaction floor (oldest readable revision).
        compact_revision: u64,
    },
    /// The watch cannot continue (store closed, backend error). Terminal.
    Failed(crate::WatchError),
}

/// Operation counts, for benchmarks and metrics. All counters are monotonic.
#[derive(Debug, Default)]
pub struct StoreCounters {
    ranges: AtomicU64,
    txns: AtomicU64,
    txn_conflicts: AtomicU64,
    watches: AtomicU64,
    compactions: AtomicU64,
}

/// A copy of [`StoreCounters`] at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CounterSnapshot {
    /// Range reads served (including failed ones).
    pub ranges: u64,
    /// Transactions attempted.
    pub txns: u64,
    /// Transactions whose compares failed.
    pub txn_conflicts: u64,
    /// Watches opened.
    pub watches: u64,
    /// Compactions performed (requested or automatic).
    pub compactions: u64,
}

impl StoreCounters {
    /// Read every counter (each individually atomic; not a consistent cut).
    pub fn snapshot(&self) -> CounterSnapshot {
        CounterSnapshot {
            ranges: self.ranges.load(Ordering::Relaxed),
            txns: self.txns.load(Ordering::Relaxed),
            txn_conflicts: self.txn_conflicts.load(Ordering::Relaxed),
            watches: self.watches.load(Ordering::Relaxed),
            compactions: self.compactions.load(Ordering::Relaxed),
        }
    }

    pub(crate) fn range(&self) {
        self.ranges.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn txn(&self) {
        self.txns.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn conflict(&self) {
        self.txn_conflicts.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn watch(&self) {
        self.watches.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn compaction(&self) {
        self.compactions.fetch_add(1, Ordering::Relaxed);
    }
}

/// The half-open key interval `[lo, hi)` a selector plus start key covers (`hi = None`:
/// unbounded). Used by every backend so they agree on the exact set of keys.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct KeyBounds {
    pub(crate) lo: Bytes,
    pub(crate) hi: Option<Bytes>,
}

impl KeyBounds {
    pub(crate) fn new(keys: &KeySelector, start: Option<&StartKey>) -> Self {
        let (mut lo, hi) = match keys {
            KeySelector::Key(k) => (k.clone(), Some(successor(k))),
            KeySelector::Prefix(p) => (p.clone(), prefix_end(p)),
        };
        match start {
            Some(StartKey::Inclusive(s)) if *s > lo => lo = s.clone(),
            Some(StartKey::Exclusive(s)) if *s >= lo => lo = successor(s),
            _ => {}
        }
        Self { lo, hi }
    }

    pub(crate) fn contains(&self, key: &[u8]) -> bool {
        key >= self.lo.as_ref() && self.hi.as_ref().is_none_or(|hi| key < hi.as_ref())
    }

    /// True when no key can match.
    pub(crate) fn is_empty(&self) -> bool {
        self.hi.as_ref().is_some_and(|hi| *hi <= self.lo)
    }
}

/// The smallest key greater than `key`: `key + [0]`.
pub(crate) fn successor(key: &[u8]) -> Bytes {
    let mut v = Vec::with_capacity(key.len() + 1);
    v.extend_from_slice(key);
    v.push(0);
    v.into()
}

/// The smallest key greater than every key with this prefix, `None` when unbounded
/// (empty prefix, or all `0xff`), as etcd's `GetPrefixRangeEnd`.
pub(crate) fn prefix_end(prefix: &[u8]) -> Option<Bytes> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end.into());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_end_matches_etcd() {
        assert_eq!(prefix_end(b"a"), Some(Bytes::from_static(b"b")));
        assert_eq!(prefix_end(b"a\xff"), Some(Bytes::from_static(b"b")));
        assert_eq!(prefix_end(b"\xff\xff"), None);
        assert_eq!(prefix_end(b""), None);
    }

    #[test]
    fn bounds_with_start() {
        let b = KeyBounds::new(
            &KeySelector::prefix("p/"),
            Some(&StartKey::Exclusive("p/b".into())),
        );
        assert!(!b.contains(b"p/b"));
        assert!(b.contains(b"p/b\0"));
        assert!(b.contains(b"p/c"));
        assert!(!b.contains(b"q"));
        let k = KeyBounds::new(
            &KeySelector::key("k"),
            Some(&StartKey::Exclusive("k".into())),
        );
        assert!(k.is_empty());
    }
}

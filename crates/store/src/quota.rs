//! The store quota of the memory and embedded backends: a bound on the bytes they hold, as
//! etcd's `--quota-backend-bytes` bounds etcd's.
//!
//! # Guarantees
//!
//! - **Bounded.** A transaction with at least one put that would take the accounted size
//!   (below) above the quota is refused, whole, with [`TxnError::NoSpace`]: none of its ops
//!   is applied, it takes no revision, no watch sees anything of it. So, but for the
//!   exemptions below, the accounted size never exceeds the quota. `0` means no quota.
//! - **Overload.** A full store keeps serving: reads, watches, compare failures, deletes and
//!   compaction all work. Writes with a put are refused until deletes plus a compaction have
//!   freed room, then they succeed again; nothing is lost or half-written in between. This
//!   is etcd's `NOSPACE` behaviour (`etcdserver: mvcc: database space exceeded`), except that
//!   here a compaction frees room at once (etcd also needs a defragmentation and the alarm
//!   disarmed).
//! - **Never refused.**
//!   - A transaction whose changes are all deletions: deleting is how an operator frees
//!     space. Its tombstones and log entry still count, so deletes can take the size above
//!     the quota, but only boundedly: over the quota no put succeeds, so each such delete
//!     consumes one live key, and the bytes a delete adds (its tombstone, and a log entry
//!     holding the key and the previous value) are about those of the key it consumes. The
//!     size stays below about twice the quota.
//!   - A transaction that changes nothing (a compare failed; only deletes of missing keys):
//!     it writes nothing.
//!   - A transaction marked [`TxnRequest::quota_exempt`]: the server's own bookkeeping, which
//!     is bounded by construction. Two callers set it: the compactor's round (one small put
//!     of `<prefix>/compact_rev_key` per interval, each followed by a compaction that frees
//!     the previous rounds' versions, so a full store can still be compacted — without the
//!     exemption the round's put would be refused and nothing would ever free the log), and
//!     the start-up objects (a fixed few KiB, written only where absent, so a full store can
//!     still be restarted). The exemption is a flag on the request rather than a list of
//!     keys because the start-up objects live at ordinary resource keys.
//!   - Compaction itself, which only frees.
//! - **O(1) per write.** The size is a counter: a transaction adds the bytes it writes
//!   (computed from its events, never by reading the tables), a compaction subtracts the bytes
//!   it removes (it visits them anyway). The embedded store keeps the counter in its `meta`
//!   table, in the same redb transaction as the writes it counts, so it survives restarts and
//!   crashes exactly; a database from before the quota has it computed once at open.
//!
//! # What counts
//!
//! What compaction frees: every retained version of every key (live values, older versions,
//! tombstones) and every retained revision's change-log entry (its events with their previous
//! values), in the bytes the embedded store writes to its `kv` and `log` tables (keys, values
//! and fixed-size headers; not redb's page overhead or free pages). The memory store counts the
//! same bytes (it shares value buffers between its index and log, so it uses less memory than
//! it counts). A create of a `v`-byte value at a `k`-byte key therefore costs about `2(k + v)`
//! plus 60 bytes: the version and the log entry.
//!
//! etcd applies its own quota (`--quota-backend-bytes`, 2 GiB by default) to its database
//! file; the etcd backend maps its refusal to the same [`TxnError::NoSpace`] and ignores
//! [`TxnRequest::quota_exempt`]. etcd's refusal is weaker: a write it refuses may have been
//! applied anyway (its apply-time check only raises the alarm), a full etcd refuses every put
//! until an operator compacts, defragments and disarms the alarm, and its compaction round's
//! put is refused too.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::{Event, EventKind, KeyValue, TxnError, TxnRequest};

/// The default quota: etcd's default `--quota-backend-bytes`, 2 GiB.
pub const DEFAULT_QUOTA_BYTES: u64 = 2 << 30;

/// A store's quota and usage at one moment (see [`crate::Store::quota_usage`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QuotaUsage {
    /// The accounted size in bytes (see the [module docs](crate::quota)).
    pub used_bytes: u64,
    /// The quota in bytes; `0` means none.
    pub quota_bytes: u64,
    /// Transactions refused with [`TxnError::NoSpace`] since the store was opened.
    pub refusals: u64,
}

/// The quota and the accounted size of one store. Only its writer changes `used` (under the
/// store's lock, so a load then a store is not a race); anyone may read it.
#[derive(Debug)]
pub(crate) struct Meter {
    quota: u64,
    used: AtomicU64,
    refusals: AtomicU64,
}

impl Meter {
    pub(crate) fn new(quota: u64, used: u64) -> Meter {
        Meter {
            quota,
            used: AtomicU64::new(used),
            refusals: AtomicU64::new(0),
        }
    }

    /// The accounted size.
    pub(crate) fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    /// Sets the accounted size (the writer, after committing what changed it).
    pub(crate) fn set(&self, used: u64) {
        self.used.store(used, Ordering::Relaxed);
    }

    /// Admits the revision of `events` (planned for `req`, at least one event) on a store
    /// holding `used` bytes: the size after it, or [`TxnError::NoSpace`] (counted).
    pub(crate) fn admit(
        &self,
        used: u64,
        req: &TxnRequest,
        events: &[Event],
    ) -> Result<u64, TxnError> {
        let after = used.saturating_add(revision_bytes(events));
        let puts = events.iter().any(|e| e.kind == EventKind::Put);
        if self.quota != 0 && after > self.quota && puts && !req.quota_exempt {
            self.refusals.fetch_add(1, Ordering::Relaxed);
            return Err(TxnError::NoSpace);
        }
        Ok(after)
    }

    pub(crate) fn usage(&self) -> QuotaUsage {
        QuotaUsage {
            used_bytes: self.used(),
            quota_bytes: self.quota,
            refusals: self.refusals.load(Ordering::Relaxed),
        }
    }
}

/// The bytes one version of a key holds (`None`: a deletion tombstone): the key, the
/// revision, and the encoded version (a tag; for a put, create revision, version and value).
/// Exactly the embedded store's `kv` entry.
pub(crate) fn version_bytes(key: &[u8], version: Option<&KeyValue>) -> u64 {
    let encoded = match version {
        None => 1,
        Some(kv) => 17 + kv.value.len(),
    };
    (key.len() + 8 + encoded) as u64
}

/// The bytes one revision's change-log entry holds: the revision, an event count, and per
/// event its kind, key, value, create revision and version, and its previous value with
/// that one's revisions. Exactly the embedded store's `log` entry.
pub(crate) fn log_bytes(events: &[Event]) -> u64 {
    let events: usize = events
        .iter()
        .map(|e| {
            let prev = e.prev_kv.as_ref().map_or(0, |p| 4 + p.value.len() + 24);
            1 + 4 + e.kv.key.len() + 4 + e.kv.value.len() + 16 + 1 + prev
        })
        .sum();
    (8 + 4 + events) as u64
}

/// The bytes a revision of `events` adds: one version per event and its log entry.
pub(crate) fn revision_bytes(events: &[Event]) -> u64 {
    let versions: u64 = events
        .iter()
        .map(|e| {
            let version = (e.kind == EventKind::Put).then_some(&e.kv);
            version_bytes(&e.kv.key, version)
        })
        .sum();
    versions + log_bytes(events)
}

//! Freshness nudges: a write under the registry prefix that makes the reflector's own watch
//! report the store's revision, for an etcd whose revision moved on without a change under
//! the prefix.
//!
//! A cache proves itself fresh for revision `R` (a consistent read, a write's final refusal,
//! the end of a restart's history replay) when it has dispatched `R`. Over etcd the
//! reflector watches only the registry prefix, so revisions written elsewhere in the same
//! etcd (another program, a sibling server with another `--etcd-prefix`) reach it only as
//! etcd's progress notifications, every `--experimental-watch-progress-notify-interval`
//! (10 minutes by default). kube-apiserver asks etcd for one (`RequestWatchProgress`), but
//! only from etcd 3.4.31 / 3.5.13 on (earlier ones can send it ahead of queued events,
//! etcd#15220; Debian's etcd is 3.4.23), and otherwise reads from etcd, not its cache.
//!
//! ## Guarantees
//! - **A nudge is one put of `<prefix>/freshness_key`** (the key routes to no resource, as
//!   `compact_rev_key`): its revision `W` is past every revision etcd had committed before
//!   it, and the watch delivers it after every event before it, so every cache that
//!   dispatches `W` has everything up to any `R <= W` — a proof from the watch itself, not
//!   from a notification that could overtake events.
//! - **Only when needed**: a freshness wait nudges only after waiting [`Nudge::after`]
//!   (`--fresh-nudge-ms`, 100 ms by default — kube's progress-request period) without the
//!   cache reaching its revision; a cache that gets its revision from its own events or
//!   etcd's notifications never writes. 0 turns nudges off (waits then last until etcd's
//!   notification or the fresh wait).
//! - **Coalesced**: one nudge at a time per server; a waiter whose revision an earlier or
//!   concurrent nudge already covers writes nothing, so a burst of consistent reads costs
//!   one write per etcd round trip at most, whatever their number.
//! - **A failed nudge loses nothing**: it is logged and counted; the waiter keeps waiting
//!   for its revision as without nudges (a 504 at the fresh wait, kube's answer).
//! - Only over etcd: the memory and embedded stores are watched whole, so their revisions
//!   are always the reflector's own.
//! - The first list of a restart with history rebuilding (`--rebuild-history`) takes its
//!   target revision from a nudge ([`Nudge::now`]): the replay then ends at an event of its
//!   own watch, and a server sharing etcd with other writers is ready as soon as it has
//!   replayed, not at etcd's next progress notification.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use watchkeeper_core::Revision;
use watchkeeper_store::{AnyStore, Store, TxnOp, TxnRequest};

/// The key, under the registry prefix, that nudges write.
pub const FRESHNESS_KEY: &str = "freshness_key";

/// A server's nudges (see the module docs).
#[derive(Debug)]
pub struct Nudge {
    store: AnyStore,
    key: Bytes,
    /// How long a freshness wait waits before it nudges.
    after: Duration,
    /// The revision of the latest nudge, held while one is written (coalescing).
    written: tokio::sync::Mutex<Revision>,
    /// Nudges written.
    pub writes: AtomicU64,
    /// Nudges that failed.
    pub failures: AtomicU64,
}

impl Nudge {
    /// Nudges of `store` under `prefix` after waits of `after`; `None` when the store is
    /// watched whole (not etcd) or `after` is zero.
    #[must_use]
    pub fn new(store: &AnyStore, prefix: &str, after: Duration) -> Option<Nudge> {
        let etcd = store.kind() == watchkeeper_store::StoreKind::Etcd;
        (etcd && !after.is_zero()).then(|| Nudge {
            store: store.clone(),
            key: Bytes::from(format!("{prefix}/{FRESHNESS_KEY}")),
            after,
            written: tokio::sync::Mutex::new(0),
            writes: AtomicU64::new(0),
            failures: AtomicU64::new(0),
        })
    }

    /// How long a freshness wait waits before it nudges.
    #[must_use]
    pub fn after(&self) -> Duration {
        self.after
    }

    /// Makes the watch report a revision at least `needed`: writes the key unless a nudge
    /// already did (or is doing) so at `needed` or later. Failures are logged and counted.
    pub async fn cover(&self, needed: Revision) {
        let mut written = self.written.lock().await;
        if *written >= needed {
            return;
        }
        if let Ok(revision) = self.write(needed).await {
            *written = revision;
        }
    }

    /// Writes the key now and answers its revision (the start of a history replay).
    ///
    /// # Errors
    /// The store's error, as text.
    pub async fn now(&self) -> Result<Revision, String> {
        let mut written = self.written.lock().await;
        let revision = self.write(*written).await?;
        *written = revision;
        Ok(revision)
    }

    async fn write(&self, needed: Revision) -> Result<Revision, String> {
        // Exempt from the memory and embedded stores' quota as the compaction key is (one
        // small value; etcd applies its own space quota).
        let request = TxnRequest {
            compares: Vec::new(),
            success: vec![TxnOp::Put {
                key: self.key.clone(),
                value: Bytes::from(needed.to_string()),
            }],
            quota_exempt: true,
        };
        match self.store.txn(request).await {
            Ok(response) => {
                self.writes.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(
                    needed,
                    revision = response.revision,
                    "nudged the store's watch"
                );
                Ok(response.revision)
            }
            Err(error) => {
                self.failures.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(%error, needed, "a freshness nudge failed; waiting for the store's progress notification");
                Err(error.to_string())
            }
        }
    }
}

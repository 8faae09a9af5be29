//! Periodic compaction of the store, as kube-apiserver's `--etcd-compaction-interval`
//! (`k8s.io/apiserver/pkg/storage/etcd3/compact.go`) does it.
//!
//! An MVCC store keeps every version of every key until it is compacted. Without compaction
//! the memory store grows with every write for the life of the process, and etcd grows until
//! its space quota raises the `NOSPACE` alarm and refuses every write. kube-apiserver compacts
//! etcd every five minutes; a server that stands in for it must too.
//!
//! ## Guarantees
//! - **One round per `--compaction-interval-ms`** (default 300,000 ms, kube-apiserver's 5
//!   minutes; 0 disables). A round is one transaction on `<prefix>/compact_rev_key`, as
//!   kube-apiserver's rounds on its `compact_rev_key`: rewrite it if it is still as this server
//!   last saw it (its `mod_revision`, or absent). Winning the round, the server compacts the store to the
//!   revision it recorded at its previous round; either way it records the store's revision
//!   now, for the next round.
//! - **At least one interval of history stays readable**: the floor is a revision the store
//!   had reached at least one interval before (two at most, for a server that lost rounds), so
//!   a watch resumed, a LIST at a resource version or a history rebuilt on restart
//!   (`--rebuild-history`) reaches back an interval, as with kube-apiserver.
//! - **Servers sharing a store compact it once per interval, not once each**: the key is a
//!   logical clock; only the transaction that finds it unchanged compacts, the others adopt
//!   what they found.
//! - **The first round never compacts** (nothing was recorded yet), so a restart, or a crash
//!   loop, never compacts history younger than an interval.
//! - **Failures lose nothing and stop nothing**: a round whose transaction or compaction fails
//!   is logged and counted (`watchkeeper_store_compaction_rounds_total{result}`); the next round
//!   tries again. A store already compacted further (etcd's own `--auto-compaction-*`, the
//!   embedded store's `retain_revisions`) is a success.
//! - **The key lies inside the registry prefix** (kube-apiserver's sits at the root of etcd):
//!   every write this server makes is then an event its reflector's watch sees. A write outside
//!   the prefix is a revision the watch never reports, and a restart's history replay
//!   (`--rebuild-history`) waits to reach the store's revision: with the key at the root, a
//!   restart after a round would wait for etcd's progress notification (every 10 minutes by
//!   default), refusing requests meanwhile (README: etcd shared with other writers). The key
//!   routes to no resource, so no cache holds it; each won round costs one store revision.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use watchkeeper_store::{CompactError, Compare, Store, TxnOp, TxnRequest};

/// The key, under the registry prefix, whose writes order the compaction rounds of every
/// server sharing a store (kube-apiserver's `compactRevKey`).
pub const COMPACT_REV_KEY: &str = "compact_rev_key";

/// What one server remembers between rounds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Compactor {
    /// `<prefix>/compact_rev_key`.
    key: Bytes,
    /// The key's `mod_revision` as last seen (`None`: absent, or not seen yet).
    seen: Option<u64>,
    /// The store's revision at the previous round (0: no round yet).
    recorded: u64,
}

/// What a round did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Round {
    /// This server won the round and compacted the store to this revision (or found it
    /// compacted at least that far).
    Compacted(u64),
    /// This server won its first round: it recorded the revision, nothing to compact yet.
    Recorded,
    /// Another server changed the key since this one last saw it: it adopted the key and the
    /// current revision.
    Lost,
}

/// The rounds' outcomes, for `/metrics`.
#[derive(Debug, Default)]
pub struct CompactionCounters {
    /// Rounds that compacted.
    pub compacted: AtomicU64,
    /// Rounds that only recorded (the first) or found another server's round.
    pub skipped: AtomicU64,
    /// Rounds that failed (the transaction or the compaction).
    pub failed: AtomicU64,
    /// The floor of the last compaction this server made (0: none).
    pub floor: AtomicU64,
}

impl Compactor {
    /// A compactor that has seen nothing, for the registry `prefix` (`/registry`).
    #[must_use]
    pub fn new(prefix: &str) -> Compactor {
        Compactor {
            key: Bytes::from(format!("{prefix}/{COMPACT_REV_KEY}")),
            seen: None,
            recorded: 0,
        }
    }

    /// Runs one round against `store`.
    ///
    /// # Errors
    /// The transaction or the compaction failed (the state is left as the failure found it, so
    /// the next round retries).
    pub async fn round<S: Store>(&mut self, store: &S) -> Result<Round, String> {
        let key = self.key.clone();
        let compare = match self.seen {
            Some(revision) => Compare::ModRevision {
                key: key.clone(),
                revision,
            },
            None => Compare::Absent { key: key.clone() },
        };
        // Exempt from the memory and embedded stores' quota: a full store must still be
        // compacted, and this put is one small value per interval whose older versions the
        // compaction frees (see `watchkeeper_store::quota`).
        let request = TxnRequest {
            compares: vec![compare],
            success: vec![TxnOp::Put {
                key,
                value: Bytes::from(self.recorded.to_string()),
            }],
            quota_exempt: true,
        };
        let response = store.txn(request).await.map_err(|e| e.to_string())?;
        if !response.succeeded {
            self.seen = response
                .current
                .first()
                .and_then(|(_, kv)| kv.as_ref().map(|kv| kv.mod_revision));
            self.recorded = response.revision;
            return Ok(Round::Lost);
        }
        let target = std::mem::replace(&mut self.recorded, response.revision);
        self.seen = Some(response.revision);
        if target == 0 {
            return Ok(Round::Recorded);
        }
        match store.compact(target).await {
            Ok(()) => Ok(Round::Compacted(target)),
            Err(CompactError::AlreadyCompacted {
                compact_revision, ..
            }) => Ok(Round::Compacted(compact_revision.max(target))),
            Err(error) => Err(format!("compacting to revision {target}: {error}")),
        }
    }
}

/// Runs a round every `interval` until `shutdown` changes; the first round one interval after
/// the start.
pub async fn run_periodic<S: Store>(
    store: S,
    prefix: String,
    interval: Duration,
    counters: std::sync::Arc<CompactionCounters>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let mut compactor = Compactor::new(&prefix);
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            _ = shutdown.changed() => return,
        }
        match compactor.round(&store).await {
            Ok(Round::Compacted(floor)) => {
                counters.compacted.fetch_add(1, Ordering::Relaxed);
                counters.floor.fetch_max(floor, Ordering::Relaxed);
                tracing::info!(floor, "compacted the store");
            }
            Ok(Round::Recorded | Round::Lost) => {
                counters.skipped.fetch_add(1, Ordering::Relaxed);
            }
            Err(error) => {
                counters.failed.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(%error, "store compaction round failed; the next round retries");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use watchkeeper_store::{MemoryConfig, MemoryStore, RangeError, RangeRequest};

    use super::*;

    fn block_on<F: std::future::Future>(future: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
            .block_on(future)
    }

    async fn write(store: &MemoryStore, n: u64) -> u64 {
        let mut revision = 0;
        for i in 0..n {
            revision = store
                .txn(TxnRequest::put("/registry/configmaps/ns/a", i.to_string()))
                .await
                .expect("put")
                .revision;
        }
        revision
    }

    async fn readable(store: &MemoryStore, revision: u64) -> bool {
        let mut request = RangeRequest::key("/registry/configmaps/ns/a");
        request.revision = revision;
        match store.range(request).await {
            Ok(_) => true,
            Err(RangeError::Compacted { .. }) => false,
            Err(other) => panic!("read at {revision}: {other}"),
        }
    }

    /// Goal: the first round compacts nothing; each later round compacts to the revision the
    /// round before it recorded, so what was written since stays readable and what is older
    /// is gone.
    #[test]
    fn a_round_compacts_to_the_revision_the_previous_round_recorded() {
        block_on(async {
            let store = MemoryStore::new(MemoryConfig::default()).expect("store");
            let mut compactor = Compactor::new("/registry");
            write(&store, 5).await;
            assert_eq!(compactor.round(&store).await, Ok(Round::Recorded));
            let first = store.current_revision().await.expect("revision");
            assert!(readable(&store, 1).await, "the first round compacted");
            let written = write(&store, 5).await;
            assert_eq!(compactor.round(&store).await, Ok(Round::Compacted(first)));
            assert!(!readable(&store, first - 1).await, "below the floor");
            assert!(readable(&store, first).await, "the floor itself");
            assert!(readable(&store, written).await);
            let second = store.current_revision().await.expect("revision");
            write(&store, 3).await;
            assert_eq!(compactor.round(&store).await, Ok(Round::Compacted(second)));
            assert!(!readable(&store, second - 1).await);
            assert!(readable(&store, second).await);
            // The key's value names the revision the round compacted to, as kube-apiserver's.
            let kv = store
                .get(format!("/registry/{COMPACT_REV_KEY}"))
                .await
                .expect("get")
                .expect("key");
            assert_eq!(kv.value, Bytes::from(second.to_string()));
        });
    }

    /// Goal: servers sharing a store compact it once per round between them: the first to
    /// find the key as it last saw it compacts, the others adopt what they found and compact
    /// nothing; any of them can win a later round.
    #[test]
    fn servers_sharing_a_store_compact_once_per_round() {
        block_on(async {
            let store = MemoryStore::new(MemoryConfig::default()).expect("store");
            let (mut a, mut b) = (Compactor::new("/registry"), Compactor::new("/registry"));
            write(&store, 3).await;
            // Round 1: a creates the key; b, expecting it absent, adopts it.
            assert_eq!(a.round(&store).await, Ok(Round::Recorded));
            assert_eq!(b.round(&store).await, Ok(Round::Lost));
            let recorded = store.current_revision().await.expect("revision");
            write(&store, 3).await;
            // Round 2: a goes first and compacts to what it recorded; b finds a's write.
            assert_eq!(a.round(&store).await, Ok(Round::Compacted(recorded)));
            let floor = store.compact_revision();
            assert_eq!(floor, recorded);
            let recorded = store.current_revision().await.expect("revision");
            assert_eq!(b.round(&store).await, Ok(Round::Lost));
            assert_eq!(store.compact_revision(), floor, "a lost round compacted");
            write(&store, 3).await;
            // Round 3: b goes first; both saw the key as a left it, so b wins and compacts to
            // what it recorded when it lost round 2; a finds b's write.
            assert_eq!(b.round(&store).await, Ok(Round::Compacted(recorded)));
            let floor = store.compact_revision();
            assert_eq!(a.round(&store).await, Ok(Round::Lost));
            assert_eq!(store.compact_revision(), floor, "a lost round compacted");
        });
    }

    /// Goal: every round is an event of the registry prefix, so a watch of the prefix (the
    /// reflector's) reaches the store's revision after a round without a progress
    /// notification: a restart's history replay is never left waiting for one.
    #[test]
    fn a_round_is_an_event_the_prefix_watch_sees() {
        block_on(async {
            let store = MemoryStore::new(MemoryConfig {
                progress_interval: None,
                ..MemoryConfig::default()
            })
            .expect("store");
            let from = write(&store, 2).await;
            let mut watch = store
                .watch(
                    watchkeeper_store::KeySelector::prefix("/registry/"),
                    from + 1,
                )
                .await
                .expect("watch");
            let mut compactor = Compactor::new("/registry");
            assert_eq!(compactor.round(&store).await, Ok(Round::Recorded));
            let current = store.current_revision().await.expect("revision");
            // Bounded, not timed: without an event the watch stays silent (progress is off).
            let seen = tokio::time::timeout(Duration::from_secs(60), watch.next())
                .await
                .expect("the prefix watch saw nothing of the round");
            match seen {
                Some(watchkeeper_store::WatchItem::Revision { revision, .. }) => {
                    assert_eq!(revision, current, "the round's write");
                }
                other => panic!("the prefix watch saw {other:?}"),
            }
        });
    }

    /// Goal: a store already compacted past the round's revision is not a failure.
    #[test]
    fn a_store_compacted_further_is_a_success() {
        block_on(async {
            let store = MemoryStore::new(MemoryConfig::default()).expect("store");
            let mut compactor = Compactor::new("/registry");
            write(&store, 3).await;
            assert_eq!(compactor.round(&store).await, Ok(Round::Recorded));
            let latest = write(&store, 3).await;
            store.compact(latest).await.expect("compact");
            assert_eq!(
                compactor.round(&store).await,
                Ok(Round::Compacted(latest)),
                "the floor the store already had"
            );
        });
    }
}

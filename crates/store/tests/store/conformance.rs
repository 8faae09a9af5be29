//! The conformance suite every backend passes. Each function takes a store and a key
//! prefix unique to the test (the etcd backend shares one etcd between parallel tests), so
//! assertions never depend on absolute revisions or on keys outside the prefix.

use bytes::Bytes;
use watchkeeper_store::{
    CompactError, Compare, EventKind, KeySelector, RangeError, RangeRequest, StartKey, Store,
    TxnError, TxnOp, TxnRequest, WatchItem,
};

use crate::common::{k, next_item, next_revision};

pub(crate) async fn put_get<S: Store>(s: &S, p: &str) {
    let r1 = s.put(k(p, "a"), "1").await.unwrap();
    let kv = s.get(k(p, "a")).await.unwrap().unwrap();
    assert_eq!(kv.value, "1");
    assert_eq!(
        (kv.create_revision, kv.mod_revision, kv.version),
        (r1, r1, 1)
    );
    let r2 = s.put(k(p, "a"), "2").await.unwrap();
    assert!(r2 > r1);
    let kv = s.get(k(p, "a")).await.unwrap().unwrap();
    assert_eq!(kv.value, "2");
    assert_eq!(
        (kv.create_revision, kv.mod_revision, kv.version),
        (r1, r2, 2)
    );
    assert_eq!(s.get(k(p, "missing")).await.unwrap(), None);
    assert!(s.current_revision().await.unwrap() >= r2);
    // A key selector matches only that key, not longer keys sharing it as a prefix.
    s.put(k(p, "ab"), "x").await.unwrap();
    let r = s.range(RangeRequest::key(k(p, "a"))).await.unwrap();
    assert_eq!(r.kvs.len(), 1);
    let snap = s.counters().snapshot();
    assert!(snap.txns >= 3 && snap.ranges >= 3);
}

pub(crate) async fn range_paging<S: Store>(s: &S, p: &str) {
    for i in 0..10 {
        s.put(k(p, &format!("k{i:02}")), format!("v{i}"))
            .await
            .unwrap();
    }
    s.put(k(p, "k05"), "v5").await.unwrap();
    let first = s
        .range(RangeRequest::prefix(k(p, "k")).with_limit(3))
        .await
        .unwrap();
    assert_eq!(first.kvs.len(), 3);
    assert!(first.more);
    let pinned = first.revision;
    // Changes after the first page must not show in later pages read at its revision.
    s.put(k(p, "k05"), "changed").await.unwrap();
    s.delete(k(p, "k07")).await.unwrap();
    let mut all = first.kvs.clone();
    let mut last = first.kvs.last().unwrap().key.clone();
    loop {
        let page = s
            .range(
                RangeRequest::prefix(k(p, "k"))
                    .with_limit(3)
                    .at_revision(pinned)
                    .starting(StartKey::Exclusive(last.clone())),
            )
            .await
            .unwrap();
        assert_eq!(page.revision, pinned);
        assert!(page.kvs.len() <= 3);
        all.extend(page.kvs.iter().cloned());
        if !page.more {
            break;
        }
        last = page.kvs.last().unwrap().key.clone();
    }
    let keys: Vec<Bytes> = all.iter().map(|kv| kv.key.clone()).collect();
    let want: Vec<Bytes> = (0..10).map(|i| k(p, &format!("k{i:02}"))).collect();
    assert_eq!(keys, want);
    assert_eq!(all[5].value, "v5");
    // Latest: k07 gone, k05 changed.
    let now = s.range(RangeRequest::prefix(k(p, "k"))).await.unwrap();
    assert_eq!(now.kvs.len(), 9);
    assert!(!now.more);
    assert_eq!(now.kvs[5].value, "changed");
    // Inclusive start.
    let from = s
        .range(RangeRequest::prefix(k(p, "k")).starting(StartKey::Inclusive(k(p, "k08"))))
        .await
        .unwrap();
    let keys: Vec<Bytes> = from.kvs.iter().map(|kv| kv.key.clone()).collect();
    assert_eq!(keys, vec![k(p, "k08"), k(p, "k09")]);
    // Exactly `limit` matches: no `more`.
    let exact = s
        .range(
            RangeRequest::prefix(k(p, "k"))
                .with_limit(2)
                .starting(StartKey::Exclusive(k(p, "k07"))),
        )
        .await
        .unwrap();
    assert_eq!(exact.kvs.len(), 2);
    assert!(!exact.more);
}

pub(crate) async fn range_past_revision<S: Store>(s: &S, p: &str) {
    let r1 = s.put(k(p, "a"), "1").await.unwrap();
    let r2 = s.put(k(p, "a"), "2").await.unwrap();
    let r3 = s.delete(k(p, "a")).await.unwrap();
    let r4 = s.put(k(p, "b"), "b").await.unwrap();
    assert!(r1 < r2 && r2 < r3 && r3 < r4);
    let at = |rev| s.range(RangeRequest::prefix(p.to_string()).at_revision(rev));
    let v = at(r1).await.unwrap();
    assert_eq!(v.revision, r1);
    assert_eq!(v.kvs.len(), 1);
    assert_eq!(v.kvs[0].value, "1");
    assert_eq!(at(r2).await.unwrap().kvs[0].value, "2");
    assert!(at(r3).await.unwrap().kvs.is_empty());
    let v4 = at(r4).await.unwrap();
    assert_eq!(v4.kvs.len(), 1);
    assert_eq!(v4.kvs[0].key, k(p, "b"));
    assert!(at(r1 - 1).await.unwrap().kvs.is_empty());
    let future = s.current_revision().await.unwrap() + 1_000_000;
    match at(future).await {
        Err(RangeError::FutureRevision { requested, current }) => {
            assert_eq!(requested, future);
            assert!(current >= r4);
        }
        other => panic!("expected FutureRevision, got {other:?}"),
    }
}

pub(crate) async fn txn_compare<S: Store>(s: &S, p: &str) {
    let key = k(p, "c");
    let create = TxnRequest::put(key.clone(), "v1").when(Compare::Absent { key: key.clone() });
    let ok = s.txn(create.clone()).await.unwrap();
    assert!(ok.succeeded);
    assert_eq!(ok.events.len(), 1);
    assert_eq!(ok.events[0].kind, EventKind::Put);
    assert_eq!(ok.events[0].prev_kv, None);
    let r1 = ok.revision;
    assert_eq!(ok.events[0].kv.mod_revision, r1);
    // Create again: fails, returns the current value.
    let fail = s.txn(create).await.unwrap();
    assert!(!fail.succeeded);
    assert!(fail.revision >= r1);
    assert_eq!(fail.current.len(), 1);
    let cur = fail.current[0].1.clone().unwrap();
    assert_eq!((cur.value.as_ref(), cur.mod_revision), (&b"v1"[..], r1));
    // Update with the right revision succeeds.
    let upd = TxnRequest::put(key.clone(), "v2").when(Compare::ModRevision {
        key: key.clone(),
        revision: r1,
    });
    let ok2 = s.txn(upd.clone()).await.unwrap();
    assert!(ok2.succeeded);
    assert!(ok2.revision > r1);
    assert_eq!(ok2.events[0].prev_kv.as_ref().unwrap().value, "v1");
    assert_eq!(ok2.events[0].kv.create_revision, r1);
    assert_eq!(ok2.events[0].kv.version, 2);
    // Stale revision fails with the current value.
    let fail2 = s.txn(upd).await.unwrap();
    assert!(!fail2.succeeded);
    assert_eq!(fail2.current[0].1.as_ref().unwrap().value, "v2");
    assert_eq!(
        fail2.current[0].1.as_ref().unwrap().mod_revision,
        ok2.revision
    );
    // Present on a missing key fails with None; ANDed compares.
    let missing = k(p, "missing");
    let both = TxnRequest::put(k(p, "z"), "z")
        .when(Compare::Present { key: key.clone() })
        .when(Compare::Present {
            key: missing.clone(),
        });
    let fail3 = s.txn(both).await.unwrap();
    assert!(!fail3.succeeded);
    assert_eq!(fail3.current[0].0, key);
    assert!(fail3.current[0].1.is_some());
    assert_eq!(fail3.current[1], (missing, None));
    assert_eq!(s.get(k(p, "z")).await.unwrap(), None);
    // Duplicate keys are rejected.
    let dup = TxnRequest::put(key.clone(), "a").then(TxnOp::Delete { key: key.clone() });
    assert!(matches!(s.txn(dup).await, Err(TxnError::DuplicateKey(_))));
    assert!(s.counters().snapshot().txn_conflicts >= 3);
}

pub(crate) async fn multi_op_txn_is_one_revision<S: Store>(s: &S, p: &str) {
    s.put(k(p, "z"), "old").await.unwrap();
    let mut w = s
        .watch(KeySelector::prefix(p.to_string()), 0)
        .await
        .unwrap();
    let txn = TxnRequest::default()
        .then(TxnOp::Put {
            key: k(p, "x"),
            value: "x".into(),
        })
        .then(TxnOp::Put {
            key: k(p, "y"),
            value: "y".into(),
        })
        .then(TxnOp::Delete { key: k(p, "z") })
        .then(TxnOp::Delete {
            key: k(p, "never-existed"),
        });
    let resp = s.txn(txn).await.unwrap();
    assert!(resp.succeeded);
    assert_eq!(resp.events.len(), 3);
    assert!(
        resp.events
            .iter()
            .all(|e| e.kv.mod_revision == resp.revision)
    );
    // A transaction that changes nothing creates no revision and no event.
    let noop = s
        .txn(TxnRequest::delete(k(p, "never-existed")))
        .await
        .unwrap();
    assert!(noop.succeeded);
    assert!(noop.events.is_empty());
    let sentinel = s.put(k(p, "sentinel"), "s").await.unwrap();
    let (rev, events) = next_revision(&mut w).await;
    assert_eq!(rev, resp.revision);
    let kinds: Vec<(Bytes, EventKind)> =
        events.iter().map(|e| (e.kv.key.clone(), e.kind)).collect();
    assert_eq!(
        kinds,
        vec![
            (k(p, "x"), EventKind::Put),
            (k(p, "y"), EventKind::Put),
            (k(p, "z"), EventKind::Delete)
        ]
    );
    assert_eq!(events[2].prev_kv.as_ref().unwrap().value, "old");
    assert_eq!(events[2].kv.mod_revision, rev);
    let (rev2, events2) = next_revision(&mut w).await;
    assert_eq!(rev2, sentinel);
    assert_eq!(events2[0].kv.key, k(p, "sentinel"));
}

pub(crate) async fn watch_from_past<S: Store>(s: &S, p: &str) {
    let wp = format!("{p}w/");
    let ra = s.put(k(&wp, "a"), "a1").await.unwrap();
    let rb = s.put(k(&wp, "b"), "b1").await.unwrap();
    s.put(k(p, "outside"), "o").await.unwrap();
    let r3 = s.put(k(&wp, "a"), "a2").await.unwrap();
    let r4 = s.delete(k(&wp, "b")).await.unwrap();
    let r5 = s.put(k(&wp, "c"), "c1").await.unwrap();
    let mut w = s.watch(KeySelector::prefix(wp.clone()), r3).await.unwrap();
    let (rev, ev) = next_revision(&mut w).await;
    assert_eq!(rev, r3);
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0].kv.value, "a2");
    let prev = ev[0].prev_kv.as_ref().unwrap();
    assert_eq!((prev.value.as_ref(), prev.mod_revision), (&b"a1"[..], ra));
    let (rev, ev) = next_revision(&mut w).await;
    assert_eq!(rev, r4);
    assert_eq!(ev[0].kind, EventKind::Delete);
    assert_eq!(ev[0].prev_kv.as_ref().unwrap().mod_revision, rb);
    let (rev, ev) = next_revision(&mut w).await;
    assert_eq!(rev, r5);
    assert_eq!(ev[0].prev_kv, None);
    // Then live changes, nothing in between.
    let r6 = s.put(k(&wp, "a"), "a3").await.unwrap();
    let (rev, ev) = next_revision(&mut w).await;
    assert_eq!(rev, r6);
    assert_eq!(ev[0].prev_kv.as_ref().unwrap().value, "a2");
    // A single-key watch sees only that key.
    let mut wk = s.watch(KeySelector::key(k(&wp, "a")), ra).await.unwrap();
    for want in [ra, r3, r6] {
        assert_eq!(next_revision(&mut wk).await.0, want);
    }
}

pub(crate) async fn watch_live<S: Store>(s: &S, p: &str) {
    let mut w = s
        .watch(KeySelector::prefix(p.to_string()), 0)
        .await
        .unwrap();
    let mut revs = Vec::new();
    for i in 0..20 {
        revs.push(
            s.put(k(p, &format!("k{}", i % 3)), format!("{i}"))
                .await
                .unwrap(),
        );
    }
    for (i, want) in revs.iter().enumerate() {
        let (rev, ev) = next_revision(&mut w).await;
        assert_eq!(rev, *want);
        assert_eq!(ev.len(), 1);
        assert_eq!(ev[0].kv.value, format!("{i}"));
        if i >= 3 {
            assert_eq!(ev[0].prev_kv.as_ref().unwrap().value, format!("{}", i - 3));
        }
    }
    // Many watchers on the same store each see everything.
    let mut ws = Vec::new();
    for _ in 0..5 {
        ws.push(
            s.watch(KeySelector::prefix(p.to_string()), revs[0])
                .await
                .unwrap(),
        );
    }
    for w in &mut ws {
        for want in &revs {
            assert_eq!(next_revision(w).await.0, *want);
        }
    }
}

/// A watcher that does not read while many revisions are written blocks no writer and,
/// when it reads, gets every revision in order.
pub(crate) async fn slow_watcher_loses_nothing<S: Store>(s: &S, p: &str) {
    let mut w = s
        .watch(KeySelector::prefix(p.to_string()), 0)
        .await
        .unwrap();
    let mut revs = Vec::new();
    for i in 0..300 {
        revs.push(
            s.put(k(p, &format!("k{}", i % 10)), format!("{i}"))
                .await
                .unwrap(),
        );
    }
    for (i, want) in revs.iter().enumerate() {
        let (rev, ev) = next_revision(&mut w).await;
        assert_eq!(rev, *want);
        assert_eq!(ev[0].kv.value, format!("{i}"));
    }
}

/// Needs a store no other test writes to (compaction is global).
pub(crate) async fn compaction<S: Store>(s: &S, p: &str) {
    let r1 = s.put(k(p, "a"), "1").await.unwrap();
    let r2 = s.put(k(p, "a"), "2").await.unwrap();
    let r3 = s.put(k(p, "b"), "b").await.unwrap();
    let r4 = s.put(k(p, "a"), "4").await.unwrap();
    s.compact(r3).await.unwrap();
    match s
        .range(RangeRequest::prefix(p.to_string()).at_revision(r2))
        .await
    {
        Err(RangeError::Compacted {
            requested,
            compact_revision,
        }) => {
            assert_eq!((requested, compact_revision), (r2, r3));
        }
        other => panic!("expected Compacted, got {other:?}"),
    }
    let at3 = s
        .range(RangeRequest::prefix(p.to_string()).at_revision(r3))
        .await
        .unwrap();
    let vals: Vec<&[u8]> = at3.kvs.iter().map(|kv| kv.value.as_ref()).collect();
    assert_eq!(vals, vec![&b"2"[..], &b"b"[..]]);
    let mut old = s
        .watch(KeySelector::prefix(p.to_string()), r1)
        .await
        .unwrap();
    match next_item(&mut old).await {
        WatchItem::Compacted {
            compact_revision, ..
        } => assert_eq!(compact_revision, r3),
        other => panic!("expected Compacted, got {other:?}"),
    }
    assert!(old.next().await.is_none(), "Compacted is terminal");
    let mut w = s
        .watch(KeySelector::prefix(p.to_string()), r3)
        .await
        .unwrap();
    assert_eq!(next_revision(&mut w).await.0, r3);
    let (rev, ev) = next_revision(&mut w).await;
    assert_eq!(rev, r4);
    assert_eq!(ev[0].prev_kv.as_ref().unwrap().value, "2");
    assert!(matches!(
        s.compact(r3).await,
        Err(CompactError::AlreadyCompacted { .. })
    ));
    assert!(matches!(
        s.compact(r4 + 1000).await,
        Err(CompactError::FutureRevision { .. })
    ));
    // Everything after the floor is intact.
    assert_eq!(s.get(k(p, "a")).await.unwrap().unwrap().version, 3);
}

/// A deletion at exactly the compaction revision is still delivered (etcd#18089; etcd
/// 3.4.23 loses it, so this runs only for the local backends).
pub(crate) async fn compaction_keeps_tombstone_at_floor<S: Store>(s: &S, p: &str) {
    s.put(k(p, "a"), "1").await.unwrap();
    let rd = s.delete(k(p, "a")).await.unwrap();
    s.compact(rd).await.unwrap();
    let mut w = s
        .watch(KeySelector::prefix(p.to_string()), rd)
        .await
        .unwrap();
    let (rev, ev) = next_revision(&mut w).await;
    assert_eq!(rev, rd);
    assert_eq!(ev[0].kind, EventKind::Delete);
    assert_eq!(ev[0].prev_kv.as_ref().unwrap().value, "1");
    assert_eq!(s.get(k(p, "a")).await.unwrap(), None);
}

/// Concurrent compare-and-swap increments of one counter (as guaranteed updates do): every
/// success is one new revision holding the previous value + 1, so the counter ends at the
/// number of successes and a watch replays 1, 2, 3, ... each at its own revision. On the
/// embedded store the concurrent transactions share commits (group commit), and each is
/// still evaluated against the state the previous one left.
pub(crate) async fn concurrent_increments<S: Store + Clone + 'static>(s: &S, p: &str) {
    const TASKS: u64 = 16;
    const EACH: u64 = 20;
    let key = k(p, "counter");
    let start = s.put(key.clone(), "0").await.unwrap();
    let mut w = s
        .watch(KeySelector::key(key.clone()), start + 1)
        .await
        .unwrap();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..TASKS {
        let (s, key) = (s.clone(), key.clone());
        tasks.spawn(async move {
            let mut revisions = Vec::new();
            let mut conflicts = 0u64;
            let mut seen = s.get(key.clone()).await.unwrap().unwrap();
            while (revisions.len() as u64) < EACH {
                let n: u64 = std::str::from_utf8(&seen.value).unwrap().parse().unwrap();
                let txn =
                    TxnRequest::put(key.clone(), (n + 1).to_string()).when(Compare::ModRevision {
                        key: key.clone(),
                        revision: seen.mod_revision,
                    });
                let resp = s.txn(txn).await.unwrap();
                if resp.succeeded {
                    assert_eq!(resp.events.len(), 1);
                    assert_eq!(resp.events[0].kv.value, (n + 1).to_string());
                    assert_eq!(resp.events[0].prev_kv.as_ref(), Some(&seen));
                    revisions.push(resp.revision);
                    seen = resp.events[0].kv.clone();
                } else {
                    conflicts += 1;
                    seen = resp.current[0].1.clone().unwrap();
                }
            }
            (revisions, conflicts)
        });
    }
    let mut revisions = Vec::new();
    while let Some(done) = tasks.join_next().await {
        revisions.extend(done.unwrap().0);
    }
    revisions.sort_unstable();
    revisions.dedup();
    assert_eq!(
        revisions.len() as u64,
        TASKS * EACH,
        "a revision given twice"
    );
    let last = s.get(key.clone()).await.unwrap().unwrap();
    assert_eq!(last.value, (TASKS * EACH).to_string());
    assert_eq!(last.mod_revision, *revisions.last().unwrap());
    for (i, expected_rev) in revisions.iter().enumerate() {
        let (rev, events) = next_revision(&mut w).await;
        assert_eq!(rev, *expected_rev);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].kv.value, (i as u64 + 1).to_string());
    }
}

macro_rules! conformance {
    ($factory:path; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let (store, _guard) = $factory().await;
                let prefix = crate::common::unique_prefix(stringify!($name));
                crate::conformance::$name(&store, &prefix).await;
            }
        )*
    };
}

macro_rules! shared_suite {
    ($factory:path) => {
        crate::conformance::conformance!($factory;
            put_get, range_paging, range_past_revision, txn_compare,
            multi_op_txn_is_one_revision, watch_from_past, watch_live,
            slow_watcher_loses_nothing, concurrent_increments);
    };
}

pub(crate) use conformance;
pub(crate) use shared_suite;

mod memory {
    super::shared_suite!(crate::common::memory);
    super::conformance!(crate::common::memory; compaction, compaction_keeps_tombstone_at_floor);
}

mod embedded {
    super::shared_suite!(crate::common::embedded);
    super::conformance!(crate::common::embedded; compaction, compaction_keeps_tombstone_at_floor);

    /// One commit per transaction (`commit_batch_max` 1) keeps the same semantics.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_increments_without_group_commit() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = watchkeeper_store::EmbeddedConfig::new(dir.path());
        config.commit_batch_max = 1;
        let store = watchkeeper_store::EmbeddedStore::open(config).unwrap();
        let before = store.commits();
        crate::conformance::concurrent_increments(&store, "/").await;
        // The initial put and one commit per successful increment; a failed compare
        // commits nothing.
        assert_eq!(store.commits() - before, 1 + 16 * 20);
        store.check_integrity().unwrap();
    }

    /// With group commit, never more commits than transactions that changed something.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn group_commit_counts_commits() {
        let (store, _guard) = crate::common::embedded().await;
        let before = store.commits();
        crate::conformance::concurrent_increments(&store, "/").await;
        assert!((1..=1 + 16 * 20).contains(&(store.commits() - before)));
        store.check_integrity().unwrap();
    }
}

mod etcd {
    super::shared_suite!(crate::common::etcd_shared);
    // Compaction is global: these run on their own etcd.
    super::conformance!(crate::common::etcd_child; compaction);
}

mod any {
    async fn any_memory() -> (watchkeeper_store::AnyStore, crate::common::Guard) {
        let store = watchkeeper_store::AnyStore::open(watchkeeper_store::StoreConfig::Memory(
            Default::default(),
        ))
        .await
        .unwrap();
        (store, Box::new(()))
    }
    super::shared_suite!(any_memory);
}

/// The transforming decorator (encryption at rest) over the memory backend keeps every
/// guarantee of the suite, with every value stored in another form.
mod transformed {
    use std::sync::Arc;

    use bytes::Bytes;
    use watchkeeper_store::{AnyStore, MemoryStore, Transformed, ValueTransformer};

    /// Stores `t:` and the value reversed.
    #[derive(Debug)]
    struct Reversed;

    impl ValueTransformer for Reversed {
        fn stored_form(&self, _key: &[u8], value: Bytes) -> Result<Bytes, String> {
            let mut stored = b"t:".to_vec();
            stored.extend(value.iter().rev());
            Ok(stored.into())
        }

        fn read_stored(&self, _key: &[u8], stored: Bytes) -> Result<Bytes, String> {
            let body = stored.strip_prefix(b"t:").ok_or("not transformed")?;
            Ok(body.iter().rev().copied().collect::<Vec<u8>>().into())
        }
    }

    async fn transformed_memory() -> (AnyStore, crate::common::Guard) {
        let memory = AnyStore::Memory(MemoryStore::new(Default::default()).unwrap());
        let store = AnyStore::Transformed(Arc::new(Transformed::new(memory, Arc::new(Reversed))));
        (store, Box::new(()))
    }
    super::shared_suite!(transformed_memory);
    super::conformance!(transformed_memory; compaction, compaction_keeps_tombstone_at_floor);
}

//! The store quota (`watchkeeper_store::quota`) on the memory and embedded backends: a put
//! past the quota is refused whole and changes nothing; deletes, compare failures, exempt
//! transactions and compaction still work over it; compaction frees the log and puts succeed
//! again; the embedded store keeps its account across restarts; both backends account the
//! same bytes. And etcd's own quota error reads as the same `TxnError::NoSpace`.

use bytes::Bytes;
use watchkeeper_store::{
    Compare, EmbeddedConfig, EmbeddedStore, MemoryConfig, MemoryStore, QuotaUsage, Store, TxnError,
    TxnOp, TxnRequest,
};

use crate::common::{Guard, k};

/// A quota small enough to fill with a few puts of [`VALUE`].
const QUOTA: u64 = 16 * 1024;
/// Bytes of each value the tests put.
const VALUE: usize = 1000;

fn value() -> Bytes {
    Bytes::from("v".repeat(VALUE))
}

async fn memory(quota: u64) -> (MemoryStore, Guard) {
    let config = MemoryConfig {
        progress_interval: None,
        quota_bytes: quota,
        ..MemoryConfig::default()
    };
    (MemoryStore::new(config).unwrap(), Box::new(()))
}

fn embedded_config(dir: &std::path::Path, quota: u64) -> EmbeddedConfig {
    let mut config = EmbeddedConfig::new(dir);
    config.durable_commits = false;
    config.progress_interval = None;
    config.quota_bytes = quota;
    config
}

async fn embedded(quota: u64) -> (EmbeddedStore, Guard) {
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedStore::open(embedded_config(dir.path(), quota)).unwrap();
    (store, Box::new(dir))
}

fn usage<S: Store>(s: &S) -> QuotaUsage {
    s.quota_usage().expect("the backend keeps an account")
}

/// Puts [`VALUE`]-byte values at `p/fill/<n>` until the quota refuses one; returns the keys
/// written. Checks the refused put changed nothing.
async fn fill<S: Store>(s: &S, p: &str) -> Vec<Bytes> {
    let mut written = Vec::new();
    for n in 0.. {
        assert!(n < 1000, "the quota never refused a put");
        let key = k(p, &format!("fill/{n:03}"));
        let before = usage(s);
        let revision = s.current_revision().await.unwrap();
        match s.put(key.clone(), value()).await {
            Ok(_) => {
                let after = usage(s);
                assert!(after.used_bytes > before.used_bytes, "a put is accounted");
                assert!(after.used_bytes <= after.quota_bytes, "{after:?}");
                written.push(key);
            }
            Err(TxnError::NoSpace) => {
                let after = usage(s);
                assert_eq!(after.used_bytes, before.used_bytes, "refused but accounted");
                assert_eq!(after.refusals, before.refusals + 1);
                assert_eq!(s.current_revision().await.unwrap(), revision, "a revision");
                assert_eq!(s.get(key).await.unwrap(), None, "the refused put is there");
                assert!(!written.is_empty(), "the first put was refused");
                return written;
            }
            Err(other) => panic!("put {n}: {other}"),
        }
    }
    unreachable!()
}

/// Goal: the whole cycle an operator goes through. Filling the store ends with a refusal that
/// changes nothing; over the quota a transaction mixing a put and a delete is refused whole,
/// a failed compare is still a failed compare, an exempt put and deletes succeed, and puts
/// stay refused (the deletes' tombstones and log still count); compaction frees the log and
/// puts succeed again.
pub(crate) async fn full_store_cycle<S: Store>(s: &S, p: &str) {
    let written = fill(s, p).await;
    let revision = s.current_revision().await.unwrap();
    // A put with a delete, refused whole: the delete did not happen either.
    let mixed = TxnRequest::default()
        .then(TxnOp::Put {
            key: k(p, "mixed"),
            value: value(),
        })
        .then(TxnOp::Delete {
            key: written[0].clone(),
        });
    assert_eq!(s.txn(mixed).await, Err(TxnError::NoSpace));
    assert!(s.get(written[0].clone()).await.unwrap().is_some());
    assert_eq!(s.current_revision().await.unwrap(), revision);
    // A compare that fails is answered as such, full or not.
    let failing = TxnRequest::default()
        .when(Compare::Absent {
            key: written[0].clone(),
        })
        .then(TxnOp::Put {
            key: written[0].clone(),
            value: value(),
        });
    let response = s.txn(failing).await.unwrap();
    assert!(!response.succeeded);
    // The server's own bookkeeping passes.
    let exempt = TxnRequest::put(k(p, "bookkeeping"), "1").exempt_from_quota();
    s.txn(exempt).await.expect("an exempt put over the quota");
    // Deletes pass and are accounted (tombstones, log entries with the old values).
    let before = usage(s).used_bytes;
    for key in &written {
        s.delete(key.clone())
            .await
            .expect("a delete over the quota");
        assert_eq!(s.get(key.clone()).await.unwrap(), None);
    }
    assert!(
        usage(s).used_bytes > before,
        "deletes free nothing before compaction"
    );
    assert_eq!(
        s.put(k(p, "after-deletes"), value()).await,
        Err(TxnError::NoSpace),
        "deletes alone free no room"
    );
    // Compaction frees the deleted versions and the log below the floor.
    let current = s.current_revision().await.unwrap();
    s.compact(current).await.unwrap();
    let freed = usage(s);
    assert!(freed.used_bytes < QUOTA / 4, "{freed:?}");
    s.put(k(p, "after-compaction"), value())
        .await
        .expect("a put after compaction");
    let kv = s.get(k(p, "after-compaction")).await.unwrap().unwrap();
    assert_eq!(kv.value, value());
}

/// Goal: concurrent puts (the embedded store commits them in groups) are each admitted or
/// refused on their own: the refused ones are absent, the admitted ones present, and the
/// account never exceeds the quota.
pub(crate) async fn concurrent_puts_are_admitted_one_by_one<S: Store + Clone + 'static>(
    s: &S,
    p: &str,
) {
    let tasks: Vec<_> = (0..32)
        .map(|n| {
            let (s, key) = (s.clone(), k(p, &format!("c/{n:02}")));
            tokio::spawn(async move { (key.clone(), s.put(key, value()).await) })
        })
        .collect();
    let (mut admitted, mut refused) = (0, 0);
    for task in tasks {
        let (key, result) = task.await.unwrap();
        match result {
            Ok(_) => {
                admitted += 1;
                assert!(s.get(key).await.unwrap().is_some());
            }
            Err(TxnError::NoSpace) => {
                refused += 1;
                assert_eq!(s.get(key).await.unwrap(), None);
            }
            Err(other) => panic!("{other}"),
        }
    }
    assert!(
        admitted > 0 && refused > 0,
        "{admitted} admitted, {refused} refused"
    );
    let account = usage(s);
    assert!(account.used_bytes <= QUOTA, "{account:?}");
    assert_eq!(account.refusals, refused);
}

/// Runs the same writes, deletes and compactions; returns the account after each step.
async fn accounts<S: Store>(s: &S) -> Vec<u64> {
    let mut steps = vec![usage(s).used_bytes];
    for n in 0..20u64 {
        let key = format!("/a/{}", n % 5);
        s.txn(
            TxnRequest::default()
                .then(TxnOp::Put {
                    key: key.clone().into(),
                    value: "x".repeat(n as usize * 7).into(),
                })
                .then(TxnOp::Delete {
                    key: format!("/b/{}", n % 3).into(),
                }),
        )
        .await
        .unwrap();
        s.put(format!("/b/{}", n % 4), "y".repeat(n as usize))
            .await
            .unwrap();
        if n % 3 == 2 {
            s.delete(key).await.unwrap();
        }
        steps.push(usage(s).used_bytes);
        if n % 7 == 6 {
            let floor = s.current_revision().await.unwrap() - 2;
            s.compact(floor).await.unwrap();
            steps.push(usage(s).used_bytes);
        }
    }
    steps
}

mod memory {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn full_store_cycle() {
        let (store, _guard) = super::memory(super::QUOTA).await;
        super::full_store_cycle(&store, "/q/").await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_puts_are_admitted_one_by_one() {
        let (store, _guard) = super::memory(super::QUOTA).await;
        super::concurrent_puts_are_admitted_one_by_one(&store, "/q/").await;
    }
}

mod embedded {
    use watchkeeper_store::{EmbeddedStore, Store, TxnError};

    use super::{QUOTA, embedded_config, fill, usage, value};
    use crate::common::k;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn full_store_cycle() {
        let (store, _guard) = super::embedded(QUOTA).await;
        super::full_store_cycle(&store, "/q/").await;
        store.check_integrity().unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_puts_are_admitted_one_by_one() {
        let (store, _guard) = super::embedded(QUOTA).await;
        super::concurrent_puts_are_admitted_one_by_one(&store, "/q/").await;
        store.check_integrity().unwrap();
    }

    /// Goal: the account survives a restart: a full store reopened is still full (the same
    /// bytes, the same refusal), and a larger quota on reopening admits the put.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_restart_keeps_the_account() {
        let dir = tempfile::tempdir().unwrap();
        let used = {
            let store = EmbeddedStore::open(embedded_config(dir.path(), QUOTA)).unwrap();
            fill(&store, "/q/").await;
            usage(&store).used_bytes
        };
        // The last answer came after the committer let go of the store: dropping the handle
        // closed the database, and it opens again at once.
        let store = EmbeddedStore::open(embedded_config(dir.path(), QUOTA)).unwrap();
        assert_eq!(usage(&store).used_bytes, used);
        assert_eq!(
            store.put(k("/q/", "again"), value()).await,
            Err(TxnError::NoSpace)
        );
        assert_eq!(store.check_integrity().unwrap().accounted_bytes, used);
        drop(store);
        let store = EmbeddedStore::open(embedded_config(dir.path(), 2 * QUOTA)).unwrap();
        store.put(k("/q/", "again"), value()).await.unwrap();
        assert!(usage(&store).used_bytes > used);
        store.check_integrity().unwrap();
    }

    /// Goal: the memory store accounts exactly what the embedded store does, whose account
    /// its integrity check recomputes from its tables, through puts, deletes, multi-op
    /// transactions and compactions.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn memory_accounts_what_embedded_does() {
        let (memory, _m) = super::memory(0).await;
        let (embedded, _e) = super::embedded(0).await;
        let from_memory = super::accounts(&memory).await;
        let from_embedded = super::accounts(&embedded).await;
        assert_eq!(from_memory, from_embedded);
        assert_eq!(
            embedded.check_integrity().unwrap().accounted_bytes,
            *from_embedded.last().unwrap()
        );
        assert_eq!(usage(&memory).quota_bytes, 0, "no quota");
        assert_eq!(usage(&memory).refusals, 0);
        assert!(memory.counters().snapshot().compactions > 0);
    }
}

mod etcd {
    use watchkeeper_store::{EtcdStore, Store, TxnError};

    use crate::common::{EtcdChild, test_etcd_config};

    /// Goal: etcd's own quota refusal (`etcdserver: mvcc: database space exceeded`, gRPC
    /// ResourceExhausted) reads as `TxnError::NoSpace`, not as an unavailable store, and is
    /// not retried; etcd keeps no account of ours.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn etcd_space_exceeded_is_no_space() {
        let etcd = EtcdChild::start(&["--quota-backend-bytes", "2097152"]);
        let store = EtcdStore::connect(test_etcd_config(&etcd.endpoint()))
            .await
            .unwrap();
        assert_eq!(store.quota_usage(), None);
        let value = "v".repeat(512 * 1024);
        let mut refused = None;
        for n in 0..64 {
            match store.put(format!("/fill/{n}"), value.clone()).await {
                Ok(_) => {}
                Err(error) => {
                    refused = Some(error);
                    break;
                }
            }
        }
        assert_eq!(refused, Some(TxnError::NoSpace));
        // Reads still work.
        assert!(store.get("/fill/0").await.unwrap().is_some());
    }
}

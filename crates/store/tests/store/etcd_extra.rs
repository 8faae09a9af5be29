//! etcd-specific behaviour: foreign writers, reconnects, compaction during an outage,
//! progress notifications.

use std::process::Command;
use std::time::Duration;

use watchkeeper_store::{EtcdStore, KeySelector, RangeRequest, Store, StoreError, WatchItem};

use crate::common::{
    EtcdChild, HANG_GUARD, etcd_shared, k, next_item, next_revision, shared_etcd, test_etcd_config,
    unique_prefix,
};

fn etcdctl(endpoint: &str, args: &[&str]) {
    let out = Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .args(["--endpoints", endpoint])
        .args(args)
        .output()
        .expect("cannot run etcdctl");
    assert!(out.status.success(), "etcdctl failed: {out:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcdctl_put_shows_up_in_watch_and_range() {
    let (s, _g) = etcd_shared().await;
    let p = unique_prefix("etcdctl");
    let mut w = s.watch(KeySelector::prefix(p.clone()), 0).await.unwrap();
    let key = format!("{p}from-etcdctl");
    etcdctl(&shared_etcd(), &["put", &key, "hello"]);
    let (rev, ev) = next_revision(&mut w).await;
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0].kv.key, key.as_bytes());
    assert_eq!(ev[0].kv.value, "hello");
    let r = s.range(RangeRequest::prefix(p.clone())).await.unwrap();
    assert_eq!(r.kvs.len(), 1);
    assert_eq!(r.kvs[0].mod_revision, rev);
    assert_eq!(r.kvs[0].value, "hello");
}

/// Puts, retrying while a restarted etcd comes back (bounded attempts).
async fn put_retrying(s: &EtcdStore, key: bytes::Bytes, value: String) -> u64 {
    let mut last = None;
    for _ in 0..100 {
        match s.put(key.clone(), value.clone()).await {
            Ok(rev) => return rev,
            Err(e) => last = Some(e),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("put kept failing: {:?}", last.map(StoreError::from));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_resumes_without_gap_after_etcd_restart() {
    let mut etcd = EtcdChild::start(&[]);
    let s = EtcdStore::connect(test_etcd_config(&etcd.endpoint()))
        .await
        .unwrap();
    let p = "/restart/";
    let mut w = s.watch(KeySelector::prefix(p), 0).await.unwrap();
    let mut revs = Vec::new();
    for i in 0..5 {
        revs.push(s.put(k(p, &format!("k{i}")), format!("{i}")).await.unwrap());
    }
    // Consume part of it before the restart, leave the rest in flight.
    for want in &revs[..3] {
        assert_eq!(next_revision(&mut w).await.0, *want);
    }
    etcd.kill_and_restart();
    for i in 5..10 {
        revs.push(put_retrying(&s, k(p, &format!("k{i}")), format!("{i}")).await);
    }
    for (i, want) in revs.iter().enumerate().skip(3) {
        let (rev, ev) = next_revision(&mut w).await;
        assert_eq!(rev, *want, "no gap, no duplicate");
        assert_eq!(ev[0].kv.value, format!("{i}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_resuming_into_compacted_history_reports_compacted() {
    let mut etcd = EtcdChild::start(&[]);
    let mut cfg = test_etcd_config(&etcd.endpoint());
    // Long enough that the restart, the writes and the compaction below happen before
    // the watch tries to resume.
    cfg.reconnect_backoff_initial = Duration::from_secs(8);
    cfg.reconnect_backoff_max = Duration::from_secs(8);
    let s = EtcdStore::connect(cfg).await.unwrap();
    let p = "/compacted-resume/";
    let mut w = s.watch(KeySelector::prefix(p), 0).await.unwrap();
    let r1 = s.put(k(p, "a"), "1").await.unwrap();
    assert_eq!(next_revision(&mut w).await.0, r1);
    etcd.kill_and_restart();
    put_retrying(&s, k(p, "a"), "2".into()).await;
    let r3 = put_retrying(&s, k(p, "a"), "3".into()).await;
    s.compact(r3).await.unwrap();
    match tokio::time::timeout(Duration::from_secs(60), w.next()).await {
        Ok(Some(WatchItem::Compacted {
            requested,
            compact_revision,
        })) => {
            assert_eq!(requested, r1 + 1);
            assert_eq!(compact_revision, r3);
        }
        other => panic!("expected Compacted, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_notifications_arrive() {
    let etcd = EtcdChild::start(&["--experimental-watch-progress-notify-interval", "100ms"]);
    let s = EtcdStore::connect(test_etcd_config(&etcd.endpoint()))
        .await
        .unwrap();
    let mut w = s.watch(KeySelector::prefix("/watched/"), 0).await.unwrap();
    let r = s.put("/elsewhere/x", "x").await.unwrap();
    let deadline = tokio::time::Instant::now() + HANG_GUARD;
    loop {
        assert!(tokio::time::Instant::now() < deadline, "no progress at {r}");
        match next_item(&mut w).await {
            WatchItem::Progress { revision } if revision >= r => break,
            WatchItem::Progress { .. } => continue,
            other => panic!("expected progress, got {other:?}"),
        }
    }
}

/// A dead endpoint beside a live one (an etcd member killed): no request fails, writes
/// included. A request that could not connect never reached etcd, so it is sent again and
/// reaches a member that answers (as etcd's own client never sends to an unconnected member).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_endpoint_beside_a_live_one_fails_no_request() {
    let dead = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    let s = EtcdStore::connect(watchkeeper_store::EtcdConfig::new([dead, shared_etcd()]))
        .await
        .unwrap();
    let p = unique_prefix("dead-endpoint");
    for i in 0..20 {
        let rev = s
            .put(k(&p, &format!("k{i}")), format!("{i}"))
            .await
            .expect("a write with one endpoint dead");
        let current = s
            .current_revision()
            .await
            .expect("a revision read with one endpoint dead");
        assert!(current >= rev);
        let listed = s
            .range(RangeRequest::prefix(p.clone()))
            .await
            .expect("a range with one endpoint dead");
        assert_eq!(listed.kvs.len(), i + 1);
    }
}

/// A member that accepts connections but never answers (one of a two-member cluster whose
/// peer never started: etcd 3.4 serves clients only once it has joined a quorum) beside a
/// live etcd: the first read fails over to the live one once the keep-alive notices (here
/// 0.5 s + 0.5 s), and every later request, writes included, goes to the live one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_that_never_answers_is_left_for_a_live_one() {
    let port = || {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    };
    let (client, peer, absent) = (port(), port(), port());
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let endpoint = format!("http://127.0.0.1:{client}");
    let mut lonely = Command::new(crate::common::etcd_binary())
        .args(["--name", "a", "--data-dir"])
        .arg(dir.path().join("a"))
        .args(["--listen-client-urls", &endpoint])
        .args(["--advertise-client-urls", &endpoint])
        .args(["--listen-peer-urls", &format!("http://127.0.0.1:{peer}")])
        .args([
            "--initial-advertise-peer-urls",
            &format!("http://127.0.0.1:{peer}"),
        ])
        .args([
            "--initial-cluster",
            &format!("a=http://127.0.0.1:{peer},b=http://127.0.0.1:{absent}"),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("etcd");
    // Until it accepts connections (bounded poll).
    let mut attempts = 0;
    while std::net::TcpStream::connect(("127.0.0.1", client)).is_err() {
        attempts += 1;
        assert!(attempts < 1200, "the lonely member did not start");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let mut config = watchkeeper_store::EtcdConfig::new([endpoint, shared_etcd()]);
    config.keep_alive_interval = Duration::from_millis(500);
    config.keep_alive_timeout = Duration::from_millis(500);
    let s = EtcdStore::connect(config).await.unwrap();
    let first = tokio::time::timeout(HANG_GUARD, s.current_revision())
        .await
        .expect("hang");
    let p = unique_prefix("never-answers");
    let put = tokio::time::timeout(HANG_GUARD, s.put(k(&p, "a"), "1"))
        .await
        .expect("hang");
    let _ = lonely.kill();
    let _ = lonely.wait();
    first.expect("a read with a member that never answers first");
    let rev = put.expect("a write after the read moved on");
    let read = s.range(RangeRequest::prefix(p.clone())).await.unwrap();
    assert_eq!(read.kvs.len(), 1);
    assert_eq!(read.kvs[0].mod_revision, rev);
}

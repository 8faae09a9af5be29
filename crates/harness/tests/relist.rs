//! The server's relist after compaction, end to end on a real etcd.
//!
//! The reflector watches the store continuously, so a compaction while it is connected never
//! reaches past its position. The case that forces a relist is an outage: etcd goes away, and
//! while the server cannot reach it, another client writes and compacts past the revision the
//! reflector would resume from. When etcd is back, the resume fails as compacted; the server
//! must relist, reload every cache (the write made during the outage is served), and end every
//! open watch with an honest in-stream 410 — never a silent gap.

use std::process::Command;

use serde_json::Value;
use watchkeeper_harness::e2e::{self, HANG_GUARD, StoreChoice};
use watchkeeper_testkit::RawWatch;

fn etcdctl(endpoint: &str, args: &[&str]) -> Value {
    let out = Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .args(["--endpoints", endpoint, "-w", "json"])
        .args(args)
        .output()
        .expect("cannot run etcdctl (scripts/test installs it)");
    assert!(out.status.success(), "etcdctl {args:?} failed: {out:?}");
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

fn configmap(name: &str) -> String {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default"},
        "data": {"k": name},
    })
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_during_an_outage_relists_and_ends_watches_with_410() {
    let mut etcd = watchkeeper_harness::etcd::OwnEtcd::start().expect("own etcd");
    let store = StoreChoice::Etcd {
        endpoint: etcd.endpoint(),
        prefix: "/registry".to_owned(),
    };
    let server = e2e::start_server(e2e::serve_args(&store))
        .await
        .expect("server");
    let addr = server.addr;
    let base = "/api/v1/namespaces/default/configmaps";

    let (status, created) = e2e::request(addr, "POST", base, "application/json", &configmap("a"))
        .await
        .expect("create");
    assert_eq!(status, 201, "{created}");
    let created: Value = serde_json::from_str(&created).expect("JSON");
    let rv = created["metadata"]["resourceVersion"]
        .as_str()
        .expect("rv")
        .to_owned();

    // A watch from the created object's revision: nothing to replay, so it waits live.
    let mut watch = tokio::time::timeout(
        HANG_GUARD,
        RawWatch::open(
            addr,
            &format!("{base}?watch=1&resourceVersion={rv}"),
            None,
            &[],
        ),
    )
    .await
    .expect("watch head")
    .expect("the watch answers 200");
    let lists_before = server
        .app
        .reflector
        .lists
        .load(std::sync::atomic::Ordering::Relaxed);

    // While the server cannot reach etcd: write b and compact past everything it has seen
    // (b's revision included).
    etcd.offline(|endpoint| {
        let put = etcdctl(
            endpoint,
            &["put", "/registry/configmaps/default/b", &configmap("b")],
        );
        // One more revision, so that the compaction removes b's revision too: the reflector
        // resumes from the revision after the last one it saw, which is b's.
        let after = etcdctl(endpoint, &["put", "/elsewhere/x", "y"]);
        let revision = after["header"]["revision"].as_u64().expect("revision");
        assert!(revision > put["header"]["revision"].as_u64().expect("revision"));
        etcdctl(endpoint, &["compact", &revision.to_string()]);
    })
    .expect("etcd offline and back");

    // The open watch ends with an in-stream 410 (after nothing else: no event was missed
    // silently and none invented).
    let frame = tokio::time::timeout(HANG_GUARD, watch.next_json())
        .await
        .expect("the watch neither ended nor got a frame")
        .expect("a JSON frame")
        .expect("the watch ended without a 410 frame");
    assert_eq!(frame["type"], "ERROR", "{frame}");
    assert_eq!(frame["object"]["code"], 410, "{frame}");

    // The caches were reloaded from a relist: b, written while the server was away, is served.
    let (status, got) = e2e::request(addr, "GET", &format!("{base}/b"), "", "")
        .await
        .expect("get b");
    assert_eq!(status, 200, "{got}");
    let got: Value = serde_json::from_str(&got).expect("JSON");
    assert_eq!(got["data"]["k"], "b");
    let lists_after = server
        .app
        .reflector
        .lists
        .load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        lists_after > lists_before,
        "no relist: {lists_before} → {lists_after}"
    );
    let (status, metrics) = e2e::request(addr, "GET", "/metrics", "", "")
        .await
        .expect("metrics");
    assert_eq!(status, 200);
    assert!(
        metrics.contains(&format!("watchkeeper_reflector_lists_total {lists_after}")),
        "{metrics}"
    );
    server.shutdown().await;
}

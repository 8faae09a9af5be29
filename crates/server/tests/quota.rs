//! `--store-quota-bytes` over real HTTP: a full memory or embedded store refuses writes as
//! kube-apiserver does over a full etcd (500, no reason, `etcdserver: mvcc: database space
//! exceeded`, byte for byte; kubectl prints `Error from server: ...`), writes nothing of them,
//! keeps serving reads and deletes, and accepts writes again once deletes and two compaction
//! rounds (driven here, not timed) have freed room; the compaction round itself is never
//! refused. A real etcd started with a small `--quota-backend-bytes` is answered the same way.
//!
//! The etcd test starts its own etcd from `ETCD_BINARY` (scripts/test sets it); it fails
//! without it rather than skipping.

use crate::common;
use crate::kubectl_support;

use std::net::SocketAddr;

use serde_json::Value;
use watchkeeper::Server;
use watchkeeper::config::ServeArgs;
use watchkeeper::source::compaction::{Compactor, Round};
use watchkeeper_store::Store;

use common::etcd::{EtcdFlags, OwnEtcd};
use common::{configmap, request, restarted, server_with};
use kubectl_support::Kubectl;

const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";

/// What kube-apiserver writes for a write etcd refused for its quota, byte for byte
/// (`ErrorToAPIStatus` of a non-Status error: code 500, `reason` empty and so omitted).
const NO_SPACE_BODY: &str = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"etcdserver: mvcc: database space exceeded","code":500}"#;

/// The smallest quota the flag accepts.
const QUOTA: u64 = 1 << 20;

/// Creates `name` with `payload` bytes of data; returns the status and the raw body.
async fn create(addr: SocketAddr, name: &str, payload: usize) -> (u16, String) {
    request(
        addr,
        "POST",
        CONFIGMAPS,
        "application/json",
        &configmap(name, payload).to_string(),
    )
    .await
}

/// Creates ConfigMaps of `payload` bytes until one is refused; checks the refusal is etcd's,
/// byte for byte, and (`exact`) that nothing of the refused create was written; returns the
/// names created. (etcd may apply a write it refuses: it checks its quota before a write and
/// again when applying it, and the second check only raises its alarm.)
async fn fill(addr: SocketAddr, payload: usize, exact: bool) -> Vec<String> {
    let mut created = Vec::new();
    for n in 0..64 {
        let name = format!("fill-{n}");
        let (status, body) = create(addr, &name, payload).await;
        if status == 201 {
            created.push(name);
            continue;
        }
        assert_eq!(
            (status, body.trim_end()),
            (500, NO_SPACE_BODY),
            "create {name}"
        );
        if exact {
            let (status, _) = request(addr, "GET", &format!("{CONFIGMAPS}/{name}"), "", "").await;
            assert_eq!(status, 404, "the refused {name} exists");
        }
        assert!(!created.is_empty(), "the first create was refused");
        return created;
    }
    panic!("64 creates of {payload} bytes were never refused");
}

/// The value of an unlabelled series in `/metrics`.
/// The whole cycle on one server with a 1 MiB quota and no periodic compaction.
async fn full_store_cycle(server: &Server) {
    let addr = server.addr;
    let created = fill(addr, 200_000, true).await;
    assert_eq!(
        common::metric(addr, "watchkeeper_store_quota_bytes").await,
        QUOTA
    );
    assert_eq!(
        common::metric(addr, "watchkeeper_store_quota_refusals_total").await,
        1
    );
    let full = common::metric(addr, "watchkeeper_store_size_bytes").await;
    assert!(full <= QUOTA, "{full} bytes held");
    // kubectl shows what it shows against a full etcd; an update is a put too.
    let kubectl = Kubectl::new(addr);
    let refused = kubectl
        .fails(&["label", "configmap", &created[0], "more=x"])
        .await;
    assert_eq!(
        refused.stderr.trim_end(),
        "Error from server: etcdserver: mvcc: database space exceeded",
        "{refused:?}"
    );
    let payload = kubectl.manifest("payload", &"x".repeat(200_000));
    let refused = kubectl
        .fails(&[
            "create",
            "configmap",
            "by-kubectl",
            &format!("--from-file=payload={payload}"),
        ])
        .await;
    assert_eq!(
        refused.stderr.trim_end(),
        "error: failed to create configmap: etcdserver: mvcc: database space exceeded",
        "{refused:?}"
    );
    // The same over plain HTTP; reads are served.
    let (status, body) = request(
        addr,
        "PATCH",
        &format!("{CONFIGMAPS}/{}", created[0]),
        "application/merge-patch+json",
        r#"{"metadata":{"labels":{"more":"x"}}}"#,
    )
    .await;
    assert_eq!((status, body.trim_end()), (500, NO_SPACE_BODY));
    let (status, list) = common::get_json(addr, CONFIGMAPS).await;
    assert_eq!(status, 200);
    assert_eq!(list["items"].as_array().map(Vec::len), Some(created.len()));
    // Deletes work over the quota, but free nothing before a compaction.
    for name in &created {
        let (status, body) = request(addr, "DELETE", &format!("{CONFIGMAPS}/{name}"), "", "").await;
        assert_eq!(status, 200, "delete {name}: {body}");
    }
    let (status, body) = create(addr, "after-deletes", 200_000).await;
    assert_eq!((status, body.trim_end()), (500, NO_SPACE_BODY));
    // Two compaction rounds, as the periodic compactor runs them: the first records the
    // revision (its write is exempt from the quota), the second compacts to it.
    let store = server.app.source.as_store().expect("a store");
    let mut compactor = Compactor::new("/registry");
    assert_eq!(compactor.round(store).await, Ok(Round::Recorded));
    assert!(matches!(
        compactor.round(store).await,
        Ok(Round::Compacted(_))
    ));
    let freed = store.quota_usage().expect("an account").used_bytes;
    assert!(freed < QUOTA / 4, "{freed} bytes held after compaction");
    assert_eq!(
        common::metric(addr, "watchkeeper_store_size_bytes").await,
        freed
    );
    let (status, body) = create(addr, "after-compaction", 200_000).await;
    assert_eq!(status, 201, "{body}");
    let (status, object) = common::get_json(addr, &format!("{CONFIGMAPS}/after-compaction")).await;
    assert_eq!(status, 200);
    assert_eq!(
        object["data"]["payload"].as_str().map(str::len),
        Some(200_000)
    );
}

/// Goal: the memory store at its quota answers as a full etcd, then takes writes again after
/// deletes and compaction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_memory_store_refuses_writes_until_deletes_and_compaction() {
    let server = server_with(ServeArgs {
        store: Some("memory".into()),
        store_quota_bytes: Some(QUOTA),
        compaction_interval_ms: Some(0),
        ..ServeArgs::default()
    })
    .await;
    full_store_cycle(&server).await;
    server.shutdown().await;
}

/// Goal: the same on the embedded store, whose account survives a restart: a full store
/// restarted is still full (and the restart itself is not refused).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_embedded_store_refuses_writes_until_deletes_and_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let args = || ServeArgs {
        store: Some("embedded".into()),
        data_dir: Some(dir.path().to_owned()),
        durable_commits: Some(false),
        store_quota_bytes: Some(QUOTA),
        compaction_interval_ms: Some(0),
        ..ServeArgs::default()
    };
    let server = server_with(args()).await;
    full_store_cycle(&server).await;
    // Fill it again and restart: still full.
    let created = fill(server.addr, 200_000, true).await;
    let held = common::metric(server.addr, "watchkeeper_store_size_bytes").await;
    server.shutdown().await;
    let server = restarted(args()).await;
    assert_eq!(
        common::metric(server.addr, "watchkeeper_store_size_bytes").await,
        held
    );
    let (status, body) = create(server.addr, "after-restart", 200_000).await;
    assert_eq!((status, body.trim_end()), (500, NO_SPACE_BODY));
    let (status, _) = common::get_json(server.addr, &format!("{CONFIGMAPS}/{}", created[0])).await;
    assert_eq!(status, 200);
    server.shutdown().await;
}

/// Goal: over a real etcd whose `--quota-backend-bytes` is reached, a create gets the same
/// Status as over a full memory or embedded store (before, etcd's refusal was a 503).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_etcd_is_answered_as_kube_apiserver_answers_it() {
    let etcd = OwnEtcd::start(EtcdFlags {
        quota_bytes: Some(4 << 20),
        ..EtcdFlags::default()
    });
    let server = server_with(ServeArgs {
        store: Some("etcd".into()),
        etcd_endpoints: Some(vec![etcd.endpoint.clone()]),
        compaction_interval_ms: Some(0),
        ..ServeArgs::default()
    })
    .await;
    fill(server.addr, 500_000, false).await;
    // The server keeps no account of etcd's.
    let (_, text) = request(server.addr, "GET", "/metrics", "", "").await;
    assert!(!text.contains("watchkeeper_store_quota_bytes"), "{text}");
    let (status, list): (u16, Value) = common::get_json(server.addr, CONFIGMAPS).await;
    assert_eq!(status, 200, "{list}");
    server.shutdown().await;
    drop(etcd);
}

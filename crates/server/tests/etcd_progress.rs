//! A server over an etcd whose revision moves on outside the registry prefix (another program,
//! a sibling server with another `--etcd-prefix`), with etcd's default progress notifications
//! (every 10 minutes): consistent reads and a restart's history replay must not wait for
//! them. The server nudges its own watch with a write of `<prefix>/freshness_key`
//! (`source::nudge`); with `--fresh-nudge-ms 0` it does not, and the same read is kube's 504.
//!
//! Each test starts its own etcd from `ETCD_BINARY` (scripts/test sets it; a test fails
//! without it rather than skipping), without `--experimental-watch-progress-notify-interval`.

use crate::common;

use serde_json::Value;
use watchkeeper::config::ServeArgs;
use watchkeeper_store::{AnyStore, EtcdConfig, Store, StoreConfig, TxnRequest};

use common::etcd::{EtcdFlags, OwnEtcd};
use common::{configmap, get_json, metric, send_json, server_with};

const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";
const NUDGES: &str = "watchkeeper_store_freshness_nudges_total{result=\"written\"}";

fn over(etcd: &OwnEtcd) -> ServeArgs {
    ServeArgs {
        store: Some("etcd".into()),
        etcd_endpoints: Some(vec![etcd.endpoint.clone()]),
        ..ServeArgs::default()
    }
}

/// Writes `count` keys outside the registry prefix, as another program sharing etcd does.
async fn write_elsewhere(etcd: &OwnEtcd, count: usize) {
    let store = AnyStore::open(StoreConfig::Etcd(EtcdConfig::new([etcd.endpoint.clone()])))
        .await
        .unwrap();
    for i in 0..count {
        store
            .txn(TxnRequest::put(format!("/elsewhere/k{i}"), "v"))
            .await
            .unwrap();
    }
}

/// Goal: a consistent GET and LIST after etcd's revision moved on outside the prefix are
/// served from the cache (200, the object there), by a nudge of the server's own watch —
/// before the nudge they waited for etcd's progress notification and answered 504.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consistent_reads_are_served_when_etcd_moved_on_elsewhere() {
    let etcd = OwnEtcd::start(EtcdFlags::default());
    let server = server_with(over(&etcd)).await;
    let (code, created) = send_json(server.addr, "POST", CONFIGMAPS, &configmap("a", 1)).await;
    assert_eq!(code, 201, "{created}");
    let before = metric(server.addr, NUDGES).await;
    write_elsewhere(&etcd, 3).await;
    let (code, got) = get_json(server.addr, &format!("{CONFIGMAPS}/a")).await;
    assert_eq!(code, 200, "{got}");
    assert_eq!(got["metadata"]["uid"], created["metadata"]["uid"]);
    write_elsewhere(&etcd, 1).await;
    let (code, list) = get_json(server.addr, CONFIGMAPS).await;
    assert_eq!(code, 200, "{list}");
    let names: Vec<&Value> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| &item["metadata"]["name"])
        .collect();
    assert_eq!(names, ["a"], "{list}");
    // The list's resource version is etcd's revision, past the writes elsewhere.
    let listed: u64 = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let created_at: u64 = created["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(listed >= created_at + 4, "{listed} after {created_at}");
    assert!(metric(server.addr, NUDGES).await > before, "nudged");
    server.shutdown().await;
}

/// Goal: the same read with nudges off (`--fresh-nudge-ms 0`) waits for etcd's progress
/// notification, which does not come within the fresh wait: kube's 504 "Too large resource
/// version" — what the nudge is for (and that the test above can fail).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_nudges_the_read_waits_for_etcd_and_times_out() {
    let etcd = OwnEtcd::start(EtcdFlags::default());
    let server = server_with(ServeArgs {
        fresh_nudge_ms: Some(0),
        fresh_wait_ms: Some(300),
        ..over(&etcd)
    })
    .await;
    let (code, created) = send_json(server.addr, "POST", CONFIGMAPS, &configmap("a", 1)).await;
    assert_eq!(code, 201, "{created}");
    write_elsewhere(&etcd, 1).await;
    let (code, got) = get_json(server.addr, &format!("{CONFIGMAPS}/a")).await;
    assert_eq!(code, 504, "{got}");
    assert!(
        got["message"]
            .as_str()
            .is_some_and(|m| m.contains("Too large resource version")),
        "{got}"
    );
    let text = common::metrics_text(server.addr).await;
    assert!(
        !text.contains("watchkeeper_store_freshness_nudges_total"),
        "no nudges: {text}"
    );
    server.shutdown().await;
}

/// Goal: a restart that rebuilds its history (`--rebuild-history`, the default) is ready
/// once it has replayed etcd's history, when etcd's revision last moved outside the prefix:
/// the replay's target is a nudge of its own watch. Before, it was the revision etcd
/// reported, reached only by etcd's progress notification (10 minutes), and the server
/// stayed unready (a sibling instance's start in the shared-etcd tests hung this way).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_is_ready_when_etcd_moved_on_elsewhere() {
    let etcd = OwnEtcd::start(EtcdFlags::default());
    // The same address both times, as a restarted server has: its start then writes nothing
    // (the `kubernetes` Endpoints already name it), so no write of its own ends the replay.
    let port = watchkeeper_testkit::ports::restartable_port();
    let args = || ServeArgs {
        listen: Some(std::net::SocketAddr::from(([127, 0, 0, 1], port))),
        ..watchkeeper_testkit::loopback(over(&etcd))
    };
    let first = watchkeeper_testkit::start_server(args()).await.unwrap();
    let (code, created) = send_json(first.addr, "POST", CONFIGMAPS, &configmap("a", 1)).await;
    assert_eq!(code, 201, "{created}");
    first.shutdown().await;
    write_elsewhere(&etcd, 3).await;
    let second = watchkeeper_testkit::start_server(args())
        .await
        .expect("ready after the replay");
    let (code, got) = get_json(second.addr, &format!("{CONFIGMAPS}/a")).await;
    assert_eq!(code, 200, "{got}");
    // Served from the rebuilt history: a read at the create's resource version.
    let (code, list) = get_json(
        second.addr,
        &format!(
            "{CONFIGMAPS}?resourceVersion={}&resourceVersionMatch=NotOlderThan",
            created["metadata"]["resourceVersion"].as_str().unwrap()
        ),
    )
    .await;
    assert_eq!(code, 200, "{list}");
    second.shutdown().await;
}

/// Goal: a watch list (`sendInitialEvents=true`, no resource version: the state as of etcd's
/// revision, client-go's streaming list) after etcd's revision moved on outside the prefix
/// gets its initial events and the `k8s.io/initial-events-end` bookmark — before the nudge it
/// waited for etcd's progress notification and ended at the initial no-progress timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_list_completes_when_etcd_moved_on_elsewhere() {
    let etcd = OwnEtcd::start(EtcdFlags::default());
    let server = server_with(over(&etcd)).await;
    let (code, created) = send_json(server.addr, "POST", CONFIGMAPS, &configmap("a", 1)).await;
    assert_eq!(code, 201, "{created}");
    write_elsewhere(&etcd, 2).await;
    let mut watch = common::WatchReader::open(
        server.addr,
        &format!(
            "{CONFIGMAPS}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"
        ),
        None,
    )
    .await;
    let added = watch.next().await.expect("the initial event");
    assert_eq!(added["type"], "ADDED", "{added}");
    assert_eq!(added["object"]["metadata"]["name"], "a", "{added}");
    let end = watch.next().await.expect("the end of the initial events");
    assert_eq!(end["type"], "BOOKMARK", "{end}");
    assert_eq!(
        end["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"], "true",
        "{end}"
    );
    server.shutdown().await;
}

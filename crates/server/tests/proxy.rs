//! Caching-proxy mode end to end: an upstream watchkeeper on the embedded store, a proxy
//! watchkeeper in front of it (`--upstream`), and a second-tier proxy in front of the proxy.
//! kube-rs and the real kubectl against the proxies read, list, watch, write and delete;
//! writes through a proxy are visible upstream, in watches on both tiers, and readable at
//! once through the proxy (read-your-writes); restarting the upstream on the same data and
//! port leaves proxy watchers open and resumed without gaps or duplicates (or ended with an
//! honest in-stream 410); 1,000 watchers on the proxy, some never reading, cost the upstream
//! one watch.
//!
//! No test sleeps on wall time or asserts a duration: every wait is for an event or a
//! condition, bounded by [`common::HANG_GUARD`] as a hang guard only.

use crate::common;
use crate::kubectl_support;

use std::net::SocketAddr;
use std::path::Path;

use common::{HANG_GUARD, WatchReader, get_json, send_json};
use futures_util::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, GetParams, ListParams, Patch, PatchParams, PostParams};
use kube::core::WatchEvent;
use kube::{Client, Config, ResourceExt};
use serde_json::{Value, json};
use watchkeeper::Server;
use watchkeeper::config::{ServeArgs, ServeConfig};

/// An upstream watchkeeper on the embedded store in `dir`, listening on `listen`.
async fn upstream_at(dir: &Path, listen: SocketAddr) -> Server {
    upstream_with(dir, listen, true).await
}

/// [`upstream_at`], rebuilding its caches' history on start or not (`--rebuild-history`).
async fn upstream_with(dir: &Path, listen: SocketAddr, rebuild_history: bool) -> Server {
    let config = ServeConfig::from_args(ServeArgs {
        listen: Some(listen),
        store: Some("embedded".to_owned()),
        data_dir: Some(dir.to_path_buf()),
        durable_commits: Some(false),
        rebuild_history: Some(rebuild_history),
        // The tests count the objects they create in `default`.
        enable_root_ca_cert_publisher: Some(false),
        ..ServeArgs::default()
    })
    .unwrap();
    // After a shutdown the store's file lock is released by a background task: retry on a
    // real condition (the open failing), bounded by the hang guard (not a number of tries: on
    // a busy machine the task may run late).
    let give_up = std::time::Instant::now() + HANG_GUARD;
    let server = loop {
        match watchkeeper::start(config.clone()).await {
            Ok(server) => break server,
            Err(error) => {
                assert!(
                    std::time::Instant::now() < give_up,
                    "the upstream cannot start: {error}"
                );
                tokio::task::yield_now().await;
            }
        }
    };
    tokio::time::timeout(HANG_GUARD, server.ready())
        .await
        .expect("upstream ready");
    server
}

/// A proxy in front of `upstream`, caching `resources` (all when empty).
async fn proxy_of(upstream: SocketAddr, resources: &[&str]) -> Server {
    proxy_with(upstream, resources, true).await
}

/// [`proxy_of`], loading with streaming lists or paged lists.
async fn proxy_with(upstream: SocketAddr, resources: &[&str], streaming: bool) -> Server {
    let config = ServeConfig::from_args(ServeArgs {
        upstream_streaming_lists: Some(streaming),
        // Small pages, so paged loads of the upstream really take several pages.
        upstream_list_page_size: Some(2),
        listen: Some("127.0.0.1:0".parse().unwrap()),
        upstream: Some(format!("http://{upstream}")),
        upstream_resources: (!resources.is_empty())
            .then(|| resources.iter().map(|r| (*r).to_owned()).collect()),
        fresh_wait_ms: Some(1000),
        ..ServeArgs::default()
    })
    .unwrap();
    let server = watchkeeper::start(config).await.expect("the proxy starts");
    tokio::time::timeout(HANG_GUARD, server.ready())
        .await
        .expect("proxy ready");
    server
}

fn client(addr: SocketAddr) -> Client {
    Client::try_from(Config::new(format!("http://{addr}").parse().unwrap())).unwrap()
}

fn configmaps(addr: SocketAddr) -> Api<ConfigMap> {
    Api::namespaced(client(addr), "default")
}

fn cm(name: &str, value: &str) -> ConfigMap {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": {"app": "proxy-test"}},
        "data": {"v": value}
    }))
    .unwrap()
}

fn rv(object: &ConfigMap) -> u64 {
    object.resource_version().unwrap().parse().unwrap()
}

/// One metric sample from `/metrics` of `addr` (0 when absent).
async fn metric(addr: SocketAddr, sample: &str) -> u64 {
    let (status, text) = common::request(addr, "GET", "/metrics", "text/plain", "").await;
    assert_eq!(status, 200);
    text.lines()
        .find_map(|line| line.strip_prefix(sample)?.strip_prefix(' '))
        .map_or(0, |v| v.trim().parse::<f64>().unwrap_or(0.0) as u64)
}

/// Polls `metric` until `ready` holds (bounded number of yields between real requests).
async fn wait_metric(addr: SocketAddr, sample: &str, ready: impl Fn(u64) -> bool) -> u64 {
    let wait = async {
        loop {
            let value = metric(addr, sample).await;
            if ready(value) {
                return value;
            }
            tokio::task::yield_now().await;
        }
    };
    tokio::time::timeout(HANG_GUARD, wait)
        .await
        .unwrap_or_else(|_| panic!("{sample} never reached the expected value"))
}

type Events = futures_util::stream::BoxStream<'static, kube::Result<WatchEvent<ConfigMap>>>;

async fn watch_from(api: &Api<ConfigMap>, rv: &str) -> Events {
    api.watch(&kube::api::WatchParams::default().timeout(290), rv)
        .await
        .expect("watch")
        .boxed()
}

/// The next ADDED/MODIFIED/DELETED event (bookmarks skipped): (type, name, rv).
async fn next_change(events: &mut Events) -> (String, String, u64) {
    loop {
        let event = tokio::time::timeout(HANG_GUARD, events.try_next())
            .await
            .expect("a watch event in time")
            .expect("a watch event")
            .expect("the watch is open");
        return match event {
            WatchEvent::Added(o) => ("ADDED".into(), o.name_any(), rv(&o)),
            WatchEvent::Modified(o) => ("MODIFIED".into(), o.name_any(), rv(&o)),
            WatchEvent::Deleted(o) => ("DELETED".into(), o.name_any(), rv(&o)),
            WatchEvent::Bookmark(_) => continue,
            WatchEvent::Error(e) => panic!("watch error {e:?}"),
        };
    }
}

/// kube-rs against two tiers of proxies: reads, lists, watches, writes, deletes; every write
/// is visible upstream and in watches on every tier, and readable at once through the proxy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_rs_through_two_tiers() {
    let dir = tempfile::tempdir().unwrap();
    let upstream = upstream_at(dir.path(), "127.0.0.1:0".parse().unwrap()).await;
    let tier1 = proxy_of(upstream.addr, &[]).await;
    let tier2 = proxy_of(tier1.addr, &[]).await;
    let (up, p1, p2) = (
        configmaps(upstream.addr),
        configmaps(tier1.addr),
        configmaps(tier2.addr),
    );

    // Discovery through two tiers is the upstream's.
    let (_, discovered) = get_json(tier2.addr, "/api/v1").await;
    let (_, original) = get_json(upstream.addr, "/api/v1").await;
    let names = |v: &Value| -> Vec<String> {
        v["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(names(&discovered), names(&original));

    // Watches on every tier from the same list resource version.
    let start = up.list(&ListParams::default()).await.unwrap();
    let start = start.metadata.resource_version.unwrap();
    let mut watches = vec![
        watch_from(&up, &start).await,
        watch_from(&p1, &start).await,
        watch_from(&p2, &start).await,
    ];

    // Create through the second tier: readable at once from the proxy's cache (rv=0).
    let created = p2
        .create(&PostParams::default(), &cm("a", "1"))
        .await
        .unwrap();
    let cached = p2.get_with("a", &GetParams::any()).await.unwrap();
    assert_eq!(rv(&cached), rv(&created), "read-your-writes through tier 2");
    assert_eq!(
        rv(&up.get("a").await.unwrap()),
        rv(&created),
        "upstream has it"
    );
    assert_eq!(
        rv(&p2.get("a").await.unwrap()),
        rv(&created),
        "consistent get"
    );

    // Update through the first tier, patch through the second.
    let mut changed = cached.clone();
    changed.data = Some([("v".to_owned(), "2".to_owned())].into());
    let updated = p1
        .replace("a", &PostParams::default(), &changed)
        .await
        .unwrap();
    assert_eq!(
        rv(&p1.get_with("a", &GetParams::any()).await.unwrap()),
        rv(&updated)
    );
    let patched = p2
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"v": "3"}})),
        )
        .await
        .unwrap();
    assert_eq!(
        p2.get_with("a", &GetParams::any())
            .await
            .unwrap()
            .data
            .unwrap()["v"],
        "3"
    );

    // Errors come back from the upstream unchanged.
    match p2.create(&PostParams::default(), &cm("a", "again")).await {
        Err(kube::Error::Api(status)) => assert_eq!(
            (status.code, status.reason.as_str()),
            (409, "AlreadyExists")
        ),
        other => panic!("expected 409 AlreadyExists, got {other:?}"),
    }

    // Delete through the second tier: gone from its cache at once.
    p2.delete("a", &DeleteParams::default()).await.unwrap();
    match p2.get_with("a", &GetParams::any()).await {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 404),
        other => panic!("expected 404 after the delete, got {other:?}"),
    }

    // Every tier's watch saw the same changes at the same resource versions.
    let expected = [
        ("ADDED", rv(&created)),
        ("MODIFIED", rv(&updated)),
        ("MODIFIED", rv(&patched)),
    ];
    for events in &mut watches {
        for (kind, at) in expected {
            assert_eq!(
                next_change(events).await,
                (kind.to_owned(), "a".to_owned(), at)
            );
        }
        let (kind, name, at) = next_change(events).await;
        assert_eq!((kind.as_str(), name.as_str()), ("DELETED", "a"));
        assert!(at > rv(&patched));
    }

    // Lists agree across tiers (consistent lists: the proxy proves freshness or forwards).
    for i in 0..5 {
        p1.create(&PostParams::default(), &cm(&format!("b{i}"), "x"))
            .await
            .unwrap();
    }
    let state = |list: kube::core::ObjectList<ConfigMap>| -> Vec<(String, u64)> {
        list.items.iter().map(|o| (o.name_any(), rv(o))).collect()
    };
    let upstream_state = state(up.list(&ListParams::default()).await.unwrap());
    assert_eq!(upstream_state.len(), 5);
    assert_eq!(
        state(p1.list(&ListParams::default()).await.unwrap()),
        upstream_state
    );
    assert_eq!(
        state(p2.list(&ListParams::default()).await.unwrap()),
        upstream_state
    );
    // Paged through the proxy: every object once.
    let page = p2.list(&ListParams::default().limit(2)).await.unwrap();
    assert_eq!(page.items.len(), 2);
    assert!(page.metadata.continue_.is_some_and(|t| !t.is_empty()));

    // The proxy's metrics describe its upstream traffic.
    assert_eq!(
        metric(tier1.addr, "watchkeeper_upstream_streaming_lists").await,
        1
    );
    assert_eq!(
        metric(tier2.addr, "watchkeeper_upstream_streaming_lists").await,
        1
    );
    assert_eq!(
        metric(
            tier1.addr,
            "watchkeeper_upstream_open_watches{group=\"\",resource=\"configmaps\"}"
        )
        .await,
        1
    );
    assert!(
        metric(
            tier1.addr,
            "watchkeeper_upstream_forwarded_writes_total{group=\"\",resource=\"configmaps\"}"
        )
        .await
            >= 5
    );
    assert_eq!(
        metric(
            tier1.addr,
            "watchkeeper_upstream_downstream_watchers{group=\"\",resource=\"configmaps\"}"
        )
        .await,
        2,
        "tier 1 serves the test's watch and tier 2's one upstream watch"
    );
    tier2.shutdown().await;
    tier1.shutdown().await;
    upstream.shutdown().await;
}

/// The real kubectl against a proxy: get, create (a protobuf body), apply, delete, watch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_against_the_proxy() {
    let dir = tempfile::tempdir().unwrap();
    let upstream = upstream_at(dir.path(), "127.0.0.1:0".parse().unwrap()).await;
    let proxy = proxy_of(upstream.addr, &[]).await;
    let k = kubectl_support::Kubectl::new(proxy.addr);

    let namespaces = k.ok(&["get", "namespaces"]).await;
    assert!(
        kubectl_support::names(&namespaces).contains(&"default".to_owned()),
        "{namespaces}"
    );
    let mut watch = k.spawn(&["get", "configmaps", "-w", "--output-watch-events"]);

    k.ok(&["create", "configmap", "made", "--from-literal=k=v"])
        .await;
    let made = k.json(&["get", "configmap", "made"]).await;
    assert_eq!(made["data"]["k"], "v");
    watch
        .line_matching(|l| l.contains("ADDED") && l.contains("made"))
        .await;
    let (status, upstream_copy) =
        get_json(upstream.addr, "/api/v1/namespaces/default/configmaps/made").await;
    assert_eq!(status, 200);
    assert_eq!(
        upstream_copy["metadata"]["resourceVersion"],
        made["metadata"]["resourceVersion"]
    );

    let manifest = k.manifest(
        "applied.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\ndata:\n  a: \"1\"\n",
    );
    assert!(k.ok(&["apply", "-f", &manifest]).await.contains("created"));
    assert!(
        k.ok(&["apply", "-f", &manifest])
            .await
            .contains("unchanged")
    );
    let manifest = k.manifest(
        "applied.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\ndata:\n  a: \"2\"\n",
    );
    assert!(
        k.ok(&["apply", "-f", &manifest])
            .await
            .contains("configured")
    );
    assert_eq!(
        k.json(&["get", "configmap", "applied"]).await["data"]["a"],
        "2"
    );
    watch
        .line_matching(|l| l.contains("MODIFIED") && l.contains("applied"))
        .await;

    k.ok(&["delete", "configmap", "made", "applied"]).await;
    let missing = k.fails(&["get", "configmap", "made"]).await;
    assert!(missing.stderr.contains("NotFound"), "{}", missing.stderr);
    watch
        .line_matching(|l| l.contains("DELETED") && l.contains("applied"))
        .await;
    let (status, _) = get_json(upstream.addr, "/api/v1/namespaces/default/configmaps/made").await;
    assert_eq!(status, 404, "the delete reached the upstream");
    drop(watch);
    proxy.shutdown().await;
    upstream.shutdown().await;
}

/// The resource version of a list of `path` on `addr`.
async fn list_resource_version(addr: SocketAddr, path: &str) -> String {
    let (_, list) = get_json(addr, path).await;
    list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// A raw watch of `path` on `addr` from the resource version of a list of it.
async fn watch_from_list(addr: SocketAddr, path: &str) -> WatchReader {
    let start = list_resource_version(addr, path).await;
    WatchReader::open(
        addr,
        &format!("{path}?watch=true&resourceVersion={start}"),
        None,
    )
    .await
}

/// The watch events of a raw stream until the configmap `last` was added or the stream ended
/// with an error: (type, name, rv) in order.
async fn read_until(watch: &mut WatchReader, last: &str) -> Vec<(String, String, u64)> {
    let mut seen = Vec::new();
    loop {
        let Some(event) = watch.next().await else {
            panic!("the proxy watch ended without an error after {seen:?}");
        };
        let kind = event["type"].as_str().unwrap().to_owned();
        if kind == "BOOKMARK" {
            continue;
        }
        if kind == "ERROR" {
            seen.push((
                kind,
                String::new(),
                event["object"]["code"].as_u64().unwrap(),
            ));
            return seen;
        }
        let name = event["object"]["metadata"]["name"]
            .as_str()
            .unwrap()
            .to_owned();
        let at = event["object"]["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        let done = kind == "ADDED" && name == last;
        seen.push((kind, name, at));
        if done {
            return seen;
        }
    }
}

/// Killing the upstream and restarting it on the same data and port: the proxy's watchers
/// stay open and continue without a gap or a duplicate (or end with an honest 410 when the
/// proxy had to relist).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_restart_keeps_proxy_watchers() {
    let dir = tempfile::tempdir().unwrap();
    let upstream = upstream_at(dir.path(), "127.0.0.1:0".parse().unwrap()).await;
    let port = upstream.addr;
    // Paged lists here (the other tests load with streaming lists).
    let proxy = proxy_with(upstream.addr, &["configmaps"], false).await;
    assert_eq!(
        metric(proxy.addr, "watchkeeper_upstream_streaming_lists").await,
        0
    );
    let path = "/api/v1/namespaces/default/configmaps";
    let mut watch = watch_from_list(proxy.addr, path).await;
    for name in ["r1", "r2"] {
        let (status, _) = send_json(proxy.addr, "POST", path, &common::configmap(name, 8)).await;
        assert_eq!(status, 201);
    }
    let before = read_until(&mut watch, "r2").await;
    assert_eq!(before.len(), 2, "{before:?}");
    let watches_before = metric(
        proxy.addr,
        "watchkeeper_upstream_watches_total{group=\"\",resource=\"configmaps\"}",
    )
    .await;

    upstream.shutdown().await;
    wait_metric(
        proxy.addr,
        "watchkeeper_upstream_open_watches{group=\"\",resource=\"configmaps\"}",
        |open| open == 0,
    )
    .await;
    // Reads at resourceVersion=0 keep being served from the cache while the upstream is away.
    let (status, cached) = get_json(proxy.addr, &format!("{path}?resourceVersion=0")).await;
    assert_eq!(status, 200);
    assert_eq!(cached["items"].as_array().unwrap().len(), 2);

    let upstream = upstream_at(dir.path(), port).await;
    wait_metric(
        proxy.addr,
        "watchkeeper_upstream_open_watches{group=\"\",resource=\"configmaps\"}",
        |open| open == 1,
    )
    .await;
    assert!(
        metric(
            proxy.addr,
            "watchkeeper_upstream_watches_total{group=\"\",resource=\"configmaps\"}"
        )
        .await
            > watches_before
    );
    for name in ["r3", "r4"] {
        let (status, body) = send_json(proxy.addr, "POST", path, &common::configmap(name, 8)).await;
        assert_eq!(status, 201, "{body}");
    }
    let after = read_until(&mut watch, "r4").await;
    let relists = metric(
        proxy.addr,
        "watchkeeper_upstream_relists_total{group=\"\",resource=\"configmaps\"}",
    )
    .await;
    eprintln!("after the upstream restart the proxy watch saw {after:?} (relists: {relists})");
    if after.last().is_some_and(|(kind, _, _)| kind == "ERROR") {
        // An honest 410, and only because the proxy relisted.
        assert_eq!(after.last().unwrap().2, 410, "{after:?}");
        assert!(relists > 0, "a 410 without a relist: {after:?}");
    } else {
        let names: Vec<&str> = after.iter().map(|(_, n, _)| n.as_str()).collect();
        assert_eq!(names, ["r3", "r4"], "no gap, no duplicate: {after:?}");
        assert!(
            after[0].2 > before[1].2 && after[1].2 > after[0].2,
            "{before:?} {after:?}"
        );
        assert_eq!(relists, 0);
    }
    assert!(!watch.ended);
    proxy.shutdown().await;
    upstream.shutdown().await;
}

/// 1,000 watchers on the proxy (half of them never reading) cost the upstream one watch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousand_watchers_cost_the_upstream_one_watch() {
    let dir = tempfile::tempdir().unwrap();
    let upstream = upstream_at(dir.path(), "127.0.0.1:0".parse().unwrap()).await;
    let proxy = proxy_of(upstream.addr, &["configmaps"]).await;
    // Loaded by a streaming list, whose stream goes on as the watch: counted open before the
    // cache was loaded (the proxy is ready after that).
    assert_eq!(
        metric(
            proxy.addr,
            "watchkeeper_upstream_open_watches{group=\"\",resource=\"configmaps\"}"
        )
        .await,
        1
    );
    let path = "/api/v1/namespaces/default/configmaps";
    let start = list_resource_version(proxy.addr, path).await;
    let watch_path = format!("{path}?watch=true&resourceVersion={start}");
    let mut readers = Vec::new();
    let mut idle = Vec::new();
    for i in 0..1000 {
        // Half never read, with small receive buffers so back-pressure reaches the proxy.
        let reader = WatchReader::open(proxy.addr, &watch_path, (i % 2 == 1).then_some(4096)).await;
        if i % 2 == 0 {
            readers.push(reader);
        } else {
            idle.push(reader);
        }
    }
    wait_metric(
        proxy.addr,
        "watchkeeper_upstream_downstream_watchers{group=\"\",resource=\"configmaps\"}",
        |n| n == 1000,
    )
    .await;
    for i in 0..20 {
        let (status, _) = send_json(
            upstream.addr,
            "POST",
            path,
            &common::configmap(&format!("w{i:02}"), 2048),
        )
        .await;
        assert_eq!(status, 201);
    }
    for reader in &mut readers {
        let seen = read_until(reader, "w19").await;
        let names: Vec<String> = seen.into_iter().map(|(_, n, _)| n).collect();
        let expected: Vec<String> = (0..20).map(|i| format!("w{i:02}")).collect();
        assert_eq!(names, expected);
    }
    // The upstream served exactly one watch of configmaps, and it is the only one open.
    assert_eq!(
        metric(
            upstream.addr,
            "apiserver_request_total{verb=\"WATCH\",group=\"\",resource=\"configmaps\",code=\"200\"}"
        )
        .await,
        1
    );
    assert_eq!(
        metric(
            upstream.addr,
            "apiserver_registered_watchers{group=\"\",resource=\"configmaps\"}"
        )
        .await,
        1
    );
    assert_eq!(
        metric(
            proxy.addr,
            "watchkeeper_upstream_watches_total{group=\"\",resource=\"configmaps\"}"
        )
        .await,
        1
    );
    drop(idle);
    drop(readers);
    proxy.shutdown().await;
    upstream.shutdown().await;
}

/// Configuration errors are clear: a proxy cannot also have a store, and an unknown resource
/// is named with what the upstream serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_configuration_errors_are_clear() {
    let err = ServeConfig::from_args(ServeArgs {
        upstream: Some("http://127.0.0.1:1".into()),
        store: Some("embedded".into()),
        ..ServeArgs::default()
    })
    .unwrap_err()
    .to_string();
    assert!(err.contains("--store cannot be combined"), "{err}");
    let dir = tempfile::tempdir().unwrap();
    let upstream = upstream_at(dir.path(), "127.0.0.1:0".parse().unwrap()).await;
    let config = ServeConfig::from_args(ServeArgs {
        listen: Some("127.0.0.1:0".parse().unwrap()),
        upstream: Some(format!("http://{}", upstream.addr)),
        upstream_resources: Some(vec!["widgets.example.com".into()]),
        ..ServeArgs::default()
    })
    .unwrap();
    let err = watchkeeper::start(config).await.unwrap_err().to_string();
    assert!(
        err.contains("\"widgets.example.com\" is not a resource the upstream serves")
            && err.contains("configmaps"),
        "{err}"
    );
    upstream.shutdown().await;
}

/// A consistent read the cache cannot prove fresh in time (the upstream's resource version
/// moved on through another resource, and no bookmark came) is forwarded, never stale; one the
/// cache can prove fresh is served from the cache.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unprovable_consistent_reads_are_forwarded() {
    let dir = tempfile::tempdir().unwrap();
    let upstream = upstream_at(dir.path(), "127.0.0.1:0".parse().unwrap()).await;
    let proxy = proxy_of(upstream.addr, &["configmaps"]).await;
    let forwarded =
        "watchkeeper_upstream_forwarded_reads_total{group=\"\",resource=\"configmaps\"}";
    let path = "/api/v1/namespaces/default/configmaps";
    for name in ["c1", "c2"] {
        let (status, _) = send_json(proxy.addr, "POST", path, &common::configmap(name, 8)).await;
        assert_eq!(status, 201);
    }
    // The configmaps cache is at the upstream's resource version: served from the cache.
    let (status, list) = get_json(proxy.addr, path).await;
    assert_eq!(status, 200);
    assert_eq!(list["items"].as_array().unwrap().len(), 2);
    assert_eq!(metric(proxy.addr, forwarded).await, 0);

    // A namespace write moves the upstream's resource version past the configmaps cache.
    let (status, _) = send_json(
        upstream.addr,
        "POST",
        "/api/v1/namespaces",
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "elsewhere"}}),
    )
    .await;
    assert_eq!(status, 201);
    let (status, via_proxy) = get_json(proxy.addr, path).await;
    assert_eq!(status, 200);
    let (_, direct) = get_json(upstream.addr, path).await;
    assert_eq!(
        via_proxy["metadata"]["resourceVersion"],
        direct["metadata"]["resourceVersion"]
    );
    assert_eq!(via_proxy["items"], direct["items"]);
    assert_eq!(
        metric(proxy.addr, forwarded).await,
        1,
        "answered by the upstream"
    );
    // A read at resourceVersion=0 is still the cache's.
    let (status, cached) = get_json(proxy.addr, &format!("{path}?resourceVersion=0")).await;
    assert_eq!(status, 200);
    assert_eq!(cached["items"].as_array().unwrap().len(), 2);
    assert_eq!(metric(proxy.addr, forwarded).await, 1);
    // A forwarded paged list: its pages come from the upstream, at the upstream's version.
    let (status, first) = get_json(proxy.addr, &format!("{path}?limit=1")).await;
    assert_eq!(status, 200, "{first}");
    let token = first["metadata"]["continue"]
        .as_str()
        .expect("a continue token");
    let (status, second) = get_json(proxy.addr, &format!("{path}?limit=1&continue={token}")).await;
    assert_eq!(status, 200, "{second}");
    assert_eq!(
        first["metadata"]["resourceVersion"],
        direct["metadata"]["resourceVersion"]
    );
    assert_eq!(
        second["metadata"]["resourceVersion"],
        direct["metadata"]["resourceVersion"]
    );
    assert!(
        second["metadata"].get("continue").is_none_or(|c| c == ""),
        "{second}"
    );
    let pages: Vec<Value> = [first, second]
        .iter()
        .flat_map(|page| page["items"].as_array().unwrap().clone())
        .collect();
    assert_eq!(Value::Array(pages), direct["items"]);
    assert_eq!(metric(proxy.addr, forwarded).await, 3);
    proxy.shutdown().await;
    upstream.shutdown().await;
}

/// `--upstream-kubeconfig`: the proxy authenticates to the upstream with the kubeconfig's
/// bearer token (and is refused, clearly, without it); resources its identity may not list
/// are named at start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_credentials_come_from_the_kubeconfig() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(
        &tokens,
        "s3cret-proxy-token,proxy,uid-proxy,\"system:masters\"\n",
    )
    .unwrap();
    // The proxy's identity may read discovery and use configmaps, nothing else.
    let policy = dir.path().join("abac.jsonl");
    let rule = |spec: Value| {
        json!({"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": spec})
            .to_string()
    };
    std::fs::write(
        &policy,
        [
            rule(json!({"user": "proxy", "nonResourcePath": "*", "readonly": true})),
            rule(json!({"user": "proxy", "namespace": "*", "resource": "configmaps", "apiGroup": ""})),
        ]
        .join("\n"),
    )
    .unwrap();
    let config = ServeConfig::from_args(ServeArgs {
        listen: Some("127.0.0.1:0".parse().unwrap()),
        store: Some("embedded".to_owned()),
        data_dir: Some(dir.path().join("data")),
        durable_commits: Some(false),
        token_auth_file: Some(tokens),
        authorization_policy_file: Some(policy),
        ..ServeArgs::default()
    })
    .unwrap();
    let upstream = watchkeeper::start(config).await.unwrap();
    tokio::time::timeout(HANG_GUARD, upstream.ready())
        .await
        .unwrap();
    let kubeconfig = dir.path().join("kubeconfig.yaml");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters: [{{name: up, cluster: {{server: \"http://{}\"}}}}]\nusers: [{{name: proxy, user: {{token: s3cret-proxy-token}}}}]\ncontexts: [{{name: up, context: {{cluster: up, user: proxy}}}}]\ncurrent-context: up\n",
            upstream.addr
        ),
    )
    .unwrap();
    let proxy_config = |kubeconfig: Option<std::path::PathBuf>| {
        ServeConfig::from_args(ServeArgs {
            listen: Some("127.0.0.1:0".parse().unwrap()),
            upstream: kubeconfig
                .is_none()
                .then(|| format!("http://{}", upstream.addr)),
            upstream_kubeconfig: kubeconfig,
            upstream_resources: Some(vec!["configmaps".into()]),
            ..ServeArgs::default()
        })
        .unwrap()
    };
    let err = watchkeeper::start(proxy_config(None))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("401") || err.contains("Unauthorized"), "{err}");
    let proxy = watchkeeper::start(proxy_config(Some(kubeconfig)))
        .await
        .unwrap();
    tokio::time::timeout(HANG_GUARD, proxy.ready())
        .await
        .unwrap();
    let api = configmaps(proxy.addr);
    let created = api
        .create(&PostParams::default(), &cm("tok", "1"))
        .await
        .unwrap();
    assert_eq!(
        rv(&api.get_with("tok", &GetParams::any()).await.unwrap()),
        rv(&created)
    );
    proxy.shutdown().await;
    upstream.shutdown().await;
}

/// When the proxy cannot resume (the restarted upstream, without history rebuilding, starts
/// its history after the proxy's last version of the resource), it relists and its watchers get an honest in-stream 410;
/// the cache is then whole again and new watches see new writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relist_ends_proxy_watchers_with_410() {
    let dir = tempfile::tempdir().unwrap();
    let upstream = upstream_at(dir.path(), "127.0.0.1:0".parse().unwrap()).await;
    let port = upstream.addr;
    let proxy = proxy_of(upstream.addr, &["configmaps"]).await;
    let path = "/api/v1/namespaces/default/configmaps";
    let mut watch = watch_from_list(proxy.addr, path).await;
    let (status, _) = send_json(proxy.addr, "POST", path, &common::configmap("kept", 8)).await;
    assert_eq!(status, 201);
    assert_eq!(read_until(&mut watch, "kept").await.len(), 1);
    // The upstream stops (its final bookmark may carry the proxy to its last revision); another
    // instance on the same data, which the proxy does not watch, moves the store's version on;
    // the restarted upstream's history starts there, after every version the proxy has seen.
    upstream.shutdown().await;
    let other = upstream_at(dir.path(), "127.0.0.1:0".parse().unwrap()).await;
    let (status, _) = send_json(
        other.addr,
        "POST",
        "/api/v1/namespaces",
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "moved-on"}}),
    )
    .await;
    assert_eq!(status, 201);
    other.shutdown().await;
    let upstream = upstream_with(dir.path(), port, false).await;
    let relists = "watchkeeper_upstream_relists_total{group=\"\",resource=\"configmaps\"}";
    wait_metric(proxy.addr, relists, |n| n >= 1).await;
    let event = tokio::time::timeout(HANG_GUARD, watch.next())
        .await
        .unwrap()
        .expect("an in-stream error before the end");
    assert_eq!(event["type"], "ERROR", "{event}");
    assert_eq!(event["object"]["code"], 410, "{event}");
    assert!(
        watch.next().await.is_none(),
        "the stream ends after the 410"
    );
    // The relisted cache is whole, and a new watch from it sees new writes.
    let (_, list) = get_json(proxy.addr, &format!("{path}?resourceVersion=0")).await;
    let names: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["kept"]);
    let from = list["metadata"]["resourceVersion"].as_str().unwrap();
    let mut watch = WatchReader::open(
        proxy.addr,
        &format!("{path}?watch=true&resourceVersion={from}"),
        None,
    )
    .await;
    let (status, _) = send_json(proxy.addr, "POST", path, &common::configmap("new", 8)).await;
    assert_eq!(status, 201);
    let seen = read_until(&mut watch, "new").await;
    assert_eq!(seen.len(), 1, "{seen:?}");
    proxy.shutdown().await;
    upstream.shutdown().await;
}

/// kube-rs' runtime `watcher` (list-then-watch and streaming lists, both starting without a
/// resource version) through two tiers: the initial state, then live changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_rs_watchers_through_two_tiers() {
    use kube::runtime::watcher;
    let dir = tempfile::tempdir().unwrap();
    let upstream = upstream_at(dir.path(), "127.0.0.1:0".parse().unwrap()).await;
    let tier1 = proxy_of(upstream.addr, &["namespaces", "configmaps"]).await;
    let tier2 = proxy_of(tier1.addr, &["configmaps"]).await;
    let (up, p2) = (configmaps(upstream.addr), configmaps(tier2.addr));
    for i in 0..3 {
        up.create(&PostParams::default(), &cm(&format!("w{i}"), "0"))
            .await
            .unwrap();
    }
    for (round, config) in [
        watcher::Config::default(),
        watcher::Config::default().streaming_lists(),
    ]
    .into_iter()
    .enumerate()
    {
        let value = format!("changed-{round}");
        let mut events = watcher(p2.clone(), config).boxed();
        let mut next = async || {
            tokio::time::timeout(HANG_GUARD, events.next())
                .await
                .expect("a watcher event in time")
                .expect("the watcher goes on")
                .expect("no watcher error")
        };
        assert!(matches!(next().await, watcher::Event::Init));
        let mut initial = Vec::new();
        loop {
            match next().await {
                watcher::Event::InitApply(o) => initial.push(o.name_any()),
                watcher::Event::InitDone => break,
                other => panic!("unexpected {other:?}"),
            }
        }
        initial.sort();
        assert_eq!(initial, ["w0", "w1", "w2"]);
        up.patch(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"v": &value}})),
        )
        .await
        .unwrap();
        match next().await {
            watcher::Event::Apply(o) => {
                assert_eq!(
                    (o.name_any().as_str(), o.data.unwrap()["v"].as_str()),
                    ("w1", value.as_str())
                );
            }
            other => panic!("expected the change, got {other:?}"),
        }
    }
    tier2.shutdown().await;
    tier1.shutdown().await;
    upstream.shutdown().await;
}

/// `--upstream-impersonate`: the proxy forwards writes as the caller it authenticated, so the
/// upstream's own authorization decides them. The upstream lets the proxy's identity read
/// everything and impersonate users, groups and uids, but not write; alice may write configmaps in
/// `team-a` only. Through the proxy alice's write in `team-a` succeeds (as alice: the proxy
/// could not have written it) and her write in `default` is the upstream's 403 naming alice;
/// a caller the upstream does not let impersonate gets the upstream's 403 for that.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_through_the_proxy_act_as_the_caller_with_impersonation() {
    let dir = tempfile::tempdir().unwrap();
    let rule = |spec: Value| {
        json!({"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": spec})
            .to_string()
    };
    // The upstream: the proxy reads and impersonates; alice writes configmaps in team-a.
    let up_tokens = dir.path().join("up-tokens.csv");
    std::fs::write(
        &up_tokens,
        "proxy-token,proxy,uid-proxy,\"\"\nalice-up-token,alice,uid-alice,\"dev\"\nadmin-token,admin,uid-admin,\"\"\n",
    )
    .unwrap();
    let up_policy = dir.path().join("up-abac.jsonl");
    std::fs::write(
        &up_policy,
        [
            rule(json!({"user": "proxy", "nonResourcePath": "*", "readonly": true})),
            rule(json!({"user": "proxy", "namespace": "*", "resource": "*", "apiGroup": "*", "readonly": true})),
            rule(json!({"user": "proxy", "namespace": "*", "resource": "users", "apiGroup": ""})),
            rule(json!({"user": "proxy", "namespace": "*", "resource": "groups", "apiGroup": ""})),
            rule(json!({"user": "proxy", "namespace": "*", "resource": "uids", "apiGroup": "authentication.k8s.io"})),
            rule(json!({"user": "alice", "namespace": "team-a", "resource": "configmaps", "apiGroup": ""})),
            rule(json!({"user": "admin", "namespace": "*", "resource": "*", "apiGroup": "*"})),
        ]
        .join("\n"),
    )
    .unwrap();
    let upstream = watchkeeper::start(
        ServeConfig::from_args(ServeArgs {
            listen: Some("127.0.0.1:0".parse().unwrap()),
            store: Some("embedded".to_owned()),
            data_dir: Some(dir.path().join("data")),
            durable_commits: Some(false),
            token_auth_file: Some(up_tokens),
            authorization_policy_file: Some(up_policy),
            ..ServeArgs::default()
        })
        .unwrap(),
    )
    .await
    .unwrap();
    tokio::time::timeout(HANG_GUARD, upstream.ready())
        .await
        .unwrap();
    // team-a exists (created upstream by an admin; alice may not create namespaces).
    let (status, text) = common::request_with_headers(
        upstream.addr,
        "POST",
        "/api/v1/namespaces",
        &[("Authorization", "Bearer admin-token")],
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})
            .to_string(),
    )
    .await;
    assert_eq!(status, 201, "{text}");
    let kubeconfig = dir.path().join("kubeconfig.yaml");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters: [{{name: up, cluster: {{server: \"http://{}\"}}}}]\nusers: [{{name: proxy, user: {{token: proxy-token}}}}]\ncontexts: [{{name: up, context: {{cluster: up, user: proxy}}}}]\ncurrent-context: up\n",
            upstream.addr
        ),
    )
    .unwrap();
    // The proxy authenticates its own callers: alice, and mallory whom the upstream does not
    // know as a writer either.
    let proxy_tokens = dir.path().join("proxy-tokens.csv");
    std::fs::write(
        &proxy_tokens,
        "alice-token,alice,uid-alice,\"dev\"\nmallory-token,mallory,uid-m,\"\"\n",
    )
    .unwrap();
    let proxy = watchkeeper::start(
        ServeConfig::from_args(ServeArgs {
            listen: Some("127.0.0.1:0".parse().unwrap()),
            upstream_kubeconfig: Some(kubeconfig),
            upstream_resources: Some(vec!["configmaps".into(), "namespaces".into()]),
            upstream_impersonate: Some(true),
            token_auth_file: Some(proxy_tokens),
            ..ServeArgs::default()
        })
        .unwrap(),
    )
    .await
    .unwrap();
    tokio::time::timeout(HANG_GUARD, proxy.ready())
        .await
        .unwrap();
    let as_alice = [("Authorization", "Bearer alice-token")];
    let body = |ns: &str, name: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}, "data": {"by": "alice"}})
            .to_string()
    };
    // Alice's write in team-a: allowed upstream for alice (the proxy itself is read-only).
    let (status, text) = common::request_with_headers(
        proxy.addr,
        "POST",
        "/api/v1/namespaces/team-a/configmaps",
        &as_alice,
        &body("team-a", "mine"),
    )
    .await;
    assert_eq!(status, 201, "{text}");
    // Read-your-writes through the proxy, as alice.
    let (status, text) = common::request_with_headers(
        proxy.addr,
        "GET",
        "/api/v1/namespaces/team-a/configmaps/mine?resourceVersion=0",
        &as_alice,
        "",
    )
    .await;
    assert_eq!(status, 200, "{text}");
    // Alice's write in default: the upstream's 403, naming alice (not the proxy).
    let (status, text) = common::request_with_headers(
        proxy.addr,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        &as_alice,
        &body("default", "not-mine"),
    )
    .await;
    assert_eq!(status, 403, "{text}");
    assert!(text.contains("User \\\"alice\\\""), "{text}");
    // Nothing was half-written.
    let (status, _) = common::request_with_headers(
        upstream.addr,
        "GET",
        "/api/v1/namespaces/default/configmaps/not-mine",
        &[("Authorization", "Bearer alice-up-token")],
        "",
    )
    .await;
    assert_eq!(status, 403, "alice may not even read default upstream");
    // Impersonation is the upstream's decision: a caller it does not let impersonate is refused.
    let (status, text) = common::request_with_headers(
        upstream.addr,
        "POST",
        "/api/v1/namespaces/team-a/configmaps",
        &[
            ("Authorization", "Bearer alice-up-token"),
            ("Impersonate-User", "proxy"),
        ],
        &body("team-a", "sneaky"),
    )
    .await;
    assert_eq!(status, 403, "{text}");
    assert!(
        text.contains("cannot impersonate resource \\\"users\\\""),
        "{text}"
    );
    // Mallory through the proxy: impersonated as mallory, whom the upstream lets write nothing.
    let (status, text) = common::request_with_headers(
        proxy.addr,
        "POST",
        "/api/v1/namespaces/team-a/configmaps",
        &[("Authorization", "Bearer mallory-token")],
        &body("team-a", "mallorys"),
    )
    .await;
    assert_eq!(status, 403, "{text}");
    assert!(text.contains("User \\\"mallory\\\""), "{text}");
    proxy.shutdown().await;
    upstream.shutdown().await;
}

//! The cache against the store, across its own failures and restarts.
//!
//! - The cache consistency checker: a consistent cache passes; a cache corrupted behind the
//!   reflector's back (a reset through the cache's own input with one object missing and one
//!   changed, at the revision it already has) is found on demand and by the periodic check,
//!   counted in `/metrics`, and repaired by a relist of that resource alone.
//! - Graceful shutdown: every watch ends after what it was owed, those that allow bookmarks
//!   with a final BOOKMARK at the last dispatched revision; the `watchkeeper` binary does it
//!   on SIGTERM and exits.
//! - Restart on the same embedded store: watches resumed with the last resource version they
//!   saw (the final bookmark, or an older one) get every event exactly once, without a 410;
//!   with `--rebuild-history=false` (kube-apiserver's behaviour) the older one gets a 410.
//!   Ready means the caches have applied the rebuilt history, not only been sent it.
//!   (The etcd variant, a watch moving to a sibling instance, is in `tests/api.rs`.)

use crate::common;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use common::{HANG_GUARD, WatchReader};
use serde_json::{Value, json};
use watchkeeper::Server;
use watchkeeper::cache::{Input, Resource};
use watchkeeper::config::ServeArgs;
use watchkeeper_core::Object;

fn configmaps(server: &Server) -> Arc<Resource> {
    server
        .app
        .resource("", "v1", "configmaps")
        .expect("configmaps are served")
}

async fn create(addr: SocketAddr, names: &[&str]) {
    for name in names {
        let (status, _) = common::send_json(
            addr,
            "POST",
            "/api/v1/namespaces/default/configmaps",
            &common::configmap(name, 8),
        )
        .await;
        assert_eq!(status, 201);
    }
}

/// `POST /debug/consistency?resource=configmaps`: the configmaps report.
async fn check(addr: SocketAddr) -> Value {
    let (status, body) = common::request(
        addr,
        "POST",
        "/debug/consistency?resource=configmaps",
        "",
        "",
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let body: Value = serde_json::from_str(&body).expect("JSON");
    let checks = body["checks"].as_array().expect("checks");
    assert_eq!(checks.len(), 1, "{body}");
    checks[0].clone()
}

/// The value of `apiserver_storage_consistency_checks_total` for configmaps and `status`.
async fn checks_total(addr: SocketAddr, status: &str) -> u64 {
    let (code, text) = common::request(addr, "GET", "/metrics", "", "").await;
    assert_eq!(code, 200);
    let series = format!(
        "apiserver_storage_consistency_checks_total{{resource=\"configmaps\",status=\"{status}\"}} "
    );
    text.lines()
        .find_map(|line| line.strip_prefix(series.as_str()))
        .unwrap_or_else(|| panic!("no {series} in /metrics"))
        .trim()
        .parse()
        .expect("a count")
}

/// Replaces the cache's state, at the revision it has, with one object dropped (`gone`) and
/// one changed (`changed`): what a lost or misapplied watch event would leave behind.
/// Returns once the new state is served: a watch of the server at `addr` opened before the
/// reset has ended with its 410 (the reset's count comes before the state, so it cannot tell).
async fn corrupt(addr: SocketAddr, resource: &Resource, gone: &str, changed: &str) {
    let mut watch = WatchReader::open(addr, &format!("{CONFIGMAPS}?watch=true"), None).await;
    let cache = resource.cache();
    let snapshot = cache.latest();
    let revision = snapshot.revision();
    let objects: Vec<Arc<Object>> = snapshot
        .range(None, None)
        .filter(|object| object.name() != gone)
        .map(|object| {
            if object.name() == changed {
                let mut body = object.body().clone();
                body["data"] = json!({"payload": "not what the store has"});
                Arc::new(Object::new(
                    object.namespace(),
                    object.name(),
                    object.labels().to_map(),
                    object.fields().to_map(),
                    object.resource_version(),
                    body,
                ))
            } else {
                object.clone()
            }
        })
        .collect();
    resource
        .driver
        .sender()
        .send(Input::Reset(revision, objects))
        .expect("the cache runs");
    loop {
        let event = watch.next().await.expect("the watch ends with a 410");
        if event["type"] == "ERROR" {
            assert_eq!(event["object"]["code"], 410, "{event}");
            break;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consistent_cache_passes() {
    let server = common::server().await;
    create(server.addr, &["a", "b", "c"]).await;
    let report = check(server.addr).await;
    assert_eq!(report["status"], "success", "{report}");
    assert_eq!(report["cache"], report["store"], "{report}");
    assert_eq!(report["cache"]["objects"], 3, "{report}");
    assert_eq!(report["relisting"], false, "{report}");
    assert_eq!(checks_total(server.addr, "success").await, 1);
    assert_eq!(checks_total(server.addr, "failure").await, 0);
    // The last reports are readable without running a check.
    let (status, body) = common::get_json(server.addr, "/debug/consistency").await;
    assert_eq!(status, 200);
    assert_eq!(body["checks"][0]["status"], "success", "{body}");
    server.shutdown().await;
}

/// Resources stored once and served in several versions (HorizontalPodAutoscalers as
/// autoscaling/v1 and v2, Events as v1 and events.k8s.io/v1, a custom resource in two
/// versions listed either way round): each stored object is checked once, with the resource
/// that holds it in its storage version, and passes. The store's side used to route every
/// key to the last of the versions sharing its storage prefix, so the storage version found
/// none of its objects and every check failed and relisted it (its watchers got a 410 at
/// every interval).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resources_served_in_several_versions_pass() {
    let server = common::server().await;
    let addr = server.addr;
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    for (plural, versions) in [("gadgets", ["v1", "v2"]), ("gizmos", ["v2", "v1"])] {
        let kind = format!(
            "{}{}",
            plural[..1].to_uppercase(),
            &plural[1..plural.len() - 1]
        );
        let version = |name: &str| {
            json!({"name": name, "served": true, "storage": name == "v1",
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}})
        };
        let crd = json!({"apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("{plural}.example.com")},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": plural, "kind": kind},
                "versions": [version(versions[0]), version(versions[1])]}});
        let (status, body) = common::send_json(addr, "POST", crds, &crd).await;
        assert_eq!(status, 201, "{body}");
    }
    let hpa = |version: &str, name: &str| {
        let mut hpa = json!({"apiVersion": format!("autoscaling/{version}"),
            "kind": "HorizontalPodAutoscaler", "metadata": {"name": name},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                "name": "web"}, "minReplicas": 1, "maxReplicas": 3}});
        if version == "v1" {
            hpa["spec"]["targetCPUUtilizationPercentage"] = json!(50);
        }
        hpa
    };
    let event = json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e1"},
        "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
        "reason": "Started", "message": "m", "type": "Normal"});
    let new_event = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": "e2"}, "eventTime": "2026-12-05T00:00:00.000000Z",
        "reportingController": "example.com/c", "reportingInstance": "i", "action": "Start",
        "reason": "Started", "type": "Normal",
        "regarding": {"kind": "Pod", "name": "p", "namespace": "default"}});
    let mut writes = vec![
        (
            "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers",
            hpa("v1", "h1"),
        ),
        (
            "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers",
            hpa("v2", "h2"),
        ),
        ("/api/v1/namespaces/default/events", event),
        (
            "/apis/events.k8s.io/v1/namespaces/default/events",
            new_event,
        ),
    ];
    for plural in ["gadgets", "gizmos"] {
        let kind = format!(
            "{}{}",
            plural[..1].to_uppercase(),
            &plural[1..plural.len() - 1]
        );
        for version in ["v1", "v2"] {
            writes.push((
                if version == "v1" {
                    if plural == "gadgets" {
                        "/apis/example.com/v1/namespaces/default/gadgets"
                    } else {
                        "/apis/example.com/v1/namespaces/default/gizmos"
                    }
                } else if plural == "gadgets" {
                    "/apis/example.com/v2/namespaces/default/gadgets"
                } else {
                    "/apis/example.com/v2/namespaces/default/gizmos"
                },
                json!({"apiVersion": format!("example.com/{version}"), "kind": kind,
                    "metadata": {"name": format!("{plural}-{version}")}}),
            ));
        }
    }
    for (path, body) in &writes {
        let deadline = std::time::Instant::now() + HANG_GUARD;
        loop {
            let (status, answer) = common::send_json(addr, "POST", path, body).await;
            // A custom resource is served once its CRD is established.
            if status == 404 && std::time::Instant::now() < deadline {
                tokio::task::yield_now().await;
                continue;
            }
            assert_eq!(status, 201, "{path}: {answer}");
            break;
        }
    }
    let (status, body) = common::request(addr, "POST", "/debug/consistency", "", "").await;
    assert_eq!(status, 200, "{body}");
    let body: Value = serde_json::from_str(&body).expect("JSON");
    let checks = body["checks"].as_array().expect("checks");
    assert!(
        checks.iter().all(|c| c["status"] != "failure"),
        "{}",
        serde_json::to_string_pretty(&checks).unwrap()
    );
    for resource in [
        "horizontalpodautoscalers.autoscaling",
        "events",
        "gadgets.example.com",
        "gizmos.example.com",
    ] {
        let report = checks
            .iter()
            .find(|c| c["resource"] == resource && c["status"] != "skipped")
            .unwrap_or_else(|| panic!("{resource} checked: {body}"));
        assert_eq!(report["status"], "success", "{report}");
        assert_eq!(report["store"], report["cache"], "{report}");
        assert!(report["store"]["objects"].as_u64() >= Some(2), "{report}");
    }
    assert_eq!(checks_total(addr, "failure").await, 0);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_divergent_cache_is_found_counted_and_repaired() {
    let server = common::server().await;
    create(server.addr, &["a", "b", "c"]).await;
    let resource = configmaps(&server);
    let lists = server
        .app
        .reflector
        .lists
        .load(std::sync::atomic::Ordering::Relaxed);
    corrupt(server.addr, &resource, "b", "c").await;

    let report = check(server.addr).await;
    assert_eq!(report["status"], "failure", "{report}");
    assert_eq!(report["cache"]["objects"], 2, "{report}");
    assert_eq!(report["store"]["objects"], 3, "{report}");
    let keys: Vec<&str> = report["differences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["default/b", "default/c"], "{report}");
    assert_eq!(report["differences"][0]["cache"], Value::Null, "{report}");
    assert_eq!(report["relisting"], true, "{report}");
    assert_eq!(checks_total(server.addr, "failure").await, 1);

    // The reflector relists configmaps alone and the cache has the store's objects again.
    let cache = resource.cache().clone();
    common::until(|| {
        let snapshot = cache.latest();
        snapshot.get("default/b").is_some()
            && snapshot
                .get("default/c")
                .is_some_and(|c| c.body()["data"]["payload"] != "not what the store has")
    })
    .await;
    assert!(
        server
            .app
            .reflector
            .lists
            .load(std::sync::atomic::Ordering::Relaxed)
            > lists
    );
    let report = check(server.addr).await;
    assert_eq!(report["status"], "success", "{report}");
    assert_eq!(checks_total(server.addr, "success").await, 1);
    assert_eq!(checks_total(server.addr, "failure").await, 1);
    // Writes go on being served from the repaired cache.
    create(server.addr, &["d"]).await;
    assert_eq!(check(server.addr).await["status"], "success");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_periodic_check_finds_and_repairs_a_divergence() {
    let server = common::server_with(ServeArgs {
        consistency_check_interval_ms: Some(100),
        ..ServeArgs::default()
    })
    .await;
    create(server.addr, &["a", "b"]).await;
    let resource = configmaps(&server);
    corrupt(server.addr, &resource, "a", "b").await;
    let checker = server.app.consistency.clone();
    let name = resource.name();
    common::until(|| checker.count(&name, watchkeeper::source::consistency::Status::Failure) >= 1)
        .await;
    let cache = resource.cache().clone();
    common::until(|| cache.latest().get("default/a").is_some()).await;
    let successes = checker.count(&name, watchkeeper::source::consistency::Status::Success);
    common::until(|| {
        checker.count(&name, watchkeeper::source::consistency::Status::Success) > successes
    })
    .await;
    server.shutdown().await;
}

/// Goal: the store is compacted every `--compaction-interval-ms`, to the revision it had one
/// round before (kube-apiserver's compactor): its history below that floor is gone (the memory
/// store no longer grows with every write), what came after stays readable, the rounds are in
/// `/metrics`, and the cache's own history still serves a watch from below the floor.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_is_compacted_every_interval_and_the_cache_keeps_serving() {
    let server = common::server_with(ServeArgs {
        compaction_interval_ms: Some(100),
        ..ServeArgs::default()
    })
    .await;
    create(server.addr, &["a"]).await;
    let (_, created) = common::get_json(server.addr, &format!("{CONFIGMAPS}/a")).await;
    let first: u64 = created["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|rv| rv.parse().ok())
        .expect("a resource version");
    for n in 0..3 {
        let patch = format!(r#"{{"data":{{"n":"{n}"}}}}"#);
        common::merge_patch(server.addr, &format!("{CONFIGMAPS}/a"), &patch).await;
    }
    let compaction = server.app.compaction.clone();
    // Two rounds: the first records, the second compacts to what the first recorded.
    common::until(|| compaction.floor.load(std::sync::atomic::Ordering::Relaxed) > first).await;
    let floor = compaction.floor.load(std::sync::atomic::Ordering::Relaxed);
    let store = server.app.source.as_store().expect("a store");
    let read_at = |revision: u64| {
        let mut request = watchkeeper_store::RangeRequest::key("/registry/configmaps/default/a");
        request.revision = revision;
        watchkeeper_store::Store::range(store, request)
    };
    assert!(
        matches!(
            read_at(first).await,
            Err(watchkeeper_store::RangeError::Compacted { .. })
        ),
        "the store still holds revision {first} below the floor {floor}"
    );
    read_at(floor).await.expect("the floor stays readable");
    let (code, text) = common::request(server.addr, "GET", "/metrics", "", "").await;
    assert_eq!(code, 200);
    let compacted: u64 = text
        .lines()
        .find_map(|line| {
            line.strip_prefix(r#"watchkeeper_store_compaction_rounds_total{result="compacted"} "#)
        })
        .expect("the rounds in /metrics")
        .trim()
        .parse()
        .expect("a count");
    assert!(compacted >= 1, "{text}");
    // The cache's history is its own: a watch from below the store's floor gets every update.
    let mut watch = WatchReader::open(
        server.addr,
        &format!("{CONFIGMAPS}?watch=true&resourceVersion={first}"),
        None,
    )
    .await;
    for n in 0..3 {
        let event = watch.next().await.expect("an event");
        assert_eq!(event["type"], "MODIFIED", "{event}");
        assert_eq!(event["object"]["data"]["n"], n.to_string(), "{event}");
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_check_and_compaction_intervals_are_validated() {
    for bad in [1, 99, 86_400_001] {
        let error = watchkeeper::config::ServeConfig::from_args(ServeArgs {
            compaction_interval_ms: Some(bad),
            ..ServeArgs::default()
        })
        .unwrap_err();
        assert!(
            error.to_string().contains("--compaction-interval-ms"),
            "{error}"
        );
    }
    let config = watchkeeper::config::ServeConfig::from_args(ServeArgs {
        compaction_interval_ms: Some(0),
        ..ServeArgs::default()
    })
    .unwrap();
    assert_eq!(config.compaction_interval, None);
    for bad in [1, 99, 86_400_001] {
        let error = watchkeeper::config::ServeConfig::from_args(ServeArgs {
            consistency_check_interval_ms: Some(bad),
            ..ServeArgs::default()
        })
        .unwrap_err();
        assert!(
            error
                .to_string()
                .contains("--consistency-check-interval-ms"),
            "{error}"
        );
    }
    let config = watchkeeper::config::ServeConfig::from_args(ServeArgs {
        consistency_check_interval_ms: Some(0),
        ..ServeArgs::default()
    })
    .unwrap();
    assert_eq!(config.consistency_check_interval, None);
}

const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";

/// The resource version of a watch event's object.
fn rv_of(event: &Value) -> u64 {
    event["object"]["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|rv| rv.parse().ok())
        .unwrap_or_else(|| panic!("no resource version in {event}"))
}

/// The resource version of a list of configmaps.
async fn list_rv(addr: SocketAddr) -> u64 {
    let (status, list) = common::get_json(addr, CONFIGMAPS).await;
    assert_eq!(status, 200, "{list}");
    list["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|rv| rv.parse().ok())
        .expect("a list resource version")
}

/// A configmaps watch from `rv`, with bookmarks or not.
async fn watch_from(addr: SocketAddr, rv: u64, bookmarks: bool) -> WatchReader {
    WatchReader::open(
        addr,
        &format!("{CONFIGMAPS}?watch=true&resourceVersion={rv}&allowWatchBookmarks={bookmarks}"),
        None,
    )
    .await
}

/// The events of a watch until the configmap `last` was added: (type, name, resource
/// version), bookmarks left out. Fails on an in-stream error or the end of the stream.
async fn read_through(watch: &mut WatchReader, last: &str) -> Vec<(String, String, u64)> {
    let mut seen = Vec::new();
    loop {
        let event = watch.next().await.expect("the stream ended early");
        let kind = event["type"].as_str().unwrap_or_default().to_owned();
        match kind.as_str() {
            "BOOKMARK" => continue,
            "ERROR" => panic!("in-stream error after {seen:?}: {event}"),
            _ => {}
        }
        let name = event["object"]["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let done = kind == "ADDED" && name == last;
        seen.push((kind, name, rv_of(&event)));
        if done {
            return seen;
        }
    }
}

fn names(seen: &[(String, String, u64)]) -> Vec<&str> {
    seen.iter().map(|(_, name, _)| name.as_str()).collect()
}

/// Creates a Secret (another resource: the store moves on, the configmaps cache gets
/// progress only; unlike a namespace, no controller writes after it); returns its resource
/// version.
async fn move_on(addr: SocketAddr, name: &str) -> u64 {
    let (status, namespace) = common::send_json(
        addr,
        "POST",
        "/api/v1/namespaces/default/secrets",
        &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}}),
    )
    .await;
    assert_eq!(status, 201, "{namespace}");
    namespace["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|rv| rv.parse().ok())
        .expect("a resource version")
}

/// Graceful shutdown: a watch that allows bookmarks gets what it was owed, then one BOOKMARK
/// at the last dispatched revision (above its last event: another resource moved the store
/// on), then the end of its stream; one without bookmarks just ends; the listener is closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_sends_a_final_bookmark_then_ends_every_watch() {
    let server = common::server().await;
    let addr = server.addr;
    create(addr, &["a"]).await;
    let from = list_rv(addr).await;
    let mut bookmarked = watch_from(addr, from, true).await;
    let mut plain = watch_from(addr, from, false).await;
    create(addr, &["b"]).await;
    let moved_on = move_on(addr, "elsewhere").await;
    let seen = read_through(&mut bookmarked, "b").await;
    assert_eq!(names(&seen), ["b"]);
    assert_eq!(read_through(&mut plain, "b").await, seen);
    assert!(seen[0].2 < moved_on);
    let cache = configmaps(&server).cache().clone();
    common::until(|| cache.dispatched() >= moved_on).await;

    let shutdown = tokio::spawn(server.shutdown());
    let last = bookmarked.next().await.expect("a final bookmark");
    assert_eq!(last["type"], "BOOKMARK", "{last}");
    assert_eq!(rv_of(&last), moved_on, "{last}");
    assert!(bookmarked.next().await.is_none(), "the stream ends");
    assert!(bookmarked.ended);
    assert!(plain.next().await.is_none(), "the stream ends");
    assert!(plain.ended);
    tokio::time::timeout(HANG_GUARD, shutdown)
        .await
        .expect("shutdown hang")
        .unwrap();
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "still accepting after shutdown"
    );
}

/// The `watchkeeper` binary on an embedded store in `dir` (its log says where it listens).
struct Process {
    child: Option<std::process::Child>,
    addr: SocketAddr,
}

impl Process {
    fn spawn(dir: &Path, extra: &[&str]) -> Process {
        use std::io::BufRead;
        let data_dir = dir.to_str().expect("a UTF-8 path");
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_watchkeeper"))
            .args(["serve", "--store", "embedded", "--listen", "127.0.0.1:0"])
            .args(["--data-dir", data_dir, "--durable-commits", "false"])
            // The test counts the objects it creates in `default`.
            .args(["--enable-root-ca-cert-publisher", "false"])
            .args(extra)
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("the server binary starts");
        let mut lines = std::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
        let addr = loop {
            let line = lines
                .next()
                .expect("the server logs where it listens")
                .expect("a log line");
            if let Some(rest) = line.split("addr=").nth(1) {
                let addr: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == ':')
                    .collect();
                break addr.parse().expect("an address");
            }
        };
        // Keep draining the log so the server never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        Process {
            child: Some(child),
            addr,
        }
    }

    /// Waits until the server answers requests (its caches loaded: not 429).
    async fn ready(&self) {
        tokio::time::timeout(HANG_GUARD, async {
            loop {
                let (status, _) = common::get_json(self.addr, CONFIGMAPS).await;
                if status == 200 {
                    return;
                }
                assert_eq!(status, 429, "only the not-ready answer is expected");
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("the server never became ready");
    }

    /// Sends SIGTERM; returns once the process has exited, with its exit status.
    async fn terminate(&mut self) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("running");
        let status = std::process::Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success());
        tokio::time::timeout(
            HANG_GUARD,
            tokio::task::spawn_blocking(move || child.wait()),
        )
        .await
        .expect("the server did not exit")
        .unwrap()
        .expect("wait")
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// SIGTERM ends a watch with a final bookmark and the process exits 0; the server restarted
/// on the same data rebuilds its history from the store, so watches resumed from that
/// bookmark and from an older resource version (a client that left earlier) get every event
/// written before and after the restart exactly once, without a 410; restarted with
/// `--rebuild-history=false` (kube-apiserver's behaviour) the older one gets a 410.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_and_restart_on_the_same_data_resume_watches_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut first = Process::spawn(dir.path(), &[]);
    first.ready().await;
    let from = list_rv(first.addr).await;
    let mut watch = watch_from(first.addr, from, true).await;
    create(first.addr, &["c0", "c1", "c2", "c3"]).await;
    let before = read_through(&mut watch, "c3").await;
    assert_eq!(names(&before), ["c0", "c1", "c2", "c3"]);
    let early = before[1].2;
    let moved_on = move_on(first.addr, "elsewhere").await;

    let exit = first.terminate().await;
    let last = watch.next().await.expect("a final bookmark");
    assert_eq!(last["type"], "BOOKMARK", "{last}");
    let bookmark = rv_of(&last);
    assert!(
        (before[3].2..=moved_on).contains(&bookmark),
        "the bookmark {bookmark} is not between the last event and the store's revision"
    );
    assert!(watch.next().await.is_none(), "the stream ends");
    assert!(exit.success(), "{exit:?}");

    let mut second = Process::spawn(dir.path(), &[]);
    second.ready().await;
    let mut resumed = watch_from(second.addr, bookmark, true).await;
    let mut older = watch_from(second.addr, early, false).await;
    create(second.addr, &["c4", "c5"]).await;
    let after = read_through(&mut resumed, "c5").await;
    assert_eq!(names(&after), ["c4", "c5"], "no gap, no duplicate");
    assert!(after[0].2 > bookmark);
    let replayed = read_through(&mut older, "c5").await;
    assert_eq!(
        names(&replayed),
        ["c2", "c3", "c4", "c5"],
        "no gap, no duplicate"
    );
    assert_eq!(
        replayed[..2],
        before[2..],
        "the same events, at the same versions"
    );
    assert!(second.terminate().await.success());

    let third = Process::spawn(dir.path(), &["--rebuild-history=false"]);
    third.ready().await;
    let mut older = watch_from(third.addr, early, false).await;
    let event = older.next().await.expect("an in-stream error");
    assert_eq!(event["type"], "ERROR", "{event}");
    assert_eq!(event["object"]["code"], 410, "{event}");
}

/// Goal: a server restarted on its store (rebuilding the caches' history from it, the
/// default) is ready only once its caches have applied the replay: a `resourceVersion=0`
/// LIST, served from the cache as it is, right after ready has the objects of the store's
/// revision. (Ready was set once the replay had been sent to the caches' threads: such a
/// LIST could get the state of the replay's start, as an end-to-end harness session did.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_server_is_ready_once_its_caches_have_applied_the_replay() {
    let dir = tempfile::tempdir().unwrap();
    let args = || ServeArgs {
        store: Some("embedded".into()),
        data_dir: Some(dir.path().to_owned()),
        durable_commits: Some(false),
        ..ServeArgs::default()
    };
    let server = common::server_with(args()).await;
    create(server.addr, &["a"]).await;
    // Many revisions: a long replay.
    for n in 0..300 {
        let patch = format!(r#"{{"data":{{"n":"{n}"}}}}"#);
        common::merge_patch(server.addr, &format!("{CONFIGMAPS}/a"), &patch).await;
    }
    let written = list_rv(server.addr).await;
    server.shutdown().await;
    let server = common::restarted(args()).await;
    let cached = configmaps(&server).cache().latest().revision();
    assert!(
        cached >= written,
        "ready at {cached}, written up to {written}"
    );
    let (status, list) =
        common::get_json(server.addr, &format!("{CONFIGMAPS}?resourceVersion=0")).await;
    assert_eq!(status, 200, "{list}");
    let served: u64 = list["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|rv| rv.parse().ok())
        .expect("a list resource version");
    assert!(
        served >= written,
        "served at {served}, written up to {written}"
    );
    assert_eq!(list["items"][0]["data"]["n"], "299", "{list}");
    server.shutdown().await;
}

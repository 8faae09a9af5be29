//! The cache consistency checker: a consistent cache passes; a cache corrupted behind the
//! reflector's back (a reset through the cache's own input with one object missing and one
//! changed, at the revision it already has) is found on demand and by the periodic check,
//! counted in `/metrics`, and repaired by a relist of that resource alone.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;

use common::HANG_GUARD;
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
async fn corrupt(resource: &Resource, gone: &str, changed: &str) {
    let cache = resource.cache();
    let snapshot = cache.latest();
    let revision = snapshot.revision();
    let resets = cache.metrics().cache_resets.get();
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
                    object.labels().clone(),
                    object.fields().clone(),
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
    wait_until(|| cache.metrics().cache_resets.get() > resets).await;
}

/// Waits (yielding, bounded by the hang guard) until `ready` holds.
async fn wait_until(ready: impl Fn() -> bool) {
    tokio::time::timeout(HANG_GUARD, async {
        while !ready() {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the condition never held");
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
    corrupt(&resource, "b", "c").await;

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
    wait_until(|| {
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
    corrupt(&resource, "a", "b").await;
    let checker = server.app.consistency.clone();
    let name = resource.name();
    wait_until(|| checker.count(&name, watchkeeper::source::consistency::Status::Failure) >= 1)
        .await;
    let cache = resource.cache().clone();
    wait_until(|| cache.latest().get("default/a").is_some()).await;
    let successes = checker.count(&name, watchkeeper::source::consistency::Status::Success);
    wait_until(|| {
        checker.count(&name, watchkeeper::source::consistency::Status::Success) > successes
    })
    .await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_check_interval_is_validated() {
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

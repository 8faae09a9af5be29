//! `--cache-memory-bytes`: the caches' live objects, counted at what they take decoded, are
//! bounded. Custom resources of one-entry maps (`{"a":1}`, 90 times their JSON once parsed)
//! fill a 64 MiB bound with a few hundred KB sent; the write that would pass it is refused
//! with a full store's 500 and stores nothing; deletes and shrinking updates still pass, and
//! a delete makes room; the histories keep to half the bound. What the bound saves in RSS is
//! measured in docs/ARCHITECTURE.md, never asserted here.

use crate::common;

use serde_json::{Value, json};
use watchkeeper::config::ServeArgs;

use common::{get_json, metrics_text, request, sample, send_json, server_with};

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const WIDGETS: &str = "/apis/example.com/v1/namespaces/default/widgets";
const BOUND: u64 = 64 << 20;

/// A Widget named `name` whose spec is `items` one-entry maps (about 650 bytes each decoded).
fn widget(name: &str, items: usize) -> Value {
    let spec: Vec<Value> = (0..items).map(|i| json!({"a": i})).collect();
    json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": name}, "spec": spec})
}

/// A server over the memory store with the caches' memory bounded by [`BOUND`].
async fn bounded() -> watchkeeper::Server {
    server_with(ServeArgs {
        store: Some("memory".into()),
        cache_memory_bytes: Some(BOUND),
        ..ServeArgs::default()
    })
    .await
}

/// The caches' live objects' bytes and the refusals counted, from `/metrics`.
async fn memory(addr: std::net::SocketAddr) -> (u64, u64) {
    let text = metrics_text(addr).await;
    (
        sample(&text, "watchkeeper_cache_memory_bytes"),
        sample(&text, "watchkeeper_cache_memory_refusals_total"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_that_would_pass_the_cache_memory_bound_are_refused_and_deletes_make_room() {
    let server = bounded().await;
    let addr = server.addr;
    let text = metrics_text(addr).await;
    assert_eq!(sample(&text, "watchkeeper_cache_memory_limit_bytes"), BOUND);
    let (status, crd) = send_json(addr, "POST", CRDS, &common::widgets_crd()).await;
    assert_eq!(status, 201, "{crd}");
    // 20,000 items: about 13 MB decoded for 180 KB of JSON. Created until one is refused.
    let mut created = Vec::new();
    let refused = loop {
        assert!(created.len() < 10, "64 MiB holds fewer than ten of them");
        let name = format!("w{}", created.len());
        let (status, answer) = send_json(addr, "POST", WIDGETS, &widget(&name, 20_000)).await;
        if status == 201 {
            created.push(name);
            continue;
        }
        break (status, answer, name);
    };
    let (status, answer, name) = refused;
    assert!(created.len() >= 2, "{created:?}: the bound is 64 MiB");
    assert_eq!(status, 500, "{answer}");
    assert_eq!(answer["kind"], "Status");
    assert!(
        answer.get("reason").is_none(),
        "kube's full-store shape has no reason: {answer}"
    );
    assert_eq!(
        answer["message"],
        "the server's object cache is full: this object would take the memory its cached objects use past --cache-memory-bytes (67108864 bytes); delete objects to make room"
    );
    let (status, _) = get_json(addr, &format!("{WIDGETS}/{name}")).await;
    assert_eq!(status, 404, "nothing of the refused write is stored");
    let (used, refusals) = memory(addr).await;
    assert!(used <= BOUND, "{used}");
    assert!(used > created.len() as u64 * 10_000_000, "{used}");
    assert_eq!(refusals, 1);
    // Small objects still fit; a growing update does not; a shrinking one does.
    let (status, answer) = send_json(addr, "POST", WIDGETS, &widget("small", 1)).await;
    assert_eq!(status, 201, "{answer}");
    let first = format!("{WIDGETS}/{}", created[0]);
    let (status, answer) = request(
        addr,
        "PATCH",
        &first,
        "application/merge-patch+json",
        &json!({"spec": widget("", 40_000)["spec"]}).to_string(),
    )
    .await;
    assert_eq!(status, 500, "{answer}");
    let (status, answer) = request(
        addr,
        "PATCH",
        &first,
        "application/merge-patch+json",
        &json!({"spec": widget("", 10_000)["spec"]}).to_string(),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    // A delete makes room: the refused create goes in once the cache has seen the delete.
    let (status, answer) =
        request(addr, "DELETE", &format!("{WIDGETS}/{}", created[1]), "", "").await;
    assert_eq!(status, 200, "{answer}");
    tokio::time::timeout(common::HANG_GUARD, async {
        loop {
            let (status, answer) = send_json(addr, "POST", WIDGETS, &widget(&name, 20_000)).await;
            match status {
                201 => break,
                500 => tokio::task::yield_now().await,
                _ => panic!("{status} {answer}"),
            }
        }
    })
    .await
    .expect("the delete made room");
    let text = metrics_text(addr).await;
    // The histories share half the bound: the widgets' history, far above its share, kept
    // little more than its newest revision (the last create, about 13 MB decoded).
    let histories = sample(&text, "watchkeeper_cache_history_memory_bytes");
    assert!(histories <= BOUND / 2, "{histories}");
    assert!(
        sample(
            &text,
            "watchkeeper_cache_object_bytes{group=\"example.com\",resource=\"widgets\"}"
        ) > 10_000_000,
        "per resource"
    );
}

/// Goal: without the flag the bound is a third of the machine's (or cgroup's) memory, and 0
/// turns it off: nothing is refused, the total is still reported.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_bound_is_a_third_of_the_memory_and_zero_turns_it_off() {
    let server = server_with(ServeArgs {
        store: Some("memory".into()),
        ..ServeArgs::default()
    })
    .await;
    let limit = sample(
        &metrics_text(server.addr).await,
        "watchkeeper_cache_memory_limit_bytes",
    );
    let expected =
        watchkeeper::config::defaults::cache_memory_bytes(watchkeeper::config::usable_memory());
    assert_eq!(limit, expected);
    assert!(limit >= 64 << 20, "{limit}");
    let off = server_with(ServeArgs {
        store: Some("memory".into()),
        cache_memory_bytes: Some(0),
        ..ServeArgs::default()
    })
    .await;
    let (status, crd) = send_json(off.addr, "POST", CRDS, &common::widgets_crd()).await;
    assert_eq!(status, 201, "{crd}");
    let (status, answer) = send_json(off.addr, "POST", WIDGETS, &widget("w", 20_000)).await;
    assert_eq!(status, 201, "{answer}");
    let text = metrics_text(off.addr).await;
    assert_eq!(sample(&text, "watchkeeper_cache_memory_limit_bytes"), 0);
    assert!(sample(&text, "watchkeeper_cache_memory_bytes") > 10_000_000);
}

/// Goal: the memory a heavy request's transient copies freed is given back to the system
/// after it (`--memory-release-interval-ms`, glibc's `malloc_trim` on a blocking thread), once
/// for a burst within the interval; light requests never release. What a release gives back
/// is measured in docs/ARCHITECTURE.md, never asserted here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heavy_requests_release_freed_memory_once_per_interval() {
    let server = server_with(ServeArgs {
        store: Some("memory".into()),
        heavy_request_body_bytes: Some(64 * 1024),
        // An hour: the releases after the first wait for it, so what follows is counted
        // without a race.
        memory_release_interval_ms: Some(3_600_000),
        ..ServeArgs::default()
    })
    .await;
    let addr = server.addr;
    let releases = "watchkeeper_memory_releases_total";
    let (status, crd) = send_json(addr, "POST", CRDS, &common::widgets_crd()).await;
    assert_eq!(status, 201, "{crd}");
    // Light writes (bodies under the threshold) schedule nothing: the release is scheduled
    // before a heavy write's answer, so none is pending after these answers.
    for name in ["small0", "small1"] {
        let (status, answer) = send_json(addr, "POST", WIDGETS, &widget(name, 100)).await;
        assert_eq!(status, 201, "{answer}");
    }
    assert_eq!(common::metric(addr, releases).await, 0);
    // A heavy write (about 140 KB) releases once after it.
    let (status, answer) = send_json(addr, "POST", WIDGETS, &widget("big", 20_000)).await;
    assert_eq!(status, 201, "{answer}");
    assert_eq!(common::metric_at_least(addr, releases, 1).await, 1);
    let text = metrics_text(addr).await;
    assert!(
        text.contains("\nwatchkeeper_memory_release_seconds_total "),
        "{text}"
    );
    sample(&text, "watchkeeper_memory_released_bytes_total");
    // A burst within the interval waits for it: still one release.
    for k in 0..3 {
        let patch = json!({"spec": widget("big", 20_000 + k)["spec"]}).to_string();
        let path = format!("{WIDGETS}/big");
        let (status, answer) =
            request(addr, "PATCH", &path, "application/merge-patch+json", &patch).await;
        assert_eq!(status, 200, "{answer}");
    }
    let text = metrics_text(addr).await;
    assert_eq!(
        sample(
            &text,
            "watchkeeper_heavy_requests_total{outcome=\"answered\"}"
        ),
        4
    );
    assert_eq!(sample(&text, releases), 1);
}

/// Goal: a watch whose client stops reading cannot keep alive, in its queue, the versions the
/// histories gave up for the bound. Past a quarter of the bound, the watches whose queues hold
/// such released events end at once with an in-stream 410 (`memory_pressure`), and the
/// released events are freed; a watch whose client reads is not touched and goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unread_watches_holding_what_the_histories_let_go_end_past_the_bound() {
    let server = bounded().await;
    let addr = server.addr;
    let (status, crd) = send_json(addr, "POST", CRDS, &common::widgets_crd()).await;
    assert_eq!(status, 201, "{crd}");
    // About 13 MB decoded (20,000 one-entry maps) and 1.4 MB of JSON (mostly a string), so the
    // stalled client's socket takes only a few versions before its queue fills.
    let version = |k: usize| {
        let mut object = widget("big", 20_000);
        object["spec"][0] = json!({"a": k, "pad": "x".repeat(1_200_000)});
        object
    };
    let (status, answer) = send_json(addr, "POST", WIDGETS, &version(0)).await;
    assert_eq!(status, 201, "{answer}");
    let path = format!("{WIDGETS}?watch=1&fieldSelector=metadata.name%3Dbig");
    let mut stalled = common::WatchReader::open(addr, &path, Some(4096)).await;
    let mut reader = common::WatchReader::open(addr, &path, None).await;
    // Without a resource version a watch starts with the object as ADDED.
    let event = reader.next().await.expect("the current state");
    assert_eq!(event["type"], "ADDED");
    let cuts = "watchkeeper_cache_memory_watch_cuts_total";
    let mut k = 1;
    while common::metric(addr, cuts).await == 0 {
        assert!(k <= 40, "no watch cut after {k} versions");
        let patch = json!({"spec": version(k)["spec"]}).to_string();
        common::merge_patch(addr, &format!("{WIDGETS}/big"), &patch).await;
        let event = reader.next().await.expect("the reader's watch goes on");
        assert_eq!(event["type"], "MODIFIED");
        assert_eq!(event["object"]["spec"][0]["a"], k);
        k += 1;
    }
    let text = metrics_text(addr).await;
    assert_eq!(sample(&text, cuts), 1, "only the unread watch");
    assert!(
        sample(&text, "watchkeeper_cache_memory_released_bytes") <= BOUND / 4,
        "{text}"
    );
    // The reader goes on. The cut watch's owner drops it (and counts it) when it next has
    // an event for it.
    let patch = json!({"spec": version(k)["spec"]}).to_string();
    common::merge_patch(addr, &format!("{WIDGETS}/big"), &patch).await;
    let event = reader.next().await.expect("the reader's watch goes on");
    assert_eq!(event["object"]["spec"][0]["a"], k);
    let terminated = "apiserver_terminated_watchers_total{group=\"example.com\",resource=\"widgets\",reason=\"memory_pressure\"}";
    assert_eq!(common::metric_at_least(addr, terminated, 1).await, 1);
    // The stalled client, reading at last, gets what its socket held and then the 410.
    let mut seen = Vec::new();
    let end = loop {
        let event = stalled.next().await.expect("the 410 before the end");
        if event["type"] == "ERROR" {
            break event;
        }
        let first = if seen.is_empty() { "ADDED" } else { "MODIFIED" };
        assert_eq!(event["type"], first, "{}", event["type"]);
        seen.push(event["object"]["spec"][0]["a"].as_u64().unwrap());
    };
    assert!(
        seen.windows(2).all(|w| w[0] + 1 == w[1]),
        "in order: {seen:?}"
    );
    assert!(
        (seen.len() as u64) < (k as u64) - 1,
        "the backlog was dropped: {seen:?}"
    );
    let status = &end["object"];
    assert_eq!(status["code"], 410, "{status}");
    assert_eq!(status["reason"], "Expired", "{status}");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .starts_with("too old resource version: "),
        "{status}"
    );
    assert!(
        stalled.next().await.is_none(),
        "the stream ends after the 410"
    );
}

/// Goal: a served custom resource's schema (decoded, what its version holds beside its
/// objects) counts against the bound with the live objects, per version in
/// `watchkeeper_cache_definition_bytes`, and leaves it when the CRD is deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_served_custom_resource_s_schema_counts_against_the_bound() {
    let server = bounded().await;
    let addr = server.addr;
    let before = common::metric(addr, "watchkeeper_cache_memory_bytes").await;
    let (status, answer) = send_json(addr, "POST", CRDS, &things_definition()).await;
    assert_eq!(status, 201, "{answer}");
    let things = "/apis/example.com/v1/namespaces/default/things";
    let definition =
        "watchkeeper_cache_definition_bytes{group=\"example.com\",resource=\"things\"}";
    // Served when its create answers; its schema is counted from then on.
    assert_eq!(get_json(addr, things).await.0, 200);
    let text = metrics_text(addr).await;
    let schema = sample(&text, definition);
    assert!(schema > 3_000_000, "10,000 properties decoded: {schema}");
    let used = sample(&text, "watchkeeper_cache_memory_bytes");
    assert!(used >= before + schema, "{before} + {schema} > {used}");
    // Deleted: the version is no longer served and its schema leaves the account.
    delete_things(addr).await;
    // Its cache (and the schema it counted) goes once nothing holds the resource any more,
    // as the CRD object leaves its own cache: the total comes back to where it was (either
    // one left behind is more than half the schema).
    tokio::time::timeout(common::HANG_GUARD, async {
        loop {
            let now = common::metric(addr, "watchkeeper_cache_memory_bytes").await;
            if now < before + schema / 2 {
                return;
            }
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the schema leaves the account");
    assert_eq!(get_json(addr, things).await.0, 404);
}

/// The CRD of `Thing`s, whose spec declares 10,000 string properties.
fn things_definition() -> Value {
    let properties: serde_json::Map<String, Value> = (0..10_000)
        .map(|i| (format!("p{i}"), json!({"type": "string"})))
        .collect();
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "things.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "things", "kind": "Thing"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": properties}}}}}]}})
}

async fn delete_things(addr: std::net::SocketAddr) {
    let (status, _) = request(
        addr,
        "DELETE",
        &format!("{CRDS}/things.example.com"),
        "application/json",
        "",
    )
    .await;
    assert_eq!(status, 200);
}

/// Goal: the OpenAPI documents built for the served resources count against the bound with
/// the live objects while the set they describe is served — every document once, from when it
/// is built (v2 as JSON and protobuf, the v3 index and each group/version's document, a CRD of
/// 10,000 properties in two of them) — and leave the account when a CRD change replaces that
/// set, without waiting for another request for them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openapi_documents_count_against_the_bound_while_their_resources_are_served() {
    let server = bounded().await;
    let addr = server.addr;
    let documents = "watchkeeper_openapi_document_bytes";
    assert_eq!(common::metric(addr, documents).await, 0, "none built yet");
    let (status, answer) = send_json(addr, "POST", CRDS, &things_definition()).await;
    assert_eq!(status, 201, "{answer}");
    assert_eq!(
        get_json(addr, "/apis/example.com/v1/namespaces/default/things")
            .await
            .0,
        200
    );
    let before = common::metric(addr, "watchkeeper_cache_memory_bytes").await;
    let get = |path: String, accept: &'static str| async move {
        let answer = watchkeeper_testkit::request(addr, "GET", &path, &[("Accept", accept)], b"")
            .await
            .unwrap();
        assert_eq!(answer.status, 200, "{path}");
        answer.body.len() as u64
    };
    let mut built = get("/openapi/v2".into(), "application/json").await;
    built += get(
        "/openapi/v2".into(),
        "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
    )
    .await;
    let (status, index) = get_json(addr, "/openapi/v3").await;
    assert_eq!(status, 200);
    built += index.to_string().len() as u64;
    let mut things = 0;
    for (key, entry) in index["paths"].as_object().unwrap() {
        let size = get(
            entry["serverRelativeURL"].as_str().unwrap().to_owned(),
            "application/json",
        )
        .await;
        if key == "apis/example.com/v1" {
            things = size;
        }
        built += size;
    }
    assert!(things > 200_000, "the CRD's v3 document: {things} bytes");
    let text = metrics_text(addr).await;
    assert_eq!(sample(&text, documents), built, "each document once");
    let used = sample(&text, "watchkeeper_cache_memory_bytes");
    assert!(used >= before + built, "{before} + {built} > {used}");
    // Asked again: built once, counted once.
    get("/openapi/v2".into(), "application/json").await;
    assert_eq!(common::metric(addr, documents).await, built);
    // The CRD goes: the set the documents describe is no longer served, and they leave.
    delete_things(addr).await;
    tokio::time::timeout(common::HANG_GUARD, async {
        while common::metric(addr, documents).await != 0 {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the documents of a set no longer served leave the account");
}

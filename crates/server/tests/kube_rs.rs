//! kube-rs (the client and its runtime: `watcher`, `reflector`) against an in-process
//! watchkeeper, unchanged: paged lists and continue tokens, list-then-watch and streaming-list
//! watchers, the reflector's store, recovery from an in-stream 410, bookmarks, writes and
//! their errors, selectors, and a slow consumer that loses nothing.
//!
//! No test sleeps on wall time or asserts a duration: every wait is for an event, bounded by
//! [`common::HANG_GUARD`] as a hang guard only.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;

use common::HANG_GUARD;
use futures_util::stream::BoxStream;
use futures_util::{Stream, StreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::core::{PartialObjectMeta, Status};
use kube::runtime::{reflector, watcher};
use kube::{Client, Config, ResourceExt};
use serde_json::json;
use watchkeeper::config::ServeArgs;

type Events = BoxStream<'static, watcher::Result<watcher::Event<ConfigMap>>>;

fn client(server: &watchkeeper::Server) -> Client {
    let url = format!("http://{}", server.addr)
        .parse()
        .expect("a server url");
    Client::try_from(Config::new(url)).expect("a kube client")
}

fn configmaps(server: &watchkeeper::Server) -> Api<ConfigMap> {
    Api::namespaced(client(server), "default")
}

/// A ConfigMap with `app=<app>` and a payload of `payload` bytes.
fn cm(name: &str, app: &str, payload: usize) -> ConfigMap {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": {"app": app}},
        "data": {"payload": "x".repeat(payload)}
    }))
    .expect("a ConfigMap")
}

async fn create(api: &Api<ConfigMap>, name: &str, app: &str, payload: usize) -> ConfigMap {
    api.create(&PostParams::default(), &cm(name, app, payload))
        .await
        .unwrap_or_else(|e| panic!("create {name}: {e}"))
}

fn rv_of(object: &ConfigMap) -> u64 {
    object
        .resource_version()
        .expect("a resourceVersion")
        .parse()
        .expect("a numeric resourceVersion")
}

/// The API error inside a kube error, or a panic naming what came instead.
fn api_status<T: Debug>(result: kube::Result<T>) -> Box<Status> {
    match result {
        Err(kube::Error::Api(status)) => status,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// The next item of a stream, bounded by the hang guard.
async fn next<S: Stream + Unpin>(stream: &mut S) -> S::Item {
    tokio::time::timeout(HANG_GUARD, stream.next())
        .await
        .expect("hang guard: no event")
        .expect("the stream ended")
}

/// The next watcher event, which must not be an error, as text (`Apply(name)`, `InitDone`).
async fn next_event(events: &mut Events) -> String {
    match next(events).await {
        Ok(event) => event.to_string(),
        Err(e) => panic!("watcher error: {e}"),
    }
}

/// Reads an Init sequence (Init, InitApply*, InitDone) and returns the names in it.
async fn init_sequence(events: &mut Events) -> BTreeSet<String> {
    assert_eq!(next_event(events).await, "Init");
    let mut names = BTreeSet::new();
    loop {
        let event = next_event(events).await;
        if event == "InitDone" {
            return names;
        }
        let name = event
            .strip_prefix("InitApply(")
            .and_then(|rest| rest.strip_suffix(')'))
            .unwrap_or_else(|| panic!("expected InitApply or InitDone, got {event}"));
        assert!(names.insert(name.to_owned()), "{name} listed twice");
    }
}

/// Names and resource versions of a fresh (consistent) LIST.
async fn list_state(api: &Api<ConfigMap>, params: &ListParams) -> BTreeMap<String, String> {
    api.list(params)
        .await
        .expect("list")
        .items
        .iter()
        .map(|o| (o.name_any(), o.resource_version().unwrap_or_default()))
        .collect()
}

fn names(range: std::ops::Range<usize>) -> BTreeSet<String> {
    range.map(|i| format!("cm-{i:02}")).collect()
}

/// A server whose history holds at most 100 events (the smallest it allows), so a few hundred
/// writes evict positions.
async fn small_history_server() -> watchkeeper::Server {
    common::server_with(ServeArgs {
        history_capacity_max: Some(100),
        event_fresh_seconds: Some(1),
        ..ServeArgs::default()
    })
    .await
}

/// 1. Paged lists: every object exactly once, one resourceVersion across pages; a garbage
///    continue token is a 400; a token whose revision left the history is a 410.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_pages_follow_continue_tokens() {
    let server = small_history_server().await;
    let api = configmaps(&server);
    for i in 0..25 {
        create(&api, &format!("cm-{i:02}"), "test", 16).await;
    }
    let mut seen = Vec::new();
    let mut list_rv = None;
    let mut params = ListParams::default().limit(10);
    let mut pages = 0;
    loop {
        let page = api.list(&params).await.expect("a page");
        pages += 1;
        let rv = page.metadata.resource_version.clone().expect("a list rv");
        assert_eq!(
            list_rv.get_or_insert_with(|| rv.clone()),
            &rv,
            "every page has the first page's resourceVersion"
        );
        assert!(page.items.len() <= 10);
        seen.extend(page.items.iter().map(ResourceExt::name_any));
        match page.metadata.continue_.filter(|t| !t.is_empty()) {
            Some(token) => {
                assert!(page.metadata.remaining_item_count.unwrap_or(1) > 0);
                params = ListParams::default().limit(10).continue_token(&token);
            }
            None => break,
        }
        // A write between pages does not show up: pages are served at the first page's rv.
        if pages == 1 {
            create(&api, "cm-99-late", "test", 16).await;
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(seen.len(), 25, "{seen:?}");
    assert_eq!(
        seen.iter().cloned().collect::<BTreeSet<_>>(),
        names(0..25),
        "every object exactly once"
    );

    // A garbage continue token: 400 BadRequest.
    let status = api_status(
        api.list(&ListParams::default().limit(10).continue_token("garbage"))
            .await,
    );
    assert_eq!((status.code, status.reason.as_str()), (400, "BadRequest"));

    // An expired token: take one, write past the history, continue: 410 Expired.
    let first = api
        .list(&ListParams::default().limit(10))
        .await
        .expect("a page");
    let token = first.metadata.continue_.expect("a continue token");
    for i in 0..150 {
        api.patch(
            "cm-00",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"n": i.to_string()}})),
        )
        .await
        .expect("patch");
    }
    let status = api_status(
        api.list(&ListParams::default().limit(10).continue_token(&token))
            .await,
    );
    assert_eq!((status.code, status.reason.as_str()), (410, "Expired"));
    server.shutdown().await;
}

/// After an Init sequence: a create, a patch and a delete arrive as Apply, Apply, Delete.
async fn expect_live_events(api: &Api<ConfigMap>, events: &mut Events) {
    create(api, "late", "test", 16).await;
    assert_eq!(next_event(events).await, "Apply(late)");
    api.patch(
        "cm-00",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "v"}})),
    )
    .await
    .expect("patch");
    match next(events).await.expect("an event") {
        watcher::Event::Apply(object) => {
            assert_eq!(object.name_any(), "cm-00");
            assert_eq!(object.data.unwrap_or_default().get("k").unwrap(), "v");
        }
        other => panic!("expected Apply(cm-00), got {other}"),
    }
    api.delete("cm-01", &DeleteParams::default())
        .await
        .expect("delete");
    assert_eq!(next_event(events).await, "Delete(cm-01)");
}

/// 2a. `watcher` in list-then-watch mode with pages of 5.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watcher_list_then_watch() {
    let server = common::server().await;
    let api = configmaps(&server);
    for i in 0..12 {
        create(&api, &format!("cm-{i:02}"), "test", 16).await;
    }
    let mut events: Events = watcher(api.clone(), watcher::Config::default().page_size(5)).boxed();
    assert_eq!(init_sequence(&mut events).await, names(0..12));
    expect_live_events(&api, &mut events).await;
    server.shutdown().await;
}

/// 2b. `watcher` in streaming-list mode: one watch with sendInitialEvents; InitDone comes from
///     the initial-events-end bookmark.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watcher_streaming_list() {
    let server = common::server().await;
    let api = configmaps(&server);
    for i in 0..12 {
        create(&api, &format!("cm-{i:02}"), "test", 16).await;
    }
    let mut events: Events =
        watcher(api.clone(), watcher::Config::default().streaming_lists()).boxed();
    assert_eq!(init_sequence(&mut events).await, names(0..12));
    expect_live_events(&api, &mut events).await;
    server.shutdown().await;
}

/// 3. A reflector's store equals a fresh LIST after a mix of writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflector_store_matches_list() {
    let server = common::server().await;
    let api = configmaps(&server);
    for i in 0..10 {
        create(&api, &format!("cm-{i:02}"), "test", 16).await;
    }
    let (store, writer) = reflector::store::<ConfigMap>();
    let mut events: Events = reflector(
        writer,
        watcher(api.clone(), watcher::Config::default().page_size(4)),
    )
    .boxed();
    assert_eq!(init_sequence(&mut events).await, names(0..10));
    let mut last_rv = 0;
    for i in 10..20 {
        last_rv = rv_of(&create(&api, &format!("cm-{i:02}"), "test", 16).await);
    }
    for i in (0..20).step_by(3) {
        let patched = api
            .patch(
                &format!("cm-{i:02}"),
                &PatchParams::default(),
                &Patch::Merge(json!({"data": {"i": i.to_string()}})),
            )
            .await
            .expect("patch");
        last_rv = rv_of(&patched);
    }
    for i in (1..20).step_by(4) {
        api.delete(&format!("cm-{i:02}"), &DeleteParams::default())
            .await
            .expect("delete");
    }
    // The deletes' revisions are not in their answers: mark the end with one more write.
    last_rv = last_rv.max(rv_of(&create(&api, "end", "test", 16).await));
    loop {
        match next(&mut events).await.expect("an event") {
            watcher::Event::Apply(object) if rv_of(&object) >= last_rv => break,
            _ => {}
        }
    }
    let reflected: BTreeMap<String, String> = store
        .state()
        .iter()
        .map(|o| (o.name_any(), o.resource_version().unwrap_or_default()))
        .collect();
    let listed = list_state(&api, &ListParams::default()).await;
    assert_eq!(listed.len(), 20 - 5 + 1);
    assert_eq!(reflected, listed);
    server.shutdown().await;
}

/// 4. A watcher whose position leaves the history gets an in-stream 410 and re-lists; the raw
///    API shows the 410 as an ERROR event in an HTTP 200 stream, not an HTTP error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watcher_recovers_from_in_stream_410() {
    let server = small_history_server().await;
    let api = configmaps(&server);
    create(&api, "watched-0", "watched", 16).await;
    // The watcher sees only app=watched and asks for no bookmarks, so writes to other objects
    // do not move its position; its watches end after a second and resume from that position.
    let (store, writer) = reflector::store::<ConfigMap>();
    let config = watcher::Config::default()
        .labels("app=watched")
        .disable_bookmarks()
        .timeout(1);
    let mut events: Events = reflector(writer, watcher(api.clone(), config)).boxed();
    assert_eq!(
        init_sequence(&mut events).await,
        BTreeSet::from(["watched-0".to_owned()])
    );
    // 150 writes the watcher does not see push its position out of the 100-event history.
    for i in 0..150 {
        create(&api, &format!("other-{i:03}"), "other", 16).await;
    }
    // Its next resumed watch starts below the history's floor: an in-stream 410, then a relist.
    match next(&mut events).await {
        Err(watcher::Error::WatchError(status)) => {
            assert_eq!((status.code, status.reason.as_str()), (410, "Expired"));
        }
        other => panic!("expected an in-stream 410, got {other:?}"),
    }
    assert_eq!(
        init_sequence(&mut events).await,
        BTreeSet::from(["watched-0".to_owned()])
    );
    // Then it watches live again and ends with the right state.
    create(&api, "watched-1", "watched", 16).await;
    assert_eq!(next_event(&mut events).await, "Apply(watched-1)");
    api.delete("watched-0", &DeleteParams::default())
        .await
        .expect("delete");
    assert_eq!(next_event(&mut events).await, "Delete(watched-0)");
    let reflected: BTreeMap<String, String> = store
        .state()
        .iter()
        .map(|o| (o.name_any(), o.resource_version().unwrap_or_default()))
        .collect();
    assert_eq!(
        reflected,
        list_state(&api, &ListParams::default().labels("app=watched")).await
    );

    // The raw API: a watch at resourceVersion 1 (long gone) is HTTP 200 with an ERROR event.
    let mut stream = api
        .watch(&WatchParams::default(), "1")
        .await
        .expect("HTTP 200 for a watch of a gone resourceVersion")
        .boxed();
    match next(&mut stream).await {
        Ok(WatchEvent::Error(status)) => {
            assert_eq!((status.code, status.reason.as_str()), (410, "Expired"));
        }
        other => panic!("expected an ERROR event, got {other:?}"),
    }
    server.shutdown().await;
}

/// 5. Bookmarks: a streaming-list watch (sendInitialEvents, allowWatchBookmarks) sends the
///    existing objects as ADDED, then a BOOKMARK annotated `k8s.io/initial-events-end`, then
///    live events; the watcher with bookmarks (its default) turns that bookmark into InitDone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bookmarks_mark_the_end_of_initial_events() {
    let server = common::server().await;
    let api = configmaps(&server);
    let mut last_rv = 0;
    for i in 0..7 {
        last_rv = rv_of(&create(&api, &format!("cm-{i:02}"), "test", 16).await);
    }
    let mut expected = names(0..7);
    for rv in ["0", ""] {
        let params = WatchParams::streaming_lists();
        assert!(params.bookmarks && params.send_initial_events);
        let mut stream = api.watch(&params, rv).await.expect("watch").boxed();
        let mut added = BTreeSet::new();
        let bookmark = loop {
            match next(&mut stream).await.expect("an event") {
                WatchEvent::Added(object) => {
                    assert!(added.insert(object.name_any()));
                }
                WatchEvent::Bookmark(bookmark) => break bookmark,
                other => panic!("expected ADDED or BOOKMARK, got {other:?}"),
            }
        };
        assert_eq!(added, expected, "resourceVersion={rv:?}");
        assert_eq!(
            bookmark
                .metadata
                .annotations
                .get("k8s.io/initial-events-end")
                .map(String::as_str),
            Some("true")
        );
        assert_eq!(bookmark.types.kind, "ConfigMap");
        let bookmark_rv: u64 = bookmark.metadata.resource_version.parse().unwrap();
        assert!(bookmark_rv >= last_rv, "{bookmark_rv} < {last_rv}");
        let created = create(&api, &format!("live-{}", expected.len()), "test", 16).await;
        match next(&mut stream).await.expect("an event") {
            WatchEvent::Added(object) => assert_eq!(object.name_any(), created.name_any()),
            other => panic!("expected ADDED, got {other:?}"),
        }
        last_rv = rv_of(&created);
        expected.insert(created.name_any());
    }

    // A plain watch with allowWatchBookmarks from a list's rv: no initial events, just changes.
    let list_rv = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut stream = api
        .watch(&WatchParams::default(), &list_rv)
        .await
        .expect("watch")
        .boxed();
    api.delete("cm-03", &DeleteParams::default())
        .await
        .expect("delete");
    match next(&mut stream).await.expect("an event") {
        WatchEvent::Deleted(object) => assert_eq!(object.name_any(), "cm-03"),
        other => panic!("expected DELETED, got {other:?}"),
    }

    // The watcher with bookmarks on (the default) in streaming-list mode reaches InitDone.
    let config = watcher::Config::default().streaming_lists();
    assert!(config.bookmarks);
    let mut events: Events = watcher(api.clone(), config).boxed();
    expected.remove("cm-03");
    assert_eq!(init_sequence(&mut events).await, expected);
    server.shutdown().await;
}

/// 6. Writes and their errors, and selectors in lists and watches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_errors_and_selectors() {
    let server = common::server().await;
    let api = configmaps(&server);
    let created = create(&api, "w", "test", 16).await;
    assert!(created.uid().is_some());
    assert!(created.creation_timestamp().is_some());

    // Creating it again: 409 AlreadyExists.
    let status = api_status(
        api.create(&PostParams::default(), &cm("w", "test", 1))
            .await,
    );
    assert_eq!(
        (status.code, status.reason.as_str()),
        (409, "AlreadyExists")
    );

    // Replace with the current resourceVersion, then with the stale one: 409 Conflict.
    let mut fresh = created.clone();
    fresh
        .data
        .get_or_insert_default()
        .insert("r".into(), "1".into());
    let replaced = api
        .replace("w", &PostParams::default(), &fresh)
        .await
        .expect("replace");
    assert!(rv_of(&replaced) > rv_of(&created));
    assert_eq!(replaced.data.as_ref().unwrap()["r"], "1");
    let status = api_status(api.replace("w", &PostParams::default(), &fresh).await);
    assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"));

    // Patches: merge, JSON and strategic merge.
    let params = PatchParams::default();
    let merged = api
        .patch("w", &params, &Patch::Merge(json!({"data": {"m": "1"}})))
        .await
        .expect("merge patch");
    assert_eq!(merged.data.as_ref().unwrap()["m"], "1");
    let json_patch = serde_json::from_value(json!([
        {"op": "add", "path": "/data/j", "value": "2"},
        {"op": "remove", "path": "/data/r"}
    ]))
    .unwrap();
    let patched = api
        .patch("w", &params, &Patch::Json::<()>(json_patch))
        .await
        .expect("json patch");
    let data = patched.data.as_ref().unwrap();
    assert_eq!(data["j"], "2");
    assert!(!data.contains_key("r"));
    let strategic = api
        .patch(
            "w",
            &params,
            &Patch::Strategic(json!({"metadata": {"labels": {"tier": "a"}}})),
        )
        .await
        .expect("strategic merge patch");
    assert_eq!(strategic.labels()["tier"], "a");
    assert_eq!(strategic.labels()["app"], "test");
    assert!(rv_of(&strategic) > rv_of(&patched));
    // A bad JSON patch (test fails): an error, not a write.
    let failing =
        serde_json::from_value(json!([{"op": "test", "path": "/data/j", "value": "x"}])).unwrap();
    let status = api_status(api.patch("w", &params, &Patch::Json::<()>(failing)).await);
    assert!((400..500).contains(&status.code), "{status:?}");
    assert_eq!(rv_of(&api.get("w").await.unwrap()), rv_of(&strategic));

    // Selectors in lists.
    create(&api, "x", "other", 16).await;
    create(&api, "y", "other", 16).await;
    let by_name = list_state(&api, &ListParams::default().fields("metadata.name=x")).await;
    assert_eq!(by_name.keys().collect::<Vec<_>>(), ["x"]);
    let not_name = list_state(&api, &ListParams::default().fields("metadata.name!=x")).await;
    assert_eq!(not_name.keys().collect::<Vec<_>>(), ["w", "y"]);
    let by_label = list_state(&api, &ListParams::default().labels("app=other")).await;
    assert_eq!(by_label.keys().collect::<Vec<_>>(), ["x", "y"]);
    let by_set = list_state(&api, &ListParams::default().labels("tier in (a,b)")).await;
    assert_eq!(by_set.keys().collect::<Vec<_>>(), ["w"]);
    let status = api_status(api.list(&ListParams::default().labels("app in (a")).await);
    assert_eq!((status.code, status.reason.as_str()), (400, "BadRequest"));
    let status = api_status(
        api.list(&ListParams::default().fields("metadata.nonsense=1"))
            .await,
    );
    assert_eq!(status.code, 400, "{status:?}");

    // Selectors in watches: only matching objects' events arrive.
    let list_rv = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut by_field = api
        .watch(&WatchParams::default().fields("metadata.name=z"), &list_rv)
        .await
        .expect("watch")
        .boxed();
    let mut by_label = api
        .watch(&WatchParams::default().labels("app=zed"), &list_rv)
        .await
        .expect("watch")
        .boxed();
    create(&api, "v", "zed", 16).await;
    create(&api, "z", "other", 16).await;
    match next(&mut by_field).await.expect("an event") {
        WatchEvent::Added(object) => assert_eq!(object.name_any(), "z"),
        other => panic!("expected ADDED z, got {other:?}"),
    }
    match next(&mut by_label).await.expect("an event") {
        WatchEvent::Added(object) => assert_eq!(object.name_any(), "v"),
        other => panic!("expected ADDED v, got {other:?}"),
    }
    let status = api_status(
        api.watch(&WatchParams::default().labels("!!"), &list_rv)
            .await
            .map(|_| ()),
    );
    assert_eq!((status.code, status.reason.as_str()), (400, "BadRequest"));

    // Delete, then GET and delete again: 404 NotFound.
    api.delete("w", &DeleteParams::default())
        .await
        .expect("delete");
    let status = api_status(api.get("w").await);
    assert_eq!((status.code, status.reason.as_str()), (404, "NotFound"));
    assert_eq!(status.details.as_ref().map(|d| d.name.as_str()), Some("w"));
    let status = api_status(api.delete("w", &DeleteParams::default()).await);
    assert_eq!((status.code, status.reason.as_str()), (404, "NotFound"));
    assert!(api.get_opt("w").await.expect("get_opt").is_none());
    server.shutdown().await;
}

/// 7. A consumer that stops reading while ~2000 objects of 8 KiB are written (far more than
///    the socket buffers and its queue hold) gets every event, in order, on the same stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_consumer_loses_nothing() {
    let server = common::server().await;
    let api = configmaps(&server);
    let list_rv = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    // The watch runs on its own connection (a second client), not polled while writing.
    let mut stream = configmaps(&server)
        .watch(&WatchParams::default(), &list_rv)
        .await
        .expect("watch")
        .boxed();
    let mut written = Vec::new();
    for i in 0..2000 {
        written.push(rv_of(
            &create(&api, &format!("cm-{i:04}"), "test", 8 * 1024).await,
        ));
    }
    let mut received = Vec::new();
    while received.len() < written.len() {
        match next(&mut stream).await {
            Ok(WatchEvent::Added(object)) => received.push(rv_of(&object)),
            Ok(WatchEvent::Bookmark(_)) => {}
            other => panic!("expected ADDED, got {other:?}"),
        }
    }
    assert_eq!(received, written, "every event, in order, exactly once");
    let configmaps = server.app.resource("", "v1", "configmaps").unwrap();
    let metrics = configmaps.cache().metrics();
    eprintln!(
        "slow consumer: {} stalls, {} skipped events",
        metrics.watcher_stalls.get(),
        metrics.watcher_skipped_events.get()
    );
    assert!(
        metrics.watcher_stalls.get() >= 1,
        "the consumer really fell behind"
    );
    assert_eq!(metrics.watcher_skipped_events.get(), 0);
    // The stream is still open: a later write still arrives on it.
    let later = create(&api, "later", "test", 16).await;
    match next(&mut stream).await {
        Ok(WatchEvent::Added(object)) => assert_eq!(rv_of(&object), rv_of(&later)),
        other => panic!("expected ADDED later, got {other:?}"),
    }
    server.shutdown().await;
}

/// More of what kube-rs sends: the `any` list semantic (`resourceVersion=0`), `get_metadata`
/// and `list_metadata` (which ask for `PartialObjectMetadata`), and a watcher over
/// `Api<PartialObjectMeta<_>>` (metadata-only lists and watches).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_semantic_and_metadata_requests() {
    let server = common::server().await;
    let api = configmaps(&server);
    for i in 0..6 {
        create(&api, &format!("cm-{i:02}"), "test", 16).await;
    }
    let mut events: Events =
        watcher(api.clone(), watcher::Config::default().any_semantic()).boxed();
    assert_eq!(init_sequence(&mut events).await, names(0..6));

    let metadata = api.get_metadata("cm-02").await.expect("get_metadata");
    assert_eq!(metadata.name_any(), "cm-02");
    assert!(metadata.resource_version().is_some());
    // The server answers metadata only (not the whole object with its own kind).
    assert_eq!(
        metadata.types.as_ref().map(|t| t.kind.as_str()),
        Some("PartialObjectMetadata")
    );
    let listed = api
        .list_metadata(&ListParams::default().limit(4))
        .await
        .expect("list_metadata");
    assert_eq!(listed.items.len(), 4);
    assert!(listed.metadata.continue_.is_some());
    assert_eq!(listed.types.kind, "PartialObjectMetadataList");
    assert_eq!(listed.types.api_version, "meta.k8s.io/v1");

    let metadata_api: Api<PartialObjectMeta<ConfigMap>> =
        Api::namespaced(client(&server), "default");
    let mut metadata_events = watcher(metadata_api, watcher::Config::default())
        .map(|event| event.map(|e| e.to_string()))
        .boxed();
    assert_eq!(next(&mut metadata_events).await.unwrap(), "Init");
    let mut seen = BTreeSet::new();
    loop {
        let event = next(&mut metadata_events).await.expect("an event");
        if event == "InitDone" {
            break;
        }
        seen.insert(event);
    }
    assert_eq!(seen.len(), 6, "{seen:?}");
    create(&api, "late", "test", 16).await;
    assert_eq!(next(&mut metadata_events).await.unwrap(), "Apply(late)");
    server.shutdown().await;
}

/// kube-rs's aggregated discovery (`Discovery::run_aggregated`, one request to `/api` and one
/// to `/apis` asking for `apidiscovery.k8s.io/v2`) finds the same groups, resources, scopes,
/// verbs and subresources as its legacy discovery (`Discovery::run`, one request per group):
/// 50 served kinds, events.k8s.io/v1 Events (core Events' storage), CustomResourceDefinitions,
/// the 6 review resources (TokenReview among them), the create-only core Binding and the
/// read-only ComponentStatus (`get` and `list` only); service accounts have the `token` subresource. (autoscaling/v1 is not
/// among kube-rs's recommended resources: the group prefers v2, which serves the same kind.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aggregated_discovery_matches_legacy_discovery() {
    use kube::discovery::{Discovery, Scope};
    let server = common::server().await;
    let summary = |discovery: &Discovery| {
        let mut out = BTreeSet::new();
        for group in discovery.groups() {
            for (resource, caps) in group.recommended_resources() {
                let mut subresources: Vec<String> = caps
                    .subresources
                    .iter()
                    .map(|(sub, sub_caps)| format!("{}{:?}", sub.plural, sub_caps.operations))
                    .collect();
                subresources.sort();
                out.insert(format!(
                    "{}/{} {} {} {:?} {:?} {subresources:?}",
                    resource.group,
                    resource.version,
                    resource.kind,
                    resource.plural,
                    matches!(caps.scope, Scope::Namespaced),
                    caps.operations,
                ));
            }
        }
        out
    };
    let aggregated = Discovery::new(client(&server))
        .run_aggregated()
        .await
        .expect("aggregated discovery");
    let legacy = Discovery::new(client(&server))
        .run()
        .await
        .expect("legacy discovery");
    let aggregated = summary(&aggregated);
    assert_eq!(aggregated, summary(&legacy));
    assert_eq!(aggregated.len(), 60, "{aggregated:#?}");
    assert!(
        aggregated.contains(r#"/v1 Binding bindings true ["create"] []"#),
        "{aggregated:#?}"
    );
    let component_statuses = aggregated
        .iter()
        .find(|line| line.starts_with("/v1 ComponentStatus componentstatuses false"))
        .expect("componentstatuses");
    assert!(
        component_statuses.contains(r#"["get", "list"]"#),
        "{component_statuses}"
    );
    assert!(
        aggregated
            .iter()
            .any(|line| line.starts_with("events.k8s.io/v1 Event events true")),
        "{aggregated:#?}"
    );
    let accounts = aggregated
        .iter()
        .find(|line| line.starts_with("/v1 ServiceAccount"))
        .expect("serviceaccounts");
    assert!(accounts.contains("token"), "{accounts}");
    let pods = aggregated
        .iter()
        .find(|line| line.starts_with("/v1 Pod pods"))
        .expect("pods");
    assert!(pods.contains("status"), "{pods}");
    assert!(
        pods.contains("binding") && pods.contains("eviction"),
        "{pods}"
    );
    let configmaps = aggregated
        .iter()
        .find(|line| line.starts_with("/v1 ConfigMap"))
        .expect("configmaps");
    assert!(configmaps.ends_with("[]"), "{configmaps}");
    server.shutdown().await;
}

/// kube-rs installs a CRD as operators do: create it, `await_condition(is_crd_established)`,
/// then use the new kind through a `DynamicObject` API (create, list, watch); deleting the
/// CRD ends the watch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn installs_a_crd_and_uses_its_kind() {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
    use kube::runtime::{conditions, wait::await_condition};

    let server = common::server().await;
    let client = client(&server);
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "gizmos.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}},
                "subresources": {"scale": {"specReplicasPath": ".spec.size",
                    "statusReplicasPath": ".status.size"}}}]
        }
    }))
    .expect("a CRD");
    crds.create(&PostParams::default(), &crd)
        .await
        .expect("create the CRD");
    tokio::time::timeout(
        HANG_GUARD,
        await_condition(
            crds.clone(),
            "gizmos.example.com",
            conditions::is_crd_established(),
        ),
    )
    .await
    .expect("established in time")
    .expect("the condition's watch");
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Gizmo"),
        "gizmos",
    );
    let gizmos: Api<DynamicObject> = Api::namespaced_with(client, "default", &resource);
    let mut events = watcher(gizmos.clone(), watcher::Config::default()).boxed();
    let mut gizmo = DynamicObject::new("g1", &resource);
    gizmo.data = json!({"spec": {"size": 1}});
    gizmos
        .create(&PostParams::default(), &gizmo)
        .await
        .expect("create a gizmo");
    let listed = gizmos.list(&ListParams::default()).await.expect("a list");
    assert_eq!(listed.items.len(), 1);
    assert_eq!(listed.items[0].data["spec"]["size"], 1);
    // The CRD's scale subresource reads and writes `.spec.size`.
    let scale = gizmos.get_scale("g1").await.expect("get_scale");
    assert_eq!(scale.spec.and_then(|s| s.replicas), Some(1));
    assert_eq!(scale.status.map(|s| s.replicas), Some(0));
    let scale = gizmos
        .patch_scale(
            "g1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 4}})),
        )
        .await
        .expect("patch_scale");
    assert_eq!(scale.spec.and_then(|s| s.replicas), Some(4));
    let scaled = gizmos.get("g1").await.expect("get");
    assert_eq!(scaled.data["spec"]["size"], 4);
    loop {
        let event = tokio::time::timeout(HANG_GUARD, events.next())
            .await
            .expect("a watch event")
            .expect("the watcher goes on")
            .expect("no watch error");
        if let watcher::Event::Apply(object) | watcher::Event::InitApply(object) = event {
            assert_eq!(object.metadata.name.as_deref(), Some("g1"));
            break;
        }
    }
    crds.delete("gizmos.example.com", &DeleteParams::default())
        .await
        .expect("delete the CRD");
    // The watch of a removed resource ends with an error (then lists and fails: 404).
    loop {
        let event = tokio::time::timeout(HANG_GUARD, events.next())
            .await
            .expect("a watch event")
            .expect("the watcher goes on");
        if event.is_err() {
            break;
        }
    }
    let status = api_status(gizmos.list(&ListParams::default()).await);
    assert_eq!(status.code, 404);
    server.shutdown().await;
}

/// What kube-rs's own cluster tests find on any kube-apiserver: the `default/kubernetes`
/// Service and the `cluster-admin` ClusterRole created at start, a PATCH answered as
/// `PartialObjectMetadata` (`patch_metadata`), and the `ephemeralcontainers` subresource of a
/// pod (added by replace and by strategic merge patch; an existing one cannot be removed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_apiserver_objects_metadata_patches_and_ephemeral_containers() {
    use k8s_openapi::api::core::v1::{Pod, Service};
    use k8s_openapi::api::rbac::v1::ClusterRole;
    use kube::api::ObjectMeta;
    use kube::core::PartialObjectMetaExt;

    let server = common::server().await;
    let client = client(&server);
    let service = Api::<Service>::namespaced(client.clone(), "default")
        .get("kubernetes")
        .await
        .expect("the kubernetes Service");
    let spec = service.spec.expect("a spec");
    assert_eq!(spec.cluster_ip.as_deref(), Some("10.0.0.1"));
    let port = &spec.ports.expect("ports")[0];
    assert_eq!((port.name.as_deref(), port.port), (Some("https"), 443));
    assert_eq!(
        port.target_port,
        Some(
            k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(i32::from(
                server.addr.port()
            ))
        )
    );
    let admin = Api::<ClusterRole>::all(client.clone())
        .get("cluster-admin")
        .await
        .expect("the cluster-admin ClusterRole");
    assert_eq!(admin.rules.expect("rules")[0].verbs, vec!["*".to_owned()]);

    let pods: Api<Pod> = Api::namespaced(client, "default");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "debugged"},
        "spec": {"containers": [{"name": "main", "image": "busybox:stable"}]}
    }))
    .expect("a pod");
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("create a pod");
    let patch = ObjectMeta {
        annotations: Some([("note".to_owned(), "1".to_owned())].into()),
        ..ObjectMeta::default()
    }
    .into_request_partial::<Pod>();
    let patched = pods
        .patch_metadata("debugged", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("patch_metadata");
    assert_eq!(
        patched.annotations().get("note").map(String::as_str),
        Some("1")
    );
    let types = patched.types.expect("types");
    assert_eq!(
        (types.kind.as_str(), types.api_version.as_str()),
        ("PartialObjectMetadata", "meta.k8s.io/v1")
    );

    let one: Pod = serde_json::from_value(json!({
        "metadata": {"name": "debugged"},
        "spec": {"ephemeralContainers": [{"name": "debug1", "image": "busybox:stable"}]}
    }))
    .expect("a pod");
    let replaced = pods
        .replace_ephemeral_containers("debugged", &PostParams::default(), &one)
        .await
        .expect("replace_ephemeral_containers");
    let spec = replaced.spec.expect("a spec");
    assert_eq!(spec.containers.len(), 1, "the containers stay");
    let ephemeral = spec.ephemeral_containers.expect("ephemeral containers");
    assert_eq!(ephemeral.len(), 1);
    assert_eq!(
        ephemeral[0].termination_message_path.as_deref(),
        Some("/dev/termination-log"),
        "defaulted as containers are"
    );
    let two: Pod = serde_json::from_value(json!({
        "spec": {"ephemeralContainers": [{"name": "debug2", "image": "busybox:stable"}]}
    }))
    .expect("a pod");
    let merged = pods
        .patch_ephemeral_containers("debugged", &PatchParams::default(), &Patch::Strategic(two))
        .await
        .expect("patch_ephemeral_containers");
    let names: Vec<String> = merged
        .spec
        .and_then(|s| s.ephemeral_containers)
        .unwrap_or_default()
        .into_iter()
        .map(|c| c.name)
        .collect();
    // apimachinery's order for a merged list (`normalizeElementOrder`): the patch's items
    // first, as the object had no place for `debug2` before `debug1` (`kubectl debug` sends
    // `$setElementOrder/ephemeralContainers` to keep its order; this patch has none).
    assert_eq!(names, ["debug2", "debug1"]);
    let status = api_status(
        pods.replace_ephemeral_containers("debugged", &PostParams::default(), &one)
            .await,
    );
    assert_eq!(status.code, 422);
    assert_eq!(
        status.message,
        "Pod \"debugged\" is invalid: spec.ephemeralContainers: Forbidden: existing ephemeral containers \"debug2\" may not be removed\n"
    );
    server.shutdown().await;
}

/// A CertificateSigningRequest approved through its `approval` subresource (kube-rs's
/// `patch_approval`, `get_approval`): only the conditions change, each gets its timestamps,
/// and Approved with Denied is 422.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificate_signing_requests_are_approved_through_approval() {
    use k8s_openapi::api::certificates::v1::CertificateSigningRequest;

    let server = common::server().await;
    let csrs: Api<CertificateSigningRequest> = Api::all(client(&server));
    // A real PKCS#10 request: kube checks its PEM and signature.
    let key = rcgen::KeyPair::generate().expect("a key");
    let pem = rcgen::CertificateParams::default()
        .serialize_request(&key)
        .expect("a request")
        .pem()
        .expect("its PEM");
    let request = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, pem);
    let csr: CertificateSigningRequest = serde_json::from_value(json!({
        "metadata": {"name": "fake"},
        "spec": {"request": request, "signerName": "example.com/signer", "usages": ["client auth"]}
    }))
    .expect("a CSR");
    let created = csrs
        .create(&PostParams::default(), &csr)
        .await
        .expect("create a CSR");
    // The server records the requester (here the anonymous user).
    assert_eq!(created.spec.username.as_deref(), Some("system:anonymous"));
    let approve = |kind: &str| {
        Patch::Merge(json!({"status": {"conditions": [
            {"type": kind, "status": "True", "reason": "Test", "message": "by kube-rs"}]}}))
    };
    csrs.patch_approval("fake", &PatchParams::default(), &approve("Approved"))
        .await
        .expect("patch_approval");
    let approved = csrs.get_approval("fake").await.expect("get_approval");
    let conditions = approved
        .status
        .and_then(|s| s.conditions)
        .expect("conditions");
    assert_eq!(conditions.len(), 1);
    assert_eq!(conditions[0].type_, "Approved");
    assert!(
        conditions[0].last_update_time.is_some() && conditions[0].last_transition_time.is_some()
    );
    assert_eq!(
        approved.spec.signer_name, "example.com/signer",
        "the spec is kept"
    );
    let both = Patch::Merge(json!({"status": {"conditions": [
        {"type": "Approved", "status": "True"}, {"type": "Denied", "status": "True"}]}}));
    let status = api_status(
        csrs.patch_approval("fake", &PatchParams::default(), &both)
            .await,
    );
    assert_eq!(status.code, 422, "{status:?}");
    server.shutdown().await;
}

/// kube-rs's own cluster test `create_token_request` (kube-client's `api/util`), unchanged in
/// substance: a ServiceAccount, a TokenRequest for the audience `api`, and a TokenReview of the
/// token for that audience that authenticates it as the service account.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_token_request_and_review_it() {
    use k8s_openapi::api::authentication::v1::{
        TokenRequest, TokenRequestSpec, TokenReview, TokenReviewSpec,
    };
    use k8s_openapi::api::core::v1::ServiceAccount;
    let server = common::server().await;
    let client = client(&server);
    let serviceaccount_name = "fakesa";
    let serviceaccount_namespace = "default";
    let audiences = vec!["api".to_string()];
    let serviceaccounts: Api<ServiceAccount> =
        Api::namespaced(client.clone(), serviceaccount_namespace);
    let tokenreviews: Api<TokenReview> = Api::all(client);
    let fake_sa: ServiceAccount = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": serviceaccount_name},
    }))
    .unwrap();
    serviceaccounts
        .create(&PostParams::default(), &fake_sa)
        .await
        .unwrap();
    let tokenrequest = serviceaccounts
        .create_token_request(
            serviceaccount_name,
            &PostParams::default(),
            &TokenRequest {
                metadata: Default::default(),
                spec: TokenRequestSpec {
                    audiences: audiences.clone(),
                    bound_object_ref: None,
                    expiration_seconds: None,
                },
                status: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(tokenrequest.spec.expiration_seconds, Some(3600));
    let token = tokenrequest.status.unwrap().token;
    assert!(!token.is_empty());
    let tokenreview = tokenreviews
        .create(
            &PostParams::default(),
            &TokenReview {
                metadata: Default::default(),
                spec: TokenReviewSpec {
                    audiences: Some(audiences.clone()),
                    token: Some(token.clone()),
                },
                status: None,
            },
        )
        .await
        .unwrap();
    let status = tokenreview.status.unwrap();
    assert_eq!(status.audiences, Some(audiences));
    assert_eq!(status.authenticated, Some(true));
    assert_eq!(status.error, None);
    assert_eq!(
        status.user.unwrap().username,
        Some(format!(
            "system:serviceaccount:{serviceaccount_namespace}:{serviceaccount_name}"
        ))
    );
    // Another audience is not this token's.
    let other = tokenreviews
        .create(
            &PostParams::default(),
            &TokenReview {
                metadata: Default::default(),
                spec: TokenReviewSpec {
                    audiences: Some(vec!["vault".to_owned()]),
                    token: Some(token),
                },
                status: None,
            },
        )
        .await
        .unwrap();
    let status = other.status.unwrap();
    assert_eq!(status.authenticated, None);
    assert!(
        status
            .error
            .unwrap()
            .contains("is invalid for the target audiences")
    );
    serviceaccounts
        .delete(serviceaccount_name, &DeleteParams::default())
        .await
        .unwrap();
    server.shutdown().await;
}

/// kube-rs' own `fetch_fails` (kube-client's `client_ext` tests): a Service fetched as a Pod
/// fails in the typed decoder at `kind`, which kube-apiserver writes first: the error names
/// line 1, column 17 (`{"kind":"Service"`). Every object body is in Go field order: `kind`,
/// `apiVersion`, `metadata`, `spec`, `status`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_fails_at_the_kind_written_first() {
    use k8s_openapi::api::core::v1::{Pod, Service};
    use kube::core::DynamicObject;

    let server = common::server().await;
    let client = client(&server);
    // `Client::fetch` (behind kube's `unstable-client` feature) is a GET decoded as the
    // reference's type: the same as `Client::request` on the object's URL.
    let get = || {
        axum::http::Request::get("/api/v1/namespaces/default/services/kubernetes")
            .body(Vec::new())
            .unwrap()
    };
    let svc: Service = client
        .request(get())
        .await
        .expect("the default/kubernetes Service");
    assert_eq!(svc.name_any(), "kubernetes");
    let err = client.request::<Pod>(get()).await.unwrap_err();
    assert!(matches!(err, kube::Error::SerdeError(_)), "{err:?}");
    assert_eq!(
        err.to_string(),
        "Error deserializing response: invalid value: string \"Service\", expected Pod at line 1 column 17"
    );
    let obj: DynamicObject = client.request(get()).await.expect("a dynamic object");
    assert_eq!(
        obj.try_parse::<Pod>().unwrap_err().to_string(),
        "failed to parse this DynamicObject into a Resource: invalid value: string \"Service\", expected Pod"
    );

    // Write answers, LIST items and watch events are in the same order.
    let api = configmaps(&server);
    let mut watch = api
        .watch(&WatchParams::default(), "0")
        .await
        .expect("a watch")
        .boxed();
    let created = client
        .request_text(
            axum::http::Request::post("/api/v1/namespaces/default/configmaps")
                .header("content-type", "application/json")
                .body(
                    serde_json::to_vec(&json!({"data": {"k": "v"}, "metadata": {"name": "ordered", "labels": {"a": "b"}}, "apiVersion": "v1", "kind": "ConfigMap"}))
                        .unwrap(),
                )
                .unwrap(),
        )
        .await
        .expect("a create");
    assert!(
        created.starts_with(r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"ordered","namespace":"default","uid":"#),
        "{created}"
    );
    let listed = client
        .request_text(
            axum::http::Request::get("/api/v1/namespaces/default/configmaps")
                .body(Vec::new())
                .unwrap(),
        )
        .await
        .expect("a list");
    assert!(
        listed.contains(
            r#""items":[{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"ordered","#
        ),
        "{listed}"
    );
    // The watch (from "0": the existing objects, then the new one) decodes the same bytes.
    loop {
        match next(&mut watch).await.expect("an event") {
            WatchEvent::Added(cm) if cm.name_any() == "ordered" => break,
            WatchEvent::Added(_) | WatchEvent::Bookmark(_) => {}
            other => panic!("{other:?}"),
        }
    }
    server.shutdown().await;
}

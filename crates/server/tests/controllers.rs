//! The server's controllers over HTTP: garbage collection (kube-apiserver's finalizers on
//! DELETE — `propagationPolicy`, `orphanDependents`, the kinds' defaults — and the collector
//! that carries them out, `controllers::garbage_collector`) and namespace deletion
//! (`controllers::namespaces`). Every wait is on a watch event, never on time.

use crate::common;

use std::net::SocketAddr;

use serde_json::{Value, json};
use watchkeeper::config::ServeArgs;

use common::{
    WatchReader, get_json, request, restarted, send_json, server, server_with, stored_keys,
};

const CMS: &str = "/api/v1/namespaces/default/configmaps";
const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

/// A ConfigMap `name` owned by `owners` (`(apiVersion, kind, name, uid, blockOwnerDeletion)`).
fn owned(name: &str, owners: &[(&str, &str, &str, &str, bool)]) -> Value {
    let refs: Vec<Value> = owners
        .iter()
        .map(|(api_version, kind, owner, uid, block)| {
            json!({"apiVersion": api_version, "kind": kind, "name": owner, "uid": uid,
                "blockOwnerDeletion": block})
        })
        .collect();
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "ownerReferences": refs}})
}

/// Creates `body` at `path`; its uid.
async fn create(addr: SocketAddr, path: &str, body: &Value) -> String {
    let (status, created) = send_json(addr, "POST", path, body).await;
    assert_eq!(status, 201, "POST {path}: {created}");
    created["metadata"]["uid"].as_str().unwrap().to_owned()
}

/// Creates the CRD `widgets.example.com` (namespaced `Widget`, served at `v1`) and the
/// Widget `default/w`; its uid.
async fn widget_of_a_new_crd(addr: SocketAddr) -> String {
    create(addr, CRDS, &common::widgets_crd()).await;
    create(
        addr,
        "/apis/example.com/v1/namespaces/default/widgets",
        &json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}),
    )
    .await
}

/// A watch of `path` from now.
async fn watch(addr: SocketAddr, path: &str) -> WatchReader {
    let (status, list) = get_json(addr, path).await;
    assert_eq!(status, 200, "{list}");
    let rv = list["metadata"]["resourceVersion"].as_str().unwrap();
    WatchReader::open(addr, &format!("{path}?watch=1&resourceVersion={rv}"), None).await
}

/// Reads `watch` until every name in `names` was DELETED; the other events seen.
async fn until_deleted(watch: &mut WatchReader, names: &[&str]) -> Vec<Value> {
    let mut left: Vec<&str> = names.to_vec();
    let mut seen = Vec::new();
    while !left.is_empty() {
        let event = watch.next().await.expect("the watch goes on");
        let name = event["object"]["metadata"]["name"].as_str().unwrap_or("");
        if event["type"] == "DELETED" {
            left.retain(|n| *n != name);
        }
        seen.push(event);
    }
    seen
}

/// Reads `watch` until an event for `name` satisfies `done`; that object.
async fn until_object(
    watch: &mut WatchReader,
    name: &str,
    done: impl Fn(&str, &Value) -> bool,
) -> Value {
    // What went by, for the message when the stream ends first.
    let mut passed = Vec::new();
    loop {
        let Some(event) = watch.next().await else {
            panic!("the watch ended before {name} did; it sent {passed:?}");
        };
        let kind = event["type"].as_str().unwrap_or("").to_owned();
        let object = &event["object"];
        if object["metadata"]["name"] == name && done(&kind, object) {
            return object.clone();
        }
        passed.push(if kind == "ERROR" {
            event
        } else {
            json!([
                kind,
                object["metadata"]["namespace"],
                object["metadata"]["name"],
                object["metadata"]["resourceVersion"]
            ])
        });
    }
}

async fn delete(addr: SocketAddr, path: &str, options: &Value) -> (u16, Value) {
    let body = if options.is_null() {
        String::new()
    } else {
        options.to_string()
    };
    let (status, text) = request(addr, "DELETE", path, "application/json", &body).await;
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// Goal: a DELETE without options (Background, the default of Deployments) removes the owner
/// at once and the collector then deletes the chain under it (ReplicaSet, then its Pod); an
/// object with a second, live owner only loses the reference to the gone one; an object
/// created naming an owner that does not exist is collected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_deletion_collects_the_chain_of_dependents() {
    let server = server().await;
    let addr = server.addr;
    let apps = "/apis/apps/v1/namespaces/default";
    let labels = json!({"app": "web"});
    let template = json!({"metadata": {"labels": labels},
        "spec": {"containers": [{"name": "web", "image": "nginx"}]}});
    let deployment = create(
        addr,
        &format!("{apps}/deployments"),
        &json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"selector": {"matchLabels": labels}, "template": template}}),
    )
    .await;
    let replicaset = create(
        addr,
        &format!("{apps}/replicasets"),
        &json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web-1",
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                "uid": deployment, "controller": true, "blockOwnerDeletion": true}]},
            "spec": {"selector": {"matchLabels": labels}, "template": template}}),
    )
    .await;
    let mut pod = template.clone();
    pod["apiVersion"] = json!("v1");
    pod["kind"] = json!("Pod");
    pod["metadata"]["name"] = json!("web-1-a");
    pod["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet",
        "name": "web-1", "uid": replicaset, "controller": true, "blockOwnerDeletion": true}]);
    create(addr, "/api/v1/namespaces/default/pods", &pod).await;
    let other = create(addr, CMS, &owned("other-owner", &[])).await;
    create(
        addr,
        CMS,
        &owned(
            "shared",
            &[
                ("apps/v1", "Deployment", "web", &deployment, false),
                ("v1", "ConfigMap", "other-owner", &other, false),
            ],
        ),
    )
    .await;
    let mut pods = watch(addr, "/api/v1/namespaces/default/pods").await;
    let mut configmaps = watch(addr, CMS).await;

    let (status, answer) = delete(addr, &format!("{apps}/deployments/web"), &Value::Null).await;
    assert_eq!(status, 200, "{answer}");
    let (status, _) = get_json(addr, &format!("{apps}/deployments/web")).await;
    assert_eq!(status, 404, "Background: the owner goes at once");
    until_deleted(&mut pods, &["web-1-a"]).await;
    let (status, _) = get_json(addr, &format!("{apps}/replicasets/web-1")).await;
    assert_eq!(status, 404, "the ReplicaSet went before its pod");
    let shared = until_object(&mut configmaps, "shared", |kind, object| {
        kind == "MODIFIED"
            && object["metadata"]["ownerReferences"]
                .as_array()
                .map(Vec::len)
                == Some(1)
    })
    .await;
    assert_eq!(
        shared["metadata"]["ownerReferences"][0]["name"],
        "other-owner"
    );

    // Created naming an owner that is not there (a uid from elsewhere): collected.
    create(
        addr,
        CMS,
        &owned(
            "stray",
            &[("v1", "ConfigMap", "nobody", "0000-1111", false)],
        ),
    )
    .await;
    until_deleted(&mut configmaps, &["stray"]).await;
    // A live owner of that name but another uid does not count either.
    create(
        addr,
        CMS,
        &owned(
            "stale",
            &[("v1", "ConfigMap", "other-owner", "not-its-uid", false)],
        ),
    )
    .await;
    until_deleted(&mut configmaps, &["stale"]).await;
    let (status, _) = get_json(addr, &format!("{CMS}/shared")).await;
    assert_eq!(status, 200, "a dependent with a live owner stays");
    assert_eq!(
        common::metric_at_least(
            addr,
            "watchkeeper_garbage_collector_writes_total{kind=\"deleted\"}",
            4
        )
        .await,
        4
    );
    server.shutdown().await;
}

/// Goal: Foreground keeps the owner (deletionTimestamp, `foregroundDeletion`) while a
/// dependent with `blockOwnerDeletion` is there, deletes every dependent (the blocking one in
/// the foreground too, as it has dependents of its own), and lets the owner go once the last
/// blocking one has.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreground_deletion_waits_for_blocking_dependents() {
    let server = server().await;
    let addr = server.addr;
    let owner = create(addr, CMS, &owned("owner", &[])).await;
    // A blocking dependent that cannot go yet: a finalizer of its own holds it.
    let mut held = owned("held", &[("v1", "ConfigMap", "owner", &owner, true)]);
    held["metadata"]["finalizers"] = json!(["example.com/hold"]);
    let held_uid = create(addr, CMS, &held).await;
    create(
        addr,
        CMS,
        &owned(
            "below-held",
            &[("v1", "ConfigMap", "held", &held_uid, true)],
        ),
    )
    .await;
    create(
        addr,
        CMS,
        &owned("loose", &[("v1", "ConfigMap", "owner", &owner, false)]),
    )
    .await;
    let mut configmaps = watch(addr, CMS).await;

    let (status, answer) = delete(
        addr,
        &format!("{CMS}/owner"),
        &json!({"propagationPolicy": "Foreground"}),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer["metadata"]["finalizers"],
        json!(["foregroundDeletion"])
    );
    assert!(
        answer["metadata"]["deletionTimestamp"].is_string(),
        "{answer}"
    );
    // The non-blocking dependent and the one under `held` go; `held` is deleted in the
    // foreground (it has a dependent) and stays for its own finalizer.
    let marked = |object: &Value| {
        object["metadata"]["name"] == "held"
            && object["metadata"]["deletionTimestamp"].is_string()
            && object["metadata"]["finalizers"] == json!(["example.com/hold"])
    };
    // Its marking may come before the other two go (events are read once).
    let seen = until_deleted(&mut configmaps, &["loose", "below-held"]).await;
    if !seen.iter().any(|event| marked(&event["object"])) {
        until_object(&mut configmaps, "held", |_, object| marked(object)).await;
    }
    let (status, owner) = get_json(addr, &format!("{CMS}/owner")).await;
    assert_eq!(
        status, 200,
        "the owner waits for its blocking dependent: {owner}"
    );
    assert_eq!(
        owner["metadata"]["finalizers"],
        json!(["foregroundDeletion"])
    );

    // Its finalizer removed, `held` goes, and then the owner.
    let (status, body) = request(
        addr,
        "PATCH",
        &format!("{CMS}/held"),
        "application/merge-patch+json",
        r#"{"metadata":{"finalizers":null}}"#,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    until_deleted(&mut configmaps, &["held", "owner"]).await;
    server.shutdown().await;
}

/// Goal: Orphan (asked, or the default of core v1 ReplicationControllers and batch/v1 Jobs)
/// removes the owner's references from its dependents, which stay, then lets the owner go; a
/// Job deleted without a policy gets kube-apiserver's warning; a second DELETE of an object
/// being deleted changes its GC finalizer as asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphan_deletion_keeps_dependents() {
    let server = server().await;
    let addr = server.addr;
    let rcs = "/api/v1/namespaces/default/replicationcontrollers";
    let rc = create(
        addr,
        rcs,
        &json!({"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "rc"},
            "spec": {"selector": {"app": "rc"}, "template": {"metadata": {"labels": {"app": "rc"}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}),
    )
    .await;
    create(
        addr,
        CMS,
        &owned("kept", &[("v1", "ReplicationController", "rc", &rc, true)]),
    )
    .await;
    let mut configmaps = watch(addr, CMS).await;
    let mut controllers = watch(addr, rcs).await;
    let (status, answer) = delete(addr, &format!("{rcs}/rc"), &Value::Null).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer["metadata"]["finalizers"],
        json!(["orphan"]),
        "{answer}"
    );
    assert_eq!(
        answer["metadata"]["generation"], 2,
        "markAsDeleting counts a generation"
    );
    let kept = until_object(&mut configmaps, "kept", |kind, _| kind == "MODIFIED").await;
    assert!(kept["metadata"].get("ownerReferences").is_none(), "{kept}");
    until_deleted(&mut controllers, &["rc"]).await;
    let (status, _) = get_json(addr, &format!("{CMS}/kept")).await;
    assert_eq!(status, 200);

    // A Job without a policy: orphaned, with kube-apiserver's warning.
    let jobs = "/apis/batch/v1/namespaces/default/jobs";
    let job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox"}]}}}});
    create(addr, jobs, &job).await;
    let answer = watchkeeper_testkit::request(
        addr,
        "DELETE",
        &format!("{jobs}/j"),
        &[("Content-Type", "application/json")],
        b"",
    )
    .await
    .unwrap();
    assert_eq!(answer.status, 200);
    let warnings: Vec<&str> = answer
        .headers
        .get_all("warning")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    assert_eq!(
        warnings,
        [
            "299 - \"child pods are preserved by default when jobs are deleted; set propagationPolicy=Background to remove them or set propagationPolicy=Orphan to suppress this warning\""
        ]
    );
    let deleted: Value = serde_json::from_slice(&answer.body).unwrap();
    assert_eq!(deleted["metadata"]["finalizers"], json!(["orphan"]));

    // An object held by a finalizer of its own: a second DELETE swaps the GC finalizer.
    let mut held = owned("held", &[]);
    held["metadata"]["finalizers"] = json!(["example.com/hold"]);
    create(addr, CMS, &held).await;
    let (_, first) = delete(
        addr,
        &format!("{CMS}/held"),
        &json!({"propagationPolicy": "Foreground"}),
    )
    .await;
    assert_eq!(
        first["metadata"]["finalizers"],
        json!(["example.com/hold", "foregroundDeletion"])
    );
    let (status, second) = delete(
        addr,
        &format!("{CMS}/held?propagationPolicy=Orphan"),
        &Value::Null,
    )
    .await;
    assert_eq!(status, 200, "{second}");
    assert_eq!(
        second["metadata"]["deletionTimestamp"], first["metadata"]["deletionTimestamp"],
        "the deletion's time stays"
    );
    // The collector removes `orphan` at once (no dependents); the object's own stays.
    until_object(&mut configmaps, "held", |_, object| {
        object["metadata"]["deletionTimestamp"].is_string()
            && object["metadata"]["finalizers"] == json!(["example.com/hold"])
    })
    .await;
    server.shutdown().await;
}

/// Goal: DeleteOptions, owner references and finalizers are checked as kube-apiserver checks
/// them, in its words, and nothing is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn options_owner_references_and_finalizers_are_checked() {
    let server = server().await;
    let addr = server.addr;
    create(addr, CMS, &owned("a", &[])).await;
    let (status, refused) = delete(
        addr,
        &format!("{CMS}/a"),
        &json!({"propagationPolicy": "Foreground", "orphanDependents": true}),
    )
    .await;
    assert_eq!(status, 422, "{refused}");
    assert_eq!(
        refused["message"],
        "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Invalid value: \"Foreground\": orphanDependents and deletionPropagation cannot be both set"
    );
    let (status, refused) = delete(
        addr,
        &format!("{CMS}/a?propagationPolicy=Later"),
        &Value::Null,
    )
    .await;
    assert_eq!(status, 422, "{refused}");
    assert_eq!(
        refused["details"]["causes"][0]["reason"],
        "FieldValueNotSupported"
    );
    let (status, _) = get_json(addr, &format!("{CMS}/a")).await;
    assert_eq!(status, 200, "a refused DELETE deletes nothing");

    let mut no_uid = owned("b", &[("v1", "ConfigMap", "a", "", false)]);
    let (status, refused) = send_json(addr, "POST", CMS, &no_uid).await;
    assert_eq!(status, 422, "{refused}");
    assert_eq!(
        refused["message"],
        "ConfigMap \"b\" is invalid: metadata.ownerReferences.uid: Invalid value: \"\": must not be empty"
    );
    no_uid["metadata"]["ownerReferences"] = json!([
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "a", "uid": "1", "controller": true},
        {"apiVersion": "v1", "kind": "Secret", "name": "s", "uid": "2", "controller": true}
    ]);
    let (status, refused) = send_json(addr, "POST", CMS, &no_uid).await;
    assert_eq!(status, 422, "{refused}");
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .ends_with("Only one reference can have Controller set to true. Found \"true\" in references for ConfigMap/a and Secret/s"),
        "{refused}"
    );
    let (status, refused) = request(
        addr,
        "PATCH",
        &format!("{CMS}/a"),
        "application/merge-patch+json",
        r#"{"metadata":{"finalizers":["orphan","foregroundDeletion"]}}"#,
    )
    .await;
    assert_eq!(status, 422, "{refused}");
    assert!(
        refused.contains("finalizer orphan and foregroundDeletion cannot be both set"),
        "{refused}"
    );

    let (status, refused) = request(
        addr,
        "PATCH",
        &format!("{CMS}/a"),
        "application/merge-patch+json",
        r#"{"metadata":{"finalizers":["not a name"]}}"#,
    )
    .await;
    assert_eq!(status, 422, "{refused}");
    assert!(
        refused.contains("metadata.finalizers: Invalid value: \\\"not a name\\\""),
        "{refused}"
    );

    // An object being deleted takes no new finalizer.
    let (status, _) = request(
        addr,
        "PATCH",
        &format!("{CMS}/a"),
        "application/merge-patch+json",
        r#"{"metadata":{"finalizers":["example.com/hold"]}}"#,
    )
    .await;
    assert_eq!(status, 200);
    let (status, _) = delete(addr, &format!("{CMS}/a"), &Value::Null).await;
    assert_eq!(status, 200);
    let (status, refused) = request(
        addr,
        "PATCH",
        &format!("{CMS}/a"),
        "application/merge-patch+json",
        r#"{"metadata":{"finalizers":["example.com/hold","example.com/more"]}}"#,
    )
    .await;
    assert_eq!(status, 422, "{refused}");
    assert!(
        refused.contains("metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{\\\"example.com/more\\\"}"),
        "{refused}"
    );
    // 202 when cascading was asked with orphanDependents=false and the object stays.
    let (status, answer) = delete(
        addr,
        &format!("{CMS}/a"),
        &json!({"orphanDependents": false}),
    )
    .await;
    assert_eq!(status, 202, "{answer}");
    server.shutdown().await;
}

/// Goal: with `--enable-garbage-collector=false` a DELETE adds no GC finalizer and nothing
/// is collected; a server started later with it on collects, from its first list, what was
/// left behind (here on the embedded store, restarted).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_started_later_collects_what_was_left() {
    let dir = tempfile::tempdir().unwrap();
    let args = |collect: bool| ServeArgs {
        store: Some("embedded".into()),
        data_dir: Some(dir.path().to_owned()),
        enable_garbage_collector: Some(collect),
        ..ServeArgs::default()
    };
    let server = server_with(args(false)).await;
    let addr = server.addr;
    let owner = create(addr, CMS, &owned("owner", &[])).await;
    create(
        addr,
        CMS,
        &owned("left", &[("v1", "ConfigMap", "owner", &owner, true)]),
    )
    .await;
    let (status, answer) = delete(
        addr,
        &format!("{CMS}/owner"),
        &json!({"propagationPolicy": "Foreground"}),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let (status, _) = get_json(addr, &format!("{CMS}/owner")).await;
    assert_eq!(status, 404, "no GC finalizer: deleted at once");
    let (_, metrics) = request(addr, "GET", "/metrics", "text/plain", "").await;
    assert!(
        !metrics.contains("watchkeeper_garbage_collector"),
        "no collector runs"
    );
    let (status, _) = get_json(addr, &format!("{CMS}/left")).await;
    assert_eq!(status, 200);
    server.shutdown().await;

    let server = restarted(args(true)).await;
    let addr = server.addr;
    // Collected from the first list: gone already, or seen going from the list on.
    let (status, list) = get_json(addr, CMS).await;
    assert_eq!(status, 200, "{list}");
    let left = list["items"]
        .as_array()
        .is_some_and(|items| items.iter().any(|i| i["metadata"]["name"] == "left"));
    if left {
        let rv = list["metadata"]["resourceVersion"].as_str().unwrap();
        let mut configmaps =
            WatchReader::open(addr, &format!("{CMS}?watch=1&resourceVersion={rv}"), None).await;
        until_deleted(&mut configmaps, &["left"]).await;
    }
    let (status, _) = get_json(addr, &format!("{CMS}/left")).await;
    assert_eq!(status, 404);
    server.shutdown().await;
}

/// Goal: a namespaced owner counts only in its dependent's namespace, and a reference to a
/// kind the server does not serve never makes an object go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owners_are_looked_up_as_kube_does() {
    let server = server().await;
    let addr = server.addr;
    let (status, body) = send_json(
        addr,
        "POST",
        "/api/v1/namespaces",
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "elsewhere"}}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let foreign = create(
        addr,
        "/api/v1/namespaces/elsewhere/configmaps",
        &owned("owner", &[]),
    )
    .await;
    let mut configmaps = watch(addr, CMS).await;
    create(
        addr,
        CMS,
        &owned(
            "unknown-kind",
            &[("example.com/v1", "Widget", "w", "1", true)],
        ),
    )
    .await;
    create(
        addr,
        CMS,
        &owned(
            "cross-namespace",
            &[("v1", "ConfigMap", "owner", &foreign, true)],
        ),
    )
    .await;
    // A cluster-scoped owner is found from any namespace.
    let (status, namespace) = get_json(addr, "/api/v1/namespaces/elsewhere").await;
    assert_eq!(status, 200);
    let ns_uid = namespace["metadata"]["uid"].as_str().unwrap().to_owned();
    create(
        addr,
        CMS,
        &owned(
            "cluster-owned",
            &[("v1", "Namespace", "elsewhere", &ns_uid, false)],
        ),
    )
    .await;
    until_deleted(&mut configmaps, &["cross-namespace"]).await;
    // Looked at after the two before it (one revision each, in order), the third stays.
    create(
        addr,
        CMS,
        &owned("marker", &[("v1", "ConfigMap", "nobody", "2", false)]),
    )
    .await;
    until_deleted(&mut configmaps, &["marker"]).await;
    for name in ["unknown-kind", "cluster-owned"] {
        let (status, _) = get_json(addr, &format!("{CMS}/{name}")).await;
        assert_eq!(status, 200, "{name} stays");
    }
    server.shutdown().await;
}

/// Goal: custom resources own and are owned like built-in kinds, and a deleted CRD (held by
/// its cleanup finalizer until the CRD finalizer has deleted its objects) takes its objects
/// with it, and so their dependents.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crd_deleted_in_the_foreground_takes_its_objects_and_their_dependents() {
    let server = server().await;
    let addr = server.addr;
    let widget = widget_of_a_new_crd(addr).await;
    create(
        addr,
        CMS,
        &owned(
            "of-widget",
            &[("example.com/v1", "Widget", "w", &widget, true)],
        ),
    )
    .await;
    let mut configmaps = watch(addr, CMS).await;
    let mut definitions = watch(addr, CRDS).await;
    // kube's CRD registry: a first DELETE only adds the cleanup finalizer, whatever the
    // policy (this test expected `foregroundDeletion` before the CRD finalizer existed).
    let (status, answer) = delete(
        addr,
        &format!("{CRDS}/widgets.example.com"),
        &json!({"propagationPolicy": "Foreground"}),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer["metadata"]["finalizers"],
        json!(["customresourcecleanup.apiextensions.k8s.io"])
    );
    until_deleted(&mut configmaps, &["of-widget"]).await;
    until_deleted(&mut definitions, &["widgets.example.com"]).await;
    assert_eq!(
        stored_keys(&server, "/registry/example.com/widgets/").await,
        0,
        "no widget left in the store"
    );
    server.shutdown().await;
}

/// Goal: an owner of a custom kind whose CRD is gone is looked up in the store, whenever the
/// collector first looks at its dependent. A collector behind (a loaded machine) may look at
/// the dependents of a deleted CRD's objects only once the CRD has gone; here that order is
/// forced: the dependent is created after. The collector knows where the kind is stored from
/// the kind's first list, not from a look made while it happened to be served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dependent_first_looked_at_after_its_owner_s_crd_went_is_collected() {
    let server = server().await;
    let addr = server.addr;
    let widget = widget_of_a_new_crd(addr).await;
    let mut definitions = watch(addr, CRDS).await;
    let (status, answer) = delete(addr, &format!("{CRDS}/widgets.example.com"), &Value::Null).await;
    assert_eq!(status, 200, "{answer}");
    until_deleted(&mut definitions, &["widgets.example.com"]).await;
    let (status, _) = get_json(addr, "/apis/example.com/v1/namespaces/default/widgets").await;
    assert_eq!(status, 404, "no longer served");

    let mut configmaps = watch(addr, CMS).await;
    create(
        addr,
        CMS,
        &owned(
            "of-gone-widget",
            &[("example.com/v1", "Widget", "w", &widget, true)],
        ),
    )
    .await;
    until_deleted(&mut configmaps, &["of-gone-widget"]).await;
    server.shutdown().await;
}

/// Goal: a custom object whose resource stops being served for a while (its CRD's storage
/// version unserved) while its owner goes is collected once it is served again: the collector
/// does not forget a dependent it looked at while its kind was not served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dependent_whose_kind_was_unserved_while_its_owner_went_is_collected() {
    let server = server().await;
    let addr = server.addr;
    let boss = create(addr, CMS, &owned("boss", &[])).await;
    let version = |name: &str, storage: bool| {
        json!({"name": name, "served": true, "storage": storage,
            "schema": {"openAPIV3Schema": {"type": "object",
                "x-kubernetes-preserve-unknown-fields": true}}})
    };
    create(
        addr,
        CRDS,
        &json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget"},
                "versions": [version("v1", true), version("v2", false)]}}),
    )
    .await;
    let widgets = "/apis/example.com/v1/namespaces/default/widgets";
    let mut widget = owned("w", &[("v1", "ConfigMap", "boss", &boss, true)]);
    widget["apiVersion"] = json!("example.com/v1");
    widget["kind"] = json!("Widget");
    create(addr, widgets, &widget).await;
    let serve = |served: bool| {
        let patch = json!([{"op": "replace", "path": "/spec/versions/0/served", "value": served}]);
        async move {
            let (status, body) = request(
                addr,
                "PATCH",
                &format!("{CRDS}/widgets.example.com"),
                "application/json-patch+json",
                &patch.to_string(),
            )
            .await;
            assert_eq!(status, 200, "{body}");
        }
    };
    serve(false).await;
    let (status, _) = get_json(addr, widgets).await;
    assert_eq!(
        status, 404,
        "its storage version unserved: not served at all"
    );

    let mut configmaps = watch(addr, CMS).await;
    let (status, body) = delete(addr, &format!("{CMS}/boss"), &Value::Null).await;
    assert_eq!(status, 200, "{body}");
    // Looked at after `w` (queued by the owner's deletion, one revision before).
    create(
        addr,
        CMS,
        &owned("marker", &[("v1", "ConfigMap", "nobody", "0000", false)]),
    )
    .await;
    until_deleted(&mut configmaps, &["marker"]).await;

    serve(true).await;
    let (status, list) = get_json(addr, widgets).await;
    assert_eq!(status, 200, "{list}");
    if list["items"]
        .as_array()
        .is_some_and(|items| !items.is_empty())
    {
        let rv = list["metadata"]["resourceVersion"].as_str().unwrap();
        let mut watch = WatchReader::open(
            addr,
            &format!("{widgets}?watch=1&resourceVersion={rv}"),
            None,
        )
        .await;
        until_deleted(&mut watch, &["w"]).await;
    }
    server.shutdown().await;
}

/// Goal: a cycle of blocking owner references (`a` owns `b`, `b` owns `a`) deleted in the
/// foreground does not hold both forever: as kube's collector, the dependent deleted in the
/// foreground while its own dependent waits stops blocking its owner, and both go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreground_cycle_is_broken() {
    let server = server().await;
    let addr = server.addr;
    let a = create(addr, CMS, &owned("a", &[])).await;
    let b = create(
        addr,
        CMS,
        &owned("b", &[("v1", "ConfigMap", "a", &a, true)]),
    )
    .await;
    let patch = json!({"metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap",
        "name": "b", "uid": b, "blockOwnerDeletion": true}]}});
    let (status, body) = request(
        addr,
        "PATCH",
        &format!("{CMS}/a"),
        "application/merge-patch+json",
        &patch.to_string(),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let mut configmaps = watch(addr, CMS).await;
    let (status, answer) = delete(
        addr,
        &format!("{CMS}/a"),
        &json!({"propagationPolicy": "Foreground"}),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let seen = until_deleted(&mut configmaps, &["a", "b"]).await;
    assert!(
        seen.iter()
            .any(|event| event["object"]["metadata"]["name"] == "b"
                && event["object"]["metadata"]["ownerReferences"][0]["blockOwnerDeletion"]
                    == false),
        "b stopped blocking a before they went: {seen:?}"
    );
    server.shutdown().await;
}

/// Goal: a namespace DELETE as kube's: the namespace terminates (`Terminating`, creates in it
/// refused with kube-apiserver's words), what it holds is deleted through the write path (an
/// object's own finalizer holds it, and the namespace with it), and once it is empty the
/// namespace goes; `default`, `kube-system` and `kube-public` may not be deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_terminates_until_what_it_holds_is_gone() {
    let server = server().await;
    let addr = server.addr;
    create(
        addr,
        "/api/v1/namespaces",
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}),
    )
    .await;
    let team = "/api/v1/namespaces/team/configmaps";
    create(addr, team, &owned("plain", &[])).await;
    let mut held = owned("held", &[]);
    held["metadata"]["finalizers"] = json!(["example.com/hold"]);
    create(addr, team, &held).await;
    let mut namespaces = watch(addr, "/api/v1/namespaces").await;
    let mut contents = watch(addr, team).await;

    let (status, answer) = delete(addr, "/api/v1/namespaces/team", &Value::Null).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["status"]["phase"], "Terminating");
    assert!(
        answer["metadata"]["deletionTimestamp"].is_string(),
        "{answer}"
    );
    let marked = |object: &Value| {
        object["metadata"]["name"] == "held" && object["metadata"]["deletionTimestamp"].is_string()
    };
    let seen = until_deleted(&mut contents, &["plain"]).await;
    if !seen.iter().any(|event| marked(&event["object"])) {
        until_object(&mut contents, "held", |_, object| marked(object)).await;
    }
    let (status, refused) = send_json(addr, "POST", team, &owned("late", &[])).await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(
        refused["message"],
        "configmaps \"late\" is forbidden: unable to create new content in namespace team because it is being terminated"
    );
    assert_eq!(
        refused["details"]["causes"][0]["reason"],
        "NamespaceTerminating"
    );
    let (status, namespace) = get_json(addr, "/api/v1/namespaces/team").await;
    assert_eq!(status, 200, "held by what it holds: {namespace}");
    assert_eq!(namespace["spec"]["finalizers"], json!(["kubernetes"]));
    // kube's deletion conditions say what holds it.
    let condition = |namespace: &Value, kind: &str| -> Value {
        namespace["status"]["conditions"]
            .as_array()
            .and_then(|all| all.iter().find(|c| c["type"] == kind).cloned())
            .unwrap_or(Value::Null)
    };
    let holding = until_object(&mut namespaces, "team", |_, namespace| {
        condition(namespace, "NamespaceFinalizersRemaining")["status"] == "True"
    })
    .await;
    assert_eq!(
        condition(&holding, "NamespaceFinalizersRemaining")["message"],
        "Some finalizers are remaining: example.com/hold in 1 resource instances"
    );
    let remaining = condition(&holding, "NamespaceContentRemaining");
    assert_eq!(remaining["status"], "True", "{holding}");
    assert_eq!(remaining["reason"], "SomeResourcesRemain");
    assert_eq!(
        remaining["message"],
        "Some resources are remaining: configmaps. has 1 resource instances"
    );
    let content = condition(&holding, "NamespaceDeletionContentFailure");
    assert_eq!(content["status"], "False", "{holding}");
    assert_eq!(content["reason"], "ContentDeleted");
    assert_eq!(
        holding["status"]["conditions"].as_array().map(Vec::len),
        Some(5)
    );
    assert_eq!(holding["status"]["phase"], "Terminating");
    assert_eq!(holding["spec"]["finalizers"], json!(["kubernetes"]));

    let (status, body) = request(
        addr,
        "PATCH",
        &format!("{team}/held"),
        "application/merge-patch+json",
        r#"{"metadata":{"finalizers":null}}"#,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let seen = until_deleted(&mut namespaces, &["team"]).await;
    let gone = &seen.last().expect("the deletion")["object"];
    let removed = condition(gone, "NamespaceContentRemaining");
    assert_eq!(removed["status"], "False", "{gone}");
    assert_eq!(removed["message"], "All content successfully removed");

    for name in ["default", "kube-system", "kube-public"] {
        let (status, refused) =
            delete(addr, &format!("/api/v1/namespaces/{name}"), &Value::Null).await;
        assert_eq!(status, 403, "{refused}");
        assert_eq!(
            refused["message"],
            format!("namespaces \"{name}\" is forbidden: this namespace may not be deleted")
        );
    }
    server.shutdown().await;
}

/// Goal: every active namespace has a `default` ServiceAccount, given again when deleted
/// (kube's serviceaccounts controller), so `kubectl create token default` works anywhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_namespace_has_a_default_service_account() {
    let server = server().await;
    let addr = server.addr;
    let accounts = "/api/v1/namespaces/fresh/serviceaccounts";
    let (status, body) = get_json(addr, accounts).await;
    assert_eq!(status, 200, "{body}");
    let mut watch =
        WatchReader::open(addr, &format!("{accounts}?watch=1&resourceVersion=0"), None).await;
    create(
        addr,
        "/api/v1/namespaces",
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "fresh"}}),
    )
    .await;
    let first = until_object(&mut watch, "default", |kind, _| kind == "ADDED").await;
    let (status, body) = delete(addr, &format!("{accounts}/default"), &Value::Null).await;
    assert_eq!(status, 200, "{body}");
    let again = until_object(&mut watch, "default", |kind, _| kind == "ADDED").await;
    assert_ne!(again["metadata"]["uid"], first["metadata"]["uid"]);
    for namespace in ["default", "kube-system", "kube-public"] {
        let (status, _) = get_json(
            addr,
            &format!("/api/v1/namespaces/{namespace}/serviceaccounts/default"),
        )
        .await;
        assert_eq!(status, 200, "{namespace}");
    }
    server.shutdown().await;
}

/// Goal: every active namespace has kube's `kube-root-ca.crt` ConfigMap (kube's
/// root-ca-cert-publisher), written back when changed and given again when deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_namespace_has_its_root_ca_config_map() {
    let server = server_with(ServeArgs {
        enable_root_ca_cert_publisher: Some(true),
        ..ServeArgs::default()
    })
    .await;
    let addr = server.addr;
    let maps = "/api/v1/namespaces/fresh/configmaps";
    let mut watch =
        WatchReader::open(addr, &format!("{maps}?watch=1&resourceVersion=0"), None).await;
    create(
        addr,
        "/api/v1/namespaces",
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "fresh"}}),
    )
    .await;
    let name = "kube-root-ca.crt";
    let first = until_object(&mut watch, name, |kind, _| kind == "ADDED").await;
    // A plain-HTTP server has no CA to publish (kube-controller-manager's client
    // configuration has no CA data then either).
    assert_eq!(first["data"], json!({"ca.crt": ""}));
    assert!(
        first["metadata"]["annotations"]["kubernetes.io/description"]
            .as_str()
            .unwrap()
            .starts_with("Contains a CA bundle that can be used to verify the kube-apiserver"),
        "{first}"
    );
    let (status, body) = request(
        addr,
        "PATCH",
        &format!("{maps}/{name}"),
        "application/merge-patch+json",
        r#"{"data":{"ca.crt":"forged","extra":"x"},"metadata":{"annotations":null}}"#,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let restored = until_object(&mut watch, name, |kind, object| {
        kind == "MODIFIED" && object["data"] == json!({"ca.crt": ""})
    })
    .await;
    assert_eq!(
        restored["metadata"]["annotations"]["kubernetes.io/description"],
        first["metadata"]["annotations"]["kubernetes.io/description"]
    );
    let (status, body) = delete(addr, &format!("{maps}/{name}"), &Value::Null).await;
    assert_eq!(status, 200, "{body}");
    let again = until_object(&mut watch, name, |kind, _| kind == "ADDED").await;
    assert_ne!(again["metadata"]["uid"], first["metadata"]["uid"]);
    // The namespaces the server made at its start have theirs too: published by the same
    // controller, in no order with the steps above (a watch of every namespace's, from the
    // cache's state, sees each).
    let mut everywhere = WatchReader::open(
        addr,
        &format!(
            "/api/v1/configmaps?watch=1&resourceVersion=0&fieldSelector=metadata.name%3D{name}"
        ),
        None,
    )
    .await;
    let mut missing = vec!["default", "kube-system", "kube-public"];
    while !missing.is_empty() {
        let event = everywhere
            .next()
            .await
            .unwrap_or_else(|| panic!("the watch ended with {missing:?} unseen"));
        let namespace = event["object"]["metadata"]["namespace"]
            .as_str()
            .unwrap_or("");
        assert_eq!(event["object"]["data"], json!({"ca.crt": ""}), "{event}");
        missing.retain(|m| *m != namespace);
    }
    server.shutdown().await;
}

/// Goal: what kube-apiserver keeps while serving comes back when deleted — the `kubernetes`
/// Service and its Endpoints, API Priority and Fairness' mandatory objects — and its system
/// PriorityClasses may not be deleted at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_apiserver_s_own_objects_are_kept() {
    let server = server().await;
    let addr = server.addr;
    for (collection, name) in [
        ("/api/v1/namespaces/default/services", "kubernetes"),
        ("/api/v1/namespaces/default/endpoints", "kubernetes"),
        (
            "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas",
            "exempt",
        ),
        (
            "/apis/flowcontrol.apiserver.k8s.io/v1/prioritylevelconfigurations",
            "catch-all",
        ),
    ] {
        let (status, before) = get_json(addr, &format!("{collection}/{name}")).await;
        assert_eq!(status, 200, "{before}");
        let mut events = WatchReader::open(
            addr,
            &format!(
                "{collection}?watch=1&resourceVersion={}",
                before["metadata"]["resourceVersion"].as_str().unwrap()
            ),
            None,
        )
        .await;
        let (status, body) = delete(addr, &format!("{collection}/{name}"), &Value::Null).await;
        assert_eq!(status, 200, "{body}");
        let again = until_object(&mut events, name, |kind, _| kind == "ADDED").await;
        assert_ne!(again["metadata"]["uid"], before["metadata"]["uid"]);
        assert_eq!(again["spec"], before["spec"], "{collection}");
    }
    for name in ["system-node-critical", "system-cluster-critical"] {
        let (status, refused) = delete(
            addr,
            &format!("/apis/scheduling.k8s.io/v1/priorityclasses/{name}"),
            &Value::Null,
        )
        .await;
        assert_eq!(status, 403, "{refused}");
        assert_eq!(
            refused["message"],
            format!(
                "priorityclasses.scheduling.k8s.io \"{name}\" is forbidden: this is a system priority class and cannot be deleted"
            )
        );
    }
    server.shutdown().await;
}

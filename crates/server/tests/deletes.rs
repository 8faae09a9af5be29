//! What DELETE answers, as kube-apiserver answers it: `finalizeDelete`'s Status or the
//! deleted object (registries with `ReturnDeletedObject`), the object that stays for its
//! finalizers (200, or 202 for `orphanDependents: false`), `DeleteCollection`'s list of what it
//! read, DeleteOptions refused as kube's handlers refuse them, a CRD's deletion through its
//! cleanup finalizer (`Terminating` condition, creates refused while its objects go), and the
//! graceful deletion of pods on a node.

use crate::common;

use std::net::SocketAddr;

use serde_json::{Value, json};

use common::{
    WatchReader, get_json, request, request_with_headers, send_json, server, stored_keys,
};

const CMS: &str = "/api/v1/namespaces/default/configmaps";
const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const WIDGETS: &str = "/apis/example.com/v1/namespaces/default/widgets";
const CLEANUP: &str = "customresourcecleanup.apiextensions.k8s.io";

async fn create(addr: SocketAddr, path: &str, body: &Value) -> Value {
    let (status, created) = send_json(addr, "POST", path, body).await;
    assert_eq!(status, 201, "POST {path}: {created}");
    created
}

async fn delete(addr: SocketAddr, path: &str, body: &str) -> (u16, Value) {
    let (status, text) = request(addr, "DELETE", path, "application/json", body).await;
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

fn configmap(name: &str, finalizers: &[&str]) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "labels": {"set": "a"}, "finalizers": finalizers}})
}

/// A watch of `path` from now.
async fn watch(addr: SocketAddr, path: &str) -> WatchReader {
    let (status, list) = get_json(addr, path).await;
    assert_eq!(status, 200, "{list}");
    let rv = list["metadata"]["resourceVersion"].as_str().unwrap();
    WatchReader::open(addr, &format!("{path}?watch=1&resourceVersion={rv}"), None).await
}

/// Reads `watch` until `name` is DELETED.
async fn until_deleted(watch: &mut WatchReader, name: &str) {
    loop {
        let event = watch.next().await.expect("the watch goes on");
        if event["type"] == "DELETED" && event["object"]["metadata"]["name"] == name {
            return;
        }
    }
}

/// Reads `watch` until an event's object `name` satisfies `done`; that object.
async fn until_object(watch: &mut WatchReader, name: &str, done: impl Fn(&Value) -> bool) -> Value {
    loop {
        let event = watch.next().await.expect("the watch goes on");
        let object = &event["object"];
        if object["metadata"]["name"] == name && done(object) {
            return object.clone();
        }
    }
}

fn terminating(crd: &Value) -> Option<(String, String, String)> {
    crd["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Terminating")
        .map(|c| {
            let text = |key: &str| c[key].as_str().unwrap_or("").to_owned();
            (text("status"), text("reason"), text("message"))
        })
}

async fn create_widgets_crd(addr: SocketAddr) {
    create(addr, CRDS, &common::widgets_crd()).await;
}

fn widget(name: &str, finalizers: &[&str]) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": name, "finalizers": finalizers}})
}

/// Goal: a deleted ConfigMap is answered with kube's `finalizeDelete` Status (resource in
/// `kind`, uid, no group for the core group), a ServiceAccount (`ReturnDeletedObject`) with
/// itself, a custom resource with a Status naming its group, and an object its finalizers keep
/// with itself, 200, or 202 when `orphanDependents: false` was asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_answers_a_status_or_the_object_as_kube_does() {
    let server = server().await;
    let addr = server.addr;
    let created = create(addr, CMS, &configmap("a", &[])).await;
    let (status, answer) = delete(addr, &format!("{CMS}/a"), "").await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "details": {"name": "a", "kind": "configmaps", "uid": created["metadata"]["uid"]}})
    );

    let accounts = "/api/v1/namespaces/default/serviceaccounts";
    create(
        addr,
        accounts,
        &json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "robot"}}),
    )
    .await;
    let (status, answer) = delete(addr, &format!("{accounts}/robot"), "").await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["kind"], "ServiceAccount", "{answer}");
    // Two more of the registries with `ReturnDeletedObject` (podtemplate, csidriver), and one
    // without (priorityclass).
    let templates = "/api/v1/namespaces/default/podtemplates";
    create(
        addr,
        templates,
        &json!({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"},
            "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}),
    )
    .await;
    let (status, answer) = delete(addr, &format!("{templates}/t"), "").await;
    assert_eq!(
        (status, &answer["kind"]),
        (200, &json!("PodTemplate")),
        "{answer}"
    );
    let drivers = "/apis/storage.k8s.io/v1/csidrivers";
    create(
        addr,
        drivers,
        &json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver",
            "metadata": {"name": "d.example.com"}, "spec": {}}),
    )
    .await;
    let (status, answer) = delete(addr, &format!("{drivers}/d.example.com"), "").await;
    assert_eq!(
        (status, &answer["kind"]),
        (200, &json!("CSIDriver")),
        "{answer}"
    );
    let classes = "/apis/scheduling.k8s.io/v1/priorityclasses";
    create(
        addr,
        classes,
        &json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": "p"}, "value": 10}),
    )
    .await;
    let (status, answer) = delete(addr, &format!("{classes}/p"), "").await;
    assert_eq!(
        (status, &answer["kind"]),
        (200, &json!("Status")),
        "{answer}"
    );
    assert_eq!(answer["details"]["group"], "scheduling.k8s.io", "{answer}");

    create(addr, CMS, &configmap("held", &["example.com/hold"])).await;
    let (status, answer) = delete(addr, &format!("{CMS}/held"), "").await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["kind"], "ConfigMap", "{answer}");
    assert!(
        answer["metadata"]["deletionTimestamp"].is_string(),
        "{answer}"
    );
    let (status, answer) = delete(
        addr,
        &format!("{CMS}/held"),
        r#"{"orphanDependents": false}"#,
    )
    .await;
    assert_eq!(status, 202, "{answer}");
    assert_eq!(answer["kind"], "ConfigMap", "{answer}");

    create_widgets_crd(addr).await;
    let created = create(addr, WIDGETS, &widget("w", &[])).await;
    let (status, answer) = delete(addr, &format!("{WIDGETS}/w"), "").await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer["details"],
        json!({"name": "w", "group": "example.com", "kind": "widgets",
            "uid": created["metadata"]["uid"]})
    );
    server.shutdown().await;
}

/// Goal: a DELETE of a collection answers the list it read (kube's `DeleteCollection`): the
/// objects as they were listed, the list's resource version; one its finalizers keep is in it
/// and stays, marked. In protobuf when the client asks for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collection_delete_answers_the_list_it_deleted() {
    let server = server().await;
    let addr = server.addr;
    create(addr, CMS, &configmap("a", &[])).await;
    create(addr, CMS, &configmap("b", &["example.com/hold"])).await;
    let (status, answer) = delete(addr, &format!("{CMS}?labelSelector=set%3Da"), "").await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["kind"], "ConfigMapList", "{answer}");
    assert_eq!(answer["apiVersion"], "v1", "{answer}");
    assert!(
        answer["metadata"]["resourceVersion"].is_string(),
        "{answer}"
    );
    let names: Vec<&str> = answer["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a", "b"]);
    assert!(
        answer["items"][1]["metadata"]["deletionTimestamp"].is_null(),
        "items as listed, before the deletion: {answer}"
    );
    let (status, _) = get_json(addr, &format!("{CMS}/a")).await;
    assert_eq!(status, 404);
    let (status, kept) = get_json(addr, &format!("{CMS}/b")).await;
    assert_eq!(status, 200);
    assert!(kept["metadata"]["deletionTimestamp"].is_string(), "{kept}");

    create(addr, CMS, &configmap("c", &[])).await;
    let (status, body) = request_with_headers(
        addr,
        "DELETE",
        &format!("{CMS}?labelSelector=set%3Da"),
        &[("Accept", "application/vnd.kubernetes.protobuf")],
        "",
    )
    .await;
    assert_eq!(status, 200, "{body}");
    // The protobuf envelope: the magic `k8s\0`, then the type's apiVersion and kind.
    assert!(body.starts_with("k8s\0"), "{body:?}");
    assert!(body.contains("ConfigMapList"), "{body:?}");
    server.shutdown().await;
}

/// Goal: DeleteOptions are refused as kube's handlers and validation refuse them: a body of
/// another kind or with a mistyped field (500, Go's decoding text), both `orphanDependents`
/// and `propagationPolicy` (422), an unknown policy (422), a `gracePeriodSeconds` query that is
/// no integer (400); a negative grace period is accepted (kube counts it as 1 second).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_options_are_refused_in_kubes_words() {
    let server = server().await;
    let addr = server.addr;
    create(addr, CMS, &configmap("a", &[])).await;
    let path = format!("{CMS}/a");
    let refusals = [
        (
            r#"{"kind": "Pod", "apiVersion": "v1"}"#,
            500,
            r#"no kind "Pod" is registered for version "v1" in scheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme/register.go:27""#,
        ),
        (
            r#"{"kind": "ListOptions", "apiVersion": "meta.k8s.io/v1"}"#,
            500,
            "decoded object cannot be converted to DeleteOptions",
        ),
        (
            r#"{"gracePeriodSeconds": "5"}"#,
            500,
            "json: cannot unmarshal string into Go struct field DeleteOptions.gracePeriodSeconds of type int64",
        ),
        (
            r#"{"orphanDependents": "yes"}"#,
            500,
            "json: cannot unmarshal string into Go struct field DeleteOptions.orphanDependents of type bool",
        ),
        (
            r#"{"orphanDependents": true, "propagationPolicy": "Orphan"}"#,
            422,
            r#"DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Invalid value: "Orphan": orphanDependents and deletionPropagation cannot be both set"#,
        ),
        (
            r#"{"propagationPolicy": "Sometimes"}"#,
            422,
            r#"DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: "Sometimes": supported values: "Foreground", "Background", "Orphan", "nil""#,
        ),
    ];
    for (body, code, message) in refusals {
        let (status, answer) = delete(addr, &path, body).await;
        assert_eq!(status, code, "{body}: {answer}");
        assert_eq!(answer["message"], message, "{body}: {answer}");
        assert_eq!(answer["code"], code, "{body}: {answer}");
    }
    let (status, answer) = delete(addr, &format!("{path}?gracePeriodSeconds=soon"), "").await;
    assert_eq!(status, 400, "{answer}");
    assert_eq!(
        answer["message"],
        r#"strconv.ParseInt: parsing "soon": invalid syntax"#
    );
    let (status, _) = get_json(addr, &path).await;
    assert_eq!(status, 200, "nothing refused was deleted");
    let (status, answer) = delete(
        addr,
        &path,
        r#"{"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": -5}"#,
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["status"], "Success", "{answer}");
    server.shutdown().await;
}

/// Goal: a CRD is deleted as kube deletes it. The DELETE marks it (cleanup finalizer,
/// `Terminating` True `InstanceDeletionPending`) and answers it; its objects stay served
/// (get, list) while creates are refused with kube's 405; the CRD finalizer deletes them,
/// and one with a finalizer of its own keeps the CRD terminating
/// (`InstanceDeletionInProgress`) until that finalizer is removed; then the CRD goes, with no
/// object left in the store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crd_terminates_until_its_objects_are_gone() {
    let server = server().await;
    let addr = server.addr;
    create_widgets_crd(addr).await;
    create(addr, WIDGETS, &widget("held", &["example.com/hold"])).await;
    create(addr, WIDGETS, &widget("free", &[])).await;
    let mut definitions = watch(addr, CRDS).await;
    let mut widgets = watch(addr, WIDGETS).await;

    let (status, answer) = delete(addr, &format!("{CRDS}/widgets.example.com"), "").await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["kind"], "CustomResourceDefinition", "{answer}");
    assert_eq!(
        answer["metadata"]["finalizers"],
        json!([CLEANUP]),
        "{answer}"
    );
    assert!(
        answer["metadata"]["deletionTimestamp"].is_string(),
        "{answer}"
    );
    assert_eq!(
        terminating(&answer),
        Some((
            "True".to_owned(),
            "InstanceDeletionPending".to_owned(),
            "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon"
                .to_owned()
        ))
    );

    until_deleted(&mut widgets, "free").await;
    let crd = until_object(&mut definitions, "widgets.example.com", |crd| {
        terminating(crd).is_some_and(|(_, reason, _)| reason == "InstanceDeletionInProgress")
    })
    .await;
    assert_eq!(
        terminating(&crd).map(|(status, _, message)| (status, message)),
        Some((
            "True".to_owned(),
            "CustomResource deletion is in progress".to_owned()
        ))
    );

    let (status, refused) = send_json(addr, "POST", WIDGETS, &widget("late", &[])).await;
    assert_eq!(status, 405, "{refused}");
    assert_eq!(
        refused,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "create not allowed while custom resource definition is terminating",
            "reason": "MethodNotAllowed",
            "details": {"group": "example.com", "kind": "widgets"}, "code": 405})
    );
    // The controller deletes the objects one after another in key order: `held`'s turn comes
    // after `free` is gone (a GET at once could come before it).
    until_object(&mut widgets, "held", |held| {
        held["metadata"]["deletionTimestamp"].is_string()
    })
    .await;
    let (status, held) = get_json(addr, &format!("{WIDGETS}/held")).await;
    assert_eq!(status, 200, "still served: {held}");
    assert!(held["metadata"]["deletionTimestamp"].is_string(), "{held}");
    let (status, list) = get_json(addr, WIDGETS).await;
    assert_eq!(status, 200, "{list}");
    assert_eq!(list["items"].as_array().map(Vec::len), Some(1), "{list}");
    let (status, crd) = get_json(addr, &format!("{CRDS}/widgets.example.com")).await;
    assert_eq!(status, 200, "held by the object's finalizer: {crd}");

    let (status, body) = request(
        addr,
        "PATCH",
        &format!("{WIDGETS}/held"),
        "application/merge-patch+json",
        r#"{"metadata": {"finalizers": null}}"#,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let gone = until_object(&mut definitions, "widgets.example.com", |crd| {
        terminating(crd).is_some_and(|(_, reason, _)| reason == "InstanceDeletionCompleted")
    })
    .await;
    assert_eq!(
        terminating(&gone),
        Some((
            "False".to_owned(),
            "InstanceDeletionCompleted".to_owned(),
            "removed all instances".to_owned()
        ))
    );
    until_deleted(&mut definitions, "widgets.example.com").await;
    let (status, _) = get_json(addr, WIDGETS).await;
    assert_eq!(status, 404, "the resource went with its CRD");
    assert_eq!(
        stored_keys(&server, "/registry/example.com/widgets/").await,
        0,
        "no widget left in the store"
    );
    server.shutdown().await;
}

/// Goal: a CRD without objects goes at once after its finalizer's steps, so a client waiting
/// for it to disappear (`kubectl delete crd`) returns; a dry run only answers the marked CRD.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_crd_goes_and_a_dry_run_leaves_it() {
    let server = server().await;
    let addr = server.addr;
    create_widgets_crd(addr).await;
    let (status, answer) =
        delete(addr, &format!("{CRDS}/widgets.example.com?dryRun=All"), "").await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer["metadata"]["finalizers"],
        json!([CLEANUP]),
        "{answer}"
    );
    let (status, crd) = get_json(addr, &format!("{CRDS}/widgets.example.com")).await;
    assert_eq!(status, 200);
    assert!(crd["metadata"]["deletionTimestamp"].is_null(), "{crd}");

    let mut definitions = watch(addr, CRDS).await;
    let (status, answer) = delete(addr, &format!("{CRDS}/widgets.example.com"), "").await;
    assert_eq!(status, 200, "{answer}");
    until_deleted(&mut definitions, "widgets.example.com").await;
    let (status, _) = get_json(addr, &format!("{CRDS}/widgets.example.com")).await;
    assert_eq!(status, 404);
    server.shutdown().await;
}

/// Goal: kube's graceful deletion of pods. A pod not on a node goes at once; a pod on a node
/// (not finished) is marked for its grace period — `deletionTimestamp` and
/// `deletionGracePeriodSeconds` from `terminationGracePeriodSeconds` or the DeleteOptions — and
/// answered (200) as it stays; a DELETE asking no shorter period leaves it as it is, a shorter
/// one moves the timestamp earlier, and 0 (in the body or the query) removes it; an update of
/// the marked pod keeps it; held by a finalizer, a period of 0 makes its period 0, and it goes
/// with its finalizer. A finished pod on a node goes at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_on_a_node_are_deleted_gracefully() {
    let server = server().await;
    let addr = server.addr;
    let pods = "/api/v1/namespaces/default/pods";
    let pod = |name: &str, node: Option<&str>| {
        let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "busybox"}],
                "terminationGracePeriodSeconds": 30}});
        if let Some(node) = node {
            pod["spec"]["nodeName"] = json!(node);
        }
        pod
    };
    create(addr, pods, &pod("pending", None)).await;
    let (status, answer) = delete(addr, &format!("{pods}/pending"), "").await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["metadata"]["name"], "pending", "{answer}");
    let (status, _) = get_json(addr, &format!("{pods}/pending")).await;
    assert_eq!(status, 404);

    create(addr, pods, &pod("running", Some("n1"))).await;
    let (status, marked) = delete(addr, &format!("{pods}/running"), "").await;
    assert_eq!(status, 200, "{marked}");
    assert_eq!(
        marked["metadata"]["deletionGracePeriodSeconds"], 30,
        "{marked}"
    );
    let at = |pod: &Value| {
        watchkeeper_api::time::unix_from_rfc3339(
            pod["metadata"]["deletionTimestamp"].as_str().unwrap(),
        )
        .unwrap()
    };
    let first = at(&marked);
    // An update of the marked pod keeps it (kube's `ShouldDeleteDuringUpdate`: it waits for
    // its grace period, not for finalizers).
    common::merge_patch(
        addr,
        &format!("{pods}/running"),
        r#"{"metadata":{"labels":{"touched":"yes"}}}"#,
    )
    .await;
    let (status, stored) = get_json(addr, &format!("{pods}/running")).await;
    assert_eq!(status, 200, "{stored}");
    assert_eq!(
        stored["metadata"]["deletionTimestamp"],
        marked["metadata"]["deletionTimestamp"]
    );
    // No shorter period: unchanged.
    let (status, pending) = delete(
        addr,
        &format!("{pods}/running"),
        r#"{"kind":"DeleteOptions","apiVersion":"v1","gracePeriodSeconds":60}"#,
    )
    .await;
    assert_eq!(status, 200, "{pending}");
    assert_eq!(
        pending["metadata"]["resourceVersion"],
        stored["metadata"]["resourceVersion"]
    );
    // A shorter one: 20 seconds earlier.
    let (status, shorter) = delete(
        addr,
        &format!("{pods}/running"),
        r#"{"kind":"DeleteOptions","apiVersion":"v1","gracePeriodSeconds":10}"#,
    )
    .await;
    assert_eq!(status, 200, "{shorter}");
    assert_eq!(
        shorter["metadata"]["deletionGracePeriodSeconds"], 10,
        "{shorter}"
    );
    assert_eq!(at(&shorter), first - 20, "{shorter}");
    let (status, gone) = delete(addr, &format!("{pods}/running?gracePeriodSeconds=0"), "").await;
    assert_eq!(status, 200, "{gone}");
    let (status, _) = get_json(addr, &format!("{pods}/running")).await;
    assert_eq!(status, 404);

    create(addr, pods, &pod("finished", Some("n1"))).await;
    common::merge_patch(
        addr,
        &format!("{pods}/finished/status"),
        r#"{"status":{"phase":"Succeeded"}}"#,
    )
    .await;
    let (status, _) = delete(addr, &format!("{pods}/finished"), "").await;
    assert_eq!(status, 200);
    let (status, _) = get_json(addr, &format!("{pods}/finished")).await;
    assert_eq!(status, 404);

    // Held by a finalizer, a marked pod deleted with a period of 0 gets that period (kube's
    // `BeforeDelete`) and goes with its finalizer.
    let mut held = pod("held", Some("n1"));
    held["metadata"]["finalizers"] = json!(["example.com/hold"]);
    create(addr, pods, &held).await;
    let (_, marked) = delete(addr, &format!("{pods}/held"), "").await;
    assert_eq!(marked["metadata"]["deletionGracePeriodSeconds"], 30);
    let (status, forced) = delete(addr, &format!("{pods}/held?gracePeriodSeconds=0"), "").await;
    assert_eq!(status, 200, "{forced}");
    let (_, stored) = get_json(addr, &format!("{pods}/held")).await;
    assert_eq!(
        stored["metadata"]["deletionGracePeriodSeconds"], 0,
        "{stored}"
    );
    assert_eq!(at(&stored), at(&marked) - 30, "{stored}");
    common::merge_patch(
        addr,
        &format!("{pods}/held"),
        r#"{"metadata":{"finalizers":null}}"#,
    )
    .await;
    let (status, _) = get_json(addr, &format!("{pods}/held")).await;
    assert_eq!(status, 404);
}

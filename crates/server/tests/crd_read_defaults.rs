//! Goal: custom resources read from the store as kube reads them from etcd — with the
//! storage version's current defaults and pruning — so that a default added to a CRD shows on
//! the objects stored before it (kube's conformance test "custom resource defaulting for
//! requests and from storage works"), without a moment in which the resource is not served,
//! without writing the objects, and with the old watches ending cleanly (kube rebuilds a CRD's
//! storage on such a change).

use crate::common;

use common::{WatchReader, get_json, send_json, server};
use serde_json::{Value, json};

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const GADGETS: &str = "/apis/example.com/v1/namespaces/default/gadgets";

fn definition(properties: Value) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "gadgets", "kind": "Gadget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": properties}}}]
        }
    })
}

/// Replaces the CRD's storage schema's root properties with `properties`.
async fn set_properties(addr: std::net::SocketAddr, properties: Value) {
    let path = format!("{CRDS}/gadgets.example.com");
    let (status, mut crd) = get_json(addr, &path).await;
    assert_eq!(status, 200, "{crd}");
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"] = properties;
    let (status, updated) = send_json(addr, "PUT", &path, &crd).await;
    assert_eq!(status, 200, "{updated}");
}

/// GETs `path` until `done` holds of the answer (each answer must be a 200: the resource is
/// served throughout), a bounded number of times, no sleep.
async fn get_until(addr: std::net::SocketAddr, path: &str, done: impl Fn(&Value) -> bool) -> Value {
    for _ in 0..5_000 {
        let (status, body) = get_json(addr, path).await;
        assert_eq!(status, 200, "served throughout: {body}");
        if done(&body) {
            return body;
        }
        tokio::task::yield_now().await;
    }
    panic!("{path} never satisfied the condition");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_default_added_to_a_crd_shows_on_stored_objects() {
    let server = server().await;
    let addr = server.addr;
    let a = json!({"type": "string", "default": "A"});
    let (status, body) = send_json(addr, "POST", CRDS, &definition(json!({"a": a}))).await;
    assert_eq!(status, 201, "{body}");
    let gadget = json!({"apiVersion": "example.com/v1", "kind": "Gadget",
        "metadata": {"name": "g1"}});
    let (status, created) = send_json(addr, "POST", GADGETS, &gadget).await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["a"], "A", "request defaulting: {created}");
    assert!(created.get("b").is_none());
    let rv = created["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut watch = WatchReader::open(
        addr,
        &format!("{GADGETS}?watch=true&resourceVersion={rv}"),
        None,
    )
    .await;

    set_properties(
        addr,
        json!({"a": a, "b": {"type": "string", "default": "B"}}),
    )
    .await;
    let read = get_until(addr, &format!("{GADGETS}/g1"), |g| g.get("b").is_some()).await;
    assert_eq!(read["b"], "B", "{read}");
    assert_eq!(read["a"], "A", "{read}");
    assert_eq!(
        read["metadata"]["resourceVersion"], rv,
        "defaulted on read, not written: {read}"
    );
    let (_, list) = get_json(addr, GADGETS).await;
    assert_eq!(list["items"][0]["b"], "B", "{list}");
    // The old cache's watch ends cleanly (no error event), as a rebuilt storage's does.
    while let Some(event) = watch.next().await {
        assert_ne!(event["type"], "ERROR", "{event}");
    }
    assert!(watch.ended);
    // A new watch from the list's revision sees later writes, defaulted.
    let list_rv = list["metadata"]["resourceVersion"].as_str().unwrap();
    let mut watch = WatchReader::open(
        addr,
        &format!("{GADGETS}?watch=true&resourceVersion={list_rv}"),
        None,
    )
    .await;
    let (status, g2) = send_json(
        addr,
        "POST",
        GADGETS,
        &json!({"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g2"}}),
    )
    .await;
    assert_eq!(status, 201, "{g2}");
    let event = watch.next().await.unwrap();
    assert_eq!(event["type"], "ADDED", "{event}");
    assert_eq!(event["object"]["b"], "B", "{event}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fields_a_crd_no_longer_declares_are_pruned_on_read() {
    let server = server().await;
    let addr = server.addr;
    let open = json!({"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}});
    let (status, body) = send_json(addr, "POST", CRDS, &definition(open)).await;
    assert_eq!(status, 201, "{body}");
    let gadget = json!({"apiVersion": "example.com/v1", "kind": "Gadget",
        "metadata": {"name": "g1"}, "spec": {"kept": 1, "dropped": 2}});
    let (status, created) = send_json(addr, "POST", GADGETS, &gadget).await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["spec"], json!({"kept": 1, "dropped": 2}));

    set_properties(
        addr,
        json!({"spec": {"type": "object", "properties": {"kept": {"type": "integer"}}}}),
    )
    .await;
    let read = get_until(addr, &format!("{GADGETS}/g1"), |g| {
        g["spec"].get("dropped").is_none()
    })
    .await;
    assert_eq!(read["spec"], json!({"kept": 1}), "{read}");
}

//! Hostile inputs, amplification: bodies within the 3 MiB body limit that the server turned
//! into many times their size in memory or time. A body of one invalid item after another
//! answers at most `--max-invalid-causes` causes, at once (250,000 invalid label keys took
//! minutes of a worker, and would have answered 125 MB); a server-side apply whose
//! configuration is past the object limit on its own is refused before its field sets are
//! built (400 MB for a 3 MB configuration); managed fields a client sends cannot take a
//! stored object past the object limit. Each refusal stores nothing and the server serves
//! the next request; what is measured (memory) is in docs/ARCHITECTURE.md, never asserted.
//! A LIST's `Table` whose printer columns make each row cost millions of steps stops once its
//! request is gone (its deadline's 504), freeing its heavy-request slot.

use crate::common;

use serde_json::{Value, json};
use watchkeeper::config::ServeArgs;

use common::{request, send_json, server_with};

const CM: &str = "/api/v1/namespaces/default/configmaps";
const PODS: &str = "/api/v1/namespaces/default/pods";

/// A ConfigMap body named `name` whose labels are `count` invalid keys (`#0`, `#1`, ...).
fn invalid_labels(name: &str, count: usize) -> String {
    let labels: serde_json::Map<String, Value> = (0..count)
        .map(|i| (format!("#{i}"), Value::String(String::new())))
        .collect();
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "labels": labels}})
    .to_string()
}

/// 250,000 invalid label keys (a 3 MB body): kube's 422 with the first 1000 causes, the
/// message ending with how many more were found. Its message's distinct causes were found
/// in quadratic time: the answer was a 504 (the work went on for minutes after it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_invalid_items_answer_a_bounded_invalid_at_once() {
    let server = server_with(ServeArgs {
        request_timeout: Some("30s".to_owned()),
        ..ServeArgs::default()
    })
    .await;
    let addr = server.addr;
    let count = 250_000;
    let body = invalid_labels("many", count);
    assert!(body.len() < 3 * 1024 * 1024, "{}", body.len());
    let (status, text) = request(addr, "POST", CM, "application/json", &body).await;
    assert_eq!(status, 422, "{}", &text[..text.len().min(400)]);
    let refusal: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(refusal["reason"], "Invalid");
    let causes = refusal["details"]["causes"].as_array().unwrap();
    assert_eq!(causes.len(), 1000);
    assert_eq!(causes[0]["field"], "metadata.labels");
    let message = refusal["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            r##"ConfigMap "many" is invalid: [metadata.labels: Invalid value: "#0": name part must consist of"##
        ),
        "{}",
        &message[..300]
    );
    let more = format!(", {} more errors]", count - 1000);
    assert!(
        message.ends_with(&more),
        "{}",
        &message[message.len() - 300..]
    );
    assert!(text.len() < 1024 * 1024, "{} bytes", text.len());
    // Nothing stored; the server answers, and a few invalid labels still get every cause.
    let (status, text) = request(addr, "GET", &format!("{CM}/many"), "", "").await;
    assert_eq!(status, 404, "{text}");
    let (status, text) = request(
        addr,
        "POST",
        CM,
        "application/json",
        &invalid_labels("few", 3),
    )
    .await;
    assert_eq!(status, 422, "{text}");
    let refusal: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(refusal["details"]["causes"].as_array().unwrap().len(), 3);
    assert!(
        !refusal["message"].as_str().unwrap().contains("more error"),
        "{text}"
    );
    server.shutdown().await;
}

/// A Pod of `count` containers.
fn pod(count: usize) -> Value {
    let containers: Vec<Value> = (0..count)
        .map(|i| json!({"name": format!("a{i}"), "image": "x"}))
        .collect();
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": containers}})
}

/// An apply configuration of 70,000 containers (2 MB) is past the object limit on its own:
/// 413 before the merge and the field sets (a 3 MB one took 400 MB to reach the object's size
/// check). An apply of a ConfigMap near 1 MiB, and of a Pod of 100 containers, still works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_apply_past_the_object_limit_is_refused_before_its_field_sets() {
    let server = server_with(ServeArgs::default()).await;
    let addr = server.addr;
    let apply = |path: String, body: String| async move {
        request(
            addr,
            "PATCH",
            &format!("{path}?fieldManager=m"),
            "application/apply-patch+yaml",
            &body,
        )
        .await
    };
    let (status, text) = apply(format!("{PODS}/p"), pod(70_000).to_string()).await;
    assert_eq!(status, 413, "{text}");
    let refusal: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(refusal["reason"], "RequestEntityTooLarge");
    let message = refusal["message"].as_str().unwrap();
    assert!(
        message.starts_with("Request entity too large: the object is at least ")
            && message.ends_with(" bytes, more than the limit of 1572864 bytes"),
        "{message}"
    );
    let (status, text) = request(addr, "GET", &format!("{PODS}/p"), "", "").await;
    assert_eq!(status, 404, "{text}");
    let (status, text) = apply(format!("{PODS}/p"), pod(100).to_string()).await;
    assert_eq!(status, 201, "{text}");
    let config = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big"},
        "data": {"k": "x".repeat(1000 * 1024)}});
    let (status, text) = apply(format!("{CM}/big"), config.to_string()).await;
    assert_eq!(status, 201, "{}", &text[..text.len().min(400)]);
    server.shutdown().await;
}

/// An update that sends 2 MB of `managedFields` for a small ConfigMap: the object stored
/// would be past the object limit (it was stored, 2 MB, the limit checked without its
/// managed fields). Now 413, and the stored object is unchanged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn managed_fields_cannot_take_an_object_past_the_limit() {
    let server = server_with(ServeArgs::default()).await;
    let addr = server.addr;
    let (status, created) = send_json(
        addr,
        "POST",
        CM,
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
            "data": {"a": "b"}}),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let fields: serde_json::Map<String, Value> = (0..150_000)
        .map(|i| (format!("f:k{i}"), json!({})))
        .collect();
    let mut update = created.clone();
    update["metadata"]["managedFields"] = json!([{"manager": "m", "operation": "Update",
        "apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {"f:data": fields}}]);
    let (status, text) = request(
        addr,
        "PUT",
        &format!("{CM}/c"),
        "application/json",
        &update.to_string(),
    )
    .await;
    assert_eq!(status, 413, "{}", &text[..text.len().min(400)]);
    let refusal: Value = serde_json::from_str(&text).unwrap();
    assert!(
        refusal["message"]
            .as_str()
            .unwrap()
            .ends_with("bytes, more than the limit of 1572864 bytes"),
        "{refusal}"
    );
    let (status, text) = request(addr, "GET", &format!("{CM}/c"), "", "").await;
    assert_eq!(status, 200, "{text}");
    assert!(text.len() < 4096, "{} bytes", text.len());
    let stored: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        stored["metadata"]["resourceVersion"],
        created["metadata"]["resourceVersion"]
    );
    server.shutdown().await;
}

/// A custom resource's `Table` whose rows each cost millions of steps (1000 printer columns,
/// each a filter over a 3000-item array) stops once its request answered 504 at its deadline:
/// the heavy-request slot is freed after a few rows, not after the whole LIST (minutes in a
/// debug build; it went on after the 504, holding one of the few heavy slots).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_whose_request_is_gone_stops_and_frees_its_slot() {
    let server = common::server().await;
    let addr = server.addr;
    let table = |path: String| async move {
        let (status, body) = common::request_with_headers(
            addr,
            "GET",
            &path,
            &[("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")],
            "",
        )
        .await;
        (status, body)
    };
    // A Table of more rows than are built between two checks: every row, in order.
    for i in 0..20 {
        let (status, body) = send_json(
            addr,
            "POST",
            CM,
            &common::configmap(&format!("c{i:02}"), 10),
        )
        .await;
        assert_eq!(status, 201, "{body}");
    }
    let (status, body) = table(CM.to_owned()).await;
    assert_eq!(status, 200, "{body}");
    let rows: Value = serde_json::from_str(&body).unwrap();
    let names: Vec<&str> = rows["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["cells"][0].as_str().unwrap())
        .collect();
    let expected: Vec<String> = (0..20).map(|i| format!("c{i:02}")).collect();
    assert_eq!(names, expected);
    assert_eq!(rows["columnDefinitions"].as_array().unwrap().len(), 3);
    let mut crd = common::widgets_crd();
    let columns: Vec<Value> = (0..1000)
        .map(|i| {
            json!({"name": format!("c{i}"), "type": "string",
                "jsonPath": format!(".spec.items[?(@.a==\"z{i}\")].b")})
        })
        .collect();
    crd["spec"]["versions"][0]["additionalPrinterColumns"] = Value::Array(columns);
    let (status, body) = send_json(
        addr,
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        &crd,
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let widgets = "/apis/example.com/v1/namespaces/default/widgets";
    tokio::time::timeout(common::HANG_GUARD, async {
        while request(addr, "GET", widgets, "application/json", "")
            .await
            .0
            != 200
        {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the widgets served");
    let items = vec![json!({"a": "x", "b": "y"}); 3000];
    for i in 0..120 {
        let widget = json!({"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": format!("w{i}")}, "spec": {"items": items}});
        let (status, body) = send_json(addr, "POST", widgets, &widget).await;
        assert_eq!(status, 201, "{body}");
    }
    let stopped = "watchkeeper_heavy_requests_total{outcome=\"stopped\"}";
    let before = common::metric(addr, stopped).await;
    let (status, body) = table(format!("{widgets}?timeout=2s")).await;
    assert_eq!(status, 504, "{}", &body[..body.len().min(300)]);
    // Stopped within a few rows: counted, its slot free.
    common::metric_at_least(addr, stopped, before + 1).await;
    assert_eq!(
        common::metric(addr, "watchkeeper_heavy_requests_running").await,
        0
    );
    // The server answers a small Table at once.
    let (status, body) = table(format!("{widgets}?limit=1")).await;
    assert_eq!(status, 200, "{}", &body[..body.len().min(300)]);
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["rows"].as_array().unwrap().len(), 1);
    assert!(answer["columnDefinitions"].as_array().unwrap().len() > 1000);
}

//! CustomResourceDefinition conversion webhooks over real HTTPS (`source::webhook::conversion`,
//! `http::converted`, `watchkeeper_api::conversion_review`), as kube's e2e test
//! "CustomResourceConversionWebhook" drives them: a webhook in the test (the admission tests'
//! server, `common::hooks`) converting `v1` `{spec: {hostPort: "h:p"}}` to and from `v2`
//! `{spec: {host, port}}`. Writes at either version, reads (GET, LIST, WATCH, kubectl) at
//! either; each event converted once whatever the number of watchers; a webhook that answers
//! wrongly, fails or is down refused in kube's words, reads included, and served again once it
//! answers.

use crate::common;
use crate::kubectl_support;

use std::net::SocketAddr;
use std::sync::Arc;

use serde_json::{Value, json};

use common::hooks::{Hooks, server_and_service, server_and_service_with};
use common::{HANG_GUARD, WatchReader, get_json, metrics_text, request, sample, send_json};
use kubectl_support::Kubectl;
use watchkeeper::config::ServeArgs;

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const CRD: &str =
    "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.stable.example.com";
const V1: &str = "/apis/stable.example.com/v1/namespaces/default/widgets";
const V2: &str = "/apis/stable.example.com/v2/namespaces/default/widgets";

/// `object`'s spec converted to `desired` (`hostPort` at v1, `host` and `port` at v2).
fn converted_spec(object: &Value, desired: &str) -> Value {
    let spec = &object["spec"];
    let mut converted = if desired.ends_with("/v2") {
        let host_port = spec["hostPort"].as_str().unwrap_or_default();
        let (host, port) = host_port.split_once(':').unwrap_or((host_port, ""));
        json!({"host": host, "port": port})
    } else {
        let host = spec["host"].as_str().unwrap_or_default();
        let port = spec["port"].as_str().unwrap_or_default();
        json!({"hostPort": format!("{host}:{port}")})
    };
    if let Some(replicas) = spec.get("replicas") {
        converted["replicas"] = replicas.clone();
    }
    converted
}

/// The test's conversion webhook, by path: `/convert` converts, `/wrong-uid` answers another
/// uid, `/rename` renames the objects, `/fail` answers a 500 Status; `/drop-one` leaves the
/// last object out, `/same-version` leaves the objects at their version, `/bad-label` adds
/// an invalid label, `/meta` changes labels and other metadata, `/v1beta1-answer` answers
/// an `apiextensions.k8s.io/v1beta1` review.
async fn answer(path: String, review: Value) -> (u16, Value) {
    let request = &review["request"];
    let desired = request["desiredAPIVersion"].as_str().unwrap_or_default();
    let mut uid = request["uid"].clone();
    if path == "/fail" {
        return (
            500,
            json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                "message": "the converter is broken", "code": 500}),
        );
    }
    let objects: Vec<Value> = request["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|object| {
            let mut out = object.clone();
            if path != "/same-version" {
                out["apiVersion"] = json!(desired);
            }
            out["spec"] = converted_spec(object, desired);
            let metadata = &mut out["metadata"];
            match path.as_str() {
                "/rename" => {
                    let name = object["metadata"]["name"].as_str().unwrap();
                    metadata["name"] = json!(format!("{name}-renamed"));
                }
                "/bad-label" => metadata["labels"] = json!({"tier": "-bad-"}),
                "/meta" => {
                    metadata["labels"] = json!({"converted": "yes"});
                    metadata["generation"] = json!(99);
                    metadata["finalizers"] = json!(["example.com/kept"]);
                }
                _ => {}
            }
            out
        })
        .collect();
    let mut objects = objects;
    if path == "/drop-one" && objects.len() > 1 {
        objects.pop();
    }
    if path == "/wrong-uid" {
        uid = json!("wrong");
    }
    let api_version = if path == "/v1beta1-answer" {
        json!("apiextensions.k8s.io/v1beta1")
    } else {
        review["apiVersion"].clone()
    };
    (
        200,
        json!({"apiVersion": api_version, "kind": "ConversionReview",
            "response": {"uid": uid, "result": {"status": "Success"}, "convertedObjects": objects}}),
    )
}

fn client_config(hooks: &Hooks, path: &str) -> Value {
    json!({"service": {"namespace": "default", "name": "hooks", "path": path},
        "caBundle": hooks.ca_bundle})
}

/// The CRD: `v1` stored, `v2` served (its schema defaults `tier` to `gold`), converted by
/// the webhook at `client_config`.
fn definition(client_config: Value) -> Value {
    let schema = json!({"openAPIV3Schema": {"type": "object",
        "x-kubernetes-preserve-unknown-fields": true}});
    let v2_schema = json!({"openAPIV3Schema": {"type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
        "properties": {"tier": {"type": "string", "default": "gold"}}}});
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.stable.example.com"},
        "spec": {"group": "stable.example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [
                {"name": "v1", "served": true, "storage": true, "schema": schema},
                {"name": "v2", "served": true, "storage": false, "schema": v2_schema,
                    "subresources": {"scale": {"specReplicasPath": ".spec.replicas",
                        "statusReplicasPath": ".status.replicas"}}}],
            "conversion": {"strategy": "Webhook", "webhook": {
                "clientConfig": client_config, "conversionReviewVersions": ["v1", "v1beta1"]}}}})
}

/// The webhook server, a server with its Service, and the CRD calling it at `/convert`.
async fn setup() -> (Hooks, watchkeeper::Server) {
    setup_with(None).await
}

/// [`setup`] with `args`.
async fn setup_with(args: Option<ServeArgs>) -> (Hooks, watchkeeper::Server) {
    let hooks = Hooks::start(Arc::new(|path, review| Box::pin(answer(path, review)))).await;
    let server = match args {
        None => server_and_service(hooks.port).await,
        Some(args) => server_and_service_with(hooks.port, args).await,
    };
    let (status, body) = send_json(
        server.addr,
        "POST",
        CRDS,
        &definition(client_config(&hooks, "/convert")),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    (hooks, server)
}

/// Points the CRD's webhook at `client_config` (applied in place).
async fn reconfigure(addr: SocketAddr, client_config: Value) {
    let (status, mut crd) = get_json(addr, CRD).await;
    assert_eq!(status, 200, "{crd}");
    crd["spec"]["conversion"]["webhook"]["clientConfig"] = client_config;
    let (status, body) = send_json(addr, "PUT", CRD, &crd).await;
    assert_eq!(status, 200, "{body}");
}

fn widget(api_version: &str, name: &str, spec: Value) -> Value {
    json!({"apiVersion": api_version, "kind": "Widget", "metadata": {"name": name},
        "spec": spec})
}

/// Creates the Widget `name` at v1 with `spec.hostPort`; the answer must be 201.
async fn create_v1(addr: SocketAddr, name: &str, host_port: &str) -> Value {
    let (status, created) = send_json(
        addr,
        "POST",
        V1,
        &widget(
            "stable.example.com/v1",
            name,
            json!({"hostPort": host_port}),
        ),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    created
}

/// GETs `path` until `done` holds of the answer (status and body), no sleep; fails the test
/// on a hang.
async fn get_until(addr: SocketAddr, path: &str, done: impl Fn(u16, &Value) -> bool) -> Value {
    tokio::time::timeout(HANG_GUARD, async {
        loop {
            let (status, body) = get_json(addr, path).await;
            if done(status, &body) {
                return body;
            }
            tokio::task::yield_now().await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{path} never satisfied the condition"))
}

/// The reviews received naming the object `name` and asking for `desired`.
fn reviews_of(hooks: &Hooks, name: &str, desired: &str) -> usize {
    hooks
        .at("/convert")
        .iter()
        .filter(|review| review["request"]["desiredAPIVersion"] == desired)
        .filter(|review| {
            review["request"]["objects"]
                .as_array()
                .unwrap()
                .iter()
                .any(|o| o["metadata"]["name"] == name)
        })
        .count()
}

/// Goal: objects written at either version read at both, converted by the webhook (GET, a
/// LIST of objects written at both versions, kubectl), discovery lists both versions, and
/// updates and patches at `v2` land at `v1`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_written_at_one_version_read_at_the_other() {
    let (hooks, server) = setup().await;
    let addr = server.addr;
    let (status, discovery) = get_json(addr, "/apis/stable.example.com/v2").await;
    assert_eq!(status, 200, "{discovery}");
    assert_eq!(discovery["resources"][0]["name"], "widgets", "{discovery}");

    // Created at v1, read at v2 and v1.
    let (status, created) = send_json(
        addr,
        "POST",
        V1,
        &widget(
            "stable.example.com/v1",
            "a",
            json!({"hostPort": "localhost:8080"}),
        ),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let (status, at_v2) = get_json(addr, &format!("{V2}/a")).await;
    assert_eq!(status, 200, "{at_v2}");
    assert_eq!(at_v2["apiVersion"], "stable.example.com/v2");
    assert_eq!(at_v2["spec"], json!({"host": "localhost", "port": "8080"}));
    assert_eq!(at_v2["tier"], "gold", "v2's default: {at_v2}");
    assert_eq!(at_v2["metadata"]["uid"], created["metadata"]["uid"]);
    assert_eq!(
        at_v2["metadata"]["resourceVersion"],
        created["metadata"]["resourceVersion"]
    );
    let (_, at_v1) = get_json(addr, &format!("{V1}/a")).await;
    assert_eq!(at_v1["spec"], json!({"hostPort": "localhost:8080"}));
    let review = &hooks.at("/convert")[0];
    assert_eq!(review["apiVersion"], "apiextensions.k8s.io/v1");
    assert_eq!(
        review["request"]["desiredAPIVersion"],
        "stable.example.com/v2"
    );
    assert!(!review["request"]["uid"].as_str().unwrap().is_empty());

    // Created at v2: answered at v2, stored (and read) at v1.
    let (status, created) = send_json(
        addr,
        "POST",
        V2,
        &widget(
            "stable.example.com/v2",
            "b",
            json!({"host": "example", "port": "80"}),
        ),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["apiVersion"], "stable.example.com/v2");
    assert_eq!(created["spec"], json!({"host": "example", "port": "80"}));
    let (_, at_v1) = get_json(addr, &format!("{V1}/b")).await;
    assert_eq!(at_v1["spec"], json!({"hostPort": "example:80"}));
    assert_eq!(
        reviews_of(&hooks, "b", "stable.example.com/v1"),
        1,
        "the body, once"
    );

    // A LIST at v2 of both.
    let (status, list) = get_json(addr, V2).await;
    assert_eq!(status, 200, "{list}");
    assert_eq!(list["apiVersion"], "stable.example.com/v2");
    let specs: Vec<&Value> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| &item["spec"])
        .collect();
    assert_eq!(
        specs,
        [
            &json!({"host": "localhost", "port": "8080"}),
            &json!({"host": "example", "port": "80"})
        ]
    );
    assert!(
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|item| item["apiVersion"] == "stable.example.com/v2")
    );

    // An update and a patch at v2 land at v1.
    let mut update = created.clone();
    update["spec"]["port"] = json!("81");
    let (status, updated) = send_json(addr, "PUT", &format!("{V2}/b"), &update).await;
    assert_eq!(status, 200, "{updated}");
    assert_eq!(updated["spec"], json!({"host": "example", "port": "81"}));
    let (status, patched) = request(
        addr,
        "PATCH",
        &format!("{V2}/b"),
        "application/merge-patch+json",
        r#"{"spec": {"port": "82"}}"#,
    )
    .await;
    assert_eq!(status, 200, "{patched}");
    let patched: Value = serde_json::from_str(&patched).unwrap();
    assert_eq!(patched["apiVersion"], "stable.example.com/v2");
    assert_eq!(patched["spec"], json!({"host": "example", "port": "82"}));
    let (_, at_v1) = get_json(addr, &format!("{V1}/b")).await;
    assert_eq!(at_v1["spec"], json!({"hostPort": "example:82"}));
    // Created, updated and patched at v2: one writer, its entry at v2 (kube's field manager
    // records a write at the request's version), owning v2's fields.
    let entries = managers(&patched);
    assert_eq!(entries.len(), 1, "{patched}");
    assert_eq!(
        (entries[0].1.as_str(), entries[0].2.as_str()),
        ("Update", "stable.example.com/v2"),
        "{patched}"
    );
    assert_eq!(
        patched["metadata"]["managedFields"][0]["fieldsV1"]["f:spec"],
        json!({".": {}, "f:host": {}, "f:port": {}}),
        "{patched}"
    );
    assert_eq!(
        at_v1["metadata"]["managedFields"],
        patched["metadata"]["managedFields"]
    );

    // The scale subresource at v2: its write lands at v1, converted.
    let (status, scaled) = request(
        addr,
        "PATCH",
        &format!("{V2}/b/scale"),
        "application/merge-patch+json",
        r#"{"spec": {"replicas": 3}}"#,
    )
    .await;
    assert_eq!(status, 200, "{scaled}");
    let (_, at_v1) = get_json(addr, &format!("{V1}/b")).await;
    assert_eq!(
        at_v1["spec"],
        json!({"hostPort": "example:82", "replicas": 3})
    );

    // kubectl, at the converted version by its full name.
    let kubectl = Kubectl::new(addr);
    let read = kubectl
        .json(&["get", "widgets.v2.stable.example.com", "a", "-o", "json"])
        .await;
    assert_eq!(read["apiVersion"], "stable.example.com/v2");
    assert_eq!(read["spec"]["host"], "localhost");
    let read = kubectl
        .json(&["get", "widgets.v1.stable.example.com", "b", "-o", "json"])
        .await;
    assert_eq!(read["spec"]["hostPort"], "example:82");
    let table = kubectl.ok(&["get", "widgets.v2.stable.example.com"]).await;
    assert!(table.contains('a') && table.contains('b'), "{table}");
    // kubectl apply at v2: a create, then a patch of what it applied.
    let manifest = |port: &str| {
        format!(
            "apiVersion: stable.example.com/v2\nkind: Widget\nmetadata:\n  name: c\n  namespace: default\nspec:\n  host: applied\n  port: \"{port}\"\n"
        )
    };
    for port in ["90", "91"] {
        let file = kubectl.manifest("c.yaml", &manifest(port));
        kubectl.ok(&["apply", "-f", &file]).await;
        let (_, at_v1) = get_json(addr, &format!("{V1}/c")).await;
        assert_eq!(
            at_v1["spec"],
            json!({"hostPort": format!("applied:{port}")})
        );
    }
}

/// Goal: watches at v2 see the events converted, in order, and each event is converted once
/// however many watch it; a deletion reaches them too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_share_one_conversion_per_event() {
    let (hooks, server) = setup().await;
    let addr = server.addr;
    let created = create_v1(addr, "a", "h:1").await;
    let rv = created["metadata"]["resourceVersion"].as_str().unwrap();
    let path = format!("{V2}?watch=true&resourceVersion={rv}");
    let mut first = WatchReader::open(addr, &path, None).await;
    let mut second = WatchReader::open(addr, &path, None).await;
    for port in 2..=4 {
        let patch = format!(r#"{{"spec": {{"hostPort": "h:{port}"}}}}"#);
        let (status, body) = request(
            addr,
            "PATCH",
            &format!("{V1}/a"),
            "application/merge-patch+json",
            &patch,
        )
        .await;
        assert_eq!(status, 200, "{body}");
    }
    let (status, body) = request(addr, "DELETE", &format!("{V1}/a"), "application/json", "").await;
    assert_eq!(status, 200, "{body}");
    for watch in [&mut first, &mut second] {
        let mut revisions = Vec::new();
        for port in 2..=4 {
            let event = watch.next().await.unwrap();
            assert_eq!(event["type"], "MODIFIED", "{event}");
            assert_eq!(event["object"]["apiVersion"], "stable.example.com/v2");
            assert_eq!(
                event["object"]["spec"],
                json!({"host": "h", "port": port.to_string()})
            );
            revisions.push(
                event["object"]["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap()
                    .parse::<u64>()
                    .unwrap(),
            );
        }
        assert!(revisions.windows(2).all(|w| w[0] < w[1]), "{revisions:?}");
        let deleted = watch.next().await.unwrap();
        assert_eq!(deleted["type"], "DELETED", "{deleted}");
        assert_eq!(deleted["object"]["spec"], json!({"host": "h", "port": "4"}));
    }
    // Each modification converted once for both watchers (and the GETs and LISTs).
    for port in 2..=4 {
        let converted = hooks
            .at("/convert")
            .iter()
            .flat_map(|review| review["request"]["objects"].as_array().unwrap().clone())
            .filter(|o| o["spec"]["hostPort"] == format!("h:{port}"))
            .count();
        assert_eq!(converted, 1, "h:{port}");
    }
}

/// Goal: a webhook that answers another uid, renames the object or fails, or is down,
/// refuses the write in kube's words (nothing written), makes reads at the converted version
/// answer the failure and ends its watches with it; answering again, the version is served
/// again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_webhook_is_refused_in_kubes_words() {
    let (hooks, server) = setup().await;
    let addr = server.addr;
    let created = create_v1(addr, "a", "h:1").await;
    get_until(addr, &format!("{V2}/a"), |status, _| status == 200).await;
    let rv = created["metadata"]["resourceVersion"].as_str().unwrap();
    let mut watch =
        WatchReader::open(addr, &format!("{V2}?watch=true&resourceVersion={rv}"), None).await;
    let at_v2 = |name: &str| {
        widget(
            "stable.example.com/v2",
            name,
            json!({"host": "h", "port": "2"}),
        )
    };

    reconfigure(addr, client_config(&hooks, "/wrong-uid")).await;
    let (status, refused) = send_json(addr, "POST", V2, &at_v2("b")).await;
    assert_eq!(status, 500, "{refused}");
    assert_eq!(refused["reason"], "InternalError");
    let message = refused["message"].as_str().unwrap();
    assert!(
        message.starts_with("Internal error occurred: conversion webhook for stable.example.com/v2, Kind=Widget failed: expected response.uid=\"")
            && message.ends_with("\", got \"wrong\""),
        "{message}"
    );
    let (status, _) = get_json(addr, &format!("{V1}/b")).await;
    assert_eq!(status, 404, "nothing written");

    reconfigure(addr, client_config(&hooks, "/rename")).await;
    let (status, refused) = send_json(addr, "POST", V2, &at_v2("c")).await;
    assert_eq!(status, 500, "{refused}");
    assert_eq!(
        refused["message"],
        "Internal error occurred: conversion webhook for stable.example.com/v2, Kind=Widget returned invalid object: must have the same name: c != c-renamed"
    );

    reconfigure(addr, client_config(&hooks, "/fail")).await;
    let (status, refused) = send_json(addr, "POST", V2, &at_v2("d")).await;
    assert_eq!(status, 500, "{refused}");
    assert_eq!(
        refused["message"],
        "Internal error occurred: conversion webhook for stable.example.com/v2, Kind=Widget failed: the converter is broken"
    );

    // A write at v1 (no conversion) is stored; its event cannot be converted to v2: the
    // watch ends with the failure, and reads at v2 answer it.
    let (status, body) = request(
        addr,
        "PATCH",
        &format!("{V1}/a"),
        "application/merge-patch+json",
        r#"{"spec": {"hostPort": "h:3"}}"#,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let expected = "Internal error occurred: conversion webhook for stable.example.com/v1, Kind=Widget failed: the converter is broken";
    let error = watch.next().await.unwrap();
    assert_eq!(error["type"], "ERROR", "{error}");
    assert_eq!(error["object"]["code"], 500, "{error}");
    assert_eq!(error["object"]["message"], expected, "{error}");
    assert!(watch.next().await.is_none(), "the watch ends");
    for path in [format!("{V2}/a"), V2.to_owned()] {
        let (status, refused) = get_json(addr, &path).await;
        assert_eq!(status, 500, "{refused}");
        assert_eq!(refused["message"], expected);
    }
    let (status, refused) = get_json(addr, &format!("{V2}?watch=true")).await;
    assert_eq!((status, &refused["message"]), (500, &json!(expected)));

    // Down: kube's words for a connection refused.
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let url = format!("https://127.0.0.1:{port}/convert");
    reconfigure(addr, json!({"url": url, "caBundle": hooks.ca_bundle})).await;
    let (status, refused) = send_json(addr, "POST", V2, &at_v2("e")).await;
    assert_eq!(status, 500, "{refused}");
    assert_eq!(
        refused["message"],
        format!(
            "Internal error occurred: conversion webhook for stable.example.com/v2, Kind=Widget failed: Post \"{url}?timeout=30s\": dial tcp 127.0.0.1:{port}: connect: connection refused"
        )
    );

    // Answering again: served again, with what was written meanwhile.
    reconfigure(addr, client_config(&hooks, "/convert")).await;
    let read = get_until(addr, &format!("{V2}/a"), |status, _| status == 200).await;
    assert_eq!(read["spec"], json!({"host": "h", "port": "3"}));
    let (status, created) = send_json(addr, "POST", V2, &at_v2("f")).await;
    assert_eq!(status, 201, "{created}");

    // kube's histogram of the calls: the four bodies refused, each one call v2 to v1; the
    // feed's failed and successful calls v1 to v2.
    let text = metrics_text(addr).await;
    let count = |from: &str, to: &str, succeeded: &str| {
        sample(
            &text,
            &format!(
                "apiserver_crd_conversion_webhook_duration_seconds_count{{crd_name=\"widgets.stable.example.com\",from_version=\"{from}\",to_version=\"{to}\",succeeded=\"{succeeded}\"}}"
            ),
        )
    };
    assert_eq!(count("v2", "v1", "false"), 4);
    assert_eq!(count("v2", "v1", "true"), 1, "f's body");
    assert!(count("v1", "v2", "false") >= 1);
    assert!(count("v1", "v2", "true") >= 1);
}

/// Goal: objects written while the webhook fails are all served at v2 once it answers (the
/// version re-lists), the list converted in several reviews, each within half of
/// `--max-request-body-bytes`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relist_after_a_failure_converts_in_bounded_reviews() {
    let max = 16_384;
    let (hooks, server) = setup_with(Some(ServeArgs {
        max_request_body_bytes: Some(max),
        ..ServeArgs::default()
    }))
    .await;
    let addr = server.addr;
    reconfigure(addr, client_config(&hooks, "/fail")).await;
    let pad = "x".repeat(2_000);
    for index in 0..10 {
        let mut object = widget(
            "stable.example.com/v1",
            &format!("w{index}"),
            json!({"hostPort": format!("h:{index}")}),
        );
        object["metadata"]["annotations"] = json!({"pad": pad});
        let (status, body) = send_json(addr, "POST", V1, &object).await;
        assert_eq!(status, 201, "{body}");
    }
    get_until(addr, V2, |status, _| status == 500).await;
    reconfigure(addr, client_config(&hooks, "/convert")).await;
    let list = get_until(addr, V2, |status, list| {
        status == 200
            && list["items"]
                .as_array()
                .is_some_and(|items| items.len() == 10)
    })
    .await;
    for (index, item) in list["items"].as_array().unwrap().iter().enumerate() {
        assert_eq!(
            item["spec"],
            json!({"host": "h", "port": index.to_string()})
        );
        assert_eq!(item["metadata"]["annotations"]["pad"], pad.as_str());
    }
    let reviews = hooks.at("/convert");
    let sizes: Vec<(usize, usize)> = reviews
        .iter()
        .map(|review| {
            let objects = review["request"]["objects"].as_array().unwrap();
            (
                objects.len(),
                objects.iter().map(|o| o.to_string().len()).sum(),
            )
        })
        .collect();
    assert!(
        sizes
            .iter()
            .all(|&(count, bytes)| count == 1 || bytes <= max / 2),
        "{sizes:?}"
    );
    let converted: usize = sizes.iter().map(|&(count, _)| count).sum();
    assert_eq!(converted, 10, "the list, once: {sizes:?}");
    assert!(sizes.len() >= 3, "several reviews: {sizes:?}");
}

/// Goal: a consistent GET read from the store (`--consistent-get-from-cache=false`) at the
/// converted version is converted by the webhook too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_get_from_the_store_is_converted() {
    let (_hooks, server) = setup_with(Some(ServeArgs {
        consistent_get_from_cache: Some(false),
        ..ServeArgs::default()
    }))
    .await;
    let addr = server.addr;
    let created = create_v1(addr, "a", "store:7").await;
    let (status, read) = get_json(addr, &format!("{V2}/a")).await;
    assert_eq!(status, 200, "{read}");
    assert_eq!(read["apiVersion"], "stable.example.com/v2");
    assert_eq!(read["spec"], json!({"host": "store", "port": "7"}));
    assert_eq!(read["tier"], "gold", "v2's default: {read}");
    assert_eq!(
        read["metadata"]["resourceVersion"],
        created["metadata"]["resourceVersion"]
    );
}

/// Makes `v2` the CRD's storage version (and points its webhook at `client_config`, if
/// given): the CRD as answered.
async fn store_at_v2(addr: SocketAddr, client_config: Option<Value>) -> Value {
    let (status, mut crd) = get_json(addr, CRD).await;
    assert_eq!(status, 200, "{crd}");
    crd["spec"]["versions"][0]["storage"] = json!(false);
    crd["spec"]["versions"][1]["storage"] = json!(true);
    if let Some(client_config) = client_config {
        crd["spec"]["conversion"]["webhook"]["clientConfig"] = client_config;
    }
    let (status, body) = send_json(addr, "PUT", CRD, &crd).await;
    assert_eq!(status, 200, "{body}");
    body
}

/// The items of the LIST at `path` once it answers 200 with `count` of them.
async fn items_once(addr: SocketAddr, path: &str, count: usize) -> Vec<Value> {
    let list = get_until(addr, path, |status, list| {
        status == 200 && list["items"].as_array().is_some_and(|i| i.len() == count)
    })
    .await;
    list["items"].as_array().unwrap().clone()
}

/// Goal (kube's conformance case "should be able to convert a non homogeneous list of
/// CRs"): once the storage version is `v2`, the object still stored at `v1` is converted by
/// the webhook, not only renamed — LIST, GET and WATCH at `v2` show it converted beside
/// the one stored at `v2`, both read at `v1` too; `storedVersions` lists both versions; an
/// update at `v2` stores it at `v2`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_stored_at_an_earlier_version_are_converted() {
    let (hooks, server) = setup().await;
    let addr = server.addr;
    create_v1(addr, "a", "localhost:8080").await;
    let crd = store_at_v2(addr, None).await;
    assert_eq!(
        crd["status"]["storedVersions"],
        json!(["v1", "v2"]),
        "{crd}"
    );
    // Created at v1 after the change (as kube's test does): stored at v2.
    let items = get_until(addr, V1, |status, _| status == 200).await;
    assert_eq!(items["items"].as_array().map(Vec::len), Some(1), "{items}");
    create_v1(addr, "b", "localhost:8080").await;

    for item in items_once(addr, V2, 2).await {
        assert_eq!(item["apiVersion"], "stable.example.com/v2", "{item}");
        assert_eq!(
            item["spec"],
            json!({"host": "localhost", "port": "8080"}),
            "{item}"
        );
        assert_eq!(item["tier"], "gold", "v2's default: {item}");
    }
    for item in items_once(addr, V1, 2).await {
        assert_eq!(item["apiVersion"], "stable.example.com/v1", "{item}");
        assert_eq!(
            item["spec"],
            json!({"hostPort": "localhost:8080"}),
            "{item}"
        );
    }
    let (status, a) = get_json(addr, &format!("{V2}/a")).await;
    assert_eq!(status, 200, "{a}");
    assert_eq!(
        a["spec"],
        json!({"host": "localhost", "port": "8080"}),
        "{a}"
    );
    assert!(
        reviews_of(&hooks, "a", "stable.example.com/v2") >= 1,
        "the object stored at v1 went through the webhook"
    );
    let mut watch = WatchReader::open(addr, &format!("{V2}?watch=true"), None).await;
    for _ in 0..2 {
        let event = watch.next().await.unwrap();
        assert_eq!(event["type"], "ADDED", "{event}");
        assert_eq!(
            event["object"]["spec"],
            json!({"host": "localhost", "port": "8080"}),
            "{event}"
        );
    }

    // Updated at v2: stored at v2 from then on, still read at v1.
    let (status, body) = request(
        addr,
        "PATCH",
        &format!("{V2}/a"),
        "application/merge-patch+json",
        r#"{"spec": {"port": "9090"}}"#,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let event = watch.next().await.unwrap();
    assert_eq!(event["type"], "MODIFIED", "{event}");
    assert_eq!(
        event["object"]["spec"],
        json!({"host": "localhost", "port": "9090"})
    );
    let at_v1 = get_until(addr, &format!("{V1}/a"), |_, a| {
        a["spec"]["hostPort"] == "localhost:9090"
    })
    .await;
    assert_eq!(at_v1["apiVersion"], "stable.example.com/v1");
}

/// Goal: a webhook failing to convert an object stored at an earlier version fails reads
/// of the storage version in kube's words (no silent gap, no object left unconverted),
/// while the version it is stored at still reads it; answering again, the storage version
/// is served again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_stored_earlier_are_never_served_unconverted() {
    let (hooks, server) = setup().await;
    let addr = server.addr;
    create_v1(addr, "a", "h:1").await;
    store_at_v2(addr, Some(client_config(&hooks, "/fail"))).await;
    let expected = "Internal error occurred: conversion webhook for stable.example.com/v1, Kind=Widget failed: the converter is broken";
    for path in [V2.to_owned(), format!("{V2}/a")] {
        let refused = get_until(addr, &path, |status, _| status == 500).await;
        assert_eq!(refused["message"], expected, "{refused}");
    }
    let items = items_once(addr, V1, 1).await;
    assert_eq!(items[0]["spec"], json!({"hostPort": "h:1"}));

    reconfigure(addr, client_config(&hooks, "/convert")).await;
    let items = items_once(addr, V2, 1).await;
    assert_eq!(items[0]["spec"], json!({"host": "h", "port": "1"}));
}

/// Goal (kube's checks of an answer, its words): an answer of another review version, of
/// objects left at their version, with an invalid label or one object short of a list, is
/// refused — a write (nothing stored) or the reads of the version whose feed it fails; only
/// labels and annotations of an answer are kept, its other metadata restored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_kube_refuses_are_refused_in_its_words() {
    let (hooks, server) = setup().await;
    let addr = server.addr;
    let body = widget(
        "stable.example.com/v2",
        "a",
        json!({"host": "h", "port": "1"}),
    );
    let prefix =
        "Internal error occurred: conversion webhook for stable.example.com/v2, Kind=Widget";
    for (path, expected) in [
        (
            "/v1beta1-answer",
            format!(
                "{prefix} failed: expected webhook response of apiextensions.k8s.io/v1, Kind=ConversionReview, got apiextensions.k8s.io/v1beta1, Kind=ConversionReview"
            ),
        ),
        (
            "/same-version",
            format!(
                "{prefix} returned invalid object at index 0: invalid groupVersion (expected stable.example.com/v1, received stable.example.com/v2)"
            ),
        ),
        (
            "/bad-label",
            format!(
                "{prefix} returned invalid metadata: metadata.labels: Invalid value: \"-bad-\": "
            ),
        ),
    ] {
        reconfigure(addr, client_config(&hooks, path)).await;
        let (status, refused) = send_json(addr, "POST", V2, &body).await;
        assert_eq!(status, 500, "{path}: {refused}");
        let message = refused["message"].as_str().unwrap();
        assert!(message.starts_with(&expected), "{path}: {message}");
        let (status, _) = get_json(addr, &format!("{V1}/a")).await;
        assert_eq!(status, 404, "{path}: nothing written");
    }

    // Labels kept, the other metadata the original's.
    reconfigure(addr, client_config(&hooks, "/meta")).await;
    let (status, created) = send_json(addr, "POST", V2, &body).await;
    assert_eq!(status, 201, "{created}");
    let (_, stored) = get_json(addr, &format!("{V1}/a")).await;
    assert_eq!(
        stored["metadata"]["labels"],
        json!({"converted": "yes"}),
        "{stored}"
    );
    assert_eq!(stored["metadata"]["generation"], 1, "{stored}");
    assert!(stored["metadata"].get("finalizers").is_none(), "{stored}");
    assert_eq!(created["metadata"]["generation"], 1, "{created}");

    // A list one object short: the feed's re-list is refused, and so are reads at v2.
    reconfigure(addr, client_config(&hooks, "/fail")).await;
    create_v1(addr, "b", "h:2").await;
    get_until(addr, V2, |status, _| status == 500).await;
    reconfigure(addr, client_config(&hooks, "/drop-one")).await;
    let refused = get_until(addr, V2, |status, body| {
        status == 500
            && body["message"]
                .as_str()
                .is_some_and(|m| m.contains("objects, expected"))
    })
    .await;
    assert_eq!(
        refused["message"],
        "Internal error occurred: conversion webhook for stable.example.com/v1, Kind=WidgetList returned 1 objects, expected 2"
    );
}

/// The `(manager, operation, apiVersion)` of each `managedFields` entry of `object`.
fn managers(object: &Value) -> Vec<(String, String, String)> {
    object["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|entry| {
            let text = |key: &str| entry[key].as_str().unwrap_or_default().to_owned();
            (text("manager"), text("operation"), text("apiVersion"))
        })
        .collect()
}

/// Goal: server-side apply at `v2` (kubectl's `apply --server-side`) works as kube's field
/// manager at the request's version: the live object converted to `v2`, the configuration
/// applied there, stored at `v1`; the applier's entry names `v2` and owns `v2`'s fields,
/// and no other entry appears; another manager changing them conflicts in kube's words,
/// and takes them with `force`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_apply_at_a_converted_version() {
    let (_hooks, server) = setup().await;
    let addr = server.addr;
    let kubectl = Kubectl::new(addr);
    let manifest = |port: &str| {
        format!(
            "apiVersion: stable.example.com/v2\nkind: Widget\nmetadata:\n  name: s\n  namespace: default\nspec:\n  host: applied\n  port: \"{port}\"\n"
        )
    };
    for port in ["90", "91"] {
        let file = kubectl.manifest("s.yaml", &manifest(port));
        kubectl.ok(&["apply", "--server-side", "-f", &file]).await;
        let (_, at_v1) = get_json(addr, &format!("{V1}/s")).await;
        assert_eq!(
            at_v1["spec"],
            json!({"hostPort": format!("applied:{port}")}),
            "{at_v1}"
        );
    }
    let (_, at_v2) = get_json(addr, &format!("{V2}/s")).await;
    let expected = vec![(
        "kubectl".to_owned(),
        "Apply".to_owned(),
        "stable.example.com/v2".to_owned(),
    )];
    assert_eq!(managers(&at_v2), expected, "{at_v2}");
    assert_eq!(
        at_v2["metadata"]["managedFields"][0]["fieldsV1"]["f:spec"],
        json!({".": {}, "f:host": {}, "f:port": {}}),
        "{at_v2}"
    );

    // Another applier changing the port: kube's conflict, nothing written; forced, it owns it.
    let other = "apiVersion: stable.example.com/v2\nkind: Widget\nmetadata:\n  name: s\nspec:\n  port: \"92\"\n";
    let path = format!("{V2}/s?fieldManager=other");
    let (status, body) = request(addr, "PATCH", &path, "application/apply-patch+yaml", other).await;
    assert_eq!(status, 409, "{body}");
    let refused: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        refused["message"], "Apply failed with 1 conflict: conflict with \"kubectl\": .spec.port",
        "{refused}"
    );
    let (status, body) = request(
        addr,
        "PATCH",
        &format!("{path}&force=true"),
        "application/apply-patch+yaml",
        other,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let applied: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(applied["apiVersion"], "stable.example.com/v2");
    assert_eq!(applied["spec"], json!({"host": "applied", "port": "92"}));
    let mut names = managers(&applied);
    names.sort();
    assert_eq!(
        names,
        [
            (
                "kubectl".to_owned(),
                "Apply".to_owned(),
                "stable.example.com/v2".to_owned()
            ),
            (
                "other".to_owned(),
                "Apply".to_owned(),
                "stable.example.com/v2".to_owned()
            ),
        ],
        "{applied}"
    );
    let (_, at_v1) = get_json(addr, &format!("{V1}/s")).await;
    assert_eq!(at_v1["spec"], json!({"hostPort": "applied:92"}));
    assert_eq!(
        at_v1["metadata"]["managedFields"],
        applied["metadata"]["managedFields"]
    );

    // A manager of the storage version owning the field the apply changes there conflicts,
    // named at its version; forced, the applier takes it.
    let (status, body) = send_json(
        addr,
        "POST",
        &format!("{V1}?fieldManager=editor"),
        &widget("stable.example.com/v1", "e", json!({"hostPort": "h:1"})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let config = "apiVersion: stable.example.com/v2\nkind: Widget\nmetadata:\n  name: e\nspec:\n  host: h\n  port: \"2\"\n";
    let path = format!("{V2}/e?fieldManager=applier");
    let (status, body) =
        request(addr, "PATCH", &path, "application/apply-patch+yaml", config).await;
    assert_eq!(status, 409, "{body}");
    let refused: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        refused["message"],
        "Apply failed with 1 conflict: conflict with \"editor\" using stable.example.com/v1: .spec.hostPort",
        "{refused}"
    );
    let (status, body) = request(
        addr,
        "PATCH",
        &format!("{path}&force=true"),
        "application/apply-patch+yaml",
        config,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let applied: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        managers(&applied),
        [
            (
                "applier".to_owned(),
                "Apply".to_owned(),
                "stable.example.com/v2".to_owned()
            ),
            (
                "editor".to_owned(),
                "Update".to_owned(),
                "stable.example.com/v1".to_owned()
            ),
        ],
        "{applied}"
    );
    // The editor keeps `.spec` itself (shared, as kube's sets), not the field taken.
    assert_eq!(
        applied["metadata"]["managedFields"][1]["fieldsV1"],
        json!({"f:spec": {}}),
        "{applied}"
    );
}

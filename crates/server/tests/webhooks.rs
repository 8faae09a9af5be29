//! Admission webhooks over real HTTPS, as kube-apiserver calls them (`crate::source::webhook`,
//! `watchkeeper_api::admission_webhook`): a webhook server in the test (hyper + rustls, its
//! certificate from a CA made here, the CA given as `caBundle`) reached through a Service and
//! its Endpoints (kube's endpoint routing) or a URL. A validating webhook that denies (kube's
//! words through kubectl, nothing stored), one that allows with a warning, a mutating one
//! whose JSON patch lands (and the validating ones see it), `failurePolicy` with the webhook
//! down, namespace and object selectors, dry runs against `sideEffects`, a webhook that never
//! answers within `timeoutSeconds`, and the configurations' validation.

use crate::common;
use crate::kubectl_support;

use std::net::SocketAddr;
use std::sync::Arc;

use base64::Engine;
use serde_json::{Value, json};
use watchkeeper::config::ServeArgs;

use common::hooks::{Hooks, server_and_service, server_and_service_with};
use common::{events_in, get_json, send_json, server_with, until, write_warned};
use kubectl_support::Kubectl;

const VALIDATING: &str = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations";
const MUTATING: &str = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations";
const CONFIG_MAPS: &str = "/api/v1/namespaces/default/configmaps";

/// The test webhook's answers, by path: `/deny` refuses names starting with `bad`, `/warn`
/// allows with a warning and the audit annotation `checked: <name>`, `/mutate` sets the annotations to `hooked: yes` (and adds a field
/// ConfigMaps do not have), `/allow` allows, `/hang` never
/// answers, `/v1beta1` allows in an `admission.k8s.io/v1beta1` review.
async fn answer(path: String, review: Value) -> (u16, Value) {
    let uid = review["request"]["uid"].clone();
    let name = review["request"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let mut response = json!({"uid": uid, "allowed": true});
    match path.as_str() {
        "/deny" if name.starts_with("bad") => {
            response = json!({"uid": uid, "allowed": false, "status": {"code": 403,
                "reason": "Forbidden", "message": "no names starting with bad"}});
        }
        "/warn" => {
            response["warnings"] = json!([format!("be careful with {name}")]);
            response["auditAnnotations"] = json!({"checked": name});
        }
        "/mutate" => {
            let patch = json!([{"op": "add", "path": "/metadata/annotations",
                "value": {"hooked": "yes"}}, {"op": "add", "path": "/notAField", "value": 1}]);
            response["patchType"] = json!("JSONPatch");
            response["patch"] =
                json!(base64::engine::general_purpose::STANDARD.encode(patch.to_string()));
        }
        "/hang" => std::future::pending::<()>().await,
        _ => {}
    }
    let version = if path == "/v1beta1" { "v1beta1" } else { "v1" };
    let body = json!({"apiVersion": format!("admission.k8s.io/{version}"),
        "kind": "AdmissionReview", "response": response});
    (200, body)
}

/// The test's admission webhook server ([`answer`]).
async fn admission_hooks() -> Hooks {
    Hooks::start(Arc::new(|path, review| Box::pin(answer(path, review)))).await
}

/// A webhook on ConfigMap creates and updates, called at `path` of the Service
/// `default/hooks`, with `extra` fields.
fn webhook(name: &str, hooks: &Hooks, path: &str, extra: Value) -> Value {
    let mut webhook = json!({
        "name": name,
        "clientConfig": {"service": {"namespace": "default", "name": "hooks", "path": path},
            "caBundle": hooks.ca_bundle},
        "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"],
            "resources": ["configmaps"]}],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
    });
    for (key, value) in extra.as_object().unwrap() {
        webhook[key] = value.clone();
    }
    webhook
}

async fn configure(addr: SocketAddr, collection: &str, name: &str, webhooks: Vec<Value>) {
    let kind = if collection == VALIDATING {
        "ValidatingWebhookConfiguration"
    } else {
        "MutatingWebhookConfiguration"
    };
    let (status, body) = send_json(
        addr,
        "POST",
        collection,
        &json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
            "metadata": {"name": name}, "webhooks": webhooks}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
}

fn config_map(name: &str, labels: Value) -> String {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "labels": labels}, "data": {"k": "v"}})
    .to_string()
}

async fn create_config_map(
    addr: SocketAddr,
    path: &str,
    name: &str,
    labels: Value,
) -> (u16, Value, Vec<String>) {
    write_warned(
        addr,
        "POST",
        path,
        "application/json",
        &config_map(name, labels),
    )
    .await
}

/// Goal: a validating webhook that denies refuses the create in kube's words (kubectl prints
/// them), stores nothing, and lets other names through; the review it got carries kube's
/// request fields.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denying_webhook_refuses_in_kubes_words_through_kubectl() {
    let hooks = admission_hooks().await;
    let server = server_and_service(hooks.port).await;
    let addr = server.addr;
    configure(
        addr,
        VALIDATING,
        "deny",
        vec![webhook("deny.hooks.test", &hooks, "/deny", json!({}))],
    )
    .await;
    let k = Kubectl::new(addr);
    let refused = k
        .fails(&["create", "configmap", "bad-one", "--from-literal=a=b"])
        .await;
    assert!(
        refused.stderr.contains(
            r#"error: failed to create configmap: admission webhook "deny.hooks.test" denied the request: no names starting with bad"#
        ),
        "{}",
        refused.stderr
    );
    let (status, _) = get_json(addr, &format!("{CONFIG_MAPS}/bad-one")).await;
    assert_eq!(status, 404, "a denied create stores nothing");
    k.ok(&["create", "configmap", "good-one", "--from-literal=a=b"])
        .await;
    let reviews = hooks.at("/deny");
    assert_eq!(reviews.len(), 2, "{reviews:?}");
    let request = &reviews[1]["request"];
    assert_eq!(reviews[1]["apiVersion"], "admission.k8s.io/v1");
    assert!(!request["uid"].as_str().unwrap().is_empty());
    assert_eq!(
        request["kind"],
        json!({"group": "", "version": "v1", "kind": "ConfigMap"})
    );
    assert_eq!(
        request["resource"],
        json!({"group": "", "version": "v1", "resource": "configmaps"})
    );
    assert_eq!(request["requestKind"], request["kind"]);
    assert_eq!(request["operation"], "CREATE");
    assert_eq!(
        (request["name"].as_str(), request["namespace"].as_str()),
        (Some("good-one"), Some("default"))
    );
    assert_eq!(request["object"]["data"], json!({"a": "b"}));
    assert_eq!(request["oldObject"], Value::Null);
    assert_eq!(request["dryRun"], false);
    assert_eq!(request["options"]["kind"], "CreateOptions");
    assert!(request["userInfo"]["username"].is_string(), "{request}");
    // An update is sent with its old object.
    k.ok(&["label", "configmap", "good-one", "x=y"]).await;
    let reviews = hooks.at("/deny");
    let update = &reviews.last().unwrap()["request"];
    assert_eq!(update["operation"], "UPDATE");
    assert_eq!(update["object"]["metadata"]["labels"]["x"], "y");
    assert!(
        update["oldObject"]["metadata"]["labels"].get("x").is_none(),
        "{update}"
    );
}

/// Goal: an allowing webhook's warnings reach kubectl; a URL clientConfig is called at its
/// host, verified against the CA for its IP; a `v1beta1`-only webhook gets a v1beta1 review.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allowing_webhook_warns_and_urls_and_v1beta1_reviews_work() {
    let hooks = admission_hooks().await;
    let server = server_and_service(hooks.port).await;
    let addr = server.addr;
    let by_url = json!({"url": format!("https://127.0.0.1:{}/warn", hooks.port), "caBundle": hooks.ca_bundle});
    configure(
        addr,
        VALIDATING,
        "warn",
        vec![
            webhook(
                "warn.hooks.test",
                &hooks,
                "/warn",
                json!({"clientConfig": by_url}),
            ),
            webhook(
                "old.hooks.test",
                &hooks,
                "/v1beta1",
                json!({"admissionReviewVersions": ["v1beta1", "v1"]}),
            ),
        ],
    )
    .await;
    let k = Kubectl::new(addr);
    let out = k
        .run(&["create", "configmap", "careful", "--from-literal=a=b"])
        .await;
    assert!(out.success(), "{out:?}");
    assert!(
        out.stderr.contains("Warning: be careful with careful"),
        "{}",
        out.stderr
    );
    let old = hooks.at("/v1beta1");
    assert_eq!(old.len(), 1);
    assert_eq!(old[0]["apiVersion"], "admission.k8s.io/v1beta1");
}

/// Goal: a mutating webhook's JSON patch is in the stored object (kubectl apply), and the
/// validating webhooks, called after it, see the patched object.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mutating_webhooks_patch_lands_before_validation() {
    let hooks = admission_hooks().await;
    let server = server_and_service(hooks.port).await;
    let addr = server.addr;
    configure(
        addr,
        MUTATING,
        "mutate",
        vec![webhook("mutate.hooks.test", &hooks, "/mutate", json!({}))],
    )
    .await;
    configure(
        addr,
        VALIDATING,
        "allow",
        vec![webhook("allow.hooks.test", &hooks, "/allow", json!({}))],
    )
    .await;
    let k = Kubectl::new(addr);
    let manifest = k.manifest(
        "cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\ndata:\n  k: v\n",
    );
    k.ok(&["apply", "-f", &manifest]).await;
    let (status, stored) = get_json(addr, &format!("{CONFIG_MAPS}/applied")).await;
    assert_eq!(status, 200);
    assert_eq!(
        stored["metadata"]["annotations"]["hooked"], "yes",
        "{stored}"
    );
    let validated = hooks.at("/allow");
    assert_eq!(validated.len(), 1);
    assert_eq!(
        validated[0]["request"]["object"]["metadata"]["annotations"]["hooked"],
        "yes"
    );
    assert!(
        stored.get("notAField").is_none(),
        "an undeclared field is dropped: {stored}"
    );
    let mutated = hooks.at("/mutate");
    assert!(
        mutated[0]["request"]["object"]["metadata"]
            .get("annotations")
            .is_none_or(|a| a.get("hooked").is_none())
    );
    // Updates are mutated too: removing the webhook's annotation gets it back.
    k.ok(&["annotate", "configmap", "applied", "hooked-"]).await;
    let (_, stored) = get_json(addr, &format!("{CONFIG_MAPS}/applied")).await;
    assert_eq!(
        stored["metadata"]["annotations"]["hooked"], "yes",
        "{stored}"
    );
    let mutated = hooks.at("/mutate");
    assert_eq!(mutated.last().unwrap()["request"]["operation"], "UPDATE");
}

/// Goal: with the webhook's endpoints refusing connections, `failurePolicy: Fail` refuses the
/// write with kube's 500 and `Ignore` lets it through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failure_policy_decides_when_the_webhook_is_down() {
    // A port nothing listens on.
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let hooks = admission_hooks().await;
    let server = server_and_service(port).await;
    let addr = server.addr;
    configure(
        addr,
        VALIDATING,
        "down",
        vec![
            webhook(
                "fail.hooks.test",
                &hooks,
                "/allow",
                json!({"objectSelector": {"matchLabels": {"policy": "fail"}}}),
            ),
            webhook(
                "ignore.hooks.test",
                &hooks,
                "/allow",
                json!({"failurePolicy": "Ignore",
            "objectSelector": {"matchLabels": {"policy": "ignore"}}}),
            ),
        ],
    )
    .await;
    let (status, refused, _) =
        create_config_map(addr, CONFIG_MAPS, "failing", json!({"policy": "fail"})).await;
    assert_eq!(status, 500, "{refused}");
    assert_eq!(refused["reason"], "InternalError");
    assert_eq!(
        refused["message"],
        format!(
            "Internal error occurred: failed calling webhook \"fail.hooks.test\": failed to call webhook: Post \"https://hooks.default.svc:443/allow?timeout=10s\": dial tcp 127.0.0.1:{port}: connect: connection refused"
        )
    );
    let (status, created, _) =
        create_config_map(addr, CONFIG_MAPS, "ignoring", json!({"policy": "ignore"})).await;
    assert_eq!(status, 201, "{created}");
    let metrics = common::metrics_text(addr).await;
    assert!(
        metrics.contains(r#"apiserver_admission_webhook_rejection_count_total{name="fail.hooks.test",type="validating",operation="CREATE",error_type="calling_webhook_error",rejection_code="0"} 1"#),
        "{metrics}"
    );
}

/// Goal: `namespaceSelector` and `objectSelector` decide which writes a webhook sees.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selectors_choose_the_writes_sent() {
    let hooks = admission_hooks().await;
    let server = server_and_service(hooks.port).await;
    let addr = server.addr;
    for (name, labels) in [("watched", json!({"hooked": "yes"})), ("quiet", json!({}))] {
        let (status, body) = send_json(addr, "POST", "/api/v1/namespaces",
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}})).await;
        assert_eq!(status, 201, "{body}");
    }
    configure(addr, VALIDATING, "selective", vec![
        webhook("ns.hooks.test", &hooks, "/deny", json!({"namespaceSelector": {"matchLabels": {"hooked": "yes"}}})),
        webhook("obj.hooks.test", &hooks, "/warn", json!({"objectSelector": {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["front"]}]}})),
        webhook("cond.hooks.test", &hooks, "/deny", json!({"objectSelector": {"matchLabels": {"cond": "yes"}},
            "matchConditions": [{"name": "not-skipped", "expression": "object.metadata.name != 'bad-skipped'"}]})),
    ]).await;
    let path = |ns: &str| format!("/api/v1/namespaces/{ns}/configmaps");
    let (status, refused, _) = create_config_map(addr, &path("watched"), "bad-a", json!({})).await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(
        refused["message"],
        "admission webhook \"ns.hooks.test\" denied the request: no names starting with bad"
    );
    let (status, _, warnings) = create_config_map(addr, &path("quiet"), "bad-a", json!({})).await;
    assert_eq!(status, 201, "another namespace's labels: not sent");
    assert!(warnings.is_empty(), "{warnings:?}");
    let (status, _, warnings) =
        create_config_map(addr, &path("quiet"), "front", json!({"tier": "front"})).await;
    assert_eq!(status, 201);
    assert_eq!(warnings, [r#"299 - "be careful with front""#]);
    // Match conditions: false skips the webhook, true calls it.
    let (status, _, _) =
        create_config_map(addr, &path("quiet"), "bad-skipped", json!({"cond": "yes"})).await;
    assert_eq!(status, 201);
    let (status, refused, _) =
        create_config_map(addr, &path("quiet"), "bad-checked", json!({"cond": "yes"})).await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(
        refused["message"],
        "admission webhook \"cond.hooks.test\" denied the request: no names starting with bad"
    );
}

/// Goal: a dry run is sent (`dryRun: true`) to a webhook without side effects, and refused
/// with kube's 400 without calling a webhook that has some (such a configuration can only be
/// stored from before v1's validation: put in the store directly here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_runs_respect_side_effects() {
    let hooks = admission_hooks().await;
    let server = server_and_service(hooks.port).await;
    let addr = server.addr;
    configure(
        addr,
        VALIDATING,
        "pure",
        vec![webhook("pure.hooks.test", &hooks, "/allow", json!({}))],
    )
    .await;
    let dry = format!("{CONFIG_MAPS}?dryRun=All");
    let (status, body, _) = create_config_map(addr, &dry, "dry", json!({})).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(hooks.at("/allow")[0]["request"]["dryRun"], true);
    let legacy = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "legacy", "uid": "1", "creationTimestamp": "2020-01-01T00:00:00Z"},
        "webhooks": [webhook("effects.hooks.test", &hooks, "/warn",
            json!({"sideEffects": "Some", "failurePolicy": "Fail", "matchPolicy": "Equivalent",
                "namespaceSelector": {}, "objectSelector": {}, "timeoutSeconds": 10}))]});
    watchkeeper_store::Store::put(
        server.store().unwrap(),
        "/registry/validatingwebhookconfigurations/legacy",
        legacy.to_string(),
    )
    .await
    .unwrap();
    // A consistent read: the configurations' cache has the put.
    let (status, _) = get_json(addr, &format!("{VALIDATING}/legacy")).await;
    assert_eq!(status, 200);
    let (status, refused, _) = create_config_map(addr, &dry, "dry", json!({})).await;
    assert_eq!(status, 400, "{refused}");
    assert_eq!(
        refused["message"],
        "admission webhook \"effects.hooks.test\" does not support dry run"
    );
    assert!(hooks.at("/warn").is_empty(), "not called");
    // Not a dry run: called.
    let (status, _, warnings) = create_config_map(addr, CONFIG_MAPS, "wet", json!({})).await;
    assert_eq!(status, 201);
    assert_eq!(warnings, [r#"299 - "be careful with wet""#]);
}

/// Goal: a webhook that never answers fails its call at `timeoutSeconds` with kube's error
/// (`Fail`), and the write is not stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_that_never_answers_times_out_in_kubes_words() {
    let hooks = admission_hooks().await;
    let server = server_and_service(hooks.port).await;
    let addr = server.addr;
    configure(
        addr,
        MUTATING,
        "hang",
        vec![webhook(
            "hang.hooks.test",
            &hooks,
            "/hang",
            json!({"timeoutSeconds": 1}),
        )],
    )
    .await;
    let (status, refused, _) = create_config_map(addr, CONFIG_MAPS, "waiting", json!({})).await;
    assert_eq!(status, 500, "{refused}");
    assert_eq!(
        refused["message"],
        "Internal error occurred: failed calling webhook \"hang.hooks.test\": failed to call webhook: Post \"https://hooks.default.svc:443/hang?timeout=1s\": context deadline exceeded"
    );
    assert_eq!(hooks.at("/hang").len(), 1);
    let (status, _) = get_json(addr, &format!("{CONFIG_MAPS}/waiting")).await;
    assert_eq!(status, 404);
}

/// Goal: webhook configurations are validated with kube's 422, and are never sent to
/// webhooks themselves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configurations_are_validated_and_exempt() {
    let hooks = admission_hooks().await;
    let server = server_and_service(hooks.port).await;
    let addr = server.addr;
    let every = json!({"rules": [{"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"]}]});
    configure(
        addr,
        VALIDATING,
        "everything",
        vec![webhook("all.hooks.test", &hooks, "/deny", every)],
    )
    .await;
    let (status, refused) = send_json(addr, "POST", VALIDATING,
        &json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "bad-config"},
            "webhooks": [{"name": "x", "clientConfig": {"url": "http://h"}, "admissionReviewVersions": ["v1"]}]})).await;
    assert_eq!(status, 422, "{refused}");
    assert_eq!(
        refused["message"],
        "ValidatingWebhookConfiguration.admissionregistration.k8s.io \"bad-config\" is invalid: [webhooks[0].name: Invalid value: \"x\": should be a domain with at least three segments separated by dots, webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun, webhooks[0].clientConfig.url: Invalid value: \"http\": 'https' is the only allowed URL scheme; desired format: https://host[/path]]"
    );
    assert!(
        hooks.at("/deny").is_empty(),
        "configuration writes are not sent: {:?}",
        hooks.at("/deny")
    );
    // The configuration applies to everything else.
    let (status, _, _) = create_config_map(addr, CONFIG_MAPS, "bad-c", json!({})).await;
    assert_eq!(status, 403);
}

/// Goal: a mutating webhook with `reinvocationPolicy: IfNeeded` is called again when a later
/// webhook changed the object, and sees the change; one with `Never` is called once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn if_needed_webhooks_are_reinvoked_after_a_later_change() {
    let hooks = admission_hooks().await;
    let server = server_and_service(hooks.port).await;
    let addr = server.addr;
    // Configurations run by name: "a-first" before "b-patches".
    configure(
        addr,
        MUTATING,
        "a-first",
        vec![
            webhook(
                "again.hooks.test",
                &hooks,
                "/allow",
                json!({"reinvocationPolicy": "IfNeeded"}),
            ),
            webhook(
                "once.hooks.test",
                &hooks,
                "/warn",
                json!({"reinvocationPolicy": "Never"}),
            ),
        ],
    )
    .await;
    configure(
        addr,
        MUTATING,
        "b-patches",
        vec![webhook("patch.hooks.test", &hooks, "/mutate", json!({}))],
    )
    .await;
    let (status, created, _) = create_config_map(addr, CONFIG_MAPS, "twice", json!({})).await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["metadata"]["annotations"]["hooked"], "yes");
    let again = hooks.at("/allow");
    assert_eq!(again.len(), 2, "called, then reinvoked: {again:?}");
    assert!(
        again[0]["request"]["object"]["metadata"]
            .get("annotations")
            .is_none()
    );
    assert_eq!(
        again[1]["request"]["object"]["metadata"]["annotations"]["hooked"],
        "yes"
    );
    assert_eq!(hooks.at("/warn").len(), 1, "Never: once");
    assert_eq!(
        hooks.at("/mutate").len(),
        1,
        "the last changer is not reinvoked"
    );
}

/// Goal: a DELETE is sent to validating webhooks with the object as `oldObject` (kube's
/// DELETE review) and their refusal keeps the object; with `--disable-admission-plugins
/// ValidatingAdmissionWebhook` nothing is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletes_are_validated_and_the_plugin_can_be_disabled() {
    let hooks = admission_hooks().await;
    let server = server_and_service(hooks.port).await;
    let addr = server.addr;
    let (status, _, _) = create_config_map(addr, CONFIG_MAPS, "bad-kept", json!({})).await;
    assert_eq!(status, 201);
    let deletes = json!({"rules": [{"operations": ["DELETE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]});
    configure(
        addr,
        VALIDATING,
        "deletes",
        vec![webhook(
            "delete.hooks.test",
            &hooks,
            "/deny",
            deletes.clone(),
        )],
    )
    .await;
    let (status, refused) = send_json(
        addr,
        "DELETE",
        &format!("{CONFIG_MAPS}/bad-kept"),
        &json!({}),
    )
    .await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(
        refused["message"],
        "admission webhook \"delete.hooks.test\" denied the request: no names starting with bad"
    );
    let (status, _) = get_json(addr, &format!("{CONFIG_MAPS}/bad-kept")).await;
    assert_eq!(status, 200, "kept");
    let review = &hooks.at("/deny")[0]["request"];
    assert_eq!(review["operation"], "DELETE");
    assert_eq!(review["object"], Value::Null);
    assert_eq!(review["oldObject"]["metadata"]["name"], "bad-kept");
    assert_eq!(review["options"]["kind"], "DeleteOptions");

    let plain = server_with(ServeArgs {
        disable_admission_plugins: Some(vec!["ValidatingAdmissionWebhook".to_owned()]),
        ..ServeArgs::default()
    })
    .await;
    let (status, _, _) = create_config_map(plain.addr, CONFIG_MAPS, "bad-gone", json!({})).await;
    assert_eq!(status, 201);
    configure(
        plain.addr,
        VALIDATING,
        "deletes",
        vec![webhook("delete.hooks.test", &hooks, "/deny", deletes)],
    )
    .await;
    let (status, body) = send_json(
        plain.addr,
        "DELETE",
        &format!("{CONFIG_MAPS}/bad-gone"),
        &json!({}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        hooks.at("/deny").len(),
        1,
        "the disabled plugin sent nothing"
    );
}

/// Goal: a webhook's `auditAnnotations` are in the request's audit event, under kube's
/// `<webhook>/<key>`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhooks_audit_annotations_reach_the_audit_log() {
    let hooks = admission_hooks().await;
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.yaml");
    std::fs::write(
        &policy,
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n  resources: [{group: \"\", resources: [\"configmaps\"]}]\n",
    )
    .unwrap();
    let log = dir.path().join("audit.log");
    let server = server_and_service_with(
        hooks.port,
        ServeArgs {
            audit_policy_file: Some(policy),
            audit_log_path: Some(log.clone()),
            ..ServeArgs::default()
        },
    )
    .await;
    let addr = server.addr;
    configure(
        addr,
        VALIDATING,
        "warn",
        vec![webhook("warn.hooks.test", &hooks, "/warn", json!({}))],
    )
    .await;
    let (status, body) = send_json(
        addr,
        "POST",
        CONFIG_MAPS,
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "audited"}}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let complete = || {
        events_in(&log).into_iter().find(|event| {
            event["stage"] == "ResponseComplete"
                && event["verb"] == "create"
                && event["objectRef"]["name"] == "audited"
        })
    };
    until(|| complete().is_some()).await;
    let event = complete().unwrap();
    assert_eq!(
        event["annotations"]["warn.hooks.test/checked"], "audited",
        "{event}"
    );
}

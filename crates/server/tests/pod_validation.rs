//! Pod spec validation over real HTTP (memory store): the bad pods and templates users meet
//! are refused with kube's 422 Status (code, reason, message, causes), the valid ones kept.

mod common;

use common::*;
use serde_json::{Value, json};

fn pod(name: &str, container: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"containers": [container]}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_pods_and_templates_get_kubes_422() {
    let server = server().await;
    let addr = server.addr;
    let pods = "/api/v1/namespaces/default/pods";
    let bad = pod(
        "p",
        json!({"name": "c", "image": "nginx", "imagePullPolicy": "Sometimes",
            "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}}),
    );
    let (status, body) = send_json(addr, "POST", pods, &bad).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["reason"], "Invalid");
    assert_eq!(
        body["message"],
        "Pod \"p\" is invalid: [spec.containers[0].imagePullPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"IfNotPresent\", \"Never\", spec.containers[0].resources.requests: Invalid value: \"2\": must be less than or equal to cpu limit of 1]"
    );
    assert_eq!(
        body["details"]["causes"][1],
        json!({"reason": "FieldValueInvalid",
            "message": "Invalid value: \"2\": must be less than or equal to cpu limit of 1",
            "field": "spec.containers[0].resources.requests"})
    );

    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"app": "d"}},
        "template": {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [
            {"name": "c", "image": "nginx", "volumeMounts": [{"name": "v", "mountPath": "/v"}]}]}}}});
    let (status, body) = send_json(
        addr,
        "POST",
        "/apis/apps/v1/namespaces/default/deployments",
        &deployment,
    )
    .await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(
        body["message"],
        "Deployment.apps \"d\" is invalid: spec.template.spec.containers[0].volumeMounts[0].name: Not found: \"v\""
    );

    let good = pod(
        "ok",
        json!({"name": "c", "image": "nginx", "env": [{"name": "A", "value": "1"}],
            "livenessProbe": {"httpGet": {"path": "/", "port": 80}},
            "resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "1"}}}),
    );
    let (status, body) = send_json(addr, "POST", pods, &good).await;
    assert_eq!(status, 201, "{body}");
}

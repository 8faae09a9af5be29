//! Goal: `pods/{name}/resize` served as kube-apiserver 1.33 serves it (in-place pod vertical
//! scaling, beta and on by default): GET, PUT and every patch type of a pod, only the
//! containers' `resources` (and `resizePolicy`) taken from the body, kube's 422s in its
//! words, the main endpoint's refusal of the same change, RBAC on `pods/resize` apart from
//! `pods`, the managed fields' `subresource`, one MODIFIED event per resize, LimitRanger and
//! ResourceQuota on the resize, discovery, and the real kubectl's `patch --subresource resize`.

use crate::common;
use crate::kubectl_support;

use std::path::Path;

use serde_json::{Value, json};
use watchkeeper::config::ServeArgs;

use common::{WatchReader, get_json, patch, request_with_headers, send_json, server, server_with};
use kubectl_support::Kubectl;

const PODS: &str = "/api/v1/namespaces/default/pods";

fn pod(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "labels": {"app": "a"}},
           "spec": {"containers": [{"name": "c", "image": "busybox:1.36",
               "resources": {"requests": {"cpu": "100m", "memory": "64Mi"},
                             "limits": {"cpu": "1", "memory": "128Mi"}}}]}})
}

async fn create_pod(addr: std::net::SocketAddr, namespace_pods: &str, name: &str) -> Value {
    let (status, body) = send_json(addr, "POST", namespace_pods, &pod(name)).await;
    assert_eq!(status, 201, "{body}");
    body
}

fn resources(pod: &Value) -> &Value {
    &pod["spec"]["containers"][0]["resources"]
}

/// GET answers the pod; PUT and the merge, JSON and strategic merge patches change the
/// containers' cpu and memory; what else the body says is dropped; the generation follows the
/// spec; the managed fields name the subresource.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resizes_through_put_and_every_patch() {
    let server = server().await;
    let addr = server.addr;
    let created = create_pod(addr, PODS, "p").await;
    assert_eq!(created["metadata"]["generation"], 1);
    let path = format!("{PODS}/p/resize");
    let (status, got) = get_json(addr, &path).await;
    assert_eq!(status, 200, "{got}");
    assert_eq!(got["kind"], "Pod");
    assert_eq!(got["metadata"]["uid"], created["metadata"]["uid"]);

    // PUT: the cpu request taken; the label, image and status of the body dropped.
    let mut body = got.clone();
    body["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!("200m");
    body["spec"]["containers"][0]["image"] = json!("nginx");
    body["metadata"]["labels"] = json!({"app": "changed"});
    body["status"]["phase"] = json!("Failed");
    let (status, put) = send_json(addr, "PUT", &path, &body).await;
    assert_eq!(status, 200, "{put}");
    assert_eq!(resources(&put)["requests"]["cpu"], "200m");
    assert_eq!(put["spec"]["containers"][0]["image"], "busybox:1.36");
    assert_eq!(put["metadata"]["labels"], json!({"app": "a"}));
    assert_eq!(put["status"]["phase"], "Pending");
    assert_eq!(put["metadata"]["generation"], 2);
    let resize_entry = put["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|entry| entry["subresource"] == "resize")
        .cloned()
        .unwrap_or_else(|| panic!("no resize manager: {put}"));
    assert_eq!(resize_entry["operation"], "Update");
    assert_eq!(
        resize_entry["fieldsV1"],
        json!({"f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {
            "f:resources": {"f:requests": {"f:cpu": {}}}}}}})
    );

    // Merge patch: the cpu limit (a merge patch replaces the list whole).
    let mut containers = put["spec"]["containers"].clone();
    containers[0]["resources"]["limits"]["cpu"] = json!("2");
    let merge = json!({"spec": {"containers": containers}}).to_string();
    let (status, merged) = patch(addr, &path, "application/merge-patch+json", &merge).await;
    assert_eq!(status, 200, "{merged}");
    assert_eq!(resources(&merged)["limits"]["cpu"], "2");
    assert_eq!(merged["metadata"]["generation"], 3);

    // JSON patch: the memory request.
    let json_patch = r#"[{"op": "replace", "path": "/spec/containers/0/resources/requests/memory", "value": "96Mi"}]"#;
    let (status, patched) = patch(addr, &path, "application/json-patch+json", json_patch).await;
    assert_eq!(status, 200, "{patched}");
    assert_eq!(resources(&patched)["requests"]["memory"], "96Mi");

    // Strategic merge patch: the container by name, with a label that is dropped.
    let strategic = r#"{"metadata": {"labels": {"x": "y"}}, "spec": {"containers": [{"name": "c", "resources": {"limits": {"memory": "256Mi"}}}]}}"#;
    let (status, patched) = patch(
        addr,
        &path,
        "application/strategic-merge-patch+json",
        strategic,
    )
    .await;
    assert_eq!(status, 200, "{patched}");
    assert_eq!(
        resources(&patched),
        &json!({"requests": {"cpu": "200m", "memory": "96Mi"},
                "limits": {"cpu": "2", "memory": "256Mi"}})
    );
    assert_eq!(patched["metadata"]["labels"], json!({"app": "a"}));
    assert_eq!(patched["metadata"]["generation"], 5);

    // A patch that changes nothing the subresource owns changes nothing.
    let (status, same) = patch(
        addr,
        &path,
        "application/merge-patch+json",
        r#"{"metadata": {"annotations": {"a": "b"}}, "spec": {"activeDeadlineSeconds": 5}}"#,
    )
    .await;
    assert_eq!(status, 200, "{same}");
    assert_eq!(
        same["metadata"]["resourceVersion"],
        patched["metadata"]["resourceVersion"]
    );
    assert!(same["metadata"].get("annotations").is_none(), "{same}");
}

/// Server-side apply through the subresource: the applier owns the fields it sent, under
/// the `resize` subresource.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_apply_records_the_subresource() {
    let server = server().await;
    let addr = server.addr;
    create_pod(addr, PODS, "p").await;
    let path = format!("{PODS}/p/resize?fieldManager=resizer&force=true");
    let config = r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "300m"}}}]}}"#;
    let (status, applied) = patch(addr, &path, "application/apply-patch+yaml", config).await;
    assert_eq!(status, 200, "{applied}");
    assert_eq!(resources(&applied)["requests"]["cpu"], "300m");
    let entry = applied["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|entry| entry["manager"] == "resizer")
        .cloned()
        .unwrap_or_else(|| panic!("no resizer: {applied}"));
    assert_eq!(entry["operation"], "Apply");
    assert_eq!(entry["subresource"], "resize");
}

/// kube's 422s, each its exact message and causes; the main endpoint refuses the same change
/// with its own words.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_in_kubes_words() {
    let server = server().await;
    let addr = server.addr;
    create_pod(addr, PODS, "p").await;
    let path = format!("{PODS}/p/resize");
    let strategic = |resources: Value| {
        json!({"spec": {"containers": [{"name": "c", "resources": resources}]}}).to_string()
    };
    let refused = |body: Value| body;
    let smp = "application/strategic-merge-patch+json";

    // Another QoS class (Burstable to Guaranteed).
    let body = strategic(json!({"requests": {"cpu": "1", "memory": "128Mi"}}));
    let (status, answer) = patch(addr, &path, smp, &body).await;
    assert_eq!(status, 422, "{answer}");
    assert_eq!(
        refused(answer.clone())["message"],
        "Pod \"p\" is invalid: spec: Invalid value: \"Burstable\": Pod QOS Class may not change as a result of resizing"
    );
    assert_eq!(
        answer["details"]["causes"],
        json!([{"reason": "FieldValueInvalid",
                "message": "Invalid value: \"Burstable\": Pod QOS Class may not change as a result of resizing",
                "field": "spec"}])
    );

    // A memory limit lowered under the default (NotRequired) resize policy.
    let body = strategic(json!({"limits": {"memory": "100Mi"}}));
    let (status, answer) = patch(addr, &path, smp, &body).await;
    assert_eq!(status, 422, "{answer}");
    assert_eq!(
        answer["message"],
        "Pod \"p\" is invalid: spec.containers[0].resources.limits[memory]: Forbidden: memory limits cannot be decreased unless resizePolicy is RestartContainer"
    );

    // A limit removed (a JSON patch can; a request removed is the limit again, kube's
    // decoding default, before the strategy sees it).
    let remove = r#"[{"op": "remove", "path": "/spec/containers/0/resources/limits/cpu"}]"#;
    let (status, answer) = patch(addr, &path, "application/json-patch+json", remove).await;
    assert_eq!(status, 422, "{answer}");
    assert_eq!(
        answer["details"]["causes"],
        json!([{"reason": "FieldValueForbidden",
                "message": "Forbidden: resource limits cannot be removed",
                "field": "spec.containers[0].resources.limits"}])
    );

    // Another resource than cpu and memory.
    let body = strategic(json!({"limits": {"ephemeral-storage": "1Gi"}}));
    let (status, answer) = patch(addr, &path, smp, &body).await;
    assert_eq!(status, 422, "{answer}");
    assert_eq!(
        answer["message"],
        "Pod \"p\" is invalid: spec: Forbidden: only cpu and memory resources are mutable"
    );

    // A container added.
    let added = r#"{"spec": {"containers": [{"name": "d", "image": "busybox"}]}}"#;
    let (status, answer) = patch(addr, &path, smp, added).await;
    assert_eq!(status, 422, "{answer}");
    assert_eq!(
        answer["message"],
        "Pod \"p\" is invalid: spec.containers: Forbidden: containers may not be added or removed on resize"
    );

    // A request above its limit: the pod's own validation.
    let body = strategic(json!({"requests": {"cpu": "2"}}));
    let (status, answer) = patch(addr, &path, smp, &body).await;
    assert_eq!(status, 422, "{answer}");
    assert_eq!(
        answer["message"],
        "Pod \"p\" is invalid: spec.containers[0].resources.requests: Invalid value: \"2\": must be less than or equal to cpu limit of 1"
    );

    // The main endpoint: the same change is an update of a field it does not allow.
    let body = strategic(json!({"requests": {"cpu": "200m"}}));
    let (status, answer) = patch(addr, &format!("{PODS}/p"), smp, &body).await;
    assert_eq!(status, 422, "{answer}");
    let message = answer["message"].as_str().unwrap();
    assert!(
        message.starts_with("Pod \"p\" is invalid: spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)\n"),
        "{message}"
    );

    // Nothing was written.
    let (_, stored) = get_json(addr, &format!("{PODS}/p")).await;
    assert_eq!(stored["metadata"]["generation"], 1);
    assert_eq!(
        resources(&stored),
        &pod("p")["spec"]["containers"][0]["resources"]
    );
}

/// A static pod is refused whole, kube's message with the empty path before `Forbidden`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_static_pod_is_not_resized() {
    let server = server().await;
    let addr = server.addr;
    let mut mirror = pod("m");
    mirror["metadata"]["annotations"] = json!({"kubernetes.io/config.mirror": "x"});
    mirror["spec"]["nodeName"] = json!("n1");
    let (status, body) = send_json(addr, "POST", PODS, &mirror).await;
    assert_eq!(status, 201, "{body}");
    let patch_body =
        r#"{"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "200m"}}}]}}"#;
    let (status, answer) = patch(
        addr,
        &format!("{PODS}/m/resize"),
        "application/strategic-merge-patch+json",
        patch_body,
    )
    .await;
    assert_eq!(status, 422, "{answer}");
    assert_eq!(
        answer["message"],
        "Pod \"m\" is invalid: : Forbidden: static pods cannot be resized"
    );
    assert_eq!(
        answer["details"]["causes"],
        json!([{"reason": "FieldValueForbidden", "message": "Forbidden: static pods cannot be resized"}])
    );
}

/// A resize is one MODIFIED event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resize_is_one_modified_event() {
    let server = server().await;
    let addr = server.addr;
    let created = create_pod(addr, PODS, "p").await;
    let rv = created["metadata"]["resourceVersion"].as_str().unwrap();
    let mut watch = WatchReader::open(
        addr,
        &format!("{PODS}?watch=true&resourceVersion={rv}"),
        None,
    )
    .await;
    let body =
        r#"{"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "250m"}}}]}}"#;
    let (status, resized) = patch(
        addr,
        &format!("{PODS}/p/resize"),
        "application/strategic-merge-patch+json",
        body,
    )
    .await;
    assert_eq!(status, 200, "{resized}");
    // A later write of the main endpoint, so the event after the resize's is known.
    let (status, labelled) = patch(
        addr,
        &format!("{PODS}/p"),
        "application/merge-patch+json",
        r#"{"metadata": {"labels": {"next": "1"}}}"#,
    )
    .await;
    assert_eq!(status, 200, "{labelled}");
    let first = watch.next().await.unwrap();
    assert_eq!(first["type"], "MODIFIED");
    assert_eq!(resources(&first["object"])["requests"]["cpu"], "250m");
    assert_eq!(
        first["object"]["metadata"]["resourceVersion"],
        resized["metadata"]["resourceVersion"]
    );
    let second = watch.next().await.unwrap();
    assert_eq!(second["type"], "MODIFIED");
    assert_eq!(
        second["object"]["metadata"]["resourceVersion"],
        labelled["metadata"]["resourceVersion"]
    );
}

/// LimitRanger checks a resize against the namespace's LimitRanges, ResourceQuota charges
/// what it adds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limit_ranges_and_quotas_judge_a_resize() {
    let server = server().await;
    let addr = server.addr;
    create_pod(addr, PODS, "p").await;
    let range = json!({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "lr"},
        "spec": {"limits": [{"type": "Container", "max": {"cpu": "2"}}]}});
    let (status, body) = send_json(
        addr,
        "POST",
        "/api/v1/namespaces/default/limitranges",
        &range,
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let quota = json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q"},
        "spec": {"hard": {"requests.cpu": "1"}}});
    let (status, body) = send_json(
        addr,
        "POST",
        "/api/v1/namespaces/default/resourcequotas",
        &quota,
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let path = format!("{PODS}/p/resize");
    let smp = "application/strategic-merge-patch+json";
    let over_range =
        r#"{"spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "3"}}}]}}"#;
    let (status, answer) = patch(addr, &path, smp, over_range).await;
    assert_eq!(status, 403, "{answer}");
    assert_eq!(answer["reason"], "Forbidden");
    assert_eq!(
        answer["message"],
        "pods \"p\" is forbidden: maximum cpu usage per Container is 2, but limit is 3"
    );
    let over_quota = r#"{"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1500m"}, "limits": {"cpu": "2"}}}]}}"#;
    let (status, answer) = patch(addr, &path, smp, over_quota).await;
    assert_eq!(status, 403, "{answer}");
    assert_eq!(
        answer["message"],
        "pods \"p\" is forbidden: exceeded quota: q, requested: requests.cpu=1400m, used: requests.cpu=100m, limited: requests.cpu=1"
    );
    let within =
        r#"{"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "500m"}}}]}}"#;
    let (status, answer) = patch(addr, &path, smp, within).await;
    assert_eq!(status, 200, "{answer}");
}

const TOKENS: &str = "admin-token,admin,1,\"system:masters\"
alice-token,alice,2
bob-token,bob,3
";

fn write_file(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

async fn call(
    addr: std::net::SocketAddr,
    who: &str,
    method: &str,
    path: &str,
    content_type: &str,
    body: &str,
) -> (u16, Value) {
    let bearer = format!("Bearer {who}-token");
    let headers = [
        ("Authorization", bearer.as_str()),
        ("Content-Type", content_type),
    ];
    let (status, text) = request_with_headers(addr, method, path, &headers, body).await;
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// RBAC: `pods/resize` is its own resource: `patch pods` does not allow it, and it does not
/// allow `patch pods`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_tells_pods_from_pods_resize() {
    let dir = tempfile::tempdir().unwrap();
    let server = server_with(ServeArgs {
        token_auth_file: Some(write_file(dir.path(), "tokens.csv", TOKENS)),
        authorization_mode: Some(vec!["RBAC".to_owned()]),
        ..ServeArgs::default()
    })
    .await;
    let addr = server.addr;
    let json_type = "application/json";
    let admin = |method: &'static str, path: &'static str, body: Value| async move {
        let (status, answer) =
            call(addr, "admin", method, path, json_type, &body.to_string()).await;
        assert_eq!(status, 201, "{method} {path}: {answer}");
    };
    admin(
        "POST",
        "/api/v1/namespaces",
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}),
    )
    .await;
    let rbac = "/apis/rbac.authorization.k8s.io/v1/namespaces/team";
    let roles: &'static str = Box::leak(format!("{rbac}/roles").into_boxed_str());
    let bindings: &'static str = Box::leak(format!("{rbac}/rolebindings").into_boxed_str());
    for (user, resource) in [("alice", "pods"), ("bob", "pods/resize")] {
        admin("POST", roles, json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": user},
            "rules": [{"apiGroups": [""], "resources": [resource], "verbs": ["get", "patch", "update"]}]})).await;
        admin(
            "POST",
            bindings,
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": user},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": user},
            "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": user}]}),
        )
        .await;
    }
    let pods = "/api/v1/namespaces/team/pods";
    let (status, body) = call(
        addr,
        "admin",
        "POST",
        pods,
        json_type,
        &pod("p").to_string(),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let smp = "application/strategic-merge-patch+json";
    let resize =
        r#"{"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "200m"}}}]}}"#;
    let label = r#"{"metadata": {"labels": {"b": "c"}}}"#;
    let resize_path = format!("{pods}/p/resize");
    let pod_path = format!("{pods}/p");

    let (status, answer) = call(addr, "alice", "PATCH", &resize_path, smp, resize).await;
    assert_eq!(status, 403, "{answer}");
    assert_eq!(
        answer["message"],
        "pods \"p\" is forbidden: User \"alice\" cannot patch resource \"pods/resize\" in API group \"\" in the namespace \"team\""
    );
    let (status, answer) = call(addr, "alice", "PATCH", &pod_path, smp, label).await;
    assert_eq!(status, 200, "{answer}");

    let (status, answer) = call(addr, "bob", "PATCH", &pod_path, smp, label).await;
    assert_eq!(status, 403, "{answer}");
    assert_eq!(
        answer["message"],
        "pods \"p\" is forbidden: User \"bob\" cannot patch resource \"pods\" in API group \"\" in the namespace \"team\""
    );
    let (status, answer) = call(addr, "bob", "PATCH", &resize_path, smp, resize).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(resources(&answer)["requests"]["cpu"], "200m");
    let (status, answer) = call(addr, "bob", "GET", &resize_path, json_type, "").await;
    assert_eq!(status, 200, "{answer}");
}

/// Discovery lists `pods/resize` as kube 1.33 does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_lists_pods_resize() {
    let server = server().await;
    let (status, list) = get_json(server.addr, "/api/v1").await;
    assert_eq!(status, 200);
    let entry = list["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "pods/resize")
        .cloned()
        .unwrap_or_else(|| panic!("no pods/resize: {list}"));
    assert_eq!(
        entry,
        json!({"name": "pods/resize", "singularName": "", "namespaced": true, "kind": "Pod",
               "verbs": ["get", "patch", "update"]})
    );
}

/// The real kubectl: `patch pod P --subresource resize`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_patch_subresource_resize() {
    let server = server_with(ServeArgs::default()).await;
    let k = Kubectl::new(server.addr);
    k.eventually_ok(&["get", "serviceaccount", "default"]).await;
    create_pod(server.addr, PODS, "p").await;
    let patch_body =
        r#"{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"200m"}}}]}}"#;
    let out = k
        .ok(&[
            "patch",
            "pod",
            "p",
            "--subresource",
            "resize",
            "--patch",
            patch_body,
        ])
        .await;
    assert_eq!(out.trim(), "pod/p patched");
    let resized = k
        .json(&["get", "pod", "p", "--subresource", "resize", "-o", "json"])
        .await;
    assert_eq!(resources(&resized)["requests"]["cpu"], "200m");
    let refused = k
        .fails(&[
            "patch",
            "pod",
            "p",
            "--subresource",
            "resize",
            "--patch",
            r#"{"spec":{"containers":[{"name":"c","resources":{"limits":{"memory":"100Mi"}}}]}}"#,
        ])
        .await;
    assert!(
        refused
            .stderr
            .contains("memory limits cannot be decreased unless resizePolicy is RestartContainer"),
        "{}",
        refused.stderr
    );
}

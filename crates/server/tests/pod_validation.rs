//! Pod spec validation over real HTTP (memory store): the bad pods and templates users meet
//! are refused with kube's 422 Status (code, reason, message, causes), the valid ones kept.

use crate::common;

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

const PODS: &str = "/api/v1/namespaces/default/pods";

/// A pod `name` of one container `c` (with `container`'s fields) and `spec`'s fields.
fn pod_of(name: &str, spec: Value, container: Value) -> Value {
    let mut c = json!({"name": "c", "image": "nginx"});
    for (k, v) in container.as_object().unwrap() {
        c[k] = v.clone();
    }
    let mut pod = pod(name, c);
    for (k, v) in spec.as_object().unwrap() {
        pod["spec"][k] = v.clone();
    }
    pod
}

/// POSTs `body` to `path`, expects kube's 422 Invalid and returns its causes as
/// `field: message`.
async fn refused(addr: std::net::SocketAddr, path: &str, body: &Value) -> Vec<String> {
    let (status, answer) = send_json(addr, "POST", path, body).await;
    assert_eq!(status, 422, "{answer}");
    assert_eq!(answer["reason"], "Invalid", "{answer}");
    answer["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            format!(
                "{}: {}",
                c["field"].as_str().unwrap(),
                c["message"].as_str().unwrap()
            )
        })
        .collect()
}

/// POSTs `body` to `path`, expects 201 Created and returns the stored object.
async fn created(addr: std::net::SocketAddr, path: &str, body: &Value) -> Value {
    let (status, answer) = send_json(addr, "POST", path, body).await;
    assert_eq!(status, 201, "{answer}");
    answer
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resize_policies_and_overhead_over_http() {
    let server = server().await;
    let bad = pod_of(
        "r",
        json!({"restartPolicy": "Never", "overhead": {"cpu": "-1"}}),
        json!({"resizePolicy": [{"resourceName": "cpu", "restartPolicy": "RestartContainer"},
            {"resourceName": "cpu", "restartPolicy": "NotRequired"}]}),
    );
    assert_eq!(
        refused(server.addr, PODS, &bad).await,
        [
            "spec.containers[0].resizePolicy: Invalid value: \"RestartContainer\": must be 'NotRequired' when `restartPolicy` is 'Never'",
            "spec.containers[0].resizePolicy[1]: Duplicate value: \"cpu\"",
            "spec.overhead.limits[cpu]: Invalid value: \"-1\": must be greater than or equal to 0",
        ]
    );
    let good = pod_of(
        "r",
        json!({"overhead": {"cpu": "250m"}}),
        json!({"resizePolicy": [{"resourceName": "memory", "restartPolicy": "RestartContainer"}]}),
    );
    let stored = created(server.addr, PODS, &good).await;
    assert_eq!(stored["spec"]["overhead"], json!({"cpu": "250m"}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fields_of_gates_off_in_133_are_dropped_over_http() {
    let server = server().await;
    let body = pod_of(
        "claims",
        json!({"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}],
            "resources": {"limits": {"cpu": "1"}}}),
        json!({"resources": {"claims": [{"name": "gpu"}], "limits": {"cpu": "1"}}}),
    );
    let stored = created(server.addr, PODS, &body).await;
    let (status, read) = get_json(server.addr, &format!("{PODS}/claims")).await;
    assert_eq!(status, 200);
    assert_eq!(read, stored);
    assert!(read["spec"].get("resourceClaims").is_none(), "{read}");
    assert!(read["spec"].get("resources").is_none(), "{read}");
    assert_eq!(
        read["spec"]["containers"][0]["resources"],
        json!({"limits": {"cpu": "1"}, "requests": {"cpu": "1"}})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn windows_linux_and_user_namespace_rules_over_http() {
    let server = server().await;
    let host_process = pod_of(
        "w",
        json!({"os": {"name": "windows"}, "securityContext": {"runAsUser": 1,
            "windowsOptions": {"hostProcess": true}}}),
        json!({"securityContext": {"windowsOptions": {"runAsUserName": "a\\b\\c"}}}),
    );
    assert_eq!(
        refused(server.addr, PODS, &host_process).await,
        [
            "spec.containers[0].securityContext.windowsOptions.runAsUserName: Invalid value: \"a\\\\b\\\\c\": runAsUserName cannot contain more than one backslash",
            "spec.hostNetwork: Invalid value: false: hostNetwork must be true if pod contains any hostProcess containers",
            "spec.securityContext.runAsUser: Forbidden: cannot be set for a windows pod",
        ]
    );
    let linux = pod_of(
        "l",
        json!({"os": {"name": "linux"}, "hostUsers": false, "hostPID": true}),
        json!({"securityContext": {"windowsOptions": {}}}),
    );
    assert_eq!(
        refused(server.addr, PODS, &linux).await,
        [
            "spec.HostPID: Forbidden: when `pod.Spec.HostUsers` is false",
            "spec.containers[0].securityContext.windowsOptions: Forbidden: windows options cannot be set for a linux pod",
        ]
    );
    let windows = pod_of(
        "w",
        json!({"os": {"name": "windows"}, "hostNetwork": true,
            "securityContext": {"windowsOptions": {"hostProcess": true,
                "runAsUserName": "NT AUTHORITY\\SYSTEM"}}}),
        json!({}),
    );
    created(server.addr, PODS, &windows).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn affinity_label_keys_divisors_and_ips_over_http() {
    let server = server().await;
    let term = json!({"labelSelector": {"matchLabels": {"app": "web"}},
        "matchLabelKeys": ["app", "bad key"], "topologyKey": "zone"});
    let mut bad = pod_of(
        "a",
        json!({"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}},
            "hostAliases": [{"ip": "256.1.1.1", "hostnames": ["h"]}]}),
        json!({"env": [{"name": "CPU", "valueFrom": {"resourceFieldRef":
            {"resource": "limits.cpu", "divisor": "1Mi"}}}]}),
    );
    bad["metadata"]["labels"] = json!({"app": "web"});
    let causes = refused(server.addr, PODS, &bad).await;
    let at = "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]";
    assert_eq!(causes.len(), 4, "{causes:?}");
    assert_eq!(
        causes[0],
        "spec.containers[0].env[0].valueFrom.resourceFieldRef.divisor: Invalid value: \"limits.cpu\": only divisor's values 1m and 1 are supported with the cpu resource"
    );
    assert!(causes[1].starts_with(&format!(
        "{at}.matchLabelKeys[1]: Invalid value: \"bad key\": "
    )));
    // The pod's `app` label was merged into the selector, which already has `app`.
    assert_eq!(
        causes[2],
        format!("{at}[0]: Invalid value: \"app\": exists in both matchLabelKeys and labelSelector")
    );
    assert_eq!(
        causes[3],
        "spec.hostAliases[0].ip: Invalid value: \"256.1.1.1\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"
    );
    let mut good = pod_of(
        "a",
        json!({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "web"}}, "matchLabelKeys": ["rev"],
             "topologyKey": "zone"}]}},
            "hostAliases": [{"ip": "010.1.1.1", "hostnames": ["h"]}]}),
        json!({}),
    );
    good["metadata"]["labels"] = json!({"app": "web", "rev": "7"});
    let stored = created(server.addr, PODS, &good).await;
    assert_eq!(
        stored["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            [0]["labelSelector"],
        json!({"matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "rev", "operator": "In", "values": ["7"]}]})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seccomp_and_apparmor_annotations_over_http() {
    let server = server().await;
    let mut bad = pod_of(
        "s",
        json!({"securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}}),
        json!({}),
    );
    bad["metadata"]["annotations"] = json!({
        "seccomp.security.alpha.kubernetes.io/pod": "unconfined",
        "container.apparmor.security.beta.kubernetes.io/ghost": "runtime/default"});
    assert_eq!(
        refused(server.addr, PODS, &bad).await,
        [
            "metadata.annotations[container.apparmor.security.beta.kubernetes.io/ghost]: Invalid value: \"ghost\": container not found",
            "spec.securityContext.seccompProfile.type: Forbidden: seccomp type in annotation and field must match",
        ]
    );
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"app": "d"}},
        "template": {"metadata": {"labels": {"app": "d"},
            "annotations": {"seccomp.security.alpha.kubernetes.io/pod": "bogus"}},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}});
    assert_eq!(
        refused(
            server.addr,
            "/apis/apps/v1/namespaces/default/deployments",
            &deployment
        )
        .await,
        [
            "spec.template.annotations.seccomp.security.alpha.kubernetes.io/pod: Invalid value: \"bogus\": must be a valid seccomp profile"
        ]
    );
    bad["metadata"]["annotations"] = json!({
        "seccomp.security.alpha.kubernetes.io/pod": "runtime/default",
        "container.apparmor.security.beta.kubernetes.io/c": "runtime/default"});
    created(server.addr, PODS, &bad).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_ips_over_http() {
    let server = server().await;
    let mut stored = created(server.addr, PODS, &pod_of("ips", json!({}), json!({}))).await;
    let status_path = format!("{PODS}/ips/status");
    stored["status"]["podIPs"] = json!([{"ip": "10.0.0.1"}, {"ip": "10.0.0.1"}]);
    let (status, answer) = send_json(server.addr, "PUT", &status_path, &stored).await;
    assert_eq!(status, 422, "{answer}");
    assert_eq!(
        answer["message"],
        "Pod \"ips\" is invalid: [status.podIPs: Invalid value: []core.PodIP{core.PodIP{IP:\"10.0.0.1\"}, core.PodIP{IP:\"10.0.0.1\"}}: may specify no more than one IP for each IP family, status.podIPs[1]: Duplicate value: core.PodIP{IP:\"10.0.0.1\"}]"
    );
    stored["status"]["podIP"] = json!("10.0.0.1");
    stored["status"]["podIPs"] = json!([{"ip": "10.0.0.1"}, {"ip": "fd00::1"}]);
    let (status, answer) = send_json(server.addr, "PUT", &status_path, &stored).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["status"]["podIPs"][1]["ip"], "fd00::1");
}

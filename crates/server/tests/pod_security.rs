//! kube-apiserver's PodSecurity admission over real HTTP and the real kubectl (memory store):
//! a namespace's `pod-security.kubernetes.io/*` labels refuse the pods that violate their
//! enforce level with kube's 403 (dry runs too, nothing stored), answer kube's `Warning`
//! headers for pods and workload templates that violate their warn level, are validated with
//! kube's 422, and warn about existing pods when the enforce level tightens;
//! `--disable-admission-plugins PodSecurity` turns all of it off; `--admission-control-config-file`
//! sets its defaults and exemptions.

use crate::common;
use crate::kubectl_support;

use common::*;
use serde_json::{Value, json};
use watchkeeper::config::ServeArgs;

use kubectl_support::Kubectl;

/// Creates namespace `name` with `labels`; the answer must be 201.
async fn namespace(addr: std::net::SocketAddr, name: &str, labels: Value) {
    let (status, body) = send_json(
        addr,
        "POST",
        "/api/v1/namespaces",
        &json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": labels}}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
}

fn pod(name: &str, security_context: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "nginx", "securityContext": security_context}]}})
}

/// A container security context restricted allows.
fn restricted_context() -> Value {
    json!({"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}})
}

fn pods(namespace: &str) -> String {
    format!("/api/v1/namespaces/{namespace}/pods")
}

/// Goal: a namespace enforcing `restricted` refuses a privileged pod with kube's exact 403
/// (dry runs too), stores nothing, admits a compliant pod without warnings, lets updates that
/// change nothing a check sees through (even for a pod admitted before the label), and refuses
/// an update that changes an image of a violating pod.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enforce_refuses_violating_pods_with_kubes_403() {
    let server = server().await;
    let addr = server.addr;
    namespace(
        addr,
        "locked",
        json!({"pod-security.kubernetes.io/enforce": "restricted"}),
    )
    .await;
    let (status, refused, warnings) = write_warned(
        addr,
        "POST",
        &pods("locked"),
        "application/json",
        &pod("p", json!({"privileged": true})).to_string(),
    )
    .await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(refused["reason"], "Forbidden");
    assert_eq!(
        refused["message"],
        concat!(
            r#"pods "p" is forbidden: violates PodSecurity "restricted:latest": "#,
            r#"privileged (container "c" must not set securityContext.privileged=true), "#,
            r#"allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation=false), "#,
            r#"unrestricted capabilities (container "c" must set securityContext.capabilities.drop=["ALL"]), "#,
            r#"runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true), "#,
            r#"seccompProfile (pod or container "c" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")"#,
        )
    );
    assert_eq!(refused["details"], json!({"name": "p", "kind": "pods"}));
    assert!(warnings.is_empty(), "{warnings:?}");
    let (status, _) = get_json(addr, &format!("{}/p", pods("locked"))).await;
    assert_eq!(status, 404, "a refused pod is not stored");
    let (status, refused) = send_json(
        addr,
        "POST",
        &format!("{}?dryRun=All", pods("locked")),
        &pod("p", json!({"privileged": true})),
    )
    .await;
    assert_eq!(status, 403, "a dry run is refused too: {refused}");

    let (status, created, warnings) = write_warned(
        addr,
        "POST",
        &pods("locked"),
        "application/json",
        &pod("fine", restricted_context()).to_string(),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    assert!(warnings.is_empty(), "{warnings:?}");

    // A pod admitted before its namespace enforced restricted.
    namespace(addr, "later", json!({})).await;
    let (status, body) = send_json(addr, "POST", &pods("later"), &pod("old", json!({}))).await;
    assert_eq!(status, 201, "{body}");
    merge_patch(
        addr,
        "/api/v1/namespaces/later",
        r#"{"metadata":{"labels":{"pod-security.kubernetes.io/enforce":"baseline","pod-security.kubernetes.io/enforce-version":"v1.33"}}}"#,
    )
    .await;
    let old = format!("{}/old", pods("later"));
    // Metadata only: not significant, admitted.
    merge_patch(addr, &old, r#"{"metadata":{"labels":{"a":"b"}}}"#).await;
    // Its status: a subresource PodSecurity ignores.
    let (status, body) = request(
        addr,
        "PATCH",
        &format!("{old}/status"),
        "application/merge-patch+json",
        r#"{"status":{"message":"hi"}}"#,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    // A new image is checked: baseline passes this pod.
    let (status, body) = request(
        addr,
        "PATCH",
        &old,
        "application/strategic-merge-patch+json",
        r#"{"spec":{"containers":[{"name":"c","image":"nginx:2"}]}}"#,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    merge_patch(
        addr,
        "/api/v1/namespaces/later",
        r#"{"metadata":{"labels":{"pod-security.kubernetes.io/enforce":"restricted"}}}"#,
    )
    .await;
    let (status, refused) = request(
        addr,
        "PATCH",
        &old,
        "application/strategic-merge-patch+json",
        r#"{"spec":{"containers":[{"name":"c","image":"nginx:3"}]}}"#,
    )
    .await;
    assert_eq!(status, 403, "{refused}");
    let refused: Value = serde_json::from_str(&refused).unwrap();
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .starts_with(r#"pods "old" is forbidden: violates PodSecurity "restricted:v1.33": allowPrivilegeEscalation != false"#),
        "{refused}"
    );
    let (_, kept) = get_json(addr, &old).await;
    assert_eq!(kept["spec"]["containers"][0]["image"], "nginx:2");
}

/// Goal: kube's `Warning` headers — a pod violating the warn level is created with
/// `would violate PodSecurity "baseline:latest": ...`; a Deployment's template is never
/// refused, only warned about, at the enforce level when no warn level is set (kube 1.26+);
/// a scale of it (a subresource) is not looked at.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warn_sends_kubes_warning_headers_and_templates_only_warn() {
    let server = server().await;
    let addr = server.addr;
    namespace(
        addr,
        "warned",
        json!({"pod-security.kubernetes.io/warn": "baseline"}),
    )
    .await;
    let (status, created, warnings) = write_warned(
        addr,
        "POST",
        &pods("warned"),
        "application/json",
        &pod("p", json!({"privileged": true})).to_string(),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(
        warnings,
        [
            r#"299 - "would violate PodSecurity \"baseline:latest\": privileged (container \"c\" must not set securityContext.privileged=true)""#
        ]
    );

    namespace(
        addr,
        "locked",
        json!({"pod-security.kubernetes.io/enforce": "baseline"}),
    )
    .await;
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"app": "d"}},
        "template": {"metadata": {"labels": {"app": "d"}}, "spec": {"hostNetwork": true,
            "containers": [{"name": "c", "image": "nginx"}]}}}});
    let deployments = "/apis/apps/v1/namespaces/locked/deployments";
    let (status, created, warnings) = write_warned(
        addr,
        "POST",
        deployments,
        "application/json",
        &deployment.to_string(),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(
        warnings,
        [
            r#"299 - "would violate PodSecurity \"baseline:latest\": host namespaces (hostNetwork=true)""#
        ]
    );
    let (status, _, warnings) = write_warned(
        addr,
        "PATCH",
        &format!("{deployments}/d/scale"),
        "application/merge-patch+json",
        r#"{"spec":{"replicas":3}}"#,
    )
    .await;
    assert_eq!(status, 200);
    assert!(warnings.is_empty(), "{warnings:?}");
    // An update of the workload itself is warned about again.
    let (status, _, warnings) = write_warned(
        addr,
        "PATCH",
        &format!("{deployments}/d"),
        "application/merge-patch+json",
        r#"{"metadata":{"labels":{"x":"y"}}}"#,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
}

/// Goal: kube's 422 for invalid labels (on create, and on an update that changes their
/// errors), and kube's warnings about existing pods when an update tightens the enforce
/// level: the summary, then one line per distinct violation naming the first pod.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespace_labels_are_validated_and_tightening_warns_about_pods() {
    let server = server().await;
    let addr = server.addr;
    let (status, refused) = send_json(
        addr,
        "POST",
        "/api/v1/namespaces",
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bad",
            "labels": {"pod-security.kubernetes.io/enforce": "strict"}}}),
    )
    .await;
    assert_eq!(status, 422, "{refused}");
    assert_eq!(refused["reason"], "Invalid");
    assert_eq!(
        refused["message"],
        r#"Namespace "bad" is invalid: metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "strict": must be one of privileged, baseline, restricted"#
    );
    let (status, _) = get_json(addr, "/api/v1/namespaces/bad").await;
    assert_eq!(status, 404);

    namespace(addr, "busy", json!({})).await;
    for name in ["b-host", "a-host"] {
        let mut host = pod(name, json!({}));
        host["spec"]["hostPID"] = json!(true);
        let (status, body) = send_json(addr, "POST", &pods("busy"), &host).await;
        assert_eq!(status, 201, "{body}");
    }
    let (status, body) = send_json(
        addr,
        "POST",
        &pods("busy"),
        &pod("priv", json!({"privileged": true})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let (status, relabelled, warnings) = write_warned(
        addr,
        "PATCH",
        "/api/v1/namespaces/busy",
        "application/merge-patch+json",
        r#"{"metadata":{"labels":{"pod-security.kubernetes.io/enforce":"baseline"}}}"#,
    )
    .await;
    assert_eq!(status, 200, "{relabelled}");
    assert_eq!(
        warnings,
        [
            r#"299 - "existing pods in namespace \"busy\" violate the new PodSecurity enforce level \"baseline:latest\"""#,
            r#"299 - "a-host (and 1 other pod): host namespaces""#,
            r#"299 - "priv: privileged""#,
        ]
    );
    let (status, refused) = request(
        addr,
        "PATCH",
        "/api/v1/namespaces/busy",
        "application/merge-patch+json",
        r#"{"metadata":{"labels":{"pod-security.kubernetes.io/warn-version":"1.30"}}}"#,
    )
    .await;
    assert_eq!(status, 422, "{refused}");
    assert!(
        refused.contains(r#"metadata.labels[pod-security.kubernetes.io/warn-version]: Invalid value: \"1.30\": must be \"latest\" or \"v1.x\""#),
        "{refused}"
    );
}

/// Goal: `--disable-admission-plugins PodSecurity` admits what the labels would refuse.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disabling_the_plugin_admits_violating_pods() {
    let server = server_with(ServeArgs {
        disable_admission_plugins: Some(vec!["PodSecurity".to_owned()]),
        ..ServeArgs::default()
    })
    .await;
    let addr = server.addr;
    namespace(
        addr,
        "locked",
        json!({"pod-security.kubernetes.io/enforce": "restricted"}),
    )
    .await;
    let (status, created, warnings) = write_warned(
        addr,
        "POST",
        &pods("locked"),
        "application/json",
        &pod("p", json!({"privileged": true})).to_string(),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    assert!(warnings.is_empty(), "{warnings:?}");
}

/// Goal: kubectl prints kube's warning for a workload and kube's refusal for a pod.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_shows_the_warning_and_the_refusal() {
    let server = server().await;
    let k = Kubectl::new(server.addr);
    k.ok(&["create", "namespace", "locked"]).await;
    k.ok(&[
        "label",
        "namespace",
        "locked",
        "pod-security.kubernetes.io/enforce=restricted",
    ])
    .await;
    let out = k
        .run(&[
            "-n",
            "locked",
            "create",
            "deployment",
            "web",
            "--image",
            "nginx",
        ])
        .await;
    assert!(out.success(), "{out:?}");
    assert!(
        out.stderr.contains(r#"Warning: would violate PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container "nginx" must set securityContext.allowPrivilegeEscalation=false)"#),
        "{}",
        out.stderr
    );
    let refused = k
        .fails(&["-n", "locked", "run", "web", "--image", "nginx"])
        .await;
    assert!(
        refused.stderr.contains(r#"Error from server (Forbidden): pods "web" is forbidden: violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false"#),
        "{}",
        refused.stderr
    );
}

/// Goal: `--admission-control-config-file`'s `PodSecurityConfiguration` is kube's: its
/// defaults apply to namespaces without labels (baseline enforced, restricted warned), and
/// its exempt namespace, user and runtime class admit pods that would be refused, an exempt
/// namespace being told its labels are ignored; a configuration kube would refuse stops the
/// server with kube's field error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admission_configuration_sets_defaults_and_exemptions() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("admission.yaml");
    std::fs::write(
        &file,
        r#"apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: PodSecurity
  configuration:
    apiVersion: pod-security.admission.config.k8s.io/v1
    kind: PodSecurityConfiguration
    defaults:
      enforce: baseline
      warn: restricted
    exemptions:
      namespaces: [kube-system]
      usernames: ["system:serviceaccount:kube-system:replicaset-controller"]
      runtimeClasses: [kata]
"#,
    )
    .unwrap();
    let server = server_with(ServeArgs {
        admission_control_config_file: Some(file),
        ..ServeArgs::default()
    })
    .await;
    let addr = server.addr;
    namespace(addr, "apps", json!({})).await;
    let privileged = pod("p", json!({"privileged": true}));
    let (status, refused, _) = write_warned(
        addr,
        "POST",
        &pods("apps"),
        "application/json",
        &privileged.to_string(),
    )
    .await;
    assert_eq!(status, 403, "{refused}");
    assert!(
        refused["message"].as_str().unwrap().starts_with(
            r#"pods "p" is forbidden: violates PodSecurity "baseline:latest": privileged"#
        ),
        "{refused}"
    );
    let (status, created, warnings) = write_warned(
        addr,
        "POST",
        &pods("apps"),
        "application/json",
        &pod("plain", json!({})).to_string(),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].starts_with(r#"299 - "would violate PodSecurity \"restricted:latest\""#),
        "{warnings:?}"
    );

    // The exempt namespace.
    let (status, created, warnings) = write_warned(
        addr,
        "POST",
        &pods("kube-system"),
        "application/json",
        &privileged.to_string(),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    assert!(warnings.is_empty(), "{warnings:?}");
    // The exempt user (impersonated; AlwaysAllow lets anyone impersonate).
    let mut by_controller = privileged.clone();
    by_controller["metadata"]["name"] = json!("from-controller");
    let (status, body) = request_with_headers(
        addr,
        "POST",
        &pods("apps"),
        &[
            ("Content-Type", "application/json"),
            (
                "Impersonate-User",
                "system:serviceaccount:kube-system:replicaset-controller",
            ),
        ],
        &by_controller.to_string(),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    // The exempt runtime class (which must exist for the RuntimeClass plugin).
    let (status, body) = send_json(
        addr,
        "POST",
        "/apis/node.k8s.io/v1/runtimeclasses",
        &json!({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
            "metadata": {"name": "kata"}, "handler": "kata"}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let mut sandboxed = privileged.clone();
    sandboxed["metadata"]["name"] = json!("sandboxed");
    sandboxed["spec"]["runtimeClassName"] = json!("kata");
    let (status, body) = send_json(addr, "POST", &pods("apps"), &sandboxed).await;
    assert_eq!(status, 201, "{body}");

    // Labelling the exempt namespace restricted: allowed, with kube's warning.
    let (status, patched, warnings) = write_warned(
        addr,
        "PATCH",
        "/api/v1/namespaces/kube-system",
        "application/merge-patch+json",
        r#"{"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "restricted"}}}"#,
    )
    .await;
    assert_eq!(status, 200, "{patched}");
    assert_eq!(
        warnings,
        [
            r#"299 - "namespace \"kube-system\" is exempt from Pod Security, and the policy (enforce=restricted:latest) will be ignored""#
        ]
    );

    // A configuration kube refuses stops the server.
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        r#"{"apiVersion": "apiserver.config.k8s.io/v1", "kind": "AdmissionConfiguration",
           "plugins": [{"name": "PodSecurity", "configuration": {
             "apiVersion": "pod-security.admission.config.k8s.io/v1",
             "kind": "PodSecurityConfiguration", "defaults": {"enforce": "strict"}}}]}"#,
    )
    .unwrap();
    let refused = watchkeeper::config::ServeConfig::from_args(ServeArgs {
        admission_control_config_file: Some(bad),
        ..ServeArgs::default()
    })
    .unwrap_err();
    assert_eq!(
        refused.to_string(),
        r#"--admission-control-config-file: couldn't init admission plugin "PodSecurity": defaults.enforce: Invalid value: "strict": must be one of privileged, baseline, restricted"#
    );
}

//! kube-apiserver's pod and pod template warnings over real HTTP and the real kubectl (memory
//! store): a pod or a workload with what kube warns about (deprecated node labels, a hidden
//! environment variable, duplicate ports...) is written and answered with kube's `Warning`
//! headers, before PodSecurity's; a metadata-only update of a workload says nothing.

use crate::common;
use crate::kubectl_support;

use common::*;
use serde_json::json;

use kubectl_support::Kubectl;

/// Goal: a created pod answers kube's warnings, in kube's order (its AppArmor annotation's
/// first, given while the annotation is synced to a field), before PodSecurity's; a
/// Deployment's template is warned about on create and on a spec change, not on a label change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_and_templates_answer_kubes_warnings() {
    let server = server().await;
    let addr = server.addr;
    let (status, body) = send_json(
        addr,
        "POST",
        "/api/v1/namespaces",
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "w",
            "labels": {"pod-security.kubernetes.io/warn": "baseline"}}}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p",
            "annotations": {"container.apparmor.security.beta.kubernetes.io/c": "runtime/default"}},
        "spec": {"nodeSelector": {"beta.kubernetes.io/os": "linux"}, "hostPID": true,
            "containers": [{"name": "c", "image": "nginx",
                "env": [{"name": "A", "value": "1"}, {"name": "A", "value": "2"}],
                "ports": [{"containerPort": 80}, {"containerPort": 80}]}]}});
    let (status, created, warnings) = write_warned(
        addr,
        "POST",
        "/api/v1/namespaces/w/pods",
        "application/json",
        &pod.to_string(),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(
        warnings,
        [
            r#"299 - "metadata.annotations[container.apparmor.security.beta.kubernetes.io/c]: deprecated since v1.30; use the \"appArmorProfile\" field instead""#,
            r#"299 - "spec.nodeSelector[beta.kubernetes.io/os]: deprecated since v1.14; use \"kubernetes.io/os\" instead""#,
            r#"299 - "spec.containers[0].env[1]: hides previous definition of \"A\", which may be dropped when using apply""#,
            r#"299 - "spec.containers[0].ports[1]: duplicate port definition with spec.containers[0].ports[0]""#,
            r#"299 - "would violate PodSecurity \"baseline:latest\": host namespaces (hostPID=true)""#,
        ]
    );

    let deployments = "/apis/apps/v1/namespaces/default/deployments";
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"app": "d"}},
        "template": {"metadata": {"labels": {"app": "d"}}, "spec": {
            "hostAliases": [{"ip": "10.0.0.1", "hostnames": ["a"]}, {"ip": "10.0.0.1", "hostnames": ["b"]}],
            "containers": [{"name": "c", "image": "nginx"}]}}}});
    let duplicate = r#"299 - "spec.template.spec.hostAliases[1].ip: duplicate ip \"10.0.0.1\"""#;
    let (status, created, warnings) = write_warned(
        addr,
        "POST",
        deployments,
        "application/json",
        &deployment.to_string(),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(warnings, [duplicate]);
    let (status, _, warnings) = write_warned(
        addr,
        "PATCH",
        &format!("{deployments}/d"),
        "application/merge-patch+json",
        r#"{"metadata":{"labels":{"x":"y"}}}"#,
    )
    .await;
    assert_eq!(status, 200);
    assert!(warnings.is_empty(), "{warnings:?}");
    let (status, _, warnings) = write_warned(
        addr,
        "PATCH",
        &format!("{deployments}/d"),
        "application/merge-patch+json",
        r#"{"spec":{"minReadySeconds":5}}"#,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(warnings, [duplicate]);
}

/// Goal: kubectl prints kube's template warning.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_prints_template_warnings() {
    let server = server().await;
    let k = Kubectl::new(server.addr);
    let manifest = k.manifest(
        "deployment.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      nodeSelector: {beta.kubernetes.io/arch: amd64}\n      containers:\n      - {name: web, image: nginx}\n",
    );
    let out = k.run(&["apply", "-f", &manifest]).await;
    assert!(out.success(), "{out:?}");
    assert!(
        out.stderr.contains(r#"Warning: spec.template.spec.nodeSelector[beta.kubernetes.io/arch]: deprecated since v1.14; use "kubernetes.io/arch" instead"#),
        "{}",
        out.stderr
    );
}

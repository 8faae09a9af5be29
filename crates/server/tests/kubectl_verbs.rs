//! The kubectl verbs operators use day to day, run by the real kubectl against an in-process
//! server (memory store) and checked against what kube-apiserver 1.33 answers with no
//! controller manager and no kubelet: `describe`, `rollout`, `set`, `replace` and `edit`,
//! `auth` and `create token`, `events` and the watch flags of `get`, node maintenance
//! (`cordon`, `taint`, `drain` through the eviction subresource and a PodDisruptionBudget),
//! `autoscale`, `certificate`, `create job --from`, `create secret`, `wait`, `get` with
//! `--subresource` and its output formats, `delete --cascade`, `api-resources`, `explain
//! --recursive` and the `apply` variants (`--prune`, `--server-side`, `*-last-applied`).
//!
//! One test per verb group, each with a server of its own.

use crate::common;
use crate::kubectl_support;

use serde_json::{Value, json};
use watchkeeper::config::ServeArgs;

use kubectl_support::{Kubectl, names};

async fn kubectl() -> (watchkeeper::Server, Kubectl) {
    let server = common::server_with(ServeArgs::default()).await;
    let k = Kubectl::new(server.addr);
    // Pods need their namespace's `default` ServiceAccount, which the server makes after start.
    k.eventually_ok(&["get", "serviceaccount", "default"]).await;
    (server, k)
}

/// The value of `field` on the line of `text` that starts with it (`describe`'s `Key:  value`).
fn described<'a>(text: &'a str, field: &str) -> &'a str {
    text.lines()
        .find_map(|line| line.strip_prefix(field))
        .unwrap_or_else(|| panic!("no {field} in:\n{text}"))
        .trim()
}

/// The whitespace-separated words of the first line of `table` after its header that starts
/// with `name`.
fn row<'a>(table: &'a str, name: &str) -> Vec<&'a str> {
    table
        .lines()
        .skip(1)
        .find(|line| line.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("no row {name} in:\n{table}"))
        .split_whitespace()
        .collect()
}

fn header(table: &str) -> Vec<&str> {
    table
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect()
}

/// A core `v1` Event about `pod` (its uid `uid`), written as a scheduler would.
fn pod_event(name: &str, pod: &str, uid: &str, kind: &str, reason: &str, message: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": name, "namespace": "default"},
        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": pod,
            "namespace": "default", "uid": uid},
        "reason": reason, "message": message, "type": kind, "count": 1,
        "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:00:00Z",
        "source": {"component": "default-scheduler"}
    })
}

/// Binds `pod` to `node` through the `binding` subresource, as the scheduler does.
async fn bind(server: &watchkeeper::Server, pod: &str, node: &str) {
    let (status, body) = common::send_json(
        server.addr,
        "POST",
        &format!("/api/v1/namespaces/default/pods/{pod}/binding"),
        &json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod},
            "target": {"kind": "Node", "name": node}}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
}

fn node_manifest(k: &Kubectl, name: &str) -> String {
    k.manifest(
        &format!("{name}.yaml"),
        &format!(
            "apiVersion: v1\nkind: Node\nmetadata: {{name: {name}, labels: {{kubernetes.io/hostname: {name}}}}}\n"
        ),
    )
}

/// `describe` of the everyday kinds: each issues its GET and its LISTs (events by
/// `involvedObject.uid` field selector, ReplicaSets by selector, pods on a node, quotas of a
/// namespace) and prints what it read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_prints_each_kind_and_its_events() {
    let (server, k) = kubectl().await;
    k.ok(&[
        "create",
        "deployment",
        "web",
        "--image=nginx:1.25",
        "--replicas=2",
    ])
    .await;
    k.eventually_ok(&["run", "p1", "--image=busybox", "--", "sleep", "1000"])
        .await;
    k.ok(&["create", "service", "clusterip", "svc1", "--tcp=80:80"])
        .await;
    k.ok(&["create", "configmap", "cm1", "--from-literal=a=b"])
        .await;
    k.ok(&["create", "secret", "generic", "s1", "--from-literal=x=yz"])
        .await;
    k.ok(&["create", "-f", &node_manifest(&k, "n1")]).await;
    let crd = k.manifest("crd.json", &common::widgets_crd().to_string());
    k.ok(&["create", "-f", &crd]).await;
    let uid = k
        .ok(&["get", "pod", "p1", "-o", "jsonpath={.metadata.uid}"])
        .await;
    let event = pod_event(
        "p1.1",
        "p1",
        &uid,
        "Warning",
        "FailedScheduling",
        "no nodes",
    );
    let (status, body) = common::send_json(
        server.addr,
        "POST",
        "/api/v1/namespaces/default/events",
        &event,
    )
    .await;
    assert_eq!(status, 201, "{body}");

    let pod = k.ok(&["describe", "pod", "p1"]).await;
    assert_eq!(described(&pod, "Status:"), "Pending", "{pod}");
    assert_eq!(described(&pod, "Node:"), "<none>", "{pod}");
    assert_eq!(described(&pod, "QoS Class:"), "BestEffort", "{pod}");
    let events = pod.split("Events:").nth(1).unwrap_or_default();
    assert!(
        events.contains("FailedScheduling")
            && events.contains("default-scheduler")
            && events.contains("no nodes"),
        "{pod}"
    );
    let deployment = k.ok(&["describe", "deployment", "web"]).await;
    assert_eq!(
        described(&deployment, "Selector:"),
        "app=web",
        "{deployment}"
    );
    assert_eq!(
        described(&deployment, "Replicas:"),
        "2 desired | 0 updated | 0 total | 0 available | 0 unavailable",
        "{deployment}"
    );
    assert_eq!(described(&deployment, "StrategyType:"), "RollingUpdate");
    let service = k.ok(&["describe", "service", "svc1"]).await;
    assert_eq!(described(&service, "Type:"), "ClusterIP", "{service}");
    assert_eq!(described(&service, "TargetPort:"), "80/TCP", "{service}");
    let namespace = k.ok(&["describe", "namespace", "default"]).await;
    assert_eq!(described(&namespace, "Status:"), "Active", "{namespace}");
    assert!(namespace.contains("No resource quota."), "{namespace}");
    let node = k.ok(&["describe", "node", "n1"]).await;
    assert_eq!(
        described(&node, "Taints:"),
        "node.kubernetes.io/not-ready:NoSchedule",
        "{node}"
    );
    assert_eq!(described(&node, "Unschedulable:"), "false", "{node}");
    assert!(
        node.contains("Non-terminated Pods:          (0 in total)"),
        "{node}"
    );
    let configmap = k.ok(&["describe", "configmap", "cm1"]).await;
    assert!(configmap.contains("a:\n----\nb\n"), "{configmap}");
    let secret = k.ok(&["describe", "secret", "s1"]).await;
    assert_eq!(described(&secret, "x:"), "2 bytes", "{secret}");
    let crd = k.ok(&["describe", "crd", "widgets.example.com"]).await;
    assert!(crd.contains("Type:                  Established"), "{crd}");
}

/// `rollout`: pause, resume and restart patch the Deployment; with no deployment controller
/// (kube-apiserver without kube-controller-manager) there are no ReplicaSets, so history is
/// empty, undo has nothing to go back to and status waits for a generation nobody observes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollout_verbs_patch_the_deployment() {
    let (_server, k) = kubectl().await;
    k.ok(&["create", "deployment", "web", "--image=nginx:1.25"])
        .await;
    assert_eq!(
        k.ok(&["rollout", "pause", "deployment/web"]).await.trim(),
        "deployment.apps/web paused"
    );
    assert_eq!(
        k.json(&["get", "deployment", "web"]).await["spec"]["paused"],
        true
    );
    assert_eq!(
        k.ok(&["rollout", "resume", "deployment/web"]).await.trim(),
        "deployment.apps/web resumed"
    );
    let deployment = k.json(&["get", "deployment", "web"]).await;
    assert!(deployment["spec"].get("paused").is_none(), "{deployment}");
    assert_eq!(
        k.ok(&["rollout", "restart", "deployment/web"]).await.trim(),
        "deployment.apps/web restarted"
    );
    let deployment = k.json(&["get", "deployment", "web"]).await;
    let restarted = &deployment["spec"]["template"]["metadata"]["annotations"]["kubectl.kubernetes.io/restartedAt"];
    assert!(restarted.is_string(), "{deployment}");
    assert_eq!(deployment["metadata"]["generation"], 4, "{deployment}");
    let history = k.ok(&["rollout", "history", "deployment/web"]).await;
    assert!(history.contains("No rollout history found."), "{history}");
    let undo = k.fails(&["rollout", "undo", "deployment/web"]).await;
    assert!(
        undo.stderr
            .contains("no rollout history found for deployment \"web\""),
        "{undo:?}"
    );
    let status = k
        .fails(&["rollout", "status", "deployment/web", "--timeout=1s"])
        .await;
    assert!(
        status
            .stdout
            .contains("Waiting for deployment spec update to be observed..."),
        "{status:?}"
    );
}

/// `set image|env|resources|selector|serviceaccount` patch the pod template (or a Service's
/// selector); the template's `serviceAccount` repeats `serviceAccountName`, as kube's
/// `v1.PodSpec` conversion writes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_verbs_patch_the_template() {
    let (_server, k) = kubectl().await;
    k.ok(&["create", "deployment", "web", "--image=nginx:1.25"])
        .await;
    k.ok(&["create", "service", "clusterip", "svc1", "--tcp=80:80"])
        .await;
    k.ok(&["create", "serviceaccount", "builder"]).await;
    for (args, message) in [
        (
            &["set", "image", "deployment/web", "nginx=nginx:1.26"][..],
            "deployment.apps/web image updated",
        ),
        (
            &["set", "env", "deployment/web", "MODE=fast"],
            "deployment.apps/web env updated",
        ),
        (
            &[
                "set",
                "resources",
                "deployment/web",
                "--limits=cpu=200m,memory=512Mi",
            ],
            "deployment.apps/web resource requirements updated",
        ),
        (
            &["set", "serviceaccount", "deployment/web", "builder"],
            "deployment.apps/web serviceaccount updated",
        ),
        (
            &["set", "selector", "service/svc1", "app=web"],
            "service/svc1 selector updated",
        ),
    ] {
        assert_eq!(k.ok(args).await.trim(), message);
    }
    let deployment = k.json(&["get", "deployment", "web"]).await;
    let spec = &deployment["spec"]["template"]["spec"];
    let container = &spec["containers"][0];
    assert_eq!(container["image"], "nginx:1.26", "{deployment}");
    assert_eq!(container["env"], json!([{"name": "MODE", "value": "fast"}]));
    assert_eq!(
        container["resources"],
        json!({"limits": {"cpu": "200m", "memory": "512Mi"}})
    );
    assert_eq!(spec["serviceAccountName"], "builder", "{deployment}");
    assert_eq!(spec["serviceAccount"], "builder", "{deployment}");
    let service = k.json(&["get", "service", "svc1"]).await;
    assert_eq!(service["spec"]["selector"], json!({"app": "web"}));
}

/// `replace -f` updates, `replace --force` deletes and recreates (a new uid), `edit` runs
/// `$EDITOR` on the object and updates it, and an edit the server refuses changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replace_and_edit() {
    let (_server, k) = kubectl().await;
    k.ok(&["create", "configmap", "cm1", "--from-literal=a=one"])
        .await;
    let first_uid = k.json(&["get", "configmap", "cm1"]).await["metadata"]["uid"].clone();
    let text = k.ok(&["get", "configmap", "cm1", "-o", "yaml"]).await;
    let file = k.manifest("cm1.yaml", &text.replace("a: one", "a: two"));
    assert_eq!(
        k.ok(&["replace", "-f", &file]).await.trim(),
        "configmap/cm1 replaced"
    );
    let replaced = k.json(&["get", "configmap", "cm1"]).await;
    assert_eq!(replaced["data"]["a"], "two");
    assert_eq!(replaced["metadata"]["uid"], first_uid);
    let forced = k.ok(&["replace", "--force", "-f", &file]).await;
    assert_eq!(
        forced.trim(),
        "configmap \"cm1\" deleted\nconfigmap/cm1 replaced",
        "{forced}"
    );
    let recreated = k.json(&["get", "configmap", "cm1"]).await;
    assert_ne!(recreated["metadata"]["uid"], first_uid, "{recreated}");

    let editor = k.manifest(
        "editor.sh",
        "#!/bin/sh\nsed -i 's/a: two/a: edited/' \"$1\"\n",
    );
    let refusing = k.manifest(
        "refusing.sh",
        "#!/bin/sh\nsed -i 's/replicas: 1/replicas: -1/' \"$1\"\n",
    );
    for script in [&editor, &refusing] {
        std::fs::set_permissions(script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
    }
    let edited = k
        .run_with_env(&["edit", "configmap", "cm1"], &[("EDITOR", &editor)])
        .await;
    assert!(edited.success(), "{edited:?}");
    assert_eq!(edited.stdout.trim(), "configmap/cm1 edited");
    let stored = k
        .json(&["get", "configmap", "cm1", "--show-managed-fields"])
        .await;
    assert_eq!(stored["data"]["a"], "edited");
    let managers: Vec<&str> = stored["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|entry| entry["manager"].as_str())
        .collect();
    assert!(managers.contains(&"kubectl-edit"), "{stored}");

    k.ok(&["create", "deployment", "web", "--image=nginx"])
        .await;
    let refused = k
        .run_with_env(&["edit", "deployment", "web"], &[("EDITOR", &refusing)])
        .await;
    assert!(!refused.success(), "{refused:?}");
    assert!(
        refused
            .stderr
            .contains("error: deployments.apps \"web\" is invalid"),
        "{refused:?}"
    );
    assert_eq!(
        k.json(&["get", "deployment", "web"]).await["spec"]["replicas"],
        1
    );
}

/// `auth can-i` (SelfSubjectAccessReview), `--list` (SelfSubjectRulesReview), `auth whoami`
/// (SelfSubjectReview, impersonation included) and `create token` (TokenRequest) with kube's
/// refusals.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_and_tokens() {
    let (_server, k) = kubectl().await;
    assert_eq!(
        k.ok(&["auth", "can-i", "create", "pods"]).await.trim(),
        "yes"
    );
    let rules = k.ok(&["auth", "can-i", "--list"]).await;
    assert_eq!(
        header(&rules),
        [
            "Resources",
            "Non-Resource",
            "URLs",
            "Resource",
            "Names",
            "Verbs"
        ]
    );
    assert!(rules.lines().any(|l| l.starts_with("*.*")), "{rules}");
    let whoami = k.ok(&["auth", "whoami"]).await;
    assert_eq!(row(&whoami, "Username")[1], "system:anonymous", "{whoami}");
    let impersonated = k
        .ok(&["auth", "whoami", "--as=alice", "--as-group=devs"])
        .await;
    assert_eq!(row(&impersonated, "Username")[1], "alice");
    assert_eq!(
        row(&impersonated, "Groups")[1..],
        ["[devs", "system:authenticated]"]
    );
    k.ok(&["create", "serviceaccount", "bot"]).await;
    let token = k.ok(&["create", "token", "bot"]).await;
    assert_eq!(token.trim().split('.').count(), 3, "{token}");
    let short = k.fails(&["create", "token", "bot", "--duration=1m"]).await;
    assert!(
        short.stderr.contains(
            "spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes"
        ),
        "{short:?}"
    );
    let missing = k.fails(&["create", "token", "nobody"]).await;
    assert!(
        missing
            .stderr
            .contains("serviceaccounts \"nobody\" not found"),
        "{missing:?}"
    );
    // A ClusterRole named with what a URL must escape (kube's RBAC names are any path
    // segment): kubectl escapes it its own way (Go's `url.PathEscape`) and finds it.
    let name = "reader of caf\u{e9}";
    k.ok(&[
        "create",
        "clusterrole",
        name,
        "--verb=get",
        "--resource=pods",
    ])
    .await;
    let got = k
        .ok(&[
            "get",
            "clusterrole",
            name,
            "-o",
            "jsonpath={.metadata.name}",
        ])
        .await;
    assert_eq!(got.trim(), name);
    k.ok(&["label", "clusterrole", name, "team=a"]).await;
    let out = k.ok(&["delete", "clusterrole", name]).await;
    assert!(out.contains("deleted"), "{out}");
}

/// `kubectl events` (`--for`, `--types`, `-w`) reads core events; `get` of
/// `events.events.k8s.io` prints the same columns as `get events`, since kube-apiserver serves
/// both from one storage with the core Event printer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_and_their_tables() {
    let (server, k) = kubectl().await;
    k.eventually_ok(&["run", "p1", "--image=busybox"]).await;
    k.eventually_ok(&["run", "p2", "--image=busybox"]).await;
    let uid = |pod: &'static str| {
        let k = &k;
        async move {
            k.ok(&["get", "pod", pod, "-o", "jsonpath={.metadata.uid}"])
                .await
        }
    };
    for event in [
        pod_event(
            "p1.1",
            "p1",
            &uid("p1").await,
            "Warning",
            "FailedScheduling",
            "no nodes",
        ),
        pod_event(
            "p2.1",
            "p2",
            &uid("p2").await,
            "Normal",
            "Pulled",
            "image pulled",
        ),
    ] {
        let (status, body) = common::send_json(
            server.addr,
            "POST",
            "/api/v1/namespaces/default/events",
            &event,
        )
        .await;
        assert_eq!(status, 201, "{body}");
    }
    let all = k.ok(&["events"]).await;
    assert_eq!(
        header(&all),
        ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    );
    assert_eq!(all.lines().count(), 3, "{all}");
    let for_p1 = k.ok(&["events", "--for", "pod/p1"]).await;
    assert!(
        for_p1.contains("FailedScheduling") && !for_p1.contains("Pulled"),
        "{for_p1}"
    );
    let warnings = k.ok(&["events", "--types=Warning"]).await;
    assert!(
        warnings.contains("Pod/p1") && !warnings.contains("Pod/p2"),
        "{warnings}"
    );
    let core = k.ok(&["get", "events"]).await;
    let v1 = k.ok(&["get", "events.events.k8s.io"]).await;
    assert_eq!(header(&v1), header(&core), "{v1}");
    assert_eq!(
        header(&v1),
        ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    );
    assert!(
        v1.lines()
            .any(|l| l.contains("Warning") && l.contains("pod/p1") && l.contains("no nodes")),
        "{v1}"
    );
    let wide = k.ok(&["get", "events.events.k8s.io", "-o", "wide"]).await;
    assert!(
        wide.lines().next().unwrap_or_default().contains("SOURCE"),
        "{wide}"
    );
    assert!(wide.contains("default-scheduler"), "{wide}");

    let mut watch = k.spawn(&["events", "-w"]);
    watch
        .line_matching(|l| l.contains("FailedScheduling"))
        .await;
    let event = pod_event(
        "p1.2",
        "p1",
        &uid("p1").await,
        "Warning",
        "BackOff",
        "backing off",
    );
    common::send_json(
        server.addr,
        "POST",
        "/api/v1/namespaces/default/events",
        &event,
    )
    .await;
    watch.line_matching(|l| l.contains("BackOff")).await;
}

/// `get -w`, `--watch-only` and `--output-watch-events` print the changes kubectl watches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_watch_flags() {
    let (_server, k) = kubectl().await;
    k.ok(&["create", "configmap", "old", "--from-literal=a=1"])
        .await;
    let mut events = k.spawn(&["get", "configmaps", "-w", "--output-watch-events"]);
    assert_eq!(
        header(&events.line_matching(|l| l.starts_with("EVENT")).await),
        ["EVENT", "NAME", "DATA", "AGE"]
    );
    events
        .line_matching(|l| l.starts_with("ADDED") && l.contains(" old "))
        .await;
    let mut only = k.spawn(&["get", "configmaps", "--watch-only"]);
    let mut json = k.spawn(&[
        "get",
        "configmaps",
        "-w",
        "-o",
        "json",
        "--output-watch-events",
    ]);
    json.line_matching(|l| l.contains(r#""name":"old""#)).await;
    k.ok(&["create", "configmap", "new", "--from-literal=a=1"])
        .await;
    k.ok(&["delete", "configmap", "new"]).await;
    events
        .line_matching(|l| l.starts_with("ADDED") && l.contains(" new "))
        .await;
    events
        .line_matching(|l| l.starts_with("DELETED") && l.contains(" new "))
        .await;
    // `--watch-only` skips the list: its first row is the new object.
    let first = only.line_matching(|l| !l.starts_with("NAME")).await;
    assert_eq!(first.split_whitespace().next(), Some("new"), "{first}");
    let added = json.line_matching(|l| l.contains(r#""name":"new""#)).await;
    let added: Value = serde_json::from_str(&added).unwrap();
    assert_eq!(added["type"], "ADDED", "{added}");
    let deleted = json.line_matching(|l| l.contains(r#""name":"new""#)).await;
    let deleted: Value = serde_json::from_str(&deleted).unwrap();
    assert_eq!(deleted["type"], "DELETED", "{deleted}");
}

/// `cordon`, `uncordon`, `taint` and `drain`: drain evicts the node's pods through the
/// eviction subresource; a PodDisruptionBudget no disruption controller has observed refuses
/// (kube's 429, retried by kubectl until its timeout); without it the pod is evicted, and as a
/// pod on a node it is deleted gracefully (Terminating, drain waits) unless the grace period is
/// 0. `delete pod` of a pod on a node likewise leaves it Terminating; `--force
/// --grace-period=0` removes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_maintenance() {
    let (server, k) = kubectl().await;
    k.ok(&["create", "-f", &node_manifest(&k, "n1")]).await;
    assert_eq!(k.ok(&["cordon", "n1"]).await.trim(), "node/n1 cordoned");
    assert_eq!(
        k.json(&["get", "node", "n1"]).await["spec"]["unschedulable"],
        true
    );
    let nodes = k.ok(&["get", "nodes"]).await;
    assert_eq!(
        row(&nodes, "n1")[1],
        "Unknown,SchedulingDisabled",
        "{nodes}"
    );
    assert_eq!(k.ok(&["uncordon", "n1"]).await.trim(), "node/n1 uncordoned");
    assert!(
        k.json(&["get", "node", "n1"]).await["spec"]
            .get("unschedulable")
            .is_none()
    );
    assert_eq!(
        k.ok(&["taint", "nodes", "n1", "dedicated=db:NoSchedule"])
            .await
            .trim(),
        "node/n1 tainted"
    );
    let taints = k.json(&["get", "node", "n1"]).await["spec"]["taints"].clone();
    assert!(
        taints
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["key"] == "dedicated" && t["value"] == "db" && t["effect"] == "NoSchedule"),
        "{taints}"
    );
    assert_eq!(
        k.ok(&["taint", "nodes", "n1", "dedicated=db:NoSchedule-"])
            .await
            .trim(),
        "node/n1 untainted"
    );

    k.eventually_ok(&["run", "db", "--image=busybox", "--labels=app=db"])
        .await;
    bind(&server, "db", "n1").await;
    k.ok(&[
        "patch",
        "pod",
        "db",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"phase":"Running"}}"#,
    ])
    .await;
    k.ok(&[
        "create",
        "poddisruptionbudget",
        "db",
        "--selector=app=db",
        "--min-available=1",
    ])
    .await;
    let blocked = k
        .fails(&[
            "drain",
            "n1",
            "--ignore-daemonsets",
            "--force",
            "--timeout=2s",
        ])
        .await;
    assert!(
        blocked
            .stderr
            .contains("Cannot evict pod as it would violate the pod's disruption budget."),
        "{blocked:?}"
    );
    assert_eq!(
        k.json(&["get", "node", "n1"]).await["spec"]["unschedulable"],
        true
    );
    k.ok(&["get", "pod", "db"]).await;
    k.ok(&["delete", "poddisruptionbudget", "db"]).await;
    // Evicted, the running pod is deleted gracefully: Terminating until its kubelet (none
    // runs) removes it, so drain waits for it, as against kube-apiserver with no node running.
    let waiting = k
        .fails(&[
            "drain",
            "n1",
            "--ignore-daemonsets",
            "--force",
            "--timeout=2s",
        ])
        .await;
    assert!(
        waiting.stdout.contains("evicting pod default/db"),
        "{waiting:?}"
    );
    let terminating = k.json(&["get", "pod", "db"]).await;
    assert_eq!(
        terminating["metadata"]["deletionGracePeriodSeconds"], 30,
        "{terminating}"
    );
    let pods = k.ok(&["get", "pods"]).await;
    assert_eq!(row(&pods, "db")[2], "Terminating", "{pods}");
    // A grace period of 0 deletes it at once.
    let drained = k
        .ok(&[
            "drain",
            "n1",
            "--ignore-daemonsets",
            "--force",
            "--grace-period=0",
            "--timeout=30s",
        ])
        .await;
    assert!(drained.contains("pod/db evicted"), "{drained}");
    assert!(drained.contains("node/n1 drained"), "{drained}");
    let gone = k.fails(&["get", "pod", "db"]).await;
    assert!(gone.stderr.contains("pods \"db\" not found"), "{gone:?}");

    k.ok(&["run", "web", "--image=busybox"]).await;
    bind(&server, "web", "n1").await;
    assert_eq!(
        k.ok(&["delete", "pod", "web", "--wait=false"]).await.trim(),
        "pod \"web\" deleted"
    );
    let marked = k.json(&["get", "pod", "web"]).await;
    assert!(
        marked["metadata"]["deletionTimestamp"].is_string(),
        "{marked}"
    );
    let forced = k
        .run(&["delete", "pod", "web", "--force", "--grace-period=0"])
        .await;
    assert!(forced.success(), "{forced:?}");
    assert!(
        forced
            .stderr
            .contains("Immediate deletion does not wait for confirmation"),
        "{forced:?}"
    );
    let gone = k.fails(&["get", "pod", "web"]).await;
    assert!(gone.stderr.contains("pods \"web\" not found"), "{gone:?}");
}

/// `autoscale` (an autoscaling/v2 HPA), `certificate approve|deny` (the approval
/// subresource), `create job --from=cronjob/x` and `create secret docker-registry|tls|generic`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn autoscale_certificates_jobs_and_secrets() {
    let (_server, k) = kubectl().await;
    k.ok(&["create", "deployment", "web", "--image=nginx"])
        .await;
    assert_eq!(
        k.ok(&["autoscale", "deployment", "web", "--min", "1", "--max", "3"])
            .await
            .trim(),
        "horizontalpodautoscaler.autoscaling/web autoscaled"
    );
    let hpa = k.json(&["get", "hpa.v2.autoscaling", "web"]).await;
    assert_eq!(hpa["spec"]["minReplicas"], 1);
    assert_eq!(hpa["spec"]["maxReplicas"], 3);
    assert_eq!(hpa["spec"]["scaleTargetRef"]["name"], "web");
    let hpas = k.ok(&["get", "hpa"]).await;
    assert_eq!(
        &row(&hpas, "web")[1..],
        [
            "Deployment/web",
            "cpu:",
            "<unknown>/80%",
            "1",
            "3",
            "0",
            row(&hpas, "web")[7]
        ]
    );

    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::default();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "alice");
    let csr = params.serialize_request(&key).unwrap().pem().unwrap();
    for name in ["alice", "bob"] {
        let manifest = k.manifest(
            &format!("{name}.json"),
            &json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
                "metadata": {"name": name},
                "spec": {"request": base64_of(csr.as_bytes()),
                    "signerName": "kubernetes.io/kube-apiserver-client",
                    "usages": ["client auth"]}})
            .to_string(),
        );
        k.ok(&["create", "-f", &manifest]).await;
    }
    assert_eq!(
        k.ok(&["certificate", "approve", "alice"]).await.trim(),
        "certificatesigningrequest.certificates.k8s.io/alice approved"
    );
    assert_eq!(
        k.ok(&["certificate", "deny", "bob"]).await.trim(),
        "certificatesigningrequest.certificates.k8s.io/bob denied"
    );
    let csrs = k.ok(&["get", "csr"]).await;
    assert_eq!(row(&csrs, "alice").last(), Some(&"Approved"), "{csrs}");
    assert_eq!(row(&csrs, "bob").last(), Some(&"Denied"), "{csrs}");
    let conditions = k.json(&["get", "csr", "alice"]).await["status"]["conditions"].clone();
    assert_eq!(conditions[0]["type"], "Approved", "{conditions}");
    assert_eq!(conditions[0]["reason"], "KubectlApprove", "{conditions}");

    k.ok(&[
        "create",
        "cronjob",
        "nightly",
        "--image=busybox",
        "--schedule=0 0 * * *",
        "--",
        "true",
    ])
    .await;
    assert_eq!(
        k.ok(&["create", "job", "manual", "--from=cronjob/nightly"])
            .await
            .trim(),
        "job.batch/manual created"
    );
    let job = k.json(&["get", "job", "manual"]).await;
    assert_eq!(
        job["metadata"]["annotations"]["cronjob.kubernetes.io/instantiate"],
        "manual"
    );
    assert_eq!(job["metadata"]["ownerReferences"][0]["kind"], "CronJob");
    assert_eq!(job["metadata"]["ownerReferences"][0]["name"], "nightly");

    k.ok(&[
        "create",
        "secret",
        "docker-registry",
        "registry",
        "--docker-server=r.example",
        "--docker-username=u",
        "--docker-password=p",
    ])
    .await;
    let cert = rcgen::generate_simple_self_signed(vec!["example.com".to_owned()]).unwrap();
    let crt = k.manifest("tls.crt", &cert.cert.pem());
    let tls_key = k.manifest("tls.key", &cert.signing_key.serialize_pem());
    k.ok(&[
        "create", "secret", "tls", "web-tls", "--cert", &crt, "--key", &tls_key,
    ])
    .await;
    k.ok(&["create", "secret", "generic", "files", "--from-file", &crt])
        .await;
    let secrets = k.ok(&["get", "secrets"]).await;
    assert_eq!(
        row(&secrets, "registry")[1..3],
        ["kubernetes.io/dockerconfigjson", "1"]
    );
    assert_eq!(row(&secrets, "web-tls")[1..3], ["kubernetes.io/tls", "2"]);
    assert_eq!(row(&secrets, "files")[1..3], ["Opaque", "1"]);
}

fn base64_of(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// `wait` for deletion, a condition and a JSONPath value; `get --subresource=status|scale`
/// (the scale subresource answers kube's Scale table); and `get`'s output formats.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_subresources_and_output_formats() {
    let (server, k) = kubectl().await;
    k.ok(&[
        "create",
        "deployment",
        "web",
        "--image=nginx:1.25",
        "--replicas=2",
    ])
    .await;
    k.ok(&["create", "configmap", "cm1", "--from-literal=a=b"])
        .await;
    let crd = k.manifest("crd.json", &common::widgets_crd().to_string());
    k.ok(&["create", "-f", &crd]).await;
    assert_eq!(
        k.ok(&[
            "wait",
            "--for=condition=Established",
            "crd/widgets.example.com",
            "--timeout=30s"
        ])
        .await
        .trim(),
        "customresourcedefinition.apiextensions.k8s.io/widgets.example.com condition met"
    );
    assert_eq!(
        k.ok(&[
            "wait",
            "--for=jsonpath={.data.a}=b",
            "configmap/cm1",
            "--timeout=30s"
        ])
        .await
        .trim(),
        "configmap/cm1 condition met"
    );
    // A finalizer holds the deleted object until the wait has certainly seen it.
    k.ok(&[
        "patch",
        "configmap",
        "cm1",
        "-p",
        r#"{"metadata":{"finalizers":["example.com/hold"]}}"#,
    ])
    .await;
    k.ok(&["delete", "configmap", "cm1", "--wait=false"]).await;
    let held = k.json(&["get", "configmap", "cm1"]).await;
    assert!(held["metadata"]["deletionTimestamp"].is_string(), "{held}");
    let mut wait = k.spawn(&["wait", "--for=delete", "configmap/cm1", "--timeout=30s"]);
    // The wait watches the object by name once it has read it.
    tokio::time::timeout(common::HANG_GUARD, async {
        loop {
            let (_, watchers) = common::get_json(server.addr, "/debug/watchers").await;
            let watching = watchers["furthestBehind"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|w| {
                    w["resource"] == "configmaps" && w["fieldSelector"] == "metadata.name=cm1"
                });
            if watching {
                break;
            }
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("kubectl wait watches the configmap");
    k.ok(&[
        "patch",
        "configmap",
        "cm1",
        "--type=json",
        "-p",
        r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
    ])
    .await;
    wait.line_matching(|l| l == "configmap/cm1 condition met")
        .await;
    let timeout = k
        .fails(&[
            "wait",
            "--for=condition=Available",
            "deployment/web",
            "--timeout=1s",
        ])
        .await;
    assert!(
        timeout
            .stderr
            .contains("timed out waiting for the condition on deployments/web"),
        "{timeout:?}"
    );

    let status = k
        .ok(&["get", "deployment", "web", "--subresource=status"])
        .await;
    assert_eq!(
        header(&status),
        ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
    );
    let scale = k
        .ok(&["get", "deployment", "web", "--subresource=scale"])
        .await;
    assert_eq!(
        header(&scale),
        ["NAME", "DESIRED", "AVAILABLE", "AGE"],
        "{scale}"
    );
    assert_eq!(row(&scale, "web")[1..3], ["2", "0"], "{scale}");
    let scale = k
        .json(&["get", "deployment", "web", "--subresource=scale"])
        .await;
    assert_eq!(scale["kind"], "Scale");
    assert_eq!(scale["spec"]["replicas"], 2);
    assert_eq!(scale["status"]["selector"], "app=web");

    let columns = k
        .ok(&[
            "get",
            "deployments",
            "-o",
            "custom-columns=NAME:.metadata.name,IMAGE:.spec.template.spec.containers[0].image",
        ])
        .await;
    assert_eq!(columns, "NAME   IMAGE\nweb    nginx:1.25\n");
    let jsonpath = k
        .ok(&[
            "get",
            "deployments",
            "-o",
            "jsonpath={.items[*].spec.replicas}",
        ])
        .await;
    assert_eq!(jsonpath, "2");
    let template = k
        .ok(&[
            "get",
            "deployment",
            "web",
            "-o",
            "go-template={{.spec.strategy.type}}",
        ])
        .await;
    assert_eq!(template, "RollingUpdate");
    let wide = k.ok(&["get", "deployments", "-o", "wide"]).await;
    assert_eq!(
        header(&wide),
        [
            "NAME",
            "READY",
            "UP-TO-DATE",
            "AVAILABLE",
            "AGE",
            "CONTAINERS",
            "IMAGES",
            "SELECTOR"
        ]
    );
    assert_eq!(row(&wide, "web")[5..], ["nginx", "nginx:1.25", "app=web"]);
    let all = k.ok(&["get", "all"]).await;
    assert!(all.contains("service/kubernetes"), "{all}");
    assert!(all.contains("deployment.apps/web"), "{all}");
}

/// `delete --all` with `--cascade=foreground` (dependents deleted first) and `orphan`
/// (dependents kept, their owner reference removed); `api-resources` filtered; `explain
/// --recursive`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cascading_deletes_and_discovery() {
    let (_server, k) = kubectl().await;
    let replica_set = k.manifest(
        "rs.yaml",
        "apiVersion: apps/v1\nkind: ReplicaSet\nmetadata: {name: rs1}\nspec:\n  replicas: 0\n  selector: {matchLabels: {a: b}}\n  template:\n    metadata: {labels: {a: b}}\n    spec: {containers: [{name: c, image: busybox}]}\n",
    );
    for (cascade, kept) in [("foreground", false), ("orphan", true)] {
        k.ok(&["create", "-f", &replica_set]).await;
        let uid = k
            .ok(&["get", "replicaset", "rs1", "-o", "jsonpath={.metadata.uid}"])
            .await;
        let owned = k.manifest(
            "owned.json",
            &json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "owned", "ownerReferences": [{"apiVersion": "apps/v1",
                    "kind": "ReplicaSet", "name": "rs1", "uid": uid,
                    "blockOwnerDeletion": true}]}})
            .to_string(),
        );
        k.ok(&["create", "-f", &owned]).await;
        let flag = format!("--cascade={cascade}");
        assert_eq!(
            k.ok(&["delete", "replicasets", "--all", &flag])
                .await
                .trim(),
            "replicaset.apps \"rs1\" deleted"
        );
        assert!(
            k.fails(&["get", "replicaset", "rs1"])
                .await
                .stderr
                .contains("not found")
        );
        let owned = k.run(&["get", "configmap", "owned", "-o", "json"]).await;
        assert_eq!(owned.success(), kept, "--cascade={cascade}: {owned:?}");
        if kept {
            let owned: Value = serde_json::from_str(&owned.stdout).unwrap();
            assert!(
                owned["metadata"].get("ownerReferences").is_none(),
                "{owned}"
            );
            k.ok(&["delete", "configmap", "owned"]).await;
        }
    }

    let resources = k
        .ok(&[
            "api-resources",
            "-o",
            "wide",
            "--verbs=list",
            "--namespaced",
        ])
        .await;
    assert_eq!(
        header(&resources),
        [
            "NAME",
            "SHORTNAMES",
            "APIVERSION",
            "NAMESPACED",
            "KIND",
            "VERBS",
            "CATEGORIES"
        ]
    );
    let names = names(&resources);
    assert!(names.iter().any(|n| n == "pods"), "{resources}");
    for cluster_scoped_or_create_only in [
        "nodes",
        "namespaces",
        "tokenreviews",
        "localsubjectaccessreviews",
    ] {
        assert!(
            !names.iter().any(|n| n == cluster_scoped_or_create_only),
            "{cluster_scoped_or_create_only}:\n{resources}"
        );
    }
    assert_eq!(
        row(&resources, "pods")[1..],
        [
            "po",
            "v1",
            "true",
            "Pod",
            "create,delete,deletecollection,get,list,patch,update,watch",
            "all"
        ]
    );
    let explained = k.ok(&["explain", "deployment.spec", "--recursive"]).await;
    assert!(
        explained.contains("FIELD: spec <DeploymentSpec>"),
        "{explained}"
    );
    assert!(
        explained.contains("    maxSurge\t<IntOrString>"),
        "{explained}"
    );
    // The create-only kinds are published too, as kube publishes them.
    for (resource, kind, field) in [
        (
            "tokenreviews",
            "TokenReview",
            "spec\t<TokenReviewSpec> -required-",
        ),
        (
            "selfsubjectaccessreviews",
            "SelfSubjectAccessReview",
            "spec\t<SelfSubjectAccessReviewSpec> -required-",
        ),
        (
            "bindings",
            "Binding",
            "target\t<ObjectReference> -required-",
        ),
    ] {
        let explained = k.ok(&["explain", resource]).await;
        assert!(
            explained.contains(&format!("KIND:       {kind}")),
            "{resource}: {explained}"
        );
        assert!(explained.contains(field), "{resource}: {explained}");
    }
}

/// `apply --prune -l` deletes what the label selects and the files no longer hold;
/// `--server-side --force-conflicts` takes fields another manager owns; `view-last-applied`,
/// `set-last-applied` and `edit-last-applied` read and write the annotation only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_variants() {
    let (_server, k) = kubectl().await;
    let both = k.manifest(
        "both.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: pa, labels: {app: pr}}\ndata: {k: v}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: pb, labels: {app: pr}}\ndata: {k: v}\n",
    );
    let one = k.manifest(
        "one.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: pa, labels: {app: pr}}\ndata: {k: v}\n",
    );
    assert_eq!(
        k.ok(&["apply", "-f", &both, "-l", "app=pr", "--prune"])
            .await,
        "configmap/pa created\nconfigmap/pb created\n"
    );
    assert_eq!(
        k.ok(&["apply", "-f", &one, "-l", "app=pr", "--prune"])
            .await,
        "configmap/pa unchanged\nconfigmap/pb pruned\n"
    );
    assert_eq!(
        names(&k.ok(&["get", "configmaps", "-l", "app=pr"]).await),
        ["pa"]
    );

    let last = k.ok(&["apply", "view-last-applied", "configmap/pa"]).await;
    assert!(last.contains("data:\n  k: v\n"), "{last}");
    let changed = k.manifest(
        "changed.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: pa, labels: {app: pr}}\ndata: {k: set}\n",
    );
    assert_eq!(
        k.ok(&["apply", "set-last-applied", "-f", &changed])
            .await
            .trim(),
        "configmap/pa configured"
    );
    let editor = k.manifest(
        "editor.sh",
        "#!/bin/sh\nsed -i 's/k: set/k: edited/' \"$1\"\n",
    );
    std::fs::set_permissions(&editor, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let edited = k
        .run_with_env(
            &["apply", "edit-last-applied", "configmap/pa"],
            &[("EDITOR", &editor)],
        )
        .await;
    assert!(edited.success(), "{edited:?}");
    let stored = k.json(&["get", "configmap", "pa"]).await;
    assert_eq!(stored["data"]["k"], "v", "{stored}");
    let annotation: Value = serde_json::from_str(
        stored["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(annotation["data"]["k"], "edited", "{annotation}");

    k.ok(&["create", "configmap", "shared", "--from-literal=k=mine"])
        .await;
    k.ok(&[
        "patch",
        "configmap",
        "shared",
        "--field-manager=other",
        "-p",
        r#"{"data":{"k":"theirs"}}"#,
    ])
    .await;
    let ssa = k.manifest(
        "ssa.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: shared}\ndata: {k: applied}\n",
    );
    let conflict = k.fails(&["apply", "--server-side", "-f", &ssa]).await;
    assert!(
        conflict.stderr.contains("conflict with \"other\""),
        "{conflict:?}"
    );
    assert_eq!(
        k.ok(&["apply", "--server-side", "--force-conflicts", "-f", &ssa])
            .await
            .trim(),
        "configmap/shared serverside-applied"
    );
    assert_eq!(
        k.json(&["get", "configmap", "shared"]).await["data"]["k"],
        "applied"
    );
}

/// Core `bindings` (the older form of `pods/binding`, create only), listed by discovery and
/// written by `kubectl create -f` of a `Binding`: the pod named by the Binding is assigned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bindings_assign_pods() {
    let (server, k) = kubectl().await;
    let resources = k
        .ok(&[
            "api-resources",
            "--api-group=",
            "--verbs=create",
            "--namespaced",
            "-o",
            "wide",
        ])
        .await;
    assert_eq!(
        row(&resources, "bindings")[1..],
        ["v1", "true", "Binding", "create"],
        "{resources}"
    );
    k.ok(&["create", "-f", &node_manifest(&k, "n1")]).await;
    k.eventually_ok(&["run", "db", "--image=busybox"]).await;
    let binding = k.manifest(
        "binding.yaml",
        "apiVersion: v1\nkind: Binding\nmetadata: {name: db}\ntarget: {kind: Node, name: n1}\n",
    );
    let created = k.run(&["create", "-f", &binding]).await;
    assert!(created.success(), "{created:?}");
    let pod = k.json(&["get", "pod", "db"]).await;
    assert_eq!(pod["spec"]["nodeName"], "n1", "{pod}");
    let again = k.fails(&["create", "-f", &binding]).await;
    assert!(
        again
            .stderr
            .contains("Operation cannot be fulfilled on pods/binding \"db\": pod db is already assigned to node \"n1\""),
        "{again:?}"
    );
    let (status, body) = common::get_json(server.addr, "/api/v1/namespaces/default/bindings").await;
    assert_eq!(status, 405, "{body}");
    assert_eq!(body["reason"], "MethodNotAllowed", "{body}");
}

//! What kube-controller-manager's pod garbage collector and resource quota controller do for
//! pods that no kubelet will finish, over real HTTP with short periods: an orphaned pod (its
//! node absent past the quarantine) is marked `Failed` with the `DisruptionTarget` condition and
//! deleted; a terminating pod on a NotReady node tainted out-of-service is deleted, one on a
//! Ready node or an untainted one stays; a terminating pod never scheduled is marked `Failed`;
//! terminated pods past `--terminated-pod-gc-threshold` go, evicted ones first, then the
//! oldest; a pod terminating past its grace period stops counting in its quota (at the next
//! resync, and at once for admission); and with
//! kubectl, a namespace holding an orphaned pod finishes deleting, one holding a pod on a Ready
//! node stays `Terminating`, and `drain` of an out-of-service node finishes.

use crate::common;
use crate::kubectl_support;

use std::net::SocketAddr;

use serde_json::{Value, json};
use watchkeeper::config::ServeArgs;

use common::{WatchReader, get_json, merge_patch, send_json};
use kubectl_support::Kubectl;

const PODS: &str = "/api/v1/namespaces/default/pods";
const NODES: &str = "/api/v1/nodes";

/// A server whose pod GC looks every 50 ms with a quarantine of `quarantine_ms`.
async fn server(quarantine_ms: u64, args: ServeArgs) -> watchkeeper::Server {
    let server = common::server_with(ServeArgs {
        pod_gc_period_ms: Some(50),
        pod_gc_quarantine_ms: Some(quarantine_ms),
        ..args
    })
    .await;
    // Pods need their namespace's `default` ServiceAccount, which the server makes after start.
    until_object(
        server.addr,
        "/api/v1/namespaces/default/serviceaccounts",
        "default",
        |_| true,
    )
    .await;
    server
}

async fn create(addr: SocketAddr, path: &str, body: &Value) -> Value {
    let (status, created) = send_json(addr, "POST", path, body).await;
    assert_eq!(status, 201, "POST {path}: {created}");
    created
}

async fn delete(addr: SocketAddr, path: &str) {
    let (status, body) = send_json(addr, "DELETE", path, &Value::Null).await;
    assert_eq!(status, 200, "DELETE {path}: {body}");
}

fn pod(name: &str, node: Option<&str>) -> Value {
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "busybox"}],
            "terminationGracePeriodSeconds": 600}});
    if let Some(node) = node {
        pod["spec"]["nodeName"] = json!(node);
    }
    pod
}

/// Creates Node `name`, `Ready` as `ready` says, tainted out-of-service when `out_of_service`.
async fn node(addr: SocketAddr, name: &str, ready: bool, out_of_service: bool) {
    let mut node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}});
    if out_of_service {
        node["spec"] = json!({"taints": [{"key": "node.kubernetes.io/out-of-service",
            "value": "nodeshutdown", "effect": "NoExecute"}]});
    }
    create(addr, NODES, &node).await;
    let status = if ready { "True" } else { "False" };
    merge_patch(
        addr,
        &format!("{NODES}/{name}/status"),
        &json!({"status": {"conditions": [{"type": "Ready", "status": status,
            "reason": "Test", "lastHeartbeatTime": null}]}})
        .to_string(),
    )
    .await;
}

/// A watch of `list` (a collection path) from the revision of a LIST of it, with that LIST.
async fn list_and_watch(addr: SocketAddr, list: &str) -> (Vec<Value>, WatchReader) {
    let (status, body) = get_json(addr, list).await;
    assert_eq!(status, 200, "{body}");
    let rv = body["metadata"]["resourceVersion"].as_str().unwrap();
    let watch =
        WatchReader::open(addr, &format!("{list}?watch=1&resourceVersion={rv}"), None).await;
    (body["items"].as_array().cloned().unwrap_or_default(), watch)
}

/// Waits until object `name` of the collection `list` exists and satisfies `done`; that object.
async fn until_object(
    addr: SocketAddr,
    list: &str,
    name: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let (items, mut watch) = list_and_watch(addr, list).await;
    if let Some(found) = items
        .into_iter()
        .find(|o| o["metadata"]["name"] == name && done(o))
    {
        return found;
    }
    loop {
        let event = watch.next().await.expect("the watch goes on");
        if event["type"] != "DELETED" && event["object"]["metadata"]["name"] == name {
            let object = event["object"].clone();
            if done(&object) {
                return object;
            }
        }
    }
}

/// Waits until object `name` of `list` is gone; its last state (`Null` if it never was).
async fn until_gone(addr: SocketAddr, list: &str, name: &str) -> Value {
    let (items, mut watch) = list_and_watch(addr, list).await;
    if !items.iter().any(|o| o["metadata"]["name"] == name) {
        return Value::Null;
    }
    until_deleted(&mut watch, name).await
}

/// The last state of object `name`, from its `DELETED` event on `watch` (opened before
/// whatever deletes it, so its last state cannot be missed).
async fn until_deleted(watch: &mut WatchReader, name: &str) -> Value {
    loop {
        let event = watch.next().await.expect("the watch goes on");
        if event["type"] == "DELETED" && event["object"]["metadata"]["name"] == name {
            return event["object"].clone();
        }
    }
}

fn condition<'a>(pod: &'a Value, kind: &str) -> Option<&'a Value> {
    pod["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
}

/// kube's `gcOrphaned`: a pod bound to a node that stays absent through the quarantine is
/// patched `Failed` with `DisruptionTarget` (`DeletionByPodGC`, `PodGC: node no longer
/// exists`) and deleted; pods on an existing node, or on none, stay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphaned_pods_are_failed_and_deleted() {
    orphans(ServeArgs::default()).await;
}

/// The same over etcd (the pass reads etcd's revision to prove the caches fresh). Needs
/// `WATCHKEEPER_TEST_ETCD` (scripts/test starts etcd and sets it); fails without it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphaned_pods_are_failed_and_deleted_on_etcd() {
    orphans(common::etcd::shared_args(&common::etcd::fresh_prefix())).await;
}

async fn orphans(args: ServeArgs) {
    let server = server(300, args).await;
    let addr = server.addr;
    node(addr, "n1", true, false).await;
    create(addr, PODS, &pod("kept", Some("n1"))).await;
    create(addr, PODS, &pod("unscheduled", None)).await;
    let (_, mut watch) = list_and_watch(addr, PODS).await;
    create(addr, PODS, &pod("orphan", Some("ghost"))).await;
    let last = until_deleted(&mut watch, "orphan").await;
    assert_eq!(last["status"]["phase"], "Failed", "{last}");
    let disruption = condition(&last, "DisruptionTarget").expect("DisruptionTarget");
    assert_eq!(disruption["status"], "True", "{last}");
    assert_eq!(disruption["reason"], "DeletionByPodGC", "{last}");
    assert_eq!(
        disruption["message"], "PodGC: node no longer exists",
        "{last}"
    );
    assert!(disruption["lastTransitionTime"].is_string(), "{last}");
    for name in ["kept", "unscheduled"] {
        let (status, pod) = get_json(addr, &format!("{PODS}/{name}")).await;
        assert_eq!(status, 200, "{name}: {pod}");
        assert_eq!(pod["status"]["phase"], "Pending", "{pod}");
    }
    server.shutdown().await;
}

/// kube's `gcTerminating` and `gcUnscheduledTerminating`: a terminating pod on a NotReady node
/// with the out-of-service taint is deleted; terminating pods on a Ready tainted node or a
/// NotReady untainted one stay; a terminating pod with no node (held by a finalizer) is marked
/// `Failed` (its deletion with a grace period of 0 still waits for the finalizer); a pod whose
/// node has been absent for less than the quarantine stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminating_pods_on_out_of_service_nodes_and_unscheduled_ones_go() {
    let server = server(60_000, ServeArgs::default()).await;
    let addr = server.addr;
    node(addr, "down", false, true).await;
    node(addr, "tainted-ready", true, true).await;
    node(addr, "not-ready", false, false).await;
    for (name, node) in [("on-ready", "tainted-ready"), ("on-not-ready", "not-ready")] {
        create(addr, PODS, &pod(name, Some(node))).await;
        delete(addr, &format!("{PODS}/{name}")).await;
    }
    // Its node absent, but not for the quarantine (a minute) yet.
    create(addr, PODS, &pod("orphan-waits", Some("ghost"))).await;
    let mut held = pod("held", None);
    held["metadata"]["finalizers"] = json!(["example.com/hold"]);
    create(addr, PODS, &held).await;
    delete(addr, &format!("{PODS}/held")).await;
    let (_, mut watch) = list_and_watch(addr, PODS).await;
    create(addr, PODS, &pod("stuck", Some("down"))).await;
    delete(addr, &format!("{PODS}/stuck")).await;
    let last = until_deleted(&mut watch, "stuck").await;
    assert_eq!(last["status"]["phase"], "Failed", "{last}");
    assert!(condition(&last, "DisruptionTarget").is_none(), "{last}");
    let held = until_object(addr, PODS, "held", |p| p["status"]["phase"] == "Failed").await;
    assert!(held["metadata"]["deletionTimestamp"].is_string(), "{held}");
    // Every pass that saw `stuck` or `held` terminating saw these too.
    for name in ["on-ready", "on-not-ready", "orphan-waits"] {
        let (status, pod) = get_json(addr, &format!("{PODS}/{name}")).await;
        assert_eq!(status, 200, "{name}: {pod}");
        assert_eq!(
            pod["metadata"]["deletionTimestamp"].is_string(),
            name != "orphan-waits",
            "{pod}"
        );
        assert_eq!(pod["status"]["phase"], "Pending", "{pod}");
    }
    merge_patch(
        addr,
        &format!("{PODS}/held"),
        r#"{"metadata":{"finalizers":null}}"#,
    )
    .await;
    until_gone(addr, PODS, "held").await;
    server.shutdown().await;
}

/// kube's `gcTerminated`: past `--terminated-pod-gc-threshold` terminated pods, the excess
/// goes, evicted ones first, then the oldest. Whenever the passes run between the status
/// writes below, p1 and p4 go and p2 and p3 stay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminated_pods_past_the_threshold_go_evicted_then_oldest_first() {
    let server = server(
        60_000,
        ServeArgs {
            terminated_pod_gc_threshold: Some(2),
            ..ServeArgs::default()
        },
    )
    .await;
    let addr = server.addr;
    node(addr, "n1", true, false).await;
    create(addr, PODS, &pod("running", Some("n1"))).await;
    for name in ["p1", "p2", "p3", "p4"] {
        create(addr, PODS, &pod(name, Some("n1"))).await;
    }
    for name in ["p1", "p2", "p3"] {
        merge_patch(
            addr,
            &format!("{PODS}/{name}/status"),
            r#"{"status":{"phase":"Succeeded"}}"#,
        )
        .await;
    }
    merge_patch(
        addr,
        &format!("{PODS}/p4/status"),
        r#"{"status":{"phase":"Failed","reason":"Evicted"}}"#,
    )
    .await;
    until_gone(addr, PODS, "p4").await;
    until_gone(addr, PODS, "p1").await;
    for name in ["running", "p2", "p3"] {
        let (status, pod) = get_json(addr, &format!("{PODS}/{name}")).await;
        assert_eq!(status, 200, "{name}: {pod}");
    }
    server.shutdown().await;
}

/// A ResourceQuota `q` of `pods: 1` in `default`, charged for the pod `old` (bound to `n1`,
/// a grace period of 1 s), which is then deleted gracefully: Terminating. Returns the quotas'
/// path.
async fn quota_over_a_terminating_pod(addr: SocketAddr) -> &'static str {
    let quotas = "/api/v1/namespaces/default/resourcequotas";
    create(
        addr,
        quotas,
        &json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q"},
            "spec": {"hard": {"pods": "1"}}}),
    )
    .await;
    let mut old = pod("old", Some("n1"));
    old["spec"]["terminationGracePeriodSeconds"] = json!(1);
    create(addr, PODS, &old).await;
    let (_, quota) = get_json(addr, &format!("{quotas}/q")).await;
    assert_eq!(quota["status"]["used"]["pods"], "1", "{quota}");
    delete(addr, &format!("{PODS}/old")).await;
    quotas
}

/// kube's `QuotaV1Pod`: a pod terminating past its `deletionTimestamp` plus
/// `deletionGracePeriodSeconds` no longer counts in `pods`: the quota's `status.used` drops at
/// the next resync (`--resource-quota-sync-period`), and a new pod is admitted against it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_terminating_past_its_grace_period_stops_counting_in_its_quota() {
    let server = server(
        60_000,
        ServeArgs {
            resource_quota_sync_period: Some("100ms".to_owned()),
            enable_pod_gc: Some(false),
            ..ServeArgs::default()
        },
    )
    .await;
    let addr = server.addr;
    let quotas = quota_over_a_terminating_pod(addr).await;
    until_object(addr, quotas, "q", |q| q["status"]["used"]["pods"] == "0").await;
    create(addr, PODS, &pod("new", Some("n1"))).await;
    let (_, quota) = get_json(addr, &format!("{quotas}/q")).await;
    assert_eq!(quota["status"]["used"]["pods"], "1", "{quota}");
    let (status, _) = get_json(addr, &format!("{PODS}/old")).await;
    assert_eq!(status, 200, "the old pod is still Terminating");
    server.shutdown().await;
}

/// Admission counts the same way with no resync: once the terminating pod is past its grace
/// period, a new pod is admitted against `pods: 1` (refused with kube's 403 before), and the
/// quota then shows only the new one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admission_does_not_count_a_pod_terminating_past_its_grace_period() {
    let server = server(
        60_000,
        ServeArgs {
            resource_quota_sync_period: Some("24h".to_owned()),
            enable_pod_gc: Some(false),
            ..ServeArgs::default()
        },
    )
    .await;
    let addr = server.addr;
    let quotas = quota_over_a_terminating_pod(addr).await;
    // Polled (the grace period ends with no event to wait on), within the hang guard.
    let mut tries = tokio::time::interval(std::time::Duration::from_millis(50));
    let admitted = tokio::time::timeout(common::HANG_GUARD, async {
        loop {
            tries.tick().await;
            let (status, body) = send_json(addr, "POST", PODS, &pod("new", Some("n1"))).await;
            if status == 201 {
                return;
            }
            assert_eq!(status, 403, "{body}");
            let message = body["message"].as_str().unwrap_or_default();
            assert!(message.contains("exceeded quota: q"), "{body}");
        }
    })
    .await;
    assert!(admitted.is_ok(), "the new pod was never admitted");
    let (_, quota) = get_json(addr, &format!("{quotas}/q")).await;
    assert_eq!(quota["status"]["used"]["pods"], "1", "{quota}");
    server.shutdown().await;
}

/// With kubectl: `delete namespace` of a namespace holding a pod bound to a node that does
/// not exist finishes (after the quarantine); one holding a pod on a Ready node stays
/// `Terminating` (no kubelet finishes the pod, as with kube); `drain` of a NotReady node
/// tainted out-of-service finishes, its evicted pod deleted by the pod GC.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_namespace_deletion_and_drain_finish() {
    let server = server(300, ServeArgs::default()).await;
    let addr = server.addr;
    let k = Kubectl::new(addr);
    node(addr, "n1", true, false).await;
    node(addr, "down", false, true).await;
    for namespace in ["x", "y"] {
        k.ok(&["create", "namespace", namespace]).await;
        until_object(
            addr,
            &format!("/api/v1/namespaces/{namespace}/serviceaccounts"),
            "default",
            |_| true,
        )
        .await;
    }
    create(addr, "/api/v1/namespaces/y/pods", &pod("app", Some("n1"))).await;
    create(
        addr,
        "/api/v1/namespaces/x/pods",
        &pod("app", Some("ghost")),
    )
    .await;
    k.ok(&["delete", "namespace", "y", "--wait=false"]).await;
    until_object(addr, "/api/v1/namespaces/y/pods", "app", |p| {
        p["metadata"]["deletionTimestamp"].is_string()
    })
    .await;
    let out = k.ok(&["delete", "namespace", "x", "--timeout=45s"]).await;
    assert_eq!(out.trim(), "namespace \"x\" deleted", "{out}");
    let (status, _) = get_json(addr, "/api/v1/namespaces/x").await;
    assert_eq!(status, 404);
    let (status, y) = get_json(addr, "/api/v1/namespaces/y").await;
    assert_eq!(status, 200, "{y}");
    assert_eq!(y["status"]["phase"], "Terminating", "{y}");
    let (status, app) = get_json(addr, "/api/v1/namespaces/y/pods/app").await;
    assert_eq!(status, 200, "{app}");

    let mut db = pod("db", Some("down"));
    db["metadata"]["labels"] = json!({"app": "db"});
    create(addr, PODS, &db).await;
    merge_patch(
        addr,
        &format!("{PODS}/db/status"),
        r#"{"status":{"phase":"Running"}}"#,
    )
    .await;
    let drained = k
        .ok(&[
            "drain",
            "down",
            "--ignore-daemonsets",
            "--force",
            "--timeout=45s",
        ])
        .await;
    assert!(drained.contains("node/down drained"), "{drained}");
    let (status, _) = get_json(addr, &format!("{PODS}/db")).await;
    assert_eq!(status, 404);
    server.shutdown().await;
}

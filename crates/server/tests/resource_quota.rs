//! ResourceQuota object counts, compute and storage over HTTP, as kube-apiserver's quota
//! admission and kube's quota controller keep them (see `source::resource_quota`).

use crate::common;

use serde_json::{Value, json};
use watchkeeper::config::ServeArgs;

use common::{created, get_json, request, send_json, server_with, written};

const NS: &str = "/api/v1/namespaces/qa";

/// Namespace `qa` with a quota `q` of `hard`, through the server at `addr`.
async fn namespace_with_quota(addr: std::net::SocketAddr, hard: Value) {
    let (status, body) = send_json(
        addr,
        "POST",
        "/api/v1/namespaces",
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "qa"}}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = send_json(
        addr,
        "POST",
        &format!("{NS}/resourcequotas"),
        &json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q"},
            "spec": {"hard": hard}}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
}

async fn setup(hard: Value) -> watchkeeper::Server {
    let server = server_with(ServeArgs::default()).await;
    namespace_with_quota(server.addr, hard).await;
    server
}

fn configmap(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}})
}

async fn used(addr: std::net::SocketAddr) -> Value {
    let (status, quota) = get_json(addr, &format!("{NS}/resourcequotas/q")).await;
    assert_eq!(status, 200, "{quota}");
    quota["status"]["used"].clone()
}

/// Goal: a create past a count is kube-apiserver's 403 in its words, a dry run too; the
/// quota's status shows the usage at creation, after creates and after deletes; a finished pod
/// does not count; other namespaces, and pods a scoped quota does not select, are not limited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counts_are_enforced_and_shown() {
    let server = setup(json!({"count/configmaps": "2", "pods": "1", "requests.cpu": "1"})).await;
    let addr = server.addr;
    let cms = format!("{NS}/configmaps");
    let quota = get_json(addr, &format!("{NS}/resourcequotas/q")).await.1;
    assert_eq!(
        quota["status"],
        json!({"hard": {"count/configmaps": "2", "pods": "1", "requests.cpu": "1"},
            "used": {"count/configmaps": "0", "pods": "0", "requests.cpu": "0"}})
    );
    for name in ["a", "b"] {
        let (status, body) = send_json(addr, "POST", &cms, &configmap(name)).await;
        assert_eq!(status, 201, "{body}");
    }
    assert_eq!(used(addr).await["count/configmaps"], "2");
    let (status, refused) = send_json(addr, "POST", &cms, &configmap("c")).await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(refused["reason"], "Forbidden");
    assert_eq!(
        refused["message"],
        "configmaps \"c\" is forbidden: exceeded quota: q, requested: count/configmaps=1, used: count/configmaps=2, limited: count/configmaps=2"
    );
    let (status, _) = send_json(addr, "POST", &format!("{cms}?dryRun=All"), &configmap("c")).await;
    assert_eq!(status, 403, "a dry run is admitted the same way");
    // A delete frees a place and lowers the usage shown.
    let (status, _) = request(addr, "DELETE", &format!("{cms}/a"), "application/json", "").await;
    assert_eq!(status, 200);
    assert_eq!(used(addr).await["count/configmaps"], "1");
    let (status, body) = send_json(addr, "POST", &cms, &configmap("c")).await;
    assert_eq!(status, 201, "{body}");
    // Pods: a finished one does not count.
    let pod = |name: &str, phase: &str| {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "x",
                "resources": {"requests": {"cpu": "100m"}}}]}, "status": {"phase": phase}})
    };
    let pods = format!("{NS}/pods");
    let (status, body) = send_json(addr, "POST", &pods, &pod("done", "Succeeded")).await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = send_json(addr, "POST", &pods, &pod("p1", "Pending")).await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = send_json(addr, "POST", &pods, &pod("p2", "Pending")).await;
    assert_eq!(status, 403, "{body}");
    // Another namespace is not limited.
    for name in ["x", "y", "z"] {
        let (status, body) = send_json(
            addr,
            "POST",
            "/api/v1/namespaces/default/configmaps",
            &configmap(name),
        )
        .await;
        assert_eq!(status, 201, "{body}");
    }
    // A scoped quota charges only the pods its scopes select: not one that requests CPU.
    let (status, body) = send_json(
        addr,
        "POST",
        "/api/v1/namespaces/default/resourcequotas",
        &json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "scoped"},
            "spec": {"hard": {"pods": "0"}, "scopes": ["BestEffort"]}}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = send_json(
        addr,
        "POST",
        "/api/v1/namespaces/default/pods",
        &pod("free", "Pending"),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    server.shutdown().await;
}

/// Goal: a scoped quota charges the pods its scopes select, as kube's pod evaluator selects
/// them (here `BestEffort` and a `PriorityClass` selector), and only those: their count and
/// compute in its status, its limits and its "must specify" on them alone, while an unscoped
/// quota counts every pod.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scopes_select_the_pods_a_quota_charges() {
    let server = setup(json!({"pods": "10"})).await;
    let addr = server.addr;
    let (status, body) = send_json(
        addr,
        "POST",
        "/apis/scheduling.k8s.io/v1/priorityclasses",
        &json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": "high"}, "value": 1000}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let quotas = format!("{NS}/resourcequotas");
    for quota in [
        json!({"metadata": {"name": "best-effort"},
            "spec": {"hard": {"pods": "1"}, "scopes": ["BestEffort"]}}),
        json!({"metadata": {"name": "high"}, "spec": {"hard": {"pods": "1", "requests.cpu": "500m"},
            "scopeSelector": {"matchExpressions": [
                {"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}}}),
    ] {
        let mut quota = quota;
        quota["apiVersion"] = json!("v1");
        quota["kind"] = json!("ResourceQuota");
        let (status, body) = send_json(addr, "POST", &quotas, &quota).await;
        assert_eq!(status, 201, "{body}");
    }
    // kube's validation of scopes against what the quota limits.
    for (spec, message) in [
        (
            json!({"hard": {"cpu": "1"}, "scopes": ["BestEffort"]}),
            "spec.scopes: Invalid value: []core.ResourceQuotaScope{\"BestEffort\"}: unsupported scope applied to resource",
        ),
        (
            json!({"hard": {"pods": "1"}, "scopes": ["Terminating", "NotTerminating"]}),
            "spec.scopes: Invalid value: []core.ResourceQuotaScope{\"Terminating\", \"NotTerminating\"}: conflicting scopes",
        ),
        (
            json!({"hard": {"pods": "1"}, "scopeSelector": {"matchExpressions": [
            {"scopeName": "BestEffort", "operator": "In", "values": ["x"]}]}}),
            "spec.scopeSelector.matchExpressions.operator: Invalid value: \"In\": must be 'Exist' when scope is any of ResourceQuotaScopeTerminating, ResourceQuotaScopeNotTerminating, ResourceQuotaScopeBestEffort, ResourceQuotaScopeNotBestEffort or ResourceQuotaScopeCrossNamespacePodAffinity",
        ),
    ] {
        let bad = json!({"apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": {"name": "bad"}, "spec": spec});
        let (status, refused) = send_json(addr, "POST", &quotas, &bad).await;
        assert_eq!(status, 422, "{refused}");
        assert_eq!(
            refused["message"],
            format!("ResourceQuota \"bad\" is invalid: {message}")
        );
    }
    let used_by = |name: &'static str| async move {
        let (status, quota) = get_json(addr, &format!("{NS}/resourcequotas/{name}")).await;
        assert_eq!(status, 200, "{quota}");
        quota["status"]["used"].clone()
    };
    let pods = format!("{NS}/pods");
    let create = |body: Value| {
        let pods = pods.clone();
        async move { send_json(addr, "POST", &pods, &body).await }
    };
    let (status, body) = create(pod_with("be1", json!({}))).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(used_by("best-effort").await, json!({"pods": "1"}));
    let (status, refused) = create(pod_with("be2", json!({}))).await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(
        refused["message"],
        "pods \"be2\" is forbidden: exceeded quota: best-effort, requested: pods=1, used: pods=1, limited: pods=1"
    );
    // Not best-effort, no class: neither scoped quota selects it.
    let sized = json!({"requests": {"cpu": "100m"}});
    let (status, body) = create(pod_with("sized", sized.clone())).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(used_by("best-effort").await, json!({"pods": "1"}));
    assert_eq!(
        used_by("high").await,
        json!({"pods": "0", "requests.cpu": "0"})
    );
    // Of class high: that quota asks it to state its CPU, counts it and its request.
    let classed = |name: &str, resources: Value| {
        let mut pod = pod_with(name, resources);
        pod["spec"]["priorityClassName"] = json!("high");
        pod
    };
    let (status, refused) = create(classed("h0", json!({"limits": {"memory": "1Gi"}}))).await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(
        refused["message"],
        "pods \"h0\" is forbidden: failed quota: high: must specify requests.cpu for: app"
    );
    let (status, body) = create(classed("h1", json!({"requests": {"cpu": "400m"}}))).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(
        used_by("high").await,
        json!({"pods": "1", "requests.cpu": "400m"})
    );
    let (status, refused) = create(classed("h2", json!({"requests": {"cpu": "50m"}}))).await;
    assert_eq!(status, 403, "{refused}");
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .starts_with("pods \"h2\" is forbidden: exceeded quota: high, requested: pods=1"),
        "{refused}"
    );
    // The unscoped quota counts every pod; a delete gives back what its scopes charged.
    assert_eq!(used(addr).await, json!({"pods": "3"}));
    let (status, body) = request(
        addr,
        "DELETE",
        &format!("{pods}/be1"),
        "application/json",
        "",
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(used_by("best-effort").await, json!({"pods": "0"}));
    assert_eq!(used(addr).await, json!({"pods": "2"}));
    server.shutdown().await;
}

/// A pod whose one container `app` has `resources`.
fn pod_with(name: &str, resources: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"containers": [{"name": "app", "image": "x", "resources": resources}]}})
}

/// Goal: compute and storage are charged as kube's pod and claim evaluators charge them, a
/// create past a limit or a pod that does not state a limited resource is kube-apiserver's
/// 403 in its words, and the usage is shown in kube's canonical quantities.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compute_and_storage_are_enforced_and_shown() {
    let server = setup(json!({"requests.cpu": "1", "limits.memory": "1Gi",
        "requests.storage": "10Gi", "gold.storageclass.storage.k8s.io/persistentvolumeclaims": "1"}))
    .await;
    let addr = server.addr;
    let pods = format!("{NS}/pods");
    let sized = json!({"requests": {"cpu": "600m"}, "limits": {"memory": "512Mi"}});
    let (status, body) = send_json(addr, "POST", &pods, &pod_with("a", sized.clone())).await;
    assert_eq!(status, 201, "{body}");
    let usage = used(addr).await;
    assert_eq!(usage["requests.cpu"], "600m", "{usage}");
    assert_eq!(usage["limits.memory"], "512Mi", "{usage}");
    let (status, refused) = send_json(addr, "POST", &pods, &pod_with("b", sized)).await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(
        refused["message"],
        "pods \"b\" is forbidden: exceeded quota: q, requested: requests.cpu=600m, used: requests.cpu=600m, limited: requests.cpu=1"
    );
    // Every container states what the quota limits.
    let (status, refused) = send_json(
        addr,
        "POST",
        &pods,
        &pod_with("c", json!({"requests": {"cpu": "100m"}})),
    )
    .await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(
        refused["message"],
        "pods \"c\" is forbidden: failed quota: q: must specify limits.memory for: app"
    );
    // Limits stand for absent requests (kube's defaulting), and the sums keep their format.
    let (status, body) = send_json(
        addr,
        "POST",
        &pods,
        &pod_with("d", json!({"limits": {"cpu": "0.4", "memory": "0.5Gi"}})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let usage = used(addr).await;
    assert_eq!(usage["requests.cpu"], "1", "{usage}");
    assert_eq!(usage["limits.memory"], "1Gi", "{usage}");
    // A delete gives it back.
    let (status, _) = request(addr, "DELETE", &format!("{pods}/a"), "application/json", "").await;
    assert_eq!(status, 200);
    assert_eq!(used(addr).await["requests.cpu"], "400m");

    let claims = format!("{NS}/persistentvolumeclaims");
    let claim = |name: &str, size: &str, class: &str| {
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": class,
                "resources": {"requests": {"storage": size}}}})
    };
    let (status, body) = send_json(addr, "POST", &claims, &claim("one", "8Gi", "gold")).await;
    assert_eq!(status, 201, "{body}");
    let (status, refused) = send_json(addr, "POST", &claims, &claim("two", "1Gi", "gold")).await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(
        refused["message"],
        "persistentvolumeclaims \"two\" is forbidden: exceeded quota: q, requested: gold.storageclass.storage.k8s.io/persistentvolumeclaims=1, used: gold.storageclass.storage.k8s.io/persistentvolumeclaims=1, limited: gold.storageclass.storage.k8s.io/persistentvolumeclaims=1"
    );
    let (status, refused) =
        send_json(addr, "POST", &claims, &claim("three", "4Gi", "silver")).await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(
        refused["message"],
        "persistentvolumeclaims \"three\" is forbidden: exceeded quota: q, requested: requests.storage=4Gi, used: requests.storage=8Gi, limited: requests.storage=10Gi"
    );
    let (status, body) = send_json(addr, "POST", &claims, &claim("four", "2Gi", "silver")).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(used(addr).await["requests.storage"], "10Gi");
    server.shutdown().await;
}

/// Goal: a Service's load balancer and node ports are counted as kube's service evaluator
/// counts them, and a create or an update past either limit is kube's 403 naming only what
/// it passed; an update that gives usage back lowers it at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_balancers_and_node_ports_are_counted() {
    let server = setup(json!({"services.loadbalancers": "1", "services.nodeports": "3"})).await;
    let addr = server.addr;
    let services = format!("{NS}/services");
    let service = |name: &str, kind: &str, ports: usize| {
        let ports: Vec<Value> = (0..ports)
            .map(|i| json!({"name": format!("p{i}"), "port": 80 + i}))
            .collect();
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"type": kind, "ports": ports}})
    };
    let (status, body) =
        send_json(addr, "POST", &services, &service("lb", "LoadBalancer", 2)).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(
        used(addr).await,
        json!({"services.loadbalancers": "1", "services.nodeports": "2"})
    );
    let (status, refused) = send_json(addr, "POST", &services, &service("np", "NodePort", 2)).await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(
        refused["message"],
        "services \"np\" is forbidden: exceeded quota: q, requested: services.nodeports=2, used: services.nodeports=2, limited: services.nodeports=3"
    );
    let (status, refused) =
        send_json(addr, "POST", &services, &service("lb2", "LoadBalancer", 1)).await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(
        refused["message"],
        "services \"lb2\" is forbidden: exceeded quota: q, requested: services.loadbalancers=1, used: services.loadbalancers=1, limited: services.loadbalancers=1"
    );
    for (name, kind, ports) in [("np1", "NodePort", 1), ("plain", "ClusterIP", 5)] {
        let (status, body) = send_json(addr, "POST", &services, &service(name, kind, ports)).await;
        assert_eq!(status, 201, "{body}");
    }
    assert_eq!(
        used(addr).await,
        json!({"services.loadbalancers": "1", "services.nodeports": "3"})
    );
    // Updates are charged too (kube's service evaluator handles them): a Service turned
    // into a load balancer past the limit is refused, one turned back gives its place.
    let patch = |name: &str, body: &'static str| {
        let path = format!("{services}/{name}");
        async move {
            let (status, text) =
                request(addr, "PATCH", &path, "application/merge-patch+json", body).await;
            (
                status,
                serde_json::from_str::<Value>(&text).unwrap_or_default(),
            )
        }
    };
    let to_load_balancer = r#"{"spec":{"type":"LoadBalancer","ports":[{"name":"p0","port":80}]}}"#;
    let (status, refused) = patch("plain", to_load_balancer).await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(
        refused["message"],
        "services \"plain\" is forbidden: exceeded quota: q, requested: services.loadbalancers=1,services.nodeports=1, used: services.loadbalancers=1,services.nodeports=3, limited: services.loadbalancers=1,services.nodeports=3"
    );
    let (status, body) = patch("lb", r#"{"spec":{"type":"ClusterIP"}}"#).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        used(addr).await,
        json!({"services.loadbalancers": "0", "services.nodeports": "1"})
    );
    let (status, body) = patch("plain", to_load_balancer).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        used(addr).await,
        json!({"services.loadbalancers": "1", "services.nodeports": "2"})
    );
    server.shutdown().await;
}

/// Two servers sharing the test's etcd under a fresh prefix.
async fn siblings() -> (watchkeeper::Server, watchkeeper::Server) {
    let prefix = common::etcd::fresh_prefix();
    let args = || common::etcd::shared_args(&prefix);
    (server_with(args()).await, server_with(args()).await)
}

/// Goal: exact under concurrency, across servers sharing a store: 24 creates at once, half
/// through each of two servers on one etcd, against a count of 5 leave exactly 5 objects (the
/// others refused with 403), and the usage shown is 5.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_creates_on_two_servers_never_pass_a_count() {
    let (one, two) = siblings().await;
    namespace_with_quota(one.addr, json!({"configmaps": "5"})).await;
    let cms = format!("{NS}/configmaps");
    // The second server has the quota before the race starts.
    let quota_path = format!("{NS}/resourcequotas/q");
    assert_eq!(get_json(two.addr, &quota_path).await.0, 200);
    // Spawned all at once (a JoinSet), not one after another.
    let mut creates = tokio::task::JoinSet::new();
    for i in 0..24 {
        let cms = cms.clone();
        let addr = if i % 2 == 0 { one.addr } else { two.addr };
        creates.spawn(
            async move { send_json(addr, "POST", &cms, &configmap(&format!("c{i}"))).await },
        );
    }
    let mut statuses = Vec::new();
    while let Some(create) = creates.join_next().await {
        let (status, body) = create.unwrap();
        assert!(status == 201 || status == 403, "{status} {body}");
        statuses.push(status);
    }
    assert_eq!(
        statuses.iter().filter(|s| **s == 201).count(),
        5,
        "{statuses:?}"
    );
    let (_, list) = get_json(one.addr, &cms).await;
    assert_eq!(list["items"].as_array().map(Vec::len), Some(5));
    assert_eq!(used(one.addr).await["configmaps"], "5");
    one.shutdown().await;
    two.shutdown().await;
}

/// Goal: a write builds on the usage its quota states, as kube's admission builds on
/// `status.used` (so its cost does not grow with the objects a namespace holds): a create adds
/// its charge, a delete takes it away, and objects written or deleted in etcd behind the
/// server's back are not in the stated usage; but a create the stated usage would refuse counts
/// the namespace again first, so a refusal never rests on a stale usage.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_build_on_the_stated_usage_and_refusals_count_again() {
    let prefix = common::etcd::fresh_prefix();
    let server = server_with(common::etcd::shared_args(&prefix)).await;
    let addr = server.addr;
    namespace_with_quota(addr, json!({"count/configmaps": "1000"})).await;
    let cms = format!("{NS}/configmaps");
    let count = |used: Value| -> u64 {
        used["count/configmaps"]
            .as_str()
            .and_then(|n| n.parse().ok())
            .expect("a stated count")
    };
    let stated = count(used(addr).await);
    // Two more than the namespace holds now.
    common::merge_patch(
        addr,
        &format!("{NS}/resourcequotas/q"),
        &json!({"spec": {"hard": {"count/configmaps": (stated + 2).to_string()}}}).to_string(),
    )
    .await;
    let create = |name: &'static str| {
        let cms = cms.clone();
        async move { send_json(addr, "POST", &cms, &configmap(name)).await }
    };
    let (status, body) = create("mine").await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(count(used(addr).await), stated + 1);
    // Behind the server's back: the cache sees it, the quota's usage does not.
    let (_, list) = get_json(addr, &cms).await;
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut watch = common::WatchReader::open(
        addr,
        &format!("{cms}?watch=true&resourceVersion={rv}"),
        None,
    )
    .await;
    let outside =
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"outside","namespace":"qa"}}"#;
    common::etcd::etcdctl_put(&format!("{prefix}/configmaps/qa/outside"), outside).await;
    let event = watch.next().await.expect("an event");
    assert_eq!(event["object"]["metadata"]["name"], "outside", "{event}");
    // A create adds its charge to what the quota states (a count would have refused it).
    let (status, body) = create("second").await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(count(used(addr).await), stated + 2);
    let event = watch.next().await.expect("an event");
    assert_eq!(event["object"]["metadata"]["name"], "second", "{event}");
    // A delete takes its charge away from what the quota states.
    let (status, body) = request(addr, "DELETE", &format!("{cms}/second"), "", "").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(count(used(addr).await), stated + 1);
    let event = watch.next().await.expect("an event");
    assert_eq!(event["object"]["metadata"]["name"], "second", "{event}");
    // Behind the server's back again: both gone, the stated usage still counts `mine`.
    for name in ["mine", "outside"] {
        common::etcd::etcdctl_del(&format!("{prefix}/configmaps/qa/{name}")).await;
        let event = watch.next().await.expect("an event");
        assert_eq!(
            (
                event["type"].as_str(),
                event["object"]["metadata"]["name"].as_str()
            ),
            (Some("DELETED"), Some(name)),
            "{event}"
        );
    }
    let (status, body) = create("third").await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(count(used(addr).await), stated + 2);
    // The stated usage would refuse this one: counted again, the namespace holds one
    // ConfigMap of its own less than stated, so it is admitted.
    let (status, body) = create("fourth").await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(count(used(addr).await), stated + 2);
    // And now the limit holds on the count.
    let (status, body) = create("fifth").await;
    assert_eq!(status, 403, "{body}");
    server.shutdown().await;
}

/// Goal: an object that goes when its last finalizer is removed (after a DELETE, or a
/// foreground or orphan deletion carried out by the garbage collector) lowers the usage as a
/// plain DELETE does, so its place is free again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_finalized_away_frees_its_place() {
    let server = setup(json!({"count/configmaps": "1"})).await;
    let addr = server.addr;
    let cms = format!("{NS}/configmaps");
    let mut held = configmap("held");
    held["metadata"]["finalizers"] = json!(["example.com/hold"]);
    let (status, body) = send_json(addr, "POST", &cms, &held).await;
    assert_eq!(status, 201, "{body}");
    let (status, _) = request(
        addr,
        "DELETE",
        &format!("{cms}/held"),
        "application/json",
        "",
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        used(addr).await["count/configmaps"],
        "1",
        "still there, still counted"
    );
    let (status, body) = request(
        addr,
        "PATCH",
        &format!("{cms}/held"),
        "application/merge-patch+json",
        r#"{"metadata":{"finalizers":null}}"#,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (status, _) = get_json(addr, &format!("{cms}/held")).await;
    assert_eq!(status, 404, "its last finalizer gone, it went");
    assert_eq!(used(addr).await["count/configmaps"], "0");
    let (status, body) = send_json(addr, "POST", &cms, &configmap("next")).await;
    assert_eq!(status, 201, "{body}");
    server.shutdown().await;
}

/// Goal (kube's conformance test "should apply changes to a resourcequota status"): a
/// client's write of a quota's `status` is stored and answered as written, a watch sees it,
/// a spec write that leaves `spec.hard` keeps it, and the controller's resync (every
/// `--resource-quota-sync-period`) resets it from the spec; a change of `spec.hard` is
/// reflected in `status.hard` at once, as kube's controller reacts to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_written_by_a_client_is_kept_until_the_controller_resyncs() {
    // A resync period longer than the test, then one that runs during it.
    for (period, resyncs) in [("24h", false), ("200ms", true)] {
        let server = server_with(ServeArgs {
            resource_quota_sync_period: Some(period.to_owned()),
            ..ServeArgs::default()
        })
        .await;
        let addr = server.addr;
        namespace_with_quota(addr, json!({"cpu": "500m", "memory": "500Mi"})).await;
        let quota = format!("{NS}/resourcequotas/q");
        let patch = |path: String, body: &'static str| async move {
            let (status, answer) = request(
                addr,
                "PATCH",
                &path,
                "application/strategic-merge-patch+json",
                body,
            )
            .await;
            assert_eq!(status, 200, "{path}: {answer}");
            serde_json::from_str::<Value>(&answer).unwrap()
        };
        let patched = patch(
            quota.clone(),
            r#"{"spec":{"hard":{"cpu":"1","memory":"1Gi"}}}"#,
        )
        .await;
        assert_eq!(
            patched["status"]["hard"],
            json!({"cpu": "1", "memory": "1Gi"})
        );
        let (_, listed) = get_json(addr, &format!("{NS}/resourcequotas")).await;
        let from = listed["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .to_owned();
        let mut watch = common::WatchReader::open(
            addr,
            &format!("{NS}/resourcequotas?watch=true&resourceVersion={from}"),
            None,
        )
        .await;
        let repatched = patch(
            format!("{quota}/status"),
            r#"{"status":{"hard":{"cpu":"2","memory":"2Gi"}}}"#,
        )
        .await;
        assert_eq!(
            repatched["status"]["hard"],
            json!({"cpu": "2", "memory": "2Gi"})
        );
        assert_eq!(
            repatched["spec"]["hard"],
            json!({"cpu": "1", "memory": "1Gi"})
        );
        let event = watch.next().await.expect("the status write's event");
        assert_eq!(
            event["object"]["status"]["hard"],
            json!({"cpu": "2", "memory": "2Gi"})
        );
        if resyncs {
            let reset = watch.next().await.expect("the resync's event");
            assert_eq!(
                reset["object"]["status"]["hard"],
                json!({"cpu": "1", "memory": "1Gi"})
            );
            assert_eq!(
                reset["object"]["status"]["used"],
                json!({"cpu": "0", "memory": "0"})
            );
        } else {
            // A write of the main resource that leaves `spec.hard` keeps the status (checked
            // where no resync can run between the two writes).
            let labelled = patch(quota.clone(), r#"{"metadata":{"labels":{"a":"b"}}}"#).await;
            assert_eq!(
                labelled["status"]["hard"],
                json!({"cpu": "2", "memory": "2Gi"})
            );
            let (_, stored) = get_json(addr, &quota).await;
            assert_eq!(
                stored["status"]["hard"],
                json!({"cpu": "2", "memory": "2Gi"})
            );
        }
        server.shutdown().await;
    }
}

/// Goal (kube's conformance test "should create a ResourceQuota and ensure its status is
/// promptly calculated"): a quota that limits quotas counts itself from its creation on,
/// the quotas past its count are refused in kube's words, and deletes give places back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quota_counting_quotas_counts_itself() {
    let server = setup(json!({"resourcequotas": "2", "count/resourcequotas": "2"})).await;
    let addr = server.addr;
    assert_eq!(
        used(addr).await,
        json!({"count/resourcequotas": "1", "resourcequotas": "1"})
    );
    let quota = |name: &str| {
        json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name},
            "spec": {"hard": {"pods": "1"}}})
    };
    created(addr, &format!("{NS}/resourcequotas"), &quota("b")).await;
    assert_eq!(
        used(addr).await,
        json!({"count/resourcequotas": "2", "resourcequotas": "2"})
    );
    let (status, body) =
        send_json(addr, "POST", &format!("{NS}/resourcequotas"), &quota("c")).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(
        body["message"],
        "resourcequotas \"c\" is forbidden: exceeded quota: q, requested: count/resourcequotas=1,resourcequotas=1, used: count/resourcequotas=2,resourcequotas=2, limited: count/resourcequotas=2,resourcequotas=2"
    );
    // Deleting a quota gives its place back; deleting the counting quota itself deletes it
    // (its own status is not charged in the same transaction: that was a 500).
    let (status, body) = request(addr, "DELETE", &format!("{NS}/resourcequotas/b"), "", "").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        used(addr).await,
        json!({"count/resourcequotas": "1", "resourcequotas": "1"})
    );
    let (status, body) = request(addr, "DELETE", &format!("{NS}/resourcequotas/q"), "", "").await;
    assert_eq!(status, 200, "{body}");
    server.shutdown().await;
}

/// Goal: a quota made right after its namespace counts what the namespace controller makes
/// there at the same moment (the `default` ServiceAccount), as kube's
/// controller recalculates a quota it has just seen created: counted from the caches as
/// they were, the quota missed an object written at the same time about one namespace in
/// three here, and kept the wrong usage until the next resync (five minutes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quota_made_beside_its_namespace_s_first_objects_counts_them() {
    let server = server_with(ServeArgs::default()).await;
    let addr = server.addr;
    let want = json!({"count/serviceaccounts": "1"});
    for round in 0..20 {
        let namespace = format!("fresh-{round}");
        created(
            addr,
            "/api/v1/namespaces",
            &json!({"metadata": {"name": namespace}}),
        )
        .await;
        let quotas = format!("/api/v1/namespaces/{namespace}/resourcequotas");
        let quota = written(
            addr,
            "POST",
            &quotas,
            &json!({"metadata": {"name": "q"},
                "spec": {"hard": {"count/serviceaccounts": "10"}}}),
        )
        .await;
        if quota["status"]["used"] == want {
            continue;
        }
        let from = quota["metadata"]["resourceVersion"].as_str().unwrap();
        let mut watch = common::WatchReader::open(
            addr,
            &format!("{quotas}?watch=true&resourceVersion={from}"),
            None,
        )
        .await;
        loop {
            let event = watch.next().await.expect("the quota's recount");
            if event["object"]["status"]["used"] == want {
                break;
            }
        }
    }
    server.shutdown().await;
}

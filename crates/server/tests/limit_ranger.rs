//! LimitRange over HTTP, as kube-apiserver's `LimitRanger` admission applies it (see
//! `source::limit_ranger`): pods defaulted and annotated, pods and claims refused in kube's
//! words, every LimitRange of the namespace applied, ResourceQuota seeing the defaults.

use crate::common;

use serde_json::{Value, json};
use watchkeeper::config::ServeArgs;

use common::{get_json, request, send_json, server_with};

const NS: &str = "/api/v1/namespaces/lr";

/// A server with namespace `lr` and the LimitRanges `ranges` (name, `spec.limits`) in it.
async fn setup(ranges: &[(&str, Value)]) -> watchkeeper::Server {
    let server = server_with(ServeArgs::default()).await;
    let (status, body) = send_json(
        server.addr,
        "POST",
        "/api/v1/namespaces",
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "lr"}}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    for (name, limits) in ranges {
        let (status, body) = send_json(
            server.addr,
            "POST",
            &format!("{NS}/limitranges"),
            &json!({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": name},
                "spec": {"limits": limits}}),
        )
        .await;
        assert_eq!(status, 201, "{body}");
    }
    server
}

fn pod(name: &str, resources: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"containers": [{"name": "app", "image": "x", "resources": resources}]}})
}

fn claim(name: &str, size: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": size}}}})
}

/// Goal: a pod that states nothing gets the LimitRange's defaults (in kube's canonical form)
/// and kube's annotation, a request it leaves out follows its own limit, the stored
/// LimitRange shows its items' defaults, and a dry run is defaulted the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_get_the_defaults_and_the_annotation() {
    let server = setup(&[(
        "defaults",
        json!([{"type": "Container", "default": {"cpu": "0.5", "memory": "512Mi"},
            "defaultRequest": {"cpu": "100m"}}]),
    )])
    .await;
    let addr = server.addr;
    let range = get_json(addr, &format!("{NS}/limitranges/defaults"))
        .await
        .1;
    assert_eq!(
        range["spec"]["limits"][0]["defaultRequest"],
        json!({"cpu": "100m", "memory": "512Mi"}),
        "defaultRequest defaulted from default"
    );
    let pods = format!("{NS}/pods");
    let (status, created) = send_json(addr, "POST", &pods, &pod("p", json!({}))).await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(
        created["spec"]["containers"][0]["resources"],
        json!({"limits": {"cpu": "500m", "memory": "512Mi"},
            "requests": {"cpu": "100m", "memory": "512Mi"}})
    );
    assert_eq!(
        created["metadata"]["annotations"]["kubernetes.io/limit-ranger"],
        "LimitRanger plugin set: cpu, memory request for container app; cpu, memory limit for container app"
    );
    assert_eq!(created["status"]["qosClass"], "Burstable");
    let stored = get_json(addr, &format!("{pods}/p")).await.1;
    assert_eq!(
        stored["spec"]["containers"][0]["resources"],
        created["spec"]["containers"][0]["resources"]
    );
    // A limit stated: its request is the limit (kube's decoding default), not defaultRequest.
    let (status, created) = send_json(
        addr,
        "POST",
        &format!("{pods}?dryRun=All"),
        &pod("q", json!({"limits": {"cpu": "200m"}})),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(
        created["spec"]["containers"][0]["resources"],
        json!({"limits": {"cpu": "200m", "memory": "512Mi"},
            "requests": {"cpu": "200m", "memory": "512Mi"}})
    );
    assert_eq!(
        created["metadata"]["annotations"]["kubernetes.io/limit-ranger"],
        "LimitRanger plugin set: memory request for container app; memory limit for container app"
    );
    // A server-side apply that creates the pod is a create too.
    let (status, applied) = request(
        addr,
        "PATCH",
        &format!("{pods}/applied?fieldManager=test"),
        "application/apply-patch+yaml",
        r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "applied"},
            "spec": {"containers": [{"name": "app", "image": "x"}]}}"#,
    )
    .await;
    assert_eq!(status, 201, "{applied}");
    let applied: Value = serde_json::from_str(&applied).unwrap();
    assert_eq!(
        applied["spec"]["containers"][0]["resources"],
        json!({"limits": {"cpu": "500m", "memory": "512Mi"},
            "requests": {"cpu": "100m", "memory": "512Mi"}})
    );
}

/// Goal: a container past a `type: Container` min, max or ratio is kube-apiserver's 403 in
/// its words (several errors bracketed, one alone not), a dry run too, and nothing is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn containers_past_their_limits_are_refused() {
    let server = setup(&[(
        "bounds",
        json!([{"type": "Container", "max": {"cpu": "1"}, "min": {"memory": "64Mi"},
            "maxLimitRequestRatio": {"cpu": "4"}}]),
    )])
    .await;
    let addr = server.addr;
    let pods = format!("{NS}/pods");
    let over = pod(
        "p",
        json!({"limits": {"cpu": "2", "memory": "1Gi"}, "requests": {"cpu": "1", "memory": "32Mi"}}),
    );
    let (status, refused) = send_json(addr, "POST", &pods, &over).await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(refused["reason"], "Forbidden");
    assert_eq!(
        refused["message"],
        "pods \"p\" is forbidden: [minimum memory usage per Container is 64Mi, but request is 32Mi, maximum cpu usage per Container is 1, but limit is 2]"
    );
    let (status, _) = send_json(addr, "POST", &format!("{pods}?dryRun=All"), &over).await;
    assert_eq!(status, 403, "a dry run is admitted the same way");
    let (status, _) = get_json(addr, &format!("{pods}/p")).await;
    assert_eq!(status, 404);
    let ratio = pod(
        "r",
        json!({"limits": {"cpu": "1", "memory": "64Mi"}, "requests": {"cpu": "200m"}}),
    );
    let (status, refused) = send_json(addr, "POST", &pods, &ratio).await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(
        refused["message"],
        "pods \"r\" is forbidden: cpu max limit to request ratio per Container is 4, but provided ratio is 5.000000"
    );
    let fits = pod(
        "ok",
        json!({"limits": {"cpu": "1", "memory": "64Mi"}, "requests": {"cpu": "500m"}}),
    );
    let (status, body) = send_json(addr, "POST", &pods, &fits).await;
    assert_eq!(status, 201, "{body}");
}

/// Goal: a `type: Pod` max counts the pod's containers together; a claim past a
/// `type: PersistentVolumeClaim` min or max is refused on create and on update.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_and_claims_are_limited_as_wholes() {
    let server = setup(&[(
        "wholes",
        json!([{"type": "Pod", "max": {"cpu": "1500m"}},
            {"type": "PersistentVolumeClaim", "min": {"storage": "1Gi"},
                "max": {"storage": "5Gi"}}]),
    )])
    .await;
    let addr = server.addr;
    let two = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "two"},
        "spec": {"containers": [
            {"name": "a", "image": "x", "resources": {"limits": {"cpu": "1"}}},
            {"name": "b", "image": "x", "resources": {"limits": {"cpu": "1"}}}]}});
    let (status, refused) = send_json(addr, "POST", &format!("{NS}/pods"), &two).await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(
        refused["message"],
        "pods \"two\" is forbidden: maximum cpu usage per Pod is 1500m, but limit is 2"
    );
    let claims = format!("{NS}/persistentvolumeclaims");
    let (status, refused) = send_json(addr, "POST", &claims, &claim("c", "10Gi")).await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(
        refused["message"],
        "persistentvolumeclaims \"c\" is forbidden: maximum storage usage per PersistentVolumeClaim is 5Gi, but request is 10Gi"
    );
    let (status, refused) = send_json(addr, "POST", &claims, &claim("c", "500Mi")).await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(
        refused["message"],
        "persistentvolumeclaims \"c\" is forbidden: minimum storage usage per PersistentVolumeClaim is 1Gi, but request is 500Mi"
    );
    let (status, body) = send_json(addr, "POST", &claims, &claim("c", "2Gi")).await;
    assert_eq!(status, 201, "{body}");
    // A LimitRange added later holds the claim's next update to it (kube validates claim
    // updates too).
    let (status, body) = send_json(
        addr,
        "POST",
        &format!("{NS}/limitranges"),
        &json!({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "tight"},
            "spec": {"limits": [{"type": "PersistentVolumeClaim", "max": {"storage": "1Gi"}}]}}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let (status, refused) = request(
        addr,
        "PATCH",
        &format!("{claims}/c"),
        "application/merge-patch+json",
        r#"{"metadata": {"labels": {"a": "b"}}}"#,
    )
    .await;
    assert_eq!(status, 403, "an update is limited too: {refused}");
    let refused: Value = serde_json::from_str(&refused).unwrap();
    assert_eq!(
        refused["message"],
        "persistentvolumeclaims \"c\" is forbidden: maximum storage usage per PersistentVolumeClaim is 1Gi, but request is 2Gi"
    );
}

/// Goal: every LimitRange of the namespace applies: the first's defaults win, the second
/// fills what is left (its annotation is the one kept, as kube writes it per LimitRange), and
/// the second's max refuses what the first allows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_limit_range_applies() {
    let server = setup(&[
        (
            "a-cpu",
            json!([{"type": "Container", "default": {"cpu": "300m"},
                "defaultRequest": {"cpu": "100m"}}]),
        ),
        (
            "b-memory",
            json!([{"type": "Container", "default": {"cpu": "1", "memory": "128Mi"},
                "max": {"memory": "1Gi"}}]),
        ),
    ])
    .await;
    let addr = server.addr;
    let pods = format!("{NS}/pods");
    let (status, created) = send_json(addr, "POST", &pods, &pod("p", json!({}))).await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(
        created["spec"]["containers"][0]["resources"],
        json!({"limits": {"cpu": "300m", "memory": "128Mi"},
            "requests": {"cpu": "100m", "memory": "128Mi"}})
    );
    assert_eq!(
        created["metadata"]["annotations"]["kubernetes.io/limit-ranger"],
        "LimitRanger plugin set: memory request for container app; memory limit for container app"
    );
    let (status, refused) = send_json(
        addr,
        "POST",
        &pods,
        &pod("big", json!({"limits": {"memory": "2Gi"}})),
    )
    .await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(
        refused["message"],
        "pods \"big\" is forbidden: maximum memory usage per Container is 1Gi, but limit is 2Gi"
    );
}

/// Goal: without a LimitRange nothing is added to a pod.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_without_limit_ranges_changes_nothing() {
    let server = setup(&[]).await;
    let (status, created) = send_json(
        server.addr,
        "POST",
        &format!("{NS}/pods"),
        &pod("p", json!({})),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["spec"]["containers"][0]["resources"], json!({}));
    assert!(
        created["metadata"]
            .get("annotations")
            .is_none_or(|a| a.get("kubernetes.io/limit-ranger").is_none()),
        "{created}"
    );
    assert_eq!(created["status"]["qosClass"], "BestEffort");
}

/// Goal: a ResourceQuota that requires `requests.cpu` admits a pod whose request the
/// LimitRange supplies, and charges the defaulted amount (quota admission runs after
/// LimitRanger's defaults).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quota_sees_the_defaulted_requests() {
    let server = setup(&[(
        "defaults",
        json!([{"type": "Container", "defaultRequest": {"cpu": "250m"}}]),
    )])
    .await;
    let addr = server.addr;
    let (status, body) = send_json(
        addr,
        "POST",
        &format!("{NS}/resourcequotas"),
        &json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q"},
            "spec": {"hard": {"requests.cpu": "1"}}}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let (status, created) =
        send_json(addr, "POST", &format!("{NS}/pods"), &pod("p", json!({}))).await;
    assert_eq!(status, 201, "{created}");
    let quota = get_json(addr, &format!("{NS}/resourcequotas/q")).await.1;
    assert_eq!(quota["status"]["used"]["requests.cpu"], "250m", "{quota}");
}

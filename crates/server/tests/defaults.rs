//! Built-in kinds' defaults over real HTTP (memory store): minimal workloads, a Service and a
//! Pod created and read back hold the fields kube-apiserver 1.33's defaulters give them
//! (`pkg/apis/{core,apps,batch}/v1/defaults.go` and their generated nested defaulters).

use crate::common;

use common::*;
use serde_json::{Value, json};

/// The minimal pod template these tests send, and the spec kube stores for it (a template's:
/// `SetDefaults_PodSpec` and `SetDefaults_Container`, no `enableServiceLinks`; its metadata
/// gets Go's `creationTimestamp: null`).
fn template() -> Value {
    json!({"metadata": {"labels": {"app": "a"}},
        "spec": {"containers": [{"name": "c", "image": "nginx:1.25"}]}})
}

fn template_spec() -> Value {
    json!({"containers": [{"name": "c", "image": "nginx:1.25", "imagePullPolicy": "IfNotPresent",
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File", "resources": {}}],
        "restartPolicy": "Always", "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst", "securityContext": {}, "schedulerName": "default-scheduler"})
}

/// Creates `body` at `path` and reads it back.
async fn create_and_get(addr: std::net::SocketAddr, path: &str, body: Value) -> Value {
    let (status, created) = send_json(addr, "POST", path, &body).await;
    assert_eq!(status, 201, "{created}");
    let name = created["metadata"]["name"].as_str().unwrap();
    let (status, stored) = get_json(addr, &format!("{path}/{name}")).await;
    assert_eq!(status, 200, "{stored}");
    assert_eq!(stored["spec"], created["spec"]);
    stored
}

/// Deployments, StatefulSets, Jobs and CronJobs as sent by a client that names only part of
/// what kube defaults: each stored spec is kube's, whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workloads_are_stored_with_kube_s_defaults() {
    let server = server().await;
    let addr = server.addr;
    let selector = json!({"matchLabels": {"app": "a"}});
    let deployment = create_and_get(
        addr,
        "/apis/apps/v1/namespaces/default/deployments",
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"selector": selector, "template": template(),
                "strategy": {"rollingUpdate": {"maxSurge": 2}}}}),
    )
    .await;
    assert_eq!(
        deployment["spec"],
        json!({"replicas": 1, "selector": selector, "revisionHistoryLimit": 10,
            "progressDeadlineSeconds": 600,
            "strategy": {"type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": 2, "maxUnavailable": "25%"}},
            "template": {"metadata": {"creationTimestamp": null, "labels": {"app": "a"}},
                "spec": template_spec()}})
    );
    let stateful_set = create_and_get(
        addr,
        "/apis/apps/v1/namespaces/default/statefulsets",
        json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "s"},
            "spec": {"selector": selector, "serviceName": "s", "template": template(),
                "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": "1Gi"}}}}]}}),
    )
    .await;
    assert_eq!(
        stateful_set["spec"]["volumeClaimTemplates"],
        json!([{"metadata": {"creationTimestamp": null, "name": "data"},
            "spec": {"accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}}, "volumeMode": "Filesystem"},
            "status": {"phase": "Pending"}}])
    );
    assert_eq!(
        stateful_set["spec"]["updateStrategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}})
    );
    let job = create_and_get(
        addr,
        "/apis/batch/v1/namespaces/default/jobs",
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
            "spec": {"completionMode": "Indexed", "completions": 2, "backoffLimitPerIndex": 1,
                "podFailurePolicy": {"rules": [{"action": "Ignore",
                    "onPodConditions": [{"type": "DisruptionTarget"}]}]},
                "template": {"spec": {"restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "nginx:1.25"}]}}}}),
    )
    .await;
    let spec = &job["spec"];
    assert_eq!(spec["backoffLimit"], 2_147_483_647);
    assert_eq!(spec["parallelism"], 1);
    assert_eq!(spec["suspend"], false);
    // `SetDefaults_Job` since 1.29; the selector is still generated.
    assert_eq!(spec["manualSelector"], false);
    assert_eq!(
        spec["selector"]["matchLabels"]["batch.kubernetes.io/controller-uid"],
        job["metadata"]["uid"]
    );
    assert_eq!(spec["podReplacementPolicy"], "Failed");
    assert_eq!(
        spec["podFailurePolicy"],
        json!({"rules": [{"action": "Ignore",
            "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]})
    );
    let cron_job = create_and_get(
        addr,
        "/apis/batch/v1/namespaces/default/cronjobs",
        json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c"},
            "spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": {
                "spec": {"restartPolicy": "OnFailure",
                    "containers": [{"name": "c", "image": "nginx:1.25"}]}}}}}}),
    )
    .await;
    let mut pod_spec = template_spec();
    pod_spec["restartPolicy"] = json!("OnFailure");
    let spec = &cron_job["spec"];
    assert_eq!(spec["concurrencyPolicy"], "Allow");
    assert_eq!(spec["suspend"], false);
    assert_eq!(spec["successfulJobsHistoryLimit"], 3);
    assert_eq!(spec["failedJobsHistoryLimit"], 1);
    assert_eq!(spec["jobTemplate"]["spec"]["template"]["spec"], pod_spec);
    server.shutdown().await;
}

/// A Service's affinity config and target ports, and a Pod's volume without a source and its
/// gRPC probe, as kube stores them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn services_and_pods_are_stored_with_kube_s_defaults() {
    let server = server().await;
    let addr = server.addr;
    let service = create_and_get(
        addr,
        "/api/v1/namespaces/default/services",
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
            "spec": {"sessionAffinity": "ClientIP", "sessionAffinityConfig": {"clientIP": {}},
                "selector": {"app": "a"}, "ports": [{"port": 80, "targetPort": ""}]}}),
    )
    .await;
    let spec = &service["spec"];
    assert_eq!(
        spec["sessionAffinityConfig"],
        json!({"clientIP": {"timeoutSeconds": 10800}})
    );
    assert_eq!(
        spec["ports"],
        json!([{"port": 80, "targetPort": 80, "protocol": "TCP"}])
    );
    assert_eq!(spec["internalTrafficPolicy"], "Cluster");

    let pod = create_and_get(
        addr,
        "/api/v1/namespaces/default/pods",
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "nginx:1.25",
                "livenessProbe": {"grpc": {"port": 9000}},
                "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}]}],
                "volumes": [{"name": "scratch"}]}}),
    )
    .await;
    // (The service account admission adds its token volume after it.)
    assert_eq!(
        pod["spec"]["volumes"][0],
        json!({"name": "scratch", "emptyDir": {}})
    );
    assert_eq!(
        pod["spec"]["containers"][0]["livenessProbe"],
        json!({"grpc": {"port": 9000, "service": ""}, "timeoutSeconds": 1, "periodSeconds": 10,
            "successThreshold": 1, "failureThreshold": 3})
    );
    server.shutdown().await;
}

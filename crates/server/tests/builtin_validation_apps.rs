//! kube-apiserver's validation of the workloads' strategies and of `status` subresource
//! writes, over real HTTP: each invalid object or status is answered 422 Invalid with kube's
//! message (its causes, in kube's order), and a valid one of the same kind is written.

use crate::common;
use crate::kubectl_support;

use common::*;
use kubectl_support::Kubectl;
use serde_json::{Value, json};

/// kube 1.33's refusal of a StatefulSet update that changes another spec field.
const STATEFUL_SET_FORBIDDEN: &str = "spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden";

/// Merge-patches `path` with `patch`: 422 Invalid, its message returned.
async fn patch_invalid(addr: std::net::SocketAddr, path: &str, patch: &Value) -> String {
    let (status, body) = request(
        addr,
        "PATCH",
        path,
        "application/merge-patch+json",
        &patch.to_string(),
    )
    .await;
    assert_eq!(status, 422, "{path}: {body}");
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["reason"], "Invalid", "{body}");
    body["message"].as_str().unwrap().to_owned()
}

/// Merge-patches `path` with `patch`: 422 with `message`.
async fn patch_refused(addr: std::net::SocketAddr, path: &str, patch: &Value, message: &str) {
    assert_eq!(patch_invalid(addr, path, patch).await, message, "{path}");
}

fn workload(kind: &str, name: &str, spec: Value) -> Value {
    let mut object = json!({"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}});
    for (key, value) in spec.as_object().unwrap() {
        object["spec"][key] = value.clone();
    }
    object
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stateful_sets() {
    let server = server().await;
    let addr = server.addr;
    let path = "/apis/apps/v1/namespaces/default/statefulsets";
    let bogus = workload(
        "StatefulSet",
        "bogus",
        json!({"podManagementPolicy": "Bogus", "updateStrategy": {"type": "Bogus"},
            "volumeClaimTemplates": [{"metadata": {"name": "v"}, "spec": {"accessModes": ["Bogus"],
                "resources": {"requests": {"storage": "1Gi"}}}}]}),
    );
    refused(addr, path, &bogus, "StatefulSet.apps \"bogus\" is invalid: [spec.podManagementPolicy: Invalid value: \"Bogus\": must be 'OrderedReady' or 'Parallel', spec.updateStrategy: Invalid value: apps.StatefulSetUpdateStrategy{Type:\"Bogus\", RollingUpdate:(*apps.RollingUpdateStatefulSetStrategy)(nil)}: must be 'RollingUpdate' or 'OnDelete', spec.volumeClaimTemplates[0].spec.accessModes: Unsupported value: \"Bogus\": supported values: \"ReadOnlyMany\", \"ReadWriteMany\", \"ReadWriteOnce\", \"ReadWriteOncePod\"]").await;
    let on_delete = workload(
        "StatefulSet",
        "on-delete",
        json!({"updateStrategy": {"type": "OnDelete", "rollingUpdate": {"partition": 1}},
            "persistentVolumeClaimRetentionPolicy": {"whenScaled": "Keep"}}),
    );
    refused(addr, path, &on_delete, "StatefulSet.apps \"on-delete\" is invalid: [spec.updateStrategy.rollingUpdate: Invalid value: apps.RollingUpdateStatefulSetStrategy{Partition:1, MaxUnavailable:(*intstr.IntOrString)(nil)}: only allowed for updateStrategy 'RollingUpdate', spec.persistentVolumeClaimRetentionPolicy.whenScaled: Unsupported value: \"Keep\": supported values: \"Retain\", \"Delete\"]").await;
    let named = workload(
        "StatefulSet",
        "named",
        json!({"serviceName": "Bad_Name", "revisionHistoryLimit": -1}),
    );
    refused(addr, path, &named, "StatefulSet.apps \"named\" is invalid: [spec.revisionHistoryLimit: Invalid value: -1: must be greater than or equal to 0, spec.serviceName: Invalid value: \"Bad_Name\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')]").await;
    let good = workload(
        "StatefulSet",
        "db",
        json!({"serviceName": "db", "volumeClaimTemplates": [{"metadata": {"name": "v"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]}),
    );
    created(addr, path, &good).await;
    let status = format!("{path}/db/status");
    patch_refused(addr, &status, &json!({"status": {"replicas": 1, "currentReplicas": 2, "observedGeneration": -1}}),
        "StatefulSet.apps \"db\" is invalid: [status.observedGeneration: Invalid value: -1: must be greater than or equal to 0, status.currentReplicas: Invalid value: 2: cannot be greater than status.replicas]").await;
    merge_patch(
        addr,
        &status,
        r#"{"status": {"replicas": 1, "currentReplicas": 1}}"#,
    )
    .await;
    // A changed selector is the forbidden spec alone, as kube answers it.
    patch_refused(
        addr,
        &format!("{path}/db"),
        &json!({"spec": {"selector": {"matchLabels": {"app": "db", "tier": "x"}},
            "template": {"metadata": {"labels": {"app": "db", "tier": "x"}}}}}),
        &format!("StatefulSet.apps \"db\" is invalid: {STATEFUL_SET_FORBIDDEN}"),
    )
    .await;
}

/// `kubectl apply` of a StatefulSet whose claim template grew is refused with kube's message;
/// one that changes only the fields an update may change is applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_apply_of_a_stateful_set() {
    let server = server().await;
    let k = Kubectl::new(server.addr);
    let manifest = |storage: &str, replicas: u32, image: &str| {
        format!(
            "apiVersion: apps/v1\nkind: StatefulSet\nmetadata:\n  name: pg\nspec:\n  serviceName: pg\n  replicas: {replicas}\n  selector:\n    matchLabels: {{app: pg}}\n  template:\n    metadata:\n      labels: {{app: pg}}\n    spec:\n      containers:\n      - name: pg\n        image: {image}\n  volumeClaimTemplates:\n  - metadata:\n      name: data\n    spec:\n      accessModes: [ReadWriteOnce]\n      resources:\n        requests:\n          storage: {storage}\n"
        )
    };
    let file = k.manifest("pg.yaml", &manifest("1Gi", 1, "postgres:16"));
    k.ok(&["apply", "-f", &file]).await;
    let file = k.manifest("pg.yaml", &manifest("1024Mi", 3, "postgres:17"));
    let out = k.ok(&["apply", "-f", &file]).await;
    assert!(out.contains("statefulset.apps/pg configured"), "{out}");
    let file = k.manifest("pg.yaml", &manifest("2Gi", 3, "postgres:17"));
    let refused = k.fails(&["apply", "-f", &file]).await;
    assert!(
        refused.stderr.contains(&format!(
            "The StatefulSet \"pg\" is invalid: {STATEFUL_SET_FORBIDDEN}"
        )),
        "{}",
        refused.stderr
    );
    // The refused write left the set as the second apply made it (kubectl writes the same
    // amount in its canonical form, `1Gi`).
    let stored = k.json(&["get", "statefulset", "pg"]).await;
    assert_eq!(stored["spec"]["replicas"], 3);
    assert_eq!(
        stored["spec"]["template"]["spec"]["containers"][0]["image"],
        "postgres:17"
    );
    assert_eq!(
        stored["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"],
        "1Gi"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployments_and_their_status() {
    let server = server().await;
    let addr = server.addr;
    let path = "/apis/apps/v1/namespaces/default/deployments";
    let bogus = workload(
        "Deployment",
        "bogus",
        json!({"strategy": {"type": "Bogus"}}),
    );
    refused(addr, path, &bogus, "Deployment.apps \"bogus\" is invalid: spec.strategy: Unsupported value: apps.DeploymentStrategy{Type:\"Bogus\", RollingUpdate:(*apps.RollingUpdateDeployment)(nil)}: supported values: \"Recreate\", \"RollingUpdate\"").await;
    let zero = workload(
        "Deployment",
        "zero",
        json!({"strategy": {"rollingUpdate": {"maxUnavailable": 0, "maxSurge": 0}},
            "minReadySeconds": 10, "progressDeadlineSeconds": 5}),
    );
    refused(addr, path, &zero, "Deployment.apps \"zero\" is invalid: [spec.strategy.rollingUpdate.maxUnavailable: Invalid value: intstr.IntOrString{Type:0, IntVal:0, StrVal:\"\"}: may not be 0 when `maxSurge` is 0, spec.progressDeadlineSeconds: Invalid value: 5: must be greater than minReadySeconds]").await;
    created(addr, path, &workload("Deployment", "web", json!({}))).await;
    // `kubectl patch deploy web --subresource=status --type=merge -p ...`.
    let status = format!("{path}/web/status");
    patch_refused(addr, &status, &json!({"status": {"replicas": -5, "readyReplicas": 10}}),
        "Deployment.apps \"web\" is invalid: [status.replicas: Invalid value: -5: must be greater than or equal to 0, status.updatedReplicas: Invalid value: 0: cannot be greater than status.replicas, status.readyReplicas: Invalid value: 10: cannot be greater than status.replicas, status.availableReplicas: Invalid value: 0: cannot be greater than status.replicas]").await;
    let answer = merge_patch(
        addr,
        &status,
        r#"{"status": {"replicas": 2, "readyReplicas": 2, "availableReplicas": 1}}"#,
    )
    .await;
    assert_eq!(answer["status"]["readyReplicas"], 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemon_sets_replica_sets_controllers_and_jobs() {
    let server = server().await;
    let addr = server.addr;
    let path = "/apis/apps/v1/namespaces/default/daemonsets";
    let bogus = workload(
        "DaemonSet",
        "bogus",
        json!({"updateStrategy": {"type": "Bogus"}}),
    );
    refused(addr, path, &bogus, "DaemonSet.apps \"bogus\" is invalid: spec.updateStrategy: Unsupported value: apps.DaemonSetUpdateStrategy{Type:\"Bogus\", RollingUpdate:(*apps.RollingUpdateDaemonSet)(nil)}: supported values: \"RollingUpdate\", \"OnDelete\"").await;
    let both = workload(
        "DaemonSet",
        "both",
        json!({"updateStrategy": {"rollingUpdate": {"maxSurge": "10%"}}}),
    );
    refused(addr, path, &both, "DaemonSet.apps \"both\" is invalid: spec.updateStrategy.rollingUpdate.maxSurge: Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:\"10%\"}: may not be set when maxUnavailable is non-zero").await;
    created(addr, path, &workload("DaemonSet", "agent", json!({}))).await;
    patch_refused(addr, &format!("{path}/agent/status"), &json!({"status": {"numberReady": -1}}),
        "DaemonSet.apps \"agent\" is invalid: status.numberReady: Invalid value: -1: must be greater than or equal to 0").await;
    let path = "/apis/apps/v1/namespaces/default/replicasets";
    created(
        addr,
        path,
        &workload("ReplicaSet", "rs", json!({"replicas": 0})),
    )
    .await;
    patch_refused(addr, &format!("{path}/rs/status"), &json!({"status": {"replicas": 1, "availableReplicas": 1}}),
        "ReplicaSet.apps \"rs\" is invalid: status.availableReplicas: Invalid value: 1: cannot be greater than readyReplicas").await;
    let path = "/api/v1/namespaces/default/replicationcontrollers";
    let controller = json!({"apiVersion": "v1", "kind": "ReplicationController",
        "metadata": {"name": "rc"}, "spec": {"replicas": 0, "selector": {"app": "rc"},
            "template": {"metadata": {"labels": {"app": "rc"}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}});
    created(addr, path, &controller).await;
    patch_refused(addr, &format!("{path}/rc/status"), &json!({"status": {"replicas": 1, "readyReplicas": 2}}),
        "ReplicationController \"rc\" is invalid: status.readyReplicas: Invalid value: 2: cannot be greater than status.replicas").await;
    let path = "/apis/batch/v1/namespaces/default/jobs";
    let job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
        "spec": {"suspend": true, "template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox"}]}}}});
    created(addr, path, &job).await;
    patch_refused(
        addr,
        &format!("{path}/j/status"),
        &json!({"status": {"failed": -1}}),
        "Job.batch \"j\" is invalid: [status.failed: Invalid value: -1: must be greater than or equal to 0, status.failed: Invalid value: -1: cannot decrease the failed counter]",
    )
    .await;
    patch_refused(
        addr,
        &format!("{path}/j/status"),
        &json!({"status": {"conditions": [{"type": "Complete", "status": "True"}]}}),
        "Job.batch \"j\" is invalid: [status.completionTime: Required value: completionTime is required for Complete jobs, status.startTime: Required value: startTime is required for finished job]",
    )
    .await;
    // A suspended Job that never started may change its scheduling directives, not the rest
    // of its template.
    let scheduled = merge_patch(
        addr,
        &format!("{path}/j"),
        r#"{"spec": {"template": {"spec": {"nodeSelector": {"zone": "a"}}}}}"#,
    )
    .await;
    assert_eq!(
        scheduled["spec"]["template"]["spec"]["nodeSelector"]["zone"],
        "a"
    );
    let image = patch_invalid(
        addr,
        &format!("{path}/j"),
        &json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox:2"}]}}}}),
    )
    .await;
    assert!(
        image.starts_with("Job.batch \"j\" is invalid: spec.template: Invalid value: {")
            && image.ends_with("}: field is immutable"),
        "{image}"
    );
    patch_refused(
        addr,
        &format!("{path}/j"),
        &json!({"spec": {"completions": 5}}),
        "Job.batch \"j\" is invalid: spec.completions: Invalid value: 5: field is immutable",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_status_writes() {
    let server = server().await;
    let addr = server.addr;
    let path = "/api/v1/namespaces/default/pods";
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]}});
    created(addr, path, &pod).await;
    let status = format!("{path}/p/status");
    patch_refused(addr, &status, &json!({"status": {"phase": "Bogus", "conditions": [{"type": "", "status": "Maybe"}]}}),
        "Pod \"p\" is invalid: [metadata.conditions[0].Type: Invalid value: \"\": name part must be non-empty, metadata.conditions[0].Type: Invalid value: \"\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')]").await;
    patch_refused(
        addr,
        &status,
        &json!({"status": {"qosClass": "Guaranteed"}}),
        "Pod \"p\" is invalid: status.qosClass: Invalid value: \"Guaranteed\": field is immutable",
    )
    .await;
    // kube has no rule for the phase or a condition's status.
    let answer = merge_patch(
        addr,
        &status,
        r#"{"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "Maybe"}]}}"#,
    )
    .await;
    assert_eq!(answer["status"]["phase"], "Running");
    // A status without its QoS class keeps the stored one (kube's `PrepareForUpdate`).
    let mut stored = answer;
    stored["status"] = json!({"phase": "Running"});
    let (code, body) = send_json(addr, "PUT", &status, &stored).await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["status"]["qosClass"], "BestEffort", "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_and_their_status() {
    let server = server().await;
    let addr = server.addr;
    let path = "/api/v1/nodes";
    let node = |name: &str, spec: Value| json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": spec});
    refused(addr, path, &node("bogus", json!({"podCIDR": "bogus"})), "Node \"bogus\" is invalid: spec.podCIDRs[0]: Invalid value: \"bogus\": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)").await;
    created(
        addr,
        path,
        &node(
            "n1",
            json!({"podCIDR": "10.244.0.0/24", "providerID": "kind://n1"}),
        ),
    )
    .await;
    // The defaults copy the capacity into the missing `allocatable`, as kube's
    // (`SetDefaults_NodeStatus`); `ValidateNodeUpdate` alone says each once.
    patch_refused(
        addr,
        "/api/v1/nodes/n1/status",
        &json!({"status": {"capacity": {"cpu": "-1"}}}),
        "Node \"n1\" is invalid: [status.capacity.cpu: Invalid value: \"-1\": must be greater than or equal to 0, status.allocatable.cpu: Invalid value: \"-1\": must be greater than or equal to 0]",
    )
    .await;
    merge_patch(
        addr,
        "/api/v1/nodes/n1/status",
        r#"{"status": {"capacity": {"cpu": "4", "pods": "110"}}}"#,
    )
    .await;
    patch_refused(addr, "/api/v1/nodes/n1", &json!({"spec": {"podCIDR": "10.244.1.0/24", "providerID": "kind://n2"}}),
        "Node \"n1\" is invalid: [spec.podCIDRs: Forbidden: node updates may not change podCIDR except from \"\" to valid, spec.providerID: Forbidden: node updates may not change providerID except from \"\" to valid]").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_config_secrets() {
    let server = server().await;
    let addr = server.addr;
    let path = "/api/v1/namespaces/default/secrets";
    let secret = |name: &str, kind: &str, key: &str, contents: &str| {
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "type": kind,
            "stringData": {key: contents}})
    };
    refused(addr, path, &secret("json", "kubernetes.io/dockerconfigjson", ".dockerconfigjson", "not json"),
        "Secret \"json\" is invalid: data[.dockerconfigjson]: Invalid value: \"<secret contents redacted>\": invalid character 'o' in literal null (expecting 'u')").await;
    refused(addr, path, &secret("cfg", "kubernetes.io/dockercfg", ".dockercfg", "[]"),
        "Secret \"cfg\" is invalid: data[.dockercfg]: Invalid value: \"<secret contents redacted>\": json: cannot unmarshal array into Go value of type map[string]interface {}").await;
    created(
        addr,
        path,
        &secret(
            "pull",
            "kubernetes.io/dockerconfigjson",
            ".dockerconfigjson",
            r#"{"auths": {"example.com": {"auth": "dTpw"}}}"#,
        ),
    )
    .await;
}

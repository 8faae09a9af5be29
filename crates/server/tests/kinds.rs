//! The storage, node, admission-policy and flow-control kinds over real HTTP (memory store):
//! kube's defaults, the `status` subresource's rules, generation, kube's validation answers,
//! Table columns and protobuf.

use crate::common;

use common::*;
use serde_json::{Value, json};

const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io";
const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

async fn get_as(addr: std::net::SocketAddr, path: &str, accept: &str) -> (u16, Vec<u8>) {
    let response = watchkeeper_testkit::request(addr, "GET", path, &[("accept", accept)], b"")
        .await
        .unwrap();
    (response.status, response.body)
}

/// A RuntimeClass: served cluster-scoped, its handler a DNS label and immutable (422 with
/// kube's wording), printed with kube's `Handler` column, and answered in protobuf.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runtime_classes() {
    let server = server().await;
    let addr = server.addr;
    let base = "/apis/node.k8s.io/v1/runtimeclasses";
    let class = json!({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
        "metadata": {"name": "gvisor"}, "handler": "runsc"});
    let (status, created) = send_json(addr, "POST", base, &class).await;
    assert_eq!(status, 201, "{created}");
    assert!(created["metadata"].get("namespace").is_none());
    assert!(created["metadata"].get("generation").is_none());

    let bad = json!({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
        "metadata": {"name": "bad"}, "handler": "Run_SC"});
    let (status, refused) = send_json(addr, "POST", base, &bad).await;
    assert_eq!(status, 422, "{refused}");
    assert_eq!(refused["reason"], "Invalid");
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .starts_with("RuntimeClass.node.k8s.io \"bad\" is invalid: handler: Invalid value: \"Run_SC\": a lowercase RFC 1123 label"),
        "{refused}"
    );
    assert_eq!(refused["details"]["causes"][0]["field"], "handler");

    let (status, refused) = request(
        addr,
        "PATCH",
        &format!("{base}/gvisor"),
        "application/merge-patch+json",
        r#"{"handler": "kata"}"#,
    )
    .await;
    assert_eq!(status, 422, "{refused}");
    let refused: Value = serde_json::from_str(&refused).unwrap();
    assert_eq!(
        refused["message"],
        "RuntimeClass.node.k8s.io \"gvisor\" is invalid: handler: Invalid value: \"kata\": field is immutable"
    );

    let (status, table) = get_as(addr, base, TABLE).await;
    assert_eq!(status, 200);
    let table: Value = serde_json::from_slice(&table).unwrap();
    let names: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Name", "Handler", "Age"]);
    assert_eq!(table["rows"][0]["cells"][1], "runsc");

    let (status, body) = get_as(addr, &format!("{base}/gvisor"), PROTOBUF).await;
    assert_eq!(status, 200);
    let decoded = watchkeeper_api::protobuf::decode_response(&body).unwrap();
    assert_eq!(decoded["handler"], "runsc");
    assert_eq!(decoded["kind"], "RuntimeClass");
}

/// A CSIDriver gets kube's defaults, and its `attachRequired` is immutable (at kube's path
/// `spec.attachedRequired`) while `podInfoOnMount` may change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn csi_drivers() {
    let server = server().await;
    let addr = server.addr;
    let base = "/apis/storage.k8s.io/v1/csidrivers";
    let driver = json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver",
        "metadata": {"name": "csi.example.com"}, "spec": {}});
    let (status, created) = send_json(addr, "POST", base, &driver).await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(
        created["spec"],
        json!({"attachRequired": true, "fsGroupPolicy": "ReadWriteOnceWithFSType",
               "podInfoOnMount": false, "requiresRepublish": false, "seLinuxMount": false,
               "storageCapacity": false, "volumeLifecycleModes": ["Persistent"]})
    );
    // kube's strategy: no generation on create, one more on every spec change.
    assert!(created["metadata"].get("generation").is_none(), "{created}");
    let path = format!("{base}/csi.example.com");
    let labelled = merge_patch(addr, &path, r#"{"metadata": {"labels": {"a": "b"}}}"#).await;
    assert!(
        labelled["metadata"].get("generation").is_none(),
        "{labelled}"
    );
    let changed = merge_patch(addr, &path, r#"{"spec": {"podInfoOnMount": true}}"#).await;
    assert_eq!(changed["spec"]["podInfoOnMount"], true);
    assert_eq!(changed["metadata"]["generation"], 1);
    let changed = merge_patch(addr, &path, r#"{"spec": {"requiresRepublish": true}}"#).await;
    assert_eq!(changed["metadata"]["generation"], 2);
    let (status, refused) = request(
        addr,
        "PATCH",
        &path,
        "application/merge-patch+json",
        r#"{"spec": {"attachRequired": false}}"#,
    )
    .await;
    assert_eq!(status, 422, "{refused}");
    let refused: Value = serde_json::from_str(&refused).unwrap();
    assert_eq!(
        refused["message"],
        "CSIDriver.storage.k8s.io \"csi.example.com\" is invalid: spec.attachedRequired: Invalid value: false: field is immutable"
    );
}

/// A VolumeAttachment is created without the status it was sent with, keeps its status on
/// writes of the main endpoint and its spec on writes of `/status`, and its spec is immutable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volume_attachments_follow_the_status_subresource() {
    let server = server().await;
    let addr = server.addr;
    let base = "/apis/storage.k8s.io/v1/volumeattachments";
    let attachment = json!({"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment",
        "metadata": {"name": "va"},
        "spec": {"attacher": "csi.example.com", "nodeName": "node-1",
                 "source": {"persistentVolumeName": "pv-1"}},
        "status": {"attached": true}});
    let (status, created) = send_json(addr, "POST", base, &attachment).await;
    assert_eq!(status, 201, "{created}");
    assert!(created.get("status").is_none(), "{created}");

    let path = format!("{base}/va");
    let attached = merge_patch(
        addr,
        &format!("{path}/status"),
        r#"{"status": {"attached": true}, "spec": {"nodeName": "node-2"}}"#,
    )
    .await;
    assert_eq!(attached["status"]["attached"], true);
    assert_eq!(attached["spec"]["nodeName"], "node-1");

    let labelled = merge_patch(
        addr,
        &path,
        r#"{"metadata": {"labels": {"a": "b"}}, "status": {"attached": false}}"#,
    )
    .await;
    assert_eq!(labelled["status"]["attached"], true);
    assert_eq!(labelled["metadata"]["labels"]["a"], "b");

    let (status, refused) = request(
        addr,
        "PATCH",
        &path,
        "application/merge-patch+json",
        r#"{"spec": {"nodeName": "node-2"}}"#,
    )
    .await;
    assert_eq!(status, 422, "{refused}");
    let refused: Value = serde_json::from_str(&refused).unwrap();
    let message = refused["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "VolumeAttachment.storage.k8s.io \"va\" is invalid: spec: Invalid value: "
        ) && message.ends_with(": field is immutable"),
        "{message}"
    );

    let missing = json!({"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment",
        "metadata": {"name": "nothing"}, "spec": {"attacher": "csi.example.com", "nodeName": "n", "source": {}}});
    let (status, refused) = send_json(addr, "POST", base, &missing).await;
    assert_eq!(status, 422, "{refused}");
    assert_eq!(
        refused["message"],
        "VolumeAttachment.storage.k8s.io \"nothing\" is invalid: spec.source: Required value: must specify exactly one of inlineVolumeSpec and persistentVolumeName"
    );
}

/// FlowSchemas and PriorityLevelConfigurations: defaults, generation 1 and bumped on a spec
/// change only, status dropped on create, and kube's validation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flow_control_kinds() {
    let server = server().await;
    let addr = server.addr;
    let levels = "/apis/flowcontrol.apiserver.k8s.io/v1/prioritylevelconfigurations";
    let level = json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1",
        "kind": "PriorityLevelConfiguration", "metadata": {"name": "workload"},
        "spec": {"type": "Limited", "limited": {"limitResponse": {"type": "Queue", "queuing": {}}}},
        "status": {"conditions": [{"type": "X", "status": "True"}]}});
    let (status, created) = send_json(addr, "POST", levels, &level).await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["metadata"]["generation"], 1);
    assert!(created.get("status").is_none(), "{created}");
    assert_eq!(
        created["spec"]["limited"],
        json!({"lendablePercent": 0, "nominalConcurrencyShares": 30,
               "limitResponse": {"type": "Queue", "queuing": {"handSize": 8, "queueLengthLimit": 50, "queues": 64}}})
    );

    let schemas = "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas";
    let schema = json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
        "metadata": {"name": "workload"},
        "spec": {"priorityLevelConfiguration": {"name": "workload"},
                 "rules": [{"subjects": [{"kind": "Group", "group": {"name": "system:authenticated"}}],
                            "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}]}});
    let (status, created) = send_json(addr, "POST", schemas, &schema).await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["spec"]["matchingPrecedence"], 1000);
    assert_eq!(created["metadata"]["generation"], 1);
    let path = format!("{schemas}/workload");
    let labelled = merge_patch(addr, &path, r#"{"metadata": {"labels": {"a": "b"}}}"#).await;
    assert_eq!(labelled["metadata"]["generation"], 1);
    let moved = merge_patch(addr, &path, r#"{"spec": {"matchingPrecedence": 500}}"#).await;
    assert_eq!(moved["metadata"]["generation"], 2);
    let dangling = merge_patch(
        addr,
        &format!("{path}/status"),
        r#"{"status": {"conditions": [{"type": "Dangling", "status": "False"}]}}"#,
    )
    .await;
    assert_eq!(dangling["status"]["conditions"][0]["type"], "Dangling");
    assert_eq!(dangling["metadata"]["generation"], 2);

    let (status, table) = get_as(addr, &path, TABLE).await;
    assert_eq!(status, 200);
    let table: Value = serde_json::from_slice(&table).unwrap();
    assert_eq!(
        table["rows"][0]["cells"],
        json!([
            "workload",
            "workload",
            500,
            "<none>",
            table["rows"][0]["cells"][4],
            "False"
        ])
    );

    let (status, refused) = request(
        addr,
        "PATCH",
        &path,
        "application/merge-patch+json",
        r#"{"spec": {"matchingPrecedence": 1}}"#,
    )
    .await;
    assert_eq!(status, 422, "{refused}");
    let refused: Value = serde_json::from_str(&refused).unwrap();
    assert_eq!(
        refused["message"],
        "FlowSchema.flowcontrol.apiserver.k8s.io \"workload\" is invalid: spec.matchingPrecedence: Invalid value: 1: only the schema named 'exempt' may have matchingPrecedence 1"
    );
}

/// ValidatingAdmissionPolicies and their bindings are stored with kube's defaults and
/// refused with kube's wording; a policy's status is its `/status`'s only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admission_policies() {
    let server = server().await;
    let addr = server.addr;
    let policies = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies";
    let policy = json!({"apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy", "metadata": {"name": "replicas"},
        "spec": {"matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                     "operations": ["CREATE"], "resources": ["deployments"]}]},
                 "validations": [{"expression": "object.spec.replicas <= 5"}]},
        "status": {"observedGeneration": 7}});
    let (status, created) = send_json(addr, "POST", policies, &policy).await;
    assert_eq!(status, 201, "{created}");
    assert!(created.get("status").is_none(), "{created}");
    assert_eq!(created["metadata"]["generation"], 1);
    assert_eq!(created["spec"]["failurePolicy"], "Fail");
    assert_eq!(
        created["spec"]["matchConstraints"]["matchPolicy"],
        "Equivalent"
    );
    assert_eq!(
        created["spec"]["matchConstraints"]["resourceRules"][0]["scope"],
        "*"
    );
    let checked = merge_patch(
        addr,
        &format!("{policies}/replicas/status"),
        r#"{"status": {"observedGeneration": 1}}"#,
    )
    .await;
    assert_eq!(checked["status"]["observedGeneration"], 1);

    let bindings = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings";
    let binding = json!({"apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": "replicas"},
        "spec": {"policyName": "replicas", "validationActions": ["Deny", "Warn"]}});
    let (status, refused) = send_json(addr, "POST", bindings, &binding).await;
    assert_eq!(status, 422, "{refused}");
    assert_eq!(
        refused["message"],
        "ValidatingAdmissionPolicyBinding.admissionregistration.k8s.io \"replicas\" is invalid: spec.validationActions: Invalid value: []admissionregistration.ValidationAction{\"Deny\", \"Warn\"}: must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)"
    );
    let mut binding = binding;
    binding["spec"]["validationActions"] = json!(["Deny"]);
    let (status, created) = send_json(addr, "POST", bindings, &binding).await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["metadata"]["generation"], 1);
}

/// A ControllerRevision's `data` (a `runtime.RawExtension`) and a namespaced
/// CSIStorageCapacity round-trip through protobuf.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revisions_and_capacities_in_protobuf() {
    let server = server().await;
    let addr = server.addr;
    let revisions = "/apis/apps/v1/namespaces/default/controllerrevisions";
    let revision = json!({"apiVersion": "apps/v1", "kind": "ControllerRevision",
        "metadata": {"name": "web-1"}, "revision": 1,
        "data": {"spec": {"template": {"metadata": {"labels": {"app": "web"}}}}}});
    let (status, created) = send_json(addr, "POST", revisions, &revision).await;
    assert_eq!(status, 201, "{created}");
    let (status, body) = get_as(addr, &format!("{revisions}/web-1"), PROTOBUF).await;
    assert_eq!(status, 200);
    let decoded = watchkeeper_api::protobuf::decode_response(&body).unwrap();
    assert_eq!(decoded["data"], revision["data"]);
    assert_eq!(decoded["revision"], 1);

    let (status, refused) = send_json(
        addr,
        "POST",
        revisions,
        &json!({"apiVersion": "apps/v1", "kind": "ControllerRevision",
                "metadata": {"name": "empty"}, "revision": 2}),
    )
    .await;
    assert_eq!(status, 422, "{refused}");
    assert_eq!(
        refused["message"],
        "ControllerRevision.apps \"empty\" is invalid: data: Required value: data is mandatory"
    );

    let capacities = "/apis/storage.k8s.io/v1/namespaces/default/csistoragecapacities";
    let capacity = json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSIStorageCapacity",
        "metadata": {"name": "fast-zone-a"}, "storageClassName": "fast", "capacity": "10Gi"});
    let (status, created) = send_json(addr, "POST", capacities, &capacity).await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["metadata"]["namespace"], "default");
    let (status, body) = get_as(addr, capacities, PROTOBUF).await;
    assert_eq!(status, 200);
    let list = watchkeeper_api::protobuf::decode_response(&body).unwrap();
    assert_eq!(list["items"][0]["capacity"], "10Gi");
}

/// A server starts with kube-apiserver's own PriorityClasses and API Priority and Fairness'
/// mandatory configuration, which kube-apiserver's Table prints as it does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn started_with_kube_apiserver_priority_classes_and_flow_control_objects() {
    let server = server().await;
    let addr = server.addr;
    let (status, classes) = get_json(addr, "/apis/scheduling.k8s.io/v1/priorityclasses").await;
    assert_eq!(status, 200);
    let mut found: Vec<(String, i64)> = classes["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["metadata"]["name"].as_str().unwrap().to_owned(),
                c["value"].as_i64().unwrap(),
            )
        })
        .collect();
    found.sort();
    assert_eq!(
        found,
        [
            ("system-cluster-critical".to_owned(), 2_000_000_000),
            ("system-node-critical".to_owned(), 2_000_001_000)
        ]
    );

    let (status, table) = get_as(
        addr,
        "/apis/flowcontrol.apiserver.k8s.io/v1/prioritylevelconfigurations",
        TABLE,
    )
    .await;
    assert_eq!(status, 200);
    let table: Value = serde_json::from_slice(&table).unwrap();
    let rows: Vec<Value> = table["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let cells = r["cells"].as_array().unwrap();
            json!(cells[..6])
        })
        .collect();
    assert_eq!(
        rows,
        [
            json!(["catch-all", "Limited", 5, "<none>", "<none>", "<none>"]),
            json!(["exempt", "Exempt", "<none>", "<none>", "<none>", "<none>"]),
            json!(["global-default", "Limited", 20, 128, 6, 50]),
            json!(["leader-election", "Limited", 10, 16, 4, 50]),
            json!(["node-high", "Limited", 40, 64, 6, 50]),
            json!(["system", "Limited", 30, 64, 6, 50]),
            json!(["workload-high", "Limited", 40, 128, 6, 50]),
            json!(["workload-low", "Limited", 100, 128, 6, 50]),
        ]
    );
    let (status, schema) = get_json(
        addr,
        "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas/catch-all",
    )
    .await;
    assert_eq!(status, 200, "{schema}");
    assert_eq!(
        schema["metadata"]["annotations"]["apf.kubernetes.io/autoupdate-spec"],
        "true"
    );
    assert_eq!(schema["metadata"]["generation"], 1);
    assert_eq!(schema["spec"]["matchingPrecedence"], 10000);
    let (status, exempt) = get_json(
        addr,
        "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas/exempt",
    )
    .await;
    assert_eq!(status, 200, "{exempt}");
    assert_eq!(
        exempt["spec"]["rules"][0]["subjects"],
        json!([{"kind": "Group", "group": {"name": "system:masters"}}])
    );
    // Their specs are fixed, as kube-apiserver's validation fixes them; metadata is not.
    let (status, refused) = request(
        addr,
        "PATCH",
        "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas/catch-all",
        "application/merge-patch+json",
        r#"{"spec": {"matchingPrecedence": 9000}}"#,
    )
    .await;
    assert_eq!(status, 422, "{refused}");
    assert!(
        refused.contains("spec of 'catch-all' must equal the fixed value"),
        "{refused}"
    );
    let labelled = merge_patch(
        addr,
        "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas/catch-all",
        r#"{"metadata": {"labels": {"a": "b"}}}"#,
    )
    .await;
    assert_eq!(labelled["metadata"]["generation"], 1);
}

/// `autoscaling/v1` HorizontalPodAutoscalers are the `autoscaling/v2` ones, converted as kube
/// converts them: a v1 write is read at v2 with its cpu target as a metric, a v2 object read
/// at v1 keeps its other metrics in kube's annotation, and written back at v1 it is unchanged
/// at v2. Discovery lists both versions, v2 preferred; v1 answers Tables and protobuf.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn autoscaling_v1_is_a_view_of_v2() {
    let server = server().await;
    let addr = server.addr;
    let (status, group) = get_json(addr, "/apis/autoscaling").await;
    assert_eq!(status, 200);
    assert_eq!(
        group["versions"],
        json!([{"groupVersion": "autoscaling/v2", "version": "v2"},
               {"groupVersion": "autoscaling/v1", "version": "v1"}])
    );
    assert_eq!(group["preferredVersion"]["version"], "v2");
    let (status, list) = get_json(addr, "/apis/autoscaling/v1").await;
    assert_eq!(status, 200);
    let names: Vec<&str> = list["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "horizontalpodautoscalers",
            "horizontalpodautoscalers/status"
        ]
    );

    let v1 = "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers";
    let v2 = "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers";
    let (status, created) = send_json(
        addr,
        "POST",
        v1,
        &json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
                "metadata": {"name": "web"},
                "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                         "maxReplicas": 5, "targetCPUUtilizationPercentage": 60}}),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["apiVersion"], "autoscaling/v1");
    assert_eq!(created["spec"]["minReplicas"], 1);
    assert_eq!(created["spec"]["targetCPUUtilizationPercentage"], 60);
    let (status, at_v2) = get_json(addr, &format!("{v2}/web")).await;
    assert_eq!(status, 200);
    assert_eq!(
        at_v2["spec"]["metrics"],
        json!([{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 60}}}])
    );

    let (status, created) = send_json(
        addr,
        "POST",
        v2,
        &json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                "metadata": {"name": "api"},
                "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "api"},
                         "minReplicas": 2, "maxReplicas": 9,
                         "metrics": [{"type": "Pods", "pods": {"metric": {"name": "qps"},
                                      "target": {"type": "AverageValue", "averageValue": "10"}}}]}}),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let (status, at_v1) = get_json(addr, &format!("{v1}/api")).await;
    assert_eq!(status, 200);
    assert!(
        at_v1["spec"]
            .get("targetCPUUtilizationPercentage")
            .is_none(),
        "{at_v1}"
    );
    assert_eq!(
        at_v1["metadata"]["annotations"]["autoscaling.alpha.kubernetes.io/metrics"],
        r#"[{"type":"Pods","pods":{"metricName":"qps","targetAverageValue":"10"}}]"#
    );
    // Written back at v1 (kubectl edit against v1): the v2 object is unchanged.
    let mut edited = at_v1.clone();
    edited["metadata"]["labels"] = json!({"tier": "api"});
    let (status, updated) = send_json(addr, "PUT", &format!("{v1}/api"), &edited).await;
    assert_eq!(status, 200, "{updated}");
    let (_, again) = get_json(addr, &format!("{v2}/api")).await;
    assert_eq!(again["spec"]["metrics"], created["spec"]["metrics"]);
    assert_eq!(again["metadata"]["labels"]["tier"], "api");
    assert!(again["metadata"].get("annotations").is_none(), "{again}");

    let (status, table) = get_as(addr, &format!("{v1}/web"), TABLE).await;
    assert_eq!(status, 200);
    let table: Value = serde_json::from_slice(&table).unwrap();
    assert_eq!(table["rows"][0]["cells"][2], "cpu: <unknown>/60%");
    let (status, body) = get_as(addr, &format!("{v1}/web"), PROTOBUF).await;
    assert_eq!(status, 200);
    let decoded = watchkeeper_api::protobuf::decode_response(&body).unwrap();
    assert_eq!(decoded["apiVersion"], "autoscaling/v1");
    assert_eq!(decoded["spec"]["targetCPUUtilizationPercentage"], 60);
}

/// Server-side apply of the new kinds (a ControllerRevision's free-form `data`, a FlowSchema's
/// rules), and their OpenAPI v3 documents (what `kubectl explain` and `apply` read), at
/// `autoscaling/v1` too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn applied_and_explained() {
    let server = server().await;
    let addr = server.addr;
    let apply = "application/apply-patch+yaml";
    let path = "/apis/apps/v1/namespaces/default/controllerrevisions/web-2?fieldManager=test";
    let revision = json!({"apiVersion": "apps/v1", "kind": "ControllerRevision",
        "metadata": {"name": "web-2"}, "revision": 2,
        "data": {"spec": {"template": {"spec": {"containers": [{"name": "web", "image": "nginx"}]}}}}});
    let (status, body) = request(addr, "PATCH", path, apply, &revision.to_string()).await;
    assert_eq!(status, 201, "{body}");
    let applied: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(applied["data"], revision["data"]);
    assert_eq!(applied["metadata"]["managedFields"][0]["manager"], "test");
    let path = "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas/applied?fieldManager=test";
    let schema = json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
        "metadata": {"name": "applied"},
        "spec": {"priorityLevelConfiguration": {"name": "catch-all"}, "matchingPrecedence": 9000,
                 "rules": [{"subjects": [{"kind": "User", "user": {"name": "alice"}}],
                            "resourceRules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"],
                                               "namespaces": ["*"]}]}]}});
    let (status, body) = request(addr, "PATCH", path, apply, &schema.to_string()).await;
    assert_eq!(status, 201, "{body}");
    let applied: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(applied["metadata"]["generation"], 1);

    for (group_version, definition) in [
        (
            "flowcontrol.apiserver.k8s.io/v1",
            "io.k8s.api.flowcontrol.v1.FlowSchema",
        ),
        ("node.k8s.io/v1", "io.k8s.api.node.v1.RuntimeClass"),
        (
            "autoscaling/v1",
            "io.k8s.api.autoscaling.v1.HorizontalPodAutoscaler",
        ),
        (
            "autoscaling/v2",
            "io.k8s.api.autoscaling.v2.HorizontalPodAutoscaler",
        ),
    ] {
        let (status, document) = get_json(addr, &format!("/openapi/v3/apis/{group_version}")).await;
        assert_eq!(status, 200, "{group_version}");
        assert!(
            document["components"]["schemas"].get(definition).is_some(),
            "{group_version}: {definition}"
        );
    }
}

/// Goal (kube's conformance tests of status endpoints, which patch `/status` with an
/// annotation): a write of `/status` takes the metadata it changes and keeps the stored spec,
/// as each kind's status strategy does — a Deployment keeps its stored labels, the generation
/// stays — while the kinds whose strategy keeps the stored metadata (FlowSchemas,
/// VolumeAttachments) keep it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_writes_take_the_metadata_their_strategy_lets_them() {
    let server = server().await;
    let addr = server.addr;
    let ingresses = "/apis/networking.k8s.io/v1/namespaces/default/ingresses";
    let ingress = json!({"metadata": {"name": "ing"},
        "spec": {"defaultBackend": {"service": {"name": "s", "port": {"number": 80}}}}});
    written(addr, "POST", ingresses, &ingress).await;
    let patched = merge_patch(
        addr,
        &format!("{ingresses}/ing/status"),
        r#"{"metadata": {"annotations": {"patchedstatus": "true"}, "labels": {"a": "b"}},
            "spec": {"defaultBackend": {"service": {"name": "changed"}}},
            "status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.1"}]}}}"#,
    )
    .await;
    assert_eq!(patched["metadata"]["annotations"]["patchedstatus"], "true");
    assert_eq!(patched["metadata"]["labels"]["a"], "b");
    assert_eq!(patched["metadata"]["generation"], 1);
    assert_eq!(patched["spec"]["defaultBackend"]["service"]["name"], "s");
    assert_eq!(
        patched["status"]["loadBalancer"]["ingress"][0]["ip"],
        "203.0.113.1"
    );

    let deployments = "/apis/apps/v1/namespaces/default/deployments";
    let deployment = json!({"metadata": {"name": "dep", "labels": {"a": "b"}},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "x"}},
            "template": {"metadata": {"labels": {"app": "x"}},
                "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
    written(addr, "POST", deployments, &deployment).await;
    let patched = merge_patch(
        addr,
        &format!("{deployments}/dep/status"),
        r#"{"metadata": {"annotations": {"patchedstatus": "true"}, "labels": {"c": "d"}},
            "spec": {"replicas": 5},
            "status": {"conditions": [{"type": "StatusPatched", "status": "True"}]}}"#,
    )
    .await;
    assert_eq!(patched["metadata"]["annotations"]["patchedstatus"], "true");
    assert_eq!(patched["metadata"]["labels"], json!({"a": "b"}));
    assert_eq!(patched["metadata"]["generation"], 1);
    assert_eq!(patched["spec"]["replicas"], 1);
    assert_eq!(patched["status"]["conditions"][0]["type"], "StatusPatched");

    let jobs = "/apis/batch/v1/namespaces/default/jobs";
    let job = json!({"metadata": {"name": "job"},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "c", "image": "i"}]}}}});
    written(addr, "POST", jobs, &job).await;
    let patched = merge_patch(
        addr,
        &format!("{jobs}/job/status"),
        r#"{"metadata": {"annotations": {"patchedstatus": "true"}},
            "status": {"conditions": [{"type": "CustomConditionType", "status": "True",
                "lastTransitionTime": "2026-12-06T12:00:00Z"}]}}"#,
    )
    .await;
    assert_eq!(patched["metadata"]["annotations"]["patchedstatus"], "true");
    assert_eq!(
        patched["status"]["conditions"][0]["lastTransitionTime"],
        "2026-12-06T12:00:00Z"
    );

    let schemas = "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas";
    let schema = json!({"metadata": {"name": "kept"},
        "spec": {"priorityLevelConfiguration": {"name": "global-default"}}});
    written(addr, "POST", schemas, &schema).await;
    let patched = merge_patch(
        addr,
        &format!("{schemas}/kept/status"),
        r#"{"metadata": {"annotations": {"patchedstatus": "true"}},
            "status": {"conditions": [{"type": "Dangling", "status": "False"}]}}"#,
    )
    .await;
    assert!(
        patched["metadata"].get("annotations").is_none(),
        "{patched}"
    );
    assert_eq!(patched["status"]["conditions"][0]["type"], "Dangling");
    server.shutdown().await;
}

/// Goal: a write of `/status` of the other kinds keeps the stored spec, as their kube status
/// strategies do (`newPod.Spec = oldPod.Spec`, nodes, volumes, claims, autoscalers, ...), and
/// a pod's keeps its owner references; the metadata it changes is taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_writes_of_the_other_kinds_keep_their_spec() {
    let server = server().await;
    let addr = server.addr;
    let cases = [
        (
            "/api/v1/persistentvolumes",
            json!({"metadata": {"name": "pv"}, "spec": {"capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/tmp/x"},
                "storageClassName": ""}}),
            r#"{"spec": {"capacity": {"storage": "5Gi"}}, "status": {"message": "m"}}"#,
            "/spec/capacity/storage",
        ),
        (
            "/api/v1/namespaces/default/persistentvolumeclaims",
            json!({"metadata": {"name": "claim"}, "spec": {"accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}}, "storageClassName": ""}}),
            r#"{"spec": {"resources": {"requests": {"storage": "5Gi"}}}, "status": {"phase": "Pending"}}"#,
            "/spec/resources/requests/storage",
        ),
        (
            "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers",
            json!({"metadata": {"name": "hpa"}, "spec": {"scaleTargetRef": {"apiVersion": "apps/v1",
                "kind": "Deployment", "name": "d"}, "minReplicas": 1, "maxReplicas": 3}}),
            r#"{"spec": {"maxReplicas": 9}, "status": {"currentReplicas": 1, "desiredReplicas": 1}}"#,
            "/spec/maxReplicas",
        ),
        (
            "/api/v1/nodes",
            json!({"metadata": {"name": "node"}, "spec": {}}),
            r#"{"spec": {"unschedulable": true}, "status": {"phase": "Running"}}"#,
            "/spec/unschedulable",
        ),
        (
            "/api/v1/namespaces/default/pods",
            json!({"metadata": {"name": "pod"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}),
            r#"{"metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "x",
                "uid": "00000000-0000-0000-0000-000000000001"}]},
                "spec": {"activeDeadlineSeconds": 5}, "status": {"phase": "Running"}}"#,
            "/spec/activeDeadlineSeconds",
        ),
    ];
    for (collection, object, patch, field) in cases {
        let created = written(addr, "POST", collection, &object).await;
        let name = created["metadata"]["name"].as_str().unwrap();
        let patch: Value = serde_json::from_str(patch).unwrap();
        let mut with_annotation = patch.clone();
        with_annotation["metadata"]["annotations"] = json!({"patchedstatus": "true"});
        let patched = merge_patch(
            addr,
            &format!("{collection}/{name}/status"),
            &with_annotation.to_string(),
        )
        .await;
        assert_eq!(
            patched.pointer(field),
            created.pointer(field),
            "{collection}: {patched}"
        );
        assert_eq!(patched["metadata"]["annotations"]["patchedstatus"], "true");
        assert!(
            patched["metadata"].get("ownerReferences").is_none(),
            "{collection}: {patched}"
        );
    }
    server.shutdown().await;
}

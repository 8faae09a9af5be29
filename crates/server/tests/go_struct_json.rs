//! Built-in objects written and answered as kube-apiserver's Go structs encode them, over
//! HTTP against an in-process server (memory store): kube-apiserver decodes every body (and
//! every patch's or apply's result) into the kind's Go struct, so `omitempty` empty values are
//! left out, `null` and absent fields are Go's zero values (`null` for a slice without
//! `omitempty`, the zero struct for a struct), and managed fields track what remains. Each
//! expected value is derived from the field's Go type and JSON tag in `k8s.io/api` v0.33
//! (cited next to it).

use crate::common;
use crate::kubectl_support;

use std::net::SocketAddr;

use serde_json::{Value, json};

use common::{get_json, request, send_json};
use kubectl_support::Kubectl;

const APPLY: &str = "application/apply-patch+yaml";
const MERGE: &str = "application/merge-patch+json";
const STRATEGIC: &str = "application/strategic-merge-patch+json";
const JSON_PATCH: &str = "application/json-patch+json";

async fn write(addr: SocketAddr, method: &str, path: &str, kind: &str, body: &str) -> Value {
    let (status, answer) = request(addr, method, path, kind, body).await;
    assert!(
        (200..300).contains(&status),
        "{method} {path} {body}: {status} {answer}"
    );
    serde_json::from_str(&answer).unwrap()
}

/// The answer and a later GET of it both satisfy `check`.
async fn answered_and_stored(addr: SocketAddr, path: &str, answer: &Value, check: impl Fn(&Value)) {
    check(answer);
    let (status, stored) = get_json(addr, path).await;
    assert_eq!(status, 200, "{stored}");
    check(&stored);
}

/// The paths of the managed fields entries' `fieldsV1`, as `f:a.f:b` lines.
fn managed_paths(object: &Value) -> Vec<String> {
    fn walk(prefix: &str, set: &Value, out: &mut Vec<String>) {
        if let Some(map) = set.as_object() {
            for (key, child) in map {
                let path = if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}.{key}")
                };
                out.push(path.clone());
                walk(&path, child, out);
            }
        }
    }
    let mut out = Vec::new();
    for entry in object["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
    {
        walk("", &entry["fieldsV1"], &mut out);
    }
    out
}

fn assert_absent(object: &Value, pointer: &str) {
    assert!(
        object.pointer(pointer).is_none(),
        "{pointer} should be left out: {object}"
    );
}

/// A ConfigMap created with empty `omitempty` maps and slices is answered, stored and tracked
/// without them (`Data map[string]string json:"data,omitempty"`, `BinaryData
/// map[string][]byte json:"binaryData,omitempty"`, ObjectMeta's `Labels`, `Annotations`
/// (`map[string]string`, `omitempty`) and `Finalizers []string json:"finalizers,omitempty"`);
/// the same through an update, each patch type and an apply.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configmap_empty_maps_and_slices_are_left_out() {
    let server = common::server().await;
    let addr = server.addr;
    let cms = "/api/v1/namespaces/default/configmaps";
    let path = format!("{cms}/empty");
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "empty", "annotations": {}, "labels": {}, "finalizers": []},
        "data": {}, "binaryData": {}});
    let empty = |object: &Value| {
        for pointer in [
            "/data",
            "/binaryData",
            "/metadata/annotations",
            "/metadata/labels",
            "/metadata/finalizers",
        ] {
            assert_absent(object, pointer);
        }
        // Nothing is left to own: kube-apiserver drops an entry that owns nothing.
        assert_absent(object, "/metadata/managedFields");
    };
    let (status, created) = send_json(addr, "POST", cms, &body).await;
    assert_eq!(status, 201, "{created}");
    answered_and_stored(addr, &path, &created, empty).await;

    // An update with the same empties, then `immutable: null` (`Immutable *bool
    // json:"immutable,omitempty"`: a nil pointer is left out).
    let mut update = body.clone();
    update["immutable"] = Value::Null;
    let updated = write(addr, "PUT", &path, "application/json", &update.to_string()).await;
    answered_and_stored(addr, &path, &updated, |o| {
        empty(o);
        assert_absent(o, "/immutable");
    })
    .await;

    // Patches: the last key of `data` removed leaves an empty map, which Go leaves out.
    let patched = write(addr, "PATCH", &path, MERGE, r#"{"data": {"a": "1"}}"#).await;
    assert_eq!(patched["data"], json!({"a": "1"}));
    let patched = write(
        addr,
        "PATCH",
        &path,
        MERGE,
        r#"{"data": {"a": null}, "binaryData": {}, "metadata": {"labels": {}}}"#,
    )
    .await;
    answered_and_stored(addr, &path, &patched, |o| {
        assert_absent(o, "/data");
        assert_absent(o, "/binaryData");
        assert_absent(o, "/metadata/labels");
        assert!(
            managed_paths(o).iter().all(|p| !p.starts_with("f:data")),
            "{o}"
        );
    })
    .await;
    let patched = write(
        addr,
        "PATCH",
        &path,
        STRATEGIC,
        r#"{"metadata": {"annotations": {}}, "data": {}}"#,
    )
    .await;
    answered_and_stored(addr, &path, &patched, |o| {
        assert_absent(o, "/data");
        assert_absent(o, "/metadata/annotations");
    })
    .await;
    let patched = write(
        addr,
        "PATCH",
        &path,
        JSON_PATCH,
        r#"[{"op": "add", "path": "/data", "value": {}}, {"op": "add", "path": "/metadata/finalizers", "value": []}]"#,
    )
    .await;
    answered_and_stored(addr, &path, &patched, |o| {
        assert_absent(o, "/data");
        assert_absent(o, "/metadata/finalizers");
    })
    .await;

    // An apply whose configuration has empty maps: the merged object is decoded into the
    // struct too, so they are not stored (the applier still owns what it applied).
    let applied = write(
        addr,
        "PATCH",
        &format!("{cms}/applied?fieldManager=helm"),
        APPLY,
        r#"{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "applied", "annotations": {}, "labels": {}}, "data": {"a": "1"}, "binaryData": {}}"#,
    )
    .await;
    answered_and_stored(addr, &format!("{cms}/applied"), &applied, |o| {
        assert_absent(o, "/binaryData");
        assert_absent(o, "/metadata/annotations");
        assert_absent(o, "/metadata/labels");
        assert_eq!(o["data"], json!({"a": "1"}));
    })
    .await;
    server.shutdown().await;
}

/// A Pod's empty `omitempty` fields are left out (Container `Env []EnvVar
/// json:"env,omitempty"`, `Args []string json:"args,omitempty"`, `Ports []ContainerPort
/// json:"ports,omitempty"`; PodSpec `NodeSelector map[string]string
/// json:"nodeSelector,omitempty"`, `HostNetwork bool json:"hostNetwork,omitempty"`), but
/// `Resources ResourceRequirements json:"resources,omitempty"` is a struct, which Go never
/// leaves out: `{}` even when not sent. ContainerPort `HostPort int32
/// json:"hostPort,omitempty"` is left out at 0, `ContainerPort int32 json:"containerPort"`
/// kept. Managed fields track none of what was left out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_empty_fields_are_left_out_and_structs_kept() {
    let server = common::server().await;
    let addr = server.addr;
    let pods = "/api/v1/namespaces/default/pods";
    let body = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
        "spec": {"nodeSelector": {}, "hostNetwork": false, "tolerations": [],
            "containers": [
                {"name": "a", "image": "nginx:1", "env": [], "args": [], "ports": [],
                    "resources": {}},
                {"name": "b", "image": "nginx:1", "command": [],
                    "ports": [{"containerPort": 80, "hostPort": 0, "name": ""}]}]}});
    let (status, created) = send_json(addr, "POST", pods, &body).await;
    assert_eq!(status, 201, "{created}");
    answered_and_stored(addr, &format!("{pods}/web"), &created, |o| {
        let a = &o["spec"]["containers"][0];
        for key in ["env", "args", "ports"] {
            assert!(a.get(key).is_none(), "{key}: {a}");
        }
        assert_eq!(a["resources"], json!({}), "{a}");
        let b = &o["spec"]["containers"][1];
        assert!(b.get("command").is_none(), "{b}");
        assert_eq!(b["resources"], json!({}), "{b}");
        assert_eq!(
            b["ports"],
            json!([{"containerPort": 80, "protocol": "TCP"}])
        );
        assert_absent(o, "/spec/nodeSelector");
        assert_absent(o, "/spec/hostNetwork");
        let paths = managed_paths(o);
        for gone in [
            "f:env",
            "f:args",
            "f:command",
            "f:nodeSelector",
            "f:hostNetwork",
        ] {
            assert!(
                paths.iter().all(|p| !p.ends_with(gone)),
                "{gone} tracked: {paths:?}"
            );
        }
        assert!(
            paths
                .iter()
                .any(|p| p.ends_with("k:{\"name\":\"b\"}.f:resources")),
            "{paths:?}"
        );
    })
    .await;
    server.shutdown().await;
}

/// `Rules []PolicyRule json:"rules"` has no `omitempty`: a ClusterRole without rules is
/// answered with `"rules": null` (a nil slice), one with `"rules": []` keeps `[]`; neither is
/// anybody's managed field (kube-apiserver compares a create with the zero struct). In a
/// rule, `Verbs []string json:"verbs"` is `null` when left out, `ResourceNames []string
/// json:"resourceNames,omitempty"` is left out when empty.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clusterrole_rules_are_null_when_absent() {
    let server = common::server().await;
    let addr = server.addr;
    let roles = "/apis/rbac.authorization.k8s.io/v1/clusterroles";
    let role = |name: &str, rules: Option<Value>| {
        let mut role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": name}});
        if let Some(rules) = rules {
            role["rules"] = rules;
        }
        role
    };
    let (status, created) = send_json(addr, "POST", roles, &role("none", None)).await;
    assert_eq!(status, 201, "{created}");
    answered_and_stored(addr, &format!("{roles}/none"), &created, |o| {
        assert_eq!(o.get("rules"), Some(&Value::Null), "{o}");
        assert_absent(o, "/metadata/managedFields");
    })
    .await;
    let (status, created) = send_json(addr, "POST", roles, &role("empty", Some(json!([])))).await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["rules"], json!([]), "{created}");
    assert_eq!(managed_paths(&created), ["f:rules"]);

    // A patch to `null` is the nil slice again; an update without them too.
    let patched = write(
        addr,
        "PATCH",
        &format!("{roles}/empty"),
        MERGE,
        r#"{"rules": null}"#,
    )
    .await;
    assert_eq!(patched.get("rules"), Some(&Value::Null), "{patched}");
    let updated = write(
        addr,
        "PUT",
        &format!("{roles}/empty"),
        "application/json",
        &role("empty", None).to_string(),
    )
    .await;
    answered_and_stored(addr, &format!("{roles}/empty"), &updated, |o| {
        assert_eq!(o.get("rules"), Some(&Value::Null), "{o}");
    })
    .await;

    // An apply creating a role with an empty resourceNames and no verbs.
    let applied = write(
        addr,
        "PATCH",
        &format!("{roles}/applied?fieldManager=helm&fieldValidation=Ignore"),
        APPLY,
        r#"{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "applied", "annotations": {}}, "rules": [{"apiGroups": [""], "resources": ["pods"], "resourceNames": [], "verbs": ["get"]}]}"#,
    )
    .await;
    answered_and_stored(addr, &format!("{roles}/applied"), &applied, |o| {
        assert_eq!(
            o["rules"],
            json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}])
        );
        assert_absent(o, "/metadata/annotations");
    })
    .await;
    server.shutdown().await;
}

/// One kind's case: the collection, a body with empty values, nulls and absent fields, and
/// what Go's struct makes of them (`Some` value at a pointer, `None` for left out).
struct Case {
    collection: &'static str,
    name: &'static str,
    body: Value,
    expected: Vec<(&'static str, Option<Value>)>,
    /// Managed field paths (suffixes) no manager may own.
    untracked: Vec<&'static str>,
}

/// `body` laid over `stored`: objects merged key by key, lists item by item (so an update
/// keeps what the server added to the stored object, e.g. a pod's defaults, which a pod
/// update may not change).
fn overlay(stored: &mut Value, body: &Value) {
    match (stored, body) {
        (Value::Object(stored), Value::Object(body)) => {
            for (key, value) in body {
                match stored.get_mut(key) {
                    Some(existing) => overlay(existing, value),
                    None => {
                        stored.insert(key.clone(), value.clone());
                    }
                }
            }
        }
        (Value::Array(stored), Value::Array(body)) if !body.is_empty() => {
            for (index, value) in body.iter().enumerate() {
                match stored.get_mut(index) {
                    Some(existing) => overlay(existing, value),
                    None => stored.push(value.clone()),
                }
            }
        }
        (stored, body) => *stored = body.clone(),
    }
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            collection: "/api/v1/namespaces/default/configmaps",
            name: "cm",
            body: json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"labels": {}}, "data": {}, "immutable": null}),
            expected: vec![
                // `Data map[string]string json:"data,omitempty"`.
                ("/data", None),
                // ObjectMeta `Labels map[string]string json:"labels,omitempty"`.
                ("/metadata/labels", None),
                // `Immutable *bool json:"immutable,omitempty"`.
                ("/immutable", None),
            ],
            untracked: vec!["f:data", "f:labels", "f:immutable"],
        },
        Case {
            collection: "/api/v1/namespaces/default/secrets",
            name: "secret",
            body: json!({"apiVersion": "v1", "kind": "Secret", "metadata": {},
                "type": "", "data": {}, "stringData": null}),
            expected: vec![
                // `Data map[string][]byte json:"data,omitempty"`.
                ("/data", None),
                // `Type SecretType json:"type,omitempty"`: "" is unset, then defaulted.
                ("/type", Some(json!("Opaque"))),
            ],
            untracked: vec!["f:data"],
        },
        Case {
            collection: "/api/v1/namespaces/default/pods",
            name: "pod",
            body: json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"annotations": {}},
                "spec": {"nodeSelector": {}, "hostNetwork": false, "activeDeadlineSeconds": null,
                    "containers": [{"name": "c", "image": "nginx:1", "env": [], "args": [],
                        "ports": [], "stdin": false, "workingDir": ""}]}}),
            expected: vec![
                // PodSpec `NodeSelector map[string]string json:"nodeSelector,omitempty"`.
                ("/spec/nodeSelector", None),
                // `HostNetwork bool json:"hostNetwork,omitempty"`.
                ("/spec/hostNetwork", None),
                // `ActiveDeadlineSeconds *int64 json:"activeDeadlineSeconds,omitempty"`.
                ("/spec/activeDeadlineSeconds", None),
                // Container `Env`, `Args`, `Ports` (slices, omitempty), `Stdin bool
                // json:"stdin,omitempty"`, `WorkingDir string json:"workingDir,omitempty"`.
                ("/spec/containers/0/env", None),
                ("/spec/containers/0/args", None),
                ("/spec/containers/0/ports", None),
                ("/spec/containers/0/stdin", None),
                ("/spec/containers/0/workingDir", None),
                // `Resources ResourceRequirements json:"resources,omitempty"`: a struct.
                ("/spec/containers/0/resources", Some(json!({}))),
                ("/metadata/annotations", None),
            ],
            untracked: vec![
                "f:nodeSelector",
                "f:hostNetwork",
                "f:env",
                "f:args",
                "f:stdin",
            ],
        },
        Case {
            collection: "/apis/apps/v1/namespaces/default/deployments",
            name: "deploy",
            body: json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {},
                "spec": {"paused": false, "minReadySeconds": 0,
                    "selector": {"matchLabels": {"app": "d"}, "matchExpressions": []},
                    "template": {"metadata": {"labels": {"app": "d"}, "annotations": {}},
                        "spec": {"containers": [{"name": "c", "image": "nginx:1",
                            "volumeMounts": []}], "tolerations": [], "volumes": []}}},
                "status": null}),
            expected: vec![
                // DeploymentSpec `Paused bool json:"paused,omitempty"`, `MinReadySeconds
                // int32 json:"minReadySeconds,omitempty"`.
                ("/spec/paused", None),
                ("/spec/minReadySeconds", None),
                // LabelSelector `MatchExpressions []LabelSelectorRequirement
                // json:"matchExpressions,omitempty"`.
                ("/spec/selector/matchExpressions", None),
                // PodTemplateSpec `ObjectMeta` is a struct: its `CreationTimestamp
                // metav1.Time json:"creationTimestamp,omitempty"` marshals its zero as null.
                (
                    "/spec/template/metadata/creationTimestamp",
                    Some(Value::Null),
                ),
                ("/spec/template/metadata/annotations", None),
                ("/spec/template/spec/tolerations", None),
                ("/spec/template/spec/volumes", None),
                ("/spec/template/spec/containers/0/volumeMounts", None),
                // `Status DeploymentStatus json:"status,omitempty"`: a struct, all omitempty.
                ("/status", Some(json!({}))),
            ],
            untracked: vec![
                "f:status",
                "f:creationTimestamp",
                "f:paused",
                "f:tolerations",
            ],
        },
        Case {
            collection: "/api/v1/namespaces/default/services",
            name: "svc",
            body: json!({"apiVersion": "v1", "kind": "Service", "metadata": {},
                "spec": {"selector": {}, "externalIPs": [], "publishNotReadyAddresses": false,
                    "ports": [{"port": 80, "name": "", "nodePort": 0}]}}),
            expected: vec![
                // ServiceSpec `Selector map[string]string json:"selector,omitempty"`,
                // `ExternalIPs []string json:"externalIPs,omitempty"`,
                // `PublishNotReadyAddresses bool json:"publishNotReadyAddresses,omitempty"`.
                ("/spec/selector", None),
                ("/spec/externalIPs", None),
                ("/spec/publishNotReadyAddresses", None),
                // ServicePort `Name string json:"name,omitempty"`, `NodePort int32
                // json:"nodePort,omitempty"`.
                ("/spec/ports/0/name", None),
                ("/spec/ports/0/nodePort", None),
                // ServiceStatus `LoadBalancer LoadBalancerStatus json:"loadBalancer,omitempty"`.
                ("/status", Some(json!({"loadBalancer": {}}))),
            ],
            untracked: vec!["f:selector", "f:externalIPs", "f:nodePort"],
        },
        Case {
            collection: "/apis/rbac.authorization.k8s.io/v1/clusterroles",
            name: "role",
            body: json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {}, "aggregationRule": null}),
            expected: vec![
                // `Rules []PolicyRule json:"rules"`: nil is null.
                ("/rules", Some(Value::Null)),
                // `AggregationRule *AggregationRule json:"aggregationRule,omitempty"`.
                ("/aggregationRule", None),
            ],
            untracked: vec!["f:rules", "f:aggregationRule"],
        },
        Case {
            collection: "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
            name: "binding",
            body: json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {}, "subjects": [],
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"}}),
            expected: vec![
                // `Subjects []Subject json:"subjects,omitempty"`.
                ("/subjects", None),
            ],
            untracked: vec!["f:subjects"],
        },
        Case {
            collection: "/api/v1/namespaces",
            name: "ns",
            body: json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"annotations": {}, "finalizers": []}, "spec": null}),
            expected: vec![
                ("/metadata/annotations", None),
                ("/metadata/finalizers", None),
            ],
            untracked: vec!["f:metadata.f:annotations", "f:metadata.f:finalizers"],
        },
        Case {
            collection: "/api/v1/namespaces/default/events",
            name: "event",
            body: json!({"apiVersion": "v1", "kind": "Event", "metadata": {},
                "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
                "reason": "Tested", "message": "m", "count": 0, "related": null}),
            expected: vec![
                // Event `FirstTimestamp metav1.Time json:"firstTimestamp,omitempty"`, and
                // `LastTimestamp`: structs whose zero marshals as null; `EventTime
                // metav1.MicroTime json:"eventTime,omitempty"` too.
                ("/firstTimestamp", Some(Value::Null)),
                ("/lastTimestamp", Some(Value::Null)),
                ("/eventTime", Some(Value::Null)),
                // `Source EventSource json:"source,omitempty"`: a struct.
                ("/source", Some(json!({}))),
                // `ReportingController string json:"reportingComponent"`, `ReportingInstance
                // string json:"reportingInstance"`: no omitempty.
                ("/reportingComponent", Some(json!(""))),
                ("/reportingInstance", Some(json!(""))),
                // `Count int32 json:"count,omitempty"`, `Related *ObjectReference
                // json:"related,omitempty"`.
                ("/count", None),
                ("/related", None),
            ],
            untracked: vec![
                "f:firstTimestamp",
                "f:lastTimestamp",
                "f:eventTime",
                "f:source",
                "f:reportingComponent",
                "f:count",
            ],
        },
    ]
}

fn check_case(case: &Case, how: &str, object: &Value) {
    for (pointer, expected) in &case.expected {
        assert_eq!(
            object.pointer(pointer),
            expected.as_ref(),
            "{} {how}: {pointer} in {object}",
            case.name
        );
    }
    if how == "apply" {
        // An applier owns its configuration's paths (structured-merge-diff's field set of
        // the configuration as sent), whatever the struct keeps of them.
        return;
    }
    let paths = managed_paths(object);
    for untracked in &case.untracked {
        assert!(
            paths.iter().all(|p| !p.ends_with(untracked)),
            "{} {how}: {untracked} is tracked: {paths:?}",
            case.name
        );
    }
}

/// A table of kinds, each created, updated, merge-patched and applied with its case's body:
/// every answer and the GET after it are Go's encoding of the decoded struct.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kinds_are_written_as_their_go_structs() {
    let server = common::server().await;
    let addr = server.addr;
    for case in cases() {
        let with_name = |suffix: &str| {
            let mut body = case.body.clone();
            body["metadata"]["name"] = json!(format!("{}{suffix}", case.name));
            body
        };
        let path = |suffix: &str| format!("{}/{}{suffix}", case.collection, case.name);

        let body = with_name("");
        let (status, created) = send_json(addr, "POST", case.collection, &body).await;
        assert_eq!(status, 201, "{}: {created}", case.name);
        answered_and_stored(addr, &path(""), &created, |o| {
            check_case(&case, "create", o)
        })
        .await;

        let mut update = created.clone();
        overlay(&mut update, &body);
        let updated = write(
            addr,
            "PUT",
            &path(""),
            "application/json",
            &update.to_string(),
        )
        .await;
        answered_and_stored(addr, &path(""), &updated, |o| {
            check_case(&case, "update", o)
        })
        .await;

        let mut patch = case.body.clone();
        patch.as_object_mut().unwrap().remove("metadata");
        // A pod's containers are merged by name (a merge patch would replace them, which a
        // pod update may not).
        let patch_type = if case.name == "pod" { STRATEGIC } else { MERGE };
        let patched = write(addr, "PATCH", &path(""), patch_type, &patch.to_string()).await;
        answered_and_stored(addr, &path(""), &patched, |o| check_case(&case, "patch", o)).await;

        let applied = write(
            addr,
            "PATCH",
            &format!("{}?fieldManager=helm", path("-applied")),
            APPLY,
            &with_name("-applied").to_string(),
        )
        .await;
        answered_and_stored(addr, &path("-applied"), &applied, |o| {
            check_case(&case, "apply", o);
        })
        .await;
    }
    server.shutdown().await;
}

/// A custom resource's `metadata` is coerced through `ObjectMeta` as kube-apiserver does
/// (apiextensions-apiserver `objectmeta.Coerce`): empty annotations and labels are left out;
/// the rest of the object is its schema's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_resource_metadata_is_coerced_through_objectmeta() {
    let server = common::server().await;
    let addr = server.addr;
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let (status, crd) = send_json(addr, "POST", crds, &common::widgets_crd()).await;
    assert_eq!(status, 201, "{crd}");
    let widgets = "/apis/example.com/v1/namespaces/default/widgets";
    let widget = json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w", "annotations": {}, "labels": {}, "finalizers": []},
        "spec": {"empty": {}, "list": [], "flag": false}});
    let (status, created) = send_json(addr, "POST", widgets, &widget).await;
    assert_eq!(status, 201, "{created}");
    answered_and_stored(addr, &format!("{widgets}/w"), &created, |o| {
        assert_absent(o, "/metadata/annotations");
        assert_absent(o, "/metadata/labels");
        assert_absent(o, "/metadata/finalizers");
        assert_eq!(o["spec"], json!({"empty": {}, "list": [], "flag": false}));
    })
    .await;
    server.shutdown().await;
}

/// `kubectl diff` of a manifest with empty maps and lists (as Helm renders them) against the
/// object a server-side apply of the same manifest without them created shows no change:
/// the dry run's result is the decoded struct, as the stored object is (with the empties
/// kept, it showed `annotations: {}`, `env: []`, `nodeSelector: {}`... and a new generation).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_diff_shows_no_empty_maps_against_a_server_side_applied_object() {
    let server = common::server().await;
    let kubectl = Kubectl::new(server.addr);
    let plain = kubectl.manifest(
        "plain.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app\nspec:\n  selector:\n    matchLabels: {app: app}\n  template:\n    metadata:\n      labels: {app: app}\n    spec:\n      containers:\n      - name: c\n        image: nginx:1\n",
    );
    let rendered = kubectl.manifest(
        "rendered.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app\n  annotations: {}\n  labels: {}\nspec:\n  selector:\n    matchLabels: {app: app}\n  template:\n    metadata:\n      labels: {app: app}\n      annotations: {}\n    spec:\n      nodeSelector: {}\n      tolerations: []\n      containers:\n      - name: c\n        image: nginx:1\n        env: []\n",
    );
    let applied = kubectl.run(&["apply", "--server-side", "-f", &plain]).await;
    assert!(applied.success(), "{applied:?}");
    for args in [
        &["diff", "--server-side", "-f", &rendered][..],
        &["diff", "-f", &rendered][..],
    ] {
        let diff = kubectl.run(args).await;
        assert_eq!(diff.code, Some(0), "{args:?}: {diff:?}");
    }
    server.shutdown().await;
}

/// A write whose client names no manager (no `fieldManager`, no User-Agent) is tracked under
/// the empty manager, which kube-apiserver's encoding of `ManagedFieldsEntry` leaves out
/// (`Manager string json:"manager,omitempty"`); it stays left out through a patch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_manager_is_left_out_of_managed_fields() {
    let server = common::server_with(watchkeeper::config::ServeArgs::default()).await;
    let addr = server.addr;
    let path = "/api/v1/namespaces/default/configmaps";
    let check = |object: &Value| {
        let entries = object["metadata"]["managedFields"].as_array().unwrap();
        assert_eq!(entries.len(), 1, "{object}");
        let entry = entries[0].as_object().unwrap();
        assert!(!entry.contains_key("manager"), "{object}");
        assert_eq!(entry["operation"], "Update");
        assert_eq!(entry["apiVersion"], "v1");
    };
    let created = write(
        addr,
        "POST",
        path,
        "application/json",
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"m"},"data":{"a":"b"}}"#,
    )
    .await;
    answered_and_stored(addr, &format!("{path}/m"), &created, check).await;
    for body in [r#"{"data":{"a":"c"}}"#, r#"{"data":{"d":"e"}}"#] {
        let patched = write(addr, "PATCH", &format!("{path}/m"), MERGE, body).await;
        answered_and_stored(addr, &format!("{path}/m"), &patched, check).await;
    }
    server.shutdown().await;
}

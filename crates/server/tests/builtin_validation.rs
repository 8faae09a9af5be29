//! kube-apiserver's validation of built-in kinds that are neither pods nor workloads, over
//! real HTTP: each invalid object is answered 422 Invalid with kube's message (its causes, in
//! kube's order), and a valid one of the same kind is created.

use crate::common;

use common::*;
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn horizontal_pod_autoscalers() {
    let server = server().await;
    let addr = server.addr;
    let empty = "[spec.maxReplicas: Invalid value: 0: must be greater than 0, spec.maxReplicas: Invalid value: 0: must be greater than or equal to `minReplicas`, spec.scaleTargetRef.kind: Required value, spec.scaleTargetRef.name: Required value]";
    for version in ["v2", "v1"] {
        let path =
            format!("/apis/autoscaling/{version}/namespaces/default/horizontalpodautoscalers");
        let object = json!({"apiVersion": format!("autoscaling/{version}"),
            "kind": "HorizontalPodAutoscaler", "metadata": {"name": "empty"}});
        refused(
            addr,
            &path,
            &object,
            &format!("HorizontalPodAutoscaler.autoscaling \"empty\" is invalid: {empty}"),
        )
        .await;
    }
    let path = "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers";
    let target = json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"});
    let low = json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "low"}, "spec": {"scaleTargetRef": target, "minReplicas": 5,
        "maxReplicas": 2, "targetCPUUtilizationPercentage": 0}});
    refused(addr, path, &low, "HorizontalPodAutoscaler.autoscaling \"low\" is invalid: [spec.maxReplicas: Invalid value: 2: must be greater than or equal to `minReplicas`, spec.metrics[0].resource.target.averageUtilization: Invalid value: 0: must be greater than 0]").await;
    let good = json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web"}, "spec": {"scaleTargetRef": target, "maxReplicas": 3,
        "targetCPUUtilizationPercentage": 50}});
    created(addr, path, &good).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_disruption_budgets() {
    let server = server().await;
    let addr = server.addr;
    let path = "/apis/policy/v1/namespaces/default/poddisruptionbudgets";
    let both = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "both"}, "spec": {"minAvailable": 1, "maxUnavailable": "10%",
        "selector": {"matchLabels": {"app": "web"}}}});
    refused(addr, path, &both, "PodDisruptionBudget.policy \"both\" is invalid: spec: Invalid value: {\"maxUnavailable\":\"10%\",\"minAvailable\":1,\"selector\":{\"matchLabels\":{\"app\":\"web\"}}}: minAvailable and maxUnavailable cannot be both set").await;
    let good = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "web"}, "spec": {"minAvailable": "50%",
        "selector": {"matchLabels": {"app": "web"}}}});
    created(addr, path, &good).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cron_jobs() {
    let server = server().await;
    let addr = server.addr;
    let path = "/apis/batch/v1/namespaces/default/cronjobs";
    let cron_job = |name: &str, schedule: &str, zone: Value| {
        json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": name},
            "spec": {"schedule": schedule, "timeZone": zone, "jobTemplate": {"spec": {"template": {
                "spec": {"restartPolicy": "OnFailure",
                    "containers": [{"name": "c", "image": "busybox"}]}}}}}})
    };
    refused(addr, path, &cron_job("bad", "bad", json!("Mars/Base")), "CronJob.batch \"bad\" is invalid: [spec.schedule: Invalid value: \"bad\": expected exactly 5 fields, found 1: [bad], spec.timeZone: Invalid value: \"Mars/Base\": unknown time zone Mars/Base]").await;
    created(
        addr,
        path,
        &cron_job("good", "*/5 * * * *", json!("Europe/Paris")),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replication_controllers() {
    let server = server().await;
    let addr = server.addr;
    let path = "/api/v1/namespaces/default/replicationcontrollers";
    let rc = |name: &str, selector: Value| {
        json!({"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": name},
            "spec": {"selector": selector, "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})
    };
    refused(addr, path, &rc("other", json!({"app": "db"})), "ReplicationController \"other\" is invalid: spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"web\"}: `selector` does not match template `labels`").await;
    created(addr, path, &rc("web", json!({"app": "web"}))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_and_storage_classes() {
    let server = server().await;
    let addr = server.addr;
    let claims = "/api/v1/namespaces/default/persistentvolumeclaims";
    let empty = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "empty"}, "spec": {}});
    refused(addr, claims, &empty, "PersistentVolumeClaim \"empty\" is invalid: [spec.accessModes: Required value: at least 1 access mode is required, spec.resources[storage]: Required value]").await;
    let claim = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}}}});
    created(addr, claims, &claim).await;

    let classes = "/apis/storage.k8s.io/v1/storageclasses";
    let bare = json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": "bare"}});
    refused(
        addr,
        classes,
        &bare,
        "StorageClass.storage.k8s.io \"bare\" is invalid: provisioner: Required value",
    )
    .await;
    let class = json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": "fast"}, "provisioner": "example.com/fast",
        "parameters": {"type": "ssd"}});
    created(addr, classes, &class).await;
    let (status, body) = request(
        addr,
        "PATCH",
        &format!("{classes}/fast"),
        "application/merge-patch+json",
        r#"{"provisioner": "example.com/slow"}"#,
    )
    .await;
    assert_eq!(status, 422, "{body}");
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        body["message"],
        "StorageClass.storage.k8s.io \"fast\" is invalid: provisioner: Forbidden: updates to provisioner are forbidden."
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limit_ranges() {
    let server = server().await;
    let addr = server.addr;
    let path = "/api/v1/namespaces/default/limitranges";
    let range = |name: &str, min: &str, max: &str| {
        json!({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": name},
            "spec": {"limits": [{"type": "Pod", "min": {"cpu": min}, "max": {"cpu": max}}]}})
    };
    refused(addr, path, &range("inverted", "2", "1"), "LimitRange \"inverted\" is invalid: spec.limits[0].min[cpu]: Invalid value: 2: min value 2 is greater than max value 1").await;
    created(addr, path, &range("pods", "100m", "2")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_and_endpoints() {
    let server = server().await;
    let addr = server.addr;
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "bad"},
        "spec": {"taints": [{"key": "a", "effect": "Bad"}]}});
    refused(addr, "/api/v1/nodes", &node, "Node \"bad\" is invalid: metadata.taints[0].effect: Unsupported value: \"Bad\": supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\"").await;
    let path = "/api/v1/namespaces/default/endpoints";
    let endpoints = |name: &str, ip: &str| {
        json!({"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": name},
            "subsets": [{"addresses": [{"ip": ip}], "ports": [{"port": 80}]}]})
    };
    refused(addr, path, &endpoints("bad", "bad"), "Endpoints \"bad\" is invalid: [subsets[0].addresses[0].ip: Invalid value: \"bad\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff), subsets[0].addresses[0].ip: Invalid value: \"bad\": must be a valid IP address]").await;
    created(addr, path, &endpoints("web", "10.0.0.1")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoint_slices() {
    let server = server().await;
    let addr = server.addr;
    let path = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices";
    let slice = |name: &str, address: &str| {
        json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": name}, "addressType": "IPv4",
            "endpoints": [{"addresses": [address]}], "ports": [{"name": "http", "port": 80}]})
    };
    refused(addr, path, &slice("bad", "notanip"), "EndpointSlice.discovery.k8s.io \"bad\" is invalid: [endpoints[0].addresses[0]: Invalid value: \"notanip\": must be a valid IPv4 address, endpoints[0].addresses[0]: Invalid value: \"notanip\": must be a valid IP address]").await;
    created(addr, path, &slice("web", "10.0.0.1")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn networking_kinds() {
    let server = server().await;
    let addr = server.addr;
    let ingress = json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": "empty"}, "spec": {}});
    let ingresses = "/apis/networking.k8s.io/v1/namespaces/default/ingresses";
    refused(addr, ingresses, &ingress, "Ingress.networking.k8s.io \"empty\" is invalid: spec: Invalid value: []networking.IngressRule(nil): either `defaultBackend` or `rules` must be specified").await;
    let class = |name: &str, controller: &str| {
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
            "metadata": {"name": name}, "spec": {"controller": controller}})
    };
    let classes = "/apis/networking.k8s.io/v1/ingressclasses";
    refused(addr, classes, &class("bad", "bad controller"), "IngressClass.networking.k8s.io \"bad\" is invalid: spec.controller: Invalid value: \"bad controller\": must be a domain-prefixed path (such as \"acme.io/foo\")").await;
    created(addr, classes, &class("edge", "example.com/edge")).await;
    let policy = |name: &str, port: Value| {
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": name}, "spec": {"podSelector": {},
                "ingress": [{"ports": [{"port": port}]}]}})
    };
    let policies = "/apis/networking.k8s.io/v1/namespaces/default/networkpolicies";
    refused(addr, policies, &policy("bad", json!(70000)), "NetworkPolicy.networking.k8s.io \"bad\" is invalid: spec.ingress[0].ports[0].port: Invalid value: 70000: must be between 1 and 65535, inclusive").await;
    created(addr, policies, &policy("web", json!(80))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases() {
    let server = server().await;
    let addr = server.addr;
    let path = "/apis/coordination.k8s.io/v1/namespaces/default/leases";
    let lease = |name: &str, seconds: i64| {
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name}, "spec": {"leaseDurationSeconds": seconds}})
    };
    refused(addr, path, &lease("bad", -5), "Lease.coordination.k8s.io \"bad\" is invalid: spec.leaseDurationSeconds: Invalid value: -5: must be greater than 0").await;
    created(addr, path, &lease("good", 15)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roles_and_bindings() {
    let server = server().await;
    let addr = server.addr;
    let roles = "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles";
    let role = |name: &str, verbs: Value| {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": name},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": verbs}]})
    };
    refused(addr, roles, &role("bad", json!([])), "Role.rbac.authorization.k8s.io \"bad\" is invalid: rules[0].verbs: Required value: verbs must contain at least one value").await;
    created(addr, roles, &role("reader", json!(["get"]))).await;
    let bindings = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings";
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding", "metadata": {"name": "bad"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "sa"}]});
    refused(addr, bindings, &binding, "ClusterRoleBinding.rbac.authorization.k8s.io \"bad\" is invalid: [roleRef.kind: Unsupported value: \"Role\": supported values: \"ClusterRole\", subjects[0].namespace: Required value]").await;
}

/// Goal: the kinds whose names kube checks as path segments (`ValidateRBACName`, custom
/// resources' strategy, CertificateSigningRequests) take names no DNS subdomain could be, as
/// kube-prometheus's `system:aggregated-metrics-reader` ClusterRole; a `/` or `%` is refused
/// with kube's message, and other kinds keep DNS names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn path_segment_names() {
    let server = server().await;
    let addr = server.addr;
    let roles = "/apis/rbac.authorization.k8s.io/v1/clusterroles";
    let role = |name: &str| {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": name}, "rules": []})
    };
    created(addr, roles, &role("system:aggregated-metrics-reader")).await;
    let bindings = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings";
    created(addr, bindings, &json!({"apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding", "metadata": {"name": "resource-metrics:system:auth-delegator"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
            "name": "system:auth-delegator"},
        "subjects": [{"kind": "ServiceAccount", "name": "m", "namespace": "default"}]}))
    .await;
    refused(addr, roles, &role("a%b"), "ClusterRole.rbac.authorization.k8s.io \"a%b\" is invalid: metadata.name: Invalid value: \"a%b\": may not contain '%'").await;

    let (status, body) = send_json(
        addr,
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        &widgets_crd(),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let widgets = "/apis/example.com/v1/namespaces/default/widgets";
    let widget = |name: &str| json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name}});
    // The CRD's resource is served once its cache is ready.
    tokio::time::timeout(HANG_GUARD, async {
        while send_json(addr, "POST", widgets, &widget("My:Widget_1"))
            .await
            .0
            != 201
        {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the custom resource created");
    refused(addr, widgets, &widget("a%b"), "Widget.example.com \"a%b\" is invalid: metadata.name: Invalid value: \"a%b\": may not contain '%'").await;
    refused(addr, "/api/v1/namespaces/default/configmaps", &json!({"apiVersion": "v1",
        "kind": "ConfigMap", "metadata": {"name": "a:b"}}), "ConfigMap \"a:b\" is invalid: metadata.name: Invalid value: \"a:b\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')").await;
}

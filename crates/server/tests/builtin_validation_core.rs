//! kube-apiserver's validation of Services, Namespaces, ResourceQuotas and Events over real
//! HTTP: each invalid object is answered 422 Invalid with kube's message (its causes, in
//! kube's order), and a valid one of the same kind is written.

use crate::common;

use common::*;
use serde_json::{Value, json};

/// Sends `object` to `path` with `method`: 422 with `message`.
async fn refused(
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    object: &Value,
    message: &str,
) {
    assert_eq!(
        invalid_message(addr, method, path, object).await,
        message,
        "{path}"
    );
}

fn service(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": spec})
}

/// Goal: a Service's fields as kube's `ValidateService` checks them, all causes in kube's
/// order; the address fields alone first, and an asked node port outside the range, as
/// kube's allocator refuses them before it validates; updates keep the addresses and may
/// change the type.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn services() {
    let server = server().await;
    let addr = server.addr;
    let path = "/api/v1/namespaces/default/services";
    let bad = |extra: Value| {
        let mut spec = json!({"type": "NodePort",
            "ports": [{"port": 70000, "nodePort": 30001, "protocol": "XX"}],
            "sessionAffinity": "bogus", "externalTrafficPolicy": "bogus"});
        for (key, value) in extra.as_object().unwrap() {
            spec[key] = value.clone();
        }
        service("bad", spec)
    };
    // kube's `initIPFamilyFields` refuses with the address fields' causes alone.
    let addresses = bad(json!({"clusterIP": "10.0.0.1.5", "ipFamilyPolicy": "x"}));
    refused(addr, "POST", path, &addresses, "Service \"bad\" is invalid: [spec.ipFamilyPolicy: Unsupported value: \"x\": supported values: \"PreferDualStack\", \"RequireDualStack\", \"SingleStack\", spec.clusterIPs[0]: Invalid value: \"10.0.0.1.5\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)]").await;
    // So does its node port allocator an asked port outside the range, before validation.
    let outside = bad(json!({"ports": [{"port": 70000, "nodePort": 99999, "protocol": "XX"}]}));
    refused(addr, "POST", path, &outside, "Service \"bad\" is invalid: spec.ports[0].nodePort: Invalid value: 99999: provided port is not in the valid range. The range of valid ports is 30000-32767").await;
    refused(addr, "POST", path, &bad(json!({})), "Service \"bad\" is invalid: [spec.ports[0].port: Invalid value: 70000: must be between 1 and 65535, inclusive, spec.ports[0].protocol: Unsupported value: \"XX\": supported values: \"SCTP\", \"TCP\", \"UDP\", spec.ports[0].targetPort: Invalid value: 70000: must be between 1 and 65535, inclusive, spec.sessionAffinity: Unsupported value: \"bogus\": supported values: \"ClientIP\", \"None\", spec.externalTrafficPolicy: Unsupported value: \"bogus\": supported values: \"Cluster\", \"Local\"]").await;
    let external = service(
        "ext",
        json!({"type": "ExternalName", "externalName": "not a name",
        "sessionAffinity": "ClientIP", "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 0}}}),
    );
    refused(addr, "POST", path, &external, "Service \"ext\" is invalid: [spec.externalName: Invalid value: \"not a name\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*'), spec.sessionAffinityConfig.clientIP.timeoutSeconds: Invalid value: 0: must be greater than 0 and less than 86400]").await;
    // A load balancer that needs a health check node port gets one before it is checked.
    let local = service(
        "local",
        json!({"type": "LoadBalancer", "externalTrafficPolicy": "Local",
        "ports": [{"port": 80}]}),
    );
    let created = written(addr, "POST", path, &local).await;
    assert!(
        created["spec"]["healthCheckNodePort"].as_u64().unwrap_or(0) >= 30000,
        "{created}"
    );
    // Its status as `ValidateLoadBalancerStatus` checks it.
    let mut status = created.clone();
    status["status"] = json!({"loadBalancer": {"ingress": [{"hostname": "1.2.3.4"}]}});
    refused(addr, "PUT", &format!("{path}/local/status"), &status, "Service \"local\" is invalid: status.loadBalancer.ingress[0].hostname: Invalid value: \"1.2.3.4\": must be a DNS name, not an IP address").await;
    status["status"] = json!({"loadBalancer": {"ingress": [{"hostname": "lb.example.com"}]}});
    written(addr, "PUT", &format!("{path}/local/status"), &status).await;
    let web = service(
        "web",
        json!({"type": "NodePort", "ports": [{"port": 80, "nodePort": 30080}]}),
    );
    let created = written(addr, "POST", path, &web).await;
    let mut moved = created.clone();
    moved["spec"]["clusterIP"] = json!("10.0.0.250");
    moved["spec"]["clusterIPs"] = json!(["10.0.0.250"]);
    let ip = created["spec"]["clusterIP"].as_str().unwrap();
    assert_ne!(ip, "10.0.0.250");
    refused(addr, "PUT", &format!("{path}/web"), &moved, "Service \"web\" is invalid: spec.clusterIPs[0]: Invalid value: []string{\"10.0.0.250\"}: may not change once set").await;
    // A type change clears what the new type does not use before it is validated.
    let mut cluster_ip = created.clone();
    cluster_ip["spec"]["type"] = json!("ClusterIP");
    let updated = written(addr, "PUT", &format!("{path}/web"), &cluster_ip).await;
    assert!(
        updated["spec"]["ports"][0].get("nodePort").is_none(),
        "{updated}"
    );
    assert!(updated["spec"].get("externalTrafficPolicy").is_none());
}

/// Goal: a Namespace's finalizers as `ValidateNamespace` (create) and
/// `ValidateNamespaceFinalizeUpdate` (`/finalize`) check them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespaces() {
    let server = server().await;
    let addr = server.addr;
    let namespace = |name: &str, finalizers: Value| {
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name},
            "spec": {"finalizers": finalizers}})
    };
    refused(addr, "POST", "/api/v1/namespaces", &namespace("bad", json!(["bad finalizer!"])), "Namespace \"bad\" is invalid: [spec.finalizers: Invalid value: \"bad finalizer!\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]'), spec.finalizers: Invalid value: \"bad finalizer!\": name is neither a standard finalizer name nor is it fully qualified]").await;
    let created = written(
        addr,
        "POST",
        "/api/v1/namespaces",
        &namespace("good", json!(["kubernetes", "example.com/mine"])),
    )
    .await;
    let mut finalized = created.clone();
    finalized["spec"]["finalizers"] = json!(["kubernetes", "mine"]);
    refused(addr, "PUT", "/api/v1/namespaces/good/finalize", &finalized, "Namespace \"good\" is invalid: spec.finalizers[1]: Invalid value: \"mine\": name is neither a standard finalizer name nor is it fully qualified").await;
}

/// Goal: a ResourceQuota's hard limits as `ValidateResourceQuotaSpec` checks them, and its
/// scopes fixed once set.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resource_quotas() {
    let server = server().await;
    let addr = server.addr;
    let path = "/api/v1/namespaces/default/resourcequotas";
    let quota = |name: &str, hard: Value, scopes: Value| {
        json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name},
            "spec": {"hard": hard, "scopes": scopes}})
    };
    refused(addr, "POST", path, &quota("bad", json!({"pods": "-1", "services": "1500m", "bogus": "1"}), json!([])), "ResourceQuota \"bad\" is invalid: [spec.hard[bogus]: Invalid value: bogus: must be a standard resource type or fully qualified, spec.hard[bogus]: Invalid value: bogus: must be a standard resource for quota, spec.hard[pods]: Invalid value: \"-1\": must be greater than or equal to 0, spec.hard[services]: Invalid value: \"1500m\": must be an integer]").await;
    let created = written(
        addr,
        "POST",
        path,
        &quota("good", json!({"pods": "10"}), json!(["NotBestEffort"])),
    )
    .await;
    let mut rescoped = created.clone();
    rescoped["spec"]["scopes"] = json!(["Terminating"]);
    refused(addr, "PUT", &format!("{path}/good"), &rescoped, "ResourceQuota \"good\" is invalid: spec.scopes: Invalid value: []core.ResourceQuotaScope{\"Terminating\"}: field is immutable").await;
}

/// Goal: Events as `ValidateEventCreate` checks them: a core `v1` Event gets only the legacy
/// checks (any `type` is accepted), an `events.k8s.io/v1` one the strict ones, at kube's
/// internal paths.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events() {
    let server = server().await;
    let addr = server.addr;
    written(
        addr,
        "POST",
        "/api/v1/namespaces",
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}),
    )
    .await;
    let core = |namespace: &str| {
        json!({"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "e", "namespace": namespace},
            "involvedObject": {"kind": "Pod"}, "type": "Bogus"})
    };
    written(
        addr,
        "POST",
        "/api/v1/namespaces/default/events",
        &core("default"),
    )
    .await;
    refused(addr, "POST", "/api/v1/namespaces/team/events", &core("team"), "Event \"e\" is invalid: involvedObject.namespace: Invalid value: \"\": does not match event.namespace").await;
    let path = "/apis/events.k8s.io/v1/namespaces/default/events";
    let strict = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": "s"}, "regarding": {"kind": "Pod"}, "type": "Bogus",
        "deprecatedCount": 2});
    refused(addr, "POST", path, &strict, "Event.events.k8s.io \"s\" is invalid: [eventTime: Required value, type: Invalid value: \"\": has invalid value: Bogus, count: Invalid value: \"\": needs to be unset]").await;
    let good = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": "g"}, "regarding": {"kind": "Pod", "namespace": "default"},
        "type": "Normal", "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingController": "example.com/c", "reportingInstance": "i", "action": "Act",
        "reason": "Because", "note": "n"});
    written(addr, "POST", path, &good).await;
}

//! kube-apiserver's admission plugin flags over HTTP (see `config::admission_plugins` and
//! `source::plugin_admission`): `--enable-admission-plugins`, `--disable-admission-plugins`
//! and `--admission-control` choose what runs, refused at start in kube's words; each
//! optional plugin this server runs answers as kube's does, and does nothing when off.

use crate::common;

use base64::Engine as _;
use serde_json::{Value, json};
use watchkeeper::config::{ServeArgs, ServeConfig};

use common::{merge_patch, request, send_json, server_with};

fn names(list: &[&str]) -> Option<Vec<String>> {
    Some(list.iter().map(|n| (*n).to_owned()).collect())
}

fn enabled(list: &[&str]) -> ServeArgs {
    ServeArgs {
        enable_admission_plugins: names(list),
        ..ServeArgs::default()
    }
}

fn refusal(args: ServeArgs) -> String {
    ServeConfig::from_args(args).unwrap_err().to_string()
}

/// Goal: the flags' refusals are kube-apiserver's, and a plugin kube has that this server
/// does not run is refused by name rather than silently skipped.
#[test]
fn flags_are_refused_as_kube_refuses_them() {
    assert_eq!(
        refusal(enabled(&["Nope"])),
        r#"enable-admission-plugins plugin "Nope" is unknown"#
    );
    assert_eq!(
        refusal(ServeArgs {
            enable_admission_plugins: names(&["AlwaysPullImages"]),
            disable_admission_plugins: names(&["AlwaysPullImages"]),
            ..ServeArgs::default()
        }),
        "[AlwaysPullImages] in enable-admission-plugins and disable-admission-plugins overlapped"
    );
    assert_eq!(
        refusal(ServeArgs {
            admission_control: names(&["ServiceAccount"]),
            disable_admission_plugins: names(&["PodSecurity"]),
            ..ServeArgs::default()
        }),
        "admission-control and enable-admission-plugins/disable-admission-plugins flags are mutually exclusive"
    );
    // Every plugin kube runs is run here: one that needs a configuration is refused without.
    assert_eq!(
        refusal(enabled(&["ImagePolicyWebhook"])),
        r#"--admission-control-config-file: couldn't init admission plugin "ImagePolicyWebhook": no config specified"#
    );
    // Known names are accepted: kube's default set and one more.
    ServeConfig::from_args(enabled(&[
        "NamespaceExists",
        "PodSecurity",
        "NodeRestriction",
    ]))
    .unwrap();
}

/// A pod of one container running `image` with pull policy `IfNotPresent`.
fn pod(name: &str, image: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": image, "imagePullPolicy": "IfNotPresent"}],
            "initContainers": [{"name": "i", "image": "init"}]}})
}

const PODS: &str = "/api/v1/namespaces/default/pods";

/// Goal: AlwaysPullImages makes every container pull on create and on an update that brings a
/// new image; an update that keeps the images keeps the policies; off by default.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn always_pull_images_makes_containers_pull() {
    let server = server_with(enabled(&["AlwaysPullImages"])).await;
    let addr = server.addr;
    let (status, created) = send_json(addr, "POST", PODS, &pod("puller", "app:1")).await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(
        created["spec"]["containers"][0]["imagePullPolicy"],
        "Always"
    );
    assert_eq!(
        created["spec"]["initContainers"][0]["imagePullPolicy"],
        "Always"
    );
    let path = format!("{PODS}/puller");
    let relabelled = merge_patch(addr, &path, r#"{"metadata":{"labels":{"a":"b"}}}"#).await;
    assert_eq!(
        relabelled["spec"]["containers"][0]["imagePullPolicy"],
        "Always"
    );
    let updated = merge_patch(
        addr,
        &path,
        r#"{"spec":{"containers":[{"name":"c","image":"app:2"}]}}"#,
    )
    .await;
    assert_eq!(updated["spec"]["containers"][0]["image"], "app:2");
    assert_eq!(
        updated["spec"]["containers"][0]["imagePullPolicy"],
        "Always"
    );
    server.shutdown().await;

    let off = server_with(ServeArgs::default()).await;
    let (status, created) = send_json(off.addr, "POST", PODS, &pod("keeper", "app:1")).await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(
        created["spec"]["containers"][0]["imagePullPolicy"],
        "IfNotPresent"
    );
    off.shutdown().await;
}

fn service(name: &str, external: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
        "spec": {"ports": [{"port": 80}], "externalIPs": external}})
}

const SERVICES: &str = "/api/v1/namespaces/default/services";

/// Goal: DenyServiceExternalIPs refuses new external IPs (create or update) with kube's 403
/// and allows keeping or removing them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deny_service_external_ips_refuses_new_addresses() {
    let server = server_with(enabled(&["DenyServiceExternalIPs"])).await;
    let addr = server.addr;
    let (status, refused) = send_json(
        addr,
        "POST",
        SERVICES,
        &service("web", json!(["192.0.2.1"])),
    )
    .await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(refused["reason"], "Forbidden");
    assert_eq!(
        refused["message"],
        r#"services "web" is forbidden: Use of external IPs is denied by admission control"#
    );
    let (status, created) = send_json(addr, "POST", SERVICES, &service("web", json!([]))).await;
    assert_eq!(status, 201, "{created}");
    let (status, refused) = request(
        addr,
        "PATCH",
        &format!("{SERVICES}/web"),
        "application/merge-patch+json",
        r#"{"spec":{"externalIPs":["192.0.2.2"]}}"#,
    )
    .await;
    assert_eq!(status, 403, "{refused}");
    assert!(refused.contains("Use of external IPs is denied by admission control"));
    server.shutdown().await;

    let off = server_with(ServeArgs::default()).await;
    let (status, created) = send_json(
        off.addr,
        "POST",
        SERVICES,
        &service("web", json!(["192.0.2.1"])),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    off.shutdown().await;
}

/// Goal: LimitPodHardAntiAffinityTopology refuses a required anti-affinity per zone with
/// kube's 403, and admits one per host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hard_anti_affinity_is_per_host_only() {
    let server = server_with(enabled(&["LimitPodHardAntiAffinityTopology"])).await;
    let addr = server.addr;
    let spread = |name: &str, key: &str| {
        let mut pod = pod(name, "app");
        pod["spec"]["affinity"] = json!({"podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": key,
                "labelSelector": {"matchLabels": {"app": "x"}}}]}});
        pod
    };
    let (status, refused) = send_json(
        addr,
        "POST",
        PODS,
        &spread("zonal", "topology.kubernetes.io/zone"),
    )
    .await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(
        refused["message"],
        r#"pods "zonal" is forbidden: affinity.PodAntiAffinity.RequiredDuringScheduling has TopologyKey topology.kubernetes.io/zone but only key kubernetes.io/hostname is allowed"#
    );
    let (status, created) = send_json(
        addr,
        "POST",
        PODS,
        &spread("hostly", "kubernetes.io/hostname"),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    server.shutdown().await;
}

/// A CertificateSigningRequest for `signer` whose subject's organization is `organization`.
fn csr(name: &str, organization: &str, signer: &str) -> Value {
    csr_of(name, (organization, "someone"), signer)
}

/// A request named `name` for `(organization, common_name)` to `signer`.
fn csr_of(name: &str, (organization, common_name): (&str, &str), signer: &str) -> Value {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::new()).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::OrganizationName, organization);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, common_name);
    let pem = params.serialize_request(&key).unwrap().pem().unwrap();
    json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
        "metadata": {"name": name},
        "spec": {"signerName": signer, "usages": ["client auth"],
            "request": base64::engine::general_purpose::STANDARD.encode(pem)}})
}

const CSRS: &str = "/apis/certificates.k8s.io/v1/certificatesigningrequests";
const CLIENT: &str = "kubernetes.io/kube-apiserver-client";

/// Goal: CertificateSubjectRestriction (on by default) refuses a `system:masters` request to
/// the kube-apiserver client signer with kube's 403; other groups and signers pass; disabled,
/// nothing is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn masters_may_not_ask_the_client_signer() {
    let server = server_with(ServeArgs::default()).await;
    let addr = server.addr;
    let (status, refused) =
        send_json(addr, "POST", CSRS, &csr("root", "system:masters", CLIENT)).await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(
        refused["message"],
        r#"certificatesigningrequests.certificates.k8s.io "root" is forbidden: use of kubernetes.io/kube-apiserver-client signer with system:masters group is not allowed"#
    );
    let (status, created) = send_json(addr, "POST", CSRS, &csr("team", "team-a", CLIENT)).await;
    assert_eq!(status, 201, "{created}");
    server.shutdown().await;

    let off = server_with(ServeArgs {
        disable_admission_plugins: names(&["CertificateSubjectRestriction"]),
        ..ServeArgs::default()
    })
    .await;
    let (status, created) = send_json(
        off.addr,
        "POST",
        CSRS,
        &csr("root", "system:masters", CLIENT),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    off.shutdown().await;
}

fn configmap_in(namespace: &str) -> (String, Value) {
    (
        format!("/api/v1/namespaces/{namespace}/configmaps"),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}),
    )
}

/// Goal: NamespaceLifecycle (on by default) refuses a create in a namespace that does not
/// exist; off, the create succeeds; `--admission-control=NamespaceExists` alone refuses it
/// again with kube's 404.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespace_plugins_decide_creates_in_missing_namespaces() {
    let (path, body) = configmap_in("ghost");
    let not_found = r#"namespaces "ghost" not found"#;
    let server = server_with(ServeArgs::default()).await;
    let (status, refused) = send_json(server.addr, "POST", &path, &body).await;
    assert_eq!(
        (status, refused["message"].as_str()),
        (404, Some(not_found))
    );
    server.shutdown().await;

    let off = server_with(ServeArgs {
        disable_admission_plugins: names(&["NamespaceLifecycle"]),
        ..ServeArgs::default()
    })
    .await;
    let (status, created) = send_json(off.addr, "POST", &path, &body).await;
    assert_eq!(status, 201, "{created}");
    off.shutdown().await;

    let exists = server_with(ServeArgs {
        admission_control: names(&["NamespaceExists"]),
        ..ServeArgs::default()
    })
    .await;
    let (status, refused) = send_json(exists.addr, "POST", &path, &body).await;
    assert_eq!(
        (status, refused["message"].as_str()),
        (404, Some(not_found))
    );
    let (path, body) = configmap_in("default");
    let (status, created) = send_json(exists.addr, "POST", &path, &body).await;
    assert_eq!(status, 201, "{created}");
    exists.shutdown().await;
}

/// `method` on `path` with `body` as the holder of `token`: the status and the JSON answer.
async fn as_user(
    addr: std::net::SocketAddr,
    token: &str,
    (method, path): (&str, &str),
    body: &Value,
) -> (u16, Value) {
    let bearer = format!("Bearer {token}");
    let content = if method == "PATCH" {
        "application/merge-patch+json"
    } else {
        "application/json"
    };
    let headers = [
        ("Authorization", bearer.as_str()),
        ("Content-Type", content),
    ];
    let (status, text) =
        common::request_with_headers(addr, method, path, &headers, &body.to_string()).await;
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// Goal: NodeRestriction (kubeadm's `--enable-admission-plugins=NodeRestriction`) — a node
/// writes its own Node but not another's nor its own taints, creates only its mirror pods
/// and deletes only pods bound to it, writes only its own CSINode and only the capacity and
/// conditions of claims' status, asks tokens for and evicts only its own pods, and asks
/// certificates only for itself, in kube's words; other users are not restricted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_writes_only_its_own_objects() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(
        &tokens,
        "admin-token,admin,1,\"system:masters\"\nnode-token,system:node:a,2,\"system:nodes\"\n",
    )
    .unwrap();
    let server = server_with(ServeArgs {
        token_auth_file: Some(tokens),
        ..enabled(&["NodeRestriction"])
    })
    .await;
    let addr = server.addr;
    let node = |name: &str| json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}});
    let nodes = "/api/v1/nodes";
    let (status, own) = as_user(addr, "node-token", ("POST", nodes), &node("a")).await;
    assert_eq!(status, 201, "{own}");
    let (status, refused) = as_user(addr, "node-token", ("POST", nodes), &node("b")).await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(
        refused["message"],
        r#"nodes "b" is forbidden: node "a" is not allowed to modify node "b""#
    );
    let (status, body) = as_user(addr, "admin-token", ("POST", nodes), &node("b")).await;
    assert_eq!(status, 201, "{body}");
    let taint = json!({"spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}});
    let (status, refused) = as_user(addr, "node-token", ("PATCH", "/api/v1/nodes/a"), &taint).await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(
        refused["message"],
        r#"nodes "a" is forbidden: node "a" is not allowed to modify taints"#
    );

    let pod = |name: &str, node: &str| {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]}})
    };
    let (status, refused) = as_user(addr, "node-token", ("POST", PODS), &pod("plain", "a")).await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(
        refused["message"],
        r#"pods "plain" is forbidden: pod does not have "kubernetes.io/config.mirror" annotation, node "a" can only create mirror pods"#
    );
    let mut mirror = pod("static", "a");
    mirror["metadata"]["annotations"] = json!({"kubernetes.io/config.mirror": "hash"});
    mirror["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "Node",
        "name": "a", "uid": own["metadata"]["uid"], "controller": true}]);
    let (status, created) = as_user(addr, "node-token", ("POST", PODS), &mirror).await;
    assert_eq!(status, 201, "{created}");

    let (status, body) = as_user(addr, "admin-token", ("POST", PODS), &pod("theirs", "b")).await;
    assert_eq!(status, 201, "{body}");
    let theirs = format!("{PODS}/theirs");
    let (status, refused) = as_user(addr, "node-token", ("DELETE", &theirs), &Value::Null).await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(
        refused["message"],
        r#"pods "theirs" is forbidden: node "a" can only delete pods with spec.nodeName set to itself"#
    );
    let (status, body) = as_user(addr, "admin-token", ("DELETE", &theirs), &Value::Null).await;
    assert_eq!(status, 200, "{body}");

    // Its own CSINode only.
    let csinode = |name: &str| {
        json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": name},
            "spec": {"drivers": []}})
    };
    let csinodes = "/apis/storage.k8s.io/v1/csinodes";
    let (status, body) = as_user(addr, "node-token", ("POST", csinodes), &csinode("a")).await;
    assert_eq!(status, 201, "{body}");
    let (status, refused) = as_user(addr, "node-token", ("POST", csinodes), &csinode("b")).await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(
        refused["message"],
        r#"csinodes.storage.k8s.io "b" is forbidden: can only access CSINode with the same name as the requesting node"#
    );
    // Claims: their status only, and there only capacity and conditions.
    let claims = "/api/v1/namespaces/default/persistentvolumeclaims";
    let claim = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}}}});
    let (status, refused) = as_user(addr, "node-token", ("POST", claims), &claim).await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(
        refused["message"],
        r#"persistentvolumeclaims "data" is forbidden: may only update PVC status"#
    );
    let (status, body) = as_user(addr, "admin-token", ("POST", claims), &claim).await;
    assert_eq!(status, 201, "{body}");
    let status_path = format!("{claims}/data/status");
    let grown = json!({"status": {"capacity": {"storage": "2Gi"}}});
    let (status, body) = as_user(addr, "node-token", ("PATCH", &status_path), &grown).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"]["capacity"]["storage"], "2Gi");
    let lost = json!({"status": {"phase": "Lost"}});
    let (status, refused) = as_user(addr, "node-token", ("PATCH", &status_path), &lost).await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(
        refused["message"],
        r#"persistentvolumeclaims "data" is forbidden: node "a" is not allowed to update fields other than status.quantity and status.conditions: status.phase"#
    );
    // Tokens bound to its own pods only.
    let accounts = "/api/v1/namespaces/default/serviceaccounts";
    let robot =
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "robot"}});
    let (status, body) = as_user(addr, "admin-token", ("POST", accounts), &robot).await;
    assert_eq!(status, 201, "{body}");
    let mut uids = Vec::new();
    for (name, on) in [("mine", "a"), ("elsewhere", "b")] {
        let mut bound = pod(name, on);
        bound["spec"]["serviceAccountName"] = json!("robot");
        let (status, body) = as_user(addr, "admin-token", ("POST", PODS), &bound).await;
        assert_eq!(status, 201, "{body}");
        uids.push(body["metadata"]["uid"].clone());
    }
    let token = |bound: Value| {
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": {"boundObjectRef": bound}})
    };
    let bound_to = |name: &str, uid: &Value| json!({"apiVersion": "v1", "kind": "Pod", "name": name, "uid": uid});
    let path = format!("{accounts}/robot/token");
    let (status, refused) = as_user(addr, "node-token", ("POST", &path), &token(Value::Null)).await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(
        refused["message"],
        r#"serviceaccounts "robot" is forbidden: node requested token not bound to a pod"#
    );
    let (status, refused) = as_user(
        addr,
        "node-token",
        ("POST", &path),
        &token(bound_to("elsewhere", &uids[1])),
    )
    .await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(
        refused["message"],
        r#"serviceaccounts "robot" is forbidden: node requested token bound to a pod scheduled on a different node"#
    );
    let (status, body) = as_user(
        addr,
        "node-token",
        ("POST", &path),
        &token(bound_to("mine", &uids[0])),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    // Certificates for itself only.
    let kubelet = "kubernetes.io/kube-apiserver-client-kubelet";
    let other = csr_of("other", ("system:nodes", "system:node:b"), kubelet);
    let (status, refused) = as_user(addr, "node-token", ("POST", CSRS), &other).await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(
        refused["message"],
        r#"certificatesigningrequests.certificates.k8s.io "other" is forbidden: can only create a node CSR with CN=system:node:a"#
    );
    let own = csr_of("own", ("system:nodes", "system:node:a"), kubelet);
    let (status, body) = as_user(addr, "node-token", ("POST", CSRS), &own).await;
    assert_eq!(status, 201, "{body}");
    // Evictions of its own pods only.
    let eviction = |name: &str| json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}});
    let evict = |name: &str| format!("{PODS}/{name}/eviction");
    let (status, refused) = as_user(
        addr,
        "node-token",
        ("POST", &evict("elsewhere")),
        &eviction("elsewhere"),
    )
    .await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(
        refused["message"],
        r#"pods "elsewhere" is forbidden: node a can only evict pods with spec.nodeName set to itself"#
    );
    let (status, body) = as_user(
        addr,
        "node-token",
        ("POST", &evict("mine")),
        &eviction("mine"),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    server.shutdown().await;
}

/// Goal: PersistentVolumeClaimResize (on by default) lets a bound claim grow only through a
/// storage class that allows expansion, with kube's 403s otherwise; disabled, any claim grows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_grow_only_where_their_class_allows() {
    let claims = "/api/v1/namespaces/default/persistentvolumeclaims";
    let setup = |args: ServeArgs| async move {
        let server = server_with(args).await;
        for (name, expands) in [("fast", true), ("fixed", false)] {
            let class = json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                "metadata": {"name": name}, "provisioner": "x", "allowVolumeExpansion": expands});
            let (status, body) = send_json(
                server.addr,
                "POST",
                "/apis/storage.k8s.io/v1/storageclasses",
                &class,
            )
            .await;
            assert_eq!(status, 201, "{body}");
        }
        server
    };
    let claim = |name: &str, class: &str| {
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
            "spec": {"storageClassName": class, "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}}}})
    };
    let grow = r#"{"spec":{"resources":{"requests":{"storage":"2Gi"}}}}"#;
    let patch = |addr, path: String, body: &'static str| async move {
        request(addr, "PATCH", &path, "application/merge-patch+json", body).await
    };
    let bind = r#"{"status":{"phase":"Bound"}}"#;

    let server = setup(ServeArgs::default()).await;
    let addr = server.addr;
    for name in ["pending", "quick", "stuck"] {
        let class = if name == "stuck" { "fixed" } else { "fast" };
        let (status, body) = send_json(addr, "POST", claims, &claim(name, class)).await;
        assert_eq!(status, 201, "{body}");
    }
    // An unbound claim's request is part of its immutable spec: kube's validation refuses
    // the change before the plugin (a validating one) sees it.
    let (status, refused) = patch(addr, format!("{claims}/pending"), grow).await;
    assert_eq!(status, 422, "{refused}");
    assert!(
        refused.contains(r#"PersistentVolumeClaim \"pending\" is invalid: spec: Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims"#),
        "{refused}"
    );
    for name in ["quick", "stuck"] {
        let (status, body) = patch(addr, format!("{claims}/{name}/status"), bind).await;
        assert_eq!(status, 200, "{body}");
    }
    let (status, grown) = patch(addr, format!("{claims}/quick"), grow).await;
    assert_eq!(status, 200, "{grown}");
    let (status, refused) = patch(addr, format!("{claims}/stuck"), grow).await;
    assert_eq!(status, 403, "{refused}");
    assert!(
        refused.contains("only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize"),
        "{refused}"
    );
    server.shutdown().await;

    let off = setup(ServeArgs {
        disable_admission_plugins: names(&["ServiceAccount", "PersistentVolumeClaimResize"]),
        ..ServeArgs::default()
    })
    .await;
    let (status, body) = send_json(off.addr, "POST", claims, &claim("any", "fixed")).await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = patch(off.addr, format!("{claims}/any/status"), bind).await;
    assert_eq!(status, 200, "{body}");
    let (status, grown) = patch(off.addr, format!("{claims}/any"), grow).await;
    assert_eq!(status, 200, "{grown}");
    off.shutdown().await;
}

/// Goal: CertificateApproval and CertificateSigning (on by default) — approving a request, or
/// writing its certificate, needs `approve` or `sign` on its signer (`signers`,
/// `certificates.k8s.io`), else kube's 403, whatever the user may do to the requests.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approving_and_signing_need_the_signer_s_permission() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(
        &tokens,
        "admin-token,admin,1,\"system:masters\"\nclerk-token,clerk,2\napprover-token,approver,3\n",
    )
    .unwrap();
    let rule = |user: &str, resource: &str| {
        json!({"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy",
            "spec": {"user": user, "resource": resource, "apiGroup": "certificates.k8s.io"}})
        .to_string()
    };
    let policy = dir.path().join("policy.jsonl");
    let rules = [
        rule("clerk", "certificatesigningrequests"),
        rule("approver", "certificatesigningrequests"),
        rule("approver", "signers"),
    ];
    std::fs::write(&policy, rules.join("\n") + "\n").unwrap();
    let server = server_with(ServeArgs {
        token_auth_file: Some(tokens),
        authorization_policy_file: Some(policy),
        ..ServeArgs::default()
    })
    .await;
    let addr = server.addr;
    let (status, created) = as_user(
        addr,
        "admin-token",
        ("POST", CSRS),
        &csr("req", "team", "example.com/x"),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let mut approved = created.clone();
    approved["status"] = json!({"conditions": [{"type": "Approved", "status": "True",
        "reason": "ok", "message": "ok"}]});
    let approval = format!("{CSRS}/req/approval");
    let (status, refused) = as_user(addr, "clerk-token", ("PUT", &approval), &approved).await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(
        refused["message"],
        r#"certificatesigningrequests.certificates.k8s.io "req" is forbidden: user not permitted to approve requests with signerName "example.com/x""#
    );
    let (status, body) = as_user(addr, "approver-token", ("PUT", &approval), &approved).await;
    assert_eq!(status, 200, "{body}");

    let mut signed = body.clone();
    // A real certificate: kube validates it before the (validating) plugin runs.
    let key = rcgen::KeyPair::generate().unwrap();
    let certificate = rcgen::CertificateParams::new(vec!["req".to_owned()])
        .unwrap()
        .self_signed(&key)
        .unwrap()
        .pem();
    signed["status"]["certificate"] =
        json!(base64::engine::general_purpose::STANDARD.encode(certificate));
    let (status, refused) = as_user(
        addr,
        "clerk-token",
        ("PUT", &format!("{CSRS}/req/status")),
        &signed,
    )
    .await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(
        refused["message"],
        r#"certificatesigningrequests.certificates.k8s.io "req" is forbidden: user not permitted to sign requests with signerName "example.com/x""#
    );
    server.shutdown().await;
}

/// Goal: NamespaceAutoProvision creates the missing namespace of a create (not on a dry run),
/// and AlwaysDeny refuses every write with kube's 403 while reads go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_provision_creates_namespaces_and_always_deny_refuses_writes() {
    let server = server_with(enabled(&["NamespaceAutoProvision"])).await;
    let addr = server.addr;
    let (path, body) = configmap_in("dry");
    let (status, answer) = send_json(addr, "POST", &format!("{path}?dryRun=All"), &body).await;
    assert_eq!(status, 404, "a dry run provisions nothing: {answer}");
    let (path, body) = configmap_in("fresh");
    let (status, created) = send_json(addr, "POST", &path, &body).await;
    assert_eq!(status, 201, "{created}");
    let (status, namespace) = common::get_json(addr, "/api/v1/namespaces/fresh").await;
    assert_eq!(status, 200, "{namespace}");
    assert_eq!(namespace["status"]["phase"], "Active");
    server.shutdown().await;

    let denying = server_with(enabled(&["AlwaysDeny"])).await;
    let addr = denying.addr;
    let (path, body) = configmap_in("default");
    let (status, refused) = send_json(addr, "POST", &path, &body).await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(
        refused["message"],
        r#"configmaps "c" is forbidden: admission control is denying all modifications"#
    );
    let (status, namespace) = common::get_json(addr, "/api/v1/namespaces/default").await;
    assert_eq!(status, 200, "{namespace}");
    let (status, refused) = request(
        addr,
        "DELETE",
        "/api/v1/namespaces/default/services/kubernetes",
        "application/json",
        "",
    )
    .await;
    assert_eq!(status, 403, "{refused}");
    assert!(refused.contains("admission control is denying all modifications"));
    denying.shutdown().await;
}

/// Goal: ExtendedResourceToleration gives a pod requesting an extended resource the
/// toleration of its taint; off by default.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extended_resources_bring_their_toleration() {
    let gpu = |name: &str| {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "cuda", "resources": {
                "requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}}]}})
    };
    let server = server_with(enabled(&["ExtendedResourceToleration"])).await;
    let (status, created) = send_json(server.addr, "POST", PODS, &gpu("trainer")).await;
    assert_eq!(status, 201, "{created}");
    let tolerations = created["spec"]["tolerations"].as_array().unwrap();
    assert!(
        tolerations.contains(
            &json!({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"})
        ),
        "{created}"
    );
    server.shutdown().await;

    let off = server_with(ServeArgs::default()).await;
    let (status, created) = send_json(off.addr, "POST", PODS, &gpu("trainer")).await;
    assert_eq!(status, 201, "{created}");
    let tolerations = created["spec"]["tolerations"].as_array().unwrap();
    assert!(
        tolerations.iter().all(|t| t["key"] != "nvidia.com/gpu"),
        "{created}"
    );
    off.shutdown().await;
}

/// Goal: PodNodeSelector gives a pod created in a namespace with a node selector annotation
/// the namespace's labels, and refuses one asking another value with kube's 403.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespaces_give_their_pods_a_node_selector() {
    let server = server_with(enabled(&["PodNodeSelector"])).await;
    let addr = server.addr;
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu",
        "annotations": {"scheduler.alpha.kubernetes.io/node-selector": "pool=gpu"}}});
    let (status, body) = send_json(addr, "POST", "/api/v1/namespaces", &namespace).await;
    assert_eq!(status, 201, "{body}");
    let pod = |name: &str, selector: Value| {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"nodeSelector": selector, "containers": [{"name": "c", "image": "i"}]}})
    };
    let pods = "/api/v1/namespaces/gpu/pods";
    let (status, created) =
        send_json(addr, "POST", pods, &pod("fits", json!({"disk": "ssd"}))).await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(
        created["spec"]["nodeSelector"],
        json!({"disk": "ssd", "pool": "gpu"})
    );
    let (status, refused) =
        send_json(addr, "POST", pods, &pod("stray", json!({"pool": "cpu"}))).await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(
        refused["message"],
        r#"pods "stray" is forbidden: pod node label selector conflicts with its namespace node label selector"#
    );
    server.shutdown().await;

    // kube's legacy unversioned configuration: a cluster default for namespaces without the
    // annotation, and `gpu`'s whitelist.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("legacy.yaml");
    std::fs::write(
        &file,
        "podNodeSelectorPluginConfig:\n  clusterDefaultNodeSelector: pool=shared\n  gpu: pool=gpu,disk=ssd\n",
    )
    .unwrap();
    let server = server_with(ServeArgs {
        admission_control_config_file: Some(file),
        ..enabled(&["PodNodeSelector"])
    })
    .await;
    let addr = server.addr;
    let (status, body) = send_json(addr, "POST", "/api/v1/namespaces", &namespace).await;
    assert_eq!(status, 201, "{body}");
    let (status, created) = send_json(addr, "POST", PODS, &pod("shared", json!({}))).await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["spec"]["nodeSelector"], json!({"pool": "shared"}));
    let (status, created) =
        send_json(addr, "POST", pods, &pod("fits", json!({"disk": "ssd"}))).await;
    assert_eq!(status, 201, "{created}");
    let (status, refused) =
        send_json(addr, "POST", pods, &pod("hdd", json!({"disk": "hdd"}))).await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(
        refused["message"],
        r#"pods "hdd" is forbidden: pod node label selector labels conflict with its namespace whitelist"#
    );
    server.shutdown().await;
}

/// Waits until a GET of `path` is 404.
async fn gone(addr: std::net::SocketAddr, path: String) {
    let gone = async {
        while common::get_json(addr, &path).await.0 != 404 {
            tokio::task::yield_now().await;
        }
    };
    tokio::time::timeout(common::HANG_GUARD, gone)
        .await
        .expect("the object goes");
}

/// Goal: StorageObjectInUseProtection (on by default) — a created claim and volume get kube's
/// finalizers; a deleted claim stays while a scheduled pod uses it and goes once the pod is
/// gone; a deleted volume that is not bound goes at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_in_use_stay_until_their_pods_go() {
    let server = server_with(ServeArgs::default()).await;
    let addr = server.addr;
    let claims = "/api/v1/namespaces/default/persistentvolumeclaims";
    let claim = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}}}});
    let (status, created) = send_json(addr, "POST", claims, &claim).await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(
        created["metadata"]["finalizers"],
        json!(["kubernetes.io/pvc-protection"])
    );
    let user = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "user"},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}],
            "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]}});
    let (status, body) = send_json(addr, "POST", PODS, &user).await;
    assert_eq!(status, 201, "{body}");
    let (status, marked) = request(
        addr,
        "DELETE",
        &format!("{claims}/data"),
        "application/json",
        "",
    )
    .await;
    assert_eq!(status, 200, "{marked}");
    let marked: Value = serde_json::from_str(&marked).unwrap();
    assert!(
        marked["metadata"]["deletionTimestamp"].is_string(),
        "{marked}"
    );
    // A claim no pod uses, deleted after it, goes: the controller, told of `data`'s deletion
    // first, has looked at both by then, and `data` stays.
    let mut free = claim.clone();
    free["metadata"]["name"] = json!("free");
    let (status, body) = send_json(addr, "POST", claims, &free).await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = request(
        addr,
        "DELETE",
        &format!("{claims}/free"),
        "application/json",
        "",
    )
    .await;
    assert_eq!(status, 200, "{body}");
    gone(addr, format!("{claims}/free")).await;
    let (status, kept) = common::get_json(addr, &format!("{claims}/data")).await;
    assert_eq!(status, 200, "{kept}");
    assert_eq!(
        kept["metadata"]["finalizers"],
        json!(["kubernetes.io/pvc-protection"])
    );
    let (status, body) = request(
        addr,
        "DELETE",
        &format!("{PODS}/user?gracePeriodSeconds=0"),
        "application/json",
        "",
    )
    .await;
    assert_eq!(status, 200, "{body}");
    gone(addr, format!("{claims}/data")).await;

    let volume = json!({"apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": "disk"}, "spec": {"capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/tmp/disk"}}});
    let (status, created) = send_json(addr, "POST", "/api/v1/persistentvolumes", &volume).await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(
        created["metadata"]["finalizers"],
        json!(["kubernetes.io/pv-protection"])
    );
    let (status, body) = request(
        addr,
        "DELETE",
        "/api/v1/persistentvolumes/disk",
        "application/json",
        "",
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let gone = async {
        while common::get_json(addr, "/api/v1/persistentvolumes/disk")
            .await
            .0
            != 404
        {
            tokio::task::yield_now().await;
        }
    };
    tokio::time::timeout(common::HANG_GUARD, gone)
        .await
        .expect("an unbound volume goes");
    server.shutdown().await;
}

/// Goal: OwnerReferencesPermissionEnforcement — under RBAC, a user who may update but not
/// delete ConfigMaps cannot change their owner references, nor set `blockOwnerDeletion`
/// towards an owner whose finalizers it may not update, in kube's words; an admin can.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owner_references_need_the_right_to_delete() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(
        &tokens,
        "admin-token,admin,1,\"system:masters\"\neditor-token,editor,2\n",
    )
    .unwrap();
    let server = server_with(ServeArgs {
        token_auth_file: Some(tokens),
        authorization_mode: Some(vec!["RBAC".to_owned()]),
        ..enabled(&["OwnerReferencesPermissionEnforcement"])
    })
    .await;
    let addr = server.addr;
    let rbac = "/apis/rbac.authorization.k8s.io/v1/namespaces/default";
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "edit-configmaps"}, "rules": [{"apiGroups": [""],
            "resources": ["configmaps"], "verbs": ["get", "create", "update", "patch"]}]});
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "editor"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
            "kind": "Role", "name": "edit-configmaps"},
        "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "editor"}]});
    for (path, body) in [("roles", &role), ("rolebindings", &binding)] {
        let (status, answer) = as_user(
            addr,
            "admin-token",
            ("POST", &format!("{rbac}/{path}")),
            body,
        )
        .await;
        assert_eq!(status, 201, "{answer}");
    }
    let configmaps = "/api/v1/namespaces/default/configmaps";
    // A real owner, so that the garbage collector keeps what it owns.
    let (status, created) = as_user(
        addr,
        "admin-token",
        ("POST", configmaps),
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owner"}}),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let uid = created["metadata"]["uid"].clone();
    let owner = |block: bool| {
        json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": uid,
            "blockOwnerDeletion": block}])
    };
    let (status, body) = as_user(
        addr,
        "editor-token",
        ("POST", configmaps),
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owned",
            "ownerReferences": owner(false)}}),
    )
    .await;
    assert_eq!(status, 201, "a create may name its owner: {body}");
    let (status, refused) = as_user(
        addr,
        "editor-token",
        ("POST", configmaps),
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "blocking",
            "ownerReferences": owner(true)}}),
    )
    .await;
    assert_eq!(status, 403, "{refused}");
    let message = refused["message"].as_str().unwrap();
    assert!(
        message.starts_with(r#"configmaps "blocking" is forbidden: cannot set blockOwnerDeletion if an ownerReference refers to a resource you can't set finalizers on: "#),
        "{message}"
    );
    let path = format!("{configmaps}/owned");
    let patch = json!({"metadata": {"ownerReferences": []}});
    let (status, refused) = as_user(addr, "editor-token", ("PATCH", &path), &patch).await;
    assert_eq!(status, 403, "{refused}");
    let message = refused["message"].as_str().unwrap();
    assert!(
        message.starts_with(r#"configmaps "owned" is forbidden: cannot set an ownerRef on a resource you can't delete: "#),
        "{message}"
    );
    let relabel = json!({"metadata": {"labels": {"a": "b"}}});
    let (status, body) = as_user(addr, "editor-token", ("PATCH", &path), &relabel).await;
    assert_eq!(status, 200, "other changes are the editor's: {body}");
    let (status, body) = as_user(addr, "admin-token", ("PATCH", &path), &patch).await;
    assert_eq!(status, 200, "{body}");
    server.shutdown().await;
}

/// An `AdmissionConfiguration` file in `dir` giving `plugin` its `configuration` (YAML,
/// indented for its place).
fn admission_file(dir: &std::path::Path, plugin: &str, configuration: &str) -> std::path::PathBuf {
    let file = dir.join("admission.yaml");
    let text = format!(
        "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- name: {plugin}\n  configuration:\n{configuration}"
    );
    std::fs::write(&file, text).unwrap();
    file
}

/// An Event in `namespace` about the pod `pod`.
fn event(name: &str, namespace: &str, pod: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Event",
        "metadata": {"name": name, "namespace": namespace},
        "involvedObject": {"kind": "Pod", "namespace": namespace, "name": pod},
        "reason": "Flood", "message": "again", "type": "Normal",
        "source": {"component": "flooder"}})
}

/// Goal: EventRateLimit (a defence against a client flooding Events) refuses the event past
/// a namespace's burst with kube's 429, not another namespace's, and gives a token back as
/// its clock moves (a clock the test moves: no wall time); enabled without a configuration,
/// or with one kube refuses, the server does not start, in kube's words.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_rate_limit_refuses_a_flood_of_events() {
    assert_eq!(
        refusal(enabled(&["EventRateLimit"])),
        r#"--admission-control-config-file: couldn't init admission plugin "EventRateLimit": limits: Invalid value: []eventratelimit.Limit(nil): must not be empty"#
    );
    let dir = tempfile::tempdir().unwrap();
    let bad = admission_file(
        dir.path(),
        "EventRateLimit",
        "    apiVersion: eventratelimit.admission.k8s.io/v1alpha1\n    kind: Configuration\n    limits:\n    - {type: Namespace, qps: 1, burst: 0}\n",
    );
    assert_eq!(
        refusal(ServeArgs {
            admission_control_config_file: Some(bad),
            ..enabled(&["EventRateLimit"])
        }),
        r#"--admission-control-config-file: couldn't init admission plugin "EventRateLimit": limits[0].burst: Invalid value: 0: must be positive"#
    );
    let file = admission_file(
        dir.path(),
        "EventRateLimit",
        "    apiVersion: eventratelimit.admission.k8s.io/v1alpha1\n    kind: Configuration\n    limits:\n    - {type: Namespace, qps: 1, burst: 3, cacheSize: 10}\n",
    );
    let args = ServeArgs {
        admission_control_config_file: Some(file),
        ..enabled(&["EventRateLimit"])
    };
    let mut config = ServeConfig::from_args(watchkeeper_testkit::loopback(args)).unwrap();
    let ticks = std::sync::Arc::new(watchkeeper::source::event_rate_limit::ManualTicks::default());
    let limiter = config.admission_config.event_rate_limit.take().unwrap();
    config.admission_config.event_rate_limit = Some(std::sync::Arc::new(limiter.on(ticks.clone())));
    let server = watchkeeper_testkit::start_configured(config).await.unwrap();
    let addr = server.addr;
    let (status, body) = send_json(
        addr,
        "POST",
        "/api/v1/namespaces",
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "quiet"}}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let events = "/api/v1/namespaces/default/events";
    for i in 0..3 {
        let (status, body) = send_json(
            addr,
            "POST",
            events,
            &event(&format!("e{i}"), "default", "p"),
        )
        .await;
        assert_eq!(status, 201, "{body}");
    }
    let (status, refused) = send_json(addr, "POST", events, &event("e3", "default", "p")).await;
    assert_eq!(status, 429, "{refused}");
    assert_eq!(refused["reason"], "TooManyRequests");
    assert_eq!(
        refused["message"],
        "Too many requests: limit reached on type Namespace for key default"
    );
    // A dry run is not limited (and takes no token).
    let (status, body) = send_json(
        addr,
        "POST",
        &format!("{events}?dryRun=All"),
        &event("dry", "default", "p"),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    // An update is an Event write too.
    let (status, _) = send_json(
        addr,
        "PUT",
        &format!("{events}/e0"),
        &event("e0", "default", "q"),
    )
    .await;
    assert_eq!(status, 429);
    // Another namespace has its own bucket.
    let (status, body) = send_json(
        addr,
        "POST",
        "/api/v1/namespaces/quiet/events",
        &event("e0", "quiet", "p"),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    // A second at one a second: one more token.
    ticks.advance(std::time::Duration::from_secs(1));
    let (status, body) = send_json(addr, "POST", events, &event("e3", "default", "p")).await;
    assert_eq!(status, 201, "{body}");
    let (status, _) = send_json(addr, "POST", events, &event("e4", "default", "p")).await;
    assert_eq!(status, 429);
    // Other kinds are not limited.
    let (status, body) = send_json(
        addr,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        &common::configmap("c", 1),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    server.shutdown().await;
}

/// Goal: PodTolerationRestriction merges a namespace's default tolerations (else the
/// configuration's) into its new pods, and refuses a pod whose tolerations its namespace's
/// whitelist (else the configuration's) does not allow, with kube's 500 and words; off by
/// default.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespaces_restrict_their_pods_tolerations() {
    let dir = tempfile::tempdir().unwrap();
    let file = admission_file(
        dir.path(),
        "PodTolerationRestriction",
        "    apiVersion: podtolerationrestriction.admission.k8s.io/v1alpha1\n    kind: Configuration\n    default:\n    - {key: cluster, operator: Exists, effect: NoSchedule}\n    whitelist:\n    - {key: cluster, operator: Exists}\n    - {key: team, operator: Exists}\n",
    );
    // Without DefaultTolerationSeconds' tolerations (which a whitelist must allow, as in kube).
    let plain = || names(&["ServiceAccount", "DefaultTolerationSeconds"]);
    let server = server_with(ServeArgs {
        admission_control_config_file: Some(file),
        disable_admission_plugins: plain(),
        ..enabled(&["PodTolerationRestriction"])
    })
    .await;
    let addr = server.addr;
    let annotated = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu",
        "annotations": {
            "scheduler.alpha.kubernetes.io/defaultTolerations":
                r#"[{"key":"gpu","operator":"Equal","value":"yes","effect":"NoSchedule"}]"#,
            "scheduler.alpha.kubernetes.io/tolerationsWhitelist":
                r#"[{"key":"gpu","operator":"Exists"}]"#}}});
    let (status, body) = send_json(addr, "POST", "/api/v1/namespaces", &annotated).await;
    assert_eq!(status, 201, "{body}");
    let pod = |name: &str, tolerations: Value| {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "i"}], "tolerations": tolerations}})
    };
    let (status, created) = send_json(
        addr,
        "POST",
        "/api/v1/namespaces/gpu/pods",
        &pod("a", json!([])),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(
        created["spec"]["tolerations"],
        json!([{"key": "gpu", "operator": "Equal", "value": "yes", "effect": "NoSchedule"}])
    );
    let (status, refused) = send_json(
        addr,
        "POST",
        "/api/v1/namespaces/gpu/pods",
        &pod("b", json!([{"key": "team", "operator": "Exists"}])),
    )
    .await;
    assert_eq!(status, 500, "{refused}");
    assert_eq!(
        refused["message"],
        "pod tolerations (possibly merged with namespace default tolerations) conflict with its namespace whitelist"
    );
    assert!(refused.get("reason").is_none_or(|r| r == ""), "{refused}");
    // `default` has neither annotation: the configuration's.
    let (status, created) = send_json(
        addr,
        "POST",
        PODS,
        &pod("c", json!([{"key": "team", "operator": "Exists"}])),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(
        created["spec"]["tolerations"],
        json!([{"key": "team", "operator": "Exists"},
            {"key": "cluster", "operator": "Exists", "effect": "NoSchedule"}])
    );
    let (status, refused) = send_json(
        addr,
        "POST",
        PODS,
        &pod("d", json!([{"key": "other", "operator": "Exists"}])),
    )
    .await;
    assert_eq!(status, 500, "{refused}");
    assert_eq!(
        refused["message"],
        "pod tolerations (possibly merged with namespace default tolerations) conflict with its cluster whitelist"
    );
    server.shutdown().await;

    let off = server_with(ServeArgs {
        disable_admission_plugins: plain(),
        ..ServeArgs::default()
    })
    .await;
    let (status, created) = send_json(
        off.addr,
        "POST",
        PODS,
        &pod("e", json!([{"key": "other", "operator": "Exists"}])),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(
        created["spec"]["tolerations"],
        json!([{"key": "other", "operator": "Exists"}])
    );
    off.shutdown().await;
}

/// Goal: ResourceQuota's `limitedResources` let a pod that requests CPU be created only in a
/// namespace with a quota limiting it (kube's 403 `insufficient quota to consume`), and a
/// pod of a limited priority class only where a quota of that scope selects it (kube's
/// plain 500); the configuration is validated as kube's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limited_resources_need_a_covering_quota() {
    let dir = tempfile::tempdir().unwrap();
    let bad = admission_file(
        dir.path(),
        "ResourceQuota",
        "    apiVersion: apiserver.config.k8s.io/v1\n    kind: ResourceQuotaConfiguration\n    limitedResources:\n    - matchContains: [cpu]\n",
    );
    assert_eq!(
        refusal(ServeArgs {
            admission_control_config_file: Some(bad),
            ..ServeArgs::default()
        }),
        r#"--admission-control-config-file: couldn't init admission plugin "ResourceQuota": limitedResources[0].resource: Required value"#
    );
    let file = admission_file(
        dir.path(),
        "ResourceQuota",
        "    apiVersion: apiserver.config.k8s.io/v1\n    kind: ResourceQuotaConfiguration\n    limitedResources:\n    - resource: pods\n      matchContains: [cpu]\n      matchScopes:\n      - {scopeName: PriorityClass, operator: In, values: [critical]}\n",
    );
    let server = server_with(ServeArgs {
        admission_control_config_file: Some(file),
        ..ServeArgs::default()
    })
    .await;
    let addr = server.addr;
    let pod = |name: &str, class: Option<&str>| {
        let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "i",
                "resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "100m"}}}]}});
        if let Some(class) = class {
            pod["spec"]["priorityClassName"] = json!(class);
        }
        pod
    };
    let (status, refused) = send_json(addr, "POST", PODS, &pod("greedy", None)).await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(
        refused["message"],
        r#"pods "greedy" is forbidden: insufficient quota to consume: cpu,limits.cpu,requests.cpu"#
    );
    // A pod without CPU is not limited.
    let (status, body) = send_json(
        addr,
        "POST",
        PODS,
        &json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "modest"},
            "spec": {"containers": [{"name": "c", "image": "i"}]}}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let quota = json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "cpu"},
        "spec": {"hard": {"cpu": "2", "requests.cpu": "2", "limits.cpu": "2"}}});
    let (status, body) = send_json(
        addr,
        "POST",
        "/api/v1/namespaces/default/resourcequotas",
        &quota,
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let created = async {
        loop {
            let (status, body) = send_json(addr, "POST", PODS, &pod("greedy", None)).await;
            if status == 201 {
                break;
            }
            assert_eq!(status, 403, "{body}");
            tokio::task::yield_now().await;
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(30), created)
        .await
        .expect("the quota is seen");
    let class = json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": "critical"}, "value": 1000});
    let (status, body) = send_json(
        addr,
        "POST",
        "/apis/scheduling.k8s.io/v1/priorityclasses",
        &class,
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let (status, refused) = send_json(addr, "POST", PODS, &pod("vip", Some("critical"))).await;
    assert_eq!(status, 500, "{refused}");
    assert_eq!(
        refused["message"],
        "insufficient quota to match these scopes: [{PriorityClass In [critical]}]"
    );
    server.shutdown().await;
}

/// An `imagePolicy` admission configuration for a webhook at `server` (its CA `ca`, base64
/// PEM), its kubeconfig written in `dir`.
fn image_policy_file(
    dir: &std::path::Path,
    server: &str,
    ca: &str,
    policy: &str,
) -> std::path::PathBuf {
    let kubeconfig = dir.join("imagepolicy.kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: policy\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\nusers:\n- name: apiserver\n  user:\n    token: policy-token\ncontexts:\n- name: policy\n  context:\n    cluster: policy\n    user: apiserver\ncurrent-context: policy\n"
        ),
    )
    .unwrap();
    admission_file(
        dir,
        "ImagePolicyWebhook",
        &format!(
            "    imagePolicy:\n      kubeConfigFile: {}\n{policy}",
            kubeconfig.display()
        ),
    )
}

/// Goal: ImagePolicyWebhook asks the webhook about a pod's images (and its
/// `*.image-policy.k8s.io/*` annotations), refuses what it denies in kube's words, keeps its
/// answers for their TTL (the plugin's clock, moved by the test), and, when the webhook
/// cannot be reached, admits the pod annotated `failed-open` under `defaultAllow` or refuses
/// it with kube's 403.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn image_policy_webhook_judges_pod_images() {
    use futures_util::FutureExt as _;
    let answer: common::hooks::Answer = std::sync::Arc::new(|_path, review: Value| {
        async move {
            let images = review["spec"]["containers"].to_string();
            let status = if images.contains("evil") {
                json!({"allowed": false, "reason": "evil is banned"})
            } else {
                json!({"allowed": true, "auditAnnotations": {"checked": "yes"}})
            };
            (
                200,
                json!({"apiVersion": "imagepolicy.k8s.io/v1alpha1", "kind": "ImageReview",
                "status": status}),
            )
        }
        .boxed()
    });
    let hooks = common::hooks::Hooks::start(answer).await;
    let dir = tempfile::tempdir().unwrap();
    let server_url = format!("https://127.0.0.1:{}/imagepolicy", hooks.port);
    let file = image_policy_file(
        dir.path(),
        &server_url,
        &hooks.ca_bundle,
        "      allowTTL: 60\n      denyTTL: 60\n      retryBackoff: 1\n      defaultAllow: false\n",
    );
    let args = ServeArgs {
        admission_control_config_file: Some(file),
        ..enabled(&["ImagePolicyWebhook"])
    };
    let mut config = ServeConfig::from_args(watchkeeper_testkit::loopback(args)).unwrap();
    let ticks = std::sync::Arc::new(watchkeeper::source::event_rate_limit::ManualTicks::default());
    let policy = config.admission_config.image_policy.take().unwrap();
    config.admission_config.image_policy = Some(std::sync::Arc::new(policy.on(ticks.clone())));
    let server = watchkeeper_testkit::start_configured(config).await.unwrap();
    let addr = server.addr;
    let mut good = pod("good", "app:1");
    good["metadata"]["annotations"] = json!({"team.image-policy.k8s.io/owner": "me", "other": "x"});
    let (status, created) = send_json(addr, "POST", PODS, &good).await;
    assert_eq!(status, 201, "{created}");
    let reviews = hooks.at("/imagepolicy");
    assert_eq!(reviews.len(), 1);
    assert_eq!(reviews[0]["kind"], "ImageReview");
    assert_eq!(reviews[0]["apiVersion"], "imagepolicy.k8s.io/v1alpha1");
    assert_eq!(
        reviews[0]["spec"],
        json!({"containers": [{"image": "app:1"}, {"image": "init"}],
            "annotations": {"team.image-policy.k8s.io/owner": "me"}, "namespace": "default"})
    );
    let (status, refused) = send_json(addr, "POST", PODS, &pod("bad", "evil:1")).await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(
        refused["message"],
        r#"pods "bad" is forbidden: image policy webhook backend denied one or more images: evil is banned"#
    );
    assert_eq!(hooks.at("/imagepolicy").len(), 2);
    // Kept answers: the same images again ask nothing, allowed or denied.
    good["metadata"]["name"] = json!("good-again");
    let (status, body) = send_json(addr, "POST", PODS, &good).await;
    assert_eq!(status, 201, "{body}");
    let (status, _) = send_json(addr, "POST", PODS, &pod("bad-again", "evil:1")).await;
    assert_eq!(status, 403);
    assert_eq!(hooks.at("/imagepolicy").len(), 2);
    // An update is judged too (here from the kept answer).
    let relabelled = merge_patch(
        addr,
        &format!("{PODS}/good"),
        r#"{"metadata":{"labels":{"a":"b"}}}"#,
    )
    .await;
    assert_eq!(relabelled["metadata"]["labels"]["a"], "b");
    assert_eq!(hooks.at("/imagepolicy").len(), 2);
    // Past the TTL, the webhook is asked again.
    ticks.advance(std::time::Duration::from_secs(61));
    good["metadata"]["name"] = json!("good-later");
    let (status, body) = send_json(addr, "POST", PODS, &good).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(hooks.at("/imagepolicy").len(), 3);
    server.shutdown().await;

    // The webhook unreachable: refused, or admitted and annotated under `defaultAllow`.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let gone = format!(
        "https://127.0.0.1:{}/imagepolicy",
        closed.local_addr().unwrap().port()
    );
    drop(closed);
    for allow in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let file = image_policy_file(
            dir.path(),
            &gone,
            &hooks.ca_bundle,
            &format!("      retryBackoff: 1\n      defaultAllow: {allow}\n"),
        );
        let server = server_with(ServeArgs {
            admission_control_config_file: Some(file),
            ..enabled(&["ImagePolicyWebhook"])
        })
        .await;
        let (status, body) = send_json(server.addr, "POST", PODS, &pod("p", "app:1")).await;
        if allow {
            assert_eq!(status, 201, "{body}");
            assert_eq!(
                body["metadata"]["annotations"]["alpha.image-policy.k8s.io/failed-open"],
                "true"
            );
        } else {
            assert_eq!(status, 403, "{body}");
            let message = body["message"].as_str().unwrap();
            assert!(
                message.starts_with(r#"pods "p" is forbidden: "#),
                "{message}"
            );
        }
        server.shutdown().await;
    }
}

//! Goal: discovery's `storageVersionHash` as kube-apiserver lists it — for every built-in
//! resource the value in kube's own table (`pkg/controlplane/storageversionhashdata`), none for
//! the resources kube lists without storage (reviews, `componentstatuses`) nor for
//! subresources, and one hash (the storage version's) for every served version of a CRD.

use crate::common;

use common::{get_json, send_json, server};
use serde_json::{Value, json};

/// kube's `GVRToStorageVersionHash` (kube's test data: a hash changes only when a resource's
/// storage version does).
const KUBE_HASHES: &[(&str, &str)] = &[
    ("v1/configmaps", "qFsyl6wFWjQ="),
    ("v1/endpoints", "fWeeMqaN/OA="),
    ("v1/events", "r2yiGXH7wu8="),
    ("v1/limitranges", "EBKMFVe6cwo="),
    ("v1/namespaces", "Q3oi5N2YM8M="),
    ("v1/nodes", "XwShjMxG9Fs="),
    ("v1/persistentvolumeclaims", "QWTyNDq0dC4="),
    ("v1/persistentvolumes", "HN/zwEC+JgM="),
    ("v1/pods", "xPOwRZ+Yhw8="),
    ("v1/podtemplates", "LIXB2x4IFpk="),
    ("v1/replicationcontrollers", "Jond2If31h0="),
    ("v1/resourcequotas", "8uhSgffRX6w="),
    ("v1/secrets", "S6u1pOWzb84="),
    ("v1/serviceaccounts", "pbx9ZvyFpBE="),
    ("v1/services", "0/CO1lhkEBI="),
    ("autoscaling/v1/horizontalpodautoscalers", "qwQve8ut294="),
    ("autoscaling/v2/horizontalpodautoscalers", "qwQve8ut294="),
    ("batch/v1/jobs", "mudhfqk/qZY="),
    ("batch/v1/cronjobs", "sd5LIXh4Fjs="),
    (
        "certificates.k8s.io/v1/certificatesigningrequests",
        "95fRKMXA+00=",
    ),
    ("coordination.k8s.io/v1/leases", "gqkMMb/YqFM="),
    ("discovery.k8s.io/v1/endpointslices", "qgS0xkrxYAI="),
    ("networking.k8s.io/v1/networkpolicies", "YpfwF18m1G8="),
    ("networking.k8s.io/v1/ingresses", "39NQlfNR+bo="),
    ("networking.k8s.io/v1/ingressclasses", "l/iqIbDgFyQ="),
    ("networking.k8s.io/v1/ipaddresses", "O4H8VxQhW5Y="),
    ("networking.k8s.io/v1/servicecidrs", "8ufAXOnr3Yg="),
    ("node.k8s.io/v1/runtimeclasses", "WQTu1GL3T2Q="),
    ("policy/v1/poddisruptionbudgets", "EVWiDmWqyJw="),
    (
        "rbac.authorization.k8s.io/v1/clusterrolebindings",
        "48tpQ8gZHFc=",
    ),
    ("rbac.authorization.k8s.io/v1/clusterroles", "bYE5ZWDrJ44="),
    ("rbac.authorization.k8s.io/v1/rolebindings", "eGsCzGH6b1g="),
    ("rbac.authorization.k8s.io/v1/roles", "7FuwZcIIItM="),
    ("scheduling.k8s.io/v1/priorityclasses", "1QwjyaZjj3Y="),
    ("storage.k8s.io/v1/csidrivers", "hL6j/rwBV5w="),
    ("storage.k8s.io/v1/csinodes", "Pe62DkZtjuo="),
    ("storage.k8s.io/v1/storageclasses", "K+m6uJwbjGY="),
    ("storage.k8s.io/v1/csistoragecapacities", "xeVl+2Ly1kE="),
    ("storage.k8s.io/v1/volumeattachments", "tJx/ezt6UDU="),
    ("apps/v1/controllerrevisions", "85nkx63pcBU="),
    ("apps/v1/daemonsets", "dd7pWHUlMKQ="),
    ("apps/v1/deployments", "8aSe+NMegvE="),
    ("apps/v1/replicasets", "P1RzHs8/mWQ="),
    ("apps/v1/statefulsets", "H+vl74LkKdo="),
    (
        "admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
        "Sqi0GUgDaX0=",
    ),
    (
        "admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
        "B0wHjQmsGNk=",
    ),
    (
        "admissionregistration.k8s.io/v1/validatingadmissionpolicies",
        "6OxvlMmQ6is=",
    ),
    (
        "admissionregistration.k8s.io/v1/validatingadmissionpolicybindings",
        "v9715VZqakg=",
    ),
    ("events.k8s.io/v1/events", "r2yiGXH7wu8="),
    (
        "flowcontrol.apiserver.k8s.io/v1/flowschemas",
        "GJVAJZSZBIw=",
    ),
    (
        "flowcontrol.apiserver.k8s.io/v1/prioritylevelconfigurations",
        "Kir5PVfvNeI=",
    ),
];

/// kube's `NoStorageVersionHash`.
const KUBE_WITHOUT: &[&str] = &[
    "v1/bindings",
    "v1/componentstatuses",
    "authentication.k8s.io/v1/selfsubjectreviews",
    "authentication.k8s.io/v1/tokenreviews",
    "authorization.k8s.io/v1/localsubjectaccessreviews",
    "authorization.k8s.io/v1/selfsubjectaccessreviews",
    "authorization.k8s.io/v1/selfsubjectrulesreviews",
    "authorization.k8s.io/v1/subjectaccessreviews",
];

/// Every `group/version/resource` (core: `v1/resource`) discovery lists, with its entry.
async fn listed(addr: std::net::SocketAddr) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    let mut lists = vec![("v1".to_owned(), get_json(addr, "/api/v1").await.1)];
    let (_, groups) = get_json(addr, "/apis").await;
    for group in groups["groups"].as_array().unwrap() {
        for version in group["versions"].as_array().unwrap() {
            let gv = version["groupVersion"].as_str().unwrap().to_owned();
            let (status, list) = get_json(addr, &format!("/apis/{gv}")).await;
            assert_eq!(status, 200, "{gv}: {list}");
            lists.push((gv, list));
        }
    }
    for (gv, list) in lists {
        for entry in list["resources"].as_array().unwrap() {
            out.push((
                format!("{gv}/{}", entry["name"].as_str().unwrap()),
                entry.clone(),
            ));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn built_in_resources_have_kubes_storage_version_hashes() {
    let server = server().await;
    let listed = listed(server.addr).await;
    let mut compared = 0;
    for (gvr, entry) in &listed {
        let hash = entry.get("storageVersionHash").and_then(Value::as_str);
        if entry["name"].as_str().unwrap().contains('/') {
            assert_eq!(hash, None, "a subresource has none: {entry}");
        } else if let Some((_, expected)) = KUBE_HASHES.iter().find(|(g, _)| g == gvr) {
            assert_eq!(hash, Some(*expected), "{gvr}");
            compared += 1;
        } else if KUBE_WITHOUT.contains(&gvr.as_str()) {
            assert_eq!(hash, None, "{gvr}: {entry}");
        } else {
            assert!(hash.is_some(), "a stored resource has one: {gvr}");
        }
    }
    // Every resource in kube's table that the server serves was compared; the core ones at
    // least are all served.
    assert!(compared >= 40, "compared only {compared}");
    for gvr in ["v1/pods", "apps/v1/deployments", "events.k8s.io/v1/events"] {
        assert!(listed.iter().any(|(g, _)| g == gvr), "{gvr} not listed");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_version_of_a_crd_lists_its_storage_versions_hash() {
    let server = server().await;
    let addr = server.addr;
    let schema = json!({"openAPIV3Schema": {"type": "object",
        "x-kubernetes-preserve-unknown-fields": true}});
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "gadgets", "kind": "Gadget"},
            "versions": [
                {"name": "v1beta1", "served": true, "storage": false, "schema": schema},
                {"name": "v1", "served": true, "storage": true, "schema": schema}
            ]
        }
    });
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let (status, created) = send_json(addr, "POST", crds, &crd).await;
    assert_eq!(status, 201, "{created}");
    let hash_of = |list: &Value| {
        list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == "gadgets")
            .map(|r| r["storageVersionHash"].clone())
            .unwrap_or(Value::Null)
    };
    let (_, v1) = get_json(addr, "/apis/example.com/v1").await;
    let (_, v1beta1) = get_json(addr, "/apis/example.com/v1beta1").await;
    // base64 of the first 8 bytes of sha256("example.com/v1/Gadget").
    assert_eq!(hash_of(&v1), json!("ggWp2HxsL0Q="), "{v1}");
    assert_eq!(hash_of(&v1beta1), hash_of(&v1), "{v1beta1}");
}

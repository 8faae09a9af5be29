//! kube-apiserver's validation of PersistentVolumes, PersistentVolumeClaims' updates and
//! CertificateSigningRequests over real HTTP: each invalid object is answered 422 Invalid with
//! kube's message (its causes in kube's order), valid ones are written.

use crate::common;

use base64::Engine as _;
use common::*;
use serde_json::{Value, json};

const PVS: &str = "/api/v1/persistentvolumes";

fn volume(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
        "spec": spec})
}

/// Goal: a PersistentVolume without a source, with a negative capacity, an unknown access
/// mode and reclaim policy is refused with kube's causes; a valid one is created; an update
/// may grow its capacity but not change its source or volume mode.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persistent_volumes() {
    let server = server().await;
    let addr = server.addr;
    let probed = volume(
        "bad",
        json!({"capacity": {"storage": "-1Gi"}, "accessModes": ["Bogus"],
            "persistentVolumeReclaimPolicy": "X"}),
    );
    assert_eq!(
        invalid_message(addr, "POST", PVS, &probed).await,
        "PersistentVolume \"bad\" is invalid: [spec.accessModes: Unsupported value: \"Bogus\": supported values: \"ReadOnlyMany\", \"ReadWriteMany\", \"ReadWriteOnce\", \"ReadWriteOncePod\", spec.capacity[storage]: Invalid value: -1073741824: must be a valid resource quantity, spec.capacity[storage]: Invalid value: \"-1Gi\": must be greater than zero, spec.persistentVolumeReclaimPolicy: Unsupported value: \"X\": supported values: \"Delete\", \"Recycle\", \"Retain\", spec: Required value: must specify a volume type]"
    );
    let local = volume(
        "local",
        json!({"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
            "local": {"path": "/mnt"}, "csi": {"driver": "d.example.com", "volumeHandle": "h"}}),
    );
    assert_eq!(
        invalid_message(addr, "POST", PVS, &local).await,
        "PersistentVolume \"local\" is invalid: [spec.nodeAffinity: Required value: Local volume requires node affinity, spec.csi: Forbidden: may not specify more than 1 volume type]"
    );
    let good = volume(
        "nfs",
        json!({"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteMany"],
            "nfs": {"server": "nfs.example.com", "path": "/exports"},
            "persistentVolumeReclaimPolicy": "Retain"}),
    );
    let mut stored = written(addr, "POST", PVS, &good).await;
    stored["spec"]["capacity"]["storage"] = json!("2Gi");
    let mut stored = written(addr, "PUT", &format!("{PVS}/nfs"), &stored).await;
    stored["spec"]["nfs"]["path"] = json!("/other");
    stored["spec"]["volumeMode"] = json!("Block");
    let message = invalid_message(addr, "PUT", &format!("{PVS}/nfs"), &stored).await;
    assert!(
        message.starts_with("PersistentVolume \"nfs\" is invalid: [spec.persistentvolumesource: Forbidden: spec.persistentvolumesource is immutable after creation\n"),
        "{message}"
    );
    assert!(
        message.ends_with(", volumeMode: Invalid value: \"Block\": field is immutable]"),
        "{message}"
    );
    server.shutdown().await;
}

/// Goal: a claim's spec is immutable but for a first volume name (and a bound claim's storage
/// request), in kube's words.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claim_updates() {
    let server = server().await;
    let addr = server.addr;
    let class = json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": "fast"}, "provisioner": "example.com/p",
        "allowVolumeExpansion": true});
    written(
        addr,
        "POST",
        "/apis/storage.k8s.io/v1/storageclasses",
        &class,
    )
    .await;
    let path = "/api/v1/namespaces/default/persistentvolumeclaims";
    let claim = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"],
            "storageClassName": "fast", "resources": {"requests": {"storage": "1Gi"}}}});
    let mut stored = written(addr, "POST", path, &claim).await;
    stored["spec"]["volumeName"] = json!("pv-1");
    let stored = written(addr, "PUT", &format!("{path}/data"), &stored).await;
    assert_eq!(stored["spec"]["volumeName"], "pv-1");
    let mut grown = stored.clone();
    grown["spec"]["resources"]["requests"]["storage"] = json!("2Gi");
    grown["spec"]["accessModes"] = json!(["ReadWriteMany"]);
    let message = invalid_message(addr, "PUT", &format!("{path}/data"), &grown).await;
    assert!(
        message.starts_with("PersistentVolumeClaim \"data\" is invalid: spec: Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims\n"),
        "{message}"
    );
    // Bound, the request may grow (the access modes still may not change).
    let mut bound = stored.clone();
    bound["status"] = json!({"phase": "Bound", "capacity": {"storage": "1Gi"}});
    let bound = written(addr, "PUT", &format!("{path}/data/status"), &bound).await;
    let mut grown = bound.clone();
    grown["spec"]["resources"]["requests"]["storage"] = json!("2Gi");
    let grown = written(addr, "PUT", &format!("{path}/data"), &grown).await;
    assert_eq!(grown["spec"]["resources"]["requests"]["storage"], "2Gi");
    server.shutdown().await;
}

const CSRS: &str = "/apis/certificates.k8s.io/v1/certificatesigningrequests";

/// A real request (rcgen) named `name`.
fn csr(name: &str) -> Value {
    let key = rcgen::KeyPair::generate().unwrap();
    let pem = rcgen::CertificateParams::default()
        .serialize_request(&key)
        .unwrap()
        .pem()
        .unwrap();
    json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
        "metadata": {"name": name},
        "spec": {"request": base64::engine::general_purpose::STANDARD.encode(pem),
            "signerName": "example.com/signer", "usages": ["client auth"]}})
}

/// Goal: a request that is no PEM certificate request, with a signer name without a domain
/// and an unknown usage, is refused with kube's causes; a real one is created; an Approved
/// condition is added only through `approval`, the main endpoint keeps the stored status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificate_signing_requests() {
    let server = server().await;
    let addr = server.addr;
    let probed = json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
        "metadata": {"name": "bad"},
        "spec": {"request": "eA==", "signerName": "bad", "usages": ["bogus"], "expirationSeconds": 60}});
    assert_eq!(
        invalid_message(addr, "POST", CSRS, &probed).await,
        "CertificateSigningRequest.certificates.k8s.io \"bad\" is invalid: [spec.request: Invalid value: []byte{0x78}: PEM block type must be CERTIFICATE REQUEST, spec.usages[0]: Unsupported value: \"bogus\": supported values: \"any\", \"cert sign\", \"client auth\", \"code signing\", \"content commitment\", \"crl sign\", \"data encipherment\", \"decipher only\", \"digital signature\", \"email protection\", \"encipher only\", \"ipsec end system\", \"ipsec tunnel\", \"ipsec user\", \"key agreement\", \"key encipherment\", \"microsoft sgc\", \"netscape sgc\", \"ocsp signing\", \"s/mime\", \"server auth\", \"signing\", \"timestamping\", spec.signerName: Invalid value: \"bad\": must be a fully qualified domain and path of the form 'example.com/signer-name', spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 600 seconds (10 minutes)]"
    );
    let created = written(addr, "POST", CSRS, &csr("good")).await;
    let mut approved = created.clone();
    approved["status"] = json!({"conditions": [{"type": "Approved", "status": "True",
        "reason": "ok", "message": "ok"}]});
    // The main endpoint keeps the stored status (and spec).
    let mut changed = approved.clone();
    changed["spec"]["signerName"] = json!("other.example.com/x");
    let kept = written(addr, "PUT", &format!("{CSRS}/good"), &changed).await;
    assert!(kept["status"].get("conditions").is_none(), "{kept}");
    assert_eq!(kept["spec"]["signerName"], "example.com/signer");
    approved["metadata"]["resourceVersion"] = kept["metadata"]["resourceVersion"].clone();
    assert_eq!(
        invalid_message(addr, "PUT", &format!("{CSRS}/good/status"), &approved).await,
        "CertificateSigningRequest.certificates.k8s.io \"good\" is invalid: status.conditions: Forbidden: updates may not add a condition of type \"Approved\""
    );
    let body = written(addr, "PUT", &format!("{CSRS}/good/approval"), &approved).await;
    assert_eq!(body["status"]["conditions"][0]["type"], "Approved");
    let mut signed = body.clone();
    signed["status"]["certificate"] = json!(base64::engine::general_purpose::STANDARD.encode("no"));
    assert_eq!(
        invalid_message(addr, "PUT", &format!("{CSRS}/good/status"), &signed).await,
        "CertificateSigningRequest.certificates.k8s.io \"good\" is invalid: status.certificate: Invalid value: \"<certificate data>\": must contain at least one CERTIFICATE PEM block"
    );
    server.shutdown().await;
}

/// Goal (kube's conformance test "should support CSR API operations"): a write of a request's
/// `/status` takes the annotations and conditions it sets, keeps the stored spec, and keeps
/// the stored `Approved` condition where it keeps one (`csrStatusStrategy`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_s_status_write_keeps_its_metadata_and_approval() {
    let server = server().await;
    let addr = server.addr;
    written(addr, "POST", CSRS, &csr("st")).await;
    let path = format!("{CSRS}/st");
    let patch = json!({"metadata": {"annotations": {"patchedstatus": "true"}},
        "spec": {"signerName": "example.com/other"},
        "status": {"conditions": [{"type": "PatchStatusFailed", "status": "True", "reason": "e2e"}]}});
    let patched = merge_patch(addr, &format!("{path}/status"), &patch.to_string()).await;
    assert_eq!(patched["metadata"]["annotations"]["patchedstatus"], "true");
    assert_eq!(patched["spec"]["signerName"], "example.com/signer");
    assert_eq!(
        patched["status"]["conditions"][0]["type"],
        "PatchStatusFailed"
    );
    let approval = json!({"status": {"conditions": [
        {"type": "Approved", "status": "True", "reason": "ok", "message": "first"}]}});
    let approved = merge_patch(addr, &format!("{path}/approval"), &approval.to_string()).await;
    let conditions = approved["status"]["conditions"].as_array().unwrap().clone();
    let rewritten: Vec<Value> = conditions
        .iter()
        .map(|c| {
            let mut c = c.clone();
            if c["type"] == "Approved" {
                c["message"] = json!("changed by a status write");
            }
            c
        })
        .collect();
    let kept = merge_patch(
        addr,
        &format!("{path}/status"),
        &json!({"status": {"conditions": rewritten}}).to_string(),
    )
    .await;
    let approval = kept["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Approved")
        .cloned()
        .unwrap();
    assert_eq!(approval["message"], "first");
    server.shutdown().await;
}

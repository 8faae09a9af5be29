//! Encryption at rest over real HTTP (`--encryption-provider-config`, kube's
//! `EncryptionConfiguration`): Secrets written through the API are stored encrypted with
//! kube's format and read back (GET, LIST, WATCH, kubectl) as written; resources no rule
//! names are stored as they are; the embedded store's encrypted values survive a restart, and
//! a restart whose configuration lost the key does not read them (absent, never a wrong value);
//! `--encryption-provider-config-automatic-reload` takes a rewritten file's new first key
//! for new writes and keeps a refused file from changing anything.

use crate::common;
use crate::kubectl_support;

use common::*;
use serde_json::json;
use watchkeeper::config::ServeArgs;
use watchkeeper_store::{AnyStore, RangeRequest, Store};

use kubectl_support::Kubectl;

/// A 32-byte key, base64 (the bytes `0123456789abcdef0123456789abcdef`).
const KEY: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";

fn write_config(dir: &std::path::Path, name: &str, providers: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(
        &path,
        format!(
            "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: [secrets]\n  providers:\n{providers}"
        ),
    )
    .unwrap();
    path
}

fn aescbc(name: &str) -> String {
    format!(
        "  - aescbc:\n      keys:\n      - name: {name}\n        secret: {KEY}\n  - identity: {{}}\n"
    )
}

/// The raw stored value of `key`, under the transformer.
async fn raw(store: &AnyStore, key: &str) -> Vec<u8> {
    let AnyStore::Transformed(transformed) = store else {
        panic!("the store is not transformed");
    };
    let response = transformed
        .inner()
        .range(RangeRequest::prefix(bytes::Bytes::copy_from_slice(
            key.as_bytes(),
        )))
        .await
        .unwrap();
    response.kvs[0].value.to_vec()
}

/// Goal: a Secret is stored as `k8s:enc:aescbc:v1:key1:` + ciphertext (its data nowhere in
/// the stored bytes) and served as written by GET, LIST, WATCH and kubectl; a ConfigMap is
/// stored as it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_are_stored_encrypted_and_served_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let server = server_with(ServeArgs {
        encryption_provider_config: Some(write_config(dir.path(), "enc.yaml", &aescbc("key1"))),
        ..ServeArgs::default()
    })
    .await;
    let addr = server.addr;
    let mut watch = watchkeeper_testkit::RawWatch::open(
        addr,
        "/api/v1/namespaces/default/secrets?watch=true",
        None,
        &[],
    )
    .await
    .unwrap();
    let (status, body) = send_json(
        addr,
        "POST",
        "/api/v1/namespaces/default/secrets",
        &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db"},
            "stringData": {"password": "hunter2-plaintext"}}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = send_json(
        addr,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "plain"},
            "data": {"note": "visible-plaintext"}}),
    )
    .await;
    assert_eq!(status, 201, "{body}");

    let store = server.store().unwrap();
    let stored = raw(store, "/registry/secrets/default/db").await;
    assert!(
        stored.starts_with(b"k8s:enc:aescbc:v1:key1:"),
        "{:?}",
        String::from_utf8_lossy(&stored)
    );
    let encoded = "aHVudGVyMi1wbGFpbnRleHQ="; // base64 of the password, as the object holds it
    let text = String::from_utf8_lossy(&stored);
    assert!(
        !text.contains(encoded) && !text.contains("hunter2"),
        "{text}"
    );
    let plain = raw(store, "/registry/configmaps/default/plain").await;
    assert!(String::from_utf8_lossy(&plain).contains("visible-plaintext"));

    let (status, secret) = get_json(addr, "/api/v1/namespaces/default/secrets/db").await;
    assert_eq!(status, 200, "{secret}");
    assert_eq!(secret["data"]["password"], encoded);
    let (status, list) = get_json(addr, "/api/v1/namespaces/default/secrets").await;
    assert_eq!(status, 200, "{list}");
    assert_eq!(list["items"][0]["data"]["password"], encoded);
    let event = tokio::time::timeout(HANG_GUARD, watch.next_json())
        .await
        .expect("an event")
        .unwrap()
        .expect("the watch is open");
    assert_eq!(event["type"], "ADDED");
    assert_eq!(event["object"]["data"]["password"], encoded);
    // A consistent GET straight from the store (resourceVersion unset, fresh) reads it too.
    let k = Kubectl::new(addr);
    let out = k
        .run(&["get", "secret", "db", "-o", "jsonpath={.data.password}"])
        .await;
    assert!(out.success(), "{out:?}");
    assert_eq!(out.stdout, encoded);
    // kube's metric of the transformations.
    let text = metrics_text(addr).await;
    let written = sample(
        &text,
        r#"apiserver_storage_transformation_operations_total{transformation_type="to_storage",transformer_prefix="k8s:enc:aescbc:v1:key1:",status="OK"}"#,
    );
    assert_eq!(written, 1, "{text}");
    let read = sample(
        &text,
        r#"apiserver_storage_transformation_operations_total{transformation_type="from_storage",transformer_prefix="k8s:enc:aescbc:v1:key1:",status="OK"}"#,
    );
    assert!(read >= 1, "{text}");
}

/// Goal: on the embedded store, encrypted Secrets are read after a restart with the same
/// key; a restart whose configuration no longer has the key does not serve a wrong value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn encrypted_values_survive_a_restart_and_need_their_key() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let args = |config: std::path::PathBuf| ServeArgs {
        store: Some("embedded".to_owned()),
        data_dir: Some(data.clone()),
        encryption_provider_config: Some(config),
        ..ServeArgs::default()
    };
    let with_key1 = write_config(dir.path(), "key1.yaml", &aescbc("key1"));
    let server = server_with(args(with_key1.clone())).await;
    let (status, body) = send_json(
        server.addr,
        "POST",
        "/api/v1/namespaces/default/secrets",
        &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "kept"},
            "data": {"k": "dmFsdWU="}}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    server.shutdown().await;

    let server = restarted(args(with_key1)).await;
    let (status, secret) = get_json(server.addr, "/api/v1/namespaces/default/secrets/kept").await;
    assert_eq!(status, 200, "{secret}");
    assert_eq!(secret["data"]["k"], "dmFsdWU=");
    server.shutdown().await;

    // Key renamed: nothing reads the stored value. It is never served as anything else: the
    // Secret is absent (as any value the server cannot decode), everything else is served,
    // and the stored value is left as it was.
    let other = write_config(dir.path(), "key2.yaml", &aescbc("key2"));
    let server = restarted(args(other)).await;
    let (status, body) = get_json(server.addr, "/api/v1/namespaces/default/secrets/kept").await;
    assert_eq!(status, 404, "{body}");
    let (status, body) = get_json(server.addr, "/api/v1/namespaces/default/configmaps").await;
    assert_eq!(status, 200, "{body}");
    let stored = raw(server.store().unwrap(), "/registry/secrets/default/kept").await;
    assert!(stored.starts_with(b"k8s:enc:aescbc:v1:key1:"));
    server.shutdown().await;
}

/// Goal: over etcd, what etcd holds is kube's ciphertext (what `etcdctl get` shows an
/// operator checking encryption at rest: the CIS benchmark's check), and the server reads it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_holds_the_ciphertext() {
    let endpoint = common::etcd::shared_endpoint();
    let prefix = common::etcd::fresh_prefix();
    let dir = tempfile::tempdir().unwrap();
    let providers =
        format!("  - aesgcm:\n      keys:\n      - name: gcm1\n        secret: {KEY}\n");
    let server = server_with(ServeArgs {
        encryption_provider_config: Some(write_config(dir.path(), "gcm.yaml", &providers)),
        ..common::etcd::shared_args(&prefix)
    })
    .await;
    let (status, body) = send_json(
        server.addr,
        "POST",
        "/api/v1/namespaces/default/secrets",
        &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "in-etcd"},
            "stringData": {"token": "top-secret-token"}}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let output = tokio::process::Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .args([
            "--endpoints",
            &endpoint,
            "get",
            &format!("{prefix}/secrets/default/in-etcd"),
            "--print-value-only",
        ])
        .output()
        .await
        .expect("etcdctl runs");
    assert!(output.status.success(), "{output:?}");
    assert!(
        output.stdout.starts_with(b"k8s:enc:aesgcm:v1:gcm1:"),
        "{output:?}"
    );
    let held = String::from_utf8_lossy(&output.stdout);
    assert!(!held.contains("dG9wLXNlY3JldC10b2tlbg") && !held.contains("top-secret"));
    let (status, secret) =
        get_json(server.addr, "/api/v1/namespaces/default/secrets/in-etcd").await;
    assert_eq!(status, 200, "{secret}");
    assert_eq!(secret["data"]["token"], "dG9wLXNlY3JldC10b2tlbg==");
    server.shutdown().await;
}

/// The `apiserver_encryption_config_controller_automatic_reloads_total` sample of `status`
/// now (its `apiserver_id_hash` label is the server's own).
async fn reloads(addr: std::net::SocketAddr, status: &str) -> u64 {
    let prefix = format!(
        "apiserver_encryption_config_controller_automatic_reloads_total{{status=\"{status}\","
    );
    let text = metrics_text(addr).await;
    text.lines()
        .find(|line| line.starts_with(&prefix))
        .and_then(|line| line.rsplit(' ').next()?.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("no {prefix} in /metrics:\n{text}"))
}

/// Waits until [`reloads`] of `status` is at least `least`.
async fn reloads_at_least(addr: std::net::SocketAddr, status: &str, least: u64) {
    let reached = async {
        while reloads(addr, status).await < least {
            tokio::task::yield_now().await;
        }
    };
    tokio::time::timeout(HANG_GUARD, reached)
        .await
        .expect("the reload was counted");
}

/// Goal: `--encryption-provider-config-automatic-reload` — once the file is rewritten with a
/// new first key, new writes use it while values under the old key stay readable; a file
/// that cannot be used afterwards is counted as a failure and changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rewritten_configuration_is_reloaded() {
    const OTHER_KEY: &str = "ZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4NzY1NDMyMTA=";
    let dir = tempfile::tempdir().unwrap();
    let path = write_config(dir.path(), "enc.yaml", &aescbc("key1"));
    let server = server_with(ServeArgs {
        encryption_provider_config: Some(path.clone()),
        encryption_provider_config_automatic_reload: Some(true),
        encryption_provider_config_reload_interval_ms: Some(100),
        ..ServeArgs::default()
    })
    .await;
    let addr = server.addr;
    let secret = |name: &str| {
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
            "stringData": {"k": "v"}})
    };
    let secrets = "/api/v1/namespaces/default/secrets";
    let (status, body) = send_json(addr, "POST", secrets, &secret("before")).await;
    assert_eq!(status, 201, "{body}");
    let store = server.store().unwrap();
    assert!(
        raw(store, "/registry/secrets/default/before")
            .await
            .starts_with(b"k8s:enc:aescbc:v1:key1:")
    );

    let rotated = format!(
        "  - aescbc:\n      keys:\n      - name: key2\n        secret: {OTHER_KEY}\n      - name: key1\n        secret: {KEY}\n  - identity: {{}}\n"
    );
    write_config(dir.path(), "enc.yaml", &rotated);
    reloads_at_least(addr, "success", 1).await;
    let (status, body) = send_json(addr, "POST", secrets, &secret("after")).await;
    assert_eq!(status, 201, "{body}");
    assert!(
        raw(store, "/registry/secrets/default/after")
            .await
            .starts_with(b"k8s:enc:aescbc:v1:key2:")
    );
    let (status, old) = get_json(addr, &format!("{secrets}/before")).await;
    assert_eq!(status, 200, "{old}");
    assert_eq!(old["data"]["k"], "dg==");

    // A configuration the validation refuses: counted, the one in use kept. (A poll that
    // read the rotated file half-written counted a failure already.)
    let failures = reloads(addr, "failure").await;
    std::fs::write(
        &path,
        "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources: []\n",
    )
    .unwrap();
    reloads_at_least(addr, "failure", failures + 1).await;
    let (status, body) = send_json(addr, "POST", secrets, &secret("still")).await;
    assert_eq!(status, 201, "{body}");
    assert!(
        raw(store, "/registry/secrets/default/still")
            .await
            .starts_with(b"k8s:enc:aescbc:v1:key2:")
    );
    let (status, old) = get_json(addr, &format!("{secrets}/before")).await;
    assert_eq!((status, &old["data"]["k"]), (200, &json!("dg==")));
    server.shutdown().await;
}

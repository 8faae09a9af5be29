//! TLS (rustls) end to end: kubectl with a CA and a bearer token (reads work, a read-only
//! user's write and a watch of another namespace are 403), kubectl with a client certificate
//! (the CN is the user, the O values the groups), 401 without credentials, a certificate from
//! another CA refused, HTTP/2 negotiated by ALPN (curl), plain HTTP on a non-loopback
//! address refused at startup, and `kubectl create token` with the token used by
//! `kubectl --token` (kubectl sends tokens only over TLS). Certificates are made per test with rcgen.

use crate::common;
use crate::kubectl_support;

use std::path::Path;

use base64::Engine;
use rcgen::ExtendedKeyUsagePurpose;
use serde_json::{Value, json};
use watchkeeper::Server;
use watchkeeper::config::{ServeArgs, ServeConfig};

use common::pki::Pki;
use common::server_with;
use kubectl_support::Kubectl;

const TOKENS: &str = "admin-token,admin,1,\"system:masters\"\nreader-token,reader,2\n";

fn policies() -> String {
    [
        json!({"group": "system:masters", "namespace": "*", "resource": "*", "apiGroup": "*", "nonResourcePath": "*"}),
        // reader: read-only, and only in the namespace default.
        json!({"user": "reader", "namespace": "default", "resource": "*", "apiGroup": "*", "readonly": true}),
        // The certificate's O value: read-only in default.
        json!({"group": "team-a", "namespace": "default", "resource": "*", "apiGroup": "*", "readonly": true}),
        json!({"group": "system:authenticated", "nonResourcePath": "*", "readonly": true}),
    ]
    .iter()
    .map(|spec| {
        json!({"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": spec})
            .to_string()
    })
    .collect::<Vec<_>>()
    .join("\n")
}

fn b64(text: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(text)
}

fn kubeconfig(server: &Server, ca_pem: &str, user: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters: [{{name: tls, cluster: {{server: \"https://{}\", certificate-authority-data: {}}}}}]\nusers: [{{name: u, user: {user}}}]\ncontexts: [{{name: tls, context: {{cluster: tls, user: u, namespace: default}}}}]\ncurrent-context: tls\n",
        server.addr,
        b64(ca_pem)
    )
}

async fn tls_server(pki: &Pki) -> Server {
    let args = ServeArgs {
        root_ca_file: Some(pki.ca_file()),
        enable_root_ca_cert_publisher: Some(true),
        token_auth_file: Some(pki.write("tokens.csv", TOKENS)),
        authorization_policy_file: Some(pki.write("policy.jsonl", &policies())),
        ..pki.server_args()
    };
    server_with(args).await
}

/// curl over TLS: returns (HTTP version, status, body).
async fn curl(ca: &Path, extra: &[&str], url: &str) -> (String, u16, String) {
    let output = tokio::process::Command::new("curl")
        .args(["-sS", "--cacert"])
        .arg(ca)
        .args(extra)
        .args(["-w", "\n%{http_version} %{http_code}", url])
        .output()
        .await
        .expect("curl runs");
    let text = String::from_utf8_lossy(&output.stdout).to_string();
    let (body, trailer) = text.rsplit_once('\n').unwrap_or(("", &text));
    let (version, code) = trailer.split_once(' ').unwrap_or(("", "0"));
    (
        version.to_owned(),
        code.parse().unwrap_or(0),
        body.to_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_with_a_token_over_tls() {
    let pki = Pki::new("test-ca");
    let server = tls_server(&pki).await;
    let admin = Kubectl::with_kubeconfig(&kubeconfig(&server, &pki.ca_pem, "{token: admin-token}"));
    admin
        .ok(&["create", "configmap", "settings", "--from-literal=a=1"])
        .await;
    admin
        .ok(&[
            "create",
            "configmap",
            "system-settings",
            "-n",
            "kube-system",
            "--from-literal=a=1",
        ])
        .await;

    // Every namespace publishes the CA of --root-ca-file, as kube-controller-manager does.
    admin
        .ok(&[
            "wait",
            "--for=create",
            "configmap/kube-root-ca.crt",
            "--timeout=60s",
        ])
        .await;
    let published = admin.json(&["get", "configmap", "kube-root-ca.crt"]).await;
    assert_eq!(
        published["data"]["ca.crt"],
        pki.ca_pem.replace("\r\n", "\n"),
        "{published}"
    );

    let reader =
        Kubectl::with_kubeconfig(&kubeconfig(&server, &pki.ca_pem, "{token: reader-token}"));
    let got = reader.json(&["get", "configmap", "settings"]).await;
    assert_eq!(got["data"]["a"], "1");
    let denied = reader
        .fails(&["create", "configmap", "nope", "--from-literal=a=1"])
        .await;
    assert!(
        denied.stderr.contains("forbidden")
            && denied.stderr.contains("User \"reader\" cannot create"),
        "{}",
        denied.stderr
    );
    let denied = reader
        .fails(&["get", "configmaps", "-n", "kube-system", "--watch"])
        .await;
    assert!(
        denied.stderr.contains("forbidden")
            && denied.stderr.contains("in the namespace \"kube-system\""),
        "{}",
        denied.stderr
    );
    // The watch request itself (not only kubectl's first list) is a 403 Status.
    let ca = pki.ca_file();
    let (_, code, body) = curl(
        &ca,
        &["-H", "Authorization: Bearer reader-token"],
        &format!(
            "https://{}/api/v1/namespaces/kube-system/configmaps?watch=true",
            server.addr
        ),
    )
    .await;
    assert_eq!(code, 403, "{body}");
    let status: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["reason"], "Forbidden");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("cannot watch resource \"configmaps\""),
        "{status}"
    );
    // And in its own namespace the reader's watch works (and ends at timeoutSeconds).
    let (_, code, body) = curl(
        &ca,
        &["-H", "Authorization: Bearer reader-token"],
        &format!(
            "https://{}/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=0&timeoutSeconds=1",
            server.addr
        ),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("\"settings\""), "{body}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_with_a_client_certificate() {
    let pki = Pki::new("test-ca");
    let server = tls_server(&pki).await;
    let admin = Kubectl::with_kubeconfig(&kubeconfig(&server, &pki.ca_pem, "{token: admin-token}"));
    admin
        .ok(&["create", "configmap", "settings", "--from-literal=a=1"])
        .await;
    let (cert, key) = pki.leaf(
        &[],
        "carol",
        // rcgen keeps one value per attribute type, so one O here.
        &["team-a"],
        &[ExtendedKeyUsagePurpose::ClientAuth],
    );
    let carol = Kubectl::with_kubeconfig(&kubeconfig(
        &server,
        &pki.ca_pem,
        &format!(
            "{{client-certificate-data: {}, client-key-data: {}}}",
            b64(&cert),
            b64(&key)
        ),
    ));
    // The O value team-a grants reads in default.
    let got = carol.json(&["get", "configmap", "settings"]).await;
    assert_eq!(got["data"]["a"], "1");
    // The CN is the user name in the 403.
    let denied = carol
        .fails(&["create", "configmap", "nope", "--from-literal=a=1"])
        .await;
    assert!(
        denied.stderr.contains("User \"carol\" cannot create"),
        "{}",
        denied.stderr
    );
    // The server sees carol as a watcher too.
    let ca = pki.ca_file();
    let cert_file = pki.write("carol.crt", &cert);
    let key_file = pki.write("carol.key", &key);
    let (_, code, body) = curl(
        &ca,
        &[
            "--cert",
            cert_file.to_str().unwrap(),
            "--key",
            key_file.to_str().unwrap(),
        ],
        &format!(
            "https://{}/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=0&timeoutSeconds=1",
            server.addr
        ),
    )
    .await;
    assert_eq!(code, 200, "{body}");

    // A certificate from another CA does not get through the handshake.
    let stranger_ca = Pki::new("stranger-ca");
    let (cert, key) = stranger_ca.leaf(
        &[],
        "admin",
        &["system:masters"],
        &[ExtendedKeyUsagePurpose::ClientAuth],
    );
    let output = tokio::process::Command::new("curl")
        .args(["-sS", "--cacert"])
        .arg(&ca)
        .arg("--cert")
        .arg(stranger_ca.write("s.crt", &cert))
        .arg("--key")
        .arg(stranger_ca.write("s.key", &key))
        .arg(format!("https://{}/api/v1/namespaces", server.addr))
        .output()
        .await
        .unwrap();
    assert!(
        !output.status.success(),
        "a certificate from an unknown CA is refused"
    );
    assert!(output.stdout.is_empty());
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_credentials_is_401_and_http2_is_negotiated() {
    let pki = Pki::new("test-ca");
    let server = tls_server(&pki).await;
    let ca = pki.ca_file();
    let url = format!(
        "https://{}/api/v1/namespaces/default/configmaps",
        server.addr
    );
    let (version, code, body) = curl(&ca, &["--http2"], &url).await;
    assert_eq!((version.as_str(), code), ("2", 401), "{body}");
    let status: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(status["reason"], "Unauthorized");
    let (version, code, _) = curl(
        &ca,
        &["--http2", "-H", "Authorization: Bearer admin-token"],
        &url,
    )
    .await;
    assert_eq!((version.as_str(), code), ("2", 200), "h2 chosen by ALPN");
    let (version, code, _) = curl(
        &ca,
        &["--http1.1", "-H", "Authorization: Bearer admin-token"],
        &url,
    )
    .await;
    assert_eq!((version.as_str(), code), ("1.1", 200), "http/1.1 by ALPN");
    // A wrong token is 401 as well; the health probe stays open.
    let (_, code, _) = curl(&ca, &["-H", "Authorization: Bearer nope"], &url).await;
    assert_eq!(code, 401);
    let (_, code, body) = curl(&ca, &[], &format!("https://{}/healthz", server.addr)).await;
    assert_eq!((code, body.as_str()), (200, "ok"));
    // Plain HTTP to the TLS port does not get an answer in the clear.
    let (status, _) = common::request(server.addr, "GET", "/healthz", "text/plain", "").await;
    assert_ne!(status, 200);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_certificates_alone_require_authentication() {
    let pki = Pki::new("test-ca");
    // No token file: client certificates are the only authentication.
    let server = server_with(pki.server_args()).await;
    let ca = pki.ca_file();
    let url = format!(
        "https://{}/api/v1/namespaces/default/configmaps",
        server.addr
    );
    let (_, code, body) = curl(&ca, &[], &url).await;
    assert_eq!(code, 401, "anonymous is refused: {body}");
    let (cert, key) = pki.leaf(&[], "dave", &[], &[ExtendedKeyUsagePurpose::ClientAuth]);
    let (cert, key) = (pki.write("d.crt", &cert), pki.write("d.key", &key));
    let (_, code, body) = curl(
        &ca,
        &[
            "--cert",
            cert.to_str().unwrap(),
            "--key",
            key.to_str().unwrap(),
        ],
        &url,
    )
    .await;
    assert_eq!(code, 200, "{body}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_http_on_a_non_loopback_address_is_refused() {
    let args = ServeArgs {
        listen: Some("0.0.0.0:0".parse().unwrap()),
        store: Some("memory".to_owned()),
        ..ServeArgs::default()
    };
    let error = watchkeeper::start(ServeConfig::from_args(args.clone()).unwrap())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("refusing to serve plain HTTP")
            && error.contains("--insecure-allow-plain-http-on-non-loopback"),
        "{error}"
    );
    // Explicitly allowed, it starts.
    let server = watchkeeper::start(
        ServeConfig::from_args(ServeArgs {
            insecure_allow_plain_http_on_non_loopback: Some(true),
            ..args
        })
        .unwrap(),
    )
    .await
    .unwrap();
    server.shutdown().await;
    // With TLS a non-loopback address is fine.
    let pki = Pki::new("test-ca");
    let server = watchkeeper::start(
        ServeConfig::from_args(ServeArgs {
            listen: Some("0.0.0.0:0".parse().unwrap()),
            store: Some("memory".to_owned()),
            ..pki.server_args()
        })
        .unwrap(),
    )
    .await
    .unwrap();
    server.shutdown().await;
    // The binary prints the refusal and exits non-zero.
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_watchkeeper"))
        .args(["serve", "--store", "memory", "--listen", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("refusing to serve plain HTTP"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn tls_flags_are_checked() {
    let err = ServeConfig::from_args(ServeArgs {
        tls_cert_file: Some("/x.crt".into()),
        ..ServeArgs::default()
    })
    .unwrap_err()
    .to_string();
    assert!(err.contains("--tls-private-key-file"), "{err}");
    let err = ServeConfig::from_args(ServeArgs {
        client_ca_file: Some("/ca.crt".into()),
        ..ServeArgs::default()
    })
    .unwrap_err()
    .to_string();
    assert!(err.contains("--client-ca-file"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreadable_certificates_are_startup_errors() {
    let pki = Pki::new("test-ca");
    let args = ServeArgs {
        store: Some("memory".to_owned()),
        listen: Some("127.0.0.1:0".parse().unwrap()),
        tls_cert_file: Some(pki.write("bad.crt", "not a certificate")),
        tls_private_key_file: Some(pki.write("bad.key", "not a key")),
        ..ServeArgs::default()
    };
    let error = watchkeeper::start(ServeConfig::from_args(args).unwrap())
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("--tls-cert-file"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_client_does_not_hold_the_accept_loop_and_is_dropped() {
    use tokio::io::AsyncReadExt;
    let pki = Pki::new("test-ca");
    // The timeout bounds every handshake, curl's below too: 3 s, not 1, leaves a busy
    // machine room for it (the silent client's close is waited for, not timed).
    let server = server_with(ServeArgs {
        tls_handshake_timeout_seconds: Some(3),
        ..pki.server_args()
    })
    .await;
    // A client that opens a socket and never starts the handshake.
    let mut silent = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    // Others are served meanwhile: the handshake runs in the connection's own task.
    let ca = pki.ca_file();
    let (cert, key) = pki.leaf(&[], "erin", &[], &[ExtendedKeyUsagePurpose::ClientAuth]);
    let (cert, key) = (pki.write("e.crt", &cert), pki.write("e.key", &key));
    let (_, code, body) = curl(
        &ca,
        &[
            "--cert",
            cert.to_str().unwrap(),
            "--key",
            key.to_str().unwrap(),
        ],
        &format!("https://{}/api/v1/namespaces", server.addr),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    // At the handshake timeout the server closes the silent socket (EOF, no bytes).
    let mut buf = [0u8; 16];
    let n = tokio::time::timeout(common::HANG_GUARD, silent.read(&mut buf))
        .await
        .expect("closed by the server")
        .unwrap_or(0);
    assert_eq!(n, 0);
    server.shutdown().await;
}

/// `kubectl auth can-i ARGS`: its answer (`yes` or `no`; it exits 1 on `no`).
async fn can_i(k: &Kubectl, args: &[&str]) -> String {
    let mut all = vec!["auth", "can-i"];
    all.extend_from_slice(args);
    let out = k.run(&all).await;
    assert!(!out.stderr.contains("error"), "{}", out.stderr);
    out.stdout.trim().to_owned()
}

/// `kubectl auth can-i` and `kubectl auth whoami` (access and identity reviews, sent as
/// protobuf) answer from the server's own authorizer: the same decisions real requests get.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_auth_can_i_and_whoami() {
    let pki = Pki::new("test-ca");
    let server = tls_server(&pki).await;
    let reader =
        Kubectl::with_kubeconfig(&kubeconfig(&server, &pki.ca_pem, "{token: reader-token}"));
    let admin = Kubectl::with_kubeconfig(&kubeconfig(&server, &pki.ca_pem, "{token: admin-token}"));
    assert_eq!(
        can_i(&reader, &["list", "configmaps", "-n", "default"]).await,
        "yes"
    );
    assert_eq!(
        can_i(&reader, &["watch", "pods", "-n", "default"]).await,
        "yes"
    );
    // ABAC's reason, as kube-apiserver's ABAC authorizer gives it.
    assert_eq!(
        can_i(&reader, &["create", "configmaps", "-n", "default"]).await,
        "no - No policy matched."
    );
    assert_eq!(
        can_i(&reader, &["list", "configmaps", "-n", "kube-system"]).await,
        "no - No policy matched."
    );
    assert_eq!(
        can_i(&admin, &["delete", "deployments.apps", "-n", "kube-system"]).await,
        "yes"
    );
    assert_eq!(can_i(&admin, &["get", "/healthz"]).await, "yes");

    let whoami = reader.json(&["auth", "whoami"]).await;
    assert_eq!(whoami["kind"], "SelfSubjectReview");
    assert_eq!(whoami["status"]["userInfo"]["username"], "reader");
    assert!(
        whoami["status"]["userInfo"]["groups"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g == "system:authenticated"),
        "{whoami}"
    );
    let rules = reader
        .ok(&["auth", "can-i", "--list", "-n", "default"])
        .await;
    assert!(
        rules
            .lines()
            .any(|l| l.starts_with("*.*") && l.contains("[get list watch]")),
        "{rules}"
    );
    server.shutdown().await;
}

/// `kubectl create token` issues a service account token, and `kubectl --token` with it is the
/// service account: `auth whoami` names it, it reads what its ABAC line allows and is refused
/// what it does not, and once the account is deleted the token is refused (kubectl's 401).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_create_token_then_use_it() {
    let pki = Pki::new("test-ca");
    let bot_line = json!({"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy",
        "spec": {"user": "system:serviceaccount:default:bot", "namespace": "default", "resource": "configmaps", "apiGroup": "", "readonly": true}});
    let server = server_with(ServeArgs {
        token_auth_file: Some(pki.write("tokens.csv", TOKENS)),
        authorization_policy_file: Some(
            pki.write("policy.jsonl", &format!("{}\n{bot_line}\n", policies())),
        ),
        ..pki.server_args()
    })
    .await;
    let admin = Kubectl::with_kubeconfig(&kubeconfig(&server, &pki.ca_pem, "{token: admin-token}"));
    admin.ok(&["create", "serviceaccount", "bot"]).await;
    admin
        .ok(&["create", "configmap", "seen", "--from-literal=k=v"])
        .await;
    let token = admin
        .ok(&[
            "create",
            "token",
            "bot",
            "--duration",
            "20m",
            "--audience",
            "https://kubernetes.default.svc.cluster.local",
        ])
        .await
        .trim()
        .to_owned();
    assert_eq!(token.split('.').count(), 3, "a JWT: {token}");
    let too_short = admin
        .fails(&["create", "token", "bot", "--duration", "1m"])
        .await;
    assert!(
        too_short
            .stderr
            .contains("may not specify a duration less than 10 minutes"),
        "{}",
        too_short.stderr
    );
    let missing = admin.fails(&["create", "token", "ghost"]).await;
    assert!(
        missing
            .stderr
            .contains("serviceaccounts \"ghost\" not found"),
        "{}",
        missing.stderr
    );

    let as_bot = |args: &[&str]| {
        let mut all: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        all.push(format!("--token={token}"));
        all
    };
    let run = |args: Vec<String>| {
        let admin = &admin;
        async move {
            let refs: Vec<&str> = args.iter().map(String::as_str).collect();
            admin.run(&refs).await
        }
    };
    let whoami = run(as_bot(&["auth", "whoami", "-o", "json"])).await;
    assert!(whoami.success(), "{}", whoami.stderr);
    let whoami: Value = serde_json::from_str(&whoami.stdout).unwrap();
    assert_eq!(
        whoami["status"]["userInfo"]["username"],
        "system:serviceaccount:default:bot"
    );
    assert_eq!(
        whoami["status"]["userInfo"]["groups"],
        json!([
            "system:serviceaccounts",
            "system:serviceaccounts:default",
            "system:authenticated"
        ])
    );
    let listed = run(as_bot(&["get", "configmaps", "-o", "name"])).await;
    assert!(listed.success(), "{}", listed.stderr);
    assert!(
        listed.stdout.contains("configmap/seen"),
        "{}",
        listed.stdout
    );
    let refused = run(as_bot(&["create", "configmap", "nope"])).await;
    assert!(!refused.success());
    assert!(
        refused.stderr.contains("configmaps is forbidden")
            && refused.stderr.contains(
                "User \"system:serviceaccount:default:bot\" cannot create resource \"configmaps\""
            ),
        "{}",
        refused.stderr
    );
    let refused = run(as_bot(&["get", "pods"])).await;
    assert!(
        refused.stderr.contains("pods is forbidden"),
        "{}",
        refused.stderr
    );

    admin.ok(&["delete", "serviceaccount", "bot"]).await;
    // A consistent read proves the cache has seen the deletion.
    admin.fails(&["get", "serviceaccount", "bot"]).await;
    let gone = run(as_bot(&["get", "configmaps"])).await;
    assert!(!gone.success());
    assert!(
        gone.stderr.contains("You must be logged in to the server")
            || gone.stderr.contains("Unauthorized"),
        "{}",
        gone.stderr
    );
    server.shutdown().await;
}

/// A TLS client trusting `pki`'s CA, offering `alpn`.
fn tls_connector(pki: &Pki, alpn: &[&[u8]]) -> tokio_rustls::TlsConnector {
    use rustls_pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pki_types::CertificateDer::pem_slice_iter(pki.ca_pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let mut config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_completes_the_handshake_and_sends_nothing_is_closed() {
    use tokio::io::AsyncReadExt;
    let pki = Pki::new("test-ca");
    let server = server_with(ServeArgs {
        request_header_timeout_ms: Some(300),
        ..pki.server_args()
    })
    .await;
    for alpn in [&[b"http/1.1" as &[u8]][..], &[b"h2"]] {
        let tcp = tokio::net::TcpStream::connect(server.addr).await.unwrap();
        let name = rustls_pki_types::ServerName::try_from("localhost").unwrap();
        let mut tls = tls_connector(&pki, alpn).connect(name, tcp).await.unwrap();
        // The handshake is done; the client says nothing more. The server closes (EOF, or a
        // close without close_notify: an error). Over HTTP/1.1 without a byte of HTTP; over
        // HTTP/2 the server speaks first, as Go's does: its connection preface (a SETTINGS
        // frame, then possibly a GOAWAY) and nothing that answers a request.
        let mut received = Vec::new();
        loop {
            let mut buf = [0u8; 256];
            let read = tokio::time::timeout(common::HANG_GUARD, tls.read(&mut buf))
                .await
                .expect("closed by the server");
            match read {
                Ok(0) | Err(_) => break,
                Ok(n) => received.extend_from_slice(&buf[..n]),
            }
        }
        if alpn == [b"h2" as &[u8]] {
            // Frame header: 3 bytes length, 1 byte type (0x4 SETTINGS), 1 flags, 4 stream id.
            assert!(received.len() >= 9 && received[3] == 0x4, "{received:?}");
            let mut at = 0;
            while at + 9 <= received.len() {
                let length = usize::from(received[at]) << 16
                    | usize::from(received[at + 1]) << 8
                    | usize::from(received[at + 2]);
                let kind = received[at + 3];
                assert!(
                    matches!(kind, 0x4 | 0x6 | 0x7 | 0x8),
                    "only connection-level frames (SETTINGS, PING, GOAWAY, WINDOW_UPDATE), got type {kind}: {received:?}"
                );
                at += 9 + length;
            }
        } else {
            assert!(received.is_empty(), "{received:?}");
        }
    }
    server.shutdown().await;
    // The Host of a TLS request is not restricted (the DNS-rebinding guard is for plain
    // HTTP on loopback). On a server with the default header timeout: the 300 ms above count
    // from the accept, and on a busy machine curl's handshake and request can take longer.
    let server = server_with(pki.server_args()).await;
    let (_, code, body) = curl(
        &pki.ca_file(),
        &["-H", "Host: anything.example"],
        &format!("https://{}/healthz", server.addr),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    server.shutdown().await;
}

/// `kube-system/extension-apiserver-authentication` publishes `--client-ca-file`'s
/// certificates as kube-apiserver's cluster authentication trust controller does (aggregated
/// API servers, metrics-server and webhooks read it): created at start; a client's edit that
/// replaces the CA with another and adds keys gets the server's CA added back after the
/// other, its `requestheader-*` key kept and any other key dropped; deleted, it is written
/// again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_ca_is_published_for_extension_api_servers() {
    let pki = Pki::new("test-ca");
    let server = tls_server(&pki).await;
    let admin = Kubectl::with_kubeconfig(&kubeconfig(&server, &pki.ca_pem, "{token: admin-token}"));
    let name = "configmap/extension-apiserver-authentication";
    let ours = pki.ca_pem.replace("\r\n", "\n");
    let read = || async { admin.json(&["get", "-n", "kube-system", name]).await };
    // Until the controller's write is there (a loop of reads, bounded by the hang guard).
    let until_data = |wanted: Value| {
        let read = &read;
        async move {
            tokio::time::timeout(common::HANG_GUARD, async {
                loop {
                    let got = read().await;
                    if got["data"] == wanted {
                        return got;
                    }
                    tokio::task::yield_now().await;
                }
            })
            .await
            .expect("the ConfigMap written")
        }
    };
    admin
        .ok(&[
            "wait",
            "-n",
            "kube-system",
            "--for=create",
            name,
            "--timeout=60s",
        ])
        .await;
    until_data(json!({"client-ca-file": ours})).await;

    let other = Pki::new("other-ca").ca_pem.replace("\r\n", "\n");
    let headers = r#"["X-Remote-Group"]"#;
    let patch = json!({"data": {"client-ca-file": other, "junk": "x",
        "requestheader-group-headers": headers}});
    admin
        .ok(&[
            "patch",
            "-n",
            "kube-system",
            name,
            "--type=merge",
            "-p",
            &patch.to_string(),
        ])
        .await;
    until_data(json!({"client-ca-file": format!("{other}{ours}"),
        "requestheader-group-headers": headers}))
    .await;

    admin.ok(&["delete", "-n", "kube-system", name]).await;
    admin
        .ok(&[
            "wait",
            "-n",
            "kube-system",
            "--for=create",
            name,
            "--timeout=60s",
        ])
        .await;
    until_data(json!({"client-ca-file": ours})).await;
    server.shutdown().await;
}

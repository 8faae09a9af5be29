//! Request-header authentication as kube-apiserver's (`--requestheader-*`): an authenticating
//! front proxy presents a client certificate of its own CA, and its `X-Remote-*` headers name
//! the caller; over real TLS with curl, the front proxy's CA and the client CA made here.

use crate::common;

use std::path::Path;

use rcgen::ExtendedKeyUsagePurpose;
use serde_json::{Value, json};
use watchkeeper::config::{ServeArgs, ServeConfig};

use common::pki::Pki;

const REVIEWS: &str = "/apis/authentication.k8s.io/v1/selfsubjectreviews";

/// One request over TLS with curl: `method` `path` with `extra` arguments (certificates,
/// headers) and a JSON body when `body` is not empty; status and body text. Over HTTP/1.1: a
/// refusal answered before its body is read ends an HTTP/2 stream with
/// `RST_STREAM(NO_ERROR)` (as Go's server does), which this machine's curl reports as a
/// framing error while it is still uploading.
async fn curl(
    addr: std::net::SocketAddr,
    ca: &Path,
    extra: &[&str],
    method: &str,
    path: &str,
    body: &str,
) -> (u16, String) {
    let mut command = tokio::process::Command::new("curl");
    command
        .args(["-sS", "--http1.1", "--cacert"])
        .arg(ca)
        .args(extra)
        .args(["-X", method, "-w", "\n%{http_code}"]);
    if !body.is_empty() {
        let kind = if method == "PATCH" {
            "Content-Type: application/merge-patch+json"
        } else {
            "Content-Type: application/json"
        };
        command.args(["-H", kind, "-d", body]);
    }
    let output = tokio::time::timeout(
        common::HANG_GUARD,
        command
            .arg(format!("https://{addr}{path}"))
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("curl hung")
    .expect("curl runs");
    let text = String::from_utf8_lossy(&output.stdout).to_string();
    assert!(
        output.status.success(),
        "curl: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    (code.trim().parse().unwrap_or(0), body.to_owned())
}

/// `POST selfsubjectreviews` over TLS with curl's `extra` arguments: status and body.
async fn whoami(addr: std::net::SocketAddr, ca: &Path, extra: &[&str]) -> (u16, Value) {
    let (code, body) = curl(
        addr,
        ca,
        extra,
        "POST",
        REVIEWS,
        r#"{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}"#,
    )
    .await;
    (code, serde_json::from_str(&body).unwrap_or(Value::Null))
}

/// A client certificate of `pki` for `cn`: the `--cert` and `--key` arguments.
fn certificate(pki: &Pki, cn: &str, orgs: &[&str]) -> Vec<String> {
    let (cert, key) = pki.leaf(&[], cn, orgs, &[ExtendedKeyUsagePurpose::ClientAuth]);
    vec![
        "--cert".to_owned(),
        pki.write(&format!("{cn}.crt"), &cert).display().to_string(),
        "--key".to_owned(),
        pki.write(&format!("{cn}.key"), &key).display().to_string(),
    ]
}

fn headers(list: &[&str]) -> Vec<String> {
    list.iter()
        .flat_map(|h| ["-H".to_owned(), (*h).to_owned()])
        .collect()
}

fn args_of(list: &[String]) -> Vec<&str> {
    list.iter().map(String::as_str).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_front_proxy_s_headers_name_the_caller_and_no_one_else_s_do() {
    let FrontProxied {
        clients,
        front,
        server,
        ca,
        proxy,
    } = front_proxied().await;
    let said = headers(&[
        "X-Remote-User: alice",
        "X-Remote-Uid: u-9",
        "X-Remote-Group: g1",
        "X-Remote-Group: g2",
        "X-Remote-Extra-Scopes: s1",
        "X-Remote-Extra-Acme.com%2fproject: p",
    ]);

    // The front proxy's headers: the user, uid, groups (in system:authenticated) and extra.
    let (status, review) = whoami(
        server.addr,
        &ca,
        &args_of(&[proxy.clone(), said.clone()].concat()),
    )
    .await;
    assert_eq!(status, 201, "{review}");
    let info = &review["status"]["userInfo"];
    assert_eq!(info["username"], "alice");
    assert_eq!(info["uid"], "u-9");
    assert_eq!(info["groups"], json!(["g1", "g2", "system:authenticated"]));
    assert_eq!(info["extra"]["scopes"], json!(["s1"]));
    assert_eq!(info["extra"]["acme.com/project"], json!(["p"]));

    // The front proxy without a user header is nobody (its certificate is not a client
    // CA's): 401.
    let (status, body) = whoami(server.addr, &ca, &args_of(&proxy)).await;
    assert_eq!(status, 401, "{body}");
    // A certificate of the front proxy's CA with a name not allowed: its headers count for
    // nothing.
    let stranger = certificate(&front, "other-proxy", &[]);
    let (status, body) = whoami(
        server.addr,
        &ca,
        &args_of(&[stranger, said.clone()].concat()),
    )
    .await;
    assert_eq!(status, 401, "{body}");

    // A client CA's certificate is its own CN, whatever headers it sends.
    let dave = certificate(&clients, "dave", &["devs"]);
    let (status, review) = whoami(server.addr, &ca, &args_of(&[dave, said.clone()].concat())).await;
    assert_eq!(status, 201, "{review}");
    assert_eq!(review["status"]["userInfo"]["username"], "dave");
    assert_eq!(
        review["status"]["userInfo"]["groups"],
        json!(["devs", "system:authenticated"])
    );

    // No certificate: the headers are anyone's words, 401.
    let (status, body) = whoami(server.addr, &ca, &args_of(&said)).await;
    assert_eq!(status, 401, "{body}");

    // Published for aggregated API servers as kube-apiserver does.
    let dave = certificate(&clients, "dave", &["devs"]);
    let published = tokio::time::timeout(common::HANG_GUARD, async {
        loop {
            let output = tokio::process::Command::new("curl")
                .args(["-sS", "--http1.1", "--cacert"])
                .arg(&ca)
                .args(&dave)
                .arg(format!(
                    "https://{}/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication",
                    server.addr
                ))
                .output()
                .await
                .expect("curl runs");
            let body: Value = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
            if body["data"].get("requestheader-username-headers").is_some() {
                return body;
            }
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the ConfigMap published");
    let data = &published["data"];
    assert_eq!(
        data["requestheader-username-headers"],
        "[\"X-Remote-User\"]"
    );
    assert_eq!(data["requestheader-group-headers"], "[\"X-Remote-Group\"]");
    assert_eq!(data["requestheader-uid-headers"], "[\"X-Remote-Uid\"]");
    assert_eq!(
        data["requestheader-extra-headers-prefix"],
        "[\"X-Remote-Extra-\"]"
    );
    assert_eq!(
        data["requestheader-allowed-names"],
        "[\"front-proxy-client\"]"
    );
    assert_eq!(
        data["requestheader-client-ca-file"]
            .as_str()
            .unwrap()
            .trim(),
        front.ca_pem.replace("\r\n", "\n").trim()
    );
    assert_eq!(
        data["client-ca-file"].as_str().unwrap().trim(),
        clients.ca_pem.replace("\r\n", "\n").trim()
    );
    server.shutdown().await;
}

/// A server of a client CA taking a front proxy CA's certificate named `front-proxy-client`
/// as a front proxy whose `X-Remote-*` headers name the caller, with what a test needs of it.
struct FrontProxied {
    clients: Pki,
    front: Pki,
    server: watchkeeper::Server,
    /// The client CA's file (`--cacert`: it signed the server's certificate too).
    ca: std::path::PathBuf,
    /// The front proxy's `--cert` and `--key` arguments.
    proxy: Vec<String>,
}

async fn front_proxied() -> FrontProxied {
    let clients = Pki::new("client-ca");
    let front = Pki::new("front-proxy-ca");
    let list = |names: &[&str]| Some(names.iter().map(|n| (*n).to_owned()).collect());
    let server = common::server_with(ServeArgs {
        requestheader_client_ca_file: Some(front.ca_file()),
        requestheader_allowed_names: list(&["front-proxy-client"]),
        requestheader_username_headers: list(&["X-Remote-User"]),
        requestheader_uid_headers: list(&["X-Remote-Uid"]),
        requestheader_group_headers: list(&["X-Remote-Group"]),
        requestheader_extra_headers_prefix: list(&["X-Remote-Extra-"]),
        ..clients.server_args()
    })
    .await;
    let ca = clients.ca_file();
    let proxy = certificate(&front, "front-proxy-client", &[]);
    FrontProxied {
        clients,
        front,
        server,
        ca,
        proxy,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_front_proxy_s_identity_headers_are_not_sent_on_by_a_proxy_subresource() {
    let ip = crate::proxy_subresources::machine_address();
    let backend = crate::proxy_subresources::Backend::start(ip).await;
    // `_front` keeps the front proxy's certificate files until the end.
    let FrontProxied {
        clients,
        front: _front,
        server,
        ca,
        proxy,
    } = front_proxied().await;
    let said = headers(&[
        "X-Remote-User: alice",
        "X-Remote-Uid: u-9",
        "X-Remote-Group: g1",
        "X-Remote-Extra-Scopes: s1",
        "x-remote-extra-Acme.com%2fproject: p",
        "X-Custom: kept",
    ]);
    let alice = [proxy, said.clone()].concat();
    let as_alice = args_of(&alice);
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-0"},
        "spec": {"containers": [{"name": "c", "image": "nginx",
            "ports": [{"containerPort": backend.addr.port()}]}]}});
    let pods = "/api/v1/namespaces/default/pods";
    let (status, body) = curl(server.addr, &ca, &as_alice, "POST", pods, &pod.to_string()).await;
    assert_eq!(status, 201, "{body}");
    let address = json!({"status": {"podIP": ip.to_string(), "podIPs": [{"ip": ip.to_string()}]}});
    let (status, body) = curl(
        server.addr,
        &ca,
        &as_alice,
        "PATCH",
        &format!("{pods}/web-0/status"),
        &address.to_string(),
    )
    .await;
    assert_eq!(status, 200, "{body}");

    // Authenticated by them, the front proxy's identity headers stop here (kube's
    // `ClearAuthenticationHeaders`); the others go on.
    let (status, body) = curl(
        server.addr,
        &ca,
        &as_alice,
        "GET",
        &format!("{pods}/web-0/proxy/x"),
        "",
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let seen = backend.last();
    for name in [
        "x-remote-user",
        "x-remote-uid",
        "x-remote-group",
        "x-remote-extra-scopes",
        "x-remote-extra-acme.com%2fproject",
    ] {
        assert_eq!(seen.header(name), None, "{name} sent on: {seen:?}");
    }
    assert_eq!(seen.header("x-custom"), Some("kept"), "{seen:?}");

    // A client certificate's request: the headers named nobody, and go on as any other (as in
    // kube, where only the authenticator that read them clears them).
    let dave = certificate(&clients, "dave", &["devs"]);
    let (status, body) = curl(
        server.addr,
        &ca,
        &args_of(&[dave, said].concat()),
        "GET",
        &format!("{pods}/web-0/proxy/y"),
        "",
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let seen = backend.last();
    assert_eq!(seen.target, "/y", "{seen:?}");
    assert_eq!(seen.header("x-remote-user"), Some("alice"), "{seen:?}");
    assert_eq!(seen.header("x-remote-group"), Some("g1"), "{seen:?}");
    server.shutdown().await;
}

#[test]
fn request_header_flags_are_checked_at_start() {
    let front = Pki::new("front-proxy-ca");
    let refused = |args: ServeArgs| ServeConfig::from_args(args).unwrap_err().to_string();
    let without_tls = refused(ServeArgs {
        requestheader_client_ca_file: Some(front.ca_file()),
        ..ServeArgs::default()
    });
    assert!(
        without_tls.contains("--requestheader-client-ca-file needs TLS"),
        "{without_tls}"
    );
    let blank = refused(ServeArgs {
        requestheader_username_headers: Some(vec!["X-Remote-User".to_owned(), "  ".to_owned()]),
        ..front.server_args()
    });
    assert!(
        blank.contains("empty value in requestheader-username-headers"),
        "{blank}"
    );
    // Headers without the CA: no request-header authentication (kube builds none).
    let config = ServeConfig::from_args(ServeArgs {
        requestheader_username_headers: Some(vec!["X-Remote-User".to_owned()]),
        ..front.server_args()
    })
    .unwrap();
    assert!(config.tls.requestheader.is_none());
}

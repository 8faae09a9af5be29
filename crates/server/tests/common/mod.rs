//! Test helpers over the shared test kit (`watchkeeper-testkit`): an in-process server,
//! requests that return `(status, body)` and fail the test on a hang, and a watch read from a
//! raw socket (so a test can stop reading it, which no client library lets you do).
#![allow(dead_code, unreachable_pub)]

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;
use watchkeeper::Server;
use watchkeeper::config::ServeArgs;
use watchkeeper_testkit::RawWatch;

pub mod etcd;
pub mod hooks;
pub mod pki;

/// A hang guard for awaits that wait on events: a test that exceeds it is broken, not slow.
pub const HANG_GUARD: Duration = Duration::from_secs(60);

/// Runs `test` as a task of the runtime the server binary runs on
/// (`watchkeeper::runtime_builder`: two workers whose threads have the stack an object nested
/// 10,000 levels needs), for tests that send such objects: `#[tokio::test]`'s threads have
/// 2 MiB, which serde_json's own walks over such an object overflow in a debug build.
pub fn on_server_runtime<F>(test: impl FnOnce() -> F)
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    let runtime = watchkeeper::runtime_builder(2).build().unwrap();
    let task = runtime.spawn(test());
    runtime.block_on(task).unwrap();
}

pub async fn server_with(args: ServeArgs) -> Server {
    watchkeeper_testkit::start_server(watchkeeper_testkit::loopback(args))
        .await
        .unwrap()
}

/// A ConfigMap labelled `app=test` with `payload` bytes of data (the kit's).
pub fn configmap(name: &str, payload: usize) -> Value {
    watchkeeper_testkit::configmap(name, payload)
}

/// The CRD `widgets.example.com`: namespaced `Widget`, served and stored at `v1`, any fields.
pub fn widgets_crd() -> Value {
    serde_json::json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}}]}})
}

pub async fn server() -> Server {
    server_with(ServeArgs::default()).await
}

/// One request with `Connection: close`; returns the status and the body.
pub async fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    content_type: &str,
    body: &str,
) -> (u16, String) {
    request_with_headers(addr, method, path, &[("Content-Type", content_type)], body).await
}

pub async fn get_json(addr: SocketAddr, path: &str) -> (u16, Value) {
    let (status, body) = request(addr, "GET", path, "application/json", "").await;
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

pub async fn send_json(addr: SocketAddr, method: &str, path: &str, body: &Value) -> (u16, Value) {
    let (status, body) = request(addr, method, path, "application/json", &body.to_string()).await;
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

/// A JSON merge patch of `path`; the answer must be 200.
pub async fn merge_patch(addr: SocketAddr, path: &str, patch: &str) -> Value {
    let (status, body) = request(addr, "PATCH", path, "application/merge-patch+json", patch).await;
    assert_eq!(status, 200, "PATCH {path}: {body}");
    serde_json::from_str(&body).unwrap_or(Value::Null)
}

/// [`request`] with extra headers (e.g. `("Authorization", "Bearer t")`) and
/// `Content-Type: application/json` unless they name one; `Connection: close`, returns the
/// status and the (de-chunked) body; status 0 when the answer is not HTTP.
pub async fn request_with_headers(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String) {
    let mut all = headers.to_vec();
    if !watchkeeper_testkit::http::has_header(headers, "content-type") {
        all.push(("Content-Type", "application/json"));
    }
    let response = tokio::time::timeout(
        HANG_GUARD,
        watchkeeper_testkit::request(addr, method, path, &all, body.as_bytes()),
    )
    .await
    .expect("request hang");
    match response {
        Ok(response) => (response.status, response.text()),
        // An answer that is not HTTP (e.g. TLS bytes to a plain-text request) has no status.
        Err(e) if e.kind() == std::io::ErrorKind::InvalidData => (0, String::new()),
        Err(e) => panic!("{method} {path}: {e}"),
    }
}

/// `method` of `object` to `path`: answered 422 Invalid; its message.
pub async fn invalid_message(addr: SocketAddr, method: &str, path: &str, object: &Value) -> String {
    let (status, body) = send_json(addr, method, path, object).await;
    assert_eq!(status, 422, "{method} {path}: {body}");
    assert_eq!(body["reason"], "Invalid", "{body}");
    body["message"].as_str().unwrap_or_default().to_owned()
}

/// Posts `object` to `path`: 422 Invalid with `message`.
pub async fn refused(addr: SocketAddr, path: &str, object: &Value, message: &str) {
    assert_eq!(
        invalid_message(addr, "POST", path, object).await,
        message,
        "{path}"
    );
}

/// Posts `object` to `path`: created (201).
pub async fn created(addr: SocketAddr, path: &str, object: &Value) {
    let (status, body) = send_json(addr, "POST", path, object).await;
    assert_eq!(status, 201, "{path}: {body}");
}

/// `method` of `object` to `path`: written (200 or 201); the stored object.
pub async fn written(addr: SocketAddr, method: &str, path: &str, object: &Value) -> Value {
    let (status, body) = send_json(addr, method, path, object).await;
    assert!(
        status == 200 || status == 201,
        "{method} {path}: {status} {body}"
    );
    body
}

/// A patch of `path` with `content_type` (`Connection: close`): its status and body (JSON,
/// `Null` when not); fails the test on a hang.
pub async fn patch(addr: SocketAddr, path: &str, content_type: &str, body: &str) -> (u16, Value) {
    let (status, text) = request(addr, "PATCH", path, content_type, body).await;
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// A Kubernetes protobuf body as client-go writes it: the magic `k8s\0`, then a
/// `runtime.Unknown` (encoded by k8s-pb's generated types, not the server's) whose `typeMeta`
/// is `api_version` and `kind` and whose `raw` is the object's own message.
pub fn protobuf_envelope(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
    use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
    use prost::Message;
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some(api_version.to_owned()),
            kind: Some(kind.to_owned()),
        }),
        raw: Some(raw),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    [b"k8s\0".as_slice(), &unknown.encode_to_vec()].concat()
}

/// One write (`Connection: close`); its status, body (JSON, `Null` when not) and `Warning`
/// header values; fails the test on a hang.
pub async fn write_warned(
    addr: SocketAddr,
    method: &str,
    path: &str,
    content_type: &str,
    body: &str,
) -> (u16, Value, Vec<String>) {
    let response = tokio::time::timeout(
        HANG_GUARD,
        watchkeeper_testkit::request(
            addr,
            method,
            path,
            &[("Content-Type", content_type)],
            body.as_bytes(),
        ),
    )
    .await
    .expect("request hang")
    .unwrap();
    let warnings = response
        .headers
        .get_all("warning")
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .collect();
    let value = serde_json::from_slice(&response.body).unwrap_or(Value::Null);
    (response.status, value, warnings)
}

/// A server started again on the embedded store another one just shut down: the store's last
/// committer (a detached blocking task) lets go of the database file just after its last
/// answer, and redb refuses a second open until it has, so the start is tried again while it
/// says so (bounded; a process that exits has no such window).
pub async fn restarted(args: ServeArgs) -> Server {
    let give_up = std::time::Instant::now() + HANG_GUARD;
    loop {
        match watchkeeper_testkit::start_server(watchkeeper_testkit::loopback(args.clone())).await {
            Ok(server) => return server,
            Err(error) if error.contains("already open") => {
                assert!(std::time::Instant::now() < give_up, "{error}");
                tokio::task::yield_now().await;
            }
            Err(error) => panic!("{error}"),
        }
    }
}

/// A watch stream read event by event from a raw socket; fails the test on a hang.
pub struct WatchReader {
    raw: RawWatch,
    pub ended: bool,
    /// The client's end of the connection (what the server sees as the peer).
    pub local_addr: SocketAddr,
}

impl WatchReader {
    /// Opens a watch (it must answer 200); `recv_buffer` shrinks the socket's receive buffer
    /// so back-pressure reaches the server quickly.
    pub async fn open(addr: SocketAddr, path: &str, recv_buffer: Option<u32>) -> WatchReader {
        Self::open_with_headers(addr, path, recv_buffer, &[]).await
    }

    /// [`WatchReader::open`] with extra request headers (e.g. `("User-Agent", "x")`).
    pub async fn open_with_headers(
        addr: SocketAddr,
        path: &str,
        recv_buffer: Option<u32>,
        headers: &[(&str, &str)],
    ) -> WatchReader {
        let raw =
            tokio::time::timeout(HANG_GUARD, RawWatch::open(addr, path, recv_buffer, headers))
                .await
                .expect("watch head hang")
                .unwrap();
        let local_addr = raw.local_addr;
        WatchReader {
            raw,
            ended: false,
            local_addr,
        }
    }

    /// The next watch event's line as sent (for events nested past what serde_json reads),
    /// or `None` when the stream ended.
    pub async fn next_text(&mut self) -> Option<String> {
        let next = tokio::time::timeout(HANG_GUARD, self.raw.next_line())
            .await
            .expect("watch hang");
        match next {
            Ok(Some(line)) => Some(String::from_utf8_lossy(&line).into_owned()),
            _ => {
                self.ended = true;
                None
            }
        }
    }

    /// The next watch event, or `None` when the stream ended.
    pub async fn next(&mut self) -> Option<Value> {
        let next = tokio::time::timeout(HANG_GUARD, self.raw.next_line())
            .await
            .expect("watch hang");
        match next {
            Ok(Some(line)) => Some(serde_json::from_slice(&line).expect("a JSON watch event")),
            Ok(None) => {
                self.ended = true;
                None
            }
            Err(error) => {
                // Said, so that a test failing on the missing event shows why it is missing.
                eprintln!("the watch stream failed: {error}");
                self.ended = true;
                None
            }
        }
    }
}

/// Waits (by yielding) until `condition` holds; fails the test on a hang.
pub async fn until(mut condition: impl FnMut() -> bool) {
    tokio::time::timeout(HANG_GUARD, async {
        while !condition() {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("condition reached");
}

/// `answer` is a Failure `Status` with `code` and `reason`.
pub fn assert_status(answer: &watchkeeper_testkit::raw::Answer, code: u16, reason: &str) {
    assert_eq!(answer.status, code, "{}\n{}", answer.head, answer.body);
    let status = answer.json();
    assert_eq!(status["kind"], "Status", "{}", answer.body);
    assert_eq!(status["status"], "Failure", "{}", answer.body);
    assert_eq!(status["code"], code, "{}", answer.body);
    assert_eq!(status["reason"], reason, "{}", answer.body);
}

/// Reads until the server closes the connection (EOF or reset); returns the bytes read.
pub async fn until_closed(stream: &mut tokio::net::TcpStream) -> usize {
    use tokio::io::AsyncReadExt;
    tokio::time::timeout(HANG_GUARD, async {
        let mut total = 0;
        let mut buf = [0u8; 8192];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return total,
                Ok(n) => total += n,
            }
        }
    })
    .await
    .expect("the server closes the connection")
}

/// How many keys the server's store holds under `prefix`.
pub async fn stored_keys(server: &Server, prefix: &'static str) -> usize {
    watchkeeper_store::Store::range(
        server.store().unwrap(),
        watchkeeper_store::RangeRequest::prefix(bytes::Bytes::from_static(prefix.as_bytes())),
    )
    .await
    .unwrap()
    .kvs
    .len()
}

/// The `/metrics` text of the server at `addr`.
pub async fn metrics_text(addr: SocketAddr) -> String {
    let (status, text) = request(addr, "GET", "/metrics", "text/plain", "").await;
    assert_eq!(status, 200, "{text}");
    text
}

/// The value of the sample `name` (with its labels, e.g. `x_total{limit="body"}`) in a
/// `/metrics` text; the test fails when there is none.
pub fn sample(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in /metrics:\n{text}"))
}

/// The sample `name` of the server at `addr` now.
pub async fn metric(addr: SocketAddr, name: &str) -> u64 {
    sample(&metrics_text(addr).await, name)
}

/// Refusals counted for `limit` (`watchkeeper_limit_rejections_total`) in a `/metrics` text.
pub fn rejections(text: &str, limit: &str) -> u64 {
    sample(
        text,
        &format!("watchkeeper_limit_rejections_total{{limit=\"{limit}\"}}"),
    )
}

/// The sample `name` once it is at least `least`: a counter may move after the answer (or the
/// watch event) of what it counts.
pub async fn metric_at_least(addr: SocketAddr, name: &str, least: u64) -> u64 {
    let read = async {
        loop {
            let value = metric(addr, name).await;
            if value >= least {
                return value;
            }
        }
    };
    tokio::time::timeout(HANG_GUARD, read)
        .await
        .expect("the counter reached its value")
}

/// The events of an audit log's complete lines (the writer may be in the middle of the next).
pub fn events_in(path: &std::path::Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let complete = text.rfind('\n').map_or("", |end| &text[..end]);
    complete
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect()
}

/// A test HTTPS server on 127.0.0.1 (hyper + rustls, HTTP/1.1): its certificate names
/// `names` (and `127.0.0.1`), signed by a CA made here; each request goes to `handle`.
/// Returns the port and the CA's PEM.
pub async fn https_server<F, Fut>(names: &[&str], handle: F) -> (u16, String)
where
    F: Fn(hyper::Request<hyper::body::Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = hyper::Response<http_body_util::Full<bytes::Bytes>>>
        + Send
        + 'static,
{
    https_server_on(std::net::Ipv4Addr::LOCALHOST.into(), names, handle).await
}

/// [`https_server`] listening on `ip`.
pub async fn https_server_on<F, Fut>(
    ip: std::net::IpAddr,
    names: &[&str],
    handle: F,
) -> (u16, String)
where
    F: Fn(hyper::Request<hyper::body::Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = hyper::Response<http_body_util::Full<bytes::Bytes>>>
        + Send
        + 'static,
{
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, "test-ca");
    let issuer = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
    let mut sans: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
    sans.push("127.0.0.1".to_owned());
    let leaf = CertificateParams::new(sans).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = leaf.signed_by(&key, &issuer).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(
        vec![CertificateDer::from_pem_slice(cert.pem().as_bytes()).unwrap()],
        PrivateKeyDer::from_pem_slice(key.serialize_pem().as_bytes()).unwrap(),
    )
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config));
    let listener = tokio::net::TcpListener::bind((ip, 0)).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let (acceptor, handle) = (acceptor.clone(), handle.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = hyper::service::service_fn(move |request| {
                    let answer = handle(request);
                    async move { Ok::<_, std::convert::Infallible>(answer.await) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    (port, issuer.pem())
}

/// `kubectl auth whoami -o json` against `addr` over TLS (verified with `ca_file`) as the
/// kubeconfig user `user` (YAML flow, e.g. `{token: T}`), its kubeconfig and `HOME` in
/// `dir`: the review it printed.
pub async fn kubectl_whoami(
    dir: &std::path::Path,
    addr: SocketAddr,
    ca_file: &std::path::Path,
    user: &str,
) -> Value {
    let kubeconfig = dir.join("kubeconfig.yaml");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters: [{{name: local, cluster: {{server: \"https://{addr}\", certificate-authority: \"{}\"}}}}]\nusers: [{{name: u, user: {user}}}]\ncontexts: [{{name: local, context: {{cluster: local, user: u}}}}]\ncurrent-context: local\n",
            ca_file.display()
        ),
    )
    .unwrap();
    let binary = std::env::var_os("KUBECTL").unwrap_or_else(|| "kubectl".into());
    let output = tokio::time::timeout(
        HANG_GUARD,
        tokio::process::Command::new(binary)
            .args(["auth", "whoami", "-o", "json", "--kubeconfig"])
            .arg(&kubeconfig)
            .env("HOME", dir)
            .env_remove("KUBECONFIG")
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("kubectl hung")
    .expect("kubectl runs (install it, or set KUBECTL)");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(&stdout).unwrap()
}

/// `POST selfsubjectreviews` as the bearer of `token`: the status and the review (or Status).
pub async fn whoami(addr: SocketAddr, token: &str) -> (u16, Value) {
    let auth = format!("Bearer {token}");
    let (status, body) = request_with_headers(
        addr,
        "POST",
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        &[("Authorization", &auth)],
        r#"{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}"#,
    )
    .await;
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

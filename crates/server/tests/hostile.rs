//! Hostile and careless clients, over raw sockets (the bytes no client library sends): every
//! path form other than the canonical one is refused with a 400 Status before routing; the
//! refusals hyper makes by itself are Status answers; a plain loopback listener answers
//! loopback Host names only; forbidden requests are refused before their body and take no
//! slot, and a slot is held until the response is taken; connections doing nothing, and
//! clients that stop reading, are closed at the server's own (small, configured) timeouts;
//! large responses are gzipped when the client asks (kube-apiserver's 128 KiB rule), watches never;
//! at the connection bound an idle connection gives way to a new one and busy ones never do;
//! a YAML body's aliases cannot build more than its own text could hold, and a JSON patch
//! cannot nest an object deeper than a body may; a body of many unknown fields answers
//! kube's bounded warnings; an HTTP/2 client that opens and cancels streams without end
//! (CVE-2023-44487, "rapid reset") is sent GOAWAY and leaves nothing in flight.

use crate::common;

use std::net::SocketAddr;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use watchkeeper::config::ServeArgs;
use watchkeeper_testkit::raw::{self, Answer};

use common::{
    HANG_GUARD, configmap, metrics_text, rejections, request, server_with, until, until_closed,
};

const CM: &str = "/api/v1/namespaces/default/configmaps";

/// Sends `head` (and `body`) on a new connection and returns the open stream.
async fn send(addr: SocketAddr, head: &str, body: &[u8]) -> TcpStream {
    raw::send(addr, head, body).await.unwrap()
}

/// Reads one whole response (the server closes or sends Content-Length).
async fn answer(stream: &mut TcpStream) -> Answer {
    tokio::time::timeout(HANG_GUARD, raw::read_answer(stream))
        .await
        .expect("an answer")
}

/// One raw request with `Connection: close`; the answer.
async fn exchange(addr: SocketAddr, method: &str, target: &str, body: &str) -> Answer {
    let head = format!(
        "{method} {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let mut stream = send(addr, &head, body.as_bytes()).await;
    answer(&mut stream).await
}

fn assert_status(answer: &Answer, code: u16, reason: &str) {
    common::assert_status(answer, code, reason);
    assert_eq!(answer.json()["apiVersion"], "v1", "{}", answer.body);
    assert!(
        answer.head.contains("content-type: application/json"),
        "{}",
        answer.head
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_other_path_form_is_refused_before_routing() {
    let server = server_with(ServeArgs::default()).await;
    let addr = server.addr;
    let body = configmap("x", 1).to_string();
    let created = exchange(addr, "POST", CM, &body).await;
    assert_eq!(created.status, 201, "{}", created.body);
    for target in [
        "//api/v1/namespaces/bad//configmaps",
        "//api/v1/namespaces/default/configmaps",
        "//api",
        "//",
        "/api//v1/namespaces/default/configmaps",
        "/api/v1//namespaces/default/configmaps/x",
        "/./api/v1/namespaces/default/configmaps",
        "/api/./v1/namespaces/default/configmaps",
        "/../api/v1/namespaces/default/configmaps",
        "/api/v1/namespaces/default/configmaps/x/..",
        "/api/v1/namespaces/default/configmaps/%2E%2E",
        "/api/v1/namespaces/default/configmaps/%2e",
        "/api%2Fv1/namespaces/default/configmaps",
        "/api/v1/namespaces/default%2fconfigmaps/x",
        "/%2Fapi/v1/namespaces/default/configmaps",
        "/api/v1/namespaces/default/configmaps/%zz",
        "/api/v1/namespaces/default/configmaps/x%4",
        "/healthz/..",
        "//metrics",
        "/debug//watchers",
        "/version/%2E",
        "/ui/%2E%2E/x",
    ] {
        for method in ["GET", "PUT", "DELETE", "POST"] {
            let answer = exchange(addr, method, target, &body).await;
            assert_status(&answer, 400, "BadRequest");
            assert!(
                answer.json()["message"]
                    .as_str()
                    .is_some_and(|m| m.starts_with("invalid path")),
                "{method} {target}: {}",
                answer.body
            );
        }
    }
    // The canonical forms still work, a trailing slash included.
    for target in [
        &format!("{CM}/x") as &str,
        &format!("{CM}/"),
        "/api/v1/",
        "/healthz",
        "/",
    ] {
        let answer = exchange(addr, "GET", target, "").await;
        assert!(
            matches!(answer.status, 200 | 404),
            "{target}: {} {}",
            answer.status,
            answer.body
        );
    }
    // An escape of a byte that may stand for itself is decoded (Go's `net/http` decodes
    // them all): the same objects under the one spelling.
    let answer = exchange(
        addr,
        "GET",
        "/%61pi/v1/namespaces/default/configmaps/%78",
        "",
    )
    .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.json()["metadata"]["name"], "x", "{}", answer.body);
    // Any other byte stays escaped, and the name is read decoded: `x ` names no ConfigMap
    // (ConfigMap names are DNS subdomains).
    let answer = exchange(addr, "GET", &format!("{CM}/x%20"), "").await;
    assert_status(&answer, 404, "NotFound");
    assert_eq!(
        answer.json()["message"],
        "configmaps \"x \" not found",
        "{}",
        answer.body
    );
    // Nothing was deleted or created by the refused requests.
    let (status, text) = request(addr, "GET", CM, "application/json", "").await;
    assert_eq!(status, 200, "{text}");
    let list: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(list["items"].as_array().map(Vec::len), Some(1), "{text}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_hyper_makes_by_itself_are_status_answers() {
    let server = server_with(ServeArgs {
        max_header_bytes: Some(128 * 1024),
        ..ServeArgs::default()
    })
    .await;
    let addr = server.addr;
    // A URI longer than the http crate parses (64 KiB), within the header limit: 414.
    let long = format!("{CM}?labelSelector={}", "a".repeat(70 * 1024));
    let too_long = exchange(addr, "GET", &long, "").await;
    assert_status(&too_long, 414, "RequestURITooLong");
    assert!(
        too_long.head.contains("connection: close"),
        "{}",
        too_long.head
    );
    // Headers far over the limit (beyond the layer's slack): 431 from hyper, as a Status.
    let head = format!(
        "GET {CM} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: {}\r\n\r\n",
        "x".repeat(200 * 1024)
    );
    let mut stream = send(addr, &head, b"").await;
    assert_status(
        &answer(&mut stream).await,
        431,
        "RequestHeaderFieldsTooLarge",
    );
    // More header fields than the parser takes: 431 too.
    let many: String = (0..150).map(|i| format!("X-H{i}: v\r\n")).collect();
    let head = format!("GET {CM} HTTP/1.1\r\nHost: 127.0.0.1\r\n{many}\r\n");
    let mut stream = send(addr, &head, b"").await;
    assert_status(
        &answer(&mut stream).await,
        431,
        "RequestHeaderFieldsTooLarge",
    );
    // Malformed requests: 400.
    for garbage in [
        format!("GET {CM} HTTP/1.1\r\nHost: 127.0.0.1\r\nNo colon here\r\n\r\n"),
        "GET\r\n\r\n".to_owned(),
        "\u{16}\u{3}\u{1}\u{0}\u{5}hello\r\n\r\n".to_owned(),
    ] {
        let mut stream = send(addr, &garbage, b"").await;
        let refused = answer(&mut stream).await;
        assert_status(&refused, 400, "BadRequest");
        assert!(
            refused.json()["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("malformed HTTP request")),
            "{}",
            refused.body
        );
    }
    // The server still serves, and counted each refusal.
    let text = metrics_text(addr).await;
    assert_eq!(rejections(&text, "uri_length"), 1, "{text}");
    assert_eq!(rejections(&text, "header_bytes"), 2, "{text}");
    assert_eq!(rejections(&text, "malformed_request"), 3, "{text}");
    server.shutdown().await;
}

/// One raw GET with the given `Host` header line (none when `None`); the answer.
async fn get_with_host(addr: SocketAddr, path: &str, host: Option<&str>) -> Answer {
    let host = host.map(|h| format!("Host: {h}\r\n")).unwrap_or_default();
    let mut stream = send(
        addr,
        &format!("GET {path} HTTP/1.1\r\n{host}Connection: close\r\n\r\n"),
        b"",
    )
    .await;
    answer(&mut stream).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_loopback_listener_answers_loopback_host_names_only() {
    let server = server_with(ServeArgs {
        allowed_hosts: Some(vec!["dev.example".to_owned(), "[fd00::7]".to_owned()]),
        ..ServeArgs::default()
    })
    .await;
    let addr = server.addr;
    let port = addr.port();
    for host in [
        "localhost".to_owned(),
        format!("localhost:{port}"),
        "LOCALHOST".to_owned(),
        "127.0.0.1".to_owned(),
        format!("127.0.0.1:{port}"),
        "127.1.2.3".to_owned(),
        "[::1]".to_owned(),
        format!("[::1]:{port}"),
        "dev.example".to_owned(),
        format!("Dev.Example:{port}"),
        "[fd00::7]:80".to_owned(),
    ] {
        let answer = get_with_host(addr, CM, Some(&host)).await;
        assert_eq!(answer.status, 200, "{host}: {}", answer.body);
    }
    // No Host at all (HTTP/1.0 style) is no browser's request.
    let mut stream = send(addr, &format!("GET {CM} HTTP/1.0\r\n\r\n"), b"").await;
    assert_eq!(answer(&mut stream).await.status, 200);
    // A rebinding page's name, or any other, is refused before anything is read.
    for host in [
        "evil.example".to_owned(),
        format!("evil.example:{port}"),
        "localhost.evil.example".to_owned(),
        "127.0.0.1.nip.io".to_owned(),
        "10.0.0.1".to_owned(),
        "[fd00::8]".to_owned(),
        "0.0.0.0".to_owned(),
    ] {
        let answer = get_with_host(addr, CM, Some(&host)).await;
        assert_status(&answer, 403, "Forbidden");
        assert!(
            answer.body.contains("--allowed-hosts"),
            "{host}: {}",
            answer.body
        );
    }
    let text = metrics_text(addr).await;
    assert_eq!(rejections(&text, "host"), 7, "{text}");
    server.shutdown().await;
}

/// A token file and an ABAC policy: `admin` may do anything, `reader` only read in
/// `default`, `nobody` nothing.
fn auth_files(dir: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let tokens = dir.join("tokens.csv");
    std::fs::write(
        &tokens,
        "admin-token,admin,1,\"system:masters\"\nreader-token,reader,2\nnobody-token,nobody,3\n",
    )
    .unwrap();
    let policy = dir.join("policy.jsonl");
    let lines: Vec<String> = [
        serde_json::json!({"group": "system:masters", "namespace": "*", "resource": "*", "apiGroup": "*", "nonResourcePath": "*"}),
        serde_json::json!({"user": "reader", "namespace": "default", "resource": "*", "apiGroup": "*", "readonly": true}),
    ]
    .iter()
    .map(|spec| {
        serde_json::json!({"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": spec})
            .to_string()
    })
    .collect();
    std::fs::write(&policy, lines.join("\n")).unwrap();
    (tokens, policy)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forbidden_requests_are_refused_before_their_body_and_take_no_slot() {
    let dir = tempfile::tempdir().unwrap();
    let (tokens, policy) = auth_files(dir.path());
    let server = server_with(ServeArgs {
        token_auth_file: Some(tokens),
        authorization_policy_file: Some(policy),
        max_requests_inflight: Some(2),
        max_mutating_requests_inflight: Some(2),
        // Far beyond the hang guard: an answer that waited for the body would fail the test.
        request_read_timeout_seconds: Some(3600),
        ..ServeArgs::default()
    })
    .await;
    let addr = server.addr;
    let limits = server.app.limits.clone();
    // Slow bodies that would each be 403: a reader's writes, and nobody's lists (with a body).
    let mut slow = Vec::new();
    for index in 0..10 {
        let (token, method, path) = if index % 2 == 0 {
            ("reader-token", "POST", CM.to_owned())
        } else {
            ("nobody-token", "GET", CM.to_owned())
        };
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
        );
        // One byte of the 100,000 announced; the rest never comes.
        let mut stream = send(addr, &head, b"{").await;
        let refused = answer(&mut stream).await;
        assert_status(&refused, 403, "Forbidden");
        slow.push(stream);
    }
    assert_eq!(limits.inflight(true), 0);
    assert_eq!(limits.inflight(false), 0);
    // The admin is not crowded out.
    let body = configmap("admin-write", 10).to_string();
    let head = format!(
        "POST {CM} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer admin-token\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let mut stream = send(addr, &head, body.as_bytes()).await;
    let created = answer(&mut stream).await;
    assert_eq!(created.status, 201, "{}", created.body);
    // Non-resource paths too: nobody may not read /metrics, before any body.
    let mut stream = send(
        addr,
        "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer nobody-token\r\nContent-Length: 10\r\n\r\n",
        b"",
    )
    .await;
    assert_status(&answer(&mut stream).await, 403, "Forbidden");
    drop(slow);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_in_flight_slot_is_held_until_the_response_is_taken() {
    let server = server_with(ServeArgs {
        max_requests_inflight: Some(1),
        // One seat in all for API Priority and Fairness: each level has ceil(1 × shares /
        // 245) = 1, the anonymous user's `global-default` too.
        max_mutating_requests_inflight: Some(0),
        ..ServeArgs::default()
    })
    .await;
    let addr = server.addr;
    let limits = server.app.limits.clone();
    // 8 MB of objects: the LIST answer is larger than the socket buffers and hyper's buffer.
    for index in 0..8 {
        let (status, text) = request(
            addr,
            "POST",
            CM,
            "application/json",
            &configmap(&format!("big-{index}"), 1024 * 1024).to_string(),
        )
        .await;
        assert_eq!(status, 201, "{text}");
    }
    // A client that asks for the LIST and never reads it.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut stalled = socket.connect(addr).await.unwrap();
    stalled
        .write_all(format!("GET {CM} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").as_bytes())
        .await
        .unwrap();
    // The answer's head arrived: the handler has returned.
    let head = tokio::time::timeout(HANG_GUARD, raw::read_head(&mut stalled))
        .await
        .expect("a head")
        .unwrap();
    assert_eq!(raw::status_of(&head), 200, "{head}");
    // Its slot is still held while the body is unsent: another read gets 429 (after waiting
    // in `global-default`'s queue a quarter of its `?timeout=`, as kube's queuing levels do).
    assert_eq!(limits.inflight(false), 1);
    let refused = exchange(addr, "GET", &format!("{CM}?timeout=1s"), "").await;
    assert_status(&refused, 429, "TooManyRequests");
    // When the client goes away, the slot is free.
    drop(stalled);
    until(|| limits.inflight(false) == 0).await;
    let listed = exchange(addr, "GET", "/api/v1/namespaces", "").await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    server.shutdown().await;
}

/// Goal: a small answer frees its in-flight slot once the handler returns, as kube's handlers
/// return once their answer fits their write buffer: an HTTP/2 client that opens streams and
/// never gives them a flow-control window cannot hold every slot with cheap GETs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_answer_nobody_reads_holds_no_slot() {
    let server = server_with(ServeArgs {
        max_requests_inflight: Some(1),
        ..ServeArgs::default()
    })
    .await;
    let addr = server.addr;
    let limits = server.app.limits.clone();
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (client, connection) = h2::client::Builder::new()
        .initial_window_size(0)
        .handshake::<_, bytes::Bytes>(tcp)
        .await
        .unwrap();
    tokio::spawn(connection);
    let mut streams = Vec::new();
    for _ in 0..3 {
        let mut ready = client.clone().ready().await.unwrap();
        let (response, _) = ready
            .send_request(
                axum::http::Request::get("http://127.0.0.1/api/v1/namespaces")
                    .body(())
                    .unwrap(),
                true,
            )
            .unwrap();
        let response = tokio::time::timeout(HANG_GUARD, response)
            .await
            .expect("a head")
            .unwrap();
        assert_eq!(response.status(), 200);
        // Its body waits for a window the client never gives; the slot is free anyway.
        streams.push(response);
        until(|| limits.inflight(false) == 0).await;
    }
    let listed = exchange(addr, "GET", "/api/v1/namespaces", "").await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    drop(streams);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_doing_nothing_are_closed() {
    let server = server_with(ServeArgs {
        request_header_timeout_ms: Some(300),
        idle_timeout_ms: Some(500),
        ..ServeArgs::default()
    })
    .await;
    let addr = server.addr;
    // A watch is in flight all along: it is not idle, and stays open.
    let mut watch = common::WatchReader::open(addr, &format!("{CM}?watch=true"), None).await;
    // A TCP connection that sends nothing: closed at the header timeout from accept.
    let mut silent = TcpStream::connect(addr).await.unwrap();
    assert_eq!(until_closed(&mut silent).await, 0);
    // A head that never ends (slowloris): closed too, without an answer.
    let mut partial = send(
        addr,
        &format!("GET {CM} HTTP/1.1\r\nHost: 127.0.0.1\r\n"),
        b"",
    )
    .await;
    assert_eq!(until_closed(&mut partial).await, 0);
    // Keep-alive: one request answered, then nothing: closed at the idle timeout.
    let mut kept = send(
        addr,
        &format!("GET {CM} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"),
        b"",
    )
    .await;
    assert_eq!(answer(&mut kept).await.status, 200);
    assert_eq!(until_closed(&mut kept).await, 0);
    // HTTP/2 (prior knowledge) without a stream: GOAWAY and closed.
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (client, connection) = h2::client::handshake(tcp).await.unwrap();
    let closed = tokio::spawn(connection);
    tokio::time::timeout(HANG_GUARD, closed)
        .await
        .expect("the server closes an HTTP/2 connection without streams")
        .unwrap()
        .ok();
    drop(client);
    // HTTP/2 after one stream: closed once idle.
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (client, connection) = h2::client::handshake(tcp).await.unwrap();
    let closed = tokio::spawn(connection);
    let mut client = client.ready().await.unwrap();
    let (response, _) = client
        .send_request(
            axum::http::Request::get(format!("http://127.0.0.1{CM}"))
                .body(())
                .unwrap(),
            true,
        )
        .unwrap();
    let response = tokio::time::timeout(HANG_GUARD, response)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut body = response.into_body();
    while let Some(chunk) = body.data().await {
        chunk.unwrap();
    }
    tokio::time::timeout(HANG_GUARD, closed)
        .await
        .expect("the server closes an idle HTTP/2 connection")
        .unwrap()
        .ok();
    drop(client);
    // The watch outlived all of them and still delivers.
    let created = exchange(addr, "POST", CM, &configmap("after-idle", 1).to_string()).await;
    assert_eq!(created.status, 201, "{}", created.body);
    let event = watch.next().await.expect("the watch is still open");
    assert_eq!(event["type"], "ADDED");
    assert_eq!(event["object"]["metadata"]["name"], "after-idle");
    let text = metrics_text(addr).await;
    assert!(rejections(&text, "request_header_timeout") >= 2, "{text}");
    assert!(rejections(&text, "idle_timeout") >= 2, "{text}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_is_disconnected_at_the_write_timeout() {
    let server = server_with(ServeArgs {
        write_timeout_ms: Some(300),
        ..ServeArgs::default()
    })
    .await;
    let addr = server.addr;
    let limits = server.app.limits.clone();
    for index in 0..8 {
        let created = exchange(
            addr,
            "POST",
            CM,
            &configmap(&format!("big-{index}"), 1024 * 1024).to_string(),
        )
        .await;
        assert_eq!(created.status, 201, "{}", created.body);
    }
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut stalled = socket.connect(addr).await.unwrap();
    stalled
        .write_all(format!("GET {CM} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let head = tokio::time::timeout(HANG_GUARD, raw::read_head(&mut stalled))
        .await
        .expect("a head")
        .unwrap();
    let length: usize = head
        .to_ascii_lowercase()
        .lines()
        .find_map(|l| {
            l.strip_prefix("content-length:")
                .map(|v| v.trim().to_owned())
        })
        .and_then(|v| v.parse().ok())
        .expect("a content-length");
    assert!(length > 8 * 1024 * 1024, "{length}");
    // Never reading: the write makes no progress, the server closes the connection and drops
    // the response, and the slot it held is free.
    until(|| limits.inflight(false) == 0).await;
    let received = until_closed(&mut stalled).await;
    assert!(received < length, "{received} of {length} bytes");
    let text = metrics_text(addr).await;
    assert_eq!(rejections(&text, "write_timeout"), 1, "{text}");
    server.shutdown().await;
}

/// One HTTP/2 (prior knowledge) GET with `headers`; the status, the response headers and the
/// body as received (not decompressed).
async fn h2_get(
    addr: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
) -> (u16, axum::http::HeaderMap, Vec<u8>) {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (client, connection) = h2::client::handshake(tcp).await.unwrap();
    tokio::spawn(connection);
    let mut client = client.ready().await.unwrap();
    let mut request = axum::http::Request::get(format!("http://127.0.0.1{path}"));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let (response, _) = client
        .send_request(request.body(()).unwrap(), true)
        .unwrap();
    let response = tokio::time::timeout(HANG_GUARD, response)
        .await
        .expect("an answer")
        .unwrap();
    let (parts, mut body) = response.into_parts();
    let mut bytes = Vec::new();
    if path.contains("watch=true") {
        // A watch: its head is what counts; its body never ends by itself.
        return (parts.status.as_u16(), parts.headers, bytes);
    }
    while let Some(chunk) = tokio::time::timeout(HANG_GUARD, body.data())
        .await
        .expect("body data")
    {
        let chunk = chunk.unwrap();
        let _ = body.flow_control().release_capacity(chunk.len());
        bytes.extend_from_slice(&chunk);
    }
    (parts.status.as_u16(), parts.headers, bytes)
}

fn gunzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Read;
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_end(&mut out)
        .expect("a gzip stream");
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_responses_are_gzipped_when_the_client_asks_and_watches_never() {
    let server = server_with(ServeArgs::default()).await;
    let addr = server.addr;
    // Two objects of 100 KiB: each GET is under kube-apiserver's 128 KiB threshold, the LIST
    // over it; one of 200 KiB is over it alone.
    for (name, payload) in [("a", 100 * 1024), ("b", 100 * 1024), ("c", 200 * 1024)] {
        let created = exchange(addr, "POST", CM, &configmap(name, payload).to_string()).await;
        assert_eq!(created.status, 201, "{}", created.body);
    }
    let gzip = [("accept-encoding", "gzip, deflate")];
    let (status, headers, plain) = h2_get(addr, CM, &[]).await;
    assert_eq!(status, 200);
    assert!(!headers.contains_key("content-encoding"), "{headers:?}");
    let listed: serde_json::Value = serde_json::from_slice(&plain).unwrap();
    assert_eq!(listed["items"].as_array().unwrap().len(), 3);
    // The same LIST, compressed: the same bytes once decompressed, and far fewer on the wire.
    let (status, headers, compressed) = h2_get(addr, CM, &gzip).await;
    assert_eq!(status, 200);
    assert_eq!(headers["content-encoding"], "gzip", "{headers:?}");
    assert_eq!(headers["vary"], "Accept-Encoding", "{headers:?}");
    assert!(!headers.contains_key("content-length"), "{headers:?}");
    assert!(compressed.len() < plain.len() / 10, "{}", compressed.len());
    assert_eq!(gunzip(&compressed), plain);
    // Not for a token other than exactly `gzip` (kube-apiserver's parsing).
    let (_, headers, body) = h2_get(addr, CM, &[("accept-encoding", "gzip;q=1")]).await;
    assert!(!headers.contains_key("content-encoding"), "{headers:?}");
    assert_eq!(body, plain);
    // GET: a 100 KiB object is sent as it is, a 200 KiB one compressed.
    let (status, headers, small) = h2_get(addr, &format!("{CM}/a"), &gzip).await;
    assert_eq!(status, 200);
    assert!(!headers.contains_key("content-encoding"), "{headers:?}");
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&small).unwrap()["metadata"]["name"],
        "a"
    );
    let (status, headers, large) = h2_get(addr, &format!("{CM}/c"), &gzip).await;
    assert_eq!(status, 200);
    assert_eq!(headers["content-encoding"], "gzip", "{headers:?}");
    let object: serde_json::Value = serde_json::from_slice(&gunzip(&large)).unwrap();
    assert_eq!(object["metadata"]["name"], "c");
    // A watch whose initial state is 400 KiB is never compressed.
    let (status, headers, _) =
        h2_get(addr, &format!("{CM}?watch=true&resourceVersion=0"), &gzip).await;
    assert_eq!(status, 200);
    assert!(!headers.contains_key("content-encoding"), "{headers:?}");
    // Off with --gzip-min-response-bytes 0.
    server.shutdown().await;
    let server = server_with(ServeArgs {
        gzip_min_response_bytes: Some(0),
        ..ServeArgs::default()
    })
    .await;
    let created = exchange(
        server.addr,
        "POST",
        CM,
        &configmap("c", 200 * 1024).to_string(),
    )
    .await;
    assert_eq!(created.status, 201, "{}", created.body);
    let (_, headers, _) = h2_get(server.addr, &format!("{CM}/c"), &gzip).await;
    assert!(!headers.contains_key("content-encoding"), "{headers:?}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_json_patch_bomb_is_refused_and_counted() {
    let server = server_with(ServeArgs::default()).await;
    let addr = server.addr;
    let created = exchange(addr, "POST", CM, &configmap("target", 1).to_string()).await;
    assert_eq!(created.status, 201, "{}", created.body);
    // A 1 MiB annotation copied four times would add 4 MiB: past the 3 MiB copy limit.
    let mut patch = vec![serde_json::json!({
        "op": "add", "path": "/metadata/annotations", "value": {"a": "z".repeat(1024 * 1024)}
    })];
    for index in 0..4 {
        patch.push(serde_json::json!({
            "op": "copy", "from": "/metadata/annotations/a", "path": format!("/metadata/annotations/a{index}")
        }));
    }
    let body = serde_json::Value::from(patch).to_string();
    let head = format!(
        "PATCH {CM}/target HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json-patch+json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let mut stream = send(addr, &head, body.as_bytes()).await;
    let refused = answer(&mut stream).await;
    assert_status(&refused, 422, "Invalid");
    assert!(
        refused.body.contains("accumulated size increase of copy"),
        "{}",
        refused.body
    );
    let text = metrics_text(addr).await;
    assert_eq!(rejections(&text, "json_patch_copy_bytes"), 1, "{text}");
    // The object is unchanged.
    let got = exchange(addr, "GET", &format!("{CM}/target"), "").await;
    assert_eq!(got.status, 200);
    assert!(
        got.json()["metadata"].get("annotations").is_none(),
        "{}",
        got.body
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_connection_bound_an_idle_connection_gives_way_and_busy_ones_never_do() {
    use watchkeeper::limits::Limit;
    let server = server_with(ServeArgs {
        max_connections: Some(3),
        ..ServeArgs::default()
    })
    .await;
    let addr = server.addr;
    let limits = server.app.limits.clone();
    let slots = limits.connections().clone();
    // Two connections busy with watches (never chosen), one that sends nothing.
    let mut first = common::WatchReader::open(addr, &format!("{CM}?watch=true"), None).await;
    let mut second = common::WatchReader::open(addr, &format!("{CM}?watch=true"), None).await;
    until(|| slots.open() == 2 && slots.waiting() == 0).await;
    let mut silent = TcpStream::connect(addr).await.unwrap();
    until(|| slots.open() == 3 && slots.waiting() == 1).await;
    // At the bound, a client with a request gets in: the silent connection gives way.
    let created = exchange(addr, "POST", CM, &configmap("at-the-bound", 1).to_string()).await;
    assert_eq!(created.status, 201, "{}", created.body);
    assert_eq!(until_closed(&mut silent).await, 0);
    assert_eq!(limits.rejections(Limit::ConnectionEvicted), 1);
    for watch in [&mut first, &mut second] {
        let event = watch.next().await.expect("the busy watches stay open");
        assert_eq!(event["object"]["metadata"]["name"], "at-the-bound");
    }
    // Three busy connections: a fourth is closed unread, and nothing else gives way.
    until(|| slots.open() == 2).await;
    let mut third =
        common::WatchReader::open(addr, &format!("{CM}?watch=true&timeoutSeconds=1"), None).await;
    until(|| slots.open() == 3 && slots.waiting() == 0).await;
    let mut refused = TcpStream::connect(addr).await.unwrap();
    refused
        .write_all(format!("GET {CM} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").as_bytes())
        .await
        .ok();
    assert_eq!(until_closed(&mut refused).await, 0);
    assert_eq!(limits.rejections(Limit::Connections), 1);
    assert_eq!(limits.rejections(Limit::ConnectionEvicted), 1);
    // Once the third watch ends, its kept-alive connection is idle and gives way to the next
    // client; the other two watches were never chosen and still deliver.
    // (It first lists the object created above: a watch without resourceVersion starts with
    // the current state.)
    while third.next().await.is_some() {}
    until(|| slots.waiting() == 1).await;
    let created = exchange(
        addr,
        "POST",
        CM,
        &configmap("after-the-third", 1).to_string(),
    )
    .await;
    assert_eq!(created.status, 201, "{}", created.body);
    assert_eq!(limits.rejections(Limit::ConnectionEvicted), 2);
    for watch in [&mut first, &mut second] {
        let event = watch.next().await.expect("the busy watches stay open");
        assert_eq!(event["object"]["metadata"]["name"], "after-the-third");
    }
    server.shutdown().await;
}

/// The value of a gauge sample `name{resource="configmaps",...}` in `/metrics`.
fn configmaps_gauge(text: &str, name: &str) -> u64 {
    text.lines()
        .find(|l| l.starts_with(&format!("{name}{{")) && l.contains("resource=\"configmaps\""))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {name} for configmaps in /metrics"))
}

/// Goal: a client writing large objects fast holds a bounded history (`--history-bytes-max`):
/// the oldest revisions go, a watch from before them gets the honest in-stream 410, a watch
/// from a revision still held gets every later event in order, and the history's byte gauge
/// stays within the bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_objects_written_fast_hold_a_bounded_history() {
    const BOUND: u64 = 700_000;
    let server = server_with(ServeArgs {
        history_bytes_max: Some(BOUND as usize),
        ..ServeArgs::default()
    })
    .await;
    let addr = server.addr;
    let (status, created) = common::send_json(addr, "POST", CM, &configmap("big", 50_000)).await;
    assert_eq!(status, 201, "{created}");
    let first = created["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut versions = Vec::new();
    for i in 0..10 {
        let patched = common::merge_patch(
            addr,
            &format!("{CM}/big"),
            &format!(r#"{{"data":{{"i":"{i}"}}}}"#),
        )
        .await;
        versions.push(
            patched["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    // Ten updates of ~200 KB (each holds two versions of a 50 KB string, decoded and as
    // JSON) against a 700 KB bound: the creation is long gone.
    let mut old = common::WatchReader::open(
        addr,
        &format!("{CM}?watch=true&resourceVersion={first}"),
        None,
    )
    .await;
    let event = old.next().await.expect("an event");
    assert_eq!(event["type"], "ERROR", "{event}");
    assert_eq!(event["object"]["code"], 410);
    assert_eq!(event["object"]["reason"], "Expired");
    // From the eighth patch: the ninth and tenth, in order.
    let mut recent = common::WatchReader::open(
        addr,
        &format!("{CM}?watch=true&resourceVersion={}", versions[7]),
        None,
    )
    .await;
    for (i, version) in versions.iter().enumerate().skip(8) {
        let event = recent.next().await.expect("an event");
        assert_eq!(event["type"], "MODIFIED", "{event}");
        assert_eq!(
            event["object"]["metadata"]["resourceVersion"],
            version.as_str()
        );
        assert_eq!(event["object"]["data"]["i"], i.to_string());
    }
    let bytes = configmaps_gauge(
        &metrics_text(addr).await,
        "watchkeeper_watch_cache_history_bytes",
    );
    assert!(
        (100_000..=BOUND).contains(&bytes),
        "history bytes {bytes}, bound {BOUND}"
    );
    server.shutdown().await;
}

/// A YAML body's aliases may not build more than its own text could hold (twice its length,
/// plus a little): a 100 KB string aliased a hundred times (10 MB of JSON from a 100 KB body)
/// and a 300-byte tree of aliases (66,000 nodes) are 400s for a create and for an apply, before
/// the value is built; anchors as manifests use them are read and expanded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn yaml_aliases_cannot_build_more_than_the_body_holds() {
    let server = server_with(ServeArgs::default()).await;
    let addr = server.addr;
    let head = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: amplified}\n";
    let refs = vec!["*s"; 100].join(", ");
    let strings = format!(
        "{head}data: {{s: &s {}}}\nrefs: [{refs}]\n",
        "x".repeat(100_000)
    );
    let mut tree = format!("{head}a0: &a0 [x, x, x, x, x, x, x, x, x]\n");
    for level in 1..5 {
        let items = vec![format!("*a{}", level - 1); 9].join(", ");
        tree.push_str(&format!("a{level}: &a{level} [{items}]\n"));
    }
    for body in [&strings, &tree] {
        let (status, text) = request(addr, "POST", CM, "application/yaml", body).await;
        assert_eq!(status, 400, "{text}");
        let refusal: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(refusal["reason"], "BadRequest", "{text}");
        let message = refusal["message"].as_str().unwrap();
        assert!(
            message.contains("error converting YAML to JSON: yaml: "),
            "{message}"
        );
        let apply = format!("{CM}/amplified?fieldManager=m");
        let (status, text) =
            request(addr, "PATCH", &apply, "application/apply-patch+yaml", body).await;
        assert_eq!(status, 400, "{text}");
        assert!(
            text.contains("error decoding YAML: error converting YAML"),
            "{text}"
        );
    }
    let missing = exchange(addr, "GET", &format!("{CM}/amplified"), "").await;
    assert_status(&missing, 404, "NotFound");
    let anchored = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: anchored, labels: &l {app: web}}\ndata: *l\n";
    let (status, text) = request(addr, "POST", CM, "application/yaml", anchored).await;
    assert_eq!(status, 201, "{text}");
    let created: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(created["data"], serde_json::json!({"app": "web"}), "{text}");
    server.shutdown().await;
}

/// A JSON patch may not nest an object deeper than a JSON body may (10,000 levels): each `copy`
/// of a value under its own deepest path doubles its depth, and nine of them (a 100 KB patch)
/// built 51,200 levels that overflowed a worker's stack and aborted the server. Refused with
/// 422 before anything is cloned; the object is unchanged and the server answers.
#[test]
fn a_json_patch_cannot_nest_an_object_past_what_a_body_may() {
    common::on_server_runtime(a_json_patch_cannot_nest_an_object_past_what_a_body_may_run);
}

async fn a_json_patch_cannot_nest_an_object_past_what_a_body_may_run() {
    let server = server_with(ServeArgs::default()).await;
    let addr = server.addr;
    let created = exchange(addr, "POST", CM, &configmap("deep", 1).to_string()).await;
    assert_eq!(created.status, 201, "{}", created.body);
    let nested = (0..100).fold(serde_json::json!(1), |inner, _| {
        serde_json::Value::Object(serde_json::Map::from_iter([("a".to_owned(), inner)]))
    });
    let mut operations = vec![serde_json::json!({"op": "add", "path": "/x", "value": nested})];
    let mut deepest = "/a".repeat(99);
    for _ in 0..9 {
        operations.push(
            serde_json::json!({"op": "copy", "from": "/x", "path": format!("/x{deepest}/b")}),
        );
        deepest = format!("{deepest}/b{deepest}");
    }
    let body = serde_json::Value::from(operations).to_string();
    let head = format!(
        "PATCH {CM}/deep HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json-patch+json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let mut stream = send(addr, &head, body.as_bytes()).await;
    let refused = answer(&mut stream).await;
    assert_status(&refused, 422, "Invalid");
    assert!(
        refused.body.contains("more than the 10000 a JSON body may"),
        "{}",
        refused.body
    );
    let got = exchange(addr, "GET", &format!("{CM}/deep"), "").await;
    assert_eq!(got.status, 200, "{}", got.body);
    assert_eq!(
        got.json()["metadata"]["resourceVersion"],
        created.json()["metadata"]["resourceVersion"]
    );
    server.shutdown().await;
}

/// Goal: a body of many unknown fields (kept as warnings under the default `Warn` field
/// validation) costs time linear in its size and answers kube's bounded `Warning` headers:
/// at most 4,096 characters of warnings plus one cut to 256 (kube's recorder). (Before: each
/// warning was compared with every one before it — 32,000 fields took 12.7 s of a runtime
/// worker — and all of them were sent as headers.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_unknown_fields_answer_bounded_warnings() {
    let server = server_with(ServeArgs::default()).await;
    let addr = server.addr;
    let mut object = configmap("unknown-fields", 8);
    for field in 0..50_000 {
        object[format!("f{field}")] = serde_json::json!(1);
    }
    // Raw: ~200 warning headers are more than a hyper client parses (100), as from kube.
    let created = exchange(addr, "POST", CM, &object.to_string()).await;
    assert_eq!(created.status, 201, "{}", created.body);
    assert!(
        created.json().get("f0").is_none(),
        "unknown fields are dropped"
    );
    let warnings: Vec<&str> = created
        .head
        .lines()
        .filter_map(|line| line.strip_prefix("warning: "))
        .collect();
    assert_eq!(warnings[0], r#"299 - "unknown field \"f0\"""#);
    let chars: usize = warnings.iter().map(|w| w.chars().count()).sum();
    assert!(
        chars < 2 * 4096,
        "{} warnings, {chars} characters",
        warnings.len()
    );
    server.shutdown().await;
}

/// One HTTP/2 frame: its 9-byte header (length, type, flags, stream) and its payload.
fn h2_frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let length = u32::try_from(payload.len()).unwrap().to_be_bytes();
    let mut frame = Vec::with_capacity(9 + payload.len());
    frame.extend_from_slice(&length[1..]);
    frame.extend_from_slice(&[kind, flags]);
    frame.extend_from_slice(&stream.to_be_bytes());
    frame.extend_from_slice(payload);
    frame
}

/// A GET's HEADERS block in HPACK with no table: `:method GET` and `:scheme http` indexed,
/// `:path` and `:authority` as literals without indexing.
fn h2_get_headers(path: &str, authority: &str) -> Vec<u8> {
    let mut block = vec![0x82, 0x86];
    for (index, value) in [(0x04u8, path), (0x01, authority)] {
        assert!(value.len() < 127, "one-byte string lengths");
        block.push(index);
        block.push(u8::try_from(value.len()).unwrap());
        block.extend_from_slice(value.as_bytes());
    }
    block
}

/// HTTP/2 "rapid reset" (CVE-2023-44487): a client opens LIST streams and cancels each at
/// once, without end, writing them in batches as an attacker does (each HEADERS frame
/// followed by its RST_STREAM). The connection is ended with GOAWAY long before 20,000
/// streams, nothing stays in flight, and the server goes on serving. Which GOAWAY depends on
/// the machine's load: h2's `ENHANCE_YOUR_CALM` when the resets arrive before the server took
/// the streams (h2's bound, as Go's `net/http2` bounds them for kube-apiserver), the server's
/// own graceful one when it took most streams before their reset arrived
/// (`Activity::too_many_resets`; it failed 4 runs in 25 on a loaded machine without it), or
/// none when h2 dropped most streams before the server took them without ever holding 20
/// reset ones at once: then the server ran few handlers (counted by API Priority and
/// Fairness), which is what the bounds are for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http2_client_that_cancels_every_stream_is_sent_away() {
    use tokio::io::AsyncReadExt;
    let server = server_with(ServeArgs::default()).await;
    let addr = server.addr;
    for i in 0..50 {
        let (status, _) =
            common::send_json(addr, "POST", CM, &configmap(&format!("c{i}"), 1000)).await;
        assert_eq!(status, 201);
    }
    // Requests that reached API Priority and Fairness: those whose handler began.
    let dispatched = |text: &str| -> u64 {
        text.lines()
            .filter(|line| line.starts_with("apiserver_flowcontrol_dispatched_requests_total{"))
            .filter_map(|line| line.rsplit(' ').next()?.parse::<u64>().ok())
            .sum()
    };
    let before = dispatched(&metrics_text(addr).await);
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (mut reader, mut writer) = tcp.into_split();
    let mut hello = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    hello.extend(h2_frame(0x4, 0, 0, &[]));
    writer.write_all(&hello).await.unwrap();
    // The reader acknowledges the server's SETTINGS (through the channel) and reports the
    // GOAWAY's error code, if one comes before the connection ends.
    let (ack, mut acks) = tokio::sync::mpsc::unbounded_channel::<()>();
    let frames = tokio::spawn(async move {
        let mut buffer = Vec::new();
        let mut chunk = [0u8; 16 << 10];
        loop {
            while buffer.len() >= 9 {
                let length = usize::from(buffer[0]) << 16
                    | usize::from(buffer[1]) << 8
                    | usize::from(buffer[2]);
                if buffer.len() < 9 + length {
                    break;
                }
                let (kind, flags) = (buffer[3], buffer[4]);
                let payload = buffer[9..9 + length].to_vec();
                buffer.drain(..9 + length);
                if kind == 0x4 && flags & 0x1 == 0 {
                    let _ = ack.send(());
                }
                if kind == 0x7 {
                    return Some(u32::from_be_bytes(payload[4..8].try_into().unwrap()));
                }
            }
            match reader.read(&mut chunk).await {
                Ok(0) | Err(_) => return None,
                Ok(n) => buffer.extend_from_slice(&chunk[..n]),
            }
        }
    });
    tokio::time::timeout(HANG_GUARD, acks.recv())
        .await
        .expect("the server's SETTINGS")
        .expect("before the connection ends");
    writer.write_all(&h2_frame(0x4, 0x1, 0, &[])).await.unwrap();
    let headers = h2_get_headers(CM, &addr.to_string());
    let cancel = 8u32.to_be_bytes();
    let mut sent = 0u32;
    while sent < 20_000 && !frames.is_finished() {
        let mut batch = Vec::new();
        for _ in 0..500 {
            let stream = 2 * sent + 1;
            batch.extend(h2_frame(0x1, 0x5, stream, &headers));
            batch.extend(h2_frame(0x3, 0, stream, &cancel));
            sent += 1;
        }
        if writer.write_all(&batch).await.is_err() {
            break;
        }
        tokio::task::yield_now().await;
    }
    let goaway = if frames.is_finished() || sent < 20_000 {
        tokio::time::timeout(HANG_GUARD, frames)
            .await
            .expect("the connection ends")
            .unwrap()
    } else {
        frames.abort();
        drop(writer);
        None
    };
    // h2's own GOAWAY (ENHANCE_YOUR_CALM, 0xb) when the resets arrived before the server took
    // the streams; the server's (NO_ERROR, a graceful close) when it took most of them first.
    // Or, when neither came: h2 dropped the streams reset before the server took them (at
    // most 20 waiting at once), so the server ran the handlers of few of them.
    let text = metrics_text(addr).await;
    match goaway {
        Some(0xb) => {}
        Some(0x0) => assert_eq!(rejections(&text, "http2_resets"), 1, "after {sent}"),
        None => {
            let taken = dispatched(&text) - before;
            assert!(
                taken < 2 * 1000 + 100,
                "the server ran {taken} handlers of {sent} cancelled streams without a GOAWAY"
            );
        }
        other => panic!("GOAWAY {other:?} after {sent} cancelled streams"),
    }
    // Nothing in flight but the scrape itself, and the next client is served.
    tokio::time::timeout(HANG_GUARD, async {
        while !metrics_text(addr)
            .await
            .contains("apiserver_current_inflight_requests{request_kind=\"readOnly\"} 1\n")
        {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("nothing left in flight");
    let (status, _) = request(addr, "GET", CM, "", "").await;
    assert_eq!(status, 200);
    server.shutdown().await;
}

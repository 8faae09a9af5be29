//! `pods/proxy`, `services/proxy` and `nodes/proxy` end to end (`http::resource_proxy`): a
//! real HTTP backend on this machine's non-loopback IPv4 address, Pods, Services, Endpoints and
//! Nodes pointing at it, requests through the server answered by the backend with kube's
//! location rules (redirects and HTML links put back under the proxy prefix, answers streamed,
//! an https backend's certificate not verified), kube's words for each refusal, the loopback
//! never contacted, RBAC on the subresource, the `--proxy-requests-max` bound, caching-proxy
//! mode forwarding, and the real kubectl's `get --raw` through a service.
//!
//! No test sleeps on wall time or asserts a duration: every wait is for an event or a
//! condition, bounded by [`common::HANG_GUARD`] as a hang guard only.

use crate::common;
use crate::kubectl_support;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use common::{HANG_GUARD, merge_patch, send_json, server_with};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use watchkeeper::config::{ServeArgs, ServeConfig};

/// This machine's first non-loopback IPv4 address (from `ip -4 -o addr`, else the kernel's
/// `/proc/net/fib_trie` local routes). A machine without one cannot run these tests: fail
/// saying so, never pass without having proxied anything.
pub(crate) fn machine_address() -> Ipv4Addr {
    let usable = |ip: Ipv4Addr| {
        !(ip.is_loopback() || ip.is_link_local() || ip.is_unspecified() || ip.is_multicast())
    };
    if let Ok(output) = std::process::Command::new("ip")
        .args(["-4", "-o", "addr", "show"])
        .output()
    {
        let text = String::from_utf8_lossy(&output.stdout);
        for line in text.lines() {
            let mut words = line.split_whitespace();
            while let Some(word) = words.next() {
                if word == "inet"
                    && let Some(cidr) = words.next()
                    && let Ok(ip) = cidr.split('/').next().unwrap_or_default().parse()
                    && usable(ip)
                {
                    return ip;
                }
            }
        }
    }
    if let Ok(trie) = std::fs::read_to_string("/proc/net/fib_trie") {
        let lines: Vec<&str> = trie.lines().collect();
        for pair in lines.windows(2) {
            if pair[1].contains("/32 host LOCAL")
                && let Some(ip) = pair[0].trim().trim_start_matches("|-- ").parse().ok()
                && usable(ip)
            {
                return ip;
            }
        }
    }
    panic!(
        "these tests need a non-loopback IPv4 address on this machine (the proxy never connects to loopback addresses), and neither `ip -4 -o addr` nor /proc/net/fib_trie shows one"
    );
}

/// One request as the backend received it.
#[derive(Clone, Debug)]
pub(crate) struct Seen {
    method: String,
    pub(crate) target: String,
    headers: Vec<(String, String)>,
    body: String,
}

impl Seen {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A plain HTTP/1.1 backend: one request per connection. `/redirect` answers 302 to
/// `/landing`, `/absolute` 302 to its own URL `/landing/`, `/hold` waits for
/// [`Backend::release`]; anything else 200 (201 for a POST) with a JSON echo of the request
/// and `Access-Control-Allow-Origin: *`.
pub(crate) struct Backend {
    pub(crate) addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    release: Arc<Notify>,
}

impl Backend {
    pub(crate) async fn start(ip: Ipv4Addr) -> Backend {
        let listener = TcpListener::bind((ip, 0)).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let release = Arc::new(Notify::new());
        let (recorded, held) = (seen.clone(), release.clone());
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (recorded, held) = (recorded.clone(), held.clone());
                tokio::spawn(async move { serve_one(stream, addr, recorded, held).await });
            }
        });
        Backend {
            addr,
            seen,
            release,
        }
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    pub(crate) fn last(&self) -> Seen {
        self.seen()
            .last()
            .cloned()
            .expect("the backend got a request")
    }
}

async fn serve_one(
    mut stream: TcpStream,
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    release: Arc<Notify>,
) {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next().unwrap_or_default().split(' ');
    let method = request_line.next().unwrap_or_default().to_owned();
    let target = request_line.next().unwrap_or_default().to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buffer[head_end + 4..].to_vec();
    while body.len() < length {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => body.extend_from_slice(&chunk[..n]),
        }
    }
    let request = Seen {
        method: method.clone(),
        target: target.clone(),
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    };
    let held = target == "/hold";
    let waiting = release.notified();
    seen.lock().unwrap().push(request.clone());
    if target == "/stream" {
        // The answer's first part, then the rest only once the test has read that part
        // through the server: an answer the server buffered whole would never be read.
        let head = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\nb\r\nfirst-part\n\r\n";
        if stream.write_all(head.as_bytes()).await.is_err() {
            return;
        }
        waiting.await;
        let _ = stream.write_all(b"c\r\nsecond-part\n\r\n0\r\n\r\n").await;
        let _ = stream.shutdown().await;
        return;
    }
    if held {
        waiting.await;
    }
    let answer = match target.as_str() {
        "/redirect" => {
            "HTTP/1.1 302 Found\r\nLocation: /landing\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_owned()
        }
        "/page" => {
            let page = format!(
                "<html><body><a href=\"/x/\">x</a><img src=\"http://{addr}/i.png\"><a href=\"rel\">r</a><a href=\"https://example.com/e\">e</a></body></html>"
            );
            format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
                page.len()
            )
        }
        "/absolute" => format!(
            "HTTP/1.1 302 Found\r\nLocation: http://{addr}/landing/\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        ),
        _ => {
            let echo = json!({"method": method, "target": target, "body": request.body}).to_string();
            let status = if method == "POST" { "201 Created" } else { "200 OK" };
            format!(
                "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nAccess-Control-Allow-Origin: *\r\nX-Backend: yes\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{echo}",
                echo.len()
            )
        }
    };
    let _ = stream.write_all(answer.as_bytes()).await;
    let _ = stream.shutdown().await;
}

/// A listener on the loopback that counts the connections it accepts (it must get none).
struct Loopback {
    addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
}

impl Loopback {
    async fn start() -> Loopback {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                drop(stream);
            }
        });
        Loopback { addr, accepted }
    }
}

/// One request (`Connection: close`) with `headers`: status, headers, body text.
async fn call(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> watchkeeper_testkit::http::Response {
    tokio::time::timeout(
        HANG_GUARD,
        watchkeeper_testkit::request(addr, method, path, headers, body.as_bytes()),
    )
    .await
    .expect("request hang")
    .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
}

async fn get(addr: SocketAddr, path: &str) -> watchkeeper_testkit::http::Response {
    call(addr, "GET", path, &[], "").await
}

/// The answer is a kube Status with `code` and `message`.
fn refused(answer: &watchkeeper_testkit::http::Response, code: u16, message: &str) {
    let status = answer.json();
    assert_eq!(answer.status, code, "{}", answer.text());
    assert_eq!(status["kind"], "Status", "{status}");
    assert_eq!(status["code"], code, "{status}");
    assert_eq!(status["message"], message, "{status}");
}

async fn create(addr: SocketAddr, path: &str, object: Value) {
    let (status, body) = send_json(addr, "POST", path, &object).await;
    assert_eq!(status, 201, "POST {path}: {body}");
}

/// A pod `name` whose container declares `port`, with `ip` as its address (none when empty).
async fn pod(addr: SocketAddr, name: &str, port: u16, ip: &str) {
    create(
        addr,
        "/api/v1/namespaces/default/pods",
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "nginx",
                "ports": [{"containerPort": port}]}]}}),
    )
    .await;
    if !ip.is_empty() {
        let patch = json!({"status": {"podIP": ip, "podIPs": [{"ip": ip}]}}).to_string();
        merge_patch(
            addr,
            &format!("/api/v1/namespaces/default/pods/{name}/status"),
            &patch,
        )
        .await;
    }
}

/// A service `name` without a selector (port 80 named `http`) and its Endpoints: `ip:port`
/// targeting pod `target` (no subsets when `ip` is empty).
async fn service(addr: SocketAddr, name: &str, ip: &str, port: u16, target: &str) {
    create(
        addr,
        "/api/v1/namespaces/default/services",
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"ports": [{"name": "http", "port": 80, "targetPort": port}]}}),
    )
    .await;
    let subsets = if ip.is_empty() {
        json!([])
    } else {
        json!([{"addresses": [{"ip": ip,
                "targetRef": {"kind": "Pod", "namespace": "default", "name": target}}],
            "ports": [{"name": "http", "port": port}]}])
    };
    create(
        addr,
        "/api/v1/namespaces/default/endpoints",
        json!({"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": name},
            "subsets": subsets}),
    )
    .await;
}

/// A node `name` with `addresses` and its kubelet on `kubelet_port`.
async fn node(addr: SocketAddr, name: &str, addresses: Value, kubelet_port: u16) {
    create(
        addr,
        "/api/v1/nodes",
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}),
    )
    .await;
    let patch = json!({"status": {"addresses": addresses,
        "daemonEndpoints": {"kubeletEndpoint": {"Port": kubelet_port}}}})
    .to_string();
    merge_patch(addr, &format!("/api/v1/nodes/{name}/status"), &patch).await;
}

/// A port nothing listens on (a listener's, closed).
async fn closed_port(ip: Ipv4Addr) -> u16 {
    let listener = TcpListener::bind((ip, 0)).await.unwrap();
    listener.local_addr().unwrap().port()
}

#[tokio::test]
async fn pods_services_and_nodes_are_proxied_with_kubes_rules() {
    let ip = machine_address();
    let backend = Backend::start(ip).await;
    let loopback = Loopback::start().await;
    let server = server_with(ServeArgs::default()).await;
    let addr = server.addr;
    let port = backend.addr.port();
    let ip_text = ip.to_string();

    pod(addr, "web-0", port, &ip_text).await;
    pod(addr, "local-0", loopback.addr.port(), "127.0.0.1").await;
    pod(addr, "noip", port, "").await;
    service(addr, "web", &ip_text, port, "web-0").await;
    service(addr, "empty", "", port, "web-0").await;
    service(addr, "local", "127.0.0.1", loopback.addr.port(), "local-0").await;
    service(addr, "stray", &ip_text, port, "noip").await;

    // A pod at a named port, a path and a query: the backend gets them; the client's
    // credentials and CORS answers do not pass; X-Forwarded-Uri is the client's path.
    let prefix = format!("/api/v1/namespaces/default/pods/web-0:{port}/proxy");
    let answer = get(addr, &format!("{prefix}/a/b?x=1")).await;
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(answer.json()["target"], "/a/b?x=1");
    assert_eq!(answer.header("x-backend"), Some("yes"));
    assert_eq!(answer.header("access-control-allow-origin"), None);
    let seen = backend.last();
    assert_eq!(seen.method, "GET");
    assert_eq!(
        seen.header("x-forwarded-uri"),
        Some(&*format!("{prefix}/a/b"))
    );
    assert!(seen.header("x-forwarded-for").is_some(), "{seen:?}");

    // Without a port, the first container port; a POST's body and the backend's status pass.
    let answer = call(
        addr,
        "POST",
        "/api/v1/namespaces/default/pods/web-0/proxy/echo",
        &[("Content-Type", "text/plain")],
        "hello, backend",
    )
    .await;
    assert_eq!(answer.status, 201, "{}", answer.text());
    let seen = backend.last();
    assert_eq!(
        (seen.method.as_str(), seen.target.as_str()),
        ("POST", "/echo")
    );
    assert_eq!(seen.body, "hello, backend");
    assert_eq!(seen.header("content-type"), Some("text/plain"));

    // Redirects point back under the proxy prefix; the bare `proxy` is kube's 301 to `proxy/`.
    let answer = get(addr, &format!("{prefix}/redirect")).await;
    assert_eq!(answer.status, 302);
    assert_eq!(
        answer.header("location"),
        Some(&*format!("{prefix}/landing"))
    );
    let answer = get(addr, &format!("{prefix}/absolute")).await;
    assert_eq!(
        answer.header("location"),
        Some(&*format!("{prefix}/landing/"))
    );
    let answer = get(addr, &format!("{prefix}?q=1")).await;
    assert_eq!(answer.status, 301);
    assert_eq!(answer.header("location"), Some(&*format!("{prefix}/?q=1")));
    // An HTML answer's links too (kube's transport rewrites them).
    let answer = get(addr, &format!("{prefix}/page")).await;
    assert_eq!(
        answer.text(),
        format!(
            "<html><body><a href=\"{prefix}/x/\">x</a><img src=\"{prefix}/i.png\"><a href=\"rel\">r</a><a href=\"https://example.com/e\">e</a></body></html>"
        )
    );
    // A POST is not redirected: its empty path is the backend's `/`; `?path=` names one.
    let answer = call(addr, "POST", &prefix, &[], "").await;
    assert_eq!(answer.json()["target"], "/", "{}", answer.text());
    let answer = get(addr, &format!("{prefix}?path=/named")).await;
    assert_eq!(
        answer.json()["target"],
        "/named?path=/named",
        "{}",
        answer.text()
    );

    // A service by port name and by port number.
    for id in ["web:http", "web:80", "http:web:80"] {
        let answer = get(
            addr,
            &format!("/api/v1/namespaces/default/services/{id}/proxy/s?y=2"),
        )
        .await;
        assert_eq!(answer.status, 200, "{id}: {}", answer.text());
        assert_eq!(answer.json()["target"], "/s?y=2");
    }

    // A node by its address and a port of its own (not the kubelet's).
    node(
        addr,
        "n1",
        json!([{"type": "InternalIP", "address": ip_text}]),
        10250,
    )
    .await;
    let answer = get(addr, &format!("/api/v1/nodes/http:n1:{port}/proxy/metrics")).await;
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(answer.json()["target"], "/metrics");

    // kube's words for each refusal.
    let refusals: Vec<(String, u16, String)> = vec![
        (
            "/api/v1/namespaces/default/pods/a:b:c:d/proxy/".to_owned(),
            400,
            "invalid pod request \"a:b:c:d\"".to_owned(),
        ),
        (
            "/api/v1/namespaces/default/pods/ftp:web-0:21/proxy/".to_owned(),
            400,
            "invalid pod request \"ftp:web-0:21\"".to_owned(),
        ),
        (
            "/api/v1/namespaces/default/pods/missing/proxy/".to_owned(),
            404,
            "pods \"missing\" not found".to_owned(),
        ),
        (
            "/api/v1/namespaces/default/pods/noip/proxy/".to_owned(),
            400,
            "address not allowed".to_owned(),
        ),
        (
            "/api/v1/namespaces/default/services/web:81/proxy/".to_owned(),
            503,
            "no service port 81 found for service \"web\"".to_owned(),
        ),
        (
            "/api/v1/namespaces/default/services/empty/proxy/".to_owned(),
            503,
            "no endpoints available for service \"empty\"".to_owned(),
        ),
        (
            "/api/v1/namespaces/default/services/web:nope/proxy/".to_owned(),
            503,
            "no endpoints available for service \"web:nope\"".to_owned(),
        ),
        (
            // Its address is not one of its target pod's.
            "/api/v1/namespaces/default/services/stray:http/proxy/".to_owned(),
            503,
            "no endpoints available for service \"stray:http\"".to_owned(),
        ),
        (
            "/api/v1/namespaces/default/services/missing:http/proxy/".to_owned(),
            404,
            "endpoints \"missing\" not found".to_owned(),
        ),
        (
            "/api/v1/nodes/missing/proxy/".to_owned(),
            404,
            "nodes \"missing\" not found".to_owned(),
        ),
    ];
    for (path, code, message) in &refusals {
        refused(&get(addr, path).await, *code, message);
    }

    // The loopback is never contacted: not through a pod, a service or a node, whatever the
    // objects say.
    refused(
        &get(
            addr,
            &format!(
                "/api/v1/namespaces/default/pods/local-0:{}/proxy/",
                loopback.addr.port()
            ),
        )
        .await,
        400,
        "address not allowed",
    );
    refused(
        &get(
            addr,
            "/api/v1/namespaces/default/services/local:http/proxy/",
        )
        .await,
        503,
        "no endpoints available for service \"local:http\"",
    );
    node(
        addr,
        "n-local",
        json!([{"type": "InternalIP", "address": "127.0.0.1"}]),
        loopback.addr.port(),
    )
    .await;
    refused(
        &get(addr, "/api/v1/nodes/n-local/proxy/").await,
        400,
        "address not allowed",
    );
    refused(
        &get(
            addr,
            &format!("/api/v1/nodes/http:n-local:{}/proxy/", loopback.addr.port()),
        )
        .await,
        400,
        "address not allowed",
    );
    // A host name is resolved, and refused when it names the loopback.
    node(
        addr,
        "n-name",
        json!([{"type": "Hostname", "address": "localhost"}]),
        loopback.addr.port(),
    )
    .await;
    refused(
        &get(addr, "/api/v1/nodes/n-name/proxy/").await,
        400,
        "address not allowed",
    );
    assert_eq!(
        loopback.accepted.load(Ordering::SeqCst),
        0,
        "the proxy connected to the loopback"
    );

    // A node without addresses: kube's connection-info error.
    node(addr, "bare", json!([]), 10250).await;
    let answer = get(addr, "/api/v1/nodes/bare/proxy/").await;
    assert_eq!(answer.status, 500, "{}", answer.text());
    assert_eq!(
        answer.json()["message"],
        "no preferred addresses found; known addresses: []"
    );

    // A backend that does not answer: kube's 503 with Go's dial error.
    let closed = closed_port(ip).await;
    let answer = get(
        addr,
        &format!("/api/v1/namespaces/default/pods/web-0:{closed}/proxy/"),
    )
    .await;
    refused(
        &answer,
        503,
        &format!(
            "error trying to reach service: dial tcp {ip}:{closed}: connect: connection refused"
        ),
    );

    // A connection upgrade is refused, saying why.
    let answer = call(
        addr,
        "GET",
        &format!("{prefix}/ws"),
        &[("Connection", "Upgrade"), ("Upgrade", "websocket")],
        "",
    )
    .await;
    assert_eq!(answer.status, 400, "{}", answer.text());
    assert!(
        answer.json()["message"]
            .as_str()
            .unwrap_or_default()
            .contains("not relayed"),
        "{}",
        answer.text()
    );

    // Discovery lists the three subresources as kube does.
    let (_, list) = common::get_json(addr, "/api/v1").await;
    for (name, kind) in [
        ("pods/proxy", "PodProxyOptions"),
        ("services/proxy", "ServiceProxyOptions"),
        ("nodes/proxy", "NodeProxyOptions"),
    ] {
        let entry = list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .unwrap_or_else(|| panic!("{name} not in /api/v1"));
        assert_eq!(entry["kind"], kind);
        assert_eq!(
            entry["verbs"],
            json!(["create", "delete", "get", "patch", "update"])
        );
    }
    server.shutdown().await;
}

#[tokio::test]
async fn https_backends_are_spoken_to_without_verifying_their_certificate() {
    let ip = machine_address();
    // A certificate of another name, from a CA nobody trusts: kube's proxy transport does not
    // verify it (`InsecureSkipVerify`), nor does this server.
    let (port, _ca) = common::https_server_on(
        IpAddr::V4(ip),
        &["elsewhere.example"],
        |request| async move {
            let body = format!("tls {}", request.uri());
            hyper::Response::new(http_body_util::Full::new(bytes::Bytes::from(body)))
        },
    )
    .await;
    let server = server_with(ServeArgs::default()).await;
    pod(server.addr, "tls-0", port, &ip.to_string()).await;
    let answer = get(
        server.addr,
        &format!("/api/v1/namespaces/default/pods/https:tls-0:{port}/proxy/secure?s=1"),
    )
    .await;
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(answer.text(), "tls /secure?s=1");
    // Plain http to it is kube's 503, not a hang.
    let answer = get(
        server.addr,
        &format!("/api/v1/namespaces/default/pods/http:tls-0:{port}/proxy/"),
    )
    .await;
    assert_eq!(answer.status, 503, "{}", answer.text());
    assert!(
        answer.json()["message"]
            .as_str()
            .unwrap_or_default()
            .starts_with("error trying to reach service: "),
        "{}",
        answer.text()
    );
    server.shutdown().await;
}

#[tokio::test]
async fn answers_are_streamed_as_they_arrive() {
    let ip = machine_address();
    let backend = Backend::start(ip).await;
    let server = server_with(ServeArgs::default()).await;
    pod(server.addr, "web-0", backend.addr.port(), &ip.to_string()).await;
    let mut client = TcpStream::connect(server.addr).await.unwrap();
    client
        .write_all(
            b"GET /api/v1/namespaces/default/pods/web-0/proxy/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
        )
        .await
        .unwrap();
    let mut received = Vec::new();
    let mut chunk = [0u8; 4096];
    tokio::time::timeout(HANG_GUARD, async {
        while !String::from_utf8_lossy(&received).contains("first-part") {
            let n = client.read(&mut chunk).await.unwrap();
            assert!(
                n > 0,
                "closed before the first part: {}",
                String::from_utf8_lossy(&received)
            );
            received.extend_from_slice(&chunk[..n]);
        }
    })
    .await
    .expect("the first part arrives before the backend sends the rest");
    assert!(!String::from_utf8_lossy(&received).contains("second-part"));
    backend.release.notify_one();
    tokio::time::timeout(HANG_GUARD, client.read_to_end(&mut received))
        .await
        .expect("the rest arrives")
        .unwrap();
    let text = String::from_utf8_lossy(&received);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.contains("second-part"), "{text}");
    server.shutdown().await;
}

#[tokio::test]
async fn proxied_requests_are_bounded_by_their_slots() {
    let ip = machine_address();
    let backend = Backend::start(ip).await;
    let server = server_with(ServeArgs {
        proxy_requests_max: Some(1),
        ..ServeArgs::default()
    })
    .await;
    let addr = server.addr;
    pod(addr, "web-0", backend.addr.port(), &ip.to_string()).await;
    let held = tokio::spawn(async move {
        call(
            addr,
            "GET",
            "/api/v1/namespaces/default/pods/web-0/proxy/hold",
            &[],
            "",
        )
        .await
    });
    tokio::time::timeout(HANG_GUARD, async {
        while !backend.seen().iter().any(|s| s.target == "/hold") {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the held request reaches the backend");
    let answer = get(addr, "/api/v1/namespaces/default/pods/web-0/proxy/other").await;
    refused(&answer, 429, "Too many requests, please try again later.");
    assert_eq!(answer.header("retry-after"), Some("1"));
    backend.release.notify_one();
    let first = tokio::time::timeout(HANG_GUARD, held)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first.status, 200, "{}", first.text());
    // The slot is back once the answer is finished.
    let answer = get(addr, "/api/v1/namespaces/default/pods/web-0/proxy/other").await;
    assert_eq!(answer.status, 200, "{}", answer.text());
    let text = common::metrics_text(addr).await;
    assert_eq!(common::rejections(&text, "proxy_requests"), 1, "{text}");
    server.shutdown().await;
}

const TOKENS: &str = "admin-token,admin,1,\"system:masters\"
alice-token,alice,2
";

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[tokio::test]
async fn the_subresource_is_authorized_as_kube_authorizes_it() {
    let ip = machine_address();
    let backend = Backend::start(ip).await;
    let dir = tempfile::tempdir().unwrap();
    let server = server_with(ServeArgs {
        token_auth_file: Some(write(dir.path(), "tokens.csv", TOKENS)),
        authorization_mode: Some(vec!["RBAC".to_owned()]),
        ..ServeArgs::default()
    })
    .await;
    let addr = server.addr;
    let admin = [("Authorization", "Bearer admin-token")];
    let alice = [("Authorization", "Bearer alice-token")];
    let admin_create = |path: &'static str, object: Value| async move {
        let answer = call(
            addr,
            "POST",
            path,
            &[
                ("Authorization", "Bearer admin-token"),
                ("Content-Type", "application/json"),
            ],
            &object.to_string(),
        )
        .await;
        assert_eq!(answer.status, 201, "{}", answer.text());
    };
    let port = backend.addr.port();
    admin_create(
        "/api/v1/namespaces/default/pods",
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-0"},
            "spec": {"containers": [{"name": "c", "image": "nginx",
                "ports": [{"containerPort": port}]}]}}),
    )
    .await;
    let patch = json!({"status": {"podIP": ip.to_string(), "podIPs": [{"ip": ip.to_string()}]}});
    let answer = call(
        addr,
        "PATCH",
        "/api/v1/namespaces/default/pods/web-0/status",
        &[admin[0], ("Content-Type", "application/merge-patch+json")],
        &patch.to_string(),
    )
    .await;
    assert_eq!(answer.status, 200, "{}", answer.text());
    let grant = |name: &'static str, resources: Value| {
        (
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": {"name": name, "namespace": "default"},
                "rules": [{"apiGroups": [""], "resources": resources, "verbs": ["get"]}]}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": name, "namespace": "default"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
                "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice"}]}),
        )
    };
    let (role, binding) = grant("pods-reader", json!(["pods"]));
    admin_create(
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles",
        role,
    )
    .await;
    admin_create(
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
        binding,
    )
    .await;
    let path = format!("/api/v1/namespaces/default/pods/web-0:{port}/proxy/private");
    let answer = call(
        addr,
        "GET",
        "/api/v1/namespaces/default/pods/web-0",
        &alice,
        "",
    )
    .await;
    assert_eq!(answer.status, 200, "{}", answer.text());
    refused(
        &call(addr, "GET", &path, &alice, "").await,
        403,
        &format!(
            "pods \"web-0:{port}\" is forbidden: User \"alice\" cannot get resource \"pods/proxy\" in API group \"\" in the namespace \"default\""
        ),
    );
    // A POST is `create`.
    refused(
        &call(addr, "POST", &path, &alice, "x").await,
        403,
        &format!(
            "pods \"web-0:{port}\" is forbidden: User \"alice\" cannot create resource \"pods/proxy\" in API group \"\" in the namespace \"default\""
        ),
    );
    assert!(
        backend.seen().is_empty(),
        "a refused request reached the backend"
    );
    let (role, binding) = grant("pods-proxy", json!(["pods/proxy"]));
    admin_create(
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles",
        role,
    )
    .await;
    admin_create(
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
        binding,
    )
    .await;
    let answer = call(addr, "GET", &path, &alice, "").await;
    assert_eq!(answer.status, 200, "{}", answer.text());
    // HEAD is `get` too.
    let answer = call(addr, "HEAD", &path, &alice, "").await;
    assert_eq!(answer.status, 200);
    // The caller's credentials stay with this server.
    for seen in backend.seen() {
        assert_eq!(seen.header("authorization"), None, "{seen:?}");
    }
    server.shutdown().await;
}

#[tokio::test]
async fn caching_proxy_mode_forwards_to_the_upstream() {
    let ip = machine_address();
    let backend = Backend::start(ip).await;
    let upstream = server_with(ServeArgs::default()).await;
    let port = backend.addr.port();
    pod(upstream.addr, "web-0", port, &ip.to_string()).await;
    let config = ServeConfig::from_args(ServeArgs {
        listen: Some("127.0.0.1:0".parse().unwrap()),
        upstream: Some(format!("http://{}", upstream.addr)),
        ..ServeArgs::default()
    })
    .unwrap();
    let proxy = watchkeeper::start(config).await.expect("the proxy starts");
    tokio::time::timeout(HANG_GUARD, proxy.ready())
        .await
        .expect("proxy ready");
    let prefix = format!("/api/v1/namespaces/default/pods/web-0:{port}/proxy");
    let answer = call(
        proxy.addr,
        "POST",
        &format!("{prefix}/through?z=3"),
        &[("Content-Type", "application/octet-stream")],
        "raw bytes",
    )
    .await;
    assert_eq!(answer.status, 201, "{}", answer.text());
    let seen = backend.last();
    assert_eq!(
        (seen.method.as_str(), seen.target.as_str()),
        ("POST", "/through?z=3")
    );
    assert_eq!(seen.body, "raw bytes");
    // The upstream's refusals come back as they are.
    refused(
        &get(proxy.addr, "/api/v1/namespaces/default/pods/missing/proxy/").await,
        404,
        "pods \"missing\" not found",
    );
    // The upstream's redirects too (it rewrote them).
    let answer = get(proxy.addr, &format!("{prefix}/redirect")).await;
    assert_eq!(
        answer.header("location"),
        Some(&*format!("{prefix}/landing"))
    );
    let answer = call(
        proxy.addr,
        "GET",
        &format!("{prefix}/ws"),
        &[("Connection", "Upgrade"), ("Upgrade", "websocket")],
        "",
    )
    .await;
    assert_eq!(answer.status, 400, "{}", answer.text());
    proxy.shutdown().await;
    upstream.shutdown().await;
}

#[tokio::test]
async fn kubectl_reads_a_service_through_its_proxy() {
    let ip = machine_address();
    let backend = Backend::start(ip).await;
    let server = server_with(ServeArgs::default()).await;
    let ip_text = ip.to_string();
    pod(server.addr, "web-0", backend.addr.port(), &ip_text).await;
    service(server.addr, "web", &ip_text, backend.addr.port(), "web-0").await;
    let kubectl = kubectl_support::Kubectl::new(server.addr);
    let out = kubectl
        .ok(&[
            "get",
            "--raw",
            "/api/v1/namespaces/default/services/web:80/proxy/",
        ])
        .await;
    let echo: Value = serde_json::from_str(&out).unwrap_or_else(|_| panic!("{out}"));
    // kubectl adds its `timeout` to the query, which is passed on as it came.
    let target = echo["target"].as_str().unwrap_or_default();
    assert_eq!(target.split('?').next(), Some("/"), "{echo}");
    assert_eq!(echo["method"], "GET");
    // `kubectl api-resources` lists none of the proxies (they are subresources), but
    // `kubectl auth can-i` knows them.
    let can = kubectl
        .run(&["auth", "can-i", "get", "pods", "--subresource=proxy"])
        .await;
    assert!(can.success(), "{can:?}");
    server.shutdown().await;
}

#[test]
fn machine_address_is_not_loopback() {
    let ip = machine_address();
    assert!(!IpAddr::V4(ip).is_loopback());
}

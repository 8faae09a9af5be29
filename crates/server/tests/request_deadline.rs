//! A client must not hold the server's request slots with answers it never reads: every
//! request that is not long-running has a deadline (`--request-timeout`, kube's 504 before
//! the answer began; after, its HTTP/2 stream is reset or its HTTP/1.1 connection closed),
//! one user (an anonymous one: one client address) has a share of the in-flight slots
//! (`--max-requests-inflight-per-user`), and anonymous watches are counted per address.
//! Every wait here waits on an event (an answer, a reset, a close, a count), bounded by the
//! hang guard.

use crate::common;

use std::net::SocketAddr;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use watchkeeper::config::ServeArgs;
use watchkeeper::limits::Limit;
use watchkeeper_testkit::raw::{self, Answer};

use common::{HANG_GUARD, assert_status, configmap, request, server_with, until, until_closed};

const CM: &str = "/api/v1/namespaces/default/configmaps";

/// A connection to `addr` from the loopback address `from` (127.0.0.1, 127.0.0.2, ...: other
/// client addresses on one machine).
async fn connect_from(from: &str, addr: SocketAddr, recv_buffer: Option<u32>) -> TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    if let Some(size) = recv_buffer {
        socket.set_recv_buffer_size(size).unwrap();
    }
    socket.bind(format!("{from}:0").parse().unwrap()).unwrap();
    socket.connect(addr).await.unwrap()
}

/// `GET path` from the address `from` with `Connection: close`; the answer.
async fn get_from(from: &str, addr: SocketAddr, path: &str) -> Answer {
    let mut stream = connect_from(from, addr, None).await;
    stream
        .write_all(
            format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .await
        .unwrap();
    tokio::time::timeout(HANG_GUARD, raw::read_answer(&mut stream))
        .await
        .expect("an answer")
}

/// Refusals for `limit`, read from the client address `from` (each address has its own share).
async fn rejections(from: &str, addr: SocketAddr, limit: Limit) -> u64 {
    let text = get_from(from, addr, "/metrics").await.body;
    common::rejections(&text, limit.as_str())
}

/// Whether the answer to a create of the set-up says the object is stored: these servers have
/// short deadlines, which a create can outlive on a busy machine, so a 504 is sent again (up to
/// 20 times) until the object is there (201, or 409 when the create that timed out had been
/// stored).
fn stored(status: u16, attempt: usize, text: &str) -> bool {
    match status {
        201 | 409 => true,
        504 if attempt < 20 => false,
        _ => panic!("{status} at attempt {attempt}: {text}"),
    }
}

/// Whether `answer` is its deadline's, on a server whose deadline is short enough for a busy
/// machine to miss with a cheap request: kube's 504, or no answer (status 0: the connection
/// closed because the answer began past the deadline). Up to 20 in a row are sent again; the
/// 20th fails the test.
fn past_deadline(answer: &Answer, attempt: usize) -> bool {
    let timed_out = answer.status == 0 || answer.status == 504;
    assert!(
        !timed_out || attempt < 20,
        "{} at attempt {attempt}: {}",
        answer.status,
        answer.body
    );
    timed_out
}

/// `count` ConfigMaps of `payload` bytes each in `default` (a LIST of them is a large answer).
async fn fill(addr: SocketAddr, count: usize, payload: usize) {
    for index in 0..count {
        let body = configmap(&format!("big-{index}"), payload).to_string();
        for attempt in 1.. {
            let (status, text) = request(addr, "POST", CM, "application/json", &body).await;
            if stored(status, attempt, &text) {
                break;
            }
        }
    }
}

/// An HTTP/2 connection (prior knowledge) from `from` that never gives its streams a
/// flow-control window, so no answer's body can be sent to it.
async fn zero_window_client(from: &str, addr: SocketAddr) -> h2::client::SendRequest<bytes::Bytes> {
    let tcp = connect_from(from, addr, None).await;
    let (client, connection) = h2::client::Builder::new()
        .initial_window_size(0)
        .handshake::<_, bytes::Bytes>(tcp)
        .await
        .unwrap();
    tokio::spawn(connection);
    client
}

/// Sends `GET path` on `client`; the response head.
async fn h2_get(
    client: &h2::client::SendRequest<bytes::Bytes>,
    path: &str,
) -> axum::http::Response<h2::RecvStream> {
    let mut ready = client.clone().ready().await.unwrap();
    let (response, _) = ready
        .send_request(
            axum::http::Request::get(format!("http://127.0.0.1{path}"))
                .body(())
                .unwrap(),
            true,
        )
        .unwrap();
    tokio::time::timeout(HANG_GUARD, response)
        .await
        .expect("a head")
        .unwrap()
}

/// Goal: a LIST answer on an HTTP/2 stream that never gets a flow-control window holds its
/// slot only until its deadline: then the stream is reset, the slot is free and another
/// client is served. (Before: the slot was held for as long as the client kept the stream.)
/// The deadline is the LISTs' own `?timeout=` (as kubectl's `--request-timeout` sends it):
/// under the server's default every other request here (the set-up, the checks, `/metrics`)
/// is answered however busy the machine, so the 504s counted are those two. Three seconds
/// are room enough to see both slots held before the first reset (not one: from the first
/// LIST to the refused read, a loaded machine can stall the test that long).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http2_answer_nobody_reads_is_reset_at_its_deadline() {
    let server = server_with(ServeArgs {
        max_requests_inflight: Some(2),
        // Two read-only slots in all, refused past them: kube's max-in-flight filter (API
        // Priority and Fairness would give the anonymous user's `global-default` level
        // ceil(2 × 20 / 245) = 1 seat, and queue past it).
        max_mutating_requests_inflight: Some(0),
        enable_priority_and_fairness: Some(false),
        max_requests_inflight_per_user: Some(0),
        ..ServeArgs::default()
    })
    .await;
    let addr = server.addr;
    let limits = server.app.limits.clone();
    fill(addr, 8, 64 * 1024).await;
    let client = zero_window_client("127.0.0.1", addr).await;
    let mut bodies = Vec::new();
    for _ in 0..2 {
        let response = h2_get(&client, &format!("{CM}?timeout=3s")).await;
        assert_eq!(response.status(), 200);
        bodies.push(response.into_body());
    }
    // Both slots are held by the unsent answers: every other read is refused.
    assert_eq!(limits.inflight(false), 2);
    assert_eq!(get_from("127.0.0.2", addr, CM).await.status, 429);
    // At the deadline each stream is reset (no byte of its body could be sent).
    for mut body in bodies {
        let error = tokio::time::timeout(HANG_GUARD, body.data())
            .await
            .expect("the stream ends")
            .expect("a frame or an error")
            .expect_err("a reset, not data");
        // INTERNAL_ERROR, as Go's server resets an aborted handler's stream.
        assert_eq!(error.reason(), Some(h2::Reason::INTERNAL_ERROR), "{error}");
    }
    until(|| limits.inflight(false) == 0).await;
    let listed = get_from("127.0.0.2", addr, "/api/v1/namespaces").await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    assert_eq!(
        rejections("127.0.0.2", addr, Limit::RequestTimeout).await,
        2
    );
    // The connection itself is still served.
    assert_eq!(h2_get(&client, "/healthz").await.status(), 200);
    server.shutdown().await;
}

/// Goal: over HTTP/1.1 the same deadline cuts off a LIST answer whose client stopped reading,
/// long before the write timeout (an hour here): the connection is closed and the slot freed.
/// The deadline is the LIST's own `?timeout=`: the 1 MB writes that fill the store take
/// longer than 300 ms in a debug build, and are held to their deadline too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http1_answer_nobody_reads_is_cut_off_at_its_deadline() {
    let server = server_with(ServeArgs {
        write_timeout_ms: Some(3_600_000),
        max_requests_inflight: Some(1),
        max_requests_inflight_per_user: Some(0),
        ..ServeArgs::default()
    })
    .await;
    let addr = server.addr;
    let limits = server.app.limits.clone();
    // 8 MB: larger than the socket buffers and hyper's buffer.
    fill(addr, 32, 256 * 1024).await;
    let mut stalled = connect_from("127.0.0.1", addr, Some(4096)).await;
    stalled
        .write_all(format!("GET {CM}?timeout=300ms HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let head = tokio::time::timeout(HANG_GUARD, raw::read_head(&mut stalled))
        .await
        .expect("a head")
        .unwrap();
    assert_eq!(raw::status_of(&head), 200, "{head}");
    until(|| limits.inflight(false) == 0).await;
    // Closed by the server: reading the rest ends (EOF or reset) short of the whole answer.
    let received = until_closed(&mut stalled).await;
    assert!(received < 8 * 1024 * 1024, "{received}");
    let listed = get_from("127.0.0.1", addr, "/api/v1/namespaces").await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    assert_eq!(
        rejections("127.0.0.1", addr, Limit::RequestTimeout).await,
        1
    );
    assert_eq!(rejections("127.0.0.1", addr, Limit::WriteTimeout).await, 0);
    server.shutdown().await;
}

/// Goal: a request not answered by its deadline gets kube-apiserver's 504 (its timeout
/// filter's Status, `details` without `retryAfterSeconds`, no `Retry-After`), even while its
/// body's own bound (an hour here) has not passed; a watch, long-running, outlives the
/// deadline. What follows the 504 is not under the 300 ms deadline (on a busy machine a
/// create or a `/metrics` read can outlive it, and be answered 504 or cut off too): the
/// write the watch must deliver goes to the store, as another server would write it, and the
/// count is read from the limits themselves (what `/metrics` serves).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_not_answered_by_its_deadline_gets_kubes_504() {
    let server = server_with(ServeArgs {
        request_timeout: Some("300ms".to_owned()),
        request_read_timeout_seconds: Some(3600),
        ..ServeArgs::default()
    })
    .await;
    let addr = server.addr;
    let limits = server.app.limits.clone();
    let mut watch = common::WatchReader::open(addr, &format!("{CM}?watch=true"), None).await;
    // A body that never arrives whole.
    let mut slow = connect_from("127.0.0.1", addr, None).await;
    slow.write_all(
        format!("POST {CM} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{").as_bytes(),
    )
    .await
    .unwrap();
    let answer = tokio::time::timeout(HANG_GUARD, raw::read_answer(&mut slow))
        .await
        .expect("an answer");
    assert_status(&answer, 504, "Timeout");
    let status = answer.json();
    assert_eq!(
        status["message"],
        "Timeout: request did not complete within the allotted timeout"
    );
    assert_eq!(status["details"], serde_json::json!({}), "{}", answer.body);
    assert!(
        !answer.head.to_ascii_lowercase().contains("retry-after"),
        "{}",
        answer.head
    );
    until(|| limits.inflight(true) == 0).await;
    // The watch, open since before that request, still delivers.
    let mut after = configmap("after", 10);
    after["metadata"]["namespace"] = "default".into();
    watchkeeper_store::Store::put(
        server.store().expect("a store"),
        "/registry/configmaps/default/after",
        after.to_string(),
    )
    .await
    .expect("stored");
    let event = tokio::time::timeout(HANG_GUARD, watch.next())
        .await
        .expect("an event")
        .expect("the watch is open");
    assert_eq!(event["type"], "ADDED", "{event}");
    assert_eq!(event["object"]["metadata"]["name"], "after", "{event}");
    assert_eq!(limits.rejections(Limit::RequestTimeout), 1);
    server.shutdown().await;
}

/// Goal: one client cannot take every in-flight slot: past its share it gets kube's 429 with
/// `Retry-After`, while a client at another address is served. (Before: one client held all
/// of them and every other client got 429.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_client_cannot_take_every_slot() {
    let server = server_with(ServeArgs {
        max_requests_inflight: Some(4),
        max_requests_inflight_per_user: Some(2),
        ..ServeArgs::default()
    })
    .await;
    let addr = server.addr;
    let limits = server.app.limits.clone();
    fill(addr, 8, 64 * 1024).await;
    let client = zero_window_client("127.0.0.1", addr).await;
    let mut held = Vec::new();
    for _ in 0..2 {
        let response = h2_get(&client, CM).await;
        assert_eq!(response.status(), 200);
        held.push(response);
    }
    assert_eq!(limits.inflight(false), 2);
    let anonymous_here = watchkeeper::limits::Flow::Anonymous("127.0.0.1".parse().unwrap());
    assert_eq!(limits.inflight_of(&anonymous_here), 2);
    // The same client (any connection from its address) is at its share.
    let refused = get_from("127.0.0.1", addr, CM).await;
    assert_status(&refused, 429, "TooManyRequests");
    assert_eq!(
        refused.json()["message"],
        "Too many requests, please try again later."
    );
    assert_eq!(refused.json()["details"]["retryAfterSeconds"], 1);
    assert!(
        refused.head.to_ascii_lowercase().contains("retry-after: 1"),
        "{}",
        refused.head
    );
    // Another client is served, and its slot is its own.
    let listed = get_from("127.0.0.2", addr, CM).await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    assert_eq!(
        rejections("127.0.0.2", addr, Limit::RequestsInflightPerUser).await,
        1
    );
    assert_eq!(rejections("127.0.0.2", addr, Limit::Inflight).await, 0);
    // When the first client lets go, its share is free again.
    drop(held);
    drop(client);
    until(|| limits.inflight_of(&anonymous_here) == 0).await;
    let listed = get_from("127.0.0.1", addr, "/api/v1/namespaces").await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    server.shutdown().await;
}

/// Goal: unauthenticated clients do not share one user's watch cap: each address has its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anonymous_watches_are_counted_per_client_address() {
    let server = server_with(ServeArgs {
        max_watches_per_user: Some(1),
        ..ServeArgs::default()
    })
    .await;
    let addr = server.addr;
    let open = |from: &'static str| async move {
        let mut stream = connect_from(from, addr, None).await;
        stream
            .write_all(
                format!("GET {CM}?watch=true HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").as_bytes(),
            )
            .await
            .unwrap();
        let head = tokio::time::timeout(HANG_GUARD, raw::read_head(&mut stream))
            .await
            .expect("a head")
            .unwrap();
        (stream, raw::status_of(&head))
    };
    let (_first, status) = open("127.0.0.1").await;
    assert_eq!(status, 200);
    let refused = get_from("127.0.0.1", addr, &format!("{CM}?watch=true")).await;
    assert_status(&refused, 429, "TooManyRequests");
    assert!(
        refused
            .body
            .contains("user \\\"system:anonymous\\\" at 127.0.0.1 already has 1 watches open"),
        "{}",
        refused.body
    );
    let (_second, status) = open("127.0.0.2").await;
    assert_eq!(status, 200);
    server.shutdown().await;
}

/// Labels of each of [`labelled_objects`]' ConfigMaps, each a key [`expensive_selector`]
/// names.
const LABELS: usize = 1000;

/// `count` small ConfigMaps of [`LABELS`] labels each, created over one keep-alive
/// connection.
async fn labelled_objects(addr: SocketAddr, count: usize) {
    let mut stream = connect_from("127.0.0.1", addr, None).await;
    let labels: serde_json::Map<String, serde_json::Value> = (0..LABELS)
        .map(|n| (format!("k{n:04}"), serde_json::Value::from("v")))
        .collect();
    for index in 0..count {
        let mut body = configmap(&format!("small-{index}"), 8);
        body["metadata"]["labels"] = serde_json::Value::Object(labels.clone());
        let body = body.to_string();
        for attempt in 1.. {
            stream
                .write_all(
                    format!(
                        "POST {CM} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                        body.len()
                    )
                    .as_bytes(),
                )
                .await
                .unwrap();
            let created = tokio::time::timeout(HANG_GUARD, raw::read_answer(&mut stream))
                .await
                .expect("an answer");
            if stored(created.status, attempt, &created.body) {
                break;
            }
        }
    }
    drop(stream);
}

/// A label selector of a requirement on each of the [`LABELS`] labels every object has:
/// matching costs the labels the object and the selector share (`core::selector`: the
/// selector's length alone no longer does), each a binary search among the selector's keys,
/// about 20 million string comparisons over 1,000 objects — seconds in a debug build, far past
/// a 100 ms deadline however fast the machine.
fn expensive_selector() -> String {
    let selector: Vec<String> = (0..LABELS).map(|n| format!("k{n:04}!%3Dx")).collect();
    selector.join(",")
}

/// Goal: a LIST whose selection is expensive (a selector of a thousand labels over a thousand
/// objects of those labels) does not hold a runtime worker: it runs on the blocking pool, so its request's
/// deadline still answers 504 while it runs. (Before: the selection ran to its end on the
/// worker, the deadline could not fire during it, and the answer was a late 200.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expensive_list_selection_leaves_the_runtime_worker() {
    let server = server_with(ServeArgs {
        request_timeout: Some("100ms".to_owned()),
        ..ServeArgs::default()
    })
    .await;
    let addr = server.addr;
    labelled_objects(addr, 1000).await;
    let path = format!("{CM}?labelSelector={}", expensive_selector());
    let answer = get_from("127.0.0.1", addr, &path).await;
    assert_status(&answer, 504, "Timeout");
    // Without a selector a page of the same LIST is cheap and answered (sent again while a
    // machine too busy to answer anything within 100 ms ends it at the deadline).
    for attempt in 1.. {
        let listed = get_from("127.0.0.1", addr, &format!("{CM}?limit=10")).await;
        if !past_deadline(&listed, attempt) {
            assert_eq!(listed.status, 200, "{}", listed.body);
            break;
        }
    }
    server.shutdown().await;
}

/// Goal: a request's own `?timeout=` (kube's `WithRequestDeadline`, what kubectl's
/// `--request-timeout` sends) shortens its deadline below `--request-timeout`: the same
/// expensive LIST with `timeout=100ms` gets kube's 504 under the default 60 s; a `timeout`
/// that is not a Go duration is kube's 400; `0s` leaves the server's deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_s_own_timeout_shortens_its_deadline() {
    let server = server_with(ServeArgs::default()).await;
    let addr = server.addr;
    labelled_objects(addr, 1000).await;
    let path = format!("{CM}?timeout=100ms&labelSelector={}", expensive_selector());
    let answer = get_from("127.0.0.1", addr, &path).await;
    assert_status(&answer, 504, "Timeout");
    let bad = get_from("127.0.0.1", addr, &format!("{CM}?limit=1&timeout=abc")).await;
    assert_status(&bad, 400, "BadRequest");
    assert_eq!(
        bad.json()["message"],
        "invalid timeout specified in the request URL - time: invalid duration \"abc\""
    );
    let unit = get_from("127.0.0.1", addr, &format!("{CM}?limit=1&timeout=5")).await;
    assert_eq!(
        unit.json()["message"],
        "invalid timeout specified in the request URL - time: missing unit in duration \"5\""
    );
    let listed = get_from("127.0.0.1", addr, &format!("{CM}?limit=1&timeout=0s")).await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    server.shutdown().await;
}

/// `method path` with a `content_type` `body` on a new connection; the answer.
async fn send_body(
    addr: SocketAddr,
    method: &str,
    path: &str,
    content_type: &str,
    body: impl AsRef<[u8]>,
) -> Answer {
    let body = body.as_ref();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let mut stream = raw::send(addr, &head, body).await.unwrap();
    tokio::time::timeout(HANG_GUARD, raw::read_answer(&mut stream))
        .await
        .expect("an answer")
}

/// The value of the sample `name` (with its labels) in `/metrics`.
/// Goal: a write with a large body (`--heavy-request-body-bytes`) is handled on the blocking
/// pool, not on the runtime worker: with one worker, while it is held at a phase boundary (its
/// thread blocked, as by a long decode or patch), other clients' reads and small writes are
/// answered; its `?timeout=` answers kube's 504 while it is still held; past
/// `--max-heavy-requests` another one waits (and gets its 504 waiting, never running); once
/// released, the stopped write goes no further and the store holds nothing of it. Unheld,
/// heavy creates (JSON, YAML, protobuf) and strategic merge patches are answered as usual. (Before: the
/// whole write ran on the worker, every other connection waited for it, and its 504 came
/// after it had finished, or not at all: a 200 after the deadline.)
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_heavy_write_leaves_the_runtime_worker_and_stops_past_its_deadline() {
    let server = server_with(ServeArgs {
        heavy_request_body_bytes: Some(4096),
        max_heavy_requests: Some(1),
        ..ServeArgs::default()
    })
    .await;
    let addr = server.addr;
    let offload = &server.app.offload;
    let big = configmap("big", 8192).to_string();
    let hold = offload.hold_at_boundaries();
    let held = tokio::spawn({
        let big = big.clone();
        async move {
            send_body(
                addr,
                "POST",
                &format!("{CM}?timeout=500ms"),
                "application/json",
                &big,
            )
            .await
        }
    });
    until(|| offload.held() == 1).await;
    // The worker is free: a read and a small write are answered.
    let listed = get_from("127.0.0.1", addr, &format!("{CM}?limit=1")).await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    let small = send_body(
        addr,
        "POST",
        CM,
        "application/json",
        &configmap("small", 8).to_string(),
    )
    .await;
    assert_eq!(small.status, 201, "{}", small.body);
    // Past the bound, a second heavy write waits for the slot, and its deadline answers.
    let second = send_body(
        addr,
        "POST",
        &format!("{CM}?timeout=300ms"),
        "application/json",
        &configmap("second", 8192).to_string(),
    )
    .await;
    assert_status(&second, 504, "Timeout");
    assert_eq!(offload.running_and_waiting(), (1, 0));
    // The held write's deadline answered while it is still held.
    let answer = tokio::time::timeout(HANG_GUARD, held)
        .await
        .expect("an answer")
        .unwrap();
    assert_status(&answer, 504, "Timeout");
    assert_eq!(
        answer.json()["message"],
        "Timeout: request did not complete within the allotted timeout"
    );
    assert_eq!(offload.held(), 1, "still held when its 504 was sent");
    drop(hold);
    until(|| offload.outcomes() == (0, 1)).await;
    assert_eq!(offload.running_and_waiting(), (0, 0));
    assert_eq!(
        common::stored_keys(&server, "/registry/configmaps/default/").await,
        1,
        "only the small write is stored"
    );
    let gone = get_from("127.0.0.1", addr, &format!("{CM}/big")).await;
    assert_status(&gone, 404, "NotFound");
    // Unheld, heavy writes are answered as any other.
    let created = send_body(addr, "POST", CM, "application/json", &big).await;
    assert_eq!(created.status, 201, "{}", created.body);
    let yaml = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-yaml\ndata:\n  payload: {}\n",
        "y".repeat(8192)
    );
    let created = send_body(addr, "POST", CM, "application/yaml", &yaml).await;
    assert_eq!(created.status, 201, "{}", created.body);
    let message =
        watchkeeper_api::protobuf::encode_object_message(&configmap("from-protobuf", 8192))
            .unwrap();
    let protobuf = watchkeeper_api::protobuf::envelope("v1", "ConfigMap", &message);
    assert!(protobuf.len() > 4096);
    let created = send_body(
        addr,
        "POST",
        CM,
        "application/vnd.kubernetes.protobuf",
        &protobuf,
    )
    .await;
    assert_eq!(created.status, 201, "{}", created.body);
    let patch = serde_json::json!({"data": {"patched": "z".repeat(8192)}}).to_string();
    let patched = send_body(
        addr,
        "PATCH",
        &format!("{CM}/small"),
        "application/strategic-merge-patch+json",
        &patch,
    )
    .await;
    assert_eq!(patched.status, 200, "{}", patched.body);
    assert_eq!(
        patched.json()["data"]["patched"].as_str().map(str::len),
        Some(8192)
    );
    assert_eq!(offload.outcomes(), (4, 1));
    assert_eq!(
        common::metric(
            addr,
            "watchkeeper_heavy_requests_total{outcome=\"answered\"}"
        )
        .await,
        4
    );
    assert_eq!(
        common::metric(
            addr,
            "watchkeeper_heavy_requests_total{outcome=\"stopped\"}"
        )
        .await,
        1
    );
    server.shutdown().await;
}

/// Goal: a LIST answered as a `Table` or in YAML whose objects are large
/// (`--heavy-request-body-bytes`) is converted on the blocking pool: with one runtime worker,
/// while both conversions are held at their boundary, another client is answered; released,
/// both answers are whole. (Before: 3,000 objects of 1 KiB took a worker 0.4 s as a Table and
/// 0.6-1.1 s in YAML, debug build.)
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_long_list_s_table_or_yaml_leaves_the_runtime_worker() {
    let server = server_with(ServeArgs {
        heavy_request_body_bytes: Some(4096),
        max_heavy_requests: Some(2),
        ..ServeArgs::default()
    })
    .await;
    let addr = server.addr;
    let offload = &server.app.offload;
    for name in ["a", "b", "c"] {
        let created = send_body(
            addr,
            "POST",
            CM,
            "application/json",
            &configmap(name, 2048).to_string(),
        )
        .await;
        assert_eq!(created.status, 201, "{}", created.body);
    }
    let hold = offload.hold_at_boundaries();
    let list_as = |accept: &'static str| {
        tokio::spawn(async move {
            let mut stream = raw::send(
                addr,
                &format!("GET {CM} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: {accept}\r\nConnection: close\r\n\r\n"),
                b"",
            )
            .await
            .unwrap();
            raw::read_answer(&mut stream).await
        })
    };
    let table = list_as("application/json;as=Table;v=v1;g=meta.k8s.io");
    let yaml = list_as("application/yaml");
    until(|| offload.held() == 2).await;
    let got = get_from("127.0.0.1", addr, &format!("{CM}/a")).await;
    assert_eq!(got.status, 200, "{}", got.body);
    drop(hold);
    let table = tokio::time::timeout(HANG_GUARD, table)
        .await
        .expect("an answer")
        .unwrap();
    assert_eq!(table.status, 200, "{}", table.body);
    assert_eq!(table.json()["kind"], "Table", "{}", table.body);
    assert_eq!(table.json()["rows"].as_array().map(Vec::len), Some(3));
    let yaml = tokio::time::timeout(HANG_GUARD, yaml)
        .await
        .expect("an answer")
        .unwrap();
    assert_eq!(yaml.status, 200, "{}", yaml.body);
    assert!(yaml.body.contains("kind: ConfigMapList"), "{}", yaml.body);
    assert_eq!(yaml.body.matches("  name: ").count(), 3, "{}", yaml.body);
    assert_eq!(offload.outcomes(), (2, 0));
    server.shutdown().await;
}

/// Goal: a small patch of a large object (a write whose body does not announce its cost) runs
/// its heavy phase with the runtime worker's other tasks handed to another thread: with one
/// worker, while the patch is held in that phase, another client is answered; released, the
/// patch is answered and counted `in_place`, and so is the reflector's decode of the large
/// stored values. A small patch of a small object is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_small_patch_of_a_large_object_hands_the_runtime_worker_on() {
    let server = server_with(ServeArgs {
        heavy_request_body_bytes: Some(4096),
        ..ServeArgs::default()
    })
    .await;
    let addr = server.addr;
    let offload = &server.app.offload;
    for (name, payload) in [("large", 8192), ("tiny", 8)] {
        let created = send_body(
            addr,
            "POST",
            CM,
            "application/json",
            configmap(name, payload).to_string(),
        )
        .await;
        assert_eq!(created.status, 201, "{}", created.body);
    }
    let patch = r#"{"data":{"patched":"yes"}}"#;
    let tiny = send_body(
        addr,
        "PATCH",
        &format!("{CM}/tiny"),
        "application/merge-patch+json",
        patch,
    )
    .await;
    assert_eq!(tiny.status, 200, "{}", tiny.body);
    // The reflector's decode of the large create, none of the small object.
    assert_eq!(offload.in_place_phases(), 1);
    let hold = offload.hold_at_boundaries();
    let patched = tokio::spawn(async move {
        send_body(
            addr,
            "PATCH",
            &format!("{CM}/large"),
            "application/merge-patch+json",
            patch,
        )
        .await
    });
    until(|| offload.held() == 1).await;
    let got = get_from("127.0.0.1", addr, &format!("{CM}/tiny")).await;
    assert_eq!(got.status, 200, "{}", got.body);
    drop(hold);
    let patched = tokio::time::timeout(HANG_GUARD, patched)
        .await
        .expect("an answer")
        .unwrap();
    assert_eq!(patched.status, 200, "{}", patched.body);
    assert_eq!(patched.json()["data"]["patched"], "yes", "{}", patched.body);
    // The attempt, the storage encoding, the reflector's decode (before the write's answer:
    // it waits for its revision in the cache) and the answer, whose JSON is the stored
    // encoding with its resource version put in (no serialization of its own).
    assert_eq!(offload.in_place_phases(), 4);
    server.shutdown().await;
}

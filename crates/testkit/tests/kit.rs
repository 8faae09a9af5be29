//! The kit against a scripted peer (exact bytes, split anywhere) and against a real server.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use watchkeeper::config::ServeArgs;
use watchkeeper_testkit::{Conn, RawWatch, configmap, loopback, request, start_server};

/// A hang guard: a test that exceeds it is broken, not slow.
const HANG_GUARD: Duration = Duration::from_secs(60);

/// Accepts one connection, reads the request head and answers with `parts`, each written and
/// flushed on its own (the client may read them in any grouping and must not care).
async fn scripted(parts: Vec<&'static [u8]>) -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            socket.read_exact(&mut byte).await.unwrap();
            head.push(byte[0]);
        }
        for part in parts {
            socket.write_all(part).await.unwrap();
            socket.flush().await.unwrap();
        }
    });
    addr
}

#[tokio::test]
async fn raw_watch_yields_whole_lines_across_chunks_and_ends_at_the_terminal_chunk() {
    let addr = scripted(vec![
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n8\r\n{\"a\":",
        b"1}\n\r\n",
        b"3\r\n\n\n{\r\n5\r\n\"b\":2\r\n2\r\n}\n\r\n0\r\n\r\n",
    ])
    .await;
    let mut watch = tokio::time::timeout(HANG_GUARD, RawWatch::open(addr, "/w", None, &[]))
        .await
        .unwrap()
        .unwrap();
    assert!(watch.head.contains("Transfer-Encoding: chunked"));
    let first = watch.next_json().await.unwrap().unwrap();
    assert_eq!(first["a"], 1);
    let second = watch.next_json().await.unwrap().unwrap();
    assert_eq!(second["b"], 2);
    assert_eq!(watch.next_json().await.unwrap(), None);
    assert!(watch.ended);
}

#[tokio::test]
async fn raw_watch_refuses_an_answer_other_than_200() {
    let addr = scripted(vec![b"HTTP/1.1 410 Gone\r\nContent-Length: 0\r\n\r\n"]).await;
    let error = RawWatch::open(addr, "/w", None, &[]).await.unwrap_err();
    assert_eq!(error.to_string(), "watch answered HTTP/1.1 410 Gone");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_and_a_raw_watch_against_a_server() {
    let server = start_server(loopback(ServeArgs::default())).await.unwrap();
    let path = "/api/v1/namespaces/default/configmaps";
    let created = request(
        server.addr,
        "POST",
        path,
        &[("Content-Type", "application/json")],
        configmap("one", 4).to_string().as_bytes(),
    )
    .await
    .unwrap();
    assert_eq!(created.status, 201, "{}", created.text());
    let rv = created.json()["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(created.header("content-type"), Some("application/json"));

    let mut watch = RawWatch::open(
        server.addr,
        &format!("{path}?watch=true&resourceVersion={rv}"),
        Some(4096),
        &[("User-Agent", "testkit")],
    )
    .await
    .unwrap();
    // Keep-alive: two requests on one connection.
    let mut conn = Conn::connect(server.addr).await.unwrap();
    let (status, body) = conn
        .request(
            "POST",
            path,
            "application/json",
            configmap("two", 4).to_string().as_bytes(),
        )
        .await
        .unwrap();
    assert_eq!(status, 201, "{}", String::from_utf8_lossy(&body));
    let (status, body) = conn.request("GET", path, "", b"").await.unwrap();
    assert_eq!(status, 200);
    let list: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(list["items"].as_array().unwrap().len(), 2);

    let event = tokio::time::timeout(HANG_GUARD, watch.next_json())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(event["type"], "ADDED");
    assert_eq!(event["object"]["metadata"]["name"], "two");
    server.shutdown().await;
}

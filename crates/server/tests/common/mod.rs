//! Test helpers: an in-process server and a minimal HTTP/1.1 client over raw TCP (so a test
//! can stop reading a watch stream, which no client library lets you do).
#![allow(dead_code, unreachable_pub)]

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use watchkeeper::Server;
use watchkeeper::config::{ServeArgs, ServeConfig};

/// A hang guard for awaits that wait on events: a test that exceeds it is broken, not slow.
pub const HANG_GUARD: Duration = Duration::from_secs(60);

pub async fn server_with(args: ServeArgs) -> Server {
    let args = ServeArgs {
        listen: Some("127.0.0.1:0".parse().unwrap()),
        store: args.store.or(Some("memory".to_owned())),
        ..args
    };
    let server = watchkeeper::start(ServeConfig::from_args(args).unwrap())
        .await
        .unwrap();
    tokio::time::timeout(HANG_GUARD, server.ready())
        .await
        .expect("server ready");
    server
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

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if size == 0 {
            break;
        }
        out.push_str(&rest[..size]);
        body = &rest[size + 2..];
    }
    out
}

pub async fn get_json(addr: SocketAddr, path: &str) -> (u16, Value) {
    let (status, body) = request(addr, "GET", path, "application/json", "").await;
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

pub async fn send_json(addr: SocketAddr, method: &str, path: &str, body: &Value) -> (u16, Value) {
    let (status, body) = request(addr, method, path, "application/json", &body.to_string()).await;
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

/// A watch stream read line by line from a raw socket.
pub struct WatchReader {
    reader: BufReader<TcpStream>,
    pending: String,
    pub ended: bool,
    /// The client's end of the connection (what the server sees as the peer).
    pub local_addr: SocketAddr,
}

impl WatchReader {
    /// Opens a watch; `recv_buffer` shrinks the socket's receive buffer so back-pressure
    /// reaches the server quickly.
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
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        if let Some(size) = recv_buffer {
            socket.set_recv_buffer_size(size).unwrap();
        }
        let mut stream = socket.connect(addr).await.unwrap();
        let local_addr = stream.local_addr().unwrap();
        let mut head =
            format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: application/json\r\n");
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes()).await.unwrap();
        let mut reader = BufReader::new(stream);
        let mut line = String::new();
        loop {
            line.clear();
            reader.read_line(&mut line).await.unwrap();
            if line == "\r\n" || line.is_empty() {
                break;
            }
            if line.starts_with("HTTP/1.1") {
                assert!(line.contains(" 200 "), "watch answered {line}");
            }
        }
        WatchReader {
            reader,
            pending: String::new(),
            ended: false,
            local_addr,
        }
    }

    /// The next watch event, or `None` when the stream ended.
    pub async fn next(&mut self) -> Option<Value> {
        loop {
            if let Some(index) = self.pending.find('\n') {
                let line: String = self.pending.drain(..=index).collect();
                if line.trim().is_empty() {
                    continue;
                }
                return Some(serde_json::from_str(line.trim()).expect("a JSON watch event"));
            }
            // Read one chunk.
            let mut size_line = String::new();
            if tokio::time::timeout(HANG_GUARD, self.reader.read_line(&mut size_line))
                .await
                .expect("watch hang")
                .ok()?
                == 0
            {
                self.ended = true;
                return None;
            }
            let size = usize::from_str_radix(size_line.trim(), 16).ok()?;
            if size == 0 {
                self.ended = true;
                return None;
            }
            let mut chunk = vec![0; size + 2];
            self.reader.read_exact(&mut chunk).await.ok()?;
            self.pending
                .push_str(&String::from_utf8_lossy(&chunk[..size]));
        }
    }
}

pub fn configmap(name: &str, payload: usize) -> Value {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": {"app": "test"}},
        "data": {"payload": "x".repeat(payload)}
    })
}

/// [`request`] with extra headers (e.g. `("Authorization", "Bearer t")`); `Connection: close`,
/// returns the status and the (de-chunked) body.
pub async fn request_with_headers(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !headers
        .iter()
        .any(|(name, _)| name.eq_ignore_ascii_case("content-type"))
    {
        head.push_str("Content-Type: application/json\r\n");
    }
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(body.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    tokio::time::timeout(HANG_GUARD, stream.read_to_end(&mut raw))
        .await
        .unwrap()
        .unwrap();
    let text = String::from_utf8_lossy(&raw).to_string();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status: u16 = head.split(' ').nth(1).unwrap_or("0").parse().unwrap_or(0);
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_owned()
    };
    (status, body)
}

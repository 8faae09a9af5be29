//! Exact bytes on a socket, for tests of what a client library would refuse to send or would
//! hide: malformed or oversized requests, bodies that never complete, answers read byte by
//! byte.
//!
//! Guarantees: [`send`] writes the bytes given and nothing else; [`read_answer`] returns the
//! bytes the server sent until it closed the connection (or reset it) or the declared
//! `Content-Length` arrived, undecoded; [`read_head`] reads no byte past the head. Nothing here
//! times out: callers bound each wait with their own hang guard.

use std::net::SocketAddr;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Connects and writes `head` then `body`; returns the open stream.
///
/// # Errors
/// Socket errors.
pub async fn send(addr: SocketAddr, head: &str, body: &[u8]) -> std::io::Result<TcpStream> {
    let mut stream = TcpStream::connect(addr).await?;
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body).await?;
    Ok(stream)
}

/// An answer as received.
#[derive(Debug, Clone)]
pub struct Answer {
    /// The status code (0 when there was no status line).
    pub status: u16,
    /// The status line and header lines, lowercased.
    pub head: String,
    /// The body as sent (not de-chunked).
    pub body: String,
}

impl Answer {
    /// The body as JSON, or `Null` when it is not JSON.
    #[must_use]
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }
}

/// Reads one answer: until the server closes (or resets) the connection, or the body reaches
/// the declared `Content-Length`.
pub async fn read_answer(stream: &mut TcpStream) -> Answer {
    let mut raw = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let n = stream.read(&mut buf).await.unwrap_or(0);
        if n == 0 {
            break;
        }
        raw.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&raw);
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length = head
                .to_ascii_lowercase()
                .lines()
                .find_map(|l| {
                    l.strip_prefix("content-length:")
                        .map(|v| v.trim().to_owned())
                })
                .and_then(|v| v.parse::<usize>().ok());
            if length.is_some_and(|length| body.len() >= length) {
                break;
            }
        }
    }
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    Answer {
        status: status_of(head),
        head: head.to_ascii_lowercase(),
        body: body.to_owned(),
    }
}

/// Reads an answer's head byte by byte (so no body byte is consumed); returns it with its
/// final blank line.
///
/// # Errors
/// Socket errors, or the server closed the connection before the head ended (`UnexpectedEof`).
pub async fn read_head(stream: &mut TcpStream) -> std::io::Result<String> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte).await? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        head.push(byte[0]);
    }
    Ok(String::from_utf8_lossy(&head).into_owned())
}

/// The status code of a head (0 when there is none).
#[must_use]
pub fn status_of(head: &str) -> u16 {
    head.split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

//! Requests over HTTP/1.1 with hyper's client: [`request`] on a connection of its own
//! (`Connection: close`), [`Conn`] for sequential requests on one keep-alive connection.
//!
//! Guarantees: a request is sent as given (method, path, headers, body; `Host` is added unless
//! given, `Content-Length` comes from the body), and the answer is the status, the headers and
//! the whole body, de-chunked. Nothing here times out: callers bound each wait with their own
//! hang guard. A dropped [`Conn`] closes its connection.

use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1;
use hyper::header::{ACCEPT, CONNECTION, CONTENT_TYPE, HOST, HeaderName, HeaderValue};
use hyper::{HeaderMap, Method, Request};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// One answer.
#[derive(Debug, Clone)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// The response headers.
    pub headers: HeaderMap,
    /// The whole body, de-chunked.
    pub body: Vec<u8>,
}

impl Response {
    /// The body as text (invalid UTF-8 replaced).
    #[must_use]
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body as JSON, or `Null` when it is not JSON.
    #[must_use]
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }

    /// A header's value as text, if present and printable.
    #[must_use]
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

fn invalid(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string())
}

/// One request on a new connection with `Connection: close`.
///
/// # Errors
/// The connection fails, the request cannot be written (an invalid method or header) or the
/// answer is not HTTP/1.1 (`InvalidData`).
pub async fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> std::io::Result<Response> {
    let mut conn = Conn::connect(addr).await?;
    let mut all = Vec::with_capacity(headers.len() + 1);
    if !has_header(headers, CONNECTION.as_str()) {
        all.push((CONNECTION.as_str(), "close"));
    }
    all.extend_from_slice(headers);
    conn.send(method, path, &all, body).await
}

/// A keep-alive connection for sequential requests (`TCP_NODELAY` set).
#[derive(Debug)]
pub struct Conn {
    sender: http1::SendRequest<Full<Bytes>>,
    driver: tokio::task::JoinHandle<()>,
    addr: SocketAddr,
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

impl Conn {
    /// Connects; the connection is driven by a task on the current tokio runtime.
    ///
    /// # Errors
    /// Socket errors.
    pub async fn connect(addr: SocketAddr) -> std::io::Result<Conn> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let (sender, connection) = http1::handshake(TokioIo::new(stream))
            .await
            .map_err(std::io::Error::other)?;
        let driver = tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(Conn {
            sender,
            driver,
            addr,
        })
    }

    /// One request with these headers.
    ///
    /// # Errors
    /// The connection is closed or fails, the request is invalid (`InvalidInput`) or the answer
    /// is not HTTP/1.1 (`InvalidData`).
    pub async fn send(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> std::io::Result<Response> {
        let mut request = Request::new(Full::new(Bytes::copy_from_slice(body)));
        *request.method_mut() = Method::from_bytes(method.as_bytes()).map_err(invalid)?;
        *request.uri_mut() = path.parse().map_err(invalid)?;
        let map = request.headers_mut();
        for (name, value) in headers {
            map.append(
                HeaderName::from_bytes(name.as_bytes()).map_err(invalid)?,
                HeaderValue::from_bytes(value.as_bytes()).map_err(invalid)?,
            );
        }
        if !map.contains_key(HOST) {
            map.insert(
                HOST,
                HeaderValue::from_str(&self.addr.to_string()).map_err(invalid)?,
            );
        }
        self.sender.ready().await.map_err(std::io::Error::other)?;
        let response = self.sender.send_request(request).await.map_err(|e| {
            if e.is_parse() {
                std::io::Error::new(std::io::ErrorKind::InvalidData, e)
            } else {
                std::io::Error::other(e)
            }
        })?;
        let status = response.status().as_u16();
        let (parts, body) = response.into_parts();
        let body = body
            .collect()
            .await
            .map_err(std::io::Error::other)?
            .to_bytes()
            .to_vec();
        Ok(Response {
            status,
            headers: parts.headers,
            body,
        })
    }

    /// One request with a `Content-Type` (omitted when empty) and `Accept: application/json`;
    /// returns the status and the body.
    ///
    /// # Errors
    /// As [`Conn::send`].
    pub async fn request(
        &mut self,
        method: &str,
        path: &str,
        content_type: &str,
        body: &[u8],
    ) -> std::io::Result<(u16, Vec<u8>)> {
        let mut headers = vec![(ACCEPT.as_str(), "application/json")];
        if !content_type.is_empty() {
            headers.push((CONTENT_TYPE.as_str(), content_type));
        }
        let response = self.send(method, path, &headers, body).await?;
        Ok((response.status, response.body))
    }
}

/// Whether `headers` name `name` (case-insensitively).
#[must_use]
pub fn has_header(headers: &[(&str, &str)], name: &str) -> bool {
    headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name))
}

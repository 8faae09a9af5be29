//! A minimal HTTP/1.1 client over raw TCP (tokio): keep-alive requests for writers, and watch
//! streams that can stop reading (a small SO_RCVBUF makes the back-pressure reach the server
//! quickly), with an incremental chunked decoder.

use std::net::SocketAddr;

use serde::Deserialize;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// CLOCK_MONOTONIC in nanoseconds (shared by writers and readers, across processes).
#[must_use]
pub fn now_ns() -> u64 {
    crate::sys::mono_ns()
}

/// A keep-alive connection for sequential requests.
#[derive(Debug)]
pub struct Conn {
    reader: BufReader<TcpStream>,
    addr: SocketAddr,
}

impl Conn {
    /// Connects.
    ///
    /// # Errors
    /// Socket errors.
    pub async fn connect(addr: SocketAddr) -> std::io::Result<Conn> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(Conn {
            reader: BufReader::new(stream),
            addr,
        })
    }

    /// One request; returns the status and the body.
    ///
    /// # Errors
    /// Socket errors or a malformed response.
    pub async fn request(
        &mut self,
        method: &str,
        path: &str,
        content_type: &str,
        body: &[u8],
    ) -> std::io::Result<(u16, Vec<u8>)> {
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: {content_type}\r\nAccept: application/json\r\nContent-Length: {}\r\n\r\n",
            self.addr,
            body.len()
        );
        let mut message = head.into_bytes();
        message.extend_from_slice(body);
        self.reader.get_mut().write_all(&message).await?;
        let mut status = 0;
        let mut length: Option<usize> = None;
        let mut chunked = false;
        let mut line = String::new();
        loop {
            line.clear();
            if self.reader.read_line(&mut line).await? == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            if line == "\r\n" {
                break;
            }
            let lower = line.to_ascii_lowercase();
            if lower.starts_with("http/1.1 ") {
                status = lower[9..12].parse().unwrap_or(0);
            } else if let Some(v) = lower.strip_prefix("content-length:") {
                length = v.trim().parse().ok();
            } else if lower.starts_with("transfer-encoding:") && lower.contains("chunked") {
                chunked = true;
            }
        }
        let mut body = Vec::new();
        if chunked {
            loop {
                line.clear();
                self.reader.read_line(&mut line).await?;
                let size = usize::from_str_radix(line.trim(), 16).unwrap_or(0);
                let mut chunk = vec![0; size + 2];
                self.reader.read_exact(&mut chunk).await?;
                if size == 0 {
                    break;
                }
                body.extend_from_slice(&chunk[..size]);
            }
        } else if let Some(length) = length {
            body.resize(length, 0);
            self.reader.read_exact(&mut body).await?;
        }
        Ok((status, body))
    }
}

/// An incremental decoder of a chunked body into newline-separated lines.
#[derive(Debug, Default)]
struct Dechunker {
    raw: Vec<u8>,
    /// Bytes left in the current chunk (plus its CRLF), or `None` before a size line.
    left: Option<usize>,
    /// Decoded bytes not yet split into lines.
    pending: Vec<u8>,
    /// The terminal chunk was seen.
    done: bool,
}

impl Dechunker {
    /// Feeds raw bytes; calls `line` for every complete line.
    fn feed(&mut self, data: &[u8], line: &mut impl FnMut(&[u8])) {
        self.raw.extend_from_slice(data);
        let mut at = 0;
        loop {
            match self.left {
                None => {
                    let Some(end) = self.raw[at..].windows(2).position(|w| w == b"\r\n") else {
                        break;
                    };
                    let size_text = std::str::from_utf8(&self.raw[at..at + end]).unwrap_or("0");
                    let size = usize::from_str_radix(
                        size_text.split(';').next().unwrap_or("0").trim(),
                        16,
                    )
                    .unwrap_or(0);
                    at += end + 2;
                    if size == 0 {
                        self.done = true;
                        break;
                    }
                    self.left = Some(size + 2);
                }
                Some(left) => {
                    let available = (self.raw.len() - at).min(left);
                    if available == 0 {
                        break;
                    }
                    // The trailing CRLF of a chunk is not data.
                    let data_left = left.saturating_sub(2);
                    let take = available.min(data_left);
                    self.pending.extend_from_slice(&self.raw[at..at + take]);
                    at += available;
                    let left = left - available;
                    self.left = if left == 0 { None } else { Some(left) };
                }
            }
        }
        self.raw.drain(..at);
        let mut start = 0;
        while let Some(end) = self.pending[start..].iter().position(|b| *b == b'\n') {
            line(&self.pending[start..start + end]);
            start += end + 1;
        }
        self.pending.drain(..start);
    }
}

#[derive(Deserialize)]
struct EventLine {
    #[serde(rename = "type")]
    kind: String,
    object: EventObject,
}

#[derive(Deserialize)]
struct EventObject {
    #[serde(default)]
    metadata: Meta,
    #[serde(default)]
    data: Option<SentData>,
}

#[derive(Deserialize, Default)]
struct Meta {
    #[serde(rename = "resourceVersion", default)]
    resource_version: Option<String>,
}

#[derive(Deserialize)]
struct SentData {
    #[serde(default)]
    sent: Option<String>,
}

/// What a watch stream delivered in one read.
#[derive(Debug, Default, Clone, Copy)]
pub struct Seen {
    /// Events (not bookmarks or errors).
    pub events: u64,
    /// ERROR events.
    pub errors: u64,
    /// The last event's resource version.
    pub last_rv: u64,
}

/// A watch stream over a raw socket.
#[derive(Debug)]
pub struct WatchStream {
    stream: TcpStream,
    dechunk: Dechunker,
    buf: Vec<u8>,
    /// The stream ended (EOF, terminal chunk or error).
    pub ended: bool,
    /// Parse each event fully (resource version and `data.sent` latency); otherwise only
    /// count lines.
    pub parse: bool,
}

impl WatchStream {
    /// Opens `path` (a watch URL); `recv_buffer` sets SO_RCVBUF before connecting.
    ///
    /// # Errors
    /// Socket errors or a non-200 answer.
    pub async fn open(
        addr: SocketAddr,
        path: &str,
        recv_buffer: Option<u32>,
    ) -> std::io::Result<WatchStream> {
        let socket = tokio::net::TcpSocket::new_v4()?;
        if let Some(size) = recv_buffer {
            socket.set_recv_buffer_size(size)?;
        }
        let mut stream = socket.connect(addr).await?;
        stream.set_nodelay(true)?;
        let head =
            format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: application/json\r\n\r\n");
        stream.write_all(head.as_bytes()).await?;
        // Read the head byte by byte-ish: until CRLFCRLF; keep what follows.
        let mut raw = Vec::new();
        let mut chunk = [0u8; 1024];
        let end = loop {
            let n = stream.read(&mut chunk).await?;
            if n == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            raw.extend_from_slice(&chunk[..n]);
            if let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
                break end;
            }
        };
        let head = String::from_utf8_lossy(&raw[..end]).to_string();
        if !head.starts_with("HTTP/1.1 200") {
            return Err(std::io::Error::other(format!("watch answered {head}")));
        }
        let mut watch = WatchStream {
            stream,
            dechunk: Dechunker::default(),
            buf: vec![0; 64 * 1024],
            ended: false,
            parse: true,
        };
        let rest = raw[end + 4..].to_vec();
        let mut ignore = Seen::default();
        watch.decode(&rest, &mut ignore, &mut |_| {});
        Ok(watch)
    }

    /// Shrinks the read buffer to `bytes` (the scale suite holds tens of thousands of streams).
    pub fn set_read_buffer(&mut self, bytes: usize) {
        self.buf = vec![0; bytes.max(512)];
    }

    fn decode(&mut self, data: &[u8], seen: &mut Seen, latency: &mut impl FnMut(u64)) {
        let parse = self.parse;
        self.dechunk.feed(data, &mut |line: &[u8]| {
            if line.iter().all(u8::is_ascii_whitespace) {
                return;
            }
            if !parse {
                seen.events += 1;
                return;
            }
            let Ok(event) = serde_json::from_slice::<EventLine>(line) else {
                return;
            };
            match event.kind.as_str() {
                "ERROR" => seen.errors += 1,
                "BOOKMARK" => {}
                _ => {
                    seen.events += 1;
                    if let Some(rv) = event
                        .object
                        .metadata
                        .resource_version
                        .and_then(|v| v.parse().ok())
                    {
                        seen.last_rv = rv;
                    }
                    if let Some(sent) = event
                        .object
                        .data
                        .and_then(|d| d.sent)
                        .and_then(|s| s.parse::<u64>().ok())
                    {
                        latency(now_ns().saturating_sub(sent));
                    }
                }
            }
        });
        if self.dechunk.done {
            self.ended = true;
        }
    }

    /// Reads once (waiting for data); reports what arrived, with each event's latency.
    ///
    /// # Errors
    /// Socket errors.
    pub async fn read(&mut self, latency: &mut impl FnMut(u64)) -> std::io::Result<Seen> {
        let mut seen = Seen::default();
        let n = self.stream.read(&mut self.buf).await?;
        if n == 0 {
            self.ended = true;
            return Ok(seen);
        }
        let data = self.buf[..n].to_vec();
        self.decode(&data, &mut seen, latency);
        Ok(seen)
    }

    /// Reads whatever is already buffered without waiting.
    ///
    /// # Errors
    /// Socket errors.
    pub fn read_available(&mut self) -> std::io::Result<Seen> {
        let mut seen = Seen::default();
        loop {
            match self.stream.try_read(&mut self.buf) {
                Ok(0) => {
                    self.ended = true;
                    return Ok(seen);
                }
                Ok(n) => {
                    let data = self.buf[..n].to_vec();
                    let mut part = Seen::default();
                    self.decode(&data, &mut part, &mut |_| {});
                    seen.events += part.events;
                    seen.errors += part.errors;
                    if part.last_rv > 0 {
                        seen.last_rv = part.last_rv;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(seen),
                Err(e) => return Err(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dechunker_splits_lines_across_chunk_boundaries() {
        let mut d = Dechunker::default();
        let mut lines = Vec::new();
        let body = b"5\r\nab\ncd\r\n3\r\ne\nf\r\n0\r\n\r\n";
        for byte in body {
            d.feed(std::slice::from_ref(byte), &mut |l: &[u8]| {
                lines.push(String::from_utf8_lossy(l).to_string());
            });
        }
        assert_eq!(lines, ["ab", "cde"]);
        assert!(d.done);
    }
}

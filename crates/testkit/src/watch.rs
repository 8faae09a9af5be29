//! A watch stream read over a raw TCP socket, so that a test controls every read: it can stop
//! reading (a small `SO_RCVBUF` makes the back-pressure reach the server quickly), read only
//! what has already arrived, or see where the stream ends. No client library lets a caller do
//! that, which is why this is not hyper.
//!
//! Guarantees: the chunked body is decoded incrementally, so a line split across chunks or
//! reads is delivered once, whole, in order; blank lines (keep-alives) are skipped; `ended` is
//! set at the terminal chunk or the end of the connection, after which no line is invented.
//! Nothing here times out: callers bound each wait with their own hang guard.

use std::net::SocketAddr;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The read buffer of a new stream.
const READ_BUFFER_BYTES: usize = 64 * 1024;
/// The smallest read buffer [`RawWatch::set_read_buffer`] allows.
const READ_BUFFER_MIN_BYTES: usize = 512;

/// An incremental decoder of a chunked body.
#[derive(Debug, Default)]
struct Dechunker {
    /// Received bytes not decoded yet.
    raw: Vec<u8>,
    /// Bytes left in the current chunk (plus its CRLF), or `None` before a size line.
    left: Option<usize>,
    /// The terminal chunk was seen.
    done: bool,
}

impl Dechunker {
    /// Feeds received bytes; appends the decoded ones to `out`.
    fn feed(&mut self, data: &[u8], out: &mut Vec<u8>) {
        if self.done {
            return;
        }
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
                    let take = available.min(left.saturating_sub(2));
                    out.extend_from_slice(&self.raw[at..at + take]);
                    at += available;
                    let left = left - available;
                    self.left = (left > 0).then_some(left);
                }
            }
        }
        self.raw.drain(..at);
    }
}

/// A watch stream over a raw socket.
#[derive(Debug)]
pub struct RawWatch {
    stream: TcpStream,
    dechunk: Dechunker,
    /// Decoded bytes not yet taken as lines.
    pending: Vec<u8>,
    buf: Vec<u8>,
    /// The response head (status line and headers, without the final blank line).
    pub head: String,
    /// The stream ended (terminal chunk or end of the connection).
    pub ended: bool,
    /// The client's end of the connection (what the server sees as the peer).
    pub local_addr: SocketAddr,
}

impl RawWatch {
    /// Opens `path` (a watch URL) with `GET`, `Host` and `Accept: application/json` unless
    /// `headers` give them; `recv_buffer` sets `SO_RCVBUF` before connecting.
    ///
    /// # Errors
    /// Socket errors, or an answer other than 200 (`watch answered <status line>`).
    pub async fn open(
        addr: SocketAddr,
        path: &str,
        recv_buffer: Option<u32>,
        headers: &[(&str, &str)],
    ) -> std::io::Result<RawWatch> {
        let socket = tokio::net::TcpSocket::new_v4()?;
        if let Some(size) = recv_buffer {
            socket.set_recv_buffer_size(size)?;
        }
        let mut stream = socket.connect(addr).await?;
        stream.set_nodelay(true)?;
        let local_addr = stream.local_addr()?;
        let mut head = format!("GET {path} HTTP/1.1\r\n");
        if !crate::http::has_header(headers, "host") {
            head.push_str(&format!("Host: {addr}\r\n"));
        }
        if !crate::http::has_header(headers, "accept") {
            head.push_str("Accept: application/json\r\n");
        }
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes()).await?;
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
        let head = String::from_utf8_lossy(&raw[..end]).into_owned();
        let status_line = head.lines().next().unwrap_or_default();
        if !status_line.starts_with("HTTP/1.1 200 ") {
            return Err(std::io::Error::other(format!(
                "watch answered {status_line}"
            )));
        }
        let mut watch = RawWatch {
            stream,
            dechunk: Dechunker::default(),
            pending: Vec::new(),
            buf: vec![0; READ_BUFFER_BYTES],
            head,
            ended: false,
            local_addr,
        };
        watch.dechunk.feed(&raw[end + 4..], &mut watch.pending);
        watch.ended = watch.dechunk.done;
        Ok(watch)
    }

    /// Sets the read buffer to `bytes` (at least 512; tests that hold tens of thousands of
    /// streams keep it small).
    pub fn set_read_buffer(&mut self, bytes: usize) {
        self.buf = vec![0; bytes.max(READ_BUFFER_MIN_BYTES)];
    }

    /// Reads once from the socket, waiting for data; returns the bytes received (0 at the end
    /// of the connection).
    ///
    /// # Errors
    /// Socket errors.
    pub async fn read_some(&mut self) -> std::io::Result<usize> {
        if self.ended {
            return Ok(0);
        }
        let n = self.stream.read(&mut self.buf).await?;
        if n == 0 {
            self.ended = true;
        }
        self.dechunk.feed(&self.buf[..n], &mut self.pending);
        self.ended |= self.dechunk.done;
        Ok(n)
    }

    /// Reads whatever has already arrived without waiting; returns the bytes received.
    ///
    /// # Errors
    /// Socket errors.
    pub fn read_available(&mut self) -> std::io::Result<usize> {
        let mut total = 0;
        while !self.ended {
            match self.stream.try_read(&mut self.buf) {
                Ok(0) => self.ended = true,
                Ok(n) => {
                    total += n;
                    self.dechunk.feed(&self.buf[..n], &mut self.pending);
                    self.ended |= self.dechunk.done;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e),
            }
        }
        Ok(total)
    }

    /// The bytes received so far and not yet taken (dechunked), for streams that are not
    /// newline-framed (protobuf watches); forgets them.
    pub fn take_bytes(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.pending)
    }

    /// Calls `line` for every complete, non-blank line received so far (without its newline)
    /// and forgets them.
    pub fn drain_lines(&mut self, mut line: impl FnMut(&[u8])) {
        let mut start = 0;
        while let Some(end) = self.pending[start..].iter().position(|b| *b == b'\n') {
            let text = &self.pending[start..start + end];
            if !text.iter().all(u8::is_ascii_whitespace) {
                line(text);
            }
            start += end + 1;
        }
        self.pending.drain(..start);
    }

    fn take_line(&mut self) -> Option<Vec<u8>> {
        loop {
            let end = self.pending.iter().position(|b| *b == b'\n')?;
            let line: Vec<u8> = self.pending.drain(..=end).collect();
            let line = &line[..end];
            if !line.iter().all(u8::is_ascii_whitespace) {
                return Some(line.to_vec());
            }
        }
    }

    /// The next non-blank line, waiting for it; `None` when the stream ended.
    ///
    /// # Errors
    /// Socket errors.
    pub async fn next_line(&mut self) -> std::io::Result<Option<Vec<u8>>> {
        loop {
            if let Some(line) = self.take_line() {
                return Ok(Some(line));
            }
            if self.ended {
                return Ok(None);
            }
            self.read_some().await?;
        }
    }

    /// The next frame as JSON (one watch event), waiting for it; `None` when the stream ended.
    ///
    /// # Errors
    /// Socket errors, or a line that is not JSON (`bad frame ...`).
    pub async fn next_json(&mut self) -> std::io::Result<Option<Value>> {
        let Some(line) = self.next_line().await? else {
            return Ok(None);
        };
        serde_json::from_slice(&line).map(Some).map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("bad frame {:?}: {e}", String::from_utf8_lossy(&line)),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dechunker_decodes_byte_by_byte_across_chunk_boundaries() {
        let mut d = Dechunker::default();
        let mut out = Vec::new();
        let body = b"5\r\nab\ncd\r\n3;ext=1\r\ne\nf\r\n0\r\n\r\n";
        for byte in body {
            d.feed(std::slice::from_ref(byte), &mut out);
        }
        assert_eq!(out, b"ab\ncde\nf");
        assert!(d.done);
    }
}

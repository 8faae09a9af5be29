//! The benchmarks' client side, on the shared test kit: its keep-alive [`Conn`] for writers,
//! and watch streams over its raw socket (which can stop reading: a small SO_RCVBUF makes the
//! back-pressure reach the server quickly) that count events and measure each one's latency.

use std::net::SocketAddr;

use serde::Deserialize;
pub use watchkeeper_testkit::Conn;
use watchkeeper_testkit::RawWatch;

/// CLOCK_MONOTONIC in nanoseconds (shared by writers and readers, across processes).
#[must_use]
pub fn now_ns() -> u64 {
    crate::sys::mono_ns()
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

/// The latency of the event on one watch line (now minus its `data.sent`), if it is an event
/// (not a bookmark or an error) carrying one.
#[must_use]
pub fn event_latency(line: &[u8]) -> Option<u64> {
    let event = serde_json::from_slice::<EventLine>(line).ok()?;
    if matches!(event.kind.as_str(), "ERROR" | "BOOKMARK") {
        return None;
    }
    let sent = event.object.data?.sent?.parse::<u64>().ok()?;
    Some(now_ns().saturating_sub(sent))
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
    raw: RawWatch,
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
        let raw = RawWatch::open(addr, path, recv_buffer, &[]).await?;
        Ok(WatchStream {
            ended: raw.ended,
            raw,
            parse: true,
        })
    }

    /// Shrinks the read buffer to `bytes` (the scale suite holds tens of thousands of streams).
    pub fn set_read_buffer(&mut self, bytes: usize) {
        self.raw.set_read_buffer(bytes);
    }

    /// Counts the complete lines received so far.
    fn decode(&mut self, seen: &mut Seen, latency: &mut impl FnMut(u64)) {
        let parse = self.parse;
        self.raw.drain_lines(|line: &[u8]| {
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
        self.ended |= self.raw.ended;
    }

    /// Reads once (waiting for data); reports what arrived, with each event's latency.
    ///
    /// # Errors
    /// Socket errors.
    pub async fn read(&mut self, latency: &mut impl FnMut(u64)) -> std::io::Result<Seen> {
        let mut seen = Seen::default();
        self.raw.read_some().await?;
        self.decode(&mut seen, latency);
        Ok(seen)
    }

    /// Reads whatever is already buffered without waiting.
    ///
    /// # Errors
    /// Socket errors.
    pub fn read_available(&mut self) -> std::io::Result<Seen> {
        let mut seen = Seen::default();
        self.raw.read_available()?;
        self.decode(&mut seen, &mut |_| {});
        Ok(seen)
    }
}

//! Suite `scale`: the largest number of concurrent watch streams one server process holds,
//! over HTTP/1.1 (one TCP connection per stream) and over HTTP/2 (many streams multiplexed on
//! each connection, as client-go does), with the server's memory per idle stream and the
//! delivery latency of a write to every stream at each size.
//!
//! The server runs in the bench process (memory store, 2-worker runtime); the watch clients run
//! in child processes (the bench binary re-run as `__clients scale`), so client file
//! descriptors are split across processes and only the server's own descriptors bound the size.
//! The bench raises RLIMIT_NOFILE to its hard limit; an HTTP/1.1 stream costs the server one
//! descriptor, so the HTTP/1.1 ramp stops at about that limit; an HTTP/2 connection carries up
//! to `--max-watches-per-connection` streams (the suite sets it, and the HTTP/2 concurrent
//! stream limit follows it), so the HTTP/2 ramp needs one descriptor per that many streams. The
//! ramp goes up in steps and stops at the first step where a stream could not open; that
//! step's error is reported as the reason. RSS is read through a /proc handle opened
//! beforehand, so it still reads when every descriptor is in use.
//!
//! ## Memory per idle stream
//! Each step measures the server's memory right before its new streams open and again once
//! they are all registered and idle: glibc's `malloc_trim(0)` first (so RSS counts pages in use,
//! not what the allocator keeps cached from the previous step's writes), then the process's RSS
//! and the live heap bytes by allocation size from the bench's counting allocator
//! ([`crate::alloc::LiveSizes`]). The step's figures are the differences divided by the new
//! streams; the size classes that grew most per stream are listed for the largest step (the
//! per-piece account in BENCHMARKS.md is built from them).
//!
//! For the same step, tables 8e and 8f give the resident share of the live allocations by exact
//! size (16 bytes or more): the bytes of each that lie on pages present in
//! /proc/self/pagemap ([`crate::alloc::resident_by_size`]). A buffer allocated but never
//! written past its first page costs heap but little RSS, unless the allocator placed it on
//! pages that earlier allocations touched.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use serde_json::{Value, json};
use watchkeeper::config::ServeArgs;

use crate::alloc::LiveSizes;
use crate::e2e::{CONFIGMAPS, Child, Running, arg, client_runtime, seed, watch_path};
use crate::http::{Conn, WatchStream, event_latency, now_ns};
use crate::report::{Table, f};
use crate::{Latency, Options, median};

/// HTTP/1.1 streams per client process (well under each child's own descriptor limit).
const PER_CHILD_H1: usize = 7_000;
/// HTTP/2 streams per client process.
const PER_CHILD_H2: usize = 25_000;
/// HTTP/2 streams per connection (the server's `--max-watches-per-connection`).
const PER_CONNECTION_H2: usize = 1_000;

/// The transport of a scale run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// HTTP/1.1, one TCP connection per stream.
    H1,
    /// HTTP/2 over cleartext TCP with prior knowledge (h2c), many streams per connection.
    H2,
}

impl Protocol {
    /// `h1` or `h2`.
    #[must_use]
    pub fn parse(name: &str) -> Option<Protocol> {
        match name {
            "h1" | "http1" => Some(Protocol::H1),
            "h2" | "http2" => Some(Protocol::H2),
            _ => None,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Protocol::H1 => "h1",
            Protocol::H2 => "h2",
        }
    }
}

/// Suite `scale`: one table per protocol (`--scale-protocols`, both by default), then the
/// per-stream account of the largest step of each.
///
/// # Errors
/// The server or a client process failed.
pub fn scale(options: &Options) -> Result<Vec<Table>, String> {
    let protocols = if options.scale_protocols.is_empty() {
        vec![Protocol::H1, Protocol::H2]
    } else {
        options.scale_protocols.clone()
    };
    crate::alloc::track_live(true);
    let mut tables = Vec::new();
    let mut accounts = Vec::new();
    for protocol in protocols {
        let (table, account, resident) = run(options, protocol)?;
        tables.push(table);
        accounts.push(account);
        accounts.push(resident);
    }
    crate::alloc::track_live(false);
    tables.extend(accounts);
    Ok(tables)
}

/// Memory right now, after returning freed memory to the system.
fn memory(rss: &mut crate::sys::RssReader) -> (u64, LiveSizes) {
    crate::alloc::trim();
    (rss.rss_bytes(), LiveSizes::now())
}

#[allow(clippy::too_many_lines)]
fn run(options: &Options, protocol: Protocol) -> Result<(Table, Table, Table), String> {
    let limit = crate::sys::fd_limit() as usize;
    let (per_child, per_connection) = match protocol {
        Protocol::H1 => (PER_CHILD_H1, 1),
        Protocol::H2 if options.smoke => (150, 50),
        Protocol::H2 => (PER_CHILD_H2, PER_CONNECTION_H2),
    };
    let steps: Vec<usize> = if !options.scale_steps.is_empty() {
        options.scale_steps.clone()
    } else if options.smoke {
        match protocol {
            Protocol::H1 => vec![50, 200],
            Protocol::H2 => vec![100, 400],
        }
    } else {
        match protocol {
            Protocol::H1 => {
                let mut steps: Vec<usize> = [1_000, 5_000, 10_000, 15_000]
                    .into_iter()
                    .filter(|s| *s < limit)
                    .collect();
                // The last step asks for as many streams as the server has descriptors: it
                // must stop.
                steps.push(limit);
                steps
            }
            Protocol::H2 => vec![1_000, 10_000, 25_000, 50_000, 75_000, 100_000],
        }
    };
    let writes = if options.smoke { 3 } else { 5 };
    let mut rss = crate::sys::RssReader::open();
    // Opened now: the HTTP/1.1 ramp ends with every descriptor in use.
    let pagemap = crate::alloc::pagemap();
    let args = match protocol {
        Protocol::H1 => ServeArgs::default(),
        // Every stream of a connection is a watch: the per-connection watch limit is the
        // streams per connection, and the HTTP/2 concurrent stream limit follows it.
        Protocol::H2 => ServeArgs {
            max_watches_per_connection: Some(per_connection),
            ..ServeArgs::default()
        },
    };
    let running = Running::start(args)?;
    let addr = running.addr;
    // Streams open at the latest resourceVersion, so they receive only the writes that follow.
    let mut rv = running.runtime.block_on(seed(addr, 1, 1024))?;
    let writer_rt = client_runtime(1);
    let mut conn = writer_rt
        .block_on(Conn::connect(addr))
        .map_err(|e| e.to_string())?;
    let most = *steps.iter().max().unwrap_or(&1);
    let mut children = Vec::new();
    for _ in 0..most.div_ceil(per_child) {
        children.push(Child::spawn(
            &options.exe,
            &[
                "scale".into(),
                "--addr".into(),
                addr.to_string(),
                "--protocol".into(),
                protocol.as_str().into(),
                "--per-connection".into(),
                per_connection.to_string(),
            ],
        )?);
    }
    let (title, unit) = match protocol {
        Protocol::H1 => (
            "8. Scale: concurrent HTTP/1.1 watch streams on one server process (one connection each)",
            "stream (one connection)",
        ),
        Protocol::H2 => (
            "8b. Scale: concurrent HTTP/2 watch streams on one server process",
            "HTTP/2 stream",
        ),
    };
    let mut table = Table::new(
        "scale",
        title,
        &[
            "streams asked",
            "streams open",
            "connections",
            "server RSS, MiB",
            "RSS per new idle stream, KiB",
            "live heap per new idle stream, KiB",
            "server fds in use",
            "delivery p50 ms",
            "p99 ms",
            "max ms",
            "write to all streams, ms (median over writes)",
            "deliveries complete",
            "stopped by",
        ],
    );
    let mut counts = vec![0usize; children.len()];
    let mut largest: Option<(usize, LiveSizes, LiveSizes, usize, f64, f64)> = None;
    let mut largest_resident: Option<(Vec<crate::alloc::Resident>, u64, usize)> = None;
    for &step in &steps {
        let before_open: usize = counts.iter().sum();
        let (rss_before, live_before) = memory(&mut rss);
        // Spread the new streams over the children, each up to its share.
        let mut want = step.saturating_sub(before_open);
        let mut asks = vec![0usize; children.len()];
        while want > 0 {
            let mut gave = false;
            for (i, ask) in asks.iter_mut().enumerate() {
                if want > 0 && counts[i] + *ask < per_child {
                    // Whole connections' worth at a time for HTTP/2.
                    let room = per_child - counts[i] - *ask;
                    let give = want.min(per_connection).min(room);
                    *ask += give;
                    want -= give;
                    gave = true;
                }
            }
            if !gave {
                break;
            }
        }
        for (child, ask) in children.iter_mut().zip(&asks) {
            child.send(&format!("open {ask} {rv}"))?;
        }
        let mut errors = Vec::new();
        let mut connections = 0usize;
        for (i, child) in children.iter_mut().enumerate() {
            let answer: Value =
                serde_json::from_str(&child.expect("opened")?).map_err(|e| e.to_string())?;
            counts[i] = answer["total"].as_u64().unwrap_or(0) as usize;
            connections += answer["connections"].as_u64().unwrap_or(0) as usize;
            if let Some(error) = answer["error"].as_str() {
                errors.push(error.to_owned());
            }
        }
        let open: usize = counts.iter().sum();
        // Settle: every stream registered with the server (its response head is out when the
        // client counts it open, the registration comes first), then a moment for the
        // connection tasks to go idle.
        for _ in 0..100 {
            if running.app().watches.lock().len() >= open {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        std::thread::sleep(Duration::from_millis(500));
        let (rss_idle, live_idle) = memory(&mut rss);
        let fds = crate::sys::open_fds();
        let new = open.saturating_sub(before_open);
        let rss_per = rss_idle.saturating_sub(rss_before) as f64 / 1024.0 / new.max(1) as f64;
        let heap_per = (live_idle.bytes - live_before.bytes) as f64 / 1024.0 / new.max(1) as f64;
        if new > 0 && largest.as_ref().is_none_or(|l| new >= l.0) {
            if let Some(pagemap) = &pagemap {
                let (resident, missed) = crate::alloc::resident_by_size(pagemap);
                largest_resident = Some((resident, missed, open));
            }
            largest = Some((
                new,
                live_before.clone(),
                live_idle.clone(),
                open,
                rss_per,
                heap_per,
            ));
        }
        // Writes, each carrying its send time (CLOCK_MONOTONIC, shared with the children);
        // the next write goes once every stream has the previous one (or after 60 s).
        let mut write_error = None;
        for i in 0..writes {
            let body = format!("{{\"data\":{{\"sent\":\"{}\",\"seq\":\"{i}\"}}}}", now_ns());
            match writer_rt.block_on(conn.request(
                "PATCH",
                &format!("{CONFIGMAPS}/cm-0"),
                "application/merge-patch+json",
                body.as_bytes(),
            )) {
                Ok((200, text)) => {
                    if let Some(v) = serde_json::from_slice::<Value>(&text)
                        .ok()
                        .and_then(|o| o["metadata"]["resourceVersion"].as_str()?.parse().ok())
                    {
                        rv = v;
                    }
                }
                Ok((status, text)) => {
                    write_error = Some(format!(
                        "PATCH answered {status}: {}",
                        String::from_utf8_lossy(&text)
                    ));
                }
                Err(e) => write_error = Some(format!("PATCH: {e}")),
            }
            for child in &mut children {
                child.send(&format!("wait {}", i + 1))?;
            }
            for child in &mut children {
                child.expect("waited")?;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        for child in &mut children {
            child.send(&format!("collect {writes}"))?;
        }
        let mut samples = Vec::new();
        let mut per_write = vec![0u64; writes];
        let mut complete = write_error.is_none();
        for child in &mut children {
            let answer: Value =
                serde_json::from_str(&child.expect("collected")?).map_err(|e| e.to_string())?;
            complete &= answer["complete"].as_bool().unwrap_or(false);
            if let Some(values) = answer["latency_us"].as_array() {
                samples.extend(values.iter().filter_map(Value::as_u64).map(|us| us * 1000));
            }
            if let Some(values) = answer["per_write_max_us"].as_array() {
                for (slot, v) in per_write.iter_mut().zip(values) {
                    *slot = (*slot).max(v.as_u64().unwrap_or(0));
                }
            }
        }
        let latency = Latency::from_nanos(samples);
        let all_ms = median(
            &per_write
                .iter()
                .map(|us| *us as f64 / 1000.0)
                .collect::<Vec<_>>(),
        );
        let stopped = errors.first().cloned().or(write_error.clone());
        eprintln!(
            "  scale {} {step} asked: {open} open on {connections} connections, RSS {:.1} MiB, {rss_per:.2} KiB RSS and {heap_per:.2} KiB heap per new stream, fds {fds:?}, p50 {:.1} p99 {:.1} max {:.1} ms, all {all_ms:.1} ms, complete {complete}, stopped by {stopped:?}",
            protocol.as_str(),
            rss_idle as f64 / 1024.0 / 1024.0,
            latency.p50 / 1000.0,
            latency.p99 / 1000.0,
            latency.max / 1000.0
        );
        table.row(vec![
            step.to_string(),
            open.to_string(),
            connections.to_string(),
            f(rss_idle as f64 / 1024.0 / 1024.0, 1),
            f(rss_per, 2),
            f(heap_per, 2),
            fds.map_or_else(
                || format!("all ({limit}): /proc/self/fd cannot be opened"),
                |n| format!("{n} of {limit}"),
            ),
            f(latency.p50 / 1000.0, 1),
            f(latency.p99 / 1000.0, 1),
            f(latency.max / 1000.0, 1),
            f(all_ms, 1),
            complete.to_string(),
            stopped.clone().unwrap_or_else(|| "–".into()),
        ]);
        table.raw(json!({"protocol": protocol.as_str(), "asked": step, "open": open, "new": new, "connections": connections, "rss_before": rss_before, "rss_idle": rss_idle, "live_before": live_before.bytes, "live_idle": live_idle.bytes, "fds": fds, "latency": latency, "per_write_max_us": per_write, "errors": errors, "write_error": write_error}));
        if stopped.is_some() {
            break;
        }
    }
    for child in &mut children {
        let _ = child.send("quit");
    }
    for child in children {
        child.finish();
    }
    drop(conn);
    writer_rt.shutdown_timeout(Duration::from_secs(1));
    running.stop();
    match protocol {
        Protocol::H1 => table.note(format!("Server: in the bench process (memory store, 2-worker runtime), RLIMIT_NOFILE raised to its hard limit, {limit} here (the hard limit cannot be raised in this container: setrlimit above it is refused), and each stream costs it one descriptor. Clients: child processes of up to {per_child} streams each (plain `watch=true` from the current resourceVersion, one TCP connection per stream, every event parsed).")),
        Protocol::H2 => table.note(format!("Server: in the bench process (memory store, 2-worker runtime), `--max-watches-per-connection {per_connection}` (so at most {} concurrent HTTP/2 streams per connection), no total or per-user watch limit. Clients: child processes of up to {per_child} streams each on connections of {per_connection} streams (the `h2` crate over cleartext TCP with prior knowledge, h2c; `watch=true` from the current resourceVersion, every event parsed, flow-control capacity released as read).", per_connection + 100)),
    }
    table.note(format!("Per step: the new streams open (HTTP/1.1: 3 s timeout each, a child stops at its first failure; HTTP/2: the requests go out back to back and every response head is awaited, 30 s plus 1 ms per stream asked, 3 s for a stream slot), the server registers them all and settles 0.5 s, then {writes} merge-PATCHes of one ~1 KiB ConfigMap, each carrying its send time, the next once every stream has the previous one; delivery latency is from before the PATCH to a stream parsing the event, over every (stream, write) pair; \"write to all streams\" is the slowest stream's latency per write. The clients (JSON parsing on their own 2-thread runtimes) share the 2 cores with the server, so at large sizes the latency includes the clients' own parsing time."));
    table.note("Memory per new idle stream: glibc `malloc_trim(0)`, then the server process's RSS and the live heap bytes (the bench's counting allocator), right before the step's new streams open and again once they are registered and idle; the difference divided by the new streams. The first step also carries one-time costs (runtime, caches, the first connections).");
    let mut account = Table::new(
        "scale",
        &format!(
            "8{}. Live heap per idle {unit}, by allocation size (the largest step)",
            match protocol {
                Protocol::H1 => "c",
                Protocol::H2 => "d",
            }
        ),
        &[
            "allocation size, bytes (8-byte class)",
            "allocations per stream",
            "bytes per stream",
        ],
    );
    if let Some((new, before, after, open, rss_per, heap_per)) = largest {
        let shares = after.growth_since(&before, new, 16);
        let listed: f64 = shares.iter().map(|s| s.bytes_per).sum();
        for share in &shares {
            account.row(vec![
                share
                    .size
                    .map_or_else(|| "> 65536".to_owned(), |s| s.to_string()),
                f(share.count_per, 3),
                f(share.bytes_per, 1),
            ]);
        }
        account.row(vec![
            "all sizes".into(),
            String::new(),
            f(heap_per * 1024.0, 1),
        ]);
        account.note(format!("The step that opened the most streams: {new} new, {open} open in all; {rss_per:.2} KiB RSS and {heap_per:.2} KiB live heap per new stream. Classes listed: the 16 that grew most ({:.1} of {:.1} bytes per stream). An allocation of n bytes is in class ⌈n/8⌉·8.", listed, heap_per * 1024.0));
        account.raw(json!({"protocol": protocol.as_str(), "new": new, "open": open, "rss_per_kib": rss_per, "heap_per_kib": heap_per, "shares": shares}));
    }
    let mut resident_table = Table::new(
        "scale",
        &format!(
            "8{}. Resident bytes of the live allocations by size, idle {unit}s (the largest step)",
            match protocol {
                Protocol::H1 => "e",
                Protocol::H2 => "f",
            }
        ),
        &[
            "allocation size, bytes",
            "live allocations",
            "per open stream",
            "bytes on resident pages, per allocation",
            "resident share",
            "resident bytes per open stream",
        ],
    );
    if let Some((resident, missed, open)) = largest_resident {
        // Sizes with at least one allocation per 100 streams (one-off buffers left out).
        let listed: Vec<_> = resident
            .iter()
            .filter(|r| r.allocations as usize * 100 >= open)
            .take(20)
            .collect();
        let per_stream = |bytes: u64| bytes as f64 / open.max(1) as f64;
        let listed_bytes: u64 = listed.iter().map(|r| r.resident_bytes).sum();
        let all_bytes: u64 = resident.iter().map(|r| r.resident_bytes).sum();
        if listed.is_empty() {
            resident_table.row(vec![
                "none".into(),
                "0".into(),
                "0".into(),
                "–".into(),
                "–".into(),
                "–".into(),
            ]);
        }
        for share in listed {
            let per = share.resident_bytes as f64 / share.allocations.max(1) as f64;
            resident_table.row(vec![
                share.size.to_string(),
                share.allocations.to_string(),
                f(share.allocations as f64 / open.max(1) as f64, 3),
                f(per, 0),
                format!("{:.0} %", 100.0 * per / share.size as f64),
                f(per_stream(share.resident_bytes), 1),
            ]);
        }
        resident_table.note(format!("Every live allocation of {} bytes or more (up to 64 KiB) made while the suite ran, at the largest step's idle measurement ({open} streams open), after `malloc_trim(0)`: the bytes of each that lie on pages present in /proc/self/pagemap (bytes, so a page shared by neighbours is split between them; the allocator's own headers are not counted). An allocated but never written page is heap, not RSS. Sizes with fewer than one allocation per 100 streams are left out (at most 20 listed: {:.1} resident bytes per open stream; all sizes: {:.1}); {missed} allocations did not fit the bench's address table.", crate::alloc::ADDRESS_MIN, per_stream(listed_bytes), per_stream(all_bytes)));
        resident_table.raw(json!({"protocol": protocol.as_str(), "open": open, "missed": missed, "resident": resident}));
    } else {
        resident_table.row(vec![
            "/proc/self/pagemap unreadable".into(),
            "–".into(),
            "–".into(),
            "–".into(),
            "–".into(),
            "–".into(),
        ]);
    }
    Ok((table, account, resident_table))
}

/// Latencies one stream has seen (ns per event, in order).
type Seen = Arc<Mutex<Vec<u64>>>;

/// The `__clients scale` child: opens and holds streams on command (`open N RV` → `opened
/// {json}`, `wait W` → `waited {json}` once every stream has W events, `collect W` →
/// `collected {json}`, `quit`).
#[must_use]
pub fn child_main(args: &[String]) -> i32 {
    let Some(addr) = arg::<std::net::SocketAddr>(args, "--addr") else {
        eprintln!("__clients scale needs --addr");
        return 2;
    };
    let protocol = arg::<String>(args, "--protocol")
        .and_then(|p| Protocol::parse(&p))
        .unwrap_or(Protocol::H1);
    let per_connection: usize = arg(args, "--per-connection").unwrap_or(1).max(1);
    let runtime = client_runtime(2);
    runtime.block_on(async move {
        let mut streams: Vec<Seen> = Vec::new();
        let mut h2 = H2Clients {
            addr,
            per_connection,
            connections: Vec::new(),
        };
        // Commands arrive on stdin, read by a plain thread (tokio's stdin feature is not on).
        let (send, mut lines) = tokio::sync::mpsc::unbounded_channel::<String>();
        std::thread::spawn(move || {
            for line in std::io::stdin().lines() {
                let Ok(line) = line else { break };
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        while let Some(line) = lines.recv().await {
            let mut words = line.split_whitespace();
            let command = words.next().unwrap_or("");
            let n: usize = words.next().and_then(|w| w.parse().ok()).unwrap_or(0);
            match command {
                "open" => {
                    let rv: u64 = words.next().and_then(|w| w.parse().ok()).unwrap_or(0);
                    let path = watch_path(rv);
                    let error = match protocol {
                        Protocol::H1 => open_h1(addr, &path, n, &mut streams).await,
                        Protocol::H2 => h2.open(&path, n, &mut streams).await,
                    };
                    let connections = match protocol {
                        Protocol::H1 => streams.len(),
                        Protocol::H2 => h2.connections.len(),
                    };
                    println!(
                        "opened {}",
                        json!({"total": streams.len(), "connections": connections, "error": error})
                    );
                }
                "wait" => {
                    let complete = wait_for(&streams, n).await;
                    println!("waited {}", json!({ "complete": complete }));
                }
                "collect" => {
                    let complete = wait_for(&streams, n).await;
                    let mut latency_us = Vec::new();
                    let mut per_write_max_us = vec![0u64; n];
                    for s in &streams {
                        if let Ok(mut seen) = s.lock() {
                            for (i, ns) in seen.iter().enumerate() {
                                let us = ns / 1000;
                                latency_us.push(us);
                                if let Some(slot) = per_write_max_us.get_mut(i) {
                                    *slot = (*slot).max(us);
                                }
                            }
                            seen.clear();
                        }
                    }
                    println!(
                        "collected {}",
                        json!({"complete": complete, "latency_us": latency_us, "per_write_max_us": per_write_max_us})
                    );
                }
                _ => break,
            }
        }
    });
    runtime.shutdown_background();
    0
}

/// Waits (up to 60 s) until every stream has seen `n` events; whether they all did.
async fn wait_for(streams: &[Seen], n: usize) -> bool {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while tokio::time::Instant::now() < deadline {
        if streams
            .iter()
            .all(|s| s.lock().map_or(true, |s| s.len() >= n))
        {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    false
}

/// Opens `n` HTTP/1.1 streams, one connection each; the first failure stops it (returned).
async fn open_h1(
    addr: std::net::SocketAddr,
    path: &str,
    n: usize,
    streams: &mut Vec<Seen>,
) -> Option<String> {
    for _ in 0..n {
        match tokio::time::timeout(Duration::from_secs(3), WatchStream::open(addr, path, None))
            .await
        {
            Ok(Ok(mut watch)) => {
                watch.set_read_buffer(4096);
                let seen = Seen::default();
                streams.push(seen.clone());
                tokio::spawn(async move {
                    while !watch.ended {
                        let read = watch
                            .read(&mut |latency| {
                                if let Ok(mut seen) = seen.lock() {
                                    seen.push(latency);
                                }
                            })
                            .await;
                        if read.is_err() {
                            break;
                        }
                    }
                });
            }
            Ok(Err(e)) => {
                return Some(format!("stream {} could not open: {e}", streams.len() + 1));
            }
            Err(_) => {
                return Some(format!(
                    "stream {}: no answer within 3 s (connected, but the server did not accept it)",
                    streams.len() + 1
                ));
            }
        }
    }
    None
}

/// A child's HTTP/2 connections: each takes `per_connection` streams, then a new one opens.
struct H2Clients {
    addr: std::net::SocketAddr,
    per_connection: usize,
    /// Each connection's request handle and the streams opened on it.
    connections: Vec<(h2::client::SendRequest<Bytes>, usize)>,
}

impl H2Clients {
    async fn connect(&mut self) -> Result<(), String> {
        let tcp = tokio::net::TcpStream::connect(self.addr)
            .await
            .map_err(|e| format!("connect: {e}"))?;
        let _ = tcp.set_nodelay(true);
        let (send, connection) = h2::client::Builder::new()
            // Room for every stream's events in flight: the client reads as they come.
            .initial_window_size(1 << 20)
            .initial_connection_window_size(1 << 30)
            .handshake::<_, Bytes>(tcp)
            .await
            .map_err(|e| format!("HTTP/2 handshake: {e}"))?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        self.connections.push((send, 0));
        Ok(())
    }

    /// Opens `n` streams; returns the first failure, if any (the streams that opened stay).
    async fn open(&mut self, path: &str, n: usize, streams: &mut Vec<Seen>) -> Option<String> {
        let uri = format!("http://{}{path}", self.addr);
        let (opened_tx, mut opened_rx) = tokio::sync::mpsc::unbounded_channel();
        let mut sent = 0;
        let mut error = None;
        for _ in 0..n {
            if self
                .connections
                .last()
                .is_none_or(|(_, count)| *count >= self.per_connection)
                && let Err(e) = self.connect().await
            {
                error = Some(format!("stream {}: {e}", streams.len() + sent + 1));
                break;
            }
            let Some((send, count)) = self.connections.last_mut() else {
                break;
            };
            let ready =
                match tokio::time::timeout(Duration::from_secs(3), send.clone().ready()).await {
                    Ok(Ok(ready)) => ready,
                    Ok(Err(e)) => {
                        error = Some(format!("stream {}: {e}", streams.len() + sent + 1));
                        break;
                    }
                    Err(_) => {
                        error = Some(format!(
                            "stream {}: the connection took no more streams within 3 s",
                            streams.len() + sent + 1
                        ));
                        break;
                    }
                };
            let mut ready = ready;
            let request = match hyper::Request::get(uri.as_str()).body(()) {
                Ok(request) => request,
                Err(e) => {
                    error = Some(e.to_string());
                    break;
                }
            };
            let response = match ready.send_request(request, true) {
                Ok((response, _)) => response,
                Err(e) => {
                    error = Some(format!("stream {}: {e}", streams.len() + sent + 1));
                    break;
                }
            };
            *count += 1;
            sent += 1;
            let seen = Seen::default();
            let opened = opened_tx.clone();
            tokio::spawn(async move {
                let response = match response.await {
                    Ok(response) if response.status() == 200 => response,
                    Ok(response) => {
                        let _ =
                            opened.send((None, Some(format!("answered {}", response.status()))));
                        return;
                    }
                    Err(e) => {
                        let _ = opened.send((None, Some(e.to_string())));
                        return;
                    }
                };
                let _ = opened.send((Some(seen.clone()), None));
                drop(opened);
                let mut body = response.into_body();
                let mut partial: Vec<u8> = Vec::new();
                while let Some(data) = body.data().await {
                    let Ok(data) = data else { break };
                    let _ = body.flow_control().release_capacity(data.len());
                    partial.extend_from_slice(&data);
                    let mut start = 0;
                    while let Some(end) = partial[start..].iter().position(|b| *b == b'\n') {
                        if let Some(latency) = event_latency(&partial[start..start + end])
                            && let Ok(mut seen) = seen.lock()
                        {
                            seen.push(latency);
                        }
                        start += end + 1;
                    }
                    partial.drain(..start);
                }
            });
        }
        drop(opened_tx);
        // Every response head (or failure) of the streams sent.
        let deadline = tokio::time::Instant::now()
            + Duration::from_secs(30)
            + Duration::from_millis(sent as u64);
        let mut answered = 0;
        while answered < sent {
            match tokio::time::timeout_at(deadline, opened_rx.recv()).await {
                Ok(Some((Some(seen), _))) => {
                    streams.push(seen);
                    answered += 1;
                }
                Ok(Some((None, failure))) => {
                    answered += 1;
                    error.get_or_insert_with(|| {
                        format!("a stream could not open: {}", failure.unwrap_or_default())
                    });
                }
                Ok(None) => break,
                Err(_) => {
                    error.get_or_insert_with(|| {
                        format!(
                            "{} of {sent} streams got no response head in time",
                            sent - answered
                        )
                    });
                    break;
                }
            }
        }
        error
    }
}

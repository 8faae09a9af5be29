//! Suite `scale`: the largest number of concurrent HTTP watch streams one server process holds,
//! with the server's RSS per stream and the delivery latency of a write to every stream at each
//! size.
//!
//! The server runs in the bench process (memory store, 2-worker runtime); the watch clients run
//! in child processes (the bench binary re-run as `__clients scale`), so client file
//! descriptors are split across processes and only the server's own descriptors bound the size.
//! The bench raises RLIMIT_NOFILE to its hard limit; a stream costs the server one descriptor,
//! so the server stops accepting at about that limit. The ramp goes up in steps and stops at
//! the first step where a stream could not open; that step's error is reported as the reason.
//! RSS is read through a /proc handle opened beforehand, so it still reads when every
//! descriptor is in use.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use watchkeeper::config::ServeArgs;

use crate::e2e::{CONFIGMAPS, Child, Running, arg, client_runtime, seed, watch_path};
use crate::http::{Conn, WatchStream, now_ns};
use crate::report::{Table, f};
use crate::{Latency, Options, median};

/// Streams per client process (well under each child's own descriptor limit).
const PER_CHILD: usize = 7_000;

/// Suite `scale`.
///
/// # Errors
/// The server or a client process failed.
pub fn scale(options: &Options) -> Result<Vec<Table>, String> {
    let limit = crate::sys::fd_limit() as usize;
    let (steps, writes, interval): (Vec<usize>, usize, Duration) = if options.smoke {
        (vec![50, 200], 3, Duration::from_millis(50))
    } else {
        let mut steps: Vec<usize> = [1_000, 5_000, 10_000, 15_000]
            .into_iter()
            .filter(|s| *s < limit)
            .collect();
        // The last step asks for as many streams as the server has descriptors: it must stop.
        steps.push(limit);
        (steps, 10, Duration::from_millis(500))
    };
    let mut rss = crate::sys::RssReader::open();
    let running = Running::start(ServeArgs::default())?;
    let addr = running.addr;
    // Streams open at the latest resourceVersion, so they receive only the writes that follow.
    let mut rv = running.runtime.block_on(seed(addr, 1, 1024))?;
    let writer_rt = client_runtime(1);
    let mut conn = writer_rt
        .block_on(Conn::connect(addr))
        .map_err(|e| e.to_string())?;
    let most = *steps.last().unwrap_or(&1);
    let mut children = Vec::new();
    for _ in 0..most.div_ceil(PER_CHILD) {
        children.push(Child::spawn(
            &options.exe,
            &["scale".into(), "--addr".into(), addr.to_string()],
        )?);
    }
    let rss_base = rss.rss_bytes();
    let mut table = Table::new(
        "scale",
        "8. Scale: concurrent HTTP watch streams on one server process",
        &[
            "streams asked",
            "streams open",
            "server RSS per stream, KiB",
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
    for &step in &steps {
        // Spread the new streams over the children, each up to PER_CHILD.
        let mut want = step.saturating_sub(counts.iter().sum());
        let mut asks = vec![0usize; children.len()];
        while want > 0 {
            let mut gave = false;
            for (i, ask) in asks.iter_mut().enumerate() {
                if want > 0 && counts[i] + *ask < PER_CHILD {
                    *ask += 1;
                    want -= 1;
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
        for (i, child) in children.iter_mut().enumerate() {
            let answer: Value =
                serde_json::from_str(&child.expect("opened")?).map_err(|e| e.to_string())?;
            counts[i] = answer["total"].as_u64().unwrap_or(0) as usize;
            if let Some(error) = answer["error"].as_str() {
                errors.push(error.to_owned());
            }
        }
        let open: usize = counts.iter().sum();
        // Let the server settle (accept and register every stream) before reading RSS.
        std::thread::sleep(Duration::from_millis(500));
        let rss_now = rss.rss_bytes();
        let fds = crate::sys::open_fds();
        // Writes, each carrying its send time (CLOCK_MONOTONIC, shared with the children).
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
            std::thread::sleep(interval);
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
        let rss_kib = rss_now.saturating_sub(rss_base) as f64 / 1024.0 / open.max(1) as f64;
        let stopped = errors.first().cloned().or(write_error.clone());
        eprintln!(
            "  scale {step} asked: {open} open, {rss_kib:.1} KiB/stream, fds {fds:?}, p50 {:.1} p99 {:.1} max {:.1} ms, all {all_ms:.1} ms, complete {complete}, stopped by {stopped:?}",
            latency.p50 / 1000.0,
            latency.p99 / 1000.0,
            latency.max / 1000.0
        );
        table.row(vec![
            step.to_string(),
            open.to_string(),
            f(rss_kib, 1),
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
        table.raw(json!({"asked": step, "open": open, "rss_bytes": rss_now, "rss_base": rss_base, "fds": fds, "latency": latency, "per_write_max_us": per_write, "errors": errors, "write_error": write_error}));
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
    table.note(format!("Server: in the bench process (memory store, 2-worker runtime), RLIMIT_NOFILE raised to its hard limit, {limit} here (the hard limit cannot be raised in this container: setrlimit above it is refused), and each stream costs it one descriptor. Clients: child processes of up to {PER_CHILD} streams each (plain `watch=true` from the current resourceVersion, one TCP connection per stream, every event parsed)."));
    table.note(format!("Per step: the new streams open (3 s timeout each; a child stops at its first failure), the server settles 0.5 s, then {writes} merge-PATCHes of one ~1 KiB ConfigMap, one every {} ms, each carrying its send time; delivery latency is from before the PATCH to a stream parsing the event, over every (stream, write) pair; \"write to all streams\" is the slowest stream's latency per write. The clients (JSON parsing on their own 2-thread runtimes) share the 2 cores with the server, so at large sizes the latency includes the clients' own parsing time.", interval.as_millis()));
    table.note("RSS per stream: the server process's RSS growth since before the first stream, divided by the streams open.");
    Ok(vec![table])
}

/// The `__clients scale` child: opens and holds streams on command (`open N RV` → `opened
/// {json}`, `collect W` → `collected {json}`, `quit`).
#[must_use]
pub fn child_main(args: &[String]) -> i32 {
    let Some(addr) = arg::<std::net::SocketAddr>(args, "--addr") else {
        eprintln!("__clients scale needs --addr");
        return 2;
    };
    let runtime = client_runtime(2);
    runtime.block_on(async move {
        let mut streams: Vec<Arc<Mutex<Vec<u64>>>> = Vec::new();
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
                    let mut error = None;
                    for _ in 0..n {
                        match tokio::time::timeout(
                            Duration::from_secs(3),
                            WatchStream::open(addr, &path, None),
                        )
                        .await
                        {
                            Ok(Ok(mut watch)) => {
                                watch.set_read_buffer(4096);
                                let seen = Arc::new(Mutex::new(Vec::new()));
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
                                error = Some(format!(
                                    "stream {} could not open: {e}",
                                    streams.len() + 1
                                ));
                                break;
                            }
                            Err(_) => {
                                error = Some(format!(
                                    "stream {}: no answer within 3 s (connected, but the server did not accept it)",
                                    streams.len() + 1
                                ));
                                break;
                            }
                        }
                    }
                    println!(
                        "opened {}",
                        json!({"total": streams.len(), "error": error})
                    );
                }
                "collect" => {
                    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
                    let mut complete = false;
                    while tokio::time::Instant::now() < deadline {
                        if streams
                            .iter()
                            .all(|s| s.lock().map_or(true, |s| s.len() >= n))
                        {
                            complete = true;
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
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

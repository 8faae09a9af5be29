//! Suite `etcd`: the same workloads against Debian's etcd 3.4 (its own gRPC watches through
//! etcd-client) and against watchkeeper (HTTP watches, memory store), interleaved: the
//! slow-watcher tax (table 7) and RSS per idle watch (7b); suite `etcd-fanout`: fan-out
//! throughput with server CPU per delivered event (7c), next to the bare hyper pipe
//! ([`crate::pipe`]).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use etcd_client::{Client, WatchOptions};
use serde_json::json;
use watchkeeper_core::WatchMode;

use crate::http::now_ns;
use crate::inproc::Pattern;
use crate::report::{Table, f, x};
use crate::{Latency, Options, median};

/// A private etcd on loopback ports with its data under /dev/shm.
pub(crate) struct Etcd {
    child: Child,
    dir: PathBuf,
    pub(crate) endpoint: String,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_or(0, |a| a.port())
}

impl Etcd {
    fn start() -> Result<Etcd, String> {
        Etcd::start_on(None)
    }

    /// Starts etcd on the given (client, peer) ports, or on free ports the kernel picks.
    pub(crate) fn start_on(ports: Option<(u16, u16)>) -> Result<Etcd, String> {
        let dir = PathBuf::from(format!(
            "/dev/shm/watchkeeper-bench-etcd-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let (client, peer) = ports.unwrap_or_else(|| (free_port(), free_port()));
        let endpoint = format!("http://127.0.0.1:{client}");
        let peer_url = format!("http://127.0.0.1:{peer}");
        let child = Command::new("etcd")
            .args(["--name", "bench", "--data-dir"])
            .arg(&dir)
            .args([
                "--listen-client-urls",
                &endpoint,
                "--advertise-client-urls",
                &endpoint,
            ])
            .args([
                "--listen-peer-urls",
                &peer_url,
                "--initial-advertise-peer-urls",
                &peer_url,
            ])
            .args(["--initial-cluster", &format!("bench={peer_url}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start etcd (is it on PATH?): {e}"))?;
        Ok(Etcd {
            child,
            dir,
            endpoint,
        })
    }

    /// The etcd process's id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    fn rss(&self) -> u64 {
        std::fs::read_to_string(format!("/proc/{}/statm", self.child.id()))
            .ok()
            .and_then(|s| {
                s.split_whitespace()
                    .nth(1)
                    .and_then(|v| v.parse::<u64>().ok())
            })
            .unwrap_or(0)
            * 4096
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub(crate) async fn connect(endpoint: &str) -> Result<Client, String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(mut c) = Client::connect([endpoint], None).await
            && c.status().await.is_ok()
        {
            return Ok(c);
        }
        if Instant::now() >= deadline {
            return Err("etcd did not become ready".to_owned());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn value(payload: usize) -> Vec<u8> {
    let mut v = format!("{:020}", now_ns()).into_bytes();
    v.resize(payload, b'x');
    v
}

/// One etcd tax run: healthy p99 with `stalled` never-reading watchers, each on its own
/// connection. Returns (healthy latency, stalled watchers still open at the end).
async fn etcd_tax(endpoint: &str, stalled: usize, rate: f64, secs: f64) -> Result<Latency, String> {
    let writer = connect(endpoint).await?;
    let mut healthy_client = connect(endpoint).await?;
    let prefix = format!("/bench/{}/", now_ns());
    let opts = || Some(WatchOptions::new().with_prefix());
    let mut healthy = healthy_client
        .watch(prefix.clone(), opts())
        .await
        .map_err(|e| e.to_string())?;
    let mut hold = Vec::new();
    for _ in 0..stalled {
        let mut c = connect(endpoint).await?;
        let stream = c
            .watch(prefix.clone(), opts())
            .await
            .map_err(|e| e.to_string())?;
        hold.push((c, stream));
    }
    let events = (rate * secs) as usize;
    let write = tokio::spawn(async move {
        let mut kv = writer.kv_client();
        let start = Instant::now();
        for i in 0..events {
            let due = start + Duration::from_secs_f64(i as f64 / rate);
            tokio::time::sleep_until(due.into()).await;
            let _ = kv
                .put(format!("{prefix}{}", i % 100), value(1024), None)
                .await;
        }
    });
    let mut latencies = Vec::with_capacity(events);
    while latencies.len() < events {
        match tokio::time::timeout(Duration::from_secs(10), healthy.message()).await {
            Ok(Ok(Some(resp))) => {
                for event in resp.events() {
                    if let Some(kv) = event.kv()
                        && let Some(sent) =
                            std::str::from_utf8(&kv.value()[..20.min(kv.value().len())])
                                .ok()
                                .and_then(|s| s.parse::<u64>().ok())
                    {
                        latencies.push(now_ns().saturating_sub(sent));
                    }
                }
            }
            _ => break,
        }
    }
    let _ = write.await;
    drop(hold);
    Ok(Latency::from_nanos(latencies))
}

/// One etcd fan-out run: `n` watchers (own connection each, all reading) on one prefix, and
/// `rate` puts/s of 1 KiB values over 100 keys for `secs`, up to `inflight` in flight.
async fn etcd_fanout(
    endpoint: &str,
    pid: u32,
    n: usize,
    rate: f64,
    secs: f64,
    inflight: usize,
) -> Result<FanoutFigures, String> {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    let prefix = format!("/fanout/{}/", now_ns());
    let mut watches = Vec::with_capacity(n);
    for _ in 0..n {
        let mut c = connect(endpoint).await?;
        let stream = c
            .watch(prefix.clone(), Some(WatchOptions::new().with_prefix()))
            .await
            .map_err(|e| e.to_string())?;
        watches.push((c, stream));
    }
    let mut writers = Vec::with_capacity(inflight);
    for _ in 0..inflight {
        writers.push(connect(endpoint).await?.kv_client());
    }
    let delivered = Arc::new(AtomicU64::new(0));
    let target = Arc::new(AtomicU64::new(u64::MAX));
    let last_delivery = Arc::new(AtomicU64::new(0));
    let cpu0 = crate::sys::cpu_seconds_of(pid);
    let start_ns = now_ns();
    let deadline = tokio::time::Instant::now() + Duration::from_secs_f64(secs + DRAIN_SECS);
    let mut readers = Vec::with_capacity(n);
    for (client, mut stream) in watches {
        let (delivered, target, last_delivery) =
            (delivered.clone(), target.clone(), last_delivery.clone());
        readers.push(tokio::spawn(async move {
            let _client = client;
            let mut mine = 0u64;
            // Re-checks the target every 200 ms: it is only known once the writes are done.
            while mine < target.load(Ordering::Acquire) {
                if tokio::time::Instant::now() >= deadline {
                    return false;
                }
                match tokio::time::timeout(Duration::from_millis(200), stream.message()).await {
                    Ok(Ok(Some(resp))) => {
                        let events = resp.events().len() as u64;
                        if events > 0 {
                            mine += events;
                            delivered.fetch_add(events, Ordering::Relaxed);
                            last_delivery.fetch_max(now_ns(), Ordering::Relaxed);
                        }
                    }
                    Ok(_) => return false,
                    Err(_) => {}
                }
            }
            true
        }));
    }
    let events = (rate * secs) as usize;
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(inflight);
    for (j, mut kv) in writers.into_iter().enumerate() {
        let prefix = prefix.clone();
        tasks.push(tokio::spawn(async move {
            let mut ok = 0u64;
            for i in (j..events).step_by(inflight) {
                let due = start + Duration::from_secs_f64(i as f64 / rate);
                tokio::time::sleep_until(due.into()).await;
                if kv
                    .put(format!("{prefix}{}", i % 100), value(1024), None)
                    .await
                    .is_ok()
                {
                    ok += 1;
                }
            }
            ok
        }));
    }
    let mut writes = 0;
    for task in tasks {
        writes += task.await.unwrap_or(0);
    }
    let write_secs = start.elapsed().as_secs_f64();
    target.store(writes, Ordering::Release);
    let mut complete = true;
    for reader in readers {
        complete &= reader.await.unwrap_or(false);
    }
    let cpu1 = crate::sys::cpu_seconds_of(pid);
    let delivered = delivered.load(Ordering::Relaxed);
    let delivery_secs = (last_delivery
        .load(Ordering::Relaxed)
        .saturating_sub(start_ns)) as f64
        / 1e9;
    complete &= delivered == writes * n as u64;
    Ok(FanoutFigures {
        writes_per_second: writes as f64 / write_secs.max(1e-9),
        per_second: delivered as f64 / delivery_secs.max(1e-9),
        cpu_us: (cpu1 - cpu0) * 1e6 / (delivered as f64).max(1.0),
        complete,
        raw: json!({"delivered": delivered, "expected": writes * n as u64, "writes": writes, "write_secs": write_secs, "delivery_secs": delivery_secs, "cpu_seconds": cpu1 - cpu0}),
    })
}

/// The figures of one fan-out run, either system.
struct FanoutFigures {
    writes_per_second: f64,
    per_second: f64,
    cpu_us: f64,
    complete: bool,
    raw: serde_json::Value,
}

/// How long watchers may take to deliver everything after the last write.
const DRAIN_SECS: f64 = 60.0;

/// The fan-out grid of table 7c: (watchers, writes/s asked).
fn fanout_grid(options: &Options) -> Vec<(usize, f64)> {
    if !options.fanout_grid.is_empty() {
        return options.fanout_grid.clone();
    }
    if options.smoke {
        vec![(5, 100.0)]
    } else {
        vec![
            (100, 100.0),
            (100, 1_000.0),
            (1_000, 100.0),
            (1_000, 1_000.0),
            (10_000, 100.0),
        ]
    }
}

/// Watchers above which table 7c does not run etcd (each etcd watcher is a client
/// connection from this process).
const ETCD_MAX_WATCHERS: usize = 1_000;

/// Table 7c: delivered events/s and server CPU per delivered event of watchkeeper, the bare
/// hyper pipe ([`crate::pipe`]) and etcd, interleaved per round.
fn fanout_table(
    options: &Options,
    runtime: &tokio::runtime::Runtime,
    etcd: &Etcd,
) -> Result<Table, String> {
    const INFLIGHT: usize = 16;
    let secs = if options.smoke { 0.3 } else { 2.0 };
    let mut table = Table::new(
        "etcd-fanout",
        &format!(
            "7c. Fan-out throughput side by side (watchkeeper, a bare hyper pipe, etcd 3.4): N watchers (all reading) × write rate, {secs} s of writes per run, {INFLIGHT} writes in flight"
        ),
        &[
            "watchers",
            "writes/s asked",
            "system",
            "writes/s achieved",
            "events delivered/s",
            "server CPU µs per delivered event",
            "complete",
            "CPU per event watchkeeper / bare pipe",
            "CPU per event watchkeeper / etcd",
        ],
    );
    for (n, rate) in fanout_grid(options) {
        let with_etcd = n <= ETCD_MAX_WATCHERS;
        let mut e: Vec<FanoutFigures> = Vec::new();
        let mut w: Vec<FanoutFigures> = Vec::new();
        let mut p: Vec<FanoutFigures> = Vec::new();
        let (mut pipe_ratio, mut etcd_ratio) = (Vec::new(), Vec::new());
        let figures = |one: crate::e2e::FanoutRun| FanoutFigures {
            writes_per_second: one.writes_per_second,
            per_second: one.per_second,
            cpu_us: one.cpu_us,
            complete: one.complete,
            raw: one.raw,
        };
        for _ in 0..options.runs {
            let a = if with_etcd {
                Some(runtime.block_on(etcd_fanout(
                    &etcd.endpoint,
                    etcd.child.id(),
                    n,
                    rate,
                    secs,
                    INFLIGHT,
                ))?)
            } else {
                None
            };
            let b = figures(crate::e2e::fanout_http_once(
                options, n, rate, secs, INFLIGHT,
            )?);
            let c = figures(crate::e2e::fanout_pipe_once(
                options, n, rate, secs, INFLIGHT,
            )?);
            eprintln!(
                "  fanout {n} x {rate}/s: etcd {}; watchkeeper {:.0} events/s {:.2} CPU-µs/event ({:.0} writes/s); pipe {:.0} events/s {:.2} CPU-µs/event ({:.0} writes/s)",
                a.as_ref().map_or("not run".to_owned(), |a| format!(
                    "{:.0} events/s {:.2} CPU-µs/event",
                    a.per_second, a.cpu_us
                )),
                b.per_second,
                b.cpu_us,
                b.writes_per_second,
                c.per_second,
                c.cpu_us,
                c.writes_per_second
            );
            table.raw(json!({"watchers": n, "rate": rate, "secs": secs, "etcd": a.as_ref().map(|a| &a.raw), "watchkeeper": b.raw, "pipe": c.raw}));
            pipe_ratio.push(b.cpu_us / c.cpu_us.max(1e-9));
            if let Some(a) = a {
                etcd_ratio.push(b.cpu_us / a.cpu_us.max(1e-9));
                e.push(a);
            }
            w.push(b);
            p.push(c);
        }
        for (name, runs, last) in [
            ("etcd 3.4 (gRPC)", &e, false),
            ("bare hyper pipe (HTTP/1.1)", &p, false),
            ("watchkeeper (HTTP/1.1, memory store)", &w, true),
        ] {
            if runs.is_empty() {
                continue;
            }
            let pick =
                |g: fn(&FanoutFigures) -> f64| median(&runs.iter().map(g).collect::<Vec<_>>());
            table.row(vec![
                n.to_string(),
                f(rate, 0),
                name.into(),
                f(pick(|r| r.writes_per_second), 0),
                f(pick(|r| r.per_second), 0),
                f(pick(|r| r.cpu_us), 2),
                runs.iter().all(|r| r.complete).to_string(),
                if last {
                    x(median(&pipe_ratio))
                } else {
                    String::new()
                },
                if last && !etcd_ratio.is_empty() {
                    x(median(&etcd_ratio))
                } else {
                    String::new()
                },
            ]);
        }
    }
    table.note(format!("Order per round: etcd, watchkeeper, bare pipe (A, B, C, A, B, C); ratios are medians of per-round ratios. etcd runs up to {ETCD_MAX_WATCHERS} watchers. etcd: one etcd 3.4 process (data in /dev/shm), each watcher on its own client connection, all on one key prefix, read by tasks in the bench process (2-worker runtime); 16 writer connections put 1 KiB values over 100 keys at their due times. watchkeeper: table 6's setup (in-process server, memory store; watchers and 16 merge-PATCH writers of 100 ~1 KiB ConfigMaps in a child process). Bare pipe: the same child process against a minimal hyper HTTP/1.1 server in the bench process (no cache, no store): each PATCH becomes one pre-encoded ~1.1 KiB MODIFIED event, encoded once and shared by every watcher's bounded queue ({} events; a full queue makes the write wait); each watch response writes up to {} queued events per chunk.", crate::pipe::QUEUE_CAPACITY, crate::pipe::BATCH));
    table.note(format!("Server CPU: utime+stime delta of the server process (etcd: /proc/<etcd pid>/stat; watchkeeper and the pipe: /proc/self/stat of the bench process, which only serves while the clients run in the child), etcd: from just before the first write to the last watcher's last event; watchkeeper and the pipe: from the child's go (watches open) to its done line, divided by the events delivered. Events delivered/s: deliveries counted by the clients over the time from the first write to the last delivery. Complete: every watcher got every write (etcd: within {DRAIN_SECS} s after the writes). All clients compete with the server for the same 2 cores."));
    Ok(table)
}

/// Suite `etcd-fanout`: table 7c (fan-out throughput and server CPU per delivered event of
/// watchkeeper, the bare hyper pipe and etcd, interleaved).
///
/// # Errors
/// etcd could not start or a run failed.
pub fn etcd_fanout_suite(options: &Options) -> Result<Vec<Table>, String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let etcd = Etcd::start_on(options.port_base.map(|p| (p, p + 1)))?;
    runtime.block_on(connect(&etcd.endpoint))?;
    let table = fanout_table(options, &runtime, &etcd)?;
    drop(etcd);
    runtime.shutdown_timeout(Duration::from_secs(5));
    Ok(vec![table])
}

/// Suite `etcd`.
///
/// # Errors
/// etcd could not start or a run failed.
pub fn etcd(options: &Options) -> Result<Vec<Table>, String> {
    let (rates, stalled, secs, idle) = if options.smoke {
        (vec![100.0], 5, 0.5, 20)
    } else {
        (vec![100.0, 1000.0], 100, 10.0, 1000)
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let etcd = Etcd::start()?;
    let endpoint = etcd.endpoint.clone();
    runtime.block_on(connect(&endpoint))?;
    let mut table = Table::new(
        "etcd",
        &format!(
            "7. etcd 3.4 side by side: healthy p99 with {stalled} never-reading watchers, {secs} s per run"
        ),
        &[
            "system",
            "writes/s",
            "p99 µs, 0 stalled",
            &format!("p99 µs, {stalled} stalled"),
            "p99 ratio (the tax)",
        ],
    );
    for &rate in &rates {
        let mut e = (Vec::new(), Vec::new(), Vec::new());
        let mut w = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..options.runs {
            let base = runtime.block_on(etcd_tax(&endpoint, 0, rate, secs))?;
            let tax = runtime.block_on(etcd_tax(&endpoint, stalled, rate, secs))?;
            eprintln!("  etcd {rate}/s: p99 {:.0} -> {:.0} µs", base.p99, tax.p99);
            let wbase =
                crate::e2e::tax_http_run(WatchMode::StallResume, Pattern::Never, 0, rate, secs)?;
            let wtax = crate::e2e::tax_http_run(
                WatchMode::StallResume,
                Pattern::Never,
                stalled,
                rate,
                secs,
            )?;
            eprintln!(
                "  watchkeeper {rate}/s: p99 {:.0} -> {:.0} µs",
                wbase.latency.p99, wtax.latency.p99
            );
            table.raw(json!({"rate": rate, "etcd": [base, tax], "watchkeeper": [wbase.latency, wtax.latency]}));
            e.0.push(base.p99);
            e.1.push(tax.p99);
            e.2.push(tax.p99 / base.p99);
            w.0.push(wbase.latency.p99);
            w.1.push(wtax.latency.p99);
            w.2.push(wtax.latency.p99 / wbase.latency.p99);
        }
        for (name, s) in [
            ("etcd 3.4 (gRPC)", &e),
            ("watchkeeper (HTTP, memory store)", &w),
        ] {
            table.row(vec![
                name.into(),
                f(rate, 0),
                f(median(&s.0), 0),
                f(median(&s.1), 0),
                x(median(&s.2)),
            ]);
        }
    }
    table.note("Order per round: etcd 0 stalled, etcd N stalled, watchkeeper 0, watchkeeper N. etcd: each watcher on its own client connection, all on one key prefix; a stalled watcher never polls its stream (HTTP/2 flow control stops it). watchkeeper: stalled watches set SO_RCVBUF 4096 and never read. 1 KiB values; latency from before the write to the healthy watcher's receipt (both include the write path).");
    // RSS per idle watch.
    let rss_before = etcd.rss();
    let held = runtime.block_on(async {
        let mut held = Vec::new();
        for _ in 0..idle {
            let mut c = connect(&endpoint).await?;
            let s = c
                .watch("/idle/", Some(WatchOptions::new().with_prefix()))
                .await
                .map_err(|e| e.to_string())?;
            held.push((c, s));
        }
        Ok::<_, String>(held)
    })?;
    std::thread::sleep(Duration::from_millis(500));
    let etcd_rss = (etcd.rss().saturating_sub(rss_before)) as f64 / idle as f64 / 1024.0;
    drop(held);
    let wk_rss = crate::e2e::idle_rss_per_watch(options, idle)?;
    let mut memory = Table::new(
        "etcd",
        &format!("7b. RSS per idle watch, {idle} watches, one connection each"),
        &["system", "RSS per watch, KiB", "watchkeeper / etcd"],
    );
    memory.row(vec![
        "etcd 3.4 (gRPC)".into(),
        f(etcd_rss, 1),
        String::new(),
    ]);
    memory.row(vec![
        "watchkeeper (HTTP)".into(),
        f(wk_rss, 1),
        x(wk_rss / etcd_rss),
    ]);
    memory.note("Server RSS growth while the watches opened, divided by their number (etcd: /proc/<pid>/statm; watchkeeper: the bench process with the clients in a child process). Not interleaved (one measurement each).");
    memory.raw(json!({"etcd_kib": etcd_rss, "watchkeeper_kib": wk_rss, "watches": idle}));
    drop(etcd);
    runtime.shutdown_timeout(Duration::from_secs(5));
    Ok(vec![table, memory])
}

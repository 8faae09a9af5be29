//! End-to-end suites: an in-process watchkeeper server (memory store) on its own tokio
//! runtime, HTTP clients on raw TCP on another runtime or in a child process.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use watchkeeper::Server;
use watchkeeper::config::{ServeArgs, ServeConfig};
use watchkeeper_core::{TerminationReason, WatchMode};

use crate::http::{Conn, WatchStream, now_ns};
use crate::inproc::{Pattern, TaxRun, tax_sizes, tax_table};
use crate::report::Table;
use crate::{Latency, Options};

/// A server on its own multi-thread runtime (2 workers, like the machine).
pub struct Running {
    /// The server's runtime.
    pub runtime: tokio::runtime::Runtime,
    /// The server.
    pub server: Option<Server>,
    /// Its address.
    pub addr: SocketAddr,
}

impl Running {
    /// Starts a memory-store server with `args` (listen and store are filled in).
    ///
    /// # Errors
    /// The server could not start.
    pub fn start(args: ServeArgs) -> Result<Running, String> {
        // Two workers (one per CPU of the 2-core machines the figures come from) unless the
        // run asks for `--runtime-workers`, as the server's own runtime is built.
        let workers = match args.runtime_workers {
            Some(n) if n > 0 => n,
            _ => 2,
        };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .thread_name("server")
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        // Benchmarks open up to 10,000 watches as one (anonymous) user and measure the
        // server, not its admission limits: those are off unless a benchmark sets them.
        let args = ServeArgs {
            listen: Some("127.0.0.1:0".parse().expect("address")),
            store: args.store.or(Some("memory".to_owned())),
            max_watches: args.max_watches.or(Some(0)),
            max_watches_per_user: args.max_watches_per_user.or(Some(0)),
            max_requests_inflight: args.max_requests_inflight.or(Some(0)),
            max_mutating_requests_inflight: args.max_mutating_requests_inflight.or(Some(0)),
            max_requests_inflight_per_user: args.max_requests_inflight_per_user.or(Some(0)),
            max_connections: args.max_connections.or(Some(0)),
            // Unlimited in-flight requests need API Priority and Fairness off (its levels
            // share a positive number of seats).
            enable_priority_and_fairness: args.enable_priority_and_fairness.or(Some(false)),
            ..args
        };
        let server = runtime.block_on(async {
            let config = ServeConfig::from_args(args).map_err(|e| e.to_string())?;
            let server = watchkeeper::start(config)
                .await
                .map_err(|e| e.to_string())?;
            // Generous: under valgrind (`__profile` with callgrind) a start takes minutes.
            tokio::time::timeout(Duration::from_secs(900), server.ready())
                .await
                .map_err(|_| "server not ready".to_owned())?;
            Ok::<_, String>(server)
        })?;
        let addr = server.addr;
        Ok(Running {
            runtime,
            server: Some(server),
            addr,
        })
    }

    /// The configmaps cache (its metrics are what the benchmarks read).
    #[must_use]
    pub fn configmaps(&self) -> watchkeeper_core::WatchCache {
        self.server
            .as_ref()
            .expect("running")
            .app
            .resource("", "v1", "configmaps")
            .expect("configmaps")
            .cache()
            .clone()
    }

    /// The server's shared state.
    #[must_use]
    pub fn app(&self) -> &watchkeeper::http::App {
        &self.server.as_ref().expect("running").app
    }

    /// Stops the server.
    pub fn stop(mut self) {
        if let Some(server) = self.server.take() {
            self.runtime.block_on(server.shutdown());
        }
        self.runtime.shutdown_timeout(Duration::from_secs(5));
    }
}

/// A client runtime.
pub(crate) fn client_runtime(threads: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .thread_name("client")
        .enable_all()
        .build()
        .expect("client runtime")
}

/// A ConfigMap with `payload` bytes of data and a `sent` timestamp.
#[must_use]
pub fn configmap(name: &str, payload: usize) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": {"app": "bench"}},
        "data": {"payload": "x".repeat(payload), "sent": "0"}
    })
}

pub(crate) const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";

/// Creates `count` configmaps of `payload` bytes; returns the list's resource version.
///
/// # Errors
/// A request failed.
pub async fn seed(addr: SocketAddr, count: usize, payload: usize) -> Result<u64, String> {
    let mut conn = Conn::connect(addr).await.map_err(|e| e.to_string())?;
    for i in 0..count {
        let body = configmap(&format!("cm-{i}"), payload).to_string();
        let (status, text) = conn
            .request("POST", CONFIGMAPS, "application/json", body.as_bytes())
            .await
            .map_err(|e| e.to_string())?;
        if status != 201 && status != 409 {
            return Err(format!(
                "create answered {status}: {}",
                String::from_utf8_lossy(&text)
            ));
        }
    }
    let (status, list) = conn
        .request("GET", CONFIGMAPS, "application/json", b"")
        .await
        .map_err(|e| e.to_string())?;
    let list: Value = serde_json::from_slice(&list).map_err(|e| format!("list {status}: {e}"))?;
    list["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| "list without resourceVersion".to_owned())
}

pub(crate) fn watch_path(rv: u64) -> String {
    format!("{CONFIGMAPS}?watch=true&resourceVersion={rv}")
}

/// Paces `events` merge-PATCHes (a fresh `data.sent` each) over `objects` configmaps at `rate`.
/// Returns (writes that succeeded, seconds taken).
async fn write_patches(addr: SocketAddr, events: usize, objects: usize, rate: f64) -> (u64, f64) {
    let (ok, secs, _) = write_patches_timed(addr, events, objects, rate).await;
    (ok, secs)
}

/// As [`write_patches`], with each write's time from its request to its answer, ms.
async fn write_patches_timed(
    addr: SocketAddr,
    events: usize,
    objects: usize,
    rate: f64,
) -> (u64, f64, Vec<f64>) {
    let Ok(mut conn) = Conn::connect(addr).await else {
        return (0, 0.0, Vec::new());
    };
    let start = Instant::now();
    let mut ok = 0;
    let mut latency_ms = Vec::with_capacity(events);
    for i in 0..events {
        if rate > 0.0 {
            let due = start + Duration::from_secs_f64(i as f64 / rate);
            tokio::time::sleep_until(due.into()).await;
        }
        let body = format!("{{\"data\":{{\"sent\":\"{}\"}}}}", now_ns());
        let path = format!("{CONFIGMAPS}/cm-{}", i % objects);
        let sent = Instant::now();
        match conn
            .request(
                "PATCH",
                &path,
                "application/merge-patch+json",
                body.as_bytes(),
            )
            .await
        {
            Ok((200, _)) => {
                ok += 1;
                latency_ms.push(sent.elapsed().as_secs_f64() * 1e3);
            }
            Ok(_) => {}
            Err(_) => {
                if let Ok(c) = Conn::connect(addr).await {
                    conn = c;
                }
            }
        }
    }
    (ok, start.elapsed().as_secs_f64(), latency_ms)
}

/// As [`write_patches_timed`] with up to `inflight` PATCHes in flight: `inflight` keep-alive
/// connections, connection `j` sending writes `j`, `j + inflight`, ... each at its due time
/// (or as soon as its previous answer came back, if later). Returns (writes that succeeded,
/// seconds taken, each successful write's time from request to answer in ms).
async fn write_patches_inflight(
    addr: SocketAddr,
    events: usize,
    objects: usize,
    rate: f64,
    inflight: usize,
) -> (u64, f64, Vec<f64>) {
    if inflight <= 1 {
        return write_patches_timed(addr, events, objects, rate).await;
    }
    let start = Instant::now();
    let mut tasks = Vec::new();
    for j in 0..inflight {
        tasks.push(tokio::spawn(async move {
            let mut latency_ms = Vec::new();
            let Ok(mut conn) = Conn::connect(addr).await else {
                return (0u64, latency_ms);
            };
            let mut ok = 0;
            for i in (j..events).step_by(inflight) {
                if rate > 0.0 {
                    let due = start + Duration::from_secs_f64(i as f64 / rate);
                    tokio::time::sleep_until(due.into()).await;
                }
                let body = format!("{{\"data\":{{\"sent\":\"{}\"}}}}", now_ns());
                let path = format!("{CONFIGMAPS}/cm-{}", i % objects);
                let sent = Instant::now();
                match conn
                    .request(
                        "PATCH",
                        &path,
                        "application/merge-patch+json",
                        body.as_bytes(),
                    )
                    .await
                {
                    Ok((200, _)) => {
                        ok += 1;
                        latency_ms.push(sent.elapsed().as_secs_f64() * 1e3);
                    }
                    Ok(_) => {}
                    Err(_) => {
                        if let Ok(c) = Conn::connect(addr).await {
                            conn = c;
                        }
                    }
                }
            }
            (ok, latency_ms)
        }));
    }
    let mut ok = 0;
    let mut latency_ms = Vec::new();
    for task in tasks {
        let (n, latencies) = task.await.unwrap_or_default();
        ok += n;
        latency_ms.extend(latencies);
    }
    (ok, start.elapsed().as_secs_f64(), latency_ms)
}

async fn slow_companion(
    addr: SocketAddr,
    rv: u64,
    pattern: Pattern,
    index: usize,
    count: usize,
    secs: f64,
    stop: Arc<AtomicBool>,
) {
    const RCVBUF: u32 = 4096;
    let start = Instant::now();
    let mut last = rv;
    let Ok(mut watch) = WatchStream::open(addr, &watch_path(last), Some(RCVBUF)).await else {
        return;
    };
    match pattern {
        Pattern::Never => {
            while !stop.load(Ordering::Acquire) {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            drop(watch);
        }
        Pattern::StalledOnce => {
            tokio::time::sleep(Duration::from_secs_f64(secs / 2.0)).await;
            while !stop.load(Ordering::Acquire) {
                match tokio::time::timeout(Duration::from_millis(100), watch.read(&mut |_| {}))
                    .await
                {
                    Ok(Ok(seen)) => {
                        if seen.last_rv > 0 {
                            last = seen.last_rv;
                        }
                    }
                    Ok(Err(_)) => watch.ended = true,
                    Err(_) => {}
                }
                if watch.ended {
                    match WatchStream::open(addr, &watch_path(last), Some(RCVBUF)).await {
                        Ok(w) => watch = w,
                        Err(_) => return,
                    }
                }
            }
        }
        Pattern::Reconnecting => {
            let period = Duration::from_millis(500);
            let mut next = start + period.mul_f64(index as f64 / count.max(1) as f64) + period;
            while !stop.load(Ordering::Acquire) {
                tokio::time::sleep_until(next.into()).await;
                next += period;
                if let Ok(seen) = watch.read_available()
                    && seen.last_rv > 0
                {
                    last = seen.last_rv;
                }
                drop(watch);
                match WatchStream::open(addr, &watch_path(last), Some(RCVBUF)).await {
                    Ok(w) => watch = w,
                    Err(_) => return,
                }
            }
        }
    }
}

/// One slow-watcher-tax run over HTTP.
///
/// # Errors
/// The server or a client failed.
pub fn tax_http_run(
    mode: WatchMode,
    pattern: Pattern,
    slow: usize,
    rate: f64,
    secs: f64,
) -> Result<TaxRun, String> {
    let running = Running::start(ServeArgs {
        watch_mode: Some(mode.as_str().to_owned()),
        ..ServeArgs::default()
    })?;
    let addr = running.addr;
    let clients = client_runtime(2);
    let events = (rate * secs) as usize;
    let objects = 100;
    let result = clients.block_on(async move {
        let rv = seed(addr, objects, 1024).await?;
        let stop = Arc::new(AtomicBool::new(false));
        let mut healthy = WatchStream::open(addr, &watch_path(rv), None)
            .await
            .map_err(|e| e.to_string())?;
        let mut companions = Vec::new();
        for i in 0..slow {
            companions.push(tokio::spawn(slow_companion(
                addr,
                rv,
                pattern,
                i,
                slow,
                secs,
                stop.clone(),
            )));
        }
        let writes_done = Arc::new(AtomicU64::new(u64::MAX));
        let writer = {
            let writes_done = writes_done.clone();
            tokio::spawn(async move {
                let (ok, _) = write_patches(addr, events, objects, rate).await;
                writes_done.store(ok, Ordering::Release);
            })
        };
        let mut latencies = Vec::with_capacity(events);
        let mut received = 0u64;
        let mut grace: Option<Instant> = None;
        loop {
            let target = writes_done.load(Ordering::Acquire);
            if received >= target || healthy.ended {
                break;
            }
            if target != u64::MAX {
                let since = *grace.get_or_insert_with(Instant::now);
                if since.elapsed() > Duration::from_secs(10) {
                    break;
                }
            }
            if let Ok(Ok(seen)) = tokio::time::timeout(
                Duration::from_millis(100),
                healthy.read(&mut |l| latencies.push(l)),
            )
            .await
            {
                received += seen.events;
            }
        }
        let _ = writer.await;
        stop.store(true, Ordering::Release);
        for c in companions {
            c.abort();
        }
        Ok::<_, String>((Latency::from_nanos(latencies), healthy.ended))
    });
    clients.shutdown_timeout(Duration::from_secs(5));
    let (latency, healthy_ended) = result?;
    let configmaps = running.configmaps();
    let metrics = configmaps.metrics();
    let force_closes = metrics.terminations(TerminationReason::Unresponsive);
    let terminations = TerminationReason::ALL
        .iter()
        .filter(|r| **r != TerminationReason::Shutdown)
        .map(|r| metrics.terminations(*r))
        .sum();
    let stalls = metrics.watcher_stalls.get();
    running.stop();
    Ok(TaxRun {
        latency,
        latency_via_thread: Latency::default(),
        latency_second_half: Latency::default(),
        send: Latency::default(),
        force_closes,
        terminations,
        stalls,
        events,
        healthy_ended,
        healthy_unsynced_seen: 0,
        healthy_capacity: 0,
        healthy_max_batch: 0,
        writer_max_behind_us: 0.0,
    })
}

/// Suite `tax-http`: the slow-watcher tax end to end over HTTP.
///
/// # Errors
/// A run failed.
pub fn tax_http(options: &Options) -> Result<Vec<Table>, String> {
    let (rates, slow, secs) = tax_sizes(options);
    let busy = options.busy_nice.map(crate::sys::BusyLoad::start);
    let mut results = Vec::new();
    for pattern in Pattern::chosen(options) {
        for &rate in &rates {
            let mut resume = Vec::new();
            let mut legacy = Vec::new();
            for run in 0..options.runs {
                for mode in [WatchMode::StallResume, WatchMode::Legacy] {
                    let result = tax_http_run(mode, pattern, slow, rate, secs)?;
                    eprintln!(
                        "  tax-http {pattern:?} {rate}/s {} run {run}: p50 {:.0} p99 {:.0} max {:.0} µs (n={}), force-closes {}, terminations {}",
                        mode.as_str(),
                        result.latency.p50,
                        result.latency.p99,
                        result.latency.max,
                        result.latency.count,
                        result.force_closes,
                        result.terminations
                    );
                    match mode {
                        WatchMode::StallResume => resume.push(result),
                        WatchMode::Legacy => legacy.push(result),
                    }
                }
            }
            results.push((pattern, rate, resume, legacy));
        }
    }
    let mut table = tax_table(
        "tax-http",
        &format!(
            "1b. Slow watcher tax, end to end over HTTP: 1 healthy watch + {slow} slow companion watches, {secs} s per run{}",
            crate::sys::busy_title(busy.as_ref())
        ),
        &results,
    );
    table.note("In-process server (memory store) on its own 2-worker runtime; clients on raw TCP on a second runtime in the same process. Writes: one keep-alive connection sending merge-PATCHes of 100 ConfigMaps (~1 KiB) round-robin, each carrying its send time.");
    table.note("Latency: from just before the PATCH is sent to the healthy watch parsing the event (store write, reflector, dispatch, HTTP delivery and JSON parse).");
    table.note("Slow companions: SO_RCVBUF 4096, stop reading their socket. Stalled once: no reads for the first half, then full speed. Reconnecting: every 500 ms (staggered) read what the socket holds, close, and re-watch from the last resourceVersion seen.");
    Ok(vec![table])
}

/// A client child process: the bench executable re-run as `__clients`, talking over
/// stdin/stdout (`ready` → parent writes `go` → `done {json}`).
pub(crate) struct Child {
    child: std::process::Child,
    lines: std::io::Lines<std::io::BufReader<std::process::ChildStdout>>,
    stdin: std::process::ChildStdin,
}

impl Child {
    pub(crate) fn spawn(exe: &std::path::Path, args: &[String]) -> Result<Child, String> {
        use std::io::BufRead as _;
        let mut child = std::process::Command::new(exe)
            .arg("__clients")
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start the client process {}: {e}", exe.display()))?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        Ok(Child {
            child,
            lines: std::io::BufReader::new(stdout).lines(),
            stdin,
        })
    }

    pub(crate) fn expect(&mut self, prefix: &str) -> Result<String, String> {
        for line in self.lines.by_ref() {
            let line = line.map_err(|e| e.to_string())?;
            if let Some(rest) = line.strip_prefix(prefix) {
                return Ok(rest.trim().to_owned());
            }
        }
        Err(format!("the client process ended before {prefix:?}"))
    }

    fn go(&mut self) -> Result<(), String> {
        self.send("go")
    }

    /// Sends one command line.
    pub(crate) fn send(&mut self, line: &str) -> Result<(), String> {
        use std::io::Write as _;
        writeln!(self.stdin, "{line}")
            .and_then(|()| self.stdin.flush())
            .map_err(|e| e.to_string())
    }

    pub(crate) fn finish(mut self) {
        let _ = self.child.wait();
    }
}

pub(crate) fn arg<T: std::str::FromStr>(args: &[String], name: &str) -> Option<T> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
}

fn wait_go() {
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
}

pub(crate) async fn open_many(
    addr: SocketAddr,
    path: &str,
    n: usize,
    parse: bool,
) -> Result<Vec<WatchStream>, String> {
    let mut watches = Vec::with_capacity(n);
    for _ in 0..n {
        let mut w = WatchStream::open(addr, path, None)
            .await
            .map_err(|e| format!("watch {} of {n}: {e}", watches.len() + 1))?;
        w.parse = parse;
        watches.push(w);
    }
    Ok(watches)
}

/// The writes of a fan-out child.
pub(crate) struct WriteLoad {
    pub(crate) rate: f64,
    pub(crate) secs: f64,
    pub(crate) objects: usize,
    pub(crate) inflight: usize,
    /// How long the watches may take to deliver everything after the last write.
    pub(crate) drain_secs: f64,
}

pub(crate) async fn child_fanout(
    addr: SocketAddr,
    rv: u64,
    watchers: usize,
    load: WriteLoad,
) -> Result<Value, String> {
    let WriteLoad {
        rate,
        secs,
        objects,
        inflight,
        drain_secs,
    } = load;
    let watches = open_many(addr, &watch_path(rv), watchers, false).await?;
    println!("ready");
    tokio::task::spawn_blocking(wait_go)
        .await
        .map_err(|e| e.to_string())?;
    let delivered = Arc::new(AtomicU64::new(0));
    let target = Arc::new(AtomicU64::new(u64::MAX));
    let last_delivery = Arc::new(AtomicU64::new(0));
    let start_ns = now_ns();
    let mut readers = Vec::new();
    for mut w in watches {
        let delivered = delivered.clone();
        let target = target.clone();
        let last_delivery = last_delivery.clone();
        readers.push(tokio::spawn(async move {
            let mut mine = 0u64;
            while mine < target.load(Ordering::Acquire) && !w.ended {
                match tokio::time::timeout(Duration::from_millis(200), w.read(&mut |_| {})).await {
                    Ok(Ok(seen)) if seen.events > 0 => {
                        mine += seen.events;
                        delivered.fetch_add(seen.events, Ordering::Relaxed);
                        last_delivery.fetch_max(now_ns(), Ordering::Relaxed);
                    }
                    Ok(Err(_)) => break,
                    _ => {}
                }
            }
        }));
    }
    let events = (rate * secs) as usize;
    // The writers on a runtime of their own (one thread): their requests and answers do not
    // queue behind the readers' tasks in this process's runtime, so the write rate reached is
    // the server's, not this process's scheduling (as suite 8's writer).
    let (sent, done) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let writes = client_runtime(1).block_on(write_patches_inflight(
            addr, events, objects, rate, inflight,
        ));
        let _ = sent.send(writes);
    });
    let (ok, write_secs, mut write_ms) = done.await.map_err(|_| "the writers' thread failed")?;
    write_ms.sort_by(f64::total_cmp);
    let write_ms_at = |q: f64| {
        write_ms
            .get(((write_ms.len() as f64 * q) as usize).min(write_ms.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0.0)
    };
    target.store(ok, Ordering::Release);
    let all = futures_join(readers, Duration::from_secs_f64(drain_secs)).await;
    let elapsed = (last_delivery
        .load(Ordering::Relaxed)
        .saturating_sub(start_ns)) as f64
        / 1e9;
    Ok(json!({
        "delivered": delivered.load(Ordering::Relaxed),
        "expected": ok * watchers as u64,
        "writes": ok,
        "write_secs": write_secs,
        "write_ms_p50": write_ms_at(0.5),
        "write_ms_p99": write_ms_at(0.99),
        "delivery_secs": elapsed,
        "complete": all,
    }))
}

/// Awaits every handle within `limit`; false if some did not finish.
async fn futures_join(handles: Vec<tokio::task::JoinHandle<()>>, limit: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    let mut all = true;
    for h in handles {
        let abort = h.abort_handle();
        if tokio::time::timeout_at(deadline, h).await.is_err() {
            abort.abort();
            all = false;
        }
    }
    all
}

pub(crate) async fn child_alloc(
    addr: SocketAddr,
    rv: u64,
    watchers: usize,
    patches: usize,
    path: String,
) -> Result<Value, String> {
    let collection = path.rsplit_once('/').map_or("", |(c, _)| c).to_owned();
    let mut watches = open_many(
        addr,
        &format!("{collection}?watch=true&resourceVersion={rv}"),
        watchers,
        true,
    )
    .await?;
    let mut conn = Conn::connect(addr).await.map_err(|e| e.to_string())?;
    println!("ready");
    tokio::task::spawn_blocking(wait_go)
        .await
        .map_err(|e| e.to_string())?;
    let started = Instant::now();
    for i in 0..patches {
        let body = format!("{{\"metadata\":{{\"annotations\":{{\"bench/seq\":\"{i}\"}}}}}}");
        let (status, text) = conn
            .request(
                "PATCH",
                &path,
                "application/merge-patch+json",
                body.as_bytes(),
            )
            .await
            .map_err(|e| e.to_string())?;
        if status != 200 {
            return Err(format!(
                "PATCH answered {status}: {}",
                String::from_utf8_lossy(&text)
            ));
        }
        let object: Value = serde_json::from_slice(&text).map_err(|e| e.to_string())?;
        let target: u64 = object["metadata"]["resourceVersion"]
            .as_str()
            .and_then(|v| v.parse().ok())
            .ok_or("no resourceVersion")?;
        for w in &mut watches {
            let mut last = 0;
            while last < target {
                let seen = tokio::time::timeout(Duration::from_secs(30), w.read(&mut |_| {}))
                    .await
                    .map_err(|_| "delivery timed out".to_owned())?
                    .map_err(|e| e.to_string())?;
                last = last.max(seen.last_rv);
                if w.ended {
                    return Err("watch ended".to_owned());
                }
            }
        }
    }
    Ok(json!({"patches": patches, "secs": started.elapsed().as_secs_f64()}))
}

/// One end-to-end fan-out run (see [`fanout`]).
#[derive(Debug)]
pub struct FanoutRun {
    /// Successful writes over the writers' time.
    pub writes_per_second: f64,
    /// Deliveries counted by the clients over the time from the first write to the last delivery.
    pub per_second: f64,
    /// The server's (this process's) CPU µs per delivered event.
    pub cpu_us: f64,
    /// Server RSS growth while the watches opened, KiB per watch.
    pub rss_kib: f64,
    /// The core's synced → unsynced transitions.
    pub watcher_stalls: u64,
    /// Every watch got every write within the drain limit.
    pub complete: bool,
    /// The raw figures.
    pub raw: Value,
}

/// Runs `n` HTTP watches × `rate` writes/s for `secs` against a fresh in-process server (memory
/// store), clients and writers (`inflight` in flight) in a child process, so this process's CPU
/// time is the server's.
///
/// # Errors
/// The server or the client process failed.
pub fn fanout_http_once(
    options: &Options,
    n: usize,
    rate: f64,
    secs: f64,
    inflight: usize,
) -> Result<FanoutRun, String> {
    let history = PROFILE_HISTORY_MAX.load(std::sync::atomic::Ordering::Relaxed);
    let running = Running::start(ServeArgs {
        runtime_workers: options.runtime_workers,
        history_capacity_max: (history > 0).then_some(history),
        ..ServeArgs::default()
    })?;
    let addr = running.addr;
    let rv = running.runtime.block_on(seed(addr, 100, 1024))?;
    let result = drive_fanout(options, addr, rv, n, rate, secs, inflight);
    let watcher_stalls = running.configmaps().metrics().watcher_stalls.get();
    running.stop();
    let mut run = result?;
    run.watcher_stalls = watcher_stalls;
    run.raw["watcher_stalls"] = json!(watcher_stalls);
    Ok(run)
}

/// As [`fanout_http_once`] against the bare hyper pipe ([`crate::pipe`]) instead of
/// watchkeeper: same client process, same watches and writes.
///
/// # Errors
/// The pipe or the client process failed.
pub fn fanout_pipe_once(
    options: &Options,
    n: usize,
    rate: f64,
    secs: f64,
    inflight: usize,
) -> Result<FanoutRun, String> {
    let pipe = crate::pipe::Pipe::start()?;
    let result = drive_fanout(options, pipe.addr, 0, n, rate, secs, inflight);
    pipe.stop();
    result
}

/// Runs the fan-out client process against a server in this process at `addr` and measures
/// this process's CPU time from all watches open to the client's done line.
fn drive_fanout(
    options: &Options,
    addr: SocketAddr,
    rv: u64,
    n: usize,
    rate: f64,
    secs: f64,
    inflight: usize,
) -> Result<FanoutRun, String> {
    let rss_before = crate::sys::rss_bytes();
    let mut child = Child::spawn(
        &options.exe,
        &[
            "fanout".into(),
            "--addr".into(),
            addr.to_string(),
            "--rv".into(),
            rv.to_string(),
            "--watchers".into(),
            n.to_string(),
            "--rate".into(),
            rate.to_string(),
            "--secs".into(),
            secs.to_string(),
            "--inflight".into(),
            inflight.to_string(),
            "--drain-secs".into(),
            "300".into(),
        ],
    )?;
    child.expect("ready")?;
    let rss_ready = crate::sys::rss_bytes();
    let cpu0 = crate::sys::cpu_seconds();
    let threads0 = crate::sys::thread_cpu_seconds_by_kind();
    let allocs0 = crate::alloc::counts();
    let live = PROFILE_LIVE.load(std::sync::atomic::Ordering::Relaxed);
    if live {
        crate::alloc::track_live(true);
    }
    let live0 = crate::alloc::LiveSizes::now();
    let window = crate::sys::WindowCounts::start_with(&crate::sys::FANOUT_TRACEPOINTS);
    crate::sys::measure_window_start();
    child.go()?;
    let done = child.expect("done");
    crate::sys::measure_window_end();
    let counts = window.finish();
    let allocs1 = crate::alloc::counts();
    let done: Value = serde_json::from_str(&done?).map_err(|e| e.to_string())?;
    let cpu1 = crate::sys::cpu_seconds();
    let threads1 = crate::sys::thread_cpu_seconds_by_kind();
    child.finish();
    if let Some(error) = done.get("error") {
        return Err(format!("fanout client: {error}"));
    }
    let allocations = allocs1.0 - allocs0.0;
    let allocated = allocs1.1 - allocs0.1;
    let delivered = done["delivered"].as_u64().unwrap_or(0) as f64;
    // Where the CPU went, by kind of thread, per delivered event (µs, to the nanosecond;
    // threads that ended within the run are not counted).
    let threads: serde_json::Map<String, Value> = threads1
        .iter()
        .map(|(kind, end)| {
            let spent = end - threads0.get(kind).copied().unwrap_or(0.0);
            (kind.clone(), json!(spent * 1e6 / delivered.max(1.0)))
        })
        .collect();
    // The kernel's side per write: this process's page faults and context switches
    // (getrusage) and its system calls (tracepoints, where the kernel lets it count them).
    let writes = done["writes"].as_u64().unwrap_or(0).max(1) as f64;
    let mut per_write = serde_json::Map::new();
    per_write.insert(
        "minor_faults".into(),
        json!(counts.minor_faults as f64 / writes),
    );
    per_write.insert(
        "context_switches".into(),
        json!((counts.voluntary_switches + counts.involuntary_switches) as f64 / writes),
    );
    for (name, total) in &counts.traces {
        per_write.insert(name.clone(), json!(*total as f64 / writes));
    }
    let live_growth = live.then(|| {
        let now = crate::alloc::LiveSizes::now();
        crate::alloc::track_live(false);
        let writes = done["writes"].as_u64().unwrap_or(1).max(1) as usize;
        json!({"live_bytes_per_write": (now.bytes - live0.bytes) as f64 / writes as f64,
               "top_classes_per_write": now.growth_since(&live0, writes, 16)})
    });
    Ok(FanoutRun {
        writes_per_second: done["writes"].as_f64().unwrap_or(0.0)
            / done["write_secs"].as_f64().unwrap_or(1.0).max(1e-9),
        per_second: delivered / done["delivery_secs"].as_f64().unwrap_or(1.0).max(1e-9),
        cpu_us: (cpu1 - cpu0) * 1e6 / delivered.max(1.0),
        rss_kib: (rss_ready.saturating_sub(rss_before)) as f64 / 1024.0 / n as f64,
        watcher_stalls: 0,
        complete: done["complete"].as_bool().unwrap_or(false)
            && done["delivered"] == done["expected"],
        raw: json!({"watchers": n, "rate": rate, "secs": secs, "inflight": inflight, "client": done, "cpu_seconds": cpu1 - cpu0, "threads_cpu_us_per_event": threads, "rss_ready": rss_ready, "rss_before": rss_before, "allocations": allocations, "allocated_bytes": allocated, "live": live_growth, "kernel_per_write": per_write}),
    })
}

/// Set by `__profile --live`: the run tracks live heap bytes over its window.
static PROFILE_LIVE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Set by `__profile --history-capacity-max N` (0: the server's default): a history that
/// fills within the run, to see a write's cost once evicted versions make room for new ones.
static PROFILE_HISTORY_MAX: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// `watchkeeper-bench __profile [--pipe] [--live] [--runtime-workers N] [--history-capacity-max N] --watchers W --events K --rate R`: one fixed
/// fan-out run (K writes to W watchers, clients in a child process) against watchkeeper or the
/// bare pipe, printing the figures as JSON (`--live`: also the live heap's growth per write over
/// the run, by size class). Run it under `valgrind --tool=callgrind
/// --trace-children=no --zero-before='*measure_window_start*'
/// --dump-before='*measure_window_end*'` to count the server's instructions from all watches
/// open to the last delivery.
#[must_use]
pub fn profile_main(exe: std::path::PathBuf, args: &[String]) -> i32 {
    crate::sys::raise_fd_limit();
    let watchers: usize = arg(args, "--watchers").unwrap_or(100);
    let events: usize = arg(args, "--events").unwrap_or(100);
    let rate: f64 = arg(args, "--rate").unwrap_or(20.0);
    let inflight: usize = arg(args, "--inflight").unwrap_or(1);
    let pipe = args.iter().any(|a| a == "--pipe");
    PROFILE_LIVE.store(
        args.iter().any(|a| a == "--live"),
        std::sync::atomic::Ordering::Relaxed,
    );
    PROFILE_HISTORY_MAX.store(
        arg(args, "--history-capacity-max").unwrap_or(0),
        std::sync::atomic::Ordering::Relaxed,
    );
    let mut options = match Options::parse(&[], exe) {
        Ok(options) => options,
        Err(message) => {
            eprintln!("{message}");
            return 2;
        }
    };
    options.runtime_workers = arg(args, "--runtime-workers");
    let secs = events as f64 / rate;
    let run = if pipe {
        fanout_pipe_once(&options, watchers, rate, secs, inflight)
    } else {
        fanout_http_once(&options, watchers, rate, secs, inflight)
    };
    match run {
        Ok(run) => {
            let delivered = run.raw["client"]["delivered"].as_u64().unwrap_or(0).max(1) as f64;
            println!(
                "{}",
                json!({"delivered": delivered, "complete": run.complete, "cpu_us_per_event": run.cpu_us, "allocations_per_event": run.raw["allocations"].as_f64().unwrap_or(0.0) / delivered, "allocated_bytes_per_event": run.raw["allocated_bytes"].as_f64().unwrap_or(0.0) / delivered, "raw": run.raw})
            );
            0
        }
        Err(message) => {
            eprintln!("profile: {message}");
            1
        }
    }
}

/// Suite `fanout`: N HTTP watchers × write rate, events delivered per second and server CPU
/// time per delivered event (clients in a child process, so the bench process's CPU time is
/// the server's).
///
/// # Errors
/// A run failed.
pub fn fanout(options: &Options) -> Result<Vec<Table>, String> {
    let fd_limit = crate::sys::fd_limit();
    let (mut ns, rates, secs): (Vec<usize>, Vec<f64>, f64) = if options.smoke {
        (vec![20], vec![100.0], 0.5)
    } else {
        (vec![100, 1_000, 10_000], vec![100.0, 1_000.0], 5.0)
    };
    ns.retain(|n| (*n as u64) + 500 < fd_limit);
    // Writes in flight (the references' "16 writes in flight"), and a cap on the deliveries
    // one run asks for: above it a run writes for less than `secs` (10,000 × 1,000/s asks for
    // 10 M deliveries/s; 5 s of it would take many minutes to deliver here).
    const INFLIGHT: usize = 16;
    let max_deliveries = if options.smoke { 10_000.0 } else { 3_000_000.0 };
    let mut table = Table::new(
        "fanout",
        &format!(
            "6. Fan-out throughput end to end: N HTTP watches × write rate, up to {secs} s of writes per run, {INFLIGHT} writes in flight"
        ),
        &[
            "watchers",
            "writes/s asked",
            "s of writes",
            "writes/s achieved",
            "events delivered/s",
            "watcher stalls (core)",
            "server CPU µs per delivered event",
            "bare hyper pipe, server CPU µs per delivered event",
            "ratio to the pipe",
            "RSS per watch, KiB",
            "complete",
        ],
    );
    for &n in &ns {
        for &rate in &rates {
            let run_secs = secs.min(max_deliveries / (n as f64 * rate));
            let mut writes_seen = Vec::new();
            let mut stalls = Vec::new();
            let mut rates_seen = Vec::new();
            let mut cpu = Vec::new();
            let mut pipe_cpu = Vec::new();
            let mut ratios = Vec::new();
            let mut rss = Vec::new();
            let mut complete = true;
            for _ in 0..options.runs {
                let one = fanout_http_once(options, n, rate, run_secs, INFLIGHT)?;
                let pipe = fanout_pipe_once(options, n, rate, run_secs, INFLIGHT)?;
                let (per_second, cpu_us, rss_kib) = (one.per_second, one.cpu_us, one.rss_kib);
                writes_seen.push(one.writes_per_second);
                stalls.push(one.watcher_stalls as f64);
                complete &= one.complete;
                eprintln!(
                    "  fanout {n} x {rate}/s: {per_second:.0} events/s, {cpu_us:.2} CPU-µs/event (pipe {:.2}), {rss_kib:.1} KiB/watch, {}",
                    pipe.cpu_us, one.raw["client"]
                );
                table.raw(json!({"watchkeeper": one.raw, "pipe": pipe.raw}));
                rates_seen.push(per_second);
                cpu.push(cpu_us);
                pipe_cpu.push(pipe.cpu_us);
                ratios.push(cpu_us / pipe.cpu_us.max(1e-9));
                rss.push(rss_kib);
            }
            let cpu_median = crate::median(&cpu);
            table.row(vec![
                n.to_string(),
                crate::report::f(rate, 0),
                crate::report::f(run_secs, 2),
                crate::report::f(crate::median(&writes_seen), 0),
                crate::report::f(crate::median(&rates_seen), 0),
                crate::report::f(crate::median(&stalls), 0),
                crate::report::f(cpu_median, 2),
                crate::report::f(crate::median(&pipe_cpu), 2),
                crate::report::x(crate::median(&ratios)),
                crate::report::f(crate::median(&rss), 1),
                complete.to_string(),
            ]);
        }
    }
    table.note("Server in the bench process (memory store, 2-worker runtime); watch clients and the writer (16 keep-alive connections sending merge-PATCHes of 100 ~1 KiB ConfigMaps at their due times, so up to 16 writes in flight) in a child process, so the bench process's utime+stime delta (/proc/self/stat, from all watches open to the last delivery) is the server's CPU, store and reflector included; the child competes for the same 2 cores.");
    table.note("Events delivered/s: deliveries counted by the clients divided by the time from the first write to the last delivery (so it is bounded by N × writes/s). RSS per watch: the server process's RSS growth while the child opened its watches, divided by N.");
    table.note(format!("Cap: a run asks for at most {max_deliveries:.0} deliveries, so configurations above 1 M deliveries/s write for less than {secs} s (column \"s of writes\"); events delivered/s is what the clients measured, whatever was asked. Writes/s achieved: successful writes over the writers' time. Watcher stalls: the core's synced → unsynced transitions (queues full because delivery fell behind the writes; those watchers were served by catch-up passes)."));
    table.note(format!("Bare hyper pipe: the same child process against a minimal hyper server with no cache and no store (see table 7c), run after each watchkeeper run (A, B, A, B); its CPU µs per delivered event is measured the same way, and the ratio is the median of per-run ratios. RLIMIT_NOFILE here: {fd_limit}."));
    Ok(vec![table])
}

/// A pod of about `size` bytes of JSON.
fn big_pod(name: &str, size: usize) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "bench"}, "annotations": {"bench/padding": "p".repeat(size.saturating_sub(400))}},
        "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}], "nodeName": "node-1"},
        "status": {"phase": "Running"}
    })
}

/// Suite `alloc`: allocations per PATCH of a 10 KB pod end to end, and store decodes per
/// conflict with consistent GETs from the cache on vs off.
///
/// # Errors
/// A run failed.
pub fn allocations(options: &Options) -> Result<Vec<Table>, String> {
    let mut tables = Vec::new();
    let installed = crate::alloc::installed();
    let size = 10 * 1024;
    let (ns, patches): (Vec<usize>, usize) = if options.smoke {
        (vec![1, 5], 10)
    } else {
        (vec![1, 10, 100], 500)
    };
    let mut table = Table::new(
        "alloc",
        &format!(
            "9a. Allocations per PATCH of a {} KB pod, end to end (request to the last watcher's delivery)",
            size / 1024
        ),
        &[
            "watchers",
            "allocations per PATCH",
            "bytes per PATCH",
            "bytes / object size",
        ],
    );
    let path = "/api/v1/namespaces/default/pods/big";
    let mut object_size = size;
    for &n in &ns {
        let mut allocs = Vec::new();
        let mut bytes = Vec::new();
        for _ in 0..options.runs {
            let running = Running::start(ServeArgs::default())?;
            let addr = running.addr;
            let rv = running.runtime.block_on(async {
                let mut conn = Conn::connect(addr).await.map_err(|e| e.to_string())?;
                let body = big_pod("big", size).to_string();
                let (status, text) = conn
                    .request(
                        "POST",
                        "/api/v1/namespaces/default/pods",
                        "application/json",
                        body.as_bytes(),
                    )
                    .await
                    .map_err(|e| e.to_string())?;
                if status != 201 {
                    return Err(format!(
                        "create pod: {status} {}",
                        String::from_utf8_lossy(&text)
                    ));
                }
                object_size = text.len();
                let created: Value = serde_json::from_slice(&text).map_err(|e| e.to_string())?;
                created["metadata"]["resourceVersion"]
                    .as_str()
                    .and_then(|v| v.parse::<u64>().ok())
                    .ok_or_else(|| "no rv".to_owned())
            })?;
            let mut child = Child::spawn(
                &options.exe,
                &[
                    "alloc".into(),
                    "--addr".into(),
                    addr.to_string(),
                    "--rv".into(),
                    rv.to_string(),
                    "--watchers".into(),
                    n.to_string(),
                    "--patches".into(),
                    patches.to_string(),
                    "--path".into(),
                    path.into(),
                ],
            )?;
            child.expect("ready")?;
            let sites = options.alloc_sites && allocs.is_empty();
            if sites {
                crate::alloc::record_sites(true);
            }
            let before = crate::alloc::counts();
            child.go()?;
            let done: Value =
                serde_json::from_str(&child.expect("done")?).map_err(|e| e.to_string())?;
            let after = crate::alloc::counts();
            if sites {
                let report = crate::alloc::take_sites().report(patches as f64, 60);
                std::fs::create_dir_all(&options.out).map_err(|e| e.to_string())?;
                let file = options.out.join(format!("alloc-sites-{n}.md"));
                std::fs::write(
                    &file,
                    format!(
                        "# Where the bytes of a PATCH go, {n} watchers (units: PATCHes)\n\n{report}"
                    ),
                )
                .map_err(|e| format!("{}: {e}", file.display()))?;
                eprintln!("  alloc {n} watchers: sites in {}", file.display());
            }
            child.finish();
            running.stop();
            if let Some(error) = done.get("error") {
                return Err(format!("alloc client: {error}"));
            }
            let a = (after.0 - before.0) as f64 / patches as f64;
            let b = (after.1 - before.1) as f64 / patches as f64;
            eprintln!("  alloc {n} watchers: {a:.0} allocations, {b:.0} bytes per PATCH");
            table.raw(json!({"watchers": n, "allocations_per_patch": a, "bytes_per_patch": b, "object_bytes": object_size}));
            allocs.push(a);
            bytes.push(b);
        }
        let b = crate::median(&bytes);
        table.row(vec![
            n.to_string(),
            if installed {
                crate::report::f(crate::median(&allocs), 0)
            } else {
                "n/a".into()
            },
            if installed {
                crate::report::f(b, 0)
            } else {
                "n/a".into()
            },
            if installed {
                crate::report::x(b / object_size as f64)
            } else {
                "n/a".into()
            },
        ]);
    }
    table.note(format!("Counted by a counting global allocator in the bench binary, which holds only the server (memory store): the watch clients and the PATCH client run in a child process. Each PATCH (a merge patch of one annotation on a {object_size}-byte pod) is sent only after the previous one reached every watcher. Includes the store, the reflector, the cache and every HTTP response."));
    tables.push(table);
    tables.push(conflicts(options)?);
    Ok(tables)
}

/// Store decodes per conflict, consistent GETs from the cache on vs off.
fn conflicts(options: &Options) -> Result<Table, String> {
    let (writers, rounds) = if options.smoke { (2, 20) } else { (4, 300) };
    let mut table = Table::new(
        "alloc",
        &format!(
            "9b. Store reads and decodes per conflict: {writers} clients doing GET + PUT(resourceVersion) loops and {writers} doing PATCH loops on one ConfigMap"
        ),
        &[
            "consistent GETs from",
            "conflicts (409s + server retries)",
            "store GETs per conflict",
            "request decodes per conflict",
            "ratio of decodes, store / cache",
        ],
    );
    let mut per_mode: Vec<Vec<(f64, f64, f64)>> = vec![Vec::new(), Vec::new()];
    for _ in 0..options.runs {
        for (index, from_cache) in [true, false].into_iter().enumerate() {
            let running = Running::start(ServeArgs {
                consistent_get_from_cache: Some(from_cache),
                ..ServeArgs::default()
            })?;
            let addr = running.addr;
            let clients = client_runtime(2);
            let client_409s: u64 = clients.block_on(async move {
                seed(addr, 1, 1024).await?;
                let mut tasks = Vec::new();
                for w in 0..writers * 2 {
                    tasks.push(tokio::spawn(async move {
                        let mut conn = Conn::connect(addr).await.map_err(|e| e.to_string())?;
                        let path = format!("{CONFIGMAPS}/cm-0");
                        let mut conflicts = 0u64;
                        for i in 0..rounds {
                            if w % 2 == 1 {
                                let body = format!("{{\"data\":{{\"w{w}\":\"{i}\"}}}}");
                                let _ = conn
                                    .request(
                                        "PATCH",
                                        &path,
                                        "application/merge-patch+json",
                                        body.as_bytes(),
                                    )
                                    .await;
                                continue;
                            }
                            let (_, text) = conn
                                .request("GET", &path, "application/json", b"")
                                .await
                                .map_err(|e| e.to_string())?;
                            let mut object: Value =
                                serde_json::from_slice(&text).map_err(|e| e.to_string())?;
                            object["data"][format!("w{w}")] = json!(i.to_string());
                            let (status, _) = conn
                                .request(
                                    "PUT",
                                    &path,
                                    "application/json",
                                    object.to_string().as_bytes(),
                                )
                                .await
                                .map_err(|e| e.to_string())?;
                            if status == 409 {
                                conflicts += 1;
                            }
                        }
                        Ok::<u64, String>(conflicts)
                    }));
                }
                let mut total = 0;
                for t in tasks {
                    total += t.await.map_err(|e| e.to_string())??;
                }
                Ok::<u64, String>(total)
            })?;
            clients.shutdown_timeout(Duration::from_secs(5));
            let counters = &running.app().counters;
            let server_conflicts = counters.conflicts.load(Ordering::Relaxed);
            let decodes = counters.request_decodes.load(Ordering::Relaxed) as f64;
            let store_gets = counters.store_gets.load(Ordering::Relaxed) as f64;
            let total = (client_409s + server_conflicts) as f64;
            eprintln!(
                "  conflicts from_cache={from_cache}: 409s {client_409s}, server retries {server_conflicts}, store GETs {store_gets}, decodes {decodes}"
            );
            table.raw(json!({"from_cache": from_cache, "client_409s": client_409s, "server_conflicts": server_conflicts, "store_gets": store_gets, "request_decodes": decodes}));
            per_mode[index].push((total, store_gets / total.max(1.0), decodes / total.max(1.0)));
            running.stop();
        }
    }
    let ratios: Vec<f64> = per_mode[1]
        .iter()
        .zip(&per_mode[0])
        .map(|(off, on)| {
            if on.2 > 0.0 {
                off.2 / on.2
            } else {
                f64::INFINITY
            }
        })
        .collect();
    for (index, name) in ["cache", "store"].into_iter().enumerate() {
        let runs = &per_mode[index];
        let med = |g: &dyn Fn(&(f64, f64, f64)) -> f64| {
            crate::median(&runs.iter().map(g).collect::<Vec<_>>())
        };
        table.row(vec![
            name.into(),
            crate::report::f(med(&|r| r.0), 0),
            crate::report::f(med(&|r| r.1), 2),
            crate::report::f(med(&|r| r.2), 2),
            if index == 1 {
                crate::report::x(crate::median(&ratios))
            } else {
                String::new()
            },
        ]);
    }
    table.note("Counters: the server's `app.counters` (`conflicts`: guaranteed-update retries inside PATCH; `store_gets`, `request_decodes`) plus the clients' own 409s. Runs interleaved cache, store, cache, store.");
    Ok(table)
}

/// Server RSS growth per idle HTTP watch, with `n` watches opened by a child process.
///
/// # Errors
/// The server or the child failed.
pub fn idle_rss_per_watch(options: &Options, n: usize) -> Result<f64, String> {
    let running = Running::start(ServeArgs::default())?;
    let addr = running.addr;
    let rv = running.runtime.block_on(seed(addr, 1, 1024))?;
    let rss_before = crate::sys::rss_bytes();
    let mut child = Child::spawn(
        &options.exe,
        &[
            "fanout".into(),
            "--addr".into(),
            addr.to_string(),
            "--rv".into(),
            rv.to_string(),
            "--watchers".into(),
            n.to_string(),
            "--rate".into(),
            "0".into(),
            "--secs".into(),
            "0".into(),
        ],
    )?;
    child.expect("ready")?;
    std::thread::sleep(Duration::from_millis(500));
    let rss = crate::sys::rss_bytes().saturating_sub(rss_before) as f64 / 1024.0 / n as f64;
    child.go()?;
    let _ = child.expect("done");
    child.finish();
    running.stop();
    Ok(rss)
}

//! `restart`: a graceful restart of a server holding many watchers under write load (issue
//! 20), with the caches' history rebuilt from the store on start (the default) and without
//! (`--rebuild-history=false`, what kube-apiserver does).
//!
//! Method: an in-process server on the embedded store (`--durable-commits=false`) with 100
//! configmaps; N watchers, each watching one configmap (`fieldSelector=metadata.name=...`,
//! N/100 per object) from the list's resource version, half of them with
//! `allowWatchBookmarks=true`; a writer PATCHes the configmaps round-robin at a fixed rate for
//! the whole run (a write that fails while the server is away is skipped, not retried).
//! After a warm-up the server shuts down gracefully (every watch ends, those that allow
//! bookmarks after a final bookmark at the last dispatched revision) and starts again on the
//! same data directory and port. Each watcher reconnects with the last resource version it saw
//! (its final bookmark, or its last event), retrying while the server is away or not ready
//! (429); on a 410 it relists (a GET of its object) and watches from the list, as an
//! informer does. Counted: 410s, relists, events lost (acknowledged writes of a watcher's
//! object after its start that it never received as an event: a relist replaces them with
//! state), duplicates (an event received twice), and per watcher the time from the start of
//! the shutdown until its first event on the restarted server (p50, p99, max) — this includes
//! waiting for the next write of its object (one per `100 / rate` seconds). After the writer
//! stops, the run waits (at most 30 s) until every watcher has seen its object's last
//! acknowledged write before it counts.
//!
//! etcd mode (`Mode::EtcdRestart`, `Mode::EtcdSibling`): a private etcd (data in /dev/shm)
//! and two watchkeeper instances on it, each a child process of the benchmark
//! (`watchkeeper-bench __serve ARGS`, so the benchmark process holds only the client ends of
//! the streams and 10,000 watchers fit the descriptor limit). Every watcher opens its stream on
//! instance A, the one that shuts down (so every one of them has to resume: the claim
//! is about the watchers of the server that goes away); the writer writes through instance B
//! for the whole run, so writes go on while A is away. After the warm-up A shuts down
//! gracefully (final bookmarks, as above); then either A starts again on the same address
//! (`EtcdRestart`: the watchers reconnect to it) or the watchers reconnect to B, which has
//! been running since before they started (`EtcdSibling`: a client failing over, as a load
//! balancer would send it). The history flag is given to both instances at their start: for
//! a restarted A it decides whether A's history covers the revisions written before and
//! during its absence; a sibling running all along holds its own history from its start,
//! before any watcher's position, whatever the flag.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;
use watchkeeper::Server;
use watchkeeper::config::{ServeArgs, ServeConfig};
use watchkeeper_testkit::RawWatch;

use crate::e2e::{CONFIGMAPS, client_runtime, seed};
use crate::http::Conn;
use crate::report::Table;
use crate::{Latency, Options};

/// Configmaps the writer updates round-robin (each watcher watches one); fewer when there are
/// fewer watchers (smoke runs), so that every written object has a watcher.
const OBJECTS: usize = 100;

/// How long the run waits, after the writer stops, for every watcher to see its object's last
/// acknowledged write.
const CATCH_UP_MAX: Duration = Duration::from_secs(30);

/// How long a watcher waits for a watch's answer before it opens a new connection.
const OPEN_TIMEOUT: Duration = Duration::from_secs(5);

/// Sizes of one run.
#[derive(Clone, Copy, Debug)]
struct Sizes {
    watchers: usize,
    rate: f64,
    warm_up: Duration,
    after: Duration,
}

impl Sizes {
    /// The configmaps written and watched.
    fn objects(&self) -> usize {
        OBJECTS.min(self.watchers).max(1)
    }
}

/// What one watcher saw.
#[derive(Debug, Default)]
struct Seen {
    /// The object it watches.
    object: usize,
    /// The resource version it started from.
    start: u64,
    /// Whether it allows bookmarks.
    bookmarks: bool,
    /// Resource versions of the events it received, in order.
    events: Vec<u64>,
    /// In-stream 410s.
    gone: u64,
    /// Relists after a 410.
    relists: u64,
    /// When its first event on a stream opened after the shutdown began arrived.
    resumed: Option<Instant>,
}

/// The server's arguments for a run.
fn args(dir: &Path, listen: SocketAddr, rebuild: bool) -> ServeArgs {
    ServeArgs {
        listen: Some(listen),
        store: Some("embedded".to_owned()),
        data_dir: Some(dir.to_path_buf()),
        durable_commits: Some(false),
        rebuild_history: Some(rebuild),
        max_watches: Some(0),
        max_watches_per_user: Some(0),
        max_requests_inflight: Some(0),
        max_mutating_requests_inflight: Some(0),
        max_connections: Some(0),
        enable_priority_and_fairness: Some(false),
        ..ServeArgs::default()
    }
}

/// Starts a server (retrying while the previous one's store lock is being released) and
/// waits until it is ready.
async fn start(args: ServeArgs) -> Result<Server, String> {
    let config = ServeConfig::from_args(args).map_err(|e| e.to_string())?;
    let deadline = Instant::now() + Duration::from_secs(30);
    let server = loop {
        match watchkeeper::start(config.clone()).await {
            Ok(server) => break server,
            Err(_) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(error) => return Err(error.to_string()),
        }
    };
    tokio::time::timeout(Duration::from_secs(120), server.ready())
        .await
        .map_err(|_| "server not ready".to_owned())?;
    Ok(server)
}

fn rv_of(object: &Value) -> Option<u64> {
    object["metadata"]["resourceVersion"].as_str()?.parse().ok()
}

/// Writes at `rate` until `stop`; returns the acknowledged (object, resource version) pairs.
async fn writer(
    addr: SocketAddr,
    objects: usize,
    rate: f64,
    stop: Arc<AtomicBool>,
) -> Vec<(usize, u64)> {
    let mut acked = Vec::new();
    let mut conn: Option<Conn> = None;
    let started = Instant::now();
    let mut i = 0usize;
    while !stop.load(Ordering::Acquire) {
        let due = started + Duration::from_secs_f64(i as f64 / rate);
        tokio::time::sleep_until(due.into()).await;
        let object = i % objects;
        i += 1;
        if conn.is_none() {
            conn = Conn::connect(addr).await.ok();
        }
        let Some(c) = conn.as_mut() else {
            continue;
        };
        let body = format!("{{\"data\":{{\"write\":\"{i}\"}}}}");
        match c
            .request(
                "PATCH",
                &format!("{CONFIGMAPS}/cm-{object}"),
                "application/merge-patch+json",
                body.as_bytes(),
            )
            .await
        {
            Ok((200, answer)) => {
                if let Some(rv) = serde_json::from_slice::<Value>(&answer)
                    .ok()
                    .as_ref()
                    .and_then(rv_of)
                {
                    acked.push((object, rv));
                }
            }
            Ok(_) => {}
            Err(_) => conn = None,
        }
    }
    acked
}

/// Where a watcher watches: `first` until the shutdown begins, `resume` after.
#[derive(Clone, Copy, Debug)]
struct Targets {
    first: SocketAddr,
    resume: SocketAddr,
}

/// What the watchers share with the run.
#[derive(Clone)]
struct Signals {
    shutdown_began: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    /// Watchers whose first stream has opened.
    opened: Arc<AtomicUsize>,
}

/// One watcher: watches its object, reconnects with the last resource version it saw, relists
/// on a 410, until `stop`.
async fn watcher(
    targets: Targets,
    mut seen: Seen,
    signals: Signals,
    progress: Arc<AtomicU64>,
) -> Seen {
    let Signals {
        shutdown_began,
        stop,
        opened,
    } = signals;
    let mut last = seen.start;
    let mut counted = false;
    let selector = format!("fieldSelector=metadata.name%3Dcm-{}", seen.object);
    while !stop.load(Ordering::Acquire) {
        let path = format!(
            "{CONFIGMAPS}?watch=true&resourceVersion={last}&allowWatchBookmarks={}&{selector}&timeoutSeconds=3600",
            seen.bookmarks
        );
        let after_shutdown = shutdown_began.load(Ordering::Acquire);
        let addr = if after_shutdown {
            targets.resume
        } else {
            targets.first
        };
        // A bounded wait for the answer, as a client's dial and response timeouts: a
        // connection the kernel completed while the server's accept queue was full can wait
        // for the server's SYN-ACK retransmissions for tens of seconds; a new one goes on.
        let opening = tokio::time::timeout(OPEN_TIMEOUT, RawWatch::open(addr, &path, None, &[]));
        let mut watch = match opening
            .await
            .unwrap_or_else(|_| Err(std::io::ErrorKind::TimedOut.into()))
        {
            Ok(watch) => {
                if !counted {
                    counted = true;
                    opened.fetch_add(1, Ordering::AcqRel);
                }
                watch
            }
            Err(_) => {
                // Away (connection refused) or not ready (429): retry shortly.
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        watch.set_read_buffer(2048);
        let mut relist = false;
        while !watch.ended && !relist && !stop.load(Ordering::Acquire) {
            progress.store(last, Ordering::Release);
            match tokio::time::timeout(Duration::from_millis(200), watch.read_some()).await {
                Ok(Ok(_)) => {}
                Ok(Err(_)) => break,
                Err(_) => continue,
            }
            watch.drain_lines(|line| {
                let Ok(event) = serde_json::from_slice::<Value>(line) else {
                    return;
                };
                match event["type"].as_str() {
                    Some("BOOKMARK") => {
                        if let Some(rv) = rv_of(&event["object"]) {
                            last = rv;
                        }
                    }
                    Some("ERROR") if event["object"]["code"] == 410 => {
                        seen.gone += 1;
                        relist = true;
                    }
                    Some("ERROR") => {}
                    Some(_) => {
                        if let Some(rv) = rv_of(&event["object"]) {
                            seen.events.push(rv);
                            last = rv;
                        }
                        if after_shutdown && seen.resumed.is_none() {
                            seen.resumed = Some(Instant::now());
                        }
                    }
                    None => {}
                }
            });
        }
        if relist {
            // As an informer: list (the object's current state), then watch from the list.
            let list_path = format!("{CONFIGMAPS}?{selector}");
            loop {
                if stop.load(Ordering::Acquire) {
                    break;
                }
                let addr = if shutdown_began.load(Ordering::Acquire) {
                    targets.resume
                } else {
                    targets.first
                };
                if let Ok(response) = watchkeeper_testkit::request(
                    addr,
                    "GET",
                    &list_path,
                    &[("Accept", "application/json")],
                    b"",
                )
                .await
                    && response.status == 200
                    && let Some(rv) = rv_of(&response.json())
                {
                    last = rv;
                    progress.store(last, Ordering::Release);
                    seen.relists += 1;
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
    seen
}

/// Figures of one run, per half (bookmarks allowed or not).
#[derive(Debug, Default, Clone, serde::Serialize)]
struct Figures {
    watchers: usize,
    gone: u64,
    relists: u64,
    lost: u64,
    duplicates: u64,
    not_resumed: usize,
    resumed: Latency,
}

/// The watchers of a run, started.
struct Watchers {
    signals: Signals,
    progress: Vec<Arc<AtomicU64>>,
    objects: usize,
    tasks: Vec<tokio::task::JoinHandle<Seen>>,
    opened_at: Instant,
}

impl Watchers {
    /// Starts `sizes.watchers` watchers from `start_rv` on `clients`.
    fn start(
        clients: &tokio::runtime::Runtime,
        sizes: Sizes,
        start_rv: u64,
        targets: Targets,
    ) -> Watchers {
        let (n, objects) = (sizes.watchers, sizes.objects());
        let signals = Signals {
            shutdown_began: Arc::new(AtomicBool::new(false)),
            stop: Arc::new(AtomicBool::new(false)),
            opened: Arc::new(AtomicUsize::new(0)),
        };
        let progress: Vec<Arc<AtomicU64>> =
            (0..n).map(|_| Arc::new(AtomicU64::new(start_rv))).collect();
        let tasks = (0..n)
            .map(|i| {
                let seen = Seen {
                    object: i % objects,
                    start: start_rv,
                    bookmarks: i % 2 == 0,
                    ..Seen::default()
                };
                clients.spawn(watcher(targets, seen, signals.clone(), progress[i].clone()))
            })
            .collect();
        Watchers {
            signals,
            progress,
            objects,
            tasks,
            opened_at: Instant::now(),
        }
    }

    /// Waits until `opened()` reaches the watchers' number; returns the seconds it took.
    fn wait_open(&self, opened: impl Fn() -> usize) -> Result<f64, String> {
        let n = self.tasks.len();
        while opened() < n {
            if self.opened_at.elapsed() > Duration::from_secs(120) {
                return Err(format!("only {} of {n} watches opened in 120 s", opened()));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(self.opened_at.elapsed().as_secs_f64())
    }

    /// Marks the start of the shutdown: streams opened from now on count as resumed.
    fn shutdown_begins(&self) -> Instant {
        self.signals.shutdown_began.store(true, Ordering::Release);
        Instant::now()
    }

    /// Waits until each watcher has seen its object's last acknowledged write (an event, a
    /// bookmark or a relist at or past it), or `CATCH_UP_MAX`: a watcher still behind then
    /// counts its missing events as lost and, if it had no event since the shutdown, as not
    /// resumed. Then stops the watchers and returns what they saw and the seconds waited.
    fn finish(
        self,
        clients: &tokio::runtime::Runtime,
        acked: &[(usize, u64)],
    ) -> Result<(Vec<Seen>, f64), String> {
        let mut last_acked = [0u64; OBJECTS];
        for (object, rv) in acked {
            last_acked[*object] = last_acked[*object].max(*rv);
        }
        let caught_up = Instant::now();
        while caught_up.elapsed() < CATCH_UP_MAX
            && self
                .progress
                .iter()
                .enumerate()
                .any(|(i, seen)| seen.load(Ordering::Acquire) < last_acked[i % self.objects])
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        let catch_up_secs = caught_up.elapsed().as_secs_f64();
        self.signals.stop.store(true, Ordering::Release);
        let mut seen = Vec::new();
        for task in self.tasks {
            seen.push(
                clients
                    .block_on(task)
                    .map_err(|e| format!("watcher: {e}"))?,
            );
        }
        Ok((seen, catch_up_secs))
    }
}

/// Counts what the watchers saw against the acknowledged writes, per half (bookmarks allowed,
/// not allowed); resumption times from `began`.
fn count(seen: &[Seen], acked: &[(usize, u64)], began: Instant) -> (Figures, Figures) {
    let mut by_object: HashMap<usize, Vec<u64>> = HashMap::new();
    for (object, rv) in acked {
        by_object.entry(*object).or_default().push(*rv);
    }
    let mut halves = [Figures::default(), Figures::default()];
    let mut delays: [Vec<u64>; 2] = [Vec::new(), Vec::new()];
    for watcher in seen {
        let half = usize::from(!watcher.bookmarks);
        let figures = &mut halves[half];
        figures.watchers += 1;
        figures.gone += watcher.gone;
        figures.relists += watcher.relists;
        let mut received = watcher.events.clone();
        received.sort_unstable();
        let total = received.len();
        received.dedup();
        figures.duplicates += (total - received.len()) as u64;
        let expected = by_object
            .get(&watcher.object)
            .map_or(&[][..], Vec::as_slice);
        figures.lost += expected
            .iter()
            .filter(|rv| **rv > watcher.start && received.binary_search(rv).is_err())
            .count() as u64;
        match watcher.resumed {
            Some(at) => delays[half].push(
                u64::try_from(at.saturating_duration_since(began).as_nanos()).unwrap_or(u64::MAX),
            ),
            None => figures.not_resumed += 1,
        }
    }
    let [with, without] = halves;
    let [delays_with, delays_without] = delays;
    (
        Figures {
            resumed: Latency::from_nanos(delays_with),
            ..with
        },
        Figures {
            resumed: Latency::from_nanos(delays_without),
            ..without
        },
    )
}

/// What one run returns: the two halves' figures and its raw record.
type RunFigures = (Figures, Figures, Value);

/// One restart run on the embedded store.
fn run_once(sizes: Sizes, rebuild: bool, dir: &Path) -> Result<RunFigures, String> {
    let server_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("server")
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let clients = client_runtime(2);
    let server = server_rt.block_on(start(args(
        dir,
        "127.0.0.1:0".parse().expect("address"),
        rebuild,
    )))?;
    let addr = server.addr;
    let start_rv = clients.block_on(seed(addr, OBJECTS, 64))?;
    let stop_writer = Arc::new(AtomicBool::new(false));
    let watchers = Watchers::start(
        &clients,
        sizes,
        start_rv,
        Targets {
            first: addr,
            resume: addr,
        },
    );
    // Every watcher has opened its stream once the server counts them.
    let open_secs = watchers.wait_open(|| {
        server.app.resource("", "v1", "configmaps").map_or(0, |r| {
            usize::try_from(r.cache().metrics().watchers.get()).unwrap_or(0)
        })
    })?;
    let writes = clients.spawn(writer(
        addr,
        sizes.objects(),
        sizes.rate,
        stop_writer.clone(),
    ));
    std::thread::sleep(sizes.warm_up);

    let began = watchers.shutdown_begins();
    server_rt.block_on(server.shutdown());
    let stopped = began.elapsed();
    let server = server_rt.block_on(start(args(dir, addr, rebuild)))?;
    let downtime = began.elapsed();
    std::thread::sleep(sizes.after);
    stop_writer.store(true, Ordering::Release);
    let acked = clients
        .block_on(writes)
        .map_err(|e| format!("writer: {e}"))?;
    let (seen, catch_up_secs) = watchers.finish(&clients, &acked)?;
    server_rt.block_on(server.shutdown());
    server_rt.shutdown_timeout(Duration::from_secs(5));
    clients.shutdown_timeout(Duration::from_secs(5));

    Ok(report(
        Mode::Embedded,
        rebuild,
        sizes,
        &seen,
        &acked,
        began,
        serde_json::json!({
            "open_secs": open_secs,
            "shutdown_secs": stopped.as_secs_f64(),
            "downtime_secs": downtime.as_secs_f64(),
            "catch_up_after_writes_secs": catch_up_secs,
        }),
    ))
}

/// A run's counts (see [`count`]) and its raw record: `times` (the run's phases, seconds)
/// with the mode, sizes and counts.
fn report(
    mode: Mode,
    rebuild: bool,
    sizes: Sizes,
    seen: &[Seen],
    acked: &[(usize, u64)],
    began: Instant,
    times: Value,
) -> (Figures, Figures, Value) {
    let (with, without) = count(seen, acked, began);
    let mut raw = serde_json::json!({
        "mode": mode.name(),
        "rebuild_history": rebuild,
        "watchers": sizes.watchers,
        "rate": sizes.rate,
        "writes_acked": acked.len(),
        "with_bookmarks": with,
        "without_bookmarks": without,
    });
    if let (Value::Object(raw), Value::Object(times)) = (&mut raw, times) {
        raw.extend(times);
    }
    (with, without, raw)
}

/// A watchkeeper instance in a child process (`watchkeeper-bench __serve ARGS`): it prints its
/// address once ready and shuts down gracefully when its standard input closes.
struct ServerChild {
    child: Child,
    stdin: Option<ChildStdin>,
    addr: SocketAddr,
}

impl ServerChild {
    /// Starts an instance with `args` (a JSON object of `watchkeeper serve`'s flags, in
    /// kebab-case) and waits until it is ready.
    fn spawn(exe: &Path, args: &Value) -> Result<ServerChild, String> {
        let mut child = Command::new(exe)
            .arg("__serve")
            .arg(args.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("cannot start a server child: {e}"))?;
        let stdin = child.stdin.take();
        let mut line = String::new();
        if let Some(stdout) = child.stdout.take() {
            let _ = BufReader::new(stdout).read_line(&mut line);
        }
        let addr = match line.trim().parse() {
            Ok(addr) => addr,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "the server child did not start ({:?})",
                    line.trim()
                ));
            }
        };
        Ok(ServerChild { child, stdin, addr })
    }

    /// Shuts it down gracefully and waits until the process has exited.
    fn stop(mut self) -> Result<(), String> {
        if let Some(mut stdin) = self.stdin.take() {
            let _ = stdin.write_all(b"stop\n");
        }
        let status = self.child.wait().map_err(|e| e.to_string())?;
        if status.success() {
            Ok(())
        } else {
            Err(format!("the server child exited with {status}"))
        }
    }
}

impl Drop for ServerChild {
    fn drop(&mut self) {
        if self.stdin.is_some() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// `watchkeeper-bench __serve ARGS`: one watchkeeper instance for the etcd mode. `ARGS` is a
/// JSON object of `watchkeeper serve`'s flags (kebab-case keys). Prints the address once the
/// server is ready, shuts down gracefully when a line arrives on standard input or it closes.
/// Returns the exit code.
#[must_use]
pub fn serve_main(args: &[String]) -> i32 {
    crate::sys::raise_fd_limit();
    let Some(json) = args.first() else {
        eprintln!("__serve needs the server's flags as a JSON object");
        return 2;
    };
    let serve_args: ServeArgs = match serde_json::from_str(json) {
        Ok(args) => args,
        Err(error) => {
            eprintln!("__serve: {error}");
            return 2;
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("__serve: {error}");
            return 1;
        }
    };
    runtime.block_on(async {
        let server = match start(serve_args).await {
            Ok(server) => server,
            Err(error) => {
                eprintln!("__serve: {error}");
                return 1;
            }
        };
        println!("{}", server.addr);
        let _ = std::io::stdout().flush();
        let _ = tokio::task::spawn_blocking(|| {
            let mut line = String::new();
            std::io::stdin().read_line(&mut line)
        })
        .await;
        server.shutdown().await;
        0
    })
}

/// The flags of one etcd-mode instance.
fn etcd_args(endpoint: &str, prefix: &str, listen: SocketAddr, rebuild: bool) -> Value {
    serde_json::json!({
        "listen": listen.to_string(),
        "store": "etcd",
        "etcd-endpoints": [endpoint],
        "etcd-prefix": prefix,
        "rebuild-history": rebuild,
        "max-watches": 0,
        "max-watches-per-user": 0,
        "max-requests-inflight": 0,
        "max-mutating-requests-inflight": 0,
        "enable-priority-and-fairness": false,
        "max-connections": 0,
    })
}

/// The (etcd client, etcd peer, instance A, instance B) ports of the etcd mode: from
/// `--port-base`, or free ports (port 0 for the instances).
fn etcd_ports(options: &Options) -> (Option<(u16, u16)>, u16, u16) {
    match options.port_base {
        Some(base) => (
            Some((base, base.saturating_add(1))),
            base.saturating_add(2),
            base.saturating_add(3),
        ),
        None => (None, 0, 0),
    }
}

/// One restart run in etcd mode (see the module docs): `mode` says where the watchers resume.
fn run_etcd(
    options: &Options,
    sizes: Sizes,
    mode: Mode,
    rebuild: bool,
) -> Result<RunFigures, String> {
    let (etcd_ports, port_a, port_b) = etcd_ports(options);
    let etcd = crate::etcd::Etcd::start_on(etcd_ports)?;
    let clients = client_runtime(2);
    clients.block_on(crate::etcd::connect(&etcd.endpoint))?;
    let prefix = "/registry";
    let loopback = |port: u16| SocketAddr::from(([127, 0, 0, 1], port));
    let a = ServerChild::spawn(
        &options.exe,
        &etcd_args(&etcd.endpoint, prefix, loopback(port_a), rebuild),
    )?;
    let b = ServerChild::spawn(
        &options.exe,
        &etcd_args(&etcd.endpoint, prefix, loopback(port_b), rebuild),
    )?;
    let (addr_a, addr_b) = (a.addr, b.addr);
    let start_rv = clients.block_on(seed(addr_a, OBJECTS, 64))?;
    let stop_writer = Arc::new(AtomicBool::new(false));
    let watchers = Watchers::start(
        &clients,
        sizes,
        start_rv,
        Targets {
            first: addr_a,
            resume: if mode == Mode::EtcdSibling {
                addr_b
            } else {
                addr_a
            },
        },
    );
    let opened = watchers.signals.opened.clone();
    let open_secs = watchers.wait_open(|| opened.load(Ordering::Acquire))?;
    let writes = clients.spawn(writer(
        addr_b,
        sizes.objects(),
        sizes.rate,
        stop_writer.clone(),
    ));
    std::thread::sleep(sizes.warm_up);

    let began = watchers.shutdown_begins();
    a.stop()?;
    let stopped = began.elapsed();
    let restarted = if mode == Mode::EtcdRestart {
        Some(ServerChild::spawn(
            &options.exe,
            &etcd_args(&etcd.endpoint, prefix, addr_a, rebuild),
        )?)
    } else {
        None
    };
    let downtime = began.elapsed();
    std::thread::sleep(sizes.after);
    stop_writer.store(true, Ordering::Release);
    let acked = clients
        .block_on(writes)
        .map_err(|e| format!("writer: {e}"))?;
    let (seen, catch_up_secs) = watchers.finish(&clients, &acked)?;
    if let Some(a) = restarted {
        a.stop()?;
    }
    b.stop()?;
    clients.shutdown_timeout(Duration::from_secs(5));
    drop(etcd);

    Ok(report(
        mode,
        rebuild,
        sizes,
        &seen,
        &acked,
        began,
        serde_json::json!({
            "open_secs": open_secs,
            "shutdown_secs": stopped.as_secs_f64(),
            "downtime_secs": (mode == Mode::EtcdRestart).then_some(downtime.as_secs_f64()),
            "catch_up_after_writes_secs": catch_up_secs,
        }),
    ))
}

/// Where a run's store lives and where its watchers resume.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Embedded store, one in-process server restarted on the same data.
    Embedded,
    /// etcd, two instances: the watchers' instance restarts and they resume on it.
    EtcdRestart,
    /// etcd, two instances: the watchers' instance shuts down and they resume on the sibling.
    EtcdSibling,
}

impl Mode {
    /// Every mode, in the order they run.
    pub const ALL: [Mode; 3] = [Mode::Embedded, Mode::EtcdRestart, Mode::EtcdSibling];

    /// Its name on the command line (`--restart-modes`).
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Mode::Embedded => "embedded",
            Mode::EtcdRestart => "etcd-restart",
            Mode::EtcdSibling => "etcd-sibling",
        }
    }

    /// The mode named `name`.
    #[must_use]
    pub fn parse(name: &str) -> Option<Mode> {
        Mode::ALL.into_iter().find(|mode| mode.name() == name)
    }
}

fn temp_dir(tag: &str) -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    std::env::temp_dir().join(format!(
        "watchkeeper-bench-restart-{tag}-{}-{nanos:x}",
        std::process::id()
    ))
}

/// A table row's figures: watchers, 410s, relists, lost, duplicates, not resumed, times.
fn cells(figures: &Figures) -> Vec<String> {
    vec![
        figures.watchers.to_string(),
        figures.gone.to_string(),
        figures.relists.to_string(),
        figures.lost.to_string(),
        figures.duplicates.to_string(),
        figures.not_resumed.to_string(),
        format!(
            "{:.2} / {:.2} / {:.2}",
            figures.resumed.p50 / 1e6,
            figures.resumed.p99 / 1e6,
            figures.resumed.max / 1e6
        ),
    ]
}

/// The figure columns of both tables.
const FIGURE_COLUMNS: [&str; 7] = [
    "watchers",
    "410s",
    "relists",
    "events lost",
    "duplicates",
    "not resumed",
    "first event after shutdown began p50 / p99 / max (s)",
];

/// The `restart` suite: a table for the embedded store and one for etcd mode (the modes of
/// `--restart-modes`), a row per configuration and half; runs interleaved (per round: each
/// mode with history rebuilding on, then off).
///
/// # Errors
/// A server or client failed.
pub fn restart(options: &Options) -> Result<Vec<Table>, String> {
    let fd_limit = crate::sys::fd_limit();
    // Embedded: each watcher costs two descriptors here (client and server ends); etcd mode:
    // one (the servers are child processes). Keep a margin.
    let fd_room = |per_watcher: u64| {
        usize::try_from(fd_limit.saturating_sub(2_000) / per_watcher).unwrap_or(0)
    };
    let sizes = |per_watcher: u64| {
        if options.smoke {
            Sizes {
                watchers: 20,
                rate: 50.0,
                warm_up: Duration::from_millis(500),
                after: Duration::from_secs(1),
            }
        } else {
            Sizes {
                watchers: 10_000.min(fd_room(per_watcher)),
                rate: 100.0,
                warm_up: Duration::from_secs(5),
                after: Duration::from_secs(8),
            }
        }
    };
    let (embedded_sizes, etcd_sizes) = (sizes(2), sizes(1));
    let modes: Vec<Mode> = if options.restart_modes.is_empty() {
        Mode::ALL.to_vec()
    } else {
        options.restart_modes.clone()
    };
    let mut embedded = Table::new(
        "restart",
        &format!(
            "Restart: {} watchers, {} writes/s, embedded store, graceful shutdown and restart on the same data",
            embedded_sizes.watchers, embedded_sizes.rate
        ),
        &[
            &["history rebuilt on start", "watchers allow bookmarks"][..],
            &FIGURE_COLUMNS[..],
        ]
        .concat(),
    );
    let mut etcd = Table::new(
        "restart",
        &format!(
            "Restart in etcd mode: {} watchers on instance A of two on one etcd, {} writes/s through instance B, A shuts down gracefully",
            etcd_sizes.watchers, etcd_sizes.rate
        ),
        &[
            &[
                "watchers resume on",
                "history rebuilt on start",
                "watchers allow bookmarks",
            ][..],
            &FIGURE_COLUMNS[..],
        ]
        .concat(),
    );
    for run in 0..options.runs {
        for &mode in &modes {
            for rebuild in [true, false] {
                let result = if mode == Mode::Embedded {
                    let dir = temp_dir(if rebuild { "on" } else { "off" });
                    let result = run_once(embedded_sizes, rebuild, &dir);
                    let _ = std::fs::remove_dir_all(&dir);
                    result
                } else {
                    run_etcd(options, etcd_sizes, mode, rebuild)
                };
                let (with, without, raw) = result?;
                eprintln!(
                    "restart run {run} mode={} rebuild={rebuild}: {raw}",
                    mode.name()
                );
                let yes_no = |b: bool| if b { "yes" } else { "no" }.to_owned();
                for (bookmarks, figures) in [(true, &with), (false, &without)] {
                    let mut row = match mode {
                        Mode::Embedded => vec![],
                        Mode::EtcdRestart => vec!["A, restarted".to_owned()],
                        Mode::EtcdSibling => vec!["B, the sibling".to_owned()],
                    };
                    row.extend([yes_no(rebuild), yes_no(bookmarks)]);
                    row.extend(cells(figures));
                    if mode == Mode::Embedded {
                        embedded.row(row);
                    } else {
                        etcd.row(row);
                    }
                }
                if mode == Mode::Embedded {
                    embedded.raw(raw);
                } else {
                    etcd.raw(raw);
                }
            }
        }
    }
    embedded.note(
        "Each watcher watches one of 100 configmaps (fewer in smoke runs) written round-robin, so it gets an event every 100 / rate seconds: the time to its first event after the shutdown began includes waiting for the next write of its object.",
    );
    embedded.note(
        "Without bookmarks a watcher resumes from its last event, older than the restarted server's list revision: without history rebuilding that is a 410 and a relist (the events written in between are replaced by the list's state: counted as lost events).",
    );
    embedded.note(format!(
        "Watchers limited by the descriptor limit ({fd_limit}): each costs two descriptors in this one process."
    ));
    etcd.note(
        "Both instances are child processes of the benchmark on one private etcd; every watcher opens its stream on A; the writer writes through B the whole run, so writes go on while A is away. Each watcher watches one of 100 configmaps (fewer in smoke runs) written round-robin: the time to its first event after the shutdown began includes waiting for the next write of its object.",
    );
    etcd.note(
        "History rebuilding is a start-time flag, given to both instances: a restarted A without it starts its history at etcd's current revision, after every watcher's position (writes went on through B while A was away), so every watcher gets a 410 and relists (kube-apiserver's behaviour after a restart). B has been running since before the watchers started, so its history covers their positions whatever the flag (as a kube-apiserver that has been running holds its watch cache's window since its own start).",
    );
    let mut tables = Vec::new();
    if modes.contains(&Mode::Embedded) {
        tables.push(embedded);
    }
    if modes.iter().any(|mode| *mode != Mode::Embedded) {
        tables.push(etcd);
    }
    Ok(tables)
}

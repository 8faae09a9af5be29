//! Suite `writes` (issue 15, "writes that keep up"): the sustained write rate a client
//! achieves, with a fixed number of writes in flight and no pacing, against watchkeeper on
//! each store and against etcd's own put, interleaved in one invocation.
//!
//! - Table Z1, end to end: merge-PATCHes of 1 KiB ConfigMaps over HTTP/1.1 keep-alive
//!   connections (one per write in flight) against an in-process watchkeeper with the memory
//!   store, the embedded store (durable: every acknowledged write fsynced) on the machine's
//!   disk and on tmpfs, and the etcd store; next to puts of 1 KiB values through etcd's v3
//!   API (etcd-client, one gRPC connection per write in flight) on the same etcd; each with 0
//!   and with N reading watchers. Server CPU per write: the server process's utime+stime
//!   (watchkeeper: this process, the clients run in a child; etcd: the etcd process;
//!   watchkeeper on the etcd store: both) over the run, divided by the writes.
//! - Table Z2, the stores alone: `Store::put` of a 1 KiB value from tasks in this process,
//!   the embedded store with group commit and with one commit per transaction
//!   (`commit_batch_max` 1, the design before group commit), the memory store and the etcd
//!   store, so the store's own ceiling is seen apart from the HTTP path.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use etcd_client::WatchOptions;
use serde_json::{Value, json};
use watchkeeper::config::ServeArgs;
use watchkeeper_store::{EmbeddedConfig, EmbeddedStore, EtcdConfig, EtcdStore, Store};

use crate::e2e::{CONFIGMAPS, Child, Running, arg, seed, watch_path};
use crate::etcd::{Etcd, connect};
use crate::http::{Conn, now_ns};
use crate::report::{Table, f, x};
use crate::{Latency, Options, median};

/// ConfigMaps written: writer `j` of `k` in flight writes `cm-j`, `cm-(j+k)`, ... only, so no
/// two writes in flight touch one object (no conflicts) whatever `k` up to half of this.
const OBJECTS: usize = 128;

/// Bytes of every written value (etcd) and of every ConfigMap's payload (watchkeeper).
const VALUE_BYTES: usize = 1024;

/// How long the watchers may take to deliver every write after the last one.
const DRAIN: Duration = Duration::from_secs(120);

/// One system of table Z1.
#[derive(Clone, Debug)]
enum System {
    /// etcd's own put (v3 API through etcd-client).
    Etcd,
    /// watchkeeper, memory store.
    Memory,
    /// watchkeeper, embedded store (durable commits) with its data under this directory.
    Embedded { root: PathBuf, medium: &'static str },
    /// watchkeeper on the etcd store (the same etcd).
    EtcdStore,
}

impl System {
    fn name(&self) -> String {
        match self {
            System::Etcd => "etcd 3.4 put (gRPC, data on tmpfs)".to_owned(),
            System::Memory => "watchkeeper, memory store".to_owned(),
            System::Embedded { medium, .. } => {
                format!("watchkeeper, embedded store, durable, data on {medium}")
            }
            System::EtcdStore => "watchkeeper, etcd store (same etcd)".to_owned(),
        }
    }
}

/// The figures of one run.
#[derive(Debug)]
struct Run {
    writes_per_second: f64,
    latency: Latency,
    cpu_us_per_write: f64,
    complete: bool,
    raw: Value,
}

/// Sizes of the suite.
struct Sizes {
    watchers: Vec<usize>,
    inflight: Vec<usize>,
    secs: f64,
}

fn sizes(options: &Options) -> Sizes {
    if options.smoke {
        Sizes {
            watchers: vec![0, 5],
            inflight: vec![1, 4],
            secs: 0.3,
        }
    } else {
        Sizes {
            watchers: vec![0, 1_000],
            inflight: vec![1, 16, 64],
            secs: 3.0,
        }
    }
}

/// A fresh directory under `root` for one run's embedded store.
fn run_dir(root: &Path) -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    root.join(format!(
        "watchkeeper-bench-writes-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ))
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// One watchkeeper run: a fresh server on `system`'s store, `OBJECTS` ConfigMaps, a client
/// child with `watchers` reading watches and `inflight` writers PATCHing for `secs`.
fn watchkeeper_run(
    options: &Options,
    system: &System,
    etcd: &Etcd,
    watchers: usize,
    inflight: usize,
    secs: f64,
) -> Result<Run, String> {
    let mut dir = None;
    let args = match system {
        System::Memory => ServeArgs::default(),
        System::Embedded { root, .. } => {
            let d = run_dir(root);
            let args = ServeArgs {
                store: Some("embedded".to_owned()),
                data_dir: Some(d.clone()),
                durable_commits: Some(true),
                ..ServeArgs::default()
            };
            dir = Some(d);
            args
        }
        System::EtcdStore => ServeArgs {
            store: Some("etcd".to_owned()),
            etcd_endpoints: Some(vec![etcd.endpoint.clone()]),
            etcd_prefix: Some(format!("/writes-{}", now_ns())),
            ..ServeArgs::default()
        },
        System::Etcd => return Err("not a watchkeeper system".to_owned()),
    };
    let result = (|| {
        let running = Running::start(args)?;
        let addr = running.addr;
        let result = running
            .runtime
            .block_on(seed(addr, OBJECTS, VALUE_BYTES))
            .and_then(|rv| drive(options, system, etcd, addr, rv, watchers, inflight, secs));
        running.stop();
        result
    })();
    if let Some(d) = dir {
        let _ = std::fs::remove_dir_all(d);
    }
    result
}

/// Runs the write client child against the server at `addr` and measures the server's CPU.
#[allow(clippy::too_many_arguments)]
fn drive(
    options: &Options,
    system: &System,
    etcd: &Etcd,
    addr: SocketAddr,
    rv: u64,
    watchers: usize,
    inflight: usize,
    secs: f64,
) -> Result<Run, String> {
    let mut child = Child::spawn(
        &options.exe,
        &[
            "writes".into(),
            "--addr".into(),
            addr.to_string(),
            "--rv".into(),
            rv.to_string(),
            "--watchers".into(),
            watchers.to_string(),
            "--inflight".into(),
            inflight.to_string(),
            "--secs".into(),
            secs.to_string(),
        ],
    )?;
    child.expect("ready")?;
    let with_etcd = matches!(system, System::EtcdStore);
    let etcd_cpu = || {
        if with_etcd {
            crate::sys::cpu_seconds_of(etcd.pid())
        } else {
            0.0
        }
    };
    let (cpu0, ecpu0) = (crate::sys::cpu_seconds(), etcd_cpu());
    child.send("go")?;
    let done = child.expect("done");
    let (cpu1, ecpu1) = (crate::sys::cpu_seconds(), etcd_cpu());
    let done: Value = serde_json::from_str(&done?).map_err(|e| e.to_string())?;
    child.finish();
    if let Some(error) = done.get("error") {
        return Err(format!("writes client: {error}"));
    }
    let writes = done["writes"].as_u64().unwrap_or(0);
    let cpu = (cpu1 - cpu0) + (ecpu1 - ecpu0);
    Ok(Run {
        writes_per_second: writes as f64 / done["write_secs"].as_f64().unwrap_or(1.0).max(1e-9),
        latency: serde_json::from_value::<LatencyJson>(done["latency"].clone())
            .map(LatencyJson::into_latency)
            .unwrap_or_default(),
        cpu_us_per_write: cpu * 1e6 / (writes as f64).max(1.0),
        complete: done["complete"].as_bool().unwrap_or(false),
        raw: json!({"system": system.name(), "watchers": watchers, "inflight": inflight, "secs": secs, "client": done, "cpu_seconds": cpu1 - cpu0, "etcd_cpu_seconds": ecpu1 - ecpu0, "load": load_average()}),
    })
}

/// [`Latency`] as the child prints it.
#[derive(serde::Deserialize)]
struct LatencyJson {
    count: usize,
    p50: f64,
    p99: f64,
    max: f64,
}

impl LatencyJson {
    fn into_latency(self) -> Latency {
        Latency {
            count: self.count,
            p50: self.p50,
            p99: self.p99,
            max: self.max,
        }
    }
}

/// `__clients writes --addr A --rv R --watchers W --inflight K --secs S`: opens W reading
/// watches, prints `ready`, waits for `go`, then K writers merge-PATCH their own ConfigMaps
/// as fast as the answers come back for S seconds; waits until every watch delivered every
/// successful write (at most [`DRAIN`]); prints `done {json}`.
///
/// # Errors
/// The watches could not be opened.
pub(crate) async fn child_writes(args: &[String]) -> Result<Value, String> {
    let addr: SocketAddr = arg(args, "--addr").ok_or("--addr")?;
    let rv: u64 = arg(args, "--rv").unwrap_or(0);
    let watchers: usize = arg(args, "--watchers").unwrap_or(0);
    let inflight: usize = arg::<usize>(args, "--inflight").unwrap_or(1).max(1);
    let secs: f64 = arg(args, "--secs").unwrap_or(1.0);
    let watches = crate::e2e::open_many(addr, &watch_path(rv), watchers, false).await?;
    let mut conns = Vec::with_capacity(inflight);
    for _ in 0..inflight {
        conns.push(Conn::connect(addr).await.map_err(|e| e.to_string())?);
    }
    println!("ready");
    let mut line = String::new();
    tokio::task::spawn_blocking(move || std::io::stdin().read_line(&mut line))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    let delivered = Arc::new(AtomicU64::new(0));
    let target = Arc::new(AtomicU64::new(u64::MAX));
    let mut readers = Vec::with_capacity(watchers);
    for mut w in watches {
        let (delivered, target) = (delivered.clone(), target.clone());
        readers.push(tokio::spawn(async move {
            let mut mine = 0u64;
            while mine < target.load(Ordering::Acquire) && !w.ended {
                match tokio::time::timeout(Duration::from_millis(200), w.read(&mut |_| {})).await {
                    Ok(Ok(seen)) => {
                        mine += seen.events;
                        delivered.fetch_add(seen.events, Ordering::Relaxed);
                    }
                    Ok(Err(_)) => break,
                    Err(_) => {}
                }
            }
        }));
    }
    let start = Instant::now();
    let stop = start + Duration::from_secs_f64(secs);
    let mut writers = Vec::with_capacity(inflight);
    for (j, mut conn) in conns.into_iter().enumerate() {
        writers.push(tokio::spawn(async move {
            let mine: Vec<usize> = (j..OBJECTS).step_by(inflight).collect();
            let (mut ok, mut failed, mut latencies) = (0u64, 0u64, Vec::new());
            let mut i = 0;
            while Instant::now() < stop {
                let path = format!("{CONFIGMAPS}/cm-{}", mine[i % mine.len()]);
                i += 1;
                let body = format!("{{\"data\":{{\"sent\":\"{}\"}}}}", now_ns());
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
                        latencies.push(u64::try_from(sent.elapsed().as_nanos()).unwrap_or(0));
                    }
                    Ok(_) => failed += 1,
                    Err(_) => {
                        failed += 1;
                        match Conn::connect(addr).await {
                            Ok(c) => conn = c,
                            Err(_) => break,
                        }
                    }
                }
            }
            (ok, failed, latencies)
        }));
    }
    let Finished {
        ok,
        failed,
        latencies,
        write_secs,
        mut complete,
    } = finish(writers, readers, &target, start).await?;
    let delivered = delivered.load(Ordering::Relaxed);
    complete &= delivered == ok * watchers as u64;
    Ok(json!({
        "writes": ok,
        "failed": failed,
        "write_secs": write_secs,
        "latency": Latency::from_nanos(latencies),
        "delivered": delivered,
        "expected": ok * watchers as u64,
        "complete": complete,
    }))
}

/// What the writers of one run did, once they stopped and the readers were waited for.
struct Finished {
    ok: u64,
    failed: u64,
    latencies: Vec<u64>,
    write_secs: f64,
    /// Every reader finished within [`DRAIN`].
    complete: bool,
}

/// Joins the writers (each: writes acknowledged, failed, latencies in ns), tells the readers
/// how many writes to expect (`target`) and waits for them at most [`DRAIN`].
async fn finish(
    writers: Vec<tokio::task::JoinHandle<(u64, u64, Vec<u64>)>>,
    readers: Vec<tokio::task::JoinHandle<()>>,
    target: &AtomicU64,
    start: Instant,
) -> Result<Finished, String> {
    let (mut ok, mut failed, mut latencies) = (0, 0, Vec::new());
    for w in writers {
        let (o, e, l) = w.await.map_err(|e| e.to_string())?;
        ok += o;
        failed += e;
        latencies.extend(l);
    }
    let write_secs = start.elapsed().as_secs_f64();
    target.store(ok, Ordering::Release);
    let deadline = tokio::time::Instant::now() + DRAIN;
    let mut complete = true;
    for r in readers {
        let abort = r.abort_handle();
        if tokio::time::timeout_at(deadline, r).await.is_err() {
            abort.abort();
            complete = false;
        }
    }
    Ok(Finished {
        ok,
        failed,
        latencies,
        write_secs,
        complete,
    })
}

fn etcd_value() -> Vec<u8> {
    let mut v = format!("{:020}", now_ns()).into_bytes();
    v.resize(VALUE_BYTES, b'x');
    v
}

/// One etcd run: `watchers` watches (own connection each, reading, in this process) on one
/// prefix, `inflight` connections putting 1 KiB values over their own keys for `secs`.
async fn etcd_run(etcd: &Etcd, watchers: usize, inflight: usize, secs: f64) -> Result<Run, String> {
    let prefix = format!("/writes/{}/", now_ns());
    let mut watches = Vec::with_capacity(watchers);
    for _ in 0..watchers {
        let mut c = connect(&etcd.endpoint).await?;
        let stream = c
            .watch(prefix.clone(), Some(WatchOptions::new().with_prefix()))
            .await
            .map_err(|e| e.to_string())?;
        watches.push((c, stream));
    }
    let mut clients = Vec::with_capacity(inflight);
    for _ in 0..inflight {
        clients.push(connect(&etcd.endpoint).await?.kv_client());
    }
    let delivered = Arc::new(AtomicU64::new(0));
    let target = Arc::new(AtomicU64::new(u64::MAX));
    let mut readers = Vec::with_capacity(watchers);
    for (client, mut stream) in watches {
        let (delivered, target) = (delivered.clone(), target.clone());
        readers.push(tokio::spawn(async move {
            let _client = client;
            let mut mine = 0u64;
            while mine < target.load(Ordering::Acquire) {
                match tokio::time::timeout(Duration::from_millis(200), stream.message()).await {
                    Ok(Ok(Some(resp))) => {
                        let n = resp.events().len() as u64;
                        mine += n;
                        delivered.fetch_add(n, Ordering::Relaxed);
                    }
                    Ok(_) => break,
                    Err(_) => {}
                }
            }
        }));
    }
    let cpu0 = crate::sys::cpu_seconds_of(etcd.pid());
    let start = Instant::now();
    let stop = start + Duration::from_secs_f64(secs);
    let mut writers = Vec::with_capacity(inflight);
    for (j, mut kv) in clients.into_iter().enumerate() {
        let prefix = prefix.clone();
        writers.push(tokio::spawn(async move {
            let mine: Vec<usize> = (j..OBJECTS).step_by(inflight).collect();
            let (mut ok, mut failed, mut latencies) = (0u64, 0u64, Vec::new());
            let mut i = 0;
            while Instant::now() < stop {
                let key = format!("{prefix}{}", mine[i % mine.len()]);
                i += 1;
                let sent = Instant::now();
                if kv.put(key, etcd_value(), None).await.is_ok() {
                    ok += 1;
                    latencies.push(u64::try_from(sent.elapsed().as_nanos()).unwrap_or(0));
                } else {
                    failed += 1;
                }
            }
            (ok, failed, latencies)
        }));
    }
    let Finished {
        ok,
        failed,
        latencies,
        write_secs,
        mut complete,
    } = finish(writers, readers, &target, start).await?;
    let cpu1 = crate::sys::cpu_seconds_of(etcd.pid());
    let delivered = delivered.load(Ordering::Relaxed);
    complete &= delivered == ok * watchers as u64;
    let latency = Latency::from_nanos(latencies);
    Ok(Run {
        writes_per_second: ok as f64 / write_secs.max(1e-9),
        latency,
        cpu_us_per_write: (cpu1 - cpu0) * 1e6 / (ok as f64).max(1.0),
        complete,
        raw: json!({"system": System::Etcd.name(), "watchers": watchers, "inflight": inflight, "secs": secs, "writes": ok, "failed": failed, "write_secs": write_secs, "latency": latency, "delivered": delivered, "expected": ok * watchers as u64, "etcd_cpu_seconds": cpu1 - cpu0, "load": load_average()}),
    })
}

/// Table Z1 (see the module docs).
fn rates_table(
    options: &Options,
    runtime: &tokio::runtime::Runtime,
    etcd: &Etcd,
) -> Result<Table, String> {
    let Sizes {
        watchers,
        inflight,
        secs,
    } = sizes(options);
    let disk = std::env::temp_dir();
    let systems = [
        System::Etcd,
        System::Memory,
        System::Embedded {
            root: disk.clone(),
            medium: "disk (ext4)",
        },
        System::Embedded {
            root: PathBuf::from("/dev/shm"),
            medium: "tmpfs",
        },
        System::EtcdStore,
    ];
    let mut table = Table::new(
        "writes",
        &format!(
            "Z1. Sustained writes/s per store next to etcd's put rate: 1 KiB objects, K writes in flight (no pacing), 0 or N reading watchers, {secs} s of writes per run"
        ),
        &[
            "watchers",
            "writes in flight",
            "system",
            "writes/s",
            "write p50 ms",
            "write p99 ms",
            "server CPU µs per write",
            "writes/s / etcd's",
            "complete",
        ],
    );
    let load_start = load_average();
    for &n in &watchers {
        for &k in &inflight {
            // runs[system] = that system's runs, in round order.
            let mut runs: Vec<Vec<Run>> = systems.iter().map(|_| Vec::new()).collect();
            for round in 0..options.runs {
                for (i, system) in systems.iter().enumerate() {
                    let run = match system {
                        System::Etcd => runtime.block_on(etcd_run(etcd, n, k, secs))?,
                        _ => watchkeeper_run(options, system, etcd, n, k, secs)?,
                    };
                    eprintln!(
                        "  writes {n} watchers, {k} in flight, round {round}: {}: {:.0} writes/s, p99 {:.1} ms, {:.0} CPU-µs/write, complete {}",
                        system.name(),
                        run.writes_per_second,
                        run.latency.p99 / 1000.0,
                        run.cpu_us_per_write,
                        run.complete
                    );
                    table.raw(run.raw.clone());
                    runs[i].push(run);
                }
            }
            for (i, system) in systems.iter().enumerate() {
                let pick = |g: fn(&Run) -> f64| median(&runs[i].iter().map(g).collect::<Vec<_>>());
                let ratio = median(
                    &runs[i]
                        .iter()
                        .zip(&runs[0])
                        .map(|(a, e)| a.writes_per_second / e.writes_per_second.max(1e-9))
                        .collect::<Vec<_>>(),
                );
                table.row(vec![
                    n.to_string(),
                    k.to_string(),
                    system.name(),
                    f(pick(|r| r.writes_per_second), 0),
                    f(pick(|r| r.latency.p50) / 1000.0, 2),
                    f(pick(|r| r.latency.p99) / 1000.0, 2),
                    f(pick(|r| r.cpu_us_per_write), 0),
                    if i == 0 { String::new() } else { x(ratio) },
                    runs[i].iter().all(|r| r.complete).to_string(),
                ]);
            }
        }
    }
    table.note(format!("Order: for each (watchers, in flight) cell, {} rounds of every system in the order of the rows (A, B, C, D, E, A, B, ...); figures are medians over the rounds, the ratio to etcd the median of per-round ratios. Load average at the table's start {load_start}, at its end {}.", options.runs, load_average()));
    table.note(format!("watchkeeper: a fresh in-process server per run (2-worker runtime, admission limits off), {OBJECTS} ConfigMaps of {VALUE_BYTES} B payload; the clients in a child process: K keep-alive HTTP/1.1 connections, each merge-PATCHing (`data.sent`) its own ConfigMaps (no two writes in flight on one object, so no conflicts) as soon as the previous answer came back; N watches of the collection, each on its own connection, reading everything. Embedded store: durable commits (the default: a write is answered after its commit is fsynced), a fresh data directory per run under {} (disk) or /dev/shm (tmpfs, where fsync costs nothing, as for this etcd). etcd store: the same etcd as the etcd rows, a fresh key prefix per run.", disk.display()));
    table.note(format!("etcd: one etcd 3.4 process, data in /dev/shm; K etcd-client connections (gRPC) putting {VALUE_BYTES} B values over their own keys as soon as the previous put answered, from this process (2-worker runtime); N watches of the prefix, each on its own client connection, reading. Server CPU per write: utime+stime of the server process(es) over the run (etcd: the etcd process; watchkeeper: this process, whose only other work is the server while the clients run in the child; watchkeeper on the etcd store: both) divided by the writes, so with N watchers it includes delivering each write N times. Complete: every watcher received every acknowledged write within {} s after the last. Latency: from sending a write to its answer, at the client."
        , DRAIN.as_secs()));
    Ok(table)
}

/// One store-level run: `inflight` tasks putting 1 KiB values to their own keys for `secs`.
async fn store_run<S: Store + Clone + 'static>(
    store: &S,
    prefix: &str,
    inflight: usize,
    secs: f64,
) -> (u64, f64, Latency) {
    let start = Instant::now();
    let stop = start + Duration::from_secs_f64(secs);
    let mut tasks = Vec::with_capacity(inflight);
    for j in 0..inflight {
        let (store, prefix) = (store.clone(), prefix.to_owned());
        tasks.push(tokio::spawn(async move {
            let mine: Vec<usize> = (j..OBJECTS).step_by(inflight).collect();
            let (mut ok, mut latencies, mut i) = (0u64, Vec::new(), 0);
            while Instant::now() < stop {
                let key = format!("{prefix}{}", mine[i % mine.len()]);
                i += 1;
                let sent = Instant::now();
                if store.put(key, etcd_value()).await.is_ok() {
                    ok += 1;
                    latencies.push(u64::try_from(sent.elapsed().as_nanos()).unwrap_or(0));
                }
            }
            (ok, latencies)
        }));
    }
    let (mut ok, mut latencies) = (0, Vec::new());
    for t in tasks {
        if let Ok((o, l)) = t.await {
            ok += o;
            latencies.extend(l);
        }
    }
    (
        ok,
        start.elapsed().as_secs_f64(),
        Latency::from_nanos(latencies),
    )
}

/// A store of table Z2.
#[derive(Clone, Debug)]
enum StoreUnder {
    Memory,
    Embedded {
        root: PathBuf,
        medium: &'static str,
        batch_max: Option<usize>,
    },
    Etcd,
}

impl StoreUnder {
    fn name(&self) -> String {
        match self {
            StoreUnder::Memory => "memory".to_owned(),
            StoreUnder::Embedded {
                medium, batch_max, ..
            } => match batch_max {
                None => format!("embedded, durable, {medium}, group commit"),
                Some(n) => format!("embedded, durable, {medium}, commit_batch_max {n}"),
            },
            StoreUnder::Etcd => "etcd store (etcd 3.4, tmpfs)".to_owned(),
        }
    }
}

/// One store-level run: writes/s, latency, CPU µs per write, transactions per commit.
type StoreRun = (f64, Latency, f64, Option<f64>);

/// Table Z2 (see the module docs).
fn store_table(
    options: &Options,
    runtime: &tokio::runtime::Runtime,
    etcd: &Etcd,
) -> Result<Table, String> {
    let Sizes { inflight, secs, .. } = sizes(options);
    let disk = std::env::temp_dir();
    let mut stores = vec![StoreUnder::Memory];
    for (root, medium) in [
        (disk.clone(), "disk (ext4)"),
        (PathBuf::from("/dev/shm"), "tmpfs"),
    ] {
        for batch_max in [None, Some(1)] {
            stores.push(StoreUnder::Embedded {
                root: root.clone(),
                medium,
                batch_max,
            });
        }
    }
    stores.push(StoreUnder::Etcd);
    let mut table = Table::new(
        "writes",
        &format!(
            "Z2. The stores alone: Store::put of 1 KiB values from K tasks in flight (no pacing, no HTTP, no watchers), {secs} s per run"
        ),
        &[
            "writes in flight",
            "store",
            "writes/s",
            "write p50 ms",
            "write p99 ms",
            "CPU µs per write",
            "transactions per commit",
        ],
    );
    for &k in &inflight {
        let mut runs: Vec<Vec<StoreRun>> = stores.iter().map(|_| Vec::new()).collect();
        for _ in 0..options.runs {
            for (i, under) in stores.iter().enumerate() {
                let prefix = format!("/z2/{}/", now_ns());
                let cpu = |with_etcd: bool| {
                    crate::sys::cpu_seconds()
                        + if with_etcd {
                            crate::sys::cpu_seconds_of(etcd.pid())
                        } else {
                            0.0
                        }
                };
                let (ok, took, latency, commits, cpu_used) = match under {
                    StoreUnder::Memory => {
                        let s = watchkeeper_store::MemoryStore::new(Default::default())
                            .map_err(|e| e.to_string())?;
                        let cpu0 = cpu(false);
                        let (ok, took, lat) = runtime.block_on(store_run(&s, &prefix, k, secs));
                        (ok, took, lat, None, cpu(false) - cpu0)
                    }
                    StoreUnder::Embedded {
                        root, batch_max, ..
                    } => {
                        let dir = run_dir(root);
                        let mut config = EmbeddedConfig::new(&dir);
                        if let Some(n) = batch_max {
                            config.commit_batch_max = *n;
                        }
                        let s = EmbeddedStore::open(config).map_err(|e| e.to_string())?;
                        let cpu0 = cpu(false);
                        let (ok, took, lat) = runtime.block_on(store_run(&s, &prefix, k, secs));
                        let used = cpu(false) - cpu0;
                        let commits = s.commits();
                        drop(s);
                        let _ = std::fs::remove_dir_all(&dir);
                        (ok, took, lat, Some(commits), used)
                    }
                    StoreUnder::Etcd => {
                        let s = runtime
                            .block_on(EtcdStore::connect(EtcdConfig::new([etcd.endpoint.clone()])))
                            .map_err(|e| e.to_string())?;
                        let cpu0 = cpu(true);
                        let (ok, took, lat) = runtime.block_on(store_run(&s, &prefix, k, secs));
                        (ok, took, lat, None, cpu(true) - cpu0)
                    }
                };
                let per_commit = commits.map(|c| ok as f64 / (c as f64).max(1.0));
                eprintln!(
                    "  store {} {k} in flight: {:.0} writes/s, p99 {:.2} ms, {:.0} CPU-µs/write, {:?} per commit",
                    under.name(),
                    ok as f64 / took.max(1e-9),
                    latency.p99 / 1000.0,
                    cpu_used * 1e6 / (ok as f64).max(1.0),
                    per_commit
                );
                table.raw(json!({"store": under.name(), "inflight": k, "secs": secs, "writes": ok, "write_secs": took, "latency": latency, "cpu_seconds": cpu_used, "commits": commits, "load": load_average()}));
                runs[i].push((
                    ok as f64 / took.max(1e-9),
                    latency,
                    cpu_used * 1e6 / (ok as f64).max(1.0),
                    per_commit,
                ));
            }
        }
        for (i, under) in stores.iter().enumerate() {
            let r = &runs[i];
            table.row(vec![
                k.to_string(),
                under.name(),
                f(median(&r.iter().map(|r| r.0).collect::<Vec<_>>()), 0),
                f(
                    median(&r.iter().map(|r| r.1.p50).collect::<Vec<_>>()) / 1000.0,
                    2,
                ),
                f(
                    median(&r.iter().map(|r| r.1.p99).collect::<Vec<_>>()) / 1000.0,
                    2,
                ),
                f(median(&r.iter().map(|r| r.2).collect::<Vec<_>>()), 0),
                if r.iter().all(|r| r.3.is_some()) {
                    f(median(&r.iter().filter_map(|r| r.3).collect::<Vec<_>>()), 1)
                } else {
                    String::new()
                },
            ]);
        }
    }
    table.note(format!("Tasks on a 2-worker runtime in this process, each putting {VALUE_BYTES} B values to its own keys as soon as the previous put answered; rounds interleave the stores in the order of the rows. CPU per write: this process's utime+stime (plus the etcd process's for the etcd store) over the run, divided by the writes. Transactions per commit: puts / redb commits (each commit one fsync). `commit_batch_max 1` is one commit per transaction, the embedded store's design before group commit."));
    Ok(table)
}

/// Suite `writes`.
///
/// # Errors
/// etcd could not start or a run failed.
pub fn writes(options: &Options) -> Result<Vec<Table>, String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let etcd = Etcd::start_on(options.port_base.map(|p| (p, p + 1)))?;
    runtime.block_on(connect(&etcd.endpoint))?;
    let stores = store_table(options, &runtime, &etcd)?;
    let rates = rates_table(options, &runtime, &etcd)?;
    drop(etcd);
    runtime.shutdown_timeout(Duration::from_secs(5));
    Ok(vec![rates, stores])
}

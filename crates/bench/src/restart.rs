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

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;
use watchkeeper::Server;
use watchkeeper::config::{ServeArgs, ServeConfig};
use watchkeeper_testkit::RawWatch;

use crate::e2e::{CONFIGMAPS, client_runtime, seed};
use crate::http::Conn;
use crate::report::Table;
use crate::{Latency, Options};

/// Configmaps the writer updates round-robin (each watcher watches one).
const OBJECTS: usize = 100;

/// How long the run waits, after the writer stops, for every watcher to see its object's last
/// acknowledged write.
const CATCH_UP_MAX: Duration = Duration::from_secs(30);

/// Sizes of one run.
#[derive(Clone, Copy, Debug)]
struct Sizes {
    watchers: usize,
    rate: f64,
    warm_up: Duration,
    after: Duration,
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
async fn writer(addr: SocketAddr, rate: f64, stop: Arc<AtomicBool>) -> Vec<(usize, u64)> {
    let mut acked = Vec::new();
    let mut conn: Option<Conn> = None;
    let started = Instant::now();
    let mut i = 0usize;
    while !stop.load(Ordering::Acquire) {
        let due = started + Duration::from_secs_f64(i as f64 / rate);
        tokio::time::sleep_until(due.into()).await;
        let object = i % OBJECTS;
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

/// One watcher: watches its object, reconnects with the last resource version it saw, relists
/// on a 410, until `stop`.
async fn watcher(
    addr: SocketAddr,
    mut seen: Seen,
    shutdown_began: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    progress: Arc<AtomicU64>,
) -> Seen {
    let mut last = seen.start;
    let selector = format!("fieldSelector=metadata.name%3Dcm-{}", seen.object);
    while !stop.load(Ordering::Acquire) {
        let path = format!(
            "{CONFIGMAPS}?watch=true&resourceVersion={last}&allowWatchBookmarks={}&{selector}&timeoutSeconds=3600",
            seen.bookmarks
        );
        let after_shutdown = shutdown_began.load(Ordering::Acquire);
        let mut watch = match RawWatch::open(addr, &path, None, &[]).await {
            Ok(watch) => watch,
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

/// One restart run.
fn run_once(sizes: Sizes, rebuild: bool, dir: &Path) -> Result<(Figures, Figures, Value), String> {
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
    let shutdown_began = Arc::new(AtomicBool::new(false));
    let stop_watchers = Arc::new(AtomicBool::new(false));
    let stop_writer = Arc::new(AtomicBool::new(false));
    let opened = Instant::now();
    let progress: Vec<Arc<AtomicU64>> = (0..sizes.watchers)
        .map(|_| Arc::new(AtomicU64::new(start_rv)))
        .collect();
    let tasks: Vec<_> = (0..sizes.watchers)
        .map(|i| {
            let seen = Seen {
                object: i % OBJECTS,
                start: start_rv,
                bookmarks: i % 2 == 0,
                ..Seen::default()
            };
            clients.spawn(watcher(
                addr,
                seen,
                shutdown_began.clone(),
                stop_watchers.clone(),
                progress[i].clone(),
            ))
        })
        .collect();
    // Every watcher has opened its stream once the server counts them.
    let watches = || {
        server
            .app
            .resource("", "v1", "configmaps")
            .map_or(0, |r| r.cache().metrics().watchers.get())
    };
    while watches() < i64::try_from(sizes.watchers).unwrap_or(i64::MAX) {
        if opened.elapsed() > Duration::from_secs(120) {
            return Err(format!(
                "only {} of {} watches opened in 120 s",
                watches(),
                sizes.watchers
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let open_secs = opened.elapsed().as_secs_f64();
    let writes = clients.spawn(writer(addr, sizes.rate, stop_writer.clone()));
    std::thread::sleep(sizes.warm_up);

    shutdown_began.store(true, Ordering::Release);
    let began = Instant::now();
    server_rt.block_on(server.shutdown());
    let stopped = began.elapsed();
    let server = server_rt.block_on(start(args(dir, addr, rebuild)))?;
    let downtime = began.elapsed();
    std::thread::sleep(sizes.after);
    stop_writer.store(true, Ordering::Release);
    let acked = clients
        .block_on(writes)
        .map_err(|e| format!("writer: {e}"))?;
    // Stop the watchers once each has seen its object's last acknowledged write (an event,
    // a bookmark or a relist at or past it), or after `CATCH_UP_MAX`: a watcher still behind
    // then counts its missing events as lost and, if it had no event since the shutdown, as
    // not resumed.
    let mut last_acked = [0u64; OBJECTS];
    for (object, rv) in &acked {
        last_acked[*object] = last_acked[*object].max(*rv);
    }
    let caught_up = Instant::now();
    while caught_up.elapsed() < CATCH_UP_MAX
        && progress
            .iter()
            .enumerate()
            .any(|(i, seen)| seen.load(Ordering::Acquire) < last_acked[i % OBJECTS])
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    let catch_up_secs = caught_up.elapsed().as_secs_f64();
    stop_watchers.store(true, Ordering::Release);
    let mut seen = Vec::new();
    for task in tasks {
        seen.push(
            clients
                .block_on(task)
                .map_err(|e| format!("watcher: {e}"))?,
        );
    }
    server_rt.block_on(server.shutdown());
    server_rt.shutdown_timeout(Duration::from_secs(5));
    clients.shutdown_timeout(Duration::from_secs(5));

    let mut by_object: HashMap<usize, Vec<u64>> = HashMap::new();
    for (object, rv) in &acked {
        by_object.entry(*object).or_default().push(*rv);
    }
    let mut halves = [Figures::default(), Figures::default()];
    let mut delays: [Vec<u64>; 2] = [Vec::new(), Vec::new()];
    for watcher in &seen {
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
    let with = Figures {
        resumed: Latency::from_nanos(delays_with),
        ..with
    };
    let without = Figures {
        resumed: Latency::from_nanos(delays_without),
        ..without
    };
    let raw = serde_json::json!({
        "rebuild_history": rebuild,
        "watchers": sizes.watchers,
        "rate": sizes.rate,
        "writes_acked": acked.len(),
        "open_secs": open_secs,
        "shutdown_secs": stopped.as_secs_f64(),
        "downtime_secs": downtime.as_secs_f64(),
        "catch_up_after_writes_secs": catch_up_secs,
        "with_bookmarks": with,
        "without_bookmarks": without,
    });
    Ok((with, without, raw))
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

/// The `restart` suite: one table, a row per configuration and half.
///
/// # Errors
/// A server or client failed.
pub fn restart(options: &Options) -> Result<Vec<Table>, String> {
    // Each watcher costs two descriptors here (client and server ends); keep a margin.
    let fd_room = usize::try_from(crate::sys::fd_limit().saturating_sub(2_000) / 2).unwrap_or(0);
    let sizes = if options.smoke {
        Sizes {
            watchers: 20,
            rate: 50.0,
            warm_up: Duration::from_millis(500),
            after: Duration::from_secs(1),
        }
    } else {
        Sizes {
            watchers: 10_000.min(fd_room),
            rate: 100.0,
            warm_up: Duration::from_secs(5),
            after: Duration::from_secs(8),
        }
    };
    let mut table = Table::new(
        "restart",
        &format!(
            "Restart: {} watchers, {} writes/s, embedded store, graceful shutdown and restart on the same data",
            sizes.watchers, sizes.rate
        ),
        &[
            "history rebuilt on start",
            "watchers allow bookmarks",
            "watchers",
            "410s",
            "relists",
            "events lost",
            "duplicates",
            "not resumed",
            "first event after shutdown began p50 / p99 / max (s)",
        ],
    );
    for run in 0..options.runs {
        for rebuild in [true, false] {
            let dir = temp_dir(if rebuild { "on" } else { "off" });
            let result = run_once(sizes, rebuild, &dir);
            let _ = std::fs::remove_dir_all(&dir);
            let (with, without, raw) = result?;
            eprintln!("restart run {run} rebuild={rebuild}: {raw}");
            for (bookmarks, figures) in [("yes", &with), ("no", &without)] {
                table.row(vec![
                    if rebuild { "yes" } else { "no" }.to_owned(),
                    bookmarks.to_owned(),
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
                ]);
            }
            table.raw(raw);
        }
    }
    table.note(
        "Each watcher watches one of 100 configmaps written round-robin, so it gets an event every 100 / rate seconds: the time to its first event after the shutdown began includes waiting for the next write of its object.",
    );
    table.note(
        "Without bookmarks a watcher resumes from its last event, older than the restarted server's list revision: without history rebuilding that is a 410 and a relist (the events written in between are replaced by the list's state: counted as lost events).",
    );
    table.note(format!(
        "Watchers limited by the descriptor limit ({}): each costs two descriptors in this one process.",
        crate::sys::fd_limit()
    ));
    Ok(vec![table])
}

//! End to end: the server over HTTP with concurrent watchers, writers and readers, checked
//! against the store's committed history. Short runs sized for CI.

use watchkeeper_harness::e2e::{self, E2eConfig, StoreChoice};

fn assert_clean(name: &str, outcome: &e2e::E2eOutcome) {
    eprintln!(
        "{name}: {} sessions, {} events, {} reads checked; {} acked writes, {} rejected, {} 410s, {} client disconnects, last revision {}",
        outcome.report.sessions,
        outcome.report.events,
        outcome.report.reads,
        outcome.acked,
        outcome.rejected,
        outcome.gone,
        outcome.disconnects,
        outcome.revision
    );
    let shown: Vec<String> = outcome
        .report
        .violations
        .iter()
        .take(20)
        .map(ToString::to_string)
        .collect();
    assert!(
        outcome.report.violations.is_empty(),
        "{name}: {} violation(s):\n{}",
        outcome.report.violations.len(),
        shown.join("\n")
    );
    assert!(outcome.report.sessions > 0 && outcome.report.events > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_store_many_watchers_and_writers() {
    let config = E2eConfig {
        seed: 1,
        store: StoreChoice::Memory,
        watchers: 24,
        writers: 4,
        writes_per_writer: 150,
        reads: 60,
        compact_every: None,
    };
    let outcome = e2e::run(&config).await.expect("run");
    assert_clean("memory", &outcome);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_store_many_watchers_and_writers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = E2eConfig {
        seed: 2,
        store: StoreChoice::Embedded(dir.path().join("data")),
        watchers: 16,
        writers: 3,
        writes_per_writer: 100,
        reads: 40,
        compact_every: None,
    };
    let outcome = e2e::run(&config).await.expect("run");
    assert_clean("embedded", &outcome);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_store_compactions_relist_and_every_watcher_gets_an_honest_410() {
    let config = E2eConfig {
        seed: 3,
        store: StoreChoice::Memory,
        watchers: 16,
        writers: 3,
        writes_per_writer: 120,
        reads: 30,
        compact_every: Some(90),
    };
    let outcome = e2e::run(&config).await.expect("run");
    assert_clean("memory+compaction", &outcome);
}

/// The etcd endpoint of the shared test etcd (scripts/test starts it).
fn etcd_endpoint() -> String {
    std::env::var("WATCHKEEPER_TEST_ETCD").unwrap_or_else(|_| {
        panic!(
            "WATCHKEEPER_TEST_ETCD is not set: run the suite with scripts/test, which starts etcd"
        )
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_etcd_store() {
    let endpoint = etcd_endpoint();
    let prefix = format!(
        "/harness-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    );
    let config = E2eConfig {
        seed: 4,
        store: StoreChoice::Etcd { endpoint, prefix },
        watchers: 12,
        writers: 3,
        writes_per_writer: 80,
        reads: 30,
        // Never compact the shared etcd: other suites watch it. Compactions run on the
        // harness's own etcd below.
        compact_every: None,
    };
    let outcome = e2e::run(&config).await.expect("run");
    assert_clean("shared etcd", &outcome);
}

/// SIGKILL the server (a child process on the embedded store) while writes are in flight,
/// restart it on the same data: every write that got a 2xx is in the store, and the restarted
/// server passes a full checked workload.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_store_kill_and_restart_loses_no_acknowledged_write() {
    use std::sync::atomic::AtomicBool;
    use std::sync::{Arc, Mutex};
    use tokio::io::AsyncBufReadExt;

    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let mut acked_all = Vec::new();
    for round in 0..2u64 {
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_watchkeeper-harness"))
            .args(["serve", "--store", "embedded", "--data-dir"])
            .arg(&data)
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn the server");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        let line = tokio::time::timeout(e2e::HANG_GUARD, lines.next_line())
            .await
            .expect("server start hang")
            .expect("read")
            .expect("a listening line");
        let addr: std::net::SocketAddr = line
            .strip_prefix("listening ")
            .expect("listening ADDR")
            .parse()
            .expect("address");
        let acked = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let writers: Vec<_> = (0..3)
            .map(|w| {
                tokio::spawn(e2e::write_until(
                    addr,
                    round * 10 + w,
                    100_000,
                    acked.clone(),
                    stop.clone(),
                ))
            })
            .collect();
        // Kill once enough writes were acknowledged, with writes still in flight.
        let enough = async {
            while acked.lock().unwrap().len() < 150 {
                tokio::task::yield_now().await;
            }
        };
        tokio::time::timeout(e2e::HANG_GUARD, enough)
            .await
            .expect("150 writes acknowledged");
        child.start_kill().expect("SIGKILL");
        child.wait().await.expect("reaped");
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for w in writers {
            w.await.expect("writer");
        }
        acked_all.extend(acked.lock().unwrap().drain(..));
    }
    // The store after two kills holds every acknowledged write.
    let store = watchkeeper_store::AnyStore::open(watchkeeper_store::StoreConfig::Embedded(
        watchkeeper_store::EmbeddedConfig::new(data.clone()),
    ))
    .await
    .expect("open the embedded store");
    let up_to = acked_all.iter().map(|a| a.rv).max().expect("writes");
    let history = e2e::read_history(&store, "/registry", up_to)
        .await
        .expect("history");
    let recording = watchkeeper_harness::checker::Recording {
        acked: acked_all.clone(),
        ..Default::default()
    };
    let report = watchkeeper_harness::checker::check(&history, &recording);
    eprintln!(
        "{} acknowledged writes checked after two SIGKILLs",
        acked_all.len()
    );
    assert!(
        report.violations.is_empty(),
        "{}",
        report
            .violations
            .iter()
            .take(10)
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    );
    drop(store);
    // The history watch's background task lets go of redb's file lock when it notices the drop;
    // wait for that (by trying to open the store) before the restarted server opens it. Bounded
    // by the hang guard, not a number of tries: on a busy machine the task may run late.
    let give_up = std::time::Instant::now() + e2e::HANG_GUARD;
    loop {
        match watchkeeper_store::AnyStore::open(watchkeeper_store::StoreConfig::Embedded(
            watchkeeper_store::EmbeddedConfig::new(data.clone()),
        ))
        .await
        {
            Ok(store) => {
                drop(store);
                break;
            }
            Err(error) => {
                assert!(
                    std::time::Instant::now() < give_up,
                    "the store stayed locked: {error}"
                );
                tokio::task::yield_now().await;
            }
        }
    }
    // The restarted server serves correctly.
    let config = E2eConfig {
        seed: 5,
        store: StoreChoice::Embedded(data),
        watchers: 8,
        writers: 2,
        writes_per_writer: 60,
        reads: 20,
        compact_every: None,
    };
    let outcome = e2e::run(&config).await.expect("run after restart");
    assert_clean("embedded after kill", &outcome);
}

/// The harness's own etcd (ETCD_BINARY, never the shared one): compacted every 40 writes,
/// paused with SIGSTOP for a
/// bounded 300 ms (the one documented wall-clock pause: a stopped process can only be observed
/// over time), killed with SIGKILL and restarted on the same data, while watchers, writers and
/// readers run. Writes during the outage fail (fine); nothing acknowledged may be lost and
/// every watcher gets exactly its events or an honest 410.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn own_etcd_paused_killed_and_restarted() {
    let etcd = watchkeeper_harness::etcd::OwnEtcd::start().expect("own etcd");
    let store = StoreChoice::Etcd {
        endpoint: etcd.endpoint(),
        prefix: "/registry".to_owned(),
    };
    let server = e2e::start_server(e2e::serve_args(&store))
        .await
        .expect("server");
    let etcd = std::sync::Arc::new(std::sync::Mutex::new(etcd));
    let faulty = etcd.clone();
    let fault: e2e::FaultHook = Box::new(move |n| {
        let mut etcd = faulty.lock().unwrap();
        if n % 2 == 1 {
            etcd.pause();
            std::thread::sleep(std::time::Duration::from_millis(300));
            etcd.resume();
        } else {
            etcd.kill_and_restart().expect("restart etcd");
        }
    });
    let config = E2eConfig {
        seed: 6,
        store,
        watchers: 10,
        writers: 2,
        writes_per_writer: 80,
        reads: 20,
        compact_every: Some(40),
    };
    let outcome = e2e::run_with_faults(&server, &config, Some((50, fault)))
        .await
        .expect("run");
    server.shutdown().await;
    assert_clean("own etcd with faults", &outcome);
    drop(etcd);
}

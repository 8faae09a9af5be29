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
    };
    let outcome = e2e::run(&config).await.expect("run");
    assert_clean("embedded", &outcome);
}

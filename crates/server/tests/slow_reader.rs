//! A slow reader end to end: a watch client stops reading while more data is written than the
//! socket buffers and the watcher queue can hold. In stall-resume mode, when it resumes it
//! receives every event in order and the stream stayed open; in legacy mode the same run shows
//! the server terminating it.

use crate::common;

use common::*;
use watchkeeper::config::ServeArgs;

async fn run(mode: &str) -> (Vec<u64>, Vec<u64>, bool, watchkeeper::Server) {
    let server = server_with(ServeArgs {
        watch_mode: Some(mode.to_owned()),
        // The client reads nothing while the 1,500 creates run: on a loaded machine they took
        // more than the default 60 s, and the write timeout, not the cache, closed the
        // stream. Only the cache's handling of the stall is under test here.
        write_timeout_ms: Some(3_600_000),
        ..ServeArgs::default()
    })
    .await;
    let addr = server.addr;
    let (status, list) = get_json(addr, "/api/v1/namespaces/default/configmaps").await;
    assert_eq!(status, 200);
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut watch = WatchReader::open(
        addr,
        &format!("/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={rv}"),
        Some(4096),
    )
    .await;
    // 1,500 objects of 8 KiB: about 12 MiB, far more than the socket buffers, the queue
    // (10..1000 events) and any HTTP window.
    let mut written = Vec::new();
    for i in 0..1500 {
        let (status, created) = send_json(
            addr,
            "POST",
            "/api/v1/namespaces/default/configmaps",
            &configmap(&format!("cm-{i}"), 8 * 1024),
        )
        .await;
        assert_eq!(status, 201, "{created}");
        written.push(
            created["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .parse::<u64>()
                .unwrap(),
        );
    }
    let mut received = Vec::new();
    while let Some(event) = watch.next().await {
        if event["type"] == "ERROR" {
            break;
        }
        let rv: u64 = event["object"]["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        received.push(rv);
        if received.len() == written.len() {
            break;
        }
    }
    let ended = watch.ended;
    (written, received, ended, server)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stall_resume_delivers_everything_on_the_same_stream() {
    let (written, received, ended, server) = run("stall-resume").await;
    assert_eq!(received, written, "every event, in order, exactly once");
    assert!(!ended, "the stream stayed open");
    let configmaps = server.app.resource("", "v1", "configmaps").unwrap();
    let metrics = configmaps.cache().metrics();
    assert!(
        metrics.watcher_stalls.get() >= 1,
        "the reader really fell behind"
    );
    assert_eq!(metrics.watcher_skipped_events.get(), 0);
    assert_eq!(
        metrics.terminations(watchkeeper_core::TerminationReason::Unresponsive),
        0
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_mode_terminates_the_slow_reader() {
    let (written, received, ended, server) = run("legacy").await;
    assert!(ended, "the server closed the stream");
    assert!(received.len() < written.len(), "it never got everything");
    let configmaps = server.app.resource("", "v1", "configmaps").unwrap();
    let metrics = configmaps.cache().metrics();
    assert_eq!(
        metrics.terminations(watchkeeper_core::TerminationReason::Unresponsive),
        1
    );
    server.shutdown().await;
}

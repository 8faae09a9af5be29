//! Watches over HTTP/2 without TLS (h2c, prior knowledge), with curl as the client.

use crate::common;

use std::process::Stdio;

use common::*;
use tokio::io::{AsyncBufReadExt, BufReader};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_streams_over_h2c() {
    let server = server().await;
    let base = format!(
        "http://{}/api/v1/namespaces/default/configmaps",
        server.addr
    );
    let version = tokio::process::Command::new("curl")
        .args([
            "-sS",
            "--http2-prior-knowledge",
            "-o",
            "/dev/null",
            "-w",
            "%{http_version}",
            &base,
        ])
        .kill_on_drop(true)
        .output();
    let version = tokio::time::timeout(HANG_GUARD, version)
        .await
        .expect("curl's LIST hang")
        .expect("curl runs (scripts/test installs it)");
    assert_eq!(
        String::from_utf8_lossy(&version.stdout),
        "2",
        "served over HTTP/2"
    );
    let mut curl = tokio::process::Command::new("curl")
        .args(["-sS", "-N", "--http2-prior-knowledge", &format!("{base}?watch=true&resourceVersion=0&sendInitialEvents=false&resourceVersionMatch=NotOlderThan")])
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(curl.stdout.take().unwrap()).lines();
    // The watch is registered once the server lists it in /debug/watchers.
    let registered = async {
        loop {
            let (_, debug) = get_json(server.addr, "/debug/watchers").await;
            let open = debug["resources"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| !r["watchers"].as_array().unwrap().is_empty());
            if open {
                break;
            }
            tokio::task::yield_now().await;
        }
    };
    tokio::time::timeout(HANG_GUARD, registered)
        .await
        .expect("the watch is listed in /debug/watchers");
    for i in 0..3 {
        let (status, _) = send_json(
            server.addr,
            "POST",
            "/api/v1/namespaces/default/configmaps",
            &configmap(&format!("h{i}"), 1),
        )
        .await;
        assert_eq!(status, 201);
    }
    for i in 0..3 {
        let line = tokio::time::timeout(HANG_GUARD, lines.next_line())
            .await
            .unwrap()
            .unwrap()
            .expect("an event line");
        let event: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(event["type"], "ADDED");
        assert_eq!(event["object"]["metadata"]["name"], format!("h{i}"));
    }
    curl.kill().await.ok();
    server.shutdown().await;
}

//! The operator page end to end: a server in-process with healthy and stalled watch streams
//! (raw TCP clients that stop reading), the JSON behind the page (`/debug/watchers`,
//! `/debug/timeline`), and headless Chromium (Debian's `chromium` package; scripts/test
//! installs it) loading `/ui/`: no console errors, the stalled watchers shown unsynced, then,
//! after they read everything, synced again; legacy mode's force-closes on the same page; and
//! the page and the JSON behind authentication and authorization like every other path.
//!
//! Screenshots are kept as artifacts in `<target>/ui-artifacts/` (the paths are printed).
//! Every wait is on a condition (the JSON endpoint, a watch event), never on wall time.

use crate::common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use common::*;
use serde_json::Value;
use watchkeeper::config::ServeArgs;

const CM: &str = "/api/v1/namespaces/default/configmaps";
const HEALTHY: usize = 3;
const STALLED: usize = 3;
/// Bound on writes while waiting for the stalled readers' queues and sockets to fill (each
/// write is 64 KiB; a few hundred fill any loopback socket buffer many times over).
const MAX_WRITES: usize = 3000;

/// The Chromium binary: `$CHROMIUM`, or `chromium` / `chromium-browser` on the PATH. A missing
/// browser fails the test with a message; it never skips.
fn chromium_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("CHROMIUM") {
        return PathBuf::from(path);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        for name in ["chromium", "chromium-browser"] {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return candidate;
            }
        }
    }
    panic!(
        "headless Chromium is required by this test and was not found on the PATH \
         (install Debian's `chromium` package: `apt-get install -y chromium`, as scripts/test \
         does, or set CHROMIUM to the browser's path)"
    );
}

fn artifact_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .map_or_else(|| PathBuf::from("target"), Path::to_path_buf)
        .join("ui-artifacts");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// What one headless Chromium run produced.
struct Browser {
    /// The DOM after the page ran (`--dump-dom`), or empty for a screenshot run.
    dom: String,
    /// Console messages Chromium logged (`INFO:CONSOLE` lines).
    console: Vec<String>,
}

/// Loads `url` in headless Chromium for five seconds of virtual time (the page polls once a
/// second, so it renders several times) and returns the DOM, or writes a screenshot.
async fn chromium(url: &str, screenshot: Option<&Path>) -> Browser {
    let profile = tempfile::tempdir().unwrap();
    let mut command = tokio::process::Command::new(chromium_binary());
    command
        .arg("--headless")
        .arg("--no-sandbox")
        .arg("--disable-gpu")
        .arg("--disable-dev-shm-usage")
        .arg("--hide-scrollbars")
        .arg("--no-first-run")
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("--enable-logging=stderr")
        .arg("--v=0")
        .arg("--virtual-time-budget=5000")
        .arg("--window-size=1400,1000");
    match screenshot {
        Some(path) => command.arg(format!("--screenshot={}", path.display())),
        None => command.arg("--dump-dom"),
    };
    command
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let output = tokio::time::timeout(HANG_GUARD, command.output())
        .await
        .expect("chromium hung")
        .expect("chromium could not be started");
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    assert!(
        output.status.success(),
        "chromium failed ({}):\n{stderr}",
        output.status
    );
    Browser {
        dom: String::from_utf8_lossy(&output.stdout).to_string(),
        console: stderr
            .lines()
            .filter(|line| line.contains(":CONSOLE"))
            .map(str::to_owned)
            .collect(),
    }
}

/// The page's own console line must be there (so console capture works and this check can
/// fail), and nothing else: no error, no uncaught exception, no CSP violation.
fn assert_clean_console(browser: &Browser) {
    assert!(
        browser
            .console
            .iter()
            .any(|line| line.contains("watchkeeper-ui: loaded")),
        "the page's console line is missing, so console errors would go unseen: {:?}",
        browser.console
    );
    let others: Vec<&String> = browser
        .console
        .iter()
        .filter(|line| !line.contains("watchkeeper-ui:"))
        .collect();
    assert!(others.is_empty(), "console messages: {others:#?}");
    // A screenshot run has no DOM to look at; a DOM run must show no recorded error.
    assert!(
        browser.dom.is_empty() || browser.dom.contains("<pre id=\"errors\"></pre>"),
        "the page recorded errors"
    );
}

/// How many times the page polled successfully (the body's `data-polls`).
fn polls(dom: &str) -> u64 {
    attribute_after(dom, "<body", "data-polls")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// The value of `name` in the first tag that contains `marker`.
fn attribute_after(dom: &str, marker: &str, name: &str) -> Option<String> {
    let start = dom.find(marker)?;
    let tag_start = dom[..=start].rfind('<')?;
    let tag_end = start + dom[start..].find('>')?;
    let tag = &dom[tag_start..tag_end];
    let key = format!("{name}=\"");
    let from = tag.find(&key)? + key.len();
    let len = tag[from..].find('"')?;
    Some(tag[from..from + len].to_owned())
}

/// The state the page shows for watch stream `id` in the furthest-behind table.
fn row_state(dom: &str, id: u64) -> Option<String> {
    attribute_after(dom, &format!("data-watch-id=\"{id}\""), "data-state")
}

/// The furthest-behind entries of `/debug/watchers` (every stream listed, none elided).
async fn watchers(addr: SocketAddr) -> Value {
    let (status, body) = get_json(addr, "/debug/watchers?furthestBehind=100").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["apiVersion"], "watchkeeper.debug/v1");
    body
}

fn entry_for(body: &Value, client: SocketAddr) -> Option<Value> {
    body["furthestBehind"]
        .as_array()?
        .iter()
        .find(|w| w["client"] == client.to_string())
        .cloned()
}

fn resource<'a>(body: &'a Value, name: &str) -> &'a Value {
    body["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["resource"] == name)
        .unwrap()
}

async fn write(addr: SocketAddr, i: usize) -> u64 {
    let (status, created) =
        send_json(addr, "POST", CM, &configmap(&format!("cm-{i}"), 64 * 1024)).await;
    assert_eq!(status, 201, "{created}");
    created["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}

/// Reads a watch until it has seen `count` events; returns their resource versions.
async fn read_events(watch: &mut WatchReader, count: usize) -> Vec<u64> {
    let mut seen = Vec::new();
    while seen.len() < count {
        let event = watch.next().await.expect("the watch stream ended");
        assert_ne!(event["type"], "ERROR", "{event}");
        seen.push(
            event["object"]["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .parse()
                .unwrap(),
        );
    }
    seen
}

/// Polls `/debug/timeline` until one of its samples satisfies `check`.
async fn wait_for_sample(addr: SocketAddr, check: impl Fn(&Value) -> bool) {
    let give_up = std::time::Instant::now() + HANG_GUARD;
    loop {
        let (status, timeline) = get_json(addr, "/debug/timeline").await;
        assert_eq!(status, 200, "{timeline}");
        let samples = timeline["samples"].as_array().unwrap();
        assert!(samples.len() <= 600, "the ring is bounded");
        if samples.iter().any(&check) {
            return;
        }
        assert!(
            std::time::Instant::now() < give_up,
            "no such sample: {timeline}"
        );
        tokio::task::yield_now().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_shows_stalled_watchers_unsynced_then_synced_after_they_read() {
    let browser = chromium_binary();
    eprintln!("using {}", browser.display());
    let server = server().await;
    let addr = server.addr;
    let watch_path = format!("{CM}?watch=true&resourceVersion=0&labelSelector=app%3Dtest");
    // Healthy readers: read everything as it comes, on their own tasks, reporting each
    // event's resource version.
    let mut healthy_clients = Vec::new();
    let mut healthy_seen = Vec::new();
    for i in 0..HEALTHY {
        let agent = format!("healthy-informer/{i}");
        let mut watch =
            WatchReader::open_with_headers(addr, &watch_path, None, &[("User-Agent", &agent)])
                .await;
        healthy_clients.push(watch.local_addr);
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<u64>();
        healthy_seen.push(rx);
        tokio::spawn(async move {
            while let Some(event) = watch.next().await {
                let rv = event["object"]["metadata"]["resourceVersion"]
                    .as_str()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
                if tx.send(rv).is_err() {
                    return;
                }
            }
        });
    }
    // Stalled readers: a tiny receive buffer, and nobody reads until later.
    let mut stalled = Vec::new();
    for i in 0..STALLED {
        let agent = format!("stalled-controller/{i}");
        stalled.push(
            WatchReader::open_with_headers(
                addr,
                &watch_path,
                Some(4096),
                &[("User-Agent", &agent)],
            )
            .await,
        );
    }
    let stalled_clients: Vec<SocketAddr> = stalled.iter().map(|w| w.local_addr).collect();
    // Write until every stalled reader shows as unsynced with a full queue.
    let mut written = Vec::new();
    let unsynced = loop {
        assert!(
            written.len() < MAX_WRITES,
            "the stalled readers never went unsynced"
        );
        written.push(write(addr, written.len()).await);
        if written.len() % 10 != 0 {
            continue;
        }
        let body = watchers(addr).await;
        let entries: Vec<Value> = stalled_clients
            .iter()
            .filter_map(|c| entry_for(&body, *c))
            .collect();
        if entries.len() == STALLED
            && entries
                .iter()
                .all(|w| w["state"] == "unsynced" && w["queueLength"] == w["queueCapacity"])
        {
            break (body, entries);
        }
    };
    let (body, entries) = unsynced;
    eprintln!("stalled after {} writes", written.len());
    for (i, entry) in entries.iter().enumerate() {
        assert_eq!(entry["userAgent"], format!("stalled-controller/{i}"));
        assert_eq!(entry["labelSelector"], "app=test");
        assert_eq!(entry["namespace"], "default");
        assert_eq!(entry["resource"], "configmaps");
        assert_eq!(entry["queueFill"], 1.0);
        assert!(entry["behindEvents"].as_u64().unwrap() > 0, "{entry}");
        assert!(entry["behindSeconds"].as_f64().is_some(), "{entry}");
        assert!(entry["unsyncedSeconds"].as_f64().is_some(), "{entry}");
        assert!(entry["passesWaited"].as_u64().is_some(), "{entry}");
        assert!(
            entry["position"].as_u64().unwrap() < *written.last().unwrap(),
            "{entry}"
        );
    }
    // The stalled readers are the furthest behind: they lead the list.
    let leaders: Vec<Value> = body["furthestBehind"].as_array().unwrap()[..STALLED].to_vec();
    for leader in &leaders {
        assert!(
            leader["userAgent"]
                .as_str()
                .unwrap()
                .starts_with("stalled-controller/"),
            "{leader}"
        );
    }
    let configmaps = resource(&body, "configmaps");
    assert!(
        configmaps["watchersByState"]["unsynced"].as_u64().unwrap() >= STALLED as u64,
        "{configmaps}"
    );
    assert!(configmaps["totals"]["stalls"].as_u64().unwrap() >= STALLED as u64);
    assert_eq!(configmaps["history"]["newest"], *written.last().unwrap());
    let ids: Vec<u64> = entries.iter().map(|e| e["id"].as_u64().unwrap()).collect();

    // The page: loads cleanly, shows the stalled watchers unsynced.
    let url = format!("http://{addr}/ui/");
    let page = chromium(&url, None).await;
    assert_clean_console(&page);
    assert!(polls(&page.dom) >= 1, "the page never rendered the JSON");
    for id in &ids {
        assert_eq!(
            row_state(&page.dom, *id).as_deref(),
            Some("unsynced"),
            "watch {id} on the page"
        );
    }
    // The charts drew lines (the watcher population at least).
    let population = page
        .dom
        .find("id=\"chart-population\"")
        .expect("the population chart");
    let chart_end = population + page.dom[population..].find("</svg>").unwrap();
    assert!(
        page.dom[population..chart_end].contains("<path"),
        "the population chart has no line"
    );
    for agent in ["stalled-controller/0", "healthy-informer/0"] {
        assert!(page.dom.contains(agent), "{agent} is not on the page");
    }
    let dir = artifact_dir();
    let shot = dir.join("ui-unsynced.png");
    let shot_run = chromium(&url, Some(&shot)).await;
    assert_clean_console(&shot_run);
    assert!(std::fs::metadata(&shot).unwrap().len() > 10_000);
    println!("screenshot: {}", shot.display());

    // The timeline records the stalled population (the sampler runs once a second).
    wait_for_sample(addr, |s| {
        s["watchers"]["unsynced"].as_u64().unwrap() >= STALLED as u64
    })
    .await;

    // The stalled readers read everything; they catch up on the same stream.
    let total = written.len();
    let mut readers = Vec::new();
    for mut watch in stalled {
        readers.push(tokio::spawn(async move {
            let seen = read_events(&mut watch, total).await;
            (seen, watch)
        }));
    }
    let mut streams = Vec::new();
    for reader in readers {
        let (seen, watch) = tokio::time::timeout(HANG_GUARD, reader)
            .await
            .expect("a stalled reader never caught up")
            .unwrap();
        assert_eq!(
            seen, written,
            "every event once, in order, on the same stream"
        );
        streams.push(watch);
    }
    for rx in &mut healthy_seen {
        let mut seen = Vec::new();
        while seen.len() < total {
            let rv = tokio::time::timeout(HANG_GUARD, rx.recv())
                .await
                .expect("a healthy reader never got everything")
                .expect("a healthy stream ended");
            seen.push(rv);
        }
        assert_eq!(seen, written, "a healthy reader got every event in order");
    }
    // Wait until the server shows all six synced (the hand-off follows the last pass).
    let give_up = std::time::Instant::now() + HANG_GUARD;
    loop {
        let body = watchers(addr).await;
        let all: Vec<Value> = stalled_clients
            .iter()
            .chain(&healthy_clients)
            .filter_map(|c| entry_for(&body, *c))
            .collect();
        if all.len() == STALLED + HEALTHY && all.iter().all(|w| w["state"] == "synced") {
            for w in &all {
                assert_eq!(w["behindEvents"], 0, "{w}");
                assert_eq!(w["unsyncedSeconds"], Value::Null, "{w}");
            }
            break;
        }
        assert!(
            std::time::Instant::now() < give_up,
            "the readers never resynced: {body}"
        );
        tokio::task::yield_now().await;
    }
    let page = chromium(&url, None).await;
    assert_clean_console(&page);
    for id in &ids {
        assert_eq!(
            row_state(&page.dom, *id).as_deref(),
            Some("synced"),
            "watch {id} on the page after it read"
        );
    }
    let shot = dir.join("ui-synced.png");
    chromium(&url, Some(&shot)).await;
    println!("screenshot: {}", shot.display());
    // The timeline recorded the resyncs and then a population with nobody unsynced.
    wait_for_sample(addr, |s| s["resyncs"].as_u64().unwrap() > 0).await;
    wait_for_sample(addr, |s| {
        s["watchers"]["unsynced"] == 0 && s["watchers"]["synced"].as_u64().unwrap() >= 6
    })
    .await;
    drop(streams);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_force_closes_show_on_the_same_page() {
    chromium_binary();
    let server = server_with(ServeArgs {
        watch_mode: Some("legacy".to_owned()),
        ..ServeArgs::default()
    })
    .await;
    let addr = server.addr;
    let watch_path = format!("{CM}?watch=true&resourceVersion=0");
    let stalled = WatchReader::open_with_headers(
        addr,
        &watch_path,
        Some(4096),
        &[("User-Agent", "stalled-controller/legacy")],
    )
    .await;
    let mut writes = 0;
    loop {
        assert!(
            writes < MAX_WRITES,
            "legacy mode never force-closed the reader"
        );
        write(addr, writes).await;
        writes += 1;
        if writes % 10 != 0 {
            continue;
        }
        let body = watchers(addr).await;
        if resource(&body, "configmaps")["forceCloses"] == 1 {
            assert_eq!(body["mode"], "legacy");
            assert_eq!(
                resource(&body, "configmaps")["totals"]["terminations"]["unresponsive"],
                1
            );
            break;
        }
    }
    // The timeline counts it too (in the sample after the close).
    let give_up = std::time::Instant::now() + HANG_GUARD;
    loop {
        let (_, timeline) = get_json(addr, "/debug/timeline").await;
        let closes: u64 = timeline["samples"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["forceCloses"].as_u64().unwrap())
            .sum();
        if closes == 1 {
            break;
        }
        assert_eq!(closes, 0);
        assert!(
            std::time::Instant::now() < give_up,
            "the timeline never counted the force-close"
        );
        tokio::task::yield_now().await;
    }
    let url = format!("http://{addr}/ui/");
    let page = chromium(&url, None).await;
    assert_clean_console(&page);
    assert_eq!(
        attribute_after(&page.dom, "id=\"force-closes\"", "data-value").as_deref(),
        Some("1"),
        "the page shows the force-close"
    );
    assert!(
        page.dom.contains("class=\"badge legacy\""),
        "legacy mode badge"
    );
    let shot = artifact_dir().join("ui-legacy.png");
    chromium(&url, Some(&shot)).await;
    println!("screenshot: {}", shot.display());
    // A client that never reads holds its connection open (the server cannot flush to it):
    // close it before the graceful shutdown waits for connections.
    drop(stalled);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_and_its_json_are_behind_authentication_and_authorization() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(
        &tokens,
        "admin-token,admin,1,\"system:masters\"\noperator-token,operator,2\nreader-token,reader,3\n",
    )
    .unwrap();
    let policy = dir.path().join("policy.jsonl");
    let line = |spec: &str| {
        format!(
            "{{\"apiVersion\":\"abac.authorization.kubernetes.io/v1beta1\",\"kind\":\"Policy\",\"spec\":{spec}}}\n"
        )
    };
    std::fs::write(
        &policy,
        line(r#"{"group":"system:masters","namespace":"*","resource":"*","apiGroup":"*","nonResourcePath":"*"}"#)
            + &line(r#"{"user":"operator","nonResourcePath":"/ui/*","readonly":true}"#)
            + &line(r#"{"user":"operator","nonResourcePath":"/debug/*","readonly":true}"#)
            + &line(r#"{"user":"reader","namespace":"*","resource":"*","apiGroup":"*","readonly":true}"#),
    )
    .unwrap();
    let server = server_with(ServeArgs {
        token_auth_file: Some(tokens),
        authorization_policy_file: Some(policy),
        ..ServeArgs::default()
    })
    .await;
    let addr = server.addr;
    let get = |path: &'static str, token: Option<&'static str>| async move {
        let bearer = token.map(|t| format!("Bearer {t}"));
        let headers: Vec<(&str, &str)> = bearer
            .as_deref()
            .map(|b| vec![("Authorization", b)])
            .unwrap_or_default();
        request_with_headers(addr, "GET", path, &headers, "").await
    };
    let (status, _) = get("/ui", None).await;
    assert_eq!(status, 401, "anonymous /ui");
    for path in ["/ui/", "/debug/watchers", "/debug/timeline"] {
        let (status, body) = get(path, None).await;
        assert_eq!(status, 401, "anonymous {path}: {body}");
        let status_json: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(status_json["kind"], "Status");
        assert_eq!(status_json["reason"], "Unauthorized");
        let (status, body) = get(path, Some("reader-token")).await;
        assert_eq!(status, 403, "reader {path}: {body}");
        let status_json: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(status_json["reason"], "Forbidden");
        for token in ["operator-token", "admin-token"] {
            let (status, body) = get(path, Some(token)).await;
            assert_eq!(status, 200, "{token} {path}: {body}");
        }
    }
    let (_, page) = get("/ui/", Some("operator-token")).await;
    assert!(page.starts_with("<!doctype html>"), "{page}");
    assert!(
        page.contains("watchkeeper-ui: loaded"),
        "the script is inlined"
    );
    assert!(!page.contains("/*SCRIPT*/") && !page.contains("/*STYLE*/"));
    for reference in ["src=\"http", "href=\"http", "url(", "@import", "//cdn"] {
        assert!(
            !page.contains(reference),
            "the page loads nothing from elsewhere ({reference})"
        );
    }
    // Malformed queries get a Status with a message.
    let (status, body) = get(
        "/debug/watchers?furthestBehind=lots",
        Some("operator-token"),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body.contains("furthestBehind must be a whole number"),
        "{body}"
    );
    let (status, body) = get("/debug/nothing", Some("operator-token")).await;
    assert_eq!(status, 404, "{body}");
    server.shutdown().await;
}

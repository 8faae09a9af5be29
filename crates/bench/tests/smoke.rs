//! Smoke test: runs every suite with tiny sizes through the real binary (so the counting
//! allocator and the client child process are exercised) and checks the results were written.
//! It asserts nothing about timings.

use std::process::Command;

#[test]
fn every_suite_runs_in_smoke_mode_and_writes_results() {
    let out = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_watchkeeper-bench"))
        .args(["--smoke", "--out"])
        .arg(out.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let markdown = std::fs::read_to_string(out.path().join("results.md")).unwrap();
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("results.json")).unwrap())
            .unwrap();
    let suites: Vec<&str> = json["tables"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["suite"].as_str().unwrap())
        .collect();
    for suite in watchkeeper_bench::SUITES {
        assert!(suites.contains(&suite), "{suite} missing from {suites:?}");
    }
    for table in json["tables"].as_array().unwrap() {
        assert!(!table["rows"].as_array().unwrap().is_empty(), "{table}");
    }
    for heading in [
        "Slow watcher tax",
        "The healthy watcher's own queue",
        "writer and healthy consumer as the server runs them",
        "Resync time",
        "Fairness",
        "Fan-out throughput",
        "Fan-out throughput side by side (watchkeeper, a bare hyper pipe, etcd 3.4)",
        "bare hyper pipe (HTTP/1.1)",
        "Scale",
        "concurrent HTTP/2 watch streams",
        "Live heap per idle HTTP/2 stream",
        "Allocations per PATCH",
        "Restart: ",
        "Restart in etcd mode",
        "Sustained writes/s per store next to etcd's put rate",
        "The stores alone",
        "watchkeeper, embedded store, durable, data on tmpfs",
        "commit_batch_max 1",
    ] {
        assert!(markdown.contains(heading), "{heading} missing:\n{markdown}");
    }
    // The restart suite's guarantee, in every mode (embedded store; etcd with the watchers
    // resuming on the restarted instance, on the sibling): with the history rebuilt on start,
    // no watcher gets a 410, relists, loses or repeats an event.
    let mut modes = Vec::new();
    for table in json["tables"].as_array().unwrap() {
        if table["suite"] != "restart" {
            continue;
        }
        for run in table["raw"].as_array().unwrap() {
            modes.push(run["mode"].as_str().unwrap().to_owned());
            if run["rebuild_history"] != true {
                continue;
            }
            for half in ["with_bookmarks", "without_bookmarks"] {
                for count in ["gone", "relists", "lost", "duplicates"] {
                    assert_eq!(run[half][count], 0, "{count} in {run}");
                }
            }
        }
    }
    // The scale suite holds every stream it asked for over both transports (HTTP/2: several
    // connections of many streams each), and every stream got every write.
    let mut protocols = Vec::new();
    for table in json["tables"].as_array().unwrap() {
        if table["suite"] != "scale" {
            continue;
        }
        for step in table["raw"].as_array().unwrap() {
            let Some(protocol) = step["protocol"].as_str() else {
                continue;
            };
            if step["asked"].is_null() {
                continue;
            }
            protocols.push(protocol.to_owned());
            assert_eq!(step["open"], step["asked"], "{step}");
            assert!(step["write_error"].is_null(), "{step}");
            if protocol == "h2" {
                assert!(step["connections"].as_u64().unwrap() > 1, "{step}");
            }
        }
    }
    for protocol in ["h1", "h2"] {
        assert!(
            protocols.iter().any(|p| p == protocol),
            "{protocol} missing from the scale suite: {protocols:?}"
        );
    }
    // Every run of the writes suite wrote something, and its watchers got every write.
    for table in json["tables"].as_array().unwrap() {
        if table["suite"] != "writes" {
            continue;
        }
        for run in table["raw"].as_array().unwrap() {
            let writes = run["writes"]
                .as_u64()
                .or_else(|| run["client"]["writes"].as_u64())
                .unwrap();
            assert!(writes > 0, "{run}");
            let delivered = run["delivered"]
                .as_u64()
                .or_else(|| run["client"]["delivered"].as_u64());
            let expected = run["expected"]
                .as_u64()
                .or_else(|| run["client"]["expected"].as_u64());
            assert_eq!(delivered, expected, "{run}");
        }
    }
    for mode in ["embedded", "etcd-restart", "etcd-sibling"] {
        assert!(modes.iter().any(|m| m == mode), "{mode} missing: {modes:?}");
    }
}

/// `alloc --alloc-sites` writes where the measured bytes went: a report per watcher count whose
/// recorded total is the window's count (the same allocations, give or take what other threads
/// allocate between the two readings), naming watchkeeper's own call sites.
#[test]
fn allocation_sites_account_for_the_measured_bytes() {
    let (out, json) = run_bench(&["alloc", "--smoke", "--alloc-sites"]);
    let measured = json["tables"][0]["raw"]
        .as_array()
        .unwrap()
        .iter()
        .find(|run| run["watchers"] == 1)
        .and_then(|run| run["bytes_per_patch"].as_f64())
        .unwrap();
    let report = std::fs::read_to_string(out.path().join("alloc-sites-1.md")).unwrap();
    let recorded: f64 = report
        .lines()
        .find_map(|line| line.strip_prefix("recorded: "))
        .and_then(|line| line.split(", ").nth(1))
        .and_then(|bytes| bytes.split(' ').next())
        .and_then(|bytes| bytes.parse().ok())
        .unwrap();
    assert!(
        (recorded - measured).abs() <= measured * 0.1,
        "recorded {recorded} vs measured {measured}"
    );
    for part in [
        "## By site",
        "## Inclusive by watchkeeper function",
        "## Heaviest stacks",
        "crates/core/src/object.rs",
        "crates/api/src/patch.rs",
    ] {
        assert!(report.contains(part), "{part} missing:\n{report}");
    }
}

#[test]
fn unknown_arguments_are_refused() {
    let options = watchkeeper_bench::Options::parse(&["nonsense".to_owned()], "x".into());
    assert!(options.is_err());
    let options =
        watchkeeper_bench::Options::parse(&["tax".to_owned(), "--smoke".to_owned()], "x".into())
            .unwrap();
    assert_eq!(options.suites, ["tax"]);
    assert_eq!(options.runs, 1);
    let parse = |args: &[&str]| {
        watchkeeper_bench::Options::parse(
            &args.iter().map(|a| (*a).to_owned()).collect::<Vec<_>>(),
            "x".into(),
        )
    };
    let options = parse(&["restart", "--restart-modes", "etcd-sibling,embedded"]).unwrap();
    assert_eq!(
        options.restart_modes,
        [
            watchkeeper_bench::restart::Mode::EtcdSibling,
            watchkeeper_bench::restart::Mode::Embedded
        ]
    );
    assert!(parse(&["restart", "--restart-modes", "etcd"]).is_err());
    let options = parse(&[
        "scale",
        "--scale-protocols",
        "h2",
        "--scale-steps",
        "1_000,100000",
    ])
    .unwrap();
    assert_eq!(
        options.scale_protocols,
        [watchkeeper_bench::scale::Protocol::H2]
    );
    assert_eq!(options.scale_steps, [1000, 100_000]);
    assert!(parse(&["scale", "--scale-protocols", "h3"]).is_err());
    assert!(parse(&["scale", "--scale-steps", "0"]).is_err());
    assert_eq!(
        parse(&["population", "--population-malloc", "no-trim,glibc"])
            .unwrap()
            .population_malloc,
        [
            watchkeeper_bench::inproc::MallocMode::NoTrim,
            watchkeeper_bench::inproc::MallocMode::Glibc
        ]
    );
    assert!(parse(&["population", "--population-malloc", "jemalloc"]).is_err());
    assert_eq!(
        parse(&["tax", "tax-http", "population", "--busy-nice", "19"])
            .unwrap()
            .busy_nice,
        Some(19)
    );
    // A suite that would run without the load refuses the flag instead of ignoring it.
    assert!(parse(&["tax", "resync", "--busy-nice", "19"]).is_err());
    assert!(parse(&["--busy-nice", "19"]).is_err());
    assert!(parse(&["tax", "--busy-nice", "20"]).is_err());
    let options = parse(&[
        "tax",
        "--tax-patterns",
        "reconnecting",
        "--tax-rates",
        "1000",
    ])
    .unwrap();
    assert_eq!(
        options.tax_patterns,
        [watchkeeper_bench::inproc::Pattern::Reconnecting]
    );
    assert_eq!(options.tax_rates, [1000.0]);
    assert!(parse(&["tax", "--tax-patterns", "never"]).is_err());
    assert!(parse(&["tax", "--tax-rates", "0"]).is_err());
    assert_eq!(
        parse(&["tax", "--tax-consumers", "tasks"])
            .unwrap()
            .tax_consumers,
        [watchkeeper_bench::inproc::Consumers::Tasks]
    );
    assert!(parse(&["tax", "--tax-consumers", "fibers"]).is_err());
    assert!(parse(&["restart", "--port-base", "80"]).is_err());
    assert!(parse(&["alloc", "--alloc-sites"]).unwrap().alloc_sites);
    assert!(!parse(&["alloc"]).unwrap().alloc_sites);
    assert_eq!(
        parse(&["restart", "--port-base", "24200"])
            .unwrap()
            .port_base,
        Some(24200)
    );
}

/// `--busy-nice` runs the tax suites under the benchmark's own load and says so in their
/// titles, which are made from the running load (invocation W's table had been run without
/// the load its command asked for).
#[test]
fn the_tax_suites_run_under_the_busy_load_they_name() {
    let (_out, json) = run_bench(&["tax", "tax-http", "--smoke", "--busy-nice", "19"]);
    let titles: Vec<&str> = json["tables"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["title"].as_str().unwrap())
        .collect();
    for prefix in [
        "1. Slow watcher tax",
        "1e. Slow watcher tax",
        "1b. Slow watcher tax",
    ] {
        let title = titles
            .iter()
            .find(|t| t.starts_with(prefix))
            .unwrap_or_else(|| panic!("{prefix} missing from {titles:?}"));
        assert!(
            title.ends_with("background load: one busy thread per core at nice 19"),
            "{title}"
        );
    }
    // Both consumer models (threads: table 1; tasks on a runtime: 1e) see every revision
    // once, with both companion patterns, and stall-resume terminates nobody.
    for prefix in ["1. Slow watcher tax", "1e. Slow watcher tax"] {
        let table = json["tables"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["title"].as_str().unwrap().starts_with(prefix))
            .unwrap();
        let raw = table["raw"].as_array().unwrap();
        assert_eq!(raw.len(), 4, "two patterns × two modes: {table}");
        for entry in raw {
            let run = &entry["run"];
            assert!(run["events"].as_u64().unwrap() > 0, "{entry}");
            if entry["mode"] == "stall-resume" {
                assert_eq!(run["latency"]["count"], run["events"], "{entry}");
                assert_eq!(run["terminations"], 0, "{entry}");
            }
        }
    }
}

/// Runs the benchmark with `args` and `--out` a new directory; asserts it succeeded and returns
/// the directory (kept while the caller reads it) and its results.json.
fn run_bench(args: &[&str]) -> (tempfile::TempDir, serde_json::Value) {
    let out = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_watchkeeper-bench"))
        .args(args)
        .arg("--out")
        .arg(out.path())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "stderr:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let json =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("results.json")).unwrap())
            .unwrap();
    (out, json)
}

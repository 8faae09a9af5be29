//! The simulator's own tests: determinism, every built-in scenario in short mode, the KEP
//! benchmark's headline, the permanently slow watcher, and the oracle's verdict. No test waits
//! on the wall clock or asserts a duration.

use std::path::PathBuf;

use watchkeeper_sim::{CostTable, RunOptions, Scenario, run_with};

fn scenarios_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios")
}

fn short(name: &str) -> Scenario {
    Scenario::load(&scenarios_dir().join(name))
        .unwrap()
        .shortened()
}

fn options(seed: u64) -> RunOptions {
    RunOptions {
        seed,
        short: true,
        costs: CostTable::shipped(),
    }
}

#[test]
fn same_seed_same_trace_different_seed_different_trace() {
    let scenario = short("01-kep-benchmark-100.toml");
    let names = vec!["legacy".to_owned(), "stall-resume".to_owned()];
    let a = run_with(&scenario, &options(7), None, &names).unwrap();
    let b = run_with(&scenario, &options(7), None, &names).unwrap();
    let c = run_with(&scenario, &options(8), None, &names).unwrap();
    for ((x, y), z) in a.variants.iter().zip(&b.variants).zip(&c.variants) {
        assert_eq!(x.trace_hash, y.trace_hash, "variant {}", x.name);
        assert_ne!(x.trace_hash, z.trace_hash, "variant {}", x.name);
    }
    // The whole report, not only the hash, is byte-identical.
    assert_eq!(
        serde_json::to_string(&a).unwrap(),
        serde_json::to_string(&b).unwrap()
    );
}

#[test]
fn every_built_in_scenario_runs_short_and_writes_its_report() {
    let out = std::env::temp_dir().join(format!("watchkeeper-sim-test-{}", std::process::id()));
    let mut names: Vec<String> = std::fs::read_dir(scenarios_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".toml"))
        .collect();
    names.sort();
    assert!(names.len() >= 7, "{names:?}");
    let mut table = String::from(
        "| scenario (`--short`, seed 1) | variant | healthy p99 (ms) | terminations | serializations/event | passes | trace |\n|---|---|---|---|---|---|---|\n",
    );
    for name in &names {
        let scenario = short(name);
        let dir = out.join(name.trim_end_matches(".toml"));
        let report = run_with(&scenario, &options(1), Some(&dir), &[]).unwrap();
        for v in &report.variants {
            table.push_str(&format!(
                "| {} | {} | {:.3} | {} | {:.3} | {} | `{}` |\n",
                name.trim_end_matches(".toml"),
                v.name,
                v.healthy_latency_ms.p99,
                v.terminations_total,
                v.serializations_per_event,
                v.passes.count,
                v.trace_hash
            ));
        }
        for file in [
            "report.md",
            "report.json",
            "latency_cdf.png",
            "latency_cdf.svg",
            "unsynced.png",
            "terminations.png",
            "resync.png",
        ] {
            let path = dir.join(file);
            assert!(
                std::fs::metadata(&path)
                    .map(|m| m.len() > 0)
                    .unwrap_or(false),
                "{name}: {file} missing"
            );
        }
        for v in &report.variants {
            assert_eq!(
                v.safety_violations, 0,
                "{name}/{}: {:?}",
                v.name, v.violations
            );
            assert_eq!(v.skipped_events, 0, "{name}/{}", v.name);
            assert!(v.events_dispatched > 0, "{name}/{}", v.name);
        }
    }
    let _ = std::fs::remove_dir_all(&out);
    readme_table_matches("short-runs", &table);
}

/// The README's table between `<!-- NAME:begin -->` and `<!-- NAME:end -->` must be what the
/// simulator prints now (it is deterministic, so any change to the core or the model that
/// changes a trace shows here). `WATCHKEEPER_SIM_BLESS=1` rewrites the README instead.
fn readme_table_matches(name: &str, table: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("README.md");
    let readme = std::fs::read_to_string(&path).unwrap();
    let begin = format!("<!-- {name}:begin -->\n");
    let end = format!("<!-- {name}:end -->");
    let start = readme.find(&begin).expect("README marker") + begin.len();
    let stop = start + readme[start..].find(&end).expect("README end marker");
    if readme[start..stop] == *table {
        return;
    }
    if std::env::var_os("WATCHKEEPER_SIM_BLESS").is_some() {
        let updated = format!("{}{table}{}", &readme[..start], &readme[stop..]);
        std::fs::write(&path, updated).unwrap();
        return;
    }
    panic!(
        "crates/sim/README.md ({name}) drifted from what the simulator prints; re-run with WATCHKEEPER_SIM_BLESS=1 to rewrite it. Now:\n{table}"
    );
}

#[test]
fn kep_benchmark_legacy_force_closes_and_stall_resume_does_not() {
    let scenario = short("01-kep-benchmark-100.toml");
    let names = vec!["legacy".to_owned(), "stall-resume".to_owned()];
    let report = run_with(&scenario, &options(1), None, &names).unwrap();
    let legacy = report.variant("legacy").unwrap();
    let resume = report.variant("stall-resume").unwrap();
    let unresponsive = |v: &watchkeeper_sim::Outcome| {
        v.terminations_by_reason
            .get("unresponsive")
            .copied()
            .unwrap_or(0)
    };
    assert!(unresponsive(legacy) > 0, "legacy force-closes");
    assert_eq!(unresponsive(resume), 0);
    assert_eq!(resume.terminations_total, 0);
    assert!(report.oracle_passed(), "{:?}", resume.violations);
    // The healthy watcher pays for the blocked dispatcher in legacy mode only.
    assert!(legacy.healthy_latency_ms.max > resume.healthy_latency_ms.max);
    assert!(resume.serializations_per_event <= 1.0 + 1e-9);
}

#[test]
fn a_permanently_slow_watcher_gets_an_honest_410_and_nobody_else_suffers() {
    let scenario = short("06-permanently-slow.toml");
    let report = run_with(&scenario, &options(1), None, &["stall-resume".to_owned()]).unwrap();
    let v = report.variant("stall-resume").unwrap();
    let slow = v.groups.iter().find(|g| g.name == "slow").unwrap();
    assert!(
        slow.terminations
            .get("resource_expired")
            .copied()
            .unwrap_or(0)
            >= 1,
        "{:?}",
        slow.terminations
    );
    for g in v.groups.iter().filter(|g| g.healthy) {
        assert!(
            g.terminations.is_empty(),
            "{}: {:?}",
            g.name,
            g.terminations
        );
    }
    assert!(report.oracle_passed(), "{:?}", v.violations);
}

#[test]
fn variants_compare_on_the_same_input() {
    let scenario = short("02-proxy-fleet.toml");
    let names = vec![
        "members-16".to_owned(),
        "pass_members_max=4096,pass_pushes_max=8000".to_owned(),
        "rotation".to_owned(),
    ];
    let report = run_with(&scenario, &options(3), None, &names).unwrap();
    assert_eq!(report.variants.len(), 3);
    // Same writes in every variant.
    let revisions: Vec<u64> = report.variants.iter().map(|v| v.revisions).collect();
    assert!(revisions.windows(2).all(|w| w[0] == w[1]));
    assert!(report.oracle_passed());
    let md = report.markdown();
    assert!(md.contains("members-16") && md.contains("rotation"));
}

#[test]
fn the_cli_runs_a_scenario_and_rejects_bad_input() {
    let out = std::env::temp_dir().join(format!("watchkeeper-sim-cli-{}", std::process::id()));
    let path = scenarios_dir().join("06-permanently-slow.toml");
    watchkeeper_sim::main_with_args(
        [
            "watchkeeper-sim",
            path.to_str().unwrap(),
            "--short",
            "--seed",
            "2",
            "--out",
            out.to_str().unwrap(),
            "--compare",
            "stall-resume",
            "oldest-first",
        ]
        .map(String::from),
    )
    .unwrap();
    assert!(out.join("report.md").exists());
    let err = watchkeeper_sim::main_with_args(
        [
            "watchkeeper-sim",
            path.to_str().unwrap(),
            "--compare",
            "nonsense",
        ]
        .map(String::from),
    )
    .unwrap_err();
    assert!(err.contains("unknown variant"), "{err}");
    for (setting, message) in [
        ("nobody=3", "the scenario has no group nobody"),
        ("slow", "expected NAME=COUNT"),
        ("slow=many", "COUNT is not a whole number"),
    ] {
        let err = watchkeeper_sim::main_with_args(
            [
                "watchkeeper-sim",
                path.to_str().unwrap(),
                "--short",
                "--group-count",
                setting,
            ]
            .map(String::from),
        )
        .unwrap_err();
        assert!(err.contains(message), "{setting}: {err}");
    }
    // A sweep point: the population scenario with its never-reading group emptied runs no
    // catch-up pass at all, and with 20 watchers in it, passes adopt them.
    let population = scenarios_dir().join("08-population.toml");
    let short_population = Scenario::load(&population).unwrap().shortened();
    let mut counts = Vec::new();
    for n in [0, 20] {
        let mut scenario = short_population.clone();
        scenario
            .set_group_count(&format!("never-reading={n}"))
            .unwrap();
        let report = run_with(&scenario, &options(1), None, &[]).unwrap();
        counts.push(report.variants[0].passes.count);
    }
    assert_eq!(counts[0], 0, "{counts:?}");
    assert!(counts[1] > 0, "{counts:?}");
    watchkeeper_sim::main_with_args(
        [
            "watchkeeper-sim",
            population.to_str().unwrap(),
            "--short",
            "--group-count",
            "never-reading=0",
        ]
        .map(String::from),
    )
    .unwrap();
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn the_shipped_cost_table_parses() {
    let table = CostTable::shipped();
    assert!(table.dispatch_push_ns > 0.0 && table.pass_event_scanned_ns > 0.0);
}

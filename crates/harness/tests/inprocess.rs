//! CI seeds of the in-process driver: a bounded number of seeds on the real core; any
//! violation fails with the command that reproduces it.

use watchkeeper_harness::inprocess;

fn run(first: u64, count: u64) {
    let mut failures = Vec::new();
    let total = inprocess::run_seeds(first, count, false, |outcome| {
        if let Some(v) = outcome.report.violations.first() {
            failures.push(format!(
                "seed {} ({}): {v}\n    reproduce: {}",
                outcome.seed,
                outcome.config,
                outcome.command()
            ));
        }
    });
    assert!(
        failures.is_empty(),
        "{} failing seed(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(total.sessions > count, "sessions were checked");
    assert!(total.events > 0, "events were checked");
    eprintln!(
        "seeds {first}..{}: {} sessions, {} events, {} reads checked",
        first + count,
        total.sessions,
        total.events,
        total.reads
    );
}

#[test]
fn seeds_0_to_300() {
    run(0, 300);
}

#[test]
fn seeds_300_to_600() {
    run(300, 300);
}

#[test]
fn a_seed_is_deterministic() {
    let a = inprocess::run_seed(42);
    let b = inprocess::run_seed(42);
    assert_eq!(a.report.sessions, b.report.sessions);
    assert_eq!(a.report.events, b.report.events);
    assert_eq!(a.revisions, b.revisions);
}

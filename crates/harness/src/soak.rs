//! The soak: in-process seeds for a number of sessions or minutes, spread over threads.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::checker::Violation;
use crate::inprocess;

/// When to stop.
#[derive(Clone, Copy, Debug)]
pub enum Budget {
    /// After at least this many sessions were checked.
    Sessions(u64),
    /// After this much wall time.
    Time(Duration),
}

/// What a soak did.
#[derive(Debug, Default)]
pub struct SoakReport {
    /// Seeds run.
    pub seeds: u64,
    /// Sessions checked.
    pub sessions: u64,
    /// Events checked.
    pub events: u64,
    /// Reads checked.
    pub reads: u64,
    /// Failing seeds with their first violations.
    pub failures: Vec<(u64, Vec<Violation>)>,
    /// Wall time.
    pub elapsed: Duration,
}

/// Runs seeds from `first_seed` on `threads` threads until the budget is spent.
#[must_use]
pub fn soak(first_seed: u64, budget: Budget, threads: usize, progress: bool) -> SoakReport {
    let started = Instant::now();
    let next = Arc::new(AtomicU64::new(first_seed));
    let sessions = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut handles = Vec::new();
    for _ in 0..threads.max(1) {
        let next = next.clone();
        let sessions = sessions.clone();
        let stop = stop.clone();
        handles.push(std::thread::spawn(move || {
            let mut report = SoakReport::default();
            while !stop.load(Ordering::Relaxed) {
                let seed = next.fetch_add(1, Ordering::Relaxed);
                let outcome = inprocess::run_seed(seed);
                report.seeds += 1;
                report.sessions += outcome.report.sessions;
                report.events += outcome.report.events;
                report.reads += outcome.report.reads;
                if !outcome.report.violations.is_empty() {
                    eprintln!(
                        "VIOLATION seed {seed} ({}): {}\n  reproduce: {}",
                        outcome.config,
                        outcome.report.violations[0],
                        outcome.command()
                    );
                    report.failures.push((
                        seed,
                        outcome.report.violations.into_iter().take(5).collect(),
                    ));
                }
                let total = sessions.fetch_add(outcome.report.sessions, Ordering::Relaxed)
                    + outcome.report.sessions;
                let done = match budget {
                    Budget::Sessions(n) => total >= n,
                    Budget::Time(limit) => started.elapsed() >= limit,
                };
                if done {
                    stop.store(true, Ordering::Relaxed);
                }
            }
            report
        }));
    }
    let mut last_print = Instant::now();
    while handles.iter().any(|h| !h.is_finished()) {
        std::thread::sleep(Duration::from_millis(200));
        if progress && last_print.elapsed() >= Duration::from_secs(10) {
            last_print = Instant::now();
            eprintln!(
                "soak: {} sessions checked after {:.0?}",
                sessions.load(Ordering::Relaxed),
                started.elapsed()
            );
        }
    }
    let mut total = SoakReport::default();
    for handle in handles {
        let report = handle.join().expect("soak thread");
        total.seeds += report.seeds;
        total.sessions += report.sessions;
        total.events += report.events;
        total.reads += report.reads;
        total.failures.extend(report.failures);
    }
    total.failures.sort_by_key(|(seed, _)| *seed);
    total.elapsed = started.elapsed();
    total
}

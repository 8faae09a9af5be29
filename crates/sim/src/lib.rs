//! # watchkeeper-sim
//!
//! A deterministic simulator that drives the *production* watchkeeper core — the real
//! [`watchkeeper_core::Dispatcher`] and [`watchkeeper_core::CatchUpWorker`] — on a virtual
//! clock in one thread, to measure what KEP-6268 "How we measure success" asks for: which
//! watchers were terminated and when, per-watcher delivery latency, serializations per event,
//! resync times against the fluid bound, pass fairness and memory in flight. It is the tool to
//! revise the initial values (member cap, budgets, periods) and the candidate order, and to
//! compare algorithm variants on the same input.
//!
//! ## Inputs
//! A [`Scenario`] (TOML): the write process and label distribution, the watcher groups and
//! their behaviour (read rates, stalls, blips, reconnects, deadlines, initial states), server
//! halts, and the core's configuration with named [`Variant`]s.
//!
//! ## Determinism
//! The same scenario, seed and code give byte-identical results: one seeded PRNG stream per
//! source of input (the store, each group, each client), one event queue ordered by
//! `(time, sequence)`, ordered maps only, and no wall clock in the simulation (only
//! [`costs::calibrate`] reads one). Each variant reports a hash of its event trace.
//!
//! ## Outputs
//! A [`Report`]: `report.json` with every number, `report.md` with the side-by-side summary, and
//! PNG/SVG plots, written by [`run`] into the output directory.
//!
//! ## Oracle
//! Every connection's received sequence is checked as it is read against the write log
//! filtered by the watcher's selection (see [`oracle`](crate::oracle) for the named
//! guarantees), and never-terminated connections must be complete after the liveness phase.

pub mod cli;
pub mod costs;
mod engine;
mod model;
mod oracle;
mod plot;
pub mod report;
pub mod rng;
pub mod scenario;
pub mod stats;

use std::fmt;
use std::path::Path;

pub use cli::main_with_args;
pub use costs::CostTable;
pub use report::{Outcome, Report};
pub use scenario::{Scenario, Variant};

/// What can go wrong running a simulation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SimError {
    /// The scenario, a variant or a cost table is invalid.
    Scenario(String),
    /// A file could not be read or written.
    Io(String),
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SimError::Scenario(m) => write!(f, "invalid scenario: {m}"),
            SimError::Io(m) => write!(f, "i/o error: {m}"),
        }
    }
}

impl std::error::Error for SimError {}

/// Options of one run besides the scenario.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// The seed.
    pub seed: u64,
    /// Whether the scenario was scaled down with `--short` (recorded in the report).
    pub short: bool,
    /// The cost table.
    pub costs: CostTable,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            seed: 1,
            short: false,
            costs: CostTable::shipped(),
        }
    }
}

/// Runs `scenario` once per variant (the scenario's `compare` list when `compare` is empty) with
/// the shipped cost table, and writes the report into `out_dir` if given.
///
/// # Errors
/// An invalid scenario or variant, or a report that cannot be written.
pub fn run(
    scenario: &Scenario,
    seed: u64,
    out_dir: Option<&Path>,
    compare: &[String],
) -> Result<Report, SimError> {
    let options = RunOptions {
        seed,
        ..RunOptions::default()
    };
    run_with(scenario, &options, out_dir, compare)
}

/// [`run`] with explicit options.
///
/// # Errors
/// See [`run`].
pub fn run_with(
    scenario: &Scenario,
    options: &RunOptions,
    out_dir: Option<&Path>,
    compare: &[String],
) -> Result<Report, SimError> {
    scenario.validate()?;
    let variants = scenario.variants_for(compare)?;
    let mut outcomes = Vec::new();
    for variant in &variants {
        let config = scenario.config_for(variant)?;
        let world = engine::World::new(scenario, config, &options.costs, options.seed);
        outcomes.push(world.run(&variant.name));
    }
    let report = Report {
        scenario: scenario.name.clone(),
        description: scenario.description.clone(),
        seed: options.seed,
        short: options.short,
        watchers: scenario.groups.iter().map(|g| g.count).sum(),
        costs: options.costs.clone(),
        variants: outcomes,
    };
    if let Some(dir) = out_dir {
        report.write(dir)?;
        plot::write_all(&report, dir)?;
    }
    Ok(report)
}

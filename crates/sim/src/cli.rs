//! The command line: `watchkeeper-sim SCENARIO.toml [--seed N] [--out DIR] [--compare V...]
//! [--short]` and `watchkeeper-sim calibrate --out costs.toml`, run by [`main_with_args`].

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::costs::{CostTable, calibrate};
use crate::scenario::Scenario;
use crate::{RunOptions, run_with};

#[derive(Parser, Debug)]
#[command(
    name = "watchkeeper-sim",
    about = "Deterministic simulator of the watchkeeper core (KEP-6268 measurements)",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// The scenario file (TOML).
    scenario: Option<PathBuf>,
    /// The seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Where to write report.md, report.json and the plots.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Variants to run side by side: names from the scenario's [[variants]], built-ins
    /// (legacy, stall-resume, free-share, rotation, oldest-first) or key=value[,key=value].
    #[arg(long, num_args = 1..)]
    compare: Vec<String>,
    /// Run the scenario scaled down as its [short] table says.
    #[arg(long)]
    short: bool,
    /// A cost table to use instead of the shipped one.
    #[arg(long)]
    costs: Option<PathBuf>,
    /// Sets one group's watcher count, NAME=COUNT (after `--short`; repeatable): a sweep over
    /// a population runs the same scenario with several counts.
    #[arg(long = "group-count", value_name = "NAME=COUNT")]
    group_counts: Vec<String>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Measure the per-operation costs of the core on this machine and write a cost table.
    Calibrate {
        /// Output file.
        #[arg(long, default_value = "costs.toml")]
        out: PathBuf,
    },
}

/// Runs the command line given in `args` (the first item is the program name). Prints a short
/// summary to standard output.
///
/// # Errors
/// A message for the user: bad arguments, an invalid scenario, a failed write, or an oracle
/// violation (the report is still written).
pub fn main_with_args(args: impl IntoIterator<Item = String>) -> Result<(), String> {
    let cli = Cli::try_parse_from(args).map_err(|e| e.to_string())?;
    if let Some(Command::Calibrate { out }) = cli.command {
        let table = calibrate();
        let text = table.to_toml(
            "Per-operation costs in nanoseconds, measured by `watchkeeper-sim calibrate`\n(wall-clock timing of the real core on the machine that ran it).",
        );
        std::fs::write(&out, text).map_err(|e| format!("{}: {e}", out.display()))?;
        println!("wrote {}", out.display());
        return Ok(());
    }
    let path = cli
        .scenario
        .ok_or_else(|| "a scenario file is required (or the calibrate command)".to_owned())?;
    let mut scenario = Scenario::load(&path).map_err(|e| e.to_string())?;
    if cli.short {
        scenario = scenario.shortened();
    }
    for setting in &cli.group_counts {
        scenario.set_group_count(setting)?;
    }
    let costs = match &cli.costs {
        Some(p) => CostTable::load(p).map_err(|e| e.to_string())?,
        None => CostTable::shipped(),
    };
    let options = RunOptions {
        seed: cli.seed,
        short: cli.short,
        costs,
    };
    let report = run_with(&scenario, &options, cli.out.as_deref(), &cli.compare)
        .map_err(|e| e.to_string())?;
    for v in &report.variants {
        println!(
            "{:<16} healthy p99 {:>9.3} ms  terminations {:>6}  serializations/event {:>6.3}  passes {:>6}  pass p99 {:>8.1} µs max {:>8.1} µs  oracle {}/{}  trace {}",
            v.name,
            v.healthy_latency_ms.p99,
            v.terminations_total,
            v.serializations_per_event,
            v.passes.count,
            v.passes.duration_us.p99,
            v.passes.duration_us.max,
            v.safety_violations,
            v.liveness_violations,
            v.trace_hash
        );
    }
    if let Some(out) = &cli.out {
        println!("report: {}", out.join("report.md").display());
    }
    if !report.oracle_passed() {
        let first = report
            .variants
            .iter()
            .flat_map(|v| v.violations.iter())
            .next()
            .map(|v| format!("{} ({}): {}", v.guarantee, v.group, v.message))
            .unwrap_or_default();
        return Err(format!("oracle violation: {first}"));
    }
    Ok(())
}

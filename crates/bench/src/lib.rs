//! # watchkeeper-bench
//!
//! The benchmark suite of watchkeeper (issue #6): `watchkeeper-bench [SUITE...] [--smoke]
//! [--runs N] [--out DIR]` runs suites, prints tables, and writes BENCHMARKS.md-ready Markdown
//! (`DIR/results.md`) and raw JSON (`DIR/results.json`).
//!
//! Machines are noisy, so every figure is the median of several runs, and every comparison is
//! the median of per-pair ratios of two configurations run interleaved in one invocation
//! (A, B, A, B, ...). `--smoke` shrinks every size so the whole suite runs in seconds; the
//! crate's smoke test runs it (it asserts nothing about timings).
//!
//! Suites (in the priority order):
//! - `tax`: the slow-watcher tax (KEP-6268's benchmark), in-process on the server's driver
//!   threads;
//! - `tax-http`: the same, end to end over HTTP against an in-process server;
//! - `population`: healthy latency vs the stalled population (in-process);
//! - `catchup`: shared catch-up of many watchers stalled together (in-process);
//! - `resync`: resync time of a stalled watcher vs read and write rates, next to the fluid
//!   bound (in-process);
//! - `fairness`: passes a new stall waits next to long-standing laggards (in-process);
//! - `fanout`: fan-out throughput end to end, clients in a child process;
//! - `etcd`: etcd 3.4 side by side (slow-watcher tax, RSS per idle watch);
//! - `etcd-fanout`: fan-out events/s and server CPU per delivered event of watchkeeper, a bare
//!   hyper pipe (the transport's limit) and etcd 3.4, interleaved (`--fanout-grid` picks the
//!   grid points);
//! - `scale`: the most concurrent watch streams one server process holds, over HTTP/1.1 (a
//!   connection each) and HTTP/2 (many streams per connection; `--scale-protocols` picks),
//!   with the memory per idle stream and a write's delivery latency to all of them, clients in
//!   child processes;
//! - `alloc`: allocations per PATCH end to end and store decodes per conflict;
//! - `restart`: a graceful restart of a server holding many watchers under write load, with
//!   the caches' history rebuilt from the store and without (410s, relists, events lost,
//!   duplicates, time until each watcher delivers again): on the embedded store, and in etcd
//!   mode with two instances (the watchers resume on the restarted instance or on the
//!   sibling); `--restart-modes` picks the modes;
//! - `writes`: the sustained write rate with K writes in flight against watchkeeper on the
//!   memory, embedded (durable, on disk and on tmpfs) and etcd stores, with 0 and N reading
//!   watchers, next to etcd's own put rate, interleaved; and the stores alone (the embedded
//!   store with and without group commit). `--port-base` puts its etcd on given ports.

pub mod alloc;
pub mod clients;
pub mod e2e;
pub mod etcd;
pub mod http;
pub mod inproc;
pub mod kep;
pub mod pipe;
pub mod report;
pub mod restart;
pub mod scale;
pub mod sys;
pub mod writes;

use std::path::PathBuf;

pub use report::{Report, Table};

/// Command-line options.
#[derive(Clone, Debug)]
pub struct Options {
    /// The arguments as given (the report's header repeats them).
    pub args: Vec<String>,
    /// Suites to run, in order; empty means every suite.
    pub suites: Vec<String>,
    /// Tiny sizes, one run.
    pub smoke: bool,
    /// Runs per figure (medians are taken over them).
    pub runs: usize,
    /// Where results.md and results.json go.
    pub out: PathBuf,
    /// The benchmark executable (for client child processes).
    pub exe: PathBuf,
    /// `tax`: the slow companions beside the healthy watcher (`None`: 100; 5 in a smoke run).
    pub tax_companions: Option<usize>,
    /// `tax` and `tax-http`: the companions' patterns to run; empty: both.
    pub tax_patterns: Vec<inproc::Pattern>,
    /// `tax` and `tax-http`: the write rates (events/s) to run; empty: 100 and 1,000 (100 in
    /// a smoke run).
    pub tax_rates: Vec<f64>,
    /// `tax`: how the writer and the healthy consumer run (threads: tables 1, 1c and 1d;
    /// tasks on a runtime, as the server runs them: table 1e); empty: both, interleaved.
    pub tax_consumers: Vec<inproc::Consumers>,
    /// `population`: the never-reading populations N to run (N = 0 is always run first, as
    /// the ratios' reference).
    pub population_ns: Vec<usize>,
    /// `tax`, `tax-http` and `population` (the suites whose issue asks for a busy machine):
    /// a CPU-bound background load during the suite, one spinning thread per core at this
    /// nice value (0-19), started by the benchmark itself; `None`: no load. Other suites
    /// refuse the flag rather than ignore it.
    pub busy_nice: Option<i32>,
    /// `population`: the allocator set-ups to run, interleaved (each run is its own process);
    /// empty: glibc as it comes.
    pub population_malloc: Vec<inproc::MallocMode>,
    /// `etcd-fanout`: the grid points (watchers, writes/s) to run; empty: the default grid.
    pub fanout_grid: Vec<(usize, f64)>,
    /// `restart`: the modes to run (embedded store, etcd with the watchers resuming on the
    /// restarted instance, on the sibling); empty: every mode.
    pub restart_modes: Vec<restart::Mode>,
    /// `restart` in etcd mode: the first of four consecutive loopback ports (etcd's client
    /// and peer ports, instances A and B); `etcd-fanout` and `writes`: etcd's client and peer
    /// ports; `None`: ports the kernel picks.
    pub port_base: Option<u16>,
    /// `scale`: the transports to run (HTTP/1.1, HTTP/2); empty: both.
    pub scale_protocols: Vec<scale::Protocol>,
    /// `scale`: the stream counts of the ramp's steps; empty: each protocol's default ramp.
    pub scale_steps: Vec<usize>,
    /// `alloc`: record the call stack of every allocation in each watcher count's first run
    /// and write where the bytes of a PATCH go to `DIR/alloc-sites-<watchers>.md` (slow).
    pub alloc_sites: bool,
    /// `fanout` (and `__profile`): the in-process server's runtime workers, as its
    /// `--runtime-workers` flag; `None`: 2, one per CPU of the machines measured here.
    pub runtime_workers: Option<usize>,
}

/// The suites that run under `--busy-nice`'s background load.
pub const BUSY_SUITES: [&str; 3] = ["tax", "tax-http", "population"];

/// Every suite, in priority order.
pub const SUITES: [&str; 13] = [
    "tax",
    "tax-http",
    "population",
    "catchup",
    "resync",
    "fairness",
    "fanout",
    "etcd",
    "etcd-fanout",
    "scale",
    "alloc",
    "restart",
    "writes",
];

impl Options {
    /// Parses `args` (without the program name).
    ///
    /// # Errors
    /// An unknown flag or suite.
    pub fn parse(args: &[String], exe: PathBuf) -> Result<Options, String> {
        let mut options = Options {
            args: args.to_vec(),
            suites: Vec::new(),
            smoke: false,
            runs: 0,
            out: PathBuf::from("target/bench-results"),
            exe,
            tax_companions: None,
            tax_patterns: Vec::new(),
            tax_rates: Vec::new(),
            tax_consumers: Vec::new(),
            population_ns: Vec::new(),
            busy_nice: None,
            population_malloc: Vec::new(),
            fanout_grid: Vec::new(),
            restart_modes: Vec::new(),
            port_base: None,
            scale_protocols: Vec::new(),
            scale_steps: Vec::new(),
            alloc_sites: false,
            runtime_workers: None,
        };
        let mut i = 0;
        while i < args.len() {
            match args[i].as_str() {
                "--smoke" => options.smoke = true,
                "--alloc-sites" => options.alloc_sites = true,
                "--out" => {
                    i += 1;
                    options.out = PathBuf::from(args.get(i).ok_or("--out needs a directory")?);
                }
                "--runs" => {
                    i += 1;
                    options.runs = args
                        .get(i)
                        .and_then(|v| v.parse().ok())
                        .filter(|&n| n > 0)
                        .ok_or("--runs needs a positive number")?;
                }
                "--tax-companions" => {
                    i += 1;
                    options.tax_companions = Some(
                        args.get(i)
                            .and_then(|v| v.parse().ok())
                            .ok_or("--tax-companions needs a count")?,
                    );
                }
                "--tax-patterns" => {
                    i += 1;
                    options.tax_patterns = list(args.get(i), inproc::Pattern::parse).ok_or(
                        "--tax-patterns needs a comma-separated list of stalled-once, reconnecting",
                    )?;
                }
                "--tax-rates" => {
                    i += 1;
                    options.tax_rates = list(args.get(i), |v| {
                        v.parse::<f64>().ok().filter(|r| r.is_finite() && *r > 0.0)
                    })
                    .ok_or("--tax-rates needs a comma-separated list of positive events/s")?;
                }
                "--tax-consumers" => {
                    i += 1;
                    options.tax_consumers = list(args.get(i), inproc::Consumers::parse)
                        .ok_or("--tax-consumers needs a comma-separated list of threads, tasks")?;
                }
                "--population-ns" => {
                    i += 1;
                    options.population_ns = list(args.get(i), count)
                        .ok_or("--population-ns needs a comma-separated list of counts")?;
                }
                "--busy-nice" => {
                    i += 1;
                    options.busy_nice = Some(
                        args.get(i)
                            .and_then(|v| v.parse().ok())
                            .filter(|n| (0..=19).contains(n))
                            .ok_or("--busy-nice needs a nice value from 0 to 19")?,
                    );
                }
                "--population-malloc" => {
                    i += 1;
                    options.population_malloc = list(args.get(i), inproc::MallocMode::parse)
                        .ok_or(
                            "--population-malloc needs a comma-separated list of glibc, no-trim",
                        )?;
                }
                "--fanout-grid" => {
                    i += 1;
                    options.fanout_grid = list(args.get(i), |point| {
                        let (n, rate) = point.split_once('x')?;
                        Some((count(n)?, rate.replace('_', "").parse().ok()?))
                    })
                    .ok_or("--fanout-grid needs WATCHERSxRATE points, comma-separated (e.g. 100x100,1000x1000)")?;
                }
                "--restart-modes" => {
                    i += 1;
                    options.restart_modes = list(args.get(i), restart::Mode::parse)
                        .ok_or("--restart-modes needs a comma-separated list of embedded, etcd-restart, etcd-sibling")?;
                }
                "--port-base" => {
                    i += 1;
                    options.port_base = Some(
                        args.get(i)
                            .and_then(|v| v.parse::<u16>().ok())
                            .filter(|p| (1024..=65_532).contains(p))
                            .ok_or("--port-base needs a port from 1024 to 65532")?,
                    );
                }
                "--runtime-workers" => {
                    i += 1;
                    options.runtime_workers = Some(
                        args.get(i)
                            .and_then(|v| v.parse::<usize>().ok())
                            .filter(|n| (1..=1024).contains(n))
                            .ok_or("--runtime-workers needs a number from 1 to 1024")?,
                    );
                }
                "--scale-protocols" => {
                    i += 1;
                    options.scale_protocols = list(args.get(i), scale::Protocol::parse)
                        .ok_or("--scale-protocols needs a comma-separated list of h1, h2")?;
                }
                "--scale-steps" => {
                    i += 1;
                    options.scale_steps = list(args.get(i), |n| count(n).filter(|n| *n > 0))
                        .ok_or("--scale-steps needs a comma-separated list of stream counts")?;
                }
                "-h" | "--help" => {
                    return Err(format!(
                        "usage: watchkeeper-bench [SUITE...] [--smoke] [--runs N] [--out DIR] [--tax-companions N] [--tax-patterns stalled-once,reconnecting] [--tax-rates R,R,...] [--tax-consumers threads,tasks] [--population-ns N,N,...] [--busy-nice NICE] [--population-malloc glibc,no-trim] [--fanout-grid WATCHERSxRATE,...] [--restart-modes MODE,...] [--port-base PORT] [--runtime-workers N] [--scale-protocols h1,h2] [--scale-steps N,N,...] [--alloc-sites]\nsuites: {}",
                        SUITES.join(", ")
                    ));
                }
                suite if SUITES.contains(&suite) => options.suites.push(suite.to_owned()),
                other => {
                    return Err(format!(
                        "unknown argument {other:?} (suites: {})",
                        SUITES.join(", ")
                    ));
                }
            }
            i += 1;
        }
        if options.suites.is_empty() {
            options.suites = SUITES.iter().map(|s| (*s).to_owned()).collect();
        }
        if options.runs == 0 {
            options.runs = if options.smoke { 1 } else { 3 };
        }
        if options.busy_nice.is_some()
            && let Some(other) = options
                .suites
                .iter()
                .find(|s| !BUSY_SUITES.contains(&s.as_str()))
        {
            return Err(format!(
                "--busy-nice is read by {} only, not by {other}: name those suites",
                BUSY_SUITES.join(", ")
            ));
        }
        Ok(options)
    }
}

/// A flag's comma-separated list, each item (trimmed) read by `item`; `None` when the value
/// is missing, empty or has an item `item` refuses.
fn list<T>(value: Option<&String>, item: impl Fn(&str) -> Option<T>) -> Option<Vec<T>> {
    let items: Vec<T> = value?
        .split(',')
        .map(|v| item(v.trim()))
        .collect::<Option<_>>()?;
    (!items.is_empty()).then_some(items)
}

/// A count with optional `_` separators (`100_000`).
fn count(text: &str) -> Option<usize> {
    text.replace('_', "").parse().ok()
}

/// Runs the chosen suites, printing each table as it completes, and writes the results.
///
/// # Errors
/// A suite could not run or the results could not be written.
pub fn run(options: &Options) -> Result<Report, String> {
    sys::raise_fd_limit();
    let mut report = Report::new(options);
    for suite in &options.suites {
        let started = std::time::Instant::now();
        eprintln!("== suite {suite} ...");
        let tables = match suite.as_str() {
            "tax" => inproc::tax(options)?,
            "tax-http" => e2e::tax_http(options)?,
            "population" => inproc::population(options)?,
            "catchup" => inproc::catchup(options)?,
            "resync" => kep::resync(options)?,
            "fairness" => kep::fairness(options)?,
            "scale" => scale::scale(options)?,
            "fanout" => e2e::fanout(options)?,
            "etcd" => etcd::etcd(options)?,
            "etcd-fanout" => etcd::etcd_fanout_suite(options)?,
            "alloc" => e2e::allocations(options)?,
            "restart" => restart::restart(options)?,
            "writes" => writes::writes(options)?,
            other => return Err(format!("unknown suite {other}")),
        };
        for table in tables {
            println!("{}", table.markdown());
            report.tables.push(table);
        }
        // Written after every suite, so an interrupted invocation keeps what it measured.
        report.write(&options.out)?;
        eprintln!(
            "== suite {suite} took {:.1} s",
            started.elapsed().as_secs_f64()
        );
    }
    report.write(&options.out)?;
    Ok(report)
}

/// The median of `values` (the upper median for an even count); 0 when empty.
#[must_use]
pub fn median(values: &[f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[sorted.len() / 2]
}

/// Latency summary of one run, in microseconds.
#[derive(Clone, Copy, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Latency {
    /// Samples.
    pub count: usize,
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Maximum.
    pub max: f64,
}

impl Latency {
    /// Summarises samples in nanoseconds.
    #[must_use]
    pub fn from_nanos(mut samples: Vec<u64>) -> Latency {
        if samples.is_empty() {
            return Latency::default();
        }
        samples.sort_unstable();
        let at = |q: f64| {
            let index = ((samples.len() as f64 * q).ceil() as usize).clamp(1, samples.len()) - 1;
            samples[index] as f64 / 1000.0
        };
        Latency {
            count: samples.len(),
            p50: at(0.50),
            p99: at(0.99),
            max: samples[samples.len() - 1] as f64 / 1000.0,
        }
    }
}

//! `watchkeeper-harness`: run in-process seeds, a soak, or an end-to-end run.

use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use watchkeeper_harness::{cluster, e2e, etcd, inprocess, soak};

#[derive(Parser)]
#[command(
    name = "watchkeeper-harness",
    about = "Model-based correctness harness of watchkeeper"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run in-process seeds on the real core and check them.
    Inprocess {
        /// One seed (reproduces a failure).
        #[arg(long)]
        seed: Option<u64>,
        /// First seed of a range.
        #[arg(long, default_value_t = 0)]
        first: u64,
        /// Number of seeds.
        #[arg(long, default_value_t = 100)]
        seeds: u64,
        /// Print every violation, not just the first per seed.
        #[arg(long)]
        verbose: bool,
    },
    /// Run in-process seeds until N sessions or M minutes, on all cores.
    Soak {
        /// Stop after this many sessions were checked.
        #[arg(long)]
        sessions: Option<u64>,
        /// Stop after this many minutes.
        #[arg(long)]
        minutes: Option<f64>,
        /// First seed.
        #[arg(long, default_value_t = 1_000_000)]
        first: u64,
        /// Threads [default: available cores].
        #[arg(long)]
        threads: Option<usize>,
    },
    /// Run the etcd-cluster fault run: three etcd members (ETCD_BINARY) on loopback, two
    /// instances on them, kill -9 / SIGSTOP / compaction faults under load; exits non-zero
    /// on any violation, lost acknowledged write or relist.
    Cluster {
        /// Seed of the workload.
        #[arg(long, default_value_t = 20)]
        seed: u64,
        /// Client port of member 0 (1 and 2 use the next two) [default: free ports].
        #[arg(long)]
        client_port: Option<u16>,
        /// Peer port of member 0 (1 and 2 use the next two) [default: free ports].
        #[arg(long)]
        peer_port: Option<u16>,
        /// Writes per writer (two writers).
        #[arg(long, default_value_t = 300)]
        writes_per_writer: usize,
        /// Concurrent watchers.
        #[arg(long, default_value_t = 24)]
        watchers: usize,
        /// A fault after every this many writes.
        #[arg(long, default_value_t = 50)]
        fault_every: u64,
        /// etcd's --election-timeout in milliseconds (heartbeat: a tenth).
        #[arg(long, default_value_t = 500)]
        election_ms: u64,
        /// Start etcd without --experimental-watch-progress-notify-interval.
        #[arg(long)]
        no_progress_notify: bool,
    },
    /// Run a watchkeeper server with the harness's settings (small history and queues) and
    /// print `listening ADDR`; used by the kill-and-restart test, which SIGKILLs it.
    Serve {
        /// memory or embedded.
        #[arg(long, default_value = "embedded")]
        store: String,
        /// Data directory of the embedded store.
        #[arg(long)]
        data_dir: Option<std::path::PathBuf>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Inprocess {
            seed,
            first,
            seeds,
            verbose,
        } => {
            let (first, count) = match seed {
                Some(seed) => (seed, 1),
                None => (first, seeds),
            };
            let mut failed = 0;
            let mut ends = std::collections::BTreeMap::new();
            let total = inprocess::run_seeds(first, count, false, |outcome| {
                for (k, v) in &outcome.ends {
                    *ends.entry(*k).or_insert(0u64) += v;
                }
                if outcome.report.violations.is_empty() {
                    if count == 1 {
                        println!(
                            "seed {}: ok ({}; {} sessions, {} events, {} reads, {} revisions)",
                            outcome.seed,
                            outcome.config,
                            outcome.report.sessions,
                            outcome.report.events,
                            outcome.report.reads,
                            outcome.revisions
                        );
                    }
                    return;
                }
                failed += 1;
                println!("seed {} FAILED ({}):", outcome.seed, outcome.config);
                let shown = if verbose { usize::MAX } else { 5 };
                for violation in outcome.report.violations.iter().take(shown) {
                    println!("  {violation}");
                }
                println!("  reproduce: {}", outcome.command());
            });
            println!(
                "{count} seed(s): {} sessions, {} events, {} reads checked; {} violation(s) in {failed} seed(s)",
                total.sessions,
                total.events,
                total.reads,
                total.violations.len()
            );
            println!("coverage: {ends:?}");
            if failed > 0 {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            }
        }
        Command::Cluster {
            seed,
            client_port,
            peer_port,
            writes_per_writer,
            watchers,
            fault_every,
            election_ms,
            no_progress_notify,
        } => {
            let config = cluster::ClusterConfig {
                seed,
                etcd: etcd::ClusterOptions {
                    client_port,
                    peer_port,
                    heartbeat_ms: (election_ms / 10).max(1),
                    election_ms,
                    progress_notify: !no_progress_notify,
                },
                watchers,
                writes_per_writer,
                fault_every,
                ..cluster::ClusterConfig::default()
            };
            let load = || std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
            let load_before = load();
            let runtime = tokio::runtime::Runtime::new().expect("runtime");
            let outcome = match runtime.block_on(cluster::run(&config)) {
                Ok(outcome) => outcome,
                Err(e) => {
                    eprintln!("cluster: {e}");
                    return ExitCode::FAILURE;
                }
            };
            for fault in &outcome.faults {
                println!("{fault}");
            }
            let e = &outcome.e2e;
            println!(
                "cluster: {} faults; {} sessions, {} events, {} reads checked; {} violation(s); \
                 {} acknowledged writes, {} lost; {} failovers to another server, {} answered 410 (honest); \
                 {} relists; {} 410s; writes refused by status {:?}; {:.1?} wall",
                outcome.faults.len(),
                e.report.sessions,
                e.report.events,
                e.report.reads,
                e.report.violations.len(),
                e.acked,
                outcome.acked_lost(),
                e.failovers,
                e.failover_gone,
                e.relists,
                e.gone,
                e.refusals,
                outcome.elapsed
            );
            println!(
                "load average before: {}; after: {}",
                load_before.trim(),
                load().trim()
            );
            for (position, now, floor) in &e.failover_gone_details {
                println!(
                    "  a failover from {position} answered 410 (store at {now}, stated floor {floor:?})"
                );
            }
            let failures = outcome.failures();
            for failure in failures.iter().take(20) {
                println!("  {failure}");
            }
            if failures.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Command::Serve { store, data_dir } => {
            let choice = match (store.as_str(), data_dir) {
                ("embedded", Some(dir)) => e2e::StoreChoice::Embedded(dir),
                ("memory", _) => e2e::StoreChoice::Memory,
                _ => {
                    eprintln!("serve: --store memory, or --store embedded --data-dir DIR");
                    return ExitCode::FAILURE;
                }
            };
            let runtime = tokio::runtime::Runtime::new().expect("runtime");
            runtime.block_on(async {
                match e2e::start_server(e2e::serve_args(&choice)).await {
                    Ok(server) => {
                        println!("listening {}", server.addr);
                        std::future::pending::<()>().await;
                        ExitCode::SUCCESS
                    }
                    Err(e) => {
                        eprintln!("serve: {e}");
                        ExitCode::FAILURE
                    }
                }
            })
        }
        Command::Soak {
            sessions,
            minutes,
            first,
            threads,
        } => {
            let budget = match (sessions, minutes) {
                (Some(n), _) => soak::Budget::Sessions(n),
                (None, Some(m)) => soak::Budget::Time(Duration::from_secs_f64(m * 60.0)),
                (None, None) => soak::Budget::Sessions(1_000_000),
            };
            let threads = threads.unwrap_or_else(|| {
                std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
            });
            let report = soak::soak(first, budget, threads, true);
            println!(
                "soak: {} seeds, {} sessions, {} events, {} reads checked in {:.1?}; {} failing seed(s)",
                report.seeds,
                report.sessions,
                report.events,
                report.reads,
                report.elapsed,
                report.failures.len()
            );
            for (seed, violations) in &report.failures {
                for v in violations {
                    println!("  seed {seed}: {v}");
                }
                println!(
                    "  reproduce: cargo run -p watchkeeper-harness -- inprocess --seed {seed}"
                );
            }
            if report.failures.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

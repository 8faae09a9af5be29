//! The etcd-cluster fault run: a three-member etcd cluster of the harness's own
//! ([`EtcdCluster`]) with two watchkeeper instances on it, each given all three endpoints,
//! under the end-to-end workload ([`e2e::run_on_instances`]: writers and readers on both
//! instances, watchers whose resumed sessions move to the sibling instance half of the time).
//!
//! Guarantees checked (the run fails otherwise):
//! - every session and read passes the checker (Ordered, Unique, Atomic, Reliable, Resumable,
//!   Bookmarkable, Initial state, Selection, Honest 410, Linearizable reads), against the
//!   history the store itself records;
//! - every acknowledged write is in that history (Durable): no acknowledged write is lost;
//! - no instance relists (compaction stays behind both caches, as kube-apiserver's compactor
//!   compacts the revision it saw one interval earlier), so a client that fails over to the
//!   sibling or to a restarted instance with the resource version it last saw gets a 410
//!   only when its position is older than that instance's history (the checker's Honest
//!   410); such 410s are counted and listed with their positions.
//!
//! Faults, one after every `fault_every` writes, in this order and round again: kill -9 the
//! leader (found with etcd's maintenance status API), wait for the others to elect a new one,
//! compact, restart it on its data; kill -9 a follower, compact, restart it; SIGSTOP the
//! leader for at least three election timeouts and until the others elected a new one,
//! compact during the pause, SIGCONT; compact, then restart one instance (in turn) on the
//! same etcd: it shuts down gracefully (final bookmarks), and a new one starts in its place
//! with its history rebuilt from etcd while writes go on through the sibling, so watchers
//! that resume on it start from before its first list. Compactions go through a client bound
//! to a member that is up, at the lowest revision both caches had dispatched at the previous
//! fault.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use watchkeeper::Server;
use watchkeeper::config::ServeArgs;
use watchkeeper_store::{EtcdConfig, EtcdStore, Store};

use crate::e2e::{self, E2eConfig, E2eOutcome, Instances, StoreChoice};
use crate::etcd::{ClusterOptions, EtcdCluster, MEMBERS};

/// One cluster fault run.
#[derive(Clone, Debug)]
pub struct ClusterConfig {
    /// Seed of the workload's random choices.
    pub seed: u64,
    /// How the etcd cluster is started.
    pub etcd: ClusterOptions,
    /// Concurrent watchers.
    pub watchers: usize,
    /// Concurrent writers.
    pub writers: usize,
    /// Writes per writer.
    pub writes_per_writer: usize,
    /// Consistent reads.
    pub reads: usize,
    /// A fault after every this many writes.
    pub fault_every: u64,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            seed: 20,
            etcd: ClusterOptions::default(),
            watchers: 24,
            writers: 2,
            writes_per_writer: 300,
            reads: 40,
            fault_every: 50,
        }
    }
}

/// What a cluster run did.
#[derive(Debug)]
pub struct ClusterOutcome {
    /// The end-to-end outcome (checker report, acknowledged writes, failovers, relists).
    pub e2e: E2eOutcome,
    /// The faults injected, one line each.
    pub faults: Vec<String>,
    /// Wall time from starting etcd to the check's end.
    pub elapsed: Duration,
}

impl ClusterOutcome {
    /// Acknowledged writes missing from the store's history.
    #[must_use]
    pub fn acked_lost(&self) -> usize {
        self.e2e
            .report
            .violations
            .iter()
            .filter(|v| v.guarantee == watchkeeper_core::Guarantee::Durable)
            .count()
    }

    /// What makes the run fail: checker violations (a 410 after a failover is one only if it
    /// is not honest: the checker's Honest 410), relists.
    #[must_use]
    pub fn failures(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .e2e
            .report
            .violations
            .iter()
            .map(ToString::to_string)
            .collect();
        if self.e2e.relists > 0 {
            out.push(format!("{} cache relist(s)", self.e2e.relists));
        }
        out
    }
}

/// Compacts at `revision` through a client bound to member `member` only.
async fn compact_via(endpoint: String, revision: u64) -> String {
    if revision == 0 {
        return "nothing to compact".to_owned();
    }
    let store = match EtcdStore::connect(EtcdConfig::new([endpoint])).await {
        Ok(store) => store,
        Err(e) => return format!("compaction client: {e}"),
    };
    match store.compact(revision).await {
        Ok(()) => format!("compacted at {revision}"),
        Err(e) => format!("compaction at {revision}: {e}"),
    }
}

struct Faults {
    cluster: Arc<Mutex<EtcdCluster>>,
    instances: Arc<Instances>,
    /// The running servers, by instance.
    servers: Arc<Mutex<Vec<Option<Server>>>>,
    args: ServeArgs,
    /// Restarts so far.
    restarts: usize,
    runtime: tokio::runtime::Handle,
    log: Arc<Mutex<Vec<String>>>,
    /// The lowest revision both caches had dispatched at the previous fault.
    compact_next: u64,
    election: Duration,
}

impl Faults {
    fn others(member: usize) -> Vec<usize> {
        (0..MEMBERS).filter(|&i| i != member).collect()
    }

    fn compact(&mut self, via: usize) -> String {
        let endpoint = self.cluster.lock().expect("lock").endpoint(via);
        let revision = self.compact_next;
        self.compact_next = self.instances.min_dispatched();
        self.runtime.block_on(compact_via(endpoint, revision))
    }

    fn leader(&self, asked: &[usize]) -> Option<usize> {
        let cluster = self.cluster.lock().expect("lock");
        self.runtime.block_on(cluster.wait_leader(asked))
    }

    /// Fault number `n` (1, 2, ...). Blocking: runs off the async workers.
    fn inject(&mut self, n: u64) {
        let all: Vec<usize> = (0..MEMBERS).collect();
        let line = match n % 4 {
            1 | 3 => {
                let Some(leader) = self.leader(&all) else {
                    self.log(n, "no leader agreed on: fault skipped".to_owned());
                    return;
                };
                let others = Faults::others(leader);
                if n % 4 == 1 {
                    self.cluster.lock().expect("lock").kill(leader);
                    let elected = self.leader(&others);
                    let compacted = self.compact(others[0]);
                    let restarted = self.cluster.lock().expect("lock").restart(leader);
                    format!(
                        "kill -9 leader m{leader}; m{} elected; {compacted}; restart: {restarted:?}",
                        elected.map_or("none".to_owned(), |m| m.to_string())
                    )
                } else {
                    let paused = Instant::now();
                    self.cluster.lock().expect("lock").pause(leader);
                    let elected = self.leader(&others);
                    let compacted = self.compact(others[0]);
                    // The one wall-clock pause: a stopped process can only be observed over
                    // time. At least three election timeouts, however quickly the others
                    // elected.
                    if let Some(rest) = (self.election * 3).checked_sub(paused.elapsed()) {
                        std::thread::sleep(rest);
                    }
                    self.cluster.lock().expect("lock").resume(leader);
                    format!(
                        "SIGSTOP leader m{leader} for {:?}; m{} elected; {compacted}; SIGCONT",
                        paused.elapsed(),
                        elected.map_or("none".to_owned(), |m| m.to_string())
                    )
                }
            }
            2 => {
                let Some(leader) = self.leader(&all) else {
                    self.log(n, "no leader agreed on: fault skipped".to_owned());
                    return;
                };
                let follower = (leader + 1) % MEMBERS;
                self.cluster.lock().expect("lock").kill(follower);
                let compacted = self.compact(leader);
                let restarted = self.cluster.lock().expect("lock").restart(follower);
                format!("kill -9 follower m{follower}; {compacted}; restart: {restarted:?}")
            }
            _ => {
                let via = self.leader(&all).unwrap_or(0);
                let compacted = self.compact(via);
                let restarted = self.restart_instance();
                format!("{compacted}; {restarted}")
            }
        };
        self.log(n, line);
    }

    /// Restarts one instance (in turn) on the same etcd: it shuts down gracefully (final
    /// bookmarks; its watchers resume on the sibling or fail until it is back), then a new
    /// one starts in its place with its history rebuilt from etcd, while the writers go on
    /// through the sibling: watchers that resume on it start from before its first list.
    fn restart_instance(&mut self) -> String {
        let i = self.restarts % 2;
        self.restarts += 1;
        let old = self.servers.lock().expect("lock")[i].take();
        if let Some(old) = old {
            self.runtime.block_on(old.shutdown());
        }
        let new = match self.runtime.block_on(e2e::start_server(self.args.clone())) {
            Ok(server) => server,
            Err(e) => return format!("instance {i} could not start again: {e}"),
        };
        self.instances.replace(i, &new);
        self.servers.lock().expect("lock")[i] = Some(new);
        format!("instance {i} restarted")
    }

    fn log(&self, n: u64, line: String) {
        self.log
            .lock()
            .expect("lock")
            .push(format!("fault {n}: {line}"));
    }
}

/// Starts the cluster and two instances, runs the workload with the faults, checks it.
///
/// # Errors
/// Setup failures (etcd or a server cannot start, the store cannot be read).
pub async fn run(config: &ClusterConfig) -> Result<ClusterOutcome, String> {
    let started = Instant::now();
    let options = config.etcd.clone();
    let cluster = tokio::task::spawn_blocking(move || EtcdCluster::start(options))
        .await
        .map_err(|e| e.to_string())??;
    cluster
        .wait_leader(&(0..MEMBERS).collect::<Vec<_>>())
        .await
        .ok_or("the cluster elected no leader")?;
    let endpoints = cluster.endpoints();
    let args = || {
        let mut args = e2e::serve_args(&StoreChoice::Etcd {
            endpoint: endpoints[0].clone(),
            prefix: "/registry".to_owned(),
        });
        args.etcd_endpoints = Some(endpoints.clone());
        args
    };
    let one = e2e::start_server(args()).await?;
    let two = e2e::start_server(args()).await?;
    let instances = Arc::new(Instances::new(&[&one, &two]));
    let store = one.store().ok_or("an etcd instance has a store")?.clone();
    let servers = Arc::new(Mutex::new(vec![Some(one), Some(two)]));
    let cluster = Arc::new(Mutex::new(cluster));
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut faults = Faults {
        cluster: cluster.clone(),
        instances: instances.clone(),
        servers: servers.clone(),
        args: args(),
        restarts: 0,
        runtime: tokio::runtime::Handle::current(),
        log: log.clone(),
        compact_next: 0,
        election: Duration::from_millis(config.etcd.election_ms),
    };
    let hook: e2e::FaultHook = Box::new(move |n| faults.inject(n));
    let e2e_config = E2eConfig {
        seed: config.seed,
        store: StoreChoice::Etcd {
            endpoint: endpoints[0].clone(),
            prefix: "/registry".to_owned(),
        },
        watchers: config.watchers,
        writers: config.writers,
        writes_per_writer: config.writes_per_writer,
        reads: config.reads,
        compact_every: None,
    };
    let outcome = e2e::run_shared(
        instances,
        store,
        "/registry",
        &e2e_config,
        Some((config.fault_every, hook)),
    )
    .await;
    let running: Vec<Server> = servers.lock().expect("lock").drain(..).flatten().collect();
    for server in running {
        server.shutdown().await;
    }
    tokio::task::spawn_blocking(move || drop(cluster))
        .await
        .map_err(|e| e.to_string())?;
    let faults = std::mem::take(&mut *log.lock().expect("lock"));
    Ok(ClusterOutcome {
        e2e: outcome?,
        faults,
        elapsed: started.elapsed(),
    })
}

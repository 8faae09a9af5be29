//! An etcd of the harness's own (never the shared one): a child process of `ETCD_BINARY` on
//! free loopback ports with its data under /dev/shm, which fault tests may pause (SIGSTOP /
//! SIGCONT), kill (SIGKILL) and restart on the same data; and [`EtcdCluster`], three such
//! members in one static cluster.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

// Ports this etcd can be killed and restarted on (see the kit's `ports`).
use watchkeeper_testkit::ports::restartable_port;

/// A private etcd.
#[derive(Debug)]
pub struct OwnEtcd {
    binary: PathBuf,
    dir: tempfile::TempDir,
    client_port: u16,
    peer_port: u16,
    child: Option<Child>,
}

impl OwnEtcd {
    /// Starts etcd from the `ETCD_BINARY` environment variable.
    ///
    /// # Errors
    /// `ETCD_BINARY` is unset (run scripts/test), or etcd cannot start.
    pub fn start() -> Result<OwnEtcd, String> {
        let binary = std::env::var_os("ETCD_BINARY")
            .ok_or("ETCD_BINARY is not set: run the suite with scripts/test, which sets it")?;
        let dir = tempfile::Builder::new()
            .prefix("watchkeeper-harness-etcd.")
            .tempdir_in("/dev/shm")
            .map_err(|e| format!("/dev/shm: {e}"))?;
        let mut etcd = OwnEtcd {
            binary: binary.into(),
            dir,
            client_port: restartable_port(),
            peer_port: restartable_port(),
            child: None,
        };
        etcd.spawn()?;
        Ok(etcd)
    }

    /// The client URL.
    #[must_use]
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.client_port)
    }

    fn spawn(&mut self) -> Result<(), String> {
        let peer = format!("http://127.0.0.1:{}", self.peer_port);
        let child = Command::new(&self.binary)
            .args(["--name", "harness", "--data-dir"])
            .arg(self.dir.path().join("data"))
            .args(["--listen-client-urls", &self.endpoint()])
            .args(["--advertise-client-urls", &self.endpoint()])
            .args(["--listen-peer-urls", &peer])
            .args(["--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &format!("harness={peer}")])
            .arg("--experimental-watch-progress-notify-interval=500ms")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start etcd: {e}"))?;
        self.child = Some(child);
        // Wait until it accepts connections (bounded: 200 × 50 ms).
        for _ in 0..200 {
            if std::net::TcpStream::connect(("127.0.0.1", self.client_port)).is_ok() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err("etcd did not start".to_owned())
    }

    fn signal(&self, signal: &str) {
        if let Some(child) = &self.child {
            let _ = Command::new("kill")
                .args([signal, &child.id().to_string()])
                .status();
        }
    }

    /// SIGSTOP.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// SIGCONT.
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    /// SIGKILL, then run `offline` against the same data served on another client port (so
    /// nothing that knows the usual port can reach it), then SIGKILL again and start on the
    /// usual ports. `offline` gets the temporary endpoint: what it writes or compacts happens
    /// while every usual client is disconnected.
    ///
    /// # Errors
    /// etcd cannot start on either port.
    pub fn offline<T>(&mut self, offline: impl FnOnce(&str) -> T) -> Result<T, String> {
        self.stop();
        let usual = self.client_port;
        self.client_port = restartable_port();
        let started = self.spawn();
        let result = started.map(|()| offline(&self.endpoint()));
        self.stop();
        self.client_port = usual;
        self.spawn()?;
        result
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGKILL, then start again on the same data and ports.
    ///
    /// # Errors
    /// It cannot start again.
    pub fn kill_and_restart(&mut self) -> Result<(), String> {
        self.stop();
        self.spawn()
    }
}

impl Drop for OwnEtcd {
    fn drop(&mut self) {
        self.stop();
    }
}

/// How the harness's three-member cluster is started.
#[derive(Clone, Debug)]
pub struct ClusterOptions {
    /// Client port of member 0 (members 1 and 2 use the next two); `None` picks free ports.
    pub client_port: Option<u16>,
    /// Peer port of member 0 (the next two for members 1 and 2); `None` picks free ports.
    pub peer_port: Option<u16>,
    /// `--heartbeat-interval`, milliseconds.
    pub heartbeat_ms: u64,
    /// `--election-timeout`, milliseconds: how long a follower waits without hearing from the
    /// leader before it calls an election.
    pub election_ms: u64,
    /// Start etcd with `--experimental-watch-progress-notify-interval=500ms`.
    pub progress_notify: bool,
}

impl Default for ClusterOptions {
    fn default() -> Self {
        ClusterOptions {
            client_port: None,
            peer_port: None,
            heartbeat_ms: 50,
            election_ms: 500,
            progress_notify: true,
        }
    }
}

#[derive(Debug)]
struct Member {
    name: String,
    client_port: u16,
    peer_port: u16,
    child: Option<Child>,
}

/// A three-member etcd cluster of the harness's own on loopback (static `--initial-cluster`,
/// each member's data under one temporary directory on /dev/shm), whose members fault runs
/// kill (SIGKILL), restart on their data, pause (SIGSTOP) and resume (SIGCONT).
#[derive(Debug)]
pub struct EtcdCluster {
    binary: PathBuf,
    dir: tempfile::TempDir,
    options: ClusterOptions,
    members: Vec<Member>,
}

/// The number of members of [`EtcdCluster`].
pub const MEMBERS: usize = 3;

impl EtcdCluster {
    /// Starts the three members from `ETCD_BINARY` and waits until each accepts connections
    /// (bounded).
    ///
    /// # Errors
    /// `ETCD_BINARY` is unset, a port is taken, or a member cannot start.
    pub fn start(options: ClusterOptions) -> Result<EtcdCluster, String> {
        let binary = std::env::var_os("ETCD_BINARY")
            .ok_or("ETCD_BINARY is not set: run the suite with scripts/test, which sets it")?;
        let shm = std::path::Path::new("/dev/shm");
        let dir = tempfile::Builder::new()
            .prefix("watchkeeper-harness-cluster.")
            .tempdir_in(if shm.is_dir() {
                shm.to_path_buf()
            } else {
                std::env::temp_dir()
            })
            .map_err(|e| format!("temporary directory: {e}"))?;
        let mut members = Vec::new();
        for i in 0..MEMBERS {
            let port =
                |base: Option<u16>| base.map_or_else(restartable_port, |base| base + i as u16);
            members.push(Member {
                name: format!("m{i}"),
                client_port: port(options.client_port),
                peer_port: port(options.peer_port),
                child: None,
            });
        }
        let mut cluster = EtcdCluster {
            binary: binary.into(),
            dir,
            options,
            members,
        };
        for i in 0..MEMBERS {
            cluster.spawn(i)?;
        }
        for i in 0..MEMBERS {
            cluster.wait_listening(i)?;
        }
        Ok(cluster)
    }

    /// Every member's client URL.
    #[must_use]
    pub fn endpoints(&self) -> Vec<String> {
        (0..MEMBERS).map(|i| self.endpoint(i)).collect()
    }

    /// Member `i`'s client URL.
    #[must_use]
    pub fn endpoint(&self, i: usize) -> String {
        format!("http://127.0.0.1:{}", self.members[i].client_port)
    }

    fn spawn(&mut self, i: usize) -> Result<(), String> {
        let initial = self
            .members
            .iter()
            .map(|m| format!("{}=http://127.0.0.1:{}", m.name, m.peer_port))
            .collect::<Vec<_>>()
            .join(",");
        let endpoint = self.endpoint(i);
        let m = &self.members[i];
        let peer = format!("http://127.0.0.1:{}", m.peer_port);
        let mut command = Command::new(&self.binary);
        command
            .args(["--name", &m.name, "--data-dir"])
            .arg(self.dir.path().join(&m.name))
            .args(["--listen-client-urls", &endpoint])
            .args(["--advertise-client-urls", &endpoint])
            .args(["--listen-peer-urls", &peer])
            .args(["--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &initial])
            .args(["--initial-cluster-state", "new"])
            .args(["--initial-cluster-token", "watchkeeper-harness"])
            .arg(format!(
                "--heartbeat-interval={}",
                self.options.heartbeat_ms
            ))
            .arg(format!("--election-timeout={}", self.options.election_ms))
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if self.options.progress_notify {
            command.arg("--experimental-watch-progress-notify-interval=500ms");
        }
        let child = command
            .spawn()
            .map_err(|e| format!("cannot start etcd member {i}: {e}"))?;
        self.members[i].child = Some(child);
        Ok(())
    }

    fn wait_listening(&mut self, i: usize) -> Result<(), String> {
        // Bounded: 200 × 50 ms.
        for _ in 0..200 {
            if std::net::TcpStream::connect(("127.0.0.1", self.members[i].client_port)).is_ok() {
                return Ok(());
            }
            if let Some(child) = self.members[i].child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                return Err(format!("etcd member {i} exited: {status}"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(format!("etcd member {i} did not start"))
    }

    fn signal(&self, i: usize, signal: &str) {
        if let Some(child) = &self.members[i].child {
            let _ = Command::new("kill")
                .args([signal, &child.id().to_string()])
                .status();
        }
    }

    /// SIGSTOP member `i`.
    pub fn pause(&self, i: usize) {
        self.signal(i, "-STOP");
    }

    /// SIGCONT member `i`.
    pub fn resume(&self, i: usize) {
        self.signal(i, "-CONT");
    }

    /// SIGKILL member `i` (it stays down until [`EtcdCluster::restart`]).
    pub fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.members[i].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts member `i` again on its data and ports, and waits until it accepts connections.
    ///
    /// # Errors
    /// It cannot start.
    pub fn restart(&mut self, i: usize) -> Result<(), String> {
        self.kill(i);
        self.spawn(i)?;
        self.wait_listening(i)
    }

    /// The leader as the members that answer see it, found with etcd's maintenance status
    /// API: the index of the member whose id is the leader id reported by a majority of the
    /// members asked. `None` when no majority agrees (an election is under way).
    pub async fn leader(&self, asked: &[usize]) -> Option<usize> {
        let mut ids = [None; MEMBERS];
        let mut votes: BTreeMap<u64, usize> = BTreeMap::new();
        for &i in asked {
            let Some((id, leader)) = status(&self.endpoint(i)).await else {
                continue;
            };
            ids[i] = Some(id);
            if leader != 0 {
                *votes.entry(leader).or_default() += 1;
            }
        }
        let (&leader, _) = votes.iter().find(|(_, n)| **n * 2 > MEMBERS)?;
        // The leader's own id, if it was asked; otherwise ask every member for its id.
        if let Some(i) = ids.iter().position(|id| *id == Some(leader)) {
            return Some(i);
        }
        for i in 0..MEMBERS {
            if let Some((id, _)) = status(&self.endpoint(i)).await
                && id == leader
            {
                return Some(i);
            }
        }
        None
    }

    /// Polls [`EtcdCluster::leader`] among `asked` until a majority agrees on one (bounded:
    /// 400 × 25 ms).
    pub async fn wait_leader(&self, asked: &[usize]) -> Option<usize> {
        for _ in 0..400 {
            if let Some(leader) = self.leader(asked).await {
                return Some(leader);
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        None
    }
}

/// `(member id, leader id)` from the status API of the member at `endpoint` (a client bound
/// to that endpoint only), or `None` when it does not answer within a second.
async fn status(endpoint: &str) -> Option<(u64, u64)> {
    let ask = async {
        let mut config = watchkeeper_store::EtcdConfig::new([endpoint]);
        config.connect_timeout = Duration::from_millis(500);
        let store = watchkeeper_store::EtcdStore::connect(config).await.ok()?;
        let status = store.client().maintenance_client().status().await.ok()?;
        Some((status.header()?.member_id(), status.leader()))
    };
    tokio::time::timeout(Duration::from_secs(1), ask)
        .await
        .ok()
        .flatten()
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        for i in 0..MEMBERS {
            self.resume(i);
            self.kill(i);
        }
    }
}

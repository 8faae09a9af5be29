//! A private etcd for one test, started from `ETCD_BINARY` (scripts/test sets it; a test that
//! needs one fails without it rather than skipping), with etcd's defaults (progress
//! notifications every 10 minutes, as etcd_progress.rs needs) and the flags the test asks for:
//! a small `--quota-backend-bytes` (quota.rs). Killed when dropped.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use super::HANG_GUARD;

/// The flags that differ between the tests' etcds.
#[derive(Clone, Copy, Debug, Default)]
pub struct EtcdFlags {
    /// `--quota-backend-bytes`, if set.
    pub quota_bytes: Option<u64>,
}

/// A running etcd.
pub struct OwnEtcd {
    child: Child,
    _dir: tempfile::TempDir,
    /// Its client URL.
    pub endpoint: String,
}

impl OwnEtcd {
    /// Starts one and waits until it serves.
    pub fn start(flags: EtcdFlags) -> OwnEtcd {
        let binary = std::env::var_os("ETCD_BINARY")
            .expect("ETCD_BINARY is not set: run the suite with scripts/test, which sets it");
        let dir = tempfile::Builder::new()
            .prefix("watchkeeper-test-etcd.")
            .tempdir_in("/dev/shm")
            .unwrap();
        let port = watchkeeper_testkit::ports::restartable_port;
        let endpoint = format!("http://127.0.0.1:{}", port());
        let peer = format!("http://127.0.0.1:{}", port());
        let mut command = Command::new(binary);
        command
            .args(["--name", "own", "--data-dir"])
            .arg(dir.path().join("data"))
            .args(["--listen-client-urls", &endpoint])
            .args(["--advertise-client-urls", &endpoint])
            .args(["--listen-peer-urls", &peer])
            .args(["--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &format!("own={peer}")]);
        if let Some(quota) = flags.quota_bytes {
            command.args(["--quota-backend-bytes", &quota.to_string()]);
        }
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("cannot start etcd (ETCD_BINARY)");
        let stderr = child.stderr.take().unwrap();
        let (ready, wait) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut log = Vec::new();
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if line.contains("ready to serve client requests") {
                    let _ = ready.send(Ok(()));
                }
                log.push(line);
            }
            let _ = ready.send(Err(log.join("\n")));
        });
        match wait.recv_timeout(HANG_GUARD) {
            Ok(Ok(())) => {}
            Ok(Err(log)) => panic!("etcd exited before it was ready:\n{log}"),
            Err(_) => panic!("etcd was not ready within {HANG_GUARD:?}"),
        }
        OwnEtcd {
            child,
            _dir: dir,
            endpoint,
        }
    }
}

impl Drop for OwnEtcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

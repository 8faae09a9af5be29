//! An etcd of the harness's own (never the shared one): a child process of `ETCD_BINARY` on
//! free loopback ports with its data under /dev/shm, which fault tests may pause (SIGSTOP /
//! SIGCONT), kill (SIGKILL) and restart on the same data.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A private etcd.
#[derive(Debug)]
pub struct OwnEtcd {
    binary: PathBuf,
    dir: tempfile::TempDir,
    client_port: u16,
    peer_port: u16,
    child: Option<Child>,
}

fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
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
            client_port: free_port().map_err(|e| e.to_string())?,
            peer_port: free_port().map_err(|e| e.to_string())?,
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
        self.client_port = free_port().map_err(|e| e.to_string())?;
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

//! An etcd process for tests: started from `ETCD_BINARY` on given loopback ports and data
//! directory, serving its clients over plain HTTP or (with its TLS flags among the extra
//! arguments) HTTPS, returned once its log says it serves clients.
//!
//! This file has no dependencies: the store's tests include it by path (the store cannot
//! depend on the test kit, which depends on the server), as [`crate::ports`].

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Starts etcd named `name` with its data in `data_dir`, clients on `client_port` and peers on
/// `peer_port` (loopback), with `extra` arguments, and waits (on its log, at most `guard`)
/// until it serves clients.
///
/// # Panics
/// `ETCD_BINARY` is not set (scripts/test sets it; a test that needs etcd fails without it
/// rather than skipping), etcd cannot be started, exits first, or is not ready in `guard`.
#[must_use]
pub fn start_etcd(
    name: &str,
    data_dir: &Path,
    ports: (u16, u16),
    extra: &[String],
    guard: Duration,
) -> Child {
    start_etcd_serving("http", name, data_dir, ports, extra, guard)
}

/// [`start_etcd`] with its clients served over `scheme`: `http`, or `https` with etcd's
/// `--cert-file` and `--key-file` (and `--client-cert-auth --trusted-ca-file` to ask for
/// client certificates) in `extra`.
///
/// # Panics
/// As [`start_etcd`].
#[must_use]
pub fn start_etcd_serving(
    scheme: &str,
    name: &str,
    data_dir: &Path,
    (client_port, peer_port): (u16, u16),
    extra: &[String],
    guard: Duration,
) -> Child {
    let binary = std::env::var_os("ETCD_BINARY").expect(
        "ETCD_BINARY is not set: tests that need an etcd of their own start it; run scripts/test, which sets it",
    );
    let client = format!("{scheme}://127.0.0.1:{client_port}");
    let peer = format!("http://127.0.0.1:{peer_port}");
    let mut child = Command::new(binary)
        .args(["--name", name, "--data-dir"])
        .arg(data_dir)
        .args(["--listen-client-urls", &client])
        .args(["--advertise-client-urls", &client])
        .args(["--listen-peer-urls", &peer])
        .args(["--initial-advertise-peer-urls", &peer])
        .args(["--initial-cluster", &format!("{name}={peer}")])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot start etcd (ETCD_BINARY)");
    let stderr = child.stderr.take().expect("etcd's log");
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
    match wait.recv_timeout(guard) {
        Ok(Ok(())) => child,
        Ok(Err(log)) => panic!("etcd exited before it was ready:\n{log}"),
        Err(_) => panic!("etcd was not ready within {guard:?}"),
    }
}

//! A private etcd for one test, started from `ETCD_BINARY` (scripts/test sets it; a test that
//! needs one fails without it rather than skipping), with etcd's defaults (progress
//! notifications every 10 minutes, as etcd_progress.rs needs) and the flags the test asks for:
//! a small `--quota-backend-bytes` (quota.rs), TLS with client certificates (etcd_tls.rs).
//! Killed when dropped; it can be killed and started again on its ports and data.

use std::path::PathBuf;
use std::process::Child;

use watchkeeper::config::ServeArgs;

use super::HANG_GUARD;

/// The suite's shared etcd (scripts/test starts it and sets `WATCHKEEPER_TEST_ETCD`; a test
/// that needs it fails without it rather than skipping).
pub fn shared_endpoint() -> String {
    std::env::var("WATCHKEEPER_TEST_ETCD").expect(
        "WATCHKEEPER_TEST_ETCD is not set: run the suite with scripts/test, which starts etcd",
    )
}

/// A key prefix no other test or run uses, so tests share the etcd without seeing each
/// other's objects.
pub fn fresh_prefix() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("/t{nanos:x}{:x}/registry", std::process::id())
}

/// `etcdctl put key value` against the test etcd (a write that bypasses the server).
pub async fn etcdctl_put(key: &str, value: &str) {
    etcdctl(&["put", key, value]).await;
}

/// `etcdctl del key` against the test etcd (a delete that bypasses the server).
pub async fn etcdctl_del(key: &str) {
    etcdctl(&["del", key]).await;
}

async fn etcdctl(args: &[&str]) {
    let endpoint = shared_endpoint();
    let output = tokio::process::Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .args(["--endpoints", &endpoint])
        .args(args)
        .output()
        .await
        .expect("etcdctl runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// An instance's arguments over the shared etcd under `prefix` (instances given the same
/// prefix are siblings over one registry).
pub fn shared_args(prefix: &str) -> ServeArgs {
    ServeArgs {
        store: Some("etcd".into()),
        etcd_endpoints: Some(vec![shared_endpoint()]),
        etcd_prefix: Some(prefix.to_owned()),
        ..ServeArgs::default()
    }
}

/// The flags that differ between the tests' etcds.
#[derive(Clone, Debug, Default)]
pub struct EtcdFlags {
    /// `--quota-backend-bytes`, if set.
    pub quota_bytes: Option<u64>,
    /// Serve clients over TLS: etcd's `--cert-file` and `--key-file`, and the CA of the client
    /// certificates it asks for (`--client-cert-auth --trusted-ca-file`).
    pub tls: Option<EtcdTlsFiles>,
}

/// The PEM files of an etcd serving TLS.
#[derive(Clone, Debug)]
pub struct EtcdTlsFiles {
    /// Its serving certificate.
    pub cert: PathBuf,
    /// Its key.
    pub key: PathBuf,
    /// The CA its clients' certificates must be signed by.
    pub client_ca: PathBuf,
}

/// A running etcd.
pub struct OwnEtcd {
    child: Option<Child>,
    dir: tempfile::TempDir,
    ports: (u16, u16),
    scheme: &'static str,
    extra: Vec<String>,
    /// Its client URL.
    pub endpoint: String,
}

impl OwnEtcd {
    /// Starts one and waits until it serves.
    pub fn start(flags: EtcdFlags) -> OwnEtcd {
        let dir = tempfile::Builder::new()
            .prefix("watchkeeper-test-etcd.")
            .tempdir_in("/dev/shm")
            .unwrap();
        let port = watchkeeper_testkit::ports::restartable_port;
        let ports = (port(), port());
        let mut extra: Vec<String> = flags
            .quota_bytes
            .map(|quota| vec!["--quota-backend-bytes".to_owned(), quota.to_string()])
            .unwrap_or_default();
        let scheme = match &flags.tls {
            Some(tls) => {
                for (flag, path) in [
                    ("--cert-file", &tls.cert),
                    ("--key-file", &tls.key),
                    ("--trusted-ca-file", &tls.client_ca),
                ] {
                    extra.extend([flag.to_owned(), path.display().to_string()]);
                }
                extra.push("--client-cert-auth".to_owned());
                "https"
            }
            None => "http",
        };
        let mut etcd = OwnEtcd {
            child: None,
            dir,
            ports,
            scheme,
            extra,
            endpoint: format!("{scheme}://127.0.0.1:{}", ports.0),
        };
        etcd.spawn();
        etcd
    }

    fn spawn(&mut self) {
        self.child = Some(watchkeeper_testkit::etcd_process::start_etcd_serving(
            self.scheme,
            "own",
            &self.dir.path().join("data"),
            self.ports,
            &self.extra,
            HANG_GUARD,
        ));
    }

    /// SIGKILL.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Kills it and starts it again on the same ports and data; returns once it serves.
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }
}

impl Drop for OwnEtcd {
    fn drop(&mut self) {
        self.kill();
    }
}

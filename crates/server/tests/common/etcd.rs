//! A private etcd for one test, started from `ETCD_BINARY` (scripts/test sets it; a test that
//! needs one fails without it rather than skipping), with etcd's defaults (progress
//! notifications every 10 minutes, as etcd_progress.rs needs) and the flags the test asks for:
//! a small `--quota-backend-bytes` (quota.rs). Killed when dropped.

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
        let dir = tempfile::Builder::new()
            .prefix("watchkeeper-test-etcd.")
            .tempdir_in("/dev/shm")
            .unwrap();
        let port = watchkeeper_testkit::ports::restartable_port;
        let ports = (port(), port());
        let extra: Vec<String> = flags
            .quota_bytes
            .map(|quota| vec!["--quota-backend-bytes".to_owned(), quota.to_string()])
            .unwrap_or_default();
        let child = watchkeeper_testkit::etcd_process::start_etcd(
            "own",
            &dir.path().join("data"),
            ports,
            &extra,
            HANG_GUARD,
        );
        OwnEtcd {
            child,
            _dir: dir,
            endpoint: format!("http://127.0.0.1:{}", ports.0),
        }
    }
}

impl Drop for OwnEtcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

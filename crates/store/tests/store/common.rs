//! Test helpers: etcd endpoints and child etcd processes, unique prefixes, watch reading
//! with hang guards.

use std::path::PathBuf;
use std::process::Child;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use watchkeeper_store::{
    EmbeddedConfig, EmbeddedStore, EtcdConfig, EtcdStore, Event, MemoryConfig, MemoryStore, Watch,
    WatchItem,
};

/// Generous hang guard for anything awaited in a test.
pub(crate) const HANG_GUARD: Duration = Duration::from_secs(30);

/// The shared test etcd started by `scripts/test`.
pub(crate) fn shared_etcd() -> String {
    std::env::var("WATCHKEEPER_TEST_ETCD").unwrap_or_else(|_| {
        panic!(
            "WATCHKEEPER_TEST_ETCD is not set: the etcd tests need a running etcd; \
             run scripts/test, which starts one and sets it"
        )
    })
}

/// The etcd binary for tests that run their own etcd.
pub(crate) fn etcd_binary() -> String {
    std::env::var("ETCD_BINARY").unwrap_or_else(|_| {
        panic!(
            "ETCD_BINARY is not set: tests that restart or compact etcd start their own; \
             run scripts/test, which sets it"
        )
    })
}

/// A key prefix no other test (or earlier run against the same etcd) uses.
pub(crate) fn unique_prefix(test: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "/wk-store-test/{test}/{}-{nanos}-{}/",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// `prefix + suffix` as bytes.
pub(crate) fn k(prefix: &str, suffix: &str) -> Bytes {
    Bytes::from(format!("{prefix}{suffix}"))
}

/// Keeps whatever a store needs alive (temp dir, child etcd).
pub(crate) type Guard = Box<dyn std::any::Any + Send>;

pub(crate) async fn memory() -> (MemoryStore, Guard) {
    (
        MemoryStore::new(MemoryConfig::default()).unwrap(),
        Box::new(()),
    )
}

pub(crate) async fn embedded() -> (EmbeddedStore, Guard) {
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedStore::open(EmbeddedConfig::new(dir.path())).unwrap();
    (store, Box::new(dir))
}

pub(crate) async fn etcd_shared() -> (EtcdStore, Guard) {
    let store = EtcdStore::connect(EtcdConfig::new([shared_etcd()]))
        .await
        .unwrap();
    (store, Box::new(()))
}

pub(crate) async fn etcd_child() -> (EtcdStore, Guard) {
    let child = EtcdChild::start(&[]);
    let store = EtcdStore::connect(test_etcd_config(&child.endpoint()))
        .await
        .unwrap();
    (store, Box::new(child))
}

/// Fast reconnects for tests.
pub(crate) fn test_etcd_config(endpoint: &str) -> EtcdConfig {
    let mut c = EtcdConfig::new([endpoint]);
    c.reconnect_backoff_initial = Duration::from_millis(50);
    c.reconnect_backoff_max = Duration::from_millis(500);
    c.request_timeout = Duration::from_secs(10);
    c
}

/// The test kit's ports, which etcd can be killed and restarted on (included by path: the
/// store cannot depend on the kit, which depends on the server).
#[path = "../../../testkit/src/ports.rs"]
#[allow(unreachable_pub)]
mod ports;

/// The test kit's etcd starter (included by path, as `ports`).
#[path = "../../../testkit/src/etcd_process.rs"]
#[allow(unreachable_pub, dead_code)]
mod etcd_process;

/// An etcd child process on free loopback ports with its data under /dev/shm.
pub(crate) struct EtcdChild {
    child: Option<Child>,
    dir: PathBuf,
    client_port: u16,
    peer_port: u16,
    extra: Vec<String>,
}

impl EtcdChild {
    pub(crate) fn start(extra: &[&str]) -> Self {
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = PathBuf::from(format!(
            "/dev/shm/wk-store-etcd-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let mut me = Self {
            child: None,
            dir,
            client_port: ports::restartable_port(),
            peer_port: ports::restartable_port(),
            extra: extra.iter().map(|s| s.to_string()).collect(),
        };
        me.spawn();
        me
    }

    pub(crate) fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.client_port)
    }

    /// Starts etcd and waits (event-driven, on its log) until it serves clients.
    fn spawn(&mut self) {
        self.child = Some(etcd_process::start_etcd(
            "wk-test",
            &self.dir,
            (self.client_port, self.peer_port),
            &self.extra,
            HANG_GUARD,
        ));
    }

    /// SIGKILL, then start again on the same ports and data.
    pub(crate) fn kill_and_restart(&mut self) {
        self.kill();
        self.spawn();
    }

    pub(crate) fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for EtcdChild {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The next watch item, failing the test on a hang or end of stream.
pub(crate) async fn next_item(w: &mut Watch) -> WatchItem {
    match tokio::time::timeout(HANG_GUARD, w.next()).await {
        Ok(Some(item)) => item,
        Ok(None) => panic!("watch ended unexpectedly"),
        Err(_) => panic!("no watch item within {HANG_GUARD:?}"),
    }
}

/// The next revision item, skipping progress notifications.
pub(crate) async fn next_revision(w: &mut Watch) -> (u64, Vec<Event>) {
    loop {
        match next_item(w).await {
            WatchItem::Revision { revision, events } => return (revision, events),
            WatchItem::Progress { .. } => continue,
            other => panic!("expected a revision, got {other:?}"),
        }
    }
}

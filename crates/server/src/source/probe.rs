//! The store's health for `/livez` and `/readyz` (`http::health`): a read of the store's current
//! revision within [`PROBE_TIMEOUT`], at most once per [`PROBE_EVERY`] whatever the number of
//! probing clients (a result younger than that is shared; concurrent requests wait for the
//! probe in flight), as kube-apiserver rate-limits its etcd probe.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use watchkeeper_store::AnyStore;

/// How long a store probe may take before the check fails (kube-apiserver's
/// `--etcd-healthcheck-timeout` default).
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// The shortest time between two store probes; requests in between share the last result.
pub const PROBE_EVERY: Duration = Duration::from_secs(1);

/// The store probe's last result, shared by every health request.
#[derive(Debug, Default)]
pub struct StoreProbe {
    last: Mutex<Option<(Instant, Result<(), String>)>>,
    /// Held while a probe runs: concurrent requests wait for it and take its result.
    running: tokio::sync::Mutex<()>,
}

impl StoreProbe {
    fn fresh(&self) -> Option<Result<(), String>> {
        let last = self
            .last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        last.as_ref()
            .filter(|(at, _)| at.elapsed() < PROBE_EVERY)
            .map(|(_, result)| result.clone())
    }

    /// The store's health: the last probe's if it is younger than [`PROBE_EVERY`], else a new
    /// probe's.
    pub(crate) async fn check(&self, store: &AnyStore) -> Result<(), String> {
        if let Some(result) = self.fresh() {
            return result;
        }
        let _running = self.running.lock().await;
        if let Some(result) = self.fresh() {
            return result;
        }
        let probe = watchkeeper_store::Store::current_revision(store);
        let result = match tokio::time::timeout(PROBE_TIMEOUT, probe).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(error)) => Err(error.to_string()),
            Err(_) => Err(format!(
                "the store did not answer within {} s",
                PROBE_TIMEOUT.as_secs()
            )),
        };
        *self
            .last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) =
            Some((Instant::now(), result.clone()));
        result
    }
}

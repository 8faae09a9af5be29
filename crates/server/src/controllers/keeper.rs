//! The keeper of kube-apiserver's own objects while serving: what kube-apiserver creates
//! again when a client deletes it — the `default/kubernetes` Service, Endpoints and
//! EndpointSlice (its kubernetes-service controller reconciles them every 10 s) and API
//! Priority and Fairness' configuration, mandatory and suggested (its config-producer) — is
//! created again here as soon as the reflector tells of its deletion
//! ([`crate::bootstrap::kept`], [`crate::bootstrap::restore_kept`]); a change to a
//! flow-control object of the configuration has it revised by kube's ensurer rules
//! ([`crate::limits::apf::bootstrap`]: a mandatory spec is put back, a suggested one while
//! it is annotated to auto-update).
//!
//! ## Guarantees
//! - Writes only where the object is absent (the bootstrap's compare-and-put), so an edited
//!   object is never overwritten and several servers over one etcd create it once.
//! - A failed write is tried again after a delay that doubles with each failure in a row
//!   ([`RETRY_BASE`] to [`RETRY_MAX`]).
//!
//! ## Bounds
//! Holds one flag: whether a look is due.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;
use watchkeeper_api::ResourceDef;
use watchkeeper_core::{Change, Object, Revision};
use watchkeeper_store::AnyStore;

use super::Retries;
use crate::source::feed::Observer;

/// The first wait after a failed write; doubled with each failure in a row.
pub const RETRY_BASE: Duration = Duration::from_millis(5);

/// The longest wait between two tries (kube's reconciler looks every 10 s).
pub const RETRY_MAX: Duration = Duration::from_secs(10);

/// Where the kept objects are written and what they say.
#[derive(Clone, Debug)]
pub struct Kept {
    /// The store.
    pub store: AnyStore,
    /// Its key prefix (`/registry`).
    pub prefix: String,
    /// `--service-cluster-ip-range` (the `kubernetes` Service's ClusterIP is the first's
    /// first address; the `kubernetes` ServiceCIDR holds them all).
    pub ranges: Vec<crate::config::IpRange>,
    /// The address its Endpoints name.
    pub server: SocketAddr,
}

/// The keeper (see the module docs).
#[derive(Debug, Default)]
pub struct Keeper {
    due: AtomicBool,
    wake: Notify,
}

impl Keeper {
    /// A keeper with nothing to do yet.
    #[must_use]
    pub fn new() -> Arc<Keeper> {
        Arc::default()
    }

    /// Runs the keeper until `shutdown` turns true.
    pub async fn run(self: Arc<Self>, kept: Kept, shutdown: tokio::sync::watch::Receiver<bool>) {
        super::until_shutdown(self.clone().keep(kept), shutdown).await;
    }

    async fn keep(self: Arc<Self>, kept: Kept) {
        let mut retries: Retries<()> = Retries::new(RETRY_BASE, RETRY_MAX);
        loop {
            retries.wait(&self.wake).await;
            let retry = !retries.take_due(Instant::now()).is_empty();
            if !self.due.swap(false, Ordering::AcqRel) && !retry {
                continue;
            }
            let restored = crate::bootstrap::restore_kept(
                &kept.store,
                &kept.prefix,
                &kept.ranges,
                kept.server,
            )
            .await;
            match restored {
                Ok(()) => retries.forget(&()),
                Err(error) => {
                    tracing::debug!(%error, "re-creating kube-apiserver's objects failed; retrying");
                    retries.failed((), Instant::now());
                }
            }
        }
    }

    fn wake_for(&self, def: &ResourceDef, key: &str) {
        let (namespace, name) = key.split_once('/').unwrap_or(("", key));
        if crate::bootstrap::kept(&def.group, &def.plural, namespace, name) {
            self.due.store(true, Ordering::Release);
            self.wake.notify_one();
        }
    }
}

impl Observer for Keeper {
    fn reset(&self, def: &ResourceDef, _revision: Revision, objects: &[Arc<Object>]) {
        // A relist may follow a deletion the keeper was not told of.
        let configured = crate::limits::apf::bootstrap::configuration();
        let keys = std::iter::once("default/kubernetes").chain(configured.iter().map(|w| w.name));
        for key in keys {
            if !objects.iter().any(|o| &**o.key() == key) {
                self.wake_for(def, key);
            }
        }
    }

    fn changes(&self, def: &ResourceDef, _revision: Revision, changes: &[Change]) {
        for change in changes {
            if change.object.is_none() || def.group == crate::limits::apf::GROUP {
                // Gone, or a flow-control object changed: to create, or revise, again.
                self.wake_for(def, &change.key);
            }
        }
    }
}

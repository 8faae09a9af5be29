//! The server's own controllers: what kube-controller-manager would do for objects no one
//! else acts on, for a server over a store (never in caching-proxy mode, where the upstream
//! cluster's controllers run). They read the caches and write through the ordinary write
//! path ([`crate::source::store::StoreSource`]), as a client would.

pub mod garbage_collector;
pub mod namespaces;

use std::sync::Arc;

use watchkeeper_api::ResourceDef;
use watchkeeper_core::{Change, Object, Revision};

use crate::source::feed::Observer;

/// What a controller's task works with: the store it writes through (the ordinary write
/// path), the served resources whose caches it reads, and how it waits for them.
#[derive(Clone, Debug)]
pub struct Context {
    /// The store source (writes).
    pub source: crate::source::store::StoreSource,
    /// The served resources (reads).
    pub registry: Arc<crate::cache::Registry>,
    /// How reads wait for the caches.
    pub fresh: crate::source::read::Freshness,
}

/// Runs a controller's `work` until `shutdown` turns true.
pub(crate) async fn until_shutdown(
    work: impl std::future::Future<Output = ()>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    tokio::select! {
        () = work => {}
        _ = shutdown.wait_for(|down| *down) => {}
    }
}

/// Several observers told in turn (the reflector tells one).
#[derive(Debug)]
pub struct Observers(pub Vec<Arc<dyn Observer>>);

impl Observer for Observers {
    fn reset(&self, def: &ResourceDef, revision: Revision, objects: &[Arc<Object>]) {
        for observer in &self.0 {
            observer.reset(def, revision, objects);
        }
    }

    fn changes(&self, def: &ResourceDef, revision: Revision, changes: &[Change]) {
        for observer in &self.0 {
            observer.changes(def, revision, changes);
        }
    }
}

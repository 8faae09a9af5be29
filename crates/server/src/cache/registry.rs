//! The resources served now: a registry that can change while the server serves.
//!
//! ## Guarantees
//! - A reader takes one consistent view ([`Registry::load`]: an `Arc` of the resources and
//!   their definitions, in the order they were added) and keeps it for its request; a change
//!   builds a new view and swaps it in, so readers never wait on a writer for more than the
//!   swap and never see half a change.
//! - Changes come from one place, the store reflection, as CustomResourceDefinitions come and
//!   go ([`crate::source::catalog`]); discovery, routing, the debug view and `/metrics` read
//!   the current view. A resource taken out is marked removed ([`Resource::mark_removed`]);
//!   the catalog then has its cache end the open watches, each after every event it was owed
//!   (a watcher still catching up from the history included), with an in-stream error; its
//!   cache threads stop when the last request holding it finishes.
//! - Built-in resources and `--resources` definitions are never taken out.

use std::any::Any;
use std::sync::{Arc, OnceLock, RwLock};

use watchkeeper_api::ResourceDef;

use crate::cache::Resource;

/// One view of the served resources.
#[derive(Debug, Default)]
pub struct Served {
    /// The served resources.
    pub resources: Vec<Arc<Resource>>,
    /// Their definitions, in the same order (for discovery and OpenAPI).
    pub defs: Vec<ResourceDef>,
    /// What another layer derives from this view and keeps while it is held (the OpenAPI
    /// documents, `http::openapi`): dropped with the view, so nothing derived from resources
    /// no longer served outlives the requests that still read them.
    pub derived: OnceLock<Box<dyn Any + Send + Sync>>,
}

impl Served {
    fn of(resources: Vec<Arc<Resource>>) -> Served {
        let defs = resources.iter().map(|r| r.def.clone()).collect();
        Served {
            resources,
            defs,
            derived: OnceLock::new(),
        }
    }

    /// The resource served at `group`/`version` as `plural`.
    #[must_use]
    pub fn find(&self, group: &str, version: &str, plural: &str) -> Option<&Arc<Resource>> {
        self.resources
            .iter()
            .find(|r| r.def.group == group && r.def.version == version && r.def.plural == plural)
    }
}

impl std::ops::Deref for Served {
    type Target = [Arc<Resource>];

    fn deref(&self) -> &[Arc<Resource>] {
        &self.resources
    }
}

/// The served resources (see the module docs).
#[derive(Debug)]
pub struct Registry {
    served: RwLock<Arc<Served>>,
}

impl Registry {
    /// A registry serving `resources`.
    #[must_use]
    pub fn new(resources: Vec<Arc<Resource>>) -> Registry {
        Registry {
            served: RwLock::new(Arc::new(Served::of(resources))),
        }
    }

    /// The current view.
    #[must_use]
    pub fn load(&self) -> Arc<Served> {
        self.served
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    fn change(&self, change: impl FnOnce(&mut Vec<Arc<Resource>>)) {
        let mut served = self
            .served
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut resources = served.resources.clone();
        change(&mut resources);
        *served = Arc::new(Served::of(resources));
    }

    /// Serves `resource` (after the others).
    pub fn insert(&self, resource: Arc<Resource>) {
        self.change(|resources| resources.push(resource));
    }

    /// Serves `resources` in place of those named `name` (at every version), in one change,
    /// and returns the replaced ones (not marked removed: they are served again by the new
    /// ones).
    pub fn replace(&self, name: &str, resources: Vec<Arc<Resource>>) -> Vec<Arc<Resource>> {
        let mut replaced = Vec::new();
        self.change(|served| {
            served.retain(|r| {
                if r.name() == name {
                    replaced.push(r.clone());
                    false
                } else {
                    true
                }
            });
            served.extend(resources);
        });
        replaced
    }

    /// Stops serving the resource named `name` (`plural.group`), at every version it is
    /// served at, and marks it removed. Returns them, the one served first (the stored
    /// version) first.
    pub fn remove(&self, name: &str) -> Vec<Arc<Resource>> {
        let mut removed = Vec::new();
        self.change(|resources| {
            resources.retain(|r| {
                if r.name() == name {
                    removed.push(r.clone());
                    false
                } else {
                    true
                }
            });
        });
        for resource in &removed {
            resource.mark_removed();
        }
        removed
    }
}

//! The caches: one watch cache per served resource, driven on real threads by a
//! [`CacheDriver`] (see [`driver`]), and the [`Resource`] that pairs it with its definition.

pub mod driver;

pub use driver::{
    CacheDriver, Clock, DriverError, DriverWaits, INPUT_CAPACITY, Input, InputSender, PassHook,
    Stopped,
};

use watchkeeper_api::ResourceDef;
use watchkeeper_core::WatchCache;

/// One served resource: its definition, cache and store prefix.
#[derive(Debug)]
pub struct Resource {
    /// The definition.
    pub def: ResourceDef,
    /// The cache and its threads.
    pub driver: CacheDriver,
    /// Store key prefix of its objects, with a trailing slash (`/registry/pods/`).
    pub key_prefix: String,
}

impl Resource {
    /// The cache.
    #[must_use]
    pub fn cache(&self) -> &WatchCache {
        &self.driver.cache
    }

    /// The store key of an object.
    #[must_use]
    pub fn store_key(&self, namespace: &str, name: &str) -> String {
        if self.def.namespaced {
            format!("{}{namespace}/{name}", self.key_prefix)
        } else {
            format!("{}{name}", self.key_prefix)
        }
    }

    /// The name the resource is reported under: its plural, with `.group` unless in the core
    /// group.
    #[must_use]
    pub fn name(&self) -> String {
        name_of(&self.def)
    }
}

/// The name a resource is reported under: its plural, with `.group` unless in the core group.
#[must_use]
pub fn name_of(def: &ResourceDef) -> String {
    if def.group.is_empty() {
        def.plural.clone()
    } else {
        format!("{}.{}", def.plural, def.group)
    }
}

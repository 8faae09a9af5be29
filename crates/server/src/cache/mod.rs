//! The caches: one watch cache per served resource, driven on real threads by a
//! [`CacheDriver`] (see [`driver`]), the [`Resource`] that pairs it with its definition, and
//! the [`Registry`] of the resources served now (see [`registry`]).

pub mod driver;
pub mod registry;
pub mod wake_relay;

pub use driver::{
    CacheDriver, Clock, DriverError, DriverWaits, INLINE_WATCHERS_MAX, INPUT_CAPACITY, Input,
    InputSender, PassHook, Relay, Stopped, ViewConvert,
};
pub use registry::{Registry, Served};

use watchkeeper_api::ResourceDef;
use watchkeeper_api::crd::CustomResource;
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
    /// Where the definition comes from.
    pub origin: Origin,
    /// What its CustomResourceDefinition says beyond the definition (schema, subresources,
    /// printer columns), for a resource a CRD serves.
    custom: std::sync::RwLock<Option<std::sync::Arc<CustomResource>>>,
    /// Set when the resource stops being served (its CRD was deleted or changed), before its
    /// cache ends its watches: a watch the cache ends for that reason ends with an in-stream
    /// 404 error rather than the clean end of a server shutdown.
    removed: std::sync::atomic::AtomicBool,
    /// Set once an object of this resource could not be encoded as protobuf (a field outside
    /// the protobuf schemas): from then on a watch that may fall back to JSON is answered in
    /// JSON, rather than ending with a 410 (and a relist) at every such object.
    protobuf_incomplete: std::sync::atomic::AtomicBool,
    /// For another version of a stored resource (`events.k8s.io/v1` Events over core
    /// Events): how its objects are stored. Its cache holds the objects at its own version,
    /// fed by the stored resource's reflection ([`InputSender::with_view`]); its key prefix is
    /// the stored resource's.
    pub conversion: Option<watchkeeper_api::versions::Conversion>,
    /// For another version of a custom resource whose CRD converts with strategy `None`: the
    /// storage version's schema. A write is pruned by it once converted to the storage
    /// version ([`Resource::stored_form`]), and its answer is the object as stored, read back
    /// at this version ([`Resource::answered_form`]), as kube's storage codec converts and
    /// prunes both ways (`schemaCoercingConverter`).
    pub storage_schema: Option<std::sync::Arc<serde_json::Value>>,
    /// For another version of a custom resource whose CRD converts with a webhook: the
    /// conversion (its cache is fed through it, its writes and reads call it).
    pub webhook: Option<std::sync::Arc<dyn ConvertedView>>,
    /// For the storage version of a custom resource whose objects may be stored at earlier
    /// versions, converted by its CRD's webhook: the conversion to the storage version and
    /// the cache of the objects as stored that feeds it (`webhook::conversion`).
    pub earlier_stored: Option<EarlierStored>,
}

/// The storage version's side of a CRD whose objects may be stored at earlier versions
/// (see [`Resource::earlier_stored`]).
#[derive(Debug)]
pub struct EarlierStored {
    /// The conversion of the objects as stored into the storage version's cache.
    pub view: std::sync::Arc<dyn ConvertedView>,
    /// The cache of the objects as stored (not served), which the reflector feeds.
    pub driver: CacheDriver,
}

/// A version of a custom resource converted from the storage version by its CRD's
/// conversion webhook (implemented by `source::webhook::conversion`).
pub trait ConvertedView: Send + Sync + std::fmt::Debug {
    /// Why the version cannot be read now: its feed's last conversion failed (kube's 500,
    /// `conversion webhook for ... failed: ...`); `None` while it converts.
    fn failure(&self) -> Option<watchkeeper_api::ApiError>;

    /// `objects` (of this version or the storage version) converted to `desired`, in order,
    /// in as few reviews as their size allows.
    fn convert<'a>(
        &'a self,
        objects: Vec<serde_json::Value>,
        desired: &'a str,
    ) -> futures_util::future::BoxFuture<
        'a,
        Result<Vec<serde_json::Value>, watchkeeper_api::ApiError>,
    >;

    /// One object converted to `desired` ([`ConvertedView::convert`] of one).
    fn convert_one<'a>(
        &'a self,
        object: serde_json::Value,
        desired: &'a str,
    ) -> futures_util::future::BoxFuture<'a, Result<serde_json::Value, watchkeeper_api::ApiError>>
    {
        Box::pin(async move {
            self.convert(vec![object], desired)
                .await?
                .pop()
                .ok_or_else(|| {
                    watchkeeper_api::ApiError::internal("the conversion returned no object")
                })
        })
    }

    /// Its CRD changed in place (a new webhook configuration).
    fn reconfigure(&self, custom: &CustomResource);
}

/// What a custom resource's definition holds beyond its objects, for the caches' memory
/// account (`--cache-memory-bytes`): its version's `openAPIV3Schema`, decoded (each served
/// version holds its own), about a third of what serving a CRD keeps alive (docs/ARCHITECTURE.md,
/// "A CRD's schema is shared"). The CRD object itself is counted in its own cache.
fn definition_weight(custom: &CustomResource) -> usize {
    custom
        .schema
        .as_deref()
        .map_or(0, watchkeeper_core::weight::heap_bytes)
}

/// Where a served resource's definition comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Built in, from `--resources`, or the upstream's discovery: served for the server's life.
    Static,
    /// A CustomResourceDefinition in the store: served while it is established.
    Definition,
}

impl Resource {
    /// A resource served for the server's life.
    #[must_use]
    pub fn new(def: ResourceDef, key_prefix: String, driver: CacheDriver) -> Resource {
        Resource {
            def,
            driver,
            key_prefix,
            origin: Origin::Static,
            custom: std::sync::RwLock::new(None),
            removed: std::sync::atomic::AtomicBool::new(false),
            protobuf_incomplete: std::sync::atomic::AtomicBool::new(false),
            conversion: None,
            storage_schema: None,
            webhook: None,
            earlier_stored: None,
        }
    }

    /// The object to store for `object` of this resource's version: converted to the
    /// storage version for a view (and, for another version of a custom resource, pruned by
    /// the storage version's schema: a field only this version declares is not stored), as
    /// it is otherwise.
    #[must_use]
    pub fn stored_form<'a>(
        &self,
        object: &'a serde_json::Value,
    ) -> std::borrow::Cow<'a, serde_json::Value> {
        match &self.conversion {
            Some(conversion) => {
                let mut stored = conversion.stored_form(object);
                if let Some(schema) = &self.storage_schema {
                    let _pruned = watchkeeper_api::structural::prune(schema, &mut stored);
                }
                std::borrow::Cow::Owned(stored)
            }
            None => std::borrow::Cow::Borrowed(object),
        }
    }

    /// What a write of `object` (its prepared object, as written) answers at this resource's
    /// version: for another version of a custom resource, the object as stored
    /// ([`Self::stored_form`]) read back as a read at this version reads it (the storage
    /// version's defaults, converted, pruned by this version's schema), as kube's storage
    /// answers with the object it decodes from what it wrote; `object` itself otherwise.
    #[must_use]
    pub fn answered_form(&self, object: serde_json::Value) -> serde_json::Value {
        let (Some(conversion), Some(schema)) = (&self.conversion, &self.storage_schema) else {
            return object;
        };
        let mut stored = self.stored_form(&object).into_owned();
        let _pruned = watchkeeper_api::structural::prune_and_default(schema, &mut stored);
        let mut answer = conversion.to_view(&stored);
        if let Some(schema) = self.custom().as_ref().and_then(|c| c.schema.as_deref()) {
            let _pruned = watchkeeper_api::structural::prune(schema, &mut answer);
        }
        answer
    }

    /// The resource a CustomResourceDefinition serves.
    #[must_use]
    pub fn from_definition(
        custom: CustomResource,
        key_prefix: String,
        driver: CacheDriver,
    ) -> Resource {
        driver
            .cache
            .set_definition_bytes(definition_weight(&custom));
        Resource {
            origin: Origin::Definition,
            custom: std::sync::RwLock::new(Some(std::sync::Arc::new(custom.clone()))),
            ..Resource::new(custom.def, key_prefix, driver)
        }
    }

    /// What the resource's CRD says (schema, subresources, printer columns), for a resource
    /// a CRD serves.
    #[must_use]
    pub fn custom(&self) -> Option<std::sync::Arc<CustomResource>> {
        self.custom
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Replaces what the CRD says beyond the definition (its CRD changed only that).
    pub fn set_custom(&self, custom: CustomResource) {
        if let Some(view) = &self.webhook {
            view.reconfigure(&custom);
        }
        if let Some(earlier) = &self.earlier_stored {
            earlier.view.reconfigure(&custom);
        }
        self.driver
            .cache
            .set_definition_bytes(definition_weight(&custom));
        *self
            .custom
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(std::sync::Arc::new(custom));
    }

    /// Why the resource cannot be read now: its conversion webhook's last conversion into its
    /// cache failed (a converted version's, or the storage version's of objects stored at
    /// earlier versions).
    #[must_use]
    pub fn conversion_failure(&self) -> Option<watchkeeper_api::ApiError> {
        self.webhook
            .as_deref()
            .or(self.earlier_stored.as_ref().map(|e| &*e.view))
            .and_then(ConvertedView::failure)
    }

    /// Records that an object of this resource could not be encoded as protobuf.
    pub fn mark_protobuf_incomplete(&self) {
        self.protobuf_incomplete
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether an object of this resource could not be encoded as protobuf (see
    /// [`Resource::mark_protobuf_incomplete`]).
    #[must_use]
    pub fn protobuf_incomplete(&self) -> bool {
        self.protobuf_incomplete
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Marks the resource as no longer served ([`Registry::remove`] does, before its cache
    /// ends the watches).
    pub fn mark_removed(&self) {
        self.removed
            .store(true, std::sync::atomic::Ordering::Release);
    }

    /// Whether the resource is no longer served.
    #[must_use]
    pub fn is_removed(&self) -> bool {
        self.removed.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The cache.
    #[must_use]
    pub fn cache(&self) -> &WatchCache {
        &self.driver.cache
    }

    /// The store key of an object.
    #[must_use]
    pub fn store_key(&self, namespace: &str, name: &str) -> String {
        // Joined by hand, not with `format!` (once or twice per write).
        let mut key =
            String::with_capacity(self.key_prefix.len() + namespace.len() + 1 + name.len());
        key.push_str(&self.key_prefix);
        if self.def.namespaced {
            key.push_str(namespace);
            key.push('/');
        }
        key.push_str(name);
        key
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

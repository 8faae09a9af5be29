//! The served set follows the CustomResourceDefinitions in the store: the store reflection
//! hands the [`Catalog`] the CRDs after every revision that changed one (and after every
//! list), and the catalog says which resources to start and stop serving.
//!
//! ## Guarantees
//! - A CRD's resource is served from the store revision at which its CRD became established
//!   (created, or updated to be established): its cache is reset with its keys listed at
//!   exactly that revision and then fed every later revision by the same store watch, so it
//!   misses nothing and sees nothing twice. Objects left from an earlier CRD of the same name
//!   are served again.
//! - A CRD deleted (or no longer established, or whose storage version is no longer served)
//!   stops its resource at the revision of that change: the resource leaves the registry
//!   (404 from then on) and its watch streams end with an in-stream error.
//! - A CRD whose served definition changes (names, version, scope, selectable fields) is
//!   stopped and started again (its watchers end, as for a deletion). One whose storage
//!   version's schema changes how stored objects read (its structure, defaults or pruning:
//!   `crd::read_shape`) is restarted without a gap ([`Catalog::replace`]): the new caches are
//!   listed, with the new schema applied to every object read (`decode`), and swapped in for
//!   the old ones in one registry change; the old ones' watches end cleanly once they have
//!   every event up to the change (kube-apiserver likewise rebuilds a CRD's storage on a spec
//!   change, ending its watches). A change of its validations, subresources or printer
//!   columns alone is applied in place.
//! - Every served version of a CRD is served: each other version has its own cache, fed
//!   through the storage version's input, so it starts, stops and restarts with the storage
//!   version and holds the same keys at the same revisions — converted on the reflector's
//!   path for conversion `None` ([`crate::cache::InputSender::with_view`]), by a task that
//!   calls the CRD's conversion webhook for `Webhook`
//!   ([`crate::cache::InputSender::with_relay`], `source::webhook::conversion`).
//! - The catalog holds no locks across awaits and writes nothing to the store: deleting a
//!   CRD's objects is the write path's job.
//! - **Never more than `--max-custom-resource-versions`** ([`VersionsBound`]): each served
//!   version of each established CRD counts one (a cache with its own dispatcher thread).
//!   The write path refuses a CRD create or update that would make the store's CRDs serve
//!   more ([`VersionsBound::check`]: 403 Forbidden, nothing written); when the store holds
//!   more anyway (written by another tool, by servers sharing one etcd racing at the
//!   bound, or the flag lowered on a restart), the catalog serves the CRDs in name order,
//!   each one that still fits, and leaves the others unserved (404, not in discovery),
//!   logged and counted in `watchkeeper_custom_resource_definitions_unserved`. Every server
//!   over one store thus serves the same set, and a deletion makes room for the next in
//!   name order.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use watchkeeper_api::crd::{self, CustomResource};
use watchkeeper_api::versions::Conversion;
use watchkeeper_core::{CacheConfig, Change, Object};

use crate::cache::{CacheDriver, Clock, DriverWaits, Registry, Resource, name_of};
use crate::source::feed::Feed;

/// The longest the reflection waits for a cache to dispatch what it was sent (it was sent
/// everything up to the revision waited for, so this only bounds a stopped cache; not a
/// tunable).
const CACHE_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// The bound on the custom resource versions served (`--max-custom-resource-versions`, see
/// the module docs), shared by the catalog (which never serves more), the write path (which
/// refuses a CRD write that would pass it) and `/metrics`.
#[derive(Debug)]
pub struct VersionsBound {
    max: usize,
    /// The established CRDs the store holds that the catalog does not serve for the bound.
    unserved: Mutex<BTreeSet<String>>,
    /// How many names `unserved` holds (read by `/metrics` without the lock).
    unserved_count: AtomicU64,
    /// One server's CRD writes that add served versions, one at a time: each counts from the
    /// CRDs' cache proven fresh and commits before the next counts.
    writes: tokio::sync::Mutex<()>,
}

/// The part of a refusal's message that tells it from every other 403 (for `/metrics`).
const REFUSAL_MARK: &str = "would exceed --max-custom-resource-versions";

impl VersionsBound {
    /// At most `max` served custom resource versions.
    #[must_use]
    pub fn new(max: usize) -> VersionsBound {
        VersionsBound {
            max,
            unserved: Mutex::new(BTreeSet::new()),
            unserved_count: AtomicU64::new(0),
            writes: tokio::sync::Mutex::new(()),
        }
    }

    /// The bound.
    #[must_use]
    pub fn max(&self) -> usize {
        self.max
    }

    /// Established CRDs in the store not served because of the bound.
    #[must_use]
    pub fn unserved(&self) -> u64 {
        self.unserved_count.load(Ordering::Relaxed)
    }

    /// Whether `error` is this bound's refusal.
    #[must_use]
    pub fn is_refusal(error: &watchkeeper_api::ApiError) -> bool {
        error.code == 403 && error.message.contains(REFUSAL_MARK)
    }

    /// Admits a write of the CRD `name` that makes it serve `versions` resources (see
    /// [`crd::served_versions`]) where it served `before`, given what `others` counts: the
    /// versions every other CRD in the store serves, from their cache proven fresh (awaited
    /// only once this server's CRD writes admitted before have committed). A write that adds
    /// no version is admitted at once. The guard returned, when there is one, must be held
    /// until the write's transaction has committed (or failed).
    ///
    /// # Errors
    /// 403 Forbidden in kube-apiserver's words when the store's CRDs would then serve more
    /// than the bound; `prove`'s error.
    pub async fn check(
        &self,
        def: &watchkeeper_api::ResourceDef,
        name: &str,
        (before, versions): (usize, usize),
        others: impl std::future::Future<Output = Result<usize, watchkeeper_api::ApiError>>,
    ) -> Result<Option<tokio::sync::MutexGuard<'_, ()>>, watchkeeper_api::ApiError> {
        if versions <= before {
            return Ok(None);
        }
        let guard = self.writes.lock().await;
        let others = others.await?;
        if others.saturating_add(versions) > self.max {
            return Err(watchkeeper_api::ApiError::forbidden(
                def,
                name,
                format!(
                    "serving it {REFUSAL_MARK}, requested: {versions} served versions, used: {others}, limited: {}",
                    self.max
                ),
            ));
        }
        Ok(Some(guard))
    }

    /// `wanted` within the bound: in name order, each CRD whose versions still fit; the
    /// others are left out (logged when that set changes, and counted).
    fn within(&self, wanted: BTreeMap<String, CustomResource>) -> BTreeMap<String, CustomResource> {
        let mut room = self.max;
        let mut unserved = BTreeSet::new();
        let mut kept = BTreeMap::new();
        for (name, resource) in wanted {
            let versions = 1 + resource.other_versions.len();
            if versions <= room {
                room -= versions;
                kept.insert(name, resource);
            } else {
                unserved.insert(name);
            }
        }
        let mut last = self.unserved.lock().unwrap_or_else(PoisonError::into_inner);
        if *last != unserved {
            if !unserved.is_empty() {
                tracing::warn!(
                    max = self.max,
                    unserved = unserved.len(),
                    names = ?unserved.iter().take(10).collect::<Vec<_>>(),
                    "CustomResourceDefinitions in the store not served: they would exceed --max-custom-resource-versions"
                );
            }
            self.unserved_count
                .store(unserved.len() as u64, Ordering::Relaxed);
            *last = unserved;
        }
        kept
    }
}

/// What the store reflection needs to serve CRDs (see the module docs).
#[derive(Debug)]
pub struct Catalog {
    registry: Arc<Registry>,
    /// The registry prefix (`/registry`).
    prefix: String,
    cache: CacheConfig,
    clock: Clock,
    waits: DriverWaits,
    /// The resources started for CRDs, by name.
    installed: BTreeMap<String, CustomResource>,
    /// `--max-custom-resource-versions`.
    bound: Arc<VersionsBound>,
    /// The caches' live objects' weight, which each cache started here counts in.
    cache_memory: Arc<crate::source::cache_memory::CacheMemory>,
    /// The conversion webhooks' caller (a `Webhook` CRD's other versions are served only
    /// with it).
    conversion: Option<crate::source::webhook::conversion::Caller>,
}

/// A resource to start: its feed for the reflector and its served resource.
pub struct Started {
    /// The reflector's feed.
    pub feed: Feed,
    /// The resource to serve once its cache is reset.
    pub resource: Arc<Resource>,
    /// Its other served versions (conversion `None`), fed through the feed's input.
    pub others: Vec<Arc<Resource>>,
}

impl Catalog {
    /// A catalog serving into `registry`, starting caches with `cache`, `clock` and `waits`,
    /// never more custom resource versions than `bound` allows.
    #[must_use]
    pub fn new(
        registry: Arc<Registry>,
        prefix: &str,
        cache: CacheConfig,
        clock: Clock,
        waits: DriverWaits,
        bound: Arc<VersionsBound>,
    ) -> Catalog {
        Catalog {
            registry,
            prefix: prefix.to_owned(),
            cache,
            clock,
            waits,
            installed: BTreeMap::new(),
            bound,
            cache_memory: Arc::default(),
            conversion: None,
        }
    }

    /// This catalog, calling CRDs' conversion webhooks with `webhooks`' client (without it, a
    /// `Webhook` CRD is served at its storage version only).
    #[must_use]
    pub fn with_conversion_webhooks(
        mut self,
        webhooks: Option<Arc<crate::source::webhook::Webhooks>>,
    ) -> Catalog {
        self.conversion = webhooks.map(|webhooks| {
            crate::source::webhook::conversion::Caller::new(webhooks, self.registry.clone())
        });
        self
    }

    /// This catalog, counting its caches' live objects in `memory` (`--cache-memory-bytes`).
    #[must_use]
    pub fn with_cache_memory(
        mut self,
        memory: Arc<crate::source::cache_memory::CacheMemory>,
    ) -> Catalog {
        self.cache_memory = memory;
        self
    }

    /// The name of the feed whose changes the catalog reads.
    #[must_use]
    pub fn definitions_feed() -> String {
        name_of(&crd::definition())
    }

    /// The resources the established CRDs serve, by name: the CRDs' cache once it has `at`,
    /// with `changes` (the CRDs' changes of the revision after `at`, not yet sent to their
    /// cache) applied, within `--max-custom-resource-versions` (see the module docs). The
    /// registry thus changes before the CRDs' cache shows the change, so a client that sees
    /// a CRD established (or gone) finds its resource served (or not).
    pub async fn wanted(
        &self,
        at: watchkeeper_core::Revision,
        changes: &[Change],
    ) -> BTreeMap<String, CustomResource> {
        let served = self.registry.load();
        let Some(crds) = served
            .resources
            .iter()
            .find(|r| crd::is_crd(&r.def))
            .cloned()
        else {
            return BTreeMap::new();
        };
        drop(served);
        let _ = tokio::time::timeout(CACHE_WAIT, crds.cache().wait_fresh(at)).await;
        let snapshot = crds.cache().latest();
        let mut objects: BTreeMap<Arc<str>, Arc<Object>> = snapshot
            .range(None, None)
            .map(|object| (object.key().clone(), object.clone()))
            .collect();
        for change in changes {
            match &change.object {
                Some(object) => {
                    objects.insert(change.key.clone(), object.clone());
                }
                None => {
                    objects.remove(&change.key);
                }
            }
        }
        let wanted = objects
            .values()
            .filter_map(|object| crd::served(object.body()))
            .map(|resource| (name_of(&resource.def), resource))
            .collect();
        self.bound.within(wanted)
    }

    /// What changes: the names to stop, the resources to start (in name order), and of the
    /// names stopped those started again only because their schema reads differently (to be
    /// replaced without a gap: [`Catalog::replace`]).
    pub fn plan(
        &mut self,
        wanted: &BTreeMap<String, CustomResource>,
    ) -> (Vec<String>, Vec<CustomResource>, Vec<String>) {
        let mut stop = Vec::new();
        let mut restart = Vec::new();
        for (name, installed) in &self.installed {
            match wanted.get(name) {
                Some(want) if want.same_definitions(installed) && !want.same_reads(installed) => {
                    stop.push(name.clone());
                    restart.push(name.clone());
                }
                Some(want) if want.same_definitions(installed) && want.same_reads(installed) => {
                    if want != installed {
                        // Validations, other versions' schemas, subresources or printer
                        // columns changed: in place, at every version.
                        for resource in self
                            .registry
                            .load()
                            .resources
                            .iter()
                            .filter(|r| r.name() == *name)
                        {
                            let version = std::iter::once(want)
                                .chain(&want.other_versions)
                                .find(|v| v.def.version == resource.def.version);
                            if let Some(version) = version {
                                resource.set_custom(version.clone());
                            }
                        }
                    }
                }
                _ => stop.push(name.clone()),
            }
        }
        for name in &stop {
            self.installed.remove(name);
        }
        for (name, want) in wanted {
            if let Some(installed) = self.installed.get_mut(name) {
                installed.clone_from(want);
            }
        }
        let served = self.registry.load();
        let start = wanted
            .iter()
            .filter(|(name, _)| !self.installed.contains_key(*name))
            // A static resource of the same name keeps its place (the CRD's names conflict).
            .filter(|(name, _)| {
                !served
                    .resources
                    .iter()
                    .any(|r| r.name() == **name && !stop.contains(*name))
            })
            .map(|(_, resource)| resource.clone())
            .collect();
        (stop, start, restart)
    }

    /// Starts the cache of `resource` (not served until [`Catalog::serve`]).
    ///
    /// # Errors
    /// Its threads could not start.
    pub fn start(&self, resource: &CustomResource) -> Result<Started, crate::cache::DriverError> {
        let def = resource.def.clone();
        let start = |def: &watchkeeper_api::ResourceDef| {
            let driver = CacheDriver::start_with(
                &name_of(def),
                CacheConfig {
                    trigger_field: None,
                    ..self.cache.clone()
                },
                self.clock,
                self.waits,
            )?;
            driver.cache.account_in(self.cache_memory.account().clone());
            Ok::<_, crate::cache::DriverError>(driver)
        };
        let driver = start(&def)?;
        let key_prefix = format!("{}/{}/", self.prefix, def.storage_prefix());
        // Objects stored at earlier versions: the reflector feeds a cache of the objects as
        // stored, which a converter feeds the storage version's cache (and every other
        // version's) from (`webhook::conversion`).
        let earlier = match (&resource.conversion_webhook, &self.conversion) {
            (Some(webhook), Some(caller)) if resource.converts_earlier_stored() => {
                let stored = start(&def)?;
                let (converter, relay) = crate::source::webhook::conversion::Converter::start(
                    caller.clone(),
                    resource,
                    webhook.clone(),
                    (driver.sender(), driver.cache.clone()),
                    stored.cache.clone(),
                );
                Some(crate::cache::EarlierStored {
                    view: converter,
                    driver: stored,
                })
                .map(|earlier| (earlier, relay))
            }
            _ => None,
        };
        let mut input = match &earlier {
            Some((earlier, relay)) => earlier.driver.sender().with_relay(relay.clone()),
            None => driver.sender(),
        };
        // What the other versions are converted from: the objects as stored, or at the
        // storage version.
        let source_cache = match &earlier {
            Some((earlier, _)) => earlier.driver.cache.clone(),
            None => driver.cache.clone(),
        };
        let mut others = Vec::new();
        for version in &resource.other_versions {
            let conversion = Conversion::ApiVersion {
                view: version.def.api_version(),
                storage: def.api_version(),
            };
            let webhook = match (&version.conversion_webhook, &self.conversion) {
                (None, _) => None,
                (Some(webhook), Some(caller)) => Some((webhook, caller)),
                (Some(_), None) => continue,
            };
            let view_driver = start(&version.def)?;
            let converter = match webhook {
                // Converted off the reflector's path by the webhook (`webhook::conversion`).
                Some((webhook, caller)) => {
                    let (converter, relay) = crate::source::webhook::conversion::Converter::start(
                        caller.clone(),
                        version,
                        webhook.clone(),
                        (view_driver.sender(), view_driver.cache.clone()),
                        source_cache.clone(),
                    );
                    input = input.with_relay(relay);
                    Some(converter as Arc<dyn crate::cache::ConvertedView>)
                }
                None => {
                    input = input.with_view(
                        view_driver.sender(),
                        crate::source::decode::view_convert(
                            &version.def,
                            &conversion,
                            version.schema.clone(),
                        ),
                    );
                    None
                }
            };
            let mut view =
                Resource::from_definition(version.clone(), key_prefix.clone(), view_driver);
            // With strategy `None`, its writes are pruned by the storage version's schema
            // and answered as read back (a webhook's are written at the storage version).
            if converter.is_none() {
                view.storage_schema.clone_from(&resource.schema);
            }
            view.conversion = Some(conversion);
            view.webhook = converter;
            others.push(Arc::new(view));
        }
        let feed = Feed {
            def: def.clone(),
            storage_prefix: format!("{}/", def.storage_prefix()),
            input,
            read_schema: resource.schema.clone().filter(|_| earlier.is_none()),
            as_stored: earlier.is_some(),
        };
        let mut served = Resource::from_definition(resource.clone(), key_prefix, driver);
        served.earlier_stored = earlier.map(|(earlier, _)| earlier);
        let resource = Arc::new(served);
        Ok(Started {
            feed,
            resource,
            others,
        })
    }

    /// Serves a started resource once the cache of every version it is served at has applied
    /// the reset at `revision` that was sent to it. Served earlier, a watch could register
    /// with a cache still at revision 0, and the reset would end it at once with a 410 (too
    /// old resource version: 0) — a watch opened right after the CRD was established.
    pub async fn serve(
        &mut self,
        wanted: &CustomResource,
        resource: Arc<Resource>,
        others: Vec<Arc<Resource>>,
        revision: watchkeeper_core::Revision,
    ) {
        caches_at(std::iter::once(&resource).chain(&others), revision).await;
        tracing::info!(resource = %resource.name(), versions = 1 + others.len(), "serving a custom resource");
        self.installed.insert(resource.name(), wanted.clone());
        self.registry.insert(resource);
        for other in others {
            self.registry.insert(other);
        }
    }

    /// The resources served under `name`, at every version.
    fn served_named(&self, name: &str) -> Vec<Arc<Resource>> {
        self.registry
            .load()
            .resources
            .iter()
            .filter(|r| r.name() == name)
            .cloned()
            .collect()
    }

    /// Serves a started resource in place of the one served under the same name (a restart,
    /// see the module docs): once the new caches have the reset at `revision` and the old ones
    /// have dispatched `at`, both swap in one registry change (no request finds neither),
    /// then the old caches end their watches cleanly, each after every event it was owed.
    pub async fn replace(
        &mut self,
        wanted: &CustomResource,
        resource: Arc<Resource>,
        others: Vec<Arc<Resource>>,
        (revision, at): (watchkeeper_core::Revision, watchkeeper_core::Revision),
    ) {
        let name = resource.name();
        let old = self.served_named(&name);
        caches_at(std::iter::once(&resource).chain(&others), revision).await;
        caches_at(&old, at).await;
        tracing::info!(resource = %name, versions = 1 + others.len(), "serving a custom resource again under its changed schema");
        self.installed.insert(name.clone(), wanted.clone());
        let replaced = self
            .registry
            .replace(&name, std::iter::once(resource).chain(others).collect());
        for resource in replaced {
            resource.driver.end_watches().await;
        }
    }

    /// Stops serving `name`, once the cache of every version it is served at has dispatched
    /// what it was sent up to `at`, then has each of those caches end its watches. A watch
    /// ends only after every event it was owed: a synced watcher after what is queued, one
    /// still catching up from the history (a watch opened at an older revision, or a stalled
    /// reader) once it has caught up — so the DELETED events of the CRD's objects reach every
    /// watcher before its stream's 404 error, at every version (each has its own cache).
    pub async fn stop(&self, name: &str, at: watchkeeper_core::Revision) {
        let resources = self.served_named(name);
        caches_at(&resources, at).await;
        tracing::info!(resource = %name, "no longer serving a custom resource");
        // Marked removed before the caches end the watches, so each ends with the 404 error
        // (`http::watch`) rather than a shutdown's clean end.
        for resource in self.registry.remove(name) {
            resource.driver.end_watches().await;
        }
    }
}

/// Waits (at most [`CACHE_WAIT`]) until the cache of each of `resources` has dispatched `at`.
async fn caches_at(
    resources: impl IntoIterator<Item = &Arc<Resource>>,
    at: watchkeeper_core::Revision,
) {
    let waits = resources.into_iter().map(|r| r.cache().wait_fresh(at));
    let _ = tokio::time::timeout(CACHE_WAIT, futures_util::future::join_all(waits)).await;
}

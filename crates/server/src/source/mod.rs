//! Where the caches' contents come from, and where writes go: the [`Source`] seam.
//!
//! A [`Source`] is one closed type with two kinds — a store (embedded, memory or etcd; see
//! [`store`]) or an upstream API server (caching-proxy mode; see [`upstream`]) — offering the
//! same operations, so request handlers never ask which kind they have:
//! - the caches' inputs: one [`reflector`] loop (list, reset, watch, resume, relist, back off)
//!   over the source's list and watch ([`Source::start_reflector`]);
//! - the current revision, for consistent reads ([`Source::current_revision`]), and the reads
//!   over the caches with Kubernetes' consistency ([`Source::list`], [`Source::get`],
//!   [`read`]); a read the cache cannot serve is the store's error or, from an upstream,
//!   forwarded there ([`Source::read_uncached`]);
//! - the revision a watch without a resource version starts after ([`Source::watch_revision`]);
//! - `write(request) → outcome` ([`Source::write`]).
//!
//! Objects from either kind are decoded by the one decoder in [`decode`].

pub mod cache_memory;
pub mod catalog;
pub mod compaction;
pub mod consistency;
pub mod decode;
pub mod encryption;
pub mod encryption_reload;
pub mod event_rate_limit;
pub mod feed;
pub mod handover;
pub mod image_policy;
pub mod limit_ranger;
pub mod node_restriction;
pub mod nudge;
pub mod object_admission;
pub mod plugin_admission;
pub mod plugin_config;
pub mod pod_admission;
pub mod pod_security;
pub mod pod_toleration_restriction;
pub mod policy_admission;
pub mod probe;
pub mod read;
pub mod reflector;
pub mod resource_quota;
pub mod service_ips;
pub mod store;
pub mod upstream;
pub mod webhook;

use crate::cache::wake_relay::after_watchers;
use std::sync::Arc;

use axum::response::Response;
use bytes::Bytes;
use watchkeeper_api::query::ResourceVersion;
use watchkeeper_api::{ApiError, ResourceDef};
use watchkeeper_core::{Encoding, Revision, object_key};
use watchkeeper_store::AnyStore;

use crate::cache::Resource;
use crate::request::ResourceRequest;
use crate::source::feed::{Backoff, Feed, ReflectorStatus};
use crate::source::read::{Freshness, ListPage, ReadError};
use crate::source::reflector::{Lister, Readiness, RelistRequests};
use crate::source::store::{StoreLister, StoreSource};
use crate::source::upstream::{UpstreamLister, UpstreamSource};

/// The source of truth of the caches.
#[derive(Debug)]
pub struct Source {
    kind: Kind,
    fresh: Freshness,
    backoff: Backoff,
    /// Relist requests into the running reflections, by resource name: the store
    /// reflection's one sender (`None` name), or one per upstream resource; set when the
    /// reflector starts.
    relists: std::sync::OnceLock<Vec<(Option<String>, RelistRequests)>>,
    /// The store's health, probed at most once a second (see [`probe`]).
    probe: probe::StoreProbe,
}

/// The two kinds of source (the store's boxed: it is the larger by far).
#[derive(Debug)]
enum Kind {
    Store(Box<StoreSource>),
    Upstream(Arc<UpstreamSource>),
}

impl Source {
    /// A store source.
    #[must_use]
    pub fn store(store: StoreSource, fresh: Freshness, backoff: Backoff) -> Source {
        Source {
            kind: Kind::Store(Box::new(store)),
            fresh,
            backoff,
            relists: std::sync::OnceLock::new(),
            probe: probe::StoreProbe::default(),
        }
    }

    /// An upstream source.
    #[must_use]
    pub fn upstream(upstream: UpstreamSource, fresh: Freshness, backoff: Backoff) -> Source {
        Source {
            kind: Kind::Upstream(Arc::new(upstream)),
            fresh,
            backoff,
            relists: std::sync::OnceLock::new(),
            probe: probe::StoreProbe::default(),
        }
    }

    /// The store's health (see [`probe`]): `Ok` for an upstream, whose health its reflector
    /// reports.
    ///
    /// # Errors
    /// Why the store cannot be read.
    pub async fn store_health(&self) -> Result<(), String> {
        match self.as_store() {
            Some(store) => self.probe.check(store).await,
            None => Ok(()),
        }
    }

    /// The store, for a store source.
    #[must_use]
    pub fn as_store(&self) -> Option<&AnyStore> {
        match &self.kind {
            Kind::Store(store) => Some(store.store()),
            Kind::Upstream(_) => None,
        }
    }

    /// The store source, for a store source.
    #[must_use]
    pub fn as_store_source(&self) -> Option<&StoreSource> {
        match &self.kind {
            Kind::Store(store) => Some(store.as_ref()),
            Kind::Upstream(_) => None,
        }
    }

    /// Asks the reflector to relist the resource `name` (`plural.group`); false when no
    /// reflector runs for it.
    pub fn request_relist(&self, name: &str) -> bool {
        self.relists
            .get()
            .and_then(|relists| {
                relists
                    .iter()
                    .find(|(resource, _)| resource.as_deref().is_none_or(|r| r == name))
            })
            .is_some_and(|(_, requests)| requests.request(name))
    }

    /// The upstream, for an upstream source.
    #[must_use]
    pub fn as_upstream(&self) -> Option<&UpstreamSource> {
        match &self.kind {
            Kind::Store(_) => None,
            Kind::Upstream(upstream) => Some(upstream),
        }
    }

    /// How reads wait for the caches.
    #[must_use]
    pub fn freshness(&self) -> &Freshness {
        &self.fresh
    }

    /// Starts the reflector(s) feeding `feeds`: one store watch for every resource (serving
    /// the CRDs of the store through `catalog`), or one upstream list and watch per resource
    /// (the upstream's resources as discovered at start; `catalog` is not used). The returned
    /// task runs until aborted or a cache stops.
    pub fn start_reflector(
        &self,
        feeds: Vec<Feed>,
        status: Arc<ReflectorStatus>,
        catalog: Option<catalog::Catalog>,
        observer: Option<Arc<dyn feed::Observer>>,
    ) -> tokio::task::JoinHandle<()> {
        let backoff = self.backoff;
        match &self.kind {
            Kind::Store(store) => {
                let readiness = Readiness::new(1, status.clone());
                let lister = Lister::Store(StoreLister::new(store));
                let (requests, receiver) = RelistRequests::channel();
                let _ = self.relists.set(vec![(None, requests)]);
                tokio::spawn(reflector::run(
                    lister,
                    feeds,
                    status,
                    readiness,
                    backoff,
                    receiver,
                    reflector::Extras { catalog, observer },
                ))
            }
            Kind::Upstream(upstream) => {
                let readiness = Readiness::new(feeds.len(), status.clone());
                let mut tasks = tokio::task::JoinSet::new();
                let mut relists = Vec::new();
                for feed in feeds {
                    let (requests, receiver) = RelistRequests::channel();
                    relists.push((Some(crate::cache::name_of(&feed.def)), requests));
                    let lister = Lister::Upstream(UpstreamLister::new(upstream, &feed.def));
                    tasks.spawn(reflector::run(
                        lister,
                        vec![feed],
                        status.clone(),
                        readiness.clone(),
                        backoff,
                        receiver,
                        // The observer (the RBAC index) is told of the upstream's objects too.
                        reflector::Extras {
                            catalog: None,
                            observer: observer.clone(),
                        },
                    ));
                }
                let _ = self.relists.set(relists);
                // Dropping the set (when this task is aborted) aborts every reflector.
                tokio::spawn(async move { while tasks.join_next().await.is_some() {} })
            }
        }
    }

    /// The source's current revision for `def` (the store's revision; the upstream's, from a
    /// `LIST limit=1` of that resource).
    ///
    /// # Errors
    /// 503 when the source cannot be asked.
    pub async fn current_revision(&self, def: &ResourceDef) -> Result<Revision, ApiError> {
        match &self.kind {
            Kind::Store(store) => store.current_revision().await,
            Kind::Upstream(upstream) => upstream.current_revision(def).await,
        }
    }

    /// LIST from the cache (see [`read::list`]).
    ///
    /// # Errors
    /// See [`read`].
    pub async fn list(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        options: &watchkeeper_api::query::Options,
    ) -> Result<ListPage, ReadError> {
        read::list(
            resource,
            namespace,
            options,
            &self.fresh,
            self.current_revision(&resource.def),
        )
        .await
    }

    /// GET of one object: the encoded body.
    ///
    /// # Errors
    /// 404, 410, 504 (see [`read`]).
    pub async fn get(
        &self,
        resource: &Resource,
        namespace: &str,
        name: &str,
        options: &watchkeeper_api::query::Options,
    ) -> Result<Bytes, ReadError> {
        let cache = resource.cache();
        if options.resource_version == ResourceVersion::Latest
            && let Kind::Store(store) = &self.kind
            && store.gets_from_store()
        {
            // The switch: consistent GETs read and decode from the store, as before KEP-6404.
            let object = store.get(resource, namespace, name).await?;
            return Ok(object
                .encoded(Encoding::Json, &cache.metrics().encode)
                .clone());
        }
        let snapshot = read::snapshot(
            resource,
            options,
            &self.fresh,
            self.current_revision(&resource.def),
        )
        .await?;
        let object = snapshot
            .get(&object_key(namespace, name))
            .ok_or_else(|| ApiError::not_found(&resource.def, name))?;
        Ok(object
            .encoded(Encoding::Json, &cache.metrics().encode)
            .clone())
    }

    /// A read the cache could not serve (`error` says why): the store's answer is `error`; an
    /// upstream answers it itself (forwarded, counted in
    /// `watchkeeper_upstream_forwarded_reads_total`).
    ///
    /// # Errors
    /// `error`, or 503 when the upstream cannot be reached.
    pub async fn read_uncached(
        &self,
        request: &ResourceRequest<'_>,
        resource: &Resource,
        error: ApiError,
    ) -> Result<Response, ApiError> {
        match &self.kind {
            Kind::Store(_) => Err(error),
            Kind::Upstream(upstream) => upstream.forward_read(request, &resource.def).await,
        }
    }

    /// The revision a watch without a resource version starts after: the store's current
    /// revision; the upstream's when the cache reaches it within the fresh wait, else the
    /// cache's newest (a watch never waits for an upstream bookmark and misses no event after
    /// its start).
    ///
    /// # Errors
    /// 503 when the source cannot be asked.
    pub async fn watch_revision(&self, resource: &Resource) -> Result<Revision, ApiError> {
        let revision = self.current_revision(&resource.def).await?;
        match &self.kind {
            Kind::Store(_) => Ok(revision),
            Kind::Upstream(_) => {
                let cache = resource.cache();
                let fresh = cache.dispatched() >= revision
                    || tokio::time::timeout(
                        self.fresh.wait,
                        after_watchers(cache.wait_fresh(revision)),
                    )
                    .await
                    .is_ok();
                Ok(if fresh { revision } else { cache.dispatched() })
            }
        }
    }

    /// A write (create, update, patch, delete, deletecollection): applied to the store, or
    /// forwarded to the upstream; either way answered once the cache has the written revision
    /// (at most the fresh wait), so a client reads its own writes.
    ///
    /// # Errors
    /// As kube-apiserver (see [`store`] and [`upstream`]).
    pub async fn write(
        &self,
        request: &ResourceRequest<'_>,
        resource: &Resource,
        resources: &[Arc<Resource>],
    ) -> Result<Response, ApiError> {
        match &self.kind {
            Kind::Store(store) => store.write(&self.fresh, request, resource, resources).await,
            Kind::Upstream(upstream) => upstream.write(request, resource).await,
        }
    }

    /// A create or update whose managed fields a server-side apply at another version
    /// decided (see [`store::StoreSource::write_managed`]); a caching proxy's upstream
    /// decides its own.
    ///
    /// # Errors
    /// As [`Source::write`].
    pub async fn write_managed(
        &self,
        request: &ResourceRequest<'_>,
        resource: &Resource,
        resources: &[Arc<Resource>],
        managers: watchkeeper_api::apply::Managers,
    ) -> Result<Response, ApiError> {
        match &self.kind {
            Kind::Store(store) => {
                store
                    .write_managed(&self.fresh, request, resource, resources, Some(managers))
                    .await
            }
            Kind::Upstream(upstream) => upstream.write(request, resource).await,
        }
    }

    /// What the source is, for the logs.
    #[must_use]
    pub fn describe(&self) -> String {
        match &self.kind {
            Kind::Store(store) => store.store().kind().to_string(),
            Kind::Upstream(upstream) => format!("upstream {}", upstream.server()),
        }
    }
}

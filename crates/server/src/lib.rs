//! # watchkeeper (the server)
//!
//! The HTTP server around the watch cache core: one cache per resource, fed by the reflector
//! from a [`source::Source`] — a store (embedded, memory or etcd) or, in caching-proxy mode, an
//! upstream API server — and served in the Kubernetes REST shape so kubectl, kube-rs and
//! client-python work unchanged. See docs/ARCHITECTURE.md.
//!
//! ## Layout (dependencies point down only)
//! - [`http`]: the request service, routing, the handlers and watch streaming, the connection layer (TLS).
//! - [`source`]: the source seam (store and upstream), the reflector, the object decoder, the
//!   reads with Kubernetes' consistency and the writes.
//! - [`audit`]: the audit log's layer (outermost), policy and writer; its
//!   [`audit::context`] (what a request adds to its events) is a leaf any module may call.
//! - [`auth`], [`limits`]: who may do what; the bounds every request passes.
//! - [`operator`]: the debug API and page, `/metrics`.
//! - [`cache`]: the caches on their threads. [`config`]: the configuration.
//!   [`request`], [`respond`]: the request context and response builders. [`bootstrap`]: the
//!   objects kube-apiserver creates for itself at start.

pub mod audit;
pub mod auth;
pub mod bootstrap;
pub mod cache;
pub mod config;
pub mod controllers;
pub mod http;
pub mod limits;
pub mod memory_release;
pub mod offload;
pub mod operator;
pub mod request;
pub mod respond;
pub mod source;

use std::net::SocketAddr;
use std::sync::Arc;

use watchkeeper_api::{ResourceDef, builtin_resources, parse_resources_file};
use watchkeeper_core::CacheConfig;
use watchkeeper_store::{
    AnyStore, EmbeddedConfig, EtcdConfig, MemoryConfig, StoreConfig, StoreKind,
};

use crate::cache::{CacheDriver, Clock, Resource};
use crate::config::ServeConfig;
use crate::http::App;
use crate::source::Source;
use crate::source::feed::{Backoff, Feed, ReflectorStatus};
use crate::source::read::{Freshness, PathCounters};
use crate::source::store::StoreSource;
use crate::source::upstream::UpstreamSource;

/// A running server.
#[derive(Debug)]
pub struct Server {
    /// Where it listens.
    pub addr: SocketAddr,
    /// The shared state (for tests and the benchmarks).
    pub app: Arc<App>,
    shutdown: tokio::sync::watch::Sender<bool>,
    serve: tokio::task::JoinHandle<()>,
    reflector: tokio::task::JoinHandle<()>,
}

impl Server {
    /// Waits until every cache has loaded its first list (requests before that get 429).
    pub async fn ready(&self) {
        for resource in self.app.resources().iter() {
            resource.cache().wait_fresh(1).await;
        }
        while !self
            .app
            .reflector
            .ready
            .load(std::sync::atomic::Ordering::Acquire)
        {
            tokio::task::yield_now().await;
        }
    }

    /// The store, in the store modes.
    #[must_use]
    pub fn store(&self) -> Option<&AnyStore> {
        self.app.source.as_store()
    }

    /// Shuts down gracefully (SIGTERM, SIGINT): stops accepting connections and asks every
    /// connection to finish (HTTP/1.1: after its response in flight; HTTP/2: GOAWAY), ends
    /// every watch after what it was owed with a final bookmark at the last dispatched
    /// revision for those that allow bookmarks, lets requests in flight complete (the caches
    /// and the reflector keep running meanwhile), drops the connections still open after
    /// `--shutdown-grace-period-ms`, then stops the reflector and the caches, and waits for
    /// the audit log to write the events queued before.
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        for resource in &self.app.resources().resources {
            resource.driver.end_watches().await;
        }
        let _ = self.serve.await;
        self.reflector.abort();
        let _ = self.reflector.await;
        if let Some(audit) = &self.app.audit {
            audit.drain().await;
        }
        tracing::info!("server stopped");
    }
}

/// Why a server did not start: what is at fault (a flag, a file, the store, the socket) and
/// the cause. `main` prints it as `watchkeeper: {error}`.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// `--token-auth-file` or `--authorization-policy-file`.
    #[error(transparent)]
    Auth(#[from] crate::auth::AuthFileError),
    /// `--audit-policy-file` (kube's refusal of the policy) or `--audit-log-path`.
    #[error(transparent)]
    Audit(#[from] crate::audit::AuditError),
    /// Plain HTTP on a non-loopback address.
    #[error(transparent)]
    PlainHttp(#[from] crate::http::connection::PlainHttpRefused),
    /// `--tls-cert-file`, `--tls-private-key-file` or `--client-ca-file`.
    #[error(transparent)]
    Tls(#[from] crate::http::connection::TlsSetupError),
    /// `--resources`.
    #[error(transparent)]
    Resources(#[from] ResourcesError),
    /// The store cannot be opened.
    #[error("cannot open the {kind} store: {source}")]
    Store {
        /// `--store`.
        kind: StoreKind,
        /// The store's error.
        #[source]
        source: watchkeeper_store::OpenError,
    },
    /// An object kube-apiserver creates for itself (a namespace every cluster has, the
    /// `kubernetes` Service) cannot be created.
    #[error("cannot create {object}: {source}")]
    Bootstrap {
        /// The object's kind and name.
        object: String,
        /// The store's error.
        #[source]
        source: watchkeeper_store::TxnError,
    },
    /// Caching-proxy mode: the upstream.
    #[error(transparent)]
    Upstream(#[from] crate::source::upstream::UpstreamError),
    /// A cache's threads.
    #[error(transparent)]
    Driver(#[from] crate::cache::DriverError),
    /// `--listen`.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// The socket error.
        #[source]
        source: std::io::Error,
    },
}

/// A `--resources` file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ResourcesError {
    /// It cannot be read.
    #[error("cannot read --resources {}: {source}", path.display())]
    Read {
        /// The file.
        path: std::path::PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// It is not a valid resources file.
    #[error("--resources {}: {cause}", path.display())]
    Parse {
        /// The file.
        path: std::path::PathBuf,
        /// What is wrong (the parser's message).
        cause: String,
    },
    /// It defines a built-in resource again.
    #[error("--resources: {plural}.{group} is already defined")]
    Duplicate {
        /// The plural.
        plural: String,
        /// The group.
        group: String,
    },
}

/// The runtime the server runs on: tokio's multi-threaded scheduler with `workers` workers
/// (0: one per core), its timers and I/O, and every thread (workers and blocking threads)
/// started with [`watchkeeper_core::stack::THREAD_STACK`] bytes of stack, room for the walks
/// over an object nested as deep as a body may (Go's 10,000 levels) that serde_json makes
/// without checking its stack. The binary and the tests that nest that deep build it here.
#[must_use]
pub fn runtime_builder(workers: usize) -> tokio::runtime::Builder {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if workers > 0 {
        builder.worker_threads(workers);
    }
    builder
        .thread_stack_size(watchkeeper_core::stack::THREAD_STACK)
        .enable_all();
    builder
}

/// The resources served from the start over a store: the built-ins, CustomResourceDefinitions
/// and those of `--resources` (the CRDs' resources come and go while serving).
///
/// # Errors
/// The resources file cannot be read or parsed, or redefines a resource.
pub fn resource_defs(config: &ServeConfig) -> Result<Vec<ResourceDef>, ResourcesError> {
    let mut defs = builtin_resources();
    defs.push(watchkeeper_api::crd::definition());
    if let Some(path) = &config.resources {
        let text = std::fs::read_to_string(path).map_err(|source| ResourcesError::Read {
            path: path.clone(),
            source,
        })?;
        let extra = parse_resources_file(&text).map_err(|e| ResourcesError::Parse {
            path: path.clone(),
            cause: e,
        })?;
        for def in extra {
            if defs
                .iter()
                .any(|d| d.group == def.group && d.plural == def.plural)
            {
                return Err(ResourcesError::Duplicate {
                    plural: def.plural,
                    group: def.group,
                });
            }
            defs.push(def);
        }
    }
    Ok(defs)
}

/// Opens the configured store.
///
/// # Errors
/// It cannot be opened.
pub async fn open_store(config: &ServeConfig) -> Result<AnyStore, StartError> {
    let store_config = match config.store {
        StoreKind::Memory => StoreConfig::Memory(MemoryConfig {
            quota_bytes: config.store_quota_bytes,
            ..MemoryConfig::default()
        }),
        StoreKind::Embedded => {
            let mut embedded = EmbeddedConfig::new(config.data_dir.clone());
            embedded.durable_commits = config.durable_commits;
            embedded.quota_bytes = config.store_quota_bytes;
            StoreConfig::Embedded(embedded)
        }
        StoreKind::Etcd => StoreConfig::Etcd(EtcdConfig {
            tls: config.etcd_tls.clone(),
            ..EtcdConfig::new(config.etcd_endpoints.clone())
        }),
    };
    let store = AnyStore::open(store_config)
        .await
        .map_err(|source| StartError::Store {
            kind: config.store,
            source,
        })?;
    Ok(match &config.encryption {
        Some(encryption) => AnyStore::Transformed(Arc::new(watchkeeper_store::Transformed::new(
            store,
            Arc::clone(encryption) as Arc<dyn watchkeeper_store::ValueTransformer>,
        ))),
        None => store,
    })
}

/// Starts a server: opens the source, starts one cache per resource and the reflector, and
/// listens. Returns once it accepts connections (the caches load in the background; requests
/// get 429 until they are ready).
///
/// # Errors
/// See [`StartError`].
pub async fn start(config: ServeConfig) -> Result<Server, StartError> {
    // Over a store this server issues service account tokens; in caching-proxy mode the
    // upstream does.
    let service_accounts = match &config.upstream {
        Some(_) => None,
        None => Some(Arc::new(
            crate::auth::serviceaccount::ServiceAccountTokens::load(
                crate::auth::serviceaccount::KeyFiles {
                    signing: config.service_accounts.signing_key_file.as_deref(),
                    verifying: &config.service_accounts.key_files,
                },
                config.service_accounts.issuers.clone(),
                config.service_accounts.api_audiences.clone(),
            )
            .map_err(crate::auth::AuthFileError::from)?,
        )),
    };
    let token_webhook = match &config.token_webhook {
        Some(webhook) => Some(Arc::new(
            crate::auth::token_webhook::TokenWebhook::start(
                webhook,
                config.service_accounts.api_audiences.clone(),
                config.limits.request_body_bytes_max,
            )
            .await
            .map_err(crate::auth::AuthFileError::TokenWebhook)?,
        )),
        None => None,
    };
    let auth = Arc::new(
        crate::auth::Auth::load(
            config.token_auth_file.as_deref(),
            config.authorization_policy_file.as_deref(),
        )?
        .with_client_certificates(config.tls.client_ca_file.is_some())
        .with_service_accounts(service_accounts.clone())
        .with_jwt(
            crate::auth::jwt::Jwt::start(&config.jwt).map_err(crate::auth::AuthFileError::Jwt)?,
        )
        .with_token_webhook(token_webhook)
        .with_request_header(config.tls.requestheader.clone())
        .with_authorization(&config.authorization_modes)
        .with_authz_webhook(match &config.authorization_webhook {
            Some(webhook) => Some(Arc::new(
                crate::auth::authz_webhook::AuthzWebhook::start(
                    webhook,
                    config.limits.request_body_bytes_max,
                )
                .await
                .map_err(crate::auth::AuthFileError::AuthzWebhook)?,
            )),
            None => None,
        }),
    );
    let audit = crate::audit::Audit::start(&config.audit, auth.clone()).await?;
    crate::http::connection::check_plain_http(&config.tls, config.listen)?;
    let tls = crate::http::connection::server_config(&config.tls)?;
    let root_ca = config
        .enable_root_ca_cert_publisher
        .then(|| crate::http::connection::root_ca_bundle(&config.tls))
        .transpose()?;
    let counters = Arc::new(PathCounters::default());
    watchkeeper_api::error::set_invalid_causes_max(config.limits.invalid_causes_max);
    let offload = Arc::new(
        crate::offload::Offload::new(
            config.limits.heavy_request_body_bytes,
            config.limits.heavy_requests(),
        )
        .with_release(Arc::new(crate::memory_release::Release::new(
            config.limits.memory_release_interval,
        ))),
    );
    let backoff = Backoff {
        initial: config.reflector.backoff_initial,
        max: config.reflector.backoff_max,
    };
    let status = Arc::new(ReflectorStatus::default());
    let mut fresh = Freshness {
        wait: config.fresh_wait,
        counters: counters.clone(),
        nudge: None,
    };
    let listener =
        crate::http::connection::listen(config.listen, config.limits.socket_send_buffer_bytes)
            .map_err(|source| StartError::Listen {
                addr: config.listen,
                source,
            })?;
    let addr = listener.local_addr().map_err(|source| StartError::Listen {
        addr: config.listen,
        source,
    })?;
    // OIDC discovery of the token issuer, now that the advertised address is known.
    if let Some(tokens) = &service_accounts {
        match tokens.discovery_documents(
            config.service_accounts.jwks_uri.as_deref(),
            bootstrap::advertised(addr),
        ) {
            Ok(discovery) => tokens.set_discovery(discovery),
            Err(reason) => tracing::warn!(
                %reason,
                "service account issuer discovery is not served (/.well-known/openid-configuration, /openid/v1/jwks)"
            ),
        }
    }
    // The source decides the resources: the upstream's discovery, or the built-ins and
    // `--resources` over a store.
    // The caches' live objects' weight, bounded over a store (`--cache-memory-bytes`).
    let cache_memory = Arc::new(crate::source::cache_memory::CacheMemory::new(
        if config.upstream.is_some() {
            0
        } else {
            config.cache_memory_bytes
        },
    ));
    let (source, defs, store_mode) = match &config.upstream {
        Some(upstream) => {
            let upstream = UpstreamSource::connect(upstream, config.fresh_wait).await?;
            let defs = upstream.defs.clone();
            (Source::upstream(upstream, fresh, backoff), defs, false)
        }
        None => {
            let store = open_store(&config).await?;
            fresh.nudge =
                crate::source::nudge::Nudge::new(&store, &config.prefix, config.fresh_nudge)
                    .map(Arc::new);
            let defs = resource_defs(&config)?;
            bootstrap::bootstrap(
                &store,
                &config.prefix,
                &config.service_cluster_ip_ranges,
                bootstrap::advertised(addr),
                &crate::controllers::apiservices::built_in(&defs),
            )
            .await?;
            if auth.rbac().is_some() {
                crate::auth::rbac::bootstrap::reconcile_store(&store, &config.prefix).await?;
            }
            let store = StoreSource::new(
                store,
                &config.prefix,
                config.reflector.list_page_size,
                config.consistent_get_from_cache,
                counters.clone(),
                status.clone(),
            )
            .with_service_ips(
                &config.service_cluster_ip_ranges,
                config.service_node_port_range,
            )
            .with_history_rebuild(
                config
                    .rebuild_history
                    .then_some(config.cache.history_capacity_max as u64),
            )
            .with_nudge(fresh.nudge.clone())
            .with_cache_memory(cache_memory.clone())
            .with_custom_resource_versions(Arc::new(crate::source::catalog::VersionsBound::new(
                config.custom_resource_versions_max,
            )))
            .with_garbage_collection(config.enable_garbage_collector)
            .with_admission(config.admission)
            .with_pod_security(config.admission_config.pod_security.clone())
            .with_plugin_configs(config.admission_config.clone())
            .with_offload(offload.clone())
            .with_webhooks(Arc::new(crate::source::webhook::Webhooks::new(
                config.webhook_calls_max,
                config.limits.request_body_bytes_max,
            )))
            .with_rbac_escalation_check(auth.rbac().is_some().then(|| auth.clone()))
            .with_policy_authorizer(auth.clone());
            (Source::store(store, fresh, backoff), defs, true)
        }
    };
    let clock = Clock::new();
    let mut resources = Vec::new();
    let mut feeds = Vec::new();
    let mut other_versions = Vec::new();
    for def in &defs {
        let cache_config = CacheConfig {
            trigger_field: def.trigger_field.clone(),
            ..config.cache.clone()
        };
        let driver = CacheDriver::start_with(
            &crate::cache::name_of(def),
            cache_config,
            clock,
            config.driver,
        )?;
        driver.cache.account_in(cache_memory.account().clone());
        let key_prefix = format!("{}/{}/", config.prefix, def.storage_prefix());
        let mut input = driver.sender();
        resources.push(Arc::new(Resource::new(
            def.clone(),
            key_prefix.clone(),
            driver,
        )));
        // Other versions kube-apiserver serves from the same storage (events.k8s.io/v1
        // Events): a cache each, fed by this resource's reflection, converted once per event.
        // An upstream serves them itself.
        let views = if store_mode {
            watchkeeper_api::versions::builtin_views(def)
        } else {
            Vec::new()
        };
        for (view, conversion) in views {
            let view_driver = CacheDriver::start_with(
                &crate::cache::name_of(&view),
                CacheConfig {
                    trigger_field: None,
                    ..config.cache.clone()
                },
                clock,
                config.driver,
            )?;
            view_driver.cache.account_in(cache_memory.account().clone());
            input = input.with_view(
                view_driver.sender(),
                crate::source::decode::view_convert(&view, &conversion, None),
            );
            let mut resource = Resource::new(view, key_prefix.clone(), view_driver);
            resource.conversion = Some(conversion);
            other_versions.push(Arc::new(resource));
        }
        feeds.push(Feed {
            def: def.clone(),
            storage_prefix: format!("{}/", def.storage_prefix()),
            input,
            read_schema: None,
            as_stored: false,
        });
    }
    // After the stored resources, so discovery lists their groups first.
    resources.extend(other_versions);
    let registry = Arc::new(crate::cache::Registry::new(resources));
    if let Some(tokens) = &service_accounts {
        // The token verifier reads service accounts and bound objects from the caches.
        let served = registry.clone();
        tokens.set_lookup(Arc::new(
            move |plural: &str, namespace: &str, name: &str| {
                let resources = served.load();
                let resource = resources.find("", "v1", plural)?;
                let (object, _) = resource
                    .cache()
                    .get(&watchkeeper_core::object_key(namespace, name));
                object?
                    .body()
                    .pointer("/metadata/uid")
                    .and_then(serde_json::Value::as_str)
                    .map(str::to_owned)
            },
        ));
    }
    // Over a store, the CRDs in the store decide which custom resources are served besides
    // the start-up ones; in caching-proxy mode the upstream's resources are those discovered
    // at start.
    let catalog = source.as_store_source().map(|store| {
        crate::source::catalog::Catalog::new(
            registry.clone(),
            &config.prefix,
            config.cache.clone(),
            clock,
            config.driver,
            store.custom_resource_versions().clone(),
        )
        .with_conversion_webhooks(store.webhooks().cloned())
        .with_cache_memory(store.cache_memory().clone())
    });
    // Over a store, the controllers learn of every object from the reflector.
    let garbage_collector = (store_mode && config.enable_garbage_collector)
        .then(crate::controllers::garbage_collector::GarbageCollector::new);
    let authentication = crate::http::connection::authentication_info(&config.tls)?;
    let namespace_controller = store_mode
        .then(|| crate::controllers::namespaces::NamespaceController::new(root_ca, authentication));
    let crd_finalizer = store_mode.then(crate::controllers::crd_finalizer::CrdFinalizer::new);
    let pod_gc = (store_mode && config.pod_gc.enabled)
        .then(|| crate::controllers::pod_gc::PodGc::new(config.pod_gc.clone()));
    let keeper = store_mode.then(crate::controllers::keeper::Keeper::new);
    let aggregation = (store_mode && auth.rbac().is_some())
        .then(crate::controllers::clusterrole_aggregation::ClusterRoleAggregation::new);
    let storage_protection = (store_mode && config.admission.storage_object_in_use_protection)
        .then(crate::controllers::storage_protection::StorageProtection::new);
    // Over a store, the aggregator's APIServices (the built-in group/versions, the CRDs').
    let apiservices = store_mode.then(|| {
        crate::controllers::apiservices::ApiServices::new(
            crate::controllers::apiservices::built_in(&defs),
        )
    });
    let mut observers: Vec<Arc<dyn crate::source::feed::Observer>> = Vec::new();
    if let Some(rbac) = auth.rbac() {
        if !store_mode {
            crate::auth::rbac::check_served(&defs)?;
        }
        observers.push(rbac.clone());
    }
    if let Some(aggregation) = &aggregation {
        observers.push(aggregation.clone());
    }
    if let Some(keeper) = &keeper {
        observers.push(keeper.clone());
    }
    if let Some(collector) = &garbage_collector {
        observers.push(collector.clone());
    }
    if let Some(controller) = &namespace_controller {
        observers.push(controller.clone());
    }
    if let Some(finalizer) = &crd_finalizer {
        observers.push(finalizer.clone());
    }
    if let Some(controller) = &storage_protection {
        observers.push(controller.clone());
    }
    if let Some(controller) = &apiservices {
        observers.push(controller.clone());
    }
    // Over a store, the Service allocators keep what the cached Services and IPAddresses hold.
    if let Some(allocators) = source
        .as_store_source()
        .and_then(|store| store.service_ips())
    {
        observers.push(allocators);
    }
    // API Priority and Fairness learns its FlowSchemas and levels from the reflector.
    let apf = config
        .limits
        .priority_and_fairness
        .then(|| crate::limits::apf::Apf::new(config.limits.server_concurrency_limit()));
    if let Some(apf) = &apf {
        observers.push(apf.clone());
    }
    // Over a store, FlowSchemas get kube's `Dangling` condition.
    let flowschema_status = (store_mode && apf.is_some())
        .then(crate::controllers::flowschema_status::FlowSchemaStatus::new);
    if let Some(controller) = &flowschema_status {
        observers.push(controller.clone());
    }
    let reflector = source.start_reflector(
        feeds,
        status.clone(),
        catalog,
        (!observers.is_empty()).then(|| {
            Arc::new(crate::controllers::Observers(observers))
                as Arc<dyn crate::source::feed::Observer>
        }),
    );
    let (shutdown_tx, shutdown_rx) = tokio::sync::watch::channel(false);
    let limits = Arc::new(
        crate::limits::Limits::new(&config.limits, config.min_request_timeout).with_apf(apf),
    );
    let settings = crate::http::connection::ConnectionSettings {
        peer_roots: Arc::new(crate::http::connection::PeerRoots::new(&config.tls)?),
        tls,
        handshake_timeout: config.tls.handshake_timeout,
        max_buf_size: config.limits.max_buf_size(),
        max_header_list_size: u32::try_from(config.limits.max_buf_size()).unwrap_or(u32::MAX),
        header_timeout: config.limits.request_header_timeout,
        idle_timeout: config.limits.idle_timeout,
        http2_keepalive_interval: Some(config.limits.http2_keepalive_interval)
            .filter(|interval| !interval.is_zero()),
        http2_keepalive_timeout: config.limits.http2_keepalive_timeout,
        write_timeout: config.limits.write_timeout,
        max_concurrent_streams: config.limits.max_concurrent_streams(),
        http2_max_send_buf_size: config.limits.http2_max_send_buffer_bytes,
        http2_windows: (
            config.limits.http2_initial_stream_window_bytes,
            config.limits.http2_initial_connection_window_bytes,
        ),
        shutdown_grace: config.shutdown_grace,
        limits: limits.clone(),
    };
    tracing::info!(%addr, tls = settings.tls.is_some(), source = %source.describe(), resources = defs.len(), mode = config.cache.mode.as_str(), "watchkeeper listening");
    // The OpenAPI documents count with the caches' objects (`http::openapi`).
    let documents_account = source
        .as_store_source()
        .map(|store| store.cache_memory().clone());
    let config_proxy = (config.proxy_requests_max, config.proxy_connect_timeout);
    let app = Arc::new(App {
        config,
        source,
        registry,
        reflector: status,
        clock,
        counters,
        watches: crate::operator::WatchRegistry::default(),
        requests: crate::operator::metrics::RequestMetrics::default(),
        shutdown: shutdown_rx.clone(),
        auth: auth.clone(),
        debug: crate::operator::debug::DebugState::default(),
        offload,
        limits: limits.clone(),
        consistency: Arc::new(crate::source::consistency::ConsistencyChecker::new()),
        compaction: Arc::default(),
        garbage_collector: garbage_collector.clone(),
        wake_relay: crate::cache::wake_relay::WakeRelay::start(),
        openapi: crate::http::openapi::OpenApiCache::new(documents_account),
        audit: audit.clone(),
        resource_proxy: crate::http::resource_proxy::ProxyClient::new(
            config_proxy.0,
            config_proxy.1,
        ),
    });
    if let Some(apf) = app.limits.apf() {
        // The work estimate reads the objects of a resource from its cache (the watches
        // interested in a write it counts itself, `apf::watches`).
        let registry = app.registry.clone();
        apf.set_resource_counter(Arc::new(move |group: &str, plural: &str| {
            let served = registry.load();
            let resource = served
                .iter()
                .find(|r| r.def.group == group && r.def.plural == plural)?;
            Some(resource.cache().latest().len())
        }));
        tokio::spawn(crate::limits::apf::run_borrowing(
            apf.clone(),
            app.config.limits.apf_borrowing_period,
            shutdown_rx.clone(),
        ));
    }
    if let Some(store) = app.source.as_store_source() {
        // Watches whose unread queues keep alive what the histories let go end past the
        // bound (`source::cache_memory`).
        let weak = Arc::downgrade(&app);
        tokio::spawn(store.cache_memory().clone().cut_released_watches(
            Arc::new(
                move |visit: &mut dyn FnMut(&watchkeeper_core::WatchQueue)| {
                    if let Some(app) = weak.upgrade() {
                        for watch in app.watches.lock().values() {
                            visit(&watch.queue);
                        }
                    }
                },
            ),
            shutdown_rx.clone(),
        ));
        let context = crate::controllers::Context {
            source: store.clone(),
            registry: app.registry.clone(),
            fresh: app.source.freshness().clone(),
        };
        if let Some(controller) = namespace_controller {
            tokio::spawn(controller.run(context.clone(), shutdown_rx.clone()));
        }
        if let Some(finalizer) = crd_finalizer {
            tokio::spawn(finalizer.run(context.clone(), shutdown_rx.clone()));
        }
        if let Some(aggregation) = aggregation {
            tokio::spawn(aggregation.run(context.clone(), shutdown_rx.clone()));
        }
        if let Some(controller) = storage_protection {
            tokio::spawn(controller.run(context.clone(), shutdown_rx.clone()));
        }
        if let Some(controller) = flowschema_status {
            tokio::spawn(controller.run(context.clone(), shutdown_rx.clone()));
        }
        if let Some(controller) = apiservices {
            tokio::spawn(controller.run(context.clone(), shutdown_rx.clone()));
        }
        if let Some(collector) = pod_gc {
            tokio::spawn(collector.run(context.clone(), shutdown_rx.clone()));
        }
        tokio::spawn(crate::controllers::quota_resync::run(
            context.clone(),
            app.config.resource_quota_sync_period,
            shutdown_rx.clone(),
        ));
        if let Some(collector) = garbage_collector {
            tokio::spawn(collector.run(context, shutdown_rx.clone()));
        }
    }
    if let Some(keeper) = keeper
        && let Some(store) = app.source.as_store()
    {
        let kept = crate::controllers::keeper::Kept {
            store: store.clone(),
            prefix: app.config.prefix.clone(),
            ranges: app.config.service_cluster_ip_ranges.clone(),
            server: bootstrap::advertised(addr),
        };
        tokio::spawn(keeper.run(kept, shutdown_rx.clone()));
    }
    if let Some(interval) = app.config.compaction_interval
        && let Some(store) = app.source.as_store()
    {
        tokio::spawn(crate::source::compaction::run_periodic(
            store.clone(),
            app.config.prefix.clone(),
            interval,
            app.compaction.clone(),
            shutdown_rx.clone(),
        ));
    }
    if let Some((reloading, interval)) = app.config.encryption_reload.clone() {
        tokio::spawn(crate::source::encryption_reload::run(
            reloading,
            interval,
            shutdown_rx.clone(),
        ));
    }
    if let Some(period) = app.config.consistency_check_interval
        && app.source.as_store().is_some()
    {
        let weak = Arc::downgrade(&app);
        tokio::spawn(crate::source::consistency::run_periodic(
            period,
            move || {
                let app = weak.upgrade()?;
                Some(Box::pin(async move {
                    app.consistency
                        .check(&app.resources(), &app.source, None)
                        .await;
                })
                    as futures_util::future::BoxFuture<'static, ()>)
            },
            shutdown_rx.clone(),
        ));
    }
    tokio::spawn(crate::operator::debug::run_sampler(
        Arc::downgrade(&app),
        App::observed,
        shutdown_rx.clone(),
    ));
    let with_authz_webhook = auth.authz_webhook().is_some();
    let service = http::service::service(
        app.clone(),
        crate::limits::LayerState {
            limits,
            auth,
            authorize: {
                let app = Arc::downgrade(&app);
                Arc::new(
                    move |user: &crate::auth::User,
                          method: &axum::http::Method,
                          path: &str,
                          query: Option<&str>| {
                        app.upgrade().map_or(Ok(()), |app| {
                            http::authorize_from_url(&app, user, method, path, query)
                        })
                    },
                )
            },
            prepare_authorize: with_authz_webhook.then(|| {
                let app = Arc::downgrade(&app);
                Arc::new(
                    move |user: crate::auth::User,
                          method: axum::http::Method,
                          path: String,
                          query: Option<String>| {
                        let app = app.clone();
                        Box::pin(async move {
                            if let Some(app) = app.upgrade() {
                                http::prepare_authorize_from_url(
                                    &app,
                                    &user,
                                    &method,
                                    &path,
                                    query.as_deref(),
                                )
                                .await;
                            }
                        }) as futures_util::future::BoxFuture<'static, ()>
                    },
                ) as crate::limits::PrepareAuthorizeFromUrl
            }),
        },
        crate::audit::AuditLayer::new(audit),
    );
    let serve = tokio::spawn(crate::http::connection::serve(
        listener,
        service,
        settings,
        shutdown_rx,
    ));
    Ok(Server {
        addr,
        app,
        shutdown: shutdown_tx,
        serve,
        reflector,
    })
}

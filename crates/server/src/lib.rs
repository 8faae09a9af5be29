//! # watchkeeper (the server)
//!
//! The HTTP server and command line around the watch cache core and the stores: one cache per
//! resource, fed by one reflector over the store (or, in caching-proxy mode, by one reflector
//! per resource over an upstream API server: the `upstream` module), served in the Kubernetes
//! REST shape so kubectl, kube-rs and client-python work unchanged. See docs/ARCHITECTURE.md.

pub mod app;
pub mod auth;
pub mod cache;
pub mod config;
pub mod http;
pub mod limits;
pub mod operator;
pub mod source;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use watchkeeper_api::{ResourceDef, builtin_resources, parse_resources_file};
use watchkeeper_core::CacheConfig;
use watchkeeper_store::{
    AnyStore, EmbeddedConfig, EtcdConfig, MemoryConfig, Store, StoreConfig, StoreKind, TxnOp,
    TxnRequest,
};

use crate::app::{App, PathCounters, Resource};
use crate::cache::{CacheDriver, Clock};
use crate::config::ServeConfig;
use crate::source::reflector::{Feed, Reflector, ReflectorStatus};

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
        for resource in &self.app.resources {
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

    /// Stops accepting, ends every watch stream, stops the caches.
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        let _ = self.serve.await;
        self.reflector.abort();
        let _ = self.reflector.await;
        tracing::info!("server stopped");
    }
}

/// The resources served: the built-ins plus those of `--resources`.
///
/// # Errors
/// The resources file cannot be read or parsed.
pub fn resource_defs(config: &ServeConfig) -> Result<Vec<ResourceDef>, String> {
    let mut defs = builtin_resources();
    if let Some(path) = &config.resources {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read --resources {}: {e}", path.display()))?;
        let extra = parse_resources_file(&text)
            .map_err(|e| format!("--resources {}: {e}", path.display()))?;
        for def in extra {
            if defs
                .iter()
                .any(|d| d.group == def.group && d.plural == def.plural)
            {
                return Err(format!(
                    "--resources: {}.{} is already defined",
                    def.plural, def.group
                ));
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
pub async fn open_store(config: &ServeConfig) -> Result<AnyStore, String> {
    let store_config = match config.store {
        StoreKind::Memory => StoreConfig::Memory(MemoryConfig::default()),
        StoreKind::Embedded => {
            let mut embedded = EmbeddedConfig::new(config.data_dir.clone());
            embedded.durable_commits = config.durable_commits;
            StoreConfig::Embedded(embedded)
        }
        StoreKind::Etcd => StoreConfig::Etcd(EtcdConfig::new(config.etcd_endpoints.clone())),
    };
    AnyStore::open(store_config)
        .await
        .map_err(|e| format!("cannot open the {} store: {e}", config.store))
}

/// Creates the namespaces every cluster has (default, kube-system, kube-public) if missing.
async fn bootstrap(store: &AnyStore, config: &ServeConfig) -> Result<(), String> {
    for name in ["default", "kube-system", "kube-public"] {
        let key = bytes::Bytes::from(format!("{}/namespaces/{name}", config.prefix));
        let object = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": name,
                "uid": uuid::Uuid::new_v4().to_string(),
                "creationTimestamp": humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
                "labels": {"kubernetes.io/metadata.name": name},
            },
            "spec": {"finalizers": ["kubernetes"]},
            "status": {"phase": "Active"},
        });
        let value = bytes::Bytes::from(object.to_string());
        store
            .txn(
                TxnRequest::default()
                    .when(watchkeeper_store::Compare::Absent { key: key.clone() })
                    .then(TxnOp::Put { key, value }),
            )
            .await
            .map_err(|e| format!("cannot create namespace {name}: {e}"))?;
    }
    Ok(())
}

/// Starts a server: opens the store, starts one cache per resource and the reflector, and
/// listens. Returns once it accepts connections (the caches load in the background; requests
/// get 429 until they are ready).
///
/// # Errors
/// Configuration, store or socket errors, as messages.
pub async fn start(config: ServeConfig) -> Result<Server, String> {
    let auth = crate::auth::Auth::load(
        config.token_auth_file.as_deref(),
        config.authorization_policy_file.as_deref(),
    )?
    .with_client_certificates(config.tls.client_ca_file.is_some());
    crate::http::connection::check_plain_http(&config.tls, config.listen)?;
    let tls = crate::http::connection::server_config(&config.tls)?;
    // Caching-proxy mode: the upstream's discovery decides the resources, and the store is an
    // empty placeholder that nothing reads or writes (see the `upstream` module).
    let upstream = match &config.upstream {
        Some(upstream) => Some(Arc::new(
            crate::source::upstream::Upstream::connect(upstream, config.fresh_wait).await?,
        )),
        None => None,
    };
    let (defs, store) = match &upstream {
        Some(upstream) => (
            upstream.defs.clone(),
            AnyStore::open(StoreConfig::Memory(MemoryConfig::default()))
                .await
                .map_err(|e| e.to_string())?,
        ),
        None => {
            let store = open_store(&config).await?;
            bootstrap(&store, &config).await?;
            (resource_defs(&config)?, store)
        }
    };
    let clock = Clock::new();
    let status = Arc::new(ReflectorStatus::default());
    let mut resources = Vec::new();
    let mut feeds = Vec::new();
    for def in &defs {
        let cache_config = CacheConfig {
            trigger_field: def.trigger_field.clone(),
            ..config.cache.clone()
        };
        let name = if def.group.is_empty() {
            def.plural.clone()
        } else {
            format!("{}.{}", def.plural, def.group)
        };
        let driver = CacheDriver::start(&name, cache_config, clock)?;
        feeds.push(Feed {
            def: def.clone(),
            storage_prefix: format!("{}/", def.storage_prefix()),
            input: driver.sender(),
        });
        resources.push(Arc::new(Resource {
            def: def.clone(),
            key_prefix: format!("{}/{}/", config.prefix, def.storage_prefix()),
            driver,
        }));
    }
    let reflector = match &upstream {
        Some(upstream) => tokio::spawn(upstream.clone().run(feeds, status.clone())),
        None => {
            tokio::spawn(Reflector::new(store.clone(), &config.prefix, feeds, status.clone()).run())
        }
    };
    let (shutdown_tx, shutdown_rx) = tokio::sync::watch::channel(false);
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", config.listen))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let limits = crate::limits::Limits::new(&config.limits);
    let settings = crate::http::connection::ConnectionSettings {
        tls,
        handshake_timeout: config.tls.handshake_timeout,
        max_buf_size: config.limits.max_buf_size(),
        max_header_list_size: u32::try_from(config.limits.max_buf_size()).unwrap_or(u32::MAX),
        header_read_timeout: config.limits.request_read_timeout,
        max_concurrent_streams: config.limits.max_concurrent_streams(),
        shutdown_grace: config.limits.watch_release_grace,
    };
    let source = match &config.upstream {
        Some(upstream) => format!(
            "upstream {}",
            upstream
                .url
                .as_deref()
                .or(upstream.kubeconfig.as_deref().and_then(|p| p.to_str()))
                .unwrap_or("?")
        ),
        None => config.store.to_string(),
    };
    tracing::info!(%addr, tls = settings.tls.is_some(), %source, resources = defs.len(), mode = config.cache.mode.as_str(), "watchkeeper listening");
    let app = Arc::new(App {
        config,
        store,
        resources,
        defs,
        reflector: status,
        clock,
        counters: PathCounters::default(),
        watches: std::sync::Mutex::new(std::collections::BTreeMap::new()),
        next_watch: AtomicU64::new(1),
        requests: crate::operator::metrics::RequestMetrics::default(),
        shutdown: shutdown_rx.clone(),
        auth,
        upstream,
        debug: crate::operator::debug::DebugState::default(),
        limits: Arc::new(limits),
    });
    tokio::spawn(crate::operator::debug::run_sampler(
        Arc::downgrade(&app),
        shutdown_rx.clone(),
    ));
    let router = axum::Router::new()
        .fallback(http::handle)
        .layer(axum::middleware::from_fn(
            crate::operator::debug::client_scope,
        ))
        .layer(axum::middleware::from_fn_with_state(
            app.clone(),
            crate::limits::layer,
        ))
        .with_state(app.clone());
    let serve = tokio::spawn(crate::http::connection::serve(
        listener,
        router,
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

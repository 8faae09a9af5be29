//! The state every request handler shares: [`App`].

use std::sync::Arc;
use std::sync::atomic::Ordering;

use watchkeeper_api::ApiError;

use crate::auth::Auth;
use crate::cache::{Clock, Registry, Resource, Served};
use crate::config::ServeConfig;
use crate::limits::Limits;
use crate::operator::debug::DebugState;
use crate::operator::metrics::RequestMetrics;
use crate::operator::{Observed, WatchRegistry};
use crate::source::Source;
use crate::source::consistency::ConsistencyChecker;
use crate::source::feed::ReflectorStatus;
use crate::source::read::PathCounters;

/// Everything a request handler needs.
#[derive(Debug)]
pub struct App {
    /// The configuration.
    pub config: ServeConfig,
    /// Where the caches' contents come from and writes go.
    pub source: Source,
    /// The served resources (they change as CustomResourceDefinitions come and go).
    pub registry: Arc<Registry>,
    /// The reflector's status.
    pub reflector: Arc<ReflectorStatus>,
    /// The clock shared with the caches.
    pub clock: Clock,
    /// Read and write path counters (shared with the source).
    pub counters: Arc<PathCounters>,
    /// Open watch streams.
    pub watches: WatchRegistry,
    /// Request counts and latencies.
    pub requests: RequestMetrics,
    /// Flips to true on shutdown: watch streams end.
    pub shutdown: tokio::sync::watch::Receiver<bool>,
    /// Who may do what (`--token-auth-file`, `--authorization-policy-file`).
    pub auth: Arc<Auth>,
    /// The operator view's counters and timeline (`/debug/*`, `/ui/`).
    pub debug: DebugState,
    /// Request limits' state (see `limits`).
    pub limits: Arc<Limits>,
    /// Requests with large bodies, handled off the runtime workers (see `offload`).
    pub offload: Arc<crate::offload::Offload>,
    /// The cache consistency checker (see `source::consistency`).
    pub consistency: Arc<ConsistencyChecker>,
    /// The store compaction rounds' outcomes (see `source::compaction`).
    pub compaction: Arc<crate::source::compaction::CompactionCounters>,
    /// The garbage collector, over a store with `--enable-garbage-collector`.
    pub garbage_collector: Option<Arc<crate::controllers::garbage_collector::GarbageCollector>>,
    /// Wakes watch responses from inside the runtime (see `cache::wake_relay`).
    pub wake_relay: crate::cache::wake_relay::WakeRelay,
    /// The OpenAPI documents built for the served resources (see `http::openapi`).
    pub openapi: super::openapi::OpenApiCache,
    /// The audit log, when a policy and a log path are configured (see `crate::audit`).
    pub audit: Option<std::sync::Arc<crate::audit::Audit>>,
    /// The client of the `proxy` subresources (see `http::resource_proxy`).
    pub resource_proxy: super::resource_proxy::ProxyClient,
}

impl App {
    /// The served resources now (one consistent view; see [`Registry`]).
    #[must_use]
    pub fn resources(&self) -> Arc<Served> {
        self.registry.load()
    }

    /// Finds a served resource.
    #[must_use]
    pub fn resource(&self, group: &str, version: &str, plural: &str) -> Option<Arc<Resource>> {
        self.registry.load().find(group, version, plural).cloned()
    }

    /// 429 until the first list is loaded (as Kubernetes does for an unready cache).
    ///
    /// # Errors
    /// 429 TooManyRequests with Retry-After.
    pub fn ensure_ready(&self) -> Result<(), ApiError> {
        if self.reflector.ready.load(Ordering::Acquire) {
            Ok(())
        } else {
            Err(ApiError::too_many_requests(
                "storage is (re)initializing".to_owned(),
                1,
            ))
        }
    }

    /// What the operator view reads.
    #[must_use]
    pub fn observed(&self) -> Observed<'_> {
        Observed {
            mode: self.config.cache.mode.as_str(),
            clock: self.clock,
            resources: self.registry.load(),
            watches: &self.watches,
            reflector: &self.reflector,
            debug: &self.debug,
            counters: &self.counters,
            requests: &self.requests,
            limits: &self.limits,
            offload: &self.offload,
            source: &self.source,
            consistency: &self.consistency,
            compaction: &self.compaction,
            garbage_collector: self.garbage_collector.as_deref(),
            audit: self.audit.as_deref(),
            encryption_reload: self
                .config
                .encryption_reload
                .as_ref()
                .map(|(r, _)| r.as_ref()),
        }
    }
}

//! Caching-proxy mode (`watchkeeper serve --upstream URL`): an upstream Kubernetes API server
//! (or another watchkeeper) is the source of truth instead of a store.
//!
//! ## What it does
//! - **Resources** come from the upstream's discovery: every resource of every group's preferred
//!   version whose verbs include `list` and `watch` (subresources excluded), optionally narrowed
//!   by `--upstream-resources`. Discovery and OpenAPI are served from that set; field-selector
//!   fields and trigger fields of built-in resources come from the built-in table.
//! - **One reflection per resource** (the shared loop in `reflector`) loads the cache (`Input::Reset`) from a streaming
//!   list (`sendInitialEvents=true`, up to the `k8s.io/initial-events-end` bookmark; the same
//!   stream goes on as the watch) when the upstream is Kubernetes 1.27 or newer and accepts it,
//!   else from a paged list at one resource version followed by a watch from that version, with
//!   `allowWatchBookmarks` either way: every event is one revision for the cache, every
//!   bookmark a progress notification. A broken or ended watch resumes from the last event or
//!   bookmark; a 410 (the resume version is gone) relists, which re-initialises the cache: its
//!   downstream watchers get an honest in-stream 410, never a silent gap. Resource versions
//!   are parsed as `u64`: an upstream whose versions are not integers is rejected at start with a clear message (every
//!   real kube-apiserver uses integers). Retries back off with jitter (the reflector's back-off).
//! - **Reads** are served from the cache with the store modes' semantics. A consistent read
//!   (`resourceVersion` unset) asks the upstream for its current resource version with a
//!   `LIST limit=1` of that resource and waits (at most `--fresh-wait-ms`) until the cache has
//!   it. The cache of a resource only advances on that resource's events and bookmarks, and a
//!   kube-apiserver sends bookmarks about once a minute, so when the wait runs out the read is
//!   forwarded to the upstream and answered from there (counted in
//!   `watchkeeper_upstream_forwarded_reads_total`): a consistent read never gets stale data.
//!   A watch without a resource version starts at the upstream's current version when the cache
//!   reaches it within the wait, else at the cache's newest revision; either way it misses no
//!   event after its start.
//! - **Writes** (create, update, patch, delete, deletecollection) are forwarded unchanged with
//!   the proxy's credentials, plus `Impersonate-User`/`Impersonate-Group`/`Impersonate-Uid`/`Impersonate-Extra-*` of
//!   the authenticated caller with `--upstream-impersonate`. The upstream's status code and body
//!   are returned unchanged, after the cache has reached the written resource version (for a
//!   delete: until the object is gone from the cache or carries the returned version), at most
//!   `--fresh-wait-ms`: a client reads its own writes through the proxy.
//!
//! ## Overload
//! The upstream sees one list and one watch per resource whatever the number of downstream
//! watchers; slow downstream watchers are the cache's business (stall and resume) and never
//! slow the upstream watch. Consistent reads cost one `LIST limit=1` each (plus the forwarded
//! read when the cache cannot prove itself fresh in time); writes cost what they cost upstream.
//! When the upstream is unreachable, reads at `resourceVersion=0` or a known version keep being
//! served from the cache, consistent reads and writes fail with 503. Subresources other than
//! `status` are not served (as in the store modes), and a forwarded answer is buffered whole.

use crate::cache::wake_relay::after_watchers;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use axum::http::{HeaderMap, HeaderValue, Method, Request, StatusCode, header};
use axum::response::Response;
use bytes::Bytes;
use futures_util::StreamExt;
use serde_json::Value;
use watchkeeper_api::{ApiError, ResourceDef, builtin_resources};
use watchkeeper_core::{Change, Revision, WatchCache, object_key};

use crate::auth::User;
use crate::cache::Resource;
use crate::config::UpstreamConfig;
use crate::request::ResourceRequest;
use crate::source::decode::{Identity, decode, parse_revision};
use crate::source::feed::{Item, Listed, Stop};

/// A watch silent for this long past its timeout is treated as broken and resumed.
const WATCH_IDLE_MARGIN: Duration = Duration::from_secs(30);

/// Counters of one cached resource's upstream traffic (for `/metrics`).
#[derive(Debug, Default)]
pub struct ResourceStats {
    /// Lists of the upstream (the first and every relist).
    pub lists: AtomicU64,
    /// Watches opened on the upstream (the first and every resume).
    pub watches: AtomicU64,
    /// Relists after a 410 or a protocol error.
    pub relists: AtomicU64,
    /// Whether an upstream watch is open now: set when it is opened (and again at each read
    /// of it, after an old one's drop), cleared when it is dropped.
    pub watch_open: AtomicBool,
    /// The newest resource version the upstream reported for this resource (lists, probes,
    /// events, bookmarks).
    pub upstream_revision: AtomicU64,
    /// Consistent reads forwarded to the upstream because the cache was not proven fresh in
    /// time.
    pub forwarded_reads: AtomicU64,
    /// Writes forwarded to the upstream.
    pub forwarded_writes: AtomicU64,
    /// Writes answered before the cache reached the written version (the wait ran out).
    pub write_wait_timeouts: AtomicU64,
}

/// Why caching-proxy mode could not start: the flag, the upstream and the cause.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    /// `--upstream-kubeconfig` cannot be read or used.
    #[error("--upstream-kubeconfig {}: {cause}", path.display())]
    Kubeconfig {
        /// The file.
        path: PathBuf,
        /// kube's error.
        cause: String,
    },
    /// `--upstream` is not a URL.
    #[error("--upstream {url:?}: not a URL: {cause}")]
    Url {
        /// The value given.
        url: String,
        /// The parse error.
        cause: String,
    },
    /// No client can be built for the upstream (TLS settings, say).
    #[error("cannot build a client for the upstream {server}: {cause}")]
    Client {
        /// The upstream's URL.
        server: String,
        /// kube's error.
        cause: String,
    },
    /// The upstream's discovery cannot be read.
    #[error("the upstream {server}: cannot read discovery {path}: {cause}")]
    Discovery {
        /// The upstream's URL.
        server: String,
        /// The discovery path.
        path: &'static str,
        /// kube's error.
        cause: String,
    },
    /// An `--upstream-resources` entry the upstream does not serve with list and watch.
    #[error(
        "the upstream {server}: --upstream-resources: {wanted:?} is not a resource the upstream serves with list and watch (it serves: {})",
        served.join(", ")
    )]
    UnknownResource {
        /// The upstream's URL.
        server: String,
        /// The entry.
        wanted: String,
        /// What it serves (`plural` or `plural.group`).
        served: Vec<String>,
    },
    /// The upstream serves no resource with list and watch.
    #[error("the upstream {server} lists no resource with the list and watch verbs")]
    NoResources {
        /// The upstream's URL.
        server: String,
    },
    /// Resources that cannot be listed with these credentials, or whose resource versions are
    /// not integers.
    #[error(
        "the upstream {server}: {} (choose the resources to cache with --upstream-resources)",
        failures.join("; ")
    )]
    Unlistable {
        /// The upstream's URL.
        server: String,
        /// One message per resource.
        failures: Vec<String>,
    },
}

impl UpstreamError {
    fn kubeconfig(path: &Path, cause: impl std::fmt::Display) -> UpstreamError {
        UpstreamError::Kubeconfig {
            path: path.to_owned(),
            cause: cause.to_string(),
        }
    }

    fn url(url: &str, cause: impl std::fmt::Display) -> UpstreamError {
        UpstreamError::Url {
            url: url.to_owned(),
            cause: cause.to_string(),
        }
    }
}

/// The upstream: a kube-rs client, the discovered resources and their counters.
pub struct UpstreamSource {
    client: kube::Client,
    /// The upstream's URL (for the logs).
    server: String,
    impersonate: bool,
    /// Whether to try streaming lists (cleared when the upstream turns out not to do them).
    streaming: AtomicBool,
    fresh_wait: Duration,
    /// Objects per page of a paged upstream list (`--upstream-list-page-size`).
    list_page: usize,
    /// `timeoutSeconds` of every upstream watch (`--upstream-watch-timeout-seconds`; the
    /// upstream ends the watch then, and it is resumed).
    watch_timeout_seconds: u64,
    /// The resources cached, in the order of the server's resources.
    pub defs: Vec<ResourceDef>,
    /// Counters, one per entry of `defs`.
    pub stats: Vec<Arc<ResourceStats>>,
}

impl std::fmt::Debug for UpstreamSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamSource")
            .field("impersonate", &self.impersonate)
            .field("fresh_wait", &self.fresh_wait)
            .field("resources", &self.defs.len())
            .finish_non_exhaustive()
    }
}

/// An upstream watch's events.
type EventStream =
    futures_util::stream::BoxStream<'static, kube::Result<kube::core::WatchEvent<Value>>>;

/// How a streaming list went.
enum Streamed {
    /// The initial state at a resource version, and the stream that goes on as the watch.
    Loaded(Revision, Vec<Arc<watchkeeper_core::Object>>, EventStream),
    /// The upstream does not do streaming lists: use paged lists from now on.
    Unsupported(String),
    /// A failure: retry after a back-off, or relist.
    Failed(Stop),
}

fn kube_stop(error: &kube::Error) -> Stop {
    match error {
        kube::Error::Api(status) if status.code == 410 => Stop::Relist(status.message.clone()),
        other => Stop::Resume(other.to_string()),
    }
}

/// The URL path of a resource's collection (in `namespace`), object, or subresource.
#[must_use]
pub fn resource_path(
    def: &ResourceDef,
    namespace: Option<&str>,
    name: Option<&str>,
    subresource: Option<&str>,
) -> String {
    let mut path = if def.group.is_empty() {
        format!("/api/{}", def.version)
    } else {
        format!("/apis/{}/{}", def.group, def.version)
    };
    if let Some(namespace) = namespace.filter(|_| def.namespaced) {
        path.push_str("/namespaces/");
        path.push_str(namespace);
    }
    path.push('/');
    path.push_str(&def.plural);
    if let Some(name) = name {
        path.push('/');
        // Decoded from the request's path (`a b`): escaped again for the upstream's.
        path.push_str(&watchkeeper_api::escape_path_segment(name));
        if let Some(sub) = subresource {
            path.push('/');
            path.push_str(sub);
        }
    }
    path
}

/// The resources of an upstream API resource list with the list and watch verbs.
fn defs_of(list: &Value, group: &str, version: &str, builtins: &[ResourceDef]) -> Vec<ResourceDef> {
    let strings = |value: Option<&Value>| -> Vec<String> {
        value
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut defs = Vec::new();
    for resource in list
        .get("resources")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let plural = resource
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let verbs = strings(resource.get("verbs"));
        if plural.is_empty()
            || plural.contains('/')
            || !verbs.iter().any(|v| v == "list")
            || !verbs.iter().any(|v| v == "watch")
        {
            continue;
        }
        let kind = resource
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let builtin = builtins
            .iter()
            .find(|d| d.group == group && d.plural == plural);
        let singular = resource
            .get("singularName")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map_or_else(|| kind.to_lowercase(), str::to_owned);
        defs.push(ResourceDef {
            group: group.to_owned(),
            version: version.to_owned(),
            kind,
            plural: plural.to_owned(),
            singular,
            short_names: strings(resource.get("shortNames")),
            namespaced: resource
                .get("namespaced")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            selectable_fields: builtin
                .map(|d| d.selectable_fields.clone())
                .unwrap_or_default(),
            trigger_field: builtin.and_then(|d| d.trigger_field.clone()),
            categories: strings(resource.get("categories")),
            printer_columns: Vec::new(),
            declared_subresources: None,
        });
    }
    defs
}

/// Whether a `/version` answer is Kubernetes 1.27 or newer.
fn supports_streaming_lists(version: &Value) -> bool {
    let number = |key: &str| {
        version
            .get(key)
            .and_then(Value::as_str)
            .map(|v| v.trim_end_matches('+'))
            .and_then(|v| v.parse::<u32>().ok())
    };
    matches!((number("major"), number("minor")), (Some(1), Some(minor)) if minor >= 27)
        || matches!(number("major"), Some(major) if major > 1)
}

impl UpstreamSource {
    /// Builds the client from the kubeconfig and/or URL, reads the upstream's discovery, and
    /// checks that its resource versions are integers.
    ///
    /// # Errors
    /// Unreadable kubeconfig, unreachable upstream, unknown `--upstream-resources`, or
    /// resource versions that are not integers (see [`UpstreamError`]).
    pub async fn connect(
        config: &UpstreamConfig,
        fresh_wait: Duration,
    ) -> Result<UpstreamSource, UpstreamError> {
        let mut kube_config = match &config.kubeconfig {
            Some(path) => {
                let kubeconfig = kube::config::Kubeconfig::read_from(path)
                    .map_err(|e| UpstreamError::kubeconfig(path, e))?;
                kube::Config::from_custom_kubeconfig(
                    kubeconfig,
                    &kube::config::KubeConfigOptions::default(),
                )
                .await
                .map_err(|e| UpstreamError::kubeconfig(path, e))?
            }
            None => {
                let url = config.url.as_deref().unwrap_or_default();
                kube::Config::new(url.parse().map_err(|e| UpstreamError::url(url, e))?)
            }
        };
        if let Some(url) = &config.url {
            kube_config.cluster_url = url.parse().map_err(|e| UpstreamError::url(url, e))?;
        }
        // Writes are forwarded once; the reflector retries lists and watches itself.
        kube_config.default_retry = false;
        let server = kube_config.cluster_url.to_string();
        let client = kube::Client::try_from(kube_config).map_err(|e| UpstreamError::Client {
            server: server.clone(),
            cause: e.to_string(),
        })?;
        let mut upstream = UpstreamSource {
            client,
            server: server.clone(),
            impersonate: config.impersonate,
            streaming: AtomicBool::new(false),
            fresh_wait,
            list_page: config.list_page_size,
            watch_timeout_seconds: config.watch_timeout_seconds,
            defs: Vec::new(),
            stats: Vec::new(),
        };
        let defs = upstream.discover(&config.resources).await?;
        if defs.is_empty() {
            return Err(UpstreamError::NoResources { server });
        }
        // Every resource must be listable with these credentials (else the proxy would never
        // be ready), and resource versions must be integers: check both, clearly, before
        // serving anything (one small LIST per resource).
        let checks = defs.iter().map(|def| {
            let upstream = &upstream;
            async move {
                let name = if def.group.is_empty() {
                    def.plural.clone()
                } else {
                    format!("{}.{}", def.plural, def.group)
                };
                let list = upstream
                    .get_json(&format!("{}?limit=1", resource_path(def, None, None, None)))
                    .await
                    .map_err(|e| format!("cannot list {name}: {e}"))?;
                parse_revision(list.pointer("/metadata/resourceVersion"))
                    .map_err(|e| format!("{name}: {e}"))
            }
        });
        let failures: Vec<String> = futures_util::future::join_all(checks)
            .await
            .into_iter()
            .filter_map(Result::err)
            .collect();
        if !failures.is_empty() {
            return Err(UpstreamError::Unlistable { server, failures });
        }
        // Streaming lists exist from Kubernetes 1.27 (behind the WatchList gate: a server with
        // it off rejects them and we fall back); older servers would take them for a plain
        // watch and never end the initial events, so they are not even tried.
        let version = upstream.get_json("/version").await.unwrap_or_default();
        upstream.streaming.store(
            config.streaming_lists && supports_streaming_lists(&version),
            Ordering::Relaxed,
        );
        upstream.stats = defs.iter().map(|_| Arc::default()).collect();
        upstream.defs = defs;
        tracing::info!(%server, resources = upstream.defs.len(), "caching the upstream");
        Ok(upstream)
    }

    async fn get_json(&self, path_and_query: &str) -> Result<Value, kube::Error> {
        let request = Request::get(path_and_query)
            .body(Vec::new())
            .map_err(kube::Error::HttpError)?;
        self.client.request::<Value>(request).await
    }

    /// Every group's preferred version's resources with list and watch, filtered by `wanted`.
    async fn discover(&self, wanted: &[String]) -> Result<Vec<ResourceDef>, UpstreamError> {
        let builtins = builtin_resources();
        let mut defs = Vec::new();
        let core = self
            .get_json("/api/v1")
            .await
            .map_err(|e| self.discovery_error("/api/v1", &e))?;
        defs.extend(defs_of(&core, "", "v1", &builtins));
        let groups = self
            .get_json("/apis")
            .await
            .map_err(|e| self.discovery_error("/apis", &e))?;
        for group in groups
            .get("groups")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let Some(group_version) = group
                .pointer("/preferredVersion/groupVersion")
                .and_then(Value::as_str)
            else {
                continue;
            };
            let Some((name, version)) = group_version.split_once('/') else {
                continue;
            };
            match self.get_json(&format!("/apis/{group_version}")).await {
                Ok(list) => defs.extend(defs_of(&list, name, version, &builtins)),
                // An unavailable aggregated API (metrics.k8s.io, say) must not stop the proxy.
                Err(error) => {
                    tracing::warn!(%group_version, %error, "skipping an API group the upstream cannot describe");
                }
            }
        }
        if wanted.is_empty() {
            return Ok(defs);
        }
        let name_of = |d: &ResourceDef| {
            if d.group.is_empty() {
                d.plural.clone()
            } else {
                format!("{}.{}", d.plural, d.group)
            }
        };
        let mut chosen = Vec::new();
        for want in wanted {
            match defs.iter().find(|d| &name_of(d) == want) {
                Some(def) => {
                    if !chosen.iter().any(|c: &ResourceDef| name_of(c) == *want) {
                        chosen.push(def.clone());
                    }
                }
                None => {
                    return Err(UpstreamError::UnknownResource {
                        server: self.server.clone(),
                        wanted: want.clone(),
                        served: defs.iter().map(name_of).collect(),
                    });
                }
            }
        }
        Ok(chosen)
    }

    fn discovery_error(&self, path: &'static str, error: &kube::Error) -> UpstreamError {
        UpstreamError::Discovery {
            server: self.server.clone(),
            path,
            cause: error.to_string(),
        }
    }

    fn index(&self, def: &ResourceDef) -> Option<usize> {
        self.defs
            .iter()
            .position(|d| d.group == def.group && d.plural == def.plural)
    }

    /// The upstream's current resource version, from a `LIST limit=1` of `def`.
    ///
    /// # Errors
    /// 503 when the upstream cannot be asked.
    pub async fn current_revision(&self, def: &ResourceDef) -> Result<Revision, ApiError> {
        let list = self
            .get_json(&format!("{}?limit=1", resource_path(def, None, None, None)))
            .await
            .map_err(|e| {
                ApiError::service_unavailable(format!(
                    "cannot read the current resource version from the upstream: {e}"
                ))
            })?;
        let revision = parse_revision(list.pointer("/metadata/resourceVersion"))
            .map_err(ApiError::service_unavailable)?;
        if let Some(stats) = self.stats_of(def) {
            stats
                .upstream_revision
                .fetch_max(revision, Ordering::Relaxed);
        }
        Ok(revision)
    }

    /// Waits at most the fresh wait for `cache` to reach `revision`; whether it did.
    async fn wait_for(&self, cache: &WatchCache, revision: Revision) -> bool {
        cache.dispatched() >= revision
            || tokio::time::timeout(self.fresh_wait, after_watchers(cache.wait_fresh(revision)))
                .await
                .is_ok()
    }

    /// Lists `def` a page at a time at one resource version.
    async fn paged_list(
        &self,
        def: &ResourceDef,
    ) -> Result<(Revision, Vec<Arc<watchkeeper_core::Object>>), Stop> {
        let base = resource_path(def, None, None, None);
        let mut objects = Vec::new();
        let mut revision = None;
        let mut token: Option<String> = None;
        loop {
            let mut query = vec![("limit", self.list_page.to_string())];
            if let Some(token) = token.take() {
                query.push(("continue", token));
            }
            let query = serde_urlencoded::to_string(&query).unwrap_or_default();
            let page = self
                .get_json(&format!("{base}?{query}"))
                .await
                .map_err(|e| kube_stop(&e))?;
            if revision.is_none() {
                revision = Some(
                    parse_revision(page.pointer("/metadata/resourceVersion"))
                        .map_err(Stop::Resume)?,
                );
            }
            let items = match page.get("items") {
                Some(Value::Array(items)) => items.clone(),
                _ => Vec::new(),
            };
            for item in items {
                objects.push(decode(def, item, Identity::Body).map_err(Stop::Resume)?);
            }
            match page.pointer("/metadata/continue").and_then(Value::as_str) {
                Some(next) if !next.is_empty() => token = Some(next.to_owned()),
                _ => break,
            }
        }
        Ok((revision.unwrap_or_default(), objects))
    }

    /// Opens a watch of `def` with `params` (besides `watch=true`, bookmarks and the timeout).
    async fn open_watch(
        &self,
        def: &ResourceDef,
        stats: &ResourceStats,
        params: &[(&str, String)],
    ) -> Result<EventStream, kube::Error> {
        let mut query = vec![
            ("watch", "true".to_owned()),
            ("allowWatchBookmarks", "true".to_owned()),
            ("timeoutSeconds", self.watch_timeout_seconds.to_string()),
        ];
        query.extend(params.iter().cloned());
        let query = serde_urlencoded::to_string(&query).unwrap_or_default();
        let path = format!("{}?{query}", resource_path(def, None, None, None));
        let request = Request::get(path)
            .body(Vec::new())
            .map_err(kube::Error::HttpError)?;
        stats.watches.fetch_add(1, Ordering::Relaxed);
        Ok(self.client.request_events::<Value>(request).await?.boxed())
    }

    /// A streaming list (`sendInitialEvents=true`): the initial state up to the
    /// `k8s.io/initial-events-end` bookmark, and the stream, which goes on as the watch.
    async fn stream_list(&self, def: &ResourceDef, stats: &ResourceStats) -> Streamed {
        let params = [
            ("sendInitialEvents", "true".to_owned()),
            ("resourceVersionMatch", "NotOlderThan".to_owned()),
        ];
        let mut stream = match self.open_watch(def, stats, &params).await {
            Ok(stream) => stream,
            Err(kube::Error::Api(status))
                if (400..500).contains(&status.code) && !matches!(status.code, 410 | 429) =>
            {
                return Streamed::Unsupported(format!("{} ({})", status.message, status.code));
            }
            Err(error) => return Streamed::Failed(kube_stop(&error)),
        };
        let idle = Duration::from_secs(self.watch_timeout_seconds) + WATCH_IDLE_MARGIN;
        let mut objects = Vec::new();
        loop {
            let event = match tokio::time::timeout(idle, stream.next()).await {
                Ok(Some(Ok(event))) => event,
                Ok(Some(Err(error))) => return Streamed::Failed(kube_stop(&error)),
                Ok(None) => {
                    return Streamed::Failed(Stop::Resume(
                        "the streaming list ended before its initial events did".to_owned(),
                    ));
                }
                Err(_) => {
                    return Streamed::Failed(Stop::Resume(
                        "the streaming list went silent".to_owned(),
                    ));
                }
            };
            match event {
                kube::core::WatchEvent::Added(object) => {
                    match decode(def, object, Identity::Body) {
                        Ok(object) => objects.push(object),
                        Err(error) => return Streamed::Failed(Stop::Resume(error)),
                    }
                }
                kube::core::WatchEvent::Bookmark(bookmark)
                    if bookmark
                        .metadata
                        .annotations
                        .get("k8s.io/initial-events-end")
                        .is_some_and(|v| v == "true") =>
                {
                    return match bookmark.metadata.resource_version.parse::<Revision>() {
                        Ok(revision) => Streamed::Loaded(revision, objects, stream),
                        Err(_) => Streamed::Failed(Stop::Resume(format!(
                            "the upstream's bookmark resourceVersion {:?} is not an integer",
                            bookmark.metadata.resource_version
                        ))),
                    };
                }
                kube::core::WatchEvent::Error(status) => {
                    return Streamed::Failed(if status.code == 410 {
                        Stop::Relist(status.message.clone())
                    } else {
                        Stop::Resume(format!("{} ({})", status.message, status.code))
                    });
                }
                // Anything else before the end of the initial events: the upstream treats
                // this as a plain watch.
                other => {
                    return Streamed::Unsupported(format!(
                        "{other:?} before the initial-events-end bookmark"
                    ));
                }
            }
        }
    }

    /// Sends a request to the upstream as the proxy (or impersonating `user`); the status,
    /// content type and body of the answer.
    async fn send(
        &self,
        method: &Method,
        path_and_query: &str,
        headers: &HeaderMap,
        body: Bytes,
        user: &User,
    ) -> Result<(StatusCode, HeaderMap, Bytes), ApiError> {
        let mut builder = Request::builder()
            .method(method.clone())
            .uri(path_and_query);
        for name in [header::CONTENT_TYPE, header::ACCEPT] {
            if let Some(value) = headers.get(&name) {
                builder = builder.header(name, value.clone());
            }
        }
        if self.impersonate {
            for (name, value) in impersonation(user) {
                builder = builder.header(name, value);
            }
        }
        let request = builder
            .body(kube::client::Body::from(body.to_vec()))
            .map_err(|e| ApiError::bad_request(format!("cannot forward the request: {e}")))?;
        let unreachable = |e: &dyn std::fmt::Display| {
            ApiError::service_unavailable(format!("cannot reach the upstream API server: {e}"))
        };
        let response = self
            .client
            .send(request)
            .await
            .map_err(|e| unreachable(&e))?;
        let code = response.status();
        // The headers a client acts on; hop-by-hop and framing headers are the proxy's own.
        let mut kept = HeaderMap::new();
        for name in [header::CONTENT_TYPE, header::RETRY_AFTER, header::WARNING] {
            for value in response.headers().get_all(&name) {
                kept.append(name.clone(), value.clone());
            }
        }
        let bytes = axum::body::to_bytes(axum::body::Body::new(response.into_body()), usize::MAX)
            .await
            .map_err(|e| unreachable(&e))?;
        Ok((code, kept, bytes))
    }

    /// Read-your-writes: waits (at most the fresh wait) until the cache reflects a successful
    /// write whose answer was `answer`. Whether it did.
    async fn settle_write(
        &self,
        resource: &Resource,
        verb: &str,
        namespace: Option<&str>,
        name: Option<&str>,
        headers: &HeaderMap,
        answer: &Bytes,
    ) -> bool {
        let (def, cache) = (&resource.def, resource.cache());
        let protobuf = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(watchkeeper_api::is_protobuf_media_type);
        let object: Option<Value> = if protobuf {
            watchkeeper_api::decode_protobuf(def, answer).ok()
        } else {
            serde_json::from_slice(answer).ok()
        };
        let object = object.filter(|o| o.get("kind").and_then(Value::as_str) != Some("Status"));
        let revision = object
            .as_ref()
            .and_then(|o| parse_revision(o.pointer("/metadata/resourceVersion")).ok());
        let terminating = object
            .as_ref()
            .is_some_and(|o| o.pointer("/metadata/deletionTimestamp").is_some());
        if verb == "DELETE"
            && let Some(name) = name
        {
            // Deleted at once, the answer carries the object's last version, not the
            // deletion's: wait until the object is gone from the cache. Marked for deletion
            // (finalizers, grace period), wait until the cache has the marked version.
            let key = object_key(
                if def.namespaced {
                    namespace.unwrap_or_default()
                } else {
                    ""
                },
                name,
            );
            let marked = revision.filter(|_| terminating);
            let wait = async {
                loop {
                    let (current, _) = cache.get(&key);
                    match (current, marked) {
                        (None, _) => return,
                        (Some(current), Some(marked)) if current.resource_version() >= marked => {
                            return;
                        }
                        _ => {
                            cache.wait_fresh(cache.dispatched() + 1).await;
                        }
                    }
                }
            };
            return tokio::time::timeout(self.fresh_wait, wait).await.is_ok();
        }
        match revision {
            Some(revision) if verb != "DELETECOLLECTION" => self.wait_for(cache, revision).await,
            _ => match self.current_revision(def).await {
                Ok(revision) => self.wait_for(cache, revision).await,
                Err(_) => false,
            },
        }
    }

    /// The upstream's URL.
    #[must_use]
    pub fn server(&self) -> &str {
        &self.server
    }

    /// Whether the caches load with streaming lists now.
    #[must_use]
    pub fn streaming_lists(&self) -> bool {
        self.streaming.load(Ordering::Relaxed)
    }

    /// The counters of `def`, if it is cached.
    #[must_use]
    pub fn stats_of(&self, def: &ResourceDef) -> Option<&ResourceStats> {
        self.index(def).map(|i| &*self.stats[i])
    }

    /// Forwards a read the cache cannot serve (counted in `forwarded_reads`).
    ///
    /// # Errors
    /// 503 when the upstream cannot be reached.
    pub async fn forward_read(
        &self,
        request: &ResourceRequest<'_>,
        def: &ResourceDef,
    ) -> Result<Response, ApiError> {
        if let Some(stats) = self.stats_of(def) {
            stats.forwarded_reads.fetch_add(1, Ordering::Relaxed);
        }
        let context = request.context;
        self.send(
            &context.method,
            &path_and_query(request, def),
            &context.headers,
            Bytes::new(),
            &context.user,
        )
        .await
        .map(|(code, kept, body)| respond(code, kept, body))
    }

    /// Forwards a write unchanged (impersonating the caller with `--upstream-impersonate`)
    /// and answers with the upstream's answer once the cache reflects it (at most the fresh
    /// wait; see the module docs).
    ///
    /// # Errors
    /// 503 when the upstream cannot be reached.
    pub async fn write(
        &self,
        request: &ResourceRequest<'_>,
        resource: &Resource,
    ) -> Result<Response, ApiError> {
        let def = &resource.def;
        let context = request.context;
        if let Some(stats) = self.stats_of(def) {
            stats.forwarded_writes.fetch_add(1, Ordering::Relaxed);
        }
        let (code, kept, answer) = self
            .send(
                &context.method,
                &path_and_query(request, def),
                &context.headers,
                context.body.clone(),
                &context.user,
            )
            .await?;
        // A dry run changes nothing upstream: nothing to wait for.
        if code.is_success() && !request.dry_run() {
            let settled = self
                .settle_write(
                    resource,
                    request.verb.label(),
                    request.target.namespace,
                    request.target.name,
                    &kept,
                    &answer,
                )
                .await;
            if !settled && let Some(stats) = self.stats_of(def) {
                stats.write_wait_timeouts.fetch_add(1, Ordering::Relaxed);
            }
        }
        Ok(respond(code, kept, answer))
    }

    /// Forwards `request` to the upstream as it is and answers with the upstream's answer,
    /// nothing waited for (a read the cache cannot answer: a pod's logs).
    ///
    /// # Errors
    /// The upstream cannot be reached.
    pub async fn forward(
        &self,
        request: &ResourceRequest<'_>,
        resource: &Resource,
    ) -> Result<Response, ApiError> {
        let context = request.context;
        let (code, kept, answer) = self
            .send(
                &context.method,
                &path_and_query(request, &resource.def),
                &context.headers,
                context.body.clone(),
                &context.user,
            )
            .await?;
        Ok(respond(code, kept, answer))
    }
}

/// A request through a `proxy` subresource (`pods/p/proxy/...`, see `http::resource_proxy`),
/// forwarded to the upstream as it came.
pub struct ProxiedRequest<'a> {
    /// The method.
    pub method: &'a Method,
    /// The escaped path and query, as the client sent them.
    pub path_and_query: &'a str,
    /// The headers to pass on (the caller's credentials and hop-by-hop headers removed).
    pub headers: HeaderMap,
    /// The body.
    pub body: Bytes,
    /// The caller (impersonated with `--upstream-impersonate`).
    pub user: &'a User,
}

impl UpstreamSource {
    /// Sends a `proxy` subresource's request to the upstream unchanged and answers with its
    /// status, headers and body, the body streamed as it arrives (never read whole).
    ///
    /// # Errors
    /// 503 when the upstream cannot be reached.
    pub async fn forward_proxied(
        &self,
        request: ProxiedRequest<'_>,
    ) -> Result<axum::http::Response<kube::client::Body>, ApiError> {
        let mut builder = Request::builder()
            .method(request.method.clone())
            .uri(request.path_and_query);
        if let Some(headers) = builder.headers_mut() {
            *headers = request.headers;
        }
        if self.impersonate {
            for (name, value) in impersonation(request.user) {
                builder = builder.header(name, value);
            }
        }
        let http = builder
            .body(kube::client::Body::from(request.body.to_vec()))
            .map_err(|e| ApiError::bad_request(format!("cannot forward the request: {e}")))?;
        self.client.send(http).await.map_err(|e| {
            ApiError::service_unavailable(format!("cannot reach the upstream API server: {e}"))
        })
    }
}

/// The upstream path and query of a request for `def`.
fn path_and_query(request: &ResourceRequest<'_>, def: &ResourceDef) -> String {
    let target = &request.target;
    let path = resource_path(def, target.namespace, target.name, target.subresource);
    match request.context.query.as_deref() {
        Some(query) if !query.is_empty() => format!("{path}?{query}"),
        _ => path,
    }
}

/// The upstream's side of one resource's reflection.
#[derive(Debug)]
pub struct UpstreamLister {
    upstream: Arc<UpstreamSource>,
    def: ResourceDef,
    stats: Arc<ResourceStats>,
}

impl UpstreamLister {
    /// The reflection of `def` (one of the upstream's resources).
    #[must_use]
    pub fn new(upstream: &Arc<UpstreamSource>, def: &ResourceDef) -> UpstreamLister {
        let stats = upstream
            .index(def)
            .map(|i| upstream.stats[i].clone())
            .unwrap_or_default();
        UpstreamLister {
            upstream: upstream.clone(),
            def: def.clone(),
            stats,
        }
    }

    /// The resource's name, for the logs.
    #[must_use]
    pub fn resource(&self) -> &str {
        &self.def.plural
    }

    /// Lists the resource: a streaming list when the upstream does them (its stream goes on
    /// as the watch), else a paged list at one resource version.
    pub async fn list(&self, first: bool) -> Result<(Listed, Option<UpstreamEvents>), Stop> {
        let (def, stats) = (&self.def, &self.stats);
        let mut listed = None;
        if self.upstream.streaming.load(Ordering::Relaxed) {
            match self.upstream.stream_list(def, stats).await {
                Streamed::Loaded(revision, objects, stream) => {
                    listed = Some((revision, objects, Some(self.events(stream))));
                }
                Streamed::Unsupported(reason) => {
                    tracing::info!(resource = %def.plural, %reason, "the upstream does not do streaming lists; using paged lists");
                    self.upstream.streaming.store(false, Ordering::Relaxed);
                }
                Streamed::Failed(stop) => return Err(stop),
            }
        }
        let (revision, objects, events) = match listed {
            Some(listed) => listed,
            None => {
                let (revision, objects) = self.upstream.paged_list(def).await?;
                (revision, objects, None)
            }
        };
        stats.lists.fetch_add(1, Ordering::Relaxed);
        if !first {
            stats.relists.fetch_add(1, Ordering::Relaxed);
        }
        Ok((
            Listed {
                revision,
                objects: vec![objects],
                ready_at: revision,
            },
            events,
        ))
    }

    /// Watches the resource after `after`.
    pub async fn watch(&self, after: Revision) -> Result<UpstreamEvents, Stop> {
        let params = [("resourceVersion", after.to_string())];
        match self
            .upstream
            .open_watch(&self.def, &self.stats, &params)
            .await
        {
            Ok(stream) => Ok(self.events(stream)),
            Err(error) => Err(kube_stop(&error)),
        }
    }

    fn events(&self, stream: EventStream) -> UpstreamEvents {
        // Open from now: before a streaming list's objects reach the caches, so whoever has
        // read them reads the watch open too.
        self.stats.watch_open.store(true, Ordering::Relaxed);
        UpstreamEvents {
            stream,
            def: self.def.clone(),
            stats: self.stats.clone(),
            idle: Duration::from_secs(self.upstream.watch_timeout_seconds) + WATCH_IDLE_MARGIN,
        }
    }

    /// Records the newest resource version the upstream reported.
    pub fn observed(&self, revision: Revision) {
        self.stats
            .upstream_revision
            .fetch_max(revision, Ordering::Relaxed);
    }
}

/// An open upstream watch of one resource.
pub struct UpstreamEvents {
    stream: EventStream,
    def: ResourceDef,
    stats: Arc<ResourceStats>,
    /// A watch silent for this long is treated as broken.
    idle: Duration,
}

impl Drop for UpstreamEvents {
    fn drop(&mut self) {
        self.stats.watch_open.store(false, Ordering::Relaxed);
    }
}

impl UpstreamEvents {
    /// The next event (one revision) or bookmark (progress) after `last`, or why the watch
    /// stopped.
    pub async fn next(&mut self, last: Revision) -> Item {
        let def = &self.def;
        self.stats.watch_open.store(true, Ordering::Relaxed);
        loop {
            let item = match tokio::time::timeout(self.idle, self.stream.next()).await {
                Ok(Some(item)) => item,
                Ok(None) => return Item::Stopped(Stop::Resume("the watch ended".to_owned())),
                Err(_) => {
                    return Item::Stopped(Stop::Resume("the watch went silent".to_owned()));
                }
            };
            let event = match item {
                Ok(event) => event,
                Err(error) => return Item::Stopped(kube_stop(&error)),
            };
            let (revision, change) = match event {
                kube::core::WatchEvent::Added(object)
                | kube::core::WatchEvent::Modified(object) => {
                    match decode(def, object, Identity::Body) {
                        Ok(object) => (object.resource_version(), Some(Change::put(object))),
                        Err(error) => return Item::Stopped(Stop::Relist(error)),
                    }
                }
                kube::core::WatchEvent::Deleted(object) => {
                    match decode(def, object, Identity::Body) {
                        Ok(object) => (
                            object.resource_version(),
                            Some(Change::delete(object_key(
                                object.namespace(),
                                object.name(),
                            ))),
                        ),
                        Err(error) => return Item::Stopped(Stop::Relist(error)),
                    }
                }
                kube::core::WatchEvent::Bookmark(bookmark) => {
                    match bookmark.metadata.resource_version.parse::<Revision>() {
                        Ok(revision) => (revision, None),
                        Err(_) => {
                            return Item::Stopped(Stop::Relist(format!(
                                "the upstream's bookmark resourceVersion {:?} is not an integer",
                                bookmark.metadata.resource_version
                            )));
                        }
                    }
                }
                kube::core::WatchEvent::Error(status) if status.code == 410 => {
                    return Item::Stopped(Stop::Relist(status.message.clone()));
                }
                kube::core::WatchEvent::Error(status) => {
                    return Item::Stopped(Stop::Resume(format!(
                        "{} ({})",
                        status.message, status.code
                    )));
                }
            };
            self.stats
                .upstream_revision
                .fetch_max(revision, Ordering::Relaxed);
            match change {
                Some(change) if revision > last => {
                    return Item::Changes(revision, BTreeMap::from([(0, vec![change])]));
                }
                Some(_) => {
                    return Item::Stopped(Stop::Relist(format!(
                        "the upstream sent resourceVersion {revision} after {last}: out of order"
                    )));
                }
                None if revision > last => return Item::Progress(revision),
                None => {}
            }
        }
    }
}

/// The impersonation headers for `user`: its name, uid, groups and extra
/// (`Impersonate-Extra-<key>`, the key escaped as client-go's `headerKeyEscape` escapes it).
fn impersonation(user: &User) -> Vec<(String, HeaderValue)> {
    let mut headers = Vec::new();
    if let Ok(value) = HeaderValue::from_str(&user.name) {
        headers.push(("Impersonate-User".to_owned(), value));
    }
    if !user.uid.is_empty()
        && let Ok(value) = HeaderValue::from_str(&user.uid)
    {
        headers.push(("Impersonate-Uid".to_owned(), value));
    }
    for group in &user.groups {
        if let Ok(value) = HeaderValue::from_str(group) {
            headers.push(("Impersonate-Group".to_owned(), value));
        }
    }
    for (key, values) in &user.extra {
        let name = format!("Impersonate-Extra-{}", escape_extra_key(key));
        for value in values {
            if let Ok(value) = HeaderValue::from_str(value) {
                headers.push((name.clone(), value));
            }
        }
    }
    headers
}

/// An extra's key in a header name, as client-go escapes it: the bytes a header name may hold
/// (letters, digits, ``!#$&'*+-.^_`|~``) kept, every other `%XX`.
fn escape_extra_key(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    for byte in key.bytes() {
        if byte.is_ascii_alphanumeric() || b"!#$&'*+-.^_`|~".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

fn respond(code: StatusCode, mut headers: HeaderMap, body: Bytes) -> Response {
    let mut response = Response::new(axum::body::Body::from(body));
    *response.status_mut() = code;
    headers
        .entry(header::CONTENT_TYPE)
        .or_insert_with(|| HeaderValue::from_static("application/json"));
    *response.headers_mut() = headers;
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn resource_versions_must_be_integers() {
        assert_eq!(parse_revision(Some(&json!("42"))), Ok(42));
        let err = parse_revision(Some(&json!("abc"))).unwrap_err();
        assert!(err.contains("not an unsigned integer"), "{err}");
        assert!(parse_revision(None).is_err());
    }

    #[test]
    fn discovery_keeps_list_and_watch_resources() {
        let list = json!({"resources": [
            {"name": "pods", "singularName": "pod", "namespaced": true, "kind": "Pod", "verbs": ["get", "list", "watch"], "shortNames": ["po"]},
            {"name": "pods/log", "namespaced": true, "kind": "Pod", "verbs": ["get"]},
            {"name": "bindings", "namespaced": true, "kind": "Binding", "verbs": ["create"]},
            {"name": "nodes", "singularName": "", "namespaced": false, "kind": "Node", "verbs": ["list", "watch"]},
        ]});
        let defs = defs_of(&list, "", "v1", &builtin_resources());
        let names: Vec<&str> = defs.iter().map(|d| d.plural.as_str()).collect();
        assert_eq!(names, ["pods", "nodes"]);
        assert_eq!(defs[0].short_names, ["po"]);
        assert_eq!(defs[0].trigger_field.as_deref(), Some("spec.nodeName"));
        assert_eq!(defs[1].singular, "node");
        assert!(!defs[1].namespaced);
    }

    #[test]
    fn paths_and_objects() {
        let defs = builtin_resources();
        let pods = defs.iter().find(|d| d.plural == "pods").unwrap();
        assert_eq!(
            resource_path(pods, Some("ns"), Some("p"), Some("status")),
            "/api/v1/namespaces/ns/pods/p/status"
        );
        assert_eq!(resource_path(pods, None, None, None), "/api/v1/pods");
        let object = decode(
            pods,
            json!({"metadata": {"name": "p", "namespace": "ns", "resourceVersion": "7", "labels": {"a": "b"}}, "spec": {"nodeName": "n1"}}),
            Identity::Body,
        )
        .unwrap();
        assert_eq!(object.key().as_ref(), "ns/p");
        assert_eq!(object.resource_version(), 7);
        assert_eq!(object.body()["kind"], "Pod");
        assert!(
            decode(
                pods,
                json!({"metadata": {"name": "p", "resourceVersion": "x"}}),
                Identity::Body,
            )
            .is_err()
        );
    }

    #[test]
    fn streaming_lists_from_kubernetes_1_27() {
        for (major, minor, expected) in [
            ("1", "26", false),
            ("1", "27", true),
            ("1", "33+", true),
            ("2", "0", true),
            ("x", "40", false),
        ] {
            let version = json!({"major": major, "minor": minor});
            assert_eq!(supports_streaming_lists(&version), expected, "{version}");
        }
        assert!(!supports_streaming_lists(&Value::Null));
    }

    #[test]
    fn impersonation_headers_name_the_caller() {
        let user = User {
            name: "alice".into(),
            uid: "u1".into(),
            groups: vec!["dev".into(), "system:authenticated".into()],
            extra: [(
                "example.com/team".to_owned(),
                vec!["a".to_owned(), "b".to_owned()],
            )]
            .into_iter()
            .collect(),
        };
        let headers: Vec<(String, String)> = impersonation(&user)
            .into_iter()
            .map(|(k, v)| (k, v.to_str().unwrap().to_owned()))
            .collect();
        let pair = |k: &str, v: &str| (k.to_owned(), v.to_owned());
        assert_eq!(
            headers,
            [
                pair("Impersonate-User", "alice"),
                pair("Impersonate-Uid", "u1"),
                pair("Impersonate-Group", "dev"),
                pair("Impersonate-Group", "system:authenticated"),
                pair("Impersonate-Extra-example.com%2Fteam", "a"),
                pair("Impersonate-Extra-example.com%2Fteam", "b"),
            ]
        );
    }
}

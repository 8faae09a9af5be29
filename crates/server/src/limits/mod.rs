//! Request limits: the layer in front of the handler that keeps a few bad (or many) clients
//! from exhausting the server, with kube-apiserver's answers.
//!
//! ## What is bounded, and the answer when a bound is hit
//! Every refusal is a `metav1.Status` with the code below, counted in `/metrics` as
//! `watchkeeper_limit_rejections_total{limit="..."}`.
//!
//! | limit (flag / TOML key)                       | default | answer |
//! |-----------------------------------------------|---------|--------|
//! | `max-header-bytes` (request line + headers)   | 1 MiB   | 431 RequestHeaderFieldsTooLarge |
//! | `max-request-body-bytes`                      | 3 MiB   | 413 RequestEntityTooLarge |
//! | `request-read-timeout-seconds` (body)         | 60 s    | 408 Timeout |
//! | `max-requests-inflight` (non-mutating, non-watch) | 400  | 429 TooManyRequests, `Retry-After: 1` |
//! | `max-mutating-requests-inflight`              | 200     | 429 TooManyRequests, `Retry-After: 1` |
//! | `max-watches` (whole server)                  | 10000   | 429 TooManyRequests, `Retry-After: 1` |
//! | `max-watches-per-user`                        | 1000    | 429 TooManyRequests, `Retry-After: 1` |
//! | `max-watches-per-connection` (HTTP/2 streams) | 250     | 429 TooManyRequests, `Retry-After: 1` |
//!
//! A 429 carries `details.retryAfterSeconds` and the `Retry-After` header, as kube-apiserver's
//! max-in-flight filter does. `0` turns the in-flight and watch limits off (kube's convention).
//! The object size (1.5 MiB of JSON, etcd's request limit as kube-apiserver uses it) is checked
//! by object validation in the api crate (413).
//!
//! ## Order
//! 1. header size, 2. authentication (401 before anything is read or counted), 3. watch
//!    slots or an in-flight slot (so a slow body holds a slot: the number of bodies being read,
//!    and the memory they take, is bounded by the in-flight limits times the body limit),
//! 4. the body, read whole within the size and time bounds. The handler then sees a complete
//!    body. In-flight slots are held until the handler returns; watch slots until the watch
//!    response body is dropped (the watch ended or the client went away).
//!
//! ## Memory of a client that never reads
//! Such a watch costs its queue (at most `queue-capacity-max` items, each a shared pointer to
//! an event the cache keeps anyway), the connection's buffered response (hyper's buffer,
//! bounded by `max-header-bytes` + 16 KiB, see the connection layer in `http`), and a fixed per-connection
//! overhead; it is released at its deadline (`timeoutSeconds`). README's "Limits" section
//! gives the bound that `tests/limits.rs` checks with 10,000 such clients.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, header};
use axum::middleware::Next;
use axum::response::Response;
use futures_util::StreamExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use watchkeeper_api::ApiError;

use crate::auth::{Auth, PeerIdentity};
pub use crate::config::LimitsConfig;
use crate::respond::error_response;

/// Per-connection state, in every request's extensions (the connection layer creates it).
#[derive(Debug, Default)]
pub struct Connection {
    /// The verified client certificate's user, if any.
    pub peer: Option<PeerIdentity>,
    /// Watches open on this connection (HTTP/2 multiplexes many).
    pub watches: AtomicUsize,
    /// Whether the connection is TLS.
    pub tls: bool,
    /// The client's address (handlers see it as axum's `ConnectInfo`).
    pub remote: Option<std::net::SocketAddr>,
    /// Notified when a watch on this connection outlived its deadline: its response is stuck
    /// behind a client that does not read, and closing the connection is the only way to
    /// reclaim what it holds.
    pub release: tokio::sync::Notify,
}

/// Connections currently open (for `/metrics`; counted by the connection layer).
pub static OPEN_CONNECTIONS: AtomicUsize = AtomicUsize::new(0);
/// TLS handshakes that failed or timed out (for `/metrics`; counted by the connection layer).
pub static HANDSHAKE_FAILURES: AtomicUsize = AtomicUsize::new(0);

/// The state of the [`layer`]: the limits and who is asking.
#[derive(Clone, Debug)]
pub struct LayerState {
    /// The limits' live state.
    pub limits: Arc<Limits>,
    /// Authentication (401 before anything is read or counted).
    pub auth: Arc<Auth>,
}

/// Seconds a 429 asks the client to wait (kube-apiserver's max-in-flight filter uses 1).
pub const RETRY_AFTER_SECONDS: u32 = 1;

/// Which limit refused a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    /// Headers too large.
    Header,
    /// Body too large.
    RequestBody,
    /// Body not received in time.
    BodyTimeout,
    /// Non-mutating in-flight requests.
    Inflight,
    /// Mutating in-flight requests.
    MutatingInflight,
    /// Watches on the server.
    Watches,
    /// Watches of one user.
    WatchesPerUser,
    /// Watches on one connection.
    WatchesPerConnection,
}

impl Limit {
    /// Every limit, in the order `/metrics` lists them.
    pub const ALL: [Limit; 8] = [
        Limit::Header,
        Limit::RequestBody,
        Limit::BodyTimeout,
        Limit::Inflight,
        Limit::MutatingInflight,
        Limit::Watches,
        Limit::WatchesPerUser,
        Limit::WatchesPerConnection,
    ];

    /// The metric label.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Limit::Header => "header_bytes",
            Limit::RequestBody => "request_body_bytes",
            Limit::BodyTimeout => "request_read_timeout",
            Limit::Inflight => "requests_inflight",
            Limit::MutatingInflight => "mutating_requests_inflight",
            Limit::Watches => "watches",
            Limit::WatchesPerUser => "watches_per_user",
            Limit::WatchesPerConnection => "watches_per_connection",
        }
    }
}

/// The limits' live state.
#[derive(Debug)]
pub struct Limits {
    config: LimitsConfig,
    /// `--min-request-timeout-seconds`: a watch without `timeoutSeconds` ends by twice this.
    min_request_timeout: Duration,
    readonly: Option<Arc<Semaphore>>,
    mutating: Option<Arc<Semaphore>>,
    watches: AtomicUsize,
    per_user: Mutex<HashMap<String, usize>>,
    rejections: [AtomicU64; 8],
}

impl Limits {
    /// Fresh state for `config`; watches without `timeoutSeconds` end by twice
    /// `min_request_timeout`.
    #[must_use]
    pub fn new(config: &LimitsConfig, min_request_timeout: Duration) -> Limits {
        let semaphore = |n: usize| (n > 0).then(|| Arc::new(Semaphore::new(n)));
        Limits {
            config: config.clone(),
            min_request_timeout,
            readonly: semaphore(config.requests_inflight_max),
            mutating: semaphore(config.mutating_requests_inflight_max),
            watches: AtomicUsize::new(0),
            per_user: Mutex::new(HashMap::new()),
            rejections: Default::default(),
        }
    }

    /// Requests refused by `limit` so far.
    #[must_use]
    pub fn rejections(&self, limit: Limit) -> u64 {
        self.rejections[limit as usize].load(Ordering::Relaxed)
    }

    /// Watches open now (those that passed this layer).
    #[must_use]
    pub fn open_watches(&self) -> usize {
        self.watches.load(Ordering::Relaxed)
    }

    /// Requests holding an in-flight slot now (mutating or not).
    #[must_use]
    pub fn inflight(&self, mutating: bool) -> usize {
        let (semaphore, max) = if mutating {
            (&self.mutating, self.config.mutating_requests_inflight_max)
        } else {
            (&self.readonly, self.config.requests_inflight_max)
        };
        semaphore
            .as_ref()
            .map_or(0, |s| max.saturating_sub(s.available_permits()))
    }

    fn reject(&self, limit: Limit, error: &ApiError) -> Response {
        self.rejections[limit as usize].fetch_add(1, Ordering::Relaxed);
        error_response(error)
    }

    fn too_many(limit: Limit, message: String) -> Refusal {
        (
            limit,
            ApiError::too_many_requests(message, RETRY_AFTER_SECONDS),
        )
    }

    /// Takes a watch slot for `user` on `connection`, or the 429 to answer.
    fn admit_watch(
        self: &Arc<Self>,
        user: &str,
        connection: Option<&Arc<Connection>>,
    ) -> Result<WatchSlot, Refusal> {
        let c = &self.config;
        if let Some(connection) = connection {
            let before = connection.watches.fetch_add(1, Ordering::AcqRel);
            if c.watches_per_connection_max > 0 && before >= c.watches_per_connection_max {
                connection.watches.fetch_sub(1, Ordering::AcqRel);
                return Err(Self::too_many(
                    Limit::WatchesPerConnection,
                    format!(
                        "Too many requests: this connection already has {before} watches open (the limit per connection is {}); open another connection or try again later",
                        c.watches_per_connection_max
                    ),
                ));
            }
        }
        // From here on the slot's Drop undoes what was taken.
        let mut slot = WatchSlot {
            limits: self.clone(),
            user: None,
            total: false,
            connection: connection.cloned(),
            release: None,
        };
        let before = self.watches.fetch_add(1, Ordering::AcqRel);
        slot.total = true;
        if c.watches_max > 0 && before >= c.watches_max {
            return Err(Self::too_many(
                Limit::Watches,
                format!(
                    "Too many requests: the server has {before} watches open, its limit; please try again later"
                ),
            ));
        }
        let mut per_user = self
            .per_user
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let count = per_user.entry(user.to_owned()).or_default();
        if c.watches_per_user_max > 0 && *count >= c.watches_per_user_max {
            let count = *count;
            drop(per_user);
            return Err(Self::too_many(
                Limit::WatchesPerUser,
                format!(
                    "Too many requests: user {user:?} already has {count} watches open (the limit per user is {}); please try again later",
                    c.watches_per_user_max
                ),
            ));
        }
        *count += 1;
        slot.user = Some(user.to_owned());
        Ok(slot)
    }

    /// Takes an in-flight slot (`None` when unlimited), or the 429 to answer.
    fn admit_request(&self, mutating: bool) -> Result<Option<OwnedSemaphorePermit>, Refusal> {
        let (semaphore, limit) = if mutating {
            (&self.mutating, Limit::MutatingInflight)
        } else {
            (&self.readonly, Limit::Inflight)
        };
        let Some(semaphore) = semaphore else {
            return Ok(None);
        };
        semaphore
            .clone()
            .try_acquire_owned()
            .map(Some)
            .map_err(|_| {
                Self::too_many(
                    limit,
                    "Too many requests, please try again later.".to_owned(),
                )
            })
    }
}

/// The limit that refused a request and the Status to answer.
type Refusal = (Limit, ApiError);

/// A watch's slots, released when dropped (with the response body).
struct WatchSlot {
    limits: Arc<Limits>,
    user: Option<String>,
    total: bool,
    connection: Option<Arc<Connection>>,
    /// Closes the connection if the watch outlives its deadline (aborted when it ends).
    release: Option<tokio::task::JoinHandle<()>>,
}

impl WatchSlot {
    /// Arms the release: `after` from now, the connection is closed unless the slot is gone.
    fn release_after(&mut self, after: Duration) {
        if let Some(connection) = &self.connection {
            let connection = connection.clone();
            self.release = Some(tokio::spawn(async move {
                tokio::time::sleep(after).await;
                tracing::debug!("a watch outlived its deadline: closing its connection");
                connection.release.notify_one();
            }));
        }
    }
}

impl Drop for WatchSlot {
    fn drop(&mut self) {
        if let Some(release) = &self.release {
            release.abort();
        }
        if let Some(connection) = &self.connection {
            connection.watches.fetch_sub(1, Ordering::AcqRel);
        }
        if self.total {
            self.limits.watches.fetch_sub(1, Ordering::AcqRel);
        }
        if let Some(user) = &self.user {
            let mut per_user = self
                .limits
                .per_user
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some(count) = per_user.get_mut(user) {
                *count -= 1;
                if *count == 0 {
                    per_user.remove(user);
                }
            }
        }
    }
}

/// Whether a request is a watch (the `/watch/` path or `watch=true`), as the handler decides.
#[must_use]
pub fn is_watch(method: &Method, path: &str, query: Option<&str>) -> bool {
    watch_options(method, path, query).is_some()
}

/// The options of a watch request, `None` for any other request.
fn watch_options(
    method: &Method,
    path: &str,
    query: Option<&str>,
) -> Option<watchkeeper_api::query::Options> {
    if *method != Method::GET {
        return None;
    }
    let mut segments = path.split('/').filter(|s| !s.is_empty());
    let watch_path = match segments.next() {
        Some("api") => segments.nth(1) == Some("watch"),
        Some("apis") => segments.nth(2) == Some("watch"),
        _ => false,
    };
    let options = watchkeeper_api::query::Options::parse(query).ok();
    match options {
        Some(options) if watch_path || options.watch => Some(options),
        None if watch_path => Some(watchkeeper_api::query::Options::parse(None).ok()?),
        _ => None,
    }
}

/// Bytes of the request line and headers, counted as on the wire.
fn header_bytes(request: &Request) -> usize {
    let line = request.method().as_str().len()
        + request
            .uri()
            .path_and_query()
            .map_or(1, |pq| pq.as_str().len())
        + 12;
    line + request
        .headers()
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + 4)
        .sum::<usize>()
}

/// Key safety: the segments of an `/api` or `/apis` path become parts of a store key (the
/// namespace and the name), so each must be a valid path segment name as kube-apiserver
/// requires (`IsValidPathSegmentName`): not empty (one trailing slash is allowed), not `.` or `..`, without `/` (the split) or
/// `%` (no escaped slash or dot survives to the key). Names and namespaces in bodies are
/// validated as DNS names by the api crate, and the handler refuses a body whose name or
/// namespace differs from the URL's.
///
/// # Errors
/// 400 BadRequest naming the segment.
pub fn check_path(path: &str) -> Result<(), ApiError> {
    let Some(rest) = path
        .strip_prefix("/api/")
        .or_else(|| path.strip_prefix("/apis/"))
    else {
        return Ok(());
    };
    // One trailing slash is harmless (`/apis/`); an empty segment inside is not.
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    if rest.is_empty() {
        return Ok(());
    }
    for segment in rest.split('/') {
        let problem = match segment {
            "" => "may not be empty",
            "." | ".." => "may not be '.' or '..'",
            _ if segment.contains('%') => "may not contain '%'",
            _ if segment.chars().any(char::is_control) => "may not contain control characters",
            _ => continue,
        };
        return Err(ApiError::bad_request(format!(
            "invalid path {path:?}: the segment {segment:?} {problem}"
        )));
    }
    Ok(())
}

/// The layer (axum middleware) applying every limit; see the module docs for the order.
pub async fn layer(State(state): State<LayerState>, request: Request, next: Next) -> Response {
    let limits = &state.limits;
    let config = &limits.config;
    let size = header_bytes(&request);
    if size > config.header_bytes_max {
        return limits.reject(
            Limit::Header,
            &ApiError::new(
                431,
                "RequestHeaderFieldsTooLarge",
                format!(
                    "the request line and headers are {size} bytes, more than the limit of {} bytes",
                    config.header_bytes_max
                ),
            ),
        );
    }
    let (mut parts, body) = request.into_parts();
    let connection = parts.extensions.get::<Arc<Connection>>().cloned();
    let user = match state
        .auth
        .authenticate_peer(
            parts.uri.path(),
            &parts.headers,
            connection.as_ref().and_then(|c| c.peer.as_ref()),
        )
        .and_then(|user| state.auth.impersonate(user, &parts.headers))
    {
        Ok(user) => user,
        Err(error) => return error_response(&error),
    };
    if let Err(error) = check_path(parts.uri.path()) {
        return error_response(&error);
    }
    let watch = watch_options(&parts.method, parts.uri.path(), parts.uri.query());
    let mut watch_slot = None;
    let mut _permit = None;
    if let Some(options) = &watch {
        match limits.admit_watch(&user.name, connection.as_ref()) {
            Ok(mut slot) => {
                // The handler's deadline: timeoutSeconds, or at most twice the minimum.
                let deadline = options
                    .timeout_seconds
                    .map_or(limits.min_request_timeout * 2, Duration::from_secs);
                slot.release_after(deadline + config.watch_release_grace);
                watch_slot = Some(slot);
            }
            Err((limit, error)) => return limits.reject(limit, &error),
        }
    } else {
        let mutating = !matches!(parts.method, Method::GET | Method::HEAD | Method::OPTIONS);
        match limits.admit_request(mutating) {
            Ok(permit) => _permit = permit,
            Err((limit, error)) => return limits.reject(limit, &error),
        }
    }
    let too_large = || {
        limits.reject(
            Limit::RequestBody,
            &ApiError::request_entity_too_large(format!(
                "the request body is larger than the limit of {} bytes",
                config.request_body_bytes_max
            )),
        )
    };
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > config.request_body_bytes_max as u64) {
        return too_large();
    }
    let body = match tokio::time::timeout(
        config.request_read_timeout,
        axum::body::to_bytes(body, config.request_body_bytes_max),
    )
    .await
    {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(error)) => {
            // Either the limit, or the client broke the body off (nobody reads that answer).
            if std::error::Error::source(&error)
                .is_some_and(|e| e.is::<http_body_util::LengthLimitError>())
            {
                return too_large();
            }
            return error_response(&ApiError::bad_request(format!(
                "cannot read the request body: {error}"
            )));
        }
        Err(_) => {
            return limits.reject(
                Limit::BodyTimeout,
                &ApiError::new(
                    408,
                    "Timeout",
                    format!(
                        "the request body did not arrive within {} seconds",
                        config.request_read_timeout.as_secs()
                    ),
                ),
            );
        }
    };
    parts.extensions.insert(user);
    let response = next.run(Request::from_parts(parts, Body::from(body))).await;
    match watch_slot {
        None => response,
        Some(slot) => {
            // The slot lives as long as the response body (the watch stream).
            let (parts, body) = response.into_parts();
            let stream = body.into_data_stream().map(move |chunk| {
                let _slot = &slot;
                chunk
            });
            Response::from_parts(parts, Body::from_stream(stream))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watches_are_recognized_like_the_handler() {
        let get = Method::GET;
        assert!(is_watch(&get, "/api/v1/watch/pods", None));
        assert!(is_watch(&get, "/apis/apps/v1/watch/deployments", None));
        assert!(is_watch(&get, "/api/v1/pods", Some("watch=true")));
        assert!(is_watch(&get, "/api/v1/pods", Some("watch=1")));
        assert!(!is_watch(&get, "/api/v1/pods", Some("watch=false")));
        assert!(!is_watch(&get, "/api/v1/namespaces/watch", None));
        assert!(!is_watch(&Method::POST, "/api/v1/pods", Some("watch=true")));
    }

    #[test]
    fn paths_cannot_leave_their_prefix() {
        for bad in [
            "/api/v1/namespaces/default/secrets/..",
            "/api/v1/namespaces/../secrets/x",
            "/api/v1/namespaces/default/configmaps/%2E%2E",
            "/api/v1/namespaces/default/configmaps/a%2Fb",
            "/api/v1/namespaces//configmaps/x",
            "/apis/apps/v1/namespaces/./deployments",
        ] {
            let error = check_path(bad).unwrap_err();
            assert_eq!(error.code, 400, "{bad}");
        }
        for good in [
            "/api/v1/namespaces/default/configmaps/a.b-c",
            "/apis/apps/v1/watch/deployments",
            "/api/v1",
            "/apis/",
            "/healthz",
        ] {
            assert!(check_path(good).is_ok(), "{good}");
        }
    }
}

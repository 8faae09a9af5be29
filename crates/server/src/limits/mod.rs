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
//! | request URI (fixed, the `http` crate)         | 65534 B | 414 RequestURITooLong (`http::wire`) |
//! | malformed HTTP/1.1 request                    | —       | 400 BadRequest (`http::wire`) |
//! | path form ([`check_path`]) and escapes ([`canonical_path`]) | — | 400 BadRequest |
//! | `allowed-hosts` (plain HTTP on loopback, [`check_host`]) | none | 403 Forbidden |
//! | `request-header-timeout-ms`, `idle-timeout-ms`, `write-timeout-ms` | 32 s, 90 s, 60 s | connection closed (`http::connection`, `http::wire`) |
//! | `max-request-body-bytes`                      | 3 MiB   | 413 RequestEntityTooLarge `Request entity too large: limit is 3145728` |
//! | JSON body nesting (fixed: Go's 10,000 levels, `go_json::BODY_MAX_DEPTH`; every server thread has `core::stack::THREAD_STACK` (32 MiB reserved in a release build, 128 MiB in a debug build) for the walks over such an object; a stored object, its managed fields deeper, is read back up to 65 levels more on its own stack: `go_json::parse_stored`) | — | 400 BadRequest `the object provided is unrecognized (must be of type <Kind>): couldn't get version/kind; json parse error: invalid character '[' exceeded max depth (...)` (`watchkeeper_api::go_json`) |
//! | YAML body nesting (fixed: 64 levels) and alias expansion (fixed: twice the body's length, plus 4096 nodes and 64 KiB of scalars) | — | 400 BadRequest `the object provided is unrecognized (must be of type <Kind>): error converting YAML to JSON: yaml: line N: exceeded max depth of 64 (...)`, `... yaml: document contains excessive aliasing (...)` (`watchkeeper_api::go_yaml`; an apply: `error decoding YAML: error converting YAML to JSON: ...`; the reader runs on its own stack, so the bound is reached without overflowing a worker's) |
//! | `request-timeout` (every request not long-running, [`is_long_running`]: arrival to the answer's last byte; kube's `--request-timeout`; a request's own `?timeout=` Go duration when shorter, kube's `WithRequestDeadline`, 400 when it is not one) | 60 s | not answered by then: 504 Timeout `Timeout: request did not complete within the allotted timeout` (kube's timeout filter); answer begun: HTTP/2 stream reset (`INTERNAL_ERROR`, as Go's server), HTTP/1.1 connection closed (`http::deadline`, `http::connection`) |
//! | `request-read-timeout-seconds` (body, inside the request's deadline) | 60 s | 408 Timeout |
//! | a body cut short or malformed ([`read_error`]) | — | 500 with Go's `net/http` text (`unexpected EOF`, `invalid byte in chunk length`, `malformed chunked encoding`, ...), no reason, as kube's handlers pass a read error on |
//! | `heavy-request-body-bytes`, `max-heavy-requests` (a body this large, or a LIST's or GET's `Table` (objects' sizes times one plus the printer columns) or YAML answer this large, is handled on the blocking pool, this many at once; a watch's `Table` frames that heavy are made with the worker handed on; [`crate::offload`]) | 64 KiB, one per CPU | past the bound: waits for a slot within its deadline (504 when it passes) |
//! | `max-invalid-causes` (causes of a 422 Invalid answer: the first ones, the message ending `N more errors`; `watchkeeper_api::error::set_invalid_causes_max`) | 1000 | — |
//! | `max-requests-inflight-per-user` (in-flight requests of both kinds of one [`Flow`]: a user, the anonymous user per client address) | 100 | 429 TooManyRequests, `Retry-After: 1` |
//! | `enable-priority-and-fairness` ([`apf`]: classified requests take the seats of their work (a large LIST several) in their priority level, the levels sharing the two in-flight limits below added up and borrowing from each other every `apf-borrowing-period-ms`; a watch holds a seat while it starts; other long-running requests excepted, probes to `exempt`) | true | 429 TooManyRequests, `Retry-After` the level's (1 s unless it keeps refusing), at once (a `Reject` level, a full queue) or at the end of its wait in a queue |
//! | `max-requests-inflight` (non-mutating, non-watch; not `/healthz`, `/livez`, `/readyz`, as kube's exempt `probes` flow; API Priority and Fairness off) | 400  | 429 TooManyRequests, `Retry-After: 1` |
//! | `max-mutating-requests-inflight` (API Priority and Fairness off) | 200     | 429 TooManyRequests, `Retry-After: 1` |
//! | `max-watches` (whole server)                  | 10000   | 429 TooManyRequests, `Retry-After: 1` |
//! | `max-watches-per-user` (per [`Flow`])          | 1000    | 429 TooManyRequests, `Retry-After: 1` |
//! | `max-watches-per-connection` (HTTP/2 streams) | 250     | 429 TooManyRequests, `Retry-After: 1` |
//! | `max-watch-query-bytes` (the query strings of the server's open watches, added up: their selectors, parsed and held for the watch's life, ~18 times their text at worst) | 64 MiB | 429 TooManyRequests, `Retry-After: 1` |
//! | `max-watch-query-bytes-per-user` (the same per [`Flow`]) | 4 MiB | 429 TooManyRequests, `Retry-After: 1` |
//! | `max-connections` ([`connections`])           | descriptor limit less a tenth | an idle connection closed, else the new one closed unread |
//! | `proxy-requests-max` (requests through `pods/proxy`, `services/proxy`, `nodes/proxy`, each until its answer's last byte; long-running, so outside the bounds above; `http::resource_proxy`) | 64 | 429 TooManyRequests `Too many requests, please try again later.`, `Retry-After: 1` |
//!
//! A 429 carries `details.retryAfterSeconds` and the `Retry-After` header, as kube-apiserver's
//! max-in-flight filter does. `0` turns the in-flight and watch limits off (kube's convention).
//! The object size (1.5 MiB of JSON, etcd's request limit as kube-apiserver uses it) is checked
//! by object validation in the api crate (413).
//!
//! HTTP/2 protocol abuse is bounded by hyper's and h2's defaults, which the connection layer
//! keeps (README's "HTTP/2 abuse": rapid reset is GOAWAY `ENHANCE_YOUR_CALM` after 20
//! pending resets, a CONTINUATION flood is cut at the header list size, SETTINGS/PING floods
//! end the connection, WINDOW_UPDATE floods cost nothing, streams past
//! `MAX_CONCURRENT_STREAMS` end the connection).
//!
//! ## One client cannot hold the request slots
//! - Every answer that is not long-running ends by its deadline (`--request-timeout` from the
//!   request's arrival), whatever the client reads: a client that never reads a large answer
//!   (an HTTP/2 stream never given a flow-control window, an HTTP/1.1 socket never read)
//!   holds its slots, and the bytes buffered for it, until then, not for as long as it keeps
//!   the stream (measured with 2 connections × 250 zero-window HTTP/2 streams of an 800 KB
//!   LIST: every other client got 429 for as long as the streams were kept; with
//!   `--request-timeout 5s` the 500 streams were reset at 5 s and the next GET got 200).
//! - One user's in-flight requests are at most `--max-requests-inflight-per-user` (both kinds
//!   together), so within the deadline one client takes at most that share of the server's
//!   slots; the anonymous user is one [`Flow`] per client address (a cap, no queues, the 429
//!   of kube's API Priority and Fairness). The default, 100, is far above what client-go's
//!   default rate (5 per second, bursts of 10) or a controller's worker pool keeps in flight,
//!   and a quarter of the read slots. It applies with API Priority and Fairness ([`apf`]) on
//!   too, to a user's waiting and executing requests together: the configuration this server
//!   creates is kube's mandatory one, whose `catch-all` level (every user but
//!   `system:masters`) refuses without queues, so the cap is then the only per-user share
//!   (`0` leaves only kube's flow control).
//! - Anonymous watches are counted per client address for `--max-watches-per-user` too.
//! - A watch holds its parsed selectors for its life, up to ~18 times the URL's bytes (a
//!   64 KB label selector of 8,000 requirements: 1.1 MB with its matching plan), so the
//!   watches' query strings are bounded in bytes too, per user and for the server
//!   (`--max-watch-query-bytes-per-user`, `--max-watch-query-bytes`): 1000 watches of one
//!   user with such selectors held 1.1 GB (measured, debug build,
//!   `crates/bench/scripts/watch_selectors.py`); by default the user's 65th such watch gets
//!   the 429, while 1000 watches of ordinary queries (a few hundred bytes) use a tenth of the
//!   user's budget. kube-apiserver bounds a watch's URL only by its 1 MiB header limit, and
//!   its watches not at all. Matching such a selector costs the object's labels, not the
//!   selector's length (`watchkeeper_core::selector`), so the events of a healthy watcher of
//!   the same resource are not delayed by them (the same probe: its p50 event latency 257 ms
//!   with 1000 such watches, 1.8 ms now).
//! - A LIST whose selection is expensive (its objects times its selectors' requirements above
//!   about a quarter million checks) selects on tokio's blocking pool, not on a runtime worker
//!   (`source::read`): it delays no other client's request, and its deadline still answers
//!   504 while it runs, which stops it (measured, debug build, 6 LISTs with a 64 KB label
//!   selector over 5000 objects, 1.5 s each alone: another client's GET waited up to 5.5 s
//!   and its watch events 3.2 s; now 25 ms and 130 ms).
//! - A request whose body is large (`--heavy-request-body-bytes`: a 2 MB `managedFields` PUT,
//!   a 1 MB strategic merge patch, a large apply or YAML body) is handled whole on the blocking
//!   pool, at most `--max-heavy-requests` at once ([`crate::offload`]): its deadline answers 504
//!   at its time and it stops at its next phase boundary (measured, debug build, 2 to 8 clients
//!   sending 2 MB `managedFields` PUTs: another client's GET waited 0.6-3.9 s at the median
//!   and a `?timeout=1s` PUT got its 504 after 4.6 s; now 3.5-4.9 ms and 1.0 s). A small
//!   write to a large object runs its heavy phases with the worker handed on
//!   (`Offload::in_place`).
//!
//! ## Order
//! 1. header size, 1b. the `Host` of plain HTTP on loopback ([`check_host`]), 1c. the path's
//!    one spelling ([`canonical_path`]: escapes decoded where that changes nothing, 400 for a
//!    malformed one),
//! 2. authentication and impersonation (401 before anything is read or counted; the
//!    impersonated user is the one limited, classified and authorized), 2b. the path form
//!    ([`check_path`]), 2c. API Priority and Fairness' classification ([`apf`]), 3. watch
//!    slots or in-flight slots, the user's share first (so a slow body holds a slot: the
//!    number of bodies being read, and the memory they take, is bounded by the in-flight
//!    limits times the body limit); with API Priority and Fairness, the user's share and then
//!    a seat of the request's priority level, waiting for it in a queue (the user's share
//!    counts its waiting requests too), 3b. authorization from the URL alone
//!    ([`LayerState::authorize`]: the verb, resource, namespace, name and subresource are
//!    known before the body; 403 before a byte of the body is read, the slot or seat freed
//!    with the answer). This is kube-apiserver's order (`DefaultBuildHandlerChain`:
//!    authentication, audit, impersonation, priority and fairness or max-in-flight,
//!    authorization): a forbidden request waits its turn in its flow, is counted as
//!    dispatched there, and its 403 carries the `X-Kubernetes-PF-*` headers,
//! 4. the body, read whole within the size and time bounds (and the request's deadline:
//!    504 when that comes first). The handler then sees a complete body, and is dropped (its
//!    slots with it) if it has not answered by the deadline: 504. Watch and in-flight slots
//!    are held by the response body ([`HoldBody`]) until hyper
//!    has taken it (at most hyper's buffer bound of it still unsent) or dropped it (the watch
//!    ended, or the client went away or stopped reading past `--write-timeout-ms`) — except an
//!    answer of at most 4 KiB, whole in memory, whose in-flight slot is freed when the handler
//!    returns (kube's handlers return once their answer fits Go's HTTP/2 write buffer): an
//!    HTTP/2 client that never grants its streams a flow-control window cannot hold the slots
//!    with small GETs (measured: 500 such streams on two connections had taken all 400 read
//!    slots, every other client's GET got 429; now none). Large answers (a LIST) hold
//!    their slot while unsent, until the answer's deadline (`--request-timeout`).
//!
//! ## Memory of a client that never reads
//! Such a watch costs its queue (at most `queue-capacity-max` items, each a shared pointer to
//! an event the cache keeps anyway), the connection's buffered response (hyper's buffer,
//! bounded by `max-header-bytes` + 16 KiB, see the connection layer in `http`), and a fixed per-connection
//! overhead; it is released at its deadline (`timeoutSeconds`): the cache ends it then, and
//! its connection is closed `--watch-release-grace-seconds` later if the response could not
//! finish. That grace counts from when the handler answered (armed at admission too, for a
//! handler that never answers, then re-armed), never only from admission: the cache's
//! deadline runs from the handler's registration of the watch, which comes later when its
//! start waited (for the current revision, from the store or an upstream) or the server was
//! busy; timed from admission, the release could close the connection before the cache had
//! ended the watch (then forgotten, not counted as a deadline end). The cache ends watches
//! one after another, so many expiring at once on a loaded machine need the grace to be more
//! than a second (the default is 5 s). README's "Limits" section gives the bound that
//! `tests/limits.rs` checks with 10,000 such clients.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{Method, header};
use axum::response::Response;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use watchkeeper_api::ApiError;

use crate::auth::{Auth, PeerIdentity, User};

pub mod apf;
mod body;
pub mod connections;
mod read_error;
pub use crate::config::LimitsConfig;
use crate::respond::error_response;
pub use body::{Held, HoldBody};

/// Per-connection state, in every request's extensions (the connection layer creates it).
#[derive(Debug, Default)]
pub struct Connection {
    /// The verified client certificate's user, if any.
    pub peer: Option<PeerIdentity>,
    /// Watches open on this connection (HTTP/2 multiplexes many).
    pub watches: AtomicUsize,
    /// Whether the connection is TLS.
    pub tls: bool,
    /// The client's address (handlers read it here; axum's `ConnectInfo` only when a
    /// request did not come through the connection layer).
    pub remote: Option<std::net::SocketAddr>,
    /// Whether the `Host` of each request is checked ([`check_host`]): plain HTTP on a loopback
    /// listener.
    pub check_host: bool,
    /// Notified when a watch on this connection outlived its deadline: its response is stuck
    /// behind a client that does not read, and closing the connection is the only way to
    /// reclaim what it holds.
    pub release: tokio::sync::Notify,
}

/// Connections currently open (for `/metrics`; counted by the connection layer).
pub static OPEN_CONNECTIONS: AtomicUsize = AtomicUsize::new(0);
/// TLS handshakes that failed or timed out (for `/metrics`; counted by the connection layer).
pub static HANDSHAKE_FAILURES: AtomicUsize = AtomicUsize::new(0);

/// Authorization from the URL alone (method, path, query) for an authenticated user; the
/// HTTP layer provides it (`http::authorize_from_url`), so this module does not depend on it.
pub type AuthorizeFromUrl =
    Arc<dyn Fn(&User, &Method, &str, Option<&str>) -> Result<(), ApiError> + Send + Sync>;

/// Before [`AuthorizeFromUrl`], with an authorization webhook: its answer for the same
/// attributes made known (`http::prepare_authorize_from_url`, see `auth::authz_webhook`).
pub type PrepareAuthorizeFromUrl = Arc<
    dyn Fn(User, Method, String, Option<String>) -> futures_util::future::BoxFuture<'static, ()>
        + Send
        + Sync,
>;

/// The state of the [`layer`]: the limits and who is asking.
#[derive(Clone)]
pub struct LayerState {
    /// The limits' live state.
    pub limits: Arc<Limits>,
    /// Authentication (401 before anything is read or counted).
    pub auth: Arc<Auth>,
    /// Authorization once the slot or seat is taken, before the body is read (403).
    pub authorize: AuthorizeFromUrl,
    /// Awaited right before `authorize` when the chain has a webhook (`None` otherwise).
    pub prepare_authorize: Option<PrepareAuthorizeFromUrl>,
}

impl std::fmt::Debug for LayerState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LayerState")
            .field("limits", &self.limits)
            .field("auth", &self.auth)
            .finish_non_exhaustive()
    }
}

/// Seconds a 429 asks the client to wait (kube-apiserver's max-in-flight filter uses 1).
pub const RETRY_AFTER_SECONDS: u32 = 1;

/// kube's max-in-flight and priority-and-fairness filters' 429 text.
const TOO_MANY_REQUESTS: &str = "Too many requests, please try again later.";

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
    /// The query bytes of the server's open watches (`--max-watch-query-bytes`).
    WatchQueryBytes,
    /// The query bytes of one user's open watches (`--max-watch-query-bytes-per-user`).
    WatchQueryBytesPerUser,
    /// Watches on one connection.
    WatchesPerConnection,
    /// A request URI longer than the `http` crate parses (hyper's 414, answered as a Status).
    UriLength,
    /// Bytes that are not an HTTP/1.1 request (hyper's 400, answered as a Status).
    Malformed,
    /// A path not in its one canonical form (400).
    Path,
    /// A Host header a plain-HTTP loopback listener does not answer (403).
    Host,
    /// A connection closed: its request head did not arrive in time.
    HeaderTimeout,
    /// A connection closed: nothing in flight for the idle timeout.
    IdleTimeout,
    /// A connection closed: its client read nothing for the write timeout.
    WriteTimeout,
    /// A JSON patch refused: its `copy` operations would add more than the copy limit.
    PatchCopyBytes,
    /// A connection closed unread at `--max-connections`: every open one had a request in
    /// flight.
    Connections,
    /// A connection without a request in flight closed to make room at `--max-connections`.
    ConnectionEvicted,
    /// A CustomResourceDefinition create or update refused: its resource's versions would
    /// pass `--max-custom-resource-versions`.
    CustomResourceVersions,
    /// A request not answered within `--request-timeout` (504), or whose answer was cut off
    /// there (HTTP/2 stream reset, HTTP/1.1 connection closed).
    RequestTimeout,
    /// In-flight requests of one user (`--max-requests-inflight-per-user`).
    RequestsInflightPerUser,
    /// Refused by API Priority and Fairness (`--enable-priority-and-fairness`; by FlowSchema,
    /// level and reason in `apiserver_flowcontrol_rejected_requests_total`).
    PriorityAndFairness,
    /// An HTTP/2 connection closed (GOAWAY): its client cancelled most of its streams (HTTP/2
    /// "rapid reset", see `Activity::too_many_resets`).
    Http2Resets,
    /// A request through a `proxy` subresource past `--proxy-requests-max`
    /// (`http::resource_proxy`).
    ProxyRequests,
}

impl Limit {
    /// Every limit, in the order `/metrics` lists them.
    pub const ALL: [Limit; 26] = [
        Limit::Header,
        Limit::RequestBody,
        Limit::BodyTimeout,
        Limit::Inflight,
        Limit::MutatingInflight,
        Limit::Watches,
        Limit::WatchesPerUser,
        Limit::WatchesPerConnection,
        Limit::UriLength,
        Limit::Malformed,
        Limit::Path,
        Limit::Host,
        Limit::HeaderTimeout,
        Limit::IdleTimeout,
        Limit::WriteTimeout,
        Limit::PatchCopyBytes,
        Limit::Connections,
        Limit::ConnectionEvicted,
        Limit::CustomResourceVersions,
        Limit::RequestTimeout,
        Limit::RequestsInflightPerUser,
        Limit::PriorityAndFairness,
        Limit::Http2Resets,
        Limit::WatchQueryBytes,
        Limit::WatchQueryBytesPerUser,
        Limit::ProxyRequests,
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
            Limit::UriLength => "uri_length",
            Limit::Malformed => "malformed_request",
            Limit::Path => "invalid_path",
            Limit::Host => "host",
            Limit::HeaderTimeout => "request_header_timeout",
            Limit::IdleTimeout => "idle_timeout",
            Limit::WriteTimeout => "write_timeout",
            Limit::PatchCopyBytes => "json_patch_copy_bytes",
            Limit::Connections => "connections",
            Limit::ConnectionEvicted => "connection_evicted",
            Limit::CustomResourceVersions => "custom_resource_versions",
            Limit::RequestTimeout => "request_timeout",
            Limit::RequestsInflightPerUser => "requests_inflight_per_user",
            Limit::PriorityAndFairness => "priority_and_fairness",
            Limit::Http2Resets => "http2_resets",
            Limit::WatchQueryBytes => "watch_query_bytes",
            Limit::WatchQueryBytesPerUser => "watch_query_bytes_per_user",
            Limit::ProxyRequests => "proxy_requests",
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
    /// The query bytes of the open watches.
    watch_query_bytes: AtomicUsize,
    /// Open watches per [`Flow`], and their query bytes.
    per_user: Mutex<HashMap<Flow, (usize, usize)>>,
    /// In-flight requests per [`Flow`], when `--max-requests-inflight-per-user` is on.
    per_user_inflight: Mutex<HashMap<Flow, usize>>,
    rejections: [AtomicU64; Limit::ALL.len()],
    connections: Arc<connections::ConnectionSlots>,
    /// API Priority and Fairness, when on (it replaces `readonly` and `mutating`).
    apf: Option<Arc<apf::Apf>>,
    /// Seats of API Priority and Fairness held now, non-mutating and mutating requests.
    apf_inflight: [AtomicUsize; 2],
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
            watch_query_bytes: AtomicUsize::new(0),
            per_user: Mutex::new(HashMap::new()),
            per_user_inflight: Mutex::new(HashMap::new()),
            rejections: Default::default(),
            connections: connections::ConnectionSlots::new(
                config
                    .connections_max
                    .unwrap_or_else(connections::derived_from_process),
            ),
            apf: None,
            apf_inflight: Default::default(),
        }
    }

    /// These limits with API Priority and Fairness (`Some` when on): its levels' seats
    /// replace the two in-flight pools.
    #[must_use]
    pub fn with_apf(mut self, apf: Option<Arc<apf::Apf>>) -> Limits {
        if apf.is_some() {
            self.readonly = None;
            self.mutating = None;
        }
        self.apf = apf;
        self
    }

    /// API Priority and Fairness, when on.
    #[must_use]
    pub fn apf(&self) -> Option<&Arc<apf::Apf>> {
        self.apf.as_ref()
    }

    /// The connection slots (`--max-connections`; the connection layer admits through them).
    #[must_use]
    pub fn connections(&self) -> &Arc<connections::ConnectionSlots> {
        &self.connections
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

    /// Requests holding an in-flight slot now (mutating or not): a seat of API Priority and
    /// Fairness when it is on.
    #[must_use]
    pub fn inflight(&self, mutating: bool) -> usize {
        if self.apf.is_some() {
            return self.apf_inflight[usize::from(mutating)].load(Ordering::Relaxed);
        }
        let (semaphore, max) = if mutating {
            (&self.mutating, self.config.mutating_requests_inflight_max)
        } else {
            (&self.readonly, self.config.requests_inflight_max)
        };
        semaphore
            .as_ref()
            .map_or(0, |s| max.saturating_sub(s.available_permits()))
    }

    /// The limits' configuration.
    #[must_use]
    pub fn config(&self) -> &LimitsConfig {
        &self.config
    }

    /// Counts a refusal by `limit` (for refusals answered outside this layer).
    pub fn count(&self, limit: Limit) {
        self.rejections[limit as usize].fetch_add(1, Ordering::Relaxed);
    }

    fn reject(&self, limit: Limit, error: &ApiError) -> Response {
        self.count(limit);
        error_response(error)
    }

    fn too_many(limit: Limit, message: String) -> Refusal {
        (
            limit,
            ApiError::too_many_requests(message, RETRY_AFTER_SECONDS),
        )
    }

    /// The query bytes of the open watches (for `/metrics`).
    #[must_use]
    pub fn open_watch_query_bytes(&self) -> usize {
        self.watch_query_bytes.load(Ordering::Relaxed)
    }

    /// Takes a watch slot for `flow` on `connection`, its query `query_bytes` long, or the
    /// 429 to answer.
    fn admit_watch(
        self: &Arc<Self>,
        flow: &Flow,
        connection: Option<&Arc<Connection>>,
        query_bytes: usize,
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
            tracked: None,
            query_bytes: 0,
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
        let before = self
            .watch_query_bytes
            .fetch_add(query_bytes, Ordering::AcqRel);
        slot.query_bytes = query_bytes;
        if c.watch_query_bytes_max > 0 && before + query_bytes > c.watch_query_bytes_max {
            return Err(Self::too_many(
                Limit::WatchQueryBytes,
                format!(
                    "Too many requests: the server's open watches have {before} bytes of query strings, and this one's {query_bytes} would pass the limit of {}; please try again later",
                    c.watch_query_bytes_max
                ),
            ));
        }
        let mut per_user = self
            .per_user
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (count, bytes) = per_user.entry(flow.clone()).or_default();
        if c.watches_per_user_max > 0 && *count >= c.watches_per_user_max {
            let count = *count;
            drop(per_user);
            return Err(Self::too_many(
                Limit::WatchesPerUser,
                format!(
                    "Too many requests: {flow} already has {count} watches open (the limit per user is {}); please try again later",
                    c.watches_per_user_max
                ),
            ));
        }
        if c.watch_query_bytes_per_user_max > 0
            && *bytes + query_bytes > c.watch_query_bytes_per_user_max
        {
            let bytes = *bytes;
            if *count == 0 {
                per_user.remove(flow);
            }
            drop(per_user);
            return Err(Self::too_many(
                Limit::WatchQueryBytesPerUser,
                format!(
                    "Too many requests: the open watches of {flow} have {bytes} bytes of query strings, and this one's {query_bytes} would pass the limit per user of {}; please try again later",
                    c.watch_query_bytes_per_user_max
                ),
            ));
        }
        *count += 1;
        *bytes += query_bytes;
        slot.user = Some(flow.clone());
        Ok(slot)
    }

    /// Takes an in-flight slot of `flow` and of the server (`None` of either when unlimited),
    /// or the 429 to answer: the user's share first (`--max-requests-inflight-per-user`), so
    /// one client at its share cannot take the server's last slots.
    fn admit_request(self: &Arc<Self>, mutating: bool, flow: &Flow) -> Result<Slot, Refusal> {
        let too_many = |limit| Self::too_many(limit, TOO_MANY_REQUESTS.to_owned());
        let mut slot = Slot {
            user: self.admit_user(flow)?,
            permit: None,
            seat: None,
        };
        let (semaphore, limit) = if mutating {
            (&self.mutating, Limit::MutatingInflight)
        } else {
            (&self.readonly, Limit::Inflight)
        };
        if let Some(semaphore) = semaphore {
            // On refusal the user's slot taken above is given back (dropped with `slot`).
            slot.permit = Some(
                semaphore
                    .clone()
                    .try_acquire_owned()
                    .map_err(|_| too_many(limit))?,
            );
        }
        Ok(slot)
    }

    /// The user's share of in-flight requests (`--max-requests-inflight-per-user`; `None`
    /// when off), or the 429 to answer.
    fn admit_user(self: &Arc<Self>, flow: &Flow) -> Result<Option<UserSlot>, Refusal> {
        let max = self.config.requests_inflight_per_user_max;
        if max == 0 {
            return Ok(None);
        }
        let mut per_user = self
            .per_user_inflight
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let count = per_user.entry(flow.clone()).or_default();
        if *count >= max {
            return Err(Self::too_many(
                Limit::RequestsInflightPerUser,
                TOO_MANY_REQUESTS.to_owned(),
            ));
        }
        *count += 1;
        Ok(Some(UserSlot {
            limits: self.clone(),
            flow: flow.clone(),
        }))
    }

    /// The user's share, then a seat of the request's priority level (waiting in its queue
    /// at most until `wait_until`), or the 429 to answer. A request counts in its user's
    /// share while it waits too.
    async fn admit_fair(
        self: &Arc<Self>,
        class: &apf::Classification,
        mutating: bool,
        flow: &Flow,
        wait_until: tokio::time::Instant,
        user_share: bool,
        (user_name, method, uri): (&str, &Method, &axum::http::Uri),
    ) -> Result<Slot, Refusal> {
        let user = if user_share {
            self.admit_user(flow)?
        } else {
            None
        };
        let seat = class
            .admit(wait_until, user_name, method, uri)
            .await
            .map_err(|(_, retry_after)| {
                (
                    Limit::PriorityAndFairness,
                    ApiError::too_many_requests(TOO_MANY_REQUESTS, retry_after),
                )
            })?;
        self.apf_inflight[usize::from(mutating)].fetch_add(1, Ordering::Relaxed);
        Ok(Slot {
            user,
            permit: None,
            seat: Some(FairSlot {
                _seat: seat,
                limits: self.clone(),
                mutating,
            }),
        })
    }

    /// In-flight requests of `flow` now (0 when not counted).
    #[must_use]
    pub fn inflight_of(&self, flow: &Flow) -> usize {
        self.per_user_inflight
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(flow)
            .copied()
            .unwrap_or(0)
    }
}

/// The anonymous user's name.
const ANONYMOUS: &str = "system:anonymous";

/// Whose requests and watches are counted together for the per-user limits: an authenticated
/// user by name; the anonymous user per client address (unauthenticated clients are
/// otherwise one user, and one of them could take the share of all).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Flow {
    /// A user, by name.
    User(String),
    /// `system:anonymous` from one address.
    Anonymous(std::net::IpAddr),
}

impl Flow {
    /// The flow of `user`'s request arriving from `remote`.
    #[must_use]
    pub fn of(user: &User, remote: Option<std::net::SocketAddr>) -> Flow {
        match remote {
            Some(remote) if user.name == ANONYMOUS => Flow::Anonymous(remote.ip().to_canonical()),
            _ => Flow::User(user.name.clone()),
        }
    }
}

impl std::fmt::Display for Flow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Flow::User(name) => write!(f, "user {name:?}"),
            Flow::Anonymous(ip) => write!(f, "user \"system:anonymous\" at {ip}"),
        }
    }
}

impl Held for Slot {}

impl Held for WatchSlot {}

/// A request's in-flight slots: the user's and the server's, released when dropped (with the
/// response body, see [`HoldBody`]).
#[derive(Debug)]
struct Slot {
    user: Option<UserSlot>,
    permit: Option<OwnedSemaphorePermit>,
    /// The seat of its priority level (API Priority and Fairness).
    seat: Option<FairSlot>,
}

/// A seat of API Priority and Fairness, counted by kind for
/// `apiserver_current_inflight_requests` until dropped.
#[derive(Debug)]
struct FairSlot {
    _seat: apf::Seat,
    limits: Arc<Limits>,
    mutating: bool,
}

impl Drop for FairSlot {
    fn drop(&mut self) {
        self.limits.apf_inflight[usize::from(self.mutating)].fetch_sub(1, Ordering::Relaxed);
    }
}

impl Slot {
    fn is_empty(&self) -> bool {
        self.user.is_none() && self.permit.is_none() && self.seat.is_none()
    }
}

/// One in-flight request of a [`Flow`], counted until dropped.
#[derive(Debug)]
struct UserSlot {
    limits: Arc<Limits>,
    flow: Flow,
}

impl Drop for UserSlot {
    fn drop(&mut self) {
        let mut per_user = self
            .limits
            .per_user_inflight
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(count) = per_user.get_mut(&self.flow) {
            *count -= 1;
            if *count == 0 {
                per_user.remove(&self.flow);
            }
        }
    }
}

/// The limit that refused a request and the Status to answer.
type Refusal = (Limit, ApiError);

/// A watch's slots, released when dropped (with the response body).
struct WatchSlot {
    limits: Arc<Limits>,
    user: Option<Flow>,
    total: bool,
    connection: Option<Arc<Connection>>,
    /// Closes the connection if the watch outlives its deadline (aborted when it ends).
    release: Option<tokio::task::JoinHandle<()>>,
    /// Counted among the watches a write's fan-out estimate reads ([`apf::watches`]).
    tracked: Option<apf::watches::Tracked>,
    /// The watch's query bytes, counted in the server's (and, with `user`, the user's).
    query_bytes: usize,
}

impl WatchSlot {
    /// Arms the release: `after` from now, the connection is closed unless the slot is gone
    /// (a release armed before is replaced).
    fn release_after(&mut self, after: Duration) {
        if let Some(release) = self.release.take() {
            release.abort();
        }
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
        self.limits
            .watch_query_bytes
            .fetch_sub(self.query_bytes, Ordering::AcqRel);
        if let Some(user) = &self.user {
            let mut per_user = self
                .limits
                .per_user
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some((count, bytes)) = per_user.get_mut(user) {
                *count -= 1;
                *bytes -= self.query_bytes;
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

/// Path safety, for every path (not only `/api` and `/apis`): a path has one form. Each of its
/// segments must be a valid path segment name as kube-apiserver requires
/// (`IsValidPathSegmentName`): not empty (so no `//` anywhere, leading ones included; one
/// trailing slash is allowed), not `.` or `..`, and without control characters; a `%` only
/// in an escape of two hex digits. Nothing is normalised here: the layer first rewrites a
/// path into its one spelling ([`canonical_path`]), so the router, the authorizer and the
/// store key all see the same segments whatever spelling the client chose. Resource segments
/// become parts of a store key (the namespace and the name); names and namespaces in bodies
/// are validated by the api crate (none may hold a `%`), and the handler refuses a body whose
/// name or namespace differs from the URL's.
///
/// # Errors
/// 400 BadRequest naming the segment.
pub fn check_path(path: &str) -> Result<(), ApiError> {
    let refuse = |segment: &str, problem: &str| {
        Err(ApiError::bad_request(format!(
            "invalid path {path:?}: the segment {segment:?} {problem}"
        )))
    };
    // `OPTIONS *` is the only request target without a leading slash; it routes nowhere.
    if path == "*" {
        return Ok(());
    }
    let Some(rest) = path.strip_prefix('/') else {
        return refuse(path, "must start with '/'");
    };
    // One trailing slash is harmless (`/apis/`); an empty segment anywhere else is not.
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    if rest.is_empty() {
        return if path == "/" {
            Ok(())
        } else {
            refuse("", "may not be empty")
        };
    }
    // A path of printable ASCII without '%' (almost every one) needs only its segments'
    // shapes checked; the characters are looked at per segment otherwise.
    let printable = path.bytes().all(|b| (0x20..0x7f).contains(&b) && b != b'%');
    if printable && segments_have_names(rest) {
        return Ok(());
    }
    for segment in rest.split('/') {
        let problem = match segment {
            "" => "may not be empty",
            "." | ".." => "may not be '.' or '..'",
            _ if printable => continue,
            _ if !escapes_are_whole(segment) => {
                "may not contain '%' but in an escape of two hex digits"
            }
            _ if segment.chars().any(char::is_control) => "may not contain control characters",
            _ => continue,
        };
        return refuse(segment, problem);
    }
    Ok(())
}

/// Whether every `%` of `segment` starts an escape of two hex digits.
fn escapes_are_whole(segment: &str) -> bool {
    let bytes = segment.as_bytes();
    (0..bytes.len()).all(|at| bytes[at] != b'%' || escaped_byte(bytes, at).is_some())
}

/// The byte the escape at `bytes[at]` (a `%`) stands for, `None` unless two hex digits follow.
fn escaped_byte(bytes: &[u8], at: usize) -> Option<u8> {
    let digit = |at: usize| char::from(*bytes.get(at)?).to_digit(16);
    u8::try_from(digit(at + 1)? << 4 | digit(at + 2)?).ok()
}

// Whether a byte stands for itself in a canonical path segment: its escape is decoded; every
// other byte stays escaped.
use watchkeeper_api::plain_in_path_segment as plain_in_segment;

/// The one spelling of a request path whose segments carry percent-escapes or bytes RFC 3986
/// does not let a path hold raw, `None` when `path` is in it already (almost every path: one
/// pass over its bytes). Clients escape differently: client-python escapes everything but
/// letters, digits and `_.-~` in a path parameter (`clusterroles/system%3Anode`), client-go
/// only what Go's `url.PathEscape` does, kubectl with raw `:`. Here an escape of a byte that
/// may stand for itself (`%3A`, `%41`, `%2e`) is decoded, as kube-apiserver (Go's `net/http`)
/// decodes every escape before routing, and any other byte is escaped in upper-case hex
/// (`%20`, `%C3%A9`, `%25`), so each segment has one spelling and an escape never splits or
/// joins segments. Names are read from the decoded path ([`decoded_path`]): `a%20b` names
/// the ClusterRole `a b`, as in kube.
///
/// # Errors
/// 400 BadRequest for an escape that is not two hex digits and for an escaped `/`, which
/// kube-apiserver would read as a segment boundary: a path means what it spells.
pub fn canonical_path(path: &str) -> Result<Option<String>, ApiError> {
    let bytes = path.as_bytes();
    // `*` (`OPTIONS *`) is a plain byte too.
    if bytes.iter().all(|&b| b == b'/' || plain_in_segment(b)) {
        return Ok(None);
    }
    let refuse = |problem: &str| {
        Err(ApiError::bad_request(format!(
            "invalid path {path:?}: {problem}"
        )))
    };
    let mut canonical = String::with_capacity(path.len() + 8);
    let mut at = 0;
    while let Some(&byte) = bytes.get(at) {
        let decoded = if byte == b'%' {
            let Some(decoded) = escaped_byte(bytes, at) else {
                return refuse("'%' must start an escape of two hex digits");
            };
            if decoded == b'/' {
                return refuse("an escaped '/' is not a path segment's");
            }
            at += 3;
            decoded
        } else {
            at += 1;
            byte
        };
        if decoded == b'/' || plain_in_segment(decoded) {
            canonical.push(char::from(decoded));
        } else {
            // Writing to a `String` cannot fail.
            let _ = write!(canonical, "%{decoded:02X}");
        }
    }
    Ok((canonical != path).then_some(canonical))
}

/// A request path with its escapes decoded, as Go's `URL.Path` is, for reading names from
/// its segments: `/api/v1/namespaces/d/configmaps/a%20b` names `a b`. An escaped `/` never
/// reaches here ([`canonical_path`] refuses it), so decoding neither splits nor joins
/// segments. A path whose escapes are not whole, or do not decode to UTF-8, is kept as it is
/// (no name holds a `%`, so it names nothing).
pub fn decoded_path(path: &str) -> std::borrow::Cow<'_, str> {
    if !path.contains('%') {
        return std::borrow::Cow::Borrowed(path);
    }
    let bytes = path.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while let Some(&byte) = bytes.get(at) {
        if byte == b'%' {
            let Some(escaped) = escaped_byte(bytes, at).filter(|&b| b != b'/') else {
                return std::borrow::Cow::Borrowed(path);
            };
            decoded.push(escaped);
            at += 3;
        } else {
            decoded.push(byte);
            at += 1;
        }
    }
    String::from_utf8(decoded).map_or(std::borrow::Cow::Borrowed(path), std::borrow::Cow::Owned)
}

/// `uri` with its path replaced by `path` (its query, scheme and authority kept).
fn with_path(uri: &axum::http::Uri, path: &str) -> Result<axum::http::Uri, ApiError> {
    let path_and_query = match uri.query() {
        Some(query) => format!("{path}?{query}"),
        None => path.to_owned(),
    };
    let mut parts = uri.clone().into_parts();
    parts.path_and_query = Some(
        path_and_query
            .parse()
            .map_err(|_| ApiError::bad_request(format!("invalid path {path:?}")))?,
    );
    axum::http::Uri::from_parts(parts)
        .map_err(|_| ApiError::bad_request(format!("invalid path {path:?}")))
}

/// Whether no `/`-separated segment of `rest` is empty, `.` or `..`, found in one pass over its
/// bytes (splitting costs a search per segment, ~130 instructions each, on every request);
/// [`check_path`] names the segment that is when not.
fn segments_have_names(rest: &str) -> bool {
    // The current segment's length, and how many of its bytes are dots: a segment of no
    // byte, or of one or two dots only, is not a name.
    let (mut length, mut dots) = (0usize, 0usize);
    let named = |length: usize, dots: usize| length != dots || dots > 2;
    for &byte in rest.as_bytes() {
        if byte == b'/' {
            if !named(length, dots) {
                return false;
            }
            (length, dots) = (0, 0);
        } else {
            length += 1;
            dots += usize::from(byte == b'.');
        }
    }
    named(length, dots)
}

/// The name part of a `Host` value: without port, an IPv6 address without brackets,
/// lowercase, without a trailing dot.
fn host_name(host: &str) -> String {
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or_default(),
        None => host.split(':').next().unwrap_or_default(),
    };
    name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase()
}

/// DNS-rebinding guard for plain HTTP on a loopback listener: a web page the user visits can
/// make the browser send requests to the loopback server under a name the page's owner
/// controls (which then resolves to 127.0.0.1), and read the answers — without any
/// credentials, as plain HTTP on loopback needs none. Browsers always send the name they
/// used in `Host`, so only loopback names are answered: `localhost`, an address in
/// 127.0.0.0/8 or `[::1]` (with or without port), and the names of `--allowed-hosts`. A
/// request without `Host` (HTTP/1.0, or HTTP/2 without `:authority`) is not a browser's and
/// is answered.
///
/// # Errors
/// 403 Forbidden naming the host and the flag.
pub fn check_host(host: Option<&str>, allowed: &[String]) -> Result<(), ApiError> {
    let Some(host) = host else {
        return Ok(());
    };
    let name = host_name(host);
    let loopback = name == "localhost"
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    if loopback || allowed.iter().any(|a| host_name(a) == name) {
        return Ok(());
    }
    Err(ApiError::new(
        403,
        "Forbidden",
        format!(
            "host {host:?} is not allowed: this plain-HTTP server on a loopback address answers only requests for localhost, 127.0.0.0/8, [::1] or a name given with --allowed-hosts (a guard against DNS rebinding)"
        ),
    ))
}

/// The largest answer whose in-flight slot is freed when the handler returns, before the
/// client has read it: Go's HTTP/2 handler write buffer (`handlerChunkWriteSize`), whose
/// contents kube-apiserver's handlers return without waiting for.
const SMALL_ANSWER_BYTES: u64 = 4 << 10;

/// Whether `path` is one of the health probes that take no in-flight slot (kube's exempt
/// `probes` FlowSchema: exactly `/healthz`, `/livez`, `/readyz`; their per-check paths are
/// not).
fn is_probe(path: &str) -> bool {
    matches!(path, "/healthz" | "/livez" | "/readyz")
}

/// The layer applying every limit around `next` (the handler; see [`crate::http::service`]);
/// see the module docs for the order.
/// Every answer to a request API Priority and Fairness classified carries its headers.
pub async fn layer<F, H>(state: &LayerState, request: Request, next: H) -> Response
where
    H: FnOnce(Request) -> F,
    F: Future<Output = Response>,
{
    let mut classified = None;
    let mut response = admit(state, request, next, &mut classified).await;
    if let Some(class) = classified {
        class.set_headers(&mut response);
    }
    response
}

/// [`layer`]'s admission and the handler, setting `classified` once the request is
/// classified.
async fn admit<F, H>(
    state: &LayerState,
    request: Request,
    next: H,
    classified: &mut Option<apf::Classification>,
) -> Response
where
    H: FnOnce(Request) -> F,
    F: Future<Output = Response>,
{
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
    if connection.as_ref().is_some_and(|c| c.check_host) {
        let host = match parts.headers.get(header::HOST) {
            Some(value) => Some(value.to_str().unwrap_or("(not UTF-8)")),
            None => parts
                .uri
                .authority()
                .map(axum::http::uri::Authority::as_str),
        };
        if let Err(error) = check_host(host, &config.allowed_hosts) {
            return limits.reject(Limit::Host, &error);
        }
    }
    // One spelling of the path for everything after this (Go's `net/http` decodes escapes
    // before kube-apiserver's filters too, and refuses a malformed one with 400 first).
    match canonical_path(parts.uri.path()) {
        Ok(None) => {}
        Ok(Some(path)) => match with_path(&parts.uri, &path) {
            Ok(uri) => parts.uri = uri,
            Err(error) => return limits.reject(Limit::Path, &error),
        },
        Err(error) => return limits.reject(Limit::Path, &error),
    }
    // The audit layer prepared it when it ran first.
    let prepared = match parts.extensions.remove::<crate::auth::Prepared>() {
        Some(prepared) => prepared,
        None => state.auth.prepare(&parts.headers).await,
    };
    let peer = connection.as_ref().and_then(|c| c.peer.as_ref());
    state
        .auth
        .prepare_impersonation(parts.uri.path(), &parts.headers, peer, &prepared)
        .await;
    let user = match state
        .auth
        .authenticate_peer(
            parts.uri.path(),
            &parts.headers,
            connection.as_ref().and_then(|c| c.peer.as_ref()),
            &prepared,
        )
        .and_then(|user| state.auth.impersonate(user, &parts.headers))
    {
        Ok(user) => user,
        Err(error) => return error_response(&error),
    };
    // As kube's authenticator, the front proxy's identity headers go once they have been read.
    state.auth.clear_request_header(&mut parts.headers, peer);
    if let Err(error) = check_path(parts.uri.path()) {
        return limits.reject(Limit::Path, &error);
    }
    let watch = watch_options(&parts.method, parts.uri.path(), parts.uri.query());
    let remote = connection.as_ref().and_then(|c| c.remote);
    let flow = Flow::of(&user, remote);
    // The request's deadline (kube's `--request-timeout`), from its arrival: the connection
    // layer set it (and cuts the answer off there); a request from elsewhere gets one now.
    // The connection layer's deadline says it already: none for a long-running request.
    let long_running = match parts.extensions.get::<RequestDeadline>() {
        Some(RequestDeadline(deadline)) => deadline.is_none(),
        None => {
            watch.is_some() || is_long_running(&parts.method, parts.uri.path(), parts.uri.query())
        }
    };
    let timeout = if long_running {
        config.request_timeout
    } else {
        match request_timeout(parts.uri.query(), config) {
            Ok(timeout) => timeout,
            Err(message) => return error_response(&ApiError::bad_request(message)),
        }
    };
    let deadline = match parts.extensions.get::<RequestDeadline>() {
        Some(deadline) => deadline.0,
        None if !long_running => Some(tokio::time::Instant::now() + timeout),
        None => None,
    };
    // API Priority and Fairness classifies watches (no seat) and every request that is not
    // long-running or a probe (see `apf`).
    *classified = limits
        .apf
        .as_ref()
        .filter(|_| watch.is_some() || !long_running)
        .map(|apf| {
            apf.classify(
                &user,
                parts.method.as_str(),
                parts.uri.path(),
                parts.uri.query(),
            )
        });
    let mut watch_slot = None;
    let mut slot = None;
    // A watch's seats in its priority level, held until the handler answered (kube seats a
    // watch's initialization, until the cache has registered it).
    let mut watch_seat = None;
    if let Some(options) = &watch {
        let query_bytes = parts.uri.query().map_or(0, str::len);
        match limits.admit_watch(&flow, connection.as_ref(), query_bytes) {
            Ok(mut taken) => {
                // The handler's deadline: timeoutSeconds, or at most twice the minimum. It
                // runs from when the handler registers the watch (after its start is
                // resolved), so the release is armed again once the handler answered, below;
                // armed now too, for a handler that never answers.
                let deadline = options
                    .timeout_seconds
                    .map_or(limits.min_request_timeout * 2, Duration::from_secs);
                let release_in = deadline + config.watch_release_grace;
                taken.release_after(release_in);
                watch_slot = Some((taken, release_in));
            }
            Err((limit, error)) => return limits.reject(limit, &error),
        }
        if let Some(class) = classified.as_ref() {
            // Without a deadline: a quarter of `--request-timeout` (kube's default wait).
            let wait_until =
                apf::wait_until(tokio::time::Instant::now(), Some(config.request_timeout));
            match class
                .admit(wait_until, &user.name, &parts.method, &parts.uri)
                .await
            {
                Ok(seat) => {
                    watch_seat = Some(seat);
                    // Interested in the writes to what it watches from now (kube's filter
                    // registers a watch once its seat is granted) until its answer ends.
                    if let (Some((taken, _)), Some(apf)) = (watch_slot.as_mut(), &limits.apf) {
                        taken.tracked = apf.track_watch(
                            parts.method.as_str(),
                            parts.uri.path(),
                            parts.uri.query(),
                        );
                    }
                }
                Err((_, retry_after)) => {
                    return limits.reject(
                        Limit::PriorityAndFairness,
                        &ApiError::too_many_requests(TOO_MANY_REQUESTS, retry_after),
                    );
                }
            }
        }
    } else if let Some(class) = classified.as_ref() {
        // The request's arrival: its deadline less its timeout.
        let arrival = deadline.map_or_else(tokio::time::Instant::now, |d| d - timeout);
        let mutating = !matches!(parts.method, Method::GET | Method::HEAD | Method::OPTIONS);
        let wait_until = apf::wait_until(arrival, Some(timeout));
        // A probe is not counted in its user's share (kube's `probes` FlowSchema sends it
        // to `exempt`).
        let user_share = !is_probe(parts.uri.path());
        let asked = (&*user.name, &parts.method, &parts.uri);
        match limits
            .admit_fair(class, mutating, &flow, wait_until, user_share, asked)
            .await
        {
            Ok(taken) => slot = Some(taken),
            Err((limit, error)) => return limits.reject(limit, &error),
        }
    } else if is_probe(parts.uri.path()) {
        // Without API Priority and Fairness, a server whose slots are all taken still
        // answers its health checks.
    } else {
        let mutating = !matches!(parts.method, Method::GET | Method::HEAD | Method::OPTIONS);
        match limits.admit_request(mutating, &flow) {
            Ok(taken) => slot = Some(taken).filter(|taken| !taken.is_empty()),
            Err((limit, error)) => return limits.reject(limit, &error),
        }
    }
    // Authorization comes after the slot or seat, as in kube-apiserver's handler chain
    // (`DefaultBuildHandlerChain`: priority and fairness, or max-in-flight, wraps
    // authorization): a request its user may not make waits its turn, is counted as
    // dispatched in its flow, and its 403 carries the FlowSchema's headers; it is still
    // refused before a byte of its body is read, and frees its seat with the answer.
    if let Some(prepare) = &state.prepare_authorize {
        prepare(
            user.clone(),
            parts.method.clone(),
            decoded_path(parts.uri.path()).into_owned(),
            parts.uri.query().map(str::to_owned),
        )
        .await;
    }
    if let Err(error) = (state.authorize)(
        &user,
        &parts.method,
        &decoded_path(parts.uri.path()),
        parts.uri.query(),
    ) {
        return error_response(&error);
    }
    let too_large = || {
        limits.reject(
            Limit::RequestBody,
            // kube-apiserver's words (`limitedReadBody`).
            &ApiError::request_entity_too_large(format!(
                "limit is {}",
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
    // The body within its own bound, inside the request's deadline.
    let read_by = tokio::time::Instant::now() + config.request_read_timeout;
    let read_by = deadline.map_or(read_by, |deadline| deadline.min(read_by));
    let body = match tokio::time::timeout_at(
        read_by,
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
            return error_response(&read_error::body_read_error(&error));
        }
        Err(_) if deadline.is_some_and(|deadline| deadline <= read_by) => {
            return limits.timed_out();
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
    let request = Request::from_parts(parts, Body::from(body));
    let response = match deadline {
        // Not answered by its deadline: the handler is dropped (its slots with it) and the
        // client gets kube's 504.
        Some(deadline) => match tokio::time::timeout_at(deadline, next(request)).await {
            Ok(response) => response,
            Err(_) => return limits.timed_out(),
        },
        None => next(request).await,
    };
    drop(watch_seat);
    // Slots live as long as the response body: until hyper has taken its last byte (a watch
    // stream, or a large LIST a slow client reads), the connection is gone, or the answer's
    // deadline cut it off (the connection layer). A small answer, whole in memory, frees its
    // slot at once, as kube-apiserver's handler returns once its answer fits its write
    // buffer: a client that never reads it (an HTTP/2 stream with no flow-control window)
    // holds no slot with it, only its bytes.
    let small = hyper::body::Body::size_hint(response.body())
        .exact()
        .is_some_and(|bytes| bytes <= SMALL_ANSWER_BYTES);
    match (watch_slot, slot) {
        (Some((mut watch_slot, release_in)), _) => {
            // Armed only now: the cache's deadline for this watch was set by the handler,
            // which may have started long after admission on a busy server; from here the
            // release is never before that deadline plus the grace.
            watch_slot.release_after(release_in);
            response.map(|body| HoldBody::wrap(body, watch_slot))
        }
        (None, Some(_)) if small => response,
        (None, Some(slot)) => response.map(|body| HoldBody::wrap(body, slot)),
        (None, None) => response,
    }
}

/// The deadline of a request that is not long-running (`--request-timeout` from its arrival),
/// in its extensions; `None` for a long-running one. The connection layer sets it when the
/// request arrives, the layer here answers 504 when the handler has not answered by then.
#[derive(Clone, Copy, Debug)]
pub struct RequestDeadline(pub Option<tokio::time::Instant>);

impl RequestDeadline {
    /// The deadline of `request` arriving now under `config`: `--request-timeout`, or the
    /// request's own `?timeout=` when shorter ([`request_timeout`]).
    #[must_use]
    pub fn of<B>(request: &axum::http::Request<B>, config: &LimitsConfig) -> RequestDeadline {
        let uri = request.uri();
        RequestDeadline(
            (!is_long_running(request.method(), uri.path(), uri.query())).then(|| {
                tokio::time::Instant::now()
                    + request_timeout(uri.query(), config).unwrap_or(config.request_timeout)
            }),
        )
    }
}

/// How long a request may take: `--request-timeout`, or the request's `?timeout=` (a Go
/// duration, as kube's `WithRequestDeadline` reads it) when it is positive and shorter.
///
/// # Errors
/// kube's 400 text for a `timeout` that is not a Go duration (`invalid timeout specified in
/// the request URL - time: invalid duration "x"`, or Go's missing or unknown unit texts).
pub fn request_timeout(query: Option<&str>, config: &LimitsConfig) -> Result<Duration, String> {
    let Some(query) = query.filter(|q| q.contains("timeout=")) else {
        return Ok(config.request_timeout);
    };
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query).unwrap_or_default();
    // Go's `Query().Get`: the first value.
    let Some((_, value)) = pairs.iter().find(|(key, _)| key == "timeout") else {
        return Ok(config.request_timeout);
    };
    if value.is_empty() {
        return Ok(config.request_timeout);
    }
    let seconds = crate::config::go_duration_seconds(value)
        .map_err(|error| format!("invalid timeout specified in the request URL - {error}"))?;
    Ok(
        if seconds > 0.0 && seconds < config.request_timeout.as_secs_f64() {
            Duration::from_secs_f64(seconds)
        } else {
            config.request_timeout
        },
    )
}

/// In the extensions of the 504 answered at a request's deadline (the connection layer does
/// not cut it off).
#[derive(Clone, Copy, Debug)]
pub struct TimedOut;

impl Limits {
    /// kube's answer to a request not answered within `--request-timeout` (its
    /// `WithTimeoutForNonLongRunningRequests` filter: `NewTimeoutError(..., 0)`, so
    /// `details` without `retryAfterSeconds` and no `Retry-After`), counted.
    fn timed_out(&self) -> Response {
        self.count(Limit::RequestTimeout);
        let error = ApiError {
            details: Some(serde_json::json!({})),
            ..ApiError::new(
                504,
                "Timeout",
                "Timeout: request did not complete within the allotted timeout",
            )
        };
        let mut response = error_response(&error);
        response.extensions_mut().insert(TimedOut);
        response
    }
}

/// Whether a request is long-running, as kube-apiserver's `BasicLongRunningRequestCheck`
/// with its server's sets decides (verbs `watch` and `proxy`; subresources `attach`, `exec`,
/// `proxy`, `log`, `portforward`): it has no `--request-timeout` deadline and takes no
/// in-flight slot of the timeout's kind (a watch has its own slots).
#[must_use]
pub fn is_long_running(method: &Method, path: &str, query: Option<&str>) -> bool {
    // The query is parsed only when it can make a watch (every request passes here).
    let may_watch =
        path.contains("/watch") || query.is_some_and(|q| q.contains("watch") || q.contains('%'));
    if may_watch && watch_options(method, path, query).is_some() {
        return true;
    }
    let mut segments = [""; 8];
    let mut count = 0;
    for (slot, segment) in segments
        .iter_mut()
        .zip(path.split('/').filter(|s| !s.is_empty()))
    {
        *slot = segment;
        count += 1;
    }
    let rest = match &segments[..count] {
        ["api", _version, rest @ ..] => rest,
        ["apis", _group, _version, rest @ ..] => rest,
        _ => return false,
    };
    // `namespaces/{ns}/{resource}/{name}/{sub}` or `{resource}/{name}/{sub}`; the old
    // `proxy` verb is a path prefix (`/api/v1/proxy/...`).
    let subresource = match rest {
        ["proxy", ..] => return true,
        ["namespaces", _, _, _, sub, ..] => sub,
        [resource, _, sub, ..] if *resource != "namespaces" => sub,
        _ => return false,
    };
    matches!(
        *subresource,
        "attach" | "exec" | "proxy" | "log" | "portforward"
    )
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
    fn long_running_requests_are_recognized_like_kube() {
        let get = Method::GET;
        for long in [
            ("/api/v1/namespaces/a/pods/p/log", None),
            ("/api/v1/namespaces/a/pods/p/exec", Some("command=ls")),
            ("/api/v1/namespaces/a/pods/p/attach", None),
            ("/api/v1/namespaces/a/pods/p/portforward", None),
            ("/api/v1/namespaces/a/pods/p/proxy/some/path", None),
            ("/api/v1/namespaces/a/services/s/proxy", None),
            ("/api/v1/nodes/n/proxy/metrics", None),
            ("/api/v1/proxy/namespaces/a/pods/p", None),
            ("/api/v1/namespaces/a/configmaps", Some("watch=true")),
            ("/apis/apps/v1/watch/deployments", None),
            ("/api/v1/namespaces/a/configmaps", Some("%77atch=1")),
        ] {
            assert!(is_long_running(&get, long.0, long.1), "{long:?}");
        }
        for short in [
            "/api/v1/namespaces/a/pods/log",
            "/api/v1/namespaces/log",
            "/api/v1/namespaces/a/pods/p/status",
            "/api/v1/namespaces/a/configmaps",
            "/apis/apps/v1/namespaces/a/deployments/d/scale",
            "/api/v1/nodes/n",
            "/healthz",
            "/metrics",
        ] {
            assert!(!is_long_running(&get, short, None), "{short}");
        }
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
            "//api/v1/namespaces/bad//configmaps",
            "//api",
            "//",
            "/api//v1",
            "/./api/v1",
            "/../api/v1",
            "/api/v1/..",
            "/healthz/.",
            "/api/v1/namespaces/default/configmaps/%2e%2e",
            "/debug//watchers",
            "/ui/%2E%2E/x",
            "/api/v1/%zz",
            "/api/v1/a%2",
        ] {
            // As the layer checks a path: its one spelling first, then its segments.
            let error = match canonical_path(bad) {
                Ok(canonical) => check_path(canonical.as_deref().unwrap_or(bad)).unwrap_err(),
                Err(error) => error,
            };
            assert_eq!(error.code, 400, "{bad}");
        }
        for good in [
            "/api/v1/namespaces/default/configmaps/a.b-c",
            "/apis/apps/v1/watch/deployments",
            "/api/v1",
            "/apis/",
            "/healthz",
            "/",
            "*",
            "/ui/",
            "/openapi/v3/apis/apps/v1",
        ] {
            assert!(check_path(good).is_ok(), "{good}");
        }
    }

    /// Each path has one spelling: escapes of bytes that may stand for themselves decoded,
    /// every other byte escaped in upper-case hex; an escaped `/` or a broken escape refused.
    /// Names are read decoded, and a name escaped again (for an upstream) is the canonical
    /// spelling of its segment; a path that does not decode is kept as it is.
    #[test]
    fn decoded_paths_name_what_the_escapes_spell() {
        for name in [
            "plain",
            "system:node",
            "a b",
            "caf\u{e9} <x>",
            "100%?#[]",
            "\n",
        ] {
            let escaped = watchkeeper_api::escape_path_segment(name);
            let path = format!("/apis/rbac.authorization.k8s.io/v1/clusterroles/{escaped}");
            assert_eq!(canonical_path(&path).unwrap(), None, "{path}");
            assert_eq!(
                decoded_path(&path),
                format!("/apis/rbac.authorization.k8s.io/v1/clusterroles/{name}")
            );
        }
        assert_eq!(decoded_path("/a/%C3%a9"), "/a/\u{e9}");
        for kept in ["/a/%FF", "/a/%2F", "/a/%2", "/a/%zz"] {
            assert_eq!(decoded_path(kept), kept);
        }
    }

    #[test]
    fn paths_have_one_spelling() {
        for (path, canonical) in [
            ("/api/v1/namespaces/default/configmaps/a.b-c", None),
            (
                "/apis/rbac.authorization.k8s.io/v1/clusterroles/system:node",
                None,
            ),
            ("/", None),
            ("*", None),
            // client-python escapes ':' (and all but `_.-~`, letters and digits).
            (
                "/apis/rbac.authorization.k8s.io/v1/clusterroles/system%3Anode",
                Some("/apis/rbac.authorization.k8s.io/v1/clusterroles/system:node"),
            ),
            ("/%61pi/v1", Some("/api/v1")),
            (
                "/api/v1/namespaces/a%40b%3d%2B",
                Some("/api/v1/namespaces/a@b=+"),
            ),
            ("/api/v1/namespaces/%2e%2E", Some("/api/v1/namespaces/..")),
            // Bytes that may not stand for themselves stay escaped, in upper case.
            ("/api/v1/namespaces/a%20b", None),
            (
                "/api/v1/namespaces/a%3cb%3E",
                Some("/api/v1/namespaces/a%3Cb%3E"),
            ),
            (
                "/api/v1/namespaces/%c3%a9",
                Some("/api/v1/namespaces/%C3%A9"),
            ),
            ("/api/v1/namespaces/%25", None),
            ("/api/v1/namespaces/%2541", None),
            ("/api/v1/namespaces/a\"b", Some("/api/v1/namespaces/a%22b")),
        ] {
            let got = canonical_path(path).unwrap_or_else(|e| panic!("{path}: {e:?}"));
            assert_eq!(got.as_deref(), canonical, "{path}");
            // The one spelling is its own: spelling it again changes nothing.
            let spelled = got.as_deref().unwrap_or(path);
            assert_eq!(canonical_path(spelled).unwrap(), None, "{spelled}");
        }
        for bad in [
            "/api%2Fv1",
            "/api%2fv1",
            "/a/%",
            "/a/%4",
            "/a/%g0",
            "/a/%%41",
        ] {
            assert_eq!(canonical_path(bad).unwrap_err().code, 400, "{bad}");
        }
        // The segments are checked after the decoding: `%2e%2e` is `..`.
        let dots = canonical_path("/api/v1/namespaces/%2e%2e")
            .unwrap()
            .unwrap();
        assert_eq!(check_path(&dots).unwrap_err().code, 400);
        assert!(check_path("/api/v1/namespaces/a%3Cb").is_ok());
        // Alone, the segment check still refuses a broken escape.
        for bad in ["/a/%zz", "/a/%4", "/a/b%"] {
            assert_eq!(check_path(bad).unwrap_err().code, 400, "{bad}");
        }
    }

    /// The one-pass segment check says what splitting says, for every text of up to seven
    /// bytes from `a`, `.` and `/`.
    #[test]
    fn the_segment_pass_agrees_with_splitting() {
        let mut texts = vec![String::new()];
        let mut checked = 0;
        while let Some(text) = texts.pop() {
            let split = text
                .split('/')
                .all(|segment| !matches!(segment, "" | "." | ".."));
            assert_eq!(segments_have_names(&text), split, "{text:?}");
            checked += 1;
            if text.len() < 7 {
                for byte in ["a", ".", "/"] {
                    texts.push(format!("{text}{byte}"));
                }
            }
        }
        assert_eq!(checked, (3usize.pow(8) - 1) / 2);
    }
}

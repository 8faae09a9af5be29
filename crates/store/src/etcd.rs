//! The etcd backend: a real etcd (v3 API) through the `etcd-client` crate.
//!
//! - Keys are raw bytes, passed through unchanged. Revisions are etcd's header revision
//!   and `mod_revision`.
//! - [`Store::current_revision`] is a linearizable (quorum) range of one key, reading the
//!   header revision.
//! - Transactions map onto one etcd `Txn`: `ModRevision` → `mod_revision == R`, `Absent`
//!   → `create_revision == 0`, `Present` → `create_revision > 0`; the failure branch reads
//!   every compared key so a conflict returns the current versions in one round trip.
//! - Watches ask for `prev_kv` and periodic progress notifications. An event etcd sends
//!   without `prev_kv` though the key existed (its watch stream registers a watcher before it
//!   records the option, so a write landing in between has none) gets it read by the backend
//!   at `mod_revision - 1`, as etcd reads it; it stays `None` only when that version was
//!   compacted (or the read failed). etcd 3.4.23's
//!   *requested* progress (`RequestWatchProgress`) can overtake queued events
//!   (etcd#15220), so it is never used. Events are regrouped by revision: one
//!   [`WatchItem::Revision`] per revision. etcd never splits one revision across watch
//!   responses unless the watch asked for fragmentation (its catch-up batches cut at
//!   revision boundaries and live notifications carry one whole revision), and this backend
//!   never asks for it; a response with several revisions becomes several items.
//! - Several endpoints (the members of one cluster): one is pinned and receives every
//!   request and watch; a request that could not connect, a member without a leader, an
//!   unavailable member or a broken watch stream pins the next one. Unary requests are sent
//!   again within `request_timeout`: reads (and compactions) on any unavailability, writes
//!   only when etcd never received them (no connection) or refused them before proposing
//!   ("etcdserver: no leader"); a write that may have been applied ("leader changed",
//!   "request timed out", a connection lost mid-request) is answered as unavailable.
//!   Requests carry `hasleader` (etcd's require-leader), as kube-apiserver's watches do.
//! - A broken watch stream (etcd restarted, connection lost, canceled for a reason other
//!   than compaction) is re-established from the last delivered revision + 1 (or the last
//!   progress revision + 1), with exponential backoff and jitter, logged with `tracing`.
//!   Events below that revision are dropped, so a resumed watch has no gap and no
//!   duplicate. If the resume revision was compacted meanwhile, the watch ends with
//!   [`WatchItem::Compacted`].
//! - etcd reports a compacted read as gRPC `OutOfRange` "required revision has been
//!   compacted" without the floor; the floor is then found with a short probe watch from
//!   revision 1 (etcd answers it with the compaction revision).
//! - TLS ([`EtcdTls`], kube-apiserver's `--etcd-cafile`, `--etcd-certfile`, `--etcd-keyfile`):
//!   rustls with ring, through tonic. An `https://` endpoint verifies etcd's serving
//!   certificate against the CA bundle, or the system's roots when none is given (as kube's
//!   etcd client does); the name checked is the endpoint's host (a DNS name or an IP address
//!   SAN). A client identity is presented when configured. Every request, watch, compaction
//!   and health probe goes through the same clients, so all of them are over TLS. Unlike
//!   kube (whose etcd client silently drops TLS for `http://` endpoints), TLS material with an
//!   `http://` endpoint is refused. A failed handshake (a certificate refused by either side)
//!   is not sent again on the same member: it is answered as unavailable with rustls' reason
//!   at once (after trying each other member once), so a probe reports why instead of timing
//!   out.

use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use etcd_client::{
    Certificate, Client, CompactionOptions, CompareOp, ConnectOptions, DeleteOptions, EventType,
    GetOptions, Identity, PutOptions, TlsOptions, TxnOpResponse, WatchOptions,
};
use tokio::sync::mpsc;

use crate::types::KeyBounds;
use crate::{
    BackendError, CompactError, Compare, Event, EventKind, KeySelector, KeyValue, OpenError,
    RangeError, RangeRequest, RangeResponse, Store, StoreCounters, TxnError, TxnOp, TxnRequest,
    TxnResponse, Watch, WatchError, WatchItem,
};

/// TLS to etcd: the PEM text of kube-apiserver's `--etcd-cafile`, `--etcd-certfile` and
/// `--etcd-keyfile`, read and checked by the caller (the server's configuration). Its `Debug`
/// does not show the private key.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct EtcdTls {
    /// PEM CA certificates that verify etcd's serving certificate; `None`: the system's
    /// roots.
    pub ca_pem: Option<Vec<u8>>,
    /// The client certificate chain (leaf first) and its private key, PEM; `None`: no client
    /// certificate.
    pub identity: Option<(Vec<u8>, Vec<u8>)>,
}

impl std::fmt::Debug for EtcdTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdTls")
            .field("ca_pem", &self.ca_pem.as_ref().map(Vec::len))
            .field("identity", &self.identity.is_some())
            .finish()
    }
}

impl EtcdTls {
    /// tonic's client TLS configuration: this CA bundle or the system's roots, and this
    /// identity.
    fn options(&self) -> TlsOptions {
        let options = match &self.ca_pem {
            Some(ca) => TlsOptions::new().ca_certificate(Certificate::from_pem(ca)),
            None => TlsOptions::new().with_native_roots(),
        };
        match &self.identity {
            Some((cert, key)) => options.identity(Identity::from_pem(cert, key)),
            None => options,
        }
    }
}

/// Configuration of [`EtcdStore`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EtcdConfig {
    /// Client URLs, e.g. `http://127.0.0.1:2379` or `https://127.0.0.1:2379`. At least one.
    pub endpoints: Vec<String>,
    /// TLS for the endpoints (all `https://`, or without a scheme); `None`: plain HTTP, and
    /// the system's roots for `https://` endpoints. Default `None`.
    pub tls: Option<EtcdTls>,
    /// Timeout for establishing a connection. Default 5 s.
    pub connect_timeout: Duration,
    /// Timeout for each unary request (range, txn, compact). Default 30 s.
    pub request_timeout: Duration,
    /// HTTP/2 keep-alive ping interval; a dead etcd is noticed within this plus
    /// `keep_alive_timeout`. Default 10 s.
    pub keep_alive_interval: Duration,
    /// How long to wait for a keep-alive ping answer. Default 5 s.
    pub keep_alive_timeout: Duration,
    /// First delay before re-establishing a broken watch; doubles per failure. Default
    /// 100 ms.
    pub reconnect_backoff_initial: Duration,
    /// Longest delay between watch re-establishment attempts. Default 5 s. Each delay is
    /// jittered uniformly within [delay/2, delay].
    pub reconnect_backoff_max: Duration,
    /// Items buffered per watch before its task stops reading from etcd. Default 128; ≥ 1.
    pub watch_channel_capacity: usize,
    /// Ask etcd for periodic progress notifications (their period is etcd's
    /// `--experimental-watch-progress-notify-interval`, 10 min by default). Default true.
    pub progress_notify: bool,
}

impl EtcdConfig {
    /// Defaults, for these endpoints.
    pub fn new(endpoints: impl IntoIterator<Item = impl Into<String>>) -> Self {
        Self {
            endpoints: endpoints.into_iter().map(Into::into).collect(),
            tls: None,
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(30),
            keep_alive_interval: Duration::from_secs(10),
            keep_alive_timeout: Duration::from_secs(5),
            reconnect_backoff_initial: Duration::from_millis(100),
            reconnect_backoff_max: Duration::from_secs(5),
            watch_channel_capacity: 128,
            progress_notify: true,
        }
    }

    /// Checks every value is in range.
    pub fn validate(&self) -> Result<(), OpenError> {
        let bad = |m: &str| Err(OpenError::InvalidConfig(m.into()));
        if self.endpoints.is_empty() {
            return bad("at least one etcd endpoint is required");
        }
        if let Some(plain) = self.endpoints.iter().find(|e| e.starts_with("http://"))
            && self.tls.is_some()
        {
            return Err(OpenError::InvalidConfig(format!(
                "TLS to etcd needs https:// endpoints, not {plain}"
            )));
        }
        for (name, d) in [
            ("connect_timeout", self.connect_timeout),
            ("request_timeout", self.request_timeout),
            ("keep_alive_interval", self.keep_alive_interval),
            ("keep_alive_timeout", self.keep_alive_timeout),
            ("reconnect_backoff_initial", self.reconnect_backoff_initial),
        ] {
            if d.is_zero() {
                return Err(OpenError::InvalidConfig(format!("{name} must be positive")));
            }
        }
        if self.reconnect_backoff_max < self.reconnect_backoff_initial {
            return bad("reconnect_backoff_max must be at least reconnect_backoff_initial");
        }
        if self.watch_channel_capacity == 0 {
            return bad("watch_channel_capacity must be at least 1");
        }
        Ok(())
    }
}

/// One client per endpoint and the one in use (pinned): every request and watch goes to the
/// pinned member until it fails in a way that says the member is down, unreachable or
/// without a leader; then the next endpoint is pinned. (One client over every endpoint would
/// let its balancer keep choosing an endpoint that refuses connections: on equal load it
/// picks the first.)
struct Members {
    clients: Vec<Client>,
    pinned: std::sync::atomic::AtomicUsize,
}

impl Members {
    /// The pinned member's index and client.
    fn pinned(&self) -> (usize, Client) {
        let i = self.pinned.load(std::sync::atomic::Ordering::Relaxed) % self.clients.len();
        (i, self.clients[i].clone())
    }

    /// Pins the member after `from`, unless another request already moved on from it.
    fn fail_over(&self, from: usize) {
        let next = (from + 1) % self.clients.len();
        if self
            .pinned
            .compare_exchange(
                from,
                next,
                std::sync::atomic::Ordering::Relaxed,
                std::sync::atomic::Ordering::Relaxed,
            )
            .is_ok()
            && next != from
        {
            tracing::info!(from, to = next, "etcd: moving to the next endpoint");
        }
    }
}

/// A store backed by etcd. Cloning shares the same connections.
#[derive(Clone)]
pub struct EtcdStore {
    // Boxed: a client is several KiB and would bloat every `AnyStore`.
    members: Arc<Members>,
    config: Arc<EtcdConfig>,
    counters: Arc<StoreCounters>,
}

impl std::fmt::Debug for EtcdStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdStore")
            .field("endpoints", &self.config.endpoints)
            .finish()
    }
}

/// First pause before a unary request is sent again; doubles per attempt.
const RETRY_PAUSE_INITIAL: Duration = Duration::from_millis(10);
/// Longest pause between two attempts of one unary request.
const RETRY_PAUSE_MAX: Duration = Duration::from_millis(500);

/// Whether a failed unary request may be sent again.
#[derive(Debug, PartialEq, Eq)]
enum Attempt {
    /// It never reached etcd: the connection to the endpoint the client picked could not be
    /// made (a member down). Safe to send again, writes included; the client's balancer then
    /// picks a member that answers.
    NotSent,
    /// etcd refused it before proposing it ("etcdserver: no leader"): safe to send again.
    NoLeader,
    /// Unavailable in a way that may have let it through (a connection lost mid-request,
    /// "leader changed", "request timed out"): safe to send again only if it reads.
    Unavailable,
    /// The TLS handshake failed: one side refused the other's certificate (or it has
    /// none). Never sent, but the same member refuses it again: sent once to each other
    /// member, then answered with the reason.
    Refused,
    /// Anything else: answer it.
    Final,
}

fn attempt(e: &etcd_client::Error) -> Attempt {
    use etcd_client::Error as E;
    match e {
        E::GRpcStatus(s) => status_attempt(i32::from(s.code()), s.message()),
        E::TransportError(_) | E::IoError(_) if is_tls_refusal(&e.to_string()) => Attempt::Refused,
        E::TransportError(_) | E::IoError(_) => Attempt::Unavailable,
        _ => Attempt::Final,
    }
}

/// [`attempt`] for a gRPC status: its code and message.
fn status_attempt(code: i32, msg: &str) -> Attempt {
    // A connection that could not be made: tonic's Unavailable with the connector's message
    // (a failed handshake is worded the same way, so it is looked for first).
    let not_sent = [
        "tcp connect error",
        "error trying to connect",
        "Connection refused",
    ];
    if is_tls_refusal(msg) {
        Attempt::Refused
    } else if not_sent.iter().any(|m| msg.contains(m)) {
        Attempt::NotSent
    } else if msg.contains("etcdserver: no leader") {
        Attempt::NoLeader
    } else if code == 14 {
        Attempt::Unavailable
    } else {
        Attempt::Final
    }
}

/// Whether an error's text is a failed TLS handshake, as rustls words it: our side refused
/// etcd's certificate (`invalid peer certificate: ...`, `peer sent no certificates`), or
/// etcd refused ours (`received fatal alert: BadCertificate`, `CertificateRequired`, ...).
fn is_tls_refusal(message: &str) -> bool {
    [
        "invalid peer certificate",
        "peer sent no certificates",
        "received fatal alert",
        "peer is incompatible",
        "peer misbehaved",
    ]
    .iter()
    .any(|m| message.contains(m))
}

/// How an etcd error reads for us.
enum Failure {
    Compacted,
    Future,
    /// etcd's space quota refused a write (`etcdserver: mvcc: database space exceeded`,
    /// gRPC ResourceExhausted): [`TxnError::NoSpace`](crate::TxnError::NoSpace), not an
    /// unavailability — retrying does not help until an operator frees space.
    NoSpace,
    Backend(BackendError),
}

fn classify(e: etcd_client::Error) -> Failure {
    use etcd_client::Error as E;
    match e {
        E::GRpcStatus(s) => {
            let msg = with_causes(s.message(), &s);
            if msg.contains("required revision has been compacted") {
                Failure::Compacted
            } else if msg.contains("required revision is a future revision") {
                Failure::Future
            } else if msg.contains("mvcc: database space exceeded") {
                Failure::NoSpace
            } else {
                // gRPC codes (tonic is not a direct dependency): Cancelled 1, Unknown 2,
                // DeadlineExceeded 4, ResourceExhausted 8, Aborted 10, Unavailable 14.
                match i32::from(s.code()) {
                    1 | 2 | 4 | 8 | 10 | 14 => {
                        Failure::Backend(BackendError::Unavailable(format!("etcd: {msg}")))
                    }
                    _ => Failure::Backend(BackendError::Storage(format!("etcd: {msg}"))),
                }
            }
        }
        E::TransportError(_) | E::IoError(_) => {
            Failure::Backend(BackendError::Unavailable(with_causes(&e.to_string(), &e)))
        }
        other => Failure::Backend(BackendError::Storage(other.to_string())),
    }
}

/// `head` followed by the causes of `error` that it does not already say (tonic words a
/// failed connection "transport error" and keeps the reason — a refused certificate, a
/// refused connection — in its sources).
fn with_causes(head: &str, error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = head.to_owned();
    let mut cause = error.source();
    while let Some(error) = cause {
        let said = error.to_string();
        if !text.contains(&said) {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&said);
        }
        cause = error.source();
    }
    text
}

fn to_kv(kv: &etcd_client::KeyValue) -> KeyValue {
    KeyValue {
        key: Bytes::copy_from_slice(kv.key()),
        value: Bytes::copy_from_slice(kv.value()),
        create_revision: kv.create_revision().max(0) as u64,
        mod_revision: kv.mod_revision().max(0) as u64,
        version: kv.version().max(0) as u64,
    }
}

/// `range_end` for etcd: `[0]` means "every key >= key".
fn range_end(bounds: &KeyBounds) -> Vec<u8> {
    bounds.hi.as_ref().map_or_else(|| vec![0], |h| h.to_vec())
}

impl EtcdStore {
    /// Connects to etcd. The connection is established lazily and re-established
    /// automatically; this fails only on an invalid configuration or endpoint.
    pub async fn connect(config: EtcdConfig) -> Result<Self, OpenError> {
        config.validate()?;
        // `require_leader`: a member without a leader refuses requests at once ("etcdserver:
        // no leader") and cancels watch streams, instead of serving a watch that can no
        // longer advance; both then move to the next endpoint.
        let opts = ConnectOptions::new()
            .with_connect_timeout(config.connect_timeout)
            .with_keep_alive(config.keep_alive_interval, config.keep_alive_timeout)
            .with_require_leader(true);
        let mut clients = Vec::with_capacity(config.endpoints.len());
        for endpoint in &config.endpoints {
            // TLS as configured; an `https://` endpoint without it still verifies etcd's
            // certificate, against the system's roots.
            let tls = match &config.tls {
                Some(tls) => Some(tls.options()),
                None if endpoint.starts_with("https://") => Some(EtcdTls::default().options()),
                None => None,
            };
            let opts = match tls {
                Some(tls) => opts.clone().with_tls(tls),
                None => opts.clone(),
            };
            let client =
                Client::connect([endpoint], Some(opts))
                    .await
                    .map_err(|e| match classify(e) {
                        Failure::Backend(b) => OpenError::Backend(b),
                        _ => OpenError::Backend(BackendError::Unavailable(
                            "etcd connect failed".into(),
                        )),
                    })?;
            clients.push(client);
        }
        Ok(Self {
            members: Arc::new(Members {
                clients,
                pinned: std::sync::atomic::AtomicUsize::new(0),
            }),
            config: Arc::new(config),
            counters: Arc::new(StoreCounters::default()),
        })
    }

    /// The etcd client of the pinned endpoint (for tests and tools).
    pub fn client(&self) -> &Client {
        let (i, _) = self.members.pinned();
        &self.members.clients[i]
    }

    /// One unary request to the pinned member, made by `request` and sent again while it
    /// fails in a way that allows it (see [`Attempt`]): `read_only` requests on any
    /// unavailability, writes only when etcd never received them or refused them before
    /// proposing. A failure other than [`Attempt::Final`] first pins the next member. Every
    /// attempt and pause together stay within `request_timeout`.
    async fn timed<T, F>(
        &self,
        read_only: bool,
        mut request: impl FnMut(Client) -> F,
    ) -> Result<T, Failure>
    where
        F: Future<Output = Result<T, etcd_client::Error>>,
    {
        let deadline = tokio::time::Instant::now() + self.config.request_timeout;
        let mut pause = RETRY_PAUSE_INITIAL;
        let mut refused = 0;
        loop {
            let (member, client) = self.members.pinned();
            let error = match tokio::time::timeout_at(deadline, request(client)).await {
                Ok(Ok(value)) => return Ok(value),
                Ok(Err(error)) => error,
                Err(_) => {
                    return Err(Failure::Backend(BackendError::Unavailable(
                        "etcd request timed out".into(),
                    )));
                }
            };
            let again = match attempt(&error) {
                Attempt::NotSent | Attempt::NoLeader => true,
                Attempt::Unavailable => read_only,
                Attempt::Refused => {
                    refused += 1;
                    refused < self.members.clients.len()
                }
                Attempt::Final => false,
            };
            if attempt(&error) != Attempt::Final {
                self.members.fail_over(member);
            }
            if !again || tokio::time::Instant::now() + pause >= deadline {
                return Err(classify(error));
            }
            tracing::debug!(error = %error, ?pause, "etcd request failed; sending it again");
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(RETRY_PAUSE_MAX);
        }
    }

    /// Finds etcd's compaction floor with a watch from revision 1, which etcd cancels
    /// with the compaction revision. `None` when not compacted or not answered quickly.
    async fn probe_compact_revision(&self) -> Option<u64> {
        let mut client = self.members.pinned().1.watch_client();
        let probe = async move {
            let opts = WatchOptions::new().with_start_revision(1);
            let mut stream = client
                .watch(&b"\0watchkeeper-probe"[..], Some(opts))
                .await
                .ok()?;
            loop {
                let resp = stream.message().await.ok()??;
                if resp.compact_revision() > 0 {
                    return Some(resp.compact_revision() as u64);
                }
                if resp.canceled() || !resp.events().is_empty() {
                    return None;
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(2), probe)
            .await
            .ok()
            .flatten()
    }

    async fn range_inner(&self, req: RangeRequest) -> Result<RangeResponse, RangeError> {
        let bounds = KeyBounds::new(&req.keys, req.start.as_ref());
        let mut opts = if bounds.is_empty() {
            GetOptions::new().with_count_only()
        } else {
            GetOptions::new().with_range(range_end(&bounds))
        };
        if req.revision > 0 {
            opts = opts.with_revision(req.revision as i64);
        }
        if req.limit > 0 {
            opts = opts.with_limit(req.limit as i64);
        }
        let request = |client: Client| {
            let (mut kv, key, opts) = (client.kv_client(), bounds.lo.to_vec(), opts.clone());
            async move { kv.get(key, Some(opts)).await }
        };
        match self.timed(true, request).await {
            Ok(resp) => {
                let header = resp.header().map_or(0, |h| h.revision().max(0) as u64);
                Ok(RangeResponse {
                    kvs: resp.kvs().iter().map(to_kv).collect(),
                    more: resp.more(),
                    revision: if req.revision > 0 {
                        req.revision
                    } else {
                        header
                    },
                })
            }
            Err(Failure::Compacted) => {
                let floor = self.probe_compact_revision().await;
                Err(RangeError::Compacted {
                    requested: req.revision,
                    compact_revision: floor.unwrap_or(req.revision + 1),
                })
            }
            Err(Failure::Future) => Err(RangeError::FutureRevision {
                requested: req.revision,
                current: self.current_revision().await?,
            }),
            Err(Failure::NoSpace) => Err(BackendError::Storage(
                "etcd: unexpected database space exceeded on a read".into(),
            )
            .into()),
            Err(Failure::Backend(b)) => Err(b.into()),
        }
    }

    async fn txn_inner(&self, req: TxnRequest) -> Result<TxnResponse, TxnError> {
        crate::mvcc::check_duplicates(&req)?;
        let compares: Vec<etcd_client::Compare> = req
            .compares
            .iter()
            .map(|c| match c {
                Compare::ModRevision { key, revision } => etcd_client::Compare::mod_revision(
                    key.to_vec(),
                    CompareOp::Equal,
                    *revision as i64,
                ),
                Compare::Absent { key } => {
                    etcd_client::Compare::create_revision(key.to_vec(), CompareOp::Equal, 0)
                }
                Compare::Present { key } => {
                    etcd_client::Compare::create_revision(key.to_vec(), CompareOp::Greater, 0)
                }
            })
            .collect();
        let success: Vec<etcd_client::TxnOp> = req
            .success
            .iter()
            .map(|op| match op {
                TxnOp::Put { key, value } => etcd_client::TxnOp::put(
                    key.to_vec(),
                    value.to_vec(),
                    Some(PutOptions::new().with_prev_key()),
                ),
                TxnOp::Delete { key } => etcd_client::TxnOp::delete(
                    key.to_vec(),
                    Some(DeleteOptions::new().with_prev_key()),
                ),
            })
            .collect();
        let failure: Vec<etcd_client::TxnOp> = req
            .compares
            .iter()
            .map(|c| etcd_client::TxnOp::get(c.key().to_vec(), None))
            .collect();
        let txn = etcd_client::Txn::new()
            .when(compares)
            .and_then(success)
            .or_else(failure);
        let request = |client: Client| {
            let (mut kv, txn) = (client.kv_client(), txn.clone());
            async move { kv.txn(txn).await }
        };
        let resp = match self.timed(false, request).await {
            Ok(r) => r,
            Err(Failure::Backend(b)) => return Err(b.into()),
            Err(Failure::NoSpace) => return Err(TxnError::NoSpace),
            Err(_) => return Err(BackendError::Storage("unexpected etcd txn error".into()).into()),
        };
        let revision = resp.header().map_or(0, |h| h.revision().max(0) as u64);
        let ops = resp.op_responses();
        if !resp.succeeded() {
            self.counters.conflict();
            let current = req
                .compares
                .iter()
                .zip(ops.iter())
                .map(|(c, r)| {
                    let kv = match r {
                        TxnOpResponse::Get(g) => g.kvs().first().map(to_kv),
                        _ => None,
                    };
                    (c.key().clone(), kv)
                })
                .collect();
            return Ok(TxnResponse {
                succeeded: false,
                revision,
                events: Vec::new(),
                current,
            });
        }
        let mut events = Vec::new();
        for (op, r) in req.success.iter().zip(ops.iter()) {
            match (op, r) {
                (TxnOp::Put { key, value }, TxnOpResponse::Put(p)) => {
                    let prev = p.prev_key().map(to_kv);
                    let (create_revision, version) = match &prev {
                        Some(p) => (p.create_revision, p.version + 1),
                        None => (revision, 1),
                    };
                    events.push(Event {
                        kind: EventKind::Put,
                        kv: KeyValue {
                            key: key.clone(),
                            value: value.clone(),
                            create_revision,
                            mod_revision: revision,
                            version,
                        },
                        prev_kv: prev,
                    });
                }
                (TxnOp::Delete { key }, TxnOpResponse::Delete(d)) => {
                    if d.deleted() > 0 {
                        events.push(Event {
                            kind: EventKind::Delete,
                            kv: crate::mvcc::tombstone(key.clone(), revision),
                            prev_kv: d.prev_kvs().first().map(to_kv),
                        });
                    }
                }
                _ => {
                    return Err(BackendError::Storage("etcd txn response mismatch".into()).into());
                }
            }
        }
        Ok(TxnResponse {
            succeeded: true,
            revision,
            events,
            current: Vec::new(),
        })
    }
}

impl Store for EtcdStore {
    async fn current_revision(&self) -> Result<u64, RangeError> {
        let request = |client: Client| {
            let mut kv = client.kv_client();
            async move {
                kv.get(&b"\0"[..], Some(GetOptions::new().with_count_only()))
                    .await
            }
        };
        match self.timed(true, request).await {
            Ok(resp) => Ok(resp.header().map_or(0, |h| h.revision().max(0) as u64)),
            Err(Failure::Backend(b)) => Err(b.into()),
            Err(_) => Err(BackendError::Storage("unexpected etcd range error".into()).into()),
        }
    }

    async fn range(&self, req: RangeRequest) -> Result<RangeResponse, RangeError> {
        self.counters.range();
        self.range_inner(req).await
    }

    async fn txn(&self, req: TxnRequest) -> Result<TxnResponse, TxnError> {
        self.counters.txn();
        self.txn_inner(req).await
    }

    async fn watch(&self, keys: KeySelector, from_revision: u64) -> Result<Watch, WatchError> {
        self.counters.watch();
        let next = if from_revision == 0 {
            match self.current_revision().await {
                Ok(r) => r + 1,
                Err(RangeError::Backend(b)) => return Err(b.into()),
                Err(e) => return Err(BackendError::Storage(e.to_string()).into()),
            }
        } else {
            from_revision
        };
        let (tx, watch) = Watch::channel(self.config.watch_channel_capacity);
        tokio::spawn(run_watch(
            self.clone(),
            KeyBounds::new(&keys, None),
            next,
            tx,
        ));
        Ok(watch)
    }

    async fn compact(&self, revision: u64) -> Result<(), CompactError> {
        let request = |mut client: Client| async move {
            let opts = CompactionOptions::new().with_physical();
            client.compact(revision as i64, Some(opts)).await
        };
        // Not read-only, but sending it again is harmless: a compaction that was applied
        // answers "already compacted" the second time.
        match self.timed(true, request).await {
            Ok(_) => {
                self.counters.compaction();
                Ok(())
            }
            Err(Failure::Compacted) => Err(CompactError::AlreadyCompacted {
                requested: revision,
                compact_revision: self.probe_compact_revision().await.unwrap_or(revision),
            }),
            Err(Failure::Future) => Err(CompactError::FutureRevision {
                requested: revision,
                current: self.current_revision().await.map_err(|e| match e {
                    RangeError::Backend(b) => b,
                    other => BackendError::Storage(other.to_string()),
                })?,
            }),
            Err(Failure::NoSpace) => Err(BackendError::Storage(
                "etcd: unexpected database space exceeded on a compaction".into(),
            )
            .into()),
            Err(Failure::Backend(b)) => Err(b.into()),
        }
    }

    fn counters(&self) -> &StoreCounters {
        &self.counters
    }
}

/// Exponential backoff with jitter in [d/2, d].
struct Backoff {
    initial: Duration,
    max: Duration,
    current: Duration,
    rng: u64,
}

impl Backoff {
    fn new(initial: Duration, max: Duration) -> Self {
        let seed = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish();
        Self {
            initial,
            max,
            current: initial,
            rng: seed | 1,
        }
    }

    fn reset(&mut self) {
        self.current = self.initial;
    }

    fn next_delay(&mut self) -> Duration {
        // xorshift64
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let d = self.current;
        self.current = (self.current * 2).min(self.max);
        let half = d / 2;
        let nanos = half.as_nanos().max(1) as u64;
        half + Duration::from_nanos(self.rng % nanos)
    }
}

/// The watch task: runs etcd watch streams back to back until the consumer goes away or
/// the watch hits compaction.
async fn run_watch(
    store: EtcdStore,
    bounds: KeyBounds,
    mut next: u64,
    tx: mpsc::Sender<WatchItem>,
) {
    let (members, config) = (&store.members, &store.config);
    let mut backoff = Backoff::new(
        config.reconnect_backoff_initial,
        config.reconnect_backoff_max,
    );
    let end = range_end(&bounds);
    loop {
        let mut opts = WatchOptions::new()
            .with_range(end.clone())
            .with_start_revision(next as i64)
            .with_prev_key();
        if config.progress_notify {
            opts = opts.with_progress_notify();
        }
        let (member, client) = members.pinned();
        let mut wc = client.watch_client();
        let started = tokio::select! {
            r = wc.watch(bounds.lo.to_vec(), Some(opts)) => r,
            () = tx.closed() => return,
        };
        match started {
            Err(e) => tracing::warn!(error = %e, next, "etcd watch could not start; retrying"),
            Ok(mut stream) => loop {
                let msg = tokio::select! {
                    m = stream.message() => m,
                    () = tx.closed() => return,
                };
                let resp = match msg {
                    Ok(Some(resp)) => resp,
                    Ok(None) => {
                        tracing::warn!(next, "etcd watch stream ended; resuming");
                        break;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, next, "etcd watch stream broke; resuming");
                        break;
                    }
                };
                if resp.canceled() {
                    if resp.compact_revision() > 0 {
                        let _ = tx
                            .send(WatchItem::Compacted {
                                requested: next,
                                compact_revision: resp.compact_revision() as u64,
                            })
                            .await;
                        return;
                    }
                    tracing::warn!(
                        reason = resp.cancel_reason(),
                        next,
                        "etcd canceled the watch; resuming"
                    );
                    break;
                }
                if resp.created() {
                    backoff.reset();
                }
                if resp.events().is_empty() {
                    if !resp.created() {
                        let rev = resp.header().map_or(0, |h| h.revision().max(0) as u64);
                        // Progress at `rev`: everything up to `rev` was delivered. Skip
                        // stale ones (etcd#20221: a future-start watch can get a lower one).
                        if rev + 1 >= next {
                            next = rev + 1;
                            if tx
                                .send(WatchItem::Progress { revision: rev })
                                .await
                                .is_err()
                            {
                                return;
                            }
                        }
                    }
                    continue;
                }
                for (revision, mut events) in group_by_revision(resp.events(), next) {
                    store.fill_missing_prev_kvs(&mut events).await;
                    next = revision + 1;
                    if tx
                        .send(WatchItem::Revision { revision, events })
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
            },
        }
        // The stream failed on this member (down, restarted, without a leader): resume on
        // the next one.
        members.fail_over(member);
        let delay = backoff.next_delay();
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            () = tx.closed() => return,
        }
    }
}

impl EtcdStore {
    /// Reads the previous version of each event that should have one (a delete, or a put of
    /// a key that existed) but came without it, as etcd itself does for `prev_kv`: the key at
    /// `mod_revision - 1`. etcd 3.4 (and 3.5) leave it out not only when that version was
    /// compacted but also for events its watch stream sends before it has recorded the
    /// watch's `prev_kv` option (its `recvLoop` registers the watcher, then sets the option,
    /// while its `sendLoop` may already be reading events for it): a write landing while
    /// the watch is being created. Left `None` if the read fails (compacted meanwhile, etcd
    /// unavailable), as etcd does.
    async fn fill_missing_prev_kvs(&self, events: &mut [Event]) {
        for event in events {
            let created = event.kind == EventKind::Put && event.kv.version == 1;
            if event.prev_kv.is_some() || created || event.kv.mod_revision < 2 {
                continue;
            }
            // A plain read (not `range`: a compacted one needs no probe for the floor here).
            let (key, revision) = (event.kv.key.to_vec(), event.kv.mod_revision as i64 - 1);
            let request = |client: Client| {
                let (mut kv, key) = (client.kv_client(), key.clone());
                async move {
                    kv.get(key, Some(GetOptions::new().with_revision(revision)))
                        .await
                }
            };
            if let Ok(read) = self.timed(true, request).await {
                event.prev_kv = read.kvs().first().map(to_kv);
            }
        }
    }
}

/// Splits one response's events into whole revisions, dropping those below `next`
/// (already delivered before a reconnect).
fn group_by_revision(events: &[etcd_client::Event], next: u64) -> Vec<(u64, Vec<Event>)> {
    let mut out: Vec<(u64, Vec<Event>)> = Vec::new();
    for ev in events {
        let Some(kv) = ev.kv() else { continue };
        let kv = to_kv(kv);
        let rev = kv.mod_revision;
        if rev < next {
            continue;
        }
        let kind = match ev.event_type() {
            EventType::Put => EventKind::Put,
            EventType::Delete => EventKind::Delete,
        };
        let event = Event {
            kind,
            kv,
            prev_kv: ev.prev_kv().map(to_kv),
        };
        match out.last_mut() {
            Some((r, evs)) if *r == rev => evs.push(event),
            _ => out.push((rev, vec![event])),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Goal: an event that etcd sent without the key's previous version (as its watch stream
    /// does for a write landing while it creates the watch) gets it from the backend: a put
    /// of an existing key and a delete get the version before them, a create gets none. Needs
    /// the shared test etcd (`scripts/test` sets `WATCHKEEPER_TEST_ETCD`).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_missing_previous_version_is_read_as_etcd_reads_it() {
        let endpoint = std::env::var("WATCHKEEPER_TEST_ETCD")
            .expect("WATCHKEEPER_TEST_ETCD is not set: run scripts/test, which starts etcd");
        let s = EtcdStore::connect(EtcdConfig::new([endpoint]))
            .await
            .unwrap();
        let key = |name: &str| Bytes::from(format!("/lib-prev-kv/{}/{name}", std::process::id()));
        let created = s.put(key("a"), "1").await.unwrap();
        let updated = s.put(key("a"), "2").await.unwrap();
        s.put(key("b"), "only").await.unwrap();
        let deleted = s.delete(key("b")).await.unwrap();
        // The watch's own events, stripped of what etcd sent as their previous versions.
        let mut w = s
            .watch(KeySelector::prefix(key("")), created)
            .await
            .unwrap();
        let mut events = Vec::new();
        while events.len() < 4 {
            if let WatchItem::Revision { events: e, .. } =
                w.next().await.expect("the watch goes on")
            {
                events.extend(e);
            }
        }
        for e in &mut events {
            e.prev_kv = None;
        }
        s.fill_missing_prev_kvs(&mut events).await;
        let before: Vec<(u64, Option<&[u8]>)> = events
            .iter()
            .map(|e| (e.kv.mod_revision, e.prev_kv.as_ref().map(|p| &p.value[..])))
            .collect();
        assert_eq!(
            before,
            vec![
                (created, None),
                (updated, Some(&b"1"[..])),
                (updated + 1, None),
                (deleted, Some(&b"only"[..])),
            ]
        );
    }

    #[test]
    fn backoff_doubles_with_jitter_and_caps() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_millis(400));
        for cap in [100, 200, 400, 400, 400] {
            let d = b.next_delay();
            let cap = Duration::from_millis(cap);
            assert!(
                d >= cap / 2 && d <= cap,
                "{d:?} not in [{:?}, {cap:?}]",
                cap / 2
            );
        }
        b.reset();
        assert!(b.next_delay() <= Duration::from_millis(100));
    }

    #[test]
    fn config_validation() {
        assert!(
            EtcdConfig::new(["http://127.0.0.1:2379"])
                .validate()
                .is_ok()
        );
        assert!(EtcdConfig::new(Vec::<String>::new()).validate().is_err());
        let mut c = EtcdConfig::new(["http://127.0.0.1:2379"]);
        c.reconnect_backoff_max = Duration::from_millis(1);
        assert!(c.validate().is_err());
    }

    /// Goal: TLS material is refused with a plain `http://` endpoint (kube's client would
    /// silently speak plain HTTP), accepted with `https://` and scheme-less ones.
    #[test]
    fn tls_needs_https_endpoints() {
        let tls = Some(EtcdTls::default());
        let mut c = EtcdConfig::new(["https://127.0.0.1:2379", "http://127.0.0.1:2380"]);
        c.tls = tls.clone();
        let error = c.validate().unwrap_err().to_string();
        assert!(error.contains("http://127.0.0.1:2380"), "{error}");
        let mut c = EtcdConfig::new(["https://127.0.0.1:2379", "127.0.0.1:2380"]);
        c.tls = tls;
        assert!(c.validate().is_ok());
    }

    /// Goal: a failed handshake, whichever side refused, is told from an unavailable member
    /// and from a connection that could not be made.
    #[test]
    fn tls_refusals_are_not_unavailability() {
        for refused in [
            "error trying to connect: invalid peer certificate: UnknownIssuer",
            "transport error: received fatal alert: CertificateRequired",
        ] {
            assert_eq!(status_attempt(14, refused), Attempt::Refused, "{refused}");
        }
        assert_eq!(
            status_attempt(14, "tcp connect error: Connection refused (os error 111)"),
            Attempt::NotSent
        );
    }
}

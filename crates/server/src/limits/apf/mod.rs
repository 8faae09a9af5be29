//! API Priority and Fairness (`--enable-priority-and-fairness`, on by default as in
//! kube-apiserver 1.33): every request is classified by the cached FlowSchemas to a priority
//! level, whose seats it waits for in a fair queue or is refused (k8s.io/apiserver's
//! `util/flowcontrol` and `server/filters/priority-and-fairness.go`).
//!
//! ## Guarantees
//! - Classification, after authentication and before a seat or the body: the FlowSchemas of
//!   the cache whose priority level exists, lowest `matchingPrecedence` first, then by name;
//!   the first that matches ([`rules`]) decides. A FlowSchema naming a missing level is
//!   skipped (kube's dangling schemas); a request no schema matches goes to `catch-all` (the
//!   mandatory level's spec when that level is not cached either).
//! - Over a store the objects are kube-apiserver v1.33's configuration, mandatory and
//!   suggested, kept by kube's ensurer rules ([`bootstrap`]): ordinary users are classified to
//!   `global-default`, service accounts to `workload-low`, `kube-system`'s, the controller
//!   manager's and the scheduler's to `workload-high`, nodes to `system` (`node-high` for
//!   their Node and Lease), leader election to `leader-election`, the probes' URLs to
//!   `exempt`; `catch-all` only takes what no schema matches.
//! - Every classified answer carries `X-Kubernetes-PF-FlowSchema-UID` and
//!   `X-Kubernetes-PF-PriorityLevel-UID` (client-go reads them), refusals included.
//! - Seats: the server's concurrency limit is `--max-requests-inflight` +
//!   `--max-mutating-requests-inflight` (600 by default), and a level's nominal limit is
//!   `ceil(limit × nominalConcurrencyShares / Σ shares of every level)` (`exempt`'s shares
//!   count in the sum: 245 over kube's configuration, `global-default` 49 seats of the
//!   default 600). Its lower limit is the nominal less `lendablePercent` of it, its upper
//!   limit the nominal plus `borrowingLimitPercent` of it (the server's limit when unset),
//!   rounded as kube rounds them.
//! - Borrowing ([`borrowing`]): every `--apf-borrowing-period-ms` (kube's 10 s) and at each
//!   configuration change, each level's seat demand (seats held plus seats waiting,
//!   integrated over time) is smoothed and the current limits are recomputed from it as
//!   kube's `updateBorrowingLocked` does: a busy level borrows what idle ones lend, up to
//!   its upper limit. A raised limit dispatches the waiting at once; a lowered one lets
//!   those running finish.
//! - Work ([`work`]): a request takes the seats kube's work estimator gives it: a LIST one
//!   per 100 objects of the resource (the cache's count), up to 10 or the level's maximum;
//!   a write with thousands of watches interested in its object (of its resource, its
//!   namespace or its name, kube's `GetInterestedWatchCount`: [`watches`], counted from a
//!   watch's seat to its end) holds extra seats for the watch fan-out after it finished, by
//!   this server's cost of a delivery (about a hundredth of the 5 ms per 10 watchers kube
//!   charges for its own: [`work`]); anything else 1.
//! - An `Exempt` level is never limited. A `Reject` level refuses a request when its seats
//!   are taken; a `Queue` level queues it by its flow (the hash of the FlowSchema's name and
//!   the distinguisher: the user name for `ByUser`, the namespace for `ByNamespace`) with
//!   shuffle sharding, and grants seats by kube's fair queuing: the head of the queue with
//!   the smallest virtual finish time, when its seats fit ([`queues`]).
//! - A queued request waits at most a quarter of its deadline from its arrival (kube's
//!   `getRequestWaitContext`: `--request-timeout`, or its shorter `?timeout=`), at most a
//!   minute; then, and whenever it is refused, the answer is kube's 429
//!   `Too many requests, please try again later.` with the level's `Retry-After` (1 s, more
//!   while the level keeps refusing: [`retry_after`]), as a `Status` like every refusal of
//!   this server.
//! - A seat is held as the in-flight slot it replaces was (until the answer is handed to the
//!   connection; a small answer frees it when the handler returns).
//! - A watch takes 1 seat of its level while it starts (until the handler answered: the
//!   cache has registered it), as kube seats a watch's initialization (waiting at most a
//!   quarter of `--request-timeout`, kube's default wait); then the watch limits
//!   (`--max-watches*`) bound it as before. Other
//!   long-running requests (`exec`, `log`, `proxy`...) are not classified (kube skips them).
//!   The health probes `/healthz`, `/livez`, `/readyz` are, as in kube (its handler chain
//!   puts them behind the filter): the suggested `probes` FlowSchema sends them to `exempt`,
//!   and they are not counted in their user's `--max-requests-inflight-per-user` share.
//! - A FlowSchema or PriorityLevelConfiguration created, changed or deleted decides the next
//!   request: the reflector tells [`Apf`] of every change before the caches have it. A level
//!   whose spec changed keeps its seats' holders and waiting requests (re-dealt when the
//!   number of queues changed); a deleted level's holders and waiting finish in it.
//! - Memory: the waiting requests of a level are at most `queues × queueLengthLimit`, so in
//!   total at most the sum over the levels (each holding its request's head, not its body:
//!   the body is read after the seat is granted).
//! - Classification and seats come before authorization, as in kube's handler chain: a
//!   request refused 403 takes its place in its flow's queue, is counted in
//!   `apiserver_flowcontrol_dispatched_requests_total` under its FlowSchema, and its 403
//!   carries the headers; the impersonated user is the one classified. The work estimate
//!   reads the URL alone ([`rules::RequestInfo`], kube's RequestInfo) and the cache's counts,
//!   nothing authorization computes.
//! - Simplified from kube: a level
//!   whose current limit is 0 still runs one request when none runs (kube's dispatch waits
//!   for the next adjustment); the virtual clock is not rebased (kube's epoch advance;
//!   `f64` seat-seconds here keep microsecond precision for years of uptime).
//! - kube's debug dumps, `/debug/api_priority_and_fairness/dump_priority_levels`,
//!   `dump_queues` and `dump_requests` ([`dump`]), only while API Priority and Fairness is on.
//!
//! ## Bounds
//! The classifier holds each cached FlowSchema and PriorityLevelConfiguration once (the
//! store's quota bounds them); the counts for `/metrics` keep one entry per (FlowSchema,
//! level) pair seen since start, as kube's metric label sets do. For the debug dumps
//! ([`dump`]) each waiting or executing request keeps its user name, method and URI until it
//! finished (the waiting are bounded above; the executing by the seats, or for an exempt
//! level by the in-flight requests the connection limits allow).
//!
//! `/metrics` (kube's names and labels): `apiserver_flowcontrol_rejected_requests_total{flow_schema,
//! priority_level, reason}`, `_dispatched_requests_total`, `_current_inqueue_requests`,
//! `_current_inqueue_seats`, `_current_executing_requests`, `_current_executing_seats`
//! (`flow_schema`, `priority_level`), `_request_wait_duration_seconds{flow_schema,
//! priority_level, execute}` (kube's buckets), `_work_estimated_seats` (histogram) and
//! `_request_dispatch_no_accommodation_total` (`flow_schema`, `priority_level`), and per
//! `priority_level` `_nominal_limit_seats`, `_lower_limit_seats`, `_upper_limit_seats`,
//! `_current_limit_seats`, `_target_seats`, `_demand_seats_high_watermark`,
//! `_demand_seats_average`, `_demand_seats_stdev`, `_demand_seats_smoothed`, and
//! `_seat_fair_frac`. kube's `_request_concurrency_limit` (deprecated in 1.30, hidden in
//! 1.33) is not exported.

pub mod bootstrap;
pub mod borrowing;
pub mod dump;
pub mod queues;
pub mod retry_after;
pub mod rules;
pub mod watches;
pub mod work;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use axum::http::HeaderValue;
use serde::Deserialize;
use serde_json::Value;
use watchkeeper_api::ResourceDef;
use watchkeeper_core::{Change, Object, Revision};

use crate::auth::User;
use crate::source::feed::Observer;
use borrowing::{LevelDemand, SeatDemandStats};
pub use queues::{FlowCounts, LevelState, Reason, Seat, Work};
use queues::{Level, LevelConfig, Queuing};
use rules::{FlowBy, FlowSchemaSpec, RequestInfo};
pub use work::ResourceCounts;

/// The flow-control API group.
pub const GROUP: &str = "flowcontrol.apiserver.k8s.io";

/// The header naming the matched FlowSchema's uid.
pub const FLOW_SCHEMA_UID_HEADER: &str = "X-Kubernetes-PF-FlowSchema-UID";
/// The header naming the matched priority level's uid.
pub const PRIORITY_LEVEL_UID_HEADER: &str = "X-Kubernetes-PF-PriorityLevel-UID";

/// How long a request without a deadline may wait in a queue (kube's default request wait
/// limit).
const DEFAULT_WAIT_LIMIT: Duration = Duration::from_secs(15);
/// The longest wait in a queue (kube's hard limit).
const MAX_WAIT_LIMIT: Duration = Duration::from_secs(60);

/// The wait limit of a request arriving at `arrival` with `timeout` (its deadline is
/// `arrival + timeout`), or `None` for one without deadline: a quarter of its time, at most a
/// minute; 15 s without deadline (kube's `getRequestWaitContext`).
#[must_use]
pub fn wait_until(
    arrival: tokio::time::Instant,
    timeout: Option<Duration>,
) -> tokio::time::Instant {
    arrival
        + timeout
            .map_or(DEFAULT_WAIT_LIMIT, |t| t / 4)
            .min(MAX_WAIT_LIMIT)
}

/// A PriorityLevelConfiguration's spec, as far as the seats and queues read it (stored
/// objects are defaulted; the defaults here are kube's v1 ones).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct LevelSpec {
    #[serde(rename = "type")]
    kind: String,
    limited: Option<LimitedSpec>,
    exempt: Option<SharesSpec>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct SharesSpec {
    nominal_concurrency_shares: Option<u64>,
    lendable_percent: Option<u64>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct LimitedSpec {
    nominal_concurrency_shares: Option<u64>,
    lendable_percent: Option<u64>,
    borrowing_limit_percent: Option<u64>,
    limit_response: LimitResponse,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct LimitResponse {
    #[serde(rename = "type")]
    kind: String,
    queuing: Option<QueuingSpec>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct QueuingSpec {
    queues: usize,
    hand_size: usize,
    queue_length_limit: usize,
}

impl Default for QueuingSpec {
    fn default() -> QueuingSpec {
        QueuingSpec {
            queues: 64,
            hand_size: 8,
            queue_length_limit: 50,
        }
    }
}

impl LevelSpec {
    fn exempt(&self) -> bool {
        self.kind == "Exempt"
    }

    /// `nominalConcurrencyShares` (v1's default 30 for a limited level, 0 for an exempt one).
    fn shares(&self) -> u64 {
        if self.exempt() {
            self.exempt
                .as_ref()
                .and_then(|e| e.nominal_concurrency_shares)
                .unwrap_or(0)
        } else {
            self.limited
                .as_ref()
                .and_then(|l| l.nominal_concurrency_shares)
                .unwrap_or(30)
        }
    }

    /// `lendablePercent` and `borrowingLimitPercent` (an exempt level borrows without
    /// limit).
    fn percents(&self) -> (Option<u64>, Option<u64>) {
        if self.exempt() {
            (self.exempt.as_ref().and_then(|e| e.lendable_percent), None)
        } else {
            self.limited.as_ref().map_or((None, None), |l| {
                (l.lendable_percent, l.borrowing_limit_percent)
            })
        }
    }

    /// The level's limits over `server_limit` seats shared by `shares_sum` (kube's
    /// `finishQueueSetReconfigsLocked`).
    fn config(&self, server_limit: usize, shares_sum: u64) -> LevelConfig {
        let nominal = if shares_sum == 0 {
            0
        } else {
            (server_limit as u64 * self.shares()).div_ceil(shares_sum)
        };
        let nominal = usize::try_from(nominal).unwrap_or(usize::MAX);
        // Go's math.Round of nominal × percent / 100.
        let part = |percent: u64| -> usize {
            let scaled = u128::from(percent.min(u64::from(u32::MAX))) * nominal as u128;
            usize::try_from((scaled + 50) / 100).unwrap_or(usize::MAX)
        };
        let (lendable, borrowing) = self.percents();
        let lendable = lendable.map_or(0, part).min(nominal);
        let borrowing = borrowing.map_or(server_limit, part);
        let response = self.limited.as_ref().map(|l| &l.limit_response);
        let queuing = response.filter(|r| r.kind == "Queue").map(|r| {
            let q = r.queuing.clone().unwrap_or_default();
            Queuing {
                queues: q.queues.max(1),
                hand_size: q.hand_size.clamp(1, q.queues.max(1)),
                queue_length_limit: q.queue_length_limit,
            }
        });
        // kube's MaxSeatsTracker: max(1, min(ceil(15 % of nominal), nominal / handSize)).
        let max_seats = queuing.map_or(0, |q| {
            (nominal * 15)
                .div_ceil(100)
                .min(nominal / q.hand_size)
                .max(1)
        });
        LevelConfig {
            exempt: self.exempt(),
            nominal,
            lower: nominal - lendable,
            upper: nominal.saturating_add(borrowing),
            max_seats,
            queuing,
        }
    }
}

/// A name and uid of the classifier (the uid also as the header value it is sent as).
#[derive(Clone, Debug)]
struct Named {
    name: Arc<str>,
    uid: Arc<str>,
    header: HeaderValue,
}

impl Named {
    fn new(name: &str, uid: &str) -> Named {
        Named {
            name: name.into(),
            uid: uid.into(),
            header: HeaderValue::from_str(uid).unwrap_or_else(|_| HeaderValue::from_static("")),
        }
    }
}

/// One FlowSchema of the classifier, with its level and its counts.
#[derive(Debug)]
struct Schema {
    named: Named,
    precedence: i64,
    spec: FlowSchemaSpec,
    level: LevelEntry,
    counts: Arc<FlowCounts>,
}

/// A priority level of the classifier.
#[derive(Clone, Debug)]
struct LevelEntry {
    named: Named,
    level: Arc<Level>,
}

/// What classification reads: the schemas in matching order, the levels by name, and where a
/// request no schema matches goes (`catch-all`, counted under the FlowSchema `catch-all`).
#[derive(Debug)]
struct Classifier {
    schemas: Vec<Schema>,
    levels: HashMap<String, LevelEntry>,
    unmatched: (Named, LevelEntry, Arc<FlowCounts>),
}

/// The cached flow-control objects by cache key.
#[derive(Debug, Default)]
struct Objects {
    schemas: BTreeMap<Arc<str>, Arc<Object>>,
    levels: BTreeMap<Arc<str>, Arc<Object>>,
}

/// A request's classification: its FlowSchema, priority level and flow.
#[derive(Clone, Debug)]
pub struct Classification {
    schema: Named,
    level: LevelEntry,
    hash: u64,
    flow_by: FlowBy,
    counts: Arc<FlowCounts>,
    work: Work,
}

impl Classification {
    /// The FlowSchema's name.
    #[must_use]
    pub fn flow_schema(&self) -> &str {
        &self.schema.name
    }

    /// The FlowSchema's uid (empty when none matched and none is named `catch-all`).
    #[must_use]
    pub fn flow_schema_uid(&self) -> &str {
        &self.schema.uid
    }

    /// The priority level's name.
    #[must_use]
    pub fn priority_level(&self) -> &str {
        &self.level.named.name
    }

    /// The priority level's uid (empty for the built-in `catch-all`).
    #[must_use]
    pub fn priority_level_uid(&self) -> &str {
        &self.level.named.uid
    }

    /// Its estimated work ([`work`]).
    #[must_use]
    pub fn work(&self) -> Work {
        self.work
    }

    /// Adds the two `X-Kubernetes-PF-*-UID` headers to `response`.
    pub fn set_headers(&self, response: &mut axum::response::Response) {
        let headers = response.headers_mut();
        headers.insert(FLOW_SCHEMA_UID_HEADER, self.schema.header.clone());
        headers.insert(PRIORITY_LEVEL_UID_HEADER, self.level.named.header.clone());
    }

    /// Its seats in its level, waiting in its flow's queue at most until `wait_until`; the
    /// debug dumps show it as `user`'s `method` on `uri` meanwhile.
    ///
    /// # Errors
    /// Why it was refused (counted), and the `Retry-After` to answer (seconds, the level's:
    /// [`retry_after`]).
    pub async fn admit(
        &self,
        wait_until: tokio::time::Instant,
        user: &str,
        method: &axum::http::Method,
        uri: &axum::http::Uri,
    ) -> Result<Seat, (Reason, u32)> {
        let level = &self.level.level;
        let described = queues::Described {
            flow_schema: self.schema.name.clone(),
            flow_by: self.flow_by,
            user: user.to_owned(),
            method: method.clone(),
            uri: uri.clone(),
            arrival: std::time::SystemTime::now(),
        };
        level
            .admit(self.hash, self.work, &self.counts, wait_until, described)
            .await
            .map_err(|reason| {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |since| since.as_secs());
                let retry_after = level.refused(i64::try_from(now).unwrap_or(i64::MAX));
                (reason, u32::try_from(retry_after).unwrap_or(1))
            })
    }
}

/// The flow of a FlowSchema and distinguisher (kube's `hashFlowID`: the first 8 bytes,
/// little-endian, of the SHA-256 of the name, a zero byte and the distinguisher).
#[must_use]
pub fn flow_hash(flow_schema: &str, distinguisher: &str) -> u64 {
    let mut context = ring::digest::Context::new(&ring::digest::SHA256);
    context.update(flow_schema.as_bytes());
    context.update(&[0]);
    context.update(distinguisher.as_bytes());
    let digest = context.finish();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest.as_ref()[..8]);
    u64::from_le_bytes(first)
}

/// API Priority and Fairness' live state: the classifier built from the cached objects, the
/// levels' seats and queues, and the counts for `/metrics`.
pub struct Apf {
    server_limit: usize,
    objects: Mutex<Objects>,
    classifier: RwLock<Arc<Classifier>>,
    counts: Mutex<BTreeMap<Pair, Arc<FlowCounts>>>,
    /// What the server holds of a resource (by API group and plural), for the work
    /// estimate; unset, every request takes one seat.
    resources: std::sync::OnceLock<ResourceCounter>,
    /// The open watches by what they watch, for a write's fan-out estimate.
    watches: Arc<watches::WatchTracker>,
    /// Borrowing's state: each level's demand statistics and target, and the fair fraction.
    borrowing: Mutex<Borrowing>,
}

impl std::fmt::Debug for Apf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Apf")
            .field("server_limit", &self.server_limit)
            .field("classifier", &self.classifier)
            .field("borrowing", &self.borrowing)
            .finish_non_exhaustive()
    }
}

/// The objects the server holds of a resource by API group and plural (`None` when it
/// serves no such resource).
pub type ResourceCounter = Arc<dyn Fn(&str, &str) -> Option<usize> + Send + Sync>;

/// The last borrowing adjustment's statistics.
#[derive(Debug, Default)]
struct Borrowing {
    /// By level name: its demand statistics and target.
    levels: HashMap<String, (SeatDemandStats, f64)>,
    fair_frac: f64,
}

/// One level's limits, demand and seat use, for `/metrics`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LevelReport {
    /// The level's name.
    pub name: String,
    /// Its limits and seats now.
    pub state: LevelState,
    /// Its demand statistics at the last adjustment.
    pub stats: SeatDemandStats,
    /// Its target at the last adjustment.
    pub target: f64,
}

/// A (FlowSchema, priority level) pair's names.
type Pair = (Arc<str>, Arc<str>);

fn text<'a>(object: &'a Object, pointer: &str) -> &'a str {
    object
        .body()
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

impl Apf {
    /// Flow control over `server_limit` seats, with only the built-in `catch-all` level until
    /// the reflector lists the objects.
    #[must_use]
    pub fn new(server_limit: usize) -> Arc<Apf> {
        let apf = Apf {
            server_limit,
            objects: Mutex::default(),
            classifier: RwLock::new(Arc::new(Classifier {
                schemas: Vec::new(),
                levels: HashMap::new(),
                unmatched: (
                    Named::new("catch-all", ""),
                    LevelEntry {
                        named: Named::new("catch-all", ""),
                        level: Level::new(LevelConfig::fixed(0, None)),
                    },
                    Arc::default(),
                ),
            })),
            counts: Mutex::default(),
            resources: std::sync::OnceLock::new(),
            watches: Arc::default(),
            borrowing: Mutex::default(),
        };
        apf.rebuild(&Objects::default());
        Arc::new(apf)
    }

    /// Counts the watch `method` on `path` with `query` among the watches interested in
    /// writes ([`watches`]) until the returned guard is dropped; `None` for any other
    /// request.
    #[must_use]
    pub fn track_watch(
        &self,
        method: &str,
        path: &str,
        query: Option<&str>,
    ) -> Option<watches::Tracked> {
        self.watches
            .track(&RequestInfo::of(method, path, query), query)
    }

    /// Gives the work estimate what the server holds of each resource (set once; later
    /// calls are ignored).
    pub fn set_resource_counter(&self, counter: ResourceCounter) {
        let _ = self.resources.set(counter);
    }

    /// Recomputes every level's current limit from its seat demand since the last time
    /// (kube's `updateBorrowing`, every 10 s: [`borrowing`]).
    pub fn adjust(&self) {
        self.adjust_levels(&self.classifier().levels);
    }

    fn adjust_levels(&self, levels: &HashMap<String, LevelEntry>) {
        let mut borrowing = self
            .borrowing
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        borrowing.levels.retain(|name, _| levels.contains_key(name));
        let mut names: Vec<&String> = levels.keys().collect();
        names.sort();
        let mut demands = Vec::with_capacity(names.len());
        for name in &names {
            let level = &levels[*name].level;
            let (stats, _) = borrowing.levels.entry((*name).clone()).or_default();
            stats.update(level.take_demand());
            let state = level.state();
            demands.push(LevelDemand {
                exempt: level.config().exempt,
                nominal: state.nominal,
                lower: state.lower,
                upper: state.upper,
                current: state.current,
                stats: *stats,
            });
        }
        let nominal_sum = demands.iter().map(|d| d.nominal).sum();
        let limits = borrowing::current_limits(nominal_sum, &demands);
        for (index, name) in names.iter().enumerate() {
            if let Some(entry) = borrowing.levels.get_mut(*name) {
                entry.1 = limits.targets[index];
            }
            levels[*name].level.set_limit(limits.current[index]);
        }
        borrowing.fair_frac = limits.fair_frac;
    }

    /// Every level's limits, demand and seats now, by name.
    #[must_use]
    pub fn levels(&self) -> Vec<LevelReport> {
        let classifier = self.classifier();
        let borrowing = self
            .borrowing
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let mut reports: Vec<LevelReport> = classifier
            .levels
            .iter()
            .map(|(name, entry)| {
                let (stats, target) = borrowing.levels.get(name).copied().unwrap_or_default();
                LevelReport {
                    name: name.clone(),
                    state: entry.level.state(),
                    stats,
                    target,
                }
            })
            .collect();
        reports.sort_by(|a, b| a.name.cmp(&b.name));
        reports
    }

    /// Every level's debug dump ([`dump`]), by name.
    #[must_use]
    pub fn dump(&self) -> Vec<(String, queues::LevelDump)> {
        let classifier = self.classifier();
        let mut levels: Vec<(String, queues::LevelDump)> = classifier
            .levels
            .iter()
            .map(|(name, entry)| (name.clone(), entry.level.dump()))
            .collect();
        levels.sort_by(|a, b| a.0.cmp(&b.0));
        levels
    }

    /// kube's fair fraction at the last adjustment.
    #[must_use]
    pub fn fair_frac(&self) -> f64 {
        self.borrowing
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .fair_frac
    }

    /// The server's concurrency limit the levels share.
    #[must_use]
    pub fn server_limit(&self) -> usize {
        self.server_limit
    }

    /// The counts of (`schema`, `level`), created at first use.
    fn counts_of(&self, schema: &Arc<str>, level: &Arc<str>) -> Arc<FlowCounts> {
        self.counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry((schema.clone(), level.clone()))
            .or_default()
            .clone()
    }

    /// Rebuilds the classifier from `objects`, keeping the live state of the levels that
    /// remain.
    fn rebuild(&self, objects: &Objects) {
        let mut specs: BTreeMap<String, (String, LevelSpec)> = objects
            .levels
            .values()
            .map(|object| {
                let spec = object
                    .body()
                    .get("spec")
                    .and_then(|spec| serde_json::from_value(spec.clone()).ok())
                    .unwrap_or_default();
                (
                    object.name().to_owned(),
                    (text(object, "/metadata/uid").to_owned(), spec),
                )
            })
            .collect();
        if !specs.contains_key("catch-all") {
            let spec = watchkeeper_api::kinds::mandatory_priority_level_spec("catch-all")
                .and_then(|spec| serde_json::from_value(spec).ok())
                .unwrap_or_default();
            specs.insert("catch-all".to_owned(), (String::new(), spec));
        }
        let shares_sum: u64 = specs.values().map(|(_, spec)| spec.shares()).sum();
        let old = self.classifier();
        let mut levels = HashMap::new();
        for (name, (uid, spec)) in specs {
            let config = spec.config(self.server_limit, shares_sum);
            let level = match old.levels.get(&name) {
                Some(entry) => {
                    if entry.level.config() != config {
                        entry.level.reconfigure(config);
                    }
                    entry.level.clone()
                }
                None => Level::new(config),
            };
            let named = Named::new(&name, &uid);
            levels.insert(name, LevelEntry { named, level });
        }
        let mut schemas: Vec<Schema> = objects
            .schemas
            .values()
            .filter_map(|object| {
                let spec: FlowSchemaSpec =
                    serde_json::from_value(object.body().get("spec")?.clone()).ok()?;
                // A dangling schema (its level missing) classifies nothing.
                let level = levels.get(&spec.priority_level_configuration.name)?.clone();
                let named = Named::new(object.name(), text(object, "/metadata/uid"));
                Some(Schema {
                    counts: self.counts_of(&named.name, &level.named.name),
                    named,
                    precedence: spec.matching_precedence.unwrap_or(1000),
                    spec,
                    level,
                })
            })
            .collect();
        schemas.sort_by(|a, b| (a.precedence, &a.named.name).cmp(&(b.precedence, &b.named.name)));
        let catch_all = levels["catch-all"].clone();
        let schema = schemas
            .iter()
            .find(|s| &*s.named.name == "catch-all")
            .map_or_else(|| Named::new("catch-all", ""), |s| s.named.clone());
        let counts = self.counts_of(&schema.name, &catch_all.named.name);
        // kube adjusts the current limits whenever the configuration is digested.
        self.adjust_levels(&levels);
        *self
            .classifier
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Arc::new(Classifier {
            schemas,
            levels,
            unmatched: (schema, catch_all, counts),
        });
    }

    fn classifier(&self) -> Arc<Classifier> {
        self.classifier
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The classification of `user`'s request (`method` on `path` with `query`).
    #[must_use]
    pub fn classify(
        &self,
        user: &User,
        method: &str,
        path: &str,
        query: Option<&str>,
    ) -> Classification {
        let info = RequestInfo::of(method, path, query);
        let classifier = self.classifier();
        let mut class = match classifier
            .schemas
            .iter()
            .find(|schema| schema.spec.matches(user, &info))
        {
            Some(schema) => Classification {
                hash: flow_hash(&schema.named.name, schema.spec.distinguisher(user, &info)),
                flow_by: schema.spec.flow_by(),
                schema: schema.named.clone(),
                level: schema.level.clone(),
                counts: schema.counts.clone(),
                work: Work::ONE,
            },
            None => {
                let (schema, level, counts) = &classifier.unmatched;
                Classification {
                    hash: flow_hash(&schema.name, &user.name),
                    flow_by: FlowBy::User,
                    schema: schema.clone(),
                    level: level.clone(),
                    counts: counts.clone(),
                    work: Work::ONE,
                }
            }
        };
        if let Some(counter) = self.resources.get() {
            let max_seats = class.level.level.config().max_seats;
            // A write's fan-out: the watches of its resource, namespace and name (kube's
            // `GetInterestedWatchCount`).
            let mutating = matches!(&*info.verb, "create" | "update" | "patch" | "delete");
            class.work = work::estimate(&info, query, max_seats, |group, resource| {
                counter(group, resource).map(|objects| ResourceCounts {
                    objects,
                    watchers: if mutating {
                        self.watches.interested(&info)
                    } else {
                        0
                    },
                })
            });
        }
        class
    }

    /// The counts by (FlowSchema, priority level), for `/metrics`.
    #[must_use]
    pub fn counts(&self) -> Vec<((String, String), Arc<FlowCounts>)> {
        self.counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|((schema, level), counts)| {
                ((schema.to_string(), level.to_string()), counts.clone())
            })
            .collect()
    }

    /// The nominal seats of the level `name` (its nominal concurrency limit), `None` when
    /// there is no such level.
    #[must_use]
    pub fn seats(&self, name: &str) -> Option<usize> {
        self.classifier()
            .levels
            .get(name)
            .map(|entry| entry.level.config().nominal)
    }

    fn objects(&self) -> std::sync::MutexGuard<'_, Objects> {
        self.objects.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Recomputes `apf`'s current limits every `period` until `shutdown` (kube's
/// `updateBorrowing` timer).
pub async fn run_borrowing(
    apf: Arc<Apf>,
    period: Duration,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticks.tick() => apf.adjust(),
            _ = shutdown.changed() => return,
        }
    }
}

/// Requests executing, waiting and refused (summed over reasons) of `counts`.
#[must_use]
pub fn totals(counts: &FlowCounts) -> (i64, i64, u64) {
    (
        counts.executing.load(Ordering::Relaxed),
        counts.waiting.load(Ordering::Relaxed),
        counts
            .rejected
            .iter()
            .map(|r| r.load(Ordering::Relaxed))
            .sum(),
    )
}

/// `Some(true)` for `flowschemas.flowcontrol.apiserver.k8s.io/v1`, `Some(false)` for its
/// `prioritylevelconfigurations`, `None` for any other resource.
#[must_use]
pub fn kind_of(def: &ResourceDef) -> Option<bool> {
    if def.group != GROUP || def.version != "v1" {
        return None;
    }
    match def.plural.as_str() {
        "flowschemas" => Some(true),
        "prioritylevelconfigurations" => Some(false),
        _ => None,
    }
}

impl Observer for Apf {
    fn reset(&self, def: &ResourceDef, _revision: Revision, objects: &[Arc<Object>]) {
        let Some(schemas) = kind_of(def) else {
            return;
        };
        let mut all = self.objects();
        let map = if schemas {
            &mut all.schemas
        } else {
            &mut all.levels
        };
        *map = objects
            .iter()
            .map(|object| (object.key().clone(), object.clone()))
            .collect();
        self.rebuild(&all);
    }

    fn changes(&self, def: &ResourceDef, _revision: Revision, changes: &[Change]) {
        let Some(schemas) = kind_of(def) else {
            return;
        };
        let mut all = self.objects();
        let map = if schemas {
            &mut all.schemas
        } else {
            &mut all.levels
        };
        for change in changes {
            match &change.object {
                Some(object) => map.insert(change.key.clone(), object.clone()),
                None => map.remove(&change.key),
            };
        }
        self.rebuild(&all);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(kind: &str, name: &str, spec: Value) -> Arc<Object> {
        let body = json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": kind,
            "metadata": {"name": name, "uid": format!("uid-{name}")},
            "spec": spec});
        Arc::new(Object::new(
            "",
            name,
            BTreeMap::new(),
            BTreeMap::new(),
            1,
            body,
        ))
    }

    fn def(plural: &str) -> ResourceDef {
        watchkeeper_api::builtin_resources()
            .into_iter()
            .find(|d| d.group == GROUP && d.version == "v1" && d.plural == plural)
            .unwrap()
    }

    fn user(name: &str, groups: &[&str]) -> User {
        User {
            name: name.to_owned(),
            uid: String::new(),
            groups: groups.iter().map(|g| (*g).to_owned()).collect(),
            extra: Default::default(),
        }
    }

    fn mandatory(apf: &Apf) {
        let levels: Vec<_> = ["exempt", "catch-all"]
            .iter()
            .map(|n| {
                let spec = watchkeeper_api::kinds::mandatory_priority_level_spec(n).unwrap();
                object("PriorityLevelConfiguration", n, spec)
            })
            .collect();
        let schemas: Vec<_> = ["exempt", "catch-all"]
            .iter()
            .map(|n| {
                let spec = watchkeeper_api::kinds::mandatory_flow_schema_spec(n).unwrap();
                object("FlowSchema", n, spec)
            })
            .collect();
        apf.reset(&def("prioritylevelconfigurations"), 1, &levels);
        apf.reset(&def("flowschemas"), 1, &schemas);
    }

    #[test]
    fn the_flow_hash_is_kubes() {
        // Go: binary.LittleEndian.Uint64(sha256.Sum256([]byte("catch-all\x00alice"))[:8]).
        assert_eq!(flow_hash("catch-all", "alice"), 15_531_453_230_597_747_500);
        assert_ne!(flow_hash("a", "b"), flow_hash("ab", ""));
        assert_ne!(flow_hash("s", "alice"), flow_hash("s", "bob"));
    }

    #[test]
    fn classification_follows_precedence_then_name() {
        let apf = Apf::new(600);
        mandatory(&apf);
        let masters = user("root", &["system:masters", "system:authenticated"]);
        let alice = user("alice", &["system:authenticated"]);
        let class = apf.classify(&masters, "GET", "/api/v1/pods", None);
        assert_eq!(
            (class.flow_schema(), class.priority_level()),
            ("exempt", "exempt")
        );
        assert_eq!(class.flow_schema_uid(), "uid-exempt");
        let class = apf.classify(&alice, "GET", "/api/v1/pods", None);
        assert_eq!(class.priority_level(), "catch-all");
        assert_eq!(class.priority_level_uid(), "uid-catch-all");
        // Only the two mandatory levels: catch-all has every seat (exempt's shares are 0).
        assert_eq!(apf.seats("catch-all"), Some(600));
        // A schema for alice at a new level; two of equal precedence are taken by name.
        let rule = |user: &str| {
            json!([{"subjects": [{"kind": "User", "user": {"name": user}}],
            "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
            "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                "clusterScope": true, "namespaces": ["*"]}]}])
        };
        apf.changes(
            &def("prioritylevelconfigurations"),
            2,
            &[Change::put(object(
                "PriorityLevelConfiguration",
                "slow",
                json!({"type": "Limited", "limited": {"nominalConcurrencyShares": 1,
                    "limitResponse": {"type": "Reject"}}}),
            ))],
        );
        apf.changes(
            &def("flowschemas"),
            3,
            &[
                Change::put(object(
                    "FlowSchema",
                    "b-alice",
                    json!({"matchingPrecedence": 500,
                    "priorityLevelConfiguration": {"name": "slow"}, "rules": rule("alice")}),
                )),
                Change::put(object(
                    "FlowSchema",
                    "a-alice",
                    json!({"matchingPrecedence": 500,
                    "priorityLevelConfiguration": {"name": "catch-all"}, "rules": rule("alice")}),
                )),
                Change::put(object(
                    "FlowSchema",
                    "dangling",
                    json!({"matchingPrecedence": 100,
                    "priorityLevelConfiguration": {"name": "nowhere"}, "rules": rule("alice")}),
                )),
            ],
        );
        let class = apf.classify(&alice, "GET", "/api/v1/pods", None);
        assert_eq!(class.flow_schema(), "a-alice");
        // 600 × 1 / 6 and 600 × 5 / 6.
        assert_eq!(apf.seats("slow"), Some(100));
        assert_eq!(apf.seats("catch-all"), Some(500));
        apf.changes(&def("flowschemas"), 4, &[Change::delete("a-alice")]);
        let class = apf.classify(&alice, "GET", "/api/v1/pods", None);
        assert_eq!(
            (class.flow_schema(), class.priority_level()),
            ("b-alice", "slow")
        );
        // Nothing matches: catch-all.
        let class = apf.classify(&user("system:anonymous", &[]), "GET", "/version", None);
        assert_eq!(
            (class.flow_schema(), class.priority_level()),
            ("catch-all", "catch-all")
        );
    }

    #[test]
    fn kubes_configuration_gets_kubes_limits() {
        let apf = Apf::new(600);
        let configuration = bootstrap::configuration();
        for (plural, kind) in [
            (bootstrap::PRIORITY_LEVELS, "PriorityLevelConfiguration"),
            (bootstrap::FLOW_SCHEMAS, "FlowSchema"),
        ] {
            let objects: Vec<_> = configuration
                .iter()
                .filter(|wanted| wanted.plural == plural)
                .map(|wanted| object(kind, wanted.name, wanted.spec.clone()))
                .collect();
            apf.reset(&def(plural), 1, &objects);
        }
        let levels: Vec<(String, [usize; 4])> = apf
            .levels()
            .into_iter()
            .map(|l| {
                let s = l.state;
                (l.name, [s.nominal, s.lower, s.upper, s.current])
            })
            .collect();
        // Nominal ceil(600 × shares / 245); lower: less round(nominal × lendablePercent);
        // upper: plus the server's 600 (no borrowingLimitPercent). Current, without demand:
        // kube's allocation of the 602 nominal seats in proportion to the lower limits (fair
        // 602 / 258), worked with a port of kube's `computeConcurrencyAllocation`.
        let want = [
            ("catch-all", [13, 13, 613, 30]),
            ("exempt", [0, 0, 600, 0]),
            ("global-default", [49, 24, 649, 56]),
            ("leader-election", [25, 25, 625, 58]),
            ("node-high", [98, 73, 698, 170]),
            ("system", [74, 50, 674, 117]),
            ("workload-high", [98, 49, 698, 114]),
            ("workload-low", [245, 24, 845, 56]),
        ];
        let want: Vec<(String, [usize; 4])> = want
            .iter()
            .map(|(name, limits)| ((*name).to_owned(), *limits))
            .collect();
        assert_eq!(levels, want);
        assert!((apf.fair_frac() - 602.0 / 258.0).abs() < 1e-9);
        // The work estimator's most seats for global-default: min(ceil(15 % of 49),
        // 49 / handSize 6) = 8.
        let class = apf.classify(
            &user("alice", &["system:authenticated"]),
            "GET",
            "/api/v1/pods",
            None,
        );
        assert_eq!(class.priority_level(), "global-default");
        assert_eq!(class.level.level.config().max_seats, 8);
    }

    #[test]
    fn without_objects_the_built_in_catch_all_rejects_past_every_seat() {
        let apf = Apf::new(3);
        let class = apf.classify(&user("x", &[]), "GET", "/version", None);
        assert_eq!(class.priority_level(), "catch-all");
        assert_eq!(class.priority_level_uid(), "");
        assert_eq!(apf.seats("catch-all"), Some(3));
    }

    #[test]
    fn wait_limits_are_kubes() {
        let now = tokio::time::Instant::now();
        assert_eq!(
            wait_until(now, Some(Duration::from_secs(60))),
            now + Duration::from_secs(15)
        );
        assert_eq!(
            wait_until(now, Some(Duration::from_secs(8))),
            now + Duration::from_secs(2)
        );
        assert_eq!(
            wait_until(now, Some(Duration::from_secs(600))),
            now + Duration::from_secs(60)
        );
        assert_eq!(wait_until(now, None), now + Duration::from_secs(15));
    }
}

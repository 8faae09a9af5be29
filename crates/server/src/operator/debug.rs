//! The operator view: a stable JSON API (`/debug/watchers`, `/debug/timeline`) and a live page
//! (`/ui/`) built on it. Fields, units and the stability promise are in docs/DEBUG-API.md.
//!
//! ## What it shows
//! - `/debug/watchers`: per resource, watchers by state, event rates in and delivered, the
//!   history window, the reflector's lag, totals (stalls, resyncs, terminations by reason,
//!   legacy force-closes) and every watch stream; then the watchers furthest behind across
//!   resources, with who they are (client address, user agent, user), what they select, how
//!   far behind the newest event they are (in events and seconds), their queue fill, how long
//!   they have been unsynced and how many catch-up passes they waited.
//! - `/debug/timeline`: a ring of once-a-second samples over the last ten minutes
//!   ([`TIMELINE_CAPACITY`]): populations by state, rates, catch-up pass duration and period,
//!   pushes per pass, serializations per event, terminations by reason.
//! - `/ui/`: one static page (HTML, CSS and JS compiled into the binary, nothing fetched from
//!   elsewhere) that polls the two endpoints once a second.
//!
//! ## Guarantees
//! - Read-only: nothing here changes what any watcher receives. The core publishes what it
//!   reports with relaxed stores ([`watchkeeper_core::WatcherProgress`]); the numbers are
//!   reports, sampled without a global lock, so fields of one answer can disagree by the
//!   events of a few milliseconds.
//! - Every path goes through the server's authentication and authorization like any other
//!   (`nonResourcePath` `/debug/watchers`, `/debug/timeline`, `/ui/`).
//! - Times are seconds (floats) measured on the server's monotonic clock, except the
//!   timeline's `time`, which is Unix milliseconds of the wall clock.
//!
//! ## Overload
//! - The sampler is one tokio task that wakes once a second, reads counters and walks the
//!   watch registry once (O(watchers) relaxed loads); the ring is bounded to
//!   [`TIMELINE_CAPACITY`] samples, so memory stays constant.
//! - A `/debug/watchers` request walks the registry under its lock (watch registration waits
//!   meanwhile) and takes each cache's history read lock once; its answer lists every watch
//!   unless `watchers=none` is asked for, so on a server with very many watchers scripts should
//!   ask for `watchers=none` and a bounded `furthestBehind`, as the page does.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use serde_json::{Value, json};
use watchkeeper_api::ApiError;
use watchkeeper_core::{TerminationReason, WatcherState};

use crate::cache::Resource;
use crate::operator::Observed;
use crate::respond::error_response;

/// The `apiVersion` of every answer; a field is only ever added under it, never renamed,
/// removed or given another unit (see docs/DEBUG-API.md).
pub const API_VERSION: &str = "watchkeeper.debug/v1";

/// Samples kept by the timeline: ten minutes at one a second.
pub const TIMELINE_CAPACITY: usize = 600;

/// How often the sampler samples.
pub const SAMPLE_INTERVAL: Duration = Duration::from_secs(1);

/// Watchers listed in `furthestBehind` unless the query asks for another number.
pub const FURTHEST_BEHIND_DEFAULT: usize = 20;

/// The most `furthestBehind` may ask for.
pub const FURTHEST_BEHIND_MAX: usize = 10_000;

const PAGE_HTML: &str = include_str!("ui/index.html");
const PAGE_CSS: &str = include_str!("ui/style.css");
const PAGE_JS: &str = include_str!("ui/app.js");

fn resource_name(resource: &Resource) -> String {
    resource.name()
}

/// One once-a-second sample (see docs/DEBUG-API.md for the fields).
#[derive(Clone, Debug, Default)]
struct Sample {
    time_ms: u64,
    interval_seconds: f64,
    synced: u64,
    unsynced: u64,
    initial: u64,
    pending: u64,
    events_in: f64,
    events_delivered: f64,
    stalls: u64,
    resyncs: u64,
    passes: u64,
    pass_duration_micros: Option<f64>,
    pass_period_millis: Option<f64>,
    pushes_per_pass: Option<f64>,
    serializations_per_event: Option<f64>,
    terminations: [u64; TerminationReason::ALL.len()],
}

impl Sample {
    fn to_json(&self) -> Value {
        let terminations: serde_json::Map<String, Value> = TerminationReason::ALL
            .iter()
            .map(|reason| {
                (
                    reason.as_str().to_owned(),
                    json!(self.terminations[reason_index(*reason)]),
                )
            })
            .collect();
        json!({
            "time": self.time_ms,
            "intervalSeconds": self.interval_seconds,
            "watchers": {
                "synced": self.synced,
                "unsynced": self.unsynced,
                "initial": self.initial,
                "pending": self.pending,
            },
            "eventsInPerSecond": self.events_in,
            "eventsDeliveredPerSecond": self.events_delivered,
            "stalls": self.stalls,
            "resyncs": self.resyncs,
            "passes": self.passes,
            "passDurationMicros": self.pass_duration_micros,
            "passPeriodMillis": self.pass_period_millis,
            "pushesPerPass": self.pushes_per_pass,
            "serializationsPerEvent": self.serializations_per_event,
            "terminations": terminations,
            "forceCloses": self.terminations[reason_index(TerminationReason::Unresponsive)],
        })
    }
}

fn reason_index(reason: TerminationReason) -> usize {
    TerminationReason::ALL
        .iter()
        .position(|r| *r == reason)
        .unwrap_or(0)
}

/// Counter readings the sampler keeps between samples.
#[derive(Clone, Copy, Debug, Default)]
struct Totals {
    events_in: u64,
    events_delivered: u64,
    stalls: u64,
    resyncs: u64,
    passes: u64,
    /// Passes whose duration the driver reported, and their total duration.
    passes_timed: u64,
    pass_micros: u64,
    pass_pushes: u64,
    serializations: u64,
    terminations: [u64; TerminationReason::ALL.len()],
}

/// The operator view's state, kept by the HTTP layer's state.
#[derive(Debug, Default)]
pub struct DebugState {
    /// Watch events written to clients, per resource name.
    delivered: Mutex<BTreeMap<String, Arc<AtomicU64>>>,
    /// The last sample's event rates (in, delivered) per resource name.
    rates: Mutex<BTreeMap<String, (f64, f64)>>,
    /// The ring of samples, oldest first.
    timeline: Mutex<VecDeque<Sample>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl DebugState {
    /// The counter of events delivered to clients of `resource` (shared by its streams).
    #[must_use]
    pub fn delivered_counter(&self, resource: &str) -> Arc<AtomicU64> {
        lock(&self.delivered)
            .entry(resource.to_owned())
            .or_default()
            .clone()
    }

    fn delivered(&self, resource: &str) -> u64 {
        lock(&self.delivered)
            .get(resource)
            .map_or(0, |c| c.load(Ordering::Relaxed))
    }
}

/// Answers `/debug/...` and `/ui/...`.
#[must_use]
pub fn serve(app: &Observed<'_>, segments: &[&str], query: Option<&str>) -> Response {
    let result = match segments {
        ["debug", "watchers"] => watchers_query(query).map(|q| json_ok(&watchers(app, &q))),
        ["debug", "timeline"] => timeline_query(query).map(|since| json_ok(&timeline(app, since))),
        ["ui"] | ["ui", "index.html"] => Ok(page()),
        _ => Err(ApiError::path_not_found()),
    };
    result.unwrap_or_else(|error| error_response(&error))
}

fn json_ok(value: &Value) -> Response {
    let mut response = Response::new(Body::from(value.to_string()));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, private"),
    );
    response
}

/// The page, with its style and script inlined (one request, nothing else to fetch). The
/// content security policy forbids loading anything from anywhere else.
fn page() -> Response {
    static PAGE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let html = PAGE.get_or_init(|| {
        PAGE_HTML
            .replace("/*STYLE*/", PAGE_CSS)
            .replace("/*SCRIPT*/", PAGE_JS)
    });
    let mut response = Response::new(Body::from(html.clone()));
    *response.status_mut() = StatusCode::OK;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'",
        ),
    );
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, private"),
    );
    response
}

/// The query of `/debug/watchers`.
#[derive(Debug, PartialEq, Eq)]
struct WatchersQuery {
    /// List every watch stream per resource.
    all: bool,
    /// How many of the furthest-behind watchers to list.
    furthest_behind: usize,
}

fn parse_query(query: Option<&str>) -> Result<Vec<(String, String)>, ApiError> {
    serde_urlencoded::from_str(query.unwrap_or_default())
        .map_err(|e| ApiError::bad_request(format!("the query string is malformed: {e}")))
}

fn watchers_query(query: Option<&str>) -> Result<WatchersQuery, ApiError> {
    let mut parsed = WatchersQuery {
        all: true,
        furthest_behind: FURTHEST_BEHIND_DEFAULT,
    };
    for (key, value) in parse_query(query)? {
        match key.as_str() {
            "watchers" => {
                parsed.all = match value.as_str() {
                    "all" => true,
                    "none" => false,
                    _ => {
                        return Err(ApiError::bad_request(format!(
                            "watchers must be \"all\" or \"none\", not {value:?}"
                        )));
                    }
                }
            }
            "furthestBehind" => {
                parsed.furthest_behind = value
                    .parse::<usize>()
                    .ok()
                    .filter(|n| *n <= FURTHEST_BEHIND_MAX)
                    .ok_or_else(|| {
                        ApiError::bad_request(format!(
                            "furthestBehind must be a whole number from 0 to {FURTHEST_BEHIND_MAX}, not {value:?}"
                        ))
                    })?;
            }
            _ => {
                return Err(ApiError::bad_request(format!(
                    "unknown parameter {key:?} (expected watchers or furthestBehind)"
                )));
            }
        }
    }
    Ok(parsed)
}

fn timeline_query(query: Option<&str>) -> Result<Option<u64>, ApiError> {
    let mut since = None;
    for (key, value) in parse_query(query)? {
        match key.as_str() {
            "since" => {
                since = Some(value.parse::<u64>().map_err(|_| {
                    ApiError::bad_request(format!(
                        "since must be a time in Unix milliseconds, not {value:?}"
                    ))
                })?);
            }
            _ => {
                return Err(ApiError::bad_request(format!(
                    "unknown parameter {key:?} (expected since)"
                )));
            }
        }
    }
    Ok(since)
}

fn state_name(state: WatcherState) -> &'static str {
    match state {
        WatcherState::Pending => "pending",
        WatcherState::Synced => "synced",
        WatcherState::Unsynced => "unsynced",
        WatcherState::Initial => "initial",
        WatcherState::Ended => "ended",
    }
}

fn seconds(duration: Duration) -> f64 {
    // Milliseconds are precise enough for operators and keep the JSON short.
    (duration.as_secs_f64() * 1000.0).round() / 1000.0
}

/// One watch stream as `/debug/watchers` reports it, before it is turned into JSON.
struct Row {
    id: u64,
    resource: usize,
    state: WatcherState,
    /// The position the lag is measured from, when it has one.
    position: Option<u64>,
    last_queued: u64,
    queue_length: usize,
    queue_capacity: usize,
    unsynced: Option<Duration>,
    passes_waited: u64,
    lag_events: Option<usize>,
    lag: Option<Duration>,
}

impl Row {
    /// Furthest behind first: most events behind, then longest unsynced, then oldest stream.
    fn behind_key(&self) -> (usize, Duration, std::cmp::Reverse<u64>) {
        (
            self.lag_events.unwrap_or(0),
            self.unsynced.unwrap_or_default(),
            std::cmp::Reverse(self.id),
        )
    }
}

fn watchers(app: &Observed<'_>, query: &WatchersQuery) -> Value {
    let now = app.clock.now();
    let names: Vec<String> = app.resources.iter().map(|r| resource_name(r)).collect();
    let index: BTreeMap<&str, usize> = names
        .iter()
        .enumerate()
        .map(|(i, n)| (n.as_str(), i))
        .collect();
    let dispatched: Vec<u64> = app
        .resources
        .iter()
        .map(|r| r.cache().dispatched())
        .collect();
    let registry = app.watches.lock();
    let mut rows: Vec<Row> = Vec::with_capacity(registry.len());
    let mut infos = Vec::with_capacity(registry.len());
    for (id, info) in registry.iter() {
        let Some(&resource) = index.get(info.resource.as_str()) else {
            continue;
        };
        let queue = &info.queue;
        let state = queue.state();
        let progress = queue.progress();
        let last_queued = queue.last_pushed();
        let position = match state {
            WatcherState::Synced => Some(dispatched[resource].max(last_queued)),
            WatcherState::Unsynced => Some(progress.position.max(last_queued)),
            WatcherState::Pending | WatcherState::Initial | WatcherState::Ended => None,
        };
        let unsynced = match state {
            WatcherState::Unsynced | WatcherState::Initial => progress
                .unsynced_since
                .map(|since| now.saturating_duration_since(since)),
            _ => None,
        };
        rows.push(Row {
            id: *id,
            resource,
            state,
            position,
            last_queued,
            queue_length: queue.len(),
            queue_capacity: queue.capacity(),
            unsynced,
            passes_waited: if unsynced.is_some() {
                progress.passes_waited
            } else {
                0
            },
            lag_events: None,
            lag: None,
        });
        infos.push(info);
    }
    // One history read per resource for every position in it.
    for (resource_index, resource) in app.resources.iter().enumerate() {
        let members: Vec<usize> = (0..rows.len())
            .filter(|&i| rows[i].resource == resource_index && rows[i].position.is_some())
            .collect();
        if members.is_empty() {
            continue;
        }
        let positions: Vec<u64> = members
            .iter()
            .map(|&i| rows[i].position.unwrap_or_default())
            .collect();
        let lags = resource.cache().history_lag(&positions);
        for (&i, lag) in members.iter().zip(lags) {
            rows[i].lag_events = Some(lag.events);
            rows[i].lag = Some(
                lag.oldest_owed
                    .map_or(Duration::ZERO, |t| now.saturating_duration_since(t)),
            );
        }
    }
    let row_json = |i: usize| -> Value {
        let row = &rows[i];
        let info = infos[i];
        json!({
            "id": row.id,
            "resource": names[row.resource],
            "namespace": info.namespace,
            "labelSelector": info.label_selector,
            "fieldSelector": info.field_selector,
            "client": info.client.map(|c| c.to_string()),
            "userAgent": info.user_agent,
            "user": info.user,
            "state": state_name(row.state),
            "position": row.position.unwrap_or(row.last_queued),
            "lastQueued": row.last_queued,
            "behindEvents": row.lag_events,
            "behindSeconds": row.lag.map(seconds),
            "queueLength": row.queue_length,
            "queueCapacity": row.queue_capacity,
            "queueFill": if row.queue_capacity == 0 { 0.0 } else { row.queue_length as f64 / row.queue_capacity as f64 },
            "unsyncedSeconds": row.unsynced.map(seconds),
            "passesWaited": row.passes_waited,
            "ageSeconds": seconds(now.saturating_duration_since(info.started)),
        })
    };
    let mut by_state = vec![[0u64; 4]; names.len()];
    for row in &rows {
        let slot = match row.state {
            WatcherState::Synced => 0,
            WatcherState::Unsynced => 1,
            WatcherState::Initial => 2,
            WatcherState::Pending => 3,
            WatcherState::Ended => continue,
        };
        by_state[row.resource][slot] += 1;
    }
    let mut order: Vec<usize> = (0..rows.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(rows[i].behind_key()));
    let furthest: Vec<Value> = order
        .iter()
        .take(query.furthest_behind)
        .map(|&i| row_json(i))
        .collect();
    let mut listed: Vec<Vec<Value>> = vec![Vec::new(); names.len()];
    if query.all {
        for i in 0..rows.len() {
            listed[rows[i].resource].push(row_json(i));
        }
    }
    drop(registry);
    let store_revision = app.reflector.store_revision.load(Ordering::Relaxed);
    let rates = lock(&app.debug.rates).clone();
    let resources: Vec<Value> = app
        .resources
        .iter()
        .zip(listed)
        .enumerate()
        .map(|(i, (r, watchers))| {
            let name = &names[i];
            let cache = r.cache();
            let metrics = cache.metrics();
            let history = cache.history_info();
            let (rate_in, rate_delivered) = rates.get(name).copied().unwrap_or_default();
            let terminations: serde_json::Map<String, Value> = TerminationReason::ALL
                .iter()
                .map(|reason| (reason.as_str().to_owned(), json!(metrics.terminations(*reason))))
                .collect();
            let mut value = json!({
                "resource": name,
                "group": r.def.group,
                "version": r.def.version,
                "plural": r.def.plural,
                "revision": history.revision,
                "dispatched": dispatched[i],
                "reflectorLagRevisions": store_revision.saturating_sub(dispatched[i]),
                "history": {
                    "oldest": history.oldest,
                    "newest": history.newest,
                    "length": history.len,
                    "capacity": history.capacity,
                    "spanSeconds": history.oldest_time.map(|t| seconds(now.saturating_duration_since(t))),
                },
                "watchersByState": {
                    "synced": by_state[i][0],
                    "unsynced": by_state[i][1],
                    "initial": by_state[i][2],
                    "pending": by_state[i][3],
                },
                "stalledWatchers": metrics.stalled_watchers.get(),
                "syncedWatchers": metrics.synced_watchers.get(),
                "eventsInPerSecond": rate_in,
                "eventsDeliveredPerSecond": rate_delivered,
                "totals": {
                    "eventsDispatched": metrics.events_dispatched.get(),
                    "eventsDelivered": app.debug.delivered(name),
                    "stalls": metrics.watcher_stalls.get(),
                    "resyncs": metrics.watcher_catchup_rounds.get(),
                    "passes": metrics.passes.get(),
                    "serializations": metrics.encode.serializations(),
                    "terminations": terminations,
                },
                "forceCloses": metrics.terminations(TerminationReason::Unresponsive),
            });
            if query.all {
                value["watchers"] = Value::Array(watchers);
            }
            value
        })
        .collect();
    json!({
        "apiVersion": API_VERSION,
        "kind": "Watchers",
        "mode": app.mode,
        "storeRevision": store_revision,
        "sampleIntervalSeconds": SAMPLE_INTERVAL.as_secs_f64(),
        "resources": resources,
        "furthestBehind": furthest,
    })
}

fn timeline(app: &Observed<'_>, since: Option<u64>) -> Value {
    let samples: Vec<Value> = lock(&app.debug.timeline)
        .iter()
        .filter(|s| since.is_none_or(|since| s.time_ms > since))
        .map(Sample::to_json)
        .collect();
    json!({
        "apiVersion": API_VERSION,
        "kind": "Timeline",
        "mode": app.mode,
        "intervalSeconds": SAMPLE_INTERVAL.as_secs_f64(),
        "capacity": TIMELINE_CAPACITY,
        "samples": samples,
    })
}

fn unix_millis() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn read_totals(app: &Observed<'_>, names: &[String], per_resource: &mut Vec<(u64, u64)>) -> Totals {
    let mut totals = Totals::default();
    per_resource.clear();
    for (resource, name) in app.resources.iter().zip(names) {
        let cache = resource.cache();
        let metrics = cache.metrics();
        let events_in = metrics.events_dispatched.get();
        let delivered = app.debug.delivered(name);
        per_resource.push((events_in, delivered));
        totals.events_in += events_in;
        totals.events_delivered += delivered;
        totals.stalls += metrics.watcher_stalls.get();
        totals.resyncs += metrics.watcher_catchup_rounds.get();
        let (_, micros, timed) = metrics.pass_duration_micros.snapshot();
        totals.pass_micros += micros;
        totals.passes_timed += timed;
        totals.passes += metrics.passes.get();
        totals.pass_pushes += metrics.pass_pushes.get();
        totals.serializations += metrics.encode.serializations();
        for reason in TerminationReason::ALL {
            totals.terminations[reason_index(reason)] += metrics.terminations(reason);
        }
    }
    totals
}

fn ratio(numerator: u64, denominator: u64) -> Option<f64> {
    (denominator > 0).then(|| numerator as f64 / denominator as f64)
}

/// The rates and per-pass figures between two readings `elapsed` apart (the populations are
/// counted separately, see [`count_states`]).
fn diff(before: &Totals, after: &Totals, elapsed: Duration) -> Sample {
    let secs = elapsed.as_secs_f64().max(1e-3);
    let delta = |a: u64, b: u64| b.saturating_sub(a);
    let passes = delta(before.passes, after.passes);
    let mut terminations = [0; TerminationReason::ALL.len()];
    for (i, slot) in terminations.iter_mut().enumerate() {
        *slot = delta(before.terminations[i], after.terminations[i]);
    }
    Sample {
        time_ms: unix_millis(),
        interval_seconds: seconds(elapsed),
        events_in: delta(before.events_in, after.events_in) as f64 / secs,
        events_delivered: delta(before.events_delivered, after.events_delivered) as f64 / secs,
        stalls: delta(before.stalls, after.stalls),
        resyncs: delta(before.resyncs, after.resyncs),
        passes,
        pass_duration_micros: ratio(
            delta(before.pass_micros, after.pass_micros),
            delta(before.passes_timed, after.passes_timed),
        ),
        pass_period_millis: (passes > 0).then(|| secs * 1000.0 / passes as f64),
        pushes_per_pass: ratio(delta(before.pass_pushes, after.pass_pushes), passes),
        serializations_per_event: ratio(
            delta(before.serializations, after.serializations),
            delta(before.events_in, after.events_in),
        ),
        terminations,
        ..Sample::default()
    }
}

/// Counts the registered watch streams by state into `sample`.
fn count_states(app: &Observed<'_>, sample: &mut Sample) {
    for info in app.watches.lock().values() {
        match info.queue.state() {
            WatcherState::Synced => sample.synced += 1,
            WatcherState::Unsynced => sample.unsynced += 1,
            WatcherState::Initial => sample.initial += 1,
            WatcherState::Pending => sample.pending += 1,
            WatcherState::Ended => {}
        }
    }
}

/// One reading of the counters: when, the totals, and (events in, delivered) per resource.
type Reading = (std::time::Instant, Totals, Vec<(u64, u64)>);

/// The sampler: once a second until shutdown (or until the server is gone), appends a sample
/// to the timeline and updates the per-resource rates.
pub async fn run_sampler<T: Send + Sync + 'static>(
    state: Weak<T>,
    observe: for<'a> fn(&'a T) -> Observed<'a>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let mut ticker = tokio::time::interval(SAMPLE_INTERVAL);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut previous: Option<Reading> = None;
    // The served resources' names, built again only when the served set is another one. The
    // set is held weakly: the sampler keeps no resource alive between its ticks (and the
    // weak pointer keeps the address from being reused by another set).
    let mut named: Option<(Weak<crate::cache::Served>, Vec<String>)> = None;
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = shutdown.wait_for(|stopped| *stopped) => return,
        }
        let Some(state) = state.upgrade() else {
            return;
        };
        let app = &observe(&state);
        if !named
            .as_ref()
            .is_some_and(|(served, _)| std::ptr::eq(served.as_ptr(), Arc::as_ptr(&app.resources)))
        {
            let names = app.resources.iter().map(|r| resource_name(r)).collect();
            named = Some((Arc::downgrade(&app.resources), names));
        }
        let names = named
            .as_ref()
            .map_or(&[][..], |(_, names)| names.as_slice());
        let mut per_resource = Vec::new();
        let totals = read_totals(app, names, &mut per_resource);
        let taken = std::time::Instant::now();
        if let Some((at, before, before_per_resource)) = &previous {
            let elapsed = taken.saturating_duration_since(*at);
            let secs = elapsed.as_secs_f64().max(1e-3);
            let mut sample = diff(before, &totals, elapsed);
            count_states(app, &mut sample);
            {
                let mut rates = lock(&app.debug.rates);
                // The served set may have changed since (CRDs): rates wait for a stable one.
                let stable = before_per_resource.len() == per_resource.len();
                for (i, name) in names.iter().enumerate() {
                    let (Some(&(in_before, out_before)), Some(&(in_after, out_after)), true) =
                        (before_per_resource.get(i), per_resource.get(i), stable)
                    else {
                        continue;
                    };
                    let rate = (
                        in_after.saturating_sub(in_before) as f64 / secs,
                        out_after.saturating_sub(out_before) as f64 / secs,
                    );
                    match rates.get_mut(name) {
                        Some(slot) => *slot = rate,
                        None => {
                            rates.insert(name.clone(), rate);
                        }
                    }
                }
            }
            let mut ring = lock(&app.debug.timeline);
            if ring.len() == TIMELINE_CAPACITY {
                ring.pop_front();
            }
            ring.push_back(sample);
        }
        previous = Some((taken, totals, per_resource));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_are_validated_with_messages() {
        assert_eq!(
            watchers_query(None).unwrap(),
            WatchersQuery {
                all: true,
                furthest_behind: FURTHEST_BEHIND_DEFAULT
            }
        );
        assert_eq!(
            watchers_query(Some("watchers=none&furthestBehind=5")).unwrap(),
            WatchersQuery {
                all: false,
                furthest_behind: 5
            }
        );
        let error = watchers_query(Some("watchers=some")).unwrap_err();
        assert_eq!(error.code, 400);
        assert!(
            error.message.contains("\"all\" or \"none\""),
            "{}",
            error.message
        );
        assert_eq!(
            watchers_query(Some("furthestBehind=-1")).unwrap_err().code,
            400
        );
        assert_eq!(
            watchers_query(Some("furthestBehind=10001"))
                .unwrap_err()
                .code,
            400
        );
        assert_eq!(watchers_query(Some("limit=3")).unwrap_err().code, 400);
        assert_eq!(timeline_query(Some("since=12")).unwrap(), Some(12));
        assert_eq!(
            timeline_query(Some("since=yesterday")).unwrap_err().code,
            400
        );
    }

    #[test]
    fn a_sample_is_the_difference_of_two_readings() {
        let before = Totals {
            events_in: 100,
            events_delivered: 50,
            stalls: 1,
            passes: 10,
            passes_timed: 9,
            pass_micros: 1_000,
            pass_pushes: 100,
            serializations: 100,
            ..Totals::default()
        };
        let mut after = Totals {
            events_in: 300,
            events_delivered: 450,
            stalls: 4,
            passes: 14,
            passes_timed: 13,
            pass_micros: 3_000,
            pass_pushes: 500,
            serializations: 300,
            ..Totals::default()
        };
        after.terminations[reason_index(TerminationReason::Unresponsive)] = 2;
        let sample = diff(&before, &after, Duration::from_secs(2));
        assert_eq!(sample.events_in, 100.0, "200 events in 2 s");
        assert_eq!(sample.events_delivered, 200.0);
        assert_eq!(sample.stalls, 3);
        assert_eq!(sample.passes, 4);
        assert_eq!(sample.pass_duration_micros, Some(500.0));
        assert_eq!(sample.pass_period_millis, Some(500.0));
        assert_eq!(sample.pushes_per_pass, Some(100.0));
        assert_eq!(sample.serializations_per_event, Some(1.0));
        let json = sample.to_json();
        assert_eq!(json["forceCloses"], 2);
        assert_eq!(json["terminations"]["unresponsive"], 2);
        assert_eq!(json["terminations"]["deadline"], 0);
        // No pass, no event: no per-pass or per-event figure, rather than a made-up zero.
        let idle = diff(&after, &after, Duration::from_secs(1)).to_json();
        assert_eq!(idle["passDurationMicros"], Value::Null);
        assert_eq!(idle["passPeriodMillis"], Value::Null);
        assert_eq!(idle["serializationsPerEvent"], Value::Null);
        assert_eq!(idle["eventsInPerSecond"], 0.0);
    }
}

//! The CPU cost model: what each operation of the core costs on a virtual core.
//!
//! The dispatcher and the catch-up worker are each a virtual core. Every call into them is
//! charged from the counts the core reports ([`watchkeeper_core::DispatchReport`],
//! [`watchkeeper_core::PassReport`]) times the per-operation costs here, and the core stays busy
//! for that long: the next thing it would do waits. Serialization is charged to the client
//! side (the connection's writer), and only reported.
//!
//! [`calibrate`] measures the table on this machine with wall-clock timing of the real core
//! (the only place in the crate that reads a clock); `costs.toml` beside the crate is the
//! shipped default.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant as WallInstant;

use serde::{Deserialize, Serialize};
use serde_json::json;
use watchkeeper_core::{
    CacheConfig, Change, DispatchReport, Encoding, Instant, LabelSelector, Object, PassReport, Pop,
    WatchCache, WatchRequest, WatchStart,
};

use crate::SimError;

/// Per-operation costs in nanoseconds.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct CostTable {
    /// Dispatcher: fixed cost of one revision (locks, snapshot).
    pub dispatch_revision_ns: f64,
    /// Dispatcher: per event applied and appended to the history.
    pub dispatch_event_ns: f64,
    /// Dispatcher: per watcher visited and evaluated against its selection.
    pub dispatch_evaluation_ns: f64,
    /// Dispatcher: per item pushed to a synced watcher.
    pub dispatch_push_ns: f64,
    /// Dispatcher: per watcher that stalled (hand-off to the worker).
    pub dispatch_stall_ns: f64,
    /// Dispatcher: per mailbox message (registration, resync, cancel).
    pub dispatch_message_ns: f64,
    /// Dispatcher: per timer handling (bookmarks, deadlines, legacy budget).
    pub dispatch_timeout_ns: f64,
    /// Worker: fixed cost of one pass.
    pub pass_ns: f64,
    /// Worker: per unsynced watcher a pass examines (ready ones, and those its expiry,
    /// deadline and timeout indexes find), for its checks and candidate ordering.
    pub pass_unsynced_ns: f64,
    /// Worker: per history interval opened (read lock, buffer).
    pub pass_interval_open_ns: f64,
    /// Worker: per history event scanned.
    pub pass_event_scanned_ns: f64,
    /// Worker: per (member, scanned event) selection evaluation, estimated per pass as
    /// `members * events_scanned / cohorts`.
    pub pass_evaluation_ns: f64,
    /// Worker: per snapshot object scanned (initial states).
    pub pass_object_scanned_ns: f64,
    /// Worker: per member served.
    pub pass_member_ns: f64,
    /// Worker: per item pushed (main and retry rounds).
    pub pass_push_ns: f64,
    /// Client side: fixed cost of one serialization.
    pub serialization_ns: f64,
    /// Client side: per byte serialized.
    pub serialization_byte_ns: f64,
}

impl Default for CostTable {
    fn default() -> Self {
        CostTable {
            dispatch_revision_ns: 2_000.0,
            dispatch_event_ns: 1_000.0,
            dispatch_evaluation_ns: 40.0,
            dispatch_push_ns: 60.0,
            dispatch_stall_ns: 300.0,
            dispatch_message_ns: 500.0,
            dispatch_timeout_ns: 200.0,
            pass_ns: 2_000.0,
            pass_unsynced_ns: 30.0,
            pass_interval_open_ns: 1_000.0,
            pass_event_scanned_ns: 20.0,
            pass_evaluation_ns: 15.0,
            pass_object_scanned_ns: 30.0,
            pass_member_ns: 200.0,
            pass_push_ns: 60.0,
            serialization_ns: 500.0,
            serialization_byte_ns: 2.0,
        }
    }
}

/// The cost table shipped with the crate (`costs.toml`, measured by `calibrate`).
pub const DEFAULT_COSTS_TOML: &str = include_str!("../costs.toml");

impl CostTable {
    /// The shipped table.
    ///
    /// # Panics
    /// If the shipped file is malformed (a build defect, caught by the tests).
    #[must_use]
    pub fn shipped() -> CostTable {
        toml::from_str(DEFAULT_COSTS_TOML).expect("costs.toml parses")
    }

    /// Reads a table from a TOML file.
    ///
    /// # Errors
    /// The file cannot be read or parsed.
    pub fn load(path: &std::path::Path) -> Result<CostTable, SimError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| SimError::Io(format!("{}: {e}", path.display())))?;
        toml::from_str(&text).map_err(|e| SimError::Scenario(format!("{}: {e}", path.display())))
    }

    /// Cost of one `handle_revision`, in ns.
    #[must_use]
    pub fn dispatch(&self, r: &DispatchReport) -> f64 {
        self.dispatch_revision_ns
            + self.dispatch_event_ns * r.events as f64
            + self.dispatch_evaluation_ns * r.evaluated as f64
            + self.dispatch_push_ns * r.pushed as f64
            + self.dispatch_stall_ns * (r.stalled + r.blocked) as f64
    }

    /// Cost of one pass, in ns.
    #[must_use]
    pub fn pass(&self, r: &PassReport) -> f64 {
        self.pass_ns
            + self.pass_unsynced_ns * r.examined as f64
            + self.pass_interval_open_ns * r.cohorts as f64
            + self.pass_event_scanned_ns * r.events_scanned as f64
            + self.pass_evaluation_ns
                * (r.members as f64 * r.events_scanned as f64 / r.cohorts.max(1) as f64)
            + self.pass_object_scanned_ns * r.objects_scanned as f64
            + self.pass_member_ns * r.members as f64
            + self.pass_push_ns * (r.pushes + r.retry_pushes) as f64
    }

    /// Cost of one serialization of `bytes` bytes, in ns.
    #[must_use]
    pub fn serialization(&self, bytes: usize) -> f64 {
        self.serialization_ns + self.serialization_byte_ns * bytes as f64
    }

    /// The table as TOML, with a header comment.
    #[must_use]
    pub fn to_toml(&self, header: &str) -> String {
        let mut rounded = self.clone();
        for field in [
            &mut rounded.dispatch_revision_ns,
            &mut rounded.dispatch_event_ns,
            &mut rounded.dispatch_evaluation_ns,
            &mut rounded.dispatch_push_ns,
            &mut rounded.dispatch_stall_ns,
            &mut rounded.dispatch_message_ns,
            &mut rounded.dispatch_timeout_ns,
            &mut rounded.pass_ns,
            &mut rounded.pass_unsynced_ns,
            &mut rounded.pass_interval_open_ns,
            &mut rounded.pass_event_scanned_ns,
            &mut rounded.pass_evaluation_ns,
            &mut rounded.pass_object_scanned_ns,
            &mut rounded.pass_member_ns,
            &mut rounded.pass_push_ns,
            &mut rounded.serialization_ns,
            &mut rounded.serialization_byte_ns,
        ] {
            *field = (*field * 100.0).round() / 100.0;
        }
        let body = toml::to_string(&rounded).expect("a cost table serializes");
        let mut out = String::new();
        for line in header.lines() {
            out.push_str("# ");
            out.push_str(line);
            out.push('\n');
        }
        out.push_str(&body);
        out
    }
}

fn pod(i: usize, rv: u64, label: &str, size: usize) -> Arc<Object> {
    let name = format!("p-{i}");
    let mut labels = BTreeMap::new();
    labels.insert("app".to_owned(), label.to_owned());
    Arc::new(Object::new(
        "default",
        &name,
        labels,
        BTreeMap::new(),
        rv,
        json!({"metadata": {"name": name, "namespace": "default"}, "data": "x".repeat(size)}),
    ))
}

fn ns(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1e9
}

/// Least squares fit of `y = a + b x`; returns `(a, b)`.
fn fit(points: &[(f64, f64)]) -> (f64, f64) {
    let n = points.len() as f64;
    let sx: f64 = points.iter().map(|p| p.0).sum();
    let sy: f64 = points.iter().map(|p| p.1).sum();
    let sxx: f64 = points.iter().map(|p| p.0 * p.0).sum();
    let sxy: f64 = points.iter().map(|p| p.0 * p.1).sum();
    let b = (n * sxy - sx * sy) / (n * sxx - sx * sx).max(f64::MIN_POSITIVE);
    ((sy - b * sx) / n, b)
}

/// Times the dispatcher with `watchers` cluster-wide watchers whose selector matches
/// (`matching`) or not; returns ns per revision.
fn time_dispatch(watchers: usize, matching: bool, revisions: usize) -> f64 {
    let config = CacheConfig {
        history_capacity_max: 4096,
        ..CacheConfig::default()
    };
    let (cache, mut dispatcher, _worker) = WatchCache::new(config, 1, Vec::new()).unwrap();
    let mut watches = Vec::new();
    for _ in 0..watchers {
        let mut request = WatchRequest::new(WatchStart::Now);
        request.queue_capacity = Some(revisions + 1);
        request.allow_bookmarks = false;
        request.labels = LabelSelector::parse(if matching { "app=a" } else { "app=b" }).unwrap();
        watches.push(cache.watch(request, Instant::ZERO));
    }
    dispatcher.handle_messages(Instant::ZERO);
    let objects: Vec<Arc<Object>> = (0..revisions)
        .map(|i| pod(i % 64, i as u64 + 2, "a", 64))
        .collect();
    let start = WallInstant::now();
    for (i, object) in objects.into_iter().enumerate() {
        let now = Instant::from_nanos(i as u64 * 1000);
        let _ = dispatcher.handle_revision(now, i as u64 + 2, vec![Change::put(object)]);
    }
    let elapsed = ns(start.elapsed());
    drop(watches);
    elapsed / revisions as f64
}

/// Times passes serving `watchers` watchers that start `backlog` events behind; returns
/// (ns per pass, reports).
fn time_passes(watchers: usize, backlog: usize, matching: bool) -> (f64, Vec<PassReport>) {
    let config = CacheConfig {
        history_capacity_min: backlog * 2,
        history_capacity_max: backlog * 2,
        ..CacheConfig::default()
    };
    let (cache, mut dispatcher, mut worker) = WatchCache::new(config, 1, Vec::new()).unwrap();
    for i in 0..backlog {
        let _ = dispatcher.handle_revision(
            Instant::ZERO,
            i as u64 + 2,
            vec![Change::put(pod(i % 64, i as u64 + 2, "a", 64))],
        );
    }
    let mut watches = Vec::new();
    for _ in 0..watchers {
        let mut request = WatchRequest::new(WatchStart::After(1));
        request.queue_capacity = Some(backlog + 10);
        request.allow_bookmarks = false;
        request.labels = LabelSelector::parse(if matching { "app=a" } else { "app=b" }).unwrap();
        watches.push(cache.watch(request, Instant::ZERO));
    }
    dispatcher.handle_messages(Instant::ZERO);
    let mut reports = Vec::new();
    let mut total = 0.0;
    let mut now = Instant::ZERO;
    for _ in 0..1000 {
        now = now + std::time::Duration::from_millis(10);
        if worker.poll_timeout().is_none() {
            break;
        }
        let start = WallInstant::now();
        let report = worker.run_pass(now);
        total += ns(start.elapsed());
        dispatcher.handle_messages(now);
        for w in &watches {
            while let Pop::Item(_) = w.try_pop() {}
        }
        reports.push(report);
    }
    (total, reports)
}

/// Measures the cost table on this machine (wall-clock timing of the real core): the median of
/// five measurements per field, because single timings on a shared machine are noisy.
#[must_use]
pub fn calibrate() -> CostTable {
    let runs: Vec<serde_json::Value> = (0..5)
        .map(|_| serde_json::to_value(calibrate_once()).expect("a cost table serializes"))
        .collect();
    let mut median = runs[0].clone();
    if let Some(fields) = median.as_object_mut() {
        for (key, value) in fields.iter_mut() {
            let mut samples: Vec<f64> = runs
                .iter()
                .filter_map(|r| r.get(key).and_then(serde_json::Value::as_f64))
                .collect();
            samples.sort_by(f64::total_cmp);
            *value = serde_json::json!(samples[samples.len() / 2]);
        }
    }
    serde_json::from_value(median).expect("the median table deserializes")
}

fn calibrate_once() -> CostTable {
    let mut table = CostTable::default();
    // Dispatcher: revision base, evaluation and push costs from watcher counts.
    let revisions = 2000;
    let _ = time_dispatch(100, true, 200); // warm up
    let base = time_dispatch(0, true, revisions * 5);
    let eval: Vec<(f64, f64)> = [200, 400, 800, 1600]
        .iter()
        .map(|&w| (w as f64, time_dispatch(w, false, revisions)))
        .collect();
    let push: Vec<(f64, f64)> = [200, 400, 800, 1600]
        .iter()
        .map(|&w| (w as f64, time_dispatch(w, true, revisions / 4)))
        .collect();
    let (_, per_eval) = fit(&eval);
    let (_, per_eval_push) = fit(&push);
    table.dispatch_revision_ns = base * 0.4;
    table.dispatch_event_ns = base * 0.6;
    table.dispatch_evaluation_ns = per_eval.max(1.0);
    table.dispatch_push_ns = (per_eval_push - per_eval).max(1.0);
    // Messages: registration of many watchers.
    {
        let (cache, mut dispatcher, _w) =
            WatchCache::new(CacheConfig::default(), 1, Vec::new()).unwrap();
        let n = 20_000;
        let start = WallInstant::now();
        let watches: Vec<_> = (0..n)
            .map(|_| cache.watch(WatchRequest::new(WatchStart::Now), Instant::ZERO))
            .collect();
        dispatcher.handle_messages(Instant::ZERO);
        table.dispatch_message_ns = ns(start.elapsed()) / n as f64;
        drop(watches);
    }
    // Passes: scan-only (selectors match nothing), then scan + push.
    let mut eval_points = Vec::new();
    let mut push_points = Vec::new();
    let mut scanned_per_pass = 1.0;
    for &w in &[16usize, 64, 256] {
        let (t, reports) = time_passes(w, 4000, false);
        let passes = reports.len().max(1) as f64;
        let scanned: usize = reports.iter().map(|r| r.events_scanned).sum();
        let evaluations: f64 = reports
            .iter()
            .map(|r| r.members as f64 * r.events_scanned as f64 / r.cohorts.max(1) as f64)
            .sum();
        scanned_per_pass = scanned as f64 / passes;
        eval_points.push((evaluations / passes, t / passes));
        let (t2, reports2) = time_passes(w, 4000, true);
        let pushes: usize = reports2.iter().map(|r| r.pushes + r.retry_pushes).sum();
        push_points.push((pushes as f64, (t2 - t).max(0.0)));
    }
    let (_, per_evaluation) = fit(&eval_points);
    table.pass_evaluation_ns = per_evaluation.max(1.0);
    // One member: what is left after its evaluations is the scan (history read) itself.
    let (t1, reports1) = time_passes(1, 4000, false);
    let passes1 = reports1.len().max(1) as f64;
    let scanned1: usize = reports1.iter().map(|r| r.events_scanned).sum();
    let per_pass1 = t1 / passes1;
    let scanned_per_pass1 = (scanned1 as f64 / passes1).max(1.0);
    let _ = scanned_per_pass;
    table.pass_event_scanned_ns =
        ((per_pass1 / scanned_per_pass1) - table.pass_evaluation_ns).max(1.0);
    table.pass_ns = (per_pass1 * 0.05).max(200.0);
    let (_, per_push) = fit(&push_points);
    table.pass_push_ns = per_push.max(1.0);
    table.pass_member_ns = table.pass_push_ns * 2.0;
    table.pass_unsynced_ns = table.dispatch_evaluation_ns;
    table.pass_interval_open_ns = table.pass_event_scanned_ns * 64.0;
    // Initial states: scanning a snapshot.
    {
        let n = 20_000;
        let objects: Vec<Arc<Object>> = (0..n).map(|i| pod(i, 1, "a", 64)).collect();
        let config = CacheConfig {
            pass_scan_units_max: n * 2,
            pass_pushes_max: n * 2,
            ..CacheConfig::default()
        };
        let (cache, mut dispatcher, mut worker) = WatchCache::new(config, 1, objects).unwrap();
        let mut request = WatchRequest::new(WatchStart::InitialState { min_revision: None });
        request.labels = LabelSelector::parse("app=none").unwrap();
        let watch = cache.watch(request, Instant::ZERO);
        dispatcher.handle_messages(Instant::ZERO);
        let start = WallInstant::now();
        let report = worker.run_pass(Instant::ZERO);
        table.pass_object_scanned_ns = ns(start.elapsed()) / report.objects_scanned.max(1) as f64;
        drop(watch);
    }
    // Serialization: JSON encodes of objects of two sizes.
    {
        let stats = watchkeeper_core::EncodeStats::default();
        let mut points = Vec::new();
        for &size in &[256usize, 4096, 65_536] {
            let objects: Vec<Arc<Object>> = (0..200).map(|i| pod(i, 1, "a", size)).collect();
            let start = WallInstant::now();
            for o in &objects {
                let _ = o.encoded(Encoding::Json, &stats);
            }
            points.push((size as f64, ns(start.elapsed()) / objects.len() as f64));
        }
        let (a, b) = fit(&points);
        table.serialization_ns = a.max(50.0);
        table.serialization_byte_ns = b.max(0.01);
    }
    table.dispatch_stall_ns = table.dispatch_message_ns;
    table.dispatch_timeout_ns = table.dispatch_evaluation_ns * 4.0;
    table
}

//! `/metrics` in the Prometheus text format: the core's metrics per resource (named as
//! KEP-6268 lists them, with `group` and `resource` labels), request counts and latencies per
//! verb and resource, open watches, and the reflector's lag.
//!
//! The core keeps its metrics as plain atomics (it is sans-IO and has no registry); rendering
//! them here in the text format is a few lines, so no metrics crate sits between the two.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::sync::atomic::Ordering;

use watchkeeper_core::TerminationReason;
use watchkeeper_core::metrics::Histogram;

use crate::operator::Observed;

/// Request counts and latency histograms.
#[derive(Debug, Default)]
pub struct RequestMetrics {
    /// (verb, group, resource, code) -> count.
    counts: Mutex<BTreeMap<(String, String, String, u16), u64>>,
    /// (verb, group, resource) -> latency in microseconds.
    latencies: Mutex<BTreeMap<(String, String, String), std::sync::Arc<Histogram>>>,
}

impl RequestMetrics {
    /// Records one finished request.
    pub fn observe(&self, verb: &str, group: &str, resource: &str, code: u16, micros: u64) {
        let key = (verb.to_owned(), group.to_owned(), resource.to_owned());
        *self
            .counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry((key.0.clone(), key.1.clone(), key.2.clone(), code))
            .or_default() += 1;
        let histogram = self
            .latencies
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(key)
            .or_default()
            .clone();
        histogram.observe(micros);
    }
}

fn counter(out: &mut String, name: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
}

fn gauge(out: &mut String, name: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
}

fn histogram(out: &mut String, name: &str, labels: &str, histogram: &Histogram, scale: f64) {
    let (cumulative, sum, count) = histogram.snapshot();
    for (index, value) in cumulative.iter().enumerate() {
        let le = if index < Histogram::BUCKETS {
            format!("{}", Histogram::bound(index) as f64 * scale)
        } else {
            "+Inf".to_owned()
        };
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{le}\"}} {value}");
    }
    let _ = writeln!(out, "{name}_sum{{{labels}}} {}", sum as f64 * scale);
    let _ = writeln!(out, "{name}_count{{{labels}}} {count}");
}

/// Renders every metric.
#[must_use]
pub fn render(app: &Observed<'_>) -> String {
    let mut out = String::new();
    type Get = fn(&watchkeeper_core::Metrics) -> i64;
    let counters: [(&str, &str, Get); 12] = [
        (
            "apiserver_watch_cache_watcher_stalls_total",
            "Transitions of watchers from synced to unsynced.",
            |m| m.watcher_stalls.get() as i64,
        ),
        (
            "apiserver_watch_cache_watcher_deferred_events_total",
            "Events pushed by catch-up passes rather than the live path.",
            |m| m.watcher_deferred_events.get() as i64,
        ),
        (
            "apiserver_watch_cache_watcher_catchup_rounds_total",
            "Transitions of watchers from unsynced back to synced.",
            |m| m.watcher_catchup_rounds.get() as i64,
        ),
        (
            "apiserver_watch_cache_watcher_skipped_events_total",
            "Events the live path skipped at or below a watcher's position (must stay zero).",
            |m| m.watcher_skipped_events.get() as i64,
        ),
        (
            "apiserver_watch_cache_serializations_total",
            "Object serializations.",
            |m| m.encode.serializations() as i64,
        ),
        (
            "apiserver_watch_cache_events_dispatched_total",
            "Events appended to the history and dispatched.",
            |m| m.events_dispatched.get() as i64,
        ),
        (
            "apiserver_watch_cache_bookmarks_total",
            "Bookmarks queued.",
            |m| m.bookmarks_sent.get() as i64,
        ),
        (
            "apiserver_watch_cache_capacity_increase_total",
            "Times the history doubled.",
            |m| m.history_capacity_increases.get() as i64,
        ),
        (
            "apiserver_watch_cache_capacity_decrease_total",
            "Times the history halved.",
            |m| m.history_capacity_decreases.get() as i64,
        ),
        (
            "apiserver_watch_cache_catchup_passes_total",
            "Catch-up passes run.",
            |m| m.passes.get() as i64,
        ),
        (
            "apiserver_watch_cache_catchup_pushes_total",
            "Items pushed by catch-up passes.",
            |m| m.pass_pushes.get() as i64,
        ),
        (
            "apiserver_watch_cache_resets_total",
            "Re-initialisations after a relist.",
            |m| m.cache_resets.get() as i64,
        ),
    ];
    let gauges: [(&str, &str, Get); 4] = [
        (
            "apiserver_watch_cache_stalled_watchers",
            "Unsynced watchers.",
            |m| m.stalled_watchers.get(),
        ),
        (
            "apiserver_watch_cache_synced_watchers",
            "Synced watchers.",
            |m| m.synced_watchers.get(),
        ),
        ("apiserver_registered_watchers", "Open watchers.", |m| {
            m.watchers.get()
        }),
        (
            "apiserver_watch_cache_capacity",
            "History capacity in events.",
            |m| m.history_capacity.get(),
        ),
    ];
    for (name, help, get) in counters {
        counter(&mut out, name, help);
        for r in app.resources {
            let _ = writeln!(
                out,
                "{name}{{group=\"{}\",resource=\"{}\"}} {}",
                r.def.group,
                r.def.plural,
                get(r.cache().metrics())
            );
        }
    }
    for (name, help, get) in gauges {
        gauge(&mut out, name, help);
        for r in app.resources {
            let _ = writeln!(
                out,
                "{name}{{group=\"{}\",resource=\"{}\"}} {}",
                r.def.group,
                r.def.plural,
                get(r.cache().metrics())
            );
        }
    }
    counter(
        &mut out,
        "apiserver_terminated_watchers_total",
        "Watchers terminated by the cache, by reason.",
    );
    for r in app.resources {
        for reason in TerminationReason::ALL {
            let _ = writeln!(
                out,
                "apiserver_terminated_watchers_total{{group=\"{}\",resource=\"{}\",reason=\"{}\"}} {}",
                r.def.group,
                r.def.plural,
                reason.as_str(),
                r.cache().metrics().terminations(reason)
            );
        }
    }
    let _ = writeln!(
        out,
        "# HELP apiserver_watch_cache_watcher_catchup_events Events pushed to one watcher between going unsynced and resyncing.\n# TYPE apiserver_watch_cache_watcher_catchup_events histogram"
    );
    for r in app.resources {
        histogram(
            &mut out,
            "apiserver_watch_cache_watcher_catchup_events",
            &format!("group=\"{}\",resource=\"{}\"", r.def.group, r.def.plural),
            &r.cache().metrics().watcher_catchup_events,
            1.0,
        );
    }
    let _ = writeln!(
        out,
        "# HELP apiserver_watch_cache_catchup_pass_duration_seconds Catch-up pass durations.\n# TYPE apiserver_watch_cache_catchup_pass_duration_seconds histogram"
    );
    for r in app.resources {
        histogram(
            &mut out,
            "apiserver_watch_cache_catchup_pass_duration_seconds",
            &format!("group=\"{}\",resource=\"{}\"", r.def.group, r.def.plural),
            &r.cache().metrics().pass_duration_micros,
            1e-6,
        );
    }
    gauge(
        &mut out,
        "watchkeeper_reflector_lag_revisions",
        "Store revision seen by the reflector minus the revision the cache dispatched.",
    );
    let store_revision = app.reflector.store_revision.load(Ordering::Relaxed);
    for r in app.resources {
        let _ = writeln!(
            out,
            "watchkeeper_reflector_lag_revisions{{group=\"{}\",resource=\"{}\"}} {}",
            r.def.group,
            r.def.plural,
            store_revision.saturating_sub(r.cache().dispatched())
        );
    }
    counter(
        &mut out,
        "watchkeeper_reflector_lists_total",
        "Lists of the store done by the reflector: the first, then one per relist (after compaction or a failed watch).",
    );
    let _ = writeln!(
        out,
        "watchkeeper_reflector_lists_total {}",
        app.reflector.lists.load(Ordering::Relaxed)
    );
    counter(
        &mut out,
        "watchkeeper_store_decodes_total",
        "Objects decoded from store values.",
    );
    let _ = writeln!(
        out,
        "watchkeeper_store_decodes_total{{path=\"reflector\"}} {}",
        app.reflector.decodes.load(Ordering::Relaxed)
    );
    let _ = writeln!(
        out,
        "watchkeeper_store_decodes_total{{path=\"request\"}} {}",
        app.counters.request_decodes.load(Ordering::Relaxed)
    );
    counter(
        &mut out,
        "watchkeeper_update_conflicts_total",
        "Compare-and-swap conflicts seen by writes.",
    );
    let _ = writeln!(
        out,
        "watchkeeper_update_conflicts_total {}",
        app.counters.conflicts.load(Ordering::Relaxed)
    );
    counter(
        &mut out,
        "watchkeeper_noop_writes_total",
        "Updates skipped because they changed nothing.",
    );
    let _ = writeln!(
        out,
        "watchkeeper_noop_writes_total {}",
        app.counters.noop_writes.load(Ordering::Relaxed)
    );
    // Zeros without a store (caching-proxy mode), so the series are always there.
    let store = app
        .source
        .as_store()
        .map(|store| watchkeeper_store::Store::counters(store).snapshot())
        .unwrap_or_default();
    counter(
        &mut out,
        "watchkeeper_store_operations_total",
        "Store operations by kind.",
    );
    for (op, value) in [
        ("range", store.ranges),
        ("txn", store.txns),
        ("txn_conflict", store.txn_conflicts),
        ("watch", store.watches),
        ("compaction", store.compactions),
    ] {
        let _ = writeln!(
            out,
            "watchkeeper_store_operations_total{{operation=\"{op}\"}} {value}"
        );
    }
    gauge(
        &mut out,
        "apiserver_longrunning_requests",
        "Open watch streams.",
    );
    let open = app.watches.lock().len();
    let _ = writeln!(
        out,
        "apiserver_longrunning_requests{{verb=\"WATCH\"}} {open}"
    );
    counter(
        &mut out,
        "apiserver_request_total",
        "Requests by verb, resource and code.",
    );
    for ((verb, group, resource, code), count) in app
        .requests
        .counts
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .iter()
    {
        let _ = writeln!(
            out,
            "apiserver_request_total{{verb=\"{verb}\",group=\"{group}\",resource=\"{resource}\",code=\"{code}\"}} {count}"
        );
    }
    let _ = writeln!(
        out,
        "# HELP apiserver_request_duration_seconds Request latency by verb and resource.\n# TYPE apiserver_request_duration_seconds histogram"
    );
    for ((verb, group, resource), h) in app
        .requests
        .latencies
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .iter()
    {
        histogram(
            &mut out,
            "apiserver_request_duration_seconds",
            &format!("verb=\"{verb}\",group=\"{group}\",resource=\"{resource}\""),
            h,
            1e-6,
        );
    }
    if let Some(upstream) = app.source.as_upstream() {
        crate::source::upstream::render_metrics(upstream, app.resources, &mut out);
    }
    app.limits.render(&mut out);
    out
}

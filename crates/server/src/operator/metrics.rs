//! `/metrics`: the core's metrics per resource (named as KEP-6268 lists them, with `group` and
//! `resource` labels), request counts and latencies per verb and resource, open watches, the
//! reflector's lag, the store's and the upstream's traffic, and the request limits.
//!
//! ## Guarantees
//! - Served in the Prometheus text format, version 0.0.4 (`text/plain; version=0.0.4`), the
//!   format and names scrapers have always read here: a counter's family is named with its
//!   `_total` suffix in `# HELP`, `# TYPE` and the samples; no `# EOF` line. A client whose
//!   `Accept` names `application/openmetrics-text` gets OpenMetrics 1.0 instead (a counter's
//!   family without `_total`, its samples with it, and `# EOF`).
//! - Every family is written by `prometheus-client`'s encoders (escaping, suffixes, float
//!   formatting); this module only collects. Histogram bounds are written as Go's Prometheus
//!   client writes them (`le="1e-06"`), sums as floats (`0.0`).
//! - A scrape reads each counter once; nothing here changes what the server does.
//!
//! The core keeps its metrics as plain atomics (it is sans-IO and has no registry). A scrape
//! collects them into a [`Scrape`] — families of samples, in exposition order — which is the
//! one [`Collector`] of a registry made for that scrape: the values are read when they are
//! served, never copied into a second set of metric objects that could drift.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::Ordering;

use axum::http::HeaderMap;
use axum::http::header::ACCEPT;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use watchkeeper_core::TerminationReason;
use watchkeeper_core::metrics::Histogram;

use crate::limits::{HANDSHAKE_FAILURES, Limit, OPEN_CONNECTIONS};
use crate::operator::Observed;
use crate::source::upstream::{ResourceStats, UpstreamSource};

/// Request counts and latency histograms.
#[derive(Debug, Default)]
pub struct RequestMetrics {
    /// verb -> group -> resource -> that label set's counts and latencies. Nested, so that a
    /// request finds its label set by the `&str`s it has (one `String` per label is built the
    /// first time a set is seen, not per request); iterated, it gives the sets in the order of
    /// (verb, group, resource).
    series: Mutex<ByLabel<ByLabel<ByLabel<Series>>>>,
}

/// Values by one label's value.
type ByLabel<V> = BTreeMap<String, V>;

/// One label set's counts by code and its latency histogram (microseconds).
#[derive(Debug, Default)]
struct Series {
    codes: BTreeMap<u16, u64>,
    latencies: Histogram,
}

impl RequestMetrics {
    /// Records one finished request.
    pub fn observe(&self, verb: &str, group: &str, resource: &str, code: u16, micros: u64) {
        let mut series = self
            .series
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let series = entry(entry(entry(&mut series, verb), group), resource);
        *series.codes.entry(code).or_default() += 1;
        series.latencies.observe(micros);
    }

    /// Every label set's (verb, group, resource), counts by code and latency histogram, in
    /// label order.
    fn each(&self, mut visit: impl FnMut([&str; 3], &BTreeMap<u16, u64>, &Histogram)) {
        let series = self
            .series
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for (verb, groups) in series.iter() {
            for (group, resources) in groups {
                for (resource, series) in resources {
                    visit([verb, group, resource], &series.codes, &series.latencies);
                }
            }
        }
    }
}

/// The value at `key`, inserted (its key built) only when absent.
fn entry<'m, V: Default>(map: &'m mut BTreeMap<String, V>, key: &str) -> &'m mut V {
    if !map.contains_key(key) {
        map.insert(key.to_owned(), V::default());
    }
    map.get_mut(key)
        .unwrap_or_else(|| unreachable!("inserted above"))
}

/// The exposition format of a scrape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// The Prometheus text format, version 0.0.4 (the default).
    Prometheus,
    /// OpenMetrics 1.0 text, when the client's `Accept` asks for it.
    OpenMetrics,
}

impl Format {
    /// The format a client asks for with its `Accept` header.
    #[must_use]
    pub fn negotiate(headers: &HeaderMap) -> Format {
        let open_metrics = headers
            .get_all(ACCEPT)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|value| value.split(','))
            .any(|range| {
                range
                    .split(';')
                    .next()
                    .is_some_and(|essence| essence.trim() == "application/openmetrics-text")
            });
        if open_metrics {
            Format::OpenMetrics
        } else {
            Format::Prometheus
        }
    }

    /// The `Content-Type` of the format.
    #[must_use]
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Prometheus => prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }
}

/// A sample's value.
#[derive(Debug)]
enum Value {
    Counter(u64),
    Gauge(i64),
    FloatGauge(f64),
    /// Sum, count and (upper bound, count in that bucket alone) of the finite buckets.
    Histogram(f64, u64, Vec<(f64, u64)>),
}

/// One metric family of a scrape: its samples by label set.
#[derive(Debug)]
pub struct Family {
    /// The name without a counter's `_total` (the encoders add it).
    name: &'static str,
    help: &'static str,
    kind: MetricType,
    samples: Vec<(Vec<(&'static str, String)>, Value)>,
}

impl Family {
    /// Adds a counter or gauge sample (by the family's type).
    pub fn sample(&mut self, labels: &[(&'static str, &str)], value: u64) -> &mut Family {
        let value = match self.kind {
            MetricType::Counter => Value::Counter(value),
            _ => Value::Gauge(i64::try_from(value).unwrap_or(i64::MAX)),
        };
        self.push(labels, value)
    }

    /// Adds a gauge sample that may be negative.
    pub fn signed(&mut self, labels: &[(&'static str, &str)], value: i64) -> &mut Family {
        self.push(labels, Value::Gauge(value))
    }

    /// Adds a gauge sample that may not be a whole number (a whole one is written as an
    /// integer, as Go's client writes it).
    pub fn float(&mut self, labels: &[(&'static str, &str)], value: f64) -> &mut Family {
        if value.is_finite() && value.fract() == 0.0 && value.abs() < 9e15 {
            self.push(labels, Value::Gauge(value as i64))
        } else {
            self.push(labels, Value::FloatGauge(value))
        }
    }

    /// Adds a histogram sample of explicit buckets: the sum, the count and (upper bound,
    /// observations in that bucket alone) of the finite buckets.
    pub fn buckets(
        &mut self,
        labels: &[(&'static str, &str)],
        (sum, count, buckets): (f64, u64, Vec<(f64, u64)>),
    ) -> &mut Family {
        self.push(labels, Value::Histogram(sum, count, buckets))
    }

    /// Adds a histogram sample: `histogram`'s buckets and sum times `scale` (1e-6 turns
    /// microseconds into seconds).
    pub fn histogram(
        &mut self,
        labels: &[(&'static str, &str)],
        histogram: &Histogram,
        scale: f64,
    ) -> &mut Family {
        let (cumulative, sum, count) = histogram.snapshot();
        let mut below = 0;
        let buckets = cumulative
            .iter()
            .take(Histogram::BUCKETS)
            .enumerate()
            .map(|(index, &at_most)| {
                let alone = at_most - below;
                below = at_most;
                (Histogram::bound(index) as f64 * scale, alone)
            })
            .collect();
        self.push(labels, Value::Histogram(sum as f64 * scale, count, buckets))
    }

    fn push(&mut self, labels: &[(&'static str, &str)], value: Value) -> &mut Family {
        let labels = labels.iter().map(|(k, v)| (*k, (*v).to_owned())).collect();
        self.samples.push((labels, value));
        self
    }
}

/// What one scrape collects: metric families in exposition order.
#[derive(Debug, Default)]
pub struct Scrape {
    families: Vec<Family>,
}

impl Scrape {
    /// Starts a counter family; `name` ends in `_total`, as it is exposed.
    pub fn counter(&mut self, name: &'static str, help: &'static str) -> &mut Family {
        let name = name
            .strip_suffix("_total")
            .expect("a counter's name ends in _total");
        self.family(name, help, MetricType::Counter)
    }

    /// Starts a gauge family.
    pub fn gauge(&mut self, name: &'static str, help: &'static str) -> &mut Family {
        self.family(name, help, MetricType::Gauge)
    }

    /// Starts a histogram family.
    pub fn histogram(&mut self, name: &'static str, help: &'static str) -> &mut Family {
        self.family(name, help, MetricType::Histogram)
    }

    fn family(&mut self, name: &'static str, help: &'static str, kind: MetricType) -> &mut Family {
        self.families.push(Family {
            name,
            help,
            kind,
            samples: Vec::new(),
        });
        self.families.last_mut().expect("just pushed")
    }

    /// Encodes the scrape in `format`.
    #[must_use]
    pub fn encode(self, format: Format) -> String {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(self));
        let mut out = String::new();
        let encoded = match format {
            Format::Prometheus => {
                prometheus_client::encoding::prometheus_text::encode(&mut out, &registry)
            }
            Format::OpenMetrics => prometheus_client::encoding::text::encode(&mut out, &registry),
        };
        // Writing to a String cannot fail; the names and labels here are all valid.
        encoded.expect("metrics encode into a string");
        out
    }
}

impl Collector for Scrape {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        for family in &self.families {
            let mut metric =
                encoder.encode_descriptor(family.name, family.help, None, family.kind)?;
            for (labels, value) in &family.samples {
                let mut sample = metric.encode_family(labels)?;
                match value {
                    Value::Counter(v) => sample.encode_counter::<NoLabelSet, _, u64>(v, None)?,
                    Value::Gauge(v) => sample.encode_gauge(v)?,
                    Value::FloatGauge(v) => sample.encode_gauge(v)?,
                    Value::Histogram(sum, count, buckets) => {
                        sample.encode_histogram::<NoLabelSet>(*sum, *count, buckets, None)?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// Renders every metric in the Prometheus text format (version 0.0.4).
#[must_use]
pub fn render(app: &Observed<'_>) -> String {
    collect(app).encode(Format::Prometheus)
}

/// Collects every metric.
#[must_use]
pub fn collect(app: &Observed<'_>) -> Scrape {
    let mut scrape = Scrape::default();
    collect_caches(app, &mut scrape);
    collect_paths(app, &mut scrape);
    collect_requests(app, &mut scrape);
    if let Some(upstream) = app.source.as_upstream() {
        collect_upstream(app, upstream, &mut scrape);
    }
    collect_limits(app, &mut scrape);
    collect_consistency(app, &mut scrape);
    if let Some(store) = app.source.as_store_source() {
        collect_custom_resources(app, store.custom_resource_versions(), &mut scrape);
        collect_cache_memory(store.cache_memory(), &mut scrape);
        if let Some(webhooks) = store.webhooks() {
            collect_webhooks(webhooks, &mut scrape);
        }
    }
    if let Some(collector) = app.garbage_collector {
        collect_garbage_collector(collector, &mut scrape);
    }
    collect_audit(app.audit, &mut scrape);
    if let Some(nudge) = &app.source.freshness().nudge {
        collect_nudges(nudge, &mut scrape);
    }
    if let Some(reloading) = app.encryption_reload {
        collect_encryption_reloads(reloading, &mut scrape);
    }
    if let Some(store) = app.source.as_store() {
        collect_compaction(app.compaction, &mut scrape);
        if let Some(usage) = watchkeeper_store::Store::quota_usage(store) {
            collect_quota(usage, &mut scrape);
        }
        if let watchkeeper_store::AnyStore::Transformed(transformed) = store {
            collect_transformations(transformed.transformer(), &mut scrape);
        }
    }
    scrape
}

/// `--encryption-provider-config-automatic-reload`'s reloads (kube's metrics).
fn collect_encryption_reloads(
    reloading: &crate::source::encryption_reload::Reloading,
    scrape: &mut Scrape,
) {
    let outcomes = reloading.outcomes();
    let id = reloading.id_hash();
    let family = scrape.counter(
        "apiserver_encryption_config_controller_automatic_reloads_total",
        "Total number of reload successes and failures of encryption configuration split by apiserver identity.",
    );
    family.sample(
        &[("status", "success"), ("apiserver_id_hash", id)],
        outcomes.successes,
    );
    family.sample(
        &[("status", "failure"), ("apiserver_id_hash", id)],
        outcomes.failures,
    );
    let family = scrape.gauge(
        "apiserver_encryption_config_controller_automatic_reload_last_timestamp_seconds",
        "Timestamp of the last successful or failed automatic reload of encryption configuration split by apiserver identity.",
    );
    for (status, last) in [
        ("success", outcomes.last_success),
        ("failure", outcomes.last_failure),
    ] {
        if let Some(last) = last {
            family.sample(&[("status", status), ("apiserver_id_hash", id)], last);
        }
    }
}

/// Encryption at rest's operations (kube's metric).
fn collect_transformations(
    transformer: &dyn watchkeeper_store::ValueTransformer,
    scrape: &mut Scrape,
) {
    let family = scrape.counter(
        "apiserver_storage_transformation_operations_total",
        "Stored values transformed (encrypted or decrypted), by direction, transformer prefix and status.",
    );
    for ((direction, transformer, status), count) in transformer.operations() {
        family.sample(
            &[
                ("transformation_type", direction),
                ("transformer_prefix", &transformer),
                ("status", status),
            ],
            count,
        );
    }
}

/// The custom resource versions served for CustomResourceDefinitions and their bound
/// (`--max-custom-resource-versions`; its refusals are in `watchkeeper_limit_rejections_total`).
fn collect_custom_resources(
    app: &Observed<'_>,
    bound: &crate::source::catalog::VersionsBound,
    scrape: &mut Scrape,
) {
    let served = app
        .resources
        .iter()
        .filter(|r| r.origin == crate::cache::Origin::Definition)
        .count();
    scrape
        .gauge(
            "watchkeeper_custom_resource_versions",
            "Custom resource versions served for CustomResourceDefinitions (each has a cache with its own dispatcher thread).",
        )
        .sample(&[], served as u64);
    scrape
        .gauge(
            "watchkeeper_custom_resource_versions_max",
            "The most custom resource versions served, --max-custom-resource-versions.",
        )
        .sample(&[], bound.max() as u64);
    scrape
        .gauge(
            "watchkeeper_custom_resource_definitions_unserved",
            "Established CustomResourceDefinitions in the store not served because they would exceed --max-custom-resource-versions.",
        )
        .sample(&[], bound.unserved());
}

/// The caches' live objects against `--cache-memory-bytes`.
fn collect_cache_memory(memory: &crate::source::cache_memory::CacheMemory, scrape: &mut Scrape) {
    scrape
        .gauge(
            "watchkeeper_cache_memory_bytes",
            "Bytes the caches' live objects take decoded (estimated), bounded by --cache-memory-bytes.",
        )
        .sample(&[], memory.used());
    scrape
        .gauge(
            "watchkeeper_cache_history_memory_bytes",
            "Bytes the caches' histories count (estimated decoded weight of the versions they keep), sharing half of --cache-memory-bytes.",
        )
        .sample(&[], memory.histories());
    scrape
        .gauge(
            "watchkeeper_cache_memory_limit_bytes",
            "The bound on the caches' live objects, --cache-memory-bytes (0: none).",
        )
        .sample(&[], memory.limit());
    scrape
        .counter(
            "watchkeeper_cache_memory_refusals_total",
            "Creates and updates refused because their object would take the caches' live objects past --cache-memory-bytes (answered 500).",
        )
        .sample(&[], memory.refusals());
    scrape
        .gauge(
            "watchkeeper_cache_memory_released_bytes",
            "Bytes of events the caches' histories let go that watchers' unread queues still hold, within a quarter of --cache-memory-bytes.",
        )
        .sample(&[], memory.released());
    scrape
        .counter(
            "watchkeeper_cache_memory_watch_cuts_total",
            "Watches ended at once (410, reason memory_pressure) because their unread queues held object versions the caches let go while those were past their budget.",
        )
        .sample(&[], memory.cuts());
    scrape
        .gauge(
            "watchkeeper_openapi_document_bytes",
            "Bytes of the OpenAPI documents built for the served resources, counted with the caches' live objects against --cache-memory-bytes until the set of served resources they describe changes.",
        )
        .sample(&[], memory.derived());
}

/// The memory and embedded stores' quota (`--store-quota-bytes`; etcd keeps its own,
/// `etcd_server_quota_backend_bytes` and `etcd_mvcc_db_total_size_in_bytes`).
fn collect_quota(usage: watchkeeper_store::QuotaUsage, scrape: &mut Scrape) {
    scrape
        .gauge(
            "watchkeeper_store_size_bytes",
            "Bytes the store holds against its quota: live keys and values plus the history compaction has not freed.",
        )
        .sample(&[], usage.used_bytes);
    scrape
        .gauge(
            "watchkeeper_store_quota_bytes",
            "The store's quota, --store-quota-bytes (0: none).",
        )
        .sample(&[], usage.quota_bytes);
    scrape
        .counter(
            "watchkeeper_store_quota_refusals_total",
            "Writes the store refused because they would exceed --store-quota-bytes (answered 500 database space exceeded).",
        )
        .sample(&[], usage.refusals);
}

/// The garbage collector's work (`--enable-garbage-collector`).
fn collect_garbage_collector(
    collector: &crate::controllers::garbage_collector::GarbageCollector,
    scrape: &mut Scrape,
) {
    use std::sync::atomic::Ordering::Relaxed;
    let counters = collector.counters();
    let family = scrape.counter(
        "watchkeeper_garbage_collector_writes_total",
        "Writes of the garbage collector by kind: deleted (an object whose owners are gone, or a dependent of an owner deleted in the foreground), orphaned (owner references removed from a dependent), finalized (a GC finalizer removed from an owner).",
    );
    for (kind, value) in [
        ("deleted", &counters.deleted),
        ("orphaned", &counters.orphaned),
        ("finalized", &counters.finalized),
    ] {
        family.sample(&[("kind", kind)], value.load(Relaxed));
    }
    scrape
        .counter(
            "watchkeeper_garbage_collector_retries_total",
            "Looks at an object the garbage collector queued again after a failed write or read.",
        )
        .sample(&[], counters.retries.load(Relaxed));
    scrape
        .gauge(
            "watchkeeper_garbage_collector_failing",
            "Objects whose last look by the garbage collector failed, each waiting to be looked at again after a delay that doubles with every failure in a row (5 ms to 1,000 s).",
        )
        .sample(&[], counters.failing.load(Relaxed));
    scrape
        .gauge(
            "watchkeeper_garbage_collector_dependents",
            "Objects with owner references the garbage collector knows of.",
        )
        .sample(&[], collector.dependents() as u64);
}

/// Freshness nudges over etcd (`source::nudge`).
fn collect_nudges(nudge: &crate::source::nudge::Nudge, scrape: &mut Scrape) {
    use std::sync::atomic::Ordering::Relaxed;
    let family = scrape.counter(
        "watchkeeper_store_freshness_nudges_total",
        "Writes of <prefix>/freshness_key that make the store watch report etcd's revision: one at a start with --rebuild-history, then one when a wait for a cache to reach etcd's revision lasted --fresh-nudge-ms (etcd moved on outside the prefix), by result: written, failed.",
    );
    family.sample(&[("result", "written")], nudge.writes.load(Relaxed));
    family.sample(&[("result", "failed")], nudge.failures.load(Relaxed));
}

fn collect_compaction(
    counters: &crate::source::compaction::CompactionCounters,
    scrape: &mut Scrape,
) {
    use std::sync::atomic::Ordering::Relaxed;
    let family = scrape.counter(
        "watchkeeper_store_compaction_rounds_total",
        "Store compaction rounds (--compaction-interval-ms) by result: compacted, skipped (the first round, or another server's round), failed.",
    );
    for (result, value) in [
        ("compacted", &counters.compacted),
        ("skipped", &counters.skipped),
        ("failed", &counters.failed),
    ] {
        family.sample(&[("result", result)], value.load(Relaxed));
    }
    scrape
        .gauge(
            "watchkeeper_store_compaction_floor",
            "The revision this server last compacted the store to (0: none yet).",
        )
        .sample(&[], counters.floor.load(Relaxed));
}

fn collect_consistency(app: &Observed<'_>, scrape: &mut Scrape) {
    use crate::source::consistency::Status;
    let family = scrape.counter(
        "apiserver_storage_consistency_checks_total",
        "Counter for status of consistency checks between etcd and watch cache",
    );
    for resource in app.resources.iter() {
        let name = resource.name();
        for status in Status::COUNTED {
            family.sample(
                &[("resource", name.as_str()), ("status", status.as_str())],
                app.consistency.count(&name, status),
            );
        }
    }
}

/// `group` and `resource` of a resource.
fn resource_labels(def: &watchkeeper_api::ResourceDef) -> [(&'static str, &str); 2] {
    [
        ("group", def.group.as_str()),
        ("resource", def.plural.as_str()),
    ]
}

fn collect_caches(app: &Observed<'_>, scrape: &mut Scrape) {
    type Get = fn(&watchkeeper_core::Metrics) -> i64;
    let counters: [(&'static str, &'static str, Get); 13] = [
        (
            "apiserver_watch_cache_watcher_stalls_total",
            "Transitions of watchers from synced to unsynced.",
            |m| m.watcher_stalls.get() as i64,
        ),
        (
            "apiserver_watch_cache_watch_queue_growths_total",
            "Full queues of synced watchers that doubled instead of stalling, their consumer having emptied them since their last growth.",
            |m| m.watch_queue_growths.get() as i64,
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
    let gauges: [(&'static str, &'static str, Get); 7] = [
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
        (
            "watchkeeper_watch_cache_history_bytes",
            "Bytes the objects the history's events carry take decoded (estimated; bounded by --history-bytes-max).",
            |m| m.history_bytes.get(),
        ),
        (
            "watchkeeper_cache_object_bytes",
            "Bytes the cache's live objects take decoded (estimated; all caches' together bounded by --cache-memory-bytes).",
            |m| m.object_bytes.get(),
        ),
        (
            "watchkeeper_cache_definition_bytes",
            "Bytes the served resource's definition holds beyond its objects (a custom resource version's schema, decoded), counted with the live objects against --cache-memory-bytes.",
            |m| m.definition_bytes.get(),
        ),
    ];
    for (name, help, get) in counters {
        let family = scrape.counter(name, help);
        for r in app.resources.iter() {
            let value = u64::try_from(get(r.cache().metrics())).unwrap_or(0);
            family.sample(&resource_labels(&r.def), value);
        }
    }
    for (name, help, get) in gauges {
        let family = scrape.gauge(name, help);
        for r in app.resources.iter() {
            family.signed(&resource_labels(&r.def), get(r.cache().metrics()));
        }
    }
    let family = scrape.counter(
        "apiserver_terminated_watchers_total",
        "Watchers terminated by the cache, by reason.",
    );
    for r in app.resources.iter() {
        for reason in TerminationReason::ALL {
            let [group, resource] = resource_labels(&r.def);
            family.sample(
                &[group, resource, ("reason", reason.as_str())],
                r.cache().metrics().terminations(reason),
            );
        }
    }
    let family = scrape.histogram(
        "apiserver_watch_cache_watcher_catchup_events",
        "Events pushed to one watcher between going unsynced and resyncing.",
    );
    for r in app.resources.iter() {
        family.histogram(
            &resource_labels(&r.def),
            &r.cache().metrics().watcher_catchup_events,
            1.0,
        );
    }
    let family = scrape.histogram(
        "apiserver_watch_cache_catchup_pass_duration_seconds",
        "Catch-up pass durations.",
    );
    for r in app.resources.iter() {
        family.histogram(
            &resource_labels(&r.def),
            &r.cache().metrics().pass_duration_micros,
            1e-6,
        );
    }
}

fn collect_paths(app: &Observed<'_>, scrape: &mut Scrape) {
    let family = scrape.gauge(
        "watchkeeper_reflector_lag_revisions",
        "Store revision seen by the reflector minus the revision the cache dispatched.",
    );
    let store_revision = app.reflector.store_revision.load(Ordering::Relaxed);
    for r in app.resources.iter() {
        family.sample(
            &resource_labels(&r.def),
            store_revision.saturating_sub(r.cache().reflected()),
        );
    }
    scrape
        .counter(
            "watchkeeper_reflector_lists_total",
            "Lists of the store done by the reflector: the first, then one per relist (after compaction or a failed watch).",
        )
        .sample(&[], app.reflector.lists.load(Ordering::Relaxed));
    scrape
        .counter(
            "watchkeeper_store_decodes_total",
            "Objects decoded from store values.",
        )
        .sample(
            &[("path", "reflector")],
            app.reflector.decodes.load(Ordering::Relaxed),
        )
        .sample(
            &[("path", "request")],
            app.counters.request_decodes.load(Ordering::Relaxed),
        );
    scrape
        .counter(
            "watchkeeper_update_conflicts_total",
            "Compare-and-swap conflicts seen by writes.",
        )
        .sample(&[], app.counters.conflicts.load(Ordering::Relaxed));
    scrape
        .counter(
            "watchkeeper_update_unproven_retries_total",
            "Updates whose attempt from the cache as it was failed before the store and ran again from a cache proven fresh.",
        )
        .sample(&[], app.counters.unproven_retries.load(Ordering::Relaxed));
    scrape
        .counter(
            "watchkeeper_noop_writes_total",
            "Updates skipped because they changed nothing.",
        )
        .sample(&[], app.counters.noop_writes.load(Ordering::Relaxed));
    // Zeros without a store (caching-proxy mode), so the series are always there.
    let store = app
        .source
        .as_store()
        .map(|store| watchkeeper_store::Store::counters(store).snapshot())
        .unwrap_or_default();
    let family = scrape.counter(
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
        family.sample(&[("operation", op)], value);
    }
}

fn collect_requests(app: &Observed<'_>, scrape: &mut Scrape) {
    let open = app.watches.lock().len();
    scrape
        .gauge("apiserver_longrunning_requests", "Open watch streams.")
        .sample(&[("verb", "WATCH")], open as u64);
    let family = scrape.counter(
        "apiserver_request_total",
        "Requests by verb, resource and code.",
    );
    app.requests.each(|[verb, group, resource], codes, _| {
        for (code, count) in codes {
            family.sample(
                &[
                    ("verb", verb),
                    ("group", group),
                    ("resource", resource),
                    ("code", &code.to_string()),
                ],
                *count,
            );
        }
    });
    let family = scrape.histogram(
        "apiserver_request_duration_seconds",
        "Request latency by verb and resource.",
    );
    app.requests.each(|[verb, group, resource], _, histogram| {
        family.histogram(
            &[("verb", verb), ("group", group), ("resource", resource)],
            histogram,
            1e-6,
        );
    });
}

fn collect_upstream(app: &Observed<'_>, upstream: &UpstreamSource, scrape: &mut Scrape) {
    type Get = fn(&ResourceStats) -> u64;
    let counters: [(&'static str, &'static str, Get); 5] = [
        (
            "watchkeeper_upstream_lists_total",
            "Lists of the upstream (the first and every relist).",
            |s| s.lists.load(Ordering::Relaxed),
        ),
        (
            "watchkeeper_upstream_watches_total",
            "Watches opened on the upstream (the first and every resume).",
            |s| s.watches.load(Ordering::Relaxed),
        ),
        (
            "watchkeeper_upstream_relists_total",
            "Relists after a 410 or a protocol error (downstream watchers got 410).",
            |s| s.relists.load(Ordering::Relaxed),
        ),
        (
            "watchkeeper_upstream_forwarded_reads_total",
            "Consistent reads forwarded because the cache was not proven fresh in time.",
            |s| s.forwarded_reads.load(Ordering::Relaxed),
        ),
        (
            "watchkeeper_upstream_forwarded_writes_total",
            "Writes forwarded to the upstream.",
            |s| s.forwarded_writes.load(Ordering::Relaxed),
        ),
    ];
    for (name, help, get) in counters {
        let family = scrape.counter(name, help);
        for (def, stats) in upstream.defs.iter().zip(&upstream.stats) {
            family.sample(&resource_labels(def), get(stats));
        }
    }
    let family = scrape.gauge(
        "watchkeeper_upstream_open_watches",
        "Upstream watches open now (one per resource when healthy).",
    );
    for (def, stats) in upstream.defs.iter().zip(&upstream.stats) {
        family.sample(
            &resource_labels(def),
            u64::from(stats.watch_open.load(Ordering::Relaxed)),
        );
    }
    scrape
        .gauge(
            "watchkeeper_upstream_streaming_lists",
            "Whether the caches load with streaming lists (1) or paged lists (0).",
        )
        .sample(&[], u64::from(upstream.streaming_lists()));
    let served: Vec<_> = app
        .resources
        .iter()
        .filter_map(|r| Some((r, upstream.stats_of(&r.def)?)))
        .collect();
    let family = scrape.gauge(
        "watchkeeper_upstream_lag_revisions",
        "Newest resource version the upstream reported for the resource minus the cache's.",
    );
    for (resource, stats) in &served {
        family.sample(
            &resource_labels(&resource.def),
            stats
                .upstream_revision
                .load(Ordering::Relaxed)
                .saturating_sub(resource.cache().dispatched()),
        );
    }
    let family = scrape.gauge(
        "watchkeeper_upstream_downstream_watchers",
        "Downstream watchers served by the resource's one upstream watch.",
    );
    for (resource, _) in &served {
        family.signed(
            &resource_labels(&resource.def),
            resource.cache().metrics().watchers.get(),
        );
    }
}

fn collect_limits(app: &Observed<'_>, scrape: &mut Scrape) {
    let limits = app.limits;
    let family = scrape.counter(
        "watchkeeper_limit_rejections_total",
        "Requests refused by a limit.",
    );
    for limit in Limit::ALL {
        family.sample(&[("limit", limit.as_str())], limits.rejections(limit));
    }
    let family = scrape.gauge(
        "apiserver_current_inflight_requests",
        "In-flight requests by kind (watches not included).",
    );
    for (kind, mutating) in [("readOnly", false), ("mutating", true)] {
        family.sample(&[("request_kind", kind)], limits.inflight(mutating) as u64);
    }
    scrape
        .gauge(
            "watchkeeper_open_watches",
            "Watch requests admitted and not yet finished.",
        )
        .sample(&[], limits.open_watches() as u64);
    scrape
        .gauge(
            "watchkeeper_open_watch_query_bytes",
            "Bytes of the query strings of the open watches (--max-watch-query-bytes).",
        )
        .sample(&[], limits.open_watch_query_bytes() as u64);
    if let Some(apf) = limits.apf() {
        collect_flowcontrol(apf, scrape);
    }
    let (answered, stopped) = app.offload.outcomes();
    scrape
        .counter(
            "watchkeeper_heavy_requests_total",
            "Requests with large bodies handled on the blocking pool (--heavy-request-body-bytes), and OpenAPI document builds: answered, or stopped at a phase boundary once their request was gone; in_place: heavy phases of requests with small bodies (a small patch of a large object) run with the runtime worker's other tasks handed on.",
        )
        .sample(&[("outcome", "answered")], answered)
        .sample(&[("outcome", "stopped")], stopped)
        .sample(&[("outcome", "in_place")], app.offload.in_place_phases());
    let (running, waiting) = app.offload.running_and_waiting();
    scrape
        .gauge(
            "watchkeeper_heavy_requests_running",
            "Heavy requests running on the blocking pool (at most --max-heavy-requests).",
        )
        .sample(&[], running as u64);
    scrape
        .gauge(
            "watchkeeper_heavy_requests_waiting",
            "Heavy requests waiting for a slot (--max-heavy-requests).",
        )
        .sample(&[], waiting as u64);
    let (releases, seconds, bytes) = app.offload.release_counts();
    scrape
        .counter(
            "watchkeeper_memory_releases_total",
            "Times the memory heavy requests freed was given back to the system (glibc's malloc_trim after heavy requests, at most once per --memory-release-interval-ms).",
        )
        .sample(&[], releases);
    scrape
        .counter(
            "watchkeeper_memory_release_seconds_total",
            "Time spent giving freed memory back to the system (on a blocking thread).",
        )
        .float(&[], seconds);
    scrape
        .counter(
            "watchkeeper_memory_released_bytes_total",
            "The resident set's drop across each release of freed memory, summed.",
        )
        .sample(&[], bytes);
    scrape
        .gauge("watchkeeper_open_connections", "Open client connections.")
        .sample(&[], OPEN_CONNECTIONS.load(Ordering::Relaxed) as u64);
    scrape
        .counter(
            "watchkeeper_tls_handshake_failures_total",
            "TLS handshakes that failed or timed out.",
        )
        .sample(&[], HANDSHAKE_FAILURES.load(Ordering::Relaxed) as u64);
}

/// API Priority and Fairness' requests by FlowSchema and priority level, and its levels'
/// limits and demand (kube's names; `request_concurrency_limit`, deprecated in 1.30, is
/// hidden in 1.33 and not exported).
fn collect_flowcontrol(apf: &crate::limits::apf::Apf, scrape: &mut Scrape) {
    use crate::limits::apf::queues::{SEATS_BUCKETS, WAIT_BUCKETS};
    use crate::limits::apf::{FlowCounts, Reason};
    use std::sync::atomic::AtomicI64;
    let counts = apf.counts();
    let family = scrape.counter(
        "apiserver_flowcontrol_rejected_requests_total",
        "Requests refused by API Priority and Fairness, by FlowSchema, priority level and reason.",
    );
    for ((schema, level), count) in &counts {
        for reason in Reason::ALL {
            family.sample(
                &[
                    ("flow_schema", schema),
                    ("priority_level", level),
                    ("reason", reason.as_str()),
                ],
                count.rejected[reason as usize].load(Ordering::Relaxed),
            );
        }
    }
    let family = scrape.counter(
        "apiserver_flowcontrol_dispatched_requests_total",
        "Requests granted their seats (executed), by FlowSchema and priority level.",
    );
    for ((schema, level), count) in &counts {
        family.sample(
            &[("flow_schema", schema), ("priority_level", level)],
            count.dispatched.load(Ordering::Relaxed),
        );
    }
    type FlowGauge = fn(&FlowCounts) -> &AtomicI64;
    let gauges: [(&'static str, &'static str, FlowGauge); 4] = [
        (
            "apiserver_flowcontrol_current_inqueue_requests",
            "Requests waiting in a queue of API Priority and Fairness.",
            |c| &c.waiting,
        ),
        (
            "apiserver_flowcontrol_current_inqueue_seats",
            "Seats asked by the requests waiting in a queue.",
            |c| &c.waiting_seats,
        ),
        (
            "apiserver_flowcontrol_current_executing_requests",
            "Requests holding seats of their priority level.",
            |c| &c.executing,
        ),
        (
            "apiserver_flowcontrol_current_executing_seats",
            "Seats held by executing requests (and by finished mutating requests for their watch fan-out).",
            |c| &c.executing_seats,
        ),
    ];
    for (name, help, gauge) in gauges {
        let family = scrape.gauge(name, help);
        for ((schema, level), count) in &counts {
            family.signed(
                &[("flow_schema", schema), ("priority_level", level)],
                gauge(count).load(Ordering::Relaxed),
            );
        }
    }
    let family = scrape.histogram(
        "apiserver_flowcontrol_request_wait_duration_seconds",
        "Time requests of a limited priority level waited for their seats, by whether they were executed.",
    );
    for ((schema, level), count) in &counts {
        for (execute, waits) in ["false", "true"].into_iter().zip(&count.waits) {
            family.buckets(
                &[
                    ("flow_schema", schema),
                    ("priority_level", level),
                    ("execute", execute),
                ],
                waits.snapshot(&WAIT_BUCKETS),
            );
        }
    }
    let family = scrape.histogram(
        "apiserver_flowcontrol_work_estimated_seats",
        "Number of estimated seats (maximum of initial and final seats) associated with requests in API Priority and Fairness",
    );
    for ((schema, level), count) in &counts {
        family.buckets(
            &[("flow_schema", schema), ("priority_level", level)],
            count.estimated_seats.snapshot(&SEATS_BUCKETS),
        );
    }
    let family = scrape.counter(
        "apiserver_flowcontrol_request_dispatch_no_accommodation_total",
        "Number of times a dispatch attempt resulted in a non accommodation due to lack of available seats",
    );
    for ((schema, level), count) in &counts {
        family.sample(
            &[("flow_schema", schema), ("priority_level", level)],
            count.no_accommodation.load(Ordering::Relaxed),
        );
    }
    let levels = apf.levels();
    type Seats = fn(&crate::limits::apf::LevelReport) -> f64;
    let per_level: [(&'static str, &'static str, Seats); 9] = [
        (
            "apiserver_flowcontrol_nominal_limit_seats",
            "Nominal number of execution seats configured for each priority level",
            |l| l.state.nominal as f64,
        ),
        (
            "apiserver_flowcontrol_lower_limit_seats",
            "Configured lower bound on number of execution seats available to each priority level",
            |l| l.state.lower as f64,
        ),
        (
            "apiserver_flowcontrol_upper_limit_seats",
            "Configured upper bound on number of execution seats available to each priority level",
            |l| l.state.upper as f64,
        ),
        (
            "apiserver_flowcontrol_current_limit_seats",
            "current derived number of execution seats available to each priority level",
            |l| l.state.current as f64,
        ),
        (
            "apiserver_flowcontrol_target_seats",
            "Seat allocation targets",
            |l| l.target,
        ),
        (
            "apiserver_flowcontrol_demand_seats_high_watermark",
            "High watermark, over last adjustment period, of demand_seats",
            |l| l.stats.high_watermark as f64,
        ),
        (
            "apiserver_flowcontrol_demand_seats_average",
            "Time-weighted average, over last adjustment period, of demand_seats",
            |l| l.stats.average,
        ),
        (
            "apiserver_flowcontrol_demand_seats_stdev",
            "Time-weighted standard deviation, over last adjustment period, of demand_seats",
            |l| l.stats.deviation,
        ),
        (
            "apiserver_flowcontrol_demand_seats_smoothed",
            "Smoothed seat demands",
            |l| l.stats.smoothed,
        ),
    ];
    for (name, help, value) in per_level {
        let family = scrape.gauge(name, help);
        for level in &levels {
            family.float(&[("priority_level", level.name.as_str())], value(level));
        }
    }
    scrape
        .gauge(
            "apiserver_flowcontrol_seat_fair_frac",
            "Fair fraction of server's concurrency to allocate to each priority level that can use it",
        )
        .float(&[], apf.fair_frac());
}

/// The admission webhooks' calls and rejections (kube's metric names).
fn collect_webhooks(webhooks: &crate::source::webhook::Webhooks, scrape: &mut Scrape) {
    let (calls, rejections) = webhooks.counts();
    let family = scrape.counter(
        "apiserver_admission_webhook_admission_calls_total",
        "Admission webhook calls, by webhook name, type (admit or validating), operation and whether they rejected the request.",
    );
    for ((name, kind, operation, rejected), count) in &calls {
        let rejected = if *rejected { "true" } else { "false" };
        family.sample(
            &[
                ("name", name),
                ("type", kind),
                ("operation", operation),
                ("rejected", rejected),
            ],
            *count,
        );
    }
    let family = scrape.counter(
        "apiserver_admission_webhook_rejection_count_total",
        "Admission webhook rejections, by webhook name, type, operation, error type and rejection code.",
    );
    for ((name, kind, operation, error_type, code), count) in &rejections {
        family.sample(
            &[
                ("name", name),
                ("type", kind),
                ("operation", operation),
                ("error_type", error_type),
                ("rejection_code", &code.to_string()),
            ],
            *count,
        );
    }
    let family = scrape.histogram(
        "apiserver_crd_conversion_webhook_duration_seconds",
        "CRD webhook conversion duration in seconds",
    );
    for ((crd, from, to, succeeded), histogram) in webhooks.conversion_durations().snapshot() {
        let succeeded = if succeeded { "true" } else { "false" };
        family.histogram(
            &[
                ("crd_name", &crd),
                ("from_version", &from),
                ("to_version", &to),
                ("succeeded", succeeded),
            ],
            &histogram,
            1e-3,
        );
    }
}

/// The `/metrics` families of the audit log, as kube-apiserver names them.
fn collect_audit(audit: Option<&crate::audit::Audit>, scrape: &mut Scrape) {
    let Some(audit) = audit else {
        return;
    };
    let counters = audit.counters();
    let load =
        |counter: &std::sync::atomic::AtomicU64| counter.load(std::sync::atomic::Ordering::Relaxed);
    scrape
        .counter(
            "apiserver_audit_event_total",
            "Counter of audit events generated and sent to the audit backend.",
        )
        .sample(&[], load(&counters.events));
    scrape
        .counter(
            "apiserver_audit_error_total",
            "Counter of audit events that failed to be audited properly. Plugin identifies the plugin affected by the error.",
        )
        .sample(&[("plugin", "buffered")], load(&counters.dropped))
        .sample(&[("plugin", "log")], load(&counters.write_errors))
        .sample(&[("plugin", "webhook")], load(&counters.webhook_errors));
    scrape
        .counter(
            "apiserver_audit_requests_rejected_total",
            "Counter of apiserver requests rejected due to an error in audit logging backend.",
        )
        .sample(&[], load(&counters.rejected));
    let levels = scrape.counter(
        "apiserver_audit_level_total",
        "Counter of policy levels for audit events (1 per request).",
    );
    for level in [
        crate::audit::Level::Metadata,
        crate::audit::Level::Request,
        crate::audit::Level::RequestResponse,
    ] {
        levels.sample(
            &[("level", level.as_str())],
            load(&counters.levels[level as usize]),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scrape() -> Scrape {
        let mut scrape = Scrape::default();
        scrape
            .counter("demo_requests_total", "Requests.")
            .sample(&[("code", "200")], 3)
            .sample(&[], 1);
        scrape.gauge("demo_open", "Open.").signed(&[], -2);
        let histogram = Histogram::default();
        histogram.observe(1);
        histogram.observe(3);
        scrape.histogram("demo_seconds", "Latency.").histogram(
            &[("verb", "GET")],
            &histogram,
            1e-6,
        );
        scrape
    }

    /// Goal: requests recorded in any order read back per label set, in (verb, group,
    /// resource) order, with each code's count and every latency, as a map keyed by the
    /// whole label set would hold them.
    #[test]
    fn request_metrics_read_back_by_label_set_in_label_order() {
        let requests = [
            ("PATCH", "", "configmaps", 200, 5),
            ("GET", "apps", "deployments", 404, 1),
            ("PATCH", "", "configmaps", 409, 7),
            ("GET", "", "pods", 200, 2),
            ("PATCH", "", "configmaps", 200, 9),
            ("GET", "apps", "deployments", 200, 3),
            ("LIST", "", "configmaps", 200, 4),
        ];
        let metrics = RequestMetrics::default();
        // Counts by code, latencies' count and sum.
        type Read = (BTreeMap<u16, u64>, u64, u64);
        let mut expected: BTreeMap<[&str; 3], Read> = BTreeMap::new();
        for (verb, group, resource, code, micros) in requests {
            metrics.observe(verb, group, resource, code, micros);
            let series = expected.entry([verb, group, resource]).or_default();
            *series.0.entry(code).or_default() += 1;
            series.1 += 1;
            series.2 += micros;
        }
        let mut read = BTreeMap::new();
        let mut order = Vec::new();
        metrics.each(|labels, codes, latencies| {
            let (_, sum, count) = latencies.snapshot();
            order.push(labels.map(str::to_owned));
            read.insert(labels.map(str::to_owned), (codes.clone(), count, sum));
        });
        let mut sorted = order.clone();
        sorted.sort();
        assert_eq!(order, sorted);
        let expected: BTreeMap<_, _> = expected
            .into_iter()
            .map(|(labels, series)| (labels.map(str::to_owned), series))
            .collect();
        assert_eq!(read, expected);
    }

    #[test]
    fn prometheus_text_keeps_total_in_counter_families_and_has_no_eof() {
        let text = scrape().encode(Format::Prometheus);
        assert!(
            text.starts_with(
                "# HELP demo_requests_total Requests.\n# TYPE demo_requests_total counter\n\
             demo_requests_total{code=\"200\"} 3\ndemo_requests_total 1\n\
             # HELP demo_open Open.\n# TYPE demo_open gauge\ndemo_open -2\n\
             # HELP demo_seconds Latency.\n# TYPE demo_seconds histogram\n\
             demo_seconds_bucket{verb=\"GET\",le=\"1e-06\"} 1\n\
             demo_seconds_bucket{verb=\"GET\",le=\"2e-06\"} 1\n\
             demo_seconds_bucket{verb=\"GET\",le=\"4e-06\"} 2\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("demo_seconds_bucket{verb=\"GET\",le=\"+Inf\"} 2\n"),
            "{text}"
        );
        assert!(
            text.contains("demo_seconds_count{verb=\"GET\"} 2\n"),
            "{text}"
        );
        assert!(!text.contains("# EOF"), "{text}");
    }

    #[test]
    fn openmetrics_names_counter_families_without_total_and_ends_with_eof() {
        let text = scrape().encode(Format::OpenMetrics);
        assert!(text.contains("# TYPE demo_requests counter\n"), "{text}");
        assert!(
            text.contains("demo_requests_total{code=\"200\"} 3\n"),
            "{text}"
        );
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    #[test]
    fn accept_chooses_the_format() {
        let mut headers = HeaderMap::new();
        assert_eq!(Format::negotiate(&headers), Format::Prometheus);
        headers.insert(
            ACCEPT,
            "text/plain;version=0.0.4;q=0.5, application/openmetrics-text;version=1.0.0"
                .parse()
                .unwrap(),
        );
        assert_eq!(Format::negotiate(&headers), Format::OpenMetrics);
        headers.insert(ACCEPT, "text/plain".parse().unwrap());
        assert_eq!(Format::negotiate(&headers), Format::Prometheus);
    }
}

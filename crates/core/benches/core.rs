//! Microbenchmarks of the core's two hot paths, with 10,000 watchers:
//! - live dispatch: cost per event per synced watcher;
//! - catch-up: cost per event delivered by passes, when every watcher stalled together;
//!
//! and serializations per event on both paths.
//!
//! Run: `cargo bench -p watchkeeper-core --bench core` (add `-- --smoke` for a tiny run; `--
//! --encode sorted|ordered N` runs only N encodings of one object, for callgrind).
//! Each figure is the median of several runs; consumers drain outside the timed sections.
// A driver, not the core: it times the core with the wall clock (the core's clippy.toml forbids
// clocks in the core itself).
#![allow(clippy::disallowed_methods)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant as WallInstant};

use serde_json::json;
use watchkeeper_core::{
    CacheConfig, Change, Encoding, Instant, Object, Pop, Watch, WatchCache, WatchRequest,
    WatchStart,
};

fn pod(i: usize, revision: u64) -> Arc<Object> {
    let name = format!("pod-{i}");
    let mut labels = BTreeMap::new();
    labels.insert("app".to_owned(), "web".to_owned());
    Arc::new(Object::new(
        "default",
        &name,
        labels,
        BTreeMap::new(),
        revision,
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default", "labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}], "nodeName": "node-1"}, "status": {"phase": "Running"}}),
    ))
}

/// Drains every queue, encoding each item as a connection would. Returns items drained.
fn drain(watches: &[Watch], cache: &WatchCache) -> usize {
    let stats = &cache.metrics().encode;
    let mut n = 0;
    for w in watches {
        while let Pop::Item(item) = w.try_pop() {
            let _ = item.encoded(Encoding::Json, stats);
            n += 1;
        }
    }
    n
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

struct LiveResult {
    ns_per_event_per_watcher: f64,
    serializations_per_event: f64,
}

fn live(watchers: usize, events: usize) -> LiveResult {
    let (cache, mut dispatcher, _worker) =
        WatchCache::new(CacheConfig::default(), 1, Vec::new()).unwrap();
    let now = Instant::ZERO;
    let watches: Vec<Watch> = (0..watchers)
        .map(|_| {
            let mut request = WatchRequest::new(WatchStart::Now);
            request.queue_capacity = Some(1000);
            cache.watch(request, now)
        })
        .collect();
    dispatcher.handle_messages(now);
    let mut revision = 1;
    let mut timed = Duration::ZERO;
    let before = cache.metrics().encode.serializations();
    let batch = 100;
    for start in (0..events).step_by(batch) {
        let begin = WallInstant::now();
        for i in start..(start + batch).min(events) {
            revision += 1;
            dispatcher.handle_revision(now, revision, vec![Change::put(pod(i % 500, revision))]);
        }
        timed += begin.elapsed();
        drain(&watches, &cache);
    }
    assert_eq!(cache.metrics().stalled_watchers.get(), 0);
    LiveResult {
        ns_per_event_per_watcher: timed.as_nanos() as f64 / (events * watchers) as f64,
        serializations_per_event: (cache.metrics().encode.serializations() - before) as f64
            / events as f64,
    }
}

struct CatchUpResult {
    ns_per_deferred_event: f64,
    serializations_per_event: f64,
    passes: u64,
    interval_opens: u64,
    deferred: u64,
}

fn catch_up(watchers: usize, events: usize) -> CatchUpResult {
    let (cache, mut dispatcher, mut worker) =
        WatchCache::new(CacheConfig::default(), 1, Vec::new()).unwrap();
    let mut now = Instant::ZERO;
    let watches: Vec<Watch> = (0..watchers)
        .map(|_| {
            let mut request = WatchRequest::new(WatchStart::Now);
            request.queue_capacity = Some(10);
            cache.watch(request, now)
        })
        .collect();
    dispatcher.handle_messages(now);
    let mut revision = 1;
    for i in 0..events {
        revision += 1;
        dispatcher.handle_revision(now, revision, vec![Change::put(pod(i % 500, revision))]);
    }
    assert_eq!(cache.metrics().stalled_watchers.get() as usize, watchers);
    let before = cache.metrics().encode.serializations();
    drain(&watches, &cache);
    let mut timed = Duration::ZERO;
    let opens_before = cache.metrics().pass_interval_opens.get();
    let passes_before = cache.metrics().passes.get();
    while cache.metrics().stalled_watchers.get() > 0 {
        now = now + Duration::from_millis(10);
        let begin = WallInstant::now();
        let report = worker.run_pass(now);
        dispatcher.handle_messages(now);
        let elapsed = begin.elapsed();
        worker.record_pass_duration(elapsed);
        timed += elapsed;
        assert!(report.members > 0 || report.resynced > 0 || worker.unsynced_len() == 0);
        drain(&watches, &cache);
    }
    let deferred = cache.metrics().watcher_deferred_events.get();
    CatchUpResult {
        ns_per_deferred_event: timed.as_nanos() as f64 / deferred as f64,
        serializations_per_event: (cache.metrics().encode.serializations() - before) as f64
            / events as f64,
        passes: cache.metrics().passes.get() - passes_before,
        interval_opens: cache.metrics().pass_interval_opens.get() - opens_before,
        deferred,
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    // `--encode sorted|ordered N`: only N encodings (for an instruction count under callgrind).
    if let Some(at) = args.iter().position(|a| a == "--encode") {
        let n = args
            .get(at + 2)
            .and_then(|n| n.parse().ok())
            .unwrap_or(1000);
        encode_many(
            &deployment(),
            args.get(at + 1).is_some_and(|w| w == "ordered"),
            n,
        );
        return;
    }
    let smoke = args.iter().any(|a| a == "--smoke");
    let (watchers, events, runs) = if smoke {
        (200, 200, 1)
    } else {
        (10_000, 1_000, 5)
    };
    println!(
        "watchkeeper-core microbenchmarks: {watchers} watchers, {events} events, median of {runs} runs"
    );
    let mut live_ns = Vec::new();
    let mut live_ser = Vec::new();
    let mut cu_ns = Vec::new();
    let mut cu_ser = Vec::new();
    let mut last = None;
    for _ in 0..runs {
        let l = live(watchers, events);
        live_ns.push(l.ns_per_event_per_watcher);
        live_ser.push(l.serializations_per_event);
        let c = catch_up(watchers, events);
        cu_ns.push(c.ns_per_deferred_event);
        cu_ser.push(c.serializations_per_event);
        last = Some(c);
    }
    let last = last.unwrap();
    println!("| measurement | value |");
    println!("|---|---|");
    println!(
        "| live path, ns per event per synced watcher | {:.1} |",
        median(live_ns)
    );
    println!(
        "| live path, serializations per event | {:.3} |",
        median(live_ser)
    );
    println!(
        "| catch-up, ns per event delivered by passes | {:.1} |",
        median(cu_ns)
    );
    println!(
        "| catch-up, serializations per event | {:.3} |",
        median(cu_ser)
    );
    println!(
        "| catch-up, passes / interval opens / deferred events (last run) | {} / {} / {} |",
        last.passes, last.interval_opens, last.deferred
    );
    let (sorted, ordered) = encoding(20_000, runs.max(3));
    println!(
        "| encoding a Deployment-sized object, serde_json::to_vec (sorted keys), ns | {sorted:.0} |"
    );
    println!("| encoding the same object in Go field order (core::order), ns | {ordered:.0} |");
}

/// Nanoseconds per encoding of one realistic object (a Deployment with managed fields), with
/// serde_json's sorted writer and with the Go-order writer the cache uses: the median of
/// `runs` runs of `n` encodings each.
fn encoding(n: usize, runs: usize) -> (f64, f64) {
    let object = deployment();
    let mut sorted = Vec::new();
    let mut ordered = Vec::new();
    for _ in 0..runs {
        let start = WallInstant::now();
        encode_many(&object, false, n);
        sorted.push(start.elapsed().as_nanos() as f64 / n as f64);
        let start = WallInstant::now();
        encode_many(&object, true, n);
        ordered.push(start.elapsed().as_nanos() as f64 / n as f64);
    }
    (median(sorted), median(ordered))
}

/// Encodes `object` `n` times, in Go order or sorted.
fn encode_many(object: &serde_json::Value, go_order: bool, n: usize) {
    for _ in 0..n {
        if go_order {
            let mut out = Vec::with_capacity(128);
            watchkeeper_core::order::write_object(&mut out, std::hint::black_box(object));
            std::hint::black_box(out);
        } else {
            std::hint::black_box(serde_json::to_vec(std::hint::black_box(object)).unwrap());
        }
    }
}

fn deployment() -> serde_json::Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "uid": "6b1d6c2e-0000-4000-8000-000000000001",
            "resourceVersion": "12345", "generation": 3, "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"app": "web", "tier": "frontend"},
            "annotations": {"deployment.kubernetes.io/revision": "3"},
            "managedFields": [{"manager": "kubectl", "operation": "Update", "apiVersion": "apps/v1",
                "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {"f:replicas": {}, "f:template": {"f:spec": {"f:containers": {}}}}}}]},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx:1.27",
                    "ports": [{"containerPort": 80, "protocol": "TCP"}],
                    "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}],
                    "restartPolicy": "Always", "dnsPolicy": "ClusterFirst"}}},
        "status": {"replicas": 3, "readyReplicas": 3, "availableReplicas": 3, "observedGeneration": 3}
    })
}

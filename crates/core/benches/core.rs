//! Microbenchmarks of the core's two hot paths, with 10,000 watchers:
//! - live dispatch: cost per event per synced watcher;
//! - catch-up: cost per event delivered by passes, when every watcher stalled together;
//!
//! and serializations per event on both paths.
//!
//! Run: `cargo bench -p watchkeeper-core --bench core` (add `-- --smoke` for a tiny run).
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
    let smoke = std::env::args().any(|a| a == "--smoke");
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
}

//! A step/drive harness for the core: the real dispatcher and catch-up worker, a virtual clock,
//! and helpers to write objects and read watch queues. No wall clock anywhere.
#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use watchkeeper_core::{
    CacheConfig, CatchUpWorker, Change, Dispatcher, EventType, Instant, Object, PassReport, Pop,
    Revision, Watch, WatchCache, WatchEnd, WatchItem, WatchRequest, WatchStart, object_key,
};

pub struct Harness {
    pub cache: WatchCache,
    pub dispatcher: Dispatcher,
    pub worker: CatchUpWorker,
    pub now: Instant,
    pub revision: Revision,
    pub passes: Vec<PassReport>,
}

/// What a client saw, simplified for comparison.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seen {
    Event(EventType, String, Revision),
    Initial(String, Revision),
    Bookmark(Revision, bool),
}

pub fn pod(
    namespace: &str,
    name: &str,
    revision: Revision,
    labels: &[(&str, &str)],
    node: &str,
) -> Arc<Object> {
    let labels: BTreeMap<String, String> = labels
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let mut fields = BTreeMap::new();
    fields.insert("spec.nodeName".to_owned(), node.to_owned());
    Arc::new(Object::new(
        namespace,
        name,
        labels.clone(),
        fields,
        revision,
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace, "labels": labels}, "spec": {"nodeName": node}}),
    ))
}

impl Harness {
    pub fn new(config: CacheConfig) -> Harness {
        Harness::with_objects(config, 1, Vec::new())
    }

    pub fn with_objects(
        config: CacheConfig,
        revision: Revision,
        objects: Vec<Arc<Object>>,
    ) -> Harness {
        let (cache, dispatcher, worker) = WatchCache::new(config, revision, objects).unwrap();
        Harness {
            cache,
            dispatcher,
            worker,
            now: Instant::ZERO + Duration::from_secs(1),
            revision,
            passes: Vec::new(),
        }
    }

    /// Writes one revision of changes built by `build(revision)`.
    /// Legacy mode: a blocked dispatcher takes no input until its budget runs out (inputs
    /// queue before it); the harness lets that time pass.
    pub fn unblock(&mut self) {
        while self.dispatcher.is_blocked() {
            let until = self
                .dispatcher
                .poll_timeout()
                .expect("a blocked dispatcher has a deadline");
            self.advance(until.saturating_duration_since(self.now));
        }
    }

    pub fn write(&mut self, build: impl FnOnce(Revision) -> Vec<Change>) -> Revision {
        self.unblock();
        self.revision += 1;
        let changes = build(self.revision);
        self.dispatcher
            .handle_revision(self.now, self.revision, changes);
        // Hand-offs held by a pass arrive after this revision (as with threads, when the
        // dispatcher moves on between the worker's last scan and its message): the
        // dispatcher's resync then pushes the events dispatched since.
        self.worker.release_handoffs();
        self.check();
        self.revision
    }

    /// Holds the worker's hand-offs from each pass until the next write has been dispatched
    /// (or the next timer step), so the resync path that catches up on events dispatched
    /// after the worker's last scan runs.
    pub fn hold_handoffs(&mut self) {
        self.worker.set_hold_handoffs(true);
    }

    /// Checks both actors' invariants; panics with the broken one.
    pub fn check(&self) {
        if let Err(broken) = watchkeeper_core::check_invariants(&self.dispatcher, &self.worker) {
            panic!("invariant broken at {:?}: {broken}", self.now);
        }
    }

    pub fn put(
        &mut self,
        namespace: &str,
        name: &str,
        labels: &[(&str, &str)],
        node: &str,
    ) -> Revision {
        self.write(|rv| vec![Change::put(pod(namespace, name, rv, labels, node))])
    }

    pub fn delete(&mut self, namespace: &str, name: &str) -> Revision {
        let key = object_key(namespace, name);
        self.write(|_| vec![Change::delete(key)])
    }

    pub fn watch(&mut self, request: WatchRequest) -> Watch {
        self.unblock();
        let watch = self.cache.watch(request, self.now);
        self.dispatcher.handle_messages(self.now);
        self.check();
        watch
    }

    pub fn watch_from(&mut self, start: WatchStart, capacity: usize) -> Watch {
        let mut request = WatchRequest::new(start);
        request.queue_capacity = Some(capacity);
        self.watch(request)
    }

    /// Advances the clock and runs every due timer of both actors once.
    pub fn advance(&mut self, by: Duration) {
        self.now = self.now + by;
        self.dispatcher.handle_timeout(self.now);
        if let Some(report) = self.worker.handle_timeout(self.now) {
            check_report(&report);
            self.passes.push(report);
        }
        self.dispatcher.handle_messages(self.now);
        self.check();
    }

    /// Runs one pass now, then lets the dispatcher take the hand-offs.
    pub fn pass(&mut self) -> PassReport {
        self.dispatcher.handle_messages(self.now);
        self.worker.release_handoffs();
        let report = self.worker.run_pass(self.now);
        check_report(&report);
        self.dispatcher.handle_messages(self.now);
        self.check();
        self.passes.push(report.clone());
        report
    }

    /// Drains every queue given and runs passes until nobody is unsynced or `rounds` is spent.
    pub fn settle(&mut self, watches: &[&Watch], seen: &mut [Vec<Seen>], rounds: usize) {
        for _ in 0..rounds {
            for (watch, seen) in watches.iter().zip(seen.iter_mut()) {
                seen.extend(drain(watch));
            }
            if self.worker.poll_timeout().is_none()
                && !self.dispatcher.has_messages()
                && !self.dispatcher.is_blocked()
            {
                break;
            }
            self.advance(self.cache.config().pass_period_idle);
        }
        for (watch, seen) in watches.iter().zip(seen.iter_mut()) {
            seen.extend(drain(watch));
        }
    }
}

/// What a pass reports adds up (the simulator's and the benchmarks' tables read it): every
/// candidate with room was either served or waited, and the pass looked at every candidate and
/// every watcher it ended (its cost, `examined`, covers them).
pub fn check_report(report: &PassReport) {
    assert_eq!(
        report.members + report.waited,
        report.candidates,
        "a candidate neither served nor waiting: {report:?}"
    );
    assert_eq!(report.served.len(), report.members, "{report:?}");
    assert!(
        report.examined >= report.candidates + report.expired + report.ended,
        "ended or served without being examined: {report:?}"
    );
}

pub fn seen(item: &WatchItem) -> Seen {
    match item {
        WatchItem::Event { event_type, event } => {
            Seen::Event(*event_type, event.key().to_string(), event.revision())
        }
        WatchItem::Initial(object) => {
            Seen::Initial(object.key().to_string(), object.resource_version())
        }
        WatchItem::Bookmark {
            revision,
            initial_events_end,
        } => Seen::Bookmark(*revision, *initial_events_end),
    }
}

/// Pops everything queued now (not the end).
pub fn drain(watch: &Watch) -> Vec<Seen> {
    let mut out = Vec::new();
    while let Pop::Item(item) = watch.try_pop() {
        out.push(seen(&item));
    }
    out
}

/// Pops up to `n` items.
pub fn take(watch: &Watch, n: usize) -> Vec<Seen> {
    let mut out = Vec::new();
    while out.len() < n {
        match watch.try_pop() {
            Pop::Item(item) => out.push(seen(&item)),
            _ => break,
        }
    }
    out
}

/// The end, if every item has been popped and the watch ended.
pub fn end_of(watch: &Watch) -> Option<WatchEnd> {
    if !watch.queue().is_empty() {
        return None;
    }
    // The queue's own pop: `Watch::try_pop` would first let a consumer-driven watcher refill
    // its empty queue, and the item popped here would be lost.
    match watch.queue().try_pop() {
        Pop::End(end) => Some(end),
        _ => None,
    }
}

/// Only the events.
pub fn events(seen: &[Seen]) -> Vec<Seen> {
    seen.iter()
        .filter(|s| matches!(s, Seen::Event(..)))
        .cloned()
        .collect()
}

pub fn revisions(seen: &[Seen]) -> Vec<Revision> {
    seen.iter()
        .filter_map(|s| match s {
            Seen::Event(_, _, rv) => Some(*rv),
            _ => None,
        })
        .collect()
}

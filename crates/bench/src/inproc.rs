//! In-process suites: the core driven on threads exactly as the server drives it (the server's
//! own [`CacheDriver`]: dispatcher and catch-up worker on their own OS threads, wall clock),
//! with watch consumers on bench threads popping the queues as an HTTP body would (encoding
//! every item, up to 64 per pull). Table 1e runs suite 1's writer and healthy consumer as the
//! server runs its reflector and a watch response instead: tasks on a two-worker tokio
//! runtime, the consumer woken through a wake relay ([`Consumers::Tasks`]).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::Thread;
use std::time::{Duration, Instant};

use serde_json::json;
use watchkeeper::cache::wake_relay::{RelayWaker, WakeRelay};
use watchkeeper::cache::{CacheDriver, Clock, Input, InputSender};
use watchkeeper_core::{
    CacheConfig, Change, Encoding, Object, Pop, Revision, TerminationReason, Watch, WatchCache,
    WatchItem, WatchMode, WatchRequest, WatchStart,
};

use crate::report::{Table, f, x};
use crate::{Latency, Options, median};

/// A pod of about 1 KiB (like the references' 1 KiB values).
#[must_use]
pub fn pod(i: usize, revision: Revision) -> Arc<Object> {
    let name = format!("pod-{i}");
    let mut labels = BTreeMap::new();
    labels.insert("app".to_owned(), "web".to_owned());
    Arc::new(Object::new(
        "default",
        &name,
        labels,
        BTreeMap::new(),
        revision,
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": {"app": "web"},
                "annotations": {"bench/padding": "p".repeat(700)}},
            "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}], "nodeName": "node-1"},
            "status": {"phase": "Running"}}),
    ))
}

pub(crate) struct ThreadWaker(pub(crate) Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// A cache on the server's driver threads plus the bookkeeping of a timed write run.
pub(crate) struct Rig {
    pub(crate) driver: CacheDriver,
    pub(crate) cache: WatchCache,
    pub(crate) clock: Clock,
    /// Send time (nanos since `origin`) per revision.
    pub(crate) sent: Arc<Vec<AtomicU64>>,
    pub(crate) origin: Instant,
    /// The writer's largest delay behind its schedule, in nanoseconds: a writer thread that
    /// was descheduled sends the events it owes back to back (a burst).
    pub(crate) behind_max_ns: AtomicU64,
    /// Latencies are recorded only for revisions above this one (a warm-up is left out).
    pub(crate) measure_after: AtomicU64,
    /// Per revision: it went through the dispatcher's thread (not dispatched on the writer's).
    pub(crate) via_thread: Arc<Vec<AtomicBool>>,
    /// Per revision: when its send returned (nanos since `origin`).
    pub(crate) returned: Arc<Vec<AtomicU64>>,
}

impl Rig {
    pub(crate) fn new(mode: WatchMode, max_events: usize) -> Rig {
        Rig::with_config(
            CacheConfig {
                mode,
                ..CacheConfig::default()
            },
            max_events,
        )
    }

    pub(crate) fn with_config(config: CacheConfig, max_events: usize) -> Rig {
        let clock = Clock::new();
        let driver = CacheDriver::start("pods", config, clock).expect("driver");
        let cache = driver.cache.clone();
        Rig {
            driver,
            cache,
            clock,
            sent: Arc::new((0..max_events + 2).map(|_| AtomicU64::new(0)).collect()),
            origin: Instant::now(),
            behind_max_ns: AtomicU64::new(0),
            measure_after: AtomicU64::new(0),
            via_thread: Arc::new(
                (0..max_events + 2)
                    .map(|_| AtomicBool::new(false))
                    .collect(),
            ),
            returned: Arc::new((0..max_events + 2).map(|_| AtomicU64::new(0)).collect()),
        }
    }

    pub(crate) fn watch(&self, start: WatchStart, capacity: Option<usize>) -> Watch {
        let mut request = WatchRequest::new(start);
        request.allow_bookmarks = false;
        request.queue_capacity = capacity;
        self.cache.watch(request, self.clock.now())
    }

    /// Waits (bench code, not a test) until `n` watchers are synced.
    pub(crate) fn wait_synced(&self, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while (self.cache.metrics().synced_watchers.get() as usize) < n {
            assert!(Instant::now() < deadline, "watchers never registered");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Writes `events` revisions of one pod change each at `rate` per second (or as fast as
    /// possible with `rate` 0), recording send times. Returns the last revision.
    pub(crate) fn write(&self, events: usize, rate: f64) -> Revision {
        self.write_until(events, rate, &AtomicBool::new(false))
    }

    /// As [`Rig::write`], stopping early when `stop` is set; returns the last revision written.
    pub(crate) fn write_until(&self, events: usize, rate: f64, stop: &AtomicBool) -> Revision {
        self.write_after(0, events, rate, stop)
    }

    /// As [`Rig::write_until`], writing the revisions after `after`.
    pub(crate) fn write_after(
        &self,
        after: Revision,
        events: usize,
        rate: f64,
        stop: &AtomicBool,
    ) -> Revision {
        let input = self.driver.sender();
        let start = Instant::now();
        let first = after as usize;
        for i in first..first + events {
            if stop.load(Ordering::Acquire) {
                return i as Revision;
            }
            let revision = (i + 1) as Revision;
            if rate > 0.0 {
                let due = start + Duration::from_secs_f64((i - first) as f64 / rate);
                let now = Instant::now();
                if due > now {
                    std::thread::sleep(due - now);
                } else {
                    self.behind_max_ns
                        .fetch_max((now - due).as_nanos() as u64, Ordering::Relaxed);
                }
            }
            // Made when it is due, as the reflector decodes an event when it arrives: made
            // right after the previous send, it ran beside (or before) the consumer that send
            // woke (BENCHMARKS.md, invocation BS).
            self.send_one(&input, revision, pod(i % 1000, revision));
        }
        (first + events) as Revision
    }

    /// Sends one revision, recording its send time, when its `send` returned and whether the
    /// dispatcher's thread took it.
    fn send_one(&self, input: &InputSender, revision: Revision, object: Arc<Object>) {
        let r = revision as usize;
        self.sent[r].store(self.origin.elapsed().as_nanos() as u64, Ordering::Relaxed);
        let inline_before = self.driver.inline_steps();
        let _ = input.send(Input::Revision(revision, vec![Change::put(object)]));
        self.returned[r].store(self.origin.elapsed().as_nanos() as u64, Ordering::Relaxed);
        if self.driver.inline_steps() == inline_before {
            self.via_thread[r].store(true, Ordering::Relaxed);
        }
    }

    /// As [`Rig::write`], as a task on a tokio runtime (the server's reflector is one): it
    /// sleeps on the runtime's timer (millisecond ticks) until each revision's due time.
    async fn write_as_task(self: Arc<Self>, events: usize, rate: f64) -> Revision {
        let input = self.driver.sender();
        let start = tokio::time::Instant::now();
        for i in 0..events {
            let revision = (i + 1) as Revision;
            let due = start + Duration::from_secs_f64(i as f64 / rate);
            let now = tokio::time::Instant::now();
            if due > now {
                tokio::time::sleep_until(due).await;
            } else {
                self.behind_max_ns
                    .fetch_max((now - due).as_nanos() as u64, Ordering::Relaxed);
            }
            self.send_one(&input, revision, pod(i % 1000, revision));
        }
        events as Revision
    }

    pub(crate) fn latency_of(&self, revision: Revision) -> Option<u64> {
        if revision <= self.measure_after.load(Ordering::Relaxed) {
            return None;
        }
        let sent = self.sent.get(revision as usize)?.load(Ordering::Relaxed);
        (sent > 0).then(|| (self.origin.elapsed().as_nanos() as u64).saturating_sub(sent))
    }

    /// How long each measured revision's `send` took, read after the run: the consumer
    /// cannot read it, as it often pops a revision before the `send` that pushed it returns
    /// (until invocation BS it did, and counted those as 0).
    fn send_times(&self) -> Latency {
        let after = self.measure_after.load(Ordering::Relaxed) as usize;
        Latency::from_nanos(
            (after + 1..self.sent.len())
                .filter_map(|r| {
                    let sent = self.sent[r].load(Ordering::Relaxed);
                    let returned = self.returned[r].load(Ordering::Relaxed);
                    (sent > 0 && returned >= sent).then(|| returned - sent)
                })
                .collect(),
        )
    }

    pub(crate) fn terminations(&self) -> (u64, u64) {
        let metrics = self.cache.metrics();
        let force = metrics.terminations(TerminationReason::Unresponsive);
        let all = TerminationReason::ALL
            .iter()
            .filter(|r| **r != TerminationReason::Shutdown)
            .map(|r| metrics.terminations(*r))
            .sum();
        (force, all)
    }
}

/// Healthy consumers: one thread pops every healthy watch as an HTTP body would and records
/// each event's delivery latency, until every watch has seen `until` (or `stop` is set and a
/// grace period passed).
#[derive(Debug, Default)]
struct Consumed {
    latencies: Vec<u64>,
    /// The latencies of the revisions that went through the dispatcher's thread.
    latencies_via_thread: Vec<u64>,
    /// The latencies of the revisions written in the second half of the run (stalled-once
    /// companions reading).
    latencies_second_half: Vec<u64>,
    ended: usize,
    /// Times a healthy watch was seen unsynced (its own queue filled).
    unsynced_seen: u64,
    /// The most items one pull returned (a pull takes at most 64): how full the queue was
    /// when the consumer got to it.
    max_batch: usize,
}

impl Consumed {
    /// Encodes a popped item as the HTTP body does and records an event's latency; returns
    /// its revision.
    fn record(&mut self, rig: &Rig, item: &WatchItem) -> Option<Revision> {
        let _ = item.encoded(Encoding::Json, &rig.cache.metrics().encode);
        let WatchItem::Event { event, .. } = item else {
            return None;
        };
        if let Some(latency) = rig.latency_of(event.revision()) {
            let r = event.revision() as usize;
            self.latencies.push(latency);
            if rig.via_thread[r].load(Ordering::Relaxed) {
                self.latencies_via_thread.push(latency);
            }
            if r * 2 > rig.sent.len() {
                self.latencies_second_half.push(latency);
            }
        }
        Some(event.revision())
    }
}

fn consume_healthy(rig: &Rig, watches: &[Watch], until: &AtomicU64, stop: &AtomicBool) -> Consumed {
    let waker = Waker::from(Arc::new(ThreadWaker(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut out = Consumed::default();
    let mut last = vec![0 as Revision; watches.len()];
    let mut done = vec![false; watches.len()];
    let mut buffer = Vec::with_capacity(64);
    let mut stop_seen: Option<Instant> = None;
    loop {
        let mut progressed = false;
        for (i, watch) in watches.iter().enumerate() {
            if done[i] {
                continue;
            }
            loop {
                buffer.clear();
                match watch.poll_pop_many(&mut cx, 64, &mut buffer) {
                    Poll::Ready(end) => {
                        out.max_batch = out.max_batch.max(buffer.len());
                        for item in buffer.drain(..) {
                            if let Some(revision) = out.record(rig, &item) {
                                last[i] = revision;
                            }
                        }
                        progressed = true;
                        if end.is_some() {
                            done[i] = true;
                            out.ended += 1;
                            break;
                        }
                    }
                    Poll::Pending => break,
                }
            }
            if watch.state() == watchkeeper_core::WatcherState::Unsynced {
                out.unsynced_seen += 1;
            }
            let target = until.load(Ordering::Acquire);
            if target > 0 && last[i] >= target {
                done[i] = true;
            }
        }
        if done.iter().all(|d| *d) {
            return out;
        }
        if stop.load(Ordering::Acquire) {
            let since = *stop_seen.get_or_insert_with(Instant::now);
            if since.elapsed() > Duration::from_secs(10) {
                return out;
            }
        }
        if !progressed {
            std::thread::park_timeout(Duration::from_millis(5));
        }
    }
}

/// The healthy consumer as the server runs a watch response: a task on the runtime that pops
/// up to 64 items per poll with its waker registered behind the server's wake relay (as
/// `http::watch` does), until it has seen revision `last` or its stream ended.
async fn consume_healthy_as_task(
    rig: Arc<Rig>,
    watch: Arc<Watch>,
    relay: Arc<WakeRelay>,
    last: Revision,
) -> Consumed {
    let mut out = Consumed::default();
    let mut relay_waker: Option<RelayWaker> = None;
    let mut buffer = Vec::with_capacity(64);
    let mut seen: Revision = 0;
    loop {
        let end = std::future::poll_fn(|cx| {
            relay.wake_express();
            if !relay_waker.as_ref().is_some_and(|w| w.wakes(cx.waker())) {
                relay_waker = Some(relay.waker(cx.waker()));
            }
            let waker = relay_waker.as_ref().map_or(cx.waker(), RelayWaker::waker);
            buffer.clear();
            watch.poll_pop_many(&mut Context::from_waker(waker), 64, &mut buffer)
        })
        .await;
        out.max_batch = out.max_batch.max(buffer.len());
        for item in buffer.drain(..) {
            if let Some(revision) = out.record(&rig, &item) {
                seen = revision;
            }
        }
        if watch.state() == watchkeeper_core::WatcherState::Unsynced {
            out.unsynced_seen += 1;
        }
        if end.is_some() {
            out.ended += 1;
            return out;
        }
        if seen >= last {
            return out;
        }
    }
}

/// How table 1's writer and healthy consumer run (`--tax-consumers`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Consumers {
    /// OS threads: the writer's thread sends (dispatching inline), the consumer is a bench
    /// thread parked on the queue's waker (tables 1, 1c, 1d).
    Threads,
    /// As the server runs them: the writer is a task on a two-worker tokio runtime (the
    /// server's reflector is a task), the consumer a task registered behind a wake relay (a
    /// watch response), table 1e.
    Tasks,
}

impl Consumers {
    /// By their `--tax-consumers` names (`threads`, `tasks`).
    #[must_use]
    pub fn parse(name: &str) -> Option<Consumers> {
        match name {
            "threads" => Some(Consumers::Threads),
            "tasks" => Some(Consumers::Tasks),
            _ => None,
        }
    }

    pub(crate) fn chosen(options: &Options) -> Vec<Consumers> {
        if options.tax_consumers.is_empty() {
            vec![Consumers::Threads, Consumers::Tasks]
        } else {
            options.tax_consumers.clone()
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Consumers::Threads => "threads",
            Consumers::Tasks => "tasks",
        }
    }
}

/// How the slow companions behave.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pattern {
    /// Read nothing for the first half of the run, then read at full speed.
    StalledOnce,
    /// Read nothing; every 500 ms (staggered) drain what is queued, disconnect, and reconnect
    /// from the last revision seen.
    Reconnecting,
    /// Never read (the etcd reference's stalled watchers).
    Never,
}

impl Pattern {
    /// The table's patterns by their `--tax-patterns` names (`stalled-once`, `reconnecting`).
    #[must_use]
    pub fn parse(name: &str) -> Option<Pattern> {
        match name {
            "stalled-once" => Some(Pattern::StalledOnce),
            "reconnecting" => Some(Pattern::Reconnecting),
            _ => None,
        }
    }

    /// The patterns table 1 runs: `--tax-patterns`, else both.
    pub(crate) fn chosen(options: &Options) -> Vec<Pattern> {
        if options.tax_patterns.is_empty() {
            vec![Pattern::StalledOnce, Pattern::Reconnecting]
        } else {
            options.tax_patterns.clone()
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Pattern::StalledOnce => "stalled once",
            Pattern::Reconnecting => "stall + reconnect every 500 ms",
            Pattern::Never => "never reading",
        }
    }
}

fn drain_all(watch: &Watch, stats: &watchkeeper_core::EncodeStats, last: &mut Revision) -> bool {
    loop {
        match watch.try_pop() {
            Pop::Item(item) => {
                let _ = item.encoded(Encoding::Json, stats);
                if let WatchItem::Event { event, .. } = &item {
                    *last = event.revision();
                }
            }
            Pop::Empty => return false,
            Pop::End(_) => return true,
        }
    }
}

/// Drives the slow companions until `stop`.
fn run_slow(rig: &Rig, mut slow: Vec<Watch>, pattern: Pattern, secs: f64, stop: &AtomicBool) {
    let stats = &rig.cache.metrics().encode;
    let start = Instant::now();
    let n = slow.len().max(1);
    let mut last = vec![0 as Revision; slow.len()];
    let period = Duration::from_millis(500);
    let mut next: Vec<Instant> = (0..slow.len())
        .map(|i| start + period.mul_f64(i as f64 / n as f64) + period)
        .collect();
    while !stop.load(Ordering::Acquire) {
        let now = Instant::now();
        match pattern {
            Pattern::StalledOnce => {
                if now.duration_since(start).as_secs_f64() >= secs / 2.0 {
                    for (i, watch) in slow.iter_mut().enumerate() {
                        if drain_all(watch, stats, &mut last[i]) {
                            // Ended (legacy force-close): reconnect from the last event seen.
                            *watch = rig.watch(WatchStart::After(last[i]), None);
                        }
                    }
                }
            }
            Pattern::Never => {}
            Pattern::Reconnecting => {
                for (i, watch) in slow.iter_mut().enumerate() {
                    if now >= next[i] {
                        let _ = drain_all(watch, stats, &mut last[i]);
                        let start_at = if last[i] == 0 {
                            WatchStart::Now
                        } else {
                            WatchStart::After(last[i])
                        };
                        *watch = rig.watch(start_at, None);
                        next[i] += period;
                    }
                }
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// One slow-watcher-tax run's result.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct TaxRun {
    /// The healthy watcher's delivery latency.
    pub latency: Latency,
    /// The same for the revisions that went through the dispatcher's thread (the others
    /// were dispatched on the writer's; see `--driver-inline-watchers-max`).
    pub latency_via_thread: Latency,
    /// The same for the revisions written in the run's second half (stalled-once companions
    /// reading at full speed then; reconnecting ones as in the first half).
    pub latency_second_half: Latency,
    /// How long the writer's `send` of a measured revision took: its dispatch step when it
    /// was dispatched on the writer's thread, the channel send otherwise (in-process only).
    pub send: Latency,
    /// Legacy force-closes (`unresponsive`).
    pub force_closes: u64,
    /// Every termination except shutdown.
    pub terminations: u64,
    /// Synced → unsynced transitions.
    pub stalls: u64,
    /// Events written.
    pub events: usize,
    /// Whether the healthy watcher's own stream ended.
    pub healthy_ended: bool,
    /// Consumer loop iterations that found the healthy watcher unsynced (in-process only).
    pub healthy_unsynced_seen: u64,
    /// The healthy watcher's queue capacity (in-process only; 0 over HTTP).
    pub healthy_capacity: usize,
    /// The most items one pull of the healthy consumer returned (in-process only).
    pub healthy_max_batch: usize,
    /// The writer's largest delay behind its schedule, in µs (in-process only): it then sent
    /// the events it owed back to back.
    pub writer_max_behind_us: f64,
}

/// One in-process slow-watcher-tax run; `healthy_capacity` overrides the healthy watcher's
/// queue capacity (`None`: sized like Kubernetes from the history capacity, 10 on a new cache).
#[must_use]
pub fn tax_run(
    mode: WatchMode,
    pattern: Pattern,
    consumers: Consumers,
    slow: usize,
    rate: f64,
    secs: f64,
    healthy_capacity: Option<usize>,
) -> TaxRun {
    let events = (rate * secs) as usize;
    let rig = Arc::new(Rig::new(mode, events));
    let healthy = Arc::new(rig.watch(WatchStart::Now, healthy_capacity));
    let capacity = healthy.queue().capacity();
    let slow_watches: Vec<Watch> = (0..slow)
        .map(|_| rig.watch(WatchStart::Now, None))
        .collect();
    rig.wait_synced(1 + slow);
    let slow_stop = AtomicBool::new(false);
    let until = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let consumed = std::thread::scope(|scope| {
        let slow_thread = scope.spawn(|| run_slow(&rig, slow_watches, pattern, secs, &slow_stop));
        let consumed = match consumers {
            Consumers::Threads => {
                let consumer = scope.spawn(|| {
                    consume_healthy(&rig, std::slice::from_ref(&*healthy), &until, &stop)
                });
                let last = rig.write(events, rate);
                until.store(last, Ordering::Release);
                stop.store(true, Ordering::Release);
                consumer.join().expect("consumer")
            }
            Consumers::Tasks => {
                // The server's runtime: two workers, one per CPU of the machines measured here.
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .expect("runtime");
                let consumed = runtime.block_on(async {
                    let relay = Arc::new(WakeRelay::start());
                    let consumer = tokio::spawn(consume_healthy_as_task(
                        rig.clone(),
                        healthy.clone(),
                        relay,
                        events as Revision,
                    ));
                    let last = tokio::spawn(rig.clone().write_as_task(events, rate))
                        .await
                        .expect("writer task");
                    // Bench code, not a test: a consumer that never sees the last revision
                    // is a broken run, not a figure.
                    tokio::time::timeout(Duration::from_secs(60), consumer)
                        .await
                        .unwrap_or_else(|_| panic!("the healthy task never saw revision {last}"))
                        .expect("consumer task")
                });
                runtime.shutdown_timeout(Duration::from_secs(5));
                consumed
            }
        };
        slow_stop.store(true, Ordering::Release);
        slow_thread.join().expect("slow companions");
        consumed
    });
    let (force_closes, terminations) = rig.terminations();
    TaxRun {
        latency: Latency::from_nanos(consumed.latencies),
        latency_via_thread: Latency::from_nanos(consumed.latencies_via_thread),
        latency_second_half: Latency::from_nanos(consumed.latencies_second_half),
        send: rig.send_times(),
        force_closes,
        terminations,
        stalls: rig.cache.metrics().watcher_stalls.get(),
        events,
        healthy_ended: consumed.ended > 0,
        healthy_unsynced_seen: consumed.unsynced_seen,
        healthy_capacity: capacity,
        healthy_max_batch: consumed.max_batch,
        writer_max_behind_us: rig.behind_max_ns.load(Ordering::Relaxed) as f64 / 1000.0,
    }
}

/// The machine's floor for table 1's path, without the cache. With `via_thread`, a writer
/// thread hands a timestamp, at the same due times as `Rig::write`, through the
/// dispatcher's channel type (flume) to a thread blocked on it (the dispatcher's thread),
/// which queues it under a lock and wakes a consumer thread parked as table 1's healthy
/// consumer is (the waker unparks it): two thread wake-ups, the path of a revision the
/// dispatcher's thread handles. Without, the writer queues it and wakes the consumer itself:
/// one wake-up, the path of a revision dispatched on its sender's thread (a small idle cache,
/// `--driver-inline-watchers-max`). Their tail is the machine's (the hypervisor's scheduling
/// of its virtual CPUs), not watchkeeper's.
#[must_use]
pub fn handoff_floor_run(rate: f64, secs: f64, via_thread: bool) -> Latency {
    let events = (rate * secs) as usize;
    let (tx, rx) = flume::bounded::<Instant>(1024);
    let queue = std::sync::Mutex::new((std::collections::VecDeque::new(), None::<Waker>));
    let push = |sent: Instant| {
        let waker = {
            let mut q = queue.lock().unwrap_or_else(|e| e.into_inner());
            q.0.push_back(sent);
            q.1.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    };
    let latencies = std::thread::scope(|scope| {
        scope.spawn(|| {
            while let Ok(sent) = rx.recv() {
                push(sent);
            }
        });
        let consumer = scope.spawn(|| {
            let waker = Waker::from(Arc::new(ThreadWaker(std::thread::current())));
            let mut latencies = Vec::with_capacity(events);
            let mut taken = Vec::new();
            while latencies.len() < events {
                {
                    let mut q = queue.lock().unwrap_or_else(|e| e.into_inner());
                    if q.0.is_empty() {
                        q.1 = Some(waker.clone());
                    } else {
                        taken.extend(q.0.drain(..));
                    }
                }
                if taken.is_empty() {
                    std::thread::park_timeout(Duration::from_millis(5));
                    continue;
                }
                for sent in taken.drain(..) {
                    latencies.push(sent.elapsed().as_nanos() as u64);
                }
            }
            latencies
        });
        let start = Instant::now();
        for i in 0..events {
            let due = start + Duration::from_secs_f64(i as f64 / rate);
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
            if via_thread {
                let _ = tx.send(Instant::now());
            } else {
                push(Instant::now());
            }
        }
        drop(tx);
        consumer.join().expect("floor consumer")
    });
    Latency::from_nanos(latencies)
}

/// Sizes of the tax suites.
pub(crate) fn tax_sizes(options: &Options) -> (Vec<f64>, usize, f64) {
    let (rates, companions, secs) = if options.smoke {
        (vec![100.0], options.tax_companions.unwrap_or(5), 0.6)
    } else {
        (
            vec![100.0, 1000.0],
            options.tax_companions.unwrap_or(100),
            10.0,
        )
    };
    let rates = if options.tax_rates.is_empty() {
        rates
    } else {
        options.tax_rates.clone()
    };
    (rates, companions, secs)
}

/// Formats one tax table from runs keyed by (pattern, rate) → (stall-resume runs, legacy runs).
pub(crate) fn tax_table(suite: &str, title: &str, results: &[TaxResults]) -> Table {
    let mut table = Table::new(
        suite,
        title,
        &[
            "companions",
            "events/s",
            "mode",
            "healthy p50 µs",
            "p99 µs",
            "max µs",
            "stalls",
            "runs where the healthy watcher went unsynced",
            "revisions through the dispatcher's thread",
            "force-closes",
            "terminations",
            "legacy/stall-resume p99",
        ],
    );
    for (pattern, rate, resume, legacy) in results {
        let ratios: Vec<f64> = resume
            .iter()
            .zip(legacy)
            .map(|(a, b)| b.latency.p99 / a.latency.p99)
            .collect();
        for (mode, runs) in [("stall-resume", resume), ("legacy", legacy)] {
            let med = |g: &dyn Fn(&TaxRun) -> f64| median(&runs.iter().map(g).collect::<Vec<_>>());
            table.row(vec![
                pattern.as_str().to_owned(),
                f(*rate, 0),
                mode.to_owned(),
                f(med(&|r| r.latency.p50), 0),
                f(med(&|r| r.latency.p99), 0),
                f(med(&|r| r.latency.max), 0),
                f(med(&|r| r.stalls as f64), 0),
                format!(
                    "{}/{}",
                    runs.iter().filter(|r| r.healthy_unsynced_seen > 0).count(),
                    runs.len()
                ),
                if runs.iter().all(|r| r.send.count == 0) {
                    "n/a".to_owned()
                } else {
                    format!(
                        "{} %",
                        f(
                            med(&|r| 100.0 * r.latency_via_thread.count as f64
                                / r.latency.count.max(1) as f64),
                            1
                        )
                    )
                },
                f(med(&|r| r.force_closes as f64), 0),
                f(med(&|r| r.terminations as f64), 0),
                if mode == "legacy" {
                    x(median(&ratios))
                } else {
                    String::new()
                },
            ]);
            for run in runs {
                table.raw(
                    json!({"pattern": pattern.as_str(), "rate": rate, "mode": mode, "run": run}),
                );
            }
        }
    }
    table
}

/// Suite `tax`: one healthy watcher next to N slow companions, stall-resume vs legacy,
/// in-process.
///
/// # Errors
/// Never (kept for symmetry with the other suites).
pub fn tax(options: &Options) -> Result<Vec<Table>, String> {
    let (rates, slow, secs) = tax_sizes(options);
    // Held over every table of the suite (1, 1c, 1d, 1e): the floor is measured under the
    // same load.
    let busy = options.busy_nice.map(crate::sys::BusyLoad::start);
    let chosen = Consumers::chosen(options);
    let mut results: BTreeMap<&str, Vec<TaxResults>> = BTreeMap::new();
    let mut floors: BTreeMap<u64, Vec<(Latency, Latency)>> = BTreeMap::new();
    for pattern in Pattern::chosen(options) {
        for &rate in &rates {
            let mut runs: BTreeMap<&str, (Vec<TaxRun>, Vec<TaxRun>)> = BTreeMap::new();
            for run in 0..options.runs {
                for &consumers in &chosen {
                    for mode in [WatchMode::StallResume, WatchMode::Legacy] {
                        let result = tax_run(mode, pattern, consumers, slow, rate, secs, None);
                        eprintln!(
                            "  tax {} {rate}/s {} {} run {run}: p50 {:.0} p99 {:.0} max {:.0} µs ({} of {} through the dispatcher's thread: p50 {:.0} p99 {:.0} µs; second half p50 {:.0} p99 {:.0} µs; the writer's send p50 {:.0} p99 {:.0} µs), force-closes {}, terminations {}, healthy unsynced seen {}, max pull {}, writer behind ≤ {:.0} µs",
                            pattern.as_str(),
                            consumers.as_str(),
                            mode.as_str(),
                            result.latency.p50,
                            result.latency.p99,
                            result.latency.max,
                            result.latency_via_thread.count,
                            result.latency.count,
                            result.latency_via_thread.p50,
                            result.latency_via_thread.p99,
                            result.latency_second_half.p50,
                            result.latency_second_half.p99,
                            result.send.p50,
                            result.send.p99,
                            result.force_closes,
                            result.terminations,
                            result.healthy_unsynced_seen,
                            result.healthy_max_batch,
                            result.writer_max_behind_us,
                        );
                        let entry = runs.entry(consumers.as_str()).or_default();
                        match mode {
                            WatchMode::StallResume => entry.0.push(result),
                            WatchMode::Legacy => entry.1.push(result),
                        }
                    }
                }
                if pattern == Pattern::StalledOnce && chosen.contains(&Consumers::Threads) {
                    let floor = handoff_floor_run(rate, secs, true);
                    let inline = handoff_floor_run(rate, secs, false);
                    eprintln!(
                        "  tax hand-off floor {rate}/s run {run}: two wake-ups p50 {:.0} p99 {:.0} max {:.0} µs, one p50 {:.0} p99 {:.0} max {:.0} µs",
                        floor.p50, floor.p99, floor.max, inline.p50, inline.p99, inline.max
                    );
                    floors
                        .entry(rate.to_bits())
                        .or_default()
                        .push((floor, inline));
                }
            }
            for (consumers, (resume, legacy)) in runs {
                results
                    .entry(consumers)
                    .or_default()
                    .push((pattern, rate, resume, legacy));
            }
        }
    }
    let load = crate::sys::busy_title(busy.as_ref());
    let mut tables = Vec::new();
    if let Some(threads) = results.get(Consumers::Threads.as_str()) {
        let mut table = tax_table(
            "tax",
            &format!(
                "1. Slow watcher tax, in-process: 1 healthy watcher + {slow} slow companions, {secs} s per run{load}"
            ),
            threads,
        );
        table.note("The core runs on the server's own driver threads (dispatcher and catch-up worker on OS threads, wall clock); consumers pop up to 64 items per pull and encode each, as the HTTP body does.");
        table.note("Latency: from the writer handing the revision to the dispatcher's channel to the healthy consumer popping it.");
        table.note(PATTERNS_NOTE);
        table.note("The healthy watcher has a Kubernetes-sized queue too (10 events at first): when its consumer thread is descheduled for longer than the queue covers, it stalls itself and is served by catch-up passes alongside the companions; the column counts the runs where the consumer saw it unsynced (n/a over HTTP: always 0/N there).");
        table.note(VIA_THREAD_NOTE);
        table.note("Stalls: synced → unsynced transitions (the core's `watcher_stalls`); in legacy mode a full queue blocks dispatch on the shared budget instead.");
        table.note("Queues are sized like Kubernetes (from the history capacity; 10 at first). Legacy mode: Kubernetes' pre-KEP dispatch budget and force-close (`unresponsive`); a force-closed companion reconnects from its last revision.");
        tables.push(table);
        // Tables 1c and 1d go with the stalled-once runs (1c is their set-up at 1,000/s, 1d
        // is measured between them): a run of the reconnecting pattern alone leaves them out.
        if Pattern::chosen(options).contains(&Pattern::StalledOnce) {
            tables.push(healthy_queue_table(options, slow, secs));
            tables.push(floor_table(&rates, secs, &floors, threads));
        }
    }
    if let Some(tasks) = results.get(Consumers::Tasks.as_str()) {
        let mut table = tax_table(
            "tax",
            &format!(
                "1e. Slow watcher tax, in-process, writer and healthy consumer as the server runs them (tasks on a 2-worker runtime): 1 healthy watcher + {slow} slow companions, {secs} s per run, interleaved with table 1's runs{load}"
            ),
            tasks,
        );
        table.note("Table 1's runs with the writer and the healthy consumer as the server runs its reflector and a watch response: the writer is a task on a two-worker tokio runtime sleeping on the runtime's timer until each due time (its `send` dispatches inline as the reflector's does), the consumer a task on the same runtime polling the queue with its waker behind a wake relay (`cache::wake_relay`, as `http::watch` registers it), popping up to 64 items per poll and encoding each. A consumer woken by an inline step on a worker goes to that worker's own queue and runs when the writer's poll returns, with no thread wake-up; one woken from the dispatcher's or the catch-up thread is injected from outside and may wake a parked worker. The companions and the core's threads are table 1's.");
        table.note("Latency: from the writer handing the revision to the dispatcher's channel to the healthy consumer popping it. Kubernetes' own benchmark of the same tax (the KEP's, `< 100 µs` with the gate on) measures goroutines, which Go's scheduler also runs first on the processor that woke them (its `runnext` slot).");
        table.note(PATTERNS_NOTE);
        table.note(VIA_THREAD_NOTE);
        tables.push(table);
    }
    Ok(tables)
}

/// One (pattern, rate)'s stall-resume and legacy runs.
pub(crate) type TaxResults = (Pattern, f64, Vec<TaxRun>, Vec<TaxRun>);

const PATTERNS_NOTE: &str = "Stalled once: companions read nothing for the first half of the run, then read at full speed. Reconnecting: companions read nothing; every 500 ms each (staggered) drains its queue, drops its watch and re-watches from the last revision it saw (resourceVersion=N).";

const VIA_THREAD_NOTE: &str = "Revisions through the dispatcher's thread: the share of the healthy watcher's measured revisions the writer's `send` handed to the dispatcher's thread (two thread wake-ups to the consumer) instead of dispatching them itself (one; `--driver-inline-watchers-max`): with something queued for the thread (a registration, a companion's hand-off) or its lock held. The raw figures split the latency by path and give the writer's `send` time (the inline dispatch step included).";

/// Table 1d: the machine's floor for table 1's thread hand-offs (two through the dispatcher's
/// thread, one for a revision dispatched on its sender's thread) beside stall-resume's healthy
/// latency (see [`handoff_floor_run`]).
fn floor_table(
    rates: &[f64],
    secs: f64,
    floors: &BTreeMap<u64, Vec<(Latency, Latency)>>,
    results: &[TaxResults],
) -> Table {
    let mut table = Table::new(
        "tax",
        &format!(
            "1d. The machine's floor for the same thread hand-offs, without the cache, {secs} s per run, interleaved with table 1's stalled-once runs"
        ),
        &[
            "events/s",
            "floor p50 µs, two wake-ups / one",
            "floor p99 µs, two wake-ups / one",
            "floor max µs, two wake-ups / one",
            "stall-resume p99 µs, stalled once / reconnecting",
            "stall-resume p99 − floor p99, µs, stalled once / reconnecting",
        ],
    );
    for &rate in rates {
        let runs = floors.get(&rate.to_bits()).map_or(&[][..], Vec::as_slice);
        let med = |g: &dyn Fn(&Latency) -> f64| {
            median(&runs.iter().map(|(two, _)| g(two)).collect::<Vec<_>>())
        };
        let med_one = |g: &dyn Fn(&Latency) -> f64| {
            median(&runs.iter().map(|(_, one)| g(one)).collect::<Vec<_>>())
        };
        let both = |g: &dyn Fn(&Latency) -> f64| format!("{} / {}", f(med(g), 0), f(med_one(g), 0));
        let resume_p99 = |pattern: Pattern| {
            results
                .iter()
                .find(|(p, r, _, _)| *p == pattern && *r == rate)
                .map_or(0.0, |(_, _, resume, _)| {
                    median(&resume.iter().map(|r| r.latency.p99).collect::<Vec<_>>())
                })
        };
        let (once, reconnecting) = (
            resume_p99(Pattern::StalledOnce),
            resume_p99(Pattern::Reconnecting),
        );
        let floor_p99 = med(&|l| l.p99);
        table.row(vec![
            f(rate, 0),
            both(&|l| l.p50),
            both(&|l| l.p99),
            both(&|l| l.max),
            format!("{} / {}", f(once, 0), f(reconnecting, 0)),
            format!(
                "{} / {}",
                f(once - floor_p99, 0),
                f(reconnecting - floor_p99, 0)
            ),
        ]);
        for (two, one) in runs {
            table.raw(json!({"rate": rate, "floor": two, "floor_one_wakeup": one}));
        }
    }
    table.note("Floor: a writer thread sends a timestamp at each due time through a flume channel (the dispatcher's input channel type) to a thread blocked on it, which queues it under a lock and wakes a consumer thread parked like table 1's healthy consumer. No cache, no companions: the latency every table 1 delivery pays for its two thread wake-ups on this machine. One wake-up: the writer queues the timestamp and wakes the consumer itself, the path of a revision a small idle cache dispatches on its sender's thread (`--driver-inline-watchers-max`; table 1's healthy watcher and its 100 companions are under it, so most of its revisions take that path). The difference column subtracts the two-wake-up floor. Medians over the runs.");
    table
}

/// Table 1c: why the healthy watcher goes unsynced at 1,000 events/s, and what its queue
/// should hold. Stall-resume, stalled-once companions, runs interleaved over capacities.
fn healthy_queue_table(options: &Options, slow: usize, secs: f64) -> Table {
    let rate = if options.smoke { 200.0 } else { 1000.0 };
    let capacities: [Option<usize>; 3] = [None, Some(100), Some(1000)];
    let mut runs: Vec<Vec<TaxRun>> = vec![Vec::new(); capacities.len()];
    for run in 0..options.runs {
        for (i, capacity) in capacities.iter().enumerate() {
            let result = tax_run(
                WatchMode::StallResume,
                Pattern::StalledOnce,
                Consumers::Threads,
                slow,
                rate,
                secs,
                *capacity,
            );
            eprintln!(
                "  tax healthy queue {} run {run}: p99 {:.0} max {:.0} µs, unsynced seen {}, max pull {}, writer behind ≤ {:.0} µs",
                result.healthy_capacity,
                result.latency.p99,
                result.latency.max,
                result.healthy_unsynced_seen,
                result.healthy_max_batch,
                result.writer_max_behind_us
            );
            runs[i].push(result);
        }
    }
    let mut table = Table::new(
        "tax",
        &format!(
            "1c. The healthy watcher's own queue, in-process: {slow} stalled-once companions, {rate} events/s, stall-resume, {secs} s per run"
        ),
        &[
            "healthy queue, events",
            "runs where it went unsynced",
            "p50 µs",
            "p99 µs",
            "max µs",
            "largest pull (items queued when the consumer got there), median / max",
            "writer's largest delay behind schedule, ms, median / max",
        ],
    );
    for (i, capacity) in capacities.iter().enumerate() {
        let rs = &runs[i];
        let med = |g: &dyn Fn(&TaxRun) -> f64| median(&rs.iter().map(g).collect::<Vec<_>>());
        let max = |g: &dyn Fn(&TaxRun) -> f64| rs.iter().map(g).fold(0.0, f64::max);
        let label = match capacity {
            None => format!(
                "{} (Kubernetes-sized on a new cache)",
                rs.first().map_or(0, |r| r.healthy_capacity)
            ),
            Some(c) => c.to_string(),
        };
        table.row(vec![
            label,
            format!(
                "{}/{}",
                rs.iter().filter(|r| r.healthy_unsynced_seen > 0).count(),
                rs.len()
            ),
            f(med(&|r| r.latency.p50), 0),
            f(med(&|r| r.latency.p99), 0),
            f(med(&|r| r.latency.max), 0),
            format!(
                "{} / {}",
                f(med(&|r| r.healthy_max_batch as f64), 0),
                f(max(&|r| r.healthy_max_batch as f64), 0)
            ),
            format!(
                "{} / {}",
                f(med(&|r| r.writer_max_behind_us / 1000.0), 1),
                f(max(&|r| r.writer_max_behind_us / 1000.0), 1)
            ),
        ]);
        for run in rs {
            table.raw(json!({"capacity": capacity, "run": run}));
        }
    }
    table.note("Same run as table 1 (stalled-once, stall-resume) with the healthy watcher's queue fixed at registration. A new cache's history holds 100 events, so Kubernetes' rule clamp(ceil(history / 75 s), 10, 1000) gives 10; on a cache that has seen this rate for 75 s the same rule gives about one second of events (1,000 at 1,000/s).");
    table.note("Largest pull: the consumer pops up to 64 items per pull, so a pull of 10 from a 10-event queue means the queue was full when the consumer got there. Writer delay: the writer thread sleeps until each event's due time; when it wakes late it sends the events it owes back to back, a burst the dispatcher pushes in microseconds, faster than a woken consumer thread gets scheduled.");
    table
}

/// One population run's figures.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct PopulationRun {
    /// Healthy latency over the measured writes (after the population went unsynced).
    latency: Latency,
    /// Healthy latency over the warm-up writes (while the population filled its queues and
    /// stalled).
    warm_up: Latency,
    /// Milliseconds from the first warm-up write until all N were unsynced and a catch-up
    /// pass had adopted them.
    stall_ms: f64,
    /// Terminations (every reason but shutdown).
    terminations: u64,
    /// The machine's own scheduling delays over the measured writes.
    machine: crate::sys::Jitter,
    /// CPU milliseconds of the dispatcher thread over the measured writes.
    dispatcher_cpu_ms: f64,
    /// CPU milliseconds of the catch-up worker thread over the measured writes.
    worker_cpu_ms: f64,
    /// Catch-up passes run over the measured writes.
    passes: u64,
    /// The process's page faults, context switches, allocator system calls and TLB flushes
    /// over the measured writes.
    counts: crate::sys::Counts,
}

/// How the allocator of a population run's process is set up (`--population-malloc`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MallocMode {
    /// glibc's defaults: the trim and mmap thresholds adjust themselves, a free that leaves
    /// more than the trim threshold at the heap's top returns it to the kernel, and a large
    /// allocation is its own mapping (unmapped when freed).
    Glibc,
    /// glibc with the heap's top never trimmed and allocations up to 32 MiB (glibc's largest
    /// mmap threshold) taken from the heap: freed memory stays with the process.
    NoTrim,
}

impl MallocMode {
    /// Parses `glibc` or `no-trim`.
    #[must_use]
    pub fn parse(name: &str) -> Option<MallocMode> {
        match name {
            "glibc" => Some(MallocMode::Glibc),
            "no-trim" => Some(MallocMode::NoTrim),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            MallocMode::Glibc => "glibc",
            MallocMode::NoTrim => "no-trim",
        }
    }

    /// The `GLIBC_TUNABLES` value of the mode; `None`: the environment as it is.
    fn tunables(self) -> Option<&'static str> {
        match self {
            MallocMode::Glibc => None,
            MallocMode::NoTrim => {
                Some("glibc.malloc.trim_threshold=4294967295:glibc.malloc.mmap_threshold=33554432")
            }
        }
    }
}

/// One population run: `stalled` never-reading watchers register next to `healthy` reading
/// ones; a warm-up of twice a queue's capacity in writes fills their queues and stalls them
/// (timed, its healthy latencies kept apart); once every one is unsynced and a catch-up pass
/// has adopted them, `rate * secs` measured writes.
fn population_run(healthy: usize, stalled: usize, rate: f64, secs: f64) -> PopulationRun {
    let events = (rate * secs) as usize;
    // Room for the warm-up: at most twice the largest queue capacity.
    let rig = Rig::new(WatchMode::StallResume, events + 2 * 1_000);
    let healthy_watches: Vec<Watch> = (0..healthy)
        .map(|_| rig.watch(WatchStart::Now, None))
        .collect();
    let stalled_watches: Vec<Watch> = (0..stalled)
        .map(|_| rig.watch(WatchStart::Now, None))
        .collect();
    rig.wait_synced(healthy + stalled);
    let capacity = healthy_watches.first().map_or(10, |w| w.queue().capacity());
    let warm_up = 2 * capacity;
    let metrics = rig.cache.metrics();
    let started = Instant::now();
    let phase = |after: Revision, count: usize| -> (Latency, Revision) {
        let until = AtomicU64::new(0);
        let stop = AtomicBool::new(false);
        let (last, consumed) = std::thread::scope(|scope| {
            let consumer = scope.spawn(|| consume_healthy(&rig, &healthy_watches, &until, &stop));
            let last = rig.write_after(after, count, rate, &AtomicBool::new(false));
            until.store(last, Ordering::Release);
            stop.store(true, Ordering::Release);
            (last, consumer.join().expect("consumer"))
        });
        (Latency::from_nanos(consumed.latencies), last)
    };
    let (warm, last) = phase(0, warm_up);
    // Bench code, not a test: poll until the population is unsynced and adopted.
    let deadline = Instant::now() + Duration::from_secs(120);
    while (metrics.stalled_watchers.get() as usize) < stalled {
        assert!(Instant::now() < deadline, "the population never stalled");
        std::thread::sleep(Duration::from_micros(200));
    }
    let passes = metrics.passes.get();
    while stalled > 0 && metrics.passes.get() < passes + 2 {
        assert!(Instant::now() < deadline, "no catch-up pass ran");
        std::thread::sleep(Duration::from_micros(200));
    }
    let stall_ms = started.elapsed().as_secs_f64() * 1000.0;
    rig.measure_after.store(last, Ordering::Relaxed);
    let probe = crate::sys::JitterProbe::start();
    let window = crate::sys::WindowCounts::start();
    let dispatcher_cpu = crate::sys::thread_cpu_seconds("dispatch-");
    let worker_cpu = crate::sys::thread_cpu_seconds("catchup-");
    let passes = metrics.passes.get();
    let (latency, _) = phase(last, events);
    let passes = metrics.passes.get() - passes;
    let dispatcher_cpu_ms = (crate::sys::thread_cpu_seconds("dispatch-") - dispatcher_cpu) * 1000.0;
    let worker_cpu_ms = (crate::sys::thread_cpu_seconds("catchup-") - worker_cpu) * 1000.0;
    let counts = window.finish();
    let machine = probe.finish();
    let (_, terminations) = rig.terminations();
    drop(stalled_watches);
    PopulationRun {
        latency,
        warm_up: warm,
        stall_ms,
        terminations,
        machine,
        dispatcher_cpu_ms,
        worker_cpu_ms,
        passes,
        counts,
    }
}

/// The child side of a population run (`watchkeeper-bench __population-run HEALTHY STALLED
/// RATE SECS`): runs it and prints its figures as one JSON line. Exit code 2 on bad arguments.
#[must_use]
pub fn population_child_main(args: &[String]) -> i32 {
    let numbers: Option<Vec<f64>> = args.iter().map(|a| a.parse().ok()).collect();
    let Some([healthy, stalled, rate, secs]) = numbers.as_deref() else {
        eprintln!("usage: watchkeeper-bench __population-run HEALTHY STALLED RATE SECS");
        return 2;
    };
    let run = population_run(*healthy as usize, *stalled as usize, *rate, *secs);
    println!("{}", serde_json::to_string(&run).expect("a run serializes"));
    0
}

/// Runs one population run in a new process of this benchmark (a fresh heap, the allocator
/// set up as `mode` says) and reads its figures.
fn population_run_in_child(
    options: &Options,
    mode: MallocMode,
    healthy: usize,
    stalled: usize,
    rate: f64,
    secs: f64,
) -> Result<PopulationRun, String> {
    let mut command = std::process::Command::new(&options.exe);
    command
        .arg("__population-run")
        .args([
            healthy.to_string(),
            stalled.to_string(),
            rate.to_string(),
            secs.to_string(),
        ])
        .stderr(std::process::Stdio::inherit());
    if let Some(tunables) = mode.tunables() {
        command.env("GLIBC_TUNABLES", tunables);
    }
    let output = command
        .output()
        .map_err(|e| format!("population run: cannot start {:?}: {e}", options.exe))?;
    if !output.status.success() {
        return Err(format!(
            "population run N={stalled} failed: {}",
            output.status
        ));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line).map_err(|e| format!("population run N={stalled}: {e}: {line:?}"))
}

/// Suite `population`: healthy p99 with N never-reading watchers (N = 0, 1,000, 10,000,
/// 100,000 unless `--population-ns`), as a ratio to N = 0 (runs interleaved N = 0, 1,000,
/// ..., 0, 1,000, ...), optionally under a CPU-bound background load (`--busy-nice`) and for
/// each allocator set-up of `--population-malloc` (interleaved too). Every run is its own
/// process.
///
/// # Errors
/// A run's process failed.
pub fn population(options: &Options) -> Result<Vec<Table>, String> {
    let (mut ns, healthy, rate, secs): (Vec<usize>, usize, f64, f64) = if options.smoke {
        (vec![0, 100], 2, 200.0, 0.5)
    } else {
        (vec![0, 1_000, 10_000, 100_000], 10, 1000.0, 5.0)
    };
    if !options.population_ns.is_empty() {
        ns = std::iter::once(0)
            .chain(options.population_ns.iter().copied().filter(|&n| n > 0))
            .collect();
    }
    let modes: &[MallocMode] = if options.population_malloc.is_empty() {
        &[MallocMode::Glibc]
    } else {
        &options.population_malloc
    };
    let busy = options.busy_nice.map(crate::sys::BusyLoad::start);
    let mut runs: Vec<Vec<Vec<PopulationRun>>> = vec![vec![Vec::new(); ns.len()]; modes.len()];
    for run in 0..options.runs {
        for (m, &mode) in modes.iter().enumerate() {
            for (i, &n) in ns.iter().enumerate() {
                let result = population_run_in_child(options, mode, healthy, n, rate, secs)?;
                let traces: Vec<String> = result
                    .counts
                    .traces
                    .iter()
                    .map(|(name, count)| format!("{name} {count}"))
                    .collect();
                eprintln!(
                    "  population {} N={n} run {run}: p50 {:.0} p99 {:.0} max {:.0} µs; warm-up p99 {:.0} max {:.0} µs, stalled in {:.0} ms; dispatcher {:.1} ms, catch-up {:.1} ms CPU, {} passes; machine: 1 ms sleep overshoot p99 {:.0} max {:.0} µs, steal {:.0} ms; minor faults {}, switches {} / {} involuntary; {}",
                    mode.name(),
                    result.latency.p50,
                    result.latency.p99,
                    result.latency.max,
                    result.warm_up.p99,
                    result.warm_up.max,
                    result.stall_ms,
                    result.dispatcher_cpu_ms,
                    result.worker_cpu_ms,
                    result.passes,
                    result.machine.overshoot.p99,
                    result.machine.overshoot.max,
                    result.machine.steal_ms,
                    result.counts.minor_faults,
                    result.counts.voluntary_switches,
                    result.counts.involuntary_switches,
                    traces.join(", ")
                );
                runs[m][i].push(result);
            }
        }
    }
    let load = crate::sys::busy_title(busy.as_ref());
    drop(busy);
    let trace_names: Vec<String> = runs
        .iter()
        .flatten()
        .flatten()
        .next()
        .map(|r| r.counts.traces.iter().map(|(n, _)| n.clone()).collect())
        .unwrap_or_default();
    let mut columns: Vec<String> = [
        "allocator",
        "stalled N",
        "healthy p50 µs",
        "p99 µs",
        "max µs",
        "p99 / p99(N=0)",
        "warm-up: ms until all N unsynced",
        "warm-up healthy p99 / max µs",
        "terminations",
        "dispatcher CPU ms",
        "catch-up worker CPU ms",
        "passes",
        "machine: 1 ms sleep overshoot p99 / max µs",
        "machine: steal ms",
        "minor faults",
        "context switches / involuntary",
    ]
    .iter()
    .map(|c| (*c).to_owned())
    .collect();
    columns.extend(trace_names.iter().cloned());
    let column_refs: Vec<&str> = columns.iter().map(String::as_str).collect();
    let mut table = Table::new(
        "population",
        &format!(
            "2. Healthy latency vs stalled population, in-process: {healthy} healthy watchers, {rate} events/s, {secs} s measured per run{load}"
        ),
        &column_refs,
    );
    for (m, &mode) in modes.iter().enumerate() {
        for (i, &n) in ns.iter().enumerate() {
            let of_n = &runs[m][i];
            let ratios: Vec<f64> = of_n
                .iter()
                .zip(&runs[m][0])
                .map(|(a, b)| a.latency.p99 / b.latency.p99)
                .collect();
            let med =
                |g: &dyn Fn(&PopulationRun) -> f64| median(&of_n.iter().map(g).collect::<Vec<_>>());
            let mut row = vec![
                mode.name().to_owned(),
                n.to_string(),
                f(med(&|r| r.latency.p50), 0),
                f(med(&|r| r.latency.p99), 0),
                f(med(&|r| r.latency.max), 0),
                x(median(&ratios)),
                f(med(&|r| r.stall_ms), 0),
                format!(
                    "{} / {}",
                    f(med(&|r| r.warm_up.p99), 0),
                    f(med(&|r| r.warm_up.max), 0)
                ),
                f(med(&|r| r.terminations as f64), 0),
                f(med(&|r| r.dispatcher_cpu_ms), 0),
                f(med(&|r| r.worker_cpu_ms), 0),
                f(med(&|r| r.passes as f64), 0),
                format!(
                    "{} / {}",
                    f(med(&|r| r.machine.overshoot.p99), 0),
                    f(med(&|r| r.machine.overshoot.max), 0)
                ),
                f(med(&|r| r.machine.steal_ms), 0),
                f(med(&|r| r.counts.minor_faults as f64), 0),
                format!(
                    "{} / {}",
                    f(med(&|r| r.counts.voluntary_switches as f64), 0),
                    f(med(&|r| r.counts.involuntary_switches as f64), 0)
                ),
            ];
            for name in &trace_names {
                row.push(f(
                    med(&|r| {
                        r.counts
                            .traces
                            .iter()
                            .find(|(t, _)| t == name)
                            .map_or(0.0, |(_, c)| *c as f64)
                    }),
                    0,
                ));
            }
            table.row(row);
            for r in of_n {
                table.raw(json!({"allocator": mode.name(), "stalled": n, "run": r}));
            }
        }
    }
    table.note("Stalled watchers never read (queues sized like Kubernetes: 10 events on a new cache); stall-resume mode. Each run is a new process of this benchmark (a fresh heap; `--population-malloc` sets its allocator up: `glibc` as it comes, `no-trim` with GLIBC_TUNABLES keeping freed memory, runs of the set-ups interleaved). It registers them next to the healthy ones, writes a warm-up of twice a queue's capacity at the same rate (their queues fill and they stall; the healthy latencies of the warm-up are the warm-up column), waits until all N are unsynced and a catch-up pass has adopted them, then measures the healthy watchers over the measured writes. Ratio: median over runs of p99(N) / p99(0) of the same set-up from the same round of interleaved runs. CPU columns: the dispatcher's and the catch-up worker's threads over the measured writes (/proc/self/task's schedstat, to the nanosecond; clock ticks of 10 ms before 2026-12-07), and the passes run meanwhile. Machine columns: a thread of the same process sleeping 1 ms at a time over the measured writes, and the hypervisor's steal time — delays no code of watchkeeper's can cause or avoid (medians over runs; every run is in the JSON). Counts over the measured writes, whole process: minor page faults and context switches (getrusage), and where the kernel allows it the tracepoints tlb:tlb_flush and the madvise/munmap/mmap/brk system calls (perf_event_open, counting mode, every thread).");
    Ok(vec![table])
}

/// One shared catch-up run's figures.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct CatchUpRun {
    /// Serializations per event written (live path and passes together).
    pub serializations_per_event: f64,
    /// Catch-up passes run while the watchers caught up.
    pub passes: u64,
    /// History intervals opened by those passes.
    pub interval_opens: u64,
    /// Events pushed by passes.
    pub deferred: u64,
    /// Wall time from the consumers starting to read until every watcher had every event.
    pub catchup_seconds: f64,
    /// Every watcher got every event exactly once.
    pub complete: bool,
}

fn catchup_run(watchers: usize, events: usize) -> CatchUpRun {
    let rig = Rig::new(WatchMode::StallResume, events);
    let watches: Vec<Watch> = (0..watchers)
        .map(|_| rig.watch(WatchStart::Now, None))
        .collect();
    rig.wait_synced(watchers);
    let metrics = rig.cache.metrics();
    let serializations_before = metrics.encode.serializations();
    let last = rig.write(events, 0.0);
    let deadline = Instant::now() + Duration::from_secs(60);
    while rig.cache.dispatched() < last && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    let passes_before = metrics.passes.get();
    let opens_before = metrics.pass_interval_opens.get();
    let deferred_before = metrics.watcher_deferred_events.get();
    let started = Instant::now();
    let stats = &metrics.encode;
    let mut seen = vec![0 as Revision; watchers];
    let mut counts = vec![0usize; watchers];
    let mut remaining = watchers;
    let deadline = Instant::now() + Duration::from_secs(300);
    while remaining > 0 && Instant::now() < deadline {
        let mut progressed = false;
        for (i, watch) in watches.iter().enumerate() {
            if seen[i] >= last {
                continue;
            }
            while let Pop::Item(item) = watch.try_pop() {
                let _ = item.encoded(Encoding::Json, stats);
                if let WatchItem::Event { event, .. } = &item {
                    seen[i] = event.revision();
                    counts[i] += 1;
                }
                progressed = true;
            }
            if seen[i] >= last {
                remaining -= 1;
            }
        }
        if !progressed {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    let catchup_seconds = started.elapsed().as_secs_f64();
    CatchUpRun {
        serializations_per_event: (metrics.encode.serializations() - serializations_before) as f64
            / events as f64,
        passes: metrics.passes.get() - passes_before,
        interval_opens: metrics.pass_interval_opens.get() - opens_before,
        deferred: metrics.watcher_deferred_events.get() - deferred_before,
        catchup_seconds,
        complete: remaining == 0 && counts.iter().all(|c| *c == events),
    }
}

/// Suite `catchup`: 10,000 watchers stall together and catch up.
///
/// # Errors
/// Never.
pub fn catchup(options: &Options) -> Result<Vec<Table>, String> {
    let (watchers, events) = if options.smoke {
        (200, 200)
    } else {
        (10_000, 1_000)
    };
    let mut runs = Vec::new();
    for run in 0..options.runs {
        let result = catchup_run(watchers, events);
        eprintln!("  catchup run {run}: {result:?}");
        runs.push(result);
    }
    let med = |g: &dyn Fn(&CatchUpRun) -> f64| median(&runs.iter().map(g).collect::<Vec<_>>());
    let mut table = Table::new(
        "catchup",
        &format!(
            "3. Shared catch-up, in-process: {watchers} watchers stall together over {events} events, then catch up"
        ),
        &["measurement", "value"],
    );
    let per_pass = med(&|r| r.interval_opens as f64 / r.passes.max(1) as f64);
    table.row(vec![
        "serializations per event".into(),
        f(med(&|r| r.serializations_per_event), 3),
    ]);
    table.row(vec![
        "history reads (interval opens) per pass".into(),
        f(per_pass, 2),
    ]);
    table.row(vec!["passes".into(), f(med(&|r| r.passes as f64), 0)]);
    table.row(vec![
        "history reads".into(),
        f(med(&|r| r.interval_opens as f64), 0),
    ]);
    table.row(vec![
        "events pushed by passes per history read".into(),
        f(
            med(&|r| r.deferred as f64 / r.interval_opens.max(1) as f64),
            0,
        ),
    ]);
    table.row(vec![
        "catch-up wall time, s".into(),
        f(med(&|r| r.catchup_seconds), 2),
    ]);
    table.row(vec![
        "every watcher got every event once".into(),
        runs.iter().all(|r| r.complete).to_string(),
    ]);
    for run in &runs {
        table.raw(json!(run));
    }
    table.note("Writes go to the dispatcher as fast as it takes them while no watcher reads, so every watcher stalls at its queue's capacity; then one consumer thread drains every queue (encoding each item) until every watcher has every event. Serializations are counted by the core over the whole run (live and passes) and divided by events written.");
    Ok(vec![table])
}

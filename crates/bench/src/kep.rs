//! KEP-6268 measurements 3 and 4, in-process: resync time of a stalled watcher (suite
//! `resync`) and how long a new stall waits next to long-standing laggards (suite `fairness`).
//!
//! `resync` drives the core with the server's own [`watchkeeper::cache::CacheDriver`], like
//! the `tax` suite. `fairness` needs each catch-up pass's report (which watchers it served and
//! how many passes each had waited with room), which the server's driver drops, so it runs the
//! same two loops as `crates/server/src/cache/driver.rs` (dispatcher and catch-up worker on their own
//! OS threads, wall clock) on bench threads and keeps the reports of the watcher under study.
//!
//! Both are benchmarks: they read the wall clock and sleep; nothing here is a test.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use serde_json::json;
use watchkeeper::cache::{CacheDriver, Clock, DriverWaits, Input, PassHook};
use watchkeeper_core::{
    CacheConfig, CandidateOrder, Change, Encoding, Pop, Revision, Watch, WatchItem, WatchRequest,
    WatchStart, WatcherId, WatcherState,
};

use crate::inproc::{Rig, ThreadWaker, pod};
use crate::report::{Table, f, x};
use crate::{Options, median};

/// One resync run's figures.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct ResyncRun {
    /// Events the watcher was behind when it resumed reading.
    pub lag: u64,
    /// Seconds from resuming to being synced again (None: not within the run).
    pub resync_secs: Option<f64>,
    /// The fluid bound lag / (read rate − write rate), seconds (None for an unbounded reader).
    pub bound_secs: Option<f64>,
    /// Events read from resuming to resyncing, divided by the time: the read rate achieved.
    pub read_rate_achieved: f64,
    /// Catch-up passes run while the watcher caught up.
    pub passes: u64,
    /// Events pushed by those passes (the rest came from the live path).
    pub deferred: u64,
    /// Every event arrived once, in revision order.
    pub in_order: bool,
    /// The watcher was unsynced when it resumed.
    pub unsynced_at_resume: bool,
}

/// Reads `watch` at up to `rate` events per second (a token bucket holding at most 10 ms of
/// tokens, so an idle reader does not bank a burst), or as fast as it can with `None`, until
/// it is synced again or `until` passes. Returns (events read, revision order kept, resync
/// instant).
fn read_until_synced(
    rig: &Rig,
    watch: &Watch,
    rate: Option<f64>,
    until: Instant,
    last: &mut Revision,
) -> (u64, bool, Option<Instant>) {
    let waker = Waker::from(Arc::new(ThreadWaker(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let stats = &rig.driver.cache.metrics().encode;
    let started = Instant::now();
    let burst = rate.map_or(0.0, |r| (r * 0.01).max(1.0));
    let mut taken = 0.0f64;
    let mut read = 0u64;
    let mut in_order = true;
    let mut buffer = Vec::with_capacity(64);
    let mut take = |item: WatchItem, last: &mut Revision, read: &mut u64| {
        let _ = item.encoded(Encoding::Json, stats);
        if let WatchItem::Event { event, .. } = &item {
            in_order &= event.revision() == *last + 1;
            *last = event.revision();
            *read += 1;
        }
    };
    while Instant::now() < until {
        match rate {
            Some(rate) => {
                let budget = started.elapsed().as_secs_f64() * rate;
                taken = taken.max(budget - burst);
                let mut popped = false;
                while taken + 1.0 <= budget {
                    match watch.try_pop() {
                        Pop::Item(item) => {
                            take(item, last, &mut read);
                            taken += 1.0;
                            popped = true;
                            if watch.state() == WatcherState::Synced {
                                return (read, in_order, Some(Instant::now()));
                            }
                        }
                        Pop::Empty | Pop::End(_) => break,
                    }
                }
                if watch.state() == WatcherState::Synced {
                    return (read, in_order, Some(Instant::now()));
                }
                if !popped || taken + 1.0 > budget {
                    std::thread::sleep(Duration::from_secs_f64((1.0 / rate).min(0.001)));
                }
            }
            None => {
                buffer.clear();
                match watch.poll_pop_many(&mut cx, 64, &mut buffer) {
                    Poll::Ready(_) => {
                        for item in buffer.drain(..) {
                            take(item, last, &mut read);
                        }
                    }
                    Poll::Pending => std::thread::park_timeout(Duration::from_millis(1)),
                }
                if watch.state() == WatcherState::Synced {
                    return (read, in_order, Some(Instant::now()));
                }
            }
        }
    }
    (read, in_order, None)
}

/// One resync run: a watcher stalls for `stall` seconds while writes go on at `write_rate`,
/// then reads at `read_rate` until it is synced again.
fn resync_run(
    config: &CacheConfig,
    write_rate: f64,
    read_rate: Option<f64>,
    stall: f64,
    write_secs: f64,
) -> ResyncRun {
    let events = (write_rate * write_secs) as usize;
    let rig = Rig::with_config(config.clone(), events);
    let watch = rig.watch(WatchStart::Now, None);
    rig.wait_synced(1);
    let stop = AtomicBool::new(false);
    let writes_end = Instant::now() + Duration::from_secs_f64(write_secs);
    std::thread::scope(|scope| {
        let writer = scope.spawn(|| rig.write_until(events, write_rate, &stop));
        std::thread::sleep(Duration::from_secs_f64(stall));
        let metrics = rig.driver.cache.metrics();
        let passes_before = metrics.passes.get();
        let deferred_before = metrics.watcher_deferred_events.get();
        let unsynced_at_resume = watch.state() == WatcherState::Unsynced;
        let lag = rig.cache.revision();
        let resumed = Instant::now();
        let mut last: Revision = 0;
        let (read, in_order, synced_at) =
            read_until_synced(&rig, &watch, read_rate, writes_end, &mut last);
        stop.store(true, Ordering::Release);
        let _ = writer.join();
        let resync_secs = synced_at.map(|t| t.duration_since(resumed).as_secs_f64());
        ResyncRun {
            lag,
            resync_secs,
            bound_secs: read_rate.map(|r| lag as f64 / (r - write_rate)),
            read_rate_achieved: read as f64
                / resync_secs.unwrap_or_else(|| resumed.elapsed().as_secs_f64()),
            passes: metrics.passes.get() - passes_before,
            deferred: metrics.watcher_deferred_events.get() - deferred_before,
            in_order,
            unsynced_at_resume,
        }
    })
}

/// Suite `resync`: resync time as a function of read rate and write rate, next to the fluid
/// bound lag / (read rate − write rate) (KEP-6268 measurement 3).
///
/// # Errors
/// Never.
pub fn resync(options: &Options) -> Result<Vec<Table>, String> {
    let (write_rates, factors, stall): (Vec<f64>, Vec<Option<f64>>, f64) = if options.smoke {
        (vec![200.0], vec![Some(5.0), None], 0.3)
    } else {
        (
            vec![100.0, 1000.0],
            // 100x: 100,000 reads/s at 1,000 writes/s, the fastest controlled reader.
            vec![Some(2.0), Some(5.0), Some(20.0), Some(100.0), None],
            2.0,
        )
    };
    let default = CacheConfig::default();
    let mut tables = vec![resync_table(
        options,
        &format!(
            "4. Resync time, in-process: one watcher stalls {stall} s, then reads at a controlled rate"
        ),
        &default,
        &write_rates,
        &factors,
        stall,
    )];
    tables[0].note("The server's own CacheDriver; one watcher with a Kubernetes-sized queue (10 events on a new cache) stops reading while a writer sends one ~1 KiB pod change per revision at the write rate, so it goes unsynced; when it resumes, it reads one event at a time at the read rate (a token bucket holding at most 10 ms of tokens), encoding each, until the core hands it back to the live path (state synced).");
    tables[0].note("Fluid bound: lag / (read rate − write rate), the time a reader at that rate needs if events were a fluid. Resync / bound above 1 is the catch-up machinery's own cost: passes every 1-10 ms (100 ms after a pass that served nobody), each giving a member at most one queue capacity per cohort plus up to two retry rounds. \"As fast as it can\": the reader pops whatever is queued, so the resync time is the machinery's alone and reads/s achieved is its throughput for one watcher. \"> N\": not synced by the end of the writes (N s after resuming).");
    // Experiment: the same with the idle pass period equal to the normal one (10 ms), to test
    // whether the idle period after a pass that found the watcher's queue still full is what
    // caps a slow reader's catch-up.
    let idle = CacheConfig {
        pass_period_idle: default.pass_period_normal,
        ..CacheConfig::default()
    };
    let (exp_rates, exp_factors): (Vec<f64>, Vec<Option<f64>>) = if options.smoke {
        (vec![200.0], vec![Some(5.0)])
    } else {
        (vec![100.0, 1000.0], vec![Some(2.0), Some(5.0)])
    };
    let mut experiment = resync_table(
        options,
        &format!(
            "4b. Resync time with pass_period_idle = pass_period_normal ({} ms), an experiment; otherwise as table 4",
            default.pass_period_normal.as_millis()
        ),
        &idle,
        &exp_rates,
        &exp_factors,
        stall,
    );
    experiment.note(format!("Default pass_period_idle is {} ms: a pass that serves nobody (here: it ran while the slow reader's queue was still full, so the watcher was no candidate) schedules the next one that much later, and a reader slower than the passes but faster than capacity / idle period waits on an empty queue.", default.pass_period_idle.as_millis()));
    tables.push(experiment);
    Ok(tables)
}

fn resync_table(
    options: &Options,
    title: &str,
    config: &CacheConfig,
    write_rates: &[f64],
    factors: &[Option<f64>],
    stall: f64,
) -> Table {
    let mut table = Table::new(
        "resync",
        title,
        &[
            "writes/s",
            "reads/s",
            "lag at resume, events",
            "resync s",
            "fluid bound s",
            "resync / bound",
            "reads/s achieved",
            "passes",
            "events from passes",
            "resynced / runs",
        ],
    );
    for &w in write_rates {
        for &factor in factors {
            let read_rate = factor.map(|k| k * w);
            // Long enough for three times the fluid bound after the stall.
            let write_secs = stall + factor.map_or(2.0, |k| 3.0 * stall / (k - 1.0)) + 1.0;
            let mut runs = Vec::new();
            for run in 0..options.runs {
                let result = resync_run(config, w, read_rate, stall, write_secs);
                eprintln!("  resync {w}/s read {read_rate:?} run {run}: {result:?}");
                table.raw(json!({"write_rate": w, "read_rate": read_rate, "run": result}));
                runs.push(result);
            }
            let med =
                |g: &dyn Fn(&ResyncRun) -> f64| median(&runs.iter().map(g).collect::<Vec<_>>());
            let resynced: Vec<f64> = runs.iter().filter_map(|r| r.resync_secs).collect();
            let ratio: Vec<f64> = runs
                .iter()
                .filter_map(|r| Some(r.resync_secs? / r.bound_secs?))
                .collect();
            table.row(vec![
                f(w, 0),
                read_rate.map_or("as fast as it can".into(), |r| f(r, 0)),
                f(med(&|r| r.lag as f64), 0),
                if resynced.is_empty() {
                    format!("> {}", f(write_secs - stall, 1))
                } else {
                    f(median(&resynced), 3)
                },
                read_rate.map_or("0".into(), |r| f(med(&|x| x.lag as f64) / (r - w), 3)),
                if ratio.is_empty() {
                    "–".into()
                } else {
                    x(median(&ratio))
                },
                f(med(&|r| r.read_rate_achieved), 0),
                f(med(&|r| r.passes as f64), 0),
                f(med(&|r| r.deferred as f64), 0),
                format!(
                    "{}/{}{}",
                    resynced.len(),
                    runs.len(),
                    if runs.iter().all(|r| r.in_order && r.unsynced_at_resume) {
                        ""
                    } else {
                        " (not all in order / unsynced at resume!)"
                    }
                ),
            ]);
        }
    }
    table
}

/// A cache on the server's own driver, keeping the pass reports of one tracked watcher.
struct FairRig {
    driver: CacheDriver,
    clock: Clock,
    /// (passes waited with room, when the pass ran) for every service of the tracked watcher.
    served: Arc<Mutex<Vec<(u64, Instant)>>>,
    tracked: Arc<AtomicU64>,
}

impl FairRig {
    fn start(config: CacheConfig) -> Result<FairRig, String> {
        let clock = Clock::new();
        let served = Arc::new(Mutex::new(Vec::new()));
        let tracked = Arc::new(AtomicU64::new(u64::MAX));
        let on_pass: PassHook = {
            let (served, tracked) = (served.clone(), tracked.clone());
            Box::new(move |report, started, _elapsed| {
                let id: WatcherId = tracked.load(Ordering::Acquire);
                if let Some((_, waited)) = report.served.iter().find(|(w, _)| *w == id)
                    && let Ok(mut served) = served.lock()
                {
                    served.push((*waited, started));
                }
            })
        };
        let driver = CacheDriver::start_observed(
            "fairness",
            config,
            clock,
            DriverWaits::default(),
            Some(on_pass),
        )
        .map_err(|e| e.to_string())?;
        Ok(FairRig {
            driver,
            clock,
            served,
            tracked,
        })
    }

    fn watch(&self) -> Watch {
        let mut request = WatchRequest::new(WatchStart::Now);
        request.allow_bookmarks = false;
        self.driver.cache.watch(request, self.clock.now())
    }
}

/// One new stall's figures.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct StallService {
    /// Passes that ran while it had room before the first that served it (None: never served).
    pub passes_waited: Option<u64>,
    /// Milliseconds from draining its queue to the first pass that served it.
    pub first_service_ms: Option<f64>,
    /// Milliseconds from draining its queue to being synced again.
    pub resync_ms: Option<f64>,
    /// Unsynced watchers when it resumed (the laggards, and itself).
    pub unsynced_at_resume: i64,
}

/// One fairness run: `laggards` permanently slow watchers and one subject that stalls
/// `stalls` times for 200 ms while `write_rate` events/s go on.
fn fairness_run(
    order: CandidateOrder,
    laggards: usize,
    write_rate: f64,
    stalls: usize,
) -> Result<Vec<StallService>, String> {
    let rig = FairRig::start(CacheConfig {
        candidate_order: order,
        ..CacheConfig::default()
    })?;
    let lagging: Vec<Watch> = (0..laggards).map(|_| rig.watch()).collect();
    let subject = rig.watch();
    rig.tracked.store(subject.id(), Ordering::Release);
    let deadline = Instant::now() + Duration::from_secs(60);
    while (rig.driver.cache.metrics().synced_watchers.get() as usize) < laggards + 1 {
        if Instant::now() > deadline {
            return Err("watchers never registered".into());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let stop = AtomicBool::new(false);
    let input = rig.driver.sender();
    let stats = &rig.driver.cache.metrics().encode;
    // The laggards' reader pauses 20 ms between rounds of one pop each; with more than 10,000
    // laggards, `laggards` × 2 µs (200 ms at 100,000), so that the bench's one laggard thread
    // pops at most ~500,000 items/s and leaves the machine's second core to the cache (at
    // 20 ms, 100,000 laggards would ask for 5 M pops/s).
    let pause = Duration::from_millis(20).max(Duration::from_micros(2) * laggards as u32);
    let results = std::thread::scope(|scope| {
        // The writer.
        let writer = scope.spawn(|| {
            let start = Instant::now();
            let mut i = 0usize;
            while !stop.load(Ordering::Acquire) {
                let due = start + Duration::from_secs_f64(i as f64 / write_rate);
                let now = Instant::now();
                if due > now {
                    std::thread::sleep(due - now);
                }
                let revision = (i + 1) as Revision;
                let _ = input.send(Input::Revision(
                    revision,
                    vec![Change::put(pod(i % 1000, revision))],
                ));
                i += 1;
            }
        });
        // The laggards: one item each per round (see `pause`), far below the write rate.
        let lagging_reader = scope.spawn(|| {
            while !stop.load(Ordering::Acquire) {
                for watch in &lagging {
                    if let Pop::Item(item) = watch.try_pop() {
                        let _ = item.encoded(Encoding::Json, stats);
                    }
                }
                std::thread::sleep(pause);
            }
        });
        let drain = |watch: &Watch| {
            while let Pop::Item(item) = watch.try_pop() {
                let _ = item.encoded(Encoding::Json, stats);
            }
        };
        // The subject: healthy for 1 s (the laggards fall behind), then stalls.
        let healthy_for = |d: Duration| {
            let until = Instant::now() + d;
            while Instant::now() < until {
                drain(&subject);
                std::thread::sleep(Duration::from_micros(200));
            }
        };
        healthy_for(Duration::from_secs(1));
        let mut out = Vec::new();
        for _ in 0..stalls {
            std::thread::sleep(Duration::from_millis(200));
            let unsynced_at_resume = rig.driver.cache.metrics().stalled_watchers.get();
            let before = rig.served.lock().map_or(0, |s| s.len());
            let resumed = Instant::now();
            let limit = resumed + Duration::from_secs(3);
            let mut resync_ms = None;
            while Instant::now() < limit {
                drain(&subject);
                if subject.state() == WatcherState::Synced {
                    resync_ms = Some(resumed.elapsed().as_secs_f64() * 1000.0);
                    break;
                }
                std::thread::sleep(Duration::from_micros(200));
            }
            let first = rig
                .served
                .lock()
                .ok()
                .and_then(|s| s.get(before..).and_then(|s| s.first().copied()));
            out.push(StallService {
                passes_waited: first.map(|(w, _)| w),
                first_service_ms: first
                    .map(|(_, at)| at.saturating_duration_since(resumed).as_secs_f64() * 1000.0),
                resync_ms,
                unsynced_at_resume,
            });
            healthy_for(Duration::from_millis(300));
        }
        stop.store(true, Ordering::Release);
        let _ = writer.join();
        let _ = lagging_reader.join();
        out
    });
    Ok(results)
}

fn order_name(order: CandidateOrder) -> &'static str {
    match order {
        CandidateOrder::FreeShareThenRotation => "free share, then rotation (KEP, default)",
        CandidateOrder::RotationOnly => "rotation only",
        CandidateOrder::OldestFirst => "oldest position first",
    }
}

/// Suite `fairness`: a new stall next to long-standing laggards: passes waited before its
/// first service, and the time (KEP-6268 measurement 4), for the KEP's candidate order and the
/// two alternatives the core implements.
///
/// # Errors
/// The cache could not start.
pub fn fairness(options: &Options) -> Result<Vec<Table>, String> {
    let (configs, rate, stalls): (Vec<(CandidateOrder, usize)>, f64, usize) = if options.smoke {
        (
            vec![
                (CandidateOrder::FreeShareThenRotation, 20),
                (CandidateOrder::OldestFirst, 20),
            ],
            200.0,
            2,
        )
    } else {
        let mut configs = vec![(CandidateOrder::FreeShareThenRotation, 0)];
        for laggards in [1_000, 10_000] {
            for order in [
                CandidateOrder::FreeShareThenRotation,
                CandidateOrder::RotationOnly,
                CandidateOrder::OldestFirst,
            ] {
                configs.push((order, laggards));
            }
        }
        // The largest population, with the default order only (a run registers
        // 100,000 watchers and its laggard reader walks them all every round).
        configs.push((CandidateOrder::FreeShareThenRotation, 100_000));
        (configs, 1000.0, 5)
    };
    let mut samples: Vec<Vec<StallService>> = vec![Vec::new(); configs.len()];
    for run in 0..options.runs {
        for (i, &(order, laggards)) in configs.iter().enumerate() {
            let result = fairness_run(order, laggards, rate, stalls)?;
            eprintln!(
                "  fairness {} {laggards} laggards run {run}: {result:?}",
                order_name(order)
            );
            samples[i].extend(result);
        }
    }
    let mut table = Table::new(
        "fairness",
        &format!(
            "5. Fairness, in-process: a new stall next to long-standing laggards, {rate} events/s"
        ),
        &[
            "laggards",
            "candidate order",
            "passes waited before first service, median / max",
            "ms to first service, median / max",
            "ms to resync, median / max",
            "stalls served by a pass / stalls",
            "stalls resynced within 3 s / stalls",
            "unsynced watchers at resume (median)",
        ],
    );
    for (i, &(order, laggards)) in configs.iter().enumerate() {
        let s = &samples[i];
        let pair = |values: Vec<f64>, digits: usize| {
            if values.is_empty() {
                "never".to_owned()
            } else {
                format!(
                    "{} / {}",
                    f(median(&values), digits),
                    f(values.iter().copied().fold(0.0, f64::max), digits)
                )
            }
        };
        table.row(vec![
            laggards.to_string(),
            order_name(order).to_owned(),
            pair(
                s.iter()
                    .filter_map(|r| r.passes_waited.map(|w| w as f64))
                    .collect(),
                0,
            ),
            pair(s.iter().filter_map(|r| r.first_service_ms).collect(), 1),
            pair(s.iter().filter_map(|r| r.resync_ms).collect(), 1),
            format!(
                "{}/{}",
                s.iter().filter(|r| r.passes_waited.is_some()).count(),
                s.len()
            ),
            format!(
                "{}/{}",
                s.iter().filter(|r| r.resync_ms.is_some()).count(),
                s.len()
            ),
            f(
                median(
                    &s.iter()
                        .map(|r| r.unsynced_at_resume as f64)
                        .collect::<Vec<_>>(),
                ),
                0,
            ),
        ]);
        for r in s {
            table.raw(json!({"laggards": laggards, "order": order_name(order), "stall": r}));
        }
    }
    table.note(format!("Laggards: watchers whose reader pops one event each every 20 ms (≤ 50/s against {rate} writes/s; at 100,000 laggards every 200 ms, so that the one reader thread asks for at most ~500,000 pops/s), so they are unsynced for the whole run and have room again after every round of pops. The subject reads at full speed for 1 s, then {stalls} times per run: stops reading for 200 ms (its 10-event queue fills and it goes unsynced), drains its queue, and keeps draining until it is synced; then 300 ms healthy."));
    table.note("Passes waited: the catch-up worker's own count for the subject (passes that ran while it was a candidate with room, before the one that served it), read from each pass's report; the cache runs on the server's own CacheDriver, whose pass hook hands the bench each report. Times: from the subject draining its queue to the start of the pass that first served it, and to its hand-back to the live path. Served by a pass: a pass made it a cohort member; with the consumer-driven design a stall can also be handed to its own consumer by the pass that adopts it, refill itself from the history and be handed back by the next pass without ever being a member (then only the resync column counts it). Defaults otherwise: at most 512 members per pass, busy period 1-10 ms.");
    Ok(vec![table])
}

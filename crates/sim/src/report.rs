//! What a run measured: `report.json` (every number), `report.md` (the summary a person reads)
//! and the plots. Variants of one scenario sit side by side.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;
use watchkeeper_core::PassReport;

use crate::SimError;
use crate::stats::{LogHistogram, Summary};

/// One termination of a watch by the server.
#[derive(Clone, Debug, Serialize)]
pub struct Termination {
    /// When (virtual seconds).
    pub time_s: f64,
    /// The watcher's group.
    pub group: String,
    /// The watcher (index over all groups).
    pub watcher: u32,
    /// Its connection number (1 for the first).
    pub connection: u32,
    /// `unresponsive`, `resource_expired`, `resource_expired_initial`, `initial_no_progress`,
    /// `deadline`, ...
    pub reason: String,
}

/// A broken guarantee.
#[derive(Clone, Debug, Serialize)]
pub struct ViolationRecord {
    /// When.
    pub time_s: f64,
    /// The watcher's group.
    pub group: String,
    /// The watcher.
    pub watcher: u32,
    /// Its connection number.
    pub connection: u32,
    /// Ordered, Unique, Reliable, Bookmarkable, Selection or Initial state (the core's
    /// `Guarantee` names).
    pub guarantee: String,
    /// What happened.
    pub message: String,
    /// Safety (a wrong item) or liveness (missing items at the end).
    pub safety: bool,
}

/// One unsynced episode that ended with the watcher back on the live stream.
#[derive(Clone, Debug, Serialize)]
pub struct Episode {
    /// The watcher.
    pub watcher: u32,
    /// Its group.
    pub group: String,
    /// Its read rate in events/s (0: unlimited).
    pub read_rate: f64,
    /// From the first observation as unsynced to the observation as synced.
    pub unsynced_s: f64,
    /// From the end of its stall (it reads again) to synced, when it stalled.
    pub after_resume_s: Option<f64>,
    /// Selected events it was behind when it resumed.
    pub backlog_events: Option<usize>,
    /// Selected events written per second while it caught up.
    pub selected_write_rate: Option<f64>,
    /// The fluid bound `backlog / (read_rate - selected_write_rate)`.
    pub fluid_bound_s: Option<f64>,
}

/// A point of the time series.
#[derive(Clone, Debug, Serialize)]
pub struct Sample {
    /// When.
    pub time_s: f64,
    /// Unsynced watchers (the core's gauge).
    pub unsynced: i64,
    /// Synced watchers.
    pub synced: i64,
    /// Clients with an open connection.
    pub connected: usize,
    /// Items queued across every queue (wrapped events in flight).
    pub queued_items: usize,
    /// Queued items over total queue capacity.
    pub queue_occupancy: f64,
    /// Revisions written but not yet dispatched.
    pub incoming: usize,
    /// Terminations so far.
    pub terminations: u64,
    /// Events in the history.
    pub history_len: usize,
}

/// Per-group results.
#[derive(Clone, Debug, Default, Serialize)]
pub struct GroupStats {
    /// Name.
    pub name: String,
    /// Watchers.
    pub watchers: usize,
    /// Counted with the healthy watchers.
    pub healthy: bool,
    /// Connections opened.
    pub connections: u64,
    /// Events taken.
    pub events: u64,
    /// Initial-state objects taken (relist volume).
    pub relist_objects: u64,
    /// Unsynced episodes that ended synced.
    pub resyncs: u64,
    /// Terminations by reason.
    pub terminations: BTreeMap<String, u64>,
    /// Delivery latency (commit to taken), ms.
    pub latency_ms: Summary,
    /// Stall end to resynced, seconds.
    pub resync_after_resume_s: Summary,
    /// CDF points (ms, fraction).
    pub latency_cdf_ms: Vec<(f64, f64)>,
}

/// Pass statistics accumulated by the engine.
#[derive(Clone, Debug, Default)]
pub struct PassStats {
    passes: u64,
    members: LogHistogram,
    pushes: LogHistogram,
    history_reads: LogHistogram,
    events_scanned: LogHistogram,
    duration_ns: LogHistogram,
    period_ns: LogHistogram,
    passes_waited: LogHistogram,
    candidates_max: usize,
    starved: u64,
    busy: u64,
    expired: u64,
    resynced: u64,
}

impl PassStats {
    pub(crate) fn record(
        &mut self,
        r: &PassReport,
        cost_ns: f64,
        period_ns: Option<u64>,
        starvation_passes_max: u64,
    ) {
        self.passes += 1;
        self.members.record(r.members as u64);
        self.pushes.record((r.pushes + r.retry_pushes) as u64);
        self.history_reads.record(r.cohorts as u64);
        self.events_scanned.record(r.events_scanned as u64);
        self.duration_ns.record(cost_ns as u64);
        if let Some(p) = period_ns {
            self.period_ns.record(p);
        }
        for (_, waited) in &r.served {
            self.passes_waited.record(*waited);
            if *waited > starvation_passes_max {
                self.starved += 1;
            }
        }
        self.candidates_max = self.candidates_max.max(r.candidates);
        self.busy += u64::from(r.busy);
        self.expired += r.expired as u64;
        self.resynced += r.resynced as u64;
    }
}

/// Pass results in the report.
#[derive(Clone, Debug, Serialize)]
pub struct PassSummary {
    /// Passes run.
    pub count: u64,
    /// Passes that ended busy.
    pub busy: u64,
    /// Members served per pass.
    pub members: Summary,
    /// Pushes per pass (main and retry rounds).
    pub pushes: Summary,
    /// History reads (interval opens) per pass.
    pub history_reads: Summary,
    /// History events scanned per pass.
    pub events_scanned: Summary,
    /// Modelled pass duration, microseconds.
    pub duration_us: Summary,
    /// Time between pass starts, milliseconds.
    pub period_ms: Summary,
    /// Passes a watcher with room waited before being served.
    pub passes_waited: Summary,
    /// Services after more than `starvation_passes_max` passes of waiting.
    pub starved: u64,
    /// Most candidates (unsynced with room) seen in one pass.
    pub candidates_max: usize,
    /// 410s given by passes.
    pub expired: u64,
    /// Hand-offs back to the dispatcher.
    pub resynced: u64,
}

/// Resync times of one group.
#[derive(Clone, Debug, Serialize)]
pub struct ResyncGroup {
    /// Group.
    pub group: String,
    /// Episodes.
    pub episodes: u64,
    /// Stall end to resynced, seconds (episodes that began with a stall).
    pub after_resume_s: Summary,
    /// First seen unsynced to resynced, seconds (every episode: stalls, blips, halts,
    /// reconnects behind).
    pub unsynced_s: Summary,
    /// Median of the fluid bound over the same episodes, seconds.
    pub fluid_bound_p50_s: Option<f64>,
}

/// Everything the engine hands to the report.
pub(crate) struct Parts {
    pub(crate) variant: String,
    pub(crate) trace_hash: u64,
    pub(crate) duration_s: f64,
    pub(crate) total_s: f64,
    pub(crate) revisions: u64,
    pub(crate) events_dispatched: u64,
    pub(crate) events_taken: u64,
    pub(crate) serializations: u64,
    pub(crate) relist_objects: u64,
    pub(crate) terminations: Vec<Termination>,
    pub(crate) terminations_total: u64,
    pub(crate) groups: Vec<(GroupStats, LogHistogram)>,
    pub(crate) per_watcher: Vec<(u32, String, Summary)>,
    pub(crate) worst: Vec<(u32, String, f64)>,
    pub(crate) violations: Vec<ViolationRecord>,
    pub(crate) safety_violations: u64,
    pub(crate) liveness_violations: u64,
    pub(crate) episodes: Vec<Episode>,
    pub(crate) samples: Vec<Sample>,
    pub(crate) pass_stats: PassStats,
    pub(crate) dispatcher_busy_s: f64,
    pub(crate) dispatcher_blocked_s: f64,
    pub(crate) worker_busy_s: f64,
    pub(crate) client_serialization_cpu_s: f64,
    pub(crate) incoming_max: usize,
    pub(crate) connections: u64,
    pub(crate) client_reconnects: u64,
    pub(crate) watcher_stalls: u64,
    pub(crate) catchup_rounds: u64,
    pub(crate) deferred_events: u64,
    pub(crate) skipped_events: u64,
    pub(crate) live_pushes: u64,
    pub(crate) bookmarks_sent: u64,
    pub(crate) history_capacity: i64,
}

/// One watcher's latency.
#[derive(Clone, Debug, Serialize)]
pub struct WatcherLatency {
    /// Watcher.
    pub watcher: u32,
    /// Group.
    pub group: String,
    /// Latency, ms.
    pub latency_ms: Summary,
}

/// The results of one variant.
#[derive(Clone, Debug, Serialize)]
pub struct Outcome {
    /// Variant name.
    pub name: String,
    /// FNV-1a hash of the event trace (dispatches, passes, takes, terminations).
    pub trace_hash: String,
    /// Write phase, seconds.
    pub duration_s: f64,
    /// Write phase plus liveness phase, seconds.
    pub total_s: f64,
    /// Revisions written.
    pub revisions: u64,
    /// Events dispatched.
    pub events_dispatched: u64,
    /// Events taken by clients.
    pub events_taken: u64,
    /// Terminations, all reasons.
    pub terminations_total: u64,
    /// Terminations by reason.
    pub terminations_by_reason: BTreeMap<String, u64>,
    /// Terminations (first 20,000).
    pub terminations: Vec<Termination>,
    /// Latency of every healthy group together, ms.
    pub healthy_latency_ms: Summary,
    /// Latency of every other group together, ms.
    pub slow_latency_ms: Summary,
    /// Per group.
    pub groups: Vec<GroupStats>,
    /// Per watcher, for small groups.
    pub per_watcher_latency: Vec<WatcherLatency>,
    /// The ten watchers with the largest single latency: (watcher, group, ms).
    pub worst_watchers: Vec<(u32, String, f64)>,
    /// Serializations (counted by the core).
    pub serializations: u64,
    /// Serializations per dispatched event.
    pub serializations_per_event: f64,
    /// Initial-state objects sent (relist volume).
    pub relist_objects: u64,
    /// Catch-up passes.
    pub passes: PassSummary,
    /// Dispatcher busy time, seconds.
    pub dispatcher_busy_s: f64,
    /// Dispatcher busy share of the run.
    pub dispatcher_utilization: f64,
    /// Legacy: time the dispatcher was blocked on full queues, seconds.
    pub dispatcher_blocked_s: f64,
    /// Largest backlog of revisions before the dispatcher.
    pub incoming_max: usize,
    /// Worker busy time, seconds.
    pub worker_busy_s: f64,
    /// Worker busy share of the run.
    pub worker_utilization: f64,
    /// Client-side serialization CPU, seconds.
    pub client_serialization_cpu_s: f64,
    /// Largest number of items queued across all queues (sampled).
    pub peak_queued_items: usize,
    /// Largest queue occupancy across all queues (sampled).
    pub peak_queue_occupancy: f64,
    /// Resync episodes.
    pub resync_episodes: Vec<Episode>,
    /// Resync times by group.
    pub resync_by_group: Vec<ResyncGroup>,
    /// Connections opened.
    pub connections: u64,
    /// Reconnects (after the server ended a watch, a blip, or the client's own schedule).
    pub client_reconnects: u64,
    /// Core metric: synced to unsynced transitions.
    pub watcher_stalls: u64,
    /// Core metric: unsynced to synced transitions.
    pub catchup_rounds: u64,
    /// Core metric: events pushed by passes and resync hand-offs.
    pub deferred_events: u64,
    /// Core metric: live-path skips (must be zero).
    pub skipped_events: u64,
    /// Core metric: live pushes.
    pub live_pushes: u64,
    /// Core metric: bookmarks queued.
    pub bookmarks_sent: u64,
    /// Core metric: history capacity at the end.
    pub history_capacity: i64,
    /// Safety violations found by the oracle.
    pub safety_violations: u64,
    /// Liveness violations found at the end.
    pub liveness_violations: u64,
    /// The first violations.
    pub violations: Vec<ViolationRecord>,
    /// Time series.
    pub series: Vec<Sample>,
}

pub(crate) fn build(p: Parts) -> Outcome {
    let mut healthy = LogHistogram::default();
    let mut slow = LogHistogram::default();
    let mut by_reason = BTreeMap::new();
    let mut groups = Vec::new();
    for (stats, hist) in p.groups {
        if stats.healthy {
            healthy.merge(&hist);
        } else {
            slow.merge(&hist);
        }
        for (reason, n) in &stats.terminations {
            *by_reason.entry(reason.clone()).or_insert(0) += n;
        }
        groups.push(stats);
    }
    let mut resync_by_group = Vec::new();
    for g in &groups {
        let episodes: Vec<&Episode> = p.episodes.iter().filter(|e| e.group == g.name).collect();
        if episodes.is_empty() {
            continue;
        }
        let mut bounds: Vec<f64> = episodes.iter().filter_map(|e| e.fluid_bound_s).collect();
        bounds.sort_by(f64::total_cmp);
        let mut unsynced = LogHistogram::default();
        for e in &episodes {
            unsynced.record((e.unsynced_s * 1e9) as u64);
        }
        resync_by_group.push(ResyncGroup {
            group: g.name.clone(),
            episodes: episodes.len() as u64,
            after_resume_s: g.resync_after_resume_s.clone(),
            unsynced_s: unsynced.summary(1e9),
            fluid_bound_p50_s: bounds.get(bounds.len() / 2).copied(),
        });
    }
    let s = &p.pass_stats;
    let passes = PassSummary {
        count: s.passes,
        busy: s.busy,
        members: s.members.summary(1.0),
        pushes: s.pushes.summary(1.0),
        history_reads: s.history_reads.summary(1.0),
        events_scanned: s.events_scanned.summary(1.0),
        duration_us: s.duration_ns.summary(1e3),
        period_ms: s.period_ns.summary(1e6),
        passes_waited: s.passes_waited.summary(1.0),
        starved: s.starved,
        candidates_max: s.candidates_max,
        expired: s.expired,
        resynced: s.resynced,
    };
    Outcome {
        name: p.variant,
        trace_hash: format!("{:016x}", p.trace_hash),
        duration_s: p.duration_s,
        total_s: p.total_s,
        revisions: p.revisions,
        events_dispatched: p.events_dispatched,
        events_taken: p.events_taken,
        terminations_total: p.terminations_total,
        terminations_by_reason: by_reason,
        terminations: p.terminations,
        healthy_latency_ms: healthy.summary(1e6),
        slow_latency_ms: slow.summary(1e6),
        groups,
        per_watcher_latency: p
            .per_watcher
            .into_iter()
            .map(|(watcher, group, latency_ms)| WatcherLatency {
                watcher,
                group,
                latency_ms,
            })
            .collect(),
        worst_watchers: p.worst,
        serializations: p.serializations,
        serializations_per_event: p.serializations as f64 / p.events_dispatched.max(1) as f64,
        relist_objects: p.relist_objects,
        passes,
        dispatcher_busy_s: p.dispatcher_busy_s,
        dispatcher_utilization: p.dispatcher_busy_s / p.total_s,
        dispatcher_blocked_s: p.dispatcher_blocked_s,
        incoming_max: p.incoming_max,
        worker_busy_s: p.worker_busy_s,
        worker_utilization: p.worker_busy_s / p.total_s,
        client_serialization_cpu_s: p.client_serialization_cpu_s,
        peak_queued_items: p.samples.iter().map(|s| s.queued_items).max().unwrap_or(0),
        peak_queue_occupancy: p
            .samples
            .iter()
            .map(|s| s.queue_occupancy)
            .fold(0.0, f64::max),
        resync_episodes: p.episodes,
        resync_by_group,
        connections: p.connections,
        client_reconnects: p.client_reconnects,
        watcher_stalls: p.watcher_stalls,
        catchup_rounds: p.catchup_rounds,
        deferred_events: p.deferred_events,
        skipped_events: p.skipped_events,
        live_pushes: p.live_pushes,
        bookmarks_sent: p.bookmarks_sent,
        history_capacity: p.history_capacity,
        safety_violations: p.safety_violations,
        liveness_violations: p.liveness_violations,
        violations: p.violations,
        series: p.samples,
    }
}

/// The report of one scenario run: every variant on the same input.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// Scenario name.
    pub scenario: String,
    /// Its story.
    pub description: String,
    /// The seed.
    pub seed: u64,
    /// Whether `--short` scaled it down.
    pub short: bool,
    /// Watchers in the scenario.
    pub watchers: usize,
    /// The cost table used.
    pub costs: crate::costs::CostTable,
    /// One outcome per variant.
    pub variants: Vec<Outcome>,
}

impl Report {
    /// Whether every variant passed the oracle (no safety or liveness violation).
    #[must_use]
    pub fn oracle_passed(&self) -> bool {
        self.variants
            .iter()
            .all(|v| v.safety_violations == 0 && v.liveness_violations == 0)
    }

    /// The variant named `name`.
    #[must_use]
    pub fn variant(&self, name: &str) -> Option<&Outcome> {
        self.variants.iter().find(|v| v.name == name)
    }

    /// Writes `report.json` and `report.md` into `dir` (the plots: [`crate::plot::write_all`]).
    ///
    /// # Errors
    /// The directory or a file cannot be written.
    pub fn write(&self, dir: &Path) -> Result<(), SimError> {
        std::fs::create_dir_all(dir)
            .map_err(|e| SimError::Io(format!("{}: {e}", dir.display())))?;
        let json = serde_json::to_string_pretty(self).map_err(|e| SimError::Io(e.to_string()))?;
        let io = |e: std::io::Error| SimError::Io(e.to_string());
        std::fs::write(dir.join("report.json"), json).map_err(io)?;
        std::fs::write(dir.join("report.md"), self.markdown()).map_err(io)?;
        Ok(())
    }

    /// The Markdown summary.
    #[must_use]
    pub fn markdown(&self) -> String {
        let mut md = String::new();
        let _ = writeln!(md, "# Simulation: {}\n", self.scenario);
        if !self.description.is_empty() {
            let _ = writeln!(md, "{}\n", self.description.trim());
        }
        let _ = writeln!(
            md,
            "Seed {}, {} watchers{}. Latency is from commit to the client taking the event, on the virtual clock, with the dispatcher and the catch-up worker each charged per operation (see `costs` in report.json).\n",
            self.seed,
            self.watchers,
            if self.short { ", short mode" } else { "" }
        );
        let names: Vec<&str> = self.variants.iter().map(|v| v.name.as_str()).collect();
        let _ = writeln!(md, "## Side by side\n");
        let _ = writeln!(md, "| measure | {} |", names.join(" | "));
        let _ = writeln!(md, "|---|{}|", vec!["---"; names.len()].join("|"));
        let row = |md: &mut String, label: &str, f: &dyn Fn(&Outcome) -> String| {
            let cells: Vec<String> = self.variants.iter().map(f).collect();
            let _ = writeln!(md, "| {label} | {} |", cells.join(" | "));
        };
        row(
            &mut md,
            "healthy latency p50 / p99 / p99.9 / max (ms)",
            &|v| q(&v.healthy_latency_ms),
        );
        row(
            &mut md,
            "other latency p50 / p99 / p99.9 / max (ms)",
            &|v| q(&v.slow_latency_ms),
        );
        row(&mut md, "terminations (all reasons)", &|v| {
            v.terminations_total.to_string()
        });
        for reason in [
            "unresponsive",
            "resource_expired",
            "resource_expired_initial",
            "initial_no_progress",
            "deadline",
        ] {
            row(&mut md, &format!("&nbsp;&nbsp;{reason}"), &|v| {
                v.terminations_by_reason
                    .get(reason)
                    .copied()
                    .unwrap_or(0)
                    .to_string()
            });
        }
        row(&mut md, "healthy-group terminations", &|v| {
            v.groups
                .iter()
                .filter(|g| g.healthy)
                .map(|g| g.terminations.values().sum::<u64>())
                .sum::<u64>()
                .to_string()
        });
        row(&mut md, "events dispatched", &|v| {
            v.events_dispatched.to_string()
        });
        row(&mut md, "serializations per event", &|v| {
            format!("{:.3}", v.serializations_per_event)
        });
        row(&mut md, "relist objects sent", &|v| {
            v.relist_objects.to_string()
        });
        row(&mut md, "reconnects", &|v| v.client_reconnects.to_string());
        row(&mut md, "stalls / catch-up rounds", &|v| {
            format!("{} / {}", v.watcher_stalls, v.catchup_rounds)
        });
        row(&mut md, "passes (busy)", &|v| {
            format!("{} ({})", v.passes.count, v.passes.busy)
        });
        row(&mut md, "history reads per pass p50 / max", &|v| {
            format!(
                "{} / {}",
                v.passes.history_reads.p50, v.passes.history_reads.max
            )
        });
        row(&mut md, "pushes per pass p50 / max", &|v| {
            format!("{} / {}", v.passes.pushes.p50, v.passes.pushes.max)
        });
        row(&mut md, "members per pass p50 / max", &|v| {
            format!("{} / {}", v.passes.members.p50, v.passes.members.max)
        });
        row(&mut md, "pass duration p50 / max (µs)", &|v| {
            format!(
                "{:.1} / {:.1}",
                v.passes.duration_us.p50, v.passes.duration_us.max
            )
        });
        row(&mut md, "pass period p50 / p99 (ms)", &|v| {
            format!(
                "{:.2} / {:.2}",
                v.passes.period_ms.p50, v.passes.period_ms.p99
            )
        });
        row(&mut md, "passes waited p99 / max (starved)", &|v| {
            format!(
                "{} / {} ({})",
                v.passes.passes_waited.p99, v.passes.passes_waited.max, v.passes.starved
            )
        });
        row(&mut md, "dispatcher utilization / blocked (s)", &|v| {
            format!(
                "{:.1}% / {:.3}",
                v.dispatcher_utilization * 100.0,
                v.dispatcher_blocked_s
            )
        });
        row(&mut md, "worker utilization", &|v| {
            format!("{:.2}%", v.worker_utilization * 100.0)
        });
        row(&mut md, "largest dispatcher backlog (revisions)", &|v| {
            v.incoming_max.to_string()
        });
        row(&mut md, "peak items queued (all queues)", &|v| {
            v.peak_queued_items.to_string()
        });
        row(&mut md, "peak queue occupancy", &|v| {
            format!("{:.1}%", v.peak_queue_occupancy * 100.0)
        });
        row(&mut md, "live-path skipped events (must be 0)", &|v| {
            v.skipped_events.to_string()
        });
        row(&mut md, "oracle: safety / liveness violations", &|v| {
            format!("{} / {}", v.safety_violations, v.liveness_violations)
        });
        row(&mut md, "trace hash", &|v| format!("`{}`", v.trace_hash));
        let _ = writeln!(md, "\n## Groups\n");
        let _ = writeln!(
            md,
            "| variant | group | watchers | healthy | events | latency p50 / p99 / p99.9 / max (ms) | terminations | resyncs | resync after resume p50 / max (s) | relist objects |"
        );
        let _ = writeln!(md, "|---|---|---|---|---|---|---|---|---|---|");
        for v in &self.variants {
            for g in &v.groups {
                let terms: Vec<String> = g
                    .terminations
                    .iter()
                    .map(|(r, n)| format!("{r}: {n}"))
                    .collect();
                let _ = writeln!(
                    md,
                    "| {} | {} | {} | {} | {} | {} | {} | {} | {:.3} / {:.3} | {} |",
                    v.name,
                    g.name,
                    g.watchers,
                    if g.healthy { "yes" } else { "no" },
                    g.events,
                    q(&g.latency_ms),
                    if terms.is_empty() {
                        "0".to_owned()
                    } else {
                        terms.join(", ")
                    },
                    g.resyncs,
                    g.resync_after_resume_s.p50,
                    g.resync_after_resume_s.max,
                    g.relist_objects
                );
            }
        }
        let any_episodes = self.variants.iter().any(|v| !v.resync_by_group.is_empty());
        if any_episodes {
            let _ = writeln!(md, "\n## Resync time against the fluid bound\n");
            let _ = writeln!(
                md,
                "The fluid bound is `lag / (read rate - selected write rate)`: how long a reader that drains at its rate needs to cross its backlog while new events keep coming.\n"
            );
            let _ = writeln!(
                md,
                "| variant | group | episodes | unsynced p50 / p99 / max (s) | after stall end p50 / p99 / max (s) | fluid bound p50 (s) |"
            );
            let _ = writeln!(md, "|---|---|---|---|---|---|");
            for v in &self.variants {
                for r in &v.resync_by_group {
                    let _ = writeln!(
                        md,
                        "| {} | {} | {} | {:.3} / {:.3} / {:.3} | {:.3} / {:.3} / {:.3} | {} |",
                        v.name,
                        r.group,
                        r.episodes,
                        r.unsynced_s.p50,
                        r.unsynced_s.p99,
                        r.unsynced_s.max,
                        r.after_resume_s.p50,
                        r.after_resume_s.p99,
                        r.after_resume_s.max,
                        r.fluid_bound_p50_s
                            .map_or("-".to_owned(), |b| format!("{b:.3}"))
                    );
                }
            }
        }
        let small: Vec<&WatcherLatency> = self
            .variants
            .iter()
            .flat_map(|v| v.per_watcher_latency.iter())
            .collect();
        if !small.is_empty() && small.len() <= 64 {
            let _ = writeln!(md, "\n## Per watcher (small groups)\n");
            let _ = writeln!(
                md,
                "| variant | watcher | group | events | p50 / p99 / p99.9 / max (ms) |"
            );
            let _ = writeln!(md, "|---|---|---|---|---|");
            for v in &self.variants {
                for w in &v.per_watcher_latency {
                    let _ = writeln!(
                        md,
                        "| {} | {} | {} | {} | {} |",
                        v.name,
                        w.watcher,
                        w.group,
                        w.latency_ms.count,
                        q(&w.latency_ms)
                    );
                }
            }
        }
        let _ = writeln!(md, "\n## Terminations\n");
        for v in &self.variants {
            let _ = writeln!(md, "- **{}**: {} in total", v.name, v.terminations_total);
            for t in v.terminations.iter().take(12) {
                let _ = writeln!(
                    md,
                    "  - {:.3} s: watcher {} ({}), connection {}: {}",
                    t.time_s, t.watcher, t.group, t.connection, t.reason
                );
            }
            if v.terminations.len() > 12 {
                let _ = writeln!(md, "  - ... (all in report.json)");
            }
        }
        let violations: Vec<&ViolationRecord> = self
            .variants
            .iter()
            .flat_map(|v| v.violations.iter())
            .collect();
        let _ = writeln!(md, "\n## Oracle\n");
        if violations.is_empty() {
            let _ = writeln!(
                md,
                "Every connection was checked as it read: Ordered, Unique, Reliable (no gap), Bookmarkable, Selection and Initial state held, and every never-terminated connection that could read was complete at the end."
            );
        } else {
            for v in violations.iter().take(20) {
                let _ = writeln!(
                    md,
                    "- {} at {:.3} s, watcher {} ({}), connection {}: **{}** {}",
                    if v.safety { "safety" } else { "liveness" },
                    v.time_s,
                    v.watcher,
                    v.group,
                    v.connection,
                    v.guarantee,
                    v.message
                );
            }
        }
        let _ = writeln!(
            md,
            "\n## Plots\n\n![latency CDF](latency_cdf.png)\n\n![unsynced watchers](unsynced.png)\n\n![terminations](terminations.png)\n\n![resync time](resync.png)\n"
        );
        md
    }
}

fn q(s: &Summary) -> String {
    if s.count == 0 {
        return "-".to_owned();
    }
    format!("{} / {} / {} / {}", f(s.p50), f(s.p99), f(s.p999), f(s.max))
}

fn f(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.4}")
    }
}

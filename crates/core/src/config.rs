//! Every tunable of the core, with units, defaults and validation.
//!
//! ## Defaults
//! The defaults are the initial values of KEP-6268 ("Initial values") and of the Kubernetes
//! watch cache (`eventFreshDuration`, history bounds, channel sizing, bookmark frequency). They
//! are starting points that the simulator and the benchmarks revise; each field says where its
//! value comes from.

use std::fmt;
use std::time::Duration;

/// How the dispatcher treats a watcher whose queue is full.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum WatchMode {
    /// KEP-6268 target design: the watcher becomes unsynced and is served from history by the
    /// catch-up worker; it is only ever terminated with an honest 410 when the history no longer
    /// holds what it needs.
    #[default]
    StallResume,
    /// Kubernetes' pre-KEP behaviour, for comparison: blocked watchers are waited for on a
    /// shared time budget, then force-closed as `unresponsive`.
    Legacy,
}

impl WatchMode {
    /// The name used on the command line and in reports.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            WatchMode::StallResume => "stall-resume",
            WatchMode::Legacy => "legacy",
        }
    }
}

impl std::str::FromStr for WatchMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "stall-resume" => Ok(WatchMode::StallResume),
            "legacy" => Ok(WatchMode::Legacy),
            other => Err(format!(
                "unknown watch mode {other:?} (expected stall-resume or legacy)"
            )),
        }
    }
}

/// The order in which a catch-up pass considers unsynced watchers with room.
///
/// The KEP's order is the default; the other variants exist so the simulator can compare them
/// on the same input.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum CandidateOrder {
    /// Free share of the queue (descending), then new-or-drained first, then rotation from the
    /// persistent cursor (KEP-6268 step 1).
    #[default]
    FreeShareThenRotation,
    /// Rotation from the cursor only (pure round robin).
    RotationOnly,
    /// Oldest position first (serve the laggards first).
    OldestFirst,
}

impl std::str::FromStr for CandidateOrder {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "free-share" => Ok(CandidateOrder::FreeShareThenRotation),
            "rotation" => Ok(CandidateOrder::RotationOnly),
            "oldest-first" => Ok(CandidateOrder::OldestFirst),
            other => Err(format!(
                "unknown candidate order {other:?} (expected free-share, rotation or oldest-first)"
            )),
        }
    }
}

/// Who moves events from the history into an unsynced watcher's queue.
///
/// Both keep the worker in charge of expiry, deadlines, ordering and the hand-off; the
/// simulator compares them on the same input (docs/ARCHITECTURE.md records the comparison).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum CatchUpDesign {
    /// The worker pushes in shared cohort passes (KEP-6268): one history read per stretch for
    /// every member, at most one queue capacity per member and pass.
    Cohort,
    /// The watcher's own consumer refills its empty queue from the shared history (the very
    /// events, with their cached encodings), a queue capacity at a time, as fast as it reads;
    /// the worker installs the refill, takes it back to end or hand off the watcher, and
    /// streams initial states in passes.
    #[default]
    ConsumerDriven,
}

impl CatchUpDesign {
    /// The name used on the command line and in reports.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            CatchUpDesign::Cohort => "cohort",
            CatchUpDesign::ConsumerDriven => "consumer",
        }
    }
}

impl std::str::FromStr for CatchUpDesign {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "cohort" => Ok(CatchUpDesign::Cohort),
            "consumer" => Ok(CatchUpDesign::ConsumerDriven),
            other => Err(format!(
                "unknown catch-up design {other:?} (expected cohort or consumer)"
            )),
        }
    }
}

/// The tunables of one watch cache. Build with [`CacheConfig::default`] and override fields;
/// call [`CacheConfig::validate`] before use (the cache constructor does).
#[derive(Clone, Debug, PartialEq)]
pub struct CacheConfig {
    /// Stall-and-resume (default) or legacy force-close.
    pub mode: WatchMode,
    /// Events younger than this are "fresh": the history grows rather than evict them.
    /// Default 75 s (Kubernetes `eventFreshDuration`).
    pub event_fresh_duration: Duration,
    /// Smallest history capacity, in events. Default 100 (Kubernetes).
    pub history_capacity_min: usize,
    /// Largest history capacity, in events. Default 102,400 (Kubernetes, for a 75 s window).
    pub history_capacity_max: usize,
    /// Largest size of the history, in bytes: the memory of the objects its events carry
    /// ([`crate::Object::weight`]: decoded body and encoding; see [`crate::history`]); the
    /// oldest revisions are evicted past it, below `history_capacity_min` if need be (the
    /// newest revision always stays). Default 1 GiB (watchkeeper's: with the count bound
    /// alone, 102,400 events of 1.5 MiB objects, etcd's largest value, would hold over 150 GiB
    /// decoded; 1 GiB holds the count bound's 102,400 events of objects weighing 10 KiB — a
    /// 1 KiB ConfigMap weighs about 4 KiB decoded, a Pod 11 to 16 times its JSON — so it
    /// binds only on large objects).
    pub history_bytes_max: usize,
    /// Smallest per-watcher queue, in events. Default 10 (Kubernetes).
    pub queue_capacity_min: usize,
    /// Largest per-watcher queue, in events, also the bound of a queue's growth (see
    /// [`crate::queue`]). Default 1,000 (Kubernetes).
    pub queue_capacity_max: usize,
    /// Largest number of watchers served by one catch-up pass. Default 512 (KEP).
    pub pass_members_max: usize,
    /// Scan units one pass may spend across all cohorts: a scanned history event or snapshot
    /// object costs 1, opening a history interval costs [`CacheConfig::interval_open_cost`].
    /// Default 2,000 (KEP).
    pub pass_scan_units_max: usize,
    /// Scan units charged for opening one history interval. Default 64 (KEP).
    pub interval_open_cost: usize,
    /// Pushes one pass may make across all cohorts; the end-of-pass retry rounds get the same
    /// allowance again. Default 2,000 (KEP).
    pub pass_pushes_max: usize,
    /// The order in which a pass considers candidates. Default: the KEP's.
    pub candidate_order: CandidateOrder,
    /// Who fills an unsynced watcher's queue from the history. Default: consumer-driven
    /// (chosen by the simulator's comparison, docs/ARCHITECTURE.md).
    pub catchup_design: CatchUpDesign,
    /// Pass period while nothing special happens. Default 10 ms (KEP).
    pub pass_period_normal: Duration,
    /// Shortest busy period. Default 1 ms (KEP).
    pub pass_period_busy_min: Duration,
    /// Longest busy period. Default 10 ms (KEP).
    pub pass_period_busy_max: Duration,
    /// Period after a pass that served and expired nothing. Default 100 ms (KEP).
    pub pass_period_idle: Duration,
    /// Busy periods are the measured pass duration times this factor, so passes take at most
    /// 1/factor of a core. Default 10 (a tenth of a core, KEP).
    pub pass_busy_factor: u32,
    /// A watch still in its initial phase that accepts nothing for this long is terminated
    /// (`initial_no_progress`). Default 30 s (kubernetes#141899).
    pub initial_no_progress_timeout: Duration,
    /// Periodic bookmark interval for watchers that allow bookmarks. Default 60 s (Kubernetes).
    pub bookmark_interval: Duration,
    /// A bookmark is sent this long before a watcher's deadline. Default 2 s (Kubernetes).
    pub bookmark_before_deadline: Duration,
    /// How long a watch with `sendInitialEvents` and a minimum resource version above the cache
    /// waits for the cache before failing with 504 "Too large resource version". Default 3 s.
    pub fresh_wait_max: Duration,
    /// The resource's indexed trigger field (e.g. `spec.nodeName` for pods), if any. Watchers
    /// with an exact field selector on it are visited only by events that carry their value.
    pub trigger_field: Option<String>,
    /// Legacy mode: the shared dispatch wait budget refills by this much per second of time.
    /// Default 50 ms (Kubernetes `timeBudget`).
    pub legacy_budget_refill_per_second: Duration,
    /// Legacy mode: the budget never exceeds this. Default 100 ms (Kubernetes).
    pub legacy_budget_max: Duration,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            mode: WatchMode::StallResume,
            event_fresh_duration: Duration::from_secs(75),
            history_capacity_min: 100,
            history_capacity_max: 102_400,
            history_bytes_max: 1 << 30,
            queue_capacity_min: 10,
            queue_capacity_max: 1_000,
            pass_members_max: 512,
            pass_scan_units_max: 2_000,
            interval_open_cost: 64,
            pass_pushes_max: 2_000,
            candidate_order: CandidateOrder::FreeShareThenRotation,
            catchup_design: CatchUpDesign::ConsumerDriven,
            pass_period_normal: Duration::from_millis(10),
            pass_period_busy_min: Duration::from_millis(1),
            pass_period_busy_max: Duration::from_millis(10),
            pass_period_idle: Duration::from_millis(100),
            pass_busy_factor: 10,
            initial_no_progress_timeout: Duration::from_secs(30),
            bookmark_interval: Duration::from_secs(60),
            bookmark_before_deadline: Duration::from_secs(2),
            fresh_wait_max: Duration::from_secs(3),
            trigger_field: None,
            legacy_budget_refill_per_second: Duration::from_millis(50),
            legacy_budget_max: Duration::from_millis(100),
        }
    }
}

/// A configuration value out of its allowed range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// The field name.
    pub field: &'static str,
    /// What is wrong with it.
    pub reason: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid {}: {}", self.field, self.reason)
    }
}

impl std::error::Error for ConfigError {}

impl CacheConfig {
    /// Checks every field's range and the relations between fields.
    ///
    /// # Errors
    /// The first field found out of range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        fn check(ok: bool, field: &'static str, reason: &str) -> Result<(), ConfigError> {
            if ok {
                Ok(())
            } else {
                Err(ConfigError {
                    field,
                    reason: reason.to_owned(),
                })
            }
        }
        check(
            !self.event_fresh_duration.is_zero(),
            "event_fresh_duration",
            "must be positive",
        )?;
        check(
            self.history_capacity_min >= 1,
            "history_capacity_min",
            "must be at least 1",
        )?;
        check(
            self.history_capacity_max >= self.history_capacity_min,
            "history_capacity_max",
            "must be at least history_capacity_min",
        )?;
        check(
            self.history_capacity_max <= 1 << 30,
            "history_capacity_max",
            "must be at most 2^30",
        )?;
        check(
            self.history_bytes_max >= 1 << 10,
            "history_bytes_max",
            "must be at least 1024",
        )?;
        check(
            self.queue_capacity_min >= 1,
            "queue_capacity_min",
            "must be at least 1",
        )?;
        check(
            self.queue_capacity_max >= self.queue_capacity_min,
            "queue_capacity_max",
            "must be at least queue_capacity_min",
        )?;
        check(
            self.pass_members_max >= 1,
            "pass_members_max",
            "must be at least 1",
        )?;
        check(
            self.pass_scan_units_max > self.interval_open_cost,
            "pass_scan_units_max",
            "must exceed interval_open_cost so a pass can scan at least one event",
        )?;
        check(
            self.pass_pushes_max >= 1,
            "pass_pushes_max",
            "must be at least 1",
        )?;
        check(
            !self.pass_period_normal.is_zero(),
            "pass_period_normal",
            "must be positive",
        )?;
        check(
            !self.pass_period_busy_min.is_zero(),
            "pass_period_busy_min",
            "must be positive",
        )?;
        check(
            self.pass_period_busy_max >= self.pass_period_busy_min,
            "pass_period_busy_max",
            "must be at least pass_period_busy_min",
        )?;
        check(
            self.pass_period_idle >= self.pass_period_normal,
            "pass_period_idle",
            "must be at least pass_period_normal",
        )?;
        check(
            self.pass_busy_factor >= 1,
            "pass_busy_factor",
            "must be at least 1",
        )?;
        check(
            !self.initial_no_progress_timeout.is_zero(),
            "initial_no_progress_timeout",
            "must be positive",
        )?;
        check(
            !self.bookmark_interval.is_zero(),
            "bookmark_interval",
            "must be positive",
        )?;
        check(
            self.legacy_budget_max >= self.legacy_budget_refill_per_second / 1000,
            "legacy_budget_max",
            "must not be below a millisecond's refill",
        )?;
        if let Some(field) = &self.trigger_field {
            check(!field.is_empty(), "trigger_field", "must not be empty")?;
        }
        Ok(())
    }

    /// The queue capacity Kubernetes would give a new watcher for the current history
    /// capacity: `clamp(ceil(history_capacity / window_seconds), min, max)`.
    #[must_use]
    pub fn queue_capacity_for(&self, history_capacity: usize) -> usize {
        let window_seconds = self.event_fresh_duration.as_secs().max(1) as usize;
        history_capacity
            .div_ceil(window_seconds)
            .clamp(self.queue_capacity_min, self.queue_capacity_max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_match_the_kep() {
        let config = CacheConfig::default();
        config.validate().unwrap();
        assert_eq!(config.pass_members_max, 512);
        assert_eq!(config.pass_scan_units_max, 2000);
        assert_eq!(config.pass_pushes_max, 2000);
        assert_eq!(config.queue_capacity_for(100), 10);
        assert_eq!(config.queue_capacity_for(102_400), 1000);
        assert_eq!(config.queue_capacity_for(7_500), 100);
    }

    #[test]
    fn validation_names_the_field() {
        let config = CacheConfig {
            history_capacity_max: 10,
            ..CacheConfig::default()
        };
        assert_eq!(config.validate().unwrap_err().field, "history_capacity_max");
        let config = CacheConfig {
            pass_scan_units_max: 64,
            ..CacheConfig::default()
        };
        assert_eq!(config.validate().unwrap_err().field, "pass_scan_units_max");
    }
}

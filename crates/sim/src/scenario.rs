//! Scenario files: what is written, who watches and how they read, and the algorithm.
//!
//! A scenario is a TOML file (see `scenarios/*.toml` for commented examples). Times are in
//! seconds (`*_s`) or milliseconds (`*_ms`) as the field name says. Every field except `name`,
//! `duration_s`, `writes` and `groups` has a default. `[short]` scales a scenario down for tests
//! and quick looks (`--short`).

use std::time::Duration;

use serde::{Deserialize, Serialize};
use watchkeeper_core::{CacheConfig, CandidateOrder, CatchUpDesign, WatchMode};

use crate::SimError;

/// A whole scenario.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Short name, used in reports.
    pub name: String,
    /// One paragraph: what this scenario models.
    #[serde(default)]
    pub description: String,
    /// How long writes and client behaviour run (virtual seconds).
    pub duration_s: f64,
    /// The liveness phase after `duration_s`: no writes, stalls end, every client reads at full
    /// speed; then every open, never-terminated connection must be complete.
    #[serde(default = "default_drain_s")]
    pub drain_s: f64,
    /// Latencies before this time are not recorded (registration storms of large scenarios).
    #[serde(default)]
    pub warmup_s: f64,
    /// Time-series sampling interval.
    #[serde(default = "default_sample_s")]
    pub sample_interval_s: f64,
    /// A watcher served after waiting more passes than this is flagged as starved.
    #[serde(default = "default_starvation_passes")]
    pub starvation_passes_max: u64,
    /// Groups up to this size get per-watcher latency percentiles in the report.
    #[serde(default = "default_per_watcher_max")]
    pub per_watcher_detail_max: usize,
    /// The object population.
    #[serde(default)]
    pub objects: Objects,
    /// The write process.
    pub writes: Writes,
    /// Overrides of the core's configuration for every variant.
    #[serde(default)]
    pub cache: ConfigOverrides,
    /// Watcher groups.
    pub groups: Vec<Group>,
    /// Periods in which the server itself does nothing.
    #[serde(default)]
    pub halts: Vec<Halt>,
    /// Named variants for `--compare`.
    #[serde(default)]
    pub variants: Vec<VariantSpec>,
    /// Variants compared when the command line names none.
    #[serde(default)]
    pub compare: Vec<String>,
    /// How `--short` scales this scenario down.
    #[serde(default)]
    pub short: Short,
}

fn default_drain_s() -> f64 {
    5.0
}
fn default_sample_s() -> f64 {
    0.1
}
fn default_starvation_passes() -> u64 {
    50
}
fn default_per_watcher_max() -> usize {
    16
}

/// `--short`: a scaled-down run for tests.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Short {
    /// Replaces `duration_s`; every time in the scenario is scaled by the same factor.
    pub duration_s: Option<f64>,
    /// Replaces `drain_s`.
    pub drain_s: Option<f64>,
    /// Multiplies every group's count (at least one watcher stays).
    #[serde(default = "one")]
    pub watcher_scale: f64,
    /// Multiplies the object count.
    #[serde(default = "one")]
    pub object_scale: f64,
    /// Multiplies write rates.
    #[serde(default = "one")]
    pub rate_scale: f64,
}

fn one() -> f64 {
    1.0
}

impl Default for Short {
    fn default() -> Self {
        Short {
            duration_s: None,
            drain_s: None,
            watcher_scale: 1.0,
            object_scale: 1.0,
            rate_scale: 1.0,
        }
    }
}

/// The objects of the resource.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Objects {
    /// Objects listed at start (slots; creates and deletes move within them).
    pub count: usize,
    /// Namespaces.
    pub namespaces: usize,
    /// Zipf exponent of objects over namespaces (0: uniform).
    pub namespace_skew: f64,
    /// Mean body size in bytes (padding added to the JSON).
    pub size_bytes: usize,
    /// Body sizes are uniform in `size_bytes * (1 ± size_jitter)`.
    pub size_jitter: f64,
    /// Label dimensions: each object gets one value per dimension.
    pub labels: Vec<LabelDimension>,
    /// Distinct values of the trigger field (e.g. nodes for `spec.nodeName`); 0: no such field.
    pub nodes: usize,
    /// Zipf exponent of objects over nodes.
    pub node_skew: f64,
    /// One extra object, `hot/hot-0`, that bursts can target (e.g. a large Endpoints object).
    pub hot_size_bytes: Option<usize>,
}

impl Default for Objects {
    fn default() -> Self {
        Objects {
            count: 1000,
            namespaces: 10,
            namespace_skew: 0.0,
            size_bytes: 1024,
            size_jitter: 0.25,
            labels: vec![LabelDimension {
                key: "app".to_owned(),
                values: 10,
                skew: 1.0,
            }],
            nodes: 0,
            node_skew: 0.0,
            hot_size_bytes: None,
        }
    }
}

/// One label key and how its values spread.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LabelDimension {
    /// The key; values are `{key}-{i}`.
    pub key: String,
    /// Distinct values.
    pub values: usize,
    /// Zipf exponent over the values.
    #[serde(default)]
    pub skew: f64,
}

/// How writes arrive.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Process {
    /// Evenly spaced.
    #[default]
    Constant,
    /// Exponential inter-arrival times.
    Poisson,
}

/// The write process.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Writes {
    /// Revisions per second outside bursts and ramps.
    pub rate: f64,
    /// Constant or Poisson arrivals.
    #[serde(default)]
    pub process: Process,
    /// Events per revision (distinct objects, one transaction).
    #[serde(default = "one_usize")]
    pub events_per_revision: usize,
    /// Zipf exponent of which object an update hits (0: uniform).
    #[serde(default)]
    pub object_skew: f64,
    /// Share of events that create an object (in a free slot).
    #[serde(default)]
    pub create_fraction: f64,
    /// Share of events that delete an object.
    #[serde(default)]
    pub delete_fraction: f64,
    /// Share of updates that redraw the object's labels.
    #[serde(default)]
    pub relabel_fraction: f64,
    /// Share of updates that move the object to another trigger value (node).
    #[serde(default)]
    pub move_fraction: f64,
    /// Bursts: a different rate for a while.
    #[serde(default)]
    pub bursts: Vec<Burst>,
    /// Ramps: the rate moves linearly between two values.
    #[serde(default)]
    pub ramps: Vec<Ramp>,
}

fn one_usize() -> usize {
    1
}

/// A burst of writes.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Burst {
    /// Start.
    pub at_s: f64,
    /// Length.
    pub duration_s: f64,
    /// Revisions per second during the burst.
    pub rate: f64,
    /// Every write of the burst updates the hot object.
    #[serde(default)]
    pub hot: bool,
    /// Repeat every this many seconds until the end.
    pub every_s: Option<f64>,
}

/// A linear ramp of the write rate.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Ramp {
    /// Start.
    pub from_s: f64,
    /// End.
    pub to_s: f64,
    /// Rate at the start.
    pub rate_from: f64,
    /// Rate at the end.
    pub rate_to: f64,
}

/// What a watcher selects.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Everything.
    #[default]
    Cluster,
    /// One namespace (watcher `i` watches namespace `i mod namespaces`).
    Namespace,
    /// One object (watcher `i` watches slot `i mod count`), by `metadata.name` field selector.
    Object,
    /// One trigger value (watcher `i` watches node `i mod nodes`), via the trigger index.
    Node,
    /// The hot object.
    Hot,
}

/// Where a (re)connecting watch starts.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Start {
    /// `WatchStart::Now`.
    #[default]
    Now,
    /// A streaming list: `WatchStart::InitialState`.
    InitialState,
    /// `WatchStart::After(rv)` with `rv` the oldest servable revision (replays the history).
    History,
}

/// A group of watchers that behave alike.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Group {
    /// Name in reports.
    pub name: String,
    /// Watchers.
    pub count: usize,
    /// What each watcher selects.
    #[serde(default)]
    pub scope: Scope,
    /// An extra label selector (Kubernetes syntax).
    #[serde(default)]
    pub label_selector: Option<String>,
    /// Queue capacity; default: the core's sizing from the history capacity.
    #[serde(default)]
    pub queue_capacity: Option<usize>,
    /// Events read per second; 0: as fast as they arrive.
    #[serde(default)]
    pub read_rate: f64,
    /// Bytes read per second (encoded size); 0: unlimited. Both limits apply.
    #[serde(default)]
    pub read_bytes_rate: f64,
    /// Each watcher's rates are scaled by `1 ± read_jitter` (uniform).
    #[serde(default)]
    pub read_jitter: f64,
    /// Delay between an item becoming available and an idle client taking it.
    #[serde(default)]
    pub reaction_us: f64,
    /// How the first watch starts.
    #[serde(default)]
    pub start: Start,
    /// When the group registers.
    #[serde(default)]
    pub start_at_s: f64,
    /// Registrations spread uniformly over this long.
    #[serde(default)]
    pub start_spread_s: f64,
    /// Whether the client accepts bookmarks (always on for initial-state starts).
    #[serde(default = "yes")]
    pub bookmarks: bool,
    /// Request deadline (`timeoutSeconds`); the client reconnects from its last RV.
    #[serde(default)]
    pub deadline_s: Option<f64>,
    /// Deadlines are scaled by `1 ± deadline_jitter`.
    #[serde(default)]
    pub deadline_jitter: f64,
    /// Backoff before reconnecting after the server ended the watch.
    #[serde(default = "default_backoff")]
    pub reconnect_backoff_s: f64,
    /// Backoffs are scaled by `1 ± reconnect_jitter`.
    #[serde(default = "half")]
    pub reconnect_jitter: f64,
    /// After a 410, re-list with a streaming list (else stop).
    #[serde(default = "yes")]
    pub relist_on_expired: bool,
    /// The client itself closes and reopens its watch (from its last RV) this often.
    #[serde(default)]
    pub reconnect_every_s: Option<f64>,
    /// Stall episodes.
    #[serde(default)]
    pub stalls: Vec<Stall>,
    /// Network blips that disconnect part of the group.
    #[serde(default)]
    pub disconnects: Vec<Disconnect>,
    /// Whether the report counts this group as healthy; default: no stalls, no read limit below
    /// the write rate, no disconnects.
    #[serde(default)]
    pub healthy: Option<bool>,
}

fn yes() -> bool {
    true
}
fn default_backoff() -> f64 {
    1.0
}
fn half() -> f64 {
    0.5
}

/// A stall episode: the chosen watchers stop reading.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Stall {
    /// Start.
    pub at_s: f64,
    /// Length.
    pub duration_s: f64,
    /// Share of the group that stalls (the same watchers at once: a correlated stall).
    #[serde(default = "one")]
    pub fraction: f64,
    /// Each watcher's start is shifted by up to this much (uniform).
    #[serde(default)]
    pub jitter_s: f64,
    /// Repeat every this many seconds until the end.
    #[serde(default)]
    pub every_s: Option<f64>,
    /// Share of the stalled watchers that never read again.
    #[serde(default)]
    pub never_recover_fraction: f64,
}

/// A network blip: part of the group loses its connection at once and reconnects.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Disconnect {
    /// When.
    pub at_s: f64,
    /// Share of the group.
    pub fraction: f64,
    /// Backoff before reconnecting (scaled by the group's jitter).
    #[serde(default = "default_backoff")]
    pub backoff_s: f64,
    /// While disconnected, the client also stops reading what was queued (it is gone).
    #[serde(default)]
    pub offline_s: f64,
}

/// The server does nothing for a while.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Halt {
    /// Start.
    pub at_s: f64,
    /// Length.
    pub duration_s: f64,
    /// Halt the dispatcher.
    #[serde(default = "yes")]
    pub dispatcher: bool,
    /// Halt the catch-up worker.
    #[serde(default = "yes")]
    pub worker: bool,
    /// Halt the watchers' goroutines too (nothing is written to the network).
    #[serde(default = "yes")]
    pub clients: bool,
}

/// A named set of configuration overrides.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct VariantSpec {
    /// Name on the command line and in reports.
    pub name: String,
    /// The overrides.
    #[serde(flatten)]
    pub overrides: ConfigOverrides,
}

/// Overrides of [`CacheConfig`]; every field of it, with units in the name.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)]
pub struct ConfigOverrides {
    /// `stall-resume` or `legacy`.
    pub mode: Option<String>,
    pub event_fresh_duration_s: Option<f64>,
    pub history_capacity_min: Option<usize>,
    pub history_capacity_max: Option<usize>,
    pub queue_capacity_min: Option<usize>,
    pub queue_capacity_max: Option<usize>,
    pub pass_members_max: Option<usize>,
    pub pass_scan_units_max: Option<usize>,
    pub interval_open_cost: Option<usize>,
    pub pass_pushes_max: Option<usize>,
    /// `free-share`, `rotation` or `oldest-first`.
    pub candidate_order: Option<String>,
    /// `cohort` or `consumer` (who fills an unsynced watcher's queue).
    pub catchup_design: Option<String>,
    pub pass_period_normal_ms: Option<f64>,
    pub pass_period_busy_min_ms: Option<f64>,
    pub pass_period_busy_max_ms: Option<f64>,
    pub pass_period_idle_ms: Option<f64>,
    pub pass_busy_factor: Option<u32>,
    pub initial_no_progress_timeout_s: Option<f64>,
    pub bookmark_interval_s: Option<f64>,
    pub bookmark_before_deadline_s: Option<f64>,
    pub fresh_wait_max_s: Option<f64>,
    pub trigger_field: Option<String>,
    pub legacy_budget_refill_per_second_ms: Option<f64>,
    pub legacy_budget_max_ms: Option<f64>,
}

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s.max(0.0))
}
fn millis(ms: f64) -> Duration {
    Duration::from_secs_f64(ms.max(0.0) / 1000.0)
}

impl ConfigOverrides {
    /// Applies the overrides onto `config`.
    ///
    /// # Errors
    /// An unknown mode or candidate order.
    pub fn apply(&self, config: &mut CacheConfig) -> Result<(), SimError> {
        if let Some(mode) = &self.mode {
            config.mode = mode.parse::<WatchMode>().map_err(SimError::Scenario)?;
        }
        if let Some(design) = &self.catchup_design {
            config.catchup_design = design
                .parse::<CatchUpDesign>()
                .map_err(SimError::Scenario)?;
        }
        if let Some(order) = &self.candidate_order {
            config.candidate_order = order
                .parse::<CandidateOrder>()
                .map_err(SimError::Scenario)?;
        }
        macro_rules! set {
            ($field:ident) => {
                if let Some(v) = self.$field {
                    config.$field = v;
                }
            };
            ($field:ident, $src:ident, $conv:expr) => {
                if let Some(v) = self.$src {
                    config.$field = $conv(v);
                }
            };
        }
        set!(event_fresh_duration, event_fresh_duration_s, secs);
        set!(history_capacity_min);
        set!(history_capacity_max);
        set!(queue_capacity_min);
        set!(queue_capacity_max);
        set!(pass_members_max);
        set!(pass_scan_units_max);
        set!(interval_open_cost);
        set!(pass_pushes_max);
        set!(pass_period_normal, pass_period_normal_ms, millis);
        set!(pass_period_busy_min, pass_period_busy_min_ms, millis);
        set!(pass_period_busy_max, pass_period_busy_max_ms, millis);
        set!(pass_period_idle, pass_period_idle_ms, millis);
        set!(pass_busy_factor);
        set!(
            initial_no_progress_timeout,
            initial_no_progress_timeout_s,
            secs
        );
        set!(bookmark_interval, bookmark_interval_s, secs);
        set!(bookmark_before_deadline, bookmark_before_deadline_s, secs);
        set!(fresh_wait_max, fresh_wait_max_s, secs);
        set!(
            legacy_budget_refill_per_second,
            legacy_budget_refill_per_second_ms,
            millis
        );
        set!(legacy_budget_max, legacy_budget_max_ms, millis);
        if let Some(field) = &self.trigger_field {
            config.trigger_field = if field.is_empty() {
                None
            } else {
                Some(field.clone())
            };
        }
        Ok(())
    }
}

/// One algorithm variant to run: a name and its overrides (applied after the scenario's).
#[derive(Clone, Debug, PartialEq)]
pub struct Variant {
    /// Name in reports.
    pub name: String,
    /// Overrides on top of the scenario's `[cache]`.
    pub overrides: ConfigOverrides,
}

impl Variant {
    /// Resolves a variant named on the command line: a variant of the scenario, a built-in
    /// name (`legacy`, `stall-resume`, `free-share`, `rotation`, `oldest-first`), or inline
    /// overrides `key=value[,key=value...]` with the `[cache]` keys.
    ///
    /// # Errors
    /// An unknown name or a malformed override.
    pub fn resolve(scenario: &Scenario, spec: &str) -> Result<Variant, SimError> {
        if let Some(v) = scenario.variants.iter().find(|v| v.name == spec) {
            return Ok(Variant {
                name: v.name.clone(),
                overrides: v.overrides.clone(),
            });
        }
        let mut overrides = ConfigOverrides::default();
        match spec {
            "legacy" | "stall-resume" => overrides.mode = Some(spec.to_owned()),
            "free-share" | "rotation" | "oldest-first" => {
                overrides.candidate_order = Some(spec.to_owned());
            }
            "cohort" | "consumer" => {
                overrides.catchup_design = Some(spec.to_owned());
            }
            _ if spec.contains('=') => {
                let mut text = String::new();
                for pair in spec.split(',') {
                    let (key, value) = pair.split_once('=').ok_or_else(|| {
                        SimError::Scenario(format!("bad override {pair:?} (expected key=value)"))
                    })?;
                    let value = value.trim();
                    if value.parse::<f64>().is_ok() {
                        text.push_str(&format!("{} = {}\n", key.trim(), value));
                    } else {
                        text.push_str(&format!("{} = {:?}\n", key.trim(), value));
                    }
                }
                overrides = toml::from_str(&text)
                    .map_err(|e| SimError::Scenario(format!("variant {spec:?}: {e}")))?;
            }
            _ => {
                return Err(SimError::Scenario(format!(
                    "unknown variant {spec:?} (define it under [[variants]], use a built-in name, or key=value overrides)"
                )));
            }
        }
        Ok(Variant {
            name: spec.to_owned(),
            overrides,
        })
    }
}

impl Scenario {
    /// Parses a scenario from TOML text.
    ///
    /// # Errors
    /// Malformed TOML or an invalid field.
    pub fn from_toml(text: &str) -> Result<Scenario, SimError> {
        let scenario: Scenario =
            toml::from_str(text).map_err(|e| SimError::Scenario(e.to_string()))?;
        scenario.validate()?;
        Ok(scenario)
    }

    /// Reads and parses a scenario file.
    ///
    /// # Errors
    /// The file cannot be read or parsed.
    pub fn load(path: &std::path::Path) -> Result<Scenario, SimError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| SimError::Io(format!("{}: {e}", path.display())))?;
        Scenario::from_toml(&text)
    }

    /// Checks ranges the simulator relies on.
    ///
    /// # Errors
    /// The first problem found.
    pub fn validate(&self) -> Result<(), SimError> {
        let bad = |m: String| Err(SimError::Scenario(m));
        if self.duration_s.is_nan() || self.duration_s <= 0.0 {
            return bad("duration_s must be positive".into());
        }
        if self.groups.is_empty() {
            return bad("at least one [[groups]] is needed".into());
        }
        if self.writes.rate < 0.0 || self.writes.events_per_revision == 0 {
            return bad("writes.rate must be >= 0 and events_per_revision >= 1".into());
        }
        if self.objects.count == 0 || self.objects.namespaces == 0 {
            return bad("objects.count and objects.namespaces must be positive".into());
        }
        if self.writes.events_per_revision > self.objects.count {
            return bad("events_per_revision cannot exceed objects.count".into());
        }
        if self.sample_interval_s.is_nan() || self.sample_interval_s <= 0.0 {
            return bad("sample_interval_s must be positive".into());
        }
        for g in &self.groups {
            if g.scope == Scope::Node && self.objects.nodes == 0 {
                return bad(format!(
                    "group {}: scope node needs objects.nodes > 0",
                    g.name
                ));
            }
            if g.scope == Scope::Hot && self.objects.hot_size_bytes.is_none() {
                return bad(format!(
                    "group {}: scope hot needs objects.hot_size_bytes",
                    g.name
                ));
            }
            if let Some(s) = &g.label_selector {
                watchkeeper_core::LabelSelector::parse(s)
                    .map_err(|e| SimError::Scenario(format!("group {}: {e}", g.name)))?;
            }
        }
        let mut config = CacheConfig::default();
        self.cache.apply(&mut config)?;
        for v in &self.variants {
            let mut c = config.clone();
            v.overrides.apply(&mut c)?;
            c.validate()
                .map_err(|e| SimError::Scenario(format!("variant {}: {e}", v.name)))?;
        }
        config
            .validate()
            .map_err(|e| SimError::Scenario(e.to_string()))?;
        Ok(())
    }

    /// Applies a `NAME=COUNT` setting: the group `NAME` gets `COUNT` watchers (a sweep over a
    /// population runs one scenario with several counts).
    ///
    /// # Errors
    /// A message for the user: not `NAME=COUNT`, a count that is not a whole number, or no
    /// such group.
    pub fn set_group_count(&mut self, setting: &str) -> Result<(), String> {
        let (name, count) = setting
            .split_once('=')
            .ok_or_else(|| format!("--group-count {setting}: expected NAME=COUNT"))?;
        let count: usize = count
            .parse()
            .map_err(|_| format!("--group-count {setting}: COUNT is not a whole number"))?;
        let group = self
            .groups
            .iter_mut()
            .find(|g| g.name == name)
            .ok_or_else(|| format!("--group-count {setting}: the scenario has no group {name}"))?;
        group.count = count;
        Ok(())
    }

    /// The scenario scaled down as its `[short]` table says: durations replaced and every
    /// time scaled by the same factor, counts and rates multiplied.
    #[must_use]
    pub fn shortened(&self) -> Scenario {
        let mut s = self.clone();
        let short = self.short.clone();
        let factor = short.duration_s.map_or(1.0, |d| d / self.duration_s);
        let t = |x: &mut f64| *x *= factor;
        s.duration_s *= factor;
        s.drain_s = short.drain_s.unwrap_or(s.drain_s * factor.max(0.2));
        t(&mut s.warmup_s);
        s.sample_interval_s = (s.sample_interval_s * factor).max(0.001);
        s.objects.count = ((s.objects.count as f64 * short.object_scale).ceil() as usize)
            .max(s.writes.events_per_revision)
            .max(1);
        s.writes.rate *= short.rate_scale;
        for b in &mut s.writes.bursts {
            t(&mut b.at_s);
            t(&mut b.duration_s);
            if let Some(e) = &mut b.every_s {
                t(e);
            }
            b.rate *= short.rate_scale;
        }
        for r in &mut s.writes.ramps {
            t(&mut r.from_s);
            t(&mut r.to_s);
            r.rate_from *= short.rate_scale;
            r.rate_to *= short.rate_scale;
        }
        for h in &mut s.halts {
            t(&mut h.at_s);
            t(&mut h.duration_s);
        }
        for g in &mut s.groups {
            g.count = ((g.count as f64 * short.watcher_scale).round() as usize).max(1);
            t(&mut g.start_at_s);
            t(&mut g.start_spread_s);
            for st in &mut g.stalls {
                t(&mut st.at_s);
                t(&mut st.duration_s);
                t(&mut st.jitter_s);
                if let Some(e) = &mut st.every_s {
                    t(e);
                }
            }
            for d in &mut g.disconnects {
                t(&mut d.at_s);
                t(&mut d.backoff_s);
                t(&mut d.offline_s);
            }
            t(&mut g.reconnect_backoff_s);
            if let Some(e) = &mut g.reconnect_every_s {
                t(e);
            }
            if let Some(e) = &mut g.deadline_s {
                t(e);
            }
        }
        s
    }

    /// The variants to run for `names` (the scenario's `compare` list when empty, else one
    /// baseline run with the scenario's configuration).
    ///
    /// # Errors
    /// An unknown variant.
    pub fn variants_for(&self, names: &[String]) -> Result<Vec<Variant>, SimError> {
        let names = if names.is_empty() {
            &self.compare
        } else {
            names
        };
        if names.is_empty() {
            return Ok(vec![Variant {
                name: "baseline".to_owned(),
                overrides: ConfigOverrides::default(),
            }]);
        }
        names.iter().map(|n| Variant::resolve(self, n)).collect()
    }

    /// The core configuration of a variant.
    ///
    /// # Errors
    /// Invalid overrides.
    pub fn config_for(&self, variant: &Variant) -> Result<CacheConfig, SimError> {
        let mut config = CacheConfig::default();
        self.cache.apply(&mut config)?;
        variant.overrides.apply(&mut config)?;
        config
            .validate()
            .map_err(|e| SimError::Scenario(format!("variant {}: {e}", variant.name)))?;
        Ok(config)
    }
}

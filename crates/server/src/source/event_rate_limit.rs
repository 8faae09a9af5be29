//! kube-apiserver's `EventRateLimit` admission plugin (`plugin/pkg/admission/eventratelimit`,
//! off by default): a defence against a client — hostile or broken — flooding the server with
//! Events. Each limit of its configuration (`eventratelimit.admission.k8s.io/v1alpha1`
//! `Configuration`, read from `--admission-control-config-file`) is a token bucket of `qps`
//! tokens a second holding at most `burst`, kept for the whole server (`Server`) or per
//! namespace (`Namespace`), per user (`User`), or per event source and involved object
//! (`SourceAndObject`).
//!
//! ## Guarantees
//! - Every create and update of a core `Event` (`/api/v1/.../events`; not `events.k8s.io`,
//!   whose kind kube's plugin does not look at) takes a token from each limit's bucket for
//!   its key; when a bucket is empty the write is kube's 429 `Too many requests: limit reached
//!   on type Namespace for key ns` (every limit is asked, so each takes its token, and the
//!   refusals are aggregated as kube's `NewAggregate` prints them: `[..., ...]` for several).
//!   A dry run is not limited and takes no token, as in kube.
//! - Buckets start full (`burst` tokens) and refill at `qps` a second, measured by the
//!   plugin's clock ([`Ticks`]): the monotonic clock of the process, or one a test moves by
//!   hand ([`ManualTicks`]) so that no test waits on wall time.
//! - Bounds: the per-key buckets of a limit are an LRU cache of at most `cacheSize` entries
//!   (kube's 4096 when 0 or unset); the least recently used key's bucket is dropped for a new
//!   one (which starts full, as in kube). A `Server` limit holds one bucket. So the memory a
//!   client can make the plugin hold is bounded by the configuration alone; no flag is needed.
//! - The configuration is validated as kube validates it (`limits: Invalid value:
//!   []eventratelimit.Limit(nil): must not be empty`, `limits[0].burst: Invalid value: 0:
//!   must be positive`, ...); the plugin enabled without a configuration is refused at start
//!   as kube refuses it (its empty default configuration fails that validation).
//!
//! ## Differences from kube
//! - kube lists the supported limit types in a Go map's (random) order in its
//!   `Unsupported value` error; here they are sorted.
//! - kube's buckets measure time with `time.Now`; a wall-clock step back here cannot lend
//!   tokens, as the clock is monotonic.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use watchkeeper_api::field::{Cause, go_quote, go_value, invalid, not_supported};

/// kube's cache size when a limit's `cacheSize` is 0.
pub const DEFAULT_CACHE_SIZE: usize = 4096;

/// The configuration's `apiVersion`s.
pub const VERSIONS: [&str; 1] = ["eventratelimit.admission.k8s.io/v1alpha1"];

/// Where kube's plugin makes its configuration scheme (named in its decoding errors).
pub const SCHEME: &str = "k8s.io/kubernetes/plugin/pkg/admission/eventratelimit/config.go:32";

/// The limit types, as kube names them (sorted).
const TYPES: [&str; 4] = ["Namespace", "Server", "SourceAndObject", "User"];

/// A clock of the plugin: time elapsed since some fixed origin.
pub trait Ticks: Send + Sync + fmt::Debug {
    /// Now, since the origin.
    fn now(&self) -> Duration;
}

/// The process's monotonic clock.
#[derive(Debug)]
pub struct MonotonicTicks(Instant);

impl Default for MonotonicTicks {
    fn default() -> Self {
        MonotonicTicks(Instant::now())
    }
}

impl Ticks for MonotonicTicks {
    fn now(&self) -> Duration {
        self.0.elapsed()
    }
}

/// A clock that moves only when told ([`ManualTicks::advance`]): for tests.
#[derive(Debug, Default)]
pub struct ManualTicks(AtomicU64);

impl ManualTicks {
    /// Moves the clock on by `by`.
    pub fn advance(&self, by: Duration) {
        let nanos = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        self.0.fetch_add(nanos, Ordering::SeqCst);
    }
}

impl Ticks for ManualTicks {
    fn now(&self) -> Duration {
        Duration::from_nanos(self.0.load(Ordering::SeqCst))
    }
}

/// One limit of the configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limit {
    /// `type`: `Server`, `Namespace`, `User` or `SourceAndObject`.
    pub kind: String,
    /// `qps`: tokens a second.
    pub qps: i32,
    /// `burst`: tokens held at most.
    pub burst: i32,
    /// `cacheSize`: buckets kept (0: [`DEFAULT_CACHE_SIZE`]).
    pub cache_size: i32,
}

/// A token bucket (`golang.org/x/time/rate`'s `Limiter`, which client-go's
/// `NewTokenBucketRateLimiterWithClock` is): full at first.
#[derive(Clone, Copy, Debug)]
struct Bucket {
    tokens: f64,
    at: Duration,
}

impl Bucket {
    fn full(limit: &Limit, now: Duration) -> Bucket {
        Bucket {
            tokens: f64::from(limit.burst),
            at: now,
        }
    }

    /// Takes a token if there is one (`TryAccept`).
    fn try_accept(&mut self, limit: &Limit, now: Duration) -> bool {
        let elapsed = now.saturating_sub(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * f64::from(limit.qps)).min(f64::from(limit.burst));
        self.at = self.at.max(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// A limit's buckets by key: least recently used dropped past the bound.
#[derive(Debug, Default)]
struct Buckets {
    /// Key → (bucket, its last use).
    by_key: HashMap<String, (Bucket, u64)>,
    /// Last use → key, oldest first.
    by_use: BTreeMap<u64, String>,
    uses: u64,
}

impl Buckets {
    fn accept(&mut self, limit: &Limit, key: &str, now: Duration, bound: usize) -> bool {
        self.uses += 1;
        let stamp = self.uses;
        if let Some((bucket, used)) = self.by_key.get_mut(key) {
            self.by_use.remove(&*used);
            *used = stamp;
            self.by_use.insert(stamp, key.to_owned());
            return bucket.try_accept(limit, now);
        }
        while self.by_key.len() >= bound.max(1) {
            let Some((_, oldest)) = self.by_use.pop_first() else {
                break;
            };
            self.by_key.remove(&oldest);
        }
        let mut bucket = Bucket::full(limit, now);
        let accepted = bucket.try_accept(limit, now);
        self.by_key.insert(key.to_owned(), (bucket, stamp));
        self.by_use.insert(stamp, key.to_owned());
        accepted
    }

    fn len(&self) -> usize {
        self.by_key.len()
    }
}

/// One limit and its buckets.
#[derive(Debug)]
struct Enforcer {
    limit: Limit,
    buckets: Mutex<Buckets>,
}

impl Enforcer {
    fn bound(&self) -> usize {
        if self.limit.kind == "Server" {
            1
        } else {
            match usize::try_from(self.limit.cache_size) {
                Ok(0) | Err(_) => DEFAULT_CACHE_SIZE,
                Ok(size) => size,
            }
        }
    }
}

/// The plugin: its limits' buckets and its clock.
#[derive(Debug)]
pub struct EventRateLimit {
    enforcers: Vec<Enforcer>,
    ticks: Arc<dyn Ticks>,
}

impl PartialEq for EventRateLimit {
    fn eq(&self, other: &Self) -> bool {
        self.limits().eq(other.limits())
    }
}

impl Eq for EventRateLimit {}

/// What an Event write is keyed by.
#[derive(Clone, Copy, Debug)]
pub struct EventWrite<'a> {
    /// The request's namespace.
    pub namespace: &'a str,
    /// The requesting user's name.
    pub user: &'a str,
    /// The event.
    pub event: &'a Value,
}

impl EventRateLimit {
    /// The plugin for `limits` (validated), on the process's clock.
    #[must_use]
    pub fn new(limits: Vec<Limit>) -> EventRateLimit {
        EventRateLimit::with_ticks(limits, Arc::new(MonotonicTicks::default()))
    }

    /// The plugin for `limits`, on `ticks`.
    #[must_use]
    pub fn with_ticks(limits: Vec<Limit>, ticks: Arc<dyn Ticks>) -> EventRateLimit {
        let enforcers = limits
            .into_iter()
            .map(|limit| Enforcer {
                limit,
                buckets: Mutex::new(Buckets::default()),
            })
            .collect();
        EventRateLimit { enforcers, ticks }
    }

    /// The same limits, fresh buckets, on `ticks` (a test's clock).
    #[must_use]
    pub fn on(&self, ticks: Arc<dyn Ticks>) -> EventRateLimit {
        EventRateLimit::with_ticks(self.limits().cloned().collect(), ticks)
    }

    /// The limits.
    pub fn limits(&self) -> impl Iterator<Item = &Limit> {
        self.enforcers.iter().map(|e| &e.limit)
    }

    /// Buckets held, over all limits.
    #[must_use]
    pub fn buckets_held(&self) -> usize {
        self.enforcers
            .iter()
            .map(|e| e.buckets.lock().map_or(0, |b| b.len()))
            .sum()
    }

    /// kube's `Validate` on an Event create or update: every limit takes a token.
    ///
    /// # Errors
    /// The refusing limits' messages, aggregated (kube's 429 adds `Too many requests: `).
    pub fn accept(&self, write: EventWrite<'_>) -> Result<(), String> {
        let now = self.ticks.now();
        let mut refusals = Vec::new();
        for enforcer in &self.enforcers {
            let key = key(&enforcer.limit.kind, write);
            let bound = enforcer.bound();
            let accepted = match enforcer.buckets.lock() {
                Ok(mut buckets) => buckets.accept(&enforcer.limit, &key, now, bound),
                Err(poisoned) => poisoned
                    .into_inner()
                    .accept(&enforcer.limit, &key, now, bound),
            };
            if !accepted {
                refusals.push(format!(
                    "limit reached on type {} for key {key}",
                    enforcer.limit.kind
                ));
            }
        }
        if refusals.is_empty() {
            Ok(())
        } else {
            Err(watchkeeper_api::field::aggregate(&refusals))
        }
    }
}

/// A write's key for a limit of `kind` (kube's `get*Key`).
fn key(kind: &str, write: EventWrite<'_>) -> String {
    match kind {
        "Namespace" => write.namespace.to_owned(),
        "User" => write.user.to_owned(),
        "SourceAndObject" => {
            let at = |pointer: &str| {
                write
                    .event
                    .pointer(pointer)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
            };
            [
                "/source/component",
                "/source/host",
                "/involvedObject/kind",
                "/involvedObject/namespace",
                "/involvedObject/name",
                "/involvedObject/uid",
                "/involvedObject/apiVersion",
            ]
            .into_iter()
            .map(at)
            .collect()
        }
        _ => String::new(),
    }
}

/// Whether `group`/`plural` (no subresource) holds the Events kube's plugin looks at.
#[must_use]
pub fn is_core_event(group: &str, plural: &str, subresource: &str) -> bool {
    group.is_empty() && plural == "events" && subresource.is_empty()
}

/// An int32 field of `limit`, as Go's decoder reads it (0 when absent).
fn int32(limit: &Value, key: &str, at: usize) -> Result<i32, String> {
    match limit.get(key) {
        None | Some(Value::Null) => Ok(0),
        Some(Value::Number(n)) => n
            .as_i64()
            .and_then(|n| i32::try_from(n).ok())
            .ok_or_else(|| {
                format!(
                    "json: cannot unmarshal number {n} into Go struct field Limit.limits.{key} of type int32 (limits[{at}])"
                )
            }),
        Some(other) => Err(format!(
            "json: cannot unmarshal {} into Go struct field Limit.limits.{key} of type int32 (limits[{at}])",
            watchkeeper_api::go_json::go_kind(other)
        )),
    }
}

/// The plugin's configuration from `value` (its `Configuration`; `None`: none given, kube's
/// empty default), decoded and validated as kube's `LoadConfiguration` and
/// `ValidateConfiguration` do.
///
/// # Errors
/// kube's decoding error or its aggregated field errors.
pub fn parse(value: Option<&Value>) -> Result<Vec<Limit>, String> {
    let items = match value {
        None => None,
        Some(value) => {
            super::plugin_config::config_kind(value, &VERSIONS, "Configuration", SCHEME)?;
            match value.get("limits") {
                None | Some(Value::Null) => None,
                Some(Value::Array(items)) => Some(items.as_slice()),
                Some(other) => {
                    return Err(format!(
                        "json: cannot unmarshal {} into Go struct field Configuration.limits of type []v1alpha1.Limit",
                        watchkeeper_api::go_json::go_kind(other)
                    ));
                }
            }
        }
    };
    let mut limits = Vec::new();
    for (at, item) in items.unwrap_or_default().iter().enumerate() {
        let kind = match item.get("type") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(kind)) => kind.clone(),
            Some(other) => {
                return Err(format!(
                    "json: cannot unmarshal {} into Go struct field Limit.limits.type of type v1alpha1.LimitType",
                    watchkeeper_api::go_json::go_kind(other)
                ));
            }
        };
        limits.push(Limit {
            kind,
            qps: int32(item, "qps", at)?,
            burst: int32(item, "burst", at)?,
            cache_size: int32(item, "cacheSize", at)?,
        });
    }
    let mut causes: Vec<Cause> = Vec::new();
    if limits.is_empty() {
        let printed = if items.is_some() {
            "[]eventratelimit.Limit{}"
        } else {
            "[]eventratelimit.Limit(nil)"
        };
        causes.push(invalid("limits", printed, "must not be empty"));
    }
    for (i, limit) in limits.iter().enumerate() {
        if !TYPES.contains(&limit.kind.as_str()) {
            causes.push(not_supported(
                &format!("limits[{i}].type"),
                &go_quote(&limit.kind),
                &TYPES,
            ));
        }
        if limit.burst <= 0 {
            causes.push(invalid(
                &format!("limits[{i}].burst"),
                &go_value(&Value::from(limit.burst)),
                "must be positive",
            ));
        }
        if limit.qps <= 0 {
            causes.push(invalid(
                &format!("limits[{i}].qps"),
                &go_value(&Value::from(limit.qps)),
                "must be positive",
            ));
        }
        if limit.kind != "Server" && limit.cache_size < 0 {
            causes.push(invalid(
                &format!("limits[{i}].cacheSize"),
                &go_value(&Value::from(limit.cache_size)),
                "must not be negative",
            ));
        }
    }
    if causes.is_empty() {
        Ok(limits)
    } else {
        let errors: Vec<String> = causes
            .into_iter()
            .map(|(field, message, _)| format!("{field}: {message}"))
            .collect();
        Err(watchkeeper_api::field::aggregate(&errors))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn config(limits: Value) -> Value {
        json!({"apiVersion": "eventratelimit.admission.k8s.io/v1alpha1", "kind": "Configuration",
            "limits": limits})
    }

    fn limit(kind: &str, qps: i32, burst: i32, cache_size: i32) -> Limit {
        Limit {
            kind: kind.to_owned(),
            qps,
            burst,
            cache_size,
        }
    }

    #[test]
    fn kube_s_validation_word_for_word() {
        assert_eq!(
            parse(None).unwrap_err(),
            "limits: Invalid value: []eventratelimit.Limit(nil): must not be empty"
        );
        assert_eq!(
            parse(Some(&config(json!([])))).unwrap_err(),
            "limits: Invalid value: []eventratelimit.Limit{}: must not be empty"
        );
        assert_eq!(
            parse(Some(&config(
                json!([{"type": "Pod", "qps": 0, "burst": -1, "cacheSize": -2}])
            )))
            .unwrap_err(),
            r#"[limits[0].type: Unsupported value: "Pod": supported values: "Namespace", "Server", "SourceAndObject", "User", limits[0].burst: Invalid value: -1: must be positive, limits[0].qps: Invalid value: 0: must be positive, limits[0].cacheSize: Invalid value: -2: must not be negative]"#
        );
        // A Server limit's cache size is not looked at.
        assert_eq!(
            parse(Some(&config(
                json!([{"type": "Server", "qps": 1, "burst": 1, "cacheSize": -2}])
            )))
            .unwrap(),
            vec![limit("Server", 1, 1, -2)]
        );
        assert!(
            parse(Some(&json!({"apiVersion": "v1", "kind": "Configuration"})))
                .unwrap_err()
                .starts_with(r#"no kind "Configuration" is registered for version "/v1""#)
        );
        assert!(
            parse(Some(&config(
                json!([{"type": "User", "qps": "1", "burst": 1}])
            )))
            .unwrap_err()
            .starts_with("json: cannot unmarshal string into Go struct field Limit.limits.qps")
        );
    }

    fn event(namespace: &str, name: &str) -> Value {
        json!({"metadata": {"namespace": namespace},
            "involvedObject": {"kind": "Pod", "namespace": namespace, "name": name},
            "source": {"component": "kubelet"}})
    }

    #[test]
    fn buckets_refill_at_qps_up_to_burst() {
        let ticks = Arc::new(ManualTicks::default());
        let plugin = EventRateLimit::with_ticks(vec![limit("Namespace", 2, 3, 0)], ticks.clone());
        let a = event("a", "p");
        let write = |namespace: &'static str| EventWrite {
            namespace,
            user: "u",
            event: &a,
        };
        for _ in 0..3 {
            plugin.accept(write("a")).unwrap();
        }
        assert_eq!(
            plugin.accept(write("a")).unwrap_err(),
            "limit reached on type Namespace for key a"
        );
        // Another namespace has its own bucket.
        plugin.accept(write("b")).unwrap();
        // Half a second at 2 a second: one token, not more.
        ticks.advance(Duration::from_millis(500));
        plugin.accept(write("a")).unwrap();
        assert!(plugin.accept(write("a")).is_err());
        // Long idle: back to burst, not beyond.
        ticks.advance(Duration::from_secs(3600));
        for _ in 0..3 {
            plugin.accept(write("a")).unwrap();
        }
        assert!(plugin.accept(write("a")).is_err());
    }

    #[test]
    fn every_limit_takes_its_token_and_the_refusals_are_aggregated() {
        let ticks = Arc::new(ManualTicks::default());
        let plugin = EventRateLimit::with_ticks(
            vec![
                limit("Server", 1, 2, 0),
                limit("User", 1, 1, 0),
                limit("SourceAndObject", 1, 5, 0),
            ],
            ticks,
        );
        let e = event("a", "p");
        let by = |user: &'static str| EventWrite {
            namespace: "a",
            user,
            event: &e,
        };
        plugin.accept(by("alice")).unwrap();
        assert_eq!(
            plugin.accept(by("alice")).unwrap_err(),
            "limit reached on type User for key alice"
        );
        assert_eq!(
            plugin.accept(by("bob")).unwrap_err(),
            "limit reached on type Server for key "
        );
        assert_eq!(
            plugin.accept(by("alice")).unwrap_err(),
            "[limit reached on type Server for key , limit reached on type User for key alice]"
        );
        assert_eq!(
            key("SourceAndObject", by("bob")),
            "kubeletPodap",
            "component, host, kind, namespace, name, uid, apiVersion"
        );
    }

    #[test]
    fn the_lru_holds_at_most_cache_size_buckets() {
        let ticks = Arc::new(ManualTicks::default());
        let plugin = EventRateLimit::with_ticks(vec![limit("Namespace", 1, 1, 2)], ticks);
        let e = event("x", "p");
        let write = |namespace: &'static str| EventWrite {
            namespace,
            user: "u",
            event: &e,
        };
        plugin.accept(write("a")).unwrap();
        plugin.accept(write("b")).unwrap();
        assert!(plugin.accept(write("a")).is_err(), "a is used, b is oldest");
        plugin.accept(write("c")).unwrap();
        assert_eq!(plugin.buckets_held(), 2);
        // b was dropped: a new, full bucket (dropping a, now the oldest).
        plugin.accept(write("b")).unwrap();
        // So a's is new and full too.
        plugin.accept(write("a")).unwrap();
        assert_eq!(plugin.buckets_held(), 2);
        let wide = EventRateLimit::new(vec![limit("User", 1, 1, 0)]);
        assert_eq!(wide.enforcers[0].bound(), DEFAULT_CACHE_SIZE);
    }
}

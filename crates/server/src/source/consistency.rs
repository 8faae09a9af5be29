//! The cache consistency checker, as KEP-4988 added to kube-apiserver: per resource, the
//! cache's objects at a revision against the store's objects at the same revision.
//!
//! ## Guarantees
//! - A check of a resource reads the cache's newest state, at its revision R, and the store's
//!   objects of that resource at exactly R (an MVCC range read at R, decoded by the
//!   reflector's decoder). Both sides are reduced to the same digest — every key in order,
//!   its resource version and an FNV-64 hash of the object's JSON body — so a difference is a
//!   real divergence, never a race with writes after R. Equal: `success`. Different:
//!   `failure`. The store cannot be read at R (compacted, unavailable): `error`.
//! - Every check is counted in `apiserver_storage_consistency_checks_total{resource,status}`
//!   (kube-apiserver's metric and labels; `resource` is `plural` or `plural.group`), a failure
//!   before its relist is asked for (whoever sees the relist's 410 reads the count).
//! - A failure logs the first differing keys (at most [`DIFFERENCES_SHOWN`]) with their
//!   resource versions on either side, and asks the reflector to relist that resource
//!   ([`Source::request_relist`]): it lists the resource's keys at the revision it has fed
//!   and resets that one cache there; other resources are untouched. The cache's watchers get
//!   an in-stream 410 Gone: their positions were in a history that disagreed with the store,
//!   so none can be served with the guarantees of a watch, and 410 is the honest answer
//!   (they relist, as after any reset).
//! - Checks run every `--consistency-check-interval-ms` (default 5 minutes, 0 disables) and
//!   on demand (`POST /debug/consistency`), one at a time.
//! - Caching-proxy mode is not checked (every resource reports `skipped`): the upstream's
//!   state at an exact resource version is only readable as a `resourceVersionMatch=Exact`
//!   LIST, which the upstream may refuse once its own watch cache and etcd have compacted
//!   past the revision, and which counts against the upstream's priority and fairness; a
//!   failure would relist from the upstream, which its own reflector already does on any
//!   doubt. The check belongs where the store is.

use std::collections::BTreeMap;
use std::hash::Hasher;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fnv::FnvHasher;
use serde_json::{Value, json};
use watchkeeper_core::{Object, Revision};

use crate::cache::Resource;
use crate::source::Source;

/// Differing keys a failed check logs and reports.
pub const DIFFERENCES_SHOWN: usize = 10;

/// The outcome of one check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// The digests are equal.
    Success,
    /// The digests differ (the cache is relisted).
    Failure,
    /// The store could not be read at the revision.
    Error,
    /// Not checked (caching-proxy mode, or the cache has not loaded yet).
    Skipped,
}

impl Status {
    /// Every counted status, in the order `/metrics` lists them.
    pub const COUNTED: [Status; 3] = [Status::Success, Status::Failure, Status::Error];

    /// The metric label and report value.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Success => "success",
            Status::Failure => "failure",
            Status::Error => "error",
            Status::Skipped => "skipped",
        }
    }
}

/// One side of a check: what it holds at the revision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Digest {
    /// Objects.
    pub objects: usize,
    /// FNV-64 over every (key, resource version, body hash) in key order.
    pub hash: u64,
}

/// A key whose object differs between the cache and the store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Difference {
    /// `namespace/name`, or `name`.
    pub key: String,
    /// Its resource version in the cache (`None`: absent there).
    pub cache: Option<Revision>,
    /// Its resource version in the store (`None`: absent there).
    pub store: Option<Revision>,
}

/// What one check of one resource found.
#[derive(Clone, Debug)]
pub struct Report {
    /// `plural` or `plural.group`.
    pub resource: String,
    /// The revision both sides were read at.
    pub revision: Revision,
    /// The outcome.
    pub status: Status,
    /// The cache's digest.
    pub cache: Option<Digest>,
    /// The store's digest.
    pub store: Option<Digest>,
    /// The first differing keys.
    pub differences: Vec<Difference>,
    /// Why it is an error or skipped.
    pub reason: Option<String>,
    /// Whether the resource is being relisted.
    pub relisting: bool,
}

impl Report {
    /// The report as JSON for the operator API.
    #[must_use]
    pub fn to_json(&self) -> Value {
        let digest = |d: &Option<Digest>| {
            d.map_or(
                Value::Null,
                |d| json!({"objects": d.objects, "digest": format!("{:016x}", d.hash)}),
            )
        };
        json!({
            "resource": self.resource,
            "revision": self.revision,
            "status": self.status.as_str(),
            "cache": digest(&self.cache),
            "store": digest(&self.store),
            "differences": self.differences.iter().map(|d| json!({
                "key": d.key,
                "cache": d.cache,
                "store": d.store,
            })).collect::<Vec<_>>(),
            "reason": self.reason,
            "relisting": self.relisting,
        })
    }
}

/// The checker's counters and last reports, per resource name.
#[derive(Debug)]
pub struct ConsistencyChecker {
    /// (success, failure, error) counts per resource name.
    counts: Mutex<BTreeMap<String, [u64; 3]>>,
    /// The last report per resource.
    last: Mutex<BTreeMap<String, Report>>,
    /// One check at a time.
    running: tokio::sync::Mutex<()>,
}

impl Default for ConsistencyChecker {
    fn default() -> ConsistencyChecker {
        ConsistencyChecker::new()
    }
}

impl ConsistencyChecker {
    /// A checker with nothing counted.
    #[must_use]
    pub fn new() -> ConsistencyChecker {
        ConsistencyChecker {
            counts: Mutex::default(),
            last: Mutex::default(),
            running: tokio::sync::Mutex::new(()),
        }
    }

    /// Checks finished for the resource `name` with `status`.
    #[must_use]
    pub fn count(&self, name: &str, status: Status) -> u64 {
        let slot = match status {
            Status::Success => 0,
            Status::Failure => 1,
            Status::Error => 2,
            Status::Skipped => return 0,
        };
        self.counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(name)
            .map_or(0, |counts| counts[slot])
    }

    /// The last report of every resource checked.
    #[must_use]
    pub fn last_reports(&self) -> Vec<Report> {
        self.last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .values()
            .cloned()
            .collect()
    }

    /// Checks every resource of `resources` (or only the one named `only`), counts and logs
    /// the outcomes, and asks for a relist of each resource that failed.
    pub async fn check(
        &self,
        resources: &[Arc<Resource>],
        source: &Source,
        only: Option<&str>,
    ) -> Vec<Report> {
        let _running = self.running.lock().await;
        let mut reports = Vec::new();
        for (index, resource) in resources.iter().enumerate() {
            let name = resource.name();
            if only.is_some_and(|only| only != name) {
                continue;
            }
            let report = self.check_one(resources, index, source).await;
            reports.push(report);
        }
        reports
    }

    async fn check_one(
        &self,
        resources: &[Arc<Resource>],
        index: usize,
        source: &Source,
    ) -> Report {
        let resource = &resources[index];
        let name = resource.name();
        let snapshot = resource.cache().latest();
        let revision = snapshot.revision();
        let mut report = Report {
            resource: name.clone(),
            revision,
            status: Status::Skipped,
            cache: None,
            store: None,
            differences: Vec::new(),
            reason: None,
            relisting: false,
        };
        if resource.conversion.is_some() {
            report.reason = Some(
                "another version of a stored resource: its stored objects are checked with that resource".to_owned(),
            );
            return report;
        }
        if resource.earlier_stored.is_some() {
            report.reason = Some(
                "objects stored at earlier versions, converted by the CRD's webhook: the cache holds them converted".to_owned(),
            );
            return report;
        }
        let Some(store) = source.as_store_source() else {
            report.reason = Some("caching-proxy mode: the upstream is not checked".to_owned());
            return report;
        };
        if revision == 0 {
            report.reason = Some("the cache has not loaded yet".to_owned());
            return report;
        }
        let cached = entries(snapshot.range(None, None));
        report.cache = Some(digest(&cached));
        match store.objects_at(resources, index, revision).await {
            Err(error) => {
                report.status = Status::Error;
                report.reason = Some(format!("cannot read the store at {revision}: {error}"));
                tracing::warn!(resource = %name, revision, %error, "consistency check: cannot read the store");
            }
            Ok(objects) => {
                let stored = entries(objects.iter());
                report.store = Some(digest(&stored));
                if report.cache == report.store {
                    report.status = Status::Success;
                    tracing::debug!(resource = %name, revision, "consistency check passed");
                } else {
                    report.status = Status::Failure;
                    report.differences = differences(&cached, &stored, DIFFERENCES_SHOWN);
                }
            }
        }
        // Counted before the relist is asked for: a client that has seen the relist (its
        // watchers' 410) reads the failure in `/metrics`.
        if let Some(slot) = Status::COUNTED.iter().position(|s| *s == report.status) {
            self.counts
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .entry(name.clone())
                .or_default()[slot] += 1;
        }
        if report.status == Status::Failure {
            report.relisting = source.request_relist(&name);
            tracing::error!(
                resource = %name,
                revision,
                cache_objects = report.cache.as_ref().map_or(0, |d| d.objects),
                store_objects = report.store.as_ref().map_or(0, |d| d.objects),
                first_differences = ?report.differences,
                relisting = report.relisting,
                "consistency check failed: the cache differs from the store; relisting the resource (its watchers get 410)"
            );
        }
        self.last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(name, report.clone());
        report
    }
}

/// One object reduced to what a check compares.
#[derive(Debug, PartialEq, Eq)]
struct Entry {
    key: Arc<str>,
    revision: Revision,
    body: u64,
}

fn entries<'a>(objects: impl Iterator<Item = &'a Arc<Object>>) -> Vec<Entry> {
    let mut entries: Vec<Entry> = objects
        .map(|object| {
            let mut hasher = FnvHasher::default();
            // Serialising a JSON value into memory cannot fail.
            let body = serde_json::to_vec(object.body()).unwrap_or_default();
            hasher.write(&body);
            Entry {
                key: object.key().clone(),
                revision: object.resource_version(),
                body: hasher.finish(),
            }
        })
        .collect();
    entries.sort_by(|a, b| a.key.cmp(&b.key));
    entries
}

fn digest(entries: &[Entry]) -> Digest {
    let mut hasher = FnvHasher::default();
    for entry in entries {
        hasher.write(entry.key.as_bytes());
        hasher.write_u8(b'/');
        hasher.write_u64(entry.revision);
        hasher.write_u8(b'/');
        hasher.write_u64(entry.body);
    }
    Digest {
        objects: entries.len(),
        hash: hasher.finish(),
    }
}

/// The first `limit` keys that differ, in key order.
fn differences(cache: &[Entry], store: &[Entry], limit: usize) -> Vec<Difference> {
    let mut out = Vec::new();
    let (mut c, mut s) = (0, 0);
    while out.len() < limit && (c < cache.len() || s < store.len()) {
        let (left, right) = (cache.get(c), store.get(s));
        let order = match (left, right) {
            (Some(l), Some(r)) => l.key.cmp(&r.key),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, _) => std::cmp::Ordering::Greater,
        };
        match order {
            std::cmp::Ordering::Less => {
                let l = &cache[c];
                out.push(Difference {
                    key: l.key.to_string(),
                    cache: Some(l.revision),
                    store: None,
                });
                c += 1;
            }
            std::cmp::Ordering::Greater => {
                let r = &store[s];
                out.push(Difference {
                    key: r.key.to_string(),
                    cache: None,
                    store: Some(r.revision),
                });
                s += 1;
            }
            std::cmp::Ordering::Equal => {
                let (l, r) = (&cache[c], &store[s]);
                if l != r {
                    out.push(Difference {
                        key: l.key.to_string(),
                        cache: Some(l.revision),
                        store: Some(r.revision),
                    });
                }
                c += 1;
                s += 1;
            }
        }
    }
    out
}

/// Checks every resource every `period` until the server shuts down (the first check one
/// period after the start).
pub async fn run_periodic(
    period: Duration,
    mut check: impl FnMut() -> Option<futures_util::future::BoxFuture<'static, ()>>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticks.tick() => {
                let Some(run) = check() else { return };
                run.await;
            }
            _ = shutdown.changed() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(key: &str, revision: Revision, body: u64) -> Entry {
        Entry {
            key: Arc::from(key),
            revision,
            body,
        }
    }

    #[test]
    fn differences_name_missing_extra_and_changed_keys_in_order() {
        let cache = [entry("a", 1, 1), entry("b", 2, 2), entry("d", 4, 4)];
        let store = [entry("a", 1, 1), entry("b", 2, 9), entry("c", 3, 3)];
        let found = differences(&cache, &store, 10);
        let keys: Vec<(&str, Option<u64>, Option<u64>)> = found
            .iter()
            .map(|d| (d.key.as_str(), d.cache, d.store))
            .collect();
        assert_eq!(
            keys,
            [
                ("b", Some(2), Some(2)),
                ("c", None, Some(3)),
                ("d", Some(4), None)
            ]
        );
        assert_eq!(differences(&cache, &store, 1).len(), 1);
        assert!(differences(&cache, &cache, 10).is_empty());
        assert_eq!(digest(&cache), digest(&cache));
        assert_ne!(digest(&cache), digest(&store));
    }
}

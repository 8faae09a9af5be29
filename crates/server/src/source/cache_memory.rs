//! The bound on the memory the caches' live objects take (`--cache-memory-bytes`).
//!
//! Every cached object is a decoded `serde_json::Value`, which takes 10 to 130 times its JSON
//! (a Pod about 12 times, a list of one-entry maps 90 times; `watchkeeper_core::weight`). The
//! store quota (`--store-quota-bytes`, or etcd's) bounds stored bytes, so alone it bounds the
//! caches' memory only at about a hundred times its value: eight custom resources of 1.4 MiB
//! of `{"a":1}` items took a server from 44 MB to 1.4 GB. This bound counts what the caches
//! hold instead.
//!
//! ## Guarantees
//! - **Counted where it is held.** Each cache adds its live objects' weight
//!   ([`watchkeeper_core::Object::weight`]: the decoded body, estimated within 10 % of what
//!   the parse allocates, and the JSON encoding) and its history's to one shared account as
//!   they change, and takes them out when it stops (`WatchCache::account_in`). Every cache
//!   counts: each served version of a resource is its own cache. The gauges are
//!   `watchkeeper_cache_memory_bytes` and `watchkeeper_cache_history_memory_bytes`, per
//!   resource `watchkeeper_cache_object_bytes` and `watchkeeper_watch_cache_history_bytes`.
//! - **Histories share half the bound.** Past it, a history above its fair share (half the
//!   bound over the number of caches) trims its oldest revisions on its next append
//!   (`MemoryAccount`): a resource a client writes hard gives up its own history first, and the
//!   histories stay below about the bound in all, each also within `--history-bytes-max`.
//!   Watchers left behind get the honest 410 and relist.
//! - **Refused before it is written.** A create or update through this server whose object
//!   would take the total above the bound is refused before its transaction, with 500 and no
//!   reason: kube-apiserver's answer when etcd's quota refuses a write (kubectl prints `Error
//!   from server: ...`), with a message that names this bound. Nothing is stored.
//! - **Room can always be made.** Deletes are never refused, nor is an update whose object
//!   weighs no more than the one it replaces (removing a finalizer, marking a deletion,
//!   shrinking a spec); the server's own bookkeeping writes (status of quotas, leases it
//!   renews) are small updates of that kind.
//! - **A custom resource's schema counts too.** Each served version of a CRD holds its
//!   `openAPIV3Schema` decoded beside its objects (a CRD of 10,000 properties: 8.2 MB for
//!   the version, as much again as the CRD object in its own cache). It is counted with the
//!   live objects (`watchkeeper_cache_definition_bytes` per resource) while the version is
//!   served, and a CRD create or update is admitted at twice its object's weight. The OpenAPI
//!   documents built for the served resources (about half a CRD's schema again, and a few MiB
//!   for the built-ins) count with the live objects from when each is built until the set of
//!   served resources it describes is dropped (`watchkeeper_openapi_document_bytes`,
//!   [`CacheMemory::hold`]).
//! - **What unread watches hold counts too.** A version of an object the caches let go
//!   (replaced or deleted, and evicted from the history) while a watcher's queue still holds
//!   it (its client stopped reading) stays alive: three never-reading watchers of a resource
//!   whose 1.4 MB objects were rewritten kept 1 GB beyond a 256 MiB bound. Such *released*
//!   versions (also initial-state objects a queue holds, objects a relist of the store replaced,
//!   and old snapshots a watch or a request still reads) count in `watchkeeper_cache_memory_released_bytes`, once each, until their
//!   last holder drops them, within a quarter of the bound (half the histories' share). Past
//!   it ([`CacheMemory::cut_released_watches`]), every open watch whose queue holds a released
//!   version ends at once with an in-stream 410 `too old resource version` (reason
//!   `memory_pressure` in `apiserver_terminated_watchers_total`), without that backlog: the
//!   backlog is what is held, and the cache no longer has it. Its client relists, as after
//!   any 410. A watch whose client reads holds only recent events, which the histories still
//!   have, and is not touched. This is the one end that does not wait for the backlog; a
//!   queue's own bound (`--queue-capacity-max` events) is unchanged.
//! - **Cheap when far from the bound.** The object's weight is at most
//!   [`WEIGHT_PER_JSON_BYTE_MAX`] times its JSON; while the total plus that much is under the
//!   bound, nothing is walked. Only near the bound is the object's weight estimated.
//!
//! ## What it does not bound
//! - Objects written around this server (another instance, or a client of etcd directly) are
//!   cached whatever their weight: the cache must hold what the store holds. They count in the
//!   total, so the writes through this server are refused once it is full.
//! - Caching-proxy mode has no writes of its own: the total is reported, never enforced.
//! - So the caches hold at most about twice the bound (the live objects, the histories, which
//!   count every older version they keep alive, and the released versions), plus the writes'
//!   own transient copies and the events watch streams have taken from their queues and are
//!   writing (at most `--watch-chunk-items` per stream).

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use serde_json::Value;
use watchkeeper_core::metrics::MemoryAccount;
use watchkeeper_core::{Object, WatchQueue};

use watchkeeper_api::ApiError;

/// The most bytes an object's decoded weight takes per byte of its JSON: 5 bytes of
/// `{"":{...}}` nesting hold a 648-byte map node, about 130 per byte; an array of one-entry
/// maps holds about 102 per byte (`weight_stays_within_its_bound_per_json_byte`).
pub const WEIGHT_PER_JSON_BYTE_MAX: u64 = 160;

/// What an object weighs beside its body and encoding (its allocation, key, attributes):
/// counted so that the check errs high.
const OBJECT_OVERHEAD: u64 = 1 << 10;

/// Calls its argument with the queue of every open watch ([`CacheMemory::cut_released_watches`]).
pub type QueueWalk = dyn Fn(&mut dyn FnMut(&WatchQueue)) + Send + Sync;

/// The caches' shared memory account and the bound on their live objects.
#[derive(Debug, Default)]
pub struct CacheMemory {
    account: Arc<MemoryAccount>,
    /// `--cache-memory-bytes`, 0 = none.
    limit: u64,
    refusals: AtomicU64,
    /// Watches ended by [`CacheMemory::cut_released_watches`].
    cuts: AtomicU64,
    /// Bytes held for the served resources beside the caches ([`CacheMemory::hold`]).
    derived: AtomicI64,
}

/// Bytes counted with the caches' live objects while this is held ([`CacheMemory::hold`]).
#[derive(Debug)]
pub struct Held {
    memory: Arc<CacheMemory>,
    bytes: i64,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.memory.account.objects.add(-self.bytes);
        self.memory.derived.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

impl CacheMemory {
    /// Live objects bounded by `limit` bytes, histories sharing half of it (0: not bounded).
    #[must_use]
    pub fn new(limit: u64) -> CacheMemory {
        CacheMemory {
            account: Arc::new(MemoryAccount::new(
                usize::try_from(limit / 2).unwrap_or(usize::MAX),
            )),
            limit,
            refusals: AtomicU64::new(0),
            cuts: AtomicU64::new(0),
            derived: AtomicI64::new(0),
        }
    }

    /// The bytes released versions weigh now (see the module docs).
    #[must_use]
    pub fn released(&self) -> u64 {
        u64::try_from(self.account.released.get()).unwrap_or(0)
    }

    /// Watches ended so far because their queues held released versions past the budget.
    #[must_use]
    pub fn cuts(&self) -> u64 {
        self.cuts.load(Ordering::Relaxed)
    }

    /// Runs until `shutdown`: whenever released versions weigh more than their budget, ends
    /// every watch whose queue holds one (see the module docs). `for_each_queue` calls its
    /// argument with the queue of every open watch. Returns at once without a bound.
    pub async fn cut_released_watches(
        self: Arc<Self>,
        for_each_queue: Arc<QueueWalk>,
        mut shutdown: tokio::sync::watch::Receiver<bool>,
    ) {
        if self.account.released_budget() == 0 {
            return;
        }
        let wake = Arc::new(tokio::sync::Notify::new());
        let woken = wake.clone();
        self.account
            .on_released_over(Box::new(move || woken.notify_one()));
        loop {
            // Checked first too: events may have been released before the hook was set.
            if self.account.released_over() {
                // On a blocking thread: the versions freed may be large.
                let walk = for_each_queue.clone();
                let cut = tokio::task::spawn_blocking(move || {
                    let mut cut = 0;
                    walk(&mut |queue| {
                        if queue.cut_released() {
                            cut += 1;
                        }
                    });
                    cut
                })
                .await
                .unwrap_or(0);
                self.cuts.fetch_add(cut, Ordering::Relaxed);
                if cut > 0 {
                    tracing::warn!(
                        watches = cut,
                        released_bytes = self.released(),
                        limit_bytes = self.limit,
                        "ended watches whose unread queues held object versions the caches let go (--cache-memory-bytes)"
                    );
                }
            }
            tokio::select! {
                () = wake.notified() => {}
                _ = shutdown.changed() => return,
            }
        }
    }

    /// The account each cache counts its live objects and history in.
    #[must_use]
    pub fn account(&self) -> &Arc<MemoryAccount> {
        &self.account
    }

    /// The bytes the caches' live objects weigh now.
    #[must_use]
    pub fn used(&self) -> u64 {
        u64::try_from(self.account.objects.get()).unwrap_or(0)
    }

    /// The bytes the caches' histories count now.
    #[must_use]
    pub fn histories(&self) -> u64 {
        u64::try_from(self.account.histories.get()).unwrap_or(0)
    }

    /// Counts `bytes` that something derived from the served resources holds (their OpenAPI
    /// documents) with the live objects, until the returned guard is dropped: the bound then
    /// refuses the writes that would take the total past it, as for any object.
    #[must_use]
    pub fn hold(self: &Arc<Self>, bytes: usize) -> Held {
        let bytes = i64::try_from(bytes).unwrap_or(i64::MAX);
        self.account.objects.add(bytes);
        self.derived.fetch_add(bytes, Ordering::Relaxed);
        Held {
            memory: Arc::clone(self),
            bytes,
        }
    }

    /// The bytes held through [`CacheMemory::hold`] now.
    #[must_use]
    pub fn derived(&self) -> u64 {
        u64::try_from(self.derived.load(Ordering::Relaxed)).unwrap_or(0)
    }

    /// `--cache-memory-bytes` (0: none).
    #[must_use]
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Writes refused so far.
    #[must_use]
    pub fn refusals(&self) -> u64 {
        self.refusals.load(Ordering::Relaxed)
    }

    /// Admits a write of `object`, whose stored JSON is `json_len` bytes, replacing `replaced`
    /// (an update's current object; `None` for a create). A `definition` (a
    /// CustomResourceDefinition) counts twice: its served versions hold their schemas again,
    /// decoded, beside the object its cache holds (`Resource::from_definition`).
    ///
    /// # Errors
    /// 500 when the caches' objects would weigh more than the bound (see the module docs).
    pub fn admit(
        &self,
        object: &Value,
        json_len: usize,
        replaced: Option<&Object>,
        definition: bool,
    ) -> Result<(), ApiError> {
        if self.limit == 0 {
            return Ok(());
        }
        let times = if definition { 2 } else { 1 };
        let used = self.used();
        let json = json_len as u64;
        let most = json
            .saturating_mul(WEIGHT_PER_JSON_BYTE_MAX + 1)
            .saturating_add(OBJECT_OVERHEAD)
            .saturating_mul(times);
        if used.saturating_add(most) <= self.limit {
            return Ok(());
        }
        let weight = (watchkeeper_core::weight::heap_bytes(object) as u64)
            .saturating_add(json)
            .saturating_add(OBJECT_OVERHEAD)
            .saturating_mul(times);
        let replaced = replaced.map_or(0, |object| object.weight() as u64 * times);
        if weight <= replaced || used.saturating_add(weight - replaced) <= self.limit {
            return Ok(());
        }
        self.refusals.fetch_add(1, Ordering::Relaxed);
        Err(ApiError::new(
            500,
            "",
            format!(
                "the server's object cache is full: this object would take the memory its cached objects use past --cache-memory-bytes ({} bytes); delete objects to make room",
                self.limit
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::BTreeMap;

    fn weight_per_byte(value: &Value) -> f64 {
        let json = serde_json::to_vec(value).unwrap().len();
        watchkeeper_core::weight::heap_bytes(value) as f64 / json as f64
    }

    /// Goal: the bound the cheap check relies on holds for the worst shapes: nested one-key
    /// maps, lists of one-entry maps, nested lists, short strings.
    #[test]
    fn weight_stays_within_its_bound_per_json_byte() {
        let mut nested = json!(0);
        for _ in 0..1_000 {
            nested = json!({"": nested});
        }
        let mut lists = json!(0);
        for _ in 0..1_000 {
            lists = json!([lists]);
        }
        let shapes = [
            nested,
            lists,
            json!((0..10_000).map(|_| json!({"": 0})).collect::<Vec<_>>()),
            json!((0..10_000).map(|_| json!([0])).collect::<Vec<_>>()),
            json!((0..10_000).map(|_| json!("")).collect::<Vec<_>>()),
            json!((0..10_000).map(|_| json!({"": {}})).collect::<Vec<_>>()),
            json!({"a": 1}),
        ];
        let mut worst = 0.0f64;
        for shape in &shapes {
            let ratio = weight_per_byte(shape);
            assert!(
                ratio < WEIGHT_PER_JSON_BYTE_MAX as f64,
                "{ratio} bytes per JSON byte"
            );
            worst = worst.max(ratio);
        }
        assert!(worst > 100.0, "the shapes include the worst ones: {worst}");
    }

    fn object(body: Value) -> Object {
        Object::new("ns", "x", BTreeMap::new(), BTreeMap::new(), 1, body)
    }

    /// Goal: creates and growing updates are refused past the bound, with kube's quota
    /// shape; shrinking updates are not; no bound refuses nothing.
    #[test]
    fn writes_past_the_bound_are_refused_unless_they_shrink() {
        let memory = CacheMemory::new(64 << 20);
        let maps: Vec<Value> = (0..10_000).map(|i| json!({"a": i})).collect();
        let big = json!({"metadata": {"name": "x"}, "spec": maps});
        let big_len = serde_json::to_vec(&big).unwrap().len();
        let small = json!({"metadata": {"name": "x"}, "spec": []});
        memory
            .admit(&big, big_len, None, false)
            .expect("an empty cache has room");
        memory.account().objects.add((64 << 20) - 100_000);
        let refused = memory.admit(&big, big_len, None, false).unwrap_err();
        assert_eq!(refused.code, 500);
        assert!(
            refused
                .message
                .contains("--cache-memory-bytes (67108864 bytes)"),
            "{}",
            refused.message
        );
        assert_eq!(memory.refusals(), 1);
        memory
            .admit(&small, 40, None, false)
            .expect("a small object still fits");
        let current = object(big.clone());
        memory
            .admit(&big, big_len, Some(&current), false)
            .expect("an update that does not grow its object is admitted");
        memory
            .admit(&small, 40, Some(&current), false)
            .expect("a shrinking update is admitted");
        assert_eq!(memory.refusals(), 1);
        let unbounded = CacheMemory::new(0);
        unbounded.account().objects.add(i64::MAX / 2);
        unbounded
            .admit(&big, big_len, None, false)
            .expect("no bound");
    }

    /// Goal: a definition (a CRD) is admitted at twice its object's weight, since its served
    /// versions hold their schemas again: one that fits as an object alone but not twice over
    /// is refused, and an update of a definition compares twice the weights.
    #[test]
    fn a_definition_counts_twice() {
        let memory = CacheMemory::new(64 << 20);
        let maps: Vec<Value> = (0..10_000).map(|i| json!({"a": i})).collect();
        let crd = json!({"metadata": {"name": "x"}, "spec": maps});
        let len = serde_json::to_vec(&crd).unwrap().len();
        let weight = object(crd.clone()).weight() as i64;
        // Room for the object once, not twice.
        memory.account().objects.add((64 << 20) - weight * 3 / 2);
        memory
            .admit(&crd, len, None, false)
            .expect("fits as an object");
        memory
            .admit(&crd, len, None, true)
            .expect_err("not with its schema held again");
        let current = object(crd.clone());
        memory
            .admit(&crd, len, Some(&current), true)
            .expect("an update that does not grow its definition");
    }
}

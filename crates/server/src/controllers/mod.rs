//! The server's own controllers: what kube-controller-manager would do for objects no one
//! else acts on, for a server over a store (never in caching-proxy mode, where the upstream
//! cluster's controllers run). They read the caches and write through the ordinary write
//! path ([`crate::source::store::StoreSource`]), as a client would.

pub mod apiservices;
pub mod clusterrole_aggregation;
pub mod crd_finalizer;
pub mod flowschema_status;
pub mod garbage_collector;
pub mod keeper;
pub mod namespaces;
pub mod pod_gc;
pub mod quota_resync;
pub mod storage_protection;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use watchkeeper_api::ResourceDef;
use watchkeeper_core::{Change, Object, Revision};

use crate::source::feed::Observer;

/// What a controller's task works with: the store it writes through (the ordinary write
/// path), the served resources whose caches it reads, and how it waits for them.
#[derive(Clone, Debug)]
pub struct Context {
    /// The store source (writes).
    pub source: crate::source::store::StoreSource,
    /// The served resources (reads).
    pub registry: Arc<crate::cache::Registry>,
    /// How reads wait for the caches.
    pub fresh: crate::source::read::Freshness,
}

/// Runs a controller's `work` until `shutdown` turns true.
pub(crate) async fn until_shutdown(
    work: impl std::future::Future<Output = ()>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    tokio::select! {
        () = work => {}
        _ = shutdown.wait_for(|down| *down) => {}
    }
}

/// Several observers told in turn (the reflector tells one).
#[derive(Debug)]
pub struct Observers(pub Vec<Arc<dyn Observer>>);

impl Observer for Observers {
    fn reset(&self, def: &ResourceDef, revision: Revision, objects: &[Arc<Object>]) {
        for observer in &self.0 {
            observer.reset(def, revision, objects);
        }
    }

    fn changes(&self, def: &ResourceDef, revision: Revision, changes: &[Change]) {
        for observer in &self.0 {
            observer.changes(def, revision, changes);
        }
    }
}

/// When each key that failed is looked at again: kube's per-item exponential back-off
/// (client-go's `ItemExponentialFailureRateLimiter`, which kube-controller-manager's
/// controllers use): the n-th failure in a row waits `base` × 2^(n-1), at most `max`; a
/// success forgets the key's failures.
///
/// ## Guarantees
/// - A key that keeps failing is tried again once per delay, whatever else wakes the
///   controller: new information about other keys does not retry it (a controller's work
///   then follows what clients do, never the number of keys that fail times that). New
///   information about the key itself is the controller's to act on at once, as kube's
///   queues do; its failures still count until it succeeds.
/// - A key is waiting at most once ([`Retries::failed`] again moves it).
/// - Pure: the caller passes the time, so the schedule is tested without waiting.
///
/// ## Bounds
/// One entry per key that failed since its last success: the keys are objects or
/// namespaces in the store, so the store's quota bounds it.
#[derive(Debug)]
pub(crate) struct Retries<K: Ord + Clone> {
    base: Duration,
    max: Duration,
    /// Failures in a row per key.
    failures: BTreeMap<K, u32>,
    /// Keys waiting, by when they are due.
    waiting: BTreeSet<(Instant, K)>,
    /// When each waiting key is due (to move or drop its `waiting` entry).
    due: BTreeMap<K, Instant>,
}

impl<K: Ord + Clone> Retries<K> {
    /// No key waiting; the first failure waits `base`, delays double up to `max`.
    pub(crate) fn new(base: Duration, max: Duration) -> Retries<K> {
        Retries {
            base,
            max,
            failures: BTreeMap::new(),
            waiting: BTreeSet::new(),
            due: BTreeMap::new(),
        }
    }

    /// `key` failed at `now`: it waits its next delay. Returns the delay.
    pub(crate) fn failed(&mut self, key: K, now: Instant) -> Duration {
        let failures = self.failures.entry(key.clone()).or_insert(0);
        *failures = failures.saturating_add(1);
        let doublings = (*failures - 1).min(63);
        let delay = self
            .base
            .checked_mul(1u32.checked_shl(doublings).unwrap_or(u32::MAX))
            .map_or(self.max, |delay| delay.min(self.max));
        if let Some(before) = self.due.insert(key.clone(), now + delay) {
            self.waiting.remove(&(before, key.clone()));
        }
        self.waiting.insert((now + delay, key));
        delay
    }

    /// `key` succeeded: its failures are forgotten and it no longer waits.
    pub(crate) fn forget(&mut self, key: &K) {
        self.failures.remove(key);
        if let Some(due) = self.due.remove(key) {
            self.waiting.remove(&(due, key.clone()));
        }
    }

    /// When the first waiting key is due, if any waits.
    pub(crate) fn next_due(&self) -> Option<Instant> {
        self.waiting.first().map(|(due, _)| *due)
    }

    /// The keys due at `now`, which no longer wait (their failures still count).
    pub(crate) fn take_due(&mut self, now: Instant) -> Vec<K> {
        let mut keys = Vec::new();
        while let Some((due, _)) = self.waiting.first() {
            if *due > now {
                break;
            }
            let Some((_, key)) = self.waiting.pop_first() else {
                break;
            };
            self.due.remove(&key);
            keys.push(key);
        }
        keys
    }

    /// Keys that failed since their last success.
    pub(crate) fn failing(&self) -> usize {
        self.failures.len()
    }

    /// Waits until `wake` is notified or the first waiting key is due.
    pub(crate) async fn wait(&self, wake: &tokio::sync::Notify) {
        match self.next_due() {
            None => wake.notified().await,
            Some(due) => {
                let _ = tokio::time::timeout_at(due, wake.notified()).await;
            }
        }
    }
}

/// A name-queue controller's state: the names it has queued and the revision it was last
/// told.
pub(crate) trait Queued {
    /// The queued names and the revision.
    fn queued(&mut self) -> (&mut BTreeSet<String>, Revision);
}

/// A name-queue controller's state behind its lock, and the wake-up of its task.
#[derive(Debug, Default)]
pub(crate) struct NameQueue<S> {
    state: std::sync::Mutex<S>,
    wake: tokio::sync::Notify,
}

impl<S: Queued> NameQueue<S> {
    /// The state, locked.
    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, S> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Unlocks `state` and wakes the task when it has names queued.
    pub(crate) fn release(&self, mut state: std::sync::MutexGuard<'_, S>) {
        let queued = !state.queued().0.is_empty();
        drop(state);
        if queued {
            self.wake.notify_one();
        }
    }

    /// Runs the controller until `shutdown` turns true: wait for a wake-up or the first
    /// retry due, queue the retries due, then look at every queued name (taken, with the
    /// revision the controller was last told, under the lock) until the queue stays empty;
    /// a name whose look fails waits its back-off ([`Retries`]), one that succeeds forgets
    /// its failures. `what` names the controller's work in the debug log.
    pub(crate) async fn run<Look, Fut>(
        &self,
        mut retries: Retries<String>,
        look: Look,
        what: &'static str,
        shutdown: tokio::sync::watch::Receiver<bool>,
    ) where
        Look: Fn(String, Revision) -> Fut,
        Fut: std::future::Future<Output = Result<(), watchkeeper_api::ApiError>>,
    {
        let serve = async {
            loop {
                retries.wait(&self.wake).await;
                let due = retries.take_due(Instant::now());
                self.lock().queued().0.extend(due);
                loop {
                    let (queued, revision) = {
                        let mut state = self.lock();
                        let (names, revision) = state.queued();
                        (std::mem::take(names), revision)
                    };
                    if queued.is_empty() {
                        break;
                    }
                    for name in queued {
                        match look(name.clone(), revision).await {
                            Ok(()) => retries.forget(&name),
                            Err(error) => {
                                tracing::debug!(%name, %error.message, "{what} failed; retrying");
                                retries.failed(name, Instant::now());
                            }
                        }
                    }
                }
            }
        };
        until_shutdown(serve, shutdown).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: Duration = Duration::from_millis(5);
    const MAX: Duration = Duration::from_secs(60);

    #[test]
    fn delays_double_from_the_base_up_to_the_max() {
        let mut retries = Retries::new(BASE, MAX);
        let now = Instant::now();
        let delays: Vec<Duration> = (0..16).map(|_| retries.failed("a", now)).collect();
        assert_eq!(delays[0], BASE);
        assert_eq!(delays[1], BASE * 2);
        assert_eq!(delays[10], BASE * 1024);
        assert_eq!(delays[15], MAX);
        // Far past any shift: still the max, no overflow.
        for _ in 0..100 {
            retries.failed("a", now);
        }
        assert_eq!(retries.failed("a", now), MAX);
    }

    #[test]
    fn a_key_is_due_once_after_its_delay_and_only_then() {
        let mut retries = Retries::new(BASE, MAX);
        let now = Instant::now();
        retries.failed("a", now);
        retries.failed("b", now);
        retries.failed("b", now); // b waits 10 ms from now, once
        assert_eq!(retries.next_due(), Some(now + BASE));
        assert!(retries.take_due(now + BASE / 2).is_empty());
        assert_eq!(retries.take_due(now + BASE), vec!["a"]);
        assert_eq!(retries.next_due(), Some(now + BASE * 2));
        assert_eq!(retries.take_due(now + MAX), vec!["b"]);
        assert!(retries.take_due(now + MAX).is_empty());
        assert_eq!(retries.next_due(), None);
        // Taken keys keep their failures until they succeed.
        assert_eq!(retries.failing(), 2);
        assert_eq!(retries.failed("a", now), BASE * 2);
    }

    /// On tokio's paused clock: a wait ends when the first waiting key is due (the clock
    /// advances to it), or at once for a wake; with nothing waiting, only a wake ends it.
    #[tokio::test(start_paused = true)]
    async fn a_wait_ends_when_a_key_is_due_or_at_a_wake() {
        let wake = tokio::sync::Notify::new();
        let mut retries = Retries::new(BASE, MAX);
        let start = Instant::now();
        retries.failed("a", start);
        retries.failed("a", start);
        retries.wait(&wake).await;
        let waited = Instant::now() - start;
        assert!(
            waited >= BASE * 2 && waited < BASE * 2 + Duration::from_millis(2),
            "{waited:?}"
        );
        assert_eq!(retries.take_due(Instant::now()), vec!["a"]);
        let idle = tokio::time::timeout(Duration::from_secs(3600), retries.wait(&wake)).await;
        assert!(idle.is_err(), "a wait with nothing due ended by itself");
        let before = Instant::now();
        wake.notify_one();
        retries.wait(&wake).await;
        assert_eq!(Instant::now(), before);
    }

    #[test]
    fn success_forgets_failures_and_the_wait() {
        let mut retries = Retries::new(BASE, MAX);
        let now = Instant::now();
        for _ in 0..5 {
            retries.failed("a", now);
        }
        retries.forget(&"a");
        assert_eq!(retries.next_due(), None);
        assert_eq!(retries.failing(), 0);
        assert_eq!(retries.failed("a", now), BASE);
    }
}

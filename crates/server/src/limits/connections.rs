//! Connection slots: how many connections the server holds at once, and which one gives way
//! when a new one arrives at the bound (`--max-connections`).
//!
//! Every accepted socket costs a file descriptor until it closes. Without a bound below the
//! process's descriptor limit, clients that open sockets and send nothing (or dribble a
//! request) fill the descriptor table between their timeouts; then `accept` fails for every
//! client, an administrator included, and the server itself cannot open a file or reconnect
//! to its store. The bound keeps a reserve of descriptors for the server's own use, and the
//! eviction rule below keeps the server reachable for clients that do send requests.
//!
//! ## Guarantees
//! - At most `--max-connections` accepted connections are open at once, plus those already
//!   asked to close (a closing connection finishes its response in flight, bounded by
//!   `--shutdown-grace-period-ms`). 0 turns the bound off.
//! - A connection accepted at the bound takes the slot of an open connection that has no
//!   request in flight, chosen in this order: first those that have not yet had a request in
//!   flight (from accept: a TLS handshake, a request head not yet complete, or nothing at
//!   all), then idle keep-alive connections; within each group the one waiting longest. That
//!   connection is asked to close gracefully (HTTP/1.1: after nothing; HTTP/2: GOAWAY) and the
//!   eviction is counted as `watchkeeper_limit_rejections_total{limit="connection_evicted"}`.
//!   A connection with a request or a watch in flight is never chosen; one whose request
//!   began at the very moment it was chosen keeps its request and stays open (the bound is
//!   then exceeded by one until a connection closes).
//! - When every open connection has a request in flight, the new connection is closed at once
//!   without being read (there is no request to answer yet, and its protocol is not known),
//!   counted as `limit="connections"`.
//! - Admission, the choice and each change of a connection's state cost O(log n) under one
//!   short lock: a flood of connections at the bound does not scan the open ones.
//! - The order is the order of events, not of clocks: a sequence number taken when a
//!   connection was accepted or last became idle ("waiting longest" = smallest number).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

/// Descriptors kept for the server's own use when `--max-connections` is derived from the
/// process's descriptor limit: a tenth of it, between [`RESERVE_MIN`] and [`RESERVE_MAX`].
pub const RESERVE_MIN: u64 = 32;
/// See [`RESERVE_MIN`].
pub const RESERVE_MAX: u64 = 1024;

/// `--max-connections` derived from the soft descriptor limit `nofile`: the limit less a
/// tenth of it, the reserve at least [`RESERVE_MIN`] and at most [`RESERVE_MAX`] descriptors
/// (and at least one connection).
#[must_use]
pub fn derived_max(nofile: u64) -> usize {
    let reserve = (nofile / 10).clamp(RESERVE_MIN, RESERVE_MAX);
    usize::try_from(nofile.saturating_sub(reserve).max(1)).unwrap_or(usize::MAX)
}

/// [`derived_max`] of this process's soft descriptor limit (unbounded if it cannot be read).
#[must_use]
pub fn derived_from_process() -> usize {
    match rlimit::getrlimit(rlimit::Resource::NOFILE) {
        Ok((soft, _)) if soft != rlimit::INFINITY => derived_max(soft),
        _ => 0,
    }
}

/// Raises this process's soft descriptor limit to its hard limit, as Go's runtime does for
/// kube-apiserver (the soft limit is often 1,024, far below what a watch server needs).
/// Returns the soft limit in force afterwards.
pub fn raise_descriptor_limit() -> Option<u64> {
    rlimit::increase_nofile_limit(u64::MAX).ok()
}

/// Which group an open connection without a request in flight is in (the order of eviction).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Group {
    /// No request has been in flight since accept.
    Fresh,
    /// Served at least one request; nothing in flight now.
    Idle,
}

#[derive(Debug, Default)]
struct Inner {
    /// Connections admitted and not yet dropped.
    open: usize,
    /// The next sequence number.
    next: u64,
    /// The connections that may give way, by group and sequence number.
    waiting: BTreeMap<(Group, u64), Arc<Evict>>,
}

/// How a connection learns that it was chosen to give way.
#[derive(Debug, Default)]
struct Evict {
    chosen: AtomicBool,
    notify: Notify,
}

/// The server's connection slots (see the module docs).
#[derive(Debug)]
pub struct ConnectionSlots {
    max: usize,
    inner: Mutex<Inner>,
}

/// What [`ConnectionSlots::admit`] decided for a new connection.
#[derive(Debug)]
pub enum Admission {
    /// Admitted below the bound.
    Admitted(ConnectionSlot),
    /// Admitted at the bound: another connection was asked to give way.
    Evicted(ConnectionSlot),
    /// Every open connection has a request in flight: close the new one.
    Refused,
}

impl ConnectionSlots {
    /// Slots for at most `max` connections (0 = unbounded).
    #[must_use]
    pub fn new(max: usize) -> Arc<ConnectionSlots> {
        Arc::new(ConnectionSlots {
            max,
            inner: Mutex::new(Inner::default()),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // The lock guards plain bookkeeping with no panicking code inside; a poisoned lock
        // still holds consistent data.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A slot for a connection just accepted (see [`Admission`]). At the bound, the
    /// connection that gives way is notified (see the module docs).
    #[must_use]
    pub fn admit(self: &Arc<Self>) -> Admission {
        let mut inner = self.lock();
        let mut evicted = false;
        if self.max > 0 && inner.open >= self.max {
            let Some((_, evict)) = inner.waiting.pop_first() else {
                return Admission::Refused;
            };
            evict.chosen.store(true, Ordering::Relaxed);
            // A stored permit: the connection closes even if it is not waiting yet.
            evict.notify.notify_one();
            evicted = true;
        }
        inner.open += 1;
        let key = (Group::Fresh, inner.next);
        inner.next += 1;
        let evict = Arc::new(Evict::default());
        inner.waiting.insert(key, evict.clone());
        let slot = ConnectionSlot {
            slots: self.clone(),
            key: Some(key),
            served: false,
            evict,
        };
        if evicted {
            Admission::Evicted(slot)
        } else {
            Admission::Admitted(slot)
        }
    }

    /// Connections holding a slot now.
    #[must_use]
    pub fn open(&self) -> usize {
        self.lock().open
    }

    /// Open connections that may give way now (nothing in flight).
    #[must_use]
    pub fn waiting(&self) -> usize {
        self.lock().waiting.len()
    }

    /// The bound (0 = none).
    #[must_use]
    pub fn max(&self) -> usize {
        self.max
    }
}

/// One connection's slot, released when dropped.
#[derive(Debug)]
pub struct ConnectionSlot {
    slots: Arc<ConnectionSlots>,
    /// Its place among the connections that may give way (`None` while a request is in
    /// flight).
    key: Option<(Group, u64)>,
    /// Whether a request has been in flight on it.
    served: bool,
    evict: Arc<Evict>,
}

impl ConnectionSlot {
    /// A request is in flight: the connection may not give way until [`Self::idle`].
    pub fn busy(&mut self) {
        self.served = true;
        if let Some(key) = self.key.take() {
            self.slots.lock().waiting.remove(&key);
        }
    }

    /// Nothing in flight any more: the connection may give way, after those waiting longer.
    pub fn idle(&mut self) {
        let mut inner = self.slots.lock();
        // `chosen` is written under this lock (or, in `keep`, by the slot's owner).
        // Still waiting, or chosen already (never offered twice).
        if self.key.is_some() || self.evict.chosen.load(Ordering::Relaxed) {
            return;
        }
        let group = if self.served {
            Group::Idle
        } else {
            Group::Fresh
        };
        let key = (group, inner.next);
        inner.next += 1;
        inner.waiting.insert(key, self.evict.clone());
        self.key = Some(key);
    }

    /// Chosen to give way, but a request began at that moment: the connection stays (busy),
    /// and may be chosen again once idle.
    pub fn keep(&mut self) {
        self.evict.chosen.store(false, Ordering::Relaxed);
        self.busy();
    }

    /// Completes when a new connection took this one's place: close it.
    pub async fn evicted(&self) {
        self.evict.notify.notified().await;
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        let mut inner = self.slots.lock();
        if let Some(key) = self.key.take() {
            inner.waiting.remove(&key);
        }
        inner.open -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admitted(slots: &Arc<ConnectionSlots>) -> ConnectionSlot {
        match slots.admit() {
            Admission::Admitted(slot) => slot,
            other => panic!("admitted below the bound: {other:?}"),
        }
    }

    fn evicting(slots: &Arc<ConnectionSlots>) -> ConnectionSlot {
        match slots.admit() {
            Admission::Evicted(slot) => slot,
            other => panic!("admitted at the bound: {other:?}"),
        }
    }

    fn was_evicted(slot: &ConnectionSlot) -> bool {
        use std::future::Future;
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        let future = std::pin::pin!(slot.evicted());
        future.poll(&mut cx).is_ready()
    }

    #[test]
    fn the_derived_bound_keeps_a_tenth_of_the_descriptors_within_its_limits() {
        assert_eq!(derived_max(1024), 922);
        assert_eq!(derived_max(200), 168);
        assert_eq!(derived_max(20_000), 18_976);
        assert_eq!(derived_max(10), 1);
    }

    #[test]
    fn below_the_bound_nobody_gives_way() {
        let slots = ConnectionSlots::new(3);
        let held: Vec<_> = (0..3).map(|_| admitted(&slots)).collect();
        assert_eq!((slots.open(), slots.waiting()), (3, 3));
        assert!(held.iter().all(|s| !was_evicted(s)));
        drop(held);
        assert_eq!((slots.open(), slots.waiting()), (0, 0));
    }

    #[test]
    fn fresh_connections_give_way_before_idle_ones_oldest_first() {
        let slots = ConnectionSlots::new(3);
        let mut served = admitted(&slots);
        let fresh_old = admitted(&slots);
        let fresh_new = admitted(&slots);
        served.busy();
        served.idle();
        // At the bound: the oldest connection that never had a request gives way.
        let fourth = evicting(&slots);
        assert!(was_evicted(&fresh_old));
        assert!(!was_evicted(&fresh_new) && !was_evicted(&served));
        drop(fresh_old);
        // Next, the younger fresh one, then the fresh fourth, and only then the idle one.
        let fifth = evicting(&slots);
        assert!(was_evicted(&fresh_new));
        drop(fresh_new);
        let sixth = evicting(&slots);
        assert!(was_evicted(&fourth));
        drop(fourth);
        assert!(!was_evicted(&served) && !was_evicted(&fifth) && !was_evicted(&sixth));
        let _seventh = evicting(&slots);
        assert!(was_evicted(&fifth) && !was_evicted(&served));
        assert_eq!(slots.open(), 4);
    }

    #[test]
    fn a_connection_with_a_request_in_flight_never_gives_way() {
        let slots = ConnectionSlots::new(2);
        let mut a = admitted(&slots);
        let mut b = admitted(&slots);
        a.busy();
        b.busy();
        assert_eq!(slots.waiting(), 0);
        assert!(matches!(slots.admit(), Admission::Refused));
        assert_eq!(slots.open(), 2);
        // Once idle again it may give way: the one idle longest first.
        b.idle();
        a.idle();
        let _c = evicting(&slots);
        assert!(was_evicted(&b) && !was_evicted(&a));
        // A chosen connection is not offered again, whatever it does next.
        b.busy();
        b.idle();
        assert_eq!(slots.waiting(), 2);
    }

    #[test]
    fn zero_means_unbounded() {
        let slots = ConnectionSlots::new(0);
        let held: Vec<_> = (0..100).map(|_| admitted(&slots)).collect();
        assert_eq!(slots.open(), 100);
        assert!(held.iter().all(|s| !was_evicted(s)));
    }
}

//! The event history: a ring of the most recent events, sized by a time window.
//!
//! ## Capacity
//! The history holds between `history_capacity_min` and `history_capacity_max` events. When an
//! append finds it full, it doubles if even its oldest event is still fresh (younger than
//! `event_fresh_duration`), and halves if the event a quarter of the capacity back from the
//! newest is already stale; otherwise it evicts. This is Kubernetes' `watchCacheHistory` rule.
//!
//! ## Size
//! The history also holds at most `history_bytes_max` bytes, counted as the memory of the
//! objects each event keeps alive (the object it carries and the one it replaced or deleted;
//! [`crate::Object::weight`]: a decoded body, which may take 100 times its JSON, and its
//! encoding): an append that would pass it evicts the oldest revisions first, below
//! `history_capacity_min` events if need be, but never the revision being appended. So large
//! objects written fast cost a bounded amount of memory, and watchers left behind by those
//! evictions get the honest 410 as for any eviction. The count rule above decides first; the
//! byte bound only ever evicts more. A version is counted by each event that holds it (the one
//! that made it and the one that replaced it), so the count errs high, never low: a version
//! replaced by a small one still counts where it is held. Several caches may also share a
//! budget for their histories ([`crate::metrics::MemoryAccount`]), which evicts more.
//!
//! ## Atomic revisions
//! Events are appended a whole revision at a time and evicted a whole revision at a time, so the
//! history never holds part of a revision. Reads ([`History::read_after`]) also end on a
//! revision boundary. A resume point therefore never falls inside a revision.
//!
//! ## Servable positions
//! `oldest` is `list_revision + 1` until the first eviction after a (re)list, then the revision
//! of the first buffered event. A watcher at position `N` (it has every event `<= N`) can be
//! served iff `N >= oldest - 1`; otherwise it gets 410 "too old resource version".

use std::collections::VecDeque;

use std::sync::Arc;

use crate::config::CacheConfig;
use crate::event::{Event, SharedEvent};
use crate::metrics::MemoryAccount;
use crate::object::Revision;
use crate::time::Instant;

/// One buffered event and when it entered the cache.
#[derive(Debug)]
struct Entry {
    event: SharedEvent,
    time: Instant,
    /// What the event counts against `history_bytes_max` ([`crate::event::Event::weight`]).
    bytes: usize,
}

/// A capacity change, reported so the caller can count it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CapacityChange {
    /// The capacity doubled to the value.
    Grew(usize),
    /// The capacity halved to the value.
    Shrank(usize),
}

/// The bounded, time-windowed history of events.
#[derive(Debug)]
pub struct History {
    entries: VecDeque<Entry>,
    capacity: usize,
    capacity_min: usize,
    capacity_max: usize,
    /// The byte bound, and the bytes the buffered events count ([`crate::event::Event::weight`]).
    bytes_max: usize,
    bytes: usize,
    fresh: std::time::Duration,
    /// The revision of the last (re)list; `oldest` is one above it until something is evicted.
    list_revision: Revision,
    /// Whether an event was evicted since the last (re)list.
    evicted_since_list: bool,
    /// Where the versions this history lets go while they are still held elsewhere are
    /// counted ([`crate::metrics::MemoryAccount`]'s released versions), and the events it let
    /// go since [`History::settle`] last looked at them.
    account: Option<Arc<MemoryAccount>>,
    let_go: Vec<SharedEvent>,
}

impl History {
    /// An empty history after a list at `list_revision`.
    #[must_use]
    pub fn new(config: &CacheConfig, list_revision: Revision) -> History {
        History {
            entries: VecDeque::with_capacity(config.history_capacity_min),
            capacity: config.history_capacity_min,
            capacity_min: config.history_capacity_min,
            capacity_max: config.history_capacity_max,
            bytes_max: config.history_bytes_max,
            bytes: 0,
            fresh: config.event_fresh_duration,
            list_revision,
            evicted_since_list: false,
            account: None,
            let_go: Vec::new(),
        }
    }

    /// Counts the versions this history lets go while they are still held elsewhere in
    /// `account` (see [`crate::metrics::MemoryAccount`] and [`History::settle`]).
    pub(crate) fn set_account(&mut self, account: Arc<MemoryAccount>) {
        self.account = Some(account);
    }

    /// Lets `event` go: kept until [`History::settle`] when there is an account.
    fn let_go(&mut self, event: SharedEvent) {
        if self.account.is_some() {
            self.let_go.push(event);
        }
    }

    /// Lets every buffered event go.
    pub(crate) fn let_go_all(&mut self) {
        let entries = std::mem::take(&mut self.entries);
        for entry in entries {
            self.let_go(entry.event);
        }
    }

    /// Counts what the events let go since the last call still keep alive elsewhere, then
    /// drops them. The cache calls it once its own snapshots no longer need what the history
    /// let go (they are trimmed to the new floor after an append), so what is counted is held
    /// by watchers' queues, watches' snapshots and requests, not by the cache.
    pub(crate) fn settle(&mut self) {
        let Some(account) = &self.account else {
            return;
        };
        for event in self.let_go.drain(..) {
            Event::release(&event, account);
        }
    }

    /// Forgets everything: the cache was re-listed at `list_revision`.
    pub fn reset(&mut self, list_revision: Revision) {
        self.let_go_all();
        self.bytes = 0;
        self.list_revision = list_revision;
        self.evicted_since_list = false;
    }

    /// The current capacity in events.
    #[must_use]
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The bytes the buffered events count against `history_bytes_max` (see the module docs).
    #[must_use]
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The number of buffered events.
    #[must_use]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is buffered.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The oldest revision the history can replay (see the module docs).
    #[must_use]
    pub fn oldest(&self) -> Revision {
        match self.entries.front() {
            Some(entry) if self.evicted_since_list => entry.event.revision(),
            _ => self.list_revision + 1,
        }
    }

    /// The lowest position a watcher may have and still be served: `oldest - 1`.
    #[must_use]
    pub fn servable_floor(&self) -> Revision {
        self.oldest() - 1
    }

    /// The revision of the newest buffered event, or the list revision.
    #[must_use]
    pub fn newest(&self) -> Revision {
        self.entries
            .back()
            .map_or(self.list_revision, |e| e.event.revision())
    }

    /// When the oldest buffered event entered the cache.
    #[must_use]
    pub fn oldest_time(&self) -> Option<Instant> {
        self.entries.front().map(|e| e.time)
    }

    /// How far a watcher at `position` is behind the newest event: the number of buffered
    /// events above `position` (whether or not it selects them) and when the first of them
    /// entered the cache. For a position below the history's floor, every buffered event is
    /// counted (the evicted ones are not known any more).
    #[must_use]
    pub fn lag(&self, position: Revision) -> (usize, Option<Instant>) {
        let start = self
            .entries
            .partition_point(|e| e.event.revision() <= position);
        (
            self.entries.len() - start,
            self.entries.get(start).map(|e| e.time),
        )
    }

    /// Appends all events of one revision. Returns a capacity change, if any, and the number of
    /// events evicted.
    ///
    /// # Panics
    /// If `events` is empty or not all of one revision above the newest.
    pub fn append_revision(
        &mut self,
        events: &[SharedEvent],
        now: Instant,
    ) -> (Option<CapacityChange>, usize) {
        let revision = events.first().expect("a revision has events").revision();
        assert!(events.iter().all(|e| e.revision() == revision));
        assert!(
            revision > self.newest(),
            "revisions are appended in order: {revision} after {}",
            self.newest()
        );
        let mut change = None;
        if self.entries.len() + events.len() > self.capacity {
            change = self.resize(now);
        }
        let mut evicted = 0;
        while !self.entries.is_empty() && self.entries.len() + events.len() > self.capacity {
            evicted += self.evict_oldest_revision();
        }
        for event in events {
            let bytes = event.weight();
            self.bytes += bytes;
            self.entries.push_back(Entry {
                event: event.clone(),
                time: now,
                bytes,
            });
        }
        // Each event's size is computed once (an estimate walks the body); the revision just
        // appended is never evicted.
        while self.bytes > self.bytes_max
            && self
                .entries
                .front()
                .is_some_and(|e| e.event.revision() != revision)
        {
            evicted += self.evict_oldest_revision();
        }
        (change, evicted)
    }

    /// Evicts the oldest whole revisions while the history counts more than `bytes`, never the
    /// newest revision (a budget shared with other caches asks for it: see
    /// [`crate::metrics::MemoryAccount`]). Returns the events evicted.
    pub fn evict_to(&mut self, bytes: usize) -> usize {
        let newest = self.newest();
        let mut evicted = 0;
        while self.bytes > bytes
            && self
                .entries
                .front()
                .is_some_and(|e| e.event.revision() != newest)
        {
            evicted += self.evict_oldest_revision();
        }
        evicted
    }

    fn resize(&mut self, now: Instant) -> Option<CapacityChange> {
        let oldest_time = self.entries.front()?.time;
        if self.capacity < self.capacity_max
            && now.saturating_duration_since(oldest_time) < self.fresh
        {
            self.capacity = (self.capacity * 2).min(self.capacity_max);
            return Some(CapacityChange::Grew(self.capacity));
        }
        if self.capacity > self.capacity_min {
            let quarter = self.capacity / 4;
            if let Some(index) = self.entries.len().checked_sub(quarter + 1)
                && now.saturating_duration_since(self.entries[index].time) >= self.fresh
            {
                self.capacity = (self.capacity / 2).max(self.capacity_min);
                return Some(CapacityChange::Shrank(self.capacity));
            }
        }
        None
    }

    fn evict_oldest_revision(&mut self) -> usize {
        let Some(first) = self.entries.front() else {
            return 0;
        };
        let revision = first.event.revision();
        let mut evicted = 0;
        while self
            .entries
            .front()
            .is_some_and(|e| e.event.revision() == revision)
        {
            if let Some(entry) = self.entries.pop_front() {
                self.bytes -= entry.bytes;
                self.let_go(entry.event);
            }
            evicted += 1;
        }
        self.evicted_since_list = true;
        evicted
    }

    /// Copies into `out` the events with revision `> position`, whole revisions only: at most
    /// `max_events`, except that the first revision is always taken whole. Returns how many
    /// events were copied.
    ///
    /// The caller checks servability first; reading from an evicted position returns what is
    /// left, which would be a gap.
    pub fn read_after(
        &self,
        position: Revision,
        max_events: usize,
        out: &mut Vec<SharedEvent>,
    ) -> usize {
        debug_assert!(
            position >= self.servable_floor(),
            "read from an evicted position"
        );
        let start = self
            .entries
            .partition_point(|e| e.event.revision() <= position);
        let mut taken = 0;
        let mut index = start;
        while index < self.entries.len() {
            let revision = self.entries[index].event.revision();
            let end = index
                + self
                    .entries
                    .range(index..)
                    .take_while(|e| e.event.revision() == revision)
                    .count();
            if taken > 0 && taken + (end - index) > max_events {
                break;
            }
            out.extend(self.entries.range(index..end).map(|e| e.event.clone()));
            taken += end - index;
            index = end;
            if taken >= max_events {
                break;
            }
        }
        taken
    }

    /// The events of exactly the revisions in `(after, up_to]`, for the dispatcher's final
    /// hand-off.
    pub fn read_range(&self, after: Revision, up_to: Revision, out: &mut Vec<SharedEvent>) {
        let start = self
            .entries
            .partition_point(|e| e.event.revision() <= after);
        out.extend(
            self.entries
                .range(start..)
                .take_while(|e| e.event.revision() <= up_to)
                .map(|e| e.event.clone()),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Event;
    use crate::object::Object;
    use std::collections::BTreeMap;
    use std::sync::Arc;
    use std::time::Duration;

    fn event(revision: Revision, name: &str) -> SharedEvent {
        sized(revision, name, 0)
    }

    fn config(min: usize, max: usize) -> CacheConfig {
        CacheConfig {
            history_capacity_min: min,
            history_capacity_max: max,
            event_fresh_duration: Duration::from_secs(10),
            ..CacheConfig::default()
        }
    }

    #[test]
    fn grows_while_fresh_and_evicts_when_stale() {
        let mut history = History::new(&config(4, 16), 10);
        assert_eq!(history.oldest(), 11);
        let t0 = Instant::ZERO;
        for rv in 11..=30 {
            history.append_revision(&[event(rv, "a")], t0);
        }
        // All fresh: grew to the max, then evicted.
        assert_eq!(history.capacity(), 16);
        assert_eq!(history.len(), 16);
        assert_eq!(history.oldest(), 15);
        assert_eq!(history.servable_floor(), 14);
        // Much later: the newest quarter is stale, so it halves.
        history.append_revision(&[event(31, "a")], t0 + Duration::from_secs(100));
        assert_eq!(history.capacity(), 8);
        assert_eq!(history.len(), 8);
    }

    #[test]
    fn lag_counts_the_events_above_a_position_and_dates_the_first() {
        let mut history = History::new(&config(8, 8), 0);
        let at = |s| Instant::ZERO + Duration::from_secs(s);
        history.append_revision(&[event(1, "a"), event(1, "b")], at(1));
        history.append_revision(&[event(2, "a")], at(2));
        history.append_revision(&[event(4, "a")], at(4));
        assert_eq!(history.lag(0), (4, Some(at(1))));
        assert_eq!(history.lag(1), (2, Some(at(2))));
        assert_eq!(history.lag(3), (1, Some(at(4))));
        assert_eq!(history.lag(4), (0, None));
        assert_eq!(history.lag(9), (0, None));
    }

    #[test]
    fn evicts_and_reads_whole_revisions() {
        let mut history = History::new(&config(4, 4), 0);
        let t = Instant::ZERO + Duration::from_secs(100);
        history.append_revision(
            &[event(1, "a"), event(1, "b"), event(1, "c")],
            Instant::ZERO,
        );
        history.append_revision(&[event(2, "a")], t);
        // Appending 2 events to a full-ish buffer evicts all of revision 1, never part of it.
        history.append_revision(&[event(3, "a"), event(3, "b")], t);
        assert_eq!(history.oldest(), 2);
        assert_eq!(history.len(), 3);
        let mut out = Vec::new();
        // max 1 event, but revision 3 has two: the first revision is taken whole.
        assert_eq!(history.read_after(2, 1, &mut out), 2);
        assert!(out.iter().all(|e| e.revision() == 3));
        out.clear();
        assert_eq!(
            history.read_after(1, 2, &mut out),
            1,
            "stops before splitting revision 3"
        );
        out.clear();
        history.read_range(1, 2, &mut out);
        assert_eq!(out.len(), 1);
    }

    /// An event whose object counts `bytes` against the byte bound (0: its estimated size).
    fn sized(revision: Revision, name: &str, bytes: usize) -> SharedEvent {
        let object = Object::new(
            "ns",
            name,
            BTreeMap::new(),
            BTreeMap::new(),
            revision,
            serde_json::json!({"metadata": {}}),
        )
        .with_size_hint(bytes);
        Arc::new(Event::new(revision, Some(Arc::new(object)), None))
    }

    fn deletion(revision: Revision, of: &SharedEvent) -> SharedEvent {
        Arc::new(Event::new(revision, None, of.object().cloned()))
    }

    /// Goal: the byte bound evicts whole revisions, oldest first, below the minimum capacity if
    /// need be, never the revision being appended; deletions count the deleted object; the
    /// count is exact after evictions and resets.
    #[test]
    fn the_byte_bound_evicts_the_oldest_whole_revisions() {
        // What each test object weighs beside its JSON size (the size hint).
        let c = sized(1, "a", 1).object().expect("an object").weight() - 1;
        let mut history = History::new(
            &CacheConfig {
                history_bytes_max: 10_000 + 3 * c,
                ..config(100, 1_000)
            },
            0,
        );
        let t = Instant::ZERO;
        history.append_revision(&[sized(1, "a", 3_000), sized(1, "b", 3_000)], t);
        history.append_revision(&[sized(2, "c", 3_000)], t);
        assert_eq!((history.len(), history.bytes()), (3, 9_000 + 3 * c));
        assert_eq!(history.oldest(), 1, "nothing evicted yet");
        // One more event passes the bound: revision 1 goes whole (both events), below the
        // minimum capacity of 100 events.
        let (_, evicted) = history.append_revision(&[sized(3, "d", 2_000)], t);
        assert_eq!(evicted, 2);
        assert_eq!((history.len(), history.bytes()), (2, 5_000 + 2 * c));
        assert_eq!(history.oldest(), 2);
        // A deletion counts the object it deletes.
        let deleted = sized(2, "c", 3_000);
        history.append_revision(&[deletion(4, &deleted)], t);
        assert_eq!((history.len(), history.bytes()), (3, 8_000 + 3 * c));
        // A revision larger than the bound alone still goes in; everything older goes out.
        let (_, evicted) = history.append_revision(&[sized(5, "e", 50_000)], t);
        assert_eq!(evicted, 3);
        assert_eq!((history.len(), history.bytes()), (1, 50_000 + c));
        assert_eq!(history.oldest(), 5);
        assert_eq!(history.servable_floor(), 4);
        history.reset(7);
        assert_eq!((history.len(), history.bytes()), (0, 0));
        history.append_revision(&[sized(8, "f", 1_000)], t);
        assert_eq!(history.bytes(), 1_000 + c);
    }

    /// Goal: the byte bound counts an object's decoded weight, not its JSON: a body of many
    /// one-entry maps (90 times its text once parsed) fills the bound 90 times sooner.
    #[test]
    fn the_byte_bound_counts_what_a_body_weighs_decoded() {
        let items: Vec<serde_json::Value> =
            (0..1_000).map(|_| serde_json::json!({"a": 1})).collect();
        let body = serde_json::json!({"metadata": {}, "spec": items});
        let json = serde_json::to_vec(&body).expect("encodes").len();
        let at = |revision: Revision| {
            Object::new(
                "ns",
                "m",
                BTreeMap::new(),
                BTreeMap::new(),
                revision,
                body.clone(),
            )
            .with_size_hint(json)
        };
        let weight = at(1).weight();
        assert!(
            weight > 60 * json,
            "{weight} bytes for {json} bytes of JSON"
        );
        let mut history = History::new(
            &CacheConfig {
                history_bytes_max: 3 * weight,
                ..config(100, 1_000)
            },
            0,
        );
        for revision in 1..=5 {
            let event = Arc::new(Event::new(revision, Some(Arc::new(at(revision))), None));
            history.append_revision(&[event], Instant::ZERO);
        }
        assert_eq!(history.len(), 3, "three of them fit the bound");
        assert_eq!(history.bytes(), 3 * weight);
    }

    /// Goal: an object without a size hint counts its JSON size, estimated from the body
    /// within a small factor of the real encoding.
    #[test]
    fn an_object_without_a_size_hint_counts_its_estimated_json_size() {
        let body = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "x", "namespace": "ns", "labels": {"a": "b"}},
            "data": {"k": "v".repeat(10_000), "n": 12345, "list": [1, true, null, "s"]}});
        let exact = serde_json::to_vec(&body).expect("encodes").len();
        let object = Object::new("ns", "x", BTreeMap::new(), BTreeMap::new(), 1, body);
        let estimate = object.json_size();
        assert!(
            estimate >= exact && estimate <= exact + exact / 10,
            "estimate {estimate} for {exact} bytes"
        );
    }
}

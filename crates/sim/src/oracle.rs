//! The correctness oracle: every connection's received sequence is checked, as it is taken,
//! against the write log filtered by the watcher's selection.
//!
//! The guarantees are named with the core's [`Guarantee`] vocabulary:
//! - **Ordered**: resource versions never go backwards (events and bookmarks).
//! - **Unique**: no event is received twice on a connection.
//! - **Reliable**: no selected event is skipped between the connection's start and the last
//!   item received; and (liveness phase) a never-terminated connection that can read ends up
//!   with every selected event.
//! - **Bookmarkable**: a bookmark at `rv` comes only after every selected event `<= rv`.
//! - **Selection**: each event carries the type its selection implies (ADDED on entering,
//!   DELETED on leaving, MODIFIED otherwise).
//! - **Initial state**: a streaming list delivers exactly the selected objects at the revision of
//!   its initial-events-end bookmark, each once, at the right version.
//!
//! One cursor per connection walks the index of the write log that covers its scope (by
//! namespace, slot or trigger value; the whole log for cluster-wide watchers), so checking costs
//! about the number of events the watcher could select.

use std::sync::Arc;

use watchkeeper_core::{EventType, Guarantee, LabelSelector, Revision};

use crate::model::{Attrs, LogEntry, Store};

/// What a simulated watcher selects, in the simulator's own terms.
#[derive(Clone, Debug)]
pub(crate) struct Selection {
    pub(crate) scope: ScopeSel,
    pub(crate) labels: Option<Arc<LabelSelector>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ScopeSel {
    Cluster,
    Namespace(u32),
    Slot(u32),
    Node(u32),
}

impl Selection {
    fn matches(&self, entry_slot: u32, entry_ns: u32, attrs: &Attrs) -> bool {
        let scope = match self.scope {
            ScopeSel::Cluster => true,
            ScopeSel::Namespace(ns) => entry_ns == ns,
            ScopeSel::Slot(slot) => entry_slot == slot,
            ScopeSel::Node(node) => attrs.node == node,
        };
        scope
            && self
                .labels
                .as_ref()
                .is_none_or(|l| l.matches(attrs.labels.as_ref()))
    }

    /// The event type this selection implies for `entry`, or `None` when it is not selected.
    pub(crate) fn event_type(&self, entry: &LogEntry) -> Option<EventType> {
        let now = entry
            .new
            .as_ref()
            .is_some_and(|a| self.matches(entry.slot, entry.ns, a));
        let before = entry
            .prev
            .as_ref()
            .is_some_and(|a| self.matches(entry.slot, entry.ns, a));
        match (now, before) {
            (true, false) => Some(EventType::Added),
            (true, true) => Some(EventType::Modified),
            (false, true) => Some(EventType::Deleted),
            (false, false) => None,
        }
    }

    fn index<'a>(&self, store: &'a Store) -> Option<&'a [u32]> {
        match self.scope {
            ScopeSel::Cluster => None,
            ScopeSel::Namespace(ns) => Some(&store.by_ns[ns as usize]),
            ScopeSel::Slot(slot) => Some(&store.by_slot[slot as usize]),
            ScopeSel::Node(node) => Some(&store.by_node[node as usize]),
        }
    }
}

fn index_len(sel: &Selection, store: &Store) -> usize {
    sel.index(store).map_or(store.entries.len(), <[u32]>::len)
}

fn entry_at<'a>(sel: &Selection, store: &'a Store, i: usize) -> &'a LogEntry {
    match sel.index(store) {
        None => &store.entries[i],
        Some(index) => &store.entries[index[i] as usize],
    }
}

/// One violation of a guarantee.
#[derive(Clone, Debug)]
pub(crate) struct Violation {
    pub(crate) guarantee: Guarantee,
    pub(crate) message: String,
}

/// The oracle's state for one connection.
#[derive(Debug)]
pub(crate) struct ConnCheck {
    sel: Selection,
    /// Position in the selection's index of the next entry to check.
    cursor: usize,
    /// Whether the start position is known (a `Now` start is known once the dispatcher has
    /// placed it; a streaming list once its initial-events-end bookmark arrives).
    started: bool,
    /// Streaming list: (slot, rv) of the initial objects received so far.
    initial: Option<Vec<(u32, Revision)>>,
    last_rv: Revision,
    broken: bool,
    /// Events checked on this connection.
    pub(crate) events: u64,
}

impl ConnCheck {
    /// A connection whose start position is `after` (or unknown yet).
    pub(crate) fn new(sel: Selection, after: Option<Revision>, initial: bool) -> ConnCheck {
        ConnCheck {
            sel,
            cursor: 0,
            started: false,
            initial: initial.then(Vec::new),
            last_rv: after.unwrap_or(0),
            broken: false,
            events: 0,
        }
    }

    /// Sets the start: every selected event after `after` is expected.
    pub(crate) fn start_after(&mut self, store: &Store, after: Revision) {
        let len = index_len(&self.sel, store);
        let (mut lo, mut hi) = (0, len);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if entry_at(&self.sel, store, mid).rv <= after {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        self.cursor = lo;
        self.started = true;
        self.last_rv = self.last_rv.max(after);
    }

    pub(crate) fn is_started(&self) -> bool {
        self.started
    }

    pub(crate) fn is_broken(&self) -> bool {
        self.broken
    }

    pub(crate) fn in_initial(&self) -> bool {
        self.initial.is_some()
    }

    fn fail(&mut self, guarantee: Guarantee, message: String) -> Option<Violation> {
        self.broken = true;
        Some(Violation { guarantee, message })
    }

    /// Checks one received event.
    pub(crate) fn event(
        &mut self,
        store: &Store,
        rv: Revision,
        slot: u32,
        event_type: EventType,
    ) -> Option<Violation> {
        if self.broken {
            return None;
        }
        self.events += 1;
        if rv < self.last_rv {
            return self.fail(
                Guarantee::Ordered,
                format!("event at {rv} after resource version {}", self.last_rv),
            );
        }
        if self.initial.is_some() {
            return self.fail(
                Guarantee::InitialState,
                format!("event at {rv} before the initial-events-end bookmark"),
            );
        }
        if !self.started {
            return self.fail(
                Guarantee::Reliable,
                format!("event at {rv} before the start was known"),
            );
        }
        self.last_rv = rv;
        let len = index_len(&self.sel, store);
        while self.cursor < len {
            let entry = entry_at(&self.sel, store, self.cursor);
            let Some(expected_type) = self.sel.event_type(entry) else {
                self.cursor += 1;
                continue;
            };
            if entry.rv == rv && entry.slot == slot {
                self.cursor += 1;
                if expected_type != event_type {
                    return self.fail(
                        Guarantee::Selection,
                        format!(
                            "event at {rv} on slot {slot} is {} but the selection implies {}",
                            event_type.as_str(),
                            expected_type.as_str()
                        ),
                    );
                }
                return None;
            }
            if entry.rv <= rv {
                return self.fail(
                    Guarantee::Reliable,
                    format!(
                        "missed the event at {} on slot {} before receiving {rv} on slot {slot}",
                        entry.rv, entry.slot
                    ),
                );
            }
            return self.fail(
                Guarantee::Unique,
                format!(
                    "received {rv} on slot {slot}, which is not the next selected event (that is {} on slot {}); duplicate or invented",
                    entry.rv, entry.slot
                ),
            );
        }
        self.fail(
            Guarantee::Unique,
            format!(
                "received {rv} on slot {slot} but no selected event is left: duplicate or invented"
            ),
        )
    }

    /// Checks one initial-state object.
    pub(crate) fn initial_object(&mut self, rv: Revision, slot: u32) -> Option<Violation> {
        if self.broken {
            return None;
        }
        match &mut self.initial {
            Some(objects) => {
                objects.push((slot, rv));
                None
            }
            None => self.fail(
                Guarantee::InitialState,
                format!("initial object (slot {slot}) outside the initial phase"),
            ),
        }
    }

    /// Checks one bookmark.
    pub(crate) fn bookmark(
        &mut self,
        store: &Store,
        rv: Revision,
        initial_events_end: bool,
    ) -> Option<Violation> {
        if self.broken {
            return None;
        }
        if rv < self.last_rv {
            return self.fail(
                Guarantee::Bookmarkable,
                format!("bookmark at {rv} after resource version {}", self.last_rv),
            );
        }
        if initial_events_end {
            let Some(mut objects) = self.initial.take() else {
                return self.fail(
                    Guarantee::InitialState,
                    format!("second initial-events-end at {rv}"),
                );
            };
            objects.sort_unstable();
            if objects.windows(2).any(|w| w[0].0 == w[1].0) {
                return self.fail(
                    Guarantee::Unique,
                    format!("an initial object was sent twice (end at {rv})"),
                );
            }
            for &(slot, object_rv) in &objects {
                match store.version_at(slot, rv) {
                    Some(a) if a.rv == object_rv && self.selects(store, slot, a) => {}
                    _ => {
                        return self.fail(
                            Guarantee::InitialState,
                            format!("initial object slot {slot} at {object_rv} is not the selected version at {rv}"),
                        );
                    }
                }
            }
            let expected = (0..store.slot_count() as u32)
                .filter(|&slot| {
                    store
                        .version_at(slot, rv)
                        .is_some_and(|a| self.selects(store, slot, a))
                })
                .count();
            if expected != objects.len() {
                return self.fail(
                    Guarantee::InitialState,
                    format!(
                        "initial state at {rv} had {} objects, the store had {expected} selected",
                        objects.len()
                    ),
                );
            }
            self.start_after(store, rv);
            self.last_rv = rv;
            return None;
        }
        if !self.started {
            // A bookmark before the start is known can only be a plain progress marker.
            self.last_rv = rv;
            return None;
        }
        // Every selected event at or below the bookmark must already have been received.
        let len = index_len(&self.sel, store);
        let mut i = self.cursor;
        while i < len {
            let entry = entry_at(&self.sel, store, i);
            if entry.rv > rv {
                break;
            }
            if self.sel.event_type(entry).is_some() {
                return self.fail(
                    Guarantee::Bookmarkable,
                    format!("bookmark at {rv} before the selected event at {}", entry.rv),
                );
            }
            i += 1;
        }
        self.cursor = i;
        self.last_rv = rv;
        None
    }

    fn selects(&self, store: &Store, slot: u32, attrs: &Attrs) -> bool {
        self.sel.matches(slot, store.slot_ns(slot), attrs)
    }

    /// Selected events not yet received, up to the end of the log.
    pub(crate) fn remaining(&self, store: &Store) -> usize {
        let len = index_len(&self.sel, store);
        (self.cursor..len)
            .filter(|&i| self.sel.event_type(entry_at(&self.sel, store, i)).is_some())
            .count()
    }

    /// Selected events committed in `[from_rv, to_rv]` (for the resync rate).
    pub(crate) fn selected_between(
        &self,
        store: &Store,
        from_rv: Revision,
        to_rv: Revision,
    ) -> usize {
        let len = index_len(&self.sel, store);
        (0..len)
            .rev()
            .map(|i| entry_at(&self.sel, store, i))
            .skip_while(|e| e.rv > to_rv)
            .take_while(|e| e.rv >= from_rv)
            .filter(|e| self.sel.event_type(e).is_some())
            .count()
    }
}

//! Copy-on-write ordered snapshots of the full state.
//!
//! The state is a persistent red-black tree (rpds) from key to object. Capturing a snapshot is
//! an `Arc` clone, O(1), so one is kept for every revision in the history window: LIST at an
//! exact revision, continue tokens and the initial state of a watch all read a snapshot without
//! copying anything and without holding a lock while they iterate.

use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::Arc;

use rpds::RedBlackTreeMapSync;

use crate::object::{Object, Revision};

/// The ordered state: key to object.
pub type StateMap = RedBlackTreeMapSync<Arc<str>, Arc<Object>>;

/// The full state at one revision. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Snapshot {
    revision: Revision,
    map: StateMap,
}

impl Snapshot {
    pub(crate) fn new(revision: Revision, map: StateMap) -> Snapshot {
        Snapshot { revision, map }
    }

    pub(crate) fn map_clone(&self) -> StateMap {
        self.map.clone()
    }

    /// The revision this state is at.
    #[must_use]
    pub fn revision(&self) -> Revision {
        self.revision
    }

    /// How many objects.
    #[must_use]
    pub fn len(&self) -> usize {
        self.map.size()
    }

    /// Whether there are no objects.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The object under `key`.
    #[must_use]
    pub fn get(&self, key: &str) -> Option<&Arc<Object>> {
        self.map.get(key)
    }

    /// Objects in key order whose key starts with `prefix` (all when `None`), strictly after
    /// `after` if given.
    pub fn range<'a>(
        &'a self,
        prefix: Option<&'a str>,
        after: Option<&'a str>,
    ) -> impl Iterator<Item = &'a Arc<Object>> + 'a {
        let start: Bound<&str> = match (after, prefix) {
            (Some(after), Some(prefix)) if after < prefix => Bound::Included(prefix),
            (Some(after), _) => Bound::Excluded(after),
            (None, Some(prefix)) => Bound::Included(prefix),
            (None, None) => Bound::Unbounded,
        };
        self.map
            .range::<str, _>((start, Bound::Unbounded))
            .take_while(move |(key, _)| prefix.is_none_or(|p| key.starts_with(p)))
            .map(|(_, object)| object)
    }
}

/// One snapshot per revision in the history window.
#[derive(Debug, Default)]
pub(crate) struct Snapshots {
    ring: VecDeque<Snapshot>,
}

impl Snapshots {
    pub(crate) fn clear(&mut self) {
        self.ring.clear();
    }

    pub(crate) fn push(&mut self, snapshot: Snapshot) {
        debug_assert!(
            self.ring
                .back()
                .is_none_or(|s| s.revision < snapshot.revision)
        );
        self.ring.push_back(snapshot);
    }

    /// Drops snapshots no longer needed to serve revisions `>= floor`: keeps the newest one at
    /// or below `floor`.
    pub(crate) fn trim(&mut self, floor: Revision) {
        while self.ring.len() > 1 && self.ring[1].revision <= floor {
            self.ring.pop_front();
        }
    }

    /// The state at `revision`: the newest snapshot at or below it.
    pub(crate) fn at(&self, revision: Revision) -> Option<&Snapshot> {
        let index = self.ring.partition_point(|s| s.revision <= revision);
        index.checked_sub(1).map(|i| &self.ring[i])
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.ring.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn object(namespace: &str, name: &str) -> Arc<Object> {
        Arc::new(Object::new(
            namespace,
            name,
            BTreeMap::new(),
            BTreeMap::new(),
            1,
            serde_json::json!({"metadata": {}}),
        ))
    }

    #[test]
    fn ranges_by_prefix_and_continue_key() {
        let mut map = StateMap::new_sync();
        for (ns, name) in [("a", "x"), ("b", "x"), ("b", "y"), ("c", "x")] {
            let o = object(ns, name);
            map.insert_mut(o.key().clone(), o);
        }
        let snapshot = Snapshot::new(1, map);
        let keys = |it: &mut dyn Iterator<Item = &Arc<Object>>| {
            it.map(|o| o.key().to_string()).collect::<Vec<_>>()
        };
        assert_eq!(keys(&mut snapshot.range(Some("b/"), None)), ["b/x", "b/y"]);
        assert_eq!(keys(&mut snapshot.range(Some("b/"), Some("b/x"))), ["b/y"]);
        assert_eq!(keys(&mut snapshot.range(None, Some("b/y"))), ["c/x"]);
        assert_eq!(
            keys(&mut snapshot.range(Some("b/"), Some("a/z"))),
            ["b/x", "b/y"]
        );
    }

    #[test]
    fn keeps_the_snapshot_at_the_floor() {
        let mut snapshots = Snapshots::default();
        for revision in [5, 7, 9] {
            snapshots.push(Snapshot::new(revision, StateMap::new_sync()));
        }
        assert_eq!(snapshots.at(8).unwrap().revision(), 7);
        assert!(snapshots.at(4).is_none());
        snapshots.trim(8);
        assert_eq!(snapshots.len(), 2);
        assert_eq!(snapshots.at(8).unwrap().revision(), 7);
    }
}

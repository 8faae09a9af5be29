//! The cap on `Update` managers of one object, as kube-apiserver's `capManagersManager`
//! keeps it (its default `DefaultMaxUpdateManagers` of 10).
//!
//! ## Guarantees
//! - After every create, update or patch ([`super::update`]) an object has at most
//!   [`MAX_UPDATE_MANAGERS`] `Update` entries; `Apply` entries are neither counted nor merged
//!   (an apply is never capped, as in kube-apiserver).
//! - Beyond the cap, the oldest `Update` entries (by `time`, an entry without one oldest;
//!   ties by manager) are merged, per API version, into one `Update` entry named
//!   [`ANCIENT_CHANGES`] for that version: the oldest entry of a version moves into the
//!   bucket when a second one joins it, every later one is added to it, each merge removes
//!   one entry, and the bucket takes the time of the last entry merged into it. Merging stops
//!   as soon as the count is at the cap, so the newest managers keep their own entries.
//! - No owned path is lost: the union of all field sets is the same before and after.
//!
//! Where kube-apiserver would merge an existing bucket into itself (and so drop it, when the
//! bucket is older than another entry of its version), the bucket is kept here.

use std::collections::BTreeMap;

use super::{Entry, ManagerId, Managers, Operation};

/// kube-apiserver's `DefaultMaxUpdateManagers`.
pub const MAX_UPDATE_MANAGERS: usize = 10;

/// The manager name of the bucket the oldest `Update` entries are merged into.
pub const ANCIENT_CHANGES: &str = "ancient-changes";

/// Merges the oldest `Update` entries of `managers` until at most `max` remain (see the
/// module docs).
pub fn cap_update_managers(managers: &mut Managers, max: usize) {
    // Every write calls this; almost every object is under the cap: counted before anything
    // is copied.
    let count = managers
        .keys()
        .filter(|id| id.operation == Operation::Update)
        .count();
    if count <= max {
        return;
    }
    let mut updaters: Vec<(Option<String>, ManagerId)> = managers
        .iter()
        .filter(|(id, _)| id.operation == Operation::Update)
        .map(|(id, entry)| (entry.time.clone(), id.clone()))
        .collect();
    // Oldest first: no time sorts before any time; RFC 3339 times in UTC sort as text.
    updaters.sort();
    let mut length = updaters.len();
    let mut first_of_version: BTreeMap<String, ManagerId> = BTreeMap::new();
    for (_, id) in updaters {
        if length <= max {
            break;
        }
        let Some(entry) = managers.get(&id) else {
            continue;
        };
        let version = entry.api_version.clone();
        let bucket = ManagerId {
            manager: ANCIENT_CHANGES.to_owned(),
            operation: Operation::Update,
            api_version: version.clone(),
            subresource: String::new(),
        };
        let Some(first) = first_of_version.get(&version).cloned() else {
            first_of_version.insert(version, id);
            continue;
        };
        // The entry merged into the bucket: this one, or (when this one is the bucket
        // itself) the first of its version.
        let merged_id = if id == bucket { first } else { id };
        if !managers.contains_key(&bucket)
            && let Some(first_entry) = managers.remove(&first_of_version[&version])
        {
            managers.insert(bucket.clone(), first_entry);
        }
        let Some(merged) = managers.remove(&merged_id) else {
            continue;
        };
        let target = managers.entry(bucket).or_insert_with(|| Entry {
            api_version: version,
            time: None,
            set: super::fieldpath::Set::new(),
        });
        // In place: a copy of the growing bucket per merge made many merges quadratic
        // (16,000 managers took minutes).
        target.set.add_all(&merged.set);
        target.time = merged.time.or_else(|| target.time.take());
        length -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::super::fieldpath::{PathElement, Set};
    use super::*;

    fn id(manager: &str, operation: Operation, version: &str) -> ManagerId {
        ManagerId {
            manager: manager.to_owned(),
            operation,
            api_version: if operation == Operation::Apply {
                String::new()
            } else {
                version.to_owned()
            },
            subresource: String::new(),
        }
    }

    fn entry(version: &str, minute: Option<u32>, key: &str) -> Entry {
        let mut set = Set::new();
        set.insert(&[
            PathElement::Field("data".to_owned()),
            PathElement::Field(key.to_owned()),
        ]);
        Entry {
            api_version: version.to_owned(),
            time: minute.map(|m| format!("2026-01-01T00:{m:02}:00Z")),
            set,
        }
    }

    fn union(managers: &Managers) -> Set {
        managers
            .values()
            .fold(Set::new(), |all, entry| all.union(&entry.set))
    }

    #[test]
    fn at_most_ten_updaters_the_oldest_merged_into_ancient_changes() {
        let mut managers = Managers::new();
        for i in 0..12 {
            managers.insert(
                id(&format!("m{i:02}"), Operation::Update, "v1"),
                entry("v1", Some(i), &format!("k{i}")),
            );
        }
        managers.insert(
            id("applier", Operation::Apply, ""),
            entry("v1", Some(0), "applied"),
        );
        let before = union(&managers);
        cap_update_managers(&mut managers, MAX_UPDATE_MANAGERS);
        let updaters: Vec<&str> = managers
            .keys()
            .filter(|id| id.operation == Operation::Update)
            .map(|id| id.manager.as_str())
            .collect();
        assert_eq!(updaters.len(), MAX_UPDATE_MANAGERS);
        assert!(updaters.contains(&ANCIENT_CHANGES));
        for old in ["m00", "m01", "m02"] {
            assert!(!updaters.contains(&old), "{old} merged");
        }
        for kept in 3..12 {
            assert!(updaters.contains(&format!("m{kept:02}").as_str()));
        }
        let bucket = &managers[&id(ANCIENT_CHANGES, Operation::Update, "v1")];
        assert_eq!(bucket.set.paths().len(), 3, "k0, k1 and k2");
        assert_eq!(bucket.time.as_deref(), Some("2026-01-01T00:02:00Z"));
        assert!(managers.contains_key(&id("applier", Operation::Apply, "")));
        assert_eq!(union(&managers), before, "no owned path is lost");
    }

    #[test]
    fn at_the_cap_nothing_changes_and_appliers_do_not_count() {
        let mut managers = Managers::new();
        for i in 0..10 {
            managers.insert(
                id(&format!("u{i}"), Operation::Update, "v1"),
                entry("v1", Some(i), "x"),
            );
            managers.insert(
                id(&format!("a{i}"), Operation::Apply, ""),
                entry("v1", Some(i), "y"),
            );
        }
        let before = managers.clone();
        cap_update_managers(&mut managers, MAX_UPDATE_MANAGERS);
        assert_eq!(managers, before);
    }

    #[test]
    fn buckets_are_per_version_and_untimed_entries_are_oldest() {
        let mut managers = Managers::new();
        // Two old entries per version, then nine recent ones: 13 updaters, 3 merges.
        managers.insert(id("old-a", Operation::Update, "v1"), entry("v1", None, "a"));
        managers.insert(
            id("old-b", Operation::Update, "v2"),
            entry("v2", Some(1), "b"),
        );
        managers.insert(
            id("old-c", Operation::Update, "v1"),
            entry("v1", Some(2), "c"),
        );
        managers.insert(
            id("old-d", Operation::Update, "v2"),
            entry("v2", Some(3), "d"),
        );
        for i in 0..9 {
            managers.insert(
                id(&format!("new{i}"), Operation::Update, "v1"),
                entry("v1", Some(10 + i), &format!("n{i}")),
            );
        }
        cap_update_managers(&mut managers, MAX_UPDATE_MANAGERS);
        let v1 = &managers[&id(ANCIENT_CHANGES, Operation::Update, "v1")];
        let v2 = &managers[&id(ANCIENT_CHANGES, Operation::Update, "v2")];
        // 13 updaters: c joins a in the v1 bucket, d joins b in the v2 one, then new0 (the
        // oldest left) joins the v1 bucket: 10 remain.
        assert_eq!(v1.set.paths().len(), 3, "a, c and n0");
        assert_eq!(v2.set.paths().len(), 2, "b and d");
        assert_eq!(v2.api_version, "v2");
        assert_eq!(v1.time.as_deref(), Some("2026-01-01T00:10:00Z"));
        assert!(!managers.contains_key(&id("new0", Operation::Update, "v1")));
        assert!(managers.contains_key(&id("new1", Operation::Update, "v1")));
        assert_eq!(
            managers
                .keys()
                .filter(|i| i.operation == Operation::Update)
                .count(),
            MAX_UPDATE_MANAGERS
        );
    }

    #[test]
    fn an_existing_bucket_keeps_growing() {
        let mut managers = Managers::new();
        managers.insert(
            id(ANCIENT_CHANGES, Operation::Update, "v1"),
            entry("v1", Some(0), "old"),
        );
        for i in 1..12 {
            managers.insert(
                id(&format!("m{i:02}"), Operation::Update, "v1"),
                entry("v1", Some(i), &format!("k{i}")),
            );
        }
        let before = union(&managers);
        cap_update_managers(&mut managers, MAX_UPDATE_MANAGERS);
        let bucket = &managers[&id(ANCIENT_CHANGES, Operation::Update, "v1")];
        assert_eq!(bucket.set.paths().len(), 3, "old, k1, k2");
        assert_eq!(managers.len(), MAX_UPDATE_MANAGERS);
        assert_eq!(union(&managers), before);
    }
}

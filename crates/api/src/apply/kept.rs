//! A write's `metadata.managedFields` kept as the entries it starts from, when the write
//! changes no manager's field set: most updates and patches change fields their writer
//! already owns, and then only the writer's `time` can change.
//!
//! ## Guarantees
//! - [`unchanged`] answers only when [`super::update`] followed by
//!   [`super::set_managed_fields`] would write the very same entries, in the same order, but
//!   for the writer's `time`; [`Kept::apply`] makes that change. The answer is then exactly
//!   the full path's (same entries, same keys and text, same order). Otherwise it answers
//!   `None` and the caller parses the entries and updates them as before.
//! - It answers when: the entries are as [`super::set_managed_fields`] writes them (each an
//!   object of `manager` (when present not empty), `operation` (`Apply` or `Update`),
//!   `apiVersion` (when present not empty), `time` (when present a string), `fieldsType:
//!   FieldsV1`, a non-empty `fieldsV1` whose every key encodes its own element back and whose
//!   `.` marks only nodes with something below, and `subresource` (when present not empty):
//!   an empty `manager` or `apiVersion` is left out, as Go's struct encodes it), with no two entries of
//!   one manager, sorted as it sorts them; at most [`super::cap::MAX_UPDATE_MANAGERS`] `Update` entries (the cap
//!   does nothing); the writer has an `Update` entry of the kind's API version; no other
//!   entry owns a path the write added, modified or removed; and the writer's set already
//!   holds every path the write added or modified (but those no manager owns) and none it
//!   removed or no manager may own.
//!
//! ## Bounds
//! One walk of the entries' `fieldsV1` keys; the check for two entries of one manager is
//! quadratic in the entries' count, so lists of more than [`MAX_ENTRIES`] entries take the
//! full path.
//!
//! ## Differences from kube
//! kube-apiserver's field manager always decodes `managedFields` into sets and encodes them
//! again (`k8s.io/apimachinery/pkg/util/managedfields/internal/managedfields.go`:
//! `DecodeManagedFields`, `EncodeObjectManagedFields`); keeping the entries gives the same
//! objects without the two conversions.

use std::cmp::Ordering;

use serde_json::{Map, Value};

use super::cap::MAX_UPDATE_MANAGERS;
use super::fieldpath::{PathElement, Set};
use super::typed::Comparison;
use super::{Operation, Writer};

/// The most entries [`unchanged`] looks at (beyond: the full path).
pub const MAX_ENTRIES: usize = 16;

/// What keeping the entries changes: the writer's entry (its index) and whether its time
/// becomes the write's (the write changed something).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Kept {
    writer: usize,
    touched: bool,
}

impl Kept {
    /// The entries after the write at `time` (see the module docs).
    pub fn apply(self, entries: &mut [Value], time: &str) {
        if !self.touched {
            return;
        }
        if let Some(entry) = entries[self.writer].as_object_mut() {
            match entry.get_mut("time") {
                // The old time's string reused (its buffer fits a time of the same layout).
                Some(Value::String(old)) => {
                    old.clear();
                    old.push_str(time);
                }
                _ => {
                    entry.insert("time".to_owned(), Value::String(time.to_owned()));
                }
            }
        }
        // Only the writer's time moved: its entry may have to move (as the full path sorts
        // them, by operation, time, manager, API version and subresource).
        entries.sort_by(|a, b| match (view(a), view(b)) {
            (Some(a), Some(b)) => a.order(&b),
            _ => Ordering::Equal,
        });
    }
}

/// Whether `entries` can be kept for a write of `api_version` by `writer` that compared as
/// `comparison` (see the module docs).
#[must_use]
pub fn unchanged(
    entries: &[Value],
    api_version: &str,
    comparison: &Comparison,
    writer: Writer<'_>,
) -> Option<Kept> {
    let stripped = super::stripped();
    if entries.is_empty() || entries.len() > MAX_ENTRIES {
        return None;
    }
    let mut views = Vec::with_capacity(entries.len());
    for entry in entries {
        views.push(view(entry)?);
    }
    if views
        .windows(2)
        .any(|pair| pair[0].order(&pair[1]) != Ordering::Less)
    {
        return None;
    }
    for (index, one) in views.iter().enumerate() {
        if views[index + 1..]
            .iter()
            .any(|other| one.same_manager(other))
        {
            return None;
        }
    }
    let updaters = views
        .iter()
        .filter(|view| view.operation == Operation::Update)
        .count();
    if updaters > MAX_UPDATE_MANAGERS {
        return None;
    }
    let writer_index = views.iter().position(|view| {
        view.operation == Operation::Update
            && view.manager == writer.manager
            && view.api_version == api_version
            && view.subresource == writer.subresource
    })?;
    let Comparison {
        added,
        removed,
        modified,
    } = comparison;
    let mut key = String::new();
    for (index, view) in views.iter().enumerate() {
        let fields = view.fields;
        if index == writer_index {
            if intersects(fields, removed, &mut key)
                || owns_any(fields, stripped_keys())
                || !covers(fields, modified, Some(stripped), &mut key)
                || !covers(fields, added, Some(stripped), &mut key)
            {
                return None;
            }
        } else if intersects(fields, modified, &mut key)
            || intersects(fields, added, &mut key)
            || intersects(fields, removed, &mut key)
        {
            return None;
        }
    }
    Some(Kept {
        writer: writer_index,
        touched: !(modified.is_empty() && added.is_empty() && removed.is_empty()),
    })
}

/// An entry's fields, when it is as `set_managed_fields` writes one.
struct View<'a> {
    manager: &'a str,
    operation: Operation,
    api_version: &'a str,
    time: Option<&'a str>,
    subresource: &'a str,
    fields: &'a Map<String, Value>,
}

impl View<'_> {
    /// `set_managed_fields`' order.
    fn order(&self, other: &View<'_>) -> Ordering {
        self.operation
            .cmp(&other.operation)
            .then_with(|| self.time.cmp(&other.time))
            .then_with(|| self.manager.cmp(other.manager))
            .then_with(|| self.api_version.cmp(other.api_version))
            .then_with(|| self.subresource.cmp(other.subresource))
    }

    /// Whether the two are one manager's (one `ManagerId`: an applier's is the same whatever
    /// its API version).
    fn same_manager(&self, other: &View<'_>) -> bool {
        self.manager == other.manager
            && self.operation == other.operation
            && self.subresource == other.subresource
            && (self.operation == Operation::Apply || self.api_version == other.api_version)
    }
}

fn view(entry: &Value) -> Option<View<'_>> {
    let Value::Object(map) = entry else {
        return None;
    };
    // One pass over the entry's keys (each key once: it is a map).
    let (mut manager, mut operation, mut api_version, mut time) = (None, None, None, None);
    let (mut fields_type, mut fields, mut subresource) = (false, None, "");
    for (key, value) in map {
        match key.as_str() {
            // An empty one is left out (`omitempty`), never written.
            "manager" => manager = Some(value.as_str().filter(|text| !text.is_empty())?),
            "operation" => {
                operation = Some(match value.as_str()? {
                    "Apply" => Operation::Apply,
                    "Update" => Operation::Update,
                    _ => return None,
                });
            }
            "apiVersion" => {
                api_version = Some(value.as_str().filter(|text| !text.is_empty())?);
            }
            "time" => time = Some(value.as_str()?),
            "fieldsType" => fields_type = value.as_str()? == "FieldsV1",
            "fieldsV1" => fields = Some(value.as_object()?),
            "subresource" => {
                subresource = value.as_str()?;
                if subresource.is_empty() {
                    return None;
                }
            }
            _ => return None,
        }
    }
    // An empty manager or API version is left out, as Go's struct encodes it.
    let fields = fields?;
    if !fields_type || fields.is_empty() || fields.contains_key(".") || !canonical(fields) {
        return None;
    }
    Some(View {
        manager: manager.unwrap_or_default(),
        operation: operation?,
        api_version: api_version.unwrap_or_default(),
        time,
        subresource,
        fields,
    })
}

/// Whether a `FieldsV1` node encodes again to itself (see the module docs).
fn canonical(node: &Map<String, Value>) -> bool {
    node.iter().all(|(key, child)| {
        let Value::Object(child) = child else {
            return false;
        };
        if key == "." {
            return child.is_empty();
        }
        PathElement::is_canonical_key(key)
            && (child.is_empty()
                || (!(child.len() == 1 && child.contains_key(".")) && canonical(child)))
    })
}

/// The node below `element` in a canonical `FieldsV1` node.
fn below<'a>(
    node: &'a Map<String, Value>,
    element: &PathElement,
    key: &mut String,
) -> Option<&'a Map<String, Value>> {
    element.encode_into(key);
    node.get(key.as_str()).and_then(Value::as_object)
}

/// Whether a node below an element makes the element a member.
fn is_member(node: &Map<String, Value>) -> bool {
    node.is_empty() || node.contains_key(".")
}

/// Whether the canonical `FieldsV1` node and `set` share a path.
fn intersects(node: &Map<String, Value>, set: &Set, key: &mut String) -> bool {
    set.members()
        .any(|member| below(node, member, key).is_some_and(is_member))
        || set.children().any(|(element, child)| {
            below(node, element, key).is_some_and(|node| intersects(node, child, key))
        })
}

/// A set's elements as `FieldsV1` keys, so that many nodes are looked up without encoding
/// them again.
struct Keys {
    members: Vec<String>,
    children: Vec<(String, Keys)>,
}

impl Keys {
    fn of(set: &Set) -> Keys {
        let key = |element: &PathElement| {
            let mut key = String::new();
            element.encode_into(&mut key);
            key
        };
        Keys {
            members: set.members().map(key).collect(),
            children: set
                .children()
                .map(|(element, child)| (key(element), Keys::of(child)))
                .collect(),
        }
    }
}

/// The paths no manager may own, as keys.
fn stripped_keys() -> &'static Keys {
    static KEYS: std::sync::LazyLock<Keys> =
        std::sync::LazyLock::new(|| Keys::of(super::stripped()));
    &KEYS
}

/// Whether the canonical `FieldsV1` node and the set of `keys` share a path.
fn owns_any(node: &Map<String, Value>, keys: &Keys) -> bool {
    let at = |key: &String| node.get(key).and_then(Value::as_object);
    keys.members
        .iter()
        .any(|key| at(key).is_some_and(is_member))
        || keys
            .children
            .iter()
            .any(|(key, keys)| at(key).is_some_and(|node| owns_any(node, keys)))
}

/// Whether the canonical `FieldsV1` node holds every path of `set` but those of `except`.
fn covers(node: &Map<String, Value>, set: &Set, except: Option<&Set>, key: &mut String) -> bool {
    static EMPTY: std::sync::LazyLock<Map<String, Value>> = std::sync::LazyLock::new(Map::new);
    set.members().all(|member| {
        except.is_some_and(|except| except.has_member(member))
            || below(node, member, key).is_some_and(is_member)
    }) && set.children().all(|(element, child)| {
        let node = below(node, element, key).unwrap_or(&EMPTY);
        covers(
            node,
            child,
            except.and_then(|except| except.child(element)),
            key,
        )
    })
}

#[cfg(test)]
mod tests {
    use super::super::{
        Entry, ManagerId, Managers, managers_of_entries, set_managed_fields, updated,
    };
    use super::*;
    use crate::resources::{ResourceDef, builtin_resources};
    use proptest::prelude::*;
    use serde_json::json;

    const NOW: &str = "2026-01-01T00:00:05Z";
    const TIMES: [Option<&str>; 4] = [
        None,
        Some("2026-01-01T00:00:01Z"),
        Some("2026-01-01T00:00:07Z"),
        Some("2026-01-01T00:00:05Z"),
    ];

    fn config_map() -> ResourceDef {
        builtin_resources()
            .into_iter()
            .find(|d| d.kind == "ConfigMap")
            .unwrap()
    }

    fn writer<'a>(manager: &'a str, subresource: &'static str) -> Writer<'a> {
        Writer {
            manager,
            subresource,
            schema: None,
        }
    }

    /// The entries `set_managed_fields` writes for `managers`.
    fn written(managers: &Managers) -> Vec<Value> {
        let mut object = json!({"metadata": {}});
        set_managed_fields(&mut object, managers);
        match object["metadata"].get("managedFields") {
            Some(Value::Array(entries)) => entries.clone(),
            _ => Vec::new(),
        }
    }

    /// What the full path writes: the entries parsed, updated and encoded again.
    fn full_path(entries: &[Value], comparison: &Comparison, writer: Writer<'_>) -> Value {
        let managers = updated(
            &config_map(),
            managers_of_entries(entries),
            comparison.clone(),
            writer,
            NOW,
        );
        let mut object = json!({"metadata": {}});
        set_managed_fields(&mut object, &managers);
        object["metadata"]
            .get("managedFields")
            .cloned()
            .unwrap_or(Value::Null)
    }

    /// The kept entries, when [`unchanged`] answers.
    fn kept(entries: &[Value], comparison: &Comparison, writer: Writer<'_>) -> Option<Value> {
        let kept = unchanged(entries, "v1", comparison, writer)?;
        let mut entries = entries.to_vec();
        kept.apply(&mut entries, NOW);
        Some(Value::Array(entries))
    }

    fn path(text: &str) -> Vec<PathElement> {
        text.split('.')
            .map(|name| PathElement::Field(name.to_owned()))
            .collect()
    }

    fn set(paths: &[&str]) -> Set {
        let mut set = Set::new();
        for text in paths {
            set.insert(&path(text));
        }
        set
    }

    fn comparison(added: &[&str], removed: &[&str], modified: &[&str]) -> Comparison {
        Comparison {
            added: set(added),
            removed: set(removed),
            modified: set(modified),
        }
    }

    fn update_entry(manager: &str, time: Option<&str>, paths: &[&str]) -> (ManagerId, Entry) {
        (
            ManagerId {
                manager: manager.to_owned(),
                operation: Operation::Update,
                api_version: "v1".to_owned(),
                subresource: String::new(),
            },
            Entry {
                api_version: "v1".to_owned(),
                time: time.map(str::to_owned),
                set: set(paths),
            },
        )
    }

    /// The bench's write: a manager patching a field it owns keeps every entry, and its
    /// entry moves to its place by its new time.
    #[test]
    fn a_write_of_its_own_fields_keeps_the_entries() {
        let managers: Managers = [
            update_entry(
                "alice",
                Some("2026-01-01T00:00:01Z"),
                &["data", "data.sent", "data.payload"],
            ),
            update_entry(
                "bob",
                Some("2026-01-01T00:00:03Z"),
                &["metadata.labels.app"],
            ),
        ]
        .into_iter()
        .collect();
        let entries = written(&managers);
        assert_eq!(entries[0]["manager"], "alice");
        let sent = comparison(&[], &[], &["data.sent"]);
        let kept_entries = kept(&entries, &sent, writer("alice", "")).expect("kept");
        assert_eq!(
            kept_entries,
            full_path(&entries, &sent, writer("alice", ""))
        );
        assert_eq!(kept_entries[1]["manager"], "alice");
        assert_eq!(kept_entries[1]["time"], NOW);
        // Nothing changed: not even the time.
        let nothing = comparison(&[], &[], &[]);
        assert_eq!(
            kept(&entries, &nothing, writer("alice", "")),
            Some(Value::Array(entries.clone()))
        );
        // A changed path no manager may own is nobody's: kept too.
        let generation = comparison(&[], &[], &["data.sent", "metadata.generation"]);
        assert_eq!(
            kept(&entries, &generation, writer("alice", "")),
            Some(full_path(&entries, &generation, writer("alice", "")))
        );
        // What changes a set takes the full path: another's field, a field the writer does
        // not own, a removal of its own, a new writer, another subresource.
        for (comparison, writer) in [
            (
                comparison(&[], &[], &["metadata.labels.app"]),
                writer("alice", ""),
            ),
            (comparison(&["data.new"], &[], &[]), writer("alice", "")),
            (comparison(&[], &["data.payload"], &[]), writer("alice", "")),
            (comparison(&[], &[], &["data.sent"]), writer("carol", "")),
            (
                comparison(&[], &[], &["data.sent"]),
                writer("alice", "status"),
            ),
        ] {
            assert_eq!(kept(&entries, &comparison, writer), None);
            assert_ne!(
                full_path(&entries, &comparison, writer),
                Value::Array(entries.clone())
            );
        }
    }

    /// Entries [`super::super::set_managed_fields`] would not write as they are take the
    /// full path (keeping them would answer other entries than it writes).
    #[test]
    fn entries_not_as_written_take_the_full_path() {
        let base = json!({"manager": "alice", "operation": "Update", "apiVersion": "v1", "time": "2026-01-01T00:00:01Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {".": {}, "f:sent": {}}}});
        let with = |key: &str, value: Value| {
            let mut entry = base.clone();
            entry[key] = value;
            vec![entry]
        };
        let other = json!({"manager": "bob", "operation": "Update", "apiVersion": "v1", "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:b": {}}}});
        let cases = vec![
            with("fieldsV1", json!({"f:data": {".": {}}, "f:x": {}})),
            with(
                "fieldsV1",
                json!({"f:data": {"f:sent": {}, ".": {"x": {}}}}),
            ),
            with("fieldsV1", json!({".": {}, "f:data": {"f:sent": {}}})),
            with("fieldsV1", json!({})),
            with(
                "fieldsV1",
                json!({"f:data": {"f:sent": {}}, "k:{\"b\":1,\"a\":2}": {}}),
            ),
            with("fieldsV1", json!({"f:data": {"f:sent": {}}, "i:+1": {}})),
            with("fieldsV1", json!({"f:data": {"f:sent": {}}, "v:[ 1]": {}})),
            with("fieldsV1", json!({"f:data": {"f:sent": 1}})),
            with("fieldsType", json!("FieldsV2")),
            with("time", Value::Null),
            with("subresource", json!("")),
            with("manager", json!(7)),
            with("extra", json!("x")),
            with("manager", json!("")),
            with("apiVersion", json!("")),
            vec![base.clone(), base.clone()],
            vec![base.clone(), other.clone()],
            vec![json!("not an entry"), base.clone()],
        ];
        let sent = comparison(&[], &[], &["data.sent"]);
        for entries in cases {
            assert_eq!(
                kept(&entries, &sent, writer("alice", "")),
                None,
                "{entries:?}"
            );
        }
        // As written, the two are kept (in their order).
        let sorted = vec![other.clone(), base.clone()];
        assert!(kept(&sorted, &sent, writer("alice", "")).is_some());
        // An empty manager or API version is left out, as Go's struct encodes it, and stays so.
        let mut empty_manager = base.clone();
        empty_manager["manager"] = json!("");
        let mut empty_version = other.clone();
        empty_version["apiVersion"] = json!("");
        for (entries, who) in [
            (vec![other.clone(), empty_manager], ""),
            (vec![empty_version, base.clone()], "alice"),
        ] {
            let full = full_path(&entries, &sent, writer(who, ""));
            let mut left_out = entries.clone();
            for entry in &mut left_out {
                entry
                    .as_object_mut()
                    .unwrap()
                    .retain(|_, value| value != "");
            }
            assert_ne!(left_out, entries);
            assert_eq!(kept(&left_out, &sent, writer(who, "")), Some(full));
        }
        // More `Update` managers than the cap: the full path merges the oldest.
        let many: Managers = (0..=MAX_UPDATE_MANAGERS)
            .map(|i| update_entry(&format!("m{i:02}"), None, &[&format!("data.k{i}")]))
            .collect();
        let entries = written(&many);
        let own = comparison(&[], &[], &["data.k3"]);
        assert_eq!(kept(&entries, &own, writer("m03", "")), None);
        assert_ne!(
            full_path(&entries, &own, writer("m03", "")),
            Value::Array(entries)
        );
    }

    fn element() -> impl Strategy<Value = PathElement> {
        prop_oneof![
            (0..3u8).prop_map(|i| PathElement::Field(format!("f{i}"))),
            Just(PathElement::Field("metadata".to_owned())),
            Just(PathElement::Field("generation".to_owned())),
            (0..2u8).prop_map(|i| PathElement::Key(format!("{{\"name\":\"{i}\"}}"))),
            (0..2u8).prop_map(|i| PathElement::Value(format!("\"v{i}\""))),
        ]
    }

    fn any_set(paths: usize) -> impl Strategy<Value = Set> {
        proptest::collection::vec(proptest::collection::vec(element(), 1..4), 0..paths).prop_map(
            |paths| {
                let mut set = Set::new();
                for path in paths {
                    set.insert(&path);
                }
                set
            },
        )
    }

    /// Managers from a small pool of ids (two names, one empty, both operations, two versions, with and
    /// without a subresource) and times, so that writers and times meet.
    fn any_managers() -> impl Strategy<Value = Managers> {
        proptest::collection::vec((0..16usize, 0..4usize, any_set(6)), 0..5).prop_map(|entries| {
            entries
                .into_iter()
                .map(|(id, time, set)| {
                    let operation = if id & 2 == 0 {
                        Operation::Update
                    } else {
                        Operation::Apply
                    };
                    let version = if id & 4 == 0 { "v1" } else { "v2" };
                    (
                        ManagerId {
                            manager: ["alice", ""][id & 1].to_owned(),
                            operation,
                            api_version: if operation == Operation::Apply {
                                String::new()
                            } else {
                                version.to_owned()
                            },
                            subresource: if id & 8 == 0 { "" } else { "status" }.to_owned(),
                        },
                        Entry {
                            api_version: version.to_owned(),
                            time: TIMES[time].map(str::to_owned),
                            set,
                        },
                    )
                })
                .collect()
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1024))]

        /// Whenever the entries are kept, they are what the full path writes. The writer
        /// has an entry (of a random set) and the write's paths are mostly its own, so that
        /// many cases keep the entries.
        #[test]
        fn kept_entries_are_what_the_full_path_writes(
            mut managers in any_managers(),
            (own, own_time) in (any_set(6), 0..4usize),
            (added, removed, modified) in (any_set(2), any_set(2), any_set(2)),
            picks in proptest::collection::vec(0..5u8, 12),
            who in 0..4usize,
            (reversed, left_out) in (any::<bool>(), any::<bool>()),
        ) {
            let subresource = if who & 2 == 0 { "" } else { "status" };
            let writer = writer(["alice", ""][who & 1], subresource);
            let (mut id, mut entry) = update_entry(writer.manager, TIMES[own_time], &[]);
            id.subresource = subresource.to_owned();
            entry.set = own.clone();
            managers.insert(id, entry);
            // Each of the write's sets: some of the writer's paths, and at times others.
            let mut sets = [Set::new(), Set::new(), Set::new()];
            for (path, pick) in own.paths().iter().zip(&picks) {
                if let Some(set) = sets.get_mut(usize::from(*pick)) {
                    set.insert(path);
                }
            }
            for (set, (extra, pick)) in sets.iter_mut().zip([(added, picks[9]), (removed, picks[10]), (modified, picks[11])]) {
                if pick == 0 {
                    set.add_all(&extra);
                }
            }
            let [added, removed, modified] = sets;
            let mut entries = written(&managers);
            if reversed {
                entries.reverse();
            }
            if left_out {
                // As Go's struct encodes them: an empty manager left out.
                for entry in &mut entries {
                    entry.as_object_mut().unwrap().retain(|_, value| value != "");
                }
            }
            let comparison = Comparison { added, removed, modified };
            if let Some(kept) = kept(&entries, &comparison, writer) {
                prop_assert_eq!(kept, full_path(&entries, &comparison, writer));
            }
        }
    }
}

//! Field paths and sets of them, as structured-merge-diff names object fields, and their
//! `FieldsV1` encoding in `metadata.managedFields`.
//!
//! ## Guarantees
//! - A [`Set`] is a trie: `members` are the paths that end at this node, `children` the
//!   non-empty subsets below an element. Union, intersection and difference are path-wise (a
//!   member removed keeps its children), as structured-merge-diff's.
//! - [`Set::to_fields_v1`] and [`Set::from_fields_v1`] round-trip: an element is `f:<field>`,
//!   `k:<key object as compact JSON, keys sorted>`, `v:<value as compact JSON>` or `i:<index>`;
//!   a member is `{}`, a node with children has its members' elements as nested objects and,
//!   when it is itself a member, `".": {}`.
//! - Paths print as structured-merge-diff prints them in conflict messages: `.spec.replicas`,
//!   `.spec.containers[name="web"].image`, `.metadata.finalizers[="x"]`, `[0]`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use watchkeeper_core::stack::grow;

use serde_json::{Map, Value};

/// One step of a path. The derived order (fields, then keys, then values, then indices) is
/// structured-merge-diff's.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PathElement {
    /// A field of a struct or a key of a map (`f:`).
    Field(String),
    /// An item of an associative list by its key fields: compact JSON of the key object, keys
    /// sorted (`k:`).
    Key(String),
    /// An item of a set by its value: compact JSON (`v:`).
    Value(String),
    /// An item of a list by position (`i:`); not produced for the lists served here.
    Index(usize),
}

impl PathElement {
    /// The element of a key object (its keys are serialized sorted: serde_json's map is).
    #[must_use]
    pub fn key(fields: &Map<String, Value>) -> PathElement {
        // The text `Value::Object(fields.clone()).to_string()` writes, without the copy.
        PathElement::Key(serde_json::to_string(fields).unwrap_or_default())
    }

    /// The element of a set item.
    #[must_use]
    pub fn value(value: &Value) -> PathElement {
        PathElement::Value(value.to_string())
    }

    fn encode(&self) -> String {
        let mut encoded = String::new();
        self.encode_into(&mut encoded);
        encoded
    }

    /// The element's `FieldsV1` key written into `out` (cleared first), so a look-up by many
    /// elements reuses one buffer.
    pub(crate) fn encode_into(&self, out: &mut String) {
        // Prefix and text joined by hand: `format!` cost ~700 instructions an element, and a
        // write's managed fields encode every element of every manager's set.
        out.clear();
        let (prefix, text) = match self {
            PathElement::Field(name) => ("f:", name),
            PathElement::Key(key) => ("k:", key),
            PathElement::Value(value) => ("v:", value),
            PathElement::Index(index) => {
                use std::fmt::Write as _;
                let _ = write!(out, "i:{index}");
                return;
            }
        };
        out.reserve(prefix.len() + text.len());
        out.push_str(prefix);
        out.push_str(text);
    }

    /// Whether `key` is a `FieldsV1` key that decodes to an element encoding back to `key`
    /// itself (every `f:` key does; a `k:` key only with its object's keys sorted and
    /// compact, as [`PathElement::key`] writes it).
    pub(crate) fn is_canonical_key(key: &str) -> bool {
        if key.starts_with("f:") {
            return true;
        }
        PathElement::decode(key).is_ok_and(|element| element.encode() == key)
    }

    fn decode(text: &str) -> Result<PathElement, String> {
        let (kind, rest) = text
            .split_once(':')
            .ok_or_else(|| format!("unknown path element {text:?}"))?;
        match kind {
            "f" => Ok(PathElement::Field(rest.to_owned())),
            "k" => match serde_json::from_str::<Value>(rest) {
                Ok(Value::Object(fields)) => Ok(PathElement::key(&fields)),
                _ => Err(format!("invalid key in path element {text:?}")),
            },
            "v" => serde_json::from_str::<Value>(rest)
                .map(|value| PathElement::value(&value))
                .map_err(|_| format!("invalid value in path element {text:?}")),
            "i" => rest
                .parse()
                .map(PathElement::Index)
                .map_err(|_| format!("invalid index in path element {text:?}")),
            _ => Err(format!("unknown path element {text:?}")),
        }
    }
}

impl fmt::Display for PathElement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathElement::Field(name) => write!(f, ".{name}"),
            PathElement::Key(key) => {
                let fields: Map<String, Value> = serde_json::from_str(key).unwrap_or_default();
                let parts: Vec<String> = fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
                write!(f, "[{}]", parts.join(","))
            }
            PathElement::Value(value) => write!(f, "[={value}]"),
            PathElement::Index(index) => write!(f, "[{index}]"),
        }
    }
}

/// A path from the object's root.
pub type Path = Vec<PathElement>;

/// A path as structured-merge-diff prints it.
#[must_use]
pub fn path_string(path: &[PathElement]) -> String {
    path.iter().map(ToString::to_string).collect()
}

/// A set of paths (see the module docs). Copied, compared and dropped level by level on a
/// stack with room for it ([`crate::stack`]): a set nests as deep as the object it was taken
/// from.
#[derive(Debug, Default, Eq)]
pub struct Set {
    members: BTreeSet<PathElement>,
    children: BTreeMap<PathElement, Set>,
}

impl Clone for Set {
    fn clone(&self) -> Set {
        let children = if self.children.is_empty() {
            BTreeMap::new()
        } else {
            grow(|| self.children.clone())
        };
        Set {
            members: self.members.clone(),
            children,
        }
    }
}

impl PartialEq for Set {
    fn eq(&self, other: &Set) -> bool {
        self.members == other.members
            && (self.children.is_empty() && other.children.is_empty()
                || grow(|| self.children == other.children))
    }
}

impl Drop for Set {
    fn drop(&mut self) {
        if !self.children.is_empty() {
            let children = std::mem::take(&mut self.children);
            grow(|| drop(children));
        }
    }
}

impl Set {
    /// The empty set.
    #[must_use]
    pub fn new() -> Set {
        Set::default()
    }

    /// Whether the set has no path.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.members.is_empty() && self.children.is_empty()
    }

    /// Adds a path (the empty path, the root, is never a member).
    pub fn insert(&mut self, path: &[PathElement]) {
        let Some((last, parents)) = path.split_last() else {
            return;
        };
        let mut set = self;
        for element in parents {
            set = set.children.entry(element.clone()).or_default();
        }
        set.members.insert(last.clone());
    }

    /// Whether `path` is a member.
    #[must_use]
    pub fn contains(&self, path: &[PathElement]) -> bool {
        let Some((last, parents)) = path.split_last() else {
            return false;
        };
        let mut set = self;
        for element in parents {
            match set.children.get(element) {
                Some(child) => set = child,
                None => return false,
            }
        }
        set.members.contains(last)
    }

    /// Whether `element` is a member at this level.
    #[must_use]
    pub fn has_member(&self, element: &PathElement) -> bool {
        self.members.contains(element)
    }

    /// The subset below `element` at this level.
    #[must_use]
    pub fn child(&self, element: &PathElement) -> Option<&Set> {
        self.children.get(element)
    }

    /// The elements with a subset below them at this level.
    pub fn child_elements(&self) -> impl Iterator<Item = &PathElement> {
        self.children.keys()
    }

    /// The members at this level.
    pub fn members(&self) -> impl Iterator<Item = &PathElement> {
        self.members.iter()
    }

    /// The non-empty subsets below this level, by element.
    pub fn children(&self) -> impl Iterator<Item = (&PathElement, &Set)> {
        self.children.iter()
    }

    /// Marks `element` a member at this level.
    pub fn insert_member(&mut self, element: PathElement) {
        self.members.insert(element);
    }

    /// Replaces the subset below `element` (removed when empty).
    pub fn set_child(&mut self, element: PathElement, child: Set) {
        if child.is_empty() {
            self.children.remove(&element);
        } else {
            self.children.insert(element, child);
        }
    }

    /// Puts `element` below this level: a member when `member`, with the paths `below` (relative
    /// to it) under it. A walk that builds a set level by level attaches each level's set
    /// to its parent's, so that no path is looked up from the root: each level costs its
    /// own entries, whatever its depth.
    pub fn attach(&mut self, element: PathElement, member: bool, below: Set) {
        if below.is_empty() {
            if member {
                self.members.insert(element);
            }
            return;
        }
        if member {
            self.members.insert(element.clone());
        }
        match self.children.entry(element) {
            std::collections::btree_map::Entry::Vacant(entry) => {
                entry.insert(below);
            }
            std::collections::btree_map::Entry::Occupied(mut entry) => {
                entry.get_mut().add_all(&below)
            }
        }
    }

    /// Every path of `self` or `other`.
    #[must_use]
    pub fn union(&self, other: &Set) -> Set {
        // Built level by level: a copy of `self` whose shared children were then replaced held
        // a copy of every level's subtree at once, quadratic in the depth (an object nested
        // 1,000 levels took 330 MB to apply).
        let mut members = self.members.clone();
        members.extend(other.members.iter().cloned());
        let mut children = BTreeMap::new();
        for (element, mine) in &self.children {
            let merged = match other.children.get(element) {
                Some(theirs) => grow(|| mine.union(theirs)),
                None => mine.clone(),
            };
            children.insert(element.clone(), merged);
        }
        for (element, theirs) in &other.children {
            if !self.children.contains_key(element) {
                children.insert(element.clone(), theirs.clone());
            }
        }
        Set { members, children }
    }

    /// Adds every path of `other`: `self` becomes `self.union(other)`, without a copy of
    /// `self` (only what `other` adds is copied).
    pub fn add_all(&mut self, other: &Set) {
        for member in &other.members {
            if !self.members.contains(member) {
                self.members.insert(member.clone());
            }
        }
        for (element, theirs) in &other.children {
            match self.children.get_mut(element) {
                Some(mine) => grow(|| mine.add_all(theirs)),
                None => {
                    self.children.insert(element.clone(), theirs.clone());
                }
            }
        }
    }

    /// Removes every path of `other`: `self` becomes `self.difference(other)`, without a copy
    /// of what stays.
    pub fn remove_all(&mut self, other: &Set) {
        if !other.members.is_empty() {
            self.members
                .retain(|member| !other.members.contains(member));
        }
        for (element, theirs) in &other.children {
            if let Some(mine) = self.children.get_mut(element) {
                grow(|| mine.remove_all(theirs));
            }
        }
        // As `difference`, which keeps no empty subset (there are none to begin with: every
        // constructor drops them).
        self.children.retain(|_, child| !child.is_empty());
    }

    /// The paths of `self` that are not in `other`.
    #[must_use]
    pub fn difference(&self, other: &Set) -> Set {
        let members = self.members.difference(&other.members).cloned().collect();
        let mut children = BTreeMap::new();
        for (element, child) in &self.children {
            let rest = match other.children.get(element) {
                Some(theirs) => grow(|| child.difference(theirs)),
                None => child.clone(),
            };
            if !rest.is_empty() {
                children.insert(element.clone(), rest);
            }
        }
        Set { members, children }
    }

    /// The paths in both sets.
    #[must_use]
    pub fn intersection(&self, other: &Set) -> Set {
        let members = self.members.intersection(&other.members).cloned().collect();
        let mut children = BTreeMap::new();
        for (element, child) in &self.children {
            if let Some(theirs) = other.children.get(element) {
                let both = grow(|| child.intersection(theirs));
                if !both.is_empty() {
                    children.insert(element.clone(), both);
                }
            }
        }
        Set { members, children }
    }

    /// Every path, in order (a node before what is below it).
    #[must_use]
    pub fn paths(&self) -> Vec<Path> {
        let mut out = Vec::new();
        self.collect(&mut Vec::new(), &mut out);
        out
    }

    fn collect(&self, prefix: &mut Path, out: &mut Vec<Path>) {
        let elements: BTreeSet<&PathElement> =
            self.members.iter().chain(self.children.keys()).collect();
        for element in elements {
            prefix.push(element.clone());
            if self.members.contains(element) {
                out.push(prefix.clone());
            }
            if let Some(child) = self.children.get(element) {
                grow(|| child.collect(prefix, out));
            }
            prefix.pop();
        }
    }

    /// The number of paths.
    #[must_use]
    pub fn len(&self) -> usize {
        self.members.len()
            + self
                .children
                .values()
                .map(|child| grow(|| child.len()))
                .sum::<usize>()
    }

    /// The `FieldsV1` object of the set.
    #[must_use]
    pub fn to_fields_v1(&self) -> Value {
        let mut out = Map::new();
        for member in &self.members {
            if !self.children.contains_key(member) {
                out.insert(member.encode(), Value::Object(Map::new()));
            }
        }
        for (element, child) in &self.children {
            let mut node = match grow(|| child.to_fields_v1()) {
                Value::Object(node) => node,
                _ => Map::new(),
            };
            if self.members.contains(element) {
                node.insert(".".to_owned(), Value::Object(Map::new()));
            }
            out.insert(element.encode(), Value::Object(node));
        }
        Value::Object(out)
    }

    /// The set of a `FieldsV1` object.
    ///
    /// # Errors
    /// A description of the first malformed element.
    pub fn from_fields_v1(value: &Value) -> Result<Set, String> {
        let Value::Object(map) = value else {
            return Err("FieldsV1 must be a JSON object".to_owned());
        };
        let mut set = Set::new();
        for (key, child) in map {
            if key == "." {
                continue;
            }
            let element = PathElement::decode(key)?;
            let Value::Object(child_map) = child else {
                return Err(format!("the value of {key:?} must be an object"));
            };
            if child_map.is_empty() {
                // A leaf (most elements are): a member with nothing below.
                set.members.insert(element);
                continue;
            }
            if child_map.contains_key(".") {
                set.members.insert(element.clone());
            }
            let below = grow(|| Set::from_fields_v1(child))?;
            if !below.is_empty() {
                set.children.insert(element, below);
            }
        }
        Ok(set)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn field(name: &str) -> PathElement {
        PathElement::Field(name.to_owned())
    }

    #[test]
    fn fields_v1_round_trips_with_dot_members() {
        let fields = json!({
            "f:data": {".": {}, "f:a": {}},
            "f:spec": {"f:containers": {"k:{\"name\":\"web\"}": {".": {}, "f:image": {}, "f:name": {}}}},
            "f:metadata": {"f:finalizers": {"v:\"x\"": {}}}
        });
        let set = Set::from_fields_v1(&fields).unwrap();
        assert!(set.contains(&[field("data")]));
        assert!(set.contains(&[field("data"), field("a")]));
        assert!(!set.contains(&[field("spec")]));
        let item = PathElement::key(json!({"name": "web"}).as_object().unwrap());
        assert!(set.contains(&[field("spec"), field("containers"), item.clone()]));
        assert!(set.contains(&[field("spec"), field("containers"), item, field("image")]));
        assert_eq!(set.to_fields_v1(), fields);
        assert_eq!(set.len(), 6);
    }

    #[test]
    fn a_key_element_is_its_object_as_compact_json() {
        for key in [
            json!({}),
            json!({"name": "web"}),
            json!({"protocol": "TCP", "containerPort": 80, "x": {"b": [1, "\u{e9}\n"], "a": null}}),
        ] {
            let fields = key.as_object().unwrap();
            assert_eq!(
                PathElement::key(fields),
                PathElement::Key(Value::Object(fields.clone()).to_string())
            );
        }
    }

    #[test]
    fn paths_print_as_structured_merge_diff_does() {
        let item = PathElement::key(
            json!({"protocol": "TCP", "containerPort": 80})
                .as_object()
                .unwrap(),
        );
        let path = vec![field("spec"), field("ports"), item, field("name")];
        assert_eq!(
            path_string(&path),
            r#".spec.ports[containerPort=80,protocol="TCP"].name"#
        );
        assert_eq!(
            path_string(&[field("finalizers"), PathElement::value(&json!("a"))]),
            r#".finalizers[="a"]"#
        );
    }

    #[test]
    fn set_operations_are_path_wise() {
        let mut a = Set::new();
        a.insert(&[field("x")]);
        a.insert(&[field("x"), field("y")]);
        a.insert(&[field("z")]);
        let mut b = Set::new();
        b.insert(&[field("x")]);
        let d = a.difference(&b);
        assert!(!d.contains(&[field("x")]));
        assert!(d.contains(&[field("x"), field("y")]));
        assert!(d.contains(&[field("z")]));
        assert_eq!(a.intersection(&b), b);
        assert_eq!(d.union(&b), a);
        assert_eq!(
            a.paths(),
            vec![
                vec![field("x")],
                vec![field("x"), field("y")],
                vec![field("z")]
            ]
        );
        assert!(Set::from_fields_v1(&json!({"q:x": {}})).is_err());
    }

    /// A set of paths over a small alphabet, so that random sets overlap.
    fn any_set() -> impl proptest::strategy::Strategy<Value = Set> {
        use proptest::prelude::*;
        let element = prop_oneof![
            (0..4u8).prop_map(|i| PathElement::Field(format!("f{i}"))),
            (0..2u8).prop_map(|i| PathElement::Key(format!("{{\"name\":\"{i}\"}}"))),
            (0..2usize).prop_map(PathElement::Index),
        ];
        proptest::collection::vec(proptest::collection::vec(element, 1..5), 0..12).prop_map(
            |paths| {
                let mut set = Set::new();
                for path in paths {
                    set.insert(&path);
                }
                set
            },
        )
    }

    proptest::proptest! {
        /// The in-place operations give exactly the copying ones' sets.
        #[test]
        fn in_place_operations_are_the_copying_ones(a in any_set(), b in any_set()) {
            let mut added = a.clone();
            added.add_all(&b);
            proptest::prop_assert_eq!(&added, &a.union(&b));
            let mut removed = a.clone();
            removed.remove_all(&b);
            proptest::prop_assert_eq!(&removed, &a.difference(&b));
            proptest::prop_assert_eq!(removed.to_fields_v1(), a.difference(&b).to_fields_v1());
        }
    }
}

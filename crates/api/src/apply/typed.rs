//! Objects walked with their schema, as structured-merge-diff walks typed values: the field
//! set of a value, the comparison of two values, the merge of an applied configuration into
//! the live object, and the removal of a set of paths.
//!
//! ## Schema
//! A node's type comes from the kind's published schema (the k8s-openapi definitions the
//! write validation uses, with Kubernetes' list and map markers of v1.33 written into them
//! from the checked-in extract, see [`crate::schema`]): a struct (`properties`), a map
//! (`additionalProperties`), a list (`items`) or a scalar. As kube-openapi's `schemaconv`
//! reads them: a list is a set or an associative list by `x-kubernetes-list-type` (`set`,
//! `map` with `x-kubernetes-list-map-keys`); without one, a list whose
//! `x-kubernetes-patch-strategy` merges is associative by its `x-kubernetes-patch-merge-key`
//! (a set without one); every other list is atomic. A struct or map is atomic with
//! `x-kubernetes-map-type: atomic` (on the field or on the referenced definition). A custom
//! resource is typed by its CRD's structural schema ([`Ty::custom`]: the same markers, inline,
//! and `metadata` as the built-in `ObjectMeta`). Kinds without a schema and fields a schema
//! does not declare are *deduced*, as structured-merge-diff's deduced schema: objects are maps
//! whose every key is a member, lists are atomic.
//!
//! ## Guarantees
//! - [`field_set`] follows structured-merge-diff's `ToFieldSet`: scalars, atomic values,
//!   list items and map entries are members; a struct field is a member only when its value
//!   is null, an empty object or a scalar.
//! - [`compare`] follows its `Compare`: a path in `added`, `removed` or `modified`; a
//!   container (non-atomic map, struct or list) that appears or disappears is added or removed
//!   with everything below it; containers empty on both sides compare as leaves.
//! - [`merge`] follows its `Merge`: the configuration's leaves win; maps and structs merge
//!   key by key; associative lists merge item by item by key (set items by value), keeping
//!   the live items the configuration does not name in their places.
//! - [`remove_items`] removes every member path of a set from a value.
//!
//! ## Bounds
//! Every walk is linear in the values it walks, whatever their depth (an object may nest
//! 10,000 levels): a field set and a comparison are built level by level, each level's set
//! attached to its parent's ([`Set::attach`]) rather than each path inserted from the root
//! (which copied every element above it: `d²/2` steps for a chain `d` deep), and the
//! comparison's shortcuts over equal subtrees spend a bounded credit ([`Credit`]).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::fieldpath::{PathElement, Set};

/// How a list's items are identified.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListType<'a> {
    /// Replaced whole.
    Atomic,
    /// Scalar items identified by value.
    Set,
    /// Object items identified by these key fields.
    Map(Keys<'a>),
}

/// The key fields of an associative list: `x-kubernetes-list-map-keys`, or the one
/// `x-kubernetes-patch-merge-key` of a list that has no list type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keys<'a> {
    /// `x-kubernetes-list-map-keys` (strings; anything else is skipped).
    Listed(&'a [Value]),
    /// `x-kubernetes-patch-merge-key`.
    One(&'a str),
}

impl<'a> Keys<'a> {
    fn iter(self) -> impl Iterator<Item = &'a str> {
        let (listed, one) = match self {
            Keys::Listed(keys) => (keys, None),
            Keys::One(key) => (&[][..], Some(key)),
        };
        listed.iter().filter_map(Value::as_str).chain(one)
    }
}

/// Defaults of list-map key fields an item may leave out where its schema declares none
/// (`protocol` of ports: Kubernetes' OpenAPI v2 document does not carry the `default`s
/// structured-merge-diff reads; a custom resource's schema declares its own, see
/// [`Ty::field_default`]).
fn key_default(field: &str) -> Option<Value> {
    (field == "protocol").then(|| Value::String("TCP".to_owned()))
}

/// The list type a schema node declares (see the module docs).
fn list_type_of(node: &Value) -> ListType<'_> {
    let text = |key: &str| node.get(key).and_then(Value::as_str);
    match text("x-kubernetes-list-type") {
        Some("set") => ListType::Set,
        Some("map") => match node
            .get("x-kubernetes-list-map-keys")
            .and_then(Value::as_array)
        {
            Some(keys) if !keys.is_empty() => ListType::Map(Keys::Listed(keys)),
            _ => ListType::Atomic,
        },
        Some(_) => ListType::Atomic,
        None => match text("x-kubernetes-patch-strategy") {
            Some("merge" | "merge,retainKeys") => match text("x-kubernetes-patch-merge-key") {
                Some(key) => ListType::Map(Keys::One(key)),
                None => ListType::Set,
            },
            _ => ListType::Atomic,
        },
    }
}

/// Whether a schema node says `x-kubernetes-map-type: atomic`.
fn is_atomic_map(node: &Value) -> bool {
    node.get("x-kubernetes-map-type").and_then(Value::as_str) == Some("atomic")
}

/// A schema position: the schema node (none when deduced) within its definitions.
#[derive(Clone, Copy, Debug)]
pub struct Ty<'a> {
    definitions: Option<&'a Map<String, Value>>,
    node: Option<&'a Value>,
    /// The root of a custom resource's schema: its `metadata` is an `ObjectMeta`.
    custom_root: bool,
}

/// Where a custom resource's `metadata` points: the built-in `ObjectMeta`.
fn object_meta() -> &'static Value {
    static OBJECT_META: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
    OBJECT_META.get_or_init(|| {
        serde_json::json!({"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"})
    })
}

/// What a node is.
#[derive(Clone, Copy, Debug)]
enum Kind<'a> {
    Scalar,
    /// An atomic struct or map: one leaf.
    Atomic,
    Struct(&'a Map<String, Value>),
    Map(Ty<'a>),
    List(ListType<'a>, Ty<'a>),
    /// Deduced: maps of deduced values, atomic lists, scalars.
    Deduced,
}

/// The [`Kind`] of every node of the built-in definitions a typed walk reaches (each
/// definition, and the properties, items and map values inside it), worked out once and kept by
/// the node's address: the walks behind every write's managed fields ask for the kind of every
/// field, and working it out means a definition look-up by its long name among ~700 and up to
/// six key look-ups. The definitions live as long as the process, so their addresses are
/// stable keys (as `schema`'s own walks do).
fn classified() -> &'static crate::schema::ByAddress<Kind<'static>> {
    static CLASSIFIED: std::sync::OnceLock<crate::schema::ByAddress<Kind<'static>>> =
        std::sync::OnceLock::new();
    CLASSIFIED.get_or_init(|| {
        let definitions = crate::schema::definitions();
        let mut out = crate::schema::ByAddress::default();
        crate::schema::each_definition_node(|node| {
            let ty = Ty {
                definitions: Some(definitions),
                node: Some(node),
                custom_root: false,
            };
            out.insert(crate::schema::address(node), ty.classify());
        });
        out
    })
}

fn short_name(definition: &str) -> &str {
    definition.rsplit('.').next().unwrap_or(definition)
}

impl<'a> Ty<'a> {
    /// The root of a kind with a schema.
    #[must_use]
    pub fn root(definitions: &'a Map<String, Value>, root: &'a str) -> Ty<'a> {
        Ty {
            definitions: Some(definitions),
            node: definitions.get(root),
            custom_root: false,
        }
    }

    /// The root of a custom resource with a structural schema (inline, no references):
    /// `definitions` are the built-in ones, for its `metadata`.
    #[must_use]
    pub fn custom(definitions: &'a Map<String, Value>, schema: &'a Value) -> Ty<'a> {
        Ty {
            definitions: Some(definitions),
            node: Some(schema),
            custom_root: true,
        }
    }

    /// A deduced root (no schema).
    #[must_use]
    pub fn deduced() -> Ty<'a> {
        Ty {
            definitions: None,
            node: None,
            custom_root: false,
        }
    }

    /// What this node is. Nodes of the built-in definitions come classified ([`classified`]).
    fn kind(self) -> Kind<'a> {
        if let (Some(definitions), Some(field)) = (self.definitions, self.node)
            && std::ptr::eq(definitions, crate::schema::definitions())
            && let Some(&known) = classified().get(&crate::schema::address(field))
        {
            return known;
        }
        self.classify()
    }

    /// [`Ty::kind`], worked out.
    fn classify(self) -> Kind<'a> {
        let (Some(definitions), Some(field)) = (self.definitions, self.node) else {
            return Kind::Deduced;
        };
        // `field` is the node where the schema names this value (a property, list items or
        // map values), which carries the field's markers; `node` is what it refers to.
        let mut node = field;
        if let Some(reference) = field.get("$ref").and_then(Value::as_str) {
            let full = reference.rsplit('/').next().unwrap_or(reference);
            match short_name(full) {
                "Quantity" | "IntOrString" | "Time" | "MicroTime" => return Kind::Scalar,
                "FieldsV1" | "RawExtension" | "JSON" => return Kind::Deduced,
                _ => {}
            }
            match definitions.get(full) {
                Some(definition) => node = definition,
                None => return Kind::Deduced,
            }
        }
        if node
            .get("x-kubernetes-int-or-string")
            .and_then(Value::as_bool)
            == Some(true)
        {
            return Kind::Scalar;
        }
        match node.get("type").and_then(Value::as_str) {
            Some("array") => {
                let list_type = match list_type_of(field) {
                    ListType::Atomic if !std::ptr::eq(field, node) => list_type_of(node),
                    list_type => list_type,
                };
                Kind::List(
                    list_type,
                    Ty {
                        node: node.get("items"),
                        custom_root: false,
                        ..self
                    },
                )
            }
            Some("object") | None => {
                let atomic = is_atomic_map(field) || is_atomic_map(node);
                if let Some(properties) = node.get("properties").and_then(Value::as_object) {
                    if atomic {
                        Kind::Atomic
                    } else {
                        Kind::Struct(properties)
                    }
                } else if let Some(items) =
                    node.get("additionalProperties").filter(|v| v.is_object())
                {
                    if atomic {
                        Kind::Atomic
                    } else {
                        Kind::Map(Ty {
                            node: Some(items),
                            custom_root: false,
                            ..self
                        })
                    }
                } else {
                    Kind::Deduced
                }
            }
            Some(_) => Kind::Scalar,
        }
    }

    /// The type of a field or map entry `key` of a node of this type; whether it is a named
    /// struct field.
    fn entry(self, key: &str) -> (Ty<'a>, bool) {
        match self.kind() {
            Kind::Struct(_) if self.custom_root && key == "metadata" => (
                Ty {
                    node: Some(object_meta()),
                    custom_root: false,
                    ..self
                },
                true,
            ),
            Kind::Struct(properties) => match properties.get(key) {
                Some(node) => (
                    Ty {
                        node: Some(node),
                        custom_root: false,
                        ..self
                    },
                    true,
                ),
                None => (Ty::deduced(), false),
            },
            Kind::Map(element) => (element, false),
            _ => (Ty::deduced(), false),
        }
    }

    fn list_item(self) -> (ListType<'a>, Ty<'a>) {
        match self.kind() {
            Kind::List(list_type, items) => (list_type, items),
            _ => (ListType::Atomic, Ty::deduced()),
        }
    }

    /// Whether values of this type are leaves when non-empty.
    fn is_leaf_kind(self, value: Option<&Value>) -> bool {
        match self.kind() {
            Kind::Scalar | Kind::Atomic => true,
            Kind::List(ListType::Atomic, _) => true,
            Kind::List(..) => !matches!(value, None | Some(Value::Array(_) | Value::Null)),
            Kind::Struct(..) | Kind::Map(_) => {
                !matches!(value, None | Some(Value::Object(_) | Value::Null))
            }
            Kind::Deduced => !matches!(value, None | Some(Value::Object(_) | Value::Null)),
        }
    }

    fn is_list(self) -> bool {
        matches!(self.kind(), Kind::List(..))
    }
}

/// An error of a value that does not fit its schema (a list-map item without its key, a
/// duplicate key).
pub type TypeError = String;

/// The path element of a list item.
fn item_element(
    list_type: ListType<'_>,
    item_ty: Ty<'_>,
    item: &Value,
) -> Result<PathElement, TypeError> {
    match list_type {
        ListType::Set => Ok(PathElement::value(item)),
        ListType::Map(keys) => {
            let Value::Object(fields) = item else {
                return Err("an associative list item must be an object".to_owned());
            };
            let mut key = Map::new();
            for field in keys.iter() {
                match fields
                    .get(field)
                    .filter(|v| !v.is_null())
                    .or_else(|| item_ty.field_default(field))
                    .cloned()
                    .or_else(|| key_default(field))
                {
                    Some(value) => {
                        key.insert(field.to_owned(), value);
                    }
                    None => {
                        return Err(format!(
                            "associative list with keys has an element that omits key field {field:?} (and doesn't have default value)"
                        ));
                    }
                }
            }
            Ok(PathElement::key(&key))
        }
        ListType::Atomic => Err("an atomic list has no item elements".to_owned()),
    }
}

/// The items of a list with their elements; duplicates are an error.
fn keyed_items<'v>(
    list_type: ListType<'_>,
    item_ty: Ty<'_>,
    items: &'v [Value],
) -> Result<Vec<(PathElement, &'v Value)>, TypeError> {
    let mut out = Vec::with_capacity(items.len());
    let mut seen = std::collections::BTreeSet::new();
    for item in items {
        let element = item_element(list_type, item_ty, item)?;
        if !seen.insert(element.clone()) {
            return Err(format!("duplicate entries for key {element}"));
        }
        out.push((element, item));
    }
    Ok(out)
}

/// The field set of `value` (see the module docs).
///
/// # Errors
/// A list item without its key, or duplicate keys.
pub fn field_set(value: &Value, ty: Ty<'_>) -> Result<Set, TypeError> {
    let mut set = Set::new();
    // The root is never a member (the empty path).
    walk_set(value, ty, 0, &mut set)?;
    Ok(set)
}

/// [`field_set`] of the value at `depth`: its paths, relative to it, go into `set` (the node
/// of the set at the value's path, so that no path is looked up from the root again: each
/// level costs its own entries, whatever its depth); whether the value itself is a member
/// (a leaf) is the answer.
fn walk_set(value: &Value, ty: Ty<'_>, depth: usize, set: &mut Set) -> Result<bool, TypeError> {
    watchkeeper_core::stack::deep(depth, || walk_set_level(value, ty, depth, set))
}

/// [`walk_set`] of one level.
fn walk_set_level(
    value: &Value,
    ty: Ty<'_>,
    depth: usize,
    set: &mut Set,
) -> Result<bool, TypeError> {
    match (ty.kind(), value) {
        (Kind::Struct(..) | Kind::Map(_) | Kind::Deduced, Value::Object(map)) => {
            for (key, child) in map {
                let (child_ty, named) = ty.entry(key);
                let mut below = Set::new();
                let leaf = walk_set(child, child_ty, depth + 1, &mut below)?;
                let empty = child.is_null() || child.as_object().is_some_and(Map::is_empty);
                set.attach(
                    PathElement::Field(key.clone()),
                    leaf || empty || !named,
                    below,
                );
            }
        }
        (
            Kind::List(list_type @ (ListType::Set | ListType::Map(_)), items_ty),
            Value::Array(items),
        ) => {
            for (element, item) in keyed_items(list_type, items_ty, items)? {
                let mut below = Set::new();
                walk_set(item, items_ty, depth + 1, &mut below)?;
                set.attach(element, true, below);
            }
        }
        (Kind::Struct(..) | Kind::Map(_) | Kind::List(..), Value::Null) => {}
        _ => return Ok(true),
    }
    Ok(false)
}

/// The paths added, removed and modified from one value to another.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Comparison {
    /// Paths present only in the new value.
    pub added: Set,
    /// Paths present only in the old value.
    pub removed: Set,
    /// Leaves present in both with different values.
    pub modified: Set,
}

/// Compares `old` with `new` (see the module docs).
///
/// # Errors
/// As [`field_set`].
pub fn compare(old: &Value, new: &Value, ty: Ty<'_>) -> Result<Comparison, TypeError> {
    compare_from(old, new, ty, Skip::Nothing)
}

/// [`compare`] of two objects as if neither had `metadata.managedFields`, without copying
/// them to remove it.
///
/// # Errors
/// As [`field_set`].
pub fn compare_without_managed_fields(
    old: &Value,
    new: &Value,
    ty: Ty<'_>,
) -> Result<Comparison, TypeError> {
    compare_from(old, new, ty, Skip::InMetadata)
}

/// [`compare`] of the roots `old` and `new`, leaving out what `skip` says.
fn compare_from(old: &Value, new: &Value, ty: Ty<'_>, skip: Skip) -> Result<Comparison, TypeError> {
    let mut comparison = Comparison::default();
    let mut credit = Credit::new();
    // The root's own mark is the empty path's, never a member.
    walk_compare(
        Some(old),
        Some(new),
        ty,
        skip,
        0,
        &mut credit,
        &mut comparison,
    )?;
    Ok(comparison)
}

/// What a comparison leaves out of the value it is at.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Skip {
    Nothing,
    /// The object's root: its `metadata` is compared without `managedFields`.
    InMetadata,
    /// An object's `metadata`: its `managedFields` entry is left out.
    ManagedFields,
}

/// The key [`Skip::ManagedFields`] leaves out.
const MANAGED_FIELDS: &str = "managedFields";

fn is_empty_container(value: Option<&Value>, skip: Skip) -> bool {
    match value {
        None | Some(Value::Null) => true,
        Some(Value::Object(map)) if skip == Skip::ManagedFields => {
            map.keys().all(|key| key == MANAGED_FIELDS)
        }
        Some(Value::Object(map)) => map.is_empty(),
        Some(Value::Array(items)) => items.is_empty(),
        Some(_) => false,
    }
}

/// `a == b`, leaving out what `skip` says (maps compare as sets of entries, as `Value`'s
/// equality does).
fn equal(a: &Value, b: &Value, skip: Skip) -> bool {
    match (a, b, skip) {
        (Value::Object(a), Value::Object(b), Skip::ManagedFields) => {
            let entries = |map: &'_ Map<String, Value>| {
                map.len() - usize::from(map.contains_key(MANAGED_FIELDS))
            };
            entries(a) == entries(b)
                && a.iter()
                    .filter(|(key, _)| *key != MANAGED_FIELDS)
                    .all(|(key, value)| b.get(key) == Some(value))
        }
        (Value::Object(a), Value::Object(b), Skip::InMetadata) => {
            a.len() == b.len()
                && a.iter().all(|(key, value)| match b.get(key) {
                    Some(other) if key == "metadata" => equal(value, other, Skip::ManagedFields),
                    other => other == Some(value),
                })
        }
        _ => a == b,
    }
}

/// The work a comparison may spend on its shortcuts: deciding that two subtrees are equal (or
/// hold no list) before it walks them. A shortcut that finds its answer skips the walk of a
/// subtree, most of an object in most writes; but it is a walk of its own, and asked again at
/// every level of a path whose bottom differs, it would make the comparison of an object
/// nested `d` levels take `d²/2` steps (10,000 levels: 50 million). So the shortcuts spend
/// credit, a node each: the comparison starts with [`Credit::START`] and earns
/// [`Credit::PER_NODE`] for every node it walks, and a shortcut that runs out answers "don't
/// know", which walks the subtree as if the shortcut had not been tried (the same paths, the
/// same first error). The shortcuts' work is then at most `START + PER_NODE × nodes walked`:
/// linear in the values compared.
struct Credit {
    left: usize,
}

impl Credit {
    /// The credit a comparison starts with: every shortcut of an object of fewer nodes finds
    /// its answer.
    const START: usize = 1 << 16;

    /// The credit earned per node walked.
    const PER_NODE: usize = 8;

    fn new() -> Credit {
        Credit {
            left: Credit::START,
        }
    }

    /// One node of a shortcut's walk: false once the credit is spent.
    fn spend(&mut self) -> bool {
        #[cfg(test)]
        tests::SHORTCUT_NODES.with(|nodes| nodes.set(nodes.get() + 1));
        match self.left.checked_sub(1) {
            Some(left) => {
                self.left = left;
                true
            }
            None => false,
        }
    }

    fn earn(&mut self) {
        self.left = self.left.saturating_add(Credit::PER_NODE);
    }
}

/// [`equal`] within the `credit` left: `None` once it is spent (see [`Credit`]).
fn equal_within(
    a: &Value,
    b: &Value,
    skip: Skip,
    depth: usize,
    credit: &mut Credit,
) -> Option<bool> {
    if !credit.spend() {
        return None;
    }
    let both = |a: &Value, b: &Value, skip: Skip, credit: &mut Credit| {
        watchkeeper_core::stack::deep(depth + 1, || equal_within(a, b, skip, depth + 1, credit))
    };
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            // Both maps are walked side by side in their keys' order (serde_json's `Map` is a
            // `BTreeMap`: no `preserve_order`), so equal key sets pair up one by one without
            // a look-up per key. A map in another order would only answer "not equal" for
            // equal maps, which costs the walk this shortcut would have skipped.
            let kept = |(key, _): &(&String, &Value)| {
                !(skip == Skip::ManagedFields && *key == MANAGED_FIELDS)
            };
            let (mut left, mut right) = (a.iter().filter(kept), b.iter().filter(kept));
            loop {
                match (left.next(), right.next()) {
                    (None, None) => return Some(true),
                    (Some((key, value)), Some((other_key, other))) if key == other_key => {
                        let child_skip = match skip {
                            Skip::InMetadata if key == "metadata" => Skip::ManagedFields,
                            _ => Skip::Nothing,
                        };
                        if !both(value, other, child_skip, credit)? {
                            return Some(false);
                        }
                    }
                    _ => return Some(false),
                }
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            if a.len() != b.len() {
                return Some(false);
            }
            for (a, b) in a.iter().zip(b) {
                if !both(a, b, Skip::Nothing, credit)? {
                    return Some(false);
                }
            }
            Some(true)
        }
        _ => Some(a == b),
    }
}

/// [`has_array`] within the `credit` left: `None` once it is spent (see [`Credit`]).
fn has_array_within(value: &Value, skip: Skip, depth: usize, credit: &mut Credit) -> Option<bool> {
    if !credit.spend() {
        return None;
    }
    match value {
        Value::Array(_) => Some(true),
        Value::Object(map) => {
            for (key, child) in map {
                let child_skip = match skip {
                    Skip::ManagedFields if key == MANAGED_FIELDS => continue,
                    Skip::InMetadata if key == "metadata" => Skip::ManagedFields,
                    _ => Skip::Nothing,
                };
                let below = watchkeeper_core::stack::deep(depth + 1, || {
                    has_array_within(child, child_skip, depth + 1, credit)
                })?;
                if below {
                    return Some(true);
                }
            }
            Some(false)
        }
        _ => Some(false),
    }
}

/// What a comparison found of a value itself (its path, relative to its parent); what it
/// found below goes into the parent's [`Comparison`] under the value's element.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mark {
    Same,
    Added,
    Removed,
    Modified,
}

impl Comparison {
    /// Puts what a comparison found of the value at `element` (its `mark`) and below it
    /// (`below`, relative to it) into this comparison, of its parent.
    fn attach(&mut self, element: PathElement, mark: Mark, below: Comparison) {
        let Comparison {
            added,
            removed,
            modified,
        } = below;
        // The element is copied only for the sets it goes into.
        let mut into = [
            (&mut self.added, mark == Mark::Added, added),
            (&mut self.removed, mark == Mark::Removed, removed),
            (&mut self.modified, mark == Mark::Modified, modified),
        ]
        .into_iter()
        .filter(|(_, member, below)| *member || !below.is_empty())
        .peekable();
        while let Some((set, member, below)) = into.next() {
            if into.peek().is_some() {
                set.attach(element.clone(), member, below);
            } else {
                set.attach(element, member, below);
                break;
            }
        }
    }
}

/// The comparison of the values at `depth` (`lhs` old, `rhs` new): what it finds below them
/// goes into `out`, relative to them (see [`Comparison::attach`]); what it finds of them
/// itself is the answer.
fn walk_compare(
    lhs: Option<&Value>,
    rhs: Option<&Value>,
    ty: Ty<'_>,
    skip: Skip,
    depth: usize,
    credit: &mut Credit,
    out: &mut Comparison,
) -> Result<Mark, TypeError> {
    watchkeeper_core::stack::deep(depth, || {
        walk_compare_level(lhs, rhs, ty, skip, depth, credit, out)
    })
}

/// [`walk_compare`] of the child `element` of the values at `depth`, put into `out`.
#[allow(clippy::too_many_arguments)]
fn compare_child(
    element: PathElement,
    lhs: Option<&Value>,
    rhs: Option<&Value>,
    ty: Ty<'_>,
    skip: Skip,
    depth: usize,
    credit: &mut Credit,
    out: &mut Comparison,
) -> Result<(), TypeError> {
    let mut below = Comparison::default();
    let mark = walk_compare(lhs, rhs, ty, skip, depth + 1, credit, &mut below)?;
    out.attach(element, mark, below);
    Ok(())
}

/// [`walk_compare`] of one level.
fn walk_compare_level(
    lhs: Option<&Value>,
    rhs: Option<&Value>,
    ty: Ty<'_>,
    skip: Skip,
    depth: usize,
    credit: &mut Credit,
    out: &mut Comparison,
) -> Result<Mark, TypeError> {
    credit.earn();
    let leaf = ty.is_leaf_kind(lhs)
        || ty.is_leaf_kind(rhs)
        || (is_empty_container(lhs, skip) && is_empty_container(rhs, skip))
        || matches!(
            (lhs, rhs),
            (Some(Value::Object(_)), Some(Value::Array(_)))
                | (Some(Value::Array(_)), Some(Value::Object(_)))
        );
    if leaf {
        return Ok(match (lhs, rhs) {
            (None, Some(_)) => Mark::Added,
            (Some(_), None) => Mark::Removed,
            (Some(a), Some(b)) if !equal(a, b, skip) => Mark::Modified,
            _ => Mark::Same,
        });
    }
    let mark = match (lhs, rhs) {
        (None, Some(_)) => Mark::Added,
        (Some(_), None) => Mark::Removed,
        (Some(a), Some(b)) if equal_within(a, b, skip, depth, credit) == Some(true) => {
            // Equal containers: nothing below is added, removed or modified; what is left to
            // find is what the walk would fail on below, in the same order.
            check_items(a, ty, skip, depth, credit)?;
            return Ok(Mark::Same);
        }
        _ => Mark::Same,
    };
    if ty.is_list() {
        let (list_type, items_ty) = ty.list_item();
        let empty = Vec::new();
        let left = keyed_items(
            list_type,
            items_ty,
            lhs.and_then(Value::as_array).unwrap_or(&empty),
        )?;
        let right = keyed_items(
            list_type,
            items_ty,
            rhs.and_then(Value::as_array).unwrap_or(&empty),
        )?;
        let right_map: BTreeMap<&PathElement, &Value> =
            right.iter().map(|(e, v)| (e, *v)).collect();
        let left_map: BTreeMap<&PathElement, &Value> = left.iter().map(|(e, v)| (e, *v)).collect();
        let entry = Entry {
            skip: Skip::Nothing,
            depth,
        };
        for (element, item) in &left {
            let other = right_map.get(element).copied();
            let element = || element.clone();
            entry.compare(element, Some(item), other, || items_ty, credit, out)?;
        }
        for (element, item) in &right {
            if !left_map.contains_key(element) {
                let element = || element.clone();
                entry.compare(element, None, Some(item), || items_ty, credit, out)?;
            }
        }
        return Ok(mark);
    }
    let empty = Map::new();
    let left = lhs.and_then(Value::as_object).unwrap_or(&empty);
    let right = rhs.and_then(Value::as_object).unwrap_or(&empty);
    let child_skip = |key: &str| match skip {
        Skip::InMetadata if key == "metadata" => Skip::ManagedFields,
        _ => Skip::Nothing,
    };
    let skipped = |key: &str| skip == Skip::ManagedFields && key == MANAGED_FIELDS;
    let entry = |key: &str| Entry {
        skip: child_skip(key),
        depth,
    };
    // A key's path element and type are made only for a child that needs them (most of an
    // object's children are equal and hold no list).
    for (key, value) in left {
        if !skipped(key) {
            let (element, child_ty) = (|| PathElement::Field(key.clone()), || ty.entry(key).0);
            let other = right.get(key);
            entry(key).compare(element, Some(value), other, child_ty, credit, out)?;
        }
    }
    for (key, value) in right {
        if !left.contains_key(key) && !skipped(key) {
            let (element, child_ty) = (|| PathElement::Field(key.clone()), || ty.entry(key).0);
            entry(key).compare(element, None, Some(value), child_ty, credit, out)?;
        }
    }
    Ok(mark)
}

/// One entry of a container [`walk_compare`] compares, at `depth`: the container's children
/// are compared with `skip`.
struct Entry {
    skip: Skip,
    depth: usize,
}

impl Entry {
    /// Compares the child at `element` (`lhs` and `rhs`, its values on each side) of type
    /// `ty`: two equal values have nothing added, removed or modified, and only what the walk
    /// would fail on below is looked for ([`check_items`], skipped when they hold no list,
    /// the only thing that can fail); others are walked and what they hold is attached under
    /// `element` ([`compare_child`]). The element and the type are made only when used:
    /// equal children, most of them, need neither (a key's copy, a schema look-up).
    fn compare<'t>(
        &self,
        element: impl FnOnce() -> PathElement,
        lhs: Option<&Value>,
        rhs: Option<&Value>,
        ty: impl FnOnce() -> Ty<'t>,
        credit: &mut Credit,
        out: &mut Comparison,
    ) -> Result<(), TypeError> {
        let below = self.depth + 1;
        if let (Some(a), Some(b)) = (lhs, rhs)
            && equal_within(a, b, self.skip, below, credit) == Some(true)
        {
            if has_array_within(a, self.skip, below, credit) == Some(false) {
                return Ok(());
            }
            return check_items(a, ty(), self.skip, below, credit);
        }
        compare_child(
            element(),
            lhs,
            rhs,
            ty(),
            self.skip,
            self.depth,
            credit,
            out,
        )
    }
}

/// What [`walk_compare`] of `value` with a value equal to it (leaving out what `skip` says)
/// returns: no path, and the first error its walk meets (an associative list's item without
/// its key, duplicate keys), found in the same order.
fn check_items(
    value: &Value,
    ty: Ty<'_>,
    skip: Skip,
    depth: usize,
    credit: &mut Credit,
) -> Result<(), TypeError> {
    watchkeeper_core::stack::deep(depth, || check_items_level(value, ty, skip, depth, credit))
}

/// [`check_items`] of one level.
fn check_items_level(
    value: &Value,
    ty: Ty<'_>,
    skip: Skip,
    depth: usize,
    credit: &mut Credit,
) -> Result<(), TypeError> {
    credit.earn();
    // Only a list's items can fail.
    if has_array_within(value, skip, depth, credit) == Some(false)
        || ty.is_leaf_kind(Some(value))
        || is_empty_container(Some(value), skip)
    {
        return Ok(());
    }
    if ty.is_list() {
        let (list_type, items_ty) = ty.list_item();
        let items = value.as_array().map_or(&[][..], Vec::as_slice);
        for (_, item) in keyed_items(list_type, items_ty, items)? {
            check_items(item, items_ty, Skip::Nothing, depth + 1, credit)?;
        }
        return Ok(());
    }
    let Value::Object(map) = value else {
        return Ok(());
    };
    for (key, child) in map {
        if skip == Skip::ManagedFields && key == MANAGED_FIELDS {
            continue;
        }
        let child_skip = match skip {
            Skip::InMetadata if key == "metadata" => Skip::ManagedFields,
            _ => Skip::Nothing,
        };
        check_items(child, ty.entry(key).0, child_skip, depth + 1, credit)?;
    }
    Ok(())
}

/// The applied configuration `config` merged into `live` (see the module docs).
///
/// # Errors
/// As [`field_set`].
pub fn merge(live: &Value, config: &Value, ty: Ty<'_>) -> Result<Value, TypeError> {
    walk_merge(Some(live), config, ty)
}

fn walk_merge(lhs: Option<&Value>, rhs: &Value, ty: Ty<'_>) -> Result<Value, TypeError> {
    watchkeeper_core::stack::grow(|| walk_merge_level(lhs, rhs, ty))
}

/// [`walk_merge`] of one level.
fn walk_merge_level(lhs: Option<&Value>, rhs: &Value, ty: Ty<'_>) -> Result<Value, TypeError> {
    let Some(lhs) = lhs else {
        return Ok(rhs.clone());
    };
    if ty.is_leaf_kind(Some(lhs)) || ty.is_leaf_kind(Some(rhs)) {
        return Ok(rhs.clone());
    }
    match (lhs, rhs) {
        (Value::Object(left), Value::Object(right)) if !ty.is_list() => {
            // Only what `right` leaves alone is copied from `left` (a copy of all of `left`
            // whose merged members were then replaced held a copy of every level's subtree at
            // once: quadratic in the depth, 330 MB to apply an object nested 1,000 levels).
            let mut out = Map::new();
            for (key, value) in left {
                if !right.contains_key(key) {
                    out.insert(key.clone(), value.clone());
                }
            }
            for (key, value) in right {
                let (child_ty, _) = ty.entry(key);
                let merged = walk_merge(left.get(key), value, child_ty)?;
                out.insert(key.clone(), merged);
            }
            Ok(Value::Object(out))
        }
        (Value::Array(left), Value::Array(right)) if ty.is_list() => {
            let (list_type, items_ty) = ty.list_item();
            let left = keyed_items(list_type, items_ty, left)?;
            let right = keyed_items(list_type, items_ty, right)?;
            let right_index: BTreeMap<&PathElement, usize> =
                right.iter().enumerate().map(|(i, (e, _))| (e, i)).collect();
            let left_map: BTreeMap<&PathElement, &Value> =
                left.iter().map(|(e, v)| (e, *v)).collect();
            let mut out = Vec::with_capacity(left.len() + right.len());
            let mut next_right = 0;
            let mut emit_right = |upto: usize, out: &mut Vec<Value>| -> Result<(), TypeError> {
                while next_right <= upto && next_right < right.len() {
                    let (element, item) = &right[next_right];
                    out.push(walk_merge(left_map.get(element).copied(), item, items_ty)?);
                    next_right += 1;
                }
                Ok(())
            };
            for (element, item) in &left {
                match right_index.get(element) {
                    Some(index) => emit_right(*index, &mut out)?,
                    None => out.push((*item).clone()),
                }
            }
            emit_right(right.len(), &mut out)?;
            Ok(Value::Array(out))
        }
        _ => Ok(rhs.clone()),
    }
}

/// `value` without the member paths of `set`.
pub fn remove_items(value: &mut Value, set: &Set, ty: Ty<'_>) {
    if ty.is_list() {
        let (list_type, items_ty) = ty.list_item();
        if matches!(list_type, ListType::Atomic) {
            return;
        }
        if let Value::Array(items) = value {
            items.retain(|item| {
                !item_element(list_type, items_ty, item)
                    .is_ok_and(|element| set.has_member(&element))
            });
            for item in items.iter_mut() {
                if let Ok(element) = item_element(list_type, items_ty, item)
                    && let Some(child) = set.child(&element)
                {
                    watchkeeper_core::stack::grow(|| remove_items(item, child, items_ty));
                }
            }
        }
        return;
    }
    if let Value::Object(map) = value {
        map.retain(|key, _| !set.has_member(&PathElement::Field(key.clone())));
        for (key, child_value) in map.iter_mut() {
            if let Some(child) = set.child(&PathElement::Field(key.clone())) {
                let (child_ty, _) = ty.entry(key);
                watchkeeper_core::stack::grow(|| remove_items(child_value, child, child_ty));
            }
        }
    }
}

/// `set` with every named struct field that has paths below it made a member too
/// (structured-merge-diff's `EnsureNamedFieldsAreMembers`), so pruning can remove a struct
/// field nobody owns anything in.
#[must_use]
pub fn with_named_fields_as_members(set: &Set, ty: Ty<'_>) -> Set {
    // Built level by level (a copy of `set` whose children were then replaced held a copy of
    // every level's subtree at once, quadratic in the depth).
    let mut out = Set::new();
    for member in set.members() {
        out.insert_member(member.clone());
    }
    for (element, child) in set.children() {
        let child_ty = match &element {
            PathElement::Field(name) => {
                let (child_ty, named) = ty.entry(name);
                if named {
                    out.insert_member(element.clone());
                }
                child_ty
            }
            _ => ty.list_item().1,
        };
        out.set_child(
            element.clone(),
            watchkeeper_core::stack::grow(|| with_named_fields_as_members(child, child_ty)),
        );
    }
    out
}

impl<'a> Ty<'a> {
    /// The type of field or map entry `key` (deduced where the schema does not declare it),
    /// for strategic merge patch's walk.
    #[must_use]
    pub(crate) fn child(self, key: &str) -> Ty<'a> {
        self.entry(key).0
    }

    /// The type of a list's items, or this type itself when it is not a list: what strategic
    /// merge patch merges a list value's items as (apimachinery's
    /// `LookupPatchMetadataForSlice`, which takes a field of a struct type holding a list as a
    /// list of that struct).
    #[must_use]
    pub(crate) fn items_or_self(self) -> Ty<'a> {
        match self.kind() {
            Kind::List(_, items) => items,
            _ => self,
        }
    }

    /// The `default` the schema declares for field `field` of values of this type (a struct,
    /// possibly by reference), which structured-merge-diff uses for an associative list
    /// item's missing key.
    #[must_use]
    fn field_default(self, field: &str) -> Option<&'a Value> {
        let mut node = self.node?;
        if let Some(reference) = node.get("$ref").and_then(Value::as_str) {
            let full = reference.rsplit('/').next().unwrap_or(reference);
            node = self.definitions?.get(full)?;
        }
        node.get("properties")?.get(field)?.get("default")
    }

    /// The node's `x-kubernetes-patch-strategy` and `x-kubernetes-patch-merge-key` (on the
    /// field that names the value, as Kubernetes' OpenAPI documents carry them).
    #[must_use]
    pub(crate) fn patch_markers(self) -> (Option<&'a str>, Option<&'a str>) {
        let text = |key: &str| self.node.and_then(|n| n.get(key)).and_then(Value::as_str);
        (
            text("x-kubernetes-patch-strategy"),
            text("x-kubernetes-patch-merge-key"),
        )
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    thread_local! {
        /// Nodes the comparison's shortcuts visited on this thread ([`Credit::spend`]).
        pub(super) static SHORTCUT_NODES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    /// `{"a": {"a": ... leaf}}`, `levels` maps deep.
    fn chain(levels: usize, leaf: Value) -> Value {
        // Moved in, level by level (`json!` would copy the value below at every level).
        (0..levels).fold(leaf, |below, _| {
            Value::Object(Map::from_iter([("a".to_owned(), below)]))
        })
    }

    /// The nodes the shortcuts of `compare(old, new)` visit, and its answer.
    fn shortcut_nodes(old: &Value, new: &Value) -> (usize, Comparison) {
        SHORTCUT_NODES.with(|nodes| nodes.set(0));
        let comparison = compare(old, new, Ty::deduced()).unwrap();
        (SHORTCUT_NODES.with(std::cell::Cell::get), comparison)
    }

    /// Goal: comparing two objects nested `d` levels costs work linear in `d`, not `d²`: the
    /// shortcuts (are two subtrees equal, does one hold a list) asked at every level of a
    /// chain whose bottom differs, or of equal chains holding a list at their bottom, visit
    /// about as many nodes more for twice the depth (before they spent credit, each level
    /// walked its whole subtree again: four times as many). The comparisons are still right.
    #[test]
    fn comparing_deep_objects_takes_work_linear_in_their_depth() {
        // On a server thread's stack: serde_json's own walks (the drop) recurse per level.
        stacker::grow(watchkeeper_core::stack::THREAD_STACK, || {
            for (old_leaf, new_leaf) in [(json!(1), json!(2)), (json!([1]), json!([1]))] {
                let mut nodes = Vec::new();
                for levels in [5_000, 10_000] {
                    let old = chain(levels, old_leaf.clone());
                    let new = chain(levels, new_leaf.clone());
                    let (visited, comparison) = shortcut_nodes(&old, &new);
                    let path: Vec<PathElement> = (0..levels)
                        .map(|_| PathElement::Field("a".to_owned()))
                        .collect();
                    assert_eq!(comparison.modified.contains(&path), old_leaf != new_leaf);
                    assert!(comparison.added.is_empty() && comparison.removed.is_empty());
                    nodes.push(visited);
                    watchkeeper_core::stack::grow(|| drop((old, new, comparison)));
                }
                assert!(
                    nodes[1] < 3 * nodes[0],
                    "{old_leaf} -> {new_leaf}: {nodes:?} nodes for 5,000 and 10,000 levels"
                );
            }
        });
    }

    /// Goal: a node of the built-in definitions whose kind was worked out once reads exactly as
    /// working it out again does: for every definition and every property, item and map value
    /// inside one, the kind over the definitions (kept) and over a copy of them (nothing kept)
    /// is the same variant with the same properties, list type and element node.
    #[test]
    fn classified_kinds_read_as_working_them_out_again() {
        fn describe(kind: Kind<'_>) -> String {
            match kind {
                Kind::Scalar => "scalar".to_owned(),
                Kind::Atomic => "atomic".to_owned(),
                Kind::Deduced => "deduced".to_owned(),
                Kind::Struct(properties) => format!("struct {:?}", properties.keys()),
                Kind::Map(values) => format!("map of {:?}", values.node),
                Kind::List(list_type, items) => format!("list {list_type:?} of {:?}", items.node),
            }
        }
        let kept = crate::schema::definitions();
        let copy = kept.clone();
        let ty = |definitions, node| Ty {
            definitions: Some(definitions),
            node: Some(node),
            custom_root: false,
        };
        let mut seen = 0;
        crate::schema::each_definition_node_with_twin(&copy, |node, twin| {
            assert_eq!(
                describe(ty(kept, node).kind()),
                describe(ty(&copy, twin).kind()),
                "{node}"
            );
            seen += 1;
        });
        assert!(seen > 2_000, "{seen} nodes");
        assert!(classified().len() >= kept.len(), "{}", classified().len());
        assert!(
            copy.values()
                .all(|node| !classified().contains_key(&crate::schema::address(node)))
        );
    }

    /// The walk before equal subtrees were skipped: every node of both values visited.
    fn reference_walk(
        lhs: Option<&Value>,
        rhs: Option<&Value>,
        ty: Ty<'_>,
        skip: Skip,
        path: &mut Vec<PathElement>,
        out: &mut Comparison,
    ) -> Result<(), TypeError> {
        let leaf = ty.is_leaf_kind(lhs)
            || ty.is_leaf_kind(rhs)
            || (is_empty_container(lhs, skip) && is_empty_container(rhs, skip))
            || matches!(
                (lhs, rhs),
                (Some(Value::Object(_)), Some(Value::Array(_)))
                    | (Some(Value::Array(_)), Some(Value::Object(_)))
            );
        if leaf {
            match (lhs, rhs) {
                (None, Some(_)) => out.added.insert(path),
                (Some(_), None) => out.removed.insert(path),
                (Some(a), Some(b)) if !equal(a, b, skip) => out.modified.insert(path),
                _ => {}
            }
            return Ok(());
        }
        match (lhs, rhs) {
            (None, Some(_)) => out.added.insert(path),
            (Some(_), None) => out.removed.insert(path),
            _ => {}
        }
        if ty.is_list() {
            let (list_type, items_ty) = ty.list_item();
            let empty = Vec::new();
            let left = keyed_items(
                list_type,
                items_ty,
                lhs.and_then(Value::as_array).unwrap_or(&empty),
            )?;
            let right = keyed_items(
                list_type,
                items_ty,
                rhs.and_then(Value::as_array).unwrap_or(&empty),
            )?;
            let right_map: BTreeMap<&PathElement, &Value> =
                right.iter().map(|(e, v)| (e, *v)).collect();
            let left_map: BTreeMap<&PathElement, &Value> =
                left.iter().map(|(e, v)| (e, *v)).collect();
            for (element, item) in &left {
                path.push(element.clone());
                let other = right_map.get(element).copied();
                reference_walk(Some(item), other, items_ty, Skip::Nothing, path, out)?;
                path.pop();
            }
            for (element, item) in &right {
                if !left_map.contains_key(element) {
                    path.push(element.clone());
                    reference_walk(None, Some(item), items_ty, Skip::Nothing, path, out)?;
                    path.pop();
                }
            }
            return Ok(());
        }
        let empty = Map::new();
        let left = lhs.and_then(Value::as_object).unwrap_or(&empty);
        let right = rhs.and_then(Value::as_object).unwrap_or(&empty);
        let child_skip = |key: &str| match skip {
            Skip::InMetadata if key == "metadata" => Skip::ManagedFields,
            _ => Skip::Nothing,
        };
        let skipped = |key: &str| skip == Skip::ManagedFields && key == MANAGED_FIELDS;
        for (key, value) in left {
            if skipped(key) {
                continue;
            }
            path.push(PathElement::Field(key.clone()));
            let child = (ty.entry(key).0, child_skip(key));
            reference_walk(Some(value), right.get(key), child.0, child.1, path, out)?;
            path.pop();
        }
        for (key, value) in right {
            if !left.contains_key(key) && !skipped(key) {
                path.push(PathElement::Field(key.clone()));
                let child = (ty.entry(key).0, child_skip(key));
                reference_walk(None, Some(value), child.0, child.1, path, out)?;
                path.pop();
            }
        }
        Ok(())
    }

    fn reference(
        old: &Value,
        new: &Value,
        ty: Ty<'_>,
        skip: Skip,
    ) -> Result<Comparison, TypeError> {
        let mut comparison = Comparison::default();
        reference_walk(
            Some(old),
            Some(new),
            ty,
            skip,
            &mut Vec::new(),
            &mut comparison,
        )?;
        Ok(comparison)
    }

    fn pod(containers: Value, extra: Value) -> Value {
        let mut pod = json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": "default", "labels": {"app": "a"},
                         "finalizers": ["x", "y"],
                         "managedFields": [{"manager": "m", "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}]},
            "spec": {"containers": containers, "nodeName": "n1"},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
        });
        if let (Value::Object(pod), Value::Object(extra)) = (&mut pod, extra) {
            for (key, value) in extra {
                pod.insert(key, value);
            }
        }
        pod
    }

    /// Skipping equal subtrees changes nothing a comparison returns: the same paths, and the
    /// same first error (a duplicate or keyless associative list item, in a changed or an
    /// unchanged part), for every pair of these objects, with and without managed fields.
    #[test]
    fn skipping_equal_subtrees_compares_as_walking_everything() {
        let web = json!({"name": "web", "image": "nginx", "ports": [{"containerPort": 80}]});
        let side =
            json!({"name": "side", "image": "busybox", "env": [{"name": "A", "value": "1"}]});
        let objects = vec![
            pod(json!([web.clone(), side.clone()]), json!({})),
            pod(json!([web.clone()]), json!({})),
            pod(json!([side.clone(), web.clone()]), json!({})),
            pod(
                json!([{"name": "web", "image": "nginx:2", "ports": [{"containerPort": 80}]}, side.clone()]),
                json!({}),
            ),
            pod(json!([web.clone(), web.clone()]), json!({})),
            // A label of another key (as many labels): the maps differ by their keys only.
            // With the duplicate containers, an unchanged spec beside a changed label.
            pod(
                json!([web.clone(), side.clone()]),
                json!({"metadata": {"name": "p", "labels": {"tier": "a"}}}),
            ),
            pod(
                json!([web.clone(), web.clone()]),
                json!({"metadata": {"name": "p", "labels": {"tier": "a"}}}),
            ),
            pod(json!([web.clone(), {"image": "no-name"}]), json!({})),
            pod(
                json!([web.clone(), side.clone()]),
                json!({"metadata": {"name": "p", "finalizers": ["x", "x"]}}),
            ),
            pod(
                json!([web.clone(), side.clone()]),
                json!({"status": {"conditions": [{"type": "Ready"}, {"type": "Ready"}]}}),
            ),
            pod(
                json!([web.clone(), side.clone()]),
                json!({"metadata": {"name": "p", "labels": {"app": "b"}, "managedFields": []}}),
            ),
            pod(
                json!([{"name": "web", "image": "nginx", "ports": [{"containerPort": 80}, {"containerPort": 80}]}]),
                json!({}),
            ),
            pod(json!(null), json!({})),
            pod(json!({}), json!({})),
            json!({}),
            json!({"metadata": null, "spec": {"containers": []}}),
        ];
        let def = crate::resources::builtin_resources()
            .into_iter()
            .find(|d| d.kind == "Pod")
            .unwrap();
        let ty = super::super::schema_root(&def, None);
        let (mut errors, mut changes) = (0, 0);
        for old in &objects {
            for new in &objects {
                for skip in [Skip::Nothing, Skip::InMetadata] {
                    let fast = compare_from(old, new, ty, skip);
                    let slow = reference(old, new, ty, skip);
                    assert_eq!(fast, slow, "{old} -> {new}");
                    match slow {
                        Err(_) => errors += 1,
                        Ok(c) if c != Comparison::default() => changes += 1,
                        Ok(_) => {}
                    }
                }
            }
        }
        assert!(
            errors > 0 && changes > 0,
            "{errors} errors, {changes} changes"
        );
    }
}

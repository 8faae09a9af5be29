//! Objects walked with their schema, as structured-merge-diff walks typed values: the field
//! set of a value, the comparison of two values, the merge of an applied configuration into
//! the live object, and the removal of a set of paths.
//!
//! ## Schema
//! A node's type comes from the kind's published schema (the k8s-openapi definitions the
//! write validation uses): a struct (`properties`), a map (`additionalProperties`), a list
//! (`items`) or a scalar. Those definitions do not carry Kubernetes' list and map markers, so
//! [`LIST_TYPES`], [`ATOMIC_STRUCTS`] and [`ATOMIC_MAPS`] restate the `+listType`,
//! `+listMapKey`, `+structType=atomic` and `+mapType=atomic` markers of Kubernetes v1.33 for
//! the types of the served kinds. A list not in the table is atomic. Kinds without a schema
//! (custom resources) and fields a schema does not declare are *deduced*, as
//! structured-merge-diff's deduced schema: objects are maps whose every key is a member,
//! lists are atomic.
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

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::fieldpath::{PathElement, Set};

/// How a list's items are identified.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListType {
    /// Replaced whole.
    Atomic,
    /// Scalar items identified by value.
    Set,
    /// Object items identified by these key fields.
    Map(&'static [&'static str]),
}

/// `(struct, field) → list type` for the lists of the served built-in kinds that are not
/// atomic (Kubernetes v1.33's `+listType` / `+listMapKey` markers).
pub const LIST_TYPES: &[(&str, &str, ListType)] = &[
    ("ObjectMeta", "finalizers", ListType::Set),
    ("ObjectMeta", "ownerReferences", ListType::Map(&["uid"])),
    ("PodSpec", "containers", ListType::Map(&["name"])),
    ("PodSpec", "initContainers", ListType::Map(&["name"])),
    ("PodSpec", "ephemeralContainers", ListType::Map(&["name"])),
    ("PodSpec", "volumes", ListType::Map(&["name"])),
    ("PodSpec", "imagePullSecrets", ListType::Map(&["name"])),
    ("PodSpec", "hostAliases", ListType::Map(&["ip"])),
    (
        "PodSpec",
        "topologySpreadConstraints",
        ListType::Map(&["topologyKey", "whenUnsatisfiable"]),
    ),
    ("PodSpec", "schedulingGates", ListType::Map(&["name"])),
    ("PodSpec", "resourceClaims", ListType::Map(&["name"])),
    (
        "Container",
        "ports",
        ListType::Map(&["containerPort", "protocol"]),
    ),
    ("Container", "env", ListType::Map(&["name"])),
    ("Container", "volumeMounts", ListType::Map(&["mountPath"])),
    ("Container", "volumeDevices", ListType::Map(&["devicePath"])),
    (
        "EphemeralContainer",
        "ports",
        ListType::Map(&["containerPort", "protocol"]),
    ),
    ("EphemeralContainer", "env", ListType::Map(&["name"])),
    (
        "EphemeralContainer",
        "volumeMounts",
        ListType::Map(&["mountPath"]),
    ),
    (
        "EphemeralContainer",
        "volumeDevices",
        ListType::Map(&["devicePath"]),
    ),
    ("ResourceRequirements", "claims", ListType::Map(&["name"])),
    ("PodStatus", "conditions", ListType::Map(&["type"])),
    ("PodStatus", "podIPs", ListType::Map(&["ip"])),
    ("PodStatus", "hostIPs", ListType::Map(&["ip"])),
    ("ServiceSpec", "ports", ListType::Map(&["port", "protocol"])),
    ("ServiceStatus", "conditions", ListType::Map(&["type"])),
    ("ServiceAccount", "secrets", ListType::Map(&["name"])),
    ("DeploymentStatus", "conditions", ListType::Map(&["type"])),
    ("ReplicaSetStatus", "conditions", ListType::Map(&["type"])),
    ("StatefulSetStatus", "conditions", ListType::Map(&["type"])),
    ("DaemonSetStatus", "conditions", ListType::Map(&["type"])),
    ("NamespaceStatus", "conditions", ListType::Map(&["type"])),
    ("NodeSpec", "podCIDRs", ListType::Set),
    ("NodeStatus", "addresses", ListType::Map(&["type"])),
    ("NodeStatus", "conditions", ListType::Map(&["type"])),
    ("Endpoint", "addresses", ListType::Set),
];

/// Structs that are atomic (`+structType=atomic`): owned and replaced whole.
pub const ATOMIC_STRUCTS: &[&str] = &[
    "LabelSelector",
    "NodeSelector",
    "NodeSelectorTerm",
    "TopologySelectorTerm",
    "LocalObjectReference",
    "ObjectReference",
    "TypedLocalObjectReference",
    "ConfigMapKeySelector",
    "SecretKeySelector",
    "ObjectFieldSelector",
    "ResourceFieldSelector",
];

/// Maps that are atomic (`+mapType=atomic`), by `(struct, field)`.
pub const ATOMIC_MAPS: &[(&str, &str)] =
    &[("ServiceSpec", "selector"), ("PodSpec", "nodeSelector")];

/// Defaults of list-map key fields an item may leave out (`protocol` of ports).
fn key_default(field: &str) -> Option<Value> {
    (field == "protocol").then(|| Value::String("TCP".to_owned()))
}

/// A schema position: the schema node (none when deduced) and, for table look-ups, the
/// struct and field it belongs to.
#[derive(Clone, Copy, Debug)]
pub struct Ty<'a> {
    definitions: Option<&'a Map<String, Value>>,
    node: Option<&'a Value>,
    owner: &'a str,
    field: &'a str,
}

/// What a node is.
#[derive(Clone, Copy, Debug)]
enum Kind<'a> {
    Scalar,
    /// An atomic struct or map: one leaf.
    Atomic,
    Struct(&'a Map<String, Value>, &'a str),
    Map(Ty<'a>),
    List(ListType, Ty<'a>),
    /// Deduced: maps of deduced values, atomic lists, scalars.
    Deduced,
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
            owner: short_name(root),
            field: "",
        }
    }

    /// A deduced root (no schema).
    #[must_use]
    pub fn deduced() -> Ty<'a> {
        Ty {
            definitions: None,
            node: None,
            owner: "",
            field: "",
        }
    }

    fn kind(self) -> Kind<'a> {
        let (Some(definitions), Some(mut node)) = (self.definitions, self.node) else {
            return Kind::Deduced;
        };
        let mut name = self.owner;
        let mut referenced = false;
        if let Some(reference) = node.get("$ref").and_then(Value::as_str) {
            let full = reference.rsplit('/').next().unwrap_or(reference);
            name = short_name(full);
            referenced = true;
            match name {
                "Quantity" | "IntOrString" | "Time" | "MicroTime" => return Kind::Scalar,
                "FieldsV1" | "RawExtension" | "JSON" => return Kind::Deduced,
                _ if ATOMIC_STRUCTS.contains(&name) => return Kind::Atomic,
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
        let properties = node.get("properties").and_then(Value::as_object);
        match node.get("type").and_then(Value::as_str) {
            Some("array") => {
                let list_type = LIST_TYPES
                    .iter()
                    .find(|(owner, field, _)| *owner == self.owner && *field == self.field)
                    .map_or(ListType::Atomic, |(_, _, t)| *t);
                Kind::List(
                    list_type,
                    Ty {
                        node: node.get("items"),
                        ..self
                    },
                )
            }
            Some("object") | None => {
                if let Some(properties) = properties {
                    let owner = if referenced { name } else { self.owner };
                    Kind::Struct(properties, owner)
                } else if let Some(items) =
                    node.get("additionalProperties").filter(|v| v.is_object())
                {
                    if ATOMIC_MAPS.contains(&(self.owner, self.field)) {
                        Kind::Atomic
                    } else {
                        Kind::Map(Ty {
                            node: Some(items),
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
            Kind::Struct(properties, owner) => match properties.get_key_value(key) {
                Some((name, node)) => (
                    Ty {
                        node: Some(node),
                        owner,
                        field: name.as_str(),
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

    fn list_item(self) -> (ListType, Ty<'a>) {
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
fn item_element(list_type: ListType, item: &Value) -> Result<PathElement, TypeError> {
    match list_type {
        ListType::Set => Ok(PathElement::value(item)),
        ListType::Map(keys) => {
            let Value::Object(fields) = item else {
                return Err("an associative list item must be an object".to_owned());
            };
            let mut key = Map::new();
            for field in keys {
                match fields
                    .get(*field)
                    .filter(|v| !v.is_null())
                    .cloned()
                    .or_else(|| key_default(field))
                {
                    Some(value) => {
                        key.insert((*field).to_owned(), value);
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
fn keyed_items(
    list_type: ListType,
    items: &[Value],
) -> Result<Vec<(PathElement, &Value)>, TypeError> {
    let mut out = Vec::with_capacity(items.len());
    let mut seen = std::collections::BTreeSet::new();
    for item in items {
        let element = item_element(list_type, item)?;
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
    walk_set(value, ty, &mut Vec::new(), &mut set)?;
    Ok(set)
}

fn walk_set(
    value: &Value,
    ty: Ty<'_>,
    path: &mut Vec<PathElement>,
    set: &mut Set,
) -> Result<(), TypeError> {
    match (ty.kind(), value) {
        (Kind::Struct(..) | Kind::Map(_) | Kind::Deduced, Value::Object(map)) => {
            for (key, child) in map {
                let (child_ty, named) = ty.entry(key);
                path.push(PathElement::Field(key.clone()));
                walk_set(child, child_ty, path, set)?;
                let empty = child.is_null() || child.as_object().is_some_and(Map::is_empty);
                if empty || !named {
                    set.insert(path);
                }
                path.pop();
            }
        }
        (
            Kind::List(list_type @ (ListType::Set | ListType::Map(_)), items_ty),
            Value::Array(items),
        ) => {
            for (element, item) in keyed_items(list_type, items)? {
                path.push(element);
                walk_set(item, items_ty, path, set)?;
                set.insert(path);
                path.pop();
            }
        }
        (Kind::Struct(..) | Kind::Map(_) | Kind::List(..), Value::Null) => {}
        _ => set.insert(path),
    }
    Ok(())
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
    let mut comparison = Comparison::default();
    walk_compare(
        Some(old),
        Some(new),
        ty,
        Skip::Nothing,
        &mut Vec::new(),
        &mut comparison,
    )?;
    Ok(comparison)
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
    let mut comparison = Comparison::default();
    walk_compare(
        Some(old),
        Some(new),
        ty,
        Skip::InMetadata,
        &mut Vec::new(),
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

fn walk_compare(
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
        let left = keyed_items(list_type, lhs.and_then(Value::as_array).unwrap_or(&empty))?;
        let right = keyed_items(list_type, rhs.and_then(Value::as_array).unwrap_or(&empty))?;
        let right_map: BTreeMap<&PathElement, &Value> =
            right.iter().map(|(e, v)| (e, *v)).collect();
        let left_map: BTreeMap<&PathElement, &Value> = left.iter().map(|(e, v)| (e, *v)).collect();
        for (element, item) in &left {
            path.push(element.clone());
            walk_compare(
                Some(item),
                right_map.get(element).copied(),
                items_ty,
                Skip::Nothing,
                path,
                out,
            )?;
            path.pop();
        }
        for (element, item) in &right {
            if !left_map.contains_key(element) {
                path.push(element.clone());
                walk_compare(None, Some(item), items_ty, Skip::Nothing, path, out)?;
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
        let (child_ty, _) = ty.entry(key);
        path.push(PathElement::Field(key.clone()));
        walk_compare(
            Some(value),
            right.get(key),
            child_ty,
            child_skip(key),
            path,
            out,
        )?;
        path.pop();
    }
    for (key, value) in right {
        if !left.contains_key(key) && !skipped(key) {
            let (child_ty, _) = ty.entry(key);
            path.push(PathElement::Field(key.clone()));
            walk_compare(None, Some(value), child_ty, child_skip(key), path, out)?;
            path.pop();
        }
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
    let Some(lhs) = lhs else {
        return Ok(rhs.clone());
    };
    if ty.is_leaf_kind(Some(lhs)) || ty.is_leaf_kind(Some(rhs)) {
        return Ok(rhs.clone());
    }
    match (lhs, rhs) {
        (Value::Object(left), Value::Object(right)) if !ty.is_list() => {
            let mut out = left.clone();
            for (key, value) in right {
                let (child_ty, _) = ty.entry(key);
                let merged = walk_merge(left.get(key), value, child_ty)?;
                out.insert(key.clone(), merged);
            }
            Ok(Value::Object(out))
        }
        (Value::Array(left), Value::Array(right)) if ty.is_list() => {
            let (list_type, items_ty) = ty.list_item();
            let left = keyed_items(list_type, left)?;
            let right = keyed_items(list_type, right)?;
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
                !item_element(list_type, item).is_ok_and(|element| set.has_member(&element))
            });
            for item in items.iter_mut() {
                if let Ok(element) = item_element(list_type, item)
                    && let Some(child) = set.child(&element)
                {
                    remove_items(item, child, items_ty);
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
                remove_items(child_value, child, child_ty);
            }
        }
    }
}

/// `set` with every named struct field that has paths below it made a member too
/// (structured-merge-diff's `EnsureNamedFieldsAreMembers`), so pruning can remove a struct
/// field nobody owns anything in.
#[must_use]
pub fn with_named_fields_as_members(set: &Set, ty: Ty<'_>) -> Set {
    let mut out = set.clone();
    let elements: Vec<PathElement> = set.child_elements().cloned().collect();
    for element in elements {
        let Some(child) = set.child(&element) else {
            continue;
        };
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
            with_named_fields_as_members(child, child_ty),
        );
    }
    out
}

//! A custom resource's JSON as the values its rules see (`self`, `oldSelf`, a policy's
//! `object`), converted once per object and shared between the nodes.
//!
//! **What it guarantees.** Every map and list is converted into a [`Shared`] value: the
//! `cel` crate's own map or list behind an `Arc`, which answers every operator, function and
//! downcast as that map or list does (it lends them), so a rule cannot tell the difference;
//! copying it (binding it to a variable, a comprehension's range, an optional) copies a
//! pointer, and moving its entries out (what the interpreter does with a value nothing else
//! holds) copies only its own entries, each of which is a scalar or a pointer again.
//! [`Conversions`] keeps the value of each node with rules as it converts the nodes above it:
//! the node's `self` is its entry in its parent's value, so an object's rules convert each of
//! its bytes at most once, however deep its nodes with rules nest (before, each node converted
//! its whole subtree again: `d²` work for rules at each of `d` nested levels).
//!
//! **Bounds.** A conversion builds at most one CEL value per JSON value of the object (the
//! caller charges it, 2 units per byte, before it converts, see the parent module's "Bounded
//! work"); what is kept is a pointer per node with rules.
//!
//! **How it differs from kube.** kube-apiserver does not convert: its `UnstructuredToVal`
//! (`apiserver/pkg/cel/common/values.go`) wraps the unstructured value and converts a field
//! when a rule selects it, and cel-go charges the selection, not the field's size. Here a
//! node's value is converted whole the first time a rule needs it, as the `cel` crate has no
//! lazy values; the work is the same order as the object's size, which the request bounds.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use cel::ExecutionError;
use cel::common::traits::{
    Adder, Comparer, Container, Divider, Indexer, Iterable, Modder, Multiplier, Negator, Sizer,
    Subtractor, Zeroer,
};
use cel::common::types::{CelList, CelMap, CelMapKey, CelOptional, Type};
use cel::common::value::{Builtin, BuiltinRef, CowVal, Val};
use serde_json::{Map, Value};

use super::{escape, lendable, typed_string};
use crate::schema_node::flag;

/// A converted map or list, shared: see the module's guarantees.
#[derive(Debug, Clone)]
pub(crate) enum Shared {
    Map(Arc<CelMap<'static>>),
    List(Arc<CelList<'static>>),
}

impl Shared {
    fn inner(&self) -> &(dyn Val + 'static) {
        match self {
            Shared::Map(map) => map.as_ref(),
            Shared::List(list) => list.as_ref(),
        }
    }
}

impl Val for Shared {
    fn get_type(&self) -> &Type {
        self.inner().get_type()
    }

    fn cel_type() -> &'static Type
    where
        Self: Sized,
    {
        // Its values are maps or lists: no single type (and never asked, as no overload
        // names this Rust type).
        &cel::common::types::DYN_TYPE
    }

    fn as_adder<'b, 'v>(&'b self) -> Option<&'b (dyn Adder + 'v)>
    where
        Self: 'v,
    {
        self.inner().as_adder()
    }

    fn as_comparer(&self) -> Option<&dyn Comparer> {
        self.inner().as_comparer()
    }

    fn as_container(&self) -> Option<&dyn Container> {
        self.inner().as_container()
    }

    fn as_divider<'b, 'v>(&'b self) -> Option<&'b (dyn Divider + 'v)>
    where
        Self: 'v,
    {
        self.inner().as_divider()
    }

    fn as_indexer<'b, 'v>(&'b self) -> Option<&'b (dyn Indexer + 'v)>
    where
        Self: 'v,
    {
        self.inner().as_indexer()
    }

    fn into_indexer<'v>(self: Box<Self>) -> Option<Box<dyn Indexer + 'v>>
    where
        Self: 'v,
    {
        // Both maps and lists index.
        Some(self)
    }

    fn as_iterable<'b, 'v>(&'b self) -> Option<&'b (dyn Iterable + 'v)>
    where
        Self: 'v,
    {
        self.inner().as_iterable()
    }

    fn as_modder<'b, 'v>(&'b self) -> Option<&'b (dyn Modder + 'v)>
    where
        Self: 'v,
    {
        self.inner().as_modder()
    }

    fn as_multiplier<'b, 'v>(&'b self) -> Option<&'b (dyn Multiplier + 'v)>
    where
        Self: 'v,
    {
        self.inner().as_multiplier()
    }

    fn as_negator<'b, 'v>(&'b self) -> Option<&'b (dyn Negator + 'v)>
    where
        Self: 'v,
    {
        self.inner().as_negator()
    }

    fn as_sizer(&self) -> Option<&dyn Sizer> {
        self.inner().as_sizer()
    }

    fn as_subtractor<'b, 'v>(&'b self) -> Option<&'b (dyn Subtractor + 'v)>
    where
        Self: 'v,
    {
        self.inner().as_subtractor()
    }

    fn as_zeroer(&self) -> Option<&dyn Zeroer> {
        self.inner().as_zeroer()
    }

    fn equals(&self, other: &dyn Val) -> bool {
        self.inner().equals(other)
    }

    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v>
    where
        Self: 'v,
    {
        Box::new(self.clone())
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        self.inner().as_any()
    }

    fn as_builtin<'b, 'v>(&'b self) -> BuiltinRef<'b, 'v>
    where
        Self: 'v,
    {
        match self {
            Shared::Map(map) => BuiltinRef::Map(map),
            Shared::List(list) => BuiltinRef::List(list),
        }
    }

    fn into_builtin<'v>(self: Box<Self>) -> Option<Builtin<'v>>
    where
        Self: 'v,
    {
        // The entries, each a scalar or a shared value: the node's own entries are copied.
        Some(match *self {
            Shared::Map(map) => Builtin::Map(Arc::unwrap_or_clone(map)),
            Shared::List(list) => Builtin::List(Arc::unwrap_or_clone(list)),
        })
    }
}

impl Indexer for Shared {
    fn get<'b, 'v>(&'b self, index: &dyn Val) -> Result<CowVal<'b, 'v>, ExecutionError>
    where
        Self: 'v,
    {
        match self {
            Shared::Map(map) => map.as_ref().get(index),
            Shared::List(list) => list.as_ref().get(index),
        }
    }

    fn steal<'v>(self: Box<Self>, index: &dyn Val) -> Result<Box<dyn Val + 'v>, ExecutionError>
    where
        Self: 'v,
    {
        self.get(index).map(CowVal::into_owned)
    }
}

/// A node with rules: its value and schema (pointers into the object and the schema, which
/// outlive the walk).
type NodeKey = (*const Value, *const Map<String, Value>);

fn node_key(schema: Option<&Map<String, Value>>, value: &Value) -> NodeKey {
    (
        std::ptr::from_ref(value),
        schema.map_or(std::ptr::null(), std::ptr::from_ref),
    )
}

/// One object's converted values: see the module's guarantees.
#[derive(Default)]
pub(crate) struct Conversions {
    /// The nodes with rules.
    wanted: HashSet<NodeKey>,
    /// Their values, once converted (with a node above them, or for their own rules).
    kept: HashMap<NodeKey, Box<dyn Val>>,
}

impl Conversions {
    /// Marks a node with rules: its value is kept when converted.
    pub(crate) fn want(&mut self, schema: &Map<String, Value>, value: &Value) {
        self.wanted.insert(node_key(Some(schema), value));
    }

    /// Whether the node's value is converted already (with a node above it).
    pub(crate) fn has(&self, schema: &Map<String, Value>, value: &Value) -> bool {
        self.kept.contains_key(&node_key(Some(schema), value))
    }

    /// The value of a node with rules, for its own rules: as converted with a node above it,
    /// else converted now (keeping the nodes with rules below it, not itself: no node above
    /// it asks after it).
    pub(crate) fn node(
        &mut self,
        schema: &Map<String, Value>,
        value: &Value,
        resource: bool,
    ) -> Box<dyn Val> {
        match self.kept.get(&node_key(Some(schema), value)) {
            Some(kept) => kept.clone(),
            None => self.convert_new(Some(schema), value, resource),
        }
    }

    /// `value` as CEL sees it under `schema` (see the parent module's guarantees); `resource`
    /// at the root and in embedded resources.
    pub(crate) fn convert(
        &mut self,
        schema: Option<&Map<String, Value>>,
        value: &Value,
        resource: bool,
    ) -> Box<dyn Val> {
        let key = node_key(schema, value);
        if let Some(kept) = self.kept.get(&key) {
            return kept.clone();
        }
        let converted = self.convert_new(schema, value, resource);
        if self.wanted.contains(&key) {
            self.kept.insert(key, converted.clone());
        }
        converted
    }

    fn convert_new(
        &mut self,
        schema: Option<&Map<String, Value>>,
        value: &Value,
        resource: bool,
    ) -> Box<dyn Val> {
        let kind = schema.and_then(|s| s.get("type")).and_then(Value::as_str);
        let scalar = match value {
            Value::Null => cel::Value::Null,
            Value::Bool(b) => cel::Value::Bool(*b),
            Value::Number(n) => match (kind, n.as_i64()) {
                (Some("number"), _) => cel::Value::Float(n.as_f64().unwrap_or_default()),
                (_, Some(i)) => cel::Value::Int(i),
                (Some("integer"), None) => cel::Value::Int(n.as_f64().unwrap_or_default() as i64),
                _ => cel::Value::Float(n.as_f64().unwrap_or_default()),
            },
            Value::String(s) => {
                let format = schema.and_then(|s| s.get("format")).and_then(Value::as_str);
                typed_string(format, s).unwrap_or_else(|| cel::Value::String(Arc::new(s.clone())))
            }
            Value::Array(items) => {
                let item_schema = schema
                    .and_then(|s| s.get("items"))
                    .and_then(Value::as_object);
                let resource =
                    item_schema.is_some_and(|s| flag(s, "x-kubernetes-embedded-resource"));
                let items: Vec<Box<dyn Val>> = items
                    .iter()
                    .map(|i| self.convert(item_schema, i, resource))
                    .collect();
                return Box::new(Shared::List(Arc::new(CelList::from(items))));
            }
            Value::Object(fields) => return self.convert_object(schema, fields, resource),
        };
        lendable(scalar)
    }

    fn convert_object(
        &mut self,
        schema: Option<&Map<String, Value>>,
        fields: &Map<String, Value>,
        resource: bool,
    ) -> Box<dyn Val> {
        let properties = schema
            .and_then(|s| s.get("properties"))
            .and_then(Value::as_object);
        let additional = schema
            .and_then(|s| s.get("additionalProperties"))
            .and_then(Value::as_object);
        let mut map: HashMap<CelMapKey<'static>, Box<dyn Val>> =
            HashMap::with_capacity(fields.len());
        for (key, field) in fields {
            if resource && matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
                let kept = if key == "metadata" {
                    let mut meta: HashMap<CelMapKey<'static>, Box<dyn Val>> = HashMap::new();
                    for name in ["name", "generateName"] {
                        if let Some(Value::String(s)) = field.get(name) {
                            meta.insert(
                                CelMapKey::from(name.to_owned()),
                                lendable(cel::Value::String(Arc::new(s.clone()))),
                            );
                        }
                    }
                    Box::new(Shared::Map(Arc::new(CelMap::from(meta))))
                } else {
                    self.convert(None, field, false)
                };
                map.insert(CelMapKey::from(key.clone()), kept);
                continue;
            }
            let (name, sub) = match (properties, additional) {
                (Some(properties), _) => {
                    let Some(sub) = properties.get(key).and_then(Value::as_object) else {
                        continue;
                    };
                    let Some(name) = escape(key) else { continue };
                    (name, Some(sub))
                }
                (None, Some(sub)) => (key.clone(), Some(sub)),
                (None, None) => (key.clone(), None),
            };
            let embedded = sub.is_some_and(|s| flag(s, "x-kubernetes-embedded-resource"));
            map.insert(CelMapKey::from(name), self.convert(sub, field, embedded));
        }
        Box::new(Shared::Map(Arc::new(CelMap::from(map))))
    }
}

/// `value` as CEL sees it under `schema`, converted on its own (a policy's variables).
pub(crate) fn to_val(
    schema: Option<&Map<String, Value>>,
    value: &Value,
    resource: bool,
) -> Box<dyn Val> {
    Conversions::default().convert(schema, value, resource)
}

/// An old value converted once: as it is, and as the optional `optionalOldSelf` rules see.
pub(crate) struct Bound {
    pub(crate) plain: Option<Box<dyn Val>>,
    pub(crate) optional: Box<dyn Val>,
}

impl Bound {
    pub(crate) fn new(old: Option<Box<dyn Val>>) -> Bound {
        let optional = match &old {
            Some(old) => CelOptional::of(old.clone()),
            None => CelOptional::none(),
        };
        Bound {
            plain: old,
            optional: Box::new(optional),
        }
    }
}

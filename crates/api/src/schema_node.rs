//! Reading a schema node: its boolean keywords and extensions, and how an update's values
//! correlate with the old object's (kube's ratcheting), shared by the schema checks
//! ([`crate::structural`]) and the CEL rules ([`crate::cel_rules`]).

use std::collections::HashMap;

use serde_json::{Map, Value};

use crate::field::json_equal;

/// Whether a schema keyword or extension is `true` (`nullable`, `x-kubernetes-…`).
pub(crate) fn flag(schema: &Map<String, Value>, key: &str) -> bool {
    schema.get(key).and_then(Value::as_bool) == Some(true)
}

/// Whether `value` equals `old` as kube's ratcheting tells (`CachedDeepEqual`): through the
/// values it correlates — an object's fields that have a schema, a list's items by index or
/// by map keys — and never for a non-empty `set` or `atomic` list or an object field without
/// a schema (kube has no correlated child there and calls them changed).
pub(crate) fn unchanged(schema: &Map<String, Value>, value: &Value, old: &Value) -> bool {
    compared(schema, value, old, None)
}

/// The answers of [`unchanged_kept`] for one walk, by the schema's, value's and old value's
/// addresses (which outlive the walk).
pub(crate) type Comparisons =
    HashMap<(*const Map<String, Value>, *const Value, *const Value), bool>;

/// [`unchanged`], keeping the answer for each object and list compared in `kept`, as kube
/// caches them (`CachedDeepEqual`): a walk that asks at every node of an object nested `d`
/// levels compares each value once, not `d²/2` times.
pub(crate) fn unchanged_kept(
    schema: &Map<String, Value>,
    value: &Value,
    old: &Value,
    kept: &mut Comparisons,
) -> bool {
    compared(schema, value, old, Some(kept))
}

fn compared(
    schema: &Map<String, Value>,
    value: &Value,
    old: &Value,
    mut kept: Option<&mut Comparisons>,
) -> bool {
    let key = (
        std::ptr::from_ref(schema),
        std::ptr::from_ref(value),
        std::ptr::from_ref(old),
    );
    if let Some(answer) = kept.as_deref().and_then(|kept| kept.get(&key)) {
        return *answer;
    }
    let answer = match (value, old) {
        (Value::Array(items), Value::Array(old_items)) => {
            if items.len() != old_items.len() {
                return false;
            }
            let Some(Value::Object(item_schema)) = schema.get("items") else {
                return items.is_empty();
            };
            let list_type = schema.get("x-kubernetes-list-type").and_then(Value::as_str);
            items.iter().enumerate().all(|(index, item)| {
                let correlated = match list_type {
                    Some("map") => correlated_map_item(schema, old_items, item),
                    Some(_) => None,
                    None => old_items.get(index),
                };
                correlated.is_some_and(|old_item| {
                    compared(item_schema, item, old_item, kept.as_deref_mut())
                })
            })
        }
        (Value::Object(fields), Value::Object(old_fields)) => {
            if fields.len() != old_fields.len() {
                return false;
            }
            let properties = schema.get("properties").and_then(Value::as_object);
            let additional = schema
                .get("additionalProperties")
                .and_then(Value::as_object);
            old_fields.iter().all(|(key, old_field)| {
                let sub = properties
                    .and_then(|p| p.get(key))
                    .and_then(Value::as_object)
                    .or(additional);
                match (sub, fields.get(key)) {
                    (Some(sub), Some(field)) => {
                        compared(sub, field, old_field, kept.as_deref_mut())
                    }
                    _ => false,
                }
            })
        }
        _ => return value == old,
    };
    if let Some(kept) = kept {
        kept.insert(key, answer);
    }
    answer
}

/// The old item of a `map` list with the same keys as `item`.
pub(crate) fn correlated_map_item<'a>(
    schema: &Map<String, Value>,
    old_items: &'a [Value],
    item: &Value,
) -> Option<&'a Value> {
    let keys: Vec<&str> = schema
        .get("x-kubernetes-list-map-keys")
        .and_then(Value::as_array)?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    if keys.is_empty() || !item.is_object() {
        return None;
    }
    old_items.iter().find(|old| {
        old.is_object()
            && keys
                .iter()
                .all(|key| match (item.get(*key), old.get(*key)) {
                    (Some(a), Some(b)) => json_equal(a, b),
                    (None, None) => true,
                    _ => false,
                })
    })
}

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
            let map_items = match list_type {
                Some("map") => MapItems::new(schema, old_items),
                _ => None,
            };
            items.iter().enumerate().all(|(index, item)| {
                let correlated = match list_type {
                    Some("map") => map_items.as_ref().and_then(|m| m.get(item)),
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

/// The old items of a `map` list, found by their keys (kube's `makeMapList`, a map built once
/// per list): each item's correlated old item in one lookup, where a search of the old list
/// for each item took `n²/2` comparisons (an update of a list of 20,000 items under a rule: 4 s
/// of CPU, release build).
pub(crate) struct MapItems<'a> {
    schema: &'a Map<String, Value>,
    old_items: &'a [Value],
    keys: Vec<&'a str>,
    /// The first old item of each key.
    by_key: HashMap<String, &'a Value>,
}

impl<'a> MapItems<'a> {
    /// `None` unless `schema` is a `map` list's with `x-kubernetes-list-map-keys`.
    pub(crate) fn new(schema: &'a Map<String, Value>, old_items: &'a [Value]) -> Option<Self> {
        let keys = map_list_keys(schema)?;
        if keys.is_empty() {
            return None;
        }
        let mut by_key = HashMap::with_capacity(old_items.len());
        for old in old_items.iter().filter(|old| old.is_object()) {
            if let Some(key) = key_text(&keys, old) {
                by_key.entry(key).or_insert(old);
            }
        }
        Some(MapItems {
            schema,
            old_items,
            keys,
            by_key,
        })
    }

    /// The old item with the same keys as `item`.
    pub(crate) fn get(&self, item: &Value) -> Option<&'a Value> {
        if !item.is_object() {
            return None;
        }
        match key_text(&self.keys, item) {
            Some(key) => self.by_key.get(&key).copied(),
            None => correlated_map_item(self.schema, self.old_items, item),
        }
    }
}

/// `item`'s key values as one text, equal for two items exactly when
/// [`correlated_map_item`] pairs them (`json_equal`: numbers by value, objects whatever their
/// keys' order); `None` for a number that is not an `f64`.
fn key_text(keys: &[&str], item: &Value) -> Option<String> {
    let mut text = String::new();
    for key in keys {
        match item.get(*key) {
            None => text.push('-'),
            Some(value) => write_key(value, &mut text)?,
        }
    }
    Some(text)
}

fn write_key(value: &Value, text: &mut String) -> Option<()> {
    let counted = |tag: char, n: usize, text: &mut String| {
        text.push(tag);
        text.push_str(&n.to_string());
        text.push(':');
    };
    match value {
        Value::Null => text.push('z'),
        Value::Bool(b) => text.push(if *b { 't' } else { 'f' }),
        Value::Number(n) => {
            // Equal numbers are equal as `f64`s (`-0.0` is `0.0`).
            let f = n.as_f64()? + 0.0;
            counted('n', 0, text);
            text.push_str(&f.to_bits().to_string());
            text.push(';');
        }
        Value::String(s) => {
            counted('s', s.len(), text);
            text.push_str(s);
        }
        Value::Array(items) => {
            counted('a', items.len(), text);
            for item in items {
                write_key(item, text)?;
            }
        }
        Value::Object(fields) => {
            counted('o', fields.len(), text);
            let mut names: Vec<&String> = fields.keys().collect();
            names.sort();
            for name in names {
                counted('s', name.len(), text);
                text.push_str(name);
                write_key(&fields[name.as_str()], text)?;
            }
        }
    }
    Some(())
}

/// A `map` list's `x-kubernetes-list-map-keys` (the strings among them); `None` when the
/// schema has none.
fn map_list_keys(schema: &Map<String, Value>) -> Option<Vec<&str>> {
    Some(
        schema
            .get("x-kubernetes-list-map-keys")
            .and_then(Value::as_array)?
            .iter()
            .filter_map(Value::as_str)
            .collect(),
    )
}

/// The old item of a `map` list with the same keys as `item`.
pub(crate) fn correlated_map_item<'a>(
    schema: &Map<String, Value>,
    old_items: &'a [Value],
    item: &Value,
) -> Option<&'a Value> {
    let keys = map_list_keys(schema)?;
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn map_items_pair_the_items_a_search_of_the_old_list_pairs() {
        let schema = json!({"x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["a", "b"]});
        let schema = schema.as_object().unwrap();
        let old = json!([
            {"a": 1, "b": "x"},
            {"a": 1.0, "b": "x", "first": false},
            {"a": -0.0, "b": "s1:x"},
            {"a": "1", "b": "x"},
            {"a": {"p": 1, "q": [true, null]}, "b": "x"},
            {"b": "x"},
            {"a": null, "b": "x"},
            "not an object",
            {"a": 18_446_744_073_709_551_615_u64, "b": "x"},
        ]);
        let old_items = old.as_array().unwrap();
        let items = json!([
            {"a": 1.0, "b": "x"},
            {"a": 1, "b": "x"},
            {"a": 0, "b": "s1:x"},
            {"a": 0, "b": "s1"},
            {"a": "1", "b": "x"},
            {"a": {"q": [true, null], "p": 1.0}, "b": "x"},
            {"a": {"q": [null, true], "p": 1}, "b": "x"},
            {"b": "x"},
            {"a": null, "b": "x"},
            {"a": 1, "b": "y"},
            {"a": 18_446_744_073_709_551_615.0, "b": "x"},
            "not an object",
        ]);
        let map_items = MapItems::new(schema, old_items).unwrap();
        let mut paired = 0;
        for item in items.as_array().unwrap() {
            let searched = correlated_map_item(schema, old_items, item);
            let found = map_items.get(item);
            assert_eq!(
                found.map(std::ptr::from_ref),
                searched.map(std::ptr::from_ref),
                "{item}: {found:?}, {searched:?}"
            );
            paired += usize::from(found.is_some());
        }
        assert_eq!(paired, 8);
        assert!(MapItems::new(&Map::new(), old_items).is_none());
    }
}

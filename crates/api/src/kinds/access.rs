//! Reading a field of an object as the kinds' validation does: absent, `null` and a value of
//! another type read as Go's zero value (kube validates decoded Go structs, where they are).

use serde_json::Value;

/// The field `key` of `value` when present and not null.
pub(super) fn get<'a>(value: &'a Value, key: &str) -> Option<&'a Value> {
    value.get(key).filter(|v| !v.is_null())
}

/// The string at `key` (empty when absent or not a string).
pub(super) fn text<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or("")
}

/// The list at `key` (empty when absent or not a list).
pub(super) fn list<'a>(value: &'a Value, key: &str) -> &'a [Value] {
    value
        .get(key)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

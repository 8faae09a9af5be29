//! What the kinds' validation shares: causes whose value is printed as kube's field errors
//! print a decoded Go value, reading a field by its dotted path (absent and `null` alike,
//! as Go's zero values), and filling a default only where the field is absent.
//!
//! A leaf of `kinds`: the per-area modules and `kinds` itself take these from here, so the
//! dependencies run one way (from `kinds` to its areas to this module).

use serde_json::{Map, Value};

use crate::field::Cause;
use crate::resources::lookup;

pub(super) fn duplicate(field: &str, value: &Value) -> Cause {
    crate::field::duplicate(field, &go_value(value))
}

pub(super) fn invalid(field: &str, value: &Value, detail: &str) -> Cause {
    invalid_printed(field, &go_value(value), detail)
}

/// An Invalid cause whose value is already printed (Go's `%#v` of a Go type).
pub(super) fn invalid_printed(field: &str, printed: &str, detail: &str) -> Cause {
    crate::field::invalid(field, printed, detail)
}

pub(super) fn not_supported(field: &str, value: &Value, supported: &[&str]) -> Cause {
    crate::field::not_supported(field, &go_value(value), supported)
}

/// A value as kube's field errors print it: strings quoted, numbers and booleans bare,
/// anything else as JSON (see the `kinds` module's guarantees: where kube prints a Go struct, its JSON).
pub(super) fn go_value(value: &Value) -> String {
    match value {
        Value::String(s) => format!("{s:?}"),
        Value::Null => "null".to_owned(),
        other => other.to_string(),
    }
}

pub(super) fn text<'a>(object: &'a Value, path: &str) -> &'a str {
    lookup(object, path).and_then(Value::as_str).unwrap_or("")
}

pub(super) fn present<'a>(object: &'a Value, path: &str) -> Option<&'a Value> {
    lookup(object, path).filter(|v| !v.is_null())
}

pub(super) fn items<'a>(object: &'a Value, path: &str) -> &'a [Value] {
    lookup(object, path)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

pub(super) fn fill(map: &mut Map<String, Value>, key: &str, value: Value) {
    if map.get(key).is_none_or(Value::is_null) {
        map.insert(key.to_owned(), value);
    }
}

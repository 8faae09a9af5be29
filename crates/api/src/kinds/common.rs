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

/// apimachinery's `equality.Semantic.DeepEqual` of two decoded fields, as far as their JSON
/// tells: absent, `null` and Go's zero values (`""`, `0`, `false`, an empty list, map or
/// struct) are alike, as a Go struct decoded from either holds the same; a resource quantity
/// (a string under `requests`, `limits`, `capacity`, `allocatedResources` or `overhead`) is
/// compared by its amount. (A pointer set to a zero value and one left nil differ in Go; here
/// they are alike: callers that care compare presence too.)
pub(super) fn semantic_eq(a: Option<&Value>, b: Option<&Value>) -> bool {
    let (a, b) = (
        a.and_then(|v| semantic(v, false)),
        b.and_then(|v| semantic(v, false)),
    );
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => crate::field::json_equal(&a, &b),
        _ => false,
    }
}

/// `value` with its zero values dropped (`None` when it is one) and quantities canonical.
fn semantic(value: &Value, quantities: bool) -> Option<Value> {
    match value {
        Value::Null | Value::Bool(false) => None,
        Value::Number(n) if n.as_f64() == Some(0.0) => None,
        Value::String(s) if s.is_empty() => None,
        Value::String(s) if quantities => Some(Value::String(
            crate::quantity::canonical(s).unwrap_or_else(|| s.clone()),
        )),
        Value::Array(items) if items.is_empty() => None,
        Value::Array(items) => Some(Value::Array(
            items
                .iter()
                .map(|item| semantic(item, false).unwrap_or(Value::Null))
                .collect(),
        )),
        Value::Object(fields) => {
            let kept: Map<String, Value> = fields
                .iter()
                .filter_map(|(key, field)| {
                    let quantities = quantities
                        || matches!(
                            key.as_str(),
                            "requests" | "limits" | "capacity" | "allocatedResources" | "overhead"
                        );
                    semantic(field, quantities).map(|v| (key.clone(), v))
                })
                .collect();
            (!kept.is_empty()).then_some(Value::Object(kept))
        }
        other => Some(other.clone()),
    }
}

pub(super) fn fill(map: &mut Map<String, Value>, key: &str, value: Value) {
    if map.get(key).is_none_or(Value::is_null) {
        map.insert(key.to_owned(), value);
    }
}

/// kube's `IsValidCIDR` (and `IsValidCIDRForLegacyField`) message.
pub(super) const CIDR_MESSAGE: &str =
    "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)";

/// apimachinery's `IsValidPercent` message.
const PERCENT_MESSAGE: &str = "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')";

/// An `intstr.IntOrString` as Go's `%#v` prints it.
pub(super) fn go_int_or_string(value: &Value) -> String {
    match value {
        Value::String(s) => format!(
            "intstr.IntOrString{{Type:1, IntVal:0, StrVal:{}}}",
            crate::field::go_quote(s)
        ),
        other => format!(
            "intstr.IntOrString{{Type:0, IntVal:{}, StrVal:\"\"}}",
            other.as_i64().unwrap_or(0)
        ),
    }
}

/// The digits of a percentage `[0-9]+%`, if `text` is one.
fn percent(text: &str) -> Option<&str> {
    text.strip_suffix('%')
        .filter(|digits| !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
}

/// kube's apps `ValidatePositiveIntOrPercent`: a percentage (`[0-9]+%`) or a non-negative
/// integer.
pub(super) fn positive_int_or_percent(value: &Value, at: &str, causes: &mut Vec<Cause>) {
    match value {
        Value::String(text) if percent(text).is_none() => {
            causes.push(invalid_printed(
                at,
                &go_int_or_string(value),
                PERCENT_MESSAGE,
            ));
        }
        Value::String(_) => {}
        other => {
            if let Some(n) = other.as_i64().filter(|n| *n < 0) {
                causes.push(invalid_printed(
                    at,
                    &n.to_string(),
                    "must be greater than or equal to 0",
                ));
            }
        }
    }
}

/// kube's apps `IsNotMoreThan100Percent`: a percentage is at most 100%.
pub(super) fn not_more_than_100_percent(value: &Value, at: &str, causes: &mut Vec<Cause>) {
    if let Some(digits) = value.as_str().and_then(percent)
        // Go's `Atoi` of a number past 64 bits fails and gives 0.
        && digits.parse::<i64>().is_ok_and(|n| n > 100)
    {
        causes.push(invalid_printed(
            at,
            &go_int_or_string(value),
            "must not be greater than 100%",
        ));
    }
}

/// kube's apps `getIntOrPercentValue`: a percentage's number, another string's `Atoi` (0
/// when it is none), an integer itself.
pub(super) fn int_or_percent_value(value: &Value) -> i64 {
    match value {
        Value::String(text) => match percent(text) {
            // `Atoi` past 64 bits gives the clamped value, never 0.
            Some(digits) => digits.parse::<i64>().unwrap_or(i64::MAX),
            None => text.parse::<i64>().unwrap_or(0),
        },
        other => other.as_i64().unwrap_or(0),
    }
}

//! Custom resources against their CRD's structural schema, as kube-apiserver validates them.
//!
//! kube-apiserver checks a custom resource with kube-openapi's schema validator (a fork of
//! go-openapi's) over the storage version's `openAPIV3Schema`, then the
//! `x-kubernetes-list-type` invariants (`apiextensions-apiserver/pkg/apiserver/schema/
//! listtype`), and turns each failure into a `field.Error` (`kubeOpenAPIResultToFieldErrors`).
//! [`check_custom`] does the same, with the same wording:
//!
//! - **Types**: `type` (an integral `number` fits `integer`), `nullable`,
//!   `x-kubernetes-int-or-string`: `Invalid value: "string": spec.replicas in body must be of
//!   type integer: "string"`.
//! - **Strings**: `maxLength` (`Too long: may not be more than 5 bytes`; counted in
//!   characters, as Go's `utf8.RuneCount`, though kube's message says bytes), `minLength`,
//!   `pattern` (Go's RE2 syntax: `\d`, `\s`, `\w` and `\b` are ASCII, as in Go), `format`
//!   (the formats kube-apiserver checks for custom resources, [`crate::strfmt`]; others are
//!   ignored, as kube strips them).
//! - **Numbers**: `minimum`, `maximum` (and their `exclusive*` forms), `multipleOf`; an integer
//!   compared with an integer bound, as go-openapi's native-type checks do.
//! - **Arrays**: `items`, `minItems`, `maxItems` (`Too many: 3: must have at most 2 items`);
//!   `x-kubernetes-list-type: set` (no duplicate item) and `map` (items are objects, no two
//!   with the same `x-kubernetes-list-map-keys`): `Duplicate value: ...` as Go prints it.
//! - **Objects**: `properties`, `additionalProperties`, `required`, `minProperties`,
//!   `maxProperties`; at the root, `metadata` is checked only for `name` and `generateName` (the
//!   two fields a structural schema may constrain) and is never required.
//! - **Composition**: `allOf`, `anyOf`, `oneOf`, `not`, with go-openapi's messages (`"spec.x"
//!   must validate at least one schema (anyOf)` under the field `<nil>`, as kube reports
//!   them). Where none of `anyOf`'s or `oneOf`'s branches holds, the causes of the branch
//!   go-openapi keeps are added: the one with the highest `MatchCount` (the first of equals),
//!   which counts the validators that applied, so the branch that went deepest (Gateway
//!   API's `spec.addresses[0]` with an IP address branch whose `value` is not an IPv4 one
//!   reports `must be of type ipv4`, not the other branch's `must not validate the schema`).
//! - **`enum`**: numbers compared by value (`1` equals `1.0`, as Go's `float64` enum values).
//!
//! **Ratcheting** (`CRDValidationRatcheting`, on by default since Kubernetes 1.30): on an update
//! (`old` given), a failure is dropped when the value it is about equals the old object's value
//! at the same place — an unchanged invalid field does not block the update of another one.
//! Values correlate through object fields, by index in lists without a list type, by keys in
//! `x-kubernetes-list-type: map` lists, and not at all in `set` and `atomic` lists. List-type
//! duplicates are reported on an update only when the old object had none, as kube does.
//!
//! **Status writes** ([`check_custom_status`]): a write of the status subresource has its
//! `status` checked against the status schema as a root of its own, as kube's status strategy
//! does: messages name places relative to `status`, fields are under it.
//!
//! [`prune_and_default`] is the pruning and defaulting kube applies to a custom resource it
//! decodes, before these checks.
//!
//! Patterns are compiled once and kept (at most [`PATTERNS_KEPT`] of them, each at most
//! [`PATTERN_SIZE_MAX`] bytes compiled; past that count the kept set starts again), so a
//! client's CRDs bound the memory they hold. Compilation is linear-time matching (the `regex`
//! crate, RE2's guarantees): no pattern or value can make a check slow. The walk recurses as
//! deep as the object, which the request decoder bounds.

use std::fmt::Write as _;

use serde_json::{Map, Value};

use crate::cel_rules::RuleTree;
use crate::error::ApiError;
use crate::field::{
    Cause, go_float, go_quote, go_value, invalid, json_equal, too_long, too_many, type_invalid,
};
#[cfg(test)]
use crate::pattern::go_syntax;
use crate::pattern::pattern;
pub use crate::pattern::{PATTERN_SIZE_MAX, PATTERNS_KEPT, compile_pattern};
use crate::resources::ResourceDef;
pub(crate) use crate::schema_node::flag;
use crate::schema_node::{MapItems, unchanged};

/// Validates a custom resource against its CRD version's `openAPIV3Schema` (see the module's
/// guarantees), ratcheting against `old` on an update; `rules` is where that schema's CEL
/// rules are (`RuleTree::of`, found once per CRD version; `None`: it has none).
///
/// # Errors
/// 422 Invalid as kube-apiserver answers, e.g. `Widget.example.com "w" is invalid:
/// spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer:
/// "string"`, one cause per failure.
pub fn check_custom(
    def: &ResourceDef,
    schema: &Value,
    rules: Option<&RuleTree>,
    object: &Value,
    old: Option<&Value>,
) -> Result<(), ApiError> {
    let mut causes = Vec::new();
    if let Value::Object(fields) = object {
        root(schema, fields, old, &mut causes);
    }
    check_rest(def, schema, rules, object, old, causes)
}

/// [`check_custom`] for a write of the status subresource, as kube's status strategy checks
/// it (`ValidateStatusUpdate`): the schema checks cover `status` alone, against the status
/// schema as a root of its own (`NewSchemaValidator(&statusSchema)`), so each message names
/// the place relative to `status` (`addresses[0].value in body must be of type ipv4`) while
/// the cause's field is under `status` (`status.addresses[0].value`; a composite failure's
/// field is `status` itself); the embedded resources, list types and CEL rules are checked
/// over the whole object as on any write. An object without `status` has no schema check.
///
/// # Errors
/// 422 Invalid as kube-apiserver answers, as [`check_custom`].
pub fn check_custom_status(
    def: &ResourceDef,
    schema: &Value,
    rules: Option<&RuleTree>,
    object: &Value,
    old: Option<&Value>,
) -> Result<(), ApiError> {
    let mut causes = Vec::new();
    if let (Some(status_schema), Some(status)) =
        (schema.pointer("/properties/status"), object.get("status"))
    {
        let old_status = old.and_then(|old| old.get("status"));
        node(status_schema, status, old_status, "", &mut causes);
        for (field, _, _) in &mut causes {
            *field = match field.as_str() {
                "" | "<nil>" => "status".to_owned(),
                relative if relative.starts_with('[') => format!("status{relative}"),
                relative => format!("status.{relative}"),
            };
        }
    }
    check_rest(def, schema, rules, object, old, causes)
}

/// What [`check_custom`] and [`check_custom_status`] check after the schema: embedded
/// resources, list types and the CEL rules (unless the failures so far block them).
fn check_rest(
    def: &ResourceDef,
    schema: &Value,
    rules: Option<&RuleTree>,
    object: &Value,
    old: Option<&Value>,
    mut causes: Vec<Cause>,
) -> Result<(), ApiError> {
    causes.extend(crate::embedded::check(schema, object));
    let mut lists = Vec::new();
    list_types(schema, object, "", &mut lists);
    if !lists.is_empty() && old.is_some_and(|old| has_list_type_errors(schema, old)) {
        // kube reports the list invariants of an update only when the old object kept them.
        lists.clear();
    }
    causes.extend(lists);
    // kube's `hasBlockingErr`: rules run only on an object of the schema's types, sizes and
    // required fields.
    const BLOCKING: [&str; 5] = [
        "FieldValueNotSupported",
        "FieldValueRequired",
        "FieldValueTooLong",
        "FieldValueTooMany",
        "FieldValueTypeInvalid",
    ];
    let blocked = causes
        .iter()
        .any(|(_, _, reason)| BLOCKING.contains(&reason.as_str()));
    if let Some(rules) = rules
        && !blocked
    {
        causes.extend(crate::cel_rules::check(schema, rules, object, old));
    } else if rules.is_some() {
        causes.push(invalid(
            "<nil>",
            "\"null\"",
            "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
        ));
    }
    if causes.is_empty() {
        return Ok(());
    }
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    Err(ApiError::invalid(def, name, causes))
}

/// The causes of checking a value (a schema's `default`) against `schema` alone, as
/// `ValidateCustomResource` reports them for a value at the root: fields relative to the
/// value (`""` for the value itself), messages naming them the same way (` in body must be
/// of type integer: "string"` for the value itself, as kube's text reads).
pub(crate) fn check_value(schema: &Value, value: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    node(schema, value, None, "", &mut causes);
    causes
}

/// The root object: `metadata` only for `name` and `generateName`, never required.
fn root(schema: &Value, fields: &Map<String, Value>, old: Option<&Value>, causes: &mut Vec<Cause>) {
    let properties = schema.get("properties").and_then(Value::as_object);
    for (key, field) in fields {
        let Some(property) = properties.and_then(|p| p.get(key)) else {
            continue;
        };
        let old_field = old.and_then(|o| o.get(key));
        if key == "metadata" {
            for name in ["name", "generateName"] {
                if let (Some(sub), Some(value)) = (
                    property.pointer(&format!("/properties/{name}")),
                    field.get(name),
                ) {
                    node(
                        sub,
                        value,
                        old_field.and_then(|o| o.get(name)),
                        &format!("metadata.{name}"),
                        causes,
                    );
                }
            }
        } else {
            node(property, field, old_field, key, causes);
        }
    }
    if let Some(Value::Array(required)) = schema.get("required") {
        for key in required.iter().filter_map(Value::as_str) {
            if !matches!(key, "metadata" | "apiVersion" | "kind") && !fields.contains_key(key) {
                causes.push(crate::field::required(key, ""));
            }
        }
    }
}

/// A go-openapi composite failure (`anyOf`, `oneOf`, `allOf`, `not`): kube reports it as
/// `field.Invalid(nil, "", message)`, whose field prints as `<nil>`.
fn composite(message: String) -> Cause {
    (
        "<nil>".to_owned(),
        format!("Invalid value: \"\": {message}"),
        "FieldValueInvalid".to_owned(),
    )
}

/// The OpenAPI type name of a JSON value, as kube's validator names it.
fn openapi_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        // Go's unstructured decoding gives an `int64` exactly when the number fits one.
        Value::Number(n) if n.is_i64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn number_bound(schema: &Map<String, Value>, key: &str) -> Option<f64> {
    schema.get(key).and_then(Value::as_f64)
}

fn count_bound(schema: &Map<String, Value>, key: &str) -> Option<i64> {
    schema.get(key).and_then(|v| {
        v.as_i64()
            .or_else(|| v.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64))
    })
}

/// Checks `value` against `schema` at `path` (see the module's guarantees), dropping the
/// failures about it when it equals `old` (ratcheting).
fn node(schema: &Value, value: &Value, old: Option<&Value>, path: &str, causes: &mut Vec<Cause>) {
    let Value::Object(schema) = schema else {
        return;
    };
    let start = causes.len();
    check_node(schema, value, old, path, causes);
    if causes.len() > start && old.is_some_and(|old| unchanged(schema, value, old)) {
        causes.truncate(start);
    }
}

fn check_node(
    schema: &Map<String, Value>,
    value: &Value,
    old: Option<&Value>,
    path: &str,
    causes: &mut Vec<Cause>,
) {
    let int_or_string = flag(schema, "x-kubernetes-int-or-string");
    let declared = if int_or_string {
        Some("integer,string")
    } else {
        schema
            .get("type")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
    };
    if value.is_null() {
        if let Some(expected) = declared
            && !flag(schema, "nullable")
        {
            causes.push(type_invalid(
                path,
                "\"null\"",
                &format!("{path} in body must be of type {expected}: \"null\""),
            ));
        }
        enumeration(schema, value, path, causes);
        return;
    }
    if let Some(expected) = declared {
        let actual = openapi_type(value);
        let integral_float = matches!(value, Value::Number(n) if !n.is_i64()
            && n.as_f64().is_some_and(|f| f.fract() == 0.0 && f.abs() < 9.007_199_254_740_992e15));
        let fits = expected.split(',').any(|t| {
            t == actual
                || (t == "number" && actual == "integer")
                || (t == "integer" && integral_float)
        });
        if !fits {
            causes.push(type_invalid(
                path,
                &go_quote(actual),
                &format!(
                    "{path} in body must be of type {expected}: {}",
                    go_quote(actual)
                ),
            ));
            enumeration(schema, value, path, causes);
            return;
        }
    }
    composition(schema, value, old, path, causes);
    match value {
        Value::String(text) => string(schema, text, path, causes),
        Value::Number(number) => numeric(schema, value, number, path, causes),
        Value::Array(items) => array(schema, items, old, path, causes),
        _ => {}
    }
    enumeration(schema, value, path, causes);
    if let Value::Object(fields) = value {
        object(schema, fields, old, path, causes);
    }
}

/// `maxLength`, `minLength` and `pattern` (the first failing one), then `format`.
fn string(schema: &Map<String, Value>, text: &str, path: &str, causes: &mut Vec<Cause>) {
    let length = text.chars().count();
    let quoted = go_quote(text);
    if let Some(max) = count_bound(schema, "maxLength")
        && i64::try_from(length).unwrap_or(i64::MAX) > max
    {
        causes.push(too_long(path, max));
    } else if let Some(min) = count_bound(schema, "minLength")
        && i64::try_from(length).unwrap_or(i64::MAX) < min
    {
        causes.push(invalid(
            path,
            &quoted,
            &format!("{path} in body should be at least {min} chars long"),
        ));
    } else if let Some(source) = schema.get("pattern").and_then(Value::as_str)
        && !source.is_empty()
    {
        match pattern(source) {
            Ok(regex) if regex.is_match(text) => {}
            Ok(_) => causes.push(invalid(
                path,
                &quoted,
                &format!("{path} in body should match '{source}'"),
            )),
            Err(error) => causes.push(invalid(
                path,
                &quoted,
                &format!("{path} in body should match '{source}, but pattern is invalid: {error}'"),
            )),
        }
    }
    if let Some(format) = schema.get("format").and_then(Value::as_str)
        && crate::strfmt::check(format, text) == Some(false)
    {
        causes.push(type_invalid(
            path,
            &quoted,
            &format!("{path} in body must be of type {format}: {quoted}"),
        ));
    }
}

/// `multipleOf`, `minimum`, `maximum`: an `int64` against bounds truncated to integers (Go's
/// native-type checks), a `float64` against the bounds as they are.
fn numeric(
    schema: &Map<String, Value>,
    value: &Value,
    number: &serde_json::Number,
    path: &str,
    causes: &mut Vec<Cause>,
) {
    let shown = go_value(value);
    let exclusive = |key: &str| flag(schema, key);
    let integer = number.as_i64();
    let float = number.as_f64().unwrap_or(0.0);
    if let Some(factor) = number_bound(schema, "multipleOf") {
        let failed = match integer {
            Some(n) if factor.fract() == 0.0 => {
                let factor = factor as i64;
                if factor <= 0 {
                    Some(format!(
                        "factor MultipleOf declared for {path} must be positive: {factor}"
                    ))
                } else {
                    (n % factor != 0)
                        .then(|| format!("{path} in body should be a multiple of {factor}"))
                }
            }
            _ => {
                if factor <= 0.0 {
                    Some(format!(
                        "factor MultipleOf declared for {path} must be positive: {}",
                        go_float(factor)
                    ))
                } else {
                    let ratio = if factor < 1.0 {
                        1.0 / factor * float
                    } else {
                        float / factor
                    };
                    (!is_json_integer(ratio)).then(|| {
                        format!(
                            "{path} in body should be a multiple of {}",
                            go_float(factor)
                        )
                    })
                }
            }
        };
        if let Some(detail) = failed {
            causes.push(invalid(path, &shown, &detail));
        }
    }
    if let Some(min) = number_bound(schema, "minimum") {
        let exclusive = exclusive("exclusiveMinimum");
        let (below, bound) = match integer {
            Some(n) => {
                let min = min as i64;
                (if exclusive { n <= min } else { n < min }, min.to_string())
            }
            None => (
                if exclusive { float <= min } else { float < min },
                go_float(min),
            ),
        };
        if below {
            let relation = if exclusive {
                "greater than"
            } else {
                "greater than or equal to"
            };
            causes.push(invalid(
                path,
                &shown,
                &format!("{path} in body should be {relation} {bound}"),
            ));
        }
    }
    if let Some(max) = number_bound(schema, "maximum") {
        let exclusive = exclusive("exclusiveMaximum");
        let (above, bound) = match integer {
            Some(n) => {
                let max = max as i64;
                (if exclusive { n >= max } else { n > max }, max.to_string())
            }
            None => (
                if exclusive { float >= max } else { float > max },
                go_float(max),
            ),
        };
        if above {
            let relation = if exclusive {
                "less than"
            } else {
                "less than or equal to"
            };
            causes.push(invalid(
                path,
                &shown,
                &format!("{path} in body should be {relation} {bound}"),
            ));
        }
    }
}

/// go-openapi's `swag.IsFloat64AJSONInteger`.
fn is_json_integer(f: f64) -> bool {
    const LIMIT: f64 = 9_007_199_254_740_991.0;
    const EPSILON: f64 = 1e-9;
    if !f.is_finite() || !(-LIMIT..=LIMIT).contains(&f) {
        return false;
    }
    if f == f.trunc() {
        return true;
    }
    if f < 0.0 {
        // Go converts a negative float to `uint64` as the hardware does: never equal.
        return false;
    }
    let g = f.trunc();
    let diff = (f - g).abs();
    if g == 0.0 {
        return diff < EPSILON * f64::MIN_POSITIVE;
    }
    diff / (f + g) < EPSILON
}

/// `items` (each item), `minItems`, `maxItems`.
fn array(
    schema: &Map<String, Value>,
    items: &[Value],
    old: Option<&Value>,
    path: &str,
    causes: &mut Vec<Cause>,
) {
    if let Some(item_schema) = schema.get("items").filter(|s| s.is_object()) {
        let old_items = old.and_then(Value::as_array);
        let list_type = schema.get("x-kubernetes-list-type").and_then(Value::as_str);
        let map_items = match (list_type, old_items) {
            (Some("map"), Some(old_items)) => MapItems::new(schema, old_items),
            _ => None,
        };
        for (index, item) in items.iter().enumerate() {
            let old_item = old_items.and_then(|old_items| match list_type {
                Some("map") => map_items.as_ref().and_then(|m| m.get(item)),
                Some(_) => None,
                None => old_items.get(index),
            });
            node(
                item_schema,
                item,
                old_item,
                &format!("{path}[{index}]"),
                causes,
            );
        }
    }
    counts(
        schema,
        ("minItems", "maxItems", "items"),
        items.len(),
        path,
        causes,
    );
}

/// A count's bounds (`minItems`/`maxItems`, `minProperties`/`maxProperties`): below the
/// minimum an Invalid (`should have at least 2 items`), above the maximum a TooMany.
fn counts(
    schema: &Map<String, Value>,
    (min_key, max_key, what): (&str, &str, &str),
    count: usize,
    path: &str,
    causes: &mut Vec<Cause>,
) {
    let size = i64::try_from(count).unwrap_or(i64::MAX);
    if let Some(min) = count_bound(schema, min_key)
        && size < min
    {
        causes.push(invalid(
            path,
            &count.to_string(),
            &format!("{path} in body should have at least {min} {what}"),
        ));
    }
    if let Some(max) = count_bound(schema, max_key)
        && size > max
    {
        causes.push(too_many(path, count, max));
    }
}

/// `enum`: numbers compared by value.
fn enumeration(schema: &Map<String, Value>, value: &Value, path: &str, causes: &mut Vec<Cause>) {
    let Some(Value::Array(allowed)) = schema.get("enum") else {
        return;
    };
    if allowed.is_empty() || allowed.iter().any(|a| json_equal(a, value)) {
        return;
    }
    let list: Vec<String> = allowed
        .iter()
        .map(|a| match a {
            Value::String(s) => go_quote(s),
            other => go_quote(&other.to_string()),
        })
        .collect();
    causes.push((
        path.to_owned(),
        format!(
            "Unsupported value: {}: supported values: {}",
            go_value(value),
            list.join(", ")
        ),
        "FieldValueNotSupported".to_owned(),
    ));
}

/// `minProperties`, `maxProperties`, `additionalProperties`, `properties`, `required`.
fn object(
    schema: &Map<String, Value>,
    fields: &Map<String, Value>,
    old: Option<&Value>,
    path: &str,
    causes: &mut Vec<Cause>,
) {
    let bounds = ("minProperties", "maxProperties", "properties");
    counts(schema, bounds, fields.len(), path, causes);
    let properties = schema.get("properties").and_then(Value::as_object);
    let additional = schema.get("additionalProperties").filter(|v| v.is_object());
    for (key, field) in fields {
        let sub = properties.and_then(|p| p.get(key)).or(additional);
        if let Some(sub) = sub {
            let child = if path.is_empty() {
                key.clone()
            } else {
                format!("{path}.{key}")
            };
            node(sub, field, old.and_then(|o| o.get(key)), &child, causes);
        }
    }
    if let Some(Value::Array(required)) = schema.get("required") {
        for key in required.iter().filter_map(Value::as_str) {
            if !fields.contains_key(key) {
                let child = if path.is_empty() {
                    key.to_owned()
                } else {
                    format!("{path}.{key}")
                };
                causes.push(crate::field::required(&child, ""));
            }
        }
    }
}

/// `anyOf`, `oneOf`, `allOf`, `not` over the same value (and the same old value).
fn composition(
    schema: &Map<String, Value>,
    value: &Value,
    old: Option<&Value>,
    path: &str,
    causes: &mut Vec<Cause>,
) {
    let branches = |key: &str| -> Vec<Vec<Cause>> {
        schema
            .get(key)
            .and_then(Value::as_array)
            .map(|list| {
                list.iter()
                    .map(|sub| {
                        let mut found = Vec::new();
                        node(sub, value, old, path, &mut found);
                        found
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    // go-openapi keeps the failures of the branch with the highest match count, the first of
    // equals (`result.MatchCount > bestFailures.MatchCount`).
    let best = |key: &str, results: Vec<Vec<Cause>>| {
        let subs = schema.get(key).and_then(Value::as_array);
        let mut best: Option<(u64, Vec<Cause>)> = None;
        for (index, found) in results.into_iter().enumerate() {
            let count = subs.map_or(0, |subs| match_count(&subs[index], value));
            if best.as_ref().is_none_or(|(most, _)| count > *most) {
                best = Some((count, found));
            }
        }
        best.map(|(_, found)| found)
    };
    let any = branches("anyOf");
    if !any.is_empty() && !any.iter().any(Vec::is_empty) {
        causes.push(composite(format!(
            "{} must validate at least one schema (anyOf)",
            go_quote(path)
        )));
        causes.extend(best("anyOf", any).unwrap_or_default());
    }
    let one = branches("oneOf");
    if !one.is_empty() {
        let valid = one.iter().filter(|r| r.is_empty()).count();
        if valid != 1 {
            let found = if valid == 0 {
                "Found none valid".to_owned()
            } else {
                format!("Found {valid} valid alternatives")
            };
            causes.push(composite(format!(
                "{} must validate one and only one schema (oneOf). {found}",
                go_quote(path)
            )));
            if valid == 0 {
                causes.extend(best("oneOf", one).unwrap_or_default());
            }
        }
    }
    let all = branches("allOf");
    if !all.is_empty() {
        let valid = all.iter().filter(|r| r.is_empty()).count();
        let total = all.len();
        for found in all {
            causes.extend(found);
        }
        if valid != total {
            let none = if valid == 0 { ". None validated" } else { "" };
            causes.push(composite(format!(
                "{} must validate all the schemas (allOf){none}",
                go_quote(path)
            )));
        }
    }
    if let Some(not) = schema.get("not").filter(|s| s.is_object()) {
        let mut found = Vec::new();
        node(not, value, None, path, &mut found);
        if found.is_empty() {
            causes.push(composite(format!(
                "{} must not validate the schema (not)",
                go_quote(path)
            )));
        }
    }
}

/// go-openapi's `MatchCount` of `value` against `schema`: one for each validator of each
/// schema that applies to the value (kube-openapi's `SchemaValidator.Validate`: the type,
/// schema-props, string, format, number, slice, common and object validators, plus the
/// schema's own), and what the type, number, slice, props and object validators count inside
/// (a type that fits, the items' and properties' schemas, the branch of `anyOf` and `oneOf`
/// that holds or is kept, every `allOf` branch). Where no branch of `anyOf` or `oneOf` holds,
/// go-openapi reports the failures of the branch with the highest count: the one that went
/// deepest, not the one with the fewest failures.
fn match_count(schema: &Value, value: &Value) -> u64 {
    let Value::Object(schema) = schema else {
        return 0;
    };
    let typed = schema
        .get("type")
        .and_then(Value::as_str)
        .is_some_and(|t| !t.is_empty());
    let type_fits = || {
        let Some(expected) = schema.get("type").and_then(Value::as_str) else {
            return true;
        };
        let actual = openapi_type(value);
        expected.is_empty()
            || expected == actual
            || (expected == "number" && actual == "integer")
            || (expected == "integer"
                && matches!(value, Value::Number(n) if n.as_f64().is_some_and(|f| f.fract() == 0.0)))
    };
    if value.is_null() {
        // Only the type and common validators, uncounted: the type validator's own one.
        return u64::from(!typed || flag(schema, "nullable"));
    }
    let holds = |sub: &Value| {
        let mut found = Vec::new();
        node(sub, value, None, "", &mut found);
        found.is_empty()
    };
    let branches = |key: &str| schema.get(key).and_then(Value::as_array).map(Vec::as_slice);
    let mut props = 1;
    if let Some(any) = branches("anyOf").filter(|b| !b.is_empty()) {
        props += match any.iter().find(|sub| holds(sub)) {
            Some(first) => match_count(first, value),
            None => any
                .iter()
                .map(|sub| match_count(sub, value))
                .max()
                .unwrap_or(0),
        };
    }
    if let Some(one) = branches("oneOf").filter(|b| !b.is_empty()) {
        let valid: Vec<&Value> = one.iter().filter(|sub| holds(sub)).collect();
        props += match valid.as_slice() {
            [only] => match_count(only, value),
            [] => one
                .iter()
                .map(|sub| match_count(sub, value))
                .max()
                .unwrap_or(0),
            _ => 0,
        };
    }
    if let Some(all) = branches("allOf") {
        props += all.iter().map(|sub| match_count(sub, value)).sum::<u64>();
    }
    let mut total = 1 + props + 1; // the schema-props validator, the common validator
    if typed || schema.contains_key("format") {
        total += 1 + u64::from(type_fits());
    }
    match value {
        Value::String(text) => {
            total += 1;
            let format = schema.get("format").and_then(Value::as_str).unwrap_or("");
            if crate::strfmt::check(format, text).is_some() {
                total += 1;
            }
        }
        Value::Number(_) => total += 2,
        Value::Array(items) => {
            let inside = schema.get("items").map_or(0, |sub| {
                items.iter().map(|item| match_count(sub, item)).sum()
            });
            total += 2 + inside;
        }
        Value::Object(fields) => {
            let properties = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|v| v.is_object());
            let len = i64::try_from(fields.len()).unwrap_or(i64::MAX);
            // Too few or too many properties: the object validator's failure alone, uncounted.
            let too_few = count_bound(schema, "minProperties").is_some_and(|min| len < min);
            let too_many = count_bound(schema, "maxProperties").is_some_and(|max| len > max);
            total += 1;
            if !too_few && !too_many {
                for (key, field) in fields {
                    if let Some(sub) = properties.and_then(|p| p.get(key)).or(additional) {
                        total += match_count(sub, field);
                    }
                }
            }
        }
        Value::Bool(_) | Value::Null => {}
    }
    total + 1
}

/// The `x-kubernetes-list-type` invariants (`listtype.ValidateListSetsAndMaps`), through
/// `properties`, `additionalProperties` (paths `a[key]`) and `items`.
fn list_types(schema: &Value, value: &Value, path: &str, causes: &mut Vec<Cause>) {
    match value {
        Value::Object(fields) => {
            let additional = schema.get("additionalProperties").filter(|v| v.is_object());
            let properties = schema.get("properties").and_then(Value::as_object);
            if let Some(additional) = additional {
                for (key, field) in fields {
                    list_types(additional, field, &format!("{path}[{key}]"), causes);
                }
            }
            if let Some(properties) = properties {
                for (key, field) in fields {
                    if let Some(sub) = properties.get(key) {
                        let child = if path.is_empty() {
                            key.clone()
                        } else {
                            format!("{path}.{key}")
                        };
                        list_types(sub, field, &child, causes);
                    }
                }
            }
        }
        Value::Array(items) => {
            match schema.get("x-kubernetes-list-type").and_then(Value::as_str) {
                Some("set") => {
                    for index in duplicates(items.iter().collect()) {
                        causes.push(crate::field::duplicate(
                            &format!("{path}[{index}]"),
                            &go_value(&items[index]),
                        ));
                    }
                }
                Some("map") => list_map(schema, items, path, causes),
                _ => {}
            }
            if let Some(item_schema) = schema.get("items") {
                for (index, item) in items.iter().enumerate() {
                    list_types(item_schema, item, &format!("{path}[{index}]"), causes);
                }
            }
        }
        _ => {}
    }
}

fn has_list_type_errors(schema: &Value, object: &Value) -> bool {
    let mut causes = Vec::new();
    list_types(schema, object, "", &mut causes);
    !causes.is_empty()
}

/// The indexes of the second appearance of each value seen more than once.
fn duplicates(values: Vec<&Value>) -> Vec<usize> {
    let mut seen: Vec<(&Value, usize)> = Vec::new();
    let mut found = Vec::new();
    for (index, value) in values.iter().enumerate() {
        if let Some(entry) = seen.iter_mut().find(|(v, _)| *v == *value) {
            entry.1 += 1;
            if entry.1 == 2 {
                found.push(index);
            }
        } else {
            seen.push((value, 1));
        }
    }
    found
}

/// A `map` list: items are objects (or null), no two with the same keys.
fn list_map(schema: &Value, items: &[Value], path: &str, causes: &mut Vec<Cause>) {
    if let Some((index, item)) = items
        .iter()
        .enumerate()
        .find(|(_, item)| !item.is_object() && !item.is_null())
    {
        causes.push(invalid(
            &format!("{path}[{index}]"),
            &go_value(item),
            "must be an object for an array of list-type map",
        ));
        return;
    }
    if items.len() <= 1 {
        return;
    }
    let keys: Vec<&str> = schema
        .get("x-kubernetes-list-map-keys")
        .and_then(Value::as_array)
        .map(|k| k.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    // Each item's key fields as an object (an absent field left out, a null item empty).
    let item_keys: Vec<Value> = items
        .iter()
        .map(|item| {
            let mut key = Map::new();
            for field in &keys {
                if let Some(v) = item.get(*field) {
                    key.insert((*field).to_owned(), v.clone());
                }
            }
            Value::Object(key)
        })
        .collect();
    for index in duplicates(item_keys.iter().collect()) {
        causes.push(crate::field::duplicate(
            &format!("{path}[{index}]"),
            &go_value(&item_keys[index]),
        ));
    }
}

/// Applies a structural schema's `default`s and prunes the fields it does not declare, as
/// kube-apiserver does to a custom resource it decodes: a field absent (or null where the
/// schema is not `nullable`) gets its property's `default`; a null where the schema is neither
/// `nullable` nor defaulted is dropped; an object keeps only its
/// `properties` unless it has `additionalProperties` or `x-kubernetes-preserve-unknown-fields:
/// true`; `apiVersion`, `kind` and `metadata` stay at the root and in
/// `x-kubernetes-embedded-resource` objects. Returns the paths of the pruned fields, sorted,
/// as kube-apiserver's pruning reports them for `fieldValidation` (`spec.x`,
/// `spec.items[0].y`).
pub fn prune_and_default(schema: &Value, object: &mut Value) -> Vec<String> {
    let mut pruned = Vec::new();
    if let Value::Object(fields) = object {
        walk_object(schema, fields, true, true, &mut String::new(), &mut pruned);
    }
    pruned.sort();
    pruned
}

/// Prunes the fields a structural schema does not declare from a custom resource, as
/// [`prune_and_default`] does but without applying `default`s: what kube-apiserver's
/// `schemaCoercingConverter` does to an object it converts from one version of a CRD to
/// another (to the storage version on a write, to the request's version on a read), with the
/// schema of the version converted to. Returns the paths of the pruned fields, sorted.
pub fn prune(schema: &Value, object: &mut Value) -> Vec<String> {
    let mut pruned = Vec::new();
    if let Value::Object(fields) = object {
        walk_object(schema, fields, true, false, &mut String::new(), &mut pruned);
    }
    pruned.sort();
    pruned
}

/// Whether pruning `value` by `schema` (not at a resource's root) would drop a field: what
/// kube's CRD validation calls a default with unknown fields. Pruning only, as kube's check
/// (`structuraldefaulting.validate`: `pruning.Prune` of the default) is: the defaults below
/// are not applied into it (they are checked where they are declared; applied here, each
/// level's check walked every default below it, quadratic in a schema with a default at
/// every level).
pub(crate) fn has_unknown_fields(schema: &Value, value: &Value) -> bool {
    let mut pruned = Vec::new();
    walk(
        schema,
        &mut value.clone(),
        false,
        &mut String::new(),
        &mut pruned,
    );
    !pruned.is_empty()
}

/// [`prune_and_default`] (applying defaults when `defaulting`) of a value below the root.
fn walk(
    schema: &Value,
    value: &mut Value,
    defaulting: bool,
    path: &mut String,
    pruned: &mut Vec<String>,
) {
    match value {
        Value::Object(fields) => walk_object(schema, fields, false, defaulting, path, pruned),
        Value::Array(items) => {
            if let Some(item) = schema.get("items") {
                let start = path.len();
                for (index, value) in items.iter_mut().enumerate() {
                    let _ = write!(path, "[{index}]");
                    walk(item, value, defaulting, path, pruned);
                    path.truncate(start);
                }
            }
        }
        _ => {}
    }
}

fn is_true(schema: &Value, key: &str) -> bool {
    schema.as_object().is_some_and(|schema| flag(schema, key))
}

/// `path` with `.key` (or `key` at the root) appended, for the time of `f`.
fn with_key<T>(path: &mut String, key: &str, f: impl FnOnce(&mut String) -> T) -> T {
    let start = path.len();
    if start > 0 {
        path.push('.');
    }
    path.push_str(key);
    let out = f(path);
    path.truncate(start);
    out
}

fn walk_object(
    schema: &Value,
    fields: &mut Map<String, Value>,
    root: bool,
    defaulting: bool,
    path: &mut String,
    pruned: &mut Vec<String>,
) {
    let properties = schema.get("properties").and_then(Value::as_object);
    let additional = schema
        .get("additionalProperties")
        .filter(|a| a.is_object() || a.as_bool() == Some(true));
    let preserve = is_true(schema, "x-kubernetes-preserve-unknown-fields");
    let keeps_meta = root || is_true(schema, "x-kubernetes-embedded-resource");
    let is_meta = |key: &str| keeps_meta && matches!(key, "apiVersion" | "kind" | "metadata");
    if let Some(properties) = properties.filter(|_| defaulting) {
        for (key, property) in properties {
            let Some(default) = property.get("default") else {
                continue;
            };
            let defaulted = match fields.get(key) {
                None => true,
                Some(Value::Null) => !is_true(property, "nullable"),
                Some(_) => false,
            };
            if defaulted {
                fields.insert(key.clone(), default.clone());
            }
        }
    }
    if !preserve && additional.is_none() {
        fields.retain(|key, _| {
            let kept = is_meta(key) || properties.is_some_and(|p| p.contains_key(key));
            if !kept {
                with_key(path, key, |path| pruned.push(path.clone()));
            }
            kept
        });
    }
    // kube's `PruneNonNullableNullsWithoutDefaults`: a null where the schema declares a field
    // (a property, or `additionalProperties`' schema) that is neither `nullable` nor defaulted
    // is dropped, as if left out (a defaulted one got its default above). A YAML key whose
    // children are all commented out is such a null. Part of kube's defaulting, so not done
    // without it (`prune`, the conversion's pruning).
    fields.retain(|key, value| {
        if !defaulting || !value.is_null() || is_meta(key) {
            return true;
        }
        let declared = properties
            .and_then(|p| p.get(key))
            .or(additional.filter(|a| a.is_object()));
        !declared.is_some_and(|s| !is_true(s, "nullable") && s.get("default").is_none())
    });
    for (key, value) in fields.iter_mut() {
        if is_meta(key) {
            continue;
        }
        if let Some(property) = properties.and_then(|p| p.get(key)) {
            with_key(path, key, |path| {
                walk(property, value, defaulting, path, pruned);
            });
        } else if let Some(additional) = additional.filter(|a| a.is_object()) {
            with_key(path, key, |path| {
                walk(additional, value, defaulting, path, pruned);
            });
        }
    }
}

#[cfg(test)]
mod tests;

//! Field errors as kube's `k8s.io/apimachinery/pkg/util/validation/field` package builds and
//! prints them (Kubernetes 1.33): a [`Cause`] is one `StatusCause` of a 422 Invalid
//! ([`crate::ApiError::invalid`]), its message the error's `ErrorBody()`.
//!
//! Values print as `ErrorBody` prints them: strings with Go's `%q` ([`go_quote`]), `int64`,
//! `float64` and `bool` with `%v` ([`go_float`] for floats), anything else with Go's `%#v`
//! ([`go_sharp`] for decoded JSON: `map[string]interface {}{"a":1}`). The constructors take
//! the value already printed, since what Go prints depends on the Go type the value had.
//! [`json_equal`] compares decoded values as Go compares them (numbers by value).

use serde_json::Value;

/// A `(field, message, reason)` cause of a 422 Invalid.
pub type Cause = (String, String, String);

/// A field path as kube's `field.Path` is: a chain of steps, each a link to its parent's, so
/// that a walk descending `d` levels takes one step per level, not a copy of the parent's
/// text (which wrote `d²/2` steps for a schema nested `d` levels); its text
/// (`spec.versions[0].schema.openAPIV3Schema.properties[a].items`) is written only when a
/// cause needs it, without recursion.
#[derive(Clone, Copy, Debug)]
pub struct FieldPath<'a> {
    parent: Option<&'a FieldPath<'a>>,
    /// The root's whole text, or a step's field name (written after a `.`).
    name: &'a str,
    key: Step<'a>,
}

/// What follows a step's name: nothing, `[key]` or `[index]`.
#[derive(Clone, Copy, Debug)]
enum Step<'a> {
    Name,
    Key(&'a str),
    Index(usize),
}

impl<'a> FieldPath<'a> {
    /// The path whose text is `text`.
    #[must_use]
    pub fn root(text: &'a str) -> FieldPath<'a> {
        FieldPath {
            parent: None,
            name: text,
            key: Step::Name,
        }
    }

    /// `<self>.<name>`.
    #[must_use]
    pub fn child(&'a self, name: &'a str) -> FieldPath<'a> {
        FieldPath {
            parent: Some(self),
            name,
            key: Step::Name,
        }
    }

    /// `<self>.<name>[<key>]`.
    #[must_use]
    pub fn key(&'a self, name: &'a str, key: &'a str) -> FieldPath<'a> {
        FieldPath {
            parent: Some(self),
            name,
            key: Step::Key(key),
        }
    }

    /// `<self>.<name>[<index>]`.
    #[must_use]
    pub fn index(&'a self, name: &'a str, index: usize) -> FieldPath<'a> {
        FieldPath {
            parent: Some(self),
            name,
            key: Step::Index(index),
        }
    }
}

impl std::fmt::Display for FieldPath<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut steps = Vec::new();
        let mut at = Some(self);
        while let Some(step) = at {
            steps.push(step);
            at = step.parent;
        }
        for step in steps.into_iter().rev() {
            if step.parent.is_some() {
                f.write_str(".")?;
            }
            f.write_str(step.name)?;
            match step.key {
                Step::Name => {}
                Step::Key(key) => write!(f, "[{key}]")?,
                Step::Index(index) => write!(f, "[{index}]")?,
            }
        }
        Ok(())
    }
}

/// `field.Required(path, detail)`.
#[must_use]
pub fn required(path: &str, detail: &str) -> Cause {
    let message = if detail.is_empty() {
        "Required value".to_owned()
    } else {
        format!("Required value: {detail}")
    };
    (path.to_owned(), message, "FieldValueRequired".to_owned())
}

/// `field.Forbidden(path, detail)`.
#[must_use]
pub fn forbidden(path: &str, detail: &str) -> Cause {
    (
        path.to_owned(),
        format!("Forbidden: {detail}"),
        "FieldValueForbidden".to_owned(),
    )
}

/// `field.Invalid(path, value, detail)`, the value printed.
#[must_use]
pub fn invalid(path: &str, printed: &str, detail: &str) -> Cause {
    (
        path.to_owned(),
        format!("Invalid value: {printed}: {detail}"),
        "FieldValueInvalid".to_owned(),
    )
}

/// `field.Invalid(path, field.OmitValueType{}, detail)`: no value printed.
#[must_use]
pub fn invalid_omitted(path: &str, detail: &str) -> Cause {
    (
        path.to_owned(),
        format!("Invalid value: {detail}"),
        "FieldValueInvalid".to_owned(),
    )
}

/// `field.TypeInvalid(path, value, detail)`, the value printed.
#[must_use]
pub fn type_invalid(path: &str, printed: &str, detail: &str) -> Cause {
    (
        path.to_owned(),
        format!("Invalid value: {printed}: {detail}"),
        "FieldValueTypeInvalid".to_owned(),
    )
}

/// `field.NotSupported(path, value, supported)`, the value printed; each supported value is
/// quoted (`strconv.Quote`).
#[must_use]
pub fn not_supported(path: &str, printed: &str, supported: &[&str]) -> Cause {
    let list: Vec<String> = supported.iter().map(|s| go_quote(s)).collect();
    (
        path.to_owned(),
        format!(
            "Unsupported value: {printed}: supported values: {}",
            list.join(", ")
        ),
        "FieldValueNotSupported".to_owned(),
    )
}

/// `field.Duplicate(path, value)`, the value printed.
#[must_use]
pub fn duplicate(path: &str, printed: &str) -> Cause {
    (
        path.to_owned(),
        format!("Duplicate value: {printed}"),
        "FieldValueDuplicate".to_owned(),
    )
}

/// `field.TooMany(path, actual, max)`.
#[must_use]
pub fn too_many(path: &str, actual: usize, max: i64) -> Cause {
    (
        path.to_owned(),
        format!("Too many: {actual}: must have at most {max} items"),
        "FieldValueTooMany".to_owned(),
    )
}

/// `field.TooLong(path, value, max)`: the value is never printed.
#[must_use]
pub fn too_long(path: &str, max: i64) -> Cause {
    (
        path.to_owned(),
        format!("Too long: may not be more than {max} bytes"),
        "FieldValueTooLong".to_owned(),
    )
}

/// A decoded JSON value as `ErrorBody` prints it: strings quoted, numbers and booleans as
/// they are, objects and arrays as Go's `%#v` of `map[string]interface{}`/`[]interface{}`.
#[must_use]
pub fn go_value(value: &Value) -> String {
    match value {
        Value::Number(n) => match n.as_i64() {
            Some(i) => i.to_string(),
            None => go_float(n.as_f64().unwrap_or(0.0)),
        },
        Value::String(s) => go_quote(s),
        Value::Null => "null".to_owned(),
        other => go_sharp(other),
    }
}

/// A decoded JSON value as Go's `%#v` prints it (`map[string]interface {}{"a":1}`, keys
/// sorted; `interface {}(nil)` for null).
#[must_use]
pub fn go_sharp(value: &Value) -> String {
    match value {
        Value::Null => "interface {}(nil)".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Number(_) | Value::String(_) => go_value(value),
        Value::Array(items) => {
            let inner: Vec<String> = items.iter().map(go_sharp).collect();
            format!("[]interface {{}}{{{}}}", inner.join(", "))
        }
        Value::Object(fields) => {
            let mut keys: Vec<&String> = fields.keys().collect();
            keys.sort();
            let inner: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{}:{}", go_quote(k), go_sharp(&fields[k])))
                .collect();
            format!("map[string]interface {{}}{{{}}}", inner.join(", "))
        }
    }
}

/// A float as Go's `%v` prints it (`strconv.FormatFloat(f, 'g', -1, 64)`: the shortest
/// representation, in exponent form when the exponent is below -4 or at least 6, `1e+06`,
/// `1.5e-05`): the core's, which the JSON and YAML writers' number texts share.
pub use watchkeeper_core::gonum::format_g as go_float;

/// A string as Go's `%q` (`strconv.Quote`) prints it (the core's, which its selector errors
/// share).
pub use watchkeeper_core::gotext::go_quote;

/// kube's `utilerrors.NewAggregate(...).Error()`: one error as it is; several without
/// repeats, bracketed unless only one is left.
#[must_use]
pub fn aggregate(errors: &[String]) -> String {
    if errors.len() == 1 {
        return errors[0].clone();
    }
    let mut seen: Vec<&str> = Vec::new();
    for error in errors {
        if !seen.contains(&error.as_str()) {
            seen.push(error);
        }
    }
    if seen.len() == 1 {
        seen[0].to_owned()
    } else {
        format!("[{}]", seen.join(", "))
    }
}

/// JSON equality with numbers compared by value (`1` equals `1.0`), as Go compares decoded
/// values whose numbers are `float64` (patches' `test`, schemas' `enum` and list keys).
#[must_use]
pub fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            x == y || matches!((x.as_f64(), y.as_f64()), (Some(p), Some(q)) if p == q)
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_equal(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_equal(v, w)))
        }
        _ => a == b,
    }
}

/// A JSON value as a Go `string` field decodes it: absent or `null` is `""`.
pub fn go_string(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn values_print_as_go_prints_them() {
        for (f, text) in [
            (1e6, "1e+06"),
            (1.5e6, "1.5e+06"),
            (123_456.0, "123456"),
            (0.0001, "0.0001"),
            (0.000_015, "1.5e-05"),
            (-2.5, "-2.5"),
            (0.0, "0"),
            (1e21, "1e+21"),
        ] {
            assert_eq!(go_float(f), text, "{f}");
        }
        assert_eq!(
            go_sharp(&json!({"b": [1, "x", null, true], "a": 1.5})),
            "map[string]interface {}{\"a\":1.5, \"b\":[]interface {}{1, \"x\", interface {}(nil), true}}"
        );
        assert_eq!(go_value(&json!("a\"b")), "\"a\\\"b\"");
        assert_eq!(go_value(&json!(null)), "null");
        assert_eq!(
            go_quote("tab\there\u{a0}\u{7f}é😀\u{e0001}"),
            "\"tab\\there\\u00a0\\x7fé😀\\U000e0001\""
        );
        assert_eq!(
            not_supported("f", "\"x\"", &["a", "b"]).1,
            "Unsupported value: \"x\": supported values: \"a\", \"b\""
        );
        assert_eq!(required("f", "").1, "Required value");
        assert_eq!(required("f", "why").1, "Required value: why");
    }
}

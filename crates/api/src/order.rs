//! JSON text in kube-apiserver's field order and framing.
//!
//! kube-apiserver encodes Go structs, so its fields come in declaration order (`kind`,
//! `apiVersion`, `metadata`, `spec`, `status`; a Status's `status`, `message`, `reason`,
//! `details`, `code`), and its encoder ends every body with a newline. serde_json's maps (without
//! the workspace-wide `preserve_order` feature, which this crate does not turn on) are sorted by
//! key, so these functions write the text themselves.
//!
//! ## Guarantees
//! - The text parses back to exactly the given value (only the order of keys differs from
//!   `serde_json::to_string`), and ends with one `\n`.
//! - Known keys come first in Go's order; any other keys follow in sorted order. Nested maps
//!   with a known Go order (`metadata`, Status `details` and its `causes`, owner references) are
//!   ordered too; other nested maps are sorted.

use std::fmt::Write as _;

use serde_json::{Map, Value};

/// `metav1.Status` field order.
const STATUS_ORDER: &[&str] = &[
    "kind",
    "apiVersion",
    "metadata",
    "status",
    "message",
    "reason",
    "details",
    "code",
];

/// `metav1.StatusDetails` field order.
const DETAILS_ORDER: &[&str] = &[
    "name",
    "group",
    "kind",
    "uid",
    "causes",
    "retryAfterSeconds",
];

/// `metav1.StatusCause` field order.
const CAUSE_ORDER: &[&str] = &["reason", "message", "field"];

/// Top-level order of an object: `TypeMeta`, `ObjectMeta`, then spec and status (the order
/// of every built-in kind that has them).
const OBJECT_ORDER: &[&str] = &["kind", "apiVersion", "metadata", "spec", "status"];

/// `metav1.ObjectMeta` field order.
const METADATA_ORDER: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

/// `metav1.OwnerReference` field order.
const OWNER_REFERENCE_ORDER: &[&str] = &[
    "apiVersion",
    "kind",
    "name",
    "uid",
    "controller",
    "blockOwnerDeletion",
];

/// How to order the keys of a map and of the maps under it.
#[derive(Clone, Copy)]
enum Layout {
    Sorted,
    Status,
    Details,
    Cause,
    Object,
    Metadata,
    OwnerReference,
}

impl Layout {
    fn order(self) -> &'static [&'static str] {
        match self {
            Layout::Sorted => &[],
            Layout::Status => STATUS_ORDER,
            Layout::Details => DETAILS_ORDER,
            Layout::Cause => CAUSE_ORDER,
            Layout::Object => OBJECT_ORDER,
            Layout::Metadata => METADATA_ORDER,
            Layout::OwnerReference => OWNER_REFERENCE_ORDER,
        }
    }

    /// The layout of the value under `key`.
    fn child(self, key: &str) -> Layout {
        match (self, key) {
            (Layout::Status, "details") => Layout::Details,
            (Layout::Status | Layout::Object, "metadata") => Layout::Metadata,
            (Layout::Details, "causes") => Layout::Cause,
            (Layout::Metadata, "ownerReferences") => Layout::OwnerReference,
            _ => Layout::Sorted,
        }
    }
}

fn write_value(out: &mut String, value: &Value, layout: Layout) {
    match value {
        Value::Object(map) => write_map(out, map, layout),
        Value::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                // Items of a list of maps share the list's layout (causes, owner references).
                write_value(out, item, layout);
            }
            out.push(']');
        }
        scalar => {
            // A scalar's text cannot fail to encode.
            let _ = write!(out, "{scalar}");
        }
    }
}

fn write_map(out: &mut String, map: &Map<String, Value>, layout: Layout) {
    let order = layout.order();
    out.push('{');
    let mut first = true;
    let mut entry = |out: &mut String, key: &str, value: &Value| {
        if !first {
            out.push(',');
        }
        first = false;
        let _ = write!(out, "{}:", Value::from(key));
        write_value(out, value, layout.child(key));
    };
    for key in order {
        if let Some(value) = map.get(*key) {
            entry(out, key, value);
        }
    }
    for (key, value) in map {
        if !order.contains(&key.as_str()) {
            entry(out, key, value);
        }
    }
    out.push('}');
}

/// A `Status` (failure or success) as kube-apiserver writes it: `{"kind":"Status",
/// "apiVersion":"v1","metadata":{},"status":...,"message":...,"reason":...,"details":{...},
/// "code":N}` and a newline.
#[must_use]
pub fn status_body(status: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, status, Layout::Status);
    out.push('\n');
    out
}

/// A single object as kube-apiserver writes it: `kind`, `apiVersion`, `metadata` (in
/// `ObjectMeta` order), `spec`, `status`, then any other top-level fields sorted, and a
/// newline.
#[must_use]
pub fn object_body(object: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, object, Layout::Object);
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn status_bodies_in_kubernetes_order() {
        let pods = crate::builtin_resources()
            .into_iter()
            .find(|d| d.plural == "pods")
            .unwrap();
        assert_eq!(
            crate::ApiError::not_found(&pods, "x").to_status_body(),
            concat!(
                r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","#,
                r#""message":"pods \"x\" not found","reason":"NotFound","#,
                r#""details":{"name":"x","kind":"pods"},"code":404}"#,
                "\n"
            )
        );
        let invalid = crate::ApiError::invalid(
            &pods,
            "x",
            vec![(
                "metadata.name".to_owned(),
                "Invalid value: \"X\"".to_owned(),
                "FieldValueInvalid".to_owned(),
            )],
        );
        assert_eq!(
            invalid.to_status_body(),
            concat!(
                r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","#,
                r#""message":"Pod \"x\" is invalid: metadata.name: Invalid value: \"X\"","#,
                r#""reason":"Invalid","details":{"name":"x","kind":"Pod","causes":"#,
                r#"[{"reason":"FieldValueInvalid","message":"Invalid value: \"X\"","field":"metadata.name"}]},"#,
                r#""code":422}"#,
                "\n"
            )
        );
        let body = crate::ApiError::bad_request("b").to_status_body();
        assert_eq!(
            serde_json::from_str::<Value>(&body).unwrap(),
            crate::ApiError::bad_request("b").to_status()
        );
    }

    #[test]
    fn object_order_and_round_trip() {
        let object = json!({
            "status": {"phase": "Pending"},
            "spec": {"b": 1, "a": [{"z": 1, "y": 2}]},
            "metadata": {"uid": "u", "name": "n", "labels": {"b": "1", "a": "2"},
                         "ownerReferences": [{"uid": "x", "kind": "K", "apiVersion": "v1", "name": "o"}]},
            "apiVersion": "v1",
            "kind": "Pod",
            "data": "\"quoted\"\n"
        });
        let text = object_body(&object);
        assert_eq!(
            text,
            concat!(
                r#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"n","uid":"u","labels":{"a":"2","b":"1"},"#,
                r#""ownerReferences":[{"apiVersion":"v1","kind":"K","name":"o","uid":"x"}]},"#,
                r#""spec":{"a":[{"y":2,"z":1}],"b":1},"status":{"phase":"Pending"},"data":"\"quoted\"\n"}"#,
                "\n"
            )
        );
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), object);
    }
}

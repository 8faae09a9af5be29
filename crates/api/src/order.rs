//! JSON text in kube-apiserver's field order and framing.
//!
//! kube-apiserver encodes Go structs, so its fields come in declaration order (`kind`,
//! `apiVersion`, `metadata`, `spec`, `status`; a Status's `status`, `message`, `reason`,
//! `details`, `code`), and its encoder ends every body with a newline. serde_json's maps (without
//! the workspace-wide `preserve_order` feature, which this crate does not turn on) are sorted by
//! key, so these functions write the text with the core's writer ([`watchkeeper_core::order`],
//! the same one that writes the cached encodings every GET, LIST and watch event shares).
//!
//! ## Guarantees
//! - The text parses back to exactly the given value (only the order of keys differs from
//!   `serde_json::to_string`), and ends with one `\n`.
//! - Known keys come first in Go's order; any other keys follow in sorted order. Nested maps
//!   with a known Go order (`metadata`, Status `details` and its `causes`, owner references) are
//!   ordered too; other nested maps are sorted.

use serde_json::Value;
use watchkeeper_core::order;

/// A `Status` (failure or success) as kube-apiserver writes it: `{"kind":"Status",
/// "apiVersion":"v1","metadata":{},"status":...,"message":...,"reason":...,"details":{...},
/// "code":N}` and a newline.
#[must_use]
pub fn status_body(status: &Value) -> String {
    let mut out = Vec::with_capacity(256);
    order::write_status(&mut out, status);
    out.push(b'\n');
    // The writer writes JSON, which is UTF-8.
    String::from_utf8(out).unwrap_or_default()
}

/// A single object as kube-apiserver writes it: `kind`, `apiVersion`, `metadata` (in
/// `ObjectMeta` order), `spec`, `status`, then any other top-level fields sorted, and a
/// newline. A `Status` (the answer of some deletions) is written as [`status_body`] does.
#[must_use]
pub fn object_body(object: &Value) -> String {
    if object.get("kind").and_then(Value::as_str) == Some("Status") {
        return status_body(object);
    }
    let mut out = Vec::with_capacity(512);
    order::write_object(&mut out, object);
    out.push(b'\n');
    // The writer writes JSON, which is UTF-8.
    String::from_utf8(out).unwrap_or_default()
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

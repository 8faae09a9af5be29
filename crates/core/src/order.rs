//! JSON text in kube-apiserver's field order.
//!
//! kube-apiserver encodes Go structs, so its fields come in declaration order (`kind`,
//! `apiVersion`, `metadata`, `spec`, `status`; a Status's `status`, `message`, `reason`,
//! `details`, `code`). serde_json's maps (without its `preserve_order` feature) are sorted by
//! key, so these functions write the text themselves. Clients notice: a typed decoder's error
//! names the position of `kind` (kube-rs' "expected Pod at line 1 column 17"), and tests
//! compare bytes.
//!
//! ## Guarantees
//! - The text parses back to exactly the given value (only the order of keys differs from
//!   `serde_json::to_vec`).
//! - Known keys come first in Go's order; any other keys follow in sorted order. Nested maps
//!   with a known Go order (`metadata`, its owner references and managed fields entries, a
//!   Status's `details` and their `causes`) are ordered too; any other nested map is written
//!   by serde_json in one call (sorted), so the cost over `serde_json::to_vec` is a few key
//!   lookups per object.
//! - Deterministic: the same value always gives the same bytes.

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

/// `metav1.ManagedFieldsEntry` field order.
const MANAGED_FIELDS_ORDER: &[&str] = &[
    "manager",
    "operation",
    "apiVersion",
    "time",
    "fieldsType",
    "fieldsV1",
    "subresource",
];

/// How to order the keys of a map and of the maps under it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Layout {
    Sorted,
    Status,
    Details,
    Cause,
    Object,
    Metadata,
    OwnerReference,
    ManagedFields,
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
            Layout::ManagedFields => MANAGED_FIELDS_ORDER,
        }
    }

    /// The layout of the value under `key`.
    fn child(self, key: &str) -> Layout {
        match (self, key) {
            (Layout::Status, "details") => Layout::Details,
            (Layout::Status | Layout::Object, "metadata") => Layout::Metadata,
            (Layout::Details, "causes") => Layout::Cause,
            (Layout::Metadata, "ownerReferences") => Layout::OwnerReference,
            (Layout::Metadata, "managedFields") => Layout::ManagedFields,
            _ => Layout::Sorted,
        }
    }
}

fn write_value(out: &mut Vec<u8>, value: &Value, layout: Layout) {
    match value {
        Value::Object(map) if layout != Layout::Sorted => write_map(out, map, layout),
        Value::Array(items) if layout != Layout::Sorted => {
            out.push(b'[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(b',');
                }
                // Items of a list of maps share the list's layout (causes, owner references).
                write_value(out, item, layout);
            }
            out.push(b']');
        }
        // Everything under a sorted map is sorted: serde_json writes it in one call. Writing
        // a `Value` into a `Vec` cannot fail (its map keys are strings).
        other => serde_json::to_writer(&mut *out, other).unwrap_or_default(),
    }
}

/// The most keys a known Go order lists (`ObjectMeta`'s).
const MAX_ORDER: usize = METADATA_ORDER.len();
const _: () = assert!(
    STATUS_ORDER.len() <= MAX_ORDER
        && DETAILS_ORDER.len() <= MAX_ORDER
        && CAUSE_ORDER.len() <= MAX_ORDER
        && OBJECT_ORDER.len() <= MAX_ORDER
        && OWNER_REFERENCE_ORDER.len() <= MAX_ORDER
        && MANAGED_FIELDS_ORDER.len() <= MAX_ORDER
);

fn write_map(out: &mut Vec<u8>, map: &Map<String, Value>, layout: Layout) {
    let order = layout.order();
    // One pass over the map places the known keys by their Go position (a map lookup per
    // known key costs several times more, as callgrind showed); the others follow, sorted.
    let mut known: [Option<(&str, &Value)>; MAX_ORDER] = [None; MAX_ORDER];
    let mut others = false;
    for (key, value) in map {
        match order.iter().position(|k| *k == key) {
            Some(at) => known[at] = Some((key, value)),
            None => others = true,
        }
    }
    out.push(b'{');
    let mut first = true;
    let mut entry = |out: &mut Vec<u8>, key: &str, value: &Value| {
        if !first {
            out.push(b',');
        }
        first = false;
        serde_json::to_writer(&mut *out, key).unwrap_or_default();
        out.push(b':');
        write_value(out, value, layout.child(key));
    };
    for (key, value) in known.iter().flatten() {
        entry(out, key, value);
    }
    if others {
        for (key, value) in map {
            if !order.contains(&key.as_str()) {
                entry(out, key, value);
            }
        }
    }
    out.push(b'}');
}

/// Appends `object` as kube-apiserver writes an object: `kind`, `apiVersion`, `metadata` (in
/// `ObjectMeta` order), `spec`, `status`, then any other top-level fields sorted. No newline.
pub fn write_object(out: &mut Vec<u8>, object: &Value) {
    write_value(out, object, Layout::Object);
}

/// Appends `metadata` as an `ObjectMeta` (its fields in Go order).
pub fn write_metadata(out: &mut Vec<u8>, metadata: &Value) {
    write_value(out, metadata, Layout::Metadata);
}

/// Appends a `metav1.Status` in Go order (`kind`, `apiVersion`, `metadata`, `status`,
/// `message`, `reason`, `details`, `code`). No newline.
pub fn write_status(out: &mut Vec<u8>, status: &Value) {
    write_value(out, status, Layout::Status);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn object_order_and_round_trip() {
        let object = json!({
            "status": {"phase": "Pending"},
            "spec": {"b": 1, "a": [{"z": 1, "y": 2}]},
            "metadata": {"uid": "u", "name": "n", "labels": {"b": "1", "a": "2"},
                         "managedFields": [{"time": "t", "manager": "m", "fieldsV1": {"f:b": {}, "f:a": {}}}],
                         "ownerReferences": [{"uid": "x", "kind": "K", "apiVersion": "v1", "name": "o"}]},
            "apiVersion": "v1",
            "kind": "Pod",
            "data": "\"quoted\"\n"
        });
        let mut out = Vec::new();
        write_object(&mut out, &object);
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            concat!(
                r#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"n","uid":"u","labels":{"a":"2","b":"1"},"#,
                r#""ownerReferences":[{"apiVersion":"v1","kind":"K","name":"o","uid":"x"}],"#,
                r#""managedFields":[{"manager":"m","time":"t","fieldsV1":{"f:a":{},"f:b":{}}}]},"#,
                r#""spec":{"a":[{"y":2,"z":1}],"b":1},"status":{"phase":"Pending"},"data":"\"quoted\"\n"}"#,
            )
        );
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), object);
    }

    #[test]
    fn scalars_and_lists_at_the_top_are_written_as_serde_json_writes_them() {
        for value in [
            json!(null),
            json!("a\"b"),
            json!([{"b": 1, "a": 2}]),
            json!(1.5),
        ] {
            let mut out = Vec::new();
            write_object(&mut out, &value);
            assert_eq!(out, serde_json::to_vec(&value).unwrap());
        }
    }
}

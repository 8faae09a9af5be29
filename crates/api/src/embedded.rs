//! Embedded resources (`x-kubernetes-embedded-resource: true`) inside a custom resource,
//! validated as kube-apiserver's `schemaobjectmeta.Validate` validates them (the resource's
//! own root is validated as every object's metadata is, not here):
//!
//! - `apiVersion` and `kind` are required (`spec.template.kind: Required value`), strings
//!   (`Invalid value: 5: must be a string`), not empty; `apiVersion` has at most one `/`
//!   (`unexpected GroupVersion string: a/b/c`); `kind` is a DNS-1035 label once lowercased
//!   (`may have mixed case, but should otherwise match: ...`).
//! - `metadata`, when set, as `ValidateObjectMeta` with path-segment names: `name` not `.` or
//!   `..` and without `/` or `%` (`may not contain '/'`), `generateName` without `/` or `%`, a
//!   `namespace` a DNS-1123 label, labels, annotations and finalizers as any object's.
//!
//! The walk recurses as deep as the object, which the request decoder bounds.

use serde_json::{Map, Value};

use crate::field::{Cause, go_quote, go_value, invalid, required};
use crate::names::{
    path_segment_problems, validate_dns1035_label, validate_dns1123_label, validate_meta_maps,
};
use crate::schema_node::flag;

/// The causes of the embedded resources in `object` (a custom resource) under `schema`.
pub(crate) fn check(schema: &Value, object: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    if let (Some(properties), Value::Object(fields)) =
        (schema.get("properties").and_then(Value::as_object), object)
    {
        for (key, field) in fields {
            if let Some(sub) = properties.get(key)
                && !matches!(key.as_str(), "apiVersion" | "kind" | "metadata")
            {
                walk(sub, field, key, &mut causes);
            }
        }
    }
    causes
}

fn walk(schema: &Value, value: &Value, path: &str, causes: &mut Vec<Cause>) {
    let Value::Object(s) = schema else { return };
    match value {
        Value::Object(fields) => {
            if flag(s, "x-kubernetes-embedded-resource") {
                resource(path, fields, causes);
            }
            let properties = s.get("properties").and_then(Value::as_object);
            let additional = s.get("additionalProperties").filter(|a| a.is_object());
            for (key, field) in fields {
                match (properties.and_then(|p| p.get(key)), additional) {
                    (Some(sub), _) => walk(sub, field, &format!("{path}.{key}"), causes),
                    (None, Some(sub)) => walk(sub, field, &format!("{path}[{key}]"), causes),
                    (None, None) => {}
                }
            }
        }
        Value::Array(items) => {
            if let Some(sub) = s.get("items") {
                for (index, item) in items.iter().enumerate() {
                    walk(sub, item, &format!("{path}[{index}]"), causes);
                }
            }
        }
        _ => {}
    }
}

/// `validateEmbeddedResource`.
fn resource(path: &str, fields: &Map<String, Value>, causes: &mut Vec<Cause>) {
    let at = |key: &str| format!("{path}.{key}");
    for key in ["apiVersion", "kind"] {
        match fields.get(key) {
            None => causes.push(required(&at(key), "")),
            Some(Value::String(text)) if text.is_empty() => causes.push(required(&at(key), "")),
            Some(Value::String(text)) => {
                let problem = if key == "apiVersion" {
                    (text.matches('/').count() > 1 && text != "/")
                        .then(|| format!("unexpected GroupVersion string: {text}"))
                } else {
                    validate_dns1035_label(&text.to_lowercase())
                        .err()
                        .map(|e| format!("may have mixed case, but should otherwise match: {e}"))
                };
                if let Some(problem) = problem {
                    causes.push(invalid(&at(key), &go_quote(text), &problem));
                }
            }
            Some(other) => causes.push(invalid(&at(key), &go_value(other), "must be a string")),
        }
    }
    match fields.get("metadata") {
        None | Some(Value::Null) => {}
        Some(Value::Object(meta)) => metadata(&at("metadata"), meta, causes),
        Some(other) => causes.push(invalid(
            &at("metadata"),
            &go_value(other),
            "metadata must be an object",
        )),
    }
}

/// `ValidateObjectMeta` with `path.ValidatePathSegmentName` for names.
fn metadata(at: &str, meta: &Map<String, Value>, causes: &mut Vec<Cause>) {
    let text = |key: &str| meta.get(key).and_then(Value::as_str).unwrap_or("");
    for (key, prefix) in [("generateName", true), ("name", false)] {
        let name = text(key);
        if name.is_empty() {
            continue;
        }
        for problem in path_segment_problems(name, prefix) {
            causes.push(invalid(&format!("{at}.{key}"), &go_quote(name), &problem));
        }
    }
    let namespace = text("namespace");
    if !namespace.is_empty()
        && let Err(problem) = validate_dns1123_label(namespace)
    {
        causes.push(invalid(
            &format!("{at}.namespace"),
            &go_quote(namespace),
            &problem,
        ));
    }
    if let Err(problem) = validate_meta_maps(at, meta, causes) {
        causes.push(invalid(
            at,
            &go_value(&Value::Object(meta.clone())),
            &problem,
        ));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn messages(object: &Value) -> Vec<String> {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object",
            "properties": {
                "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                    "x-kubernetes-preserve-unknown-fields": true},
                "list": {"type": "array", "items": {"type": "object",
                    "x-kubernetes-embedded-resource": true,
                    "x-kubernetes-preserve-unknown-fields": true}}}}}});
        check(&schema, object)
            .into_iter()
            .map(|(field, message, _)| format!("{field}: {message}"))
            .collect()
    }

    #[test]
    fn embedded_resources_need_a_well_formed_api_version_and_kind() {
        let object = json!({"spec": {
            "template": {"apiVersion": "a/b/c", "kind": "Pod_Spec"},
            "list": [{"kind": 5}, {"apiVersion": "v1", "kind": "ConfigMap"}, {"apiVersion": "", "kind": ""}]
        }});
        assert_eq!(
            messages(&object),
            [
                "spec.list[0].apiVersion: Required value",
                "spec.list[0].kind: Invalid value: 5: must be a string",
                "spec.list[2].apiVersion: Required value",
                "spec.list[2].kind: Required value",
                "spec.template.apiVersion: Invalid value: \"a/b/c\": unexpected GroupVersion string: a/b/c",
                "spec.template.kind: Invalid value: \"Pod_Spec\": may have mixed case, but should otherwise match: a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
            ]
        );
    }

    #[test]
    fn embedded_metadata_is_validated_as_object_metadata_with_path_segment_names() {
        let object = json!({"spec": {"template": {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "a/b%", "generateName": "..", "namespace": "Bad_NS",
                "labels": {"ok": "bad value"}, "annotations": {"Example.COM/x": "kept"}}}}});
        assert_eq!(
            messages(&object),
            [
                "spec.template.metadata.name: Invalid value: \"a/b%\": may not contain '/'",
                "spec.template.metadata.name: Invalid value: \"a/b%\": may not contain '%'",
                "spec.template.metadata.namespace: Invalid value: \"Bad_NS\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
                "spec.template.metadata.labels: Invalid value: \"bad value\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
            ]
        );
        let fine = json!({"spec": {"template": {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "generateName": "..", "labels": {"app": "web"}}}}});
        assert_eq!(messages(&fine), Vec::<String>::new());
    }
}

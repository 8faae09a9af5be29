//! `application/yaml` bodies and answers, as kube-apiserver's YAML serializer has them: a
//! create or update body in YAML is read as the JSON it converts to (sigs.k8s.io/yaml's
//! `YAMLToJSON`), and an answer the client asked for in YAML is the JSON answer converted
//! (`JSONToYAML`: keys sorted, block style, two-space indentation, sequences at their key's
//! indentation, strings that would read as another type quoted).
//!
//! ## Guarantees
//! - A body that is a JSON object is passed through as it is (JSON is YAML; kubectl and
//!   client libraries send JSON), so everything the JSON path checks (duplicate fields, strict
//!   field validation) applies to it unchanged.
//! - Reading is bounded as server-side apply's YAML is ([`crate::apply::config`]): nesting
//!   beyond 64 levels, and aliases expanding the document past twice the body's length in
//!   nodes or scalar bytes (an alias bomb, a large string aliased many times), are 400 before
//!   any large value is built, in go-yaml's words (`yaml: document contains excessive
//!   aliasing`, `yaml: line N: exceeded max depth of 64`: [`crate::go_yaml`]).
//! - Converting an answer never changes what it says: the YAML reads back as the same JSON
//!   value (tested), and an answer that is not JSON is left alone. An object nested as deep as
//!   a stored one may be ([`crate::go_json::parse_stored`]: its managed fields nest deeper
//!   than any body) is converted too, on its own stack (before, it was answered as JSON).

use serde_json::Value;

use crate::apply::config::read_yaml;
use crate::error::ApiError;

/// The YAML media type.
pub const YAML_MEDIA_TYPE: &str = "application/yaml";

/// The JSON of a create or update body sent as `application/yaml` (see the module docs).
///
/// # Errors
/// 400 BadRequest, `error converting YAML to JSON: yaml: ...` with the parser's line, for
/// YAML that does not parse, is not valid UTF-8, or breaks the reading bounds.
pub fn json_from_yaml_body(body: &[u8]) -> Result<Vec<u8>, ApiError> {
    let first = body.iter().find(|b| !b.is_ascii_whitespace());
    if first == Some(&b'{') && serde_json::from_slice::<serde::de::IgnoredAny>(body).is_ok() {
        return Ok(body.to_vec());
    }
    let value = read_yaml(body, "")?;
    serde_json::to_vec(&value).map_err(|e| ApiError::internal(e.to_string()))
}

/// `json` as YAML (see the module docs); `None` when it is not JSON.
#[must_use]
pub fn yaml_from_json(json: &[u8]) -> Option<Vec<u8>> {
    let value: Value = crate::go_json::parse_stored(json).ok()?;
    stacker::grow(WRITE_STACK, || {
        serde_saphyr::to_string(&value).ok().map(String::into_bytes)
    })
}

/// The stack an answer is written as YAML on, in bytes (reserved, touched only as deep as the
/// writing goes: the writer recurses per level, and an object may nest as deep as a stored
/// one, [`crate::go_json::STORED_MAX_DEPTH`]).
const WRITE_STACK: usize = 16 << 20;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_read_back_as_the_same_json() {
        let object = serde_json::json!({
            "kind": "ConfigMap", "apiVersion": "v1",
            "metadata": {"name": "x", "labels": {"a": "1", "on": "yes"}, "annotations": {},
                "managedFields": [{"manager": "m", "fieldsV1": {"f:data": {".": {}, "f:k": {}}}}]},
            "data": {"multi": "line one\nline two\n", "num": "007", "t": "true", "long": "x ".repeat(100),
                "empty": "", "colon": "a: b", "dash": "- x", "null": "null"},
            "spec": {"replicas": 3, "ratio": 0.5, "on": true, "none": null, "list": [], "nested": [[1, 2], {"a": []}]}
        });
        let json = serde_json::to_vec(&object).unwrap();
        let yaml = yaml_from_json(&json).expect("JSON");
        let text = String::from_utf8(yaml.clone()).unwrap();
        // Keys sorted, sequences at their key's indentation, empty collections in flow style.
        assert!(text.starts_with("apiVersion: v1\ndata:\n"), "{text}");
        assert!(text.contains("  managedFields:\n  - fieldsV1:\n"), "{text}");
        assert!(text.contains("annotations: {}"), "{text}");
        assert!(text.contains("list: []"), "{text}");
        let back = json_from_yaml_body(&yaml).expect("reads back");
        let back: Value = serde_json::from_slice(&back).unwrap();
        assert_eq!(back, object, "{text}");
        assert_eq!(yaml_from_json(b"not json"), None);
    }

    #[test]
    fn bodies_in_yaml_convert_to_json_and_json_passes_through() {
        let body = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: yml  # a comment\ndata:\n  a: \"1\"\n  b: yes\n";
        let json: Value = serde_json::from_slice(&json_from_yaml_body(body).unwrap()).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "yml"}, "data": {"a": "1", "b": true}})
        );
        // JSON, even with a repeated key, is passed through untouched (the JSON path reports it).
        let raw = br#"{"metadata":{"name":"a","name":"b"}}"#;
        assert_eq!(json_from_yaml_body(raw).unwrap(), raw.to_vec());
        let error = json_from_yaml_body(b"a: [1, 2\nb: c").unwrap_err();
        assert_eq!(error.code, 400);
        assert!(
            error
                .message
                .starts_with("error converting YAML to JSON: yaml: "),
            "{}",
            error.message
        );
        let bomb = "a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\ng: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\n";
        assert_eq!(json_from_yaml_body(bomb.as_bytes()).unwrap_err().code, 400);
    }
}

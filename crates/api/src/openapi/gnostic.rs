//! The protobuf form of the `/openapi/v2` document: gnostic's `openapi.v2.Document`
//! (github.com/google/gnostic-models, `openapiv2/OpenAPIv2.proto`), which client-go's
//! `DiscoveryClient.OpenAPISchema` asks for (`Accept:
//! application/com.github.proto-openapi.spec.v2@v1.0+protobuf`) and accepts nothing else.
//!
//! The encoder walks the JSON document ([`super::v2::openapi_v2`]) and writes each member
//! under the field number gnostic's schema gives it; the message and field numbers below are
//! that file's. Values gnostic keeps as `Any` (vendor extensions, `default`, `enum`,
//! `example`) are written as their YAML text, as gnostic does; JSON is YAML, so the text is the
//! value's JSON. Maps (`paths`, `definitions`, `properties`, responses) are gnostic's
//! repeated `Named*` pairs, in the document's (sorted) key order. A member gnostic has no
//! field for is left out (an object's `xml`, say, which the document never has); proto3's
//! zero values (`""`, `false`, `0`) are left out as Go leaves them out.

use bytes::BufMut;
use serde_json::{Map, Value};

use crate::protobuf::encode::put_varint;

fn put_tag(out: &mut Vec<u8>, number: u32, wire: u64) {
    put_varint(out, u64::from(number) << 3 | wire);
}

fn put_bytes(out: &mut Vec<u8>, number: u32, bytes: &[u8]) {
    put_tag(out, number, 2);
    put_varint(out, bytes.len() as u64);
    out.put_slice(bytes);
}

fn put_str(out: &mut Vec<u8>, number: u32, value: Option<&Value>) {
    if let Some(text) = value
        .and_then(Value::as_str)
        .filter(|text| !text.is_empty())
    {
        put_bytes(out, number, text.as_bytes());
    }
}

fn put_strs(out: &mut Vec<u8>, number: u32, value: Option<&Value>) {
    match value {
        Some(Value::Array(items)) => {
            for item in items {
                if let Some(text) = item.as_str() {
                    put_bytes(out, number, text.as_bytes());
                }
            }
        }
        Some(Value::String(text)) => put_bytes(out, number, text.as_bytes()),
        _ => {}
    }
}

fn put_bool(out: &mut Vec<u8>, number: u32, value: Option<&Value>) {
    if value.and_then(Value::as_bool) == Some(true) {
        put_tag(out, number, 0);
        put_varint(out, 1);
    }
}

fn put_int(out: &mut Vec<u8>, number: u32, value: Option<&Value>) {
    if let Some(n) = value.and_then(Value::as_i64).filter(|n| *n != 0) {
        put_tag(out, number, 0);
        // int64: two's complement as a 64-bit varint.
        put_varint(out, n.cast_unsigned());
    }
}

fn put_double(out: &mut Vec<u8>, number: u32, value: Option<&Value>) {
    if let Some(n) = value.and_then(Value::as_f64).filter(|n| *n != 0.0) {
        put_tag(out, number, 1);
        out.put_f64_le(n);
    }
}

fn put_message(out: &mut Vec<u8>, number: u32, message: &[u8]) {
    put_bytes(out, number, message);
}

/// gnostic's `Any`: the value's YAML text (field 2).
fn any(value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    put_bytes(&mut out, 2, value.to_string().as_bytes());
    out
}

/// A `NamedX` pair: `name` (1) and the encoded `value` (2).
fn named(name: &str, value: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    put_bytes(&mut out, 1, name.as_bytes());
    put_message(&mut out, 2, value);
    out
}

/// The members of `map` whose names start with `x-`, as repeated `NamedAny` under `number`.
fn vendor_extensions(out: &mut Vec<u8>, number: u32, map: &Map<String, Value>) {
    for (key, value) in map.iter().filter(|(key, _)| key.starts_with("x-")) {
        put_message(out, number, &named(key, &any(value)));
    }
}

/// `Schema` (a JSON schema as Swagger 2.0 has it).
fn schema(value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    let Value::Object(map) = value else {
        return out;
    };
    put_str(&mut out, 1, map.get("$ref"));
    put_str(&mut out, 2, map.get("format"));
    put_str(&mut out, 3, map.get("title"));
    put_str(&mut out, 4, map.get("description"));
    if let Some(default) = map.get("default") {
        put_message(&mut out, 5, &any(default));
    }
    put_double(&mut out, 6, map.get("multipleOf"));
    put_double(&mut out, 7, map.get("maximum"));
    put_bool(&mut out, 8, map.get("exclusiveMaximum"));
    put_double(&mut out, 9, map.get("minimum"));
    put_bool(&mut out, 10, map.get("exclusiveMinimum"));
    put_int(&mut out, 11, map.get("maxLength"));
    put_int(&mut out, 12, map.get("minLength"));
    put_str(&mut out, 13, map.get("pattern"));
    put_int(&mut out, 14, map.get("maxItems"));
    put_int(&mut out, 15, map.get("minItems"));
    put_bool(&mut out, 16, map.get("uniqueItems"));
    put_int(&mut out, 17, map.get("maxProperties"));
    put_int(&mut out, 18, map.get("minProperties"));
    put_strs(&mut out, 19, map.get("required"));
    for item in map
        .get("enum")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        put_message(&mut out, 20, &any(item));
    }
    match map.get("additionalProperties") {
        // AdditionalPropertiesItem: a schema (1) or a boolean (2).
        Some(Value::Bool(allowed)) => {
            let mut item = Vec::new();
            put_tag(&mut item, 2, 0);
            put_varint(&mut item, u64::from(*allowed));
            put_message(&mut out, 21, &item);
        }
        Some(additional @ Value::Object(_)) => {
            let mut item = Vec::new();
            put_message(&mut item, 1, &schema(additional));
            put_message(&mut out, 21, &item);
        }
        _ => {}
    }
    if let Some(ty) = map.get("type") {
        // TypeItem: repeated string (1).
        let mut item = Vec::new();
        put_strs(&mut item, 1, Some(ty));
        put_message(&mut out, 22, &item);
    }
    if let Some(items) = map.get("items") {
        // ItemsItem: repeated Schema (1).
        let mut item = Vec::new();
        match items {
            Value::Array(list) => list
                .iter()
                .for_each(|one| put_message(&mut item, 1, &schema(one))),
            one => put_message(&mut item, 1, &schema(one)),
        }
        put_message(&mut out, 23, &item);
    }
    for part in map
        .get("allOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        put_message(&mut out, 24, &schema(part));
    }
    if let Some(Value::Object(properties)) = map.get("properties") {
        // Properties: repeated NamedSchema (1).
        let mut item = Vec::new();
        for (name, property) in properties {
            put_message(&mut item, 1, &named(name, &schema(property)));
        }
        put_message(&mut out, 25, &item);
    }
    put_str(&mut out, 26, map.get("discriminator"));
    put_bool(&mut out, 27, map.get("readOnly"));
    if let Some(example) = map.get("example") {
        put_message(&mut out, 30, &any(example));
    }
    vendor_extensions(&mut out, 31, map);
    out
}

/// A query, path or header parameter: the `*ParameterSubSchema` messages share their
/// fields' order, with `allowEmptyValue` only in the query one.
fn non_body_parameter(map: &Map<String, Value>) -> Vec<u8> {
    let (oneof, shift) = match map.get("in").and_then(Value::as_str) {
        Some("header") => (1, 0),
        Some("formData") => (2, 1),
        Some("path") => (4, 0),
        _ => (3, 1),
    };
    let mut sub = Vec::new();
    put_bool(&mut sub, 1, map.get("required"));
    put_str(&mut sub, 2, map.get("in"));
    put_str(&mut sub, 3, map.get("description"));
    put_str(&mut sub, 4, map.get("name"));
    if shift == 1 {
        put_bool(&mut sub, 5, map.get("allowEmptyValue"));
    }
    put_str(&mut sub, 5 + shift, map.get("type"));
    put_str(&mut sub, 6 + shift, map.get("format"));
    put_str(&mut sub, 8 + shift, map.get("collectionFormat"));
    if let Some(default) = map.get("default") {
        put_message(&mut sub, 9 + shift, &any(default));
    }
    put_bool(&mut sub, 19 + shift, map.get("uniqueItems"));
    for item in map
        .get("enum")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        put_message(&mut sub, 20 + shift, &any(item));
    }
    vendor_extensions(&mut sub, 22 + shift, map);
    let mut non_body = Vec::new();
    put_message(&mut non_body, oneof, &sub);
    non_body
}

/// `ParametersItem` holding a `Parameter` (body or not).
fn parameters_item(value: &Value) -> Vec<u8> {
    let mut parameter = Vec::new();
    if let Value::Object(map) = value {
        if map.get("in").and_then(Value::as_str) == Some("body") {
            let mut body = Vec::new();
            put_str(&mut body, 1, map.get("description"));
            put_str(&mut body, 2, map.get("name"));
            put_str(&mut body, 3, map.get("in"));
            put_bool(&mut body, 4, map.get("required"));
            if let Some(body_schema) = map.get("schema") {
                put_message(&mut body, 5, &schema(body_schema));
            }
            vendor_extensions(&mut body, 6, map);
            put_message(&mut parameter, 1, &body);
        } else {
            put_message(&mut parameter, 2, &non_body_parameter(map));
        }
    }
    let mut item = Vec::new();
    put_message(&mut item, 1, &parameter);
    item
}

/// `Responses`: repeated `NamedResponseValue` (1), each a `Response` (`ResponseValue` 1).
fn responses(value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    for (code, response) in value.as_object().into_iter().flatten() {
        let mut message = Vec::new();
        put_str(&mut message, 1, response.get("description"));
        if let Some(response_schema) = response.get("schema") {
            let mut item = Vec::new();
            put_message(&mut item, 1, &schema(response_schema));
            put_message(&mut message, 2, &item);
        }
        let mut response_value = Vec::new();
        put_message(&mut response_value, 1, &message);
        put_message(&mut out, 1, &named(code, &response_value));
    }
    out
}

fn operation(value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    let Value::Object(map) = value else {
        return out;
    };
    put_strs(&mut out, 1, map.get("tags"));
    put_str(&mut out, 2, map.get("summary"));
    put_str(&mut out, 3, map.get("description"));
    put_str(&mut out, 5, map.get("operationId"));
    put_strs(&mut out, 6, map.get("produces"));
    put_strs(&mut out, 7, map.get("consumes"));
    for parameter in map
        .get("parameters")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        put_message(&mut out, 8, &parameters_item(parameter));
    }
    if let Some(codes) = map.get("responses") {
        put_message(&mut out, 9, &responses(codes));
    }
    put_strs(&mut out, 10, map.get("schemes"));
    put_bool(&mut out, 11, map.get("deprecated"));
    vendor_extensions(&mut out, 13, map);
    out
}

fn path_item(value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    let Value::Object(map) = value else {
        return out;
    };
    for (number, method) in [
        (2, "get"),
        (3, "put"),
        (4, "post"),
        (5, "delete"),
        (6, "options"),
        (7, "head"),
        (8, "patch"),
    ] {
        if let Some(op) = map.get(method) {
            put_message(&mut out, number, &operation(op));
        }
    }
    for parameter in map
        .get("parameters")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        put_message(&mut out, 9, &parameters_item(parameter));
    }
    vendor_extensions(&mut out, 10, map);
    out
}

/// `SecurityDefinitions`: each an `ApiKeySecurity` (the only kind this document has) or a
/// `BasicAuthenticationSecurity`.
fn security_definitions(value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, definition) in value.as_object().into_iter().flatten() {
        let mut security = Vec::new();
        let oneof = if definition.get("type").and_then(Value::as_str) == Some("basic") {
            put_str(&mut security, 1, definition.get("type"));
            put_str(&mut security, 2, definition.get("description"));
            1
        } else {
            put_str(&mut security, 1, definition.get("type"));
            put_str(&mut security, 2, definition.get("name"));
            put_str(&mut security, 3, definition.get("in"));
            put_str(&mut security, 4, definition.get("description"));
            2
        };
        let mut item = Vec::new();
        put_message(&mut item, oneof, &security);
        put_message(&mut out, 1, &named(name, &item));
    }
    out
}

/// The gnostic `openapi.v2.Document` of a Swagger 2.0 document.
#[must_use]
pub fn openapi_v2_protobuf(document: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    let Value::Object(map) = document else {
        return out;
    };
    put_str(&mut out, 1, map.get("swagger"));
    if let Some(info) = map.get("info") {
        let mut message = Vec::new();
        put_str(&mut message, 1, info.get("title"));
        put_str(&mut message, 2, info.get("version"));
        put_str(&mut message, 3, info.get("description"));
        put_message(&mut out, 2, &message);
    }
    put_str(&mut out, 3, map.get("host"));
    put_str(&mut out, 4, map.get("basePath"));
    put_strs(&mut out, 5, map.get("schemes"));
    put_strs(&mut out, 6, map.get("consumes"));
    put_strs(&mut out, 7, map.get("produces"));
    if let Some(Value::Object(paths)) = map.get("paths") {
        // Paths: repeated NamedPathItem (2).
        let mut message = Vec::new();
        for (path, item) in paths {
            put_message(&mut message, 2, &named(path, &path_item(item)));
        }
        put_message(&mut out, 8, &message);
    }
    if let Some(Value::Object(definitions)) = map.get("definitions") {
        // Definitions: repeated NamedSchema (1).
        let mut message = Vec::new();
        for (name, definition) in definitions {
            put_message(&mut message, 1, &named(name, &schema(definition)));
        }
        put_message(&mut out, 9, &message);
    }
    for requirement in map
        .get("security")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        // SecurityRequirement: repeated NamedStringArray (1) of StringArray (repeated 1).
        let mut message = Vec::new();
        for (name, scopes) in requirement.as_object().into_iter().flatten() {
            let mut array = Vec::new();
            put_strs(&mut array, 1, Some(scopes));
            put_message(&mut message, 1, &named(name, &array));
        }
        put_message(&mut out, 12, &message);
    }
    if let Some(definitions) = map.get("securityDefinitions") {
        put_message(&mut out, 13, &security_definitions(definitions));
    }
    vendor_extensions(&mut out, 16, map);
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::resources::builtin_resources;

    /// One field as the wire has it: a varint, or the bytes of a length-delimited one.
    #[derive(Debug)]
    enum Wire<'a> {
        Varint(u64),
        Fixed64(u64),
        Bytes(&'a [u8]),
    }

    fn varint(bytes: &mut &[u8]) -> u64 {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let (&byte, rest) = bytes.split_first().expect("varint cut short");
            *bytes = rest;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return value;
            }
        }
        panic!("varint longer than 10 bytes")
    }

    /// Every field of a message, in wire order; panics unless the bytes are exactly a message.
    fn fields(mut bytes: &[u8]) -> Vec<(u64, Wire<'_>)> {
        let mut out = Vec::new();
        while !bytes.is_empty() {
            let key = varint(&mut bytes);
            let wire = match key & 7 {
                0 => Wire::Varint(varint(&mut bytes)),
                1 => {
                    let (value, rest) = bytes.split_at(8);
                    bytes = rest;
                    Wire::Fixed64(u64::from_le_bytes(value.try_into().unwrap()))
                }
                2 => {
                    let len = usize::try_from(varint(&mut bytes)).unwrap();
                    let (value, rest) = bytes.split_at(len);
                    bytes = rest;
                    Wire::Bytes(value)
                }
                other => panic!("wire type {other}"),
            };
            out.push((key >> 3, wire));
        }
        out
    }

    fn bytes_of(message: &[u8], number: u64) -> Vec<&[u8]> {
        fields(message)
            .into_iter()
            .filter_map(|(n, wire)| match wire {
                Wire::Bytes(bytes) if n == number => Some(bytes),
                _ => None,
            })
            .collect()
    }

    fn text(message: &[u8], number: u64) -> String {
        bytes_of(message, number)
            .first()
            .map(|bytes| String::from_utf8(bytes.to_vec()).unwrap())
            .unwrap_or_default()
    }

    /// The `value` of the `Named*` entry called `name` among `entries`.
    fn entry<'a>(entries: &[&'a [u8]], name: &str) -> &'a [u8] {
        entries
            .iter()
            .find(|named| text(named, 1) == name)
            .map(|named| bytes_of(named, 2)[0])
            .unwrap_or_else(|| panic!("no entry {name}"))
    }

    /// An `Any`'s YAML text read as JSON (the encoder writes JSON, which is YAML).
    fn any_value(message: &[u8]) -> Value {
        serde_json::from_str(&text(message, 2)).unwrap()
    }

    #[test]
    fn the_document_reads_back_as_gnostic_messages() {
        let document = super::super::v2::openapi_v2(&builtin_resources(), &Default::default());
        let encoded = openapi_v2_protobuf(&document);
        // Document: swagger (1), info (2), paths (8), definitions (9).
        assert_eq!(text(&encoded, 1), "2.0");
        assert_eq!(text(bytes_of(&encoded, 2)[0], 1), "Kubernetes");
        let definitions = bytes_of(bytes_of(&encoded, 9)[0], 1);
        assert_eq!(
            definitions.len(),
            document["definitions"].as_object().unwrap().len()
        );

        // Schema: vendor extensions (31) carry the group-version-kind kubectl looks up.
        let pod = entry(&definitions, "io.k8s.api.core.v1.Pod");
        let extensions = bytes_of(pod, 31);
        assert_eq!(
            any_value(entry(&extensions, "x-kubernetes-group-version-kind")),
            json!([{"group": "", "kind": "Pod", "version": "v1"}])
        );
        // properties (25) → NamedSchema; a reference (1) with its description (4).
        let properties = bytes_of(bytes_of(pod, 25)[0], 1);
        let spec = entry(&properties, "spec");
        assert_eq!(text(spec, 1), "#/definitions/io.k8s.api.core.v1.PodSpec");
        assert!(!text(spec, 4).is_empty());
        // type (22) is a TypeItem; arrays' items (23) an ItemsItem of one schema.
        let pod_spec = entry(&definitions, "io.k8s.api.core.v1.PodSpec");
        let containers = entry(&bytes_of(bytes_of(pod_spec, 25)[0], 1), "containers");
        assert_eq!(text(bytes_of(containers, 22)[0], 1), "array");
        let item = bytes_of(bytes_of(containers, 23)[0], 1);
        assert_eq!(item.len(), 1);
        assert_eq!(
            text(item[0], 1),
            "#/definitions/io.k8s.api.core.v1.Container"
        );
        // A map's additionalProperties (21) holds a schema (1).
        let meta = entry(
            &definitions,
            "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
        );
        let labels = entry(&bytes_of(bytes_of(meta, 25)[0], 1), "labels");
        let value = bytes_of(bytes_of(labels, 21)[0], 1)[0];
        assert_eq!(text(bytes_of(value, 22)[0], 1), "string");

        // Paths (8) → NamedPathItem (2); patch (8) → parameters (8): the body parameter
        // (Parameter 1 → BodyParameter 1) and the query parameters (2 → NonBodyParameter 3).
        let paths = bytes_of(bytes_of(&encoded, 8)[0], 2);
        let item = entry(
            &paths,
            "/apis/apps/v1/namespaces/{namespace}/deployments/{name}",
        );
        let patch = bytes_of(item, 8)[0];
        assert_eq!(text(patch, 5), "patchAppsV1NamespacedDeployment");
        let parameters: Vec<&[u8]> = bytes_of(patch, 8)
            .into_iter()
            .map(|item| bytes_of(item, 1)[0])
            .collect();
        let body = bytes_of(parameters[0], 1)[0];
        assert_eq!(text(body, 3), "body");
        let queries: Vec<String> = parameters[1..]
            .iter()
            .map(|parameter| text(bytes_of(bytes_of(parameter, 2)[0], 3)[0], 4))
            .collect();
        assert!(
            queries.contains(&"fieldValidation".to_owned()),
            "{queries:?}"
        );
        let patch_extensions = bytes_of(patch, 13);
        assert_eq!(
            any_value(entry(&patch_extensions, "x-kubernetes-group-version-kind")),
            json!({"group": "apps", "kind": "Deployment", "version": "v1"})
        );
        // Responses (9) → NamedResponseValue (1) → ResponseValue (2) → Response (1).
        let codes = bytes_of(bytes_of(patch, 9)[0], 1);
        let ok = bytes_of(entry(&codes, "200"), 1)[0];
        assert_eq!(text(ok, 1), "OK");
        let path_parameters = bytes_of(item, 9);
        let name = bytes_of(bytes_of(bytes_of(path_parameters[0], 1)[0], 2)[0], 4)[0];
        assert_eq!(text(name, 4), "name");
        assert!(matches!(fields(name)[0], (1, Wire::Varint(1))), "required");
    }

    #[test]
    fn scalars_use_proto3_wire_types() {
        let encoded = schema(&json!({
            "maximum": 2.5, "minLength": -1, "uniqueItems": true, "enum": ["a", 1],
            "additionalProperties": false, "maxItems": 0,
        }));
        let all = fields(&encoded);
        assert!(
            matches!(all.iter().find(|f| f.0 == 7), Some((_, Wire::Fixed64(bits))) if f64::from_bits(*bits) == 2.5)
        );
        assert!(
            matches!(all.iter().find(|f| f.0 == 12), Some((_, Wire::Varint(v))) if *v == u64::MAX)
        );
        assert!(matches!(
            all.iter().find(|f| f.0 == 16),
            Some((_, Wire::Varint(1)))
        ));
        assert_eq!(
            bytes_of(&encoded, 20)
                .iter()
                .map(|any| any_value(any))
                .collect::<Vec<_>>(),
            [json!("a"), json!(1)]
        );
        let additional = bytes_of(&encoded, 21)[0];
        assert!(matches!(fields(additional)[..], [(2, Wire::Varint(0))]));
        // Zero values are left out, as Go leaves them out.
        assert!(all.iter().all(|f| f.0 != 14));
    }
}

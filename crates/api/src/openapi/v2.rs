//! OpenAPI v2 (`/openapi/v2`): the one Swagger 2.0 document of every served kind, which
//! kube-apiserver still serves beside the v3 documents.
//!
//! Who reads it: client-go's `DiscoveryClient.OpenAPISchema` (protobuf only, gnostic's
//! `openapi.v2.Document`: see [`super::gnostic`]), and on it kubectl's client-side schema
//! validation, `kubectl explain --output plaintext-openapiv2` and Helm's manifest validation;
//! older tools and code generators read the JSON. They find a kind's schema among the
//! `definitions` by its `x-kubernetes-group-version-kind` and follow `$ref`s from there.
//!
//! The document is derived from the v3 documents ([`super::openapi_v3_group_version`]), so the
//! two always describe the same kinds with the same schemas:
//! - `#/components/schemas/X` becomes `#/definitions/X`; an `allOf` of one reference (v3's way
//!   to put a description next to a reference) becomes the reference with its description, as
//!   kube-apiserver's v2 writes it.
//! - Keywords Swagger 2.0 does not have are left out: `nullable`, `oneOf`, `anyOf`, `not`
//!   (kube-apiserver leaves the same out of a CustomResourceDefinition's v2 schema).
//! - An operation's `requestBody` becomes a `body` parameter, its responses' content a
//!   `schema`, and their media types `consumes` and `produces`; a v3 parameter's `schema`
//!   is flattened into the parameter.
//! - A definition used by several group/versions (`ObjectMeta`, `Status`) appears once; a
//!   definition two group/versions both describe a kind with keeps every
//!   group-version-kind.

use serde_json::{Map, Value, json};

use super::{CustomSchemas, openapi_v3_group_version};
use crate::resources::ResourceDef;

const V3_REF: &str = "#/components/schemas/";
const V2_REF: &str = "#/definitions/";
const GVK: &str = "x-kubernetes-group-version-kind";

/// The media types an object can be answered in (an operation's `produces`).
const PRODUCES: [&str; 3] = [
    "application/json",
    "application/yaml",
    "application/vnd.kubernetes.protobuf",
];

/// A v3 schema as Swagger 2.0 writes it (see the module documentation).
fn schema(v3: &Value) -> Value {
    match v3 {
        Value::Object(map) => {
            let mut out = Map::new();
            for (key, value) in map {
                match key.as_str() {
                    "nullable" | "oneOf" | "anyOf" | "not" => {}
                    "$ref" => {
                        let target = value.as_str().unwrap_or_default();
                        let name = target.strip_prefix(V3_REF).unwrap_or(target);
                        out.insert(key.clone(), json!(format!("{V2_REF}{name}")));
                    }
                    "allOf" => match value.as_array().map(Vec::as_slice) {
                        Some([only]) if only.get("$ref").is_some() => {
                            if let Value::Object(reference) = schema(only) {
                                out.extend(reference);
                            }
                        }
                        _ => {
                            out.insert(key.clone(), schema(value));
                        }
                    },
                    // Schemas by name: every value is a schema, the keys are not keywords.
                    "properties" | "patternProperties" | "definitions" => {
                        let named = value.as_object().map(|named| {
                            named
                                .iter()
                                .map(|(name, value)| (name.clone(), schema(value)))
                                .collect::<Map<String, Value>>()
                        });
                        out.insert(
                            key.clone(),
                            named.map_or_else(|| value.clone(), Value::Object),
                        );
                    }
                    "items" | "additionalProperties" => {
                        out.insert(key.clone(), schema(value));
                    }
                    // Values, not schemas.
                    "default" | "example" | "enum" | "required" => {
                        out.insert(key.clone(), value.clone());
                    }
                    _ if key.starts_with("x-") => {
                        out.insert(key.clone(), value.clone());
                    }
                    _ => {
                        out.insert(key.clone(), schema(value));
                    }
                }
            }
            if out.contains_key("$ref") {
                // Swagger 2.0 reads nothing beside a reference but its description.
                out.retain(|key, _| key == "$ref" || key == "description");
            }
            if !has_one_readable_type(&out) {
                // kubectl's reader of this document (kube-openapi's `proto` package) refuses
                // the whole document for one such type; without it the value is "any".
                out.remove("type");
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(schema).collect()),
        other => other.clone(),
    }
}

/// Whether a schema's `type` (if any) is one kube-openapi's `proto` reader accepts: a single
/// JSON type other than `null`, and an array with exactly one `items` schema.
fn has_one_readable_type(schema: &Map<String, Value>) -> bool {
    let ty = match schema.get("type") {
        None => return true,
        Some(Value::String(ty)) => ty.as_str(),
        Some(_) => return false,
    };
    match ty {
        "array" => schema.get("items").is_some_and(Value::is_object),
        "object" | "string" | "number" | "integer" | "boolean" => true,
        _ => false,
    }
}

/// A v3 parameter as Swagger 2.0 writes it: its `schema` flattened into it.
fn parameter(v3: &Value) -> Value {
    let Value::Object(map) = v3 else {
        return v3.clone();
    };
    let mut out = Map::new();
    for (key, value) in map {
        if key == "schema" {
            if let Value::Object(inner) = schema(value) {
                out.extend(inner);
            }
        } else {
            out.insert(key.clone(), value.clone());
        }
    }
    Value::Object(out)
}

/// The media types of a v3 `content` map, in its order.
fn media_types(content: Option<&Value>) -> Vec<Value> {
    content
        .and_then(Value::as_object)
        .map(|content| content.keys().map(|key| json!(key)).collect())
        .unwrap_or_default()
}

/// A v3 operation as Swagger 2.0 writes it.
fn operation(v3: &Value) -> Value {
    let Value::Object(map) = v3 else {
        return v3.clone();
    };
    let mut out = Map::new();
    let mut parameters: Vec<Value> = map
        .get("parameters")
        .and_then(Value::as_array)
        .map(|list| list.iter().map(parameter).collect())
        .unwrap_or_default();
    if let Some(body) = map.get("requestBody") {
        let content = body.get("content");
        let body_schema = content
            .and_then(Value::as_object)
            .and_then(|content| content.values().next())
            .and_then(|media| media.get("schema"))
            .map_or_else(|| json!({"type": "object"}), schema);
        parameters.insert(
            0,
            json!({
                "name": "body",
                "in": "body",
                "required": body.get("required").cloned().unwrap_or(json!(false)),
                "schema": body_schema,
            }),
        );
        out.insert("consumes".into(), Value::Array(media_types(content)));
    } else {
        out.insert("consumes".into(), json!(["*/*"]));
    }
    let mut responses = Map::new();
    for (code, response) in map
        .get("responses")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        let mut converted = Map::new();
        if let Some(description) = response.get("description") {
            converted.insert("description".into(), description.clone());
        }
        if let Some(response_schema) = response
            .get("content")
            .and_then(Value::as_object)
            .and_then(|content| content.values().next())
            .and_then(|media| media.get("schema"))
        {
            converted.insert("schema".into(), schema(response_schema));
        }
        responses.insert(code.clone(), Value::Object(converted));
    }
    for (key, value) in map {
        match key.as_str() {
            "parameters" | "requestBody" | "responses" => {}
            _ => {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    out.insert("parameters".into(), Value::Array(parameters));
    // A connect operation (a `proxy` subresource) answers whatever its backend does.
    let any = map
        .get("x-kubernetes-action")
        .is_some_and(|action| action == "connect");
    out.insert(
        "produces".into(),
        if any { json!(["*/*"]) } else { json!(PRODUCES) },
    );
    out.insert("responses".into(), Value::Object(responses));
    out.insert("schemes".into(), json!(["https"]));
    Value::Object(out)
}

/// A v3 path item as Swagger 2.0 writes it.
fn path_item(v3: &Value) -> Value {
    let Value::Object(map) = v3 else {
        return v3.clone();
    };
    map.iter()
        .map(|(key, value)| {
            let converted = if key == "parameters" {
                Value::Array(
                    value
                        .as_array()
                        .map(|list| list.iter().map(parameter).collect())
                        .unwrap_or_default(),
                )
            } else {
                operation(value)
            };
            (key.clone(), converted)
        })
        .collect::<Map<String, Value>>()
        .into()
}

/// Adds `definition` under `name`: the first description of a name stays, with the
/// group-version-kinds of every later one added to it.
fn merge_definition(definitions: &mut Map<String, Value>, name: String, definition: Value) {
    let Some(existing) = definitions.get_mut(&name) else {
        definitions.insert(name, definition);
        return;
    };
    let Some(Value::Array(more)) = definition.get(GVK) else {
        return;
    };
    let Some(existing) = existing.as_object_mut() else {
        return;
    };
    let kinds = existing.entry(GVK).or_insert_with(|| json!([]));
    if let Value::Array(kinds) = kinds {
        for kind in more {
            if !kinds.contains(kind) {
                kinds.push(kind.clone());
            }
        }
    }
}

/// The `/openapi/v2` document of the served kinds (`custom`: the declared schemas of custom
/// kinds, as for v3).
#[must_use]
pub fn openapi_v2(defs: &[ResourceDef], custom: &CustomSchemas) -> Value {
    let mut paths = Map::new();
    let mut definitions = Map::new();
    for (group, version) in super::group_versions(defs) {
        let Some(Value::Object(mut document)) =
            openapi_v3_group_version(defs, custom, &group, &version)
        else {
            continue;
        };
        if let Some(Value::Object(v3_paths)) = document.remove("paths") {
            for (path, item) in v3_paths {
                paths.insert(path, path_item(&item));
            }
        }
        if let Some(Value::Object(schemas)) = document
            .remove("components")
            .and_then(|mut components| components.get_mut("schemas").map(Value::take))
        {
            for (name, definition) in schemas {
                merge_definition(&mut definitions, name, schema(&definition));
            }
        }
    }
    json!({
        "swagger": "2.0",
        "info": {
            "title": "Kubernetes",
            "version": format!("v1.{}.0", crate::discovery::KUBERNETES_MINOR),
        },
        "paths": paths,
        "definitions": definitions,
        "securityDefinitions": {
            "BearerToken": {
                "description": "Bearer Token authentication",
                "in": "header",
                "name": "authorization",
                "type": "apiKey",
            }
        },
        "security": [{"BearerToken": []}],
    })
}

/// The encodings `/openapi/v2` is served in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenApiV2Format {
    /// `application/json`.
    Json,
    /// gnostic's protobuf ([`PROTOBUF_CONTENT_TYPE`]).
    Protobuf,
}

/// The protobuf media types a client may ask the v2 document in, as kube-apiserver accepts
/// them (client-go asks for the first).
const PROTOBUF_TYPES: [&str; 2] = [
    "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
    "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
];

/// The `Content-Type` of the protobuf answer, whichever spelling was asked for: the one
/// without `@`, which Go's `mime.ParseMediaType` (client-go reads the answer's type with it)
/// can parse, as kube-apiserver answers.
pub const PROTOBUF_CONTENT_TYPE: &str = PROTOBUF_TYPES[1];

/// The encoding an `Accept` header asks for, as kube-apiserver chooses it: ranges by weight,
/// the first that JSON or protobuf matches (`*/*` and `application/*` are JSON); no header is
/// JSON; `None` when nothing matches (a 406).
#[must_use]
pub fn negotiate_v2(accept: Option<&str>) -> Option<OpenApiV2Format> {
    let ranges = crate::negotiate::parse_accept(accept);
    if ranges.is_empty() {
        return Some(OpenApiV2Format::Json);
    }
    ranges.iter().find_map(|range| {
        if range.accepts_json() {
            Some(OpenApiV2Format::Json)
        } else if PROTOBUF_TYPES.contains(&range.essence.as_str()) {
            Some(OpenApiV2Format::Protobuf)
        } else {
            None
        }
    })
}

/// The entity tag of a document's JSON text, quoted as an `ETag` header carries it.
#[must_use]
pub fn entity_tag(json: &str) -> String {
    format!("\"{:016X}\"", crate::hash::fnv1a(json.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::{builtin_resources, parse_resources_file};

    fn document() -> Value {
        let mut defs = builtin_resources();
        defs.extend(
            parse_resources_file(
                "[[resource]]\ngroup = \"example.com\"\nversion = \"v1\"\nkind = \"Widget\"\nplural = \"widgets\"\nnamespaced = true\n",
            )
            .unwrap(),
        );
        let mut custom = CustomSchemas::new();
        custom.insert(
            ("example.com".into(), "v1".into(), "Widget".into()),
            json!({"type": "object", "properties": {"spec": {"type": "object", "nullable": true,
                "properties": {"size": {"x-kubernetes-int-or-string": true,
                    "anyOf": [{"type": "integer"}, {"type": "string"}]}}}}}),
        );
        openapi_v2(&defs, &custom)
    }

    /// Every `$ref` in `value` (recursively).
    fn references(value: &Value, out: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                for (key, value) in map {
                    if key == "$ref" {
                        out.push(value.as_str().unwrap().to_owned());
                    } else {
                        references(value, out);
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|item| references(item, out)),
            _ => {}
        }
    }

    #[test]
    fn every_reference_resolves_and_no_v3_keyword_is_left() {
        let document = document();
        let text = document.to_string();
        for v3_only in [
            "#/components/",
            "\"nullable\"",
            "\"anyOf\"",
            "\"oneOf\"",
            "\"requestBody\"",
        ] {
            assert!(!text.contains(v3_only), "{v3_only} left in the v2 document");
        }
        let definitions = document["definitions"].as_object().unwrap();
        let mut refs = Vec::new();
        references(&document, &mut refs);
        assert!(refs.len() > 1000, "{} references", refs.len());
        for reference in refs {
            let name = reference.strip_prefix(V2_REF).expect(&reference);
            assert!(
                definitions.contains_key(name),
                "{reference} does not resolve"
            );
        }
    }

    /// Checks `schema` as kube-openapi's `proto.Definitions.ParseSchema` does (the reader of
    /// kubectl's explain and validation), which refuses the whole document for one failure.
    fn readable(definitions: &Map<String, Value>, schema: &Value, path: &str) {
        let map = schema
            .as_object()
            .unwrap_or_else(|| panic!("{path}: not an object"));
        if let Some(reference) = map.get("$ref").and_then(Value::as_str) {
            assert!(map.get("type").is_none(), "{path}: a reference with a type");
            assert!(
                map.get("properties").is_none(),
                "{path}: a reference with properties"
            );
            let name = reference.strip_prefix(V2_REF).expect(path);
            assert!(
                definitions.contains_key(name),
                "{path}: unknown model {name}"
            );
            return;
        }
        let ty = match map.get("type") {
            None => None,
            Some(Value::String(ty)) => Some(ty.as_str()),
            Some(other) => panic!("{path}: type {other}"),
        };
        match ty {
            Some("array") => {
                let items = map.get("items").expect(path);
                readable(definitions, items, &format!("{path}[]"));
            }
            Some("object") | None => {
                for (name, property) in map
                    .get("properties")
                    .and_then(Value::as_object)
                    .into_iter()
                    .flatten()
                {
                    readable(definitions, property, &format!("{path}.{name}"));
                }
                if let Some(additional @ Value::Object(_)) = map.get("additionalProperties") {
                    readable(definitions, additional, &format!("{path}{{}}"));
                }
            }
            Some("string" | "number" | "integer" | "boolean") => {}
            Some(other) => panic!("{path}: unknown primitive type {other:?}"),
        }
    }

    #[test]
    fn kubectl_can_read_every_definition() {
        let mut defs = builtin_resources();
        defs.extend(
            parse_resources_file(
                "[[resource]]\ngroup = \"example.com\"\nversion = \"v1\"\nkind = \"Odd\"\nplural = \"odds\"\nnamespaced = true\n",
            )
            .unwrap(),
        );
        let mut custom = CustomSchemas::new();
        // Types a v3 schema may have that kubectl's v2 reader refuses.
        custom.insert(
            ("example.com".into(), "v1".into(), "Odd".into()),
            json!({"type": "object", "properties": {
                "list": {"type": "array"},
                "tuple": {"type": "array", "items": [{"type": "string"}]},
                "either": {"type": ["string", "integer"]},
                "nothing": {"type": "null"},
                "fine": {"type": "array", "items": {"type": "integer"}}}}),
        );
        let document = openapi_v2(&defs, &custom);
        let definitions = document["definitions"].as_object().unwrap();
        for (name, definition) in definitions {
            readable(definitions, definition, name);
        }
        let odd = &definitions["com.example.v1.Odd"]["properties"];
        assert_eq!(odd["list"], json!({}));
        assert_eq!(odd["either"], json!({}));
        assert_eq!(odd["fine"]["type"], "array");
    }

    #[test]
    fn kinds_are_found_by_group_version_kind() {
        let document = document();
        let definitions = document["definitions"].as_object().unwrap();
        let find = |group: &str, version: &str, kind: &str| {
            let wanted = json!({"group": group, "version": version, "kind": kind});
            let found: Vec<&String> = definitions
                .iter()
                .filter(|(_, d)| {
                    d.get(GVK)
                        .and_then(Value::as_array)
                        .is_some_and(|kinds| kinds.contains(&wanted))
                })
                .map(|(name, _)| name)
                .collect();
            assert_eq!(found.len(), 1, "{group}/{version} {kind}: {found:?}");
            found[0].clone()
        };
        assert_eq!(find("", "v1", "Pod"), "io.k8s.api.core.v1.Pod");
        assert_eq!(
            find("apps", "v1", "Deployment"),
            "io.k8s.api.apps.v1.Deployment"
        );
        assert_eq!(
            find("autoscaling", "v2", "HorizontalPodAutoscaler"),
            "io.k8s.api.autoscaling.v2.HorizontalPodAutoscaler"
        );
        let widget = &definitions[&find("example.com", "v1", "Widget")];
        // The CRD's v3-only keywords are gone, its extension kept.
        assert_eq!(
            widget["properties"]["spec"]["properties"]["size"],
            json!({"x-kubernetes-int-or-string": true})
        );
        assert_eq!(widget["properties"]["spec"].get("nullable"), None);
        // A reference with its description, as kube-apiserver writes it.
        let spec = &definitions["io.k8s.api.core.v1.Pod"]["properties"]["spec"];
        assert_eq!(spec["$ref"], "#/definitions/io.k8s.api.core.v1.PodSpec");
        assert!(spec["description"].as_str().is_some(), "{spec}");
        assert_eq!(spec.as_object().unwrap().len(), 2, "{spec}");
    }

    #[test]
    fn operations_have_body_parameters_and_schemas() {
        let document = document();
        let item = &document["paths"]["/api/v1/namespaces/{namespace}/configmaps/{name}"];
        let patch = &item["patch"];
        assert_eq!(patch["x-kubernetes-action"], "patch");
        assert_eq!(
            patch["x-kubernetes-group-version-kind"],
            json!({"group": "", "version": "v1", "kind": "ConfigMap"})
        );
        let parameters = patch["parameters"].as_array().unwrap();
        assert_eq!(parameters[0]["in"], "body");
        assert_eq!(
            parameters[0]["schema"]["$ref"],
            "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.Patch"
        );
        // kubectl looks for this query parameter to leave validation to the server.
        let validation = parameters
            .iter()
            .find(|p| p["name"] == "fieldValidation")
            .unwrap();
        assert_eq!(validation["in"], "query");
        assert_eq!(validation["type"], "string");
        assert!(validation.get("schema").is_none());
        assert_eq!(
            patch["consumes"],
            json!([
                "application/json-patch+json",
                "application/merge-patch+json"
            ])
        );
        assert_eq!(
            item["get"]["responses"]["200"]["schema"]["$ref"],
            "#/definitions/io.k8s.api.core.v1.ConfigMap"
        );
        assert_eq!(item["parameters"][0]["name"], "name");
        assert_eq!(item["parameters"][0]["required"], true);
    }

    #[test]
    fn accept_picks_json_or_protobuf_as_kube_apiserver_does() {
        use OpenApiV2Format::{Json, Protobuf};
        let v2_at = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
        assert_eq!(negotiate_v2(None), Some(Json));
        assert_eq!(negotiate_v2(Some("*/*")), Some(Json));
        assert_eq!(negotiate_v2(Some("application/json")), Some(Json));
        assert_eq!(negotiate_v2(Some(v2_at)), Some(Protobuf));
        assert_eq!(
            negotiate_v2(Some(
                "application/json;q=0.5, application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
            )),
            Some(Protobuf)
        );
        assert_eq!(negotiate_v2(Some("application/yaml")), None);
        assert_eq!(negotiate_v2(Some("text/html, application/xml")), None);
    }

    #[test]
    fn shared_definitions_appear_once_with_every_kind() {
        let mut definitions = Map::new();
        let status = |group: &str| json!({"type": "object", GVK: [{"group": group, "version": "v1", "kind": "Status"}]});
        merge_definition(&mut definitions, "S".into(), status(""));
        merge_definition(&mut definitions, "S".into(), status("a"));
        merge_definition(&mut definitions, "S".into(), status(""));
        assert_eq!(definitions["S"][GVK].as_array().unwrap().len(), 2);
    }
}

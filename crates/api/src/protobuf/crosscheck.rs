//! Tests that the protobuf tables and the OpenAPI schemas (k8s-openapi's, which the server
//! validates and prunes writes with) describe the same objects: two publications of
//! Kubernetes 1.33, made by different generators, checked against each other field by field.
//! Pruning keeps only what the OpenAPI schema declares, so agreement means every object the
//! server stores for a built-in kind can be answered in protobuf.

use serde_json::{Map, Value};

use super::{
    Bool, Bytes, Double, FieldsV1, Inline, Int32, Int64, IntOrString, Json, MapBytes, MapMsg,
    MapQuantity, MapStr, MapStrList, MapTime, MapUnion, Message, MicroTime, Msg, Quantity,
    RawExtension, Str, Time, Ty, Union, schema_of,
};
use crate::resources::builtin_resources;

struct Check<'a> {
    definitions: &'a Map<String, Value>,
    seen: std::collections::HashSet<(&'static str, String)>,
    mismatches: Vec<String>,
}

/// A definition's short name: `io.k8s.apimachinery.pkg.apis.meta.v1.Time` → `Time`.
fn short(name: &str) -> &str {
    name.rsplit('.').next().unwrap_or(name)
}

impl<'a> Check<'a> {
    /// The node `schema` refers to, and the referenced definition's name.
    fn resolve(&self, schema: &'a Value) -> (&'a Value, Option<&'a str>) {
        match schema.get("$ref").and_then(Value::as_str) {
            Some(reference) => {
                let name = reference.rsplit('/').next().unwrap_or(reference);
                (self.definitions.get(name).unwrap_or(schema), Some(name))
            }
            None => (schema, None),
        }
    }

    /// Every field of `message` (through inline messages), by JSON name.
    fn fields(message: &'static Message, out: &mut Vec<(&'static str, Ty, bool)>) {
        for field in message.fields {
            match field.ty {
                Inline(inner) => Self::fields(inner, out),
                ty => out.push((field.name, ty, field.repeated)),
            }
        }
    }

    fn message(&mut self, message: &'static Message, schema: &'a Value, top: bool) {
        let (node, name) = self.resolve(schema);
        if !self
            .seen
            .insert((message.name, name.unwrap_or_default().to_owned()))
        {
            return;
        }
        let mut fields = Vec::new();
        Self::fields(message, &mut fields);
        let Some(properties) = node.get("properties").and_then(Value::as_object) else {
            if !fields.is_empty() {
                self.mismatches
                    .push(format!("{}: no OpenAPI properties", message.name));
            }
            return;
        };
        for key in properties.keys() {
            // Go's protobuf leaves an object's TypeMeta to the envelope (and drops it from an
            // object nested in another, as the encoder does).
            if (top || super::encode::is_object_kind(message))
                && matches!(key.as_str(), "apiVersion" | "kind")
            {
                continue;
            }
            if !fields.iter().any(|(name, _, _)| name == key) {
                self.mismatches.push(format!(
                    "{}: OpenAPI property {key:?} has no protobuf field",
                    message.name
                ));
            }
        }
        for (field, ty, repeated) in fields {
            let Some(property) = properties.get(field) else {
                self.mismatches.push(format!(
                    "{}: protobuf field {field:?} is not an OpenAPI property",
                    message.name
                ));
                continue;
            };
            let at = format!("{}.{field}", message.name);
            if repeated {
                let (node, _) = self.resolve(property);
                match (node.get("type").and_then(Value::as_str), node.get("items")) {
                    (Some("array"), Some(items)) => self.value(&at, ty, items),
                    _ => self
                        .mismatches
                        .push(format!("{at}: repeated, but not an OpenAPI array")),
                }
            } else {
                self.value(&at, ty, property);
            }
        }
    }

    fn value(&mut self, at: &str, ty: Ty, schema: &'a Value) {
        let (node, name) = self.resolve(schema);
        let kind = node.get("type").and_then(Value::as_str);
        let format = node.get("format").and_then(Value::as_str);
        let leaf = name.map(short);
        let values = node.get("additionalProperties");
        let map_of = |check: &Check<'a>| values.map(|v| check.resolve(v));
        let ok = match ty {
            Str => kind == Some("string") && format != Some("byte") && leaf.is_none(),
            Bytes => kind == Some("string") && format == Some("byte"),
            Int32 => kind == Some("integer") && format == Some("int32"),
            Int64 => kind == Some("integer") && format != Some("int32"),
            Bool => kind == Some("boolean"),
            Time => leaf == Some("Time"),
            MicroTime => leaf == Some("MicroTime"),
            IntOrString => leaf == Some("IntOrString"),
            Quantity => leaf == Some("Quantity"),
            FieldsV1 => leaf == Some("FieldsV1"),
            RawExtension => leaf == Some("RawExtension"),
            Double => kind == Some("number") && format == Some("double"),
            Json => leaf == Some("JSON"),
            Union(union, _) => leaf == Some(short(union.name)),
            MapMsg(inner) => match map_of(self) {
                Some((value, _)) if value.get("properties").is_some() => {
                    let values = values.unwrap_or(&Value::Null);
                    self.message(inner, values, false);
                    true
                }
                _ => false,
            },
            MapUnion(union, _) => {
                map_of(self).and_then(|(_, name)| name).map(short) == Some(short(union.name))
            }
            MapStr | MapBytes | MapQuantity | MapTime | MapStrList => match map_of(self) {
                Some((value, value_name)) => {
                    let value_kind = value.get("type").and_then(Value::as_str);
                    let value_format = value.get("format").and_then(Value::as_str);
                    match ty {
                        MapStr => value_kind == Some("string") && value_format != Some("byte"),
                        MapBytes => value_format == Some("byte"),
                        MapQuantity => value_name.map(short) == Some("Quantity"),
                        MapTime => value_name.map(short) == Some("Time"),
                        _ => {
                            value_kind == Some("array")
                                && value
                                    .get("items")
                                    .and_then(|i| i.get("type"))
                                    .and_then(Value::as_str)
                                    == Some("string")
                        }
                    }
                }
                None => false,
            },
            Msg(inner) => {
                // An empty Go struct (`CustomResourceSubresourceStatus`) is an object
                // without properties.
                if node.get("properties").is_some()
                    || (inner.fields.is_empty() && kind == Some("object"))
                {
                    self.message(inner, schema, false);
                    true
                } else {
                    false
                }
            }
            Inline(_) => unreachable!("inline fields are flattened"),
        };
        if !ok {
            self.mismatches.push(format!(
                "{at}: protobuf type {} against OpenAPI {}",
                describe(ty),
                serde_json::to_string(node).unwrap_or_default()
            ));
        }
    }
}

fn describe(ty: Ty) -> String {
    match ty {
        Msg(message) | Inline(message) => format!("message {}", message.name),
        Str => "string".into(),
        Bytes => "bytes".into(),
        Int32 => "int32".into(),
        Int64 => "int64".into(),
        Bool => "bool".into(),
        Time => "Time".into(),
        MicroTime => "MicroTime".into(),
        IntOrString => "IntOrString".into(),
        Quantity => "Quantity".into(),
        FieldsV1 => "FieldsV1".into(),
        RawExtension => "RawExtension".into(),
        Double => "double".into(),
        Json => "JSON".into(),
        Union(union, _) => format!("union {}", union.name),
        MapMsg(message) => format!("map<string, {}>", message.name),
        MapUnion(union, _) => format!("map<string, {}>", union.name),
        MapStr => "map<string, string>".into(),
        MapBytes => "map<string, bytes>".into(),
        MapQuantity => "map<string, Quantity>".into(),
        MapTime => "map<string, Time>".into(),
        MapStrList => "map<string, []string>".into(),
    }
}

#[test]
fn every_served_builtin_kind_has_a_protobuf_schema_that_matches_its_openapi_schema() {
    let mut checked = Vec::new();
    let mut mismatches = Vec::new();
    for def in builtin_resources()
        .into_iter()
        .chain([crate::crd::definition()])
    {
        let Some(message) = schema_of(&def.api_version(), &def.kind) else {
            mismatches.push(format!(
                "{} ({}): no protobuf schema",
                def.kind,
                def.api_version()
            ));
            continue;
        };
        let Some((definitions, root)) = crate::schema::definitions_of(&def)
            .or_else(|| crate::schema::documented_definitions_of(&def))
        else {
            continue;
        };
        let root = Value::String(format!("#/definitions/{root}"));
        let root = serde_json::json!({ "$ref": root });
        let mut check = Check {
            definitions,
            seen: std::collections::HashSet::new(),
            mismatches: Vec::new(),
        };
        check.message(message, &root, true);
        mismatches.extend(check.mismatches);
        checked.push(def.kind.clone());
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
    // The kinds whose OpenAPI schema the server has are all compared.
    assert!(checked.len() >= 30, "{checked:?}");
    assert!(checked.contains(&"Pod".to_owned()), "{checked:?}");
    assert!(
        checked.contains(&"CustomResourceDefinition".to_owned()),
        "{checked:?}"
    );
}

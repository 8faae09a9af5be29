//! The generator of `tables.rs` from `crates/api/protobuf/kubernetes-1.33.schema` (a test,
//! so that normal builds read only the checked-in tables and need neither network nor a
//! build script).
//!
//! ## Guarantees
//! - `generated_tables_are_current` fails when `tables.rs` differs from what the schema file
//!   gives; `WATCHKEEPER_REGENERATE=1 cargo test -p watchkeeper-api --lib generated_tables`
//!   rewrites it.
//! - Every message the schema references is defined, every field's type is one the codec
//!   knows, and a message's fields have distinct numbers and JSON names; otherwise generation
//!   fails naming the message.
//!
//! ## Go's JSON rendering, from the schema's flags
//! Each field records whether it is repeated (a Go slice), a pointer and `omitempty`; its type
//! says whether it is a struct (messages, times, `IntOrString`, `Quantity`: Go's
//! `encoding/json` never leaves a struct out). A field keeps a zero value it was sent
//! (`keep_zero`) when its Go field is a pointer, is not `omitempty`, or is a struct; an
//! `omitempty` scalar's zero value is left out ([`super::gostruct`] applies the whole rule to
//! JSON bodies).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

/// The checked-in schema extract (see `crates/api/protobuf/extract.py`).
const SCHEMA: &str = include_str!("../../protobuf/kubernetes-1.33.schema");

struct SchemaField {
    number: u32,
    name: String,
    ty: String,
    repeated: bool,
    pointer: bool,
    omitempty: bool,
}

struct Schema {
    kinds: Vec<(String, String, String)>,
    lists: BTreeMap<String, String>,
    messages: BTreeMap<String, Vec<SchemaField>>,
}

fn parse(text: &str) -> Result<Schema, String> {
    let mut schema = Schema {
        kinds: Vec::new(),
        lists: BTreeMap::new(),
        messages: BTreeMap::new(),
    };
    let mut current: Option<String> = None;
    for (index, line) in text.lines().enumerate() {
        let at = || format!("line {}", index + 1);
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        if line.starts_with("  ") {
            let Some(message) = &current else {
                return Err(format!("{}: a field outside a message", at()));
            };
            let [number, name, ty, flags @ ..] = words.as_slice() else {
                return Err(format!(
                    "{}: a field needs a number, a name and a type",
                    at()
                ));
            };
            let number = number
                .parse()
                .map_err(|_| format!("{}: field number {number:?}", at()))?;
            if let Some(flag) = flags
                .iter()
                .find(|f| !matches!(**f, "rep" | "ptr" | "omitempty"))
            {
                return Err(format!("{}: unknown flag {flag:?}", at()));
            }
            schema
                .messages
                .get_mut(message)
                .expect("the current message exists")
                .push(SchemaField {
                    number,
                    name: (*name).to_owned(),
                    ty: (*ty).to_owned(),
                    repeated: flags.contains(&"rep"),
                    pointer: flags.contains(&"ptr"),
                    omitempty: flags.contains(&"omitempty"),
                });
            continue;
        }
        match words.as_slice() {
            ["kind", group, version, kind, message] => {
                let api_version = if *group == "-" {
                    (*version).to_owned()
                } else {
                    format!("{group}/{version}")
                };
                schema
                    .kinds
                    .push((api_version, (*kind).to_owned(), (*message).to_owned()));
                current = None;
            }
            ["list", name, item] => {
                schema.lists.insert((*name).to_owned(), (*item).to_owned());
                current = None;
            }
            ["message", name] => {
                if schema
                    .messages
                    .insert((*name).to_owned(), Vec::new())
                    .is_some()
                {
                    return Err(format!("{}: message {name} twice", at()));
                }
                current = Some((*name).to_owned());
            }
            _ => return Err(format!("{}: cannot read {line:?}", at())),
        }
    }
    Ok(schema)
}

/// The name a message has in errors: OpenAPI's (`io.k8s.api.core.v1.Pod`).
fn display_name(message: &str) -> String {
    let name = message.strip_prefix("k8s.io.").unwrap_or(message);
    format!(
        "io.k8s.{}",
        name.replace("kube_aggregator", "kube-aggregator")
            .replace("apiextensions_apiserver", "apiextensions-apiserver")
    )
}

/// The Rust static of a message: its package's last two parts and its name,
/// `k8s.io.api.core.v1.PodSpec` → `CORE_V1_POD_SPEC`.
fn static_name(message: &str) -> String {
    let parts: Vec<&str> = message.split('.').collect();
    let [.., group, version, name] = parts.as_slice() else {
        return message.to_ascii_uppercase();
    };
    let mut out = format!(
        "{}_{}_",
        group.to_ascii_uppercase(),
        version.to_ascii_uppercase()
    );
    let chars: Vec<char> = name.chars().collect();
    for (index, &c) in chars.iter().enumerate() {
        let next_lower = chars.get(index + 1).is_some_and(char::is_ascii_lowercase);
        let prev_lower = index > 0 && chars[index - 1].is_ascii_lowercase();
        if index > 0 && c.is_ascii_uppercase() && (prev_lower || next_lower) {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

const META: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.";

const APIEXTENSIONS: &str = "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.";

/// apiextensions' messages with a JSON form of their own (their Go `MarshalJSON`), by the
/// codec's name for that form.
fn union_of(message: &str) -> Option<&'static str> {
    Some(match message.strip_prefix(APIEXTENSIONS)? {
        "JSONSchemaPropsOrArray" => "SchemaOr::Array",
        "JSONSchemaPropsOrBool" => "SchemaOr::Bool",
        "JSONSchemaPropsOrStringArray" => "SchemaOr::StringArray",
        _ => return None,
    })
}

/// The codec's type of a schema type, and whether Go renders it as a struct.
fn rust_type(schema: &Schema, owner: &str, ty: &str) -> Result<(String, bool), String> {
    let leaf = |name: &str| -> Option<&str> {
        Some(match name.strip_prefix(META)? {
            "Time" => "Time",
            "MicroTime" => "MicroTime",
            "FieldsV1" => "FieldsV1",
            _ => return None,
        })
    };
    if let Some(map) = ty.strip_prefix("map:") {
        let rust = match map {
            "string" => "MapStr",
            "bytes" => "MapBytes",
            "k8s.io.apimachinery.pkg.api.resource.Quantity" => "MapQuantity",
            _ if leaf(map) == Some("Time") => "MapTime",
            _ if schema.lists.get(map).is_some_and(|item| item == "string") => "MapStrList",
            _ if schema.messages.contains_key(map) => {
                let table = static_name(map);
                return Ok((
                    match union_of(map) {
                        Some(union) => format!("MapUnion(&{table}, {union})"),
                        None => format!("MapMsg(&{table})"),
                    },
                    false,
                ));
            }
            _ => return Err(format!("{owner}: a map of {map} is not supported")),
        };
        return Ok((rust.to_owned(), false));
    }
    if let Some(inner) = ty.strip_prefix("inline:") {
        if !schema.messages.contains_key(inner) {
            return Err(format!("{owner}: inline message {inner} is not defined"));
        }
        return Ok((format!("Inline(&{})", static_name(inner)), true));
    }
    if let Some(inner) = ty.strip_prefix("msg:") {
        if let Some(leaf) = leaf(inner) {
            return Ok((leaf.to_owned(), true));
        }
        return Ok(match inner {
            "k8s.io.apimachinery.pkg.util.intstr.IntOrString" => ("IntOrString".to_owned(), true),
            "k8s.io.apimachinery.pkg.api.resource.Quantity" => ("Quantity".to_owned(), true),
            "k8s.io.apimachinery.pkg.runtime.RawExtension" => ("RawExtension".to_owned(), true),
            _ if inner.strip_prefix(APIEXTENSIONS) == Some("JSON") => ("Json".to_owned(), true),
            _ if schema.messages.contains_key(inner) && union_of(inner).is_some() => {
                let union = union_of(inner).unwrap_or_default();
                (format!("Union(&{}, {union})", static_name(inner)), true)
            }
            _ if schema.messages.contains_key(inner) => {
                (format!("Msg(&{})", static_name(inner)), true)
            }
            _ => return Err(format!("{owner}: message {inner} is not defined")),
        });
    }
    let rust = match ty {
        "string" => "Str",
        "int32" => "Int32",
        "int64" => "Int64",
        "bool" => "Bool",
        "bytes" => "Bytes",
        "double" => "Double",
        _ => return Err(format!("{owner}: type {ty} is not supported")),
    };
    Ok((rust.to_owned(), false))
}

/// The Rust source of `tables.rs`.
fn generate(schema: &Schema) -> Result<String, String> {
    let mut out = String::new();
    out.push_str(
        "//! @generated by `protobuf/generate.rs` from `crates/api/protobuf/kubernetes-1.33.schema`\n\
         //! (Kubernetes 1.33's protobuf schema, Apache-2.0); do not edit by hand.\n\
         //!\n\
         //! One static per protobuf message, one constructor per Go field's shape: `f` a value\n\
         //! with `omitempty`, `k` a value without, `p` a pointer with `omitempty`, `n` a pointer\n\
         //! without, `r` a slice with `omitempty`, `l` a slice without.\n\n\
         use super::Ty::{\n    Bool, Bytes, Double, FieldsV1, Inline, Int32, Int64, IntOrString, Json, MapBytes, MapMsg,\n    MapQuantity, MapStr, MapStrList, MapTime, MapUnion, MicroTime, Msg, Quantity, RawExtension,\n    Str, Time, Union,\n};\n\
         use super::{Message, SchemaOr, f, k, l, n, p, r};\n",
    );
    let mut statics = BTreeSet::new();
    for (name, fields) in &schema.messages {
        let rust_name = static_name(name);
        if !statics.insert(rust_name.clone()) {
            return Err(format!("{name}: static {rust_name} twice"));
        }
        let mut numbers = BTreeSet::new();
        let mut names = BTreeSet::new();
        let _ = write!(
            out,
            "\npub(super) static {rust_name}: Message = Message {{\n    name: \"{}\",\n    fields: &[\n",
            display_name(name)
        );
        for field in fields {
            if !numbers.insert(field.number) || !names.insert(field.name.as_str()) {
                return Err(format!(
                    "{name}: field {} ({}) twice",
                    field.number, field.name
                ));
            }
            if field.number == 0 || field.number > u32::MAX >> 3 {
                return Err(format!("{name}: field number {}", field.number));
            }
            let (ty, _) = rust_type(schema, name, &field.ty)?;
            if field.repeated && field.pointer {
                return Err(format!(
                    "{name}: field {} is a slice of pointers",
                    field.name
                ));
            }
            let constructor = match (field.repeated, field.pointer, field.omitempty) {
                (true, _, true) => "r",
                (true, _, false) => "l",
                (false, true, true) => "p",
                (false, true, false) => "n",
                (false, false, true) => "f",
                (false, false, false) => "k",
            };
            let _ = writeln!(
                out,
                "        {constructor}({}, \"{}\", {ty}),",
                field.number, field.name
            );
        }
        out.push_str("    ],\n};\n");
    }
    out.push_str(
        "\n/// The kinds with a protobuf schema: (`apiVersion`, kind, message).\n\
         pub(super) static KINDS: &[(&str, &str, &Message)] = &[\n",
    );
    for (api_version, kind, message) in &schema.kinds {
        if !schema.messages.contains_key(message) {
            return Err(format!("kind {kind}: message {message} is not defined"));
        }
        let _ = writeln!(
            out,
            "    (\"{api_version}\", \"{kind}\", &{}),",
            static_name(message)
        );
    }
    out.push_str("];\n");
    Ok(out)
}

#[test]
fn generated_tables_are_current() {
    let schema = parse(SCHEMA).unwrap();
    let generated = generate(&schema).unwrap();
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/protobuf/tables.rs");
    let current = std::fs::read_to_string(path).unwrap_or_default();
    if std::env::var_os("WATCHKEEPER_REGENERATE").is_some() {
        if current != generated {
            std::fs::write(path, &generated).unwrap();
        }
        return;
    }
    assert!(
        current == generated,
        "src/protobuf/tables.rs is not what the schema file gives; run \
         WATCHKEEPER_REGENERATE=1 cargo test -p watchkeeper-api --lib generated_tables"
    );
}

#[test]
fn static_names() {
    assert_eq!(
        static_name("k8s.io.api.core.v1.PodSpec"),
        "CORE_V1_POD_SPEC"
    );
    assert_eq!(
        static_name("k8s.io.kube_aggregator.pkg.apis.apiregistration.v1.APIService"),
        "APIREGISTRATION_V1_API_SERVICE"
    );
    assert_eq!(static_name("k8s.io.api.core.v1.PodIP"), "CORE_V1_POD_IP");
    assert_eq!(
        static_name("k8s.io.api.core.v1.SELinuxOptions"),
        "CORE_V1_SE_LINUX_OPTIONS"
    );
    assert_eq!(
        display_name("k8s.io.kube_aggregator.pkg.apis.apiregistration.v1.APIService"),
        "io.k8s.kube-aggregator.pkg.apis.apiregistration.v1.APIService"
    );
}

#[test]
fn schema_errors_name_the_message() {
    let bad = "message a.b.v1.X\n  1 y msg:a.b.v1.Missing\n";
    let error = generate(&parse(bad).unwrap()).err().unwrap();
    assert!(
        error.contains("a.b.v1.X") && error.contains("Missing"),
        "{error}"
    );
    let twice = "message a.b.v1.X\n  1 y string\n  1 z string\n";
    let error = generate(&parse(twice).unwrap()).err().unwrap();
    assert!(error.contains("twice"), "{error}");
    assert!(parse("  1 y string\n").is_err());
    assert!(parse("message a.b.v1.X\n  1 y string weird\n").is_err());
}

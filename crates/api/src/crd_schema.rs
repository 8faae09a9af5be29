//! A CRD version's `openAPIV3Schema` checked as kube-apiserver checks it before serving it:
//! the structural-schema invariants (`apiextensions-apiserver/pkg/apiserver/schema`'s
//! `ValidateStructural`, its causes sorted by text as kube sorts them) and then the OpenAPI
//! checks of `ValidateCustomResourceDefinitionOpenAPISchema`, with kube's paths
//! (`spec.versions[0].schema.openAPIV3Schema.properties[spec].type`) and wording:
//!
//! - every specified field, array item and the root have a `type` (unless int-or-string or
//!   preserving unknown fields); the root is an `object`; arrays have `items`; `metadata` at the
//!   root is an `object` constraining at most `name` and `generateName`; `kind` and
//!   `apiVersion` are strings; `additionalProperties` is not at the root nor beside
//!   `properties`;
//! - inside `allOf`/`anyOf`/`oneOf`/`not` only value validations (no `type`, `default`,
//!   `description`, `nullable`, `additionalProperties`, Kubernetes extensions or `metadata`),
//!   the two int-or-string `anyOf` forms excepted;
//! - patterns compile (Go's RE2 syntax, [`crate::pattern::compile_pattern`]);
//! - `type` one of the six OpenAPI types; `uniqueItems`, `$ref`, `id`, `definitions`,
//!   `dependencies`, `patternProperties`, `additionalItems` and tuple `items` refused;
//!   `x-kubernetes-preserve-unknown-fields: false` refused; `x-kubernetes-list-type` (`atomic`,
//!   `set`, `map`) only on arrays, `map` lists with object items, existing scalar key
//!   properties that are required or defaulted and not nullable, no nullable items in `set`
//!   and `map` lists; `x-kubernetes-map-type` (`atomic`, `granular`) only on objects; no
//!   `default` in the root's `metadata`, `kind`, `apiVersion`; no `nullable` root;
//!   `x-kubernetes-validations` entries with a rule and one-line messages, whose CEL compiles
//!   and whose estimated cost (times how often it may run) is within kube's limits, one rule
//!   and the whole schema (`cel_rules`).
//!
//! Defaults: each `default` of a structural schema holds only declared fields and passes its
//! own schema (`ValidateDefaults`; its causes' fields under `….default`).
//!
//! Not checked: `validateStructuralCompleteness` (fields named only inside value validations),
//! and defaults inside a resource's `metadata` (kube checks them as metadata).

use std::cell::RefCell;

use serde_json::{Map, Value};

use crate::cel_rules::{Expression, rule_error};
use crate::field::{Cause, FieldPath, forbidden, go_quote, invalid, required};
use crate::schema_node::flag;

/// `field.NotSupported` of a string value.
fn not_supported(path: &str, value: &str, supported: &[&str]) -> Cause {
    crate::field::not_supported(path, &go_quote(value), supported)
}

const TYPES: [&str; 6] = ["array", "boolean", "integer", "number", "object", "string"];

/// The causes of refusing `schema`, a version's `openAPIV3Schema` at `path`.
#[must_use]
///
/// `suppress_rule_cost` when the CRD is updated and this version's schema is unchanged: no rule
/// is then refused for its own estimated cost (the schema's total still is), as kube.
pub(crate) fn validate(schema: &Value, path: &str, suppress_rule_cost: bool) -> Vec<Cause> {
    let Value::Object(root) = schema else {
        return Vec::new();
    };
    let mut causes = Vec::new();
    if flag(root, "nullable") {
        causes.push(forbidden(
            &format!("{path}.nullable"),
            "nullable cannot be true at the root",
        ));
    }
    let mut structural = Vec::new();
    let root_path = &FieldPath::root(path);
    invariants(root, Level::Root, root_path, &mut structural);
    structural.sort_by_key(text);
    if structural.is_empty() {
        // `structuraldefaulting.ValidateDefaults`, only over a structural schema.
        defaults(schema, root_path, true, false, &mut causes);
    }
    causes.extend(structural);
    let costs = RefCell::new(Costs::default());
    openapi(
        root,
        root_path,
        Context::root(&costs, suppress_rule_cost),
        &mut causes,
    );
    let costs = costs.into_inner();
    if costs.total > crate::cel_rules::SCHEMA_COST_LIMIT {
        for (at, _) in &costs.most {
            causes.push(forbidden(
                at,
                "contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema",
            ));
        }
        causes.push(forbidden(
            path,
            &crate::cel_rules::exceeds(
                "x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema",
                costs.total,
                crate::cel_rules::SCHEMA_COST_LIMIT,
            ),
        ));
    }
    causes
}

fn text(cause: &Cause) -> String {
    format!("{}: {}", cause.0, cause.1)
}

/// Whether `key` holds a non-empty list.
fn non_empty_list(node: &Map<String, Value>, key: &str) -> bool {
    node.get(key)
        .and_then(Value::as_array)
        .is_some_and(|list| !list.is_empty())
}

fn type_of(node: &Map<String, Value>) -> &str {
    node.get("type").and_then(Value::as_str).unwrap_or("")
}

fn object_at<'a>(node: &'a Map<String, Value>, key: &str) -> Option<&'a Map<String, Value>> {
    node.get(key).and_then(Value::as_object)
}

fn properties(node: &Map<String, Value>) -> impl Iterator<Item = (&String, &Map<String, Value>)> {
    object_at(node, "properties")
        .into_iter()
        .flat_map(|p| p.iter().filter_map(|(k, v)| v.as_object().map(|v| (k, v))))
}

#[derive(Clone, Copy, PartialEq)]
enum Level {
    Root,
    Item,
    Field,
}

/// `validateStructuralInvariants`.
fn invariants(
    node: &Map<String, Value>,
    level: Level,
    path: &FieldPath<'_>,
    causes: &mut Vec<Cause>,
) {
    let kind = type_of(node);
    if kind == "array" && node.get("items").is_none() {
        causes.push(required(&format!("{path}.items"), "must be specified"));
    }
    if let Some(items) = object_at(node, "items") {
        invariants(items, Level::Item, &path.child("items"), causes);
    }
    for (key, property) in properties(node) {
        invariants(property, Level::Field, &path.key("properties", key), causes);
    }
    if let Some(additional) = node.get("additionalProperties") {
        if level == Level::Root {
            causes.push(forbidden(
                &format!("{path}.additionalProperties"),
                "must not be used at the root",
            ));
        }
        if let Value::Object(additional) = additional {
            let at = path.child("additionalProperties");
            invariants(additional, Level::Field, &at, causes);
        }
    }
    let int_or_string = flag(node, "x-kubernetes-int-or-string");
    let preserve = flag(node, "x-kubernetes-preserve-unknown-fields");
    let embedded = flag(node, "x-kubernetes-embedded-resource");
    if int_or_string && preserve {
        causes.push(invalid(
            &format!("{path}.x-kubernetes-preserve-unknown-fields"),
            "true",
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    if int_or_string && embedded {
        causes.push(invalid(
            &format!("{path}.x-kubernetes-embedded-resource"),
            "true",
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    value_validation(
        node,
        int_or_string_any_of(node),
        int_or_string_all_of(node),
        path,
        causes,
    );
    if embedded && kind != "object" {
        if kind.is_empty() {
            causes.push(required(
                &format!("{path}.type"),
                "must be object if x-kubernetes-embedded-resource is true",
            ));
        } else {
            causes.push(invalid(
                &format!("{path}.type"),
                &go_quote(kind),
                "must be object if x-kubernetes-embedded-resource is true",
            ));
        }
    } else if kind.is_empty() && !int_or_string && !preserve {
        let detail = match level {
            Level::Root => "must not be empty at the root",
            Level::Item => "must not be empty for specified array items",
            Level::Field => "must not be empty for specified object fields",
        };
        causes.push(required(&format!("{path}.type"), detail));
    }
    if embedded && node.contains_key("additionalProperties") {
        causes.push(forbidden(
            &format!("{path}.additionalProperties"),
            "must not be used if x-kubernetes-embedded-resource is set",
        ));
    }
    if level == Level::Root && !kind.is_empty() && kind != "object" {
        causes.push(invalid(
            &format!("{path}.type"),
            &go_quote(kind),
            "must be object at the root",
        ));
    }
    let resource = level == Level::Root || embedded;
    if resource {
        for key in ["kind", "apiVersion"] {
            if let Some(property) = object_at(node, "properties").and_then(|p| object_at(p, key))
                && type_of(property) != "string"
            {
                causes.push(invalid(
                    &format!("{path}.properties[{key}].type"),
                    &go_quote(type_of(property)),
                    "must be string",
                ));
            }
        }
    }
    if let Some(metadata) = object_at(node, "properties").and_then(|p| object_at(p, "metadata")) {
        let at = format!("{path}.properties[metadata]");
        if resource && type_of(metadata) != "object" {
            causes.push(invalid(
                &format!("{at}.type"),
                &go_quote(type_of(metadata)),
                "must be object",
            ));
        }
        if level == Level::Root
            && properties(metadata).any(|(key, _)| key != "name" && key != "generateName")
        {
            causes.push(forbidden(
                &at,
                "must not specify anything other than name and generateName, but metadata is implicitly specified",
            ));
        }
    }
    if embedded && !preserve && properties(node).next().is_none() {
        causes.push(required(
            &format!("{path}.properties"),
            "must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
        ));
    }
}

/// `ValidateDefaults`: each `default` (outside a resource's `metadata`, `kind` and
/// `apiVersion`, where the OpenAPI checks forbid them) holds only fields its schema declares
/// (`must not have unknown fields`) and passes its schema, its causes' fields under
/// `….default` (`….default.a`, `….default.[0]` as kube joins them), through `items` and
/// `properties` (not `additionalProperties`, where defaults are forbidden).
fn defaults(
    schema: &Value,
    path: &FieldPath<'_>,
    resource_root: bool,
    inside_meta: bool,
    causes: &mut Vec<Cause>,
) {
    let Value::Object(node) = schema else {
        return;
    };
    if let Some(default) = node.get("default").filter(|d| !d.is_null())
        && !inside_meta
    {
        // The node itself, not a copy: a copy per default made a schema with a default at
        // every level quadratic.
        // Written out only for a cause (each level's path is as long as its depth).
        let at = || format!("{path}.default");
        if crate::structural::has_unknown_fields(schema, default) {
            causes.push(invalid(
                &at(),
                &crate::field::go_value(default),
                "must not have unknown fields",
            ));
        }
        for (field, message, reason) in crate::structural::check_value(schema, default) {
            let field = if field.is_empty() || field == "<nil>" {
                at()
            } else {
                format!("{}.{field}", at())
            };
            causes.push((field, message, reason));
        }
    }
    if let Some(items) = node.get("items").filter(|items| items.is_object()) {
        defaults(items, &path.child("items"), false, inside_meta, causes);
    }
    let embedded = resource_root || flag(node, "x-kubernetes-embedded-resource");
    let properties = object_at(node, "properties").into_iter().flatten();
    for (key, property) in properties.filter(|(_, property)| property.is_object()) {
        let meta =
            inside_meta || (embedded && matches!(key.as_str(), "metadata" | "apiVersion" | "kind"));
        defaults(property, &path.key("properties", key), false, meta, causes);
    }
}

/// `anyOf: [{type: integer}, {type: string}]`, the int-or-string form kube allows a type in.
fn is_int_or_string_pair(list: Option<&Value>) -> bool {
    list.and_then(Value::as_array).is_some_and(|branches| {
        branches.len() == 2
            && branches[0] == serde_json::json!({"type": "integer"})
            && branches[1] == serde_json::json!({"type": "string"})
    })
}

fn int_or_string_any_of(node: &Map<String, Value>) -> bool {
    is_int_or_string_pair(node.get("anyOf"))
}

fn int_or_string_all_of(node: &Map<String, Value>) -> bool {
    node.get("allOf")
        .and_then(Value::as_array)
        .and_then(|all| all.first())
        .is_some_and(|first| is_int_or_string_pair(first.get("anyOf")))
}

/// `validateValueValidation`: the junctors' nested schemas, then the pattern.
fn value_validation(
    node: &Map<String, Value>,
    skip_any_of: bool,
    skip_first_all_of_any_of: bool,
    path: &FieldPath<'_>,
    causes: &mut Vec<Cause>,
) {
    let each = |key: &str| -> Vec<(usize, &Map<String, Value>)> {
        node.get(key)
            .and_then(Value::as_array)
            .map(|list| {
                list.iter()
                    .enumerate()
                    .filter_map(|(i, v)| v.as_object().map(|v| (i, v)))
                    .collect()
            })
            .unwrap_or_default()
    };
    if !skip_any_of {
        for (index, nested_node) in each("anyOf") {
            nested(nested_node, false, &path.index("anyOf", index), causes);
        }
    }
    for (index, nested_node) in each("allOf") {
        let skip = skip_first_all_of_any_of && index == 0;
        nested(nested_node, skip, &path.index("allOf", index), causes);
    }
    for (index, nested_node) in each("oneOf") {
        nested(nested_node, false, &path.index("oneOf", index), causes);
    }
    if let Some(not) = object_at(node, "not") {
        nested(not, false, &path.child("not"), causes);
    }
    if let Some(pattern) = node.get("pattern").and_then(Value::as_str)
        && !pattern.is_empty()
        && let Err(error) = crate::pattern::compile_pattern(pattern)
    {
        causes.push(invalid(
            &format!("{path}.pattern"),
            &go_quote(pattern),
            &format!("must be a valid regular expression, but isn't: {error}"),
        ));
    }
}

/// `validateNestedValueValidation`: a schema under a junctor holds value validations only.
fn nested(
    node: &Map<String, Value>,
    skip_any_of: bool,
    path: &FieldPath<'_>,
    causes: &mut Vec<Cause>,
) {
    value_validation(node, skip_any_of, false, path, causes);
    if let Some(items) = object_at(node, "items") {
        nested(items, false, &path.child("items"), causes);
    }
    for (key, property) in properties(node) {
        nested(property, false, &path.key("properties", key), causes);
    }
    let at = |key: &str| format!("{path}.{key}");
    if !type_of(node).is_empty() {
        causes.push(forbidden(&at("type"), "must be empty to be structural"));
    }
    if node.contains_key("additionalProperties") {
        causes.push(forbidden(
            &at("additionalProperties"),
            "must be undefined to be structural",
        ));
    }
    if node.get("default").is_some_and(|d| !d.is_null()) {
        causes.push(forbidden(
            &at("default"),
            "must be undefined to be structural",
        ));
    }
    for key in ["title", "description"] {
        if node
            .get(key)
            .and_then(Value::as_str)
            .is_some_and(|s| !s.is_empty())
        {
            causes.push(forbidden(&at(key), "must be empty to be structural"));
        }
    }
    if flag(node, "nullable") {
        causes.push(forbidden(&at("nullable"), "must be false to be structural"));
    }
    for key in [
        "x-kubernetes-preserve-unknown-fields",
        "x-kubernetes-embedded-resource",
        "x-kubernetes-int-or-string",
    ] {
        if flag(node, key) {
            causes.push(forbidden(&at(key), "must be false to be structural"));
        }
    }
    if non_empty_list(node, "x-kubernetes-list-map-keys") {
        causes.push(forbidden(
            &at("x-kubernetes-list-map-keys"),
            "must be empty to be structural",
        ));
    }
    for key in ["x-kubernetes-list-type", "x-kubernetes-map-type"] {
        if node.get(key).is_some_and(|v| !v.is_null()) {
            causes.push(forbidden(&at(key), "must be undefined to be structural"));
        }
    }
    if non_empty_list(node, "x-kubernetes-validations") {
        causes.push(forbidden(
            &at("x-kubernetes-validations"),
            "must be empty to be structural",
        ));
    }
    if object_at(node, "properties").is_some_and(|p| p.contains_key("metadata")) {
        causes.push(forbidden(
            &format!("{path}.properties[metadata]"),
            "must not be specified in a nested context",
        ));
    }
}

/// Where a node sits, for the checks that depend on it.
#[derive(Clone, Copy)]
struct Context<'a> {
    root: bool,
    /// Why a `default` may not be set here (`in top-level metadata`), if it may not.
    no_defaults: Option<&'a str>,
    /// How many times this node's rules may run (kube's `CELSchemaContext.MaxCardinality`):
    /// `Some(None)` unbounded; `None` where kube compiles no rule (under `not`, `allOf`,
    /// `anyOf`, `oneOf`).
    cardinality: Option<Option<u64>>,
    /// The rules' estimated costs so far, kube's `TotalCost`.
    costs: &'a RefCell<Costs>,
    /// Whether a rule's own estimated cost is not refused (kube's
    /// `suppressPerExpressionCost`: an update leaving the version's schema unchanged).
    suppress_rule_cost: bool,
}

impl<'a> Context<'a> {
    fn root(costs: &'a RefCell<Costs>, suppress_rule_cost: bool) -> Self {
        Context {
            root: true,
            no_defaults: None,
            cardinality: Some(Some(1)),
            costs,
            suppress_rule_cost,
        }
    }

    /// The context of a property, an array's items or a map's values of `node` (kube's
    /// `childContext`).
    fn child_of(self, node: &Map<String, Value>) -> Self {
        let cardinality = self.cardinality.map(|c| {
            let factor = crate::cel_rules::children_factor(node)?;
            Some(crate::cel_rules::times(c?, factor))
        });
        Context {
            cardinality,
            ..self.child()
        }
    }

    /// The context of a branch of `not`, `allOf`, `anyOf` or `oneOf`.
    fn child(self) -> Self {
        Context {
            root: false,
            cardinality: None,
            ..self
        }
    }
}

/// kube's `TotalCost`: the sum of the rules' estimated costs, and the (at most 4) most
/// expensive of those costing at least 1% of the limit.
#[derive(Default)]
struct Costs {
    total: u64,
    most: Vec<(String, u64)>,
}

impl Costs {
    fn observe(&mut self, path: String, cost: u64) {
        self.total = self.total.saturating_add(cost);
        if cost < crate::cel_rules::SCHEMA_COST_LIMIT / 100 {
            return;
        }
        self.most.push((path, cost));
        self.most.sort_by_key(|m| std::cmp::Reverse(m.1));
        self.most.truncate(4);
    }
}

/// `ValidateCustomResourceDefinitionOpenAPISchema`.
fn openapi(
    node: &Map<String, Value>,
    path: &FieldPath<'_>,
    context: Context<'_>,
    causes: &mut Vec<Cause>,
) {
    let at = |key: &str| format!("{path}.{key}");
    let kind = type_of(node);
    // specStandardValidatorV3.validate
    if !kind.is_empty() && !TYPES.contains(&kind) {
        causes.push(not_supported(&at("type"), kind, &TYPES));
    }
    if let Some(reason) = context.no_defaults
        && node.contains_key("default")
    {
        causes.push(forbidden(
            &at("default"),
            &format!("must not be set {reason}"),
        ));
    }
    for (key, detail) in [
        ("id", "id is not supported"),
        ("additionalItems", "additionalItems is not supported"),
        ("patternProperties", "patternProperties is not supported"),
        ("definitions", "definitions is not supported"),
        ("dependencies", "dependencies is not supported"),
        ("$ref", "$ref is not supported"),
    ] {
        if node.get(key).is_some_and(|v| match v {
            Value::String(s) => !s.is_empty(),
            Value::Object(m) => !m.is_empty() || key == "additionalItems",
            Value::Null => false,
            _ => true,
        }) {
            causes.push(forbidden(&at(key), detail));
        }
    }
    if kind == "null" {
        causes.push(forbidden(
            &at("type"),
            "type cannot be set to null, use nullable as an alternative",
        ));
    }
    if node.get("items").is_some_and(Value::is_array) {
        causes.push(forbidden(
            &at("items"),
            "items must be a schema object and not an array",
        ));
    }
    if flag(node, "uniqueItems") {
        causes.push(forbidden(
            &at("uniqueItems"),
            "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
        ));
    }
    if let Some(additional) = node.get("additionalProperties") {
        let has_properties = object_at(node, "properties").is_some_and(|p| !p.is_empty());
        if has_properties && (additional.is_object() || additional == &Value::Bool(false)) {
            causes.push(forbidden(
                &at("additionalProperties"),
                "additionalProperties and properties are mutual exclusive",
            ));
        }
        if let Value::Object(additional) = additional {
            let at = path.child("additionalProperties");
            openapi(additional, &at, context.child_of(node), causes);
        }
    }
    for (key, property) in properties(node) {
        let mut sub = context.child_of(node);
        if context.root && matches!(key.as_str(), "metadata" | "kind" | "apiVersion") {
            sub.no_defaults = Some(match key.as_str() {
                "metadata" => "in top-level metadata",
                "kind" => "in top-level kind",
                _ => "in top-level apiVersion",
            });
        }
        openapi(property, &path.key("properties", key), sub, causes);
    }
    if let Some(not) = object_at(node, "not") {
        openapi(not, &path.child("not"), context.child(), causes);
    }
    for junctor in ["allOf", "oneOf", "anyOf"] {
        if let Some(list) = node.get(junctor).and_then(Value::as_array) {
            for (index, branch) in list.iter().enumerate() {
                if let Value::Object(branch) = branch {
                    let at = path.index(junctor, index);
                    openapi(branch, &at, context.child(), causes);
                }
            }
        }
    }
    if let Some(items) = object_at(node, "items") {
        openapi(items, &path.child("items"), context.child_of(node), causes);
    }
    if node.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(false)) {
        causes.push(invalid(
            &at("x-kubernetes-preserve-unknown-fields"),
            "false",
            "must be true or undefined",
        ));
    }
    extensions(node, kind, path, context, causes);
}

/// The map and list extensions, and `x-kubernetes-validations`' entries.
fn extensions(
    node: &Map<String, Value>,
    kind: &str,
    path: &FieldPath<'_>,
    context: Context<'_>,
    causes: &mut Vec<Cause>,
) {
    let root = context.root;
    let at = |key: &str| format!("{path}.{key}");
    let must_be = |causes: &mut Vec<Cause>, wanted: &str, marker: &str| {
        let detail = format!("must be {wanted} if {marker} is specified");
        if kind.is_empty() {
            causes.push(required(&at("type"), &detail));
        } else {
            causes.push(invalid(&at("type"), &go_quote(kind), &detail));
        }
    };
    if let Some(map_type) = node.get("x-kubernetes-map-type").and_then(Value::as_str) {
        if kind != "object" {
            must_be(causes, "object", "x-kubernetes-map-type");
        }
        if map_type != "atomic" && map_type != "granular" {
            causes.push(not_supported(
                &at("x-kubernetes-map-type"),
                map_type,
                &["atomic", "granular"],
            ));
        }
    }
    let list_type = node.get("x-kubernetes-list-type").and_then(Value::as_str);
    if list_type.is_some() && kind != "array" {
        must_be(causes, "array", "x-kubernetes-list-type");
    }
    if let Some(list_type) = list_type
        && !matches!(list_type, "atomic" | "set" | "map")
    {
        causes.push(not_supported(
            &at("x-kubernetes-list-type"),
            list_type,
            &["atomic", "set", "map"],
        ));
    }
    let keys: Vec<&str> = node
        .get("x-kubernetes-list-map-keys")
        .and_then(Value::as_array)
        .map(|k| k.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let keys_text = format!(
        "[]string{{{}}}",
        keys.iter()
            .map(|k| go_quote(k))
            .collect::<Vec<_>>()
            .join(", ")
    );
    if !keys.is_empty() {
        match list_type {
            None => causes.push(required(
                &at("x-kubernetes-list-type"),
                "must be map if x-kubernetes-list-map-keys is non-empty",
            )),
            Some("map") => {}
            Some(other) => causes.push(invalid(
                &at("x-kubernetes-list-type"),
                &go_quote(other),
                "must be map if x-kubernetes-list-map-keys is non-empty",
            )),
        }
    }
    let items = node.get("items");
    let item_schema = items.and_then(Value::as_object);
    if list_type == Some("map") {
        if keys.is_empty() {
            causes.push(required(
                &at("x-kubernetes-list-map-keys"),
                "must not be empty if x-kubernetes-list-type is map",
            ));
        }
        if items.is_none() {
            causes.push(required(
                &at("items"),
                "must have a schema if x-kubernetes-list-type is map",
            ));
        }
        if let Some(item_schema) = item_schema {
            let item_type = type_of(item_schema);
            if item_type != "object" {
                causes.push(invalid(
                    &format!("{path}.items.type"),
                    &go_quote(item_type),
                    "must be object if parent array's x-kubernetes-list-type is map",
                ));
            } else {
                let mut seen = Vec::new();
                for key in &keys {
                    match object_at(item_schema, "properties").and_then(|p| object_at(p, key)) {
                        Some(property) => {
                            if matches!(type_of(property), "array" | "object") {
                                causes.push(invalid(
                                    &format!("{path}.items.properties[{key}].type"),
                                    &go_quote(item_type),
                                    "must be a scalar type if parent array's x-kubernetes-list-type is map",
                                ));
                            }
                        }
                        None => causes.push(invalid(
                            &at("x-kubernetes-list-map-keys"),
                            &keys_text,
                            "entries must all be names of item properties",
                        )),
                    }
                    if seen.contains(key) {
                        causes.push(invalid(
                            &at("x-kubernetes-list-map-keys"),
                            &keys_text,
                            "must not contain duplicate entries",
                        ));
                    }
                    seen.push(key);
                }
            }
        }
    }
    // validateMapListKeysMapSet
    if let (Some(item_schema), Some(list_type @ ("set" | "map"))) = (item_schema, list_type) {
        if flag(item_schema, "nullable") {
            causes.push(forbidden(
                &format!("{path}.items.nullable"),
                &format!("cannot be nullable when x-kubernetes-list-type is {list_type}"),
            ));
        }
        if list_type == "map" {
            let required_keys: Vec<&str> = item_schema
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            for key in &keys {
                let Some(property) =
                    object_at(item_schema, "properties").and_then(|p| object_at(p, key))
                else {
                    continue;
                };
                if !required_keys.contains(key)
                    && property.get("default").is_none_or(Value::is_null)
                {
                    causes.push(required(
                        &format!("{path}.items.properties[{key}].default"),
                        "this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property",
                    ));
                }
                if flag(property, "nullable") {
                    causes.push(forbidden(
                        &format!("{path}.items.properties[{key}].nullable"),
                        "this property is in x-kubernetes-list-map-keys, so it cannot be nullable",
                    ));
                }
            }
        }
    }
    if let Some(rules) = node
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
    {
        for (index, rule) in rules.iter().enumerate() {
            let at = |key: &str| format!("{path}.x-kubernetes-validations[{index}].{key}");
            let field = |key: &str| rule.get(key).and_then(Value::as_str).unwrap_or("");
            let (text, message) = (field("rule"), field("message"));
            let newline = |s: &str| s.contains(['\n', '\r']);
            if text.trim().is_empty() {
                causes.push(required(&at("rule"), "rule is not specified"));
            } else if !message.is_empty() && message.trim().is_empty() {
                causes.push(invalid(
                    &at("message"),
                    &go_quote(message),
                    "message must be non-empty if specified",
                ));
            } else if newline(message.trim()) {
                causes.push(invalid(
                    &at("message"),
                    &go_quote(message),
                    "message must not contain line breaks",
                ));
            } else if newline(text.trim()) && message.trim().is_empty() {
                causes.push(required(
                    &at("message"),
                    "message must be specified if rule contains line breaks",
                ));
            }
            let expression = field("messageExpression");
            if !expression.is_empty() && expression.trim().is_empty() {
                causes.push(required(
                    &at("messageExpression"),
                    "messageExpression must be non-empty if specified",
                ));
            }
            if let Some(reason) = rule.get("reason").and_then(Value::as_str) {
                const REASONS: [&str; 4] = [
                    "FieldValueDuplicate",
                    "FieldValueForbidden",
                    "FieldValueInvalid",
                    "FieldValueRequired",
                ];
                if !REASONS.contains(&reason) {
                    causes.push(not_supported(&at("reason"), reason, &REASONS));
                }
            }
            let resource = root || flag(node, "x-kubernetes-embedded-resource");
            let mut compiled = true;
            for (key, source, expression) in [
                ("rule", text, Expression::Rule),
                ("messageExpression", expression, Expression::Message),
            ] {
                if source.trim().is_empty() {
                    continue;
                }
                if let Some(e) = rule_error(source, node, resource, expression) {
                    causes.push(invalid(&at(key), &go_rule(rule), &e));
                    compiled = false;
                } else if compiled && let Some(cardinality) = context.cardinality {
                    let optional = rule.get("optionalOldSelf") == Some(&Value::Bool(true));
                    rule_cost(
                        (source, expression, optional),
                        node,
                        resource,
                        cardinality,
                        &at(key),
                        context,
                        causes,
                    );
                }
            }
            let field_path = field("fieldPath");
            if !field_path.trim().is_empty()
                && !newline(field_path)
                && let Some(e) = crate::cel_rules::field_path_error(node, field_path)
            {
                causes.push(invalid(
                    &at("fieldPath"),
                    &go_quote(field_path),
                    &format!("fieldPath must be a valid path: {e}"),
                ));
            }
            if !field_path.is_empty() && field_path.trim().is_empty() {
                causes.push(invalid(
                    &at("fieldPath"),
                    &go_quote(field_path),
                    "fieldPath must be non-empty if specified",
                ));
            }
            if newline(field_path) {
                causes.push(invalid(
                    &at("fieldPath"),
                    &go_quote(field_path),
                    "fieldPath must not contain line breaks",
                ));
            }
        }
    }
}

/// kube's check of a compiled rule's or `messageExpression`'s estimated cost at `at`: a
/// rule's cost times the times it may run (`cardinality`, else as many of the node's values
/// as fit in a request) above [`crate::cel_rules::RULE_COST_LIMIT`] is refused, likewise a
/// `messageExpression`'s own cost; both count in the schema's total. A rule whose cost is not
/// estimated (see `cel_rules`' `cost` module) counts as nothing.
fn rule_cost(
    (source, expression, optional_old_self): (&str, Expression, bool),
    node: &Map<String, Value>,
    resource: bool,
    cardinality: Option<u64>,
    at: &str,
    context: Context<'_>,
    causes: &mut Vec<Cause>,
) {
    use crate::cel_rules::{RULE_COST_LIMIT, exceeds, times, unbounded_cardinality};
    let Some(cost) = crate::cel_rules::estimated_cost(source, node, resource, optional_old_self)
    else {
        return;
    };
    let (cost, name) = match expression {
        Expression::Rule => {
            let Some(runs) = cardinality.or_else(|| unbounded_cardinality(node, resource)) else {
                return;
            };
            (times(cost, runs), "estimated rule cost")
        }
        Expression::Message => (cost, "estimated messageExpression cost"),
    };
    if !context.suppress_rule_cost && cost > RULE_COST_LIMIT {
        causes.push(forbidden(at, &exceeds(name, cost, RULE_COST_LIMIT)));
    }
    context.costs.borrow_mut().observe(at.to_owned(), cost);
}

/// A rule as Go's `%#v` prints kube's internal `apiextensions.ValidationRule` (the value of a
/// rule's field errors); a set pointer prints as a fixed address, where Go prints the real one.
fn go_rule(rule: &Value) -> String {
    let text = |key: &str| go_quote(rule.get(key).and_then(Value::as_str).unwrap_or(""));
    let pointer = |key: &str, kind: &str| {
        if rule.get(key).is_some_and(|v| !v.is_null()) {
            format!("(*{kind})(0xc000010000)")
        } else {
            format!("(*{kind})(nil)")
        }
    };
    format!(
        "apiextensions.ValidationRule{{Rule:{}, Message:{}, MessageExpression:{}, Reason:{}, FieldPath:{}, OptionalOldSelf:{}}}",
        text("rule"),
        text("message"),
        text("messageExpression"),
        pointer("reason", "apiextensions.FieldValueErrorReason"),
        text("fieldPath"),
        pointer("optionalOldSelf", "bool"),
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const AT: &str = "spec.versions[0].schema.openAPIV3Schema";

    fn messages(schema: Value) -> Vec<String> {
        validate(&schema, AT, false).iter().map(text).collect()
    }

    #[test]
    fn a_well_formed_schema_passes() {
        let schema = json!({"type": "object", "properties": {
            "apiVersion": {"type": "string"}, "kind": {"type": "string"},
            "metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 10}}},
            "spec": {"type": "object", "required": ["ports"], "properties": {
                "port": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
                "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                    "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}},
                "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}, "x-kubernetes-map-type": "atomic"},
                "raw": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "either": {"type": "string", "oneOf": [{"pattern": "^a"}, {"maxLength": 2}],
                    "x-kubernetes-validations": [{"rule": "self != 'x'", "message": "not x"}]}
            }},
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
        }});
        assert_eq!(messages(schema), Vec::<String>::new());
    }

    #[test]
    fn structural_invariants_are_refused_sorted_as_kube_sorts_them() {
        let schema = json!({"properties": {
            "metadata": {"type": "object", "properties": {"labels": {"type": "object"}}},
            "kind": {"type": "integer"},
            "spec": {"properties": {"list": {"type": "array"}, "items": {"type": "array", "items": {}}}},
            "choice": {"type": "string", "anyOf": [{"type": "string", "nullable": true,
                "properties": {"metadata": {}}}]}
        }, "additionalProperties": {"type": "string"}});
        assert_eq!(
            messages(schema),
            [
                format!("{AT}.additionalProperties: Forbidden: must not be used at the root"),
                format!(
                    "{AT}.properties[choice].anyOf[0].nullable: Forbidden: must be false to be structural"
                ),
                format!(
                    "{AT}.properties[choice].anyOf[0].properties[metadata]: Forbidden: must not be specified in a nested context"
                ),
                format!(
                    "{AT}.properties[choice].anyOf[0].type: Forbidden: must be empty to be structural"
                ),
                format!("{AT}.properties[kind].type: Invalid value: \"integer\": must be string"),
                format!(
                    "{AT}.properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified"
                ),
                format!(
                    "{AT}.properties[spec].properties[items].items.type: Required value: must not be empty for specified array items"
                ),
                format!(
                    "{AT}.properties[spec].properties[list].items: Required value: must be specified"
                ),
                format!(
                    "{AT}.properties[spec].type: Required value: must not be empty for specified object fields"
                ),
                format!("{AT}.type: Required value: must not be empty at the root"),
                format!(
                    "{AT}.additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive"
                ),
            ]
        );
        assert_eq!(
            messages(json!({"type": "array", "items": {"type": "string"}})),
            [format!(
                "{AT}.type: Invalid value: \"array\": must be object at the root"
            )]
        );
    }

    #[test]
    fn openapi_keywords_and_extensions_are_refused_in_kube_s_words() {
        let schema = json!({"type": "object", "nullable": true, "properties": {
            "metadata": {"type": "object", "default": {}},
            "a": {"type": "array", "uniqueItems": true, "items": {"type": "string"}},
            "b": {"type": "date"},
            "c": {"type": "object", "x-kubernetes-preserve-unknown-fields": false, "$ref": "#/x"},
            "d": {"type": "string", "x-kubernetes-list-type": "queue"},
            "e": {"type": "array", "x-kubernetes-list-type": "map", "items": {"type": "object",
                "properties": {"k": {"type": "string"}}}},
            "f": {"type": "array", "x-kubernetes-list-map-keys": ["k", "k", "z"], "x-kubernetes-list-type": "map",
                "items": {"type": "object", "nullable": true, "properties": {"k": {"type": "object"}}}},
            "g": {"type": "object", "x-kubernetes-validations": [{"rule": " "}, {"rule": "self.a\n== 1"},
                {"rule": "self.a == 1", "reason": "Bad"}]}
        }});
        assert_eq!(
            messages(schema),
            [
                format!("{AT}.nullable: Forbidden: nullable cannot be true at the root"),
                format!(
                    "{AT}.properties[a].uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic"
                ),
                format!(
                    "{AT}.properties[b].type: Unsupported value: \"date\": supported values: \"array\", \"boolean\", \"integer\", \"number\", \"object\", \"string\""
                ),
                format!("{AT}.properties[c].$ref: Forbidden: $ref is not supported"),
                format!(
                    "{AT}.properties[c].x-kubernetes-preserve-unknown-fields: Invalid value: false: must be true or undefined"
                ),
                format!(
                    "{AT}.properties[d].type: Invalid value: \"string\": must be array if x-kubernetes-list-type is specified"
                ),
                format!(
                    "{AT}.properties[d].x-kubernetes-list-type: Unsupported value: \"queue\": supported values: \"atomic\", \"set\", \"map\""
                ),
                format!(
                    "{AT}.properties[e].x-kubernetes-list-map-keys: Required value: must not be empty if x-kubernetes-list-type is map"
                ),
                format!(
                    "{AT}.properties[f].items.properties[k].type: Invalid value: \"object\": must be a scalar type if parent array's x-kubernetes-list-type is map"
                ),
                format!(
                    "{AT}.properties[f].items.properties[k].type: Invalid value: \"object\": must be a scalar type if parent array's x-kubernetes-list-type is map"
                ),
                format!(
                    "{AT}.properties[f].x-kubernetes-list-map-keys: Invalid value: []string{{\"k\", \"k\", \"z\"}}: must not contain duplicate entries"
                ),
                format!(
                    "{AT}.properties[f].x-kubernetes-list-map-keys: Invalid value: []string{{\"k\", \"k\", \"z\"}}: entries must all be names of item properties"
                ),
                format!(
                    "{AT}.properties[f].items.nullable: Forbidden: cannot be nullable when x-kubernetes-list-type is map"
                ),
                format!(
                    "{AT}.properties[f].items.properties[k].default: Required value: this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property"
                ),
                format!(
                    "{AT}.properties[f].items.properties[k].default: Required value: this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property"
                ),
                format!(
                    "{AT}.properties[g].x-kubernetes-validations[0].rule: Required value: rule is not specified"
                ),
                format!(
                    "{AT}.properties[g].x-kubernetes-validations[1].message: Required value: message must be specified if rule contains line breaks"
                ),
                format!(
                    "{AT}.properties[g].x-kubernetes-validations[2].reason: Unsupported value: \"Bad\": supported values: \"FieldValueDuplicate\", \"FieldValueForbidden\", \"FieldValueInvalid\", \"FieldValueRequired\""
                ),
                format!(
                    "{AT}.properties[metadata].default: Forbidden: must not be set in top-level metadata"
                ),
            ]
        );
    }

    #[test]
    fn rules_must_compile_and_field_paths_name_fields() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object",
        "properties": {"a": {"type": "integer"}},
        "x-kubernetes-validations": [
            {"rule": "self.a > minimum"},
            {"rule": "self.a > 1", "messageExpression": "'a is ' + "},
            {"rule": "self.a > 1", "fieldPath": ".b", "reason": "FieldValueForbidden"},
            {"rule": "self.a > 1", "fieldPath": ".a", "messageExpression": "'a: ' + (self.a > 5 ? 'big' : 'small')"}
        ]}}});
        let found = messages(schema);
        let at = format!("{AT}.properties[spec].x-kubernetes-validations");
        assert_eq!(found.len(), 3, "{found:?}");
        assert_eq!(
            found[0],
            format!(
                "{at}[0].rule: Invalid value: apiextensions.ValidationRule{{Rule:\"self.a > minimum\", Message:\"\", MessageExpression:\"\", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:\"\", OptionalOldSelf:(*bool)(nil)}}: compilation failed: ERROR: <input>:1:10: undeclared reference to 'minimum' (in container '')\n | self.a > minimum\n | .........^"
            )
        );
        assert!(
            found[1].starts_with(&format!(
                "{at}[1].messageExpression: Invalid value: apiextensions.ValidationRule{{Rule:\"self.a > 1\", Message:\"\", MessageExpression:\"'a is ' + \""
            )) && found[1].contains("messageExpression compilation failed: ERROR: <input>:1:"),
            "{found:?}"
        );
        assert_eq!(
            found[2],
            format!(
                "{at}[2].fieldPath: Invalid value: \".b\": fieldPath must be a valid path: does not refer to a valid field"
            )
        );
    }

    #[test]
    fn defaults_must_fit_their_schema() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "n": {"type": "integer", "default": "three"},
            "m": {"type": "integer", "minimum": 1, "default": 2},
            "o": {"type": "object", "properties": {"a": {"type": "string"}},
                "default": {"a": 1, "b": true}},
            "l": {"type": "array", "items": {"type": "string", "maxLength": 2, "default": "abc"},
                "default": ["x", 5]}
        }}}});
        assert_eq!(
            messages(schema),
            [
                format!(
                    "{AT}.properties[spec].properties[l].default.[1]: Invalid value: \"integer\": [1] in body must be of type string: \"integer\""
                ),
                format!(
                    "{AT}.properties[spec].properties[l].items.default: Too long: may not be more than 2 bytes"
                ),
                format!(
                    "{AT}.properties[spec].properties[n].default: Invalid value: \"string\":  in body must be of type integer: \"string\""
                ),
                format!(
                    "{AT}.properties[spec].properties[o].default: Invalid value: map[string]interface {{}}{{\"a\":1, \"b\":true}}: must not have unknown fields"
                ),
                format!(
                    "{AT}.properties[spec].properties[o].default.a: Invalid value: \"integer\": a in body must be of type string: \"integer\""
                ),
            ]
        );
        // A default is pruned, not defaulted, before it is compared (kube's `pruning.Prune`):
        // an unknown field in a default below is that default's, not also its parent's.
        let nested = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "o": {"type": "object", "default": {}, "properties": {
                "a": {"type": "object", "default": {"x": 1}, "properties": {"y": {"type": "integer"}}}}}
        }}}});
        assert_eq!(
            messages(nested),
            [format!(
                "{AT}.properties[spec].properties[o].properties[a].default: Invalid value: map[string]interface {{}}{{\"x\":1}}: must not have unknown fields"
            )]
        );
        // Checked only over a structural schema: a missing type is reported instead.
        let unstructural = json!({"type": "object", "properties": {"spec": {"default": 1}}});
        assert_eq!(
            messages(unstructural),
            [format!(
                "{AT}.properties[spec].type: Required value: must not be empty for specified object fields"
            )]
        );
    }
}

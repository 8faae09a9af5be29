//! CustomResourceDefinitions (`apiextensions.k8s.io/v1`): the definition of the resource
//! itself, kube-apiserver's defaults and validation of a CRD, the status its controllers
//! write (`acceptedNames`, the `NamesAccepted` and `Established` conditions,
//! `storedVersions`), and the custom resource a CRD asks the server to serve.
//!
//! ## Guarantees
//! - [`validate`] refuses what kube-apiserver's `ValidateCustomResourceDefinition` refuses for
//!   the essentials — `metadata.name == <plural>.<group>`, the group (a DNS subdomain with a
//!   dot), the names (plural, singular, kind, listKind, short names, categories), the scope,
//!   unique version names, exactly one storage version, at least one served version, and on
//!   update the immutable group, plural (and scope and kind once established) — with its 422
//!   wording (`CustomResourceDefinition.apiextensions.k8s.io "x" is invalid: <field>: ...`);
//!   also a schema in every version, printer columns (type, format, JSONPath; under
//!   `spec.additionalPrinterColumns` when all versions share them, as kube's conversion
//!   moves them), selectable fields, the conversion strategy and webhook, no
//!   `preserveUnknownFields: true`, and API approval of protected groups.
//!   A list value (`spec.versions`) is shown as JSON where Go prints its struct.
//! - [`set_status`] is a pure function of the spec, the old status, the names other resources
//!   hold and the time, as kube's naming controller: each name of the spec that is free (or
//!   already accepted) is accepted one by one; a CRD whose names conflict with nothing gets
//!   `NamesAccepted` True (`NoConflicts`) and `Established` True (`InitialNamesAccepted`), else
//!   `NamesAccepted` False (`PluralConflict`, `ShortNamesConflict`, ... `"<name>" is already in
//!   use`) and, unless it was established already (then it stays so, served under its accepted
//!   names), `Established` False (`NotAccepted`). A condition keeps its `lastTransitionTime`
//!   while its status is unchanged. A write of the `status` subresource keeps the stored spec
//!   and sets `storedVersions` (the storage-version migration), which must name the storage
//!   version and versions of the spec only ([`stored_versions_causes`], also on spec updates).
//! - [`served`] maps an established CRD to the one resource the server serves for it: its
//!   storage version, when that version is served (other versions are not served yet).

use serde_json::{Map, Value, json};

use crate::cel_rules::RuleTree;
use crate::error::ApiError;
use crate::field::Cause;
use crate::resources::{ResourceDef, compare_kube_versions, pointer_text};

/// The API group of CustomResourceDefinitions.
pub const GROUP: &str = "apiextensions.k8s.io";
/// The plural of CustomResourceDefinitions.
pub const PLURAL: &str = "customresourcedefinitions";

/// The definition of the `customresourcedefinitions` resource (cluster-scoped, short names
/// `crd` and `crds`, category `api-extensions`), stored under
/// `apiextensions.k8s.io/customresourcedefinitions/` as kube-apiserver stores it.
#[must_use]
pub fn definition() -> ResourceDef {
    ResourceDef {
        short_names: vec!["crd".to_owned(), "crds".to_owned()],
        categories: vec!["api-extensions".to_owned()],
        ..ResourceDef::named(GROUP, "v1", PLURAL, "CustomResourceDefinition", false)
    }
}

/// Whether `def` is the CustomResourceDefinition resource.
#[must_use]
pub fn is_crd(def: &ResourceDef) -> bool {
    def.group == GROUP && def.plural == PLURAL
}

/// kube-apiserver's defaults of a CRD (`SetDefaults_CustomResourceDefinitionSpec`): the
/// singular is the lowercased kind, the list kind `<Kind>List`, `conversion.strategy` None.
pub fn apply_defaults(object: &mut Value) {
    let kind = pointer_text(object, "/spec/names/kind").to_owned();
    let Some(names) = object
        .pointer_mut("/spec/names")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    if !kind.is_empty() {
        if names
            .get("singular")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            names.insert("singular".into(), Value::String(kind.to_ascii_lowercase()));
        }
        if names
            .get("listKind")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            names.insert("listKind".into(), Value::String(format!("{kind}List")));
        }
    }
    if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut)
        && !spec.contains_key("conversion")
    {
        spec.insert("conversion".into(), json!({"strategy": "None"}));
    }
}

fn required(field: &str) -> Cause {
    crate::field::required(field, "")
}

fn invalid(field: &str, value: &str, detail: &str) -> Cause {
    crate::field::invalid(field, &crate::field::go_quote(value), detail)
}

fn invalid_json(field: &str, value: &Value, detail: &str) -> Cause {
    crate::field::invalid(field, &value.to_string(), detail)
}

/// A DNS-1035 label check (`IsDNS1035Label`), with Kubernetes' message.
fn dns1035(value: &str) -> Result<(), String> {
    crate::names::validate_dns1035_label(value)
}

fn strings_at(object: &Value, pointer: &str) -> Vec<String> {
    object
        .pointer(pointer)
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// The name checks of `ValidateCustomResourceDefinitionNames` on `names` at `path`.
fn validate_names(names: &Value, path: &str, causes: &mut Vec<Cause>) {
    let field = |key: &str| format!("{path}.{key}");
    for key in ["plural", "singular"] {
        let value = pointer_text(names, &format!("/{key}"));
        if !value.is_empty()
            && let Err(message) = dns1035(value)
        {
            causes.push(invalid(&field(key), value, &message));
        }
    }
    for key in ["kind", "listKind"] {
        let value = pointer_text(names, &format!("/{key}"));
        if !value.is_empty()
            && let Err(message) = dns1035(&value.to_ascii_lowercase())
        {
            causes.push(invalid(
                &field(key),
                value,
                &format!("may have mixed case, but should otherwise match: {message}"),
            ));
        }
    }
    for (index, short) in strings_at(names, "/shortNames").iter().enumerate() {
        if let Err(message) = dns1035(short) {
            causes.push(invalid(
                &format!("{path}.shortNames[{index}]"),
                short,
                &message,
            ));
        }
    }
    let kind = pointer_text(names, "/kind");
    if !kind.is_empty() && kind == pointer_text(names, "/listKind") {
        causes.push(invalid(
            &field("listKind"),
            kind,
            "kind and listKind may not be the same",
        ));
    }
    for (index, category) in strings_at(names, "/categories").iter().enumerate() {
        if let Err(message) = dns1035(category) {
            causes.push(invalid(
                &format!("{path}.categories[{index}]"),
                category,
                &message,
            ));
        }
    }
}

/// Validates a (defaulted) CRD as kube-apiserver does on create (`old` = `None`) and update.
///
/// # Errors
/// 422 Invalid with one cause per failure.
pub fn validate(object: &Value, old: Option<&Value>) -> Result<(), ApiError> {
    let causes = validation_causes(object, old);
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(
            &definition(),
            pointer_text(object, "/metadata/name"),
            causes,
        ))
    }
}

/// The causes [`validate`] refuses the CRD with (none: valid).
#[must_use]
pub fn validation_causes(object: &Value, old: Option<&Value>) -> Vec<Cause> {
    let mut causes = Vec::new();
    let name = pointer_text(object, "/metadata/name");
    let group = pointer_text(object, "/spec/group");
    let plural = pointer_text(object, "/spec/names/plural");
    if name != format!("{plural}.{group}") {
        causes.push(invalid(
            "metadata.name",
            name,
            "must be spec.names.plural+\".\"+spec.group",
        ));
    }
    if group.is_empty() {
        causes.push(required("spec.group"));
    } else if let Err(message) = crate::names::validate_dns1123_subdomain(group) {
        causes.push(invalid("spec.group", group, &message));
    } else if !group.contains('.') {
        causes.push(invalid(
            "spec.group",
            group,
            "should be a domain with at least one dot",
        ));
    }
    match pointer_text(object, "/spec/scope") {
        "" => causes.push(required("spec.scope")),
        "Cluster" | "Namespaced" => {}
        other => causes.push((
            "spec.scope".to_owned(),
            format!("Unsupported value: {other:?}: supported values: \"Cluster\", \"Namespaced\""),
            "FieldValueNotSupported".to_owned(),
        )),
    }
    let empty = Vec::new();
    let versions = object
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .unwrap_or(&empty);
    validate_schemas_present(object, old, versions, &mut causes);
    let mut storage = 0;
    let mut served = 0;
    let mut seen = Vec::new();
    let mut unique = true;
    for (index, version) in versions.iter().enumerate() {
        let version_name = pointer_text(version, "/name");
        if version.get("storage").and_then(Value::as_bool) == Some(true) {
            storage += 1;
        }
        if version.get("served").and_then(Value::as_bool) == Some(true) {
            served += 1;
        }
        if seen.contains(&version_name) {
            unique = false;
        }
        seen.push(version_name);
        if let Err(message) = dns1035(version_name) {
            causes.push(invalid(
                &format!("spec.versions[{index}].name"),
                version_name,
                &message,
            ));
        }
    }
    let versions_value = Value::Array(versions.clone());
    if versions.is_empty() {
        causes.push((
            "spec.versions".to_owned(),
            "Required value: must have at least one version".to_owned(),
            "FieldValueRequired".to_owned(),
        ));
    } else {
        if !unique {
            causes.push(invalid_json(
                "spec.versions",
                &versions_value,
                "must contain unique version names",
            ));
        }
        if storage != 1 {
            causes.push(invalid_json(
                "spec.versions",
                &versions_value,
                "must have exactly one version marked as storage version",
            ));
        }
        if served == 0 {
            causes.push(invalid_json(
                "spec.versions",
                &versions_value,
                "must have at least one version marked as served",
            ));
        }
    }
    for key in ["plural", "singular", "kind", "listKind"] {
        if pointer_text(object, &format!("/spec/names/{key}")).is_empty() {
            causes.push(required(&format!("spec.names.{key}")));
        }
    }
    let names = object
        .pointer("/spec/names")
        .cloned()
        .unwrap_or(Value::Null);
    validate_names(&names, "spec.names", &mut causes);
    // kube's conversion from v1 moves `additionalPrinterColumns` the versions all share to the
    // spec, where they are validated (and reported) once.
    let columns_of = |v: &Value| {
        v.get("additionalPrinterColumns")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let shared_columns = versions
        .first()
        .map(columns_of)
        .filter(|first| versions.iter().all(|v| columns_of(v) == *first));
    for (index, version) in versions.iter().enumerate() {
        if let Some(schema) = version.pointer("/schema/openAPIV3Schema") {
            let path = format!("spec.versions[{index}].schema.openAPIV3Schema");
            // kube's `suppressPerExpressionCost`: on an update, a version whose schema is
            // unchanged is not refused for a rule's own estimated cost.
            let unchanged = old.is_some_and(|old| {
                old.pointer("/spec/versions")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .find(|v| v.get("name") == version.get("name"))
                    .and_then(|v| v.pointer("/schema/openAPIV3Schema"))
                    == Some(schema)
            });
            causes.extend(crate::crd_schema::validate(schema, &path, unchanged));
        }
        if shared_columns.is_none() {
            for (at, column) in columns_of(version).iter().enumerate() {
                let path = format!("spec.versions[{index}].additionalPrinterColumns[{at}]");
                validate_column(column, &path, &mut causes);
            }
        }
        validate_selectable_fields(version, &format!("spec.versions[{index}]"), &mut causes);
    }
    for (at, column) in shared_columns.unwrap_or_default().iter().enumerate() {
        validate_column(
            column,
            &format!("spec.additionalPrinterColumns[{at}]"),
            &mut causes,
        );
    }
    validate_conversion(object, old, &mut causes);
    if let Some(old) = old {
        let established = condition_true(old, "Established");
        let mut immutable = vec![
            ("spec.group", "/spec/group"),
            ("spec.names.plural", "/spec/names/plural"),
        ];
        if established {
            immutable.insert(0, ("spec.names.kind", "/spec/names/kind"));
            immutable.insert(0, ("spec.scope", "/spec/scope"));
        }
        for (field, pointer) in immutable {
            let new_value = pointer_text(object, pointer);
            if new_value != pointer_text(old, pointer) {
                causes.push(invalid(field, new_value, "field is immutable"));
            }
        }
    }
    validate_api_approval(object, old, &mut causes);
    let preserves = |crd: &Value| {
        crd.pointer("/spec/preserveUnknownFields")
            .and_then(Value::as_bool)
            == Some(true)
    };
    if preserves(object) && !old.is_some_and(preserves) {
        causes.push(crate::field::invalid(
            "spec.preserveUnknownFields",
            "true",
            "cannot set to true, set x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead",
        ));
    }
    causes
}

/// kube's check that every version has a schema (`requireOpenAPISchema`, on create and while
/// the stored CRD has one in every version), else that every served version has one unless
/// `spec.preserveUnknownFields`.
fn validate_schemas_present(
    object: &Value,
    old: Option<&Value>,
    versions: &[Value],
    causes: &mut Vec<Cause>,
) {
    let has_schema = |v: &Value| {
        v.pointer("/schema/openAPIV3Schema")
            .is_some_and(|s| !s.is_null())
    };
    let all_have = |crd: &Value| {
        crd.pointer("/spec/versions")
            .and_then(Value::as_array)
            .is_some_and(|vs| !vs.is_empty() && vs.iter().all(has_schema))
    };
    let require = old.is_none_or(all_have);
    let preserve = object
        .pointer("/spec/preserveUnknownFields")
        .and_then(Value::as_bool)
        == Some(true);
    for (index, version) in versions.iter().enumerate() {
        let path = format!("spec.versions[{index}].schema.openAPIV3Schema");
        if has_schema(version) {
            continue;
        }
        if require {
            causes.push(crate::field::required(&path, "schemas are required"));
        } else if !preserve && version.get("served").and_then(Value::as_bool) == Some(true) {
            causes.push(crate::field::required(
                &path,
                "because otherwise all fields are pruned",
            ));
        }
    }
}

/// The printer column types kube accepts, as its `sets.String.List()` sorts them.
const COLUMN_TYPES: &[&str] = &["boolean", "date", "integer", "number", "string"];
/// The printer column formats kube accepts, sorted.
const COLUMN_FORMATS: &[&str] = &[
    "byte",
    "date",
    "date-time",
    "double",
    "float",
    "int32",
    "int64",
    "password",
];

/// kube's `ValidateCustomResourceColumnDefinition` of the column at `path` (its `jsonPath` is
/// reported as `JSONPath`, the internal field's name).
fn validate_column(column: &Value, path: &str, causes: &mut Vec<Cause>) {
    if pointer_text(column, "/name").is_empty() {
        causes.push(required(&format!("{path}.name")));
    }
    let types = format!("must be one of {}", COLUMN_TYPES.join(","));
    match pointer_text(column, "/type") {
        "" => causes.push(crate::field::required(&format!("{path}.type"), &types)),
        kind if !COLUMN_TYPES.contains(&kind) => {
            causes.push(invalid(&format!("{path}.type"), kind, &types));
        }
        _ => {}
    }
    let format = pointer_text(column, "/format");
    if !format.is_empty() && !COLUMN_FORMATS.contains(&format) {
        causes.push(invalid(
            &format!("{path}.format"),
            format,
            &format!("must be one of {}", COLUMN_FORMATS.join(",")),
        ));
    }
    let json_path = pointer_text(column, "/jsonPath");
    if json_path.is_empty() {
        causes.push(required(&format!("{path}.JSONPath")));
    } else if !json_path.starts_with('.') {
        causes.push(invalid(
            &format!("{path}.JSONPath"),
            json_path,
            "must be a simple json path starting with .",
        ));
    }
}

/// kube's `MaxSelectableFields`.
const MAX_SELECTABLE_FIELDS: i64 = 8;

/// kube's `ValidateCustomResourceSelectableFields` of the version at `path`: each `jsonPath`
/// names a field of the schema (`cel.ValidFieldPath` without array notation) outside
/// `metadata`, typed string, boolean or integer, once; at most 8.
fn validate_selectable_fields(version: &Value, path: &str, causes: &mut Vec<Cause>) {
    let Some(fields) = version
        .get("selectableFields")
        .and_then(Value::as_array)
        .filter(|fields| !fields.is_empty())
    else {
        return;
    };
    let at = format!("{path}.selectableFields");
    let Some(schema) = version
        .pointer("/schema/openAPIV3Schema")
        .filter(|s| !s.is_null())
    else {
        causes.push(invalid(
            &at,
            "",
            "selectableFields may only be set when version.schema.openAPIV3Schema is not included",
        ));
        return;
    };
    let mut unique: Vec<String> = Vec::new();
    for (index, field) in fields.iter().enumerate() {
        let here = format!("{at}[{index}].jsonPath");
        let json_path = pointer_text(field, "/jsonPath");
        if json_path.is_empty() {
            causes.push(required(&here));
            continue;
        }
        let (normalized, found) = match selectable_field(schema, json_path) {
            Ok(found) => found,
            Err(error) => {
                causes.push(invalid(
                    &here,
                    json_path,
                    &format!("is an invalid path: {error}"),
                ));
                continue;
            }
        };
        if normalized.split(['.', '[']).next() == Some("metadata") {
            causes.push(invalid(
                &here,
                json_path,
                "must not point to fields in metadata",
            ));
        }
        if !matches!(
            pointer_text(found, "/type"),
            "string" | "boolean" | "integer"
        ) {
            causes.push(invalid(
                &here,
                json_path,
                "must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed.",
            ));
        }
        if unique.contains(&normalized) {
            causes.push(crate::field::duplicate(
                &here,
                &crate::field::go_quote(json_path),
            ));
        } else {
            unique.push(normalized);
        }
    }
    if unique.len() as i64 > MAX_SELECTABLE_FIELDS {
        causes.push(crate::field::too_many(
            &at,
            unique.len(),
            MAX_SELECTABLE_FIELDS,
        ));
    }
}

/// The field a selectable field's `jsonPath` names (`.spec.color`), as kube's
/// `cel.ValidFieldPath` walks it with array notation disallowed: the path as a field path
/// (`spec.color`, `spec.labels[key]`) and the field's schema, or why it names none.
fn selectable_field<'a>(schema: &'a Value, json_path: &str) -> Result<(String, &'a Value), String> {
    let mut schema = schema;
    let mut normalized = String::new();
    let mut rest = json_path;
    while !rest.is_empty() {
        let Some(after) = rest.strip_prefix('.') else {
            if rest.starts_with('[') {
                return Err("array notation is not allowed".into());
            }
            let token = rest.split(['.', '[', ']']).next().unwrap_or("");
            let token = if token.is_empty() { &rest[..1] } else { token };
            return Err(format!("expected [ or . but got: {token}"));
        };
        if after.is_empty() {
            return Err("unexpected end of JSON path".into());
        }
        // A delimiter right after the dot is the scanner's next token, taken as a name.
        let end = after.find(['.', '[', ']']).unwrap_or(after.len()).max(1);
        let name = &after[..end];
        rest = &after[end..];
        if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
            schema = properties
                .get(name)
                .ok_or_else(|| "does not refer to a valid field".to_owned())?;
            if !normalized.is_empty() {
                normalized.push('.');
            }
            normalized.push_str(name);
        } else if let Some(items) = schema.get("additionalProperties").filter(|s| s.is_object()) {
            schema = items;
            normalized.push_str(&format!("[{name}]"));
        } else {
            return Err("does not refer to a valid field".into());
        }
    }
    Ok((normalized, schema))
}

/// Go's `%#v` of a `[]string`.
fn go_strings(values: &[String]) -> String {
    let quoted: Vec<String> = values.iter().map(|v| crate::field::go_quote(v)).collect();
    format!("[]string{{{}}}", quoted.join(", "))
}

/// The ConversionReview versions kube-apiserver understands.
const CONVERSION_REVIEW_VERSIONS: &[&str] = &["v1", "v1beta1"];

/// kube's `validateCustomResourceConversion` (paths of its internal type:
/// `spec.conversion.webhookClientConfig`, `spec.conversion.conversionReviewVersions`). The
/// webhook's URL and service are not checked further than "exactly one".
fn validate_conversion(object: &Value, old: Option<&Value>, causes: &mut Vec<Cause>) {
    let Some(conversion) = object.pointer("/spec/conversion").filter(|c| !c.is_null()) else {
        return;
    };
    let strategy = pointer_text(conversion, "/strategy");
    if strategy != "None"
        && object
            .pointer("/spec/preserveUnknownFields")
            .and_then(Value::as_bool)
            == Some(true)
    {
        causes.push(invalid(
            "spec.conversion.strategy",
            strategy,
            "must be None if spec.preserveUnknownFields is true",
        ));
    }
    match strategy {
        "" => causes.push(required("spec.conversion.strategy")),
        "None" | "Webhook" => {}
        other => causes.push(crate::field::not_supported(
            "spec.conversion.strategy",
            &crate::field::go_quote(other),
            &["None", "Webhook"],
        )),
    }
    let client = conversion
        .pointer("/webhook/clientConfig")
        .filter(|c| !c.is_null());
    let reviews = strings_at(conversion, "/webhook/conversionReviewVersions");
    let client_path = "spec.conversion.webhookClientConfig";
    let reviews_path = "spec.conversion.conversionReviewVersions";
    if strategy != "Webhook" {
        let detail = "should not be set when strategy is not set to Webhook";
        if client.is_some() {
            causes.push(crate::field::forbidden(client_path, detail));
        }
        if !reviews.is_empty() {
            causes.push(crate::field::forbidden(reviews_path, detail));
        }
        return;
    }
    match client {
        None => causes.push(crate::field::required(
            client_path,
            "required when strategy is set to Webhook",
        )),
        Some(client) => {
            let set = |key: &str| client.get(key).is_some_and(|v| !v.is_null());
            if set("url") == set("service") {
                causes.push(crate::field::required(
                    client_path,
                    "exactly one of url or service is required",
                ));
            }
        }
    }
    if reviews.is_empty() {
        causes.push(required(reviews_path));
        return;
    }
    let mut seen: Vec<&str> = Vec::new();
    for (index, review) in reviews.iter().enumerate() {
        let here = format!("{reviews_path}[{index}]");
        if seen.contains(&review.as_str()) {
            causes.push(invalid(&here, review, "duplicate version"));
            continue;
        }
        seen.push(review);
        if let Err(message) = dns1035(review) {
            causes.push(invalid(&here, review, &message));
        }
    }
    let recognized = |list: &[String]| {
        list.iter()
            .any(|v| CONVERSION_REVIEW_VERSIONS.contains(&v.as_str()))
    };
    // On update only while the stored CRD names one (or none).
    let required_recognized = old.is_none_or(|old| {
        let old_reviews = strings_at(old, "/spec/conversion/webhook/conversionReviewVersions");
        old_reviews.is_empty() || recognized(&old_reviews)
    });
    if required_recognized && !recognized(&reviews) {
        causes.push(crate::field::invalid(
            reviews_path,
            &go_strings(&reviews),
            &format!(
                "must include at least one of {}",
                CONVERSION_REVIEW_VERSIONS.join(", ")
            ),
        ));
    }
}

/// The annotation approving a CRD in a protected group.
const API_APPROVED: &str = "api-approved.kubernetes.io";

/// kube's `GetAPIApprovalState`: 0 missing, 1 bypassed (`unapproved...`), 2 approved (a URL
/// with a scheme and a host), 3 invalid; with its reason.
fn approval_state(crd: &Value) -> (u8, String) {
    let annotation = crd
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(API_APPROVED))
        .and_then(Value::as_str)
        .unwrap_or("");
    let is_url = annotation.split_once("://").is_some_and(|(scheme, rest)| {
        let mut chars = scheme.chars();
        chars.next().is_some_and(|c| c.is_ascii_alphabetic())
            && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
            && rest
                .split(['/', '?', '#'])
                .next()
                .is_some_and(|host| !host.is_empty() && !host.contains(char::is_whitespace))
    });
    if annotation.is_empty() {
        (
            0,
            format!(
                "protected groups must have approval annotation {API_APPROVED:?}, see https://github.com/kubernetes/enhancements/pull/1111"
            ),
        )
    } else if annotation.starts_with("unapproved") {
        (
            1,
            format!("not approved: {}", crate::field::go_quote(annotation)),
        )
    } else if is_url {
        (2, format!("approved in {annotation}"))
    } else {
        (
            3,
            format!(
                "protected groups must have approval annotation {API_APPROVED:?} with either a URL or a reason starting with \"unapproved\", see https://github.com/kubernetes/enhancements/pull/1111"
            ),
        )
    }
}

/// kube's `validateAPIApproval`: a CRD of a group under `k8s.io` or `kubernetes.io` needs the
/// `api-approved.kubernetes.io` annotation (a URL, or a reason starting with `unapproved`),
/// unless an update leaves its state unchanged.
fn validate_api_approval(object: &Value, old: Option<&Value>, causes: &mut Vec<Cause>) {
    let group = pointer_text(object, "/spec/group");
    let protected = ["k8s.io", "kubernetes.io"]
        .iter()
        .any(|g| group == *g || group.ends_with(&format!(".{g}")));
    if !protected {
        return;
    }
    let (state, reason) = approval_state(object);
    if old.is_some_and(|old| approval_state(old).0 == state) {
        return;
    }
    let path = format!("metadata.annotations[{API_APPROVED}]");
    match state {
        0 => causes.push(crate::field::required(&path, &reason)),
        3 => causes.push(invalid(
            &path,
            pointer_text(object, &format!("/metadata/annotations/{API_APPROVED}")),
            &reason,
        )),
        _ => {}
    }
}

/// Whether the CRD has the condition `kind` with status True.
#[must_use]
pub fn condition_true(object: &Value, kind: &str) -> bool {
    object
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|conditions| {
            conditions.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some(kind)
                    && c.get("status").and_then(Value::as_str) == Some("True")
            })
        })
}

/// The names of one served resource, as the naming check compares them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TakenNames {
    /// The group.
    pub group: String,
    /// The plural.
    pub plural: String,
    /// The singular.
    pub singular: String,
    /// The kind.
    pub kind: String,
    /// The short names.
    pub short_names: Vec<String>,
}

impl TakenNames {
    /// The names of a served resource.
    #[must_use]
    pub fn of(def: &ResourceDef) -> TakenNames {
        TakenNames {
            group: def.group.clone(),
            plural: def.plural.clone(),
            singular: def.singular.clone(),
            kind: def.kind.clone(),
            short_names: def.short_names.clone(),
        }
    }
}

/// The names kube's naming controller accepts for the CRD (`calculateNamesAndConditions`):
/// each of the spec's names that is already accepted, or that no other resource of its group
/// holds, replaces the accepted one; each one taken keeps the accepted one and makes
/// `NamesAccepted` False with its reason (`PluralConflict`, `SingularConflict`,
/// `ShortNamesConflict`, `KindConflict`, `ListKindConflict`: the last found wins, as kube's)
/// and `"<name>" is already in use`. `old_accepted` is the stored `status.acceptedNames`.
fn accept_names(
    object: &Value,
    old_accepted: Option<&Value>,
    others: &[TakenNames],
) -> (Value, Option<(&'static str, String)>) {
    let group = pointer_text(object, "/spec/group");
    let requested = object.pointer("/spec/names").cloned().unwrap_or(json!({}));
    let empty = json!({});
    let accepted = old_accepted.unwrap_or(&empty);
    let in_group: Vec<&TakenNames> = others.iter().filter(|o| o.group == group).collect();
    let resource_taken = |name: &str| {
        in_group.iter().any(|o| {
            o.plural == name || o.singular == name || o.short_names.iter().any(|s| s == name)
        })
    };
    let kind_taken = |name: &str| {
        in_group
            .iter()
            .any(|o| o.kind == name || format!("{}List", o.kind) == name)
    };
    // kube's `equalToAcceptedOrFresh`.
    let fresh = |name: &str, was: &str, taken: &dyn Fn(&str) -> bool| {
        if name == was || !taken(name) {
            Ok(())
        } else {
            Err(format!("{name:?} is already in use"))
        }
    };
    let mut names = accepted.as_object().cloned().unwrap_or_default();
    let mut conflict = None;
    for (key, reason, kinds) in [
        ("plural", "PluralConflict", false),
        ("singular", "SingularConflict", false),
        ("kind", "KindConflict", true),
        ("listKind", "ListKindConflict", true),
    ] {
        let name = pointer_text(&requested, &format!("/{key}"));
        let was = pointer_text(accepted, &format!("/{key}"));
        let taken: &dyn Fn(&str) -> bool = if kinds { &kind_taken } else { &resource_taken };
        match fresh(name, was, taken) {
            Ok(()) => {
                if let Some(value) = requested.get(key) {
                    names.insert(key.to_owned(), value.clone());
                } else {
                    names.remove(key);
                }
            }
            Err(message) => conflict = Some((reason, message)),
        }
        if key == "singular" {
            // Short names come between the singular and the kind, as in kube's order.
            let wanted = strings_at(&requested, "/shortNames");
            let had = strings_at(accepted, "/shortNames");
            if wanted != had {
                let errors: Vec<String> = wanted
                    .iter()
                    .filter(|name| !had.contains(name))
                    .filter_map(|name| fresh(name, "", &resource_taken).err())
                    .collect();
                match errors.len() {
                    0 => match requested.get("shortNames") {
                        Some(value) => {
                            names.insert("shortNames".to_owned(), value.clone());
                        }
                        None => {
                            names.remove("shortNames");
                        }
                    },
                    1 => conflict = Some(("ShortNamesConflict", errors[0].clone())),
                    _ => {
                        conflict = Some(("ShortNamesConflict", format!("[{}]", errors.join(", "))));
                    }
                }
            }
        }
    }
    match requested.get("categories") {
        Some(categories) => {
            names.insert("categories".to_owned(), categories.clone());
        }
        None => {
            names.remove("categories");
        }
    }
    (Value::Object(names), conflict)
}

fn condition(
    old: &[Value],
    kind: &str,
    status: bool,
    reason: &str,
    message: &str,
    now: &str,
) -> Value {
    let status = if status { "True" } else { "False" };
    let since = old
        .iter()
        .find(|c| {
            c.get("type").and_then(Value::as_str) == Some(kind)
                && c.get("status").and_then(Value::as_str) == Some(status)
        })
        .and_then(|c| c.get("lastTransitionTime"))
        .and_then(Value::as_str)
        .unwrap_or(now);
    json!({
        "type": kind,
        "status": status,
        "lastTransitionTime": since,
        "reason": reason,
        "message": message,
    })
}

/// Writes the CRD's status as kube-apiserver's naming and establishing controllers leave it:
/// `acceptedNames` ([`accept_names`] against `others`, the names the other served resources
/// hold), the `NamesAccepted` and `Established` conditions (other conditions kept;
/// `Established` never goes back to False once True, so a name conflict introduced by an
/// update leaves the resource served under its accepted names, as kube's), and
/// `storedVersions`: the old ones plus the storage version, or on a write of the `status`
/// subresource (`stored_from_client`) the ones the client wrote (the storage-version migration
/// step; [`stored_versions_causes`] checks them). `old_status` is the stored status (`None`
/// on create), `now` an RFC 3339 time.
pub fn set_status(
    object: &mut Value,
    old_status: Option<&Value>,
    others: &[TakenNames],
    stored_from_client: bool,
    now: &str,
) {
    let (accepted_names, conflict) = accept_names(
        object,
        old_status.and_then(|s| s.get("acceptedNames")),
        others,
    );
    let storage = object
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .and_then(|versions| {
            versions
                .iter()
                .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        })
        .map(|v| pointer_text(v, "/name").to_owned());
    let empty = Vec::new();
    let old_conditions = old_status
        .and_then(|s| s.get("conditions"))
        .and_then(Value::as_array)
        .unwrap_or(&empty);
    // Conditions other than the naming controller's: a `status` write's are the client's
    // (the CRD finalizer's `Terminating`), any other write keeps the stored ones.
    let client_conditions = object
        .pointer("/status/conditions")
        .filter(|_| stored_from_client)
        .and_then(Value::as_array)
        .cloned();
    let kept_conditions = client_conditions.as_ref().unwrap_or(old_conditions);
    let mut conditions: Vec<Value> = kept_conditions
        .iter()
        .filter(|c| {
            !matches!(
                c.get("type").and_then(Value::as_str),
                Some("NamesAccepted" | "Established")
            )
        })
        .cloned()
        .collect();
    let was_established = old_conditions.iter().find(|c| {
        c.get("type").and_then(Value::as_str) == Some("Established")
            && c.get("status").and_then(Value::as_str) == Some("True")
    });
    match &conflict {
        None => conditions.push(condition(
            old_conditions,
            "NamesAccepted",
            true,
            "NoConflicts",
            "no conflicts found",
            now,
        )),
        Some((reason, message)) => conditions.push(condition(
            old_conditions,
            "NamesAccepted",
            false,
            reason,
            message,
            now,
        )),
    }
    conditions.push(match (was_established, &conflict) {
        (Some(established), _) => established.clone(),
        (None, None) => condition(
            old_conditions,
            "Established",
            true,
            "InitialNamesAccepted",
            "the initial names have been accepted",
            now,
        ),
        (None, Some(_)) => condition(
            old_conditions,
            "Established",
            false,
            "NotAccepted",
            "not all names are accepted",
            now,
        ),
    });
    let client_stored = object
        .pointer("/status/storedVersions")
        .filter(|_| stored_from_client)
        .and_then(Value::as_array)
        .map(|versions| {
            versions
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect::<Vec<_>>()
        });
    let stored = match client_stored {
        Some(stored) => stored,
        None => {
            let mut stored: Vec<String> = old_status
                .map(|s| strings_at(s, "/storedVersions"))
                .unwrap_or_default();
            if let Some(storage) = storage
                && !storage.is_empty()
                && !stored.contains(&storage)
            {
                stored.push(storage);
            }
            stored
        }
    };
    let mut status = Map::new();
    status.insert("conditions".into(), Value::Array(conditions));
    status.insert("acceptedNames".into(), accepted_names);
    status.insert("storedVersions".into(), json!(stored));
    if let Some(map) = object.as_object_mut() {
        map.insert("status".into(), Value::Object(status));
    }
}

/// kube's `ValidateCustomResourceDefinitionStoredVersions` of the CRD's status: at least one
/// stored version, the storage version among them, each one a version of the spec
/// (`status.storedVersions[0]: Invalid value: "v1beta1": must appear in spec.versions`: a
/// version objects may still be stored at cannot leave the spec before they are migrated).
#[must_use]
pub fn stored_versions_causes(object: &Value) -> Vec<Cause> {
    let stored = strings_at(object, "/status/storedVersions");
    let printed = go_strings(&stored);
    if stored.is_empty() {
        return vec![crate::field::invalid(
            "status.storedVersions",
            &printed,
            "must have at least one stored version",
        )];
    }
    let mut causes = Vec::new();
    let mut left: Vec<(usize, &String)> = stored.iter().enumerate().collect();
    for version in object
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let name = pointer_text(version, "/name");
        let stored_here = left.iter().any(|(_, v)| v.as_str() == name);
        if version.get("storage").and_then(Value::as_bool) == Some(true) && !stored_here {
            causes.push(crate::field::invalid(
                "status.storedVersions",
                &printed,
                &format!("must have the storage version {name}"),
            ));
        }
        left.retain(|(_, v)| v.as_str() != name);
    }
    for (index, version) in left {
        causes.push(invalid(
            &format!("status.storedVersions[{index}]"),
            version,
            "must appear in spec.versions",
        ));
    }
    causes
}

/// The resource an established CRD serves.
#[derive(Clone, Debug, PartialEq)]
pub struct CustomResource {
    /// The served resource: the storage version.
    pub def: ResourceDef,
    /// That version's `schema.openAPIV3Schema`, if any: shared by every copy of the
    /// resource (the catalog, each served version's cache and feed, the conversion webhook
    /// hold one; a CRD of 20,000 properties held ~9 copies of it, 145 MB).
    pub schema: Option<std::sync::Arc<Value>>,
    /// Where that schema's CEL rules are (`None`: it has none), found once for every write.
    pub rules: Option<RuleTree>,
    /// The warning every request to this version gets when the version is `deprecated`: its
    /// `deprecationWarning`, or kube's default (`example.com/v1alpha1 Widget is deprecated;
    /// use example.com/v1 Widget`).
    pub deprecation_warning: Option<String>,
    /// Whether that version has the `status` subresource.
    pub status: bool,
    /// That version's `subresources.scale` (`specReplicasPath`, `statusReplicasPath`,
    /// `labelSelectorPath`), if any.
    pub scale: Option<Value>,
    /// The other served versions (their definition, schema and subresources), each served
    /// from the objects stored at the storage version: with `apiVersion` rewritten
    /// (conversion strategy `None`), or converted by the CRD's conversion webhook
    /// ([`CustomResource::conversion_webhook`]). Empty in the entries themselves.
    pub other_versions: Vec<CustomResource>,
    /// The CRD's conversion webhook (strategy `Webhook`), in the storage version's entry and
    /// in each other version's.
    pub conversion_webhook: Option<crate::conversion_review::ConversionWebhook>,
    /// Whether the CRD is being deleted (`metadata.deletionTimestamp`): its objects are
    /// still served (get, list, watch, update, patch, delete) while the CRD finalizer deletes
    /// them, but creates are refused (kube's `customresource_handler`: 405 `create not
    /// allowed while custom resource definition is terminating`).
    pub terminating: bool,
    /// The versions other than the storage version that objects may still be stored at
    /// (`status.storedVersions` but the storage version), in the storage version's entry
    /// (empty in the others'): with a conversion webhook, such objects are converted to the
    /// storage version when read (kube's storage decodes each at its own version).
    pub earlier_stored_versions: Vec<String>,
}

impl CustomResource {
    /// Whether objects stored at earlier versions are converted by the CRD's webhook when
    /// read: it has one, and `status.storedVersions` names a version other than the storage
    /// version (until the storage-version migration removes it).
    #[must_use]
    pub fn converts_earlier_stored(&self) -> bool {
        self.conversion_webhook.is_some() && !self.earlier_stored_versions.is_empty()
    }

    /// Whether `other` serves the same definitions (names, versions, scope, selectable
    /// fields) at every version, with the same conversion strategy: then a change between
    /// them (schemas, subresources, printer columns, the conversion webhook's configuration)
    /// applies in place.
    #[must_use]
    pub fn same_definitions(&self, other: &CustomResource) -> bool {
        self.def == other.def
            && self.conversion_webhook.is_some() == other.conversion_webhook.is_some()
            && self.converts_earlier_stored() == other.converts_earlier_stored()
            && self
                .other_versions
                .iter()
                .map(|v| &v.def)
                .eq(other.other_versions.iter().map(|v| &v.def))
    }
}

impl CustomResource {
    /// Whether objects read from the store come out the same under `other` as under this
    /// resource: the storage version's schema has the same structure, defaults and pruning
    /// markers ([`read_shape`]), and so has each other version's (whose objects are pruned by
    /// it when converted); their validations, descriptions and formats may differ.
    #[must_use]
    pub fn same_reads(&self, other: &CustomResource) -> bool {
        let shape = |resource: &CustomResource| resource.schema.as_deref().map(read_shape);
        shape(self) == shape(other)
            && self
                .other_versions
                .iter()
                .map(shape)
                .eq(other.other_versions.iter().map(shape))
    }
}

/// What of a structural schema decides how a stored object reads (the defaults and pruning
/// that kube's decoder applies, `structural::prune_and_default`): `type`, `properties`,
/// `items`, `additionalProperties`, `default`, `nullable` and the `x-kubernetes-*` markers
/// of unknown fields, embedded resources and int-or-string, at every level.
#[must_use]
pub fn read_shape(schema: &Value) -> Value {
    let Value::Object(fields) = schema else {
        return schema.clone();
    };
    let mut shape = serde_json::Map::new();
    for (key, value) in fields {
        let kept = match key.as_str() {
            "type"
            | "default"
            | "nullable"
            | "x-kubernetes-preserve-unknown-fields"
            | "x-kubernetes-embedded-resource"
            | "x-kubernetes-int-or-string" => value.clone(),
            "items" | "additionalProperties" => read_shape(value),
            "properties" => match value {
                Value::Object(properties) => Value::Object(
                    properties
                        .iter()
                        .map(|(name, property)| (name.clone(), read_shape(property)))
                        .collect(),
                ),
                other => other.clone(),
            },
            _ => continue,
        };
        shape.insert(key.clone(), kept);
    }
    Value::Object(shape)
}

/// The finalizer a CRD's first DELETE gives it (kube's `CustomResourceCleanupFinalizer`):
/// the CRD stays, terminating, until the CRD finalizer has deleted its objects and removed it.
pub const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

/// The CRD `Terminating` condition a first DELETE sets
/// (`registry/customresourcedefinition/etcd.go`): reason and message.
pub const TERMINATING_PENDING: (&str, &str) = (
    "InstanceDeletionPending",
    "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
);

/// Sets `crd`'s condition of type `kind` as kube's `SetCRDCondition` does: an existing one
/// keeps its `lastTransitionTime` unless its status changes; reason and message are
/// replaced. Returns whether anything changed.
pub fn set_condition(
    crd: &mut Value,
    (kind, status, reason, message): (&str, &str, &str, &str),
    now: &str,
) -> bool {
    let new = serde_json::json!({"type": kind, "status": status, "lastTransitionTime": now,
        "reason": reason, "message": message});
    let Some(object) = crd.as_object_mut() else {
        return false;
    };
    let status_object = object
        .entry("status")
        .or_insert_with(|| serde_json::json!({}));
    if !status_object.is_object() {
        *status_object = serde_json::json!({});
    }
    let Some(status_map) = status_object.as_object_mut() else {
        return false;
    };
    let conditions = status_map
        .entry("conditions")
        .or_insert_with(|| serde_json::json!([]));
    if !conditions.is_array() {
        *conditions = serde_json::json!([]);
    }
    let Some(list) = conditions.as_array_mut() else {
        return false;
    };
    match list
        .iter_mut()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(kind))
    {
        None => {
            list.push(new);
            true
        }
        Some(existing) => {
            let text = |c: &Value, key: &str| c.get(key).and_then(Value::as_str).map(str::to_owned);
            let same_status = text(existing, "status").as_deref() == Some(status);
            if same_status
                && text(existing, "reason").as_deref() == Some(reason)
                && text(existing, "message").as_deref() == Some(message)
            {
                return false;
            }
            let transition = if same_status {
                existing
                    .get("lastTransitionTime")
                    .cloned()
                    .unwrap_or_else(|| serde_json::json!(now))
            } else {
                serde_json::json!(now)
            };
            *existing = new;
            existing["lastTransitionTime"] = transition;
            true
        }
    }
}

/// The resource `crd` serves: none unless it is `Established` and its storage version is
/// served. A CRD being deleted is still served, [`CustomResource::terminating`], until it is
/// gone (kube serves it until the CRD finalizer has deleted its objects).
#[must_use]
pub fn served(crd: &Value) -> Option<CustomResource> {
    if !condition_true(crd, "Established") {
        return None;
    }
    let versions = crd.pointer("/spec/versions").and_then(Value::as_array)?;
    let storage = versions.iter().find(|v| {
        v.get("storage").and_then(Value::as_bool) == Some(true)
            && v.get("served").and_then(Value::as_bool) == Some(true)
    })?;
    let webhook = crate::conversion_review::ConversionWebhook::of(crd);
    let mut served = served_version(crd, storage)?;
    served.other_versions = versions
        .iter()
        .filter(|v| {
            v.get("storage").and_then(Value::as_bool) != Some(true)
                && v.get("served").and_then(Value::as_bool) == Some(true)
        })
        .filter_map(|v| served_version(crd, v))
        .map(|mut version| {
            version.conversion_webhook.clone_from(&webhook);
            version
        })
        .collect();
    served.conversion_webhook = webhook;
    served.earlier_stored_versions = strings_at(crd, "/status/storedVersions")
        .into_iter()
        .filter(|v| *v != served.def.version)
        .collect();
    Some(served)
}

/// How many resources `crd` serves: 1 + the other versions of [`served`]'s answer, or 0 when
/// it serves none, counted without building them (no schema is copied). What
/// `--max-custom-resource-versions` counts.
#[must_use]
pub fn served_versions(crd: &Value) -> usize {
    if !condition_true(crd, "Established") {
        return 0;
    }
    let Some(versions) = crd.pointer("/spec/versions").and_then(Value::as_array) else {
        return 0;
    };
    let flag = |v: &Value, key: &str| v.get(key).and_then(Value::as_bool) == Some(true);
    // `served_version`'s names, the same for every version.
    let named = crd.pointer("/status/acceptedNames").is_some_and(|names| {
        !pointer_text(names, "/kind").is_empty()
            && !pointer_text(names, "/plural").is_empty()
            && !pointer_text(crd, "/spec/group").is_empty()
    });
    if !named
        || !versions
            .iter()
            .any(|v| flag(v, "storage") && flag(v, "served"))
    {
        return 0;
    }
    1 + versions
        .iter()
        .filter(|v| !flag(v, "storage") && flag(v, "served"))
        .count()
}

/// The resource `crd` serves at `version` (one of its `spec.versions`).
fn served_version(crd: &Value, version: &Value) -> Option<CustomResource> {
    let names = crd.pointer("/status/acceptedNames")?;
    let kind = pointer_text(names, "/kind");
    let plural = pointer_text(names, "/plural");
    let group = pointer_text(crd, "/spec/group");
    if kind.is_empty() || plural.is_empty() || group.is_empty() {
        return None;
    }
    let mut def = ResourceDef::named(
        group,
        pointer_text(version, "/name"),
        plural,
        kind,
        pointer_text(crd, "/spec/scope") == "Namespaced",
    );
    let singular = pointer_text(names, "/singular");
    if !singular.is_empty() {
        def.singular = singular.to_owned();
    }
    def.short_names = strings_at(names, "/shortNames");
    def.categories = strings_at(names, "/categories");
    def.selectable_fields = version
        .get("selectableFields")
        .and_then(Value::as_array)
        .map(|fields| {
            fields
                .iter()
                .filter_map(|f| f.get("jsonPath").and_then(Value::as_str))
                .map(|path| path.trim_start_matches('.').to_owned())
                .collect()
        })
        .unwrap_or_default();
    def.printer_columns = version
        .get("additionalPrinterColumns")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    def.declared_subresources = Some(
        ["status", "scale"]
            .into_iter()
            .filter(|sub| version.pointer(&format!("/subresources/{sub}")).is_some())
            .map(str::to_owned)
            .collect(),
    );
    let schema = version
        .pointer("/schema/openAPIV3Schema")
        .cloned()
        .map(std::sync::Arc::new);
    Some(CustomResource {
        deprecation_warning: deprecation_warning(crd, version),
        def,
        rules: schema.as_deref().and_then(RuleTree::of),
        schema,
        status: version.pointer("/subresources/status").is_some(),
        scale: version.pointer("/subresources/scale").cloned(),
        other_versions: Vec::new(),
        conversion_webhook: None,
        terminating: crd.pointer("/metadata/deletionTimestamp").is_some(),
        earlier_stored_versions: Vec::new(),
    })
}

/// The warning requests to `version` of `crd` get (kube's `customresource_handler`): none
/// unless the version is `deprecated`; its `deprecationWarning` if set (none if empty);
/// otherwise `<group>/<version> <Kind> is deprecated`, with `; use <group>/<newer> <Kind>`
/// naming the served, not deprecated version of highest priority above it, if any.
fn deprecation_warning(crd: &Value, version: &Value) -> Option<String> {
    if version.get("deprecated").and_then(Value::as_bool) != Some(true) {
        return None;
    }
    if let Some(warning) = version.get("deprecationWarning").and_then(Value::as_str) {
        return (!warning.is_empty()).then(|| warning.to_owned());
    }
    let group = pointer_text(crd, "/spec/group");
    let kind = pointer_text(crd, "/spec/names/kind");
    let name = pointer_text(version, "/name");
    let mut warning = format!("{group}/{name} {kind} is deprecated");
    let newer = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|v| {
            v.get("served").and_then(Value::as_bool) == Some(true)
                && v.get("deprecated").and_then(Value::as_bool) != Some(true)
        })
        .map(|v| pointer_text(v, "/name"))
        .filter(|v| compare_kube_versions(name, v) == std::cmp::Ordering::Greater)
        .min_by(|a, b| compare_kube_versions(a, b));
    if let Some(newer) = newer {
        warning.push_str(&format!("; use {group}/{newer} {kind}"));
    }
    Some(warning)
}

/// A `/status` write `new` as a status strategy that resets only the spec leaves it: the
/// stored `spec` of `old` and its `metadata.generation` (which only a change of the spec
/// moves); the rest as written (see `crate::kinds::status_rules`).
#[must_use]
pub fn spec_kept(old: &Value, mut new: Value) -> Value {
    let Some(map) = new.as_object_mut() else {
        return new;
    };
    match old.get("spec") {
        Some(spec) => map.insert("spec".to_owned(), spec.clone()),
        None => map.remove("spec"),
    };
    if let Some(meta) = map.get_mut("metadata").and_then(Value::as_object_mut) {
        match old.pointer("/metadata/generation") {
            Some(generation) => meta.insert("generation".to_owned(), generation.clone()),
            None => meta.remove("generation"),
        };
    }
    new
}

/// Applies kube-apiserver's `status` subresource rules to a write of an object whose CRD has
/// that subresource: the main endpoint keeps the stored status (none on create); the
/// `status` endpoint keeps everything of the stored object but the status (and the managed
/// fields the write computed). Also the rule of the built-in kinds whose status strategy
/// resets the whole metadata, and of every main-endpoint write of a kind with status rules
/// (`crate::kinds::status_rules`).
#[must_use]
pub fn status_rules(subresource: &str, old: Option<&Value>, new: Value) -> Value {
    let old_status = old.and_then(|old| old.get("status")).cloned();
    if subresource == "status" {
        let Some(old) = old else {
            return new;
        };
        let mut merged = old.clone();
        if let Some(map) = merged.as_object_mut() {
            match new.get("status") {
                Some(status) => {
                    map.insert("status".into(), status.clone());
                }
                None => {
                    map.remove("status");
                }
            }
        }
        if let Some(managed) = new.pointer("/metadata/managedFields")
            && let Some(meta) = merged.get_mut("metadata").and_then(Value::as_object_mut)
        {
            meta.insert("managedFields".into(), managed.clone());
        }
        return merged;
    }
    let mut new = new;
    if let Some(map) = new.as_object_mut() {
        match old_status {
            Some(status) => {
                map.insert("status".into(), status);
            }
            None => {
                map.remove("status");
            }
        }
    }
    new
}

#[cfg(test)]
mod tests {
    use super::*;

    fn widget() -> Value {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {
                "group": "example.com",
                "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"]},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object"}}}]
            }
        })
    }

    fn fields(error: &ApiError) -> Vec<String> {
        error.details.as_ref().unwrap()["causes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["field"].as_str().unwrap().to_owned())
            .collect()
    }

    #[test]
    fn defaults_then_valid() {
        let mut crd = widget();
        apply_defaults(&mut crd);
        assert_eq!(crd["spec"]["names"]["singular"], "widget");
        assert_eq!(crd["spec"]["names"]["listKind"], "WidgetList");
        assert_eq!(crd["spec"]["conversion"]["strategy"], "None");
        assert_eq!(validate(&crd, None), Ok(()));
    }

    #[test]
    fn schema_patterns_must_compile() {
        let mut crd = widget();
        crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = json!({"type": "object",
        "properties": {"spec": {"type": "object", "properties": {
            "name": {"type": "string", "pattern": "[a"},
            "ok": {"type": "string", "pattern": "^[a-z]+$"},
            "tags": {"type": "array", "items": {"type": "string", "anyOf": [{"pattern": "(x"}]}}
        }}}});
        apply_defaults(&mut crd);
        let error = validate(&crd, None).unwrap_err();
        assert_eq!(
            fields(&error),
            [
                "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[name].pattern",
                "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[tags].items.anyOf[0].pattern",
            ]
        );
        assert!(
            error.message.contains(
                "properties[name].pattern: Invalid value: \"[a\": must be a valid regular expression, but isn't: error parsing regexp: "
            ),
            "{}",
            error.message
        );
        crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
            ["name"]["pattern"] = json!("[a]");
        crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
            ["tags"]["items"]["anyOf"][0]["pattern"] = json!("(x)");
        assert_eq!(validate(&crd, None), Ok(()));
    }

    #[test]
    fn essentials_are_refused_with_kube_apiserver_wording() {
        let mut crd = widget();
        crd["metadata"]["name"] = json!("widgets.other.com");
        crd["spec"]["scope"] = json!("Global");
        crd["spec"]["versions"][0]["storage"] = json!(false);
        crd["spec"]["versions"][0]["served"] = json!(false);
        apply_defaults(&mut crd);
        let error = validate(&crd, None).unwrap_err();
        assert_eq!(error.code, 422);
        assert_eq!(
            fields(&error),
            [
                "metadata.name",
                "spec.scope",
                "spec.versions",
                "spec.versions"
            ]
        );
        assert!(
            error.message.starts_with(
                "CustomResourceDefinition.apiextensions.k8s.io \"widgets.other.com\" is invalid: [metadata.name: Invalid value: \"widgets.other.com\": must be spec.names.plural+\".\"+spec.group, spec.scope: Unsupported value: \"Global\": supported values: \"Cluster\", \"Namespaced\", spec.versions: Invalid value: "
            ),
            "{}",
            error.message
        );
        assert!(
            error
                .message
                .contains("must have exactly one version marked as storage version")
        );
        let mut crd = widget();
        crd["spec"]["names"] = json!({"plural": "Widgets"});
        crd["metadata"]["name"] = json!("Widgets.example.com");
        crd["spec"]["group"] = json!("example");
        let error = validate(&crd, None).unwrap_err();
        assert_eq!(
            fields(&error),
            [
                "metadata.name",
                "spec.group",
                "spec.names.singular",
                "spec.names.kind",
                "spec.names.listKind",
                "spec.names.plural"
            ]
        );
    }

    #[test]
    fn immutable_on_update() {
        let mut old = widget();
        apply_defaults(&mut old);
        set_status(&mut old, None, &[], false, "2026-01-01T00:00:00Z");
        let mut new = old.clone();
        new["spec"]["scope"] = json!("Cluster");
        new["spec"]["names"]["kind"] = json!("Gadget");
        new["spec"]["names"]["listKind"] = json!("GadgetList");
        let error = validate(&new, Some(&old)).unwrap_err();
        assert_eq!(fields(&error), ["spec.scope", "spec.names.kind"]);
    }

    #[test]
    fn status_and_served_resource() {
        let mut crd = widget();
        apply_defaults(&mut crd);
        set_status(&mut crd, None, &[], false, "t1");
        assert!(condition_true(&crd, "Established"));
        assert!(condition_true(&crd, "NamesAccepted"));
        assert_eq!(crd["status"]["storedVersions"], json!(["v1"]));
        assert_eq!(crd["status"]["acceptedNames"]["plural"], "widgets");
        let conditions = crd["status"]["conditions"].clone();
        assert_eq!(conditions[1]["reason"], "InitialNamesAccepted");
        assert_eq!(conditions[0]["reason"], "NoConflicts");
        // The transition time stays while the status does.
        let old = crd["status"].clone();
        set_status(&mut crd, Some(&old), &[], false, "t2");
        assert_eq!(crd["status"]["conditions"][0]["lastTransitionTime"], "t1");
        let resource = served(&crd).unwrap();
        assert_eq!(resource.def.api_version(), "example.com/v1");
        assert_eq!(resource.def.kind, "Widget");
        assert_eq!(resource.def.short_names, ["wd"]);
        assert!(resource.def.namespaced);
        assert_eq!(resource.def.storage_prefix(), "example.com/widgets");
        assert_eq!(resource.schema.as_deref(), Some(&json!({"type": "object"})));

        let taken = vec![TakenNames {
            group: "example.com".into(),
            plural: "gadgets".into(),
            singular: "gadget".into(),
            kind: "Gadget".into(),
            short_names: vec!["wd".into()],
        }];
        assert!(!resource.status && resource.def.printer_columns.is_empty());
        // No subresource declared: none listed (not even `status`).
        assert_eq!(resource.def.declared_subresources, Some(vec![]));
        assert!(crate::discovery::subresources(&resource.def).is_empty());
        let mut scaled = crd.clone();
        scaled["spec"]["versions"][0]["subresources"] = json!({"scale": {
            "specReplicasPath": ".spec.size", "statusReplicasPath": ".status.size"}});
        let scaled = served(&scaled).unwrap();
        assert_eq!(
            crate::discovery::subresources(&scaled.def)
                .iter()
                .map(|(name, _)| *name)
                .collect::<Vec<_>>(),
            ["scale"]
        );
        let mut conflicting = widget();
        apply_defaults(&mut conflicting);
        set_status(&mut conflicting, None, &taken, false, "t1");
        assert!(!condition_true(&conflicting, "NamesAccepted"));
        let conditions = &conflicting["status"]["conditions"];
        assert_eq!(conditions[0]["reason"], "ShortNamesConflict");
        assert_eq!(conditions[0]["message"], "\"wd\" is already in use");
        assert_eq!(conditions[1]["reason"], "NotAccepted");
        // The names that are free are accepted one by one; the taken short name is not.
        assert_eq!(conflicting["status"]["acceptedNames"]["plural"], "widgets");
        assert!(
            conflicting["status"]["acceptedNames"]
                .get("shortNames")
                .is_none()
        );
        assert!(served(&conflicting).is_none());
    }

    /// Goal: a name conflict an update brings leaves an established CRD established and
    /// served under the names it had, as kube's naming controller leaves it.
    #[test]
    fn an_established_crd_keeps_serving_when_an_update_takes_a_name_in_use() {
        let mut crd = widget();
        apply_defaults(&mut crd);
        set_status(&mut crd, None, &[], false, "t1");
        let taken = vec![TakenNames {
            group: "example.com".into(),
            plural: "gadgets".into(),
            singular: "gadget".into(),
            kind: "Gadget".into(),
            short_names: vec!["gd".into()],
        }];
        let old = crd["status"].clone();
        crd["spec"]["names"]["shortNames"] = json!(["wd", "gd"]);
        crd["spec"]["names"]["categories"] = json!(["all"]);
        set_status(&mut crd, Some(&old), &taken, false, "t2");
        assert!(condition_true(&crd, "Established"));
        assert!(!condition_true(&crd, "NamesAccepted"));
        let accepted = &crd["status"]["acceptedNames"];
        assert_eq!(accepted["shortNames"], json!(["wd"]), "the old ones kept");
        assert_eq!(accepted["categories"], json!(["all"]));
        let served = served(&crd).unwrap();
        assert_eq!(served.def.short_names, ["wd"]);
    }

    #[test]
    fn stored_versions_must_name_the_storage_version_and_versions_of_the_spec() {
        let mut crd = widget();
        apply_defaults(&mut crd);
        set_status(&mut crd, None, &[], false, "t1");
        assert!(stored_versions_causes(&crd).is_empty());
        crd["status"]["storedVersions"] = json!(["v1beta1"]);
        let messages: Vec<String> = stored_versions_causes(&crd)
            .into_iter()
            .map(|(field, message, _)| format!("{field}: {message}"))
            .collect();
        assert_eq!(
            messages,
            [
                "status.storedVersions: Invalid value: []string{\"v1beta1\"}: must have the storage version v1",
                "status.storedVersions[0]: Invalid value: \"v1beta1\": must appear in spec.versions",
            ]
        );
        crd["status"]["storedVersions"] = json!([]);
        assert_eq!(stored_versions_causes(&crd).len(), 1);
        // A write of `status` keeps the client's stored versions.
        let old = crd["status"].clone();
        crd["status"]["storedVersions"] = json!(["v1"]);
        set_status(&mut crd, Some(&old), &[], true, "t2");
        assert_eq!(crd["status"]["storedVersions"], json!(["v1"]));
    }

    /// Goal: the versions objects may still be stored at besides the storage version are the
    /// served resource's, and decide its caches only with a conversion webhook.
    #[test]
    fn earlier_stored_versions_are_served_with_the_resource() {
        let mut crd = widget();
        apply_defaults(&mut crd);
        set_status(&mut crd, None, &[], false, "t1");
        let only = served(&crd).unwrap();
        assert!(only.earlier_stored_versions.is_empty());
        crd["status"]["storedVersions"] = json!(["v1beta1", "v1"]);
        let mixed = served(&crd).unwrap();
        assert_eq!(mixed.earlier_stored_versions, ["v1beta1"]);
        assert!(
            !mixed.converts_earlier_stored(),
            "conversion None: renamed only"
        );
        assert!(mixed.same_definitions(&only));
        crd["spec"]["conversion"] = json!({"strategy": "Webhook", "webhook": {
            "clientConfig": {"url": "https://h/convert"}, "conversionReviewVersions": ["v1"]}});
        let converted = served(&crd).unwrap();
        assert!(converted.converts_earlier_stored());
        crd["status"]["storedVersions"] = json!(["v1"]);
        let migrated = served(&crd).unwrap();
        assert!(!migrated.converts_earlier_stored());
        assert!(!converted.same_definitions(&migrated), "the caches restart");
    }

    /// Goal: what `--max-custom-resource-versions` counts of a CRD is exactly the number of
    /// resources [`served`] gives it: none unless established (and not deleting), its storage
    /// version, and its other served versions (whatever its conversion strategy).
    #[test]
    fn deprecated_versions_name_the_newest_served_one_above_them() {
        let crd = |versions: Value| {
            json!({"spec": {"group": "example.com", "names": {"kind": "Widget"},
                "versions": versions}})
        };
        let version = |name: &str, served: bool, deprecated: bool| json!({"name": name, "served": served, "deprecated": deprecated});
        let versions = json!([
            version("v1alpha1", true, true),
            version("v1beta1", true, false),
            version("v1", true, false),
            version("v2", false, false),
            version("v3alpha1", true, false),
        ]);
        let warning = |at: usize| deprecation_warning(&crd(versions.clone()), &versions[at]);
        assert_eq!(
            warning(0).as_deref(),
            Some("example.com/v1alpha1 Widget is deprecated; use example.com/v1 Widget")
        );
        assert_eq!(warning(1), None);
        // Nothing newer served and not deprecated.
        let alone = json!([version("v1", true, true), version("v1alpha1", true, false)]);
        assert_eq!(
            deprecation_warning(&crd(alone.clone()), &alone[0]).as_deref(),
            Some("example.com/v1 Widget is deprecated")
        );
        let own = json!({"name": "v1", "deprecated": true, "deprecationWarning": "soon gone"});
        assert_eq!(
            deprecation_warning(&crd(json!([])), &own).as_deref(),
            Some("soon gone")
        );
        let silent = json!({"name": "v1", "deprecated": true, "deprecationWarning": ""});
        assert_eq!(deprecation_warning(&crd(json!([])), &silent), None);
    }

    #[test]
    fn served_versions_counts_what_is_served() {
        let mut crd = widget();
        crd["spec"]["versions"] = json!([
            {"name": "v1", "served": true, "storage": true},
            {"name": "v2", "served": true, "storage": false},
            {"name": "v3", "served": false, "storage": false},
            {"name": "v4", "served": true, "storage": false},
        ]);
        apply_defaults(&mut crd);
        let count = |crd: &Value| served(crd).map_or(0, |r| 1 + r.other_versions.len());
        assert_eq!(
            (served_versions(&crd), count(&crd)),
            (0, 0),
            "not established"
        );
        set_status(&mut crd, None, &[], false, "t1");
        let mut cases = vec![crd.clone()];
        let mut webhook = crd.clone();
        webhook["spec"]["conversion"] = json!({"strategy": "Webhook"});
        cases.push(webhook);
        let mut unserved_storage = crd.clone();
        unserved_storage["spec"]["versions"][0]["served"] = json!(false);
        cases.push(unserved_storage);
        let mut deleting = crd.clone();
        deleting["metadata"]["deletionTimestamp"] = json!("t2");
        cases.push(deleting);
        let mut unnamed = crd.clone();
        unnamed["status"]["acceptedNames"]["kind"] = json!("");
        cases.push(unnamed);
        let mut conflicting = crd.clone();
        let holder = TakenNames {
            group: pointer_text(&crd, "/spec/group").to_owned(),
            short_names: vec!["wd".into()],
            ..TakenNames::default()
        };
        set_status(&mut conflicting, None, &[holder], false, "t1");
        cases.push(conflicting);
        let counted: Vec<(usize, usize)> = cases
            .iter()
            .map(|crd| (served_versions(crd), count(crd)))
            .collect();
        // A CRD being deleted is served (terminating) until it is gone.
        assert_eq!(counted, [(3, 3), (3, 3), (0, 0), (3, 3), (0, 0), (0, 0)]);
        assert!(
            served(&cases[3])
                .is_some_and(|r| r.terminating && r.other_versions.iter().all(|v| v.terminating))
        );
        assert!(served(&cases[0]).is_some_and(|r| !r.terminating));
    }

    #[test]
    fn pruning_and_defaults() {
        let schema = json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "size": {"type": "integer", "default": 1},
                "mode": {"type": "string", "default": "fast"},
                "tags": {"type": "array", "items": {"type": "object",
                    "properties": {"k": {"type": "string"}}}},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "opt": {"type": "string", "nullable": true, "default": "d"}
            }}
        }});
        let mut object = json!({"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "w"}, "extra": 1,
            "spec": {"mode": null, "unknown": true, "tags": [{"k": "a", "x": 1}],
                "labels": {"a": "b"}, "free": {"any": {"thing": 1}}, "opt": null}});
        let pruned = crate::structural::prune_and_default(&schema, &mut object);
        assert_eq!(pruned, ["extra", "spec.tags[0].x", "spec.unknown"]);
        assert_eq!(
            object,
            json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
                "spec": {"size": 1, "mode": "fast", "tags": [{"k": "a"}], "labels": {"a": "b"},
                    "free": {"any": {"thing": 1}}, "opt": null}})
        );
    }

    #[test]
    fn status_subresource_rules() {
        let old =
            json!({"metadata": {"name": "w"}, "spec": {"size": 1}, "status": {"ready": true}});
        let new =
            json!({"metadata": {"name": "w"}, "spec": {"size": 2}, "status": {"ready": false}});
        let main = status_rules("", Some(&old), new.clone());
        assert_eq!(main["spec"]["size"], 2);
        assert_eq!(main["status"]["ready"], true);
        let status = status_rules("status", Some(&old), new.clone());
        assert_eq!(status["spec"]["size"], 1);
        assert_eq!(status["status"]["ready"], false);
        let created = status_rules("", None, new);
        assert!(created.get("status").is_none());
    }

    fn messages(crd: &Value, old: Option<&Value>) -> Vec<String> {
        validation_causes(crd, old)
            .into_iter()
            .map(|(field, message, _)| format!("{field}: {message}"))
            .collect()
    }

    #[test]
    fn versions_need_a_schema() {
        let mut crd = widget();
        crd["spec"]["versions"] = json!([
            {"name": "v1", "served": true, "storage": true},
            {"name": "v2", "served": false, "storage": false,
                "schema": {"openAPIV3Schema": null}},
        ]);
        apply_defaults(&mut crd);
        assert_eq!(
            messages(&crd, None),
            [
                "spec.versions[0].schema.openAPIV3Schema: Required value: schemas are required",
                "spec.versions[1].schema.openAPIV3Schema: Required value: schemas are required",
            ]
        );
        // An update of a CRD stored without schemas: only served versions need one.
        let old = crd.clone();
        assert_eq!(
            messages(&crd, Some(&old)),
            [
                "spec.versions[0].schema.openAPIV3Schema: Required value: because otherwise all fields are pruned"
            ]
        );
    }

    #[test]
    fn printer_columns_are_checked_where_kube_moves_them() {
        let mut crd = widget();
        crd["spec"]["versions"][0]["additionalPrinterColumns"] = json!([
            {"name": "Size", "type": "foo", "format": "big", "jsonPath": "spec.size"},
            {"name": "", "type": "", "jsonPath": ""},
            {"name": "Ok", "type": "date", "format": "date-time", "jsonPath": ".metadata.creationTimestamp"},
        ]);
        apply_defaults(&mut crd);
        // One version: the columns are the spec's (kube's conversion from v1).
        assert_eq!(
            messages(&crd, None),
            [
                "spec.additionalPrinterColumns[0].type: Invalid value: \"foo\": must be one of boolean,date,integer,number,string",
                "spec.additionalPrinterColumns[0].format: Invalid value: \"big\": must be one of byte,date,date-time,double,float,int32,int64,password",
                "spec.additionalPrinterColumns[0].JSONPath: Invalid value: \"spec.size\": must be a simple json path starting with .",
                "spec.additionalPrinterColumns[1].name: Required value",
                "spec.additionalPrinterColumns[1].type: Required value: must be one of boolean,date,integer,number,string",
                "spec.additionalPrinterColumns[1].JSONPath: Required value",
            ]
        );
        // Versions with different columns: each version's.
        let mut two = crd.clone();
        let mut second = two["spec"]["versions"][0].clone();
        second["name"] = json!("v2");
        second["storage"] = json!(false);
        second["additionalPrinterColumns"] =
            json!([{"name": "A", "type": "number", "jsonPath": "x"}]);
        two["spec"]["versions"].as_array_mut().unwrap().push(second);
        let got = messages(&two, None);
        assert_eq!(got.len(), 7, "{got:?}");
        assert!(got[0].starts_with("spec.versions[0].additionalPrinterColumns[0].type: "));
        assert_eq!(
            got[6],
            "spec.versions[1].additionalPrinterColumns[0].JSONPath: Invalid value: \"x\": must be a simple json path starting with ."
        );
    }

    #[test]
    fn selectable_fields_name_scalar_fields_of_the_schema() {
        let mut crd = widget();
        crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = json!({"type": "object",
            "properties": {"spec": {"type": "object", "properties": {
                "color": {"type": "string"}, "size": {"type": "integer"},
                "nested": {"type": "object", "properties": {"on": {"type": "boolean"}}},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "ports": {"type": "array", "items": {"type": "string"}}}}}});
        crd["spec"]["versions"][0]["selectableFields"] = json!([
            {"jsonPath": ".spec.color"}, {"jsonPath": ".spec.nested.on"},
            {"jsonPath": ".spec.labels.app"}, {"jsonPath": ".spec.nested"},
            {"jsonPath": ".spec.missing"}, {"jsonPath": ".spec.ports[0]"},
            {"jsonPath": ".spec.color"}, {"jsonPath": "spec.size"}, {"jsonPath": ""},
        ]);
        apply_defaults(&mut crd);
        let at = "spec.versions[0].selectableFields";
        assert_eq!(
            messages(&crd, None),
            [
                format!(
                    "{at}[3].jsonPath: Invalid value: \".spec.nested\": must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed."
                ),
                format!(
                    "{at}[4].jsonPath: Invalid value: \".spec.missing\": is an invalid path: does not refer to a valid field"
                ),
                format!(
                    "{at}[5].jsonPath: Invalid value: \".spec.ports[0]\": is an invalid path: array notation is not allowed"
                ),
                format!("{at}[6].jsonPath: Duplicate value: \".spec.color\""),
                format!(
                    "{at}[7].jsonPath: Invalid value: \"spec.size\": is an invalid path: expected [ or . but got: spec"
                ),
                format!("{at}[8].jsonPath: Required value"),
            ]
        );
    }

    #[test]
    fn selectable_fields_refuse_array_notation() {
        assert_eq!(
            selectable_field(
                &json!({"type": "object", "properties": {"a": {"type": "string"}}}),
                "['a']"
            )
            .unwrap_err(),
            "array notation is not allowed"
        );
    }

    #[test]
    fn webhook_conversion_needs_its_client_and_review_versions() {
        let mut crd = widget();
        crd["spec"]["conversion"] = json!({"strategy": "Webhook"});
        apply_defaults(&mut crd);
        assert_eq!(
            messages(&crd, None),
            [
                "spec.conversion.webhookClientConfig: Required value: required when strategy is set to Webhook",
                "spec.conversion.conversionReviewVersions: Required value",
            ]
        );
        crd["spec"]["conversion"] = json!({"strategy": "Webhook", "webhook": {
            "clientConfig": {}, "conversionReviewVersions": ["v2", "v2"]}});
        assert_eq!(
            messages(&crd, None),
            [
                "spec.conversion.webhookClientConfig: Required value: exactly one of url or service is required",
                "spec.conversion.conversionReviewVersions[1]: Invalid value: \"v2\": duplicate version",
                "spec.conversion.conversionReviewVersions: Invalid value: []string{\"v2\", \"v2\"}: must include at least one of v1, v1beta1",
            ]
        );
        crd["spec"]["conversion"] = json!({"strategy": "Sideways", "webhook": {
            "conversionReviewVersions": ["v1"]}});
        assert_eq!(
            messages(&crd, None),
            [
                "spec.conversion.strategy: Unsupported value: \"Sideways\": supported values: \"None\", \"Webhook\"",
                "spec.conversion.conversionReviewVersions: Forbidden: should not be set when strategy is not set to Webhook",
            ]
        );
        crd["spec"]["conversion"] = json!({"strategy": "Webhook", "webhook": {
            "clientConfig": {"service": {"name": "conv", "namespace": "system"}},
            "conversionReviewVersions": ["v1", "v1beta1"]}});
        assert_eq!(messages(&crd, None), Vec::<String>::new());
    }

    #[test]
    fn preserve_unknown_fields_cannot_be_set() {
        let mut crd = widget();
        crd["spec"]["preserveUnknownFields"] = json!(true);
        apply_defaults(&mut crd);
        assert_eq!(
            messages(&crd, None),
            [
                "spec.preserveUnknownFields: Invalid value: true: cannot set to true, set x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead"
            ]
        );
        // Kept by an update of a CRD stored with it.
        assert_eq!(messages(&crd, Some(&crd.clone())), Vec::<String>::new());
        crd["spec"]["preserveUnknownFields"] = json!(false);
        assert_eq!(messages(&crd, None), Vec::<String>::new());
    }

    #[test]
    fn protected_groups_need_api_approval() {
        let mut crd = widget();
        crd["spec"]["group"] = json!("widgets.k8s.io");
        crd["metadata"]["name"] = json!("widgets.widgets.k8s.io");
        apply_defaults(&mut crd);
        assert_eq!(
            messages(&crd, None),
            [
                "metadata.annotations[api-approved.kubernetes.io]: Required value: protected groups must have approval annotation \"api-approved.kubernetes.io\", see https://github.com/kubernetes/enhancements/pull/1111"
            ]
        );
        // An update leaving the state as it was passes.
        assert_eq!(messages(&crd, Some(&crd.clone())), Vec::<String>::new());
        crd["metadata"]["annotations"] = json!({"api-approved.kubernetes.io": "yes"});
        assert_eq!(
            messages(&crd, None),
            [
                "metadata.annotations[api-approved.kubernetes.io]: Invalid value: \"yes\": protected groups must have approval annotation \"api-approved.kubernetes.io\" with either a URL or a reason starting with \"unapproved\", see https://github.com/kubernetes/enhancements/pull/1111"
            ]
        );
        for ok in [
            "https://github.com/kubernetes/enhancements/pull/1111",
            "unapproved, experimental",
        ] {
            crd["metadata"]["annotations"] = json!({"api-approved.kubernetes.io": ok});
            assert_eq!(messages(&crd, None), Vec::<String>::new(), "{ok}");
        }
        crd["spec"]["group"] = json!("k8s.io.example.com");
        crd["metadata"] = json!({"name": "widgets.k8s.io.example.com"});
        assert_eq!(messages(&crd, None), Vec::<String>::new());
    }
}

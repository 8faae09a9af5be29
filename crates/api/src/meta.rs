//! Object metadata on writes: name rules, and the preparation of an object for create and update.
//!
//! This is the part of Kubernetes' `rest.BeforeCreate`/`rest.BeforeUpdate` and
//! `ValidateObjectMeta` that applies to any kind: the server has no per-kind strategies, so
//! `status` is stored as the client sends it (there is no kubelet or controller to own it) and
//! only metadata is defaulted and checked. Time and randomness arrive in [`CreateContext`].

use serde_json::{Map, Value};

use crate::error::ApiError;
use crate::names::invalid_value;
pub use crate::names::{
    ANNOTATIONS_SIZE_MAX_BYTES, validate_dns1123_label, validate_dns1123_subdomain,
    validate_label_value, validate_qualified_name,
};
#[cfg(test)]
use crate::names::{DNS1035_LABEL_MESSAGE, DNS1123_LABEL_MESSAGE, DNS1123_SUBDOMAIN_MESSAGE};
pub(crate) use crate::names::{type_name, validate_dns1035_label, validate_meta_maps};
use crate::resources::ResourceDef;

use crate::size::check_size;

/// Longest `generateName` prefix kept before the random suffix, as Kubernetes truncates it.
const GENERATE_NAME_PREFIX_MAX: usize = 58;

/// Checks an object name as kube's strategies do: a DNS-1123 label for namespaces, a DNS-1035
/// label for services, an address in canonical form for IPAddresses, a path segment (not `.`
/// or `..`, no `/` or `%`: `system:controller:x` passes) for the RBAC kinds,
/// CertificateSigningRequests and custom resources, and a DNS-1123 subdomain for every other
/// kind, with Kubernetes' messages (the part after `Invalid value: "name": `).
///
/// # Errors
/// The reason the name is not acceptable.
pub fn validate_name(def: &ResourceDef, name: &str) -> Result<(), String> {
    match (def.group.as_str(), def.plural.as_str()) {
        ("", "namespaces") => validate_dns1123_label(name),
        ("", "services") => validate_dns1035_label(name),
        ("networking.k8s.io", "ipaddresses") => crate::names::validate_ip_address_name(name),
        // `ValidateRBACName`, and the generic store's key check for CertificateSigningRequests
        // (`ValidateCertificateRequestName` takes any name).
        ("rbac.authorization.k8s.io", _)
        | ("certificates.k8s.io", "certificatesigningrequests") => path_segment(name),
        // `ValidateAPIService`: a path segment, then `version.group` (checked with the spec,
        // `crate::kinds`), which lets the core group's `v1.` through.
        ("apiregistration.k8s.io", "apiservices") => path_segment(name),
        // Custom resources: their strategy's `path.ValidatePathSegmentName`. (CRDs themselves,
        // `events.k8s.io` Events and the reviews stay DNS subdomains.)
        (group, _)
            if !def.is_builtin()
                && !crate::crd::is_crd(def)
                && !matches!(
                    group,
                    "events.k8s.io" | "authentication.k8s.io" | "authorization.k8s.io"
                ) =>
        {
            path_segment(name)
        }
        _ => validate_dns1123_subdomain(name),
    }
}

/// apimachinery's `path.ValidatePathSegmentName`: its first message. A name a client must
/// percent-escape in a URL path (`a b`, `é`) is accepted, as kube accepts it: request paths
/// are read decoded (the server's `limits::decoded_path`).
fn path_segment(name: &str) -> Result<(), String> {
    match crate::names::path_segment_problems(name, false)
        .into_iter()
        .next()
    {
        Some(message) => Err(message),
        None => Ok(()),
    }
}

/// The media type of a `Content-Type` value without its parameters, lower-cased
/// (`Application/JSON; charset=utf-8` → `application/json`).
#[must_use]
pub fn media_type_essence(content_type: &str) -> String {
    content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

/// The media types kube-apiserver decodes a create or update body from (its message's list).
const BODY_MEDIA_TYPES: &str =
    "application/json, application/yaml, application/vnd.kubernetes.protobuf";

/// Checks the `Content-Type` of a create or update body: JSON (also when absent, as
/// kube-apiserver assumes), YAML and Kubernetes protobuf pass; anything else — `text/plain`,
/// `application/x-www-form-urlencoded`, `multipart/form-data` (what a web page can send
/// without a CORS preflight), CBOR — is 415 UnsupportedMediaType with kube-apiserver's
/// message. Parameters (`; charset=utf-8`) and case are ignored.
///
/// # Errors
/// The 415 described.
pub fn check_body_media_type(content_type: Option<&str>) -> Result<(), ApiError> {
    match media_type_essence(content_type.unwrap_or("")).as_str() {
        "" | "application/json" | "application/yaml" | "application/vnd.kubernetes.protobuf" => {
            Ok(())
        }
        _ => Err(ApiError::unsupported_media_type(format!(
            "the body of the request was in an unknown format - accepted media types include: {BODY_MEDIA_TYPES}"
        ))),
    }
}

/// What a create needs that the body does not carry. The server draws `uid` and
/// `random_suffix` and reads the clock; this crate does neither.
#[derive(Clone, Debug)]
pub struct CreateContext<'a> {
    /// The namespace from the URL, `None` for cluster-scoped paths.
    pub namespace: Option<&'a str>,
    /// The new object's UID.
    pub uid: String,
    /// The creation time, RFC 3339 in UTC with seconds, e.g. `2026-11-29T15:00:00Z`.
    pub creation_timestamp: String,
    /// Five characters appended to `generateName`, from Kubernetes' alphabet
    /// `bcdfghjklmnpqrstvwxz2456789`.
    pub random_suffix: String,
}

/// A cause of an Invalid error: `(field, message, reason)`.
type Cause = (String, String, String);

fn quote(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Checks and fills `apiVersion` and `kind`.
pub fn check_type(def: &ResourceDef, object: &mut Map<String, Value>) -> Result<(), ApiError> {
    let expected_version = def.api_version();
    match object.get("apiVersion") {
        None | Some(Value::Null) => {
            object.insert("apiVersion".into(), Value::String(expected_version));
        }
        Some(Value::String(s)) if s.is_empty() => {
            object.insert("apiVersion".into(), Value::String(expected_version));
        }
        Some(Value::String(s)) if *s == expected_version => {}
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({}) does not match the expected API version ({expected_version})",
                quote(other)
            )));
        }
    }
    match object.get("kind") {
        None | Some(Value::Null) => {
            object.insert("kind".into(), Value::String(def.kind.clone()));
        }
        Some(Value::String(s)) if s.is_empty() => {
            object.insert("kind".into(), Value::String(def.kind.clone()));
        }
        Some(Value::String(s)) if *s == def.kind => {}
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({}) does not match the expected kind ({}) for resource {}",
                quote(other),
                def.kind,
                def.qualified_resource()
            )));
        }
    }
    Ok(())
}

fn as_object(value: Value, what: &str) -> Result<Map<String, Value>, ApiError> {
    match value {
        Value::Object(map) => Ok(map),
        other => Err(ApiError::bad_request(format!(
            "{what} must be a JSON object, not {}",
            type_name(&other)
        ))),
    }
}

/// Takes `metadata` out of the object as a map (absent or null reads as empty).
fn take_metadata(object: &mut Map<String, Value>) -> Result<Map<String, Value>, ApiError> {
    match object.remove("metadata") {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(value) => as_object(value, "metadata"),
    }
}

fn string_field(meta: &Map<String, Value>, key: &str) -> Result<Option<String>, ApiError> {
    str_field(meta, key).map(|text| text.map(str::to_owned))
}

/// [`string_field`], borrowed.
fn str_field<'m>(meta: &'m Map<String, Value>, key: &str) -> Result<Option<&'m str>, ApiError> {
    match meta.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.is_empty() => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(ApiError::bad_request(format!(
            "metadata.{key} must be a string, not {}",
            type_name(other)
        ))),
    }
}

/// Fields the server owns and a client may not set; removed on create and restored on update.
const SYSTEM_FIELDS: &[&str] = &[
    "resourceVersion",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
    "managedFields",
];

/// Prepares a new object for storage, as Kubernetes' `BeforeCreate` does for any kind.
///
/// - `apiVersion` and `kind`: filled when missing; a different value is a 400.
/// - namespace: for namespaced kinds the URL's namespace is filled in, and a different one in
///   the body is a 400 `the namespace of the provided object does not match the namespace sent
///   on the request`; cluster-scoped objects have any namespace cleared, as Kubernetes does.
/// - name: `metadata.name`, or `generateName` (truncated to 58 characters) plus the random
///   suffix; validated with [`validate_name`] (422 Invalid), and so is a `generateName` (as a
///   prefix: a trailing `-` is read as a letter), its cause first.
/// - labels and annotations validated (422), size at most
///   [`crate::size::OBJECT_SIZE_MAX_BYTES`] (413).
/// - sets `uid`, `creationTimestamp` and `generation: 1`; removes `resourceVersion`,
///   `deletionTimestamp`, `deletionGracePeriodSeconds`, `selfLink` and `managedFields`.
/// - namespaces get `status.phase: Active`, the `kubernetes.io/metadata.name` label and the
///   `kubernetes` finalizer in `spec.finalizers`, as in Kubernetes (its namespace strategy's
///   `PrepareForCreate`; later writes change `spec.finalizers` only through `finalize`).
///
/// # Errors
/// 400 for malformed bodies and mismatches, 422 for invalid names, labels or annotations,
/// 413 for oversized objects.
pub fn prepare_create(
    def: &ResourceDef,
    object: Value,
    ctx: &CreateContext<'_>,
) -> Result<Value, ApiError> {
    let mut object = as_object(object, "the object")?;
    crate::schema::check_body(def, &object)?;
    check_type(def, &mut object)?;
    let mut meta = take_metadata(&mut object)?;

    // Namespace.
    let body_namespace = string_field(&meta, "namespace")?;
    let url_namespace = ctx.namespace.filter(|ns| !ns.is_empty());
    let mut causes = Vec::new();
    if def.namespaced {
        let namespace = match (url_namespace, body_namespace) {
            (Some(url), Some(body)) if url != body => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            (Some(url), _) => Some(url.to_owned()),
            (None, body) => body,
        };
        match namespace {
            Some(namespace) => {
                if let Err(message) = validate_dns1123_label(&namespace) {
                    causes.push(invalid_value("metadata.namespace", &namespace, &message));
                }
                meta.insert("namespace".into(), Value::String(namespace));
            }
            None => causes.push((
                "metadata.namespace".to_owned(),
                "Required value".to_owned(),
                "FieldValueRequired".to_owned(),
            )),
        }
    } else {
        meta.remove("namespace");
    }

    // `generateName` is checked as a name prefix, a trailing `-` read as a letter (kube's
    // `ValidateObjectMeta` with `maskTrailingDash`), before the name made from it.
    if let Some(prefix) = string_field(&meta, "generateName")?.filter(|p| !p.is_empty()) {
        let masked = prefix
            .strip_suffix('-')
            .map_or_else(|| prefix.clone(), |head| format!("{head}a"));
        if let Err(message) = validate_name(def, &masked) {
            causes.push(invalid_value("metadata.generateName", &prefix, &message));
        }
    }
    // Name.
    let name = match string_field(&meta, "name")? {
        Some(name) => Some(name),
        None => string_field(&meta, "generateName")?.map(|prefix| {
            let cut = prefix
                .char_indices()
                .nth(GENERATE_NAME_PREFIX_MAX)
                .map_or(prefix.len(), |(index, _)| index);
            format!("{}{}", &prefix[..cut], ctx.random_suffix)
        }),
    };
    let name = match name.filter(|name| !name.is_empty()) {
        Some(name) => {
            if let Err(message) = validate_name(def, &name) {
                causes.push(invalid_value("metadata.name", &name, &message));
            }
            meta.insert("name".into(), Value::String(name.clone()));
            name
        }
        None => {
            causes.push((
                "metadata.name".to_owned(),
                "Required value: name or generateName is required".to_owned(),
                "FieldValueRequired".to_owned(),
            ));
            String::new()
        }
    };
    validate_meta_maps("metadata", &meta, &mut causes).map_err(ApiError::bad_request)?;
    causes.extend(crate::gc::validate_metadata(&meta));
    if !causes.is_empty() {
        if crate::crd::is_crd(def) {
            // kube validates a CRD's spec with its metadata: an invalid plural is reported
            // beside the name it makes invalid.
            let mut crd = Value::Object(object.clone());
            crd["metadata"] = Value::Object(meta.clone());
            crate::crd::apply_defaults(&mut crd);
            for cause in crate::crd::validation_causes(&crd, None) {
                if !causes.contains(&cause) {
                    causes.push(cause);
                }
            }
        }
        return Err(ApiError::invalid(def, &name, causes));
    }

    for field in SYSTEM_FIELDS {
        meta.remove(*field);
    }
    meta.insert("uid".into(), Value::String(ctx.uid.clone()));
    meta.insert(
        "creationTimestamp".into(),
        Value::String(ctx.creation_timestamp.clone()),
    );
    if crate::defaults::keeps_generation(def) && !crate::kinds::generation_starts_at_zero(def) {
        meta.insert("generation".into(), Value::from(1));
    } else {
        meta.remove("generation");
    }

    if def.group.is_empty() && def.plural == "namespaces" {
        namespace_defaults(&mut object, &mut meta, &name);
    }
    object.insert("metadata".into(), Value::Object(meta));
    let mut object = Value::Object(object);
    crate::kinds::workloads::prepare_created(def, &mut object);
    crate::kinds::workloads::convert(def, &mut object);
    crate::defaults::apply_defaults(def, &mut object);
    crate::defaults::create_status(def, &mut object);
    if crate::crd::is_crd(def) {
        crate::crd::apply_defaults(&mut object);
        crate::crd::validate(&object, None)?;
    }
    check_size(&object)?;
    Ok(object)
}

/// Kubernetes' namespace strategy: phase Active and the immutable name label.
fn namespace_defaults(object: &mut Map<String, Value>, meta: &mut Map<String, Value>, name: &str) {
    namespace_label(meta, name);
    // kube's `namespaceStrategy.PrepareForCreate`: the `kubernetes` finalizer is required on
    // create (not a default: it may be removed later, through `finalize`).
    let spec = object
        .entry("spec")
        .or_insert_with(|| Value::Object(Map::new()));
    if !spec.is_object() {
        *spec = Value::Object(Map::new());
    }
    if let Value::Object(spec) = spec {
        let finalizers = spec
            .entry("finalizers")
            .or_insert_with(|| Value::Array(Vec::new()));
        if !finalizers.is_array() {
            *finalizers = Value::Array(Vec::new());
        }
        if let Value::Array(finalizers) = finalizers
            && !finalizers.iter().any(|f| f == "kubernetes")
        {
            finalizers.push(Value::from("kubernetes"));
        }
    }
    let status = object
        .entry("status")
        .or_insert_with(|| Value::Object(Map::new()));
    // `SetDefaults_NamespaceStatus`: an empty phase (Go's `== ""`) is unset too.
    if let Value::Object(status) = status
        && status
            .get("phase")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
    {
        status.insert("phase".into(), Value::String("Active".into()));
    }
}

/// A namespace's `kubernetes.io/metadata.name` label: its name, whatever the client sent.
fn namespace_label(meta: &mut Map<String, Value>, name: &str) {
    let labels = meta
        .entry("labels")
        .or_insert_with(|| Value::Object(Map::new()));
    if !labels.is_object() {
        *labels = Value::Object(Map::new());
    }
    labels["kubernetes.io/metadata.name"] = Value::String(name.to_owned());
}

fn immutable(field: &str, value: &str) -> Cause {
    invalid_value(field, value, "field is immutable")
}

/// Prepares the new version of an object for an update or patch, as Kubernetes'
/// `BeforeUpdate`:
///
/// - `apiVersion`/`kind` filled or checked as on create;
/// - `name` and `namespace` filled from the old object when missing; a different name is a 400
///   (`the name of the object (b) does not match the name on the URL (a)`), a different
///   namespace a 400 as on create;
/// - `uid` filled from the old object when missing, and a different one is a 422 (immutable);
/// - `creationTimestamp`, `deletionTimestamp` and `deletionGracePeriodSeconds` are kept from the
///   old object whatever the new one says; `managedFields` and `selfLink` are dropped;
/// - `generation` is the old one, plus one when anything outside `metadata` and `status`
///   changed;
/// - labels, annotations and size validated as on create.
///
/// `metadata.resourceVersion` is left as the client sent it: the caller compares it with the
/// stored one (a precondition) and the store assigns the new one.
///
/// # Errors
/// 400, 422 or 413 as described.
pub fn prepare_update(def: &ResourceDef, old: &Value, new: Value) -> Result<Value, ApiError> {
    let object = as_object(new, "the object")?;
    crate::schema::check_body(def, &object)?;
    prepare_checked_update(def, old, object)
}

/// [`prepare_update`] for an object already known to decode into its kind (a patch's result,
/// which [`crate::apply_patch`] checks): the same, without walking the schema again.
///
/// # Errors
/// As [`prepare_update`].
pub fn prepare_update_decoded(
    def: &ResourceDef,
    old: &Value,
    new: Value,
) -> Result<Value, ApiError> {
    prepare_checked_update(def, old, as_object(new, "the object")?)
}

fn prepare_checked_update(
    def: &ResourceDef,
    old: &Value,
    mut object: Map<String, Value>,
) -> Result<Value, ApiError> {
    check_type(def, &mut object)?;
    let mut meta = take_metadata(&mut object)?;
    let empty = Map::new();
    let old_meta = old
        .get("metadata")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    // A name, namespace or uid the new object already has (a patch's always) is left in
    // place: copying the old one over it would change nothing.
    let old_str = |key: &str| old_meta.get(key).and_then(Value::as_str).unwrap_or("");

    let old_name = old_str("name");
    match str_field(&meta, "name")? {
        Some(name) if name != old_name => {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({name}) does not match the name on the URL ({old_name})"
            )));
        }
        Some(_) => {}
        None => {
            meta.insert("name".into(), Value::String(old_name.to_owned()));
        }
    }
    if def.namespaced {
        let old_namespace = old_str("namespace");
        match str_field(&meta, "namespace")? {
            Some(namespace) if namespace != old_namespace => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            Some(_) => {}
            None => {
                meta.insert("namespace".into(), Value::String(old_namespace.to_owned()));
            }
        }
    } else {
        meta.remove("namespace");
    }

    let mut causes = Vec::new();
    let old_uid = old_str("uid");
    match str_field(&meta, "uid")? {
        Some(uid) if uid != old_uid => causes.push(immutable("metadata.uid", uid)),
        Some(_) => {}
        None => {
            meta.insert("uid".into(), Value::String(old_uid.to_owned()));
        }
    }
    validate_meta_maps("metadata", &meta, &mut causes).map_err(ApiError::bad_request)?;
    causes.extend(crate::gc::validate_metadata(&meta));
    causes.extend(crate::gc::validate_no_new_finalizers(old_meta, &meta));
    if !causes.is_empty() {
        return Err(ApiError::invalid(def, old_name, causes));
    }

    for key in [
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
    ] {
        match old_meta.get(key) {
            // A patch's object has them already: an equal value is left in place.
            Some(value) if !value.is_null() => {
                if meta.get(key) != Some(value) {
                    meta.insert(key.into(), value.clone());
                }
            }
            _ => {
                meta.remove(key);
            }
        }
    }
    meta.remove("managedFields");
    meta.remove("selfLink");

    if def.group.is_empty() && def.plural == "namespaces" {
        // kube's `SetDefaults_Namespace` sets the name label on every write.
        namespace_label(&mut meta, old_name);
    }
    let mut defaulted = Value::Object(object);
    crate::kinds::workloads::convert(def, &mut defaulted);
    crate::defaults::apply_defaults(def, &mut defaulted);
    if crate::crd::is_crd(def) {
        crate::crd::apply_defaults(&mut defaulted);
    }
    let Value::Object(mut object) = defaulted else {
        return Err(ApiError::internal("defaulting changed the object's type"));
    };
    let old_generation = old_meta
        .get("generation")
        .and_then(Value::as_i64)
        .filter(|_| crate::defaults::keeps_generation(def));
    let spec_changed = crate::defaults::keeps_generation(def) && {
        let outside = |(key, _): &(&String, &Value)| {
            !matches!(key.as_str(), "metadata" | "status" | "apiVersion" | "kind")
        };
        // kube-apiserver defaults the stored object as it reads it, so an object stored
        // before a default existed does not count that default as a spec change. The
        // defaults read and fill nothing in `metadata` and nothing compared from `status`,
        // `apiVersion` or `kind`, so only the compared fields are copied and defaulted.
        // Equal as stored, they are equal defaulted: the new fields are defaulted already and
        // defaulting is idempotent (`defaults`' guarantee), so nothing is copied then.
        if old.as_object().is_some_and(|old| {
            old.iter()
                .filter(|entry| outside(entry))
                .eq(object.iter().filter(|entry| outside(entry)))
        }) {
            false
        } else {
            let old_defaulted = old.as_object().map(|old| {
                let mut copy = Value::Object(
                    old.iter()
                        .filter(|entry| outside(entry))
                        .map(|(key, value)| (key.clone(), value.clone()))
                        .collect(),
                );
                crate::defaults::apply_defaults(def, &mut copy);
                copy
            });
            let old_map = old_defaulted
                .as_ref()
                .and_then(Value::as_object)
                .unwrap_or(&empty);
            !old_map
                .iter()
                .filter(|entry| outside(entry))
                .eq(object.iter().filter(|entry| outside(entry)))
        }
    };
    match (old_generation, spec_changed) {
        (Some(generation), true) => {
            meta.insert("generation".into(), Value::from(generation + 1));
        }
        (Some(generation), false) => {
            meta.insert("generation".into(), Value::from(generation));
        }
        (None, true) => {
            meta.insert("generation".into(), Value::from(1));
        }
        (None, false) => {
            meta.remove("generation");
        }
    }

    object.insert("metadata".into(), Value::Object(meta));
    let object = Value::Object(object);
    if crate::crd::is_crd(def) {
        crate::crd::validate(&object, Some(old))?;
    }
    check_size(&object)?;
    Ok(object)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::builtin_resources;
    use crate::size::{
        OBJECT_SIZE_MAX_BYTES, check_applied_size, kept_size, serialized_size,
        serialized_size_at_most,
    };
    use serde_json::json;

    fn def(plural: &str) -> ResourceDef {
        builtin_resources()
            .into_iter()
            .find(|d| d.plural == plural)
            .unwrap()
    }

    fn ctx(namespace: Option<&str>) -> CreateContext<'_> {
        CreateContext {
            namespace,
            uid: "uid-1".into(),
            creation_timestamp: "2026-11-29T15:00:00Z".into(),
            random_suffix: "x7k2p".into(),
        }
    }

    #[test]
    fn path_segment_names_for_rbac_kinds_signing_requests_and_custom_resources() {
        for plural in [
            "clusterroles",
            "clusterrolebindings",
            "roles",
            "rolebindings",
        ] {
            let rbac = def(plural);
            assert!(validate_name(&rbac, "system:aggregated-metrics-reader").is_ok());
            assert!(validate_name(&rbac, "Admin_Role").is_ok());
            assert_eq!(
                validate_name(&rbac, "a/b").unwrap_err(),
                "may not contain '/'"
            );
            assert_eq!(validate_name(&rbac, "..").unwrap_err(), "may not be '..'");
        }
        let csr = def("certificatesigningrequests");
        assert!(validate_name(&csr, "node-csr-Ab_C:d").is_ok());
        assert_eq!(
            validate_name(&csr, "a%b").unwrap_err(),
            "may not contain '%'"
        );
        // What a URL must escape is a name too (request paths are read decoded).
        assert!(validate_name(&csr, "a<b c").is_ok());
        assert!(validate_name(&csr, "caf\u{e9}").is_ok());
        let widgets = ResourceDef::named("example.com", "v1", "widgets", "Widget", true);
        assert!(!widgets.is_builtin());
        assert!(validate_name(&widgets, "My:Widget_1").is_ok());
        assert_eq!(
            validate_name(&widgets, "a/b").unwrap_err(),
            "may not contain '/'"
        );
        // The rest stay DNS subdomains.
        assert_eq!(
            validate_name(&def("configmaps"), "a:b").unwrap_err(),
            DNS1123_SUBDOMAIN_MESSAGE
        );
    }

    #[test]
    fn names() {
        let pods = def("pods");
        assert!(validate_name(&pods, "web-0").is_ok());
        assert!(validate_name(&pods, "a.b.c").is_ok());
        assert_eq!(
            validate_name(&pods, "Web").unwrap_err(),
            DNS1123_SUBDOMAIN_MESSAGE
        );
        assert!(validate_name(&pods, "-a").is_err());
        assert!(validate_name(&pods, "a_b").is_err());
        assert!(validate_name(&pods, "").is_err());
        assert!(validate_name(&pods, "a..b").is_err());
        assert_eq!(
            validate_name(&pods, &"a".repeat(254)).unwrap_err(),
            "must be no more than 253 characters"
        );
        assert!(validate_name(&pods, &"a".repeat(253)).is_ok());
        let ns = def("namespaces");
        assert!(validate_name(&ns, "kube-system").is_ok());
        // kube 1.33's apimachinery: a subdomain that is no label has dots.
        assert_eq!(
            validate_name(&ns, "a.b").unwrap_err(),
            "must not contain dots"
        );
        assert_eq!(
            validate_name(&ns, "A.b").unwrap_err(),
            DNS1123_LABEL_MESSAGE
        );
        assert!(validate_name(&ns, &"a".repeat(64)).is_err());
        let svc = def("services");
        assert!(validate_name(&svc, "web").is_ok());
        assert_eq!(
            validate_name(&svc, "1web").unwrap_err(),
            DNS1035_LABEL_MESSAGE
        );
        assert!(validate_qualified_name("app.kubernetes.io/name").is_ok());
        assert!(validate_qualified_name("MyKey").is_ok());
        assert!(validate_qualified_name("/x").is_err());
        assert!(validate_qualified_name("a/b/c").is_err());
        assert!(validate_qualified_name("Bad_Prefix/x").is_err());
        assert!(validate_label_value("").is_ok());
        assert!(validate_label_value("v1.2_3").is_ok());
        assert!(validate_label_value("bad value").is_err());
    }

    #[test]
    fn body_media_types() {
        for ok in [
            None,
            Some("application/json"),
            Some("application/json; charset=utf-8"),
            Some("Application/YAML"),
            Some("application/vnd.kubernetes.protobuf"),
        ] {
            assert_eq!(check_body_media_type(ok), Ok(()), "{ok:?}");
        }
        for bad in [
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "application/cbor",
        ] {
            let error = check_body_media_type(Some(bad)).unwrap_err();
            assert_eq!(
                (error.code, error.reason.as_str()),
                (415, "UnsupportedMediaType")
            );
            assert_eq!(
                error.message,
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf"
            );
        }
    }

    #[test]
    fn create_fills_metadata() {
        let pod = json!({"metadata": {"name": "a", "resourceVersion": "5", "uid": "client", "managedFields": []}, "spec": {}});
        let out = prepare_create(&def("pods"), pod, &ctx(Some("default"))).unwrap();
        assert_eq!(
            out,
            json!({"apiVersion": "v1", "kind": "Pod",
                   "spec": {"dnsPolicy": "ClusterFirst", "enableServiceLinks": true,
                            "restartPolicy": "Always", "schedulerName": "default-scheduler",
                            "securityContext": {}, "terminationGracePeriodSeconds": 30},
                   "status": {"phase": "Pending", "qosClass": "BestEffort"},
                   "metadata": {"name": "a", "namespace": "default", "uid": "uid-1",
                                "creationTimestamp": "2026-11-29T15:00:00Z", "generation": 1}})
        );
    }

    #[test]
    fn generation_only_where_kubernetes_keeps_it() {
        for (plural, kept) in [
            ("pods", true),
            ("deployments", true),
            ("endpointslices", true),
            ("configmaps", false),
            ("services", false),
            ("secrets", false),
            ("namespaces", false),
        ] {
            let body = json!({"metadata": {"name": "a", "generation": 7}});
            let out = prepare_create(&def(plural), body, &ctx(Some("default"))).unwrap();
            assert_eq!(
                out["metadata"].get("generation").is_some(),
                kept,
                "{plural}"
            );
            let mut changed = out.clone();
            changed["spec"] = json!({"x": 1});
            changed["data"] = json!({"k": "dg=="});
            let updated = prepare_update(&def(plural), &out, changed).unwrap();
            assert_eq!(
                updated["metadata"]
                    .get("generation")
                    .and_then(Value::as_i64),
                kept.then_some(2),
                "{plural}"
            );
        }
    }

    #[test]
    fn create_generate_name() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "web-"}});
        let out = prepare_create(&def("pods"), pod, &ctx(Some("default"))).unwrap();
        assert_eq!(out["metadata"]["name"], "web-x7k2p");
        assert_eq!(out["metadata"]["generateName"], "web-");
        let long = json!({"metadata": {"generateName": "a".repeat(80)}});
        let out = prepare_create(&def("pods"), long, &ctx(Some("d"))).unwrap();
        assert_eq!(out["metadata"]["name"].as_str().unwrap().len(), 63);
        // The prefix itself is a name's prefix (kube's `ValidateObjectMeta`): too long, or not
        // a DNS subdomain, it is refused before the name made from it.
        let refused = |prefix: String| {
            let body = json!({"metadata": {"generateName": prefix}});
            prepare_create(&def("pods"), body, &ctx(Some("d")))
                .unwrap_err()
                .message
        };
        assert_eq!(
            refused("a".repeat(254)),
            format!(
                "Pod \"{}x7k2p\" is invalid: metadata.generateName: Invalid value: \"{}\": must be no more than 253 characters",
                "a".repeat(58),
                "a".repeat(254)
            )
        );
        assert!(
            refused("X_".to_owned()).starts_with(
                "Pod \"X_x7k2p\" is invalid: [metadata.generateName: Invalid value: \"X_\": a lowercase RFC 1123 subdomain"
            ),
            "{}",
            refused("X_".to_owned())
        );
        assert!(
            prepare_create(
                &def("pods"),
                json!({"metadata": {"generateName": "a.b-"}}),
                &ctx(Some("d"))
            )
            .is_ok()
        );
        let err =
            prepare_create(&def("pods"), json!({"metadata": {}}), &ctx(Some("d"))).unwrap_err();
        assert_eq!(err.code, 422);
        assert_eq!(
            err.message,
            "Pod \"\" is invalid: metadata.name: Required value: name or generateName is required"
        );
    }

    #[test]
    fn create_namespace_rules() {
        let pod = json!({"metadata": {"name": "a", "namespace": "other"}});
        let err = prepare_create(&def("pods"), pod.clone(), &ctx(Some("default"))).unwrap_err();
        assert_eq!(err.code, 400);
        assert_eq!(
            err.message,
            "the namespace of the provided object does not match the namespace sent on the request"
        );
        let out = prepare_create(&def("pods"), pod, &ctx(None)).unwrap();
        assert_eq!(out["metadata"]["namespace"], "other");
        let node = json!({"metadata": {"name": "n1", "namespace": "default"}});
        let out = prepare_create(&def("nodes"), node, &ctx(None)).unwrap();
        assert!(out["metadata"].get("namespace").is_none());
        let err = prepare_create(&def("pods"), json!({"metadata": {"name": "a"}}), &ctx(None))
            .unwrap_err();
        assert_eq!(err.code, 422);
        let ns = prepare_create(
            &def("namespaces"),
            json!({"metadata": {"name": "team"}}),
            &ctx(None),
        )
        .unwrap();
        assert_eq!(ns["status"]["phase"], "Active");
        assert_eq!(
            ns["metadata"]["labels"]["kubernetes.io/metadata.name"],
            "team"
        );
        let empty_phase = prepare_create(
            &def("namespaces"),
            json!({"metadata": {"name": "team"}, "status": {"phase": ""}}),
            &ctx(None),
        )
        .unwrap();
        assert_eq!(empty_phase["status"]["phase"], "Active");
    }

    #[test]
    fn create_rejects_wrong_type_and_bad_metadata() {
        let wrong_kind =
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}});
        let err = prepare_create(&def("pods"), wrong_kind, &ctx(Some("d"))).unwrap_err();
        assert_eq!(err.code, 400);
        assert!(
            err.message.contains("kind in the data (ConfigMap)"),
            "{}",
            err.message
        );
        let wrong_version =
            json!({"apiVersion": "apps/v1", "kind": "Pod", "metadata": {"name": "a"}});
        let err = prepare_create(&def("pods"), wrong_version, &ctx(Some("d"))).unwrap_err();
        assert_eq!(
            err.message,
            "the API version in the data (apps/v1) does not match the expected API version (v1)"
        );
        let err = prepare_create(&def("pods"), json!([1]), &ctx(Some("d"))).unwrap_err();
        assert_eq!(err.code, 400);
        let err = prepare_create(
            &def("pods"),
            json!({"metadata": {"name": "A"}}),
            &ctx(Some("d")),
        )
        .unwrap_err();
        assert_eq!(err.code, 422);
        assert_eq!(
            err.details.as_ref().unwrap()["causes"][0]["field"],
            "metadata.name"
        );
        let bad_label = json!({"metadata": {"name": "a", "labels": {"app": "bad value"}}});
        let err = prepare_create(&def("pods"), bad_label, &ctx(Some("d"))).unwrap_err();
        assert_eq!(err.code, 422);
        assert!(
            err.message
                .starts_with("Pod \"a\" is invalid: metadata.labels: Invalid value: \"bad value\"")
        );
        // Each of kube's messages is a cause (`IsQualifiedName`, `IsValidLabelValue` list them
        // all): an empty name part, then its pattern; a long value of bad characters.
        let both = json!({"metadata": {"name": "a", "labels": {"a/": "_".repeat(64)}}});
        let err = prepare_create(&def("pods"), both, &ctx(Some("d"))).unwrap_err();
        let causes: Vec<&str> = err.details.as_ref().unwrap()["causes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["message"].as_str().unwrap())
            .collect();
        assert_eq!(causes.len(), 4, "{causes:?}");
        assert!(
            causes[0].ends_with("name part must be non-empty"),
            "{causes:?}"
        );
        assert!(
            causes[1].contains("name part must consist of"),
            "{causes:?}"
        );
        assert!(
            causes[2].ends_with("must be no more than 63 characters"),
            "{causes:?}"
        );
        assert!(causes[3].contains("a valid label must be"), "{causes:?}");
        let number_label = json!({"metadata": {"name": "a", "labels": {"app": 1}}});
        assert_eq!(
            prepare_create(&def("pods"), number_label, &ctx(Some("d")))
                .unwrap_err()
                .code,
            400
        );
        let big =
            json!({"metadata": {"name": "a"}, "data": {"k": "x".repeat(OBJECT_SIZE_MAX_BYTES)}});
        assert_eq!(
            prepare_create(&def("configmaps"), big, &ctx(Some("d")))
                .unwrap_err()
                .code,
            413
        );
    }

    /// Goal: the bound that lets a small object skip the size count is never below the
    /// text's length, whatever the strings hold (escapes, control bytes, multi-byte
    /// characters), the numbers' extremes and the nesting; and an object the bound cannot
    /// clear is still measured exactly (the refusal names its size).
    #[test]
    fn the_size_bound_is_never_below_the_serialized_length() {
        let nasty = "\u{0}\u{1f}\"\\\n\u{7f}\u{e9}\u{2028}\u{1f600}";
        let values = [
            json!(null),
            json!(true),
            json!(false),
            json!(0),
            json!(u64::MAX),
            json!(i64::MIN),
            json!(-1.797_693_134_862_315_7e308),
            json!(5e-324),
            json!(-0.000_000_123_456_789_012_345_67),
            json!(""),
            json!(nasty),
            json!(nasty.repeat(100)),
            json!({}),
            json!([]),
            json!({nasty: [nasty, 1.5, null, {"": ""}], "k": {"a": [[], {}, [[-1e-300]]]}}),
            json!([[[[[[]]]]], {"\u{1}": false}]),
            stored(),
        ];
        for value in values {
            let text = serde_json::to_vec(&value).unwrap();
            assert!(serialized_size_at_most(&value) >= text.len(), "{value}");
            assert_eq!(serialized_size(&value), text.len(), "{value}");
        }
        // Past the bound's reach but under the limit: counted and accepted.
        let half = "x".repeat(OBJECT_SIZE_MAX_BYTES / 2);
        let under = json!({"metadata": {"name": "a"}, "data": {"k": half}});
        assert!(serialized_size_at_most(&under) > OBJECT_SIZE_MAX_BYTES);
        assert!(check_size(&under).is_ok());
        let over = json!({"data": {"k": "x".repeat(OBJECT_SIZE_MAX_BYTES)}});
        let size = serde_json::to_vec(&over).unwrap().len();
        assert_eq!(
            check_size(&over).unwrap_err().message,
            format!(
                "Request entity too large: the object is {size} bytes, more than the limit of {OBJECT_SIZE_MAX_BYTES} bytes"
            )
        );
    }

    /// What an apply's configuration is checked by is a lower bound of what the object keeps:
    /// its zeros and its `status` are not counted.
    #[test]
    fn an_applied_configuration_is_refused_by_what_it_keeps() {
        for value in [
            json!({"a": [1, "x", {"b": true}], "c": {"d": "é\u{1}"}}),
            json!({"a": [0, "", {"b": false, "c": null}], "d": {}, "e": [[], {}], "f": 0.0}),
            json!([{"name": "a", "image": "x", "ports": []}, -1.5]),
        ] {
            let text = serde_json::to_vec(&value).unwrap();
            assert!(kept_size(&value) <= text.len(), "{value}");
        }
        assert_eq!(kept_size(&json!([0, "", {"b": [null, {}]}])), 0);
        assert_eq!(
            kept_size(&json!({"a": [1, 0], "b": ""})),
            r#"{"a":[1]}"#.len()
        );
        let containers: Vec<Value> = (0..60_000)
            .map(|i| json!({"name": format!("a{i}"), "image": "x", "ports": []}))
            .collect();
        let over = json!({"apiVersion": "v1", "kind": "Pod", "spec": {"containers": containers}});
        let refusal = check_applied_size(&over).unwrap_err();
        assert_eq!(refusal.code, 413);
        assert!(
            refusal
                .message
                .starts_with("Request entity too large: the object is at least "),
            "{}",
            refusal.message
        );
        // Zeros and the status are not counted.
        let zeros: Vec<Value> = (0..60_000)
            .map(|_| json!({"name": "", "ports": []}))
            .collect();
        let status = "x".repeat(OBJECT_SIZE_MAX_BYTES);
        let kept = json!({"spec": {"containers": zeros}, "status": {"message": status}});
        assert!(check_applied_size(&kept).is_ok());
    }

    fn stored() -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": "web", "namespace": "d", "uid": "u1", "generation": 3,
                            "creationTimestamp": "2026-01-01T00:00:00Z", "resourceVersion": "10"},
               "spec": {"replicas": 1}, "status": {"replicas": 1}})
    }

    #[test]
    fn update_bumps_generation_only_on_spec_change() {
        let deployments = def("deployments");
        let mut same_spec = stored();
        same_spec["status"]["replicas"] = json!(2);
        same_spec["metadata"]["labels"] = json!({"a": "b"});
        let out = prepare_update(&deployments, &stored(), same_spec).unwrap();
        assert_eq!(out["metadata"]["generation"], 3);
        assert_eq!(out["metadata"]["labels"]["a"], "b");
        let mut new_spec = stored();
        new_spec["spec"]["replicas"] = json!(5);
        let out = prepare_update(&deployments, &stored(), new_spec).unwrap();
        assert_eq!(out["metadata"]["generation"], 4);
        assert_eq!(out["metadata"]["resourceVersion"], "10");
    }

    /// The stored object is compared defaulted: a default it lacks is no spec change; a real
    /// change is one, whatever metadata, status, apiVersion and kind say.
    #[test]
    fn defaults_the_stored_object_lacks_are_no_spec_change() {
        let deployments = def("deployments");
        let mut bare = stored();
        bare["spec"] = json!({"replicas": 1, "template": {"spec": {"containers": [{"name": "c", "image": "nginx"}]}}});
        bare["metadata"]["annotations"] = json!({"big": "x".repeat(10_000)});
        let mut defaulted = bare.clone();
        crate::defaults::apply_defaults(&deployments, &mut defaulted);
        assert_ne!(defaulted["spec"], bare["spec"], "the kind has defaults");
        let mut same = defaulted.clone();
        same["status"] = json!({"replicas": 9});
        same["metadata"]["labels"] = json!({"a": "b"});
        let out = prepare_update(&deployments, &bare, same).unwrap();
        assert_eq!(out["metadata"]["generation"], 3);
        let mut changed = defaulted;
        changed["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:2");
        let out = prepare_update(&deployments, &bare, changed).unwrap();
        assert_eq!(out["metadata"]["generation"], 4);
        // A stored object that is not an object compares as one without fields.
        let out =
            prepare_update(&deployments, &json!("x"), json!({"spec": {"replicas": 1}})).unwrap();
        assert_eq!(out["metadata"]["generation"], 1);
    }

    /// Fields equal as stored are equal defaulted (the comparison then copies nothing): the
    /// full comparison, defaulting a copy of the stored fields, says the same.
    #[test]
    fn fields_equal_as_stored_are_no_spec_change() {
        let deployments = def("deployments");
        let mut stored_object = stored();
        stored_object["spec"] = json!({"replicas": 1, "template": {"spec": {"containers": [{"name": "c", "image": "nginx"}]}}});
        crate::defaults::apply_defaults(&deployments, &mut stored_object);
        let mut annotated = stored_object.clone();
        annotated["metadata"]["annotations"] = json!({"seq": "1"});
        let out = prepare_update(&deployments, &stored_object, annotated).unwrap();
        assert_eq!(out["metadata"]["generation"], 3);
        assert_eq!(out["metadata"]["annotations"]["seq"], "1");
        // What the full comparison would have compared: the stored fields, defaulted again.
        let outside: Map<String, Value> = stored_object
            .as_object()
            .unwrap()
            .iter()
            .filter(|(key, _)| {
                !matches!(key.as_str(), "metadata" | "status" | "apiVersion" | "kind")
            })
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect();
        let mut defaulted = Value::Object(outside.clone());
        crate::defaults::apply_defaults(&deployments, &mut defaulted);
        assert_eq!(defaulted, Value::Object(outside));
    }

    /// The size check counts exactly the bytes `serde_json::to_vec` writes.
    #[test]
    fn sizes_are_counted_without_writing_the_text() {
        for object in [
            stored(),
            json!({"s": "\u{e9}\"\\\n\u{1}", "f": [0.1, -0.0, 1e300, u64::MAX, i64::MIN], "n": null}),
            json!({}),
            json!("x"),
        ] {
            assert_eq!(
                serialized_size(&object),
                serde_json::to_vec(&object).unwrap().len()
            );
        }
    }

    #[test]
    fn update_keeps_immutable_metadata() {
        let deployments = def("deployments");
        let new = json!({"metadata": {"name": "web", "creationTimestamp": "2000-01-01T00:00:00Z"}, "spec": {"replicas": 1}});
        let out = prepare_update(&deployments, &stored(), new).unwrap();
        assert_eq!(out["metadata"]["uid"], "u1");
        assert_eq!(out["metadata"]["namespace"], "d");
        assert_eq!(out["metadata"]["creationTimestamp"], "2026-01-01T00:00:00Z");
        assert_eq!(out["kind"], "Deployment");
        // Empty or null identity fields are the old object's; equal ones stay as they are.
        let blank = json!({"metadata": {"name": "", "namespace": null, "uid": ""}, "spec": {}});
        let same = json!({"metadata": {"name": "web", "namespace": "d", "uid": "u1"}, "spec": {}});
        for new in [blank, same] {
            let out = prepare_update(&deployments, &stored(), new).unwrap();
            let identity = |key: &str| out["metadata"][key].clone();
            assert_eq!(
                (identity("name"), identity("namespace"), identity("uid")),
                (json!("web"), json!("d"), json!("u1"))
            );
        }
        let mut other_uid = stored();
        other_uid["metadata"]["uid"] = json!("u2");
        let err = prepare_update(&deployments, &stored(), other_uid).unwrap_err();
        assert_eq!(err.code, 422);
        assert!(
            err.message
                .contains("metadata.uid: Invalid value: \"u2\": field is immutable"),
            "{}",
            err.message
        );
        let mut renamed = stored();
        renamed["metadata"]["name"] = json!("api");
        let err = prepare_update(&deployments, &stored(), renamed).unwrap_err();
        assert_eq!(err.code, 400);
        assert_eq!(
            err.message,
            "the name of the object (api) does not match the name on the URL (web)"
        );
        let mut moved = stored();
        moved["metadata"]["namespace"] = json!("e");
        assert_eq!(
            prepare_update(&deployments, &stored(), moved)
                .unwrap_err()
                .code,
            400
        );
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        fn arb_json() -> impl Strategy<Value = Value> {
            let leaf = prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::Bool),
                any::<i64>().prop_map(Value::from),
                "[a-zA-Z0-9./-]{0,6}".prop_map(Value::String),
            ];
            leaf.prop_recursive(3, 32, 5, |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                    prop::collection::btree_map(
                        prop_oneof![
                            Just("metadata".to_owned()),
                            Just("name".to_owned()),
                            Just("namespace".to_owned()),
                            Just("generateName".to_owned()),
                            Just("labels".to_owned()),
                            Just("uid".to_owned()),
                            Just("kind".to_owned()),
                            Just("spec".to_owned()),
                            "[a-z]{1,3}",
                        ],
                        inner,
                        0..5
                    )
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
                ]
            })
        }

        proptest! {
            #[test]
            fn writes_never_panic(object in arb_json(), old in arb_json()) {
                for plural in ["pods", "namespaces", "nodes"] {
                    let d = def(plural);
                    if let Ok(created) = prepare_create(&d, object.clone(), &ctx(Some("default"))) {
                        prop_assert!(validate_name(&d, created["metadata"]["name"].as_str().unwrap()).is_ok());
                        prop_assert_eq!(&created["metadata"]["uid"], "uid-1");
                    }
                    if let Ok(updated) = prepare_update(&d, &old, object.clone()) {
                        prop_assert!(updated.is_object());
                    }
                }
            }
        }
    }
}

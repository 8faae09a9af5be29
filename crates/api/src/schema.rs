//! Decoding of write bodies against the published schemas of the built-in kinds.
//!
//! ## Guarantees
//! - An object of a built-in kind is stored only if kube-apiserver could decode it into its Go
//!   type: every field the kind's schema declares has a JSON value of that field's type (or
//!   `null`, which Go leaves as the zero value), Secret-style `[]byte` fields hold base64,
//!   quantities parse as `resource.Quantity`, int-or-string fields hold an int32 or a string,
//!   and times parse as RFC 3339. Fields the schema does not declare are ignored, as Go's
//!   non-strict decoder ignores them.
//! - A body that does not decode is refused with kube-apiserver's answer:
//!   - create and update: 400 BadRequest `ConfigMap in version "v1" cannot be handled as a
//!     ConfigMap: json: cannot unmarshal number into Go struct field ConfigMap.data of type
//!     string` (the handler's `transformDecodeError` around Go's `encoding/json` error);
//!   - patch: 422 Invalid `"" is invalid: patch: Invalid value: "<patched object>": json: ...`
//!     with one `FieldValueInvalid` cause on the field `patch`, as kube-apiserver's patch
//!     handler builds it when the patched object does not decode.
//! - Only the first failure is reported, as Go's decoder does: the first type mismatch (Go
//!   keeps decoding after one and reports the first), unless a field with its own decoder
//!   (quantity, int-or-string, time) fails, which stops decoding at once.
//!
//! - Custom resources with a declared OpenAPI v3 schema are checked by
//!   [`crate::structural::check_custom`] instead: 422 Invalid with one cause per failure, in
//!   kube-apiserver's CRD validation wording. (The server calls it where it knows a resource's
//!   schema; the built-in check above skips custom resources.)
//!
//! The schemas are k8s-openapi's (the Kubernetes OpenAPI definitions for v1.33, through its
//! `schemars` implementations), generated once per process; the Go type names in messages are
//! derived from the definition names (`io.k8s.api.core.v1.Container` → `v1.Container`).
//! Differences from Go's text that remain: fields are visited in key order rather than the
//! order of the client's text (it matters only when there are several errors). A float in an
//! integer field is judged and quoted by its literal as sent (`number 1e0`, `number 1.50`;
//! `-0` is 0 and `-0.0` refused, as Go's `strconv.ParseInt` reads them) where the body's text
//! is known: a create or update body ([`decode_body`]), a merge patch and a JSON patch
//! ([`check_patched_from`]: a JSON patch's number by the operation that placed it). Elsewhere
//! (a number a JSON patch's `move` or `copy` carried) it is quoted as serde_json prints the
//! float and `-0.0` is taken as `-0`.

use std::collections::HashMap;
use std::sync::OnceLock;

use base64::Engine as _;
use serde_json::{Map, Value};

use crate::error::ApiError;
use crate::resources::ResourceDef;

/// The schema definitions of every served built-in kind, and each kind's root definition.
struct Schemas {
    definitions: Map<String, Value>,
    /// kind → `(group, version)` → the root definition's name; the version is the
    /// definition's (`io.k8s.api.autoscaling.v2.HorizontalPodAutoscaler` is `v2`). Keyed by
    /// kind first so a look-up (several per write) hashes the kind's text and compares a few
    /// entries, instead of comparing every served kind's key.
    roots: HashMap<&'static str, Vec<(&'static str, String, String)>>,
}

impl Schemas {
    /// The root definition of a built-in kind at its version.
    fn root(&self, def: &ResourceDef) -> Option<&String> {
        self.roots
            .get(def.kind.as_str())?
            .iter()
            .find(|(group, version, _)| *group == def.group && *version == def.version)
            .map(|(_, _, root)| root)
    }
}

/// Records `root` in `roots` (see [`Schemas::roots`]) as the root definition of `kind` in
/// `group` at `version`, replacing an earlier one.
fn add_root(
    roots: &mut HashMap<&'static str, Vec<(&'static str, String, String)>>,
    (group, version, kind): (&'static str, String, &'static str),
    root: String,
) {
    let entries = roots.entry(kind).or_default();
    match entries
        .iter_mut()
        .find(|(g, v, _)| *g == group && *v == version)
    {
        Some(entry) => entry.2 = root,
        None => entries.push((group, version, root)),
    }
}

/// Removes the schemas' `description` texts (not needed, and large), but not the properties
/// named `description` (PriorityClass, IngressClass's parameters and others declare one).
fn strip_descriptions(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.remove("description");
            for (key, child) in map.iter_mut() {
                match (key.as_str(), child) {
                    ("properties", Value::Object(properties)) => {
                        properties.values_mut().for_each(strip_descriptions);
                    }
                    (_, child) => strip_descriptions(child),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(strip_descriptions),
        _ => {}
    }
}

fn ref_name(schema: &Value) -> Option<&str> {
    schema
        .get("$ref")
        .and_then(Value::as_str)
        .map(|r| r.rsplit('/').next().unwrap_or(r))
}

/// The schemas bodies of `def` are decoded against here: the write schemas for built-in kinds,
/// the documented ones for the reviews (created only, never stored, so outside the write
/// schemas and their markers: `http::review` decodes their bodies as kube-apiserver's create
/// handler does); `None` for any other kind.
fn typed_schemas(def: &ResourceDef) -> Option<&'static Schemas> {
    if def.is_builtin() {
        // Core `Binding` too: it has no write schema, so it is not walked.
        Some(schemas())
    } else if crate::discovery::is_create_only(def) {
        Some(documented_schemas())
    } else {
        None
    }
}

fn schemas() -> &'static Schemas {
    static SCHEMAS: OnceLock<Schemas> = OnceLock::new();
    SCHEMAS.get_or_init(|| generate(true))
}

/// The same definitions with their descriptions, for the OpenAPI documents (`kubectl
/// explain`); generated on first use.
fn documented_schemas() -> &'static Schemas {
    static SCHEMAS: OnceLock<Schemas> = OnceLock::new();
    SCHEMAS.get_or_init(|| generate(false))
}

/// The definitions of every served built-in kind with Kubernetes' markers, their descriptions
/// removed when `strip` (the write checks do not need them).
fn generate(strip: bool) -> Schemas {
    use k8s_openapi::api::{
        admissionregistration, apps, autoscaling, batch, certificates, coordination, core,
        discovery, flowcontrol, networking, node, policy, rbac, scheduling, storage,
    };
    let mut generator = k8s_openapi::schemars::SchemaGenerator::default();
    let mut roots = HashMap::new();
    let mut add = |group: &'static str, kind: &'static str, schema: Value| {
        if let Some(name) = ref_name(&schema) {
            let version = name.rsplit('.').nth(1).unwrap_or_default().to_owned();
            add_root(&mut roots, (group, version, kind), name.to_owned());
        }
    };
    add(
        "",
        "Namespace",
        generator.subschema_for::<core::v1::Namespace>().to_value(),
    );
    add(
        "",
        "Node",
        generator.subschema_for::<core::v1::Node>().to_value(),
    );
    add(
        "",
        "Pod",
        generator.subschema_for::<core::v1::Pod>().to_value(),
    );
    add(
        "",
        "ConfigMap",
        generator.subschema_for::<core::v1::ConfigMap>().to_value(),
    );
    add(
        "",
        "Secret",
        generator.subschema_for::<core::v1::Secret>().to_value(),
    );
    add(
        "",
        "Service",
        generator.subschema_for::<core::v1::Service>().to_value(),
    );
    add(
        "",
        "Endpoints",
        generator.subschema_for::<core::v1::Endpoints>().to_value(),
    );
    add(
        "",
        "Event",
        generator.subschema_for::<core::v1::Event>().to_value(),
    );
    add(
        "",
        "ServiceAccount",
        generator
            .subschema_for::<core::v1::ServiceAccount>()
            .to_value(),
    );
    add(
        "apps",
        "Deployment",
        generator.subschema_for::<apps::v1::Deployment>().to_value(),
    );
    add(
        "apps",
        "ReplicaSet",
        generator.subschema_for::<apps::v1::ReplicaSet>().to_value(),
    );
    add(
        "apps",
        "StatefulSet",
        generator
            .subschema_for::<apps::v1::StatefulSet>()
            .to_value(),
    );
    add(
        "apps",
        "DaemonSet",
        generator.subschema_for::<apps::v1::DaemonSet>().to_value(),
    );
    add(
        "coordination.k8s.io",
        "Lease",
        generator
            .subschema_for::<coordination::v1::Lease>()
            .to_value(),
    );
    add(
        "discovery.k8s.io",
        "EndpointSlice",
        generator
            .subschema_for::<discovery::v1::EndpointSlice>()
            .to_value(),
    );
    add(
        "",
        "PersistentVolumeClaim",
        generator
            .subschema_for::<core::v1::PersistentVolumeClaim>()
            .to_value(),
    );
    add(
        "",
        "PersistentVolume",
        generator
            .subschema_for::<core::v1::PersistentVolume>()
            .to_value(),
    );
    add(
        "",
        "ResourceQuota",
        generator
            .subschema_for::<core::v1::ResourceQuota>()
            .to_value(),
    );
    add(
        "",
        "LimitRange",
        generator.subschema_for::<core::v1::LimitRange>().to_value(),
    );
    add(
        "",
        "ReplicationController",
        generator
            .subschema_for::<core::v1::ReplicationController>()
            .to_value(),
    );
    add(
        "",
        "PodTemplate",
        generator
            .subschema_for::<core::v1::PodTemplate>()
            .to_value(),
    );
    add(
        "batch",
        "Job",
        generator.subschema_for::<batch::v1::Job>().to_value(),
    );
    add(
        "batch",
        "CronJob",
        generator.subschema_for::<batch::v1::CronJob>().to_value(),
    );
    add(
        "autoscaling",
        "HorizontalPodAutoscaler",
        generator
            .subschema_for::<autoscaling::v2::HorizontalPodAutoscaler>()
            .to_value(),
    );
    add(
        "autoscaling",
        "HorizontalPodAutoscaler",
        generator
            .subschema_for::<autoscaling::v1::HorizontalPodAutoscaler>()
            .to_value(),
    );
    add(
        "policy",
        "PodDisruptionBudget",
        generator
            .subschema_for::<policy::v1::PodDisruptionBudget>()
            .to_value(),
    );
    add(
        "networking.k8s.io",
        "NetworkPolicy",
        generator
            .subschema_for::<networking::v1::NetworkPolicy>()
            .to_value(),
    );
    add(
        "networking.k8s.io",
        "Ingress",
        generator
            .subschema_for::<networking::v1::Ingress>()
            .to_value(),
    );
    add(
        "networking.k8s.io",
        "IngressClass",
        generator
            .subschema_for::<networking::v1::IngressClass>()
            .to_value(),
    );
    add(
        "networking.k8s.io",
        "IPAddress",
        generator
            .subschema_for::<networking::v1::IPAddress>()
            .to_value(),
    );
    add(
        "networking.k8s.io",
        "ServiceCIDR",
        generator
            .subschema_for::<networking::v1::ServiceCIDR>()
            .to_value(),
    );
    add(
        "rbac.authorization.k8s.io",
        "Role",
        generator.subschema_for::<rbac::v1::Role>().to_value(),
    );
    add(
        "rbac.authorization.k8s.io",
        "RoleBinding",
        generator
            .subschema_for::<rbac::v1::RoleBinding>()
            .to_value(),
    );
    add(
        "rbac.authorization.k8s.io",
        "ClusterRole",
        generator
            .subschema_for::<rbac::v1::ClusterRole>()
            .to_value(),
    );
    add(
        "rbac.authorization.k8s.io",
        "ClusterRoleBinding",
        generator
            .subschema_for::<rbac::v1::ClusterRoleBinding>()
            .to_value(),
    );
    add(
        "storage.k8s.io",
        "StorageClass",
        generator
            .subschema_for::<storage::v1::StorageClass>()
            .to_value(),
    );
    add(
        "scheduling.k8s.io",
        "PriorityClass",
        generator
            .subschema_for::<scheduling::v1::PriorityClass>()
            .to_value(),
    );
    add(
        "certificates.k8s.io",
        "CertificateSigningRequest",
        generator
            .subschema_for::<certificates::v1::CertificateSigningRequest>()
            .to_value(),
    );
    add(
        "admissionregistration.k8s.io",
        "ValidatingWebhookConfiguration",
        generator
            .subschema_for::<admissionregistration::v1::ValidatingWebhookConfiguration>()
            .to_value(),
    );
    add(
        "admissionregistration.k8s.io",
        "MutatingWebhookConfiguration",
        generator
            .subschema_for::<admissionregistration::v1::MutatingWebhookConfiguration>()
            .to_value(),
    );
    add(
            "apiregistration.k8s.io",
            "APIService",
            generator
                .subschema_for::<k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService>()
                .to_value(),
        );
    add(
        "node.k8s.io",
        "RuntimeClass",
        generator
            .subschema_for::<node::v1::RuntimeClass>()
            .to_value(),
    );
    add(
        "storage.k8s.io",
        "CSIDriver",
        generator
            .subschema_for::<storage::v1::CSIDriver>()
            .to_value(),
    );
    add(
        "storage.k8s.io",
        "CSINode",
        generator.subschema_for::<storage::v1::CSINode>().to_value(),
    );
    add(
        "storage.k8s.io",
        "VolumeAttachment",
        generator
            .subschema_for::<storage::v1::VolumeAttachment>()
            .to_value(),
    );
    add(
        "storage.k8s.io",
        "CSIStorageCapacity",
        generator
            .subschema_for::<storage::v1::CSIStorageCapacity>()
            .to_value(),
    );
    add(
        "apps",
        "ControllerRevision",
        generator
            .subschema_for::<apps::v1::ControllerRevision>()
            .to_value(),
    );
    add(
        "admissionregistration.k8s.io",
        "ValidatingAdmissionPolicy",
        generator
            .subschema_for::<admissionregistration::v1::ValidatingAdmissionPolicy>()
            .to_value(),
    );
    add(
        "admissionregistration.k8s.io",
        "ValidatingAdmissionPolicyBinding",
        generator
            .subschema_for::<admissionregistration::v1::ValidatingAdmissionPolicyBinding>()
            .to_value(),
    );
    add(
        "flowcontrol.apiserver.k8s.io",
        "FlowSchema",
        generator
            .subschema_for::<flowcontrol::v1::FlowSchema>()
            .to_value(),
    );
    add(
        "flowcontrol.apiserver.k8s.io",
        "PriorityLevelConfiguration",
        generator
            .subschema_for::<flowcontrol::v1::PriorityLevelConfiguration>()
            .to_value(),
    );
    if !strip {
        // Documented (OpenAPI, `kubectl explain`) but not checked on writes: a CRD's body is
        // checked by `crd` and `crd_schema`, whose `JSONSchemaProps` holds free-form JSON.
        add(
            "apiextensions.k8s.io",
            "CustomResourceDefinition",
            generator
                .subschema_for::<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>()
                .to_value(),
        );
        // The create-only kinds kube-apiserver publishes (the reviews, core `Binding`): the
        // server answers them without storing them (`http::review`, `http::pods`).
        use k8s_openapi::api::{authentication, authorization};
        add(
            "",
            "Binding",
            generator.subschema_for::<core::v1::Binding>().to_value(),
        );
        add(
            "authentication.k8s.io",
            "TokenReview",
            generator
                .subschema_for::<authentication::v1::TokenReview>()
                .to_value(),
        );
        add(
            "authentication.k8s.io",
            "SelfSubjectReview",
            generator
                .subschema_for::<authentication::v1::SelfSubjectReview>()
                .to_value(),
        );
        add(
            "authorization.k8s.io",
            "SubjectAccessReview",
            generator
                .subschema_for::<authorization::v1::SubjectAccessReview>()
                .to_value(),
        );
        add(
            "authorization.k8s.io",
            "SelfSubjectAccessReview",
            generator
                .subschema_for::<authorization::v1::SelfSubjectAccessReview>()
                .to_value(),
        );
        add(
            "authorization.k8s.io",
            "LocalSubjectAccessReview",
            generator
                .subschema_for::<authorization::v1::LocalSubjectAccessReview>()
                .to_value(),
        );
        add(
            "authorization.k8s.io",
            "SelfSubjectRulesReview",
            generator
                .subschema_for::<authorization::v1::SelfSubjectRulesReview>()
                .to_value(),
        );
    }
    let mut definitions = generator.take_definitions(false);
    // kube publishes the CRD schema's free-form values (`JSON`, `JSONSchemaPropsOr*`, which
    // marshal themselves) with their description alone: any JSON (k8s-openapi's derive
    // gives them a type or a `oneOf`).
    for name in [
        "JSON",
        "JSONSchemaPropsOrArray",
        "JSONSchemaPropsOrBool",
        "JSONSchemaPropsOrStringArray",
    ] {
        let name = format!("io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.{name}");
        if let Some(Value::Object(definition)) = definitions.get_mut(&name) {
            definition.retain(|key, _| key == "description");
        }
    }
    if strip {
        for definition in definitions.values_mut() {
            strip_descriptions(definition);
        }
    }
    add_markers(&mut definitions, &markers());
    Schemas { definitions, roots }
}

/// The name of a kind's root definition (`io.k8s.api.batch.v1.Job`) for built-in kinds,
/// `CustomResourceDefinition` and the create-only kinds; `None` for custom resources and kinds
/// without a published schema.
#[must_use]
pub fn root_definition(def: &ResourceDef) -> Option<&'static str> {
    if crate::discovery::is_create_only(def) || crate::crd::is_crd(def) {
        // In the documented definitions alone, under the names `openapi_definitions` adds
        // them by: the create-only kinds are never written, and a CRD's body is checked by
        // `crd` (its operations named `io.k8s.apiextensions.v1.…`, a schema the document
        // did not carry).
        return documented_schemas().root(def).map(String::as_str);
    }
    if !def.is_builtin() {
        return None;
    }
    schemas().root(def).map(String::as_str)
}

/// The published schema of a built-in kind for an OpenAPI v3 document: its root definition's
/// name and every definition it reaches (itself included), with descriptions and Kubernetes'
/// markers, their references rewritten to `#/components/schemas/<name>`. `None` for custom
/// resources and kinds without a published schema.
#[must_use]
pub fn openapi_definitions(def: &ResourceDef) -> Option<(String, Map<String, Value>)> {
    if !def.is_builtin() && !crate::crd::is_crd(def) && !crate::discovery::is_create_only(def) {
        return None;
    }
    let schemas = documented_schemas();
    let root = schemas.root(def)?;
    fn rewrite(value: &mut Value, found: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                if let Some(Value::String(reference)) = map.get_mut("$ref") {
                    let name = reference.rsplit('/').next().unwrap_or_default().to_owned();
                    *reference = format!("#/components/schemas/{name}");
                    found.push(name);
                }
                map.values_mut().for_each(|child| rewrite(child, found));
            }
            Value::Array(items) => items.iter_mut().for_each(|child| rewrite(child, found)),
            _ => {}
        }
    }
    let mut reached = Map::new();
    let mut pending = vec![root.clone()];
    while let Some(name) = pending.pop() {
        if reached.contains_key(&name) {
            continue;
        }
        let Some(mut definition) = schemas.definitions.get(&name).cloned() else {
            continue;
        };
        rewrite(&mut definition, &mut pending);
        reached.insert(name, definition);
    }
    Some((root.clone(), reached))
}

/// Kubernetes' list, map and patch markers of the definitions the served kinds reach
/// (`x-kubernetes-list-type`, `x-kubernetes-list-map-keys`, `x-kubernetes-map-type`,
/// `x-kubernetes-patch-merge-key`, `x-kubernetes-patch-strategy`), extracted from Kubernetes'
/// published OpenAPI document of v1.33 by `data/extract-markers.py` (its `origin` entry says
/// from where; Apache-2.0). k8s-openapi's schemas leave these extensions out.
const MARKERS: &str = include_str!("../data/kubernetes-markers.json");

/// The `definitions` of [`MARKERS`]: definition name → its own markers and `properties` →
/// field → the field's markers.
fn markers() -> Map<String, Value> {
    match serde_json::from_str::<Value>(MARKERS) {
        Ok(Value::Object(mut document)) => match document.remove("definitions") {
            Some(Value::Object(definitions)) => definitions,
            _ => Map::new(),
        },
        _ => Map::new(),
    }
}

/// Writes the markers into the definitions: a definition's own (`x-kubernetes-map-type:
/// atomic` of an atomic struct) into the definition, a field's into its property node, as
/// Kubernetes' OpenAPI documents carry them.
fn add_markers(definitions: &mut Map<String, Value>, markers: &Map<String, Value>) {
    for (name, entry) in markers {
        let (Some(Value::Object(definition)), Value::Object(entry)) =
            (definitions.get_mut(name), entry)
        else {
            continue;
        };
        for (key, value) in entry {
            if key == "properties" {
                continue;
            }
            definition.insert(key.clone(), value.clone());
        }
        let (Some(Value::Object(fields)), Some(Value::Object(properties))) =
            (entry.get("properties"), definition.get_mut("properties"))
        else {
            continue;
        };
        for (field, field_markers) in fields {
            if let (Some(Value::Object(node)), Value::Object(field_markers)) =
                (properties.get_mut(field), field_markers)
            {
                node.extend(field_markers.clone());
            }
        }
    }
}

/// The Go type name of a definition: its package's last element and the type name
/// (`io.k8s.api.core.v1.Container` → `v1.Container`).
fn go_type_of_definition(name: &str) -> String {
    let mut parts = name.rsplit('.');
    let type_name = parts.next().unwrap_or(name);
    match parts.next() {
        Some(package) => format!("{package}.{type_name}"),
        None => type_name.to_owned(),
    }
}

/// The short name of a definition (`io.k8s.api.core.v1.PodSpec` → `PodSpec`), as Go names the
/// struct in `Go struct field PodSpec.spec.containers`.
fn struct_name_of_definition(name: &str) -> &str {
    name.rsplit('.').next().unwrap_or(name)
}

/// What a schema node decodes as.
#[derive(Clone, Copy)]
enum Shape<'a> {
    /// `interface{}`, `FieldsV1`, `RawExtension`: anything.
    Any,
    Bool,
    Int32,
    Int64,
    Float,
    String,
    /// `[]byte`: a base64 string.
    Bytes,
    /// `metav1.Time` / `MicroTime`: an RFC 3339 string (own decoder).
    Time,
    /// `resource.Quantity` (own decoder).
    Quantity,
    /// `intstr.IntOrString` (own decoder).
    IntOrString,
    Array(&'a Value),
    Map(&'a Value),
    /// A struct: its definition name (empty when inline) and its properties.
    Struct(&'a str, &'a Map<String, Value>),
}

struct Walk<'a> {
    definitions: &'a Map<String, Value>,
    /// JSON field names from the root (Go's error context field stack).
    path: Vec<&'a str>,
    /// The first type mismatch (Go saves it and keeps decoding).
    first: Option<String>,
    /// The object walked and the JSON text it was read from, when known: a float in an
    /// integer field is then judged and quoted by its literal, as Go's decoder does
    /// ([`Walk::literal`]).
    source: Option<(&'a Map<String, Value>, Literals<'a>)>,
    /// Whether the walk met something [`prune_unknown_fields`] changes: a field the schema
    /// does not declare, a quantity not in its canonical form, a time not as Kubernetes
    /// writes it (set by [`Walk::check`]).
    prunes: bool,
}

/// The JSON text a walked object's numbers were sent in (see [`Walk::source`]).
#[derive(Clone, Copy, Debug)]
pub enum Literals<'a> {
    /// A text holding each number at the object's path: a body, a JSON merge patch.
    Same(&'a [u8]),
    /// A JSON patch: a number stands under the operation that placed it
    /// (`json_pointer::json_patch_literal`).
    JsonPatch(&'a [u8]),
}

/// A schema node's [`Shape`] and, when it was a reference, the definition's name.
type Classified<'a> = (Shape<'a>, Option<&'a str>);

/// Every node of the built-in definitions a walk classifies (each definition, and the
/// properties, items and map values inside it), classified once, by the node's address: the
/// walks run over every field of every written object, and classifying a node is a
/// definition look-up by its long name (`io.k8s.api.core.v1.…`, compared byte by byte down a
/// tree of ~700) and up to five key look-ups in the node. The definitions live as long as
/// the process, so their addresses are stable keys.
fn classified() -> &'static ByAddress<Classified<'static>> {
    static CLASSIFIED: OnceLock<ByAddress<Classified<'static>>> = OnceLock::new();
    CLASSIFIED.get_or_init(|| {
        let walk = Walk {
            definitions: &schemas().definitions,
            path: Vec::new(),
            first: None,
            source: None,
            prunes: false,
        };
        let mut out = ByAddress::default();
        each_definition_node(|node| {
            out.insert(address(node), walk.classify(node));
        });
        out
    })
}

/// Calls `f` with every schema node of the built-in definitions a walk can stand on: each
/// definition, and the properties, list items and map values inside it, however deep (the
/// definitions are trees: a `$ref` is a name, not a link, so each node comes once).
pub(crate) fn each_definition_node(mut f: impl FnMut(&'static Value)) {
    each_definition_node_with_twin(&schemas().definitions, |node, _| f(node));
}

/// [`each_definition_node`], with each node's twin at the same place in `twins` (a copy of
/// the definitions: the tables' tests compare a kept node's answer with working it out on the
/// copy, whose nodes no table holds). Places `twins` lacks are skipped.
pub(crate) fn each_definition_node_with_twin<'b>(
    twins: &'b Map<String, Value>,
    mut f: impl FnMut(&'static Value, &'b Value),
) {
    fn visit<'b>(
        node: &'static Value,
        twin: &'b Value,
        f: &mut dyn FnMut(&'static Value, &'b Value),
    ) {
        let (Value::Object(map), Value::Object(twin_map)) = (node, twin) else {
            return;
        };
        f(node, twin);
        for key in ["items", "additionalProperties"] {
            if let (Some(child), Some(twin)) = (map.get(key), twin_map.get(key)) {
                visit(child, twin, f);
            }
        }
        if let (Some(Value::Object(properties)), Some(Value::Object(twins))) =
            (map.get("properties"), twin_map.get("properties"))
        {
            for (name, property) in properties {
                if let Some(twin) = twins.get(name) {
                    visit(property, twin, f);
                }
            }
        }
    }
    for (name, definition) in &schemas().definitions {
        if let Some(twin) = twins.get(name) {
            visit(definition, twin, &mut f);
        }
    }
}

/// A node's address, the key of the tables of classified nodes.
pub(crate) fn address(node: &Value) -> usize {
    std::ptr::from_ref(node).addr()
}

/// A table of classified nodes by [`address`]: hashed with one multiplication, not the
/// default SipHash (~140 instructions a look-up; a write looks up ~50 nodes). The keys are
/// the addresses of the process's own definitions, fixed at their first use: no client
/// chooses them, so a hash that resists chosen keys buys nothing here.
pub(crate) type ByAddress<V> = HashMap<usize, V, std::hash::BuildHasherDefault<AddressHasher>>;

/// The hasher of [`ByAddress`]: the address times a large odd constant (Fibonacci hashing),
/// its halves swapped: the product's high half, which every bit of the address mixes into,
/// becomes the low bits the table picks a bucket by (addresses are aligned, so the product's
/// own low bits are poor: its lowest four are zero).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct AddressHasher(u64);

impl std::hash::Hasher for AddressHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `usize` keys are hashed here; any other bytes are still hashed, byte by byte.
        for byte in bytes {
            self.write_u64(self.0.rotate_left(8) ^ u64::from(*byte));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(32);
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

impl<'a> Walk<'a> {
    /// Follows `$ref` and classifies a schema node; the second value is the definition name
    /// when it was a reference. Nodes of the built-in definitions come classified
    /// ([`classified`]).
    fn shape(&self, schema: &'a Value) -> Classified<'a> {
        if !self.definitions.is_empty()
            && std::ptr::eq(self.definitions, &schemas().definitions)
            && let Some(&known) = classified().get(&address(schema))
        {
            return known;
        }
        self.classify(schema)
    }

    /// [`Walk::shape`], worked out.
    fn classify(&self, schema: &'a Value) -> Classified<'a> {
        let mut name = None;
        let mut node = schema;
        if let Some(reference) = ref_name(schema) {
            name = Some(reference);
            match self.definitions.get(reference) {
                Some(definition) => node = definition,
                None => return (Shape::Any, name),
            }
        }
        if let Some(name) = name {
            let short = struct_name_of_definition(name);
            match short {
                "Quantity" => return (Shape::Quantity, Some(name)),
                "IntOrString" => return (Shape::IntOrString, Some(name)),
                "Time" | "MicroTime" => return (Shape::Time, Some(name)),
                "FieldsV1" | "RawExtension" | "JSON" => return (Shape::Any, Some(name)),
                _ => {}
            }
        }
        if node
            .get("x-kubernetes-int-or-string")
            .and_then(Value::as_bool)
            == Some(true)
        {
            return (Shape::IntOrString, name);
        }
        let shape = match node.get("type").and_then(Value::as_str) {
            Some("boolean") => Shape::Bool,
            Some("integer") => match node.get("format").and_then(Value::as_str) {
                Some("int32") => Shape::Int32,
                _ => Shape::Int64,
            },
            Some("number") => Shape::Float,
            Some("string") => match node.get("format").and_then(Value::as_str) {
                Some("byte") => Shape::Bytes,
                _ => Shape::String,
            },
            Some("array") => match node.get("items") {
                Some(items) => Shape::Array(items),
                None => Shape::Any,
            },
            Some("object") => {
                if let Some(Value::Object(properties)) = node.get("properties") {
                    Shape::Struct(name.unwrap_or(""), properties)
                } else if let Some(values) =
                    node.get("additionalProperties").filter(|v| v.is_object())
                {
                    Shape::Map(values)
                } else {
                    Shape::Any
                }
            }
            _ => Shape::Any,
        };
        (shape, name)
    }

    /// The Go type of a schema node, as `encoding/json` prints it in errors.
    fn go_type(&self, schema: &'a Value) -> String {
        let (shape, name) = self.shape(schema);
        match shape {
            Shape::Any => name.map_or_else(|| "interface {}".to_owned(), go_type_of_definition),
            Shape::Bool => "bool".to_owned(),
            Shape::Int32 => "int32".to_owned(),
            Shape::Int64 => "int64".to_owned(),
            Shape::Float => "float64".to_owned(),
            Shape::String => "string".to_owned(),
            Shape::Bytes => "[]uint8".to_owned(),
            Shape::Array(items) => format!("[]{}", self.go_type(items)),
            Shape::Map(values) => format!("map[string]{}", self.go_type(values)),
            Shape::Time | Shape::Quantity | Shape::IntOrString | Shape::Struct(..) => {
                name.map_or_else(|| "struct".to_owned(), go_type_of_definition)
            }
        }
    }

    fn mismatch(&mut self, struct_name: &str, value: &str, schema: &'a Value) {
        if self.first.is_none() {
            let go_type = self.go_type(schema);
            self.first = Some(format!(
                "json: cannot unmarshal {value} into Go struct field {struct_name}.{} of type {go_type}",
                self.path.join(".")
            ));
        }
    }

    fn soft(&mut self, message: String) {
        if self.first.is_none() {
            self.first = Some(message);
        }
    }

    /// Checks `value` against `schema`; `struct_name` is the innermost struct being decoded.
    /// `Err` is a failure that stops decoding at once (a type's own decoder failed).
    fn check(
        &mut self,
        struct_name: &'a str,
        schema: &'a Value,
        value: &'a Value,
    ) -> Result<(), String> {
        if value.is_null() {
            return Ok(());
        }
        let (shape, name) = self.shape(schema);
        match shape {
            Shape::Any => {}
            Shape::Bool => {
                if !value.is_boolean() {
                    self.mismatch(struct_name, crate::go_json::go_kind(value), schema);
                }
            }
            Shape::Int32 | Shape::Int64 => {
                let fits = match value {
                    Value::Number(n) if n.is_f64() => match self.literal(value) {
                        // Go's `strconv.ParseInt` reads the literal, or refuses it as sent.
                        Some(text) => {
                            if !integer_literal_fits(text, matches!(shape, Shape::Int32)) {
                                self.mismatch(struct_name, &format!("number {text}"), schema);
                            }
                            return Ok(());
                        }
                        None => negative_zero(n),
                    },
                    Value::Number(n) => match shape {
                        Shape::Int32 => n.as_i64().is_some_and(|i| i32::try_from(i).is_ok()),
                        _ => n.as_i64().is_some(),
                    },
                    _ => {
                        self.mismatch(struct_name, crate::go_json::go_kind(value), schema);
                        return Ok(());
                    }
                };
                if !fits {
                    let text = format!("number {value}");
                    self.mismatch(struct_name, &text, schema);
                }
            }
            Shape::Float => {
                if !value.is_number() {
                    self.mismatch(struct_name, crate::go_json::go_kind(value), schema);
                }
            }
            Shape::String => {
                if !value.is_string() {
                    self.mismatch(struct_name, crate::go_json::go_kind(value), schema);
                }
            }
            Shape::Bytes => match value {
                Value::String(text) => {
                    if let Some(offset) = base64_error_offset(text) {
                        self.soft(format!("illegal base64 data at input byte {offset}"));
                    }
                }
                _ => self.mismatch(struct_name, crate::go_json::go_kind(value), schema),
            },
            Shape::Time => match value {
                Value::String(text) => {
                    let micro = name.is_some_and(|n| n.ends_with(".MicroTime"));
                    if micro {
                        // Six fractional digits exactly, as Go's `RFC3339Micro` reads them.
                        if let Some(error) = crate::time::micro_time_parse_error(text) {
                            return Err(error);
                        }
                    } else if crate::time::unix_from_rfc3339(text).is_none() {
                        return Err(format!(
                            "parsing time {text:?} as \"2006-01-02T15:04:05Z07:00\": cannot parse {text:?} as \"2006\""
                        ));
                    }
                    self.prunes |= crate::time::normalizes_rfc3339(text, micro);
                }
                other => {
                    return Err(format!(
                        "json: cannot unmarshal {} into Go value of type string",
                        crate::go_json::go_kind(other)
                    ));
                }
            },
            Shape::Quantity => {
                let text = match value {
                    Value::String(s) => s.trim().to_owned(),
                    other => other.to_string(),
                };
                check_quantity(&text)?;
                // What the pruning walk writes back: the canonical form of the text as sent
                // (a number always becomes a string).
                self.prunes |= match value {
                    Value::String(sent) => {
                        crate::quantity::canonical(sent).is_some_and(|canonical| canonical != *sent)
                    }
                    Value::Number(_) => crate::quantity::canonical(&text).is_some(),
                    _ => false,
                };
            }
            Shape::IntOrString => match value {
                Value::String(_) => {}
                Value::Number(n) if n.is_f64() && self.source.is_some() => {
                    if let Some(text) = self.literal(value)
                        && !integer_literal_fits(text, true)
                    {
                        return Err(format!(
                            "json: cannot unmarshal number {text} into Go value of type int32"
                        ));
                    }
                }
                Value::Number(n)
                    if negative_zero(n) || n.as_i64().is_some_and(|i| i32::try_from(i).is_ok()) => {
                }
                Value::Number(_) => {
                    return Err(format!(
                        "json: cannot unmarshal number {value} into Go value of type int32"
                    ));
                }
                other => {
                    return Err(format!(
                        "json: cannot unmarshal {} into Go value of type int32",
                        crate::go_json::go_kind(other)
                    ));
                }
            },
            Shape::Array(items) => match value {
                Value::Array(elements) => {
                    for element in elements {
                        self.check(struct_name, items, element)?;
                    }
                }
                _ => self.mismatch(struct_name, crate::go_json::go_kind(value), schema),
            },
            Shape::Map(values) => match value {
                Value::Object(entries) => {
                    for entry in entries.values() {
                        self.check(struct_name, values, entry)?;
                    }
                }
                _ => self.mismatch(struct_name, crate::go_json::go_kind(value), schema),
            },
            Shape::Struct(name, properties) => match value {
                Value::Object(fields) => {
                    let inner = if name.is_empty() {
                        struct_name
                    } else {
                        struct_name_of_definition(name)
                    };
                    self.check_fields(inner, properties, fields)?;
                }
                _ => self.mismatch(struct_name, crate::go_json::go_kind(value), schema),
            },
        }
        Ok(())
    }

    fn check_fields(
        &mut self,
        struct_name: &'a str,
        properties: &'a Map<String, Value>,
        fields: &'a Map<String, Value>,
    ) -> Result<(), String> {
        for (key, value) in fields {
            if let Some(schema) = properties.get(key) {
                self.path.push(key);
                let result = self.check(struct_name, schema, value);
                self.path.pop();
                result?;
            } else {
                // Go's decoder drops it; so does the pruning walk.
                self.prunes = true;
            }
        }
        Ok(())
    }
}

/// Whether Go's `strconv.ParseInt` reads the number literal `text` into an int32 (`int32`) or
/// an int64: `-0` is 0; `1.0`, `-0.0`, `1e2` and integers past the type are refused.
fn integer_literal_fits(text: &str, int32: bool) -> bool {
    match text.parse::<i64>() {
        Ok(integer) => !int32 || i32::try_from(integer).is_ok(),
        Err(_) => false,
    }
}

impl<'a> Walk<'a> {
    /// The literal `value` (a node of the walked object) was sent as, when the walk knows its
    /// text ([`Walk::source`]): found by its address from the root, then by its path in the
    /// text. Runs only for a float met in an integer field.
    fn literal(&self, value: &Value) -> Option<&'a str> {
        let (root, literals) = self.source?;
        let path = path_to(root, value)?;
        match literals {
            Literals::Same(text) => crate::go_json::literal_at(text, &path),
            Literals::JsonPatch(patch) => {
                crate::json_pointer::json_patch_literal(patch, &path, value.as_f64()?)
            }
        }
    }
}

/// The path from `root` to the node at `target`'s address, without recursion.
fn path_to<'v>(
    root: &'v Map<String, Value>,
    target: &Value,
) -> Option<Vec<crate::go_json::PathStep<'v>>> {
    use crate::go_json::PathStep;
    enum Frame<'v> {
        Object(serde_json::map::Iter<'v>),
        Array(std::iter::Enumerate<std::slice::Iter<'v, Value>>),
    }
    let mut frames = vec![Frame::Object(root.iter())];
    let mut path = Vec::new();
    while let Some(frame) = frames.last_mut() {
        let next = match frame {
            Frame::Object(entries) => entries
                .next()
                .map(|(key, value)| (PathStep::Key(key.as_str()), value)),
            Frame::Array(items) => items
                .next()
                .map(|(index, value)| (PathStep::Index(index), value)),
        };
        let Some((step, value)) = next else {
            frames.pop();
            path.pop();
            continue;
        };
        if std::ptr::eq(value, target) {
            path.push(step);
            return Some(path);
        }
        match value {
            Value::Object(map) => {
                path.push(step);
                frames.push(Frame::Object(map.iter()));
            }
            Value::Array(items) => {
                path.push(step);
                frames.push(Frame::Array(items.iter().enumerate()));
            }
            _ => {}
        }
    }
    None
}

/// Whether `n` is the float serde_json reads `-0` as: Go's `strconv.ParseInt` reads `-0` as the
/// integer 0, so an integer field takes it. serde_json reads `-0.0`, which Go refuses, the
/// same way: where the walk knows the body's text it tells them apart ([`Walk::literal`]);
/// elsewhere (a strategic merge patch's or an apply's result, which kube converts from a
/// map and which takes both) both are taken.
fn negative_zero(n: &serde_json::Number) -> bool {
    n.as_f64().is_some_and(|f| f == 0.0 && f.is_sign_negative()) && n.is_f64()
}

/// Where Go's `base64.StdEncoding` (which skips `\r` and `\n`) fails on `text`, if it does.
fn base64_error_offset(text: &str) -> Option<usize> {
    let cleaned: Vec<u8> = text
        .bytes()
        .filter(|b| *b != b'\r' && *b != b'\n')
        .collect();
    match base64::engine::general_purpose::STANDARD.decode(&cleaned) {
        Ok(_) => None,
        Err(base64::DecodeError::InvalidByte(offset, _))
        | Err(base64::DecodeError::InvalidLastSymbol(offset, _)) => Some(offset),
        Err(_) => Some(cleaned.len() - cleaned.len() % 4),
    }
}

const QUANTITY_FORMAT: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

/// `resource.ParseQuantity`'s acceptance, with its error messages.
fn check_quantity(text: &str) -> Result<(), String> {
    let bytes = text.as_bytes();
    let mut i = 0;
    if bytes.first().is_some_and(|b| *b == b'+' || *b == b'-') {
        i = 1;
    }
    let number_start = i;
    while i < bytes.len() && (bytes[i].is_ascii_digit() || bytes[i] == b'.') {
        i += 1;
    }
    if i == number_start {
        return Err(QUANTITY_FORMAT.to_owned());
    }
    let number = &text[number_start..i];
    let suffix = &text[i..];
    // The suffix must match `[eEinumkKMGTP]*[-+]?[0-9]*`.
    let letters = suffix
        .bytes()
        .take_while(|b| b"eEinumkKMGTP".contains(b))
        .count();
    let rest = &suffix[letters..];
    let rest = rest.strip_prefix(['+', '-']).unwrap_or(rest);
    if !rest.bytes().all(|b| b.is_ascii_digit()) {
        return Err(QUANTITY_FORMAT.to_owned());
    }
    if number.matches('.').count() > 1 || number == "." {
        return Err("unable to parse numeric part of quantity".to_owned());
    }
    let known = matches!(
        suffix,
        "" | "Ki"
            | "Mi"
            | "Gi"
            | "Ti"
            | "Pi"
            | "Ei"
            | "n"
            | "u"
            | "m"
            | "k"
            | "M"
            | "G"
            | "T"
            | "P"
            | "E"
    );
    let exponent = suffix.strip_prefix(['e', 'E']).is_some_and(|e| {
        let digits = e.strip_prefix(['+', '-']).unwrap_or(e);
        !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
    });
    if !known && !exponent {
        return Err("unable to parse quantity's suffix".to_owned());
    }
    Ok(())
}

/// Go's decoding error for `object` as the built-in kind `def`, or `None` when it decodes
/// (and for kinds without a built-in schema: custom resources).
#[must_use]
pub fn decode_error(def: &ResourceDef, object: &Value) -> Option<String> {
    decode_check(def, object, None).0
}

/// [`decode_error`], and whether [`prune_unknown_fields`] may change `object` or report a
/// field of it: `false` only when the check walked the whole object (it found no error) and
/// met no field the kind does not declare, no quantity out of its canonical form and no time
/// out of Kubernetes' layout, which is everything the pruning walk changes or reports (and
/// for kinds it leaves alone: custom resources, kinds without a published schema). One walk
/// for a patched object's two, as the pruning walk then has nothing to do.
fn decode_check(
    def: &ResourceDef,
    object: &Value,
    text: Option<Literals<'_>>,
) -> (Option<String>, bool) {
    match object {
        Value::Object(fields) => decode_check_fields(def, fields, text),
        // Neither walk reads into anything but an object.
        _ => (None, false),
    }
}

/// [`decode_check`] of an object's fields; `text` the JSON text they were read from, when
/// known (see [`Walk::source`]).
fn decode_check_fields(
    def: &ResourceDef,
    fields: &Map<String, Value>,
    text: Option<Literals<'_>>,
) -> (Option<String>, bool) {
    // Kinds the pruning walk leaves alone.
    let Some(schemas) = typed_schemas(def) else {
        return (None, false);
    };
    let Some((root, definition)) = schemas
        .root(def)
        .and_then(|root| Some((root, schemas.definitions.get(root)?)))
    else {
        return (None, false);
    };
    let Some(Value::Object(properties)) = definition.get("properties") else {
        // Not walked: the pruning walk may still find what to change.
        return (None, true);
    };
    let mut walk = Walk {
        definitions: &schemas.definitions,
        path: Vec::new(),
        first: None,
        source: text.map(|text| (fields, text)),
        prunes: false,
    };
    match walk.check_fields(struct_name_of_definition(root), properties, fields) {
        Err(message) => (Some(message), true),
        Ok(()) => {
            let prunes = walk.prunes || walk.first.is_some();
            (walk.first, prunes)
        }
    }
}

/// Every definition the built-in kinds reach (with their markers): custom resources'
/// `metadata` is typed by its `ObjectMeta`.
pub(crate) fn definitions() -> &'static Map<String, Value> {
    &schemas().definitions
}

/// The schema definitions of the built-in kinds and the root definition name of `def`'s kind
/// (`None` for custom resources and kinds without a published schema). Server-side apply walks
/// objects with them.
pub(crate) fn definitions_of(
    def: &ResourceDef,
) -> Option<(&'static Map<String, Value>, &'static str)> {
    if !def.is_builtin() {
        return None;
    }
    let schemas = schemas();
    let root = schemas.root(def)?;
    Some((&schemas.definitions, root.as_str()))
}

/// The documented definitions (descriptions kept) and the root of `def`'s kind: for the kinds
/// that only they carry (CustomResourceDefinitions, the create-only kinds).
#[cfg(test)]
pub(crate) fn documented_definitions_of(
    def: &ResourceDef,
) -> Option<(&'static Map<String, Value>, &'static str)> {
    let schemas = documented_schemas();
    let root = schemas.root(def)?;
    Some((&schemas.definitions, root.as_str()))
}

fn decode_error_fields(def: &ResourceDef, fields: &Map<String, Value>) -> Option<String> {
    decode_check_fields(def, fields, None)
        .0
        .or_else(|| events_v1_micro_time_error(def, fields))
}

/// An `events.k8s.io/v1` Event (served over core Events, without a write schema of its own
/// here) decodes its `eventTime` and `series.lastObservedTime` as `metav1.MicroTime`s: Go's
/// error for one it cannot read ([`crate::time::micro_time_parse_error`]).
fn events_v1_micro_time_error(def: &ResourceDef, fields: &Map<String, Value>) -> Option<String> {
    if def.group != "events.k8s.io" || def.plural != "events" {
        return None;
    }
    let series = fields
        .get("series")
        .and_then(|series| series.get("lastObservedTime"));
    [fields.get("eventTime"), series]
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .find_map(crate::time::micro_time_parse_error)
}

/// Removes from `object` every field its built-in kind's schema does not declare, as Go's
/// decoder into the kind's type drops them, and returns their paths in kube-apiserver's
/// strict-decoding form (`spec.template.spec.containers[0].foo`), in the order found (keys in
/// sorted order at each level). Free-form fields (`RawExtension`, `JSON`, `FieldsV1`,
/// `interface{}`) keep whatever they hold. Custom resources (pruned by their CRD's structural
/// schema) and kinds without a published schema are left alone: an empty list.
///
/// The same walk writes quantities and times back as Go's types write them: a
/// `resource.Quantity` in its canonical form ([`crate::quantity::canonical`]), a `metav1.Time`
/// (`MicroTime`) in UTC whole seconds (microseconds); a value it cannot read is left for the
/// decode check.
pub fn prune_unknown_fields(def: &ResourceDef, object: &mut Value) -> Vec<String> {
    let mut unknown = Vec::new();
    let Some(schemas) = typed_schemas(def) else {
        return unknown;
    };
    let Some(root) = schemas.root(def) else {
        return unknown;
    };
    let Some(schema) = schemas.definitions.get(root) else {
        return unknown;
    };
    let walk = Walk {
        definitions: &schemas.definitions,
        path: Vec::new(),
        first: None,
        source: None,
        prunes: false,
    };
    let mut path = String::new();
    prune(&walk, schema, object, &mut path, &mut unknown);
    unknown
}

fn prune<'a>(
    walk: &Walk<'a>,
    schema: &'a Value,
    value: &mut Value,
    path: &mut String,
    unknown: &mut Vec<String>,
) {
    let (shape, name) = walk.shape(schema);
    let start = path.len();
    match (shape, value) {
        (Shape::Quantity, quantity @ (Value::String(_) | Value::Number(_))) => {
            // Written back in kube's canonical form (`0.5` is `500m`, `1024Mi` is `1Gi`).
            let text = match &*quantity {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            };
            if let Some(canonical) = crate::quantity::canonical(&text) {
                *quantity = Value::String(canonical);
            }
        }
        (Shape::Time, Value::String(text)) => {
            // Kubernetes writes times back in UTC, whole seconds (`MicroTime`: microseconds),
            // whatever offset or precision the client sent.
            // A micro time Go's `RFC3339Micro` does not read is left as sent, for the decode
            // check to refuse.
            let micro = name.is_some_and(|n| n.ends_with(".MicroTime"));
            if !micro || crate::time::micro_time_parse_error(text).is_none() {
                crate::time::normalize_rfc3339(text, micro);
            }
        }
        (Shape::Struct(_, properties), Value::Object(fields)) => {
            // Depth-first in key order, as Go's decoder meets them in (sorted) text.
            let mut dropped = Vec::new();
            for (key, field) in fields.iter_mut() {
                if start > 0 {
                    path.push('.');
                }
                path.push_str(key);
                match properties.get(key) {
                    Some(field_schema) => prune(walk, field_schema, field, path, unknown),
                    None => {
                        unknown.push(path.clone());
                        dropped.push(key.clone());
                    }
                }
                path.truncate(start);
            }
            for key in dropped {
                fields.remove(&key);
            }
        }
        (Shape::Array(items), Value::Array(elements)) => {
            for (index, element) in elements.iter_mut().enumerate() {
                use std::fmt::Write as _;
                let _ = write!(path, "[{index}]");
                prune(walk, items, element, path, unknown);
                path.truncate(start);
            }
        }
        (Shape::Map(values), Value::Object(entries)) => {
            for (key, entry) in entries.iter_mut() {
                if start > 0 {
                    path.push('.');
                }
                path.push_str(key);
                prune(walk, values, entry, path, unknown);
                path.truncate(start);
            }
        }
        _ => {}
    }
}

/// A field a strict decoder reports in a JSON body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StrictField {
    /// A field the kind does not declare (`unknown field "spec.x"`).
    Unknown(String),
    /// A declared field given twice in one object (`duplicate field "spec.x"`); the last value
    /// is the one kept, as in Go.
    Duplicate(String),
    /// A field of a JSON patch's operations (`json patch unknown field "[0].foo"`,
    /// `json patch duplicate field "[1].path"`).
    JsonPatch(Box<StrictField>),
}

impl std::fmt::Display for StrictField {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StrictField::Unknown(path) => write!(f, "unknown field {path:?}"),
            StrictField::Duplicate(path) => write!(f, "duplicate field {path:?}"),
            StrictField::JsonPatch(field) => write!(f, "json patch {field}"),
        }
    }
}

/// The unknown and duplicate fields of a JSON body of a built-in kind, in the order of its
/// text, as kube-apiserver's strict decoder reports them (`duplicate field "metadata.name"`,
/// `unknown field "spec.x"`, ...; a field both unknown and duplicated is reported once, as
/// unknown). `None` when the body is not JSON this walk can read (the caller falls back to
/// [`prune_unknown_fields`]' list) or the kind has no schema here.
#[must_use]
pub fn strict_fields(def: &ResourceDef, body: &[u8]) -> Option<Vec<StrictField>> {
    if !def.is_builtin() {
        return None;
    }
    let schemas = schemas();
    let root = schemas.root(def)?;
    let schema = schemas.definitions.get(root)?;
    strict_walk(&schemas.definitions, Node::Schema(schema), body)
}

/// The duplicate fields of a JSON body decoded without a schema (Go's strict decoding into
/// `map[string]interface{}`: a merge or strategic merge patch, a custom resource), in the
/// order of its text: `duplicate field "spec.paused"`, with list positions
/// (`spec.containers[0].name`). `None` when the body is not JSON.
#[must_use]
pub fn duplicate_fields(body: &[u8]) -> Option<Vec<StrictField>> {
    strict_walk(&Map::new(), Node::Free, body)
}

/// [`duplicate_fields`], none for a body that is not JSON: a body in which no object repeats a
/// key as written ([`keys_unrepeated`]) has none and is not walked (the walk decodes every
/// value of a merge patch a second time, beside the patch's own parse).
#[must_use]
pub fn duplicate_fields_or_none(body: &[u8]) -> Vec<StrictField> {
    if keys_unrepeated(body) {
        return Vec::new();
    }
    duplicate_fields(body).unwrap_or_default()
}

/// The most keys of one object [`keys_unrepeated`] compares; a larger object is left to the
/// walk (its comparisons grow with the square of the keys).
const UNREPEATED_KEYS_MAX: usize = 16;

/// The most keys of the objects open at once, and the deepest nesting, [`keys_unrepeated`]
/// follows (on the stack: a patch's scan allocates nothing); a larger body is left to the walk.
const UNREPEATED_OPEN_KEYS_MAX: usize = 64;
const UNREPEATED_DEPTH_MAX: usize = 32;

/// Whether no object of the JSON text `body` repeats a key, as its bytes are written: `true`
/// only when that is certain, so that [`duplicate_fields`] has nothing to report (or `body`
/// is not JSON, which it reports as `None`). A key written with an escape (`"\u0061"` is
/// `"a"`), an object of more than [`UNREPEATED_KEYS_MAX`] keys, more nesting or open keys
/// than it follows, a repeated key or a text it cannot follow answers `false`. Reads each
/// byte once.
fn keys_unrepeated(body: &[u8]) -> bool {
    // Per open object or array: whether it is an object, and where its keys start in `keys`.
    let mut open = [(false, 0usize); UNREPEATED_DEPTH_MAX];
    let mut depth = 0;
    let mut keys: [&[u8]; UNREPEATED_OPEN_KEYS_MAX] = [&[]; UNREPEATED_OPEN_KEYS_MAX];
    let mut key_count = 0;
    // Whether the next string is a key (after `{` or an object's `,`).
    let mut key_next = false;
    let mut at = 0;
    while at < body.len() {
        match body[at] {
            opening @ (b'{' | b'[') => {
                let Some(slot) = open.get_mut(depth) else {
                    return false;
                };
                *slot = (opening == b'{', key_count);
                depth += 1;
                key_next = opening == b'{';
            }
            b'}' | b']' => {
                let Some(below) = depth.checked_sub(1) else {
                    return false;
                };
                depth = below;
                key_count = open[depth].1;
                key_next = false;
            }
            b',' => key_next = depth > 0 && open[depth - 1].0,
            b'"' => {
                let start = at + 1;
                let mut end = start;
                let mut escaped = false;
                loop {
                    match body.get(end) {
                        None => return false,
                        Some(b'"') => break,
                        Some(b'\\') => {
                            escaped = true;
                            end += 2;
                        }
                        Some(_) => end += 1,
                    }
                }
                if key_next {
                    let Some(&(true, first)) = depth.checked_sub(1).and_then(|top| open.get(top))
                    else {
                        return false;
                    };
                    let key = &body[start..end];
                    if escaped
                        || key_count - first >= UNREPEATED_KEYS_MAX
                        || keys[first..key_count].contains(&key)
                    {
                        return false;
                    }
                    let Some(slot) = keys.get_mut(key_count) else {
                        return false;
                    };
                    *slot = key;
                    key_count += 1;
                    key_next = false;
                }
                at = end;
            }
            _ => {}
        }
        at += 1;
    }
    depth == 0
}

/// The strict-decoding errors of a JSON patch's operations, as kube-apiserver reports them
/// when it decodes the patch into its operation type (`op`, `path`, `from`, `value`): `json
/// patch unknown field "[0].foo"`, `json patch duplicate field "[1].path"`, in the order of
/// the text. `None` when the body is not JSON.
#[must_use]
pub fn json_patch_fields(body: &[u8]) -> Option<Vec<StrictField>> {
    let fields = strict_walk(&Map::new(), Node::Operations, body)?;
    Some(
        fields
            .into_iter()
            .map(|field| StrictField::JsonPatch(Box::new(field)))
            .collect(),
    )
}

fn strict_walk(
    definitions: &Map<String, Value>,
    node: Node<'_>,
    body: &[u8],
) -> Option<Vec<StrictField>> {
    use serde::de::DeserializeSeed as _;
    let walk = Walk {
        definitions,
        path: Vec::new(),
        first: None,
        source: None,
        prunes: false,
    };
    let mut path = String::new();
    let mut found = Vec::new();
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    StrictSeed {
        walk: &walk,
        node,
        path: &mut path,
        found: &mut found,
    }
    .deserialize(&mut deserializer)
    .ok()?;
    deserializer.end().ok()?;
    Some(found)
}

/// What a strict walk reads a value as.
#[derive(Clone, Copy)]
enum Node<'a> {
    /// A node of a kind's schema.
    Schema(&'a Value),
    /// `interface{}`: objects are maps (every key known) of free values.
    Free,
    /// A JSON patch: a list of operations.
    Operations,
    /// One JSON patch operation: `op`, `path`, `from` and a free `value`.
    Operation,
}

/// One value of a body, read against its schema node (see [`strict_fields`]).
struct StrictSeed<'w, 'a> {
    walk: &'w Walk<'a>,
    node: Node<'a>,
    path: &'w mut String,
    found: &'w mut Vec<StrictField>,
}

impl<'de> serde::de::DeserializeSeed<'de> for StrictSeed<'_, '_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for StrictSeed<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let items = match self.node {
            Node::Schema(schema) => match self.walk.shape(schema).0 {
                Shape::Array(items) => Some(Node::Schema(items)),
                _ => None,
            },
            Node::Free => Some(Node::Free),
            Node::Operations => Some(Node::Operation),
            Node::Operation => None,
        };
        let start = self.path.len();
        let mut index = 0usize;
        loop {
            let more = match items {
                Some(items) => {
                    use std::fmt::Write as _;
                    let _ = write!(self.path, "[{index}]");
                    let more = seq
                        .next_element_seed(StrictSeed {
                            walk: self.walk,
                            node: items,
                            path: &mut *self.path,
                            found: &mut *self.found,
                        })?
                        .is_some();
                    self.path.truncate(start);
                    more
                }
                None => seq.next_element::<serde::de::IgnoredAny>()?.is_some(),
            };
            if !more {
                return Ok(());
            }
            index += 1;
        }
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        // What a key names: `None` for a key this node does not declare, `Some(None)` for a
        // declared key whose value is not walked further.
        let (properties, values, fixed): (_, _, &[&str]) = match self.node {
            Node::Schema(schema) => match self.walk.shape(schema).0 {
                Shape::Struct(_, properties) => (Some(properties), None, &[]),
                Shape::Map(values) => (None, Some(Node::Schema(values)), &[]),
                _ => (None, None, &[]),
            },
            Node::Free => (None, Some(Node::Free), &[]),
            Node::Operation => (None, None, &["op", "path", "from", "value"]),
            Node::Operations => (None, None, &[]),
        };
        let walked = properties.is_some() || values.is_some() || !fixed.is_empty();
        let start = self.path.len();
        let mut seen = SeenKeys::default();
        while let Some(key) = map.next_key_seed(KeyText)? {
            if !walked {
                map.next_value::<serde::de::IgnoredAny>()?;
                continue;
            }
            if start > 0 {
                self.path.push('.');
            }
            self.path.push_str(&key);
            let first = seen.insert(key.clone());
            let node = match (properties, values) {
                (Some(properties), _) => properties.get(key.as_ref()).map(Node::Schema),
                (None, Some(values)) => Some(values),
                (None, None) if key == "value" => Some(Node::Free),
                (None, None) if fixed.contains(&key.as_ref()) => Some(Node::Operation),
                (None, None) => None,
            };
            match node {
                Some(node) => {
                    if !first {
                        self.found.push(StrictField::Duplicate(self.path.clone()));
                    }
                    let node = match node {
                        // `op`, `path` and `from` are strings: nothing below them.
                        Node::Operation => {
                            map.next_value::<serde::de::IgnoredAny>()?;
                            self.path.truncate(start);
                            continue;
                        }
                        other => other,
                    };
                    map.next_value_seed(StrictSeed {
                        walk: self.walk,
                        node,
                        path: &mut *self.path,
                        found: &mut *self.found,
                    })?;
                }
                None => {
                    if first {
                        self.found.push(StrictField::Unknown(self.path.clone()));
                    }
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
            self.path.truncate(start);
        }
        Ok(())
    }
}

/// A map key as the body's text holds it: borrowed from the body when it has no escapes
/// (serde's own `Cow<str>` is always a copy).
struct KeyText;

impl<'de> serde::de::DeserializeSeed<'de> for KeyText {
    type Value = std::borrow::Cow<'de, str>;

    fn deserialize<D: serde::Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> serde::de::Visitor<'de> for KeyText {
    type Value = std::borrow::Cow<'de, str>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a string")
    }

    fn visit_borrowed_str<E>(self, text: &'de str) -> Result<Self::Value, E> {
        Ok(std::borrow::Cow::Borrowed(text))
    }

    fn visit_str<E>(self, text: &str) -> Result<Self::Value, E> {
        Ok(std::borrow::Cow::Owned(text.to_owned()))
    }

    fn visit_string<E>(self, text: String) -> Result<Self::Value, E> {
        Ok(std::borrow::Cow::Owned(text))
    }
}

/// The keys of one map a strict walk has read: a list searched in order while the map is
/// small (most are: a patch names a few fields), a hash set from [`SeenKeys::FEW`] keys on, so
/// a map of many keys stays linear.
#[derive(Default)]
struct SeenKeys<'de> {
    few: Vec<std::borrow::Cow<'de, str>>,
    many: std::collections::HashSet<std::borrow::Cow<'de, str>>,
}

impl<'de> SeenKeys<'de> {
    /// Keys kept in the list before they move to the set.
    const FEW: usize = 16;

    /// Adds `key`; whether it was not there yet.
    fn insert(&mut self, key: std::borrow::Cow<'de, str>) -> bool {
        if self.many.is_empty() {
            if self.few.contains(&key) {
                return false;
            }
            if self.few.len() < Self::FEW {
                self.few.push(key);
                return true;
            }
            self.many.extend(self.few.drain(..));
        }
        self.many.insert(key)
    }
}

/// The strict-decoding message of `unknown` field paths (`unknown field "a", unknown field
/// "b"`), as kube-apiserver's `runtime.NewStrictDecodingError` words it.
#[must_use]
pub fn strict_decoding_error(unknown: &[String]) -> String {
    let fields: Vec<StrictField> = unknown.iter().cloned().map(StrictField::Unknown).collect();
    strict_message(&fields)
}

/// `strict decoding error: ` and the fields, comma-separated.
#[must_use]
pub fn strict_message(fields: &[StrictField]) -> String {
    let fields: Vec<String> = fields.iter().map(ToString::to_string).collect();
    format!("strict decoding error: {}", fields.join(", "))
}

/// What a server-side apply configuration with fields its kind does not declare gets, whatever
/// `fieldValidation` says: structured-merge-diff cannot make a typed value of it, and
/// kube-apiserver answers 500 (a plain error, no reason) `failed to create typed patch object
/// (default/name; /v1, Kind=ConfigMap): .x: field not declared in schema` (several: `errors:`
/// and one indented line each). Paths are written with element indexes where
/// structured-merge-diff names an associative list's element by its keys.
#[must_use]
pub fn apply_unknown_fields_error(
    def: &ResourceDef,
    namespace: &str,
    name: &str,
    unknown: &[String],
) -> ApiError {
    let lines: Vec<String> = unknown
        .iter()
        .map(|path| format!(".{path}: field not declared in schema"))
        .collect();
    let detail = match lines.as_slice() {
        [one] => one.clone(),
        many => format!("errors:\n  {}", many.join("\n  ")),
    };
    ApiError::new(
        500,
        "",
        format!(
            "failed to create typed patch object ({namespace}/{name}; {group}/{version}, Kind={kind}): {detail}",
            group = def.group,
            version = def.version,
            kind = def.kind
        ),
    )
}

/// The 400 a create or update body with unknown fields gets under `fieldValidation=Strict`:
/// `ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: unknown
/// field "x"` (kube-apiserver's `transformDecodeError`).
#[must_use]
pub fn strict_body_error(def: &ResourceDef, fields: &[StrictField]) -> ApiError {
    ApiError::bad_request(format!(
        "{kind} in version {version:?} cannot be handled as a {kind}: {}",
        strict_message(fields),
        kind = def.kind,
        version = def.version
    ))
}

/// Checks a create or update body: 400 BadRequest as kube-apiserver's
/// `transformDecodeError` words it when the body does not decode into the kind's Go type.
///
/// # Errors
/// The 400 described.
pub fn check_body(def: &ResourceDef, object: &Map<String, Value>) -> Result<(), ApiError> {
    match decode_error_fields(def, object) {
        None => Ok(()),
        Some(message) => Err(body_error(def, &message)),
    }
}

/// A create or update body of the built-in kind `def` as the JSON object it holds
/// ([`crate::go_json::decode_object`]), checked against the kind's Go type here when it holds
/// a number read as a float: Go's decoder judges a number in an integer field by its literal
/// (`-0` is 0; `-0.0`, `1.0`, `1e0` are refused, quoted as sent), which only the body's text
/// tells. A body without such a number is checked by [`check_body`] as before, at no cost.
///
/// # Errors
/// As [`crate::go_json::decode_object`] and [`check_body`].
pub fn decode_body(def: &ResourceDef, body: &[u8]) -> Result<Value, ApiError> {
    let (value, floats) =
        crate::go_json::decode_object_noting_floats(&def.kind, &def.version, body)?;
    if floats
        && let Value::Object(fields) = &value
        && let Some(message) = decode_check_fields(def, fields, Some(Literals::Same(body))).0
    {
        return Err(body_error(def, &message));
    }
    Ok(value)
}

/// kube's 400 for a create or update body of `def` that does not decode (`transformDecodeError`).
fn body_error(def: &ResourceDef, message: &str) -> ApiError {
    ApiError::bad_request(format!(
        "{kind} in version {version:?} cannot be handled as a {kind}: {message}",
        kind = def.kind,
        version = def.version
    ))
}

/// Whether [`prune_unknown_fields`] has anything to do with an object the decode check
/// passed (see [`check_patched`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pruning {
    /// It would leave the object as it is and report no field: the check's walk met every
    /// node the pruning walk would and nothing it changes.
    Nothing,
    /// It may change the object or report a field.
    Needed,
}

/// Checks a patched object: 422 Invalid with the cause `patch: Invalid value: "<object>":
/// <decode error>`, as kube-apiserver's patch handler answers when the patched object does
/// not decode; else whether the pruning walk has anything to do with it.
///
/// # Errors
/// The 422 described.
pub fn check_patched(def: &ResourceDef, object: &Value) -> Result<Pruning, ApiError> {
    check_patched_from(def, object, None)
}

/// [`check_patched`] of an object whose numbers were read from the JSON text `patch` (a JSON
/// merge patch's, at the same paths; a JSON patch's, under the operations that placed them:
/// kube decodes the patched bytes, which keep the patch's literals), so that a float in an
/// integer field is judged and quoted by its literal.
///
/// # Errors
/// As [`check_patched`].
pub fn check_patched_from(
    def: &ResourceDef,
    object: &Value,
    patch: Option<Literals<'_>>,
) -> Result<Pruning, ApiError> {
    let checked = match decode_check(def, object, patch) {
        (None, prunes) => match object {
            Value::Object(fields) => match events_v1_micro_time_error(def, fields) {
                Some(message) => (Some(message), true),
                None => (None, prunes),
            },
            _ => (None, prunes),
        },
        error => error,
    };
    match checked {
        (None, false) => Ok(Pruning::Nothing),
        (None, true) => Ok(Pruning::Needed),
        (Some(message), _) => Err(ApiError::invalid_unnamed(vec![(
            "patch".to_owned(),
            format!("Invalid value: {:?}: {message}", object.to_string()),
            "FieldValueInvalid".to_owned(),
        )])),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Goal: aligned addresses spread over a table's buckets as random keys would: 4,096
    /// addresses 16 bytes apart (as nodes lie) fall into about 2,590 of 4,096 buckets by their
    /// hashes' low bits, as many as random hashes do (1 - 1/e of them). The product alone
    /// leaves its low four bits zero (256 buckets at most); its high half folded into the low
    /// one reaches ~1,950.
    #[test]
    fn aligned_addresses_spread_over_the_buckets() {
        use std::hash::{BuildHasher as _, Hasher as _};
        let build = std::hash::BuildHasherDefault::<AddressHasher>::default();
        let base = address(&schemas().definitions["io.k8s.api.core.v1.Pod"]);
        let buckets: std::collections::HashSet<u64> = (0..4096)
            .map(|i| {
                let mut hasher = build.build_hasher();
                hasher.write_usize(base + i * 16);
                hasher.finish() & 4095
            })
            .collect();
        assert!(buckets.len() > 2_300, "{} buckets", buckets.len());
        assert_eq!(build.hash_one(base), build.hash_one(base));
    }

    /// Goal: a node of the built-in definitions classified once reads exactly as classifying
    /// it again does: every definition and every property, item and map value inside one gets
    /// the same Go type from a walk over the definitions (the classified nodes) as from a walk
    /// over a copy of them (nothing classified: each node worked out).
    #[test]
    fn classified_nodes_read_as_classifying_them_again() {
        let definitions = &schemas().definitions;
        let copy = definitions.clone();
        let memo = Walk {
            definitions,
            path: Vec::new(),
            first: None,
            source: None,
            prunes: false,
        };
        let worked = Walk {
            definitions: &copy,
            path: Vec::new(),
            first: None,
            source: None,
            prunes: false,
        };
        let mut seen = 0;
        each_definition_node_with_twin(&copy, |node, twin| {
            assert_eq!(memo.go_type(node), worked.go_type(twin), "{node}");
            seen += 1;
        });
        assert!(seen > 2_000, "{seen} nodes");
        assert!(
            classified().len() >= definitions.len(),
            "{}",
            classified().len()
        );
        // The walk over the copy found none of its nodes among the classified ones.
        assert!(
            copy.values()
                .all(|node| !classified().contains_key(&address(node)))
        );
    }

    #[test]
    fn times_are_written_back_in_utc_as_kubernetes_writes_them() {
        let mut event = serde_json::json!({
            "metadata": {"name": "e", "namespace": "default"},
            "involvedObject": {"kind": "Pod", "name": "p"},
            "firstTimestamp": "2026-12-04T17:40:00.123+01:00",
            "lastTimestamp": "2026-12-04T16:40:00Z",
            "eventTime": "2026-12-04T17:40:00.123456+01:00",
        });
        assert!(prune_unknown_fields(&builtin("events"), &mut event).is_empty());
        assert_eq!(event["firstTimestamp"], "2026-12-04T16:40:00Z");
        assert_eq!(event["lastTimestamp"], "2026-12-04T16:40:00Z");
        assert_eq!(event["eventTime"], "2026-12-04T16:40:00.123456Z");
        // Not a time: left for the decode check to refuse.
        let mut bad = serde_json::json!({"metadata": {"name": "e"}, "firstTimestamp": "soon"});
        prune_unknown_fields(&builtin("events"), &mut bad);
        assert_eq!(bad["firstTimestamp"], "soon");
    }

    /// Goal: the decode check says the pruning walk has nothing to do exactly when pruning
    /// leaves the object as it is and reports no field, for every kind of change the pruning
    /// walk makes (an undeclared field at any depth, a quantity out of its canonical form or
    /// given as a number, a time or micro time out of Kubernetes' layout) and for objects it
    /// leaves alone; so a patch that skips the walk on the check's word writes what it would
    /// have written.
    #[test]
    fn the_decode_check_says_when_pruning_has_nothing_to_do() {
        use serde_json::json;
        let managed = json!([{"manager": "m", "operation": "Update", "apiVersion": "v1",
            "time": "2026-12-05T08:00:00Z", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:data": {".": {}, "f:a": {}}, "f:anything": {}}}]);
        let configmap = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "d", "uid": "u", "resourceVersion": "5",
                "creationTimestamp": "2026-12-05T08:00:00Z", "labels": {"a": "b"},
                "managedFields": managed},
            "data": {"a": "x"}, "binaryData": {"b": "eA=="}});
        let pod = |resources: Value, extra: Value| {
            let mut container = json!({"name": "c", "image": "i", "resources": resources,
                "ports": [{"containerPort": 80}]});
            container
                .as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "p", "creationTimestamp": "2026-12-05T08:00:00Z"},
                "spec": {"containers": [container], "overhead": {"cpu": "1"}},
                "status": {"startTime": "2026-12-05T08:00:00Z"}})
        };
        let event = |time: &str, micro: &str| {
            json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e"},
                "involvedObject": {"kind": "Pod", "name": "p"},
                "firstTimestamp": time, "eventTime": micro})
        };
        let mut with_unknown = configmap.clone();
        with_unknown["metadata"]["bogus"] = json!(1);
        let mut top_unknown = configmap.clone();
        top_unknown["spec"] = json!({});
        let mut offset_time = configmap.clone();
        offset_time["metadata"]["creationTimestamp"] = json!("2026-12-05T09:00:00+01:00");
        let cases = [
            ("configmaps", configmap.clone(), false),
            ("configmaps", with_unknown, true),
            ("configmaps", top_unknown, true),
            ("configmaps", offset_time, true),
            (
                "pods",
                pod(
                    json!({"limits": {"cpu": "500m", "memory": "1Gi"}}),
                    json!({}),
                ),
                false,
            ),
            (
                "pods",
                pod(json!({"limits": {"cpu": "0.5"}}), json!({})),
                true,
            ),
            (
                "pods",
                pod(json!({"limits": {"memory": "1024Mi"}}), json!({})),
                true,
            ),
            (
                "pods",
                pod(json!({"limits": {"memory": 1024}}), json!({})),
                true,
            ),
            // Accepted by the check (trimmed), left as sent by the pruning walk.
            (
                "pods",
                pod(json!({"requests": {"cpu": " 1"}}), json!({})),
                false,
            ),
            (
                "pods",
                pod(json!({}), json!({"unknownNested": {"x": 1}})),
                true,
            ),
            (
                "pods",
                pod(
                    json!({}),
                    json!({"ports": [{"containerPort": 80, "portZ": 1}]}),
                ),
                true,
            ),
            ("pods", pod(json!({}), json!({"env": null})), false),
            (
                "events",
                event("2026-12-05T08:00:00Z", "2026-12-05T08:00:00.123456Z"),
                false,
            ),
            (
                "events",
                event("2026-12-05T08:00:00.5Z", "2026-12-05T08:00:00.123456Z"),
                true,
            ),
            (
                "events",
                event("2026-12-05T08:00:00Z", "2026-12-05T09:00:00.123456+01:00"),
                true,
            ),
            (
                "events",
                event("2026-12-05t08:00:00z", "2026-12-05T08:00:00.123456Z"),
                true,
            ),
        ];
        for (plural, object, expected) in cases {
            let def = builtin(plural);
            let mut pruned = object.clone();
            let unknown = prune_unknown_fields(&def, &mut pruned);
            let changed = pruned != object || !unknown.is_empty();
            assert_eq!(changed, expected, "{plural}: {object}");
            let pruning = check_patched(&def, &object).unwrap();
            assert_eq!(pruning == Pruning::Needed, expected, "{plural}: {object}");
        }
        // A custom resource: the pruning walk leaves it alone (its schema prunes it, elsewhere).
        let custom = ResourceDef {
            group: "example.com".into(),
            ..builtin("configmaps")
        };
        assert_eq!(
            check_patched(&custom, &json!({"metadata": {"name": "w"}, "x": 1})).unwrap(),
            Pruning::Nothing
        );
    }

    fn builtin(plural: &str) -> ResourceDef {
        crate::resources::builtin_resources()
            .into_iter()
            .find(|d| d.plural == plural)
            .unwrap()
    }

    #[test]
    fn fields_a_built_in_kind_does_not_declare_are_dropped_and_named() {
        let mut deployment = serde_json::json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "labels": {"app": "x"}, "bogus": 1},
            "spec": {"unknown1": "v", "paused": true,
                "selector": {"matchLabels": {"app": "x"}},
                "template": {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [
                    {"name": "a", "image": "i"},
                    {"name": "b", "image": "i", "unknownNested": 1, "ports": [{"containerPort": 80, "portZ": 1}]}
                ]}}},
            "status": {"replicas": 1, "extra": {}}
        });
        let unknown = prune_unknown_fields(&builtin("deployments"), &mut deployment);
        assert_eq!(
            unknown,
            [
                "metadata.bogus",
                "spec.template.spec.containers[1].ports[0].portZ",
                "spec.template.spec.containers[1].unknownNested",
                "spec.unknown1",
                "status.extra",
            ]
        );
        // Known fields, maps' keys and the declared values stay.
        assert_eq!(
            deployment["metadata"],
            serde_json::json!({"name": "d", "labels": {"app": "x"}})
        );
        assert_eq!(deployment["spec"]["paused"], true);
        assert_eq!(
            deployment["spec"]["template"]["spec"]["containers"][1],
            serde_json::json!({"name": "b", "image": "i", "ports": [{"containerPort": 80}]})
        );
        assert_eq!(deployment["status"], serde_json::json!({"replicas": 1}));
        // Nothing left to drop the second time.
        assert!(prune_unknown_fields(&builtin("deployments"), &mut deployment).is_empty());
        // A property named like the schemas' own `description` texts is a field.
        let mut class = serde_json::json!({"apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass", "metadata": {"name": "p"}, "value": 1, "description": "d"});
        assert!(prune_unknown_fields(&builtin("priorityclasses"), &mut class).is_empty());
        assert_eq!(class["description"], "d");
        assert_eq!(
            strict_decoding_error(&["spec.a".to_owned(), "b".to_owned()]),
            "strict decoding error: unknown field \"spec.a\", unknown field \"b\""
        );
    }

    #[test]
    fn free_form_fields_and_custom_resources_keep_what_they_hold() {
        // A CustomResourceDefinition's schema is JSON (`JSONSchemaProps` holds free-form
        // `default`/`example`), and managedFields' `fieldsV1` is free-form too.
        let mut crd = serde_json::json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "ws.example.com", "managedFields": [{"manager": "m", "fieldsV1": {"f:spec": {}}}]},
            "spec": {"group": "example.com", "names": {"plural": "ws", "kind": "W"}, "scope": "Namespaced",
                "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                    "type": "object", "x-kubernetes-preserve-unknown-fields": true,
                    "properties": {"spec": {"type": "object", "default": {"anything": [1, {"goes": true}]}}}}}}]}
        });
        let before = crd.clone();
        if let Some(def) = crate::resources::builtin_resources()
            .into_iter()
            .find(|d| d.plural == "customresourcedefinitions")
        {
            assert!(prune_unknown_fields(&def, &mut crd).is_empty());
            assert_eq!(crd, before);
        }
        let custom = crate::parse_resources_file(
            "[[resource]]\ngroup = \"example.com\"\nversion = \"v1\"\nkind = \"Widget\"\nplural = \"widgets\"\nnamespaced = true\n",
        )
        .unwrap()
        .remove(0);
        let mut widget = serde_json::json!({"spec": {"anything": 1}});
        assert!(prune_unknown_fields(&custom, &mut widget).is_empty());
        assert_eq!(widget, serde_json::json!({"spec": {"anything": 1}}));
    }

    #[test]
    fn quantities() {
        for ok in [
            "1", "1.5", "100m", "1Gi", "1e3", "-1", "+2k", "0.5E-2", ".5",
        ] {
            assert_eq!(check_quantity(ok), Ok(()), "{ok}");
        }
        for bad in ["", "abc", "1x", "Gi", "1.2.3", "1Gi3x"] {
            assert!(check_quantity(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn base64_offsets() {
        assert_eq!(base64_error_offset("aGVsbG8="), None);
        assert_eq!(base64_error_offset("aGVs\nbG8="), None);
        assert_eq!(base64_error_offset("not base64!"), Some(3));
    }

    #[test]
    fn go_type_names() {
        assert_eq!(
            go_type_of_definition("io.k8s.api.core.v1.Container"),
            "v1.Container"
        );
        assert_eq!(
            go_type_of_definition("io.k8s.apimachinery.pkg.api.resource.Quantity"),
            "resource.Quantity"
        );
        assert_eq!(
            struct_name_of_definition("io.k8s.api.apps.v1.DeploymentSpec"),
            "DeploymentSpec"
        );
    }
    #[test]
    fn markers_cover_exactly_the_served_definitions() {
        // The checked-in extract and k8s-openapi's definitions must describe the same types:
        // a kind served without its markers, or markers of a field the schemas lack, is drift
        // (regenerate with data/extract-markers.py).
        let markers = markers();
        let schemas = schemas();
        let extracted: std::collections::BTreeSet<&String> = markers.keys().collect();
        let served: std::collections::BTreeSet<&String> = schemas.definitions.keys().collect();
        assert_eq!(extracted, served);
        for (name, entry) in &markers {
            let definition = &schemas.definitions[name];
            for (field, field_markers) in entry
                .get("properties")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
            {
                let node = definition
                    .pointer(&format!("/properties/{field}"))
                    .unwrap_or_else(|| panic!("{name}.{field} is not in the schema"));
                for (key, value) in field_markers.as_object().unwrap() {
                    assert_eq!(node.get(key), Some(value), "{name}.{field} {key}");
                }
            }
        }
        let origin = serde_json::from_str::<Value>(MARKERS).unwrap()["origin"].clone();
        assert_eq!(origin["kubernetes"], "1.33");
        assert!(
            origin["license"]
                .as_str()
                .is_some_and(|l| l.starts_with("Apache-2.0"))
        );
    }

    #[test]
    fn markers_are_in_the_schemas() {
        let definitions = &schemas().definitions;
        let containers = &definitions["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"];
        assert_eq!(containers["x-kubernetes-list-type"], "map");
        assert_eq!(
            containers["x-kubernetes-list-map-keys"],
            serde_json::json!(["name"])
        );
        assert_eq!(containers["x-kubernetes-patch-merge-key"], "name");
        assert_eq!(containers["x-kubernetes-patch-strategy"], "merge");
        assert_eq!(
            definitions["io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector"]["x-kubernetes-map-type"],
            "atomic"
        );
        assert_eq!(
            definitions["io.k8s.api.core.v1.ServiceSpec"]["properties"]["selector"]["x-kubernetes-map-type"],
            "atomic"
        );
    }
    #[test]
    fn patch_bodies_strict_fields() {
        // kube-apiserver's field validation test bodies and messages.
        let merge =
            br#"{"spec": {"unknown1": "val1", "unknownDupe": "valDupe", "unknownDupe": "valDupe2",
            "paused": true, "paused": false, "template": {"spec": {"containers": [{
            "name": "nginx", "image": "nginx:latest", "unknownNested": "val1",
            "imagePullPolicy": "Always", "imagePullPolicy": "Never"}]}}}}"#;
        let fields: Vec<String> = duplicate_fields(merge)
            .unwrap()
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            fields,
            [
                r#"duplicate field "spec.unknownDupe""#,
                r#"duplicate field "spec.paused""#,
                r#"duplicate field "spec.template.spec.containers[0].imagePullPolicy""#
            ]
        );
        let json_patch = br#"[
            {"op": "add", "path": "/spec/unknown1", "value": "val1", "foo":"bar"},
            {"op": "add", "path": "/spec/unknown2", "path": "/spec/unknown3", "value": "val1"},
            {"op": "add", "path": "/spec/x", "value": {"a": 1, "a": 2}}]"#;
        let fields: Vec<String> = json_patch_fields(json_patch)
            .unwrap()
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            fields,
            [
                r#"json patch unknown field "[0].foo""#,
                r#"json patch duplicate field "[1].path""#,
                r#"json patch duplicate field "[2].value.a""#
            ]
        );
        assert_eq!(duplicate_fields(b"{not json"), None);
        assert_eq!(duplicate_fields(br#"{"a": [1, {"b": 1}]}"#), Some(vec![]));
    }

    /// Goal: the key scan passes a body only when no object in it repeats a key, and the
    /// answer with it is the walk's: keys repeated at any depth or beside a nested object,
    /// a key written with an escape, a value that repeats a key, keys repeated only across
    /// sibling objects, a string holding structural bytes, more keys than the scan compares.
    #[test]
    fn the_key_scan_passes_only_bodies_without_repeated_keys() {
        let many: String = (0..UNREPEATED_KEYS_MAX + 1)
            .map(|i| format!(r#""k{i}": 1"#))
            .collect::<Vec<_>>()
            .join(",");
        let many = format!("{{{many}}}");
        // An object and a list a level: as deep as the scan follows, and one level deeper.
        let nested =
            |levels: usize| format!("{}{}", r#"{"a": ["#.repeat(levels), "]}".repeat(levels));
        let (deepest, deeper) = (
            nested(UNREPEATED_DEPTH_MAX / 2),
            nested(UNREPEATED_DEPTH_MAX / 2 + 1),
        );
        for (body, passes) in [
            (r#"{"data":{"sent":"1733400000000000000"}}"#, true),
            (
                r#"{"a": 1, "b": {"a": 2}, "c": [{"a": 3}, {"a": 4}]}"#,
                true,
            ),
            (r#"{"a": "a", "b": ["a", "b"]}"#, true),
            (r#"{"a": "}{,\"", "b": 2}"#, true),
            (r#"{"a": 1, "a": 2}"#, false),
            (r#"{"x": {"a": {"y": 1}, "a": 2}}"#, false),
            (r#"{"a": 1, "\u0061": 2}"#, false),
            (r#"{"a": 1, "b": {"c": [1, {"d": 1, "d": 2}]}}"#, false),
            (r#"{"a": 1"#, false),
            (&many, false),
            (&deepest, true),
            (&deeper, false),
        ] {
            assert_eq!(keys_unrepeated(body.as_bytes()), passes, "{body}");
            assert_eq!(
                duplicate_fields_or_none(body.as_bytes()),
                duplicate_fields(body.as_bytes()).unwrap_or_default(),
                "{body}"
            );
        }
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn strict_walks_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..96)) {
                let _ = duplicate_fields(&bytes);
                let _ = json_patch_fields(&bytes);
                let _ = crate::apply::config::duplicate_keys(&bytes);
            }

            #[test]
            fn a_repeated_key_is_reported_once_per_repetition(
                keys in prop::collection::vec("[a-c]", 1..8)
            ) {
                // An object of these keys in order: each key seen before is one duplicate,
                // in the JSON walk and in the YAML reading alike.
                let body = format!(
                    "{{{}}}",
                    keys.iter().map(|k| format!("\"{k}\": 1")).collect::<Vec<_>>().join(",\n")
                );
                let mut seen = std::collections::HashSet::new();
                let repeated: Vec<String> = keys
                    .iter()
                    .filter(|k| !seen.insert((*k).clone()))
                    .cloned()
                    .collect();
                let fields = duplicate_fields(body.as_bytes()).unwrap();
                prop_assert_eq!(&fields, &duplicate_fields_or_none(body.as_bytes()));
                prop_assert_eq!(
                    fields,
                    repeated.iter().cloned().map(StrictField::Duplicate).collect::<Vec<_>>()
                );
                let lines = crate::apply::config::duplicate_keys(body.as_bytes());
                prop_assert_eq!(lines.len(), repeated.len());
            }

            /// Goal: a map's duplicate keys are found whatever its size (the walk keeps a
            /// small map's keys in a list and a larger one's in a set) and however a key is
            /// written (`"a"` and `"\u0061"` are one key, as Go decodes them).
            #[test]
            fn duplicates_are_found_in_maps_of_any_size(
                keys in prop::collection::vec((0..24u8, any::<bool>()), 0..60)
            ) {
                let names: Vec<String> = keys
                    .iter()
                    .map(|(i, _)| format!("k{}", char::from(b'a' + i)))
                    .collect();
                let body = format!(
                    "{{\"m\": {{{}}}}}",
                    keys.iter()
                        .zip(&names)
                        .map(|((_, escaped), name)| if *escaped {
                            let text: String = name.chars().map(|c| format!("\\u{:04x}", u32::from(c))).collect();
                            format!("\"{text}\": 1")
                        } else {
                            format!("\"{name}\": 1")
                        })
                        .collect::<Vec<_>>()
                        .join(",")
                );
                let mut seen = std::collections::HashSet::new();
                let repeated: Vec<StrictField> = names
                    .iter()
                    .filter(|name| !seen.insert((*name).clone()))
                    .map(|name| StrictField::Duplicate(format!("m.{name}")))
                    .collect();
                prop_assert_eq!(&duplicate_fields_or_none(body.as_bytes()), &repeated);
                prop_assert_eq!(duplicate_fields(body.as_bytes()).unwrap(), repeated);
            }

            /// Goal: the key scan skips the walk only where the walk finds nothing, whatever
            /// the bytes (JSON's structural bytes, quotes, escapes and repeatable keys), and
            /// the answer is the walk's.
            #[test]
            fn the_key_scan_skips_only_bodies_without_duplicates(
                bytes in prop::collection::vec(prop::sample::select(b"{}[]\",:\\ab1 ".to_vec()), 0..64)
            ) {
                let walked = duplicate_fields(&bytes).unwrap_or_default();
                if keys_unrepeated(&bytes) {
                    prop_assert!(walked.is_empty());
                }
                prop_assert_eq!(duplicate_fields_or_none(&bytes), walked);
            }
        }
    }
}

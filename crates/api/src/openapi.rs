//! OpenAPI v3 documents: the `/openapi/v3` index and one document per group/version (and,
//! derived from them, the v2 document: [`v2`], with its protobuf form in [`gnostic`]).
//!
//! What clients need from them:
//! - `kubectl apply`/`create` (validation on, the default) look for a `patch` operation
//!   carrying `x-kubernetes-group-version-kind` for the object's kind and a `fieldValidation`
//!   query parameter; finding it, kubectl leaves validation to the server and sends
//!   `fieldValidation=Strict`. Without any OpenAPI, apply fails with
//!   `failed to download openapi`.
//! - `kubectl explain` finds the kind's schema in `components.schemas` by its
//!   `x-kubernetes-group-version-kind` and walks `properties`.
//!
//! A built-in kind's schema is Kubernetes' own (k8s-openapi's definitions of v1.33 with their
//! descriptions, and the list, map and patch markers of Kubernetes' published document), every
//! definition it reaches included, so `kubectl explain deployment.spec.strategy` walks real
//! fields. A custom kind's schema is its CRD's `openAPIV3Schema` ([`CustomSchemas`]) with
//! `apiVersion`, `kind` and the real `ObjectMeta` declared, as kube-apiserver publishes it; one
//! without a declared schema is permissive (`x-kubernetes-preserve-unknown-fields`). The
//! create-only kinds (the reviews of `authentication.k8s.io/v1` and `authorization.k8s.io/v1`,
//! core `Binding`) are published as kube publishes them, with their `post` alone, so `kubectl
//! explain tokenreviews` works. The patch operations do **not** list
//! `application/strategic-merge-patch+json` in their request body: kubectl then uses its
//! compiled-in patch metadata for built-in kinds (Kubernetes' struct tags, the same markers)
//! and a JSON merge patch for custom resources — which is also what Kubernetes does for
//! custom resources.

use serde_json::{Map, Value, json};

use crate::resources::ResourceDef;

pub mod gnostic;
pub mod v2;

const META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1";

fn schema_ref(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

/// The package part of a schema name: `io.k8s.api.core.v1` for core, reversed domain for
/// custom groups (`com.example.v1alpha1`).
fn schema_package(def: &ResourceDef) -> String {
    match def.group.as_str() {
        "" => format!("io.k8s.api.core.{}", def.version),
        "apps" => format!("io.k8s.api.apps.{}", def.version),
        "coordination.k8s.io" => format!("io.k8s.api.coordination.{}", def.version),
        "discovery.k8s.io" => format!("io.k8s.api.discovery.{}", def.version),
        group => {
            let reversed: Vec<&str> = group.split('.').rev().collect();
            format!("{}.{}", reversed.join("."), def.version)
        }
    }
}

/// The schema name of the kind, e.g. `io.k8s.api.core.v1.Pod`: Kubernetes' definition name
/// for a built-in kind with a published schema.
#[must_use]
pub fn schema_name(def: &ResourceDef) -> String {
    crate::schema::root_definition(def).map_or_else(
        || format!("{}.{}", schema_package(def), def.kind),
        str::to_owned,
    )
}

fn gvk(def: &ResourceDef, kind: &str) -> Value {
    json!({"group": def.group, "version": def.version, "kind": kind})
}

/// `Core`, `Apps`, `Coordination`, `ExampleCom`: the group in operation ids.
fn group_camel(group: &str) -> String {
    if group.is_empty() {
        return "Core".to_owned();
    }
    let trimmed = group.strip_suffix(".k8s.io").unwrap_or(group);
    trimmed
        .split(['.', '-'])
        .map(|part| {
            let mut chars = part.chars();
            chars.next().map_or(String::new(), |first| {
                first.to_ascii_uppercase().to_string() + chars.as_str()
            })
        })
        .collect()
}

fn tag(def: &ResourceDef) -> String {
    let group = if def.group.is_empty() {
        "core".to_owned()
    } else {
        def.group
            .strip_suffix(".k8s.io")
            .unwrap_or(&def.group)
            .replace('.', "_")
    };
    format!("{group}_{}", def.version)
}

fn query(name: &str, kind: &str, description: &str) -> Value {
    json!({
        "name": name,
        "in": "query",
        "description": description,
        "schema": {"type": kind, "uniqueItems": true},
    })
}

fn path_parameter(name: &str, description: &str) -> Value {
    json!({
        "name": name,
        "in": "path",
        "description": description,
        "required": true,
        "schema": {"type": "string", "uniqueItems": true},
    })
}

fn write_parameters(with_force: bool) -> Vec<Value> {
    let mut parameters = vec![
        query(
            "dryRun",
            "string",
            "When present, indicates that modifications should not be persisted.",
        ),
        query(
            "fieldManager",
            "string",
            "fieldManager is a name associated with the actor or entity that is making these changes.",
        ),
        query(
            "fieldValidation",
            "string",
            "fieldValidation instructs the server on how to handle objects in the request containing unknown or duplicate fields. Valid values are: Ignore, Warn, Strict.",
        ),
    ];
    if with_force {
        parameters.push(query(
            "force",
            "boolean",
            "Force is going to \"force\" Apply requests. It means user will re-acquire conflicting fields owned by other people. Force flag must be unset for non-apply patch requests.",
        ));
    }
    parameters
}

/// A delete's query parameters, as kube's installer declares them (`DeleteOptions`' fields),
/// without the write parameters `fieldManager` and `fieldValidation`, which a delete has not.
fn delete_parameters() -> Vec<Value> {
    vec![
        query(
            "dryRun",
            "string",
            "When present, indicates that modifications should not be persisted.",
        ),
        query(
            "gracePeriodSeconds",
            "integer",
            "The duration in seconds before the object should be deleted. Value must be non-negative integer. The value zero indicates delete immediately.",
        ),
        query(
            "orphanDependents",
            "boolean",
            "Deprecated: please use the PropagationPolicy. Should the dependent objects be orphaned.",
        ),
        query(
            "propagationPolicy",
            "string",
            "Whether and how garbage collection will be performed: 'Orphan', 'Background' or 'Foreground'.",
        ),
    ]
}

/// A deletecollection's: the list's selectors and versions (no `watch`) and a delete's.
fn delete_collection_parameters() -> Vec<Value> {
    let mut parameters: Vec<Value> = list_parameters()
        .into_iter()
        .filter(|p| p["name"] != "watch" && p["name"] != "allowWatchBookmarks")
        .collect();
    parameters.extend(delete_parameters());
    parameters
}

/// A delete's optional body: `DeleteOptions`, as kube's documents declare it.
/// A create's or replace's body: the kind's object, in any media type.
fn object_body(kind_schema: &str) -> Value {
    json!({
        "content": {"*/*": {"schema": schema_ref(kind_schema)}},
        "required": true,
    })
}

fn delete_body() -> Value {
    json!({"content": {"application/json": {"schema": schema_ref(&format!("{META}.DeleteOptions"))}}})
}

fn list_parameters() -> Vec<Value> {
    vec![
        query(
            "allowWatchBookmarks",
            "boolean",
            "allowWatchBookmarks requests watch events with type \"BOOKMARK\".",
        ),
        query(
            "continue",
            "string",
            "The continue option should be set when retrieving more results from the server.",
        ),
        query(
            "fieldSelector",
            "string",
            "A selector to restrict the list of returned objects by their fields.",
        ),
        query(
            "labelSelector",
            "string",
            "A selector to restrict the list of returned objects by their labels.",
        ),
        query(
            "limit",
            "integer",
            "limit is a maximum number of responses to return for a list call.",
        ),
        query(
            "resourceVersion",
            "string",
            "resourceVersion sets a constraint on what resource versions a request may be served from.",
        ),
        query(
            "resourceVersionMatch",
            "string",
            "resourceVersionMatch determines how resourceVersion is applied to list calls.",
        ),
        query(
            "sendInitialEvents",
            "boolean",
            "`sendInitialEvents=true` may be set together with `watch=true`.",
        ),
        query(
            "timeoutSeconds",
            "integer",
            "Timeout for the list/watch call.",
        ),
        query(
            "watch",
            "boolean",
            "Watch for changes to the described resources and return them as a stream of add, update, and remove notifications.",
        ),
    ]
}

/// The success codes kube-apiserver's installer declares for an action (`installer.go`'s
/// `Returns`): a create may answer `201 Created` (and `202 Accepted`), an update or a patch
/// `201` when it created the object, a delete `202` while the object waits on finalizers or a
/// grace period. Errors (`4xx`, `5xx`) are declared by no operation, as in kube's documents.
fn success_codes(action: &str) -> &'static [(&'static str, &'static str)] {
    match action {
        "post" => &[("200", "OK"), ("201", "Created"), ("202", "Accepted")],
        "put" | "patch" => &[("200", "OK"), ("201", "Created")],
        "delete" => &[("200", "OK"), ("202", "Accepted")],
        _ => &[("200", "OK")],
    }
}

fn json_response(action: &str, schema: &str) -> Value {
    let mut responses = Map::new();
    for (code, description) in success_codes(action) {
        responses.insert(
            (*code).to_owned(),
            json!({
                "description": description,
                "content": {
                    "application/json": {"schema": schema_ref(schema)},
                    "application/yaml": {"schema": schema_ref(schema)},
                }
            }),
        );
    }
    responses.insert("401".to_owned(), json!({"description": "Unauthorized"}));
    Value::Object(responses)
}

fn operation(
    def: &ResourceDef,
    action: &str,
    operation_id: String,
    response_schema: &str,
    parameters: Vec<Value>,
    kind: &str,
) -> Value {
    json!({
        "tags": [tag(def)],
        "description": format!("{action} {}", def.kind),
        "operationId": operation_id,
        "parameters": parameters,
        "responses": json_response(action, response_schema),
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": gvk(def, kind),
    })
}

/// The paths of one resource: collection, item and (namespaced) all-namespaces list; of a
/// create-only resource (a review, core `bindings`), its collection's `post` alone.
fn resource_paths(def: &ResourceDef, paths: &mut Map<String, Value>) {
    let base = if def.group.is_empty() {
        format!("/api/{}", def.version)
    } else {
        format!("/apis/{}/{}", def.group, def.version)
    };
    let id = format!(
        "{}{}{}",
        group_camel(&def.group),
        def.version[..1].to_ascii_uppercase() + &def.version[1..],
        if def.namespaced { "Namespaced" } else { "" }
    );
    let kind_schema = schema_name(def);
    let list_schema = format!("{kind_schema}List");
    let (collection, item) = if def.namespaced {
        (
            format!("{base}/namespaces/{{namespace}}/{}", def.plural),
            format!("{base}/namespaces/{{namespace}}/{}/{{name}}", def.plural),
        )
    } else {
        (
            format!("{base}/{}", def.plural),
            format!("{base}/{}/{{name}}", def.plural),
        )
    };
    let mut shared = vec![query(
        "pretty",
        "string",
        "If 'true', then the output is pretty printed.",
    )];
    if def.namespaced {
        shared.push(path_parameter(
            "namespace",
            "object name and auth scope, such as for teams and projects",
        ));
    }

    let mut post = operation(
        def,
        "post",
        format!("create{id}{}", def.kind),
        &kind_schema,
        write_parameters(false),
        &def.kind,
    );
    post["requestBody"] = object_body(&kind_schema);
    if crate::discovery::is_create_only(def) {
        paths.insert(collection, json!({"post": post, "parameters": shared}));
        return;
    }
    let mut delete_collection = operation(
        def,
        "deletecollection",
        format!("deletecollection{id}{}", def.kind),
        &format!("{META}.Status"),
        delete_collection_parameters(),
        &def.kind,
    );
    delete_collection["requestBody"] = delete_body();
    paths.insert(
        collection,
        json!({
            "get": operation(def, "list", format!("list{id}{}", def.kind), &list_schema, list_parameters(), &def.kind),
            "post": post,
            "delete": delete_collection,
            "parameters": shared.clone(),
        }),
    );

    let mut item_shared = shared;
    item_shared.insert(
        0,
        path_parameter("name", &format!("name of the {}", def.kind)),
    );
    let mut put = operation(
        def,
        "put",
        format!("replace{id}{}", def.kind),
        &kind_schema,
        write_parameters(false),
        &def.kind,
    );
    put["requestBody"] = object_body(&kind_schema);
    let mut patch = operation(
        def,
        "patch",
        format!("patch{id}{}", def.kind),
        &kind_schema,
        write_parameters(true),
        &def.kind,
    );
    // No strategic-merge-patch content type here: see the module documentation.
    let patch_body = json!({"schema": schema_ref(&format!("{META}.Patch"))});
    patch["requestBody"] = json!({
        "content": {
            "application/json-patch+json": patch_body,
            "application/merge-patch+json": patch_body,
        },
        "required": true,
    });
    let mut delete = operation(
        def,
        "delete",
        format!("delete{id}{}", def.kind),
        &format!("{META}.Status"),
        delete_parameters(),
        &def.kind,
    );
    delete["requestBody"] = delete_body();
    paths.insert(
        item,
        json!({
            "get": operation(def, "get", format!("read{id}{}", def.kind), &kind_schema, Vec::new(), &def.kind),
            "put": put,
            "patch": patch,
            "delete": delete,
            "parameters": item_shared,
        }),
    );

    if def.namespaced {
        let all_id = format!(
            "list{}{}{}ForAllNamespaces",
            group_camel(&def.group),
            def.version[..1].to_ascii_uppercase() + &def.version[1..],
            def.kind
        );
        paths.insert(
            format!("{base}/{}", def.plural),
            json!({
                "get": operation(def, "list", all_id, &list_schema, list_parameters(), &def.kind),
            }),
        );
    }
}

/// The `proxy` subresources of core pods, services and nodes, as kube-apiserver's installer
/// publishes connect operations: `{item}/proxy` and `{item}/proxy/{path}`, one operation per
/// method it relays (`connectCoreV1GetNamespacedPodProxy`, ...), answering any media type as
/// a string, their options kind (`PodProxyOptions`, ...) as their group-version-kind.
fn proxy_paths(def: &ResourceDef, paths: &mut Map<String, Value>) {
    let Some((_, _, kind)) = crate::discovery::subresource_kind_of(def, "proxy") else {
        return;
    };
    let (scope, path_description) = match def.plural.as_str() {
        "pods" => (
            "Namespaced",
            "Path is the URL path to use for the current proxy request to pod.",
        ),
        "services" => (
            "Namespaced",
            "Path is the part of URLs that include service endpoints, suffixes, and parameters to use for the current proxy request to service. For example, the whole request URL is http://localhost/api/v1/namespaces/kube-system/services/elasticsearch-logging/_search?q=user:kimchy. Path is _search?q=user:kimchy.",
        ),
        _ => (
            "",
            "Path is the URL path to use for the current proxy request to node.",
        ),
    };
    let item = if def.namespaced {
        format!(
            "/api/v1/namespaces/{{namespace}}/{}/{{name}}/proxy",
            def.plural
        )
    } else {
        format!("/api/v1/{}/{{name}}/proxy", def.plural)
    };
    let mut shared = vec![path_parameter("name", &format!("name of the {kind}"))];
    if def.namespaced {
        shared.push(path_parameter(
            "namespace",
            "object name and auth scope, such as for teams and projects",
        ));
    }
    for with_path in [false, true] {
        let mut parameters = shared.clone();
        if with_path {
            parameters.push(path_parameter("path", "path to the resource"));
        }
        parameters.push(query("path", "string", path_description));
        let mut item_paths = Map::new();
        for (method, verb) in [
            ("delete", "Delete"),
            ("get", "Get"),
            ("head", "Head"),
            ("options", "Options"),
            ("patch", "Patch"),
            ("post", "Post"),
            ("put", "Put"),
        ] {
            item_paths.insert(
                method.to_owned(),
                json!({
                    "tags": [tag(def)],
                    "description": format!("connect {} requests to proxy of {}", verb.to_ascii_uppercase(), def.kind),
                    "operationId": format!(
                        "connectCoreV1{verb}{scope}{}Proxy{}",
                        def.kind,
                        if with_path { "WithPath" } else { "" }
                    ),
                    "responses": {
                        "200": {
                            "description": "OK",
                            "content": {"*/*": {"schema": {"type": "string"}}},
                        },
                        "401": {"description": "Unauthorized"},
                    },
                    "x-kubernetes-action": "connect",
                    "x-kubernetes-group-version-kind": gvk(def, kind),
                }),
            );
        }
        item_paths.insert("parameters".to_owned(), Value::Array(parameters));
        let path = if with_path {
            format!("{item}/{{path}}")
        } else {
            item.clone()
        };
        paths.insert(path, Value::Object(item_paths));
    }
}

/// The read-only `componentstatuses` (see [`crate::componentstatus`]): `list` and `get` only,
/// and its schema (`conditions` in place of `spec` and `status`).
fn component_status(paths: &mut Map<String, Value>, schemas: &mut Map<String, Value>) {
    let def = crate::componentstatus::def();
    let kind_schema = schema_name(&def);
    let pretty = query(
        "pretty",
        "string",
        "If 'true', then the output is pretty printed.",
    );
    paths.insert(
        format!("/api/v1/{}", def.plural),
        json!({
            "get": operation(&def, "list", "listCoreV1ComponentStatus".to_owned(), &format!("{kind_schema}List"), list_parameters(), &def.kind),
            "parameters": [pretty.clone()],
        }),
    );
    paths.insert(
        format!("/api/v1/{}/{{name}}", def.plural),
        json!({
            "get": operation(&def, "get", "readCoreV1ComponentStatus".to_owned(), &kind_schema, Vec::new(), &def.kind),
            "parameters": [path_parameter("name", "name of the ComponentStatus"), pretty],
        }),
    );
    kind_schemas(&def, &CustomSchemas::new(), schemas);
    if let Some(properties) = schemas
        .get_mut(&kind_schema)
        .and_then(|s| s.get_mut("properties"))
        .and_then(Value::as_object_mut)
    {
        properties.remove("spec");
        properties.remove("status");
        properties.insert(
            "conditions".into(),
            json!({
                "description": "List of component conditions observed",
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["type", "status"],
                    "properties": {
                        "type": {"description": "Type of condition for a component. Valid value: \"Healthy\"", "type": "string", "default": ""},
                        "status": {"description": "Status of the condition for a component. Valid values for \"Healthy\": \"True\", \"False\", or \"Unknown\".", "type": "string", "default": ""},
                        "message": {"description": "Message about the condition for a component. For example, information about a health check.", "type": "string"},
                        "error": {"description": "Condition error code for a component. For example, a health check error code.", "type": "string"},
                    },
                },
                "x-kubernetes-list-map-keys": ["type"],
                "x-kubernetes-list-type": "map",
                "x-kubernetes-patch-merge-key": "type",
                "x-kubernetes-patch-strategy": "merge",
            }),
        );
    }
}

fn string_map(description: &str) -> Value {
    json!({"type": "object", "description": description, "additionalProperties": {"type": "string", "default": ""}})
}

fn meta_schemas(schemas: &mut Map<String, Value>) {
    schemas.insert(
        format!("{META}.ObjectMeta"),
        json!({
            "description": "ObjectMeta is metadata that all persisted resources must have, which includes all objects users must create.",
            "type": "object",
            "properties": {
                "annotations": string_map("Annotations is an unstructured key value map stored with a resource that may be set by external tools to store and retrieve arbitrary metadata."),
                "creationTimestamp": {"description": "CreationTimestamp is a timestamp representing the server time when this object was created.", "type": "string", "format": "date-time"},
                "deletionGracePeriodSeconds": {"description": "Number of seconds allowed for this object to gracefully terminate before it will be removed from the system.", "type": "integer", "format": "int64"},
                "deletionTimestamp": {"description": "DeletionTimestamp is RFC 3339 date and time at which this resource will be deleted.", "type": "string", "format": "date-time"},
                "finalizers": {"description": "Must be empty before the object is deleted from the registry.", "type": "array", "items": {"type": "string", "default": ""}, "x-kubernetes-list-type": "set", "x-kubernetes-patch-strategy": "merge"},
                "generateName": {"description": "GenerateName is an optional prefix, used by the server, to generate a unique name ONLY IF the Name field has not been provided.", "type": "string"},
                "generation": {"description": "A sequence number representing a specific generation of the desired state.", "type": "integer", "format": "int64"},
                "labels": string_map("Map of string keys and values that can be used to organize and categorize (scope and select) objects."),
                "managedFields": {"description": "ManagedFields maps workflow-id and version to the set of fields that are managed by that workflow.", "type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                "name": {"description": "Name must be unique within a namespace.", "type": "string"},
                "namespace": {"description": "Namespace defines the space within which each name must be unique.", "type": "string"},
                "ownerReferences": {"description": "List of objects depended by this object.", "type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}, "x-kubernetes-list-map-keys": ["uid"], "x-kubernetes-list-type": "map", "x-kubernetes-patch-merge-key": "uid", "x-kubernetes-patch-strategy": "merge"},
                "resourceVersion": {"description": "An opaque value that represents the internal version of this object.", "type": "string"},
                "selfLink": {"description": "Deprecated: selfLink is a legacy read-only field that is no longer populated by the system.", "type": "string"},
                "uid": {"description": "UID is the unique in time and space value for this object.", "type": "string"}
            }
        }),
    );
    schemas.insert(
        format!("{META}.ListMeta"),
        json!({
            "description": "ListMeta describes metadata that synthetic resources must have, including lists and various status objects.",
            "type": "object",
            "properties": {
                "continue": {"type": "string", "description": "continue may be set if the user set a limit on the number of items returned."},
                "remainingItemCount": {"type": "integer", "format": "int64", "description": "remainingItemCount is the number of subsequent items in the list which are not included in this list response."},
                "resourceVersion": {"type": "string", "description": "String that identifies the server's internal version of this object."},
                "selfLink": {"type": "string", "description": "Deprecated: selfLink is a legacy read-only field that is no longer populated by the system."}
            }
        }),
    );
    schemas.insert(
        format!("{META}.Preconditions"),
        json!({
            "description": "Preconditions must be fulfilled before an operation (update, delete, etc.) is carried out.",
            "type": "object",
            "properties": {
                "resourceVersion": {"description": "Specifies the target ResourceVersion", "type": "string"},
                "uid": {"description": "Specifies the target UID.", "type": "string"}
            }
        }),
    );
    schemas.insert(
        format!("{META}.DeleteOptions"),
        json!({
            "description": "DeleteOptions may be provided when deleting an API object.",
            "type": "object",
            "properties": {
                "apiVersion": {"type": "string"},
                "dryRun": {"type": "array", "items": {"type": "string", "default": ""}, "x-kubernetes-list-type": "atomic"},
                "gracePeriodSeconds": {"type": "integer", "format": "int64"},
                "ignoreStoreReadErrorWithClusterBreakingPotential": {"type": "boolean"},
                "kind": {"type": "string"},
                "orphanDependents": {"type": "boolean"},
                "preconditions": {"allOf": [schema_ref(&format!("{META}.Preconditions"))]},
                "propagationPolicy": {"type": "string"}
            },
            "x-kubernetes-group-version-kind": [{"group": "", "kind": "DeleteOptions", "version": "v1"}]
        }),
    );
    schemas.insert(
        format!("{META}.Patch"),
        json!({"description": "Patch is provided to give a concrete name and type to the Kubernetes PATCH request body.", "type": "object"}),
    );
    schemas.insert(
        format!("{META}.Status"),
        json!({
            "description": "Status is a return value for calls that don't return other objects.",
            "type": "object",
            "properties": {
                "apiVersion": {"type": "string"},
                "code": {"type": "integer", "format": "int32"},
                "details": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "kind": {"type": "string"},
                "message": {"type": "string"},
                "metadata": {"allOf": [schema_ref(&format!("{META}.ListMeta"))], "default": {}},
                "reason": {"type": "string"},
                "status": {"type": "string"}
            },
            "x-kubernetes-group-version-kind": [{"group": "", "kind": "Status", "version": "v1"}]
        }),
    );
}

fn type_meta_properties(def: &ResourceDef) -> Map<String, Value> {
    let mut properties = Map::new();
    properties.insert(
        "apiVersion".into(),
        json!({"description": format!("APIVersion defines the versioned schema of this representation of an object; here {}.", def.api_version()), "type": "string"}),
    );
    properties.insert(
        "kind".into(),
        json!({"description": "Kind is a string value representing the REST resource this object represents.", "type": "string"}),
    );
    properties
}

/// The `openAPIV3Schema` of each custom kind that declares one, by `(group, version, kind)`.
pub type CustomSchemas = std::collections::HashMap<(String, String, String), Value>;

/// A custom kind's schema in an OpenAPI document, as kube-apiserver publishes a
/// CustomResourceDefinition's: its `openAPIV3Schema` with `apiVersion`, `kind` and `metadata`
/// (the real `ObjectMeta`) declared, and the kind's group-version-kind.
fn custom_kind_schema(def: &ResourceDef, declared: &Value) -> Value {
    let mut schema = match declared {
        Value::Object(map) => map.clone(),
        _ => Map::new(),
    };
    let mut properties = match schema.remove("properties") {
        Some(Value::Object(properties)) => properties,
        _ => Map::new(),
    };
    properties.extend(type_meta_properties(def));
    properties.insert(
        "metadata".into(),
        json!({"description": "Standard object's metadata.", "allOf": [schema_ref(&format!("{META}.ObjectMeta"))], "default": {}}),
    );
    schema.insert("type".into(), json!("object"));
    schema.insert("properties".into(), Value::Object(properties));
    schema.insert(
        "x-kubernetes-group-version-kind".into(),
        json!([gvk(def, &def.kind)]),
    );
    Value::Object(schema)
}

/// A definition as kube-apiserver publishes it in OpenAPI v3: a reference with anything beside
/// it (a field's description, its markers) wrapped in `allOf` — where OpenAPI v3 ignores a
/// `$ref`'s siblings, so `kubectl explain deployment.spec.strategy` would print the type's
/// description instead of the field's —, and no `metadata` among a kind's required fields.
fn as_published(schema: &mut Value, root: bool) {
    let Value::Object(map) = schema else {
        return;
    };
    if map.len() > 1
        && let Some(reference) = map.remove("$ref")
    {
        map.insert("allOf".to_owned(), json!([{"$ref": reference}]));
    }
    if root && let Some(Value::Array(required)) = map.get_mut("required") {
        required.retain(|field| field != "metadata");
        if required.is_empty() {
            map.remove("required");
        }
    }
    if let Some(Value::Object(properties)) = map.get_mut("properties") {
        for property in properties.values_mut() {
            as_published(property, false);
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(inner) = map.get_mut(key) {
            as_published(inner, false);
        }
    }
}

fn kind_schemas(def: &ResourceDef, custom: &CustomSchemas, schemas: &mut Map<String, Value>) {
    if let Some(declared) = custom.get(&(def.group.clone(), def.version.clone(), def.kind.clone()))
    {
        schemas.insert(schema_name(def), custom_kind_schema(def, declared));
        list_schema(def, &schema_name(def), schemas);
        return;
    }
    // A built-in kind: Kubernetes' own schema of it, with descriptions and markers.
    if let Some(root) = builtin_kind_schemas(def, schemas) {
        list_schema(def, &root, schemas);
        return;
    }
    let mut properties = type_meta_properties(def);
    properties.insert(
        "metadata".into(),
        json!({"description": "Standard object's metadata.", "allOf": [schema_ref(&format!("{META}.ObjectMeta"))], "default": {}}),
    );
    let open = |description: String| json!({"description": description, "type": "object", "x-kubernetes-preserve-unknown-fields": true});
    properties.insert(
        "spec".into(),
        open(format!(
            "The desired state of the {} (not schema-checked by this server).",
            def.kind
        )),
    );
    properties.insert(
        "status".into(),
        open(format!(
            "The observed state of the {} (not schema-checked by this server).",
            def.kind
        )),
    );
    schemas.insert(
        schema_name(def),
        json!({
            "description": format!("{} ({}). Fields other than metadata are accepted as sent.", def.kind, def.api_version()),
            "type": "object",
            "properties": properties,
            "x-kubernetes-preserve-unknown-fields": true,
            "x-kubernetes-group-version-kind": [gvk(def, &def.kind)],
        }),
    );
    list_schema(def, &schema_name(def), schemas);
}

/// The `...List` schema of `def`, its items of the schema `item`.
fn list_schema(def: &ResourceDef, item: &str, schemas: &mut Map<String, Value>) {
    let mut list_properties = type_meta_properties(def);
    list_properties.insert(
        "items".into(),
        json!({"description": format!("List of {}.", def.plural), "type": "array", "items": {"allOf": [schema_ref(item)], "default": {}}}),
    );
    list_properties.insert(
        "metadata".into(),
        json!({"description": "Standard list metadata.", "allOf": [schema_ref(&format!("{META}.ListMeta"))], "default": {}}),
    );
    schemas.insert(
        format!("{item}List"),
        json!({
            "description": format!("{} is a list of {}.", def.list_kind(), def.kind),
            "type": "object",
            "required": ["items"],
            "properties": list_properties,
            "x-kubernetes-group-version-kind": [gvk(def, &def.list_kind())],
        }),
    );
}

/// The OpenAPI v3 document of one group/version (`/openapi/v3/api/v1`,
/// `/openapi/v3/apis/{group}/{version}`), `None` when nothing is served there. `custom`: the
/// declared schemas of custom kinds (the others are open).
#[must_use]
pub fn openapi_v3_group_version(
    defs: &[ResourceDef],
    custom: &CustomSchemas,
    group: &str,
    version: &str,
) -> Option<Value> {
    let served: Vec<&ResourceDef> = defs
        .iter()
        .filter(|d| d.group == group && d.version == version)
        .collect();
    let create_only: Vec<ResourceDef> = crate::discovery::create_only_defs()
        .into_iter()
        .filter(|d| d.group == group && d.version == version)
        .collect();
    if served.is_empty() && create_only.is_empty() {
        return None;
    }
    let mut paths = Map::new();
    let mut schemas = Map::new();
    meta_schemas(&mut schemas);
    for def in served {
        resource_paths(def, &mut paths);
        proxy_paths(def, &mut paths);
        kind_schemas(def, custom, &mut schemas);
    }
    // The reviews and core `bindings`: created only, their kube schemas without a list.
    for def in &create_only {
        resource_paths(def, &mut paths);
        builtin_kind_schemas(def, &mut schemas);
    }
    if group.is_empty() && version == "v1" {
        component_status(&mut paths, &mut schemas);
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {
            "title": "Kubernetes",
            "version": format!("v1.{}.0", crate::discovery::KUBERNETES_MINOR),
        },
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

/// Adds Kubernetes' own schemas of a built-in kind (with descriptions and markers) to
/// `schemas`, the kind's marked with its group/version/kind; the kind's schema name, `None` for
/// a kind without published definitions.
fn builtin_kind_schemas(def: &ResourceDef, schemas: &mut Map<String, Value>) -> Option<String> {
    let (root, definitions) = crate::schema::openapi_definitions(def)?;
    schemas.extend(definitions.into_iter().map(|(name, mut schema)| {
        as_published(&mut schema, true);
        (name, schema)
    }));
    if let Some(Value::Object(kind)) = schemas.get_mut(&root) {
        kind.insert(
            "x-kubernetes-group-version-kind".into(),
            json!([gvk(def, &def.kind)]),
        );
    }
    Some(root)
}

/// The index key of a group/version: `api/v1` or `apis/{group}/{version}`.
fn index_key(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// The served group/versions, in the order of their first kind, then those that serve only
/// create-only resources (`authentication.k8s.io/v1`, `authorization.k8s.io/v1`).
/// The group/versions of `defs` and of the kinds only created (reviews, bindings), each once
/// in order: those the v3 index lists when each has a document.
#[must_use]
pub fn group_versions(defs: &[ResourceDef]) -> Vec<(String, String)> {
    let mut group_versions: Vec<(String, String)> = Vec::new();
    for def in defs.iter().chain(&crate::discovery::create_only_defs()) {
        let gv = (def.group.clone(), def.version.clone());
        if !group_versions.contains(&gv) {
            group_versions.push(gv);
        }
    }
    group_versions
}

/// `/openapi/v3`: `{"paths": {"api/v1": {"serverRelativeURL": "/openapi/v3/api/v1?hash=..."}}}`,
/// one entry per served group/version; the hash changes when the document does.
#[must_use]
pub fn openapi_v3_root(defs: &[ResourceDef], custom: &CustomSchemas) -> Value {
    openapi_v3_index(defs, |group, version| {
        openapi_v3_group_version(defs, custom, group, version).map(|document| document.to_string())
    })
}

/// [`openapi_v3_root`] with each group/version's document text from `document` (`None` when
/// nothing is served there), so that a caller holding the texts does not build them again.
#[must_use]
pub fn openapi_v3_index<T: AsRef<[u8]>>(
    defs: &[ResourceDef],
    mut document: impl FnMut(&str, &str) -> Option<T>,
) -> Value {
    let mut paths = Map::new();
    for (group, version) in group_versions(defs) {
        let Some(text) = document(&group, &version) else {
            continue;
        };
        let hash = crate::hash::fnv1a(text.as_ref());
        let key = index_key(&group, &version);
        paths.insert(
            key.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{key}?hash={hash:016X}")}),
        );
    }
    json!({"paths": paths})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::{builtin_resources, parse_resources_file};

    fn all_defs() -> Vec<ResourceDef> {
        let mut defs = builtin_resources();
        defs.extend(
            parse_resources_file(
                "[[resource]]\ngroup = \"example.com\"\nversion = \"v1alpha1\"\nkind = \"Widget\"\nplural = \"widgets\"\nnamespaced = false\n",
            )
            .unwrap(),
        );
        defs
    }

    #[test]
    fn root_index() {
        let root = openapi_v3_root(&all_defs(), &CustomSchemas::new());
        let paths = root["paths"].as_object().unwrap();
        let keys: Vec<&String> = paths.keys().collect();
        // The core group, 15 named groups of built-ins, the two groups of the reviews, one
        // custom group.
        assert_eq!(keys.len(), 19);
        for key in [
            "api/v1",
            "apis/apps/v1",
            "apis/coordination.k8s.io/v1",
            "apis/discovery.k8s.io/v1",
            "apis/example.com/v1alpha1",
        ] {
            let url = paths[key]["serverRelativeURL"].as_str().unwrap();
            assert!(
                url.starts_with(&format!("/openapi/v3/{key}?hash=")),
                "{url}"
            );
        }
        assert_eq!(
            openapi_v3_root(&all_defs(), &CustomSchemas::new()),
            root,
            "deterministic"
        );
    }

    #[test]
    fn every_kind_has_its_gvk() {
        let defs = all_defs();
        for def in &defs {
            let doc =
                openapi_v3_group_version(&defs, &CustomSchemas::new(), &def.group, &def.version)
                    .unwrap();
            assert_eq!(doc["openapi"], "3.0.0");
            let schemas = doc["components"]["schemas"].as_object().unwrap();
            let expected = json!([{"group": def.group, "version": def.version, "kind": def.kind}]);
            let found = schemas
                .values()
                .filter(|s| s["x-kubernetes-group-version-kind"] == expected)
                .count();
            assert_eq!(found, 1, "{}", def.kind);
            let list =
                json!([{"group": def.group, "version": def.version, "kind": def.list_kind()}]);
            assert!(
                schemas
                    .values()
                    .any(|s| s["x-kubernetes-group-version-kind"] == list)
            );
            // The patch operation kubectl looks for: GVK plus a fieldValidation parameter.
            let paths = doc["paths"].as_object().unwrap();
            let patch = paths
                .values()
                .filter_map(|p| p.get("patch"))
                .find(|op| {
                    op["x-kubernetes-group-version-kind"]
                        == json!({"group": def.group, "version": def.version, "kind": def.kind})
                })
                .unwrap_or_else(|| panic!("no patch operation for {}", def.kind));
            assert!(
                patch["parameters"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|p| p["name"] == "fieldValidation")
            );
            let content = patch["requestBody"]["content"].as_object().unwrap();
            assert!(content.contains_key("application/merge-patch+json"));
            assert!(!content.contains_key("application/strategic-merge-patch+json"));
            // Every $ref resolves.
            let text = doc.to_string();
            for piece in text.split("\"$ref\":\"#/components/schemas/").skip(1) {
                let name = &piece[..piece.find('"').unwrap()];
                assert!(schemas.contains_key(name), "dangling $ref {name}");
            }
        }
        assert!(openapi_v3_group_version(&defs, &CustomSchemas::new(), "apps", "v2").is_none());
    }

    /// `kubectl explain crd.spec...`: the CRD kind is documented with Kubernetes' own schema
    /// (its free-form values — `default`, `example` — any JSON, as kube publishes them).
    #[test]
    fn the_crd_kind_is_documented_with_kubes_schema() {
        let defs = vec![crate::crd::definition()];
        let doc =
            openapi_v3_group_version(&defs, &CustomSchemas::new(), "apiextensions.k8s.io", "v1")
                .unwrap();
        let schemas = doc["components"]["schemas"].as_object().unwrap();
        let prefix = "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1";
        let spec = &schemas[&format!("{prefix}.CustomResourceDefinitionSpec")];
        assert!(spec["properties"]["group"].is_object(), "{spec}");
        assert!(spec["properties"]["versions"].is_object(), "{spec}");
        let json = &schemas[&format!("{prefix}.JSON")];
        assert!(json["description"].is_string());
        assert_eq!(json.as_object().unwrap().len(), 1, "{json}");
        let root = &schemas[&format!("{prefix}.CustomResourceDefinition")];
        assert_eq!(
            root["x-kubernetes-group-version-kind"],
            json!([{"group": "apiextensions.k8s.io", "version": "v1", "kind": "CustomResourceDefinition"}])
        );
    }

    #[test]
    fn paths_and_names() {
        let defs = all_defs();
        let core = openapi_v3_group_version(&defs, &CustomSchemas::new(), "", "v1").unwrap();
        let paths = core["paths"].as_object().unwrap();
        assert!(paths.contains_key("/api/v1/namespaces/{namespace}/pods/{name}"));
        assert!(paths.contains_key("/api/v1/namespaces/{namespace}/pods"));
        assert!(paths.contains_key("/api/v1/pods"));
        assert!(paths.contains_key("/api/v1/nodes/{name}"));
        assert!(!paths.contains_key("/api/v1/namespaces/{namespace}/nodes"));
        assert_eq!(
            paths["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"]["operationId"],
            "patchCoreV1NamespacedPod"
        );
        // The proxy subresources' connect operations, as kube publishes them.
        for (path, id, kind) in [
            (
                "/api/v1/namespaces/{namespace}/pods/{name}/proxy",
                "connectCoreV1GetNamespacedPodProxy",
                "PodProxyOptions",
            ),
            (
                "/api/v1/namespaces/{namespace}/pods/{name}/proxy/{path}",
                "connectCoreV1GetNamespacedPodProxyWithPath",
                "PodProxyOptions",
            ),
            (
                "/api/v1/namespaces/{namespace}/services/{name}/proxy/{path}",
                "connectCoreV1GetNamespacedServiceProxyWithPath",
                "ServiceProxyOptions",
            ),
            (
                "/api/v1/nodes/{name}/proxy",
                "connectCoreV1GetNodeProxy",
                "NodeProxyOptions",
            ),
        ] {
            let item = &paths[path];
            assert_eq!(item["get"]["operationId"], id, "{path}");
            assert_eq!(item["get"]["x-kubernetes-action"], "connect");
            assert_eq!(
                item["get"]["x-kubernetes-group-version-kind"],
                json!({"group": "", "version": "v1", "kind": kind})
            );
            for method in ["delete", "head", "options", "patch", "post", "put"] {
                assert!(item.get(method).is_some(), "{path} {method}");
            }
            let parameters: Vec<(&str, &str)> = item["parameters"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| (p["name"].as_str().unwrap(), p["in"].as_str().unwrap()))
                .collect();
            assert!(parameters.contains(&("path", "query")), "{parameters:?}");
            assert_eq!(
                parameters.contains(&("path", "path")),
                path.ends_with("{path}")
            );
        }
        let schemas = core["components"]["schemas"].as_object().unwrap();
        assert!(schemas.contains_key("io.k8s.api.core.v1.Pod"));
        assert!(schemas.contains_key("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"));
        let custom =
            openapi_v3_group_version(&defs, &CustomSchemas::new(), "example.com", "v1alpha1")
                .unwrap();
        assert!(
            custom["components"]["schemas"]
                .get("com.example.v1alpha1.Widget")
                .is_some()
        );
        assert!(
            custom["paths"]
                .get("/apis/example.com/v1alpha1/widgets/{name}")
                .is_some()
        );
        // With its CRD's declared schema: that schema, with the object's own fields declared.
        let mut declared = CustomSchemas::new();
        declared.insert(
            ("example.com".into(), "v1alpha1".into(), "Widget".into()),
            json!({"type": "object", "description": "A widget.", "properties": {
                "spec": {"type": "object", "properties": {"size": {"type": "integer", "description": "How big."}}}}}),
        );
        let documented =
            openapi_v3_group_version(&defs, &declared, "example.com", "v1alpha1").unwrap();
        let widget = &documented["components"]["schemas"]["com.example.v1alpha1.Widget"];
        assert_eq!(widget["description"], "A widget.");
        assert_eq!(
            widget["properties"]["spec"]["properties"]["size"]["description"],
            "How big."
        );
        assert_eq!(widget["properties"]["kind"]["type"], "string");
        assert_eq!(
            widget["properties"]["metadata"]["allOf"][0]["$ref"],
            "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
        );
        assert_eq!(
            widget["x-kubernetes-group-version-kind"],
            json!([{"group": "example.com", "version": "v1alpha1", "kind": "Widget"}])
        );
        assert!(widget.get("x-kubernetes-preserve-unknown-fields").is_none());
        assert_eq!(group_camel("coordination.k8s.io"), "Coordination");
        assert_eq!(group_camel("example.com"), "ExampleCom");
    }
}

//! The one object decoder: a stored value or an upstream object becomes a cache object.
//!
//! ## Guarantees
//! - The object carries `apiVersion` and `kind` (filled from the resource when missing), its
//!   labels, and the resource's selectable field values (without `metadata.name` and
//!   `metadata.namespace`, which the cache keys by).
//! - A stored value is named by its key ([`Identity::Key`]): `metadata.name` and
//!   `metadata.namespace` are set from the key (a cluster-scoped object has no namespace), and
//!   its resource version is the key's modification revision. An upstream object names itself
//!   ([`Identity::Body`]): its `metadata.name` (required), `metadata.namespace` (for a namespaced
//!   resource) and `metadata.resourceVersion` (an unsigned integer, as every kube-apiserver
//!   issues them).
//! - A custom resource read from the store ([`decode_stored`] given its storage version's
//!   schema) gets that schema's defaults and loses the fields it does not declare, as kube's
//!   decoder treats every object it reads from etcd: a default added to a CRD shows on the
//!   objects stored before it (kube's conformance test "custom resource defaulting for requests
//!   and from storage works"). Nothing is written back; the catalog restarts a resource whose
//!   storage schema changes what reads give (see `catalog`), so its cache holds the objects
//!   as read under the schema served.
//! - Anything else is an error naming what is wrong; nothing here panics.

use std::borrow::Cow;
use std::sync::Arc;

use serde_json::Value;
use watchkeeper_api::{ResourceDef, field_values_beside_name, labels_of};
use watchkeeper_core::order::RevisionSlot;
use watchkeeper_core::{Object, Revision};

/// Where an object's namespace, name and resource version come from.
#[derive(Clone, Copy, Debug)]
pub enum Identity<'a> {
    /// A stored value: its key names it, and it was last modified at `revision`.
    Key {
        /// The namespace from the key (empty for a cluster-scoped resource).
        namespace: &'a str,
        /// The name from the key.
        name: &'a str,
        /// The key's modification revision.
        revision: Revision,
    },
    /// An upstream object: its own metadata names it and carries its resource version.
    Body,
}

/// Parses a resource version; an upstream's must be integers.
///
/// # Errors
/// A message saying why watchkeeper cannot cache such an upstream.
pub fn parse_revision(value: Option<&Value>) -> Result<Revision, String> {
    let text = value.and_then(Value::as_str).unwrap_or_default();
    text.parse::<Revision>().map_err(|_| {
        format!(
            "the upstream's resourceVersion {text:?} is not an unsigned integer; watchkeeper orders resource versions as integers, as every kube-apiserver issues them, and cannot cache this upstream"
        )
    })
}

/// A cache object of `def` from `body`, identified as `identity` says.
///
/// # Errors
/// The body is not a JSON object; or, for [`Identity::Body`], it has no name or its resource
/// version is not an integer.
pub fn decode(
    def: &ResourceDef,
    body: Value,
    identity: Identity<'_>,
) -> Result<Arc<Object>, String> {
    decode_object(def, body, identity, false).map(Arc::new)
}

/// [`decode`], the object told that its JSON encoding is about `size_hint` bytes long (the
/// length of the stored value it comes from: see [`Object::with_size_hint`]).
///
/// # Errors
/// As [`decode`].
pub fn decode_sized(
    def: &ResourceDef,
    body: Value,
    identity: Identity<'_>,
    size_hint: usize,
) -> Result<Arc<Object>, String> {
    decode_object(def, body, identity, false)
        .map(|object| Arc::new(object.with_size_hint(size_hint)))
}

/// [`decode_sized`] of a write's handed-over value: `written` is its stored value, written by
/// [`watchkeeper_core::order::write_object_without_revision`], which returned `slot`. When
/// decoding leaves the value as it is ([`decodes_as_is`]), the object's JSON encoding is made
/// from `written` ([`Object::with_json_written`]): the bytes a serialization would give, for
/// a copy instead of a second serialization of the write.
///
/// # Errors
/// As [`decode`].
pub fn decode_written(
    def: &ResourceDef,
    body: Value,
    identity: Identity<'_>,
    written: &[u8],
    slot: Option<&RevisionSlot>,
) -> Result<Arc<Object>, String> {
    let slot = slot.filter(|_| decodes_as_is(def, &body, identity));
    decode_object(def, body, identity, false).map(|object| {
        let object = object.with_size_hint(written.len());
        Arc::new(match slot {
            Some(slot) => object.with_json_written(written, slot),
            None => object,
        })
    })
}

/// Whether [`decode`] leaves `body` as it is (but for the resource version it sets), so that
/// the cache object's encoding is the body's at its revision: a stored
/// value ([`Identity::Key`]) with `apiVersion` (a custom resource's the one it is read at) and
/// `kind`, and a metadata map that names the key's name and namespace (none for a
/// cluster-scoped resource).
pub fn decodes_as_is(def: &ResourceDef, body: &Value, identity: Identity<'_>) -> bool {
    let Identity::Key {
        namespace, name, ..
    } = identity
    else {
        return false;
    };
    let Some(map) = body.as_object() else {
        return false;
    };
    let Some(metadata) = map.get("metadata").and_then(Value::as_object) else {
        return false;
    };
    let api_version = if def.is_builtin() {
        map.contains_key("apiVersion")
    } else {
        map.get("apiVersion").and_then(Value::as_str) == Some(def.api_version().as_str())
    };
    let namespace = if namespace.is_empty() {
        !metadata.contains_key("namespace")
    } else {
        metadata.get("namespace").and_then(Value::as_str) == Some(namespace)
    };
    api_version
        && map.contains_key("kind")
        && metadata.get("name").and_then(Value::as_str) == Some(name)
        && namespace
}

fn decode_object(
    def: &ResourceDef,
    mut body: Value,
    identity: Identity<'_>,
    keep_version: bool,
) -> Result<Object, String> {
    let map = body
        .as_object_mut()
        .ok_or_else(|| format!("a {} is not a JSON object", def.kind))?;
    // Keys are looked up before they are inserted: `Map::entry` takes an owned key, an
    // allocation and a free per write for keys a stored value always has.
    if def.is_builtin() {
        if !map.contains_key("apiVersion") {
            map.insert("apiVersion".to_owned(), Value::String(def.api_version()));
        }
    } else if !keep_version || !map.get("apiVersion").is_some_and(Value::is_string) {
        // A custom resource stored before its CRD's storage version changed reads at the new
        // one: with conversion `None`, only `apiVersion` differs (kube's storage converts it).
        map.insert("apiVersion".to_owned(), Value::String(def.api_version()));
    }
    if !map.contains_key("kind") {
        map.insert("kind".to_owned(), Value::String(def.kind.clone()));
    }
    // The key's namespace and name are borrowed from it; an upstream body's are copied out
    // of the body, which the object takes.
    let (namespace, name, revision): (Cow<'_, str>, Cow<'_, str>, Revision) = match identity {
        Identity::Key {
            namespace,
            name,
            revision,
        } => {
            if !map.contains_key("metadata") {
                map.insert("metadata".to_owned(), Value::Object(serde_json::Map::new()));
            }
            let metadata = map
                .get_mut("metadata")
                .and_then(Value::as_object_mut)
                .ok_or_else(|| format!("the metadata of a {} is not an object", def.kind))?;
            // Set only when it differs: a handed-over value names them already (their
            // copies were two allocations and two frees each per write).
            set_text(metadata, "name", name);
            if namespace.is_empty() {
                metadata.remove("namespace");
            } else {
                set_text(metadata, "namespace", namespace);
            }
            (Cow::Borrowed(namespace), Cow::Borrowed(name), revision)
        }
        Identity::Body => {
            let revision = parse_revision(body.pointer("/metadata/resourceVersion"))?;
            let name = body
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
                .ok_or_else(|| format!("an upstream {} has no metadata.name", def.kind))?
                .to_owned();
            let namespace = if def.namespaced {
                body.pointer("/metadata/namespace")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned()
            } else {
                String::new()
            };
            (Cow::Owned(namespace), Cow::Owned(name), revision)
        }
    };
    let labels = labels_of(&body);
    let fields = field_values_beside_name(def, &body);
    Ok(Object::new(
        &namespace, &name, labels, fields, revision, body,
    ))
}

/// `map[key] = text`, leaving an equal string as it is.
fn set_text(map: &mut serde_json::Map<String, Value>, key: &str, text: &str) {
    if map.get(key).and_then(Value::as_str) != Some(text) {
        map.insert(key.to_owned(), Value::String(text.to_owned()));
    }
}

/// The object of `view` (another version of a stored resource) for `stored`, an object at
/// the storage version: its body converted by `conversion` (and pruned by `schema`, the
/// view's structural schema for another version of a custom resource, as kube's
/// `schemaCoercingConverter` prunes what it converts), decoded for `view` (its selectable
/// fields), at the same key and resource version.
///
/// # Errors
/// The converted body is not a JSON object.
pub fn convert(
    view: &ResourceDef,
    conversion: &watchkeeper_api::versions::Conversion,
    schema: Option<&Value>,
    stored: &Object,
) -> Result<Arc<Object>, String> {
    let mut body = conversion.to_view(stored.body());
    if let Some(schema) = schema {
        let _pruned = watchkeeper_api::structural::prune(schema, &mut body);
    }
    decode_sized(
        view,
        body,
        Identity::Key {
            namespace: stored.namespace(),
            name: stored.name(),
            revision: stored.resource_version(),
        },
        stored.size_hint(),
    )
}

/// How the reflection converts a stored object into `view`'s (see
/// [`crate::cache::InputSender::with_view`]); an object that cannot be converted is logged
/// and skipped.
#[must_use]
pub fn view_convert(
    view: &ResourceDef,
    conversion: &watchkeeper_api::versions::Conversion,
    schema: Option<Arc<Value>>,
) -> crate::cache::ViewConvert {
    let view = view.clone();
    let conversion = conversion.clone();
    Arc::new(move |stored| {
        convert(&view, &conversion, schema.as_deref(), stored)
            .inspect_err(|error| {
                tracing::warn!(resource = %crate::cache::name_of(&view), %error, "an object could not be converted; skipped");
            })
            .ok()
    })
}

/// A cache object of `def` from a stored value, at the version it was stored at: its
/// `apiVersion` kept (the storage version's when it has none), no schema applied — what a
/// conversion webhook converts to the storage version when the CRD's storage version changed
/// since (`webhook::conversion`'s earlier stored versions).
///
/// # Errors
/// The value is not a JSON object.
pub fn decode_stored_as_stored(
    def: &ResourceDef,
    namespace: &str,
    name: &str,
    revision: Revision,
    value: &[u8],
) -> Result<Arc<Object>, String> {
    let body: Value = watchkeeper_api::go_json::parse_stored(value)
        .map_err(|e| format!("a stored {} is not JSON: {e}", def.kind))?;
    let identity = Identity::Key {
        namespace,
        name,
        revision,
    };
    decode_object(def, body, identity, true).map(|o| Arc::new(o.with_size_hint(value.len())))
}

/// A cache object from a stored value (JSON bytes) at `key`'s place; see [`decode`]. With
/// `schema` (a custom resource's storage version's structural schema) the body gets its
/// defaults and is pruned first, as kube reads custom resources from etcd.
///
/// # Errors
/// The value is not a JSON object.
pub fn decode_stored(
    def: &ResourceDef,
    schema: Option<&Value>,
    namespace: &str,
    name: &str,
    revision: Revision,
    value: &[u8],
) -> Result<Arc<Object>, String> {
    let mut body: Value = watchkeeper_api::go_json::parse_stored(value)
        .map_err(|e| format!("a stored {} is not JSON: {e}", def.kind))?;
    if let Some(schema) = schema {
        let _pruned = watchkeeper_api::structural::prune_and_default(schema, &mut body);
    }
    decode_sized(
        def,
        body,
        Identity::Key {
            namespace,
            name,
            revision,
        },
        value.len(),
    )
}

//! Objects as the cache holds them, and their shared, lazily cached encodings.
//!
//! An [`Object`] is immutable once built and always handled through an `Arc`. Its selectable
//! attributes (namespace, name, labels, fields) are extracted once, when it enters the cache, so
//! selection never re-parses the body. Its wire encoding is computed at most once per
//! [`Encoding`] and cached inside the object: every watch event, initial-state replay and LIST
//! that carries this object at this resource version shares the same bytes. Counting happens in
//! [`EncodeStats`], which the caller passes in, so several caches can report separately.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use serde_json::Value;

/// A store revision, which is also the Kubernetes resource version of an object or event.
pub type Revision = u64;

/// A wire encoding an object can be serialized into.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Encoding {
    /// `application/json`, in kube-apiserver's field order ([`crate::order`]).
    Json,
    /// `application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1`: the object's metadata
    /// only, as a `meta.k8s.io/v1` `PartialObjectMetadata` (what metadata informers ask for).
    PartialMetadataJson,
}

impl Encoding {
    /// Every encoding, in slot order.
    pub const ALL: [Encoding; 2] = [Encoding::Json, Encoding::PartialMetadataJson];

    pub(crate) const fn slot(self) -> usize {
        match self {
            Encoding::Json => 0,
            Encoding::PartialMetadataJson => 1,
        }
    }
}

const ENCODINGS: usize = Encoding::ALL.len();

/// An encoding the core caches but does not compute: the server's protobuf, which needs the API
/// crate's schemas. `None` when the body has no such encoding (a field outside the schemas);
/// that answer is cached too. A process passes the same function everywhere: the object keeps
/// one slot for it, filled by whichever call comes first.
pub type ExternalEncoder = fn(&Value) -> Option<Bytes>;

/// Counts serializations, so benchmarks can report serializations per event.
#[derive(Debug, Default)]
pub struct EncodeStats {
    serializations: AtomicU64,
}

impl EncodeStats {
    /// Serializations performed so far.
    #[must_use]
    pub fn serializations(&self) -> u64 {
        self.serializations.load(Ordering::Relaxed)
    }

    fn count(&self) {
        self.serializations.fetch_add(1, Ordering::Relaxed);
    }
}

/// Counts one serialization made outside an object (an event's own encoding).
pub(crate) fn count_serialization(stats: &EncodeStats) {
    stats.count();
}

/// One object in the cache: its key, selectable attributes, resource version and body.
#[derive(Debug)]
pub struct Object {
    key: Arc<str>,
    namespace: Arc<str>,
    name: Arc<str>,
    labels: BTreeMap<String, String>,
    fields: BTreeMap<String, String>,
    resource_version: Revision,
    body: Value,
    encoded: [OnceLock<Bytes>; ENCODINGS],
    external: OnceLock<Option<Bytes>>,
}

impl Object {
    /// Builds an object. `body` is the object's JSON; its `metadata.resourceVersion` is set to
    /// `resource_version` here, so every encoding carries the right value. `fields` are the
    /// resource's selectable fields besides `metadata.name` and `metadata.namespace`, which are
    /// always added.
    ///
    /// The key is `namespace/name` for namespaced objects and `name` otherwise, so keys sort
    /// like Kubernetes' etcd keys within one resource.
    #[must_use]
    pub fn new(
        namespace: &str,
        name: &str,
        labels: BTreeMap<String, String>,
        mut fields: BTreeMap<String, String>,
        resource_version: Revision,
        mut body: Value,
    ) -> Object {
        if let Some(metadata) = body.get_mut("metadata").and_then(Value::as_object_mut) {
            metadata.insert(
                "resourceVersion".to_owned(),
                Value::String(resource_version.to_string()),
            );
        }
        fields.insert("metadata.name".to_owned(), name.to_owned());
        fields.insert("metadata.namespace".to_owned(), namespace.to_owned());
        Object {
            key: Arc::from(object_key(namespace, name)),
            namespace: Arc::from(namespace),
            name: Arc::from(name),
            labels,
            fields,
            resource_version,
            body,
            encoded: Default::default(),
            external: OnceLock::new(),
        }
    }

    /// The cache key: `namespace/name`, or `name` for cluster-scoped objects.
    #[must_use]
    pub fn key(&self) -> &Arc<str> {
        &self.key
    }

    /// The namespace, empty for cluster-scoped objects.
    #[must_use]
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The namespace as a shared string (for index lookups without allocating).
    pub(crate) fn namespace_arc(&self) -> &Arc<str> {
        &self.namespace
    }

    /// The name as a shared string.
    pub(crate) fn name_arc(&self) -> &Arc<str> {
        &self.name
    }

    /// The labels.
    #[must_use]
    pub fn labels(&self) -> &BTreeMap<String, String> {
        &self.labels
    }

    /// The selectable fields, including `metadata.name` and `metadata.namespace`.
    #[must_use]
    pub fn fields(&self) -> &BTreeMap<String, String> {
        &self.fields
    }

    /// The value of a selectable field; a field the object does not have reads as empty, as in
    /// Kubernetes' `fields.Set`.
    #[must_use]
    pub fn field(&self, name: &str) -> &str {
        self.fields.get(name).map_or("", String::as_str)
    }

    /// The resource version this object was last modified at.
    #[must_use]
    pub fn resource_version(&self) -> Revision {
        self.resource_version
    }

    /// The decoded body, with `metadata.resourceVersion` set.
    #[must_use]
    pub fn body(&self) -> &Value {
        &self.body
    }

    /// The object encoded in `encoding`, serialized on first use and cached.
    pub fn encoded(&self, encoding: Encoding, stats: &EncodeStats) -> &Bytes {
        self.encoded[encoding.slot()].get_or_init(|| {
            stats.count();
            encode(&self.body, encoding)
        })
    }

    /// The object in the external encoding ([`ExternalEncoder`]), computed on first use and
    /// cached like the others (a failure too): `None` when the body has no such encoding.
    pub fn encoded_external(
        &self,
        encoder: ExternalEncoder,
        stats: &EncodeStats,
    ) -> Option<&Bytes> {
        self.external
            .get_or_init(|| {
                stats.count();
                encoder(&self.body)
            })
            .as_ref()
    }

    /// The body at another resource version in the external encoding (see
    /// [`Object::encode_at`]); not cached here.
    pub(crate) fn encode_external_at(
        &self,
        resource_version: Revision,
        encoder: ExternalEncoder,
    ) -> Option<Bytes> {
        encoder(&self.body_at(resource_version))
    }

    /// Whether the encoding is already cached (for tests and reports).
    #[must_use]
    pub fn is_encoded(&self, encoding: Encoding) -> bool {
        self.encoded[encoding.slot()].get().is_some()
    }

    /// The body as it reads at another resource version: the encoding a DELETED event carries
    /// (the previous object with the deletion's resource version). Not cached here; events
    /// cache it.
    pub(crate) fn encode_at(&self, resource_version: Revision, encoding: Encoding) -> Bytes {
        encode(&self.body_at(resource_version), encoding)
    }

    fn body_at(&self, resource_version: Revision) -> Value {
        let mut body = self.body.clone();
        if let Some(metadata) = body.get_mut("metadata").and_then(Value::as_object_mut) {
            metadata.insert(
                "resourceVersion".to_owned(),
                Value::String(resource_version.to_string()),
            );
        }
        body
    }
}

/// The cache key of an object.
#[must_use]
pub fn object_key(namespace: &str, name: &str) -> String {
    if namespace.is_empty() {
        name.to_owned()
    } else {
        format!("{namespace}/{name}")
    }
}

fn encode(body: &Value, encoding: Encoding) -> Bytes {
    match encoding {
        // kube-apiserver's field order (`kind`, `apiVersion`, `metadata`, `spec`, `status`):
        // see [`crate::order`].
        Encoding::Json => {
            let mut out = Vec::with_capacity(128);
            crate::order::write_object(&mut out, body);
            cached(out)
        }
        Encoding::PartialMetadataJson => {
            let mut out = Vec::with_capacity(256);
            out.extend_from_slice(
                br#"{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":"#,
            );
            let metadata = body.get("metadata").unwrap_or(&Value::Null);
            if metadata.is_object() {
                crate::order::write_metadata(&mut out, metadata);
            } else {
                out.extend_from_slice(b"{}");
            }
            out.push(b'}');
            cached(out)
        }
    }
}

/// An encoding to cache: without the growth slack of the serializer's buffer (up to as much
/// again as the text), which would otherwise live as long as the object.
fn cached(mut out: Vec<u8>) -> Bytes {
    out.shrink_to_fit();
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn partial_metadata_is_the_metadata_alone_and_cached_apart() {
        let stats = EncodeStats::default();
        let object = Object::new(
            "default",
            "a",
            BTreeMap::new(),
            BTreeMap::new(),
            7,
            json!({"kind": "ConfigMap", "apiVersion": "v1",
                   "metadata": {"name": "a", "resourceVersion": "7", "labels": {"x": "y"}},
                   "data": {"big": "z"}}),
        );
        let partial = object
            .encoded(Encoding::PartialMetadataJson, &stats)
            .clone();
        let value: Value = serde_json::from_slice(&partial).unwrap();
        assert_eq!(
            value,
            json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                   "metadata": {"name": "a", "resourceVersion": "7", "labels": {"x": "y"}}})
        );
        assert!(!object.is_encoded(Encoding::Json));
        object.encoded(Encoding::Json, &stats);
        object.encoded(Encoding::PartialMetadataJson, &stats);
        assert_eq!(stats.serializations(), 2);
        let deleted: Value =
            serde_json::from_slice(&object.encode_at(9, Encoding::PartialMetadataJson)).unwrap();
        assert_eq!(deleted["metadata"]["resourceVersion"], "9");
        assert_eq!(deleted["kind"], "PartialObjectMetadata");
    }

    fn resource_version_bytes(body: &Value) -> Option<Bytes> {
        let rv = body.pointer("/metadata/resourceVersion")?.as_str()?;
        (rv != "refused").then(|| Bytes::from(format!("rv={rv}")))
    }

    #[test]
    fn the_external_encoding_is_computed_once_and_a_failure_is_cached_too() {
        let stats = EncodeStats::default();
        let object = Object::new(
            "default",
            "a",
            BTreeMap::new(),
            BTreeMap::new(),
            7,
            json!({"metadata": {"name": "a"}}),
        );
        let first = object
            .encoded_external(resource_version_bytes, &stats)
            .cloned();
        assert_eq!(first.as_deref(), Some(&b"rv=7"[..]));
        let again = object.encoded_external(resource_version_bytes, &stats);
        assert_eq!(
            again.map(|b| b.as_ptr()),
            first.as_ref().map(|b| b.as_ptr())
        );
        assert_eq!(stats.serializations(), 1);
        assert!(!object.is_encoded(Encoding::Json));
        assert_eq!(
            object
                .encode_external_at(9, resource_version_bytes)
                .as_deref(),
            Some(&b"rv=9"[..])
        );
        let refused = Object::new(
            "default",
            "b",
            BTreeMap::new(),
            BTreeMap::new(),
            7,
            json!({"metadata": {"name": "b"}}),
        );
        let never = |_: &Value| None;
        assert!(refused.encoded_external(never, &stats).is_none());
        assert!(refused.encoded_external(never, &stats).is_none());
        assert_eq!(stats.serializations(), 2);
    }

    #[test]
    fn encoding_is_computed_once_and_carries_the_resource_version() {
        let stats = EncodeStats::default();
        let object = Object::new(
            "default",
            "a",
            BTreeMap::new(),
            BTreeMap::new(),
            42,
            json!({"metadata": {"name": "a", "resourceVersion": "7"}}),
        );
        assert_eq!(&**object.key(), "default/a");
        assert_eq!(object.field("metadata.namespace"), "default");
        assert_eq!(object.field("spec.nodeName"), "");
        let first = object.encoded(Encoding::Json, &stats).clone();
        let second = object.encoded(Encoding::Json, &stats).clone();
        assert_eq!(first, second);
        assert_eq!(stats.serializations(), 1);
        let parsed: Value = serde_json::from_slice(&first).unwrap();
        assert_eq!(parsed["metadata"]["resourceVersion"], "42");
        let at: Value = serde_json::from_slice(&object.encode_at(50, Encoding::Json)).unwrap();
        assert_eq!(at["metadata"]["resourceVersion"], "50");
    }
}

//! Objects as the cache holds them, and their shared, lazily cached encodings.
//!
//! An [`Object`] is immutable once built and always handled through an `Arc`. Its selectable
//! attributes (namespace, name, labels, fields) are extracted once, when it enters the cache, so
//! selection never re-parses the body. Its wire encoding is computed at most once per
//! [`Encoding`] and cached inside the object: every watch event, initial-state replay and LIST
//! that carries this object at this resource version shares the same bytes. The JSON encoding
//! is written inside the JSON watch frame of a MODIFIED event ([`Object::modified_frame`]), so
//! that frame is one shared buffer too. Counting happens in [`EncodeStats`], which the caller
//! passes in, so several caches can report separately.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use serde_json::Value;

pub use crate::metrics::EncodeStats;

/// A store revision, which is also the Kubernetes resource version of an object or event.
pub type Revision = u64;

/// An object's labels or selectable fields: its pairs sorted by key, in one exactly sized
/// allocation. Every cached object (the history's included) holds two; as `BTreeMap`s each
/// took a 544-byte B-tree node even for one or two pairs, about 1 KiB per object and 8 % of
/// what a write leaves on the heap (BENCHMARKS.md, invocation AR); here a pair takes 48 bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Attributes(Box<[(String, String)]>);

impl Attributes {
    /// The value of `key`, if present (a binary search).
    #[must_use]
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .binary_search_by(|(k, _)| k.as_str().cmp(key))
            .ok()
            .map(|at| self.0[at].1.as_str())
    }

    /// The pairs, sorted by key.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// How many pairs.
    #[must_use]
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The pairs as a map.
    #[must_use]
    pub fn to_map(&self) -> BTreeMap<String, String> {
        self.0.iter().cloned().collect()
    }
}

impl From<BTreeMap<String, String>> for Attributes {
    fn from(map: BTreeMap<String, String>) -> Attributes {
        // A map iterates in key order: the pairs are sorted and unique.
        Attributes(map.into_iter().collect())
    }
}

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

/// One object in the cache: its key, selectable attributes, resource version and body.
#[derive(Debug)]
pub struct Object {
    key: Arc<str>,
    namespace: Arc<str>,
    name: Arc<str>,
    labels: Attributes,
    fields: Attributes,
    resource_version: Revision,
    body: Value,
    /// About how long the JSON encoding is, bytes (0: not known); see [`Object::with_size_hint`].
    size_hint: usize,
    /// The body's heap bytes and estimated JSON length ([`crate::weight::measure`]), for
    /// [`Object::weight`] and [`Object::json_size`].
    measure: crate::weight::Measure,
    encoded: [OnceLock<Bytes>; ENCODINGS],
    /// The JSON encoding's buffer: [`MODIFIED_FRAME_HEAD`], the encoding, [`FRAME_TAIL`] —
    /// a JSON watcher's whole MODIFIED frame, the encoding being a slice of it (set with
    /// it; see [`Object::modified_frame`]).
    json_frame: OnceLock<Bytes>,
    /// Where the `metadata` map is in the JSON encoding (set with it, when `metadata` is a map).
    metadata_span: OnceLock<Range<usize>>,
    external: OnceLock<Option<Bytes>>,
    /// Set when the cache let this version go while others still held it: the account its
    /// weight moved to, which it leaves when the object is dropped (see
    /// [`crate::metrics::MemoryAccount`]'s released versions).
    released: OnceLock<Arc<crate::metrics::MemoryAccount>>,
}

impl Drop for Object {
    fn drop(&mut self) {
        if let Some(account) = self.released.get() {
            account.unrelease(self.weight());
        }
        // A deep body without recursion, on whatever thread drops it last (`core::stack`).
        if self.measure.depth > crate::stack::FLAT_DROP_DEPTH {
            crate::stack::drop_flat(std::mem::take(&mut self.body));
        }
    }
}

/// What a JSON encoding may need beyond its size hint: the length of the stored value it was
/// decoded from leaves out `"resourceVersion":"<up to 20 digits>",` (42 bytes at most).
const HINT_MARGIN: usize = 64;

/// The first buffer of an encoding without a size hint (`serde_json::to_vec`'s).
const UNHINTED_CAPACITY: usize = 128;

/// The text before an object in a JSON watcher's MODIFIED event frame
/// (`{"type":"MODIFIED","object":<object>}` and a newline, as kube-apiserver streams them).
pub const MODIFIED_FRAME_HEAD: &[u8] = b"{\"type\":\"MODIFIED\",\"object\":";

/// The text after the object in a JSON watch event frame.
pub const FRAME_TAIL: &[u8] = b"}\n";

/// The head of a `PartialObjectMetadata` encoding; the metadata and `}` follow.
const PARTIAL_METADATA_HEAD: &[u8] =
    br#"{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":"#;

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
            let mut digits = [0u8; 20];
            let revision = crate::order::decimal(resource_version, &mut digits);
            match metadata.get_mut("resourceVersion") {
                // A body that has one (a write's handed-over value, an upstream's object)
                // keeps its key and its string's buffer: no allocation, no free.
                Some(Value::String(text)) => {
                    text.clear();
                    text.push_str(revision);
                }
                _ => {
                    metadata.insert(
                        "resourceVersion".to_owned(),
                        Value::String(revision.to_owned()),
                    );
                }
            }
        }
        fields.insert("metadata.name".to_owned(), name.to_owned());
        fields.insert("metadata.namespace".to_owned(), namespace.to_owned());
        let measure = crate::weight::measure(&body);
        Object {
            key: Arc::from(object_key(namespace, name)),
            namespace: Arc::from(namespace),
            name: Arc::from(name),
            labels: Attributes::from(labels),
            fields: Attributes::from(fields),
            resource_version,
            body,
            size_hint: 0,
            measure,
            encoded: Default::default(),
            json_frame: OnceLock::new(),
            metadata_span: OnceLock::new(),
            external: OnceLock::new(),
            released: OnceLock::new(),
        }
    }

    /// Whether the cache let this version go (it is neither live nor in a history) while it
    /// was still held elsewhere: a watcher's queue, a snapshot, a request. Its weight counts as
    /// released until its last holder drops it ([`crate::metrics::MemoryAccount`]).
    #[must_use]
    pub fn is_released(&self) -> bool {
        self.released.get().is_some()
    }

    /// Counts `object`'s weight in `account`'s released versions until it is dropped. The
    /// caller (the history, letting the version go) knows it is held elsewhere; a version is
    /// counted once.
    pub(crate) fn release(object: &Arc<Object>, account: &Arc<crate::metrics::MemoryAccount>) {
        if object.released.set(account.clone()).is_ok() {
            account.release(object.weight());
        }
    }

    /// The object, told about how long its JSON encoding is (`bytes`: the length of the
    /// stored value it was decoded from, which is the encoding but for the resource version).
    /// Its encodings are then written into one buffer of about that size, instead of one
    /// doubled from 128 bytes (a copy per doubling) and shrunk at the end. Only a hint: any
    /// value gives the same bytes.
    #[must_use]
    pub fn with_size_hint(mut self, bytes: usize) -> Object {
        self.size_hint = bytes;
        self
    }

    /// The object, its JSON encoding made from `written`, the text
    /// [`crate::order::write_object_without_revision`] wrote of its body without
    /// `metadata.resourceVersion` (a write's stored value), and the `slot` that returned: the
    /// resource version is put in its place, so the encoding every watcher and the writer's
    /// answer share costs a copy, not a second serialization. The caller passes the text of
    /// this body (checked in debug builds); `written` too short for `slot` leaves the
    /// encoding to be serialized on first use, as without this.
    #[must_use]
    pub fn with_json_written(self, written: &[u8], slot: &crate::order::RevisionSlot) -> Object {
        let Some((frame, span)) = slot.insert_within(
            written,
            self.resource_version,
            MODIFIED_FRAME_HEAD,
            FRAME_TAIL,
        ) else {
            return self;
        };
        let json = self.set_json_frame(Bytes::from(frame));
        #[cfg(debug_assertions)]
        {
            let mut expected = Vec::new();
            let expected_span = crate::order::write_object_spanned(&mut expected, &self.body, None);
            debug_assert!(
                json == expected && expected_span.as_ref() == Some(&span),
                "a written encoding differs from the body's: {} against {}",
                String::from_utf8_lossy(&json),
                String::from_utf8_lossy(&expected)
            );
        }
        let _ = self.encoded[Encoding::Json.slot()].set(json);
        let _ = self.metadata_span.set(span);
        self
    }

    /// The size hint given ([`Object::with_size_hint`]); 0 when none was.
    #[must_use]
    pub fn size_hint(&self) -> usize {
        self.size_hint
    }

    /// About how many bytes the object's JSON encoding has: the size hint when there is one,
    /// the encoding's length when it is cached, else an estimate from the body (strings and
    /// keys by length, punctuation counted, numbers as 8 bytes) made when the object was built
    /// ([`crate::weight::measure`]). Part of [`Object::weight`].
    #[must_use]
    pub fn json_size(&self) -> usize {
        if self.size_hint > 0 {
            return self.size_hint;
        }
        if let Some(json) = self.encoded[Encoding::Json.slot()].get() {
            return json.len();
        }
        self.measure.json
    }

    /// About how many bytes of memory the object holds: its own allocation, its key and
    /// attributes, its decoded body ([`crate::weight`]) and its JSON encoding (counted whether
    /// or not it is made yet: nearly every cached object is sent once). What the history's
    /// byte bound and the server's bound on cached objects count. The partial-metadata and
    /// external encodings, made only when asked for, are not counted. Fixed once the object
    /// is built (the JSON is counted by the size hint or the estimate, never by an encoding
    /// made later), so what a gauge adds for an object is what it takes out.
    #[must_use]
    pub fn weight(&self) -> usize {
        use crate::weight::allocation;
        let arc_str = |text: &str| allocation(2 * 8 + text.len());
        let attributes = |set: &Attributes| {
            allocation(set.len() * 2 * std::mem::size_of::<String>())
                + set
                    .iter()
                    .map(|(k, v)| allocation(k.len()) + allocation(v.len()))
                    .sum::<usize>()
        };
        allocation(2 * 8 + std::mem::size_of::<Object>())
            + arc_str(&self.key)
            + arc_str(&self.namespace)
            + arc_str(&self.name)
            + attributes(&self.labels)
            + attributes(&self.fields)
            + self.measure.heap
            + if self.size_hint > 0 {
                self.size_hint
            } else {
                self.measure.json
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
    pub fn labels(&self) -> &Attributes {
        &self.labels
    }

    /// The selectable fields, including `metadata.name` and `metadata.namespace`.
    #[must_use]
    pub fn fields(&self) -> &Attributes {
        &self.fields
    }

    /// The value of a selectable field; a field the object does not have reads as empty, as in
    /// Kubernetes' `fields.Set`.
    #[must_use]
    pub fn field(&self, name: &str) -> &str {
        self.fields.get(name).unwrap_or("")
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
            self.encode(encoding)
        })
    }

    /// A JSON watcher's whole MODIFIED frame of this object ([`MODIFIED_FRAME_HEAD`], the
    /// JSON encoding, [`FRAME_TAIL`]): one buffer shared by every such watcher, the JSON
    /// encoding being the middle of it, so a watch sends one piece per event instead of three
    /// and nothing is copied or kept twice. Made with the JSON encoding (serialized here on
    /// first use like [`Object::encoded`]). Both ways of making the encoding make the frame
    /// with it, so this is never `None` once the encoding is made.
    pub fn modified_frame(&self, stats: &EncodeStats) -> Option<&Bytes> {
        self.encoded(Encoding::Json, stats);
        self.json_frame.get()
    }

    /// Keeps `frame` (a MODIFIED frame around the JSON encoding) and returns the encoding,
    /// the slice between its head and tail.
    fn set_json_frame(&self, frame: Bytes) -> Bytes {
        let json = frame.slice(MODIFIED_FRAME_HEAD.len()..frame.len() - FRAME_TAIL.len());
        let _ = self.json_frame.set(frame);
        json
    }

    /// The first buffer for the JSON encoding.
    fn json_capacity(&self) -> usize {
        match self.encoded[Encoding::Json.slot()].get() {
            Some(json) => json.len() + HINT_MARGIN,
            None if self.size_hint > 0 => self.size_hint + HINT_MARGIN,
            None => UNHINTED_CAPACITY,
        }
    }

    /// The first buffer for the partial metadata encoding: its own length or the metadata's
    /// when known, else the whole object's (an upper bound: shrunk when done), else small.
    fn metadata_capacity(&self) -> usize {
        if let Some(partial) = self.encoded[Encoding::PartialMetadataJson.slot()].get() {
            partial.len() + HINT_MARGIN
        } else if let Some(span) = self.metadata_span.get() {
            PARTIAL_METADATA_HEAD.len() + span.len() + 1 + HINT_MARGIN
        } else if self.size_hint > 0 {
            PARTIAL_METADATA_HEAD.len() + self.size_hint + HINT_MARGIN
        } else {
            2 * UNHINTED_CAPACITY
        }
    }

    /// Serializes the body in `encoding` (at another resource version with `revision`).
    fn encode_with(&self, encoding: Encoding, revision: Option<&Value>) -> Bytes {
        match encoding {
            // kube-apiserver's field order (`kind`, `apiVersion`, `metadata`, `spec`,
            // `status`): see [`crate::order`].
            // At another resource version (a DELETED event's, not framed).
            Encoding::Json if revision.is_some() => {
                let mut out = Vec::with_capacity(self.json_capacity());
                crate::order::write_object_spanned(&mut out, &self.body, revision);
                cached(out)
            }
            // Written inside its MODIFIED frame (see [`Object::modified_frame`]).
            Encoding::Json => {
                let head = MODIFIED_FRAME_HEAD.len();
                let mut out = Vec::with_capacity(head + self.json_capacity() + FRAME_TAIL.len());
                out.extend_from_slice(MODIFIED_FRAME_HEAD);
                let span = crate::order::write_object_spanned(&mut out, &self.body, None);
                if let Some(span) = span {
                    let _ = self.metadata_span.set(span.start - head..span.end - head);
                }
                out.extend_from_slice(FRAME_TAIL);
                self.set_json_frame(cached(out))
            }
            Encoding::PartialMetadataJson => {
                let metadata = self.body.get("metadata").unwrap_or(&Value::Null);
                // The JSON encoding's metadata is this encoding's: copied when it is there.
                if revision.is_none()
                    && let (Some(json), Some(span)) = (
                        self.encoded[Encoding::Json.slot()].get(),
                        self.metadata_span.get(),
                    )
                {
                    let mut out = Vec::with_capacity(PARTIAL_METADATA_HEAD.len() + span.len() + 1);
                    out.extend_from_slice(PARTIAL_METADATA_HEAD);
                    out.extend_from_slice(&json[span.clone()]);
                    out.push(b'}');
                    return Bytes::from(out);
                }
                let mut out = Vec::with_capacity(self.metadata_capacity());
                out.extend_from_slice(PARTIAL_METADATA_HEAD);
                match (metadata.is_object(), revision) {
                    (false, _) => out.extend_from_slice(b"{}"),
                    (true, None) => crate::order::write_metadata(&mut out, metadata),
                    (true, Some(revision)) => {
                        crate::order::write_metadata_at(&mut out, metadata, revision);
                    }
                }
                out.push(b'}');
                cached(out)
            }
        }
    }

    /// Serializes the body in `encoding`.
    fn encode(&self, encoding: Encoding) -> Bytes {
        self.encode_with(encoding, None)
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
        // Written with the resource version overridden: the bytes of a copy of the body with
        // it set ([`Object::body_at`]), without the copy.
        let revision = Value::String(resource_version.to_string());
        self.encode_with(encoding, Some(&revision))
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
        return name.to_owned();
    }
    // Joined by hand, not with `format!`: every write and every decoded object builds one.
    let mut key = String::with_capacity(namespace.len() + 1 + name.len());
    key.push_str(namespace);
    key.push('/');
    key.push_str(name);
    key
}

/// An encoding to cache: without large growth slack, which would otherwise live as long as
/// the object (a buffer doubled from a small one can be up to twice the text). The little a
/// hinted buffer has left is kept rather than paid for with a reallocation.
fn cached(mut out: Vec<u8>) -> Bytes {
    if out.capacity() - out.len() > out.len() / 32 + HINT_MARGIN {
        out.shrink_to_fit();
    }
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Goal: a cached object nested far deeper than any thread's stack would hold for
    /// serde_json's recursive drop (100,000 levels of maps and arrays in turn) is dropped on
    /// 256 KiB of stack, whichever holder drops it last; its measured depth is its
    /// nesting. (Without the flat drop the drop overflows that stack and the test binary
    /// dies.)
    #[test]
    fn a_deep_object_drops_without_recursing() {
        let levels = 100_000;
        let mut body = json!(1);
        for level in 0..levels {
            // Moved in, not through `json!`, whose interpolation serializes (recursively).
            body = if level % 2 == 0 {
                Value::Array(vec![body, json!("x")])
            } else {
                Value::Object(
                    [("a".to_owned(), body), ("b".to_owned(), json!(2))]
                        .into_iter()
                        .collect(),
                )
            };
        }
        let mut outer = json!({"metadata": {"name": "deep"}});
        outer["spec"] = body;
        let body = outer;
        let object = Arc::new(Object::new(
            "ns",
            "deep",
            BTreeMap::new(),
            BTreeMap::new(),
            1,
            body,
        ));
        assert_eq!(object.measure.depth, levels + 1);
        let held = Arc::clone(&object);
        drop(object);
        // The last holder drops it on a stack of 256 KiB (a segment of its own: the core
        // starts no thread).
        stacker::grow(256 << 10, move || drop(held));
        let shallow = crate::weight::measure(&json!({"a": [1, {"b": {}}], "c": "d"}));
        assert_eq!(shallow.depth, 4);
        assert_eq!(crate::weight::measure(&json!(1)).depth, 0);
    }

    /// Goal: attributes answer every lookup as the map they were built from, in its order,
    /// and give the map back.
    #[test]
    fn attributes_answer_as_their_map() {
        let map: BTreeMap<String, String> = [("b", "2"), ("a", "1"), ("d", ""), ("c/x.y", "3")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        let attributes = Attributes::from(map.clone());
        for key in ["a", "b", "c/x.y", "d", "", "0", "aa", "c", "e", "z"] {
            assert_eq!(
                attributes.get(key),
                map.get(key).map(String::as_str),
                "{key:?}"
            );
        }
        let pairs: Vec<(&str, &str)> = attributes.iter().collect();
        assert_eq!(pairs, [("a", "1"), ("b", "2"), ("c/x.y", "3"), ("d", "")]);
        assert_eq!(attributes.len(), 4);
        assert_eq!(attributes.to_map(), map);
        let empty = Attributes::from(BTreeMap::new());
        assert!(empty.is_empty());
        assert_eq!(empty.get("a"), None);
    }

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

    /// The encodings as they were written before size hints and overrides: from a copy of the
    /// body with the resource version set, into a fresh buffer.
    fn reference(body: &Value, revision: Option<Revision>, encoding: Encoding) -> Vec<u8> {
        let mut body = body.clone();
        if let Some(revision) = revision
            && let Some(metadata) = body.get_mut("metadata").and_then(Value::as_object_mut)
        {
            metadata.insert(
                "resourceVersion".to_owned(),
                Value::String(revision.to_string()),
            );
        }
        let mut out = Vec::new();
        match encoding {
            Encoding::Json => crate::order::write_object(&mut out, &body),
            Encoding::PartialMetadataJson => {
                out.extend_from_slice(PARTIAL_METADATA_HEAD);
                match body.get("metadata") {
                    Some(metadata) if metadata.is_object() => {
                        crate::order::write_metadata(&mut out, metadata);
                    }
                    _ => out.extend_from_slice(b"{}"),
                }
                out.push(b'}');
            }
        }
        out
    }

    /// Object `ns/a` at revision 17 with `body`, its encodings sized from `hint`.
    /// Goal: an object's weight is fixed once it is built, with or without a size hint:
    /// encoding it later changes nothing, so a gauge takes out what it added.
    #[test]
    fn the_weight_does_not_change_when_the_object_is_encoded() {
        let stats = EncodeStats::default();
        let body = serde_json::json!({"metadata": {"name": "x"}, "data": {"k": "v".repeat(500)}});
        for hint in [0, 600] {
            let object = hinted(&body, hint);
            let before = object.weight();
            assert!(before > 500 + 600, "{before}");
            object.encoded(Encoding::Json, &stats);
            object.encoded(Encoding::PartialMetadataJson, &stats);
            assert_eq!(object.weight(), before, "hint {hint}");
        }
    }

    fn hinted(body: &Value, hint: usize) -> Object {
        Object::new(
            "ns",
            "a",
            BTreeMap::new(),
            BTreeMap::new(),
            17,
            body.clone(),
        )
        .with_size_hint(hint)
    }

    fn bodies() -> Vec<Value> {
        let big = "x".repeat(10_000);
        vec![
            json!({"kind": "Pod", "apiVersion": "v1",
                   "metadata": {"name": "a", "namespace": "default", "uid": "u",
                                "annotations": {"a": big.clone()},
                                "managedFields": [{"manager": "m", "operation": "Update"}]},
                   "spec": {"containers": [{"name": "c", "image": big}]}, "status": {}}),
            json!({"kind": "ConfigMap", "metadata": {"name": "b"}, "data": {"k": "v"}}),
            json!({"metadata": "not a map", "data": 1}),
            json!({"data": [1, 2, 3]}),
            json!([{"metadata": {"name": "c"}}]),
        ]
    }

    #[test]
    fn hinted_encodings_are_the_unhinted_bytes() {
        let stats = EncodeStats::default();
        for body in bodies() {
            let exact = reference(&body, None, Encoding::Json).len();
            for hint in [0, 1, exact / 2, exact, exact + 10, 4 * exact + 1000] {
                // Each encoding alone, and the metadata after the JSON encoding (copied).
                for order in [
                    [Encoding::Json, Encoding::PartialMetadataJson],
                    [Encoding::PartialMetadataJson, Encoding::Json],
                ] {
                    let object = hinted(&body, hint);
                    assert_eq!(object.size_hint(), hint);
                    for encoding in order {
                        assert_eq!(
                            String::from_utf8_lossy(object.encoded(encoding, &stats)),
                            String::from_utf8_lossy(&reference(object.body(), None, encoding)),
                            "{encoding:?} after {order:?}, hint {hint}: {body}"
                        );
                    }
                    assert_framed(&object, &stats);
                }
            }
        }
    }

    /// The object's MODIFIED frame is its JSON encoding between the frame's head and tail,
    /// in the same buffer (the encoding is not a copy), and one JSON document.
    fn assert_framed(object: &Object, stats: &EncodeStats) {
        let json = object.encoded(Encoding::Json, stats).clone();
        let frame = object
            .modified_frame(stats)
            .expect("made with the encoding");
        assert_eq!(frame[..MODIFIED_FRAME_HEAD.len()], *MODIFIED_FRAME_HEAD);
        assert_eq!(frame[frame.len() - FRAME_TAIL.len()..], *FRAME_TAIL);
        assert_eq!(
            frame.as_ptr().wrapping_add(MODIFIED_FRAME_HEAD.len()),
            json.as_ptr()
        );
        assert_eq!(
            frame.len(),
            MODIFIED_FRAME_HEAD.len() + json.len() + FRAME_TAIL.len()
        );
        let event: Value = serde_json::from_slice(frame).unwrap();
        assert_eq!(event["type"], "MODIFIED");
        assert_eq!(event["object"], *object.body());
    }

    /// Goal: an object given its JSON from the text written without its resource version has
    /// the encodings it would have serialized (the metadata one copied from it), serializes
    /// nothing for them, and text that cannot be that object's is not used.
    #[test]
    fn an_encoding_from_the_written_text_is_the_serialized_bytes() {
        for body in bodies() {
            let mut without = body.clone();
            if let Some(metadata) = without.get_mut("metadata").and_then(Value::as_object_mut) {
                metadata.remove("resourceVersion");
            }
            let mut written = Vec::new();
            let Some(slot) = crate::order::write_object_without_revision(&mut written, &without)
            else {
                assert!(
                    !body.get("metadata").is_some_and(Value::is_object),
                    "{body}"
                );
                continue;
            };
            let stats = EncodeStats::default();
            let object = hinted(&body, written.len()).with_json_written(&written, &slot);
            assert!(object.is_encoded(Encoding::Json));
            for encoding in [Encoding::PartialMetadataJson, Encoding::Json] {
                assert_eq!(
                    String::from_utf8_lossy(object.encoded(encoding, &stats)),
                    String::from_utf8_lossy(&reference(object.body(), None, encoding)),
                    "{encoding:?}: {body}"
                );
            }
            assert_eq!(stats.serializations(), 1, "the metadata's copy only");
            assert_framed(&object, &stats);
            let truncated = hinted(&body, 0).with_json_written(&written[..1], &slot);
            assert!(!truncated.is_encoded(Encoding::Json));
        }
    }

    #[test]
    fn an_encoding_at_another_revision_is_the_bytes_of_a_copy_at_it() {
        let stats = EncodeStats::default();
        for body in bodies() {
            for hint in [0, 100, 100_000] {
                for revision in [1, 9, 12_345_678_901_234_567_890] {
                    for cached in [
                        None,
                        Some(Encoding::Json),
                        Some(Encoding::PartialMetadataJson),
                    ] {
                        let object = hinted(&body, hint);
                        if let Some(encoding) = cached {
                            object.encoded(encoding, &stats);
                        }
                        for encoding in Encoding::ALL {
                            assert_eq!(
                                String::from_utf8_lossy(&object.encode_at(revision, encoding)),
                                String::from_utf8_lossy(&reference(
                                    object.body(),
                                    Some(revision),
                                    encoding
                                )),
                                "{encoding:?} at {revision}, {cached:?} cached, hint {hint}: {body}"
                            );
                        }
                        // The object's own encodings are untouched.
                        assert_eq!(
                            object.encoded(Encoding::Json, &stats)[..],
                            reference(object.body(), None, Encoding::Json)[..]
                        );
                    }
                }
            }
        }
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

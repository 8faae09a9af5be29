//! JSON text in kube-apiserver's field order.
//!
//! kube-apiserver encodes Go structs, so its fields come in declaration order (`kind`,
//! `apiVersion`, `metadata`, `spec`, `status`; a Status's `status`, `message`, `reason`,
//! `details`, `code`). serde_json's maps (without its `preserve_order` feature) are sorted by
//! key, so these functions write the text themselves. Clients notice: a typed decoder's error
//! names the position of `kind` (kube-rs' "expected Pod at line 1 column 17"), and tests
//! compare bytes.
//!
//! ## Guarantees
//! - The text parses back to the given value (only the order of keys differs from
//!   `serde_json::to_vec`), but for numbers: each is written as kube-apiserver writes it
//!   after its storage round trip ([`crate::gonum::write_json_number`]: `1.0` is `1`, `-0.0`
//!   is `0`, `1e21` is `1e+21`, `u64::MAX` is `18446744073709552000`), which parses back to
//!   the same number's value but not always to serde_json's same variant (`1.0` reads back
//!   as the integer `1`); [`write_object_marshalled`] writes them as Go's `json.Marshal`
//!   does instead (a YAML body's conversion to JSON).
//! - Known keys come first in Go's order; any other keys follow in sorted order. Nested maps
//!   with a known Go order (`metadata`, its owner references and managed fields entries, a
//!   Status's `details` and their `causes`) are ordered too; any other nested map is written
//!   as serde_json writes it (sorted), so the cost over `serde_json::to_vec` is a few key
//!   lookups per object.
//! - Every string, key and sorted value but a float is byte for byte serde_json's text (the
//!   same escapes), written here: runs of bytes that need no escape are found eight at a time.
//! - Deterministic: the same value always gives the same bytes.

use std::ops::Range;

use serde_json::{Map, Value};

/// How [`write_value`] writes numbers.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Numbers {
    /// As kube-apiserver answers them after its storage round trip
    /// ([`crate::gonum::write_json_number`]).
    RoundTrip,
    /// As Go's `json.Marshal` writes them ([`write_object_marshalled`]).
    Marshalled,
}

/// `metav1.Status` field order.
const STATUS_ORDER: &[&str] = &[
    "kind",
    "apiVersion",
    "metadata",
    "status",
    "message",
    "reason",
    "details",
    "code",
];

/// `metav1.StatusDetails` field order.
const DETAILS_ORDER: &[&str] = &[
    "name",
    "group",
    "kind",
    "uid",
    "causes",
    "retryAfterSeconds",
];

/// `metav1.StatusCause` field order.
const CAUSE_ORDER: &[&str] = &["reason", "message", "field"];

/// Top-level order of an object: `TypeMeta`, `ObjectMeta`, then spec and status (the order
/// of every built-in kind that has them).
const OBJECT_ORDER: &[&str] = &["kind", "apiVersion", "metadata", "spec", "status"];

/// `metav1.ObjectMeta` field order.
const METADATA_ORDER: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

/// `metav1.OwnerReference` field order.
const OWNER_REFERENCE_ORDER: &[&str] = &[
    "apiVersion",
    "kind",
    "name",
    "uid",
    "controller",
    "blockOwnerDeletion",
];

/// `metav1.ManagedFieldsEntry` field order.
const MANAGED_FIELDS_ORDER: &[&str] = &[
    "manager",
    "operation",
    "apiVersion",
    "time",
    "fieldsType",
    "fieldsV1",
    "subresource",
];

/// How to order the keys of a map and of the maps under it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Layout {
    Sorted,
    Status,
    Details,
    Cause,
    Object,
    Metadata,
    OwnerReference,
    ManagedFields,
}

impl Layout {
    fn order(self) -> &'static [&'static str] {
        match self {
            Layout::Sorted => &[],
            Layout::Status => STATUS_ORDER,
            Layout::Details => DETAILS_ORDER,
            Layout::Cause => CAUSE_ORDER,
            Layout::Object => OBJECT_ORDER,
            Layout::Metadata => METADATA_ORDER,
            Layout::OwnerReference => OWNER_REFERENCE_ORDER,
            Layout::ManagedFields => MANAGED_FIELDS_ORDER,
        }
    }

    /// The layout of the value under `key`.
    fn child(self, key: &str) -> Layout {
        match (self, key) {
            (Layout::Status, "details") => Layout::Details,
            (Layout::Status | Layout::Object, "metadata") => Layout::Metadata,
            (Layout::Details, "causes") => Layout::Cause,
            (Layout::Metadata, "ownerReferences") => Layout::OwnerReference,
            (Layout::Metadata, "managedFields") => Layout::ManagedFields,
            _ => Layout::Sorted,
        }
    }
}

fn write_value(out: &mut Vec<u8>, value: &Value, layout: Layout, numbers: Numbers) {
    match value {
        Value::Object(map) if layout != Layout::Sorted => {
            write_map(out, map, layout, Revision::Kept, numbers);
        }
        Value::Array(items) if layout != Layout::Sorted => {
            out.push(b'[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(b',');
                }
                // Items of a list of maps share the list's layout (causes, owner references);
                // a list of lists nests without bound, so each level checks its stack.
                crate::stack::grow(|| write_value(out, item, layout, numbers));
            }
            out.push(b']');
        }
        // Everything under a sorted map is sorted: written as serde_json writes it.
        other => write_json_at(out, other, 0, numbers),
    }
}

/// Appends `value` exactly as `serde_json::to_writer` writes it (maps in their sorted order),
/// its strings escaped by [`write_str`].
#[cfg(test)]
fn write_json(out: &mut Vec<u8>, value: &Value) {
    write_json_at(out, value, 0, Numbers::RoundTrip);
}

/// [`write_json`] of a value `depth` levels below the first one written: each level runs on a
/// stack with room for it ([`crate::stack::deep`]), so an object nested as deep as Go reads
/// one (10,000 levels) is written on any server thread.
fn write_json_at(out: &mut Vec<u8>, value: &Value, depth: usize, numbers: Numbers) {
    let below = depth + 1;
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        // As kube-apiserver writes it ([`crate::gonum`]: `1.0` is `1`, `1e21` is `1e+21`).
        Value::Number(number) => match (numbers, number.as_f64()) {
            (Numbers::Marshalled, Some(float)) if number.is_f64() => {
                crate::gonum::write_json_float(out, float);
            }
            // Integers (an `i64` or a `u64`) as digits; writing into a `Vec` cannot fail.
            (Numbers::Marshalled, _) => drop(serde_json::to_writer(&mut *out, number)),
            (Numbers::RoundTrip, _) => crate::gonum::write_json_number(out, number),
        },
        Value::String(text) => write_str(out, text),
        Value::Array(items) => {
            out.push(b'[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(b',');
                }
                crate::stack::deep(below, || write_json_at(out, item, below, numbers));
            }
            out.push(b']');
        }
        Value::Object(map) => {
            out.push(b'{');
            for (index, (key, item)) in map.iter().enumerate() {
                if index > 0 {
                    out.push(b',');
                }
                write_str(out, key);
                out.push(b':');
                crate::stack::deep(below, || write_json_at(out, item, below, numbers));
            }
            out.push(b'}');
        }
    }
}

/// The length of the longest run of whole [`WIDE`]-byte chunks at the start of `bytes` in
/// which no byte needs an escape (none is below 0x20, `"` or `\`). Each chunk is tested
/// without an early exit inside it, a loop the compiler turns into vector compares (SSE2 on
/// x86-64: 16 bytes an instruction), about 1 instruction a byte where the eight-byte test
/// below took 4 to 5.
fn clean_prefix(bytes: &[u8]) -> usize {
    let mut clean = 0;
    for chunk in bytes.chunks_exact(WIDE) {
        let escaped = chunk.iter().fold(0u8, |any, &byte| {
            any | u8::from(byte < 0x20) | u8::from(byte == b'"') | u8::from(byte == b'\\')
        });
        if escaped != 0 {
            break;
        }
        clean += WIDE;
    }
    clean
}

/// The chunk [`clean_prefix`] tests at once, bytes.
const WIDE: usize = 32;

/// Appends `text` as a JSON string exactly as serde_json writes it: `"` and `\` escaped,
/// the control characters below 0x20 as `\b`, `\t`, `\n`, `\f`, `\r` or `\u00XX`, every
/// other byte as it is. Runs that need nothing are skipped [`WIDE`] bytes at a time
/// ([`clean_prefix`]), then eight at a time, then byte by byte (serde_json looks at each byte
/// in a table: most of a write's serialization was that loop); a byte is in at most one
/// wide test, so a text of many escapes costs what it did.
fn write_str(out: &mut Vec<u8>, text: &str) {
    /// Whether any of the eight bytes in `word` is below 0x20, `"` or `\`.
    fn needs_escape(word: u64) -> bool {
        const ONES: u64 = 0x0101_0101_0101_0101;
        const HIGHS: u64 = 0x8080_8080_8080_8080;
        // A byte below `n` (n <= 0x80) sets its high bit in `word - n * ONES` while its own
        // high bit is clear; equal bytes are the ones below 1 after an exclusive or.
        let below = |word: u64, n: u64| word.wrapping_sub(n * ONES) & !word & HIGHS;
        (below(word, 0x20)
            | below(word ^ (u64::from(b'"') * ONES), 1)
            | below(word ^ (u64::from(b'\\') * ONES), 1))
            != 0
    }
    let bytes = text.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let mut start = 0;
    let mut at = 0;
    // Where the next wide test may start: past the chunk the last one stopped in.
    let mut wide_from = 0;
    while at < bytes.len() {
        if at >= wide_from && bytes.len() - at >= WIDE {
            let clean = clean_prefix(&bytes[at..]);
            at += clean;
            wide_from = at + WIDE;
            if clean > 0 {
                continue;
            }
        }
        if let Some(chunk) = bytes.get(at..at + 8) {
            let word = u64::from_le_bytes(chunk.try_into().unwrap_or_default());
            if !needs_escape(word) {
                at += 8;
                continue;
            }
        }
        let byte = bytes[at];
        let escaped: &[u8] = match byte {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x08 => b"\\b",
            0x0c => b"\\f",
            0x00..=0x1f => b"",
            _ => {
                at += 1;
                continue;
            }
        };
        out.extend_from_slice(&bytes[start..at]);
        if escaped.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.extend_from_slice(b"\\u00");
            out.push(HEX[usize::from(byte >> 4)]);
            out.push(HEX[usize::from(byte & 0xf)]);
        } else {
            out.extend_from_slice(escaped);
        }
        at += 1;
        start = at;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// The most keys a known Go order lists (`ObjectMeta`'s).
const MAX_ORDER: usize = METADATA_ORDER.len();
const _: () = assert!(
    STATUS_ORDER.len() <= MAX_ORDER
        && DETAILS_ORDER.len() <= MAX_ORDER
        && CAUSE_ORDER.len() <= MAX_ORDER
        && OBJECT_ORDER.len() <= MAX_ORDER
        && OWNER_REFERENCE_ORDER.len() <= MAX_ORDER
        && MANAGED_FIELDS_ORDER.len() <= MAX_ORDER
);

/// Where `metadata.resourceVersion` sits in [`METADATA_ORDER`].
const RESOURCE_VERSION_AT: usize = 5;
const _: () = assert!(matches!(
    METADATA_ORDER[RESOURCE_VERSION_AT].as_bytes(),
    b"resourceVersion"
));

/// What a map's `metadata.resourceVersion` is written as.
#[derive(Clone, Copy)]
enum Revision<'a> {
    /// As the map has it (or not).
    Kept,
    /// As if the metadata map's `resourceVersion` were this (set when absent).
    Set(&'a Value),
    /// As if the metadata map had no `resourceVersion`.
    Omitted,
}

/// What [`write_map`] reports of where things went in `out`.
#[derive(Default)]
struct Placed {
    /// Where an object's `metadata` map went (for [`Layout::Object`] only).
    metadata: Option<Range<usize>>,
    /// Where an omitted `resourceVersion` would have gone (with [`Revision::Omitted`]).
    slot: Option<(usize, bool, bool)>,
}

/// Writes `map` in `layout`. `revision` (for an [`Layout::Object`] or a [`Layout::Metadata`]
/// map only) overrides the resource version: the metadata map, when it is a map, is written
/// as if its `resourceVersion` were the one given (set when absent), or as if it had none,
/// without a copy of it. Reports where an object's `metadata` map went, and where an omitted
/// resource version would have gone: (its place in `out`, whether an entry precedes it,
/// whether one follows it).
fn write_map(
    out: &mut Vec<u8>,
    map: &Map<String, Value>,
    layout: Layout,
    revision: Revision<'_>,
    numbers: Numbers,
) -> Placed {
    let order = layout.order();
    // One pass over the map places the known keys by their Go position (a map lookup per
    // known key costs several times more, as callgrind showed); the others follow, sorted.
    let mut known: [Option<(&str, &Value)>; MAX_ORDER] = [None; MAX_ORDER];
    let mut others = false;
    for (key, value) in map {
        match order.iter().position(|k| *k == key) {
            Some(at) => known[at] = Some((key, value)),
            None => others = true,
        }
    }
    let omitted = layout == Layout::Metadata && matches!(revision, Revision::Omitted);
    if layout == Layout::Metadata {
        match revision {
            Revision::Kept => {}
            Revision::Set(revision) => {
                known[RESOURCE_VERSION_AT] = Some((METADATA_ORDER[RESOURCE_VERSION_AT], revision));
            }
            Revision::Omitted => known[RESOURCE_VERSION_AT] = None,
        }
    }
    out.push(b'{');
    let mut written = 0usize;
    let mut placed = Placed::default();
    let mut entry = |out: &mut Vec<u8>, placed: &mut Placed, key: &str, value: &Value| {
        if written > 0 {
            out.push(b',');
        }
        written += 1;
        write_str(out, key);
        out.push(b':');
        match (layout, value) {
            // As `write_value` writes it, with the override and its place.
            (Layout::Object, Value::Object(metadata)) if key == "metadata" => {
                let start = out.len();
                placed.slot = write_map(out, metadata, Layout::Metadata, revision, numbers).slot;
                placed.metadata = Some(start..out.len());
            }
            _ => write_value(out, value, layout.child(key), numbers),
        }
        written
    };
    // Entries written so far, and when the omitted resource version's place was passed.
    let mut count = 0;
    let mut at_slot = None;
    for (at, known) in known.iter().enumerate() {
        if omitted && at == RESOURCE_VERSION_AT {
            at_slot = Some((out.len(), count));
        }
        if let Some((key, value)) = known {
            count = entry(out, &mut placed, key, value);
        }
    }
    if others {
        for (key, value) in map {
            if !order.contains(&key.as_str()) {
                count = entry(out, &mut placed, key, value);
            }
        }
    }
    out.push(b'}');
    if let Some((at, preceding)) = at_slot {
        placed.slot = Some((at, preceding > 0, count > preceding));
    }
    placed
}

/// Appends `object` as kube-apiserver writes an object: `kind`, `apiVersion`, `metadata` (in
/// `ObjectMeta` order), `spec`, `status`, then any other top-level fields sorted. No newline.
pub fn write_object(out: &mut Vec<u8>, object: &Value) {
    write_value(out, object, Layout::Object, Numbers::RoundTrip);
}

/// Appends `object` as [`write_object`] does, its numbers as Go's `json.Marshal` writes them
/// (not read back from storage): an integer, `i64` or `u64`, as its digits
/// (`9223372036854775808` stays so), a float as `floatEncoder` writes a float64 (`1.0` is `1`,
/// `-0.0` `-0`, `1e21` `1e+21`). What `sigs.k8s.io/yaml` makes of go-yaml's values.
pub fn write_object_marshalled(out: &mut Vec<u8>, object: &Value) {
    write_value(out, object, Layout::Object, Numbers::Marshalled);
}

/// Appends `metadata` as an `ObjectMeta` (its fields in Go order).
pub fn write_metadata(out: &mut Vec<u8>, metadata: &Value) {
    write_value(out, metadata, Layout::Metadata, Numbers::RoundTrip);
}

/// Appends `object` as [`write_object`] would append a copy of it whose
/// `metadata.resourceVersion` is set to `revision` (when `metadata` is a map; anything else is
/// written unchanged), without copying it: the encoding of an object at another resource
/// version (a DELETED event's).
pub fn write_object_at(out: &mut Vec<u8>, object: &Value, revision: &Value) {
    write_object_spanned(out, object, Some(revision));
}

/// [`write_object`] (or [`write_object_at`] with `revision`), returning where the
/// `metadata` map went in `out` when the object has one: those bytes are exactly what
/// [`write_metadata`] (or [`write_metadata_at`]) writes of it.
pub(crate) fn write_object_spanned(
    out: &mut Vec<u8>,
    object: &Value,
    revision: Option<&Value>,
) -> Option<Range<usize>> {
    let revision = revision.map_or(Revision::Kept, Revision::Set);
    match object {
        Value::Object(map) => {
            write_map(out, map, Layout::Object, revision, Numbers::RoundTrip).metadata
        }
        other => {
            write_object(out, other);
            None
        }
    }
}

/// Appends `metadata` as [`write_metadata`] would append a copy of it whose `resourceVersion`
/// is set to `revision` (when it is a map).
pub fn write_metadata_at(out: &mut Vec<u8>, metadata: &Value, revision: &Value) {
    match metadata {
        Value::Object(map) => {
            write_map(
                out,
                map,
                Layout::Metadata,
                Revision::Set(revision),
                Numbers::RoundTrip,
            );
        }
        other => write_metadata(out, other),
    }
}

/// Where [`write_object_without_revision`] left out `metadata.resourceVersion`: enough to put
/// one in afterwards without writing the object again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RevisionSlot {
    /// Where the entry goes, from the start of what was written.
    at: usize,
    /// Whether an entry of the metadata map precedes it (it then takes a comma before it).
    preceded: bool,
    /// Whether one follows it (without one before it, it then takes a comma after it).
    followed: bool,
    /// Where the `metadata` map is in what was written.
    metadata: Range<usize>,
}

/// Appends `object` as [`write_object`] would append a copy of it without
/// `metadata.resourceVersion`, without copying it, and returns where the resource version
/// would go (`None` when the object or its `metadata` is not a map: nothing to put it in).
/// [`RevisionSlot::insert`] then gives the object's encoding at any resource version from
/// these bytes: a write stores the object without its resource version (the store's revision
/// is it) and its watchers are sent it with one.
pub fn write_object_without_revision(out: &mut Vec<u8>, object: &Value) -> Option<RevisionSlot> {
    let Value::Object(map) = object else {
        write_object(out, object);
        return None;
    };
    let start = out.len();
    let placed = write_map(
        out,
        map,
        Layout::Object,
        Revision::Omitted,
        Numbers::RoundTrip,
    );
    let (Some(metadata), Some((at, preceded, followed))) = (placed.metadata, placed.slot) else {
        return None;
    };
    Some(RevisionSlot {
        at: at - start,
        preceded,
        followed,
        metadata: metadata.start - start..metadata.end - start,
    })
}

impl RevisionSlot {
    /// `written` (what [`write_object_without_revision`] appended for this slot) with
    /// `"resourceVersion":"<revision>"` in its place: exactly the bytes [`write_object`]
    /// writes of the object with `metadata.resourceVersion` set to `revision` as a string, and
    /// where its `metadata` map is in them. `None` when `written` is too short to be those
    /// bytes.
    #[must_use]
    pub fn insert(&self, written: &[u8], revision: u64) -> Option<(Vec<u8>, Range<usize>)> {
        self.insert_within(written, revision, b"", b"")
    }

    /// [`RevisionSlot::insert`], the bytes written between `head` and `tail` in one buffer
    /// (a watch frame's text around the object); the range is still within the object's
    /// bytes (it starts at `head.len()` in the buffer).
    #[must_use]
    pub fn insert_within(
        &self,
        written: &[u8],
        revision: u64,
        head: &[u8],
        tail: &[u8],
    ) -> Option<(Vec<u8>, Range<usize>)> {
        if written.len() < self.metadata.end || !self.metadata.contains(&self.at) {
            return None;
        }
        const KEY: &[u8] = br#""resourceVersion":""#;
        let mut digits = [0u8; 20];
        let digits = decimal(revision, &mut digits).as_bytes();
        let added = KEY.len() + digits.len() + 2;
        let mut out = Vec::with_capacity(head.len() + written.len() + added + tail.len());
        out.extend_from_slice(head);
        out.extend_from_slice(&written[..self.at]);
        if self.preceded {
            out.push(b',');
        }
        out.extend_from_slice(KEY);
        out.extend_from_slice(digits);
        out.push(b'"');
        if !self.preceded && self.followed {
            out.push(b',');
        }
        out.extend_from_slice(&written[self.at..]);
        let grown = out.len() - head.len() - written.len();
        out.extend_from_slice(tail);
        Some((out, self.metadata.start..self.metadata.end + grown))
    }
}

/// `value` in decimal, written at the end of `digits` (a `u64` has at most 20): the text a
/// resource version is, without `to_string`'s formatter and allocation.
pub(crate) fn decimal(value: u64, digits: &mut [u8; 20]) -> &str {
    let mut start = digits.len();
    let mut rest = value;
    loop {
        start -= 1;
        // A digit: `rest % 10` is below 10.
        digits[start] = b'0' + u8::try_from(rest % 10).unwrap_or_default();
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    // ASCII digits only.
    std::str::from_utf8(&digits[start..]).unwrap_or_default()
}

/// Appends a `metav1.Status` in Go order (`kind`, `apiVersion`, `metadata`, `status`,
/// `message`, `reason`, `details`, `code`). No newline.
pub fn write_status(out: &mut Vec<u8>, status: &Value) {
    write_value(out, status, Layout::Status, Numbers::RoundTrip);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn object_order_and_round_trip() {
        let object = json!({
            "status": {"phase": "Pending"},
            "spec": {"b": 1, "a": [{"z": 1, "y": 2}]},
            "metadata": {"uid": "u", "name": "n", "labels": {"b": "1", "a": "2"},
                         "managedFields": [{"time": "t", "manager": "m", "fieldsV1": {"f:b": {}, "f:a": {}}}],
                         "ownerReferences": [{"uid": "x", "kind": "K", "apiVersion": "v1", "name": "o"}]},
            "apiVersion": "v1",
            "kind": "Pod",
            "data": "\"quoted\"\n"
        });
        let mut out = Vec::new();
        write_object(&mut out, &object);
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            concat!(
                r#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"n","uid":"u","labels":{"a":"2","b":"1"},"#,
                r#""ownerReferences":[{"apiVersion":"v1","kind":"K","name":"o","uid":"x"}],"#,
                r#""managedFields":[{"manager":"m","time":"t","fieldsV1":{"f:a":{},"f:b":{}}}]},"#,
                r#""spec":{"a":[{"y":2,"z":1}],"b":1},"status":{"phase":"Pending"},"data":"\"quoted\"\n"}"#,
            )
        );
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), object);
    }

    /// What `write_object_at` must equal: a copy with the resource version set, written.
    fn copied_at(object: &Value, revision: &Value, write: fn(&mut Vec<u8>, &Value)) -> Vec<u8> {
        let mut copy = object.clone();
        if let Some(metadata) = copy.get_mut("metadata").and_then(Value::as_object_mut) {
            metadata.insert("resourceVersion".to_owned(), revision.clone());
        }
        let mut out = Vec::new();
        write(&mut out, &copy);
        out
    }

    #[test]
    fn an_overridden_resource_version_writes_the_bytes_of_a_copy_with_it_set() {
        let revision = json!("912");
        for object in [
            json!({"kind": "Pod", "apiVersion": "v1",
                   "metadata": {"name": "n", "resourceVersion": "7", "uid": "u", "zz": 1,
                                "managedFields": [{"manager": "m", "resourceVersion": "1"}]},
                   "spec": {"metadata": {"resourceVersion": "inner"}}, "other": 2}),
            json!({"kind": "Pod", "metadata": {"name": "n"}}),
            json!({"metadata": {}}),
            json!({"metadata": {"resourceVersion": "1"}}),
            json!({"kind": "Pod", "metadata": "not a map"}),
            json!({"kind": "Pod", "metadata": [{"resourceVersion": "1"}]}),
            json!({"kind": "Pod"}),
            json!({}),
            json!([{"metadata": {"resourceVersion": "1"}}]),
            json!("text"),
            json!(null),
        ] {
            let mut out = Vec::new();
            write_object_at(&mut out, &object, &revision);
            assert_eq!(
                String::from_utf8(out).unwrap(),
                String::from_utf8(copied_at(&object, &revision, write_object)).unwrap(),
                "{object}"
            );
            let metadata = object.get("metadata").cloned().unwrap_or(Value::Null);
            let mut out = Vec::new();
            write_metadata_at(&mut out, &metadata, &revision);
            let mut copy = metadata.clone();
            if let Some(map) = copy.as_object_mut() {
                map.insert("resourceVersion".to_owned(), revision.clone());
            }
            let mut expected = Vec::new();
            write_metadata(&mut expected, &copy);
            assert_eq!(out, expected, "{metadata}");
        }
    }

    /// Goal: an object written without its resource version, then given one in its slot, is
    /// byte for byte the object written with it, for every place the slot can be in (first,
    /// last, alone, between entries, after unknown keys' place), a resource version the map
    /// had or did not have, and any revision's digits; what was written is the object without
    /// it; what has no metadata map has no slot.
    #[test]
    fn a_resource_version_put_in_its_slot_gives_the_bytes_of_the_object_written_with_it() {
        let objects = [
            json!({"kind": "Pod", "apiVersion": "v1",
                   "metadata": {"name": "n", "resourceVersion": "7", "uid": "u", "zz": 1,
                                "managedFields": [{"manager": "m", "resourceVersion": "1"}]},
                   "spec": {"metadata": {"resourceVersion": "inner"}}, "other": 2}),
            json!({"kind": "Pod", "metadata": {"name": "n"}}),
            json!({"kind": "Pod", "metadata": {"name": "n", "namespace": "d", "uid": "u"}}),
            json!({"metadata": {"generation": 1, "labels": {"a": "b"}}, "data": {"k": "\"v\n"}}),
            json!({"metadata": {"zz": 1, "aa": [1, 2]}}),
            json!({"metadata": {"resourceVersion": "1"}}),
            json!({"metadata": {"resourceVersion": "1", "name": "n"}}),
            json!({"metadata": {}}),
            json!({"metadata": {}, "a": 1, "status": {}}),
        ];
        for object in &objects {
            let mut without = object.clone();
            without["metadata"]
                .as_object_mut()
                .unwrap()
                .remove("resourceVersion");
            let mut written = b"prefix".to_vec();
            let slot = write_object_without_revision(&mut written, object).expect("a slot");
            let written = &written[b"prefix".len()..];
            let mut expected = Vec::new();
            write_object(&mut expected, &without);
            assert_eq!(written, expected.as_slice(), "{object}");
            assert_eq!(serde_json::from_slice::<Value>(written).unwrap(), without);
            for revision in [0, 7, 10, 912, 18_446_744_073_709_551_615] {
                let text = json!(revision.to_string());
                let (out, span) = slot.insert(written, revision).expect("fits");
                let mut expected = Vec::new();
                let expected_span = write_object_spanned(&mut expected, &without, Some(&text));
                assert_eq!(
                    String::from_utf8(out.clone()).unwrap(),
                    String::from_utf8(expected).unwrap(),
                    "{object} at {revision}"
                );
                assert_eq!(Some(span.clone()), expected_span, "{object} at {revision}");
                // Between a head and a tail: the same bytes between them, the same span.
                let (framed, framed_span) = slot
                    .insert_within(written, revision, b"<head>", b"</>")
                    .expect("fits");
                assert_eq!(framed[..6], *b"<head>");
                assert_eq!(framed[framed.len() - 3..], *b"</>");
                assert_eq!(
                    framed[6..framed.len() - 3],
                    out[..],
                    "{object} at {revision}"
                );
                assert_eq!(framed_span, span, "{object} at {revision}");
            }
            assert_eq!(slot.insert(&written[..slot.metadata.end - 1], 1), None);
        }
        for object in [
            json!({"kind": "Pod"}),
            json!({"metadata": "not a map"}),
            json!([{"metadata": {}}]),
            json!(null),
        ] {
            let mut written = Vec::new();
            assert_eq!(write_object_without_revision(&mut written, &object), None);
            let mut expected = Vec::new();
            write_object(&mut expected, &object);
            assert_eq!(written, expected, "{object}");
        }
    }

    /// Goal: strings and sorted values are written byte for byte as serde_json writes them:
    /// every byte value alone and at every offset of the eight-byte runs and of two wide
    /// chunks, texts that end on a chunk's end, multi-byte characters, escapes at the start,
    /// the end and the run boundaries, long runs.
    #[test]
    fn values_are_written_as_serde_json_writes_them() {
        let mut texts: Vec<String> = (0u8..=0x7f).map(|b| char::from(b).to_string()).collect();
        for b in (0u8..=0x7f).chain([b'"', b'\\']) {
            for offset in 0..2 * WIDE + 3 {
                let mut text = "x".repeat(offset);
                text.push(char::from(b));
                text.push_str(&"y".repeat(2 * WIDE + 3 - offset));
                texts.push(text);
            }
        }
        texts.extend((0..4 * WIDE + 2).map(|len| "x".repeat(len)));
        texts.extend((0..3 * WIDE).map(|len| format!("{}\"{}", "x".repeat(len), "\n".repeat(len))));
        texts.extend([
            String::new(),
            "\u{e9}\u{2028}\u{1f600}\u{7f}\u{80}".repeat(5),
            "plain text of some length, no escapes at all in it".repeat(40),
            "a\"b\\c\nd\re\tf\u{8}g\u{c}h\u{0}i\u{1f}".repeat(3),
        ]);
        for text in &texts {
            let mut out = Vec::new();
            write_str(&mut out, text);
            assert_eq!(out, serde_json::to_vec(text).unwrap(), "{text:?}");
        }
        let value = json!({"b": [1, -2, 3.5, i64::MIN, null, true, false],
                           "a": {"z": texts, "y": {}, "x": []}, "": ""});
        let mut out = Vec::new();
        write_json(&mut out, &value);
        assert_eq!(out, serde_json::to_vec(&value).unwrap());
        // Numbers as kube-apiserver writes them, not as serde_json does.
        let value = json!([1.0, -0.0, 1e300, 1e20, u64::MAX, 0.1]);
        let mut out = Vec::new();
        write_json(&mut out, &value);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "[1,0,1e+300,100000000000000000000,18446744073709552000,0.1]"
        );
    }

    #[test]
    fn scalars_and_lists_at_the_top_are_written_as_serde_json_writes_them() {
        for value in [
            json!(null),
            json!("a\"b"),
            json!([{"b": 1, "a": 2}]),
            json!(1.5),
        ] {
            let mut out = Vec::new();
            write_object(&mut out, &value);
            assert_eq!(out, serde_json::to_vec(&value).unwrap());
        }
    }
}

//! Watch event frames: one newline-terminated JSON `WatchEvent` (`{"type":…,"object":…}`) per
//! queue item, as kube-apiserver streams them.
//!
//! ## Guarantees
//! Every frame is one complete JSON document followed by `\n`, whatever the object's body: the
//! object bytes come from the core's cached encoding (serde_json output of a `Value`, so always
//! valid JSON), a Table is built from that same body, object metadata alone
//! ([`Conversion::PartialObjectMetadata`]) is the core's second cached encoding (shared by every
//! metadata watcher like the full one), and a bookmark is built here from the resource's kind
//! (or `PartialObjectMetadata`) and the revision. Nothing here panics or blocks.
//!
//! ## Cost
//! [`encode_frames`] shares the cached encoding of an object of [`SHARE_MIN_BYTES`] or more
//! (a reference-counted clone between two static pieces of framing text: no copy and no
//! allocation per watcher); smaller frames are copied together into one buffer,
//! which is cheaper than a piece each. A Table (when the client asked for tables) is built per
//! frame.

use crate::ResourceDef;
use crate::negotiate::Conversion;
use bytes::{BufMut, Bytes, BytesMut};
use serde_json::{Value, json};
use watchkeeper_core::{EncodeStats, Encoding, EventType, Revision, WatchItem};

/// Objects whose encoding is at least this long are sent as a shared piece, not copied.
pub const SHARE_MIN_BYTES: usize = 1024;

/// The cached encoding a watch frame carries for `conversion` (`None` for a Table, which is
/// built per frame). A watch asked for `PartialObjectMetadataList` gets full objects, as
/// kube-apiserver's (it cannot convert an event's object into a list).
fn cached_encoding(conversion: Conversion) -> Option<Encoding> {
    match conversion {
        Conversion::None | Conversion::PartialObjectMetadataList => Some(Encoding::Json),
        Conversion::PartialObjectMetadata => Some(Encoding::PartialMetadataJson),
        Conversion::Table => None,
    }
}

/// Appends the frames of `items` to `parts`, whose concatenation is exactly the concatenation
/// of [`encode_frame`] of each item: the cached encoding of an object of
/// [`SHARE_MIN_BYTES`] or more becomes a piece of its own (shared, not copied), everything else
/// is copied into buffers between those pieces.
pub fn encode_frames<'a>(
    parts: &mut Vec<Bytes>,
    def: &ResourceDef,
    items: impl IntoIterator<Item = &'a WatchItem>,
    conversion: Conversion,
    stats: &EncodeStats,
    now: i64,
) {
    let mut text = BytesMut::new();
    for item in items {
        if let Some(encoding) = cached_encoding(conversion)
            && let Some((event_type, bytes)) = item.encoded(encoding, stats)
            && bytes.len() >= SHARE_MIN_BYTES
        {
            if !text.is_empty() {
                parts.push(text.split().freeze());
            }
            parts.push(Bytes::from_static(frame_prefix(event_type)));
            parts.push(bytes);
            parts.push(Bytes::from_static(b"}\n"));
            continue;
        }
        encode_frame(&mut text, def, item, conversion, stats, now);
    }
    if !text.is_empty() {
        parts.push(text.freeze());
    }
}

/// The framing text before a shared object: static, so sharing allocates nothing per watcher.
fn frame_prefix(event_type: EventType) -> &'static [u8] {
    match event_type {
        EventType::Added => b"{\"type\":\"ADDED\",\"object\":",
        EventType::Modified => b"{\"type\":\"MODIFIED\",\"object\":",
        EventType::Deleted => b"{\"type\":\"DELETED\",\"object\":",
    }
}

/// Appends the frame of one watch item to `out`. [`Conversion::Table`] converts the object to
/// a `meta.k8s.io/v1` Table (for `kubectl get -w`), with ages computed against `now` (Unix
/// seconds); [`Conversion::PartialObjectMetadata`] sends the object's metadata alone.
pub fn encode_frame(
    out: &mut BytesMut,
    def: &ResourceDef,
    item: &WatchItem,
    conversion: Conversion,
    stats: &EncodeStats,
    now: i64,
) {
    let table = conversion == Conversion::Table;
    let encoding = cached_encoding(conversion).unwrap_or(Encoding::Json);
    match item.encoded(encoding, stats) {
        Some((event_type, bytes)) => {
            out.put_slice(b"{\"type\":\"");
            out.put_slice(event_type.as_str().as_bytes());
            out.put_slice(b"\",\"object\":");
            if table {
                let object: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                let rv = object
                    .pointer("/metadata/resourceVersion")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                out.put_slice(
                    crate::to_table(def, &[&object], &rv, None, now)
                        .to_string()
                        .as_bytes(),
                );
            } else {
                out.put_slice(&bytes);
            }
            out.put_slice(b"}\n");
        }
        None => {
            let WatchItem::Bookmark {
                revision,
                initial_events_end,
            } = item
            else {
                return;
            };
            let frame = if conversion == Conversion::PartialObjectMetadata {
                metadata_bookmark(*revision, *initial_events_end)
            } else {
                bookmark(def, *revision, *initial_events_end)
            };
            out.put_slice(frame.as_bytes());
        }
    }
}

/// The frame of a bookmark: the resource's kind and apiVersion, the revision, and the
/// `k8s.io/initial-events-end` annotation on the bookmark that ends the initial events.
#[must_use]
pub fn bookmark(def: &ResourceDef, revision: Revision, initial_events_end: bool) -> String {
    bookmark_of(&def.kind, &def.api_version(), revision, initial_events_end)
}

/// The frame of a bookmark on a metadata-only watch: a `PartialObjectMetadata`, as
/// kube-apiserver converts the bookmark's object too.
#[must_use]
pub fn metadata_bookmark(revision: Revision, initial_events_end: bool) -> String {
    bookmark_of(
        "PartialObjectMetadata",
        "meta.k8s.io/v1",
        revision,
        initial_events_end,
    )
}

fn bookmark_of(kind: &str, api_version: &str, revision: Revision, end: bool) -> String {
    let mut metadata = json!({"resourceVersion": revision.to_string()});
    if end {
        metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    let object = json!({"kind": kind, "apiVersion": api_version, "metadata": metadata});
    format!("{{\"type\":\"BOOKMARK\",\"object\":{object}}}\n")
}

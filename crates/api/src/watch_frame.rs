//! Watch event frames: one newline-terminated JSON `WatchEvent` (`{"type":…,"object":…}`) per
//! queue item, as kube-apiserver streams them.
//!
//! ## Guarantees
//! Every frame is one complete JSON document followed by `\n`, whatever the object's body: the
//! object bytes come from the core's cached encoding (serde_json output of a `Value`, so always
//! valid JSON), a Table is built from that same body, and a bookmark is built here from the
//! resource's kind and the revision. Nothing here panics or blocks.
//!
//! ## Cost
//! [`encode_frames`] shares the cached encoding of an object of [`SHARE_MIN_BYTES`] or more
//! (a reference-counted clone between two small pieces of framing text: no copy and no
//! object-sized allocation per watcher); smaller frames are copied together into one buffer,
//! which is cheaper than a piece each. A Table (when the client asked for tables) is built per
//! frame.

use crate::ResourceDef;
use bytes::{BufMut, Bytes, BytesMut};
use serde_json::{Value, json};
use watchkeeper_core::{EncodeStats, Encoding, Revision, WatchItem};

/// Objects whose encoding is at least this long are sent as a shared piece, not copied.
pub const SHARE_MIN_BYTES: usize = 1024;

/// Appends the frames of `items` to `parts`, whose concatenation is exactly the concatenation
/// of [`encode_frame`] of each item: the cached encoding of an object of
/// [`SHARE_MIN_BYTES`] or more becomes a piece of its own (shared, not copied), everything else
/// is copied into buffers between those pieces.
pub fn encode_frames<'a>(
    parts: &mut Vec<Bytes>,
    def: &ResourceDef,
    items: impl IntoIterator<Item = &'a WatchItem>,
    table: bool,
    stats: &EncodeStats,
    now: i64,
) {
    let mut text = BytesMut::new();
    for item in items {
        if !table
            && let Some((event_type, bytes)) = item.encoded(Encoding::Json, stats)
            && bytes.len() >= SHARE_MIN_BYTES
        {
            text.put_slice(b"{\"type\":\"");
            text.put_slice(event_type.as_str().as_bytes());
            text.put_slice(b"\",\"object\":");
            parts.push(text.split().freeze());
            parts.push(bytes);
            text.put_slice(b"}\n");
            continue;
        }
        encode_frame(&mut text, def, item, table, stats, now);
    }
    if !text.is_empty() {
        parts.push(text.freeze());
    }
}

/// Appends the frame of one watch item to `out`. `table` converts the object to a
/// `meta.k8s.io/v1` Table (for `kubectl get -w`), with ages computed against `now` (Unix
/// seconds).
pub fn encode_frame(
    out: &mut BytesMut,
    def: &ResourceDef,
    item: &WatchItem,
    table: bool,
    stats: &EncodeStats,
    now: i64,
) {
    match item.encoded(Encoding::Json, stats) {
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
            out.put_slice(bookmark(def, *revision, *initial_events_end).as_bytes());
        }
    }
}

/// The frame of a bookmark: the resource's kind and apiVersion, the revision, and the
/// `k8s.io/initial-events-end` annotation on the bookmark that ends the initial events.
#[must_use]
pub fn bookmark(def: &ResourceDef, revision: Revision, initial_events_end: bool) -> String {
    let mut metadata = json!({"resourceVersion": revision.to_string()});
    if initial_events_end {
        metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    let object = json!({"kind": def.kind, "apiVersion": def.api_version(), "metadata": metadata});
    format!("{{\"type\":\"BOOKMARK\",\"object\":{object}}}\n")
}

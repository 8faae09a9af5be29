//! Watch event frames: one newline-terminated JSON `WatchEvent` (`{"type":…,"object":…}`) per
//! queue item, as kube-apiserver streams them; or, for a protobuf watch
//! (`application/vnd.kubernetes.protobuf;stream=watch`), one length-prefixed protobuf
//! `WatchEvent` per item ([`encode_protobuf_frames`]).
//!
//! ## Guarantees
//! Every frame is one complete JSON document followed by `\n`, whatever the object's body: the
//! object bytes come from the core's cached encoding (serde_json output of a `Value`, so always
//! valid JSON), a Table is built from that same body, object metadata alone
//! ([`Conversion::PartialObjectMetadata`]) is the core's second cached encoding (shared by every
//! metadata watcher like the full one), and a bookmark is built here from the resource's kind
//! (or `PartialObjectMetadata`) and the revision. Nothing here panics or blocks.
//!
//! A protobuf frame is a 4-byte big-endian length, then a `meta.k8s.io/v1` `WatchEvent`
//! {1 `type`, 2 `object`: a `RawExtension` whose `raw` is the object's whole protobuf body
//! (`k8s\0` + `runtime.Unknown`)}, as kube-apiserver's streaming serializer writes it. The
//! object's message is the core's cached external encoding ([`cached_object_message`]): like
//! the JSON one, computed once per object (and once per DELETED event) and shared by every
//! protobuf watcher, and computed only when one asks for it. An object this server cannot
//! encode (a field outside its protobuf schemas) ends the watch with an in-stream 410
//! `Expired`, so that a client-go reflector lists again (the LIST then falls back to JSON)
//! instead of retrying the same event (the server then answers that resource's later watches
//! in JSON when the client accepts it).
//!
//! ## Cost
//! [`encode_frames`] shares the cached encoding of an object of [`SHARE_MIN_BYTES`] or more
//! (a reference-counted clone between two static pieces of framing text: no copy and no
//! allocation per watcher; a MODIFIED event's whole frame, which the core writes around the
//! object's JSON encoding in one buffer, as one piece; an ADDED event's as two, the static
//! ADDED head and the rest of that buffer, the encoding and its tail); smaller frames are
//! copied together
//! into one buffer,
//! which is cheaper than a piece each. A Table (when the client asked for tables) is built per
//! frame.

use crate::ResourceDef;
use crate::negotiate::Conversion;
use crate::protobuf::{
    ENVELOPE_TAIL, WatchFraming, cached_object_message, encode_protobuf, metadata_message_of_json,
    metadata_prefix, watch_frame,
};
use bytes::{BufMut, Bytes, BytesMut};
use serde_json::{Value, json};
use watchkeeper_core::object::{FRAME_TAIL, MODIFIED_FRAME_HEAD};
use watchkeeper_core::{EncodeStats, Encoding, EventType, Object, Revision, WatchItem};

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
/// [`SHARE_MIN_BYTES`] or more becomes a piece of its own (shared, not copied; in JSON a
/// MODIFIED event's whole frame, an ADDED event's encoding with the frame's tail), everything
/// else is copied into buffers between those pieces.
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
        if let Some((head, shared, tail)) = shared_pieces(item, conversion, stats) {
            if !text.is_empty() {
                parts.push(text.split().freeze());
            }
            parts.extend(head);
            parts.push(shared);
            parts.extend(tail);
            continue;
        }
        encode_frame(&mut text, def, item, conversion, stats, now);
    }
    if !text.is_empty() {
        parts.push(text.freeze());
    }
}

/// The pieces of `item`'s frame when its object's cached encoding is shared rather than
/// copied ([`SHARE_MIN_BYTES`] or more): the static head, the shared piece, the static tail.
/// In JSON a MODIFIED event's whole frame is one shared buffer (no head or tail), and an
/// ADDED one's encoding and tail are one slice of that buffer (no tail); otherwise the
/// encoding alone. `None` for an item whose frame is copied.
fn shared_pieces(
    item: &WatchItem,
    conversion: Conversion,
    stats: &EncodeStats,
) -> Option<(Option<Bytes>, Bytes, Option<Bytes>)> {
    let encoding = cached_encoding(conversion)?;
    if encoding == Encoding::Json {
        if let Some(frame) = item.modified_frame(stats)
            && frame.len() >= SHARE_MIN_BYTES + MODIFIED_FRAME_HEAD.len() + FRAME_TAIL.len()
        {
            return Some((None, frame.clone(), None));
        }
        if let Some(rest) = item.added_json_and_tail(stats)
            && rest.len() >= SHARE_MIN_BYTES + FRAME_TAIL.len()
        {
            let head = Bytes::from_static(frame_prefix(EventType::Added));
            return Some((Some(head), rest, None));
        }
    }
    let (event_type, bytes) = item.encoded(encoding, stats)?;
    (bytes.len() >= SHARE_MIN_BYTES).then(|| {
        let head = Bytes::from_static(frame_prefix(event_type));
        (Some(head), bytes, Some(Bytes::from_static(FRAME_TAIL)))
    })
}

/// The framing text before a shared object: static, so sharing allocates nothing per watcher.
fn frame_prefix(event_type: EventType) -> &'static [u8] {
    match event_type {
        EventType::Added => b"{\"type\":\"ADDED\",\"object\":",
        EventType::Modified => MODIFIED_FRAME_HEAD,
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
                let make = || {
                    let object: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                    let rv = object
                        .pointer("/metadata/resourceVersion")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned();
                    Bytes::from(crate::to_table(def, &[&object], &rv, None, now).to_string())
                };
                // An event's Table is made once per second it is asked in, for all its
                // watchers (the ages are the only per-second part).
                let converted = match item {
                    WatchItem::Event { event_type, event } => {
                        event.derived(*event_type, now.cast_unsigned(), stats, make)
                    }
                    _ => make(),
                };
                out.put_slice(&converted);
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

/// The protobuf content type of a watch response.
pub const PROTOBUF_WATCH_CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf;stream=watch";

/// The `meta.k8s.io/v1` `PartialObjectMetadata` message of `object`: the `metadata` field of
/// its cached protobuf message (shared), or, for an object without one (a custom resource),
/// encoded from its cached metadata JSON; `None` when that cannot be encoded.
pub fn object_metadata_message(object: &Object, stats: &EncodeStats) -> Option<Bytes> {
    match object.encoded_external(cached_object_message, stats) {
        Some(message) => Some(metadata_prefix(message)),
        None => metadata_message_of_json(object.encoded(Encoding::PartialMetadataJson, stats)),
    }
}

/// A watch item's event type and `PartialObjectMetadata` message (see
/// [`object_metadata_message`]): `None` for a bookmark.
fn item_metadata_message(
    item: &WatchItem,
    stats: &EncodeStats,
) -> Option<(EventType, Option<Bytes>)> {
    match item.encoded_external(cached_object_message, stats)? {
        (event_type, Some(message)) => Some((event_type, Some(metadata_prefix(&message)))),
        (event_type, None) => Some((
            event_type,
            item.encoded(Encoding::PartialMetadataJson, stats)
                .and_then(|(_, json)| metadata_message_of_json(&json)),
        )),
    }
}

/// Appends the protobuf frames of `items` to `parts` (see the module doc): the object's cached
/// message of [`SHARE_MIN_BYTES`] or more is a piece of its own, shared, not copied. With
/// [`Conversion::PartialObjectMetadata`] each frame carries the object's
/// `PartialObjectMetadata` ([`object_metadata_message`]: a slice of its cached message for a
/// built-in kind, encoded per frame for a custom resource, which has no message to share).
///
/// # Errors
/// The in-stream error that must end the watch (after the frames appended so far) when an
/// object cannot be encoded: 410 `Expired` naming the object.
pub fn encode_protobuf_frames<'a>(
    parts: &mut Vec<Bytes>,
    def: &ResourceDef,
    items: impl IntoIterator<Item = &'a WatchItem>,
    conversion: Conversion,
    stats: &EncodeStats,
) -> Result<(), crate::ApiError> {
    let metadata_only = conversion == Conversion::PartialObjectMetadata;
    let (api_version, kind) = if metadata_only {
        ("meta.k8s.io/v1".to_owned(), "PartialObjectMetadata")
    } else {
        (def.api_version(), def.kind.as_str())
    };
    let framing = WatchFraming::new(&api_version, kind);
    let mut text = BytesMut::new();
    let mut result = Ok(());
    for item in items {
        let encoded = if metadata_only {
            item_metadata_message(item, stats)
        } else {
            item.encoded_external(cached_object_message, stats)
        };
        match encoded {
            Some((event_type, Some(message))) => {
                framing.put_head(&mut text, event_type.as_str(), message.len());
                if message.len() >= SHARE_MIN_BYTES {
                    parts.push(text.split().freeze());
                    parts.push(message);
                } else {
                    text.put_slice(&message);
                }
                text.put_slice(ENVELOPE_TAIL);
            }
            Some((_, None)) => {
                let key = match item {
                    WatchItem::Event { event, .. } => event.key().to_string(),
                    WatchItem::Initial(object) => object.key().to_string(),
                    WatchItem::Bookmark { .. } => String::new(),
                };
                result = Err(crate::ApiError::gone(format!(
                    "{} {key:?} at resource version {} cannot be encoded as application/vnd.kubernetes.protobuf by this server (it has a field outside the server's protobuf schemas); list again (the list is answered in JSON) or watch with Accept: application/json",
                    def.kind,
                    item.revision()
                )));
                break;
            }
            None => {
                let WatchItem::Bookmark {
                    revision,
                    initial_events_end,
                } = item
                else {
                    continue;
                };
                let mut metadata = json!({"resourceVersion": revision.to_string()});
                if *initial_events_end {
                    metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
                }
                let object = json!({"kind": kind, "apiVersion": api_version, "metadata": metadata});
                if let Ok(body) = encode_protobuf(&object) {
                    text.put_slice(&watch_frame("BOOKMARK", &body));
                }
            }
        }
    }
    if !text.is_empty() {
        parts.push(text.freeze());
    }
    result
}

/// The protobuf frame of an in-stream ERROR event carrying `error`'s Status.
#[must_use]
pub fn protobuf_error_frame(error: &crate::ApiError) -> Bytes {
    let body = encode_protobuf(&error.to_status()).unwrap_or_default();
    Bytes::from(watch_frame("ERROR", &body))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use serde_json::Value;
    use watchkeeper_core::{Event, EventType, Object};

    use super::*;
    use crate::protobuf::decode_watch_stream;

    fn configmap(name: &str, revision: u64, data: &str) -> Arc<Object> {
        Arc::new(Object::new(
            "default",
            name,
            BTreeMap::new(),
            BTreeMap::new(),
            revision,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": name, "namespace": "default"}, "data": {"d": data}}),
        ))
    }

    fn def() -> ResourceDef {
        crate::resources::builtin_resources()
            .into_iter()
            .find(|d| d.plural == "configmaps")
            .unwrap()
    }

    /// Goal: a JSON watcher's frames are the same bytes whichever way they are pieced — a
    /// MODIFIED event of a large object as the one buffer its JSON encoding lives in (no
    /// copy, one piece), an ADDED one as the static head and the rest of that buffer (two
    /// pieces), every other item as before — and every frame is one JSON document of the type
    /// the watcher sees.
    #[test]
    fn a_large_modified_event_is_one_shared_piece_and_the_bytes_stay_the_frames() {
        let stats = EncodeStats::default();
        let old = configmap("big", 2, &"w".repeat(3000));
        let big = configmap("big", 3, &"x".repeat(3000));
        let small_old = configmap("small", 3, "y");
        let small = configmap("small", 4, "z");
        let modified = Arc::new(Event::new(3, Some(big.clone()), Some(old.clone())));
        let small_modified = Arc::new(Event::new(4, Some(small.clone()), Some(small_old)));
        let deleted = Arc::new(Event::new(5, None, Some(big.clone())));
        let items = vec![
            WatchItem::Event {
                event_type: EventType::Modified,
                event: modified.clone(),
            },
            // The same change seen by a watcher whose selection it entered.
            WatchItem::Event {
                event_type: EventType::Added,
                event: modified.clone(),
            },
            WatchItem::Event {
                event_type: EventType::Modified,
                event: small_modified,
            },
            WatchItem::Initial(old.clone()),
            WatchItem::Event {
                event_type: EventType::Deleted,
                event: deleted,
            },
            WatchItem::Bookmark {
                revision: 5,
                initial_events_end: false,
            },
            WatchItem::Event {
                event_type: EventType::Modified,
                event: modified,
            },
        ];
        for conversion in [
            Conversion::None,
            Conversion::PartialObjectMetadata,
            Conversion::Table,
        ] {
            let mut parts = Vec::new();
            encode_frames(&mut parts, &def(), &items, conversion, &stats, 0);
            let mut expected = BytesMut::new();
            for item in &items {
                encode_frame(&mut expected, &def(), item, conversion, &stats, 0);
            }
            assert_eq!(parts.concat(), expected.to_vec(), "{conversion:?}");
            let text = String::from_utf8(parts.concat()).unwrap();
            let types: Vec<String> = text
                .lines()
                .map(|line| serde_json::from_str::<Value>(line).unwrap()["type"].to_string())
                .collect();
            assert_eq!(
                types,
                [
                    "\"MODIFIED\"",
                    "\"ADDED\"",
                    "\"MODIFIED\"",
                    "\"ADDED\"",
                    "\"DELETED\"",
                    "\"BOOKMARK\"",
                    "\"MODIFIED\""
                ],
                "{conversion:?}"
            );
            let json = big.encoded(Encoding::Json, &stats);
            let whole = parts
                .iter()
                .filter(|part| part.len() == MODIFIED_FRAME_HEAD.len() + json.len() + 2)
                .count();
            if conversion == Conversion::None {
                // Both MODIFIED frames of the large object: one piece each, the buffer the
                // object's encoding is the middle of (no copy).
                assert_eq!(whole, 2);
                let frames = parts
                    .iter()
                    .filter(|part| part.len() == MODIFIED_FRAME_HEAD.len() + json.len() + 2);
                for part in frames {
                    assert_eq!(
                        part.as_ptr().wrapping_add(MODIFIED_FRAME_HEAD.len()),
                        json.as_ptr()
                    );
                }
                // Both ADDED frames (the change the second watcher's selection entered, the
                // initial object): the static head, then the encoding and the tail as one
                // slice of that object's frame buffer.
                for object in [&big, &old] {
                    let json = object.encoded(Encoding::Json, &stats);
                    let rest: Vec<usize> = parts
                        .iter()
                        .enumerate()
                        .filter(|(_, part)| {
                            part.as_ptr() == json.as_ptr() && part.len() == json.len() + 2
                        })
                        .map(|(at, _)| at)
                        .collect();
                    assert_eq!(rest.len(), 1, "the ADDED frame's rest, once");
                    assert_eq!(&parts[rest[0] - 1][..], br#"{"type":"ADDED","object":"#);
                    assert_eq!(&parts[rest[0]][json.len()..], FRAME_TAIL);
                }
            } else {
                assert_eq!(whole, 0, "{conversion:?}");
            }
        }
    }

    #[test]
    fn protobuf_frames_share_one_encoding_per_event_and_end_on_an_unencodable_object() {
        let stats = EncodeStats::default();
        let big = configmap("big", 3, &"x".repeat(4000));
        let small = configmap("small", 4, "y");
        let deleted = Arc::new(Event::new(5, None, Some(small.clone())));
        let items = vec![
            WatchItem::Initial(big.clone()),
            WatchItem::Initial(small.clone()),
            WatchItem::Bookmark {
                revision: 4,
                initial_events_end: true,
            },
            WatchItem::Event {
                event_type: EventType::Deleted,
                event: deleted,
            },
        ];
        let (mut first, mut second) = (Vec::new(), Vec::new());
        encode_protobuf_frames(&mut first, &def(), &items, Conversion::None, &stats).unwrap();
        encode_protobuf_frames(&mut second, &def(), &items, Conversion::None, &stats).unwrap();
        // Two watchers, one serialization per object and per DELETED event.
        assert_eq!(stats.serializations(), 3);
        assert_eq!(first.concat(), second.concat());
        let shared = big.encoded_external(cached_object_message, &stats).unwrap();
        assert!(first.iter().any(|p| p.as_ptr() == shared.as_ptr()));
        assert!(second.iter().any(|p| p.as_ptr() == shared.as_ptr()));
        let events = decode_watch_stream(&first.concat()).unwrap();
        let summary: Vec<(&str, &Value)> = events
            .iter()
            .map(|(t, o)| (t.as_str(), &o["metadata"]["resourceVersion"]))
            .collect();
        assert_eq!(
            summary,
            [
                ("ADDED", &json!("3")),
                ("ADDED", &json!("4")),
                ("BOOKMARK", &json!("4")),
                ("DELETED", &json!("5"))
            ]
        );
        assert_eq!(events[0].1, *big.body());
        assert_eq!(
            events[2].1["metadata"]["annotations"]["k8s.io/initial-events-end"],
            "true"
        );

        let odd = Arc::new(Object::new(
            "default",
            "odd",
            BTreeMap::new(),
            BTreeMap::new(),
            6,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "odd"},
                   "extra": true}),
        ));
        let mut parts = Vec::new();
        let items = [WatchItem::Initial(small), WatchItem::Initial(odd)];
        let error = encode_protobuf_frames(&mut parts, &def(), &items, Conversion::None, &stats)
            .unwrap_err();
        assert_eq!((error.code, error.reason.as_str()), (410, "Expired"));
        assert!(
            error.message.contains("\"default/odd\""),
            "{}",
            error.message
        );
        // The frames before it are kept.
        assert_eq!(decode_watch_stream(&parts.concat()).unwrap().len(), 1);
        let status = decode_watch_stream(&protobuf_error_frame(&error)).unwrap();
        assert_eq!(status[0].0, "ERROR");
        assert_eq!(status[0].1["code"], 410);
    }
}

//! Property tests of query parameter parsing, continue tokens and the watch event encoder,
//! the same properties the fuzz targets `query_params`, `continue_token` and `watch_encoder`
//! check (see fuzz/README.md): no input panics, malformed parameters are 400s (422 for list and
//! watch option combinations and an unsupported resourceVersionMatch, as kube-apiserver
//! answers), tokens round-trip, and every watch frame is one line of JSON with the right type
//! and resource version.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::BytesMut;
use proptest::prelude::*;
use serde_json::{Value, json};
use watchkeeper_api::builtin_resources;
use watchkeeper_api::negotiate::Conversion;
use watchkeeper_api::query::{ContinueToken, Options, ResourceVersion, is_clean_key};
use watchkeeper_api::watch_frame::{SHARE_MIN_BYTES, encode_frame, encode_frames};

/// A watch's conversion from a proptest pick: objects, Tables or metadata only.
fn conversion(pick: u8) -> Conversion {
    match pick {
        0 => Conversion::None,
        1 => Conversion::Table,
        _ => Conversion::PartialObjectMetadata,
    }
}
use watchkeeper_core::{EncodeStats, Event, EventType, Object, WatchItem};

fn param() -> impl Strategy<Value = String> {
    let name = prop_oneof![
        Just("labelSelector"),
        Just("fieldSelector"),
        Just("resourceVersion"),
        Just("resourceVersionMatch"),
        Just("limit"),
        Just("continue"),
        Just("watch"),
        Just("allowWatchBookmarks"),
        Just("sendInitialEvents"),
        Just("timeoutSeconds"),
        Just("other"),
    ];
    let value = prop_oneof![
        Just(String::new()),
        Just("0".to_owned()),
        Just("true".to_owned()),
        Just("NotOlderThan".to_owned()),
        Just("Exact".to_owned()),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<u64>().prop_map(|n| n.to_string()),
        "[a-z=!,()% &.+-]{0,12}",
        "\\PC{0,8}",
    ];
    (name, value).prop_map(|(name, value)| {
        let value: String = serde_urlencoded::to_string([("", value)]).unwrap()[1..].to_owned();
        format!("{name}={value}")
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn query_strings_parse_or_are_400(params in prop::collection::vec(param(), 0..6), raw in "\\PC{0,30}") {
        for query in [params.join("&"), raw] {
            match Options::parse(Some(&query)) {
                Ok(mut options) => {
                    prop_assert!(options.timeout_seconds != Some(0));
                    if let Err(error) = options.validate_list() {
                        prop_assert_eq!(error.code, 422);
                    }
                    if let Err(error) = options.validate_watch("pods") {
                        prop_assert_eq!(error.code, 422);
                    }
                }
                // An unsupported resourceVersionMatch is kube-apiserver's 422 NotSupported;
                // every other malformed parameter a 400.
                Err(error) if error.message.contains("resourceVersionMatch: Unsupported value") => {
                    prop_assert_eq!(error.code, 422);
                }
                Err(error) => {
                    prop_assert_eq!(error.code, 400);
                    prop_assert!(!error.message.is_empty());
                }
            }
        }
    }

    #[test]
    fn numeric_parameters_parse_like_kubernetes(limit in any::<i64>(), rv in any::<u64>(), timeout in any::<i64>()) {
        let options = Options::parse(Some(&format!(
            "limit={limit}&resourceVersion={rv}&timeoutSeconds={timeout}"
        )))
        .unwrap();
        prop_assert_eq!(options.limit, usize::try_from(limit.max(0)).unwrap());
        prop_assert_eq!(
            options.resource_version,
            if rv == 0 { ResourceVersion::Any } else { ResourceVersion::At(rv) }
        );
        prop_assert_eq!(options.timeout_seconds, u64::try_from(timeout).ok().filter(|t| *t > 0));
    }

    #[test]
    fn continue_tokens_round_trip(revision in proptest::option::of(1..i64::MAX.unsigned_abs()), start_after in "\\PC{0,40}|[a./]{0,12}") {
        let token = ContinueToken { revision, start_after };
        // A start key a path clean would change is a forged one (kube's `DecodeContinue`).
        match ContinueToken::decode(&token.encode()) {
            Ok(decoded) => {
                prop_assert!(is_clean_key(&token.start_after));
                prop_assert_eq!(decoded, token);
            }
            Err(error) => {
                prop_assert!(!is_clean_key(&token.start_after));
                prop_assert_eq!(error.code, 400);
            }
        }
    }

    #[test]
    fn continue_token_garbage_is_400(text in "\\PC{0,60}|[A-Za-z0-9_=-]{0,60}") {
        match ContinueToken::decode(&text) {
            Ok(token) => {
                prop_assert!(token.revision.is_none_or(|revision| revision > 0));
                prop_assert_eq!(ContinueToken::decode(&token.encode()).unwrap(), token);
            }
            Err(error) => prop_assert_eq!(error.code, 400),
        }
    }

    #[test]
    fn watch_frames_are_one_line_of_json(
        kind in 0..4u8,
        revision in 2..u64::MAX,
        pick in 0..3u8,
        def_index in 0..64usize,
        name in "[a-z0-9]{1,8}",
        extra in prop_oneof![Just(Value::Null), "\\PC{0,10}".prop_map(Value::String), any::<i64>().prop_map(Value::from)],
        with_metadata in any::<bool>(),
    ) {
        let defs = builtin_resources();
        let def = &defs[def_index % defs.len()];
        let body = if with_metadata {
            json!({"metadata": {"name": name, "resourceVersion": "1", "creationTimestamp": extra}, "spec": {"x": extra}})
        } else {
            json!({"spec": extra})
        };
        let object = |rv| Arc::new(Object::new("default", &name, BTreeMap::new(), BTreeMap::new(), rv, body.clone()));
        let (item, expected) = match kind {
            0 => (WatchItem::Initial(object(revision)), "ADDED"),
            1 => (WatchItem::Event { event_type: EventType::Modified, event: Arc::new(Event::new(revision, Some(object(revision)), Some(object(1)))) }, "MODIFIED"),
            2 => (WatchItem::Event { event_type: EventType::Deleted, event: Arc::new(Event::new(revision, None, Some(object(1)))) }, "DELETED"),
            _ => (WatchItem::Bookmark { revision, initial_events_end: pick == 1 }, "BOOKMARK"),
        };
        let conversion = conversion(pick);
        let mut out = BytesMut::new();
        encode_frame(&mut out, def, &item, conversion, &EncodeStats::default(), 1_800_000_000);
        prop_assert_eq!(out.last(), Some(&b'\n'));
        prop_assert_eq!(out.iter().filter(|&&b| b == b'\n').count(), 1);
        let frame: Value = serde_json::from_slice(&out).unwrap();
        prop_assert_eq!(&frame["type"], expected);
        let object = &frame["object"];
        let revision_text = revision.to_string();
        if expected == "BOOKMARK" {
            prop_assert_eq!(&object["metadata"]["resourceVersion"], revision_text.as_str());
            let kind = if conversion == Conversion::PartialObjectMetadata { "PartialObjectMetadata" } else { def.kind.as_str() };
            prop_assert_eq!(&object["kind"], kind);
        } else if conversion == Conversion::Table {
            prop_assert_eq!(&object["kind"], "Table");
        } else if conversion == Conversion::PartialObjectMetadata {
            prop_assert_eq!(&object["kind"], "PartialObjectMetadata");
            prop_assert_eq!(object.as_object().unwrap().len(), 3);
            if with_metadata {
                prop_assert_eq!(&object["metadata"]["resourceVersion"], revision_text.as_str());
                prop_assert_eq!(&object["metadata"]["name"], name.as_str());
            }
        } else if with_metadata {
            prop_assert_eq!(&object["metadata"]["resourceVersion"], revision_text.as_str());
        } else {
            prop_assert_eq!(object, &body);
        }
    }
}

/// Found by the `watch_encoder` fuzz target: without serde_json's `float_roundtrip`, a number
/// too large for an integer (here 70 digits) was parsed to a float one unit in the last place
/// off, so a client read back a different number than it wrote. Now every number is parsed to
/// the nearest float and served back as that exact float.
#[test]
fn numbers_survive_the_watch_encoder_exactly() {
    let text = r#"{"":[1,8,6666666666666666666666666666666666666666666666666666666666666668881888,881,"a"],"f":[0.30000000000000004,1.7976931348623157e308,5e-324,6.6666666666666674e+69]}"#;
    let body: Value = serde_json::from_str(text).unwrap();
    let object = Arc::new(Object::new(
        "default",
        "x",
        BTreeMap::new(),
        BTreeMap::new(),
        7,
        body.clone(),
    ));
    let defs = builtin_resources();
    let mut out = BytesMut::new();
    encode_frame(
        &mut out,
        &defs[0],
        &WatchItem::Initial(object),
        Conversion::None,
        &EncodeStats::default(),
        0,
    );
    let frame: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(frame["object"], body);
    assert_eq!(
        body[""][2].as_f64().unwrap(),
        6.666_666_666_666_667e69,
        "the nearest float to the 70-digit number"
    );
}

proptest! {
    /// The pieces a watch body is sent in (large objects shared, small frames copied together)
    /// concatenate to exactly the frames one by one, and every object of `SHARE_MIN_BYTES` or
    /// more is a piece of its own: the shared cached encoding, not a copy (a MODIFIED event's
    /// whole frame, the buffer the encoding lives in).
    #[test]
    fn watch_body_pieces_are_the_frames_with_large_objects_shared(
        sizes in proptest::collection::vec(0..3 * SHARE_MIN_BYTES, 0..12),
        kinds in proptest::collection::vec(0..4u8, 12),
        pick in 0..3u8,
    ) {
        let conversion = conversion(pick);
        let defs = builtin_resources();
        let def = &defs[0];
        let stats = EncodeStats::default();
        let items: Vec<WatchItem> = sizes
            .iter()
            .zip(&kinds)
            .enumerate()
            .map(|(i, (&size, &kind))| {
                let revision = 10 + i as u64;
                let object = |rv| {
                    Arc::new(Object::new(
                        "default",
                        &format!("o{i}"),
                        BTreeMap::new(),
                        BTreeMap::new(),
                        rv,
                        json!({"metadata": {"name": format!("o{i}")}, "data": {"x": "y".repeat(size)}}),
                    ))
                };
                match kind {
                    0 => WatchItem::Initial(object(revision)),
                    1 => WatchItem::Event { event_type: EventType::Modified, event: Arc::new(Event::new(revision, Some(object(revision)), Some(object(1)))) },
                    2 => WatchItem::Event { event_type: EventType::Deleted, event: Arc::new(Event::new(revision, None, Some(object(1)))) },
                    _ => WatchItem::Bookmark { revision, initial_events_end: false },
                }
            })
            .collect();
        let mut expected = BytesMut::new();
        for item in &items {
            encode_frame(&mut expected, def, item, conversion, &stats, 1_800_000_000);
        }
        let mut parts = Vec::new();
        encode_frames(&mut parts, def, &items, conversion, &stats, 1_800_000_000);
        let joined: Vec<u8> = parts.iter().flat_map(|p| p.iter().copied()).collect();
        prop_assert_eq!(&joined[..], &expected[..]);
        for item in &items {
            let encoding = if conversion == Conversion::PartialObjectMetadata {
                watchkeeper_core::Encoding::PartialMetadataJson
            } else {
                watchkeeper_core::Encoding::Json
            };
            if let Some((event_type, bytes)) = item.encoded(encoding, &stats) {
                // A piece is the encoding itself, or in JSON a slice of the one buffer of its
                // object's MODIFIED frame, with the encoding in it (not a copy): a MODIFIED
                // event's whole frame, an ADDED one's encoding and tail.
                let json = encoding == watchkeeper_core::Encoding::Json;
                let head = watchkeeper_core::object::MODIFIED_FRAME_HEAD.len();
                let shared = parts.iter().any(|p| match event_type {
                    EventType::Modified if json => {
                        p.as_ptr().wrapping_add(head) == bytes.as_ptr() && p.len() == head + bytes.len() + 2
                    }
                    EventType::Added if json => p.as_ptr() == bytes.as_ptr() && p.len() == bytes.len() + 2,
                    _ => p.as_ptr() == bytes.as_ptr() && p.len() == bytes.len(),
                });
                prop_assert_eq!(shared, conversion != Conversion::Table && bytes.len() >= SHARE_MIN_BYTES);
            }
        }
    }
}

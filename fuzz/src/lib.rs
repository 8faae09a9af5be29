//! The harness functions behind watchkeeper's fuzz targets (one per target, same name).
//!
//! Each function takes the fuzzer's bytes, feeds them to the code the server runs, and panics
//! (a finding) when that code panics or when a cheap property breaks:
//!
//! - selectors: parse → display → parse gives back the same selector; matching never panics;
//! - query parameters: errors are 400s, watch validation errors are 422s;
//! - continue tokens: a decoded token re-encodes to a token that decodes to itself;
//! - patches: results are JSON objects that serialize and parse back equal; errors carry
//!   Kubernetes' codes; a merge patch applied twice changes nothing more (RFC 7386);
//! - validation: a created or updated object's name passes the name rules, never contains `/`
//!   or `..`, and its key stays under the namespace's prefix;
//! - watch encoder: each frame is exactly one line of JSON with the right `type` and the object
//!   carrying the item's resource version;
//! - protobuf: decoded bodies are JSON objects; errors are 400 or 415.
//!
//! Everything fuzzed lives in the core and api crates (query parameters, continue tokens and
//! watch framing are `watchkeeper_api::query` and `watchkeeper_api::watch_frame`), so the fuzz
//! build does not pull in the server's network stack (kube, etcd client, TLS).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};
use watchkeeper_api::{ApiError, CreateContext, PatchType, ResourceDef};
use watchkeeper_core::{
    EncodeStats, Event, EventType, FieldSelector, LabelSelector, Object, WatchItem, object_key,
};

use watchkeeper_api::{query, watch_frame};

fn text(data: &[u8]) -> Option<&str> {
    std::str::from_utf8(data).ok()
}

/// Splits the input at the first NUL byte: two documents for targets that need two.
fn split2(data: &[u8]) -> (&[u8], &[u8]) {
    match data.iter().position(|&b| b == 0) {
        Some(index) => (&data[..index], &data[index + 1..]),
        None => (data, &[]),
    }
}

fn assert_code(error: &ApiError, codes: &[u16], what: &str) {
    assert!(
        codes.contains(&error.code),
        "{what}: unexpected code {} ({})",
        error.code,
        error.message
    );
    assert!(!error.message.is_empty(), "{what}: empty error message");
}

/// Label selectors: parse, and if it parses, display → parse round-trips and matching works.
pub fn selector_label(data: &[u8]) {
    let Some(input) = text(data) else { return };
    let Ok(selector) = LabelSelector::parse(input) else {
        return;
    };
    let shown = selector.to_string();
    let again = LabelSelector::parse(&shown)
        .unwrap_or_else(|e| panic!("{input:?} displays as {shown:?}, which does not parse: {e}"));
    assert_eq!(again, selector, "{input:?} → {shown:?}");
    // Matching against labels built from the selector's own keys and values.
    let mut labels = BTreeMap::new();
    for requirement in selector.requirements() {
        let value = match &requirement.operator {
            watchkeeper_core::selector::LabelOperator::In(values)
            | watchkeeper_core::selector::LabelOperator::NotIn(values) => {
                values.first().cloned().unwrap_or_default()
            }
            _ => String::new(),
        };
        labels.insert(requirement.key.clone(), value);
    }
    let _ = selector.matches(&labels);
    let _ = selector.matches(&BTreeMap::new());
}

/// Field selectors: parse, and if it parses, display → parse round-trips and matching works.
pub fn selector_field(data: &[u8]) {
    let Some(input) = text(data) else { return };
    let Ok(selector) = FieldSelector::parse(input) else {
        return;
    };
    let shown = selector.to_string();
    let again = FieldSelector::parse(&shown)
        .unwrap_or_else(|e| panic!("{input:?} displays as {shown:?}, which does not parse: {e}"));
    assert_eq!(again, selector, "{input:?} → {shown:?}");
    let fields: BTreeMap<String, String> = selector
        .requirements()
        .iter()
        .map(|r| (r.field.clone(), r.value.clone()))
        .collect();
    // A selector of only `=` requirements matches the fields it names (unless two of them name
    // the same field with different values).
    let consistent = selector
        .requirements()
        .iter()
        .all(|r| !r.negated && fields.get(&r.field) == Some(&r.value));
    if consistent {
        assert!(
            selector.matches(&fields),
            "{input:?} does not match {fields:?}"
        );
    }
    let _ = selector.matches(&BTreeMap::new());
}

/// Query strings of list/get/watch: errors are 400; watch validation errors are 422.
pub fn query_params(data: &[u8]) {
    let Some(input) = text(data) else { return };
    match query::Options::parse(Some(input)) {
        Ok(mut options) => {
            if let Some(timeout) = options.timeout_seconds {
                assert!(timeout > 0, "{input:?}: timeoutSeconds 0 kept");
            }
            if let Some(token) = &options.continue_token
                && let Err(error) = query::ContinueToken::decode(token)
            {
                assert_code(&error, &[400], "continue");
            }
            if let Err(error) = options.validate_list() {
                assert_code(&error, &[422], "validate_list");
            }
            if let Err(error) = options.validate_watch("pods") {
                assert_code(&error, &[422], "validate_watch");
            }
        }
        // kube-apiserver's 422 NotSupported for an unknown resourceVersionMatch.
        Err(error)
            if error
                .message
                .contains("resourceVersionMatch: Unsupported value") =>
        {
            assert_code(&error, &[422], "Options::parse");
        }
        Err(error) => assert_code(&error, &[400], "Options::parse"),
    }
}

/// Continue tokens: arbitrary text decodes or is a 400; a decoded token re-encodes to itself;
/// a token built from arbitrary parts decodes to those parts.
pub fn continue_token(data: &[u8]) {
    if let Some(input) = text(data) {
        match query::ContinueToken::decode(input) {
            Ok(token) => {
                assert!(token.revision.is_none_or(|revision| revision > 0));
                let again = query::ContinueToken::decode(&token.encode())
                    .unwrap_or_else(|e| panic!("{input:?} re-encodes to garbage: {e:?}"));
                assert_eq!(again, token);
            }
            Err(error) => assert_code(&error, &[400], "ContinueToken::decode"),
        }
    }
    if data.len() >= 8 {
        // A revision etcd can have (an int64), or none: the latest (`"rv":-1`).
        let revision = u64::from_le_bytes(data[..8].try_into().unwrap_or_default())
            .checked_rem(i64::MAX.unsigned_abs())
            .filter(|revision| *revision > 0);
        let start_after = String::from_utf8_lossy(&data[8..]).into_owned();
        let token = query::ContinueToken {
            revision,
            start_after,
        };
        // A start key a path clean would change is a forged one (kube's `DecodeContinue`).
        match query::ContinueToken::decode(&token.encode()) {
            Ok(decoded) => {
                assert!(query::is_clean_key(&token.start_after), "{token:?}");
                assert_eq!(decoded, token);
            }
            Err(error) => {
                assert!(
                    !query::is_clean_key(&token.start_after),
                    "{token:?}: {error:?}"
                );
                assert_code(&error, &[400], "ContinueToken::decode");
            }
        }
    }
}

fn builtin(plural: &str) -> ResourceDef {
    watchkeeper_api::builtin_resources()
        .into_iter()
        .find(|d| d.plural == plural)
        .expect("a built-in resource")
}

fn default_pod() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "nginx", "ports": [{"containerPort": 80}]}]},
    })
}

/// The original object of a patch target: the first document if it is JSON, else a pod.
fn original(data: &[u8]) -> Value {
    serde_json::from_slice(data).unwrap_or_else(|_| default_pod())
}

fn check_patch_result(result: &Result<Value, ApiError>, what: &str) {
    match result {
        Ok(value) => {
            assert!(value.is_object(), "{what}: result is not an object");
            let text = serde_json::to_string(value).expect("a Value serializes");
            let back: Value = serde_json::from_str(&text).expect("patched JSON parses");
            assert_eq!(&back, value, "{what}: result does not survive JSON");
        }
        // Where evanphx/json-patch v4 panics, and for strategic merge errors without a status
        // of their own, kube-apiserver answers 500, and so does this.
        Err(error) if watchkeeper_api::patch::is_kube_patch_500(error) => {}
        Err(error) => assert_code(error, &[400, 413, 415, 422], what),
    }
}

/// JSON merge patch (RFC 7386): `original NUL patch`.
pub fn patch_merge(data: &[u8]) {
    let (first, patch) = split2(data);
    let original = original(first);
    let def = builtin("pods");
    let result = watchkeeper_api::apply_patch(&def, PatchType::Merge, &original, patch);
    check_patch_result(&result, "merge patch");
    if let Ok(once) = result {
        let twice = watchkeeper_api::apply_patch(&def, PatchType::Merge, &once, patch)
            .expect("a merge patch that applied once applies again");
        assert_eq!(twice, once, "a merge patch is idempotent");
    }
}

/// JSON patch (RFC 6902): `original NUL patch`.
pub fn patch_json(data: &[u8]) {
    let (first, patch) = split2(data);
    let original = original(first);
    let def = builtin("pods");
    let result = watchkeeper_api::apply_patch(&def, PatchType::Json, &original, patch);
    check_patch_result(&result, "JSON patch");
}

/// Strategic merge patch: `original NUL patch`, on pods and deployments.
pub fn patch_strategic(data: &[u8]) {
    let (first, patch) = split2(data);
    let original = original(first);
    for plural in ["pods", "deployments"] {
        let def = builtin(plural);
        let result =
            watchkeeper_api::apply_patch(&def, PatchType::StrategicMerge, &original, patch);
        check_patch_result(&result, "strategic merge patch");
    }
}

fn check_key_safety(def: &ResourceDef, object: &Value, what: &str) {
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("{what}: no metadata.name"));
    assert!(
        watchkeeper_api::validate_name(def, name).is_ok(),
        "{what}: invalid name {name:?} accepted"
    );
    assert!(
        !name.is_empty() && !name.contains('/') && !name.contains(".."),
        "{what}: {name:?}"
    );
    let namespace = object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if def.namespaced {
        assert!(
            !namespace.is_empty() && !namespace.contains('/') && !namespace.contains('.'),
            "{what}: namespace {namespace:?}"
        );
        let key = object_key(namespace, name);
        assert_eq!(key.strip_prefix(&format!("{namespace}/")), Some(name));
    } else {
        assert!(
            namespace.is_empty(),
            "{what}: cluster-scoped object with a namespace"
        );
    }
}

/// Object validation: `[resource selector byte] create-body NUL update-body`. The created object
/// must be well named and keyed; so must the updated one.
pub fn validate_object(data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let defs = watchkeeper_api::builtin_resources();
    let def = &defs[usize::from(selector) % defs.len()];
    let (create, update) = split2(rest);
    let Ok(body) = serde_json::from_slice::<Value>(create) else {
        return;
    };
    let url_namespace = match selector / 64 {
        0 => None,
        1 => Some("default"),
        2 => Some(""),
        _ => Some(".."),
    };
    let ctx = CreateContext {
        namespace: if def.namespaced { url_namespace } else { None },
        uid: "00000000-0000-0000-0000-000000000000".to_owned(),
        creation_timestamp: "2026-11-29T00:00:00Z".to_owned(),
        random_suffix: "bcd2f".to_owned(),
    };
    let created = match watchkeeper_api::prepare_create(def, body, &ctx) {
        Ok(created) => created,
        Err(error) => {
            assert_code(&error, &[400, 413, 422], "prepare_create");
            return;
        }
    };
    check_key_safety(def, &created, "prepare_create");
    let Ok(new) = serde_json::from_slice::<Value>(update) else {
        return;
    };
    match watchkeeper_api::prepare_update(def, &created, new) {
        Ok(updated) => {
            check_key_safety(def, &updated, "prepare_update");
            assert_eq!(
                updated.pointer("/metadata/name"),
                created.pointer("/metadata/name"),
                "an update renamed the object"
            );
        }
        Err(error) => assert_code(&error, &[400, 413, 422], "prepare_update"),
    }
}

/// Schema decoding of built-in kinds: `[resource selector byte] body-JSON`. Whatever the body,
/// the check answers (no panic); an accepted object decodes (a stored object never breaks a
/// typed client), and so does every merge-patched result the server would store.
pub fn validate_schema(data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let defs = watchkeeper_api::builtin_resources();
    let def = &defs[usize::from(selector) % defs.len()];
    let Ok(body) = serde_json::from_slice::<Value>(rest) else {
        return;
    };
    let ctx = CreateContext {
        namespace: if def.namespaced {
            Some("default")
        } else {
            None
        },
        uid: "00000000-0000-0000-0000-000000000000".to_owned(),
        creation_timestamp: "2026-11-29T00:00:00Z".to_owned(),
        random_suffix: "bcd2f".to_owned(),
    };
    match watchkeeper_api::prepare_create(def, body.clone(), &ctx) {
        Ok(created) => {
            assert_eq!(
                watchkeeper_api::schema::decode_error(def, &created),
                None,
                "an accepted object does not decode"
            );
            // The body as a merge patch onto what was created: a stored result decodes too.
            if let Ok(patched) = watchkeeper_api::apply_patch(def, PatchType::Merge, &created, rest)
                && let Ok(updated) = watchkeeper_api::prepare_update(def, &created, patched)
            {
                assert_eq!(watchkeeper_api::schema::decode_error(def, &updated), None);
            }
        }
        Err(error) => assert_code(&error, &[400, 413, 422], "prepare_create"),
    }
}

/// The watch event encoder: `[flags] [revision: 8 bytes] body-JSON`. Every frame is one line of
/// JSON `{"type", "object"}` with the right type, and the object carries the revision.
pub fn watch_encoder(data: &[u8]) {
    if data.len() < 9 {
        return;
    }
    let flags = data[0];
    let revision = u64::from_le_bytes(data[1..9].try_into().unwrap_or_default()).max(1);
    // The cache holds JSON objects only (the reflector drops any other stored value).
    let Ok(body @ Value::Object(_)) = serde_json::from_slice::<Value>(&data[9..]) else {
        return;
    };
    let defs = watchkeeper_api::builtin_resources();
    let def = &defs[usize::from(flags >> 3) % defs.len()];
    let name = body
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("x")
        .to_owned();
    let object = |rv| {
        Arc::new(Object::new(
            "default",
            &name,
            BTreeMap::new(),
            BTreeMap::new(),
            rv,
            body.clone(),
        ))
    };
    let (item, expected_type) = match flags & 3 {
        0 => (WatchItem::Initial(object(revision)), "ADDED"),
        1 => {
            let event = Event::new(revision, Some(object(revision)), Some(object(1)));
            (
                WatchItem::Event {
                    event_type: EventType::Modified,
                    event: Arc::new(event),
                },
                "MODIFIED",
            )
        }
        2 => {
            let event = Event::new(revision, None, Some(object(1)));
            (
                WatchItem::Event {
                    event_type: EventType::Deleted,
                    event: Arc::new(event),
                },
                "DELETED",
            )
        }
        _ => (
            WatchItem::Bookmark {
                revision,
                initial_events_end: flags & 4 != 0,
            },
            "BOOKMARK",
        ),
    };
    let table = flags & 4 != 0 && expected_type != "BOOKMARK";
    let conversion = if table {
        watchkeeper_api::negotiate::Conversion::Table
    } else {
        watchkeeper_api::negotiate::Conversion::None
    };
    let stats = EncodeStats::default();
    let mut out = bytes::BytesMut::new();
    watch_frame::encode_frame(&mut out, def, &item, conversion, &stats, 1_800_000_000);
    // The pieces the server sends (large encodings shared) are exactly the frame.
    let mut parts = Vec::new();
    watch_frame::encode_frames(
        &mut parts,
        def,
        std::iter::once(&item),
        conversion,
        &stats,
        1_800_000_000,
    );
    assert_eq!(parts.concat(), &out[..], "the body pieces are the frame");
    assert_eq!(out.last(), Some(&b'\n'), "a frame ends with a newline");
    assert_eq!(
        out.iter().filter(|&&b| b == b'\n').count(),
        1,
        "a frame is one line"
    );
    let frame: Value = serde_json::from_slice(&out).expect("a frame is JSON");
    assert_eq!(frame["type"], expected_type);
    let object = &frame["object"];
    assert!(object.is_object(), "a frame carries an object");
    let revision_text = revision.to_string();
    if expected_type == "BOOKMARK" {
        assert_eq!(
            object["metadata"]["resourceVersion"],
            revision_text.as_str()
        );
        assert_eq!(object["kind"], def.kind.as_str());
    } else if table {
        assert_eq!(object["kind"], "Table");
    } else if body.get("metadata").is_some_and(Value::is_object) {
        assert_eq!(
            object["metadata"]["resourceVersion"],
            revision_text.as_str(),
            "the object carries the event's resource version"
        );
    } else {
        assert_eq!(
            object, &body,
            "a body without a metadata object is sent as is"
        );
    }
}

/// Protobuf request bodies: `[resource selector byte] body`. Decoded bodies are JSON objects;
/// errors are 400 or 415.
pub fn protobuf_decode(data: &[u8]) {
    let Some((&selector, body)) = data.split_first() else {
        return;
    };
    let defs = watchkeeper_api::builtin_resources();
    let def = &defs[usize::from(selector) % defs.len()];
    match watchkeeper_api::decode_protobuf(def, body) {
        Ok(value) => {
            assert!(value.is_object(), "a decoded body is an object");
            let text = serde_json::to_string(&value).expect("a Value serializes");
            let _: Value = serde_json::from_str(&text).expect("decoded JSON parses");
        }
        Err(error) => assert_code(&error, &[400, 415], "decode_protobuf"),
    }
}

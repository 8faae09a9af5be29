//! Property tests of protobuf request decoding, the same properties the fuzz target
//! `protobuf_decode` checks (see fuzz/README.md): any bytes inside a well-formed envelope, for
//! every kind the decoder knows, give a JSON object or a 400/415 Status, never a panic; and the
//! response encoder, reading the same schema tables the other way, turns every object the
//! decoder produced back into bytes that decode to the same object.

use proptest::prelude::*;
use watchkeeper_api::protobuf::{decode_response, encode_protobuf};
use watchkeeper_api::{builtin_resources, decode_protobuf, protobuf_kinds};

fn varint(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

fn field(out: &mut Vec<u8>, number: u64, payload: &[u8]) {
    varint(out, number << 3 | 2);
    varint(out, payload.len() as u64);
    out.extend_from_slice(payload);
}

fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let mut type_meta = Vec::new();
    field(&mut type_meta, 1, api_version.as_bytes());
    field(&mut type_meta, 2, kind.as_bytes());
    let mut out = b"k8s\0".to_vec();
    field(&mut out, 1, &type_meta);
    field(&mut out, 2, raw);
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn raw_bytes_of_every_kind_decode_or_fail_cleanly(
        kind_index in 0..1024usize,
        def_index in 0..64usize,
        raw in prop::collection::vec(any::<u8>(), 0..256),
    ) {
        let kinds = protobuf_kinds();
        let (api_version, kind) = kinds[kind_index % kinds.len()];
        let defs = builtin_resources();
        let def = &defs[def_index % defs.len()];
        match decode_protobuf(def, &envelope(api_version, kind, &raw)) {
            Ok(value) => {
                prop_assert!(value.is_object());
                let text = serde_json::to_string(&value).unwrap();
                prop_assert!(serde_json::from_str::<serde_json::Value>(&text).is_ok());
            }
            Err(error) => prop_assert!(matches!(error.code, 400 | 415), "{}", error.code),
        }
    }

    /// Raw bytes made of valid fields only (a small tree of the kind's known field numbers and
    /// wire types is likelier to decode than arbitrary bytes): whatever decodes, encodes back
    /// to the same JSON.
    #[test]
    fn decoded_objects_encode_back_to_the_same_json(
        kind_index in 0..1024usize,
        raw in prop::collection::vec(any::<u8>(), 0..256),
        fields in prop::collection::vec((1..20u64, prop::collection::vec(any::<u8>(), 0..24)), 0..8),
    ) {
        let kinds = protobuf_kinds();
        let (api_version, kind) = kinds[kind_index % kinds.len()];
        let defs = builtin_resources();
        let mut built = Vec::new();
        for (number, payload) in &fields {
            field(&mut built, *number, payload);
        }
        for raw in [raw, built] {
            let Ok(value) = decode_protobuf(&defs[0], &envelope(api_version, kind, &raw)) else {
                continue;
            };
            if kind == "DeleteOptions" {
                continue;
            }
            let body = encode_protobuf(&value).map_err(|e| TestCaseError::fail(e.message))?;
            let again = decode_response(&body).map_err(|e| TestCaseError::fail(e.message))?;
            prop_assert_eq!(without_nulls(again), without_nulls(value));
        }
    }
}

/// The value without `null` members (a zero time decodes as `null` and is encoded as absent,
/// which Go reads the same).
fn without_nulls(value: serde_json::Value) -> serde_json::Value {
    match value {
        serde_json::Value::Object(map) => serde_json::Value::Object(
            map.into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k, without_nulls(v)))
                .collect(),
        ),
        serde_json::Value::Array(items) => {
            serde_json::Value::Array(items.into_iter().map(without_nulls).collect())
        }
        other => other,
    }
}

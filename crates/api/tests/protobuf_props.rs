//! Property tests of protobuf request decoding, the same properties the fuzz target
//! `protobuf_decode` checks (see fuzz/README.md): any bytes inside a well-formed envelope, for
//! every kind the decoder knows, give a JSON object or a 400/415 Status, never a panic.

use proptest::prelude::*;
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
        kind_index in 0..64usize,
        def_index in 0..64usize,
        raw in prop::collection::vec(any::<u8>(), 0..256),
    ) {
        let kinds = protobuf_kinds();
        let kind = &kinds[kind_index % kinds.len()];
        let (api_version, kind) = match kind.split_once('/') {
            Some((group, kind)) => (format!("{group}/v1"), kind.to_owned()),
            None => ("v1".to_owned(), kind.clone()),
        };
        let defs = builtin_resources();
        let def = &defs[def_index % defs.len()];
        match decode_protobuf(def, &envelope(&api_version, &kind, &raw)) {
            Ok(value) => {
                prop_assert!(value.is_object());
                let text = serde_json::to_string(&value).unwrap();
                prop_assert!(serde_json::from_str::<serde_json::Value>(&text).is_ok());
            }
            Err(error) => prop_assert!(matches!(error.code, 400 | 415), "{}", error.code),
        }
    }
}

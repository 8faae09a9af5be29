//! Property tests of patch application, the same properties the fuzz targets `patch_merge`,
//! `patch_json` and `patch_strategic` check (see fuzz/README.md): no input panics, results are
//! JSON objects that survive a JSON round trip, errors carry Kubernetes' codes, and a merge
//! patch applied twice changes nothing more (RFC 7386 idempotence), and merge and strategic
//! merge results are never larger than the original plus the patch (the memory bound documented
//! in `watchkeeper_api::patch`; JSON patch copies are bounded separately, see `patch_bomb.rs`).

use proptest::prelude::*;
use serde_json::{Value, json};
use watchkeeper_api::{ApiError, PatchType, ResourceDef, apply_patch, builtin_resources};

fn def(plural: &str) -> ResourceDef {
    builtin_resources()
        .into_iter()
        .find(|d| d.plural == plural)
        .unwrap()
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("metadata".to_owned()),
        Just("spec".to_owned()),
        Just("containers".to_owned()),
        Just("name".to_owned()),
        Just("$patch".to_owned()),
        Just("$retainKeys".to_owned()),
        Just("$setElementOrder/containers".to_owned()),
        Just("$deleteFromPrimitiveList/finalizers".to_owned()),
        Just("finalizers".to_owned()),
        "[a-z]{1,2}",
    ]
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        prop_oneof![
            Just("delete".to_owned()),
            Just("replace".to_owned()),
            Just("merge".to_owned()),
            "[a-z]{0,3}"
        ]
        .prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(key(), inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn arb_json_patch() -> impl Strategy<Value = Value> {
    let path = prop_oneof![
        Just("".to_owned()),
        Just("/".to_owned()),
        Just("/-".to_owned()),
        "(/([a-z]{1,2}|[0-9]|-|~0|~1|~2)){1,4}",
    ];
    let op = (
        prop_oneof![
            Just("add"),
            Just("remove"),
            Just("replace"),
            Just("move"),
            Just("copy"),
            Just("test"),
            Just("bogus")
        ],
        path.clone(),
        path,
        arb_json(),
    )
        .prop_map(
            |(op, path, from, value)| json!({"op": op, "path": path, "from": from, "value": value}),
        );
    prop::collection::vec(op, 0..6).prop_map(Value::Array)
}

fn check(result: &Result<Value, ApiError>) -> Result<(), TestCaseError> {
    match result {
        Ok(value) => {
            prop_assert!(value.is_object());
            let back: Value = serde_json::from_str(&serde_json::to_string(value).unwrap()).unwrap();
            prop_assert_eq!(&back, value);
        }
        // Where evanphx/json-patch v4 panics, and for strategic merge errors without a status
        // of their own, kube-apiserver answers 500, and so does this.
        Err(error) if watchkeeper_api::patch::is_kube_patch_500(error) => {}
        Err(error) => {
            prop_assert!(
                matches!(error.code, 400 | 413 | 415 | 422),
                "{}",
                error.code
            );
            prop_assert!(!error.message.is_empty());
        }
    }
    Ok(())
}

/// A patched result holds only values from the original or the patch: no amplification.
fn check_size_bound(
    original: &Value,
    patch: &[u8],
    result: &Result<Value, ApiError>,
) -> Result<(), TestCaseError> {
    if let Ok(result) = result {
        let size = serde_json::to_vec(result).unwrap().len();
        let original_size = serde_json::to_vec(original).unwrap().len();
        prop_assert!(
            size <= original_size + patch.len(),
            "result {} bytes > original {} + patch {}",
            size,
            original_size,
            patch.len()
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn merge_patches_give_objects_and_are_idempotent_from_the_second(original in arb_json(), patch in arb_json()) {
        let pods = def("pods");
        let bytes = serde_json::to_vec(&patch).unwrap();
        let result = apply_patch(&pods, PatchType::Merge, &original, &bytes);
        check(&result)?;
        check_size_bound(&original, &bytes, &result)?;
        if let Ok(once) = result {
            // Idempotent from the second application on: evanphx/json-patch v4 (kube's) keeps
            // the `null` members within an array that replaces an object and drops them when
            // the same array replaces that array (`{"a": {}}` patched with `{"a": [{"b":
            // null}]}` is `[{"b": null}]`, then `[{}]`), so only the first may differ.
            let twice = apply_patch(&pods, PatchType::Merge, &once, &bytes).unwrap();
            let thrice = apply_patch(&pods, PatchType::Merge, &twice, &bytes).unwrap();
            prop_assert_eq!(thrice, twice);
        }
    }

    #[test]
    fn json_patches_give_objects_or_kubernetes_errors(original in arb_json(), patch in arb_json_patch()) {
        let bytes = serde_json::to_vec(&patch).unwrap();
        check(&apply_patch(&def("pods"), PatchType::Json, &original, &bytes))?;
    }

    #[test]
    fn strategic_patches_give_objects_or_kubernetes_errors(original in arb_json(), patch in arb_json()) {
        let bytes = serde_json::to_vec(&patch).unwrap();
        for plural in ["pods", "deployments", "nodes"] {
            let result = apply_patch(&def(plural), PatchType::StrategicMerge, &original, &bytes);
            check(&result)?;
            check_size_bound(&original, &bytes, &result)?;
        }
    }

    #[test]
    fn patch_bytes_never_panic(original in arb_json(), bytes in prop::collection::vec(any::<u8>(), 0..96)) {
        for patch_type in [PatchType::Merge, PatchType::Json, PatchType::StrategicMerge] {
            check(&apply_patch(&def("pods"), patch_type, &original, &bytes))?;
        }
    }
}

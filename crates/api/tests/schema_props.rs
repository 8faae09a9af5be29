//! Property tests of the schema check of built-in kinds (`watchkeeper_api::schema`), the same
//! property the fuzz target `validate_schema` checks (see fuzz/README.md), plus a cross-check
//! against an independent decoder:
//!
//! - Well-formed objects with one field replaced by an arbitrary JSON value are decoded both
//!   by our check and by k8s-openapi's typed serde structs. Where the typed structs accept the
//!   object, our check accepts it too (we never refuse what a typed client decodes); where
//!   they refuse it for a wrongly typed field, our check refuses it too. (The typed structs
//!   also refuse missing required fields and numeric quantities, which Go's decoder accepts;
//!   those refusals are not compared; and they keep quantities as unchecked strings, so our
//!   refusal of a malformed quantity is not compared either.)
//! - Anything prepare_create accepts decodes (no stored object can break a typed client).

use proptest::prelude::*;
use serde_json::{Value, json};
use watchkeeper_api::schema::decode_error;
use watchkeeper_api::{CreateContext, ResourceDef, builtin_resources, prepare_create};

fn def(plural: &str) -> ResourceDef {
    builtin_resources()
        .into_iter()
        .find(|d| d.plural == plural)
        .unwrap()
}

/// Valid objects of three kinds, with most kinds of field (strings, ints, bools, maps, lists of
/// structs, quantities, int-or-string, base64, times).
fn bases() -> Vec<(&'static str, Value)> {
    vec![
        (
            "pods",
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "b"},
                "finalizers": ["f"], "ownerReferences": [{"apiVersion": "v1", "kind": "K", "name": "o", "uid": "u"}]},
              "spec": {"containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80}],
                 "resources": {"limits": {"cpu": "1"}},
                 "readinessProbe": {"httpGet": {"port": 8080}, "periodSeconds": 5}}],
                 "hostNetwork": false, "terminationGracePeriodSeconds": 30},
              "status": {"phase": "Running", "startTime": "2026-11-29T00:00:00Z"}}),
        ),
        (
            "secrets",
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
                   "data": {"k": "aGVsbG8="}, "stringData": {"x": "y"}, "type": "Opaque", "immutable": true}),
        ),
        (
            "deployments",
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
              "spec": {"replicas": 2, "selector": {"matchLabels": {"a": "b"}},
                "strategy": {"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
                "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}}),
        ),
    ]
}

/// Every path to a value in `value` (object keys and array indexes).
fn paths(value: &Value, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                if key == "apiVersion" || key == "kind" {
                    continue;
                }
                prefix.push(key.clone());
                out.push(prefix.clone());
                paths(child, prefix, out);
                prefix.pop();
            }
        }
        Value::Array(items) => {
            for (index, child) in items.iter().enumerate() {
                prefix.push(index.to_string());
                out.push(prefix.clone());
                paths(child, prefix, out);
                prefix.pop();
            }
        }
        _ => {}
    }
}

fn replace(value: &mut Value, path: &[String], new: Value) {
    let mut target = value;
    for key in path {
        target = match target {
            Value::Object(map) => map.get_mut(key).unwrap(),
            Value::Array(items) => &mut items[key.parse::<usize>().unwrap()],
            _ => unreachable!(),
        };
    }
    *target = new;
}

fn arb_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i32>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        Just(json!(1.5)),
        prop_oneof![
            Just("500m".to_owned()),
            Just("aGVsbG8=".to_owned()),
            "[a-z!]{0,4}"
        ]
        .prop_map(Value::String),
    ];
    leaf.prop_recursive(2, 8, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::btree_map("[a-z]{1,2}", inner, 0..3)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn typed(plural: &str, object: &Value) -> Result<(), String> {
    use k8s_openapi::api::{apps::v1::Deployment, core::v1::Pod, core::v1::Secret};
    let result = match plural {
        "pods" => serde_json::from_value::<Pod>(object.clone()).map(drop),
        "secrets" => serde_json::from_value::<Secret>(object.clone()).map(drop),
        _ => serde_json::from_value::<Deployment>(object.clone()).map(drop),
    };
    result.map_err(|e| e.to_string())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    #[test]
    fn schema_check_agrees_with_typed_decoding(base in 0..3usize, pick in any::<prop::sample::Index>(), new in arb_value()) {
        let (plural, mut object) = bases().swap_remove(base);
        let mut all = Vec::new();
        paths(&object, &mut Vec::new(), &mut all);
        let path = pick.get(&all).clone();
        replace(&mut object, &path, new);
        let ours = decode_error(&def(plural), &object);
        match typed(plural, &object) {
            // k8s-openapi keeps quantities as unchecked strings; Go parses them.
            Ok(()) => prop_assert!(
                ours.as_deref().is_none_or(|m| m.starts_with("quantities") || m.starts_with("unable to parse")),
                "typed decoding accepts {} but we refuse: {:?}", object, ours
            ),
            Err(message) => {
                let comparable = message.starts_with("invalid type")
                    && !message.contains("Quantity")
                    && !message.contains("null");
                if comparable {
                    prop_assert!(ours.is_some(), "typed decoding refuses {} ({}) but we accept", object, message);
                }
            }
        }
    }

    #[test]
    fn accepted_objects_decode(base in 0..3usize, pick in any::<prop::sample::Index>(), new in arb_value()) {
        let (plural, mut object) = bases().swap_remove(base);
        let mut all = Vec::new();
        paths(&object, &mut Vec::new(), &mut all);
        let path = pick.get(&all).clone();
        replace(&mut object, &path, new);
        let context = CreateContext {
            namespace: Some("default"),
            uid: "u".to_owned(),
            creation_timestamp: "2026-11-29T00:00:00Z".to_owned(),
            random_suffix: "bcd2f".to_owned(),
        };
        match prepare_create(&def(plural), object, &context) {
            Ok(created) => prop_assert_eq!(decode_error(&def(plural), &created), None),
            Err(error) => prop_assert!(matches!(error.code, 400 | 413 | 422), "{}", error),
        }
    }
}

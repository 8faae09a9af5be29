//! Property tests of object validation on create and update, the same properties the fuzz
//! target `validate_object` checks (see fuzz/README.md): no body panics, errors carry
//! Kubernetes' codes, and an accepted object's name and namespace cannot address a key outside
//! its resource's prefix (no `/`, no `..`, the key is `namespace/name` or `name`).

use proptest::prelude::*;
use serde_json::{Value, json};
use watchkeeper_api::{
    ApiError, CreateContext, ResourceDef, builtin_resources, prepare_create, prepare_update,
    validate_name,
};
use watchkeeper_core::object_key;

fn ctx(namespace: Option<&str>) -> CreateContext<'_> {
    CreateContext {
        namespace,
        uid: "uid-1".to_owned(),
        creation_timestamp: "2026-11-29T00:00:00Z".to_owned(),
        random_suffix: "bcd2f".to_owned(),
    }
}

/// Names a hostile client might send: valid ones, path tricks, and arbitrary text.
fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z0-9]([a-z0-9.-]{0,10}[a-z0-9])?",
        Just("..".to_owned()),
        Just(".".to_owned()),
        Just("a/../b".to_owned()),
        Just("../../secrets/kube-system/x".to_owned()),
        "[a-z./%-]{1,12}",
        "\\PC{0,12}",
    ]
}

fn check_accepted(def: &ResourceDef, object: &Value) -> Result<(), TestCaseError> {
    let name = object["metadata"]["name"].as_str().unwrap();
    prop_assert!(validate_name(def, name).is_ok(), "{:?}", name);
    // No segment of a key can be made from it: no `/`, and not `.` or `..` (`0..0` is a name,
    // as kube's `IsValidPathSegmentName` has it for RBAC kinds and custom resources).
    prop_assert!(
        !name.is_empty() && !name.contains('/') && name != "." && name != "..",
        "{:?}",
        name
    );
    let namespace = object["metadata"]["namespace"].as_str().unwrap_or_default();
    if def.namespaced {
        prop_assert!(
            !namespace.is_empty() && !namespace.contains('/') && !namespace.contains('.'),
            "{:?}",
            namespace
        );
        let key = object_key(namespace, name);
        prop_assert_eq!(key.strip_prefix(&format!("{namespace}/")), Some(name));
    } else {
        prop_assert!(namespace.is_empty());
    }
    Ok(())
}

fn check_error(error: &ApiError) -> Result<(), TestCaseError> {
    prop_assert!(matches!(error.code, 400 | 413 | 422), "{}", error.code);
    prop_assert!(!error.message.is_empty());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn accepted_objects_stay_under_their_prefix(
        index in 0..64usize,
        name in name(),
        body_namespace in prop::option::of(name()),
        url_namespace in prop::option::of(name()),
        generate in any::<bool>(),
        new_name in prop::option::of(name()),
    ) {
        let defs = builtin_resources();
        let def = &defs[index % defs.len()];
        let mut metadata = json!({});
        metadata[if generate { "generateName" } else { "name" }] = json!(name);
        if let Some(namespace) = &body_namespace {
            metadata["namespace"] = json!(namespace);
        }
        let body = json!({"apiVersion": def.api_version(), "kind": def.kind, "metadata": metadata});
        let url_namespace = url_namespace.as_deref().filter(|_| def.namespaced);
        match prepare_create(def, body, &ctx(url_namespace)) {
            Ok(created) => {
                check_accepted(def, &created)?;
                let mut update = created.clone();
                if let Some(new_name) = &new_name {
                    update["metadata"]["name"] = json!(new_name);
                }
                match prepare_update(def, &created, update) {
                    Ok(updated) => {
                        check_accepted(def, &updated)?;
                        prop_assert_eq!(&updated["metadata"]["name"], &created["metadata"]["name"]);
                    }
                    Err(error) => check_error(&error)?,
                }
            }
            Err(error) => check_error(&error)?,
        }
    }

    #[test]
    fn arbitrary_bodies_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..128), index in 0..64usize) {
        let defs = builtin_resources();
        let def = &defs[index % defs.len()];
        if let Ok(body) = serde_json::from_slice::<Value>(&bytes) {
            match prepare_create(def, body.clone(), &ctx(Some("default"))) {
                Ok(created) => check_accepted(def, &created)?,
                Err(error) => check_error(&error)?,
            }
            let old = json!({"apiVersion": def.api_version(), "kind": def.kind, "metadata": {"name": "a", "namespace": "default", "uid": "u"}});
            if let Err(error) = prepare_update(def, &old, body) {
                check_error(&error)?;
            }
        }
    }
}

//! Writes of the built-in kinds are decoded against the kinds' published schemas, and refused
//! as kube-apiserver refuses them: 400 BadRequest `<Kind> in version "v1" cannot be handled as a
//! <Kind>: json: cannot unmarshal ...` on create and update, 422 Invalid with a `patch` cause
//! for a patch whose result does not decode. The cases are those of the issue that found
//! wrongly typed objects being stored.

use serde_json::{Value, json};
use watchkeeper_api::{
    ApiError, CreateContext, PatchType, ResourceDef, apply_patch, builtin_resources,
    prepare_create, prepare_update,
};

fn def(plural: &str) -> ResourceDef {
    builtin_resources()
        .into_iter()
        .find(|d| d.plural == plural)
        .unwrap()
}

fn ctx() -> CreateContext<'static> {
    CreateContext {
        namespace: Some("default"),
        uid: "uid-1".to_owned(),
        creation_timestamp: "2026-11-29T00:00:00Z".to_owned(),
        random_suffix: "bcd2f".to_owned(),
    }
}

fn create(plural: &str, body: Value) -> Result<Value, ApiError> {
    prepare_create(&def(plural), body, &ctx())
}

fn create_error(plural: &str, body: Value) -> ApiError {
    create(plural, body).expect_err("the body must be refused")
}

fn assert_bad_request(error: &ApiError, kind: &str, cause: &str) {
    assert_eq!(error.code, 400, "{error}");
    assert_eq!(error.reason, "BadRequest");
    assert_eq!(
        error.message,
        format!("{kind} in version \"v1\" cannot be handled as a {kind}: {cause}")
    );
}

#[test]
fn wrongly_typed_fields_are_refused_on_create() {
    let cm = |extra: Value| {
        let mut body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
        for (k, v) in extra.as_object().unwrap() {
            if k == "metadata" {
                for (mk, mv) in v.as_object().unwrap() {
                    body["metadata"][mk] = mv.clone();
                }
            } else {
                body[k] = v.clone();
            }
        }
        body
    };
    let cases = [
        (
            cm(json!({"data": {"k": 1}})),
            "json: cannot unmarshal number into Go struct field ConfigMap.data of type string",
        ),
        (
            cm(json!({"metadata": {"finalizers": [1]}})),
            "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.finalizers of type string",
        ),
        (
            cm(json!({"metadata": {"ownerReferences": "x"}})),
            "json: cannot unmarshal string into Go struct field ObjectMeta.metadata.ownerReferences of type []v1.OwnerReference",
        ),
        (
            cm(json!({"immutable": "yes"})),
            "json: cannot unmarshal string into Go struct field ConfigMap.immutable of type bool",
        ),
        (
            cm(json!({"metadata": {"labels": {"a": 1}}})),
            "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.labels of type string",
        ),
        (
            cm(json!({"binaryData": {"k": "not base64!"}})),
            "illegal base64 data at input byte 3",
        ),
    ];
    for (body, cause) in cases {
        assert_bad_request(&create_error("configmaps", body), "ConfigMap", cause);
    }

    let error = create_error(
        "secrets",
        json!({"metadata": {"name": "s"}, "data": {"k": "not base64!"}}),
    );
    assert_bad_request(&error, "Secret", "illegal base64 data at input byte 3");

    let error = create_error(
        "deployments",
        json!({"metadata": {"name": "d"}, "spec": {"replicas": "abc"}}),
    );
    assert_bad_request(
        &error,
        "Deployment",
        "json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32",
    );

    let error = create_error(
        "pods",
        json!({"metadata": {"name": "p"}, "spec": {"containers": "x"}}),
    );
    assert_bad_request(
        &error,
        "Pod",
        "json: cannot unmarshal string into Go struct field PodSpec.spec.containers of type []v1.Container",
    );

    // Inside lists the struct is the item's, and the path has no indexes (Go's field stack).
    let error = create_error(
        "pods",
        json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": 5}]}}),
    );
    assert_bad_request(
        &error,
        "Pod",
        "json: cannot unmarshal number into Go struct field Container.spec.containers.image of type string",
    );

    // Types with their own decoders answer with their own messages.
    let error = create_error(
        "pods",
        json!({"metadata": {"name": "p"}, "spec": {"containers": [
            {"name": "c", "image": "i", "resources": {"limits": {"cpu": "lots"}}}
        ]}}),
    );
    assert_bad_request(
        &error,
        "Pod",
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
    );
    let error = create_error(
        "services",
        json!({"metadata": {"name": "s"}, "spec": {"ports": [{"port": 80, "targetPort": [1]}]}}),
    );
    assert_bad_request(
        &error,
        "Service",
        "json: cannot unmarshal array into Go value of type int32",
    );
    let error = create_error(
        "deployments",
        json!({"metadata": {"name": "d"}, "spec": {"replicas": 1.5}}),
    );
    assert_bad_request(
        &error,
        "Deployment",
        "json: cannot unmarshal number 1.5 into Go struct field DeploymentSpec.spec.replicas of type int32",
    );
}

#[test]
fn well_typed_objects_and_nulls_are_accepted() {
    create(
        "configmaps",
        json!({"metadata": {"name": "c", "finalizers": null, "labels": {"a": "b"}},
               "data": {"k": "v"}, "binaryData": {"b": "aGVsbG8="}, "immutable": false}),
    )
    .unwrap();
    create(
        "pods",
        json!({"metadata": {"name": "p"}, "spec": {"containers": [{
            "name": "c", "image": "nginx:1.25",
            "ports": [{"containerPort": 80}],
            "resources": {"limits": {"cpu": "500m", "memory": 128}},
            "livenessProbe": {"httpGet": {"port": "http", "path": "/"}}
        }]}, "unknownField": {"anything": [1, "x"]}}),
    )
    .unwrap();
    create(
        "services",
        json!({"metadata": {"name": "s"}, "spec": {"ports": [{"port": 80, "targetPort": 8080}]}}),
    )
    .unwrap();
    create(
        "events",
        json!({"metadata": {"name": "e"}, "involvedObject": {"kind": "Pod"},
               "firstTimestamp": "2026-11-29T00:00:00Z", "count": 2}),
    )
    .unwrap();
}

#[test]
fn updates_are_checked_like_creates() {
    let old = create(
        "configmaps",
        json!({"metadata": {"name": "c"}, "data": {"k": "v"}}),
    )
    .unwrap();
    let mut new = old.clone();
    new["data"]["k"] = json!(7);
    let error = prepare_update(&def("configmaps"), &old, new).unwrap_err();
    assert_bad_request(
        &error,
        "ConfigMap",
        "json: cannot unmarshal number into Go struct field ConfigMap.data of type string",
    );
}

#[test]
fn patches_whose_result_does_not_decode_are_422() {
    let cm = def("configmaps");
    let old = create(
        "configmaps",
        json!({"metadata": {"name": "c"}, "data": {"k": "v"}}),
    )
    .unwrap();
    for (patch_type, patch) in [
        (PatchType::Merge, json!({"data": {"k": 7}})),
        (
            PatchType::Json,
            json!([{"op": "replace", "path": "/data/k", "value": 7}]),
        ),
        (PatchType::StrategicMerge, json!({"data": {"k": 7}})),
    ] {
        let bytes = serde_json::to_vec(&patch).unwrap();
        let error = apply_patch(&cm, patch_type, &old, &bytes).unwrap_err();
        let mut patched = old.clone();
        patched["data"]["k"] = json!(7);
        let cause = format!(
            "Invalid value: {:?}: json: cannot unmarshal number into Go struct field ConfigMap.data of type string",
            patched.to_string()
        );
        assert_eq!(error.code, 422, "{error}");
        assert_eq!(error.reason, "Invalid");
        assert_eq!(error.message, format!(" \"\" is invalid: patch: {cause}"));
        assert_eq!(
            error.details,
            Some(
                json!({"causes": [{"reason": "FieldValueInvalid", "message": cause, "field": "patch"}]})
            )
        );
    }
}

#[test]
fn custom_resources_are_not_checked_against_builtin_schemas() {
    let crd = watchkeeper_api::parse_resources_file(
        "[[resource]]\ngroup = \"example.com\"\nversion = \"v1\"\nkind = \"Widget\"\nplural = \"widgets\"\nnamespaced = true\n",
    )
    .unwrap()
    .remove(0);
    prepare_create(
        &crd,
        json!({"metadata": {"name": "w"}, "spec": {"containers": "x"}, "data": {"k": 1}}),
        &ctx(),
    )
    .unwrap();
}

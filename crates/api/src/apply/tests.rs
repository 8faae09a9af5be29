//! Cases from structured-merge-diff's merge tests (apply, update, conflicts, pruning, list
//! merging) on built-in kinds, and properties over generated ConfigMaps.

use super::*;
use crate::resources::builtin_resources;
use proptest::prelude::*;

const T1: &str = "2026-01-01T00:00:00Z";
const T2: &str = "2026-01-01T00:01:00Z";

fn def(kind: &str) -> ResourceDef {
    builtin_resources()
        .into_iter()
        .find(|d| d.kind == kind)
        .unwrap()
}

fn writer(manager: &str) -> Writer<'_> {
    Writer {
        manager,
        subresource: "",
        schema: None,
    }
}

fn cm(data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"}, "data": data})
}

/// Applies and stores the result with its managed fields, as the server does.
fn applied(
    def: &ResourceDef,
    live: Option<&Value>,
    config: &Value,
    manager: &str,
    force: bool,
) -> Result<Value, ApiError> {
    let (mut merged, managers) = apply(def, live, config, writer(manager), force, T1)?;
    set_managed_fields(&mut merged, &managers);
    Ok(merged)
}

fn updated(def: &ResourceDef, old: Option<&Value>, new: &Value, manager: &str) -> Value {
    let managers = update(def, old, new, base_managers(old, new), writer(manager), T2);
    let mut new = new.clone();
    set_managed_fields(&mut new, &managers);
    new
}

fn entry<'a>(object: &'a Value, manager: &str, operation: &str) -> Option<&'a Value> {
    object["metadata"]["managedFields"]
        .as_array()?
        .iter()
        .find(|e| e["manager"] == manager && e["operation"] == operation)
}

#[test]
fn apply_creates_and_owns_exactly_the_configuration() {
    let d = def("ConfigMap");
    let object = applied(&d, None, &cm(json!({"a": "1", "b": "2"})), "alice", false).unwrap();
    assert_eq!(object["data"], json!({"a": "1", "b": "2"}));
    let e = entry(&object, "alice", "Apply").unwrap();
    assert_eq!(e["apiVersion"], "v1");
    assert_eq!(e["fieldsType"], "FieldsV1");
    assert_eq!(e["time"], T1);
    assert_eq!(e["fieldsV1"], json!({"f:data": {"f:a": {}, "f:b": {}}}));
    assert!(e.get("subresource").is_none());
}

#[test]
fn update_entries_record_added_containers_with_dot() {
    let d = def("ConfigMap");
    let object = updated(&d, None, &cm(json!({"a": "1"})), "kubectl-create");
    let e = entry(&object, "kubectl-create", "Update").unwrap();
    assert_eq!(e["fieldsV1"], json!({"f:data": {".": {}, "f:a": {}}}));
    assert_eq!(e["time"], T2);
    // A later update that changes a value takes it; one that changes nothing keeps the time.
    let next = updated(
        &d,
        Some(&object),
        &cm(json!({"a": "1", "b": "2"})),
        "editor",
    );
    assert_eq!(
        entry(&next, "editor", "Update").unwrap()["fieldsV1"],
        json!({"f:data": {"f:b": {}}})
    );
    assert_eq!(
        entry(&next, "kubectl-create", "Update").unwrap()["fieldsV1"],
        json!({"f:data": {".": {}, "f:a": {}}})
    );
}

#[test]
fn apply_is_idempotent() {
    let d = def("Deployment");
    let config = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "web", "image": "nginx", "ports": [{"containerPort": 80}]}]}}}});
    let once = applied(&d, None, &config, "kubectl", false).unwrap();
    let twice = applied(&d, Some(&once), &config, "kubectl", false).unwrap();
    assert_eq!(once, twice);
    let fields = &entry(&once, "kubectl", "Apply").unwrap()["fieldsV1"];
    // The selector is atomic; containers merge by name, ports by containerPort and protocol.
    assert_eq!(fields["f:spec"]["f:selector"], json!({}));
    let container =
        &fields["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"web\"}"];
    assert_eq!(container["."], json!({}));
    assert_eq!(
        container["f:ports"]["k:{\"containerPort\":80,\"protocol\":\"TCP\"}"],
        json!({".": {}, "f:containerPort": {}})
    );
}

#[test]
fn applying_an_empty_configuration_removes_the_appliers_fields() {
    let d = def("ConfigMap");
    let object = applied(&d, None, &cm(json!({"a": "1", "b": "2"})), "alice", false).unwrap();
    let bare = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
    let emptied = applied(&d, Some(&object), &bare, "alice", false).unwrap();
    assert!(emptied.get("data").is_none(), "{emptied}");
    assert!(entry(&emptied, "alice", "Apply").is_none(), "{emptied}");
    // An empty map applied is owned as such, and empties the map.
    let cleared = applied(&d, Some(&object), &cm(json!({})), "alice", false).unwrap();
    assert_eq!(cleared["data"], json!({}));
    assert_eq!(
        entry(&cleared, "alice", "Apply").unwrap()["fieldsV1"],
        json!({"f:data": {}})
    );
    let fewer = applied(&d, Some(&object), &cm(json!({"b": "2"})), "alice", false).unwrap();
    assert_eq!(fewer["data"], json!({"b": "2"}));
}

#[test]
fn disjoint_appliers_coexist_and_removal_keeps_the_others_fields() {
    let d = def("ConfigMap");
    let one = applied(&d, None, &cm(json!({"a": "1"})), "alice", false).unwrap();
    let two = applied(&d, Some(&one), &cm(json!({"b": "2"})), "bob", false).unwrap();
    assert_eq!(two["data"], json!({"a": "1", "b": "2"}));
    assert_eq!(
        entry(&two, "bob", "Apply").unwrap()["fieldsV1"],
        json!({"f:data": {"f:b": {}}})
    );
    // Alice stops applying a: it goes; Bob's b stays.
    let three = applied(&d, Some(&two), &cm(json!({})), "alice", false).unwrap();
    assert_eq!(three["data"], json!({"b": "2"}));
}

#[test]
fn shared_fields_stay_while_another_applier_owns_them() {
    let d = def("ConfigMap");
    let one = applied(&d, None, &cm(json!({"a": "1"})), "alice", false).unwrap();
    // Same value: no conflict, both own it.
    let two = applied(&d, Some(&one), &cm(json!({"a": "1"})), "bob", false).unwrap();
    let three = applied(&d, Some(&two), &cm(json!({})), "alice", false).unwrap();
    assert_eq!(three["data"], json!({"a": "1"}));
}

#[test]
fn conflicting_apply_is_409_in_kube_apiserver_words_and_force_takes_over() {
    let d = def("ConfigMap");
    let one = applied(&d, None, &cm(json!({"a": "1", "b": "1"})), "alice", false).unwrap();
    let error = applied(&d, Some(&one), &cm(json!({"a": "2"})), "bob", false).unwrap_err();
    assert_eq!((error.code, error.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        error.message,
        r#"Apply failed with 1 conflict: conflict with "alice": .data.a"#
    );
    let details = error.details.clone().unwrap();
    assert_eq!(
        details["causes"],
        json!([{"reason": "FieldManagerConflict", "message": "conflict with \"alice\"", "field": ".data.a"}])
    );
    let error = applied(
        &d,
        Some(&one),
        &cm(json!({"a": "2", "b": "2"})),
        "bob",
        false,
    )
    .unwrap_err();
    assert_eq!(
        error.message,
        "Apply failed with 2 conflicts: conflicts with \"alice\":\n- .data.a\n- .data.b"
    );
    let forced = applied(&d, Some(&one), &cm(json!({"a": "2"})), "bob", true).unwrap();
    assert_eq!(forced["data"], json!({"a": "2", "b": "1"}));
    assert_eq!(
        entry(&forced, "alice", "Apply").unwrap()["fieldsV1"],
        json!({"f:data": {"f:b": {}}})
    );
    assert_eq!(
        entry(&forced, "bob", "Apply").unwrap()["fieldsV1"],
        json!({"f:data": {"f:a": {}}})
    );
}

#[test]
fn conflicts_with_updaters_name_their_api_version() {
    let d = def("ConfigMap");
    let created = updated(&d, None, &cm(json!({"a": "1"})), "kubectl-create");
    let error = applied(&d, Some(&created), &cm(json!({"a": "2"})), "kubectl", false).unwrap_err();
    assert_eq!(
        error.message,
        r#"Apply failed with 1 conflict: conflict with "kubectl-create" using v1: .data.a"#
    );
}

#[test]
fn an_update_takes_fields_from_an_applier() {
    let d = def("ConfigMap");
    let one = applied(&d, None, &cm(json!({"a": "1", "b": "1"})), "alice", false).unwrap();
    let two = updated(&d, Some(&one), &cm(json!({"a": "2", "b": "1"})), "editor");
    assert_eq!(
        entry(&two, "alice", "Apply").unwrap()["fieldsV1"],
        json!({"f:data": {"f:b": {}}})
    );
    // Alice applies a again: a conflict with the editor now.
    let error = applied(
        &d,
        Some(&two),
        &cm(json!({"a": "1", "b": "1"})),
        "alice",
        false,
    )
    .unwrap_err();
    assert!(
        error
            .message
            .contains(r#"conflict with "editor" using v1: .data.a"#),
        "{}",
        error.message
    );
}

#[test]
fn associative_lists_merge_by_key_and_keep_other_items() {
    let d = def("Pod");
    let pod = |containers: Value| json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": containers}});
    let one = applied(
        &d,
        None,
        &pod(json!([{"name": "a", "image": "x"}])),
        "alice",
        false,
    )
    .unwrap();
    let two = applied(
        &d,
        Some(&one),
        &pod(json!([{"name": "b", "image": "y"}])),
        "bob",
        false,
    )
    .unwrap();
    let names: Vec<&str> = two["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a", "b"]);
    // Alice drops her container: only Bob's remains.
    let three = applied(&d, Some(&two), &pod(json!([])), "alice", false).unwrap();
    assert_eq!(
        three["spec"]["containers"],
        json!([{"name": "b", "image": "y"}])
    );
    // Items without their key are refused.
    let error = applied(&d, None, &pod(json!([{"image": "x"}])), "alice", false).unwrap_err();
    assert_eq!(error.code, 400);
}

#[test]
fn finalizers_are_a_set() {
    let d = def("ConfigMap");
    let with = |f: Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "finalizers": f}});
    let one = applied(&d, None, &with(json!(["a/x"])), "alice", false).unwrap();
    let two = applied(&d, Some(&one), &with(json!(["b/y"])), "bob", false).unwrap();
    assert_eq!(two["metadata"]["finalizers"], json!(["a/x", "b/y"]));
    assert_eq!(
        entry(&two, "bob", "Apply").unwrap()["fieldsV1"],
        json!({"f:metadata": {"f:finalizers": {"v:\"b/y\"": {}}}})
    );
}

#[test]
fn atomic_lists_are_replaced_and_conflict_whole() {
    let d = def("Pod");
    let pod = |args: Value| json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "a", "args": args}]}});
    let one = applied(&d, None, &pod(json!(["1", "2"])), "alice", false).unwrap();
    let error = applied(&d, Some(&one), &pod(json!(["3"])), "bob", false).unwrap_err();
    assert!(
        error
            .message
            .ends_with(r#".spec.containers[name="a"].args"#),
        "{}",
        error.message
    );
    let forced = applied(&d, Some(&one), &pod(json!(["3"])), "bob", true).unwrap();
    assert_eq!(forced["spec"]["containers"][0]["args"], json!(["3"]));
}

#[test]
fn list_and_map_types_come_from_the_published_markers() {
    // Webhooks of a ValidatingWebhookConfiguration are a list-map by `name`: two appliers'
    // webhooks coexist, where an atomic list would conflict.
    let d = def("ValidatingWebhookConfiguration");
    let config = |name: &str| {
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
               "metadata": {"name": "v"}, "webhooks": [{"name": name, "sideEffects": "None"}]})
    };
    let one = applied(&d, None, &config("a.example.com"), "alice", false).unwrap();
    let two = applied(&d, Some(&one), &config("b.example.com"), "bob", false).unwrap();
    assert_eq!(two["webhooks"].as_array().unwrap().len(), 2);
    assert_eq!(
        entry(&two, "bob", "Apply").unwrap()["fieldsV1"],
        json!({"f:webhooks": {"k:{\"name\":\"b.example.com\"}": {".": {}, "f:name": {}, "f:sideEffects": {}}}})
    );
    // A RoleBinding's roleRef is an atomic struct (`x-kubernetes-map-type: atomic` on RoleRef):
    // one leaf, not its fields.
    let d = def("RoleBinding");
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "r", "namespace": "default"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "x"}});
    let object = applied(&d, None, &binding, "alice", false).unwrap();
    assert_eq!(
        entry(&object, "alice", "Apply").unwrap()["fieldsV1"],
        json!({"f:roleRef": {}})
    );
    // A pod's hostIPs are atomic in v1.33 (only podIPs merge by `ip`).
    let d = def("Pod");
    let status = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "status": {"hostIPs": [{"ip": "10.0.0.1"}], "podIPs": [{"ip": "10.1.0.1"}]}});
    let object = applied(&d, None, &status, "alice", false).unwrap();
    assert_eq!(
        entry(&object, "alice", "Apply").unwrap()["fieldsV1"],
        json!({"f:status": {"f:hostIPs": {}, "f:podIPs": {"k:{\"ip\":\"10.1.0.1\"}": {".": {}, "f:ip": {}}}}})
    );
}

/// kube-apiserver's `TestApplyCRDStructuralSchema`: a custom resource is typed by its CRD's
/// structural schema (its list markers) and its `metadata` by `ObjectMeta`.
#[test]
fn custom_resources_follow_their_schemas_markers() {
    let mut d = def("ConfigMap");
    d.group = "example.com".to_owned();
    d.kind = "Noxu".to_owned();
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object",
        "x-kubernetes-preserve-unknown-fields": true, "properties": {
            "cronSpec": {"type": "string"},
            "ports": {"type": "array", "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["containerPort", "protocol"],
                "items": {"type": "object", "required": ["containerPort", "protocol"],
                    "properties": {"containerPort": {"type": "integer"}, "name": {"type": "string"},
                        "protocol": {"type": "string"}}}},
            "rules": {"type": "array", "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["host", "path"],
                "items": {"type": "object", "properties": {"host": {"type": "string"},
                    "path": {"type": "string", "default": "/"}}}}}}}});
    fn with_schema<'a>(manager: &'a str, schema: &'a Value) -> Writer<'a> {
        Writer {
            manager,
            subresource: "",
            schema: Some(schema),
        }
    }
    let apply_as = |live: Option<&Value>, config: &Value, manager: &str, force: bool| {
        apply(&d, live, config, with_schema(manager, &schema), force, T1).map(
            |(mut merged, managers)| {
                set_managed_fields(&mut merged, &managers);
                merged
            },
        )
    };
    let config = |ports: Value| {
        json!({"apiVersion": d.api_version(), "kind": "Noxu",
            "metadata": {"name": "mytest", "finalizers": ["test-finalizer"]},
            "spec": {"cronSpec": "* * * * */5", "replicas": 1, "ports": ports}})
    };
    let one = apply_as(
        None,
        &config(json!([{"name": "x", "containerPort": 80, "protocol": "TCP"}])),
        "apply_test",
        false,
    )
    .unwrap();
    // Another writer adds a finalizer: `finalizers` is a set, so the same apply again is no
    // conflict and keeps both.
    let mut patched = one.clone();
    patched["metadata"]["finalizers"] = json!(["test-finalizer", "another-one"]);
    let managers = update(
        &d,
        Some(&one),
        &patched,
        base_managers(Some(&one), &patched),
        with_schema("patcher", &schema),
        T2,
    );
    set_managed_fields(&mut patched, &managers);
    let again = apply_as(
        Some(&patched),
        &config(json!([{"name": "x", "containerPort": 80, "protocol": "TCP"}])),
        "apply_test",
        false,
    )
    .unwrap();
    assert_eq!(
        again["metadata"]["finalizers"],
        json!(["test-finalizer", "another-one"])
    );
    // Another applier changing the same port item conflicts on that item's field only;
    // adding another port is no conflict.
    let error = apply_as(
        Some(&again),
        &json!({"apiVersion": d.api_version(), "kind": "Noxu", "metadata": {"name": "mytest"},
            "spec": {"ports": [{"name": "y", "containerPort": 80, "protocol": "TCP"}]}}),
        "apply_test_2",
        false,
    )
    .unwrap_err();
    assert_eq!(error.code, 409);
    assert_eq!(
        error.details.unwrap()["causes"].as_array().unwrap().len(),
        1,
        "{}",
        error.message
    );
    let two = apply_as(
        Some(&again),
        &json!({"apiVersion": d.api_version(), "kind": "Noxu", "metadata": {"name": "mytest"},
            "spec": {"ports": [{"name": "y", "containerPort": 8080, "protocol": "TCP"}]}}),
        "apply_test_2",
        false,
    )
    .unwrap();
    assert_eq!(two["spec"]["ports"].as_array().unwrap().len(), 2);
    // A key field the item leaves out takes the schema's `default`; without one, the item
    // is refused as structured-merge-diff refuses it.
    let rules = |rules: Value| {
        json!({"apiVersion": d.api_version(), "kind": "Noxu", "metadata": {"name": "r"},
            "spec": {"rules": rules}})
    };
    let object = apply_as(None, &rules(json!([{"host": "a"}])), "m", false).unwrap();
    assert_eq!(
        entry(&object, "m", "Apply").unwrap()["fieldsV1"]["f:spec"]["f:rules"],
        json!({"k:{\"host\":\"a\",\"path\":\"/\"}": {".": {}, "f:host": {}}})
    );
    let error = apply_as(None, &rules(json!([{"path": "/x"}])), "m", false).unwrap_err();
    assert_eq!(error.code, 400, "{}", error.message);
    assert!(
        error.message.contains(r#"omits key field "host""#),
        "{}",
        error.message
    );
    // Typed as the schema says: `spec` is a struct, `replicas` (preserved, undeclared) a
    // member of it, the ports keyed.
    assert_eq!(
        entry(&two, "apply_test_2", "Apply").unwrap()["fieldsV1"],
        json!({"f:spec": {"f:ports": {"k:{\"containerPort\":8080,\"protocol\":\"TCP\"}": {
            ".": {}, "f:containerPort": {}, "f:name": {}, "f:protocol": {}}}}})
    );
}

#[test]
fn custom_resources_are_deduced() {
    let mut d = def("ConfigMap");
    d.group = "example.com".to_owned();
    d.kind = "Widget".to_owned();
    let config = json!({"apiVersion": d.api_version(), "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 1, "tags": ["a"]}});
    let object = applied(&d, None, &config, "alice", false).unwrap();
    assert_eq!(
        entry(&object, "alice", "Apply").unwrap()["fieldsV1"],
        json!({"f:spec": {".": {}, "f:size": {}, "f:tags": {}}})
    );
}

#[test]
fn wrong_version_kind_or_managed_fields_are_400() {
    let d = def("ConfigMap");
    let mut config = cm(json!({}));
    config["apiVersion"] = json!("v2");
    let error = applied(&d, None, &config, "a", false).unwrap_err();
    assert_eq!(
        error.message,
        "Incorrect version specified in apply patch. Specified patch version: v2, expected: v1"
    );
    let mut config = cm(json!({}));
    config["metadata"]["managedFields"] = json!([]);
    assert_eq!(
        applied(&d, None, &config, "a", false).unwrap_err().code,
        400
    );
}

#[test]
fn objects_without_managers_belong_to_before_first_apply() {
    let d = def("ConfigMap");
    let legacy = cm(json!({"a": "1"}));
    let error = applied(&d, Some(&legacy), &cm(json!({"a": "2"})), "alice", false).unwrap_err();
    assert!(
        error.message.contains(r#""before-first-apply" using v1"#),
        "{}",
        error.message
    );
    let same = applied(&d, Some(&legacy), &cm(json!({"b": "2"})), "alice", false).unwrap();
    assert_eq!(same["data"], json!({"a": "1", "b": "2"}));
}

#[test]
fn default_managers_come_from_the_user_agent() {
    assert_eq!(
        default_manager("kubectl/v1.33.0 (linux/amd64) kubernetes/abc"),
        "kubectl"
    );
    assert_eq!(default_manager("python-requests"), "python-requests");
    assert_eq!(default_manager(&"x".repeat(300)).len(), 128);
}

fn data_strategy() -> impl Strategy<Value = BTreeMap<String, String>> {
    proptest::collection::btree_map("[a-e]", "[0-3]", 0..5)
}

fn data_value(data: &BTreeMap<String, String>) -> Value {
    Value::Object(data.iter().map(|(k, v)| (k.clone(), json!(v))).collect())
}

proptest! {
    /// Applying the same configuration twice changes nothing the second time.
    #[test]
    fn apply_twice_is_apply_once(first in data_strategy(), second in data_strategy()) {
        let d = def("ConfigMap");
        let one = applied(&d, None, &cm(data_value(&first)), "alice", false).unwrap();
        let two = applied(&d, Some(&one), &cm(data_value(&second)), "alice", false).unwrap();
        let three = applied(&d, Some(&two), &cm(data_value(&second)), "alice", false).unwrap();
        prop_assert_eq!(&two, &three);
        // A sole applier's object is exactly its configuration.
        prop_assert_eq!(&two["data"], &data_value(&second));
    }

    /// Two appliers of disjoint keys never conflict, each owns exactly its keys, and the
    /// object holds both.
    #[test]
    fn disjoint_appliers_never_conflict(alice in data_strategy(), bob in data_strategy()) {
        let bob: BTreeMap<String, String> = bob.into_iter().filter(|(k, _)| !alice.contains_key(k)).collect();
        let d = def("ConfigMap");
        let one = applied(&d, None, &cm(data_value(&alice)), "alice", false).unwrap();
        let two = applied(&d, Some(&one), &cm(data_value(&bob)), "bob", false).unwrap();
        let mut both = alice.clone();
        both.extend(bob.clone());
        prop_assert_eq!(&two["data"], &data_value(&both));
        let managers = managers_of(&two);
        for (id, entry) in &managers {
            let keys = if id.manager == "alice" { &alice } else { &bob };
            let data = PathElement::Field("data".into());
            let expected: Vec<Vec<PathElement>> = if keys.is_empty() {
                vec![vec![data]]
            } else {
                keys.keys().map(|k| vec![data.clone(), PathElement::Field(k.clone())]).collect()
            };
            prop_assert_eq!(entry.set.paths(), expected);
        }
    }

    /// A conflicting apply without force fails; with force the applier owns what it applied
    /// and the other keeps only the rest.
    #[test]
    fn conflicts_are_exactly_the_changed_shared_keys(alice in data_strategy(), bob in data_strategy()) {
        let d = def("ConfigMap");
        let one = applied(&d, None, &cm(data_value(&alice)), "alice", false).unwrap();
        let changed: Vec<&String> = bob.iter().filter(|(k, v)| alice.get(*k).is_some_and(|a| a != *v)).map(|(k, _)| k).collect();
        match applied(&d, Some(&one), &cm(data_value(&bob)), "bob", false) {
            Ok(_) => prop_assert!(changed.is_empty()),
            Err(error) => {
                prop_assert_eq!(error.code, 409);
                let causes = error.details.unwrap()["causes"].as_array().unwrap().len();
                prop_assert_eq!(causes, changed.len());
            }
        }
        let forced = applied(&d, Some(&one), &cm(data_value(&bob)), "bob", true).unwrap();
        for (k, v) in &bob {
            prop_assert_eq!(&forced["data"][k], &json!(v));
        }
    }
}

/// The comparison of an update, made without copying the objects, is the comparison of the
/// objects with `metadata.managedFields` removed (including metadata that holds nothing else,
/// is missing or is null on one side).
#[test]
fn comparing_without_managed_fields_equals_comparing_stripped_copies() {
    let mf = json!([{"manager": "m", "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:a": {}}}}]);
    let mut with_mf = cm(json!({"a": "1"}));
    with_mf["metadata"]["managedFields"] = mf.clone();
    let mut other_mf = cm(json!({"a": "2", "b": "3"}));
    other_mf["metadata"]["managedFields"] = json!([]);
    let cases = [
        (cm(json!({"a": "1"})), cm(json!({"a": "1"}))),
        (with_mf.clone(), cm(json!({"a": "1"}))),
        (with_mf.clone(), other_mf.clone()),
        (other_mf.clone(), with_mf.clone()),
        (json!({}), with_mf.clone()),
        (
            json!({"metadata": {"managedFields": mf.clone()}}),
            json!({"metadata": {}}),
        ),
        (
            json!({"metadata": {"managedFields": mf.clone()}}),
            json!({"metadata": null}),
        ),
        (
            json!({"metadata": {"managedFields": mf.clone()}}),
            json!({}),
        ),
        (
            json!({"metadata": {"managedFields": mf.clone(), "labels": {"x": "y"}}}),
            json!({"metadata": {"labels": {"x": "z"}, "managedFields": []}}),
        ),
    ];
    let def = def("ConfigMap");
    let ty = schema_root(&def, None);
    for (old, new) in cases {
        let stripped = typed::compare(
            &without_managed_fields(&old),
            &without_managed_fields(&new),
            ty,
        )
        .unwrap();
        let skipped = typed::compare_without_managed_fields(&old, &new, ty).unwrap();
        assert_eq!(skipped, stripped, "{old} -> {new}");
    }
}

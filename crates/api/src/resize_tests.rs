use super::*;
use serde_json::json;

fn pods() -> ResourceDef {
    crate::builtin_resources()
        .into_iter()
        .find(|d| d.plural == "pods")
        .unwrap()
}

fn pod(resources: Value) -> Value {
    json!({"metadata": {"name": "p", "resourceVersion": "5", "generation": 1,
                        "labels": {"a": "b"}},
           "spec": {"containers": [{"name": "c", "image": "busybox", "resources": resources}],
                    "restartPolicy": "Always"},
           "status": {"phase": "Running", "qosClass": "Burstable"}})
}

fn burstable() -> Value {
    json!({"requests": {"cpu": "100m", "memory": "64Mi"},
           "limits": {"cpu": "1", "memory": "128Mi"}})
}

fn causes(error: &ApiError) -> Vec<String> {
    error.cause_lines()
}

#[test]
fn only_resources_and_resize_policy_are_taken() {
    let old = pod(burstable());
    let mut new = pod(json!({"requests": {"cpu": "200m", "memory": "64Mi"},
                             "limits": {"cpu": "1", "memory": "128Mi"}}));
    new["metadata"]["labels"] = json!({"changed": "yes"});
    new["metadata"]["resourceVersion"] = json!("6");
    new["spec"]["containers"][0]["image"] = json!("nginx");
    new["spec"]["activeDeadlineSeconds"] = json!(5);
    new["status"] = json!({"phase": "Failed"});
    let updated = update(&pods(), &old, &new).unwrap();
    let mut expected = old.clone();
    expected["metadata"]["resourceVersion"] = json!("6");
    expected["metadata"]["generation"] = json!(2);
    expected["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!("200m");
    assert_eq!(updated, expected);
    // Nothing of the resources changed: the generation stays.
    let same = update(&pods(), &old, &old).unwrap();
    assert_eq!(same["metadata"]["generation"], 1);
}

#[test]
fn containers_keep_their_number_and_order() {
    let old = pod(burstable());
    let mut added = old.clone();
    added["spec"]["containers"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "d", "image": "x"}));
    let error = update(&pods(), &old, &added).unwrap_err();
    assert_eq!(
        error.message,
        "Pod \"p\" is invalid: spec.containers: Forbidden: containers may not be added or removed on resize"
    );
    let mut renamed = old.clone();
    renamed["spec"]["containers"][0]["name"] = json!("x");
    let error = update(&pods(), &old, &renamed).unwrap_err();
    assert_eq!(
        causes(&error),
        [
            "spec.containers[0].name: Forbidden: containers may not be renamed or reordered on resize"
        ]
    );
}

#[test]
fn qos_class_may_not_change() {
    let guaranteed = json!({"requests": {"cpu": "1", "memory": "1Gi"},
                            "limits": {"cpu": "1", "memory": "1Gi"}});
    let mut old = pod(guaranteed);
    old["status"]["qosClass"] = json!("Guaranteed");
    let new = pod(json!({"requests": {"cpu": "500m", "memory": "1Gi"},
                         "limits": {"cpu": "1", "memory": "1Gi"}}));
    let error = update(&pods(), &old, &new).unwrap_err();
    assert_eq!(
        error.message,
        "Pod \"p\" is invalid: spec: Invalid value: \"Guaranteed\": Pod QOS Class may not change as a result of resizing"
    );
    // The same by value is no change of class.
    let same = pod(json!({"requests": {"cpu": "1000m", "memory": "1024Mi"},
                          "limits": {"cpu": "1", "memory": "1Gi"}}));
    assert!(update(&pods(), &old, &same).is_ok());
}

#[test]
fn removals_and_memory_limits() {
    let old = pod(burstable());
    let error = update(
        &pods(),
        &old,
        &pod(json!({"requests": {"cpu": "100m"}, "limits": {"cpu": "1", "memory": "64Mi"}})),
    )
    .unwrap_err();
    assert_eq!(
        causes(&error),
        [
            "spec.containers[0].resources.requests: Forbidden: resource requests cannot be removed",
            "spec.containers[0].resources.limits[memory]: Forbidden: memory limits cannot be decreased unless resizePolicy is RestartContainer",
        ]
    );
    let mut restart = pod(json!({"requests": {"cpu": "100m", "memory": "64Mi"},
                                 "limits": {"cpu": "1", "memory": "64Mi"}}));
    restart["spec"]["containers"][0]["resizePolicy"] =
        json!([{"resourceName": "memory", "restartPolicy": "RestartContainer"}]);
    let mut old_restart = old.clone();
    old_restart["spec"]["containers"][0]["resizePolicy"] =
        restart["spec"]["containers"][0]["resizePolicy"].clone();
    assert!(update(&pods(), &old_restart, &restart).is_ok());
}

#[test]
fn only_cpu_and_memory_change() {
    let old = pod(burstable());
    let mut storage = burstable();
    storage["limits"]["ephemeral-storage"] = json!("1Gi");
    let error = update(&pods(), &old, &pod(storage)).unwrap_err();
    assert_eq!(
        error.message,
        "Pod \"p\" is invalid: spec: Forbidden: only cpu and memory resources are mutable"
    );
    let mut policy = pod(burstable());
    policy["spec"]["containers"][0]["resizePolicy"] =
        json!([{"resourceName": "cpu", "restartPolicy": "RestartContainer"}]);
    let error = update(&pods(), &old, &policy).unwrap_err();
    assert_eq!(
        causes(&error),
        ["spec: Forbidden: only cpu and memory resources are mutable"]
    );
}

#[test]
fn init_containers() {
    let mut old = pod(burstable());
    old["spec"]["initContainers"] = json!([
        {"name": "init", "image": "x", "resources": {"requests": {"cpu": "100m"}}},
        {"name": "side", "image": "x", "restartPolicy": "Always",
         "resources": {"requests": {"cpu": "100m"}}}]);
    let mut sidecar = old.clone();
    sidecar["spec"]["initContainers"][1]["resources"]["requests"]["cpu"] = json!("300m");
    let updated = update(&pods(), &old, &sidecar).unwrap();
    assert_eq!(
        updated["spec"]["initContainers"][1]["resources"]["requests"]["cpu"],
        "300m"
    );
    let mut init = old.clone();
    init["spec"]["initContainers"][0]["resources"]["requests"]["cpu"] = json!("300m");
    let error = update(&pods(), &old, &init).unwrap_err();
    assert_eq!(
        causes(&error),
        ["spec: Forbidden: resources for non-sidecar init containers are immutable"]
    );
}

#[test]
fn pods_refused_whole() {
    let mut old = pod(burstable());
    old["metadata"]["annotations"] = json!({"kubernetes.io/config.mirror": "x"});
    let error = update(&pods(), &old, &old).unwrap_err();
    assert_eq!(
        error.message,
        "Pod \"p\" is invalid: : Forbidden: static pods cannot be resized"
    );
    assert_eq!(
        error.details.unwrap()["causes"],
        json!([{"reason": "FieldValueForbidden",
                "message": "Forbidden: static pods cannot be resized"}])
    );
    let mut windows = pod(burstable());
    windows["spec"]["os"] = json!({"name": "windows"});
    let error = update(&pods(), &windows, &windows).unwrap_err();
    assert_eq!(
        error.message,
        "Pod \"p\" is invalid: : Forbidden: windows pods cannot be resized"
    );
}

#[test]
fn running_on_a_node_without_resize() {
    let mut old = pod(burstable());
    old["status"]["containerStatuses"] =
        json!([{"name": "c", "state": {"running": {"startedAt": "2025-01-01T00:00:00Z"}}}]);
    let error = update(&pods(), &old, &old).unwrap_err();
    assert_eq!(
        causes(&error),
        ["spec: Forbidden: Pod running on node without support for resize"]
    );
    old["status"]["containerStatuses"][0]["resources"] = burstable();
    assert!(update(&pods(), &old, &old).is_ok());
}

//! Defaults and create-time status of the built-in kinds, as kube-apiserver's defaulting
//! functions and create strategies set them (`watchkeeper_api::defaults`).

use proptest::prelude::*;
use serde_json::{Value, json};
use watchkeeper_api::defaults::{apply_defaults, pod_qos_class};
use watchkeeper_api::{CreateContext, ResourceDef, builtin_resources, prepare_create};

fn def(plural: &str) -> ResourceDef {
    builtin_resources()
        .into_iter()
        .find(|d| d.plural == plural)
        .unwrap()
}

fn create(plural: &str, body: Value) -> Value {
    let ctx = CreateContext {
        namespace: Some("default"),
        uid: "u".to_owned(),
        creation_timestamp: "2026-11-29T00:00:00Z".to_owned(),
        random_suffix: "bcd2f".to_owned(),
    };
    prepare_create(&def(plural), body, &ctx).unwrap()
}

#[test]
fn pod_defaults_and_status() {
    let pod = create(
        "pods",
        json!({"metadata": {"name": "p"}, "spec": {
            "containers": [
                {"name": "a", "image": "nginx", "ports": [{"containerPort": 80}]},
                {"name": "b", "image": "nginx:1.25", "imagePullPolicy": "Never"},
                {"name": "c", "image": "repo:5000/app:v2"}
            ],
            "volumes": [{"name": "s", "secret": {"secretName": "x"}}]
        }}),
    );
    let spec = &pod["spec"];
    assert_eq!(spec["restartPolicy"], "Always");
    assert_eq!(spec["dnsPolicy"], "ClusterFirst");
    assert_eq!(spec["terminationGracePeriodSeconds"], 30);
    assert_eq!(spec["schedulerName"], "default-scheduler");
    assert_eq!(spec["securityContext"], json!({}));
    assert_eq!(spec["enableServiceLinks"], true);
    let containers = spec["containers"].as_array().unwrap();
    assert_eq!(containers[0]["imagePullPolicy"], "Always");
    assert_eq!(containers[1]["imagePullPolicy"], "Never");
    assert_eq!(containers[2]["imagePullPolicy"], "IfNotPresent");
    assert_eq!(
        containers[0]["terminationMessagePath"],
        "/dev/termination-log"
    );
    assert_eq!(containers[0]["terminationMessagePolicy"], "File");
    assert_eq!(containers[0]["resources"], json!({}));
    assert_eq!(containers[0]["ports"][0]["protocol"], "TCP");
    assert_eq!(spec["volumes"][0]["secret"]["defaultMode"], 420);
    assert_eq!(
        pod["status"],
        json!({"phase": "Pending", "qosClass": "BestEffort"})
    );
    assert_eq!(pod["metadata"]["generation"], 1);

    // A status the client sent is kept (there is no kubelet to set it later).
    let running = create(
        "pods",
        json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a", "image": "i"}]},
               "status": {"phase": "Running"}}),
    );
    assert_eq!(running["status"]["phase"], "Running");
    assert_eq!(running["status"]["qosClass"], "BestEffort");
}

#[test]
fn qos_classes() {
    let guaranteed = create(
        "pods",
        json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a", "image": "i",
            "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}}),
    );
    // Requests are defaulted from limits, which makes the pod Guaranteed.
    assert_eq!(
        guaranteed["spec"]["containers"][0]["resources"]["requests"],
        json!({"cpu": "1", "memory": "1Gi"})
    );
    assert_eq!(guaranteed["status"]["qosClass"], "Guaranteed");
    let burstable = json!({"containers": [{"resources": {"requests": {"cpu": "1"}}}]});
    assert_eq!(pod_qos_class(&burstable), "Burstable");
    let mixed = json!({"containers": [
        {"resources": {"limits": {"cpu": "1", "memory": "1"}, "requests": {"cpu": "1", "memory": "1"}}},
        {}
    ]});
    assert_eq!(pod_qos_class(&mixed), "Burstable");
}

#[test]
fn service_defaults_and_status() {
    let service = create(
        "services",
        json!({"metadata": {"name": "s"}, "spec": {"selector": {"a": "b"}, "ports": [{"port": 80}]}}),
    );
    let spec = &service["spec"];
    assert_eq!(spec["type"], "ClusterIP");
    assert_eq!(spec["sessionAffinity"], "None");
    assert_eq!(spec["ports"][0]["protocol"], "TCP");
    assert_eq!(spec["ports"][0]["targetPort"], 80);
    // The address fields are the registry's, not defaults.
    for registry in ["clusterIP", "clusterIPs", "ipFamilyPolicy", "ipFamilies"] {
        assert!(spec.get(registry).is_none(), "{registry}");
    }
    assert_eq!(spec["internalTrafficPolicy"], "Cluster");
    assert!(spec.get("externalTrafficPolicy").is_none());
    assert_eq!(service["status"], json!({"loadBalancer": {}}));
    assert!(service["metadata"].get("generation").is_none());

    let mut lb = json!({"metadata": {"name": "s"}, "spec": {"type": "LoadBalancer", "sessionAffinity": "ClientIP",
                        "ports": [{"port": 80, "targetPort": "http"}]}});
    apply_defaults(&def("services"), &mut lb);
    assert_eq!(lb["spec"]["externalTrafficPolicy"], "Cluster");
    assert_eq!(lb["spec"]["allocateLoadBalancerNodePorts"], true);
    assert_eq!(lb["spec"]["ports"][0]["targetPort"], "http");
    assert_eq!(
        lb["spec"]["sessionAffinityConfig"]["clientIP"]["timeoutSeconds"],
        10800
    );

    let mut external = json!({"spec": {"type": "ExternalName", "externalName": "example.com"}});
    apply_defaults(&def("services"), &mut external);
    assert_eq!(
        external,
        json!({"spec": {"type": "ExternalName", "externalName": "example.com", "sessionAffinity": "None"}})
    );
}

#[test]
fn workload_defaults() {
    let template = json!({"metadata": {"labels": {"a": "b"}},
                          "spec": {"containers": [{"name": "c", "image": "i:1"}]}});
    let deployment = create(
        "deployments",
        json!({"metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": template}}),
    );
    let spec = &deployment["spec"];
    assert_eq!(spec["replicas"], 1);
    assert_eq!(
        spec["strategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
    );
    assert_eq!(spec["revisionHistoryLimit"], 10);
    assert_eq!(spec["progressDeadlineSeconds"], 600);
    assert_eq!(spec["template"]["spec"]["restartPolicy"], "Always");
    assert_eq!(
        spec["template"]["spec"]["containers"][0]["imagePullPolicy"],
        "IfNotPresent"
    );
    assert!(deployment.get("status").is_none());

    // A Recreate strategy gets no rollingUpdate.
    let recreate = create(
        "deployments",
        json!({"metadata": {"name": "d"}, "spec": {"strategy": {"type": "Recreate"}, "template": template}}),
    );
    assert_eq!(recreate["spec"]["strategy"], json!({"type": "Recreate"}));

    let sts = create(
        "statefulsets",
        json!({"metadata": {"name": "s"}, "spec": {"template": template}}),
    );
    assert_eq!(sts["spec"]["podManagementPolicy"], "OrderedReady");
    assert_eq!(
        sts["spec"]["updateStrategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}})
    );
    assert_eq!(
        sts["spec"]["persistentVolumeClaimRetentionPolicy"],
        json!({"whenDeleted": "Retain", "whenScaled": "Retain"})
    );
    let ds = create(
        "daemonsets",
        json!({"metadata": {"name": "s"}, "spec": {"template": template}}),
    );
    assert_eq!(
        ds["spec"]["updateStrategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}})
    );
    let rs = create(
        "replicasets",
        json!({"metadata": {"name": "s"}, "spec": {"template": template}}),
    );
    assert_eq!(rs["spec"]["replicas"], 1);
    assert_eq!(rs["spec"]["template"]["spec"]["dnsPolicy"], "ClusterFirst");
}

#[test]
fn other_kinds_and_custom_resources() {
    let secret = create("secrets", json!({"metadata": {"name": "s"}}));
    assert_eq!(secret["type"], "Opaque");
    assert!(secret["metadata"].get("generation").is_none());
    let cm = create("configmaps", json!({"metadata": {"name": "c"}, "data": {}}));
    assert!(cm["metadata"].get("generation").is_none());
    assert!(cm.get("status").is_none());
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i32>().prop_map(Value::from),
        "[a-z:/@]{0,6}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    Just("spec".to_owned()),
                    Just("template".to_owned()),
                    Just("containers".to_owned()),
                    Just("strategy".to_owned()),
                    Just("type".to_owned()),
                    Just("ports".to_owned()),
                    Just("image".to_owned()),
                    Just("resources".to_owned()),
                    Just("limits".to_owned()),
                    "[a-z]{1,2}",
                ],
                inner,
                0..4
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Whether every non-null value of `original` is in `defaulted` unchanged (but an empty
/// string or list, which a Go defaulter testing its zero value replaces).
fn keeps(original: &Value, defaulted: &Value) -> bool {
    let zero = |v: &Value| v.as_str() == Some("") || v.as_array().is_some_and(Vec::is_empty);
    match (original, defaulted) {
        (Value::Object(a), Value::Object(b)) => a
            .iter()
            .all(|(k, v)| v.is_null() || b.get(k).is_some_and(|w| keeps(v, w) || zero(v))),
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(v, w)| keeps(v, w))
        }
        _ => original == defaulted,
    }
}

/// `object` without what kube 1.33's `dropDisabledPodFields` removes from the pod spec of
/// `def` (a Pod's own, or its template's): `resourceClaims`, the pod-level `resources`, and
/// each container's `resources.claims`.
fn without_gated_pod_fields(def: &watchkeeper_api::ResourceDef, object: &mut Value) {
    let spec = if def.group.is_empty() && def.plural == "pods" {
        Some("/spec".to_owned())
    } else {
        watchkeeper_api::pod_security::template_path(&def.group, &def.plural)
            .map(|path| format!("/{}/spec", path.replace('.', "/")))
    };
    let Some(Value::Object(spec)) = spec.and_then(|path| object.pointer_mut(&path)) else {
        return;
    };
    spec.remove("resourceClaims");
    spec.remove("resources");
    for list in ["containers", "initContainers", "ephemeralContainers"] {
        if let Some(Value::Array(containers)) = spec.get_mut(list) {
            for container in containers {
                if let Some(Value::Object(resources)) = container.get_mut("resources") {
                    resources.remove("claims");
                }
            }
        }
    }
}

/// The case the property found: a Pod's pod-level `resources` (even a wrong type) is dropped,
/// as kube 1.33 drops it with `PodLevelResources` off, and nothing the client sent is changed.
#[test]
fn pod_level_resources_are_the_one_field_defaulting_drops() {
    let defs = builtin_resources();
    let pods = defs
        .iter()
        .find(|d| d.group.is_empty() && d.plural == "pods")
        .unwrap();
    let object = json!({"spec": {"resources": false, "hostname": "h"}});
    let mut defaulted = object.clone();
    apply_defaults(pods, &mut defaulted);
    assert!(defaulted["spec"].get("resources").is_none(), "{defaulted}");
    assert_eq!(defaulted["spec"]["hostname"], "h");
    let mut expected = object.clone();
    without_gated_pod_fields(pods, &mut expected);
    assert!(keeps(&expected, &defaulted));
    assert!(!keeps(&object, &defaulted));
}

/// The documentation's image volume examples (`pods/image-volumes.yaml`, with and without a
/// `subPath`): `ImageVolume` is off by default in kube 1.33, whose `dropImageVolumes` removes
/// each `image` volume and every container's mount of it, in Pods and templates alike; other
/// volumes and mounts are kept.
#[test]
fn image_volumes_and_their_mounts_are_dropped() {
    let pod = create(
        "pods",
        json!({"metadata": {"name": "image-volume"}, "spec": {
            "containers": [{"name": "shell", "image": "debian", "volumeMounts": [
                {"name": "volume", "mountPath": "/volume", "subPath": "dir"},
                {"name": "scratch", "mountPath": "/scratch"}
            ]}],
            "initContainers": [{"name": "init", "image": "debian",
                "volumeMounts": [{"name": "volume", "mountPath": "/volume"}]}],
            "volumes": [
                {"name": "volume", "image": {"reference": "quay.io/crio/artifact:v2",
                    "pullPolicy": "IfNotPresent"}},
                {"name": "scratch", "emptyDir": {}}
            ]
        }}),
    );
    let spec = &pod["spec"];
    assert_eq!(
        spec["volumes"],
        json!([{"name": "scratch", "emptyDir": {}}])
    );
    assert_eq!(
        spec["containers"][0]["volumeMounts"],
        json!([{"name": "scratch", "mountPath": "/scratch"}])
    );
    assert_eq!(spec["initContainers"][0]["volumeMounts"], json!([]));

    let deployment = create(
        "deployments",
        json!({"metadata": {"name": "d"}, "spec": {
            "selector": {"matchLabels": {"app": "a"}},
            "template": {"metadata": {"labels": {"app": "a"}}, "spec": {
                "containers": [{"name": "c", "image": "debian",
                    "volumeMounts": [{"name": "volume", "mountPath": "/volume"}]}],
                "volumes": [{"name": "volume", "image": {"reference": "r"}}]
            }}
        }}),
    );
    let template = &deployment["spec"]["template"]["spec"];
    assert_eq!(template["volumes"], json!([]));
    assert_eq!(template["containers"][0]["volumeMounts"], json!([]));
}

/// `pods/storage/projected-clustertrustbundle.yaml`: `ClusterTrustBundleProjection` is off by
/// default in kube 1.33, whose `dropDisabledClusterTrustBundleProjection` clears each projected
/// source's `clusterTrustBundle` (the source stays, empty); the other sources are kept.
#[test]
fn cluster_trust_bundle_projections_are_dropped() {
    let pod = create(
        "pods",
        json!({"metadata": {"name": "sa-ctb-name-test"}, "spec": {
            "containers": [{"name": "c", "image": "busybox",
                "volumeMounts": [{"name": "token-vol", "mountPath": "/root-certificates"}]}],
            "volumes": [{"name": "token-vol", "projected": {"sources": [
                {"clusterTrustBundle": {"name": "example", "path": "example-roots.pem"}},
                {"serviceAccountToken": {"path": "token"}}
            ]}}]
        }}),
    );
    let sources = &pod["spec"]["volumes"][0]["projected"]["sources"];
    assert_eq!(sources[0], json!({}));
    assert_eq!(sources[1]["serviceAccountToken"]["path"], "token");
    assert_eq!(
        pod["spec"]["containers"][0]["volumeMounts"][0]["name"],
        "token-vol"
    );
}

/// `policy/gold-vac-pvc.yaml`: `VolumeAttributesClass` is off by default in kube 1.33, which
/// drops `spec.volumeAttributesClassName` from claims and volumes.
#[test]
fn volume_attributes_class_names_are_dropped() {
    let claim = create(
        "persistentvolumeclaims",
        json!({"metadata": {"name": "gold-vac-pvc"}, "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "2Gi"}},
            "volumeAttributesClassName": "gold"
        }}),
    );
    assert!(
        claim["spec"].get("volumeAttributesClassName").is_none(),
        "{claim}"
    );
    assert_eq!(claim["spec"]["volumeMode"], "Filesystem");
    let volume = create(
        "persistentvolumes",
        json!({"metadata": {"name": "pv"}, "spec": {
            "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"},
            "hostPath": {"path": "/mnt"}, "volumeAttributesClassName": "gold"
        }}),
    );
    assert!(
        volume["spec"].get("volumeAttributesClassName").is_none(),
        "{volume}"
    );
    assert_eq!(volume["spec"]["persistentVolumeReclaimPolicy"], "Retain");
}

#[test]
fn batch_defaults() {
    let job = create(
        "jobs",
        json!({"metadata": {"name": "j"}, "spec": {"template": {"spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "a", "image": "busybox:1.36"}]
        }}}}),
    );
    let spec = &job["spec"];
    assert_eq!(spec["completions"], 1);
    assert_eq!(spec["parallelism"], 1);
    assert_eq!(spec["backoffLimit"], 6);
    assert_eq!(spec["completionMode"], "NonIndexed");
    assert_eq!(spec["suspend"], false);
    assert_eq!(spec["podReplacementPolicy"], "TerminatingOrFailed");
    let pod = &spec["template"]["spec"];
    assert_eq!(pod["restartPolicy"], "Never");
    assert_eq!(pod["dnsPolicy"], "ClusterFirst");
    assert_eq!(pod["containers"][0]["imagePullPolicy"], "IfNotPresent");
    assert_eq!(job["metadata"]["generation"], 1);

    // Only parallelism set: completions stays unset (a work queue); a failure policy
    // makes the replacement policy `Failed`.
    let queue = create(
        "jobs",
        json!({"metadata": {"name": "q"}, "spec": {"parallelism": 3,
            "podFailurePolicy": {"rules": []},
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "a", "image": "x"}]}}}}),
    );
    assert!(queue["spec"].get("completions").is_none());
    assert_eq!(queue["spec"]["parallelism"], 3);
    assert_eq!(queue["spec"]["podReplacementPolicy"], "Failed");

    let cron = create(
        "cronjobs",
        json!({"metadata": {"name": "c"}, "spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": {"spec": {
            "restartPolicy": "OnFailure", "containers": [{"name": "a", "image": "x"}]
        }}}}}}),
    );
    let spec = &cron["spec"];
    assert_eq!(spec["concurrencyPolicy"], "Allow");
    assert_eq!(spec["suspend"], false);
    assert_eq!(spec["successfulJobsHistoryLimit"], 3);
    assert_eq!(spec["failedJobsHistoryLimit"], 1);
    let pod = &spec["jobTemplate"]["spec"]["template"]["spec"];
    assert_eq!(pod["terminationGracePeriodSeconds"], 30);
    assert_eq!(pod["containers"][0]["terminationMessagePolicy"], "File");
}

#[test]
fn networking_storage_and_scaling_defaults() {
    let ingress_only = create(
        "networkpolicies",
        json!({"metadata": {"name": "n"}, "spec": {"podSelector": {}, "ingress": [{"ports": [{"port": 80}]}]}}),
    );
    assert_eq!(ingress_only["spec"]["policyTypes"], json!(["Ingress"]));
    assert_eq!(
        ingress_only["spec"]["ingress"][0]["ports"][0]["protocol"],
        "TCP"
    );
    let both = create(
        "networkpolicies",
        json!({"metadata": {"name": "e"}, "spec": {"podSelector": {}, "egress": [{}]}}),
    );
    assert_eq!(both["spec"]["policyTypes"], json!(["Ingress", "Egress"]));
    let explicit = create(
        "networkpolicies",
        json!({"metadata": {"name": "x"}, "spec": {"podSelector": {}, "policyTypes": ["Egress"]}}),
    );
    assert_eq!(explicit["spec"]["policyTypes"], json!(["Egress"]));

    let hpa = create(
        "horizontalpodautoscalers",
        json!({"metadata": {"name": "h"}, "spec": {"maxReplicas": 5,
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"}}}),
    );
    assert_eq!(hpa["apiVersion"], "autoscaling/v2");
    assert_eq!(hpa["spec"]["minReplicas"], 1);
    assert_eq!(
        hpa["spec"]["metrics"],
        json!([{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}])
    );

    let pvc = create(
        "persistentvolumeclaims",
        json!({"metadata": {"name": "c"}, "spec": {"accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}}}}),
    );
    assert_eq!(pvc["spec"]["volumeMode"], "Filesystem");
    assert_eq!(pvc["status"]["phase"], "Pending");
    let storage_class = create(
        "storageclasses",
        json!({"metadata": {"name": "fast"}, "provisioner": "example.com/fast"}),
    );
    assert_eq!(storage_class["reclaimPolicy"], "Delete");
    assert_eq!(storage_class["volumeBindingMode"], "Immediate");
    assert!(storage_class["metadata"].get("generation").is_none());
    let role = create(
        "roles",
        json!({"metadata": {"name": "r"}, "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}),
    );
    assert!(role["metadata"].get("generation").is_none());
    assert_eq!(role["kind"], "Role");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Defaults only fill gaps: no value the client sent changes, and defaulting twice is
    /// defaulting once.
    #[test]
    fn defaults_only_add_and_are_idempotent(object in arb_json(), index in 0..64usize) {
        let defs = builtin_resources();
        let def = &defs[index % defs.len()];
        let mut once = object.clone();
        apply_defaults(def, &mut once);
        // The one removal: the pod spec fields kube 1.33 drops behind gates off by default.
        let mut expected = object.clone();
        without_gated_pod_fields(def, &mut expected);
        prop_assert!(keeps(&expected, &once), "{} -> {}", object, once);
        let mut twice = once.clone();
        apply_defaults(def, &mut twice);
        prop_assert_eq!(twice, once);
    }
}

/// A LimitRange's `type: Container` items as kube's `SetDefaults_LimitRangeItem`: `default`
/// from `max`, `defaultRequest` from `default` then `min`; what is given is kept; other
/// types are left alone.
#[test]
fn limit_range_item_defaults() {
    let range = create(
        "limitranges",
        json!({"metadata": {"name": "lr"}, "spec": {"limits": [
            {"type": "Container", "max": {"cpu": "2", "memory": "1Gi"},
                "default": {"memory": "512Mi"}, "min": {"cpu": "100m", "storage": "1Gi"},
                "defaultRequest": {"memory": "256Mi"}},
            {"type": "Pod", "max": {"cpu": "4"}}
        ]}}),
    );
    assert_eq!(
        range["spec"]["limits"],
        json!([
            {"type": "Container", "max": {"cpu": "2", "memory": "1Gi"},
                "default": {"cpu": "2", "memory": "512Mi"},
                "defaultRequest": {"cpu": "2", "memory": "256Mi", "storage": "1Gi"},
                "min": {"cpu": "100m", "storage": "1Gi"}},
            {"type": "Pod", "max": {"cpu": "4"}}
        ])
    );
}

#[test]
fn pod_only_defaults_stay_out_of_templates_and_probes_get_theirs() {
    let container = json!({"name": "c", "image": "nginx:1.25",
        "resources": {"limits": {"cpu": "200m"}},
        "ports": [{"containerPort": 8080}],
        "livenessProbe": {"httpGet": {"port": 8080}, "periodSeconds": 0},
        "env": [{"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]});
    let deployment = create(
        "deployments",
        json!({"metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"a": "b"}},
            "template": {"metadata": {"labels": {"a": "b"}},
                "spec": {"hostNetwork": true, "containers": [container.clone()]}}}}),
    );
    let template = &deployment["spec"]["template"]["spec"];
    assert!(template.get("enableServiceLinks").is_none(), "{template}");
    let c = &template["containers"][0];
    assert!(c["resources"].get("requests").is_none(), "{c}");
    assert!(c["ports"][0].get("hostPort").is_none(), "{c}");
    assert_eq!(
        c["livenessProbe"],
        json!({"httpGet": {"port": 8080, "path": "/", "scheme": "HTTP"}, "periodSeconds": 10,
            "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3})
    );
    assert_eq!(c["env"][0]["valueFrom"]["fieldRef"]["apiVersion"], "v1");

    let pod = create(
        "pods",
        json!({"metadata": {"name": "p"}, "spec": {"hostNetwork": true,
            "containers": [container]}}),
    );
    assert_eq!(pod["spec"]["enableServiceLinks"], true);
    let c = &pod["spec"]["containers"][0];
    assert_eq!(c["resources"]["requests"], json!({"cpu": "200m"}));
    assert_eq!(c["ports"][0]["hostPort"], 8080);
}

#[test]
fn role_bindings_name_their_api_groups() {
    let binding = create(
        "rolebindings",
        json!({"metadata": {"name": "rb"},
            "roleRef": {"kind": "Role", "name": "r"},
            "subjects": [{"kind": "User", "name": "u"}, {"kind": "Group", "name": "g"},
                {"kind": "ServiceAccount", "name": "sa", "namespace": "default"}]}),
    );
    assert_eq!(binding["roleRef"]["apiGroup"], "rbac.authorization.k8s.io");
    assert_eq!(
        binding["subjects"][0]["apiGroup"],
        "rbac.authorization.k8s.io"
    );
    assert_eq!(
        binding["subjects"][1]["apiGroup"],
        "rbac.authorization.k8s.io"
    );
    assert!(binding["subjects"][2].get("apiGroup").is_none());
}

/// `object` as `plural`'s defaulting leaves it (no create-time metadata or status).
/// Each `(plural, object, expected)` row: `object` defaulted as `plural` is `expected`.
fn assert_table(cases: &[(&str, Value, Value)]) {
    for (plural, object, expected) in cases {
        assert_eq!(
            &defaulted(plural, object.clone()),
            expected,
            "{plural}: {object}"
        );
    }
}

fn defaulted(plural: &str, object: Value) -> Value {
    let mut object = object;
    apply_defaults(&def(plural), &mut object);
    object
}

/// The minimal pod template of the workload tables, and what kube's `SetDefaults_PodSpec` and
/// `SetDefaults_Container` make of it (a template: no `enableServiceLinks`, as
/// `SetDefaults_Pod` alone sets it).
fn template() -> Value {
    json!({"metadata": {"labels": {"app": "a"}},
           "spec": {"containers": [{"name": "c", "image": "nginx:1.25"}]}})
}

fn defaulted_template() -> Value {
    json!({"metadata": {"labels": {"app": "a"}}, "spec": {
        "containers": [{"name": "c", "image": "nginx:1.25", "imagePullPolicy": "IfNotPresent",
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File", "resources": {}}],
        "restartPolicy": "Always", "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst", "securityContext": {}, "schedulerName": "default-scheduler"}})
}

/// kube 1.33's `pkg/apis/apps/v1/defaults.go` (and `defaults_test.go`'s cases), whole objects.
#[test]
fn apps_table() {
    let selector = json!({"matchLabels": {"app": "a"}});
    let cases = [
        // TestSetDefaultDeployment: a rolling update naming only `maxSurge` gets kube's
        // `maxUnavailable`, and one naming only `maxUnavailable` its `maxSurge`.
        (
            "deployments",
            json!({"spec": {"selector": selector, "template": template(),
                "strategy": {"rollingUpdate": {"maxSurge": 1}}}}),
            json!({"spec": {"selector": selector, "template": defaulted_template(),
                "replicas": 1, "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600,
                "strategy": {"type": "RollingUpdate",
                    "rollingUpdate": {"maxSurge": 1, "maxUnavailable": "25%"}}}}),
        ),
        (
            "deployments",
            json!({"spec": {"replicas": 5, "selector": selector, "template": template(),
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "10%"}}}}),
            json!({"spec": {"selector": selector, "template": defaulted_template(),
                "replicas": 5, "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600,
                "strategy": {"type": "RollingUpdate",
                    "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "10%"}}}}),
        ),
        // An empty type is unset (a Go string).
        (
            "deployments",
            json!({"spec": {"selector": selector, "template": template(),
                "strategy": {"type": ""}}}),
            json!({"spec": {"selector": selector, "template": defaulted_template(),
                "replicas": 1, "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600,
                "strategy": {"type": "RollingUpdate",
                    "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}}}),
        ),
        (
            "daemonsets",
            json!({"spec": {"selector": selector, "template": template(),
                "updateStrategy": {"rollingUpdate": {"maxSurge": "10%"}}}}),
            json!({"spec": {"selector": selector, "template": defaulted_template(),
                "revisionHistoryLimit": 10,
                "updateStrategy": {"type": "RollingUpdate",
                    "rollingUpdate": {"maxSurge": "10%", "maxUnavailable": 1}}}}),
        ),
        // TestSetDefaultStatefulSet: no strategy is a rolling one from partition 0, and each
        // claim template gets a claim's defaults (its spec's volume mode, `Pending`).
        (
            "statefulsets",
            json!({"spec": {"selector": selector, "template": template(),
                "volumeClaimTemplates": [{"metadata": {"name": "data"},
                    "spec": {"accessModes": ["ReadWriteOnce"]}}]}}),
            json!({"spec": {"selector": selector, "template": defaulted_template(),
                "replicas": 1, "revisionHistoryLimit": 10, "podManagementPolicy": "OrderedReady",
                "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
                "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Retain"},
                "volumeClaimTemplates": [{"metadata": {"name": "data"},
                    "spec": {"accessModes": ["ReadWriteOnce"], "volumeMode": "Filesystem"},
                    "status": {"phase": "Pending"}}]}}),
        ),
        // A `RollingUpdate` type sent without `rollingUpdate` stays without one; a retention
        // policy naming one case gets the other's `Retain`.
        (
            "statefulsets",
            json!({"spec": {"selector": selector, "template": template(),
                "updateStrategy": {"type": "RollingUpdate"},
                "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Delete"}}}),
            json!({"spec": {"selector": selector, "template": defaulted_template(),
                "replicas": 1, "revisionHistoryLimit": 10, "podManagementPolicy": "OrderedReady",
                "updateStrategy": {"type": "RollingUpdate"},
                "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Delete", "whenScaled": "Retain"}}}),
        ),
        (
            "replicasets",
            json!({"spec": {"selector": selector, "template": template()}}),
            json!({"spec": {"selector": selector, "template": defaulted_template(), "replicas": 1}}),
        ),
    ];
    assert_table(&cases);
}

/// kube 1.33's `pkg/apis/batch/v1/defaults.go`, whole objects.
#[test]
fn batch_table() {
    let cases = [
        (
            "jobs",
            json!({"metadata": {"name": "j"}, "spec": {"template": template()}}),
            json!({"metadata": {"name": "j", "labels": {"app": "a"}}, "spec": {
                "template": defaulted_template(), "completions": 1, "parallelism": 1,
                "backoffLimit": 6, "completionMode": "NonIndexed", "suspend": false,
                "podReplacementPolicy": "TerminatingOrFailed", "manualSelector": false}}),
        ),
        // A limit per index makes the Job's own the largest int32; a failure policy's
        // condition patterns match `True` unless they say.
        (
            "jobs",
            json!({"metadata": {"name": "j", "labels": {"x": "y"}}, "spec": {
                "completionMode": "Indexed", "completions": 3, "backoffLimitPerIndex": 1,
                "podFailurePolicy": {"rules": [{"action": "Ignore",
                    "onPodConditions": [{"type": "DisruptionTarget"}]}]},
                "template": template()}}),
            json!({"metadata": {"name": "j", "labels": {"x": "y"}}, "spec": {
                "completionMode": "Indexed", "completions": 3, "backoffLimitPerIndex": 1,
                "parallelism": 1, "backoffLimit": 2_147_483_647, "suspend": false,
                "podFailurePolicy": {"rules": [{"action": "Ignore",
                    "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]},
                "podReplacementPolicy": "Failed", "manualSelector": false,
                "template": defaulted_template()}}),
        ),
        (
            "cronjobs",
            json!({"spec": {"schedule": "* * * * *",
                "jobTemplate": {"spec": {"template": template()}}}}),
            json!({"spec": {"schedule": "* * * * *", "concurrencyPolicy": "Allow",
                "suspend": false, "successfulJobsHistoryLimit": 3, "failedJobsHistoryLimit": 1,
                "jobTemplate": {"spec": {"template": defaulted_template()}}}}),
        ),
    ];
    assert_table(&cases);
}

/// kube 1.33's `pkg/apis/core/v1/defaults.go` and the nested defaulters of its
/// `zz_generated.defaults.go`, whole objects.
#[test]
fn core_table() {
    let cases = [
        // Volumes: no source is an emptyDir; each source's `+default`s; projected tokens'
        // hour; the downward API's field references in projected sources; ephemeral claims'
        // volume mode; gRPC probes' service.
        (
            "podtemplates",
            json!({"template": {"spec": {
            "containers": [{"name": "c", "image": "nginx:latest@sha256:0",
                "readinessProbe": {"grpc": {"port": 9000}}}],
            "volumes": [
                {"name": "empty"},
                {"name": "host", "hostPath": {"path": "/x"}},
                {"name": "rbd", "rbd": {"monitors": ["m"], "image": "i", "pool": ""}},
                {"name": "iscsi", "iscsi": {"targetPortal": "t", "iqn": "q", "lun": 0}},
                {"name": "disk", "azureDisk": {"diskName": "d", "diskURI": "u"}},
                {"name": "sio", "scaleIO": {"gateway": "g", "system": "s", "secretRef": {"name": "n"}}},
                {"name": "proj", "projected": {"sources": [
                    {"serviceAccountToken": {"path": "t"}},
                    {"downwardAPI": {"items": [{"path": "n", "fieldRef": {"fieldPath": "metadata.name"}}]}}]}},
                {"name": "eph", "ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"]}}}}
            ]}}}),
            json!({"template": {"spec": {
                "containers": [{"name": "c", "image": "nginx:latest@sha256:0",
                    "imagePullPolicy": "Always",
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File", "resources": {},
                    "readinessProbe": {"grpc": {"port": 9000, "service": ""},
                        "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1,
                        "failureThreshold": 3}}],
                "volumes": [
                    {"name": "empty", "emptyDir": {}},
                    {"name": "host", "hostPath": {"path": "/x", "type": ""}},
                    {"name": "rbd", "rbd": {"monitors": ["m"], "image": "i", "pool": "rbd",
                        "user": "admin", "keyring": "/etc/ceph/keyring"}},
                    {"name": "iscsi", "iscsi": {"targetPortal": "t", "iqn": "q", "lun": 0,
                        "iscsiInterface": "default"}},
                    {"name": "disk", "azureDisk": {"diskName": "d", "diskURI": "u",
                        "cachingMode": "ReadWrite", "fsType": "ext4", "readOnly": false,
                        "kind": "Shared"}},
                    {"name": "sio", "scaleIO": {"gateway": "g", "system": "s",
                        "secretRef": {"name": "n"}, "storageMode": "ThinProvisioned", "fsType": "xfs"}},
                    {"name": "proj", "projected": {"defaultMode": 420, "sources": [
                        {"serviceAccountToken": {"path": "t", "expirationSeconds": 3600}},
                        {"downwardAPI": {"items": [{"path": "n",
                            "fieldRef": {"fieldPath": "metadata.name", "apiVersion": "v1"}}]}}]}},
                    {"name": "eph", "ephemeral": {"volumeClaimTemplate": {"spec": {
                        "accessModes": ["ReadWriteOnce"], "volumeMode": "Filesystem"}}}}
                ],
                "restartPolicy": "Always", "terminationGracePeriodSeconds": 30,
                "dnsPolicy": "ClusterFirst", "securityContext": {},
                "schedulerName": "default-scheduler"}}}),
        ),
        // A ReplicationController's selector and labels are its template's.
        (
            "replicationcontrollers",
            json!({"metadata": {"name": "r"}, "spec": {"template": template()}}),
            json!({"metadata": {"name": "r", "labels": {"app": "a"}}, "spec": {
                "selector": {"app": "a"}, "replicas": 1, "template": defaulted_template()}}),
        ),
        // Services: kube's affinity, traffic policies and target ports by type.
        (
            "services",
            json!({"spec": {"sessionAffinity": "None",
                "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 5}},
                "externalIPs": ["1.2.3.4"], "ports": [{"port": 80, "targetPort": ""}]}}),
            json!({"spec": {"type": "ClusterIP", "sessionAffinity": "None",
                "externalIPs": ["1.2.3.4"], "externalTrafficPolicy": "Cluster",
                "internalTrafficPolicy": "Cluster",
                "ports": [{"port": 80, "targetPort": 80, "protocol": "TCP"}]}}),
        ),
        (
            "services",
            json!({"spec": {"type": "LoadBalancer", "sessionAffinity": "ClientIP",
                "sessionAffinityConfig": {"clientIP": {}}, "ports": [{"port": 80}]},
                "status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}, {"hostname": "h"}]}}}),
            json!({"spec": {"type": "LoadBalancer", "sessionAffinity": "ClientIP",
                "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 10800}},
                "externalTrafficPolicy": "Cluster", "internalTrafficPolicy": "Cluster",
                "allocateLoadBalancerNodePorts": true,
                "ports": [{"port": 80, "targetPort": 80, "protocol": "TCP"}]},
                "status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4", "ipMode": "VIP"},
                    {"hostname": "h"}]}}}),
        ),
        (
            "services",
            json!({"spec": {"type": "ExternalName", "externalName": "example.com"}}),
            json!({"spec": {"type": "ExternalName", "externalName": "example.com",
                "sessionAffinity": "None"}}),
        ),
        (
            "persistentvolumes",
            json!({"spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                "hostPath": {"path": "/x"}}}),
            json!({"spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                "hostPath": {"path": "/x", "type": ""},
                "persistentVolumeReclaimPolicy": "Retain", "volumeMode": "Filesystem"},
                "status": {"phase": "Pending"}}),
        ),
        (
            "nodes",
            json!({"metadata": {"name": "n"}, "status": {"capacity": {"cpu": "4"}}}),
            json!({"metadata": {"name": "n"},
                "status": {"capacity": {"cpu": "4"}, "allocatable": {"cpu": "4"}}}),
        ),
        ("secrets", json!({"type": ""}), json!({"type": "Opaque"})),
        // Resource lists are rounded up to thousandths (`SetDefaults_ResourceList`), after a
        // Pod's requests are copied from its limits.
        (
            "resourcequotas",
            json!({"spec": {"hard": {"cpu": "0.0001", "memory": "1Gi", "pods": 10}}}),
            json!({"spec": {"hard": {"cpu": "1m", "memory": "1Gi", "pods": 10}}}),
        ),
        (
            "pods",
            json!({"spec": {"containers": [{"name": "c", "image": "i:1",
                "resources": {"limits": {"cpu": "100u", "memory": "1.5Gi"}}}]}}),
            json!({"spec": {"containers": [{"name": "c", "image": "i:1",
                    "imagePullPolicy": "IfNotPresent",
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                    "resources": {"limits": {"cpu": "1m", "memory": "1.5Gi"},
                        "requests": {"cpu": "1m", "memory": "1.5Gi"}}}],
                "restartPolicy": "Always", "terminationGracePeriodSeconds": 30,
                "dnsPolicy": "ClusterFirst", "securityContext": {},
                "schedulerName": "default-scheduler", "enableServiceLinks": true}}),
        ),
    ];
    assert_table(&cases);
}

/// The other groups' `defaults.go` (autoscaling/v2, networking/v1, discovery/v1), whole
/// objects.
#[test]
fn other_groups_table() {
    let cases = [
        // A behavior's rules left out are kube's; scale-down's window is left to the
        // controller.
        (
            "horizontalpodautoscalers",
            json!({"spec": {"minReplicas": 2, "metrics": [], "behavior": {"scaleDown": {"selectPolicy": "Min"}}}}),
            json!({"spec": {"minReplicas": 2, "metrics": [{"type": "Resource", "resource": {
                    "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}],
                "behavior": {
                    "scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
                        "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15},
                            {"type": "Percent", "value": 100, "periodSeconds": 15}]},
                    "scaleDown": {"selectPolicy": "Min",
                        "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}}}}),
        ),
        (
            "ingressclasses",
            json!({"spec": {"controller": "x/y", "parameters": {"kind": "K", "name": "n"}}}),
            json!({"spec": {"controller": "x/y",
                "parameters": {"kind": "K", "name": "n", "scope": "Cluster"}}}),
        ),
        (
            "endpointslices",
            json!({"addressType": "IPv4", "endpoints": [], "ports": [{"port": 80}]}),
            json!({"addressType": "IPv4", "endpoints": [],
                "ports": [{"port": 80, "name": "", "protocol": "TCP"}]}),
        ),
    ];
    assert_table(&cases);
}

//! kube's pod warnings against its own fixtures (`pkg/api/pod/warnings_test.go`).

use super::*;
use serde_json::json;

fn pod_warnings(spec: Value) -> Vec<String> {
    for_write(
        "",
        "pods",
        "",
        None,
        &json!({"metadata": {"name": "p"}, "spec": spec}),
    )
}

fn ports(containers: Value) -> Vec<String> {
    pod_warnings(json!({"containers": containers}))
}

#[test]
fn port_fixtures() {
    assert_eq!(
        ports(
            json!([{"name": "foo", "ports": [{"containerPort": 80, "protocol": "UDP", "hostIP": "10.0.0.1"}]}])
        ),
        [
            "spec.containers[0].ports[0]: hostIP set without hostPort: {Name: HostPort:0 ContainerPort:80 Protocol:UDP HostIP:10.0.0.1}"
        ]
    );
    let mut both = ports(json!([{"name": "foo", "ports": [
        {"containerPort": 80, "hostPort": 80, "protocol": "UDP", "hostIP": "10.0.0.1"},
        {"containerPort": 80, "protocol": "UDP", "hostIP": "10.0.0.1"},
    ]}]));
    both.sort();
    assert_eq!(
        both,
        [
            "spec.containers[0].ports[1]: hostIP set without hostPort: {Name: HostPort:0 ContainerPort:80 Protocol:UDP HostIP:10.0.0.1}",
            "spec.containers[0].ports[1]: overlapping port definition with spec.containers[0].ports[0]",
        ]
    );
    assert_eq!(
        ports(json!([{"name": "foo", "ports": [
            {"containerPort": 80, "hostPort": 80, "protocol": "UDP", "hostIP": "10.0.0.1"},
            {"containerPort": 80, "hostPort": 80, "protocol": "UDP"},
            {"containerPort": 80, "hostPort": 80, "protocol": "UDP", "hostIP": "10.0.0.2"},
        ]}])),
        [
            "spec.containers[0].ports[1]: dangerously ambiguous port definition with spec.containers[0].ports[0]",
            "spec.containers[0].ports[2]: dangerously ambiguous port definition with spec.containers[0].ports[1]",
        ]
    );
    assert_eq!(
        ports(json!([
            {"name": "foo", "ports": [{"containerPort": 80, "protocol": "UDP"}]},
            {"name": "bar", "ports": [{"containerPort": 80, "protocol": "UDP"}]},
        ])),
        ["spec.containers[1].ports[0]: duplicate port definition with spec.containers[0].ports[0]"]
    );
    assert_eq!(
        ports(json!([
            {"name": "foo1", "ports": [
                {"containerPort": 80, "hostPort": 80, "protocol": "UDP"},
                {"containerPort": 180, "hostPort": 80, "protocol": "UDP"},
                {"containerPort": 80, "hostPort": 80, "protocol": "UDP"},
            ]},
            {"name": "foo", "ports": [
                {"containerPort": 80, "hostPort": 80, "protocol": "UDP"},
                {"containerPort": 80, "hostPort": 80, "protocol": "UDP"},
            ]},
        ])),
        [
            "spec.containers[0].ports[2]: duplicate port definition with spec.containers[0].ports[0]",
            "spec.containers[1].ports[0]: duplicate port definition with spec.containers[0].ports[0]",
            "spec.containers[1].ports[0]: duplicate port definition with spec.containers[0].ports[2]",
            "spec.containers[1].ports[1]: duplicate port definition with spec.containers[0].ports[0]",
            "spec.containers[1].ports[1]: duplicate port definition with spec.containers[0].ports[2]",
            "spec.containers[1].ports[1]: duplicate port definition with spec.containers[1].ports[0]",
        ]
    );
    assert_eq!(
        pod_warnings(json!({
            "initContainers": [{"name": "foo1", "restartPolicy": "Always",
                "ports": [{"containerPort": 80, "protocol": "UDP", "name": "test"}]}],
            "containers": [{"name": "foo", "ports": [
                {"containerPort": 8090, "protocol": "UDP", "name": "test1"},
                {"containerPort": 8092, "protocol": "UDP", "name": "test"},
            ]}],
        })),
        [
            r#"spec.containers[0].ports[1]: duplicate port name "test" with spec.initContainers[0].ports[0], services and probes that select ports by name will use spec.initContainers[0].ports[0]"#
        ]
    );
    // Different protocols do not clash.
    assert!(
        ports(json!([{"name": "a", "ports": [
        {"containerPort": 53, "protocol": "UDP"}, {"containerPort": 53, "protocol": "TCP"}]}]))
        .is_empty()
    );
}

#[test]
fn node_label_and_selector_fixtures() {
    assert_eq!(
        pod_warnings(json!({
            "nodeSelector": {"beta.kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux"},
            "affinity": {"nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "foo"}, {"key": "beta.kubernetes.io/os"}]}]},
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 1, "preference": {"matchExpressions": [{"key": "failure-domain.beta.kubernetes.io/zone"}]}}],
            }},
            "topologySpreadConstraints": [
                {"topologyKey": "failure-domain.beta.kubernetes.io/region", "labelSelector": {}},
                {"topologyKey": "kubernetes.io/hostname"},
            ],
        })),
        [
            r#"spec.nodeSelector[beta.kubernetes.io/arch]: deprecated since v1.14; use "kubernetes.io/arch" instead"#,
            r#"spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[1].key: beta.kubernetes.io/os is deprecated since v1.14; use "kubernetes.io/os" instead"#,
            r#"spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchExpressions[0].key: failure-domain.beta.kubernetes.io/zone is deprecated since v1.17; use "topology.kubernetes.io/zone" instead"#,
            r#"spec.topologySpreadConstraints[0].topologyKey: failure-domain.beta.kubernetes.io/region is deprecated since v1.17; use "topology.kubernetes.io/region" instead"#,
            "spec.topologySpreadConstraints[1].labelSelector: a null labelSelector results in matching no pod",
        ]
    );
    assert_eq!(
        pod_warnings(json!({"affinity": {
            "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "k"}]},
            "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 1, "podAffinityTerm": {"topologyKey": "k"}},
                {"weight": 1, "podAffinityTerm": {"topologyKey": "k", "labelSelector": {}}},
            ]},
        }})),
        [
            "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector: a null labelSelector results in matching no pod",
            "spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm.labelSelector: a null labelSelector results in matching no pod",
        ]
    );
}

#[test]
fn annotation_volume_and_duplicate_fixtures() {
    let pod = json!({
        "metadata": {"annotations": {
            "scheduler.alpha.kubernetes.io/critical-pod": "",
            "seccomp.security.alpha.kubernetes.io/pod": "runtime/default",
            "container.seccomp.security.alpha.kubernetes.io/foo": "runtime/default",
        }},
        "spec": {
            "volumes": [
                {"name": "g", "gitRepo": {"repository": "r"}},
                {"name": "s", "storageos": {}},
                {"name": "c", "cephfs": {"monitors": ["m"]}},
                {"name": "p", "projected": {"sources": [
                    {"serviceAccountToken": {"path": "token"}},
                    {"configMap": {"name": "x", "items": [{"key": "k", "path": "token"}]}},
                    {"secret": {"name": "y", "items": [{"key": "k", "path": "other"}, {"key": "k", "path": "token"}]}},
                    {"downwardAPI": {"items": [{"path": "token"}]}},
                ]}},
            ],
            "hostAliases": [{"ip": "1.1.1.1"}, {"ip": "1.1.1.1"}],
            "imagePullSecrets": [{"name": "a"}, {"name": "a"}, {"name": ""}],
            "overhead": {"memory": "1500m"},
            "terminationGracePeriodSeconds": -1,
            "containers": [{"name": "foo", "image": "x",
                "resources": {"limits": {"memory": "0.5", "ephemeral-storage": "1"},
                    "requests": {"ephemeral-storage": "100m"}},
                "env": [
                    {"name": "A", "value": "1"},
                    {"name": "A", "value": "$(A)2"},
                    {"name": "A", "value": "3"},
                    {"name": "A", "value": "$(A)"},
                ]}],
        },
    });
    assert_eq!(
        for_write("", "pods", "", None, &pod),
        [
            r#"metadata.annotations[scheduler.alpha.kubernetes.io/critical-pod]: non-functional in v1.16+; use the "priorityClassName" field instead"#,
            "spec.volumes[0].gitRepo: deprecated in v1.11",
            "spec.volumes[1].storageOS: deprecated in v1.22, non-functional in v1.25+",
            "spec.volumes[2].cephfs: deprecated in v1.28, non-functional in v1.31+",
            r#"spec.volumes[3].projected.sources.configMap[0]: has duplicated path with ServiceAccountToken "token""#,
            r#"spec.volumes[3].projected.sources.secrets[1]: has duplicated path with ServiceAccountToken "token""#,
            r#"spec.volumes[3].projected.sources.downwardAPI[0]: has duplicated path with ServiceAccountToken "token""#,
            r#"spec.hostAliases[1].ip: duplicate ip "1.1.1.1""#,
            r#"spec.imagePullSecrets[1].name: duplicate name "a""#,
            r#"spec.imagePullSecrets[2].name: invalid empty name """#,
            r#"spec.overhead[memory]: fractional byte value "1500m" is invalid, must be an integer"#,
            r#"metadata.annotations[seccomp.security.alpha.kubernetes.io/pod]: non-functional in v1.27+; use the "seccompProfile" field instead"#,
            r#"metadata.annotations[container.seccomp.security.alpha.kubernetes.io/foo]: non-functional in v1.27+; use the "seccompProfile" field instead"#,
            r#"spec.containers[0].resources.limits[memory]: fractional byte value "500m" is invalid, must be an integer"#,
            r#"spec.containers[0].resources.requests[ephemeral-storage]: fractional byte value "100m" is invalid, must be an integer"#,
            r#"spec.containers[0].env[2]: hides previous definition of "A", which may be dropped when using apply"#,
            r#"spec.containers[0].env[3]: hides previous definition of "A", which may be dropped when using apply"#,
            "spec.terminationGracePeriodSeconds: must be >= 0; negative values are invalid and will be treated as 1",
        ]
    );
}

#[test]
fn templates_warn_under_their_path_when_their_spec_changes() {
    let template = json!({"metadata": {"annotations": {
        "container.apparmor.security.beta.kubernetes.io/c": "runtime/default"}},
        "spec": {"containers": [{"name": "c", "image": "x"}], "hostAliases": [{"ip": "1"}, {"ip": "1"}]}});
    let deployment = json!({"metadata": {"generation": 1}, "spec": {"template": template}});
    assert_eq!(
        for_write("apps", "deployments", "", None, &deployment),
        [
            r#"spec.template.spec.hostAliases[1].ip: duplicate ip "1""#,
            r#"spec.template.metadata.annotations[container.apparmor.security.beta.kubernetes.io/c]: deprecated since v1.30; use the "appArmorProfile" field instead"#,
        ]
    );
    // An update that keeps the generation (metadata only) says nothing; one that moves it does.
    assert!(for_write("apps", "deployments", "", Some(&deployment), &deployment).is_empty());
    let mut moved = deployment.clone();
    moved["metadata"]["generation"] = json!(2);
    assert_eq!(
        for_write("apps", "deployments", "", Some(&deployment), &moved).len(),
        2
    );
    // Subresources and other kinds: nothing.
    assert!(for_write("apps", "deployments", "scale", None, &deployment).is_empty());
    assert!(for_write("", "configmaps", "", None, &deployment).is_empty());
    let cronjob = json!({"spec": {"jobTemplate": {"spec": {"template": template}}}});
    assert_eq!(
        for_write("batch", "cronjobs", "", None, &cronjob)[0],
        r#"spec.jobTemplate.spec.template.spec.hostAliases[1].ip: duplicate ip "1""#
    );
    // A pod's AppArmor annotation is not warned about here (kube's pod strategy words it).
    let pod =
        json!({"metadata": template["metadata"].clone(), "spec": {"containers": [{"name": "c"}]}});
    assert!(for_write("", "pods", "", None, &pod).is_empty());
    // Pods warn on every update of the pod itself, not of a subresource.
    let dup = json!({"spec": {"hostAliases": [{"ip": "1"}, {"ip": "1"}]}});
    assert_eq!(for_write("", "pods", "", Some(&dup), &dup).len(), 1);
    assert!(for_write("", "pods", "status", Some(&dup), &dup).is_empty());
}

//! The checks against kube's own fixtures (`policy/check_*_test.go`), the registry's versions
//! and order, the labels, and the admission decisions.

use super::*;
use serde_json::json;

/// A check's reason and detail on a pod `{metadata, spec}`; `None` when it passes.
fn run(check: CheckFn, pod: &Value) -> Option<(String, String)> {
    check(&pod["metadata"], &pod["spec"]).map(|v| (v.reason, v.detail))
}

fn forbidden(check: CheckFn, pod: Value, reason: &str, detail: &str) {
    assert_eq!(
        run(check, &pod),
        Some((reason.to_owned(), detail.to_owned())),
        "{pod}"
    );
}

fn allowed(check: CheckFn, pod: Value) {
    assert_eq!(run(check, &pod), None, "{pod}");
}

/// A write by `admin`, no exemptions configured.
fn write<'a>(
    labels: Option<&'a Value>,
    (group, plural, subresource): (&'a str, &'a str, &'a str),
    old: Option<&'a Value>,
    object: &'a Value,
) -> Attributes<'a> {
    Attributes {
        user: "admin",
        group,
        plural,
        subresource,
        old,
        object,
        labels,
    }
}

fn pod_decision(
    labels: Option<&Value>,
    subresource: &str,
    old: Option<&Value>,
    pod: &Value,
) -> Decision {
    let write = write(labels, ("", "pods", subresource), old, pod);
    admit_pod(&Configuration::default(), &write)
}

fn template_decision(
    labels: Option<&Value>,
    group: &str,
    plural: &str,
    subresource: &str,
    object: &Value,
) -> Decision {
    let write = write(labels, (group, plural, subresource), None, object);
    admit_template(&Configuration::default(), &write)
}

fn annotations_of(
    labels: Option<&Value>,
    group: &str,
    plural: &str,
    subresource: &str,
    old: Option<&Value>,
    object: &Value,
) -> Vec<(&'static str, String)> {
    let write = write(labels, (group, plural, subresource), old, object);
    audit_annotations(&Configuration::default(), &write)
}

/// [`admit_namespace`] without exemptions, as the old `Option` of the enforce level to check
/// pods against.
fn namespace_review(
    namespace: &Value,
    old: Option<&Value>,
) -> Result<Option<LevelVersion>, Vec<Cause>> {
    admit_namespace(&Configuration::default(), namespace, old).map(|review| match review {
        NamespaceReview::CheckPods(enforce) => Some(enforce),
        NamespaceReview::Allowed => None,
        NamespaceReview::Exempt(warning) => panic!("no exemptions configured: {warning}"),
    })
}

fn lv(level: Level, version: Version) -> LevelVersion {
    LevelVersion { level, version }
}

#[test]
fn registry_is_in_kubes_order_with_increasing_versions() {
    // Baseline by ID, then restricted by ID, in Go's byte order.
    let baseline: Vec<&str> = CHECKS
        .iter()
        .filter(|c| c.level == Level::Baseline)
        .map(|c| c.id)
        .collect();
    let restricted: Vec<&str> = CHECKS
        .iter()
        .filter(|c| c.level == Level::Restricted)
        .map(|c| c.id)
        .collect();
    let mut sorted = baseline.clone();
    sorted.sort_unstable();
    assert_eq!(baseline, sorted);
    let mut sorted = restricted.clone();
    sorted.sort_unstable();
    assert_eq!(restricted, sorted);
    assert_eq!(baseline.len() + restricted.len(), CHECKS.len());
    assert_eq!(baseline.len(), 11);
    assert_eq!(restricted.len(), 6);
    for check in CHECKS {
        assert!(
            check.versions.windows(2).all(|w| w[0].0 < w[1].0),
            "{}",
            check.id
        );
        for id in check.overrides {
            assert!(
                CHECKS
                    .iter()
                    .any(|c| c.id == *id && c.level == Level::Baseline)
            );
        }
    }
    let newest = CHECKS
        .iter()
        .filter_map(|c| c.versions.last().map(|v| v.0))
        .max();
    assert_eq!(newest, Some(MAX_CHECK_MINOR));
}

#[test]
fn labels_parse_as_kube() {
    assert_eq!(Version::parse("latest"), Some(Version::Latest));
    assert_eq!(Version::parse("v1.0"), Some(Version::Minor(0)));
    assert_eq!(Version::parse("v1.33"), Some(Version::Minor(33)));
    for bad in [
        "v1.01",
        "v2.0",
        "1.2",
        "v1.",
        "v1.x",
        "",
        "Latest",
        "v1.-1",
        "v1.99999999999999999999",
    ] {
        assert_eq!(Version::parse(bad), None, "{bad}");
    }
    assert_eq!(Level::parse("Restricted"), None);

    let (policy, causes) = Policy::of_labels(
        Some(&json!({
            "pod-security.kubernetes.io/enforce": "baseline",
            "pod-security.kubernetes.io/enforce-version": "v1.24",
            "pod-security.kubernetes.io/warn": "restricted",
        })),
        &Policy::DEFAULT,
    );
    assert!(causes.is_empty());
    assert_eq!(policy.enforce.to_string(), "baseline:v1.24");
    assert_eq!(policy.warn.to_string(), "restricted:latest");
    assert_eq!(policy.audit, LevelVersion::DEFAULT);

    // Warn defaults to a stricter valid enforce level (and its version, unless set).
    let of = |labels: Value| {
        Policy::of_labels(Some(&labels), &Policy::DEFAULT)
            .0
            .warn
            .to_string()
    };
    assert_eq!(
        of(json!({ENFORCE_LEVEL_LABEL: "baseline", ENFORCE_VERSION_LABEL: "v1.24"})),
        "baseline:v1.24"
    );
    assert_eq!(
        of(json!({ENFORCE_LEVEL_LABEL: "baseline", WARN_VERSION_LABEL: "v1.20"})),
        "baseline:v1.20"
    );
    assert_eq!(
        of(json!({ENFORCE_LEVEL_LABEL: "restricted", WARN_LEVEL_LABEL: "privileged"})),
        "privileged:latest"
    );
    assert_eq!(
        of(json!({ENFORCE_LEVEL_LABEL: "bogus"})),
        "privileged:latest"
    );

    // Invalid levels: enforce fails closed, warn and audit open; invalid versions are latest.
    let (policy, causes) = Policy::of_labels(
        Some(&json!({
            "pod-security.kubernetes.io/enforce": "strict",
            "pod-security.kubernetes.io/enforce-version": "v1.24",
            "pod-security.kubernetes.io/warn": "bogus",
            "pod-security.kubernetes.io/audit-version": "1.2",
        })),
        &Policy::DEFAULT,
    );
    assert_eq!(policy.enforce.to_string(), "restricted:v1.24");
    assert_eq!(policy.warn.to_string(), "privileged:latest");
    assert_eq!(policy.audit.to_string(), "privileged:latest");
    assert_eq!(
        causes,
        vec![
            (
                "metadata.labels[pod-security.kubernetes.io/enforce]".to_owned(),
                "Invalid value: \"strict\": must be one of privileged, baseline, restricted"
                    .to_owned(),
                "FieldValueInvalid".to_owned()
            ),
            (
                "metadata.labels[pod-security.kubernetes.io/audit-version]".to_owned(),
                "Invalid value: \"1.2\": must be \"latest\" or \"v1.x\"".to_owned(),
                "FieldValueInvalid".to_owned()
            ),
            (
                "metadata.labels[pod-security.kubernetes.io/warn]".to_owned(),
                "Invalid value: \"bogus\": must be one of privileged, baseline, restricted"
                    .to_owned(),
                "FieldValueInvalid".to_owned()
            ),
        ]
    );
}

#[test]
fn allow_privilege_escalation_fixtures() {
    forbidden(
        allow_privilege_escalation,
        json!({"spec": {"containers": [
            {"name": "a"},
            {"name": "b", "securityContext": {}},
            {"name": "c", "securityContext": {"allowPrivilegeEscalation": true}},
            {"name": "d", "securityContext": {"allowPrivilegeEscalation": false}},
        ]}}),
        "allowPrivilegeEscalation != false",
        r#"containers "a", "b", "c" must set securityContext.allowPrivilegeEscalation=false"#,
    );
    // v1.25: Windows pods pass; v1.8 did not exempt them.
    let windows = json!({"spec": {"os": {"name": "windows"}, "containers": [{"name": "a"}]}});
    allowed(allow_privilege_escalation_1_25, windows.clone());
    assert!(run(allow_privilege_escalation, &windows).is_some());
}

#[test]
fn app_armor_fixtures() {
    forbidden(
        app_armor_profile,
        json!({"spec": {"securityContext": {"appArmorProfile": {"type": "Unconfined"}}}}),
        "forbidden AppArmor profile",
        r#"pod must not set AppArmor profile type to "Unconfined""#,
    );
    forbidden(
        app_armor_profile,
        json!({"spec": {
            "securityContext": {"appArmorProfile": {"type": "RuntimeDefault"}},
            "containers": [{"name": "foo", "securityContext": {"appArmorProfile": {"type": "Unconfined"}}}],
        }}),
        "forbidden AppArmor profile",
        r#"container "foo" must not set AppArmor profile type to "Unconfined""#,
    );
    forbidden(
        app_armor_profile,
        json!({"metadata": {"annotations": {
            "container.apparmor.security.beta.kubernetes.io/a": "unconfined",
            "container.apparmor.security.beta.kubernetes.io/b": "runtime/default",
            "container.apparmor.security.beta.kubernetes.io/c": "localhost/x",
            "container.apparmor.security.beta.kubernetes.io/d": "",
            "container.apparmor.security.beta.kubernetes.io/e": "bad",
        }}, "spec": {}}),
        "forbidden AppArmor profiles",
        r#"annotations must not set AppArmor profile type to "container.apparmor.security.beta.kubernetes.io/a=\"unconfined\"", "container.apparmor.security.beta.kubernetes.io/e=\"bad\"""#,
    );
    allowed(
        app_armor_profile,
        json!({"spec": {"containers": [{"name": "a", "securityContext": {"appArmorProfile": {"type": "Localhost"}}}]}}),
    );
}

#[test]
fn capabilities_fixtures() {
    forbidden(
        capabilities_baseline,
        json!({"spec": {"containers": [
            {"name": "a", "securityContext": {"capabilities": {"add": ["FOO", "BAR"]}}},
            {"name": "b", "securityContext": {"capabilities": {"add": ["BAR", "BAZ"]}}},
            {"name": "c", "securityContext": {"capabilities": {"add": ["CHOWN"]}}},
        ]}}),
        "non-default capabilities",
        r#"containers "a", "b" must not include "BAR", "BAZ", "FOO" in securityContext.capabilities.add"#,
    );
    forbidden(
        capabilities_restricted,
        json!({"spec": {"containers": [
            {"name": "a", "securityContext": {"capabilities": {"add": ["FOO", "BAR"]}}},
            {"name": "b", "securityContext": {"capabilities": {"add": ["BAR", "BAZ"]}}},
            {"name": "c", "securityContext": {"capabilities": {"add": ["NET_BIND_SERVICE", "CHOWN"], "drop": ["ALL", "FOO"]}}},
        ]}}),
        "unrestricted capabilities",
        r#"containers "a", "b" must set securityContext.capabilities.drop=["ALL"]; containers "a", "b", "c" must not include "BAR", "BAZ", "CHOWN", "FOO" in securityContext.capabilities.add"#,
    );
    allowed(
        capabilities_restricted,
        json!({"spec": {"containers": [{"name": "a", "securityContext": {"capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}}}]}}),
    );
}

#[test]
fn host_fixtures() {
    forbidden(
        host_namespaces,
        json!({"spec": {"hostNetwork": true, "hostIPC": true, "hostPID": true}}),
        "host namespaces",
        "hostNetwork=true, hostPID=true, hostIPC=true",
    );
    forbidden(
        host_path_volumes,
        json!({"spec": {"volumes": [
            {"name": "a", "emptyDir": {}},
            {"name": "b", "hostPath": {"path": "/"}},
            {"name": "c", "hostPath": {"path": "/x"}},
        ]}}),
        "hostPath volumes",
        r#"volumes "b", "c""#,
    );
    forbidden(
        host_ports,
        json!({"spec": {"containers": [
            {"name": "a", "ports": [{"hostPort": 0}]},
            {"name": "b", "ports": [{"hostPort": 0}, {"hostPort": 20}]},
        ]}}),
        "hostPort",
        r#"container "b" uses hostPort 20"#,
    );
    forbidden(
        host_ports,
        json!({"spec": {"containers": [
            {"name": "a", "ports": [{"hostPort": 0}]},
            {"name": "b", "ports": [{"hostPort": 0}, {"hostPort": 10}, {"hostPort": 20}]},
            {"name": "c", "ports": [{"hostPort": 0}, {"hostPort": 10}, {"hostPort": 30}]},
        ]}}),
        "hostPort",
        r#"containers "b", "c" use hostPorts 10, 20, 30"#,
    );
    forbidden(
        windows_host_process,
        json!({"spec": {
            "securityContext": {"windowsOptions": {"hostProcess": true}},
            "containers": [
                {"name": "a", "securityContext": {"windowsOptions": {"hostProcess": true}}},
                {"name": "b", "securityContext": {"windowsOptions": {"hostProcess": false}}},
            ],
        }}),
        "hostProcess",
        r#"pod and container "a" must not set securityContext.windowsOptions.hostProcess=true"#,
    );
}

#[test]
fn privileged_and_proc_mount_fixtures() {
    forbidden(
        privileged,
        json!({"spec": {
            "initContainers": [{"name": "i", "securityContext": {"privileged": true}}],
            "containers": [
                {"name": "a", "securityContext": {"privileged": false}},
                {"name": "b", "securityContext": {"privileged": true}},
            ],
        }}),
        "privileged",
        r#"containers "i", "b" must not set securityContext.privileged=true"#,
    );
    forbidden(
        proc_mount,
        json!({"spec": {"containers": [
            {"name": "a", "securityContext": {"procMount": "Default"}},
            {"name": "b", "securityContext": {"procMount": "Unmasked"}},
            {"name": "c"},
        ]}}),
        "procMount",
        r#"container "b" must not set securityContext.procMount to "Unmasked""#,
    );
}

#[test]
fn restricted_volumes_fixture() {
    let allowed_sources = [
        "emptyDir",
        "secret",
        "persistentVolumeClaim",
        "downwardAPI",
        "configMap",
        "projected",
        "csi",
        "ephemeral",
        "image",
    ];
    let mut volumes: Vec<Value> = allowed_sources
        .iter()
        .enumerate()
        .map(|(i, source)| json!({"name": format!("a{}", i + 1), *source: {}}))
        .collect();
    let restricted = [
        "hostPath",
        "gcePersistentDisk",
        "awsElasticBlockStore",
        "gitRepo",
        "nfs",
        "iscsi",
        "glusterfs",
        "rbd",
        "flexVolume",
        "cinder",
        "cephfs",
        "flocker",
        "fc",
        "azureFile",
        "vsphereVolume",
        "quobyte",
        "azureDisk",
        "photonPersistentDisk",
        "portworxVolume",
        "scaleIO",
        "storageos",
    ];
    volumes.extend(
        restricted
            .iter()
            .enumerate()
            .map(|(i, source)| json!({"name": format!("b{}", i + 1), *source: {}})),
    );
    volumes.push(json!({"name": "c1"}));
    forbidden(
        restricted_volumes,
        json!({"spec": {"volumes": volumes}}),
        "restricted volume types",
        concat!(
            r#"volumes "b1", "b2", "b3", "b4", "b5", "b6", "b7", "b8", "b9", "b10", "b11", "b12", "b13", "b14", "b15", "b16", "b17", "b18", "b19", "b20", "b21", "c1""#,
            r#" use restricted volume types "#,
            r#""awsElasticBlockStore", "azureDisk", "azureFile", "cephfs", "cinder", "fc", "flexVolume", "flocker", "gcePersistentDisk", "gitRepo", "glusterfs", "#,
            r#""hostPath", "iscsi", "nfs", "photonPersistentDisk", "portworxVolume", "quobyte", "rbd", "scaleIO", "storageos", "unknown", "vsphereVolume""#,
        ),
    );
}

#[test]
fn run_as_fixtures() {
    forbidden(
        run_as_non_root,
        json!({"spec": {
            "securityContext": {"runAsNonRoot": false},
            "containers": [
                {"name": "a"},
                {"name": "b", "securityContext": {"runAsNonRoot": false}},
                {"name": "c", "securityContext": {"runAsNonRoot": false}},
            ],
        }}),
        "runAsNonRoot != true",
        r#"pod and containers "b", "c" must not set securityContext.runAsNonRoot=false"#,
    );
    forbidden(
        run_as_non_root,
        json!({"spec": {"containers": [
            {"name": "a"},
            {"name": "b", "securityContext": {"runAsNonRoot": true}},
            {"name": "c", "securityContext": {}},
        ]}}),
        "runAsNonRoot != true",
        r#"pod or containers "a", "c" must set securityContext.runAsNonRoot=true"#,
    );
    allowed(
        run_as_non_root,
        json!({"spec": {"securityContext": {"runAsNonRoot": true}, "containers": [{"name": "a"}]}}),
    );
    forbidden(
        run_as_user,
        json!({"spec": {
            "securityContext": {"runAsUser": 0},
            "containers": [
                {"name": "a", "securityContext": {"runAsUser": 0}},
                {"name": "b", "securityContext": {"runAsUser": 1000}},
                {"name": "c", "securityContext": {"runAsUser": 0}},
            ],
        }}),
        "runAsUser=0",
        r#"pod and containers "a", "c" must not set runAsUser=0"#,
    );
}

#[test]
fn se_linux_fixtures() {
    forbidden(
        se_linux_options_1_0,
        json!({"spec": {
            "securityContext": {"seLinuxOptions": {"type": "foo", "user": "bar"}},
            "containers": [
                {"name": "a", "securityContext": {"seLinuxOptions": {"type": "container_t"}}},
                {"name": "b", "securityContext": {"seLinuxOptions": {"type": "bar", "role": "baz"}}},
            ],
        }}),
        "seLinuxOptions",
        r#"pod and container "b" set forbidden securityContext.seLinuxOptions: types "bar", "foo"; user may not be set; role may not be set"#,
    );
    forbidden(
        se_linux_options_1_0,
        json!({"spec": {"securityContext": {"seLinuxOptions": {"user": "bad"}}}}),
        "seLinuxOptions",
        "pod set forbidden securityContext.seLinuxOptions: user may not be set",
    );
    let engine =
        json!({"spec": {"securityContext": {"seLinuxOptions": {"type": "container_engine_t"}}}});
    forbidden(
        se_linux_options_1_0,
        engine.clone(),
        "seLinuxOptions",
        r#"pod set forbidden securityContext.seLinuxOptions: type "container_engine_t""#,
    );
    allowed(se_linux_options_1_31, engine);
}

#[test]
fn seccomp_fixtures() {
    forbidden(
        seccomp_annotations,
        json!({"metadata": {"annotations": {
            "seccomp.security.alpha.kubernetes.io/pod": "unconfined",
            "container.seccomp.security.alpha.kubernetes.io/a": "runtime/default",
            "container.seccomp.security.alpha.kubernetes.io/b": "bogus",
        }}, "spec": {"containers": [{"name": "a"}, {"name": "b"}]}}),
        "seccompProfile",
        r#"forbidden annotations container.seccomp.security.alpha.kubernetes.io/b="bogus", seccomp.security.alpha.kubernetes.io/pod="unconfined""#,
    );
    forbidden(
        seccomp_baseline,
        json!({"spec": {
            "securityContext": {"seccompProfile": {"type": "Unconfined"}},
            "containers": [
                {"name": "a", "securityContext": {"seccompProfile": {"type": "Unconfined"}}},
                {"name": "b", "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}},
                {"name": "c"},
            ],
        }}),
        "seccompProfile",
        r#"pod and container "a" must not set securityContext.seccompProfile.type to "Unconfined""#,
    );
    allowed(
        seccomp_baseline,
        json!({"spec": {"containers": [{"name": "c"}]}}),
    );
    forbidden(
        seccomp_restricted,
        json!({"spec": {"containers": [
            {"name": "a"},
            {"name": "b", "securityContext": {"seccompProfile": {"type": "Localhost"}}},
            {"name": "c", "securityContext": {}},
        ]}}),
        "seccompProfile",
        r#"pod or containers "a", "c" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost""#,
    );
    allowed(
        seccomp_restricted,
        json!({"spec": {"securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}, "containers": [{"name": "a"}]}}),
    );
    allowed(
        seccomp_restricted_1_25,
        json!({"spec": {"os": {"name": "windows"}, "containers": [{"name": "a"}]}}),
    );
}

#[test]
fn sysctl_fixtures_by_version() {
    forbidden(
        sysctls_1_0,
        json!({"spec": {"securityContext": {"sysctls": [{"name": "a"}, {"name": "b"}]}}}),
        "forbidden sysctls",
        "a, b",
    );
    let reserved = json!({"spec": {"securityContext": {"sysctls": [{"name": "net.ipv4.ip_local_reserved_ports", "value": "1024-4999"}]}}});
    forbidden(
        sysctls_1_0,
        reserved.clone(),
        "forbidden sysctls",
        "net.ipv4.ip_local_reserved_ports",
    );
    allowed(sysctls_1_27, reserved);
    let keepalive = json!({"spec": {"securityContext": {"sysctls": [{"name": "net.ipv4.tcp_keepalive_time"}]}}});
    assert!(run(sysctls_1_27, &keepalive).is_some());
    allowed(sysctls_1_29, keepalive);
    let rmem = json!({"spec": {"securityContext": {"sysctls": [{"name": "net.ipv4.tcp_rmem"}]}}});
    assert!(run(sysctls_1_29, &rmem).is_some());
    allowed(sysctls_1_32, rmem);
}

/// A pod violating most checks, for the registry's order and versions.
fn bad_pod() -> Value {
    json!({
        "metadata": {"name": "p"},
        "spec": {
            "hostNetwork": true,
            "securityContext": {"sysctls": [{"name": "net.core.somaxconn"}],
                "seLinuxOptions": {"user": "u"}},
            "containers": [{"name": "c", "image": "nginx",
                "securityContext": {"privileged": true, "capabilities": {"add": ["NET_ADMIN"]}},
                "ports": [{"containerPort": 80, "hostPort": 8080}]}],
            "volumes": [{"name": "h", "hostPath": {"path": "/"}}],
        },
    })
}

#[test]
fn baseline_and_restricted_aggregate_in_kubes_order() {
    let pod = bad_pod();
    let baseline = evaluate(
        lv(Level::Baseline, Version::Latest),
        &pod["metadata"],
        &pod["spec"],
    );
    assert_eq!(
        forbidden_reason(&baseline),
        "non-default capabilities, host namespaces, hostPath volumes, hostPort, privileged, seLinuxOptions, forbidden sysctls"
    );
    let restricted = evaluate(
        lv(Level::Restricted, Version::Latest),
        &pod["metadata"],
        &pod["spec"],
    );
    // The restricted capabilities and volumes checks replace baseline's.
    assert_eq!(
        forbidden_reason(&restricted),
        "host namespaces, hostPort, privileged, seLinuxOptions, forbidden sysctls, allowPrivilegeEscalation != false, unrestricted capabilities, restricted volume types, runAsNonRoot != true, seccompProfile"
    );
    assert_eq!(
        forbidden_detail(&restricted[..2]),
        r#"host namespaces (hostNetwork=true), hostPort (container "c" uses hostPort 8080)"#
    );
    assert!(
        evaluate(
            lv(Level::Privileged, Version::Latest),
            &pod["metadata"],
            &pod["spec"]
        )
        .is_empty()
    );
}

#[test]
fn checks_apply_from_their_minimum_version() {
    let pod = json!({"spec": {"containers": [{"name": "c", "securityContext": {"runAsNonRoot": true, "runAsUser": 0,
        "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}}]}});
    let reasons = |version| {
        forbidden_reason(&evaluate(
            lv(Level::Restricted, version),
            &pod["metadata"],
            &pod["spec"],
        ))
    };
    // runAsUser from v1.23, seccompProfile of restricted from v1.19.
    assert_eq!(reasons(Version::Minor(18)), "");
    assert_eq!(reasons(Version::Minor(19)), "seccompProfile");
    assert_eq!(reasons(Version::Minor(23)), "runAsUser=0, seccompProfile");
    assert_eq!(reasons(Version::Latest), "runAsUser=0, seccompProfile");
    // Versions past the newest check's are the newest's.
    assert_eq!(reasons(Version::Minor(1000)), reasons(Version::Latest));
    // Before v1.22, restricted runs baseline's capabilities check instead.
    let caps = json!({"spec": {"containers": [{"name": "c", "securityContext": {"capabilities": {"add": ["NET_ADMIN"]}}}]}});
    let at = |minor| {
        forbidden_reason(&evaluate(
            lv(Level::Restricted, Version::Minor(minor)),
            &caps["metadata"],
            &caps["spec"],
        ))
    };
    assert!(at(21).starts_with("non-default capabilities, allowPrivilegeEscalation != false"));
    assert!(!at(22).contains("non-default capabilities"));
    assert!(at(22).contains("unrestricted capabilities"));
}

fn labels(enforce: &str, warn: &str) -> Value {
    let mut labels = Map::new();
    if !enforce.is_empty() {
        labels.insert(ENFORCE_LEVEL_LABEL.into(), json!(enforce));
    }
    if !warn.is_empty() {
        labels.insert(WARN_LEVEL_LABEL.into(), json!(warn));
    }
    Value::Object(labels)
}

#[test]
fn pods_are_refused_or_warned() {
    let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}});
    let decision = pod_decision(Some(&labels("restricted", "")), "", None, &pod);
    assert_eq!(
        decision.refusal.as_deref(),
        Some(concat!(
            r#"violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation=false), "#,
            r#"unrestricted capabilities (container "c" must set securityContext.capabilities.drop=["ALL"]), "#,
            r#"runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true), "#,
            r#"seccompProfile (pod or container "c" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")"#,
        ))
    );
    assert!(decision.warnings.is_empty(), "no warnings on a refusal");
    let decision = pod_decision(Some(&labels("baseline", "restricted")), "", None, &pod);
    assert_eq!(decision.refusal, None);
    assert_eq!(decision.warnings.len(), 1);
    assert!(decision.warnings[0].starts_with(
        "would violate PodSecurity \"restricted:latest\": allowPrivilegeEscalation != false"
    ));
    // Unlabelled namespaces and ignored subresources: nothing.
    assert_eq!(
        pod_decision(None, "", None, &bad_pod()),
        Decision::default()
    );
    assert_eq!(
        pod_decision(Some(&labels("restricted", "")), "status", None, &pod),
        Decision::default()
    );
    // An invalid enforce level enforces restricted.
    assert!(
        pod_decision(Some(&labels("bogus", "")), "", None, &pod)
            .refusal
            .unwrap()
            .starts_with("violates PodSecurity \"restricted:latest\"")
    );
}

#[test]
fn only_significant_pod_updates_are_checked() {
    let old =
        json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "a"}]}});
    let ns = labels("restricted", "");
    let mut relabelled = old.clone();
    relabelled["metadata"]["labels"] = json!({"x": "y"});
    assert!(!is_significant_pod_update(&relabelled, &old));
    assert_eq!(
        pod_decision(Some(&ns), "", Some(&old), &relabelled),
        Decision::default()
    );
    let mut image = old.clone();
    image["spec"]["containers"][0]["image"] = json!("b");
    assert!(is_significant_pod_update(&image, &old));
    assert!(
        pod_decision(Some(&ns), "", Some(&old), &image)
            .refusal
            .is_some()
    );
    let mut annotated = old.clone();
    annotated["metadata"]["annotations"] =
        json!({"container.seccomp.security.alpha.kubernetes.io/c": "runtime/default"});
    assert!(is_significant_pod_update(&annotated, &old));
    let mut ephemeral = old.clone();
    ephemeral["spec"]["ephemeralContainers"] = json!([{"name": "debug", "image": "busybox"}]);
    assert!(is_significant_pod_update(&ephemeral, &old));
    assert!(!is_significant_pod_update(&ephemeral, &ephemeral));
    assert!(
        pod_decision(Some(&ns), "ephemeralcontainers", Some(&old), &ephemeral)
            .refusal
            .is_some()
    );
}

#[test]
fn templates_only_warn() {
    let deployment = json!({"spec": {"template": {"metadata": {}, "spec": {"containers": [{"name": "c", "image": "x",
        "securityContext": {"privileged": true}}]}}}});
    let decision = template_decision(
        Some(&labels("restricted", "baseline")),
        "apps",
        "deployments",
        "",
        &deployment,
    );
    assert_eq!(decision.refusal, None);
    assert_eq!(
        decision.warnings,
        vec![r#"would violate PodSecurity "baseline:latest": privileged (container "c" must not set securityContext.privileged=true)"#.to_owned()]
    );
    assert_eq!(
        template_decision(
            Some(&labels("", "baseline")),
            "apps",
            "deployments",
            "scale",
            &deployment
        ),
        Decision::default()
    );
    let cronjob = json!({"spec": {"jobTemplate": {"spec": {"template": deployment["spec"]["template"].clone()}}}});
    assert_eq!(
        template_decision(
            Some(&labels("", "baseline")),
            "batch",
            "cronjobs",
            "",
            &cronjob
        )
        .warnings
        .len(),
        1
    );
    assert_eq!(
        pod_template("", "replicationcontrollers", &json!({"spec": {}})),
        None
    );
    assert!(pod_template("", "podtemplates", &json!({"template": {"spec": {}}})).is_some());
    assert_eq!(pod_template("", "configmaps", &json!({})), None);
}

fn namespace(name: &str, labels: Value) -> Value {
    json!({"metadata": {"name": name, "labels": labels}})
}

fn pod_named(name: &str, privileged: bool, owner: Option<&str>) -> Value {
    let mut pod = json!({"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "x",
        "securityContext": {"privileged": privileged}}]}});
    if let Some(uid) = owner {
        pod["metadata"]["ownerReferences"] = json!([{"uid": uid, "controller": true}]);
    }
    pod
}

#[test]
fn namespace_labels_are_validated() {
    let bad = namespace("n", json!({"pod-security.kubernetes.io/enforce": "strict"}));
    let causes = namespace_review(&bad, None).unwrap_err();
    assert_eq!(
        causes[0].0,
        "metadata.labels[pod-security.kubernetes.io/enforce]"
    );
    // An update that keeps the same invalid labels passes; one that changes them does not.
    let mut same = bad.clone();
    same["metadata"]["labels"]["other"] = json!("x");
    assert_eq!(namespace_review(&same, Some(&bad)), Ok(None));
    let worse = namespace(
        "n",
        json!({"pod-security.kubernetes.io/enforce": "stricter"}),
    );
    assert!(namespace_review(&worse, Some(&bad)).is_err());
    let fresh = namespace("n", json!({}));
    assert!(namespace_review(&bad, Some(&fresh)).is_err());
    assert_eq!(namespace_review(&fresh, None), Ok(None));
}

#[test]
fn tightening_enforce_checks_existing_pods() {
    let old = namespace("n", json!({}));
    let new = namespace("n", labels("baseline", ""));
    let tightened = namespace_review(&new, Some(&old)).unwrap();
    assert_eq!(tightened, Some(lv(Level::Baseline, Version::Latest)));
    let pods = [
        pod_named("zeta", true, None),
        pod_named("alpha", true, None),
        pod_named("fine", false, None),
        pod_named("web-1", true, Some("rs")),
        pod_named("web-2", true, Some("rs")),
    ];
    assert_eq!(
        existing_pod_warnings(&Configuration::default(), "n", tightened.unwrap(), pods.iter().collect()),
        vec![
            r#"existing pods in namespace "n" violate the new PodSecurity enforce level "baseline:latest""#.to_owned(),
            "alpha (and 3 other pods): privileged".to_owned(),
        ]
    );
    // Relaxing, keeping, or going privileged does not look at pods.
    assert_eq!(namespace_review(&old, Some(&new)), Ok(None));
    assert_eq!(namespace_review(&new, Some(&new)), Ok(None));
    let privileged_ns = namespace("n", labels("privileged", ""));
    assert_eq!(namespace_review(&privileged_ns, Some(&new)), Ok(None));
    let restricted_ns = namespace("n", labels("restricted", ""));
    assert_eq!(namespace_review(&new, Some(&restricted_ns)), Ok(None));
    // A version change at the same level does.
    let mut pinned = new.clone();
    pinned["metadata"]["labels"][ENFORCE_VERSION_LABEL] = json!("v1.20");
    assert_eq!(
        namespace_review(&pinned, Some(&new)),
        Ok(Some(lv(Level::Baseline, Version::Minor(20))))
    );
    // No violations, no warnings.
    assert!(
        existing_pod_warnings(
            &Configuration::default(),
            "n",
            lv(Level::Baseline, Version::Latest),
            vec![&pods[2]]
        )
        .is_empty()
    );
}

#[test]
fn existing_pod_warnings_group_and_bound() {
    let one = [pod_named("a", true, None)];
    assert_eq!(
        existing_pod_warnings(
            &Configuration::default(),
            "n",
            lv(Level::Baseline, Version::Latest),
            one.iter().collect()
        )[1],
        "a: privileged"
    );
    let two = [pod_named("b", true, None), pod_named("a", true, None)];
    assert_eq!(
        existing_pod_warnings(
            &Configuration::default(),
            "n",
            lv(Level::Baseline, Version::Latest),
            two.iter().collect()
        )[1],
        "a (and 1 other pod): privileged"
    );
    let many: Vec<Value> = (0..NAMESPACE_MAX_PODS_TO_CHECK + 2)
        .map(|i| pod_named(&format!("p{i}"), false, None))
        .collect();
    let warnings = existing_pod_warnings(
        &Configuration::default(),
        "n",
        lv(Level::Baseline, Version::Latest),
        many.iter().collect(),
    );
    assert_eq!(
        warnings,
        vec![format!(
            "new PodSecurity enforce level only checked against the first {NAMESPACE_MAX_PODS_TO_CHECK} of {} existing pods",
            NAMESPACE_MAX_PODS_TO_CHECK + 2
        )]
    );
    // One pod per controller first: the controller's second pod is checked last.
    let pods = [
        pod_named("r1", false, Some("u")),
        pod_named("r2", true, Some("u")),
        pod_named("solo", false, None),
    ];
    let order: Vec<String> = prioritized(pods.iter().collect())
        .iter()
        .map(|p| name_of(&p["metadata"]))
        .collect();
    assert_eq!(order, ["r1", "solo", "r2"]);
}

#[test]
fn audit_annotations_are_kubes() {
    let pod =
        json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}});
    let audited = json!({"pod-security.kubernetes.io/audit": "baseline",
        "pod-security.kubernetes.io/enforce": "privileged"});
    // A pod that meets baseline: the enforced policy only.
    assert_eq!(
        annotations_of(Some(&audited), "", "pods", "", None, &pod),
        [("enforce-policy", "privileged:latest".to_owned())]
    );
    let host = json!({"metadata": {"name": "p"},
        "spec": {"hostNetwork": true, "containers": [{"name": "c", "image": "i"}]}});
    assert_eq!(
        annotations_of(Some(&audited), "", "pods", "", None, &host),
        [
            ("enforce-policy", "privileged:latest".to_owned()),
            (
                "audit-violations",
                "would violate PodSecurity \"baseline:latest\": host namespaces (hostNetwork=true)"
                    .to_owned()
            )
        ]
    );
    // Unlabelled (fully privileged): kube's shared answer; ignored subresources: nothing.
    assert_eq!(
        annotations_of(None, "", "pods", "", None, &host),
        [("enforce-policy", "privileged:latest".to_owned())]
    );
    assert!(annotations_of(Some(&audited), "", "pods", "status", None, &host).is_empty());
    // A workload's template: the audit violations, no enforced policy.
    let deployment = json!({"spec": {"template": host.clone()}});
    let annotations = annotations_of(Some(&audited), "apps", "deployments", "", None, &deployment);
    assert_eq!(annotations.len(), 1);
    assert_eq!(annotations[0].0, "audit-violations");
    assert!(annotations_of(Some(&audited), "", "configmaps", "", None, &json!({})).is_empty());
}

/// A configuration: baseline enforced by default, `kube-system`, the replica set controller
/// and the `kata` runtime class exempt.
fn configured() -> Configuration {
    Configuration::from_value(&json!({
        "apiVersion": "pod-security.admission.config.k8s.io/v1",
        "kind": "PodSecurityConfiguration",
        "defaults": {"enforce": "baseline", "audit": "restricted", "warn": "restricted"},
        "exemptions": {"namespaces": ["kube-system"], "runtimeClasses": ["kata"],
            "usernames": ["system:serviceaccount:kube-system:replicaset-controller"]},
    }))
    .unwrap()
}

fn privileged_pod(namespace: &str, runtime_class: Option<&str>) -> Value {
    let mut pod = json!({"metadata": {"name": "p", "namespace": namespace},
        "spec": {"containers": [{"name": "c", "image": "x", "securityContext": {"privileged": true}}]}});
    if let Some(class) = runtime_class {
        pod["spec"]["runtimeClassName"] = json!(class);
    }
    pod
}

#[test]
fn the_configurations_defaults_apply_to_modes_without_labels() {
    let config = configured();
    let pod = privileged_pod("apps", None);
    let unlabelled = write(None, ("", "pods", ""), None, &pod);
    let refusal = admit_pod(&config, &unlabelled).refusal.unwrap();
    assert!(
        refusal.starts_with(r#"violates PodSecurity "baseline:latest": privileged"#),
        "{refusal}"
    );
    // A label overrides its own mode only; the warn default stays restricted.
    let labels = json!({ENFORCE_LEVEL_LABEL: "privileged"});
    let labelled = write(Some(&labels), ("", "pods", ""), None, &pod);
    let decision = admit_pod(&config, &labelled);
    assert_eq!(decision.refusal, None);
    assert!(decision.warnings[0].starts_with(r#"would violate PodSecurity "restricted:latest""#));
    let annotations = audit_annotations(&config, &labelled);
    assert_eq!(
        annotations[0],
        ("enforce-policy", "privileged:latest".to_owned())
    );
    assert!(
        annotations[1]
            .1
            .starts_with(r#"would violate PodSecurity "restricted:latest""#)
    );
    // Templates are warned at the default warn level.
    let deployment = json!({"metadata": {"namespace": "apps"},
        "spec": {"template": {"metadata": {}, "spec": pod["spec"].clone()}}});
    let template = write(None, ("apps", "deployments", ""), None, &deployment);
    assert!(
        admit_template(&config, &template).warnings[0]
            .starts_with(r#"would violate PodSecurity "restricted:latest""#)
    );
}

#[test]
fn exempt_namespaces_users_and_runtime_classes_are_not_evaluated() {
    let config = configured();
    let in_kube_system = privileged_pod("kube-system", None);
    let kata = privileged_pod("apps", Some("kata"));
    let plain = privileged_pod("apps", None);
    let cases: [(&str, &Value, &str); 3] = [
        ("admin", &in_kube_system, "namespace"),
        (
            "system:serviceaccount:kube-system:replicaset-controller",
            &plain,
            "user",
        ),
        ("admin", &kata, "runtimeClass"),
    ];
    for (user, pod, reason) in cases {
        let mut attrs = write(None, ("", "pods", ""), None, pod);
        attrs.user = user;
        assert_eq!(admit_pod(&config, &attrs), Decision::default(), "{reason}");
        assert_eq!(
            audit_annotations(&config, &attrs),
            vec![("exempt", reason.to_owned())]
        );
        let deployment = json!({"metadata": {"namespace": pod["metadata"]["namespace"]},
            "spec": {"template": {"metadata": {}, "spec": pod["spec"].clone()}}});
        let mut template = write(None, ("apps", "deployments", ""), None, &deployment);
        template.user = user;
        assert_eq!(
            admit_template(&config, &template),
            Decision::default(),
            "{reason}"
        );
    }
    // Names match exactly: another runtime class, another user are evaluated.
    let other = privileged_pod("apps", Some("gvisor"));
    let attrs = write(None, ("", "pods", ""), None, &other);
    assert!(admit_pod(&config, &attrs).refusal.is_some());
    // An ignored subresource has no exemption annotation either.
    let status = write(None, ("", "pods", "status"), None, &in_kube_system);
    assert!(audit_annotations(&config, &status).is_empty());
}

#[test]
fn an_exempt_namespace_tightened_is_warned_that_its_policy_is_ignored() {
    let config = configured();
    let old = json!({"metadata": {"name": "kube-system"}});
    let new = json!({"metadata": {"name": "kube-system",
        "labels": {ENFORCE_LEVEL_LABEL: "restricted", WARN_LEVEL_LABEL: "restricted"}}});
    assert_eq!(
        admit_namespace(&config, &new, Some(&old)),
        Ok(NamespaceReview::Exempt(
            r#"namespace "kube-system" is exempt from Pod Security, and the policy (enforce=restricted:latest, warn=restricted:latest) will be ignored"#
                .to_owned()
        ))
    );
    // A create is never exempt (kube's request namespace is empty), and an exempt namespace's
    // labels equivalent to the defaults warn of nothing.
    assert_eq!(
        admit_namespace(&config, &new, None),
        Ok(NamespaceReview::Allowed)
    );
    // Another namespace tightened past the default enforce level has its pods checked.
    let apps = json!({"metadata": {"name": "apps", "labels": {ENFORCE_LEVEL_LABEL: "restricted"}}});
    assert_eq!(
        admit_namespace(&config, &apps, Some(&json!({"metadata": {"name": "apps"}}))),
        Ok(NamespaceReview::CheckPods(lv(
            Level::Restricted,
            Version::Latest
        )))
    );
    // Its pods of an exempt runtime class are not counted.
    let pods = [
        privileged_pod("apps", Some("kata")),
        privileged_pod("apps", None),
    ];
    let warnings = existing_pod_warnings(
        &config,
        "apps",
        lv(Level::Restricted, Version::Latest),
        pods.iter().collect(),
    );
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(warnings[1].starts_with("p: "), "{warnings:?}");
    let only_kata = existing_pod_warnings(
        &config,
        "apps",
        lv(Level::Restricted, Version::Latest),
        vec![&pods[0]],
    );
    assert!(only_kata.is_empty());
}

//! Tests of [`super::pod_spec`]: kube's causes, paths and order for pod specs and templates,
//! on objects defaulted as the write path defaults them.

use serde_json::{Value, json};

use super::validate;
use crate::resources::{ResourceDef, builtin_resources};

fn def(group: &str, plural: &str) -> ResourceDef {
    builtin_resources()
        .into_iter()
        .find(|d| d.group == group && d.plural == plural)
        .unwrap()
}

/// The causes (`field: message`) of `object` once defaulted, empty when it is valid.
fn causes(group: &str, plural: &str, mut object: Value) -> Vec<String> {
    let def = def(group, plural);
    crate::defaults::apply_defaults(&def, &mut object);
    match validate(&def, &object, None) {
        Ok(()) => Vec::new(),
        Err(err) => {
            assert_eq!(err.code, 422);
            err.details.as_ref().unwrap()["causes"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| {
                    format!(
                        "{}: {}",
                        c["field"].as_str().unwrap(),
                        c["message"].as_str().unwrap()
                    )
                })
                .collect()
        }
    }
}

fn pod(spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec})
}

/// A pod of one container `c` with the given fields added.
fn pod_with(container: Value) -> Value {
    let mut c = json!({"name": "c", "image": "nginx:1.27"});
    for (k, v) in container.as_object().unwrap() {
        c[k] = v.clone();
    }
    pod(json!({"containers": [c]}))
}

#[test]
fn the_bad_pods_users_meet_are_refused_in_kubes_words() {
    let cases = [
        (
            json!({"resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}}),
            "spec.containers[0].resources.requests: Invalid value: \"2\": must be less than or equal to cpu limit of 1",
        ),
        (
            json!({"env": [{"name": ""}]}),
            "spec.containers[0].env[0].name: Required value",
        ),
        (
            json!({"volumeMounts": [{"name": "data", "mountPath": "/data"}]}),
            "spec.containers[0].volumeMounts[0].name: Not found: \"data\"",
        ),
        (
            json!({"livenessProbe": {"periodSeconds": -1, "exec": {"command": ["true"]}}}),
            "spec.containers[0].livenessProbe.periodSeconds: Invalid value: -1: must be greater than or equal to 0",
        ),
        (
            json!({"securityContext": {"runAsUser": -5}}),
            "spec.containers[0].securityContext.runAsUser: Invalid value: -5: must be between 0 and 2147483647, inclusive",
        ),
        (
            json!({"imagePullPolicy": "Sometimes"}),
            "spec.containers[0].imagePullPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"IfNotPresent\", \"Never\"",
        ),
        (
            json!({"terminationMessagePolicy": "Maybe"}),
            "spec.containers[0].terminationMessagePolicy: Unsupported value: \"Maybe\": supported values: \"File\", \"FallbackToLogsOnError\"",
        ),
    ];
    for (container, expected) in cases {
        assert_eq!(
            causes("", "pods", pod_with(container.clone())),
            [expected],
            "{container}"
        );
    }
    // A volume naming no source is defaulted to an `emptyDir` first (kube's
    // `SetDefaults_Volume`), so kube never answers `must specify a volume type` for it.
    let no_source = pod(json!({"containers": [{"name": "c", "image": "x"}],
        "volumes": [{"name": "v"}]}));
    assert!(causes("", "pods", no_source).is_empty());
    let bogus_dns = pod(json!({"containers": [{"name": "c", "image": "x"}], "dnsPolicy": "Bogus"}));
    assert_eq!(
        causes("", "pods", bogus_dns),
        [
            "spec.dnsPolicy: Unsupported value: \"Bogus\": supported values: \"ClusterFirstWithHostNet\", \"ClusterFirst\", \"Default\", \"None\""
        ]
    );
}

#[test]
fn a_realistic_valid_pod_and_deployment_pass() {
    let spec = json!({
        "volumes": [
            {"name": "config", "configMap": {"name": "app", "items": [{"key": "a", "path": "a.conf"}]}},
            {"name": "secret", "secret": {"secretName": "s", "defaultMode": 0o400}},
            {"name": "cache", "emptyDir": {"sizeLimit": "1Gi"}},
            {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
            {"name": "info", "downwardAPI": {"items": [{"path": "labels",
                "fieldRef": {"fieldPath": "metadata.labels"}}]}},
            {"name": "all", "projected": {"sources": [
                {"configMap": {"name": "x"}},
                {"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}}]}},
            {"name": "host", "hostPath": {"path": "/var/log", "type": "Directory"}}
        ],
        "initContainers": [{"name": "init", "image": "busybox", "command": ["true"]},
            {"name": "sidecar", "image": "envoy", "restartPolicy": "Always",
             "readinessProbe": {"tcpSocket": {"port": 9901}}}],
        "containers": [{
            "name": "app", "image": "example/app:1.2",
            "ports": [{"name": "http", "containerPort": 8080}, {"containerPort": 9090, "protocol": "UDP"}],
            "env": [{"name": "MODE", "value": "prod"}, {"name": "my.weird-NAME:1", "value": "x"},
                {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "CPU", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
                {"name": "PASS", "valueFrom": {"secretKeyRef": {"name": "s", "key": "password"}}}],
            "envFrom": [{"configMapRef": {"name": "app"}, "prefix": "APP_"}],
            "volumeMounts": [{"name": "config", "mountPath": "/etc/app"},
                {"name": "data", "mountPath": "/data", "subPath": "app"},
                {"name": "cache", "mountPath": "/cache"}],
            "resources": {"requests": {"cpu": "250m", "memory": "64Mi"},
                "limits": {"cpu": "1", "memory": "128Mi", "example.com/gpu": "1"}},
            "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http"}, "initialDelaySeconds": 5},
            "readinessProbe": {"grpc": {"port": 9090}},
            "startupProbe": {"exec": {"command": ["cat", "/tmp/ready"]}, "failureThreshold": 30},
            "lifecycle": {"preStop": {"sleep": {"seconds": 5}}},
            "securityContext": {"runAsUser": 1000, "runAsNonRoot": true,
                "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]},
                "seccompProfile": {"type": "RuntimeDefault"}}
        }],
        "securityContext": {"fsGroup": 2000, "sysctls": [{"name": "net.core.somaxconn", "value": "1024"}]},
        "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"},
            {"operator": "Exists"}, {"key": "a", "value": "b", "effect": "NoExecute", "tolerationSeconds": 30}],
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}},
            "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 50,
                "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname",
                    "labelSelector": {"matchLabels": {"app": "web"}}}}]}},
        "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone",
            "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {"matchLabels": {"app": "web"}}}],
        "dnsPolicy": "None", "dnsConfig": {"nameservers": ["10.0.0.10"], "searches": ["svc.cluster.local."],
            "options": [{"name": "ndots", "value": "2"}]},
        "hostAliases": [{"ip": "127.0.0.1", "hostnames": ["foo.local"]}],
        "serviceAccountName": "app", "priorityClassName": "high", "hostname": "web-0", "subdomain": "web"
    });
    assert_eq!(causes("", "pods", pod(spec.clone())), Vec::<String>::new());
    let deployment = json!({"metadata": {"name": "d"}, "spec": {
        "selector": {"matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["db"]}]},
        "template": {"metadata": {"labels": {"app": "web"}}, "spec": spec}}});
    assert_eq!(
        causes("apps", "deployments", deployment),
        Vec::<String>::new()
    );
}

#[test]
fn templates_report_their_paths_and_cronjobs_are_checked() {
    let deployment = json!({"metadata": {"name": "d"}, "spec": {
        "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
            {"name": "c", "image": "x", "env": [{"name": "A=B"}],
             "resources": {"requests": {"memory": "-1"}}}]}}}});
    assert_eq!(
        causes("apps", "deployments", deployment),
        [
            "spec.template.spec.containers[0].env[0].name: Invalid value: \"A=B\": a valid environment variable name must consist only of printable ASCII characters other than '='",
            "spec.template.spec.containers[0].resources.requests[memory]: Invalid value: \"-1\": must be greater than or equal to 0",
        ]
    );
    let cron = json!({"metadata": {"name": "c"}, "spec": {"schedule": "* * * * *",
        "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "c", "image": "x", "ports": [{"containerPort": 80, "protocol": "HTTP"}]}]}}}}}});
    assert_eq!(
        causes("batch", "cronjobs", cron),
        [
            "spec.jobTemplate.spec.template.spec.containers[0].ports[0].protocol: Unsupported value: \"HTTP\": supported values: \"SCTP\", \"TCP\", \"UDP\""
        ]
    );
}

#[test]
fn containers_follow_kubes_order_of_checks() {
    let spec = json!({"volumes": [{"name": "v", "emptyDir": {}, "hostPath": {"path": "/x"}},
            {"name": "Bad_Name", "secret": {"defaultMode": 1000, "items": [{"key": "", "path": "/abs"}]}}],
        "containers": [
        {"name": "a", "image": "x",
         "ports": [{"name": "this-name-is-far-too-long", "containerPort": 0}, {"containerPort": 80, "hostPort": 70000}],
         "env": [{"name": "X", "value": "1", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                 {"name": "Y", "valueFrom": {}}],
         "envFrom": [{}],
         "volumeMounts": [{"name": "v", "mountPath": "/m", "subPath": "../up"}, {"name": "v", "mountPath": "/m"}],
         "resources": {"requests": {"example.com/gpu": "1", "gpu": "1"}},
         "readinessProbe": {"exec": {"command": ["x"]}, "httpGet": {"port": 0}, "successThreshold": 3},
         "livenessProbe": {"successThreshold": 2},
         "securityContext": {"privileged": true, "allowPrivilegeEscalation": false}},
        {"name": "a", "image": "y", "restartPolicy": "Always"}],
        "initContainers": [{"name": "i", "image": "x", "restartPolicy": "OnFailure",
            "startupProbe": {"tcpSocket": {"port": "http"}}}]});
    let found = causes("", "pods", pod(spec));
    let expected = [
        "spec.volumes[0].hostPath: Forbidden: may not specify more than 1 volume type",
        "spec.volumes[1].secret.secretName: Required value",
        "spec.volumes[1].secret.defaultMode: Invalid value: 1000: must be a number between 0 and 0777 (octal), both inclusive",
        "spec.volumes[1].secret.items[0].key: Required value",
        "spec.volumes[1].secret.items[0].path: Invalid value: \"/abs\": must be a relative path",
        "spec.volumes[1].name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
        "spec.containers[0].ports[0].name: Invalid value: \"this-name-is-far-too-long\": must be no more than 15 characters",
        "spec.containers[0].ports[0].containerPort: Required value",
        "spec.containers[0].ports[1].hostPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
        "spec.containers[0].env[0].valueFrom: Invalid value: \"\": may not be specified when `value` is not empty",
        "spec.containers[0].env[1].valueFrom: Invalid value: \"\": must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`",
        "spec.containers[0].envFrom: Invalid value: \"\": must specify one of: `configMapRef` or `secretRef`",
        "spec.containers[0].volumeMounts[0].name: Not found: \"v\"",
        "spec.containers[0].volumeMounts.subPath: Invalid value: \"../up\": must not contain '..'",
        "spec.containers[0].volumeMounts[1].name: Not found: \"v\"",
        "spec.containers[0].volumeMounts[1].mountPath: Invalid value: \"/m\": must be unique",
        "spec.containers[0].resources.limits: Required value: Limit must be set for non overcommitable resources",
        "spec.containers[0].resources.requests[gpu]: Invalid value: gpu: must be a standard resource type or fully qualified",
        "spec.containers[0].resources.requests[gpu]: Invalid value: gpu: must be a standard resource for containers",
        "spec.containers[0].securityContext: Invalid value: {\"allowPrivilegeEscalation\":false,\"privileged\":true}: cannot set `allowPrivilegeEscalation` to false and `privileged` to true",
        "spec.containers[0].livenessProbe: Required value: must specify a handler type",
        "spec.containers[0].livenessProbe.successThreshold: Invalid value: 2: must be 1",
        "spec.containers[0].readinessProbe.httpGet: Forbidden: may not specify more than 1 handler type",
        "spec.containers[1].name: Duplicate value: \"a\"",
        "spec.containers[1].restartPolicy: Forbidden: may not be set for non-init containers",
        "spec.initContainers[0].restartPolicy: Unsupported value: \"OnFailure\": supported values: \"Always\"",
        "spec.initContainers[0].startupProbe: Forbidden: may not be set for init containers without restartPolicy=Always",
    ];
    assert_eq!(found, expected);
}

#[test]
fn pod_level_fields_follow_kube() {
    let spec = json!({"containers": [{"name": "c", "image": "x"}],
        "restartPolicy": "Sometimes", "terminationGracePeriodSeconds": 30,
        "nodeSelector": {"bad key!": "v"},
        "securityContext": {"runAsGroup": -1, "sysctls": [{"name": "Not_Valid"}]},
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "Near"}]}]}}},
        "dnsPolicy": "None",
        "topologySpreadConstraints": [{"maxSkew": 0, "topologyKey": "", "whenUnsatisfiable": "Never"}],
        "activeDeadlineSeconds": 0, "hostname": "Web",
        "tolerations": [{"operator": "Equal", "value": "x"}, {"key": "k", "operator": "Exists", "value": "v"},
            {"key": "k", "operator": "Maybe", "effect": "Soon"}]});
    let found = causes("", "pods", pod(spec));
    let expected = [
        "spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"",
        "spec.nodeSelector: Invalid value: \"bad key!\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
        "spec.securityContext.runAsGroup: Invalid value: -1: must be between 0 and 2147483647, inclusive",
        "spec.securityContext.sysctls[0].name: Invalid value: \"Not_Valid\": must have at most 253 characters and match regex ^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$",
        "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator: Invalid value: \"Near\": not a valid selector operator",
        "spec.dnsConfig: Required value: must provide `dnsConfig` when `dnsPolicy` is None",
        "spec.topologySpreadConstraints[0].maxSkew: Invalid value: 0: must be greater than zero",
        "spec.topologySpreadConstraints[0].topologyKey: Required value: can not be empty",
        "spec.topologySpreadConstraints[0].whenUnsatisfiable: Unsupported value: \"Never\": supported values: \"DoNotSchedule\", \"ScheduleAnyway\"",
        "spec.activeDeadlineSeconds: Invalid value: 0: must be between 1 and 2147483647, inclusive",
        "spec.hostname: Invalid value: \"Web\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
        "spec.tolerations[0].operator: Invalid value: \"Equal\": operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
        "spec.tolerations[1].operator: Invalid value: \"v\": value must be empty when `operator` is 'Exists'",
        "spec.tolerations[2].operator: Unsupported value: \"Maybe\": supported values: \"Equal\", \"Exists\"",
        "spec.tolerations[2].effect: Unsupported value: \"Soon\": supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\"",
    ];
    assert_eq!(found, expected);
}

#[test]
fn workload_selectors_are_label_selectors() {
    let deployment = json!({"metadata": {"name": "d"}, "spec": {
        "selector": {"matchLabels": {"app": "web"}, "matchExpressions": [
            {"key": "a", "operator": "In"}, {"key": "b", "operator": "Exists", "values": ["x"]},
            {"key": "c", "operator": "Like", "values": ["x"]}]},
        "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}});
    assert_eq!(
        causes("apps", "deployments", deployment),
        [
            "spec.selector.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'",
            "spec.selector.matchExpressions[1].values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            "spec.selector.matchExpressions[2].operator: Invalid value: \"Like\": not a valid selector operator",
            "spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{\"app\":\"web\"}, MatchExpressions:[]v1.LabelSelectorRequirement{v1.LabelSelectorRequirement{Key:\"a\", Operator:\"In\", Values:[]string(nil)}, v1.LabelSelectorRequirement{Key:\"b\", Operator:\"Exists\", Values:[]string{\"x\"}}, v1.LabelSelectorRequirement{Key:\"c\", Operator:\"Like\", Values:[]string{\"x\"}}}}: invalid label selector",
        ]
    );
}

#[test]
fn wrong_json_types_do_not_panic() {
    let odd = [
        json!(null),
        json!(1),
        json!("x"),
        json!([1, "a", null, {}]),
        json!({"a": [1]}),
    ];
    let keys = [
        "containers",
        "initContainers",
        "ephemeralContainers",
        "volumes",
        "securityContext",
        "affinity",
        "tolerations",
        "dnsConfig",
        "topologySpreadConstraints",
        "hostAliases",
        "nodeSelector",
        "restartPolicy",
        "activeDeadlineSeconds",
        "readinessGates",
        "schedulingGates",
        "os",
        "preemptionPolicy",
        "runtimeClassName",
    ];
    let container_keys = [
        "ports",
        "env",
        "envFrom",
        "volumeMounts",
        "volumeDevices",
        "resources",
        "livenessProbe",
        "readinessProbe",
        "startupProbe",
        "lifecycle",
        "securityContext",
        "restartPolicy",
        "name",
        "image",
    ];
    for value in &odd {
        for key in keys {
            let mut spec = json!({"containers": [{"name": "c", "image": "x"}]});
            spec[key] = value.clone();
            let _ = causes("", "pods", pod(spec));
        }
        for key in container_keys {
            let mut container = json!({"name": "c", "image": "x"});
            container[key] = value.clone();
            let _ = causes(
                "",
                "pods",
                pod(json!({"containers": [container],
                "initContainers": [container.clone()], "ephemeralContainers": [container.clone()]})),
            );
        }
    }
    let _ = causes("", "pods", json!({"spec": "nope"}));
    let _ = causes("", "pods", json!([]));
}

/// A pod of the given spec fields and one container `c` with `container`'s fields added.
fn pod_of(spec: Value, container: Value) -> Value {
    let mut pod = pod_with(container);
    for (k, v) in spec.as_object().unwrap() {
        pod["spec"][k] = v.clone();
    }
    pod
}

#[test]
fn resize_policies_follow_kube() {
    let at = "spec.containers[0].resizePolicy";
    let ok = json!({"resizePolicy": [
        {"resourceName": "cpu", "restartPolicy": "NotRequired"},
        {"resourceName": "memory", "restartPolicy": "RestartContainer"}]});
    assert_eq!(causes("", "pods", pod_with(ok)), Vec::<String>::new());
    let cases = [
        (
            json!([{"resourceName": "cpu", "restartPolicy": "NotRequired"},
                {"resourceName": "cpu", "restartPolicy": "RestartContainer"}]),
            vec![format!("{at}[1]: Duplicate value: \"cpu\"")],
        ),
        (
            json!([{"resourceName": "storage", "restartPolicy": "NotRequired"}]),
            vec![format!(
                "{at}: Unsupported value: \"storage\": supported values: \"cpu\", \"memory\""
            )],
        ),
        (
            json!([{"restartPolicy": "NotRequired"}]),
            vec![format!("{at}: Required value")],
        ),
        (
            json!([{"resourceName": "memory", "restartPolicy": "Sometimes"}]),
            vec![format!(
                "{at}: Unsupported value: \"Sometimes\": supported values: \"NotRequired\", \"RestartContainer\""
            )],
        ),
        (
            json!([{"resourceName": "memory"}]),
            vec![format!("{at}: Required value")],
        ),
    ];
    for (policy, expected) in cases {
        let pod = pod_with(json!({"resizePolicy": policy}));
        assert_eq!(causes("", "pods", pod), expected, "{policy}");
    }
    // A pod that never restarts may only resize without restarting.
    let never = pod_of(
        json!({"restartPolicy": "Never"}),
        json!({"resizePolicy": [{"resourceName": "cpu", "restartPolicy": "RestartContainer"},
            {"resourceName": "memory", "restartPolicy": "NotRequired"}]}),
    );
    assert_eq!(
        causes("", "pods", never),
        [format!(
            "{at}: Invalid value: \"RestartContainer\": must be 'NotRequired' when `restartPolicy` is 'Never'"
        )]
    );
    // Sidecars may resize (InPlacePodVerticalScaling is on in 1.33); ephemeral containers not.
    let sidecar = pod(json!({"containers": [{"name": "c", "image": "x"}],
        "initContainers": [{"name": "s", "image": "x", "restartPolicy": "Always",
            "resizePolicy": [{"resourceName": "cpu", "restartPolicy": "NotRequired"}]}]}));
    assert_eq!(causes("", "pods", sidecar), Vec::<String>::new());
}

#[test]
fn overhead_is_checked_as_container_limits() {
    let bad = pod_of(
        json!({"overhead": {"cpu": "-1", "memory": "10Mi", "bad name": "1"}}),
        json!({}),
    );
    let got = causes("", "pods", bad);
    assert_eq!(got.len(), 3, "{got:?}");
    assert!(
        got[0]
            .starts_with("spec.overhead.limits[bad name]: Invalid value: \"bad name\": name part")
    );
    assert_eq!(
        got[1..],
        [
            "spec.overhead.limits[bad name]: Invalid value: bad name: must be a standard resource for containers",
            "spec.overhead.limits[cpu]: Invalid value: \"-1\": must be greater than or equal to 0",
        ]
    );
    let ok = pod_of(
        json!({"overhead": {"cpu": "250m", "memory": "120Mi"}}),
        json!({}),
    );
    assert_eq!(causes("", "pods", ok), Vec::<String>::new());
}

#[test]
fn fields_of_gates_off_in_133_are_dropped_not_validated() {
    // DynamicResourceAllocation (beta, off) and PodLevelResources (alpha) in kube 1.33.
    let mut object = pod_of(
        json!({"resourceClaims": [{"name": ""}, {"name": "Bad"}],
            "resources": {"limits": {"cpu": "-1"}}}),
        json!({"resources": {"claims": [{"name": "nowhere"}], "limits": {"cpu": "1"}}}),
    );
    assert_eq!(causes("", "pods", object.clone()), Vec::<String>::new());
    crate::defaults::apply_defaults(&def("", "pods"), &mut object);
    assert!(object["spec"].get("resourceClaims").is_none(), "{object}");
    assert!(object["spec"].get("resources").is_none(), "{object}");
    let resources = &object["spec"]["containers"][0]["resources"];
    assert!(resources.get("claims").is_none(), "{resources}");
    assert_eq!(resources["limits"]["cpu"], "1");
    // Templates too.
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"a": "b"}},
        "template": {"metadata": {"labels": {"a": "b"}}, "spec": {
            "resourceClaims": [{"name": ""}],
            "containers": [{"name": "c", "image": "x",
                "resources": {"claims": [{"name": "nowhere"}]}}]}}}});
    assert_eq!(
        causes("apps", "deployments", deployment),
        Vec::<String>::new()
    );
}

#[test]
fn windows_host_process_pods_follow_kube() {
    let hp = |v: bool| json!({"windowsOptions": {"hostProcess": v}});
    let mismatch = pod_of(
        json!({"securityContext": hp(true), "hostNetwork": true}),
        json!({"securityContext": hp(false)}),
    );
    assert_eq!(
        causes("", "pods", mismatch),
        [
            "spec.containers[0].securityContext.windowsOptions.hostProcess: Invalid value: false: pod hostProcess value must be identical if both are specified, was true"
        ]
    );
    let partial = pod(json!({"hostNetwork": true, "containers": [
        {"name": "a", "image": "x", "securityContext": hp(true)},
        {"name": "b", "image": "x"}]}));
    assert_eq!(
        causes("", "pods", partial),
        [
            "spec: Invalid value: \"\": If pod contains any hostProcess containers then all containers must be HostProcess containers"
        ]
    );
    let no_host_network = pod_of(json!({"securityContext": hp(true)}), json!({}));
    assert_eq!(
        causes("", "pods", no_host_network),
        [
            "spec.hostNetwork: Invalid value: false: hostNetwork must be true if pod contains any hostProcess containers"
        ]
    );
    let ok = pod_of(
        json!({"securityContext": hp(true), "hostNetwork": true, "os": {"name": "windows"}}),
        json!({"securityContext": hp(true)}),
    );
    assert_eq!(causes("", "pods", ok), Vec::<String>::new());
}

#[test]
fn host_users_false_forbids_host_namespaces() {
    let shared = pod_of(
        json!({"hostUsers": false, "hostNetwork": true, "hostPID": true, "hostIPC": true}),
        json!({}),
    );
    assert_eq!(
        causes("", "pods", shared),
        [
            "spec.hostNetwork: Forbidden: when `pod.Spec.HostUsers` is false",
            "spec.HostPID: Forbidden: when `pod.Spec.HostUsers` is false",
            "spec.HostIPC: Forbidden: when `pod.Spec.HostUsers` is false",
        ]
    );
    // `hostUsers` is the spec's field: with it false an unmasked /proc is allowed.
    let unmasked = json!({"securityContext": {"procMount": "Unmasked"}});
    let own_namespace = pod_of(json!({"hostUsers": false}), unmasked.clone());
    assert_eq!(causes("", "pods", own_namespace), Vec::<String>::new());
    assert_eq!(
        causes("", "pods", pod_with(unmasked)),
        [
            "spec.containers[0].securityContext.procMount: Invalid value: \"Unmasked\": `hostUsers` must be false to use `Unmasked`"
        ]
    );
}

#[test]
fn each_os_forbids_the_others_fields() {
    let linux = pod_of(
        json!({"os": {"name": "linux"},
            "securityContext": {"windowsOptions": {"runAsUserName": "u"}}}),
        json!({"securityContext": {"windowsOptions": {}}}),
    );
    assert_eq!(
        causes("", "pods", linux),
        [
            "spec.securityContext.windowsOptions: Forbidden: windows options cannot be set for a linux pod",
            "spec.containers[0].securityContext.windowsOptions: Forbidden: windows options cannot be set for a linux pod",
        ]
    );
    let windows = pod(json!({"os": {"name": "windows"}, "hostPID": true,
        "shareProcessNamespace": false, "hostUsers": true,
        "securityContext": {"runAsUser": 1, "sysctls": [{"name": "kernel.shm_rmid_forced", "value": "0"}],
            "seccompProfile": {"type": "RuntimeDefault"}},
        "initContainers": [{"name": "i", "image": "x", "securityContext": {"runAsGroup": 2}}],
        "containers": [{"name": "c", "image": "x",
            "securityContext": {"privileged": false, "capabilities": {}}}]}));
    assert_eq!(
        causes("", "pods", windows),
        [
            "spec.hostUsers: Forbidden: cannot be set for a windows pod",
            "spec.hostPID: Forbidden: cannot be set for a windows pod",
            "spec.securityContext.seccompProfile: Forbidden: cannot be set for a windows pod",
            "spec.securityContext.sysctls: Forbidden: cannot be set for a windows pod",
            "spec.shareProcessNamespace: Forbidden: cannot be set for a windows pod",
            "spec.securityContext.runAsUser: Forbidden: cannot be set for a windows pod",
            "spec.initContainers[0].securityContext.runAsGroup: Forbidden: cannot be set for a windows pod",
            "spec.containers[0].securityContext.capabilities: Forbidden: cannot be set for a windows pod",
            "spec.containers[0].securityContext.privileged: Forbidden: cannot be set for a windows pod",
        ]
    );
    // An unsupported OS is the only complaint about it.
    let other = pod_of(json!({"os": {"name": "plan9"}, "hostPID": true}), json!({}));
    assert_eq!(
        causes("", "pods", other),
        ["spec.os: Unsupported value: \"plan9\": supported values: \"linux\", \"windows\""]
    );
}

#[test]
fn windows_options_follow_kube() {
    let at = "spec.containers[0].securityContext.windowsOptions";
    let user = |name: &str| json!({"securityContext": {"windowsOptions": {"runAsUserName": name}}});
    let cases = [
        ("", "runAsUserName cannot be an empty string"),
        ("a\u{7}b", "runAsUserName cannot contain control characters"),
        (
            "a\\b\\c",
            "runAsUserName cannot contain more than one backslash",
        ),
        ("Contoso\\", "runAsUserName's User cannot be empty"),
        (
            "...",
            "runAsUserName's User cannot contain only periods or spaces",
        ),
        (
            "a@b",
            "runAsUserName's User cannot contain the following characters: \"/\\:;|=,+*?<>@[]",
        ),
        (
            "a:b\\user",
            "runAsUserName's Domain doesn't match the NetBios nor the DNS format",
        ),
    ];
    for (name, message) in cases {
        let quoted = crate::field::go_quote(name);
        assert_eq!(
            causes("", "pods", pod_with(user(name))),
            [format!(
                "{at}.runAsUserName: Invalid value: {quoted}: {message}"
            )],
            "{name:?}"
        );
    }
    let long_user = "u".repeat(105);
    assert_eq!(
        causes("", "pods", pod_with(user(&long_user))),
        [format!(
            "{at}.runAsUserName: Invalid value: \"{long_user}\": runAsUserName's User length must not be longer than 104 characters"
        )]
    );
    for fine in [
        "Contoso\\User",
        "NT AUTHORITY\\NETWORK SERVICE",
        "corp.example.com\\svc",
        "svc",
    ] {
        assert_eq!(
            causes("", "pods", pod_with(user(fine))),
            Vec::<String>::new(),
            "{fine}"
        );
    }
    let gmsa = pod_of(
        json!({"securityContext": {"windowsOptions": {"gmsaCredentialSpec": ""}}}),
        json!({"securityContext": {"windowsOptions": {"gmsaCredentialSpecName": "Not_Valid"}}}),
    );
    let got = causes("", "pods", gmsa);
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(got[0].starts_with(&format!(
        "{at}.gmsaCredentialSpecName: Invalid value: \"Not_Valid\": a lowercase RFC 1123 subdomain"
    )));
    assert_eq!(
        got[1],
        "spec.securityContext.windowsOptions.gmsaCredentialSpec: Invalid value: \"\": gmsaCredentialSpec cannot be an empty string"
    );
}

#[test]
fn resource_field_divisors_follow_kube() {
    let env = |resource: &str, divisor: &str| {
        json!({"env": [{"name": "E", "valueFrom": {"resourceFieldRef":
            {"resource": resource, "divisor": divisor}}}]})
    };
    let at = "spec.containers[0].env[0].valueFrom.resourceFieldRef.divisor";
    let bytes = "1, 1k, 1M, 1G, 1T, 1P, 1E, 1Ki, 1Mi, 1Gi, 1Ti, 1Pi, 1Ei";
    let cases = [
        (
            "limits.cpu",
            "1Mi",
            "only divisor's values 1m and 1 are supported with the cpu resource".to_owned(),
        ),
        (
            "requests.memory",
            "3",
            format!("only divisor's values {bytes} are supported with the memory resource"),
        ),
        (
            "limits.ephemeral-storage",
            "1m",
            format!(
                "only divisor's values {bytes} are supported with the local ephemeral storage resource"
            ),
        ),
        (
            "requests.hugepages-2Mi",
            "2Mi",
            format!("only divisor's values {bytes} are supported with the hugepages resource"),
        ),
    ];
    for (resource, divisor, message) in cases {
        assert_eq!(
            causes("", "pods", pod_with(env(resource, divisor))),
            [format!("{at}: Invalid value: \"{resource}\": {message}")],
            "{resource} / {divisor}"
        );
    }
    // Compared in canonical form; zero means unset.
    for (resource, divisor) in [
        ("limits.cpu", "1000m"),
        ("requests.cpu", "1m"),
        ("limits.memory", "1024Ki"),
        ("limits.memory", "0"),
        ("requests.hugepages-1Gi", "1Gi"),
    ] {
        assert_eq!(
            causes("", "pods", pod_with(env(resource, divisor))),
            Vec::<String>::new(),
            "{resource} / {divisor}"
        );
    }
    let volume = pod(json!({"containers": [{"name": "c", "image": "x"}],
        "volumes": [{"name": "v", "downwardAPI": {"items": [{"path": "cpu",
            "resourceFieldRef": {"containerName": "c", "resource": "limits.cpu", "divisor": "2"}}]}}]}));
    assert_eq!(
        causes("", "pods", volume),
        // kube's path for a downward API volume's items has no index.
        [
            "spec.volumes[0].downwardAPI.resourceFieldRef.divisor: Invalid value: \"limits.cpu\": only divisor's values 1m and 1 are supported with the cpu resource"
        ]
    );
}

#[test]
fn pod_affinity_label_keys_follow_kube() {
    let term = |extra: Value| {
        let mut term = json!({"topologyKey": "zone"});
        for (k, v) in extra.as_object().unwrap() {
            term[k] = v.clone();
        }
        json!({"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}})
    };
    let at = "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]";
    let no_selector = pod_of(
        term(json!({"matchLabelKeys": ["app"], "mismatchLabelKeys": ["x"]})),
        json!({}),
    );
    assert_eq!(
        causes("", "pods", no_selector),
        [
            format!(
                "{at}.matchLabelKeys: Forbidden: must not be specified when labelSelector is not set"
            ),
            format!(
                "{at}.mismatchLabelKeys: Forbidden: must not be specified when labelSelector is not set"
            ),
        ]
    );
    let both = pod_of(
        term(
            json!({"labelSelector": {}, "matchLabelKeys": ["k", "bad key"], "mismatchLabelKeys": ["k"]}),
        ),
        json!({}),
    );
    let got = causes("", "pods", both);
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(
        got[0].starts_with(&format!(
            "{at}.matchLabelKeys[1]: Invalid value: \"bad key\": name part must consist of"
        )),
        "{got:?}"
    );
    assert_eq!(
        got[1],
        format!(
            "{at}.matchLabelKeys[0]: Invalid value: \"k\": exists in both matchLabelKeys and mismatchLabelKeys"
        )
    );
    let repeated = pod_of(
        term(json!({"labelSelector": {"matchLabels": {"k": "v"},
            "matchExpressions": [{"key": "k", "operator": "In", "values": ["v"]}]},
            "matchLabelKeys": ["k"]})),
        json!({}),
    );
    assert_eq!(
        causes("", "pods", repeated),
        [format!(
            "{at}[0]: Invalid value: \"k\": exists in both matchLabelKeys and labelSelector"
        )]
    );
    let fine = pod_of(
        term(json!({"labelSelector": {"matchLabels": {"app": "web"}},
            "matchLabelKeys": ["pod-template-hash"], "mismatchLabelKeys": ["tenant"]})),
        json!({}),
    );
    assert_eq!(causes("", "pods", fine), Vec::<String>::new());
}

#[test]
fn ips_are_read_as_kube_133_reads_them() {
    // StrictIPCIDRValidation is alpha (off) in 1.33: non-canonical forms pass.
    let aliases = |ip: &str| {
        json!({"hostAliases": [{"ip": ip, "hostnames": ["h"]}],
            "dnsPolicy": "None", "dnsConfig": {"nameservers": [ip]}})
    };
    for fine in ["010.001.002.003", "::ffff:1.2.3.4", "2001:db8::1"] {
        assert_eq!(
            causes("", "pods", pod_of(aliases(fine), json!({}))),
            Vec::<String>::new(),
            "{fine}"
        );
    }
    let message = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)";
    for bad in ["256.1.1.1", "1.2.3", "fe80::1%eth0", "host"] {
        assert_eq!(
            causes("", "pods", pod_of(aliases(bad), json!({}))),
            [
                format!("spec.dnsConfig.nameservers[0]: Invalid value: \"{bad}\": {message}"),
                format!("spec.hostAliases[0].ip: Invalid value: \"{bad}\": {message}"),
            ],
            "{bad}"
        );
    }
}

#[test]
fn seccomp_and_apparmor_annotations_follow_kube() {
    let annotated = |annotations: Value, spec: Value, container: Value| {
        let mut pod = pod_of(spec, container);
        pod["metadata"]["annotations"] = annotations;
        pod
    };
    let bad_values = annotated(
        json!({"seccomp.security.alpha.kubernetes.io/pod": "bogus",
            "container.seccomp.security.alpha.kubernetes.io/c": "localhost/../x",
            "container.apparmor.security.beta.kubernetes.io/nope": "bogus",
            "container.apparmor.security.beta.kubernetes.io/c": "localhost/profile"}),
        json!({}),
        json!({}),
    );
    assert_eq!(
        causes("", "pods", bad_values),
        [
            "metadata.annotations.seccomp.security.alpha.kubernetes.io/pod: Invalid value: \"bogus\": must be a valid seccomp profile",
            "metadata.annotations.container.seccomp.security.alpha.kubernetes.io/c: Invalid value: \"../x\": must not contain '..'",
            "metadata.annotations[container.apparmor.security.beta.kubernetes.io/nope]: Invalid value: \"nope\": container not found",
            "metadata.annotations[container.apparmor.security.beta.kubernetes.io/nope]: Invalid value: \"bogus\": invalid AppArmor profile name: \"bogus\"",
        ]
    );
    let mismatched = annotated(
        json!({"seccomp.security.alpha.kubernetes.io/pod": "unconfined",
            "container.seccomp.security.alpha.kubernetes.io/c": "localhost/a",
            "container.apparmor.security.beta.kubernetes.io/c": "localhost/b"}),
        json!({"securityContext": {"seccompProfile": {"type": "RuntimeDefault"},
            "appArmorProfile": {"type": "Localhost", "localhostProfile": "a"}}}),
        json!({"securityContext": {"seccompProfile": {"type": "Localhost", "localhostProfile": "b"}}}),
    );
    assert_eq!(
        causes("", "pods", mismatched),
        [
            "spec.securityContext.seccompProfile.type: Forbidden: seccomp type in annotation and field must match",
            "spec.containers[0].securityContext.seccompProfile.localhostProfile: Forbidden: seccomp profile in annotation and field must match",
            "spec.containers[0].securityContext.appArmorProfile.localhostProfile: Forbidden: apparmor profile in annotation and field must match",
        ]
    );
    let matching = annotated(
        json!({"seccomp.security.alpha.kubernetes.io/pod": "docker/default",
            "container.apparmor.security.beta.kubernetes.io/c": "runtime/default"}),
        json!({"securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}}),
        json!({"securityContext": {"appArmorProfile": {"type": "RuntimeDefault"}}}),
    );
    assert_eq!(causes("", "pods", matching), Vec::<String>::new());
    // Templates: the annotations' path is the template's, the fields' its spec's.
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"a": "b"}},
        "template": {"metadata": {"labels": {"a": "b"},
            "annotations": {"container.seccomp.security.alpha.kubernetes.io/c": "unconfined",
                "seccomp.security.alpha.kubernetes.io/pod": "nope"}},
        "spec": {"containers": [{"name": "c", "image": "x",
            "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}}]}}}});
    assert_eq!(
        causes("apps", "deployments", deployment),
        [
            "spec.template.annotations.seccomp.security.alpha.kubernetes.io/pod: Invalid value: \"nope\": must be a valid seccomp profile",
            "spec.template.spec.containers[0].securityContext.seccompProfile.type: Forbidden: seccomp type in annotation and field must match",
        ]
    );
}

#[test]
fn created_pods_merge_label_keys_into_affinity_selectors() {
    let term = |selector: Value, keys: Value, mismatch: Value| {
        json!({"labelSelector": selector, "matchLabelKeys": keys,
            "mismatchLabelKeys": mismatch, "topologyKey": "zone"})
    };
    let mut created = pod(json!({"containers": [{"name": "c", "image": "x"}],
        "affinity": {
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                term(json!({"matchLabels": {"app": "web"}}), json!(["pod-template-hash", "tenant"]), json!(["app"])),
                {"matchLabelKeys": ["tenant"], "topologyKey": "zone"}]},
            "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 1, "podAffinityTerm": term(json!({}), json!(["tenant"]), json!([]))}]}}}));
    created["metadata"]["labels"] = json!({"app": "web", "tenant": "a"});
    super::workloads::prepare_created(&def("", "pods"), &mut created);
    let affinity = &created["spec"]["affinity"];
    assert_eq!(
        affinity["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]["labelSelector"],
        json!({"matchLabels": {"app": "web"}, "matchExpressions": [
            {"key": "tenant", "operator": "In", "values": ["a"]},
            {"key": "app", "operator": "NotIn", "values": ["web"]}]})
    );
    // No selector: nothing to merge into (a nil selector matches nothing).
    assert!(
        affinity["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][1]
            .get("labelSelector")
            .is_none()
    );
    assert_eq!(
        affinity["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]
            ["labelSelector"],
        json!({"matchExpressions": [{"key": "tenant", "operator": "In", "values": ["a"]}]})
    );
    // The second term is refused for its keys without a selector, as kube does.
    assert_eq!(
        causes("", "pods", created),
        [
            "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[1].matchLabelKeys: Forbidden: must not be specified when labelSelector is not set"
        ]
    );
    // A key both in the selector and merged from matchLabelKeys is refused after the merge.
    let mut doubled = pod(json!({"containers": [{"name": "c", "image": "x"}],
        "affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            term(json!({"matchLabels": {"app": "web"}}), json!(["app"]), json!([]))]}}}));
    doubled["metadata"]["labels"] = json!({"app": "web"});
    super::workloads::prepare_created(&def("", "pods"), &mut doubled);
    assert_eq!(
        causes("", "pods", doubled),
        [
            "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0][0]: Invalid value: \"app\": exists in both matchLabelKeys and labelSelector"
        ]
    );
    // Without the label, nothing is added (not even an empty list).
    let mut unlabeled = pod(json!({"containers": [{"name": "c", "image": "x"}],
        "affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            term(json!({"matchLabels": {"app": "web"}}), json!(["app"]), json!([]))]}}}));
    let before = unlabeled.clone();
    super::workloads::prepare_created(&def("", "pods"), &mut unlabeled);
    assert_eq!(unlabeled, before);
}

/// kube's `applyAppArmorVersionSkew` on create: the documentation's `hello-apparmor.yaml`
/// (an annotation only) gets its container's field; `hello-apparmor-2.yaml` (a pod profile
/// only) gets each container's annotation.
#[test]
fn created_pods_sync_app_armor_annotations_and_fields() {
    const KEY: &str = "container.apparmor.security.beta.kubernetes.io/hello";
    let mut annotated = pod(json!({"containers": [{"name": "hello", "image": "busybox:1.28"}]}));
    annotated["metadata"]["annotations"] =
        json!({KEY: "localhost/k8s-apparmor-example-deny-write"});
    assert_eq!(
        super::workloads::created_warnings(&def("", "pods"), &annotated),
        [format!(
            r#"metadata.annotations[{KEY}]: deprecated since v1.30; use the "appArmorProfile" field instead"#
        )]
    );
    super::workloads::prepare_created(&def("", "pods"), &mut annotated);
    assert_eq!(
        annotated["spec"]["containers"][0]["securityContext"]["appArmorProfile"],
        json!({"type": "Localhost", "localhostProfile": "k8s-apparmor-example-deny-write"})
    );
    assert_eq!(causes("", "pods", annotated), Vec::<String>::new());

    let mut fielded = pod(json!({
        "securityContext": {"appArmorProfile": {"type": "Localhost",
            "localhostProfile": "k8s-apparmor-example-allow-write"}},
        "initContainers": [{"name": "init", "image": "busybox",
            "securityContext": {"appArmorProfile": {"type": "Unconfined"}}}],
        "containers": [{"name": "hello", "image": "busybox:1.28"}]}));
    super::workloads::prepare_created(&def("", "pods"), &mut fielded);
    assert_eq!(
        fielded["metadata"]["annotations"],
        json!({KEY: "localhost/k8s-apparmor-example-allow-write",
            "container.apparmor.security.beta.kubernetes.io/init": "unconfined"})
    );
    // The container itself gets no field: the pod's profile covers it.
    assert!(
        fielded["spec"]["containers"][0]
            .get("securityContext")
            .is_none()
    );

    // An annotation naming the pod's profile is not copied; an invalid one (padded) neither;
    // a Windows pod is left alone.
    let mut same = pod(json!({
        "securityContext": {"appArmorProfile": {"type": "RuntimeDefault"}},
        "containers": [{"name": "hello", "image": "x"}, {"name": "b", "image": "x"}]}));
    same["metadata"]["annotations"] = json!({KEY: "runtime/default",
        "container.apparmor.security.beta.kubernetes.io/b": "localhost/ padded"});
    let before = same.clone();
    // Warned of the invalid one only (kube: an annotation naming the pod's profile is not).
    assert_eq!(
        super::workloads::created_warnings(&def("", "pods"), &same),
        [
            r#"metadata.annotations[container.apparmor.security.beta.kubernetes.io/b]: deprecated since v1.30; use the "appArmorProfile" field instead"#
        ]
    );
    super::workloads::prepare_created(&def("", "pods"), &mut same);
    assert_eq!(same, before);
    let mut windows = pod(json!({"os": {"name": "windows"},
        "securityContext": {"appArmorProfile": {"type": "RuntimeDefault"}},
        "containers": [{"name": "hello", "image": "x"}]}));
    let before = windows.clone();
    assert!(super::workloads::created_warnings(&def("", "pods"), &windows).is_empty());
    assert!(super::workloads::created_warnings(&def("", "pods"), &fielded).is_empty());
    super::workloads::prepare_created(&def("", "pods"), &mut windows);
    assert_eq!(windows, before);
}

#[test]
fn status_ips_are_checked_when_an_update_changes_them() {
    let def = def("", "pods");
    let with_status = |status: Value| {
        let mut object = pod(json!({"containers": [{"name": "c", "image": "x"}]}));
        object["status"] = status;
        crate::defaults::apply_defaults(&def, &mut object);
        object
    };
    let update = |status: Value, old: &Value| -> Vec<String> {
        match validate(&def, &with_status(status), Some(old)) {
            Ok(()) => Vec::new(),
            Err(err) => err.cause_lines(),
        }
    };
    // A status the client set on create is kept: unchanged, it is not checked again.
    let stored = with_status(json!({"podIPs": [{"ip": "bogus"}]}));
    assert_eq!(
        update(json!({"podIPs": [{"ip": "bogus"}]}), &stored),
        Vec::<String>::new()
    );
    let old = with_status(json!({}));
    let ip = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)";
    assert_eq!(
        update(json!({"podIPs": [{"ip": "10.0.0.256"}]}), &old),
        [format!(
            "status.podIPs[0]: Invalid value: \"10.0.0.256\": {ip}"
        )]
    );
    assert_eq!(
        update(
            json!({"podIPs": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.1"}]}),
            &old
        ),
        [
            "status.podIPs: Invalid value: []core.PodIP{core.PodIP{IP:\"10.0.0.1\"}, core.PodIP{IP:\"10.0.0.1\"}}: may specify no more than one IP for each IP family",
            "status.podIPs[1]: Duplicate value: core.PodIP{IP:\"10.0.0.1\"}",
        ]
    );
    // An IPv4-mapped IPv6 address is of the IPv4 family, as Go's `To4` reads it.
    assert_eq!(
        update(
            json!({"podIPs": [{"ip": "10.0.0.1"}, {"ip": "::ffff:10.0.0.2"}]}),
            &old
        )
        .len(),
        1
    );
    assert_eq!(
        update(
            json!({"hostIP": "10.0.0.9", "hostIPs": [{"ip": "10.0.0.1"}, {"ip": "fd00::1"}, {"ip": "fd00::1"}]}),
            &old
        ),
        [
            "status.hostIPs[0].ip: Invalid value: \"10.0.0.1\": must be equal to `hostIP`",
            "status.hostIPs[2]: Duplicate value: core.HostIP{IP:\"fd00::1\"}",
            "status.hostIPs: Invalid value: []core.HostIP{core.HostIP{IP:\"10.0.0.1\"}, core.HostIP{IP:\"fd00::1\"}, core.HostIP{IP:\"fd00::1\"}}: may specify no more than one IP for each IP family",
        ]
    );
    assert_eq!(
        update(
            json!({"hostIP": "10.0.0.1", "hostIPs": [{"ip": "10.0.0.1"}, {"ip": "fd00::1"}],
            "podIP": "10.1.0.1", "podIPs": [{"ip": "010.1.0.1"}, {"ip": "fd01::1"}]}),
            &old
        ),
        Vec::<String>::new()
    );
}

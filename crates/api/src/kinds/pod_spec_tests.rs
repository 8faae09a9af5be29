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
    let no_source = pod(json!({"containers": [{"name": "c", "image": "x"}],
        "volumes": [{"name": "v"}]}));
    assert_eq!(
        causes("", "pods", no_source),
        ["spec.volumes[0]: Required value: must specify a volume type"]
    );
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
        "spec.containers[0].resources.requests[gpu]: Invalid value: \"gpu\": must be a standard resource type or fully qualified",
        "spec.containers[0].resources.requests[gpu]: Invalid value: \"gpu\": must be a standard resource for containers",
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

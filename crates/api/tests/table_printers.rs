//! Table output (`kubectl get`) of the built-in kinds printed by group: the columns and cells
//! kube-apiserver prints (`pkg/printers/internalversion/printers.go`, the default table
//! convertor of `k8s.io/apiserver` and the kube-aggregator's APIService convertor). Expected
//! cells follow kube's print functions; kube-apiserver always prints the wide columns.

use serde_json::{Value, json};
use watchkeeper_api::resources::{ResourceDef, builtin_resources};
use watchkeeper_api::{crd, rfc3339_from_unix, to_table};

const NOW: i64 = 1_800_000_000;

fn def(group: &str, plural: &str) -> ResourceDef {
    builtin_resources()
        .into_iter()
        .find(|d| d.group == group && d.plural == plural)
        .unwrap_or_else(|| panic!("no built-in {plural}.{group}"))
}

fn ago(seconds: i64) -> String {
    rfc3339_from_unix(NOW - seconds)
}

fn table(def: &ResourceDef, object: &Value) -> Value {
    to_table(def, &[object], "1", None, NOW)
}

fn cells(def: &ResourceDef, object: &Value) -> Value {
    let table = table(def, object);
    let cells = table["rows"][0]["cells"].clone();
    assert_eq!(
        cells.as_array().unwrap().len(),
        table["columnDefinitions"].as_array().unwrap().len(),
        "{}: one cell per column",
        def.plural
    );
    cells
}

/// Every column as `(name, type, priority)`.
fn columns(def: &ResourceDef) -> Vec<(String, String, u64)> {
    table(def, &json!({}))["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_owned(),
                c["type"].as_str().unwrap().to_owned(),
                c["priority"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn expect_columns(def: &ResourceDef, expected: &[(&str, &str, u64)]) {
    let expected: Vec<(String, String, u64)> = expected
        .iter()
        .map(|(n, t, p)| ((*n).to_owned(), (*t).to_owned(), *p))
        .collect();
    assert_eq!(columns(def), expected, "{}", def.plural);
    let definitions = table(def, &json!({}))["columnDefinitions"].clone();
    assert_eq!(definitions[0]["format"], "name");
    for column in definitions.as_array().unwrap().iter().skip(1) {
        assert_eq!(column["format"], "", "{}", column["name"]);
    }
}

fn description(def: &ResourceDef, column: &str) -> String {
    table(def, &json!({}))["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == column)
        .unwrap()["description"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[test]
fn job_table() {
    let jobs = def("batch", "jobs");
    expect_columns(
        &jobs,
        &[
            ("Name", "string", 0),
            ("Status", "string", 0),
            ("Completions", "string", 0),
            ("Duration", "string", 0),
            ("Age", "string", 0),
            ("Containers", "string", 1),
            ("Images", "string", 1),
            ("Selector", "string", 1),
        ],
    );
    assert_eq!(
        description(&jobs, "Duration"),
        "Time required to complete the job."
    );
    let running = json!({
        "metadata": {"name": "pi", "creationTimestamp": ago(700)},
        "spec": {"completions": 3, "parallelism": 1,
                 "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "abc"}},
                 "template": {"spec": {"containers": [{"name": "pi", "image": "perl:5.34"}]}}},
        "status": {"succeeded": 2, "active": 1, "startTime": ago(600)}
    });
    assert_eq!(
        cells(&jobs, &running),
        json!([
            "pi",
            "Running",
            "2/3",
            "10m",
            "11m",
            "pi",
            "perl:5.34",
            "batch.kubernetes.io/controller-uid=abc"
        ])
    );
    let complete = json!({
        "metadata": {"name": "done", "creationTimestamp": ago(3700)},
        "spec": {"completions": 1, "parallelism": 1},
        "status": {"succeeded": 1, "startTime": ago(3600), "completionTime": ago(3600 - 75),
                   "conditions": [{"type": "SuccessCriteriaMet", "status": "True"},
                                  {"type": "Complete", "status": "True"}]}
    });
    assert_eq!(
        cells(&jobs, &complete),
        json!(["done", "Complete", "1/1", "75s", "61m", "", "", "<none>"])
    );
    // No completions: `succeeded/1 of parallelism` when parallel; not started: no duration.
    let parallel = json!({"metadata": {"name": "work", "creationTimestamp": ago(30)},
                          "spec": {"parallelism": 3}});
    assert_eq!(
        cells(&jobs, &parallel),
        json!(["work", "Running", "0/1 of 3", "", "30s", "", "", "<none>"])
    );
    // Complete/Failed win over Terminating, which wins over Suspended and FailureTarget; only
    // the first condition of a type counts, and only when True.
    let status = |conditions: Value, deleting: bool| {
        let mut job = json!({"metadata": {"name": "j"}, "spec": {"parallelism": 1},
                             "status": {"conditions": conditions}});
        if deleting {
            job["metadata"]["deletionTimestamp"] = json!(ago(1));
        }
        cells(&jobs, &job)[1].clone()
    };
    assert_eq!(
        status(
            json!([{"type": "Complete", "status": "False"}, {"type": "Failed", "status": "True"}]),
            true
        ),
        "Failed"
    );
    assert_eq!(
        status(json!([{"type": "Suspended", "status": "True"}]), true),
        "Terminating"
    );
    assert_eq!(
        status(json!([{"type": "Suspended", "status": "True"}]), false),
        "Suspended"
    );
    assert_eq!(
        status(json!([{"type": "FailureTarget", "status": "True"}]), false),
        "FailureTarget"
    );
    assert_eq!(
        status(
            json!([{"type": "Complete", "status": "False"}, {"type": "Complete", "status": "True"}]),
            false
        ),
        "Running"
    );
    let missing = json!({"metadata": {"name": "m"}});
    assert_eq!(
        cells(&jobs, &missing),
        json!(["m", "Running", "0/1", "", "<unknown>", "", "", "<none>"])
    );
}

#[test]
fn cronjob_table() {
    let cronjobs = def("batch", "cronjobs");
    expect_columns(
        &cronjobs,
        &[
            ("Name", "string", 0),
            ("Schedule", "string", 0),
            ("Timezone", "string", 0),
            ("Suspend", "boolean", 0),
            ("Active", "integer", 0),
            ("Last Schedule", "string", 0),
            ("Age", "string", 0),
            ("Containers", "string", 1),
            ("Images", "string", 1),
            ("Selector", "string", 1),
        ],
    );
    let cronjob = json!({
        "metadata": {"name": "hello", "creationTimestamp": ago(2 * 86400)},
        "spec": {"schedule": "*/5 * * * *", "timeZone": "Etc/UTC", "suspend": false,
                 "jobTemplate": {"spec": {"template": {"spec": {"containers": [
                     {"name": "hello", "image": "busybox"}, {"name": "side", "image": "alpine"}]}}}}},
        "status": {"active": [{"kind": "Job", "name": "hello-1"}, {"kind": "Job", "name": "hello-2"}],
                   "lastScheduleTime": ago(90)}
    });
    assert_eq!(
        cells(&cronjobs, &cronjob),
        json!([
            "hello",
            "*/5 * * * *",
            "Etc/UTC",
            "False",
            2,
            "90s",
            "2d",
            "hello,side",
            "busybox,alpine",
            "<none>"
        ])
    );
    // No time zone, no suspend, never scheduled.
    let bare = json!({"metadata": {"name": "b", "creationTimestamp": ago(300)},
                      "spec": {"schedule": "0 * * * *",
                               "jobTemplate": {"spec": {"selector": {"matchLabels": {"a": "b"}}}}}});
    assert_eq!(
        cells(&cronjobs, &bare),
        json!([
            "b",
            "0 * * * *",
            "<none>",
            "<unset>",
            0,
            "<none>",
            "5m",
            "",
            "",
            "a=b"
        ])
    );
    let suspended =
        json!({"metadata": {"name": "s"}, "spec": {"schedule": "@daily", "suspend": true}});
    assert_eq!(cells(&cronjobs, &suspended)[3], "True");
}

#[test]
fn horizontalpodautoscaler_table() {
    let hpas = def("autoscaling", "horizontalpodautoscalers");
    expect_columns(
        &hpas,
        &[
            ("Name", "string", 0),
            ("Reference", "string", 0),
            ("Targets", "string", 0),
            ("MinPods", "string", 0),
            ("MaxPods", "string", 0),
            ("Replicas", "string", 0),
            ("Age", "string", 0),
        ],
    );
    let hpa = json!({
        "metadata": {"name": "web", "creationTimestamp": ago(5 * 3600)},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 2, "maxReplicas": 10,
            "metrics": [
                {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}},
                {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "500Mi"}}},
                {"type": "Pods", "pods": {"metric": {"name": "packets"}, "target": {"type": "AverageValue", "averageValue": "1k"}}}
            ]
        },
        "status": {"currentReplicas": 3, "desiredReplicas": 3, "currentMetrics": [
            {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 45, "averageValue": "90m"}}},
            {"type": "Resource", "resource": {"name": "memory", "current": {"averageValue": "300Mi"}}},
            {"type": "Pods", "pods": {"metric": {"name": "packets"}, "current": {"averageValue": "2k"}}}
        ]}
    });
    assert_eq!(
        cells(&hpas, &hpa),
        json!([
            "web",
            "Deployment/web",
            "cpu: 45%/80%, memory: 300Mi/500Mi + 1 more...",
            "2",
            10,
            3,
            "5h"
        ])
    );
    // No minReplicas, no status yet.
    let fresh = json!({
        "metadata": {"name": "api", "creationTimestamp": ago(20)},
        "spec": {"scaleTargetRef": {"kind": "StatefulSet", "name": "db"}, "maxReplicas": 4,
                 "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}]}
    });
    assert_eq!(
        cells(&hpas, &fresh),
        json!([
            "api",
            "StatefulSet/db",
            "cpu: <unknown>/50%",
            "<unset>",
            4,
            0,
            "20s"
        ])
    );
    let targets = |metrics: Value, current: Value| {
        let hpa = json!({"metadata": {"name": "h"},
                         "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "d"}, "metrics": metrics},
                         "status": {"currentMetrics": current}});
        cells(&hpas, &hpa)[2].clone()
    };
    assert_eq!(targets(json!([]), json!([])), "<none>");
    assert_eq!(
        targets(
            json!([
                {"type": "External", "external": {"metric": {"name": "queue"}, "target": {"type": "Value", "value": "10"}}},
                {"type": "Object", "object": {"metric": {"name": "rps"}, "target": {"type": "AverageValue", "averageValue": "5"}}}
            ]),
            json!([{"type": "External", "external": {"metric": {"name": "queue"}, "current": {"value": "7"}}}])
        ),
        "7/10, <unknown>/5 (avg)"
    );
    assert_eq!(
        targets(
            json!([
                {"type": "ContainerResource", "containerResource": {"name": "cpu", "container": "app", "target": {"type": "Utilization"}}},
                {"type": "Bogus"}
            ]),
            json!([])
        ),
        "cpu: <unknown>/<auto>, <unknown type>"
    );
    assert_eq!(
        targets(
            json!([
                {"type": "External", "external": {"metric": {"name": "q"}, "target": {"type": "AverageValue", "averageValue": "30"}}},
                {"type": "Object", "object": {"metric": {"name": "o"}, "target": {"type": "Value", "value": "2"}}},
                {"type": "Pods", "pods": {"metric": {"name": "p"}, "target": {"type": "AverageValue", "averageValue": "1"}}}
            ]),
            json!([
                {"type": "External", "external": {"current": {"averageValue": "12"}}},
                {"type": "Object", "object": {"current": {"averageValue": "1"}}}
            ])
        ),
        // The Object status has no `value`: Go prints the nil quantity.
        "12/30 (avg), <nil>/2 + 1 more..."
    );
}

#[test]
fn poddisruptionbudget_table() {
    let pdbs = def("policy", "poddisruptionbudgets");
    expect_columns(
        &pdbs,
        &[
            ("Name", "string", 0),
            ("Min Available", "string", 0),
            ("Max Unavailable", "string", 0),
            ("Allowed Disruptions", "integer", 0),
            ("Age", "string", 0),
        ],
    );
    let min = json!({"metadata": {"name": "web", "creationTimestamp": ago(600)},
                     "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}},
                     "status": {"disruptionsAllowed": 1, "currentHealthy": 3, "desiredHealthy": 2}});
    assert_eq!(cells(&pdbs, &min), json!(["web", "2", "N/A", 1, "10m"]));
    let max = json!({"metadata": {"name": "db", "creationTimestamp": ago(60)},
                     "spec": {"maxUnavailable": "25%"}});
    assert_eq!(cells(&pdbs, &max), json!(["db", "N/A", "25%", 0, "60s"]));
}

#[test]
fn ingress_table() {
    let ingresses = def("networking.k8s.io", "ingresses");
    expect_columns(
        &ingresses,
        &[
            ("Name", "string", 0),
            ("Class", "string", 0),
            ("Hosts", "string", 0),
            ("Address", "string", 0),
            ("Ports", "string", 0),
            ("Age", "string", 0),
        ],
    );
    let ingress = json!({
        "metadata": {"name": "web", "creationTimestamp": ago(3 * 86400)},
        "spec": {"ingressClassName": "nginx",
                 "rules": [{"host": "a.example.com"}, {"http": {"paths": []}}, {"host": "b.example.com"}],
                 "tls": [{"hosts": ["a.example.com"], "secretName": "tls"}]},
        "status": {"loadBalancer": {"ingress": [
            {"ip": "10.0.0.2"}, {"hostname": "lb.example.com"}, {"ip": "10.0.0.1", "hostname": "x"}, {"ip": "10.0.0.2"}
        ]}}
    });
    assert_eq!(
        cells(&ingresses, &ingress),
        json!([
            "web",
            "nginx",
            "a.example.com,b.example.com",
            "10.0.0.1,10.0.0.2,lb.example.com",
            "80, 443",
            "3d"
        ])
    );
    let bare = json!({"metadata": {"name": "b", "creationTimestamp": ago(5)},
                      "spec": {"defaultBackend": {"service": {"name": "s", "port": {"number": 80}}}}});
    assert_eq!(
        cells(&ingresses, &bare),
        json!(["b", "<none>", "*", "", "80", "5s"])
    );
    let hosts = |rules: Value| {
        let ingress = json!({"metadata": {"name": "h"}, "spec": {"rules": rules}});
        cells(&ingresses, &ingress)[2].clone()
    };
    assert_eq!(
        hosts(json!([{"host": "h1"}, {"host": "h2"}, {"host": "h3"}])),
        "h1,h2,h3"
    );
    assert_eq!(
        hosts(
            json!([{"host": "h1"}, {"host": "h2"}, {"host": "h3"}, {"host": "h4"}, {"host": "h5"}])
        ),
        "h1,h2,h3 + 2 more..."
    );
    // kube counts every rule after the third host, with or without a host.
    assert_eq!(
        hosts(json!([{"host": "h1"}, {"host": "h2"}, {"host": "h3"}, {}])),
        "h1,h2,h3 + 1 more..."
    );
}

#[test]
fn ingressclass_table() {
    let classes = def("networking.k8s.io", "ingressclasses");
    expect_columns(
        &classes,
        &[
            ("Name", "string", 0),
            ("Controller", "string", 0),
            ("Parameters", "string", 0),
            ("Age", "string", 0),
        ],
    );
    let class = json!({"metadata": {"name": "nginx", "creationTimestamp": ago(7200)},
        "spec": {"controller": "k8s.io/ingress-nginx",
                 "parameters": {"apiGroup": "k8s.example.com", "kind": "IngressParameters", "name": "external-lb"}}});
    assert_eq!(
        cells(&classes, &class),
        json!([
            "nginx",
            "k8s.io/ingress-nginx",
            "IngressParameters.k8s.example.com/external-lb",
            "120m"
        ])
    );
    let core = json!({"metadata": {"name": "c"},
        "spec": {"controller": "example.com/c", "parameters": {"kind": "ConfigMap", "name": "cfg"}}});
    assert_eq!(cells(&classes, &core)[2], "ConfigMap/cfg");
    let none = json!({"metadata": {"name": "n"}, "spec": {"controller": "example.com/n"}});
    assert_eq!(
        cells(&classes, &none),
        json!(["n", "example.com/n", "<none>", "<unknown>"])
    );
}

#[test]
fn persistentvolume_table() {
    let pvs = def("", "persistentvolumes");
    expect_columns(
        &pvs,
        &[
            ("Name", "string", 0),
            ("Capacity", "string", 0),
            ("Access Modes", "string", 0),
            ("Reclaim Policy", "string", 0),
            ("Status", "string", 0),
            ("Claim", "string", 0),
            ("StorageClass", "string", 0),
            ("VolumeAttributesClass", "string", 0),
            ("Reason", "string", 0),
            ("Age", "string", 0),
            ("VolumeMode", "string", 1),
        ],
    );
    let bound = json!({
        "metadata": {"name": "pv1", "creationTimestamp": ago(86400)},
        "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteMany", "ReadWriteOnce"],
                 "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "fast",
                 "claimRef": {"kind": "PersistentVolumeClaim", "namespace": "d", "name": "data"},
                 "volumeMode": "Filesystem", "hostPath": {"path": "/data"}},
        "status": {"phase": "Bound"}
    });
    assert_eq!(
        cells(&pvs, &bound),
        json!([
            "pv1",
            "10Gi",
            "RWO,RWX",
            "Retain",
            "Bound",
            "d/data",
            "fast",
            "<unset>",
            "",
            "24h",
            "Filesystem"
        ])
    );
    // The beta annotation wins over storageClassName; a deleted volume is Terminating.
    let released = json!({
        "metadata": {"name": "pv2", "creationTimestamp": ago(10), "deletionTimestamp": ago(1),
                     "annotations": {"volume.beta.kubernetes.io/storage-class": "slow"}},
        "spec": {"storageClassName": "fast", "volumeAttributesClassName": "gold",
                 "accessModes": ["ReadWriteOncePod", "ReadOnlyMany"]},
        "status": {"phase": "Failed", "reason": "RecycleFailed"}
    });
    assert_eq!(
        cells(&pvs, &released),
        json!([
            "pv2",
            "0",
            "ROX,RWOP",
            "",
            "Terminating",
            "",
            "slow",
            "gold",
            "RecycleFailed",
            "10s",
            "<unset>"
        ])
    );
}

#[test]
fn persistentvolumeclaim_table() {
    let pvcs = def("", "persistentvolumeclaims");
    expect_columns(
        &pvcs,
        &[
            ("Name", "string", 0),
            ("Status", "string", 0),
            ("Volume", "string", 0),
            ("Capacity", "string", 0),
            ("Access Modes", "string", 0),
            ("StorageClass", "string", 0),
            ("VolumeAttributesClass", "string", 0),
            ("Age", "string", 0),
            ("VolumeMode", "string", 1),
        ],
    );
    let bound = json!({
        "metadata": {"name": "data", "creationTimestamp": ago(600)},
        "spec": {"volumeName": "pv1", "storageClassName": "fast", "volumeMode": "Filesystem",
                 "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "5Gi"}}},
        "status": {"phase": "Bound", "capacity": {"storage": "10Gi"},
                   "accessModes": ["ReadWriteOncePod", "ReadWriteOnce"]}
    });
    assert_eq!(
        cells(&pvcs, &bound),
        json!([
            "data",
            "Bound",
            "pv1",
            "10Gi",
            "RWO,RWOP",
            "fast",
            "<unset>",
            "10m",
            "Filesystem"
        ])
    );
    // Not bound: no capacity or access modes, whatever the status says.
    let pending = json!({
        "metadata": {"name": "p", "creationTimestamp": ago(15)},
        "spec": {"resources": {"requests": {"storage": "1Gi"}}, "volumeAttributesClassName": "gold"},
        "status": {"phase": "Pending", "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"]}
    });
    assert_eq!(
        cells(&pvcs, &pending),
        json!(["p", "Pending", "", "", "", "", "gold", "15s", "<unset>"])
    );
    let annotated = json!({
        "metadata": {"name": "a", "annotations": {"volume.beta.kubernetes.io/storage-class": "old"},
                     "deletionTimestamp": ago(1)},
        "spec": {"storageClassName": "new"}, "status": {"phase": "Bound"}
    });
    let row = cells(&pvcs, &annotated);
    assert_eq!(
        (row[1].clone(), row[5].clone()),
        (json!("Terminating"), json!("old"))
    );
}

#[test]
fn storageclass_table() {
    let classes = def("storage.k8s.io", "storageclasses");
    expect_columns(
        &classes,
        &[
            ("Name", "string", 0),
            ("Provisioner", "string", 0),
            ("ReclaimPolicy", "string", 0),
            ("VolumeBindingMode", "string", 0),
            ("AllowVolumeExpansion", "string", 0),
            ("Age", "string", 0),
        ],
    );
    let standard = json!({
        "metadata": {"name": "standard", "creationTimestamp": ago(40 * 86400),
                     "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
        "provisioner": "rancher.io/local-path", "reclaimPolicy": "Retain",
        "volumeBindingMode": "WaitForFirstConsumer", "allowVolumeExpansion": true
    });
    assert_eq!(
        cells(&classes, &standard),
        json!([
            "standard (default)",
            "rancher.io/local-path",
            "Retain",
            "WaitForFirstConsumer",
            true,
            "40d"
        ])
    );
    let beta = json!({"metadata": {"name": "old", "creationTimestamp": ago(60),
                                   "annotations": {"storageclass.beta.kubernetes.io/is-default-class": "true"}},
                      "provisioner": "kubernetes.io/no-provisioner"});
    assert_eq!(
        cells(&classes, &beta),
        json!([
            "old (default)",
            "kubernetes.io/no-provisioner",
            "Delete",
            "Immediate",
            false,
            "60s"
        ])
    );
    let not_default = json!({"metadata": {"name": "x", "annotations": {"storageclass.kubernetes.io/is-default-class": "false"}},
                             "provisioner": "p"});
    assert_eq!(cells(&classes, &not_default)[0], "x");
}

#[test]
fn default_convertor_tables() {
    // Roles, cluster roles, limit ranges and CustomResourceDefinitions have no printer:
    // kube-apiserver's default table convertor prints the name and the creation time.
    let defs = [
        def("rbac.authorization.k8s.io", "roles"),
        def("rbac.authorization.k8s.io", "clusterroles"),
        def("", "limitranges"),
        crd::definition(),
    ];
    for d in &defs {
        expect_columns(d, &[("Name", "string", 0), ("Created At", "date", 0)]);
        assert_eq!(
            description(d, "Created At"),
            description(&def("", "pods"), "Age")
        );
        let role = json!({"metadata": {"name": "reader", "creationTimestamp": "2026-01-02T03:04:05Z"},
                          "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]});
        assert_eq!(
            cells(d, &role),
            json!(["reader", "2026-01-02T03:04:05Z"]),
            "{}",
            d.plural
        );
        // Printed in UTC; Go's zero time without a timestamp.
        let offset =
            json!({"metadata": {"name": "o", "creationTimestamp": "2026-01-02T05:04:05+02:00"}});
        assert_eq!(cells(d, &offset), json!(["o", "2026-01-02T03:04:05Z"]));
        let missing = json!({"metadata": {"name": "m"}});
        assert_eq!(cells(d, &missing), json!(["m", "0001-01-01T00:00:00Z"]));
    }
}

#[test]
fn rolebinding_tables() {
    let bindings = def("rbac.authorization.k8s.io", "rolebindings");
    expect_columns(
        &bindings,
        &[
            ("Name", "string", 0),
            ("Role", "string", 0),
            ("Age", "string", 0),
            ("Users", "string", 1),
            ("Groups", "string", 1),
            ("ServiceAccounts", "string", 1),
        ],
    );
    assert_eq!(description(&bindings, "Users"), "Users in the roleBinding");
    let binding = json!({
        "metadata": {"name": "read-pods", "namespace": "d", "creationTimestamp": ago(3600)},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
        "subjects": [
            {"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"},
            {"kind": "Group", "name": "devs", "apiGroup": "rbac.authorization.k8s.io"},
            {"kind": "ServiceAccount", "name": "builder", "namespace": "ci"},
            {"kind": "User", "name": "bob"}
        ]
    });
    assert_eq!(
        cells(&bindings, &binding),
        json!([
            "read-pods",
            "Role/reader",
            "60m",
            "alice, bob",
            "devs",
            "ci/builder"
        ])
    );
    let empty = json!({"metadata": {"name": "e", "creationTimestamp": ago(3)},
                       "roleRef": {"kind": "ClusterRole", "name": "view"}});
    assert_eq!(
        cells(&bindings, &empty),
        json!(["e", "ClusterRole/view", "3s", "", "", ""])
    );
    let cluster = def("rbac.authorization.k8s.io", "clusterrolebindings");
    expect_columns(
        &cluster,
        &columns(&bindings)
            .iter()
            .map(|(n, t, p)| (n.as_str(), t.as_str(), *p))
            .collect::<Vec<_>>(),
    );
    assert_eq!(
        description(&cluster, "ServiceAccounts"),
        "ServiceAccounts in the clusterRoleBinding"
    );
    let admin = json!({"metadata": {"name": "cluster-admin", "creationTimestamp": ago(400 * 86400)},
                       "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
                       "subjects": [{"kind": "Group", "name": "system:masters"}, {"kind": "Group", "name": "ops"}]});
    assert_eq!(
        cells(&cluster, &admin),
        json!([
            "cluster-admin",
            "ClusterRole/cluster-admin",
            "400d",
            "",
            "system:masters, ops",
            ""
        ])
    );
}

#[test]
fn resourcequota_table() {
    let quotas = def("", "resourcequotas");
    expect_columns(
        &quotas,
        &[
            ("Name", "string", 0),
            ("Request", "string", 0),
            ("Limit", "string", 0),
            ("Age", "string", 0),
        ],
    );
    let quota = json!({
        "metadata": {"name": "compute", "creationTimestamp": ago(90)},
        "spec": {"hard": {"pods": "10"}},
        "status": {
            "hard": {"requests.memory": "1Gi", "limits.cpu": "2", "pods": "10", "requests.cpu": "1", "limits.memory": "2Gi"},
            "used": {"limits.cpu": "500m", "pods": "3", "requests.cpu": "250m", "requests.memory": "512Mi"}
        }
    });
    assert_eq!(
        cells(&quotas, &quota),
        json!([
            "compute",
            "pods: 3/10, requests.cpu: 250m/1, requests.memory: 512Mi/1Gi",
            "limits.cpu: 500m/2, limits.memory: 0/2Gi",
            "90s"
        ])
    );
    let new = json!({"metadata": {"name": "n", "creationTimestamp": ago(1)}, "spec": {"hard": {"pods": "1"}}});
    assert_eq!(cells(&quotas, &new), json!(["n", "", "", "1s"]));
}

#[test]
fn networkpolicy_table() {
    let policies = def("networking.k8s.io", "networkpolicies");
    expect_columns(
        &policies,
        &[
            ("Name", "string", 0),
            ("Pod-Selector", "string", 0),
            ("Age", "string", 0),
        ],
    );
    let policy = json!({"metadata": {"name": "web", "creationTimestamp": ago(600)},
                        "spec": {"podSelector": {"matchLabels": {"app": "web", "tier": "front"}}, "policyTypes": ["Ingress"]}});
    assert_eq!(
        cells(&policies, &policy),
        json!(["web", "app=web,tier=front", "10m"])
    );
    let all = json!({"metadata": {"name": "deny-all", "creationTimestamp": ago(600)}, "spec": {"podSelector": {}}});
    assert_eq!(cells(&policies, &all), json!(["deny-all", "<none>", "10m"]));
}

#[test]
fn priorityclass_table() {
    let classes = def("scheduling.k8s.io", "priorityclasses");
    expect_columns(
        &classes,
        &[
            ("Name", "string", 0),
            ("Value", "integer", 0),
            ("Global-Default", "boolean", 0),
            ("Age", "string", 0),
            ("PreemptionPolicy", "string", 0),
        ],
    );
    let high = json!({"metadata": {"name": "high", "creationTimestamp": ago(7 * 86400)},
                      "value": 1_000_000, "globalDefault": true, "preemptionPolicy": "Never"});
    assert_eq!(
        cells(&classes, &high),
        json!(["high", 1_000_000, true, "7d", "Never"])
    );
    let bare = json!({"metadata": {"name": "low"}, "value": -5});
    assert_eq!(
        cells(&classes, &bare),
        json!(["low", -5, false, "<unknown>", ""])
    );
}

#[test]
fn replicationcontroller_table() {
    let rcs = def("", "replicationcontrollers");
    expect_columns(
        &rcs,
        &[
            ("Name", "string", 0),
            ("Desired", "integer", 0),
            ("Current", "integer", 0),
            ("Ready", "integer", 0),
            ("Age", "string", 0),
            ("Containers", "string", 1),
            ("Images", "string", 1),
            ("Selector", "string", 1),
        ],
    );
    let rc = json!({
        "metadata": {"name": "nginx", "creationTimestamp": ago(300)},
        "spec": {"replicas": 3, "selector": {"app": "nginx", "env": "prod"},
                 "template": {"metadata": {"labels": {"app": "nginx"}},
                              "spec": {"containers": [{"name": "nginx", "image": "nginx:1.25"}]}}},
        "status": {"replicas": 3, "readyReplicas": 2}
    });
    assert_eq!(
        cells(&rcs, &rc),
        json!([
            "nginx",
            3,
            3,
            2,
            "5m",
            "nginx",
            "nginx:1.25",
            "app=nginx,env=prod"
        ])
    );
    let bare = json!({"metadata": {"name": "r", "creationTimestamp": ago(2)}});
    assert_eq!(
        cells(&rcs, &bare),
        json!(["r", 1, 0, 0, "2s", "", "", "<none>"])
    );
}

#[test]
fn webhook_configuration_tables() {
    for plural in [
        "validatingwebhookconfigurations",
        "mutatingwebhookconfigurations",
    ] {
        let d = def("admissionregistration.k8s.io", plural);
        expect_columns(
            &d,
            &[
                ("Name", "string", 0),
                ("Webhooks", "integer", 0),
                ("Age", "string", 0),
            ],
        );
        let config = json!({"metadata": {"name": "hooks", "creationTimestamp": ago(3600 * 3)},
                            "webhooks": [{"name": "a.example.com"}, {"name": "b.example.com"}]});
        assert_eq!(cells(&d, &config), json!(["hooks", 2, "3h"]));
        let empty =
            json!({"metadata": {"name": "none", "creationTimestamp": ago(3600 * 3 + 60 * 5)}});
        assert_eq!(cells(&d, &empty), json!(["none", 0, "3h5m"]));
    }
}

#[test]
fn apiservice_table() {
    let services = def("apiregistration.k8s.io", "apiservices");
    expect_columns(
        &services,
        &[
            ("Name", "string", 0),
            ("Service", "string", 0),
            ("Available", "string", 0),
            ("Age", "string", 0),
        ],
    );
    let metrics = json!({
        "metadata": {"name": "v1beta1.metrics.k8s.io", "creationTimestamp": ago(86400 * 3 + 3600 * 2)},
        "spec": {"group": "metrics.k8s.io", "version": "v1beta1",
                 "service": {"namespace": "kube-system", "name": "metrics-server", "port": 443}},
        "status": {"conditions": [{"type": "Available", "status": "False", "reason": "FailedDiscoveryCheck"}]}
    });
    assert_eq!(
        cells(&services, &metrics),
        json!([
            "v1beta1.metrics.k8s.io",
            "kube-system/metrics-server",
            "False (FailedDiscoveryCheck)",
            "3d2h"
        ])
    );
    let local = json!({"metadata": {"name": "v1.apps", "creationTimestamp": ago(60)},
                       "spec": {"group": "apps", "version": "v1"},
                       "status": {"conditions": [{"type": "Available", "status": "True", "reason": "Local"}]}});
    assert_eq!(
        cells(&services, &local),
        json!(["v1.apps", "Local", "True", "60s"])
    );
    let unknown = json!({"metadata": {"name": "v1.x"}, "spec": {"service": {"namespace": "n", "name": "s"}},
                         "status": {"conditions": [{"type": "Available", "status": "Unknown"}]}});
    assert_eq!(cells(&services, &unknown)[2], "Unknown");
    let no_status = json!({"metadata": {"name": "v1.y"}});
    assert_eq!(
        cells(&services, &no_status),
        json!(["v1.y", "Local", "Unknown", "<unknown>"])
    );
}

#[test]
fn certificatesigningrequest_table() {
    let csrs = def("certificates.k8s.io", "certificatesigningrequests");
    expect_columns(
        &csrs,
        &[
            ("Name", "string", 0),
            ("Age", "string", 0),
            ("SignerName", "string", 0),
            ("Requestor", "string", 0),
            ("RequestedDuration", "string", 0),
            ("Condition", "string", 0),
        ],
    );
    let issued = json!({
        "metadata": {"name": "alice", "creationTimestamp": ago(125)},
        "spec": {"signerName": "kubernetes.io/kube-apiserver-client", "username": "alice",
                 "expirationSeconds": 86400, "request": "LS0t", "usages": ["client auth"]},
        "status": {"conditions": [{"type": "Approved", "status": "True"}], "certificate": "LS0tLS1C"}
    });
    assert_eq!(
        cells(&csrs, &issued),
        json!([
            "alice",
            "2m5s",
            "kubernetes.io/kube-apiserver-client",
            "alice",
            "24h",
            "Approved,Issued"
        ])
    );
    let pending = json!({"metadata": {"name": "p", "creationTimestamp": ago(10)}, "spec": {"request": "LS0t"}});
    assert_eq!(
        cells(&csrs, &pending),
        json!(["p", "10s", "<none>", "", "<none>", "Pending"])
    );
    let denied = json!({"metadata": {"name": "d"}, "spec": {"expirationSeconds": 600},
        "status": {"conditions": [{"type": "Approved", "status": "True"}, {"type": "Denied", "status": "True"},
                                  {"type": "Failed", "status": "True"}]}});
    let row = cells(&csrs, &denied);
    assert_eq!(
        (row[4].clone(), row[5].clone()),
        (json!("10m"), json!("Denied,Failed"))
    );
}

#[test]
fn controllerrevision_table() {
    let revisions = ResourceDef::named(
        "apps",
        "v1",
        "controllerrevisions",
        "ControllerRevision",
        true,
    );
    expect_columns(
        &revisions,
        &[
            ("Name", "string", 0),
            ("Controller", "string", 0),
            ("Revision", "string", 0),
            ("Age", "string", 0),
        ],
    );
    let revision = json!({
        "metadata": {"name": "web-7d4f", "creationTimestamp": ago(45),
                     "ownerReferences": [
                         {"apiVersion": "v1", "kind": "Pod", "name": "other", "uid": "1"},
                         {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "uid": "2", "controller": true}
                     ]},
        "data": {}, "revision": 2
    });
    assert_eq!(
        cells(&revisions, &revision),
        json!(["web-7d4f", "statefulset.apps/web", 2, "45s"])
    );
    let core = json!({"metadata": {"name": "c", "ownerReferences": [
        {"apiVersion": "v1", "kind": "ReplicationController", "name": "rc", "controller": true}]}, "revision": 1});
    assert_eq!(cells(&revisions, &core)[1], "replicationcontroller/rc");
    let orphan = json!({"metadata": {"name": "o", "creationTimestamp": ago(45),
                                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d", "controller": false}]}});
    assert_eq!(cells(&revisions, &orphan), json!(["o", "<none>", 0, "45s"]));
}

#[test]
fn runtimeclass_table() {
    let classes = ResourceDef::named("node.k8s.io", "v1", "runtimeclasses", "RuntimeClass", false);
    expect_columns(
        &classes,
        &[
            ("Name", "string", 0),
            ("Handler", "string", 0),
            ("Age", "string", 0),
        ],
    );
    // kube's description is `ObjectMeta{}.SwaggerDoc()["handler"]`, which does not exist.
    assert_eq!(description(&classes, "Handler"), "");
    let gvisor = json!({"metadata": {"name": "gvisor", "creationTimestamp": ago(86400 * 9)}, "handler": "runsc"});
    assert_eq!(cells(&classes, &gvisor), json!(["gvisor", "runsc", "9d"]));
    let bare = json!({"metadata": {"name": "b"}});
    assert_eq!(cells(&classes, &bare), json!(["b", "", "<unknown>"]));
}

#[test]
fn printers_apply_only_to_their_group() {
    // A custom resource that shares a built-in plural gets the default Name and Age.
    for plural in [
        "jobs",
        "cronjobs",
        "horizontalpodautoscalers",
        "poddisruptionbudgets",
        "ingresses",
        "persistentvolumes",
        "storageclasses",
        "roles",
        "rolebindings",
        "limitranges",
        "customresourcedefinitions",
        "apiservices",
        "controllerrevisions",
        "runtimeclasses",
        "csidrivers",
        "csinodes",
        "volumeattachments",
        "csistoragecapacities",
        "validatingadmissionpolicies",
        "validatingadmissionpolicybindings",
        "flowschemas",
        "prioritylevelconfigurations",
    ] {
        let widget = ResourceDef::named("example.com", "v1", plural, "Widget", true);
        let object = json!({"metadata": {"name": "w", "creationTimestamp": ago(45)}});
        let table = table(&widget, &object);
        let names: Vec<&str> = table["columnDefinitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["Name", "Age"], "{plural}");
        assert_eq!(table["rows"][0]["cells"], json!(["w", "45s"]), "{plural}");
    }
    // Ingresses of the old extensions group are not the networking.k8s.io printer's either.
    let old = ResourceDef::named("extensions", "v1beta1", "ingresses", "Ingress", true);
    assert_eq!(columns(&old).len(), 2);
}

#[test]
fn storage_driver_tables() {
    let drivers = def("storage.k8s.io", "csidrivers");
    expect_columns(
        &drivers,
        &[
            ("Name", "string", 0),
            ("AttachRequired", "boolean", 0),
            ("PodInfoOnMount", "boolean", 0),
            ("StorageCapacity", "boolean", 0),
            ("TokenRequests", "string", 0),
            ("RequiresRepublish", "boolean", 0),
            ("Modes", "string", 0),
            ("Age", "string", 0),
        ],
    );
    let driver = json!({"metadata": {"name": "csi.example.com", "creationTimestamp": ago(45)},
        "spec": {"attachRequired": false, "podInfoOnMount": true, "storageCapacity": true,
                 "tokenRequests": [{"audience": "a"}, {"audience": "b"}],
                 "volumeLifecycleModes": ["Persistent", "Ephemeral"]}});
    assert_eq!(
        cells(&drivers, &driver),
        json!([
            "csi.example.com",
            false,
            true,
            true,
            "a,b",
            false,
            "Persistent,Ephemeral",
            "45s"
        ])
    );
    let bare = json!({"metadata": {"name": "b", "creationTimestamp": ago(45)}, "spec": {}});
    assert_eq!(
        cells(&drivers, &bare),
        json!(["b", true, false, false, "<unset>", false, "<none>", "45s"])
    );

    let nodes = def("storage.k8s.io", "csinodes");
    let node = json!({"metadata": {"name": "n1", "creationTimestamp": ago(45)},
        "spec": {"drivers": [{"name": "a", "nodeID": "1"}, {"name": "b", "nodeID": "1"}]}});
    assert_eq!(cells(&nodes, &node), json!(["n1", 2, "45s"]));
    assert_eq!(columns(&nodes)[1], ("Drivers".into(), "integer".into(), 0));

    let attachments = def("storage.k8s.io", "volumeattachments");
    let attachment = json!({"metadata": {"name": "va", "creationTimestamp": ago(45)},
        "spec": {"attacher": "csi.example.com", "nodeName": "n1",
                 "source": {"persistentVolumeName": "pv-1"}},
        "status": {"attached": true}});
    assert_eq!(
        cells(&attachments, &attachment),
        json!(["va", "csi.example.com", "pv-1", "n1", true, "45s"])
    );
    let formats: Vec<Value> = table(&attachments, &attachment)["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["format"].clone())
        .collect();
    assert_eq!(formats[1], "name");

    let capacities = def("storage.k8s.io", "csistoragecapacities");
    expect_columns(
        &capacities,
        &[
            ("Name", "string", 0),
            ("StorageClassName", "string", 0),
            ("Capacity", "string", 0),
        ],
    );
    let capacity = json!({"metadata": {"name": "c", "namespace": "kube-system"},
        "storageClassName": "fast", "capacity": "10Gi"});
    assert_eq!(cells(&capacities, &capacity), json!(["c", "fast", "10Gi"]));
    let unknown = json!({"metadata": {"name": "u"}, "storageClassName": "fast"});
    assert_eq!(
        cells(&capacities, &unknown),
        json!(["u", "fast", "<unset>"])
    );
}

#[test]
fn admission_policy_tables() {
    let policies = def(
        "admissionregistration.k8s.io",
        "validatingadmissionpolicies",
    );
    expect_columns(
        &policies,
        &[
            ("Name", "string", 0),
            ("Validations", "integer", 0),
            ("ParamKind", "string", 0),
            ("Age", "string", 0),
        ],
    );
    let policy = json!({"metadata": {"name": "p", "creationTimestamp": ago(45)},
        "spec": {"paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
                 "validations": [{"expression": "true"}, {"expression": "false"}]}});
    assert_eq!(
        cells(&policies, &policy),
        json!(["p", 2, "v1/ConfigMap", "45s"])
    );
    let plain = json!({"metadata": {"name": "q", "creationTimestamp": ago(45)}, "spec": {}});
    assert_eq!(cells(&policies, &plain), json!(["q", 0, "<unset>", "45s"]));

    let bindings = def(
        "admissionregistration.k8s.io",
        "validatingadmissionpolicybindings",
    );
    let named = |reference: Value| {
        json!({"metadata": {"name": "b", "creationTimestamp": ago(45)},
               "spec": {"policyName": "p", "paramRef": reference}})
    };
    assert_eq!(
        cells(&bindings, &named(json!({"name": "cfg", "namespace": "ns"}))),
        json!(["b", "p", "ns/cfg", "45s"])
    );
    assert_eq!(cells(&bindings, &named(json!({"name": "cfg"})))[2], "*/cfg");
    assert_eq!(
        cells(
            &bindings,
            &named(json!({"selector": {"matchLabels": {"a": "b"}}}))
        )[2],
        "&LabelSelector{MatchLabels:map[string]string{a: b,},MatchExpressions:[]LabelSelectorRequirement{},}"
    );
    assert_eq!(cells(&bindings, &named(Value::Null))[2], "<unset>");
}

#[test]
fn flow_control_tables() {
    let schemas = def("flowcontrol.apiserver.k8s.io", "flowschemas");
    expect_columns(
        &schemas,
        &[
            ("Name", "string", 0),
            ("PriorityLevel", "string", 0),
            ("MatchingPrecedence", "string", 0),
            ("DistinguisherMethod", "string", 0),
            ("Age", "string", 0),
            ("MissingPL", "string", 0),
        ],
    );
    let schema = json!({"metadata": {"name": "catch-all", "creationTimestamp": ago(45)},
        "spec": {"priorityLevelConfiguration": {"name": "catch-all"}, "matchingPrecedence": 10000,
                 "distinguisherMethod": {"type": "ByUser"}},
        "status": {"conditions": [{"type": "Dangling", "status": "False"}]}});
    assert_eq!(
        cells(&schemas, &schema),
        json!(["catch-all", "catch-all", 10000, "ByUser", "45s", "False"])
    );
    let fresh = json!({"metadata": {"name": "f", "creationTimestamp": ago(45)},
        "spec": {"priorityLevelConfiguration": {"name": "x"}, "matchingPrecedence": 500}});
    assert_eq!(
        cells(&schemas, &fresh),
        json!(["f", "x", 500, "<none>", "45s", "?"])
    );

    let levels = def(
        "flowcontrol.apiserver.k8s.io",
        "prioritylevelconfigurations",
    );
    expect_columns(
        &levels,
        &[
            ("Name", "string", 0),
            ("Type", "string", 0),
            ("NominalConcurrencyShares", "string", 0),
            ("Queues", "string", 0),
            ("HandSize", "string", 0),
            ("QueueLengthLimit", "string", 0),
            ("Age", "string", 0),
        ],
    );
    let limited = json!({"metadata": {"name": "catch-all", "creationTimestamp": ago(45)},
        "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 5,
                 "limitResponse": {"type": "Queue", "queuing": {"queues": 64, "handSize": 8, "queueLengthLimit": 50}}}}});
    assert_eq!(
        cells(&levels, &limited),
        json!(["catch-all", "Limited", 5, 64, 8, 50, "45s"])
    );
    let exempt = json!({"metadata": {"name": "exempt", "creationTimestamp": ago(45)},
        "spec": {"type": "Exempt", "exempt": {}}});
    assert_eq!(
        cells(&levels, &exempt),
        json!([
            "exempt", "Exempt", "<none>", "<none>", "<none>", "<none>", "45s"
        ])
    );
}

#[test]
fn autoscaling_v1_objects_print_their_v2_targets() {
    let v2 = def("autoscaling", "horizontalpodautoscalers");
    let v1 = ResourceDef {
        version: "v1".to_owned(),
        ..v2.clone()
    };
    assert_eq!(columns(&v1), columns(&v2));
    let object = json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web", "creationTimestamp": ago(45)},
        "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 4,
                 "targetCPUUtilizationPercentage": 50},
        "status": {"currentReplicas": 2, "desiredReplicas": 2, "currentCPUUtilizationPercentage": 30}});
    assert_eq!(
        cells(&v1, &object),
        json!([
            "web",
            "Deployment/web",
            "cpu: 30%/50%",
            "<unset>",
            4,
            2,
            "45s"
        ])
    );
}

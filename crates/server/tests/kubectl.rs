//! The real kubectl against an in-process server, on the embedded store and on etcd: discovery,
//! tables, the protobuf bodies of the generator commands (`create configmap`, `create secret`,
//! `create namespace`, `create serviceaccount`, `create deployment`, `create service`,
//! `expose`, `run`, `create job|cronjob|poddisruptionbudget|quota|priorityclass|ingress`), `create -f`, `apply` (created, unchanged, configured), server dry runs and
//! `diff`, server-side apply (conflicts, `--force-conflicts`, managed fields), the three patch
//! types, `label`, `annotate`, `get -w`, `delete` (which waits with a `metadata.name` field
//! selector), namespace deletion and NotFound errors, and ValidatingAdmissionPolicy's denial and
//! warning as kubectl prints them.
//!
//! The etcd variant needs `WATCHKEEPER_TEST_ETCD` (scripts/test starts etcd and sets it); it
//! fails without it rather than skipping.

use crate::common;
use crate::kubectl_support;

use serde_json::Value;
use watchkeeper::config::ServeArgs;

use kubectl_support::{Kubectl, names, with_flags};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_on_the_embedded_store() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::server_with(ServeArgs {
        store: Some("embedded".to_owned()),
        data_dir: Some(dir.path().join("data")),
        durable_commits: Some(false),
        ..ServeArgs::default()
    })
    .await;
    scenario(&Kubectl::new(server.addr)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_on_etcd() {
    let server =
        common::server_with(common::etcd::shared_args(&common::etcd::fresh_prefix())).await;
    scenario(&Kubectl::new(server.addr)).await;
}

async fn scenario(k: &Kubectl) {
    discovery_and_tables(k).await;
    generators_send_protobuf(k).await;
    dry_run_is_not_stored(k).await;
    server_side_apply(k).await;
    create_from_file_and_get_json(k).await;
    watch_sees_changes(k).await;
    apply_twice_then_change(k).await;
    applies_a_chart_of_common_kinds(k).await;
    scales_through_the_scale_subresource(k).await;
    patches_labels_annotations(k).await;
    deletes(k).await;
    custom_resource_definitions(k).await;
    admission_policies(k).await;
}

/// `get namespaces` prints the server's Table with the three built-in namespaces.
async fn discovery_and_tables(k: &Kubectl) {
    let out = k.ok(&["get", "namespaces"]).await;
    assert!(out.starts_with("NAME"), "{out}");
    assert!(out.lines().next().unwrap().contains("STATUS"), "{out}");
    let names = names(&out);
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        assert!(names.iter().any(|n| n == ns), "{ns} missing from:\n{out}");
    }
    // kubectl asks for aggregated discovery (apidiscovery.k8s.io/v2) first.
    let resources = k.ok(&["api-resources", "--no-headers"]).await;
    for (name, api_version, kind) in [
        ("pods", "v1", "Pod"),
        ("configmaps", "v1", "ConfigMap"),
        ("deployments", "apps/v1", "Deployment"),
        ("leases", "coordination.k8s.io/v1", "Lease"),
        ("runtimeclasses", "node.k8s.io/v1", "RuntimeClass"),
        ("csidrivers", "storage.k8s.io/v1", "CSIDriver"),
        ("controllerrevisions", "apps/v1", "ControllerRevision"),
        (
            "validatingadmissionpolicies",
            "admissionregistration.k8s.io/v1",
            "ValidatingAdmissionPolicy",
        ),
        (
            "flowschemas",
            "flowcontrol.apiserver.k8s.io/v1",
            "FlowSchema",
        ),
    ] {
        let line = resources
            .lines()
            .find(|line| line.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("{name} missing from:\n{resources}"));
        assert!(line.contains(api_version) && line.ends_with(kind), "{line}");
    }
    // kube-apiserver's own flow-control objects, printed with kube's columns.
    let levels = k.ok(&["get", "prioritylevelconfigurations"]).await;
    let header: Vec<&str> = levels.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAME",
            "TYPE",
            "NOMINALCONCURRENCYSHARES",
            "QUEUES",
            "HANDSIZE",
            "QUEUELENGTHLIMIT",
            "AGE"
        ],
        "{levels}"
    );
    assert!(
        levels.lines().any(|l| l
            .split_whitespace()
            .take(3)
            .eq(["catch-all", "Limited", "5"])),
        "{levels}"
    );
    let versions = k.ok(&["api-versions"]).await;
    for version in [
        "v1",
        "apps/v1",
        "discovery.k8s.io/v1",
        "autoscaling/v1",
        "autoscaling/v2",
        "node.k8s.io/v1",
    ] {
        assert!(
            versions.lines().any(|l| l == version),
            "{version}:\n{versions}"
        );
    }
    // `explain` walks the served OpenAPI v3 schemas: Kubernetes' own for built-in kinds.
    let strategy = k.ok(&["explain", "deployment.spec.strategy"]).await;
    assert!(
        strategy.contains("FIELD: strategy <DeploymentStrategy>"),
        "{strategy}"
    );
    assert!(
        strategy.contains("rollingUpdate\t<RollingUpdateDeployment>"),
        "{strategy}"
    );
    let port = k
        .ok(&["explain", "pods.spec.containers.livenessProbe.httpGet.port"])
        .await;
    assert!(port.contains("FIELD: port <IntOrString>"), "{port}");
    // The same through `/openapi/v2`, which kubectl reads as gnostic protobuf only.
    let strategy = k
        .ok(&[
            "explain",
            "deployment.spec.strategy",
            "--output",
            "plaintext-openapiv2",
        ])
        .await;
    assert!(
        strategy.contains("RESOURCE: strategy <Object>"),
        "{strategy}"
    );
    assert!(strategy.contains("rollingUpdate\t<Object>"), "{strategy}");
    assert!(
        strategy.contains("Type of deployment. Can be \"Recreate\" or \"RollingUpdate\"."),
        "{strategy}"
    );
}

/// The object as the server stores it, without the fields the server sets.
fn without_server_fields(mut object: Value) -> Value {
    if let Some(meta) = object["metadata"].as_object_mut() {
        for key in [
            "creationTimestamp",
            "generation",
            "resourceVersion",
            "uid",
            "namespace",
        ] {
            meta.remove(key);
        }
    }
    object
}

/// Runs a generator command (which POSTs protobuf), checks kubectl's message, and checks that
/// the object the server stored is the one kubectl built plus the server's defaults: the same command with
/// `--dry-run=client -o json` prints Go's JSON of the object kubectl encoded.
async fn generated(k: &Kubectl, args: &[&str], message: &str, get: &[&str]) -> Value {
    let built = k.json(&with_flags(args, &["--dry-run=client"])).await;
    assert_eq!(k.ok(args).await.trim(), message);
    let stored = k.json(get).await;
    let (stored_fields, built_fields) = (
        without_server_fields(stored.clone()),
        without_server_fields(built),
    );
    assert!(
        kept(&built_fields, &stored_fields),
        "kubectl {} stored something else than it sent:\nsent {built_fields}\nstored {stored_fields}",
        args.join(" ")
    );
    stored
}

/// Whether every non-null value kubectl sent is stored unchanged; the server may only add
/// fields (kube-apiserver's defaults and create-time status).
fn kept(sent: &Value, stored: &Value) -> bool {
    match (sent, stored) {
        (Value::Object(a), Value::Object(b)) => a
            .iter()
            .all(|(k, v)| v.is_null() || b.get(k).is_some_and(|w| kept(v, w))),
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(v, w)| kept(v, w))
        }
        _ => sent == stored,
    }
}

/// The generator commands POST `application/vnd.kubernetes.protobuf`; the server decodes it
/// and answers JSON, which kubectl accepts.
async fn generators_send_protobuf(k: &Kubectl) {
    let cm = generated(
        k,
        &[
            "create",
            "configmap",
            "demo",
            "--from-literal=a=1",
            "--from-literal=b=two",
        ],
        "configmap/demo created",
        &["get", "configmap", "demo"],
    )
    .await;
    assert_eq!(cm["data"], serde_json::json!({"a": "1", "b": "two"}));
    assert_eq!(cm["metadata"]["namespace"], "default");
    assert!(cm["metadata"]["creationTimestamp"].is_string(), "{cm}");

    // Not UTF-8, so kubectl puts it in binaryData (protobuf bytes, base64 in JSON).
    let binary = k.dir().join("blob.bin");
    std::fs::write(&binary, [0_u8, 1, 2, 255]).unwrap();
    let from_file = format!("--from-file=blob={}", binary.display());
    let cm = generated(
        k,
        &["create", "configmap", "binary", &from_file],
        "configmap/binary created",
        &["get", "configmap", "binary"],
    )
    .await;
    assert_eq!(cm["binaryData"]["blob"], "AAEC/w==", "{cm}");

    let secret = generated(
        k,
        &[
            "create",
            "secret",
            "generic",
            "creds",
            "--from-literal=password=hunter2",
        ],
        "secret/creds created",
        &["get", "secret", "creds"],
    )
    .await;
    assert_eq!(secret["data"]["password"], "aHVudGVyMg==");

    // RBAC generators (protobuf too).
    let role = generated(
        k,
        &[
            "create",
            "role",
            "pod-reader",
            "--verb=get,list",
            "--resource=pods",
        ],
        "role.rbac.authorization.k8s.io/pod-reader created",
        &["get", "role", "pod-reader"],
    )
    .await;
    assert_eq!(
        role["rules"],
        serde_json::json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}])
    );
    let binding = generated(
        k,
        &[
            "create",
            "rolebinding",
            "read-pods",
            "--role=pod-reader",
            "--user=alice",
            "--serviceaccount=default:robot",
        ],
        "rolebinding.rbac.authorization.k8s.io/read-pods created",
        &["get", "rolebinding", "read-pods"],
    )
    .await;
    assert_eq!(binding["roleRef"]["kind"], "Role");
    assert_eq!(
        binding["subjects"].as_array().unwrap().len(),
        2,
        "{binding}"
    );
    generated(
        k,
        &[
            "create",
            "clusterrole",
            "node-reader",
            "--verb=get",
            "--resource=nodes",
            "--non-resource-url=/healthz",
        ],
        "clusterrole.rbac.authorization.k8s.io/node-reader created",
        &["get", "clusterrole", "node-reader"],
    )
    .await;
    generated(
        k,
        &[
            "create",
            "clusterrolebinding",
            "read-nodes",
            "--clusterrole=node-reader",
            "--group=ops",
        ],
        "clusterrolebinding.rbac.authorization.k8s.io/read-nodes created",
        &["get", "clusterrolebinding", "read-nodes"],
    )
    .await;
    for object in [
        "role/pod-reader",
        "rolebinding/read-pods",
        "clusterrole/node-reader",
        "clusterrolebinding/read-nodes",
    ] {
        k.ok(&["delete", object]).await;
    }

    // The server adds the name label and the Active phase to a namespace, as Kubernetes does.
    let built = k
        .json(&["create", "namespace", "team-a", "--dry-run=client"])
        .await;
    assert_eq!(
        built,
        serde_json::json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "team-a", "creationTimestamp": null}, "spec": {}, "status": {}})
    );
    assert_eq!(
        k.ok(&["create", "namespace", "team-a"]).await.trim(),
        "namespace/team-a created"
    );
    let ns = k.json(&["get", "namespace", "team-a"]).await;
    assert_eq!(ns["status"]["phase"], "Active");
    assert_eq!(
        ns["metadata"]["labels"]["kubernetes.io/metadata.name"],
        "team-a"
    );

    generated(
        k,
        &["create", "serviceaccount", "bot", "-n", "team-a"],
        "serviceaccount/bot created",
        &["get", "serviceaccount", "bot", "-n", "team-a"],
    )
    .await;

    let deploy = generated(
        k,
        &[
            "create",
            "deployment",
            "web",
            "--image=nginx:1.27",
            "--replicas=2",
            "--port=8080",
            "-n",
            "team-a",
        ],
        "deployment.apps/web created",
        &["get", "deployment", "web", "-n", "team-a"],
    )
    .await;
    assert_eq!(deploy["spec"]["replicas"], 2);
    assert_eq!(deploy["spec"]["selector"]["matchLabels"]["app"], "web");
    let container = &deploy["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["image"], "nginx:1.27");
    assert_eq!(container["ports"][0]["containerPort"], 8080);

    let svc = generated(
        k,
        &[
            "create",
            "service",
            "clusterip",
            "web",
            "--tcp=80:8080",
            "-n",
            "team-a",
        ],
        "service/web created",
        &["get", "service", "web", "-n", "team-a"],
    )
    .await;
    assert_eq!(svc["spec"]["ports"][0]["port"], 80);
    assert_eq!(svc["spec"]["ports"][0]["targetPort"], 8080);
    assert_eq!(svc["spec"]["type"], "ClusterIP");

    generated(
        k,
        &[
            "create",
            "service",
            "nodeport",
            "np",
            "--tcp=80:http",
            "--node-port=30080",
            "-n",
            "team-a",
        ],
        "service/np created",
        &["get", "service", "np", "-n", "team-a"],
    )
    .await;

    // expose reads the deployment's selector, then POSTs the Service.
    let svc = generated(
        k,
        &[
            "expose",
            "deployment",
            "web",
            "--name=web-public",
            "--port=81",
            "--target-port=8080",
            "-n",
            "team-a",
        ],
        "service/web-public exposed",
        &["get", "service", "web-public", "-n", "team-a"],
    )
    .await;
    assert_eq!(svc["spec"]["selector"]["app"], "web");

    let pod = generated(
        k,
        &[
            "run",
            "once",
            "--image=busybox:1.36",
            "--restart=Never",
            "--env=MODE=test",
            "--labels=role=job",
            "--port=90",
            "--privileged",
            "-n",
            "team-a",
            "--",
            "sleep",
            "1",
        ],
        "pod/once created",
        &["get", "pod", "once", "-n", "team-a"],
    )
    .await;
    let container = &pod["spec"]["containers"][0];
    assert_eq!(container["image"], "busybox:1.36");
    assert_eq!(container["args"], serde_json::json!(["sleep", "1"]));
    assert_eq!(
        container["env"][0],
        serde_json::json!({"name": "MODE", "value": "test"})
    );
    assert_eq!(container["securityContext"]["privileged"], true);
    assert_eq!(pod["spec"]["restartPolicy"], "Never");

    let job = generated(
        k,
        &[
            "create",
            "job",
            "batch1",
            "--image=busybox:1.36",
            "-n",
            "team-a",
            "--",
            "date",
        ],
        "job.batch/batch1 created",
        &["get", "job", "batch1", "-n", "team-a"],
    )
    .await;
    assert_eq!(
        job["spec"]["template"]["spec"]["containers"][0]["command"],
        serde_json::json!(["date"])
    );
    let cron = generated(
        k,
        &[
            "create",
            "cronjob",
            "nightly",
            "--image=busybox:1.36",
            "--schedule=0 3 * * *",
            "-n",
            "team-a",
        ],
        "cronjob.batch/nightly created",
        &["get", "cronjob", "nightly", "-n", "team-a"],
    )
    .await;
    assert_eq!(cron["spec"]["schedule"], "0 3 * * *");
    assert_eq!(
        cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["image"],
        "busybox:1.36"
    );
    let pdb = generated(
        k,
        &[
            "create",
            "poddisruptionbudget",
            "web",
            "--selector=app=web",
            "--min-available=1",
            "-n",
            "team-a",
        ],
        "poddisruptionbudget.policy/web created",
        &["get", "pdb", "web", "-n", "team-a"],
    )
    .await;
    assert_eq!(pdb["spec"]["minAvailable"], 1);
    assert_eq!(pdb["spec"]["selector"]["matchLabels"]["app"], "web");
    let quota = generated(
        k,
        &[
            "create",
            "quota",
            "small",
            "--hard=cpu=1,pods=4",
            "--scopes=NotBestEffort",
            "-n",
            "team-a",
        ],
        "resourcequota/small created",
        &["get", "quota", "small", "-n", "team-a"],
    )
    .await;
    assert_eq!(quota["spec"]["hard"]["pods"], "4");
    let priority = generated(
        k,
        &[
            "create",
            "priorityclass",
            "batch-low",
            "--value=100",
            "--description=low",
        ],
        "priorityclass.scheduling.k8s.io/batch-low created",
        &["get", "priorityclass", "batch-low"],
    )
    .await;
    assert_eq!(priority["value"], 100);
    let ingress = generated(
        k,
        &[
            "create",
            "ingress",
            "front",
            "--class=nginx",
            "--rule=example.com/api*=web:8080",
            "--rule=secure.example.com/=web:8080,tls=cert",
            "-n",
            "team-a",
        ],
        "ingress.networking.k8s.io/front created",
        &["get", "ingress", "front", "-n", "team-a"],
    )
    .await;
    let path = &ingress["spec"]["rules"][0]["http"]["paths"][0];
    assert_eq!(path["path"], "/api");
    assert_eq!(path["pathType"], "Prefix");
    assert_eq!(path["backend"]["service"]["port"]["number"], 8080);
    assert_eq!(ingress["spec"]["tls"][0]["secretName"], "cert");

    let out = k.ok(&["get", "all", "-n", "team-a"]).await;
    for name in ["pod/once", "service/web", "deployment.apps/web"] {
        assert!(out.contains(name), "{name} missing from:\n{out}");
    }
}

/// Server-side dry runs (`create`, `apply`, `delete` with `--dry-run=server`) answer what would
/// be done and store nothing; `diff` (a dry-run create or patch) shows what `apply` would change.
async fn dry_run_is_not_stored(k: &Kubectl) {
    let out = k
        .ok(&[
            "create",
            "configmap",
            "dry",
            "--from-literal=a=1",
            "--dry-run=server",
        ])
        .await;
    assert_eq!(out.trim(), "configmap/dry created (server dry run)");
    let missing = k.fails(&["get", "configmap", "dry"]).await;
    assert!(missing.stderr.contains("NotFound"), "{}", missing.stderr);

    let manifest = |value: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: dry\ndata:\n  a: \"{value}\"\n"
        )
    };
    let file = k.manifest("dry.yaml", &manifest("1"));
    let out = k.ok(&["apply", "-f", &file, "--dry-run=server"]).await;
    assert_eq!(out.trim(), "configmap/dry created (server dry run)");
    assert!(!k.run(&["get", "configmap", "dry"]).await.success());

    // diff exits 1 when the object would change (here: be created), 0 when not.
    let diff = k.run(&["diff", "-f", &file]).await;
    assert_eq!(diff.code, Some(1), "{diff:?}");
    assert!(diff.stdout.contains("+  a: \"1\""), "{}", diff.stdout);
    assert!(!k.run(&["get", "configmap", "dry"]).await.success());
    assert_eq!(
        k.ok(&["apply", "-f", &file]).await.trim(),
        "configmap/dry created"
    );
    let diff = k.run(&["diff", "-f", &file]).await;
    assert_eq!(diff.code, Some(0), "{diff:?}");
    let file = k.manifest("dry.yaml", &manifest("2"));
    let diff = k.run(&["diff", "-f", &file]).await;
    assert_eq!(diff.code, Some(1), "{diff:?}");
    assert!(diff.stdout.contains("-  a: \"1\""), "{}", diff.stdout);
    assert!(diff.stdout.contains("+  a: \"2\""), "{}", diff.stdout);
    let out = k.ok(&["apply", "-f", &file, "--dry-run=server"]).await;
    assert_eq!(out.trim(), "configmap/dry configured (server dry run)");
    let stored = k.json(&["get", "configmap", "dry"]).await;
    assert_eq!(stored["data"]["a"], "1", "{stored}");

    let out = k
        .ok(&["delete", "configmap", "dry", "--dry-run=server"])
        .await;
    assert_eq!(out.trim(), "configmap \"dry\" deleted (server dry run)");
    let again = k.json(&["get", "configmap", "dry"]).await;
    assert_eq!(again, stored);
    k.ok(&["delete", "configmap", "dry"]).await;
}

/// `apply --server-side`: create, update, a conflict with another field manager, taking the
/// fields with `--force-conflicts`, a server dry run, and the managed fields shown by
/// `get --show-managed-fields`.
async fn server_side_apply(k: &Kubectl) {
    let manifest = |value: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\ndata:\n  a: \"{value}\"\n  b: keep\n"
        )
    };
    let file = k.manifest("ssa.yaml", &manifest("1"));
    let apply = |file: &str| {
        vec!["apply", "--server-side", "-f"]
            .into_iter()
            .chain([file])
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let run = |args: Vec<String>| async move {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        k.run(&args).await
    };
    let out = run(apply(&file)).await;
    assert!(out.success(), "{out:?}");
    assert_eq!(out.stdout.trim(), "configmap/ssa serverside-applied");
    let out = run(apply(&file)).await;
    assert_eq!(
        out.stdout.trim(),
        "configmap/ssa serverside-applied",
        "{out:?}"
    );
    let file = k.manifest("ssa.yaml", &manifest("2"));
    assert!(run(apply(&file)).await.success());
    assert_eq!(k.json(&["get", "configmap", "ssa"]).await["data"]["a"], "2");

    // Another manager changing kubectl's field: a conflict, nothing changed.
    let other = k.manifest(
        "ssa-other.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\ndata:\n  a: \"3\"\n",
    );
    let out = k
        .fails(&[
            "apply",
            "--server-side",
            "--field-manager=other",
            "-f",
            &other,
        ])
        .await;
    assert!(
        out.stderr
            .contains(r#"Apply failed with 1 conflict: conflict with "kubectl": .data.a"#),
        "{}",
        out.stderr
    );
    assert_eq!(k.json(&["get", "configmap", "ssa"]).await["data"]["a"], "2");

    // A server dry run of the forced apply changes nothing; the forced apply takes the field.
    let out = k
        .ok(&[
            "apply",
            "--server-side",
            "--field-manager=other",
            "--force-conflicts",
            "--dry-run=server",
            "-f",
            &other,
        ])
        .await;
    assert_eq!(
        out.trim(),
        "configmap/ssa serverside-applied (server dry run)"
    );
    assert_eq!(k.json(&["get", "configmap", "ssa"]).await["data"]["a"], "2");
    k.ok(&[
        "apply",
        "--server-side",
        "--field-manager=other",
        "--force-conflicts",
        "-f",
        &other,
    ])
    .await;
    let cm = k
        .json(&["get", "configmap", "ssa", "--show-managed-fields"])
        .await;
    assert_eq!(
        cm["data"],
        serde_json::json!({"a": "3", "b": "keep"}),
        "{cm}"
    );
    let managed = cm["metadata"]["managedFields"].as_array().unwrap();
    let fields = |manager: &str| {
        managed
            .iter()
            .find(|e| e["manager"] == manager && e["operation"] == "Apply")
            .map(|e| e["fieldsV1"].clone())
    };
    assert_eq!(
        fields("other"),
        Some(serde_json::json!({"f:data": {"f:a": {}}})),
        "{cm}"
    );
    assert_eq!(
        fields("kubectl"),
        Some(serde_json::json!({"f:data": {"f:b": {}}})),
        "{cm}"
    );
    let yaml = k
        .ok(&[
            "get",
            "configmap",
            "ssa",
            "-o",
            "yaml",
            "--show-managed-fields",
        ])
        .await;
    assert!(yaml.contains("managedFields:"), "{yaml}");
    assert!(yaml.contains("manager: other"), "{yaml}");
    assert!(yaml.contains("operation: Apply"), "{yaml}");
    let hidden = k.ok(&["get", "configmap", "ssa", "-o", "yaml"]).await;
    assert!(!hidden.contains("managedFields"), "{hidden}");

    // A Deployment: containers merge by name; a changed image is an update.
    let deployment = |image: &str| {
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: ssa-web\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {{app: ssa-web}}\n  template:\n    metadata:\n      labels: {{app: ssa-web}}\n    spec:\n      containers:\n      - name: web\n        image: {image}\n        ports:\n        - containerPort: 80\n"
        )
    };
    let file = k.manifest("ssa-web.yaml", &deployment("nginx:1.27"));
    assert!(run(apply(&file)).await.success());
    let file = k.manifest("ssa-web.yaml", &deployment("nginx:1.28"));
    assert!(run(apply(&file)).await.success());
    let web = k.json(&["get", "deployment", "ssa-web"]).await;
    let containers = web["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap();
    assert_eq!(containers.len(), 1, "{web}");
    assert_eq!(containers[0]["image"], "nginx:1.28");
    assert_eq!(web["metadata"]["generation"], 2, "{web}");
    k.ok(&["delete", "deployment", "ssa-web"]).await;
    k.ok(&["delete", "configmap", "ssa"]).await;
}

/// `create -f` sends JSON; `get -o json` lists and gets parse.
async fn create_from_file_and_get_json(k: &Kubectl) {
    let file = k.manifest(
        "cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-file\n  labels: {source: file}\ndata:\n  key: value\n",
    );
    assert_eq!(
        k.ok(&["create", "-f", &file]).await.trim(),
        "configmap/from-file created"
    );
    let list = k.json(&["get", "configmaps", "-l", "source=file"]).await;
    assert_eq!(list["kind"], "List");
    let items = list["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{list}");
    assert_eq!(items[0]["data"]["key"], "value");
    let again = k.fails(&["create", "-f", &file]).await;
    assert!(again.stderr.contains("AlreadyExists"), "{}", again.stderr);
}

/// `get -w` prints the initial rows, then one row per change made by another kubectl.
async fn watch_sees_changes(k: &Kubectl) {
    let mut watch = k.spawn(&["get", "configmaps", "-w"]);
    watch.line_matching(|l| l.starts_with("NAME")).await;
    watch.line_matching(|l| l.starts_with("demo ")).await;
    k.ok(&["create", "configmap", "watched", "--from-literal=x=1"])
        .await;
    let line = watch.line_matching(|l| l.starts_with("watched ")).await;
    assert!(line.split_whitespace().nth(1) == Some("1"), "{line}");
    k.ok(&[
        "patch",
        "configmap",
        "watched",
        "-p",
        r#"{"data":{"y":"2"}}"#,
    ])
    .await;
    let line = watch.line_matching(|l| l.starts_with("watched ")).await;
    assert!(line.split_whitespace().nth(1) == Some("2"), "{line}");
}

/// `apply` creates, then reports unchanged, then configures a changed image.
async fn apply_twice_then_change(k: &Kubectl) {
    let pod = |image: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: applied\n  labels: {{app: applied}}\nspec:\n  containers:\n  - name: main\n    image: {image}\n"
        )
    };
    let file = k.manifest("pod.yaml", &pod("nginx:1.27"));
    assert_eq!(
        k.ok(&["apply", "-f", &file]).await.trim(),
        "pod/applied created"
    );
    assert_eq!(
        k.ok(&["apply", "-f", &file]).await.trim(),
        "pod/applied unchanged"
    );
    let file = k.manifest("pod.yaml", &pod("nginx:1.28"));
    assert_eq!(
        k.ok(&["apply", "-f", &file]).await.trim(),
        "pod/applied configured"
    );
    let image = k
        .ok(&[
            "get",
            "pod",
            "applied",
            "-o",
            "jsonpath={.spec.containers[0].image}",
        ])
        .await;
    assert_eq!(image, "nginx:1.28");
    let pod = k.json(&["get", "pod", "applied"]).await;
    let last_applied =
        pod["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
            .as_str()
            .unwrap_or_default();
    assert!(last_applied.contains("nginx:1.28"), "{pod}");
}

/// What a typical Helm chart or operator bundle holds beyond workloads: RBAC, a Job and a
/// CronJob, an Ingress and its class, a NetworkPolicy, a PodDisruptionBudget, an
/// autoscaler, a PersistentVolumeClaim, a PriorityClass and a StorageClass — applied from one
/// file, listed back, and defaulted as kube-apiserver defaults them.
async fn applies_a_chart_of_common_kinds(k: &Kubectl) {
    let chart = r#"
apiVersion: v1
kind: ServiceAccount
metadata: {name: chart}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: chart}
rules:
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: chart}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: chart}
subjects:
- {kind: ServiceAccount, name: chart, namespace: default}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: chart-reader}
rules:
- apiGroups: [apps]
  resources: [deployments]
  verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: chart-reader}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: chart-reader}
subjects:
- {kind: ServiceAccount, name: chart, namespace: default}
---
apiVersion: batch/v1
kind: Job
metadata: {name: migrate}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: main, image: busybox:1.36}]
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: nightly}
spec:
  schedule: "0 3 * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: OnFailure
          containers: [{name: main, image: busybox:1.36}]
---
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: chart}
spec: {controller: example.com/ingress}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: chart}
spec:
  ingressClassName: chart
  rules:
  - host: chart.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: chart, port: {number: 80}}}}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: chart}
spec:
  podSelector: {matchLabels: {app: chart}}
  ingress: [{ports: [{port: 80}]}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: chart}
spec: {minAvailable: 1, selector: {matchLabels: {app: chart}}}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: chart}
spec:
  maxReplicas: 4
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: chart}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: chart}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: chart-high}
value: 1000
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: chart-fast}
provisioner: example.com/fast
"#;
    let file = k.manifest("chart.yaml", chart);
    let out = k.ok(&["apply", "-f", &file]).await;
    for created in [
        "serviceaccount/chart created",
        "role.rbac.authorization.k8s.io/chart created",
        "rolebinding.rbac.authorization.k8s.io/chart created",
        "clusterrole.rbac.authorization.k8s.io/chart-reader created",
        "clusterrolebinding.rbac.authorization.k8s.io/chart-reader created",
        "job.batch/migrate created",
        "cronjob.batch/nightly created",
        "ingressclass.networking.k8s.io/chart created",
        "ingress.networking.k8s.io/chart created",
        "networkpolicy.networking.k8s.io/chart created",
        "poddisruptionbudget.policy/chart created",
        "horizontalpodautoscaler.autoscaling/chart created",
        "persistentvolumeclaim/chart created",
        "priorityclass.scheduling.k8s.io/chart-high created",
        "storageclass.storage.k8s.io/chart-fast created",
    ] {
        assert!(
            out.lines().any(|l| l == created),
            "{created} missing from:\n{out}"
        );
    }
    // A second apply stores nothing new. (kubectl still sends, and reports as
    // "configured", a patch for the PodDisruptionBudget's replace-strategy selector and the
    // NetworkPolicy's defaulted port protocol, as against kube-apiserver; the server stores
    // no change for them.)
    let kinds = "sa,roles,rolebindings,clusterroles,clusterrolebindings,jobs,cronjobs,ingressclasses,ingresses,networkpolicies,pdb,hpa,pvc,priorityclasses,storageclasses";
    let versions = || async {
        k.ok(&[
            "get",
            kinds,
            "-o",
            "jsonpath={.items[*].metadata.resourceVersion}",
        ])
        .await
    };
    let before = versions().await;
    let again = k.ok(&["apply", "-f", &file]).await;
    assert_eq!(again.lines().count(), 15, "{again}");
    assert_eq!(
        versions().await,
        before,
        "a second apply stores nothing:\n{again}"
    );
    let names = k
        .ok(&[
            "get",
            "roles,rolebindings,jobs,cronjobs,ingresses,pdb,hpa,pvc",
            "-o",
            "name",
        ])
        .await;
    for name in [
        "role.rbac.authorization.k8s.io/chart",
        "job.batch/migrate",
        "cronjob.batch/nightly",
        "ingress.networking.k8s.io/chart",
        "poddisruptionbudget.policy/chart",
        "horizontalpodautoscaler.autoscaling/chart",
        "persistentvolumeclaim/chart",
    ] {
        assert!(
            names.lines().any(|l| l == name),
            "{name} missing from:\n{names}"
        );
    }
    let job = k.json(&["get", "job", "migrate"]).await;
    assert_eq!(job["spec"]["backoffLimit"], 6, "{job}");
    assert_eq!(job["spec"]["completions"], 1, "{job}");
    let netpol = k.json(&["get", "networkpolicy", "chart"]).await;
    assert_eq!(
        netpol["spec"]["policyTypes"],
        serde_json::json!(["Ingress"])
    );
    let out = k.ok(&["delete", "-f", &file]).await;
    assert_eq!(out.lines().count(), 15, "{out}");
}

/// `kubectl scale` reads and writes `deployments/X/scale` (an `autoscaling/v1` Scale over
/// `spec.replicas`), with `--current-replicas` as a precondition.
async fn scales_through_the_scale_subresource(k: &Kubectl) {
    k.ok(&[
        "create",
        "deployment",
        "web",
        "--image=nginx:1.27",
        "--replicas=2",
    ])
    .await;
    assert_eq!(
        k.ok(&["scale", "deployment", "web", "--replicas=5"])
            .await
            .trim(),
        "deployment.apps/web scaled"
    );
    let replicas = k
        .ok(&[
            "get",
            "deployment",
            "web",
            "-o",
            "jsonpath={.spec.replicas}",
        ])
        .await;
    assert_eq!(replicas, "5");
    let refused = k
        .fails(&[
            "scale",
            "deployment",
            "web",
            "--current-replicas=3",
            "--replicas=4",
        ])
        .await;
    assert!(
        refused.stderr.contains("Expected replicas to be 3, was 5"),
        "{}",
        refused.stderr
    );
    let scale: Value = serde_json::from_str(
        &k.ok(&[
            "get",
            "--raw",
            "/apis/apps/v1/namespaces/default/deployments/web/scale",
        ])
        .await,
    )
    .unwrap();
    assert_eq!(scale["kind"], "Scale");
    assert_eq!(scale["spec"]["replicas"], 5);
    assert_eq!(scale["status"]["selector"], "app=web");
    k.ok(&["delete", "deployment", "web"]).await;
}

async fn patches_labels_annotations(k: &Kubectl) {
    let jsonpath = |path: &str| format!("jsonpath={path}");
    assert_eq!(
        k.ok(&[
            "patch",
            "configmap",
            "demo",
            "--type=merge",
            "-p",
            r#"{"data":{"a":"2"}}"#
        ])
        .await
        .trim(),
        "configmap/demo patched"
    );
    k.ok(&[
        "patch",
        "configmap",
        "demo",
        "--type=json",
        "-p",
        r#"[{"op":"add","path":"/data/c","value":"3"},{"op":"remove","path":"/data/b"}]"#,
    ])
    .await;
    let cm = k.json(&["get", "configmap", "demo"]).await;
    assert_eq!(cm["data"], serde_json::json!({"a": "2", "c": "3"}));

    // Strategic merge: the container list merges by name, keeping the port.
    k.ok(&[
        "patch",
        "deployment",
        "web",
        "-n",
        "team-a",
        "-p",
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"nginx","image":"nginx:1.28"}]}}}}"#,
    ])
    .await;
    let deploy = k.json(&["get", "deployment", "web", "-n", "team-a"]).await;
    let containers = deploy["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap();
    assert_eq!(containers.len(), 1, "{deploy}");
    assert_eq!(containers[0]["image"], "nginx:1.28");
    assert_eq!(containers[0]["ports"][0]["containerPort"], 8080);
    assert_eq!(deploy["metadata"]["generation"], 2, "{deploy}");

    assert_eq!(
        k.ok(&["label", "configmap", "demo", "tier=gold"])
            .await
            .trim(),
        "configmap/demo labeled"
    );
    assert_eq!(
        k.ok(&["annotate", "configmap", "demo", "note=hello"])
            .await
            .trim(),
        "configmap/demo annotated"
    );
    assert_eq!(
        k.ok(&[
            "get",
            "configmap",
            "demo",
            "-o",
            &jsonpath("{.metadata.labels.tier}")
        ])
        .await,
        "gold"
    );
    assert_eq!(
        k.ok(&[
            "get",
            "configmap",
            "demo",
            "-o",
            &jsonpath("{.metadata.annotations.note}")
        ])
        .await,
        "hello"
    );
    let selected = k
        .ok(&["get", "configmaps", "-l", "tier=gold", "-o", "name"])
        .await;
    assert_eq!(selected.trim(), "configmap/demo");
    // Overwriting a label needs --overwrite; removing one is `key-`.
    let out = k
        .fails(&["label", "configmap", "demo", "tier=silver"])
        .await;
    assert!(out.stderr.contains("already has a value"), "{}", out.stderr);
    k.ok(&["label", "configmap", "demo", "tier-"]).await;
    let cm: Value = k.json(&["get", "configmap", "demo"]).await;
    assert!(cm["metadata"]["labels"].get("tier").is_none(), "{cm}");
}

async fn deletes(k: &Kubectl) {
    // delete waits for the object to be gone (a watch with fieldSelector=metadata.name).
    assert_eq!(
        k.ok(&["delete", "configmap", "demo"]).await.trim(),
        "configmap \"demo\" deleted"
    );
    let missing = k.fails(&["get", "configmap", "demo"]).await;
    assert!(missing.stderr.contains("NotFound"), "{}", missing.stderr);
    assert!(
        missing.stderr.contains(r#"configmaps "demo" not found"#),
        "{}",
        missing.stderr
    );
    let missing = k.fails(&["delete", "configmap", "never-was"]).await;
    assert!(missing.stderr.contains("NotFound"), "{}", missing.stderr);

    k.ok(&["delete", "pod", "applied", "--wait=true"]).await;

    // Deleting a namespace removes what is in it.
    let out = k.ok(&["delete", "namespace", "team-a"]).await;
    assert_eq!(out.trim(), "namespace \"team-a\" deleted");
    let missing = k.fails(&["get", "namespace", "team-a"]).await;
    assert!(missing.stderr.contains("NotFound"), "{}", missing.stderr);
    for kind in ["deployments", "services", "pods", "serviceaccounts"] {
        let list = k.json(&["get", kind, "-n", "team-a"]).await;
        assert_eq!(
            list["items"],
            serde_json::json!([]),
            "{kind} left in team-a"
        );
    }
}

/// `apply -f crd.yaml`, `wait --for condition=established`, then the new kind: `apply`, `get`
/// (the server's Table), `get -o json`; `delete crd` takes its objects with it.
async fn custom_resource_definitions(k: &Kubectl) {
    let crd = k.manifest(
        "crd.yaml",
        "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd]}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            description: What the widget should be.
            properties:
              size: {type: integer, description: How many parts the widget has.}
",
    );
    assert_eq!(
        k.ok(&["apply", "-f", &crd]).await.trim(),
        "customresourcedefinition.apiextensions.k8s.io/widgets.example.com created"
    );
    assert_eq!(
        k.ok(&[
            "wait",
            "--for",
            "condition=established",
            "--timeout=10s",
            "crd/widgets.example.com"
        ])
        .await
        .trim(),
        "customresourcedefinition.apiextensions.k8s.io/widgets.example.com condition met"
    );
    let widget = |size: &str| {
        format!(
            "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w1\nspec:\n  size: {size}\n"
        )
    };
    let file = k.manifest("widget.yaml", &widget("3"));
    assert_eq!(
        k.ok(&["apply", "-f", &file]).await.trim(),
        "widget.example.com/w1 created"
    );
    // `explain` reads the kind's schema from the CRD, as kube-apiserver publishes it.
    let explained = k.ok(&["explain", "widgets.spec"]).await;
    assert!(explained.contains("FIELD: spec <Object>"), "{explained}");
    assert!(
        explained.contains("What the widget should be."),
        "{explained}"
    );
    assert!(explained.contains("size\t<integer>"), "{explained}");
    assert!(
        explained.contains("How many parts the widget has."),
        "{explained}"
    );
    // `/openapi/v2` follows the CRD too (its documents are rebuilt when the kinds change).
    let explained = k
        .ok(&["explain", "widgets.spec", "--output", "plaintext-openapiv2"])
        .await;
    assert!(explained.contains("RESOURCE: spec <Object>"), "{explained}");
    assert!(explained.contains("size\t<integer>"), "{explained}");
    let out = k.ok(&["get", "wd"]).await;
    assert!(out.starts_with("NAME"), "{out}");
    assert_eq!(names(&out), ["w1"]);
    let object = k.json(&["get", "widget", "w1"]).await;
    assert_eq!(object["spec"]["size"], 3);
    let bad = k.manifest("bad-widget.yaml", &widget("big"));
    let refused = k.fails(&["apply", "-f", &bad]).await;
    assert!(
        refused
            .stderr
            .contains("spec.size: Invalid value: \"string\": spec.size in body must be of type integer: \"string\""),
        "{}",
        refused.stderr
    );
    assert_eq!(
        k.ok(&["delete", "crd", "widgets.example.com"]).await.trim(),
        "customresourcedefinition.apiextensions.k8s.io \"widgets.example.com\" deleted"
    );
    // Whether kubectl's discovery cache still names the kind or not, the kind is gone.
    let gone = k.fails(&["get", "widgets"]).await;
    assert!(
        gone.stderr
            .contains("the server doesn't have a resource type \"widgets\"")
            || gone
                .stderr
                .contains("the server could not find the requested resource"),
        "{}",
        gone.stderr
    );
}

/// A ValidatingAdmissionPolicy's denial and warning as kubectl prints them: kube's 422 is
/// `The deployments "..." is invalid: : ValidatingAdmissionPolicy ...` (kubectl's rendering
/// of the Status's one cause, which has no field), a `Warn` binding's warning is kubectl's
/// `Warning:` line. Bound by object labels, so the scenario's other objects are not touched;
/// deleted at the end.
async fn admission_policies(k: &Kubectl) {
    let policy = k.manifest(
        "policy.yaml",
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata: {name: demo-policy.example.com}\nspec:\n  failurePolicy: Fail\n  matchConstraints:\n    resourceRules:\n    - {apiGroups: [apps], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [deployments]}\n  validations:\n  - expression: object.spec.replicas <= 5\n---\napiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\nmetadata: {name: demo-binding-test.example.com}\nspec:\n  policyName: demo-policy.example.com\n  validationActions: [Deny]\n  matchResources:\n    objectSelector: {matchLabels: {vap: deny}}\n---\napiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\nmetadata: {name: demo-binding-warn.example.com}\nspec:\n  policyName: demo-policy.example.com\n  validationActions: [Warn]\n  matchResources:\n    objectSelector: {matchLabels: {vap: warn}}\n",
    );
    k.ok(&["create", "-f", &policy]).await;
    let deployment = |name: &str, label: &str| {
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: {name}, labels: {{vap: {label}}}}}\nspec:\n  replicas: 6\n  selector: {{matchLabels: {{app: {name}}}}}\n  template:\n    metadata: {{labels: {{app: {name}}}}}\n    spec: {{containers: [{{name: c, image: nginx}}]}}\n"
        )
    };
    let denied = k.manifest("denied.yaml", &deployment("vap-denied", "deny"));
    let refused = k.fails(&["create", "-f", &denied]).await;
    assert_eq!(
        refused.stderr.trim(),
        "The deployments \"vap-denied\" is invalid: : ValidatingAdmissionPolicy 'demo-policy.example.com' with binding 'demo-binding-test.example.com' denied request: failed expression: object.spec.replicas <= 5",
        "{refused:?}"
    );
    let warned = k.manifest("warned.yaml", &deployment("vap-warned", "warn"));
    let output = k.run(&["create", "-f", &warned]).await;
    assert!(output.success(), "{output:?}");
    assert_eq!(output.stdout.trim(), "deployment.apps/vap-warned created");
    assert_eq!(
        output.stderr.trim(),
        "Warning: Validation failed for ValidatingAdmissionPolicy 'demo-policy.example.com' with binding 'demo-binding-warn.example.com': failed expression: object.spec.replicas <= 5",
        "{output:?}"
    );
    k.ok(&["delete", "-f", &policy]).await;
    k.ok(&["delete", "deployment", "vap-warned"]).await;
}

//! The audit log end to end (`--audit-policy-file`, `--audit-log-path`): a server with a
//! policy and a log file, requests from kubectl and raw HTTP, and the file read back — each
//! event's fields as kube-apiserver writes them; rotation by size; the refusals at start; a
//! log that cannot be written in the blocking and blocking-strict modes.

use crate::common;
use crate::kubectl_support;

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use watchkeeper::Server;
use watchkeeper::config::ServeArgs;

use common::*;
use kubectl_support::Kubectl;

/// kube's usual shape: health and metrics not logged, ConfigMaps with their bodies, pods and
/// namespaces as metadata; everything else not logged.
const POLICY: &str = r#"
apiVersion: audit.k8s.io/v1
kind: Policy
omitManagedFields: true
rules:
- level: None
  nonResourceURLs: ["/metrics", "/healthz*", "/readyz*", "/livez*"]
- level: RequestResponse
  resources: [{group: "", resources: ["configmaps"]}]
- level: Metadata
  resources: [{group: "", resources: ["pods", "namespaces", "pods/log"]}]
"#;

const TOKENS: &str = "admin-token,admin,1,\"system:masters\"\nreader-token,reader,2\n";

fn abac() -> String {
    [
        json!({"group": "system:masters", "namespace": "*", "resource": "*", "apiGroup": "*", "nonResourcePath": "*"}),
        json!({"user": "reader", "namespace": "*", "resource": "*", "apiGroup": "*", "readonly": true}),
    ]
    .iter()
    .map(|spec| {
        json!({"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": spec})
            .to_string()
    })
    .collect::<Vec<_>>()
    .join("\n")
}

struct Audited {
    server: Server,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

/// A server with [`POLICY`] (or `policy`) logging to a file of its own; `args` adds flags.
async fn audited(policy: &str, args: ServeArgs) -> Audited {
    let dir = tempfile::tempdir().unwrap();
    let policy_file = dir.path().join("policy.yaml");
    std::fs::write(&policy_file, policy).unwrap();
    let log = dir.path().join("audit.log");
    let server = server_with(ServeArgs {
        audit_policy_file: Some(policy_file),
        audit_log_path: Some(log.clone()),
        ..args
    })
    .await;
    Audited {
        server,
        log,
        _dir: dir,
    }
}

/// The events of the request `id`, once there are `count` of them.
async fn events_of(log: &Path, id: &str, count: usize) -> Vec<Value> {
    let of = || -> Vec<Value> {
        events_in(log)
            .into_iter()
            .filter(|e| e["auditID"] == id)
            .collect()
    };
    until(|| of().len() >= count).await;
    let events = of();
    assert_eq!(events.len(), count, "{events:#?}");
    events
}

/// One raw request; its status, `Audit-Id` and body.
async fn call(
    server: &Server,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String, Value) {
    let mut all = headers.to_vec();
    all.push(("Content-Type", "application/json"));
    let response = watchkeeper_testkit::request(server.addr, method, path, &all, body.as_bytes())
        .await
        .unwrap();
    let id = response
        .headers
        .get("audit-id")
        .unwrap_or_else(|| panic!("no Audit-Id on {method} {path}"))
        .to_str()
        .unwrap()
        .to_owned();
    (response.status, id, response.json())
}

fn assert_timestamps(event: &Value) {
    for field in ["requestReceivedTimestamp", "stageTimestamp"] {
        let text = event[field].as_str().unwrap();
        // RFC 3339 with microseconds: 2026-12-05T00:28:07.123456Z
        assert_eq!(text.len(), 27, "{field}: {text}");
        assert!(text.ends_with('Z') && text.as_bytes()[19] == b'.', "{text}");
    }
    assert!(event["requestReceivedTimestamp"].as_str() <= event["stageTimestamp"].as_str());
}

/// Goal: a create, a get and a list over raw HTTP are logged as kube writes them: both stages,
/// the request's URI, kube's verb, the user, kube's source IPs (X-Forwarded-For first), the
/// user agent, the object reference (its name completed from the create's body), the status,
/// the request and response objects at RequestResponse (without managedFields), kube's
/// timestamps and the authorization annotations; the answer's `Audit-Id` is the events' ID.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_and_reads_are_logged_as_kube_logs_them() {
    let audited = audited(POLICY, ServeArgs::default()).await;
    let (server, log) = (&audited.server, &audited.log);
    let headers = [
        ("User-Agent", "audit-test/1.0"),
        ("X-Forwarded-For", "192.0.2.7"),
    ];
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "demo", "managedFields": [{"manager": "m", "operation": "Update"}]},
        "data": {"a": "1"}});
    let (status, id, created) = call(
        server,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        &headers,
        &body.to_string(),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let events = events_of(log, &id, 2).await;
    let (received, complete) = (&events[0], &events[1]);
    assert_eq!(received["stage"], "RequestReceived");
    assert_eq!(complete["stage"], "ResponseComplete");
    for event in &events {
        assert_eq!(event["kind"], "Event");
        assert_eq!(event["apiVersion"], "audit.k8s.io/v1");
        assert_eq!(event["level"], "RequestResponse");
        assert_eq!(event["requestURI"], "/api/v1/namespaces/default/configmaps");
        assert_eq!(event["verb"], "create");
        assert_eq!(
            event["user"],
            json!({"username": "system:anonymous", "groups": ["system:unauthenticated"]})
        );
        assert_eq!(event["sourceIPs"], json!(["192.0.2.7", "127.0.0.1"]));
        assert_eq!(event["userAgent"], "audit-test/1.0");
        assert_timestamps(event);
        assert_eq!(
            event["requestReceivedTimestamp"],
            received["requestReceivedTimestamp"]
        );
    }
    // Before the handler: no name yet, no status, no objects, no annotations of the handler.
    assert_eq!(
        received["objectRef"],
        json!({"resource": "configmaps", "namespace": "default", "apiVersion": "v1"})
    );
    for absent in ["responseStatus", "requestObject", "responseObject"] {
        assert!(received.get(absent).is_none(), "{absent}: {received}");
    }
    assert_eq!(
        complete["objectRef"],
        json!({"resource": "configmaps", "namespace": "default", "name": "demo", "apiVersion": "v1"})
    );
    assert_eq!(
        complete["responseStatus"],
        json!({"metadata": {}, "code": 201})
    );
    let mut sent = body.clone();
    sent["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("managedFields");
    assert_eq!(complete["requestObject"], sent);
    let mut answered = created.clone();
    answered["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("managedFields");
    assert_eq!(complete["responseObject"], answered);
    assert_eq!(
        complete["annotations"],
        json!({"authorization.k8s.io/decision": "allow", "authorization.k8s.io/reason": ""})
    );

    let (status, id, object) = call(
        server,
        "GET",
        "/api/v1/namespaces/default/configmaps/demo",
        &[],
        "",
    )
    .await;
    assert_eq!(status, 200);
    let events = events_of(log, &id, 2).await;
    assert_eq!(events[1]["verb"], "get");
    assert!(events[1].get("requestObject").is_none());
    assert_eq!(events[1]["responseObject"]["data"], object["data"]);
    assert_eq!(
        events[1]["objectRef"],
        json!({"resource": "configmaps", "namespace": "default", "name": "demo", "apiVersion": "v1"})
    );

    let (status, id, list) = call(
        server,
        "GET",
        "/api/v1/namespaces/default/configmaps?limit=500",
        &[],
        "",
    )
    .await;
    assert_eq!(status, 200);
    let events = events_of(log, &id, 2).await;
    assert_eq!(events[1]["verb"], "list");
    assert_eq!(
        events[1]["requestURI"],
        "/api/v1/namespaces/default/configmaps?limit=500"
    );
    assert_eq!(events[1]["responseObject"]["kind"], "ConfigMapList");
    assert_eq!(
        events[1]["responseObject"]["items"]
            .as_array()
            .unwrap()
            .len(),
        list["items"].as_array().unwrap().len()
    );
    // Not selected by the policy: no event, yet an Audit-Id (kube sets it on every answer).
    let (status, id, _) = call(server, "GET", "/api/v1/namespaces/default/secrets", &[], "").await;
    assert_eq!(status, 200);
    assert!(!id.is_empty());
    // A client's own Audit-ID is kept.
    let (_, id, _) = call(
        server,
        "GET",
        "/api/v1/namespaces/default/configmaps/demo",
        &[("Audit-ID", "client-chosen-id")],
        "",
    )
    .await;
    assert_eq!(id, "client-chosen-id");
    events_of(log, "client-chosen-id", 2).await;
    let text = metrics_text(server.addr).await;
    assert!(sample(&text, "apiserver_audit_event_total") >= 8, "{text}");
    assert_eq!(
        sample(&text, "apiserver_audit_error_total{plugin=\"log\"}"),
        0
    );
    assert_eq!(
        sample(
            &text,
            "apiserver_audit_level_total{level=\"RequestResponse\"}"
        ),
        4
    );
}

/// Goal: a watch is logged with `ResponseStarted` when its headers are sent (kube's `watch`
/// verb, no response object even at RequestResponse) and `ResponseComplete` once it ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_is_logged_when_it_starts_and_when_it_ends() {
    let audited = audited(POLICY, ServeArgs::default()).await;
    let (server, log) = (&audited.server, &audited.log);
    let mut watch = WatchReader::open(
        server.addr,
        "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=0",
        None,
    )
    .await;
    let (status, _) = send_json(
        server.addr,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        &configmap("w", 10),
    )
    .await;
    assert_eq!(status, 201);
    assert_eq!(watch.next().await.unwrap()["type"], "ADDED");
    let started = |events: &[Value]| {
        events
            .iter()
            .find(|e| e["verb"] == "watch" && e["stage"] == "ResponseStarted")
            .cloned()
    };
    until(|| started(&events_in(log)).is_some()).await;
    let event = started(&events_in(log)).unwrap();
    assert_eq!(
        event["requestURI"],
        "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=0"
    );
    assert_eq!(
        event["responseStatus"],
        json!({"metadata": {}, "code": 200})
    );
    assert!(event.get("responseObject").is_none());
    let id = event["auditID"].as_str().unwrap().to_owned();
    drop(watch);
    let events = events_of(log, &id, 3).await;
    let stages: Vec<&str> = events
        .iter()
        .map(|e| e["stage"].as_str().unwrap())
        .collect();
    assert_eq!(
        stages,
        ["RequestReceived", "ResponseStarted", "ResponseComplete"]
    );
    assert!(events[2].get("responseObject").is_none());
}

/// Goal: a refused request carries kube's `forbid` decision and the Status (message, reason,
/// details, code); an impersonating one names both users; a failed authentication is kube's
/// single `ResponseStarted` event with an empty user.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_impersonation_and_failed_authentication() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(&tokens, TOKENS).unwrap();
    let abac_file = dir.path().join("abac.jsonl");
    std::fs::write(&abac_file, abac()).unwrap();
    let audited = audited(
        POLICY,
        ServeArgs {
            token_auth_file: Some(tokens),
            authorization_policy_file: Some(abac_file),
            ..ServeArgs::default()
        },
    )
    .await;
    let (server, log) = (&audited.server, &audited.log);
    let (status, id, refusal) = call(
        server,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        &[("Authorization", "Bearer reader-token")],
        &configmap("nope", 1).to_string(),
    )
    .await;
    assert_eq!(status, 403, "{refusal}");
    let events = events_of(log, &id, 2).await;
    let complete = &events[1];
    assert_eq!(
        complete["user"],
        json!({"username": "reader", "uid": "2", "groups": ["system:authenticated"]})
    );
    assert_eq!(
        complete["responseStatus"],
        json!({"metadata": {}, "status": "Failure", "message": refusal["message"],
            "reason": "Forbidden", "details": refusal["details"], "code": 403})
    );
    assert_eq!(
        complete["annotations"]["authorization.k8s.io/decision"],
        "forbid"
    );
    // The refused request's body was never read: no request object.
    assert!(complete.get("requestObject").is_none());

    let (status, id, _) = call(
        server,
        "GET",
        "/api/v1/namespaces/default/pods",
        &[
            ("Authorization", "Bearer admin-token"),
            ("Impersonate-User", "reader"),
        ],
        "",
    )
    .await;
    assert_eq!(status, 200);
    let events = events_of(log, &id, 2).await;
    assert_eq!(events[1]["level"], "Metadata");
    assert_eq!(events[1]["user"]["username"], "admin");
    assert_eq!(events[1]["impersonatedUser"]["username"], "reader");
    assert!(events[1].get("responseObject").is_none());

    let (status, id, _) = call(
        server,
        "GET",
        "/api/v1/namespaces/default/pods",
        &[("Authorization", "Bearer wrong")],
        "",
    )
    .await;
    assert_eq!(status, 401);
    let events = events_of(log, &id, 1).await;
    assert_eq!(events[0]["stage"], "ResponseStarted");
    assert_eq!(events[0]["user"], json!({}));
    assert_eq!(events[0]["responseStatus"]["code"], 401);
    assert_eq!(events[0]["responseStatus"]["reason"], "Unauthorized");
}

/// Goal: kubectl's requests are logged with its user agent, and a pod that violates its
/// namespace's audit level (not its enforce level) is created with PodSecurity's audit
/// annotations in its event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_and_pod_security_audit_annotations() {
    let audited = audited(POLICY, ServeArgs::default()).await;
    let (server, log) = (&audited.server, &audited.log);
    let k = Kubectl::new(server.addr);
    k.ok(&["create", "namespace", "watched"]).await;
    k.ok(&[
        "label",
        "namespace",
        "watched",
        "pod-security.kubernetes.io/audit=restricted",
    ])
    .await;
    k.ok(&["-n", "watched", "run", "web", "--image", "nginx"])
        .await;
    k.ok(&["create", "configmap", "from-kubectl", "--from-literal=a=1"])
        .await;
    k.ok(&["get", "configmap", "from-kubectl"]).await;
    let complete = |events: &[Value], verb: &str, resource: &str| {
        events
            .iter()
            .find(|e| {
                e["verb"] == verb
                    && e["objectRef"]["resource"] == resource
                    && e["stage"] == "ResponseComplete"
            })
            .cloned()
    };
    // kubectl may exit before the last answer's ResponseComplete is written.
    until(|| complete(&events_in(log), "get", "configmaps").is_some()).await;
    let events = events_in(log);
    let find = |verb: &str, resource: &str| {
        complete(&events, verb, resource)
            .unwrap_or_else(|| panic!("no {verb} {resource}: {events:#?}"))
    };
    let pod = &find("create", "pods");
    assert!(
        pod["userAgent"].as_str().unwrap().starts_with("kubectl"),
        "{pod}"
    );
    assert_eq!(pod["objectRef"]["name"], "web");
    assert_eq!(pod["objectRef"]["namespace"], "watched");
    assert_eq!(
        pod["annotations"]["pod-security.kubernetes.io/enforce-policy"],
        "privileged:latest"
    );
    let violations = pod["annotations"]["pod-security.kubernetes.io/audit-violations"]
        .as_str()
        .unwrap();
    assert!(
        violations.starts_with(r#"would violate PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container "web" must set securityContext.allowPrivilegeEscalation=false)"#),
        "{violations}"
    );
    // Metadata level: no objects.
    assert!(pod.get("requestObject").is_none());
    // kubectl sends its create in JSON: logged at RequestResponse with the objects.
    let configmap = &find("create", "configmaps");
    assert_eq!(configmap["requestObject"]["data"], json!({"a": "1"}));
    let get = find("get", "configmaps");
    assert_eq!(get["objectRef"]["name"], "from-kubectl");
    assert_eq!(get["responseStatus"]["code"], 200);
}

/// Goal: the log is rotated by `--audit-log-maxsize` as lumberjack rotates it, keeping
/// `--audit-log-maxbackup` old files, every line of every file a whole event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_rotates_by_size() {
    let audited = audited(
        POLICY,
        ServeArgs {
            audit_log_maxsize: Some(1),
            audit_log_maxbackup: Some(1),
            ..ServeArgs::default()
        },
    )
    .await;
    let (server, log) = (&audited.server, &audited.log);
    // Each create's ResponseComplete holds ~600 KB (the request and the response): the
    // file is rotated at every second event or so.
    for index in 0..4 {
        let (status, id, _) = call(
            server,
            "POST",
            "/api/v1/namespaces/default/configmaps",
            &[],
            &configmap(&format!("big-{index}"), 300_000).to_string(),
        )
        .await;
        assert_eq!(status, 201);
        until(|| {
            let dir = log.parent().unwrap();
            std::fs::read_dir(dir)
                .unwrap()
                .flatten()
                .filter(|entry| entry.path().extension().is_some_and(|e| e == "log"))
                .any(|entry| {
                    events_in(&entry.path()).iter().any(|event| {
                        event["auditID"] == id.as_str() && event["stage"] == "ResponseComplete"
                    })
                })
        })
        .await;
    }
    let files: Vec<PathBuf> = std::fs::read_dir(log.parent().unwrap())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    assert_eq!(files.len(), 2, "{files:?}");
    for file in &files {
        let size = std::fs::metadata(file).unwrap().len();
        assert!(size <= 1024 * 1024, "{}: {size}", file.display());
        assert!(!events_in(file).is_empty());
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            name == "audit.log" || (name.starts_with("audit-20") && name.len() == 33),
            "{name}"
        );
    }
}

/// Goal: a policy kube-apiserver refuses stops the server at start with kube's message; so do
/// an unsupported format and an unknown mode.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_policies_and_flags_are_startup_errors() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.yaml");
    std::fs::write(
        &policy,
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Everything\n",
    )
    .unwrap();
    let started = |args: ServeArgs| async {
        match watchkeeper_testkit::start_server(watchkeeper_testkit::loopback(args)).await {
            Ok(_) => panic!("the server started"),
            Err(error) => error,
        }
    };
    let error = started(ServeArgs {
        audit_policy_file: Some(policy.clone()),
        audit_log_path: Some(dir.path().join("audit.log")),
        ..ServeArgs::default()
    })
    .await;
    assert_eq!(
        error,
        format!(
            "loading audit policy file: rules[0].level: Unsupported value: \"Everything\": supported values: \"None\", \"Metadata\", \"Request\", \"RequestResponse\": from file {}",
            policy.display()
        )
    );
    std::fs::write(
        &policy,
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: []\n",
    )
    .unwrap();
    let error = started(ServeArgs {
        audit_policy_file: Some(policy.clone()),
        ..ServeArgs::default()
    })
    .await;
    assert_eq!(
        error,
        format!(
            "loading audit policy file: loaded illegal policy with 0 rules: from file {}",
            policy.display()
        )
    );
    let error = started(ServeArgs {
        audit_log_format: Some("legacy".to_owned()),
        ..ServeArgs::default()
    })
    .await;
    assert!(error.contains("legacy"), "{error}");
}

/// Goal: a log that cannot be written (a full device) is counted; in `blocking` mode the
/// request is still served, in `blocking-strict` it fails with kube's 500 before it is
/// handled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unwritable_log_blocking_serves_strict_refuses() {
    if !Path::new("/dev/full").exists() {
        panic!("this test needs /dev/full (Linux)");
    }
    for (mode, served) in [("blocking", true), ("blocking-strict", false)] {
        let dir = tempfile::tempdir().unwrap();
        let policy = dir.path().join("policy.yaml");
        std::fs::write(&policy, POLICY).unwrap();
        let server = server_with(ServeArgs {
            audit_policy_file: Some(policy),
            audit_log_path: Some("/dev/full".into()),
            audit_log_mode: Some(mode.to_owned()),
            ..ServeArgs::default()
        })
        .await;
        let (status, body) = request(
            server.addr,
            "GET",
            "/api/v1/namespaces/default/configmaps",
            "application/json",
            "",
        )
        .await;
        if served {
            assert_eq!(status, 200, "{body}");
        } else {
            assert_eq!(status, 500, "{body}");
            assert_eq!(
                body,
                "Internal Server Error: \"/api/v1/namespaces/default/configmaps\": failed to store audit event\n"
            );
        }
        let text = metrics_text(server.addr).await;
        assert!(
            sample(&text, "apiserver_audit_error_total{plugin=\"log\"}") >= 1,
            "{text}"
        );
        let rejected = sample(&text, "apiserver_audit_requests_rejected_total");
        assert_eq!(rejected, u64::from(!served));
    }
}

/// Goal: a ValidatingAdmissionPolicy bound with the `Audit` action admits the write and adds
/// kube's `validation_failure` annotation; its `auditAnnotations` are `<policy>/<key>`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validating_admission_policy_audit_annotations() {
    let audited = audited(POLICY, ServeArgs::default()).await;
    let (server, log) = (&audited.server, &audited.log);
    let policy = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "cm-audit"},
        "spec": {"failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                "resources": ["configmaps"], "operations": ["CREATE"]}]},
            "validations": [{"expression": "!has(object.data) || !('forbidden' in object.data)",
                "message": "no forbidden key"}],
            "auditAnnotations": [{"key": "keys",
                "valueExpression": "has(object.data) ? string(size(object.data)) + ' keys' : null"}]}});
    let binding = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "cm-audit-binding"},
        "spec": {"policyName": "cm-audit", "validationActions": ["Audit"]}});
    for (path, object) in [
        (
            "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies",
            &policy,
        ),
        (
            "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings",
            &binding,
        ),
    ] {
        let (status, body) = send_json(server.addr, "POST", path, object).await;
        assert_eq!(status, 201, "{body}");
    }
    let object = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "audited"},
        "data": {"forbidden": "x"}});
    let (status, id, _) = call(
        server,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        &[],
        &object.to_string(),
    )
    .await;
    assert_eq!(status, 201);
    let events = events_of(log, &id, 2).await;
    assert_eq!(
        events[1]["annotations"],
        json!({
            "authorization.k8s.io/decision": "allow",
            "authorization.k8s.io/reason": "",
            "cm-audit/keys": "1 keys",
            "validation.policy.admission.k8s.io/validation_failure":
                r#"[{"message":"no forbidden key","policy":"cm-audit","binding":"cm-audit-binding","expressionIndex":0,"validationActions":["Audit"]}]"#,
        })
    );
}

/// Goal: in `batch` mode events are queued and written behind the request, all of them, and
/// a shutdown writes the queue before it returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_mode_writes_every_event_behind_the_request() {
    let audited = audited(
        POLICY,
        ServeArgs {
            audit_log_mode: Some("batch".to_owned()),
            ..ServeArgs::default()
        },
    )
    .await;
    let (server, log) = (&audited.server, &audited.log);
    let mut ids = Vec::new();
    for index in 0..5 {
        let (status, id, _) = call(
            server,
            "POST",
            "/api/v1/namespaces/default/configmaps",
            &[],
            &configmap(&format!("batched-{index}"), 10).to_string(),
        )
        .await;
        assert_eq!(status, 201);
        ids.push(id);
    }
    let text = metrics_text(server.addr).await;
    assert_eq!(
        sample(&text, "apiserver_audit_error_total{plugin=\"buffered\"}"),
        0
    );
    let log = log.clone();
    audited.server.shutdown().await;
    // Read once, without waiting: the shutdown drained the queue.
    let events = events_in(&log);
    assert_eq!(events.len(), 10, "{events:#?}");
    for id in &ids {
        let stages: Vec<&Value> = events
            .iter()
            .filter(|e| e["auditID"] == id.as_str())
            .map(|e| &e["stage"])
            .collect();
        assert_eq!(
            stages,
            [&json!("RequestReceived"), &json!("ResponseComplete")]
        );
    }
}

/// Goal: a policy's `omitStages` leaves those stages out; an answer longer than
/// `--audit-log-max-object-bytes` is left out of the event, annotated
/// `audit.k8s.io/truncated`, while a shorter one is logged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn omitted_stages_and_truncated_answers() {
    let policy = r#"
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: RequestResponse
  resources: [{group: "", resources: ["configmaps"]}]
"#;
    let audited = audited(
        policy,
        ServeArgs {
            audit_log_max_object_bytes: Some(4096),
            ..ServeArgs::default()
        },
    )
    .await;
    let (server, log) = (&audited.server, &audited.log);
    let mut ids = Vec::new();
    for (name, payload) in [("small", 10), ("large", 8000)] {
        let (status, id, _) = call(
            server,
            "POST",
            "/api/v1/namespaces/default/configmaps",
            &[],
            &configmap(name, payload).to_string(),
        )
        .await;
        assert_eq!(status, 201);
        ids.push(id);
    }
    let small = events_of(log, &ids[0], 1).await;
    assert_eq!(small[0]["stage"], "ResponseComplete");
    assert_eq!(small[0]["responseObject"]["metadata"]["name"], "small");
    assert!(
        small[0]["annotations"]
            .get("audit.k8s.io/truncated")
            .is_none()
    );
    let large = events_of(log, &ids[1], 1).await;
    assert_eq!(large[0]["stage"], "ResponseComplete");
    assert!(large[0].get("responseObject").is_none(), "{}", large[0]);
    assert_eq!(large[0]["annotations"]["audit.k8s.io/truncated"], "true");
    // The request body is bounded by --max-request-body-bytes, not by this flag.
    assert_eq!(large[0]["requestObject"]["metadata"]["name"], "large");
}

/// Goal: under RBAC the authorization annotations carry RBAC's reason, as kube's do: the
/// binding that allowed the request, and a refusal's decision `forbid`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_decisions_are_logged_with_their_reasons() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(&tokens, TOKENS).unwrap();
    let audited = audited(
        POLICY,
        ServeArgs {
            token_auth_file: Some(tokens),
            authorization_mode: Some(vec!["RBAC".to_owned()]),
            ..ServeArgs::default()
        },
    )
    .await;
    let (server, log) = (&audited.server, &audited.log);
    let admin = [("Authorization", "Bearer admin-token")];
    let reader = [("Authorization", "Bearer reader-token")];
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "readers", "namespace": "default"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "reader"}]});
    let (status, _, body) = call(
        server,
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
        &admin,
        &binding.to_string(),
    )
    .await;
    assert_eq!(status, 201, "{body}");

    let (status, id, body) = call(
        server,
        "GET",
        "/api/v1/namespaces/default/configmaps",
        &reader,
        "",
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let events = events_of(log, &id, 2).await;
    assert_eq!(
        events[1]["annotations"],
        json!({"authorization.k8s.io/decision": "allow",
            "authorization.k8s.io/reason": "RBAC: allowed by RoleBinding \"readers/default\" of ClusterRole \"view\" to User \"reader\""})
    );

    let (status, id, body) = call(
        server,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        &reader,
        &configmap("nope", 1).to_string(),
    )
    .await;
    assert_eq!(status, 403, "{body}");
    let events = events_of(log, &id, 2).await;
    assert_eq!(
        events[1]["annotations"]["authorization.k8s.io/decision"],
        "forbid"
    );
}

/// Goal: a request handled on the heavy requests' pool (its body at least
/// `--heavy-request-body-bytes`) keeps its audit context there: its request object, read on
/// the pool, is in its event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heavy_request_is_audited_from_the_pool() {
    let audited = audited(
        POLICY,
        ServeArgs {
            heavy_request_body_bytes: Some(1024),
            ..ServeArgs::default()
        },
    )
    .await;
    let (server, log) = (&audited.server, &audited.log);
    let sent = configmap("big", 4000);
    let (status, id, body) = call(
        server,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        &[],
        &sent.to_string(),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(
        metric(
            server.addr,
            "watchkeeper_heavy_requests_total{outcome=\"answered\"}"
        )
        .await,
        1,
        "the create went to the pool"
    );
    let events = events_of(log, &id, 2).await;
    assert_eq!(events[1]["requestObject"]["metadata"]["name"], "big");
    assert_eq!(events[1]["requestObject"]["data"], sent["data"]);
}

/// What the test's audit webhook received: each POST's path and body.
type Posts = std::sync::Arc<std::sync::Mutex<Vec<(String, Value)>>>;

/// A test audit webhook over HTTPS answering each POST with the next of `codes` (200 once
/// they are used up), each answer only once `gate` grants a permit; a kubeconfig naming it
/// (its CA inline, a token) at `dir/webhook.kubeconfig`.
async fn audit_webhook(
    dir: &Path,
    codes: Vec<u16>,
    gate: std::sync::Arc<tokio::sync::Semaphore>,
) -> (PathBuf, Posts) {
    use base64::Engine;
    let posts: Posts = std::sync::Arc::default();
    let codes = std::sync::Arc::new(std::sync::Mutex::new(codes.into_iter()));
    let log = posts.clone();
    let (port, ca) = https_server(
        &[],
        move |request: hyper::Request<hyper::body::Incoming>| {
            let (log, codes, gate) = (log.clone(), codes.clone(), gate.clone());
            async move {
                use http_body_util::BodyExt;
                let path = request.uri().path().to_owned();
                let body = request.into_body().collect().await.unwrap().to_bytes();
                log.lock()
                    .unwrap()
                    .push((path, serde_json::from_slice(&body).unwrap()));
                gate.acquire().await.unwrap().forget();
                let code = codes.lock().unwrap().next().unwrap_or(200);
                let mut answer =
                    hyper::Response::new(http_body_util::Full::new(bytes::Bytes::new()));
                *answer.status_mut() = hyper::StatusCode::from_u16(code).unwrap();
                answer
            }
        },
    )
    .await;
    let ca = base64::engine::general_purpose::STANDARD.encode(ca);
    let kubeconfig = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: audit\n  cluster:\n    server: https://127.0.0.1:{port}/audit\n    certificate-authority-data: {ca}\nusers:\n- name: apiserver\n  user:\n    token: audit-token\ncontexts:\n- name: audit\n  context:\n    cluster: audit\n    user: apiserver\ncurrent-context: audit\n"
    );
    let path = dir.join("webhook.kubeconfig");
    std::fs::write(&path, kubeconfig).unwrap();
    (path, posts)
}

/// A server with [`POLICY`] sending its events to a webhook only.
async fn webhook_audited(dir: &Path, kubeconfig: PathBuf, args: ServeArgs) -> Server {
    let policy_file = dir.join("policy.yaml");
    std::fs::write(&policy_file, POLICY).unwrap();
    server_with(ServeArgs {
        audit_policy_file: Some(policy_file),
        audit_webhook_config_file: Some(kubeconfig),
        ..args
    })
    .await
}

/// The (auditID, stage) of each item of `posts`' EventLists, checking each is kube's list.
fn posted_events(posts: &[(String, Value)]) -> Vec<(String, String)> {
    posts
        .iter()
        .flat_map(|(path, list)| {
            assert_eq!(path, "/audit");
            assert_eq!(list["kind"], "EventList");
            assert_eq!(list["apiVersion"], "audit.k8s.io/v1");
            list["items"].as_array().unwrap().clone()
        })
        .map(|event| {
            assert_eq!(event["kind"], "Event");
            (
                event["auditID"].as_str().unwrap().to_owned(),
                event["stage"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// Goal: the webhook backend (kube's `--audit-webhook-config-file`, batch mode) POSTs
/// `EventList`s over HTTPS verified with the kubeconfig's CA, batches of at most
/// `--audit-webhook-batch-max-size` events, retries a batch answered 500 (the same events
/// again), and a shutdown sends what is still batched; nothing is counted as an error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_webhook_receives_event_lists_in_batches() {
    let dir = tempfile::tempdir().unwrap();
    let open = std::sync::Arc::new(tokio::sync::Semaphore::new(1_000));
    let (kubeconfig, posts) = audit_webhook(dir.path(), vec![500], open).await;
    let server = webhook_audited(
        dir.path(),
        kubeconfig,
        ServeArgs {
            audit_webhook_batch_max_size: Some(3),
            audit_webhook_batch_max_wait: Some("1h".to_owned()),
            audit_webhook_initial_backoff: Some("1ms".to_owned()),
            ..ServeArgs::default()
        },
    )
    .await;
    let mut ids = Vec::new();
    for name in ["hooked-a", "hooked-b"] {
        let (status, id, _) = call(
            &server,
            "POST",
            "/api/v1/namespaces/default/configmaps",
            &[],
            &configmap(name, 10).to_string(),
        )
        .await;
        assert_eq!(status, 201);
        ids.push(id);
    }
    // Three of the four events fill a batch: refused once (500), then sent again.
    until(|| posts.lock().unwrap().len() >= 2).await;
    let first_two = posts.lock().unwrap().clone();
    assert_eq!(first_two[0].1, first_two[1].1);
    assert_eq!(posted_events(&first_two[..1]).len(), 3);
    let text = metrics_text(server.addr).await;
    server.shutdown().await;
    // The shutdown sent the fourth.
    let all = posts.lock().unwrap().clone();
    assert_eq!(all.len(), 3, "{all:#?}");
    let mut delivered = posted_events(&all[1..]);
    delivered.sort();
    let mut expected: Vec<(String, String)> = ids
        .iter()
        .flat_map(|id| {
            ["RequestReceived", "ResponseComplete"].map(|stage| (id.clone(), stage.to_owned()))
        })
        .collect();
    expected.sort();
    assert_eq!(delivered, expected);
    assert_eq!(
        sample(&text, "apiserver_audit_error_total{plugin=\"webhook\"}"),
        0
    );
}

/// Goal: in batch mode a full webhook queue drops events and counts them (kube's
/// `plugin="buffered"`); in `blocking-strict` mode a webhook that refuses (403, not retried)
/// fails the request with kube's 500 and counts the event (`plugin="webhook"`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_webhook_queue_drops_and_a_refusing_webhook_fails_strict_requests() {
    let dir = tempfile::tempdir().unwrap();
    // The webhook holds its first answer until released: the sender waits on it.
    let gate = std::sync::Arc::new(tokio::sync::Semaphore::new(0));
    let (kubeconfig, posts) = audit_webhook(dir.path(), vec![], gate.clone()).await;
    let server = webhook_audited(
        dir.path(),
        kubeconfig,
        ServeArgs {
            audit_webhook_batch_max_size: Some(1),
            audit_webhook_batch_buffer_size: Some(1),
            audit_webhook_batch_max_wait: Some("1h".to_owned()),
            ..ServeArgs::default()
        },
    )
    .await;
    let create = |name: &'static str| {
        let server = &server;
        async move {
            let body = configmap(name, 10).to_string();
            call(
                server,
                "POST",
                "/api/v1/namespaces/default/configmaps",
                &[],
                &body,
            )
            .await
            .0
        }
    };
    assert_eq!(create("held-a").await, 201);
    until(|| !posts.lock().unwrap().is_empty()).await;
    assert_eq!(create("held-b").await, 201);
    // One event is being sent, one queued: the other two of the four found the queue full.
    let dropped = metric_at_least(
        server.addr,
        "apiserver_audit_error_total{plugin=\"buffered\"}",
        2,
    )
    .await;
    assert_eq!(dropped, 2);
    gate.add_permits(1_000);
    server.shutdown().await;
    assert_eq!(posted_events(&posts.lock().unwrap()).len(), 2);

    let strict_dir = tempfile::tempdir().unwrap();
    let open = std::sync::Arc::new(tokio::sync::Semaphore::new(1_000));
    let (kubeconfig, _) = audit_webhook(strict_dir.path(), vec![403; 10], open).await;
    let server = webhook_audited(
        strict_dir.path(),
        kubeconfig,
        ServeArgs {
            audit_webhook_mode: Some("blocking-strict".to_owned()),
            ..ServeArgs::default()
        },
    )
    .await;
    let (status, body) = request(
        server.addr,
        "GET",
        "/api/v1/namespaces/default/configmaps",
        "application/json",
        "",
    )
    .await;
    assert_eq!(status, 500, "{body}");
    assert_eq!(
        body,
        "Internal Server Error: \"/api/v1/namespaces/default/configmaps\": failed to store audit event\n"
    );
    let text = metrics_text(server.addr).await;
    assert_eq!(
        sample(&text, "apiserver_audit_error_total{plugin=\"webhook\"}"),
        1
    );
    assert_eq!(sample(&text, "apiserver_audit_requests_rejected_total"), 1);
    server.shutdown().await;
}

/// Goal: in batch mode the log writes batches of at most `--audit-log-batch-max-size`
/// events (a batch waits `--audit-log-batch-max-wait` for more), and a shutdown writes what is
/// still batched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_writes_events_in_batches() {
    let audited = audited(
        POLICY,
        ServeArgs {
            audit_log_mode: Some("batch".to_owned()),
            audit_log_batch_max_size: Some(3),
            audit_log_batch_max_wait: Some("1h".to_owned()),
            ..ServeArgs::default()
        },
    )
    .await;
    let (server, log) = (&audited.server, audited.log.clone());
    for name in ["batched-a", "batched-b"] {
        let (status, _, _) = call(
            server,
            "POST",
            "/api/v1/namespaces/default/configmaps",
            &[],
            &configmap(name, 10).to_string(),
        )
        .await;
        assert_eq!(status, 201);
    }
    // Four events: a batch of three is written, the fourth waits for more.
    until(|| events_in(&log).len() >= 3).await;
    assert_eq!(events_in(&log).len(), 3);
    audited.server.shutdown().await;
    assert_eq!(events_in(&log).len(), 4);
}

/// Goal: answers written as YAML or protobuf are logged as their objects, JSON-encoded (kube
/// logs the object whatever the answer's encoding), lists included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn yaml_and_protobuf_answers_are_logged_as_json_objects() {
    let audited = audited(POLICY, ServeArgs::default()).await;
    let (server, log) = (&audited.server, &audited.log);
    let configmaps = "/api/v1/namespaces/default/configmaps";
    let (status, _, _) = call(
        server,
        "POST",
        configmaps,
        &[],
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "encoded"},
            "data": {"k": "v"}})
        .to_string(),
    )
    .await;
    assert_eq!(status, 201);
    let one = format!("{configmaps}/encoded");
    for (accept, path, kind) in [
        ("application/yaml", one.as_str(), "ConfigMap"),
        (
            "application/vnd.kubernetes.protobuf",
            one.as_str(),
            "ConfigMap",
        ),
        (
            "application/vnd.kubernetes.protobuf",
            configmaps,
            "ConfigMapList",
        ),
    ] {
        let response =
            watchkeeper_testkit::request(server.addr, "GET", path, &[("Accept", accept)], b"")
                .await
                .unwrap();
        assert_eq!(response.status, 200, "{accept} {path}");
        let id = response.headers["audit-id"].to_str().unwrap().to_owned();
        let events = events_of(log, &id, 2).await;
        let object = &events[1]["responseObject"];
        assert_eq!(object["kind"], kind, "{accept} {path}: {object}");
        assert_eq!(object["apiVersion"], "v1");
        let configmap = if kind == "ConfigMapList" {
            &object["items"][0]
        } else {
            object
        };
        assert_eq!(configmap["metadata"]["name"], "encoded", "{object}");
        assert_eq!(configmap["data"], json!({"k": "v"}), "{object}");
        // `omitManagedFields` applies to them too.
        assert!(
            configmap["metadata"].get("managedFields").is_none(),
            "{object}"
        );
    }
}

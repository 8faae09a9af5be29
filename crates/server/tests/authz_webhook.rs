//! kube-apiserver's `Webhook` authorization mode end to end (`auth::authz_webhook`): a real
//! HTTPS webhook (the test's own handler, `common::hooks`, recording every review it gets)
//! decides in the chain — allowed, denied (which ends the chain), no opinion (the next mode
//! decides) —; the exact `SubjectAccessReview` kube sends (v1beta1 `group`, v1 `groups`); the
//! cache (an identical request makes no call; the test's clock past the TTL makes one); an
//! unreachable webhook (kube's 500, not cached); impersonation, the access reviews and
//! `kubectl auth can-i` decided by it; the start-up refusals in kube's words.

use crate::common;
use crate::kubectl_support;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use serde_json::{Value, json};
use watchkeeper::Server;
use watchkeeper::config::{ServeArgs, ServeConfig};
use watchkeeper::source::event_rate_limit::ManualTicks;

use common::hooks::{Answer, Hooks};
use common::request_with_headers;
use kubectl_support::Kubectl;

const TOKENS: &str = "admin-token,admin,1,\"system:masters\"
alice-token,alice,a1
mallory-token,mallory,m1
bob-token,bob,b1,\"devs\"
proxy-token,proxy,p1
";

const RBAC: &str = "rbac.authorization.k8s.io/v1";

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// The webhook's policy: alice is allowed everything; mallory is denied every resource
/// request; proxy may impersonate alice; the anonymous user may impersonate any user and read
/// non-resource paths (kubectl's discovery); anyone else gets no opinion (with a reason).
fn policy() -> Answer {
    Arc::new(|_path: String, review: Value| {
        async move {
            let spec = &review["spec"];
            let user = spec["user"].as_str().unwrap_or_default();
            let attributes = &spec["resourceAttributes"];
            let status = match user {
                "alice" => json!({"allowed": true, "reason": "alice may"}),
                "mallory" if attributes.is_object() => {
                    json!({"allowed": false, "denied": true, "reason": "mallory is banned"})
                }
                "system:anonymous"
                    if attributes["verb"] == "impersonate" && attributes["resource"] == "users"
                        || spec["nonResourceAttributes"].is_object() =>
                {
                    json!({"allowed": true})
                }
                "proxy"
                    if attributes["verb"] == "impersonate"
                        && attributes["resource"] == "users"
                        && attributes["name"] == "alice" =>
                {
                    json!({"allowed": true})
                }
                _ => json!({"allowed": false, "reason": "no opinion here"}),
            };
            let api_version = review["apiVersion"].clone();
            (
                200,
                json!({"apiVersion": api_version, "kind": "SubjectAccessReview", "status": status}),
            )
        }
        .boxed()
    })
}

/// A kubeconfig naming the webhook at `server`.
fn kubeconfig(dir: &Path, server: &str, ca: &str) -> PathBuf {
    write(
        dir,
        "authz.kubeconfig",
        &format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: authz\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\nusers:\n- name: apiserver\n  user:\n    token: authz-token\ncontexts:\n- name: authz\n  context:\n    cluster: authz\n    user: apiserver\ncurrent-context: authz\n"
        ),
    )
}

fn args(dir: &Path, kubeconfig: PathBuf, extra: ServeArgs) -> ServeArgs {
    ServeArgs {
        token_auth_file: Some(write(dir, "tokens.csv", TOKENS)),
        authorization_mode: Some(vec!["Webhook".to_owned(), "RBAC".to_owned()]),
        authorization_webhook_config_file: Some(kubeconfig),
        ..extra
    }
}

/// A server asking `hooks` (`Webhook,RBAC`) on the test's clock `ticks`; bob may read in
/// `default` by RBAC (`view`), mallory is bound `cluster-admin` (which the webhook's denial
/// overrides).
async fn server(dir: &Path, hooks: &Hooks, extra: ServeArgs, ticks: Arc<ManualTicks>) -> Server {
    let file = kubeconfig(
        dir,
        &format!("https://127.0.0.1:{}/authorize", hooks.port),
        &hooks.ca_bundle,
    );
    let mut config =
        ServeConfig::from_args(watchkeeper_testkit::loopback(args(dir, file, extra))).unwrap();
    config.authorization_webhook.as_mut().unwrap().clock =
        watchkeeper::config::authz::CacheClock(Some(ticks));
    let server = watchkeeper_testkit::start_configured(config).await.unwrap();
    for (name, role, kind, subject) in [
        ("bob-view", "view", "RoleBinding", "bob"),
        (
            "mallory-admin",
            "cluster-admin",
            "ClusterRoleBinding",
            "mallory",
        ),
    ] {
        let path = if kind == "RoleBinding" {
            "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings"
        } else {
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"
        };
        let binding = json!({"apiVersion": RBAC, "kind": kind, "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": subject}]});
        let (status, body) = call(&server, "admin", "POST", path, &binding, &[]).await;
        assert_eq!(status, 201, "{body}");
    }
    server
}

/// One request as `who` (token `<who>-token`) with `headers`.
async fn call(
    server: &Server,
    who: &str,
    method: &str,
    path: &str,
    body: &Value,
    headers: &[(&str, &str)],
) -> (u16, Value) {
    let bearer = format!("Bearer {who}-token");
    let mut all = vec![("Authorization", bearer.as_str())];
    all.extend_from_slice(headers);
    let body = if body.is_null() {
        String::new()
    } else {
        body.to_string()
    };
    let (status, text) = request_with_headers(server.addr, method, path, &all, &body).await;
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

fn calls(server: &Server) -> u64 {
    server.app.auth.authz_webhook().unwrap().calls()
}

const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";

/// Goal: the webhook decides in kube's union: allowed; `denied` ends the chain (mallory's
/// cluster-admin binding is never asked); no opinion lets RBAC decide (bob reads by `view`,
/// and a write RBAC does not allow is 403 carrying the webhook's reason). The review is kube's
/// v1beta1 (`group`), for resource and non-resource requests alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_webhook_allows_denies_or_leaves_it_to_the_next_mode() {
    let dir = tempfile::tempdir().unwrap();
    let hooks = Hooks::start(policy()).await;
    let ticks = Arc::new(ManualTicks::default());
    let server = server(dir.path(), &hooks, ServeArgs::default(), ticks).await;
    let (status, body) = call(&server, "alice", "GET", CONFIGMAPS, &Value::Null, &[]).await;
    assert_eq!(status, 200, "{body}");
    let reviews = hooks.at("/authorize");
    assert_eq!(
        reviews.last().unwrap(),
        &json!({"kind": "SubjectAccessReview", "apiVersion": "authorization.k8s.io/v1beta1",
            "metadata": {"creationTimestamp": null},
            "spec": {"resourceAttributes": {"namespace": "default", "verb": "list",
                "version": "v1", "resource": "configmaps"},
                "user": "alice", "group": ["system:authenticated"], "uid": "a1"},
            "status": {"allowed": false}})
    );
    let (status, body) = call(&server, "alice", "GET", "/metrics", &Value::Null, &[]).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        hooks.at("/authorize").last().unwrap()["spec"],
        json!({"nonResourceAttributes": {"path": "/metrics", "verb": "get"},
            "user": "alice", "group": ["system:authenticated"], "uid": "a1"})
    );
    // Denied outright: RBAC's cluster-admin binding is not asked; kube's 403 with the reason.
    let (status, body) = call(&server, "mallory", "GET", CONFIGMAPS, &Value::Null, &[]).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(
        body["message"],
        "configmaps is forbidden: User \"mallory\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"default\": mallory is banned"
    );
    // No opinion: RBAC's view lets bob read, not write.
    let (status, body) = call(&server, "bob", "GET", CONFIGMAPS, &Value::Null, &[]).await;
    assert_eq!(status, 200, "{body}");
    let configmap = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
    let (status, body) = call(&server, "bob", "POST", CONFIGMAPS, &configmap, &[]).await;
    assert_eq!(status, 403, "{body}");
    let message = body["message"].as_str().unwrap();
    assert!(
        message.starts_with("configmaps is forbidden: User \"bob\" cannot create resource \"configmaps\" in API group \"\" in the namespace \"default\": no opinion here"),
        "{message}"
    );
    // The webhook allows alice's write; a get of one object names it.
    let (status, body) = call(&server, "alice", "POST", CONFIGMAPS, &configmap, &[]).await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = call(
        &server,
        "alice",
        "GET",
        &format!("{CONFIGMAPS}/c"),
        &Value::Null,
        &[],
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        hooks.at("/authorize").last().unwrap()["spec"]["resourceAttributes"],
        json!({"namespace": "default", "verb": "get", "version": "v1", "resource": "configmaps", "name": "c"})
    );
    // system:masters and the open paths never reach the webhook.
    let before = hooks.at("/authorize").len();
    let (status, _) = call(&server, "admin", "GET", CONFIGMAPS, &Value::Null, &[]).await;
    assert_eq!(status, 200);
    let (status, _) = call(&server, "bob", "GET", "/version", &Value::Null, &[]).await;
    assert_eq!(status, 200);
    assert_eq!(hooks.at("/authorize").len(), before);
}

/// Goal: answers are kept by their review's spec: an identical request makes no call, until
/// the test's clock passes the TTL (5m for an allowing answer, 30s for any other); v1 sends
/// `groups`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_are_cached_for_their_ttl_and_v1_sends_groups() {
    let dir = tempfile::tempdir().unwrap();
    let hooks = Hooks::start(policy()).await;
    let ticks = Arc::new(ManualTicks::default());
    let extra = ServeArgs {
        authorization_webhook_version: Some("v1".to_owned()),
        ..ServeArgs::default()
    };
    let server = server(dir.path(), &hooks, extra, ticks.clone()).await;
    let get = |who: &'static str| {
        let server = &server;
        async move {
            call(server, who, "GET", CONFIGMAPS, &Value::Null, &[])
                .await
                .0
        }
    };
    assert_eq!(get("alice").await, 200);
    let review = hooks.at("/authorize").last().unwrap().clone();
    assert_eq!(review["apiVersion"], "authorization.k8s.io/v1");
    assert_eq!(review["spec"]["groups"], json!(["system:authenticated"]));
    assert!(review["spec"].get("group").is_none());
    let after_first = calls(&server);
    assert_eq!(get("alice").await, 200);
    assert_eq!(
        calls(&server),
        after_first,
        "the second request made no call"
    );
    assert_eq!(get("mallory").await, 403);
    let after_mallory = calls(&server);
    assert_eq!(after_mallory, after_first + 1);
    assert_eq!(get("mallory").await, 403);
    assert_eq!(calls(&server), after_mallory);
    // Past the unauthorized TTL (30s), not the authorized one (5m).
    ticks.advance(Duration::from_secs(31));
    assert_eq!(get("alice").await, 200);
    assert_eq!(calls(&server), after_mallory);
    assert_eq!(get("mallory").await, 403);
    assert_eq!(calls(&server), after_mallory + 1);
    ticks.advance(Duration::from_secs(270));
    assert_eq!(get("alice").await, 200);
    assert_eq!(calls(&server), after_mallory + 2);
}

/// Goal: with TTLs of 0 nothing is cached, yet every request path decides on the answer its
/// own prefetch got — never `webhook decision not available`: lists, gets, writes, watches,
/// non-resource paths, componentstatuses, the access reviews and impersonation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_path_prefetches_its_decision() {
    let dir = tempfile::tempdir().unwrap();
    let hooks = Hooks::start(policy()).await;
    let ticks = Arc::new(ManualTicks::default());
    let extra = ServeArgs {
        authorization_webhook_cache_authorized_ttl: Some("0".to_owned()),
        authorization_webhook_cache_unauthorized_ttl: Some("0s".to_owned()),
        ..ServeArgs::default()
    };
    let server = server(dir.path(), &hooks, extra, ticks).await;
    let configmap = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "p"}});
    let ssar = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"verb": "list", "resource": "pods", "namespace": "default"}}});
    let sar = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": "alice", "resourceAttributes": {"verb": "list", "resource": "pods"}}});
    for (method, path, body, expected) in [
        ("GET", CONFIGMAPS.to_owned(), Value::Null, 200),
        ("POST", CONFIGMAPS.to_owned(), configmap, 201),
        ("GET", format!("{CONFIGMAPS}/p"), Value::Null, 200),
        (
            "GET",
            format!("{CONFIGMAPS}?watch=true&timeoutSeconds=1"),
            Value::Null,
            200,
        ),
        ("GET", "/metrics".to_owned(), Value::Null, 200),
        (
            "GET",
            "/api/v1/componentstatuses".to_owned(),
            Value::Null,
            200,
        ),
        (
            "POST",
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews".to_owned(),
            ssar,
            201,
        ),
        (
            "POST",
            "/apis/authorization.k8s.io/v1/subjectaccessreviews".to_owned(),
            sar,
            201,
        ),
    ] {
        let (status, answer) = call(&server, "alice", method, &path, &body, &[]).await;
        assert_eq!(status, expected, "{method} {path}: {answer}");
        assert!(
            !answer.to_string().contains("not available"),
            "{path}: {answer}"
        );
        if path.ends_with("accessreviews") {
            assert_eq!(answer["status"]["allowed"], true, "{answer}");
        }
    }
    let (status, answer) = call(
        &server,
        "proxy",
        "GET",
        CONFIGMAPS,
        &Value::Null,
        &[("Impersonate-User", "alice")],
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(server.app.auth.authz_webhook().unwrap().cached(), 0);
}

/// Goal: impersonation is decided by the webhook (kube's `impersonate` checks, v1 kinds), and
/// the impersonated user's request too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn impersonation_is_decided_by_the_webhook() {
    let dir = tempfile::tempdir().unwrap();
    let hooks = Hooks::start(policy()).await;
    let server = server(dir.path(), &hooks, ServeArgs::default(), Arc::default()).await;
    let (status, body) = call(
        &server,
        "proxy",
        "GET",
        CONFIGMAPS,
        &Value::Null,
        &[("Impersonate-User", "alice")],
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let reviews = hooks.at("/authorize");
    assert!(
        reviews.iter().any(|r| r["spec"]
            == json!({"resourceAttributes": {"verb": "impersonate", "version": "v1",
                "resource": "users", "name": "alice"},
                "user": "proxy", "group": ["system:authenticated"], "uid": "p1"})),
        "{reviews:#?}"
    );
    assert!(
        reviews
            .iter()
            .any(|r| r["spec"]["user"] == "alice"
                && r["spec"]["resourceAttributes"]["verb"] == "list")
    );
    let (status, body) = call(
        &server,
        "proxy",
        "GET",
        CONFIGMAPS,
        &Value::Null,
        &[("Impersonate-User", "carol")],
    )
    .await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(
        body["message"],
        "users \"carol\" is forbidden: User \"proxy\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope: no opinion here"
    );
}

/// Goal: access reviews answer the webhook's decision (`denied`, its reason), a rules review
/// is kube's incomplete one, and `kubectl auth can-i` agrees.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reviews_and_kubectl_auth_can_i_reflect_the_webhook() {
    let dir = tempfile::tempdir().unwrap();
    let hooks = Hooks::start(policy()).await;
    let server = server(dir.path(), &hooks, ServeArgs::default(), Arc::default()).await;
    let sar = |user: &str| {
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": {"user": user, "resourceAttributes": {"verb": "get", "resource": "pods", "namespace": "default"}}})
    };
    let path = "/apis/authorization.k8s.io/v1/subjectaccessreviews";
    let (status, body) = call(&server, "admin", "POST", path, &sar("mallory"), &[]).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(
        body["status"],
        json!({"allowed": false, "denied": true, "reason": "mallory is banned"})
    );
    let (status, body) = call(&server, "admin", "POST", path, &sar("alice"), &[]).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(
        body["status"],
        json!({"allowed": true, "reason": "alice may"})
    );
    let rules = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview",
        "spec": {"namespace": "default"}});
    let (status, body) = call(
        &server,
        "bob",
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
        &rules,
        &[],
    )
    .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["status"]["incomplete"], true);
    assert_eq!(
        body["status"]["evaluationError"],
        "webhook authorizer does not support user rule resolution"
    );
    // kubectl sends no bearer token over plain HTTP: anonymous, acting `--as` the users (the
    // webhook lets the anonymous user impersonate them).
    let open = common::server_with(ServeArgs {
        authorization_mode: Some(vec!["Webhook".to_owned(), "RBAC".to_owned()]),
        authorization_webhook_config_file: Some(kubeconfig(
            dir.path(),
            &format!("https://127.0.0.1:{}/authorize", hooks.port),
            &hooks.ca_bundle,
        )),
        ..ServeArgs::default()
    })
    .await;
    let k = Kubectl::new(open.addr);
    let yes = k
        .ok(&["--as", "alice", "auth", "can-i", "delete", "secrets"])
        .await;
    assert_eq!(yes.trim(), "yes");
    let no = k
        .fails(&["--as", "mallory", "auth", "can-i", "get", "pods"])
        .await;
    assert_eq!(no.stdout.trim(), "no - mallory is banned");
}

/// Goal: an unreachable webhook is kube's failure: no opinion with the error — a later mode
/// may allow (bob by RBAC), else kube's 500 `Internal Server Error: "<path>": <error>` and an
/// access review's `evaluationError` — and a failure is never cached.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_webhook_is_no_opinion_with_an_error_and_not_cached() {
    let dir = tempfile::tempdir().unwrap();
    // A port nobody listens on: bound, then closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let hooks = Hooks::start(policy()).await;
    let file = kubeconfig(
        dir.path(),
        &format!("https://127.0.0.1:{port}/authorize"),
        &hooks.ca_bundle,
    );
    let server = common::server_with(args(dir.path(), file, ServeArgs::default())).await;
    let binding = json!({"apiVersion": RBAC, "kind": "RoleBinding", "metadata": {"name": "bob-view"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "bob"}]});
    let (status, body) = call(
        &server,
        "admin",
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
        &binding,
        &[],
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = call(&server, "alice", "GET", CONFIGMAPS, &Value::Null, &[]).await;
    assert_eq!(status, 500, "{body}");
    let message = body["message"].as_str().unwrap();
    assert!(
        message.starts_with("Internal Server Error: \"/api/v1/namespaces/default/configmaps\": "),
        "{message}"
    );
    assert_eq!(body["reason"], "InternalError");
    let after_first = calls(&server);
    assert!(after_first >= 1);
    let (status, _) = call(&server, "alice", "GET", CONFIGMAPS, &Value::Null, &[]).await;
    assert_eq!(status, 500);
    assert!(calls(&server) > after_first, "a failure is not cached");
    assert_eq!(server.app.auth.authz_webhook().unwrap().cached(), 0);
    // kube's impersonation filter answers any failure with its 403.
    let (status, body) = call(
        &server,
        "proxy",
        "GET",
        CONFIGMAPS,
        &Value::Null,
        &[("Impersonate-User", "alice")],
    )
    .await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(
        body["message"],
        "users \"alice\" is forbidden: User \"proxy\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"
    );
    // RBAC, after the webhook, still allows bob.
    let (status, body) = call(&server, "bob", "GET", CONFIGMAPS, &Value::Null, &[]).await;
    assert_eq!(status, 200, "{body}");
    let sar = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": "alice", "resourceAttributes": {"verb": "get", "resource": "pods", "namespace": "default"}}});
    let (status, body) = call(
        &server,
        "admin",
        "POST",
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        &sar,
        &[],
    )
    .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["status"]["allowed"], false);
    assert!(
        body["status"]["evaluationError"]
            .as_str()
            .is_some_and(|e| !e.is_empty()),
        "{body}"
    );
}

/// Goal: start-up refusals in kube's words: `Webhook` without its config file, the file
/// without `Webhook`, an unsupported version, an unreadable kubeconfig.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_up_refusals_in_kube_s_words() {
    let dir = tempfile::tempdir().unwrap();
    let refusal = |args: ServeArgs| match ServeConfig::from_args(args) {
        Ok(_) => panic!("accepted"),
        Err(error) => error.to_string(),
    };
    let error = refusal(ServeArgs {
        authorization_mode: Some(vec!["Webhook".to_owned()]),
        ..ServeArgs::default()
    });
    assert!(
        error.contains("authorization-mode Webhook's authorization config file not passed"),
        "{error}"
    );
    let error = refusal(ServeArgs {
        authorization_mode: Some(vec!["RBAC".to_owned()]),
        authorization_webhook_config_file: Some(PathBuf::from("/k")),
        ..ServeArgs::default()
    });
    assert!(
        error.contains("cannot specify --authorization-webhook-config-file without mode Webhook"),
        "{error}"
    );
    let error = refusal(ServeArgs {
        authorization_mode: Some(vec!["Webhook".to_owned()]),
        authorization_webhook_config_file: Some(PathBuf::from("/k")),
        authorization_webhook_version: Some("v2".to_owned()),
        ..ServeArgs::default()
    });
    assert!(
        error.contains(
            "unsupported webhook authorizer version \"v2\", supported versions are \"v1\", \"v1beta1\""
        ),
        "{error}"
    );
    let error = refusal(ServeArgs {
        authorization_mode: Some(vec!["Node".to_owned()]),
        ..ServeArgs::default()
    });
    assert!(error.contains("not supported"), "{error}");
    let missing = dir.path().join("missing.kubeconfig");
    let config = ServeConfig::from_args(watchkeeper_testkit::loopback(ServeArgs {
        authorization_mode: Some(vec!["Webhook".to_owned()]),
        authorization_webhook_config_file: Some(missing),
        ..ServeArgs::default()
    }))
    .unwrap();
    let error = watchkeeper_testkit::start_configured(config)
        .await
        .err()
        .unwrap();
    assert!(
        error.contains("--authorization-webhook-config-file"),
        "{error}"
    );
}

/// Goal: the webhook can be another watchkeeper (kube's v1 `SubjectAccessReview` endpoint,
/// answering from its ABAC policy): what it allows is allowed here; what it does not is no
/// opinion with its reason, and RBAC (after it) decides.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_watchkeeper_is_the_webhook() {
    let dir = tempfile::tempdir().unwrap();
    let policy = [
        json!({"user": "system:anonymous", "namespace": "*", "resource": "subjectaccessreviews",
            "apiGroup": "authorization.k8s.io"}),
        json!({"user": "alice", "namespace": "*", "resource": "configmaps", "apiGroup": ""}),
    ]
    .iter()
    .map(|spec| {
        json!({"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": spec})
            .to_string()
    })
    .collect::<Vec<_>>()
    .join("\n");
    let backend = common::server_with(ServeArgs {
        authorization_policy_file: Some(write(dir.path(), "policy.jsonl", &policy)),
        authorization_mode: Some(vec!["ABAC".to_owned()]),
        ..ServeArgs::default()
    })
    .await;
    let file = write(
        dir.path(),
        "backend.kubeconfig",
        &format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: b\n  cluster:\n    server: http://{}/apis/authorization.k8s.io/v1/subjectaccessreviews\nusers:\n- name: u\n  user: {{}}\ncontexts:\n- name: b\n  context:\n    cluster: b\n    user: u\ncurrent-context: b\n",
            backend.addr
        ),
    );
    let front = common::server_with(args(
        dir.path(),
        file,
        ServeArgs {
            authorization_webhook_version: Some("v1".to_owned()),
            ..ServeArgs::default()
        },
    ))
    .await;
    let (status, body) = call(&front, "alice", "GET", CONFIGMAPS, &Value::Null, &[]).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = call(&front, "bob", "GET", CONFIGMAPS, &Value::Null, &[]).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(
        body["message"],
        "configmaps is forbidden: User \"bob\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"default\": No policy matched."
    );
    assert_eq!(calls(&front), 2);
}

//! Authentication (`--token-auth-file`) and ABAC authorization (`--authorization-policy-file`)
//! over raw HTTP, and kubectl without credentials: 401 without or with a bad token,
//! read-only users, namespace-scoped users (lists and watches only of what they may read),
//! groups, non-resource paths, the open health and version paths, and startup errors that name
//! the malformed line.

use crate::common;

use std::path::Path;

use serde_json::{Value, json};
use watchkeeper::Server;
use watchkeeper::config::{ServeArgs, ServeConfig};

use common::{configmap, request_with_headers, server_with};

const TOKENS: &str = "# token,user,uid,groups
admin-token,admin,1,\"system:masters\"
reader-token,reader,2
alice-token,alice,3,\"team-a,devs\"
victor-token,victor,4,viewers
";

fn policy(spec: &Value) -> String {
    json!({"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": spec})
        .to_string()
}

fn policies() -> String {
    [
        json!({"group": "system:masters", "namespace": "*", "resource": "*", "apiGroup": "*", "nonResourcePath": "*"}),
        json!({"user": "reader", "namespace": "*", "resource": "*", "apiGroup": "*", "readonly": true}),
        json!({"user": "alice", "namespace": "team-a", "resource": "*", "apiGroup": "*"}),
        json!({"group": "viewers", "namespace": "*", "resource": "configmaps", "apiGroup": "", "readonly": true}),
        json!({"group": "system:authenticated", "nonResourcePath": "/api*", "readonly": true}),
    ]
    .iter()
    .map(policy)
    .collect::<Vec<_>>()
    .join("\n")
        + "\n"
}

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// A server with the namespaces team-a and team-b (created as admin).
async fn server_with_auth(dir: &Path, tokens: &str, policy: Option<&str>) -> Server {
    let server = server_with(ServeArgs {
        token_auth_file: Some(write(dir, "tokens.csv", tokens)),
        authorization_policy_file: policy.map(|p| write(dir, "policy.jsonl", p)),
        ..ServeArgs::default()
    })
    .await;
    for name in ["team-a", "team-b"] {
        let namespace =
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
        let (status, body) = call(
            &server,
            Some("admin-token"),
            "POST",
            "/api/v1/namespaces",
            &namespace,
        )
        .await;
        assert_eq!(status, 201, "{body}");
    }
    server
}

/// One request as the holder of `token` (none: no Authorization header).
async fn call(
    server: &Server,
    token: Option<&str>,
    method: &str,
    path: &str,
    body: &Value,
) -> (u16, Value) {
    let bearer = token.map(|t| format!("Bearer {t}"));
    let mut headers = Vec::new();
    if let Some(bearer) = &bearer {
        headers.push(("Authorization", bearer.as_str()));
    }
    if method == "PATCH" {
        headers.push(("Content-Type", "application/merge-patch+json"));
    }
    let body = if body.is_null() {
        String::new()
    } else {
        body.to_string()
    };
    let (status, text) = request_with_headers(server.addr, method, path, &headers, &body).await;
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

fn assert_status(response: &(u16, Value), code: u16, reason: &str) {
    let (status, body) = response;
    assert_eq!(*status, code, "{body}");
    assert_eq!(body["kind"], "Status", "{body}");
    assert_eq!(body["code"], code, "{body}");
    assert_eq!(body["reason"], reason, "{body}");
}

const CM: &str = "/api/v1/namespaces/team-a/configmaps";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_valid_token_requests_get_401_but_health_and_version_stay_open() {
    let dir = tempfile::tempdir().unwrap();
    let server = server_with_auth(dir.path(), TOKENS, Some(&policies())).await;
    for path in [
        CM,
        "/api",
        "/apis",
        "/metrics",
        "/debug/watchers",
        "/openapi/v3",
    ] {
        let response = call(&server, None, "GET", path, &Value::Null).await;
        assert_status(&response, 401, "Unauthorized");
        assert_eq!(response.1["message"], "Unauthorized");
    }
    let response = call(&server, None, "POST", CM, &configmap("x", 1)).await;
    assert_status(&response, 401, "Unauthorized");
    for bad in ["wrong", "admin-toke", "admin-tokenn", "ADMIN-TOKEN"] {
        assert_status(
            &call(&server, Some(bad), "GET", CM, &Value::Null).await,
            401,
            "Unauthorized",
        );
    }
    let (status, _) = request_with_headers(
        server.addr,
        "GET",
        CM,
        &[("Authorization", "Basic YWRtaW46YWRtaW4=")],
        "",
    )
    .await;
    assert_eq!(status, 401, "basic auth is not a bearer token");
    for path in ["/healthz", "/livez", "/readyz", "/version"] {
        let (status, body) = request_with_headers(server.addr, "GET", path, &[], "").await;
        assert_eq!(status, 200, "{path}: {body}");
    }
    let (status, _) = call(&server, Some("admin-token"), "GET", CM, &Value::Null).await;
    assert_eq!(status, 200);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_user_reads_but_cannot_write() {
    let dir = tempfile::tempdir().unwrap();
    let server = server_with_auth(dir.path(), TOKENS, Some(&policies())).await;
    let (status, body) = call(
        &server,
        Some("admin-token"),
        "POST",
        CM,
        &configmap("cm", 1),
    )
    .await;
    assert_eq!(status, 201, "{body}");

    let reader = Some("reader-token");
    for path in [
        format!("{CM}/cm"),
        CM.to_owned(),
        "/api/v1/configmaps".to_owned(),
        format!("{CM}?watch=true&timeoutSeconds=1"),
        "/api/v1/watch/configmaps?timeoutSeconds=1".to_owned(),
        "/apis/apps/v1/deployments".to_owned(),
    ] {
        let (status, body) = call(&server, reader, "GET", &path, &Value::Null).await;
        assert_eq!(status, 200, "{path}: {body}");
    }
    let (_, body) = call(&server, reader, "GET", &format!("{CM}/cm"), &Value::Null).await;
    assert_eq!(body["metadata"]["name"], "cm");

    let response = call(&server, reader, "POST", CM, &configmap("new", 1)).await;
    assert_status(&response, 403, "Forbidden");
    assert_eq!(
        response.1["message"],
        "configmaps is forbidden: User \"reader\" cannot create resource \"configmaps\" in API group \"\" in the namespace \"team-a\": No policy matched."
    );
    assert_eq!(response.1["details"]["kind"], "configmaps");
    let response = call(
        &server,
        reader,
        "PATCH",
        &format!("{CM}/cm"),
        &json!({"data": {"a": "b"}}),
    )
    .await;
    assert_status(&response, 403, "Forbidden");
    assert_eq!(
        response.1["message"],
        "configmaps \"cm\" is forbidden: User \"reader\" cannot patch resource \"configmaps\" in API group \"\" in the namespace \"team-a\": No policy matched."
    );
    let response = call(
        &server,
        reader,
        "PUT",
        &format!("{CM}/cm"),
        &configmap("cm", 2),
    )
    .await;
    assert_status(&response, 403, "Forbidden");
    let response = call(&server, reader, "DELETE", &format!("{CM}/cm"), &Value::Null).await;
    assert_status(&response, 403, "Forbidden");
    let response = call(&server, reader, "DELETE", CM, &Value::Null).await;
    assert_status(&response, 403, "Forbidden");
    assert!(
        response.1["message"]
            .as_str()
            .unwrap()
            .contains("cannot deletecollection resource"),
        "{}",
        response.1
    );
    // Nothing changed.
    let (_, body) = call(&server, reader, "GET", &format!("{CM}/cm"), &Value::Null).await;
    assert_eq!(body["data"]["payload"], "x");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_scoped_user_lists_and_watches_only_its_namespace() {
    let dir = tempfile::tempdir().unwrap();
    let server = server_with_auth(dir.path(), TOKENS, Some(&policies())).await;
    let alice = Some("alice-token");
    for namespace in ["team-a", "team-b"] {
        let path = format!("/api/v1/namespaces/{namespace}/configmaps");
        let (status, body) = call(
            &server,
            Some("admin-token"),
            "POST",
            &path,
            &configmap("cm", 1),
        )
        .await;
        assert_eq!(status, 201, "{body}");
    }
    // Its own namespace: read and write.
    let (status, body) = call(&server, alice, "GET", CM, &Value::Null).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["items"].as_array().unwrap().len(), 1);
    let (status, body) = call(&server, alice, "POST", CM, &configmap("mine", 1)).await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = call(
        &server,
        alice,
        "GET",
        &format!("{CM}?watch=true&timeoutSeconds=1"),
        &Value::Null,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (status, _) = call(
        &server,
        alice,
        "GET",
        "/api/v1/watch/namespaces/team-a/configmaps?timeoutSeconds=1",
        &Value::Null,
    )
    .await;
    assert_eq!(status, 200);

    // Another namespace and the whole cluster: 403 for lists, watches and gets.
    let response = call(
        &server,
        alice,
        "GET",
        "/api/v1/namespaces/team-b/configmaps",
        &Value::Null,
    )
    .await;
    assert_status(&response, 403, "Forbidden");
    assert_eq!(
        response.1["message"],
        "configmaps is forbidden: User \"alice\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"team-b\": No policy matched."
    );
    for path in [
        "/api/v1/namespaces/team-b/configmaps?watch=true",
        "/api/v1/watch/namespaces/team-b/configmaps",
        "/api/v1/namespaces/team-b/configmaps/cm",
    ] {
        assert_status(
            &call(&server, alice, "GET", path, &Value::Null).await,
            403,
            "Forbidden",
        );
    }
    let response = call(&server, alice, "GET", "/api/v1/configmaps", &Value::Null).await;
    assert_status(&response, 403, "Forbidden");
    assert_eq!(
        response.1["message"],
        "configmaps is forbidden: User \"alice\" cannot list resource \"configmaps\" in API group \"\" at the cluster scope: No policy matched."
    );
    for path in [
        "/api/v1/configmaps?watch=true",
        "/api/v1/watch/configmaps",
        "/api/v1/namespaces",
    ] {
        let response = call(&server, alice, "GET", path, &Value::Null).await;
        assert_status(&response, 403, "Forbidden");
    }
    let response = call(
        &server,
        alice,
        "POST",
        "/api/v1/namespaces/team-b/configmaps",
        &configmap("theirs", 1),
    )
    .await;
    assert_status(&response, 403, "Forbidden");

    // Her open watch is listed under her name.
    let addr = server.addr;
    let watch = tokio::spawn(async move {
        request_with_headers(
            addr,
            "GET",
            &format!("{CM}?watch=true&timeoutSeconds=3"),
            &[("Authorization", "Bearer alice-token")],
            "",
        )
        .await
    });
    let deadline = std::time::Instant::now() + common::HANG_GUARD;
    loop {
        let (status, body) = call(
            &server,
            Some("admin-token"),
            "GET",
            "/debug/watchers",
            &Value::Null,
        )
        .await;
        assert_eq!(status, 200, "{body}");
        let users: Vec<Value> = body["resources"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|r| r["watchers"].as_array().unwrap().clone())
            .map(|w| w["user"].clone())
            .collect();
        if users.contains(&json!("alice")) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no watcher of alice");
        tokio::task::yield_now().await;
    }
    assert_eq!(watch.await.unwrap().0, 200);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_and_non_resource_paths() {
    let dir = tempfile::tempdir().unwrap();
    let server = server_with_auth(dir.path(), TOKENS, Some(&policies())).await;
    let victor = Some("victor-token");
    // The group "viewers" may read configmaps anywhere, nothing else.
    let (status, body) = call(&server, victor, "GET", CM, &Value::Null).await;
    assert_eq!(status, 200, "{body}");
    let (status, _) = call(&server, victor, "GET", "/api/v1/configmaps", &Value::Null).await;
    assert_eq!(status, 200);
    let response = call(&server, victor, "GET", "/api/v1/secrets", &Value::Null).await;
    assert_status(&response, 403, "Forbidden");
    assert_eq!(
        response.1["message"],
        "secrets is forbidden: User \"victor\" cannot list resource \"secrets\" in API group \"\" at the cluster scope: No policy matched."
    );
    let response = call(
        &server,
        victor,
        "GET",
        "/apis/apps/v1/deployments",
        &Value::Null,
    )
    .await;
    assert_status(&response, 403, "Forbidden");
    assert!(
        response.1["message"]
            .as_str()
            .unwrap()
            .starts_with("deployments.apps is forbidden: User \"victor\" cannot list resource \"deployments\" in API group \"apps\""),
        "{}",
        response.1
    );
    assert_status(
        &call(&server, victor, "POST", CM, &configmap("v", 1)).await,
        403,
        "Forbidden",
    );
    // The group "system:masters" (admin) may do anything, "team-a" is not a group with a policy.
    let (status, _) = call(&server, Some("admin-token"), "POST", CM, &configmap("a", 1)).await;
    assert_eq!(status, 201);

    // Non-resource paths: "/api*" for every authenticated user (read-only), "*" for masters.
    for path in ["/api", "/apis", "/api/v1", "/apis/apps/v1"] {
        let (status, body) = call(&server, victor, "GET", path, &Value::Null).await;
        assert_eq!(status, 200, "{path}: {body}");
    }
    for path in ["/metrics", "/debug/watchers", "/openapi/v3"] {
        let response = call(&server, victor, "GET", path, &Value::Null).await;
        assert_status(&response, 403, "Forbidden");
        assert_eq!(
            response.1["message"],
            format!("forbidden: User \"victor\" cannot get path \"{path}\": No policy matched.")
        );
        let (status, _) = request_with_headers(
            server.addr,
            "GET",
            path,
            &[("Authorization", "Bearer admin-token")],
            "",
        )
        .await;
        assert_eq!(status, 200, "{path}");
    }
    // A read-only line does not allow other methods on a path.
    let response = call(&server, victor, "POST", "/api", &json!({})).await;
    assert_status(&response, 403, "Forbidden");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_policy_file_every_authenticated_user_may_do_anything() {
    let dir = tempfile::tempdir().unwrap();
    let server = server_with_auth(dir.path(), TOKENS, None).await;
    let (status, body) = call(
        &server,
        Some("victor-token"),
        "POST",
        CM,
        &configmap("v", 1),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let (status, _) = call(
        &server,
        Some("victor-token"),
        "GET",
        "/metrics",
        &Value::Null,
    )
    .await;
    assert_eq!(status, 200);
    assert_status(
        &call(&server, None, "GET", CM, &Value::Null).await,
        401,
        "Unauthorized",
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_files_are_startup_errors_naming_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let start = |tokens: Option<&str>, policy: Option<&str>| {
        let args = ServeArgs {
            listen: Some("127.0.0.1:0".parse().unwrap()),
            store: Some("memory".to_owned()),
            token_auth_file: tokens.map(|t| write(dir.path(), "bad-tokens.csv", t)),
            authorization_policy_file: policy.map(|p| write(dir.path(), "bad-policy.jsonl", p)),
            ..ServeArgs::default()
        };
        watchkeeper::start(ServeConfig::from_args(args).unwrap())
    };
    let error = start(Some("# ok\nt1,alice,1\nt2,bob\n"), None)
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("--token-auth-file"), "{error}");
    assert!(
        error.contains("line 3: must have at least 3 columns"),
        "{error}"
    );
    let error = start(Some("t1,alice,1,\"a,b\n"), None)
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("line 1: "), "{error}");

    let good = policy(&json!({"user": "alice", "namespace": "*"}));
    let error = start(Some(TOKENS), Some(&format!("{good}\n{{\"user\": \n")))
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("--authorization-policy-file"), "{error}");
    assert!(error.contains("line 2: "), "{error}");
    let wrong_version = good.replace("v1beta1", "v1");
    let error = start(None, Some(&format!("# c\n\n{wrong_version}\n")))
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("line 3: expected apiVersion"), "{error}");

    let missing = dir.path().join("missing.csv");
    let error = watchkeeper::start(
        ServeConfig::from_args(ServeArgs {
            listen: Some("127.0.0.1:0".parse().unwrap()),
            store: Some("memory".to_owned()),
            token_auth_file: Some(missing),
            ..ServeArgs::default()
        })
        .unwrap(),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(error.contains("cannot read --token-auth-file"), "{error}");
}

/// Runs kubectl with a kubeconfig whose user has `token` (or none).
async fn kubectl(
    home: &Path,
    addr: std::net::SocketAddr,
    token: Option<&str>,
    args: &[&str],
) -> std::process::Output {
    let user = match token {
        Some(token) => format!("{{token: {token}}}"),
        None => "{}".to_owned(),
    };
    let kubeconfig = home.join(format!("kubeconfig-{}.yaml", token.unwrap_or("none")));
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters: [{{name: local, cluster: {{server: \"http://{addr}\"}}}}]\nusers: [{{name: u, user: {user}}}]\ncontexts: [{{name: local, context: {{cluster: local, user: u, namespace: team-a}}}}]\ncurrent-context: local\n"
        ),
    )
    .unwrap();
    let binary = std::env::var_os("KUBECTL").unwrap_or_else(|| "kubectl".into());
    let mut command = tokio::process::Command::new(binary);
    command
        .args(args)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .env("HOME", home)
        .env_remove("KUBECONFIG")
        .kill_on_drop(true);
    tokio::time::timeout(common::HANG_GUARD, command.output())
        .await
        .expect("kubectl hung")
        .expect("kubectl runs (install it, or set KUBECTL)")
}

/// kubectl reports the 401. (kubectl with a token cannot be checked here: client-go applies a
/// kubeconfig's credentials only over TLS, so over this plain-HTTP server it sends no
/// `Authorization` header even with `users: [{name: u, user: {token: T}}]`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_without_credentials_is_unauthorized() {
    let dir = tempfile::tempdir().unwrap();
    let server = server_with_auth(dir.path(), TOKENS, Some(&policies())).await;
    let out = kubectl(dir.path(), server.addr, None, &["get", "configmaps"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("You must be logged in to the server"),
        "{stderr}"
    );
    server.shutdown().await;
}

/// Access reviews answer with the same decisions real requests get: a `SubjectAccessReview`
/// about another user needs `create` on it (the admin may, a read-only user may not), a
/// `LocalSubjectAccessReview` is answered in its namespace, a `SelfSubjectRulesReview` lists
/// the caller's ABAC rules, and a review with neither attribute kind is 422.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn access_reviews_answer_from_the_authorizer() {
    let dir = tempfile::tempdir().unwrap();
    let server = server_with_auth(dir.path(), TOKENS, Some(&policies())).await;
    let sar = |user: &str, verb: &str, namespace: &str| {
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
               "spec": {"user": user, "resourceAttributes": {"verb": verb, "resource": "configmaps", "namespace": namespace}}})
    };
    let path = "/apis/authorization.k8s.io/v1/subjectaccessreviews";
    let (code, body) = call(
        &server,
        Some("admin-token"),
        "POST",
        path,
        &sar("alice", "create", "team-a"),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(body["kind"], "SubjectAccessReview");
    assert_eq!(body["status"]["allowed"], true, "{body}");
    let (_, body) = call(
        &server,
        Some("admin-token"),
        "POST",
        path,
        &sar("alice", "create", "team-b"),
    )
    .await;
    assert_eq!(body["status"]["allowed"], false, "{body}");
    assert_eq!(body["status"]["reason"], "No policy matched.");
    let (_, body) = call(
        &server,
        Some("admin-token"),
        "POST",
        path,
        &sar("reader", "delete", "team-a"),
    )
    .await;
    assert_eq!(body["status"]["allowed"], false, "{body}");
    // Asking about others is itself authorized.
    assert_status(
        &call(
            &server,
            Some("reader-token"),
            "POST",
            path,
            &sar("alice", "get", "team-a"),
        )
        .await,
        403,
        "Forbidden",
    );
    let neither = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {"user": "alice"}});
    assert_status(
        &call(&server, Some("admin-token"), "POST", path, &neither).await,
        422,
        "Invalid",
    );
    assert_status(
        &call(&server, Some("admin-token"), "GET", path, &Value::Null).await,
        405,
        "MethodNotAllowed",
    );

    let local = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "LocalSubjectAccessReview",
                       "spec": {"user": "alice", "resourceAttributes": {"verb": "list", "resource": "pods"}}});
    let (code, body) = call(
        &server,
        Some("admin-token"),
        "POST",
        "/apis/authorization.k8s.io/v1/namespaces/team-a/localsubjectaccessreviews",
        &local,
    )
    .await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(body["status"]["allowed"], true, "{body}");

    // Self reviews need only authentication.
    let self_review = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                             "spec": {"nonResourceAttributes": {"verb": "get", "path": "/api"}}});
    let (code, body) = call(
        &server,
        Some("victor-token"),
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        &self_review,
    )
    .await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(body["status"]["allowed"], true, "{body}");
    let rules = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview", "spec": {"namespace": "team-b"}});
    let (code, body) = call(
        &server,
        Some("victor-token"),
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
        &rules,
    )
    .await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(
        body["status"]["resourceRules"],
        json!([{"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["configmaps"]}])
    );
    assert_eq!(
        body["status"]["nonResourceRules"],
        json!([{"verbs": ["get", "list", "watch"], "nonResourceURLs": ["/api*"]}])
    );
    // Discovery lists the reviews with the one verb they take.
    let (_, list) = call(
        &server,
        Some("victor-token"),
        "GET",
        "/apis/authorization.k8s.io/v1",
        &Value::Null,
    )
    .await;
    let names: Vec<&str> = list["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "selfsubjectaccessreviews",
            "subjectaccessreviews",
            "localsubjectaccessreviews",
            "selfsubjectrulesreviews"
        ]
    );
    assert_eq!(list["resources"][0]["verbs"], json!(["create"]));
    server.shutdown().await;
}

/// The claims of a JWT (its payload, not verified).
fn jwt_claims(token: &str) -> Value {
    use base64::Engine;
    let payload = token.split('.').nth(1).expect("a JWT has three parts");
    serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(payload)
            .unwrap(),
    )
    .unwrap()
}

/// `serviceaccounts/NAME/token` as kube-apiserver answers it, and the token it issues used as a
/// bearer token: the service account's user and groups, authorized by ABAC like any user, good
/// only for the API audiences, refused once the account (or the secret it is bound to) is
/// deleted, even if an account of the same name is created again. TokenReview tells the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_account_tokens_are_issued_and_authenticate() {
    let dir = tempfile::tempdir().unwrap();
    let bot_policy = policy(
        &json!({"user": "system:serviceaccount:team-a:bot", "namespace": "team-a", "resource": "configmaps", "apiGroup": "", "readonly": true}),
    );
    let server = server_with_auth(
        dir.path(),
        TOKENS,
        Some(&format!("{}{bot_policy}\n", policies())),
    )
    .await;
    let admin = Some("admin-token");
    let accounts = "/api/v1/namespaces/team-a/serviceaccounts";
    let token_path = |name: &str| format!("{accounts}/{name}/token");
    let (code, body) = call(
        &server,
        admin,
        "POST",
        accounts,
        &json!({"metadata": {"name": "bot"}}),
    )
    .await;
    assert_eq!(code, 201, "{body}");

    // Discovery lists the subresource and TokenReview.
    let (_, core) = call(&server, admin, "GET", "/api/v1", &Value::Null).await;
    let sub = core["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "serviceaccounts/token")
        .cloned()
        .unwrap_or_default();
    assert_eq!(sub["verbs"], json!(["create"]), "{core}");
    assert_eq!(sub["kind"], "TokenRequest", "{sub}");
    assert_eq!(sub["group"], "authentication.k8s.io", "{sub}");
    let (_, authn) = call(
        &server,
        admin,
        "GET",
        "/apis/authentication.k8s.io/v1",
        &Value::Null,
    )
    .await;
    assert!(authn.to_string().contains("\"tokenreviews\""), "{authn}");

    // kube-apiserver's refusals.
    let request = |spec: Value| json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec});
    let response = call(
        &server,
        admin,
        "POST",
        &token_path("ghost"),
        &request(json!({})),
    )
    .await;
    assert_status(&response, 404, "NotFound");
    assert_eq!(response.1["message"], "serviceaccounts \"ghost\" not found");
    let response = call(
        &server,
        admin,
        "POST",
        &token_path("bot"),
        &request(json!({"expirationSeconds": 60})),
    )
    .await;
    assert_status(&response, 422, "Invalid");
    assert!(
        response.1["message"].as_str().unwrap().ends_with(
            "spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes"
        ),
        "{}",
        response.1
    );
    assert_status(
        &call(
            &server,
            Some("reader-token"),
            "POST",
            &token_path("bot"),
            &request(json!({})),
        )
        .await,
        403,
        "Forbidden",
    );
    assert_status(
        &call(&server, admin, "GET", &token_path("bot"), &Value::Null).await,
        405,
        "MethodNotAllowed",
    );

    // alice may write in team-a, so she may ask for the bot's token.
    let (code, issued) = call(
        &server,
        Some("alice-token"),
        "POST",
        &token_path("bot"),
        &request(json!({})),
    )
    .await;
    assert_eq!(code, 201, "{issued}");
    assert_eq!(issued["kind"], "TokenRequest");
    assert_eq!(issued["metadata"]["name"], "bot");
    assert_eq!(issued["metadata"]["namespace"], "team-a");
    assert_eq!(
        issued["spec"]["audiences"],
        json!(["https://kubernetes.default.svc.cluster.local"])
    );
    assert_eq!(issued["spec"]["expirationSeconds"], 3600);
    assert!(
        issued["status"]["expirationTimestamp"]
            .as_str()
            .unwrap()
            .ends_with('Z')
    );
    let token = issued["status"]["token"].as_str().unwrap().to_owned();
    let claims = jwt_claims(&token);
    assert_eq!(claims["sub"], "system:serviceaccount:team-a:bot");
    assert_eq!(
        claims["exp"].as_i64().unwrap() - claims["iat"].as_i64().unwrap(),
        3600
    );
    assert_eq!(claims["kubernetes.io"]["namespace"], "team-a");
    assert_eq!(claims["kubernetes.io"]["serviceaccount"]["name"], "bot");
    assert!(
        !claims["kubernetes.io"]["serviceaccount"]["uid"]
            .as_str()
            .unwrap()
            .is_empty()
    );

    // The token is the service account's identity.
    let bot = Some(token.as_str());
    assert_eq!(
        call(&server, bot, "GET", CM, &Value::Null).await.0,
        200,
        "reads what its policy allows"
    );
    let response = call(&server, bot, "POST", CM, &configmap("x", 1)).await;
    assert_status(&response, 403, "Forbidden");
    assert!(
        response.1["message"].as_str().unwrap().contains(
            "User \"system:serviceaccount:team-a:bot\" cannot create resource \"configmaps\""
        ),
        "{}",
        response.1
    );
    assert_status(
        &call(
            &server,
            bot,
            "GET",
            "/api/v1/namespaces/team-b/configmaps",
            &Value::Null,
        )
        .await,
        403,
        "Forbidden",
    );
    let whoami = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"});
    let (code, me) = call(
        &server,
        bot,
        "POST",
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        &whoami,
    )
    .await;
    assert_eq!(code, 201, "{me}");
    assert_eq!(
        me["status"]["userInfo"]["username"],
        "system:serviceaccount:team-a:bot"
    );
    assert_eq!(
        me["status"]["userInfo"]["groups"],
        json!([
            "system:serviceaccounts",
            "system:serviceaccounts:team-a",
            "system:authenticated"
        ])
    );
    // A tampered token is refused, not taken as anonymous.
    let tampered = format!("{token}x");
    assert_status(
        &call(&server, Some(&tampered), "GET", CM, &Value::Null).await,
        401,
        "Unauthorized",
    );

    // A token for another audience is not a token for this API, but TokenReview can check it.
    let (_, vault) = call(
        &server,
        admin,
        "POST",
        &token_path("bot"),
        &request(json!({"audiences": ["vault"], "expirationSeconds": 600})),
    )
    .await;
    let vault = vault["status"]["token"].as_str().unwrap().to_owned();
    assert_status(
        &call(&server, Some(&vault), "GET", CM, &Value::Null).await,
        401,
        "Unauthorized",
    );
    let reviews = "/apis/authentication.k8s.io/v1/tokenreviews";
    let review = |token: &str, audiences: Value| json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token, "audiences": audiences}});
    let (code, reviewed) = call(
        &server,
        admin,
        "POST",
        reviews,
        &review(&vault, json!(["vault"])),
    )
    .await;
    assert_eq!(code, 201, "{reviewed}");
    assert_eq!(reviewed["status"]["authenticated"], true, "{reviewed}");
    assert_eq!(reviewed["status"]["audiences"], json!(["vault"]));
    assert_eq!(
        reviewed["status"]["user"]["username"],
        "system:serviceaccount:team-a:bot"
    );
    let (_, reviewed) = call(&server, admin, "POST", reviews, &review(&vault, json!([]))).await;
    assert!(reviewed["status"]["authenticated"].is_null(), "{reviewed}");
    assert!(
        reviewed["status"]["error"]
            .as_str()
            .unwrap()
            .starts_with("token audiences [\"vault\"] is invalid"),
        "{reviewed}"
    );
    let (_, reviewed) = call(
        &server,
        admin,
        "POST",
        reviews,
        &review("reader-token", json!([])),
    )
    .await;
    assert_eq!(
        reviewed["status"]["user"]["username"], "reader",
        "{reviewed}"
    );
    let (_, reviewed) = call(&server, admin, "POST", reviews, &review("nope", json!([]))).await;
    assert_eq!(
        reviewed["status"]["error"], "invalid bearer token",
        "{reviewed}"
    );
    assert_eq!(reviewed["status"]["user"], json!({}));
    assert_status(
        &call(&server, admin, "POST", reviews, &review("", json!([]))).await,
        400,
        "BadRequest",
    );
    assert_status(
        &call(
            &server,
            Some("reader-token"),
            "POST",
            reviews,
            &review("nope", json!([])),
        )
        .await,
        403,
        "Forbidden",
    );

    // Bound objects: a pod of another service account, another kind, a stale uid.
    let (code, pod) = call(
        &server,
        admin,
        "POST",
        "/api/v1/namespaces/team-a/pods",
        &json!({"metadata": {"name": "web"}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}),
    )
    .await;
    assert_eq!(code, 201, "{pod}");
    let bound = |kind: &str, name: &str, uid: &str| {
        request(
            json!({"boundObjectRef": {"kind": kind, "apiVersion": "v1", "name": name, "uid": uid}}),
        )
    };
    let response = call(
        &server,
        admin,
        "POST",
        &token_path("bot"),
        &bound("Pod", "web", ""),
    )
    .await;
    assert_status(&response, 400, "BadRequest");
    assert_eq!(
        response.1["message"],
        "cannot bind token for serviceaccount \"bot\" to pod running with different serviceaccount name."
    );
    let response = call(
        &server,
        admin,
        "POST",
        &token_path("bot"),
        &bound("ConfigMap", "x", ""),
    )
    .await;
    assert_status(&response, 400, "BadRequest");
    assert_eq!(
        response.1["message"],
        "cannot bind token to object of type /v1, Kind=ConfigMap"
    );
    let (code, secret) = call(
        &server,
        admin,
        "POST",
        "/api/v1/namespaces/team-a/secrets",
        &json!({"metadata": {"name": "bot-secret"}}),
    )
    .await;
    assert_eq!(code, 201, "{secret}");
    assert_status(
        &call(
            &server,
            admin,
            "POST",
            &token_path("bot"),
            &bound("Secret", "bot-secret", "stale"),
        )
        .await,
        409,
        "Conflict",
    );
    assert_status(
        &call(
            &server,
            admin,
            "POST",
            &token_path("bot"),
            &bound("Secret", "missing", ""),
        )
        .await,
        404,
        "NotFound",
    );
    let uid = secret["metadata"]["uid"].as_str().unwrap();
    let (code, issued) = call(
        &server,
        admin,
        "POST",
        &token_path("bot"),
        &bound("Secret", "bot-secret", uid),
    )
    .await;
    assert_eq!(code, 201, "{issued}");
    let secret_token = issued["status"]["token"].as_str().unwrap().to_owned();
    assert_eq!(
        jwt_claims(&secret_token)["kubernetes.io"]["secret"]["uid"],
        uid
    );
    assert_eq!(
        call(&server, Some(&secret_token), "GET", CM, &Value::Null)
            .await
            .0,
        200
    );
    let secret_path = "/api/v1/namespaces/team-a/secrets/bot-secret";
    assert_eq!(
        call(&server, admin, "DELETE", secret_path, &Value::Null)
            .await
            .0,
        200
    );
    // A consistent read proves the cache has seen the deletion.
    assert_eq!(
        call(&server, admin, "GET", secret_path, &Value::Null)
            .await
            .0,
        404
    );
    assert_status(
        &call(&server, Some(&secret_token), "GET", CM, &Value::Null).await,
        401,
        "Unauthorized",
    );

    // Deleting the account ends its tokens; an account of the same name does not revive them.
    let bot_path = format!("{accounts}/bot");
    assert_eq!(
        call(&server, admin, "DELETE", &bot_path, &Value::Null)
            .await
            .0,
        200
    );
    assert_eq!(
        call(&server, admin, "GET", &bot_path, &Value::Null).await.0,
        404
    );
    assert_status(
        &call(&server, bot, "GET", CM, &Value::Null).await,
        401,
        "Unauthorized",
    );
    let (code, _) = call(
        &server,
        admin,
        "POST",
        accounts,
        &json!({"metadata": {"name": "bot"}}),
    )
    .await;
    assert_eq!(code, 201);
    assert_eq!(
        call(&server, admin, "GET", &bot_path, &Value::Null).await.0,
        200
    );
    assert_status(
        &call(&server, bot, "GET", CM, &Value::Null).await,
        401,
        "Unauthorized",
    );
    let (_, reviewed) = call(&server, admin, "POST", reviews, &review(&token, json!([]))).await;
    assert!(
        reviewed["status"]["error"]
            .as_str()
            .unwrap()
            .starts_with("service account UID ("),
        "{reviewed}"
    );
    server.shutdown().await;
}

/// The token issuer's OIDC discovery, as a relying party (a cloud's identity federation,
/// Vault) uses it: `/.well-known/openid-configuration` names the issuer and `jwks_uri`, the key
/// set at `/openid/v1/jwks` verifies the tokens the server issues, both with kube-apiserver's
/// content types and caching, behind authentication. With `--service-account-key-file`, the
/// key set also publishes the listed keys and tokens of such a key authenticate; with an issuer
/// that is not an https URL the two paths are 404, as in kube-apiserver.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_issuer_publishes_its_keys_for_oidc_discovery() {
    let dir = tempfile::tempdir().unwrap();
    // The old key, retired from signing but still listed for verification.
    let old_key = write(
        dir.path(),
        "old.pem",
        include_str!("fixtures/sa-signing-rsa-pkcs8.pem"),
    );
    let old = server_with(ServeArgs {
        token_auth_file: Some(write(dir.path(), "tokens.csv", TOKENS)),
        service_account_signing_key_file: Some(old_key.clone()),
        ..ServeArgs::default()
    })
    .await;
    let server = server_with(ServeArgs {
        token_auth_file: Some(write(dir.path(), "tokens.csv", TOKENS)),
        service_account_key_file: Some(vec![old_key]),
        service_account_jwks_uri: Some("https://keys.example/openid/v1/jwks".to_owned()),
        ..ServeArgs::default()
    })
    .await;
    let get = |addr, path: &'static str, headers: &'static [(&'static str, &'static str)]| async move {
        watchkeeper_testkit::request(addr, "GET", path, headers, b"")
            .await
            .unwrap()
    };
    const ADMIN: &[(&str, &str)] = &[("Authorization", "Bearer admin-token")];
    let configuration = get(server.addr, "/.well-known/openid-configuration", ADMIN).await;
    assert_eq!(configuration.status, 200, "{}", configuration.text());
    assert_eq!(
        configuration.header("content-type"),
        Some("application/json")
    );
    assert_eq!(
        configuration.header("cache-control"),
        Some("public, max-age=3600")
    );
    assert_eq!(
        configuration.text(),
        r#"{"issuer":"https://kubernetes.default.svc.cluster.local","jwks_uri":"https://keys.example/openid/v1/jwks","response_types_supported":["id_token"],"subject_types_supported":["public"],"id_token_signing_alg_values_supported":["ES256","RS256"]}"#
    );
    let keyset = get(server.addr, "/openid/v1/jwks", ADMIN).await;
    assert_eq!(keyset.status, 200);
    assert_eq!(
        keyset.header("content-type"),
        Some("application/jwk-set+json")
    );
    assert_eq!(keyset.header("cache-control"), Some("public, max-age=3600"));
    let keys = keyset.json()["keys"].as_array().unwrap().clone();
    assert_eq!(
        keys.len(),
        2,
        "the generated signing key and the listed one"
    );
    assert_eq!(
        keys[1]["kid"],
        "COwLEfhIJEXCCAuLASrtE23lWkrYDnCKeV0k2ikgS5c"
    );
    // Without credentials: 401, as every path but health and version.
    let anonymous = get(server.addr, "/openid/v1/jwks", &[]).await;
    assert_eq!(anonymous.status, 401);

    // A relying party verifies a token of this server, and one of the old key, with the set.
    let mut tokens = Vec::new();
    for target in [&server, &old] {
        let (code, body) = call(
            target,
            Some("admin-token"),
            "POST",
            "/api/v1/namespaces/default/serviceaccounts",
            &json!({"metadata": {"name": "robot"}}),
        )
        .await;
        assert_eq!(code, 201, "{body}");
        let (code, body) = call(
            target,
            Some("admin-token"),
            "POST",
            "/api/v1/namespaces/default/serviceaccounts/robot/token",
            &json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"audiences": ["vault"]}}),
        )
        .await;
        assert_eq!(code, 201, "{body}");
        tokens.push(body["status"]["token"].as_str().unwrap().to_owned());
    }
    for token in &tokens {
        let header = jsonwebtoken::decode_header(token).unwrap();
        let jwk = keys
            .iter()
            .find(|k| Some(k["kid"].as_str().unwrap()) == header.kid.as_deref())
            .expect("the token's key is published");
        let jwk: jsonwebtoken::jwk::Jwk = serde_json::from_value(jwk.clone()).unwrap();
        let mut validation = jsonwebtoken::Validation::new(header.alg);
        validation.set_audience(&["vault"]);
        validation.set_issuer(&["https://kubernetes.default.svc.cluster.local"]);
        let claims = jsonwebtoken::decode::<Value>(
            token,
            &jsonwebtoken::DecodingKey::from_jwk(&jwk).unwrap(),
            &validation,
        )
        .unwrap()
        .claims;
        assert_eq!(claims["sub"], "system:serviceaccount:default:robot");
    }
    // The old instance's token authenticates here: the service account of the same name
    // exists here with another uid, so TokenReview names the uid mismatch — the key verified.
    let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
        "spec": {"token": tokens[1], "audiences": ["vault"]}});
    let (code, body) = call(
        &server,
        Some("admin-token"),
        "POST",
        "/apis/authentication.k8s.io/v1/tokenreviews",
        &review,
    )
    .await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(
        body["status"]["authenticated"],
        Value::Null,
        "false is left out: {body}"
    );
    assert!(
        body["status"]["error"]
            .as_str()
            .unwrap()
            .starts_with("service account UID ("),
        "the signature verified, the uid did not: {body}"
    );
    old.shutdown().await;
    server.shutdown().await;

    // An issuer that cannot be an OIDC issuer: no discovery.
    let plain = server_with(ServeArgs {
        service_account_issuer: Some(vec!["kubernetes".to_owned()]),
        ..ServeArgs::default()
    })
    .await;
    for path in ["/.well-known/openid-configuration", "/openid/v1/jwks"] {
        let (code, body) = call(&plain, None, "GET", path, &Value::Null).await;
        assert_eq!(code, 404, "{path}: {body}");
    }
    plain.shutdown().await;
}

//! RBAC authorization (`--authorization-mode RBAC`) end to end: over raw HTTP with bearer
//! tokens (kube's 403 text, a binding that decides the very next request, escalation refused
//! with kube's message, the access reviews and `SelfSubjectRulesReview` answered by the chain,
//! the bootstrap policy and the aggregated `view` role), the startup errors of
//! `--authorization-mode`, and the real kubectl (`auth can-i`, `auth can-i --list`,
//! `create role`, `create rolebinding`, `--as` impersonation).

use crate::common;
use crate::kubectl_support;

use std::path::Path;

use serde_json::{Value, json};
use watchkeeper::Server;
use watchkeeper::config::{ServeArgs, ServeConfig};

use common::{WatchReader, request_with_headers, server_with};
use kubectl_support::Kubectl;

const TOKENS: &str = "admin-token,admin,1,\"system:masters\"
alice-token,alice,2
bob-token,bob,3,\"devs\"
";

const RBAC: &str = "rbac.authorization.k8s.io/v1";

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// A server with `--authorization-mode RBAC`, the token file and the namespace `team`.
async fn rbac_server(dir: &Path) -> Server {
    let server = server_with(ServeArgs {
        token_auth_file: Some(write(dir, "tokens.csv", TOKENS)),
        authorization_mode: Some(vec!["RBAC".to_owned()]),
        ..ServeArgs::default()
    })
    .await;
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}});
    let (status, body) = call(&server, "admin", "POST", "/api/v1/namespaces", &namespace).await;
    assert_eq!(status, 201, "{body}");
    server
}

/// One request as `who` (its token is `<who>-token`).
async fn call(server: &Server, who: &str, method: &str, path: &str, body: &Value) -> (u16, Value) {
    let bearer = format!("Bearer {who}-token");
    let headers = [("Authorization", bearer.as_str())];
    let body = if body.is_null() {
        String::new()
    } else {
        body.to_string()
    };
    let (status, text) = request_with_headers(server.addr, method, path, &headers, &body).await;
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

fn role(name: &str, rules: Value) -> Value {
    json!({"apiVersion": RBAC, "kind": "Role", "metadata": {"name": name}, "rules": rules})
}

fn role_binding(name: &str, kind: &str, role: &str, subjects: Value) -> Value {
    json!({"apiVersion": RBAC, "kind": "RoleBinding", "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role},
        "subjects": subjects})
}

fn user(name: &str) -> Value {
    json!([{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": name}])
}

const ROLES: &str = "/apis/rbac.authorization.k8s.io/v1/namespaces/team/roles";
const BINDINGS: &str = "/apis/rbac.authorization.k8s.io/v1/namespaces/team/rolebindings";
const PODS: &str = "/api/v1/namespaces/team/pods";

/// A binding created decides the very next request, and so does its deletion; a denial is
/// kube's 403 text, with RBAC's reason when a bound role is missing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_binding_applies_to_the_next_request() {
    let dir = tempfile::tempdir().unwrap();
    let server = rbac_server(dir.path()).await;
    let (status, body) = call(&server, "alice", "GET", PODS, &Value::Null).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["reason"], "Forbidden");
    assert_eq!(
        body["message"],
        "pods is forbidden: User \"alice\" cannot list resource \"pods\" in API group \"\" in the namespace \"team\""
    );
    let reader = role(
        "pod-reader",
        json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]),
    );
    assert_eq!(call(&server, "admin", "POST", ROLES, &reader).await.0, 201);
    let binding = role_binding("alice-reads", "Role", "pod-reader", user("alice"));
    assert_eq!(
        call(&server, "admin", "POST", BINDINGS, &binding).await.0,
        201
    );
    let (status, body) = call(&server, "alice", "GET", PODS, &Value::Null).await;
    assert_eq!(status, 200, "{body}");
    // Not in another namespace, not another verb.
    assert_eq!(
        call(
            &server,
            "alice",
            "GET",
            "/api/v1/namespaces/default/pods",
            &Value::Null
        )
        .await
        .0,
        403
    );
    assert_eq!(
        call(
            &server,
            "alice",
            "DELETE",
            &format!("{PODS}/x"),
            &Value::Null
        )
        .await
        .0,
        403
    );
    // Deleted, it no longer grants anything.
    let path = format!("{BINDINGS}/alice-reads");
    assert_eq!(
        call(&server, "admin", "DELETE", &path, &Value::Null)
            .await
            .0,
        200
    );
    assert_eq!(
        call(&server, "alice", "GET", PODS, &Value::Null).await.0,
        403
    );
    // Bound to a role that does not exist: RBAC says why.
    let dangling = role_binding("dangling", "Role", "missing", user("alice"));
    assert_eq!(
        call(&server, "admin", "POST", BINDINGS, &dangling).await.0,
        201
    );
    let (_, body) = call(&server, "alice", "GET", PODS, &Value::Null).await;
    assert_eq!(
        body["message"],
        "pods is forbidden: User \"alice\" cannot list resource \"pods\" in API group \"\" in the namespace \"team\": RBAC: role.rbac.authorization.k8s.io \"missing\" not found"
    );
    server.shutdown().await;
}

/// A role whose name a URL must escape (`a b`, `é`: kube's `ValidateRBACName` takes any path
/// segment) is created, read, authorized by its decoded name (`resourceNames`), patched and
/// deleted at its escaped path, as kube-apiserver serves it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_a_url_must_escape_are_read_decoded() {
    let dir = tempfile::tempdir().unwrap();
    let server = rbac_server(dir.path()).await;
    const NAME: &str = "reader of caf\u{e9} <x>";
    const ESCAPED: &str = "reader%20of%20caf%C3%A9%20%3Cx%3E";
    let cluster_roles = "/apis/rbac.authorization.k8s.io/v1/clusterroles";
    let named = json!({"apiVersion": RBAC, "kind": "ClusterRole", "metadata": {"name": NAME},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]});
    let (status, body) = call(&server, "admin", "POST", cluster_roles, &named).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["metadata"]["name"], NAME);
    // alice may read that one role by name, nothing else.
    let getter = json!({"apiVersion": RBAC, "kind": "ClusterRole",
        "metadata": {"name": "get-one-role"},
        "rules": [{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"],
            "resourceNames": [NAME], "verbs": ["get"]}]});
    assert_eq!(
        call(&server, "admin", "POST", cluster_roles, &getter)
            .await
            .0,
        201
    );
    let binding = json!({"apiVersion": RBAC, "kind": "ClusterRoleBinding",
        "metadata": {"name": "alice-gets-one-role"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
            "name": "get-one-role"},
        "subjects": user("alice")});
    let bindings = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings";
    assert_eq!(
        call(&server, "admin", "POST", bindings, &binding).await.0,
        201
    );
    let path = format!("{cluster_roles}/{ESCAPED}");
    let (status, body) = call(&server, "alice", "GET", &path, &Value::Null).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["metadata"]["name"], NAME);
    // The same name in lower-case hex is the same object.
    let lower = path.replace("%C3%A9", "%c3%a9").replace("%3C", "%3c");
    let (status, body) = call(&server, "alice", "GET", &lower, &Value::Null).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = call(
        &server,
        "alice",
        "GET",
        &format!("{cluster_roles}/get-one-role"),
        &Value::Null,
    )
    .await;
    assert_eq!(status, 403, "{body}");
    let patch = json!({"metadata": {"labels": {"patched": "yes"}}});
    let (status, text) = request_with_headers(
        server.addr,
        "PATCH",
        &path,
        &[
            ("Authorization", "Bearer admin-token"),
            ("Content-Type", "application/merge-patch+json"),
        ],
        &patch.to_string(),
    )
    .await;
    assert_eq!(status, 200, "{text}");
    let (_, body) = call(&server, "admin", "GET", &path, &Value::Null).await;
    assert_eq!(body["metadata"]["labels"]["patched"], "yes", "{body}");
    let (status, body) = call(&server, "admin", "DELETE", &path, &Value::Null).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = call(&server, "admin", "GET", &path, &Value::Null).await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(
        body["message"],
        format!("clusterroles.rbac.authorization.k8s.io \"{NAME}\" not found")
    );
    server.shutdown().await;
}

/// A user who may write roles and bindings but holds few permissions cannot grant more than
/// it holds (kube's message), can grant what it holds, and can bind a role it may `bind`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_cannot_escalate() {
    let dir = tempfile::tempdir().unwrap();
    let server = rbac_server(dir.path()).await;
    let manager = role(
        "rbac-manager",
        json!([
            {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"], "verbs": ["create", "get", "list"]},
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
        ]),
    );
    assert_eq!(call(&server, "admin", "POST", ROLES, &manager).await.0, 201);
    let binding = role_binding("bob-manages", "Role", "rbac-manager", user("bob"));
    assert_eq!(
        call(&server, "admin", "POST", BINDINGS, &binding).await.0,
        201
    );

    let greedy = role(
        "greedy",
        json!([{"apiGroups": [""], "resources": ["pods", "secrets"], "verbs": ["get", "list"]}]),
    );
    let (status, body) = call(&server, "bob", "POST", ROLES, &greedy).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(
        body["message"],
        "roles.rbac.authorization.k8s.io \"greedy\" is forbidden: user \"bob\" (groups=[\"devs\" \"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"list\"]}\n{APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\" \"list\"]}"
    );
    // What bob holds he may grant.
    let modest = role(
        "modest",
        json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]),
    );
    assert_eq!(call(&server, "bob", "POST", ROLES, &modest).await.0, 201);
    // Binding a bootstrap ClusterRole would grant what he does not hold.
    let to_admin = role_binding(
        "bob-admin",
        "ClusterRole",
        "system:aggregate-to-edit",
        user("bob"),
    );
    let (status, body) = call(&server, "bob", "POST", BINDINGS, &to_admin).await;
    assert_eq!(status, 403, "{body}");
    assert!(
        body["message"].as_str().unwrap().starts_with(
            "rolebindings.rbac.authorization.k8s.io \"bob-admin\" is forbidden: user \"bob\" (groups=[\"devs\" \"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n"
        ),
        "{body}"
    );
    // Nothing was written by the refused requests.
    let (_, roles) = call(&server, "admin", "GET", ROLES, &Value::Null).await;
    let names: Vec<&str> = roles["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["modest", "rbac-manager"]);
    // With `bind` on the `view` ClusterRole, bob may bind it though he lacks its rules.
    let binder = role(
        "binder",
        json!([{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"], "verbs": ["bind"], "resourceNames": ["view"]}]),
    );
    assert_eq!(call(&server, "admin", "POST", ROLES, &binder).await.0, 201);
    let bound = role_binding("bob-binds", "Role", "binder", user("bob"));
    assert_eq!(
        call(&server, "admin", "POST", BINDINGS, &bound).await.0,
        201
    );
    let to_view = role_binding("alice-views", "ClusterRole", "view", user("alice"));
    let (status, body) = call(&server, "bob", "POST", BINDINGS, &to_view).await;
    assert_eq!(status, 201, "{body}");
    server.shutdown().await;
}

/// The bootstrap policy is in the store, `view` gets the rules of `system:aggregate-to-view`
/// from the aggregation controller, and the reviews answer from the chain.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bootstrap_policy_aggregation_and_reviews() {
    let dir = tempfile::tempdir().unwrap();
    let server = rbac_server(dir.path()).await;
    let clusterroles = "/apis/rbac.authorization.k8s.io/v1/clusterroles";
    for name in [
        "cluster-admin",
        "admin",
        "edit",
        "system:basic-user",
        "system:discovery",
    ] {
        let (status, body) = call(
            &server,
            "admin",
            "GET",
            &format!("{clusterroles}/{name}"),
            &Value::Null,
        )
        .await;
        assert_eq!(status, 200, "{name}: {body}");
        assert_eq!(
            body["metadata"]["annotations"]["rbac.authorization.kubernetes.io/autoupdate"],
            "true"
        );
    }
    // `view` is aggregated: created with the rules of `system:aggregate-to-view` (read from
    // its watch, which the controller's later changes reach too).
    let mut watch = WatchReader::open_with_headers(
        server.addr,
        &format!("{clusterroles}?watch=1&fieldSelector=metadata.name%3Dview"),
        None,
        &[("Authorization", "Bearer admin-token")],
    )
    .await;
    let view = loop {
        let event = watch.next().await.expect("the watch stays open");
        if event["object"]["rules"]
            .as_array()
            .is_some_and(|r| !r.is_empty())
        {
            break event["object"].clone();
        }
    };
    let (_, source) = call(
        &server,
        "admin",
        "GET",
        &format!("{clusterroles}/system:aggregate-to-view"),
        &Value::Null,
    )
    .await;
    assert_eq!(view["rules"], source["rules"]);
    // A ClusterRole labelled to aggregate to view (as a chart's CRD roles are) joins it.
    let widgets = json!({"apiVersion": RBAC, "kind": "ClusterRole",
        "metadata": {"name": "widgets-view", "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
        "rules": [{"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["get", "list"]}]});
    assert_eq!(
        call(&server, "admin", "POST", clusterroles, &widgets)
            .await
            .0,
        201
    );
    let view = loop {
        let event = watch.next().await.expect("the watch stays open");
        let rules = event["object"]["rules"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if rules.iter().any(|r| r["resources"] == json!(["widgets"])) {
            break event["object"].clone();
        }
    };
    let rules = view["rules"].as_array().unwrap();
    assert_eq!(rules.len(), source["rules"].as_array().unwrap().len() + 1);
    // Bound to `view` in `team`, alice may list configmaps there (an aggregated rule).
    let binding = role_binding("alice-views", "ClusterRole", "view", user("alice"));
    assert_eq!(
        call(&server, "admin", "POST", BINDINGS, &binding).await.0,
        201
    );
    let configmaps = "/api/v1/namespaces/team/configmaps";
    assert_eq!(
        call(&server, "alice", "GET", configmaps, &Value::Null)
            .await
            .0,
        200
    );

    // SubjectAccessReview by the admin about alice; the reason of a denial is the chain's.
    let sar = |verb: &str, resource: &str| {
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": {"user": "alice", "groups": ["system:authenticated"],
                "resourceAttributes": {"verb": verb, "resource": resource, "namespace": "team"}}})
    };
    let path = "/apis/authorization.k8s.io/v1/subjectaccessreviews";
    let (status, body) = call(&server, "admin", "POST", path, &sar("list", "configmaps")).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(
        body["status"],
        json!({"allowed": true, "reason": "RBAC: allowed by RoleBinding \"alice-views/team\" of ClusterRole \"view\" to User \"alice\""})
    );
    let (_, body) = call(&server, "admin", "POST", path, &sar("list", "secrets")).await;
    assert_eq!(body["status"], json!({"allowed": false}));
    // alice may not ask about others (she holds no `create` on subjectaccessreviews).
    assert_eq!(
        call(&server, "alice", "POST", path, &sar("list", "pods"))
            .await
            .0,
        403
    );
    // Her own rules in team: view's, and system:basic-user's and system:discovery's.
    let rules = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview",
        "spec": {"namespace": "team"}});
    let (status, body) = call(
        &server,
        "alice",
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
        &rules,
    )
    .await;
    assert_eq!(status, 201, "{body}");
    // Every mode here resolves its rules completely (kube's RBAC, as its AlwaysAllow,
    // AlwaysDeny and ABAC rule resolvers, answers `incomplete: false`).
    assert_eq!(body["status"]["incomplete"], false, "{body}");
    let resource_rules = body["status"]["resourceRules"].as_array().unwrap();
    assert!(resource_rules.iter().any(|r| {
        r["resources"]
            .as_array()
            .unwrap()
            .contains(&json!("configmaps"))
            && r["verbs"] == json!(["get", "list", "watch"])
    }));
    assert!(resource_rules.iter().any(|r| {
        r["resources"]
            .as_array()
            .unwrap()
            .contains(&json!("selfsubjectaccessreviews"))
    }));
    assert!(
        body["status"]["nonResourceRules"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["nonResourceURLs"]
                .as_array()
                .unwrap()
                .contains(&json!("/apis/*")))
    );
    server.shutdown().await;
}

/// `--authorization-mode` is validated as kube-apiserver validates it.
#[test]
fn authorization_mode_is_validated_as_kube() {
    let modes = |list: &[&str], policy: bool| {
        ServeConfig::from_args(ServeArgs {
            authorization_mode: Some(list.iter().map(|s| (*s).to_owned()).collect()),
            authorization_policy_file: policy.then(|| "/p.jsonl".into()),
            ..ServeArgs::default()
        })
        .map(|c| c.authorization_modes.len())
        .map_err(|e| e.to_string())
    };
    assert_eq!(modes(&["RBAC"], false), Ok(1));
    assert_eq!(modes(&["ABAC", "RBAC"], true), Ok(2));
    assert_eq!(modes(&["AlwaysDeny", "AlwaysAllow"], false), Ok(2));
    assert_eq!(
        modes(&["Foo"], false),
        Err("authorization-mode \"Foo\" is not a valid mode".to_owned())
    );
    assert_eq!(
        modes(&["ABAC"], false),
        Err("authorization-mode ABAC's authorization policy file not passed".to_owned())
    );
    assert_eq!(
        modes(&["RBAC"], true),
        Err("cannot specify --authorization-policy-file without mode ABAC".to_owned())
    );
    assert_eq!(
        modes(&["RBAC", "RBAC"], false),
        Err("authorization-mode [\"RBAC\" \"RBAC\"] has mode specified more than once".to_owned())
    );
    let node = modes(&["Node", "RBAC"], false).unwrap_err();
    assert!(
        node.contains("\"Node\" is not supported by watchkeeper"),
        "{node}"
    );
    // Without the flag: ABAC with a policy file, else AlwaysAllow (one mode either way).
    let default = ServeConfig::from_args(ServeArgs::default()).unwrap();
    assert_eq!(default.authorization_modes.len(), 1);
    // The TOML key.
    let file: ServeArgs =
        toml::from_str("authorization-mode = [\"RBAC\", \"AlwaysDeny\"]").unwrap();
    assert_eq!(
        ServeConfig::from_args(file)
            .unwrap()
            .authorization_modes
            .len(),
        2
    );
}

/// A server with `--authorization-mode ABAC,RBAC` where ABAC lets the anonymous user
/// impersonate anyone (so that the real kubectl, anonymous over plain HTTP, acts through
/// `--as`) and RBAC decides for whom it acts.
async fn impersonating_server(dir: &Path) -> Server {
    let policy = [
        json!({"user": "system:anonymous", "namespace": "*", "resource": "users", "apiGroup": ""}),
        json!({"user": "system:anonymous", "namespace": "*", "resource": "groups", "apiGroup": ""}),
    ]
    .iter()
    .map(|spec| {
        json!({"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": spec})
            .to_string()
    })
    .collect::<Vec<_>>()
    .join("\n");
    server_with(ServeArgs {
        authorization_policy_file: Some(write(dir, "policy.jsonl", &policy)),
        authorization_mode: Some(vec!["ABAC".to_owned(), "RBAC".to_owned()]),
        ..ServeArgs::default()
    })
    .await
}

/// The real kubectl, anonymous over plain HTTP, acting through `--as`: ABAC lets the
/// anonymous user impersonate, RBAC decides for whom it acts (`ABAC,RBAC`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_auth_can_i_create_role_and_rolebinding_as_impersonated_users() {
    let dir = tempfile::tempdir().unwrap();
    let server = impersonating_server(dir.path()).await;
    let k = Kubectl::new(server.addr);
    let admin = ["--as", "admin", "--as-group", "system:masters"];
    let as_admin = |args: &[&'static str]| [&admin[..], args].concat();
    k.ok(&as_admin(&["create", "namespace", "team"])).await;

    let can_i = |who: &'static str, verb: &'static str| {
        ["--as", who, "auth", "can-i", verb, "pods", "-n", "team"]
    };
    // kubectl prints the chain's reason: ABAC's, RBAC giving none.
    let out = k.fails(&can_i("alice", "list")).await;
    assert_eq!(out.stdout.trim(), "no - No policy matched.");
    k.ok(&as_admin(&[
        "create",
        "role",
        "pod-reader",
        "--verb=get,list,watch",
        "--resource=pods",
        "-n",
        "team",
    ]))
    .await;
    k.ok(&as_admin(&[
        "create",
        "rolebinding",
        "alice-reads",
        "--role=pod-reader",
        "--user=alice",
        "-n",
        "team",
    ]))
    .await;
    assert_eq!(k.ok(&can_i("alice", "list")).await.trim(), "yes");
    assert_eq!(
        k.fails(&can_i("alice", "delete")).await.stdout.trim(),
        "no - No policy matched."
    );
    k.ok(&["--as", "alice", "get", "pods", "-n", "team"]).await;
    let denied = k
        .fails(&["--as", "alice", "get", "secrets", "-n", "team"])
        .await;
    assert!(
        denied.stderr.contains(
            "Error from server (Forbidden): secrets is forbidden: User \"alice\" cannot list resource \"secrets\" in API group \"\" in the namespace \"team\""
        ),
        "{}",
        denied.stderr
    );
    let list = k
        .ok(&["--as", "alice", "auth", "can-i", "--list", "-n", "team"])
        .await;
    assert!(
        list.lines()
            .any(|l| l.starts_with("pods ") && l.contains("[get list watch]")),
        "{list}"
    );
    // alice cannot write roles, let alone grant more than she holds.
    let refused = k
        .fails(&[
            "--as",
            "alice",
            "create",
            "role",
            "mine",
            "--verb=*",
            "--resource=secrets",
            "-n",
            "team",
        ])
        .await;
    assert!(
        refused
            .stderr
            .contains("User \"alice\" cannot create resource \"roles\" in API group \"rbac.authorization.k8s.io\""),
        "{}",
        refused.stderr
    );
    server.shutdown().await;
}

/// Caching-proxy mode: RBAC reads the proxy's cached RBAC objects (a binding written through
/// the proxy decides the next request there), and a proxy that would not cache them refuses
/// to start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caching_proxy_authorizes_from_its_cached_rbac_objects() {
    let dir = tempfile::tempdir().unwrap();
    let upstream = server_with(ServeArgs::default()).await;
    let proxy_args = |resources: Option<Vec<String>>| ServeArgs {
        listen: Some("127.0.0.1:0".parse().unwrap()),
        upstream: Some(format!("http://{}", upstream.addr)),
        upstream_resources: resources,
        token_auth_file: Some(write(dir.path(), "tokens.csv", TOKENS)),
        authorization_mode: Some(vec!["RBAC".to_owned()]),
        ..ServeArgs::default()
    };
    let Err(error) = watchkeeper::start(
        ServeConfig::from_args(proxy_args(Some(vec!["configmaps".into()]))).unwrap(),
    )
    .await
    else {
        panic!("RBAC needs the RBAC objects cached");
    };
    let error = error.to_string();
    assert!(
        error.contains("clusterroles.rbac.authorization.k8s.io, clusterrolebindings.rbac.authorization.k8s.io, roles.rbac.authorization.k8s.io, rolebindings.rbac.authorization.k8s.io"),
        "{error}"
    );
    let proxy = watchkeeper::start(ServeConfig::from_args(proxy_args(None)).unwrap())
        .await
        .expect("the proxy starts");
    tokio::time::timeout(common::HANG_GUARD, proxy.ready())
        .await
        .expect("proxy ready");
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}});
    assert_eq!(
        call(&proxy, "admin", "POST", "/api/v1/namespaces", &namespace)
            .await
            .0,
        201
    );
    assert_eq!(
        call(&proxy, "alice", "GET", PODS, &Value::Null).await.0,
        403
    );
    let reader = role(
        "pod-reader",
        json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]),
    );
    assert_eq!(call(&proxy, "admin", "POST", ROLES, &reader).await.0, 201);
    let binding = role_binding("alice-reads", "Role", "pod-reader", user("alice"));
    assert_eq!(
        call(&proxy, "admin", "POST", BINDINGS, &binding).await.0,
        201
    );
    let (status, body) = call(&proxy, "alice", "GET", PODS, &Value::Null).await;
    assert_eq!(status, 200, "{body}");
    proxy.shutdown().await;
    upstream.shutdown().await;
}

/// An admission policy's `authorizer` asks the RBAC chain as the writer (kube's docs'
/// example): a configmap may be created only by who may get pods in its namespace; alice may,
/// bob may not (kube's message). `authorizer.serviceAccount` asks as the service account.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admission_policy_authorizer_checks_the_writer_with_rbac() {
    let dir = tempfile::tempdir().unwrap();
    let server = rbac_server(dir.path()).await;
    let writer = role(
        "writer",
        json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]}]),
    );
    let reader = role(
        "pod-reader",
        json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]),
    );
    for object in [writer, reader] {
        assert_eq!(call(&server, "admin", "POST", ROLES, &object).await.0, 201);
    }
    let both = json!([{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice"},
        {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "bob"}]);
    for binding in [
        role_binding("writers", "Role", "writer", both),
        role_binding("alice-reads", "Role", "pod-reader", user("alice")),
        role_binding(
            "builder-reads",
            "Role",
            "pod-reader",
            json!([{"kind": "ServiceAccount", "name": "builder", "namespace": "team"}]),
        ),
    ] {
        assert_eq!(
            call(&server, "admin", "POST", BINDINGS, &binding).await.0,
            201
        );
    }
    let check = "authorizer.group('').resource('pods').namespace(object.metadata.namespace).check('get').allowed()";
    let service_account = "authorizer.serviceAccount('team', 'builder').group('').resource('pods').namespace('team').check('get').allowed() && !authorizer.serviceAccount('team', 'other').group('').resource('pods').namespace('team').check('get').allowed()";
    let policy = json!({"apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy", "metadata": {"name": "pod-readers-only"},
        "spec": {"matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
            "resources": ["configmaps"], "operations": ["CREATE"]}]},
            "validations": [{"expression": check}, {"expression": service_account}]}});
    let binding = json!({"apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": "pod-readers-only"},
        "spec": {"policyName": "pod-readers-only", "validationActions": ["Deny"]}});
    let admission = "/apis/admissionregistration.k8s.io/v1";
    for (path, object) in [
        (format!("{admission}/validatingadmissionpolicies"), policy),
        (
            format!("{admission}/validatingadmissionpolicybindings"),
            binding,
        ),
    ] {
        let (status, body) = call(&server, "admin", "POST", &path, &object).await;
        assert_eq!(status, 201, "{body}");
    }
    let configmap =
        |name: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}});
    let configmaps = "/api/v1/namespaces/team/configmaps";
    let (status, body) = call(&server, "alice", "POST", configmaps, &configmap("a")).await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = call(&server, "bob", "POST", configmaps, &configmap("b")).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(
        body["message"],
        format!(
            "configmaps \"b\" is forbidden: ValidatingAdmissionPolicy 'pod-readers-only' with binding 'pod-readers-only' denied request: failed expression: {check}"
        )
    );
    // Once bob may get pods, the policy admits him too.
    let bob_reads = role_binding("bob-reads", "Role", "pod-reader", user("bob"));
    assert_eq!(
        call(&server, "admin", "POST", BINDINGS, &bob_reads).await.0,
        201
    );
    let (status, body) = call(&server, "bob", "POST", configmaps, &configmap("b")).await;
    assert_eq!(status, 201, "{body}");
    server.shutdown().await;
}

/// Impersonating a service account needs `impersonate` on `serviceaccounts` in its
/// namespace (kube's 403 text), and the request then acts as the account with its groups.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn impersonating_a_service_account_needs_impersonate_on_serviceaccounts() {
    let dir = tempfile::tempdir().unwrap();
    let server = rbac_server(dir.path()).await;
    let as_builder = |who: &'static str| {
        let server = &server;
        async move {
            let bearer = format!("Bearer {who}-token");
            let headers = [
                ("Authorization", bearer.as_str()),
                ("Impersonate-User", "system:serviceaccount:team:builder"),
            ];
            let (status, text) = request_with_headers(server.addr, "GET", PODS, &headers, "").await;
            (status, serde_json::from_str::<Value>(&text).unwrap())
        }
    };
    let (status, body) = as_builder("bob").await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(
        body["message"],
        "serviceaccounts \"builder\" is forbidden: User \"bob\" cannot impersonate resource \"serviceaccounts\" in API group \"\" in the namespace \"team\""
    );
    // A grant on `users` does not cover service accounts.
    let clusterroles = "/apis/rbac.authorization.k8s.io/v1/clusterroles";
    let clusterrolebindings = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings";
    let users = json!({"apiVersion": RBAC, "kind": "ClusterRole", "metadata": {"name": "impersonate-users"},
        "rules": [{"apiGroups": [""], "resources": ["users"], "verbs": ["impersonate"]}]});
    assert_eq!(
        call(&server, "admin", "POST", clusterroles, &users).await.0,
        201
    );
    let mut users_binding =
        role_binding("bob-users", "ClusterRole", "impersonate-users", user("bob"));
    users_binding["kind"] = json!("ClusterRoleBinding");
    assert_eq!(
        call(
            &server,
            "admin",
            "POST",
            clusterrolebindings,
            &users_binding
        )
        .await
        .0,
        201
    );
    assert_eq!(as_builder("bob").await.0, 403);
    // `impersonate` on that service account in its namespace: bob acts as builder, whom
    // nothing lets list pods.
    let accounts = role(
        "impersonate-builder",
        json!([{"apiGroups": [""], "resources": ["serviceaccounts"], "resourceNames": ["builder"],
            "verbs": ["impersonate"]}]),
    );
    assert_eq!(
        call(&server, "admin", "POST", ROLES, &accounts).await.0,
        201
    );
    let binding = role_binding(
        "bob-impersonates",
        "Role",
        "impersonate-builder",
        user("bob"),
    );
    assert_eq!(
        call(&server, "admin", "POST", BINDINGS, &binding).await.0,
        201
    );
    let (status, body) = as_builder("bob").await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(
        body["message"],
        "pods is forbidden: User \"system:serviceaccount:team:builder\" cannot list resource \"pods\" in API group \"\" in the namespace \"team\""
    );
    // Bound through its group `system:serviceaccounts:team`, the account may list pods.
    let reader = role(
        "pod-lister",
        json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]),
    );
    assert_eq!(call(&server, "admin", "POST", ROLES, &reader).await.0, 201);
    let group = json!([{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "system:serviceaccounts:team"}]);
    let by_group = role_binding("team-accounts-list", "Role", "pod-lister", group);
    assert_eq!(
        call(&server, "admin", "POST", BINDINGS, &by_group).await.0,
        201
    );
    let (status, body) = as_builder("bob").await;
    assert_eq!(status, 200, "{body}");
    server.shutdown().await;
}

/// The controllers kube-apiserver v1.33 (default feature gates) creates a
/// `system:controller:<name>` ClusterRole and ClusterRoleBinding for, as a fresh v1.33
/// cluster lists them.
const KUBE_1_33_CONTROLLERS: [&str; 35] = [
    "attachdetach-controller",
    "certificate-controller",
    "clusterrole-aggregation-controller",
    "cronjob-controller",
    "daemon-set-controller",
    "deployment-controller",
    "disruption-controller",
    "endpoint-controller",
    "endpointslice-controller",
    "endpointslicemirroring-controller",
    "ephemeral-volume-controller",
    "expand-controller",
    "generic-garbage-collector",
    "horizontal-pod-autoscaler",
    "job-controller",
    "legacy-service-account-token-cleaner",
    "namespace-controller",
    "node-controller",
    "persistent-volume-binder",
    "pod-garbage-collector",
    "pv-protection-controller",
    "pvc-protection-controller",
    "replicaset-controller",
    "replication-controller",
    "resourcequota-controller",
    "root-ca-cert-publisher",
    "route-controller",
    "selinux-warning-controller",
    "service-account-controller",
    "service-cidrs-controller",
    "service-controller",
    "statefulset-controller",
    "ttl-after-finished-controller",
    "ttl-controller",
    "validatingadmissionpolicy-status-controller",
];

/// kube-apiserver v1.33's other bootstrap ClusterRoles.
const KUBE_1_33_CLUSTER_ROLES: [&str; 31] = [
    "admin",
    "cluster-admin",
    "edit",
    "system:aggregate-to-admin",
    "system:aggregate-to-edit",
    "system:aggregate-to-view",
    "system:auth-delegator",
    "system:basic-user",
    "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
    "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
    "system:certificates.k8s.io:kube-apiserver-client-approver",
    "system:certificates.k8s.io:kube-apiserver-client-kubelet-approver",
    "system:certificates.k8s.io:kubelet-serving-approver",
    "system:certificates.k8s.io:legacy-unknown-approver",
    "system:discovery",
    "system:heapster",
    "system:kube-aggregator",
    "system:kube-controller-manager",
    "system:kube-dns",
    "system:kube-scheduler",
    "system:kubelet-api-admin",
    "system:monitoring",
    "system:node",
    "system:node-bootstrapper",
    "system:node-problem-detector",
    "system:node-proxier",
    "system:persistent-volume-provisioner",
    "system:public-info-viewer",
    "system:service-account-issuer-discovery",
    "system:volume-scheduler",
    "view",
];

/// kube-apiserver v1.33's other bootstrap ClusterRoleBindings.
const KUBE_1_33_CLUSTER_ROLE_BINDINGS: [&str; 12] = [
    "cluster-admin",
    "system:basic-user",
    "system:discovery",
    "system:kube-controller-manager",
    "system:kube-dns",
    "system:kube-scheduler",
    "system:monitoring",
    "system:node",
    "system:node-proxier",
    "system:public-info-viewer",
    "system:service-account-issuer-discovery",
    "system:volume-scheduler",
];

/// kube-apiserver v1.33's bootstrap Roles (namespace/name).
const KUBE_1_33_ROLES: [&str; 7] = [
    "kube-public/system:controller:bootstrap-signer",
    "kube-system/extension-apiserver-authentication-reader",
    "kube-system/system::leader-locking-kube-controller-manager",
    "kube-system/system::leader-locking-kube-scheduler",
    "kube-system/system:controller:bootstrap-signer",
    "kube-system/system:controller:cloud-provider",
    "kube-system/system:controller:token-cleaner",
];

/// kube-apiserver v1.33's bootstrap RoleBindings (namespace/name).
const KUBE_1_33_ROLE_BINDINGS: [&str; 7] = [
    "kube-public/system:controller:bootstrap-signer",
    "kube-system/system::extension-apiserver-authentication-reader",
    "kube-system/system::leader-locking-kube-controller-manager",
    "kube-system/system::leader-locking-kube-scheduler",
    "kube-system/system:controller:bootstrap-signer",
    "kube-system/system:controller:cloud-provider",
    "kube-system/system:controller:token-cleaner",
];

/// `kubectl get clusterroles`, `clusterrolebindings`, `roles -A` and `rolebindings -A` list
/// what a fresh kube-apiserver v1.33 lists: every object of its bootstrap policy, the
/// controllers' and the namespaced ones of `kube-system` and `kube-public` included; and the
/// controllers' bindings name their service accounts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_lists_kube_1_33_bootstrap_policy() {
    let dir = tempfile::tempdir().unwrap();
    let server = impersonating_server(dir.path()).await;
    let k = Kubectl::new(server.addr);
    let admin = ["--as", "admin", "--as-group", "system:masters"];
    let listed = |args: &'static [&'static str]| {
        let k = &k;
        async move {
            let columns = "custom-columns=NS:.metadata.namespace,NAME:.metadata.name";
            let out = k
                .ok(&[&admin[..], args, &["-o", columns, "--no-headers"]].concat())
                .await;
            let mut names: Vec<String> = out
                .lines()
                .map(|line| {
                    let (namespace, name) = line.split_once(char::is_whitespace).unwrap();
                    match namespace {
                        "<none>" => name.trim().to_owned(),
                        namespace => format!("{namespace}/{}", name.trim()),
                    }
                })
                .collect();
            names.sort();
            names
        }
    };
    let controllers = KUBE_1_33_CONTROLLERS.map(|c| format!("system:controller:{c}"));
    let expected = |names: &[&str], with_controllers: bool| {
        let mut names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        if with_controllers {
            names.extend(controllers.iter().cloned());
        }
        names.sort();
        names
    };
    assert_eq!(
        listed(&["get", "clusterroles"]).await,
        expected(&KUBE_1_33_CLUSTER_ROLES, true)
    );
    assert_eq!(
        listed(&["get", "clusterrolebindings"]).await,
        expected(&KUBE_1_33_CLUSTER_ROLE_BINDINGS, true)
    );
    assert_eq!(
        listed(&["get", "roles", "-A"]).await,
        expected(&KUBE_1_33_ROLES, false)
    );
    assert_eq!(
        listed(&["get", "rolebindings", "-A"]).await,
        expected(&KUBE_1_33_ROLE_BINDINGS, false)
    );
    let binding = k
        .json(
            &[
                &admin[..],
                &[
                    "get",
                    "clusterrolebinding",
                    "system:controller:namespace-controller",
                ],
            ]
            .concat(),
        )
        .await;
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": "namespace-controller", "namespace": "kube-system"}])
    );
    let reader = k
        .json(
            &[
                &admin[..],
                &[
                    "get",
                    "role",
                    "-n",
                    "kube-system",
                    "extension-apiserver-authentication-reader",
                ],
            ]
            .concat(),
        )
        .await;
    assert_eq!(
        reader["rules"][0]["resourceNames"],
        json!(["extension-apiserver-authentication"])
    );
    server.shutdown().await;
}

/// Roles and bindings are validated as kube's `pkg/apis/rbac/validation` does (also without
/// `--authorization-mode RBAC`): a rule without verbs, a binding to a role of another group
/// and an unknown subject kind are kube's 422, and a binding's `roleRef` cannot change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roles_and_bindings_are_validated_as_kube_validates_them() {
    let server = common::server().await;
    let addr = server.addr;
    let rbac = "/apis/rbac.authorization.k8s.io/v1";
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "r"}, "rules": [{"apiGroups": [""], "resources": ["pods"]}]});
    let (status, body) = common::send_json(
        addr,
        "POST",
        &format!("{rbac}/namespaces/default/roles"),
        &role,
    )
    .await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(
        body["message"],
        "Role.rbac.authorization.k8s.io \"r\" is invalid: rules[0].verbs: Required value: verbs must contain at least one value"
    );
    let binding = |name: &str| {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "b"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                "name": name},
            "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io",
                "name": "alice"}]})
    };
    let bindings = format!("{rbac}/namespaces/default/rolebindings");
    let mut bad = binding("view");
    bad["roleRef"]["apiGroup"] = json!("example.com");
    bad["subjects"][0]["kind"] = json!("Robot");
    let (status, body) = common::send_json(addr, "POST", &bindings, &bad).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(
        body["message"],
        "RoleBinding.rbac.authorization.k8s.io \"b\" is invalid: [roleRef.apiGroup: Unsupported value: \"example.com\": supported values: \"rbac.authorization.k8s.io\", subjects[0].kind: Unsupported value: \"Robot\": supported values: \"ServiceAccount\", \"User\", \"Group\"]"
    );
    let (status, body) = common::send_json(addr, "POST", &bindings, &binding("view")).await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = common::request(
        addr,
        "PATCH",
        &format!("{bindings}/b"),
        "application/merge-patch+json",
        r#"{"roleRef":{"name":"edit"}}"#,
    )
    .await;
    assert_eq!(status, 422, "{body}");
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        body["message"],
        "RoleBinding.rbac.authorization.k8s.io \"b\" is invalid: roleRef: Invalid value: rbac.RoleRef{APIGroup:\"rbac.authorization.k8s.io\", Kind:\"ClusterRole\", Name:\"edit\"}: cannot change roleRef"
    );
    server.shutdown().await;
}

/// `Impersonate-Extra-<key>` headers give the impersonated user its extra (kube's
/// `WithImpersonation`: the key percent-decoded, each value a check of `impersonate` on
/// `userextras/<key>`), as `SelfSubjectReview` shows it; they were refused with 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn impersonated_extras_are_the_user_s_extra() {
    let dir = tempfile::tempdir().unwrap();
    let server = rbac_server(dir.path()).await;
    let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"});
    let whoami = |who: &'static str| {
        let (server, review) = (&server, review.to_string());
        async move {
            let bearer = format!("Bearer {who}-token");
            let headers = [
                ("Authorization", bearer.as_str()),
                ("Content-Type", "application/json"),
                ("Impersonate-User", "alice"),
                ("Impersonate-Extra-Scopes", "read"),
                ("Impersonate-Extra-Scopes", "write"),
                ("Impersonate-Extra-example.com%2Fteam", "a"),
            ];
            let (status, text) = request_with_headers(
                server.addr,
                "POST",
                "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                &headers,
                &review,
            )
            .await;
            (status, serde_json::from_str::<Value>(&text).unwrap())
        }
    };
    let (status, body) = whoami("admin").await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["status"]["userInfo"]["username"], "alice");
    assert_eq!(
        body["status"]["userInfo"]["extra"],
        json!({"example.com/team": ["a"], "scopes": ["read", "write"]})
    );
    let (status, body) = whoami("bob").await;
    assert_eq!(status, 403, "{body}");
}

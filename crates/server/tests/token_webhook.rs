//! Webhook token authentication as kube-apiserver's
//! (`--authentication-token-webhook-config-file`, `auth::token_webhook`), against a real
//! HTTPS webhook (the test's `common::hooks`, a CA made here) that records every
//! `TokenReview` it is sent and answers as the test says.

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures_util::FutureExt;
use serde_json::{Value, json};
use watchkeeper::config::{ServeArgs, ServeConfig};

use common::hooks::{Answer, Hooks};
use common::request_with_headers;

const TOKEN_REVIEWS: &str = "/apis/authentication.k8s.io/v1/tokenreviews";
const PATH: &str = "/authenticate";

/// The webhook: `jane` is jane (uid, groups, extra), `gone` is refused without an error,
/// `broken` with one, `down` is a 503; anything else is refused.
fn answer() -> Answer {
    Arc::new(|_path: String, review: Value| {
        async move {
            let version = review["apiVersion"].clone();
            let status = match review["spec"]["token"].as_str().unwrap_or_default() {
                "jane" => json!({"authenticated": true, "user": {"username": "jane",
                    "uid": "u-1", "groups": ["dev"], "extra": {"example.com/team": ["a", "b"]}}}),
                "broken" => json!({"authenticated": false, "error": "token expired"}),
                "down" => return (503, json!({})),
                _ => json!({"authenticated": false}),
            };
            (
                200,
                json!({"apiVersion": version, "kind": "TokenReview", "status": status}),
            )
        }
        .boxed()
    })
}

/// A kubeconfig naming `hooks` at [`PATH`].
fn kubeconfig(dir: &Path, hooks: &Hooks) -> PathBuf {
    hooks.kubeconfig(dir, PATH)
}

fn args(dir: &Path, hooks: &Hooks) -> ServeArgs {
    let tokens = dir.join("tokens.csv");
    std::fs::write(&tokens, "local-admin,admin,1,system:masters\n").unwrap();
    ServeArgs {
        token_auth_file: Some(tokens),
        authorization_mode: Some(vec!["RBAC".to_owned()]),
        api_audiences: Some(vec!["watchkeeper".to_owned()]),
        authentication_token_webhook_config_file: Some(kubeconfig(dir, hooks)),
        ..ServeArgs::default()
    }
}

/// `POST selfsubjectreviews` with `token`: the status and the body.
async fn whoami(server: &watchkeeper::Server, token: &str) -> (u16, Value) {
    common::whoami(server.addr, token).await
}

/// `method path` with `token`'s bearer: the status and the body.
async fn call(
    server: &watchkeeper::Server,
    token: &str,
    method: &str,
    path: &str,
    body: &Value,
) -> (u16, Value) {
    let auth = format!("Bearer {token}");
    let body = if body.is_null() {
        String::new()
    } else {
        body.to_string()
    };
    let (status, body) = request_with_headers(
        server.addr,
        method,
        path,
        &[("Authorization", &auth)],
        &body,
    )
    .await;
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

/// The tokens the webhook was asked about, in order.
fn asked(hooks: &Hooks) -> Vec<String> {
    hooks
        .at(PATH)
        .iter()
        .map(|review| {
            review["spec"]["token"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_no_other_authenticator_knows_are_reviewed_by_the_webhook_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let hooks = Hooks::start(answer()).await;
    let server = common::server_with(args(dir.path(), &hooks)).await;

    // The webhook's user, in system:authenticated, with its uid and extra.
    let (status, review) = whoami(&server, "jane").await;
    assert_eq!(status, 201, "{review}");
    let info = &review["status"]["userInfo"];
    assert_eq!(info["username"], "jane");
    assert_eq!(info["uid"], "u-1");
    assert_eq!(info["groups"], json!(["dev", "system:authenticated"]));
    assert_eq!(info["extra"]["example.com/team"], json!(["a", "b"]));
    // kube's review: v1beta1 by default, the token and this server's API audiences.
    let sent = hooks.at(PATH);
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0]["apiVersion"], "authentication.k8s.io/v1beta1");
    assert_eq!(sent[0]["kind"], "TokenReview");
    assert_eq!(
        sent[0]["spec"],
        json!({"token": "jane", "audiences": ["watchkeeper"]})
    );

    // Kept: the same token again makes no call.
    assert_eq!(whoami(&server, "jane").await.0, 201);
    assert_eq!(asked(&hooks), ["jane"]);

    // A token of the file is decided here and never sent.
    let (status, review) = whoami(&server, "local-admin").await;
    assert_eq!(status, 201);
    assert_eq!(review["status"]["userInfo"]["username"], "admin");
    assert_eq!(asked(&hooks), ["jane"]);

    // Refusals are kube's bare 401; one without an error is kept, one with an error and a
    // failed call are not.
    for token in ["gone", "gone", "broken", "broken", "down", "down"] {
        let (status, body) = whoami(&server, token).await;
        assert_eq!(status, 401, "{token}: {body}");
        assert_eq!(body["message"], "Unauthorized", "{token}");
    }
    assert_eq!(
        asked(&hooks),
        ["jane", "gone", "broken", "broken", "down", "down"]
    );
    // No token: 401; open paths stay open.
    let (status, _) = common::get_json(server.addr, "/api/v1/namespaces").await;
    assert_eq!(status, 401);
    let (status, _) = common::get_json(server.addr, "/healthz").await;
    assert_eq!(status, 200);

    // The webhook's groups are RBAC's subjects: `dev` may read ConfigMaps, not write them.
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "dev-view"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "dev"}]});
    let (status, body) = call(
        &server,
        "local-admin",
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        &binding,
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let configmaps = "/api/v1/namespaces/default/configmaps";
    // A binding applies from the next request (its write is answered once the cache has it).
    let read = call(&server, "jane", "GET", configmaps, &Value::Null).await;
    assert_eq!(read.0, 200, "{}", read.1);
    let created = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}});
    let (status, body) = call(&server, "jane", "POST", configmaps, &created).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(
        body["message"],
        "configmaps is forbidden: User \"jane\" cannot create resource \"configmaps\" in API group \"\" in the namespace \"default\""
    );
    assert_eq!(
        asked(&hooks).iter().filter(|t| *t == "jane").count(),
        1,
        "still kept"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_reviews_through_this_server_ask_the_webhook_with_their_audiences() {
    let dir = tempfile::tempdir().unwrap();
    let hooks = Hooks::start(answer()).await;
    let server = common::server_with(ServeArgs {
        authentication_token_webhook_version: Some("v1".to_owned()),
        ..args(dir.path(), &hooks)
    })
    .await;
    let review = |audiences: Value| {
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
            "spec": {"token": "jane", "audiences": audiences}})
    };
    // Without audiences: this server's own, and the user the webhook gave.
    let (status, body) = call(
        &server,
        "local-admin",
        "POST",
        TOKEN_REVIEWS,
        &review(json!([])),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["status"]["authenticated"], true);
    assert_eq!(body["status"]["user"]["username"], "jane");
    assert_eq!(body["status"]["audiences"], json!(["watchkeeper"]));
    let sent = hooks.at(PATH);
    assert_eq!(sent[0]["apiVersion"], "authentication.k8s.io/v1");
    assert_eq!(sent[0]["spec"]["audiences"], json!(["watchkeeper"]));

    // Another audience: asked as such; the webhook names none in its answer, so the token is
    // good for this server's own only, and not for `other` (kube's intersection).
    let (status, body) = call(
        &server,
        "local-admin",
        "POST",
        TOKEN_REVIEWS,
        &review(json!(["other"])),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    // kube omits `authenticated: false` (omitempty).
    assert_eq!(body["status"].get("authenticated"), None, "{body}");
    assert_eq!(body["status"]["error"], "invalid bearer token");
    let sent = hooks.at(PATH);
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[1]["spec"]["audiences"], json!(["other"]));

    // A request with the token then uses the answer the review kept (same audiences).
    assert_eq!(whoami(&server, "jane").await.0, 201);
    assert_eq!(hooks.at(PATH).len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_auth_whoami_with_a_token_the_webhook_knows() {
    let dir = tempfile::tempdir().unwrap();
    let hooks = Hooks::start(answer()).await;
    let pki = common::pki::Pki::new("kubectl-ca");
    let server = common::server_with(ServeArgs {
        authentication_token_webhook_config_file: Some(kubeconfig(dir.path(), &hooks)),
        ..pki.server_args()
    })
    .await;
    let review =
        common::kubectl_whoami(dir.path(), server.addr, &pki.ca_file(), "{token: jane}").await;
    assert_eq!(review["status"]["userInfo"]["username"], "jane");
    assert_eq!(
        review["status"]["userInfo"]["groups"],
        json!(["dev", "system:authenticated"])
    );
}

#[test]
fn bad_token_webhook_flags_refuse_to_start_with_kubes_words() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.kubeconfig");
    std::fs::write(
        &good,
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"https://127.0.0.1:1/x\"}}]\nusers: [{name: u, user: {}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n",
    )
    .unwrap();
    let with = |args: ServeArgs| {
        ServeConfig::from_args(ServeArgs {
            authentication_token_webhook_config_file: Some(good.clone()),
            ..args
        })
    };
    let config = with(ServeArgs::default()).unwrap();
    let webhook = config.token_webhook.unwrap();
    assert_eq!(webhook.version, "v1beta1");
    assert_eq!(webhook.cache_ttl, std::time::Duration::from_secs(120));
    assert_eq!(webhook.cache_entries, 4096);
    assert_eq!(webhook.calls_max, 64);
    let zero = with(ServeArgs {
        authentication_token_webhook_cache_ttl: Some("0s".to_owned()),
        ..ServeArgs::default()
    })
    .unwrap();
    assert!(zero.token_webhook.unwrap().cache_ttl.is_zero());

    let refused = |args: ServeArgs| with(args).unwrap_err().to_string();
    assert!(
        refused(ServeArgs {
            authentication_token_webhook_version: Some("v2".to_owned()),
            ..ServeArgs::default()
        })
        .contains(
            r#"unsupported authentication webhook version "v2", supported versions are "v1", "v1beta1""#
        )
    );
    assert!(
        refused(ServeArgs {
            authentication_token_webhook_cache_ttl: Some("forever".to_owned()),
            ..ServeArgs::default()
        })
        .contains("--authentication-token-webhook-cache-ttl")
    );
    assert!(
        refused(ServeArgs {
            authentication_token_webhook_calls_max: Some(0),
            ..ServeArgs::default()
        })
        .contains("--authentication-token-webhook-calls-max 0: must be between 1 and 10000")
    );
    let missing = ServeConfig::from_args(ServeArgs {
        authentication_token_webhook_config_file: Some(dir.path().join("missing")),
        ..ServeArgs::default()
    })
    .unwrap_err()
    .to_string();
    assert!(
        missing.contains("--authentication-token-webhook-config-file"),
        "{missing}"
    );
}

/// Caching-proxy mode delegating authentication and authorization to its upstream: the
/// proxy's clients present the upstream's own tokens, which the proxy sends to the
/// upstream's `tokenreviews`, and what they may do is the upstream's `subjectaccessreviews`'
/// answer (a watchkeeper with a token file and RBAC here, as a cluster's API server would
/// be).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caching_proxy_delegates_authentication_and_authorization_to_its_upstream() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("upstream-tokens.csv");
    std::fs::write(
        &tokens,
        "proxy-token,watchkeeper-proxy,p,system:masters\nalice-token,alice,a-1,\"team-a,readers\"\n",
    )
    .unwrap();
    let upstream = common::server_with(ServeArgs {
        token_auth_file: Some(tokens),
        authorization_mode: Some(vec!["RBAC".to_owned()]),
        ..ServeArgs::default()
    })
    .await;
    // The upstream lets `readers` read (its RBAC decides the proxy's reviews too).
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "readers-view"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "readers"}]});
    let (status, body) = call(
        &upstream,
        "proxy-token",
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        &binding,
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let write_kubeconfig = |name: &str, server: String| {
        let path = dir.path().join(name);
        std::fs::write(
            &path,
            format!(
                "apiVersion: v1\nkind: Config\nclusters: [{{name: up, cluster: {{server: \"{server}\"}}}}]\nusers: [{{name: proxy, user: {{token: proxy-token}}}}]\ncontexts: [{{name: up, context: {{cluster: up, user: proxy}}}}]\ncurrent-context: up\n"
            ),
        )
        .unwrap();
        path
    };
    let upstream_url = format!("http://{}", upstream.addr);
    let config = ServeConfig::from_args(ServeArgs {
        listen: Some("127.0.0.1:0".parse().unwrap()),
        upstream_kubeconfig: Some(write_kubeconfig(
            "upstream.kubeconfig",
            upstream_url.clone(),
        )),
        upstream_resources: Some(vec!["configmaps".into()]),
        authentication_token_webhook_config_file: Some(write_kubeconfig(
            "webhook.kubeconfig",
            format!("{upstream_url}{TOKEN_REVIEWS}"),
        )),
        authentication_token_webhook_version: Some("v1".to_owned()),
        // And authorization delegated too: the upstream's SubjectAccessReviews decide.
        authorization_mode: Some(vec!["Webhook".to_owned()]),
        authorization_webhook_config_file: Some(write_kubeconfig(
            "authz.kubeconfig",
            format!("{upstream_url}/apis/authorization.k8s.io/v1/subjectaccessreviews"),
        )),
        authorization_webhook_version: Some("v1".to_owned()),
        ..ServeArgs::default()
    })
    .unwrap();
    let proxy = watchkeeper::start(config).await.expect("the proxy starts");
    tokio::time::timeout(common::HANG_GUARD, proxy.ready())
        .await
        .expect("proxy ready");

    let (status, review) = whoami(&proxy, "alice-token").await;
    assert_eq!(status, 201, "{review}");
    let info = &review["status"]["userInfo"];
    assert_eq!(info["username"], "alice");
    assert_eq!(info["uid"], "a-1");
    assert_eq!(
        info["groups"],
        json!(["team-a", "readers", "system:authenticated"])
    );
    let (status, _) = call(
        &proxy,
        "alice-token",
        "GET",
        "/api/v1/namespaces/default/configmaps",
        &Value::Null,
    )
    .await;
    assert_eq!(status, 200);
    // Reading, not writing: the upstream's RBAC said so through its reviews.
    let created = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}});
    let (status, body) = call(
        &proxy,
        "alice-token",
        "POST",
        "/api/v1/namespaces/default/configmaps",
        &created,
    )
    .await;
    assert_eq!(status, 403, "{body}");
    assert!(
        body["message"].as_str().unwrap_or_default().starts_with(
            "configmaps is forbidden: User \"alice\" cannot create resource \"configmaps\""
        ),
        "{body}"
    );
    // A token the upstream does not know, and none at all: 401 from the proxy.
    assert_eq!(whoami(&proxy, "mallory").await.0, 401);
    let (status, _) = common::get_json(proxy.addr, "/api/v1/namespaces/default/configmaps").await;
    assert_eq!(status, 401);
}

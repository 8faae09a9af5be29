//! JWT (OIDC) authentication as kube-apiserver 1.33's (`--authentication-config`, `--oidc-*`),
//! against a real HTTPS issuer (hyper + rustls, a test CA) serving the discovery document and
//! the JWKS, with RSA and EC keys generated here (RSA by `openssl genpkey`).

use crate::common;

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bytes::Bytes;
use http_body_util::Full;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};
use watchkeeper::config::{ServeArgs, ServeConfig};

use common::request_with_headers;

const RBAC: &str = "rbac.authorization.k8s.io/v1";

/// A signing key and its public JWK.
struct SigningKey {
    alg: Algorithm,
    kid: String,
    encoding: EncodingKey,
    jwk: Value,
}

fn rsa_key(kid: &str) -> SigningKey {
    let out = std::process::Command::new("openssl")
        .args([
            "genpkey",
            "-algorithm",
            "RSA",
            "-pkeyopt",
            "rsa_keygen_bits:2048",
        ])
        .output()
        .expect("openssl runs");
    assert!(out.status.success());
    let pem = String::from_utf8(out.stdout).unwrap();
    let der = pem::parse(&pem).unwrap().into_contents();
    let pair = ring::rsa::KeyPair::from_pkcs8(&der).unwrap();
    let public = ring::rsa::PublicKeyComponents::<Vec<u8>>::from(pair.public());
    SigningKey {
        alg: Algorithm::RS256,
        kid: kid.to_owned(),
        encoding: EncodingKey::from_rsa_pem(pem.as_bytes()).unwrap(),
        jwk: json!({"kty": "RSA", "use": "sig", "alg": "RS256", "kid": kid,
            "n": URL_SAFE_NO_PAD.encode(&public.n), "e": URL_SAFE_NO_PAD.encode(&public.e)}),
    }
}

fn ec_key(kid: &str) -> SigningKey {
    let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let public = pair.public_key_raw();
    SigningKey {
        alg: Algorithm::ES256,
        kid: kid.to_owned(),
        encoding: EncodingKey::from_ec_pem(pair.serialize_pem().as_bytes()).unwrap(),
        jwk: json!({"kty": "EC", "use": "sig", "crv": "P-256", "kid": kid,
            "x": URL_SAFE_NO_PAD.encode(&public[1..33]), "y": URL_SAFE_NO_PAD.encode(&public[33..65])}),
    }
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        .try_into()
        .unwrap()
}

/// A token of `key` (its `kid` unless `kid` says otherwise) with `claims`.
fn sign(key: &SigningKey, kid: Option<&str>, claims: &Value) -> String {
    let mut header = Header::new(key.alg);
    header.kid = Some(kid.unwrap_or(&key.kid).to_owned());
    jsonwebtoken::encode(&header, claims, &key.encoding).unwrap()
}

/// The test issuer: its URL, CA, the keys it publishes, whether it answers, fetch counts.
struct TestIssuer {
    url: String,
    ca: String,
    jwks: Mutex<Value>,
    up: AtomicBool,
    jwks_fetches: AtomicUsize,
}

impl TestIssuer {
    async fn start(keys: &[&SigningKey]) -> Arc<TestIssuer> {
        let slot: Arc<Mutex<Option<Arc<TestIssuer>>>> = Arc::new(Mutex::new(None));
        let handler_slot = slot.clone();
        let (port, ca) = common::https_server(&["localhost"], move |request| {
            let issuer = handler_slot.lock().unwrap().clone().unwrap();
            async move {
                let answer = |code: u16, body: String| {
                    hyper::Response::builder()
                        .status(code)
                        .header("content-type", "application/json")
                        .body(Full::new(Bytes::from(body)))
                        .unwrap()
                };
                if !issuer.up.load(Ordering::SeqCst) {
                    return answer(503, "{}".to_owned());
                }
                match request.uri().path() {
                    "/.well-known/openid-configuration" => answer(
                        200,
                        json!({"issuer": issuer.url, "jwks_uri": format!("{}/keys", issuer.url),
                            "id_token_signing_alg_values_supported": ["RS256", "ES256"]})
                        .to_string(),
                    ),
                    "/keys" => {
                        issuer.jwks_fetches.fetch_add(1, Ordering::SeqCst);
                        answer(200, issuer.jwks.lock().unwrap().to_string())
                    }
                    _ => answer(404, "{}".to_owned()),
                }
            }
        })
        .await;
        let issuer = Arc::new(TestIssuer {
            url: format!("https://localhost:{port}"),
            ca,
            jwks: Mutex::new(Value::Null),
            up: AtomicBool::new(true),
            jwks_fetches: AtomicUsize::new(0),
        });
        issuer.publish(keys);
        *slot.lock().unwrap() = Some(issuer.clone());
        issuer
    }

    fn publish(&self, keys: &[&SigningKey]) {
        *self.jwks.lock().unwrap() =
            json!({"keys": keys.iter().map(|k| k.jwk.clone()).collect::<Vec<_>>()});
    }

    fn fetches(&self) -> usize {
        self.jwks_fetches.load(Ordering::SeqCst)
    }

    /// Claims of a valid token for `sub`.
    fn claims(&self, sub: &str) -> Value {
        json!({"iss": self.url, "sub": sub, "aud": "watchkeeper", "exp": now() + 600,
            "iat": now(), "nbf": now() - 5, "hd": "example.com", "groups": ["dev", "ops"],
            "uid": format!("uid-{sub}"), "email": format!("{sub}@example.com")})
    }
}

fn indent(text: &str) -> String {
    text.lines().map(|l| format!("      {l}\n")).collect()
}

/// The configuration file of `issuer`: audiences `watchkeeper` and `other` (MatchAny), `hd`
/// required to be `example.com`, username `sub` after `oidc:`, groups after `g:`, uid.
fn config_file(dir: &Path, issuer: &TestIssuer) -> std::path::PathBuf {
    let text = format!(
        "apiVersion: apiserver.config.k8s.io/v1beta1\nkind: AuthenticationConfiguration\njwt:\n- issuer:\n    url: {}\n    audiences: [watchkeeper, other]\n    audienceMatchPolicy: MatchAny\n    certificateAuthority: |\n{}  claimValidationRules:\n  - claim: hd\n    requiredValue: example.com\n  claimMappings:\n    username: {{claim: sub, prefix: \"oidc:\"}}\n    groups: {{claim: groups, prefix: \"g:\"}}\n    uid: {{claim: uid}}\n",
        issuer.url,
        indent(&issuer.ca)
    );
    let path = dir.join("authn.yaml");
    std::fs::write(&path, text).unwrap();
    path
}

fn tokens_file(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("tokens.csv");
    std::fs::write(&path, "admin-token,admin,1,system:masters\n").unwrap();
    path
}

/// `POST selfsubjectreviews` with `token`: the status and the body.
async fn whoami(server: &watchkeeper::Server, token: &str) -> (u16, Value) {
    common::whoami(server.addr, token).await
}

/// A refused token: kube's 401 `Status`, saying nothing about why.
async fn assert_unauthorized(server: &watchkeeper::Server, token: &str, case: &str) {
    let (status, body) = whoami(server, token).await;
    assert_eq!(status, 401, "{case}: {body}");
    assert_eq!(body["kind"], "Status", "{case}");
    assert_eq!(body["reason"], "Unauthorized", "{case}");
    assert_eq!(body["message"], "Unauthorized", "{case}");
}

fn args(dir: &Path) -> ServeArgs {
    ServeArgs {
        token_auth_file: Some(tokens_file(dir)),
        authorization_mode: Some(vec!["RBAC".to_owned()]),
        ..ServeArgs::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issuer_tokens_authenticate_with_the_mapped_user_and_rbac_applies() {
    let dir = tempfile::tempdir().unwrap();
    let (rsa, ec) = (rsa_key("rsa-1"), ec_key("ec-1"));
    let issuer = TestIssuer::start(&[&rsa, &ec]).await;
    let server = common::server_with(ServeArgs {
        authentication_config: Some(config_file(dir.path(), &issuer)),
        jwt_token_bytes_max: Some(4096),
        ..args(dir.path())
    })
    .await;
    let (status, body) = whoami(&server, &sign(&rsa, None, &issuer.claims("alice"))).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(
        body["status"]["userInfo"],
        json!({"username": "oidc:alice", "uid": "uid-alice",
            "groups": ["g:dev", "g:ops", "system:authenticated"]})
    );
    // EC keys, a single group as a string, and the other audience.
    let mut claims = issuer.claims("bob");
    claims["groups"] = json!("dev");
    claims["aud"] = json!(["nobody", "other"]);
    let bob = sign(&ec, None, &claims);
    let (status, body) = whoami(&server, &bob).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["status"]["userInfo"]["username"], "oidc:bob");
    assert_eq!(
        body["status"]["userInfo"]["groups"],
        json!(["g:dev", "system:authenticated"])
    );
    // RBAC decides for the mapped groups.
    let auth = format!("Bearer {bob}");
    let path = "/api/v1/namespaces/default/configmaps";
    let (status, text) =
        request_with_headers(server.addr, "GET", path, &[("Authorization", &auth)], "").await;
    assert_eq!(status, 403, "{text}");
    assert!(text.contains("User \\\"oidc:bob\\\" cannot list"), "{text}");
    let binding = json!({"apiVersion": RBAC, "kind": "ClusterRoleBinding",
        "metadata": {"name": "dev-view"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "g:dev"}]});
    let (status, text) = request_with_headers(
        server.addr,
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        &[("Authorization", "Bearer admin-token")],
        &binding.to_string(),
    )
    .await;
    assert_eq!(status, 201, "{text}");
    let (status, text) =
        request_with_headers(server.addr, "GET", path, &[("Authorization", &auth)], "").await;
    assert_eq!(status, 200, "{text}");

    // Refusals: each a bare 401.
    let other = rsa_key("rsa-1");
    let mut cases: Vec<(&str, String)> = Vec::new();
    let with = |edit: &dyn Fn(&mut Value)| {
        let mut claims = issuer.claims("alice");
        edit(&mut claims);
        sign(&rsa, None, &claims)
    };
    cases.push(("expired", with(&|c| c["exp"] = json!(now() - 1))));
    cases.push((
        "no exp",
        with(&|c| {
            c.as_object_mut().unwrap().remove("exp");
        }),
    ));
    cases.push(("not yet valid", with(&|c| c["nbf"] = json!(now() + 3600))));
    cases.push((
        "wrong audience",
        with(&|c| c["aud"] = json!("someone-else")),
    ));
    cases.push((
        "other issuer",
        with(&|c| c["iss"] = json!("https://elsewhere.example")),
    ));
    cases.push((
        "required claim wrong",
        with(&|c| c["hd"] = json!("evil.example")),
    ));
    cases.push((
        "required claim missing",
        with(&|c| {
            c.as_object_mut().unwrap().remove("hd");
        }),
    ));
    cases.push((
        "username claim missing",
        with(&|c| {
            c.as_object_mut().unwrap().remove("sub");
        }),
    ));
    cases.push(("bad signature", sign(&other, None, &issuer.claims("alice"))));
    cases.push((
        "unknown kid",
        sign(&rsa, Some("nope"), &issuer.claims("alice")),
    ));
    let valid = sign(&rsa, None, &issuer.claims("alice"));
    let mut parts: Vec<&str> = valid.split('.').collect();
    let none_header = URL_SAFE_NO_PAD.encode(br#"{"alg":"none","kid":"rsa-1"}"#);
    parts[0] = &none_header;
    cases.push(("alg none", format!("{}.{}.", parts[0], parts[1])));
    let mut tampered_claims = issuer.claims("alice");
    tampered_claims["sub"] = json!("root");
    let tampered_payload = URL_SAFE_NO_PAD.encode(tampered_claims.to_string());
    let pieces: Vec<&str> = valid.split('.').collect();
    cases.push((
        "tampered payload",
        format!("{}.{tampered_payload}.{}", pieces[0], pieces[2]),
    ));
    cases.push(("oversized", with(&|c| c["pad"] = json!("x".repeat(5_000)))));
    for (case, token) in &cases {
        assert_unauthorized(&server, token, case).await;
    }
    // The token file still authenticates.
    let (status, body) = whoami(&server, "admin-token").await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["status"]["userInfo"]["username"], "admin");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotated_keys_load_without_restart_and_unknown_kids_do_not_hammer_the_issuer() {
    let dir = tempfile::tempdir().unwrap();
    let (old, new) = (ec_key("old"), ec_key("new"));
    let issuer = TestIssuer::start(&[&old]).await;
    let server = common::server_with(ServeArgs {
        authentication_config: Some(config_file(dir.path(), &issuer)),
        jwt_keys_refresh_interval_ms: Some(1),
        ..args(dir.path())
    })
    .await;
    assert_eq!(
        whoami(&server, &sign(&old, None, &issuer.claims("a")))
            .await
            .0,
        201
    );
    let before = issuer.fetches();
    // The issuer rotates: the new kid's token makes a refetch, then verifies. (A request
    // that comes within the 1 ms interval of the last fetch is refused without one, so it
    // is asked again: every request makes at most one fetch.)
    issuer.publish(&[&new]);
    let token = sign(&new, None, &issuer.claims("a"));
    let attempts = until_authenticated(&server, &token).await;
    let fetched = issuer.fetches() - before;
    assert!(
        (1..=attempts).contains(&fetched),
        "{fetched} fetches, {attempts} requests"
    );
    // An unknown kid is refused, after one refetch at most.
    let before = issuer.fetches();
    let unknown = sign(&new, Some("unknown"), &issuer.claims("a"));
    assert_unauthorized(&server, &unknown, "unknown kid").await;
    assert!(issuer.fetches() <= before + 1);

    // With the default interval (10 s), a flood of random kids makes no fetch past the first.
    let dir2 = tempfile::tempdir().unwrap();
    let key = ec_key("k");
    let flooded = TestIssuer::start(&[&key]).await;
    let server = common::server_with(ServeArgs {
        authentication_config: Some(config_file(dir2.path(), &flooded)),
        ..args(dir2.path())
    })
    .await;
    assert_eq!(
        whoami(&server, &sign(&key, None, &flooded.claims("a")))
            .await
            .0,
        201
    );
    let started = flooded.fetches();
    assert_eq!(started, 1);
    let floods = (0..64).map(|i| {
        let token = sign(&key, Some(&format!("random-{i}")), &flooded.claims("a"));
        let server = &server;
        async move { whoami(server, &token).await.0 }
    });
    let statuses = futures_util::future::join_all(floods).await;
    assert!(statuses.iter().all(|s| *s == 401), "{statuses:?}");
    assert!(
        flooded.fetches() <= started + 1,
        "{} fetches",
        flooded.fetches()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_issuer_refuses_its_tokens_until_its_keys_load() {
    let dir = tempfile::tempdir().unwrap();
    let key = rsa_key("k");
    let issuer = TestIssuer::start(&[&key]).await;
    issuer.up.store(false, Ordering::SeqCst);
    let server = common::server_with(ServeArgs {
        authentication_config: Some(config_file(dir.path(), &issuer)),
        jwt_keys_refresh_interval_ms: Some(1),
        ..args(dir.path())
    })
    .await;
    let token = sign(&key, None, &issuer.claims("a"));
    assert_unauthorized(&server, &token, "issuer down").await;
    issuer.up.store(true, Ordering::SeqCst);
    // 401 until the keys load (a request within the 1 ms interval of the last failed fetch
    // does not fetch again), then the user.
    until_authenticated(&server, &token).await;
    let (status, body) = whoami(&server, &token).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["status"]["userInfo"]["username"], "oidc:a");
}

/// Asks `SelfSubjectReview` with `token` until it is authenticated (each answer before is a
/// 401), bounded by the hang guard; how many requests it took.
async fn until_authenticated(server: &watchkeeper::Server, token: &str) -> usize {
    tokio::time::timeout(common::HANG_GUARD, async {
        let mut attempts = 0;
        loop {
            attempts += 1;
            let (status, body) = whoami(server, token).await;
            if status == 201 {
                return attempts;
            }
            assert_eq!(status, 401, "{body}");
        }
    })
    .await
    .expect("authenticated")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_oidc_flags_give_the_user_of_the_equivalent_file() {
    let dir = tempfile::tempdir().unwrap();
    let key = rsa_key("k");
    let issuer = TestIssuer::start(&[&key]).await;
    let ca = dir.path().join("issuer-ca.pem");
    std::fs::write(&ca, &issuer.ca).unwrap();
    let legacy = |claim: Option<&str>| ServeArgs {
        oidc_issuer_url: Some(issuer.url.clone()),
        oidc_client_id: Some("watchkeeper".to_owned()),
        oidc_username_claim: claim.map(str::to_owned),
        oidc_groups_claim: Some("groups".to_owned()),
        oidc_groups_prefix: Some("g:".to_owned()),
        oidc_required_claim: Some(vec!["hd=example.com".to_owned()]),
        oidc_ca_file: Some(ca.clone()),
        ..args(dir.path())
    };
    let token = sign(&key, None, &issuer.claims("alice"));
    let server = common::server_with(legacy(None)).await;
    let (status, body) = whoami(&server, &token).await;
    assert_eq!(status, 201, "{body}");
    // kube's legacy default prefix: the issuer URL and `#`.
    assert_eq!(
        body["status"]["userInfo"],
        json!({"username": format!("{}#alice", issuer.url),
            "groups": ["g:dev", "g:ops", "system:authenticated"]})
    );
    let mut missing = issuer.claims("alice");
    missing.as_object_mut().unwrap().remove("hd");
    assert_unauthorized(&server, &sign(&key, None, &missing), "required claim").await;
    // An ES256 token is refused: --oidc-signing-algs defaults to RS256.
    let ec = ec_key("k");
    assert_unauthorized(&server, &sign(&ec, None, &issuer.claims("alice")), "ES256").await;

    // The equivalent file gives the same user.
    let file = dir.path().join("equivalent.yaml");
    std::fs::write(
        &file,
        format!(
            "apiVersion: apiserver.config.k8s.io/v1alpha1\nkind: AuthenticationConfiguration\njwt:\n- issuer:\n    url: {url}\n    audiences: [watchkeeper]\n    certificateAuthority: |\n{ca}  claimValidationRules: [{{claim: hd, requiredValue: example.com}}]\n  claimMappings:\n    username: {{claim: sub, prefix: \"{url}#\"}}\n    groups: {{claim: groups, prefix: \"g:\"}}\n",
            url = issuer.url,
            ca = indent(&issuer.ca)
        ),
    )
    .unwrap();
    let from_file = common::server_with(ServeArgs {
        authentication_config: Some(file),
        ..args(dir.path())
    })
    .await;
    let (status, same) = whoami(&from_file, &token).await;
    assert_eq!(status, 201, "{same}");
    assert_eq!(same["status"]["userInfo"], body["status"]["userInfo"]);

    // With the claim `email`, no prefix; `email_verified: false` is refused.
    let server = common::server_with(legacy(Some("email"))).await;
    let (status, body) = whoami(&server, &token).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["status"]["userInfo"]["username"], "alice@example.com");
    let mut unverified = issuer.claims("alice");
    unverified["email_verified"] = json!(false);
    assert_unauthorized(
        &server,
        &sign(&key, None, &unverified),
        "email not verified",
    )
    .await;
}

#[test]
fn bad_configurations_refuse_to_start_with_kubes_words() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    let refused = |args: ServeArgs| ServeConfig::from_args(args).unwrap_err().to_string();
    let good = write(
        "good.yaml",
        "apiVersion: apiserver.config.k8s.io/v1beta1\nkind: AuthenticationConfiguration\njwt:\n- issuer: {url: \"https://issuer.example\", audiences: [a]}\n  claimMappings: {username: {claim: sub, prefix: \"\"}}\n",
    );
    assert!(
        ServeConfig::from_args(ServeArgs {
            authentication_config: Some(good.clone()),
            ..ServeArgs::default()
        })
        .is_ok()
    );
    let both = refused(ServeArgs {
        authentication_config: Some(good),
        oidc_issuer_url: Some("https://issuer.example".to_owned()),
        oidc_client_id: Some("a".to_owned()),
        ..ServeArgs::default()
    });
    assert_eq!(
        both,
        "authentication-config file and oidc-* flags are mutually exclusive"
    );
    let alone = refused(ServeArgs {
        oidc_username_claim: Some("email".to_owned()),
        ..ServeArgs::default()
    });
    assert_eq!(
        alone,
        "oidc-issuer-url and oidc-client-id must be specified together when any oidc-* flags are set"
    );
    let http = refused(ServeArgs {
        oidc_issuer_url: Some("http://issuer.example".to_owned()),
        oidc_client_id: Some("a".to_owned()),
        ..ServeArgs::default()
    });
    assert_eq!(
        http,
        "jwt[0].issuer.url: Invalid value: \"http://issuer.example\": URL scheme must be https"
    );
    let no_prefix = write(
        "no-prefix.yaml",
        "apiVersion: apiserver.config.k8s.io/v1beta1\nkind: AuthenticationConfiguration\njwt:\n- issuer: {url: \"https://issuer.example\", audiences: [a, b]}\n  claimMappings: {username: {claim: sub}}\n",
    );
    let error = refused(ServeArgs {
        authentication_config: Some(no_prefix),
        ..ServeArgs::default()
    });
    assert_eq!(
        error,
        "[jwt[0].issuer.audienceMatchPolicy: Invalid value: \"\": audienceMatchPolicy must be MatchAny for multiple audiences, jwt[0].claimMappings.username.prefix: Required value: prefix is required when claim is set. It can be set to an empty string to disable prefixing]"
    );
    let cel = write(
        "cel.yaml",
        "apiVersion: apiserver.config.k8s.io/v1beta1\nkind: AuthenticationConfiguration\njwt:\n- issuer: {url: \"https://issuer.example\", audiences: [a]}\n  claimMappings: {username: {expression: \"claims.sub +\"}}\n",
    );
    let error = refused(ServeArgs {
        authentication_config: Some(cel),
        ..ServeArgs::default()
    });
    assert!(
        error.starts_with("jwt[0].claimMappings.username.expression: Invalid value: \"claims.sub +\": compilation failed: ERROR: <input>:1:"),
        "{error}"
    );
    let extra = write(
        "extra.yaml",
        "apiVersion: apiserver.config.k8s.io/v1beta1\nkind: AuthenticationConfiguration\njwt:\n- issuer: {url: \"https://issuer.example\", audiences: [a]}\n  claimMappings:\n    username: {claim: sub, prefix: \"\"}\n    extra: [{key: kubernetes.io/team, valueExpression: claims.team}]\n",
    );
    let error = refused(ServeArgs {
        authentication_config: Some(extra),
        ..ServeArgs::default()
    });
    assert_eq!(
        error,
        "jwt[0].claimMappings.extra[0].key: Invalid value: \"kubernetes.io/team\": k8s.io, kubernetes.io and their subdomains are reserved for Kubernetes use"
    );
    let unknown = write(
        "unknown.yaml",
        "apiVersion: apiserver.config.k8s.io/v1beta1\nkind: AuthenticationConfiguration\njwt:\n- issuer: {url: \"https://issuer.example\", audiences: [a], bogus: 1}\n  claimMappings: {username: {claim: sub, prefix: \"\"}}\n",
    );
    let error = refused(ServeArgs {
        authentication_config: Some(unknown),
        ..ServeArgs::default()
    });
    assert!(
        error.starts_with("failed to load authentication configuration from file"),
        "{error}"
    );
    assert!(error.contains("unknown field `bogus`"), "{error}");
    // The service account issuer is not a JWT issuer's.
    let sa = refused(ServeArgs {
        oidc_issuer_url: Some("https://kubernetes.default.svc.cluster.local".to_owned()),
        oidc_client_id: Some("a".to_owned()),
        ..ServeArgs::default()
    });
    assert!(
        sa.contains("URL must not overlap with disallowed issuers"),
        "{sa}"
    );
    let oversized = refused(ServeArgs {
        jwt_token_bytes_max: Some(10),
        ..ServeArgs::default()
    });
    assert_eq!(
        oversized,
        "--jwt-token-bytes-max 10: must be between 1024 and 1048576 bytes"
    );
}

/// kubectl (client-go sends a kubeconfig's token over TLS only) with `token: <the JWT>`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_auth_whoami_with_a_jwt() {
    let dir = tempfile::tempdir().unwrap();
    let key = rsa_key("k");
    let issuer = TestIssuer::start(&[&key]).await;
    let pki = common::pki::Pki::new("kubectl-ca");
    let server = common::server_with(ServeArgs {
        authentication_config: Some(config_file(dir.path(), &issuer)),
        ..pki.server_args()
    })
    .await;
    let token = sign(&key, None, &issuer.claims("alice"));
    let review = common::kubectl_whoami(
        dir.path(),
        server.addr,
        &pki.ca_file(),
        &format!("{{token: {token}}}"),
    )
    .await;
    assert_eq!(review["status"]["userInfo"]["username"], "oidc:alice");
    assert_eq!(review["status"]["userInfo"]["uid"], "uid-alice");
}

/// CEL: username, groups and uid expressions over `claims`, a claim validation expression and
/// a user validation rule, as kube evaluates them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cel_expressions_map_and_validate() {
    let dir = tempfile::tempdir().unwrap();
    let key = ec_key("k");
    let issuer = TestIssuer::start(&[&key]).await;
    let path = dir.path().join("cel.yaml");
    std::fs::write(
        &path,
        format!(
            "apiVersion: apiserver.config.k8s.io/v1beta1\nkind: AuthenticationConfiguration\njwt:\n- issuer:\n    url: {}\n    audiences: [watchkeeper]\n    certificateAuthority: |\n{}  claimValidationRules:\n  - expression: \"claims.email_verified == true\"\n    message: email must be verified\n  claimMappings:\n    username: {{expression: \"'cel:' + claims.email\"}}\n    groups: {{expression: \"claims.groups.map(g, 'team-' + g)\"}}\n    uid: {{expression: \"claims.sub + '-id'\"}}\n    extra:\n    - {{key: example.com/teams, valueExpression: claims.groups}}\n    - {{key: example.com/none, valueExpression: \"[]\"}}\n  userValidationRules:\n  - expression: \"!user.username.startsWith('cel:root')\"\n    message: no root\n  - expression: \"user.extra['example.com/teams'].size() > 0\"\n",
            issuer.url,
            indent(&issuer.ca)
        ),
    )
    .unwrap();
    let policy = dir.path().join("audit-policy.yaml");
    std::fs::write(
        &policy,
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n",
    )
    .unwrap();
    let log = dir.path().join("audit.log");
    let server = common::server_with(ServeArgs {
        authentication_config: Some(path),
        audit_policy_file: Some(policy),
        audit_log_path: Some(log.clone()),
        ..args(dir.path())
    })
    .await;
    let mut claims = issuer.claims("alice");
    claims["email_verified"] = json!(true);
    let (status, body) = whoami(&server, &sign(&key, None, &claims)).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(
        body["status"]["userInfo"],
        json!({"username": "cel:alice@example.com", "uid": "alice-id",
            "groups": ["team-dev", "team-ops", "system:authenticated"],
            "extra": {"example.com/teams": ["dev", "ops"]}})
    );
    // The audit event names the same user, extra included.
    let audited = |events: &[Value]| {
        events.iter().any(|e| {
            e["user"]["username"] == "cel:alice@example.com"
                && e["user"]["extra"] == json!({"example.com/teams": ["dev", "ops"]})
        })
    };
    common::until(|| audited(&common::events_in(&log))).await;
    let mut unverified = claims.clone();
    unverified["email_verified"] = json!(false);
    assert_unauthorized(&server, &sign(&key, None, &unverified), "claim rule").await;
    let mut no_flag = claims.clone();
    no_flag.as_object_mut().unwrap().remove("email_verified");
    assert_unauthorized(&server, &sign(&key, None, &no_flag), "claim rule error").await;
    let mut root = claims.clone();
    root["email"] = json!("root@example.com");
    assert_unauthorized(&server, &sign(&key, None, &root), "user rule").await;
    let mut no_teams = claims.clone();
    no_teams["groups"] = json!([]);
    assert_unauthorized(&server, &sign(&key, None, &no_teams), "user rule on extra").await;
    let mut bad_groups = claims;
    bad_groups["groups"] = json!(7);
    assert_unauthorized(&server, &sign(&key, None, &bad_groups), "groups not a list").await;
}

/// With a token webhook beside the issuers, an issuer's token is the JWT authenticator's to
/// accept or refuse (a refused one is a 401, never sent on); any other token goes to the
/// webhook, as kube's union asks it last.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_issuer_s_tokens_are_never_sent_to_the_token_webhook() {
    use futures_util::FutureExt;
    let dir = tempfile::tempdir().unwrap();
    let key = rsa_key("k");
    let issuer = TestIssuer::start(&[&key]).await;
    let hooks = common::hooks::Hooks::start(std::sync::Arc::new(|_path: String, review: Value| {
        async move {
            let version = review["apiVersion"].clone();
            (
                200,
                json!({"apiVersion": version, "kind": "TokenReview",
                    "status": {"authenticated": true, "user": {"username": "from-webhook"}}}),
            )
        }
        .boxed()
    }))
    .await;
    let kubeconfig = hooks.kubeconfig(dir.path(), "/authenticate");
    let server = common::server_with(ServeArgs {
        authentication_config: Some(config_file(dir.path(), &issuer)),
        authentication_token_webhook_config_file: Some(kubeconfig),
        ..args(dir.path())
    })
    .await;
    // The issuer's valid token, and one it refuses (expired): neither is sent on.
    let (status, body) = whoami(&server, &sign(&key, None, &issuer.claims("alice"))).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["status"]["userInfo"]["username"], "oidc:alice");
    let mut expired = issuer.claims("alice");
    expired["exp"] = json!(now() - 3600);
    assert_unauthorized(&server, &sign(&key, None, &expired), "expired").await;
    assert!(hooks.at("/authenticate").is_empty());
    // Anything else is the webhook's.
    let (status, body) = whoami(&server, "opaque-token").await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["status"]["userInfo"]["username"], "from-webhook");
    assert_eq!(hooks.at("/authenticate").len(), 1);
}

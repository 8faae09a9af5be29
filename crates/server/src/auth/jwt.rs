//! JWT (OIDC) bearer tokens, as kube-apiserver 1.33's JWT authenticator
//! (`k8s.io/apiserver/plugin/pkg/authenticator/token/oidc`) accepts them, configured by
//! `--authentication-config` or the `--oidc-*` flags (`crate::config::authn::JwtConfig`).
//!
//! ## Guarantees
//! - **Which tokens**: a bearer token of at most `--jwt-token-bytes-max` bytes whose
//!   unverified `iss` is an authenticator's `issuer.url` is that authenticator's: it
//!   authenticates or is refused (401, kube's `Unauthorized`; the reason is logged at debug,
//!   never the token). Any other token — a longer one, one that is not a JWT, one of another
//!   issuer — is passed on to the next authenticator, as kube's union does.
//! - **Keys**: at start each issuer's discovery document
//!   (`{url}/.well-known/openid-configuration`, or `discoveryURL`) is fetched — its `issuer`
//!   must be `url` (go-oidc's check) — then its `jwks_uri` (https only), on a task of the
//!   runtime (never blocking a worker), retried every 10 s until it loads, as kube polls.
//!   Until then the issuer's tokens are refused (kube's `oidc: authenticator not
//!   initialized`), and the server starts regardless. Each fetch goes over HTTPS verified
//!   with `certificateAuthority` (or `--oidc-ca-file`), else the system's roots, within
//!   `--jwt-issuer-timeout-ms`, reading at most `--jwt-issuer-response-bytes-max` bytes.
//! - **Refresh**: keys are cached per issuer. A token naming a `kid` the cache lacks (or
//!   arriving before the keys loaded) makes the request wait for one refetch of the key set —
//!   at most one per `--jwt-keys-refresh-interval-ms` per issuer, concurrent askers sharing
//!   it — so a rotated key is picked up without a restart, and a flood of tokens with random
//!   `kid`s makes at most one fetch per interval ([`Jwt::prepare`]).
//! - **Verification** (go-oidc's `IDTokenVerifier`): the header's `alg` must be one accepted
//!   (`--oidc-signing-algs`, default RS256; every one with the file), never `none`; the
//!   signature must verify with a key of the set whose `kid` is the token's (any key without
//!   a `kid` in the token) and whose type fits the algorithm; `iss` must equal `url`; `aud`
//!   (a string or a list) must hold one of `audiences` (`MatchAny`); `exp` must be present and
//!   not past (no leeway, as go-oidc); `nbf`, when present, not more than 60 s ahead. `iat`
//!   is not checked (go-oidc does not). Work per token: one header and payload parse and one
//!   signature check per key of the token's `kid` (every key of the set without one).
//! - **Mapping** (kube's `getUsername`, `getGroups`, `getUID`): the username is the string
//!   claim `claimMappings.username.claim` after `prefix`, or the string its `expression`
//!   gives over `claims` (not empty); with the claim `email`, an `email_verified` claim,
//!   when present, must be `true` (`oidc: email not verified`). Groups: the claim, a string
//!   or a list of strings, each after `prefix`, absent: none; or the expression's string,
//!   list of strings or null. uid: the string claim or expression when configured. Each claim
//!   validation rule's claim must be present with the string `requiredValue`; each `extra`
//!   key gets its `valueExpression`'s string or list of strings (none: the key is left
//!   out); each rule's
//!   expression be `true`; then each `userValidationRules` expression over `user`
//!   (`username`, `uid`, `groups`, `extra`) must be `true`. Each expression evaluation is
//!   cost-bounded ([`watchkeeper_api::cel_rules::authentication`]). The user is also in
//!   `system:authenticated`, and flows to RBAC, audit, impersonation and
//!   `SelfSubjectReview` as any other.
//!
//! ## Differences from kube
//! - go-oidc refetches the key set for every token with an unknown `kid`; here at most once
//!   per `--jwt-keys-refresh-interval-ms`. Distributed claims (`_claim_names`) are not
//!   resolved. An empty username is refused. `ES512` is not verified.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use rustls::RootCertStore;
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use serde_json::{Map, Value};

use watchkeeper_api::cel_rules::authentication::{self, Expression, Outcome, Variable};

use super::User;
use crate::config::authn::{JwtAuthenticator, JwtConfig};

/// Seconds a token's `nbf` may be ahead of the clock (go-oidc's leeway).
pub const NBF_LEEWAY_SECONDS: f64 = 60.0;

/// How often an issuer whose keys have not loaded is retried (kube's poll interval).
const INITIAL_RETRY: Duration = Duration::from_secs(10);

type Client = HyperClient<HttpsConnector<HttpConnector>, Empty<Bytes>>;

/// The key types a JWS algorithm verifies with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum KeyType {
    Rsa,
    P256,
    P384,
}

fn key_type(algorithm: Algorithm) -> Option<KeyType> {
    match algorithm {
        Algorithm::RS256
        | Algorithm::RS384
        | Algorithm::RS512
        | Algorithm::PS256
        | Algorithm::PS384
        | Algorithm::PS512 => Some(KeyType::Rsa),
        Algorithm::ES256 => Some(KeyType::P256),
        Algorithm::ES384 => Some(KeyType::P384),
        _ => None,
    }
}

/// One verification key of an issuer.
struct Key {
    kid: Option<String>,
    key_type: KeyType,
    decoding: DecodingKey,
}

/// What a fetch remembers: when the last one began and the discovered `jwks_uri`.
#[derive(Default)]
struct FetchState {
    last: Option<Instant>,
    jwks_uri: Option<String>,
}

/// An authenticator's CEL expressions, compiled once (validated at start already).
#[derive(Default)]
struct Expressions {
    username: Option<Expression>,
    groups: Option<Expression>,
    uid: Option<Expression>,
    /// `extra` keys and their value expressions.
    extra: Vec<(String, Expression)>,
    /// Claim validation rules' expressions with their messages.
    claim_rules: Vec<(Expression, String)>,
    /// User validation rules' expressions with their messages.
    user_rules: Vec<(Expression, String)>,
}

impl Expressions {
    fn of(config: &JwtAuthenticator) -> Result<Expressions, String> {
        let claims = |text: &str| -> Result<Option<Expression>, String> {
            if text.is_empty() {
                return Ok(None);
            }
            authentication::compile(text, Variable::Claims).map(Some)
        };
        let mappings = &config.claim_mappings;
        let mut expressions = Expressions {
            username: claims(&mappings.username.expression)?,
            groups: claims(&mappings.groups.expression)?,
            uid: claims(&mappings.uid.expression)?,
            ..Expressions::default()
        };
        for mapping in &mappings.extra {
            expressions.extra.push((
                mapping.key.clone(),
                authentication::compile(&mapping.value_expression, Variable::Claims)?,
            ));
        }
        for rule in &config.claim_validation_rules {
            if let Some(compiled) = claims(&rule.expression)? {
                expressions
                    .claim_rules
                    .push((compiled, rule.message.clone()));
            }
        }
        for rule in &config.user_validation_rules {
            expressions.user_rules.push((
                authentication::compile(&rule.expression, Variable::User)?,
                rule.message.clone(),
            ));
        }
        Ok(expressions)
    }

    fn any_over_claims(&self) -> bool {
        self.username.is_some()
            || self.groups.is_some()
            || self.uid.is_some()
            || !self.extra.is_empty()
            || !self.claim_rules.is_empty()
    }
}

/// A string the expression `what` gave, or kube's error.
fn string_of(outcome: Outcome, what: &str) -> Result<String, String> {
    match outcome {
        Outcome::String(s) => Ok(s),
        _ => Err(format!(
            "oidc: error evaluating {what} claim expression: {what} claim expression must return a string"
        )),
    }
}

/// A validation rule's verdict: `Ok` for `true`, else kube's error with the rule's message.
fn rule_holds(outcome: Result<Outcome, String>, message: &str, what: &str) -> Result<(), String> {
    match outcome {
        Ok(Outcome::Bool(true)) => Ok(()),
        Ok(Outcome::Bool(false)) => Err(format!(
            "oidc: error evaluating {what}: validation expression failed: {message}"
        )),
        Ok(_) => Err(format!(
            "oidc: error evaluating {what}: must return a boolean"
        )),
        Err(e) => Err(format!("oidc: error evaluating {what}: {e}")),
    }
}

/// One configured issuer.
struct Issuer {
    config: JwtAuthenticator,
    expressions: Expressions,
    discovery: String,
    algorithms: Vec<Algorithm>,
    /// `None` until the keys first load.
    keys: RwLock<Option<Arc<Vec<Key>>>>,
    fetch: tokio::sync::Mutex<FetchState>,
    client: Client,
    refresh_interval: Duration,
    timeout: Duration,
    response_bytes_max: usize,
}

/// The JWT authenticators of a server.
pub struct Jwt {
    issuers: HashMap<String, Arc<Issuer>>,
    token_bytes_max: usize,
}

impl std::fmt::Debug for Jwt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Jwt")
            .field("issuers", &self.issuers.keys().collect::<Vec<_>>())
            .finish()
    }
}

fn roots(ca: &str) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    if ca.is_empty() {
        roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
        return Ok(roots);
    }
    for cert in CertificateDer::pem_slice_iter(ca.as_bytes()) {
        roots
            .add(cert.map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
    }
    Ok(roots)
}

fn client(ca: &str) -> Result<Client, String> {
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| e.to_string())?
    .with_root_certificates(roots(ca)?)
    .with_no_client_auth();
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(config)
        .https_only()
        .enable_http1()
        .wrap_connector(http);
    Ok(HyperClient::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(90))
        .build(connector))
}

/// The payload of a compact JWS, unverified; `None` when `token` is not one.
fn unverified_payload(token: &str) -> Option<Map<String, Value>> {
    let mut parts = token.split('.');
    let (Some(_), Some(payload), Some(_), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return None;
    };
    let bytes = URL_SAFE_NO_PAD.decode(payload).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// The keys of a JWKS document: those that parse, are for signatures and of a type a
/// supported algorithm verifies with (the others are skipped, as go-jose skips them).
fn parse_keys(body: &[u8]) -> Result<Vec<Key>, String> {
    let set: Value =
        serde_json::from_slice(body).map_err(|e| format!("oidc: failed to decode keys: {e}"))?;
    let entries = set
        .get("keys")
        .and_then(Value::as_array)
        .ok_or("oidc: failed to decode keys: no \"keys\" list")?;
    let mut keys = Vec::new();
    for entry in entries {
        if entry
            .get("use")
            .and_then(Value::as_str)
            .is_some_and(|u| u != "sig")
        {
            continue;
        }
        let Ok(jwk) = serde_json::from_value::<Jwk>(entry.clone()) else {
            continue;
        };
        let key_type = match &jwk.algorithm {
            AlgorithmParameters::RSA(_) => KeyType::Rsa,
            AlgorithmParameters::EllipticCurve(p) => match p.curve {
                EllipticCurve::P256 => KeyType::P256,
                EllipticCurve::P384 => KeyType::P384,
                _ => continue,
            },
            _ => continue,
        };
        let Ok(decoding) = DecodingKey::from_jwk(&jwk) else {
            continue;
        };
        keys.push(Key {
            kid: jwk.common.key_id.clone(),
            key_type,
            decoding,
        });
    }
    Ok(keys)
}

impl Issuer {
    /// GETs `url`: the body of a 200 answer, within the timeout and the size bound.
    async fn get(&self, url: &str) -> Result<Bytes, String> {
        let call = async {
            let request = axum::http::Request::get(url)
                .header("accept", "application/json")
                .body(Empty::new())
                .map_err(|e| e.to_string())?;
            let response = self
                .client
                .request(request)
                .await
                .map_err(|e| format!("Get {url:?}: {e}"))?;
            let status = response.status();
            let body = Limited::new(response.into_body(), self.response_bytes_max)
                .collect()
                .await
                .map_err(|e| format!("Get {url:?}: reading the answer: {e}"))?
                .to_bytes();
            if !status.is_success() {
                return Err(format!("Get {url:?}: {status}"));
            }
            Ok(body)
        };
        tokio::time::timeout(self.timeout, call)
            .await
            .map_err(|_| format!("Get {url:?}: context deadline exceeded"))?
    }

    /// Discovers the key set's URL if not yet known, then fetches the keys.
    async fn load(&self, state: &mut FetchState) -> Result<usize, String> {
        let jwks_uri = match &state.jwks_uri {
            Some(uri) => uri.clone(),
            None => {
                let body = self.get(&self.discovery).await?;
                let document: Value = serde_json::from_slice(&body).map_err(|e| {
                    format!("oidc: failed to decode provider discovery object: {e}")
                })?;
                let issuer = document
                    .get("issuer")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                if issuer != self.config.issuer.url {
                    return Err(format!(
                        "oidc: issuer did not match the issuer returned by provider, expected {:?} got {issuer:?}",
                        self.config.issuer.url
                    ));
                }
                let uri = document
                    .get("jwks_uri")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                if !uri.starts_with("https://") {
                    return Err(format!("oidc: jwks_uri {uri:?} is not an https URL"));
                }
                state.jwks_uri = Some(uri.clone());
                uri
            }
        };
        let keys = parse_keys(&self.get(&jwks_uri).await?)?;
        let count = keys.len();
        *self
            .keys
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Arc::new(keys));
        Ok(count)
    }

    /// Fetches the keys unless a fetch began less than the refresh interval ago (`force`:
    /// whatever the interval); concurrent callers wait for the one in flight.
    async fn refresh(&self, force: bool) {
        let mut state = self.fetch.lock().await;
        if force {
            // The first load: done already by a token that could not wait for it.
            if self.loaded().is_some() {
                return;
            }
        } else if let Some(last) = state.last
            && last.elapsed() < self.refresh_interval
        {
            return;
        }
        state.last = Some(Instant::now());
        match self.load(&mut state).await {
            Ok(count) => tracing::info!(
                issuer = %self.config.issuer.url,
                keys = count,
                "JWT authenticator: keys loaded"
            ),
            Err(error) => tracing::warn!(
                issuer = %self.config.issuer.url,
                %error,
                "JWT authenticator: cannot load the issuer's keys"
            ),
        }
    }

    fn loaded(&self) -> Option<Arc<Vec<Key>>> {
        self.keys
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Whether `token` should wait for a refetch of the keys: none loaded yet, or its `kid`
    /// is none of theirs.
    fn wants_keys(&self, token: &str) -> bool {
        let Some(keys) = self.loaded() else {
            return true;
        };
        let Ok(header) = jsonwebtoken::decode_header(token) else {
            return false;
        };
        header
            .kid
            .is_some_and(|kid| !keys.iter().any(|k| k.kid.as_deref() == Some(kid.as_str())))
    }

    /// The user of `token` at `now` (Unix seconds), or why it is refused.
    fn verify(&self, token: &str, now: f64) -> Result<User, String> {
        let keys = self.loaded().ok_or("oidc: authenticator not initialized")?;
        let header =
            jsonwebtoken::decode_header(token).map_err(|e| format!("oidc: malformed jwt: {e}"))?;
        if !self.algorithms.contains(&header.alg) {
            return Err(format!(
                "oidc: id token signed with unsupported algorithm, expected {:?} got {:?}",
                self.algorithms, header.alg
            ));
        }
        let wanted = key_type(header.alg).ok_or("oidc: unsupported algorithm")?;
        let mut validation = Validation::new(header.alg);
        validation.validate_exp = false;
        validation.validate_nbf = false;
        validation.validate_aud = false;
        validation.required_spec_claims.clear();
        let mut claims = None;
        for key in keys.iter().filter(|k| {
            k.key_type == wanted
                && (header.kid.is_none() || k.kid.as_deref() == header.kid.as_deref())
        }) {
            if let Ok(data) =
                jsonwebtoken::decode::<Map<String, Value>>(token, &key.decoding, &validation)
            {
                claims = Some(data.claims);
                break;
            }
        }
        let claims = claims.ok_or(
            "oidc: verify token: failed to verify signature: failed to verify id token signature",
        )?;
        let issuer = &self.config.issuer;
        if claims.get("iss").and_then(Value::as_str) != Some(issuer.url.as_str()) {
            return Err("oidc: id token issued by a different provider".to_owned());
        }
        let audiences: Vec<&str> = match claims.get("aud") {
            Some(Value::String(a)) => vec![a.as_str()],
            Some(Value::Array(list)) => list.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !issuer
            .audiences
            .iter()
            .any(|a| audiences.contains(&a.as_str()))
        {
            return Err(format!(
                "oidc: expected audience in {:?} got {audiences:?}",
                issuer.audiences
            ));
        }
        let exp = claims.get("exp").and_then(Value::as_f64).unwrap_or(0.0);
        if exp < now {
            return Err("oidc: token is expired".to_owned());
        }
        if let Some(nbf) = claims.get("nbf").and_then(Value::as_f64)
            && now + NBF_LEEWAY_SECONDS < nbf
        {
            return Err("oidc: current time before the nbf (not before) time".to_owned());
        }
        self.user(&claims)
    }

    /// kube's claim mappings and claim validation rules over verified `claims`.
    fn user(&self, claims: &Map<String, Value>) -> Result<User, String> {
        let string = |claim: &str| -> Result<String, String> {
            match claims.get(claim) {
                None => Err(format!("oidc: parse claim {claim:?}: claim not present")),
                Some(Value::String(s)) => Ok(s.clone()),
                Some(_) => Err(format!("oidc: parse claim {claim:?}: not a string")),
            }
        };
        let mappings = &self.config.claim_mappings;
        let expressions = &self.expressions;
        // The claims as the expressions see them, converted once when any reads them.
        let claims_value = expressions
            .any_over_claims()
            .then(|| Value::Object(claims.clone()));
        let evaluate = |expression: &Expression| {
            expression.evaluate(claims_value.as_ref().unwrap_or(&Value::Null))
        };
        let name = if let Some(expression) = &expressions.username {
            let name = string_of(
                evaluate(expression).map_err(|e| {
                    format!("oidc: error evaluating username claim expression: {e}")
                })?,
                "username",
            )?;
            if name.is_empty() {
                return Err("oidc: empty username via CEL expression is not allowed".to_owned());
            }
            name
        } else {
            let claim = &mappings.username.claim;
            let name = string(claim)?;
            if claim == "email"
                && let Some(verified) = claims.get("email_verified")
            {
                match verified {
                    Value::Bool(true) => {}
                    Value::Bool(false) => return Err("oidc: email not verified".to_owned()),
                    _ => return Err("oidc: parse 'email_verified' claim: not a bool".to_owned()),
                }
            }
            format!(
                "{}{name}",
                mappings.username.prefix.as_deref().unwrap_or_default()
            )
        };
        if name.is_empty() {
            return Err("oidc: empty username".to_owned());
        }
        let mut groups = Vec::new();
        let groups_claim = &mappings.groups.claim;
        if !groups_claim.is_empty()
            && let Some(value) = claims.get(groups_claim)
        {
            let prefix = mappings.groups.prefix.as_deref().unwrap_or_default();
            let values: Vec<&str> = match value {
                Value::String(s) => vec![s.as_str()],
                Value::Array(list) => list
                    .iter()
                    .map(Value::as_str)
                    .collect::<Option<_>>()
                    .ok_or_else(|| format!("oidc: parse groups claim {groups_claim:?}"))?,
                _ => return Err(format!("oidc: parse groups claim {groups_claim:?}")),
            };
            groups = values.iter().map(|g| format!("{prefix}{g}")).collect();
        } else if let Some(expression) = &expressions.groups {
            let failed = |e: &str| format!("oidc: error evaluating group claim expression: {e}");
            groups = match evaluate(expression).map_err(|e| failed(&e))? {
                Outcome::String(s) => vec![s],
                Outcome::Strings(list) => list,
                Outcome::Null => Vec::new(),
                _ => {
                    return Err(failed(
                        "expression must return a string or a list of strings",
                    ));
                }
            };
        }
        let uid = if let Some(expression) = &expressions.uid {
            string_of(
                evaluate(expression)
                    .map_err(|e| format!("oidc: error evaluating uid claim expression: {e}"))?,
                "uid",
            )?
        } else if mappings.uid.claim.is_empty() {
            String::new()
        } else {
            string(&mappings.uid.claim)?
        };
        for rule in self
            .config
            .claim_validation_rules
            .iter()
            .filter(|r| !r.claim.is_empty())
        {
            if !claims.contains_key(&rule.claim) {
                return Err(format!(
                    "oidc: required claim {} not present in ID token",
                    rule.claim
                ));
            }
            if string(&rule.claim)? != rule.required_value {
                return Err(format!(
                    "oidc: required claim {} value does not match",
                    rule.claim
                ));
            }
        }
        let mut extra = std::collections::BTreeMap::new();
        for (key, expression) in &expressions.extra {
            let failed = |e: &str| format!("oidc: error evaluating extra claim expression: {e}");
            let values = match evaluate(expression).map_err(|e| failed(&e))? {
                Outcome::String(s) => vec![s],
                Outcome::Strings(list) => list,
                Outcome::Null => Vec::new(),
                _ => {
                    return Err(failed(
                        "expression must return a string or a list of strings",
                    ));
                }
            };
            // kube skips a key whose expression gives no value.
            if !values.is_empty() {
                extra.insert(key.clone(), values);
            }
        }
        for (expression, message) in &expressions.claim_rules {
            rule_holds(evaluate(expression), message, "claim validation expression")?;
        }
        if !expressions.user_rules.is_empty() {
            let user = serde_json::json!({"username": name, "uid": uid, "groups": groups,
                "extra": extra});
            for (expression, message) in &expressions.user_rules {
                rule_holds(
                    expression.evaluate(&user),
                    message,
                    "user info validation rule",
                )?;
            }
        }
        if !groups.iter().any(|g| g == "system:authenticated") {
            groups.push("system:authenticated".to_owned());
        }
        Ok(User {
            name,
            uid,
            groups,
            extra,
        })
    }
}

impl Jwt {
    /// The authenticators of `config` (`None` without any), their keys loading on tasks of
    /// the current runtime.
    ///
    /// # Errors
    /// An authenticator's CA cannot make a TLS client (validated at start already).
    pub fn start(config: &JwtConfig) -> Result<Option<Arc<Jwt>>, String> {
        if !config.is_enabled() {
            return Ok(None);
        }
        let algorithms: Vec<Algorithm> = config
            .signing_algs
            .iter()
            .filter_map(|a| a.parse().ok())
            .collect();
        let mut issuers = HashMap::new();
        for authenticator in &config.authenticators {
            let discovery = match authenticator.issuer.discovery_url.as_deref() {
                Some(url) if !url.is_empty() => url.to_owned(),
                _ => format!(
                    "{}/.well-known/openid-configuration",
                    authenticator.issuer.url.trim_end_matches('/')
                ),
            };
            let issuer = Arc::new(Issuer {
                config: authenticator.clone(),
                expressions: Expressions::of(authenticator)
                    .map_err(|e| format!("JWT issuer {}: {e}", authenticator.issuer.url))?,
                discovery,
                algorithms: algorithms.clone(),
                keys: RwLock::new(None),
                fetch: tokio::sync::Mutex::new(FetchState::default()),
                client: client(&authenticator.issuer.certificate_authority)
                    .map_err(|e| format!("JWT issuer {}: {e}", authenticator.issuer.url))?,
                refresh_interval: config.keys_refresh_interval,
                timeout: config.issuer_timeout,
                response_bytes_max: config.issuer_response_bytes_max,
            });
            let weak = Arc::downgrade(&issuer);
            tokio::spawn(async move {
                loop {
                    let Some(issuer) = weak.upgrade() else {
                        return;
                    };
                    issuer.refresh(true).await;
                    if issuer.loaded().is_some() {
                        return;
                    }
                    drop(issuer);
                    tokio::time::sleep(INITIAL_RETRY).await;
                }
            });
            issuers.insert(authenticator.issuer.url.clone(), issuer);
        }
        Ok(Some(Arc::new(Jwt {
            issuers,
            token_bytes_max: config.token_bytes_max,
        })))
    }

    /// The issuer `token` claims, when it is one of these and within the size bound.
    fn issuer_of(&self, token: &str) -> Option<&Arc<Issuer>> {
        if token.len() > self.token_bytes_max {
            return None;
        }
        let payload = unverified_payload(token)?;
        self.issuers.get(payload.get("iss")?.as_str()?)
    }

    /// Before [`Jwt::authenticate`]: when `token` is an issuer's and names a `kid` its cached
    /// keys lack (or they have not loaded), refetch them — at most once per refresh interval
    /// per issuer, concurrent callers sharing the fetch.
    pub async fn prepare(&self, token: &str) {
        if let Some(issuer) = self.issuer_of(token)
            && issuer.wants_keys(token)
        {
            issuer.refresh(false).await;
        }
    }

    /// Whether `token` claims (unverified) one of the configured issuers: then it is this
    /// authenticator's to accept or refuse, never the next one's.
    #[must_use]
    pub fn owns(&self, token: &str) -> bool {
        self.issuer_of(token).is_some()
    }

    /// The user of `token`: `None` when it is no issuer's (the next authenticator's), else
    /// the user or why it is refused.
    pub fn authenticate(&self, token: &str) -> Option<Result<User, String>> {
        let issuer = self.issuer_of(token)?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        Some(issuer.verify(token, now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_of_non_jwts_are_none() {
        assert!(unverified_payload("abc").is_none());
        assert!(unverified_payload("a.b.c.d").is_none());
        let payload = URL_SAFE_NO_PAD.encode(br#"{"iss":"https://x"}"#);
        assert_eq!(
            unverified_payload(&format!("e30.{payload}.sig")).unwrap()["iss"],
            "https://x"
        );
    }

    #[test]
    fn keys_of_unknown_types_or_for_encryption_are_skipped() {
        let body = br#"{"keys":[{"kty":"oct","k":"AAAA"},{"kty":"EC","crv":"P-256","use":"enc","x":"x","y":"y"},{"kty":"OKP","crv":"X25519","x":"AAAA"}]}"#;
        assert!(parse_keys(body).unwrap().is_empty());
        assert!(parse_keys(b"[]").is_err());
    }
}

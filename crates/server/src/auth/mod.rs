//! Authentication and authorization, as kube-apiserver does them with `--token-auth-file`,
//! client certificates, service account tokens and impersonation, and
//! `--authorization-mode` (AlwaysAllow, AlwaysDeny, ABAC with `--authorization-policy-file`,
//! RBAC, Webhook).
//!
//! ## Authentication: static bearer tokens
//! The token file is kube-apiserver's CSV: `token,user,uid,"group1,group2"` (the groups column
//! is optional and quoted when it holds several groups; blank lines and lines starting with `#`
//! are skipped). A malformed line is a startup error naming the line. Every authenticated user
//! is also in the group `system:authenticated`, as in Kubernetes.
//!
//! A request presents `Authorization: Bearer <token>`. The token is compared with every token
//! of the file, each comparison touching every byte (no early exit), so the time taken does not
//! tell how much of a token matched. Tokens are never logged (the [`Auth`] debug output counts
//! them and nothing more).
//!
//! When a token file is given, a request without a valid token gets 401 Unauthorized (a
//! `metav1.Status`), except [`OPEN_PATHS`]: `/healthz`, `/livez`, `/readyz` and `/version` stay
//! open to anyone, as kube-apiserver's default `system:public-info-viewer` binding leaves them
//! to anonymous users (probes and `kubectl version` work without credentials). They reveal
//! nothing about the stored objects. Everything else — discovery, OpenAPI, `/metrics`,
//! `/debug/watchers`, `/debug/timeline`, the operator page `/ui/` and every resource — needs a
//! token. Without a token file every request is the anonymous user `system:anonymous` (groups
//! `system:unauthenticated`).
//!
//! ## Authentication: client certificates
//! With `--client-ca-file` (TLS only, see `tls`), a client certificate verified against that
//! CA authenticates the connection's requests as user = the subject's CN, groups = its O
//! values plus `system:authenticated` ([`Auth::authenticate_peer`]); a certificate wins over a
//! token, as kube-apiserver tries x509 first. With a client CA and no token file, requests
//! without a certificate get 401 too (except [`OPEN_PATHS`]).
//!
//! ## Authentication: a front proxy's request headers
//! With `--requestheader-client-ca-file` (TLS only), the handshake takes client certificates
//! of either CA, and the connection layer tells which verified one
//! (`http::connection::PeerRoots`, [`PeerIdentity::x509`], [`PeerIdentity::front_proxy`]). A
//! front proxy's certificate (its CA's, its CN in `--requestheader-allowed-names` or that list
//! empty) makes the request the user its `--requestheader-*` headers name, asked first as
//! kube's request-header authenticator is; without a username header the request goes on to
//! the certificate (when `--client-ca-file` verifies it too) and the tokens. Headers from any
//! other client count for nothing. Headers that authenticated a request are removed from it
//! once read ([`Auth::clear_request_header`], kube's `ClearAuthenticationHeaders`): a `proxy`
//! subresource's backend never gets them; anyone else's are passed on as kube passes them.
//!
//! ## Authentication: service account tokens
//! The server issues service account tokens (`serviceaccounts/{name}/token`, see
//! `http::token`) and accepts them as bearer tokens, with or without a token file: a bearer
//! token claiming `--service-account-issuer` as its issuer is verified by [`serviceaccount`]
//! (signature, expiry, audience, the service account still existing) and authenticates as
//! `system:serviceaccount:NS:NAME` in `system:serviceaccounts`, `system:serviceaccounts:NS`
//! and `system:authenticated`, or is refused with 401 — even where the request would
//! otherwise be anonymous, as kube-apiserver refuses a bad token rather than ignoring it.
//! Other tokens go to the token file as before. A verified client certificate still wins.
//!
//! ## Authentication: JWT (OIDC) tokens
//! With `--authentication-config` or the `--oidc-*` flags, a bearer JWT whose (unverified)
//! `iss` is a configured issuer is verified by [`jwt`] (keys from the issuer's JWKS, `aud`,
//! `exp`, `nbf`, claim mappings and validation rules, CEL included) and authenticates as the mapped user in
//! `system:authenticated`, or is refused with 401; other tokens go on to the token file. As
//! with a token file, requests without credentials then get 401 (except [`OPEN_PATHS`]). The
//! audit and limits layers first await [`Auth::prepare`], which refetches an issuer's keys
//! (bounded, see [`jwt`]) for a token naming a key not yet loaded.
//!
//! ## Authentication: the token webhook
//! With `--authentication-token-webhook-config-file`, a bearer token none of the above knows
//! is reviewed by the webhook the kubeconfig names ([`token_webhook`]: kube's `TokenReview`,
//! answers kept for `--authentication-token-webhook-cache-ttl`, calls bounded and shared),
//! asked last as kube's union authenticator asks it. [`Auth::prepare`] makes the call on the
//! request's task before the synchronous authentication, which takes its answer
//! ([`Prepared`]); the audit layer prepares first and hands its answer to the limits layer,
//! so a request asks at most once. Requests without credentials then get 401 (except
//! [`OPEN_PATHS`]).
//!
//! ## Impersonation
//! An authenticated caller may act as another user with kube-apiserver's headers
//! `Impersonate-User`, `Impersonate-Group` (repeated) and `Impersonate-Uid`
//! ([`Auth::impersonate`], applied right after authentication, so everything after —
//! limits per user, authorization, the operator view — sees the impersonated user). Each
//! identity asked for needs the verb `impersonate`, as kube's `WithImpersonation` asks it:
//! on `users` (cluster scope), or for `system:serviceaccount:NS:NAME` on `serviceaccounts`
//! named NAME in the namespace NS; on `groups`; on `userextras/<key>` and `uids` in
//! `authentication.k8s.io`. An ABAC line grants it when it is not `readonly` and names that
//! resource, group and namespace (or `*`); otherwise 403 with kube-apiserver's message. An
//! impersonated service account gets its groups unless `Impersonate-Group` names some;
//! `Impersonate-Extra-<key>` headers (the key percent-decoded, as kube's `unescapeExtraKey`)
//! give the user's extra, each value a `userextras/<key>` check. A caching proxy with
//! `--upstream-impersonate` uses exactly this to forward writes as its callers.
//!
//! ## Authorization: ABAC
//! The policy file is kube-apiserver's ABAC format, one JSON object per line:
//! `{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {...}}`
//! with the spec keys `user`, `group`, `readonly`, `namespace`, `resource`, `apiGroup` and
//! `nonResourcePath`. The semantics are Kubernetes' (`pkg/auth/authorizer/abac`): a request is
//! allowed when any line matches it, a line matching when
//! - its `user` (or `*`) names the user and/or its `group` (or `*`) names one of the user's
//!   groups (a line with neither matches nobody);
//! - it is not `readonly`, or the verb is `get`, `list` or `watch`;
//! - for a resource request: `namespace`, `resource` and `apiGroup` each equal the request's or
//!   are `*` (a cluster-wide request has the namespace `""`, so a line for one namespace does not
//!   allow a list or watch across all namespaces);
//! - for any other path: `nonResourcePath` is `*`, the path itself, or ends in `*` and is a
//!   prefix of the path.
//!
//! Otherwise the answer is 403 Forbidden with kube-apiserver's message, e.g.
//! `configmaps is forbidden: User "bob" cannot list resource "configmaps" in API group "" in the
//! namespace "team": No policy matched.` Lists and watches are authorized on their namespace,
//! so a watch or list only ever returns what the caller may read.
//!
//! ## Authorization: the chain (`--authorization-mode`)
//! `--authorization-mode` is kube-apiserver's comma list of authorizers, run as its union
//! authorizer ([`Auth::decide`]): [`OPEN_PATHS`] and members of the group `system:masters` are
//! allowed first (kube's privileged-group authorizer); then each mode in order either allows
//! — which decides — or has no opinion, and the next one is asked. `AlwaysAllow` allows,
//! `AlwaysDeny` has no opinion with the reason `Everything is forbidden.`, `ABAC` allows what
//! a policy line matches (reason `No policy matched.`), `RBAC` what a bound role's rule allows
//! ([`rbac`]; its reason names missing roles). When none allows: 403 with kube's message,
//! then `: ` and the reasons, one per line, when any was given. `Webhook` asks a webhook
//! ([`authz_webhook`]: it may also deny, which ends the chain, and a failed call makes the
//! answer kube's 500 unless a later mode allows; its answer is fetched by an async prefetch
//! before the sync chain). `Node` is refused at startup (not supported), as are kube's
//! invalid combinations (`ABAC` without a policy file, a policy file without `ABAC`,
//! `Webhook` without `--authorization-webhook-config-file` and the reverse, a mode twice). Without the flag the chain is
//! today's: `ABAC` with a policy file, otherwise `AlwaysAllow`. The access reviews and
//! `SelfSubjectRulesReview` ([`Auth::rules_for`]: each mode's rules in order) are answered by
//! the same chain. An allowed request allocates nothing in the chain; with `RBAC` it is one
//! read lock of the index, a lookup per user name and group, and the rules of the roles
//! found.
//!
//! ## Authorization: RBAC
//! With `RBAC` in the chain, the cached Roles, ClusterRoles, RoleBindings and
//! ClusterRoleBindings decide ([`rbac`]): an index fed by the reflector, so a binding written
//! decides the next request. Over a store the server also reconciles kube's bootstrap policy
//! at start ([`rbac::bootstrap`]), runs the ClusterRole aggregation controller
//! (`controllers::clusterrole_aggregation`) and refuses writes of roles and bindings that
//! would grant more than the writer holds ([`rbac::escalation`]). In caching-proxy mode the
//! proxy's cached RBAC objects decide (the upstream's own, written there); a proxy that would
//! not cache all four RBAC resources refuses to start. Writes through a proxy are checked for
//! escalation by the upstream.

pub mod authz_webhook;
pub mod cel;
pub mod jwt;
pub mod rbac;
pub mod serviceaccount;
pub mod token_webhook;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::http::{HeaderMap, Method, header};
use serde::Deserialize;
use watchkeeper_api::{ApiError, ResourceDef};

/// The user a verified client certificate names: CN and O values of its subject, and which
/// of the server's client CAs verified it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerIdentity {
    /// The subject's common name.
    pub user: String,
    /// The subject's organization values.
    pub groups: Vec<String>,
    /// `--client-ca-file` verified it: the certificate authenticates as CN and O.
    pub x509: bool,
    /// `--requestheader-client-ca-file` verified it and its CN is allowed: a front proxy,
    /// whose request headers name the caller.
    pub front_proxy: bool,
}

impl PeerIdentity {
    /// Reads CN and O from a DER certificate (already verified by rustls).
    ///
    /// # Errors
    /// The certificate cannot be parsed or has no CN.
    pub fn from_der(der: &[u8]) -> Result<PeerIdentity, String> {
        let (_, cert) = x509_parser::parse_x509_certificate(der)
            .map_err(|e| format!("cannot parse the client certificate: {e}"))?;
        let subject = cert.subject();
        let user = subject
            .iter_common_name()
            .next()
            .and_then(|cn| cn.as_str().ok())
            .filter(|cn| !cn.is_empty())
            .ok_or("the client certificate has no subject common name")?
            .to_owned();
        let groups = subject
            .iter_organization()
            .filter_map(|o| o.as_str().ok())
            .map(str::to_owned)
            .collect();
        Ok(PeerIdentity {
            user,
            groups,
            x509: true,
            front_proxy: false,
        })
    }
}

const TOKEN_FLAG: &str = "--token-auth-file";
const POLICY_FLAG: &str = "--authorization-policy-file";

/// A token or policy file that cannot be used: the flag, the file and why.
#[derive(Debug, thiserror::Error)]
pub enum AuthFileError {
    /// The file cannot be read.
    #[error("cannot read {flag} {}: {source}", path.display())]
    Read {
        /// `--token-auth-file` or `--authorization-policy-file`.
        flag: &'static str,
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A line of the file is malformed.
    #[error("{flag} {}: {source}", path.display())]
    Line {
        /// `--token-auth-file` or `--authorization-policy-file`.
        flag: &'static str,
        /// The file.
        path: PathBuf,
        /// The line and what is wrong with it.
        #[source]
        source: LineError,
    },
    /// A JWT authenticator cannot be made.
    #[error("{0}")]
    Jwt(String),
    /// The token webhook's kubeconfig cannot be used.
    #[error("{0}")]
    TokenWebhook(String),
    /// The service account signing key cannot be used.
    #[error(transparent)]
    Key(#[from] serviceaccount::KeyError),
    /// `--authorization-mode` RBAC in caching-proxy mode, with RBAC resources the proxy does
    /// not cache.
    #[error(
        "--authorization-mode RBAC needs the RBAC objects cached, but the upstream does not serve (or --upstream-resources leaves out) {}",
        missing.join(", ")
    )]
    RbacNotCached {
        /// The resources missing (`roles.rbac.authorization.k8s.io`).
        missing: Vec<String>,
    },
    /// The authorization webhook's kubeconfig cannot be used.
    #[error("--authorization-webhook-config-file: {0}")]
    AuthzWebhook(String),
}

/// A malformed line of a token or policy file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct LineError {
    /// The line number, from 1.
    pub line: usize,
    /// What is wrong with it.
    pub message: String,
}

impl LineError {
    fn at(line: usize, message: impl Into<String>) -> LineError {
        LineError {
            line,
            message: message.into(),
        }
    }
}

/// Paths served to anyone, with or without credentials.
pub const OPEN_PATHS: [&str; 4] = ["/healthz", "/livez", "/readyz", "/version"];

/// The first of `names` whose header has a non-empty value (kube's `headerValue`).
fn first_header<'h>(headers: &'h HeaderMap, names: &[String]) -> Option<&'h str> {
    names.iter().find_map(|name| {
        headers
            .get(name.as_str())
            .and_then(|v| v.to_str().ok())
            .filter(|v| !v.is_empty())
    })
}

/// The headers whose name starts with one of `prefixes`, prefix by prefix, each with the rest
/// of its name and its value. Header names are lowercase here; a prefix is matched as Go's
/// `hasPrefixIgnoreCase` does.
fn prefixed_headers<'h>(
    headers: &'h HeaderMap,
    prefixes: &[String],
) -> Vec<(
    &'h axum::http::HeaderName,
    &'h str,
    &'h axum::http::HeaderValue,
)> {
    let mut found = Vec::new();
    for prefix in prefixes {
        let prefix = prefix.to_ascii_lowercase();
        for (header, value) in headers {
            if let Some(key) = header.as_str().strip_prefix(prefix.as_str()) {
                found.push((header, key, value));
            }
        }
    }
    found
}

/// An `Impersonate-Extra-` header's key as kube's `unescapeExtraKey` reads it: percent-decoded
/// (`url.PathUnescape`), or as it is when that fails.
fn unescape_extra_key(key: &str) -> String {
    let bytes = key.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok());
            let Some(byte) = hex else {
                return key.to_owned();
            };
            out.push(byte);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap_or_else(|_| key.to_owned())
}

/// The API group of `uids` and `userextras` in impersonation checks.
const AUTHENTICATION_GROUP: &str = "authentication.k8s.io";

/// The namespace and name of a service account user name (kube's
/// `serviceaccount.SplitUsername`: `system:serviceaccount:NS:NAME`, NS a valid namespace name,
/// NAME a valid service account name).
fn split_service_account(user: &str) -> Option<(&str, &str)> {
    let (namespace, name) = user
        .strip_prefix("system:serviceaccount:")?
        .split_once(':')?;
    (watchkeeper_api::validate_dns1123_label(namespace).is_ok()
        && watchkeeper_api::validate_dns1123_subdomain(name).is_ok())
    .then_some((namespace, name))
}

/// The API version of an ABAC policy line.
pub const ABAC_API_VERSION: &str = "abac.authorization.kubernetes.io/v1beta1";

/// Who made a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    /// The user name.
    pub name: String,
    /// The uid from the token file (empty for the anonymous user).
    pub uid: String,
    /// Groups, including `system:authenticated` or `system:unauthenticated`.
    pub groups: Vec<String>,
    /// kube's user extra (`user.Info.GetExtra`): keys to values, set by a JWT authenticator's
    /// `claimMappings.extra`; empty for the other authenticators here.
    pub extra: std::collections::BTreeMap<String, Vec<String>>,
}

impl User {
    /// The user of every request when no authentication is configured.
    #[must_use]
    pub fn anonymous() -> User {
        User {
            name: "system:anonymous".to_owned(),
            uid: String::new(),
            groups: vec!["system:unauthenticated".to_owned()],
            extra: Default::default(),
        }
    }
}

/// What a request does, for authorization.
#[derive(Debug)]
pub enum Attributes<'a> {
    /// A request on a resource.
    Resource {
        /// Kubernetes verb: get, list, watch, create, update, patch, delete, deletecollection.
        verb: &'a str,
        /// The resource's definition.
        def: &'a ResourceDef,
        /// The namespace, `""` for cluster-scoped or cluster-wide requests.
        namespace: &'a str,
        /// The object's name, `""` for collections.
        name: &'a str,
        /// The subresource, `""` for none.
        subresource: &'a str,
    },
    /// A resource request named by its group and resource rather than a served definition:
    /// acting as another user, service account, group or uid (the `Impersonate-*` headers,
    /// verb `impersonate`), or a check of an admission policy's `authorizer` (see
    /// [`cel`]).
    Named {
        /// Kubernetes verb.
        verb: &'a str,
        /// The API group.
        group: &'a str,
        /// The plural resource name.
        resource: &'a str,
        /// The subresource, `""` for none.
        subresource: &'a str,
        /// The namespace, `""` for the cluster scope.
        namespace: &'a str,
        /// The object's name, `""` for none.
        name: &'a str,
    },
    /// A request on any other path.
    NonResource {
        /// Lowercase HTTP method (get, post, put, patch, delete...).
        verb: &'a str,
        /// The URL path.
        path: &'a str,
    },
}

impl Attributes<'_> {
    fn verb(&self) -> &str {
        match self {
            Attributes::Resource { verb, .. }
            | Attributes::Named { verb, .. }
            | Attributes::NonResource { verb, .. } => verb,
        }
    }

    /// The namespace of a resource request, `""` otherwise.
    #[must_use]
    pub fn namespace(&self) -> &str {
        match self {
            Attributes::Resource { namespace, .. } | Attributes::Named { namespace, .. } => {
                namespace
            }
            Attributes::NonResource { .. } => "",
        }
    }

    fn is_read_only(&self) -> bool {
        matches!(self.verb(), "get" | "list" | "watch")
    }
}

/// The verb of a non-resource request (kube-apiserver lowercases the method).
#[must_use]
pub fn non_resource_verb(method: &Method) -> String {
    method.as_str().to_ascii_lowercase()
}

/// The authenticators and the authorizer of a server, loaded once at startup.
pub struct Auth {
    /// `None` without `--token-auth-file`: every request is anonymous.
    tokens: Option<Vec<(Vec<u8>, User)>>,
    /// `None` without `--authorization-policy-file`: everything is allowed.
    policies: Option<Vec<PolicySpec>>,
    /// `--client-ca-file` given: client certificates authenticate, anonymous requests do not.
    client_certificates: bool,
    /// The service account token issuer and verifier (`None` in caching-proxy mode, where
    /// the upstream issues tokens).
    service_accounts: Option<Arc<serviceaccount::ServiceAccountTokens>>,
    /// The JWT (OIDC) authenticators (`--authentication-config`, `--oidc-*`).
    jwt: Option<Arc<jwt::Jwt>>,
    /// The token webhook (`--authentication-token-webhook-config-file`), asked last.
    token_webhook: Option<Arc<token_webhook::TokenWebhook>>,
    /// The front proxy's headers (`--requestheader-*`), asked first.
    request_header: Option<crate::config::tls::RequestHeaderConfig>,
    /// The authorizers in order (`--authorization-mode`).
    modes: Vec<AuthorizationMode>,
    /// The RBAC authorizer, when `RBAC` is one of the modes.
    rbac: Option<Arc<rbac::Rbac>>,
    /// The webhook authorizer, when `Webhook` is one of the modes ([`authz_webhook`]).
    authz_webhook: Option<Arc<authz_webhook::AuthzWebhook>>,
}

impl fmt::Debug for Auth {
    /// Never prints a token.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Auth")
            .field("tokens", &self.tokens.as_ref().map(Vec::len))
            .field("policies", &self.policies.as_ref().map(Vec::len))
            .field("modes", &self.modes)
            .finish()
    }
}

impl Auth {
    /// Neither authentication nor authorization.
    #[must_use]
    pub fn none() -> Auth {
        Auth {
            tokens: None,
            policies: None,
            client_certificates: false,
            service_accounts: None,
            jwt: None,
            token_webhook: None,
            request_header: None,
            modes: vec![AuthorizationMode::AlwaysAllow],
            rbac: None,
            authz_webhook: None,
        }
    }

    /// Reads the token file and the policy file, if given.
    ///
    /// # Errors
    /// A file cannot be read, or a line is malformed (the message names the flag, the file and
    /// the line number).
    pub fn load(
        token_file: Option<&Path>,
        policy_file: Option<&Path>,
    ) -> Result<Auth, AuthFileError> {
        let read = |flag: &'static str, path: &Path| {
            std::fs::read_to_string(path).map_err(|source| AuthFileError::Read {
                flag,
                path: path.to_owned(),
                source,
            })
        };
        let parsed = |flag: &'static str, path: &Path| {
            let path = path.to_owned();
            move |source: LineError| AuthFileError::Line { flag, path, source }
        };
        let tokens = match token_file {
            Some(path) => {
                Some(parse_token_file(&read(TOKEN_FLAG, path)?).map_err(parsed(TOKEN_FLAG, path))?)
            }
            None => None,
        };
        let policies = match policy_file {
            Some(path) => Some(
                parse_policy_file(&read(POLICY_FLAG, path)?).map_err(parsed(POLICY_FLAG, path))?,
            ),
            None => None,
        };
        let modes = AuthorizationMode::defaults(policies.is_some());
        Ok(Auth {
            tokens,
            policies,
            client_certificates: false,
            service_accounts: None,
            jwt: None,
            token_webhook: None,
            request_header: None,
            modes,
            rbac: None,
            authz_webhook: None,
        })
    }

    /// Turns client-certificate authentication on (`--client-ca-file`): from then on a
    /// request needs a verified certificate or a token (anonymous requests get 401).
    #[must_use]
    pub fn with_client_certificates(mut self, enabled: bool) -> Auth {
        self.client_certificates = enabled;
        self
    }

    /// Issues and accepts service account tokens with `tokens`.
    #[must_use]
    pub fn with_service_accounts(
        mut self,
        tokens: Option<Arc<serviceaccount::ServiceAccountTokens>>,
    ) -> Auth {
        self.service_accounts = tokens;
        self
    }

    /// Accepts the JWTs of `jwt`'s issuers (see [`jwt`]).
    #[must_use]
    pub fn with_jwt(mut self, jwt: Option<Arc<jwt::Jwt>>) -> Auth {
        self.jwt = jwt;
        self
    }

    /// Asks the token webhook (`--authentication-token-webhook-config-file`, see
    /// [`token_webhook`]) about bearer tokens no other authenticator here knows.
    #[must_use]
    pub fn with_token_webhook(mut self, webhook: Option<Arc<token_webhook::TokenWebhook>>) -> Auth {
        self.token_webhook = webhook;
        self
    }

    /// Takes the identity a front proxy's request headers give (`--requestheader-*`) from
    /// connections whose client certificate `--requestheader-client-ca-file` verified.
    #[must_use]
    pub fn with_request_header(
        mut self,
        request_header: Option<crate::config::tls::RequestHeaderConfig>,
    ) -> Auth {
        self.request_header = request_header;
        self
    }

    /// The user a front proxy's headers name (kube's request-header authenticator): the first
    /// username header with a value, else `None`; the first uid header with a value; every
    /// value of the group headers; the extra of the prefixed headers, keyed by the rest of
    /// their name, percent-decoded.
    fn request_header_user(&self, headers: &HeaderMap) -> Option<User> {
        let config = self.request_header.as_ref()?;
        let name = first_header(headers, &config.username_headers)?.to_owned();
        let uid = first_header(headers, &config.uid_headers)
            .unwrap_or_default()
            .to_owned();
        let groups = config
            .group_headers
            .iter()
            .flat_map(|name| headers.get_all(name.as_str()))
            .filter_map(|v| v.to_str().ok())
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
            .collect();
        let mut extra: std::collections::BTreeMap<String, Vec<String>> =
            std::collections::BTreeMap::new();
        for (_, key, value) in prefixed_headers(headers, &config.extra_headers_prefix) {
            extra
                .entry(unescape_extra_key(key))
                .or_default()
                .push(String::from_utf8_lossy(value.as_bytes()).into_owned());
        }
        Some(with_authenticated_group(User {
            name,
            uid,
            groups,
            extra,
        }))
    }

    /// Removes a front proxy's identity headers from a request they authenticated, as kube's
    /// request-header authenticator does (`ClearAuthenticationHeaders`): the username, uid
    /// and group headers and every header with an extra prefix (matched ignoring case), so
    /// nothing after authentication sees them — a `proxy` subresource's backend gets the
    /// request without them. A request they did not authenticate (no front proxy's verified
    /// certificate, or no username header with a value) keeps them, as in kube, where the
    /// authenticator that clears them is the one that read them.
    pub fn clear_request_header(&self, headers: &mut HeaderMap, peer: Option<&PeerIdentity>) {
        let Some(config) = self.request_header.as_ref() else {
            return;
        };
        if !(peer.is_some_and(|peer| peer.front_proxy)
            && first_header(headers, &config.username_headers).is_some())
        {
            return;
        }
        let named = config
            .username_headers
            .iter()
            .chain(&config.uid_headers)
            .chain(&config.group_headers);
        for name in named {
            // An invalid header name was never read either.
            if let Ok(name) = axum::http::HeaderName::from_bytes(name.as_bytes()) {
                headers.remove(name);
            }
        }
        let extra: Vec<axum::http::HeaderName> =
            prefixed_headers(headers, &config.extra_headers_prefix)
                .into_iter()
                .map(|(name, _, _)| name.clone())
                .collect();
        for name in extra {
            headers.remove(name);
        }
    }

    /// The token webhook, if one is configured.
    #[must_use]
    pub fn token_webhook(&self) -> Option<&Arc<token_webhook::TokenWebhook>> {
        self.token_webhook.as_ref()
    }

    /// Before authenticating a request, what takes a wait: a JWT of a configured issuer
    /// naming a key not yet loaded waits for (at most) one bounded refetch of that issuer's
    /// keys ([`jwt::Jwt::prepare`]); a bearer token no other authenticator knows is reviewed
    /// by the token webhook ([`token_webhook::TokenWebhook::review`]), whose answer
    /// [`Auth::authenticate_peer`] then takes.
    pub async fn prepare(&self, headers: &HeaderMap) -> Prepared {
        let Some(token) = bearer_token(headers) else {
            return Prepared::default();
        };
        if let Some(jwt) = &self.jwt {
            jwt.prepare(token).await;
        }
        match &self.token_webhook {
            Some(webhook) if !self.knows(token) => Prepared(Some(webhook.review(token, &[]).await)),
            _ => Prepared::default(),
        }
    }

    /// Whether an authenticator before the token webhook decides `token` (kube's union asks
    /// the webhook last): a service account token of this server, a JWT of a configured
    /// issuer, a token of the file.
    fn knows(&self, token: &str) -> bool {
        self.service_accounts
            .as_ref()
            .is_some_and(|tokens| tokens.is_issued_here(token))
            || self.jwt.as_ref().is_some_and(|jwt| jwt.owns(token))
            || self.file_user(token).is_some()
    }

    /// The token file's user of `token`: every token compared, whichever matches.
    fn file_user(&self, presented: &str) -> Option<&User> {
        let mut found = None;
        for (token, user) in self.tokens.iter().flatten() {
            if constant_time_eq(token, presented.as_bytes()) {
                found = Some(user);
            }
        }
        found
    }

    /// The token webhook's user of `presented`: the answer [`Auth::prepare`] got, else one
    /// kept; `None` when the webhook is not configured or has not answered.
    fn webhook_user(
        &self,
        presented: &str,
        prepared: Option<&Prepared>,
    ) -> Option<Result<User, ApiError>> {
        let webhook = self.token_webhook.as_ref()?;
        let answer = match prepared.and_then(|p| p.0.clone()) {
            Some(answer) => answer,
            None => webhook.kept_for(presented)?,
        };
        Some(match answer {
            token_webhook::Answer::User(user, _) => Ok(with_authenticated_group(user)),
            token_webhook::Answer::Refused(reason) => {
                tracing::debug!(%reason, "the token webhook refused a token");
                Err(unauthorized())
            }
        })
    }

    /// The user of a bearer JWT of a configured issuer, `None` for any other token (or none).
    fn jwt_user(&self, headers: &HeaderMap) -> Option<Result<User, ApiError>> {
        let jwt = self.jwt.as_ref()?;
        let presented = bearer_token(headers)?;
        Some(jwt.authenticate(presented)?.map_err(|reason| {
            tracing::debug!(%reason, "JWT refused");
            unauthorized()
        }))
    }

    /// Authorizes with `modes` in order (`--authorization-mode`; empty keeps the default:
    /// `ABAC` with a policy file, else `AlwaysAllow`). With `RBAC`, the RBAC authorizer is
    /// created, empty until the reflector feeds it ([`Auth::rbac`]).
    #[must_use]
    pub fn with_authorization(mut self, modes: &[AuthorizationMode]) -> Auth {
        if !modes.is_empty() {
            self.modes = modes.to_vec();
        }
        self.rbac = self
            .modes
            .contains(&AuthorizationMode::Rbac)
            .then(rbac::Rbac::new);
        self
    }

    /// Asks `webhook` in the `Webhook` mode's place of the chain (see [`authz_webhook`]).
    #[must_use]
    pub fn with_authz_webhook(mut self, webhook: Option<Arc<authz_webhook::AuthzWebhook>>) -> Auth {
        self.authz_webhook = webhook;
        self
    }

    /// The webhook authorizer, when `Webhook` is one of the modes.
    #[must_use]
    pub fn authz_webhook(&self) -> Option<&Arc<authz_webhook::AuthzWebhook>> {
        self.authz_webhook.as_ref()
    }

    /// Before a sync decision about `user` doing `attributes`: with `Webhook` in the chain,
    /// its answer is made known (a cache hit, or one bounded call; see [`authz_webhook`]).
    /// Nothing to do otherwise, or when an earlier mode decides without the webhook.
    pub async fn prepare_authorization(&self, user: &User, attributes: &Attributes<'_>) {
        if let Some(key) = self.webhook_key(user, attributes) {
            self.prepare_webhook_key(key).await;
        }
    }

    /// The webhook's spec key ([`authz_webhook::spec_key`]) of `user` doing `attributes` when
    /// the chain would ask the webhook (for a caller that cannot hold the attributes across
    /// an await: [`Auth::prepare_webhook_key`] then).
    #[must_use]
    pub fn webhook_key(&self, user: &User, attributes: &Attributes<'_>) -> Option<String> {
        (self.authz_webhook.is_some() && self.needs_webhook(user, attributes))
            .then(|| authz_webhook::spec_key(user, attributes))
    }

    /// [`Auth::prepare_authorization`] of a spec key of [`Auth::webhook_key`].
    pub async fn prepare_webhook_key(&self, key: String) {
        if let Some(webhook) = &self.authz_webhook {
            webhook.prefetch_key(key).await;
        }
    }

    /// Whether the chain reaches the `Webhook` mode for `user` doing `attributes`.
    fn needs_webhook(&self, user: &User, attributes: &Attributes<'_>) -> bool {
        if matches!(attributes, Attributes::NonResource { path, .. } if OPEN_PATHS.contains(path))
            || user
                .groups
                .iter()
                .any(|g| g == rbac::escalation::PRIVILEGED_GROUP)
        {
            return false;
        }
        for mode in &self.modes {
            if *mode == AuthorizationMode::Webhook {
                return true;
            }
            if self.mode_allows(*mode, user, attributes) {
                return false;
            }
        }
        false
    }

    /// Before [`Auth::impersonate`] (after [`Auth::prepare`]): with `Webhook` in the chain,
    /// the caller's `impersonate` checks of the request's `Impersonate-*` headers are made
    /// known in kube's order, up to the first the chain refuses.
    pub async fn prepare_impersonation(
        &self,
        path: &str,
        headers: &HeaderMap,
        peer: Option<&PeerIdentity>,
        prepared: &Prepared,
    ) {
        if self.authz_webhook.is_none() || !headers.contains_key("impersonate-user") {
            return;
        }
        let Ok(user) = self.authenticate_peer(path, headers, peer, prepared) else {
            return;
        };
        for (group, resource, subresource, namespace, name) in
            authz_webhook::impersonation_checks(headers)
        {
            let attributes = Attributes::Named {
                verb: "impersonate",
                group,
                resource,
                subresource: &subresource,
                namespace: &namespace,
                name: &name,
            };
            self.prepare_authorization(&user, &attributes).await;
            if self.decide(&user, &attributes) != Decision::Allowed {
                return;
            }
        }
    }

    /// Whether every request is allowed, whoever makes it and whatever it asks
    /// (`--authorization-mode=AlwaysAllow` alone, the default without a policy file).
    #[must_use]
    pub fn allows_everything(&self) -> bool {
        self.modes == [AuthorizationMode::AlwaysAllow]
    }

    /// The RBAC authorizer, when `RBAC` is one of the modes.
    #[must_use]
    pub fn rbac(&self) -> Option<&Arc<rbac::Rbac>> {
        self.rbac.as_ref()
    }

    /// The service account token issuer, if this server issues tokens.
    #[must_use]
    pub fn service_accounts(&self) -> Option<&serviceaccount::ServiceAccountTokens> {
        self.service_accounts.as_deref()
    }

    /// The user of a bearer token of this server's service account issuer, `None` for any
    /// other token (or none).
    fn service_account_user(&self, headers: &HeaderMap) -> Option<Result<User, ApiError>> {
        let tokens = self.service_accounts.as_ref()?;
        let presented = bearer_token(headers)?;
        if !tokens.is_issued_here(presented) {
            return None;
        }
        Some(
            tokens
                .verify(presented, &[], serviceaccount::now_unix())
                .map(|(user, _)| user)
                .map_err(|_| unauthorized()),
        )
    }

    /// What a `TokenReview` answers for `token` and the audiences it asks about (empty: the
    /// API audiences): the user and the audiences the token is good for, or why it is not
    /// accepted. A service account token of this server is verified as a request's would be;
    /// any other is looked up in the token file (audience-agnostic: it is good for the
    /// audiences asked about).
    ///
    /// # Errors
    /// Why the token does not authenticate, in kube-apiserver's words where it has them.
    pub async fn review_token(
        &self,
        token: &str,
        audiences: &[String],
    ) -> Result<(User, Vec<String>), String> {
        let api_audiences = || {
            self.service_accounts
                .as_ref()
                .map(|t| t.audiences().to_vec())
                .unwrap_or_default()
        };
        if let Some(tokens) = &self.service_accounts
            && tokens.is_issued_here(token)
        {
            return tokens.verify(token, audiences, serviceaccount::now_unix());
        }
        if let Some(result) = self.jwt.as_ref().and_then(|jwt| jwt.authenticate(token)) {
            let audiences = if audiences.is_empty() {
                api_audiences()
            } else {
                audiences.to_vec()
            };
            return result.map(|user| (user, audiences));
        }
        let good_for = |audiences: &[String]| {
            if audiences.is_empty() {
                api_audiences()
            } else {
                audiences.to_vec()
            }
        };
        if let Some(user) = self.file_user(token) {
            return Ok((user.clone(), good_for(audiences)));
        }
        match &self.token_webhook {
            Some(webhook) => match webhook.review(token, audiences).await {
                token_webhook::Answer::User(user, good) => {
                    let good = if good.is_empty() {
                        good_for(audiences)
                    } else {
                        good
                    };
                    Ok((with_authenticated_group(user), good))
                }
                token_webhook::Answer::Refused(reason) => Err(reason),
            },
            None => Err("invalid bearer token".to_owned()),
        }
    }

    /// Who sent a request, given the connection's verified client certificate if any: the
    /// certificate wins (kube-apiserver tries x509 before tokens), then the bearer token.
    ///
    /// # Errors
    /// 401 Unauthorized when authentication is configured and neither identifies the caller.
    pub fn authenticate_peer(
        &self,
        path: &str,
        headers: &HeaderMap,
        peer: Option<&PeerIdentity>,
        prepared: &Prepared,
    ) -> Result<User, ApiError> {
        // kube's order: the front proxy's headers, then the certificate itself.
        if let Some(peer) = peer
            && peer.front_proxy
            && let Some(user) = self.request_header_user(headers)
        {
            return Ok(user);
        }
        if let Some(peer) = peer
            && peer.x509
        {
            let mut groups = peer.groups.clone();
            groups.push("system:authenticated".to_owned());
            return Ok(User {
                name: peer.user.clone(),
                uid: String::new(),
                groups,
                extra: Default::default(),
            });
        }
        if let Some(user) = self.service_account_user(headers) {
            return user;
        }
        if let Some(user) = self.jwt_user(headers) {
            return user;
        }
        if self.tokens.is_none()
            && self.token_webhook.is_none()
            && (self.client_certificates || self.jwt.is_some() || self.request_header.is_some())
            && !OPEN_PATHS.contains(&path)
        {
            return Err(unauthorized());
        }
        self.authenticate_with(path, headers, Some(prepared))
    }

    /// Whether requests need a token.
    #[must_use]
    pub fn authentication_enabled(&self) -> bool {
        self.tokens.is_some()
            || self.client_certificates
            || self.jwt.is_some()
            || self.token_webhook.is_some()
            || self.request_header.is_some()
    }

    /// Who sent a request. Open paths and servers without a token file give the anonymous user.
    ///
    /// # Errors
    /// 401 Unauthorized: no bearer token, or not one of the file's.
    pub fn authenticate(&self, path: &str, headers: &HeaderMap) -> Result<User, ApiError> {
        self.authenticate_with(path, headers, None)
    }

    /// [`Auth::authenticate`] with what [`Auth::prepare`] found, if it ran.
    fn authenticate_with(
        &self,
        path: &str,
        headers: &HeaderMap,
        prepared: Option<&Prepared>,
    ) -> Result<User, ApiError> {
        if let Some(user) = self.service_account_user(headers) {
            return user;
        }
        if let Some(user) = self.jwt_user(headers) {
            return user;
        }
        if self.tokens.is_none() && self.token_webhook.is_none() {
            if self.jwt.is_some() && !OPEN_PATHS.contains(&path) {
                return Err(unauthorized());
            }
            return Ok(User::anonymous());
        }
        if OPEN_PATHS.contains(&path) {
            return Ok(User::anonymous());
        }
        let presented = bearer_token(headers).ok_or_else(unauthorized)?;
        if let Some(user) = self.file_user(presented) {
            return Ok(user.clone());
        }
        self.webhook_user(presented, prepared)
            .unwrap_or_else(|| Err(unauthorized()))
    }

    /// The user a request acts as: `user` itself, or the one its `Impersonate-User` (with
    /// `Impersonate-Group`s and `Impersonate-Uid`) headers name, if `user` may impersonate each
    /// of them, as kube-apiserver's `WithImpersonation` checks them, in its order: verb
    /// `impersonate` on `users` (or, for `system:serviceaccount:NS:NAME` with a valid namespace
    /// and name, on `serviceaccounts` named NAME in the namespace NS), on `groups` (each
    /// group), on `userextras/<key>` in `authentication.k8s.io` (each value), on `uids` in
    /// `authentication.k8s.io`. A service account without `Impersonate-Group` gets its groups
    /// `system:serviceaccounts` and `system:serviceaccounts:NS`; any user but
    /// `system:anonymous` gets `system:authenticated` unless its groups hold it or
    /// `system:unauthenticated`, `system:anonymous` gets `system:unauthenticated`.
    ///
    /// # Errors
    /// 400 for group, uid or extra headers without a user, or for a header that is not text;
    /// 403 with kube's message at the first identity `user` may not impersonate.
    pub fn impersonate(&self, user: User, headers: &HeaderMap) -> Result<User, ApiError> {
        // Most requests impersonate nobody: one pass over the header names (each already
        // lowercase) instead of three look-ups by names parsed per request and a pass.
        if !headers
            .keys()
            .any(|name| name.as_str().starts_with("impersonate-"))
        {
            return Ok(user);
        }
        let text = |value: &axum::http::HeaderValue| {
            value
                .to_str()
                .map(str::to_owned)
                .map_err(|_| ApiError::bad_request("impersonation headers must be text"))
        };
        let target = headers.get("impersonate-user").map(text).transpose()?;
        let groups = headers
            .get_all("impersonate-group")
            .iter()
            .map(text)
            .collect::<Result<Vec<_>, _>>()?;
        let uid = headers.get("impersonate-uid").map(text).transpose()?;
        let mut extras = Vec::new();
        for (key, value) in headers {
            if let Some(extra) = key.as_str().strip_prefix("impersonate-extra-") {
                extras.push((unescape_extra_key(extra), text(value)?));
            }
        }
        let Some(target) = target else {
            if !groups.is_empty() || uid.is_some() || !extras.is_empty() {
                return Err(ApiError::bad_request(
                    "Impersonate-Group, Impersonate-Uid and Impersonate-Extra-* need Impersonate-User",
                ));
            }
            return Ok(user);
        };
        if target.is_empty() {
            return Err(ApiError::bad_request("Impersonate-User is empty"));
        }
        let service_account = split_service_account(&target);
        // kube's `WithImpersonation`: anything but an allow — an evaluation error included — is
        // its 403 with the reason.
        let impersonate = |group: &str, resource: &str, sub: &str, namespace: &str, name: &str| {
            let attributes = Attributes::Named {
                verb: "impersonate",
                group,
                resource,
                subresource: sub,
                namespace,
                name,
            };
            match self.decide(&user, &attributes) {
                Decision::Allowed => Ok(()),
                Decision::Denied(reason) | Decision::Refused { reason, .. } => {
                    Err(forbidden(&user, &attributes, &reason))
                }
            }
        };
        match service_account {
            Some((namespace, name)) => impersonate("", "serviceaccounts", "", namespace, name)?,
            None => impersonate("", "users", "", "", &target)?,
        }
        for group in &groups {
            impersonate("", "groups", "", "", group)?;
        }
        for (key, value) in &extras {
            impersonate(AUTHENTICATION_GROUP, "userextras", key, "", value)?;
        }
        if let Some(uid) = &uid {
            impersonate(AUTHENTICATION_GROUP, "uids", "", "", uid)?;
        }
        let mut extra: std::collections::BTreeMap<String, Vec<String>> =
            std::collections::BTreeMap::new();
        for (key, value) in extras {
            extra.entry(key).or_default().push(value);
        }
        let mut groups = groups;
        if let Some((namespace, _)) = service_account
            && groups.is_empty()
        {
            groups = vec![
                "system:serviceaccounts".to_owned(),
                format!("system:serviceaccounts:{namespace}"),
            ];
        }
        let has = |groups: &[String], group: &str| groups.iter().any(|g| g == group);
        if target == "system:anonymous" {
            if !has(&groups, "system:unauthenticated") {
                groups.push("system:unauthenticated".to_owned());
            }
        } else if !has(&groups, "system:authenticated") && !has(&groups, "system:unauthenticated") {
            groups.push("system:authenticated".to_owned());
        }
        Ok(User {
            name: target,
            uid: uid.unwrap_or_default(),
            groups,
            extra,
        })
    }

    /// Whether `user` may do `attributes`. Open paths are always allowed.
    ///
    /// # Errors
    /// 403 Forbidden with kube-apiserver's message.
    pub fn authorize(&self, user: &User, attributes: &Attributes<'_>) -> Result<(), ApiError> {
        match self.decide(user, attributes) {
            Decision::Allowed => Ok(()),
            Decision::Denied(reason) => Err(forbidden(user, attributes, &reason)),
            Decision::Refused { reason, error, .. } => {
                Err(refused(user, attributes, &reason, &error))
            }
        }
    }

    /// [`Auth::authorize`] of the request being served: its decision and reason (RBAC's
    /// `allowed by ...`, the modes' reasons for a refusal) also go to the request's audit
    /// event (kube's `authorization.k8s.io/decision` and `/reason` annotations) when it is
    /// audited. Reviews, which authorize another request, use [`Auth::authorize`].
    ///
    /// # Errors
    /// 403 Forbidden with kube-apiserver's message.
    pub fn authorize_request(
        &self,
        user: &User,
        attributes: &Attributes<'_>,
    ) -> Result<(), ApiError> {
        let decision = self.decide(user, attributes);
        if crate::audit::context::is_audited() {
            match &decision {
                Decision::Allowed => {
                    crate::audit::context::authorized(true, &self.allowed_reason(user, attributes))
                }
                Decision::Denied(reason) => crate::audit::context::authorized(false, reason),
                // kube's `WithAuthorization`: an evaluation error is the reason `internal error`.
                Decision::Refused { reason, error, .. } => crate::audit::context::authorized(
                    false,
                    if error.is_empty() {
                        reason
                    } else {
                        "internal error"
                    },
                ),
            }
        }
        match decision {
            Decision::Allowed => Ok(()),
            Decision::Denied(reason) => Err(forbidden(user, attributes, &reason)),
            Decision::Refused { reason, error, .. } => {
                Err(refused(user, attributes, &reason, &error))
            }
        }
    }

    /// kube-apiserver's union authorizer over the modes: open paths and the group
    /// `system:masters` are allowed first; then each mode in order allows, or has no
    /// opinion and the next decides. Denied when none allows, with the reasons the modes
    /// gave (one per line).
    #[must_use]
    pub fn decide(&self, user: &User, attributes: &Attributes<'_>) -> Decision {
        if let Attributes::NonResource { path, .. } = attributes
            && OPEN_PATHS.contains(path)
        {
            return Decision::Allowed;
        }
        if self.modes == [AuthorizationMode::AlwaysAllow]
            || user
                .groups
                .iter()
                .any(|g| g == rbac::escalation::PRIVILEGED_GROUP)
        {
            return Decision::Allowed;
        }
        if let Some(webhook) = &self.authz_webhook {
            return webhook.decide(self, user, attributes);
        }
        let allowed = self
            .modes
            .iter()
            .any(|mode| self.mode_allows(*mode, user, attributes));
        if allowed {
            return Decision::Allowed;
        }
        // Denied: the reasons, built only now (an allowed request allocates nothing here).
        let reasons: Vec<String> = self
            .modes
            .iter()
            .filter_map(|mode| self.mode_reason(*mode, user, attributes))
            .collect();
        Decision::Denied(reasons.join("\n"))
    }

    /// Whether `mode` (other than `Webhook`, asked by [`authz_webhook`]) allows.
    fn mode_allows(
        &self,
        mode: AuthorizationMode,
        user: &User,
        attributes: &Attributes<'_>,
    ) -> bool {
        match mode {
            AuthorizationMode::AlwaysAllow => true,
            AuthorizationMode::AlwaysDeny | AuthorizationMode::Webhook => false,
            AuthorizationMode::Abac => self
                .policies
                .iter()
                .flatten()
                .any(|p| p.matches(user, attributes)),
            AuthorizationMode::Rbac => self
                .rbac
                .as_ref()
                .is_some_and(|rbac| rbac.allows(user, attributes)),
        }
    }

    /// The reason `mode` (other than `Webhook`) gives when it does not allow.
    fn mode_reason(
        &self,
        mode: AuthorizationMode,
        user: &User,
        attributes: &Attributes<'_>,
    ) -> Option<String> {
        match mode {
            AuthorizationMode::AlwaysAllow | AuthorizationMode::Webhook => None,
            AuthorizationMode::AlwaysDeny => Some("Everything is forbidden.".to_owned()),
            AuthorizationMode::Abac => Some("No policy matched.".to_owned()),
            AuthorizationMode::Rbac => self
                .rbac
                .as_ref()
                .map(|rbac| rbac.denial_reason(user, attributes.namespace()))
                .filter(|reason| !reason.is_empty()),
        }
    }
}

impl Auth {
    /// The reason the chain gives for allowing `attributes` to `user` (access reviews show
    /// it): RBAC's `allowed by ...` when RBAC is the first mode to allow, else empty (kube's
    /// privileged group, AlwaysAllow and ABAC give none).
    #[must_use]
    pub fn allowed_reason(&self, user: &User, attributes: &Attributes<'_>) -> String {
        if matches!(attributes, Attributes::NonResource { path, .. } if OPEN_PATHS.contains(path))
            || user
                .groups
                .iter()
                .any(|g| g == rbac::escalation::PRIVILEGED_GROUP)
        {
            return String::new();
        }
        for mode in &self.modes {
            match mode {
                AuthorizationMode::AlwaysAllow => return String::new(),
                AuthorizationMode::AlwaysDeny => {}
                AuthorizationMode::Abac => {
                    if self
                        .policies
                        .iter()
                        .flatten()
                        .any(|p| p.matches(user, attributes))
                    {
                        return String::new();
                    }
                }
                AuthorizationMode::Rbac => {
                    if let Some(reason) = self
                        .rbac
                        .as_ref()
                        .and_then(|rbac| rbac.allowed_by(user, attributes))
                    {
                        return reason;
                    }
                }
                AuthorizationMode::Webhook => {
                    if let Some(authz_webhook::Opinion::Allow(reason)) = self
                        .authz_webhook
                        .as_ref()
                        .map(|webhook| webhook.opinion(user, attributes))
                    {
                        return reason;
                    }
                }
            }
        }
        String::new()
    }
}

/// What [`Auth::prepare`] found before a request is authenticated: the token webhook's
/// answer for its bearer token, when it was asked.
#[derive(Clone, Debug, Default)]
pub struct Prepared(Option<token_webhook::Answer>);

/// What the authorization chain decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// A mode allowed the request.
    Allowed,
    /// None did; the reasons they gave (possibly empty).
    Denied(String),
    /// The `Webhook` mode denied outright (`denied`: kube's `DecisionDeny`, which ends the
    /// chain, with its reason), or none allowed and a webhook call failed (`error`: kube's
    /// evaluation error, which makes a request's answer 500; see [`authz_webhook`]).
    Refused {
        /// The reasons given.
        reason: String,
        /// Whether a mode denied (rather than none allowing).
        denied: bool,
        /// The evaluation error, empty for none.
        error: String,
    },
}

/// One authorizer of `--authorization-mode` (its configuration's type, see
/// `crate::config::authz`).
pub use crate::config::authz::AuthorizationMode;

/// The rules a user holds in a namespace, as `SelfSubjectRulesReview` reports them.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Rules {
    /// Resource rules (verbs, apiGroups, resources, resourceNames).
    pub resource: Vec<rbac::PolicyRule>,
    /// Non-resource rules (verbs, nonResourceURLs).
    pub non_resource: Vec<rbac::PolicyRule>,
    /// Why some rules could not be resolved (RBAC's missing roles, the webhook's lack of
    /// rules), empty when all were.
    pub evaluation_error: String,
    /// Whether the rules may be incomplete (`Webhook` in the chain, as kube).
    pub incomplete: bool,
}

impl Auth {
    /// What `user` may do in `namespace`, as kube-apiserver's union rule resolver reports it:
    /// each mode's rules in order — `*` for `AlwaysAllow`, none for `AlwaysDeny`; for `ABAC`
    /// one rule per policy line naming the user (or a group of theirs) whose namespace
    /// matches (`get`, `list`, `watch` for read-only lines, `*` otherwise); for `RBAC` the
    /// rules of every role bound to the user there. The list is complete (`incomplete: false`
    /// in the review): kube's AlwaysAllow, AlwaysDeny, ABAC and RBAC are all rule resolvers
    /// that report complete rules (`pkg/kubeapiserver/authorizer` adds each to the union rule
    /// resolver); `Webhook` makes it incomplete with kube's error `webhook authorizer does not
    /// support user rule resolution` (joined to RBAC's errors as kube's aggregate). The
    /// privileged group `system:masters` is not a rule resolver: its members see the rules
    /// bound to them (`cluster-admin` with the bootstrap policy), as in kube.
    #[must_use]
    pub fn rules_for(&self, user: &User, namespace: &str) -> Rules {
        let star = || vec!["*".to_owned()];
        let mut rules = Rules::default();
        let mut errors: Vec<String> = Vec::new();
        for mode in &self.modes {
            match mode {
                AuthorizationMode::AlwaysAllow => {
                    rules.resource.push(rbac::PolicyRule {
                        verbs: star(),
                        api_groups: star(),
                        resources: star(),
                        ..rbac::PolicyRule::default()
                    });
                    rules.non_resource.push(rbac::PolicyRule {
                        verbs: star(),
                        non_resource_urls: star(),
                        ..rbac::PolicyRule::default()
                    });
                }
                AuthorizationMode::AlwaysDeny => {}
                AuthorizationMode::Abac => self.abac_rules(user, namespace, &mut rules),
                AuthorizationMode::Rbac => {
                    let Some(rbac) = &self.rbac else { continue };
                    let resolved = rbac.resolve(user, namespace);
                    for rule in resolved.rules {
                        if !rule.resources.is_empty() {
                            rules.resource.push(rbac::PolicyRule {
                                non_resource_urls: Vec::new(),
                                ..rule.clone()
                            });
                        }
                        if !rule.non_resource_urls.is_empty() {
                            rules.non_resource.push(rbac::PolicyRule {
                                verbs: rule.verbs,
                                non_resource_urls: rule.non_resource_urls,
                                ..rbac::PolicyRule::default()
                            });
                        }
                    }
                    errors.extend(resolved.errors);
                }
                AuthorizationMode::Webhook => {
                    rules.incomplete = true;
                    errors.push(
                        "webhook authorizer does not support user rule resolution".to_owned(),
                    );
                }
            }
        }
        if !errors.is_empty() {
            rules.evaluation_error = rbac::aggregate(&errors);
        }
        rules
    }

    fn abac_rules(&self, user: &User, namespace: &str, rules: &mut Rules) {
        for policy in self
            .policies
            .iter()
            .flatten()
            .filter(|p| p.subject_matches(user))
        {
            let verbs = if policy.readonly {
                vec!["get".to_owned(), "list".to_owned(), "watch".to_owned()]
            } else {
                vec!["*".to_owned()]
            };
            if !policy.resource.is_empty() && wildcard_eq(&policy.namespace, namespace) {
                rules.resource.push(rbac::PolicyRule {
                    verbs: verbs.clone(),
                    api_groups: vec![policy.api_group.clone()],
                    resources: vec![policy.resource.clone()],
                    ..rbac::PolicyRule::default()
                });
            }
            if !policy.non_resource_path.is_empty() {
                rules.non_resource.push(rbac::PolicyRule {
                    verbs,
                    non_resource_urls: vec![policy.non_resource_path.clone()],
                    ..rbac::PolicyRule::default()
                });
            }
        }
    }
}

/// `user` in `system:authenticated` unless it is anonymous or its groups say already (kube's
/// `AuthenticatedGroupAdder`).
fn with_authenticated_group(mut user: User) -> User {
    if user.name != "system:anonymous"
        && !user
            .groups
            .iter()
            .any(|g| g == "system:authenticated" || g == "system:unauthenticated")
    {
        user.groups.push("system:authenticated".to_owned());
    }
    user
}

fn unauthorized() -> ApiError {
    ApiError::unauthorized("Unauthorized")
}

/// A [`Decision::Refused`]'s answer: kube's 500 for an evaluation error, else its 403.
fn refused(user: &User, attributes: &Attributes<'_>, reason: &str, error: &str) -> ApiError {
    if error.is_empty() {
        forbidden(user, attributes, reason)
    } else {
        authz_webhook::internal_error(attributes, error)
    }
}

/// kube-apiserver's 403 message: `forbiddenMessage`, then `: ` and the authorizers'
/// reason when they gave one.
fn forbidden(user: &User, attributes: &Attributes<'_>, reason: &str) -> ApiError {
    let because = if reason.is_empty() {
        String::new()
    } else {
        format!(": {reason}")
    };
    match attributes {
        Attributes::Resource {
            verb,
            def,
            namespace,
            name,
            subresource,
        } => {
            let resource = if subresource.is_empty() {
                def.plural.clone()
            } else {
                format!("{}/{subresource}", def.plural)
            };
            let scope = if namespace.is_empty() {
                "at the cluster scope".to_owned()
            } else {
                format!("in the namespace {namespace:?}")
            };
            ApiError::forbidden(
                def,
                name,
                format!(
                    "User {:?} cannot {verb} resource {resource:?} in API group {:?} {scope}{because}",
                    user.name, def.group
                ),
            )
        }
        Attributes::Named {
            verb,
            group,
            resource,
            subresource,
            namespace,
            name,
        } => {
            // kube's `responsewriters.Forbidden`: the group-resource without the subresource
            // names the object, the message names both.
            let qualified = if group.is_empty() {
                (*resource).to_owned()
            } else {
                format!("{resource}.{group}")
            };
            let object = if name.is_empty() {
                qualified
            } else {
                format!("{qualified} {name:?}")
            };
            let full = if subresource.is_empty() {
                (*resource).to_owned()
            } else {
                format!("{resource}/{subresource}")
            };
            let scope = if namespace.is_empty() {
                "at the cluster scope".to_owned()
            } else {
                format!("in the namespace {namespace:?}")
            };
            ApiError {
                details: Some(serde_json::json!({"name": name, "group": group, "kind": resource})),
                ..ApiError::new(
                    403,
                    "Forbidden",
                    format!(
                        "{object} is forbidden: User {:?} cannot {verb} resource {full:?} in API group {group:?} {scope}{because}",
                        user.name
                    ),
                )
            }
        }
        Attributes::NonResource { verb, path } => ApiError::new(
            403,
            "Forbidden",
            format!(
                "forbidden: User {:?} cannot {verb} path {path:?}{because}",
                user.name
            ),
        ),
    }
}

/// The token of `Authorization: Bearer <token>` (scheme case-insensitive, as Kubernetes).
fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim();
    let mut parts = value.splitn(3, ' ');
    let scheme = parts.next()?;
    let token = parts.next()?;
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Equality that looks at every byte of both inputs, whatever differs first.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut difference = a.len() ^ b.len();
    for index in 0..a.len().max(b.len()) {
        let x = a.get(index).copied().unwrap_or(0);
        let y = b.get(index).copied().unwrap_or(0);
        difference |= usize::from(x ^ y);
    }
    std::hint::black_box(difference) == 0
}

/// Parses a token file: `token,user,uid[,"group1,group2"]` per line.
///
/// # Errors
/// `line N: ...` for the first malformed line.
pub fn parse_token_file(text: &str) -> Result<Vec<(Vec<u8>, User)>, LineError> {
    let mut tokens: Vec<(Vec<u8>, User)> = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let number = index + 1;
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let fields = split_csv(line).map_err(|e| LineError::at(number, e))?;
        if fields.len() < 3 {
            return Err(LineError::at(
                number,
                format!(
                    "must have at least 3 columns (token, user name, user uid), found {}",
                    fields.len()
                ),
            ));
        }
        if fields.len() > 4 {
            return Err(LineError::at(
                number,
                format!(
                    "has {} columns, at most 4 (token, user name, user uid, groups); quote the groups column when it holds several groups",
                    fields.len()
                ),
            ));
        }
        if fields[0].is_empty() {
            return Err(LineError::at(number, "the token is empty"));
        }
        if fields[1].is_empty() {
            return Err(LineError::at(number, "the user name is empty"));
        }
        if tokens
            .iter()
            .any(|(token, _)| constant_time_eq(token, fields[0].as_bytes()))
        {
            return Err(LineError::at(number, "the token repeats an earlier line's"));
        }
        let mut groups: Vec<String> = fields
            .get(3)
            .map(|groups| {
                groups
                    .split(',')
                    .map(str::trim)
                    .filter(|g| !g.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        groups.push("system:authenticated".to_owned());
        let mut fields = fields.into_iter();
        let token = fields.next().unwrap_or_default().into_bytes();
        let name = fields.next().unwrap_or_default();
        let uid = fields.next().unwrap_or_default();
        tokens.push((
            token,
            User {
                name,
                uid,
                groups,
                extra: Default::default(),
            },
        ));
    }
    Ok(tokens)
}

/// Splits one CSV record as Go's `encoding/csv` with `TrimLeadingSpace` (Kubernetes' reader):
/// fields may be quoted, `""` inside quotes is a quote, a bare quote inside an unquoted field is
/// an error.
fn split_csv(line: &str) -> Result<Vec<String>, String> {
    let mut fields = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| *c == ' ' || *c == '\t') {
            chars.next();
        }
        let mut field = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            loop {
                match chars.next() {
                    None => {
                        return Err(format!(
                            "field {} has an opening quote without a closing one",
                            fields.len() + 1
                        ));
                    }
                    Some('"') if chars.peek() == Some(&'"') => {
                        chars.next();
                        field.push('"');
                    }
                    Some('"') => break,
                    Some(c) => field.push(c),
                }
            }
            match chars.next() {
                None => {
                    fields.push(field);
                    return Ok(fields);
                }
                Some(',') => fields.push(field),
                Some(c) => {
                    return Err(format!(
                        "field {}: unexpected {c:?} after the closing quote",
                        fields.len() + 1
                    ));
                }
            }
        } else {
            loop {
                match chars.next() {
                    None => {
                        fields.push(field);
                        return Ok(fields);
                    }
                    Some(',') => {
                        fields.push(field);
                        break;
                    }
                    Some('"') => {
                        return Err(format!(
                            "field {}: a quote inside an unquoted field",
                            fields.len() + 1
                        ));
                    }
                    Some(c) => field.push(c),
                }
            }
        }
    }
}

/// One line of an ABAC policy file.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PolicyLine {
    api_version: String,
    kind: String,
    spec: PolicySpec,
}

/// What one policy line allows (Kubernetes' `abac.v1beta1.PolicySpec`).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
struct PolicySpec {
    user: String,
    group: String,
    readonly: bool,
    api_group: String,
    resource: String,
    namespace: String,
    non_resource_path: String,
}

impl PolicySpec {
    /// Kubernetes' `matches`: subject, then verb, then the resource or the path.
    fn matches(&self, user: &User, attributes: &Attributes<'_>) -> bool {
        self.subject_matches(user)
            && (attributes.is_read_only() || !self.readonly)
            && match attributes {
                Attributes::Resource { def, namespace, .. } => {
                    wildcard_eq(&self.namespace, namespace)
                        && wildcard_eq(&self.resource, &def.plural)
                        && wildcard_eq(&self.api_group, &def.group)
                }
                Attributes::Named {
                    group,
                    resource,
                    namespace,
                    ..
                } => {
                    wildcard_eq(&self.namespace, namespace)
                        && wildcard_eq(&self.resource, resource)
                        && wildcard_eq(&self.api_group, group)
                }
                Attributes::NonResource { path, .. } => {
                    let pattern = self.non_resource_path.as_str();
                    pattern == "*"
                        || pattern == *path
                        || pattern
                            .strip_suffix('*')
                            .is_some_and(|prefix| path.starts_with(prefix.trim_end_matches('*')))
                }
            }
    }

    /// A line names a user, a group or both; each named must match.
    fn subject_matches(&self, user: &User) -> bool {
        let mut matched = false;
        if !self.user.is_empty() {
            if self.user != "*" && self.user != user.name {
                return false;
            }
            matched = true;
        }
        if !self.group.is_empty() {
            if self.group != "*" && !user.groups.contains(&self.group) {
                return false;
            }
            matched = true;
        }
        matched
    }
}

fn wildcard_eq(pattern: &str, value: &str) -> bool {
    pattern == "*" || pattern == value
}

/// Parses an ABAC policy file, one JSON policy per line.
///
/// # Errors
/// `line N: ...` for the first malformed line.
fn parse_policy_file(text: &str) -> Result<Vec<PolicySpec>, LineError> {
    let mut policies = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let number = index + 1;
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let policy: PolicyLine =
            serde_json::from_str(line).map_err(|e| LineError::at(number, e.to_string()))?;
        if policy.api_version != ABAC_API_VERSION || policy.kind != "Policy" {
            return Err(LineError::at(
                number,
                format!(
                    "expected apiVersion {ABAC_API_VERSION:?} and kind \"Policy\", found {:?} and {:?}",
                    policy.api_version, policy.kind
                ),
            ));
        }
        if policy.spec.user.is_empty() && policy.spec.group.is_empty() {
            return Err(LineError::at(
                number,
                "the spec names neither a user nor a group, so it matches nobody",
            ));
        }
        policies.push(policy.spec);
    }
    Ok(policies)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_file_csv() {
        let tokens = parse_token_file(
            "# comment\n\nt1,alice,u1\n t2 , bob,u2,\"dev,ops\"\r\nt3,carol,u3,single\n\"t,4\",dave,u4,\"a \"\"quoted\"\" group\"\n",
        )
        .unwrap();
        assert_eq!(tokens.len(), 4);
        assert_eq!(tokens[0].1.name, "alice");
        assert_eq!(tokens[0].1.groups, ["system:authenticated"]);
        assert_eq!(tokens[1].0, b"t2 ");
        assert_eq!(tokens[1].1.name, "bob");
        assert_eq!(tokens[1].1.groups, ["dev", "ops", "system:authenticated"]);
        assert_eq!(tokens[2].1.groups, ["single", "system:authenticated"]);
        assert_eq!(tokens[3].0, b"t,4");
        assert_eq!(tokens[3].1.groups[0], "a \"quoted\" group");
        for (text, line, what) in [
            ("t1,alice\n", 1, "at least 3 columns"),
            ("# c\nt1,alice,u1\nt2,bob,u2,dev,ops\n", 3, "at most 4"),
            ("t1,alice,u1,\"dev\n", 1, "closing"),
            ("t1,al\"ice,u1\n", 1, "quote inside"),
            (",alice,u1\n", 1, "token is empty"),
            ("t1,,u1\n", 1, "user name is empty"),
            ("t1,a,u1\nt1,b,u2\n", 2, "repeats"),
        ] {
            let error = parse_token_file(text).unwrap_err().to_string();
            assert!(error.starts_with(&format!("line {line}: ")), "{error}");
            assert!(error.contains(what), "{error}");
        }
    }

    #[test]
    fn constant_time_equality() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
        assert!(!constant_time_eq(b"", b"x"));
        assert!(constant_time_eq(b"", b""));
    }

    #[test]
    fn bearer_header() {
        let mut headers = HeaderMap::new();
        assert_eq!(bearer_token(&headers), None);
        headers.insert(header::AUTHORIZATION, "Bearer abc".parse().unwrap());
        assert_eq!(bearer_token(&headers), Some("abc"));
        headers.insert(header::AUTHORIZATION, "bearer abc".parse().unwrap());
        assert_eq!(bearer_token(&headers), Some("abc"));
        headers.insert(header::AUTHORIZATION, "Basic abc".parse().unwrap());
        assert_eq!(bearer_token(&headers), None);
        headers.insert(header::AUTHORIZATION, "Bearer ".parse().unwrap());
        assert_eq!(bearer_token(&headers), None);
    }

    fn policy(spec: &str) -> Vec<PolicySpec> {
        parse_policy_file(&format!(
            "{{\"apiVersion\": \"{ABAC_API_VERSION}\", \"kind\": \"Policy\", \"spec\": {spec}}}"
        ))
        .unwrap()
    }

    fn user(name: &str, groups: &[&str]) -> User {
        User {
            name: name.to_owned(),
            uid: String::new(),
            groups: groups.iter().map(|g| (*g).to_owned()).collect(),
            extra: Default::default(),
        }
    }

    #[test]
    fn abac_matching() {
        let defs = watchkeeper_api::builtin_resources();
        let configmaps = defs.iter().find(|d| d.plural == "configmaps").unwrap();
        let deployments = defs.iter().find(|d| d.plural == "deployments").unwrap();
        let resource = |verb, def, namespace| Attributes::Resource {
            verb,
            def,
            namespace,
            name: "",
            subresource: "",
        };
        let alice = user("alice", &["dev"]);
        let bob = user("bob", &["ops"]);

        let p = policy(
            r#"{"user": "alice", "namespace": "team", "resource": "*", "apiGroup": "*", "readonly": true}"#,
        );
        assert!(p[0].matches(&alice, &resource("list", configmaps, "team")));
        assert!(p[0].matches(&alice, &resource("watch", deployments, "team")));
        assert!(!p[0].matches(&alice, &resource("create", configmaps, "team")));
        assert!(!p[0].matches(&alice, &resource("list", configmaps, "other")));
        assert!(!p[0].matches(&alice, &resource("list", configmaps, "")));
        assert!(!p[0].matches(&bob, &resource("list", configmaps, "team")));
        let path = Attributes::NonResource {
            verb: "get",
            path: "/api",
        };
        assert!(!p[0].matches(&alice, &path), "a resource line, not a path");

        let p = policy(
            r#"{"group": "dev", "namespace": "*", "resource": "configmaps", "apiGroup": ""}"#,
        );
        assert!(p[0].matches(&alice, &resource("delete", configmaps, "x")));
        assert!(!p[0].matches(&alice, &resource("get", deployments, "x")));
        assert!(!p[0].matches(&bob, &resource("get", configmaps, "x")));

        let p = policy(
            r#"{"user": "alice", "group": "ops", "namespace": "*", "resource": "*", "apiGroup": "*"}"#,
        );
        assert!(
            !p[0].matches(&alice, &resource("get", configmaps, "x")),
            "both must match"
        );

        let p = policy(r#"{"user": "*", "nonResourcePath": "/apis/*", "readonly": true}"#);
        let get = |path| Attributes::NonResource { verb: "get", path };
        assert!(p[0].matches(&bob, &get("/apis/apps/v1")));
        assert!(!p[0].matches(&bob, &get("/api")));
        assert!(!p[0].matches(&bob, &resource("get", configmaps, "x")));
        let p = policy(r#"{"user": "*", "nonResourcePath": "*"}"#);
        assert!(p[0].matches(&bob, &get("/metrics")));
        let p = policy(r#"{"user": "*", "nonResourcePath": "/version"}"#);
        assert!(p[0].matches(&bob, &get("/version")));
        assert!(!p[0].matches(&bob, &get("/version/x")));
    }

    #[test]
    fn impersonation_needs_the_impersonate_verb_on_each_identity() {
        let auth = Auth {
            tokens: None,
            policies: Some(
                [
                    r#"{"user": "proxy", "resource": "users", "namespace": "*", "apiGroup": ""}"#,
                    r#"{"user": "proxy", "resource": "groups", "namespace": "*", "apiGroup": ""}"#,
                    r#"{"user": "proxy", "resource": "serviceaccounts", "namespace": "ci", "apiGroup": ""}"#,
                    r#"{"user": "ids", "resource": "users", "namespace": "*", "apiGroup": ""}"#,
                    r#"{"user": "ids", "resource": "uids", "namespace": "*", "apiGroup": "authentication.k8s.io"}"#,
                    r#"{"user": "ids", "resource": "userextras", "namespace": "*", "apiGroup": "authentication.k8s.io"}"#,
                    r#"{"user": "reader", "resource": "*", "namespace": "*", "apiGroup": "*", "readonly": true}"#,
                ]
                .iter()
                .flat_map(|spec| policy(spec))
                .collect(),
            ),
            client_certificates: false,
            service_accounts: None,
            jwt: None,
            token_webhook: None,
            request_header: None,
            modes: vec![AuthorizationMode::Abac],
            rbac: None,
            authz_webhook: None,
        };
        let headers = |pairs: &[(&'static str, &'static str)]| {
            let mut map = HeaderMap::new();
            for (name, value) in pairs {
                map.append(*name, value.parse().unwrap());
            }
            map
        };
        let proxy = user("proxy", &[]);
        // No headers: the caller itself.
        assert_eq!(
            auth.impersonate(proxy.clone(), &HeaderMap::new()).unwrap(),
            proxy
        );
        let alice = auth
            .impersonate(
                proxy.clone(),
                &headers(&[("impersonate-user", "alice"), ("impersonate-group", "dev")]),
            )
            .unwrap();
        assert_eq!(alice.name, "alice");
        assert_eq!(alice.groups, ["dev", "system:authenticated"]);
        // uids are not granted to the proxy; a read-only line never grants impersonation.
        let error = auth
            .impersonate(
                proxy.clone(),
                &headers(&[("impersonate-user", "alice"), ("impersonate-uid", "u1")]),
            )
            .unwrap_err();
        assert_eq!(error.code, 403);
        assert!(
            error
                .message
                .contains("cannot impersonate resource \"uids\""),
            "{}",
            error.message
        );
        let error = auth
            .impersonate(
                user("reader", &[]),
                &headers(&[("impersonate-user", "alice")]),
            )
            .unwrap_err();
        assert_eq!(error.code, 403);
        assert!(
            error
                .message
                .starts_with("users \"alice\" is forbidden: User \"reader\" cannot impersonate"),
            "{}",
            error.message
        );
        for bad in [
            headers(&[("impersonate-group", "dev")]),
            headers(&[("impersonate-user", "")]),
        ] {
            assert_eq!(auth.impersonate(proxy.clone(), &bad).unwrap_err().code, 400);
        }
        // A service account is checked as `serviceaccounts` in its namespace (kube's text),
        // and gets its groups unless some are given.
        let builder = auth
            .impersonate(
                proxy.clone(),
                &headers(&[("impersonate-user", "system:serviceaccount:ci:builder")]),
            )
            .unwrap();
        assert_eq!(
            builder.groups,
            [
                "system:serviceaccounts",
                "system:serviceaccounts:ci",
                "system:authenticated"
            ]
        );
        let error = auth
            .impersonate(
                proxy.clone(),
                &headers(&[("impersonate-user", "system:serviceaccount:prod:builder")]),
            )
            .unwrap_err();
        assert_eq!(
            (error.code, error.message.as_str()),
            (
                403,
                "serviceaccounts \"builder\" is forbidden: User \"proxy\" cannot impersonate resource \"serviceaccounts\" in API group \"\" in the namespace \"prod\": No policy matched."
            )
        );
        // Not a valid service account name: a user, checked as `users`.
        let odd = auth
            .impersonate(
                proxy.clone(),
                &headers(&[("impersonate-user", "system:serviceaccount:Bad:builder")]),
            )
            .unwrap();
        assert_eq!(odd.groups, ["system:authenticated"]);
        // uids and user extras are `authentication.k8s.io` resources (an extra's key its
        // subresource); extras allowed are still refused (not carried here).
        let error = auth
            .impersonate(
                user("reader", &[]),
                &headers(&[
                    ("impersonate-user", "alice"),
                    ("impersonate-extra-scopes", "x"),
                ]),
            )
            .unwrap_err();
        assert_eq!(error.code, 403);
        let error = auth
            .impersonate(
                proxy.clone(),
                &headers(&[
                    ("impersonate-user", "alice"),
                    ("impersonate-extra-scopes", "x"),
                ]),
            )
            .unwrap_err();
        assert_eq!(
            (error.code, error.message.as_str()),
            (
                403,
                "userextras.authentication.k8s.io \"x\" is forbidden: User \"proxy\" cannot impersonate resource \"userextras/scopes\" in API group \"authentication.k8s.io\" at the cluster scope: No policy matched."
            )
        );
        let ids = user("ids", &[]);
        let with_uid = auth
            .impersonate(
                ids.clone(),
                &headers(&[("impersonate-user", "alice"), ("impersonate-uid", "u1")]),
            )
            .unwrap();
        assert_eq!(with_uid.uid, "u1");
        // Extras allowed are the user's extra: one key per header name, percent-decoded, its
        // values in order; a key that does not decode is kept as it is.
        let with_extra = auth
            .impersonate(
                ids.clone(),
                &headers(&[
                    ("impersonate-user", "alice"),
                    ("impersonate-extra-scopes", "x"),
                    ("impersonate-extra-scopes", "y"),
                    ("impersonate-extra-example.com%2fteam", "a"),
                    ("impersonate-extra-odd%zz", "b"),
                ]),
            )
            .unwrap();
        assert_eq!(
            with_extra.extra,
            [
                ("example.com/team".to_owned(), vec!["a".to_owned()]),
                ("odd%zz".to_owned(), vec!["b".to_owned()]),
                ("scopes".to_owned(), vec!["x".to_owned(), "y".to_owned()]),
            ]
            .into_iter()
            .collect()
        );
        // `system:unauthenticated` given keeps `system:authenticated` out; anonymous gets it.
        let anonymous = auth
            .impersonate(
                proxy.clone(),
                &headers(&[("impersonate-user", "system:anonymous")]),
            )
            .unwrap();
        assert_eq!(anonymous.groups, ["system:unauthenticated"]);
    }

    #[test]
    fn forbidden_messages_like_kube_apiserver() {
        let defs = watchkeeper_api::builtin_resources();
        let configmaps = defs.iter().find(|d| d.plural == "configmaps").unwrap();
        let auth = Auth {
            tokens: None,
            policies: Some(policy(
                r#"{"user": "alice", "namespace": "*", "resource": "*", "apiGroup": "*"}"#,
            )),
            client_certificates: false,
            service_accounts: None,
            jwt: None,
            token_webhook: None,
            request_header: None,
            modes: vec![AuthorizationMode::Abac],
            rbac: None,
            authz_webhook: None,
        };
        let bob = user("bob", &[]);
        let error = auth
            .authorize(
                &bob,
                &Attributes::Resource {
                    verb: "list",
                    def: configmaps,
                    namespace: "team",
                    name: "",
                    subresource: "",
                },
            )
            .unwrap_err();
        assert_eq!(error.code, 403);
        assert_eq!(
            error.message,
            "configmaps is forbidden: User \"bob\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"team\": No policy matched."
        );
        let error = auth
            .authorize(
                &bob,
                &Attributes::Resource {
                    verb: "get",
                    def: configmaps,
                    namespace: "",
                    name: "x",
                    subresource: "status",
                },
            )
            .unwrap_err();
        assert!(
            error.message.starts_with("configmaps \"x\" is forbidden: User \"bob\" cannot get resource \"configmaps/status\" in API group \"\" at the cluster scope"),
            "{}",
            error.message
        );
        let error = auth
            .authorize(
                &bob,
                &Attributes::NonResource {
                    verb: "get",
                    path: "/metrics",
                },
            )
            .unwrap_err();
        assert_eq!(
            error.message,
            "forbidden: User \"bob\" cannot get path \"/metrics\": No policy matched."
        );
        assert!(
            auth.authorize(
                &bob,
                &Attributes::NonResource {
                    verb: "get",
                    path: "/healthz"
                }
            )
            .is_ok()
        );
    }

    #[test]
    fn the_chain_runs_in_order_and_joins_the_reasons() {
        let defs = watchkeeper_api::builtin_resources();
        let configmaps = defs.iter().find(|d| d.plural == "configmaps").unwrap();
        let list = Attributes::Resource {
            verb: "list",
            def: configmaps,
            namespace: "team",
            name: "",
            subresource: "",
        };
        let chain = |modes: &[AuthorizationMode]| {
            Auth {
                policies: Some(policy(
                    r#"{"user": "alice", "namespace": "*", "resource": "*", "apiGroup": "*"}"#,
                )),
                ..Auth::none()
            }
            .with_authorization(modes)
        };
        use AuthorizationMode::{Abac, AlwaysAllow, AlwaysDeny, Rbac};
        let bob = user("bob", &["system:authenticated"]);
        assert_eq!(
            chain(&[AlwaysDeny, Abac, Rbac]).decide(&bob, &list),
            Decision::Denied("Everything is forbidden.\nNo policy matched.".to_owned())
        );
        let error = chain(&[AlwaysDeny, Abac])
            .authorize(&bob, &list)
            .unwrap_err();
        assert_eq!(
            error.message,
            "configmaps is forbidden: User \"bob\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"team\": Everything is forbidden.\nNo policy matched."
        );
        // RBAC with nothing bound gives no reason: kube's message ends after the scope.
        let error = chain(&[Rbac]).authorize(&bob, &list).unwrap_err();
        assert!(
            error.message.ends_with("in the namespace \"team\""),
            "{}",
            error.message
        );
        // A later mode allows; an earlier one's lack of opinion does not deny.
        assert_eq!(
            chain(&[AlwaysDeny, AlwaysAllow]).decide(&bob, &list),
            Decision::Allowed
        );
        assert_eq!(
            chain(&[AlwaysDeny, Abac]).decide(&user("alice", &[]), &list),
            Decision::Allowed
        );
        // system:masters and the open paths are allowed before any mode.
        assert_eq!(
            chain(&[AlwaysDeny]).decide(&user("root", &["system:masters"]), &list),
            Decision::Allowed
        );
        let healthz = Attributes::NonResource {
            verb: "get",
            path: "/healthz",
        };
        assert_eq!(
            chain(&[AlwaysDeny]).decide(&bob, &healthz),
            Decision::Allowed
        );
        // Rules for SelfSubjectRulesReview: each mode's in order.
        let rules = chain(&[AlwaysDeny, Abac, AlwaysAllow]).rules_for(&user("alice", &[]), "team");
        assert_eq!(rules.resource.len(), 2);
        assert_eq!(rules.resource[0].resources, ["*"]);
        assert_eq!(rules.resource[0].verbs, ["*"]);
        assert!(
            chain(&[AlwaysDeny])
                .rules_for(&bob, "team")
                .resource
                .is_empty()
        );
    }

    #[test]
    fn malformed_policy_lines_are_numbered() {
        for (text, line, what) in [
            ("# c\n{not json\n", 2, "line 2: "),
            (
                "{\"apiVersion\": \"v1\", \"kind\": \"Policy\", \"spec\": {\"user\": \"a\"}}\n",
                1,
                "expected apiVersion",
            ),
            (
                &format!(
                    "\n{{\"apiVersion\": \"{ABAC_API_VERSION}\", \"kind\": \"Policy\", \"spec\": {{\"usr\": \"a\"}}}}\n"
                ),
                2,
                "unknown field",
            ),
            (
                &format!(
                    "{{\"apiVersion\": \"{ABAC_API_VERSION}\", \"kind\": \"Policy\", \"spec\": {{\"namespace\": \"*\"}}}}\n"
                ),
                1,
                "neither a user nor a group",
            ),
        ] {
            let error = parse_policy_file(text).unwrap_err().to_string();
            assert!(error.starts_with(&format!("line {line}: ")), "{error}");
            assert!(error.contains(what), "{error}");
        }
    }
}

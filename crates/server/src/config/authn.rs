//! JWT (OIDC) authenticators: kube-apiserver 1.33's `--authentication-config`
//! (`AuthenticationConfiguration`, `apiserver.config.k8s.io/v1beta1` or `v1alpha1`) and its
//! legacy `--oidc-*` flags, read and validated at start ([`JwtConfig`]); the authenticator
//! itself is `crate::auth::jwt`.
//!
//! ## Guarantees
//! - A configuration kube-apiserver refuses is refused at start, with kube's validation words
//!   (`jwt[0].issuer.url: Invalid value: "http://x": URL scheme must be https`; several errors
//!   as kube's aggregate, `[e1, e2]`): issuer URL and `discoveryURL` (https, no user, query or
//!   fragment, different from each other, not a service account issuer), audiences (at least
//!   one, none empty or repeated, `audienceMatchPolicy` `MatchAny` or empty for one), the
//!   `certificateAuthority` PEM, claim validation rules (`claim` or `expression`, not both, no
//!   repeats), claim mappings (`username` needs a `claim` or `expression`, `prefix` required
//!   with `claim`), at most 64 authenticators, no repeated issuer or discovery URL. Unknown
//!   fields are refused (kube decodes strictly).
//! - The legacy flags are kube's: `--oidc-issuer-url` and `--oidc-client-id` together
//!   (`oidc-issuer-url and oidc-client-id must be specified together when any oidc-* flags
//!   are set`), mutually exclusive with `--authentication-config` (`authentication-config
//!   file and oidc-* flags are mutually exclusive`); they make the authenticator kube makes:
//!   username claim `--oidc-username-claim` (default `sub`) with the prefix
//!   `--oidc-username-prefix`, else `<issuer URL>#` unless the claim is `email` (`-`: no
//!   prefix); groups `--oidc-groups-claim` with `--oidc-groups-prefix`; each
//!   `--oidc-required-claim key=value` a claim validation rule; `--oidc-ca-file` the CA;
//!   `--oidc-signing-algs` (default `RS256`) the accepted algorithms. With the file, every
//!   algorithm is accepted (as kube).
//! - Bounds: `--jwt-token-bytes-max`, `--jwt-keys-refresh-interval-ms`,
//!   `--jwt-issuer-timeout-ms`, `--jwt-issuer-response-bytes-max` (see the flags).
//!
//! - CEL expressions (claim validation rules, username, groups, uid over `claims`; user
//!   validation rules over `user`) are compiled at start (`...: Invalid value: "<expr>":
//!   compilation failed: ERROR: ...`); a username expression reading `claims.email` needs
//!   `claims.email_verified` read by it or a claim validation rule (kube's rule).
//!
//!   `extra` keys are checked as kube's (domain-prefixed, lowercase, not under `k8s.io` or
//!   `kubernetes.io`, no repeats) and their `valueExpression`s compiled.
//!
//! ## Differences from kube
//! - The `anonymous` section is refused at start with `anonymous: Unsupported value: not
//!   supported by watchkeeper`.
//! - `ES512` is not accepted (the JWS library in the tree does not verify it): refused in
//!   `--oidc-signing-algs`, and a token signed so is refused (401).
//! - The file is read once at start (kube reloads it when it changes).

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use watchkeeper_api::cel_rules::authentication::{self, Expression, Variable};

use super::{ConfigError, ServeArgs};

/// The flag of the structured configuration.
pub(super) const AUTHENTICATION_CONFIG_FLAG: &str = "--authentication-config";

/// The most JWT authenticators (kube's validation bound).
pub(super) const AUTHENTICATORS_MAX: usize = 64;

/// The algorithms accepted with `--authentication-config` (kube's `AllValidSigningAlgorithms`
/// but `ES512`, see the module's differences).
pub(super) const ALL_ALGORITHMS: [&str; 8] = [
    "RS256", "RS384", "RS512", "ES256", "ES384", "PS256", "PS384", "PS512",
];

/// `AuthenticationConfiguration` (the fields watchkeeper reads).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct AuthenticationConfiguration {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    jwt: Vec<JwtAuthenticator>,
    #[serde(default)]
    anonymous: Option<serde_json::Value>,
}

/// One `jwt` entry: kube's `JWTAuthenticator`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JwtAuthenticator {
    /// `issuer`.
    #[serde(default)]
    pub issuer: Issuer,
    /// `claimValidationRules`.
    #[serde(default)]
    pub claim_validation_rules: Vec<ClaimValidationRule>,
    /// `claimMappings`.
    #[serde(default)]
    pub claim_mappings: ClaimMappings,
    /// `userValidationRules`.
    #[serde(default)]
    pub user_validation_rules: Vec<UserValidationRule>,
}

/// kube's `UserValidationRule`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UserValidationRule {
    /// `expression`, over `user`.
    #[serde(default)]
    pub expression: String,
    /// `message`.
    #[serde(default)]
    pub message: String,
}

/// kube's `Issuer`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Issuer {
    /// `url`: the tokens' `iss`, and where discovery is unless `discoveryURL`.
    #[serde(default)]
    pub url: String,
    /// `discoveryURL`.
    #[serde(default, rename = "discoveryURL")]
    pub discovery_url: Option<String>,
    /// `certificateAuthority`: PEM; empty: the system's roots.
    #[serde(default)]
    pub certificate_authority: String,
    /// `audiences`.
    #[serde(default)]
    pub audiences: Vec<String>,
    /// `audienceMatchPolicy`.
    #[serde(default)]
    pub audience_match_policy: String,
}

/// kube's `ClaimValidationRule`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClaimValidationRule {
    /// `claim`.
    #[serde(default)]
    pub claim: String,
    /// `requiredValue`.
    #[serde(default)]
    pub required_value: String,
    /// `expression`, over `claims`.
    #[serde(default)]
    pub expression: String,
    /// `message`.
    #[serde(default)]
    pub message: String,
}

/// kube's `ClaimMappings`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClaimMappings {
    /// `username`.
    #[serde(default)]
    pub username: PrefixedClaimOrExpression,
    /// `groups`.
    #[serde(default)]
    pub groups: PrefixedClaimOrExpression,
    /// `uid`.
    #[serde(default)]
    pub uid: ClaimOrExpression,
    /// `extra`.
    #[serde(default)]
    pub extra: Vec<ExtraMapping>,
}

/// kube's `ExtraMapping`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExtraMapping {
    /// `key`: a lowercase, domain-prefixed path (not under `k8s.io` or `kubernetes.io`).
    #[serde(default)]
    pub key: String,
    /// `valueExpression`, over `claims`: a string or a list of strings.
    #[serde(default)]
    pub value_expression: String,
}

/// kube's `IsDomainPrefixedPath` errors for `key`.
fn domain_prefixed_path(key: &str, path: &str, errors: &mut Vec<String>) {
    if key.is_empty() {
        errors.push(required(path, ""));
        return;
    }
    let Some((domain, rest)) = key.split_once('/') else {
        errors.push(invalid(
            path,
            key,
            "must be a domain-prefixed path (such as \"acme.io/foo\")",
        ));
        return;
    };
    if domain.is_empty() || rest.is_empty() {
        errors.push(invalid(
            path,
            key,
            "must be a domain-prefixed path (such as \"acme.io/foo\")",
        ));
        return;
    }
    if watchkeeper_api::validate_dns1123_subdomain(domain).is_err() {
        errors.push(invalid(path, domain, "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"));
    }
    if !rest
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
    {
        errors.push(invalid(
            path,
            key,
            "Invalid path: must contain only alphanumeric characters, '-', '_', '.' or '/'",
        ));
    }
}

/// kube's `PrefixedClaimOrExpression`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PrefixedClaimOrExpression {
    /// `claim`.
    #[serde(default)]
    pub claim: String,
    /// `prefix` (required with `claim`; may be empty).
    #[serde(default)]
    pub prefix: Option<String>,
    /// `expression`, over `claims`.
    #[serde(default)]
    pub expression: String,
}

/// kube's `ClaimOrExpression`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClaimOrExpression {
    /// `claim`.
    #[serde(default)]
    pub claim: String,
    /// `expression`, over `claims`.
    #[serde(default)]
    pub expression: String,
}

/// The JWT authenticators and their bounds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JwtConfig {
    /// The authenticators, validated, in order.
    pub authenticators: Vec<JwtAuthenticator>,
    /// The accepted signing algorithms (kube's names).
    pub signing_algs: Vec<String>,
    /// `--jwt-token-bytes-max`: a longer bearer token is not parsed as a JWT.
    pub token_bytes_max: usize,
    /// `--jwt-keys-refresh-interval-ms`: the least time between two fetches of an issuer's
    /// keys asked for by tokens.
    pub keys_refresh_interval: Duration,
    /// `--jwt-issuer-timeout-ms`: one discovery or JWKS fetch, connection included.
    pub issuer_timeout: Duration,
    /// `--jwt-issuer-response-bytes-max`: the most bytes of a discovery or JWKS answer read.
    pub issuer_response_bytes_max: usize,
}

impl JwtConfig {
    /// Whether any authenticator is configured.
    #[must_use]
    pub fn is_enabled(&self) -> bool {
        !self.authenticators.is_empty()
    }
}

/// A kube field error: `path: Kind: "value": detail`.
fn invalid(path: &str, value: &str, detail: &str) -> String {
    format!("{path}: Invalid value: {value:?}: {detail}")
}

fn required(path: &str, detail: &str) -> String {
    format!("{path}: Required value: {detail}")
}

fn duplicate(path: &str, value: &str) -> String {
    format!("{path}: Duplicate value: {value:?}")
}

fn unsupported(path: &str) -> String {
    format!("{path}: Unsupported value: not supported by watchkeeper")
}

/// Compiles `expression` over `variable`, or pushes kube's compilation error.
fn compiles(
    expression: &str,
    variable: Variable,
    path: &str,
    errors: &mut Vec<String>,
) -> Option<Expression> {
    match authentication::compile(expression, variable) {
        Ok(compiled) => Some(compiled),
        Err(e) => {
            errors.push(invalid(
                path,
                expression,
                &format!("compilation failed: {e}"),
            ));
            None
        }
    }
}

/// What the validation learnt of the expressions: kube's `usesEmailClaim` and
/// `usesEmailVerifiedClaim`.
#[derive(Default)]
struct EmailUse {
    email: bool,
    email_verified: bool,
}

/// kube's `validateURL`.
fn validate_url(url: &str, disallowed: &[String], path: &str, errors: &mut Vec<String>) {
    if disallowed.iter().any(|d| d == url) {
        errors.push(invalid(
            path,
            url,
            &format!(
                "URL must not overlap with disallowed issuers: [{}]",
                disallowed.join(" ")
            ),
        ));
    }
    let (before_fragment, fragment) = url.split_once('#').unwrap_or((url, ""));
    let (before_query, query) = before_fragment
        .split_once('?')
        .unwrap_or((before_fragment, ""));
    let Ok(parsed) = before_query.parse::<axum::http::Uri>() else {
        errors.push(invalid(path, url, "invalid URL"));
        return;
    };
    if parsed.scheme_str() != Some("https") || parsed.host().is_none() {
        errors.push(invalid(path, url, "URL scheme must be https"));
    }
    if parsed.authority().is_some_and(|a| a.as_str().contains('@')) {
        errors.push(invalid(
            path,
            url,
            "URL must not contain a username or password",
        ));
    }
    if !query.is_empty() {
        errors.push(invalid(path, url, "URL must not contain a query"));
    }
    if !fragment.is_empty() {
        errors.push(invalid(path, url, "URL must not contain a fragment"));
    }
}

/// Whether `pem` holds at least one certificate that parses.
fn ca_parses(pem: &str) -> Result<(), String> {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;
    let mut found = 0;
    for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
        let cert = cert.map_err(|e| {
            format!("data does not contain any valid RSA or ECDSA certificates: {e}")
        })?;
        x509_parser::parse_x509_certificate(&cert).map_err(|e| {
            format!("data does not contain any valid RSA or ECDSA certificates: {e}")
        })?;
        found += 1;
    }
    if found == 0 {
        return Err("data does not contain any valid RSA or ECDSA certificates".to_owned());
    }
    Ok(())
}

fn validate_prefixed(
    mapping: &PrefixedClaimOrExpression,
    path: &str,
    claim_required: bool,
    errors: &mut Vec<String>,
) -> Option<Expression> {
    match (mapping.claim.is_empty(), mapping.expression.is_empty()) {
        (false, false) => errors.push(invalid(path, "", "claim and expression can't both be set")),
        (true, true) if claim_required => {
            errors.push(required(path, "claim or expression is required"));
        }
        (true, false) => {
            if let Some(prefix) = &mapping.prefix {
                errors.push(invalid(
                    &format!("{path}.prefix"),
                    prefix,
                    "prefix can't be set when expression is set",
                ));
            }
            return compiles(
                &mapping.expression,
                Variable::Claims,
                &format!("{path}.expression"),
                errors,
            );
        }
        (false, true) if mapping.prefix.is_none() => errors.push(required(
            &format!("{path}.prefix"),
            "prefix is required when claim is set. It can be set to an empty string to disable prefixing",
        )),
        _ => {}
    }
    None
}

/// kube's `validateJWTAuthenticator` (claims forms; expressions refused).
fn validate_authenticator(
    a: &JwtAuthenticator,
    path: &str,
    disallowed: &[String],
    errors: &mut Vec<String>,
) {
    let issuer = format!("{path}.issuer");
    if a.issuer.url.is_empty() {
        errors.push(required(&format!("{issuer}.url"), "URL is required"));
    } else {
        validate_url(&a.issuer.url, disallowed, &format!("{issuer}.url"), errors);
    }
    if let Some(discovery) = a.issuer.discovery_url.as_deref().filter(|d| !d.is_empty()) {
        let at = format!("{issuer}.discoveryURL");
        if !a.issuer.url.is_empty()
            && a.issuer.url.trim_end_matches('/') == discovery.trim_end_matches('/')
        {
            errors.push(invalid(
                &at,
                discovery,
                "discoveryURL must be different from URL",
            ));
        }
        validate_url(discovery, &[], &at, errors);
    }
    let audiences = format!("{issuer}.audiences");
    if a.issuer.audiences.is_empty() {
        errors.push(required(
            &audiences,
            &format!("at least one {audiences} is required"),
        ));
    } else {
        let mut seen = std::collections::HashSet::new();
        for (i, audience) in a.issuer.audiences.iter().enumerate() {
            if audience.is_empty() {
                errors.push(required(
                    &format!("{audiences}[{i}]"),
                    "audience can't be empty",
                ));
            }
            if !seen.insert(audience) {
                errors.push(duplicate(&format!("{audiences}[{i}]"), audience));
            }
        }
        let policy = &a.issuer.audience_match_policy;
        let at = format!("{issuer}.audienceMatchPolicy");
        if a.issuer.audiences.len() > 1 && policy != "MatchAny" {
            errors.push(invalid(
                &at,
                policy,
                "audienceMatchPolicy must be MatchAny for multiple audiences",
            ));
        }
        if a.issuer.audiences.len() == 1 && !policy.is_empty() && policy != "MatchAny" {
            errors.push(invalid(
                &at,
                policy,
                "audienceMatchPolicy must be empty or MatchAny for single audience",
            ));
        }
    }
    if !a.issuer.certificate_authority.is_empty()
        && let Err(e) = ca_parses(&a.issuer.certificate_authority)
    {
        errors.push(invalid(
            &format!("{issuer}.certificateAuthority"),
            "<omitted>",
            &e,
        ));
    }
    let mut email = EmailUse::default();
    let mut seen = std::collections::HashSet::new();
    let mut seen_expressions = std::collections::HashSet::new();
    for (i, rule) in a.claim_validation_rules.iter().enumerate() {
        let at = format!("{path}.claimValidationRules[{i}]");
        match (rule.claim.is_empty(), rule.expression.is_empty()) {
            (false, false) => {
                errors.push(invalid(
                    &at,
                    &rule.claim,
                    "claim and expression can't both be set",
                ));
            }
            (true, true) => errors.push(required(&at, "claim or expression is required")),
            (false, true) => {
                if !rule.message.is_empty() {
                    errors.push(invalid(
                        &format!("{at}.message"),
                        &rule.message,
                        "message can't be set when claim is set",
                    ));
                }
                if !seen.insert(&rule.claim) {
                    errors.push(duplicate(&format!("{at}.claim"), &rule.claim));
                }
            }
            (true, false) => {
                if !rule.required_value.is_empty() {
                    errors.push(invalid(
                        &format!("{at}.requiredValue"),
                        &rule.required_value,
                        "requiredValue can't be set when expression is set",
                    ));
                }
                if !seen_expressions.insert(&rule.expression) {
                    errors.push(duplicate(&format!("{at}.expression"), &rule.expression));
                    continue;
                }
                if let Some(compiled) = compiles(
                    &rule.expression,
                    Variable::Claims,
                    &format!("{at}.expression"),
                    errors,
                ) {
                    email.email_verified |= compiled.selects("email_verified");
                }
            }
        }
    }
    let mappings = format!("{path}.claimMappings");
    if let Some(compiled) = validate_prefixed(
        &a.claim_mappings.username,
        &format!("{mappings}.username"),
        true,
        errors,
    ) {
        email.email |= compiled.selects("email");
        email.email_verified |= compiled.selects("email_verified");
    }
    validate_prefixed(
        &a.claim_mappings.groups,
        &format!("{mappings}.groups"),
        false,
        errors,
    );
    let uid = &a.claim_mappings.uid;
    if !uid.claim.is_empty() && !uid.expression.is_empty() {
        errors.push(invalid(
            &format!("{mappings}.uid"),
            "",
            "claim and expression can't both be set",
        ));
    } else if !uid.expression.is_empty() {
        compiles(
            &uid.expression,
            Variable::Claims,
            &format!("{mappings}.uid.expression"),
            errors,
        );
    }
    let mut seen_keys = std::collections::HashSet::new();
    for (i, mapping) in a.claim_mappings.extra.iter().enumerate() {
        let at = format!("{mappings}.extra[{i}]");
        let key_at = format!("{at}.key");
        domain_prefixed_path(&mapping.key, &key_at, errors);
        if mapping.key != mapping.key.to_lowercase() {
            errors.push(invalid(&key_at, &mapping.key, "key must be lowercase"));
        }
        let domain = mapping.key.split_once('/').map_or("", |(d, _)| d);
        if ["kubernetes.io", "k8s.io"]
            .iter()
            .any(|reserved| domain == *reserved || domain.ends_with(&format!(".{reserved}")))
        {
            errors.push(invalid(
                &key_at,
                &mapping.key,
                "k8s.io, kubernetes.io and their subdomains are reserved for Kubernetes use",
            ));
        }
        if !seen_keys.insert(&mapping.key) {
            errors.push(duplicate(&key_at, &mapping.key));
            continue;
        }
        if mapping.value_expression.is_empty() {
            errors.push(required(
                &format!("{at}.valueExpression"),
                "valueExpression is required",
            ));
            continue;
        }
        if let Some(compiled) = compiles(
            &mapping.value_expression,
            Variable::Claims,
            &format!("{at}.valueExpression"),
            errors,
        ) {
            email.email_verified |= compiled.selects("email_verified");
        }
    }
    if email.email && !email.email_verified {
        errors.push(invalid(
            &format!("{mappings}.username.expression"),
            &a.claim_mappings.username.expression,
            "claims.email_verified must be used in claimMappings.username.expression or claimMappings.extra[*].valueExpression or claimValidationRules[*].expression when claims.email is used in claimMappings.username.expression",
        ));
    }
    let mut seen = std::collections::HashSet::new();
    for (i, rule) in a.user_validation_rules.iter().enumerate() {
        let at = format!("{path}.userValidationRules[{i}]");
        if rule.expression.is_empty() {
            errors.push(required(
                &format!("{at}.expression"),
                "expression is required",
            ));
            continue;
        }
        if !seen.insert(&rule.expression) {
            errors.push(duplicate(&format!("{at}.expression"), &rule.expression));
            continue;
        }
        compiles(
            &rule.expression,
            Variable::User,
            &format!("{at}.expression"),
            errors,
        );
    }
}

/// kube's `ValidateAuthenticationConfiguration` over `authenticators`: `Ok` or the errors as
/// kube's aggregate prints them.
fn validate(authenticators: &[JwtAuthenticator], disallowed: &[String]) -> Result<(), String> {
    let mut errors = Vec::new();
    if authenticators.len() > AUTHENTICATORS_MAX {
        errors.push(format!(
            "jwt: Too many: {}: must have at most {AUTHENTICATORS_MAX} items",
            authenticators.len()
        ));
    } else {
        let mut issuers = std::collections::HashSet::new();
        let mut discoveries = std::collections::HashSet::new();
        for (i, a) in authenticators.iter().enumerate() {
            let path = format!("jwt[{i}]");
            validate_authenticator(a, &path, disallowed, &mut errors);
            if !issuers.insert(&a.issuer.url) {
                errors.push(duplicate(&format!("{path}.issuer.url"), &a.issuer.url));
            }
            if let Some(d) = a.issuer.discovery_url.as_deref().filter(|d| !d.is_empty())
                && !discoveries.insert(d)
            {
                errors.push(duplicate(&format!("{path}.issuer.discoveryURL"), d));
            }
        }
    }
    match errors.len() {
        0 => Ok(()),
        1 => Err(errors.remove(0)),
        _ => Err(format!("[{}]", errors.join(", "))),
    }
}

/// Reads `--authentication-config`: YAML or JSON, kube's `AuthenticationConfiguration`.
fn read_file(path: &PathBuf) -> Result<Vec<JwtAuthenticator>, String> {
    let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    if bytes.is_empty() {
        return Err("empty config data".to_owned());
    }
    let json = watchkeeper_api::yaml::json_from_yaml_body(&bytes).map_err(|e| e.message)?;
    let config: AuthenticationConfiguration =
        serde_json::from_slice(&json).map_err(|e| format!("strict decoding error: {e}"))?;
    let versions = [
        "apiserver.config.k8s.io/v1beta1",
        "apiserver.config.k8s.io/v1alpha1",
        "apiserver.config.k8s.io/v1",
    ];
    if config.kind != "AuthenticationConfiguration"
        || !versions.contains(&config.api_version.as_str())
    {
        return Err(format!(
            "no kind \"{}\" is registered for version \"{}\" in scheme (want AuthenticationConfiguration of apiserver.config.k8s.io/v1beta1 or v1alpha1)",
            config.kind, config.api_version
        ));
    }
    if config.anonymous.is_some() {
        return Err(unsupported("anonymous"));
    }
    Ok(config.jwt)
}

/// The legacy flags as kube's JWT authenticator (`None` when none is set).
fn from_legacy_flags(args: &ServeArgs) -> Result<Option<JwtAuthenticator>, ConfigError> {
    let flags_set = args.oidc_issuer_url.is_some()
        || args.oidc_client_id.is_some()
        || args.oidc_username_claim.is_some()
        || args.oidc_username_prefix.is_some()
        || args.oidc_groups_claim.is_some()
        || args.oidc_groups_prefix.is_some()
        || args.oidc_required_claim.is_some()
        || args.oidc_ca_file.is_some()
        || args.oidc_signing_algs.is_some();
    if !flags_set {
        return Ok(None);
    }
    if args.authentication_config.is_some() {
        return Err(ConfigError::combination(
            &[AUTHENTICATION_CONFIG_FLAG, "--oidc-issuer-url"],
            "authentication-config file and oidc-* flags are mutually exclusive",
        ));
    }
    let issuer_url = args.oidc_issuer_url.clone().unwrap_or_default();
    let client_id = args.oidc_client_id.clone().unwrap_or_default();
    if issuer_url.is_empty() || client_id.is_empty() {
        return Err(ConfigError::combination(
            &["--oidc-issuer-url", "--oidc-client-id"],
            "oidc-issuer-url and oidc-client-id must be specified together when any oidc-* flags are set",
        ));
    }
    let username_claim = args
        .oidc_username_claim
        .clone()
        .unwrap_or_else(|| "sub".to_owned());
    let given = args.oidc_username_prefix.clone().unwrap_or_default();
    let prefix = if given == "-" {
        String::new()
    } else if given.is_empty() && username_claim != "email" {
        format!("{issuer_url}#")
    } else {
        given
    };
    let mut authenticator = JwtAuthenticator {
        issuer: Issuer {
            url: issuer_url,
            audiences: vec![client_id],
            ..Issuer::default()
        },
        claim_mappings: ClaimMappings {
            username: PrefixedClaimOrExpression {
                claim: username_claim,
                prefix: Some(prefix),
                expression: String::new(),
            },
            ..ClaimMappings::default()
        },
        ..JwtAuthenticator::default()
    };
    if let Some(groups) = args.oidc_groups_claim.clone().filter(|g| !g.is_empty()) {
        authenticator.claim_mappings.groups = PrefixedClaimOrExpression {
            claim: groups,
            prefix: Some(args.oidc_groups_prefix.clone().unwrap_or_default()),
            expression: String::new(),
        };
    }
    for pair in args.oidc_required_claim.iter().flatten() {
        let Some((claim, value)) = pair.split_once('=') else {
            return Err(ConfigError::flag(
                "--oidc-required-claim",
                format!("--oidc-required-claim {pair:?}: must be formatted as key=value"),
            ));
        };
        authenticator
            .claim_validation_rules
            .push(ClaimValidationRule {
                claim: claim.trim().to_owned(),
                required_value: value.trim().to_owned(),
                ..ClaimValidationRule::default()
            });
    }
    if let Some(path) = &args.oidc_ca_file {
        authenticator.issuer.certificate_authority =
            std::fs::read_to_string(path).map_err(|e| {
                ConfigError::flag(
                    "--oidc-ca-file",
                    format!("--oidc-ca-file {}: {e}", path.display()),
                )
            })?;
    }
    Ok(Some(authenticator))
}

/// The JWT authenticators of `args` (`disallowed`: the service account issuers, which no JWT
/// authenticator may claim).
///
/// # Errors
/// Kube's refusal of the file or the flags, or a bound out of its range.
pub(super) fn from_args(args: &ServeArgs, disallowed: &[String]) -> Result<JwtConfig, ConfigError> {
    let token_bytes_max = super::bounded(
        "--jwt-token-bytes-max",
        args.jwt_token_bytes_max,
        super::defaults::JWT_TOKEN_BYTES_MAX,
        1024..=1 << 20,
        "bytes",
    )?;
    let refresh_ms = super::bounded(
        "--jwt-keys-refresh-interval-ms",
        args.jwt_keys_refresh_interval_ms,
        super::defaults::JWT_KEYS_REFRESH_INTERVAL_MS,
        1..=86_400_000,
        "milliseconds",
    )?;
    let timeout_ms = super::bounded(
        "--jwt-issuer-timeout-ms",
        args.jwt_issuer_timeout_ms,
        super::defaults::JWT_ISSUER_TIMEOUT_MS,
        100..=600_000,
        "milliseconds",
    )?;
    let response_max = super::bounded(
        "--jwt-issuer-response-bytes-max",
        args.jwt_issuer_response_bytes_max,
        super::defaults::JWT_ISSUER_RESPONSE_BYTES_MAX,
        1024..=64 << 20,
        "bytes",
    )?;
    let legacy = from_legacy_flags(args)?;
    let (authenticators, signing_algs) = match (&args.authentication_config, legacy) {
        (Some(path), _) => {
            let authenticators = read_file(path).map_err(|e| {
                ConfigError::flag(
                    AUTHENTICATION_CONFIG_FLAG,
                    format!(
                        "failed to load authentication configuration from file {:?}: {e}",
                        path.display().to_string()
                    ),
                )
            })?;
            validate(&authenticators, disallowed)
                .map_err(|e| ConfigError::flag(AUTHENTICATION_CONFIG_FLAG, e))?;
            (
                authenticators,
                ALL_ALGORITHMS.iter().map(|a| (*a).to_owned()).collect(),
            )
        }
        (None, Some(authenticator)) => {
            let algs = args
                .oidc_signing_algs
                .clone()
                .filter(|a| !a.is_empty())
                .unwrap_or_else(|| vec!["RS256".to_owned()]);
            for alg in &algs {
                if alg == "ES512" {
                    return Err(ConfigError::flag(
                        "--oidc-signing-algs",
                        "--oidc-signing-algs ES512: not supported by watchkeeper",
                    ));
                }
                if !ALL_ALGORITHMS.contains(&alg.as_str()) {
                    return Err(ConfigError::flag(
                        "--oidc-signing-algs",
                        format!("oidc: unsupported signing alg: {alg:?}"),
                    ));
                }
            }
            let authenticators = vec![authenticator];
            validate(&authenticators, disallowed)
                .map_err(|e| ConfigError::flag("--oidc-issuer-url", e))?;
            (authenticators, algs)
        }
        (None, None) => (Vec::new(), Vec::new()),
    };
    Ok(JwtConfig {
        authenticators,
        signing_algs,
        token_bytes_max,
        keys_refresh_interval: Duration::from_millis(refresh_ms),
        issuer_timeout: Duration::from_millis(timeout_ms),
        issuer_response_bytes_max: response_max,
    })
}

/// The webhook's configuration (`--authentication-token-webhook-*`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenWebhookConfig {
    /// The kubeconfig naming the webhook.
    pub config_file: PathBuf,
    /// `v1beta1` or `v1`.
    pub version: &'static str,
    /// How long an answer is kept (zero: none is).
    pub cache_ttl: Duration,
    /// The most answers kept.
    pub cache_entries: usize,
    /// The most calls in flight.
    pub calls_max: usize,
}

/// The token webhook's configuration (`--authentication-token-webhook-*`), `None` without
/// `--authentication-token-webhook-config-file`; the kubeconfig is read at start too (kube
/// reads it when it builds the authenticator).
///
/// # Errors
/// kube-apiserver's words for an unsupported version; a kubeconfig that cannot be read; a
/// cache TTL that is not a Go duration; the bounds out of range.
pub(super) fn token_webhook_from_args(
    args: &ServeArgs,
) -> Result<Option<TokenWebhookConfig>, ConfigError> {
    const FILE_FLAG: &str = "--authentication-token-webhook-config-file";
    let cache_entries = super::bounded(
        "--authentication-token-webhook-cache-entries",
        args.authentication_token_webhook_cache_entries,
        super::defaults::TOKEN_WEBHOOK_CACHE_ENTRIES,
        1..=1_000_000,
        "answers",
    )?;
    let calls_max = super::bounded(
        "--authentication-token-webhook-calls-max",
        args.authentication_token_webhook_calls_max,
        super::defaults::TOKEN_WEBHOOK_CALLS_MAX,
        1..=10_000,
        "calls",
    )?;
    let version = match args.authentication_token_webhook_version.as_deref() {
        None | Some("v1beta1") => "v1beta1",
        Some("v1") => "v1",
        Some(other) => {
            return Err(ConfigError::flag(
                "--authentication-token-webhook-version",
                format!(
                    "unsupported authentication webhook version {}, supported versions are \"v1\", \"v1beta1\"",
                    watchkeeper_core::gotext::go_quote(other)
                ),
            ));
        }
    };
    let cache_ttl = match args.authentication_token_webhook_cache_ttl.as_deref() {
        None => super::defaults::TOKEN_WEBHOOK_CACHE_TTL,
        Some(text) if matches!(text.trim(), "0" | "0s") => Duration::ZERO,
        Some(text) => super::limits::parse_go_duration(text).ok_or_else(|| {
            ConfigError::flag(
                "--authentication-token-webhook-cache-ttl",
                format!(
                    "invalid argument {} for \"--authentication-token-webhook-cache-ttl\" flag: time: invalid duration {} (a Go duration such as 2m0s or 30s, 0s for none, at most a day)",
                    watchkeeper_core::gotext::go_quote(text),
                    watchkeeper_core::gotext::go_quote(text)
                ),
            )
        })?,
    };
    let Some(config_file) = &args.authentication_token_webhook_config_file else {
        return Ok(None);
    };
    kube::config::Kubeconfig::read_from(config_file).map_err(|error| {
        ConfigError::flag(
            FILE_FLAG,
            format!("{FILE_FLAG} {}: {error}", config_file.display()),
        )
    })?;
    Ok(Some(TokenWebhookConfig {
        config_file: config_file.clone(),
        version,
        cache_ttl,
        cache_entries,
        calls_max,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn authenticator(url: &str) -> JwtAuthenticator {
        JwtAuthenticator {
            issuer: Issuer {
                url: url.to_owned(),
                audiences: vec!["a".to_owned()],
                ..Issuer::default()
            },
            claim_mappings: ClaimMappings {
                username: PrefixedClaimOrExpression {
                    claim: "sub".to_owned(),
                    prefix: Some(String::new()),
                    expression: String::new(),
                },
                ..ClaimMappings::default()
            },
            ..JwtAuthenticator::default()
        }
    }

    #[test]
    fn kubes_validation_words() {
        assert_eq!(validate(&[authenticator("https://issuer")], &[]), Ok(()));
        assert_eq!(
            validate(&[authenticator("http://issuer")], &[]).unwrap_err(),
            "jwt[0].issuer.url: Invalid value: \"http://issuer\": URL scheme must be https"
        );
        assert_eq!(
            validate(&[authenticator("https://sa")], &["https://sa".to_owned()]).unwrap_err(),
            "jwt[0].issuer.url: Invalid value: \"https://sa\": URL must not overlap with disallowed issuers: [https://sa]"
        );
        let mut no_prefix = authenticator("https://issuer");
        no_prefix.claim_mappings.username.prefix = None;
        no_prefix.issuer.audiences.clear();
        assert_eq!(
            validate(&[no_prefix], &[]).unwrap_err(),
            "[jwt[0].issuer.audiences: Required value: at least one jwt[0].issuer.audiences is required, jwt[0].claimMappings.username.prefix: Required value: prefix is required when claim is set. It can be set to an empty string to disable prefixing]"
        );
        let mut cel = authenticator("https://issuer");
        cel.claim_mappings.username = PrefixedClaimOrExpression {
            expression: "claims.email".to_owned(),
            ..PrefixedClaimOrExpression::default()
        };
        assert_eq!(
            validate(std::slice::from_ref(&cel), &[]).unwrap_err(),
            "jwt[0].claimMappings.username.expression: Invalid value: \"claims.email\": claims.email_verified must be used in claimMappings.username.expression or claimMappings.extra[*].valueExpression or claimValidationRules[*].expression when claims.email is used in claimMappings.username.expression"
        );
        cel.claim_validation_rules.push(ClaimValidationRule {
            expression: "claims.email_verified".to_owned(),
            ..ClaimValidationRule::default()
        });
        assert_eq!(validate(std::slice::from_ref(&cel), &[]), Ok(()));
        cel.claim_mappings.uid.expression = "claims.(".to_owned();
        let error = validate(&[cel], &[]).unwrap_err();
        assert!(
            error.starts_with("jwt[0].claimMappings.uid.expression: Invalid value: \"claims.(\": compilation failed: ERROR: <input>:1:"),
            "{error}"
        );
        let twice = [authenticator("https://i"), authenticator("https://i")];
        assert_eq!(
            validate(&twice, &[]).unwrap_err(),
            "jwt[1].issuer.url: Duplicate value: \"https://i\""
        );
    }
}

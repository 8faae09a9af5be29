//! kube's `ValidateValidatingWebhookConfiguration` / `ValidateMutatingWebhookConfiguration`
//! (`pkg/apis/admissionregistration/validation`, v1 rules), and their defaults
//! (`pkg/apis/admissionregistration/v1/defaults.go`).
//!
//! Checked, with kube's paths and wording: each webhook's `name` (a fully qualified DNS
//! subdomain of at least three segments, unique in its configuration), `rules` (operations,
//! API groups and versions, resources and their wildcards, scope), `failurePolicy`,
//! `matchPolicy`, `sideEffects` (required, `None` or `NoneOnDryRun`), `timeoutSeconds`
//! (1-30), `reinvocationPolicy` (mutating), `clientConfig` (exactly one of `url` — https,
//! a host, no user, query or fragment — or `service` — name, namespace, port, path
//! segments), `admissionReviewVersions` (required, no duplicates, DNS-1035 labels, at least
//! one of `v1`, `v1beta1`) and `matchConditions` (at most 64, names required, qualified and
//! unique, expressions that compile in the admission CEL environment), and `namespaceSelector`
//! and `objectSelector` (apimachinery's `ValidateLabelSelector`: operators, values, label
//! keys and values). Not checked: kube's relaxations on update for configurations stored
//! before a rule tightened (an invalid label value kept in an old selector, say).

use serde_json::{Value, json};

use super::common::{duplicate, fill, invalid, items, not_supported, present, text};
use crate::field::{Cause, required, too_many};

/// kube's admission review versions, in its preference order.
pub const REVIEW_VERSIONS: [&str; 2] = ["v1", "v1beta1"];

/// The defaults kube's v1 `SetDefaults_*Webhook` give each webhook of `configuration`
/// (`mutating`: a MutatingWebhookConfiguration's, with `reinvocationPolicy`).
pub(super) fn defaults(configuration: &mut Value, mutating: bool) {
    let Some(Value::Array(webhooks)) = configuration.get_mut("webhooks") else {
        return;
    };
    for webhook in webhooks.iter_mut().filter_map(Value::as_object_mut) {
        fill(webhook, "failurePolicy", json!("Fail"));
        fill(webhook, "matchPolicy", json!("Equivalent"));
        fill(webhook, "namespaceSelector", json!({}));
        fill(webhook, "objectSelector", json!({}));
        fill(webhook, "timeoutSeconds", json!(10));
        if mutating {
            fill(webhook, "reinvocationPolicy", json!("Never"));
        }
        if let Some(Value::Array(rules)) = webhook.get_mut("rules") {
            for rule in rules.iter_mut().filter_map(Value::as_object_mut) {
                fill(rule, "scope", json!("*"));
            }
        }
        if let Some(service) = webhook
            .get_mut("clientConfig")
            .and_then(|c| c.get_mut("service"))
            .and_then(Value::as_object_mut)
        {
            fill(service, "port", json!(443));
        }
    }
}

/// kube's validation of a webhook configuration (`mutating` for the mutating kind).
pub(super) fn validate(configuration: &Value, mutating: bool, causes: &mut Vec<Cause>) {
    let mut names: Vec<&str> = Vec::new();
    for (index, webhook) in items(configuration, "webhooks").iter().enumerate() {
        let at = format!("webhooks[{index}]");
        validate_webhook(webhook, &at, mutating, causes);
        review_versions(webhook, &format!("{at}.admissionReviewVersions"), causes);
        let name = text(webhook, "name");
        if !name.is_empty() {
            if names.contains(&name) {
                causes.push(duplicate(&format!("{at}.name"), &json!(name)));
            } else {
                names.push(name);
            }
        }
    }
}

fn validate_webhook(webhook: &Value, at: &str, mutating: bool, causes: &mut Vec<Cause>) {
    let name = text(webhook, "name");
    let name_at = format!("{at}.name");
    if name.is_empty() {
        causes.push(required(&name_at, ""));
    } else if let Err(message) = crate::names::validate_dns1123_subdomain(name) {
        causes.push(invalid(&name_at, &json!(name), &message));
    } else if name.split('.').count() < 3 {
        causes.push(invalid(
            &name_at,
            &json!(name),
            "should be a domain with at least three segments separated by dots",
        ));
    }
    for (index, rule) in items(webhook, "rules").iter().enumerate() {
        validate_rule(rule, &format!("{at}.rules[{index}]"), causes);
    }
    let enumerated = |key: &str, supported: &[&str], causes: &mut Vec<Cause>| {
        if let Some(value) = present(webhook, key)
            && !value.as_str().is_some_and(|v| supported.contains(&v))
        {
            causes.push(not_supported(&format!("{at}.{key}"), value, supported));
        }
    };
    enumerated("failurePolicy", &["Fail", "Ignore"], causes);
    enumerated("matchPolicy", &["Equivalent", "Exact"], causes);
    if present(webhook, "sideEffects").is_none() {
        causes.push(required(
            &format!("{at}.sideEffects"),
            "must specify one of None, NoneOnDryRun",
        ));
    }
    enumerated("sideEffects", &["None", "NoneOnDryRun"], causes);
    if let Some(timeout) = present(webhook, "timeoutSeconds")
        && !timeout.as_i64().is_some_and(|t| (1..=30).contains(&t))
    {
        causes.push(invalid(
            &format!("{at}.timeoutSeconds"),
            timeout,
            "the timeout value must be between 1 and 30 seconds",
        ));
    }
    for key in ["namespaceSelector", "objectSelector"] {
        super::pod_spec::label_selector(webhook.get(key), &format!("{at}.{key}"), causes);
    }
    if mutating {
        enumerated("reinvocationPolicy", &["IfNeeded", "Never"], causes);
    }
    client_config(
        present(webhook, "clientConfig").unwrap_or(&Value::Null),
        &format!("{at}.clientConfig"),
        causes,
    );
    match_conditions(webhook, &format!("{at}.matchConditions"), causes);
}

/// kube's `validateRuleWithOperations` (subresources allowed).
fn validate_rule(rule: &Value, at: &str, causes: &mut Vec<Cause>) {
    let listed = |key: &str| -> Vec<&str> {
        items(rule, key)
            .iter()
            .map(|v| v.as_str().unwrap_or(""))
            .collect()
    };
    let operations = listed("operations");
    if operations.is_empty() {
        causes.push(required(&format!("{at}.operations"), ""));
    }
    if operations.len() > 1 && operations.contains(&"*") {
        causes.push(invalid(
            &format!("{at}.operations"),
            &json!(operations),
            "if '*' is present, must not specify other operations",
        ));
    }
    let supported = ["*", "CONNECT", "CREATE", "DELETE", "UPDATE"];
    for (index, operation) in operations.iter().enumerate() {
        if !supported.contains(operation) {
            causes.push(not_supported(
                &format!("{at}.operations[{index}]"),
                &json!(operation),
                &supported,
            ));
        }
    }
    for (key, what) in [("apiGroups", "API groups"), ("apiVersions", "API versions")] {
        let values = listed(key);
        if values.is_empty() {
            causes.push(required(&format!("{at}.{key}"), ""));
        }
        if values.len() > 1 && values.contains(&"*") {
            causes.push(invalid(
                &format!("{at}.{key}"),
                &json!(values),
                &format!("if '*' is present, must not specify other {what}"),
            ));
        }
    }
    for (index, version) in listed("apiVersions").iter().enumerate() {
        if version.is_empty() {
            causes.push(required(&format!("{at}.apiVersions[{index}]"), ""));
        }
    }
    resources(&listed("resources"), &format!("{at}.resources"), causes);
    if let Some(scope) = present(rule, "scope")
        && !matches!(scope.as_str(), Some("*" | "Cluster" | "Namespaced"))
    {
        causes.push(not_supported(
            &format!("{at}.scope"),
            scope,
            &["*", "Cluster", "Namespaced"],
        ));
    }
}

/// kube's `validateResources`.
fn resources(resources: &[&str], at: &str, causes: &mut Vec<Cause>) {
    if resources.is_empty() {
        causes.push(required(at, ""));
    }
    let mut wildcard_subresources: Vec<&str> = Vec::new();
    let mut wildcard_resources: Vec<&str> = Vec::new();
    let (mut double, mut single, mut plain) = (false, false, false);
    for (index, item) in resources.iter().enumerate() {
        let item_at = format!("{at}[{index}]");
        if item.is_empty() {
            causes.push(required(&item_at, ""));
            continue;
        }
        double |= *item == "*/*";
        single |= *item == "*";
        let Some((res, sub)) = item.split_once('/') else {
            plain = *item != "*";
            continue;
        };
        if wildcard_subresources.contains(&res) {
            let detail = format!("if '{res}/*' is present, must not specify {item}");
            causes.push(invalid(&item_at, &json!(item), &detail));
        }
        if wildcard_resources.contains(&sub) {
            let detail = format!("if '*/{sub}' is present, must not specify {item}");
            causes.push(invalid(&item_at, &json!(item), &detail));
        }
        if sub == "*" {
            wildcard_subresources.push(res);
        }
        if res == "*" {
            wildcard_resources.push(sub);
        }
    }
    if resources.len() > 1 && double {
        causes.push(invalid(
            at,
            &json!(resources),
            "if '*/*' is present, must not specify other resources",
        ));
    }
    if single && plain {
        causes.push(invalid(
            at,
            &json!(resources),
            "if '*' is present, must not specify other resources without subresources",
        ));
    }
}

/// kube's `clientConfig` checks: exactly one of `url` (`ValidateWebhookURL`, https forced)
/// or `service` (`ValidateWebhookService`).
fn client_config(config: &Value, at: &str, causes: &mut Vec<Cause>) {
    match (present(config, "url"), present(config, "service")) {
        (Some(url), None) => webhook_url(url.as_str().unwrap_or(""), &format!("{at}.url"), causes),
        (None, Some(service)) => webhook_service(service, &format!("{at}.service"), causes),
        _ => causes.push(required(at, "exactly one of url or service is required")),
    }
}

/// The parts of a URL kube's checks look at (Go's `url.Parse` for the forms a webhook URL
/// takes): scheme, user information, host, query and fragment.
pub(crate) struct UrlParts<'u> {
    pub scheme: &'u str,
    pub user: Option<&'u str>,
    pub host: &'u str,
    pub path: &'u str,
    pub query: &'u str,
    pub fragment: &'u str,
}

/// Splits `url` as Go's `url.Parse` does for `scheme://[user@]host[/path][?query][#fragment]`
/// (without `://`, everything is the path).
pub(crate) fn url_parts(url: &str) -> UrlParts<'_> {
    let (rest, fragment) = url.split_once('#').unwrap_or((url, ""));
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let Some((scheme, after)) = rest.split_once("://") else {
        return UrlParts {
            scheme: "",
            user: None,
            host: "",
            path: rest,
            query,
            fragment,
        };
    };
    let (authority, path) = match after.find('/') {
        Some(slash) => after.split_at(slash),
        None => (after, ""),
    };
    let (user, host) = match authority.rsplit_once('@') {
        Some((user, host)) => (Some(user), host),
        None => (None, authority),
    };
    UrlParts {
        scheme,
        user,
        host,
        path,
        query,
        fragment,
    }
}

fn webhook_url(url: &str, at: &str, causes: &mut Vec<Cause>) {
    const FORM: &str = "; desired format: https://host[/path]";
    let parts = url_parts(url);
    if parts.scheme != "https" {
        let detail = format!("'https' is the only allowed URL scheme{FORM}");
        causes.push(invalid(at, &json!(parts.scheme), &detail));
    }
    if parts.host.is_empty() {
        let detail = format!("host must be specified{FORM}");
        causes.push(invalid(at, &json!(parts.host), &detail));
    }
    if let Some(user) = parts.user {
        causes.push(invalid(
            at,
            &json!(user),
            "user information is not permitted in the URL",
        ));
    }
    if !parts.fragment.is_empty() {
        causes.push(invalid(
            at,
            &json!(parts.fragment),
            "fragments are not permitted in the URL",
        ));
    }
    if !parts.query.is_empty() {
        causes.push(invalid(
            at,
            &json!(parts.query),
            "query parameters are not permitted in the URL",
        ));
    }
}

fn webhook_service(service: &Value, at: &str, causes: &mut Vec<Cause>) {
    if text(service, "name").is_empty() {
        causes.push(required(&format!("{at}.name"), "service name is required"));
    }
    if text(service, "namespace").is_empty() {
        causes.push(required(
            &format!("{at}.namespace"),
            "service namespace is required",
        ));
    }
    if let Some(port) = present(service, "port")
        && !port.as_i64().is_some_and(|p| (1..=65535).contains(&p))
    {
        causes.push(invalid(
            &format!("{at}.port"),
            port,
            "port is not valid: must be between 1 and 65535, inclusive",
        ));
    }
    let path = text(service, "path");
    if path.is_empty() || path == "/" {
        return;
    }
    let path_at = format!("{at}.path");
    if path == "//" {
        causes.push(invalid(
            &path_at,
            &json!(path),
            "segment[0] may not be empty",
        ));
    }
    if !path.starts_with('/') {
        causes.push(invalid(&path_at, &json!(path), "must start with a '/'"));
    }
    let checked = path.get(1..).unwrap_or("");
    let checked = checked.strip_suffix('/').unwrap_or(checked);
    for (index, step) in checked.split('/').enumerate() {
        if step.is_empty() {
            let detail = format!("segment[{index}] may not be empty");
            causes.push(invalid(&path_at, &json!(path), &detail));
        } else if let Err(message) = crate::names::validate_dns1123_subdomain(step) {
            let detail = format!("segment[{index}]: {message}");
            causes.push(invalid(&path_at, &json!(path), &detail));
        }
    }
}

/// kube's `validateAdmissionReviewVersions` (a known version required).
fn review_versions(webhook: &Value, at: &str, causes: &mut Vec<Cause>) {
    let versions: Vec<&str> = items(webhook, "admissionReviewVersions")
        .iter()
        .map(|v| v.as_str().unwrap_or(""))
        .collect();
    if versions.is_empty() {
        causes.push(required(at, "must specify one of v1, v1beta1"));
        return;
    }
    let mut seen: Vec<&str> = Vec::new();
    for (index, version) in versions.iter().enumerate() {
        let version_at = format!("{at}[{index}]");
        if seen.contains(version) {
            causes.push(invalid(&version_at, &json!(version), "duplicate version"));
            continue;
        }
        seen.push(version);
        if let Err(message) = crate::names::validate_dns1035_label(version) {
            causes.push(invalid(&version_at, &json!(version), &message));
        }
    }
    if !versions.iter().any(|v| REVIEW_VERSIONS.contains(v)) {
        causes.push(invalid(
            at,
            &json!(versions),
            "must include at least one of v1, v1beta1",
        ));
    }
}

/// kube's `validateMatchConditions`: at most 64, each named (a qualified name, unique) with
/// an expression that compiles (the admission policies' check,
/// [`crate::admission_policy::expression_errors`]).
fn match_conditions(webhook: &Value, at: &str, causes: &mut Vec<Cause>) {
    let conditions = items(webhook, "matchConditions");
    if conditions.len() > 64 {
        causes.push(too_many(at, conditions.len(), 64));
    }
    let holder = json!({"spec": {"matchConditions": conditions}});
    let mut compiled = crate::admission_policy::expression_errors(&holder).into_iter();
    let mut next = compiled.next();
    let mut names: Vec<&str> = Vec::new();
    for (index, condition) in conditions.iter().enumerate() {
        let condition_at = format!("{at}[{index}]");
        let policy_path = format!("spec.matchConditions[{index}].expression");
        if text(condition, "expression").trim().is_empty() {
            causes.push(required(&format!("{condition_at}.expression"), ""));
        }
        while let Some((path, expression, detail)) = next.take() {
            if path != policy_path {
                next = Some((path, expression, detail));
                break;
            }
            let detail = detail.clone();
            causes.push(invalid(
                &format!("{condition_at}.expression"),
                &json!(expression),
                &detail,
            ));
            next = compiled.next();
        }
        let name = text(condition, "name");
        let name_at = format!("{condition_at}.name");
        if name.is_empty() {
            causes.push(required(&name_at, ""));
        } else if let Err(message) = crate::names::validate_qualified_name(name) {
            causes.push(invalid(&name_at, &json!(name), &message));
        } else if names.contains(&name) {
            causes.push(duplicate(&name_at, &json!(name)));
        } else {
            names.push(name);
        }
    }
}

//! kube-apiserver's audit policy (`audit.k8s.io/v1` `Policy`): read from YAML or JSON,
//! validated with kube's messages (`apis/audit/validation`), and evaluated as kube's
//! `policyRuleEvaluator` does (`audit/policy/checker.go`).
//!
//! ## Guarantees
//! - A policy that kube-apiserver refuses at start is refused here with the same text:
//!   kube's field errors (`rules[0].level: Unsupported value: ...`), `loaded illegal policy
//!   with 0 rules`, each followed by `: from file PATH` and preceded by `loading audit policy
//!   file: `. Unknown fields are ignored, as kube's decoder ignores them.
//! - Evaluation: the rules in order, the first that matches wins; none matching is level
//!   `None`. A rule matches when each of its non-empty lists matches: `users` (the user's
//!   name), `userGroups` (any of its groups), `verbs`, then — a rule with `resources` or
//!   `namespaces` matches resource requests only, one with `nonResourceURLs` non-resource
//!   requests only: `namespaces` (cluster-scoped requests have the namespace `""`),
//!   `resources` (`group` exactly, `resources` by `plural`, `plural/subresource`, `*`,
//!   `*/subresource`, `plural/*`, with `resourceNames`), `nonResourceURLs` (exact, `*`, or a
//!   prefix ending in `*`).
//! - `omitStages`: the policy's and the matched rule's, together; `omitManagedFields`: the
//!   rule's when set, else the policy's.

use std::path::Path;

use serde_json::Value;

/// How much of a request is logged (kube's `Level`, ordered).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Nothing.
    None,
    /// The request's metadata: user, verb, resource, timestamps, status.
    Metadata,
    /// Metadata and the request's body.
    Request,
    /// Metadata, the request's and the response's bodies.
    RequestResponse,
}

impl Level {
    const NAMES: [&'static str; 4] = ["None", "Metadata", "Request", "RequestResponse"];

    /// The level's name, as an event spells it.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    fn parse(name: &str) -> Option<Level> {
        Some(match name {
            "None" => Level::None,
            "Metadata" => Level::Metadata,
            "Request" => Level::Request,
            "RequestResponse" => Level::RequestResponse,
            _ => return None,
        })
    }
}

/// A stage of a request at which an event is written (kube's `Stage`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// As soon as the request is received, before it is handled.
    RequestReceived,
    /// Once the response's headers are sent, for long-running requests (watches).
    ResponseStarted,
    /// Once the response is complete.
    ResponseComplete,
    /// When the handler panicked.
    Panic,
}

impl Stage {
    const NAMES: [&'static str; 4] = [
        "RequestReceived",
        "ResponseStarted",
        "ResponseComplete",
        "Panic",
    ];
    const ALL: [Stage; 4] = [
        Stage::RequestReceived,
        Stage::ResponseStarted,
        Stage::ResponseComplete,
        Stage::Panic,
    ];

    /// The stage's name, as an event spells it.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

/// A set of stages (the stages a request's events leave out).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stages(u8);

impl Stages {
    /// Whether `stage` is in the set.
    #[must_use]
    pub fn contains(self, stage: Stage) -> bool {
        self.0 & stage.bit() != 0
    }

    fn with(self, stage: Stage) -> Stages {
        Stages(self.0 | stage.bit())
    }

    fn union(self, other: Stages) -> Stages {
        Stages(self.0 | other.0)
    }
}

/// A request as the policy sees it (kube's `authorizer.Attributes`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Attributes<'a> {
    /// The user's name; `None` for a request whose authentication failed.
    pub user: Option<&'a str>,
    /// The user's groups.
    pub groups: &'a [String],
    /// kube's verb (`get`, `list`, `watch`, ...; a non-resource request's method in lower case).
    pub verb: &'a str,
    /// Whether the request addresses a resource (`/api/v1/...`, `/apis/g/v/...`).
    pub resource_request: bool,
    /// The namespace (`""` when cluster-scoped).
    pub namespace: &'a str,
    /// The API group (`""` for the core group).
    pub group: &'a str,
    /// The resource's plural.
    pub resource: &'a str,
    /// The subresource, or `""`.
    pub subresource: &'a str,
    /// The object's name, or `""`.
    pub name: &'a str,
    /// The URL path.
    pub path: &'a str,
}

/// What the policy decides for one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    /// The level.
    pub level: Level,
    /// The stages not logged.
    pub omit_stages: Stages,
    /// Whether `metadata.managedFields` is left out of logged objects.
    pub omit_managed_fields: bool,
}

#[derive(Debug, Default)]
struct GroupResources {
    group: String,
    resources: Vec<String>,
    resource_names: Vec<String>,
}

#[derive(Debug)]
struct Rule {
    level: Level,
    users: Vec<String>,
    user_groups: Vec<String>,
    verbs: Vec<String>,
    resources: Vec<GroupResources>,
    namespaces: Vec<String>,
    non_resource_urls: Vec<String>,
    omit_stages: Stages,
    omit_managed_fields: Option<bool>,
}

/// A loaded, validated policy.
#[derive(Debug)]
pub struct Policy {
    rules: Vec<Rule>,
    omit_stages: Stages,
    omit_managed_fields: bool,
}

/// A policy file kube-apiserver would refuse; the text is kube's.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("loading audit policy file: {0}")]
pub struct PolicyError(pub String);

impl Policy {
    /// Reads and validates the policy at `path`.
    ///
    /// # Errors
    /// kube's refusal (see the module docs).
    pub fn load(path: &Path) -> Result<Policy, PolicyError> {
        let bytes = std::fs::read(path).map_err(|error| {
            PolicyError(format!(
                "failed to read file path {:?}: {error}",
                path.display().to_string()
            ))
        })?;
        Policy::from_bytes(&bytes)
            .map_err(|message| PolicyError(format!("{message}: from file {}", path.display())))
    }

    /// Decodes and validates a policy (YAML or JSON).
    ///
    /// # Errors
    /// kube's message, without the file.
    pub fn from_bytes(bytes: &[u8]) -> Result<Policy, String> {
        let json = watchkeeper_api::yaml::json_from_yaml_body(bytes)
            .map_err(|error| format!("failed decoding: {}", error.message))?;
        let value: Value =
            serde_json::from_slice(&json).map_err(|error| format!("failed decoding: {error}"))?;
        let text = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or_default().to_owned();
        let kind = text(value.get("kind"));
        let api_version = text(value.get("apiVersion"));
        if kind.is_empty() {
            return Err(format!(
                "failed decoding: Object 'Kind' is missing in '{}'",
                String::from_utf8_lossy(bytes).trim()
            ));
        }
        if api_version != "audit.k8s.io/v1" || kind != "Policy" {
            let (group, version) = api_version.split_once('/').unwrap_or(("", &api_version));
            return Err(format!(
                "failed decoding: no kind \"{kind}\" is registered for version \"{group}/{version}\" in scheme \"k8s.io/apiserver/pkg/audit/scheme.go:30\""
            ));
        }
        let mut errors = Vec::new();
        let policy_stages = stages(value.get("omitStages"), "omitStages", &mut errors);
        let mut rules = Vec::new();
        for (index, rule) in list(value.get("rules")).iter().enumerate() {
            rules.push(rule_of(rule, &format!("rules[{index}]"), &mut errors));
        }
        match errors.len() {
            0 => {}
            1 => return Err(errors.remove(0)),
            _ => return Err(format!("[{}]", errors.join(", "))),
        }
        if rules.is_empty() {
            return Err("loaded illegal policy with 0 rules".to_owned());
        }
        // kube's `NewPolicyRuleEvaluator`: each rule's stages are the union with the policy's.
        for rule in &mut rules {
            rule.omit_stages = rule.omit_stages.union(policy_stages);
        }
        Ok(Policy {
            rules,
            omit_stages: policy_stages,
            omit_managed_fields: value
                .get("omitManagedFields")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        })
    }

    /// The level and stages of a request (kube's `EvaluatePolicyRule`).
    #[must_use]
    pub fn evaluate(&self, request: &Attributes<'_>) -> Decision {
        for rule in &self.rules {
            if rule.matches(request) {
                return Decision {
                    level: rule.level,
                    omit_stages: rule.omit_stages,
                    omit_managed_fields: rule
                        .omit_managed_fields
                        .unwrap_or(self.omit_managed_fields),
                };
            }
        }
        Decision {
            level: Level::None,
            omit_stages: self.omit_stages,
            omit_managed_fields: false,
        }
    }
}

fn list(value: Option<&Value>) -> &[Value] {
    value.and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

fn strings(value: Option<&Value>) -> Vec<String> {
    list(value)
        .iter()
        .map(|v| v.as_str().unwrap_or_default().to_owned())
        .collect()
}

/// Go's `%#v` of a `[]string`, as kube's field errors print one.
fn go_strings(values: &[String]) -> String {
    let quoted: Vec<String> = values.iter().map(|v| format!("{v:?}")).collect();
    format!("[]string{{{}}}", quoted.join(", "))
}

fn stages(value: Option<&Value>, path: &str, errors: &mut Vec<String>) -> Stages {
    let mut set = Stages::default();
    for (index, name) in strings(value).iter().enumerate() {
        match Stage::ALL.iter().find(|s| s.as_str() == name) {
            Some(stage) => set = set.with(*stage),
            None => errors.push(format!(
                "{path}[{index}]: Invalid value: {name:?}: allowed stages are {}",
                Stage::NAMES.join(",")
            )),
        }
    }
    set
}

fn rule_of(rule: &Value, path: &str, errors: &mut Vec<String>) -> Rule {
    let level_name = rule
        .get("level")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let level = match Level::parse(level_name) {
        Some(level) => level,
        None if level_name.is_empty() => {
            errors.push(format!("{path}.level: Required value"));
            Level::None
        }
        None => {
            let supported: Vec<String> = Level::NAMES.iter().map(|n| format!("{n:?}")).collect();
            errors.push(format!(
                "{path}.level: Unsupported value: {level_name:?}: supported values: {}",
                supported.join(", ")
            ));
            Level::None
        }
    };
    let non_resource_urls = strings(rule.get("nonResourceURLs"));
    for (index, url) in non_resource_urls.iter().enumerate() {
        if url == "*" {
            continue;
        }
        if !url.starts_with('/') {
            errors.push(format!(
                "{path}.nonResourceURLs[{index}]: Invalid value: {url:?}: non-resource URL rules must begin with a '/' character"
            ));
        }
        if !url.is_empty() && url[..url.len() - 1].contains('*') {
            errors.push(format!(
                "{path}.nonResourceURLs[{index}]: Invalid value: {url:?}: non-resource URL wildcards '*' must be the final character of the rule"
            ));
        }
    }
    let mut resources = Vec::new();
    for group_resources in list(rule.get("resources")) {
        let group = group_resources
            .get("group")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        if !group.is_empty()
            && let Err(message) = watchkeeper_api::validate_dns1123_subdomain(&group)
        {
            errors.push(format!(
                "{path}.resources.group: Invalid value: {group:?}: {message}"
            ));
        }
        let entry = GroupResources {
            group,
            resources: strings(group_resources.get("resources")),
            resource_names: strings(group_resources.get("resourceNames")),
        };
        if !entry.resource_names.is_empty() && entry.resources.is_empty() {
            errors.push(format!(
                "{path}.resources.resourceNames: Invalid value: {}: using resourceNames requires at least one resource",
                go_strings(&entry.resource_names)
            ));
        }
        resources.push(entry);
    }
    let omit_stages = stages(
        rule.get("omitStages"),
        &format!("{path}.omitStages"),
        errors,
    );
    let namespaces = strings(rule.get("namespaces"));
    if !non_resource_urls.is_empty() && (!resources.is_empty() || !namespaces.is_empty()) {
        errors.push(format!(
            "{path}.nonResourceURLs: Invalid value: {}: rules cannot apply to both regular resources and non-resource URLs",
            go_strings(&non_resource_urls)
        ));
    }
    Rule {
        level,
        users: strings(rule.get("users")),
        user_groups: strings(rule.get("userGroups")),
        verbs: strings(rule.get("verbs")),
        resources,
        namespaces,
        non_resource_urls,
        omit_stages,
        omit_managed_fields: rule.get("omitManagedFields").and_then(Value::as_bool),
    }
}

fn has(list: &[String], value: &str) -> bool {
    list.iter().any(|v| v == value)
}

impl Rule {
    fn matches(&self, request: &Attributes<'_>) -> bool {
        if !self.users.is_empty() && !request.user.is_some_and(|user| has(&self.users, user)) {
            return false;
        }
        if !self.user_groups.is_empty()
            && (request.user.is_none() || !request.groups.iter().any(|g| has(&self.user_groups, g)))
        {
            return false;
        }
        if !self.verbs.is_empty() && !has(&self.verbs, request.verb) {
            return false;
        }
        if !self.namespaces.is_empty() || !self.resources.is_empty() {
            return self.matches_resource(request);
        }
        if !self.non_resource_urls.is_empty() {
            return !request.resource_request
                && self
                    .non_resource_urls
                    .iter()
                    .any(|spec| path_matches(request.path, spec));
        }
        true
    }

    fn matches_resource(&self, request: &Attributes<'_>) -> bool {
        if !request.resource_request {
            return false;
        }
        if !self.namespaces.is_empty() && !has(&self.namespaces, request.namespace) {
            return false;
        }
        if self.resources.is_empty() {
            return true;
        }
        let (resource, subresource) = (request.resource, request.subresource);
        self.resources
            .iter()
            .filter(|gr| gr.group == request.group)
            .any(|gr| {
                gr.resources.is_empty()
                    || gr.resources.iter().any(|spec| {
                        (gr.resource_names.is_empty() || has(&gr.resource_names, request.name))
                            && resource_matches(spec, resource, subresource)
                    })
            })
    }
}

/// A `resources` entry against `resource` and `subresource` (`""` when none).
fn resource_matches(spec: &str, resource: &str, subresource: &str) -> bool {
    if spec == "*" {
        return true;
    }
    let exact = if subresource.is_empty() {
        spec == resource
    } else {
        spec.strip_prefix(resource)
            .and_then(|rest| rest.strip_prefix('/'))
            == Some(subresource)
    };
    exact
        || (!subresource.is_empty() && spec.strip_prefix("*/") == Some(subresource))
        || spec.strip_suffix("/*") == Some(resource)
}

/// kube's `pathMatches`: `*`, the path itself, or a prefix ending in `*`.
fn path_matches(path: &str, spec: &str) -> bool {
    spec == "*"
        || spec == path
        || spec
            .strip_suffix('*')
            .is_some_and(|prefix| path.starts_with(prefix.trim_end_matches('*')))
}

#[cfg(test)]
#[path = "policy_tests.rs"]
mod tests;

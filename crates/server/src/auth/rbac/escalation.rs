//! Escalation prevention on writes of RBAC objects, as kube-apiserver's policy-based RBAC
//! storage (`pkg/registry/rbac/{role,clusterrole,rolebinding,clusterrolebinding}/policybased`,
//! `pkg/registry/rbac/escalation_check.go`, `ConfirmNoEscalation` of
//! `pkg/registry/rbac/validation/rule.go`, `Covers` of component-helpers'
//! `auth/rbac/validation`).
//!
//! ## Guarantees
//! - A create or update of a Role or ClusterRole is allowed when the writer is in
//!   `system:masters`, may `escalate` the role (the authorization chain decides, on the role's
//!   resource, namespace and name), or already holds (through RBAC, in the role's namespace)
//!   every rule it writes; a ClusterRole with an `aggregationRule` (new or changed) needs
//!   every permission (`*` on everything). Otherwise 403 with kube's message:
//!   `user "bob" (groups=["system:authenticated"]) is attempting to grant RBAC permissions
//!   not currently held:` and the missing rules, broken down and compacted as kube does.
//! - A create or update of a RoleBinding or ClusterRoleBinding is allowed when the writer is in
//!   `system:masters`, may `bind` the role it references (in the binding's namespace), or holds
//!   every rule of that role; a missing role is refused with kube's not-found text.
//! - An update that changes only `metadata.ownerReferences` or `metadata.finalizers` (what
//!   the garbage collector writes) is never refused.

use std::collections::BTreeSet;

use serde_json::Value;
use watchkeeper_api::{ApiError, ResourceDef};
use watchkeeper_core::gotext::go_quote;

use super::{PolicyRule, Rbac, RoleRef, binding_of, is_rbac, rules_of};
use crate::auth::{Attributes, Auth, User};

/// kube's `user.SystemPrivilegedGroup`.
pub const PRIVILEGED_GROUP: &str = "system:masters";

/// A rule broken down to one group, resource, verb and name at most (kube's `BreakdownRule`).
fn breakdown(rule: &PolicyRule) -> Vec<PolicyRule> {
    let one = |value: &String| vec![value.clone()];
    let mut rules = Vec::new();
    for group in &rule.api_groups {
        for resource in &rule.resources {
            for verb in &rule.verbs {
                let base = PolicyRule {
                    api_groups: one(group),
                    resources: one(resource),
                    verbs: one(verb),
                    ..PolicyRule::default()
                };
                if rule.resource_names.is_empty() {
                    rules.push(base);
                } else {
                    for name in &rule.resource_names {
                        rules.push(PolicyRule {
                            resource_names: one(name),
                            ..base.clone()
                        });
                    }
                }
            }
        }
    }
    for url in &rule.non_resource_urls {
        for verb in &rule.verbs {
            rules.push(PolicyRule {
                non_resource_urls: one(url),
                verbs: one(verb),
                ..PolicyRule::default()
            });
        }
    }
    rules
}

fn has_all(set: &[String], wanted: &[String]) -> bool {
    wanted.iter().all(|w| set.contains(w))
}

fn resources_cover(owner: &[String], wanted: &[String]) -> bool {
    if owner.iter().any(|r| r == "*") || has_all(owner, wanted) {
        return true;
    }
    wanted.iter().all(|path| {
        if owner.contains(path) {
            return true;
        }
        match path.split_once('/') {
            Some((_, sub)) => owner.iter().any(|r| r.strip_prefix("*/") == Some(sub)),
            None => false,
        }
    })
}

fn urls_cover(owner: &[String], wanted: &[String]) -> bool {
    wanted.iter().all(|path| {
        owner
            .iter()
            .any(|o| o == path || (o.ends_with('*') && path.starts_with(o.trim_end_matches('*'))))
    })
}

/// kube's `ruleCovers`: `owner` covers the broken-down `sub`.
fn covers_one(owner: &PolicyRule, sub: &PolicyRule) -> bool {
    let verbs = owner.verbs.iter().any(|v| v == "*") || has_all(&owner.verbs, &sub.verbs);
    let groups =
        owner.api_groups.iter().any(|g| g == "*") || has_all(&owner.api_groups, &sub.api_groups);
    let names = if sub.resource_names.is_empty() {
        owner.resource_names.is_empty()
    } else {
        owner.resource_names.is_empty() || has_all(&owner.resource_names, &sub.resource_names)
    };
    verbs
        && groups
        && resources_cover(&owner.resources, &sub.resources)
        && names
        && urls_cover(&owner.non_resource_urls, &sub.non_resource_urls)
}

/// kube's `Covers`: whether `owner` covers every rule of `wanted`, and the broken-down rules
/// it does not.
#[must_use]
pub fn covers(owner: &[PolicyRule], wanted: &[PolicyRule]) -> (bool, Vec<PolicyRule>) {
    let missing: Vec<PolicyRule> = wanted
        .iter()
        .flat_map(breakdown)
        .filter(|sub| !owner.iter().any(|o| covers_one(o, sub)))
        .collect();
    (missing.is_empty(), missing)
}

/// kube's `CompactRules`: rules of one group, one resource and at most one name merged into
/// one rule with all their verbs; any other rule as it is.
#[must_use]
pub fn compact(rules: &[PolicyRule]) -> Vec<PolicyRule> {
    let mut compacted: Vec<PolicyRule> = Vec::new();
    let mut simple: Vec<PolicyRule> = Vec::new();
    for rule in rules {
        let is_simple = rule.resource_names.len() <= 1
            && rule.non_resource_urls.is_empty()
            && rule.api_groups.len() == 1
            && rule.resources.len() == 1;
        if !is_simple {
            compacted.push(rule.clone());
            continue;
        }
        match simple.iter_mut().find(|s| {
            s.api_groups == rule.api_groups
                && s.resources == rule.resources
                && s.resource_names == rule.resource_names
        }) {
            Some(existing) => existing.verbs.extend(rule.verbs.iter().cloned()),
            None => simple.push(rule.clone()),
        }
    }
    compacted.extend(simple);
    compacted
}

/// `["a" "b"]`: Go's `%q` of a string slice.
fn go_list(values: &[String]) -> String {
    let quoted: Vec<String> = values.iter().map(|v| go_quote(v)).collect();
    format!("[{}]", quoted.join(" "))
}

/// kube's `CompactString` of a rule.
#[must_use]
pub fn compact_string(rule: &PolicyRule) -> String {
    let mut parts = Vec::new();
    for (label, values) in [
        ("APIGroups", &rule.api_groups),
        ("Resources", &rule.resources),
        ("NonResourceURLs", &rule.non_resource_urls),
        ("ResourceNames", &rule.resource_names),
        ("Verbs", &rule.verbs),
    ] {
        if !values.is_empty() {
            parts.push(format!("{label}:{}", go_list(values)));
        }
    }
    format!("{{{}}}", parts.join(", "))
}

/// kube's `ConfirmNoEscalation`: `user` holds (through RBAC, in `namespace`) every rule of
/// `rules`.
///
/// # Errors
/// kube's message naming the user, its groups and the rules it does not hold.
pub fn confirm_no_escalation(
    rbac: &Rbac,
    user: &User,
    namespace: &str,
    rules: &[PolicyRule],
) -> Result<(), String> {
    let held = rbac.resolve(user, namespace);
    let (covered, missing) = covers(&held.rules, rules);
    if covered {
        return Ok(());
    }
    let described: BTreeSet<String> = compact(&missing).iter().map(compact_string).collect();
    let mut message = format!(
        "user {} (groups={}) is attempting to grant RBAC permissions not currently held:\n{}",
        go_quote(&user.name),
        go_list(&user.groups),
        described.into_iter().collect::<Vec<_>>().join("\n")
    );
    if !held.errors.is_empty() {
        // Go's `%v` of a slice holding the resolver's one aggregate error.
        message.push_str(&format!(
            "; resolution errors: [{}]",
            super::aggregate(&held.errors)
        ));
    }
    Err(message)
}

/// `*` on everything: what an `aggregationRule` needs.
fn full_authority() -> [PolicyRule; 2] {
    let star = || vec!["*".to_owned()];
    [
        PolicyRule {
            verbs: star(),
            api_groups: star(),
            resources: star(),
            ..PolicyRule::default()
        },
        PolicyRule {
            verbs: star(),
            non_resource_urls: star(),
            ..PolicyRule::default()
        },
    ]
}

/// kube's `IsOnlyMutatingGCFields`: `old` and `new` differ in owner references and
/// finalizers at most (and in what the server sets on every write).
fn only_gc_fields(old: &Value, new: &Value) -> bool {
    let strip = |value: &Value| {
        let mut value = value.clone();
        if let Some(metadata) = value.get_mut("metadata").and_then(Value::as_object_mut) {
            for field in [
                "ownerReferences",
                "finalizers",
                "resourceVersion",
                "managedFields",
                "generation",
            ] {
                metadata.remove(field);
            }
        }
        value
    };
    strip(old) == strip(new)
}

fn text<'v>(object: &'v Value, path: &str) -> &'v str {
    object
        .pointer(path)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// A write by `user` turning `old` (none for a create) into `object`, of the resource `def`,
/// checked as kube's RBAC storage does (see the module docs); any other resource passes.
///
/// # Errors
/// 403 Forbidden with kube's message.
pub fn check_write(
    auth: &Auth,
    rbac: &Rbac,
    user: &User,
    def: &ResourceDef,
    old: Option<&Value>,
    object: &Value,
) -> Result<(), ApiError> {
    if !is_rbac(def) || user.groups.iter().any(|g| g == PRIVILEGED_GROUP) {
        return Ok(());
    }
    if old.is_some_and(|old| only_gc_fields(old, object)) {
        return Ok(());
    }
    let name = text(object, "/metadata/name");
    let namespace = text(object, "/metadata/namespace");
    let forbidden = |message: String| ApiError::forbidden(def, name, message);
    if matches!(def.plural.as_str(), "roles" | "clusterroles") {
        let escalate = Attributes::Resource {
            verb: "escalate",
            def,
            namespace,
            name,
            subresource: "",
        };
        if auth.authorize(user, &escalate).is_ok() {
            return Ok(());
        }
        confirm_no_escalation(rbac, user, namespace, &rules_of(object)).map_err(forbidden)?;
        let aggregation = object.get("aggregationRule").filter(|r| !r.is_null());
        if aggregation.is_some()
            && old.and_then(|o| o.get("aggregationRule").filter(|r| !r.is_null())) != aggregation
            && confirm_no_escalation(rbac, user, namespace, &full_authority()).is_err()
        {
            return Err(forbidden(
                "must have cluster-admin privileges to use the aggregationRule".to_owned(),
            ));
        }
        return Ok(());
    }
    let binding = binding_of(object).unwrap_or_default();
    if bind_authorized(auth, user, &binding.role_ref, namespace) {
        return Ok(());
    }
    let rules = rbac
        .role_rules(&binding.role_ref, namespace)
        .map_err(forbidden)?;
    confirm_no_escalation(rbac, user, namespace, &rules).map_err(forbidden)
}

/// kube's `BindingAuthorized`: `bind` on the referenced role, in the binding's namespace.
fn bind_authorized(auth: &Auth, user: &User, role_ref: &RoleRef, namespace: &str) -> bool {
    let plural = match role_ref.kind.as_str() {
        "ClusterRole" => "clusterroles",
        "Role" => "roles",
        _ => return false,
    };
    let def = ResourceDef::named(
        super::GROUP,
        "v1",
        plural,
        &role_ref.kind,
        plural == "roles",
    );
    auth.authorize(
        user,
        &Attributes::Resource {
            verb: "bind",
            def: &def,
            namespace,
            name: &role_ref.name,
            subresource: "",
        },
    )
    .is_ok()
}

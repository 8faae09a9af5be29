//! Roles', ClusterRoles' and their bindings' rules as kube-apiserver's
//! `pkg/apis/rbac/validation` (`ValidateRole`, `ValidateClusterRole`, `ValidateRoleBinding`,
//! `ValidateClusterRoleBinding` and their updates) applies them, in kube's order.
//!
//! ## Guarantees
//! - Each policy rule has verbs; a rule with `nonResourceURLs` is a ClusterRole's and names no
//!   API group, resource or resource name; any other rule has API groups and resources. A
//!   ClusterRole's `aggregationRule` has label selectors.
//! - A binding's `roleRef` names the `rbac.authorization.k8s.io` group, a `Role` or
//!   `ClusterRole` (a ClusterRoleBinding's only a `ClusterRole`) and a path-segment name, and
//!   never changes (`roleRef: Invalid value: rbac.RoleRef{...}: cannot change roleRef`); each
//!   subject has a name and a kind: a `ServiceAccount` (a DNS-subdomain name, no API group, a
//!   namespace in a ClusterRoleBinding), a `User` or a `Group` (the RBAC API group).
//! - Not checked (kube checks it): a ClusterRole's aggregation selectors' conversion to
//!   selectors (`invalid label selector.`), which the label selector rules already refuse.

use serde_json::Value;

use super::access::{list, text};
use super::pod_spec;
use crate::field::{Cause, go_quote, invalid, not_supported, required};
use crate::names::{path_segment_problems, validate_dns1123_subdomain};

const GROUP: &str = "rbac.authorization.k8s.io";

/// Go's `%#v` of a `[]string`.
fn go_strings(values: &[Value]) -> String {
    let quoted: Vec<String> = values
        .iter()
        .map(|v| go_quote(v.as_str().unwrap_or("")))
        .collect();
    format!("[]string{{{}}}", quoted.join(", "))
}

/// The causes of the Role (`namespaced`) or ClusterRole `object`.
pub(super) fn role(object: &Value, namespaced: bool, causes: &mut Vec<Cause>) {
    for (i, rule) in list(object, "rules").iter().enumerate() {
        policy_rule(rule, namespaced, &format!("rules[{i}]"), causes);
    }
    if namespaced {
        return;
    }
    if let Some(aggregation) = object.get("aggregationRule").filter(|a| !a.is_null()) {
        let selectors = list(aggregation, "clusterRoleSelectors");
        if selectors.is_empty() {
            causes.push(required(
                "aggregationRule.clusterRoleSelectors",
                "at least one clusterRoleSelector required if aggregationRule is non-nil",
            ));
        }
        for (i, selector) in selectors.iter().enumerate() {
            pod_spec::label_selector(
                Some(selector),
                &format!("aggregationRule.clusterRoleSelectors[{i}]"),
                causes,
            );
        }
    }
}

/// `ValidatePolicyRule`.
fn policy_rule(rule: &Value, namespaced: bool, at: &str, causes: &mut Vec<Cause>) {
    if list(rule, "verbs").is_empty() {
        causes.push(required(
            &format!("{at}.verbs"),
            "verbs must contain at least one value",
        ));
    }
    let urls = list(rule, "nonResourceURLs");
    if !urls.is_empty() {
        let here = format!("{at}.nonResourceURLs");
        if namespaced {
            causes.push(invalid(
                &here,
                &go_strings(urls),
                "namespaced rules cannot apply to non-resource URLs",
            ));
        }
        if ["apiGroups", "resources", "resourceNames"]
            .iter()
            .any(|key| !list(rule, key).is_empty())
        {
            causes.push(invalid(
                &here,
                &go_strings(urls),
                "rules cannot apply to both regular resources and non-resource URLs",
            ));
        }
        return;
    }
    if list(rule, "apiGroups").is_empty() {
        causes.push(required(
            &format!("{at}.apiGroups"),
            "resource rules must supply at least one api group",
        ));
    }
    if list(rule, "resources").is_empty() {
        causes.push(required(
            &format!("{at}.resources"),
            "resource rules must supply at least one resource",
        ));
    }
}

/// Go's `%#v` of an `rbac.RoleRef`.
fn go_role_ref(reference: &Value) -> String {
    format!(
        "rbac.RoleRef{{APIGroup:{}, Kind:{}, Name:{}}}",
        go_quote(text(reference, "apiGroup")),
        go_quote(text(reference, "kind")),
        go_quote(text(reference, "name"))
    )
}

/// The causes of the RoleBinding (`namespaced`) or ClusterRoleBinding `object` (updating
/// `old`).
pub(super) fn binding(
    object: &Value,
    old: Option<&Value>,
    namespaced: bool,
    causes: &mut Vec<Cause>,
) {
    let reference = object.get("roleRef").unwrap_or(&Value::Null);
    let group = text(reference, "apiGroup");
    if group != GROUP {
        causes.push(not_supported(
            "roleRef.apiGroup",
            &go_quote(group),
            &[GROUP],
        ));
    }
    let kind = text(reference, "kind");
    let kinds: &[&str] = if namespaced {
        &["Role", "ClusterRole"]
    } else {
        &["ClusterRole"]
    };
    if !kinds.contains(&kind) {
        causes.push(not_supported("roleRef.kind", &go_quote(kind), kinds));
    }
    let name = text(reference, "name");
    if name.is_empty() {
        causes.push(required("roleRef.name", ""));
    }
    for problem in path_segment_problems(name, false) {
        causes.push(invalid("roleRef.name", &go_quote(name), &problem));
    }
    for (i, subject) in list(object, "subjects").iter().enumerate() {
        binding_subject(subject, namespaced, &format!("subjects[{i}]"), causes);
    }
    if let Some(old) = old {
        let before = old.get("roleRef").unwrap_or(&Value::Null);
        if go_role_ref(before) != go_role_ref(reference) {
            causes.push(invalid(
                "roleRef",
                &go_role_ref(reference),
                "cannot change roleRef",
            ));
        }
    }
}

/// `ValidateRoleBindingSubject`.
fn binding_subject(subject: &Value, namespaced: bool, at: &str, causes: &mut Vec<Cause>) {
    let name = text(subject, "name");
    let group = text(subject, "apiGroup");
    if name.is_empty() {
        causes.push(required(&format!("{at}.name"), ""));
    }
    match text(subject, "kind") {
        "ServiceAccount" => {
            if !name.is_empty()
                && let Err(message) = validate_dns1123_subdomain(name)
            {
                causes.push(invalid(&format!("{at}.name"), &go_quote(name), &message));
            }
            if !group.is_empty() {
                causes.push(not_supported(
                    &format!("{at}.apiGroup"),
                    &go_quote(group),
                    &[""],
                ));
            }
            if !namespaced && text(subject, "namespace").is_empty() {
                causes.push(required(&format!("{at}.namespace"), ""));
            }
        }
        "User" | "Group" => {
            if group != GROUP {
                causes.push(not_supported(
                    &format!("{at}.apiGroup"),
                    &go_quote(group),
                    &[GROUP],
                ));
            }
        }
        other => causes.push(not_supported(
            &format!("{at}.kind"),
            &go_quote(other),
            &["ServiceAccount", "User", "Group"],
        )),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    fn message(plural: &str, object: Value, old: Option<&Value>) -> Option<String> {
        crate::kinds::refusal("rbac.authorization.k8s.io", plural, object, old)
    }

    #[test]
    fn roles() {
        // `kubectl create role r --verb=get --resource=pods`.
        let good = json!({"metadata": {"name": "r"}, "rules": [{"apiGroups": [""],
            "resources": ["pods"], "verbs": ["get"]}]});
        assert_eq!(message("roles", good, None), None);
        let bad = json!({"metadata": {"name": "r"}, "rules": [{"apiGroups": [""], "resources": ["pods"]},
            {"verbs": ["get"], "nonResourceURLs": ["/healthz"]}, {"verbs": ["get"]}]});
        assert_eq!(
            message("roles", bad, None).unwrap(),
            "Role.rbac.authorization.k8s.io \"r\" is invalid: [rules[0].verbs: Required value: verbs must contain at least one value, rules[1].nonResourceURLs: Invalid value: []string{\"/healthz\"}: namespaced rules cannot apply to non-resource URLs, rules[2].apiGroups: Required value: resource rules must supply at least one api group, rules[2].resources: Required value: resource rules must supply at least one resource]"
        );
        let cluster = json!({"metadata": {"name": "c"}, "rules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz"]}],
            "aggregationRule": {"clusterRoleSelectors": []}});
        assert_eq!(
            message("clusterroles", cluster, None).unwrap(),
            "ClusterRole.rbac.authorization.k8s.io \"c\" is invalid: aggregationRule.clusterRoleSelectors: Required value: at least one clusterRoleSelector required if aggregationRule is non-nil"
        );
    }

    #[test]
    fn bindings() {
        // `kubectl create rolebinding b --role=r --user=alice --serviceaccount=default:sa`.
        let binding = |kind: &str, name: &str| {
            json!({"metadata": {"name": "b"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name},
            "subjects": [{"kind": "User", "name": "alice"},
                {"kind": "ServiceAccount", "name": "sa", "namespace": "default"}]})
        };
        assert_eq!(message("rolebindings", binding("Role", "r"), None), None);
        let mut bad = binding("Policy", "");
        bad["roleRef"]["apiGroup"] = json!("example.com");
        bad["subjects"] = json!([{"kind": "Robot", "name": "x"}, {"kind": "ServiceAccount"}]);
        assert_eq!(
            message("clusterrolebindings", bad, None).unwrap(),
            "ClusterRoleBinding.rbac.authorization.k8s.io \"b\" is invalid: [roleRef.apiGroup: Unsupported value: \"example.com\": supported values: \"rbac.authorization.k8s.io\", roleRef.kind: Unsupported value: \"Policy\": supported values: \"ClusterRole\", roleRef.name: Required value, subjects[0].kind: Unsupported value: \"Robot\": supported values: \"ServiceAccount\", \"User\", \"Group\", subjects[1].name: Required value, subjects[1].namespace: Required value]"
        );
        let old = binding("Role", "r");
        assert_eq!(
            message("rolebindings", binding("Role", "s"), Some(&old)).unwrap(),
            "RoleBinding.rbac.authorization.k8s.io \"b\" is invalid: roleRef: Invalid value: rbac.RoleRef{APIGroup:\"rbac.authorization.k8s.io\", Kind:\"Role\", Name:\"s\"}: cannot change roleRef"
        );
    }
}

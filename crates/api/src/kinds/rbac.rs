//! kube's `pkg/apis/rbac/validation` for Roles, ClusterRoles, RoleBindings and
//! ClusterRoleBindings: each rule has verbs, and either non-resource URLs (cluster roles
//! only, nothing else beside them) or API groups and resources (resource names for one
//! resource at most); a binding's `roleRef` names this group, a kind the binding may name and
//! a path-segment name, and never changes on an update; each subject is a ServiceAccount (a
//! DNS-subdomain name, no API group, a namespace in a cluster binding), a User or a Group of
//! this group, with a name. Paths and words are kube's; a value kube prints as a Go struct or
//! slice (`%#v`) is printed so (`[]string{"/x"}`, `rbac.RoleRef{...}`).
//!
//! Not here: the names of the objects themselves (`metadata.name`, a path segment), checked
//! with the rest of the metadata; escalation (the server's RBAC storage refuses it before
//! validation, as kube's does).

use serde_json::Value;

use super::{items, not_supported, text};
use crate::field::{Cause, go_quote, invalid, required};
use crate::names::{path_segment_problems, validate_dns1123_subdomain};

/// The API group of roles and bindings (`rbac.GroupName`).
const GROUP: &str = "rbac.authorization.k8s.io";

/// A string list as Go's `%#v` prints a `[]string`.
fn go_strings(values: &[Value]) -> String {
    let quoted: Vec<String> = values
        .iter()
        .map(|v| go_quote(v.as_str().unwrap_or("")))
        .collect();
    format!("[]string{{{}}}", quoted.join(", "))
}

/// `validateRole` / `validateClusterRole` without the metadata: every rule.
pub(super) fn role(object: &Value, namespaced: bool, causes: &mut Vec<Cause>) {
    for (i, rule) in items(object, "rules").iter().enumerate() {
        policy_rule(rule, namespaced, &format!("rules[{i}]"), causes);
    }
}

/// kube's `validatePolicyRule`.
fn policy_rule(rule: &Value, namespaced: bool, at: &str, causes: &mut Vec<Cause>) {
    if items(rule, "verbs").is_empty() {
        causes.push(required(
            &format!("{at}.verbs"),
            "verbs must contain at least one value",
        ));
    }
    let urls = items(rule, "nonResourceURLs");
    let (groups, resources) = (items(rule, "apiGroups"), items(rule, "resources"));
    if !urls.is_empty() {
        let field = format!("{at}.nonResourceURLs");
        if namespaced {
            causes.push(invalid(
                &field,
                &go_strings(urls),
                "namespaced rules cannot apply to non-resource URLs",
            ));
        }
        if !groups.is_empty() || !resources.is_empty() || !items(rule, "resourceNames").is_empty() {
            causes.push(invalid(
                &field,
                &go_strings(urls),
                "rules cannot apply to both regular resources and non-resource URLs",
            ));
        }
        return;
    }
    if groups.is_empty() {
        causes.push(required(
            &format!("{at}.apiGroups"),
            "resource rules must supply at least one api group",
        ));
    }
    if resources.is_empty() {
        causes.push(required(
            &format!("{at}.resources"),
            "resource rules must supply at least one resource",
        ));
    }
    if !items(rule, "resourceNames").is_empty() && resources.len() > 1 {
        causes.push(required(
            &format!("{at}.resourceNames"),
            "resource names cannot apply to multiple resources",
        ));
    }
}

/// `ValidateRoleBinding` / `ValidateClusterRoleBinding` without the metadata, and on an
/// update the unchanged `roleRef`.
pub(super) fn binding(
    object: &Value,
    old: Option<&Value>,
    namespaced: bool,
    causes: &mut Vec<Cause>,
) {
    let api_group = text(object, "roleRef.apiGroup");
    if api_group != GROUP {
        causes.push(not_supported(
            "roleRef.apiGroup",
            &Value::String(api_group.to_owned()),
            &[GROUP],
        ));
    }
    let kinds: &[&str] = if namespaced {
        &["Role", "ClusterRole"]
    } else {
        &["ClusterRole"]
    };
    let kind = text(object, "roleRef.kind");
    if !kinds.contains(&kind) {
        causes.push(not_supported(
            "roleRef.kind",
            &Value::String(kind.to_owned()),
            kinds,
        ));
    }
    let name = text(object, "roleRef.name");
    if name.is_empty() {
        causes.push(required("roleRef.name", ""));
    } else {
        for problem in path_segment_problems(name, false) {
            causes.push(invalid("roleRef.name", &go_quote(name), &problem));
        }
    }
    for (i, subject) in items(object, "subjects").iter().enumerate() {
        binding_subject(subject, namespaced, &format!("subjects[{i}]"), causes);
    }
    if let Some(old) = old {
        let role_ref = |o: &Value| {
            [
                text(o, "roleRef.apiGroup").to_owned(),
                text(o, "roleRef.kind").to_owned(),
                text(o, "roleRef.name").to_owned(),
            ]
        };
        if role_ref(old) != role_ref(object) {
            let [group, kind, name] = role_ref(object);
            causes.push(invalid(
                "roleRef",
                &format!(
                    "rbac.RoleRef{{APIGroup:{}, Kind:{}, Name:{}}}",
                    go_quote(&group),
                    go_quote(&kind),
                    go_quote(&name)
                ),
                "cannot change roleRef",
            ));
        }
    }
}

/// kube's `validateRoleBindingSubject`.
fn binding_subject(subject: &Value, namespaced: bool, at: &str, causes: &mut Vec<Cause>) {
    let name = text(subject, "name");
    let group = text(subject, "apiGroup");
    if name.is_empty() {
        causes.push(required(&format!("{at}.name"), ""));
    }
    match text(subject, "kind") {
        "ServiceAccount" => {
            if !name.is_empty()
                && let Err(problem) = validate_dns1123_subdomain(name)
            {
                causes.push(invalid(&format!("{at}.name"), &go_quote(name), &problem));
            }
            if !group.is_empty() {
                causes.push(not_supported(
                    &format!("{at}.apiGroup"),
                    &Value::String(group.to_owned()),
                    &[""],
                ));
            }
            if !namespaced && text(subject, "namespace").is_empty() {
                causes.push(required(&format!("{at}.namespace"), ""));
            }
        }
        kind @ ("User" | "Group") => {
            if name.is_empty() {
                let what = if kind == "User" { "user" } else { "group" };
                causes.push(invalid(
                    &format!("{at}.name"),
                    "\"\"",
                    &format!("{what} name cannot be empty"),
                ));
            }
            if group != GROUP {
                causes.push(not_supported(
                    &format!("{at}.apiGroup"),
                    &Value::String(group.to_owned()),
                    &[GROUP],
                ));
            }
        }
        other => causes.push(not_supported(
            &format!("{at}.kind"),
            &Value::String(other.to_owned()),
            &["ServiceAccount", "User", "Group"],
        )),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    /// The 422's message for `object` of `plural` (after `old` on an update), or "" when valid.
    fn refusal(plural: &str, object: &Value, old: Option<&Value>) -> String {
        let def = crate::resources::builtin_resources()
            .into_iter()
            .find(|d| d.group == super::GROUP && d.plural == plural)
            .unwrap();
        crate::kinds::validate(&def, object, old).map_or_else(|e| e.message, |()| String::new())
    }

    #[test]
    fn rules_need_verbs_and_either_resources_or_cluster_wide_urls() {
        let role = |rules: Value| json!({"metadata": {"name": "r"}, "rules": rules});
        let kubectl = role(json!([{"apiGroups": [""], "resources": ["pods"],
            "verbs": ["get", "list"]}, {"apiGroups": ["apps"], "resources": ["deployments"],
            "resourceNames": ["web"], "verbs": ["*"]}]));
        assert_eq!(refusal("roles", &kubectl, None), "");
        assert_eq!(
            refusal(
                "roles",
                &role(json!([{"apiGroups": [""], "resources": ["pods"]}])),
                None
            ),
            "Role.rbac.authorization.k8s.io \"r\" is invalid: rules[0].verbs: Required value: verbs must contain at least one value"
        );
        assert_eq!(
            refusal(
                "roles",
                &role(json!([{"verbs": ["get"], "resourceNames": ["a"],
                "resources": ["pods", "secrets"]}])),
                None
            ),
            "Role.rbac.authorization.k8s.io \"r\" is invalid: [rules[0].apiGroups: Required value: resource rules must supply at least one api group, rules[0].resourceNames: Required value: resource names cannot apply to multiple resources]"
        );
        let urls = role(json!([{"nonResourceURLs": ["/healthz", "/x/*"], "verbs": ["get"]}]));
        assert_eq!(refusal("clusterroles", &urls, None), "");
        assert_eq!(
            refusal("roles", &urls, None),
            "Role.rbac.authorization.k8s.io \"r\" is invalid: rules[0].nonResourceURLs: Invalid value: []string{\"/healthz\", \"/x/*\"}: namespaced rules cannot apply to non-resource URLs"
        );
        assert_eq!(
            refusal(
                "clusterroles",
                &role(json!([{"nonResourceURLs": ["/x"],
                "resources": ["pods"]}])),
                None
            ),
            "ClusterRole.rbac.authorization.k8s.io \"r\" is invalid: [rules[0].verbs: Required value: verbs must contain at least one value, rules[0].nonResourceURLs: Invalid value: []string{\"/x\"}: rules cannot apply to both regular resources and non-resource URLs]"
        );
    }

    #[test]
    fn bindings_name_a_role_of_this_group_and_valid_subjects_and_keep_their_role() {
        let binding = |role_ref: Value, subjects: Value| json!({"metadata": {"name": "b"}, "roleRef": role_ref, "subjects": subjects});
        let view = json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
            "name": "view"});
        let kubectl = binding(
            view.clone(),
            json!([
            {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice"},
            {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "devs"},
            {"kind": "ServiceAccount", "name": "bot", "namespace": "ns"}]),
        );
        assert_eq!(refusal("rolebindings", &kubectl, None), "");
        assert_eq!(refusal("clusterrolebindings", &kubectl, None), "");
        let bad = binding(
            json!({"apiGroup": "x", "kind": "Role", "name": "a/b"}),
            json!([{"kind": "Robot", "name": ""},
                {"kind": "ServiceAccount", "name": "Bad_Name", "apiGroup": "x"},
                {"kind": "User", "name": ""}]),
        );
        assert_eq!(
            refusal("clusterrolebindings", &bad, None),
            "ClusterRoleBinding.rbac.authorization.k8s.io \"b\" is invalid: [roleRef.apiGroup: Unsupported value: \"x\": supported values: \"rbac.authorization.k8s.io\", roleRef.kind: Unsupported value: \"Role\": supported values: \"ClusterRole\", roleRef.name: Invalid value: \"a/b\": may not contain '/', subjects[0].name: Required value, subjects[0].kind: Unsupported value: \"Robot\": supported values: \"ServiceAccount\", \"User\", \"Group\", subjects[1].name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*'), subjects[1].apiGroup: Unsupported value: \"x\": supported values: \"\", subjects[1].namespace: Required value, subjects[2].name: Required value, subjects[2].name: Invalid value: \"\": user name cannot be empty, subjects[2].apiGroup: Unsupported value: \"\": supported values: \"rbac.authorization.k8s.io\"]"
        );
        let edit = json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
            "name": "edit"});
        assert_eq!(
            refusal("rolebindings", &binding(edit, json!([])), Some(&kubectl)),
            "RoleBinding.rbac.authorization.k8s.io \"b\" is invalid: roleRef: Invalid value: rbac.RoleRef{APIGroup:\"rbac.authorization.k8s.io\", Kind:\"ClusterRole\", Name:\"edit\"}: cannot change roleRef"
        );
        assert_eq!(
            refusal("rolebindings", &binding(view, json!([])), Some(&kubectl)),
            ""
        );
    }
}

//! ResourceQuotas' validation as kube-apiserver's `pkg/apis/core/validation/validation.go` has
//! it (Kubernetes 1.33): `ValidateResourceQuota` and `ValidateResourceQuotaUpdate`.
//!
//! ## Guarantees
//! - Each `spec.hard` resource name is a qualified name, standard (and a quota's) unless it
//!   has a prefix (`ValidateResourceQuotaResourceName`: `must be a standard resource type or
//!   fully qualified`, `must be a standard resource for quota`); its quantity is not negative
//!   and, for object counts and extended resources, whole (`ValidateResourceQuantityValue`).
//! - Scopes are known, fit every standard resource of `spec.hard`, and are not both of
//!   `BestEffort`/`NotBestEffort` or `Terminating`/`NotTerminating`; the scope selector's
//!   requirements have known scopes, `Exists` for the scopes that take no values, values for
//!   `In`/`NotIn` and none for `Exists`/`DoesNotExist`, a known operator.
//! - An update may not change the set of scopes (`spec.scopes: Invalid value: ...: field is
//!   immutable`).
//!
//! ## How it differs from kube
//! - kube walks `spec.hard` in Go's random map order; this walks it sorted. A quantity kube
//!   prints as Go's `%#v` of a `resource.Quantity` prints here as its text.
//! - The status is not validated: this server computes it from the spec and the namespace's
//!   objects (kube's strategy clears a created quota's status and keeps the stored one on
//!   updates, so only `/status` writes carry a client's).
//! - The scope selector's "unsupported scope applied to resource" is not reported (kube prints
//!   the selector as a Go struct).

use serde_json::{Value, json};

use super::pod_spec;
use super::{invalid, required, text};
use crate::field::Cause;

/// kube's `ValidateResourceQuota` (spec) and `ValidateResourceQuotaUpdate`.
pub(super) fn resource_quota(object: &Value, old: Option<&Value>, causes: &mut Vec<Cause>) {
    let mut hard: Vec<(&String, &Value)> = object
        .pointer("/spec/hard")
        .and_then(Value::as_object)
        .map(|hard| hard.iter().collect())
        .unwrap_or_default();
    hard.sort_by(|a, b| a.0.cmp(b.0));
    for (name, amount) in hard {
        let at = format!("spec.hard[{name}]");
        resource_name(name, &at, causes);
        if let Some(amount) = pod_spec::quantity(amount) {
            pod_spec::resource_quantity(name, amount, &at, causes);
        }
    }
    scopes(object, causes);
    if let Some(old) = old {
        let set = |quota: &Value| -> std::collections::BTreeSet<String> {
            scope_names(quota).into_iter().map(str::to_owned).collect()
        };
        if set(object) != set(old) {
            causes.push(crate::field::invalid(
                "spec.scopes",
                &go_scopes(object),
                "field is immutable",
            ));
        }
    }
}

/// `ValidateResourceQuotaResourceName` (kube prints the name, a `core.ResourceName`, through
/// its `String()`: unquoted).
fn resource_name(name: &str, at: &str, causes: &mut Vec<Cause>) {
    pod_spec::any_resource_name(name, at, causes);
    if !name.contains('/') && !standard_quota_resource(name) {
        causes.push(crate::field::invalid(
            at,
            name,
            "must be a standard resource for quota",
        ));
    }
}

/// `IsStandardQuotaResourceName`.
fn standard_quota_resource(name: &str) -> bool {
    STANDARD_QUOTA_RESOURCES.contains(&name) || pod_spec::is_quota_hugepages(name)
}

/// The scopes of a quota's spec.
fn scope_names(quota: &Value) -> Vec<&str> {
    quota
        .pointer("/spec/scopes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

/// Go's `%#v` of the spec's `[]core.ResourceQuotaScope`.
fn go_scopes(quota: &Value) -> String {
    match quota.pointer("/spec/scopes").and_then(Value::as_array) {
        None => "[]core.ResourceQuotaScope(nil)".to_owned(),
        Some(_) => {
            let listed: Vec<String> = scope_names(quota)
                .iter()
                .map(|scope| crate::field::go_quote(scope))
                .collect();
            format!("[]core.ResourceQuotaScope{{{}}}", listed.join(", "))
        }
    }
}

/// The scopes a ResourceQuota may have (kube's `IsStandardResourceQuotaScope`).
const QUOTA_SCOPES: [&str; 6] = [
    "Terminating",
    "NotTerminating",
    "BestEffort",
    "NotBestEffort",
    "PriorityClass",
    "CrossNamespacePodAffinity",
];

/// kube's `standardQuotaResources`: the names whose scope is checked.
const STANDARD_QUOTA_RESOURCES: [&str; 19] = [
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.storage",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    "pods",
    "services",
    "replicationcontrollers",
    "resourcequotas",
    "secrets",
    "persistentvolumeclaims",
    "configmaps",
    "services.nodeports",
    "services.loadbalancers",
];

/// kube's `IsResourceQuotaScopeValidForResource`.
fn scope_fits(scope: &str, resource: &str) -> bool {
    const COMPUTE: [&str; 6] = [
        "cpu",
        "memory",
        "limits.cpu",
        "limits.memory",
        "requests.cpu",
        "requests.memory",
    ];
    match scope {
        "BestEffort" => resource == "pods",
        "Terminating"
        | "NotTerminating"
        | "NotBestEffort"
        | "PriorityClass"
        | "CrossNamespacePodAffinity" => resource == "pods" || COMPUTE.contains(&resource),
        _ => true,
    }
}

/// kube's `validateResourceQuotaScopes` and the scope selector's requirement checks
/// (`validateScopedResourceSelectorRequirement`, but for its "unsupported scope applied to
/// resource", whose value kube prints as a Go struct).
fn scopes(object: &Value, causes: &mut Vec<Cause>) {
    let hard: Vec<&String> = object
        .pointer("/spec/hard")
        .and_then(Value::as_object)
        .map(|hard| hard.keys().collect())
        .unwrap_or_default();
    let scopes = scope_names(object);
    if !scopes.is_empty() {
        let value = go_scopes(object);
        let fail = |causes: &mut Vec<Cause>, detail: &str| {
            causes.push((
                "spec.scopes".to_owned(),
                format!("Invalid value: {value}: {detail}"),
                "FieldValueInvalid".to_owned(),
            ));
        };
        for scope in &scopes {
            if !QUOTA_SCOPES.contains(scope) {
                fail(causes, "unsupported scope");
            }
            for resource in &hard {
                if STANDARD_QUOTA_RESOURCES.contains(&resource.as_str())
                    && !scope_fits(scope, resource)
                {
                    fail(causes, "unsupported scope applied to resource");
                }
            }
        }
        for pair in [
            ["BestEffort", "NotBestEffort"],
            ["Terminating", "NotTerminating"],
        ] {
            if pair.iter().all(|scope| scopes.contains(scope)) {
                fail(causes, "conflicting scopes");
            }
        }
    }
    for requirement in object
        .pointer("/spec/scopeSelector/matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let path = "spec.scopeSelector.matchExpressions";
        let scope = text(requirement, "scopeName");
        let operator = text(requirement, "operator");
        let values = requirement
            .get("values")
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        if !QUOTA_SCOPES.contains(&scope) {
            causes.push(invalid(
                &format!("{path}.scopeName"),
                &json!(scope),
                "unsupported scope",
            ));
        }
        if scope != "PriorityClass" && QUOTA_SCOPES.contains(&scope) && operator != "Exists" {
            causes.push(invalid(
                &format!("{path}.operator"),
                &json!(operator),
                "must be 'Exist' when scope is any of ResourceQuotaScopeTerminating, ResourceQuotaScopeNotTerminating, ResourceQuotaScopeBestEffort, ResourceQuotaScopeNotBestEffort or ResourceQuotaScopeCrossNamespacePodAffinity",
            ));
        }
        match operator {
            "In" | "NotIn" if values == 0 => causes.push(required(
                &format!("{path}.values"),
                "must be at least one value when `operator` is 'In' or 'NotIn' for scope selector",
            )),
            "In" | "NotIn" => {}
            "Exists" | "DoesNotExist" if values != 0 => causes.push(invalid(
                &format!("{path}.values"),
                requirement.get("values").unwrap_or(&Value::Null),
                "must be no value when `operator` is 'Exist' or 'DoesNotExist' for scope selector",
            )),
            "Exists" | "DoesNotExist" => {}
            _ => causes.push(invalid(
                &format!("{path}.operator"),
                &json!(operator),
                "not a valid selector operator",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    fn causes(quota: Value, old: Option<&Value>) -> Vec<String> {
        crate::kinds::refusal_causes("", "resourcequotas", quota, old)
    }

    /// Goal: `spec.hard` as `ValidateResourceQuotaSpec` checks it: quota resource names,
    /// quantities not negative, object counts whole; scopes fixed once set.
    #[test]
    fn hard_limits_are_quota_resources_with_whole_counts() {
        let quota = json!({"metadata": {"name": "q"}, "spec": {"hard": {
            "pods": "-1", "cpu": "500m", "services": "1500m", "bogus": "1",
            "count/deployments.apps": "2", "requests.hugepages-2Mi": "2Mi"}}});
        assert_eq!(
            causes(quota, None),
            [
                "spec.hard[bogus]: Invalid value: bogus: must be a standard resource type or fully qualified",
                "spec.hard[bogus]: Invalid value: bogus: must be a standard resource for quota",
                "spec.hard[pods]: Invalid value: \"-1\": must be greater than or equal to 0",
                "spec.hard[services]: Invalid value: \"1500m\": must be an integer",
            ]
        );
        let old = json!({"metadata": {"name": "q"}, "spec": {"hard": {"pods": "1"},
            "scopes": ["BestEffort"]}});
        let mut new = old.clone();
        new["spec"]["scopes"] = json!(["NotBestEffort"]);
        assert_eq!(
            causes(new, Some(&old)),
            [
                "spec.scopes: Invalid value: []core.ResourceQuotaScope{\"NotBestEffort\"}: field is immutable"
            ]
        );
        assert!(causes(old.clone(), Some(&old)).is_empty());
    }
}

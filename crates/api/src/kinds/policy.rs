//! PodDisruptionBudgets' rules as kube-apiserver's `pkg/apis/policy/validation`
//! (`ValidatePodDisruptionBudgetSpec`) applies them, on create and update alike.
//!
//! ## Guarantees
//! - `minAvailable` and `maxUnavailable` are not both set (`spec: Invalid value: ...:
//!   minAvailable and maxUnavailable cannot be both set`); each is a non-negative integer or
//!   a percentage (`[0-9]+%`) of at most 100% (kube's apps `ValidatePositiveIntOrPercent` and
//!   `IsNotMoreThan100Percent`).
//! - The selector is a label selector (`ValidateLabelSelector`); `unhealthyPodEvictionPolicy`
//!   is `AlwaysAllow` or `IfHealthyBudget`.
//! - Not checked: the status subresource's counters (kube's `ValidatePodDisruptionBudgetStatusUpdate`),
//!   and kube's leniency for a stored selector with invalid label values
//!   (`AllowInvalidLabelValueInSelector`).
//!
//! Differs from kube: the spec kube prints as Go's `%#v` of the internal struct (with
//! pointers' addresses) prints here as its JSON.

use serde_json::Value;

use super::common::{not_more_than_100_percent, positive_int_or_percent};
use super::pod_spec;
use crate::field::{Cause, go_quote, invalid, not_supported};

/// The causes of the PodDisruptionBudget `object`.
pub(super) fn validate(object: &Value, causes: &mut Vec<Cause>) {
    let spec = object.get("spec").unwrap_or(&Value::Null);
    let field = |key: &str| spec.get(key).filter(|v| !v.is_null());
    if field("minAvailable").is_some() && field("maxUnavailable").is_some() {
        causes.push(invalid(
            "spec",
            &spec.to_string(),
            "minAvailable and maxUnavailable cannot be both set",
        ));
    }
    for key in ["minAvailable", "maxUnavailable"] {
        if let Some(value) = field(key) {
            let at = format!("spec.{key}");
            positive_int_or_percent(value, &at, causes);
            not_more_than_100_percent(value, &at, causes);
        }
    }
    pod_spec::label_selector(field("selector"), "spec.selector", causes);
    if let Some(policy) = field("unhealthyPodEvictionPolicy").and_then(Value::as_str)
        && !matches!(policy, "AlwaysAllow" | "IfHealthyBudget")
    {
        causes.push(not_supported(
            "spec.unhealthyPodEvictionPolicy",
            &go_quote(policy),
            &["AlwaysAllow", "IfHealthyBudget"],
        ));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use crate::resources::builtin_resources;

    fn message(object: &Value) -> Option<String> {
        let def = builtin_resources()
            .into_iter()
            .find(|d| d.group == "policy" && d.plural == "poddisruptionbudgets")
            .unwrap();
        crate::kinds::validate(&def, object, None)
            .err()
            .map(|e| e.message)
    }

    #[test]
    fn budgets() {
        // `kubectl create pdb p --selector=app=web --min-available=50%`.
        let good = json!({"metadata": {"name": "p"}, "spec": {"minAvailable": "50%",
            "selector": {"matchLabels": {"app": "web"}}}});
        assert_eq!(message(&good), None);
        assert_eq!(
            message(&json!({"metadata": {"name": "p"}, "spec": {"minAvailable": 1, "maxUnavailable": 1}})).unwrap(),
            "PodDisruptionBudget.policy \"p\" is invalid: spec: Invalid value: {\"maxUnavailable\":1,\"minAvailable\":1}: minAvailable and maxUnavailable cannot be both set"
        );
        let bad = json!({"metadata": {"name": "p"}, "spec": {"minAvailable": "150%",
            "selector": {"matchLabels": {"a b": "c"}}, "unhealthyPodEvictionPolicy": "Never"}});
        assert_eq!(
            message(&bad).unwrap(),
            "PodDisruptionBudget.policy \"p\" is invalid: [spec.minAvailable: Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:\"150%\"}: must not be greater than 100%, spec.selector.matchLabels: Invalid value: \"a b\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]'), spec.unhealthyPodEvictionPolicy: Unsupported value: \"Never\": supported values: \"AlwaysAllow\", \"IfHealthyBudget\"]"
        );
        let worse = json!({"metadata": {"name": "p"}, "spec": {"maxUnavailable": "5"}});
        assert_eq!(
            message(&worse).unwrap(),
            "PodDisruptionBudget.policy \"p\" is invalid: spec.maxUnavailable: Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:\"5\"}: a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')"
        );
        let negative = json!({"metadata": {"name": "p"}, "spec": {"maxUnavailable": -1}});
        assert_eq!(
            message(&negative).unwrap(),
            "PodDisruptionBudget.policy \"p\" is invalid: spec.maxUnavailable: Invalid value: -1: must be greater than or equal to 0"
        );
    }
}

//! Leases' rules as kube-apiserver's `pkg/apis/coordination/validation`
//! (`ValidateLeaseSpec`) applies them, on create and update alike.
//!
//! ## Guarantees
//! - `leaseDurationSeconds`, when set, is greater than 0; `leaseTransitions` is not negative;
//!   a `strategy` is kube's one (`OldestEmulationVersion`) or a qualified name with a prefix
//!   (at kube's own doubled path, `spec.strategy.strategy`); a `preferredHolder` needs a
//!   `strategy`.

use serde_json::Value;

use crate::field::{Cause, forbidden, go_quote, invalid, not_supported};
use crate::names::validate_qualified_name;

/// kube's `validLeaseStrategies`.
const STRATEGIES: [&str; 1] = ["OldestEmulationVersion"];

/// The causes of the Lease `object`.
pub(super) fn lease(object: &Value, causes: &mut Vec<Cause>) {
    let spec = object.get("spec").unwrap_or(&Value::Null);
    let int = |key: &str| spec.get(key).and_then(Value::as_i64);
    if let Some(duration) = int("leaseDurationSeconds").filter(|d| *d <= 0) {
        causes.push(invalid(
            "spec.leaseDurationSeconds",
            &duration.to_string(),
            "must be greater than 0",
        ));
    }
    if let Some(transitions) = int("leaseTransitions").filter(|t| *t < 0) {
        causes.push(invalid(
            "spec.leaseTransitions",
            &transitions.to_string(),
            "must be greater than or equal to 0",
        ));
    }
    let text = |key: &str| spec.get(key).and_then(Value::as_str).unwrap_or("");
    if let Some(strategy) = spec.get("strategy").and_then(Value::as_str) {
        // kube's `ValidateCoordinatedLeaseStrategy` adds `strategy` to a path that already
        // ends in it.
        let at = "spec.strategy.strategy";
        if !strategy.contains('/') {
            if !STRATEGIES.contains(&strategy) {
                causes.push(not_supported(at, &go_quote(strategy), &STRATEGIES));
            }
        } else if let Err(message) = validate_qualified_name(strategy) {
            causes.push(invalid(at, &go_quote(strategy), &message));
        }
    }
    if !text("preferredHolder").is_empty() && text("strategy").is_empty() {
        causes.push(forbidden(
            "spec.preferredHolder",
            "may only be specified if `strategy` is defined",
        ));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::resources::builtin_resources;

    #[test]
    fn leases() {
        let def = builtin_resources()
            .into_iter()
            .find(|d| d.group == "coordination.k8s.io" && d.plural == "leases")
            .unwrap();
        let lease = |spec| json!({"metadata": {"name": "l"}, "spec": spec});
        let message = |object| {
            crate::kinds::validate(&def, &object, None)
                .err()
                .map(|e| e.message)
        };
        assert_eq!(
            message(lease(
                json!({"holderIdentity": "a", "leaseDurationSeconds": 15})
            )),
            None
        );
        assert_eq!(
            message(lease(
                json!({"leaseDurationSeconds": -5, "leaseTransitions": -1,
                "preferredHolder": "b"})
            ))
            .unwrap(),
            "Lease.coordination.k8s.io \"l\" is invalid: [spec.leaseDurationSeconds: Invalid value: -5: must be greater than 0, spec.leaseTransitions: Invalid value: -1: must be greater than or equal to 0, spec.preferredHolder: Forbidden: may only be specified if `strategy` is defined]"
        );
    }

    #[test]
    fn a_lease_strategy_is_kubes_or_a_prefixed_name() {
        let message = |spec| {
            crate::kinds::refusal(
                "coordination.k8s.io",
                "leases",
                json!({"metadata": {"name": "l"}, "spec": spec}),
                None,
            )
        };
        assert_eq!(
            message(json!({"strategy": "OldestEmulationVersion", "preferredHolder": "b"})),
            None
        );
        assert_eq!(message(json!({"strategy": "example.com/mine"})), None);
        assert_eq!(
            message(json!({"strategy": "Newest", "preferredHolder": "b"})).unwrap(),
            "Lease.coordination.k8s.io \"l\" is invalid: spec.strategy.strategy: Unsupported value: \"Newest\": supported values: \"OldestEmulationVersion\""
        );
        assert_eq!(
            message(json!({"strategy": "a/b/c"})).unwrap(),
            "Lease.coordination.k8s.io \"l\" is invalid: spec.strategy.strategy: Invalid value: \"a/b/c\": a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        );
    }
}

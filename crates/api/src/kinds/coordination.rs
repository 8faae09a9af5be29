//! kube's `pkg/apis/coordination/validation` for Leases (`ValidateLeaseSpec`): a positive
//! `leaseDurationSeconds`, non-negative `leaseTransitions`, a `strategy` that is kube's one
//! (`OldestEmulationVersion`) or a qualified name with a domain, and a `preferredHolder` only
//! beside a strategy. Paths and words are kube's, its doubled path for the strategy included
//! (`spec.strategy.strategy`: kube's `ValidateCoordinatedLeaseStrategy` adds the child to a
//! path that already ends in it). Not here: LeaseCandidates (not served).

use serde_json::Value;

use super::{invalid, not_supported, present, text};
use crate::field::{Cause, forbidden};
use crate::names::validate_qualified_name;

/// kube's `validLeaseStrategies`.
const STRATEGIES: [&str; 1] = ["OldestEmulationVersion"];

/// `ValidateLeaseSpec` of a Lease.
pub(super) fn lease(object: &Value, causes: &mut Vec<Cause>) {
    if let Some(duration) = present(object, "spec.leaseDurationSeconds")
        && duration.as_i64().is_some_and(|d| d <= 0)
    {
        causes.push(invalid(
            "spec.leaseDurationSeconds",
            duration,
            "must be greater than 0",
        ));
    }
    if let Some(transitions) = present(object, "spec.leaseTransitions")
        && transitions.as_i64().is_some_and(|t| t < 0)
    {
        causes.push(invalid(
            "spec.leaseTransitions",
            transitions,
            "must be greater than or equal to 0",
        ));
    }
    let strategy = present(object, "spec.strategy").and_then(Value::as_str);
    if let Some(strategy) = strategy {
        let at = "spec.strategy.strategy";
        if !strategy.contains('/') {
            if !STRATEGIES.contains(&strategy) {
                causes.push(not_supported(
                    at,
                    &Value::String(strategy.to_owned()),
                    &STRATEGIES,
                ));
            }
        } else if let Err(problem) = validate_qualified_name(strategy) {
            causes.push(invalid(at, &Value::String(strategy.to_owned()), &problem));
        }
    }
    if !text(object, "spec.preferredHolder").is_empty() && strategy.unwrap_or("").is_empty() {
        causes.push(forbidden(
            "spec.preferredHolder",
            "may only be specified if `strategy` is defined",
        ));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    fn refusal(spec: Value) -> String {
        let def = crate::resources::builtin_resources()
            .into_iter()
            .find(|d| d.group == "coordination.k8s.io" && d.plural == "leases")
            .unwrap();
        let lease = json!({"metadata": {"name": "l"}, "spec": spec});
        crate::kinds::validate(&def, &lease, None).map_or_else(|e| e.message, |()| String::new())
    }

    #[test]
    fn leases_hold_positive_durations_and_known_strategies() {
        // What client-go's leader election writes.
        assert_eq!(
            refusal(json!({"holderIdentity": "a", "leaseDurationSeconds": 15,
                "acquireTime": "2026-12-05T00:00:00.000000Z", "leaseTransitions": 0})),
            ""
        );
        assert_eq!(
            refusal(json!({"leaseDurationSeconds": -5, "leaseTransitions": -1})),
            "Lease.coordination.k8s.io \"l\" is invalid: [spec.leaseDurationSeconds: Invalid value: -5: must be greater than 0, spec.leaseTransitions: Invalid value: -1: must be greater than or equal to 0]"
        );
        assert_eq!(
            refusal(json!({"leaseDurationSeconds": 0, "strategy": "Newest",
                "preferredHolder": "b"})),
            "Lease.coordination.k8s.io \"l\" is invalid: [spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0, spec.strategy.strategy: Unsupported value: \"Newest\": supported values: \"OldestEmulationVersion\"]"
        );
        assert_eq!(
            refusal(json!({"preferredHolder": "b"})),
            "Lease.coordination.k8s.io \"l\" is invalid: spec.preferredHolder: Forbidden: may only be specified if `strategy` is defined"
        );
        assert_eq!(
            refusal(json!({"strategy": "example.com/mine", "preferredHolder": "b"})),
            ""
        );
    }
}

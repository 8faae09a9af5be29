//! Leases' rules as kube-apiserver's `pkg/apis/coordination/validation`
//! (`ValidateLeaseSpec`) applies them, on create and update alike.
//!
//! ## Guarantees
//! - `leaseDurationSeconds`, when set, is greater than 0; `leaseTransitions` is not negative;
//!   a `preferredHolder` needs a `strategy`.
//! - Not checked (kube checks it): the `strategy`'s name (a Kubernetes-defined strategy, or a
//!   qualified name with a prefix).

use serde_json::Value;

use crate::field::{Cause, forbidden, invalid};

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
}

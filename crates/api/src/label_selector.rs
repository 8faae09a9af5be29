//! A `metav1.LabelSelector` (an object's `matchLabels` and `matchExpressions`, as
//! workloads, PodDisruptionBudgets, admission policies' and webhooks' object and namespace
//! selectors and RBAC's aggregation rules hold it) matched against an object's labels.
//!
//! ## Guarantees
//! - An empty selector matches everything; `matchLabels` and every requirement must hold.
//! - An operator kube does not know makes the match `None` (kube's "invalid label selector"):
//!   the caller decides whether that refuses or matches nothing.
//! - No allocation but the requirements' value lists; the labels are read through a lookup
//!   closure, so callers match a stored object's labels without copying them.

use serde_json::Value;

/// The `matchExpressions` of a `metav1.LabelSelector`: each one's key, operator and values.
pub fn selector_requirements(
    selector: &Value,
) -> impl Iterator<Item = (&str, Option<&str>, Vec<&str>)> {
    selector
        .get("matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|requirement| {
            let text = |key: &str| requirement.get(key).and_then(Value::as_str);
            let values = requirement
                .get("values")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            (text("key").unwrap_or(""), text("operator"), values)
        })
}

/// Whether a `metav1.LabelSelector` (`matchLabels`, `matchExpressions`) matches the labels
/// `label` looks up (an empty selector matches everything); `None` when it names an operator
/// kube does not know (kube's "invalid label selector").
pub fn label_selector_matches<'l>(
    selector: &Value,
    label: impl Fn(&str) -> Option<&'l str>,
) -> Option<bool> {
    if let Some(wanted) = selector.get("matchLabels").and_then(Value::as_object) {
        for (key, value) in wanted {
            if label(key) != value.as_str() {
                return Some(false);
            }
        }
    }
    for (key, operator, values) in selector_requirements(selector) {
        let found = label(key);
        let holds = match operator? {
            "In" => found.is_some_and(|v| values.contains(&v)),
            "NotIn" => !found.is_some_and(|v| values.contains(&v)),
            "Exists" => found.is_some(),
            "DoesNotExist" => found.is_none(),
            _ => return None,
        };
        if !holds {
            return Some(false);
        }
    }
    Some(true)
}

//! Namespaces' validation as kube-apiserver's `pkg/apis/core/validation/validation.go` has it
//! (Kubernetes 1.33): `ValidateNamespace`, `ValidateNamespaceFinalizeUpdate` and
//! `ValidateNamespaceStatusUpdate`.
//!
//! ## Guarantees
//! - A created Namespace's `spec.finalizers` are qualified names, and a name without a prefix
//!   is a standard one (`kubernetes`, `orphan`, `foregroundDeletion`): `spec.finalizers:
//!   Invalid value: "x": name is neither a standard finalizer name nor is it fully qualified`
//!   (kube's path, without an index).
//! - An update whose finalizers differ from the stored ones (a `namespaces/{name}/finalize`
//!   write: the other writes keep the stored finalizers) checks each at kube's indexed path
//!   `spec.finalizers[i]`.
//! - An update that changes `status.phase` gets `ValidateNamespaceStatusUpdate`'s rule, at
//!   kube's path `status.Phase`: `Active` without a `deletionTimestamp`, `Terminating` with one.
//!
//! - The main endpoint and `finalize` keep the stored status (kube's `namespaceStrategy` and
//!   `namespaceFinalizeStrategy`, applied by the write path), so only a `/status` write
//!   changes the phase and meets the rule; `Active` on a namespace being deleted is let
//!   through (a status without a phase is defaulted to it, `SetDefaults_NamespaceStatus`).
//!
//! ## How it differs from kube
//! - The object's metadata is validated by the write path (`meta`), not here.

use serde_json::Value;

use super::access::{get, list, text};
use crate::field::{Cause, go_quote, invalid};

/// kube's `standardFinalizers`.
const STANDARD_FINALIZERS: [&str; 3] = ["kubernetes", "orphan", "foregroundDeletion"];

/// The causes of a Namespace (`old`: the stored one of an update).
pub(super) fn namespace(object: &Value, old: Option<&Value>, causes: &mut Vec<Cause>) {
    let spec = object.get("spec").unwrap_or(&Value::Null);
    let finalizers = list(spec, "finalizers");
    let Some(old) = old else {
        for finalizer in finalizers {
            finalizer_name(finalizer.as_str().unwrap_or(""), "spec.finalizers", causes);
        }
        return;
    };
    let old_finalizers = old
        .get("spec")
        .map_or(&[][..], |spec| list(spec, "finalizers"));
    if finalizers != old_finalizers {
        for (i, finalizer) in finalizers.iter().enumerate() {
            let at = format!("spec.finalizers[{i}]");
            finalizer_name(finalizer.as_str().unwrap_or(""), &at, causes);
        }
    }
    let phase = |namespace: &Value| {
        namespace
            .get("status")
            .map_or("", |status| text(status, "phase"))
            .to_owned()
    };
    if phase(object) != phase(old) {
        let deleting = object
            .get("metadata")
            .and_then(|metadata| get(metadata, "deletionTimestamp"))
            .is_some();
        let (wanted, detail) = if deleting {
            (
                "Terminating",
                "may only be 'Terminating' if `deletionTimestamp` is not empty",
            )
        } else {
            (
                "Active",
                "may only be 'Active' if `deletionTimestamp` is empty",
            )
        };
        let phase = phase(object);
        // A write without a status gets `Active` by default (see the module's differences).
        let defaulted = deleting && phase == "Active";
        if phase != wanted && !defaulted {
            causes.push(invalid("status.Phase", &go_quote(&phase), detail));
        }
    }
}

/// `validateFinalizerName`: a qualified name, and a standard one when it has no prefix.
fn finalizer_name(name: &str, at: &str, causes: &mut Vec<Cause>) {
    for message in crate::names::qualified_name_problems(name) {
        causes.push(invalid(at, &go_quote(name), &message));
    }
    if !name.contains('/') && !STANDARD_FINALIZERS.contains(&name) {
        causes.push(invalid(
            at,
            &go_quote(name),
            "name is neither a standard finalizer name nor is it fully qualified",
        ));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    fn causes(namespace: Value, old: Option<&Value>) -> Vec<String> {
        crate::kinds::refusal_causes("", "namespaces", namespace, old)
    }

    /// Goal: a created Namespace's finalizers as `ValidateNamespace` checks them (path
    /// without index), a finalize write's as `ValidateNamespaceFinalizeUpdate` (indexed).
    #[test]
    fn finalizers_are_standard_or_qualified() {
        let namespace = |finalizers: Value| json!({"metadata": {"name": "n"}, "spec": {"finalizers": finalizers}});
        assert_eq!(
            causes(
                namespace(json!([
                    "kubernetes",
                    "bad finalizer!",
                    "example.com/x",
                    "mine"
                ])),
                None
            ),
            [
                "spec.finalizers: Invalid value: \"bad finalizer!\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
                "spec.finalizers: Invalid value: \"bad finalizer!\": name is neither a standard finalizer name nor is it fully qualified",
                "spec.finalizers: Invalid value: \"mine\": name is neither a standard finalizer name nor is it fully qualified",
            ]
        );
        let old = namespace(json!(["kubernetes"]));
        assert!(causes(old.clone(), Some(&old)).is_empty());
        assert_eq!(
            causes(namespace(json!(["kubernetes", "mine"])), Some(&old)),
            [
                "spec.finalizers[1]: Invalid value: \"mine\": name is neither a standard finalizer name nor is it fully qualified"
            ]
        );
    }

    /// Goal: `ValidateNamespaceStatusUpdate`'s phase rule, on a write that changes the phase.
    #[test]
    fn the_phase_follows_the_deletion_timestamp() {
        let old = json!({"metadata": {"name": "n"}, "status": {"phase": "Active"}});
        let mut new = old.clone();
        new["status"]["phase"] = json!("Terminating");
        assert_eq!(
            causes(new.clone(), Some(&old)),
            [
                "status.Phase: Invalid value: \"Terminating\": may only be 'Active' if `deletionTimestamp` is empty"
            ]
        );
        new["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        assert!(causes(new.clone(), Some(&old)).is_empty());
        // Being deleted: `Active` is what a write without a status gets by default.
        let terminating = new.clone();
        let mut reverted = terminating.clone();
        reverted["status"]["phase"] = json!("Active");
        assert!(causes(reverted, Some(&terminating)).is_empty());
        new["status"]["phase"] = json!("Gone");
        assert_eq!(
            causes(new, Some(&terminating)),
            [
                "status.Phase: Invalid value: \"Gone\": may only be 'Terminating' if `deletionTimestamp` is not empty"
            ]
        );
    }
}

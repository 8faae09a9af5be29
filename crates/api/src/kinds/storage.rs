//! PersistentVolumeClaims' and StorageClasses' rules as kube-apiserver's
//! `pkg/apis/core/validation` (`ValidatePersistentVolumeClaimSpec`) and
//! `pkg/apis/storage/validation` (`ValidateStorageClass`, `ValidateStorageClassUpdate`) apply
//! them, in kube's order.
//!
//! ## Guarantees
//! - A claim has at least one access mode, each one kube supports, `ReadWriteOncePod` alone; a
//!   label selector; a positive `resources.requests.storage` (`spec.resources[storage]:
//!   Required value` when absent, as kube spells the path); a storage class name that is a DNS
//!   subdomain; a volume mode `Block` or `Filesystem`.
//! - A StorageClass has a `provisioner` that is a qualified name (lowercased first), at most
//!   512 parameters of at most 256 KiB in all with no empty key, a reclaim policy `Delete` or
//!   `Retain`, a binding mode `Immediate` or `WaitForFirstConsumer`; an update changes none of
//!   `parameters`, `provisioner`, `reclaimPolicy` and `volumeBindingMode`.
//! - Not checked (kube checks them): a claim's `dataSource` / `dataSourceRef`, its update
//!   rules (an immutable spec but for a bound claim's storage request and a first volume
//!   name; no shrinking below the status' capacity) and status updates; a StorageClass's
//!   `allowedTopologies`.

use serde_json::Value;

use super::pod_spec;
use crate::field::{Cause, forbidden, go_quote, invalid, not_supported, required, too_long};
use crate::names::{validate_dns1123_subdomain, validate_qualified_name};
use crate::quantity::Quantity;

/// kube's `supportedAccessModes`, sorted as `sets.List` sorts them.
const ACCESS_MODES: [&str; 4] = [
    "ReadOnlyMany",
    "ReadWriteMany",
    "ReadWriteOnce",
    "ReadWriteOncePod",
];
/// kube's `maxProvisionerParameterLen` and `maxProvisionerParameterSize`.
const MAX_PARAMETERS: usize = 512;
const MAX_PARAMETERS_BYTES: usize = 256 * 1024;

/// The causes of the PersistentVolumeClaim `object`.
pub(super) fn claim(object: &Value, causes: &mut Vec<Cause>) {
    let spec = object.get("spec").unwrap_or(&Value::Null);
    let modes: Vec<&str> = spec
        .get("accessModes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|m| m.as_str().unwrap_or(""))
        .collect();
    if modes.is_empty() {
        causes.push(required(
            "spec.accessModes",
            "at least 1 access mode is required",
        ));
    }
    pod_spec::label_selector(spec.get("selector"), "spec.selector", causes);
    let (mut once_pod, mut others) = (false, false);
    for mode in &modes {
        if !ACCESS_MODES.contains(mode) {
            causes.push(not_supported(
                "spec.accessModes",
                &go_quote(mode),
                &ACCESS_MODES,
            ));
        } else if *mode == "ReadWriteOncePod" {
            once_pod = true;
        } else {
            others = true;
        }
    }
    if once_pod && others {
        causes.push(forbidden(
            "spec.accessModes",
            "may not use ReadWriteOncePod with other access modes",
        ));
    }
    let storage = spec
        .pointer("/resources/requests/storage")
        .filter(|v| !v.is_null());
    match storage.map(pod_spec::quantity) {
        None => causes.push(required("spec.resources[storage]", "")),
        Some(Some(amount)) if amount <= Quantity::zero() => causes.push(invalid(
            "spec.resources[storage]",
            &go_quote(&amount.to_string()),
            "must be greater than zero",
        )),
        // A text that is no quantity was refused when the body was decoded.
        Some(_) => {}
    }
    let class = spec
        .get("storageClassName")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !class.is_empty()
        && let Err(message) = validate_dns1123_subdomain(class)
    {
        causes.push(invalid("spec.storageClassName", &go_quote(class), &message));
    }
    if let Some(mode) = spec.get("volumeMode").and_then(Value::as_str)
        && !matches!(mode, "Block" | "Filesystem")
    {
        causes.push(not_supported(
            "spec.volumeMode",
            &go_quote(mode),
            &["Block", "Filesystem"],
        ));
    }
}

/// The causes of the StorageClass `object` (updating `old`).
pub(super) fn storage_class(object: &Value, old: Option<&Value>, causes: &mut Vec<Cause>) {
    let text = |object: &Value, key: &str| -> String {
        object
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let provisioner = text(object, "provisioner");
    if provisioner.is_empty() {
        causes.push(required("provisioner", ""));
    } else {
        let lower = provisioner.to_lowercase();
        if let Err(message) = validate_qualified_name(&lower) {
            causes.push(invalid("provisioner", &go_quote(&lower), &message));
        }
    }
    parameters(object.get("parameters"), causes);
    let policy = text(object, "reclaimPolicy");
    if !policy.is_empty() && !matches!(policy.as_str(), "Delete" | "Retain") {
        causes.push(not_supported(
            "reclaimPolicy",
            &go_quote(&policy),
            &["Delete", "Retain"],
        ));
    }
    match object.get("volumeBindingMode").and_then(Value::as_str) {
        None => causes.push(required("volumeBindingMode", "")),
        Some("Immediate" | "WaitForFirstConsumer") => {}
        Some(mode) => causes.push(not_supported(
            "volumeBindingMode",
            &go_quote(mode),
            &["Immediate", "WaitForFirstConsumer"],
        )),
    }
    let Some(old) = old else {
        return;
    };
    let map = |object: &Value| object.get("parameters").filter(|p| !p.is_null()).cloned();
    if map(object) != map(old) {
        causes.push(forbidden(
            "parameters",
            "updates to parameters are forbidden.",
        ));
    }
    if provisioner != text(old, "provisioner") {
        causes.push(forbidden(
            "provisioner",
            "updates to provisioner are forbidden.",
        ));
    }
    if policy != text(old, "reclaimPolicy") {
        causes.push(forbidden(
            "reclaimPolicy",
            "updates to reclaimPolicy are forbidden.",
        ));
    }
    let mode = text(object, "volumeBindingMode");
    if mode != text(old, "volumeBindingMode") {
        causes.push(invalid(
            "volumeBindingMode",
            &go_quote(&mode),
            "field is immutable",
        ));
    }
}

/// `validateParameters` (empty allowed).
fn parameters(parameters: Option<&Value>, causes: &mut Vec<Cause>) {
    let Some(parameters) = parameters.and_then(Value::as_object) else {
        return;
    };
    if parameters.len() > MAX_PARAMETERS {
        causes.push(too_long("parameters", MAX_PARAMETERS as i64));
        return;
    }
    let mut total = 0;
    for (key, value) in parameters {
        if key.is_empty() {
            causes.push(invalid("parameters", "\"\"", "field can not be empty."));
        }
        total += key.len() + value.as_str().map_or(0, str::len);
    }
    if total > MAX_PARAMETERS_BYTES {
        causes.push(too_long("parameters", MAX_PARAMETERS_BYTES as i64));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    fn message(group: &str, plural: &str, object: Value, old: Option<&Value>) -> Option<String> {
        crate::kinds::refusal(group, plural, object, old)
    }

    #[test]
    fn claims() {
        let good = json!({"metadata": {"name": "c"}, "spec": {"accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}}, "storageClassName": "fast"}});
        assert_eq!(message("", "persistentvolumeclaims", good, None), None);
        assert_eq!(
            message(
                "",
                "persistentvolumeclaims",
                json!({"metadata": {"name": "c"}, "spec": {}}),
                None
            )
            .unwrap(),
            "PersistentVolumeClaim \"c\" is invalid: [spec.accessModes: Required value: at least 1 access mode is required, spec.resources[storage]: Required value]"
        );
        let bad = json!({"metadata": {"name": "c"}, "spec": {
            "accessModes": ["ReadWriteOncePod", "ReadWriteOnce", "Sometimes"],
            "resources": {"requests": {"storage": "0"}}, "storageClassName": "Fast",
            "volumeMode": "Raw"}});
        assert_eq!(
            message("", "persistentvolumeclaims", bad, None).unwrap(),
            "PersistentVolumeClaim \"c\" is invalid: [spec.accessModes: Unsupported value: \"Sometimes\": supported values: \"ReadOnlyMany\", \"ReadWriteMany\", \"ReadWriteOnce\", \"ReadWriteOncePod\", spec.accessModes: Forbidden: may not use ReadWriteOncePod with other access modes, spec.resources[storage]: Invalid value: \"0\": must be greater than zero, spec.storageClassName: Invalid value: \"Fast\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*'), spec.volumeMode: Unsupported value: \"Raw\": supported values: \"Block\", \"Filesystem\"]"
        );
    }

    #[test]
    fn storage_classes() {
        let class = json!({"metadata": {"name": "fast"}, "provisioner": "kubernetes.io/no-provisioner",
            "parameters": {"type": "ssd"}});
        assert_eq!(
            message("storage.k8s.io", "storageclasses", class.clone(), None),
            None
        );
        assert_eq!(
            message(
                "storage.k8s.io",
                "storageclasses",
                json!({"metadata": {"name": "s"}}),
                None
            )
            .unwrap(),
            "StorageClass.storage.k8s.io \"s\" is invalid: provisioner: Required value"
        );
        let bad = json!({"metadata": {"name": "s"}, "provisioner": "Bad Provisioner",
            "reclaimPolicy": "Recycle", "volumeBindingMode": "Later"});
        assert_eq!(
            message("storage.k8s.io", "storageclasses", bad, None).unwrap(),
            "StorageClass.storage.k8s.io \"s\" is invalid: [provisioner: Invalid value: \"bad provisioner\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]'), reclaimPolicy: Unsupported value: \"Recycle\": supported values: \"Delete\", \"Retain\", volumeBindingMode: Unsupported value: \"Later\": supported values: \"Immediate\", \"WaitForFirstConsumer\"]"
        );
        let mut old = class.clone();
        crate::defaults::apply_defaults(
            &crate::resources::builtin_resources()
                .into_iter()
                .find(|d| d.plural == "storageclasses")
                .unwrap(),
            &mut old,
        );
        let mut changed = class;
        changed["parameters"] = json!({"type": "hdd"});
        changed["reclaimPolicy"] = json!("Retain");
        assert_eq!(
            message("storage.k8s.io", "storageclasses", changed, Some(&old)).unwrap(),
            "StorageClass.storage.k8s.io \"fast\" is invalid: [parameters: Forbidden: updates to parameters are forbidden., reclaimPolicy: Forbidden: updates to reclaimPolicy are forbidden.]"
        );
    }
}

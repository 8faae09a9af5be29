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
//! - A claim's update (`ValidatePersistentVolumeClaimUpdate`) keeps its spec but for a bound
//!   claim's storage request, a first `volumeName`, a storage class name that takes over the
//!   beta annotation's or is set where none was (`spec: Forbidden: spec is immutable after
//!   creation except resources.requests and volumeAttributesClassName for bound claims` and a
//!   diff); a storage request shrinks only above the status' capacity (kube 1.33's
//!   `RecoverVolumeExpansionFailure`, on by default); the beta storage class annotation and
//!   the volume mode (`volumeMode: Invalid value: ...: field is immutable`, kube's path) stay.
//! - A claim's `dataSource` and `dataSourceRef` have a name and a kind (`PersistentVolumeClaim`
//!   without an API group), a DNS subdomain as API group, a DNS label as namespace; they
//!   match unless the reference names a namespace, which then excludes `dataSource` (kube's
//!   invalid value there, a `*field.Path` printed with `%#v`, prints as the path's text).
//! - Not checked (kube checks them): status updates; a claim's `volumeAttributesClassName` is
//!   never seen here (the defaults drop it, as kube 1.33 does with `VolumeAttributesClass` off); a StorageClass's `allowedTopologies`.
//!
//! Differs from kube: the diff after the immutable-spec message is
//! [`super::go_struct_diff`]'s (field names with a capital first letter, values as JSON), not
//! go-cmp's (Go syntax whose spacing go-cmp varies on purpose).

use serde_json::{Map, Value};

use super::pod_spec;
use crate::field::{Cause, forbidden, go_quote, invalid, not_supported, required, too_long};
use crate::names::validate_dns1123_subdomain;
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

/// A claim's or volume's access modes (`ValidatePersistentVolumeSpec` and
/// `ValidatePersistentVolumeClaimSpec` share the check): each one kube supports, and
/// `ReadWriteOncePod` alone.
pub(super) fn access_modes<'a>(modes: impl Iterator<Item = &'a str>, causes: &mut Vec<Cause>) {
    let (mut once_pod, mut others) = (false, false);
    for mode in modes {
        if !ACCESS_MODES.contains(&mode) {
            causes.push(not_supported(
                "spec.accessModes",
                &go_quote(mode),
                &ACCESS_MODES,
            ));
        } else if mode == "ReadWriteOncePod" {
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
}

/// The causes of the PersistentVolumeClaim `object` (updating `old`).
pub(super) fn claim(object: &Value, old: Option<&Value>, causes: &mut Vec<Cause>) {
    claim_spec(object, causes);
    if let Some(old) = old {
        claim_update(object, old, causes);
    }
}

/// kube's `BetaStorageClassAnnotation`.
const CLASS_ANNOTATION: &str = "volume.beta.kubernetes.io/storage-class";

/// The annotation `key` of `object`, if set.
fn annotation<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    object
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
}

/// A claim's spec as kube compares it (`apiequality.Semantic`): null, empty lists and empty
/// maps are Go's nil, quantities compare by value (canonical text).
fn semantic_spec(object: &Value) -> Map<String, Value> {
    fn normal(value: &Value) -> Option<Value> {
        match value {
            Value::Null => None,
            Value::Array(items) if items.is_empty() => None,
            Value::Object(map) => {
                let map: Map<String, Value> = map
                    .iter()
                    .filter_map(|(k, v)| normal(v).map(|v| (k.clone(), v)))
                    .collect();
                (!map.is_empty()).then_some(Value::Object(map))
            }
            other => Some(other.clone()),
        }
    }
    let mut spec = object
        .get("spec")
        .and_then(normal)
        .and_then(|s| s.as_object().cloned())
        .unwrap_or_default();
    if let Some(resources) = spec.get_mut("resources").and_then(Value::as_object_mut) {
        for list in resources.values_mut().filter_map(Value::as_object_mut) {
            for amount in list.values_mut() {
                if let Some(q) = pod_spec::quantity(amount) {
                    *amount = Value::String(q.to_string());
                }
            }
        }
    }
    spec
}

/// `ValidatePersistentVolumeClaimUpdate`'s own rules (kube 1.33's defaults:
/// `RecoverVolumeExpansionFailure` on, `VolumeAttributesClass` off, so that a class of volume
/// attributes is neither compared nor checked).
fn claim_update(object: &Value, old: &Value, causes: &mut Vec<Cause>) {
    let mut new_spec = semantic_spec(object);
    let mut old_spec = semantic_spec(old);
    let text = |spec: &Map<String, Value>, key: &str| -> String {
        spec.get(key)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    if text(&old_spec, "volumeName").is_empty() {
        match new_spec.get("volumeName") {
            Some(name) => old_spec.insert("volumeName".to_owned(), name.clone()),
            None => old_spec.remove("volumeName"),
        };
    }
    let class = |object: &Value| -> Option<String> {
        object
            .pointer("/spec/storageClassName")
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let (new_class, old_class) = (class(object), class(old));
    let old_annotation = annotation(old, CLASS_ANNOTATION);
    let new_annotation = annotation(object, CLASS_ANNOTATION);
    // `validateStorageClassUpgradeFromAnnotation`.
    let from_annotation = old_annotation.is_some_and(|was| {
        old_class.is_none()
            && new_class.as_deref() == Some(was)
            && new_annotation.is_none_or(|is| is == was)
    });
    if from_annotation {
        new_spec.remove("storageClassName");
    } else {
        let (is, was) = (new_annotation.unwrap_or(""), old_annotation.unwrap_or(""));
        if is != was {
            causes.push(invalid(
                &format!("metadata.annotations.{CLASS_ANNOTATION}"),
                &go_quote(is),
                "field is immutable",
            ));
        }
        // `validateStorageClassUpgradeFromNil`.
        if new_class.is_some()
            && old_class.is_none()
            && old_annotation.is_none_or(|was| new_class.as_deref() == Some(was))
        {
            match old_spec.get("storageClassName") {
                Some(name) => new_spec.insert("storageClassName".to_owned(), name.clone()),
                None => new_spec.remove("storageClassName"),
            };
        }
    }
    let bound = object.pointer("/status/phase").and_then(Value::as_str) == Some("Bound");
    if bound
        && let Some(requests) = new_spec
            .get_mut("resources")
            .and_then(|r| r.get_mut("requests"))
            .and_then(Value::as_object_mut)
    {
        let was = old_spec
            .get("resources")
            .and_then(|r| r.get("requests"))
            .and_then(|r| r.get("storage"))
            .cloned()
            .unwrap_or_else(|| Value::String("0".to_owned()));
        requests.insert("storage".to_owned(), was);
    }
    for spec in [&mut new_spec, &mut old_spec] {
        spec.remove("volumeAttributesClassName");
    }
    if new_spec != old_spec {
        let diff = super::go_struct_diff("core.PersistentVolumeClaimSpec", &old_spec, &new_spec);
        causes.push(forbidden(
            "spec",
            &format!(
                "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims{diff}"
            ),
        ));
    }
    let size = |object: &Value, pointer: &str| {
        object
            .pointer(pointer)
            .and_then(pod_spec::quantity)
            .unwrap_or_else(Quantity::zero)
    };
    let new_size = size(object, "/spec/resources/requests/storage");
    if new_size < size(old, "/spec/resources/requests/storage")
        && new_size <= size(old, "/status/capacity/storage")
    {
        causes.push(forbidden(
            "spec.resources.requests.storage",
            "field can not be less than status.capacity",
        ));
    }
    let mode = |object: &Value| {
        object
            .pointer("/spec/volumeMode")
            .filter(|m| !m.is_null())
            .cloned()
    };
    if mode(object) != mode(old) {
        let printed =
            mode(object).map_or_else(|| "null".to_owned(), |m| crate::field::go_value(&m));
        causes.push(invalid("volumeMode", &printed, "field is immutable"));
    }
}

/// `ValidatePersistentVolumeClaimSpec` of the claim `object`.
fn claim_spec(object: &Value, causes: &mut Vec<Cause>) {
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
    access_modes(modes.iter().copied(), causes);
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
    let source = spec.get("dataSource").filter(|v| !v.is_null());
    let reference = spec.get("dataSourceRef").filter(|v| !v.is_null());
    if let Some(source) = source {
        data_source(source, "spec.dataSource", causes);
    }
    if let Some(reference) = reference {
        data_source(reference, "spec.dataSourceRef", causes);
    }
    let field = |value: &Value, key: &str| value.get(key).filter(|v| !v.is_null()).cloned();
    if let Some(reference) = reference
        && field(reference, "namespace").is_some_and(|n| n.as_str() != Some(""))
    {
        if source.is_some() {
            causes.push(invalid(
                "spec",
                "spec.dataSource",
                "may not be specified when dataSourceRef.namespace is specified",
            ));
        }
    } else if let (Some(source), Some(reference)) = (source, reference)
        && ["apiGroup", "kind", "name"]
            .iter()
            .any(|key| field(source, key) != field(reference, key))
    {
        causes.push(invalid(
            "spec",
            "spec.dataSource",
            "must match dataSourceRef",
        ));
    }
}

/// `validateDataSource` / `validateDataSourceRef` (a namespace only in the latter) at `at`.
fn data_source(source: &Value, at: &str, causes: &mut Vec<Cause>) {
    let text = |key: &str| source.get(key).and_then(Value::as_str).unwrap_or("");
    if text("name").is_empty() {
        causes.push(required(&format!("{at}.name"), ""));
    }
    let kind = text("kind");
    if kind.is_empty() {
        causes.push(required(&format!("{at}.kind"), ""));
    }
    let group = text("apiGroup");
    if group.is_empty() && kind != "PersistentVolumeClaim" {
        causes.push(invalid(
            at,
            &go_quote(kind),
            "must be 'PersistentVolumeClaim' when referencing the default apiGroup",
        ));
    }
    if !group.is_empty()
        && let Err(message) = validate_dns1123_subdomain(group)
    {
        causes.push(invalid(
            &format!("{at}.apiGroup"),
            &go_quote(group),
            &message,
        ));
    }
    let namespace = text("namespace");
    if !namespace.is_empty()
        && let Err(message) = crate::names::validate_dns1123_label(namespace)
    {
        causes.push(invalid(
            &format!("{at}.namespace"),
            &go_quote(namespace),
            &message,
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
        for message in crate::names::qualified_name_problems(&lower) {
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
    fn claim_data_sources() {
        let claim = |sources: Value| {
            let mut spec = json!({"accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}}});
            for (k, v) in sources.as_object().unwrap() {
                spec[k] = v.clone();
            }
            json!({"metadata": {"name": "c"}, "spec": spec})
        };
        let snapshot = json!({"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot",
            "name": "s"});
        let good = claim(json!({"dataSource": snapshot, "dataSourceRef": snapshot}));
        assert_eq!(message("", "persistentvolumeclaims", good, None), None);
        let bad = claim(json!({"dataSource": {"kind": "Snapshot"},
            "dataSourceRef": {"apiGroup": "Bad Group", "kind": "K", "name": "n"}}));
        assert_eq!(
            message("", "persistentvolumeclaims", bad, None).unwrap(),
            "PersistentVolumeClaim \"c\" is invalid: [spec.dataSource.name: Required value, spec.dataSource: Invalid value: \"Snapshot\": must be 'PersistentVolumeClaim' when referencing the default apiGroup, spec.dataSourceRef.apiGroup: Invalid value: \"Bad Group\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*'), spec: Invalid value: spec.dataSource: must match dataSourceRef]"
        );
        let mut elsewhere = snapshot.clone();
        elsewhere["namespace"] = json!("other");
        let crossed = claim(json!({"dataSource": snapshot, "dataSourceRef": elsewhere}));
        assert_eq!(
            message("", "persistentvolumeclaims", crossed, None).unwrap(),
            "PersistentVolumeClaim \"c\" is invalid: spec: Invalid value: spec.dataSource: may not be specified when dataSourceRef.namespace is specified"
        );
    }

    #[test]
    fn claim_updates() {
        let old = json!({"metadata": {"name": "c"}, "spec": {"accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}}, "volumeMode": "Filesystem"}});
        let claims =
            |object: Value, old: &Value| message("", "persistentvolumeclaims", object, Some(old));
        // A first volume name, and a class where none was, are allowed.
        let mut named = old.clone();
        named["spec"]["volumeName"] = json!("pv-1");
        named["spec"]["storageClassName"] = json!("fast");
        assert_eq!(claims(named.clone(), &old), None);
        // An unbound claim's request is part of the immutable spec.
        let mut grown = named.clone();
        grown["spec"]["resources"]["requests"]["storage"] = json!("2Gi");
        assert_eq!(
            claims(grown.clone(), &named).unwrap(),
            "PersistentVolumeClaim \"c\" is invalid: spec: Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims\n  core.PersistentVolumeClaimSpec{\n- \tResources: {\"requests\":{\"storage\":\"1Gi\"}},\n+ \tResources: {\"requests\":{\"storage\":\"2Gi\"}},\n  }\n"
        );
        // A bound claim's grows; it shrinks only above its status' capacity.
        let mut bound = named.clone();
        bound["status"] = json!({"phase": "Bound", "capacity": {"storage": "1Gi"}});
        grown["status"] = bound["status"].clone();
        assert_eq!(claims(grown.clone(), &bound), None);
        let mut shrunk = grown.clone();
        shrunk["spec"]["resources"]["requests"]["storage"] = json!("1024Mi");
        assert_eq!(
            claims(shrunk, &grown).unwrap(),
            "PersistentVolumeClaim \"c\" is invalid: spec.resources.requests.storage: Forbidden: field can not be less than status.capacity"
        );
        let mut moved = named.clone();
        moved["spec"]["volumeName"] = json!("pv-2");
        moved["spec"]["volumeMode"] = json!("Block");
        moved["metadata"]["annotations"] = json!({"volume.beta.kubernetes.io/storage-class": "x"});
        assert_eq!(
            claims(moved, &named).unwrap(),
            "PersistentVolumeClaim \"c\" is invalid: [metadata.annotations.volume.beta.kubernetes.io/storage-class: Invalid value: \"x\": field is immutable, spec: Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims\n  core.PersistentVolumeClaimSpec{\n- \tVolumeMode: \"Filesystem\",\n+ \tVolumeMode: \"Block\",\n- \tVolumeName: \"pv-1\",\n+ \tVolumeName: \"pv-2\",\n  }\n, volumeMode: Invalid value: \"Block\": field is immutable]"
        );
        // The beta annotation's class may move to the field.
        let mut annotated = old.clone();
        annotated["metadata"]["annotations"] =
            json!({"volume.beta.kubernetes.io/storage-class": "gold"});
        let mut upgraded = annotated.clone();
        upgraded["spec"]["storageClassName"] = json!("gold");
        assert_eq!(claims(upgraded, &annotated), None);
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

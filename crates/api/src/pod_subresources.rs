//! What the pod subresources that write part of a pod's spec share: `ephemeralcontainers`
//! ([`crate::ephemeral`]) and `resize` ([`crate::resize`]). Both are kube's pattern of
//! `pkg/registry/core/pod/strategy.go` (1.33): the stored pod is kept whole but for the part
//! the subresource owns, which is taken from the body.
//!
//! ## Guarantees
//! - [`stored_with_spec`] answers the stored pod with the spec it is given: `status` and every
//!   field of `metadata` are the stored ones (kube's `ResetObjectMetaForStatus` and its status
//!   copy), except `resourceVersion` (the caller's precondition) and `managedFields` (the
//!   write path records the subresource's manager), which are the body's.
//! - `metadata.generation` is the stored one plus one when the spec changed (kube's
//!   `updatePodGeneration`), the stored one otherwise.

use serde_json::{Map, Value};

use crate::resources::ResourceDef;

/// Whether `def` is core/v1 pods, which have the subresources.
#[must_use]
pub fn is_pods(def: &ResourceDef) -> bool {
    def.group.is_empty() && def.plural == "pods"
}

/// The containers of `list` (`containers`, `initContainers`, `ephemeralContainers`) of `pod`'s
/// spec; none when absent.
pub(crate) fn containers(pod: &Value, list: &str) -> Vec<Value> {
    pod.pointer(&format!("/spec/{list}"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// A container's name (`""` without one).
pub(crate) fn name_of(container: &Value) -> &str {
    container
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// The stored pod `old` with `spec`, and the metadata of the body `new` the write path keeps
/// (see the module's guarantees).
#[must_use]
pub fn stored_with_spec(old: &Value, new: &Value, spec: Map<String, Value>) -> Value {
    let mut pod = old.clone();
    let changed = old.get("spec").and_then(Value::as_object) != Some(&spec);
    if let Some(map) = pod.as_object_mut() {
        map.insert("spec".to_owned(), Value::Object(spec));
    }
    let kept: Map<String, Value> = ["resourceVersion", "managedFields"]
        .into_iter()
        .filter_map(|key| {
            new.pointer(&format!("/metadata/{key}"))
                .map(|value| (key.to_owned(), value.clone()))
        })
        .collect();
    if let Some(metadata) = pod.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.extend(kept);
        if changed && let Some(generation) = metadata.get("generation").and_then(Value::as_i64) {
            metadata.insert("generation".to_owned(), Value::from(generation + 1));
        }
    }
    pod
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_the_spec_given_resource_version_and_managed_fields_change() {
        let old = json!({"metadata": {"name": "p", "resourceVersion": "5", "generation": 2,
                                      "labels": {"a": "b"}},
                         "spec": {"containers": [{"name": "c"}]},
                         "status": {"phase": "Running"}});
        let new = json!({"metadata": {"name": "p", "resourceVersion": "5", "generation": 9,
                                      "labels": {}, "managedFields": [{"manager": "m"}]},
                         "status": {"phase": "Failed"}});
        let same = stored_with_spec(&old, &new, old["spec"].as_object().unwrap().clone());
        assert_eq!(same["metadata"]["generation"], 2);
        assert_eq!(same["metadata"]["labels"], json!({"a": "b"}));
        assert_eq!(same["metadata"]["managedFields"], json!([{"manager": "m"}]));
        assert_eq!(same["status"], json!({"phase": "Running"}));
        let spec = json!({"containers": [{"name": "c", "image": "x"}]});
        let changed = stored_with_spec(&old, &new, spec.as_object().unwrap().clone());
        assert_eq!(changed["metadata"]["generation"], 3);
        assert_eq!(changed["spec"], spec);
    }
}

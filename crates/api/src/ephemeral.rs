//! The `ephemeralcontainers` subresource of pods (`kubectl debug`), with kube-apiserver's
//! strategy (`pkg/registry/core/pod/strategy.go`, `ephemeralContainersStrategy`) and
//! validation (`ValidatePodEphemeralContainersUpdate`).
//!
//! ## Guarantees
//! - A write through the subresource changes only `spec.ephemeralContainers` (and the
//!   metadata the write path keeps: resourceVersion, managed fields): everything else of the
//!   stored pod stays as it is, whatever the body says
//!   ([`crate::pod_subresources::stored_with_spec`]); `metadata.generation` goes up by one
//!   when a container is added (kube's `updatePodGeneration`, 1.33).
//! - An ephemeral container already in the pod may be neither removed nor changed: 422
//!   `Forbidden` on `spec.ephemeralContainers` ("existing ephemeral containers "x" may not be
//!   removed", "... may not be changed"; kube-apiserver appends a diff of the change to the
//!   latter, which is not reproduced).
//! - A new one needs a name, unique among the pod's containers, init containers and ephemeral
//!   containers (422 `Required` / `Duplicate`), and an image (422 `Required`).
//! - The server's defaults of pod containers (`terminationMessagePath`,
//!   `terminationMessagePolicy`, `imagePullPolicy`, `resources`) are applied to the new ones by
//!   [`crate::defaults`] before these checks, so a container sent again as it was returned
//!   compares equal.

use serde_json::Value;

use crate::error::ApiError;
use crate::pod_subresources::{containers, name_of, stored_with_spec};
use crate::resources::ResourceDef;

/// The subresource's name.
pub const SUBRESOURCE: &str = "ephemeralcontainers";

/// Whether `def` is core/v1 pods, which has the subresource.
#[must_use]
pub fn has_ephemeral_containers(def: &ResourceDef) -> bool {
    crate::pod_subresources::is_pods(def)
}

/// The pod `old` with the new ephemeral containers of `new` (and `new`'s metadata fields the
/// write path keeps), checked as kube-apiserver checks them.
///
/// # Errors
/// 422 Invalid, see the module docs.
pub fn update(def: &ResourceDef, old: &Value, new: &Value) -> Result<Value, ApiError> {
    let name = old
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let wanted = containers(new, "ephemeralContainers");
    let mut causes = Vec::new();
    for existing in containers(old, "ephemeralContainers") {
        let existing_name = name_of(&existing);
        match wanted.iter().find(|c| name_of(c) == existing_name) {
            None => causes.push((
                "spec.ephemeralContainers".to_owned(),
                format!(
                    "Forbidden: existing ephemeral containers {existing_name:?} may not be removed\n"
                ),
                "FieldValueForbidden".to_owned(),
            )),
            Some(container) if *container != existing => causes.push((
                "spec.ephemeralContainers".to_owned(),
                format!("Forbidden: existing ephemeral containers {existing_name:?} may not be changed\n"),
                "FieldValueForbidden".to_owned(),
            )),
            Some(_) => {}
        }
    }
    let mut seen: Vec<String> = containers(old, "containers")
        .iter()
        .chain(containers(old, "initContainers").iter())
        .map(|c| name_of(c).to_owned())
        .collect();
    for (index, container) in wanted.iter().enumerate() {
        let field = format!("spec.ephemeralContainers[{index}]");
        let container_name = name_of(container);
        if container_name.is_empty() {
            causes.push((
                format!("{field}.name"),
                "Required value".to_owned(),
                "FieldValueRequired".to_owned(),
            ));
        } else if seen.iter().any(|n| n == container_name) {
            causes.push((
                format!("{field}.name"),
                format!("Duplicate value: {container_name:?}"),
                "FieldValueDuplicate".to_owned(),
            ));
        } else {
            seen.push(container_name.to_owned());
        }
        if container
            .get("image")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            causes.push((
                format!("{field}.image"),
                "Required value".to_owned(),
                "FieldValueRequired".to_owned(),
            ));
        }
    }
    if !causes.is_empty() {
        return Err(ApiError::invalid(def, name, causes));
    }
    let mut spec = old
        .get("spec")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    if wanted.is_empty() {
        spec.remove("ephemeralContainers");
    } else {
        spec.insert("ephemeralContainers".to_owned(), Value::Array(wanted));
    }
    let pod = stored_with_spec(old, new, spec);
    Ok(pod)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pods() -> ResourceDef {
        crate::builtin_resources()
            .into_iter()
            .find(|d| d.plural == "pods")
            .unwrap()
    }

    fn pod(ephemeral: Value) -> Value {
        json!({"metadata": {"name": "p", "resourceVersion": "5", "labels": {"a": "b"}},
               "spec": {"containers": [{"name": "main", "image": "busybox"}],
                        "ephemeralContainers": ephemeral},
               "status": {"phase": "Pending"}})
    }

    #[test]
    fn only_ephemeral_containers_change() {
        let old = pod(json!([{"name": "debug", "image": "busybox"}]));
        let mut new = pod(json!([{"name": "debug", "image": "busybox"},
                                 {"name": "two", "image": "alpine"}]));
        new["metadata"]["labels"] = json!({"changed": "yes"});
        new["metadata"]["resourceVersion"] = json!("6");
        new["spec"]["containers"] = json!([]);
        new["status"] = json!({"phase": "Running"});
        let updated = update(&pods(), &old, &new).unwrap();
        let mut expected = pod(json!([{"name": "debug", "image": "busybox"},
                                      {"name": "two", "image": "alpine"}]));
        expected["metadata"]["resourceVersion"] = json!("6");
        assert_eq!(updated, expected);
    }

    #[test]
    fn existing_ones_stay_and_new_ones_are_checked() {
        let old = pod(json!([{"name": "debug", "image": "busybox"}]));
        let removed = update(&pods(), &old, &pod(json!([]))).unwrap_err();
        assert_eq!(removed.code, 422);
        assert_eq!(
            removed.message,
            "Pod \"p\" is invalid: spec.ephemeralContainers: Forbidden: existing ephemeral containers \"debug\" may not be removed\n"
        );
        let changed = update(
            &pods(),
            &old,
            &pod(json!([{"name": "debug", "image": "x"}])),
        )
        .unwrap_err();
        assert!(
            changed
                .message
                .contains("spec.ephemeralContainers: Forbidden: existing ephemeral containers \"debug\" may not be changed"),
            "{}",
            changed.message
        );
        let duplicate = update(
            &pods(),
            &old,
            &pod(json!([{"name": "debug", "image": "busybox"}, {"name": "main", "image": "x"}])),
        )
        .unwrap_err();
        assert!(
            duplicate
                .message
                .contains("spec.ephemeralContainers[1].name: Duplicate value: \"main\""),
            "{}",
            duplicate.message
        );
        let no_image = update(&pods(), &pod(json!([])), &pod(json!([{"name": "x"}]))).unwrap_err();
        assert!(
            no_image
                .message
                .contains("spec.ephemeralContainers[0].image: Required value"),
            "{}",
            no_image.message
        );
    }
}

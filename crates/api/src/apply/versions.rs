//! Server-side apply at one version of a resource whose other managers recorded their
//! fields at another (a custom resource converted by its CRD's webhook): kube's field
//! manager converts the objects to each manager's version to find what the apply changes of
//! that manager's fields; [`at_version`] does so for the managers of one other version,
//! given the objects before and after the apply at that version.
//!
//! ## Guarantees
//! - The managers recorded at `def`'s version (but the applier) whose paths the change from
//!   `before` to `after` modifies or adds are conflicts, kube's 409 in its words (as
//!   [`super::apply`]'s), unless `force`; with `force` (or none) those paths, and the paths
//!   removed, leave their sets, and a manager left owning nothing is dropped.
//! - Managers at other versions are left as they are; nothing here fails on an object its
//!   schema cannot walk but with kube's `failed to apply` 400.

use serde_json::Value;

use super::{ManagerId, Managers, conflict_error, schema_root, typed};
use crate::error::ApiError;
use crate::resources::ResourceDef;

/// Applies to `managers` what the apply by `applier` changed of the fields recorded at
/// `def`'s version: `before` and `after` are the object at that version before and after
/// the apply, `schema` that version's structural schema (see the module docs).
///
/// # Errors
/// The conflicts (409) without `force`; an object the schema cannot walk (400).
pub fn at_version(
    def: &ResourceDef,
    schema: Option<&Value>,
    (before, after): (&Value, &Value),
    managers: &mut Managers,
    applier: &ManagerId,
    force: bool,
) -> Result<(), ApiError> {
    let version = def.api_version();
    let recorded =
        |(id, entry): (&ManagerId, &super::Entry)| id != applier && entry.api_version == version;
    if !managers.iter().any(recorded) {
        return Ok(());
    }
    let ty = schema_root(def, schema);
    let comparison = typed::compare_without_managed_fields(before, after, ty)
        .map_err(|e| ApiError::bad_request(format!("failed to apply: {e}")))?;
    let changed = comparison.modified.union(&comparison.added);
    let mut conflicts = Vec::new();
    for (id, entry) in managers.iter().filter(|&m| recorded(m)) {
        for path in entry.set.intersection(&changed).paths() {
            conflicts.push((id.clone(), path));
        }
    }
    if !conflicts.is_empty() && !force {
        conflicts.sort();
        return Err(conflict_error(&conflicts));
    }
    for (id, entry) in managers.iter_mut() {
        if id != applier && entry.api_version == version {
            entry.set.remove_all(&changed);
            entry.set.remove_all(&comparison.removed);
        }
    }
    managers.retain(|id, entry| id == applier || !entry.set.is_empty());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apply::{Entry, Operation, managers_of};
    use serde_json::json;

    fn widget(spec: Value, managed: Value) -> Value {
        json!({"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "a", "managedFields": managed}, "spec": spec})
    }

    /// Goal: a manager at this version owning a field the apply changed conflicts (kube's
    /// words), loses it under `force`, and is dropped once it owns nothing; the applier and
    /// managers at other versions are untouched.
    #[test]
    fn managers_at_the_version_conflict_and_lose_what_changed() {
        let def = ResourceDef::named("example.com", "v1", "widgets", "Widget", true);
        let managed = json!([
            {"manager": "editor", "operation": "Update", "apiVersion": "example.com/v1",
                "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:hostPort": {}}}},
            {"manager": "old", "operation": "Update", "apiVersion": "example.com/v0",
                "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:hostPort": {}}}}
        ]);
        let before = widget(json!({"hostPort": "h:1"}), managed.clone());
        let after = widget(json!({"hostPort": "h:2"}), managed);
        let applier = ManagerId {
            manager: "applier".to_owned(),
            operation: Operation::Apply,
            api_version: String::new(),
            subresource: String::new(),
        };
        let mut managers = managers_of(&before);
        managers.insert(
            applier.clone(),
            Entry {
                api_version: "example.com/v2".to_owned(),
                time: None,
                set: crate::apply::fieldpath::Set::new(),
            },
        );
        let refused = at_version(
            &def,
            None,
            (&before, &after),
            &mut managers.clone(),
            &applier,
            false,
        )
        .unwrap_err();
        assert_eq!(refused.code, 409);
        assert_eq!(
            refused.message,
            "Apply failed with 1 conflict: conflict with \"editor\" using example.com/v1: .spec.hostPort"
        );
        at_version(&def, None, (&before, &after), &mut managers, &applier, true).unwrap();
        let names: Vec<&str> = managers.keys().map(|id| id.manager.as_str()).collect();
        assert_eq!(names, ["applier", "old"], "editor owned nothing more");
    }
}

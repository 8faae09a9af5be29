//! The `approval` subresource of CertificateSigningRequests (`kubectl certificate approve`),
//! with kube-apiserver's strategy (`pkg/registry/certificates/certificates/strategy.go`,
//! `csrApprovalStrategy`).
//!
//! ## Guarantees
//! - A write through `approval` changes only `status.conditions` (and the metadata the write
//!   path keeps: resourceVersion, managed fields); the spec, the certificate and the rest of the
//!   stored request stay as they are, whatever the body says.
//! - Each condition gets `lastUpdateTime` = now when it has none, and `lastTransitionTime` from
//!   the stored condition of the same type and status when there is one (now otherwise), as
//!   `populateConditionTimestamps` does.
//! - Conditions are checked as kube-apiserver's CSR validation does (422 Invalid): a type is
//!   required; the status must be `True`, `False` or `Unknown` (only `True` for `Approved`,
//!   `Denied` and `Failed`); `Approved` and `Denied` exclude each other; a type appears once;
//!   an `Approved`, `Denied` or `Failed` condition may not be removed. Stored conditions that
//!   already break the first three rules keep being accepted, as there.
//! - A created request names its requester ([`prepare_create`]) and has no status.
//! - Not checked: the request's PEM and the signer name's format on create.

use serde_json::{Map, Value, json};

use crate::error::ApiError;
use crate::resources::ResourceDef;

/// The subresource's name.
pub const APPROVAL: &str = "approval";

/// Whether `def` is certificates.k8s.io certificatesigningrequests, which has `approval`.
#[must_use]
pub fn has_approval(def: &ResourceDef) -> bool {
    def.group == "certificates.k8s.io" && def.plural == "certificatesigningrequests"
}

fn conditions(object: &Value) -> Vec<Value> {
    object
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn text<'v>(value: &'v Value, key: &str) -> &'v str {
    value.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// Whether `conditions` hold two of one type, an empty type, or both Approved and Denied:
/// stored data kube-apiserver keeps tolerating.
fn tolerated(conditions: &[Value]) -> (bool, bool, bool) {
    let types: Vec<&str> = conditions.iter().map(|c| text(c, "type")).collect();
    let duplicates = types
        .iter()
        .enumerate()
        .any(|(i, t)| types[..i].contains(t));
    let empty = types.iter().any(|t| t.is_empty());
    let both = types.contains(&"Approved") && types.contains(&"Denied");
    (duplicates, empty, both)
}

fn check(
    def: &ResourceDef,
    name: &str,
    old: &[Value],
    conditions: &[Value],
) -> Result<(), ApiError> {
    let (allow_duplicates, allow_empty, allow_both) = tolerated(old);
    let mut causes = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    let (mut approved, mut denied) = (false, false);
    for (index, condition) in conditions.iter().enumerate() {
        let field = format!("status.conditions[{index}]");
        let kind = text(condition, "type");
        let status = text(condition, "status");
        if kind.is_empty() && !allow_empty {
            causes.push((
                format!("{field}.type"),
                "Required value".to_owned(),
                "FieldValueRequired".to_owned(),
            ));
        }
        let true_only = matches!(kind, "Approved" | "Denied" | "Failed");
        if status.is_empty() {
            causes.push((
                format!("{field}.status"),
                "Required value".to_owned(),
                "FieldValueRequired".to_owned(),
            ));
        } else if true_only && status != "True" {
            causes.push((
                format!("{field}.status"),
                format!("Unsupported value: {status:?}: supported values: \"True\""),
                "FieldValueNotSupported".to_owned(),
            ));
        } else if !matches!(status, "True" | "False" | "Unknown") {
            causes.push((
                format!("{field}.status"),
                format!(
                    "Unsupported value: {status:?}: supported values: \"False\", \"True\", \"Unknown\""
                ),
                "FieldValueNotSupported".to_owned(),
            ));
        }
        if !allow_both {
            approved |= kind == "Approved";
            denied |= kind == "Denied";
            if matches!(kind, "Approved" | "Denied") && approved && denied {
                causes.push((
                    format!("{field}.type"),
                    format!(
                        "Invalid value: {kind:?}: Approved and Denied conditions are mutually exclusive"
                    ),
                    "FieldValueInvalid".to_owned(),
                ));
            }
        }
        if !allow_duplicates && seen.contains(&kind) {
            causes.push((
                format!("{field}.type"),
                format!("Duplicate value: {kind:?}"),
                "FieldValueDuplicate".to_owned(),
            ));
        }
        seen.push(kind);
    }
    for kind in ["Approved", "Denied", "Failed"] {
        let count = |list: &[Value]| list.iter().filter(|c| text(c, "type") == kind).count();
        if count(conditions) < count(old) {
            causes.push((
                "status.conditions".to_owned(),
                format!("Forbidden: updates may not remove a condition of type {kind:?}"),
                "FieldValueForbidden".to_owned(),
            ));
        }
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(def, name, causes))
    }
}

/// A request as kube-apiserver creates it (`csrStrategy.PrepareForCreate`): the requesting
/// user's name, uid and groups replace whatever `spec.username`, `spec.uid`, `spec.groups` and
/// `spec.extra` say, and the status is emptied (nobody creates a request already approved).
pub fn prepare_create(object: &mut Value, username: &str, uid: &str, groups: &[String]) {
    if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
        for key in ["username", "uid", "groups", "extra"] {
            spec.remove(key);
        }
        if !username.is_empty() {
            spec.insert("username".to_owned(), json!(username));
        }
        if !uid.is_empty() {
            spec.insert("uid".to_owned(), json!(uid));
        }
        if !groups.is_empty() {
            spec.insert("groups".to_owned(), json!(groups));
        }
    }
    if let Value::Object(root) = object {
        root.insert("status".to_owned(), json!({}));
    }
}

/// The stored request `old` with the conditions of `new` (timestamps filled at `now`, RFC
/// 3339), and `new`'s resourceVersion and managed fields.
///
/// # Errors
/// 422 Invalid, see the module docs.
pub fn approval_update(
    def: &ResourceDef,
    old: &Value,
    new: &Value,
    now: &str,
) -> Result<Value, ApiError> {
    let name = old
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let old_conditions = conditions(old);
    let mut wanted = conditions(new);
    check(def, name, &old_conditions, &wanted)?;
    for condition in &mut wanted {
        let Value::Object(map) = condition else {
            continue;
        };
        if map.get("lastUpdateTime").is_none_or(Value::is_null) {
            map.insert("lastUpdateTime".to_owned(), json!(now));
        }
        if map.get("lastTransitionTime").is_none_or(Value::is_null) {
            let kind = map.get("type").cloned().unwrap_or(Value::Null);
            let status = map.get("status").cloned().unwrap_or(Value::Null);
            let kept = old_conditions
                .iter()
                .find(|c| c.get("type") == Some(&kind) && c.get("status") == Some(&status))
                .and_then(|c| c.get("lastTransitionTime"))
                .filter(|t| !t.is_null())
                .cloned();
            map.insert(
                "lastTransitionTime".to_owned(),
                kept.unwrap_or_else(|| json!(now)),
            );
        }
    }
    let mut request = old.clone();
    if let Value::Object(root) = &mut request {
        let status = root
            .entry("status")
            .or_insert_with(|| Value::Object(Map::new()));
        if !status.is_object() {
            *status = Value::Object(Map::new());
        }
        if let Value::Object(status) = status {
            if wanted.is_empty() {
                status.remove("conditions");
            } else {
                status.insert("conditions".to_owned(), Value::Array(wanted));
            }
        }
    }
    for key in ["resourceVersion", "managedFields"] {
        if let Some(value) = new.pointer(&format!("/metadata/{key}"))
            && let Some(metadata) = request.get_mut("metadata").and_then(Value::as_object_mut)
        {
            metadata.insert(key.to_owned(), value.clone());
        }
    }
    Ok(request)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn csrs() -> ResourceDef {
        crate::builtin_resources()
            .into_iter()
            .find(|d| d.plural == "certificatesigningrequests")
            .unwrap()
    }

    fn csr(conditions: Value) -> Value {
        json!({"metadata": {"name": "c", "resourceVersion": "3"},
               "spec": {"request": "UEVN", "signerName": "example.com/s", "usages": ["client auth"]},
               "status": {"conditions": conditions}})
    }

    #[test]
    fn approval_changes_only_the_conditions() {
        let old = csr(json!([{"type": "Pending", "status": "True",
                              "lastTransitionTime": "2020-01-01T00:00:00Z"}]));
        let mut new = csr(json!([{"type": "Pending", "status": "True"},
                                 {"type": "Approved", "status": "True", "reason": "ok"}]));
        new["spec"]["signerName"] = json!("changed");
        new["metadata"]["resourceVersion"] = json!("4");
        let updated = approval_update(&csrs(), &old, &new, "2024-05-05T00:00:00Z").unwrap();
        let mut expected = csr(json!([
            {"type": "Pending", "status": "True", "lastUpdateTime": "2024-05-05T00:00:00Z",
             "lastTransitionTime": "2020-01-01T00:00:00Z"},
            {"type": "Approved", "status": "True", "reason": "ok",
             "lastUpdateTime": "2024-05-05T00:00:00Z", "lastTransitionTime": "2024-05-05T00:00:00Z"}]));
        expected["metadata"]["resourceVersion"] = json!("4");
        assert_eq!(updated, expected);
    }

    #[test]
    fn a_created_request_names_its_requester() {
        let mut request = csr(json!([{"type": "Approved", "status": "True"}]));
        request["spec"]["username"] = json!("someone-else");
        request["spec"]["extra"] = json!({"k": ["v"]});
        prepare_create(&mut request, "alice", "", &["team".to_owned()]);
        assert_eq!(
            request["spec"],
            json!({"request": "UEVN", "signerName": "example.com/s", "usages": ["client auth"],
                   "username": "alice", "groups": ["team"]})
        );
        assert_eq!(request["status"], json!({}));
    }

    #[test]
    fn conditions_are_checked() {
        let old = csr(json!([]));
        let both = csr(json!([{"type": "Approved", "status": "True"},
                              {"type": "Denied", "status": "True"}]));
        let error = approval_update(&csrs(), &old, &both, "t").unwrap_err();
        assert_eq!(error.code, 422);
        assert!(
            error
                .message
                .contains("Approved and Denied conditions are mutually exclusive"),
            "{}",
            error.message
        );
        let false_approval = csr(json!([{"type": "Approved", "status": "False"}]));
        let error = approval_update(&csrs(), &old, &false_approval, "t").unwrap_err();
        assert_eq!(
            error.message,
            "CertificateSigningRequest.certificates.k8s.io \"c\" is invalid: status.conditions[0].status: Unsupported value: \"False\": supported values: \"True\""
        );
        let untyped = csr(json!([{"status": "True"}]));
        assert!(approval_update(&csrs(), &old, &untyped, "t").is_err());
        let custom = csr(json!([{"type": "ApprovedFake", "status": "Unknown"}]));
        assert!(approval_update(&csrs(), &old, &custom, "t").is_ok());
        let twice = csr(json!([{"type": "X", "status": "True"}, {"type": "X", "status": "False"}]));
        let error = approval_update(&csrs(), &old, &twice, "t").unwrap_err();
        assert!(
            error
                .message
                .contains("status.conditions[1].type: Duplicate value: \"X\""),
            "{}",
            error.message
        );
        let approved = csr(json!([{"type": "Approved", "status": "True"}]));
        let error = approval_update(&csrs(), &approved, &old, "t").unwrap_err();
        assert_eq!(
            error.message,
            "CertificateSigningRequest.certificates.k8s.io \"c\" is invalid: status.conditions: Forbidden: updates may not remove a condition of type \"Approved\""
        );
    }
}

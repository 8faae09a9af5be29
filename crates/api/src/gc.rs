//! Garbage collection as kube-apiserver's side of it: which finalizers a DELETE gives an
//! object (`orphan`, `foregroundDeletion`) from its `DeleteOptions` and the kind's default
//! policy, the checks of `DeleteOptions`, `metadata.ownerReferences` and `metadata.finalizers`,
//! and owner references as the garbage collector reads them.
//!
//! As kube-apiserver's registry (`deletionFinalizersForGarbageCollection`, `shouldOrphanDependents`,
//! `shouldDeleteDependents`): an explicit `orphanDependents` or `propagationPolicy` wins; else a
//! GC finalizer the object already carries; else the kind's default ([`default_policy`]:
//! `Orphan` for core `v1` ReplicationControllers and `batch/v1` Jobs, `Background` for the
//! rest). Kinds whose strategy says `Unsupported` (core Events, and namespaces, whose DELETE is
//! their own) get no GC finalizer whatever the options say.

use serde_json::Value;
use watchkeeper_core::pointer::Pointer as _;

use crate::{ApiError, ResourceDef};

/// The finalizer that makes the garbage collector orphan an object's dependents (remove their
/// owner references) before the object goes.
pub const ORPHAN: &str = "orphan";
/// The finalizer that makes the garbage collector delete an object's dependents (waiting for
/// those with `blockOwnerDeletion`) before the object goes.
pub const FOREGROUND: &str = "foregroundDeletion";

/// A deletion's propagation policy (`DeleteOptions.propagationPolicy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Propagation {
    /// Dependents are orphaned first (`orphan` finalizer).
    Orphan,
    /// The object goes at once; the collector deletes its dependents afterwards.
    Background,
    /// Dependents are deleted first (`foregroundDeletion` finalizer).
    Foreground,
}

impl Propagation {
    /// The policy's name in `DeleteOptions`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Propagation::Orphan => "Orphan",
            Propagation::Background => "Background",
            Propagation::Foreground => "Foreground",
        }
    }
}

/// What a DELETE asked of its dependents, checked as kube-apiserver's `ValidateDeleteOptions`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeletePolicy {
    /// `orphanDependents` (deprecated), when given.
    pub orphan_dependents: Option<bool>,
    /// `propagationPolicy`, when given.
    pub propagation: Option<Propagation>,
}

impl DeletePolicy {
    /// Reads `orphanDependents` and `propagationPolicy` from a `DeleteOptions` body (`null`:
    /// neither).
    ///
    /// # Errors
    /// 400 when a field has the wrong JSON type; 422 `DeleteOptions.meta.k8s.io "" is invalid`
    /// for an unknown policy or both fields given.
    pub fn from_options(options: &Value) -> Result<DeletePolicy, ApiError> {
        let orphan_dependents = match options.get("orphanDependents") {
            None | Some(Value::Null) => None,
            Some(Value::Bool(orphan)) => Some(*orphan),
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "DeleteOptions.orphanDependents must be a boolean, not {other}"
                )));
            }
        };
        let propagation = match options.get("propagationPolicy") {
            None | Some(Value::Null) => None,
            Some(Value::String(policy)) => Some(policy.as_str()),
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "DeleteOptions.propagationPolicy must be a string, not {other}"
                )));
            }
        };
        Self::checked(orphan_dependents, propagation)
    }

    /// Reads `orphanDependents` and `propagationPolicy` from a DELETE's query (kube-apiserver
    /// reads them there when the request has no body).
    ///
    /// # Errors
    /// As [`DeletePolicy::from_options`]; an `orphanDependents` that is not a boolean is 400.
    pub fn from_query(query: Option<&str>) -> Result<DeletePolicy, ApiError> {
        let pairs: Vec<(String, String)> = match query {
            Some(query) => serde_urlencoded::from_str(query)
                .map_err(|e| ApiError::bad_request(format!("invalid query string: {e}")))?,
            None => Vec::new(),
        };
        let mut orphan_dependents = None;
        let mut propagation = None;
        for (name, value) in pairs {
            match name.as_str() {
                "orphanDependents" => {
                    orphan_dependents = Some(match value.as_str() {
                        "true" | "1" | "t" | "T" | "TRUE" | "True" => true,
                        "false" | "0" | "f" | "F" | "FALSE" | "False" => false,
                        other => {
                            return Err(ApiError::bad_request(format!(
                                "orphanDependents: invalid boolean value {other:?}"
                            )));
                        }
                    });
                }
                "propagationPolicy" => propagation = Some(value),
                // Decoded as an int64 (kube's parameter codec: a bad one is 400 with
                // `strconv.ParseInt`'s text); any value is accepted, a negative one counts
                // as 1 second (`rest.BeforeDelete`). Nothing here waits for a grace period.
                "gracePeriodSeconds" if value.parse::<i64>().is_err() => {
                    let digits = value.trim_start_matches(['-', '+']);
                    let why = if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
                        "value out of range"
                    } else {
                        "invalid syntax"
                    };
                    return Err(ApiError::bad_request(format!(
                        "strconv.ParseInt: parsing {value:?}: {why}"
                    )));
                }
                _ => {}
            }
        }
        Self::checked(orphan_dependents, propagation.as_deref())
    }

    fn checked(
        orphan_dependents: Option<bool>,
        propagation: Option<&str>,
    ) -> Result<DeletePolicy, ApiError> {
        let mut causes = Vec::new();
        if let (Some(_), Some(policy)) = (orphan_dependents, propagation) {
            causes.push((
                "propagationPolicy".to_owned(),
                format!(
                    "Invalid value: {policy:?}: orphanDependents and deletionPropagation cannot be both set"
                ),
                "FieldValueInvalid".to_owned(),
            ));
        }
        let parsed = match propagation {
            None => None,
            Some("Orphan") => Some(Propagation::Orphan),
            Some("Background") => Some(Propagation::Background),
            Some("Foreground") => Some(Propagation::Foreground),
            Some(other) => {
                causes.push((
                    "propagationPolicy".to_owned(),
                    format!(
                        "Unsupported value: {other:?}: supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\""
                    ),
                    "FieldValueNotSupported".to_owned(),
                ));
                None
            }
        };
        if !causes.is_empty() {
            return Err(ApiError::invalid_options("DeleteOptions", causes));
        }
        Ok(DeletePolicy {
            orphan_dependents,
            propagation: parsed,
        })
    }

    /// A policy that asks for `propagation`.
    #[must_use]
    pub fn propagating(propagation: Propagation) -> DeletePolicy {
        DeletePolicy {
            orphan_dependents: None,
            propagation: Some(propagation),
        }
    }

    /// Whether neither field was given (the kind's default applies).
    #[must_use]
    pub fn is_default(&self) -> bool {
        self.orphan_dependents.is_none() && self.propagation.is_none()
    }
}

/// The kind's default policy as kube-apiserver's strategies give it
/// (`DefaultGarbageCollectionPolicy`); `None` where the strategy says `Unsupported`.
#[must_use]
pub fn default_policy(def: &ResourceDef) -> Option<Propagation> {
    match (
        def.group.as_str(),
        def.version.as_str(),
        def.plural.as_str(),
    ) {
        // Core Events (and events.k8s.io, the same storage) are `Unsupported`; a namespace's
        // DELETE is its own (it deletes what the namespace holds).
        ("" | "events.k8s.io", _, "events") | ("", _, "namespaces") => None,
        // "for back compatibility": what deletion did before server-side collection.
        ("", "v1", "replicationcontrollers") | ("batch", "v1", "jobs") => Some(Propagation::Orphan),
        _ => Some(Propagation::Background),
    }
}

/// The warning kube-apiserver (1.26+) adds to a DELETE of a `batch/v1` Job that names no
/// policy: its pods stay.
pub const JOB_ORPHAN_WARNING: &str = "child pods are preserved by default when jobs are deleted; set propagationPolicy=Background to remove them or set propagationPolicy=Orphan to suppress this warning";

fn finalizers(object: &Value) -> Vec<&str> {
    object
        .get("metadata")
        .and_then(Value::as_object)
        .map(finalizers_of)
        .unwrap_or_default()
}

/// The `finalizers` of a `metadata` map.
fn finalizers_of(meta: &serde_json::Map<String, Value>) -> Vec<&str> {
    meta.get("finalizers")
        .and_then(Value::as_array)
        .map(|list| list.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// Whether `object` carries `finalizer`.
#[must_use]
pub fn has_finalizer(object: &Value, finalizer: &str) -> bool {
    finalizers(object).contains(&finalizer)
}

/// The finalizers a DELETE leaves `object` with, when they differ from its own (kube-apiserver's
/// `deletionFinalizersForGarbageCollection`): the GC finalizers removed, then `orphan` or
/// `foregroundDeletion` added as `policy`, the object's own GC finalizer and the kind's
/// default decide, in that order. `None`: unchanged (as sets).
#[must_use]
pub fn deletion_finalizers(
    def: &ResourceDef,
    object: &Value,
    policy: DeletePolicy,
) -> Option<Vec<String>> {
    let default = default_policy(def)?;
    let old = finalizers(object);
    let own = old
        .iter()
        .find_map(|f| match *f {
            ORPHAN => Some(Propagation::Orphan),
            FOREGROUND => Some(Propagation::Foreground),
            _ => None,
        })
        .unwrap_or(default);
    let orphan = match (policy.orphan_dependents, policy.propagation) {
        (Some(orphan), _) => orphan,
        (None, Some(propagation)) => propagation == Propagation::Orphan,
        (None, None) => own == Propagation::Orphan,
    };
    let foreground = match (policy.orphan_dependents, policy.propagation) {
        (Some(_), _) => false,
        (None, Some(propagation)) => propagation == Propagation::Foreground,
        (None, None) => own == Propagation::Foreground,
    };
    let mut new: Vec<String> = old
        .iter()
        .filter(|f| **f != ORPHAN && **f != FOREGROUND)
        .map(|f| (*f).to_owned())
        .collect();
    if orphan {
        new.push(ORPHAN.to_owned());
    }
    if foreground {
        new.push(FOREGROUND.to_owned());
    }
    let same = new.iter().all(|f| old.contains(&f.as_str()))
        && old.iter().all(|f| new.iter().any(|n| n == f));
    (!same).then_some(new)
}

/// One of an object's `metadata.ownerReferences`, as the collector reads it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OwnerRef {
    /// The owner's API group (`""` for core), from `apiVersion`.
    pub group: String,
    /// The owner's kind.
    pub kind: String,
    /// The owner's name.
    pub name: String,
    /// The owner's uid.
    pub uid: String,
    /// `blockOwnerDeletion`: a foreground deletion of the owner waits for this dependent.
    pub block: bool,
}

/// The owner references of `object` (entries without a kind, name or uid are left out: the
/// checks below refuse them on writes).
#[must_use]
pub fn owner_refs(object: &Value) -> Vec<OwnerRef> {
    let Some(list) = object
        .at("/metadata/ownerReferences")
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    list.iter()
        .filter_map(|entry| {
            let text = |key: &str| entry.get(key).and_then(Value::as_str).unwrap_or_default();
            let (kind, name, uid) = (text("kind"), text("name"), text("uid"));
            if kind.is_empty() || name.is_empty() || uid.is_empty() {
                return None;
            }
            let api_version = text("apiVersion");
            let group = api_version
                .rsplit_once('/')
                .map_or("", |(group, _)| group)
                .to_owned();
            Some(OwnerRef {
                group,
                kind: kind.to_owned(),
                name: name.to_owned(),
                uid: uid.to_owned(),
                block: entry
                    .get("blockOwnerDeletion")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
            })
        })
        .collect()
}

type Cause = (String, String, String);

fn invalid(field: &str, value: &str, message: &str) -> Cause {
    crate::names::invalid_value(field, value, message)
}

/// Go's `%#v` of a `[]string`.
fn go_strings(values: &[&str]) -> String {
    let quoted: Vec<String> = values.iter().map(|v| format!("{v:?}")).collect();
    format!("[]string{{{}}}", quoted.join(", "))
}

/// kube-apiserver's `ValidateOwnerReferences` and `ValidateFinalizers` on `metadata`: every
/// owner reference has an `apiVersion` with a version, a kind, a name and a uid, core Events
/// own nothing, at most one is the controller; finalizers are not both `orphan` and
/// `foregroundDeletion` (that each is a qualified name is `meta`'s check, with the labels').
/// Wrong JSON types are left to the schema checks.
#[must_use]
pub fn validate_metadata(meta: &serde_json::Map<String, Value>) -> Vec<Cause> {
    let mut causes = Vec::new();
    let field = "metadata.ownerReferences";
    let mut controller: Option<String> = None;
    for entry in meta
        .get("ownerReferences")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let text = |key: &str| entry.get(key).and_then(Value::as_str).unwrap_or_default();
        let api_version = text("apiVersion");
        let (group, version) = match api_version.rsplit_once('/') {
            Some((group, version)) => (group, version),
            None => ("", api_version),
        };
        if version.is_empty() {
            causes.push(invalid(
                &format!("{field}.apiVersion"),
                api_version,
                "version must not be empty",
            ));
        }
        let kind = text("kind");
        for (key, value) in [("kind", kind), ("name", text("name")), ("uid", text("uid"))] {
            if value.is_empty() {
                causes.push(invalid(
                    &format!("{field}.{key}"),
                    value,
                    "must not be empty",
                ));
            }
        }
        if group.is_empty() && version == "v1" && kind == "Event" {
            causes.push((
                field.to_owned(),
                format!(
                    "Invalid value: {}: /v1, Kind=Event is disallowed from being an owner",
                    entry
                ),
                "FieldValueInvalid".to_owned(),
            ));
        }
        if entry.get("controller").and_then(Value::as_bool) == Some(true) {
            let this = format!("{kind}/{}", text("name"));
            match &controller {
                Some(first) => causes.push((
                    field.to_owned(),
                    format!(
                        "Invalid value: {}: Only one reference can have Controller set to true. Found \"true\" in references for {first} and {this}",
                        meta.get("ownerReferences").cloned().unwrap_or_default()
                    ),
                    "FieldValueInvalid".to_owned(),
                )),
                None => controller = Some(this),
            }
        }
    }
    let names = finalizers_of(meta);
    if names.contains(&ORPHAN) && names.contains(&FOREGROUND) {
        causes.push((
            "metadata.finalizers".to_owned(),
            format!(
                "Invalid value: {}: finalizer {ORPHAN} and {FOREGROUND} cannot be both set",
                go_strings(&names)
            ),
            "FieldValueInvalid".to_owned(),
        ));
    }
    causes
}

/// kube-apiserver's `ValidateNoNewFinalizers`: an object being deleted takes no new
/// finalizer.
#[must_use]
pub fn validate_no_new_finalizers(
    old: &serde_json::Map<String, Value>,
    new: &serde_json::Map<String, Value>,
) -> Option<Cause> {
    if old.get("deletionTimestamp").is_none_or(Value::is_null) {
        return None;
    }
    let before = finalizers_of(old);
    let mut extra: Vec<&str> = finalizers_of(new)
        .into_iter()
        .filter(|f| !before.contains(f))
        .collect();
    if extra.is_empty() {
        return None;
    }
    extra.sort_unstable();
    extra.dedup();
    Some((
        "metadata.finalizers".to_owned(),
        format!(
            "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers {}",
            go_strings(&extra)
        ),
        "FieldValueForbidden".to_owned(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn def(group: &str, version: &str, plural: &str) -> ResourceDef {
        crate::resources::builtin_resources()
            .into_iter()
            .find(|d| d.group == group && d.version == version && d.plural == plural)
            .expect("a built-in resource")
    }

    fn with_finalizers(list: &[&str]) -> Value {
        json!({"metadata": {"name": "a", "finalizers": list}})
    }

    #[test]
    fn options_are_checked_as_kube_apiserver_does() {
        assert_eq!(
            DeletePolicy::from_options(&json!({"propagationPolicy": "Foreground"})).unwrap(),
            DeletePolicy::propagating(Propagation::Foreground)
        );
        assert!(
            DeletePolicy::from_options(&Value::Null)
                .unwrap()
                .is_default()
        );
        let both = DeletePolicy::from_options(
            &json!({"orphanDependents": true, "propagationPolicy": "Background"}),
        )
        .unwrap_err();
        assert_eq!(both.code, 422);
        assert_eq!(
            both.message,
            "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Invalid value: \"Background\": orphanDependents and deletionPropagation cannot be both set"
        );
        let unknown =
            DeletePolicy::from_options(&json!({"propagationPolicy": "Sideways"})).unwrap_err();
        assert_eq!(
            unknown.message,
            "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Unsupported value: \"Sideways\": supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\""
        );
        assert_eq!(
            DeletePolicy::from_options(&json!({"orphanDependents": "yes"}))
                .unwrap_err()
                .code,
            400
        );
        assert_eq!(
            DeletePolicy::from_query(Some("propagationPolicy=Orphan&dryRun=All")).unwrap(),
            DeletePolicy::propagating(Propagation::Orphan)
        );
        assert_eq!(
            DeletePolicy::from_query(Some("orphanDependents=false"))
                .unwrap()
                .orphan_dependents,
            Some(false)
        );
    }

    #[test]
    fn finalizers_follow_options_then_the_object_then_the_kind() {
        let deployments = def("apps", "v1", "deployments");
        let plain = with_finalizers(&[]);
        // The kind's default (Background) adds nothing.
        assert_eq!(
            deletion_finalizers(&deployments, &plain, DeletePolicy::default()),
            None
        );
        assert_eq!(
            deletion_finalizers(
                &deployments,
                &plain,
                DeletePolicy::propagating(Propagation::Foreground)
            ),
            Some(vec![FOREGROUND.to_owned()])
        );
        // An explicit policy replaces the object's GC finalizer and keeps the others.
        assert_eq!(
            deletion_finalizers(
                &deployments,
                &with_finalizers(&["x.io/keep", FOREGROUND]),
                DeletePolicy::propagating(Propagation::Orphan)
            ),
            Some(vec!["x.io/keep".to_owned(), ORPHAN.to_owned()])
        );
        assert_eq!(
            deletion_finalizers(
                &deployments,
                &with_finalizers(&[FOREGROUND]),
                DeletePolicy::propagating(Propagation::Background)
            ),
            Some(Vec::new())
        );
        // Without options the object's own GC finalizer stays.
        assert_eq!(
            deletion_finalizers(
                &deployments,
                &with_finalizers(&[ORPHAN]),
                DeletePolicy::default()
            ),
            None
        );
        // orphanDependents=false is Background.
        assert_eq!(
            deletion_finalizers(
                &def("", "v1", "replicationcontrollers"),
                &plain,
                DeletePolicy {
                    orphan_dependents: Some(false),
                    propagation: None
                }
            ),
            None
        );
        // Kinds that orphan by default.
        for (group, plural) in [("", "replicationcontrollers"), ("batch", "jobs")] {
            assert_eq!(
                deletion_finalizers(&def(group, "v1", plural), &plain, DeletePolicy::default()),
                Some(vec![ORPHAN.to_owned()]),
                "{plural}"
            );
        }
        // Events never get one.
        assert_eq!(
            deletion_finalizers(
                &def("", "v1", "events"),
                &plain,
                DeletePolicy::propagating(Propagation::Foreground)
            ),
            None
        );
    }

    #[test]
    fn owner_references_and_finalizers_are_checked() {
        let meta = |value: Value| value.as_object().cloned().unwrap();
        assert!(
            validate_metadata(&meta(json!({"ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "r", "uid": "u", "controller": true}
            ], "finalizers": ["example.com/x", "orphan"]})))
            .is_empty()
        );
        let causes = validate_metadata(&meta(json!({"ownerReferences": [
            {"apiVersion": "apps/", "kind": "", "name": "r", "uid": ""},
            {"apiVersion": "v1", "kind": "Event", "name": "e", "uid": "1"}
        ]})));
        let fields: Vec<&str> = causes.iter().map(|c| c.0.as_str()).collect();
        assert_eq!(
            fields,
            [
                "metadata.ownerReferences.apiVersion",
                "metadata.ownerReferences.kind",
                "metadata.ownerReferences.uid",
                "metadata.ownerReferences"
            ]
        );
        assert_eq!(
            causes[2].1, "Invalid value: \"\": must not be empty",
            "{causes:?}"
        );
        let two = validate_metadata(&meta(json!({"ownerReferences": [
            {"apiVersion": "v1", "kind": "A", "name": "a", "uid": "1", "controller": true},
            {"apiVersion": "v1", "kind": "B", "name": "b", "uid": "2", "controller": true}
        ]})));
        assert_eq!(two.len(), 1);
        assert!(
            two[0]
                .1
                .ends_with("Only one reference can have Controller set to true. Found \"true\" in references for A/a and B/b"),
            "{two:?}"
        );
        let both = validate_metadata(&meta(
            json!({"finalizers": ["orphan", "foregroundDeletion"]}),
        ));
        assert_eq!(
            both[0].1,
            "Invalid value: []string{\"orphan\", \"foregroundDeletion\"}: finalizer orphan and foregroundDeletion cannot be both set"
        );
    }

    #[test]
    fn an_object_being_deleted_takes_no_new_finalizer() {
        let old = json!({"deletionTimestamp": "2026-01-01T00:00:00Z", "finalizers": ["a/x"]});
        let old = old.as_object().unwrap();
        let same = json!({"finalizers": ["a/x"]});
        assert_eq!(
            validate_no_new_finalizers(old, same.as_object().unwrap()),
            None
        );
        let fewer = json!({"finalizers": []});
        assert_eq!(
            validate_no_new_finalizers(old, fewer.as_object().unwrap()),
            None
        );
        let more = json!({"finalizers": ["a/x", "b/y"]});
        assert_eq!(
            validate_no_new_finalizers(old, more.as_object().unwrap())
                .unwrap()
                .1,
            "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{\"b/y\"}"
        );
        let live = json!({"finalizers": []});
        assert_eq!(
            validate_no_new_finalizers(live.as_object().unwrap(), more.as_object().unwrap()),
            None
        );
    }
}

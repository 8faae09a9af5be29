//! Events' validation as kube-apiserver's `pkg/apis/core/validation/events.go` has it
//! (Kubernetes 1.33): `ValidateEventCreate` and `ValidateEventUpdate`, for core `v1` Events
//! and `events.k8s.io/v1` ones (one storage: kube validates its internal Event, so the paths
//! are the internal fields' names whichever version was written — `involvedObject`,
//! `message`, `reportingController`, `count`, `source`, ...).
//!
//! ## Guarantees
//! - Every Event gets kube's legacy checks (`legacyValidateEvent`). Without an `eventTime`:
//!   the involved object's namespace is the Event's (or empty, when the Event's is `default`).
//!   With one: an involved object without a namespace only for Events in `default` or
//!   `kube-system`; `reportingController` (a qualified name), `reportingInstance`, `action`
//!   and `reason` are required, the last three at most 128 characters, `message` at most 1024.
//!   A core `v1` Event gets nothing more: kube accepts any `type` there.
//! - An `events.k8s.io/v1` Event is also checked strictly on create: `eventTime` is required,
//!   `type` is `Normal` or `Warning` (`type: Invalid value: "": has invalid value: Bogus`), a
//!   series has a count of at least 2 and a `lastObservedTime`, and the deprecated fields
//!   (`firstTimestamp`, `lastTimestamp`, `count`, `source`) are unset; on update a changed
//!   series is checked again and the fields kube lists may not change (`field is immutable`).
//!
//! ## How it differs from kube
//! - An immutable field that changed prints its new value as kube's field errors print plain
//!   values (strings quoted, numbers bare); a struct or a time (kube's `%#v` of a Go struct or
//!   a `metav1.Time`'s text) prints as its JSON.
//! - The object's metadata is validated by the write path (`meta`), not here.

use serde_json::Value;

use super::access::{get, text};
use crate::field::{Cause, go_quote, go_value, invalid, required};
use crate::names::validate_dns1123_subdomain;
use crate::versions::Conversion;

/// kube's `ReportingInstanceLengthLimit`, `ActionLengthLimit` and `ReasonLengthLimit`.
const NAME_LENGTH_MAX: usize = 128;
/// kube's `NoteLengthLimit`.
const NOTE_LENGTH_MAX: usize = 1024;

/// The fields an `events.k8s.io/v1` update may not change, at their core `v1` keys and kube's
/// paths, in kube's order (`reason` twice, as kube checks it).
const IMMUTABLE: [(&str, &str); 15] = [
    ("involvedObject", "involvedObject"),
    ("reason", "reason"),
    ("message", "message"),
    ("source", "source"),
    ("firstTimestamp", "firstTimestamp"),
    ("lastTimestamp", "lastTimestamp"),
    ("count", "count"),
    ("reason", "reason"),
    ("type", "type"),
    ("eventTime", "eventTime"),
    ("action", "action"),
    ("related", "related"),
    ("reportingComponent", "reportingController"),
    ("reportingInstance", "reportingInstance"),
    ("series", "series"),
];

/// Whether a time field is unset (Go's zero time: absent, null or empty).
fn unset(event: &Value, key: &str) -> bool {
    get(event, key).is_none_or(|v| v.as_str() == Some(""))
}

/// The causes of an Event written through the core `v1` API, or through `events.k8s.io/v1`
/// when `strict` (`old`: the stored one of an update, in the written version's form).
pub(super) fn event(object: &Value, old: Option<&Value>, strict: bool, causes: &mut Vec<Cause>) {
    let converted;
    let event = if strict {
        converted = Conversion::EventsV1.stored_form(object);
        &converted
    } else {
        object
    };
    legacy(event, causes);
    if !strict {
        return;
    }
    match old {
        None => {
            series(event, causes);
            if unset(event, "eventTime") {
                causes.push(required("eventTime", ""));
            }
            let kind = text(event, "type");
            if !matches!(kind, "Normal" | "Warning") {
                causes.push(invalid(
                    "type",
                    "\"\"",
                    &format!("has invalid value: {kind}"),
                ));
            }
            for key in ["firstTimestamp", "lastTimestamp"] {
                if !unset(event, key) {
                    causes.push(invalid(key, "\"\"", "needs to be unset"));
                }
            }
            if event.get("count").and_then(Value::as_i64).unwrap_or(0) != 0 {
                causes.push(invalid("count", "\"\"", "needs to be unset"));
            }
            let source = event.get("source").unwrap_or(&Value::Null);
            if !text(source, "component").is_empty() || !text(source, "host").is_empty() {
                causes.push(invalid("source", "\"\"", "needs to be unset"));
            }
        }
        Some(old) => {
            let old = Conversion::EventsV1.stored_form(old);
            if get(event, "series") != get(&old, "series") {
                series(event, causes);
            }
            for (key, path) in IMMUTABLE {
                if key == "series" {
                    continue;
                }
                let new = get(event, key);
                if new != get(&old, key) {
                    causes.push(invalid(
                        path,
                        &new.map_or_else(|| "null".to_owned(), go_value_or_json),
                        "field is immutable",
                    ));
                }
            }
        }
    }
}

/// A changed field's value (see the module's differences).
fn go_value_or_json(value: &Value) -> String {
    match value {
        Value::Object(_) | Value::Array(_) => value.to_string(),
        other => go_value(other),
    }
}

/// `validateV1EventSeries`.
fn series(event: &Value, causes: &mut Vec<Cause>) {
    if let Some(series) = get(event, "series") {
        if series.get("count").and_then(Value::as_i64).unwrap_or(0) < 2 {
            causes.push(invalid("series.count", "\"\"", "should be at least 2"));
        }
        if unset(series, "lastObservedTime") {
            causes.push(required("series.lastObservedTime", ""));
        }
    }
}

/// `legacyValidateEvent`.
fn legacy(event: &Value, causes: &mut Vec<Cause>) {
    let namespace = event
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("");
    let involved = event
        .get("involvedObject")
        .map_or("", |object| text(object, "namespace"));
    let mismatch = || {
        invalid(
            "involvedObject.namespace",
            &go_quote(involved),
            "does not match event.namespace",
        )
    };
    if unset(event, "eventTime") {
        let matches = if involved.is_empty() {
            matches!(namespace, "" | "default")
        } else {
            namespace == involved
        };
        if !matches {
            causes.push(mismatch());
        }
    } else {
        if involved.is_empty() && !matches!(namespace, "default" | "kube-system") {
            causes.push(mismatch());
        }
        let controller = text(event, "reportingComponent");
        if controller.is_empty() {
            causes.push(required("reportingController", ""));
        }
        for message in crate::names::qualified_name_problems(controller) {
            causes.push(invalid(
                "reportingController",
                &go_quote(controller),
                &message,
            ));
        }
        for (key, limit) in [
            ("reportingInstance", NAME_LENGTH_MAX),
            ("action", NAME_LENGTH_MAX),
            ("reason", NAME_LENGTH_MAX),
        ] {
            let value = text(event, key);
            if value.is_empty() {
                causes.push(required(key, ""));
            }
            if value.len() > limit {
                causes.push(invalid(
                    key,
                    "\"\"",
                    &format!("can have at most {limit} characters"),
                ));
            }
        }
        if text(event, "message").len() > NOTE_LENGTH_MAX {
            causes.push(invalid(
                "message",
                "\"\"",
                &format!("can have at most {NOTE_LENGTH_MAX} characters"),
            ));
        }
    }
    if let Err(message) = validate_dns1123_subdomain(namespace) {
        causes.push(invalid("namespace", &go_quote(namespace), &message));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    fn core(event: Value) -> Vec<String> {
        crate::kinds::refusal_causes("", "events", event, None)
    }

    fn v1(event: Value, old: Option<&Value>) -> Vec<String> {
        crate::kinds::refusal_causes("events.k8s.io", "events", event, old)
    }

    /// Goal: a core `v1` Event gets only kube's legacy checks (any `type`), the namespace
    /// rule without an `eventTime` and the reporting fields with one.
    #[test]
    fn core_events_get_the_legacy_checks() {
        let event = |namespace: &str, extra: Value| {
            let mut event = json!({"metadata": {"name": "e", "namespace": namespace},
                "involvedObject": {"kind": "Pod"}, "type": "Bogus"});
            for (key, value) in extra.as_object().unwrap() {
                event[key] = value.clone();
            }
            event
        };
        assert!(core(event("default", json!({}))).is_empty());
        assert_eq!(
            core(event("team", json!({}))),
            ["involvedObject.namespace: Invalid value: \"\": does not match event.namespace"]
        );
        assert_eq!(
            core(event(
                "team",
                json!({"eventTime": "2026-01-01T00:00:00.000000Z",
                "reportingComponent": "bad name", "action": "x".repeat(129)})
            )),
            [
                "involvedObject.namespace: Invalid value: \"\": does not match event.namespace",
                "reportingController: Invalid value: \"bad name\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
                "reportingInstance: Required value",
                "action: Invalid value: \"\": can have at most 128 characters",
                "reason: Required value",
            ]
        );
    }

    /// Goal: an `events.k8s.io/v1` Event's strict checks on create, and its immutable fields
    /// on update, at kube's internal paths.
    #[test]
    fn events_v1_are_checked_strictly() {
        let event = json!({"metadata": {"name": "e", "namespace": "default"},
            "regarding": {"kind": "Pod"}, "type": "Bogus", "deprecatedCount": 3,
            "deprecatedSource": {"component": "c"}, "series": {"count": 1}});
        assert_eq!(
            v1(event, None),
            [
                "series.count: Invalid value: \"\": should be at least 2",
                "series.lastObservedTime: Required value",
                "eventTime: Required value",
                "type: Invalid value: \"\": has invalid value: Bogus",
                "count: Invalid value: \"\": needs to be unset",
                "source: Invalid value: \"\": needs to be unset",
            ]
        );
        let good = json!({"metadata": {"name": "e", "namespace": "default"},
            "regarding": {"kind": "Pod", "namespace": "default"}, "type": "Normal",
            "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "example.com/c",
            "reportingInstance": "i", "action": "Act", "reason": "Because", "note": "n"});
        assert!(v1(good.clone(), None).is_empty());
        let mut changed = good.clone();
        changed["note"] = json!("other");
        changed["type"] = json!("Warning");
        assert_eq!(
            v1(changed, Some(&good)),
            [
                "message: Invalid value: \"other\": field is immutable",
                "type: Invalid value: \"Warning\": field is immutable",
            ]
        );
    }
}

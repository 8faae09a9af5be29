//! Other versions of a stored resource: how an object stored at one version reads at another,
//! and back.
//!
//! kube-apiserver keeps one storage per resource and converts on the way in and out: core
//! `v1` Events are also served as `events.k8s.io/v1` Events (fields renamed, see
//! [`Conversion::EventsV1`]), and a CustomResourceDefinition with conversion strategy `None`
//! serves every served version from objects stored at its storage version, rewriting only
//! `apiVersion` ([`Conversion::ApiVersion`]).
//!
//! ## Guarantees
//! - [`Conversion::to_view`] and [`Conversion::to_storage`] are inverses on every field the
//!   two versions share (an `events.k8s.io/v1` Event's fields all have a core `v1` place);
//!   `metadata` passes through unchanged.
//! - Fields a version does not know stay where they are (kube-apiserver's typed conversion
//!   would drop them; the schemas' pruning does that on writes).
//! - Pure functions of their input; nothing here panics.

use serde_json::{Map, Value};

use crate::ResourceDef;

/// Core `v1` Event fields and their `events.k8s.io/v1` names (kube-apiserver's
/// `pkg/apis/events/v1` conversion). Fields with the same name in both (`reason`, `type`,
/// `action`, `related`, `series`, `eventTime`, `reportingInstance`, `metadata`) pass through.
const EVENT_RENAMES: &[(&str, &str)] = &[
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
    ("reportingComponent", "reportingController"),
];

/// How objects of a resource stored at one version read at another.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Conversion {
    /// Only `apiVersion` differs (a CustomResourceDefinition's `None` strategy): the view's
    /// and the storage's `apiVersion`.
    ApiVersion {
        /// The version served, e.g. `example.com/v1beta1`.
        view: String,
        /// The version stored, e.g. `example.com/v1`.
        storage: String,
    },
    /// `events.k8s.io/v1` Events over core `v1` Events.
    EventsV1,
}

impl Conversion {
    /// The object as the view's version reads it.
    #[must_use]
    pub fn to_view(&self, stored: &Value) -> Value {
        match self {
            Conversion::ApiVersion { view, .. } => with_api_version(stored.clone(), view),
            Conversion::EventsV1 => renamed(stored, "events.k8s.io/v1", false),
        }
    }

    /// The object at the storage version, from the view's version.
    #[must_use]
    pub fn to_storage(&self, view: &Value) -> Value {
        match self {
            Conversion::ApiVersion { storage, .. } => with_api_version(view.clone(), storage),
            Conversion::EventsV1 => renamed(view, "v1", true),
        }
    }
}

fn with_api_version(mut object: Value, api_version: &str) -> Value {
    if let Some(map) = object.as_object_mut() {
        map.insert(
            "apiVersion".to_owned(),
            Value::String(api_version.to_owned()),
        );
    }
    object
}

/// `object` with the Event fields renamed (core to `events.k8s.io/v1`, or back when
/// `to_core`) and `apiVersion` set.
fn renamed(object: &Value, api_version: &str, to_core: bool) -> Value {
    let Some(map) = object.as_object() else {
        return object.clone();
    };
    let mut out = Map::new();
    for (key, value) in map {
        let key = EVENT_RENAMES
            .iter()
            .find_map(|(core, v1)| {
                if to_core {
                    (v1 == key).then_some(*core)
                } else {
                    (core == key).then_some(*v1)
                }
            })
            .unwrap_or(key);
        out.insert(key.to_owned(), value.clone());
    }
    out.insert(
        "apiVersion".to_owned(),
        Value::String(api_version.to_owned()),
    );
    Value::Object(out)
}

/// The other versions kube-apiserver serves a built-in resource at, from the same storage:
/// `events.k8s.io/v1` Events for core `v1` Events.
#[must_use]
pub fn builtin_views(storage: &ResourceDef) -> Vec<(ResourceDef, Conversion)> {
    if storage.group.is_empty() && storage.plural == "events" {
        let mut def = ResourceDef::named("events.k8s.io", "v1", "events", "Event", true);
        def.short_names = vec!["ev".to_owned()];
        def.categories.clone_from(&storage.categories);
        return vec![(def, Conversion::EventsV1)];
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn events_convert_both_ways() {
        let core = json!({
            "kind": "Event", "apiVersion": "v1",
            "metadata": {"name": "e", "namespace": "default"},
            "involvedObject": {"kind": "Pod", "name": "p"},
            "reason": "Started", "message": "started", "type": "Normal",
            "source": {"component": "kubelet"},
            "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:00:01Z",
            "count": 2, "eventTime": null, "reportingComponent": "kubelet",
            "reportingInstance": "node-1", "action": "Start",
            "series": {"count": 2, "lastObservedTime": "2026-01-01T00:00:01.000000Z"},
            "related": {"kind": "Node", "name": "node-1"}
        });
        let v1 = Conversion::EventsV1.to_view(&core);
        assert_eq!(
            v1,
            json!({
                "kind": "Event", "apiVersion": "events.k8s.io/v1",
                "metadata": {"name": "e", "namespace": "default"},
                "regarding": {"kind": "Pod", "name": "p"},
                "reason": "Started", "note": "started", "type": "Normal",
                "deprecatedSource": {"component": "kubelet"},
                "deprecatedFirstTimestamp": "2026-01-01T00:00:00Z",
                "deprecatedLastTimestamp": "2026-01-01T00:00:01Z",
                "deprecatedCount": 2, "eventTime": null, "reportingController": "kubelet",
                "reportingInstance": "node-1", "action": "Start",
                "series": {"count": 2, "lastObservedTime": "2026-01-01T00:00:01.000000Z"},
                "related": {"kind": "Node", "name": "node-1"}
            })
        );
        assert_eq!(Conversion::EventsV1.to_storage(&v1), core);
    }

    #[test]
    fn none_conversion_rewrites_the_api_version_only() {
        let conversion = Conversion::ApiVersion {
            view: "example.com/v1beta1".to_owned(),
            storage: "example.com/v1".to_owned(),
        };
        let stored = json!({"apiVersion": "example.com/v1", "kind": "Widget", "spec": {"a": 1}});
        let view = conversion.to_view(&stored);
        assert_eq!(view["apiVersion"], "example.com/v1beta1");
        assert_eq!(view["spec"], stored["spec"]);
        assert_eq!(conversion.to_storage(&view), stored);
    }

    #[test]
    fn only_core_events_have_a_built_in_view() {
        let defs = crate::builtin_resources();
        let views: Vec<_> = defs.iter().flat_map(builtin_views).collect();
        assert_eq!(views.len(), 1);
        assert_eq!(views[0].0.api_version(), "events.k8s.io/v1");
        assert_eq!(views[0].0.kind, "Event");
    }
}

//! Other versions of a stored resource: how an object stored at one version reads at another,
//! and back.
//!
//! kube-apiserver keeps one storage per resource and converts on the way in and out: core
//! `v1` Events are also served as `events.k8s.io/v1` Events (fields renamed, see
//! [`Conversion::EventsV1`]), `autoscaling/v2` HorizontalPodAutoscalers as `autoscaling/v1`
//! ones (kube's conversion, with its round-trip annotations: [`Conversion::AutoscalingV1`]),
//! and a CustomResourceDefinition with conversion strategy `None`
//! serves every served version from objects stored at its storage version, rewriting only
//! `apiVersion` ([`Conversion::ApiVersion`]).
//!
//! ## Guarantees
//! - [`Conversion::to_view`] and [`Conversion::stored_form`] are inverses on every field the
//!   two versions share (an `events.k8s.io/v1` Event's fields all have a core `v1` place);
//!   `metadata` passes through unchanged, but for the `autoscaling.alpha.kubernetes.io/*`
//!   annotations that carry what `autoscaling/v1` has no field for (so an `autoscaling/v2`
//!   object read at v1 and written back is unchanged, its cpu target moved last as kube moves
//!   it).
//! - Fields a version does not know stay where they are (kube-apiserver's typed conversion
//!   would drop them); for a CRD the server prunes the converted object by the schema of the
//!   version converted to (`structural::prune`), as kube's `schemaCoercingConverter` does.
//! - Pure functions of their input; nothing here panics.

use serde_json::{Map, Value};

use crate::ResourceDef;

mod autoscaling_v1;

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

/// The field selectors of `events.k8s.io/v1` Events beside `metadata.name` and
/// `metadata.namespace`: kube's `AddFieldLabelConversionsForEvent`
/// (`pkg/apis/events/v1/conversion.go`), the core Event's selectable fields under their
/// `events.k8s.io/v1` names (`involvedObject.*` and `reportingComponent` are not accepted
/// there: 400 `field label not supported`).
pub const EVENTS_V1_FIELDS: &[&str] = &[
    "regarding.kind",
    "regarding.namespace",
    "regarding.name",
    "regarding.uid",
    "regarding.apiVersion",
    "regarding.resourceVersion",
    "regarding.fieldPath",
    "reason",
    "reportingController",
    "source",
    "type",
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
    /// `autoscaling/v1` HorizontalPodAutoscalers over `autoscaling/v2` ones.
    AutoscalingV1,
}

impl Conversion {
    /// The object as the view's version reads it.
    #[must_use]
    pub fn to_view(&self, stored: &Value) -> Value {
        match self {
            Conversion::ApiVersion { view, .. } => with_api_version(stored.clone(), view),
            Conversion::EventsV1 => renamed(stored, "events.k8s.io/v1", false),
            Conversion::AutoscalingV1 => autoscaling_v1::to_v1(stored),
        }
    }

    /// The `apiVersion` objects of this view are stored at (kube's storage version, which
    /// discovery's `storageVersionHash` names): the CRD's storage version, core `v1` for
    /// `events.k8s.io/v1` Events, `autoscaling/v2` for `autoscaling/v1` HPAs.
    #[must_use]
    pub fn storage_api_version(&self) -> &str {
        match self {
            Conversion::ApiVersion { storage, .. } => storage,
            Conversion::EventsV1 => "v1",
            Conversion::AutoscalingV1 => "autoscaling/v2",
        }
    }

    /// The object at the storage version, from the view's version.
    #[must_use]
    pub fn stored_form(&self, view: &Value) -> Value {
        match self {
            Conversion::ApiVersion { storage, .. } => with_api_version(view.clone(), storage),
            Conversion::EventsV1 => renamed(view, "v1", true),
            Conversion::AutoscalingV1 => autoscaling_v1::to_v2(view),
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
/// `events.k8s.io/v1` Events for core `v1` Events, `autoscaling/v1` HorizontalPodAutoscalers
/// for `autoscaling/v2` ones.
#[must_use]
pub fn builtin_views(storage: &ResourceDef) -> Vec<(ResourceDef, Conversion)> {
    if !storage.is_builtin() {
        return Vec::new();
    }
    if storage.group.is_empty() && storage.plural == "events" {
        let mut def = ResourceDef::named("events.k8s.io", "v1", "events", "Event", true);
        def.short_names = vec!["ev".to_owned()];
        def.categories.clone_from(&storage.categories);
        def.selectable_fields = EVENTS_V1_FIELDS.iter().map(|&f| f.to_owned()).collect();
        return vec![(def, Conversion::EventsV1)];
    }
    if storage.group == "autoscaling" && storage.plural == "horizontalpodautoscalers" {
        let def = ResourceDef {
            version: "v1".to_owned(),
            ..storage.clone()
        };
        return vec![(def, Conversion::AutoscalingV1)];
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
        assert_eq!(Conversion::EventsV1.stored_form(&v1), core);
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
        assert_eq!(conversion.stored_form(&view), stored);
    }

    #[test]
    fn core_events_and_autoscalers_have_built_in_views() {
        let defs = crate::builtin_resources();
        let views: Vec<_> = defs.iter().flat_map(builtin_views).collect();
        assert_eq!(views.len(), 2);
        assert_eq!(views[0].0.api_version(), "events.k8s.io/v1");
        assert_eq!(views[0].0.kind, "Event");
        assert_eq!(views[1].0.api_version(), "autoscaling/v1");
        assert_eq!(views[1].0.short_names, ["hpa"]);
        assert_eq!(views[1].0.categories, ["all"]);
        assert_eq!(views[1].1, Conversion::AutoscalingV1);
    }

    #[test]
    fn autoscaling_v1_reads_the_cpu_target_and_keeps_the_rest_in_annotations() {
        let v2 = json!({
            "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web", "namespace": "default", "annotations": {"team": "a"}},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "minReplicas": 1, "maxReplicas": 5,
                "metrics": [
                    {"type": "Resource", "resource": {"name": "cpu",
                        "target": {"type": "Utilization", "averageUtilization": 60}}},
                    {"type": "Pods", "pods": {"metric": {"name": "qps"},
                        "target": {"type": "AverageValue", "averageValue": "10"}}}
                ],
                "behavior": {"scaleDown": {"stabilizationWindowSeconds": 300,
                    "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}}
            },
            "status": {
                "currentReplicas": 2, "desiredReplicas": 3,
                "currentMetrics": [{"type": "Resource", "resource": {"name": "cpu",
                    "current": {"averageUtilization": 70, "averageValue": "350m"}}}],
                "conditions": [{"type": "AbleToScale", "status": "True",
                    "lastTransitionTime": "2026-01-01T00:00:00Z", "reason": "ReadyForNewScale"}]
            }
        });
        let v1 = Conversion::AutoscalingV1.to_view(&v2);
        assert_eq!(v1["apiVersion"], "autoscaling/v1");
        assert_eq!(
            v1["spec"],
            json!({"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                   "minReplicas": 1, "maxReplicas": 5, "targetCPUUtilizationPercentage": 60})
        );
        assert_eq!(
            v1["status"],
            json!({"currentReplicas": 2, "desiredReplicas": 3, "currentCPUUtilizationPercentage": 70})
        );
        let annotations = &v1["metadata"]["annotations"];
        assert_eq!(annotations["team"], "a");
        assert_eq!(
            annotations["autoscaling.alpha.kubernetes.io/metrics"],
            r#"[{"type":"Pods","pods":{"metricName":"qps","targetAverageValue":"10"}}]"#
        );
        assert_eq!(
            annotations["autoscaling.alpha.kubernetes.io/current-metrics"],
            r#"[{"type":"Resource","resource":{"name":"cpu","currentAverageUtilization":70,"currentAverageValue":"350m"}}]"#
        );
        assert_eq!(
            annotations["autoscaling.alpha.kubernetes.io/conditions"],
            r#"[{"type":"AbleToScale","status":"True","lastTransitionTime":"2026-01-01T00:00:00Z","reason":"ReadyForNewScale"}]"#
        );
        assert_eq!(
            annotations["autoscaling.alpha.kubernetes.io/behavior"],
            r#"{"ScaleUp":null,"ScaleDown":{"StabilizationWindowSeconds":300,"SelectPolicy":null,"Policies":[{"Type":"Percent","Value":100,"PeriodSeconds":15}],"Tolerance":null}}"#
        );
        // Back at v2: the same object, the cpu target after the annotated metrics.
        let back = Conversion::AutoscalingV1.stored_form(&v1);
        let mut expected = v2.clone();
        let metrics = expected["spec"]["metrics"].as_array_mut().unwrap();
        metrics.rotate_left(1);
        assert_eq!(back, expected);
        // And again: a second round trip changes nothing more.
        let again =
            Conversion::AutoscalingV1.stored_form(&Conversion::AutoscalingV1.to_view(&back));
        assert_eq!(again, back);
    }

    #[test]
    fn autoscaling_v1_writes_become_v2_objects() {
        let v1 = json!({
            "apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web"},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 3,
                     "targetCPUUtilizationPercentage": 50}
        });
        let v2 = Conversion::AutoscalingV1.stored_form(&v1);
        assert_eq!(
            v2,
            json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                   "metadata": {"name": "web"},
                   "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 3,
                            "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                                "target": {"type": "Utilization", "averageUtilization": 50}}}]}})
        );
        assert_eq!(Conversion::AutoscalingV1.to_view(&v2), v1);
        // No target at all: kube's implicit 80% cpu.
        let mut bare = v1.clone();
        bare["spec"]
            .as_object_mut()
            .unwrap()
            .remove("targetCPUUtilizationPercentage");
        let v2 = Conversion::AutoscalingV1.stored_form(&bare);
        assert_eq!(
            v2["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"],
            80
        );
        // Annotated v1 metrics (v2beta1's shape) become v2 metrics; a bad annotation is
        // ignored and dropped.
        let mut annotated = v1.clone();
        annotated["metadata"]["annotations"] = json!({
            "autoscaling.alpha.kubernetes.io/metrics":
                r#"[{"type":"External","external":{"metricName":"queue","targetAverageValue":"30"}}]"#,
            "autoscaling.alpha.kubernetes.io/conditions": "not json"
        });
        let v2 = Conversion::AutoscalingV1.stored_form(&annotated);
        assert!(v2["metadata"].get("annotations").is_none(), "{v2}");
        assert_eq!(
            v2["spec"]["metrics"][0],
            json!({"type": "External", "external": {"metric": {"name": "queue"},
                   "target": {"type": "AverageValue", "averageValue": "30"}}})
        );
        assert_eq!(v2["spec"]["metrics"][1]["resource"]["name"], "cpu");
    }
}

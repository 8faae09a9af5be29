//! HorizontalPodAutoscalers' rules as kube-apiserver's
//! `pkg/apis/autoscaling/validation` (`ValidateHorizontalPodAutoscaler` and its `Update`)
//! applies them, on the internal object: an `autoscaling/v1` object is first converted to
//! `autoscaling/v2` ([`crate::versions::Conversion::AutoscalingV1`], kube's
//! `pkg/apis/autoscaling/v1/conversion.go`), so its causes have v2's paths
//! (`spec.targetCPUUtilizationPercentage: -5` is `spec.metrics[0].resource.target.
//! averageUtilization: Invalid value: -5: must be greater than 0`).
//!
//! ## Guarantees
//! - `spec.minReplicas` is at least 1 (0 on an update of an object that had 0: kube's
//!   `HPAScaleToZero` is alpha, off), `spec.maxReplicas` at least 1 and at least
//!   `minReplicas`; `scaleTargetRef`'s `kind` and `name` are given and are path segment
//!   names.
//! - Each metric: its `type` one of kube's five, the matching source given and no other (the
//!   others are refused in alphabetical order; kube walks a Go map, in no fixed order), each
//!   source's metric name, target (`Utilization`, `Value` or `AverageValue`, positive values)
//!   and its required target field; a container resource's name and container. A
//!   `minReplicas` of 0 needs an `Object` or `External` metric.
//! - `spec.behavior`'s scaling rules: stabilization window between 0 and 3600 seconds, select
//!   policy `Max`, `Min` or `Disabled`, at least one policy, each of type `Pods` or
//!   `Percent` with a positive value and a period between 1 and 1800 seconds.
//! - Status updates are not checked (kube checks that `currentReplicas` and
//!   `desiredReplicas` are not negative).
//!
//! Differs from kube: a quantity kube prints as Go's `%#v` of a `resource.Quantity` struct
//! (`target.value: Invalid value: resource.Quantity{i:...}`) prints here as its text.

use serde_json::Value;

use super::access::{get, list, text};
use super::pod_spec;
use crate::field::{Cause, forbidden, go_quote, invalid, not_supported, required};
use crate::names::path_segment_problems;
use crate::quantity::Quantity;
use crate::resources::ResourceDef;
use crate::versions::Conversion;

/// kube's `MaxPeriodSeconds`.
const MAX_PERIOD_SECONDS: i64 = 1800;
/// kube's `MaxStabilizationWindowSeconds`.
const MAX_STABILIZATION_WINDOW_SECONDS: i64 = 3600;
/// kube's `validMetricSourceTypesList` (sorted).
const METRIC_SOURCE_TYPES: [&str; 5] = [
    "ContainerResource",
    "External",
    "Object",
    "Pods",
    "Resource",
];

/// The causes of the HorizontalPodAutoscaler `object` (updating `old`), for `def`'s version.
pub(super) fn validate(
    def: &ResourceDef,
    object: &Value,
    old: Option<&Value>,
    causes: &mut Vec<Cause>,
) {
    let convert = |o: &Value| {
        if def.version == "v1" {
            Conversion::AutoscalingV1.stored_form(o)
        } else {
            o.clone()
        }
    };
    let internal = convert(object);
    let old_min = old
        .map(convert)
        .and_then(|old| old.pointer("/spec/minReplicas").and_then(Value::as_i64));
    let lower_bound = if old_min == Some(0) { 0 } else { 1 };
    let spec = internal.get("spec").unwrap_or(&Value::Null);
    spec_causes(spec, lower_bound, causes);
}

fn spec_causes(spec: &Value, lower_bound: i64, causes: &mut Vec<Cause>) {
    let min = pod_spec::int(spec, "minReplicas");
    let max = pod_spec::int(spec, "maxReplicas").unwrap_or(0);
    if let Some(min) = min.filter(|min| *min < lower_bound) {
        causes.push(invalid(
            "spec.minReplicas",
            &min.to_string(),
            &format!("must be greater than or equal to {lower_bound}"),
        ));
    }
    if max < 1 {
        causes.push(invalid(
            "spec.maxReplicas",
            &max.to_string(),
            "must be greater than 0",
        ));
    }
    if min.is_some_and(|min| max < min) {
        causes.push(invalid(
            "spec.maxReplicas",
            &max.to_string(),
            "must be greater than or equal to `minReplicas`",
        ));
    }
    object_reference(
        spec.get("scaleTargetRef").unwrap_or(&Value::Null),
        "spec.scaleTargetRef",
        causes,
    );
    let metrics = list(spec, "metrics");
    for (i, metric) in metrics.iter().enumerate() {
        metric_spec(metric, &format!("spec.metrics[{i}]"), causes);
    }
    let scales_on_objects = metrics
        .iter()
        .any(|m| matches!(text(m, "type"), "Object" | "External"));
    if min == Some(0) && !scales_on_objects {
        causes.push(forbidden(
            "spec.metrics",
            "must specify at least one Object or External metric to support scaling to zero replicas",
        ));
    }
    if let Some(behavior) = get(spec, "behavior") {
        for direction in ["scaleUp", "scaleDown"] {
            if let Some(rules) = get(behavior, direction) {
                scaling_rules(rules, &format!("spec.behavior.{direction}"), causes);
            }
        }
    }
}

/// `ValidateCrossVersionObjectReference`.
fn object_reference(reference: &Value, at: &str, causes: &mut Vec<Cause>) {
    for key in ["kind", "name"] {
        let value = text(reference, key);
        let here = format!("{at}.{key}");
        if value.is_empty() {
            causes.push(required(&here, ""));
        }
        for problem in path_segment_problems(value, false) {
            causes.push(invalid(&here, &go_quote(value), &problem));
        }
    }
}

/// The JSON key of each metric source, in kube's order of checks.
const SOURCES: [(&str, &str); 5] = [
    ("object", "Object"),
    ("external", "External"),
    ("pods", "Pods"),
    ("resource", "Resource"),
    ("containerResource", "ContainerResource"),
];

/// `validateMetricSpec`.
fn metric_spec(metric: &Value, at: &str, causes: &mut Vec<Cause>) {
    let kind = text(metric, "type");
    let type_path = format!("{at}.type");
    if kind.is_empty() {
        causes.push(required(&type_path, "must specify a metric source type"));
    }
    let unsupported = !METRIC_SOURCE_TYPES.contains(&kind);
    if unsupported {
        causes.push(not_supported(
            &type_path,
            &go_quote(kind),
            &METRIC_SOURCE_TYPES,
        ));
    }
    let present: Vec<&str> = SOURCES
        .iter()
        .filter(|(key, _)| get(metric, key).is_some())
        .map(|(key, _)| *key)
        .collect();
    if let Some(first) = present.first()
        && let Some(source) = get(metric, first)
    {
        let here = format!("{at}.{first}");
        match *first {
            "object" => object_source(source, &here, causes),
            "external" => external_source(source, &here, causes),
            "pods" => pods_source(source, &here, causes),
            "resource" => resource_source(source, &here, causes),
            _ => container_resource_source(source, &here, causes),
        }
    }
    let expected = SOURCES
        .iter()
        .find(|(_, name)| *name == kind)
        .map(|(key, _)| *key);
    match expected {
        Some(key) if !present.contains(&key) => causes.push(required(
            &format!("{at}.{key}"),
            "must populate information for the given metric source",
        )),
        Some(_) => {}
        None => causes.push(not_supported(
            &type_path,
            &go_quote(kind),
            &METRIC_SOURCE_TYPES,
        )),
    }
    if present.len() != 1 {
        let mut others: Vec<&str> = present
            .into_iter()
            .filter(|key| Some(*key) != expected)
            .collect();
        others.sort_unstable();
        for key in others {
            causes.push(forbidden(
                &format!("{at}.{key}"),
                "must populate the given metric source only",
            ));
        }
    }
}

fn target(source: &Value) -> &Value {
    source.get("target").unwrap_or(&Value::Null)
}

fn object_source(source: &Value, at: &str, causes: &mut Vec<Cause>) {
    object_reference(
        source.get("describedObject").unwrap_or(&Value::Null),
        &format!("{at}.describedObject"),
        causes,
    );
    metric_identifier(source, at, causes);
    metric_target(target(source), &format!("{at}.target"), causes);
    if get(target(source), "value").is_none() && get(target(source), "averageValue").is_none() {
        causes.push(required(
            &format!("{at}.target.averageValue"),
            "must set either a target value or averageValue",
        ));
    }
}

fn external_source(source: &Value, at: &str, causes: &mut Vec<Cause>) {
    metric_identifier(source, at, causes);
    let t = target(source);
    metric_target(t, &format!("{at}.target"), causes);
    let (value, average) = (get(t, "value").is_some(), get(t, "averageValue").is_some());
    if !value && !average {
        causes.push(required(
            &format!("{at}.target.averageValue"),
            "must set either a target value for metric or a per-pod target",
        ));
    }
    if value && average {
        causes.push(forbidden(
            &format!("{at}.target.value"),
            "may not set both a target value for metric and a per-pod target",
        ));
    }
}

fn pods_source(source: &Value, at: &str, causes: &mut Vec<Cause>) {
    metric_identifier(source, at, causes);
    metric_target(target(source), &format!("{at}.target"), causes);
    if get(target(source), "averageValue").is_none() {
        causes.push(required(
            &format!("{at}.target.averageValue"),
            "must specify a positive target averageValue",
        ));
    }
}

fn resource_source(source: &Value, at: &str, causes: &mut Vec<Cause>) {
    if text(source, "name").is_empty() {
        causes.push(required(
            &format!("{at}.name"),
            "must specify a resource name",
        ));
    }
    utilization_target(source, at, causes);
}

fn container_resource_source(source: &Value, at: &str, causes: &mut Vec<Cause>) {
    let name = text(source, "name");
    if name.is_empty() {
        causes.push(required(
            &format!("{at}.name"),
            "must specify a resource name",
        ));
    } else {
        pod_spec::resource_name(name, &format!("{at}.name"), causes);
    }
    let container = text(source, "container");
    if container.is_empty() {
        causes.push(required(
            &format!("{at}.container"),
            "must specify a container",
        ));
    } else {
        pod_spec::check_dns_label(&format!("{at}.container"), container, causes);
    }
    utilization_target(source, at, causes);
}

/// A (container) resource source's target: a utilization or an average value, not both.
fn utilization_target(source: &Value, at: &str, causes: &mut Vec<Cause>) {
    let t = target(source);
    metric_target(t, &format!("{at}.target"), causes);
    let utilization = get(t, "averageUtilization").is_some();
    let average = get(t, "averageValue").is_some();
    if !utilization && !average {
        causes.push(required(
            &format!("{at}.target.averageUtilization"),
            "must set either a target raw value or a target utilization",
        ));
    }
    if utilization && average {
        causes.push(forbidden(
            &format!("{at}.target.averageValue"),
            "may not set both a target raw value and a target utilization",
        ));
    }
}

/// `validateMetricTarget`.
fn metric_target(target: &Value, at: &str, causes: &mut Vec<Cause>) {
    let kind = text(target, "type");
    if kind.is_empty() {
        causes.push(required(
            &format!("{at}.type"),
            "must specify a metric target type",
        ));
    }
    if !matches!(kind, "Utilization" | "Value" | "AverageValue") {
        causes.push(invalid(
            &format!("{at}.type"),
            &go_quote(kind),
            "must be either Utilization, Value, or AverageValue",
        ));
    }
    for key in ["value", "averageValue"] {
        let Some(value) = get(target, key) else {
            continue;
        };
        let amount = pod_spec::quantity(value);
        if amount.is_none_or(|amount| amount <= Quantity::zero()) {
            let printed = value
                .as_str()
                .map_or_else(|| value.to_string(), ToOwned::to_owned);
            causes.push(invalid(
                &format!("{at}.{key}"),
                &printed,
                "must be positive",
            ));
        }
    }
    if let Some(utilization) = pod_spec::int(target, "averageUtilization").filter(|u| *u < 1) {
        causes.push(invalid(
            &format!("{at}.averageUtilization"),
            &utilization.to_string(),
            "must be greater than 0",
        ));
    }
}

/// `validateMetricIdentifier` of the source's `metric`.
fn metric_identifier(source: &Value, at: &str, causes: &mut Vec<Cause>) {
    let name = source
        .pointer("/metric/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let here = format!("{at}.metric.name");
    if name.is_empty() {
        causes.push(required(&here, "must specify a metric name"));
    }
    for problem in path_segment_problems(name, false) {
        causes.push(invalid(&here, &go_quote(name), &problem));
    }
}

/// `validateScalingRules`.
fn scaling_rules(rules: &Value, at: &str, causes: &mut Vec<Cause>) {
    if let Some(window) = pod_spec::int(rules, "stabilizationWindowSeconds") {
        let here = format!("{at}.stabilizationWindowSeconds");
        if window < 0 {
            causes.push(invalid(
                &here,
                &window.to_string(),
                "must be greater than or equal to zero",
            ));
        }
        if window > MAX_STABILIZATION_WINDOW_SECONDS {
            causes.push(invalid(
                &here,
                &window.to_string(),
                &format!("must be less than or equal to {MAX_STABILIZATION_WINDOW_SECONDS}"),
            ));
        }
    }
    if let Some(policy) = get(rules, "selectPolicy").and_then(Value::as_str)
        && !matches!(policy, "Disabled" | "Max" | "Min")
    {
        causes.push(not_supported(
            &format!("{at}.selectPolicy"),
            &go_quote(policy),
            &["Disabled", "Max", "Min"],
        ));
    }
    let policies = list(rules, "policies");
    if policies.is_empty() {
        causes.push(required(
            &format!("{at}.policies"),
            "must specify at least one Policy",
        ));
    }
    for (i, policy) in policies.iter().enumerate() {
        let here = format!("{at}.policies[{i}]");
        let kind = text(policy, "type");
        if !matches!(kind, "Pods" | "Percent") {
            causes.push(not_supported(
                &format!("{here}.type"),
                &go_quote(kind),
                &["Percent", "Pods"],
            ));
        }
        let value = pod_spec::int(policy, "value").unwrap_or(0);
        if value <= 0 {
            causes.push(invalid(
                &format!("{here}.value"),
                &value.to_string(),
                "must be greater than zero",
            ));
        }
        let period = pod_spec::int(policy, "periodSeconds").unwrap_or(0);
        if period <= 0 {
            causes.push(invalid(
                &format!("{here}.periodSeconds"),
                &period.to_string(),
                "must be greater than zero",
            ));
        }
        if period > MAX_PERIOD_SECONDS {
            causes.push(invalid(
                &format!("{here}.periodSeconds"),
                &period.to_string(),
                &format!("must be less than or equal to {MAX_PERIOD_SECONDS}"),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use crate::resources::{ResourceDef, builtin_resources};
    use crate::versions::builtin_views;

    fn hpa(version: &str) -> ResourceDef {
        let v2 = builtin_resources()
            .into_iter()
            .find(|d| d.group == "autoscaling" && d.plural == "horizontalpodautoscalers")
            .unwrap();
        if version == "v2" {
            return v2;
        }
        builtin_views(&v2).remove(0).0
    }

    /// The causes' messages of `object` created (after its defaults) at `version`.
    fn causes(version: &str, mut object: Value, old: Option<&Value>) -> Vec<String> {
        let def = hpa(version);
        crate::defaults::apply_defaults(&def, &mut object);
        match crate::kinds::validate(&def, &object, old) {
            Ok(()) => Vec::new(),
            Err(err) => err.cause_lines(),
        }
    }

    fn target() -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"})
    }

    #[test]
    fn valid_autoscalers_pass() {
        let v2 = json!({"metadata": {"name": "h"}, "spec": {"scaleTargetRef": target(),
            "minReplicas": 2, "maxReplicas": 5,
            "metrics": [
                {"type": "Resource", "resource": {"name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": 50}}},
                {"type": "Pods", "pods": {"metric": {"name": "rps"},
                    "target": {"type": "AverageValue", "averageValue": "1k"}}},
                {"type": "External", "external": {"metric": {"name": "queue"},
                    "target": {"type": "Value", "value": "30"}}},
                {"type": "ContainerResource", "containerResource": {"name": "memory",
                    "container": "app", "target": {"type": "AverageValue", "averageValue": "1Gi"}}}],
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": 300,
                "policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}]}}}});
        assert_eq!(causes("v2", v2, None), Vec::<String>::new());
        // `kubectl autoscale deployment web --max=3 --cpu-percent=50`.
        let v1 = json!({"metadata": {"name": "h"}, "spec": {"scaleTargetRef": target(),
            "maxReplicas": 3, "targetCPUUtilizationPercentage": 50}});
        assert_eq!(causes("v1", v1, None), Vec::<String>::new());
    }

    #[test]
    fn an_empty_spec_is_refused_as_kube_refuses_it() {
        let expected = [
            "spec.maxReplicas: Invalid value: 0: must be greater than 0",
            "spec.maxReplicas: Invalid value: 0: must be greater than or equal to `minReplicas`",
            "spec.scaleTargetRef.kind: Required value",
            "spec.scaleTargetRef.name: Required value",
        ];
        for version in ["v2", "v1"] {
            assert_eq!(
                causes(version, json!({"metadata": {"name": "h"}}), None),
                expected
            );
        }
    }

    #[test]
    fn replicas_and_references() {
        let spec = json!({"metadata": {"name": "h"}, "spec": {
            "scaleTargetRef": {"kind": "a/b", "name": ".."}, "minReplicas": 0, "maxReplicas": 2}});
        assert_eq!(
            causes("v2", spec.clone(), None),
            [
                "spec.minReplicas: Invalid value: 0: must be greater than or equal to 1",
                "spec.scaleTargetRef.kind: Invalid value: \"a/b\": may not contain '/'",
                "spec.scaleTargetRef.name: Invalid value: \"..\": may not be '..'",
                "spec.metrics: Forbidden: must specify at least one Object or External metric to support scaling to zero replicas",
            ]
        );
        // An object that already scales to zero may keep doing so.
        let old = json!({"spec": {"minReplicas": 0}});
        let kept = causes("v2", spec, Some(&old));
        assert_eq!(
            kept[0],
            "spec.scaleTargetRef.kind: Invalid value: \"a/b\": may not contain '/'"
        );
        let low = json!({"metadata": {"name": "h"}, "spec": {"scaleTargetRef": target(),
            "minReplicas": 4, "maxReplicas": 2}});
        assert_eq!(
            causes("v2", low, None),
            ["spec.maxReplicas: Invalid value: 2: must be greater than or equal to `minReplicas`"]
        );
    }

    #[test]
    fn metrics_are_checked_with_kubes_paths() {
        let object = json!({"metadata": {"name": "h"}, "spec": {"scaleTargetRef": target(),
            "maxReplicas": 3, "metrics": [
                {"type": "Bad"},
                {"type": "Resource", "resource": {"name": "", "target": {"type": "Bad", "averageUtilization": 0}},
                 "pods": {"metric": {"name": "x"}, "target": {"type": "AverageValue", "averageValue": "1"}}},
                {"type": "Pods", "pods": {"metric": {"name": ""}, "target": {"type": "Value", "value": "-1"}}},
                {"type": "Object", "object": {"describedObject": {"kind": "Service"},
                    "metric": {"name": "m"}, "target": {"type": "Value"}}},
                {"type": "External", "external": {"metric": {"name": "m"},
                    "target": {"type": "Value", "value": "1", "averageValue": "1"}}}]}});
        let types = "supported values: \"ContainerResource\", \"External\", \"Object\", \"Pods\", \"Resource\"";
        assert_eq!(
            causes("v2", object, None),
            [
                format!("spec.metrics[0].type: Unsupported value: \"Bad\": {types}"),
                format!("spec.metrics[0].type: Unsupported value: \"Bad\": {types}"),
                "spec.metrics[1].pods: Forbidden: must populate the given metric source only".to_owned(),
                "spec.metrics[2].pods.metric.name: Required value: must specify a metric name".to_owned(),
                "spec.metrics[2].pods.target.value: Invalid value: -1: must be positive".to_owned(),
                "spec.metrics[2].pods.target.averageValue: Required value: must specify a positive target averageValue"
                    .to_owned(),
                "spec.metrics[3].object.describedObject.name: Required value".to_owned(),
                "spec.metrics[3].object.target.averageValue: Required value: must set either a target value or averageValue"
                    .to_owned(),
                "spec.metrics[4].external.target.value: Forbidden: may not set both a target value for metric and a per-pod target"
                    .to_owned(),
            ]
        );
        let resource = json!({"metadata": {"name": "h"}, "spec": {"scaleTargetRef": target(),
            "maxReplicas": 3, "metrics": [{"type": "Resource", "resource": {"name": "",
                "target": {"type": "Bad", "averageUtilization": 0}}}]}});
        assert_eq!(
            causes("v2", resource, None),
            [
                "spec.metrics[0].resource.name: Required value: must specify a resource name",
                "spec.metrics[0].resource.target.type: Invalid value: \"Bad\": must be either Utilization, Value, or AverageValue",
                "spec.metrics[0].resource.target.averageUtilization: Invalid value: 0: must be greater than 0",
            ]
        );
        // v1's cpu target is the internal object's first metric.
        let v1 = json!({"metadata": {"name": "h"}, "spec": {"scaleTargetRef": target(),
            "maxReplicas": 3, "targetCPUUtilizationPercentage": -5}});
        assert_eq!(
            causes("v1", v1, None),
            [
                "spec.metrics[0].resource.target.averageUtilization: Invalid value: -5: must be greater than 0"
            ]
        );
    }

    #[test]
    fn behavior_rules() {
        let object = json!({"metadata": {"name": "h"}, "spec": {"scaleTargetRef": target(),
            "maxReplicas": 3, "behavior": {"scaleUp": {"stabilizationWindowSeconds": 4000,
                "selectPolicy": "Most", "policies": [{"type": "Pod", "value": 0, "periodSeconds": 2000}]},
                "scaleDown": {"stabilizationWindowSeconds": -1, "policies": []}}}});
        assert_eq!(
            causes("v2", object, None),
            [
                "spec.behavior.scaleUp.stabilizationWindowSeconds: Invalid value: 4000: must be less than or equal to 3600",
                "spec.behavior.scaleUp.selectPolicy: Unsupported value: \"Most\": supported values: \"Disabled\", \"Max\", \"Min\"",
                "spec.behavior.scaleUp.policies[0].type: Unsupported value: \"Pod\": supported values: \"Percent\", \"Pods\"",
                "spec.behavior.scaleUp.policies[0].value: Invalid value: 0: must be greater than zero",
                "spec.behavior.scaleUp.policies[0].periodSeconds: Invalid value: 2000: must be less than or equal to 1800",
                "spec.behavior.scaleDown.stabilizationWindowSeconds: Invalid value: -1: must be greater than or equal to zero",
                "spec.behavior.scaleDown.policies: Required value: must specify at least one Policy",
            ]
        );
    }
}

//! `autoscaling/v1` HorizontalPodAutoscalers over `autoscaling/v2` storage, as kube's
//! `pkg/apis/autoscaling/v1/conversion.go` converts them (through the internal type, whose
//! fields are v2's).
//!
//! - v2 → v1: the first `Resource` metric on `cpu` with an `averageUtilization` is
//!   `spec.targetCPUUtilizationPercentage`; every other metric is kept, in v1's
//!   (`v2beta1`-shaped) `MetricSpec`, in the annotation `autoscaling.alpha.kubernetes.io/metrics`;
//!   `status.currentMetrics` (all of them) in `.../current-metrics`, with the cpu utilization
//!   also in `status.currentCPUUtilizationPercentage`; `status.conditions` in
//!   `.../conditions`; `spec.behavior` in `.../behavior` (kube marshals the internal type
//!   there, so its keys are Go's field names). The annotations are written as Go's
//!   `encoding/json` writes them: fields in struct order.
//! - v1 → v2: those annotations are read back (and removed): the annotated metrics, then the
//!   cpu target; no metric at all is the implicit cpu utilization of 80; the annotated current
//!   metrics replace the one the cpu utilization gives. Annotations that do not parse are
//!   ignored, as kube ignores them.
//!
//! A v2 object read at v1 and written back is the same object, except that its cpu
//! utilization metric moves after the others (kube's order).

use serde_json::{Map, Value, json};

/// The round-trip annotations (`autoscaling.MetricSpecsAnnotation` and the others).
pub(super) const METRICS: &str = "autoscaling.alpha.kubernetes.io/metrics";
pub(super) const CURRENT_METRICS: &str = "autoscaling.alpha.kubernetes.io/current-metrics";
pub(super) const CONDITIONS: &str = "autoscaling.alpha.kubernetes.io/conditions";
pub(super) const BEHAVIOR: &str = "autoscaling.alpha.kubernetes.io/behavior";
const ROUND_TRIP: [&str; 4] = [METRICS, CURRENT_METRICS, CONDITIONS, BEHAVIOR];

/// The CPU utilization kube's controller assumed when a v1 object named none.
const DEFAULT_CPU_UTILIZATION: i64 = 80;

/// Go's JSON of a string: `encoding/json` escapes `<`, `>` and `&`.
fn go_string(s: &str) -> String {
    serde_json::to_string(s)
        .unwrap_or_default()
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}

/// A JSON value as Go writes a `map`/scalar: maps with sorted keys (serde_json's order).
fn go_value(value: &Value) -> String {
    match value {
        Value::String(s) => go_string(s),
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(go_value).collect::<Vec<_>>().join(",")
        ),
        Value::Object(map) => format!(
            "{{{}}}",
            map.iter()
                .map(|(k, v)| format!("{}:{}", go_string(k), go_value(v)))
                .collect::<Vec<_>>()
                .join(",")
        ),
        other => other.to_string(),
    }
}

/// A Go struct's JSON: `fields` in order, already written.
fn go_struct(fields: Vec<(&str, String)>) -> String {
    format!(
        "{{{}}}",
        fields
            .into_iter()
            .map(|(k, v)| format!("{}:{v}", go_string(k)))
            .collect::<Vec<_>>()
            .join(",")
    )
}

fn get<'a>(value: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.')
        .try_fold(value, |v, key| v.get(key))
        .filter(|v| !v.is_null())
}

fn text(value: &Value, path: &str) -> String {
    get(value, path)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// An `omitempty` pointer field: written when present.
fn optional(fields: &mut Vec<(&'static str, String)>, key: &'static str, value: Option<&Value>) {
    if let Some(value) = value {
        fields.push((key, go_value(value)));
    }
}

/// A `resource.Quantity` (not a pointer): `"0"` when absent.
fn quantity(value: Option<&Value>) -> String {
    value.map_or_else(|| go_string("0"), go_value)
}

/// A `*metav1.LabelSelector` in Go's field order (`matchLabels`, `matchExpressions`).
fn selector(fields: &mut Vec<(&'static str, String)>, key: &'static str, value: Option<&Value>) {
    let Some(value) = value else {
        return;
    };
    let mut out = Vec::new();
    if let Some(labels) =
        get(value, "matchLabels").filter(|l| l.as_object().is_some_and(|m| !m.is_empty()))
    {
        out.push(("matchLabels", go_value(labels)));
    }
    if let Some(Value::Array(expressions)) = get(value, "matchExpressions")
        && !expressions.is_empty()
    {
        let written: Vec<String> = expressions
            .iter()
            .map(|e| {
                let mut requirement = vec![
                    ("key", go_string(&text(e, "key"))),
                    ("operator", go_string(&text(e, "operator"))),
                ];
                if let Some(Value::Array(values)) = get(e, "values")
                    && !values.is_empty()
                {
                    requirement.push(("values", go_value(&Value::Array(values.clone()))));
                }
                go_struct(requirement)
            })
            .collect();
        out.push(("matchExpressions", format!("[{}]", written.join(","))));
    }
    fields.push((key, go_struct(out)));
}

/// A `CrossVersionObjectReference` (`kind`, `name`, `apiVersion` omitempty).
fn reference(value: Option<&Value>) -> String {
    let value = value.unwrap_or(&Value::Null);
    let mut fields = vec![
        ("kind", go_string(&text(value, "kind"))),
        ("name", go_string(&text(value, "name"))),
    ];
    let api_version = text(value, "apiVersion");
    if !api_version.is_empty() {
        fields.push(("apiVersion", go_string(&api_version)));
    }
    go_struct(fields)
}

/// The v1 `MetricSpec` of a v2 metric, as Go writes it.
fn metric_spec_v1(metric: &Value) -> String {
    let mut fields = vec![("type", go_string(&text(metric, "type")))];
    if let Some(object) = get(metric, "object") {
        let mut out = vec![
            ("target", reference(get(object, "describedObject"))),
            ("metricName", go_string(&text(object, "metric.name"))),
            ("targetValue", quantity(get(object, "target.value"))),
        ];
        selector(&mut out, "selector", get(object, "metric.selector"));
        optional(&mut out, "averageValue", get(object, "target.averageValue"));
        fields.push(("object", go_struct(out)));
    }
    if let Some(pods) = get(metric, "pods") {
        let mut out = vec![
            ("metricName", go_string(&text(pods, "metric.name"))),
            (
                "targetAverageValue",
                quantity(get(pods, "target.averageValue")),
            ),
        ];
        selector(&mut out, "selector", get(pods, "metric.selector"));
        fields.push(("pods", go_struct(out)));
    }
    for (key, container) in [("resource", false), ("containerResource", true)] {
        if let Some(resource) = get(metric, key) {
            let mut out = vec![("name", go_string(&text(resource, "name")))];
            optional(
                &mut out,
                "targetAverageUtilization",
                get(resource, "target.averageUtilization"),
            );
            optional(
                &mut out,
                "targetAverageValue",
                get(resource, "target.averageValue"),
            );
            if container {
                out.push(("container", go_string(&text(resource, "container"))));
            }
            fields.push((key, go_struct(out)));
        }
    }
    if let Some(external) = get(metric, "external") {
        let mut out = vec![("metricName", go_string(&text(external, "metric.name")))];
        selector(&mut out, "metricSelector", get(external, "metric.selector"));
        optional(&mut out, "targetValue", get(external, "target.value"));
        optional(
            &mut out,
            "targetAverageValue",
            get(external, "target.averageValue"),
        );
        fields.push(("external", go_struct(out)));
    }
    go_struct(fields)
}

/// The v1 `MetricStatus` of a v2 one, as Go writes it.
fn metric_status_v1(metric: &Value) -> String {
    let mut fields = vec![("type", go_string(&text(metric, "type")))];
    if let Some(object) = get(metric, "object") {
        let mut out = vec![
            ("target", reference(get(object, "describedObject"))),
            ("metricName", go_string(&text(object, "metric.name"))),
            ("currentValue", quantity(get(object, "current.value"))),
        ];
        selector(&mut out, "selector", get(object, "metric.selector"));
        optional(
            &mut out,
            "averageValue",
            get(object, "current.averageValue"),
        );
        fields.push(("object", go_struct(out)));
    }
    if let Some(pods) = get(metric, "pods") {
        let mut out = vec![
            ("metricName", go_string(&text(pods, "metric.name"))),
            (
                "currentAverageValue",
                quantity(get(pods, "current.averageValue")),
            ),
        ];
        selector(&mut out, "selector", get(pods, "metric.selector"));
        fields.push(("pods", go_struct(out)));
    }
    for (key, container) in [("resource", false), ("containerResource", true)] {
        if let Some(resource) = get(metric, key) {
            let mut out = vec![("name", go_string(&text(resource, "name")))];
            optional(
                &mut out,
                "currentAverageUtilization",
                get(resource, "current.averageUtilization"),
            );
            out.push((
                "currentAverageValue",
                quantity(get(resource, "current.averageValue")),
            ));
            if container {
                out.push(("container", go_string(&text(resource, "container"))));
            }
            fields.push((key, go_struct(out)));
        }
    }
    if let Some(external) = get(metric, "external") {
        let mut out = vec![("metricName", go_string(&text(external, "metric.name")))];
        selector(&mut out, "metricSelector", get(external, "metric.selector"));
        out.push(("currentValue", quantity(get(external, "current.value"))));
        optional(
            &mut out,
            "currentAverageValue",
            get(external, "current.averageValue"),
        );
        fields.push(("external", go_struct(out)));
    }
    go_struct(fields)
}

/// A v1 `HorizontalPodAutoscalerCondition` (its `lastTransitionTime`, a struct, is written
/// even when zero: `null`).
fn condition_v1(condition: &Value) -> String {
    let mut fields = vec![
        ("type", go_string(&text(condition, "type"))),
        ("status", go_string(&text(condition, "status"))),
        (
            "lastTransitionTime",
            get(condition, "lastTransitionTime").map_or_else(|| "null".to_owned(), go_value),
        ),
    ];
    for key in ["reason", "message"] {
        let value = text(condition, key);
        if !value.is_empty() {
            fields.push((key, go_string(&value)));
        }
    }
    go_struct(fields)
}

/// The internal `HorizontalPodAutoscalerBehavior` as Go marshals it (no JSON tags: Go's field
/// names, nil pointers and slices as `null`).
fn behavior_internal(behavior: &Value) -> String {
    let rules = |key: &str| match get(behavior, key) {
        None => "null".to_owned(),
        Some(rules) => {
            let policies = match get(rules, "policies") {
                Some(Value::Array(policies)) => format!(
                    "[{}]",
                    policies
                        .iter()
                        .map(|p| go_struct(vec![
                            ("Type", go_string(&text(p, "type"))),
                            (
                                "Value",
                                get(p, "value").map_or_else(|| "0".to_owned(), go_value)
                            ),
                            (
                                "PeriodSeconds",
                                get(p, "periodSeconds").map_or_else(|| "0".to_owned(), go_value)
                            ),
                        ]))
                        .collect::<Vec<_>>()
                        .join(",")
                ),
                _ => "null".to_owned(),
            };
            let or_null = |key: &str| get(rules, key).map_or_else(|| "null".to_owned(), go_value);
            go_struct(vec![
                (
                    "StabilizationWindowSeconds",
                    or_null("stabilizationWindowSeconds"),
                ),
                ("SelectPolicy", or_null("selectPolicy")),
                ("Policies", policies),
                ("Tolerance", or_null("tolerance")),
            ])
        }
    };
    go_struct(vec![
        ("ScaleUp", rules("scaleUp")),
        ("ScaleDown", rules("scaleDown")),
    ])
}

fn is_cpu_utilization_target(metric: &Value) -> bool {
    text(metric, "type") == "Resource"
        && text(metric, "resource.name") == "cpu"
        && get(metric, "resource.target.averageUtilization").is_some()
}

/// Removes the round-trip annotations (and an annotations map left empty); what was there.
fn take_round_trip(object: &mut Map<String, Value>) -> Map<String, Value> {
    let mut taken = Map::new();
    let Some(Value::Object(meta)) = object.get_mut("metadata") else {
        return taken;
    };
    if let Some(Value::Object(annotations)) = meta.get_mut("annotations") {
        for key in ROUND_TRIP {
            if let Some(value) = annotations.remove(key) {
                taken.insert(key.to_owned(), value);
            }
        }
        if annotations.is_empty() && !taken.is_empty() {
            meta.remove("annotations");
        }
    }
    taken
}

fn annotate(object: &mut Map<String, Value>, key: &str, value: String) {
    let meta = object
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(meta) = meta {
        let annotations = meta
            .entry("annotations")
            .or_insert_with(|| Value::Object(Map::new()));
        if !annotations.is_object() {
            *annotations = Value::Object(Map::new());
        }
        annotations[key] = Value::String(value);
    }
}

/// A stored `autoscaling/v2` object read at `autoscaling/v1`.
pub(super) fn to_v1(stored: &Value) -> Value {
    let Some(map) = stored.as_object() else {
        return stored.clone();
    };
    let mut out = map.clone();
    take_round_trip(&mut out);
    out.insert("apiVersion".into(), json!("autoscaling/v1"));
    let spec = map.get("spec").cloned().unwrap_or(Value::Null);
    let metrics: &[Value] = spec
        .get("metrics")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice);
    if let Some(Value::Object(spec_out)) = out.get_mut("spec") {
        spec_out.remove("metrics");
        spec_out.remove("behavior");
        if let Some(cpu) = metrics.iter().find(|m| is_cpu_utilization_target(m)) {
            spec_out.insert(
                "targetCPUUtilizationPercentage".into(),
                get(cpu, "resource.target.averageUtilization")
                    .cloned()
                    .unwrap_or(Value::Null),
            );
        }
    }
    let others: Vec<String> = metrics
        .iter()
        .filter(|m| !is_cpu_utilization_target(m))
        .map(metric_spec_v1)
        .collect();
    let status = map.get("status").cloned().unwrap_or(Value::Null);
    let current: &[Value] = status
        .get("currentMetrics")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice);
    let conditions: &[Value] = status
        .get("conditions")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice);
    if let Some(Value::Object(status_out)) = out.get_mut("status") {
        status_out.remove("currentMetrics");
        status_out.remove("conditions");
        for metric in current {
            if text(metric, "type") == "Resource"
                && text(metric, "resource.name") == "cpu"
                && let Some(utilization) = get(metric, "resource.current.averageUtilization")
            {
                status_out.insert(
                    "currentCPUUtilizationPercentage".into(),
                    utilization.clone(),
                );
            }
        }
    }
    if !others.is_empty() {
        annotate(&mut out, METRICS, format!("[{}]", others.join(",")));
    }
    if !current.is_empty() {
        let written: Vec<String> = current.iter().map(metric_status_v1).collect();
        annotate(
            &mut out,
            CURRENT_METRICS,
            format!("[{}]", written.join(",")),
        );
    }
    if let Some(behavior) = get(&spec, "behavior") {
        annotate(&mut out, BEHAVIOR, behavior_internal(behavior));
    }
    if !conditions.is_empty() {
        let written: Vec<String> = conditions.iter().map(condition_v1).collect();
        annotate(&mut out, CONDITIONS, format!("[{}]", written.join(",")));
    }
    Value::Object(out)
}

/// Sets `key` to `value` when it is present (not absent or null).
fn put(map: &mut Map<String, Value>, key: &str, value: Option<&Value>) {
    if let Some(value) = value {
        map.insert(key.to_owned(), value.clone());
    }
}

/// A `MetricIdentifier` from a v1 metric's name and selector.
fn identifier(name: Option<&Value>, selector: Option<&Value>) -> Value {
    let mut out = Map::new();
    out.insert("name".into(), name.cloned().unwrap_or_else(|| json!("")));
    put(&mut out, "selector", selector);
    Value::Object(out)
}

fn described_object(target: Option<&Value>) -> Value {
    let target = target.unwrap_or(&Value::Null);
    let mut out = Map::new();
    out.insert("kind".into(), json!(text(target, "kind")));
    out.insert("name".into(), json!(text(target, "name")));
    let api_version = text(target, "apiVersion");
    if !api_version.is_empty() {
        out.insert("apiVersion".into(), json!(api_version));
    }
    Value::Object(out)
}

fn zero_quantity(value: Option<&Value>) -> Value {
    value.cloned().unwrap_or_else(|| json!("0"))
}

/// The v2 metric of a v1 `MetricSpec` (kube's `Convert_v1_*MetricSource_To_autoscaling_*`).
fn metric_spec_v2(metric: &Value) -> Value {
    let mut out = Map::new();
    out.insert("type".into(), json!(text(metric, "type")));
    if let Some(object) = get(metric, "object") {
        let average = get(object, "averageValue");
        let mut target = Map::new();
        target.insert(
            "type".into(),
            json!(if average.is_none() {
                "Value"
            } else {
                "AverageValue"
            }),
        );
        target.insert("value".into(), zero_quantity(get(object, "targetValue")));
        put(&mut target, "averageValue", average);
        out.insert(
            "object".into(),
            json!({
                "describedObject": described_object(get(object, "target")),
                "metric": identifier(get(object, "metricName"), get(object, "selector")),
                "target": target,
            }),
        );
    }
    if let Some(pods) = get(metric, "pods") {
        out.insert(
            "pods".into(),
            json!({
                "metric": identifier(get(pods, "metricName"), get(pods, "selector")),
                "target": {"type": "AverageValue",
                           "averageValue": zero_quantity(get(pods, "targetAverageValue"))},
            }),
        );
    }
    for key in ["resource", "containerResource"] {
        if let Some(resource) = get(metric, key) {
            let utilization = get(resource, "targetAverageUtilization");
            let mut target = Map::new();
            target.insert(
                "type".into(),
                json!(if utilization.is_none() {
                    "AverageValue"
                } else {
                    "Utilization"
                }),
            );
            put(&mut target, "averageUtilization", utilization);
            put(
                &mut target,
                "averageValue",
                get(resource, "targetAverageValue"),
            );
            let mut source = Map::new();
            source.insert("name".into(), json!(text(resource, "name")));
            source.insert("target".into(), Value::Object(target));
            if key == "containerResource" {
                source.insert("container".into(), json!(text(resource, "container")));
            }
            out.insert(key.into(), Value::Object(source));
        }
    }
    if let Some(external) = get(metric, "external") {
        let value = get(external, "targetValue");
        let mut target = Map::new();
        target.insert(
            "type".into(),
            json!(if value.is_none() {
                "AverageValue"
            } else {
                "Value"
            }),
        );
        put(&mut target, "value", value);
        put(
            &mut target,
            "averageValue",
            get(external, "targetAverageValue"),
        );
        out.insert(
            "external".into(),
            json!({
                "metric": identifier(get(external, "metricName"), get(external, "metricSelector")),
                "target": target,
            }),
        );
    }
    Value::Object(out)
}

/// The v2 metric status of a v1 `MetricStatus`.
fn metric_status_v2(metric: &Value) -> Value {
    let mut out = Map::new();
    out.insert("type".into(), json!(text(metric, "type")));
    if let Some(object) = get(metric, "object") {
        let mut current = Map::new();
        current.insert("value".into(), zero_quantity(get(object, "currentValue")));
        put(&mut current, "averageValue", get(object, "averageValue"));
        out.insert(
            "object".into(),
            json!({
                "metric": identifier(get(object, "metricName"), get(object, "selector")),
                "current": current,
                "describedObject": described_object(get(object, "target")),
            }),
        );
    }
    if let Some(pods) = get(metric, "pods") {
        out.insert(
            "pods".into(),
            json!({
                "metric": identifier(get(pods, "metricName"), get(pods, "selector")),
                "current": {"averageValue": zero_quantity(get(pods, "currentAverageValue"))},
            }),
        );
    }
    for key in ["resource", "containerResource"] {
        if let Some(resource) = get(metric, key) {
            let mut current = Map::new();
            current.insert(
                "averageValue".into(),
                zero_quantity(get(resource, "currentAverageValue")),
            );
            put(
                &mut current,
                "averageUtilization",
                get(resource, "currentAverageUtilization"),
            );
            let mut source = Map::new();
            source.insert("name".into(), json!(text(resource, "name")));
            source.insert("current".into(), Value::Object(current));
            if key == "containerResource" {
                source.insert("container".into(), json!(text(resource, "container")));
            }
            out.insert(key.into(), Value::Object(source));
        }
    }
    if let Some(external) = get(metric, "external") {
        let mut current = Map::new();
        current.insert("value".into(), zero_quantity(get(external, "currentValue")));
        put(
            &mut current,
            "averageValue",
            get(external, "currentAverageValue"),
        );
        out.insert(
            "external".into(),
            json!({
                "metric": identifier(get(external, "metricName"), get(external, "metricSelector")),
                "current": current,
            }),
        );
    }
    Value::Object(out)
}

/// Go's case-insensitive field match, as `encoding/json` decodes a struct.
fn field<'a>(object: &'a Value, name: &str) -> Option<&'a Value> {
    object
        .as_object()?
        .iter()
        .find(|(key, _)| key.eq_ignore_ascii_case(name))
        .map(|(_, value)| value)
        .filter(|value| !value.is_null())
}

/// The v2 `behavior` of the annotation's internal `HorizontalPodAutoscalerBehavior`; `None`
/// for the zero behavior (both rules nil).
fn behavior_v2(internal: &Value) -> Option<Value> {
    let mut out = Map::new();
    for (go, key) in [("ScaleUp", "scaleUp"), ("ScaleDown", "scaleDown")] {
        let Some(rules) = field(internal, go) else {
            continue;
        };
        let mut converted = Map::new();
        for (go, key) in [
            ("StabilizationWindowSeconds", "stabilizationWindowSeconds"),
            ("SelectPolicy", "selectPolicy"),
        ] {
            put(&mut converted, key, field(rules, go));
        }
        if let Some(Value::Array(policies)) = field(rules, "Policies") {
            let policies: Vec<Value> = policies
                .iter()
                .map(|p| {
                    json!({
                        "type": field(p, "Type").cloned().unwrap_or_else(|| json!("")),
                        "value": field(p, "Value").cloned().unwrap_or_else(|| json!(0)),
                        "periodSeconds": field(p, "PeriodSeconds").cloned().unwrap_or_else(|| json!(0)),
                    })
                })
                .collect();
            converted.insert("policies".into(), Value::Array(policies));
        }
        put(&mut converted, "tolerance", field(rules, "Tolerance"));
        out.insert(key.into(), Value::Object(converted));
    }
    (!out.is_empty()).then_some(Value::Object(out))
}

fn parsed_list(annotation: Option<&Value>) -> Option<Vec<Value>> {
    let text = annotation?.as_str()?;
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Array(items)) => Some(items),
        _ => None,
    }
}

/// An `autoscaling/v1` object as the `autoscaling/v2` object stored for it.
pub(super) fn to_v2(view: &Value) -> Value {
    let Some(map) = view.as_object() else {
        return view.clone();
    };
    let mut out = map.clone();
    let annotations = take_round_trip(&mut out);
    out.insert("apiVersion".into(), json!("autoscaling/v2"));

    let spec = map.get("spec").cloned().unwrap_or(Value::Null);
    let mut metrics: Vec<Value> = parsed_list(annotations.get(METRICS))
        .map(|items| items.iter().map(metric_spec_v2).collect())
        .unwrap_or_default();
    let cpu = get(&spec, "targetCPUUtilizationPercentage")
        .cloned()
        .or_else(|| metrics.is_empty().then(|| json!(DEFAULT_CPU_UTILIZATION)));
    if let Some(cpu) = cpu {
        metrics.push(json!({"type": "Resource", "resource": {"name": "cpu",
            "target": {"type": "Utilization", "averageUtilization": cpu}}}));
    }
    let behavior = annotations
        .get(BEHAVIOR)
        .and_then(Value::as_str)
        .and_then(|text| serde_json::from_str::<Value>(text).ok())
        .and_then(|internal| behavior_v2(&internal));
    let spec_out = out
        .entry("spec")
        .or_insert_with(|| Value::Object(Map::new()));
    if spec_out.is_null() {
        *spec_out = Value::Object(Map::new());
    }
    if let Value::Object(spec_out) = spec_out {
        spec_out.remove("targetCPUUtilizationPercentage");
        spec_out.insert("metrics".into(), Value::Array(metrics));
        if let Some(behavior) = behavior {
            spec_out.insert("behavior".into(), behavior);
        }
    }

    let current = parsed_list(annotations.get(CURRENT_METRICS))
        .map(|items| items.iter().map(metric_status_v2).collect::<Vec<_>>());
    let conditions = parsed_list(annotations.get(CONDITIONS));
    let has_status = map.get("status").is_some_and(|s| !s.is_null());
    if has_status || current.is_some() || conditions.is_some() {
        let status = map.get("status").cloned().unwrap_or(Value::Null);
        let status_out = out
            .entry("status")
            .or_insert_with(|| Value::Object(Map::new()));
        if status_out.is_null() {
            *status_out = Value::Object(Map::new());
        }
        if let Value::Object(status_out) = status_out {
            status_out.remove("currentCPUUtilizationPercentage");
            let from_cpu = get(&status, "currentCPUUtilizationPercentage").map(|cpu| {
                vec![json!({"type": "Resource",
                    "resource": {"name": "cpu", "current": {"averageUtilization": cpu}}})]
            });
            if let Some(metrics) = current.or(from_cpu) {
                status_out.insert("currentMetrics".into(), Value::Array(metrics));
            }
            if let Some(conditions) = conditions {
                status_out.insert("conditions".into(), Value::Array(conditions));
            }
        }
    }
    Value::Object(out)
}

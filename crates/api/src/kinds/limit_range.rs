//! LimitRanges' rules as kube-apiserver's `pkg/apis/core/validation` (`ValidateLimitRange`)
//! applies them, after kube's defaults (a `Container` item's `default` from its `max`, its
//! `defaultRequest` from its `default` or `min`).
//!
//! ## Guarantees
//! - Each item's `type` is a qualified name, `Pod`, `Container` or `PersistentVolumeClaim`
//!   unless prefixed, and appears once; its resource names are container resources for `Pod`
//!   and `Container` items, resources otherwise; a `Pod` item has no `default` nor
//!   `defaultRequest`; a `PersistentVolumeClaim` item has a `min` or `max` storage.
//! - For each resource: `min` ≤ `defaultRequest` ≤ `default` ≤ `max`, `min` ≤ `max`,
//!   `maxLimitRequestRatio` at least 1 and at most `max / min`, and `default` equal to
//!   `defaultRequest` for resources that may not be overcommitted (hugepages, extended
//!   resources), with kube's messages (`min value 2 is greater than max value 1`).
//!
//! Differs from kube: kube walks its maps (and so reports the resources) in Go's random map
//! order, this walks them sorted; a quantity kube prints as Go's `%#v` of a
//! `resource.Quantity` struct prints here as its text.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use super::pod_spec;
use crate::field::{Cause, duplicate, forbidden, go_quote, invalid, required};
use crate::names::validate_qualified_name;
use crate::quantity::{NANOS, Quantity};

/// kube's `resource.MaxMilliValue`.
const MAX_MILLI_VALUE: i128 = (i64::MAX / 1000) as i128;

/// The causes of the LimitRange `object`.
pub(super) fn validate(object: &Value, causes: &mut Vec<Cause>) {
    let items = object
        .pointer("/spec/limits")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    let mut types = BTreeSet::new();
    for (i, item) in items.iter().enumerate() {
        let at = format!("spec.limits[{i}]");
        let kind = item.get("type").and_then(Value::as_str).unwrap_or("");
        type_name(kind, &format!("{at}.type"), causes);
        if !types.insert(kind) {
            causes.push(duplicate(&format!("{at}.type"), &go_quote(kind)));
        }
        let container = matches!(kind, "Pod" | "Container");
        let mut keys = BTreeSet::new();
        let mut read = |key: &str, causes: &mut Vec<Cause>| -> BTreeMap<String, Quantity> {
            let mut read = BTreeMap::new();
            for (name, value) in item
                .get(key)
                .and_then(Value::as_object)
                .unwrap_or(&Map::new())
            {
                let here = format!("{at}.{key}[{name}]");
                if container {
                    pod_spec::resource_name(name, &here, causes);
                } else {
                    pod_spec::any_resource_name(name, &here, causes);
                }
                keys.insert(name.clone());
                if let Some(amount) = pod_spec::quantity(value) {
                    read.insert(name.clone(), amount);
                }
            }
            read
        };
        let max = read("max", causes);
        let min = read("min", causes);
        let (mut defaults, mut requests) = (BTreeMap::new(), BTreeMap::new());
        if kind == "Pod" {
            for key in ["default", "defaultRequest"] {
                if item
                    .get(key)
                    .and_then(Value::as_object)
                    .is_some_and(|m| !m.is_empty())
                {
                    causes.push(forbidden(
                        &format!("{at}.{key}"),
                        "may not be specified when `type` is 'Pod'",
                    ));
                }
            }
        } else {
            defaults = read("default", causes);
            requests = read("defaultRequest", causes);
        }
        if kind == "PersistentVolumeClaim"
            && !min.contains_key("storage")
            && !max.contains_key("storage")
        {
            causes.push(required(
                &format!("{at}.limits"),
                "either minimum or maximum storage value is required, but neither was provided",
            ));
        }
        let ratios = read("maxLimitRequestRatio", causes);
        for key in &keys {
            let (min, max) = (min.get(key), max.get(key));
            let (default, request, ratio) = (defaults.get(key), requests.get(key), ratios.get(key));
            let mut push = |field: &str, shown: &Quantity, detail: String| {
                causes.push(invalid(
                    &format!("{at}.{field}[{key}]"),
                    &shown.to_string(),
                    &detail,
                ));
            };
            if let (Some(min), Some(max)) = (min, max)
                && min > max
            {
                push(
                    "min",
                    min,
                    format!("min value {min} is greater than max value {max}"),
                );
            }
            if let (Some(request), Some(min)) = (request, min)
                && min > request
            {
                push(
                    "defaultRequest",
                    request,
                    format!("min value {min} is greater than default request value {request}"),
                );
            }
            if let (Some(request), Some(max)) = (request, max)
                && request > max
            {
                push(
                    "defaultRequest",
                    request,
                    format!("default request value {request} is greater than max value {max}"),
                );
            }
            if let (Some(request), Some(default)) = (request, default)
                && request > default
            {
                push(
                    "defaultRequest",
                    request,
                    format!(
                        "default request value {request} is greater than default limit value {default}"
                    ),
                );
            }
            if let (Some(default), Some(min)) = (default, min)
                && min > default
            {
                push(
                    "default",
                    min,
                    format!("min value {min} is greater than default value {default}"),
                );
            }
            if let (Some(default), Some(max)) = (default, max)
                && default > max
            {
                push(
                    "default",
                    max,
                    format!("default value {default} is greater than max value {max}"),
                );
            }
            if let Some(ratio) = ratio {
                if *ratio < Quantity::count(1) {
                    push(
                        "maxLimitRequestRatio",
                        ratio,
                        format!("ratio {ratio} is less than 1"),
                    );
                }
                if let (Some(min), Some(max)) = (min, max) {
                    let limit = ratio_limit(*ratio, *min, *max);
                    if limit.0 > limit.1 {
                        push(
                            "maxLimitRequestRatio",
                            ratio,
                            format!("ratio {ratio} is greater than max/min = {:.6}", limit.1),
                        );
                    }
                }
            }
            if !pod_spec::overcommit_allowed(key)
                && let (Some(default), Some(request)) = (default, request)
                && default != request
            {
                push(
                    "defaultRequest",
                    request,
                    format!(
                        "default value {default} must equal to defaultRequest value {request} in {key}"
                    ),
                );
            }
        }
    }
}

/// `validateLimitRangeTypeName`.
fn type_name(kind: &str, at: &str, causes: &mut Vec<Cause>) {
    if let Err(message) = validate_qualified_name(kind) {
        causes.push(invalid(at, &go_quote(kind), &message));
    } else if !kind.contains('/') && !matches!(kind, "Pod" | "Container" | "PersistentVolumeClaim")
    {
        causes.push(invalid(
            at,
            &go_quote(kind),
            "must be a standard limit type or fully qualified",
        ));
    }
}

/// Go's `Quantity.Value()` (rounded up to a whole number) and `MilliValue()`.
fn value(q: Quantity) -> i128 {
    q.nanos().div_euclid(NANOS) + i128::from(q.nanos().rem_euclid(NANOS) != 0)
}

fn milli_value(q: Quantity) -> i128 {
    let per_milli = NANOS / 1000;
    q.nanos().div_euclid(per_milli) + i128::from(q.nanos().rem_euclid(per_milli) != 0)
}

/// kube's ratio check: the ratio and `max / min` as floats (in thousandths when all three fit).
fn ratio_limit(ratio: Quantity, min: Quantity, max: Quantity) -> (f64, f64) {
    let (mut ratio_value, mut min_value, mut max_value) =
        (value(ratio) as f64, value(min), value(max));
    if value(ratio) < MAX_MILLI_VALUE && min_value < MAX_MILLI_VALUE && max_value < MAX_MILLI_VALUE
    {
        ratio_value = milli_value(ratio) as f64 / 1000.0;
        min_value = milli_value(min);
        max_value = milli_value(max);
    }
    (ratio_value, max_value as f64 / min_value as f64)
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use crate::resources::builtin_resources;

    fn message(limits: Value) -> Option<String> {
        let def = builtin_resources()
            .into_iter()
            .find(|d| d.group.is_empty() && d.plural == "limitranges")
            .unwrap();
        let mut object = json!({"metadata": {"name": "l"}, "spec": {"limits": limits}});
        crate::defaults::apply_defaults(&def, &mut object);
        crate::kinds::validate(&def, &object, None)
            .err()
            .map(|e| e.message)
    }

    #[test]
    fn limit_ranges() {
        let good = json!([{"type": "Container", "min": {"cpu": "100m"}, "max": {"cpu": "2"},
            "default": {"cpu": "1"}, "defaultRequest": {"cpu": "500m"}},
            {"type": "PersistentVolumeClaim", "max": {"storage": "10Gi"}}]);
        assert_eq!(message(good), None);
        assert_eq!(
            message(json!([{"type": "Container", "min": {"cpu": "2"}, "max": {"cpu": "1"}}]))
                .unwrap(),
            "LimitRange \"l\" is invalid: [spec.limits[0].min[cpu]: Invalid value: 2: min value 2 is greater than max value 1, spec.limits[0].defaultRequest[cpu]: Invalid value: 1: min value 2 is greater than default request value 1, spec.limits[0].default[cpu]: Invalid value: 2: min value 2 is greater than default value 1]"
        );
        assert_eq!(
            message(
                json!([{"type": "Pod", "default": {"cpu": "1"}, "max": {"memory": "1Gi"},
                "min": {"memory": "1Gi"}, "maxLimitRequestRatio": {"memory": "2"}},
                {"type": "Pod"}, {"type": "Volume"}, {"type": "PersistentVolumeClaim"}])
            )
            .unwrap(),
            "LimitRange \"l\" is invalid: [spec.limits[0].default: Forbidden: may not be specified when `type` is 'Pod', spec.limits[0].maxLimitRequestRatio[memory]: Invalid value: 2: ratio 2 is greater than max/min = 1.000000, spec.limits[1].type: Duplicate value: \"Pod\", spec.limits[2].type: Invalid value: \"Volume\": must be a standard limit type or fully qualified, spec.limits[3].limits: Required value: either minimum or maximum storage value is required, but neither was provided]"
        );
    }
}

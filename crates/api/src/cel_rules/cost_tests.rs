//! The estimates of the `cost` module, against the numbers cel-go's `checker.Cost` and kube's
//! size and library estimators give (worked out from their code, step by step, in the
//! comments).

use serde_json::{Value, json};

use super::*;

/// The estimate of `rule` on a node of `schema` (not a resource's root).
fn cost(rule: &str, schema: Value) -> Option<u64> {
    let Value::Object(s) = schema else {
        panic!("a schema is an object")
    };
    let compiled = crate::cel_rules::compile(rule).expect("the rule compiles");
    estimate(compiled.program.expression(), &s, false)
}

/// The estimate of `rule` on a resource's root of `schema`.
fn root_cost(rule: &str, schema: Value) -> Option<u64> {
    let Value::Object(s) = schema else {
        panic!("a schema is an object")
    };
    let compiled = crate::cel_rules::compile(rule).expect("the rule compiles");
    estimate(compiled.program.expression(), &s, true)
}

#[test]
fn the_conformance_rule_costs_what_cel_go_estimates() {
    // `self` ranges over as many strings as fit in 3 MiB: (3 MiB - 2) / (2 + 1) = 1,048,575.
    // Each step: `@not_strictly_false(__result__)` 2, `__result__ && (s == 'string constant')`
    // 1 + (1 + ceil(15 * 0.1)) = 4; so 6 per element, plus `self` and `__result__`, 1 each.
    let inner = json!({"type": "array", "items": {"type": "string"}});
    assert_eq!(
        cost("self.all(s, s == 'string constant')", inner.clone()),
        Some(6 * 1_048_575 + 2)
    );
    // The array itself may occur as many times as fit in a request: 3 MiB / (2 + 1).
    let Value::Object(inner) = inner else {
        unreachable!()
    };
    assert_eq!(unbounded_cardinality(&inner, false), Some(1_048_576));
}

#[test]
fn fields_scalars_and_presence() {
    let object = json!({"type": "object", "properties": {
        "replicas": {"type": "integer"}, "a": {"type": "string", "maxLength": 5}}});
    // `self` 1, `.replicas` 1 (a field of an object); an int's size is 0, so `==` costs 0.
    assert_eq!(cost("self.replicas == 3", object.clone()), Some(2));
    // `has()` costs nothing in kube (PresenceTestHasCost(false)) but its operand, 1; the
    // right side: `self.a` 2, `size()` 1, `>` 1: 4; `&&` at most both sides.
    assert_eq!(
        cost("has(self.a) && self.a.size() > 2", object),
        Some(1 + 4)
    );
}

#[test]
fn regexes_and_substrings_scale_with_max_length() {
    // (3 MiB - 2 + 1) * 0.1 rounded up, times 8 * 0.25, plus `self`.
    let unbounded = json!({"type": "string"});
    assert_eq!(
        cost("self.matches('^[a-z]+$')", unbounded),
        Some(314_573 * 2 + 1)
    );
    let bounded = json!({"type": "string", "maxLength": 63});
    // maxLength counts 4 bytes per character: (252 + 1) * 0.1 -> 26.
    assert_eq!(cost("self.matches('^[a-z]+$')", bounded), Some(26 * 2 + 1));
    // An enum's string is at most its longest value long: 5 * 0.1 -> 1 for `startsWith`.
    let enumerated = json!({"type": "string", "enum": ["Never", "Once"]});
    assert_eq!(cost("'Ne'.contains(self)", enumerated), Some(1 + 1));
}

#[test]
fn a_resource_root_has_kind_and_a_capped_name() {
    // `metadata.name` is at most 253 characters (1012 bytes): 1012 * 0.1 -> 102; `kind` is
    // unbounded: (3 MiB - 2) * 0.1 -> 314,573; `contains` costs their product, plus its
    // operands (3 and 2).
    let root = json!({"type": "object", "properties": {"spec": {"type": "object"}}});
    assert_eq!(
        root_cost("self.metadata.name.contains(self.kind)", root),
        Some(102 * 314_573 + 3 + 2)
    );
}

#[test]
fn maps_range_over_their_keys() {
    // (3 MiB - 2) / (1 + 6) = 449,389 entries; each step: 2 for the condition, `&&` 1 +
    // (`self[k]` 3, `>` 1) = 5.
    let map = json!({"type": "object", "additionalProperties": {"type": "integer"}});
    assert_eq!(cost("self.all(k, self[k] > 0)", map), Some(449_389 * 7 + 2));
}

#[test]
fn the_minimal_size_counts_required_fields() {
    // {"name":""}: 2 + len("name") + 2 + 4 = 12 bytes, so 3 MiB / 13 of them.
    let object = json!({"type": "object", "required": ["name"],
        "properties": {"name": {"type": "string"}, "other": {"type": "string"}}});
    let Value::Object(object) = object else {
        unreachable!()
    };
    assert_eq!(
        unbounded_cardinality(&object, false),
        Some(3 * 1024 * 1024 / 13)
    );
}

#[test]
fn what_it_does_not_follow_is_not_estimated() {
    let string = json!({"type": "string"});
    assert_eq!(cost("self.find('a') == 'a'", string.clone()), None);
    assert_eq!(cost("isIP(self)", string.clone()), None);
    assert_eq!(
        cost(
            "self.all(x, y, x == y)",
            json!({"type": "array", "items": {"type": "string"}})
        ),
        None
    );
    let dynamic = json!({"x-kubernetes-int-or-string": true});
    // `<` on a `dyn` has several overloads (strings cost more): not estimated.
    assert_eq!(cost("self < 3", dynamic.clone()), None);
    // `==` has one cost whatever the types: estimated.
    assert_eq!(cost("self == 3", dynamic), Some(1 + 1));
}

#[test]
fn factors_print_as_kube_prints_them() {
    let message = |cost| exceeds("estimated rule cost", cost, RULE_COST_LIMIT);
    let tail = " (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)";
    assert_eq!(
        message(12_004_000),
        format!("estimated rule cost exceeds budget by factor of 1.200400x{tail}")
    );
    assert_eq!(
        message(15_000_000),
        format!("estimated rule cost exceeds budget by factor of 1.5x{tail}")
    );
    assert_eq!(
        message(1_000_000_000),
        format!("estimated rule cost exceeds budget by factor of 100.0x{tail}")
    );
    assert_eq!(
        message(1_000_000_001),
        format!("estimated rule cost exceeds budget by factor of more than 100x{tail}")
    );
    assert_eq!(times(u64::MAX / 2, 3), u64::MAX);
}

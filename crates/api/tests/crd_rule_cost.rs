//! A CRD whose `x-kubernetes-validations` rule kube-apiserver estimates too costly is refused
//! as kube refuses it: `Forbidden: estimated rule cost exceeds budget by factor of ...` at the
//! rule, and, when all the schema's rules together exceed kube's total, at each of the (up to
//! 4) costliest rules and at the schema; the same rule under small enough `maxItems` and
//! `maxLength` is accepted. The first case is the conformance test's ([sig-api-machinery]
//! CustomResourceValidationRules MUST fail create of a custom resource definition that
//! contains an x-kubernetes-validations rule that exceeds the estimated cost limit).

use serde_json::{Value, json};
use watchkeeper_api::crd::validation_causes;

const AT: &str = "spec.versions[0].schema.openAPIV3Schema";
const TAIL: &str = " (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)";

fn crd(schema: Value) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "scope": "Namespaced",
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": schema}}]
        }
    })
}

/// A schema whose `spec.x` is an array (of at most `outer` items) of arrays (of at most
/// `inner`) of strings, the inner arrays with `rules`.
fn nested(outer: Option<u64>, inner: Option<u64>, max_length: Option<u64>, rules: Value) -> Value {
    let mut strings = json!({"type": "string"});
    if let Some(n) = max_length {
        strings["maxLength"] = json!(n);
    }
    let mut items = json!({"type": "array", "items": strings, "x-kubernetes-validations": rules});
    if let Some(n) = inner {
        items["maxItems"] = json!(n);
    }
    let mut x = json!({"type": "array", "items": items});
    if let Some(n) = outer {
        x["maxItems"] = json!(n);
    }
    json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"x": x}}}})
}

fn causes(crd: &Value, old: Option<&Value>) -> Vec<String> {
    validation_causes(crd, old)
        .into_iter()
        .map(|(path, detail, _)| format!("{path}: {detail}"))
        .collect()
}

const RULE_AT: &str = "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[x].items.x-kubernetes-validations";

fn conformance() -> Value {
    crd(nested(
        None,
        None,
        None,
        json!([{"rule": "self.all(s, s == 'string constant')"}]),
    ))
}

#[test]
fn the_conformance_crd_is_refused_as_kube_refuses_it() {
    // 6,291,452 per run, run 1,048,576 times: far above both limits.
    let crd = conformance();
    assert_eq!(
        causes(&crd, None),
        [
            format!(
                "{RULE_AT}[0].rule: Forbidden: estimated rule cost exceeds budget by factor of more than 100x{TAIL}"
            ),
            format!(
                "{RULE_AT}[0].rule: Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema"
            ),
            format!(
                "{AT}: Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget by factor of more than 100x{TAIL}"
            ),
        ]
    );
    assert!(
        causes(&crd, None)
            .iter()
            .any(|c| c.contains("exceeds budget"))
    );
}

#[test]
fn bounded_sizes_make_the_same_rule_acceptable() {
    let rule = json!([{"rule": "self.all(s, s == 'string constant')"}]);
    // 10 strings of 10 characters, in at most 10 arrays: (6 * 10 + 2) * 10.
    assert_eq!(
        causes(
            &crd(nested(Some(10), Some(10), Some(10), rule.clone())),
            None
        ),
        Vec::<String>::new()
    );
    // Bounding the inner arrays alone is not enough: the outer one is unbounded, so they may
    // be as many as fit in 3 MiB (1,048,576): 62 * 1,048,576 = 65,011,712.
    assert_eq!(
        causes(&crd(nested(None, Some(10), None, rule.clone())), None),
        [format!(
            "{RULE_AT}[0].rule: Forbidden: estimated rule cost exceeds budget by factor of 6.5x{TAIL}"
        )]
    );
    // A regex over unbounded strings of unbounded arrays, then bounded.
    let regex = |max_items: Option<u64>, max_length: Option<u64>| {
        let mut strings = json!({"type": "string", "x-kubernetes-validations": [{"rule": "self.matches('^[a-z]+$')"}]});
        if let Some(n) = max_length {
            strings["maxLength"] = json!(n);
        }
        let mut names = json!({"type": "array", "items": strings});
        if let Some(n) = max_items {
            names["maxItems"] = json!(n);
        }
        crd(
            json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"names": names}}}}),
        )
    };
    let at =
        format!("{AT}.properties[spec].properties[names].items.x-kubernetes-validations[0].rule");
    // 629,147 per string, as many strings as fit in 3 MiB: 1,048,576.
    assert_eq!(
        causes(&regex(None, None), None)[0],
        format!(
            "{at}: Forbidden: estimated rule cost exceeds budget by factor of more than 100x{TAIL}"
        )
    );
    // 16 strings: 629,147 * 16 = 10,066,352.
    assert_eq!(
        causes(&regex(Some(16), None), None),
        [format!(
            "{at}: Forbidden: estimated rule cost exceeds budget by factor of 1.006635x{TAIL}"
        )]
    );
    assert_eq!(causes(&regex(Some(15), None), None), Vec::<String>::new());
    // 63 characters (252 bytes): 53 per string, still 1,048,576 strings: 55,574,528.
    assert_eq!(
        causes(&regex(None, Some(63)), None),
        [format!(
            "{at}: Forbidden: estimated rule cost exceeds budget by factor of 5.6x{TAIL}"
        )]
    );
    assert_eq!(
        causes(&regex(Some(16), Some(63)), None),
        Vec::<String>::new()
    );
}

#[test]
fn factors_are_printed_as_kube_prints_them() {
    let rule = json!([{"rule": "self.all(s, s == 'string constant')"}]);
    // (6 * 333 + 2) = 2,000 per run.
    for (runs, factor) in [
        (6_002, "1.200400x"),
        (7_500, "1.5x"),
        (12_345, "2.5x"),
        (500_000, "100.0x"),
        (500_001, "more than 100x"),
    ] {
        let found = causes(
            &crd(nested(Some(runs), Some(333), None, rule.clone())),
            None,
        );
        assert_eq!(
            found[0],
            format!(
                "{RULE_AT}[0].rule: Forbidden: estimated rule cost exceeds budget by factor of {factor}{TAIL}"
            ),
            "{runs} runs"
        );
    }
    // Exactly the limit (5,000 * 2,000) is accepted.
    let found = causes(&crd(nested(Some(5_000), Some(333), None, rule)), None);
    assert_eq!(found, Vec::<String>::new());
}

#[test]
fn the_schema_total_is_refused_with_its_costliest_rules() {
    // 12 rules of (2,000 + 1 for `|| i == 0`) * 4,500 = 9,004,500 each: each under its limit,
    // 108,054,000 together.
    let rules: Vec<Value> = (0..12)
        .map(|i| json!({"rule": format!("self.all(s, s == 'string constant') || {i} == 0")}))
        .collect();
    let found = causes(
        &crd(nested(Some(4_500), Some(333), None, Value::Array(rules))),
        None,
    );
    let mut expected: Vec<String> = (0..4)
        .map(|i| format!("{RULE_AT}[{i}].rule: Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema"))
        .collect();
    expected.push(format!("{AT}: Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget by factor of 1.080540x{TAIL}"));
    assert_eq!(found, expected);
}

#[test]
fn an_update_keeping_the_schema_is_not_refused_for_a_rule_alone() {
    // kube's suppressPerExpressionCost: the stored CRD has the rule; an update that leaves the
    // version's schema as it is is refused only for the total.
    let crd = conformance();
    let found = causes(&crd, Some(&crd));
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(
        found
            .iter()
            .all(|c| !c.contains("estimated rule cost exceeds"))
    );
    // One rule at 12,004,000 and nothing else: the update passes, the create does not.
    let single = crd_with(6_000);
    assert_eq!(causes(&single, None).len(), 1);
    assert_eq!(causes(&single, Some(&single)), Vec::<String>::new());
    // A changed schema is checked again.
    assert_eq!(causes(&crd_with(6_001), Some(&single)).len(), 1);
}

fn crd_with(runs: u64) -> Value {
    crd(nested(
        Some(runs),
        Some(333),
        None,
        json!([{"rule": "self.all(s, s == 'string constant')"}]),
    ))
}

#[test]
fn a_message_built_with_string_of_a_number_is_refused_as_kube_refuses_it() {
    // cel-go gives `string()`'s result no size, so `'a: ' + string(self.a)` is estimated
    // without bound: kube refuses it (its `validation_test.go` refuses `string(self[0]) +
    // string(self[1]) + string(self[2])` for the schema's total too, which only an unbounded
    // size can reach; `TestCelEstimatedCostStability` has `string(self.val1) == self.val6`
    // cost the unbounded string's whole length). A message built without `string()` passes.
    let schema = |message: &str| {
        json!({"type": "object", "properties": {"spec": {"type": "object",
        "properties": {"a": {"type": "integer"}},
        "x-kubernetes-validations": [{"rule": "self.a > 1", "messageExpression": message}]}}})
    };
    let at = format!("{AT}.properties[spec].x-kubernetes-validations[0].messageExpression");
    assert_eq!(
        causes(&crd(schema("'a: ' + string(self.a)")), None),
        [
            format!(
                "{at}: Forbidden: estimated messageExpression cost exceeds budget by factor of more than 100x{TAIL}"
            ),
            format!(
                "{at}: Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema"
            ),
            format!(
                "{AT}: Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget by factor of more than 100x{TAIL}"
            ),
        ]
    );
    assert_eq!(
        causes(&crd(schema("self.a > 9 ? 'a: big' : 'a: small'")), None),
        Vec::<String>::new()
    );
}

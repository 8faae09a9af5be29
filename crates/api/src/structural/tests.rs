use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;

fn widget() -> ResourceDef {
    crate::parse_resources_file(
        "[[resource]]\ngroup = \"example.com\"\nversion = \"v1\"\nkind = \"Widget\"\nplural = \"widgets\"\nnamespaced = true\n",
    )
    .unwrap()
    .remove(0)
}

/// A root schema whose `spec` is `spec`.
fn with_spec(spec: Value) -> Value {
    json!({"type": "object", "properties": {"spec": spec}})
}

fn object(spec: Value) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": spec})
}

/// The `field: message` of each cause of checking `spec` (against the old `spec`, if any).
fn failures(schema: &Value, spec: Value, old: Option<Value>) -> Vec<String> {
    let old = old.map(object);
    match check_custom(
        &widget(),
        schema,
        RuleTree::of(schema).as_ref(),
        &object(spec),
        old.as_ref(),
    ) {
        Ok(()) => Vec::new(),
        Err(error) => {
            assert_eq!(error.code, 422);
            error.cause_lines()
        }
    }
}

fn reasons(schema: &Value, spec: Value) -> Vec<String> {
    let error = check_custom(
        &widget(),
        schema,
        RuleTree::of(schema).as_ref(),
        &object(spec),
        None,
    )
    .unwrap_err();
    error.details.as_ref().unwrap()["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["reason"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn types_enums_and_required_fields() {
    let schema = with_spec(
        json!({"type": "object", "required": ["size"], "properties": {
            "replicas": {"type": "integer"},
            "ratio": {"type": "number"},
            "mode": {"type": "string", "enum": ["a", "b"]},
            "level": {"type": "integer", "enum": [1, 2]},
            "port": {"x-kubernetes-int-or-string": true},
            "tags": {"type": "array", "items": {"type": "string"}},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "size": {"type": "string"},
            "note": {"type": "string", "nullable": true}
        }}),
    );
    let ok = json!({"size": "s", "replicas": 2.0, "ratio": 1, "mode": "a", "level": 2.0,
        "port": "http", "tags": ["x"], "labels": {"k": "v"}, "note": null, "other": 1});
    assert_eq!(failures(&schema, ok, None), Vec::<String>::new());
    let bad = json!({"replicas": "two", "ratio": 1.5, "mode": "c", "level": 3, "port": true,
        "tags": [1], "labels": {"k": 2}, "size": null});
    assert_eq!(
        failures(&schema, bad, None),
        [
            "spec.labels.k: Invalid value: \"integer\": spec.labels.k in body must be of type string: \"integer\"",
            "spec.level: Unsupported value: 3: supported values: \"1\", \"2\"",
            "spec.mode: Unsupported value: \"c\": supported values: \"a\", \"b\"",
            "spec.port: Invalid value: \"boolean\": spec.port in body must be of type integer,string: \"boolean\"",
            "spec.replicas: Invalid value: \"string\": spec.replicas in body must be of type integer: \"string\"",
            "spec.size: Invalid value: \"null\": spec.size in body must be of type string: \"null\"",
            "spec.tags[0]: Invalid value: \"integer\": spec.tags[0] in body must be of type string: \"integer\"",
        ]
    );
    assert_eq!(
        failures(&schema, json!({"replicas": 1.5}), None),
        [
            "spec.replicas: Invalid value: \"number\": spec.replicas in body must be of type integer: \"number\"",
            "spec.size: Required value",
        ]
    );
    let error = check_custom(
        &widget(),
        &schema,
        RuleTree::of(&schema).as_ref(),
        &object(json!({})),
        None,
    )
    .unwrap_err();
    assert_eq!(
        error.message,
        "Widget.example.com \"w\" is invalid: spec.size: Required value"
    );
    assert_eq!(
        failures(
            &with_spec(json!({"x-kubernetes-int-or-string": true})),
            Value::Null,
            None
        ),
        ["spec: Invalid value: \"null\": spec in body must be of type integer,string: \"null\""]
    );
}

#[test]
fn strings_lengths_patterns_and_formats() {
    let schema = with_spec(json!({"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 5, "minLength": 2, "pattern": "^[a-zé]+$"},
        "digits": {"type": "string", "pattern": "^\\d+$"},
        "word": {"type": "string", "pattern": "^\\w+\\s\\w+$"},
        "broken": {"type": "string", "pattern": "[a"},
        "one": {"type": "string", "maxLength": 1},
        "port": {"x-kubernetes-int-or-string": true, "pattern": "^[a-z]+$", "maximum": 10}
    }}));
    // Lengths are counted in characters: "héllo" is 5 of them (6 bytes).
    let ok =
        json!({"name": "héllo", "digits": "0123", "word": "ab cd", "port": "http", "one": "é"});
    assert_eq!(failures(&schema, ok, None), Vec::<String>::new());
    assert_eq!(
        failures(
            &schema,
            json!({"name": "toolong", "digits": "١٢٣", "word": "ab\u{a0}cd", "one": "ab", "port": 11}),
            None
        ),
        [
            "spec.digits: Invalid value: \"١٢٣\": spec.digits in body should match '^\\d+$'",
            "spec.name: Too long: may not be more than 5 bytes",
            "spec.one: Too long: may not be more than 1 bytes",
            "spec.port: Invalid value: 11: spec.port in body should be less than or equal to 10",
            "spec.word: Invalid value: \"ab\\u00a0cd\": spec.word in body should match '^\\w+\\s\\w+$'",
        ]
    );
    // The first failing of maxLength, minLength, pattern only.
    assert_eq!(
        failures(&schema, json!({"name": "A"}), None),
        ["spec.name: Invalid value: \"A\": spec.name in body should be at least 2 chars long"]
    );
    assert_eq!(
        failures(&schema, json!({"name": "AB", "port": "X"}), None),
        [
            "spec.name: Invalid value: \"AB\": spec.name in body should match '^[a-zé]+$'",
            "spec.port: Invalid value: \"X\": spec.port in body should match '^[a-z]+$'",
        ]
    );
    let broken = failures(&schema, json!({"broken": "a"}), None);
    assert_eq!(broken.len(), 1);
    assert!(
        broken[0].starts_with(
            "spec.broken: Invalid value: \"a\": spec.broken in body should match '[a, but pattern is invalid: error parsing regexp: "
        ),
        "{broken:?}"
    );
    assert_eq!(
        reasons(&schema, json!({"name": "toolong", "digits": "x"})),
        ["FieldValueInvalid", "FieldValueTooLong"]
    );
}

#[test]
fn formats_kube_checks_and_formats_it_ignores() {
    let schema = with_spec(json!({"type": "object", "properties": {
        "when": {"type": "string", "format": "date-time"},
        "id": {"type": "string", "format": "uuid"},
        "size": {"type": "string", "format": "int32"},
        "custom": {"type": "string", "format": "my-own-format"}
    }}));
    let ok = json!({"when": "2026-12-04T12:00:00Z", "id": "123e4567-e89b-12d3-a456-426614174000",
        "size": "not a number", "custom": "anything"});
    assert_eq!(failures(&schema, ok, None), Vec::<String>::new());
    assert_eq!(
        failures(&schema, json!({"when": "yesterday", "id": "x"}), None),
        [
            "spec.id: Invalid value: \"x\": spec.id in body must be of type uuid: \"x\"",
            "spec.when: Invalid value: \"yesterday\": spec.when in body must be of type date-time: \"yesterday\"",
        ]
    );
    assert_eq!(
        reasons(&schema, json!({"id": "x"})),
        ["FieldValueTypeInvalid"]
    );
}

#[test]
fn numbers_bounds_and_multiples() {
    let schema = with_spec(json!({"type": "object", "properties": {
        "even": {"type": "integer", "multipleOf": 2},
        "tenth": {"type": "number", "multipleOf": 0.1},
        "positive": {"type": "integer", "minimum": 0, "exclusiveMinimum": true},
        "small": {"type": "number", "maximum": 10, "exclusiveMaximum": true},
        "big": {"type": "number", "maximum": 1000000},
        "bounded": {"type": "integer", "minimum": 1, "maximum": 10}
    }}));
    let ok =
        json!({"even": 4, "tenth": 0.3, "positive": 1, "small": 9.99, "big": 1e6, "bounded": 10});
    assert_eq!(failures(&schema, ok, None), Vec::<String>::new());
    let bad =
        json!({"even": 3, "tenth": 0.35, "positive": 0, "small": 10, "big": 1.5e6, "bounded": 11});
    assert_eq!(
        failures(&schema, bad, None),
        [
            "spec.big: Invalid value: 1.5e+06: spec.big in body should be less than or equal to 1e+06",
            "spec.bounded: Invalid value: 11: spec.bounded in body should be less than or equal to 10",
            "spec.even: Invalid value: 3: spec.even in body should be a multiple of 2",
            "spec.positive: Invalid value: 0: spec.positive in body should be greater than 0",
            "spec.small: Invalid value: 10: spec.small in body should be less than 10",
            "spec.tenth: Invalid value: 0.35: spec.tenth in body should be a multiple of 0.1",
        ]
    );
    let error = check_custom(
        &widget(),
        &schema,
        RuleTree::of(&schema).as_ref(),
        &object(json!({"bounded": 11})),
        None,
    )
    .unwrap_err();
    assert_eq!(
        error.message,
        "Widget.example.com \"w\" is invalid: spec.bounded: Invalid value: 11: spec.bounded in body should be less than or equal to 10"
    );
}

#[test]
fn arrays_and_objects_counts() {
    let schema = with_spec(json!({"type": "object", "properties": {
        "tags": {"type": "array", "minItems": 2, "maxItems": 3, "items": {"type": "string"}},
        "labels": {"type": "object", "minProperties": 1, "maxProperties": 2,
            "additionalProperties": {"type": "string"}}
    }}));
    assert_eq!(
        failures(
            &schema,
            json!({"tags": ["a", "b"], "labels": {"a": "b"}}),
            None
        ),
        Vec::<String>::new()
    );
    assert_eq!(
        failures(&schema, json!({"tags": ["a"], "labels": {}}), None),
        [
            "spec.labels: Invalid value: 0: spec.labels in body should have at least 1 properties",
            "spec.tags: Invalid value: 1: spec.tags in body should have at least 2 items",
        ]
    );
    assert_eq!(
        failures(
            &schema,
            json!({"tags": ["a", "b", "c", "d"], "labels": {"a": "1", "b": "2", "c": "3"}}),
            None
        ),
        [
            "spec.labels: Too many: 3: must have at most 2 items",
            "spec.tags: Too many: 4: must have at most 3 items",
        ]
    );
    assert_eq!(
        reasons(&schema, json!({"tags": ["a", "b", "c", "d"]})),
        ["FieldValueTooMany"]
    );
}

#[test]
fn list_types_sets_and_maps() {
    let schema = with_spec(json!({"type": "object", "properties": {
        "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
        "numbers": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "integer"}},
        "ports": {"type": "array", "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name"],
            "items": {"type": "object", "properties": {"name": {"type": "string"}, "port": {"type": "integer"}}}},
        "routes": {"type": "array", "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["host", "port"],
            "items": {"type": "object", "properties": {"host": {"type": "string"}, "port": {"type": "integer"}}}},
        "byZone": {"type": "object", "additionalProperties": {"type": "array",
            "x-kubernetes-list-type": "set", "items": {"type": "string"}}}
    }}));
    let ok = json!({"tags": ["a", "b"], "numbers": [1, 2],
        "ports": [{"name": "http", "port": 80}, {"name": "https", "port": 80}],
        "routes": [{"host": "a", "port": 1}, {"host": "a", "port": 2}, {"host": "b", "port": 1}],
        "byZone": {"z": ["a", "b"]}});
    assert_eq!(failures(&schema, ok, None), Vec::<String>::new());
    let bad = json!({"tags": ["a", "b", "a", "a", "b"], "numbers": [1, 1],
        "ports": [{"name": "http", "port": 80}, {"name": "http", "port": 81}, {"port": 1}, {"port": 2}],
        "routes": [{"host": "a", "port": 1}, {"port": 1, "host": "a"}],
        "byZone": {"z": ["a", "a"]}});
    assert_eq!(
        failures(&schema, bad, None),
        [
            "spec.byZone[z][1]: Duplicate value: \"a\"",
            "spec.numbers[1]: Duplicate value: 1",
            "spec.ports[1]: Duplicate value: map[string]interface {}{\"name\":\"http\"}",
            "spec.ports[3]: Duplicate value: map[string]interface {}{}",
            "spec.routes[1]: Duplicate value: map[string]interface {}{\"host\":\"a\", \"port\":1}",
            "spec.tags[2]: Duplicate value: \"a\"",
            "spec.tags[4]: Duplicate value: \"b\"",
        ]
    );
    assert_eq!(
        reasons(&schema, json!({"tags": ["a", "a"]})),
        ["FieldValueDuplicate"]
    );
    assert_eq!(
        failures(&schema, json!({"ports": [{"name": "a"}, "b"]}), None),
        [
            "spec.ports[1]: Invalid value: \"string\": spec.ports[1] in body must be of type object: \"string\"",
            "spec.ports[1]: Invalid value: \"b\": must be an object for an array of list-type map",
        ]
    );
}

#[test]
fn any_one_all_of_and_not() {
    let schema = with_spec(json!({"type": "object", "properties": {
        "any": {"type": "integer", "anyOf": [{"minimum": 10}, {"maximum": 0}]},
        "one": {"type": "integer", "oneOf": [{"minimum": 5}, {"maximum": 10}]},
        "all": {"type": "string", "allOf": [{"minLength": 2}, {"maxLength": 3}]},
        "not": {"type": "string", "not": {"enum": ["forbidden"]}}
    }}));
    assert_eq!(
        failures(
            &schema,
            json!({"any": 11, "one": 11, "all": "abc", "not": "ok"}),
            None
        ),
        Vec::<String>::new()
    );
    assert_eq!(
        failures(
            &schema,
            json!({"any": 5, "one": 7, "all": "a", "not": "forbidden"}),
            None
        ),
        [
            "spec.all: Invalid value: \"a\": spec.all in body should be at least 2 chars long",
            "<nil>: Invalid value: \"\": \"spec.all\" must validate all the schemas (allOf)",
            "<nil>: Invalid value: \"\": \"spec.any\" must validate at least one schema (anyOf)",
            "spec.any: Invalid value: 5: spec.any in body should be greater than or equal to 10",
            "<nil>: Invalid value: \"\": \"spec.not\" must not validate the schema (not)",
            "<nil>: Invalid value: \"\": \"spec.one\" must validate one and only one schema (oneOf). Found 2 valid alternatives",
        ]
    );
}

/// Where no `oneOf` branch holds, the failures reported are those of the branch go-openapi's
/// `MatchCount` keeps: the one whose checks went deepest (here the IP address branch, whose
/// `value` has an `anyOf` of formats), not the one with the fewest failures (the `not`
/// branch). Gateway API's own CEL test expects `must be of type ipv4` for this address.
#[test]
fn one_of_reports_the_branch_go_openapi_keeps() {
    let schema = with_spec(json!({"type": "object", "properties": {"address": {
        "type": "object",
        "oneOf": [
            {"properties": {"type": {"enum": ["IPAddress"]},
                "value": {"anyOf": [{"format": "ipv4"}, {"format": "ipv6"}]}}},
            {"properties": {"type": {"not": {"enum": ["IPAddress"]}}}}
        ],
        "properties": {"type": {"type": "string"}, "value": {"type": "string"}}
    }}}));
    assert_eq!(
        failures(
            &schema,
            json!({"address": {"type": "IPAddress", "value": "1.2.3.4:8080"}}),
            None
        ),
        [
            "<nil>: Invalid value: \"\": \"spec.address\" must validate one and only one schema (oneOf). Found none valid",
            "<nil>: Invalid value: \"\": \"spec.address.value\" must validate at least one schema (anyOf)",
            "spec.address.value: Invalid value: \"1.2.3.4:8080\": spec.address.value in body must be of type ipv4: \"1.2.3.4:8080\"",
        ]
    );
    // Branches of equal count: the first one's failures.
    let schema = with_spec(json!({"type": "object", "properties": {"n": {
        "type": "integer", "anyOf": [{"minimum": 10}, {"maximum": 0}]
    }}}));
    assert_eq!(
        failures(&schema, json!({"n": 5}), None),
        [
            "<nil>: Invalid value: \"\": \"spec.n\" must validate at least one schema (anyOf)",
            "spec.n: Invalid value: 5: spec.n in body should be greater than or equal to 10",
        ]
    );
}

#[test]
fn metadata_name_is_checked_and_never_required() {
    let schema = json!({"type": "object", "required": ["metadata", "spec"], "properties": {
        "metadata": {"type": "object", "properties": {
            "name": {"type": "string", "maxLength": 3},
            "labels": {"type": "integer"}
        }},
        "spec": {"type": "object"}
    }});
    let named = |name: &str| json!({"metadata": {"name": name, "labels": {"a": "b"}}, "spec": {}});
    assert_eq!(
        check_custom(
            &widget(),
            &schema,
            RuleTree::of(&schema).as_ref(),
            &named("abc"),
            None
        ),
        Ok(())
    );
    let error = check_custom(
        &widget(),
        &schema,
        RuleTree::of(&schema).as_ref(),
        &named("abcd"),
        None,
    )
    .unwrap_err();
    assert_eq!(
        error.message,
        "Widget.example.com \"abcd\" is invalid: metadata.name: Too long: may not be more than 3 bytes"
    );
    let error = check_custom(
        &widget(),
        &schema,
        RuleTree::of(&schema).as_ref(),
        &json!({"metadata": {"name": "a"}}),
        None,
    )
    .unwrap_err();
    assert_eq!(
        error.message,
        "Widget.example.com \"a\" is invalid: spec: Required value"
    );
}

#[test]
fn ratcheting_keeps_unchanged_invalid_values() {
    let schema = with_spec(
        json!({"type": "object", "required": ["size"], "properties": {
            "name": {"type": "string", "maxLength": 3},
            "replicas": {"type": "integer"},
            "size": {"type": "string"},
            "ports": {"type": "array", "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "properties": {"name": {"type": "string"},
                    "port": {"type": "integer", "maximum": 65535}}}},
            "untyped": {"type": "array", "items": {"type": "integer", "maximum": 10}},
            "set": {"type": "array", "x-kubernetes-list-type": "set",
                "items": {"type": "integer", "maximum": 10}}
        }}),
    );
    let old = json!({"size": "s", "name": "toolong", "replicas": 1, "ports": [{"name": "a", "port": 99999}],
        "untyped": [11], "set": [11]});
    // Another field changes: the old invalid values stay.
    let new = json!({"size": "s", "name": "toolong", "replicas": 2, "ports": [{"name": "b", "port": 1},
        {"name": "a", "port": 99999}], "untyped": [11], "set": [1]});
    assert_eq!(
        failures(&schema, new.clone(), Some(old.clone())),
        Vec::<String>::new()
    );
    // Without the old object (a create), they are refused.
    assert_eq!(
        failures(&schema, new, None),
        [
            "spec.name: Too long: may not be more than 3 bytes",
            "spec.ports[1].port: Invalid value: 99999: spec.ports[1].port in body should be less than or equal to 65535",
            "spec.untyped[0]: Invalid value: 11: spec.untyped[0] in body should be less than or equal to 10",
        ]
    );
    // A changed invalid value is refused; a list without type correlates by index, a set not
    // at all.
    assert_eq!(
        failures(
            &schema,
            json!({"size": "s", "name": "toolong!", "ports": [{"name": "a", "port": 99998}], "untyped": [0, 11],
                "set": [11]}),
            Some(old)
        ),
        [
            "spec.name: Too long: may not be more than 3 bytes",
            "spec.ports[0].port: Invalid value: 99998: spec.ports[0].port in body should be less than or equal to 65535",
            "spec.set[0]: Invalid value: 11: spec.set[0] in body should be less than or equal to 10",
            "spec.untyped[1]: Invalid value: 11: spec.untyped[1] in body should be less than or equal to 10",
        ]
    );
}

#[test]
fn list_type_duplicates_are_ratcheted_as_a_whole() {
    let schema = with_spec(json!({"type": "object", "properties": {
        "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
        "other": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}}
    }}));
    let duplicated = json!({"tags": ["a", "a"]});
    assert_eq!(
        failures(
            &schema,
            json!({"tags": ["a", "a"], "other": ["b", "b"]}),
            Some(duplicated)
        ),
        Vec::<String>::new()
    );
    assert_eq!(
        failures(
            &schema,
            json!({"tags": ["a", "a"]}),
            Some(json!({"tags": ["a"]}))
        ),
        ["spec.tags[1]: Duplicate value: \"a\""]
    );
}

#[test]
fn go_regular_expressions() {
    for (go, rust) in [
        (r"^\d+$", "^[0-9]+$"),
        (r"\D\S\W", r"[^0-9][^\t\n\x0C\r ][^0-9A-Za-z_]"),
        (r"[\d\w-]", "[0-90-9A-Za-z_-]"),
        (r"\bx\B", r"(?-u:\b)x(?-u:\B)"),
        (r"[a[&~]", r"[a\[\&\~]"),
        (r"[[:alpha:]\]]", r"[[:alpha:]\]]"),
        (r"[]a]", "[]a]"),
        (r"[^]a]", "[^]a]"),
        (r"\\d", r"\\d"),
        (r"\.\p{L}", r"\.\p{L}"),
        ("trailing\\", "trailing\\"),
        (r"a{2}b{1,}c{1,3}", r"a{2}b{1,}c{1,3}"),
        (r"a{b{,2}c{", r"a\{b\{,2}c\{"),
        (r"[{]", r"[{]"),
        (r"x\Qa.b\Ey", r"xa\.by"),
        (r"\Q[*", r"\[\*"),
        (r"\x{41}\P{Greek}{2}", r"\x{41}\P{Greek}{2}"),
    ] {
        assert_eq!(go_syntax(go), rust, "{go}");
    }
    let regex =
        compile_pattern(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
            .unwrap();
    assert!(regex.is_match("a.b-c"));
    assert!(!regex.is_match("A"));
    assert!(compile_pattern(r"[a[]").unwrap().is_match("["));
    assert!(compile_pattern(r"^a{,2}$").unwrap().is_match("a{,2}"));
    assert!(compile_pattern(r"a{1000}").is_ok());
    assert_eq!(
        compile_pattern(r"a{2,1001}").unwrap_err(),
        "error parsing regexp: invalid repeat count: `{2,1001}`"
    );
    assert!(compile_pattern(r"\x{1001}[{1001}]").is_ok());
    assert!(compile_pattern(r"^\Qa.b\E$").unwrap().is_match("a.b"));
    assert!(!compile_pattern(r"^\Qa.b\E$").unwrap().is_match("axb"));
    assert!(compile_pattern(r"\s").unwrap().is_match("\u{0C}"));
    assert!(!compile_pattern(r"\s").unwrap().is_match("\u{0B}"));
    assert_eq!(
        compile_pattern("(").unwrap_err(),
        "error parsing regexp: unclosed group"
    );
    assert!(
        compile_pattern("(?:a{1000}){1000}")
            .unwrap_err()
            .contains("too large")
    );
}

#[test]
fn multiples_tolerate_float_rounding_as_go_openapi_does() {
    assert!(is_json_integer(3.000_000_000_000_000_4));
    assert!(!is_json_integer(3.5));
    assert!(!is_json_integer(-3.5));
    assert!(is_json_integer(-3.0));
    assert!(!is_json_integer(f64::NAN));
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        ".{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map("[a-z]{1,3}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    /// Goal: any value, against a schema using every keyword, old object or not, gets an
    /// answer (no panic), and an unchanged object always passes an update (ratcheting).
    #[test]
    fn any_value_gets_an_answer(spec in json_value(), old in json_value(), pattern in ".{0,8}") {
        let every = json!({"type": "object", "properties": {
            "s": {"type": "string", "maxLength": 3, "minLength": 1, "pattern": pattern, "format": "email"},
            "n": {"type": "number", "multipleOf": 0.5, "minimum": -1, "maximum": 1e300},
            "i": {"type": "integer", "multipleOf": 3, "exclusiveMinimum": true, "minimum": 0},
            "a": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["k"],
                "maxItems": 2, "items": {"type": "object", "properties": {"k": {"type": "string"}}}},
            "set": {"type": "array", "x-kubernetes-list-type": "set", "minItems": 1},
            "o": {"type": "object", "maxProperties": 1, "additionalProperties": {"type": "integer"}},
            "c": {"anyOf": [{"type": "string"}, {"type": "integer"}], "not": {"enum": [0]},
                "oneOf": [{"minimum": 1}, {"maximum": 5}], "allOf": [{"minLength": 1}]}
        }});
        let schema = with_spec(every);
        let _ = check_custom(&widget(), &schema, RuleTree::of(&schema).as_ref(), &object(spec.clone()), Some(&object(old)));
        // Ratcheting only ever drops failures: an update to the same object fails on no more
        // than its create does.
        let causes = |old: Option<&Value>| -> Vec<String> {
            check_custom(&widget(), &schema, RuleTree::of(&schema).as_ref(), &object(spec.clone()), old)
                .err()
                .map(|e| e.details.unwrap()["causes"].as_array().unwrap().iter()
                    .map(ToString::to_string).collect())
                .unwrap_or_default()
        };
        let created = causes(None);
        let updated = causes(Some(&object(spec.clone())));
        prop_assert!(updated.iter().all(|c| created.contains(c)), "{updated:?} not in {created:?}");
    }

    /// Goal: any pattern text compiles or is refused, never a panic.
    #[test]
    fn any_pattern_compiles_or_is_refused(pattern in ".{0,24}", text in ".{0,12}") {
        if let Ok(regex) = compile_pattern(&pattern) {
            let _ = regex.is_match(&text);
        }
    }
}

#[test]
fn embedded_resources_are_checked_and_block_the_rules() {
    let schema = with_spec(json!({"type": "object", "properties": {
        "template": {"type": "object", "x-kubernetes-embedded-resource": true,
            "x-kubernetes-preserve-unknown-fields": true}},
        "x-kubernetes-validations": [{"rule": "has(self.template)"}]}));
    assert_eq!(
        failures(&schema, json!({"template": {"apiVersion": "v1"}}), None),
        [
            "spec.template.kind: Required value",
            "<nil>: Invalid value: \"null\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
        ]
    );
    assert_eq!(
        failures(
            &schema,
            json!({"template": {"apiVersion": "v1", "kind": "Pod"}}),
            None
        ),
        Vec::<String>::new()
    );
}

#[test]
fn non_nullable_nulls_without_defaults_are_dropped_as_kube_drops_them() {
    let schema = with_spec(json!({"type": "object", "properties": {
        "csi": {"type": "object", "properties": {
            "cephfs": {"type": "object", "properties": {"opts": {"type": "string"}}},
            "mode": {"type": "string", "default": "auto"},
            "note": {"type": "string", "nullable": true}}},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "items": {"type": "array", "items": {"type": "object",
            "properties": {"a": {"type": "string"}}}}}}));
    let mut object = json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w"},
        "spec": {"csi": {"cephfs": null, "mode": null, "note": null},
            "labels": {"x": null, "y": "1"}, "items": [null, {"a": null}]}});
    let pruned = prune_and_default(&schema, &mut object);
    assert!(pruned.is_empty(), "{pruned:?}");
    assert_eq!(
        object["spec"],
        json!({"csi": {"mode": "auto", "note": null}, "labels": {"y": "1"},
            "items": [null, {}]})
    );
    // A list's null item stays, and is refused as kube refuses it; the rest passes.
    let refused = check_custom(&widget(), &schema, None, &object, None).unwrap_err();
    assert_eq!(
        refused.message,
        "Widget.example.com \"w\" is invalid: spec.items[0]: Invalid value: \"null\": spec.items[0] in body must be of type object: \"null\""
    );
}

/// A status subresource write is checked as kube's status strategy checks it: the status
/// against the status schema as a root of its own (messages relative to `status`, fields
/// under it, composite failures on `status`), the spec not at all; as Gateway API's CEL test
/// expects (`addresses[0].value in body must be of type ipv4`).
#[test]
fn status_writes_check_the_status_as_a_root_of_its_own() {
    let schema = json!({"type": "object", "properties": {
        "spec": {"type": "object", "properties": {"n": {"type": "integer", "maximum": 1}}},
        "status": {"type": "object", "required": ["phase"], "properties": {
            "phase": {"type": "string"},
            "addresses": {"type": "array", "items": {"type": "object", "properties": {
                "value": {"type": "string", "anyOf": [{"format": "ipv4"}, {"format": "ipv6"}]}
            }}}
        }}
    }});
    let mut written = object(json!({"n": 5}));
    written["status"] = json!({"addresses": [{"value": "1.2.3.4:8080"}]});
    let old = object(json!({"n": 5}));
    let error = check_custom_status(&widget(), &schema, None, &written, Some(&old)).unwrap_err();
    assert_eq!(
        error.cause_lines(),
        [
            "status: Invalid value: \"\": \"addresses[0].value\" must validate at least one schema (anyOf)",
            "status.addresses[0].value: Invalid value: \"1.2.3.4:8080\": addresses[0].value in body must be of type ipv4: \"1.2.3.4:8080\"",
            "status.phase: Required value",
        ]
    );
    // The same object written through the main resource names the full paths.
    let error = check_custom(&widget(), &schema, None, &written, Some(&old)).unwrap_err();
    assert!(error.cause_lines().iter().any(|line| line.starts_with(
        "status.addresses[0].value: Invalid value: \"1.2.3.4:8080\": status.addresses[0].value in body"
    )));
    // No status: nothing for the schema to check.
    assert!(
        check_custom_status(
            &widget(),
            &schema,
            None,
            &object(json!({"n": 5})),
            Some(&old)
        )
        .is_ok()
    );
}

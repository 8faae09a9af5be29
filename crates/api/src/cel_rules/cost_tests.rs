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
    // `type()` is not followed.
    assert_eq!(cost("type(self) == string", string), None);
    let dynamic = json!({"x-kubernetes-int-or-string": true});
    // `<` on a `dyn` has several overloads (strings cost more): not estimated.
    assert_eq!(cost("self < 3", dynamic.clone()), None);
    // `==` has one cost whatever the types: estimated.
    assert_eq!(cost("self == 3", dynamic), Some(1 + 1));
}

#[test]
fn two_variable_comprehensions_range_as_cel_go_ranges() {
    // An index is an int (size 1), an element a string of up to 3 MiB - 2: `x == y` costs
    // 1 + 2; `&&` at most 4 more than nothing, the condition 2: 6 for each of 1,048,575
    // elements, plus `self` and `@result`.
    let strings = json!({"type": "array", "items": {"type": "string"}});
    assert_eq!(
        cost("self.all(x, y, x == y)", strings.clone()),
        Some(6 * 1_048_575 + 2)
    );
    // The key a comprehension of the body rebinds does not hide the value: `v` is the
    // outer element (a string, `size()` 1 more), `k` the inner one (an int).
    assert_eq!(
        cost("self.all(k, v, [1].all(k, v.size() > k))", strings),
        cost(
            "self.all(k, v, [1].all(j, v.size() > j))",
            json!({"type": "array", "items": {"type": "string"}})
        )
    );
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

/// The estimate (min, max) of `expr` as kube's `library/cost_test.go` gets it (`testCost`):
/// no variables, and every string or bytes value without a size of its own at most 12 long
/// (its `testCostEstimator`).
fn kube_test_cost(expr: &str) -> Option<(u64, u64)> {
    let compiled = crate::cel_rules::compile(expr).expect("the expression compiles");
    Coster::new(None, Some(12))
        .cost(compiled.program.expression())
        .map(|c| (c.min, c.max))
}

/// Each `(expression, min, max)` is estimated as kube's test expects.
fn assert_kube_costs(cases: &[(&str, u64, u64)]) {
    let mut wrong = Vec::new();
    for &(expr, min, max) in cases {
        let got = kube_test_cost(expr);
        if got != Some((min, max)) {
            wrong.push(format!("{expr}: want {min}..{max}, got {got:?}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

const INTS: &str = "[1, 2, 3, 4, 5]";
const UINTS: &str = "[uint(1), uint(2), uint(3), uint(4), uint(5)]";
const DOUBLES: &str = "[1.0, 2.0, 3.0, 4.0, 5.0]";
const BOOLS: &str = "[false, true, false, true, false]";
const STRINGS: &str =
    "['012345678901', '012345678901', '012345678901', '012345678901', '012345678901']";
const BYTES: &str = "[bytes('012345678901'), bytes('012345678901'), bytes('012345678901'), bytes('012345678901'), bytes('012345678901')]";
const DURATIONS: &str =
    "[duration('1s'), duration('2s'), duration('3s'), duration('4s'), duration('5s')]";
const TIMESTAMPS: &str = "[timestamp('2011-01-01T00:00:00.000+01:00'), timestamp('2011-01-02T00:00:00.000+01:00'), timestamp('2011-01-03T00:00:00.000+01:00'), timestamp('2011-01-04T00:00:00.000+01:00'), timestamp('2011-01-05T00:00:00.000+01:00')]";

#[test]
fn kube_lists_library_costs() {
    // TestListsCost and TestIndexOfCost.
    let mut cases: Vec<(String, u64, u64)> = Vec::new();
    for (list, min, max) in [
        (INTS, 15, 15),
        (UINTS, 20, 20),
        (DOUBLES, 15, 15),
        (DURATIONS, 20, 20),
    ] {
        cases.push((format!("{list}.sum()"), min, max));
    }
    for f in [".isSorted()", ".max()", ".min()"] {
        for (list, min, max) in [
            (INTS, 15, 15),
            (UINTS, 20, 20),
            (DOUBLES, 15, 15),
            (BOOLS, 15, 15),
            (STRINGS, 15, 25),
            (BYTES, 25, 35),
            (DURATIONS, 20, 20),
            (TIMESTAMPS, 20, 20),
        ] {
            cases.push((format!("{list}{f}"), min, max));
        }
    }
    for f in ["indexOf", "lastIndexOf"] {
        for (list, param, min, max) in [
            (INTS, "3", 15, 15),
            (UINTS, "uint(3)", 21, 21),
            (DOUBLES, "3.0", 15, 15),
            (BOOLS, "true", 15, 15),
            (STRINGS, "'x'", 15, 25),
            (BYTES, "bytes('x')", 26, 36),
            (DURATIONS, "duration('3s')", 21, 21),
            (
                TIMESTAMPS,
                "timestamp('2011-01-03T00:00:00.000+01:00')",
                21,
                21,
            ),
            (
                "'01234567890123456789012345678901234567890123456789'",
                "'123'",
                5,
                5,
            ),
        ] {
            cases.push((format!("{list}.{f}({param})"), min, max));
        }
    }
    let cases: Vec<(&str, u64, u64)> = cases.iter().map(|(e, a, b)| (e.as_str(), *a, *b)).collect();
    assert_kube_costs(&cases);
}

#[test]
fn kube_url_ip_and_cidr_library_costs() {
    let mut cases: Vec<(String, u64, u64)> = Vec::new();
    // TestURLsCost.
    let url = "url('https:://kubernetes.io/')";
    for getter in [
        "getScheme",
        "getHostname",
        "getHost",
        "getPort",
        "getEscapedPath",
        "getQuery",
    ] {
        cases.push((format!("{url}.{getter}()"), 4, 4));
    }
    cases.push((format!("{url} == url('https:://kubernetes.io/')"), 7, 9));
    cases.push((format!("{url} == url('http://x.b')"), 5, 5));
    // TestIPCost: parsing costs a tenth per character, an accessor 1 more, an equality 1
    // and the other side's parse.
    for (ip, base) in [
        ("ip('192.168.0.1')", 2),
        ("ip('2001:db8:3333:4444:5555:6666:7777:8888')", 4),
    ] {
        cases.push((ip.to_owned(), base, base));
        for accessor in [
            "family",
            "isUnspecified",
            "isLoopback",
            "isLinkLocalMulticast",
            "isLinkLocalUnicast",
            "isGlobalUnicast",
        ] {
            cases.push((format!("{ip}.{accessor}()"), base + 1, base + 1));
        }
        cases.push((format!("{ip} == ip('192.168.0.1')"), base + 3, base + 3));
    }
    // TestIPIsCanonicalCost.
    cases.push(("ip.isCanonical('192.168.0.1')".to_owned(), 3, 3));
    cases.push((
        "ip.isCanonical('2001:db8:3333:4444:5555:6666:7777:8888')".to_owned(),
        8,
        8,
    ));
    cases.push(("ip.isCanonical('2001:db8::abcd')".to_owned(), 3, 3));
    // TestCIDRCost (both bases are 2).
    let shared: &[(&str, u64, u64)] = &[
        ("", 0, 0),
        (".ip()", 1, 1),
        (".prefixLength()", 1, 1),
        (".masked()", 1, 1),
        (" == cidr('2001:db8::/32')", 3, 3),
    ];
    let v4: &[(&str, u64, u64)] = &[
        (".containsCIDR(cidr('192.0.0.0/30'))", 5, 9),
        (".containsCIDR(cidr('192.168.0.0/16'))", 5, 9),
        (".containsCIDR('192.0.0.0/30')", 5, 9),
        (".containsCIDR('192.168.0.0/16')", 5, 9),
        (".containsIP(ip('192.0.0.1'))", 2, 5),
        (".containsIP(ip('192.169.0.1'))", 3, 6),
        (".containsIP(ip('192.169.169.250'))", 3, 6),
        (".containsIP('192.0.0.1')", 2, 5),
        (".containsIP('192.169.0.1')", 3, 6),
    ];
    let v6: &[(&str, u64, u64)] = &[
        (".containsCIDR(cidr('2001:db8::/126'))", 5, 9),
        (".containsCIDR(cidr('2001:db8::/32'))", 5, 9),
        (".containsCIDR('2001:db8::/126')", 5, 9),
        (".containsCIDR('2001:db8::/32')", 5, 9),
        (
            ".containsIP(ip('2001:db8:3333:4444:5555:6666:7777:8888'))",
            5,
            8,
        ),
        (".containsIP(ip('2001:db8::1'))", 3, 6),
        (
            ".containsIP('2001:db8:3333:4444:5555:6666:7777:8888')",
            5,
            8,
        ),
        (".containsIP('2001:db8::1')", 3, 6),
    ];
    for (cidr, own) in [
        ("cidr('192.168.0.0/16')", v4),
        ("cidr('2001:db8::/32')", v6),
    ] {
        for (op, min, max) in shared.iter().chain(own) {
            cases.push((format!("{cidr}{op}"), 2 + min, 2 + max));
        }
    }
    let cases: Vec<(&str, u64, u64)> = cases.iter().map(|(e, a, b)| (e.as_str(), *a, *b)).collect();
    assert_kube_costs(&cases);
}

#[test]
fn kube_string_library_costs() {
    // TestStringLibrary (but `jsonpatch.escapeKey`, only in mutating admission policies).
    assert_kube_costs(&[
        ("'ABCDEFGHIJ abcdefghij'.lowerAscii()", 3, 3),
        (
            "'ABCDEFGHIJ abcdefghij'.lowerAscii() == 'abcdefghij ABCDEFGHIJ'.lowerAscii()",
            7,
            9,
        ),
        ("'ABCDEFGHIJ abcdefghij'.upperAscii()", 3, 3),
        (
            "'ABCDEFGHIJ abcdefghij'.upperAscii() == 'abcdefghij ABCDEFGHIJ'.upperAscii()",
            7,
            9,
        ),
        ("strings.quote('ABCDEFGHIJ abcdefghij')", 3, 3),
        (
            "strings.quote('ABCDEFGHIJ abcdefghij') == strings.quote('ABCDEFGHIJ abcdefghij')",
            7,
            11,
        ),
        ("'abc 123 def 123'.replace('123', '456')", 3, 3),
        ("'abc 123 def 123'.replace('', 'x')", 3, 3),
        ("'abc 123 def 123'.replace('123', '')", 3, 3),
        ("'abc 123 def 123'.replace('123', '456', 1)", 3, 3),
        ("'abc 123 def 123'.split(' ')", 3, 3),
        ("'abc 123 def 123'.split(' ', 1)", 3, 3),
        ("'abc 123 def 123'.substring(5)", 2, 2),
        ("'abc 123 def 123'.substring(5, 8)", 2, 2),
        ("'  abc 123 def 123  '.trim()", 2, 2),
        (
            "['aa', 'bb', 'cc', 'd', 'e', 'f', 'g', 'h', 'i', 'j'].join(' ')",
            11,
            23,
        ),
        (
            "['aa', 'bb', 'cc', 'd', 'e', 'f', 'g', 'h', 'i', 'j'].join()",
            10,
            22,
        ),
        ("'abc 123 def 123'.find('123')", 2, 2),
        ("'abc 123 def 123'.findAll('123')", 2, 2),
        ("'abc 123 def 123'.findAll('123', 1)", 2, 2),
    ]);
}

#[test]
fn kube_quantity_semver_and_format_library_costs() {
    assert_kube_costs(&[
        // TestQuantityCost.
        ("quantity(\"12Mi\")", 1, 1),
        ("isQuantity(\"20\")", 1, 1),
        ("isQuantity(\"20M\")", 1, 1),
        ("quantity(\"200M\") == quantity(\"200M\")", 3, 3),
        (
            "quantity(\"200M\") == quantity(\"0.2G\") && quantity(\"0.2G\") == quantity(\"200M\")",
            3,
            6,
        ),
        (
            "quantity(\"2M\") == quantity(\"0.002G\") && quantity(\"2000k\") == quantity(\"2M\") && quantity(\"0.002G\") == quantity(\"2000k\")",
            3,
            9,
        ),
        ("quantity(\"50M\").isLessThan(quantity(\"50Mi\"))", 3, 3),
        ("quantity(\"50Mi\").isGreaterThan(quantity(\"50M\"))", 3, 3),
        ("quantity(\"200M\").compareTo(quantity(\"0.2G\")) > 0", 4, 4),
        (
            "quantity(\"50k\").add(quantity(\"20\")) == quantity(\"50.02k\")",
            5,
            5,
        ),
        (
            "quantity(\"50k\").sub(quantity(\"20\")) == quantity(\"49.98k\")",
            5,
            5,
        ),
        ("quantity(\"50k\").sub(20) == quantity(\"49980\")", 4, 4),
        (
            "quantity(\"50k\").add(20).sub(quantity(\"100k\")).asInteger() > 0",
            6,
            6,
        ),
        (
            "quantity(\"50k\").add(20).sub(quantity(\"100k\")).sub(-50000).asInteger() > 0",
            7,
            7,
        ),
        ("quantity(\"50k\").asInteger() > 0", 3, 3),
        ("quantity(\"50\").isInteger()", 2, 2),
        ("quantity(\"50.703k\").asApproximateFloat() > 0.0", 3, 3),
        // TestSemverCost.
        ("semver(\"1.0.0\")", 1, 1),
        ("semver(\"1234.56789012345.67890123456789\")", 4, 4),
        ("isSemver(\"1.0.0\")", 1, 1),
        ("isSemver(\"1234.56789012345.67890123456789\")", 4, 4),
        ("semver(\"1.2.3\").major()", 2, 2),
        ("semver(\"1.2.3\").minor()", 2, 2),
        ("semver(\"1.2.3\").patch()", 2, 2),
        ("semver(\"1.0.0\").isLessThan(semver(\"1.1.0\"))", 3, 3),
        ("semver(\"1.1.0\").isGreaterThan(semver(\"1.0.0\"))", 3, 3),
        ("semver(\"1.0.0\").compareTo(semver(\"1.2.3\"))", 3, 3),
        // TestNameFormatCost: `validate` takes the format's regex as 128 characters long.
        ("format.named(\"dns1123subdomain\")", 1, 1),
        (
            "format.named(\"dns1123Subdomain\").value().validate(\"my-name\")",
            34,
            34,
        ),
        (
            "format.named(\"dns1123Label\").value().validate(\"my-name\")",
            34,
            34,
        ),
        (
            "format.named(\"dns1123Label\").value() == format.named(\"dns1123Label\").value()",
            5,
            11,
        ),
    ]);
}

#[test]
fn kube_sets_library_costs() {
    // TestSetsCost: the product of the lists' sizes (twice for `equivalent`), plus 1.
    assert_kube_costs(&[
        ("sets.contains([], [])", 21, 21),
        ("sets.contains([1], [])", 21, 21),
        ("sets.contains([1], [1])", 22, 22),
        ("sets.contains([1], [1, 1])", 23, 23),
        ("sets.contains([1, 1], [1])", 23, 23),
        ("sets.contains([2, 1], [1])", 23, 23),
        ("sets.contains([1, 2, 3, 4], [2, 3])", 29, 29),
        ("sets.contains([1], [1.0, 1])", 23, 23),
        ("sets.contains([1, 2], [2u, 2.0])", 25, 25),
        ("sets.contains([1, 2u], [2, 2.0])", 25, 25),
        ("sets.contains([1, 2.0, 3u], [1.0, 2u, 3])", 30, 30),
        ("sets.contains([[1], [2, 3]], [[2, 3.0]])", 53, 53),
        ("!sets.contains([1], [2])", 23, 23),
        ("!sets.contains([1], [1, 2])", 24, 24),
        ("!sets.contains([1], [\"1\", 1])", 24, 24),
        ("!sets.contains([1], [1.1, 1u])", 24, 24),
        ("sets.equivalent([], [])", 21, 21),
        ("sets.equivalent([1], [1])", 23, 23),
        ("sets.equivalent([1], [1, 1])", 25, 25),
        ("sets.equivalent([1, 1], [1])", 25, 25),
        ("sets.equivalent([1], [1u, 1.0])", 25, 25),
        ("sets.equivalent([1, 2, 3], [3u, 2.0, 1])", 39, 39),
        ("sets.equivalent([[1.0], [2, 3]], [[1], [2, 3.0]])", 69, 69),
        ("!sets.equivalent([2, 1], [1])", 26, 26),
        ("!sets.equivalent([1], [1, 2])", 26, 26),
        ("!sets.equivalent([1, 2], [2u, 2, 2.0])", 34, 34),
        ("!sets.equivalent([1, 2], [1u, 2, 2.3])", 34, 34),
        ("sets.intersects([1], [1])", 22, 22),
        ("sets.intersects([1], [1, 1])", 23, 23),
        ("sets.intersects([1, 1], [1])", 23, 23),
        ("sets.intersects([2, 1], [1])", 23, 23),
        ("sets.intersects([1], [1, 2])", 23, 23),
        ("sets.intersects([1], [1.0, 2])", 23, 23),
        ("sets.intersects([1, 2], [2u, 2, 2.0])", 27, 27),
        ("sets.intersects([1, 2], [1u, 2, 2.3])", 27, 27),
        ("sets.intersects([[1], [2, 3]], [[1, 2], [2, 3.0]])", 65, 65),
        ("!sets.intersects([], [])", 22, 22),
        ("!sets.intersects([1], [])", 22, 22),
        ("!sets.intersects([1], [2])", 23, 23),
        ("!sets.intersects([1], [\"1\", 2])", 24, 24),
        ("!sets.intersects([1], [1.1, 2u])", 24, 24),
    ]);
}

#[test]
fn kube_two_variable_comprehension_costs() {
    // TestTwoVariableComprehensionCost.
    assert_kube_costs(&[
        ("{'a': 1, 'b': 2}.all(k, v, v > 0)", 37, 41),
        ("{'a': 1, 'b': 2}.exists(k, v, v > 0)", 39, 43),
        ("{'a': 1, 'b': 2}.existsOne(k, v, v > 0)", 38, 40),
        ("{'a': 1, 'b': 2}.transformMap(k, v, v + 1)", 71, 71),
        ("{'a': 1, 'b': 2}.transformMap(k, v, v < 5, v + 1)", 67, 75),
        (
            "{'a': 1, 'b': 2}.transformMapEntry(k, v, {k: v + 1})",
            131,
            131,
        ),
        (
            "{'a': 1, 'b': 2}.transformMapEntry(k, v, v < 5, {k: v + 1})",
            67,
            135,
        ),
        ("[1, 2].all(i, v, v > 0)", 17, 21),
        ("[1, 2].exists(i, v, v > 0)", 19, 23),
        ("[1, 2].existsOne(i, v, v > 0)", 18, 20),
        ("[1, 2].transformList(i, v, v + 1)", 49, 49),
        ("[1, 2].transformList(i, v, v < 5, v + 1)", 27, 53),
    ]);
}

#[test]
fn kube_replace_result_sizes() {
    // TestSize: the size of `replace`'s result from its operands' sizes.
    let fixed = Est::fixed;
    let range = |min, max| Est { min, max };
    assert_eq!(replaced_size(fixed(3), fixed(0), fixed(1)), Some(fixed(7)));
    assert_eq!(
        replaced_size(fixed(3), fixed(1), fixed(0)),
        Some(range(0, 3))
    );
    assert_eq!(
        replaced_size(fixed(4), fixed(2), fixed(4)),
        Some(range(4, 8))
    );
    assert_eq!(
        replaced_size(fixed(4), range(0, 1), range(0, 2)),
        Some(range(0, 14))
    );
    assert_eq!(
        replaced_size(fixed(4), range(1, 1), range(1, 2)),
        Some(range(4, 8))
    );
    assert_eq!(
        replaced_size(fixed(4), range(1, 2), range(1, 1)),
        Some(range(2, 4))
    );
}

/// `(rule, estimate)` pairs on a node of `schema`, each as kube's test expects.
fn assert_schema_costs(schema: &Value, cases: &[(&str, u64)]) {
    let mut wrong = Vec::new();
    for &(rule, want) in cases {
        let got = cost(rule, schema.clone());
        if got != Some(want) {
            wrong.push(format!("{rule}: want {want}, got {got:?}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// An object of properties `val1`, `val2`, ... of these schemas (kube's `schemas`).
fn vals(schemas: &[Value]) -> Value {
    let properties: Map<String, Value> = schemas
        .iter()
        .enumerate()
        .map(|(i, s)| (format!("val{}", i + 1), s.clone()))
        .collect();
    json!({"type": "object", "properties": properties})
}

#[test]
fn kube_library_costs_scale_with_the_schema_s_sizes() {
    // apiextensions-apiserver's TestCostEstimation, its library cases: without sizes ("calc
    // maxLength"), then with `maxLength`/`maxItems` set.
    let string = |max: Option<i64>| match max {
        Some(n) => json!({"type": "string", "maxLength": n}),
        None => json!({"type": "string"}),
    };
    for (max, find, lower) in [(None, 629_147, 314_575), (Some(10), 11, 6)] {
        assert_schema_costs(
            &string(max),
            &[
                ("self.find('[0-9]+') == ''", find),
                ("self.lowerAscii() == 'lower!'", lower),
            ],
        );
    }
    for (max, join, sorted) in [(None, 329_853_068_905, 329_854_432_052), (Some(10), 43, 52)] {
        let mut array = json!({"type": "array", "x-kubernetes-list-type": "atomic",
            "items": string(max)});
        if let Some(n) = max {
            array["maxItems"] = json!(n);
        }
        assert_schema_costs(
            &array,
            &[
                ("self.join(' ') == 'aa bb'", join),
                ("self.isSorted() == true", sorted),
            ],
        );
    }
    for (max, replace) in [(None, 629_154), (Some(4), 12)] {
        let object = json!({"type": "object", "properties": {"str": string(max),
            "before": string(Some(2)), "after": string(Some(4))}});
        assert_schema_costs(
            &object,
            &[(
                "self.str.replace(self.before, self.after) == 'does not matter'",
                replace,
            )],
        );
    }
    for (max, split) in [(None, 629_160), (Some(10), 22)] {
        let object = json!({"type": "object", "properties": {"str": string(max),
            "separator": string(max)}});
        assert_schema_costs(&object, &[("self.str.split(self.separator) == []", split)]);
    }
}

#[test]
fn kube_estimated_cost_stability_of_libraries_conversions_and_optionals() {
    // apiextensions-apiserver's TestCelEstimatedCostStability: "quantity".
    let string = json!({"type": "string"});
    assert_schema_costs(
        &vals(&[string.clone(), string.clone()]),
        &[
            ("isQuantity(self.val1)", 314_575),
            ("isQuantity(self.val2)", 314_575),
            ("isQuantity(\"200M\")", 1),
            ("isQuantity(\"20Mi\")", 1),
            (
                "quantity(\"200M\") == quantity(\"0.2G\") && quantity(\"0.2G\") == quantity(\"200M\")",
                6,
            ),
            (
                "quantity(\"2M\") == quantity(\"0.002G\") && quantity(\"2000k\") == quantity(\"2M\") && quantity(\"0.002G\") == quantity(\"2000k\")",
                9,
            ),
            (
                "quantity(self.val1).isLessThan(quantity(self.val2))",
                629_151,
            ),
            ("quantity(\"50M\").isLessThan(quantity(\"100M\"))", 3),
            ("quantity(\"50Mi\").isGreaterThan(quantity(\"50M\"))", 3),
            ("quantity(\"200M\").compareTo(quantity(\"0.2G\")) == 0", 4),
            (
                "quantity(\"50k\").add(quantity(\"20\")) == quantity(\"50.02k\")",
                5,
            ),
            ("quantity(\"50k\").sub(20) == quantity(\"49980\")", 4),
            ("quantity(\"50\").isInteger()", 2),
            ("quantity(self.val1).isInteger()", 314_576),
        ],
    );
    // "conversions": `string()` of anything but bytes has no size.
    let typed = |t: &str| json!({"type": t});
    let formatted = |f: &str| json!({"type": "string", "format": f});
    assert_schema_costs(
        &vals(&[
            typed("integer"),
            typed("number"),
            typed("number"),
            typed("number"),
            typed("boolean"),
            string.clone(),
            formatted("byte"),
            string.clone(),
            formatted("duration"),
            string.clone(),
            formatted("date-time"),
            string.clone(),
            formatted("date"),
        ]),
        &[
            ("int(self.val2) == self.val1", 5),
            ("double(self.val1) == self.val2", 5),
            ("bytes(self.val6) == self.val7", 629_150),
            ("string(self.val1) == self.val6", 314_578),
            ("string(self.val4) == '10.5'", 4),
            ("string(self.val7) == self.val6", 629_150),
            ("duration(self.val8) == self.val9", 6),
            ("timestamp(self.val10) == self.val11", 6),
            ("string(self.val11) == self.val10", 314_578),
            ("timestamp(self.val12) == self.val13", 6),
            ("string(self.val13) == self.val12", 314_578),
        ],
    );
    // "optionals": an optional has no size, so `!=` of two is unbounded.
    let object = json!({"type": "object", "properties": {
        "obj": {"type": "object", "properties": {"field": string, "absentField": string}},
        "m": {"type": "object", "additionalProperties": string},
        "l": {"type": "array", "items": string}}});
    assert_schema_costs(
        &object,
        &[
            (
                "optional.of('a') != optional.of('b')",
                1_844_674_407_370_955_266,
            ),
            (
                "optional.of('a') != optional.none()",
                1_844_674_407_370_955_266,
            ),
            ("optional.of('a').hasValue()", 2),
            ("optional.of('a').or(optional.of('a')).hasValue()", 4),
            ("optional.none().or(optional.of('a')).hasValue()", 4),
            (
                "self.obj.?field == optional.of('a')",
                1_844_674_407_370_955_268,
            ),
            (
                "self.obj.?absentField == optional.none()",
                1_844_674_407_370_955_268,
            ),
            ("self.obj.?field.orValue('v') == 'a'", 5),
            (
                "self.m[?'k'] == optional.of('v')",
                1_844_674_407_370_955_268,
            ),
            ("self.l[?0] == optional.of('a')", 1_844_674_407_370_955_268),
            ("optional.ofNonZeroValue(1).hasValue()", 2),
            (
                "optional.of([1, 2, 3, 4, 5]).optMap(v, v.size()).hasValue()",
                38,
            ),
            (
                "optional.of('abcdefgabcdefg').optMap(v, v.size()).hasValue()",
                18,
            ),
            ("self.l[?0].optMap(v, v == 'a').hasValue()", 22),
            ("optional.of('a').optMap(v, v == 'value').hasValue()", 18),
        ],
    );
}

/// A CRD whose version's `spec` has `properties`, through kube's defaulting and validation.
fn crd_refusal(properties: Value, spec_rules: Value) -> Result<(), crate::error::ApiError> {
    let mut crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {
                    "type": "object", "properties": properties,
                    "x-kubernetes-validations": spec_rules}}}}}]
        }
    });
    crate::crd::apply_defaults(&mut crd);
    crate::crd::validate(&crd, None)
}

const AT: &str = "spec.versions[0].schema.openAPIV3Schema";
const TRY: &str = " (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)";

#[test]
fn a_crd_with_an_over_budget_library_rule_is_refused_and_a_bounded_one_accepted() {
    // Each address: `isIP` 1 + ceil((3 MiB - 2) / 10) = 314,574, `ip(self).family() == 4`
    // 314,576, `&&` both: 629,150, times the 20 addresses: 12,583,000, 1.2583 times the limit.
    let rule = json!([{"rule": "isIP(self) && ip(self).family() == 4"}]);
    let addresses = |item_max: Option<i64>| {
        let mut item = json!({"type": "string", "x-kubernetes-validations": rule});
        if let Some(n) = item_max {
            item["maxLength"] = json!(n);
        }
        json!({"addresses": {"type": "array", "maxItems": 20, "items": item}})
    };
    let error = crd_refusal(addresses(None), json!([])).unwrap_err();
    assert_eq!(error.code, 422);
    assert_eq!(
        error.message,
        format!(
            "CustomResourceDefinition.apiextensions.k8s.io \"widgets.example.com\" is invalid: {AT}.properties[spec].properties[addresses].items.x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget by factor of 1.258300x{TRY}"
        )
    );
    // 45 characters (180 bytes): 2 * (1 + 18) + 2 = 40, times 20.
    assert_eq!(crd_refusal(addresses(Some(45)), json!([])), Ok(()));

    // Sets nested over two unbounded lists: far above the rule's and the schema's limits.
    let list = json!({"list": {"type": "array", "items": {"type": "string"}}});
    let nested = json!([{"rule": "self.list.all(x, self.list.all(y, sets.contains([x], [y])))"}]);
    let error = crd_refusal(list, nested.clone()).unwrap_err();
    let rule_at = format!("{AT}.properties[spec].x-kubernetes-validations[0].rule");
    assert_eq!(
        error.message,
        format!(
            "CustomResourceDefinition.apiextensions.k8s.io \"widgets.example.com\" is invalid: [{rule_at}: Forbidden: estimated rule cost exceeds budget by factor of more than 100x{TRY}, {rule_at}: Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema, {AT}: Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget by factor of more than 100x{TRY}]"
        )
    );
    let bounded = json!({"list": {"type": "array", "maxItems": 10, "items": {"type": "string"}}});
    assert_eq!(crd_refusal(bounded, nested), Ok(()));
}

//! Label selectors against kube 1.33's `labels.Parse` (apimachinery `pkg/labels/selector.go`,
//! tag v0.33.9): a table of inputs with the answer kube gives, traced by hand through its lexer
//! (`Lexer.Lex`, `scanIDOrKeyword`, `scanSpecialSymbol`), parser (`Parser.parse`,
//! `parseRequirement`, `parseKeyAndInferOperator`, `parseOperator`, `parseValues`,
//! `parseIdentifiersList`, `parseExactValue`) and `NewRequirement` (with
//! `validation.IsQualifiedName` / `IsValidLabelValue` and `field.Error`/aggregate printing);
//! and the `>` / `<` matching of `Requirement.Matches`.

use std::collections::BTreeMap;

use watchkeeper_core::LabelSelector;
use watchkeeper_core::selector::LabelOperator;

const QN: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const SUBDOMAIN: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const LV: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
const OPS: &str = "in, notin, =, ==, !=, gt, lt";
const INT: &str = "for 'Gt', 'Lt' operators, the value must be an integer";

fn req(text: &str) -> String {
    format!("unable to parse requirement: {text}")
}

fn in_(values: &[&str]) -> LabelOperator {
    LabelOperator::In(values.iter().map(|v| (*v).to_owned()).collect())
}

fn not_in(values: &[&str]) -> LabelOperator {
    LabelOperator::NotIn(values.iter().map(|v| (*v).to_owned()).collect())
}

/// Inputs kube refuses, with its exact error text.
#[test]
fn refusals_are_kubes_texts() {
    let long_value = "x".repeat(64);
    let cases: Vec<(String, String)> = vec![
        // parseIdentifiersList: `b` then the end.
        ("a in (b".into(), req("found '', expected: ',' or ')'")),
        // parseValues: no `(` (kube's text has no colon here).
        ("a in b".into(), req("found 'b' expected: '('")),
        ("a notin".into(), req("found '' expected: '('")),
        (
            "a in (=)".into(),
            req("found '=', expected: ',', ')' or identifier"),
        ),
        ("a in (b c)".into(), req("found 'c', expected: ',' or ')'")),
        (
            "a in (b,=)".into(),
            req("found '=', expected: ',', or identifier"),
        ),
        // 1.33's parseIdentifiersList consumes the second comma of `,,`.
        (
            "a in (,,)".into(),
            req("found ')', expected: ',', or identifier"),
        ),
        // parseExactValue.
        ("a=(".into(), req("found '(', expected: identifier")),
        ("a===b".into(), req("found '=', expected: identifier")),
        ("a>=1".into(), req("found '=', expected: identifier")),
        // parseOperator.
        ("a b".into(), req(&format!("found 'b', expected: {OPS}"))),
        (
            "a ! = b".into(),
            req(&format!("found '!', expected: {OPS}")),
        ),
        // parseKeyAndInferOperator: `!` needs an identifier.
        ("!".into(), req("found '', expected: identifier")),
        ("!!a".into(), req("found '!', expected: identifier")),
        // Parser.parse, outside a requirement: no prefix.
        (
            "=b".into(),
            "found '=', expected: !, identifier, or 'end of string'".into(),
        ),
        (
            ",a".into(),
            "found ',', expected: !, identifier, or 'end of string'".into(),
        ),
        (
            "a=b,,c=d".into(),
            "found ',', expected: identifier after ','".into(),
        ),
        (
            "a=b,".into(),
            "found '', expected: identifier after ','".into(),
        ),
        (
            "a=b c".into(),
            "found 'c', expected: ',' or 'end of string'".into(),
        ),
        (
            "a=b=c".into(),
            "found '=', expected: ',' or 'end of string'".into(),
        ),
        (
            "!a=b".into(),
            "found '=', expected: ',' or 'end of string'".into(),
        ),
        (
            "a in (b) c".into(),
            "found 'c', expected: ',' or 'end of string'".into(),
        ),
        // A NUL inside an identifier ends it and is skipped: `b`, then `junk`.
        (
            "a=b\0junk".into(),
            "found 'junk', expected: ',' or 'end of string'".into(),
        ),
        // Keys: validated with the parser's nil path.
        (
            "-a=b".into(),
            req(&format!("<nil>: Invalid value: \"-a\": name part {QN}")),
        ),
        (
            "/a".into(),
            req("<nil>: Invalid value: \"/a\": prefix part must be non-empty"),
        ),
        (
            "a/".into(),
            req(&format!(
                "<nil>: Invalid value: \"a/\": name part must be non-empty; name part {QN}"
            )),
        ),
        (
            "Example.com/a in (b)".into(),
            req(&format!(
                "<nil>: Invalid value: \"Example.com/a\": prefix part {SUBDOMAIN}"
            )),
        ),
        (
            "x/y/z".into(),
            req(&format!(
                "<nil>: Invalid value: \"x/y/z\": a qualified name {QN} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            )),
        ),
        // A vertical tab and a no-break space are not whitespace to kube's lexer.
        (
            "a\u{b}=b".into(),
            req(&format!("<nil>: Invalid value: \"a\\v\": name part {QN}")),
        ),
        (
            "a\u{a0}=b".into(),
            req(&format!(
                "<nil>: Invalid value: \"a\\u00a0\": name part {QN}"
            )),
        ),
        // Values: path values[i][key], i in the sorted set.
        (
            "a=b@".into(),
            req(&format!("values[0][a]: Invalid value: \"b@\": {LV}")),
        ),
        (
            format!("a={long_value}"),
            req(&format!(
                "values[0][a]: Invalid value: \"{long_value}\": must be no more than 63 characters"
            )),
        ),
        (
            "a in (y@, x@)".into(),
            req(&format!(
                "[values[0][a]: Invalid value: \"x@\": {LV}, values[1][a]: Invalid value: \"y@\": {LV}]"
            )),
        ),
        // Gt / Lt: one integer, which must also be a label value.
        (
            "a>b".into(),
            req(&format!("values[0]: Invalid value: \"b\": {INT}")),
        ),
        (
            "a>".into(),
            req(&format!("values[0]: Invalid value: \"\": {INT}")),
        ),
        (
            "a>1.5".into(),
            req(&format!("values[0]: Invalid value: \"1.5\": {INT}")),
        ),
        (
            "a<99999999999999999999".into(),
            req(&format!(
                "values[0]: Invalid value: \"99999999999999999999\": {INT}"
            )),
        ),
        (
            "a>-1".into(),
            req(&format!("values[0][a]: Invalid value: \"-1\": {LV}")),
        ),
        (
            "a<b@".into(),
            req(&format!(
                "[values[0]: Invalid value: \"b@\": {INT}, values[0][a]: Invalid value: \"b@\": {LV}]"
            )),
        ),
    ];
    assert!(cases.len() >= 25);
    for (input, expected) in cases {
        match LabelSelector::parse(&input) {
            Ok(selector) => panic!("{input:?} parsed as {selector}, kube says {expected}"),
            Err(error) => assert_eq!(error.message, expected, "{input:?}"),
        }
    }
}

/// Inputs kube accepts, with the requirements it makes (sorted by key, values as a sorted set).
#[test]
fn acceptances_are_kubes_requirements() {
    let cases: Vec<(&str, Vec<(&str, LabelOperator)>)> = vec![
        ("", vec![]),
        (" \t\r\n", vec![]),
        ("a", vec![("a", LabelOperator::Exists)]),
        ("!a", vec![("a", LabelOperator::DoesNotExist)]),
        ("! a", vec![("a", LabelOperator::DoesNotExist)]),
        ("a=b", vec![("a", in_(&["b"]))]),
        ("a == b", vec![("a", in_(&["b"]))]),
        ("a!=", vec![("a", not_in(&[""]))]),
        ("a=", vec![("a", in_(&[""]))]),
        ("a\tin\t(c, b ,c)", vec![("a", in_(&["b", "c"]))]),
        ("a notin ()", vec![("a", not_in(&[""]))]),
        ("a in (b,,c)", vec![("a", in_(&["", "b", "c"]))]),
        ("a in (b,)", vec![("a", in_(&["", "b"]))]),
        ("a in (,b)", vec![("a", in_(&["", "b"]))]),
        ("a in (,,,)", vec![("a", in_(&[""]))]),
        ("in in (in, notin)", vec![("in", in_(&["in", "notin"]))]),
        ("notin=in", vec![("notin", in_(&["in"]))]),
        ("a>1", vec![("a", LabelOperator::GreaterThan(1))]),
        ("a < 3", vec![("a", LabelOperator::LessThan(3))]),
        ("a>007", vec![("a", LabelOperator::GreaterThan(7))]),
        (
            "b<3,a>1,b>1",
            vec![
                ("a", LabelOperator::GreaterThan(1)),
                ("b", LabelOperator::LessThan(3)),
                ("b", LabelOperator::GreaterThan(1)),
            ],
        ),
        (
            "z,y=1,x",
            vec![
                ("x", LabelOperator::Exists),
                ("y", in_(&["1"])),
                ("z", LabelOperator::Exists),
            ],
        ),
        ("a=b,a=b", vec![("a", in_(&["b"])), ("a", in_(&["b"]))]),
        (
            "example.com/app=web",
            vec![("example.com/app", in_(&["web"]))],
        ),
        // A NUL where a token would start ends the text; one inside a token ends the token.
        ("a=b \0 junk", vec![("a", in_(&["b"]))]),
        ("a=\0b", vec![("a", in_(&["b"]))]),
    ];
    for (input, expected) in cases {
        let selector =
            LabelSelector::parse(input).unwrap_or_else(|e| panic!("{input:?} refused: {e}"));
        let got: Vec<(&str, &LabelOperator)> = selector
            .requirements()
            .iter()
            .map(|r| (r.key.as_str(), &r.operator))
            .collect();
        let want: Vec<(&str, &LabelOperator)> = expected.iter().map(|(k, o)| (*k, o)).collect();
        assert_eq!(got, want, "{input:?}");
        let shown = selector.to_string();
        assert_eq!(
            LabelSelector::parse(&shown).unwrap(),
            selector,
            "{input:?} → {shown:?}"
        );
    }
    assert_eq!(LabelSelector::parse("a>007").unwrap().to_string(), "a>7");
    assert_eq!(
        LabelSelector::parse("b notin (y,x),a in (c,b)")
            .unwrap()
            .to_string(),
        "a in (b,c),b notin (x,y)"
    );
}

type Pairs = &'static [(&'static str, &'static str)];

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// `Requirement.Matches` for `gt` / `lt`: the label must be present and parse as an `int64`
/// (Go's `ParseInt(v, 10, 64)`: optional sign, digits); the comparison is strict.
#[test]
fn greater_and_less_than_compare_integers() {
    let gt = LabelSelector::parse("a>1").unwrap();
    let lt = LabelSelector::parse("a<3").unwrap();
    let between = LabelSelector::parse("a>1,a<3").unwrap();
    // (labels, a>1, a<3, a>1,a<3)
    let cases: [(Pairs, bool, bool, bool); 12] = [
        (&[("a", "2")], true, true, true),
        (&[("a", "1")], false, true, false),
        (&[("a", "3")], true, false, false),
        (&[("a", "0")], false, true, false),
        (&[("a", "10")], true, false, false),
        (&[("a", "007")], true, false, false),
        (&[("a", "+2")], true, true, true),
        (&[("a", "-5")], false, true, false),
        (&[("a", "x")], false, false, false),
        (&[("a", "")], false, false, false),
        (&[("a", "99999999999999999999")], false, false, false),
        (&[("b", "2")], false, false, false),
    ];
    for (pairs, want_gt, want_lt, want_between) in cases {
        let l = labels(pairs);
        assert_eq!(gt.matches(&l), want_gt, "a>1 on {pairs:?}");
        assert_eq!(lt.matches(&l), want_lt, "a<3 on {pairs:?}");
        assert_eq!(between.matches(&l), want_between, "a>1,a<3 on {pairs:?}");
    }
    // The empty set value `()` selects the empty label only; `notin ()` everything else.
    let empty = LabelSelector::parse("a in ()").unwrap();
    assert!(empty.matches(&labels(&[("a", "")])));
    assert!(!empty.matches(&labels(&[("a", "x")])));
    assert!(!empty.matches(&labels(&[])));
    let not_empty = LabelSelector::parse("a notin ()").unwrap();
    assert!(not_empty.matches(&labels(&[])));
    assert!(!not_empty.matches(&labels(&[("a", "")])));
}

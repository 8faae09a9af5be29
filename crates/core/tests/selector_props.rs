//! Property tests of label and field selector parsing (the same properties the fuzz targets
//! `selector_label` and `selector_field` check, see fuzz/README.md): parsing never panics,
//! a parsed selector displays as text that parses back to an equal selector, and matching agrees
//! with a straightforward model. Plus regression tests for what the fuzzers found.

use std::collections::BTreeMap;

use proptest::prelude::*;
use watchkeeper_core::selector::LabelOperator;
use watchkeeper_core::{FieldSelector, LabelSelector};

fn label_name() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z0-9]",
        "[a-zA-Z0-9][a-zA-Z0-9._-]{0,8}[a-zA-Z0-9]",
        "[a-z]{1,5}(\\.[a-z]{1,5}){0,2}/[a-z0-9]{1,6}",
    ]
}

fn label_value() -> impl Strategy<Value = String> {
    prop_oneof![
        "",
        "[a-z0-9]",
        "[a-zA-Z0-9][a-zA-Z0-9._-]{0,8}[a-zA-Z0-9]",
        "[0-9]{1,3}"
    ]
}

/// A set's values as kube's parser keeps them: sorted, without duplicates.
fn set(values: &[String]) -> Vec<String> {
    let mut values = values.to_vec();
    values.sort();
    values.dedup();
    values
}

/// One requirement as text, with its expected meaning.
fn label_requirement() -> impl Strategy<Value = (String, String, LabelOperator)> {
    (
        label_name(),
        prop::collection::vec(label_value(), 1..4),
        0..8u8,
        0..1000i64,
    )
        .prop_map(|(key, mut values, op, bound)| {
            // At most one empty value, first: kube 1.33 refuses an even run of commas before
            // `)` (`(a,,)`, `(,,)`), which `label_selector_kube.rs` covers.
            values.sort_by_key(|v| !v.is_empty());
            values.dedup_by(|a, b| a.is_empty() && b.is_empty());
            match op {
                0 => (
                    format!("{key}={}", values[0]),
                    key,
                    LabelOperator::In(vec![values[0].clone()]),
                ),
                1 => (
                    format!("{key} == {}", values[0]),
                    key,
                    LabelOperator::In(vec![values[0].clone()]),
                ),
                2 => (
                    format!("{key}!={}", values[0]),
                    key,
                    LabelOperator::NotIn(vec![values[0].clone()]),
                ),
                3 => (
                    format!("{key} in ({})", values.join(", ")),
                    key,
                    LabelOperator::In(set(&values)),
                ),
                4 => (
                    format!("{key} notin ({})", values.join(",")),
                    key,
                    LabelOperator::NotIn(set(&values)),
                ),
                5 => (
                    format!("{key} > {bound}"),
                    key,
                    LabelOperator::GreaterThan(bound),
                ),
                6 => (
                    format!("{key}<{bound}"),
                    key,
                    LabelOperator::LessThan(bound),
                ),
                _ => (format!("!{key}"), key, LabelOperator::DoesNotExist),
            }
        })
}

fn model_matches(
    requirements: &[(String, LabelOperator)],
    labels: &BTreeMap<String, String>,
) -> bool {
    requirements.iter().all(|(key, op)| match op {
        LabelOperator::In(values) => labels.get(key).is_some_and(|v| values.contains(v)),
        LabelOperator::NotIn(values) => labels.get(key).is_none_or(|v| !values.contains(v)),
        LabelOperator::Exists => labels.contains_key(key),
        LabelOperator::DoesNotExist => !labels.contains_key(key),
        LabelOperator::GreaterThan(bound) => labels
            .get(key)
            .and_then(|v| v.parse::<i64>().ok())
            .is_some_and(|v| v > *bound),
        LabelOperator::LessThan(bound) => labels
            .get(key)
            .and_then(|v| v.parse::<i64>().ok())
            .is_some_and(|v| v < *bound),
    })
}

/// A field selector's requirements as a sorted list: what it selects, whatever their order.
fn terms(selector: &FieldSelector) -> Vec<(String, String, bool)> {
    let mut terms: Vec<(String, String, bool)> = selector
        .requirements()
        .iter()
        .map(|r| (r.field.clone(), r.value.clone(), r.negated))
        .collect();
    terms.sort();
    terms
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn label_selectors_parse_display_parse(
        requirements in prop::collection::vec(label_requirement(), 0..5),
        labels in prop::collection::btree_map(label_name(), label_value(), 0..5),
    ) {
        let text: Vec<&str> = requirements.iter().map(|(t, _, _)| t.as_str()).collect();
        let text = text.join(",");
        let selector = LabelSelector::parse(&text).unwrap();
        // Sorted by key, stably, as kube's parser sorts them.
        let mut expected: Vec<(String, LabelOperator)> =
            requirements.into_iter().map(|(_, k, op)| (k, op)).collect();
        expected.sort_by(|a, b| a.0.cmp(&b.0));
        prop_assert_eq!(selector.requirements().len(), expected.len());
        for (requirement, (key, op)) in selector.requirements().iter().zip(&expected) {
            prop_assert_eq!(&requirement.key, key);
            prop_assert_eq!(&requirement.operator, op);
        }
        let shown = selector.to_string();
        prop_assert_eq!(&LabelSelector::parse(&shown).unwrap(), &selector, "{} → {}", text, shown);
        prop_assert_eq!(selector.matches(&labels), model_matches(&expected, &labels));
    }

    #[test]
    fn label_selectors_never_panic_and_round_trip(text in "[a-z0-9=!,()<> .in/\\t\\x00-]{0,40}|\\PC{0,40}") {
        if let Ok(selector) = LabelSelector::parse(&text) {
            let shown = selector.to_string();
            prop_assert_eq!(&LabelSelector::parse(&shown).unwrap(), &selector, "{:?} → {:?}", text, shown);
            let _ = selector.matches(&BTreeMap::new());
        }
    }

    #[test]
    fn field_selectors_parse_display_parse(
        terms in prop::collection::vec(
            ("[a-z]{1,6}(\\.[a-zA-Z]{1,6}){0,2}", "[a-z0-9,=!\\\\ .-]{0,10}", any::<bool>()),
            1..5,
        ),
    ) {
        // Values as a client escapes them (every `\`, `,` and `=`); nothing is trimmed.
        let text: Vec<String> = terms
            .iter()
            .map(|(field, value, negated)| {
                let escaped: String = value
                    .chars()
                    .flat_map(|c| {
                        let escape = matches!(c, '\\' | ',' | '=').then_some('\\');
                        escape.into_iter().chain(std::iter::once(c))
                    })
                    .collect();
                format!("{field}{}{escaped}", if *negated { "!=" } else { "=" })
            })
            .collect();
        // The requirements come in the order of their terms' text, as kube sorts the terms.
        let mut expected: Vec<(&String, &(String, String, bool))> = text.iter().zip(&terms).collect();
        expected.sort_by(|a, b| a.0.cmp(b.0));
        let text = text.join(",");
        let selector = FieldSelector::parse(&text).unwrap();
        prop_assert_eq!(selector.requirements().len(), expected.len());
        for (requirement, (_, (field, value, negated))) in selector.requirements().iter().zip(&expected) {
            prop_assert_eq!(&requirement.field, field);
            prop_assert_eq!(&requirement.value, value);
            prop_assert_eq!(requirement.negated, *negated);
        }
        let shown = selector.to_string();
        prop_assert_eq!(&FieldSelector::parse(&shown).unwrap(), &selector, "{} → {}", text, shown);
        let fields: BTreeMap<String, String> = selector
            .requirements()
            .iter()
            .map(|r| (r.field.clone(), r.value.clone()))
            .collect();
        let consistent = selector
            .requirements()
            .iter()
            .all(|r| !r.negated && fields.get(&r.field) == Some(&r.value));
        if consistent {
            prop_assert!(selector.matches(&fields));
        }
    }

    #[test]
    fn field_selectors_never_panic_and_round_trip(text in "[a-z.=!,\\\\ ]{0,40}|\\PC{0,40}") {
        if let Ok(selector) = FieldSelector::parse(&text) {
            let shown = selector.to_string();
            // The same requirements; not always in the same order: kube's parser sorts the
            // terms' text, and a term written `a==v` is shown `a=v` (kube's `hasTerm`), which
            // can sort differently (`==,=.` → `=.,=`). Order does not change what matches.
            prop_assert_eq!(
                terms(&FieldSelector::parse(&shown).unwrap()),
                terms(&selector),
                "{:?} → {:?}", text, shown
            );
        }
    }
}

/// Found by the `selector_field` fuzz target: a value ending in whitespace and a lone
/// backslash (`f=a \`) parsed to `"a "`, a value whose displayed form (`f=a `) parses to `"a"`.
/// Kubernetes rejects a trailing lone backslash and unknown escapes; so does this parser now
/// (and, as kube, it no longer trims values).
#[test]
fn field_selector_rejects_dangling_and_unknown_escapes() {
    for bad in [r"f=a \", r"f=\", r"f=a\ b", r"f=\x", r"status.phase=Ru \"] {
        let error = FieldSelector::parse(bad).unwrap_err();
        assert!(
            error.message.contains("escape") || error.message.contains("backslash"),
            "{bad}: {error}"
        );
    }
    // `\!` is not one of kube's escapes either; a `!` needs none.
    assert!(FieldSelector::parse(r"f=a\!b").is_err());
    let ok = FieldSelector::parse(r"f=a\\\,\=!b").unwrap();
    assert_eq!(ok.exact("f"), Some(r"a\,=!b"));
    assert_eq!(FieldSelector::parse(&ok.to_string()).unwrap(), ok);
}

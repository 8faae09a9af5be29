//! apimachinery's own strategic merge patch tests (`pkg/util/strategicpatch/patch_test.go` of
//! kubernetes/apimachinery v0.33.13, kube 1.33's; vendored as data in
//! `crates/api/testdata/strategicpatch/`, see its README), run through
//! [`strategic_merge_patch`] with their test type `mergeItem` read from the same commit's
//! `testdata/swagger-merge-item.json`: every pair of an object and a patch whose patched
//! object (or error) the Go tests check, in the *apply* direction (`StrategicMergePatch`),
//! which is what kube-apiserver runs on a PATCH. The tests of patch *creation*
//! (`CreateTwoWayMergePatch`, `CreateThreeWayMergePatch`: the client's side) are read for
//! their apply half only: the created patch applied to its object must give the table's
//! result, so each such case is one apply case per direction.
//!
//! How a case reads, as the Go test reads it:
//! - `createStrategicMergePatchTestCaseData` and `customStrategicMergePatchTestCaseData`
//!   (YAML tables of maps): the object, patch and result are normalised by upstream's
//!   `sortMergeListsByName` before use (merging lists sorted by merge key, merging scalar
//!   lists deduplicated and sorted; [`sort_merge_lists`] here), and the result must then be
//!   equal; two-way: `original` + `twoWay` gives `twoWayResult`, or `modified` without one;
//!   three-way: `current` + `threeWay` gives `result`.
//! - `strategicMergePatchRawTestCases`, `customStrategicMergePatchRawTestCases`,
//!   `replaceRawExtensionPatchTestCases` (YAML texts): the same pairs without normalisation;
//!   `ExpectedError` is a text the error must contain (those are errors apimachinery gives no
//!   status, so kube-apiserver answers 500 without a reason, [`is_kube_patch_500`]).
//! - `TestNumberConversion`, `TestUnknownField`: `Old` + `ExpectedPatch` gives
//!   `ExpectedResult`; `Original` + `ExpectedTwoWay` gives `ExpectedTwoWayResult` and
//!   `Current` + `ExpectedThreeWay` gives `ExpectedThreeWayResult` (the Go test compares the
//!   JSON texts; here the values, as serde_json writes `3.4e38` where Go writes `3.4e+38`).
//!
//! Left out, each for its reason (and counted by [`upstream_tables_as_strategic_merge_applies_them`]):
//! - a three-way case whose description says `conflict` and that has no `result`: it checks
//!   only that patch *creation* detects the conflict;
//! - `TestUnknownField`'s `diff`: its error is one of patch creation;
//! - `sortMergeListTestCaseData` (`TestSortMergeLists`): it tests the tests' normaliser;
//! - `TestStrategicMergePatch`'s `bad struct` and `nil struct` (a Go type given as the schema;
//!   the server always has one) and `bad original` (the server's original is its stored
//!   object). Its `bad patch` is a body that is not JSON: kube-apiserver decodes the body
//!   before apimachinery sees it, so it answers Go's decoding error, 400, checked here through
//!   [`apply_patch`] ([`patch_that_is_not_json_is_refused_as_kube_decodes_it`]).

use super::*;

const CASES: &str = include_str!("../testdata/strategicpatch/cases.json");
const SWAGGER: &str = include_str!("../testdata/strategicpatch/swagger-merge-item.json");

/// The definitions of `swagger-merge-item.json`.
fn definitions() -> &'static Map<String, Value> {
    static DEFINITIONS: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
    DEFINITIONS
        .get_or_init(|| {
            let mut swagger: Value = serde_json::from_str(SWAGGER).unwrap();
            swagger["definitions"].take()
        })
        .as_object()
        .unwrap()
}

/// The tests' type, `mergeItem`.
fn merge_item() -> Ty<'static> {
    Ty::root(definitions(), "mergeItem")
}

/// A YAML text of the tables as sigs.k8s.io/yaml reads it (nothing: `null`).
fn yaml(text: &str) -> Value {
    if text.trim().is_empty() {
        return Value::Null;
    }
    let json = crate::yaml::json_from_yaml_body(text.as_bytes())
        .unwrap_or_else(|error| panic!("{text}: {error:?}"));
    serde_json::from_slice(&json).unwrap()
}

/// A JSON text of the tables.
fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|error| panic!("{text}: {error}"))
}

/// Upstream's `sortMergeListsByName` (its tests' normaliser) on a decoded map: `$retainKeys`
/// and `$deleteFromPrimitiveList/` lists sorted; in every map reached through maps and merging
/// lists, each merging list sorted: maps by their merge key's value as `%v` prints it (after
/// normalising each), scalars deduplicated and sorted by `%v`. Other lists are left as they
/// are, and not entered.
fn sort_merge_lists(value: &Value, ty: Ty<'_>) -> Value {
    let Value::Object(map) = value else {
        return value.clone();
    };
    let by_text = |items: &mut Vec<Value>| items.sort_by_cached_key(go_text);
    map.iter()
        .map(|(key, value)| {
            let value = match value {
                Value::Array(items)
                    if key == RETAIN_KEYS || key.starts_with(DELETE_FROM_PRIMITIVE_LIST) =>
                {
                    let mut items = items.clone();
                    by_text(&mut items);
                    Value::Array(items)
                }
                _ if key.starts_with('$') => value.clone(),
                Value::Object(_) => sort_merge_lists(value, ty.child(key)),
                Value::Array(items) if list_strategy(ty.child(key)) != ListStrategy::Replace => {
                    let item_ty = ty.child(key).items_or_self();
                    let mut items: Vec<Value> = items.clone();
                    if items.first().is_some_and(Value::is_object) {
                        items = items
                            .iter()
                            .map(|item| sort_merge_lists(item, item_ty))
                            .collect();
                        let merge_key = ty.child(key).patch_markers().1.unwrap_or_default();
                        items.sort_by_cached_key(|item| {
                            go_text(item.get(merge_key).unwrap_or(&Value::Null))
                        });
                    } else {
                        let mut unique: Vec<Value> = Vec::new();
                        for item in items {
                            if !unique.contains(&item) {
                                unique.push(item);
                            }
                        }
                        items = unique;
                        by_text(&mut items);
                    }
                    Value::Array(items)
                }
                _ => value.clone(),
            };
            (key.clone(), value)
        })
        .collect::<Map<String, Value>>()
        .into()
}

/// What a case expects.
enum Expected {
    Object(Value),
    /// An error, 500 without a reason, whose text contains this.
    ErrorContaining(String),
}

struct Case {
    name: String,
    original: Value,
    patch: Value,
    expected: Expected,
}

/// The cases of the vendored tables, and the names of those left out with the reason.
fn cases() -> (Vec<Case>, Vec<(String, &'static str)>) {
    let data: Value = json(CASES);
    let mut ported = Vec::new();
    let mut skipped = Vec::new();
    let ty = merge_item();
    let text =
        |case: &Value, field: &str| case.get(field).and_then(Value::as_str).map(str::to_owned);

    // The YAML tables of maps, normalised as the Go test normalises them.
    for table in [
        "createStrategicMergePatchTestCaseData",
        "customStrategicMergePatchTestCaseData",
    ] {
        let cases = yaml(data["tables"][table].as_str().unwrap());
        for case in cases["testCases"].as_array().unwrap() {
            let description = case["description"].as_str().unwrap();
            let field = |name: &str| case.get(name).filter(|value| !value.is_null());
            let sorted = |value: Option<&Value>| {
                value.map_or(Value::Null, |value| sort_merge_lists(value, ty))
            };
            let two_way_result = field("twoWayResult").or_else(|| field("modified"));
            match (field("twoWay"), two_way_result) {
                (Some(patch), Some(result)) => ported.push(Case {
                    name: format!("{table}: {description} (two-way)"),
                    original: sorted(field("original")),
                    patch: sorted(Some(patch)),
                    expected: Expected::Object(sorted(Some(result))),
                }),
                _ => skipped.push((
                    format!("{table}: {description} (two-way)"),
                    "no two-way patch or result",
                )),
            }
            if table == "customStrategicMergePatchTestCaseData" {
                continue;
            }
            match (field("threeWay"), field("result")) {
                (Some(patch), Some(result)) => ported.push(Case {
                    name: format!("{table}: {description} (three-way)"),
                    original: sorted(field("current")),
                    patch: sorted(Some(patch)),
                    expected: Expected::Object(sorted(Some(result))),
                }),
                _ if description.contains("conflict") => skipped.push((
                    format!("{table}: {description} (three-way)"),
                    "a conflict patch creation detects, no result to apply",
                )),
                _ => panic!("{table}: {description}: a three-way case without patch or result"),
            }
        }
    }

    // The YAML texts, as they are.
    for table in [
        "strategicMergePatchRawTestCases",
        "customStrategicMergePatchRawTestCases",
        "replaceRawExtensionPatchTestCases",
    ] {
        for case in data["rawTables"][table].as_array().unwrap() {
            let description = text(case, "Description").unwrap();
            let field = |name: &str| yaml(&text(case, name).unwrap_or_default());
            let error = text(case, "ExpectedError").filter(|error| !error.is_empty());
            let two_way_result = text(case, "TwoWayResult")
                .filter(|result| !result.trim().is_empty())
                .map_or_else(|| field("Modified"), |result| yaml(&result));
            ported.push(Case {
                name: format!("{table}: {description} (two-way)"),
                original: field("Original"),
                patch: field("TwoWay"),
                expected: match &error {
                    Some(error) => Expected::ErrorContaining(error.clone()),
                    None => Expected::Object(two_way_result),
                },
            });
            if table == "customStrategicMergePatchRawTestCases" {
                continue;
            }
            let result = text(case, "Result").filter(|result| !result.trim().is_empty());
            match result {
                Some(result) => ported.push(Case {
                    name: format!("{table}: {description} (three-way)"),
                    original: field("Current"),
                    patch: field("ThreeWay"),
                    expected: match &error {
                        Some(error) => Expected::ErrorContaining(error.clone()),
                        None => Expected::Object(yaml(&result)),
                    },
                }),
                None if description.contains("conflict") => skipped.push((
                    format!("{table}: {description} (three-way)"),
                    "a conflict patch creation detects, no result to apply",
                )),
                None => panic!("{table}: {description}: a three-way case without result"),
            }
        }
    }

    // The map literals of two test functions.
    for (name, case) in data["mapTables"]["TestNumberConversion"]
        .as_object()
        .unwrap()
    {
        ported.push(Case {
            name: format!("TestNumberConversion: {name}"),
            original: json(&text(case, "Old").unwrap()),
            patch: json(&text(case, "ExpectedPatch").unwrap()),
            expected: Expected::Object(json(&text(case, "ExpectedResult").unwrap())),
        });
    }
    for (name, case) in data["mapTables"]["TestUnknownField"].as_object().unwrap() {
        for (direction, original, patch, result, error) in [
            (
                "two-way",
                "Original",
                "ExpectedTwoWay",
                "ExpectedTwoWayResult",
                "ExpectedTwoWayErr",
            ),
            (
                "three-way",
                "Current",
                "ExpectedThreeWay",
                "ExpectedThreeWayResult",
                "ExpectedThreeWayErr",
            ),
        ] {
            let name = format!("TestUnknownField: {name} ({direction})");
            if text(case, error).is_some() {
                skipped.push((name, "an error of patch creation"));
                continue;
            }
            ported.push(Case {
                name,
                original: json(&text(case, original).unwrap()),
                patch: json(&text(case, patch).unwrap()),
                expected: Expected::Object(json(&text(case, result).unwrap())),
            });
        }
    }
    skipped.push((
        "sortMergeListTestCaseData (TestSortMergeLists)".to_owned(),
        "tests the tests' normaliser, not the apply",
    ));
    skipped.push((
        "TestStrategicMergePatch: bad struct, nil struct".to_owned(),
        "a Go type as the schema; the server always has one",
    ));
    skipped.push((
        "TestStrategicMergePatch: bad original".to_owned(),
        "the server's original is its stored object",
    ));
    (ported, skipped)
}

/// Goal: every apply case of apimachinery's strategic merge patch tests gives upstream's
/// patched object, or upstream's error as kube-apiserver answers it (500 without a reason,
/// the error's text). All cases run; the failures are listed together.
#[test]
fn upstream_tables_as_strategic_merge_applies_them() {
    let (cases, skipped) = cases();
    let mut failures = Vec::new();
    for case in &cases {
        let outcome = strategic_merge_patch(&case.original, &case.patch, merge_item());
        let failure = match (&case.expected, outcome) {
            (Expected::Object(expected), Ok(got)) if &got == expected => None,
            (Expected::Object(expected), outcome) => {
                Some(format!("expected {expected}, got {outcome:?}"))
            }
            (Expected::ErrorContaining(text), Err(error))
                if error.code == 500
                    && error.reason.is_empty()
                    && error.message.contains(text.as_str())
                    && is_kube_patch_500(&error) =>
            {
                None
            }
            (Expected::ErrorContaining(text), outcome) => Some(format!(
                "expected a 500 without a reason containing {text:?}, got {outcome:?}"
            )),
        };
        if let Some(failure) = failure {
            failures.push(format!(
                "{}\n  original {}\n  patch    {}\n  {failure}",
                case.name, case.original, case.patch
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases differ:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
    // The tables as vendored: a new version of them is counted again.
    assert_eq!((cases.len(), skipped.len()), (297, 5), "{skipped:#?}");
}

/// Goal: `TestStrategicMergePatch`'s `bad patch`, a body that is not JSON, is refused as
/// kube-apiserver refuses it: it decodes the body itself before apimachinery sees it, so the
/// answer is Go's decoding error, 400 (apimachinery's own `invalid JSON document` is never
/// seen).
#[test]
fn patch_that_is_not_json_is_refused_as_kube_decodes_it() {
    let def = crate::resources::builtin_resources()
        .into_iter()
        .find(|def| def.plural == "configmaps")
        .unwrap();
    let original =
        serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}});
    let error = apply_patch(
        &def,
        PatchType::StrategicMerge,
        &original,
        b"<THIS IS NOT JSON>",
    )
    .unwrap_err();
    assert_eq!(error.code, 400, "{error:?}");
    assert_eq!(
        error.message,
        "invalid character '<' looking for beginning of value"
    );
}

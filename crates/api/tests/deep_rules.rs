//! A CRD's `x-kubernetes-validations` rules on an object nested `d` levels, a cheap rule at
//! every level, are accepted as kube-apiserver accepts them (kube reads `self.next` lazily, a
//! field selection, so each level costs a few units of its budget), and the work is linear in
//! `d`, counted as the bytes the checks allocate (dhat's counter: deterministic, no timing),
//! about twice as many for twice the depth. Before, each level's `self` was converted whole
//! and charged 2 per byte of its subtree: `d²` work, and past ~1,000 levels the object ran out
//! of the budget (`validation failed due to running out of cost budget`). A rule false at
//! every level is a cause at every level, past the causes an answer carries only counted (each
//! written out is a path of up to `d` steps: 338 MB at 4,000 levels).
//!
//! One test function only: dhat allows one profiler per process at a time.

use serde_json::{Map, Value, json};
use watchkeeper_api::cel_rules::{RuleTree, check};

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

/// A schema of `levels` objects, each with the property `next` (the last one's an integer)
/// and `rules` (each level's own copy).
fn schema(levels: usize, rules: &Value) -> Value {
    // Moved in, level by level (`json!` would copy the schema below at every level).
    (0..levels).fold(json!({"type": "integer"}), |below, _| {
        Value::Object(Map::from_iter([
            ("type".to_owned(), json!("object")),
            (
                "properties".to_owned(),
                Value::Object(Map::from_iter([("next".to_owned(), below)])),
            ),
            ("x-kubernetes-validations".to_owned(), rules.clone()),
        ]))
    })
}

/// `{"next": {"next": ... leaf}}`, `levels` objects deep.
fn object(levels: usize, leaf: u64) -> Value {
    (0..levels).fold(json!(leaf), |below, _| {
        Value::Object(Map::from_iter([("next".to_owned(), below)]))
    })
}

/// The bytes `check` allocates on objects `levels` deep (an update from one whose leaf is
/// `old` when given), with its causes.
fn checked(levels: usize, rules: &Value, old: Option<u64>) -> (Vec<String>, u64) {
    let schema = schema(levels, rules);
    let tree = RuleTree::of(&schema).unwrap();
    let new = object(levels, 1);
    let old = old.map(|leaf| object(levels, leaf));
    let before = dhat::HeapStats::get().total_bytes;
    let causes = check(&schema, &tree, &new, old.as_ref());
    let bytes = dhat::HeapStats::get().total_bytes - before;
    let causes = causes
        .into_iter()
        .map(|(field, detail, _)| format!("{field}: {detail}"))
        .collect();
    // Dropped on a stack with room for them: serde_json's drop recurses per level.
    watchkeeper_core::stack::grow(|| drop((schema, tree, new, old)));
    (causes, bytes)
}

#[test]
fn rules_at_every_level_of_a_deep_object_cost_work_linear_in_its_depth() {
    let _profiler = dhat::Profiler::builder().testing().build();
    // On a server thread's stack, as the server runs the checks.
    stacker::grow(watchkeeper_core::stack::THREAD_STACK, || {
        let cases = [
            (
                "a selection",
                json!([{"rule": "has(self.next) || true"}]),
                None,
            ),
            (
                "a transition rule",
                json!([{"rule": "has(oldSelf.next) == has(self.next)"}]),
                Some(2),
            ),
            (
                "a rule and an optional transition rule",
                json!([
                    {"rule": "size(self) == 1"},
                    {"rule": "oldSelf.hasValue() || true", "optionalOldSelf": true},
                ]),
                Some(2),
            ),
            // False at every level but the last, on an update that changes nothing: each
            // level's failure is dropped (ratcheting), its path never written.
            (
                "a failing rule, ratcheted",
                json!([{"rule": "!has(self.next)"}]),
                Some(1),
            ),
            // False at every level, on a create: a cause at each level, the first
            // `--max-invalid-causes` (1,000) written, the others only counted.
            ("a failing rule", json!([{"rule": "!has(self.next)"}]), None),
        ];
        for (what, rules, old) in &cases {
            // Once first, for what the first use initializes (the compiled rules, kept).
            checked(1, rules, *old);
            let mut counted = Vec::new();
            for levels in [1_000, 2_000, 4_000] {
                let (causes, bytes) = checked(levels, rules, *old);
                if *what == "a failing rule" {
                    assert_eq!(causes.len(), levels, "{what}");
                    let written = watchkeeper_api::error::INVALID_CAUSES_MAX;
                    assert_eq!(
                        causes[written - 1],
                        format!(
                            "{}: Invalid value: \"object\": failed rule: !has(self.next)",
                            vec!["next"; written - 1].join(".")
                        )
                    );
                    if levels > written {
                        assert_eq!(causes[written], ": ", "{what}: only counted");
                    }
                } else {
                    assert!(causes.is_empty(), "{what}, {levels} levels: {causes:?}");
                }
                eprintln!("{what}: {bytes} bytes at {levels} levels");
                counted.push(bytes);
            }
            assert!(
                counted[2] < 3 * counted[1],
                "{what}: {} bytes at 2,000 levels, {} at 4,000",
                counted[1],
                counted[2]
            );
        }
    });
}

//! Work on objects nested `d` levels is linear in `d`, counted as the allocations it makes
//! (dhat's counter: deterministic, no timing), about twice as many for twice the depth:
//! - the managed fields of an object (a create's, an update's, a forced apply's): before,
//!   each level's path was inserted into its field set from the root, copying every element
//!   above it, `d²/2` allocations (50 million at the body's 10,000 levels, seconds of CPU for
//!   one write);
//! - the checks of a CRD whose schema nests `d` levels, in bytes: before, each level's field
//!   path was a copy of its parent's text with its own step, `d²/2` steps of text per walk,
//!   and each level's `default` was checked against a copy of the level's whole subtree.
//!
//! One test function only: dhat allows one profiler per process at a time.

use serde_json::{Map, Value, json};
use watchkeeper_api::apply::{self, Base, Managers, Writer, typed};
use watchkeeper_api::{builtin_resources, crd};

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

/// A ConfigMap whose `spec` (a field its schema does not declare: deduced, every level a
/// member of the field set) is `{"a": {"a": ... leaf}}`, `levels` maps deep.
fn deep_config_map(levels: usize, leaf: u64) -> Value {
    // Moved in, level by level (`json!` would copy the value below at every level).
    let spec = (0..levels).fold(json!(leaf), |below, _| {
        Value::Object(Map::from_iter([("a".to_owned(), below)]))
    });
    let mut object = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "deep", "namespace": "default"},
    });
    object["spec"] = spec;
    object
}

/// Blocks allocated while `f` runs.
fn allocations<T>(f: impl FnOnce() -> T) -> (T, u64) {
    let before = dhat::HeapStats::get().total_blocks;
    let result = f();
    (result, dhat::HeapStats::get().total_blocks - before)
}

/// Bytes allocated while `f` runs.
fn bytes<T>(f: impl FnOnce() -> T) -> (T, u64) {
    let before = dhat::HeapStats::get().total_bytes;
    let result = f();
    (result, dhat::HeapStats::get().total_bytes - before)
}

/// The bytes the checks of a CRD whose schema nests `levels` levels of `properties` (each
/// with a `default` when `defaults`) allocate.
fn crd_checks(levels: usize, defaults: bool) -> u64 {
    let level = if defaults {
        r#"{"type":"object","default":{},"properties":{"a":"#
    } else {
        r#"{"type":"object","properties":{"a":"#
    };
    let schema = format!(
        "{}{}{}",
        level.repeat(levels),
        r#"{"type":"integer"}"#,
        "}}".repeat(levels)
    );
    let text = format!(
        r#"{{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{{"name":"deeps.example.com"}},"spec":{{"group":"example.com","scope":"Namespaced","names":{{"plural":"deeps","kind":"Deep"}},"versions":[{{"name":"v1","served":true,"storage":true,"schema":{{"openAPIV3Schema":{schema}}}}}]}}}}"#
    );
    let mut object = watchkeeper_api::go_json::parse_stored(text.as_bytes()).unwrap();
    crd::apply_defaults(&mut object);
    let (checked, count) = bytes(|| crd::validate(&object, None));
    assert!(checked.is_ok(), "{checked:?}");
    watchkeeper_core::stack::grow(|| drop(object));
    count
}

/// The allocations of each managed-fields step over an object `levels` deep.
fn steps(levels: usize) -> Vec<(&'static str, u64)> {
    let def = builtin_resources()
        .into_iter()
        .find(|d| d.plural == "configmaps")
        .unwrap();
    let writer = Writer {
        manager: "writer",
        subresource: "",
        schema: None,
    };
    let time = "2026-01-01T00:00:00Z";
    let mut out = Vec::new();
    let old = deep_config_map(levels, 1);
    let (set, count) = allocations(|| typed::field_set(&old, typed::Ty::deduced()).unwrap());
    out.push(("field set", count));
    let (created, count) =
        allocations(|| apply::update(&def, None, &old, Managers::new(), writer, time));
    out.push(("create's managed fields", count));
    let mut old = old;
    apply::set_managed_fields(&mut old, &created);
    let mut new = deep_config_map(levels, 2);
    let ((), count) = allocations(|| {
        apply::update_managed_fields(&def, &old, &mut new, Base::Stored, writer, time);
    });
    out.push(("update's managed fields", count));
    let applier = Writer {
        manager: "applier",
        ..writer
    };
    let config = deep_config_map(levels, 3);
    let (applied, count) =
        allocations(|| apply::apply(&def, Some(&new), &config, applier, true, time).unwrap());
    out.push(("forced apply", count));
    // Dropped on a stack with room for them: serde_json's drop recurses per level.
    watchkeeper_core::stack::grow(|| drop((set, created, old, new, config, applied)));
    out
}

#[test]
fn managed_fields_of_deep_objects_cost_allocations_linear_in_their_depth() {
    let _profiler = dhat::Profiler::builder().testing().build();
    // On a server thread's stack: serde_json's own walks recurse per level.
    stacker::grow(watchkeeper_core::stack::THREAD_STACK, || {
        // Once first, for what the first use initializes (the schemas, kept for the process).
        steps(1);
        let (single, double) = (steps(2_000), steps(4_000));
        for ((step, at_single), (_, at_double)) in single.iter().zip(&double) {
            eprintln!("{step}: {at_single} allocations at 2,000 levels, {at_double} at 4,000");
            assert!(
                *at_double < 3 * *at_single,
                "{step}: {at_single} allocations at 2,000 levels, {at_double} at 4,000"
            );
        }
        for defaults in [false, true] {
            crd_checks(1, defaults);
            let (single, double) = (crd_checks(1_000, defaults), crd_checks(2_000, defaults));
            let what = if defaults {
                " (a default at every level)"
            } else {
                ""
            };
            eprintln!("CRD checks{what}: {single} bytes at 1,000 levels, {double} at 2,000");
            assert!(
                double < 3 * single,
                "CRD checks{what}: {single} bytes at 1,000 levels, {double} at 2,000"
            );
        }
    });
}

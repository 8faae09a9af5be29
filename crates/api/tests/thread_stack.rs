//! The walks serde_json makes over a `Value` by itself (a conversion, a clone, a comparison,
//! writing, a drop) recurse once per level and never check their stack, so every server
//! thread that handles objects is started with [`THREAD_STACK`] bytes of stack (see
//! `watchkeeper_core::stack`, whose figures for the server's own paths come from
//! `crates/bench/scripts/deep_stack.py`). Here: the deepest object a server holds — a body at
//! Go's 10,000 levels plus its managed fields, [`STORED_MAX_DEPTH`] — goes through each of
//! those walks on half that stack, in the profile the tests are built in (the constant
//! follows the profile: a debug build's frames are larger). A walk that overflows aborts the
//! test binary.

use serde_json::Value;
use watchkeeper_api::go_json::{STORED_MAX_DEPTH, parse_stored};
use watchkeeper_core::stack::THREAD_STACK;

/// The deepest stored object of one shape: nested objects, nested arrays, or both in turn.
fn deepest(shape: &str) -> String {
    let levels = STORED_MAX_DEPTH - 1;
    let (open, close) = match shape {
        "objects" => ("{\"a\":".repeat(levels), "}".repeat(levels)),
        "arrays" => ("[".repeat(levels), "]".repeat(levels)),
        _ => ("{\"a\":[".repeat(levels / 2), "]}".repeat(levels / 2)),
    };
    format!("{{\"b\":{open}1{close}}}")
}

/// Runs `walk` over the deepest object of each shape, on a thread of half a server thread's
/// stack.
fn on_half_a_server_stack(walk: fn(&str, Value)) {
    for shape in ["objects", "arrays", "mixed"] {
        std::thread::Builder::new()
            .stack_size(THREAD_STACK / 2)
            .spawn(move || {
                let text = deepest(shape);
                let value = parse_stored(text.as_bytes()).expect("the deepest stored object");
                walk(&text, value);
            })
            .expect("a thread")
            .join()
            .expect("the walks finished");
    }
}

#[test]
fn a_conversion_of_the_deepest_object_fits_half_a_server_stack() {
    on_half_a_server_stack(|_, value| {
        let converted: Value = serde_json::from_value(value).unwrap();
        assert!(converted.get("b").is_some());
    });
}

#[test]
fn a_clone_and_a_comparison_of_the_deepest_object_fit_half_a_server_stack() {
    on_half_a_server_stack(|_, value| {
        let copy = value.clone();
        assert!(copy == value);
    });
}

#[test]
fn writing_the_deepest_object_fits_half_a_server_stack() {
    on_half_a_server_stack(|text, value| {
        assert_eq!(serde_json::to_vec(&value).unwrap(), text.as_bytes());
        assert_eq!(value.to_string(), text);
    });
}

/// A strategic merge patch as deep as a body may be (`JSON_NESTING_MAX`), of each shape,
/// placed where the object has nothing (its `null` members and `$patch` maps dropped level by
/// level) and merged into an object as deep (a merge per level), on half a server thread's
/// stack; the result is the patch's value.
#[test]
fn a_strategic_merge_of_the_deepest_body_fits_half_a_server_stack() {
    use watchkeeper_api::patch::{JSON_NESTING_MAX, PatchType, apply_patch};
    let def = watchkeeper_api::builtin_resources()
        .into_iter()
        .find(|def| def.plural == "configmaps")
        .unwrap();
    for shape in ["objects", "arrays", "mixed"] {
        let def = def.clone();
        std::thread::Builder::new()
            .stack_size(THREAD_STACK / 2)
            .spawn(move || {
                let levels = JSON_NESTING_MAX - 1;
                let (open, close) = match shape {
                    "objects" => ("{\"a\":".repeat(levels), "}".repeat(levels)),
                    "arrays" => ("[".repeat(levels), "]".repeat(levels)),
                    _ => ("{\"a\":[".repeat(levels / 2), "]}".repeat(levels / 2)),
                };
                let body = |leaf: u8| format!("{{\"b\":{open}{leaf}{close}}}");
                let object = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "deep"}});
                let patch = body(2);
                let expected = parse_stored(patch.as_bytes()).unwrap();
                let placed =
                    apply_patch(&def, PatchType::StrategicMerge, &object, patch.as_bytes())
                        .unwrap();
                assert!(placed["b"] == expected["b"]);
                let merged =
                    apply_patch(&def, PatchType::StrategicMerge, &placed, body(3).as_bytes())
                        .unwrap();
                assert!(merged["b"] != expected["b"]);
            })
            .expect("a thread")
            .join()
            .expect("the walks finished");
    }
}

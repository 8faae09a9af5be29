//! The JSON patch "copy bomb" (a ~1 MiB patch that adds a 1 MiB value, then copies the growing
//! map into itself, doubling the document per operation: 2^15 MiB at 15 copies) is refused
//! with a Status and its peak heap allocation stays within the documented bound
//! (`original + patch + copy limit`, see `watchkeeper_api::patch`), measured with dhat's
//! allocation counter: deterministic, no timing.
//!
//! One test function only: dhat allows one profiler per process at a time.

use serde_json::{Value, json};
use watchkeeper_api::{
    JSON_PATCH_COPY_BYTES_MAX, PatchLimits, PatchType, apply_patch, apply_patch_with_limits,
    builtin_resources,
};

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

const MIB: usize = 1024 * 1024;

fn bomb(copies: usize) -> Vec<u8> {
    // `/spec` is not a ConfigMap field, so the schema check lets any shape through there.
    let mut operations =
        vec![json!({"op": "add", "path": "/spec", "value": {"a": "x".repeat(MIB)}})];
    for i in 0..copies {
        operations.push(json!({"op": "copy", "from": "/spec", "path": format!("/spec/c{i}")}));
    }
    serde_json::to_vec(&operations).unwrap()
}

/// Peak bytes allocated while `f` runs, over what was live when it started.
fn peak_during<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let before = dhat::HeapStats::get();
    let result = f();
    let after = dhat::HeapStats::get();
    // max_bytes is the peak since the profiler started; everything the setup allocated is
    // freed or counted in curr_bytes before `f`, so the growth is the peak over that.
    (result, after.max_bytes.saturating_sub(before.curr_bytes))
}

#[test]
fn copy_bomb_is_refused_within_the_memory_bound() {
    let _profiler = dhat::Profiler::builder().testing().build();
    let def = builtin_resources()
        .into_iter()
        .find(|d| d.plural == "configmaps")
        .unwrap();
    let original = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "target", "namespace": "default"},
        "data": {"k": "v"}
    });
    let original_size = serde_json::to_vec(&original).unwrap().len();

    // 15 doublings of 1 MiB would be 32 GiB.
    let patch = bomb(15);
    let (result, peak) = peak_during(|| apply_patch(&def, PatchType::Json, &original, &patch));
    let error = result.map(drop).unwrap_err();
    assert_eq!(error.code, 422);
    assert_eq!(error.reason, "Invalid");
    assert_eq!(
        error.message,
        "the server rejected our request due to an error in our request"
    );
    let cause = error.details.as_ref().unwrap()["causes"][0]["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        cause.starts_with("Unable to complete the copy, the accumulated size increase of copy is ")
            && cause.ends_with(&format!("exceeding the limit {JSON_PATCH_COPY_BYTES_MAX}")),
        "{cause}"
    );
    // The bound: the patch text is given; decoding it holds one more copy of it (plus the
    // parser's slack), the document holds at most original + patch + copy limit, and the copy
    // that would pass the limit is never cloned.
    let bound = 2 * patch.len() + original_size + patch.len() + JSON_PATCH_COPY_BYTES_MAX + MIB;
    eprintln!(
        "copy bomb (15 copies, patch {} bytes): peak {peak} bytes, bound {bound} bytes",
        patch.len()
    );
    assert!(peak <= bound, "peak {peak} bytes > bound {bound} bytes");

    // The limit is the server's to set: a smaller one refuses sooner, with its own figure.
    let limits = PatchLimits {
        copy_bytes_max: MIB / 2,
    };
    let (result, peak_small) =
        peak_during(|| apply_patch_with_limits(&def, PatchType::Json, &original, &bomb(1), limits));
    let error = result.map(drop).unwrap_err();
    assert_eq!(error.code, 422);
    let cause = error.details.as_ref().unwrap()["causes"][0]["message"].clone();
    assert!(
        cause
            .as_str()
            .unwrap()
            .ends_with(&format!("exceeding the limit {}", MIB / 2)),
        "{cause}"
    );
    assert!(peak_small <= 4 * MIB + MIB / 2, "{peak_small}");

    // Copies under the limit still apply.
    let ok = apply_patch(&def, PatchType::Json, &original, &bomb(1))
        .map_err(|e| e.code)
        .unwrap();
    assert_eq!(ok["spec"]["c0"]["a"].as_str().map(str::len), Some(MIB));
    assert_eq!(ok["spec"]["a"], ok["spec"]["c0"]["a"]);
    assert_eq!(ok["data"]["k"], Value::from("v"));
}

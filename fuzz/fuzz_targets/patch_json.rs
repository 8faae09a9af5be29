#![no_main]
//! Fuzz target `patch_json`: see fuzz/README.md and `watchkeeper_fuzz::patch_json`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| watchkeeper_fuzz::patch_json(data));

#![no_main]
//! Fuzz target `patch_strategic`: see fuzz/README.md and `watchkeeper_fuzz::patch_strategic`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| watchkeeper_fuzz::patch_strategic(data));

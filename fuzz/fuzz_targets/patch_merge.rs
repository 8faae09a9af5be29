#![no_main]
//! Fuzz target `patch_merge`: see fuzz/README.md and `watchkeeper_fuzz::patch_merge`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| watchkeeper_fuzz::patch_merge(data));

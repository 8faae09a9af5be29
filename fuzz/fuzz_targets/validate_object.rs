#![no_main]
//! Fuzz target `validate_object`: see fuzz/README.md and `watchkeeper_fuzz::validate_object`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| watchkeeper_fuzz::validate_object(data));

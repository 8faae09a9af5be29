#![no_main]
//! Fuzz target `validate_schema`: see fuzz/README.md and `watchkeeper_fuzz::validate_schema`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| watchkeeper_fuzz::validate_schema(data));

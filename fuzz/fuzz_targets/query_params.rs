#![no_main]
//! Fuzz target `query_params`: see fuzz/README.md and `watchkeeper_fuzz::query_params`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| watchkeeper_fuzz::query_params(data));

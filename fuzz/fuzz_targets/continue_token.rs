#![no_main]
//! Fuzz target `continue_token`: see fuzz/README.md and `watchkeeper_fuzz::continue_token`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| watchkeeper_fuzz::continue_token(data));

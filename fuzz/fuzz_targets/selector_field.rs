#![no_main]
//! Fuzz target `selector_field`: see fuzz/README.md and `watchkeeper_fuzz::selector_field`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| watchkeeper_fuzz::selector_field(data));

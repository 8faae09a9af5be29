#![no_main]
//! Fuzz target `selector_label`: see fuzz/README.md and `watchkeeper_fuzz::selector_label`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| watchkeeper_fuzz::selector_label(data));

#![no_main]
//! Fuzz target `watch_encoder`: see fuzz/README.md and `watchkeeper_fuzz::watch_encoder`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| watchkeeper_fuzz::watch_encoder(data));

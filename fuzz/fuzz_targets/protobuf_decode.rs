#![no_main]
//! Fuzz target `protobuf_decode`: see fuzz/README.md and `watchkeeper_fuzz::protobuf_decode`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| watchkeeper_fuzz::protobuf_decode(data));

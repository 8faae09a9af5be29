//! Integration tests of watchkeeper-store: the conformance suite on every backend,
//! model-based tests, the embedded crash test and etcd-specific tests.
//!
//! The etcd tests need `WATCHKEEPER_TEST_ETCD` and `ETCD_BINARY`; run them through
//! `scripts/test`, which starts a test etcd and sets both.

mod common;
mod conformance;
mod crash;
mod etcd_extra;
mod model;
mod progress;
mod protoc;
mod quota;

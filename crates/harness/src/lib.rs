//! # watchkeeper-harness
//!
//! The model-based correctness harness of watchkeeper (issue #7): a missed or duplicated watch
//! event is the worst bug this project can have, so every run here is checked by an
//! independent model.
//!
//! - [`checker`]: pure. Input: the committed write history and a recording of every watch
//!   session, read and acknowledged write. Output: violations, each naming the guarantee it
//!   breaks (Ordered, Unique, Atomic, Reliable, Resumable, Bookmarkable, Initial state,
//!   Selection, Honest 410, Linearizable reads, Durable).
//! - [`inprocess`]: seeded random workloads on the real core, stepped on a virtual clock;
//!   deterministic, many seeds per run; a failing seed prints the command that reproduces it.
//! - [`e2e`]: the running server over HTTP (memory, embedded and etcd stores) with many
//!   concurrent watchers and writers and faults; the committed history is read back from the
//!   store.
//! - [`cluster`]: a three-member etcd cluster with two instances on it, under the
//!   end-to-end workload and member faults (kill -9, SIGSTOP, compaction).
//! - [`soak`]: many seeds for as long as asked, with a summary.
//!
//! The guarantees are the core's [`watchkeeper_core::Guarantee`]; the HTTP client, the server
//! fixture and the seeded generator ([`rng`]) come from the shared test kit
//! (`watchkeeper-testkit`).

pub mod checker;
pub mod cluster;
pub mod e2e;
pub mod etcd;
pub mod inprocess;
pub use watchkeeper_testkit::rng;
pub mod soak;

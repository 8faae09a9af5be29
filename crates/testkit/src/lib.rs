//! # watchkeeper-testkit
//!
//! What the server's tests, the correctness harness and the benchmarks share, so each exists
//! once:
//! - [`http`]: requests with hyper's client, on a connection of their own or on one keep-alive
//!   connection; the answer's status, headers and whole body.
//! - [`watch`]: a watch stream over a raw socket, for tests that must control every read
//!   (never read, stall, read only what has arrived) or see the exact bytes and end.
//! - [`raw`]: exact bytes on a socket for what a client library would refuse to send or hide
//!   (malformed, oversized or never-completed requests) and answers read as received.
//! - [`fixture`]: a server on a free loopback port, ready before it is returned, and the
//!   objects tests write.
//! - [`rng`]: a seeded generator: the same seed gives the same choices on every machine.
//! - [`ports`]: loopback ports a server can be restarted on (below the ephemeral range).
//! - [`etcd_process`]: an etcd process of a test's own, returned once it serves.
//!
//! Nothing here reads a clock to pace a test or times out on its own: every wait is bounded
//! by its caller's hang guard.

pub mod etcd_process;
pub mod fixture;
pub mod http;
pub mod ports;
pub mod raw;
pub mod rng;
pub mod watch;

pub use fixture::{configmap, loopback, start_configured, start_server};
pub use http::{Conn, Response, request};
pub use rng::Rng;
pub use watch::RawWatch;

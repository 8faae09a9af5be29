//! The caches on real threads: one [`CacheDriver`] per resource (see [`driver`]).

pub mod driver;

pub use driver::{CacheDriver, Clock, Input};

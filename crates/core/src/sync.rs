//! The synchronisation primitives of the structures the core shares across threads — the
//! watch queue, the drain signal, the mailboxes, the progress mark and the shared cache data:
//! std's, or [loom](https://docs.rs/loom)'s when the crate is built with
//! `RUSTFLAGS="--cfg watchkeeper_loom"`. Under loom, the models in `loom_models` run every
//! interleaving of those structures' operations that the memory model allows and check that no
//! wake-up is lost (`scripts/test` runs them; see that module for what each model proves).
//!
//! A private cfg rather than the conventional `loom` keeps dependencies that react to
//! `cfg(loom)` out of it. Everything else of the core keeps std's types: metrics counters and
//! the once-set hooks (installed before any concurrency) are not part of any protocol.

#[cfg(watchkeeper_loom)]
pub(crate) use loom::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
#[cfg(not(watchkeeper_loom))]
pub(crate) use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Atomics (see the module docs).
pub(crate) mod atomic {
    #[cfg(watchkeeper_loom)]
    pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
    #[cfg(not(watchkeeper_loom))]
    pub(crate) use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
}

//! Deep recursion kept within the stack it runs on: a walk over an object recurses once per
//! level of nesting, and an object may nest as deep as kube-apiserver reads a body, Go's
//! 10,000 levels (plus the few levels its managed fields add).
//!
//! ## Guarantees
//! - [`deep`] runs its closure on the current stack while more than [`RED_ZONE`] bytes of it
//!   are left, else on a new stack of [`SEGMENT`] bytes (reserved with `mmap`, touched only
//!   as deep as the walk goes, freed on return): a walk that calls it at every level never
//!   overflows, whatever the depth its input bounds. It checks the stack once every [`EVERY`]
//!   levels (a thread-local read and a comparison), so shallow objects pay nothing
//!   measurable. [`grow`] checks at every call, for walks that do not count their levels.
//! - The walks serde_json makes itself (a `Value`'s drop, clone, comparison, writing) recurse
//!   per level with no such check: in a debug build they take up to about 3 KiB a level
//!   (a clone of nested objects: 10,000 levels needed 32 MiB; a drop 8 MiB, a comparison
//!   16 MiB; a release build at most 4 MiB for any of them). Every thread the server runs
//!   requests, watch encodings or the cache on is therefore started with [`THREAD_STACK`]
//!   bytes of stack (reserved, not touched: a thread's resident stack is what its deepest
//!   walk touched), and [`SEGMENT`] is as large, so such a walk called at any level of an
//!   instrumented walk finds room for a whole object.
//!
//! Bounds: one thread's stack is at most [`THREAD_STACK`] bytes plus, while a walk runs past
//! it, [`SEGMENT`] bytes per switch (a walk of 10,065 levels switches at most a few times).
//!
//! kube-apiserver has no such concern: Go's goroutine stacks grow on demand (up to Go's 1 GB
//! maximum).

/// Bytes of stack that must be left when [`deep`] checks: [`EVERY`] levels of the largest
/// walk's frames in a debug build (the managed-fields comparison, about 6 KiB a level), with
/// a margin.
pub const RED_ZONE: usize = 512 << 10;

/// Bytes of a new stack [`deep`] switches to: as large as a server thread's
/// ([`THREAD_STACK`]).
pub const SEGMENT: usize = THREAD_STACK;

/// Levels between two checks of [`deep`].
pub const EVERY: usize = 16;

/// Bytes of stack every thread of the server that handles objects is started with (tokio's
/// workers and blocking threads, the cache's dispatcher and workers, the audit writer):
/// room for serde_json's own walks (module docs) over an object nested 10,065 levels in a
/// debug build, 32 MiB measured for the largest, twice over. Reserved address space: what is
/// resident is what the deepest walk on the thread touched.
pub const THREAD_STACK: usize = 128 << 20;

/// Runs `f`, the walk of the level at `depth`, on a stack with room for it (see the module
/// docs).
#[inline]
pub fn deep<R>(depth: usize, f: impl FnOnce() -> R) -> R {
    if depth % EVERY == EVERY - 1 {
        stacker::maybe_grow(RED_ZONE, SEGMENT, f)
    } else {
        f()
    }
}

/// Runs `f`, one level of a recursive walk, on a stack with room for it: [`deep`] for a walk
/// that does not count its levels (a check at every level).
#[inline]
pub fn grow<R>(f: impl FnOnce() -> R) -> R {
    stacker::maybe_grow(RED_ZONE, SEGMENT, f)
}

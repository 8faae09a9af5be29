//! Deep recursion kept within the stack it runs on: a walk over an object recurses once per
//! level of nesting, and a runtime worker's stack (2 MiB) holds only a few hundred levels of
//! the largest walks in a debug build (the managed-fields comparison took about 6 KiB a
//! level and overflowed at 300 levels, aborting the server).
//!
//! ## Guarantees
//! - [`deep`] runs its closure on the current stack while more than [`RED_ZONE`] bytes of it
//!   are left, else on a new stack of [`SEGMENT`] bytes (heap-allocated, freed on return):
//!   a walk that calls it at every level never overflows, whatever the depth its input
//!   bounds. It checks the stack once every [`EVERY`] levels (a thread-local read and a
//!   comparison), so shallow objects pay nothing measurable.
//!
//! kube-apiserver has no such concern: Go's goroutine stacks grow on demand.

/// Bytes of stack that must be left when [`deep`] checks: [`EVERY`] levels of the largest
/// walk's frames in a debug build, with a margin.
pub(crate) const RED_ZONE: usize = 512 << 10;

/// Bytes of a new stack [`deep`] switches to.
pub(crate) const SEGMENT: usize = 8 << 20;

/// Levels between two checks of [`deep`].
pub(crate) const EVERY: usize = 16;

/// Runs `f`, the walk of the level at `depth`, on a stack with room for it (see the module
/// docs).
#[inline]
pub(crate) fn deep<R>(depth: usize, f: impl FnOnce() -> R) -> R {
    if depth % EVERY == EVERY - 1 {
        stacker::maybe_grow(RED_ZONE, SEGMENT, f)
    } else {
        f()
    }
}

/// Runs `f`, one level of a recursive walk, on a stack with room for it: [`deep`] for a walk
/// that does not count its levels (a check at every level).
#[inline]
pub(crate) fn grow<R>(f: impl FnOnce() -> R) -> R {
    stacker::maybe_grow(RED_ZONE, SEGMENT, f)
}

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
//! - The walks serde_json makes itself (a `Value`'s drop, clone, comparison, writing, a
//!   conversion) recurse per level with no such check. Every thread the server runs requests
//!   or watch encodings on is therefore started with [`THREAD_STACK`] bytes of stack
//!   (reserved, not touched: a thread's resident stack is what its deepest walk touched), and
//!   [`SEGMENT`] is as large, so such a walk called at any level of an instrumented walk finds
//!   room for a whole object. Measured with `crates/bench/scripts/deep_stack.py` (every path
//!   of an object nested 10,000 levels: create, get as JSON, YAML and Table, list, watch,
//!   merge and JSON patch, apply, update, arrays; the resident pages of each thread's stack):
//!   a thread touched at most **6.7 MiB** in a release build and **38.4 MiB** in a debug
//!   build, whose frames are larger. serde_json's own walks alone, on the deepest stored
//!   object (`watchkeeper_api`'s `tests/thread_stack.rs`): a conversion 8 MiB release / 12
//!   debug, a clone 3 / 3, writing 1 / 8, a drop 2 / 2.
//!
//! Bounds: one thread's stack is at most [`THREAD_STACK`] bytes plus, while a walk runs past
//! it, [`SEGMENT`] bytes per switch (a walk of 10,065 levels switches at most a few times).
//! What is reserved is that times the threads (a server that served such an object: 5 with
//! [`THREAD_STACK`] and 53 cache threads with [`CACHE_THREAD_STACK`], 266 MiB of address
//! space in a release build — 1.8 GB while the cache threads had [`THREAD_STACK`] too —,
//! none of it resident until touched); what
//! stays resident is what each thread's deepest walk touched, until the thread ends (the
//! blocking pool's after 10 s idle).
//!
//! - A cache's dispatcher and catch-up threads make none of those walks (they move shared
//!   objects and drop them flat, see below) and start with [`CACHE_THREAD_STACK`] bytes.
//! - [`drop_flat`] drops a value without recursion; a cached object nested past
//!   [`FLAT_DROP_DEPTH`] levels is dropped so (`Object`'s `Drop`), on whatever thread lets it
//!   go last — possibly a cache's dispatcher evicting it from its history, one long-lived
//!   thread per served resource — whose stack then keeps no pages a deep drop touched (2 MiB
//!   at 10,000 levels in a release build, per thread, until the thread ends).
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

/// Bytes of stack every thread of the server that walks objects is started with (tokio's
/// workers and blocking threads, the audit writer; a cache's threads need less:
/// [`CACHE_THREAD_STACK`]):
/// room for the walks over an object nested 10,065 levels (module docs) with a margin, in the
/// profile the server is built in: 32 MiB in a release build (the deepest thread touched 6.7
/// MiB), 128 MiB in a debug build (38.4 MiB). Reserved address space: what is resident is
/// what the deepest walk on the thread touched.
pub const THREAD_STACK: usize = if cfg!(debug_assertions) {
    128 << 20
} else {
    32 << 20
};

/// Bytes of stack a cache's dispatcher and catch-up threads are started with (one of each per
/// served resource version, up to 5,000 custom ones): they move shared objects between the
/// history, snapshots and watchers' queues, match selectors (field look-ups, no walk), and
/// drop what the history evicts or a relist replaces — a body nested past
/// [`FLAT_DROP_DEPTH`] without recursion ([`drop_flat`]); they never encode, convert, clone or
/// compare a body (the watch responses encode, on the runtime's threads). Measured with
/// `crates/bench/scripts/deep_stack.py` (every path of a 10,000-level object, a watch on it)
/// and with a history that evicts such objects: **0.02 MiB** resident on every dispatcher in
/// a debug build. 2 MiB (Rust's default) in a release build, 8 MiB in a debug build: a
/// hundredfold margin, and [`THREAD_STACK`] would reserve 16 (release) to 64 (debug) times as
/// much address space per served resource version.
pub const CACHE_THREAD_STACK: usize = if cfg!(debug_assertions) {
    8 << 20
} else {
    2 << 20
};

/// Levels of nesting past which a cached object's body is dropped by [`drop_flat`]: deeper
/// than any built-in kind's objects nest (a Pod's deepest fields are about 12 levels down).
pub const FLAT_DROP_DEPTH: usize = 64;

/// Drops `value` without recursing (serde_json's drop recurses once per level, on the
/// thread's own stack): the maps and arrays still to drop wait in a list, their scalars are
/// dropped as they are reached.
pub fn drop_flat(value: serde_json::Value) {
    use serde_json::Value;
    let container = |value: &Value| matches!(value, Value::Array(_) | Value::Object(_));
    let mut pending = vec![value];
    while let Some(value) = pending.pop() {
        match value {
            Value::Array(items) => pending.extend(items.into_iter().filter(container)),
            Value::Object(map) => {
                pending.extend(map.into_iter().map(|(_, item)| item).filter(container));
            }
            _ => {}
        }
    }
}

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

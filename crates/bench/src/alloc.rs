//! A counting global allocator. The `watchkeeper-bench` binary installs [`Counting`] as its
//! global allocator; the library reads the counters. When it is not installed (library tests),
//! [`installed`] is false and the allocation figures are reported as n/a.
//!
//! Besides the running totals it can track the heap bytes *live* (allocated and not yet freed)
//! and how many live allocations there are of each size ([`track_live`], off by default: it
//! costs two more atomic operations per allocation and per free). The scale suite turns it on
//! to account for an idle watch's memory size by size ([`LiveSizes`]).
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);

/// Whether live bytes and sizes are tracked.
static TRACK: AtomicBool = AtomicBool::new(false);
/// Heap bytes allocated and not freed, counted while [`TRACK`] is on.
static LIVE: AtomicI64 = AtomicI64::new(0);
/// Sizes are counted exactly up to this many bytes (in [`GRAIN`]-byte classes); larger
/// allocations share the last class.
const TRACKED_MAX: usize = 64 * 1024;
/// The width of a size class, bytes.
const GRAIN: usize = 8;
const CLASSES: usize = TRACKED_MAX / GRAIN + 1;
/// Live allocations per size class (`size.div_ceil(GRAIN)`, the last one for anything larger
/// than [`TRACKED_MAX`]).
static LIVE_COUNT: [AtomicI64; CLASSES] = [const { AtomicI64::new(0) }; CLASSES];
/// Live bytes per size class.
static LIVE_BYTES: [AtomicI64; CLASSES] = [const { AtomicI64::new(0) }; CLASSES];

fn class(size: usize) -> usize {
    size.div_ceil(GRAIN).min(CLASSES - 1)
}

fn track(size: usize, sign: i64) {
    if TRACK.load(Ordering::Relaxed) {
        let bytes = sign * size as i64;
        LIVE.fetch_add(bytes, Ordering::Relaxed);
        let class = class(size);
        LIVE_COUNT[class].fetch_add(sign, Ordering::Relaxed);
        LIVE_BYTES[class].fetch_add(bytes, Ordering::Relaxed);
    }
}

/// The system allocator, counting allocations and allocated bytes (reallocations count as one
/// allocation of the new size), and the live bytes by size when [`track_live`] is on.
#[derive(Debug)]
pub struct Counting;

// SAFETY: every call forwards to the system allocator unchanged; the counters are side effects.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        track(layout.size(), 1);
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        track(layout.size(), 1);
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        track(layout.size(), -1);
        // SAFETY: forwarded; `ptr` came from this allocator.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        BYTES.fetch_add(new_size as u64, Ordering::Relaxed);
        track(layout.size(), -1);
        track(new_size, 1);
        // SAFETY: forwarded; `ptr` came from this allocator.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// (allocations, bytes) so far.
#[must_use]
pub fn counts() -> (u64, u64) {
    (
        ALLOCATIONS.load(Ordering::Relaxed),
        BYTES.load(Ordering::Relaxed),
    )
}

/// Whether the counting allocator is installed (anything was counted).
#[must_use]
pub fn installed() -> bool {
    let before = counts().0;
    drop(std::hint::black_box(Box::new(0u64)));
    counts().0 > before
}

/// Starts (or stops) tracking live heap bytes and sizes. Frees of blocks allocated before it
/// started count negatively, so read live figures as differences of two [`LiveSizes`] taken
/// while it was on.
pub fn track_live(on: bool) {
    TRACK.store(on, Ordering::Relaxed);
}

/// Live heap bytes and allocations by size at one moment (see [`track_live`]).
#[derive(Clone, Debug)]
pub struct LiveSizes {
    /// Heap bytes live.
    pub bytes: i64,
    /// Live allocations per size class.
    counts: Vec<i64>,
    /// Live bytes per size class.
    class_bytes: Vec<i64>,
}

/// One size class of a [`LiveSizes`] difference.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct SizeShare {
    /// The largest size in the class, bytes (`None`: larger than 64 KiB).
    pub size: Option<usize>,
    /// Allocations gained per unit (e.g. per stream).
    pub count_per: f64,
    /// Bytes gained per unit.
    pub bytes_per: f64,
}

impl LiveSizes {
    /// The live figures now.
    #[must_use]
    pub fn now() -> LiveSizes {
        LiveSizes {
            bytes: LIVE.load(Ordering::Relaxed),
            counts: LIVE_COUNT
                .iter()
                .map(|c| c.load(Ordering::Relaxed))
                .collect(),
            class_bytes: LIVE_BYTES
                .iter()
                .map(|c| c.load(Ordering::Relaxed))
                .collect(),
        }
    }

    /// The size classes that grew most from `before` to `self`, per `units`, largest bytes
    /// first (at most `top` of them).
    #[must_use]
    pub fn growth_since(&self, before: &LiveSizes, units: usize, top: usize) -> Vec<SizeShare> {
        let units = units.max(1) as f64;
        let mut shares: Vec<SizeShare> = (0..CLASSES)
            .map(|class| SizeShare {
                size: (class < CLASSES - 1).then_some(class * GRAIN),
                count_per: (self.counts[class] - before.counts[class]) as f64 / units,
                bytes_per: (self.class_bytes[class] - before.class_bytes[class]) as f64 / units,
            })
            .filter(|share| share.bytes_per.abs() > 0.0)
            .collect();
        shares.sort_by(|a, b| b.bytes_per.total_cmp(&a.bytes_per));
        shares.truncate(top);
        shares
    }
}

/// Returns freed heap memory to the system (glibc's `malloc_trim(0)`), so that RSS counts
/// what is in use rather than what the allocator keeps cached. A no-op elsewhere.
pub fn trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}

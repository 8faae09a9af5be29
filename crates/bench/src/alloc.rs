//! A counting global allocator. The `watchkeeper-bench` binary installs [`Counting`] as its
//! global allocator; the library reads the counters. When it is not installed (library tests),
//! [`installed`] is false and the allocation figures are reported as n/a.
//!
//! Besides the running totals it can track the heap bytes *live* (allocated and not yet freed)
//! and how many live allocations there are of each size ([`track_live`], off by default: it
//! costs two more atomic operations per allocation and per free). The scale suite turns it on
//! to account for an idle watch's memory size by size ([`LiveSizes`]).
//!
//! While live tracking is on it also keeps the address of every live allocation of
//! [`ADDRESS_MIN`] bytes or more, so that [`resident_by_size`] can tell how much of each such
//! allocation lies on pages that are resident (/proc/self/pagemap): a buffer that is allocated
//! but never written costs heap, not RSS.
//!
//! It can also record where the bytes are allocated ([`record_sites`], off by default): every
//! allocation's call stack is captured (a stack walk per allocation, tens of microseconds in a
//! debug build) and counted per distinct stack; [`Sites::report`] resolves the stacks once at
//! the end and attributes the bytes to the code that asked for them. The recorder's own
//! allocations are not counted anywhere.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};

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

/// Allocations of at least this many bytes have their addresses kept (see the module docs).
pub const ADDRESS_MIN: usize = 16;
/// Slots of the address table (open addressing; 8 MiB).
const ADDRESS_SLOTS: usize = 1 << 20;
/// Probes before an insertion gives up (counted in [`ADDRESSES_MISSED`]).
const ADDRESS_PROBES: usize = 4096;
/// A removed entry (lookups probe past it, insertions reuse it).
const TOMB: usize = 1;
/// Live allocations of [`ADDRESS_MIN`] bytes or more: `size << 47 | address`, 0 for a free slot.
static ADDRESSES: [AtomicUsize; ADDRESS_SLOTS] = [const { AtomicUsize::new(0) }; ADDRESS_SLOTS];
/// Allocations the table had no room for.
static ADDRESSES_MISSED: AtomicU64 = AtomicU64::new(0);

fn address_entry(ptr: *mut u8, size: usize) -> Option<usize> {
    let address = ptr as usize;
    ((ADDRESS_MIN..=TRACKED_MAX).contains(&size) && address < (1 << 47) && address > TOMB)
        .then_some(size << 47 | address)
}

fn address_slot(entry: usize) -> usize {
    let address = entry & ((1 << 47) - 1);
    ((address >> 4).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - 20)) & (ADDRESS_SLOTS - 1)
}

fn remember(ptr: *mut u8, size: usize) {
    let Some(entry) = address_entry(ptr, size) else {
        return;
    };
    let start = address_slot(entry);
    for probe in 0..ADDRESS_PROBES {
        let slot = &ADDRESSES[(start + probe) & (ADDRESS_SLOTS - 1)];
        let current = slot.load(Ordering::Relaxed);
        if (current == 0 || current == TOMB)
            && slot
                .compare_exchange(current, entry, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            return;
        }
    }
    ADDRESSES_MISSED.fetch_add(1, Ordering::Relaxed);
}

fn forget(ptr: *mut u8, size: usize) {
    // The table is emptied when tracking stops (see [`track_live`]).
    if !TRACK.load(Ordering::Relaxed) {
        return;
    }
    let Some(entry) = address_entry(ptr, size) else {
        return;
    };
    let start = address_slot(entry);
    for probe in 0..ADDRESS_PROBES {
        let slot = &ADDRESSES[(start + probe) & (ADDRESS_SLOTS - 1)];
        match slot.load(Ordering::Relaxed) {
            0 => return,
            current if current == entry => {
                let _ = slot.compare_exchange(entry, TOMB, Ordering::Relaxed, Ordering::Relaxed);
                return;
            }
            _ => {}
        }
    }
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
        if recorder_own(layout.size()) {
            // SAFETY: forwarded with the caller's layout.
            return unsafe { System.alloc(layout) };
        }
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        track(layout.size(), 1);
        // SAFETY: forwarded with the caller's layout.
        let ptr = unsafe { System.alloc(layout) };
        if TRACK.load(Ordering::Relaxed) {
            remember(ptr, layout.size());
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if recorder_own(layout.size()) {
            // SAFETY: forwarded with the caller's layout.
            return unsafe { System.alloc_zeroed(layout) };
        }
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        track(layout.size(), 1);
        // SAFETY: forwarded with the caller's layout.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if TRACK.load(Ordering::Relaxed) {
            remember(ptr, layout.size());
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        track(layout.size(), -1);
        // Forgotten before the system may hand the block out again.
        forget(ptr, layout.size());
        // SAFETY: forwarded; `ptr` came from this allocator.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if recorder_own(new_size) {
            // SAFETY: forwarded; `ptr` came from this allocator.
            return unsafe { System.realloc(ptr, layout, new_size) };
        }
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        BYTES.fetch_add(new_size as u64, Ordering::Relaxed);
        track(layout.size(), -1);
        track(new_size, 1);
        forget(ptr, layout.size());
        // SAFETY: forwarded; `ptr` came from this allocator.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if TRACK.load(Ordering::Relaxed) {
            remember(new, new_size);
        }
        new
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
    if !on {
        // Nothing is looked up while tracking is off: frees then skip the table entirely.
        for slot in &ADDRESSES {
            slot.store(0, Ordering::Relaxed);
        }
    }
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

/// The live allocations of one size (of [`ADDRESS_MIN`] bytes or more) and how much of them
/// lies on resident pages ([`resident_by_size`]).
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct Resident {
    /// The allocation size, bytes.
    pub size: usize,
    /// Live allocations of that size.
    pub allocations: u64,
    /// Their bytes that lie on resident pages.
    pub resident_bytes: u64,
}

/// Opens /proc/self/pagemap (before the descriptors run out), for [`resident_by_size`].
#[must_use]
pub fn pagemap() -> Option<std::fs::File> {
    std::fs::File::open("/proc/self/pagemap").ok()
}

/// The live allocations of [`ADDRESS_MIN`] bytes or more made while live tracking was on, by
/// size, with the bytes of each that lie on resident pages (a page shared with a neighbour
/// counts for both); largest resident bytes first. Also the allocations the address table had
/// no room for.
#[must_use]
pub fn resident_by_size(pagemap: &std::fs::File) -> (Vec<Resident>, u64) {
    use std::os::unix::fs::FileExt as _;
    const PAGE: usize = 4096;
    let mut by_size = std::collections::BTreeMap::<usize, Resident>::new();
    for slot in &ADDRESSES {
        let entry = slot.load(Ordering::Relaxed);
        if entry == 0 || entry == TOMB {
            continue;
        }
        let address = entry & ((1 << 47) - 1);
        let size = entry >> 47;
        let mut resident = 0u64;
        let mut page = address / PAGE;
        while page * PAGE < address + size {
            let mut word = [0u8; 8];
            let present = pagemap.read_exact_at(&mut word, (page * 8) as u64).is_ok()
                && u64::from_le_bytes(word) >> 63 == 1;
            if present {
                let from = (page * PAGE).max(address);
                let to = ((page + 1) * PAGE).min(address + size);
                resident += (to - from) as u64;
            }
            page += 1;
        }
        let share = by_size.entry(size).or_insert(Resident {
            size,
            allocations: 0,
            resident_bytes: 0,
        });
        share.allocations += 1;
        share.resident_bytes += resident;
    }
    let mut shares: Vec<Resident> = by_size.into_values().collect();
    shares.sort_by_key(|share| std::cmp::Reverse(share.resident_bytes));
    (shares, ADDRESSES_MISSED.load(Ordering::Relaxed))
}

/// Whether allocation sites are recorded.
static SITES_ON: AtomicBool = AtomicBool::new(false);
/// Allocations and bytes per distinct call stack (return addresses, innermost first).
type Stacks = HashMap<Vec<usize>, (u64, u64)>;

/// The stacks recorded so far (`None` before the first recording).
static SITES: Mutex<Option<Stacks>> = Mutex::new(None);
/// The most frames kept of a stack (the innermost).
const SITE_DEPTH: usize = 80;

thread_local! {
    /// Set while this thread records a site: allocations made then are the recorder's own.
    static RECORDING: Cell<bool> = const { Cell::new(false) };
}

/// Records the current stack for an allocation of `size` bytes when sites are recorded;
/// true when the allocation is the recorder's own (not to be counted).
fn recorder_own(size: usize) -> bool {
    if !SITES_ON.load(Ordering::Relaxed) {
        return false;
    }
    RECORDING
        .try_with(|recording| {
            if recording.get() {
                return true;
            }
            recording.set(true);
            let mut frames = [0usize; SITE_DEPTH];
            let mut depth = 0;
            backtrace::trace(|frame| {
                frames[depth] = frame.ip() as usize;
                depth += 1;
                depth < SITE_DEPTH
            });
            let mut sites = SITES
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let site = sites
                .get_or_insert_with(HashMap::new)
                .entry(frames[..depth].to_vec())
                .or_insert((0, 0));
            site.0 += 1;
            site.1 += size as u64;
            drop(sites);
            recording.set(false);
            false
        })
        .unwrap_or(false)
}

/// Starts recording allocation sites (clearing what was recorded), or stops; see the module
/// docs. Costly: for attribution runs only.
pub fn record_sites(on: bool) {
    if on {
        *SITES
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(HashMap::new());
    }
    SITES_ON.store(on, Ordering::SeqCst);
}

/// The allocation sites recorded so far (stops the recording).
#[must_use]
pub fn take_sites() -> Sites {
    record_sites(false);
    Sites {
        stacks: SITES
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
            .unwrap_or_default(),
    }
}

/// Recorded allocation sites: allocations and bytes per call stack.
#[derive(Debug, Default)]
pub struct Sites {
    stacks: Stacks,
}

/// Frames of the allocator, the recorder and the standard library's allocation plumbing: not
/// where an allocation is asked for.
fn plumbing(name: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "backtrace::",
        "watchkeeper_bench::alloc::",
        "__rust",
        "__rdl",
        "__rg",
        "alloc::",
        "<alloc::",
        "core::",
        "<core::",
        "std::",
        "<std::",
        "hashbrown::",
        "<hashbrown::",
        "bytes::",
        "<bytes::",
    ];
    PREFIXES.iter().any(|prefix| name.starts_with(prefix))
}

/// Whether a frame is watchkeeper's own code (not the bench's): a workspace file (closures
/// and async blocks resolve to short names, but to their file) or a watchkeeper path.
fn ours(frame: &str) -> bool {
    let name = frame.trim_start_matches('<');
    let in_workspace = frame.contains(" (crates/") && !frame.contains(" (crates/bench/");
    in_workspace || (name.starts_with("watchkeeper") && !name.starts_with("watchkeeper_bench::"))
}

impl Sites {
    /// Allocations and bytes recorded in all.
    #[must_use]
    pub fn totals(&self) -> (u64, u64) {
        self.stacks
            .values()
            .fold((0, 0), |(a, b), (count, bytes)| (a + count, b + bytes))
    }

    /// A text report of the recorded sites, every figure divided by `per` (e.g. the PATCHes of
    /// the window): (1) bytes by the innermost watchkeeper function and what it called into
    /// ("site"), (2) bytes inclusive by function (each function counted once per stack: what
    /// it and everything under it allocated), (3) the heaviest stacks, `top` of each.
    #[must_use]
    pub fn report(&self, per: f64, top: usize) -> String {
        let mut names: HashMap<usize, Vec<String>> = HashMap::new();
        let mut resolve = |ip: usize| -> Vec<String> {
            names
                .entry(ip)
                .or_insert_with(|| {
                    let mut found = Vec::new();
                    backtrace::resolve(ip.saturating_sub(1) as *mut std::ffi::c_void, |symbol| {
                        if let Some(name) = symbol.name() {
                            // The workspace's files by their path from `crates/`, others
                            // by their name.
                            let line = symbol
                                .filename()
                                .map(|path| {
                                    let path = path.to_string_lossy();
                                    let shown = match path.find("/crates/") {
                                        Some(at) if !path.contains("/.cargo/") => &path[at + 1..],
                                        _ => path.rsplit('/').next().unwrap_or(&path),
                                    };
                                    format!(" ({shown}:{})", symbol.lineno().unwrap_or(0))
                                })
                                .unwrap_or_default();
                            found.push(format!("{name:#}{line}"));
                        }
                    });
                    if found.is_empty() {
                        found.push(format!("{ip:#x}"));
                    }
                    found
                })
                .clone()
        };
        let (all_count, all_bytes) = self.totals();
        let mut by_site: HashMap<String, (u64, u64)> = HashMap::new();
        let mut inclusive: HashMap<String, (u64, u64)> = HashMap::new();
        let mut stacks: Vec<(u64, u64, Vec<String>)> = Vec::new();
        for (ips, &(count, bytes)) in &self.stacks {
            // Inline frames of one address come innermost first. The recorder's own frames
            // (the stack walk, the allocator) go.
            let mut frames: Vec<String> = ips.iter().flat_map(|&ip| resolve(ip)).collect();
            if let Some(last) = frames
                .iter()
                .rposition(|f| f.contains("watchkeeper_bench::alloc::"))
            {
                frames.drain(..=last);
            }
            let function = |frame: &String| frame.split(" (").next().unwrap_or(frame).to_owned();
            // A function and its file, without the line.
            let place = |frame: &String| match frame.rsplit_once(':') {
                Some((head, line)) if line.ends_with(')') => format!("{head})"),
                _ => frame.clone(),
            };
            let first_ours = frames.iter().position(|f| ours(f));
            let callee = frames[..first_ours.unwrap_or(frames.len())]
                .last()
                .map(function)
                .unwrap_or_default();
            let site = match first_ours {
                Some(at) => format!("{} -> {callee}", frames[at]),
                None => format!(
                    "(no watchkeeper frame) {}",
                    frames
                        .iter()
                        .find(|f| !plumbing(f))
                        .map_or("?", String::as_str)
                ),
            };
            let entry = by_site.entry(site).or_insert((0, 0));
            entry.0 += count;
            entry.1 += bytes;
            let mut seen = std::collections::HashSet::new();
            for frame in frames.iter().filter(|f| ours(f)) {
                let name = place(frame);
                if seen.insert(name.clone()) {
                    let entry = inclusive.entry(name).or_insert((0, 0));
                    entry.0 += count;
                    entry.1 += bytes;
                }
            }
            stacks.push((count, bytes, frames));
        }
        let mut out = String::new();
        let _ = writeln!(
            out,
            "recorded: {:.1} allocations, {:.0} bytes per unit ({per} units)\n",
            all_count as f64 / per,
            all_bytes as f64 / per
        );
        let mut section = |title: &str, map: HashMap<String, (u64, u64)>| {
            let mut rows: Vec<(String, (u64, u64))> = map.into_iter().collect();
            rows.sort_by(|a, b| b.1.1.cmp(&a.1.1).then_with(|| a.0.cmp(&b.0)));
            let _ = writeln!(
                out,
                "## {title}\n| bytes per unit | allocations per unit | |\n|---|---|---|"
            );
            for (name, (count, bytes)) in rows.into_iter().take(top) {
                let _ = writeln!(
                    out,
                    "| {:.0} | {:.1} | `{name}` |",
                    bytes as f64 / per,
                    count as f64 / per
                );
            }
            let _ = writeln!(out);
        };
        section(
            "By site: the innermost watchkeeper frame -> what it called",
            by_site,
        );
        section("Inclusive by watchkeeper function (and file)", inclusive);
        stacks.sort_by_key(|stack| std::cmp::Reverse(stack.1));
        let _ = writeln!(out, "## Heaviest stacks");
        for (count, bytes, frames) in stacks.iter().take(top) {
            let _ = writeln!(
                out,
                "\n{:.0} bytes, {:.1} allocations per unit:",
                *bytes as f64 / per,
                *count as f64 / per
            );
            for frame in frames.iter().take(40) {
                let _ = writeln!(out, "    {frame}");
            }
        }
        out
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

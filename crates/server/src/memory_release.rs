//! Giving back to the system the memory a burst of heavy requests freed: glibc's
//! `malloc_trim(0)` on a blocking thread after heavy requests, at most once per
//! `--memory-release-interval-ms`.
//!
//! A heavy write holds a few transient copies of its object at its peak (the body, the
//! decoded object, the patched or merged one, the encodings). Freed, they go back to glibc's
//! arenas, which keep them: a burst of nine merge patches of a 120 MB custom resource left
//! the process at 1.0-1.6 GB RSS for 0.26 GB of objects the caches hold, 0.29 GB with these
//! releases (docs/ARCHITECTURE.md, "Giving freed memory back", has the figures and the
//! alternatives measured: glibc tunables, jemalloc). `malloc_trim(0)`
//! hands the free pages of every arena back (`madvise(MADV_DONTNEED)`) and the top of each
//! heap (`sbrk`/`munmap`).
//!
//! ## Guarantees
//! - Only a heavy request (see `offload`: a body of at least `--heavy-request-body-bytes`, a
//!   heavy phase run in place, the reflector's decode of a large value) schedules a release,
//!   once it has finished ([`Release::after_heavy`]); light requests never do and pay
//!   nothing.
//! - At most one release runs at a time, on a thread of tokio's blocking pool (it takes each
//!   arena's lock in turn while it walks its free chunks, so never on a runtime worker), and
//!   the next one starts at least `--memory-release-interval-ms` after the previous one
//!   ended. Heavy requests finishing meanwhile coalesce into that next release: a burst of
//!   any size costs one release per interval, and the last request of a burst is always
//!   followed by one.
//! - Bounded: one task and at most one blocking thread, whatever the number of heavy
//!   requests; `--memory-release-interval-ms 0` turns it off.
//! - Counted in `/metrics`: `watchkeeper_memory_releases_total`,
//!   `watchkeeper_memory_release_seconds_total` (time spent in `malloc_trim`) and
//!   `watchkeeper_memory_released_bytes_total` (the resident set's drop across each release,
//!   read from `/proc/self/status`).
//! - Only with glibc on Linux; elsewhere a release does nothing but count (other allocators
//!   have their own ways of returning memory).
//!
//! kube-apiserver has nothing like it: Go's runtime returns freed heap to the system itself
//! (its scavenger, in the background, and `debug.FreeOSMemory`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

/// The release schedule and its counts.
pub struct Release {
    /// Least time from the end of one release to the start of the next; zero: never.
    interval: Duration,
    state: Mutex<State>,
    releases: AtomicU64,
    nanos: AtomicU64,
    bytes: AtomicU64,
    /// The release itself ([`malloc_trim`] in the server; a counter in tests).
    release: Box<dyn Fn() + Send + Sync>,
}

impl std::fmt::Debug for Release {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Release")
            .field("interval", &self.interval)
            .field("releases", &self.releases)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Default)]
struct State {
    /// The release task is alive (waiting for its time or releasing).
    scheduled: bool,
    /// A heavy request finished since the last release started.
    wanted: bool,
    /// When the last release ended.
    last_end: Option<Instant>,
}

impl Release {
    /// Releases with glibc's `malloc_trim(0)`, at most once per `interval` (zero: never).
    #[must_use]
    pub fn new(interval: Duration) -> Release {
        Release::with(interval, malloc_trim)
    }

    /// Releases with `release` instead (tests).
    #[must_use]
    pub fn with(interval: Duration, release: impl Fn() + Send + Sync + 'static) -> Release {
        Release {
            interval,
            state: Mutex::new(State::default()),
            releases: AtomicU64::new(0),
            nanos: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            release: Box::new(release),
        }
    }

    /// A heavy request finished: schedules a release unless one is already scheduled (which
    /// then covers this request too). Call from within the runtime; costs a lock and, when
    /// nothing is scheduled, a task.
    pub fn after_heavy(self: &Arc<Self>) {
        if self.interval.is_zero() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        {
            let mut state = self.lock();
            state.wanted = true;
            if state.scheduled {
                return;
            }
            state.scheduled = true;
        }
        runtime.spawn(self.clone().releases());
    }

    /// The release task: waits for the interval since the last release, releases, and goes
    /// on while heavy requests finished meanwhile.
    async fn releases(self: Arc<Self>) {
        loop {
            let at = self.lock().last_end.map(|end| end + self.interval);
            if let Some(at) = at {
                tokio::time::sleep_until(at).await;
            }
            self.lock().wanted = false;
            let started = Instant::now();
            let this = self.clone();
            // A panic in the release is the pool's (counted as not released); the schedule
            // goes on.
            let released = tokio::task::spawn_blocking(move || {
                let before = resident_bytes();
                (this.release)();
                before.saturating_sub(resident_bytes())
            })
            .await
            .unwrap_or(0);
            let end = Instant::now();
            self.releases.fetch_add(1, Ordering::Relaxed);
            self.bytes.fetch_add(released, Ordering::Relaxed);
            self.nanos.fetch_add(
                u64::try_from((end - started).as_nanos()).unwrap_or(u64::MAX),
                Ordering::Relaxed,
            );
            let mut state = self.lock();
            state.last_end = Some(end);
            if !state.wanted {
                state.scheduled = false;
                return;
            }
        }
    }

    /// Releases done, the seconds they took, and the resident bytes they gave back.
    #[must_use]
    pub fn counts(&self) -> (u64, f64, u64) {
        (
            self.releases.load(Ordering::Relaxed),
            Duration::from_nanos(self.nanos.load(Ordering::Relaxed)).as_secs_f64(),
            self.bytes.load(Ordering::Relaxed),
        )
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The resident set's size from `/proc/self/status` (`VmRSS`), 0 when unreadable.
fn resident_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
            let kib: u64 = line
                .trim_start_matches("VmRSS:")
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse()
                .ok()?;
            Some(kib * 1024)
        })
        .unwrap_or(0)
}

/// glibc's `malloc_trim(0)`: every arena's free pages and the top of each heap back to the
/// system.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn malloc_trim() {
    // SAFETY: `malloc_trim` takes a plain integer, touches only the allocator's own state
    // under its arena locks (it is thread-safe like `malloc` itself) and returns 0 or 1; no
    // pointer of ours is involved.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Not glibc: nothing to trim.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn malloc_trim() {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    fn counting(interval: Duration) -> (Arc<Release>, Arc<AtomicUsize>) {
        let calls = Arc::new(AtomicUsize::new(0));
        let counted = calls.clone();
        let release = Release::with(interval, move || {
            counted.fetch_add(1, Ordering::SeqCst);
        });
        (Arc::new(release), calls)
    }

    /// Lets the release task and its blocking job run (the clock is paused: sleeping
    /// advances it only once everything else waits).
    async fn settle(release: &Release) {
        for _ in 0..100 {
            tokio::task::yield_now().await;
            if !release.lock().scheduled {
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_heavy_request_schedules_one_release() {
        let (release, calls) = counting(Duration::from_secs(10));
        release.after_heavy();
        settle(&release).await;
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert_eq!(release.counts().0, 1);
        assert!(!release.lock().scheduled, "the task ended");
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_coalesces_and_the_interval_holds() {
        let (release, calls) = counting(Duration::from_secs(10));
        let start = Instant::now();
        release.after_heavy();
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert_eq!(calls.load(Ordering::SeqCst), 1, "the first one at once");
        // Nine more within the interval: one more release, not before the interval.
        for _ in 0..9 {
            release.after_heavy();
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        tokio::time::sleep_until(start + Duration::from_millis(9_990)).await;
        assert_eq!(calls.load(Ordering::SeqCst), 1, "not before the interval");
        tokio::time::sleep_until(start + Duration::from_millis(10_010)).await;
        assert_eq!(
            calls.load(Ordering::SeqCst),
            2,
            "one release for the burst's rest"
        );
        // Nothing more wanted: no further release, the task is gone.
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        assert!(!release.lock().scheduled);
        // A later heavy request, past the interval, releases at once.
        release.after_heavy();
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        assert_eq!(release.counts().0, 3);
    }

    #[tokio::test(start_paused = true)]
    async fn a_zero_interval_never_releases() {
        let (release, calls) = counting(Duration::ZERO);
        release.after_heavy();
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert_eq!(calls.load(Ordering::SeqCst), 0);
        assert_eq!(release.counts().0, 0);
    }
}

//! Process and machine facts: fd limit, CPU time, RSS, date, CPU model.
#![allow(unsafe_code)]

/// Raises RLIMIT_NOFILE's soft limit to its hard limit (for 10,000 watch streams).
pub fn raise_fd_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct we pass.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max
        {
            limit.rlim_cur = limit.rlim_max;
            let _ = libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

/// The soft RLIMIT_NOFILE.
#[must_use]
pub fn fd_limit() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: as above.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
    }
    limit.rlim_cur
}

/// This process's CPU time (user + system, every thread) in seconds, to the nanosecond: the
/// scheduler's own account (`CLOCK_PROCESS_CPUTIME_ID`). /proc/self/stat's utime and stime
/// come in clock ticks (10 ms), which over a run of a few seconds put CPU per delivered event
/// in steps of ~0.5 µs at 100 watchers × 100 writes/s (invocation AN); /proc is the fallback.
#[must_use]
pub fn cpu_seconds() -> f64 {
    clock_seconds(libc::CLOCK_PROCESS_CPUTIME_ID)
        .unwrap_or_else(|| cpu_seconds_at("/proc/self/stat"))
}

/// Process `pid`'s CPU time in seconds, as [`cpu_seconds`] (its CPU-time clock,
/// `clock_getcpuclockid`; `/proc/<pid>/stat` when that cannot be had); 0 if unreadable.
#[must_use]
pub fn cpu_seconds_of(pid: u32) -> f64 {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return 0.0;
    };
    let mut clock: libc::clockid_t = 0;
    // SAFETY: clock_getcpuclockid writes one clockid_t through the pointer it is given.
    let found = unsafe { libc::clock_getcpuclockid(pid, &mut clock) } == 0;
    found
        .then(|| clock_seconds(clock))
        .flatten()
        .unwrap_or_else(|| cpu_seconds_at(&format!("/proc/{pid}/stat")))
}

/// The time of `clock` in seconds, or `None` if it cannot be read.
fn clock_seconds(clock: libc::clockid_t) -> Option<f64> {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through the pointer it is given.
    let read = unsafe { libc::clock_gettime(clock, &mut now) } == 0;
    read.then_some(now.tv_sec as f64 + now.tv_nsec as f64 * 1e-9)
}

fn cpu_seconds_at(path: &str) -> f64 {
    let Ok(stat) = std::fs::read_to_string(path) else {
        return 0.0;
    };
    // Fields after the command (which may contain spaces) start after the last ')'.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // rest[0] is field 3 (state); utime is field 14, stime 15.
    let utime: f64 = fields.get(11).and_then(|v| v.parse().ok()).unwrap_or(0.0);
    let stime: f64 = fields.get(12).and_then(|v| v.parse().ok()).unwrap_or(0.0);
    // SAFETY: sysconf has no memory effects.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    (utime + stime) / ticks
}

/// A thread's CPU time in seconds from its /proc task directory: the scheduler's time on CPU
/// to the nanosecond (`schedstat`'s first field), else utime + stime in clock ticks (`stat`).
fn task_cpu_seconds(task: &std::path::Path) -> f64 {
    std::fs::read_to_string(task.join("schedstat"))
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .map_or_else(
            || cpu_seconds_at(&task.join("stat").to_string_lossy()),
            |ns| ns as f64 * 1e-9,
        )
}

/// The CPU time, in seconds, of this process's threads by kind: the thread's name up to its
/// first `-` (`dispatch`, `catchup`, `tokio`, ...), or whole when it has none
/// (read to the nanosecond from each thread's `schedstat`). Threads that ended are not counted.
#[must_use]
pub fn thread_cpu_seconds_by_kind() -> std::collections::BTreeMap<String, f64> {
    let mut kinds = std::collections::BTreeMap::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return kinds;
    };
    for task in tasks.flatten() {
        let Ok(comm) = std::fs::read_to_string(task.path().join("comm")) else {
            continue;
        };
        let comm = comm.trim_end();
        let kind = comm
            .split_once('-')
            .map_or(comm, |(kind, _)| kind)
            .to_owned();
        *kinds.entry(kind).or_insert(0.0) += task_cpu_seconds(&task.path());
    }
    kinds
}

/// The CPU time, in seconds, of this process's threads whose name starts with `prefix`
/// (read to the nanosecond from each thread's `schedstat`); 0 if none.
#[must_use]
pub fn thread_cpu_seconds(prefix: &str) -> f64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0.0;
    };
    tasks
        .flatten()
        .filter(|task| {
            std::fs::read_to_string(task.path().join("comm"))
                .is_ok_and(|comm| comm.trim_end().starts_with(prefix))
        })
        .map(|task| task_cpu_seconds(&task.path()))
        .sum()
}

/// This process's resident set size in bytes (/proc/self/statm).
#[must_use]
pub fn rss_bytes() -> u64 {
    let pages: u64 = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        .unwrap_or(0);
    pages * 4096
}

/// CLOCK_MONOTONIC in nanoseconds: one clock for every process on the machine, so a writer in
/// one process and a reader in another can compute a delivery latency.
#[must_use]
pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime only writes the struct we pass.
    unsafe {
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
    }
    (ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64
}

/// Reads this process's RSS through a /proc/self/statm handle opened once, so it still works
/// when every file descriptor of the process is in use (the scale suite).
#[derive(Debug)]
pub struct RssReader(Option<std::fs::File>);

impl RssReader {
    /// Opens /proc/self/statm.
    #[must_use]
    pub fn open() -> RssReader {
        RssReader(std::fs::File::open("/proc/self/statm").ok())
    }

    /// The RSS in bytes (0 if unreadable).
    pub fn rss_bytes(&mut self) -> u64 {
        use std::io::{Read as _, Seek as _};
        let Some(file) = self.0.as_mut() else {
            return 0;
        };
        let mut text = String::new();
        if file.rewind().is_err() || file.read_to_string(&mut text).is_err() {
            return 0;
        }
        text.split_whitespace()
            .nth(1)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
            * 4096
    }
}

/// Open file descriptors of this process (entries of /proc/self/fd), if it can be listed.
#[must_use]
pub fn open_fds() -> Option<usize> {
    std::fs::read_dir("/proc/self/fd").ok().map(Iterator::count)
}

/// The UTC date and time (`date -u`), or "unknown".
#[must_use]
pub fn utc_now() -> String {
    std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}

/// `nproc` and the CPU model.
#[must_use]
pub fn machine() -> String {
    let cpus = std::thread::available_parallelism().map_or(0, std::num::NonZero::get);
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, m)| m.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned());
    format!("nproc {cpus}, {model}, Linux")
}

/// The words a table's title ends with: the load it ran under, if one was started (empty
/// without). Read from the running load, so a title cannot name a load that never ran.
#[must_use]
pub fn busy_title(load: Option<&BusyLoad>) -> String {
    match load {
        Some(load) => format!(
            ", background load: one busy thread per core at nice {}",
            load.nice
        ),
        None => String::new(),
    }
}

/// A CPU-bound background load: one spinning thread per core at a nice value, until dropped.
#[derive(Debug)]
pub struct BusyLoad {
    nice: i32,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl BusyLoad {
    /// Starts one spinning thread per available core, each at `nice` (0-19).
    #[must_use]
    pub fn start(nice: i32) -> BusyLoad {
        let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let threads = (0..cores)
            .map(|i| {
                let stop = stop.clone();
                std::thread::Builder::new()
                    .name(format!("busy-{i}"))
                    .spawn(move || {
                        // SAFETY: gettid and setpriority take plain integers; on Linux
                        // PRIO_PROCESS with a thread id sets that thread's nice value.
                        unsafe {
                            let tid = libc::gettid();
                            let _ = libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice);
                        }
                        let mut x: u64 = 1;
                        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                            for _ in 0..10_000 {
                                x = std::hint::black_box(
                                    x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1),
                                );
                            }
                        }
                    })
                    .expect("busy thread")
            })
            .collect();
        BusyLoad {
            nice,
            stop,
            threads,
        }
    }
}

impl Drop for BusyLoad {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// The machine's own scheduling delays, measured beside a latency run: a thread of this
/// process sleeps 1 ms at a time and records how much longer each sleep took. What it sees
/// (another process's burst, a hypervisor holding the virtual CPU, memory reclaim) holds back
/// any thread of the process the same way, whatever watchkeeper does, so a latency run whose
/// probe saw a 100 ms overshoot says so next to its own figures.
pub struct JitterProbe {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<Vec<u64>>>,
    steal_before: f64,
}

/// What a [`JitterProbe`] saw over its run.
#[derive(Clone, Copy, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Jitter {
    /// Overshoot of a 1 ms sleep, µs (p50, p99, max over every sleep of the run).
    pub overshoot: crate::Latency,
    /// Milliseconds the hypervisor ran something else on this machine's CPUs (steal time,
    /// summed over CPUs, from /proc/stat) during the run.
    pub steal_ms: f64,
}

impl JitterProbe {
    /// Starts the probe thread.
    #[must_use]
    pub fn start() -> JitterProbe {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("jitter-probe".into())
            .spawn(move || {
                let mut overshoots = Vec::new();
                while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                    let asked = std::time::Duration::from_millis(1);
                    let started = std::time::Instant::now();
                    std::thread::sleep(asked);
                    let over = started.elapsed().saturating_sub(asked);
                    overshoots.push(u64::try_from(over.as_nanos()).unwrap_or(u64::MAX));
                }
                overshoots
            })
            .ok();
        JitterProbe {
            stop,
            thread,
            steal_before: steal_seconds(),
        }
    }

    /// Stops the probe and summarises what it saw.
    #[must_use]
    pub fn finish(mut self) -> Jitter {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let samples = self
            .thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default();
        Jitter {
            overshoot: crate::Latency::from_nanos(samples),
            steal_ms: (steal_seconds() - self.steal_before).max(0.0) * 1000.0,
        }
    }
}

impl Drop for JitterProbe {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The machine's steal time so far in seconds, summed over CPUs (/proc/stat's first line,
/// eighth value, in clock ticks); 0 if unreadable.
#[must_use]
pub fn steal_seconds() -> f64 {
    let ticks = std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|stat| {
            stat.lines()
                .next()?
                .split_whitespace()
                .nth(8)?
                .parse::<f64>()
                .ok()
        })
        .unwrap_or(0.0);
    // SAFETY: sysconf only reads a system constant.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if per_second > 0 {
        ticks / per_second as f64
    } else {
        0.0
    }
}

/// Marks the start of a measured window for `valgrind --tool=callgrind
/// --zero-before='*measure_window_start*'` (instruction counts of a fixed workload).
#[inline(never)]
pub fn measure_window_start() {
    // Distinct bodies: identical functions may be folded into one symbol.
    std::hint::black_box(1_u8);
}

/// Marks the end of a measured window (`--dump-before='*measure_window_end*'`).
#[inline(never)]
pub fn measure_window_end() {
    std::hint::black_box(2_u64);
}

/// Process-wide counters over a measured window: the kernel's own per-process figures
/// (`getrusage`) and, where the kernel lets this process count tracepoints
/// (`perf_event_open`), the allocator's calls that return memory or move the heap and the TLB
/// flushes they cause. Every thread of the process at [`WindowCounts::start`] is counted, and
/// every thread those threads start afterwards (counts of such a thread reach the total once
/// it has exited: join it before [`WindowCounts::finish`]).
pub struct WindowCounts {
    rusage: libc::rusage,
    /// Per tracepoint: its name and one counter per thread.
    traces: Vec<(&'static str, Vec<std::fs::File>)>,
}

/// What a [`WindowCounts`] saw.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Counts {
    /// Minor page faults (a page touched for the first time, or again after the allocator
    /// returned it to the kernel).
    pub minor_faults: u64,
    /// Context switches the threads took by blocking.
    pub voluntary_switches: u64,
    /// Involuntary context switches.
    pub involuntary_switches: u64,
    /// Tracepoint counts by short name ([`TRACEPOINTS`], or those given to
    /// [`WindowCounts::start_with`]); empty when the kernel did not allow counting them.
    pub traces: Vec<(String, u64)>,
}

/// The tracepoints [`WindowCounts::start`] counts, as (short name, tracefs path under
/// `events/`).
const TRACEPOINTS: [(&str, &str); 5] = [
    ("tlb_flush", "tlb/tlb_flush"),
    ("madvise", "syscalls/sys_enter_madvise"),
    ("munmap", "syscalls/sys_enter_munmap"),
    ("mmap", "syscalls/sys_enter_mmap"),
    ("brk", "syscalls/sys_enter_brk"),
];

/// The system calls a fan-out run's window counts ([`WindowCounts::start_with`]): the
/// deliveries' socket writes, the wake-ups between threads (`futex`, and `write`: in a
/// fan-out run's window nearly all on the runtime's `eventfd`, which wakes a worker parked in
/// `epoll_wait`), and the heap's growth
/// (`mprotect` for glibc's thread arenas, `brk` for its main one, `mmap`, `madvise`, `munmap`).
pub const FANOUT_TRACEPOINTS: [(&str, &str); 9] = [
    ("writev", "syscalls/sys_enter_writev"),
    ("write", "syscalls/sys_enter_write"),
    ("futex", "syscalls/sys_enter_futex"),
    ("epoll_wait", "syscalls/sys_enter_epoll_wait"),
    ("mprotect", "syscalls/sys_enter_mprotect"),
    ("brk", "syscalls/sys_enter_brk"),
    ("mmap", "syscalls/sys_enter_mmap"),
    ("madvise", "syscalls/sys_enter_madvise"),
    ("munmap", "syscalls/sys_enter_munmap"),
];

fn rusage_self() -> libc::rusage {
    // SAFETY: getrusage writes a plain struct that is zero-initialised here.
    unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    }
}

/// Opens a counting perf event for tracepoint `id` on thread `tid` (and the threads it starts).
fn open_tracepoint(id: u64, tid: i32) -> Option<std::fs::File> {
    use std::os::fd::FromRawFd;
    // `struct perf_event_attr` in its first published size (PERF_ATTR_SIZE_VER0, 64 bytes).
    #[repr(C)]
    struct Attr {
        kind: u32,
        size: u32,
        config: u64,
        sample_period: u64,
        sample_type: u64,
        read_format: u64,
        flags: u64,
        wakeup_events: u32,
        bp_type: u32,
        config1: u64,
    }
    const PERF_TYPE_TRACEPOINT: u32 = 2;
    const INHERIT: u64 = 1 << 1;
    let attr = Attr {
        kind: PERF_TYPE_TRACEPOINT,
        size: 64,
        config: id,
        sample_period: 0,
        sample_type: 0,
        read_format: 0,
        flags: INHERIT,
        wakeup_events: 0,
        bp_type: 0,
        config1: 0,
    };
    // SAFETY: perf_event_open reads `attr` (a live, correctly sized struct) and returns a new
    // descriptor or -1; the descriptor is owned by the File from here on.
    #[allow(unsafe_code)]
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            std::ptr::from_ref(&attr),
            tid,
            -1_i32,
            -1_i32,
            0_u64,
        )
    };
    let fd = i32::try_from(fd).ok().filter(|fd| *fd >= 0)?;
    // SAFETY: `fd` was just returned by the kernel and nothing else owns it.
    #[allow(unsafe_code)]
    Some(unsafe { std::fs::File::from_raw_fd(fd) })
}

fn tracepoint_id(path: &str) -> Option<u64> {
    [
        "/sys/kernel/tracing/events",
        "/sys/kernel/debug/tracing/events",
    ]
    .iter()
    .find_map(|root| std::fs::read_to_string(format!("{root}/{path}/id")).ok())
    .and_then(|id| id.trim().parse().ok())
}

impl WindowCounts {
    /// Starts counting, with the allocator's and TLB tracepoints ([`TRACEPOINTS`]).
    #[must_use]
    pub fn start() -> WindowCounts {
        WindowCounts::start_with(&TRACEPOINTS)
    }

    /// Starts counting, with `tracepoints` (short name, tracefs path under `events/`); one
    /// the kernel does not let this process count is left out.
    #[must_use]
    pub fn start_with(tracepoints: &[(&'static str, &'static str)]) -> WindowCounts {
        let tids: Vec<i32> = std::fs::read_dir("/proc/self/task")
            .map(|dir| {
                dir.filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
                    .collect()
            })
            .unwrap_or_default();
        let traces = tracepoints
            .iter()
            .filter_map(|(name, path)| {
                let id = tracepoint_id(path)?;
                let files: Option<Vec<_>> =
                    tids.iter().map(|&tid| open_tracepoint(id, tid)).collect();
                Some((*name, files?))
            })
            .collect();
        WindowCounts {
            rusage: rusage_self(),
            traces,
        }
    }

    /// Stops counting and returns the window's counts.
    #[must_use]
    pub fn finish(self) -> Counts {
        use std::io::Read;
        let after = rusage_self();
        let delta = |a: libc::c_long, b: libc::c_long| u64::try_from(a - b).unwrap_or(0);
        let traces = self
            .traces
            .into_iter()
            .map(|(name, files)| {
                let total = files
                    .into_iter()
                    .map(|mut file| {
                        let mut bytes = [0_u8; 8];
                        file.read_exact(&mut bytes)
                            .map_or(0, |()| u64::from_ne_bytes(bytes))
                    })
                    .sum();
                (name.to_owned(), total)
            })
            .collect();
        Counts {
            minor_faults: delta(after.ru_minflt, self.rusage.ru_minflt),
            voluntary_switches: delta(after.ru_nvcsw, self.rusage.ru_nvcsw),
            involuntary_switches: delta(after.ru_nivcsw, self.rusage.ru_nivcsw),
            traces,
        }
    }
}

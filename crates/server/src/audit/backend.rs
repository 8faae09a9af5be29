//! The audit log's writer: one thread of its own that turns queued events into JSON lines and
//! appends them to the log file (rotated by size as lumberjack rotates kube-apiserver's) or to
//! standard output. No runtime worker ever encodes or writes an event.
//!
//! ## Guarantees
//! - Events are written in the order they were queued, one line each, never interleaved.
//! - The queue holds at most `--audit-log-batch-buffer-size` events. In `batch` mode an event
//!   that finds it full is dropped and counted (`apiserver_audit_error_total{plugin="buffered"}`);
//!   in the blocking modes the request waits for its event to be written (so the events
//!   waiting are also bounded by the requests in flight).
//! - A shutdown (`Server::shutdown`, SIGTERM) returns once the events queued before it are
//!   written ([`super::Audit::drain`]): a batch queue is not lost with the process.
//! - A failed write is counted (`apiserver_audit_error_total{plugin="log"}`) and reported to
//!   a blocking request, which goes on (`blocking`) or, for its `RequestReceived` event, fails
//!   (`blocking-strict`).
//! - Rotation (lumberjack's): a write that would take the file past `--audit-log-maxsize`
//!   megabytes first renames it to `NAME-<UTC time>.EXT` (`2006-01-02T15-04-05.000`) and
//!   opens a new one; then rotated files beyond `--audit-log-maxbackup` (oldest first) and older
//!   than `--audit-log-maxage` days are removed (also when the log is opened at start). An event longer than the limit is not
//!   written (lumberjack's `write length N exceeds maximum file size M`), counted as a failure.
//!   With `--audit-log-compress` the rotated files kept are gzipped (`NAME-<time>.EXT.gz`, the
//!   plain file removed), at each rotation and at start, as lumberjack's `mill`.
//! - **Batches** (`batch` mode): events are written in batches of at most
//!   `--audit-log-batch-max-size` (1 by default: each on its own), a batch waiting at most
//!   `--audit-log-batch-max-wait` after its first event, then flushed once; with
//!   `--audit-log-batch-throttle-enable` at most `-qps` batches a second (`-burst` at once). An
//!   event someone waits for (a blocking request, a shutdown's drain) ends its batch at once.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use crate::config::{AuditConfig, AuditMode, Batching};

/// One queued event: the encoding work and where to report its outcome.
pub(super) struct Queued {
    /// Encodes the event's line (run on the writer thread).
    pub(super) encode: Box<dyn FnOnce() -> Option<Vec<u8>> + Send>,
    /// Told whether the line was written (blocking modes).
    pub(super) done: Option<tokio::sync::oneshot::Sender<bool>>,
}

/// The audit counters, as kube-apiserver names them.
#[derive(Debug, Default)]
pub struct Counters {
    /// `apiserver_audit_event_total`: events generated and handed to the log.
    pub events: AtomicU64,
    /// `apiserver_audit_error_total{plugin="log"}`: events that could not be written.
    pub write_errors: AtomicU64,
    /// `apiserver_audit_error_total{plugin="buffered"}`: events dropped by a full queue.
    pub dropped: AtomicU64,
    /// `apiserver_audit_error_total{plugin="webhook"}`: events the webhook did not take.
    pub webhook_errors: AtomicU64,
    /// `apiserver_audit_requests_rejected_total`: requests failed for their event
    /// (`blocking-strict`).
    pub rejected: AtomicU64,
    /// `apiserver_audit_level_total{level}`, by level (`Metadata`, `Request`,
    /// `RequestResponse`; index 0, `None`, unused).
    pub levels: [AtomicU64; 4],
}

/// The queue in front of the writer thread.
#[derive(Debug)]
pub(super) struct Backend {
    sender: flume::Sender<Queued>,
    mode: AuditMode,
}

impl Backend {
    /// Starts the writer thread over the log `config` names.
    ///
    /// # Errors
    /// The log file cannot be opened (or the thread started).
    pub(super) fn start(
        config: &AuditConfig,
        path: &Path,
        counters: std::sync::Arc<Counters>,
    ) -> std::io::Result<Backend> {
        let mut out: Box<dyn Write + Send> = if path == Path::new("-") {
            Box::new(std::io::stdout())
        } else {
            Box::new(Rotating::open(path, config)?)
        };
        let batching = config.log_batching();
        Backend::spawn(
            "audit-log",
            config.mode,
            config.batch_buffer_size,
            move |receiver| {
                let mut throttle = batching.throttled();
                while let Some(batch) = next_batch(&receiver, &batching) {
                    if let Some(throttle) = &mut throttle {
                        throttle.accept();
                    }
                    // Each event's line is written (a failed one counted), then the batch is
                    // flushed once; an event that encodes to nothing is a marker
                    // (`Audit::drain`).
                    let mut outcomes = Vec::with_capacity(batch.len());
                    for queued in batch {
                        let written = match (queued.encode)() {
                            Some(line) => match out.write_all(&line) {
                                Ok(()) => true,
                                Err(error) => {
                                    tracing::warn!(%error, "audit log: cannot write an event");
                                    counters.write_errors.fetch_add(1, Ordering::Relaxed);
                                    false
                                }
                            },
                            None => true,
                        };
                        outcomes.push((queued.done, written));
                    }
                    let flushed = out.flush().is_ok();
                    for (done, written) in outcomes {
                        if let Some(done) = done {
                            let _ = done.send(written && flushed);
                        }
                    }
                }
            },
        )
    }

    /// A queue of at most `buffer` events in `mode` in front of `consume`, run on a thread of
    /// its own named `name` until every sender is gone.
    ///
    /// # Errors
    /// The thread cannot be started.
    pub(super) fn spawn(
        name: &str,
        mode: AuditMode,
        buffer: usize,
        consume: impl FnOnce(flume::Receiver<Queued>) + Send + 'static,
    ) -> std::io::Result<Backend> {
        let (sender, receiver) = flume::bounded::<Queued>(buffer);
        std::thread::Builder::new()
            .name(name.to_owned())
            // Events carry request and response objects, which may nest 10,000 levels.
            .stack_size(watchkeeper_core::stack::THREAD_STACK)
            .spawn(move || consume(receiver))?;
        Ok(Backend { sender, mode })
    }

    /// The mode events are written in.
    pub(super) fn mode(&self) -> AuditMode {
        self.mode
    }

    /// Queues an event without waiting: `false` when the queue is full (or the writer gone).
    pub(super) fn try_queue(&self, queued: Queued) -> bool {
        self.sender.try_send(queued).is_ok()
    }

    /// Queues an event, waiting for room, and then for it to be written: whether it was.
    pub(super) async fn write(&self, encode: Box<dyn FnOnce() -> Option<Vec<u8>> + Send>) -> bool {
        let (done, written) = tokio::sync::oneshot::channel();
        let queued = Queued {
            encode,
            done: Some(done),
        };
        if self.sender.send_async(queued).await.is_err() {
            return false;
        }
        written.await.unwrap_or(false)
    }
}

impl Batching {
    /// The token bucket of the batches, when throttled (kube throttles its buffered — `batch`
    /// mode — backends only).
    pub(super) fn throttled(&self) -> Option<Throttle> {
        (self.mode == AuditMode::Batch)
            .then_some(self.throttle)
            .flatten()
            .map(Throttle::new)
    }
}

/// The next batch from `receiver` (`None` once every sender is gone): the first event
/// waited for; then, in `batch` mode, more until the batch is full or `max_wait` after the
/// first; in the blocking modes, or once an event waits for its outcome (a blocking request,
/// `Audit::drain`'s marker), only those queued already.
pub(super) fn next_batch(
    receiver: &flume::Receiver<Queued>,
    batching: &Batching,
) -> Option<Vec<Queued>> {
    let first = receiver.recv().ok()?;
    let mut flush = batching.mode != AuditMode::Batch || first.done.is_some();
    let mut batch = vec![first];
    let deadline = std::time::Instant::now() + batching.max_wait;
    while batch.len() < batching.max_size {
        let next = if flush {
            receiver.try_recv().ok()
        } else {
            receiver.recv_deadline(deadline).ok()
        };
        let Some(next) = next else { break };
        flush |= next.done.is_some();
        batch.push(next);
    }
    Some(batch)
}

/// A token bucket (client-go's `NewTokenBucketRateLimiter`): `qps` tokens a second, at most
/// `burst` kept; [`Throttle::accept`] waits (on the backend's thread) for one.
pub(super) struct Throttle {
    qps: f64,
    burst: f64,
    tokens: f64,
    at: std::time::Instant,
}

impl Throttle {
    pub(super) fn new((qps, burst): (f64, usize)) -> Throttle {
        let burst = burst.max(1) as f64;
        Throttle {
            qps,
            burst,
            tokens: burst,
            at: std::time::Instant::now(),
        }
    }

    /// Takes a token, sleeping until there is one.
    pub(super) fn accept(&mut self) {
        let now = std::time::Instant::now();
        self.tokens =
            (self.tokens + now.duration_since(self.at).as_secs_f64() * self.qps).min(self.burst);
        self.at = now;
        if self.tokens < 1.0 {
            let wait = (1.0 - self.tokens) / self.qps;
            std::thread::sleep(Duration::from_secs_f64(wait));
            self.tokens = 1.0;
            self.at = std::time::Instant::now();
        }
        self.tokens -= 1.0;
    }
}

/// lumberjack's default size limit, when `--audit-log-maxsize` is 0.
const DEFAULT_MAX_MEGABYTES: u64 = 100;

/// A log file rotated by size (see the module docs).
struct Rotating {
    path: PathBuf,
    file: File,
    size: u64,
    max: u64,
    max_backups: usize,
    max_age: Option<Duration>,
    /// `--audit-log-compress`: rotated files are gzipped (`NAME-<time>.EXT.gz`).
    compress: bool,
}

impl Rotating {
    fn open(path: &Path, config: &AuditConfig) -> std::io::Result<Rotating> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        let size = file.metadata()?.len();
        let megabytes = match config.max_size_megabytes {
            0 => DEFAULT_MAX_MEGABYTES,
            n => n,
        };
        let log = Rotating {
            path: path.to_owned(),
            file,
            size,
            max: megabytes.saturating_mul(1024 * 1024),
            max_backups: config.max_backups,
            max_age: (config.max_age_days > 0)
                .then(|| Duration::from_secs(config.max_age_days.saturating_mul(86_400))),
            compress: config.compress,
        };
        // lumberjack's `mill` on opening: old files beyond the bounds go now.
        log.remove_old_backups();
        Ok(log)
    }

    /// `NAME-<time>.EXT` for the file rotated at `now`.
    fn backup_name(&self, now: SystemTime) -> PathBuf {
        let stem = self
            .path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let ext = self
            .path
            .extension()
            .map(|e| format!(".{}", e.to_string_lossy()))
            .unwrap_or_default();
        let micros = now
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX));
        // `2026-12-05T00:28:07.123456Z` → `2026-12-05T00-28-07.123`.
        let stamp = watchkeeper_api::time::rfc3339_micro_from_unix(micros);
        let stamp = stamp[..23].replace(':', "-");
        self.path.with_file_name(format!("{stem}-{stamp}{ext}"))
    }

    fn rotate(&mut self) -> std::io::Result<()> {
        // Two rotations within a millisecond must not overwrite the first's file.
        let mut at = SystemTime::now();
        let mut backup = self.backup_name(at);
        while backup.exists() {
            at += Duration::from_millis(1);
            backup = self.backup_name(at);
        }
        std::fs::rename(&self.path, &backup)?;
        self.file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)?;
        self.size = 0;
        self.remove_old_backups();
        Ok(())
    }

    /// The rotated files of this log, newest first.
    fn backups(&self) -> Vec<(SystemTime, PathBuf)> {
        let Some(dir) = self.path.parent() else {
            return Vec::new();
        };
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        let stem = self
            .path
            .file_stem()
            .map(|s| format!("{}-", s.to_string_lossy()))
            .unwrap_or_default();
        let ext = self
            .path
            .extension()
            .map(|e| format!(".{}", e.to_string_lossy()))
            .unwrap_or_default();
        let mut found: Vec<(SystemTime, PathBuf)> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|entry| {
                let name = entry.file_name().to_string_lossy().into_owned();
                let is_backup = name.starts_with(&stem)
                    && (name.ends_with(&ext) || name.ends_with(&format!("{ext}.gz")))
                    && entry.path() != self.path;
                let modified = entry.metadata().ok()?.modified().ok()?;
                is_backup.then(|| (modified, entry.path()))
            })
            .collect();
        found.sort_by(|a, b| b.cmp(a));
        found
    }

    fn remove_old_backups(&self) {
        let now = SystemTime::now();
        for (index, (modified, path)) in self.backups().into_iter().enumerate() {
            let too_many = self.max_backups > 0 && index >= self.max_backups;
            let too_old = self.max_age.is_some_and(|age| {
                now.duration_since(modified)
                    .is_ok_and(|elapsed| elapsed > age)
            });
            if too_many || too_old {
                if let Err(error) = std::fs::remove_file(&path) {
                    tracing::warn!(%error, path = %path.display(), "audit log: cannot remove an old file");
                }
            } else if self.compress
                && path.extension().is_none_or(|e| e != "gz")
                && let Err(error) = gzip(&path)
            {
                tracing::warn!(%error, path = %path.display(), "audit log: cannot compress a rotated file");
            }
        }
    }
}

/// lumberjack's `compressLogFile`: `path` gzipped to `path.gz`, then removed.
fn gzip(path: &Path) -> std::io::Result<()> {
    let mut target = path.as_os_str().to_owned();
    target.push(".gz");
    let target = PathBuf::from(target);
    let mut source = File::open(path)?;
    let mut encoder =
        flate2::write::GzEncoder::new(File::create(&target)?, flate2::Compression::default());
    std::io::copy(&mut source, &mut encoder)?;
    encoder.finish()?.sync_all()?;
    std::fs::remove_file(path)
}

impl Write for Rotating {
    fn write(&mut self, line: &[u8]) -> std::io::Result<usize> {
        let length = line.len() as u64;
        if length > self.max {
            return Err(std::io::Error::other(format!(
                "write length {length} exceeds maximum file size {}",
                self.max
            )));
        }
        if self.size + length > self.max {
            self.rotate()?;
        }
        self.file.write_all(line)?;
        self.size += length;
        Ok(line.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(max_backups: usize) -> AuditConfig {
        AuditConfig {
            max_size_megabytes: 1,
            max_backups,
            ..AuditConfig::default()
        }
    }

    #[test]
    fn rotates_by_size_and_keeps_max_backups() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        let mut log = Rotating::open(&path, &config(2)).unwrap();
        let line = vec![b'x'; 400 * 1024];
        // Eight lines of 400 KiB in 1 MiB files: two lines a file, so three rotations… and
        // only the two newest rotated files are kept.
        for _ in 0..8 {
            log.write_all(&line).unwrap();
        }
        let backups = log.backups();
        assert_eq!(backups.len(), 2, "{backups:?}");
        for (_, backup) in &backups {
            let name = backup.file_name().unwrap().to_string_lossy().into_owned();
            assert!(
                name.starts_with("audit-") && name.ends_with(".log"),
                "{name}"
            );
            assert_eq!(std::fs::metadata(backup).unwrap().len(), 800 * 1024);
        }
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 800 * 1024);
    }

    fn line(text: &'static str) -> Box<dyn FnOnce() -> Option<Vec<u8>> + Send> {
        Box::new(move || Some(format!("{text}\n").into_bytes()))
    }

    #[test]
    fn a_full_queue_refuses_instead_of_growing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        let config = AuditConfig {
            mode: AuditMode::Batch,
            batch_buffer_size: 1,
            ..AuditConfig::default()
        };
        let counters = std::sync::Arc::new(Counters::default());
        let backend = Backend::start(&config, &path, counters.clone()).unwrap();
        // The writer takes the first event and holds it until released.
        let (started_tx, started) = std::sync::mpsc::channel();
        let (release, released) = std::sync::mpsc::channel::<()>();
        let held = Queued {
            encode: Box::new(move || {
                started_tx.send(()).unwrap();
                released.recv().unwrap();
                Some(b"first\n".to_vec())
            }),
            done: None,
        };
        assert!(backend.try_queue(held));
        started.recv().unwrap();
        let queued = |text| Queued {
            encode: line(text),
            done: None,
        };
        assert!(backend.try_queue(queued("second")));
        // The queue holds one event: the third is refused, not queued.
        assert!(!backend.try_queue(queued("third")));
        release.send(()).unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        // A blocking write waits for the two before it and for its own line.
        assert!(runtime.block_on(backend.write(line("fourth"))));
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "first\nsecond\nfourth\n"
        );
        assert_eq!(counters.write_errors.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn rotated_files_are_gzipped_with_compress() {
        use std::io::Read;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        let config = AuditConfig {
            compress: true,
            ..config(0)
        };
        let mut log = Rotating::open(&path, &config).unwrap();
        let line = vec![b'x'; 600 * 1024];
        for _ in 0..3 {
            log.write_all(&line).unwrap();
        }
        let backups = log.backups();
        assert_eq!(backups.len(), 2, "{backups:?}");
        for (_, backup) in &backups {
            let name = backup.file_name().unwrap().to_string_lossy().into_owned();
            assert!(
                name.starts_with("audit-") && name.ends_with(".log.gz"),
                "{name}"
            );
            let mut text = Vec::new();
            flate2::read::GzDecoder::new(File::open(backup).unwrap())
                .read_to_end(&mut text)
                .unwrap();
            assert_eq!(text, line);
        }
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 600 * 1024);
    }

    #[test]
    fn a_line_longer_than_a_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        let mut log = Rotating::open(&path, &config(0)).unwrap();
        let error = log.write_all(&vec![b'x'; 1024 * 1024 + 1]).unwrap_err();
        assert_eq!(
            error.to_string(),
            "write length 1048577 exceeds maximum file size 1048576"
        );
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
    }
}

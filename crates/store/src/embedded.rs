//! The embedded backend: a durable MVCC store in one [redb](https://docs.rs/redb) file.
//!
//! # Layout
//!
//! The file `watchkeeper.redb` in the data directory holds three tables:
//!
//! - `kv`: `(key, revision) -> version`, like etcd's key index plus its revision-keyed
//!   bucket: every retained version of every key, deletions as tombstones. A read at
//!   revision `r` takes, per key, the newest version `<= r`.
//! - `log`: `revision -> events`: every retained revision's events with their previous
//!   values, so a watch from a past revision is one sequential scan (no per-event lookups).
//!   This duplicates values (about twice the space of `kv` alone) in exchange for cheap
//!   catch-up.
//! - `meta`: the current revision, the compaction floor and the accounted size (below).
//!
//! # Guarantees
//!
//! - **Atomic revisions.** A transaction's versions, its log entry and the new current
//!   revision are written in one redb write transaction: after any crash either all of a
//!   revision is present or none of it.
//! - **Durability.** With [`EmbeddedConfig::durable_commits`] (the default) a transaction is
//!   acknowledged only after the redb commit holding it is fsynced
//!   (`redb::Durability::Immediate`): an acknowledged write survives `kill -9` and power
//!   loss. Turned off, commits are not fsynced: a crash can lose the latest acknowledged
//!   writes (whole revisions, never part of one).
//! - **Group commit.** Transactions queue; one committer at a time (a task on tokio's
//!   blocking pool, started by the first transaction to find none running) takes every
//!   queued transaction, up to [`EmbeddedConfig::commit_batch_max`], applies them one after
//!   the other in one redb write transaction — each at its own revision, each evaluated
//!   against the state its predecessors left, exactly as if they had run one by one — and
//!   commits once: one fsync for the whole batch. Then it answers every transaction of the
//!   batch and takes the next batch, which the transactions that arrived during the fsync
//!   form. A lone writer pays one commit per transaction as before; `n` concurrent writers
//!   share commits. If anything in a batch fails (a storage error, the commit itself) the
//!   whole batch is abandoned and every transaction in it gets the error: none of it was
//!   committed.
//! - **One writer.** Batches and compactions are serialized by a mutex; reads run
//!   concurrently on redb's MVCC snapshots and never block writers.
//! - **Watches** never poll the disk: writers bump a `tokio::sync::watch` of the latest
//!   revision after each commit, and watches read new revisions from the log. A slow
//!   watcher costs its channel plus one batch of decoded revisions and never blocks
//!   writers; it reads back from the log where it stopped (see [`crate::watch`]).
//! - **Compaction** at `c` removes versions not visible at `c` or later and log entries
//!   below `c`, in one write transaction (writers wait meanwhile). It runs on request and
//!   automatically: whenever a batch's commit reaches or passes a multiple `m` of
//!   [`EmbeddedConfig::auto_compact_every`], the store compacts to `m` −
//!   [`EmbeddedConfig::retain_revisions`] (before answering the batch). A watcher that
//!   falls behind the floor ends with `Compacted`. Freed pages are reused by redb; the file does not shrink.
//! - **Quota.** The bytes of the `kv` and `log` entries are accounted, and a transaction with
//!   a put that would take them above [`EmbeddedConfig::quota_bytes`] is refused with
//!   [`TxnError::NoSpace`] (see [`crate::quota`]); the other transactions of its batch commit
//!   as if it had never been sent. The count is kept in `meta`, written in the same redb
//!   transaction as the entries it counts (so it is exact after any crash); a database written
//!   before the quota existed has it computed once at open.
//!
//! All disk work runs on tokio's blocking pool (`spawn_blocking`).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition};
use tokio::sync::{oneshot, watch};

use crate::error::storage;
use crate::memory::{check_read_revision, validate_progress};
use crate::mvcc::{self, Plan};
use crate::quota::{self, Meter};
use crate::types::KeyBounds;
use crate::watch::{LogRead, LogSource, LogWatchSettings, log_watch};
use crate::{
    BackendError, CompactError, Event, EventKind, KeySelector, KeyValue, OpenError, QuotaUsage,
    RangeError, RangeRequest, RangeResponse, Store, StoreCounters, TxnError, TxnRequest,
    TxnResponse, Watch, WatchError,
};

const KV: TableDefinition<(&[u8], u64), &[u8]> = TableDefinition::new("kv");
const LOG: TableDefinition<u64, &[u8]> = TableDefinition::new("log");
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
const META_CURRENT: &str = "current";
const META_COMPACTED: &str = "compacted";
/// The accounted size in bytes (see [`crate::quota`]).
const META_ACCOUNTED: &str = "accounted_bytes";
/// The database file inside [`EmbeddedConfig::data_dir`].
const FILE_NAME: &str = "watchkeeper.redb";

/// Configuration of [`EmbeddedStore`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EmbeddedConfig {
    /// Directory holding the database file (`watchkeeper.redb`); created if missing.
    pub data_dir: PathBuf,
    /// Fsync every commit before acknowledging it. Default `true`. `false` trades the
    /// latest acknowledged writes on a crash for write throughput.
    pub durable_commits: bool,
    /// Revisions of history kept by automatic compaction (the floor is set to current −
    /// this). `0` disables automatic compaction. Default 100 000 revisions.
    pub retain_revisions: u64,
    /// Run automatic compaction each time the current revision is a multiple of this
    /// many revisions. Default 1000; ≥ 1.
    pub auto_compact_every: u64,
    /// redb page cache size in bytes. Default 64 MiB.
    pub cache_size_bytes: usize,
    /// Most transactions committed together in one redb commit (one fsync) when several are
    /// waiting (group commit). Default 256 transactions; ≥ 1 (1: one commit per
    /// transaction).
    pub commit_batch_max: usize,
    /// Most revisions a watch reads from the log at once. Default 1000; ≥ 1.
    pub watch_batch_revisions: u64,
    /// How often a caught-up, idle watch sends a progress item; `None` disables.
    /// Default 1 s; at least 1 ms when set.
    pub progress_interval: Option<Duration>,
    /// The most bytes the store may hold (see [`crate::quota`]); `0` = no quota. Default
    /// 2 GiB, etcd's default `--quota-backend-bytes`.
    pub quota_bytes: u64,
}

impl EmbeddedConfig {
    /// Defaults, storing in `data_dir`.
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        Self {
            data_dir: data_dir.into(),
            durable_commits: true,
            retain_revisions: 100_000,
            auto_compact_every: 1000,
            cache_size_bytes: 64 << 20,
            commit_batch_max: 256,
            watch_batch_revisions: 1000,
            progress_interval: Some(Duration::from_secs(1)),
            quota_bytes: quota::DEFAULT_QUOTA_BYTES,
        }
    }

    /// Checks every value is in range.
    pub fn validate(&self) -> Result<(), OpenError> {
        let bad = |m: &str| Err(OpenError::InvalidConfig(m.into()));
        if self.data_dir.as_os_str().is_empty() {
            return bad("data_dir must not be empty");
        }
        if self.auto_compact_every == 0 {
            return bad("auto_compact_every must be at least 1");
        }
        if self.commit_batch_max == 0 {
            return bad("commit_batch_max must be at least 1");
        }
        if self.watch_batch_revisions == 0 {
            return bad("watch_batch_revisions must be at least 1");
        }
        validate_progress(self.progress_interval)
    }
}

/// What [`EmbeddedStore::check_integrity`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IntegrityReport {
    /// The current revision.
    pub current: u64,
    /// The compaction floor.
    pub compacted: u64,
    /// Revisions in the change log.
    pub log_revisions: u64,
    /// Key versions (including tombstones) in the `kv` table.
    pub kv_versions: u64,
    /// The accounted size (see [`crate::quota`]), recomputed from the tables: equal to the
    /// stored count, or the check fails.
    pub accounted_bytes: u64,
}

/// The durable embedded store. Cloning shares the same open database.
#[derive(Clone)]
pub struct EmbeddedStore {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for EmbeddedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedStore")
            .field("data_dir", &self.inner.config.data_dir)
            .field("current", &*self.inner.rev_tx.borrow())
            .finish()
    }
}

struct Inner {
    db: Database,
    /// Serializes redb write transactions (batches and compactions) so revision
    /// notifications go out in order.
    writer: Mutex<()>,
    /// Transactions waiting for the committer.
    queue: Mutex<Queue>,
    /// redb commits of transaction batches (each one fsync when durable).
    commits: std::sync::atomic::AtomicU64,
    rev_tx: watch::Sender<u64>,
    counters: StoreCounters,
    /// The quota and the accounted size; changed only under `writer`, after the commit that
    /// stored the new size in `meta`.
    meter: Meter,
    config: EmbeddedConfig,
}

/// The group commit's queue.
#[derive(Default)]
struct Queue {
    pending: Vec<Queued>,
    /// A committer is running (or about to): it will take what is pending.
    committing: bool,
}

/// A batch's answers, one per transaction, its (first, last) new revision, and the accounted
/// size after it.
type Applied = (Vec<Result<TxnResponse, TxnError>>, Option<(u64, u64)>, u64);

/// A committed transaction's answer and where it goes.
type Answer = (
    oneshot::Sender<Result<TxnResponse, TxnError>>,
    Result<TxnResponse, TxnError>,
);

/// Sends answers (a caller that stopped waiting is skipped).
fn send_answers(answers: Vec<Answer>) {
    for (reply, answer) in answers {
        let _ = reply.send(answer);
    }
}

/// A transaction waiting to be committed, with where its answer goes.
struct Queued {
    req: TxnRequest,
    reply: oneshot::Sender<Result<TxnResponse, TxnError>>,
}

/// Held by a committer; if it ends without emptying the queue (its task panicked, or the
/// runtime dropped it before it ran), it fails what is queued — dropping the answer
/// channels, so those callers get an error instead of waiting forever — and lets the next
/// transaction start a new committer.
struct CommitterGuard {
    inner: Arc<Inner>,
    /// The committer emptied the queue and cleared `committing` itself.
    finished: bool,
}

impl Drop for CommitterGuard {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        let mut queue = self.inner.queue();
        queue.pending.clear();
        queue.committing = false;
    }
}

impl EmbeddedStore {
    /// Opens (or creates) the store in `config.data_dir`. Blocks on disk I/O (including
    /// redb's recovery after a crash); call it at startup or inside `spawn_blocking`.
    pub fn open(config: EmbeddedConfig) -> Result<Self, OpenError> {
        config.validate()?;
        std::fs::create_dir_all(&config.data_dir).map_err(storage)?;
        let db = Database::builder()
            .set_cache_size(config.cache_size_bytes)
            .create(config.data_dir.join(FILE_NAME))
            .map_err(storage)?;
        let (current, accounted) = init(&db).map_err(storage)?;
        let (rev_tx, _) = watch::channel(current);
        Ok(Self {
            inner: Arc::new(Inner {
                db,
                writer: Mutex::new(()),
                queue: Mutex::new(Queue::default()),
                commits: std::sync::atomic::AtomicU64::new(0),
                rev_tx,
                counters: StoreCounters::default(),
                meter: Meter::new(config.quota_bytes, accounted),
                config,
            }),
        })
    }

    /// The data directory.
    pub fn data_dir(&self) -> &Path {
        &self.inner.config.data_dir
    }

    /// redb commits of transaction batches so far (each one fsync with durable commits);
    /// with concurrent writers fewer than the transactions committed (group commit).
    pub fn commits(&self) -> u64 {
        self.inner
            .commits
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The compaction floor: the oldest revision still readable (0 before any compaction).
    pub fn compact_revision(&self) -> Result<u64, BackendError> {
        let rtxn = self.inner.db.begin_read().map_err(storage)?;
        let meta = rtxn.open_table(META).map_err(storage)?;
        meta_get(&meta, META_COMPACTED).map_err(storage)
    }

    /// Verifies the whole database (slow; for tests and diagnostics): every log revision
    /// decodes and matches the `kv` table, every retained version after the floor has its
    /// log entry, and no revision between the floor and the current one is missing.
    pub fn check_integrity(&self) -> Result<IntegrityReport, BackendError> {
        let corrupt = |m: String| BackendError::Storage(format!("integrity: {m}"));
        let rtxn = self.inner.db.begin_read().map_err(storage)?;
        let meta = rtxn.open_table(META).map_err(storage)?;
        let current = meta_get(&meta, META_CURRENT).map_err(storage)?;
        let compacted = meta_get(&meta, META_COMPACTED).map_err(storage)?;
        let kv = rtxn.open_table(KV).map_err(storage)?;
        let log = rtxn.open_table(LOG).map_err(storage)?;
        let mut expected = compacted.max(2);
        let mut log_revisions = 0;
        for item in log.iter().map_err(storage)? {
            let (r, v) = item.map_err(storage)?;
            let rev = r.value();
            if rev < compacted || rev > current {
                return Err(corrupt(format!(
                    "log revision {rev} outside [{compacted}, {current}]"
                )));
            }
            if rev != expected {
                return Err(corrupt(format!("log revision {expected} missing")));
            }
            expected += 1;
            log_revisions += 1;
            let events = decode_events(rev, v.value())?;
            if events.is_empty() {
                return Err(corrupt(format!("log revision {rev} has no events")));
            }
            for ev in events {
                let stored = kv
                    .get((ev.kv.key.as_ref(), rev))
                    .map_err(storage)?
                    .map(|g| decode_version(&ev.kv.key, rev, g.value()))
                    .transpose()?;
                let ok = match (ev.kind, stored) {
                    (EventKind::Put, Some(Some(kv))) => kv == ev.kv,
                    (EventKind::Delete, Some(None)) => true,
                    (EventKind::Delete, None) => rev == compacted,
                    _ => false,
                };
                if !ok {
                    return Err(corrupt(format!("kv does not match log at revision {rev}")));
                }
            }
        }
        if expected <= current && current >= compacted.max(2) {
            return Err(corrupt(format!(
                "log revisions {expected}..={current} missing"
            )));
        }
        let accounted = accounted_bytes(&kv, &log).map_err(storage)?;
        let stored = meta_get(&meta, META_ACCOUNTED).map_err(storage)?;
        if accounted != stored {
            return Err(corrupt(format!(
                "accounted size {stored} but the tables hold {accounted} bytes"
            )));
        }
        let mut kv_versions = 0;
        for item in kv.iter().map_err(storage)? {
            let (k, _) = item.map_err(storage)?;
            let (key, rev) = k.value();
            kv_versions += 1;
            if rev > current {
                return Err(corrupt(format!("kv version at future revision {rev}")));
            }
            if rev > compacted {
                let Some(entry) = log.get(rev).map_err(storage)? else {
                    return Err(corrupt(format!("kv version at {rev} without log entry")));
                };
                let events = decode_events(rev, entry.value())?;
                if !events.iter().any(|e| e.kv.key.as_ref() == key) {
                    return Err(corrupt(format!("kv version at {rev} not in its log entry")));
                }
            }
        }
        Ok(IntegrityReport {
            current,
            compacted,
            log_revisions,
            kv_versions,
            accounted_bytes: accounted,
        })
    }

    async fn blocking<T: Send + 'static, E: From<BackendError> + Send + 'static>(
        &self,
        f: impl FnOnce(&Inner) -> Result<T, E> + Send + 'static,
    ) -> Result<T, E> {
        let inner = self.inner.clone();
        match tokio::task::spawn_blocking(move || f(&inner)).await {
            Ok(r) => r,
            Err(e) => Err(BackendError::Storage(format!("store task failed: {e}")).into()),
        }
    }
}

/// Creates the tables if missing; returns the current revision and the accounted size
/// (computed and stored once, for a database written before the quota existed).
fn init(db: &Database) -> Result<(u64, u64), redb::Error> {
    let wtxn = db.begin_write()?;
    let (current, accounted);
    {
        let mut meta = wtxn.open_table(META)?;
        let existing = meta.get(META_CURRENT)?.map(|g| g.value());
        current = match existing {
            Some(c) => c,
            None => {
                meta.insert(META_CURRENT, 1)?;
                meta.insert(META_COMPACTED, 0)?;
                1
            }
        };
        let kv = wtxn.open_table(KV)?;
        let log = wtxn.open_table(LOG)?;
        let stored = meta.get(META_ACCOUNTED)?.map(|g| g.value());
        accounted = match stored {
            Some(a) => a,
            None => {
                let a = accounted_bytes(&kv, &log)?;
                meta.insert(META_ACCOUNTED, a)?;
                a
            }
        };
    }
    wtxn.commit()?;
    Ok((current, accounted))
}

/// The accounted size of the tables, entry by entry (slow: at open of an old database and in
/// the integrity check). Each entry is its key and value bytes, which is what
/// [`quota::version_bytes`] and [`quota::log_bytes`] compute for what they encode.
fn accounted_bytes(
    kv: &impl ReadableTable<(&'static [u8], u64), &'static [u8]>,
    log: &impl ReadableTable<u64, &'static [u8]>,
) -> Result<u64, redb::Error> {
    let mut total = 0u64;
    for item in kv.iter()? {
        let (k, v) = item?;
        total += (k.value().0.len() + 8 + v.value().len()) as u64;
    }
    for item in log.iter()? {
        let (_, v) = item?;
        total += (8 + v.value().len()) as u64;
    }
    Ok(total)
}

fn meta_get(meta: &impl ReadableTable<&'static str, u64>, name: &str) -> Result<u64, redb::Error> {
    Ok(meta.get(name)?.map(|g| g.value()).unwrap_or(0))
}

/// A key being scanned by `range`, with its newest raw version at or below the read
/// revision.
type Pending = Option<(Vec<u8>, Option<(u64, Vec<u8>)>)>;

/// The newest version of `key`, `None` if absent or deleted.
fn latest(
    kv: &impl ReadableTable<(&'static [u8], u64), &'static [u8]>,
    key: &Bytes,
) -> Result<Option<KeyValue>, BackendError> {
    let mut it = kv
        .range((key.as_ref(), 0u64)..=(key.as_ref(), u64::MAX))
        .map_err(storage)?;
    match it.next_back() {
        None => Ok(None),
        Some(item) => {
            let (k, v) = item.map_err(storage)?;
            decode_version(key, k.value().1, v.value())
        }
    }
}

impl Inner {
    fn durability(&self) -> Durability {
        if self.config.durable_commits {
            Durability::Immediate
        } else {
            Durability::None
        }
    }

    fn range(&self, req: &RangeRequest) -> Result<RangeResponse, RangeError> {
        let rtxn = self.db.begin_read().map_err(storage)?;
        let meta = rtxn.open_table(META).map_err(storage)?;
        let current = meta_get(&meta, META_CURRENT).map_err(storage)?;
        let compacted = meta_get(&meta, META_COMPACTED).map_err(storage)?;
        let rev = check_read_revision(req.revision, current, compacted)?;
        let bounds = KeyBounds::new(&req.keys, req.start.as_ref());
        let mut out = RangeResponse {
            kvs: Vec::new(),
            more: false,
            revision: rev,
        };
        if bounds.is_empty() {
            return Ok(out);
        }
        let kv = rtxn.open_table(KV).map_err(storage)?;
        let lo = (bounds.lo.as_ref(), 0u64);
        let iter = match &bounds.hi {
            Some(hi) => kv.range(lo..(hi.as_ref(), 0u64)),
            None => kv.range(lo..),
        }
        .map_err(storage)?;
        // Versions come sorted by (key, revision): remember the newest version <= rev of
        // the current key, emit it when the key changes.
        let mut cur: Pending = None;
        let emit = |cur: Pending, out: &mut RangeResponse| -> Result<bool, BackendError> {
            if let Some((key, Some((r, raw)))) = cur
                && let Some(kv) = decode_version(&Bytes::from(key), r, &raw)?
            {
                if req.limit > 0 && out.kvs.len() == req.limit {
                    out.more = true;
                    return Ok(false);
                }
                out.kvs.push(kv);
            }
            Ok(true)
        };
        for item in iter {
            let (k, v) = item.map_err(storage)?;
            let (key, r) = k.value();
            if cur.as_ref().is_none_or(|(ck, _)| ck.as_slice() != key) {
                if !emit(cur.take(), &mut out)? {
                    return Ok(out);
                }
                cur = Some((key.to_vec(), None));
            }
            if r <= rev
                && let Some((_, best)) = cur.as_mut()
            {
                *best = Some((r, v.value().to_vec()));
            }
        }
        emit(cur, &mut out)?;
        Ok(out)
    }

    fn queue(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The committer: commits batches of queued transactions until the queue is empty. The
    /// last batch's answers go out after the committer has let go of the store, so a caller
    /// that has its answer and drops the store's last handle closes the database (a reopen
    /// does not find it still held).
    fn run_committer(mut guard: CommitterGuard) {
        let mut answers: Vec<Answer> = Vec::new();
        loop {
            let inner = &*guard.inner;
            let batch: Vec<Queued> = {
                let mut queue = inner.queue();
                if queue.pending.is_empty() {
                    queue.committing = false;
                    break;
                }
                let n = queue.pending.len().min(inner.config.commit_batch_max);
                queue.pending.drain(..n).collect()
            };
            // The previous batch's answers: more work was queued, so this committer goes on.
            send_answers(std::mem::take(&mut answers));
            answers = inner.commit_batch(batch);
        }
        // The queue was empty and `committing` is cleared: a transaction queued from now on
        // starts a new committer, which this guard must not disturb.
        guard.finished = true;
        drop(guard);
        send_answers(answers);
    }

    /// Commits one batch; returns each of its transactions' answer, to be sent.
    fn commit_batch(&self, batch: Vec<Queued>) -> Vec<Answer> {
        let _w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let (responses, span, accounted) = match self.apply_batch(&batch) {
            Ok(done) => done,
            Err(e) => {
                return batch
                    .into_iter()
                    .map(|queued| (queued.reply, Err(e.clone().into())))
                    .collect();
            }
        };
        if let Some((first, last)) = span {
            self.meter.set(accounted);
            self.rev_tx.send_replace(last);
            // Automatic compaction, before the answers (as when each transaction committed
            // alone: a caller that reached a multiple finds the floor moved).
            let every = self.config.auto_compact_every;
            let retain = self.config.retain_revisions;
            let multiple = last - last % every;
            if retain > 0 && multiple >= first && multiple > retain {
                match self.compact_locked(multiple - retain) {
                    Ok(()) | Err(CompactError::AlreadyCompacted { .. }) => {}
                    Err(e) => tracing::warn!(error = %e, "automatic compaction failed"),
                }
            }
        }
        batch
            .into_iter()
            .zip(responses)
            .map(|(queued, response)| (queued.reply, response))
            .collect()
    }

    /// Applies `batch` in one redb write transaction, each transaction at its own revision
    /// against the state the previous ones left, and commits it (one fsync when durable).
    /// Returns each transaction's answer, the (first, last) new revision, `None` when no
    /// transaction changed anything (then nothing is committed), and the accounted size after
    /// the batch. A transaction the quota refuses is answered [`TxnError::NoSpace`] and writes
    /// nothing; the next one is evaluated as if it had not been sent. The caller holds
    /// `writer`.
    fn apply_batch(&self, batch: &[Queued]) -> Result<Applied, BackendError> {
        let mut wtxn = self.db.begin_write().map_err(storage)?;
        wtxn.set_durability(self.durability()).map_err(storage)?;
        let mut responses = Vec::with_capacity(batch.len());
        let mut span: Option<(u64, u64)> = None;
        let mut accounted;
        {
            let mut meta = wtxn.open_table(META).map_err(storage)?;
            let mut kv = wtxn.open_table(KV).map_err(storage)?;
            let mut log = wtxn.open_table(LOG).map_err(storage)?;
            let mut current = meta_get(&meta, META_CURRENT).map_err(storage)?;
            accounted = meta_get(&meta, META_ACCOUNTED).map_err(storage)?;
            for queued in batch {
                let rev = current + 1;
                let response = match mvcc::plan(&queued.req, rev, |k| latest(&kv, k))? {
                    Plan::Failed(cur) => {
                        self.counters.conflict();
                        Ok(TxnResponse {
                            succeeded: false,
                            revision: current,
                            events: Vec::new(),
                            current: cur,
                        })
                    }
                    Plan::Apply(events) if events.is_empty() => Ok(TxnResponse {
                        succeeded: true,
                        revision: current,
                        events,
                        current: Vec::new(),
                    }),
                    Plan::Apply(events) => {
                        match self.meter.admit(accounted, &queued.req, &events) {
                            Err(refused) => Err(refused),
                            Ok(after) => {
                                accounted = after;
                                for ev in &events {
                                    let enc = encode_version(ev);
                                    kv.insert((ev.kv.key.as_ref(), rev), enc.as_slice())
                                        .map_err(storage)?;
                                }
                                log.insert(rev, encode_events(&events).as_slice())
                                    .map_err(storage)?;
                                current = rev;
                                span = Some((span.map_or(rev, |(first, _)| first), rev));
                                Ok(TxnResponse {
                                    succeeded: true,
                                    revision: rev,
                                    events,
                                    current: Vec::new(),
                                })
                            }
                        }
                    }
                };
                responses.push(response);
            }
            if span.is_some() {
                meta.insert(META_CURRENT, current).map_err(storage)?;
                meta.insert(META_ACCOUNTED, accounted).map_err(storage)?;
            }
        }
        if span.is_some() {
            wtxn.commit().map_err(storage)?;
            self.commits
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        } else {
            wtxn.abort().map_err(storage)?;
        }
        Ok((responses, span, accounted))
    }

    fn compact(&self, floor: u64) -> Result<(), CompactError> {
        let _w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        self.compact_locked(floor)
    }

    /// Compacts; the caller holds `writer`.
    fn compact_locked(&self, floor: u64) -> Result<(), CompactError> {
        let mut wtxn = self.db.begin_write().map_err(storage)?;
        wtxn.set_durability(self.durability()).map_err(storage)?;
        let accounted;
        {
            let mut meta = wtxn.open_table(META).map_err(storage)?;
            let current = meta_get(&meta, META_CURRENT).map_err(storage)?;
            let compacted = meta_get(&meta, META_COMPACTED).map_err(storage)?;
            if floor <= compacted {
                return Err(CompactError::AlreadyCompacted {
                    requested: floor,
                    compact_revision: compacted,
                });
            }
            if floor > current {
                return Err(CompactError::FutureRevision {
                    requested: floor,
                    current,
                });
            }
            let mut kv = wtxn.open_table(KV).map_err(storage)?;
            let mut doomed: Vec<(Vec<u8>, u64)> = Vec::new();
            {
                // Per key, the versions <= floor: all but the newest go, and the newest
                // too when it is a deletion.
                let mut key: Vec<u8> = Vec::new();
                let mut below: Vec<(u64, bool)> = Vec::new();
                let mut flush = |key: &[u8], below: &mut Vec<(u64, bool)>| {
                    let keep_last = below.last().is_some_and(|(_, live)| *live);
                    let n = below.len() - usize::from(keep_last && !below.is_empty());
                    doomed.extend(below.drain(..).take(n).map(|(r, _)| (key.to_vec(), r)));
                };
                for item in kv.iter().map_err(storage)? {
                    let (k, v) = item.map_err(storage)?;
                    let (k, r) = k.value();
                    if k != key.as_slice() {
                        flush(&key, &mut below);
                        key = k.to_vec();
                    }
                    if r <= floor {
                        below.push((r, v.value().first() == Some(&1)));
                    }
                }
                flush(&key, &mut below);
            }
            // The bytes freed, entry by entry as `accounted_bytes` counts them.
            let mut freed = 0u64;
            for (k, r) in &doomed {
                if let Some(old) = kv.remove((k.as_slice(), *r)).map_err(storage)? {
                    freed += (k.len() + 8 + old.value().len()) as u64;
                }
            }
            let mut log = wtxn.open_table(LOG).map_err(storage)?;
            log.retain_in(..floor, |_, entry| {
                freed += (8 + entry.len()) as u64;
                false
            })
            .map_err(storage)?;
            meta.insert(META_COMPACTED, floor).map_err(storage)?;
            accounted = meta_get(&meta, META_ACCOUNTED)
                .map_err(storage)?
                .saturating_sub(freed);
            meta.insert(META_ACCOUNTED, accounted).map_err(storage)?;
        }
        wtxn.commit().map_err(storage)?;
        self.meter.set(accounted);
        self.counters.compaction();
        tracing::debug!(floor, "compacted embedded store");
        Ok(())
    }

    fn read_log(
        &self,
        bounds: &KeyBounds,
        from: u64,
        max_revs: u64,
    ) -> Result<LogRead, BackendError> {
        let rtxn = self.db.begin_read().map_err(storage)?;
        let meta = rtxn.open_table(META).map_err(storage)?;
        let current = meta_get(&meta, META_CURRENT).map_err(storage)?;
        let compacted = meta_get(&meta, META_COMPACTED).map_err(storage)?;
        if from < compacted {
            return Ok(LogRead::Compacted {
                compact_revision: compacted,
            });
        }
        let mut items = Vec::new();
        if from > current {
            return Ok(LogRead::Batch {
                items,
                next: from,
                current,
            });
        }
        let upto = current.min(from.saturating_add(max_revs - 1));
        let log = rtxn.open_table(LOG).map_err(storage)?;
        for item in log.range(from..=upto).map_err(storage)? {
            let (r, v) = item.map_err(storage)?;
            let rev = r.value();
            let mut events = decode_events(rev, v.value())?;
            events.retain(|e| bounds.contains(&e.kv.key));
            if !events.is_empty() {
                items.push((rev, events));
            }
        }
        Ok(LogRead::Batch {
            items,
            next: upto + 1,
            current,
        })
    }
}

impl LogSource for EmbeddedStore {
    async fn read_log(
        &self,
        bounds: Arc<KeyBounds>,
        from: u64,
        max_revs: u64,
    ) -> Result<LogRead, BackendError> {
        self.blocking(move |inner| inner.read_log(&bounds, from, max_revs))
            .await
    }

    fn subscribe(&self) -> watch::Receiver<u64> {
        self.inner.rev_tx.subscribe()
    }
}

impl Store for EmbeddedStore {
    async fn current_revision(&self) -> Result<u64, RangeError> {
        Ok(*self.inner.rev_tx.borrow())
    }

    async fn range(&self, req: RangeRequest) -> Result<RangeResponse, RangeError> {
        self.inner.counters.range();
        self.blocking(move |inner| inner.range(&req)).await
    }

    async fn txn(&self, req: TxnRequest) -> Result<TxnResponse, TxnError> {
        self.inner.counters.txn();
        mvcc::check_duplicates(&req)?;
        let (reply, answer) = oneshot::channel();
        let start = {
            let mut queue = self.inner.queue();
            queue.pending.push(Queued { req, reply });
            !std::mem::replace(&mut queue.committing, true)
        };
        if start {
            let guard = CommitterGuard {
                inner: self.inner.clone(),
                finished: false,
            };
            // The task is detached: the batch commits whether or not its callers still wait.
            drop(tokio::task::spawn_blocking(move || {
                Inner::run_committer(guard);
            }));
        }
        match answer.await {
            Ok(result) => result,
            Err(_) => Err(BackendError::Storage("store committer failed".into()).into()),
        }
    }

    async fn watch(&self, keys: KeySelector, from_revision: u64) -> Result<Watch, WatchError> {
        self.inner.counters.watch();
        let next = if from_revision == 0 {
            *self.inner.rev_tx.borrow() + 1
        } else {
            from_revision
        };
        let settings = LogWatchSettings {
            progress_interval: self.inner.config.progress_interval,
            batch_revisions: self.inner.config.watch_batch_revisions,
        };
        Ok(log_watch(
            self.clone(),
            KeyBounds::new(&keys, None),
            next,
            settings,
        ))
    }

    async fn compact(&self, revision: u64) -> Result<(), CompactError> {
        self.blocking(move |inner| inner.compact(revision)).await
    }

    fn counters(&self) -> &StoreCounters {
        &self.inner.counters
    }

    fn quota_usage(&self) -> Option<QuotaUsage> {
        Some(self.inner.meter.usage())
    }
}

// ---- encoding -------------------------------------------------------------------------
//
// A version in `kv`: `[0]` for a deletion, or `[1] create_revision:u64be version:u64be
// value`. A log entry: `count:u32be` then per event `kind:u8 (0 put, 1 delete)
// key_len:u32be key value_len:u32be value create:u64be version:u64be has_prev:u8` and,
// when `has_prev` is 1, `value_len:u32be value create:u64be mod:u64be version:u64be`.

fn encode_version(ev: &Event) -> Vec<u8> {
    match ev.kind {
        EventKind::Delete => vec![0],
        EventKind::Put => {
            let mut b = Vec::with_capacity(17 + ev.kv.value.len());
            b.push(1);
            b.extend_from_slice(&ev.kv.create_revision.to_be_bytes());
            b.extend_from_slice(&ev.kv.version.to_be_bytes());
            b.extend_from_slice(&ev.kv.value);
            b
        }
    }
}

fn decode_version(key: &Bytes, rev: u64, raw: &[u8]) -> Result<Option<KeyValue>, BackendError> {
    match raw.first() {
        Some(0) => Ok(None),
        Some(1) => {
            let mut r = Reader(&raw[1..]);
            let create_revision = r.u64()?;
            let version = r.u64()?;
            Ok(Some(KeyValue {
                key: key.clone(),
                value: Bytes::copy_from_slice(r.0),
                create_revision,
                mod_revision: rev,
                version,
            }))
        }
        _ => Err(BackendError::Storage(format!(
            "corrupt version at revision {rev}"
        ))),
    }
}

fn put_bytes(b: &mut Vec<u8>, s: &[u8]) {
    // Keys and values above 4 GiB cannot reach here: redb limits values to 3 GiB.
    b.extend_from_slice(&(s.len() as u32).to_be_bytes());
    b.extend_from_slice(s);
}

fn encode_events(events: &[Event]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&(events.len() as u32).to_be_bytes());
    for ev in events {
        b.push(match ev.kind {
            EventKind::Put => 0,
            EventKind::Delete => 1,
        });
        put_bytes(&mut b, &ev.kv.key);
        put_bytes(&mut b, &ev.kv.value);
        b.extend_from_slice(&ev.kv.create_revision.to_be_bytes());
        b.extend_from_slice(&ev.kv.version.to_be_bytes());
        match &ev.prev_kv {
            None => b.push(0),
            Some(p) => {
                b.push(1);
                put_bytes(&mut b, &p.value);
                b.extend_from_slice(&p.create_revision.to_be_bytes());
                b.extend_from_slice(&p.mod_revision.to_be_bytes());
                b.extend_from_slice(&p.version.to_be_bytes());
            }
        }
    }
    b
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], BackendError> {
        if self.0.len() < n {
            return Err(BackendError::Storage("corrupt log entry".into()));
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Ok(a)
    }
    fn u8(&mut self) -> Result<u8, BackendError> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32, BackendError> {
        let mut a = [0; 4];
        a.copy_from_slice(self.take(4)?);
        Ok(u32::from_be_bytes(a))
    }
    fn u64(&mut self) -> Result<u64, BackendError> {
        let mut a = [0; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(u64::from_be_bytes(a))
    }
    fn bytes(&mut self) -> Result<Bytes, BackendError> {
        let n = self.u32()? as usize;
        Ok(Bytes::copy_from_slice(self.take(n)?))
    }
}

fn decode_events(rev: u64, raw: &[u8]) -> Result<Vec<Event>, BackendError> {
    let mut r = Reader(raw);
    let n = r.u32()? as usize;
    let mut events = Vec::with_capacity(n.min(1024));
    for _ in 0..n {
        let kind = match r.u8()? {
            0 => EventKind::Put,
            1 => EventKind::Delete,
            _ => return Err(BackendError::Storage("corrupt log entry".into())),
        };
        let key = r.bytes()?;
        let value = r.bytes()?;
        let create_revision = r.u64()?;
        let version = r.u64()?;
        let prev_kv = match r.u8()? {
            0 => None,
            _ => Some(KeyValue {
                key: key.clone(),
                value: r.bytes()?,
                create_revision: r.u64()?,
                mod_revision: r.u64()?,
                version: r.u64()?,
            }),
        };
        events.push(Event {
            kind,
            kv: KeyValue {
                key,
                value,
                create_revision,
                mod_revision: rev,
                version,
            },
            prev_kv,
        });
    }
    if !r.0.is_empty() {
        return Err(BackendError::Storage("corrupt log entry".into()));
    }
    Ok(events)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_round_trip_and_reject_garbage() {
        let kv = |v: &'static str, r| KeyValue {
            key: Bytes::from_static(b"k"),
            value: Bytes::from_static(v.as_bytes()),
            create_revision: 2,
            mod_revision: r,
            version: r - 1,
        };
        let events = vec![
            Event {
                kind: EventKind::Put,
                kv: kv("new", 7),
                prev_kv: Some(kv("old", 5)),
            },
            Event {
                kind: EventKind::Delete,
                kv: crate::mvcc::tombstone(Bytes::from_static(b"d"), 7),
                prev_kv: None,
            },
        ];
        let enc = encode_events(&events);
        assert_eq!(decode_events(7, &enc).unwrap(), events);
        assert!(decode_events(7, &enc[..enc.len() - 1]).is_err());
        assert!(decode_version(&Bytes::new(), 1, &[9]).is_err());
    }

    /// Goal: the quota's byte counts (`quota::version_bytes`, `quota::log_bytes`), which the
    /// memory store uses and the embedded store adds per write, are exactly the bytes of the
    /// table entries, which the embedded store subtracts on compaction.
    #[test]
    fn accounted_sizes_are_the_encoded_sizes() {
        let kv = |v: &'static str| KeyValue {
            key: Bytes::from_static(b"/registry/k"),
            value: Bytes::from_static(v.as_bytes()),
            create_revision: 2,
            mod_revision: 5,
            version: 3,
        };
        let events = vec![
            Event {
                kind: EventKind::Put,
                kv: kv("new value"),
                prev_kv: Some(kv("old")),
            },
            Event {
                kind: EventKind::Put,
                kv: kv(""),
                prev_kv: None,
            },
            Event {
                kind: EventKind::Delete,
                kv: crate::mvcc::tombstone(Bytes::from_static(b"/d"), 7),
                prev_kv: Some(kv("gone")),
            },
        ];
        let mut total = 0;
        for ev in &events {
            let version = (ev.kind == EventKind::Put).then_some(&ev.kv);
            let entry = ev.kv.key.len() + 8 + encode_version(ev).len();
            assert_eq!(quota::version_bytes(&ev.kv.key, version), entry as u64);
            total += entry as u64;
        }
        let log = 8 + encode_events(&events).len() as u64;
        assert_eq!(quota::log_bytes(&events), log);
        assert_eq!(quota::revision_bytes(&events), total + log);
    }

    /// Goal: a database written before the quota existed (no account in `meta`) gets its
    /// account computed at open, equal to the one kept by the writes.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_old_database_gets_its_account_at_open() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = EmbeddedConfig::new(dir.path());
        config.durable_commits = false;
        let kept = {
            let store = EmbeddedStore::open(config.clone()).unwrap();
            for n in 0..10 {
                store
                    .put(format!("/k/{}", n % 3), "v".repeat(n))
                    .await
                    .unwrap();
            }
            store.delete("/k/1").await.unwrap();
            store.compact(5).await.unwrap();
            let kept = store.quota_usage().unwrap().used_bytes;
            assert!(kept > 0);
            let wtxn = store.inner.db.begin_write().unwrap();
            wtxn.open_table(META)
                .unwrap()
                .remove(META_ACCOUNTED)
                .unwrap();
            wtxn.commit().unwrap();
            kept
        };
        let store = EmbeddedStore::open(config).unwrap();
        assert_eq!(store.quota_usage().unwrap().used_bytes, kept);
        assert_eq!(store.check_integrity().unwrap().accounted_bytes, kept);
    }

    #[test]
    fn config_validation() {
        assert!(EmbeddedConfig::new("/tmp/x").validate().is_ok());
        assert!(EmbeddedConfig::new("").validate().is_err());
        let mut c = EmbeddedConfig::new("/tmp/x");
        c.progress_interval = Some(Duration::from_micros(1));
        assert!(c.validate().is_err());
        let mut c = EmbeddedConfig::new("/tmp/x");
        c.commit_batch_max = 0;
        assert!(c.validate().is_err());
    }
}

//! The in-memory backend: a `BTreeMap` MVCC store for tests and the simulator.
//!
//! Deterministic: no background tasks (a watch reads the log in its consumer's task), no
//! clocks except the optional progress interval. Every version of every key is kept until
//! [`compact`] drops what is older than the floor; there is no automatic compaction.
//! Revisions start at 1 (an empty store), as in a fresh etcd, so the first write is revision
//! 2.
//!
//! Bounded by [`MemoryConfig::quota_bytes`] (see [`crate::quota`]): a put that would take the
//! accounted size above it is refused with [`TxnError::NoSpace`]; deletes and compaction always
//! work.
//!
//! One `std::sync::Mutex` guards the state; it is held only for the in-memory work of one
//! operation (never across an `.await`), so operations are linearizable.
//!
//! [`compact`]: crate::Store::compact

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::watch;

use crate::mvcc::{self, Plan};
use crate::quota::{self, Meter};
use crate::types::KeyBounds;
use crate::watch::{LogRead, LogSource, LogWatchSettings, log_watch};
use crate::{
    BackendError, CompactError, Event, KeySelector, KeyValue, OpenError, QuotaUsage, RangeError,
    RangeRequest, RangeResponse, Store, StoreCounters, TxnError, TxnRequest, TxnResponse, Watch,
    WatchError,
};

/// Configuration of [`MemoryStore`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryConfig {
    /// Most revisions a watch reads from the log at once. Default 1000; ≥ 1.
    pub watch_batch_revisions: u64,
    /// How often a caught-up, idle watch sends [`WatchItem::Progress`](crate::WatchItem);
    /// `None` disables progress. Default 1 s; at least 1 ms when set.
    pub progress_interval: Option<Duration>,
    /// The most bytes the store may hold (see [`crate::quota`]); `0` = no quota. Default
    /// 2 GiB, etcd's default `--quota-backend-bytes`.
    pub quota_bytes: u64,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        Self {
            watch_batch_revisions: 1000,
            progress_interval: Some(Duration::from_secs(1)),
            quota_bytes: quota::DEFAULT_QUOTA_BYTES,
        }
    }
}

impl MemoryConfig {
    /// Checks every value is in range.
    pub fn validate(&self) -> Result<(), OpenError> {
        if self.watch_batch_revisions == 0 {
            return Err(OpenError::InvalidConfig(
                "watch_batch_revisions must be at least 1".into(),
            ));
        }
        validate_progress(self.progress_interval)
    }
}

pub(crate) fn validate_progress(p: Option<Duration>) -> Result<(), OpenError> {
    match p {
        Some(d) if d < Duration::from_millis(1) => Err(OpenError::InvalidConfig(
            "progress_interval must be at least 1 ms".into(),
        )),
        _ => Ok(()),
    }
}

/// The in-memory MVCC store. Cloning shares the same store.
#[derive(Clone, Debug)]
pub struct MemoryStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    state: Mutex<State>,
    rev_tx: watch::Sender<u64>,
    counters: StoreCounters,
    /// The quota and the accounted size; changed only under `state`'s lock.
    meter: Meter,
    config: MemoryConfig,
}

#[derive(Debug)]
struct State {
    current: u64,
    compacted: u64,
    /// Every retained version of each key, ascending by revision; `None` is a deletion.
    keys: BTreeMap<Bytes, Vec<(u64, Option<KeyValue>)>>,
    /// Every retained revision's events, with previous values.
    log: BTreeMap<u64, Vec<Event>>,
}

impl State {
    fn latest(&self, key: &[u8]) -> Option<KeyValue> {
        self.keys
            .get(key)
            .and_then(|h| h.last())
            .and_then(|(_, kv)| kv.clone())
    }
}

impl MemoryStore {
    /// How many handles hold the store (this one, its clones, its watches).
    #[cfg(test)]
    pub(crate) fn holders(&self) -> usize {
        Arc::strong_count(&self.inner)
    }

    /// An empty store at revision 1.
    pub fn new(config: MemoryConfig) -> Result<Self, OpenError> {
        config.validate()?;
        let (rev_tx, _) = watch::channel(1);
        Ok(Self {
            inner: Arc::new(Inner {
                state: Mutex::new(State {
                    current: 1,
                    compacted: 0,
                    keys: BTreeMap::new(),
                    log: BTreeMap::new(),
                }),
                rev_tx,
                counters: StoreCounters::default(),
                meter: Meter::new(config.quota_bytes, 0),
                config,
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The state is only mutated by code that cannot panic midway, so a poisoned lock
        // still guards consistent data.
        self.inner.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The compaction floor: the oldest revision still readable (0 before any compaction).
    pub fn compact_revision(&self) -> u64 {
        self.lock().compacted
    }

    fn range_sync(&self, req: &RangeRequest) -> Result<RangeResponse, RangeError> {
        let st = self.lock();
        let rev = check_read_revision(req.revision, st.current, st.compacted)?;
        let bounds = KeyBounds::new(&req.keys, req.start.as_ref());
        let mut kvs = Vec::new();
        let mut more = false;
        if !bounds.is_empty() {
            let hi = match &bounds.hi {
                Some(h) => Bound::Excluded(h.as_ref()),
                None => Bound::Unbounded,
            };
            for (_, hist) in st
                .keys
                .range::<[u8], _>((Bound::Included(bounds.lo.as_ref()), hi))
            {
                let idx = hist.partition_point(|(r, _)| *r <= rev);
                if idx == 0 {
                    continue;
                }
                if let Some(kv) = &hist[idx - 1].1 {
                    if req.limit > 0 && kvs.len() == req.limit {
                        more = true;
                        break;
                    }
                    kvs.push(kv.clone());
                }
            }
        }
        Ok(RangeResponse {
            kvs,
            more,
            revision: rev,
        })
    }

    fn txn_sync(&self, req: &TxnRequest) -> Result<TxnResponse, TxnError> {
        mvcc::check_duplicates(req)?;
        let mut st = self.lock();
        let rev = st.current + 1;
        let plan = mvcc::plan::<std::convert::Infallible>(req, rev, |k| Ok(st.latest(k)));
        let Ok(plan) = plan;
        match plan {
            Plan::Failed(current) => {
                self.inner.counters.conflict();
                Ok(TxnResponse {
                    succeeded: false,
                    revision: st.current,
                    events: Vec::new(),
                    current,
                })
            }
            Plan::Apply(events) if events.is_empty() => Ok(TxnResponse {
                succeeded: true,
                revision: st.current,
                events,
                current: Vec::new(),
            }),
            Plan::Apply(events) => {
                let used = self
                    .inner
                    .meter
                    .admit(self.inner.meter.used(), req, &events)?;
                for ev in &events {
                    let value = match ev.kind {
                        crate::EventKind::Put => Some(ev.kv.clone()),
                        crate::EventKind::Delete => None,
                    };
                    st.keys
                        .entry(ev.kv.key.clone())
                        .or_default()
                        .push((rev, value));
                }
                st.log.insert(rev, events.clone());
                st.current = rev;
                self.inner.meter.set(used);
                self.inner.rev_tx.send_replace(rev);
                Ok(TxnResponse {
                    succeeded: true,
                    revision: rev,
                    events,
                    current: Vec::new(),
                })
            }
        }
    }

    fn compact_sync(&self, revision: u64) -> Result<(), CompactError> {
        let mut st = self.lock();
        if revision <= st.compacted {
            return Err(CompactError::AlreadyCompacted {
                requested: revision,
                compact_revision: st.compacted,
            });
        }
        if revision > st.current {
            return Err(CompactError::FutureRevision {
                requested: revision,
                current: st.current,
            });
        }
        st.compacted = revision;
        let mut freed = 0;
        st.keys.retain(|key, hist| {
            freed += compact_history(key, hist, revision);
            !hist.is_empty()
        });
        let kept = st.log.split_off(&revision);
        let dropped = std::mem::replace(&mut st.log, kept);
        freed += dropped.values().map(|e| quota::log_bytes(e)).sum::<u64>();
        self.inner
            .meter
            .set(self.inner.meter.used().saturating_sub(freed));
        self.inner.counters.compaction();
        Ok(())
    }
}

/// Drops versions of `key` not visible at or after `floor`: everything older than the newest
/// version `<= floor`, and that version too if it is a deletion. Returns the bytes freed.
fn compact_history(key: &[u8], hist: &mut Vec<(u64, Option<KeyValue>)>, floor: u64) -> u64 {
    let idx = hist.partition_point(|(r, _)| *r <= floor);
    if idx == 0 {
        return 0;
    }
    let keep_from = if hist[idx - 1].1.is_some() {
        idx - 1
    } else {
        idx
    };
    hist.drain(..keep_from)
        .map(|(_, kv)| quota::version_bytes(key, kv.as_ref()))
        .sum()
}

/// Resolves a requested read revision (`0` = current) against the current revision and
/// the compaction floor.
pub(crate) fn check_read_revision(
    requested: u64,
    current: u64,
    compacted: u64,
) -> Result<u64, RangeError> {
    if requested == 0 {
        return Ok(current);
    }
    if requested < compacted {
        return Err(RangeError::Compacted {
            requested,
            compact_revision: compacted,
        });
    }
    if requested > current {
        return Err(RangeError::FutureRevision { requested, current });
    }
    Ok(requested)
}

impl LogSource for MemoryStore {
    async fn read_log(
        &self,
        bounds: Arc<KeyBounds>,
        from: u64,
        max_revs: u64,
    ) -> Result<LogRead, BackendError> {
        let st = self.lock();
        if from < st.compacted {
            return Ok(LogRead::Compacted {
                compact_revision: st.compacted,
            });
        }
        let mut items = Vec::new();
        if from > st.current {
            return Ok(LogRead::Batch {
                items,
                next: from,
                current: st.current,
            });
        }
        let upto = st.current.min(from.saturating_add(max_revs - 1));
        for (rev, events) in st.log.range(from..=upto) {
            let selected: Vec<Event> = events
                .iter()
                .filter(|e| bounds.contains(&e.kv.key))
                .cloned()
                .collect();
            if !selected.is_empty() {
                items.push((*rev, selected));
            }
        }
        Ok(LogRead::Batch {
            items,
            next: upto + 1,
            current: st.current,
        })
    }

    fn subscribe(&self) -> watch::Receiver<u64> {
        self.inner.rev_tx.subscribe()
    }
}

impl Store for MemoryStore {
    async fn current_revision(&self) -> Result<u64, RangeError> {
        Ok(self.lock().current)
    }

    async fn range(&self, req: RangeRequest) -> Result<RangeResponse, RangeError> {
        self.inner.counters.range();
        self.range_sync(&req)
    }

    async fn txn(&self, req: TxnRequest) -> Result<TxnResponse, TxnError> {
        self.inner.counters.txn();
        self.txn_sync(&req)
    }

    async fn watch(&self, keys: KeySelector, from_revision: u64) -> Result<Watch, WatchError> {
        self.inner.counters.watch();
        let next = if from_revision == 0 {
            self.lock().current + 1
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
        self.compact_sync(revision)
    }

    fn counters(&self) -> &StoreCounters {
        &self.inner.counters
    }

    fn quota_usage(&self) -> Option<QuotaUsage> {
        Some(self.inner.meter.usage())
    }
}

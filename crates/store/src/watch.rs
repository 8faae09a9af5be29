//! The watch stream handle, and the watch loop shared by the memory and embedded backends.
//!
//! Those two backends keep a revision-keyed change log (every event with its previous
//! value). Their watch is a stream that reads the log when its consumer asks for the next
//! item: from its next revision, in batches of whole revisions, filtered by key, one
//! [`WatchItem::Revision`] per revision. When caught up it waits on a `tokio::sync::watch` of
//! the latest revision, which writers bump after each commit, in the consumer's own task: a
//! commit wakes the consumer directly (no task between them, no hand-off per write), no
//! polling, and writers never wait for watchers. A slow consumer reads on where it stopped,
//! at its own pace, holding at most one batch it has not taken; it loses nothing unless
//! compaction passes it, in which case it gets [`WatchItem::Compacted`]. etcd's watch (a
//! gRPC stream) is fed by a task through a bounded channel ([`Watch::channel`]); a watch
//! whose values are transformed maps the backend's watch's items as they are asked for
//! ([`Watch::from_stream`]).

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_core::Stream;
use tokio::sync::{mpsc, watch};
use tokio::time::{Instant, Interval, MissedTickBehavior};

use crate::types::KeyBounds;
use crate::{BackendError, Event, WatchItem};

/// A stream of [`WatchItem`]s. Drop it to cancel the watch.
///
/// Items come in revision order. After `Compacted` or `Failed` the stream ends. A watch keeps
/// the store alive until it is dropped (a log-based one until it has ended, at the latest); a
/// log-based backend's reads the log when it is polled (see the module docs), etcd's runs a
/// task on the tokio runtime that opened it.
pub struct Watch {
    items: Items,
}

enum Items {
    /// Sent by a task (etcd's watch).
    Channel(mpsc::Receiver<WatchItem>),
    /// Made when asked for (a log-based backend's watch, a transformed watch).
    Pulled(Pin<Box<dyn Stream<Item = WatchItem> + Send>>),
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.items {
            Items::Channel(_) => "Watch::Channel",
            Items::Pulled(_) => "Watch::Pulled",
        })
    }
}

impl Watch {
    pub(crate) fn channel(capacity: usize) -> (mpsc::Sender<WatchItem>, Watch) {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        (
            tx,
            Watch {
                items: Items::Channel(rx),
            },
        )
    }

    /// A watch whose items `stream` makes when they are asked for; it must end after a
    /// `Compacted` or `Failed` item.
    pub(crate) fn from_stream(stream: impl Stream<Item = WatchItem> + Send + 'static) -> Watch {
        Watch {
            items: Items::Pulled(Box::pin(stream)),
        }
    }

    /// The next item; `None` when the stream has ended. Cancel-safe: an item being read when
    /// the future is dropped is kept for the next call.
    pub async fn next(&mut self) -> Option<WatchItem> {
        std::future::poll_fn(|cx| Pin::new(&mut *self).poll_next(cx)).await
    }
}

impl Stream for Watch {
    type Item = WatchItem;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<WatchItem>> {
        match &mut self.items {
            Items::Channel(rx) => rx.poll_recv(cx),
            Items::Pulled(stream) => stream.as_mut().poll_next(cx),
        }
    }
}

/// Result of reading the change log.
pub(crate) enum LogRead {
    /// `from` is below the compaction floor.
    Compacted { compact_revision: u64 },
    /// Whole revisions `from..next` were read; `items` are those with selected events.
    Batch {
        items: Vec<(u64, Vec<Event>)>,
        next: u64,
        current: u64,
    },
}

/// A backend with a change log.
pub(crate) trait LogSource: Send + Sync + 'static {
    /// Reads revisions `from ..= min(current, from + max_revs - 1)`.
    fn read_log(
        &self,
        bounds: Arc<KeyBounds>,
        from: u64,
        max_revs: u64,
    ) -> impl Future<Output = Result<LogRead, BackendError>> + Send;

    /// A receiver of the latest committed revision.
    fn subscribe(&self) -> watch::Receiver<u64>;
}

/// Watch settings shared by the log-based backends.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LogWatchSettings {
    pub(crate) progress_interval: Option<Duration>,
    pub(crate) batch_revisions: u64,
}

/// A log-based backend's watch of the keys in `bounds` from revision `next` (see the module
/// docs).
pub(crate) fn log_watch<S: LogSource>(
    src: S,
    bounds: KeyBounds,
    next: u64,
    settings: LogWatchSettings,
) -> Watch {
    let rev_rx = src.subscribe();
    let ticker = settings.progress_interval.map(|p| {
        let mut t = tokio::time::interval_at(Instant::now() + p, p);
        t.set_missed_tick_behavior(MissedTickBehavior::Delay);
        t
    });
    let state = LogWatch {
        src,
        bounds: Arc::new(bounds),
        next,
        batch_revisions: settings.batch_revisions.max(1),
        rev_rx,
        ticker,
        read_since_tick: false,
        ready: VecDeque::new(),
        caught_up_at: None,
        ended: false,
    };
    Watch::from_stream(futures_util::stream::unfold(state, LogWatch::step))
}

/// Where a log-based watch is.
struct LogWatch<S> {
    src: S,
    bounds: Arc<KeyBounds>,
    /// The next revision to read.
    next: u64,
    batch_revisions: u64,
    rev_rx: watch::Receiver<u64>,
    ticker: Option<Interval>,
    /// Whether an item was read since the last progress tick.
    read_since_tick: bool,
    /// Items read and not yet taken, in revision order (at most one batch).
    ready: VecDeque<WatchItem>,
    /// Set when a read reached the log's end: its current revision then (the next step
    /// waits for a commit or a tick before it reads again).
    caught_up_at: Option<u64>,
    /// A `Compacted` or `Failed` item was made: nothing follows it.
    ended: bool,
}

impl<S: LogSource> LogWatch<S> {
    /// The next item and the watch's state after it; `None` once it has ended.
    async fn step(mut self) -> Option<(WatchItem, Self)> {
        loop {
            if let Some(item) = self.ready.pop_front() {
                return Some((item, self));
            }
            if self.ended {
                return None;
            }
            if let Some(current) = self.caught_up_at.take() {
                tokio::select! {
                    r = self.rev_rx.changed() => {
                        if r.is_err() {
                            self.ended = true;
                            return Some((WatchItem::Failed(crate::WatchError::Closed), self));
                        }
                    }
                    () = tick(&mut self.ticker) => {
                        // Like etcd: progress only when caught up and nothing was sent since
                        // the last tick, never for a watch that starts in the future.
                        let progress = !self.read_since_tick
                            && self.next >= 1
                            && self.next - 1 <= current;
                        self.read_since_tick = false;
                        if progress {
                            let item = WatchItem::Progress { revision: self.next - 1 };
                            return Some((item, self));
                        }
                    }
                }
                continue;
            }
            self.rev_rx.borrow_and_update();
            match self
                .src
                .read_log(self.bounds.clone(), self.next, self.batch_revisions)
                .await
            {
                Err(e) => {
                    self.ended = true;
                    return Some((WatchItem::Failed(e.into()), self));
                }
                Ok(LogRead::Compacted { compact_revision }) => {
                    self.ended = true;
                    let item = WatchItem::Compacted {
                        requested: self.next,
                        compact_revision,
                    };
                    return Some((item, self));
                }
                Ok(LogRead::Batch {
                    items,
                    next,
                    current,
                }) => {
                    for (revision, events) in items {
                        self.ready
                            .push_back(WatchItem::Revision { revision, events });
                        self.read_since_tick = true;
                    }
                    self.next = next;
                    if next > current {
                        self.caught_up_at = Some(current);
                    }
                }
            }
        }
    }
}

async fn tick(t: &mut Option<Interval>) {
    match t {
        Some(t) => {
            t.tick().await;
        }
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use std::task::Waker;

    use super::*;
    use crate::{KeySelector, MemoryConfig, MemoryStore, Store as _};

    fn poll_once(watch: &mut Watch) -> Poll<Option<WatchItem>> {
        let mut cx = Context::from_waker(Waker::noop());
        Pin::new(watch).poll_next(&mut cx)
    }

    /// Goal: a log-based watch is read in its consumer's task: once a commit has returned,
    /// the consumer's next poll has its revision, with no other task run in between (the
    /// runtime below has one thread, and nothing yields to it). A watch fed by a task, as
    /// these were, answers that poll `Pending`.
    #[tokio::test(flavor = "current_thread")]
    async fn a_commit_is_in_the_consumers_next_poll() {
        let store = MemoryStore::new(MemoryConfig::default()).unwrap();
        let mut watch = store
            .watch(KeySelector::Prefix("/".into()), 0)
            .await
            .unwrap();
        assert!(poll_once(&mut watch).is_pending(), "nothing committed yet");
        let revision = store.put("/a", "1").await.unwrap();
        match poll_once(&mut watch) {
            Poll::Ready(Some(WatchItem::Revision {
                revision: r,
                events,
            })) => {
                assert_eq!(r, revision);
                assert_eq!(events[0].kv.value, "1");
            }
            other => panic!("expected revision {revision} at once, got {other:?}"),
        }
        assert!(poll_once(&mut watch).is_pending());
    }

    /// Goal: `next` is cancel-safe: a future dropped while it waits, or while revisions are
    /// read and not yet taken, loses nothing; the next call has every revision in order.
    #[tokio::test(flavor = "current_thread")]
    async fn a_dropped_next_loses_no_revision() {
        let config = MemoryConfig {
            watch_batch_revisions: 2,
            ..MemoryConfig::default()
        };
        let store = MemoryStore::new(config).unwrap();
        let mut watch = store
            .watch(KeySelector::Prefix("/".into()), 0)
            .await
            .unwrap();
        {
            let next = watch.next();
            tokio::pin!(next);
            let mut cx = Context::from_waker(Waker::noop());
            assert!(next.as_mut().poll(&mut cx).is_pending());
        }
        let mut written = Vec::new();
        for i in 0..5 {
            written.push(store.put(format!("/k{i}"), "v").await.unwrap());
        }
        let mut seen = Vec::new();
        while seen.len() < written.len() {
            // Every other call is dropped after its first poll: a batch's items read and
            // not taken stay for the next call.
            if seen.len() % 2 == 1 {
                // Every revision is committed: the first poll has the next one.
                let next = watch.next();
                tokio::pin!(next);
                let mut cx = Context::from_waker(Waker::noop());
                match next.as_mut().poll(&mut cx) {
                    Poll::Ready(Some(WatchItem::Revision { revision, .. })) => seen.push(revision),
                    other => panic!("expected a committed revision at once, got {other:?}"),
                }
                continue;
            }
            match watch.next().await {
                Some(WatchItem::Revision { revision, .. }) => seen.push(revision),
                other => panic!("expected a revision, got {other:?}"),
            }
        }
        assert_eq!(seen, written);
    }

    /// Goal: a watch from below the compaction floor yields `Compacted` and ends, and an
    /// ended or dropped watch holds the store no longer (nothing else held it: no task).
    #[tokio::test(flavor = "current_thread")]
    async fn an_ended_or_dropped_watch_holds_nothing() {
        let store = MemoryStore::new(MemoryConfig::default()).unwrap();
        let first = store.put("/a", "1").await.unwrap();
        let second = store.put("/a", "2").await.unwrap();
        store.compact(second).await.unwrap();
        let live = store
            .watch(KeySelector::Prefix("/".into()), 0)
            .await
            .unwrap();
        assert_eq!(store.holders(), 2, "the store and its watch");
        drop(live);
        assert_eq!(store.holders(), 1, "a dropped watch kept the store");
        let mut watch = store
            .watch(KeySelector::Prefix("/".into()), first)
            .await
            .unwrap();
        match watch.next().await {
            Some(WatchItem::Compacted {
                requested,
                compact_revision,
            }) => assert_eq!((requested, compact_revision), (first, second)),
            other => panic!("expected Compacted, got {other:?}"),
        }
        assert!(watch.next().await.is_none());
        assert_eq!(store.holders(), 1, "an ended watch kept the store");
    }
}

//! The watch stream handle, and the watch loop shared by the memory and embedded backends.
//!
//! Those two backends keep a revision-keyed change log (every event with its previous
//! value). A watch is a task that reads the log from its next revision in batches of whole
//! revisions, filters by key, and sends one [`WatchItem::Revision`] per revision into a
//! bounded channel. When caught up it sleeps on a `tokio::sync::watch` of the latest
//! revision, which writers bump after each commit: no polling, and writers never wait for
//! watchers. A slow consumer only stalls its own task (the channel fills); it resumes from
//! the log where it stopped, so it loses nothing unless compaction passes it, in which
//! case it gets [`WatchItem::Compacted`]. Its cost is one channel of items plus one batch.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::time::{Instant, Interval, MissedTickBehavior};

use crate::types::KeyBounds;
use crate::{BackendError, Event, WatchItem};

/// A stream of [`WatchItem`]s. Drop it to cancel the watch.
///
/// Items come in revision order. After `Compacted` or `Failed` the stream ends. The
/// watch's task runs on the tokio runtime that opened it and keeps the store alive until
/// the `Watch` is dropped.
#[derive(Debug)]
pub struct Watch {
    rx: mpsc::Receiver<WatchItem>,
}

impl Watch {
    pub(crate) fn channel(capacity: usize) -> (mpsc::Sender<WatchItem>, Watch) {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        (tx, Watch { rx })
    }

    /// The next item; `None` when the stream has ended.
    pub async fn next(&mut self) -> Option<WatchItem> {
        self.rx.recv().await
    }
}

impl futures_core::Stream for Watch {
    type Item = WatchItem;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<WatchItem>> {
        self.rx.poll_recv(cx)
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

pub(crate) async fn run_log_watch<S: LogSource>(
    src: S,
    bounds: KeyBounds,
    mut next: u64,
    tx: mpsc::Sender<WatchItem>,
    settings: LogWatchSettings,
) {
    let bounds = Arc::new(bounds);
    let mut rev_rx = src.subscribe();
    let mut ticker = settings.progress_interval.map(|p| {
        let mut t = tokio::time::interval_at(Instant::now() + p, p);
        t.set_missed_tick_behavior(MissedTickBehavior::Delay);
        t
    });
    let mut sent_since_tick = false;
    loop {
        rev_rx.borrow_and_update();
        let read = tokio::select! {
            r = src.read_log(bounds.clone(), next, settings.batch_revisions.max(1)) => r,
            () = tx.closed() => return,
        };
        let current = match read {
            Err(e) => {
                let _ = tx.send(WatchItem::Failed(e.into())).await;
                return;
            }
            Ok(LogRead::Compacted { compact_revision }) => {
                let _ = tx
                    .send(WatchItem::Compacted {
                        requested: next,
                        compact_revision,
                    })
                    .await;
                return;
            }
            Ok(LogRead::Batch {
                items,
                next: n,
                current: c,
            }) => {
                for (revision, events) in items {
                    if tx
                        .send(WatchItem::Revision { revision, events })
                        .await
                        .is_err()
                    {
                        return;
                    }
                    sent_since_tick = true;
                }
                next = n;
                if next <= c {
                    continue;
                }
                c
            }
        };
        tokio::select! {
            r = rev_rx.changed() => {
                if r.is_err() {
                    let _ = tx.send(WatchItem::Failed(crate::WatchError::Closed)).await;
                    return;
                }
            }
            () = tx.closed() => return,
            () = tick(&mut ticker) => {
                // Like etcd: progress only when caught up and nothing was sent since the
                // last tick, never for a watch that starts in the future.
                if !sent_since_tick && next >= 1 && next - 1 <= current {
                    let item = WatchItem::Progress { revision: next - 1 };
                    if tx.send(item).await.is_err() {
                        return;
                    }
                }
                sent_since_tick = false;
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

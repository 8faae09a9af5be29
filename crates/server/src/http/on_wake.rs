//! [`OnWake`]: a future polled only when one of its own wakers fired.
//!
//! ## Guarantees
//! - The wrapped future is polled on the first poll and afterwards only after something it
//!   registered a waker with woke it; a poll of the task for any other reason (its other
//!   branches, e.g. a connection writing a watch event) costs an atomic swap and, when the
//!   task's waker changed, a waker clone — not a poll of the wrapped future (whose own poll
//!   may take locks: `Notify`, `watch::Receiver`, timers).
//! - No wake-up is lost: the task's waker is registered before the flag is read, so a wake
//!   that lands after the read wakes the task again.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};

use futures_util::task::AtomicWaker;

/// The wrapped future's waker: sets the flag and wakes the task.
#[derive(Debug)]
struct Flag {
    woken: AtomicBool,
    task: AtomicWaker,
}

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        self.task.wake();
    }
}

/// A future polled only when woken by what it waits for (see the module docs).
pub struct OnWake<'a, T> {
    inner: Pin<Box<dyn Future<Output = T> + Send + 'a>>,
    flag: Arc<Flag>,
    waker: Waker,
}

/// The flag and waker [`OnWake`]s poll their futures with, made once for a loop that wraps
/// a new future each turn (a connection's): the next one takes them without allocating. A
/// wake meant for an earlier, dropped future only costs the next one a poll.
#[derive(Debug)]
pub struct Wakes {
    flag: Arc<Flag>,
    waker: Waker,
}

impl Wakes {
    /// A flag and its waker.
    #[must_use]
    pub fn new() -> Wakes {
        let flag = Arc::new(Flag {
            woken: AtomicBool::new(true),
            task: AtomicWaker::new(),
        });
        Wakes {
            waker: Waker::from(flag.clone()),
            flag,
        }
    }
}

impl Default for Wakes {
    fn default() -> Wakes {
        Wakes::new()
    }
}

impl<'a, T> OnWake<'a, T> {
    /// Wraps `inner`.
    pub fn new(inner: impl Future<Output = T> + Send + 'a) -> OnWake<'a, T> {
        OnWake::with(&Wakes::new(), inner)
    }

    /// Wraps `inner` with `wakes` (see [`Wakes`]): polled on its first poll, as with
    /// [`OnWake::new`].
    pub fn with(wakes: &Wakes, inner: impl Future<Output = T> + Send + 'a) -> OnWake<'a, T> {
        wakes.flag.woken.store(true, Ordering::Release);
        OnWake {
            inner: Box::pin(inner),
            flag: wakes.flag.clone(),
            waker: wakes.waker.clone(),
        }
    }
}

impl<T> Future for OnWake<'_, T> {
    type Output = T;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        self.flag.task.register(cx.waker());
        if !self.flag.woken.swap(false, Ordering::AcqRel) {
            return Poll::Pending;
        }
        let this = &mut *self;
        let mut own = Context::from_waker(&this.waker);
        this.inner.as_mut().poll(&mut own)
    }
}

impl<T> std::fmt::Debug for OnWake<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OnWake")
            .field("woken", &self.flag.woken.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// Counts its polls; ready once `ready` is set, and then only when woken.
    struct Probe {
        polls: Arc<AtomicUsize>,
        ready: Arc<tokio::sync::Notify>,
    }

    #[tokio::test]
    async fn the_inner_future_is_polled_only_when_its_own_waker_fires() {
        let polls = Arc::new(AtomicUsize::new(0));
        let notify = Arc::new(tokio::sync::Notify::new());
        let probe = Probe {
            polls: polls.clone(),
            ready: notify.clone(),
        };
        let inner = async move {
            let notified = probe.ready.notified();
            tokio::pin!(notified);
            std::future::poll_fn(|cx| {
                probe.polls.fetch_add(1, Ordering::Relaxed);
                notified.as_mut().poll(cx)
            })
            .await;
            7
        };
        let mut on_wake = std::pin::pin!(OnWake::new(inner));
        let task_wakes = Arc::new(Counter::default());
        let task_waker = Waker::from(task_wakes.clone());
        let mut cx = Context::from_waker(&task_waker);
        assert!(on_wake.as_mut().poll(&mut cx).is_pending());
        assert_eq!(polls.load(Ordering::Relaxed), 1);
        // The task is polled again for other reasons: the inner future is not.
        for _ in 0..5 {
            assert!(on_wake.as_mut().poll(&mut cx).is_pending());
        }
        assert_eq!(polls.load(Ordering::Relaxed), 1);
        assert_eq!(task_wakes.0.load(Ordering::Relaxed), 0);
        // What it waits for happens: the task is woken and the inner future completes.
        notify.notify_one();
        assert_eq!(task_wakes.0.load(Ordering::Relaxed), 1);
        assert_eq!(on_wake.as_mut().poll(&mut cx), Poll::Ready(7));
        assert_eq!(polls.load(Ordering::Relaxed), 2);
    }

    #[derive(Default)]
    struct Counter(AtomicUsize);

    impl Wake for Counter {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }
}

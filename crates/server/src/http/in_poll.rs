//! [`InPoll`]: a task's own waker wrapped so that a wake from inside its poll, on its own
//! thread, is answered by polling again at once instead of by the runtime; [`Executor`]:
//! hyper's executor, with every task it spawns (an HTTP/2 stream's) wrapped so.
//!
//! A connection's task wakes itself in the middle of its own poll once or more per HTTP/1.1
//! request: the handler's first read of the request body marks it wanted, which wakes hyper's
//! dispatcher, the sender of that body — the same task (measured: one such wake per PATCH).
//! Tokio reschedules a task woken while it runs through its yield path, which also wakes an
//! idle worker thread so that someone takes it: a futex call and a pair of context switches
//! per request, on the write path's thread hand-offs, for a poll that the task could have
//! made itself. HTTP/2 streams do the same in their own tasks ([`Executor`]).
//!
//! ## Guarantees
//! - Only the task's own wakes are kept back: a wake counts as the task's own when it comes
//!   from the thread polling it, during that poll (a thread-local names the task being
//!   polled). Every other wake — another thread's (the dispatcher handing a watch its
//!   events), or one outside the poll — goes to the runtime's waker as it would without the
//!   wrapper. So no wake-up is lost, and a watch connection woken by the dispatcher while it
//!   writes still goes to the back of the run queue and finds a larger batch when it runs
//!   again (an inline poll at once would write smaller ones).
//! - Fairness is kept: at most [`REPOLLS`] polls are made inline per poll of the task; a task
//!   still waking itself after them (hyper's dispatcher yields this way after 16 rounds of
//!   its loop) is handed to the runtime by waking it, as tokio would have. The inline polls
//!   are inside one poll of the task, so they share tokio's cooperative budget for it: a
//!   task that used it up gets `Pending` from its sockets at once and is handed back.
//! - The waker handed to the futures is the same for the task's whole life, so `will_wake`
//!   comparisons downstream (the wake relay's readers, hyper's body channel) keep holding.
//!
//! ## Cost
//! One allocation per task (the flag and the runtime's waker, 48 bytes) and its pointer (the
//! waker handed down is borrowed from it: `waker_ref`); per poll of the task a thread-local
//! set and restored, one store and one load, and the runtime waker's registration (a compare
//! and swap when it did not change; a clone of it after another thread's wake, which takes
//! the registered one). The pointer must not push a task's future past a
//! 128-byte step: tokio's task cell is aligned to 128 bytes (see `ConnectionTask`; measured in
//! BENCHMARKS.md, invocation AN: +48 bytes per idle connection and per HTTP/2 stream).

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use futures_util::task::{ArcWake, AtomicWaker};

/// The most polls made inline in one poll of the task (see the module docs).
pub const REPOLLS: usize = 4;

thread_local! {
    /// The [`Mark`] of the task this thread is polling inside an [`InPoll`] (its address;
    /// 0 when none).
    static POLLING: Cell<usize> = const { Cell::new(0) };
}

/// The shared state of an [`InPoll`] and its waker.
#[derive(Debug)]
struct Mark {
    /// The task woke itself during the current poll (only ever touched by the polling
    /// thread: relaxed).
    woken: AtomicBool,
    /// The runtime's waker of the task.
    task: AtomicWaker,
}

impl Mark {
    fn id(self: &Arc<Self>) -> usize {
        Arc::as_ptr(self) as usize
    }
}

impl ArcWake for Mark {
    fn wake_by_ref(mark: &Arc<Self>) {
        if POLLING.with(Cell::get) == mark.id() {
            mark.woken.store(true, Ordering::Relaxed);
        } else {
            mark.task.wake();
        }
    }
}

/// Restores the thread's [`POLLING`] when the poll ends (a panic included).
struct Polling(usize);

impl Polling {
    fn enter(id: usize) -> Polling {
        Polling(POLLING.with(|polling| polling.replace(id)))
    }
}

impl Drop for Polling {
    fn drop(&mut self) {
        POLLING.with(|polling| polling.set(self.0));
    }
}

pin_project_lite::pin_project! {
    /// A future polled again at once, within the same poll of its task, when it wakes its
    /// own task while being polled (see the module docs).
    #[derive(Debug)]
    pub struct InPoll<F> {
        #[pin]
        inner: F,
        mark: Arc<Mark>,
    }
}

impl<F> InPoll<F> {
    /// Wraps `inner`.
    pub fn new(inner: F) -> InPoll<F> {
        InPoll {
            inner,
            mark: Arc::new(Mark {
                woken: AtomicBool::new(false),
                task: AtomicWaker::new(),
            }),
        }
    }
}

impl<F: Future> Future for InPoll<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let mut this = self.project();
        this.mark.task.register(cx.waker());
        // Borrowed from the mark, no count taken: the same waker on every poll.
        let waker = futures_util::task::waker_ref(this.mark);
        let mut own = Context::from_waker(&waker);
        let polling = Polling::enter(this.mark.id());
        for _ in 0..REPOLLS {
            this.mark.woken.store(false, Ordering::Relaxed);
            let polled = this.inner.as_mut().poll(&mut own);
            if polled.is_ready() || !this.mark.woken.load(Ordering::Relaxed) {
                return polled;
            }
        }
        drop(polling);
        // Still waking itself: the runtime decides who runs next.
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// hyper's executor for the tasks it spawns (an HTTP/2 stream's service and response): tokio's
/// `spawn`, each task in an [`InPoll`], and a stream's with a deadline bounded by it
/// ([`crate::http::deadline`]). An HTTP/2 stream wakes its own task while it runs
/// about twice per request (h2 assigning send capacity to the stream that reserved it,
/// `reserve_capacity` → `notify_send`; measured with 500 PATCHes over one h2c connection).
#[derive(Clone, Copy, Debug, Default)]
pub struct Executor;

impl<F> hyper::rt::Executor<F> for Executor
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn execute(&self, task: F) {
        // An HTTP/2 stream whose request has a deadline: its task ends there (see `deadline`).
        match crate::http::deadline::take_handed_over() {
            Some(deadline) => {
                tokio::spawn(InPoll::new(crate::http::deadline::Bounded::new(
                    task, deadline,
                )));
            }
            None => {
                tokio::spawn(InPoll::new(task));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::task::{Wake, Waker};

    /// Counts the wakes of the runtime's waker.
    #[derive(Default)]
    struct Counter(AtomicUsize);

    impl Wake for Counter {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Wakes itself in its first `selfwakes` polls, then is ready.
    struct SelfWaking {
        polls: usize,
        selfwakes: usize,
    }

    impl Future for SelfWaking {
        type Output = usize;

        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<usize> {
            self.polls += 1;
            if self.polls <= self.selfwakes {
                cx.waker().wake_by_ref();
                Poll::Pending
            } else {
                Poll::Ready(self.polls)
            }
        }
    }

    fn runtime_waker() -> (Arc<Counter>, Waker) {
        let counter = Arc::new(Counter::default());
        let waker = Waker::from(counter.clone());
        (counter, waker)
    }

    /// One poll of a task whose future wakes itself in its first `selfwakes` polls: what the
    /// poll returned, how often the future was polled, how often the runtime was woken.
    fn poll_self_waking(selfwakes: usize) -> (Poll<usize>, usize, usize) {
        let (wakes, waker) = runtime_waker();
        let mut cx = Context::from_waker(&waker);
        let mut task = InPoll::new(SelfWaking {
            polls: 0,
            selfwakes,
        });
        let polled = Pin::new(&mut task).poll(&mut cx);
        (polled, task.inner.polls, wakes.0.load(Ordering::Relaxed))
    }

    #[test]
    fn a_wake_inside_the_poll_is_answered_by_polling_again_not_by_the_runtime() {
        assert_eq!(poll_self_waking(2), (Poll::Ready(3), 3, 0));
    }

    #[test]
    fn a_future_that_keeps_waking_itself_is_handed_back_to_the_runtime() {
        assert_eq!(poll_self_waking(usize::MAX), (Poll::Pending, REPOLLS, 1));
    }

    #[test]
    fn a_wake_outside_the_poll_reaches_the_runtime_and_the_same_waker_is_handed_down() {
        let (wakes, waker) = runtime_waker();
        let mut cx = Context::from_waker(&waker);
        let seen: Arc<std::sync::Mutex<Vec<Waker>>> = Arc::default();
        let record = seen.clone();
        let mut task = InPoll::new(std::future::poll_fn(move |cx| {
            record.lock().unwrap().push(cx.waker().clone());
            Poll::<()>::Pending
        }));
        assert!(Pin::new(&mut task).poll(&mut cx).is_pending());
        assert!(Pin::new(&mut task).poll(&mut cx).is_pending());
        let handed = seen.lock().unwrap().clone();
        assert_eq!(handed.len(), 2);
        assert!(handed[0].will_wake(&handed[1]));
        handed[0].wake_by_ref();
        assert_eq!(wakes.0.load(Ordering::Relaxed), 1);
        // Pending with no wake since: one poll, no inline repoll.
        assert!(Pin::new(&mut task).poll(&mut cx).is_pending());
        assert_eq!(seen.lock().unwrap().len(), 3);
    }

    #[test]
    fn another_threads_wake_during_the_poll_goes_to_the_runtime() {
        let (wakes, waker) = runtime_waker();
        let mut cx = Context::from_waker(&waker);
        let mut polls = 0;
        let mut task = InPoll::new(std::future::poll_fn(|cx| {
            polls += 1;
            let handed = cx.waker().clone();
            std::thread::spawn(move || handed.wake()).join().unwrap();
            Poll::<()>::Pending
        }));
        assert!(Pin::new(&mut task).poll(&mut cx).is_pending());
        drop(task);
        assert_eq!(
            polls, 1,
            "not polled again inline for another thread's wake"
        );
        assert_eq!(wakes.0.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_wake_from_another_thread_is_never_lost() {
        // Another thread counts and wakes while this one polls as a runtime would (again only
        // when woken through the runtime's waker); once nothing is woken any more, the last
        // poll must have seen the last count. The pauses put most wakes inside polls, after
        // their look: a wrapper that kept another thread's wake back as the task's own fails
        // this every run.
        const WAKES: usize = 5_000;
        for _ in 0..5 {
            let scheduled = Arc::new(Flagged::default());
            let waker = Waker::from(scheduled.clone());
            let mut cx = Context::from_waker(&waker);
            let sent = Arc::new(AtomicUsize::new(0));
            let seen = Arc::new(AtomicUsize::new(0));
            let slot: Arc<std::sync::Mutex<Option<Waker>>> = Arc::default();
            let (poll_sent, poll_seen, poll_slot) = (sent.clone(), seen.clone(), slot.clone());
            let mut task = InPoll::new(std::future::poll_fn(move |cx| {
                poll_slot
                    .lock()
                    .unwrap()
                    .get_or_insert_with(|| cx.waker().clone());
                poll_seen.store(poll_sent.load(Ordering::SeqCst), Ordering::SeqCst);
                // A poll that goes on after its look, so that wakes land inside it.
                for _ in 0..500 {
                    std::hint::spin_loop();
                }
                Poll::<()>::Pending
            }));
            assert!(Pin::new(&mut task).poll(&mut cx).is_pending());
            let handed = slot.lock().unwrap().clone().unwrap();
            let counting = sent.clone();
            let waking = std::thread::spawn(move || {
                for _ in 0..WAKES {
                    counting.fetch_add(1, Ordering::SeqCst);
                    handed.wake_by_ref();
                    for _ in 0..50 {
                        std::hint::spin_loop();
                    }
                }
            });
            while !waking.is_finished() {
                if scheduled.0.swap(false, Ordering::SeqCst) {
                    assert!(Pin::new(&mut task).poll(&mut cx).is_pending());
                }
            }
            waking.join().unwrap();
            while scheduled.0.swap(false, Ordering::SeqCst) {
                assert!(Pin::new(&mut task).poll(&mut cx).is_pending());
            }
            assert_eq!(
                seen.load(Ordering::SeqCst),
                WAKES,
                "a wake after the last poll's look was lost"
            );
        }
    }

    /// Records that the runtime was asked to poll the task.
    #[derive(Default)]
    struct Flagged(AtomicBool);

    impl Wake for Flagged {
        fn wake(self: Arc<Self>) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
}

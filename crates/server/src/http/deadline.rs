//! The deadline of an answer (`--request-timeout`) over HTTP/2: the stream's task is ended
//! there, whether or not hyper is polling the answer's body.
//!
//! ## Guarantees
//! - An HTTP/2 stream of a request that is not long-running, whose answer began (the handler
//!   returned before the deadline: not kube's 504, which the limits layer answers and which
//!   is never cut off) and is not finished at the deadline, has its task dropped then: the
//!   response body (and the in-flight slots it holds, and the piece of it hyper buffered)
//!   and hyper's handle of the stream go, and the stream is reset with RST_STREAM
//!   `INTERNAL_ERROR`, as kube-apiserver's Go server resets a stream whose handler aborts (its
//!   timeout filter panics with `http.ErrAbortHandler`); the vendored hyper sends it when a
//!   stream's task is dropped while its body is being sent (vendor/README.md; h2 alone would
//!   send `CANCEL`), and h2 drops the bytes it queued for it. Counted as
//!   `limit="request_timeout"`.
//! - This holds for a client that never grants the stream a flow-control window: hyper then
//!   waits on the stream's send capacity and never polls the body, so no bound inside the
//!   body could fire; the deadline's timer wakes the stream's task itself.
//! - A stream that finishes before its deadline costs a boxed timer from the moment its
//!   answer began; long-running streams (watches) and HTTP/1.1 requests cost nothing here
//!   (HTTP/1.1 answers are bounded by the connection task, see the connection layer).
//!
//! ## How the stream's task is found
//! hyper calls the service with a new stream's request and, right after, in the same poll of
//! the connection's task and on the same thread, hands the stream's task to the executor
//! ([`crate::http::in_poll::Executor`]). The service leaves the stream's [`AnswerDeadline`] in a
//! thread-local ([`hand_over`]) that the executor takes ([`take_handed_over`]) and wraps the
//! task in [`Bounded`].

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use tokio::time::{Instant, Sleep};

use crate::limits::{Limit, Limits};

/// The deadline of one HTTP/2 stream's answer; armed when the answer began.
#[derive(Debug)]
pub struct AnswerDeadline {
    at: Instant,
    armed: AtomicBool,
    limits: Arc<Limits>,
}

impl AnswerDeadline {
    /// A deadline at `at`, not armed; an expiry is counted in `limits`.
    #[must_use]
    pub fn new(at: Instant, limits: Arc<Limits>) -> Arc<AnswerDeadline> {
        Arc::new(AnswerDeadline {
            at,
            armed: AtomicBool::new(false),
            limits,
        })
    }

    /// The answer began: from now on it is cut off at the deadline. Called while the stream's
    /// task is being polled (by the service's future), so [`Bounded`] sees it when that poll
    /// returns.
    pub fn arm(&self) {
        self.armed.store(true, Ordering::Release);
    }
}

thread_local! {
    /// The deadline of the stream whose request the service took last on this thread, until
    /// the executor takes it with the stream's task.
    static HANDED_OVER: RefCell<Option<Arc<AnswerDeadline>>> = const { RefCell::new(None) };
}

/// Leaves `deadline` for the executor's next task on this thread (see the module docs).
pub fn hand_over(deadline: Arc<AnswerDeadline>) {
    HANDED_OVER.with(|slot| *slot.borrow_mut() = Some(deadline));
}

/// The deadline [`hand_over`] left on this thread, if any.
#[must_use]
pub fn take_handed_over() -> Option<Arc<AnswerDeadline>> {
    HANDED_OVER.with(|slot| slot.borrow_mut().take())
}

pin_project_lite::pin_project! {
    /// A stream's task, ended (dropped with what it holds) at its answer's deadline once the
    /// answer began; `None` when it was cut off.
    pub struct Bounded<F> {
        #[pin]
        inner: F,
        deadline: Arc<AnswerDeadline>,
        timer: Option<Pin<Box<Sleep>>>,
    }
}

impl<F> Bounded<F> {
    /// `inner` bounded by `deadline`.
    pub fn new(inner: F, deadline: Arc<AnswerDeadline>) -> Bounded<F> {
        Bounded {
            inner,
            deadline,
            timer: None,
        }
    }
}

impl<F: Future> Future for Bounded<F> {
    type Output = Option<F::Output>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<F::Output>> {
        let this = self.project();
        if let Poll::Ready(output) = this.inner.poll(cx) {
            return Poll::Ready(Some(output));
        }
        if this.timer.is_none() && this.deadline.armed.load(Ordering::Acquire) {
            *this.timer = Some(Box::pin(tokio::time::sleep_until(this.deadline.at)));
        }
        let expired = this
            .timer
            .as_mut()
            .is_some_and(|timer| timer.as_mut().poll(cx).is_ready());
        if expired {
            this.deadline.limits.count(Limit::RequestTimeout);
            tracing::debug!("an HTTP/2 answer outlived its deadline: resetting its stream");
            return Poll::Ready(None);
        }
        Poll::Pending
    }
}

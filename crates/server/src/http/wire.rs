//! What goes over a connection's stream beneath hyper: the refusals hyper makes by itself,
//! rewritten as Kubernetes Status answers; the bytes read, for the connection's timeouts; and
//! writes that make no progress, bounded in time.
//!
//! ## Guarantees
//! - A write (or flush) the socket does not take for `--write-timeout-ms` (the client stopped
//!   reading) fails: hyper closes the connection and drops its response bodies, which frees
//!   the in-flight slots and buffers they hold. The timer restarts with every byte written.
//! - The first byte read after the connection task asks for it ([`Activity`]) is reported, so
//!   an HTTP/1.1 request's header timeout starts at its first byte, and the idle timeout
//!   before it.
//! - When hyper's HTTP/1.1 parser refuses a request before any handler sees it — request line
//!   and headers over its buffer bound or more than [`MAX_HEADERS`] header fields (431), a URI
//!   over the `http` crate's [`URI_MAX`] bytes (414), or bytes that are not an HTTP/1.1 request
//!   (400) — the client gets a `metav1.Status` with that code, `Content-Type:
//!   application/json` and `Connection: close` instead of hyper's empty answer, and the refusal
//!   is counted in `watchkeeper_limit_rejections_total`.
//! - Hyper's automatic answer is recognised exactly: a write that is one whole response head,
//!   with one of those three status lines, no `content-type` and `content-length: 0`. Every
//!   answer of the handlers carries a content type, so none of them is rewritten; every other
//!   write passes through unchanged (vectored writes stay vectored).
//! - HTTP/2 is not rewritten: h2 answers a header list over its bound with a bare 431 (HPACK
//!   frames cannot be edited in passing); the limits layer answers within the 16 KiB slack.

use std::future::Future;
use std::io::IoSlice;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::sync::Notify;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use watchkeeper_api::ApiError;

use crate::limits::{Limit, Limits};

/// Header fields hyper's HTTP/1.1 parser accepts per request (hyper's default); more get 431.
pub const MAX_HEADERS: usize = 100;
/// The longest request URI the `http` crate parses; longer gets 414.
pub const URI_MAX: usize = u16::MAX as usize - 1;

/// A connection's stream as hyper sees it (see the module docs).
#[derive(Debug)]
pub struct Wire<S> {
    inner: S,
    /// The Status answer still to be written, and how much of it is written.
    pending: Option<(Vec<u8>, usize)>,
    limits: Arc<Limits>,
    activity: Arc<Activity>,
    write_timeout: Duration,
    /// Running while a write makes no progress.
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<S> Wire<S> {
    /// Wraps `inner`; refusals are counted in `limits`, reads reported to `activity`.
    pub fn new(
        inner: S,
        limits: Arc<Limits>,
        activity: Arc<Activity>,
        write_timeout: Duration,
    ) -> Wire<S> {
        Wire {
            inner,
            pending: None,
            limits,
            activity,
            write_timeout,
            stalled: None,
        }
    }

    /// `poll` of a write, failing when writes made no progress for the write timeout.
    fn bounded<T>(
        &mut self,
        cx: &mut Context<'_>,
        poll: Poll<std::io::Result<T>>,
    ) -> Poll<std::io::Result<T>> {
        if poll.is_ready() {
            self.stalled = None;
            return poll;
        }
        let timeout = self.write_timeout;
        let stalled = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        if stalled.as_mut().poll(cx).is_ready() {
            self.stalled = None;
            self.limits.count(Limit::WriteTimeout);
            tracing::debug!("closing a connection: its client read nothing for the write timeout");
            return Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the client read nothing for the write timeout",
            )));
        }
        Poll::Pending
    }

    /// The wrapped stream.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

/// The Status (and counter) that replaces hyper's automatic answer in `write`, if it is one.
fn refusal(write: &[u8], limits: &Limits) -> Option<(Limit, ApiError)> {
    let text = std::str::from_utf8(write).ok()?;
    let head = text.strip_suffix("\r\n\r\n")?;
    if head.contains("\r\n\r\n") {
        return None;
    }
    let mut lines = head.split("\r\n");
    let status_line = lines.next()?;
    let rest = status_line
        .strip_prefix("HTTP/1.1 ")
        .or_else(|| status_line.strip_prefix("HTTP/1.0 "))?;
    let mut length_zero = false;
    for line in lines {
        let (name, value) = line.split_once(':')?;
        match name.trim().to_ascii_lowercase().as_str() {
            "content-type" => return None,
            "content-length" => length_zero = value.trim() == "0",
            _ => {}
        }
    }
    if !length_zero {
        return None;
    }
    let header_max = limits.config().header_bytes_max;
    match rest {
        "431 Request Header Fields Too Large" => Some((
            Limit::Header,
            ApiError::new(
                431,
                "RequestHeaderFieldsTooLarge",
                format!(
                    "the request line and headers are more than the limit of {header_max} bytes, or have more than {MAX_HEADERS} fields"
                ),
            ),
        )),
        "414 URI Too Long" => Some((
            Limit::UriLength,
            ApiError::new(
                414,
                "RequestURITooLong",
                format!("the request URI is longer than the limit of {URI_MAX} bytes"),
            ),
        )),
        "400 Bad Request" => Some((
            Limit::Malformed,
            ApiError::bad_request(
                "malformed HTTP request: the request line or a header could not be parsed",
            ),
        )),
        _ => None,
    }
}

/// The bytes of a whole HTTP/1.1 answer carrying `error` as a Status, closing the connection.
fn status_answer(error: &ApiError) -> Vec<u8> {
    let body = error.to_status_body();
    let reason = axum::http::StatusCode::from_u16(error.code)
        .ok()
        .and_then(|code| code.canonical_reason())
        .unwrap_or("Error");
    format!(
        "HTTP/1.1 {} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\ncache-control: no-cache, private\r\n\r\n{body}",
        error.code,
        body.len()
    )
    .into_bytes()
}

impl<S: AsyncWrite + Unpin> Wire<S> {
    /// Writes what is left of the pending answer.
    fn poll_pending(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        loop {
            let Some((bytes, written)) = &self.pending else {
                return Poll::Ready(Ok(()));
            };
            if *written == bytes.len() {
                self.pending = None;
                return Poll::Ready(Ok(()));
            }
            let poll = Pin::new(&mut self.inner).poll_write(cx, &bytes[*written..]);
            let n = ready!(self.bounded(cx, poll))?;
            if n == 0 {
                return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into()));
            }
            if let Some((_, written)) = &mut self.pending {
                *written += n;
            }
        }
    }

    /// Queues the Status answer if `write` is hyper's automatic refusal.
    fn intercept(&mut self, write: &[u8]) -> bool {
        let Some((limit, error)) = refusal(write, &self.limits) else {
            return false;
        };
        self.limits.count(limit);
        tracing::debug!(
            code = error.code,
            "hyper refused a request: answering a Status"
        );
        self.pending = Some((status_answer(&error), 0));
        true
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Wire<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        ready!(Pin::new(&mut self.inner).poll_read(cx, buf))?;
        self.activity.read(buf.filled().len() - before);
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Wire<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        ready!(self.poll_pending(cx))?;
        if self.intercept(buf) {
            // The answer is written by the flush or shutdown that follows (or right now).
            let _ = self.poll_pending(cx)?;
            return Poll::Ready(Ok(buf.len()));
        }
        let poll = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.bounded(cx, poll)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        ready!(self.poll_pending(cx))?;
        let mut non_empty = bufs.iter().filter(|b| !b.is_empty());
        if let (Some(only), None) = (non_empty.next(), non_empty.next())
            && self.intercept(only)
        {
            let _ = self.poll_pending(cx)?;
            return Poll::Ready(Ok(only.len()));
        }
        let poll = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.bounded(cx, poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        ready!(self.poll_pending(cx))?;
        let poll = Pin::new(&mut self.inner).poll_flush(cx);
        self.bounded(cx, poll)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        ready!(self.poll_pending(cx))?;
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// What a connection's timeouts need to know about its traffic: requests whose response has
/// not finished, whether it speaks HTTP/2, and (for HTTP/1.1) whether a byte of the next
/// request arrived.
#[derive(Debug, Default)]
pub struct Activity {
    inflight: AtomicUsize,
    /// Requests begun so far (a request may begin and finish between two looks).
    begun: AtomicUsize,
    h2: AtomicBool,
    /// Set by the connection task while it waits for the next request's first byte; the
    /// stream clears it (and notifies) when a byte arrives.
    awaiting_byte: AtomicBool,
    changed: Notify,
    /// The deadline of the HTTP/1.1 request in flight (`--request-timeout`), set when it
    /// began; cleared when no request is in flight.
    answer_by: std::sync::Mutex<Option<tokio::time::Instant>>,
    /// Where that request's answer stands: [`ANSWER_BEGAN`], [`DEADLINE_PASSED`].
    answer: AtomicU8,
    /// HTTP/2 streams whose answer was dropped unfinished (the client reset them, or they
    /// were cut off), and whether they became too many ([`Activity::too_many_resets`]).
    cancelled: AtomicUsize,
    too_many_resets: AtomicBool,
}

/// HTTP/2 streams a connection may have cancelled before the share of its streams that were
/// is judged ([`Activity::too_many_resets`]).
pub const CANCELLED_STREAMS_MIN: usize = 1000;

/// The answer of the HTTP/1.1 request in flight began (before or after its deadline).
const ANSWER_BEGAN: u8 = 1;
/// The connection task saw the deadline of the HTTP/1.1 request in flight pass.
const DEADLINE_PASSED: u8 = 2;

/// A request on its connection, until its response is finished (see [`HoldBody`]).
#[derive(Debug)]
pub struct InFlight {
    activity: Arc<Activity>,
    /// The response was handed over whole (else it is dropped unfinished: cancelled).
    finished: bool,
}

impl crate::limits::Held for InFlight {
    fn finished(&mut self) {
        self.finished = true;
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let activity = &self.activity;
        let last = activity.inflight.fetch_sub(1, Ordering::AcqRel) == 1;
        if !self.finished && activity.is_h2() {
            let cancelled = activity.cancelled.fetch_add(1, Ordering::AcqRel) + 1;
            if cancelled >= CANCELLED_STREAMS_MIN
                && cancelled * 2 > activity.begun()
                && !activity.too_many_resets.swap(true, Ordering::AcqRel)
            {
                activity.changed.notify_one();
            }
        }
        if last {
            *activity.lock_answer_by() = None;
            activity.answer.store(0, Ordering::Release);
            activity.changed.notify_one();
        }
    }
}

impl Activity {
    /// A request arrived (over HTTP/2 if `h2`); an HTTP/1.1 request with a deadline
    /// (`answer_by`) must have answered by then, or its connection is closed (see
    /// [`Activity::answer_began`]).
    pub fn begin(self: &Arc<Self>, h2: bool, answer_by: Option<tokio::time::Instant>) -> InFlight {
        if h2 {
            self.h2.store(true, Ordering::Relaxed);
        } else if answer_by.is_some() {
            // Set before the connection task is told a request began, so that the wait it
            // starts then has its timer: one wake-up per request, not one more when the
            // answer begins.
            *self.lock_answer_by() = answer_by;
            self.answer.store(0, Ordering::Release);
        }
        self.begun.fetch_add(1, Ordering::AcqRel);
        if self.inflight.fetch_add(1, Ordering::AcqRel) == 0 {
            self.changed.notify_one();
        }
        InFlight {
            activity: self.clone(),
            finished: false,
        }
    }

    /// Whether the connection's client cancelled too many of its HTTP/2 streams: at least
    /// [`CANCELLED_STREAMS_MIN`], and more than half of those it opened. This is HTTP/2's
    /// "rapid reset" (CVE-2023-44487): each stream a client opens and resets at once costs the
    /// server a request's work for a few bytes. h2 ends such a connection itself when the
    /// resets arrive before the server took the streams (`ENHANCE_YOUR_CALM`); this bounds
    /// the streams it took first, which a server that keeps up takes. Ordinary clients cancel
    /// a few watches and requests, not most of their streams.
    #[must_use]
    pub fn too_many_resets(&self) -> bool {
        self.too_many_resets.load(Ordering::Acquire)
    }

    /// Requests begun so far.
    #[must_use]
    pub fn begun(&self) -> usize {
        self.begun.load(Ordering::Acquire)
    }

    /// Requests whose response has not finished.
    #[must_use]
    pub fn inflight(&self) -> usize {
        self.inflight.load(Ordering::Acquire)
    }

    /// Wakes when a request began, all finished, or an awaited byte arrived.
    pub fn changed(&self) -> tokio::sync::futures::Notified<'_> {
        self.changed.notified()
    }

    /// Whether requests arrived over HTTP/2.
    #[must_use]
    pub fn is_h2(&self) -> bool {
        self.h2.load(Ordering::Relaxed)
    }

    /// The answer of the HTTP/1.1 request in flight began: from now on it must be finished by
    /// the request's deadline, or its connection is closed. Before the deadline this only
    /// marks the answer (the connection task's timer already runs); after it (the handler
    /// answered as its deadline passed) the connection task is told at once.
    pub fn answer_began(&self) {
        if self.answer.fetch_or(ANSWER_BEGAN, Ordering::AcqRel) & DEADLINE_PASSED != 0 {
            self.changed.notify_one();
        }
    }

    /// The deadline the connection task still waits for: the HTTP/1.1 request in flight's,
    /// until the task saw it pass ([`Activity::deadline_passed`]).
    #[must_use]
    pub fn answer_deadline(&self) -> Option<tokio::time::Instant> {
        if self.answer.load(Ordering::Acquire) & DEADLINE_PASSED != 0 {
            return None;
        }
        *self.lock_answer_by()
    }

    /// The connection task saw the deadline of the HTTP/1.1 request in flight pass: whether its
    /// answer had begun (then it is cut off; else the limits layer answers 504, or the answer
    /// begins late and [`Activity::answer_began`] says so).
    pub fn deadline_passed(&self) -> bool {
        self.answer.fetch_or(DEADLINE_PASSED, Ordering::AcqRel) & ANSWER_BEGAN != 0
    }

    /// Whether the answer in flight began after its deadline passed (cut off then).
    #[must_use]
    pub fn answer_overdue(&self) -> bool {
        self.inflight() > 0 && self.answer.load(Ordering::Acquire) == ANSWER_BEGAN | DEADLINE_PASSED
    }

    fn lock_answer_by(&self) -> std::sync::MutexGuard<'_, Option<tokio::time::Instant>> {
        self.answer_by
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Asks to be told (by [`Activity::changed`]) when the next byte arrives, or stops asking.
    pub fn await_byte(&self, on: bool) {
        self.awaiting_byte.store(on, Ordering::Release);
    }

    /// Whether the awaited byte arrived (always true when none is awaited).
    #[must_use]
    pub fn byte_arrived(&self) -> bool {
        !self.awaiting_byte.load(Ordering::Acquire)
    }

    fn read(&self, bytes: usize) {
        if bytes > 0
            && self.awaiting_byte.load(Ordering::Relaxed)
            && self.awaiting_byte.swap(false, Ordering::AcqRel)
        {
            self.changed.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Goal: an HTTP/2 connection is judged to reset too many streams only once at least
    /// `CANCELLED_STREAMS_MIN` of its answers were dropped unfinished and they are more than
    /// half of its streams; finished answers never count, nor does HTTP/1.1.
    #[test]
    fn too_many_resets_needs_many_cancelled_streams_and_most_of_them() {
        use crate::limits::Held;
        let run = |h2: bool, finished: usize, cancelled: usize| {
            let activity = Arc::new(Activity::default());
            for _ in 0..finished {
                let mut request = activity.begin(h2, None);
                request.finished();
            }
            for _ in 0..cancelled {
                drop(activity.begin(h2, None));
            }
            activity.too_many_resets()
        };
        assert!(!run(true, 0, CANCELLED_STREAMS_MIN - 1), "too few");
        assert!(run(true, 0, CANCELLED_STREAMS_MIN), "all of them cancelled");
        assert!(
            run(true, 999, CANCELLED_STREAMS_MIN),
            "most of them cancelled"
        );
        assert!(
            !run(true, 2 * CANCELLED_STREAMS_MIN, CANCELLED_STREAMS_MIN),
            "a third of them cancelled"
        );
        assert!(!run(true, 100_000, 0), "finished answers never count");
        assert!(!run(false, 0, 10 * CANCELLED_STREAMS_MIN), "HTTP/1.1");
    }

    fn limits() -> Limits {
        Limits::new(
            &crate::config::LimitsConfig::default(),
            std::time::Duration::from_secs(1),
        )
    }

    #[test]
    fn only_hyper_automatic_answers_are_recognised() {
        let limits = limits();
        let hyper_431 = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\ndate: Tue, 01 Dec 2026 20:00:00 GMT\r\n\r\n";
        let (limit, error) = refusal(hyper_431, &limits).unwrap();
        assert_eq!((limit, error.code), (Limit::Header, 431));
        let hyper_414 = b"HTTP/1.1 414 URI Too Long\r\ncontent-length: 0\r\n\r\n";
        assert_eq!(refusal(hyper_414, &limits).unwrap().1.code, 414);
        let hyper_400 = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n";
        assert_eq!(refusal(hyper_400, &limits).unwrap().0, Limit::Malformed);
        for ours in [
            &b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 0\r\n\r\n"[..],
            b"HTTP/1.1 400 Bad Request\r\ncontent-length: 12\r\n\r\n",
            b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\nHTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n",
            b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n",
            b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n{}",
            b"{\"kind\":\"Status\"}",
        ] {
            assert!(
                refusal(ours, &limits).is_none(),
                "{}",
                String::from_utf8_lossy(ours)
            );
        }
        let answer = String::from_utf8(status_answer(&error_of(hyper_414, &limits))).unwrap();
        let (head, body) = answer.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 414 URI Too Long\r\n"), "{head}");
        assert!(head.contains(&format!("content-length: {}", body.len())));
        let status: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(status["reason"], "RequestURITooLong");
    }

    fn error_of(write: &[u8], limits: &Limits) -> ApiError {
        refusal(write, limits).unwrap().1
    }
}

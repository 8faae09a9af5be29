//! A response body that holds something (a slot, a request count) until it is finished.
//!
//! ## Guarantees
//! - What it holds is released when hyper polls the body past its last frame — which hyper
//!   does only when its write buffer is below its bound again, so at most that bound of the
//!   response is still unsent — or drops it (the connection closed, or the answer's deadline
//!   ended its HTTP/2 stream or HTTP/1.1 connection: `--request-timeout`); never when the
//!   handler returns.
//! - Size hints pass through, so `Content-Length` answers keep it.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

/// What a [`HoldBody`] holds: told when the body has given its last frame (not when it is
/// dropped unfinished), before it is released.
pub trait Held {
    /// The response was handed over whole.
    fn finished(&mut self) {}
}

/// A response body that holds `hold` until it is finished or dropped (whichever comes first):
/// an in-flight slot or a connection's request count is released when the response has been
/// handed to the connection, not when the handler returns. Size hints are kept, so
/// `Content-Length` is too.
#[derive(Debug)]
pub struct HoldBody<G> {
    inner: axum::body::Body,
    hold: Option<G>,
}

impl<G: Held + Send + Unpin + 'static> HoldBody<G> {
    /// `body` holding `hold`, as an axum body.
    pub fn wrap(body: axum::body::Body, hold: G) -> axum::body::Body {
        axum::body::Body::new(HoldBody {
            inner: body,
            hold: Some(hold),
        })
    }
}

impl<G: Held + Unpin> hyper::body::Body for HoldBody<G> {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        let frame = ready!(Pin::new(&mut self.inner).poll_frame(cx));
        if frame.is_none()
            && let Some(mut hold) = self.hold.take()
        {
            hold.finished();
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        // Not before the last poll: hyper drops a body that says it ended as soon as it has
        // taken its last frame, which may still wait in hyper's write buffer; polled again,
        // the body ends only once that buffer has room (below its bound) again.
        self.hold.is_none() && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

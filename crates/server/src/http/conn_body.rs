//! [`ConnBody`]: the body type a connection hands hyper, its data [`Chunk`]s.
//!
//! ## Guarantees
//! - Other responses' frames pass through unchanged (their `Bytes` as one-piece chunks), and
//!   a watch response's batches as they come, one chunk a batch.
//! - What the layers between the handler and the connection hold (a watch slot, the
//!   connection's in-flight count) is released when the watch's last frame has been taken,
//!   exactly as for any other body (see [`crate::limits::HoldBody`]).

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use hyper::body::{Body, Frame, SizeHint};

use crate::http::chunk::Chunk;
use crate::http::watch::WatchBody;

/// The body a connection hands hyper: any response's body, or a watch's batches taken from
/// the response (see [`crate::http::watch::WatchHandoff`]) with the body the layers wrapped
/// around it (which then yields nothing, and releases what the layers hold when it ends).
pub enum ConnBody {
    /// Any response: its frames pass through.
    Plain(axum::body::Body),
    /// A watch response.
    Watch {
        /// The watch's batches; `None` once it ended.
        events: Option<Box<WatchBody>>,
        /// The response's own body (the layers' holds), polled to its end after the events.
        shell: axum::body::Body,
    },
}

impl Body for ConnBody {
    type Data = Chunk;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Chunk>, axum::Error>>> {
        let shell = match &mut *self {
            ConnBody::Plain(body) => body,
            ConnBody::Watch { events, shell } => {
                if let Some(body) = events {
                    match ready!(body.poll_chunk(cx)) {
                        Some(chunk) => return Poll::Ready(Some(Ok(Frame::data(chunk)))),
                        None => *events = None,
                    }
                }
                shell
            }
        };
        let frame = ready!(Pin::new(shell).poll_frame(cx));
        Poll::Ready(frame.map(|frame| frame.map(|frame| frame.map_data(Chunk::from))))
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ConnBody::Plain(body) => body.is_end_stream(),
            ConnBody::Watch { events, shell } => events.is_none() && shell.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ConnBody::Plain(body) => body.size_hint(),
            ConnBody::Watch { .. } => SizeHint::default(),
        }
    }
}

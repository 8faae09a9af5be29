//! A response body rewritten piece by piece as the transport polls it ([`Transformed`]): what
//! gzip compression ([`crate::http::gzip`]) and pretty-printing ([`crate::http::pretty`])
//! share. Each piece the inner body yields is fed to the [`Transform`] when the transport asks
//! for the next one, what it gives back goes out at once (an empty result is not sent), and its
//! last words follow the inner body's end; nothing is gathered. Trailers are not passed on
//! (none are made here).

use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::Body;
use bytes::Bytes;
use hyper::body::{Frame, SizeHint};

/// A rewriting of a body's bytes, in order.
pub trait Transform: Send + Unpin + 'static {
    /// The bytes that stand for `input` (may be empty until later input).
    ///
    /// # Errors
    /// The rewriting failed; the body ends with the error.
    fn feed(&mut self, input: &[u8]) -> std::io::Result<Vec<u8>>;

    /// The bytes that end the body once the inner one has ended.
    ///
    /// # Errors
    /// The rewriting failed; the body ends with the error.
    fn finish(&mut self) -> std::io::Result<Vec<u8>>;
}

/// `inner`'s bytes through `T` (see the module docs).
pub struct Transformed<T> {
    inner: Body,
    /// `None` once finished.
    transform: Option<T>,
}

impl<T: Transform> Transformed<T> {
    /// `inner` rewritten by `transform`.
    pub fn new(inner: Body, transform: T) -> Transformed<T> {
        Transformed {
            inner,
            transform: Some(transform),
        }
    }
}

impl<T: Transform> hyper::body::Body for Transformed<T> {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = &mut *self;
        loop {
            let Some(transform) = this.transform.as_mut() else {
                return Poll::Ready(None);
            };
            let out = match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Err(error))) => return Poll::Ready(Some(Err(error))),
                Poll::Ready(Some(Ok(frame))) => {
                    let Ok(data) = frame.into_data() else {
                        continue;
                    };
                    transform.feed(&data)
                }
                Poll::Ready(None) => {
                    let last = transform.finish();
                    this.transform = None;
                    last
                }
            };
            match out {
                Ok(out) if out.is_empty() => {}
                Ok(out) => return Poll::Ready(Some(Ok(Frame::data(Bytes::from(out))))),
                Err(error) => {
                    this.transform = None;
                    return Poll::Ready(Some(Err(axum::Error::new(error))));
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.transform.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

/// Whether `response` is an uncompressed JSON answer (what YAML conversion and
/// pretty-printing rewrite).
#[must_use]
pub fn is_plain_json(response: &axum::response::Response) -> bool {
    let headers = response.headers();
    !headers.contains_key(axum::http::header::CONTENT_ENCODING)
        && headers
            .get(axum::http::header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.starts_with("application/json"))
}

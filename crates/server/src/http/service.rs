//! The server's request service: the audit layer ([`crate::audit::AuditLayer`]) around the
//! limits layer ([`crate::limits::layer`]) around the handler ([`crate::http::handle`]),
//! composed directly, without axum's `Router`.
//!
//! ## Guarantees
//! - Every request meets the same layers in the same order as through the `Router` this
//!   replaces (a router with only a fallback: every path reached the handler): audit outermost
//!   (it sees 401s, 403s, 429s and 504s), then the limits, then the handler.
//! - The answer is finished as axum's router finished it at its top level
//!   ([`finish`]): a `Content-Length` from an exact body size when none is set, an empty body
//!   for `HEAD`, and none for a successful `CONNECT`.
//! - Per request it boxes one future (the limits layer with the handler inside), not the four
//!   to five that the router's boxed routes, `from_fn`'s `Next` and the handler service made,
//!   and inserts no empty URL parameters into the request's extensions (issue 15: a PATCH's
//!   middleware instructions).
//!
//! Bounds: none of its own (a clone of two `Arc`s per request); the layers' limits apply.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, header};
use axum::response::Response;

use crate::http::App;
use crate::limits::LayerState;

/// The service of every request (see the module docs).
pub type Service = crate::audit::AuditService<Admitted>;

/// The service: the limits' state and the application, behind the audit layer `audit`.
#[must_use]
pub fn service(app: Arc<App>, limits: LayerState, audit: crate::audit::AuditLayer) -> Service {
    tower::Layer::layer(&audit, Admitted(Arc::new((limits, app))))
}

/// The limits layer and the handler (the audit layer's inner service).
#[derive(Clone)]
pub struct Admitted(Arc<(LayerState, Arc<App>)>);

impl std::fmt::Debug for Admitted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Admitted").field(&self.0.0).finish()
    }
}

impl tower::Service<Request> for Admitted {
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let inner = self.0.clone();
        Box::pin(async move {
            let (limits, app) = &*inner;
            Ok(crate::limits::layer(limits, request, |request| {
                crate::http::handle(State(app.clone()), request)
            })
            .await)
        })
    }
}

/// The answer to a request of `method` as axum's router finished it at its top level
/// (axum 0.8's `RouteFuture`): a successful `CONNECT` answer with a body or a length
/// loses its body; otherwise a body of exact size gets its `Content-Length` when it has none,
/// and a `HEAD` answer's body is dropped (after its length was set). Every answer without a
/// `Cache-Control` gets kube's `no-cache, private`.
pub fn finish(method: &Method, response: &mut Response) {
    use hyper::body::Body as _;
    // kube's `WithCacheControl`, around every handler: answers are not to be cached unless
    // the handler says otherwise (discovery, the OIDC documents).
    if !response.headers().contains_key(header::CACHE_CONTROL) {
        response.headers_mut().insert(
            header::CACHE_CONTROL,
            HeaderValue::from_static("no-cache, private"),
        );
    }
    if *method == Method::CONNECT && response.status().is_success() {
        if response.headers().contains_key(header::CONTENT_LENGTH)
            || response.headers().contains_key(header::TRANSFER_ENCODING)
            || response.body().size_hint().lower() != 0
        {
            *response.body_mut() = Body::empty();
        }
        return;
    }
    if !response.headers().contains_key(header::CONTENT_LENGTH)
        && let Some(size) = response.body().size_hint().exact()
    {
        let value = if size == 0 {
            HeaderValue::from_static("0")
        } else {
            HeaderValue::from(size)
        };
        response.headers_mut().insert(header::CONTENT_LENGTH, value);
    }
    if *method == Method::HEAD {
        *response.body_mut() = Body::empty();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_finished_as_the_router_finished_them() {
        let mut answer = Response::new(Body::from("four"));
        finish(&Method::GET, &mut answer);
        assert_eq!(answer.headers()[header::CONTENT_LENGTH], "4");
        assert_eq!(answer.headers()[header::CACHE_CONTROL], "no-cache, private");
        let mut answer = Response::new(Body::from("four"));
        answer
            .headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("public"));
        finish(&Method::GET, &mut answer);
        assert_eq!(answer.headers()[header::CACHE_CONTROL], "public");
        let mut answer = Response::new(Body::from("four"));
        finish(&Method::HEAD, &mut answer);
        assert_eq!(answer.headers()[header::CONTENT_LENGTH], "4");
        assert_eq!(hyper::body::Body::size_hint(answer.body()).exact(), Some(0));
        let mut answer = Response::new(Body::empty());
        finish(&Method::GET, &mut answer);
        assert_eq!(answer.headers()[header::CONTENT_LENGTH], "0");
        let mut answer = Response::new(Body::from("four"));
        answer
            .headers_mut()
            .insert(header::CONTENT_LENGTH, HeaderValue::from_static("9"));
        finish(&Method::GET, &mut answer);
        assert_eq!(answer.headers()[header::CONTENT_LENGTH], "9");
        let mut answer = Response::new(Body::from("four"));
        finish(&Method::CONNECT, &mut answer);
        assert!(!answer.headers().contains_key(header::CONTENT_LENGTH));
        assert_eq!(hyper::body::Body::size_hint(answer.body()).exact(), Some(0));
    }
}

//! Building responses: JSON and plain-text bodies, and every refusal as a `metav1.Status` with
//! kube-apiserver's code (and `Retry-After` when the error asks the client to come back).
//!
//! A resource request that negotiated protobuf ([`negotiated`]) gets its JSON answer (object,
//! list, Status, error or not) re-encoded by [`to_protobuf`]; LISTs and watches write protobuf
//! themselves from the objects' cached encodings.

mod warnings;

pub use warnings::{Warnings, header_value as warning_header};

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use watchkeeper_api::negotiate::{Conversion, Format, Negotiated, negotiate};
use watchkeeper_api::protobuf::{PROTOBUF_MEDIA_TYPE, encode_protobuf, has_protobuf_schema};
use watchkeeper_api::{ApiError, ResourceDef};

/// A JSON response.
#[must_use]
pub fn json_response(code: StatusCode, body: impl Into<Body>) -> Response {
    let mut response = Response::new(body.into());
    *response.status_mut() = code;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// A body of shared pieces, sent as they are (nothing is copied to join them), its length
/// known (so it has a `Content-Length`, as a body of one buffer has).
pub fn pieces<const N: usize>(pieces: [bytes::Bytes; N]) -> Body {
    Body::new(Pieces {
        remaining: pieces.iter().map(bytes::Bytes::len).sum(),
        pieces,
        next: 0,
    })
}

/// See [`pieces`].
struct Pieces<const N: usize> {
    pieces: [bytes::Bytes; N],
    /// The first piece not sent yet.
    next: usize,
    /// Bytes not sent yet.
    remaining: usize,
}

impl<const N: usize> hyper::body::Body for Pieces<N> {
    type Data = bytes::Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<bytes::Bytes>, Self::Error>>> {
        let this = self.get_mut();
        while this.next < N && this.pieces[this.next].is_empty() {
            this.next += 1;
        }
        let Some(piece) = this.pieces.get_mut(this.next) else {
            return std::task::Poll::Ready(None);
        };
        let piece = std::mem::take(piece);
        this.next += 1;
        this.remaining -= piece.len();
        std::task::Poll::Ready(Some(Ok(hyper::body::Frame::data(piece))))
    }

    fn is_end_stream(&self) -> bool {
        self.remaining == 0
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        hyper::body::SizeHint::with_exact(self.remaining as u64)
    }
}

/// A plain-text response.
#[must_use]
pub fn text_response(code: StatusCode, body: &str) -> Response {
    let mut response = Response::new(Body::from(body.to_owned()));
    *response.status_mut() = code;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// kube-apiserver's answer to a request whose handling panicked (its `WithPanicRecovery`
/// filter: Go's `http.Error`, plain text, not a `Status`).
#[must_use]
pub fn panic_response() -> Response {
    go_http_error(
        StatusCode::INTERNAL_SERVER_ERROR,
        "This request caused apiserver to panic. Look in the logs for details.\n",
    )
}

/// What Go's `http.Error` writes, as kube-apiserver's handlers answer outside the API's
/// `Status` (its panic recovery, kube-aggregator's proxy): `text` as plain text with
/// `X-Content-Type-Options: nosniff`.
#[must_use]
pub fn go_http_error(code: StatusCode, text: &str) -> Response {
    let mut response = text_response(code, text);
    response.headers_mut().insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

/// A Status response for an error, in kube-apiserver's field order and framing; a JSON patch
/// on which json-patch v4 panics ([`watchkeeper_api::patch::is_json_patch_panic`]) is
/// answered as kube's panic recovery answers it ([`panic_response`]).
#[must_use]
pub fn error_response(error: &ApiError) -> Response {
    crate::audit::context::refused(error);
    if watchkeeper_api::patch::is_json_patch_panic(error) {
        return panic_response();
    }
    let code = StatusCode::from_u16(error.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = json_response(code, error.to_status_body());
    if let Some(seconds) = error.retry_after_seconds
        && let Ok(value) = HeaderValue::from_str(&seconds.to_string())
    {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    for text in error.extra.iter().flat_map(|extra| &extra.warnings) {
        if let Some(value) = warnings::header_value(text) {
            response.headers_mut().append(header::WARNING, value);
        }
    }
    response
}

/// The conversion the client's `Accept` asks for (Table, object metadata, or none) and the
/// wire format (protobuf for a kind with protobuf schemas), as kube-apiserver negotiates them
/// ([`negotiate`]). `def` is `None` for answers that are not a resource's objects (access
/// reviews), which may be protobuf whatever their kind.
///
/// # Errors
/// 406 NotAcceptable when no range of the header can be served.
pub fn negotiated(headers: &HeaderMap, def: Option<&ResourceDef>) -> Result<Negotiated, ApiError> {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    // A plain JSON range is answered in JSON whatever the kind's formats: its protobuf
    // schemas (a look-up by a formatted `apiVersion`) are asked only for other headers.
    let protobuf = !watchkeeper_api::negotiate::is_plain_json_accept(accept)
        && def.is_none_or(|def| has_protobuf_schema(&def.api_version(), &def.kind));
    negotiate(accept, protobuf)
}

/// kube's 406 for a `Table` asked of an endpoint whose storage has no table convertor (the
/// access and token reviews, bindings, evictions, token requests: kube's
/// `RequestScope.AllowsMediaTypeTransform` without a `TableConvertor`), given before the
/// request's body is read.
///
/// # Errors
/// 406 NotAcceptable for such a request.
pub fn no_table(headers: &HeaderMap) -> Result<(), ApiError> {
    match negotiated(headers, None) {
        Ok(negotiated) if negotiated.conversion == Conversion::Table => {
            Err(ApiError::not_acceptable(format!(
                "only the following media types are accepted: {}",
                watchkeeper_api::negotiate::RESOURCE_MEDIA_TYPES
            )))
        }
        _ => Ok(()),
    }
}

/// [`negotiated`]'s conversion.
///
/// # Errors
/// 406 NotAcceptable when no range of the header can be served.
pub fn conversion(headers: &HeaderMap, def: &ResourceDef) -> Result<Conversion, ApiError> {
    negotiated(headers, Some(def)).map(|n| n.conversion)
}

/// Marks a JSON response that must stay JSON (a LIST that fell back to JSON because an item
/// cannot be encoded as protobuf, a watch answered in JSON): [`to_protobuf`] leaves it alone.
#[derive(Clone, Copy, Debug)]
pub struct KeepJson;

/// The response re-encoded as protobuf, when `negotiated` asked for protobuf and the body is
/// JSON (`application/json`) of a shape with protobuf schemas (an object, its list, a Status),
/// keeping the status code and headers. A body that cannot be encoded stays JSON when the
/// client accepts JSON, and becomes a 406 Status (in protobuf) otherwise; responses in another
/// type (a protobuf LIST or watch, text) pass through. `unencodable` is called when the body
/// could not be encoded.
pub async fn to_protobuf(
    negotiated: Option<Negotiated>,
    response: Response,
    unencodable: impl FnOnce(),
) -> Response {
    let Some(negotiated) = negotiated.filter(|n| n.format == Format::Protobuf) else {
        return response;
    };
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes() == b"application/json");
    // A streamed body (a watch) is never collected here.
    let streamed = hyper::body::Body::size_hint(response.body())
        .exact()
        .is_none();
    if !is_json || streamed || response.extensions().get::<KeepJson>().is_some() {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return error_response(&ApiError::internal("the response body could not be read"));
    };
    let encoded = watchkeeper_api::go_json::parse_stored(&bytes)
        .map_err(|e| ApiError::internal(e.to_string()))
        .and_then(|value| encode_protobuf(&value));
    if encoded.is_err() {
        unencodable();
    }
    match encoded {
        Ok(protobuf) => {
            parts.headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static(PROTOBUF_MEDIA_TYPE),
            );
            parts.headers.remove(header::CONTENT_LENGTH);
            Response::from_parts(parts, Body::from(protobuf))
        }
        Err(_) if negotiated.json_fallback => Response::from_parts(parts, Body::from(bytes)),
        Err(error) => {
            // The refusal itself in protobuf, the one type the client accepts.
            let mut response = error_response(&error);
            if let Ok(status) = encode_protobuf(&error.to_status()) {
                *response.body_mut() = Body::from(status);
                response.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static(PROTOBUF_MEDIA_TYPE),
                );
            }
            response
        }
    }
}

/// Seconds since the Unix epoch (for Table ages).
#[must_use]
pub fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

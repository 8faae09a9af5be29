//! Building responses: JSON and plain-text bodies, and every refusal as a `metav1.Status` with
//! kube-apiserver's code (and `Retry-After` when the error asks the client to come back).

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use watchkeeper_api::ApiError;
use watchkeeper_api::negotiate::{Conversion, negotiate_conversion};

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

/// A Status response for an error, in kube-apiserver's field order and framing.
#[must_use]
pub fn error_response(error: &ApiError) -> Response {
    let code = StatusCode::from_u16(error.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = json_response(code, error.to_status_body());
    if let Some(seconds) = error.retry_after_seconds
        && let Ok(value) = HeaderValue::from_str(&seconds.to_string())
    {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    response
}

/// The conversion the client's `Accept` asks for (Table, object metadata, or none), as
/// kube-apiserver negotiates it ([`negotiate_conversion`]).
///
/// # Errors
/// 406 NotAcceptable when no range of the header can be served.
pub fn conversion(headers: &HeaderMap) -> Result<Conversion, ApiError> {
    negotiate_conversion(headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()))
}

/// Seconds since the Unix epoch (for Table ages).
#[must_use]
pub fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

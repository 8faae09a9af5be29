//! Response compression as kube-apiserver does it (`APIResponseCompression`): gzip at level 1
//! when the request's `Accept-Encoding` lists `gzip` and the response is larger than
//! `--gzip-min-response-bytes` (128 KiB, kube-apiserver's `defaultGzipThresholdBytes`).
//!
//! ## Guarantees
//! - Only a response whose length is known and above the threshold is compressed; it then
//!   carries `Content-Encoding: gzip` and `Vary: Accept-Encoding` and no `Content-Length`
//!   (HTTP/1.1 chunked). Watches are never compressed (kube-apiserver writes watch frames
//!   directly, uncompressed), nor responses that already have a `Content-Encoding`.
//! - `gzip` is recognised as kube-apiserver's `ContentEncodingSupported` does: a token of the
//!   comma-separated `Accept-Encoding` value equal to `gzip` once trimmed (`gzip;q=0.5` is not).
//! - Compression is streamed: each piece the inner body produces (a LIST's pieces, see
//!   [`crate::http::list_body`]) is compressed when the transport asks for the next piece, and
//!   the compressed bytes are handed on at once; a response holds the compressor's state
//!   (its window and tables, a few hundred KiB) and one piece, never the whole compressed
//!   response.

use std::io::Write;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::Response;
use flate2::Compression;
use flate2::write::GzEncoder;
use hyper::body::Body as _;

use crate::http::transform::{Transform, Transformed};

/// kube-apiserver's gzip level (`gzipContentEncodingLevel`): least CPU, similar ratios.
const LEVEL: u32 = 1;

/// Whether the request's `Accept-Encoding` (its first value, as Go's `Header.Get`) lists gzip.
#[must_use]
pub fn accepts_gzip(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT_ENCODING)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.split(',').any(|token| token.trim() == "gzip"))
}

/// Whether `response`'s known length is above `min_bytes` (`None`: never).
#[must_use]
pub fn is_large(min_bytes: Option<usize>, response: &Response) -> bool {
    min_bytes.is_some_and(|min_bytes| {
        response
            .body()
            .size_hint()
            .exact()
            .is_some_and(|length| length > u64::try_from(min_bytes).unwrap_or(u64::MAX))
    })
}

/// `response` gzip-compressed when `compress` (the client accepts gzip and the answer is large:
/// [`is_large`], decided before any change of its length), unless it already has a
/// `Content-Encoding`.
#[must_use]
pub fn compress_if(compress: bool, response: Response) -> Response {
    if !compress || response.headers().contains_key(header::CONTENT_ENCODING) {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    parts.headers.remove(header::CONTENT_LENGTH);
    parts
        .headers
        .insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    parts
        .headers
        .append(header::VARY, HeaderValue::from_static("Accept-Encoding"));
    let gzip = Gzip(GzEncoder::new(Vec::new(), Compression::new(LEVEL)));
    Response::from_parts(parts, Body::new(Transformed::new(body, gzip)))
}

/// gzip at [`LEVEL`], piece by piece.
struct Gzip(GzEncoder<Vec<u8>>);

impl Transform for Gzip {
    fn feed(&mut self, input: &[u8]) -> std::io::Result<Vec<u8>> {
        self.0.write_all(input)?;
        Ok(std::mem::take(self.0.get_mut()))
    }

    fn finish(&mut self) -> std::io::Result<Vec<u8>> {
        self.0.try_finish()?;
        Ok(std::mem::take(self.0.get_mut()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::ACCEPT_ENCODING,
            HeaderValue::from_str(value).unwrap(),
        );
        headers
    }

    #[test]
    fn gzip_is_recognised_as_kube_apiserver_does() {
        assert!(accepts_gzip(&headers("gzip")));
        assert!(accepts_gzip(&headers("deflate, gzip")));
        assert!(accepts_gzip(&headers(" gzip ,br")));
        assert!(!accepts_gzip(&headers("gzip;q=1")));
        assert!(!accepts_gzip(&headers("x-gzip")));
        assert!(!accepts_gzip(&HeaderMap::new()));
    }
}

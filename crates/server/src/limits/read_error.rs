//! A request body that breaks off or is malformed, answered as kube-apiserver answers it.
//!
//! kube's handlers read the body with `limitedReadBody` and hand a read error to
//! `scope.err` as it is: not a `metav1.Status`, so `ErrorToAPIStatus` makes it a 500 with no
//! reason and Go's `net/http` error as the message.
//!
//! ## Guarantees
//! - A body that ends before its `Content-Length` (or its chunked encoding ends before its last
//!   chunk) is 500 `unexpected EOF` (Go's `io.ErrUnexpectedEOF`).
//! - A chunked body's malformed chunk is 500 with the text of Go's chunked reader
//!   (`net/http/internal/chunked.go`): `invalid byte in chunk length` (a size line that is not
//!   hex; hyper does not tell an empty one, Go's `empty hex number for chunk length`, from
//!   one that starts with a byte that is not hex, so both are said this way), `http chunk
//!   length too large`, `malformed chunked encoding` (a chunk not ended by CRLF, a bad
//!   trailer), `chunked encoding contains too much non-data` (extensions past the bound).
//! - Any other read error (the connection reset) is 500 with its text; nobody is left to read
//!   it.

use std::error::Error;
use std::io::ErrorKind;

use watchkeeper_api::ApiError;

/// kube-apiserver's answer to a request body that could not be read (see the module docs).
pub(super) fn body_read_error(error: &(dyn Error + 'static)) -> ApiError {
    ApiError::new(500, "", go_text(error))
}

/// Go's `net/http` text for the read error under `error` (hyper's `io::Error`).
fn go_text(error: &(dyn Error + 'static)) -> String {
    let mut cause = Some(error);
    while let Some(error) = cause {
        if let Some(io) = error.downcast_ref::<std::io::Error>() {
            if io.kind() == ErrorKind::UnexpectedEof {
                return "unexpected EOF".to_owned();
            }
            let text = io.to_string();
            return match text.as_str() {
                "invalid chunk size: overflow" => "http chunk length too large",
                "chunk extensions over limit" => "chunked encoding contains too much non-data",
                t if t.starts_with("Invalid chunk size") || t.contains("chunk extension") => {
                    "invalid byte in chunk length"
                }
                t if t.starts_with("Invalid chunk")
                    || t.starts_with("Invalid trailer")
                    || t.starts_with("chunk trailers") =>
                {
                    "malformed chunked encoding"
                }
                _ => return text,
            }
            .to_owned();
        }
        cause = error.source();
    }
    error.to_string()
}

#[cfg(test)]
mod tests {
    use std::io::{Error, ErrorKind};

    use super::body_read_error;

    #[test]
    fn hyper_s_read_errors_are_go_s_500() {
        for (kind, text, want) in [
            (
                ErrorKind::UnexpectedEof,
                "end of file before message length reached",
                "unexpected EOF",
            ),
            (
                ErrorKind::InvalidInput,
                "Invalid chunk size line: Invalid Size",
                "invalid byte in chunk length",
            ),
            (
                ErrorKind::InvalidInput,
                "Invalid chunk size LF",
                "invalid byte in chunk length",
            ),
            (
                ErrorKind::InvalidData,
                "invalid chunk size: overflow",
                "http chunk length too large",
            ),
            (
                ErrorKind::InvalidInput,
                "Invalid chunk size line: missing size digit",
                "invalid byte in chunk length",
            ),
            (
                ErrorKind::InvalidInput,
                "Invalid chunk body LF",
                "malformed chunked encoding",
            ),
            (
                ErrorKind::InvalidInput,
                "Invalid chunk end LF",
                "malformed chunked encoding",
            ),
            (
                ErrorKind::InvalidData,
                "chunk extensions over limit",
                "chunked encoding contains too much non-data",
            ),
            (
                ErrorKind::ConnectionReset,
                "connection reset by peer",
                "connection reset by peer",
            ),
        ] {
            let error = axum::Error::new(Error::new(kind, text));
            let answer = body_read_error(&error);
            assert_eq!((answer.code, answer.reason.as_str()), (500, ""), "{text}");
            assert_eq!(answer.message, want, "{text}");
        }
    }
}

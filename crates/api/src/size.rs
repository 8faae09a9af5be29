//! The size of an object as the store is handed it: the limit, and how it is counted.
//!
//! ## Guarantees
//! - An object whose compact JSON is longer than [`OBJECT_SIZE_MAX_BYTES`] (etcd's default
//!   request limit) is refused with 413 `Request entity too large: the object is N bytes, more
//!   than the limit of 1572864 bytes` ([`check_stored_size`]), its managed fields included.
//! - Counting costs nothing for an object whose text cannot be too long (a bound from the
//!   lengths it holds, [`serialized_size_at_most`]), and one walk without writing the text
//!   otherwise ([`serialized_size`]).
//! - A server-side apply configuration is refused before its merge only when what every
//!   write keeps of it is already past the limit ([`check_applied_size`]), so nothing the
//!   final check would accept is refused early.
//!
//! A leaf: the checks that need the limit (`meta`'s create and update, `gostruct`'s bound on
//! Go zero values) take it from here.

use serde_json::Value;

use crate::error::ApiError;

/// The largest object the server stores, in bytes of compact JSON: etcd's default request
/// limit (`--max-request-bytes`, 1.5 MiB).
pub const OBJECT_SIZE_MAX_BYTES: usize = 1536 * 1024;

/// Refuses (413) an object whose compact JSON, its managed fields included, is longer than
/// [`OBJECT_SIZE_MAX_BYTES`]: what the store is handed, as etcd's request limit applies to
/// kube-apiserver's whole object. [`crate::meta::prepare_create`] and [`crate::meta::prepare_update`] check the object
/// before its managed fields are set; a client's `managedFields` (an update may set them) or
/// the managed fields of an object of many fields could take it past the limit after.
///
/// # Errors
/// 413 `Request entity too large: the object is N bytes, more than the limit of 1572864
/// bytes`.
pub fn check_stored_size(object: &Value) -> Result<(), ApiError> {
    check_size(object)
}

pub(crate) fn check_size(object: &Value) -> Result<(), ApiError> {
    // Counting the text costs a serialization (a twentieth of a small write's instructions);
    // an object whose text cannot be too long is not counted.
    if serialized_size_at_most(object) <= OBJECT_SIZE_MAX_BYTES {
        return Ok(());
    }
    let size = serialized_size(object);
    if size > OBJECT_SIZE_MAX_BYTES {
        return Err(ApiError::request_entity_too_large(format!(
            "the object is {size} bytes, more than the limit of {OBJECT_SIZE_MAX_BYTES} bytes"
        )));
    }
    Ok(())
}

/// Refuses (413, as [`check_stored_size`]) a server-side apply configuration whose values that
/// every write keeps are already past the object limit, before the merge and the field sets
/// that would cost many times its size (a 3 MB configuration of 100,000 containers took
/// 400 MB to reach the size check). Counted: the values that are not zero (Go's `omitempty`
/// may leave a zero out of the stored object), outside the top-level `status` (a write of
/// the main resource resets it); every such value is in the applied object, so only what
/// the final size check would refuse is refused here.
///
/// # Errors
/// 413 `Request entity too large: the object is at least N bytes, more than the limit of
/// 1572864 bytes`.
pub fn check_applied_size(config: &Value) -> Result<(), ApiError> {
    if serialized_size_at_most(config) <= OBJECT_SIZE_MAX_BYTES {
        return Ok(());
    }
    let Value::Object(map) = config else {
        return Ok(());
    };
    let kept =
        map.iter()
            .filter(|(key, _)| *key != "status")
            .fold(2, |sum: usize, (key, value)| match kept_size(value) {
                0 => sum,
                size => sum.saturating_add(key.len() + 4 + size),
            });
    if kept > OBJECT_SIZE_MAX_BYTES {
        return Err(ApiError::request_entity_too_large(format!(
            "the object is at least {kept} bytes, more than the limit of {OBJECT_SIZE_MAX_BYTES} bytes"
        )));
    }
    Ok(())
}

/// A lower bound on the compact JSON length of what `value` leaves in an object decoded into
/// its Go struct: zero for a zero (`null`, `false`, `0`, `""`, an empty or all-zero list or
/// map), whose field `omitempty` may leave out; otherwise its non-zero parts and their
/// punctuation (a string's text without escapes, a number's one digit).
pub(crate) fn kept_size(value: &Value) -> usize {
    match value {
        Value::Null | Value::Bool(false) => 0,
        Value::Bool(true) => 4,
        Value::Number(number) => usize::from(number.as_f64() != Some(0.0)),
        Value::String(text) if text.is_empty() => 0,
        Value::String(text) => text.len() + 2,
        Value::Array(items) => {
            let inner = items.iter().map(kept_size).filter(|size| *size > 0);
            let (count, sum) = inner.fold((0usize, 0usize), |(count, sum), size| {
                (count + 1, sum.saturating_add(size))
            });
            if count == 0 {
                0
            } else {
                sum.saturating_add(count + 1)
            }
        }
        Value::Object(map) => {
            let (count, sum) = map
                .iter()
                .map(|(key, value)| (key, kept_size(value)))
                .filter(|(_, size)| *size > 0)
                .fold((0usize, 0usize), |(count, sum), (key, size)| {
                    (count + 1, sum.saturating_add(key.len() + 3 + size))
                });
            if count == 0 {
                0
            } else {
                sum.saturating_add(count + 1)
            }
        }
    }
}

/// A bound on the length of `serde_json::to_vec(object)` from the lengths the value holds,
/// without looking at a string's bytes: a string is written in at most six bytes per byte
/// (`\u001f`) and its quotes, a number in at most 24 (`-2.2250738585072014e-308`; the
/// workspace's serde_json keeps numbers as machine numbers: no `arbitrary_precision`), and
/// every map or list entry takes one separator.
pub(crate) fn serialized_size_at_most(object: &Value) -> usize {
    fn string(text: &str) -> usize {
        text.len().saturating_mul(6).saturating_add(2)
    }
    match object {
        Value::Null | Value::Bool(_) => 5,
        Value::Number(_) => 24,
        Value::String(text) => string(text),
        Value::Array(items) => items.iter().fold(2, |sum: usize, item| {
            sum.saturating_add(serialized_size_at_most(item) + 1)
        }),
        Value::Object(map) => map.iter().fold(2, |sum: usize, (key, value)| {
            sum.saturating_add(string(key) + 2 + serialized_size_at_most(value))
        }),
    }
}

/// The length of `serde_json::to_vec(object)`, counted without writing the text anywhere.
pub(crate) fn serialized_size(object: &Value) -> usize {
    /// Counts what is written to it.
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    match serde_json::to_writer(&mut count, object) {
        Ok(()) => count.0,
        Err(_) => 0,
    }
}

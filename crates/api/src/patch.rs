//! PATCH bodies: JSON merge patch (RFC 7386), JSON patch (RFC 6902) and Kubernetes' strategic
//! merge patch.
//!
//! The result of [`apply_patch`] is the patched object only; the caller then runs
//! [`crate::prepare_update`] on it, which checks `apiVersion`/`kind`, keeps immutable metadata
//! and bumps the generation.
//!
//! ## Errors
//! A patch that cannot be decoded, or whose directives are malformed, is a 400 BadRequest. A
//! well-formed JSON patch that cannot be applied to this object (a missing path, a failed
//! `test`) is a 422, as in Kubernetes. Nothing here panics on any input; the recursion depth is
//! bounded by serde_json's nesting limit (128) on the patch.
//!
//! ## Memory bound
//! A patch cannot make the server hold more than `original + patch + copy limit` bytes of
//! document (sizes as compact JSON), whatever it contains:
//! - merge and strategic merge patches only ever place values taken from the patch body, so the
//!   result is at most the original plus the patch;
//! - a JSON patch's `add`, `replace` and `test` values come from the patch body as well; only
//!   `copy` duplicates what is already in the document (and so can double it per operation).
//!   As in kube-apiserver (`JSONPatchMaxCopyBytes`, json-patch's `AccumulatedCopySizeLimit`),
//!   the bytes all `copy` operations of one patch add are summed, measured *before* the value
//!   is cloned, and the patch is refused with 422 once the sum passes
//!   [`PatchLimits::copy_bytes_max`] (default [`JSON_PATCH_COPY_BYTES_MAX`], 3 MiB). So after
//!   every operation the document is at most `original + patch + copy_bytes_max` bytes.
//!
//! The operation count is bounded separately ([`JSON_PATCH_OPERATIONS_MAX`], 413) and the
//! object size after the patch by [`crate::size::OBJECT_SIZE_MAX_BYTES`] (413, in
//! [`crate::prepare_update`]).
//!
//! ## Nesting bound
//! A patched object nests no deeper than a JSON body may ([`JSON_NESTING_MAX`]), so whatever a patch stores reads back from the store after a restart, and
//! no recursive walk over it (clone, drop, validation, encoding) can run out of stack. Merge,
//! strategic merge and apply results nest no deeper than the original or the patch, each
//! already within it; a JSON patch operation places its value under its path, so an `add`,
//! `replace`, `move` or `copy` whose path length plus its value's nesting passes the bound is
//! refused with 422 before the value is cloned or placed (without it, `copy` operations of a
//! small patch, each copying a value under its own deepest path, double its depth each: nine
//! built 51,200 levels, which overflowed a worker's stack and aborted the server).
//!
//! ## Strategic merge patch
//! Kubernetes drives strategic merge from Go struct tags, which its OpenAPI documents publish
//! as `x-kubernetes-patch-strategy` and `x-kubernetes-patch-merge-key`; this walk reads them
//! from the kind's schema (the same definitions, with the same markers, as server-side apply:
//! [`crate::apply::typed`]). A list whose strategy includes `merge` merges item by item by its
//! merge key (`containers` and `env` by `name`, container `ports` by `containerPort`,
//! `volumeMounts` by `mountPath`, ...), or as a set when it has no merge key (scalars such as
//! `metadata.finalizers`); every other list, and every field the schema does not declare, is
//! replaced whole. A map whose strategy is `replace` (PodDisruptionBudget's `selector`) is
//! replaced whole too. Directives:
//! `$patch: replace | delete | merge` on maps and list items, `$retainKeys`,
//! `$deleteFromPrimitiveList/<field>` and `$setElementOrder/<field>` (used to order the merged
//! list). As in Kubernetes, strategic merge patch is refused (415) for custom resources;
//! `kubectl apply` sends them a JSON merge patch instead.

use std::collections::{HashMap, HashSet, VecDeque};

use serde_json::{Map, Value};

use crate::apply::typed::Ty;
use crate::error::ApiError;
use crate::field::json_equal;
use crate::json_pointer::parse_pointer;
use crate::names::type_name;
use crate::resources::ResourceDef;

/// The most operations one JSON patch may carry, Kubernetes' `maxJSONPatchOperations`.
pub const JSON_PATCH_OPERATIONS_MAX: usize = 10_000;

/// The deepest nesting of objects and arrays a patched object may have: what a JSON body may
/// ([`crate::go_json::BODY_MAX_DEPTH`]), so that it reads back from the store.
pub const JSON_NESTING_MAX: usize = crate::go_json::BODY_MAX_DEPTH;

/// How many objects and arrays `value` nests at its deepest (a scalar 0, `{}` 1, `{"a": []}`
/// 2), counted without recursion, so any depth is measured safely.
#[must_use]
pub fn nesting(value: &Value) -> usize {
    let mut deepest = 0;
    let mut pending = vec![(value, 0usize)];
    while let Some((value, above)) = pending.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match value {
            Value::Object(map) => Box::new(map.values()),
            Value::Array(items) => Box::new(items.iter()),
            _ => continue,
        };
        deepest = deepest.max(above + 1);
        pending.extend(children.map(|child| (child, above + 1)));
    }
    deepest
}

/// The default bound on the bytes (compact JSON) all `copy` operations of one JSON patch may
/// add to the document: kube-apiserver's default `JSONPatchMaxCopyBytes`, 3 MiB (twice etcd's
/// 1.5 MiB request limit).
pub const JSON_PATCH_COPY_BYTES_MAX: usize = 3 * 1024 * 1024;

/// The bounds applied while a patch is applied (see the module docs for the memory bound they
/// give).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PatchLimits {
    /// The most bytes (compact JSON) the `copy` operations of one JSON patch may add, summed.
    /// Default [`JSON_PATCH_COPY_BYTES_MAX`].
    pub copy_bytes_max: usize,
}

impl Default for PatchLimits {
    fn default() -> PatchLimits {
        PatchLimits {
            copy_bytes_max: JSON_PATCH_COPY_BYTES_MAX,
        }
    }
}

/// The 422 of a JSON patch whose copies pass [`PatchLimits::copy_bytes_max`]. kube-apiserver
/// answers every failed JSON patch with `NewGenericServerResponse(422, ...)`: reason
/// `Invalid`, its generic message, and no causes; we keep that code, reason and message and add
/// json-patch's own explanation as the one cause, so the client can tell why.
fn copy_limit_exceeded(accumulated: usize, limit: usize) -> ApiError {
    ApiError {
        details: Some(serde_json::json!({"causes": [{"message": format!(
            "Unable to complete the copy, the accumulated size increase of copy is {accumulated}, exceeding the limit {limit}"
        )}]})),
        ..ApiError::new(
            422,
            "Invalid",
            "the server rejected our request due to an error in our request",
        )
    }
}

/// Whether `error` is the refusal of a JSON patch whose `copy` operations passed
/// [`PatchLimits::copy_bytes_max`] (so the server can count it in its metrics).
#[must_use]
pub fn is_copy_limit_refusal(error: &ApiError) -> bool {
    error.code == 422
        && error
            .details
            .as_ref()
            .and_then(|details| details.pointer("/causes/0/message"))
            .and_then(serde_json::Value::as_str)
            .is_some_and(|message| {
                message.starts_with("Unable to complete the copy, the accumulated size increase")
            })
}

/// The size of a value as compact JSON, counted without building the text.
pub(crate) fn json_size(value: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing a `Value` to a sink that never fails cannot fail.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// The kind of PATCH body, from its `Content-Type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchType {
    /// `application/merge-patch+json`: RFC 7386.
    Merge,
    /// `application/json-patch+json`: RFC 6902.
    Json,
    /// `application/strategic-merge-patch+json`: Kubernetes' strategic merge patch.
    StrategicMerge,
    /// `application/apply-patch+yaml`: server-side apply, which needs the object's managers:
    /// [`crate::apply::apply`] merges it; [`apply_patch`] refuses it with 415.
    Apply,
}

impl PatchType {
    /// Maps a `Content-Type` (parameters such as `charset` ignored, case-insensitive) to a patch
    /// type; `None` for anything else.
    #[must_use]
    pub fn from_content_type(content_type: &str) -> Option<PatchType> {
        // Compared without case, not lowercased into a new string per request.
        let essence = content_type.split(';').next().unwrap_or("").trim();
        [
            ("application/merge-patch+json", PatchType::Merge),
            ("application/json-patch+json", PatchType::Json),
            (
                "application/strategic-merge-patch+json",
                PatchType::StrategicMerge,
            ),
            ("application/apply-patch+yaml", PatchType::Apply),
            ("application/apply-patch+cbor", PatchType::Apply),
        ]
        .into_iter()
        .find_map(|(media, patch_type)| essence.eq_ignore_ascii_case(media).then_some(patch_type))
    }

    /// The `Content-Type` of this patch type.
    #[must_use]
    pub fn content_type(self) -> &'static str {
        match self {
            PatchType::Merge => "application/merge-patch+json",
            PatchType::Json => "application/json-patch+json",
            PatchType::StrategicMerge => "application/strategic-merge-patch+json",
            PatchType::Apply => "application/apply-patch+yaml",
        }
    }
}

/// The 415 for an unknown patch `Content-Type`, with Kubernetes' list of accepted types.
#[must_use]
pub fn unsupported_patch_type(content_type: &str) -> ApiError {
    ApiError::unsupported_media_type(format!(
        "the body of the request was in an unknown format ({content_type}) - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json"
    ))
}

/// Applies a PATCH body to the stored object and returns the patched object.
///
/// # Errors
/// 400 for undecodable or malformed patches and for results that are not JSON objects, 422 for
/// JSON patches that do not apply, 413 for more than [`JSON_PATCH_OPERATIONS_MAX`] operations,
/// 415 for server-side apply and for strategic merge on custom resources.
pub fn apply_patch(
    def: &ResourceDef,
    patch_type: PatchType,
    original: &Value,
    patch: &[u8],
) -> Result<Value, ApiError> {
    apply_patch_with_limits(def, patch_type, original, patch, PatchLimits::default())
}

/// [`apply_patch`], and whether [`crate::schema::prune_unknown_fields`] has anything to do
/// with the patched object, which the decode check found in the same walk (a write that
/// prunes next skips that walk when it has nothing to do).
///
/// # Errors
/// As [`apply_patch`].
pub fn apply_patch_checked(
    def: &ResourceDef,
    patch_type: PatchType,
    original: &Value,
    patch: &[u8],
) -> Result<(Value, crate::schema::Pruning), ApiError> {
    patched(def, patch_type, original, patch, PatchLimits::default())
}

/// [`apply_patch`] with the server's configured [`PatchLimits`].
///
/// # Errors
/// As [`apply_patch`], and 422 when the copies of a JSON patch pass
/// [`PatchLimits::copy_bytes_max`].
pub fn apply_patch_with_limits(
    def: &ResourceDef,
    patch_type: PatchType,
    original: &Value,
    patch: &[u8],
    limits: PatchLimits,
) -> Result<Value, ApiError> {
    patched(def, patch_type, original, patch, limits).map(|(object, _)| object)
}

/// The patched object (see [`apply_patch_checked`]).
fn patched(
    def: &ResourceDef,
    patch_type: PatchType,
    original: &Value,
    patch: &[u8],
    limits: PatchLimits,
) -> Result<(Value, crate::schema::Pruning), ApiError> {
    let result = match patch_type {
        PatchType::Apply => {
            return Err(ApiError::unsupported_media_type(
                "server-side apply (application/apply-patch+yaml) needs the object's field managers: it is merged by the apply path, not as a patch",
            ));
        }
        PatchType::Merge => {
            let patch = decode(def, patch, "merge patch")?;
            let mut target = original.clone();
            merge_patch(&mut target, patch);
            target
        }
        PatchType::Json => {
            let patch = decode(def, patch, "JSON patch")?;
            json_patch_with_limits(original, &patch, limits)?
        }
        PatchType::StrategicMerge => {
            if !def.is_builtin() {
                // kube's patch handler offers custom resources no strategic merge patch.
                return Err(ApiError::unsupported_media_type(
                    "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
                ));
            }
            let patch = decode(def, patch, "strategic merge patch")?;
            strategic_merge_patch(original, &patch, crate::apply::schema_root(def, None))?
        }
    };
    if !result.is_object() {
        return Err(ApiError::bad_request(format!(
            "the patched object must be a JSON object, not {}",
            type_name(&result)
        )));
    }
    // A merge patch's numbers stand in the result where they stood in the patch, a JSON
    // patch's under the operation that placed them: a float in an integer field is judged by
    // its literal there, as kube decodes the patched bytes.
    let literals = match patch_type {
        PatchType::Merge => Some(crate::schema::Literals::Same(patch)),
        PatchType::Json => Some(crate::schema::Literals::JsonPatch(patch)),
        _ => None,
    };
    let pruning = crate::schema::check_patched_from(def, &result, literals)?;
    Ok((result, pruning))
}

/// A patch's JSON. Its numbers are read as kube's storage round trip leaves them
/// ([`crate::go_json::ReadBack`]: `2.0` is 2) for a custom resource, whose patched object kube
/// stores and reads back so, and for a strategic merge patch, which kube decodes into a map
/// and converts into the kind's Go type (`applyPatchToObject`: the converter sets an integer
/// field from an integral float64). A built-in kind's merge or JSON patch keeps the literal's
/// reading: kube decodes the patched bytes into the Go type, which refuses `2.0` in an integer
/// field.
fn decode(def: &ResourceDef, bytes: &[u8], what: &str) -> Result<Value, ApiError> {
    let read_back = !def.is_builtin() || what == "strategic merge patch";
    let parsed = if read_back {
        crate::go_json::parse_read_back(bytes)
    } else {
        crate::go_json::parse(bytes)
    };
    parsed.map_err(|e| ApiError::bad_request(format!("error decoding {what}: {e}")))
}

/// RFC 7386 JSON merge patch, in place. The patch's keys and values are moved into the
/// target, not copied; a key the target has is looked up, not made again.
pub fn merge_patch(target: &mut Value, patch: Value) {
    let Value::Object(patch) = patch else {
        *target = patch;
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    if let Value::Object(map) = target {
        for (key, value) in patch {
            if value.is_null() {
                map.remove(&key);
            } else if let Some(slot) = map.get_mut(&key) {
                merge_patch(slot, value);
            } else {
                merge_patch(map.entry(key).or_insert(Value::Null), value);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// RFC 6902

/// A JSON patch operation that does not apply, as kube-apiserver answers it
/// (`NewGenericServerResponse(422, ...)`): its generic message, and json-patch's explanation
/// as the one cause (`UnexpectedServerResponse`).
fn unprocessable(message: String) -> ApiError {
    ApiError {
        details: Some(serde_json::json!({"causes": [
            {"reason": "UnexpectedServerResponse", "message": message}
        ]})),
        ..ApiError::new(
            422,
            "Invalid",
            "the server rejected our request due to an error in our request",
        )
    }
}

/// An array index token: digits without a leading zero.
fn parse_index(token: &str) -> Option<usize> {
    if token.is_empty()
        || !token.bytes().all(|b| b.is_ascii_digit())
        || (token.len() > 1 && token.starts_with('0'))
    {
        return None;
    }
    token.parse().ok()
}

fn pointer_get<'a>(doc: &'a Value, tokens: &[String]) -> Option<&'a Value> {
    tokens.iter().try_fold(doc, |value, token| match value {
        Value::Object(map) => map.get(token),
        Value::Array(items) => parse_index(token).and_then(|i| items.get(i)),
        _ => None,
    })
}

fn pointer_get_mut<'a>(doc: &'a mut Value, tokens: &[String]) -> Option<&'a mut Value> {
    let mut value = doc;
    for token in tokens {
        value = match value {
            Value::Object(map) => map.get_mut(token)?,
            Value::Array(items) => items.get_mut(parse_index(token)?)?,
            _ => return None,
        };
    }
    Some(value)
}

fn pointer_add(doc: &mut Value, path: &str, tokens: &[String], value: Value) -> Result<(), String> {
    let Some((last, parent)) = tokens.split_last() else {
        *doc = value;
        return Ok(());
    };
    let parent = pointer_get_mut(doc, parent)
        .ok_or_else(|| format!("the parent of path {path:?} does not exist"))?;
    match parent {
        Value::Object(map) => {
            map.insert(last.clone(), value);
            Ok(())
        }
        Value::Array(items) => {
            if last == "-" {
                items.push(value);
                return Ok(());
            }
            match parse_index(last) {
                Some(index) if index <= items.len() => {
                    items.insert(index, value);
                    Ok(())
                }
                _ => Err(format!(
                    "path {path:?}: index {last:?} is out of range for an array of {} items",
                    items.len()
                )),
            }
        }
        other => Err(format!(
            "path {path:?}: cannot add a member to {}",
            type_name(other)
        )),
    }
}

fn pointer_remove(doc: &mut Value, path: &str, tokens: &[String]) -> Result<Value, String> {
    let Some((last, parent)) = tokens.split_last() else {
        return Err("cannot remove the whole document".to_owned());
    };
    let missing = || format!("path {path:?} does not exist");
    match pointer_get_mut(doc, parent).ok_or_else(missing)? {
        Value::Object(map) => map.remove(last).ok_or_else(missing),
        Value::Array(items) => match parse_index(last) {
            Some(index) if index < items.len() => Ok(items.remove(index)),
            _ => Err(missing()),
        },
        _ => Err(missing()),
    }
}

/// Applies an RFC 6902 JSON patch to a copy of `original`.
///
/// # Errors
/// 400 when the patch is not an array of well-formed operations, 413 for too many operations,
/// 422 when an operation does not apply (missing path, failed `test`).
pub fn json_patch(original: &Value, patch: &Value) -> Result<Value, ApiError> {
    json_patch_with_limits(original, patch, PatchLimits::default())
}

/// [`json_patch`] with explicit [`PatchLimits`].
///
/// # Errors
/// As [`json_patch`], and 422 when the copies pass [`PatchLimits::copy_bytes_max`].
pub fn json_patch_with_limits(
    original: &Value,
    patch: &Value,
    limits: PatchLimits,
) -> Result<Value, ApiError> {
    let Value::Array(operations) = patch else {
        return Err(ApiError::bad_request(format!(
            "a JSON patch must be an array of operations, not {}",
            type_name(patch)
        )));
    };
    if operations.len() > JSON_PATCH_OPERATIONS_MAX {
        return Err(ApiError::request_entity_too_large(format!(
            "The allowed maximum operations in a JSON patch is {JSON_PATCH_OPERATIONS_MAX}, got {}",
            operations.len()
        )));
    }
    let mut doc = original.clone();
    let mut copied = 0usize;
    for (index, operation) in operations.iter().enumerate() {
        let bad = |message: String| {
            ApiError::bad_request(format!("JSON patch operation {index}: {message}"))
        };
        let Value::Object(operation) = operation else {
            return Err(bad(format!(
                "must be an object, not {}",
                type_name(operation)
            )));
        };
        let string = |key: &str| -> Result<&str, ApiError> {
            match operation.get(key) {
                Some(Value::String(s)) => Ok(s.as_str()),
                Some(other) => Err(bad(format!(
                    "{key:?} must be a string, not {}",
                    type_name(other)
                ))),
                None => Err(bad(format!("missing {key:?}"))),
            }
        };
        let op = string("op")?;
        let path = string("path")?;
        let tokens = parse_pointer(path).map_err(bad)?;
        let value = || {
            operation
                .get("value")
                .cloned()
                .ok_or_else(|| bad(format!("{op:?} operation is missing \"value\"")))
        };
        let failed = |message: String| {
            unprocessable(format!(
                "JSON patch operation {index} ({op}) failed: {message}"
            ))
        };
        // The object nests no deeper than a JSON body may (see the module docs): the value
        // placed under `path` is measured before it is cloned or placed.
        let within_nesting = |placed: &Value| {
            let levels = tokens.len().saturating_add(nesting(placed));
            if levels > JSON_NESTING_MAX {
                return Err(failed(format!(
                    "the object would nest {levels} levels deep at {path:?}, more than the {JSON_NESTING_MAX} a JSON body may"
                )));
            }
            Ok(())
        };
        match op {
            "add" => {
                let value = value()?;
                within_nesting(&value)?;
                pointer_add(&mut doc, path, &tokens, value).map_err(failed)?;
            }
            "remove" => {
                pointer_remove(&mut doc, path, &tokens).map_err(failed)?;
            }
            "replace" => {
                let value = value()?;
                within_nesting(&value)?;
                let target = pointer_get_mut(&mut doc, &tokens)
                    .ok_or_else(|| failed(format!("path {path:?} does not exist")))?;
                *target = value;
            }
            "move" | "copy" => {
                let from = string("from")?;
                let from_tokens = parse_pointer(from).map_err(bad)?;
                let moved = if op == "move" {
                    if tokens.len() > from_tokens.len() && tokens.starts_with(&from_tokens) {
                        return Err(failed(format!(
                            "cannot move {from:?} into its own child {path:?}"
                        )));
                    }
                    if tokens == from_tokens {
                        continue;
                    }
                    if let Some(source) = pointer_get(&doc, &from_tokens) {
                        within_nesting(source)?;
                    }
                    pointer_remove(&mut doc, from, &from_tokens).map_err(failed)?
                } else {
                    let source = pointer_get(&doc, &from_tokens)
                        .ok_or_else(|| failed(format!("path {from:?} does not exist")))?;
                    within_nesting(source)?;
                    // Counted before the clone: a refused copy allocates nothing.
                    copied = copied.saturating_add(json_size(source));
                    if copied > limits.copy_bytes_max {
                        return Err(copy_limit_exceeded(copied, limits.copy_bytes_max));
                    }
                    source.clone()
                };
                pointer_add(&mut doc, path, &tokens, moved).map_err(failed)?;
            }
            "test" => {
                let expected = value()?;
                match pointer_get(&doc, &tokens) {
                    Some(actual) if json_equal(actual, &expected) => {}
                    Some(actual) => {
                        return Err(failed(format!(
                            "the value at {path:?} is {actual}, not {expected}"
                        )));
                    }
                    None => return Err(failed(format!("path {path:?} does not exist"))),
                }
            }
            other => {
                return Err(bad(format!(
                    "unknown op {other:?}; expected add, remove, replace, move, copy or test"
                )));
            }
        }
    }
    Ok(doc)
}

// ---------------------------------------------------------------------------------------------
// Strategic merge patch

/// How a list field merges under strategic merge patch (Kubernetes' `patchStrategy` and
/// `patchMergeKey` struct tags, published as `x-kubernetes-patch-strategy` and
/// `x-kubernetes-patch-merge-key`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListStrategy<'a> {
    /// The patch's list replaces the original (no `merge` strategy).
    Replace,
    /// Items are maps merged by the value of this key.
    MergeByKey(&'a str),
    /// A list of scalars merged as a set (original order, then new values).
    MergeSet,
}

/// The list strategy of a field of type `ty`.
#[must_use]
pub fn list_strategy(ty: Ty<'_>) -> ListStrategy<'_> {
    match ty.patch_markers() {
        (Some(strategy), key) if strategy.split(',').any(|part| part == "merge") => {
            key.map_or(ListStrategy::MergeSet, ListStrategy::MergeByKey)
        }
        _ => ListStrategy::Replace,
    }
}

/// Whether a map field of type `ty` is replaced whole (`x-kubernetes-patch-strategy: replace`).
fn replaces_map(ty: Ty<'_>) -> bool {
    ty.patch_markers().0 == Some("replace")
}

const DIRECTIVE: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const SET_ELEMENT_ORDER: &str = "$setElementOrder/";
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList/";

/// Applies a strategic merge patch to a copy of `original`, an object of the type `ty` (the
/// kind's schema root, [`Ty::deduced`] for none: every list replaced).
///
/// # Errors
/// 400 when the patch is not an object, a directive is malformed, or an item of a keyed list
/// lacks its merge key.
pub fn strategic_merge_patch(
    original: &Value,
    patch: &Value,
    ty: Ty<'_>,
) -> Result<Value, ApiError> {
    let Value::Object(patch) = patch else {
        return Err(ApiError::bad_request(format!(
            "a strategic merge patch must be a JSON object, not {}",
            type_name(patch)
        )));
    };
    let original = match original {
        Value::Object(map) => map.clone(),
        _ => Map::new(),
    };
    let mut path = Vec::new();
    match merge_map(original, patch, &mut path, ty)? {
        Some(map) => Ok(Value::Object(map)),
        None => Err(ApiError::bad_request(
            "a strategic merge patch may not delete the whole object ($patch: delete at the root)",
        )),
    }
}

fn smp_error(path: &[String], message: impl std::fmt::Display) -> ApiError {
    if path.is_empty() {
        ApiError::bad_request(format!("strategic merge patch: {message}"))
    } else {
        ApiError::bad_request(format!(
            "strategic merge patch at {}: {message}",
            path.join(".")
        ))
    }
}

/// Removes every directive key from a map patch, recursively, for values placed verbatim.
fn strip_directives(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| !k.starts_with('$'))
                .map(|(k, v)| (k.clone(), strip_directives(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .filter(|item| {
                    !item
                        .as_object()
                        .is_some_and(|m| m.contains_key(DIRECTIVE) && m.len() == 1)
                })
                .map(strip_directives)
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Merges a map patch into `original`. `None` means the patch deletes the map.
fn merge_map(
    mut original: Map<String, Value>,
    patch: &Map<String, Value>,
    path: &mut Vec<String>,
    ty: Ty<'_>,
) -> Result<Option<Map<String, Value>>, ApiError> {
    match patch.get(DIRECTIVE) {
        None => {}
        Some(Value::String(directive)) => match directive.as_str() {
            "replace" => {
                let mut replaced = Map::new();
                return merge_map_into(&mut replaced, patch, path, ty).map(|()| Some(replaced));
            }
            "delete" => return Ok(None),
            "merge" => {}
            other => {
                return Err(smp_error(
                    path,
                    format!(
                        "unknown $patch directive {other:?}; expected replace, delete or merge"
                    ),
                ));
            }
        },
        Some(other) => {
            return Err(smp_error(
                path,
                format!("$patch must be a string, not {}", type_name(other)),
            ));
        }
    }
    merge_map_into(&mut original, patch, path, ty)?;
    Ok(Some(original))
}

/// Merges the non-directive keys of `patch` into `target`, then applies the map-level
/// directives `$retainKeys`, `$deleteFromPrimitiveList/` and `$setElementOrder/`.
fn merge_map_into(
    target: &mut Map<String, Value>,
    patch: &Map<String, Value>,
    path: &mut Vec<String>,
    ty: Ty<'_>,
) -> Result<(), ApiError> {
    for (key, value) in patch {
        if key.starts_with('$') {
            continue;
        }
        path.push(key.clone());
        let merged = merge_value(target.remove(key), value, path, ty.child(key))?;
        path.pop();
        if let Some(merged) = merged {
            target.insert(key.clone(), merged);
        }
    }
    for (key, value) in patch {
        if let Some(field) = key.strip_prefix(DELETE_FROM_PRIMITIVE_LIST) {
            let Value::Array(doomed) = value else {
                return Err(smp_error(path, format!("{key} must be a list")));
            };
            if let Some(Value::Array(items)) = target.get_mut(field) {
                items.retain(|item| !doomed.contains(item));
            }
        } else if let Some(field) = key.strip_prefix(SET_ELEMENT_ORDER) {
            let Value::Array(order) = value else {
                return Err(smp_error(path, format!("{key} must be a list")));
            };
            let strategy = list_strategy(ty.child(field));
            if let Some(Value::Array(items)) = target.get_mut(field) {
                reorder(items, order, strategy);
            }
        }
    }
    if let Some(retain) = patch.get(RETAIN_KEYS) {
        let Value::Array(keys) = retain else {
            return Err(smp_error(path, "$retainKeys must be a list of strings"));
        };
        let mut keep = Vec::with_capacity(keys.len());
        for key in keys {
            let Value::String(key) = key else {
                return Err(smp_error(path, "$retainKeys must be a list of strings"));
            };
            keep.push(key.as_str());
        }
        target.retain(|key, _| keep.contains(&key.as_str()));
    }
    Ok(())
}

/// Orders `items` as `order` lists them; items not in `order` keep their relative order after
/// the listed ones (Kubernetes places server-only items by their original position; after is a
/// good enough approximation for display order).
fn reorder(items: &mut Vec<Value>, order: &[Value], strategy: ListStrategy<'_>) {
    if strategy == ListStrategy::Replace {
        return;
    }
    // What identifies an item: its merge key's value, or (a set) the item itself; each
    // item's place looked up once, so long lists order in linear time.
    let identity = |item: &Value| -> Option<String> {
        match strategy {
            ListStrategy::MergeByKey(key) => item.get(key).map(Value::to_string),
            ListStrategy::MergeSet => Some(item.to_string()),
            ListStrategy::Replace => None,
        }
    };
    let mut places: HashMap<String, usize> = HashMap::with_capacity(order.len());
    for (place, entry) in order.iter().enumerate() {
        if let Some(id) = identity(entry) {
            places.entry(id).or_insert(place);
        }
    }
    let position = |item: &Value| identity(item).and_then(|id| places.get(&id).copied());
    let mut keyed: Vec<(usize, usize, Value)> = items
        .drain(..)
        .enumerate()
        .map(|(index, item)| (position(&item).unwrap_or(usize::MAX), index, item))
        .collect();
    keyed.sort_by_key(|(position, index, _)| (*position, *index));
    items.extend(keyed.into_iter().map(|(_, _, item)| item));
}

/// Merges one patch value into the original value of the same key. `None` deletes the key.
fn merge_value(
    original: Option<Value>,
    patch: &Value,
    path: &mut Vec<String>,
    ty: Ty<'_>,
) -> Result<Option<Value>, ApiError> {
    match patch {
        Value::Null => Ok(None),
        Value::Object(_) if replaces_map(ty) => Ok(Some(strip_directives(patch))),
        Value::Object(patch_map) => {
            let original = match original {
                Some(Value::Object(map)) => map,
                _ => Map::new(),
            };
            Ok(merge_map(original, patch_map, path, ty)?.map(Value::Object))
        }
        Value::Array(patch_items) => match list_strategy(ty) {
            ListStrategy::Replace => Ok(Some(strip_directives(patch))),
            ListStrategy::MergeSet => {
                let mut items = match original {
                    Some(Value::Array(items)) => items,
                    _ => Vec::new(),
                };
                let mut present: HashSet<String> = items.iter().map(Value::to_string).collect();
                for item in patch_items {
                    if present.insert(item.to_string()) {
                        items.push(item.clone());
                    }
                }
                Ok(Some(Value::Array(items)))
            }
            ListStrategy::MergeByKey(key) => {
                let original = match original {
                    Some(Value::Array(items)) => items,
                    _ => Vec::new(),
                };
                merge_keyed_list(original, patch_items, key, path, ty.items())
                    .map(|items| Some(Value::Array(items)))
            }
        },
        scalar => Ok(Some(scalar.clone())),
    }
}

fn merge_keyed_list(
    items: Vec<Value>,
    patch_items: &[Value],
    key: &str,
    path: &mut Vec<String>,
    item_ty: Ty<'_>,
) -> Result<Vec<Value>, ApiError> {
    // A `{"$patch": "replace"}` item replaces the whole list with the other patch items.
    let replace = patch_items
        .iter()
        .any(|item| item.get(DIRECTIVE).and_then(Value::as_str) == Some("replace"));
    // The items in slots (a removed one leaves an empty slot), and the slots of each merge
    // key's value in list order: each patch item finds its item in constant time, so a patch
    // of a long list merges in linear time (a scan per item took seconds at 16,000 items).
    let mut slots: Vec<Option<Value>> = if replace {
        Vec::new()
    } else {
        items.into_iter().map(Some).collect()
    };
    let mut by_key: HashMap<String, VecDeque<usize>> = HashMap::new();
    for (slot, item) in slots.iter().enumerate() {
        if let Some(value) = item.as_ref().and_then(|i| i.get(key)) {
            by_key.entry(value.to_string()).or_default().push_back(slot);
        }
    }
    for patch_item in patch_items {
        let Value::Object(patch_map) = patch_item else {
            return Err(smp_error(
                path,
                format!(
                    "items of this list must be objects merged by {key:?}, not {}",
                    type_name(patch_item)
                ),
            ));
        };
        let directive = match patch_map.get(DIRECTIVE) {
            None => None,
            Some(Value::String(d)) if matches!(d.as_str(), "replace" | "delete" | "merge") => {
                Some(d.as_str())
            }
            Some(other) => {
                return Err(smp_error(
                    path,
                    format!(
                        "unknown $patch directive {other} in a list item; expected replace, delete or merge"
                    ),
                ));
            }
        };
        if directive == Some("replace") && patch_map.len() == 1 {
            continue;
        }
        let Some(key_value) = patch_map.get(key) else {
            return Err(smp_error(
                path,
                format!(
                    "map: {} does not contain declared merge key: {key}",
                    Value::Object(patch_map.clone())
                ),
            ));
        };
        let id = key_value.to_string();
        // The first item with this key still in the list.
        let found = by_key.get(&id).and_then(|q| q.front().copied());
        let forget = |by_key: &mut HashMap<String, VecDeque<usize>>| {
            if let Some(queue) = by_key.get_mut(&id) {
                queue.pop_front();
            }
        };
        match (directive, found) {
            (Some("delete"), Some(index)) => {
                slots[index] = None;
                forget(&mut by_key);
            }
            (Some("delete"), None) => {}
            (_, Some(index)) => {
                let original = match slots[index].take() {
                    Some(Value::Object(map)) => map,
                    _ => Map::new(),
                };
                match merge_map(original, patch_map, path, item_ty)? {
                    Some(map) => slots[index] = Some(Value::Object(map)),
                    None => forget(&mut by_key),
                }
            }
            (_, None) => {
                if let Some(map) = merge_map(Map::new(), patch_map, path, item_ty)? {
                    by_key.entry(id).or_default().push_back(slots.len());
                    slots.push(Some(Value::Object(map)));
                }
            }
        }
    }
    Ok(slots.into_iter().flatten().collect())
}

/// The 422 a patch gets under `fieldValidation=Strict` when its body or its result has
/// fields a strict decoder reports (`fields`, the patch's own first): kube-apiserver's patch
/// handler answers `Invalid` with one cause on the field `patch`, whose value is the patched
/// object's JSON for JSON and merge patches and the decoded patch as Go prints a map
/// (`map[spec:map[paused:false]]`) for strategic merge patches: ` "" is invalid: patch:
/// Invalid value: "...": strict decoding error: duplicate field "spec.paused", unknown field
/// "spec.x"`.
#[must_use]
pub fn strict_patch_error(
    patch_type: PatchType,
    patched: &Value,
    patch: &[u8],
    fields: &[crate::schema::StrictField],
) -> ApiError {
    let value = match patch_type {
        PatchType::StrategicMerge => serde_json::from_slice::<Value>(patch)
            .map(|patch| go_text(&patch))
            .unwrap_or_default(),
        _ => patched.to_string(),
    };
    ApiError::invalid_unnamed(vec![(
        "patch".to_owned(),
        format!(
            "Invalid value: {value:?}: {}",
            crate::schema::strict_message(fields)
        ),
        "FieldValueInvalid".to_owned(),
    )])
}

/// A decoded JSON value as Go's `%v` prints an `interface{}` holding it: maps as
/// `map[k:v ...]` with sorted keys, lists as `[a b]`, strings bare, `null` as `<nil>`,
/// integers as integers and other numbers as `strconv.FormatFloat(f, 'g', -1, 64)`.
fn go_text(value: &Value) -> String {
    fn write(value: &Value, out: &mut String) {
        match value {
            Value::Null => out.push_str("<nil>"),
            Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Value::String(text) => out.push_str(text),
            Value::Number(number) => match (number.as_i64(), number.as_u64(), number.as_f64()) {
                (Some(i), _, _) => out.push_str(&i.to_string()),
                (None, Some(u), _) => out.push_str(&u.to_string()),
                (None, None, Some(f)) => out.push_str(&watchkeeper_core::gonum::format_g(f)),
                _ => out.push_str(&number.to_string()),
            },
            Value::Array(items) => {
                out.push('[');
                for (index, item) in items.iter().enumerate() {
                    if index > 0 {
                        out.push(' ');
                    }
                    write(item, out);
                }
                out.push(']');
            }
            Value::Object(map) => {
                out.push_str("map[");
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                for (index, key) in keys.into_iter().enumerate() {
                    if index > 0 {
                        out.push(' ');
                    }
                    out.push_str(key);
                    out.push(':');
                    write(&map[key], out);
                }
                out.push(']');
            }
        }
    }
    let mut out = String::new();
    write(value, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::builtin_resources;
    use serde_json::json;

    #[test]
    fn go_prints_patch_maps() {
        let patch = serde_json::json!({"spec": {"paused": false, "n": null, "list": ["a", 1, 2.5],
            "big": 1_000_000.0, "small": 0.000_01, "mid": 123_456.0, "int": 7}, "a": "x y"});
        assert_eq!(
            go_text(&patch),
            "map[a:x y spec:map[big:1e+06 int:7 list:[a 1 2.5] mid:123456 n:<nil> paused:false small:1e-05]]"
        );
        assert_eq!(crate::field::go_float(1_234_567.0), "1.234567e+06");
        assert_eq!(crate::field::go_float(0.0001), "0.0001");
    }
    fn def(plural: &str) -> ResourceDef {
        builtin_resources()
            .into_iter()
            .find(|d| d.plural == plural)
            .unwrap()
    }

    fn apply(
        plural: &str,
        patch_type: PatchType,
        original: &Value,
        patch: &Value,
    ) -> Result<Value, ApiError> {
        apply_patch(
            &def(plural),
            patch_type,
            original,
            patch.to_string().as_bytes(),
        )
    }

    /// `levels` objects nested under one another, the innermost holding `1`.
    fn nested(levels: usize) -> Value {
        (0..levels).fold(json!(1), |inner, _| {
            Value::Object(Map::from_iter([("a".to_owned(), inner)]))
        })
    }

    #[test]
    fn the_nesting_bound_is_what_a_json_body_reads_back() {
        // On a server thread's stack: serde_json's own walks over 10,000 levels need it.
        stacker::grow(watchkeeper_core::stack::THREAD_STACK, nesting_bound);
    }

    fn nesting_bound() {
        for levels in [0, 1, 2, JSON_NESTING_MAX] {
            let value = nested(levels);
            assert_eq!(nesting(&value), levels);
            let text = watchkeeper_core::stack::grow(|| value.to_string());
            assert!(crate::go_json::parse(text.as_bytes()).is_ok(), "{levels}");
            watchkeeper_core::stack::drop_flat(value);
        }
        let text = format!(
            "{}1{}",
            "[".repeat(JSON_NESTING_MAX + 1),
            "]".repeat(JSON_NESTING_MAX + 1)
        );
        assert!(crate::go_json::parse(text.as_bytes()).is_err());
        assert_eq!(nesting(&json!({"a": [1, {"b": []}], "c": {}})), 4);
        // Measured without recursion: far deeper than any stack would hold.
        let deep = nested(1_000_000);
        assert_eq!(nesting(&deep), 1_000_000);
        watchkeeper_core::stack::drop_flat(deep);
    }

    #[test]
    fn a_json_patch_may_not_nest_the_object_deeper_than_a_json_body() {
        // On a server thread's stack: serde_json's own walks over 10,000 levels need it.
        stacker::grow(
            watchkeeper_core::stack::THREAD_STACK,
            json_patch_nesting_bound,
        );
    }

    fn json_patch_nesting_bound() {
        let original = json!({"apiVersion": "example.com/v1", "kind": "Foo", "metadata": {"name": "x"}, "spec": {"x": nested(100)}});
        let refused = |patch: Value| {
            let error = json_patch(&original, &patch).unwrap_err();
            assert_eq!(error.code, 422, "{patch}");
            let cause = error.details.as_ref().unwrap()["causes"][0]["message"].to_string();
            assert!(
                cause.contains("more than the 10000 a JSON body may"),
                "{cause}"
            );
        };
        // Up to the bound an operation applies; one level more is refused, whichever op.
        let top = nested(JSON_NESTING_MAX - 1);
        let patched = json_patch(
            &original,
            &json!([{"op": "add", "path": "/top", "value": top}]),
        )
        .unwrap();
        assert_eq!(nesting(&patched), JSON_NESTING_MAX);
        let over = nested(JSON_NESTING_MAX);
        refused(json!([{"op": "add", "path": "/top", "value": over}]));
        refused(json!([{"op": "replace", "path": "/spec", "value": over}]));
        // A value copied or moved under its own deepest path doubles the depth each time: the
        // probe that overflowed the server's stack (six copies, 6,400 levels; a seventh passes
        // the bound).
        let mut deepest = "/a".repeat(99);
        let mut copies = Vec::new();
        for _ in 0..7 {
            copies.push(
                json!({"op": "copy", "from": "/spec/x", "path": format!("/spec/x{deepest}/b")}),
            );
            deepest = format!("{deepest}/b{deepest}");
        }
        refused(Value::Array(copies));
        refused(json!([
            {"op": "add", "path": "/metadata/labels", "value": nested(9_950)},
            {"op": "move", "from": "/spec/x", "path": format!("/metadata/labels{}", "/a".repeat(9_949))}
        ]));
        // Within the bound, copies and moves still apply.
        let patched = json_patch(
            &original,
            &json!([
                {"op": "copy", "from": "/spec/x", "path": "/spec/y"},
                {"op": "move", "from": "/spec/y", "path": "/status"}
            ]),
        )
        .unwrap();
        assert_eq!(patched["status"], original["spec"]["x"]);
    }

    fn pod() -> Value {
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "a", "namespace": "d", "labels": {"app": "web", "tier": "fe"}},
            "spec": {
                "containers": [
                    {"name": "web", "image": "nginx:1.25",
                     "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                     "ports": [{"containerPort": 80}]},
                    {"name": "sidecar", "image": "envoy:1"}
                ],
                "tolerations": [{"key": "x", "operator": "Exists"}]
            }
        })
    }

    #[test]
    fn content_types() {
        assert_eq!(
            PatchType::from_content_type("application/merge-patch+json"),
            Some(PatchType::Merge)
        );
        assert_eq!(
            PatchType::from_content_type("application/strategic-merge-patch+json; charset=utf-8"),
            Some(PatchType::StrategicMerge)
        );
        assert_eq!(
            PatchType::from_content_type("Application/JSON-Patch+JSON"),
            Some(PatchType::Json)
        );
        assert_eq!(
            PatchType::from_content_type("application/apply-patch+yaml"),
            Some(PatchType::Apply)
        );
        assert_eq!(PatchType::from_content_type("application/json"), None);
        for t in [
            PatchType::Merge,
            PatchType::Json,
            PatchType::StrategicMerge,
            PatchType::Apply,
        ] {
            assert_eq!(PatchType::from_content_type(t.content_type()), Some(t));
        }
        assert_eq!(unsupported_patch_type("text/plain").code, 415);
    }

    #[test]
    fn merge_patch_rfc7386() {
        let out = apply(
            "pods",
            PatchType::Merge,
            &pod(),
            &json!({"metadata": {"labels": {"tier": null, "new": "x"}}, "spec": {"containers": [{"name": "only"}]}}),
        )
        .unwrap();
        assert_eq!(out["metadata"]["labels"], json!({"app": "web", "new": "x"}));
        assert_eq!(out["spec"]["containers"], json!([{"name": "only"}]));
        let mut target = json!({"a": "b"});
        merge_patch(&mut target, json!({"a": {"c": null, "d": 1}}));
        assert_eq!(target, json!({"a": {"d": 1}}));
        let err = apply("pods", PatchType::Merge, &pod(), &json!([1])).unwrap_err();
        assert_eq!(err.code, 400);
        let err = apply_patch(&def("pods"), PatchType::Merge, &pod(), b"{not json").unwrap_err();
        assert_eq!(err.code, 400);
        assert!(
            err.message.starts_with("error decoding merge patch"),
            "{}",
            err.message
        );
    }

    #[test]
    fn json_patch_operations() {
        let original =
            json!({"metadata": {"name": "a", "labels": {"a/b": "1"}}, "list": [1, 2, 3]});
        let patch = json!([
            {"op": "add", "path": "/metadata/labels/new", "value": "x"},
            {"op": "remove", "path": "/metadata/labels/a~1b"},
            {"op": "replace", "path": "/list/0", "value": 10},
            {"op": "add", "path": "/list/-", "value": 4},
            {"op": "add", "path": "/list/1", "value": 5},
            {"op": "copy", "from": "/list", "path": "/copy"},
            {"op": "move", "from": "/copy", "path": "/moved"},
            {"op": "test", "path": "/moved/0", "value": 10.0}
        ]);
        let out = apply("configmaps", PatchType::Json, &original, &patch).unwrap();
        assert_eq!(
            out,
            json!({"metadata": {"name": "a", "labels": {"new": "x"}}, "list": [10, 5, 2, 3, 4], "moved": [10, 5, 2, 3, 4]})
        );
    }

    #[test]
    fn json_patch_errors() {
        let original = json!({"a": {"b": 1}, "l": [1]});
        let cases = [
            (json!({"op": "add"}), 400, "must be an array"),
            (
                json!([{"op": "add", "path": "/x"}]),
                400,
                "missing \"value\"",
            ),
            (json!([{"op": "frob", "path": "/x"}]), 400, "unknown op"),
            (json!([{"path": "/x"}]), 400, "missing \"op\""),
            (
                json!([{"op": "add", "path": "x", "value": 1}]),
                400,
                "must be empty or start with '/'",
            ),
            (
                json!([{"op": "add", "path": "/a~2", "value": 1}]),
                400,
                "invalid escape",
            ),
            (json!([5]), 400, "must be an object"),
            (
                json!([{"op": "remove", "path": "/nope"}]),
                422,
                "does not exist",
            ),
            (
                json!([{"op": "replace", "path": "/a/c", "value": 1}]),
                422,
                "does not exist",
            ),
            (
                json!([{"op": "add", "path": "/x/y", "value": 1}]),
                422,
                "parent",
            ),
            (
                json!([{"op": "add", "path": "/l/5", "value": 1}]),
                422,
                "out of range",
            ),
            (
                json!([{"op": "add", "path": "/l/01", "value": 1}]),
                422,
                "out of range",
            ),
            (
                json!([{"op": "test", "path": "/a/b", "value": 2}]),
                422,
                "is 1, not 2",
            ),
            (
                json!([{"op": "move", "from": "/a", "path": "/a/b/c"}]),
                422,
                "own child",
            ),
            (
                json!([{"op": "replace", "path": "", "value": [1]}]),
                400,
                "patched object must be a JSON object",
            ),
        ];
        for (patch, code, text) in cases {
            let err = apply("configmaps", PatchType::Json, &original, &patch).unwrap_err();
            assert_eq!(err.code, code, "{patch}: {}", err.message);
            // A 422 says why in its cause, under kube's generic message.
            let why = match code {
                422 => {
                    assert_eq!(
                        err.message,
                        "the server rejected our request due to an error in our request"
                    );
                    err.details.as_ref().unwrap()["causes"][0]["message"]
                        .as_str()
                        .unwrap()
                        .to_owned()
                }
                _ => err.message.clone(),
            };
            assert!(why.contains(text), "{patch}: {why}");
        }
        let many = Value::Array(vec![
            json!({"op": "test", "path": "", "value": 1});
            JSON_PATCH_OPERATIONS_MAX + 1
        ]);
        assert_eq!(
            apply("configmaps", PatchType::Json, &original, &many)
                .unwrap_err()
                .code,
            413
        );
    }

    #[test]
    fn strategic_merges_containers_and_env_by_name() {
        let patch = json!({"spec": {"containers": [
            {"name": "web", "image": "nginx:1.26", "env": [{"name": "B", "value": "20"}, {"name": "C", "value": "3"}]},
            {"name": "new", "image": "busybox"}
        ]}});
        let out = apply("pods", PatchType::StrategicMerge, &pod(), &patch).unwrap();
        let containers = out["spec"]["containers"].as_array().unwrap();
        assert_eq!(containers.len(), 3);
        assert_eq!(containers[0]["image"], "nginx:1.26");
        assert_eq!(
            containers[0]["env"],
            json!([{"name": "A", "value": "1"}, {"name": "B", "value": "20"}, {"name": "C", "value": "3"}])
        );
        assert_eq!(containers[0]["ports"], json!([{"containerPort": 80}]));
        assert_eq!(containers[1]["name"], "sidecar");
        assert_eq!(containers[2], json!({"name": "new", "image": "busybox"}));
        // Unknown lists replace whole.
        let out = apply(
            "pods",
            PatchType::StrategicMerge,
            &pod(),
            &json!({"spec": {"tolerations": [{"key": "y"}]}}),
        )
        .unwrap();
        assert_eq!(out["spec"]["tolerations"], json!([{"key": "y"}]));
    }

    #[test]
    fn strategic_keyed_items_repeated_in_a_patch_meet_what_the_earlier_ones_left() {
        let env = |items: Value| json!({"spec": {"containers": [{"name": "web", "image": "nginx", "env": items}]}});
        let original = env(
            json!([{"name": "A", "value": "1"}, {"name": "B", "value": "2"},
            {"name": "A", "value": "dup"}]),
        );
        let patch = env(
            json!([{"name": "A", "$patch": "delete"}, {"name": "A", "value": "x"},
            {"name": "C", "value": "3"}, {"name": "C", "valueFrom": null}, {"name": "B", "$patch": "delete"},
            {"name": "B", "value": "again"}]),
        );
        let out = apply("pods", PatchType::StrategicMerge, &original, &patch).unwrap();
        // The first A goes; the second patch item merges into the duplicate A that is left;
        // C is added once and then merged into; B goes and comes back at the end.
        assert_eq!(
            out["spec"]["containers"][0]["env"],
            json!([{"name": "A", "value": "x"}, {"name": "C", "value": "3"},
                {"name": "B", "value": "again"}])
        );
    }

    #[test]
    fn strategic_delete_and_replace_directives() {
        let patch = json!({"spec": {"containers": [
            {"$patch": "delete", "name": "sidecar"},
            {"name": "web", "env": [{"$patch": "delete", "name": "A"}], "ports": null}
        ]}, "metadata": {"labels": {"$patch": "replace", "only": "this"}}});
        let out = apply("pods", PatchType::StrategicMerge, &pod(), &patch).unwrap();
        assert_eq!(out["spec"]["containers"].as_array().unwrap().len(), 1);
        assert_eq!(
            out["spec"]["containers"][0]["env"],
            json!([{"name": "B", "value": "2"}])
        );
        assert!(out["spec"]["containers"][0].get("ports").is_none());
        assert_eq!(out["metadata"]["labels"], json!({"only": "this"}));

        let replace_list = json!({"spec": {"containers": [{"$patch": "replace"}, {"name": "solo", "image": "x"}]}});
        let out = apply("pods", PatchType::StrategicMerge, &pod(), &replace_list).unwrap();
        assert_eq!(
            out["spec"]["containers"],
            json!([{"name": "solo", "image": "x"}])
        );

        let delete_map = json!({"spec": {"$patch": "delete"}});
        let out = apply("pods", PatchType::StrategicMerge, &pod(), &delete_map).unwrap();
        assert!(out.get("spec").is_none());
    }

    #[test]
    fn strategic_other_directives() {
        let original = json!({"metadata": {"name": "a", "finalizers": ["a", "b"]},
                              "spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}});
        let patch = json!({
            "metadata": {"finalizers": ["c", "a"], "$deleteFromPrimitiveList/finalizers": ["b"]},
            "spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}
        });
        let out = apply("deployments", PatchType::StrategicMerge, &original, &patch).unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["a", "c"]));
        assert_eq!(out["spec"]["strategy"], json!({"type": "Recreate"}));
    }

    #[test]
    fn kubectl_apply_style_patch_twice() {
        // What `kubectl apply` sends after the image and env of a deployment changed and a
        // container was removed from the manifest.
        let live = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "d", "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": "{\"old\":true}\n"}},
            "spec": {"replicas": 1, "template": {"spec": {"containers": [
                {"name": "web", "image": "nginx:1.25", "env": [{"name": "A", "value": "1"}]},
                {"name": "log", "image": "fluentbit"}
            ]}}}
        });
        let patch = json!({
            "metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{\"new\":true}\n"}},
            "spec": {"replicas": 2, "template": {"spec": {
                "$setElementOrder/containers": [{"name": "web"}],
                "containers": [
                    {"$setElementOrder/env": [{"name": "B"}, {"name": "A"}], "env": [{"name": "B", "value": "2"}], "image": "nginx:1.26", "name": "web"},
                    {"$patch": "delete", "name": "log"}
                ]
            }}}
        });
        let once = apply("deployments", PatchType::StrategicMerge, &live, &patch).unwrap();
        assert_eq!(
            once["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"],
            "{\"new\":true}\n"
        );
        assert_eq!(once["spec"]["replicas"], 2);
        assert_eq!(
            once["spec"]["template"]["spec"]["containers"],
            json!([{"name": "web", "image": "nginx:1.26", "env": [{"name": "B", "value": "2"}, {"name": "A", "value": "1"}]}])
        );
        // Applying the same patch again is a no-op.
        let twice = apply("deployments", PatchType::StrategicMerge, &once, &patch).unwrap();
        assert_eq!(once, twice);
    }

    #[test]
    fn strategic_errors() {
        let cases = [
            (json!([1]), "must be a JSON object"),
            (
                json!({"spec": {"$patch": "explode"}}),
                "unknown $patch directive",
            ),
            (
                json!({"spec": {"containers": [{"image": "x"}]}}),
                "does not contain declared merge key: name",
            ),
            (json!({"spec": {"containers": ["web"]}}), "must be objects"),
            (json!({"spec": {"$retainKeys": "x"}}), "$retainKeys"),
            (json!({"$patch": "delete"}), "whole object"),
        ];
        for (patch, text) in cases {
            let err = apply("pods", PatchType::StrategicMerge, &pod(), &patch).unwrap_err();
            assert_eq!(err.code, 400, "{patch}");
            assert!(err.message.contains(text), "{patch}: {}", err.message);
        }
        let mut crd = def("pods");
        crd.group = "example.com".into();
        let err = apply_patch(&crd, PatchType::StrategicMerge, &pod(), b"{}").unwrap_err();
        assert_eq!(err.code, 415);
        assert_eq!(
            err.message,
            "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
        );
        let err = apply("pods", PatchType::Apply, &pod(), &json!({})).unwrap_err();
        assert_eq!(err.code, 415);
        assert!(err.message.contains("server-side apply"));
    }

    /// The type at a dotted path of `plural`'s kind; `[]` steps into a list's items.
    fn ty_at(plural: &str, path: &str) -> Ty<'static> {
        path.split('.')
            .fold(crate::apply::schema_root(&def(plural), None), |ty, step| {
                if step == "[]" {
                    ty.items()
                } else {
                    ty.child(step)
                }
            })
    }

    #[test]
    fn list_strategies_come_from_the_published_schema() {
        let cases = [
            (
                "deployments",
                "spec.template.spec.containers",
                ListStrategy::MergeByKey("name"),
            ),
            (
                "pods",
                "spec.containers.[].ports",
                ListStrategy::MergeByKey("containerPort"),
            ),
            (
                "pods",
                "spec.ephemeralContainers.[].env",
                ListStrategy::MergeByKey("name"),
            ),
            ("services", "spec.ports", ListStrategy::MergeByKey("port")),
            (
                "statefulsets",
                "spec.template.spec.initContainers.[].volumeMounts",
                ListStrategy::MergeByKey("mountPath"),
            ),
            ("pods", "spec.volumes", ListStrategy::MergeByKey("name")),
            ("pods", "spec.tolerations", ListStrategy::Replace),
            ("pods", "spec.containers.[].args", ListStrategy::Replace),
            ("pods", "metadata.finalizers", ListStrategy::MergeSet),
            ("nodes", "spec.podCIDRs", ListStrategy::MergeSet),
            ("nodes", "spec.taints", ListStrategy::Replace),
            (
                "nodes",
                "status.addresses",
                ListStrategy::MergeByKey("type"),
            ),
            (
                "jobs",
                "status.conditions",
                ListStrategy::MergeByKey("type"),
            ),
            (
                "pods",
                "metadata.ownerReferences",
                ListStrategy::MergeByKey("uid"),
            ),
            ("configmaps", "data", ListStrategy::Replace),
            ("pods", "spec.nope", ListStrategy::Replace),
        ];
        for (plural, path, strategy) in cases {
            assert_eq!(
                list_strategy(ty_at(plural, path)),
                strategy,
                "{plural} {path}"
            );
        }
        assert!(replaces_map(ty_at("poddisruptionbudgets", "spec.selector")));
        assert!(!replaces_map(ty_at("deployments", "spec.selector")));
    }

    #[test]
    fn strategic_merge_by_the_schemas_keys_for_every_kind() {
        // Kinds other than the pod family: a node's addresses merge by `type`, its taints
        // (no strategy) are replaced; a service's ports merge by `port`.
        let node = json!({"metadata": {"name": "n"},
            "spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]},
            "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.1"}, {"type": "Hostname", "address": "n"}]}});
        let out = apply(
            "nodes",
            PatchType::StrategicMerge,
            &node,
            &json!({"spec": {"taints": [{"key": "b", "effect": "NoSchedule"}]},
                    "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.2"}]}}),
        )
        .unwrap();
        assert_eq!(
            out["spec"]["taints"],
            json!([{"key": "b", "effect": "NoSchedule"}])
        );
        assert_eq!(
            out["status"]["addresses"],
            json!([{"type": "InternalIP", "address": "10.0.0.2"}, {"type": "Hostname", "address": "n"}])
        );
        let service = json!({"metadata": {"name": "s"}, "spec": {"ports": [{"port": 80, "name": "http"}, {"port": 443, "name": "https"}]}});
        let out = apply(
            "services",
            PatchType::StrategicMerge,
            &service,
            &json!({"spec": {"ports": [{"port": 443, "targetPort": 8443}]}}),
        )
        .unwrap();
        assert_eq!(
            out["spec"]["ports"],
            json!([{"port": 80, "name": "http"}, {"port": 443, "name": "https", "targetPort": 8443}])
        );
        // `replace` strategy: a PodDisruptionBudget's selector is replaced whole, where a
        // Deployment's (no strategy) merges.
        let selector = json!({"spec": {"selector": {"matchLabels": {"a": "1"}}}});
        let patch = json!({"spec": {"selector": {"matchLabels": {"b": "2"}}}});
        let out = apply(
            "poddisruptionbudgets",
            PatchType::StrategicMerge,
            &selector,
            &patch,
        )
        .unwrap();
        assert_eq!(out["spec"]["selector"], json!({"matchLabels": {"b": "2"}}));
        let out = apply("deployments", PatchType::StrategicMerge, &selector, &patch).unwrap();
        assert_eq!(
            out["spec"]["selector"],
            json!({"matchLabels": {"a": "1", "b": "2"}})
        );
        // `$setElementOrder` orders by the schema's key too.
        let out = apply(
            "services",
            PatchType::StrategicMerge,
            &service,
            &json!({"spec": {"$setElementOrder/ports": [{"port": 443}, {"port": 80}], "ports": [{"port": 443, "name": "tls"}]}}),
        )
        .unwrap();
        assert_eq!(
            out["spec"]["ports"],
            json!([{"port": 443, "name": "tls"}, {"port": 80, "name": "http"}])
        );
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        fn arb_json() -> impl Strategy<Value = Value> {
            let leaf = prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::Bool),
                any::<i64>().prop_map(Value::from),
                "[a-z$/~0-9-]{0,8}".prop_map(Value::String),
            ];
            leaf.prop_recursive(4, 48, 6, |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                    prop::collection::btree_map(
                        prop_oneof![
                            Just("$patch".to_owned()),
                            Just("name".to_owned()),
                            Just("containers".to_owned()),
                            Just("spec".to_owned()),
                            Just("op".to_owned()),
                            Just("path".to_owned()),
                            Just("value".to_owned()),
                            Just("$retainKeys".to_owned()),
                            Just("$setElementOrder/containers".to_owned()),
                            "[a-z]{1,4}",
                        ],
                        inner,
                        0..6
                    )
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
                ]
            })
        }

        /// Objects whose keys are plain lowercase words (no directives, no keyed lists).
        fn arb_plain_object() -> impl Strategy<Value = Value> {
            let leaf = prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::Bool),
                any::<i32>().prop_map(Value::from),
                "[a-z]{0,3}".prop_map(Value::String),
            ];
            let value = leaf.prop_recursive(3, 32, 5, |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                    prop::collection::btree_map("[a-z]{1,2}", inner, 0..4)
                        .prop_map(|m| Value::Object(m.into_iter().collect())),
                ]
            });
            prop::collection::btree_map("[a-z]{1,2}", value, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect()))
        }

        const TYPES: [PatchType; 4] = [
            PatchType::Merge,
            PatchType::Json,
            PatchType::StrategicMerge,
            PatchType::Apply,
        ];

        proptest! {
            #[test]
            fn patches_never_panic_on_values(original in arb_json(), patch in arb_json()) {
                for plural in ["pods", "deployments"] {
                    for patch_type in TYPES {
                        if let Ok(out) = apply(plural, patch_type, &original, &patch) {
                            prop_assert!(out.is_object());
                        }
                    }
                }
            }

            #[test]
            fn patches_never_panic_on_bytes(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
                for patch_type in TYPES {
                    if let Err(err) = apply_patch(&def("pods"), patch_type, &pod(), &bytes) {
                        prop_assert!(matches!(err.code, 400 | 413 | 415 | 422));
                    }
                }
            }

            #[test]
            fn strategic_patch_on_unkeyed_fields_is_merge_patch(
                original in arb_plain_object(), patch in arb_plain_object()
            ) {
                // Outside keyed lists and without `$` keys the two agree.
                let smp = strategic_merge_patch(&original, &patch, Ty::deduced()).unwrap();
                let mut merged = original.clone();
                merge_patch(&mut merged, patch);
                prop_assert_eq!(smp, merged);
            }
        }
    }
}

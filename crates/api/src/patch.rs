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
//! bounded by the nesting of the object and the patch (at most [`JSON_NESTING_MAX`]).
//!
//! ## JSON patch and merge patch as kube-apiserver applies them
//! kube-apiserver decodes a JSON patch with evanphx/json-patch v4's `DecodePatch` and applies
//! it with its `Apply`, and applies a merge patch with its `MergePatch`; [`json_patch`] and
//! [`merge_patch`] give the same result document, the same success or failure, the same code
//! and the same text (v4.13's code, ported, with v4.12.0's panic on a `test` without `value`
//! of a missing key or `null`, as kube 1.33 pins v4.12.0; its tests are `patch_v4_tests.rs`):
//! - 400 with Go's text when the body is not JSON (`invalid character ...`) or not an array of
//!   objects (`json: cannot unmarshal number into Go value of type jsonpatch.Operation`); a
//!   `null` body is no operations, a `null` item an operation without fields. The 413 for more
//!   than [`JSON_PATCH_OPERATIONS_MAX`] operations comes after decoding, as in kube.
//! - 422 `the server rejected our request due to an error in our request` with json-patch's
//!   error as the one cause (`testing value /a failed: test failed`, `Unexpected kind: frob`,
//!   `error in remove for path: '/x': Unable to remove nonexistent key: x: missing value`).
//! - v4's semantics where they depart from RFC 6902: an array index is what Go's `Atoi` reads
//!   (`01`, `+1`) and a negative one counts from the end (`/a/-1`; `add` at `-1` appends); a
//!   missing key reads as `null`, so `replace` of a missing key adds it and `copy` from one
//!   places `null`; an operation without `value` places `null`; `test` without `value` fails
//!   on any value (a `null` the patch placed included) and panics on a missing key or the
//!   document's own `null`; `test` with `null` passes on a missing key or `null`; `test` compares scalars by their text: the patch's as sent (from the body
//!   [`apply_patch`] reads; kept beside the value only where Go would write it otherwise, so
//!   at most the patch's size once more), the document's as Go writes it (`1.0` is not `1`,
//!   `"a<b"` is not the document's `"a\u003cb"`, nor `"\u00e9"` its `"é"`), a copied
//!   one as `json.Marshal` rewrites it; a patch given as a value ([`json_patch`], a webhook's)
//!   has its strings compared as Go writes them; `add` and `remove` cannot reach the whole
//!   document (`""`), `replace` and `test` can; a path's first part is ignored (`x/b` is `/b`)
//!   and `~` not followed by `0` or `1` is kept; `move` removes and then adds (into its own
//!   child it finds no destination); an unknown `op` fails when it is reached, 422.
//! - Where v4 panics (`replace` or `test` of `""` without `value`, `test` without `value` of
//!   a missing key or a `null`, `test` comparing arrays with
//!   a `null` item, writing into a copied `null`) kube-apiserver's panic recovery answers 500
//!   `This request caused apiserver to panic. Look in the logs for details.`; so does this, as
//!   a `Status` ([`is_json_patch_panic`]), having written nothing.
//! - A merge patch that is not JSON, `null` or a scalar is v4's `ErrBadJSONPatch`: 400
//!   `Invalid JSON Patch`. A merge patch drops the `null` members of objects it places whole,
//!   within arrays too ([`merge_patch`]). A JSON or merge patch whose result is an array fails
//!   to decode as the kind: 422 on the field `patch`, with Go's decoding error.
//! - Not here: the 400s of the strict decoding kube runs first under `fieldValidation=Warn`
//!   (the default) or `Strict` (`error decoding patch: json: cannot unmarshal object into Go
//!   value of type []handlers.jsonPatchOp`) are not [`apply_patch`]'s, which answers as kube
//!   does under `Ignore`: [`strict_decode_error`] words them, for the write path to run.
//!
//! ## Memory bound
//! A patch cannot make the server hold more than `original + patch + copy limit` bytes of
//! document (sizes as Go's `encoding/json` writes them), whatever it contains:
//! - merge and strategic merge patches only ever place values taken from the patch body, so the
//!   result is at most the original plus the patch;
//! - a JSON patch's `add`, `replace` and `test` values come from the patch body as well; only
//!   `copy` duplicates what is already in the document (and so can double it per operation).
//!   As in kube-apiserver (`JSONPatchMaxCopyBytes`, json-patch's `AccumulatedCopySizeLimit`),
//!   the bytes all `copy` operations of one patch add are summed (as json-patch counts them:
//!   the value as Go's `encoding/json` writes it), measured *before* the value is cloned, and
//!   the patch is refused with 422 once the sum passes
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
//! replaced whole too. Directives: `$patch: replace | delete` on maps and list items,
//! `$retainKeys`, `$deleteFromPrimitiveList/<field>` and `$setElementOrder/<field>`. As in
//! Kubernetes, strategic merge patch is refused (415) for custom resources; `kubectl apply`
//! sends them a JSON merge patch instead.
//!
//! [`strategic_merge_patch`] is apimachinery's `mergeMap` walk (`StrategicMergeMapPatch` with
//! kube-apiserver's options), checked against apimachinery's own test tables
//! (`patch_smp_tests.rs`): a nested `$patch: delete` map leaves `{}` (the Go struct
//! normalisation then drops an `omitempty` one); what the patch places where the object has
//! nothing (or a value of another type) loses its `null` members and `$patch` maps, while an
//! item a merging list appends, a `replace` map or list and a `$patch: replace` map are placed
//! as the patch has them; merged lists are ordered as `normalizeElementOrder` orders them (the
//! patch's items in the patch's or `$setElementOrder`'s order, the object's others
//! interleaved by their place in the object), scalars deduplicated; a `$patch: delete` item
//! removes every item with its key. A root `$patch: delete` is refused with 400 here (Go
//! leaves `{}`).
//!
//! Its refusals carry apimachinery's texts (`unknown patch type: explode in map:
//! map[$patch:explode]`, `map: map[image:x] does not contain declared merge key: name`,
//! `expected a []interface {}, but received a string`, `The order in patch list: ... doesn't
//! match $setElementOrder list: ...`, `list element types are not identical: ...`, Go's
//! decoding error for a body that is not an object) with kube-apiserver's codes
//! (`interpretStrategicMergePatchError`): 400 for the sentinel format errors (`invalid patch
//! format of retainKeys`, `... of primitive list`, `... of setElementOrder list`) and the
//! decoding error, 422 for `lists of lists are not supported`, 500 without a reason for the
//! others, which carry no status of their own in kube-apiserver, and the panic 500 where Go
//! panics (a merging list whose first item is `null`; a `$setElementOrder` of a list of maps
//! without a merge key, whose items Go hashes or compares). `$patch: merge` is refused as kube
//! refuses it: on a map `unknown patch type: merge in map: ...`, in a list `merging lists
//! cannot yet be specified in the patch`.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::{Map, Value};

use crate::apply::typed::Ty;
use crate::error::ApiError;
use crate::go_json::{skip_space, string_end, value_end};
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

/// The 400 kube-apiserver answers before it applies a JSON or merge patch when
/// `fieldValidation` is `Warn` (its default) or `Strict`: it first decodes the body strictly
/// (`kjson.UnmarshalStrict`) into its operation type (`[]handlers.jsonPatchOp`: `op`, `path`
/// and `from` strings) or a map, and refuses what does not decode, `error decoding patch: json:
/// cannot unmarshal number into Go struct field jsonPatchOp.op of type string`. `None` when the
/// body decodes (its unknown and repeated fields are warnings or the strict 422, not this), and
/// for the other patch types. The caller runs it where kube does, on the current object (after
/// a 404), before [`apply_patch`]; with `fieldValidation=Ignore` kube skips it and
/// [`apply_patch`] answers v4's own refusals.
#[must_use]
pub fn strict_decode_error(patch_type: PatchType, body: &[u8]) -> Option<ApiError> {
    let refuse = |cause: String| {
        Some(ApiError::bad_request(format!(
            "error decoding patch: {cause}"
        )))
    };
    let cannot = |value: &Value, go_type: &str| {
        format!(
            "json: cannot unmarshal {} into Go value of type {go_type}",
            crate::go_json::go_kind(value)
        )
    };
    if !matches!(patch_type, PatchType::Json | PatchType::Merge) {
        return None;
    }
    let value = match crate::go_json::parse(body) {
        Ok(value) => value,
        Err(error) => {
            return refuse(crate::go_json::syntax_error(body).unwrap_or_else(|| error.to_string()));
        }
    };
    match (patch_type, &value) {
        (_, Value::Null) | (PatchType::Merge, Value::Object(_)) => None,
        (PatchType::Merge, other) => refuse(cannot(other, "map[string]interface {}")),
        (_, Value::Array(operations)) => operations.iter().find_map(|operation| match operation {
            Value::Null => None,
            Value::Object(fields) => ["from", "op", "path"].into_iter().find_map(|name| {
                let field = fields.get(name)?;
                (!field.is_string() && !field.is_null()).then(|| {
                    format!(
                        "json: cannot unmarshal {} into Go struct field jsonPatchOp.{name} of type string",
                        crate::go_json::go_kind(field)
                    )
                })
            }),
            other => Some(cannot(other, "handlers.jsonPatchOp")),
        })
        .and_then(refuse),
        (_, other) => refuse(cannot(other, "[]handlers.jsonPatchOp")),
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
            // v4's `MergePatch`: a body that is not JSON, `null` or a scalar is its
            // `ErrBadJSONPatch`, which kube answers 400.
            let patch = match decode(def, patch) {
                Ok(patch @ (Value::Object(_) | Value::Array(_))) => patch,
                _ => return Err(ApiError::bad_request("Invalid JSON Patch")),
            };
            let mut target = original.clone();
            merge_patch(&mut target, patch);
            target
        }
        PatchType::Json => {
            // v4's `DecodePatch`: Go's error for a body that is not JSON. Its numbers keep
            // their literal's reading, which `test` compares (`1.0` is not `1`); a custom
            // resource's are read back once placed (see `decode`).
            let patch_bytes = patch;
            let patch = crate::go_json::parse(patch).map_err(|error| {
                ApiError::bad_request(
                    crate::go_json::syntax_error(patch).unwrap_or_else(|| error.to_string()),
                )
            })?;
            let mut result = json_patch_sent(original, &patch, Some(patch_bytes), limits)?;
            if !def.is_builtin() {
                read_back_numbers(&mut result);
            }
            result
        }
        PatchType::StrategicMerge => {
            if !def.has_go_type() {
                // kube's patch handler offers custom resources no strategic merge patch.
                return Err(ApiError::unsupported_media_type(
                    "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
                ));
            }
            // kube's `UnmarshalCaseSensitivePreserveInts`: Go's error; numbers read back, as
            // kube converts the merged map into the kind's Go type (`applyPatchToObject`: the
            // converter sets an integer field from an integral float64).
            let patch = crate::go_json::parse_read_back(patch).map_err(|error| {
                ApiError::bad_request(
                    crate::go_json::syntax_error(patch).unwrap_or_else(|| error.to_string()),
                )
            })?;
            if patch.get(DIRECTIVE).and_then(Value::as_str) == Some("delete") {
                // apimachinery's `mergeMap` leaves `{}`, which kube decodes into the kind (its
                // patcher then refuses the nameless object: `checkName`).
                Value::Object(Map::new())
            } else {
                strategic_merge_patch(original, &patch, crate::apply::schema_root(def, None))?
            }
        }
    };
    if !result.is_object() {
        // kube decodes the patched bytes into the kind: an array (a merge patch that is one, a
        // JSON patch replacing the whole document with one) fails there, 422 on `patch`.
        let text = result.to_string();
        let why = crate::go_json::decode(text.as_bytes())
            .err()
            .unwrap_or_else(|| {
                format!(
                    "the patched object must be a JSON object, not {}",
                    type_name(&result)
                )
            });
        return Err(ApiError::invalid_unnamed(vec![(
            "patch".to_owned(),
            format!(
                "Invalid value: {}: {why}",
                watchkeeper_core::gotext::go_quote(&text)
            ),
            "FieldValueInvalid".to_owned(),
        )]));
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

/// Every number of `value` as kube's storage round trip leaves it ([`crate::go_json::ReadBack`]:
/// `1.0` is 1, `12345678901234567890` a float), walked without recursion.
fn read_back_numbers(value: &mut Value) {
    let mut pending = vec![value];
    while let Some(value) = pending.pop() {
        match value {
            Value::Number(number) if !number.is_i64() => {
                #[allow(clippy::cast_precision_loss)]
                let float = number
                    .as_u64()
                    .map_or_else(|| number.as_f64().unwrap_or_default(), |u| u as f64);
                if let Some(integer) = watchkeeper_core::gonum::read_back_integer(float) {
                    *value = Value::from(integer);
                } else if let Some(float) = serde_json::Number::from_f64(float) {
                    *value = Value::Number(float);
                }
            }
            Value::Array(items) => pending.extend(items.iter_mut()),
            Value::Object(map) => pending.extend(map.values_mut()),
            _ => {}
        }
    }
}

/// A merge patch's JSON. Its numbers are read as kube's storage round trip leaves them
/// ([`crate::go_json::ReadBack`]: `2.0` is 2) for a custom resource, whose patched object kube
/// stores and reads back so. A built-in kind's keep the literal's reading: kube decodes the
/// patched bytes into the Go type, which refuses `2.0` in an integer field.
fn decode(def: &ResourceDef, bytes: &[u8]) -> Result<Value, serde_json::Error> {
    if def.is_builtin() {
        crate::go_json::parse(bytes)
    } else {
        crate::go_json::parse_read_back(bytes)
    }
}

/// RFC 7386 JSON merge patch, in place, as evanphx/json-patch v4's `MergePatch` merges (which
/// kube-apiserver uses): a `null` member deletes the key; an object merges into an object;
/// anything else replaces the value. Where a value is placed whole because the target has no
/// object there (a new key, a `null`, a scalar or an array), v4 drops the `null` members of
/// the objects within it, also inside arrays (`{"a": [{"b": null}]}` places `[{}]`); an
/// array replacing an object keeps them. A patch that is not an object replaces the target
/// (an array with those `null` members dropped).
pub fn merge_patch(target: &mut Value, patch: Value) {
    match (target, patch) {
        (Value::Object(map), Value::Object(patch)) => merge_members(map, patch),
        (target, mut patch) => {
            prune_nulls(&mut patch);
            *target = patch;
        }
    }
}

/// v4's `mergeDocs`. The patch's keys and values are moved into the target, not copied.
fn merge_members(map: &mut Map<String, Value>, patch: Map<String, Value>) {
    for (key, value) in patch {
        if value.is_null() {
            map.remove(&key);
            continue;
        }
        // A new key is a nil node to v4, as a `null` is.
        let slot = map.entry(key).or_insert(Value::Null);
        if let Value::Object(current) = &mut *slot {
            match value {
                Value::Object(patch) => merge_members(current, patch),
                other => *slot = other,
            }
        } else {
            let mut value = value;
            prune_nulls(&mut value);
            *slot = value;
        }
    }
}

/// v4's `pruneNulls`: drops the `null` members of every object within `value` (an array keeps
/// its `null` items).
fn prune_nulls(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, member| !member.is_null());
            map.values_mut().for_each(prune_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(prune_nulls),
        _ => {}
    }
}

// ---------------------------------------------------------------------------------------------
// RFC 6902, as evanphx/json-patch v4 applies it

/// A JSON patch operation that does not apply, as kube-apiserver answers it
/// (`NewGenericServerResponse(422, ...)`): its generic message, and json-patch's explanation
/// as the one cause (`UnexpectedServerResponse`).
fn unprocessable(message: impl Into<String>) -> ApiError {
    ApiError {
        details: Some(serde_json::json!({"causes": [
            {"reason": "UnexpectedServerResponse", "message": message.into()}
        ]})),
        ..ApiError::new(
            422,
            "Invalid",
            "the server rejected our request due to an error in our request",
        )
    }
}

/// Where json-patch v4 panics (a nil pointer or a nil map met on the way), kube-apiserver's
/// panic recovery answers 500 `This request caused apiserver to panic. Look in the logs for
/// details.`; the same answer here (as a `Status`, with Go's panic as the cause), and nothing
/// is written.
fn panicked(cause: &str) -> ApiError {
    ApiError {
        details: Some(serde_json::json!({"causes": [{"message": cause}]})),
        ..ApiError::new(
            500,
            "InternalError",
            "This request caused apiserver to panic. Look in the logs for details.",
        )
    }
}

/// Whether `error` is the 500 of a JSON patch on which json-patch v4 panics (see
/// [`json_patch`]): a faithful answer, not a fault of this server.
#[must_use]
pub fn is_json_patch_panic(error: &ApiError) -> bool {
    error.code == 500
        && error.message == "This request caused apiserver to panic. Look in the logs for details."
}

/// Whether `error` is one of the 500s kube-apiserver answers for a patch it cannot apply:
/// json-patch v4's panics ([`is_json_patch_panic`]) and the strategic merge errors that carry
/// no status of their own ([`smp_refusal`]'s, reason empty). Any other 500 from applying a
/// patch is a fault of this server.
#[must_use]
pub fn is_kube_patch_500(error: &ApiError) -> bool {
    is_json_patch_panic(error)
        || (error.code == 500
            && error.reason.is_empty()
            && SMP_500_TEXTS
                .iter()
                .any(|text| error.message.contains(text)))
}

/// What each strategic merge error without a status says (see [`is_kube_patch_500`]).
const SMP_500_TEXTS: [&str; 10] = [
    "unknown patch type: ",
    " does not contain declared merge key: ",
    ", but received a ",
    "merging lists cannot yet be specified in the patch",
    "The order in patch list:",
    "list element types are not identical: ",
    "no elements in any of the given slices",
    "cannot merge lists without merge key for ",
    "unexpected patch strategy: ",
    " is not a map",
];

const NIL_POINTER: &str = "runtime error: invalid memory address or nil pointer dereference";
const NIL_MAP: &str = "assignment to entry in nil map";

/// Why an operation stopped: json-patch's error text, or a Go panic.
enum Stop {
    Error(String),
    Panic(&'static str),
}

impl Stop {
    /// json-patch's `fmt.Errorf("<context>: %w", err)`.
    fn wrap(self, context: impl std::fmt::Display) -> Stop {
        match self {
            Stop::Error(message) => Stop::Error(format!("{context}: {message}")),
            panic @ Stop::Panic(_) => panic,
        }
    }

    fn into_error(self) -> ApiError {
        match self {
            Stop::Error(message) => unprocessable(message),
            Stop::Panic(cause) => panicked(cause),
        }
    }
}

/// A JSON value as json-patch v4 holds it while it applies a patch (its `*lazyNode`). A
/// [`Slot`] of `None` is Go's nil pointer: a `null` the document holds, or an operation without
/// `value`; v4 tells it apart from an operation's `"value": null` ([`Node::RawNil`]).
#[derive(Clone, Debug)]
enum Node {
    /// A node whose raw text is nil: what an operation's `"value": null` places.
    RawNil,
    /// A boolean, number or string, and its text as v4 holds it ([`Node::text`], which `test`
    /// compares): `raw` is the patch's text as sent, when it was read from the body; `sent`
    /// when the patch wrote it.
    Scalar {
        value: Value,
        sent: bool,
        raw: Option<Box<str>>,
    },
    /// An object; `None` is Go's nil map: a copied `null`, which v4 then reads as an empty
    /// object (and panics writing into).
    Doc(Option<BTreeMap<String, Slot>>),
    Ary(Vec<Slot>),
}

type Slot = Option<Node>;

impl Node {
    /// `value` as a node: `null` is Go's nil pointer.
    fn from_value(value: &Value, sent: bool) -> Slot {
        Some(match value {
            Value::Null => return None,
            Value::Object(map) => Node::Doc(Some(
                map.iter()
                    .map(|(key, value)| (key.clone(), Node::from_value(value, sent)))
                    .collect(),
            )),
            Value::Array(items) => Node::Ary(
                items
                    .iter()
                    .map(|item| Node::from_value(item, sent))
                    .collect(),
            ),
            scalar => Node::Scalar {
                value: scalar.clone(),
                sent,
                raw: None,
            },
        })
    }

    /// A scalar's text as v4 compares it (`bytes.Equal` of the compacted raw texts): the
    /// patch's as sent; else a string as Go's `encoding/json` writes it (the document's is Go's
    /// encoding, and a patch given as a value is taken to be a Go client's), a number the
    /// document holds as Go writes it (`1`), one the patch sent as serde_json reads it (`1.0`).
    fn text<'a>(value: &'a Value, sent: bool, raw: Option<&'a str>) -> std::borrow::Cow<'a, str> {
        use std::borrow::Cow;
        if let Some(raw) = raw {
            return Cow::Borrowed(raw);
        }
        match value {
            Value::String(text) => Cow::Owned(go_string(text)),
            Value::Number(number) if !sent => {
                Cow::Owned(watchkeeper_core::gonum::json_number(number))
            }
            other => Cow::Owned(other.to_string()),
        }
    }

    fn into_value(slot: Slot) -> Value {
        match slot {
            None | Some(Node::RawNil | Node::Doc(None)) => Value::Null,
            Some(Node::Scalar { value, .. }) => value,
            Some(Node::Doc(Some(map))) => Value::Object(
                map.into_iter()
                    .map(|(key, slot)| (key, Node::into_value(slot)))
                    .collect(),
            ),
            Some(Node::Ary(items)) => {
                Value::Array(items.into_iter().map(Node::into_value).collect())
            }
        }
    }

    /// What v4's `deepCopy` makes of `slot` (it marshals and reads back): a nil pointer stays
    /// nil; a `null` node becomes a node holding the text `null` (a nil map); a `null` within
    /// becomes a nil pointer.
    fn deep_copy(slot: Option<&Node>) -> Slot {
        fn within(slot: &Slot) -> Slot {
            match slot {
                None | Some(Node::RawNil | Node::Doc(None)) => None,
                Some(node) => Node::deep_copy(Some(node)),
            }
        }
        Some(match slot? {
            Node::RawNil | Node::Doc(None) => Node::Doc(None),
            // `json.Marshal` of a raw text escapes `<`, `>`, `&`, U+2028 and U+2029 in it.
            Node::Scalar { value, sent, raw } => Node::Scalar {
                value: value.clone(),
                sent: *sent,
                raw: raw.as_deref().map(|raw| html_escaped(raw).into()),
            },
            Node::Doc(Some(map)) => Node::Doc(Some(
                map.iter()
                    .map(|(key, slot)| (key.clone(), within(slot)))
                    .collect(),
            )),
            Node::Ary(items) => Node::Ary(items.iter().map(within).collect()),
        })
    }

    /// How many objects and arrays `slot` nests at its deepest, counted without recursion.
    fn nesting(slot: Option<&Node>) -> usize {
        let mut deepest = 0;
        let mut pending: Vec<(&Node, usize)> = slot.into_iter().map(|node| (node, 0)).collect();
        while let Some((node, above)) = pending.pop() {
            let children: Box<dyn Iterator<Item = &Slot>> = match node {
                Node::Doc(Some(map)) => Box::new(map.values()),
                Node::Ary(items) => Box::new(items.iter()),
                _ => continue,
            };
            deepest = deepest.max(above + 1);
            pending.extend(children.flatten().map(|child| (child, above + 1)));
        }
        deepest
    }

    /// The bytes v4's `deepCopy` counts for `slot`: its length as Go's `json.Marshal` writes
    /// it (strings HTML-escaped), counted without writing it; a nil pointer counts 0.
    fn copy_size(slot: Option<&Node>) -> usize {
        fn size(slot: Option<&Node>) -> usize {
            match slot {
                None | Some(Node::RawNil | Node::Doc(None)) => 4,
                Some(Node::Scalar { raw: Some(raw), .. }) => html_escaped(raw).len(),
                Some(Node::Scalar { value, sent, .. }) => match value {
                    Value::String(text) => go_string_size(text),
                    other => Node::text(other, *sent, None).len(),
                },
                Some(Node::Doc(Some(map))) => {
                    2 + map.len().saturating_sub(1)
                        + map
                            .iter()
                            .map(|(key, slot)| go_string_size(key) + 1 + size(slot.as_ref()))
                            .sum::<usize>()
                }
                Some(Node::Ary(items)) => {
                    2 + items.len().saturating_sub(1)
                        + items.iter().map(|slot| size(slot.as_ref())).sum::<usize>()
                }
            }
        }
        slot.map_or(0, |node| size(Some(node)))
    }
}

/// The length of `text` as Go's `encoding/json` writes a string: quoted, `<`, `>`, `&`,
/// U+2028 and U+2029 as `\uXXXX`, control characters escaped.
fn go_string_size(text: &str) -> usize {
    2 + text
        .chars()
        .map(|c| match c {
            '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => 6,
            c if u32::from(c) < 0x20 => 6,
            c => c.len_utf8(),
        })
        .sum::<usize>()
}

/// `text` as Go's `encoding/json` writes a string (HTML-escaped, as `json.Marshal` does).
fn go_string(text: &str) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(go_string_size(text));
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A raw JSON text as `json.Marshal` writes a `json.RawMessage` (`compact` with HTML
/// escaping): `<`, `>`, `&`, U+2028 and U+2029 as `\uXXXX`.
fn html_escaped(raw: &str) -> std::borrow::Cow<'_, str> {
    use std::fmt::Write as _;
    if !raw.contains(['<', '>', '&', '\u{2028}', '\u{2029}']) {
        return std::borrow::Cow::Borrowed(raw);
    }
    let mut out = String::with_capacity(raw.len() + 16);
    for c in raw.chars() {
        match c {
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// json-patch v4's `lazyNode.equal`: `node` (the document's) against `other` (the
/// operation's). Scalars compare by their text ([`Node::text`]); a `null` in either of two
/// arrays compared item by item panics in v4.
fn nodes_equal(node: &Node, other: &Node) -> Result<bool, Stop> {
    Ok(match (node, other) {
        (Node::RawNil, Node::RawNil) => true,
        (
            Node::Scalar { value, sent, raw },
            Node::Scalar {
                value: other_value,
                sent: other_sent,
                raw: other_raw,
            },
        ) => {
            Node::text(value, *sent, raw.as_deref())
                == Node::text(other_value, *other_sent, other_raw.as_deref())
        }
        (Node::RawNil | Node::Scalar { .. }, _) => false,
        (Node::Doc(map), Node::Doc(other_map)) => {
            let empty = BTreeMap::new();
            let map = map.as_ref().unwrap_or(&empty);
            let other_map = other_map.as_ref().unwrap_or(&empty);
            if map.len() != other_map.len() {
                return Ok(false);
            }
            for (key, slot) in map {
                let Some(other_slot) = other_map.get(key) else {
                    return Ok(false);
                };
                match (slot, other_slot) {
                    (None, None) => {}
                    (Some(node), Some(other)) => {
                        if !nodes_equal(node, other)? {
                            return Ok(false);
                        }
                    }
                    _ => return Ok(false),
                }
            }
            true
        }
        (Node::Doc(_), _) => false,
        (Node::Ary(items), Node::Ary(other_items)) => {
            if items.len() != other_items.len() {
                return Ok(false);
            }
            for (slot, other_slot) in items.iter().zip(other_items) {
                let (Some(node), Some(other)) = (slot, other_slot) else {
                    return Err(Stop::Panic(NIL_POINTER));
                };
                if !nodes_equal(node, other)? {
                    return Ok(false);
                }
            }
            true
        }
        (Node::Ary(_), _) => false,
    })
}

/// Go's `strconv.Atoi` (64-bit `int`), with its error text.
fn atoi(key: &str) -> Result<i64, String> {
    let digits = key.strip_prefix(['+', '-']).unwrap_or(key);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "strconv.Atoi: parsing {}: invalid syntax",
            watchkeeper_core::gotext::go_quote(key)
        ));
    }
    key.trim_start_matches('+').parse::<i64>().map_err(|_| {
        format!(
            "strconv.Atoi: parsing {}: value out of range",
            watchkeeper_core::gotext::go_quote(key)
        )
    })
}

fn invalid_index(index: i64) -> Stop {
    Stop::Error(format!(
        "Unable to access invalid index: {index}: invalid index referenced"
    ))
}

/// The item an index token names in an array of `len` items (v4's `partialArray.get`: Go's
/// `Atoi`, so `+1` and `01` too, and a negative index counts from the end).
fn item_index(len: usize, key: &str) -> Result<usize, Stop> {
    let index = atoi(key).map_err(Stop::Error)?;
    let len = i64::try_from(len).unwrap_or(i64::MAX);
    let at = if index < 0 {
        if index < -len {
            return Err(invalid_index(index));
        }
        index + len
    } else {
        index
    };
    if at >= len {
        return Err(invalid_index(index));
    }
    usize::try_from(at).map_err(|_| invalid_index(index))
}

/// v4's `container.get`: a missing key of an object is a nil node, not an error.
fn container_get<'a>(container: &'a Node, key: &str) -> Result<Option<&'a Node>, Stop> {
    match container {
        Node::Ary(items) => Ok(items[item_index(items.len(), key)?].as_ref()),
        Node::Doc(map) => Ok(map.as_ref().and_then(|map| map.get(key)?.as_ref())),
        _ => Ok(None),
    }
}

fn container_get_mut<'a>(container: &'a mut Node, key: &str) -> Option<&'a mut Node> {
    match container {
        Node::Ary(items) => {
            let at = item_index(items.len(), key).ok()?;
            items[at].as_mut()
        }
        Node::Doc(map) => map.as_mut()?.get_mut(key)?.as_mut(),
        _ => None,
    }
}

/// v4's `container.set` (`replace`, after `get` found the key or index) and, `add`, its
/// `container.add`: an object's key is set either way; `add` inserts into an array (`-` or
/// an index up to its length, negative from the end), `set` overwrites.
fn container_put(container: &mut Node, key: &str, value: Slot, insert: bool) -> Result<(), Stop> {
    match container {
        Node::Doc(Some(map)) => {
            map.insert(key.to_owned(), value);
            Ok(())
        }
        Node::Doc(None) => Err(Stop::Panic(NIL_MAP)),
        Node::Ary(items) if !insert => {
            let at = item_index(items.len(), key)?;
            items[at] = value;
            Ok(())
        }
        Node::Ary(items) => {
            if key == "-" {
                items.push(value);
                return Ok(());
            }
            let index = atoi(key).map_err(|error| {
                Stop::Error(format!(
                    "value was not a proper array index: '{key}': {error}"
                ))
            })?;
            let size = i64::try_from(items.len()).unwrap_or(i64::MAX) + 1;
            if index >= size || index < -size {
                return Err(invalid_index(index));
            }
            let at = if index < 0 { index + size } else { index };
            items.insert(
                usize::try_from(at).map_err(|_| invalid_index(index))?,
                value,
            );
            Ok(())
        }
        _ => Err(Stop::Panic(NIL_POINTER)),
    }
}

/// v4's `container.remove`.
fn container_remove(container: &mut Node, key: &str) -> Result<Slot, Stop> {
    match container {
        Node::Ary(items) => {
            let at = item_index(items.len(), key)?;
            Ok(items.remove(at))
        }
        Node::Doc(map) => map.as_mut().and_then(|map| map.remove(key)).ok_or_else(|| {
            Stop::Error(format!(
                "Unable to remove nonexistent key: {key}: missing value"
            ))
        }),
        _ => Err(Stop::Panic(NIL_POINTER)),
    }
}

/// RFC 6901's unescaping as v4 does it (`~1` then `~0`, in one pass); any other `~` is kept.
fn decode_key(token: &str) -> String {
    let mut out = String::with_capacity(token.len());
    let mut rest = token;
    while let Some(at) = rest.find('~') {
        out.push_str(&rest[..at]);
        match rest.as_bytes().get(at + 1) {
            Some(b'1') => {
                out.push('/');
                rest = &rest[at + 2..];
            }
            Some(b'0') => {
                out.push('~');
                rest = &rest[at + 2..];
            }
            _ => {
                out.push('~');
                rest = &rest[at + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// v4's `findObject`: the container the last token of `path` is a key of, and that key. The
/// path is split at every `/` and its first part ignored (`a/b` is `/b`); `""` and a path
/// without `/` find nothing; every step must be an object or array (a missing key, a `null`,
/// a scalar or a bad index finds nothing).
fn split_path(path: &str) -> Option<(Vec<String>, String)> {
    let mut parts: Vec<&str> = path.split('/').collect();
    if parts.len() < 2 {
        return None;
    }
    let key = decode_key(parts.pop()?);
    Some((
        parts[1..].iter().map(|part| decode_key(part)).collect(),
        key,
    ))
}

fn find_object<'a>(doc: &'a Node, path: &str) -> Option<(&'a Node, String)> {
    let (steps, key) = split_path(path)?;
    let mut container = doc;
    for step in &steps {
        container = match container_get(container, step) {
            Ok(Some(next @ (Node::Doc(_) | Node::Ary(_)))) => next,
            _ => return None,
        };
    }
    Some((container, key))
}

fn find_object_mut<'a>(doc: &'a mut Node, path: &str) -> Option<(&'a mut Node, String)> {
    let (steps, key) = split_path(path)?;
    let mut container = doc;
    for step in &steps {
        container = match container_get_mut(container, step) {
            Some(next @ (Node::Doc(_) | Node::Ary(_))) => next,
            _ => return None,
        };
    }
    Some((container, key))
}

/// An operation as v4 decodes it: an object, or `None` for a `null` item (Go's nil map, in
/// which every field is missing).
type Operation<'a> = Option<&'a Map<String, Value>>;

fn field<'a>(operation: Operation<'a>, name: &str) -> Option<&'a Value> {
    operation?.get(name)
}

/// v4's `Operation.Kind`: `unknown` unless `op` is a string.
fn kind(operation: Operation<'_>) -> &str {
    match field(operation, "op") {
        Some(Value::String(op)) => op,
        _ => "unknown",
    }
}

/// v4's `Operation.Path` and `Operation.From`: the string, or the error v4 returns.
fn text_field<'a>(operation: Operation<'a>, name: &str, missing: &str) -> Result<&'a str, String> {
    match field(operation, name) {
        Some(Value::String(text)) => Ok(text),
        None | Some(Value::Null) => Err(missing.to_owned()),
        Some(other) => Err(format!(
            "json: cannot unmarshal {} into Go value of type string",
            crate::go_json::go_kind(other)
        )),
    }
}

fn path_of(operation: Operation<'_>) -> Result<&str, String> {
    text_field(
        operation,
        "path",
        "operation missing path field: missing value",
    )
}

fn from_of(operation: Operation<'_>) -> Result<&str, String> {
    text_field(
        operation,
        "from",
        "operation, missing from field: missing value",
    )
}

/// v4's `Operation.value`: a nil pointer without `value`, [`Node::RawNil`] for `null`; its
/// scalars keep their text as sent when `raw` (the value's text in the body) reads.
fn value_of(operation: Operation<'_>, raw: Option<&[u8]>) -> Slot {
    match field(operation, "value")? {
        Value::Null => Some(Node::RawNil),
        value => raw
            .and_then(|raw| {
                let mut at = 0;
                let node = raw_node(raw, &mut at)?;
                (skip_space(raw, at) == raw.len()).then_some(node)
            })
            .unwrap_or_else(|| Node::from_value(value, true)),
    }
}

/// Where each operation's `value` is in a JSON patch's text (the last one, as Go keeps it),
/// in one pass; `None` when the text does not read so (a value is then taken as parsed).
fn value_spans(body: &[u8]) -> Option<Vec<Option<(usize, usize)>>> {
    let mut spans = Vec::new();
    let mut at = skip_space(body, 0);
    if body.get(at)? != &b'[' {
        return None;
    }
    at += 1;
    loop {
        at = skip_space(body, at);
        if body.get(at)? == &b']' {
            return Some(spans);
        }
        let mut span = None;
        if body[at] == b'{' {
            at += 1;
            loop {
                at = skip_space(body, at);
                if body.get(at)? == &b'}' {
                    at += 1;
                    break;
                }
                let end = string_end(body, at)?;
                let key: String = serde_json::from_slice(&body[at..end]).ok()?;
                at = skip_space(body, end);
                if body.get(at)? != &b':' {
                    return None;
                }
                let start = skip_space(body, at + 1);
                let end = value_end(body, start)?;
                if key == "value" {
                    span = Some((start, end));
                }
                at = skip_space(body, end);
                match body.get(at)? {
                    b',' => at += 1,
                    b'}' => {
                        at += 1;
                        break;
                    }
                    _ => return None,
                }
            }
        } else {
            at = value_end(body, at)?;
        }
        spans.push(span);
        at = skip_space(body, at);
        match body.get(at)? {
            b',' => at += 1,
            b']' => return Some(spans),
            _ => return None,
        }
    }
}

/// The value whose text starts at `at` (after spaces), its scalars keeping their text as
/// sent; `None` when a part does not read (the parsed value is taken instead).
fn raw_node(body: &[u8], at: &mut usize) -> Option<Slot> {
    *at = skip_space(body, *at);
    match body.get(*at)? {
        b'{' => {
            *at += 1;
            let mut map = BTreeMap::new();
            loop {
                *at = skip_space(body, *at);
                if body.get(*at)? == &b'}' {
                    *at += 1;
                    break;
                }
                let end = string_end(body, *at)?;
                let key: String = serde_json::from_slice(&body[*at..end]).ok()?;
                *at = skip_space(body, end);
                if body.get(*at)? != &b':' {
                    return None;
                }
                *at += 1;
                let child = raw_node(body, at)?;
                map.insert(key, child);
                *at = skip_space(body, *at);
                match body.get(*at)? {
                    b',' => *at += 1,
                    b'}' => {
                        *at += 1;
                        break;
                    }
                    _ => return None,
                }
            }
            Some(Some(Node::Doc(Some(map))))
        }
        b'[' => {
            *at += 1;
            let mut items = Vec::new();
            loop {
                *at = skip_space(body, *at);
                if body.get(*at)? == &b']' {
                    *at += 1;
                    break;
                }
                items.push(raw_node(body, at)?);
                *at = skip_space(body, *at);
                match body.get(*at)? {
                    b',' => *at += 1,
                    b']' => {
                        *at += 1;
                        break;
                    }
                    _ => return None,
                }
            }
            Some(Some(Node::Ary(items)))
        }
        _ => {
            let end = value_end(body, *at)?;
            let raw = std::str::from_utf8(&body[*at..end]).ok()?;
            let value: Value = serde_json::from_str(raw).ok()?;
            *at = end;
            // A string sent as Go writes it (the common case) keeps no second copy of its text.
            let as_go_writes = |text: &str| {
                raw.len() == text.len() + 2
                    && raw.get(1..raw.len() - 1) == Some(text)
                    && go_string_size(text) == raw.len()
            };
            let raw = match &value {
                Value::Null => return Some(None),
                Value::Object(_) | Value::Array(_) => return None,
                Value::String(text) if as_go_writes(text) => None,
                _ => Some(raw.into()),
            };
            Some(Some(Node::Scalar {
                value,
                sent: true,
                raw,
            }))
        }
    }
}

/// v4's `DecodePatch` of an already parsed body: an array of objects (a `null` item is an
/// operation without fields; `null` itself no operations), else Go's 400.
fn decode_operations(patch: &Value) -> Result<Vec<Operation<'_>>, ApiError> {
    let cannot = |value: &Value, go_type: &str| {
        ApiError::bad_request(format!(
            "json: cannot unmarshal {} into Go value of type {go_type}",
            crate::go_json::go_kind(value)
        ))
    };
    match patch {
        Value::Null => Ok(Vec::new()),
        Value::Array(items) => items
            .iter()
            .map(|item| match item {
                Value::Object(operation) => Ok(Some(operation)),
                Value::Null => Ok(None),
                other => Err(cannot(other, "jsonpatch.Operation")),
            })
            .collect(),
        other => Err(cannot(other, "jsonpatch.Patch")),
    }
}

/// Applies an RFC 6902 JSON patch to a copy of `original`, as kube-apiserver does with
/// evanphx/json-patch v4 (`DecodePatch`, then `Apply`; see the module docs for where v4
/// differs from RFC 6902).
///
/// # Errors
/// 400 with Go's text when the patch is not an array of objects, 413 for too many operations,
/// 422 with json-patch's text as the cause when an operation does not apply (missing path,
/// failed `test`, unknown `op`), 500 where json-patch panics.
pub fn json_patch(original: &Value, patch: &Value) -> Result<Value, ApiError> {
    json_patch_with_limits(original, patch, PatchLimits::default())
}

/// [`json_patch`] with explicit [`PatchLimits`].
///
/// # Errors
/// As [`json_patch`], and 422 when the copies pass [`PatchLimits::copy_bytes_max`] or an
/// operation would nest the object deeper than [`JSON_NESTING_MAX`].
pub fn json_patch_with_limits(
    original: &Value,
    patch: &Value,
    limits: PatchLimits,
) -> Result<Value, ApiError> {
    json_patch_sent(original, patch, None, limits)
}

/// [`json_patch_with_limits`] of the patch `patch` read from the text `body`, when there is
/// one: its scalars are then compared by their text as sent, as v4 compares them.
fn json_patch_sent(
    original: &Value,
    patch: &Value,
    body: Option<&[u8]>,
    limits: PatchLimits,
) -> Result<Value, ApiError> {
    let operations = decode_operations(patch)?;
    if operations.len() > JSON_PATCH_OPERATIONS_MAX {
        return Err(ApiError::request_entity_too_large(format!(
            "The allowed maximum operations in a JSON patch is {JSON_PATCH_OPERATIONS_MAX}, got {}",
            operations.len()
        )));
    }
    let mut doc = match original {
        Value::Object(_) | Value::Array(_) => {
            Node::from_value(original, false).unwrap_or(Node::Doc(None))
        }
        Value::Null => Node::Doc(None),
        scalar => {
            return Err(unprocessable(format!(
                "json: cannot unmarshal {} into Go value of type jsonpatch.partialDoc",
                crate::go_json::go_kind(scalar)
            )));
        }
    };
    let spans = body
        .and_then(value_spans)
        .filter(|spans| spans.len() == operations.len());
    let mut copied = 0usize;
    for (index, operation) in operations.into_iter().enumerate() {
        let raw = body.zip(spans.as_ref().and_then(|spans| spans[index]));
        let raw = raw.map(|(body, (start, end))| &body[start..end]);
        apply_operation(&mut doc, operation, raw, index, &mut copied, limits)?;
    }
    Ok(Node::into_value(Some(doc)))
}

/// One operation, as v4's `Patch.add`, `remove`, `replace`, `move`, `test` and `copy` apply it
/// (their checks in their order, their error texts), within this crate's bounds.
fn apply_operation(
    doc: &mut Node,
    operation: Operation<'_>,
    raw: Option<&[u8]>,
    index: usize,
    copied: &mut usize,
    limits: PatchLimits,
) -> Result<(), ApiError> {
    let op = kind(operation);
    let fail = |message: String| unprocessable(message);
    // The object nests no deeper than a JSON body may (see the module docs): the value placed
    // under `path` is measured before it is cloned or placed.
    let within_nesting = |path: &str, placed: Option<&Node>| {
        let levels = path
            .matches('/')
            .count()
            .saturating_add(Node::nesting(placed));
        if levels > JSON_NESTING_MAX {
            return Err(fail(format!(
                "JSON patch operation {index} ({op}) failed: the object would nest {levels} levels deep at {path:?}, more than the {JSON_NESTING_MAX} a JSON body may"
            )));
        }
        Ok(())
    };
    match op {
        "add" => {
            let path = path_of(operation)
                .map_err(|_| fail("add operation failed to decode path: missing value".into()))?;
            let (container, key) = find_object_mut(doc, path).ok_or_else(|| {
                fail(format!(
                    "add operation does not apply: doc is missing path: \"{path}\": missing value"
                ))
            })?;
            let value = value_of(operation, raw);
            within_nesting(path, value.as_ref())?;
            container_put(container, &key, value, true)
                .map_err(|stop| stop.wrap(format_args!("error in add for path: '{path}'")))
                .map_err(Stop::into_error)
        }
        "remove" => {
            let path = path_of(operation).map_err(|_| {
                fail("remove operation failed to decode path: missing value".into())
            })?;
            let (container, key) = find_object_mut(doc, path).ok_or_else(|| {
                fail(format!(
                    "remove operation does not apply: doc is missing path: \"{path}\": missing value"
                ))
            })?;
            container_remove(container, &key)
                .map(drop)
                .map_err(|stop| stop.wrap(format_args!("error in remove for path: '{path}'")))
                .map_err(Stop::into_error)
        }
        "replace" => {
            let path = path_of(operation).map_err(|error| {
                fail(format!("replace operation failed to decode path: {error}"))
            })?;
            let value = value_of(operation, raw);
            if path.is_empty() {
                return match value {
                    None => Err(panicked(NIL_POINTER)),
                    Some(whole @ (Node::Doc(_) | Node::Ary(_))) => {
                        within_nesting(path, Some(&whole))?;
                        *doc = whole;
                        Ok(())
                    }
                    Some(_) => Err(fail(
                        "replace operation value must be object or array: %!w(<nil>)".into(),
                    )),
                };
            }
            let missing = |what: &str| {
                fail(format!(
                    "replace operation does not apply: doc is missing {what}: {path}: missing value"
                ))
            };
            let (container, key) = find_object_mut(doc, path).ok_or_else(|| missing("path"))?;
            if container_get(container, &key).is_err() {
                return Err(missing("key"));
            }
            within_nesting(path, value.as_ref())?;
            container_put(container, &key, value, false)
                .map_err(|stop| stop.wrap(format_args!("error in remove for path: '{path}'")))
                .map_err(Stop::into_error)
        }
        "move" => {
            let from = from_of(operation)
                .map_err(|error| fail(format!("move operation failed to decode from: {error}")))?;
            let (container, key) = find_object_mut(doc, from).ok_or_else(|| {
                fail(format!(
                    "move operation does not apply: doc is missing from path: {from}: missing value"
                ))
            })?;
            let moved = container_remove(container, &key)
                .map_err(|stop| stop.wrap(format_args!("error in move for path: '{key}'")))
                .map_err(Stop::into_error)?;
            let path = path_of(operation)
                .map_err(|error| fail(format!("move operation failed to decode path: {error}")))?;
            let (container, key) = find_object_mut(doc, path).ok_or_else(|| {
                fail(format!(
                    "move operation does not apply: doc is missing destination path: {path}: missing value"
                ))
            })?;
            within_nesting(path, moved.as_ref())?;
            container_put(container, &key, moved, true)
                .map_err(|stop| stop.wrap(format_args!("error in move for path: '{path}'")))
                .map_err(Stop::into_error)
        }
        "copy" => {
            let from = from_of(operation)
                .map_err(|error| fail(format!("copy operation failed to decode from: {error}")))?;
            let (container, key) = find_object(doc, from).ok_or_else(|| {
                fail(format!(
                    "copy operation does not apply: doc is missing from path: {from}: missing value"
                ))
            })?;
            let source = container_get(container, &key)
                .map_err(|stop| stop.wrap(format_args!("error in copy for from: '{from}'")))
                .map_err(Stop::into_error)?;
            let path = path_of(operation)
                .map_err(|_| fail("copy operation failed to decode path: missing value".into()))?;
            if find_object(doc, path).is_none() {
                return Err(fail(format!(
                    "copy operation does not apply: doc is missing destination path: {path}: missing value"
                )));
            }
            // Counted before the clone: a refused copy allocates nothing.
            *copied = copied.saturating_add(Node::copy_size(source));
            if *copied > limits.copy_bytes_max {
                return Err(copy_limit_exceeded(*copied, limits.copy_bytes_max));
            }
            within_nesting(path, source)?;
            let copy = Node::deep_copy(source);
            let (container, key) = find_object_mut(doc, path).ok_or_else(|| {
                fail(format!(
                    "copy operation does not apply: doc is missing destination path: {path}: missing value"
                ))
            })?;
            container_put(container, &key, copy, true)
                .map_err(|stop| stop.wrap("error while adding value during copy"))
                .map_err(Stop::into_error)
        }
        "test" => {
            let path = path_of(operation)
                .map_err(|error| fail(format!("test operation failed to decode path: {error}")))?;
            let failed = || fail(format!("testing value {path} failed: test failed"));
            let expected = value_of(operation, raw);
            if path.is_empty() {
                let Some(expected) = expected else {
                    return Err(panicked(NIL_POINTER));
                };
                return match nodes_equal(doc, &expected) {
                    Ok(true) => Ok(()),
                    Ok(false) => Err(failed()),
                    Err(stop) => Err(stop.into_error()),
                };
            }
            let (container, key) = find_object(doc, path).ok_or_else(|| {
                fail(format!(
                    "test operation does not apply: is missing path: {path}: missing value"
                ))
            })?;
            let actual = container_get(container, &key)
                .map_err(|stop| stop.wrap(format_args!("error in test for path: '{path}'")))
                .map_err(Stop::into_error)?;
            match (actual, expected) {
                // v4.12.0 (kube 1.33's) reads the missing value's text and panics.
                (None, None) => Err(panicked(NIL_POINTER)),
                (None, Some(Node::RawNil)) => Ok(()),
                (None, Some(_)) | (Some(_), None) => Err(failed()),
                (Some(actual), Some(expected)) => match nodes_equal(actual, &expected) {
                    Ok(true) => Ok(()),
                    Ok(false) => Err(failed()),
                    Err(stop) => Err(stop.into_error()),
                },
            }
        }
        other => Err(fail(format!("Unexpected kind: {other}"))),
    }
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

const DIRECTIVE: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
/// The list directives' prefixes as apimachinery matches them: a key starting so is the
/// directive, whose part before the first `/` must then be exactly this (else its 400 format
/// error) and whose part after it names the list.
const SET_ELEMENT_ORDER: &str = "$setElementOrder";
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList";

/// What Go's `reflect.TypeOf` names a decoded JSON value (kube decodes integers as `int64`,
/// other numbers as `float64`); a `null` as `%s` prints a nil type.
fn go_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "%!s(<nil>)",
        Value::Bool(_) => "bool",
        Value::Number(number) if number.is_i64() => "int64",
        Value::Number(_) => "float64",
        Value::String(_) => "string",
        Value::Array(_) => LIST,
        Value::Object(_) => MAP,
    }
}

const LIST: &str = "[]interface {}";
const MAP: &str = "map[string]interface {}";

/// Applies a strategic merge patch to a copy of `original`, an object of the type `ty` (the
/// kind's schema root, [`Ty::deduced`] for none: every list replaced), as apimachinery's
/// `StrategicMergeMapPatch` does with kube-apiserver's options (`mergeMap` with
/// `MergeParallelList` and `IgnoreUnmatchedNulls`): its walk, its results (a `$patch: delete`
/// map becomes `{}`, a root one too; what a patch places where the object has nothing, or
/// something of another type, loses its `null` members and its `$patch` maps, and keeps any
/// other directive key; a `replace` strategy or directive places the patch's map as it is),
/// its list order (`normalizeElementOrder`: the patch's items in the patch's or
/// `$setElementOrder`'s order, interleaved with the object's other items by their place in
/// the object), its errors with their texts and kube's codes (see the module docs).
///
/// # Errors
/// 400 when the patch is not an object and for apimachinery's format errors (`$retainKeys`,
/// `$setElementOrder`, `$deleteFromPrimitiveList`), 422 for a list of lists in a merging
/// list, 500 without a reason for its other errors ([`is_kube_patch_500`]).
pub fn strategic_merge_patch(
    original: &Value,
    patch: &Value,
    ty: Ty<'_>,
) -> Result<Value, ApiError> {
    // kube decodes the patch into a `map[string]interface{}`: `null` is no patch, anything
    // else that is not an object Go's 400.
    let patch = match patch {
        Value::Object(patch) => patch.clone(),
        Value::Null => Map::new(),
        other => {
            return Err(ApiError::bad_request(format!(
                "json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
                crate::go_json::go_kind(other)
            )));
        }
    };
    let original = match original {
        Value::Object(map) => map.clone(),
        _ => Map::new(),
    };
    merge_map(original, patch, ty).map(Value::Object)
}

/// A refusal apimachinery's `strategicpatch` words with an error of its own
/// (`mergepatch.ErrBadPatchType`, `ErrNoMergeKey`, `ErrBadArgType`, its `fmt.Errorf`s):
/// kube-apiserver's `interpretStrategicMergePatchError` gives a status only to its sentinel
/// errors, so these reach the client as any error without a status does, 500 with no reason
/// and the error's text (`Error from server: unknown patch type: merge in map: ...`).
fn smp_refusal(message: String) -> ApiError {
    ApiError::new(500, "", message)
}

/// `mergepatch.ErrBadPatchType`: `unknown patch type: X in map: map[...]`.
fn bad_patch_type(directive: &Value, map: &Map<String, Value>) -> ApiError {
    smp_refusal(format!(
        "unknown patch type: {} in map: {}",
        go_s(directive),
        go_text(&Value::Object(map.clone()))
    ))
}

/// A decoded JSON value as Go's `%s` prints an `interface{}` holding it: a string as it is,
/// anything else as `%!s(int64=5)`, `%!s(bool=true)`, `%!s(<nil>)`, lists and maps item by
/// item.
fn go_s(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Null => "%!s(<nil>)".to_owned(),
        Value::Bool(b) => format!("%!s(bool={b})"),
        Value::Number(number) => match number.as_i64() {
            Some(integer) => format!("%!s(int64={integer})"),
            None => format!("%!s(float64={})", go_text(value)),
        },
        Value::Array(items) => {
            format!("[{}]", items.iter().map(go_s).collect::<Vec<_>>().join(" "))
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let members: Vec<String> = keys
                .into_iter()
                .map(|key| format!("{key}:{}", go_s(&map[key])))
                .collect();
            format!("map[{}]", members.join(" "))
        }
    }
}

/// `mergepatch.ErrBadArgType`: `expected a []interface {}, but received a string`.
fn bad_arg_type(expected: &str, value: &Value) -> ApiError {
    smp_refusal(format!(
        "expected a {expected}, but received a {}",
        go_type(value)
    ))
}

/// `mergepatch.ErrNoMergeKey`: `map: map[image:x] does not contain declared merge key: name`.
fn no_merge_key(map: &Map<String, Value>, key: &str) -> ApiError {
    smp_refusal(format!(
        "map: {} does not contain declared merge key: {key}",
        go_text(&Value::Object(map.clone()))
    ))
}

/// What identifies a list item for apimachinery's comparisons (Go's `==` on the decoded
/// values): its merge key's value for a list of maps (a missing key reads as `nil`, as in Go),
/// the item itself otherwise; as text, so `1` (an `int64`) is not `1.0` (a `float64`).
fn identity(item: &Value, merge_key: Option<&str>) -> String {
    match merge_key {
        Some(key) => item.get(key).unwrap_or(&Value::Null).to_string(),
        None => item.to_string(),
    }
}

/// The first place of each item's [`identity`] in `list`: apimachinery's `index`, looked up
/// in constant time.
struct Places(HashMap<String, usize>);

impl Places {
    fn of(list: &[Value], merge_key: Option<&str>) -> Places {
        let mut places = HashMap::with_capacity(list.len());
        for (place, item) in list.iter().enumerate() {
            places.entry(identity(item, merge_key)).or_insert(place);
        }
        Places(places)
    }

    fn get(&self, item: &Value, merge_key: Option<&str>) -> Option<usize> {
        self.0.get(&identity(item, merge_key)).copied()
    }
}

/// The part of a list directive's key after `prefix/` (apimachinery's `extractKey`); `None`
/// when the key is not `prefix/...`.
fn directive_field<'k>(key: &'k str, prefix: &str) -> Option<&'k str> {
    let (head, field) = key.split_once('/')?;
    (head == prefix).then_some(field)
}

/// The field's patch strategy besides `retainKeys` (apimachinery's
/// `extractRetainKeysPatchStrategy`): `""`, `merge` or `replace`.
fn field_strategy<'a>(ty: Ty<'a>) -> Result<&'a str, ApiError> {
    let Some(markers) = ty.patch_markers().0 else {
        return Ok("");
    };
    let strategies: Vec<&str> = markers.split(',').collect();
    match strategies.as_slice() {
        ["retainKeys"] => Ok(""),
        [single] => Ok(*single),
        ["retainKeys", other] | [other, "retainKeys"] => Ok(*other),
        _ => Err(smp_refusal(format!(
            "unexpected patch strategy: [{}]",
            strategies.join(" ")
        ))),
    }
}

/// apimachinery's `mergeMap`: `patch` merged into `original` (see [`strategic_merge_patch`]).
fn merge_map(
    mut original: Map<String, Value>,
    mut patch: Map<String, Value>,
    ty: Ty<'_>,
) -> Result<Map<String, Value>, ApiError> {
    // `handleDirectiveInMergeMap`: `merge` too is unknown there.
    if let Some(directive) = patch.get(DIRECTIVE) {
        return match directive.as_str() {
            Some("replace") => {
                patch.remove(DIRECTIVE);
                Ok(patch)
            }
            Some("delete") => Ok(Map::new()),
            _ => Err(bad_patch_type(directive, &patch)),
        };
    }
    apply_retain_keys(&mut original, &mut patch)?;
    merge_ordered_lists(&mut original, &mut patch, ty)?;
    for (key, patch_value) in patch {
        // `preprocessDeletionListForMerging`: the list a `$deleteFromPrimitiveList/` names.
        let (key, delete_list) = if key.starts_with(DELETE_FROM_PRIMITIVE_LIST) {
            match directive_field(&key, DELETE_FROM_PRIMITIVE_LIST) {
                // `mergepatch.ErrBadPatchFormatForPrimitiveList`, a sentinel kube answers 400.
                None => {
                    return Err(ApiError::bad_request(
                        "invalid patch format of primitive list",
                    ));
                }
                Some("") => (key, true),
                Some(field) => (field.to_owned(), true),
            }
        } else {
            (key, false)
        };
        if patch_value.is_null() {
            original.remove(&key);
            continue;
        }
        let current = original.remove(&key);
        let merged = match (current, patch_value) {
            (None, patch_value) => (!delete_list).then(|| placed(patch_value)).flatten(),
            (Some(Value::Object(current)), Value::Object(patch_map)) => {
                let field = ty.child(&key);
                Some(Value::Object(if field_strategy(field)? == "replace" {
                    patch_map
                } else {
                    merge_map(current, patch_map, field)?
                }))
            }
            (Some(Value::Array(current)), Value::Array(patch_items)) => Some(Value::Array(
                merge_list_field(current, patch_items, ty.child(&key), delete_list)?,
            )),
            // Of another type: the patch's value, but for a deletion list.
            (Some(current), patch_value) if go_type(&current) != go_type(&patch_value) => {
                if delete_list {
                    Some(current)
                } else {
                    placed(patch_value)
                }
            }
            // Two scalars of one type.
            (Some(_), patch_value) => Some(patch_value),
        };
        if let Some(merged) = merged {
            original.insert(key, merged);
        }
    }
    Ok(original)
}

/// A patch value placed where the object has nothing of its type: its `null` members dropped
/// (`discardNullValuesFromPatch`), then its maps with a `$patch` directive
/// (`removeDirectives`); `None` when it is such a map itself.
fn placed(mut value: Value) -> Option<Value> {
    discard_nulls(&mut value);
    remove_directives(value)
}

/// apimachinery's `discardNullValuesFromPatch`: the `null` members of every map within
/// `value` dropped (a list keeps its `null` items).
fn discard_nulls(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, member| !member.is_null());
            map.values_mut().for_each(discard_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(discard_nulls),
        _ => {}
    }
}

/// apimachinery's `removeDirectives`: every map holding `$patch` dropped (from its map or
/// list), `None` when `value` is one. Other directive keys stay.
fn remove_directives(value: Value) -> Option<Value> {
    match value {
        Value::Object(map) if map.contains_key(DIRECTIVE) => None,
        Value::Object(map) => Some(Value::Object(
            map.into_iter()
                .filter_map(|(key, member)| remove_directives(member).map(|member| (key, member)))
                .collect(),
        )),
        Value::Array(items) => Some(Value::Array(
            items.into_iter().filter_map(remove_directives).collect(),
        )),
        other => Some(other),
    }
}

/// apimachinery's `applyRetainKeysDirective`: a `$retainKeys` list, naming every key the
/// map's patch sets (but for `null` values and the list directives), else `invalid patch
/// format of retainKeys` (400), drops the object's other keys before the merge.
fn apply_retain_keys(
    original: &mut Map<String, Value>,
    patch: &mut Map<String, Value>,
) -> Result<(), ApiError> {
    let Some(retain) = patch.remove(RETAIN_KEYS) else {
        return Ok(());
    };
    // `mergepatch.ErrBadPatchFormatForRetainKeys`, a sentinel kube answers with 400.
    let bad = || ApiError::bad_request("invalid patch format of retainKeys");
    let Value::Array(keys) = retain else {
        return Err(bad());
    };
    let keep: HashSet<&str> = keys.iter().filter_map(Value::as_str).collect();
    let unlisted = patch.iter().any(|(key, value)| {
        !value.is_null()
            && !key.starts_with(DELETE_FROM_PRIMITIVE_LIST)
            && !key.starts_with(SET_ELEMENT_ORDER)
            && !keep.contains(key.as_str())
    });
    if unlisted {
        return Err(bad());
    }
    original.retain(|key, _| keep.contains(key.as_str()));
    Ok(())
}

/// apimachinery's `mergePatchIntoOriginal`: each `$setElementOrder/<field>` merges the patch's
/// `<field>` (if any) into the object's, checks the patch's list against the order, and
/// orders the result by it (the order's items first among the patch's, the object's others
/// interleaved by their place in the object). The lists it merged leave the patch.
fn merge_ordered_lists(
    original: &mut Map<String, Value>,
    patch: &mut Map<String, Value>,
    ty: Ty<'_>,
) -> Result<(), ApiError> {
    let keys: Vec<String> = patch
        .keys()
        .filter(|key| key.starts_with(SET_ELEMENT_ORDER))
        .cloned()
        .collect();
    for key in keys {
        let Some(order) = patch.remove(&key) else {
            continue;
        };
        let Value::Array(order) = order else {
            return Err(bad_arg_type(LIST, &order));
        };
        // `mergepatch.ErrBadPatchFormatForSetElementOrderList`, a sentinel kube answers 400.
        let field = directive_field(&key, SET_ELEMENT_ORDER)
            .ok_or_else(|| ApiError::bad_request("invalid patch format of setElementOrder list"))?;
        let original_list = match original.get(field) {
            None => None,
            Some(Value::Array(_)) => original.remove(field).map(|list| match list {
                Value::Array(items) => items,
                _ => Vec::new(),
            }),
            Some(other) => return Err(bad_arg_type(LIST, other)),
        };
        let patch_list = match patch.get(field) {
            None => None,
            Some(Value::Array(_)) => patch.remove(field).map(|list| match list {
                Value::Array(items) => items,
                _ => Vec::new(),
            }),
            Some(other) => return Err(bad_arg_type(LIST, other)),
        };
        let field_ty = ty.child(field);
        let strategy = field_strategy(field_ty)?;
        let merge_key = field_ty.patch_markers().1.filter(|key| !key.is_empty());
        check_order(patch_list.as_deref().unwrap_or_default(), &order, merge_key)?;
        let mut server_order = original_list.clone().unwrap_or_default();
        let kind = element_type(&[&server_order, patch_list.as_deref().unwrap_or_default()]);
        if let (Some(key), Some(items), "merge", Ok(&MAP)) =
            (merge_key, patch_list.as_deref(), strategy, kind.as_ref())
        {
            server_order = as_go_leaves_it(server_order, items, key);
        }
        let merged = match (original_list, patch_list) {
            (Some(items), None) => items,
            (None, Some(items)) => items.into_iter().filter_map(remove_directives).collect(),
            (Some(current), Some(items)) => {
                merge_list_with(current, items, field_ty, strategy, merge_key, false)?
            }
            (None, None) => continue,
        };
        let (patch_items, server_only) = partition(merged, &order, merge_key)?;
        let maps = kind? == MAP;
        let ordered = element_order(
            patch_items,
            server_only,
            &order,
            &server_order,
            merge_key,
            maps,
        )?;
        original.insert(field.to_owned(), Value::Array(ordered));
    }
    Ok(())
}

/// The object's list of maps as apimachinery's `mergePatchIntoOriginal` reads it after
/// merging the patch's list into it, for the place of each item: Go merges into the object's
/// list in place, so the slice it then reads (as long as the object's list) holds the items
/// `deleteMatchingEntries` left, shifted forward (in their order); then, in the slots the
/// deletions freed, the items `mergeSliceWithoutSpecialElements` appended (none after a
/// `$patch: replace` item, which makes a new list); in the slots still left, what each
/// deletion's shift left there (the last item of the list as it was just before that
/// deletion). Without deletions the list reads as it was. Worked out in one pass, without
/// moving items one deletion at a time.
fn as_go_leaves_it(slots: Vec<Value>, patch: &[Value], key: &str) -> Vec<Value> {
    let deletes = |item: &Value| item.get(DIRECTIVE).and_then(Value::as_str) == Some("delete");
    if !patch.iter().any(deletes) {
        return slots;
    }
    let n = slots.len();
    // The places of each merge key's value, in list order.
    let mut places: HashMap<String, Vec<usize>> = HashMap::new();
    for (place, slot) in slots.iter().enumerate() {
        if let Some(value) = slot.get(key) {
            places.entry(value.to_string()).or_default().push(place);
        }
    }
    let mut removed = vec![false; n];
    // `tail[k]`: what the k-th single deletion left in slot `n - 1 - k`.
    let mut tail: Vec<usize> = Vec::new();
    let mut end = n;
    for item in patch.iter().filter(|item| deletes(item)) {
        let Some(value) = item.get(key) else {
            return slots;
        };
        for place in places.remove(&value.to_string()).unwrap_or_default() {
            while end > 0 && removed[end - 1] {
                end -= 1;
            }
            tail.push(end - 1);
            removed[place] = true;
        }
    }
    let live: Vec<usize> = (0..n).filter(|&place| !removed[place]).collect();
    let mut view: Vec<Value> = live.iter().map(|&place| slots[place].clone()).collect();
    let replaced = patch
        .iter()
        .any(|item| item.get(DIRECTIVE).and_then(Value::as_str) == Some("replace"));
    if !replaced {
        let mut present: HashSet<String> = live
            .iter()
            .filter_map(|&place| slots[place].get(key).map(Value::to_string))
            .collect();
        for item in patch.iter().filter(|item| item.get(DIRECTIVE).is_none()) {
            if view.len() == n {
                break;
            }
            let Some(value) = item.get(key) else {
                break;
            };
            if present.insert(value.to_string()) {
                view.push(item.clone());
            }
        }
    }
    while view.len() < n {
        let k = n - 1 - view.len();
        view.push(slots[tail[k]].clone());
    }
    view
}

/// apimachinery's `validatePatchWithSetOrderList`: the patch's list (its deletions left out)
/// must follow the `$setElementOrder` list's order, every item in it.
fn check_order(
    patch_list: &[Value],
    order: &[Value],
    merge_key: Option<&str>,
) -> Result<(), ApiError> {
    if order.is_empty() || patch_list.is_empty() {
        return Ok(());
    }
    let kept: Vec<&Value> = match merge_key {
        Some(_) => {
            let mut kept = Vec::new();
            for item in patch_list {
                let Value::Object(map) = item else {
                    return Err(bad_arg_type(MAP, item));
                };
                if map.get(DIRECTIVE).and_then(Value::as_str) != Some("delete") {
                    kept.push(item);
                }
            }
            kept
        }
        None => patch_list.iter().collect(),
    };
    let (mut at, mut in_order) = (0, 0);
    while at < kept.len() && in_order < order.len() {
        if kept[at]
            .as_object()
            .is_some_and(|map| map.contains_key(DIRECTIVE))
        {
            at += 1;
            continue;
        }
        if merge_key_value_equal(kept[at], &order[in_order], merge_key)? {
            at += 1;
        }
        in_order += 1;
    }
    if at < kept.len() && in_order >= order.len() {
        return Err(smp_refusal(format!(
            "The order in patch list:\n{}\n doesn't match {SET_ELEMENT_ORDER} list:\n{}\n",
            go_text(&Value::Array(patch_list.to_vec())),
            go_text(&Value::Array(order.to_vec()))
        )));
    }
    Ok(())
}

/// apimachinery's `mergeKeyValueEqual`.
fn merge_key_value_equal(
    left: &Value,
    right: &Value,
    merge_key: Option<&str>,
) -> Result<bool, ApiError> {
    let Some(key) = merge_key else {
        // Go's `==` on two maps or two lists panics.
        if go_type(left) == go_type(right) && (left.is_object() || left.is_array()) {
            return Err(panicked(&format!(
                "runtime error: comparing uncomparable type {}",
                go_type(left)
            )));
        }
        return Ok(left == right);
    };
    let Value::Object(left_map) = left else {
        return Err(bad_arg_type(MAP, left));
    };
    let Value::Object(right_map) = right else {
        return Err(bad_arg_type(MAP, right));
    };
    let Some(left_value) = left_map.get(key) else {
        return Err(no_merge_key(left_map, key));
    };
    let Some(right_value) = right_map.get(key) else {
        return Err(no_merge_key(right_map, key));
    };
    Ok(left_value == right_value)
}

/// apimachinery's `mergeSliceHandler` for a field whose object and patch values are lists.
fn merge_list_field(
    current: Vec<Value>,
    patch: Vec<Value>,
    field: Ty<'_>,
    delete_list: bool,
) -> Result<Vec<Value>, ApiError> {
    let strategy = field_strategy(field)?;
    let merge_key = field.patch_markers().1.filter(|key| !key.is_empty());
    merge_list_with(current, patch, field, strategy, merge_key, delete_list)
}

/// `mergeSliceHandler` with the field's strategy and merge key: a `merge` list (or a
/// deletion list) merged ([`merge_list`]), any other replaced by the patch's, as it is.
fn merge_list_with(
    current: Vec<Value>,
    patch: Vec<Value>,
    field: Ty<'_>,
    strategy: &str,
    merge_key: Option<&str>,
    delete_list: bool,
) -> Result<Vec<Value>, ApiError> {
    if strategy == "merge" || delete_list {
        merge_list(
            current,
            patch,
            field.items_or_self(),
            merge_key,
            delete_list,
        )
    } else {
        Ok(patch)
    }
}

/// apimachinery's `sliceElementType`: the Go type all items of the lists share; 422 for a
/// list of lists (`mergepatch.ErrNoListOfLists`, a sentinel kube answers so), its errors for
/// items of two types or no items, and Go's nil pointer panic for a `null` first item (Go asks
/// the kind of its nil type), which kube-apiserver answers as any panic.
fn element_type(lists: &[&[Value]]) -> Result<&'static str, ApiError> {
    let mut kind = None;
    for item in lists.iter().flat_map(|list| list.iter()) {
        let item_type = go_type(item);
        match kind {
            None if item.is_null() => return Err(panicked(NIL_POINTER)),
            None if item_type == LIST => {
                return Err(unprocessable_smp("lists of lists are not supported"));
            }
            None => kind = Some(item_type),
            Some(kind) if kind != item_type => {
                let lists: Vec<Value> = lists
                    .iter()
                    .map(|list| Value::Array(list.to_vec()))
                    .collect();
                return Err(smp_refusal(format!(
                    "list element types are not identical: {}",
                    go_text(&Value::Array(lists))
                )));
            }
            Some(_) => {}
        }
    }
    kind.ok_or_else(|| smp_refusal("no elements in any of the given slices".to_owned()))
}

/// `NewGenericServerResponse(422, ...)` with apimachinery's error as its cause, as
/// kube-apiserver answers `ErrNoListOfLists` and `ErrPatchContentNotMatchRetainKeys`.
fn unprocessable_smp(message: &str) -> ApiError {
    unprocessable(message)
}

/// apimachinery's `mergeSlice`: a merging list's items merged (maps by `merge_key`, scalars
/// as a set, a deletion list's scalars removed), then ordered ([`element_order`]).
fn merge_list(
    original: Vec<Value>,
    patch: Vec<Value>,
    item_ty: Ty<'_>,
    merge_key: Option<&str>,
    delete_list: bool,
) -> Result<Vec<Value>, ApiError> {
    if original.is_empty() && patch.is_empty() {
        return Ok(original);
    }
    let maps = element_type(&[&original, &patch])? == MAP;
    let (server_order, patch, merged) = if maps {
        let Some(key) = merge_key else {
            // What `PatchMetaFromStruct.Name()` says of the items' Go type.
            return Err(smp_refusal(
                "cannot merge lists without merge key for struct".to_owned(),
            ));
        };
        let (original, patch) = special_items(original, patch, key)?;
        let merged = merge_items(original.clone(), &patch, key, item_ty)?;
        (original, patch, merged)
    } else {
        if delete_list {
            let doomed: HashSet<String> = patch.iter().map(|item| identity(item, None)).collect();
            return Ok(original
                .into_iter()
                .filter(|item| !doomed.contains(&identity(item, None)))
                .collect());
        }
        let mut seen = HashSet::new();
        let merged: Vec<Value> = original
            .iter()
            .chain(&patch)
            .filter(|item| seen.insert(identity(item, None)))
            .cloned()
            .collect();
        (original, patch, merged)
    };
    let (patch_items, server_only) = partition(merged, &patch, merge_key)?;
    element_order(
        patch_items,
        server_only,
        &patch,
        &server_order,
        merge_key,
        maps,
    )
}

/// apimachinery's `mergeSliceWithSpecialElements`: the patch's `$patch` items applied (a
/// `delete` removes every item with its merge key's value, a `replace` makes the patch's
/// other items the list), the object's remaining items and the patch's other items returned.
fn special_items(
    mut original: Vec<Value>,
    patch: Vec<Value>,
    key: &str,
) -> Result<(Vec<Value>, Vec<Value>), ApiError> {
    let mut plain = Vec::with_capacity(patch.len());
    let mut replace = false;
    // The merge key values to delete, gathered first (every item with one goes, whatever the
    // order), so the deletions cost one pass over the list.
    let mut doomed: HashSet<String> = HashSet::new();
    for item in patch {
        let Some(directive) = item.get(DIRECTIVE) else {
            plain.push(item);
            continue;
        };
        match directive.as_str() {
            Some("delete") => {
                let Some(value) = item.get(key) else {
                    return Err(no_merge_key(item.as_object().unwrap_or(&Map::new()), key));
                };
                doomed.insert(value.to_string());
            }
            Some("replace") => replace = true,
            Some("merge") => {
                return Err(smp_refusal(
                    "merging lists cannot yet be specified in the patch".to_owned(),
                ));
            }
            _ => {
                return Err(bad_patch_type(
                    directive,
                    item.as_object().unwrap_or(&Map::new()),
                ));
            }
        }
    }
    if !doomed.is_empty() {
        original.retain(|kept| {
            kept.get(key)
                .is_none_or(|value| !doomed.contains(&value.to_string()))
        });
    }
    Ok(if replace {
        (plain, Vec::new())
    } else {
        (original, plain)
    })
}

/// apimachinery's `mergeSliceWithoutSpecialElements`: each patch item merged into the first
/// item with its merge key's value, or appended as it is.
fn merge_items(
    mut items: Vec<Value>,
    patch: &[Value],
    key: &str,
    item_ty: Ty<'_>,
) -> Result<Vec<Value>, ApiError> {
    // The first item of each merge key's value: each patch item finds its item in constant
    // time, so a patch of a long list merges in linear time (a scan per item took seconds at
    // 16,000 items).
    let mut places: HashMap<String, usize> = HashMap::with_capacity(items.len());
    for (place, item) in items.iter().enumerate() {
        if let Some(value) = item.get(key) {
            places.entry(value.to_string()).or_insert(place);
        }
    }
    for patch_item in patch {
        let Value::Object(patch_map) = patch_item else {
            return Err(bad_arg_type(MAP, patch_item));
        };
        let Some(value) = patch_map.get(key) else {
            return Err(no_merge_key(patch_map, key));
        };
        match places.get(&value.to_string()) {
            Some(&place) => {
                let current = match std::mem::take(&mut items[place]) {
                    Value::Object(map) => map,
                    _ => Map::new(),
                };
                items[place] = Value::Object(merge_map(current, patch_map.clone(), item_ty)?);
            }
            None => {
                places.insert(value.to_string(), items.len());
                items.push(patch_item.clone());
            }
        }
    }
    Ok(items)
}

/// apimachinery's `partitionMapsByPresentInList` (with a merge key) or
/// `partitionPrimitivesByPresentInList`: the items `by` holds, and the others.
fn partition(
    merged: Vec<Value>,
    by: &[Value],
    merge_key: Option<&str>,
) -> Result<(Vec<Value>, Vec<Value>), ApiError> {
    let Some(key) = merge_key else {
        // Go keys a map by the items (`inPatch[v]`), `by`'s first, and panics on a map or a
        // list (`$setElementOrder` of a list of maps without a merge key).
        if let Some(item) = by
            .iter()
            .chain(&merged)
            .find(|item| item.is_object() || item.is_array())
        {
            return Err(panicked(&format!(
                "runtime error: hash of unhashable type {}",
                go_type(item)
            )));
        }
        let present: HashSet<String> = by.iter().map(|item| identity(item, None)).collect();
        return Ok(merged
            .into_iter()
            .partition(|item| present.contains(&identity(item, None))));
    };
    // `findMapInSliceBasedOnKeyValue` scans `by` and fails at its first item that is not a
    // map, unless it matched before it.
    let first_not_map = by.iter().position(|item| !item.is_object());
    let present: HashSet<String> = by[..first_not_map.unwrap_or(by.len())]
        .iter()
        .filter_map(|item| item.get(key).map(Value::to_string))
        .collect();
    let (mut inside, mut outside) = (Vec::new(), Vec::new());
    for item in merged {
        let Value::Object(map) = &item else {
            return Err(bad_arg_type(MAP, &item));
        };
        let Some(value) = map.get(key) else {
            return Err(no_merge_key(map, key));
        };
        if present.contains(&value.to_string()) {
            inside.push(item);
        } else if let Some(place) = first_not_map {
            return Err(smp_refusal(format!("value for key {place} is not a map")));
        } else {
            outside.push(item);
        }
    }
    Ok((inside, outside))
}

/// apimachinery's `normalizeElementOrder`: the patch's items ordered by `patch_order`, the
/// others by `server_order`, then interleaved (`mergeSortedSlice`): an item of the object
/// goes before the next patch item when the object had it before that one.
fn element_order(
    patch_items: Vec<Value>,
    server_only: Vec<Value>,
    patch_order: &[Value],
    server_order: &[Value],
    merge_key: Option<&str>,
    maps: bool,
) -> Result<Vec<Value>, ApiError> {
    let key = if maps { merge_key } else { None };
    let patch_items = sorted_by(patch_items, patch_order, key, maps)?;
    let server_only = sorted_by(server_only, server_order, key, maps)?;
    let places = Places::of(server_order, key);
    let mut out = Vec::with_capacity(patch_items.len() + server_only.len());
    let mut left = server_only.into_iter().peekable();
    let mut right = patch_items.into_iter().peekable();
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(l), Some(r)) => match (places.get(l, key), places.get(r, key)) {
                (Some(l), Some(r)) => l < r,
                _ => false,
            },
        };
        let next = if take_left { left.next() } else { right.next() };
        out.extend(next);
    }
    Ok(out)
}

/// apimachinery's `normalizeSliceOrder`: `items` stably ordered by their place in `order`
/// (for maps: every item of both must have the merge key, and `$patch: delete` items go last).
/// Go's comparison calls an item missing from `order` less than any; every caller's items are
/// all in `order`, so a stable sort by place (missing ones last) is the same order.
fn sorted_by(
    items: Vec<Value>,
    order: &[Value],
    key: Option<&str>,
    maps: bool,
) -> Result<Vec<Value>, ApiError> {
    let mut doomed = Vec::new();
    let mut items = items;
    if maps {
        let merge_key = key.unwrap_or_default();
        for item in items.iter().chain(order) {
            let Value::Object(map) = item else {
                return Err(bad_arg_type(MAP, item));
            };
            if !map.contains_key(merge_key) {
                return Err(no_merge_key(map, merge_key));
            }
        }
        let (kept, deleted): (Vec<Value>, Vec<Value>) = items
            .into_iter()
            .partition(|item| item.get(DIRECTIVE).and_then(Value::as_str) != Some("delete"));
        items = kept;
        doomed = deleted;
    }
    let places = Places::of(order, key);
    items.sort_by_cached_key(|item| places.get(item, key).unwrap_or(usize::MAX));
    items.extend(doomed);
    Ok(items)
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
        // The same from the patch's text, whose values are read again for their literals, and
        // compared as deep.
        let patch = json!([
            {"op": "add", "path": "/top", "value": top},
            {"op": "test", "path": "/top", "value": top}
        ]);
        let body = patch.to_string();
        let sent = json_patch_sent(
            &original,
            &patch,
            Some(body.as_bytes()),
            PatchLimits::default(),
        )
        .unwrap();
        assert_eq!(sent, patched);
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
        // v4 keeps the `null` members within an array that replaces an object, and drops them
        // when it replaces an array: the same patch twice differs.
        let mut target = json!({"a": {}});
        merge_patch(&mut target, json!({"a": [{"b": null}]}));
        assert_eq!(target, json!({"a": [{"b": null}]}));
        merge_patch(&mut target, json!({"a": [{"b": null}]}));
        assert_eq!(target, json!({"a": [{}]}));
        // v4's `ErrBadJSONPatch`: not JSON, `null` or a scalar.
        for body in [&b"{not json"[..], b"null", b"5", b"\"x\"", b"true"] {
            let err = apply_patch(&def("pods"), PatchType::Merge, &pod(), body).unwrap_err();
            assert_eq!(
                (err.code, err.message.as_str()),
                (400, "Invalid JSON Patch")
            );
        }
        // An array is the result, which kube then fails to decode as the kind: 422 on `patch`.
        let err = apply("pods", PatchType::Merge, &pod(), &json!([1])).unwrap_err();
        assert_eq!(err.code, 422);
        assert_eq!(
            err.message,
            format!(
                " \"\" is invalid: patch: Invalid value: \"[1]\": couldn't get version/kind; json parse error: json: cannot unmarshal array into Go value of type {}",
                r#"struct { APIVersion string "json:\"apiVersion,omitempty\""; Kind string "json:\"kind,omitempty\"" }"#
            )
        );
    }

    #[test]
    fn strict_decoding_refusals() {
        let cases = [
            (
                PatchType::Json,
                &br#"{"op": "add"}"#[..],
                Some("json: cannot unmarshal object into Go value of type []handlers.jsonPatchOp"),
            ),
            (
                PatchType::Json,
                b"[null, 5]",
                Some("json: cannot unmarshal number into Go value of type handlers.jsonPatchOp"),
            ),
            (
                PatchType::Json,
                br#"[{"op": 5, "path": "/a"}]"#,
                Some(
                    "json: cannot unmarshal number into Go struct field jsonPatchOp.op of type string",
                ),
            ),
            (
                PatchType::Json,
                br#"[{"op": "add", "path": ["/a"], "value": {}}]"#,
                Some(
                    "json: cannot unmarshal array into Go struct field jsonPatchOp.path of type string",
                ),
            ),
            (PatchType::Json, b"[{", Some("unexpected end of JSON input")),
            (
                PatchType::Json,
                br#"[{"op": "add", "path": null, "value": 5, "Op": 1}]"#,
                None,
            ),
            (PatchType::Json, b"null", None),
            (
                PatchType::Merge,
                b"[1]",
                Some("json: cannot unmarshal array into Go value of type map[string]interface {}"),
            ),
            (
                PatchType::Merge,
                b"5",
                Some("json: cannot unmarshal number into Go value of type map[string]interface {}"),
            ),
            (
                PatchType::Merge,
                b"{x",
                Some("invalid character 'x' looking for beginning of object key string"),
            ),
            (PatchType::Merge, b"null", None),
            (PatchType::Merge, br#"{"a": [1]}"#, None),
            (PatchType::StrategicMerge, b"[1]", None),
        ];
        for (patch_type, body, cause) in cases {
            let refusal = strict_decode_error(patch_type, body);
            let expected = cause.map(|cause| format!("error decoding patch: {cause}"));
            assert_eq!(
                refusal.as_ref().map(|error| error.code),
                expected.as_ref().map(|_| 400),
                "{body:?}"
            );
            assert_eq!(refusal.map(|error| error.message), expected, "{body:?}");
        }
    }

    #[test]
    fn a_custom_resources_json_patch_tests_literals_and_places_read_back_numbers() {
        let mut custom = def("configmaps");
        custom.group = "example.com".into();
        assert!(!custom.is_builtin());
        let original = json!({"metadata": {"name": "a"}, "spec": {"n": 1}});
        let patch = |body: &str| apply_patch(&custom, PatchType::Json, &original, body.as_bytes());
        // `test` compares the literal sent with the stored number as Go writes it.
        let err = patch(r#"[{"op": "test", "path": "/spec/n", "value": 1.0}]"#).unwrap_err();
        assert_eq!(err.code, 422);
        assert!(patch(r#"[{"op": "test", "path": "/spec/n", "value": 1}]"#).is_ok());
        // What is placed is what the store reads back: `2.0` is 2, `1.5` stays a float.
        let out = patch(
            r#"[{"op": "add", "path": "/spec/m", "value": [2.0, 1.5, 12345678901234567890]}]"#,
        )
        .unwrap();
        assert_eq!(
            out["spec"]["m"],
            json!([2, 1.5, 12_345_678_901_234_567_000.0])
        );
        assert!(out["spec"]["m"][0].is_i64());
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
            {"op": "test", "path": "/moved/0", "value": 10}
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
        // 400: v4's `DecodePatch` (Go's decoding errors).
        let cases = [
            (
                &br#"{"op": "add"}"#[..],
                "json: cannot unmarshal object into Go value of type jsonpatch.Patch",
            ),
            (
                b"[5]",
                "json: cannot unmarshal number into Go value of type jsonpatch.Operation",
            ),
            (
                b"[{}, []]",
                "json: cannot unmarshal array into Go value of type jsonpatch.Operation",
            ),
            (b"[{", "unexpected end of JSON input"),
            (
                b"[}",
                "invalid character '}' looking for beginning of value",
            ),
        ];
        for (body, message) in cases {
            let err =
                apply_patch(&def("configmaps"), PatchType::Json, &original, body).unwrap_err();
            assert_eq!((err.code, err.message.as_str()), (400, message), "{body:?}");
        }
        // 422: v4's `Apply`, its error as the one cause under kube's generic message.
        let cases = [
            (
                json!([{"op": "add", "path": "/x/y", "value": 1}]),
                r#"add operation does not apply: doc is missing path: "/x/y": missing value"#,
            ),
            (
                json!([{"op": "remove", "path": "/nope"}]),
                "error in remove for path: '/nope': Unable to remove nonexistent key: nope: missing value",
            ),
            (
                json!([{"op": "test", "path": "/a/b", "value": 2}]),
                "testing value /a/b failed: test failed",
            ),
            (
                json!([{"op": "frob", "path": "/x"}]),
                "Unexpected kind: frob",
            ),
            (json!([{"path": "/x"}]), "Unexpected kind: unknown"),
            (
                json!([{"op": "add", "path": "/l/5", "value": 1}]),
                "error in add for path: '/l/5': Unable to access invalid index: 5: invalid index referenced",
            ),
            (
                json!([{"op": "move", "from": "/a", "path": "/a/b/c"}]),
                "move operation does not apply: doc is missing destination path: /a/b/c: missing value",
            ),
            (
                json!([{"op": "replace", "path": "", "value": 5}]),
                "replace operation value must be object or array: %!w(<nil>)",
            ),
            (
                json!([{"op": "replace", "path": 5, "value": 1}]),
                "replace operation failed to decode path: json: cannot unmarshal number into Go value of type string",
            ),
        ];
        for (patch, cause) in cases {
            let err = apply("configmaps", PatchType::Json, &original, &patch).unwrap_err();
            assert_eq!(err.code, 422, "{patch}: {}", err.message);
            assert_eq!(
                err.message,
                "the server rejected our request due to an error in our request"
            );
            assert_eq!(
                err.details.as_ref().unwrap()["causes"][0]["message"],
                cause,
                "{patch}"
            );
        }
        // Where v4 panics, kube-apiserver's panic recovery answers 500.
        for patch in [
            json!([{"op": "replace", "path": ""}]),
            json!([{"op": "test", "path": ""}]),
            json!([{"op": "test", "path": "/n", "value": [null]}]),
        ] {
            let original = json!({"n": [null]});
            let err = apply("configmaps", PatchType::Json, &original, &patch).unwrap_err();
            assert_eq!(err.code, 500, "{patch}");
            assert_eq!(
                err.message,
                "This request caused apiserver to panic. Look in the logs for details."
            );
        }
        // A JSON patch that replaces the object with an array: kube fails to decode it, 422.
        let err = apply(
            "configmaps",
            PatchType::Json,
            &original,
            &json!([{"op": "replace", "path": "", "value": [1]}]),
        )
        .unwrap_err();
        assert_eq!(err.code, 422);
        assert!(
            err.message.starts_with(
                " \"\" is invalid: patch: Invalid value: \"[1]\": couldn't get version/kind"
            ),
            "{}",
            err.message
        );
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
        // Decoding comes first, as `DecodePatch` runs before kube counts the operations.
        let mut many = many;
        many.as_array_mut().unwrap().push(json!(5));
        assert_eq!(
            apply("configmaps", PatchType::Json, &original, &many)
                .unwrap_err()
                .code,
            400
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
        // apimachinery's order: the patch's items in its order, the object's other items
        // placed before a patch item only where the object had them before it (`new` is
        // not in the object, so `sidecar` goes last).
        assert_eq!(containers[1], json!({"name": "new", "image": "busybox"}));
        assert_eq!(containers[2]["name"], "sidecar");
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
        // The `replace` item is left out whatever else it holds, as apimachinery leaves it.
        let replace_list = json!({"spec": {"containers": [
            {"$patch": "replace", "name": "gone", "image": "y"}, {"name": "solo", "image": "x"}]}});
        let out = apply("pods", PatchType::StrategicMerge, &pod(), &replace_list).unwrap();
        assert_eq!(
            out["spec"]["containers"],
            json!([{"name": "solo", "image": "x"}])
        );

        // A map's `$patch: delete` leaves it empty, as apimachinery's `mergeMap` does (the Go
        // struct normalisation drops an `omitempty` map field so left; `spec` is a struct).
        let delete_map = json!({"spec": {"$patch": "delete"}});
        let out = apply("pods", PatchType::StrategicMerge, &pod(), &delete_map).unwrap();
        assert_eq!(out["spec"], json!({}));
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
        // The patch's items in its order (`b` deleted whichever goes first).
        assert_eq!(out["metadata"]["finalizers"], json!(["c", "a"]));
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
        // apimachinery's texts (`mergepatch`'s errors) and kube-apiserver's codes: 400 for
        // the decoding error and the retainKeys sentinel, 500 for the errors without a status.
        let cases = [
            (
                json!([1]),
                "json: cannot unmarshal array into Go value of type map[string]interface {}",
            ),
            (
                json!({"spec": {"$patch": "explode", "x": 1}}),
                "unknown patch type: explode in map: map[$patch:explode x:1]",
            ),
            (
                json!({"spec": {"$patch": 5}}),
                "unknown patch type: %!s(int64=5) in map: map[$patch:5]",
            ),
            (
                json!({"spec": {"containers": [{"$patch": "explode", "name": "web"}]}}),
                "unknown patch type: explode in map: map[$patch:explode name:web]",
            ),
            (
                json!({"spec": {"containers": [{"image": "x", "ports": [{"containerPort": 80}]}]}}),
                "map: map[image:x ports:[map[containerPort:80]]] does not contain declared merge key: name",
            ),
            (
                json!({"spec": {"$retainKeys": "x"}}),
                "invalid patch format of retainKeys",
            ),
            (
                json!({"spec": {"$retainKeys": ["a"], "b": 1, "c": null}}),
                "invalid patch format of retainKeys",
            ),
            (
                json!({"spec": {"$setElementOrder/containers": "web"}}),
                "expected a []interface {}, but received a string",
            ),
            (
                json!({"spec": {"$patch": "merge", "x": 1}}),
                "unknown patch type: merge in map: map[$patch:merge x:1]",
            ),
            (
                json!({"spec": {"containers": [{"$patch": "merge", "name": "web"}]}}),
                "merging lists cannot yet be specified in the patch",
            ),
        ];
        for (patch, text) in cases {
            let err = apply("pods", PatchType::StrategicMerge, &pod(), &patch).unwrap_err();
            let code = if text.starts_with("json:") || text.contains("retainKeys") {
                400
            } else {
                500
            };
            assert_eq!((err.code, err.message.as_str()), (code, text), "{patch}");
            if code == 500 {
                assert_eq!(err.reason, "", "{patch}");
            }
        }
        // Items of another type than the object's in a merging list: apimachinery's
        // `sliceElementType` error, 500; a list of lists there, its sentinel kube answers 422.
        let err = apply(
            "pods",
            PatchType::StrategicMerge,
            &pod(),
            &json!({"spec": {"containers": ["web"]}}),
        )
        .unwrap_err();
        assert_eq!((err.code, err.reason.as_str()), (500, ""));
        assert!(
            err.message
                .starts_with("list element types are not identical: [[map[")
                && err.message.ends_with("] [web]]"),
            "{}",
            err.message
        );
        assert!(is_kube_patch_500(&err));
        let mut no_finalizers = pod();
        no_finalizers["metadata"]["finalizers"] = json!([]);
        let err = apply(
            "pods",
            PatchType::StrategicMerge,
            &no_finalizers,
            &json!({"metadata": {"finalizers": [["a"]]}}),
        )
        .unwrap_err();
        assert_eq!((err.code, err.reason.as_str()), (422, "Invalid"));
        assert_eq!(
            err.details.unwrap()["causes"][0]["message"],
            "lists of lists are not supported"
        );
        // A `$setElementOrder` of a list of maps without a merge key: Go hashes its items
        // (and compares them with the patch's list's, when there is one) and panics, which
        // kube-apiserver's panic recovery answers.
        for (patch, cause) in [
            (
                json!({"spec": {"$setElementOrder/tolerations": [{"key": "x"}]}}),
                "runtime error: hash of unhashable type map[string]interface {}",
            ),
            (
                json!({"spec": {"$setElementOrder/tolerations": [{"key": "x"}],
                    "tolerations": [{"key": "x"}]}}),
                "runtime error: comparing uncomparable type map[string]interface {}",
            ),
        ] {
            let err = apply("pods", PatchType::StrategicMerge, &pod(), &patch).unwrap_err();
            assert!(
                is_json_patch_panic(&err) && is_kube_patch_500(&err),
                "{err:?}"
            );
            assert_eq!(err.details.unwrap()["causes"][0]["message"], cause);
        }
        // A root `$patch: delete` leaves `{}`, as apimachinery's `mergeMap` does (the write
        // path then refuses the nameless object as kube's `checkName` does).
        let out = apply(
            "pods",
            PatchType::StrategicMerge,
            &pod(),
            &json!({"$patch": "delete"}),
        )
        .unwrap();
        assert_eq!(out, json!({}));
        // Not JSON: Go's error; `null`: no change; a `$retainKeys` listing the patch's keys
        // keeps only those.
        let err = apply_patch(&def("pods"), PatchType::StrategicMerge, &pod(), b"{x").unwrap_err();
        assert_eq!(
            (err.code, err.message.as_str()),
            (
                400,
                "invalid character 'x' looking for beginning of object key string"
            )
        );
        assert_eq!(
            apply_patch(&def("pods"), PatchType::StrategicMerge, &pod(), b"null").unwrap(),
            pod()
        );
        let out = apply(
            "pods",
            PatchType::StrategicMerge,
            &pod(),
            &json!({"metadata": {"$retainKeys": ["name", 5], "name": "a", "gone": null}}),
        )
        .unwrap();
        assert_eq!(out["metadata"], json!({"name": "a"}));
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
                    ty.items_or_self()
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
        assert_eq!(
            field_strategy(ty_at("poddisruptionbudgets", "spec.selector")).unwrap(),
            "replace"
        );
        assert_eq!(
            field_strategy(ty_at("deployments", "spec.selector")).unwrap(),
            ""
        );
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

        /// Whether an object within an array of `value` has a `null` member: v4's merge patch
        /// drops it where it places the array whole, this strategic merge keeps it.
        fn null_in_listed_object(value: &Value) -> bool {
            fn within(value: &Value, listed: bool) -> bool {
                match value {
                    Value::Object(map) => map
                        .values()
                        .any(|member| (listed && member.is_null()) || within(member, listed)),
                    Value::Array(items) => items.iter().any(|item| within(item, true)),
                    _ => false,
                }
            }
            within(value, false)
        }

        /// Go's slice operations on the object's list, one at a time, as `mergeSlice` runs
        /// them in place: each `$patch: delete` item's `deleteMatchingEntries` (the first
        /// match removed by `append(s[:k], s[k+1:]...)` until none is left), then, unless a
        /// `replace` item made a new list, `mergeSliceWithoutSpecialElements`' appends; what
        /// the object's slice (its length unchanged) then holds.
        fn go_in_place(mut slots: Vec<Value>, patch: &[Value], key: &str) -> Vec<Value> {
            let n = slots.len();
            let mut len = n;
            for item in patch {
                if item.get(DIRECTIVE) != Some(&json!("delete")) {
                    continue;
                }
                let value = &item[key];
                while let Some(at) = slots[..len]
                    .iter()
                    .position(|slot| slot.get(key) == Some(value))
                {
                    for place in at..len - 1 {
                        slots[place] = slots[place + 1].clone();
                    }
                    len -= 1;
                }
            }
            if patch
                .iter()
                .any(|item| item.get(DIRECTIVE) == Some(&json!("replace")))
            {
                return slots;
            }
            let mut beyond: Vec<Value> = Vec::new();
            for item in patch.iter().filter(|item| item.get(DIRECTIVE).is_none()) {
                let value = &item[key];
                let present = slots[..len.min(n)]
                    .iter()
                    .chain(&beyond)
                    .any(|slot| slot.get(key) == Some(value));
                if present {
                    continue;
                }
                if len < n {
                    slots[len] = item.clone();
                } else {
                    beyond.push(item.clone());
                }
                len += 1;
            }
            slots
        }

        /// A list of maps keyed by `name` (few names, so repeated), with an `i` telling apart
        /// items of one name.
        fn arb_keyed_list() -> impl Strategy<Value = Vec<Value>> {
            prop::collection::vec((0..5u8, any::<u8>()), 0..9).prop_map(|items| {
                items
                    .into_iter()
                    .map(|(name, i)| json!({"name": name.to_string(), "i": i}))
                    .collect()
            })
        }

        /// A patch list for it: plain items, `$patch: delete` items, now and then a
        /// `$patch: replace` one.
        fn arb_keyed_patch() -> impl Strategy<Value = Vec<Value>> {
            prop::collection::vec((0..7u8, 0..8u8), 0..8).prop_map(|items| {
                items
                    .into_iter()
                    .map(|(name, what)| match what {
                        0..=3 => json!({"name": name.to_string(), "p": what}),
                        4..=6 => json!({"name": name.to_string(), "$patch": "delete"}),
                        _ => json!({"$patch": "replace"}),
                    })
                    .collect()
            })
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

            /// Goal: the one-pass reading of the object's list after Go's in-place merge
            /// (`as_go_leaves_it`) is what Go's slice operations, run one at a time, leave.
            #[test]
            fn go_s_in_place_list_read_in_one_pass(
                list in arb_keyed_list(), patch in arb_keyed_patch()
            ) {
                prop_assert_eq!(
                    as_go_leaves_it(list.clone(), &patch, "name"),
                    go_in_place(list, &patch, "name")
                );
            }

            #[test]
            fn strategic_patch_on_unkeyed_fields_is_merge_patch(
                original in arb_plain_object(), patch in arb_plain_object()
            ) {
                // Outside keyed lists and without `$` keys the two agree (but for the `null`
                // members of objects in lists, which v4's merge patch drops).
                prop_assume!(!null_in_listed_object(&patch));
                let smp = strategic_merge_patch(&original, &patch, Ty::deduced()).unwrap();
                let mut merged = original.clone();
                merge_patch(&mut merged, patch);
                prop_assert_eq!(smp, merged);
            }
        }
    }
}

#[cfg(test)]
#[path = "patch_v4_tests.rs"]
mod v4_tests;

#[cfg(test)]
#[path = "patch_smp_tests.rs"]
mod smp_tests;

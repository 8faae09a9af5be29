//! Query parameters of list, get and watch requests, parsed and validated the way
//! kube-apiserver does, with clear 4xx errors, and the continue tokens of paged lists.
//!
//! Selectors: `labelSelector` and `fieldSelector` are parsed by the core exactly as kube's
//! `labels.Parse` and `fields.ParseSelector` parse them, and a refusal is kube-apiserver's 400
//! BadRequest whose message is the parser's text as is (`DecodeParameters` →
//! `errors.NewBadRequest(err.Error())`); the first of repeated parameters counts, the label
//! selector's error comes before the field selector's, and both before the checks of the other
//! options (`resourceVersion`, `resourceVersionMatch`), as kube decodes before it validates.
//!
//! Nothing here panics on any input (the fuzz crate's `query_params` and `continue_token`
//! targets and the server's property tests in `tests/query_props.rs` check it).

use crate::ApiError;
use base64::Engine as _;
use watchkeeper_core::{FieldSelector, LabelSelector, Revision};

/// `resourceVersion` as sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResourceVersion {
    /// Unset or empty: the most recent (a consistent read).
    Latest,
    /// `"0"`: any, the cache as it is.
    Any,
    /// A specific revision.
    At(Revision),
}

/// `resourceVersionMatch`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Match {
    /// `NotOlderThan`.
    NotOlderThan,
    /// `Exact`.
    Exact,
}

/// The options of a list, get or watch.
#[derive(Clone, Debug)]
pub struct Options {
    /// `labelSelector`.
    pub labels: LabelSelector,
    /// `labelSelector` as sent (for operators).
    pub label_selector_text: String,
    /// `fieldSelector`.
    pub fields: FieldSelector,
    /// `resourceVersion`.
    pub resource_version: ResourceVersion,
    /// `resourceVersionMatch`.
    pub resource_version_match: Option<Match>,
    /// `limit` (0 = none).
    pub limit: usize,
    /// `continue`.
    pub continue_token: Option<String>,
    /// `watch=true` (or the `/watch/` path).
    pub watch: bool,
    /// `allowWatchBookmarks`.
    pub allow_bookmarks: bool,
    /// `sendInitialEvents`.
    pub send_initial_events: Option<bool>,
    /// `timeoutSeconds`.
    pub timeout_seconds: Option<u64>,
}

/// A boolean query parameter as kube-apiserver converts it (apimachinery's string-to-bool
/// conversion): `false` in any case and `0` are false, every other value, the empty one
/// included, is true (client-python sends `watch=True`). Never a refusal.
fn parse_bool(value: &str) -> bool {
    !(value == "0" || value.eq_ignore_ascii_case("false"))
}

impl Options {
    /// Parses a raw query string. Unknown parameters are ignored, as Kubernetes does.
    ///
    /// # Errors
    /// 400 BadRequest naming the parameter.
    pub fn parse(query: Option<&str>) -> Result<Options, ApiError> {
        let pairs: Vec<(String, String)> = match query {
            Some(query) => serde_urlencoded::from_str(query)
                .map_err(|e| ApiError::bad_request(format!("invalid query string: {e}")))?,
            None => Vec::new(),
        };
        let mut options = Options {
            labels: LabelSelector::everything(),
            label_selector_text: String::new(),
            fields: FieldSelector::everything(),
            resource_version: ResourceVersion::Latest,
            resource_version_match: None,
            limit: 0,
            continue_token: None,
            watch: false,
            allow_bookmarks: false,
            send_initial_events: None,
            timeout_seconds: None,
        };
        // kube-apiserver decodes the query into a `v1.ListOptions` first (numbers parsed there),
        // then converts it, parsing the label selector and then the field selector
        // (`labels.Parse`, `fields.ParseSelector`: their errors are the 400's message as is);
        // every check of the options comes later. A repeated selector counts once, the first.
        let mut label_text: Option<String> = None;
        let mut field_text: Option<String> = None;
        let mut later: Option<ApiError> = None;
        for (name, value) in pairs {
            match name.as_str() {
                "labelSelector" => {
                    label_text.get_or_insert(value);
                }
                "fieldSelector" => {
                    field_text.get_or_insert(value);
                }
                "resourceVersion" => {
                    options.resource_version = match value.as_str() {
                        "" => ResourceVersion::Latest,
                        "0" => ResourceVersion::Any,
                        other => match other.parse() {
                            Ok(revision) => ResourceVersion::At(revision),
                            Err(_) => {
                                later.get_or_insert(ApiError::bad_request(format!(
                                    "invalid resource version {other:?}: a resource version is a non-negative integer"
                                )));
                                continue;
                            }
                        },
                    };
                }
                "resourceVersionMatch" => {
                    options.resource_version_match = match value.as_str() {
                        "" => None,
                        "NotOlderThan" => Some(Match::NotOlderThan),
                        "Exact" => Some(Match::Exact),
                        other => {
                            later.get_or_insert(ApiError::invalid_options(
                                "ListOptions",
                                vec![(
                                    "resourceVersionMatch".to_owned(),
                                    format!(
                                        "Unsupported value: {other:?}: supported values: \"Exact\", \"NotOlderThan\", \"\""
                                    ),
                                    "FieldValueNotSupported".to_owned(),
                                )],
                            ));
                            continue;
                        }
                    };
                }
                "limit" => {
                    let limit: i64 = value.parse().map_err(|_| {
                        ApiError::bad_request(format!(
                            "invalid limit {value:?}: expected an integer"
                        ))
                    })?;
                    options.limit = usize::try_from(limit.max(0)).unwrap_or(0);
                }
                "continue" if !value.is_empty() => {
                    options.continue_token = Some(value);
                }
                "watch" => options.watch = parse_bool(&value),
                "allowWatchBookmarks" => {
                    options.allow_bookmarks = parse_bool(&value);
                }
                "sendInitialEvents" => {
                    options.send_initial_events = Some(parse_bool(&value));
                }
                "timeoutSeconds" => {
                    let seconds: i64 = value.parse().map_err(|_| {
                        ApiError::bad_request(format!(
                            "invalid timeoutSeconds {value:?}: expected an integer"
                        ))
                    })?;
                    if seconds > 0 {
                        options.timeout_seconds = Some(u64::try_from(seconds).unwrap_or(u64::MAX));
                    }
                }
                _ => {}
            }
        }
        if let Some(text) = label_text {
            options.labels =
                LabelSelector::parse(&text).map_err(|e| ApiError::bad_request(e.message))?;
            options.label_selector_text = text;
        }
        if let Some(text) = field_text {
            options.fields =
                FieldSelector::parse(&text).map_err(|e| ApiError::bad_request(e.message))?;
        }
        match later {
            Some(error) => Err(error),
            None => Ok(options),
        }
    }

    /// Validates the options of a LIST like kube-apiserver (`ValidateListOptions` without
    /// `watch`): `resourceVersionMatch` needs a `resourceVersion`, is forbidden with `continue`,
    /// and `Exact` is forbidden for `resourceVersion=0`; `sendInitialEvents` is forbidden for a
    /// list. Every failure is a cause of one 422 on `ListOptions.meta.k8s.io`.
    ///
    /// # Errors
    /// The 422 described.
    pub fn validate_list(&self) -> Result<(), ApiError> {
        let mut causes = Vec::new();
        let mut forbid = |field: &str, message: &str| {
            causes.push((
                field.to_owned(),
                format!("Forbidden: {message}"),
                "FieldValueForbidden".to_owned(),
            ));
        };
        if let Some(matched) = self.resource_version_match {
            if self.resource_version == ResourceVersion::Latest {
                forbid(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden unless resourceVersion is provided",
                );
            }
            if self.continue_token.is_some() {
                forbid(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden when continue is provided",
                );
            }
            if matched == Match::Exact && self.resource_version == ResourceVersion::Any {
                forbid(
                    "resourceVersionMatch",
                    "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                );
            }
        }
        if self.send_initial_events.is_some() {
            forbid(
                "sendInitialEvents",
                "sendInitialEvents is forbidden for list",
            );
        }
        if causes.is_empty() {
            Ok(())
        } else {
            Err(ApiError::invalid_options("ListOptions", causes))
        }
    }

    /// Validates and defaults the options of a watch like kube-apiserver
    /// (`validateWatchOptions`, `SetListOptionsDefaults` with WatchList on).
    ///
    /// # Errors
    /// 422 Invalid for the combinations Kubernetes rejects.
    pub fn validate_watch(&mut self, resource: &str) -> Result<(), ApiError> {
        let invalid = |field: &str, message: &str| invalid_option(resource, field, message);
        if self.send_initial_events.is_none()
            && self.resource_version_match.is_none()
            && matches!(
                self.resource_version,
                ResourceVersion::Latest | ResourceVersion::Any
            )
        {
            self.send_initial_events = Some(true);
            self.resource_version_match = Some(Match::NotOlderThan);
        }
        match (self.send_initial_events, self.resource_version_match) {
            (Some(_), None) => Err(invalid(
                "sendInitialEvents",
                "sendInitialEvents is forbidden for watch unless resourceVersionMatch is set to NotOlderThan",
            )),
            (None, Some(_)) => Err(invalid(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
            )),
            (Some(_), Some(Match::Exact)) => Err(invalid(
                "resourceVersionMatch",
                "resourceVersionMatch must be NotOlderThan for watch with sendInitialEvents",
            )),
            _ if self.continue_token.is_some() && self.resource_version_match.is_some() => {
                Err(invalid(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden when continue is provided",
                ))
            }
            _ => Ok(()),
        }
    }
}

/// 422 Invalid for a bad combination of list options, shaped like Kubernetes' answer.
/// The options kind of a write, named in a refused `dryRun` (`CreateOptions`, `UpdateOptions`,
/// `PatchOptions`, `DeleteOptions`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteOptionsKind {
    /// POST.
    Create,
    /// PUT.
    Update,
    /// PATCH (apply included).
    Patch,
    /// DELETE of one object or a collection.
    Delete,
}

impl WriteOptionsKind {
    /// The Go kind (`CreateOptions`, ...).
    #[must_use]
    pub fn kind(self) -> &'static str {
        match self {
            WriteOptionsKind::Create => "CreateOptions",
            WriteOptionsKind::Update => "UpdateOptions",
            WriteOptionsKind::Patch => "PatchOptions",
            WriteOptionsKind::Delete => "DeleteOptions",
        }
    }
}

/// Go's `%#v` of a `[]string` (`[]string{"a", "b"}`), as kube-apiserver quotes a refused value.
fn go_string_slice(values: &[String]) -> String {
    let quoted: Vec<String> = values.iter().map(|v| format!("{v:?}")).collect();
    format!("[]string{{{}}}", quoted.join(", "))
}

/// The options of a write, from its query (and, for a delete, its body's `DeleteOptions`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WriteOptions {
    /// `dryRun=All`.
    pub dry_run: bool,
    /// `fieldManager`, when given.
    pub field_manager: Option<String>,
    /// `force=true` (server-side apply only).
    pub force: bool,
    /// `fieldValidation` (create, update, patch): what happens to fields the kind does not
    /// declare.
    pub field_validation: FieldValidation,
}

/// `fieldValidation`: what a write does with fields its kind's schema does not declare
/// (kube-apiserver's server-side field validation). Those fields are never stored.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FieldValidation {
    /// Dropped silently.
    Ignore,
    /// Dropped, each named in a `Warning` header (the default, as in kube-apiserver).
    #[default]
    Warn,
    /// The write is refused (400 `... strict decoding error: unknown field "spec.x"` for a
    /// create or update body, 422 on the field `patch` for a patch, 400 `error strict
    /// decoding YAML: ...` for an apply body's repeated keys).
    Strict,
}

/// kube-apiserver's longest `fieldManager` (`FieldManagerMaxLength`).
pub const FIELD_MANAGER_MAX_BYTES: usize = 128;

/// Parses and validates a write's options as kube-apiserver does
/// (`ValidateCreateOptions`, `ValidateUpdateOptions`, `ValidatePatchOptions`,
/// `ValidateDeleteOptions`), every failure a cause of one 422 Invalid on the options kind, in
/// kube-apiserver's order and words:
/// - an apply patch needs `fieldManager` (`fieldManager: Required value: is required for apply
///   patch`); any other patch may not set `force` (`force: Forbidden: may not be specified for
///   non-apply patch`);
/// - `fieldManager` is at most [`FIELD_MANAGER_MAX_BYTES`] bytes of printable characters;
/// - `fieldValidation` (not on deletes): `Ignore`, `Warn` (also when empty or absent) or
///   `Strict`, anything else `fieldValidation: Unsupported value: "x": supported values: "",
///   "Ignore", "Strict", "Warn"`;
/// - `dryRun`: the values of every `dryRun` pair and of `body_dry_run`; none is a real write,
///   `All` (only) a dry run, anything else `dryRun: Unsupported value: []string{"x"}:
///   supported values: "All"`.
///
/// # Errors
/// 422 as described; 400 for a query that does not parse or a `force` that is not a boolean.
pub fn write_options(
    query: Option<&str>,
    body_dry_run: &[String],
    kind: WriteOptionsKind,
    apply: bool,
) -> Result<WriteOptions, ApiError> {
    let pairs: Vec<(String, String)> = match query {
        Some(query) => serde_urlencoded::from_str(query)
            .map_err(|e| ApiError::bad_request(format!("invalid query string: {e}")))?,
        None => Vec::new(),
    };
    let mut dry_run: Vec<String> = Vec::new();
    let mut options = WriteOptions::default();
    let mut force_given = false;
    let mut field_validation: Option<String> = None;
    for (name, value) in pairs {
        match name.as_str() {
            "dryRun" => dry_run.push(value),
            "fieldManager" => options.field_manager = Some(value),
            "fieldValidation" if kind != WriteOptionsKind::Delete => field_validation = Some(value),
            "force" => {
                force_given = true;
                options.force = parse_bool(&value);
            }
            _ => {}
        }
    }
    dry_run.extend(body_dry_run.iter().cloned());
    let manager = options.field_manager.clone().unwrap_or_default();
    let mut causes: Vec<(String, String, String)> = Vec::new();
    if kind == WriteOptionsKind::Patch {
        if apply && manager.is_empty() {
            causes.push((
                "fieldManager".to_owned(),
                "Required value: is required for apply patch".to_owned(),
                "FieldValueRequired".to_owned(),
            ));
        }
        if !apply && force_given {
            causes.push((
                "force".to_owned(),
                "Forbidden: may not be specified for non-apply patch".to_owned(),
                "FieldValueForbidden".to_owned(),
            ));
        }
    }
    if manager.len() > FIELD_MANAGER_MAX_BYTES {
        causes.push((
            "fieldManager".to_owned(),
            format!("Too long: may not be more than {FIELD_MANAGER_MAX_BYTES} bytes"),
            "FieldValueTooLong".to_owned(),
        ));
    }
    for (position, c) in manager.char_indices() {
        if c.is_control() {
            causes.push((
                "fieldManager".to_owned(),
                format!(
                    "Invalid value: {manager:?}: invalid character U+{:04X} (at position {position})",
                    u32::from(c)
                ),
                "FieldValueInvalid".to_owned(),
            ));
        }
    }
    if !dry_run.is_empty() {
        if dry_run.iter().all(|v| v == "All") {
            options.dry_run = true;
        } else {
            causes.push((
                "dryRun".to_owned(),
                format!(
                    "Unsupported value: {}: supported values: \"All\"",
                    go_string_slice(&dry_run)
                ),
                "FieldValueNotSupported".to_owned(),
            ));
        }
    }
    match field_validation.as_deref() {
        None | Some("" | "Warn") => options.field_validation = FieldValidation::Warn,
        Some("Ignore") => options.field_validation = FieldValidation::Ignore,
        Some("Strict") => options.field_validation = FieldValidation::Strict,
        Some(other) => causes.push((
            "fieldValidation".to_owned(),
            format!(
                "Unsupported value: {other:?}: supported values: \"\", \"Ignore\", \"Strict\", \"Warn\""
            ),
            "FieldValueNotSupported".to_owned(),
        )),
    }
    if causes.is_empty() {
        return Ok(options);
    }
    Err(ApiError::invalid_options(kind.kind(), causes))
}

/// Whether a write is a dry run ([`write_options`] of a write that is not an apply).
///
/// # Errors
/// As [`write_options`].
pub fn dry_run(
    query: Option<&str>,
    body_values: &[String],
    kind: WriteOptionsKind,
) -> Result<bool, ApiError> {
    write_options(query, body_values, kind, false).map(|options| options.dry_run)
}

fn invalid_option(resource: &str, field: &str, message: &str) -> ApiError {
    ApiError {
        code: 422,
        reason: "Invalid".to_owned(),
        message: format!("ListOptions.meta.k8s.io \"\" is invalid: {field}: Forbidden: {message}"),
        details: Some(serde_json::json!({
            "kind": "ListOptions",
            "group": "meta.k8s.io",
            "causes": [{"reason": "FieldValueForbidden", "message": format!("Forbidden: {message}"), "field": field}],
            "resource": resource,
        })),
        retry_after_seconds: None,
        extra: None,
    }
}

/// Whether a continue token's start key is one path with nothing to clean, as kube's
/// `DecodeContinue` demands against path traversal (`path.Clean("/" + key)` must give it back):
/// no empty, `.` or `..` segment, no trailing `/`. Every key this server issues (`name`,
/// `namespace/name`) is one; a forged `../../secrets/` is not, and its token is a 400; nor is
/// an empty key (kube's `encoded start key empty`).
#[must_use]
pub fn is_clean_key(key: &str) -> bool {
    let Some(key) = (!key.is_empty()).then(|| key.strip_prefix('/').unwrap_or(key)) else {
        return false;
    };
    key.is_empty()
        || key
            .split('/')
            .all(|segment| !matches!(segment, "" | "." | ".."))
}

/// A continue token: the snapshot revision and the last key served.
#[derive(Debug, PartialEq, Eq)]
pub struct ContinueToken {
    /// The revision every page is served at; `None` (`"rv":-1`, kube-apiserver's encoding) for
    /// a token that goes on at the latest revision, as a 410 for an expired token offers.
    pub revision: Option<Revision>,
    /// The last key of the previous page.
    pub start_after: String,
}

impl ContinueToken {
    /// Encodes as Kubernetes does: unpadded URL-safe base64 of a small JSON document.
    #[must_use]
    pub fn encode(&self) -> String {
        let rv = self
            .revision
            .map_or(-1, |revision| i64::try_from(revision).unwrap_or(i64::MAX));
        let doc = serde_json::json!({"v": "meta.k8s.io/v1", "rv": rv, "start": self.start_after});
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(doc.to_string())
    }

    /// Decodes and validates a token as kube's `DecodeContinue` does: any negative `rv` is the
    /// latest revision, and every refusal is its error in the etcd store's frame, `invalid
    /// continue token: continue key is not valid...` (a token this server issued before with
    /// `=` padding still decodes).
    ///
    /// # Errors
    /// 400 BadRequest for anything that is not a token (see above).
    pub fn decode(token: &str) -> Result<ContinueToken, ApiError> {
        let bad = |cause: &str| {
            let sep = if cause.is_empty() { "" } else { ": " };
            ApiError::bad_request(format!(
                "invalid continue token: continue key is not valid{sep}{cause}"
            ))
        };
        // Go's `base64.RawURLEncoding` (not strict: trailing bits are ignored).
        const RAW_URL: base64::engine::GeneralPurpose = base64::engine::GeneralPurpose::new(
            &base64::alphabet::URL_SAFE,
            base64::engine::GeneralPurposeConfig::new()
                .with_encode_padding(false)
                .with_decode_allow_trailing_bits(true)
                .with_decode_padding_mode(base64::engine::DecodePaddingMode::RequireNone),
        );
        let unpadded = token.trim_end_matches('=');
        let raw = RAW_URL.decode(unpadded).map_err(|error| {
            let at = match error {
                base64::DecodeError::InvalidByte(at, _)
                | base64::DecodeError::InvalidLastSymbol(at, _) => at,
                base64::DecodeError::InvalidLength(_) | base64::DecodeError::InvalidPadding => {
                    unpadded.len().saturating_sub(1)
                }
            };
            bad(&format!("illegal base64 data at input byte {at}"))
        })?;
        let doc = crate::go_json::parse(&raw).map_err(|_| {
            bad(&crate::go_json::syntax_error(&raw)
                .unwrap_or_else(|| "unexpected end of JSON input".to_owned()))
        })?;
        let serde_json::Value::Object(fields) = doc else {
            if doc.is_null() {
                return Err(bad("server does not recognize this encoded version "));
            }
            return Err(bad(&format!(
                "json: cannot unmarshal {} into Go value of type storage.continueToken",
                crate::go_json::go_kind(&doc)
            )));
        };
        // Go matches a field's name without case.
        let field = |name: &str| {
            fields
                .iter()
                .rfind(|(key, value)| key.eq_ignore_ascii_case(name) && !value.is_null())
                .map(|(_, value)| value)
        };
        let mismatch = |name: &str, value: &serde_json::Value, go_type: &str| {
            // Go names the number only when it was decoding one (`literalStore`).
            let what = match value {
                serde_json::Value::Number(n) if go_type == "int64" => format!("number {n}"),
                other => crate::go_json::go_kind(other).to_owned(),
            };
            bad(&format!(
                "json: cannot unmarshal {what} into Go struct field continueToken.{name} of type {go_type}"
            ))
        };
        let version = match field("v") {
            None => "",
            Some(serde_json::Value::String(v)) => v.as_str(),
            Some(other) => return Err(mismatch("v", other, "string")),
        };
        let rv = match field("rv") {
            None => 0,
            Some(value) => value
                .as_i64()
                .ok_or_else(|| mismatch("rv", value, "int64"))?,
        };
        let start = match field("start") {
            None => "",
            Some(serde_json::Value::String(start)) => start.as_str(),
            Some(other) => return Err(mismatch("start", other, "string")),
        };
        if version != "meta.k8s.io/v1" {
            return Err(bad(&format!(
                "server does not recognize this encoded version {version}"
            )));
        }
        if rv == 0 {
            return Err(bad(
                "incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
            ));
        }
        if start.is_empty() {
            return Err(bad("encoded start key empty (version meta.k8s.io/v1)"));
        }
        if !is_clean_key(start) {
            return Err(bad(start));
        }
        Ok(ContinueToken {
            revision: (rv > 0).then_some(rv.unsigned_abs()),
            start_after: start.to_owned(),
        })
    }
}

/// Checks that every field a selector names is one the resource supports.
///
/// # Errors
/// 400 BadRequest `field label not supported: {name}`, Kubernetes' message.
pub fn validate_field_selector(
    def: &crate::resources::ResourceDef,
    selector: &FieldSelector,
) -> Result<(), ApiError> {
    if selector.requirements().is_empty() {
        // Every request without a field selector (every write): nothing to build the list for.
        return Ok(());
    }
    let supported = def.supported_fields();
    for requirement in selector.requirements() {
        if !supported.contains(&requirement.field) {
            return Err(ApiError::bad_request(format!(
                "field label not supported: {}",
                requirement.field
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_options_are_validated_as_kube_apiserver_does() {
        let list = |query: &str| Options::parse(Some(query)).and_then(|o| o.validate_list());
        assert!(list("resourceVersion=5&resourceVersionMatch=Exact").is_ok());
        assert!(list("resourceVersion=0&resourceVersionMatch=NotOlderThan").is_ok());
        assert!(list("limit=5").is_ok());
        let message = |query: &str| list(query).unwrap_err().message;
        assert_eq!(
            message("resourceVersionMatch=Exact"),
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"
        );
        assert_eq!(
            message("resourceVersion=0&resourceVersionMatch=Exact"),
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\""
        );
        assert_eq!(
            message("sendInitialEvents=true"),
            "ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list"
        );
        let error = list("resourceVersionMatch=NotOlderThan&sendInitialEvents=false").unwrap_err();
        assert_eq!(error.code, 422);
        assert_eq!(
            error.message,
            "ListOptions.meta.k8s.io \"\" is invalid: [resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided, sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list]"
        );
        assert_eq!(
            message("resourceVersion=1&resourceVersionMatch=Bogus"),
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Unsupported value: \"Bogus\": supported values: \"Exact\", \"NotOlderThan\", \"\""
        );
    }

    #[test]
    fn dry_run_accepts_all_only() {
        let create = WriteOptionsKind::Create;
        assert!(!dry_run(None, &[], create).unwrap());
        assert!(!dry_run(Some("fieldManager=x"), &[], create).unwrap());
        assert!(dry_run(Some("dryRun=All"), &[], create).unwrap());
        assert!(dry_run(Some("dryRun=All&dryRun=All"), &[], create).unwrap());
        assert!(dry_run(None, &["All".to_owned()], WriteOptionsKind::Delete).unwrap());
        let error = dry_run(Some("dryRun=true"), &[], create).unwrap_err();
        assert_eq!((error.code, error.reason.as_str()), (422, "Invalid"));
        assert_eq!(
            error.message,
            r#"CreateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: []string{"true"}: supported values: "All""#
        );
        let details = error.details.unwrap();
        assert_eq!(details["kind"], "CreateOptions");
        assert_eq!(details["group"], "meta.k8s.io");
        assert_eq!(details["causes"][0]["reason"], "FieldValueNotSupported");
        assert_eq!(details["causes"][0]["field"], "dryRun");
        let error = dry_run(
            Some("dryRun=All&dryRun=Server"),
            &[],
            WriteOptionsKind::Patch,
        )
        .unwrap_err();
        assert!(
            error.message.starts_with(
                r#"PatchOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: []string{"All", "Server"}"#
            ),
            "{}",
            error.message
        );
        // An empty value is a value, and not All.
        assert!(dry_run(Some("dryRun="), &[], WriteOptionsKind::Update).is_err());
    }

    #[test]
    fn parses_what_clients_send() {
        // kube-rs sends a leading '&' and empty values.
        let options =
            Options::parse(Some("&limit=1&resourceVersion=&labelSelector=app%3Dweb")).unwrap();
        assert_eq!(options.limit, 1);
        assert_eq!(options.resource_version, ResourceVersion::Latest);
        assert!(!options.labels.is_everything());
        let options =
            Options::parse(Some("watch=1&resourceVersion=0&allowWatchBookmarks=true")).unwrap();
        assert!(options.watch && options.allow_bookmarks);
        assert_eq!(options.resource_version, ResourceVersion::Any);
    }

    #[test]
    fn booleans_convert_as_kube_apiserver_does() {
        for (value, expected) in [
            ("true", true),
            ("True", true),
            ("1", true),
            ("", true),
            ("maybe", true),
            ("false", false),
            ("False", false),
            ("FALSE", false),
            ("0", false),
        ] {
            let options = Options::parse(Some(&format!("watch={value}"))).unwrap();
            assert_eq!(options.watch, expected, "watch={value:?}");
            let options = Options::parse(Some(&format!("allowWatchBookmarks={value}"))).unwrap();
            assert_eq!(
                options.allow_bookmarks, expected,
                "allowWatchBookmarks={value:?}"
            );
        }
        assert!(!Options::parse(Some("limit=1")).unwrap().watch);
    }

    #[test]
    fn bad_values_are_400() {
        for query in [
            "resourceVersion=abc",
            "limit=x",
            "labelSelector=a%20in%20(",
            "fieldSelector=nope",
            // A trailing lone backslash and unknown escapes (found by the selector_field fuzz
            // target: they used to be dropped silently).
            "fieldSelector=metadata.name%3Da%20%5C",
            "fieldSelector=metadata.name%3Da%5Cb",
        ] {
            let err = Options::parse(Some(query)).unwrap_err();
            assert_eq!(err.code, 400, "{query}");
        }
        // kube's `fields.ParseSelector` texts.
        for (query, message) in [
            (
                "fieldSelector=metadata.name%20in%20(p1)",
                "invalid selector: 'metadata.name in (p1)'; can't understand 'metadata.name in (p1)'",
            ),
            (
                "fieldSelector=metadata.name%3Da%5Cb",
                "invalid field selector: invalid escape sequence: \\b",
            ),
        ] {
            assert_eq!(Options::parse(Some(query)).unwrap_err().message, message);
        }
    }

    #[test]
    fn watch_defaulting_and_validation() {
        let mut options = Options::parse(Some("watch=true")).unwrap();
        options.validate_watch("pods").unwrap();
        assert_eq!(options.send_initial_events, Some(true));
        let mut options = Options::parse(Some("watch=true&resourceVersion=5")).unwrap();
        options.validate_watch("pods").unwrap();
        assert_eq!(options.send_initial_events, None);
        let mut options =
            Options::parse(Some("watch=true&sendInitialEvents=true&resourceVersion=5")).unwrap();
        assert_eq!(options.validate_watch("pods").unwrap_err().code, 422);
        let mut options = Options::parse(Some(
            "watch=true&resourceVersionMatch=NotOlderThan&resourceVersion=5",
        ))
        .unwrap();
        assert_eq!(options.validate_watch("pods").unwrap_err().code, 422);
    }

    #[test]
    fn continue_tokens_round_trip_and_reject_garbage() {
        let token = ContinueToken {
            revision: Some(42),
            start_after: "ns/a".into(),
        };
        assert_eq!(ContinueToken::decode(&token.encode()).unwrap(), token);
        // The latest revision is kube-apiserver's `"rv":-1`.
        let latest = ContinueToken {
            revision: None,
            start_after: "ns/a".into(),
        };
        assert_eq!(ContinueToken::decode(&latest.encode()).unwrap(), latest);
        let kube = base64::engine::general_purpose::URL_SAFE
            .encode("{\"v\":\"meta.k8s.io/v1\",\"rv\":-1,\"start\":\"ns/a\"}");
        assert_eq!(ContinueToken::decode(&kube).unwrap(), latest);
        // A negative `rv` is the latest revision, as kube reads it; a token issued with
        // padding still decodes.
        let minus_two = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode("{\"v\":\"meta.k8s.io/v1\",\"rv\":-2,\"start\":\"ns/a\"}");
        assert_eq!(ContinueToken::decode(&minus_two).unwrap(), latest);
        assert_eq!(
            ContinueToken::decode(&format!("{minus_two}==")).unwrap(),
            latest
        );
        // Refusals in kube's words (`DecodeContinue` in the etcd store's frame).
        let token = |doc: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(doc);
        for (bad, cause) in [
            (
                String::new(),
                ": unexpected end of JSON input".to_owned(),
            ),
            (
                "garbage".to_owned(),
                r": invalid character '\u0081' looking for beginning of value".to_owned(),
            ),
            (
                "ab+c".to_owned(),
                ": illegal base64 data at input byte 2".to_owned(),
            ),
            (
                "abcde".to_owned(),
                ": illegal base64 data at input byte 4".to_owned(),
            ),
            (
                token(r#"{"v":1}"#),
                ": json: cannot unmarshal number into Go struct field continueToken.v of type string".to_owned(),
            ),
            (
                token(r#"{"v":"meta.k8s.io/v1","rv":"5","start":"a"}"#),
                ": json: cannot unmarshal string into Go struct field continueToken.rv of type int64".to_owned(),
            ),
            (
                token("[]"),
                ": json: cannot unmarshal array into Go value of type storage.continueToken".to_owned(),
            ),
            (
                token(r#"{"v":"meta.k8s.io/v2","rv":1,"start":"a"}"#),
                ": server does not recognize this encoded version meta.k8s.io/v2".to_owned(),
            ),
            (
                token(r#"{"rv":1,"start":"a"}"#),
                ": server does not recognize this encoded version ".to_owned(),
            ),
            (
                token(r#"{"v":"meta.k8s.io/v1","rv":0,"start":"a"}"#),
                ": incorrect encoded start resourceVersion (version meta.k8s.io/v1)".to_owned(),
            ),
            (
                token(r#"{"v":"meta.k8s.io/v1","rv":3,"start":""}"#),
                ": encoded start key empty (version meta.k8s.io/v1)".to_owned(),
            ),
            (
                token(r#"{"v":"meta.k8s.io/v1","rv":3,"start":"a/../../b"}"#),
                ": a/../../b".to_owned(),
            ),
        ] {
            let error = ContinueToken::decode(&bad).unwrap_err();
            assert_eq!((error.code, error.reason.as_str()), (400, "BadRequest"), "{bad}");
            assert_eq!(
                error.message,
                format!("invalid continue token: continue key is not valid{cause}"),
                "{bad}"
            );
        }
        // Start keys that a path clean would change are forged (kube's `DecodeContinue`).
        let with_start = |start: &str| ContinueToken {
            revision: Some(7),
            start_after: start.into(),
        };
        for forged in [
            "../../secrets/",
            "..",
            "ns/../other/a",
            "ns//a",
            "ns/./a",
            "ns/a/",
            "ns/a/..",
        ] {
            let error = ContinueToken::decode(&with_start(forged).encode()).unwrap_err();
            assert_eq!(
                (error.code, error.reason.as_str()),
                (400, "BadRequest"),
                "{forged}"
            );
            assert!(
                error
                    .message
                    .starts_with("invalid continue token: continue key is not valid: "),
                "{forged}"
            );
        }
        for issued in [
            "a",
            "ns/a",
            "kube-system/kube-root-ca.crt",
            "a..b",
            ".a",
            "/ns/a",
        ] {
            let token = with_start(issued);
            assert_eq!(
                ContinueToken::decode(&token.encode()).unwrap(),
                token,
                "{issued}"
            );
        }
    }
}

#[cfg(test)]
mod selector_tests {
    use super::*;

    fn def(plural: &str) -> crate::resources::ResourceDef {
        crate::resources::builtin_resources()
            .into_iter()
            .find(|d| d.plural == plural)
            .unwrap()
    }

    #[test]
    fn field_selector_validation() {
        let pods = def("pods");
        let ok =
            FieldSelector::parse("metadata.name=a,spec.nodeName!=n1,status.phase=Running").unwrap();
        assert!(validate_field_selector(&pods, &ok).is_ok());
        let bad = FieldSelector::parse("spec.color=red").unwrap();
        let err = validate_field_selector(&pods, &bad).unwrap_err();
        assert_eq!(err.code, 400);
        assert_eq!(err.reason, "BadRequest");
        assert_eq!(err.message, "field label not supported: spec.color");
        let ns = FieldSelector::parse("metadata.namespace=x").unwrap();
        assert!(validate_field_selector(&def("nodes"), &ns).is_err());
        assert!(validate_field_selector(&def("configmaps"), &ns).is_ok());
    }

    #[test]
    fn selector_refusals_are_kubes_400() {
        let error = Options::parse(Some("labelSelector=a%20in%20(b")).unwrap_err();
        assert_eq!((error.code, error.reason.as_str()), (400, "BadRequest"));
        assert_eq!(
            error.message,
            "unable to parse requirement: found '', expected: ',' or ')'"
        );
        let error = Options::parse(Some("labelSelector=a%3Db%2C")).unwrap_err();
        assert_eq!(error.message, "found '', expected: identifier after ','");
        // The label selector is parsed before the field selector, whatever the order sent.
        let error = Options::parse(Some("fieldSelector=nope&labelSelector=a%3E")).unwrap_err();
        assert_eq!(
            error.message,
            "unable to parse requirement: values[0]: Invalid value: \"\": for 'Gt', 'Lt' operators, the value must be an integer"
        );
        // And before the checks of the other options.
        let error = Options::parse(Some(
            "resourceVersionMatch=x&resourceVersion=y&labelSelector=%3D",
        ))
        .unwrap_err();
        assert_eq!(
            error.message,
            "found '=', expected: !, identifier, or 'end of string'"
        );
        let error = Options::parse(Some("resourceVersion=y&labelSelector=a")).unwrap_err();
        assert!(
            error.message.starts_with("invalid resource version"),
            "{}",
            error.message
        );
    }

    #[test]
    fn the_first_of_repeated_selectors_counts() {
        let options = Options::parse(Some("labelSelector=a%3E1&labelSelector=%3D")).unwrap();
        assert_eq!(options.labels.to_string(), "a>1");
        assert_eq!(options.label_selector_text, "a>1");
        let error = Options::parse(Some("labelSelector=%3D&labelSelector=a")).unwrap_err();
        assert_eq!(error.code, 400);
        let options =
            Options::parse(Some("fieldSelector=metadata.name%3Dx&fieldSelector=nope")).unwrap();
        assert_eq!(options.fields.exact("metadata.name"), Some("x"));
    }
}

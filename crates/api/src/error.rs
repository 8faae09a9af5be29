//! API errors as Kubernetes' `metav1.Status`.
//!
//! Each constructor mirrors one of apimachinery's `k8s.io/apimachinery/pkg/api/errors`
//! constructors: same code, reason, message wording and details, so clients that switch on
//! `reason` (client-go's `IsNotFound`, kube-rs's `ErrorResponse`) behave as against Kubernetes.

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Map, Value, json};
use watchkeeper_core::gotext::go_quote;

use crate::resources::ResourceDef;

/// A failed request, rendered as a `Status` object by [`ApiError::to_status`].
#[derive(Clone, Debug, PartialEq)]
pub struct ApiError {
    /// The HTTP status code, e.g. 404.
    pub code: u16,
    /// The machine-readable reason, e.g. `NotFound`.
    pub reason: String,
    /// The human-readable message.
    pub message: String,
    /// `Status.details` (name, group, kind, causes, retryAfterSeconds), when Kubernetes sets it.
    pub details: Option<Value>,
    /// Seconds a client should wait before retrying; the server also sends it as `Retry-After`.
    pub retry_after_seconds: Option<u32>,
    /// What few errors carry ([`ErrorExtra`]), behind one pointer: a `Result`'s error stays
    /// small.
    pub extra: Option<Box<ErrorExtra>>,
}

/// The rarer parts of an [`ApiError`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ErrorExtra {
    /// `Status.metadata.continue`: the token a 410 for an expired continue token offers to go
    /// on with the list at the latest revision (kube-apiserver's `inconsistentContinue`).
    pub list_continue: Option<Box<str>>,
    /// The texts of the answer's `Warning` headers: warnings a write recorded before it was
    /// refused (a strict decoder's unknown fields under `fieldValidation=Warn`), which
    /// kube-apiserver's warning recorder has already put in the answer's headers by then.
    pub warnings: Vec<String>,
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}): {}", self.code, self.reason, self.message)
    }
}

impl std::error::Error for ApiError {}

/// `{name, group, kind}` details as Kubernetes fills them (empty fields omitted).
fn details(group: &str, kind: &str, name: &str) -> Value {
    let mut map = Map::new();
    if !name.is_empty() {
        map.insert("name".into(), Value::String(name.to_owned()));
    }
    if !group.is_empty() {
        map.insert("group".into(), Value::String(group.to_owned()));
    }
    if !kind.is_empty() {
        map.insert("kind".into(), Value::String(kind.to_owned()));
    }
    Value::Object(map)
}

/// The default of [`set_invalid_causes_max`] (`--max-invalid-causes`).
pub const INVALID_CAUSES_MAX: usize = 1000;

/// The most causes a 422 Invalid answer carries; see [`set_invalid_causes_max`].
static INVALID_CAUSES: AtomicUsize = AtomicUsize::new(INVALID_CAUSES_MAX);

/// Bounds the causes of every 422 Invalid answer the process makes (`--max-invalid-causes`,
/// set once by the server at start; at least 1): the first `max` are answered, in the
/// details and the message, and the message ends with how many more were found (`[a: x, b:
/// y, 249998 more errors]`). kube-apiserver answers every cause; a body of one invalid
/// item after another (label keys, container names) made an answer 40 times its size.
pub fn set_invalid_causes_max(max: usize) {
    INVALID_CAUSES.store(max.max(1), Ordering::Relaxed);
}

/// The bound [`set_invalid_causes_max`] set.
#[must_use]
pub fn invalid_causes_max() -> usize {
    INVALID_CAUSES.load(Ordering::Relaxed)
}

/// `error` or `errors`.
fn plural_errors(count: usize) -> &'static str {
    if count == 1 { "error" } else { "errors" }
}

impl ApiError {
    /// Each cause of the error as `field: message`, in order (tests compare them).
    #[cfg(test)]
    pub(crate) fn cause_lines(&self) -> Vec<String> {
        self.details
            .as_ref()
            .and_then(|d| d["causes"].as_array())
            .map_or_else(Vec::new, |causes| {
                causes
                    .iter()
                    .map(|c| {
                        format!(
                            "{}: {}",
                            c["field"].as_str().unwrap_or(""),
                            c["message"].as_str().unwrap_or("")
                        )
                    })
                    .collect()
            })
    }

    /// An error with no details.
    #[must_use]
    pub fn new(code: u16, reason: &str, message: impl Into<String>) -> ApiError {
        ApiError {
            code,
            reason: reason.to_owned(),
            message: message.into(),
            details: None,
            retry_after_seconds: None,
            extra: None,
        }
    }

    /// 400 BadRequest with the message as given.
    #[must_use]
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(400, "BadRequest", message)
    }

    /// 401 Unauthorized.
    #[must_use]
    pub fn unauthorized(message: impl Into<String>) -> ApiError {
        ApiError::new(401, "Unauthorized", message)
    }

    /// 403 Forbidden: `pods "x" is forbidden: {message}` (`pods is forbidden: ...` without a name).
    #[must_use]
    pub fn forbidden(def: &ResourceDef, name: &str, message: impl fmt::Display) -> ApiError {
        let resource = def.qualified_resource();
        let text = if name.is_empty() {
            format!("{resource} is forbidden: {message}")
        } else {
            format!("{resource} {} is forbidden: {message}", go_quote(name))
        };
        ApiError {
            details: Some(details(&def.group, &def.plural, name)),
            ..ApiError::new(403, "Forbidden", text)
        }
    }

    /// 404 NotFound: `pods "x" not found`, details `{name, group, kind: plural}`.
    #[must_use]
    pub fn not_found(def: &ResourceDef, name: &str) -> ApiError {
        ApiError {
            details: Some(details(&def.group, &def.plural, name)),
            ..ApiError::new(
                404,
                "NotFound",
                format!("{} {} not found", def.qualified_resource(), go_quote(name)),
            )
        }
    }

    /// 404 NotFound for a namespace: `namespaces "x" not found`.
    #[must_use]
    pub fn namespace_not_found(namespace: &str) -> ApiError {
        ApiError {
            details: Some(details("", "namespaces", namespace)),
            ..ApiError::new(
                404,
                "NotFound",
                format!("namespaces {} not found", go_quote(namespace)),
            )
        }
    }

    /// 404 NotFound for a path that names no resource (`the server could not find the
    /// requested resource`), as Kubernetes answers unknown URLs.
    #[must_use]
    pub fn path_not_found() -> ApiError {
        ApiError {
            details: Some(json!({})),
            ..ApiError::new(
                404,
                "NotFound",
                "the server could not find the requested resource",
            )
        }
    }

    /// 409 AlreadyExists: `pods "x" already exists`.
    #[must_use]
    pub fn already_exists(def: &ResourceDef, name: &str) -> ApiError {
        ApiError {
            details: Some(details(&def.group, &def.plural, name)),
            ..ApiError::new(
                409,
                "AlreadyExists",
                format!(
                    "{} {} already exists",
                    def.qualified_resource(),
                    go_quote(name)
                ),
            )
        }
    }

    /// 409 Conflict: `Operation cannot be fulfilled on pods "x": {message}`.
    #[must_use]
    pub fn conflict(def: &ResourceDef, name: &str, message: impl fmt::Display) -> ApiError {
        ApiError {
            details: Some(details(&def.group, &def.plural, name)),
            ..ApiError::new(
                409,
                "Conflict",
                format!(
                    "Operation cannot be fulfilled on {} {}: {message}",
                    def.qualified_resource(),
                    go_quote(name)
                ),
            )
        }
    }

    /// The optimistic-concurrency conflict: a stale `resourceVersion` on update.
    #[must_use]
    pub fn conflict_modified(def: &ResourceDef, name: &str) -> ApiError {
        ApiError::conflict(def, name, OBJECT_MODIFIED)
    }

    /// 410 Expired (Kubernetes' `NewResourceExpired`), e.g. `too old resource version: 5 (10)`.
    #[must_use]
    pub fn gone(message: impl Into<String>) -> ApiError {
        ApiError::new(410, "Expired", message)
    }

    /// 422 Invalid: `Pod "x" is invalid: {field}: {message}` (several causes are bracketed and
    /// comma-separated); details carry `causes` of `{reason, message, field}`.
    /// Each cause is `(field, message, reason)`, e.g.
    /// `("metadata.name", "Invalid value: \"A\": ...", "FieldValueInvalid")`.
    #[must_use]
    pub fn invalid(
        def: &ResourceDef,
        name: &str,
        causes: Vec<(String, String, String)>,
    ) -> ApiError {
        ApiError::invalid_in(&def.group, &def.kind, name, causes)
    }

    /// 422 of an update (PUT) without `metadata.resourceVersion` to a kind whose strategy
    /// does not allow unconditional updates (custom resources, CRDs), as kube's generic store
    /// refuses it, naming the resource where the kind goes: `widgets.example.com "w" is
    /// invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update`.
    #[must_use]
    pub fn unconditional_update(def: &ResourceDef, name: &str) -> ApiError {
        ApiError::invalid_in(
            &def.group,
            &def.plural,
            name,
            vec![(
                "metadata.resourceVersion".to_owned(),
                "Invalid value: 0x0: must be specified for an update".to_owned(),
                "FieldValueInvalid".to_owned(),
            )],
        )
    }

    /// 422 Invalid without a kind or name, as kube-apiserver's patch handler builds it
    /// (`NewInvalid(schema.GroupKind{}, "", ...)`): the message starts ` "" is invalid: ` and
    /// the details carry only the causes.
    #[must_use]
    pub fn invalid_unnamed(causes: Vec<(String, String, String)>) -> ApiError {
        ApiError::invalid_in("", "", "", causes)
    }

    /// 422 Invalid of a request's options (`CreateOptions`, `PatchOptions`, ...), as
    /// kube-apiserver's handlers build it: `PatchOptions.meta.k8s.io "" is invalid: ...`.
    #[must_use]
    pub fn invalid_options(kind: &str, causes: Vec<(String, String, String)>) -> ApiError {
        ApiError::invalid_in("meta.k8s.io", kind, "", causes)
    }

    fn invalid_in(
        group: &str,
        kind: &str,
        name: &str,
        mut causes: Vec<(String, String, String)>,
    ) -> ApiError {
        // At most `--max-invalid-causes` causes are answered (kube answers every one: a body
        // of 250,000 invalid label keys would be an answer of 125 MB held until sent).
        let max = invalid_causes_max();
        let omitted = causes.len().saturating_sub(max);
        causes.truncate(max);
        // The message lists each distinct cause once (`ErrorList.ToAggregate`, a set: linear,
        // as the list may be long); the causes keep every one.
        let mut seen = std::collections::HashSet::with_capacity(causes.len());
        let mut texts: Vec<String> = Vec::with_capacity(causes.len());
        for (field, message, _) in &causes {
            let text = if field.is_empty() {
                message.clone()
            } else {
                format!("{field}: {message}")
            };
            if seen.insert(text.clone()) {
                texts.push(text);
            }
        }
        if omitted > 0 {
            texts.push(format!("{omitted} more {}", plural_errors(omitted)));
        }
        let joined = match texts.len() {
            0 => String::new(),
            1 => texts[0].clone(),
            _ => format!("[{}]", texts.join(", ")),
        };
        let mut detail = details(group, kind, name);
        let causes: Vec<Value> = causes
            .into_iter()
            .map(|(field, message, reason)| json!({"reason": reason, "message": message, "field": field}))
            .collect();
        detail["causes"] = Value::Array(causes);
        let qualified = if group.is_empty() {
            kind.to_owned()
        } else {
            format!("{kind}.{group}")
        };
        ApiError {
            details: Some(detail),
            ..ApiError::new(
                422,
                "Invalid",
                format!("{qualified} {} is invalid: {joined}", go_quote(name)),
            )
        }
    }

    /// 413 RequestEntityTooLarge: `Request entity too large: {message}`.
    #[must_use]
    pub fn request_entity_too_large(message: impl fmt::Display) -> ApiError {
        ApiError::new(
            413,
            "RequestEntityTooLarge",
            format!("Request entity too large: {message}"),
        )
    }

    /// 429 TooManyRequests with `details.retryAfterSeconds`.
    #[must_use]
    pub fn too_many_requests(message: impl Into<String>, retry_after_seconds: u32) -> ApiError {
        ApiError {
            details: Some(json!({"retryAfterSeconds": retry_after_seconds})),
            retry_after_seconds: Some(retry_after_seconds),
            ..ApiError::new(429, "TooManyRequests", message)
        }
    }

    /// 405 MethodNotAllowed.
    #[must_use]
    pub fn method_not_allowed(message: impl Into<String>) -> ApiError {
        ApiError::new(405, "MethodNotAllowed", message)
    }

    /// 405 MethodNotAllowed for `method` on a resource (or subresource) that does not serve
    /// it, in kube-apiserver's words.
    #[must_use]
    pub fn method_not_allowed_on_resource(method: impl std::fmt::Display) -> ApiError {
        ApiError::method_not_allowed(format!(
            "the server does not allow this method on the requested resource: {method}"
        ))
    }

    /// 406 NotAcceptable.
    #[must_use]
    pub fn not_acceptable(message: impl Into<String>) -> ApiError {
        ApiError::new(406, "NotAcceptable", message)
    }

    /// 415 UnsupportedMediaType.
    #[must_use]
    pub fn unsupported_media_type(message: impl Into<String>) -> ApiError {
        ApiError::new(415, "UnsupportedMediaType", message)
    }

    /// 500 InternalError: `Internal error occurred: {message}`, with the message as a cause.
    #[must_use]
    pub fn internal(message: impl fmt::Display) -> ApiError {
        let message = message.to_string();
        ApiError {
            details: Some(json!({"causes": [{"message": message}]})),
            ..ApiError::new(
                500,
                "InternalError",
                format!("Internal error occurred: {message}"),
            )
        }
    }

    /// 504 Timeout: `Timeout: {message}` with `details.retryAfterSeconds`.
    #[must_use]
    pub fn timeout(message: impl fmt::Display, retry_after_seconds: u32) -> ApiError {
        ApiError {
            details: Some(json!({"retryAfterSeconds": retry_after_seconds})),
            retry_after_seconds: Some(retry_after_seconds),
            ..ApiError::new(504, "Timeout", format!("Timeout: {message}"))
        }
    }

    /// The watch cache's "too large resource version" 504 (storage's
    /// `NewTooLargeResourceVersionError`), with the `ResourceVersionTooLarge` cause.
    #[must_use]
    pub fn too_large_resource_version(
        minimum: u64,
        current: u64,
        retry_after_seconds: u32,
    ) -> ApiError {
        let mut error = ApiError::timeout(
            format_args!("Too large resource version: {minimum}, current: {current}"),
            retry_after_seconds,
        );
        if let Some(details) = error.details.as_mut() {
            details["causes"] = json!([{
                "reason": "ResourceVersionTooLarge",
                "message": "Too large resource version"
            }]);
        }
        error
    }

    /// 503 ServiceUnavailable.
    #[must_use]
    pub fn service_unavailable(message: impl Into<String>) -> ApiError {
        ApiError::new(503, "ServiceUnavailable", message)
    }

    /// The HTTP body of this error as kube-apiserver writes it: the [`ApiError::to_status`]
    /// object in `metav1.Status` field order (`kind`, `apiVersion`, `metadata`, `status`,
    /// `message`, `reason`, `details`, `code`) and a newline.
    #[must_use]
    pub fn to_status_body(&self) -> String {
        crate::order::status_body(&self.to_status())
    }

    /// The `Status` object: `{"kind":"Status","apiVersion":"v1","metadata":{},
    /// "status":"Failure","message":..,"reason":..,"details":..,"code":..}`
    /// (`details` only when set).
    #[must_use]
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(details) = &self.details {
            status["details"] = details.clone();
        }
        if let Some(token) = self
            .extra
            .as_ref()
            .and_then(|extra| extra.list_continue.as_ref())
        {
            status["metadata"] = json!({"continue": &**token});
        }
        // `reason` is `omitempty` in Go: an error that is not an API status has none.
        if self.reason.is_empty()
            && let Some(fields) = status.as_object_mut()
        {
            fields.remove("reason");
        }
        status
    }
}

/// The message of a conflict on a stale resourceVersion, Kubernetes' `OptimisticLockErrorMsg`.
pub const OBJECT_MODIFIED: &str =
    "the object has been modified; please apply your changes to the latest version and try again";

/// A `Status` of success, as DELETE of a collection or some deletes return.
#[must_use]
pub fn success_status(details: Option<Value>) -> Value {
    let mut status = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
    });
    if let Some(details) = details {
        status["details"] = details;
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::builtin_resources;

    fn def(plural: &str) -> ResourceDef {
        builtin_resources()
            .into_iter()
            .find(|d| d.plural == plural)
            .unwrap()
    }

    #[test]
    fn not_found_status() {
        let status = ApiError::not_found(&def("pods"), "x").to_status();
        assert_eq!(
            status,
            json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
                   "message":"pods \"x\" not found","reason":"NotFound",
                   "details":{"name":"x","kind":"pods"},"code":404})
        );
        let status = ApiError::not_found(&def("deployments"), "web").to_status();
        assert_eq!(
            status,
            json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
                   "message":"deployments.apps \"web\" not found","reason":"NotFound",
                   "details":{"name":"web","group":"apps","kind":"deployments"},"code":404})
        );
        assert_eq!(
            ApiError::namespace_not_found("nope").to_status(),
            json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
                   "message":"namespaces \"nope\" not found","reason":"NotFound",
                   "details":{"name":"nope","kind":"namespaces"},"code":404})
        );
    }

    #[test]
    fn conflict_and_exists_status() {
        assert_eq!(
            ApiError::conflict_modified(&def("pods"), "x").to_status(),
            json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
                   "message":"Operation cannot be fulfilled on pods \"x\": the object has been modified; please apply your changes to the latest version and try again",
                   "reason":"Conflict","details":{"name":"x","kind":"pods"},"code":409})
        );
        assert_eq!(
            ApiError::already_exists(&def("configmaps"), "c").to_status(),
            json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
                   "message":"configmaps \"c\" already exists","reason":"AlreadyExists",
                   "details":{"name":"c","kind":"configmaps"},"code":409})
        );
    }

    #[test]
    fn expired_bad_request_and_timeout_status() {
        assert_eq!(
            ApiError::gone("too old resource version: 5 (10)").to_status(),
            json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
                   "message":"too old resource version: 5 (10)","reason":"Expired","code":410})
        );
        assert_eq!(
            ApiError::bad_request("field label not supported: x").to_status(),
            json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
                   "message":"field label not supported: x","reason":"BadRequest","code":400})
        );
        let too_large = ApiError::too_large_resource_version(20, 10, 1);
        assert_eq!(too_large.retry_after_seconds, Some(1));
        assert_eq!(
            too_large.to_status(),
            json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
                   "message":"Timeout: Too large resource version: 20, current: 10","reason":"Timeout",
                   "details":{"causes":[{"reason":"ResourceVersionTooLarge","message":"Too large resource version"}],"retryAfterSeconds":1},
                   "code":504})
        );
        let busy = ApiError::too_many_requests("storage is (re)initializing", 3);
        assert_eq!(busy.to_status()["details"], json!({"retryAfterSeconds": 3}));
        assert_eq!(busy.code, 429);
    }

    #[test]
    fn invalid_status() {
        let error = ApiError::invalid(
            &def("pods"),
            "A",
            vec![(
                "metadata.name".into(),
                "Invalid value: \"A\": must be lowercase".into(),
                "FieldValueInvalid".into(),
            )],
        );
        assert_eq!(
            error.to_status(),
            json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
                   "message":"Pod \"A\" is invalid: metadata.name: Invalid value: \"A\": must be lowercase",
                   "reason":"Invalid",
                   "details":{"name":"A","kind":"Pod","causes":[{"reason":"FieldValueInvalid","message":"Invalid value: \"A\": must be lowercase","field":"metadata.name"}]},
                   "code":422})
        );
        let two = ApiError::invalid(
            &def("deployments"),
            "d",
            vec![
                ("a".into(), "x".into(), "FieldValueRequired".into()),
                ("b".into(), "y".into(), "FieldValueInvalid".into()),
            ],
        );
        assert_eq!(
            two.message,
            "Deployment.apps \"d\" is invalid: [a: x, b: y]"
        );
        assert_eq!(two.details.unwrap()["group"], "apps");
        // The same cause twice: once in the message (Go's `ToAggregate`), twice in the causes.
        let repeated = ApiError::invalid(
            &def("deployments"),
            "d",
            vec![
                ("a".into(), "x".into(), "FieldValueRequired".into()),
                ("a".into(), "x".into(), "FieldValueRequired".into()),
                ("b".into(), "y".into(), "FieldValueInvalid".into()),
            ],
        );
        assert_eq!(
            repeated.message,
            "Deployment.apps \"d\" is invalid: [a: x, b: y]"
        );
        assert_eq!(
            repeated.details.unwrap()["causes"]
                .as_array()
                .unwrap()
                .len(),
            3
        );
    }

    /// Past `--max-invalid-causes` (its default here) the first causes are answered, the
    /// message ending with how many more were found; the message's distinct causes are found
    /// in linear time (250,000 took minutes).
    #[test]
    fn invalid_causes_are_bounded() {
        let causes: Vec<_> = (0..250_000)
            .map(|i| {
                (
                    "metadata.labels".to_owned(),
                    format!("Invalid value: \"#{}\": name part must ...", i % 200_000),
                    "FieldValueInvalid".to_owned(),
                )
            })
            .collect();
        let error = ApiError::invalid(&def("configmaps"), "c", causes);
        let answered = error.details.unwrap()["causes"].as_array().unwrap().len();
        assert_eq!(answered, INVALID_CAUSES_MAX);
        assert!(
            error.message.starts_with(
                "ConfigMap \"c\" is invalid: [metadata.labels: Invalid value: \"#0\": name part must ..., "
            ),
            "{}",
            &error.message[..200]
        );
        assert!(
            error.message.ends_with(
                ", metadata.labels: Invalid value: \"#999\": name part must ..., 249000 more errors]"
            ),
            "{}",
            &error.message[error.message.len() - 200..]
        );
    }

    #[test]
    fn other_codes() {
        let cases = [
            (ApiError::unauthorized("u"), 401, "Unauthorized"),
            (
                ApiError::forbidden(&def("pods"), "p", "no"),
                403,
                "Forbidden",
            ),
            (ApiError::method_not_allowed("m"), 405, "MethodNotAllowed"),
            (ApiError::not_acceptable("n"), 406, "NotAcceptable"),
            (
                ApiError::request_entity_too_large("big"),
                413,
                "RequestEntityTooLarge",
            ),
            (
                ApiError::unsupported_media_type("t"),
                415,
                "UnsupportedMediaType",
            ),
            (ApiError::internal("boom"), 500, "InternalError"),
            (
                ApiError::service_unavailable("s"),
                503,
                "ServiceUnavailable",
            ),
            (ApiError::timeout("slow", 2), 504, "Timeout"),
        ];
        for (error, code, reason) in cases {
            let status = error.to_status();
            assert_eq!(status["code"], code);
            assert_eq!(status["reason"], reason);
            assert_eq!(status["status"], "Failure");
        }
        assert_eq!(
            ApiError::forbidden(&def("pods"), "p", "no").message,
            "pods \"p\" is forbidden: no"
        );
        assert_eq!(
            ApiError::internal("boom").to_status()["message"],
            "Internal error occurred: boom"
        );
        assert_eq!(success_status(None)["status"], "Success");
    }
}

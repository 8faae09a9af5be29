//! YAML for clients that ask for it (`watchkeeper_api::yaml` does the conversions): a create
//! or update body sent as `application/yaml` is read as the JSON it converts to, and an answer
//! the client's `Accept` header wants in YAML ([`watchkeeper_api::negotiate::answers_in_yaml`])
//! is the JSON answer converted, as kube-apiserver's YAML serializer answers — objects, lists,
//! discovery and `Status` refusals alike. A watch stream stays JSON. A body that does not
//! convert is kube-apiserver's 400 for an undecodable body, `the object provided is
//! unrecognized (must be of type <Kind>): error converting YAML to JSON: ...` ([`undecodable`]).
//!
//! ## Bounds
//! A YAML answer is built whole from the JSON one (a LIST that streams in pieces as JSON is
//! gathered first): at most [`YAML_ANSWER_JSON_MAX`] bytes of JSON, and at most
//! [`YAML_ANSWER_MAX`] bytes of YAML (block style indents each level: an object nested 10,000
//! levels, 50 KB of JSON, is 100 MB of YAML; a 3 MB body of such chains would be gigabytes,
//! which kube-apiserver would write). A larger answer is a 406 NotAcceptable that says so and
//! names `application/json`, which streams any size.

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderValue, Method, header};
use axum::response::Response;
use watchkeeper_api::ApiError;
use watchkeeper_api::yaml::{NotYaml, YAML_MEDIA_TYPE, json_from_yaml_body, yaml_from_json};

use crate::http::App;
use crate::http::transform::is_plain_json;
use crate::offload::Offload;
use crate::request::Target;
use crate::respond::error_response;

/// The largest JSON answer converted to YAML, bytes (64 MiB).
pub const YAML_ANSWER_JSON_MAX: usize = 64 << 20;

/// The largest YAML answer written, bytes (512 MiB: an object nested to a body's 10,000-level
/// bound takes about 300 MB, 100 MB for its own levels and 200 MB for its managed fields',
/// whose every level is a member `.` and a child).
pub const YAML_ANSWER_MAX: usize = 512 << 20;

/// A create or update body as the JSON the handlers read: a YAML one (`Content-Type:
/// application/yaml`) converted, any other as it is.
///
/// # Errors
/// 400 BadRequest for YAML that does not read ([`watchkeeper_api::yaml::json_from_yaml_body`]).
pub fn json_body(method: &Method, headers: &HeaderMap, body: Bytes) -> Result<Bytes, ApiError> {
    let yaml = headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case(YAML_MEDIA_TYPE));
    if body.is_empty() || !yaml || !matches!(*method, Method::POST | Method::PUT) {
        return Ok(body);
    }
    json_from_yaml_body(&body).map(Bytes::from)
}

/// The refusal of a create or update body in YAML that does not convert (`error`, from
/// [`json_body`]), as kube-apiserver words it: `the object provided is unrecognized (must be
/// of type <Kind>): error converting YAML to JSON: ... (<the body in hex>)`, the kind that of
/// the resource `path` names (its subresource's: `Scale`, `Eviction`, `Binding`); `error` as
/// it is when the path names no resource this server serves.
#[must_use]
pub fn undecodable(app: &App, path: &str, body: &[u8], error: ApiError) -> ApiError {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let (group, version, rest) = match segments[..] {
        ["api", version, ref rest @ ..] => ("", version, rest),
        ["apis", group, version, ref rest @ ..] => (group, version, rest),
        _ => return error,
    };
    let Some(target) = Target::parse(group, version, rest) else {
        return error;
    };
    let Some(resource) = app.resource(target.group, target.version, target.plural) else {
        return error;
    };
    let kind = match target.subresource {
        Some("scale") => "Scale",
        Some("eviction") => "Eviction",
        Some("binding") => "Binding",
        _ => resource.def.kind.as_str(),
    };
    watchkeeper_api::go_json::unrecognized(kind, body, &error.message)
}

/// `response` in YAML when it is a JSON answer (see the module docs); anything else as it is.
/// A large answer is converted on the blocking pool ([`Offload::compute`]).
pub async fn to_yaml(response: Response, offload: &Offload) -> Response {
    if !is_plain_json(&response) {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(json) = axum::body::to_bytes(body, YAML_ANSWER_JSON_MAX).await else {
        let refusal = error_response(&ApiError::not_acceptable(format!(
            "the answer is larger than {YAML_ANSWER_JSON_MAX} bytes, the most this server converts to {YAML_MEDIA_TYPE}; ask for application/json"
        )));
        return Box::pin(to_yaml(refusal, offload)).await;
    };
    let converted = offload
        .compute(json.len(), move || {
            (yaml_from_json(&json, YAML_ANSWER_MAX), json)
        })
        .await;
    let yaml = match converted {
        Ok((Ok(yaml), _)) => yaml,
        Ok((Err(NotYaml::NotJson), json)) => return Response::from_parts(parts, Body::from(json)),
        Ok((Err(NotYaml::Larger), _)) => {
            let refusal = error_response(&ApiError::not_acceptable(format!(
                "the answer is larger than {YAML_ANSWER_MAX} bytes in {YAML_MEDIA_TYPE}, the most this server writes; ask for application/json"
            )));
            return Box::pin(to_yaml(refusal, offload)).await;
        }
        Err(error) => return error_response(&error),
    };
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(YAML_MEDIA_TYPE),
    );
    Response::from_parts(parts, Body::from(yaml))
}

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
//! names `application/json`, which streams any size. The conversion runs on the heavy
//! requests' pool (bounded by `--max-heavy-requests`) when what it may write is large: its
//! JSON's length, times one more for every 16 levels of its deepest nesting, so that a
//! 50 KB object nested 10,000 levels (100 MB of YAML) is not converted on a runtime worker,
//! nor by any number of clients at once.

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

/// About how many bytes of YAML `json` may become: each byte at most once per two levels
/// of the indentation its line carries, bounded through the deepest nesting (one scan of
/// the bytes, strings skipped). The JSON's own length for an object of ordinary depth.
fn yaml_work(json: &[u8]) -> usize {
    let (mut depth, mut deepest, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for &byte in json {
        if in_string {
            match (escaped, byte) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    json.len().saturating_mul(1 + deepest / YAML_DEPTH_PER_COPY)
}

/// Levels of nesting whose indentation counts as one more copy of an answer in
/// [`yaml_work`]: an ordinary object (a Pod nests about 10) stays at its JSON's size.
const YAML_DEPTH_PER_COPY: usize = 16;

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
    // Block style indents every level, so a deep answer's YAML is far larger than its JSON:
    // judged by what it may become, it goes to the bounded pool.
    let work = yaml_work(&json);
    let converted = offload
        .compute(work, move || (yaml_from_json(&json, YAML_ANSWER_MAX), json))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Goal: an ordinary answer is judged by its JSON's length; a deep one by what its
    /// indentation makes of it (so a small deep object goes to the bounded pool), and
    /// brackets inside strings, escaped quotes included, do not count.
    #[test]
    fn the_work_of_a_yaml_answer_follows_its_depth() {
        let pod = br#"{"a":{"b":[{"c":"[[[{{{"}]},"d":"\"{{{"}"#;
        assert_eq!(yaml_work(pod), pod.len());
        let deep = format!("{}1{}", "[".repeat(10_000), "]".repeat(10_000));
        assert_eq!(yaml_work(deep.as_bytes()), deep.len() * (1 + 10_000 / 16));
        let quoted = format!("{{\"a\":\"{}\"}}", "[".repeat(10_000));
        assert_eq!(yaml_work(quoted.as_bytes()), quoted.len());
    }
}

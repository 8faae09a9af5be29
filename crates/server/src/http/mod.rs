//! HTTP: one handler that routes Kubernetes paths by hand (the `namespaces/{name}` versus
//! `namespaces/{ns}/{resource}` ambiguity is easier to resolve in code than in a route table),
//! answers every error with a `metav1.Status`, and streams watches as newline-delimited JSON
//! over chunked HTTP/1.1 or HTTP/2.
//!
//! ## Watch streams under back-pressure
//! The response body pulls from the watcher's queue, up to 64 items per chunk. When the
//! socket or the HTTP/2 window is full, hyper stops polling the body, the queue fills, and the
//! next push from the cache fails: the watcher goes unsynced and is caught up later on the same
//! connection (stall-resume mode). It is never force-closed for that.
//! Errors after the stream started are in-stream `ERROR` events carrying a Status with HTTP
//! 200 (kube-rs retries forever on an HTTP-level 410).

pub mod connection;

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::Response;
use bytes::{BufMut, Bytes, BytesMut};
use futures_util::StreamExt;
use serde_json::{Value, json};
use watchkeeper_api::{ApiError, PatchType, ResourceDef, validate_field_selector};
use watchkeeper_core::{Encoding, WatchEnd, WatchItem, WatchRequest, WatchStart};
use watchkeeper_store::Store;

use crate::app::{App, Resource, WatchInfo, too_large};
use crate::auth::{Attributes, User};
use watchkeeper_api::query::{Options, ResourceVersion};
use watchkeeper_api::watch_frame::encode_frames;

/// Largest request body accepted by default (3 MiB, as kube-apiserver); see
/// `--max-request-body-bytes`.
pub const REQUEST_BODY_MAX: usize = 3 * 1024 * 1024;

/// The parsed target of a resource request.
#[derive(Debug)]
struct Target<'a> {
    group: &'a str,
    version: &'a str,
    plural: &'a str,
    namespace: Option<&'a str>,
    name: Option<&'a str>,
    subresource: Option<&'a str>,
    watch_path: bool,
}

fn parse_target<'a>(group: &'a str, version: &'a str, rest: &[&'a str]) -> Option<Target<'a>> {
    let (watch_path, rest) = match rest.first() {
        Some(&"watch") => (true, &rest[1..]),
        _ => (false, rest),
    };
    let target = |plural, namespace, name, subresource| Target {
        group,
        version,
        plural,
        namespace,
        name,
        subresource,
        watch_path,
    };
    Some(match rest {
        [plural] => target(*plural, None, None, None),
        ["namespaces", name] => target("namespaces", None, Some(*name), None),
        ["namespaces", name, sub @ ("status" | "finalize")] => {
            target("namespaces", None, Some(*name), Some(*sub))
        }
        ["namespaces", namespace, plural] => target(*plural, Some(*namespace), None, None),
        ["namespaces", namespace, plural, name] => {
            target(*plural, Some(*namespace), Some(*name), None)
        }
        ["namespaces", namespace, plural, name, sub] => {
            target(*plural, Some(*namespace), Some(*name), Some(*sub))
        }
        [plural, name] => target(*plural, None, Some(*name), None),
        [plural, name, sub] => target(*plural, None, Some(*name), Some(*sub)),
        _ => return None,
    })
}

fn json_response(code: StatusCode, body: impl Into<Body>) -> Response {
    let mut response = Response::new(body.into());
    *response.status_mut() = code;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// A Status response for an error.
#[must_use]
pub fn error_response(error: &ApiError) -> Response {
    let code = StatusCode::from_u16(error.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = json_response(code, error.to_status().to_string());
    if let Some(seconds) = error.retry_after_seconds
        && let Ok(value) = HeaderValue::from_str(&seconds.to_string())
    {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    response
}

/// Bodies are JSON (or a JSON patch type), or Kubernetes protobuf (kubectl's generator
/// commands send built-in kinds that way and never fall back to JSON), which
/// [`protobuf_to_json`] turns into JSON once the resource is known. CBOR gets 415.
fn unsupported_body(headers: &HeaderMap) -> Option<ApiError> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json");
    let media = content_type.split(';').next().unwrap_or_default().trim();
    if watchkeeper_api::is_protobuf_media_type(media) {
        return None;
    }
    (media.contains("protobuf") || media.contains("cbor")).then(|| {
        ApiError::unsupported_media_type(format!(
            "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json (got {media})"
        ))
    })
}

/// A protobuf body decoded to JSON bytes for `def` (so create, update and delete read JSON
/// whatever the client sent); other bodies unchanged.
fn protobuf_to_json(
    def: &ResourceDef,
    headers: &HeaderMap,
    body: Bytes,
) -> Result<Bytes, ApiError> {
    let protobuf = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(watchkeeper_api::is_protobuf_media_type);
    if !protobuf || body.is_empty() {
        return Ok(body);
    }
    let value = watchkeeper_api::decode_protobuf(def, &body)?;
    Ok(Bytes::from(value.to_string()))
}

/// Whether the query asks for a dry run (`dryRun=All`).
fn wants_dry_run(query: Option<&str>) -> bool {
    query
        .and_then(|q| serde_urlencoded::from_str::<Vec<(String, String)>>(q).ok())
        .is_some_and(|pairs| pairs.iter().any(|(k, v)| k == "dryRun" && !v.is_empty()))
}

fn wants_table(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|accept| {
            accept
                .split(',')
                .next()
                .is_some_and(|first| first.contains("as=Table"))
        })
}

fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// The single request handler.
pub async fn handle(State(app): State<Arc<App>>, request: Request) -> Response {
    let started = std::time::Instant::now();
    let (parts, body) = request.into_parts();
    let path = parts.uri.path().to_owned();
    let query = parts.uri.query().map(str::to_owned);
    // The limits layer has read the body within its bounds and authenticated the caller.
    let body_max = app.config.limits.request_body_bytes_max;
    let body = match axum::body::to_bytes(body, body_max).await {
        Ok(body) => body,
        Err(_) => {
            return error_response(&ApiError::request_entity_too_large(format!(
                "the request body is larger than {body_max} bytes"
            )));
        }
    };
    let user = match parts.extensions.get::<User>().cloned() {
        Some(user) => user,
        None => match app.auth.authenticate(&path, &parts.headers) {
            Ok(user) => user,
            Err(error) => return error_response(&error),
        },
    };
    if !body.is_empty()
        && let Some(error) = unsupported_body(&parts.headers)
    {
        return error_response(&error);
    }
    let segments: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    // Resource requests are authorized once their verb is known (in `serve_resource`).
    if !matches!(segments[..], ["api", "v1", _, ..] | ["apis", _, _, _, ..]) {
        let verb = crate::auth::non_resource_verb(&parts.method);
        if let Err(error) = app.auth.authorize(
            &user,
            &Attributes::NonResource {
                verb: &verb,
                path: &path,
            },
        ) {
            return error_response(&error);
        }
    }
    let (verb, group, resource, response) = route(
        &app,
        &parts.method,
        &segments,
        query.as_deref(),
        &parts.headers,
        body,
        &user,
    )
    .await;
    if !verb.is_empty() {
        let micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        app.requests
            .observe(verb, &group, &resource, response.status().as_u16(), micros);
    }
    response
}

async fn route(
    app: &Arc<App>,
    method: &Method,
    segments: &[&str],
    query: Option<&str>,
    headers: &HeaderMap,
    body: Bytes,
    user: &User,
) -> (&'static str, String, String, Response) {
    let ok = |value: Value| json_response(StatusCode::OK, value.to_string());
    let not_found = || error_response(&ApiError::path_not_found());
    let response = match segments {
        ["version"] => ok(watchkeeper_api::version_info()),
        ["healthz" | "livez"] => text(StatusCode::OK, "ok"),
        ["readyz"] => {
            if app.ensure_ready().is_ok() {
                text(StatusCode::OK, "ok")
            } else {
                text(StatusCode::SERVICE_UNAVAILABLE, "the caches are loading")
            }
        }
        ["metrics"] => text(StatusCode::OK, &crate::operator::metrics::render(app)),
        ["debug", ..] | ["ui", ..] => crate::operator::debug::serve(app, segments, query),
        ["api"] => ok(watchkeeper_api::api_versions()),
        ["apis"] => ok(watchkeeper_api::api_group_list(&app.defs)),
        ["api", "v1"] => {
            watchkeeper_api::api_resource_list(&app.defs, "", "v1").map_or_else(not_found, ok)
        }
        ["apis", group] => watchkeeper_api::api_group(&app.defs, group).map_or_else(not_found, ok),
        ["apis", group, version] => {
            watchkeeper_api::api_resource_list(&app.defs, group, version).map_or_else(not_found, ok)
        }
        ["openapi", "v3"] => ok(watchkeeper_api::openapi_v3_root(&app.defs)),
        ["openapi", "v3", "api", "v1"] => {
            watchkeeper_api::openapi_v3_group_version(&app.defs, "", "v1")
                .map_or_else(not_found, ok)
        }
        ["openapi", "v3", "apis", group, version] => {
            watchkeeper_api::openapi_v3_group_version(&app.defs, group, version)
                .map_or_else(not_found, ok)
        }
        ["api", "v1", rest @ ..] => {
            return resource_request(app, method, "", "v1", rest, query, headers, body, user).await;
        }
        ["apis", group, version, rest @ ..] => {
            return resource_request(
                app, method, group, version, rest, query, headers, body, user,
            )
            .await;
        }
        _ => not_found(),
    };
    ("", String::new(), String::new(), response)
}

fn text(code: StatusCode, body: &str) -> Response {
    let mut response = Response::new(Body::from(body.to_owned()));
    *response.status_mut() = code;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

#[allow(clippy::too_many_arguments)]
async fn resource_request(
    app: &Arc<App>,
    method: &Method,
    group: &str,
    version: &str,
    rest: &[&str],
    query: Option<&str>,
    headers: &HeaderMap,
    body: Bytes,
    user: &User,
) -> (&'static str, String, String, Response) {
    let Some(target) = parse_target(group, version, rest) else {
        return (
            "",
            String::new(),
            String::new(),
            error_response(&ApiError::path_not_found()),
        );
    };
    let Some(resource) = app
        .resource(target.group, target.version, target.plural)
        .cloned()
    else {
        return (
            "",
            String::new(),
            String::new(),
            error_response(&ApiError::path_not_found()),
        );
    };
    let label = (group.to_owned(), target.plural.to_owned());
    let (verb, result) =
        serve_resource(app, method, &resource, &target, query, headers, body, user).await;
    let response = match result {
        Ok(response) => response,
        Err(error) => error_response(&error),
    };
    (verb, label.0, label.1, response)
}

#[allow(clippy::too_many_arguments)]
async fn serve_resource(
    app: &Arc<App>,
    method: &Method,
    resource: &Arc<Resource>,
    target: &Target<'_>,
    query: Option<&str>,
    headers: &HeaderMap,
    body: Bytes,
    user: &User,
) -> (&'static str, Result<Response, ApiError>) {
    let def = &resource.def;
    // Scope checks: a cluster-scoped resource has no namespace in its path.
    if !def.namespaced && target.namespace.is_some() {
        return ("", Err(ApiError::path_not_found()));
    }
    if let Some(sub) = target.subresource
        && sub != "status"
        && !(def.plural == "namespaces" && sub == "finalize")
    {
        return (
            "",
            Err(ApiError::new(
                404,
                "NotFound",
                format!("the server could not find the requested resource ({sub})"),
            )),
        );
    }
    let mut options = match Options::parse(query) {
        Ok(options) => options,
        Err(error) => return ("", Err(error)),
    };
    let verb = kube_verb(method, target, options.watch);
    if let Err(error) = app.auth.authorize(
        user,
        &Attributes::Resource {
            verb: &verb,
            def,
            namespace: target.namespace.unwrap_or_default(),
            name: target.name.unwrap_or_default(),
            subresource: target.subresource.unwrap_or_default(),
        },
    ) {
        return ("", Err(error));
    }
    if let Err(error) = validate_field_selector(def, &options.fields) {
        return ("", Err(error));
    }
    if let Err(error) = app.ensure_ready() {
        return ("", Err(error));
    }
    if let Some(upstream) = &app.upstream
        && let Some(answer) = upstream
            .intercept(
                method,
                resource,
                target.namespace,
                target.name,
                target.subresource,
                query,
                headers,
                &body,
                user,
                &mut options,
            )
            .await
    {
        return answer;
    }
    if matches!(
        *method,
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    ) && wants_dry_run(query)
    {
        // Applying a dry-run write would change the store (kubectl --dry-run=server, diff).
        return (
            "",
            Err(ApiError::bad_request(
                "dryRun is not supported by this server: the request was not applied".to_owned(),
            )),
        );
    }
    let body = match protobuf_to_json(def, headers, body) {
        Ok(body) => body,
        Err(error) => return ("", Err(error)),
    };
    let namespace = target.namespace;
    match (method.clone(), target.name) {
        (Method::GET, name) if target.watch_path || options.watch => {
            let mut options = options;
            if let Some(name) = name {
                // A watch of one object is a watch with fieldSelector metadata.name.
                match watchkeeper_core::FieldSelector::parse(&format!("metadata.name={name}")) {
                    Ok(by_name) => options.fields = merge_fields(&options.fields, &by_name),
                    Err(e) => return ("WATCH", Err(ApiError::bad_request(e.to_string()))),
                }
            }
            (
                "WATCH",
                watch(app, resource, namespace, options, headers, &user.name).await,
            )
        }
        (Method::GET, None) => (
            "LIST",
            list(app, resource, namespace, &options, headers).await,
        ),
        (Method::GET, Some(name)) => (
            "GET",
            get(app, resource, namespace, name, &options, headers).await,
        ),
        (Method::POST, None) => ("CREATE", create(app, resource, namespace, &body).await),
        (Method::PUT, Some(name)) => (
            "UPDATE",
            update(app, resource, namespace, name, &body).await,
        ),
        (Method::PATCH, Some(name)) => (
            "PATCH",
            patch(app, resource, namespace, name, headers, body).await,
        ),
        (Method::DELETE, Some(name)) => (
            "DELETE",
            delete(app, resource, namespace, name, &body).await,
        ),
        (Method::DELETE, None) => (
            "DELETECOLLECTION",
            delete_collection(app, resource, namespace, &options).await,
        ),
        (method, _) => (
            "",
            Err(ApiError::method_not_allowed(format!(
                "the server does not allow this method on the requested resource: {method}"
            ))),
        ),
    }
}

/// The Kubernetes verb of a resource request, as authorization sees it.
fn kube_verb(method: &Method, target: &Target<'_>, watch: bool) -> String {
    match (method.clone(), target.name) {
        (Method::GET, _) if target.watch_path || watch => "watch",
        (Method::GET, None) => "list",
        (Method::GET, Some(_)) => "get",
        (Method::POST, _) => "create",
        (Method::PUT, _) => "update",
        (Method::PATCH, _) => "patch",
        (Method::DELETE, Some(_)) => "delete",
        (Method::DELETE, None) => "deletecollection",
        (method, _) => return method.as_str().to_ascii_lowercase(),
    }
    .to_owned()
}

fn merge_fields(
    a: &watchkeeper_core::FieldSelector,
    b: &watchkeeper_core::FieldSelector,
) -> watchkeeper_core::FieldSelector {
    let mut terms: Vec<String> = a
        .requirements()
        .iter()
        .chain(b.requirements())
        .map(|r| {
            format!(
                "{}{}{}",
                r.field,
                if r.negated { "!=" } else { "=" },
                escape_field_value(&r.value)
            )
        })
        .collect();
    terms.dedup();
    watchkeeper_core::FieldSelector::parse(&terms.join(",")).unwrap_or_else(|_| b.clone())
}

fn escape_field_value(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace(',', "\\,")
        .replace('=', "\\=")
}

fn parse_body(body: &Bytes) -> Result<Value, ApiError> {
    if body.is_empty() {
        return Err(ApiError::bad_request(
            "the request body is empty: expected a JSON object".to_owned(),
        ));
    }
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("the request body is not valid JSON: {e}")))?;
    if !value.is_object() {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object".to_owned(),
        ));
    }
    Ok(value)
}

async fn list(
    app: &App,
    resource: &Resource,
    namespace: Option<&str>,
    options: &Options,
    headers: &HeaderMap,
) -> Result<Response, ApiError> {
    let page = app.list(resource, namespace, options).await?;
    let def = &resource.def;
    if wants_table(headers) {
        let bodies: Vec<&Value> = page.items.iter().map(|o| o.body()).collect();
        let table = watchkeeper_api::to_table(
            def,
            &bodies,
            &page.revision.to_string(),
            page.continue_token.as_deref(),
            now_unix(),
        );
        return Ok(json_response(StatusCode::OK, table.to_string()));
    }
    let mut metadata = json!({"resourceVersion": page.revision.to_string()});
    if let Some(token) = &page.continue_token {
        metadata["continue"] = json!(token);
    }
    if let Some(remaining) = page.remaining {
        metadata["remainingItemCount"] = json!(remaining);
    }
    let stats = &resource.cache().metrics().encode;
    let mut out = BytesMut::with_capacity(256 + page.items.len() * 512);
    out.put_slice(
        format!(
            "{{\"kind\":\"{}\",\"apiVersion\":\"{}\",\"metadata\":{},\"items\":[",
            def.list_kind(),
            def.api_version(),
            metadata
        )
        .as_bytes(),
    );
    for (index, object) in page.items.iter().enumerate() {
        if index > 0 {
            out.put_u8(b',');
        }
        // The object's cached encoding, shared with watch events: no per-request serialization.
        out.put_slice(object.encoded(Encoding::Json, stats));
    }
    out.put_slice(b"]}");
    Ok(json_response(StatusCode::OK, out.freeze()))
}

async fn get(
    app: &App,
    resource: &Resource,
    namespace: Option<&str>,
    name: &str,
    options: &Options,
    headers: &HeaderMap,
) -> Result<Response, ApiError> {
    let bytes = app
        .get(resource, namespace.unwrap_or_default(), name, options)
        .await?;
    if wants_table(headers) {
        let object: Value =
            serde_json::from_slice(&bytes).map_err(|e| ApiError::internal(e.to_string()))?;
        let rv = object
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let table = watchkeeper_api::to_table(&resource.def, &[&object], &rv, None, now_unix());
        return Ok(json_response(StatusCode::OK, table.to_string()));
    }
    Ok(json_response(StatusCode::OK, bytes))
}

async fn create(
    app: &App,
    resource: &Resource,
    namespace: Option<&str>,
    body: &Bytes,
) -> Result<Response, ApiError> {
    let object = parse_body(body)?;
    let created = app.create(resource, namespace, object).await?;
    Ok(json_response(StatusCode::CREATED, created.to_string()))
}

async fn update(
    app: &App,
    resource: &Resource,
    namespace: Option<&str>,
    name: &str,
    body: &Bytes,
) -> Result<Response, ApiError> {
    let object = parse_body(body)?;
    let updated = app
        .update(resource, namespace.unwrap_or_default(), name, object)
        .await?;
    Ok(json_response(StatusCode::OK, updated.to_string()))
}

async fn patch(
    app: &App,
    resource: &Resource,
    namespace: Option<&str>,
    name: &str,
    headers: &HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let media_type = content_type.split(';').next().unwrap_or_default().trim();
    let patch_type = PatchType::from_content_type(media_type).ok_or_else(|| {
        ApiError::unsupported_media_type(format!(
            "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json (got {content_type:?})"
        ))
    })?;
    if body.is_empty() {
        return Err(ApiError::bad_request("the patch is empty".to_owned()));
    }
    let patched = app
        .patch(
            resource,
            namespace.unwrap_or_default(),
            name,
            patch_type,
            body,
        )
        .await?;
    Ok(json_response(StatusCode::OK, patched.to_string()))
}

async fn delete(
    app: &App,
    resource: &Resource,
    namespace: Option<&str>,
    name: &str,
    body: &Bytes,
) -> Result<Response, ApiError> {
    let options = if body.is_empty() {
        Value::Null
    } else {
        parse_body(body)?
    };
    let deleted = app
        .delete(resource, namespace.unwrap_or_default(), name, &options)
        .await?;
    Ok(json_response(StatusCode::OK, deleted.to_string()))
}

async fn delete_collection(
    app: &App,
    resource: &Resource,
    namespace: Option<&str>,
    options: &Options,
) -> Result<Response, ApiError> {
    let deleted = app.delete_collection(resource, namespace, options).await?;
    Ok(json_response(
        StatusCode::OK,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": {"kind": resource.def.plural, "group": resource.def.group}, "message": format!("deleted {deleted} objects")}).to_string(),
    ))
}

/// Maps Kubernetes' watch parameters onto the core's start (see research: kubernetes-cacher.md
/// section 2.3).
async fn watch_start(app: &App, options: &Options) -> Result<WatchStart, ApiError> {
    let current = || async {
        app.store
            .current_revision()
            .await
            .map_err(|e| ApiError::service_unavailable(format!("cannot read the store: {e}")))
    };
    Ok(
        match (options.send_initial_events, options.resource_version) {
            (Some(true), ResourceVersion::Latest) => WatchStart::InitialState {
                min_revision: Some(current().await?),
            },
            (Some(true), ResourceVersion::Any) => WatchStart::InitialState { min_revision: None },
            (Some(true), ResourceVersion::At(rv)) => WatchStart::InitialState {
                min_revision: Some(rv),
            },
            (_, ResourceVersion::Latest) => WatchStart::After(current().await?),
            (_, ResourceVersion::Any) => WatchStart::Now,
            (_, ResourceVersion::At(rv)) => WatchStart::After(rv),
        },
    )
}

async fn watch(
    app: &Arc<App>,
    resource: &Arc<Resource>,
    namespace: Option<&str>,
    mut options: Options,
    headers: &HeaderMap,
    user: &str,
) -> Result<Response, ApiError> {
    options.validate_watch(&resource.def.plural)?;
    let start = watch_start(app, &options).await?;
    let timeout = match options.timeout_seconds {
        Some(seconds) => Duration::from_secs(seconds),
        None => {
            // Like kube-apiserver: a random deadline in [min, 2 * min).
            let min = app.config.min_request_timeout;
            min + min.mul_f64(rand::random::<f64>())
        }
    };
    let now = app.clock.now();
    let request = WatchRequest {
        start,
        namespace: namespace.map(str::to_owned),
        labels: options.labels.clone(),
        fields: options.fields.clone(),
        allow_bookmarks: options.allow_bookmarks,
        deadline: Some(now + timeout),
        queue_capacity: None,
    };
    let watch = resource.cache().watch(request, now);
    let user_agent = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let id = app.register_watch(WatchInfo {
        resource: if resource.def.group.is_empty() {
            resource.def.plural.clone()
        } else {
            format!("{}.{}", resource.def.plural, resource.def.group)
        },
        namespace: namespace.map(str::to_owned),
        label_selector: label_text(&options),
        field_selector: field_text(&options),
        user_agent,
        user: user.to_owned(),
        started: now,
        queue: watch.queue().clone(),
        client: crate::operator::debug::current_client(),
    });
    let stream = WatchStream {
        watch,
        app: app.clone(),
        resource: resource.clone(),
        id,
        table: wants_table(headers),
        buffer: Vec::with_capacity(64),
        done: false,
        delivered: app
            .debug
            .delivered_counter(&crate::operator::debug::resource_name(resource)),
    };
    let shutdown = app.shutdown.clone();
    let body = futures_util::stream::unfold(
        (stream, shutdown),
        |(mut stream, mut shutdown)| async move {
            if stream.done {
                return None;
            }
            let parts = tokio::select! {
                parts = stream.next_chunk() => parts,
                _ = shutdown.changed() => return None,
            };
            Some((parts, (stream, shutdown)))
        },
    )
    .flat_map(|parts| futures_util::stream::iter(parts.into_iter().map(Ok::<Bytes, Infallible>)));
    let mut response = Response::new(Body::from_stream(body.boxed()));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, private"),
    );
    Ok(response)
}

fn label_text(options: &Options) -> String {
    options.label_selector_text.clone()
}

fn field_text(options: &Options) -> String {
    options
        .fields
        .requirements()
        .iter()
        .map(|r| {
            format!(
                "{}{}{}",
                r.field,
                if r.negated { "!=" } else { "=" },
                r.value
            )
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// The body of one watch response.
struct WatchStream {
    watch: watchkeeper_core::Watch,
    app: Arc<App>,
    resource: Arc<Resource>,
    id: u64,
    table: bool,
    buffer: Vec<WatchItem>,
    done: bool,
    /// Events written to clients of this resource (`/debug/watchers`).
    delivered: Arc<std::sync::atomic::AtomicU64>,
}

impl Drop for WatchStream {
    fn drop(&mut self) {
        self.app.unregister_watch(self.id);
    }
}

impl WatchStream {
    /// Waits for items and encodes up to 64 of them (and the end, if it came) as body pieces
    /// (see [`watchkeeper_api::watch_frame::encode_frames`]: large objects' cached encodings are shared,
    /// not copied per watcher).
    async fn next_chunk(&mut self) -> Vec<Bytes> {
        let end =
            std::future::poll_fn(|cx| self.watch.poll_pop_many(cx, 64, &mut self.buffer)).await;
        let mut parts = Vec::new();
        let stats = &self.resource.cache().metrics().encode;
        let events = self
            .buffer
            .iter()
            .filter(|item| !matches!(item, WatchItem::Bookmark { .. }))
            .count();
        self.delivered
            .fetch_add(events as u64, std::sync::atomic::Ordering::Relaxed);
        let now = now_unix();
        encode_frames(
            &mut parts,
            &self.resource.def,
            &self.buffer,
            self.table,
            stats,
            now,
        );
        self.buffer.clear();
        if let Some(end) = end {
            self.done = true;
            if let Some(error) = end_error(&end) {
                let mut out = BytesMut::new();
                out.put_slice(b"{\"type\":\"ERROR\",\"object\":");
                out.put_slice(error.to_status().to_string().as_bytes());
                out.put_slice(b"}\n");
                parts.push(out.freeze());
            }
        }
        parts
    }
}

/// The in-stream error for how a watch ended, if it is one.
fn end_error(end: &WatchEnd) -> Option<ApiError> {
    match end {
        WatchEnd::Expired {
            position, floor, ..
        } => Some(ApiError::gone(format!(
            "too old resource version: {position} ({floor})"
        ))),
        WatchEnd::TooLargeResourceVersion { requested, current } => {
            Some(too_large(*requested, *current))
        }
        WatchEnd::Unresponsive
        | WatchEnd::InitialNoProgress
        | WatchEnd::Deadline
        | WatchEnd::Shutdown => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_route_like_kubernetes() {
        let t = parse_target("", "v1", &["namespaces", "default", "pods", "x"]).unwrap();
        assert_eq!(
            (t.plural, t.namespace, t.name),
            ("pods", Some("default"), Some("x"))
        );
        let t = parse_target("", "v1", &["namespaces", "default"]).unwrap();
        assert_eq!(
            (t.plural, t.namespace, t.name),
            ("namespaces", None, Some("default"))
        );
        let t = parse_target("", "v1", &["watch", "namespaces", "ns", "pods"]).unwrap();
        assert!(t.watch_path);
        assert_eq!((t.plural, t.namespace, t.name), ("pods", Some("ns"), None));
        let t = parse_target("", "v1", &["nodes", "n1", "status"]).unwrap();
        assert_eq!(
            (t.plural, t.name, t.subresource),
            ("nodes", Some("n1"), Some("status"))
        );
        assert!(parse_target("", "v1", &["a", "b", "c", "d", "e", "f", "g"]).is_none());
    }
}

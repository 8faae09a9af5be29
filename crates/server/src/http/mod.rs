//! HTTP: one handler that routes Kubernetes paths by hand (the `namespaces/{name}` versus
//! `namespaces/{ns}/{resource}` ambiguity is easier to resolve in code than in a route table),
//! answers every error with a `metav1.Status`, and streams watches as newline-delimited JSON
//! over chunked HTTP/1.1 or HTTP/2 (see [`watch`]).
//!
//! ## Guarantees
//! - Every request becomes one [`RequestContext`] (user, peer, method, path, query, headers,
//!   body) that the handlers take; a resource request adds its target, parsed query and verb
//!   ([`ResourceRequest`]).
//! - Resource requests are served the same way whatever the source
//!   ([`crate::source::Source`]): reads from the caches with Kubernetes' consistency, a read
//!   the cache cannot serve answered by the source (`Source::read_uncached`), writes by
//!   `Source::write`. No handler asks which kind of source it has.
//! - The dependency direction is one way: this module uses `source`, `auth`, `limits`,
//!   `operator` and `cache` (and the leaf `audit::context`); none of them uses it.
//! - A request whose body reaches `--heavy-request-body-bytes` is handled, from its body's
//!   decode to its answer's encodings, on the blocking pool ([`crate::offload`]); so is a long
//!   LIST's `Table` and a large YAML answer. Smaller ones are handled on the runtime worker
//!   exactly as before.

pub mod boxed;
pub mod chunk;
pub mod componentstatus;
pub mod conn_body;
pub mod connection;
pub mod converted;
pub mod deadline;
pub mod discovery;
pub mod gzip;
pub mod health;
pub mod in_poll;
pub mod inner;
pub mod list_body;
pub mod on_wake;
pub mod openapi;
pub mod pod_streams;
pub mod pods;
pub mod pretty;
pub mod proxy_html;
pub mod resource_proxy;
pub mod review;
pub mod scale;
pub mod service;
pub mod state;
pub mod token;
pub mod transform;
pub mod watch;
pub mod wire;
pub mod yaml;

pub use state::App;

use std::sync::Arc;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::Response;
use serde_json::{Value, json};
use watchkeeper_api::negotiate::{Conversion, Format};
use watchkeeper_api::protobuf::PROTOBUF_MEDIA_TYPE;
use watchkeeper_api::query::Options;
use watchkeeper_api::{ApiError, validate_field_selector};
use watchkeeper_core::Encoding;

use crate::auth::{Attributes, User};
use crate::cache::Resource;
use crate::request::{RequestContext, ResourceRequest, Target, Verb};
use crate::respond::{
    KeepJson, conversion, error_response, json_response, negotiated, now_unix, text_response,
    to_protobuf,
};
use crate::source::read::ReadError;

/// Largest request body accepted by default (3 MiB, as kube-apiserver); see
/// `--max-request-body-bytes`.
pub const REQUEST_BODY_MAX: usize = crate::config::REQUEST_BODY_MAX;

/// Bodies are JSON (or a JSON patch type), or Kubernetes protobuf (kubectl's generator
/// commands send built-in kinds that way and never fall back to JSON), which the store source
/// turns into JSON once the resource is known. A create or update body in any other media type
/// — `text/plain`, form and multipart types, which a web page can send without a CORS
/// preflight, CBOR — gets kube-apiserver's 415 (`check_body_media_type`); patches are checked
/// by their patch type; CBOR gets 415 everywhere.
fn unsupported_body(method: &Method, headers: &HeaderMap) -> Option<ApiError> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok());
    if matches!(*method, Method::POST | Method::PUT)
        && let Err(error) = watchkeeper_api::check_body_media_type(content_type)
    {
        return Some(error);
    }
    let content_type = content_type.unwrap_or("application/json");
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

/// The single request handler.
pub async fn handle(State(app): State<Arc<App>>, request: Request) -> Response {
    let started = std::time::Instant::now();
    let (mut parts, body) = request.into_parts();
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
    let path = parts.uri.path();
    // Taken, not copied: the limits layer put it there for this handler only.
    let user = match parts.extensions.remove::<User>() {
        Some(user) => user,
        None => match app.auth.authenticate(path, &parts.headers) {
            Ok(user) => user,
            Err(error) => return error_response(&error),
        },
    };
    let proxied = resource_proxy::is_proxy_path(&crate::limits::decoded_path(path));
    if !body.is_empty()
        && !proxied
        && let Some(error) = unsupported_body(&parts.method, &parts.headers)
    {
        return error_response(&error);
    }
    // A large body is decoded, written and answered on the blocking pool (see `offload`).
    // Boxed either way: the handler's future (which axum moves, then boxes) holds a pointer,
    // not the answer's state machine (~17 KB; held twice over, by `run`'s future and by the
    // plain await, it had doubled the bytes copied per request).
    // The audit context is this task's (a task-local): only a future sent to the pool needs
    // it carried, and it carries the box, not the state machine (wrapping every answer's
    // future had added ~22 k instructions of copies per PATCH).
    // Made in its box (`boxed`): `Box::pin` had copied the ~21 KB state machine into it.
    let heavy = app.offload.is_heavy(body.len());
    if proxied {
        // Body and answer pass through as they are: no YAML, protobuf, indentation or gzip.
        // Boxed: awaited inline, its ~12.8 KB state machine made this handler's future (and
        // every layer's around it) that large for every request, proxied or not, and each
        // layer moved it (69 KB of copies per PATCH; BENCHMARKS.md, invocation BT).
        return boxed::pinned_in_place(|| proxy_answer(&app, started, parts, body, user)).await;
    }
    let work = boxed::pinned_in_place(|| answer(app.clone(), started, parts, body, user));
    if heavy {
        return app
            .offload
            .run(crate::audit::context::carry(work))
            .await
            .unwrap_or_else(|error| error_response(&error));
    }
    work.await
}

/// The context of a request whose body is read and whose caller is known.
fn request_context(
    parts: axum::http::request::Parts,
    body: axum::body::Bytes,
    user: User,
) -> RequestContext {
    RequestContext {
        query: parts.uri.query().map(str::to_owned),
        peer: parts
            .extensions
            .get::<Arc<crate::limits::Connection>>()
            .and_then(|connection| connection.remote)
            .or_else(|| {
                parts
                    .extensions
                    .get::<ConnectInfo<std::net::SocketAddr>>()
                    .map(|info| info.0)
            }),
        method: parts.method,
        // Names are read from the decoded segments (`a%20b` names `a b`), as kube reads Go's
        // `URL.Path`.
        path: crate::limits::decoded_path(parts.uri.path()).into_owned(),
        headers: parts.headers,
        body,
        user,
    }
}

/// A request to a `proxy` subresource ([`resource_proxy`]): authorized as any subresource,
/// then passed on, its body and its answer untouched.
async fn proxy_answer(
    app: &Arc<App>,
    started: std::time::Instant,
    parts: axum::http::request::Parts,
    body: axum::body::Bytes,
    user: User,
) -> Response {
    let context = request_context(parts, body, user);
    let segments: Vec<&str> = context
        .path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let rest = segments.get(2..).unwrap_or_default();
    let result = async {
        let target = Target::parse("", "v1", rest).ok_or_else(ApiError::path_not_found)?;
        let resource = app
            .resource("", "v1", target.plural)
            .ok_or_else(ApiError::path_not_found)?;
        if let Some(error) = scope_error(&resource, target) {
            return Err(error);
        }
        let options = Options::parse(None)?;
        authorize_resource(
            app,
            &context.user,
            &context.method,
            &resource.def,
            target,
            &options,
        )?;
        app.ensure_ready()?;
        resource_proxy::serve(app, &context, target, &resource).await
    }
    .await;
    let response = result.unwrap_or_else(|error| error_response(&error));
    let plural = segments
        .get(if segments.get(2) == Some(&"namespaces") {
            4
        } else {
            2
        })
        .copied()
        .unwrap_or_default()
        .to_owned();
    let verb = resource_proxy::verb_label(&context.method);
    if !verb.is_empty() {
        let micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        app.requests
            .observe(verb, "", &plural, response.status().as_u16(), micros);
    }
    response
}

/// The rest of [`handle`] once the body is read and its caller known: the body's YAML decode,
/// routing, the handler, and the answer's encodings.
async fn answer(
    app: Arc<App>,
    started: std::time::Instant,
    parts: axum::http::request::Parts,
    body: axum::body::Bytes,
    user: User,
) -> Response {
    let accepts_gzip = gzip::accepts_gzip(&parts.headers);
    let pretty = pretty::wants_pretty(parts.uri.query(), &parts.headers);
    let answers_in_yaml = watchkeeper_api::negotiate::answers_in_yaml(
        parts
            .headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok()),
    );
    let body = match yaml::json_body(&parts.method, &parts.headers, body.clone()) {
        Ok(body) => body,
        Err(error) => {
            let error = yaml::undecodable(&app, parts.uri.path(), &body, error);
            return error_response(&error);
        }
    };
    crate::audit::context::request_body(&body);
    crate::offload::phase_boundary().await;
    let context = request_context(parts, body, user);
    let segments: Vec<&str> = context
        .path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    // Resource requests are authorized once their verb is known (in `serve_resource`).
    if !matches!(segments[..], ["api", "v1", _, ..] | ["apis", _, _, _, ..]) {
        let verb = crate::auth::non_resource_verb(&context.method);
        if let Err(error) = app.auth.authorize_request(
            &context.user,
            &Attributes::NonResource {
                verb: &verb,
                path: &context.path,
            },
        ) {
            return error_response(&error);
        }
    }
    let (verb, group, resource, mut response) = route(&app, &context, &segments).await;
    crate::offload::phase_boundary().await;
    if verb != Verb::Watch.label() {
        if answers_in_yaml {
            response = yaml::to_yaml(response, &app.offload).await;
        }
        // Whether to compress is decided on the answer's own length, before any indentation.
        let large = gzip::is_large(app.config.gzip_min_response_bytes, &response);
        if pretty {
            response = pretty::pretty(response);
        }
        response = gzip::compress_if(accepts_gzip && large, response);
    }
    if !verb.is_empty() {
        let micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        app.requests
            .observe(verb, &group, &resource, response.status().as_u16(), micros);
    }
    response
}

/// Authorization from the URL alone, before the body is read, once the in-flight slot or
/// seat is taken (the limits layer calls it through [`crate::limits::LayerState`]): the same
/// attributes the handler authorizes — a non-resource path with the method's verb, or a
/// served resource with its verb, namespace, name and subresource. `Ok` when the URL names nothing served or its
/// query does not parse: the handler then answers 404 or 400 without authorizing anything.
///
/// # Errors
/// 403 Forbidden, as the handler would answer.
pub fn authorize_from_url(
    app: &App,
    user: &User,
    method: &Method,
    path: &str,
    query: Option<&str>,
) -> Result<(), ApiError> {
    // Allowed whatever it asks, and no audit event records the decision: the URL need not
    // be read (its resource, target and options are read again by the handler).
    if app.auth.allows_everything() && !crate::audit::context::is_audited() {
        return Ok(());
    }
    url_attributes(app, method, path, query, |attributes| {
        app.auth.authorize_request(user, attributes)
    })
    .unwrap_or(Ok(()))
}

/// Before [`authorize_from_url`], with `Webhook` in the chain: the webhook's answer for the
/// same attributes is made known (see `auth::authz_webhook`), so the sync decision has it.
pub async fn prepare_authorize_from_url(
    app: &App,
    user: &User,
    method: &Method,
    path: &str,
    query: Option<&str>,
) {
    if app.auth.authz_webhook().is_none() {
        return;
    }
    let key = url_attributes(app, method, path, query, |attributes| {
        app.auth.webhook_key(user, attributes)
    })
    .flatten();
    if let Some(key) = key {
        app.auth.prepare_webhook_key(key).await;
    }
}

/// `f` of the attributes the URL asks for (see [`authorize_from_url`]); `None` when it names
/// nothing served or its query does not parse.
fn url_attributes<R>(
    app: &App,
    method: &Method,
    path: &str,
    query: Option<&str>,
    f: impl FnOnce(&Attributes<'_>) -> R,
) -> Option<R> {
    let segments: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let (group, version, rest) = match segments[..] {
        ["api", "v1", ref rest @ ..] if !rest.is_empty() => ("", "v1", rest),
        ["apis", group, version, ref rest @ ..] if !rest.is_empty() => (group, version, rest),
        _ => {
            let verb = crate::auth::non_resource_verb(method);
            return Some(f(&Attributes::NonResource { verb: &verb, path }));
        }
    };
    let target = Target::parse(group, version, rest)?;
    let resource = app.resource(target.group, target.version, target.plural)?;
    let options = Options::parse(query).ok()?;
    if scope_error(&resource, target).is_some() {
        return None;
    }
    Some(resource_attributes(
        method,
        &resource.def,
        target,
        &options,
        |_, attributes| f(attributes),
    ))
}

/// 404 for a target the resource does not have (a namespace on a cluster-scoped resource, a
/// subresource other than `status`, `scale` where the kind has one, or `namespaces/finalize`).
fn scope_error(resource: &Resource, target: Target<'_>) -> Option<ApiError> {
    let def = &resource.def;
    if !def.namespaced && target.namespace.is_some() {
        return Some(ApiError::path_not_found());
    }
    if let Some(sub) = target.subresource
        && let Some(declared) = &def.declared_subresources
    {
        // A CRD's resource serves exactly the subresources its CRD declares; kube's CRD
        // handler answers any other with the object's NotFound (`widgets.example.com "w" not
        // found`), whether or not the object exists.
        if !declared.iter().any(|d| d == sub) {
            return Some(ApiError::not_found(def, target.name.unwrap_or_default()));
        }
        return None;
    }
    if let Some(sub) = target.subresource
        && sub != "status"
        && !(def.plural == "namespaces" && sub == "finalize")
        && !(sub == "scale" && scale::paths(resource).is_some())
        && !pods::is_pod_subresource(def, sub)
        && !pod_streams::is_stream_subresource(def, sub)
        && !resource_proxy::is_proxy_subresource(def, sub)
        && !token::is_token_subresource(def, sub)
        && !(sub == watchkeeper_api::ephemeral::SUBRESOURCE
            && watchkeeper_api::ephemeral::has_ephemeral_containers(def))
        && !(sub == watchkeeper_api::resize::SUBRESOURCE
            && watchkeeper_api::resize::has_resize(def))
        && !(sub == watchkeeper_api::certificates::APPROVAL
            && watchkeeper_api::certificates::has_approval(def))
    {
        return Some(ApiError::new(
            404,
            "NotFound",
            format!("the server could not find the requested resource ({sub})"),
        ));
    }
    None
}

/// The verb of a resource request, once `user` is authorized for it.
fn authorize_resource(
    app: &App,
    user: &User,
    method: &Method,
    def: &watchkeeper_api::ResourceDef,
    target: Target<'_>,
    options: &Options,
) -> Result<Verb, ApiError> {
    resource_attributes(method, def, target, options, |verb, attributes| {
        app.auth.authorize_request(user, attributes).map(|()| verb)
    })
}

/// `f` of a resource request's verb and attributes.
fn resource_attributes<R>(
    method: &Method,
    def: &watchkeeper_api::ResourceDef,
    target: Target<'_>,
    options: &Options,
    f: impl FnOnce(Verb, &Attributes<'_>) -> R,
) -> R {
    let verb = Verb::of(
        method,
        target.name.is_some(),
        target.watch_path || options.watch,
    );
    // A `proxy` subresource's verb is the method's alone (HEAD is `get`, OPTIONS none).
    let name = match target.subresource {
        Some(sub) if resource_proxy::is_proxy_subresource(def, sub) => {
            std::borrow::Cow::Borrowed(resource_proxy::verb(method))
        }
        _ => verb.authorization_name(method),
    };
    f(
        verb,
        &Attributes::Resource {
            verb: &name,
            def,
            namespace: target.namespace.unwrap_or_default(),
            name: target.name.unwrap_or_default(),
            subresource: target.subresource.unwrap_or_default(),
        },
    )
}

/// `/debug/consistency`: `POST` runs the cache consistency check now (every resource, or the
/// one named by `?resource=plural[.group]`) and answers its reports; `GET` answers the last
/// reports. Other methods get 405.
async fn consistency(app: &Arc<App>, context: &RequestContext, query: Option<&str>) -> Response {
    let reports = if context.method == Method::POST {
        let only = query
            .and_then(|q| serde_urlencoded::from_str::<Vec<(String, String)>>(q).ok())
            .and_then(|pairs| pairs.into_iter().find(|(k, _)| k == "resource"))
            .map(|(_, v)| v);
        let resources = app.resources();
        if let Some(name) = &only
            && !resources.iter().any(|r| r.name() == *name)
        {
            return error_response(&ApiError::bad_request(format!(
                "resource {name:?} is not served"
            )));
        }
        app.consistency
            .check(&resources, &app.source, only.as_deref())
            .await
    } else if context.method == Method::GET {
        app.consistency.last_reports()
    } else {
        return error_response(&ApiError::method_not_allowed(
            "the server does not allow this method on the requested resource",
        ));
    };
    let checks: Vec<Value> = reports.iter().map(|r| r.to_json()).collect();
    json_response(
        StatusCode::OK,
        json!({"apiVersion": "watchkeeper.debug/v1", "kind": "ConsistencyChecks", "checks": checks})
            .to_string(),
    )
}

/// The service account issuer's OIDC discovery document or key set (see
/// `auth::serviceaccount`), as kube-apiserver serves them; 404 when not served.
fn openid(app: &App, keyset: bool) -> Response {
    let Some(discovery) = app.auth.service_accounts().and_then(|t| t.discovery()) else {
        return error_response(&ApiError::path_not_found());
    };
    let (body, content_type) = if keyset {
        (&discovery.keyset, "application/jwk-set+json")
    } else {
        (&discovery.configuration, "application/json")
    };
    let mut response = text_response(StatusCode::OK, body);
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static(content_type),
    );
    headers.insert(
        header::CACHE_CONTROL,
        axum::http::HeaderValue::from_static("public, max-age=3600"),
    );
    response
}

async fn route(
    app: &Arc<App>,
    context: &RequestContext,
    segments: &[&str],
) -> (&'static str, String, String, Response) {
    let ok = |value: Value| json_response(StatusCode::OK, value.to_string());
    let not_found = || error_response(&ApiError::path_not_found());
    let query = context.query.as_deref();
    let response = match segments {
        ["version"] => ok(watchkeeper_api::version_info()),
        [endpoint @ ("healthz" | "livez" | "readyz")] => {
            let endpoint =
                health::Endpoint::from_segment(endpoint).unwrap_or(health::Endpoint::Healthz);
            health::root(app, endpoint, query).await
        }
        [endpoint @ ("healthz" | "livez" | "readyz"), check] => {
            let endpoint =
                health::Endpoint::from_segment(endpoint).unwrap_or(health::Endpoint::Healthz);
            health::single(app, endpoint, check).await
        }
        ["metrics"] => {
            let format = crate::operator::metrics::Format::negotiate(&context.headers);
            let body = crate::operator::metrics::collect(&app.observed()).encode(format);
            let mut response = text_response(StatusCode::OK, &body);
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                axum::http::HeaderValue::from_static(format.content_type()),
            );
            response
        }
        [".well-known", "openid-configuration"] => openid(app, false),
        ["openid", "v1", "jwks"] => openid(app, true),
        ["debug", "consistency"] => consistency(app, context, query).await,
        ["debug", "api_priority_and_fairness", name] => {
            use crate::limits::apf::dump;
            match (app.limits.apf(), dump::Table::named(name)) {
                (Some(apf), Some(table)) => text_response(
                    StatusCode::OK,
                    &dump::render(table, &apf.dump(), dump::includes_details(query)),
                ),
                _ => not_found(),
            }
        }
        ["debug", ..] | ["ui", ..] => {
            crate::operator::debug::serve(&app.observed(), segments, query)
        }
        ["api"] => discovery::root(app, context, true),
        ["apis"] => discovery::root(app, context, false),
        ["api", "v1"] => {
            discovery::resource_list(&app.resources(), "", "v1").map_or_else(not_found, ok)
        }
        ["apis", group] => {
            let remote = discovery::remote_group_versions(app);
            watchkeeper_api::api_group(&app.resources().defs, &remote, group)
                .map_or_else(not_found, ok)
        }
        ["apis", group, version] => discovery::resource_list(&app.resources(), group, version)
            .map_or_else(|| not_served(app, group, version), ok),
        ["openapi", "v2"] => {
            openapi::v2(
                &app.openapi,
                &app.offload,
                &app.resources(),
                &context.headers,
            )
            .await
        }
        ["openapi", "v3"] => openapi::v3_index(&app.openapi, &app.offload, &app.resources()).await,
        ["openapi", "v3", "api", "v1"] => {
            openapi::v3(&app.openapi, &app.offload, &app.resources(), "", "v1").await
        }
        ["openapi", "v3", "apis", group, version] => {
            openapi::v3(&app.openapi, &app.offload, &app.resources(), group, version).await
        }
        ["api", "v1", "namespaces", namespace, "bindings"] => {
            // Boxed, as the other paths whose state holds a whole write (see `answer`).
            let response = boxed::pinned_in_place(|| pods::serve_bindings(app, context, namespace))
                .await
                .unwrap_or_else(|error| error_response(&error));
            let response =
                to_protobuf(negotiated(&context.headers, None).ok(), response, || {}).await;
            return ("create", String::new(), "bindings".to_owned(), response);
        }
        ["api", "v1", rest @ ..] => {
            if let Some((verb, response)) = componentstatus::serve(app, context, rest).await {
                return (
                    verb,
                    String::new(),
                    watchkeeper_api::componentstatus::PLURAL.to_owned(),
                    response,
                );
            }
            return resource_request(app, context, "", "v1", rest).await;
        }
        ["apis", group, version, rest @ ..] => {
            if let Some(result) = review::serve(app, context, group, version, rest).await {
                let plural = rest.last().copied().unwrap_or_default().to_owned();
                let response = result.unwrap_or_else(|error| error_response(&error));
                let response =
                    to_protobuf(negotiated(&context.headers, None).ok(), response, || {}).await;
                return ("create", (*group).to_owned(), plural, response);
            }
            return resource_request(app, context, group, version, rest).await;
        }
        _ => not_found(),
    };
    ("", String::new(), String::new(), response)
}

/// The answer for a path under `/api/v1` or `/apis/{group}/{version}` the server has nothing
/// at: 503 when
/// an APIService hands that group/version to a Service (kube-aggregator's, see
/// [`discovery::remote_group_versions`]), else 404.
fn not_served(app: &App, group: &str, version: &str) -> Response {
    if discovery::remote_group_versions(app)
        .iter()
        .any(|r| r.is(group, version))
    {
        discovery::unavailable()
    } else {
        error_response(&ApiError::path_not_found())
    }
}

async fn resource_request(
    app: &Arc<App>,
    context: &RequestContext,
    group: &str,
    version: &str,
    rest: &[&str],
) -> (&'static str, String, String, Response) {
    let not_found = || {
        (
            "",
            String::new(),
            String::new(),
            not_served(app, group, version),
        )
    };
    let Some(target) = Target::parse(group, version, rest) else {
        return not_found();
    };
    let Some(resource) = app.resource(target.group, target.version, target.plural) else {
        return not_found();
    };
    let (verb, result) = serve_resource(app, context, &resource, target).await;
    let mut response = result.unwrap_or_else(|error| error_response(&error));
    // Every request to a deprecated custom resource version is warned, as kube warns it.
    if let Some(custom) = resource.custom()
        && let Some(warning) = &custom.deprecation_warning
        && let Some(value) = crate::respond::warning_header(warning)
    {
        response
            .headers_mut()
            .append(axum::http::header::WARNING, value);
    }
    // Objects, lists and Status errors in protobuf when the client negotiated it.
    let response = to_protobuf(
        negotiated(&context.headers, Some(&resource.def)).ok(),
        response,
        || resource.mark_protobuf_incomplete(),
    )
    .await;
    (verb, group.to_owned(), target.plural.to_owned(), response)
}

async fn serve_resource(
    app: &Arc<App>,
    context: &RequestContext,
    resource: &Arc<Resource>,
    target: Target<'_>,
) -> (&'static str, Result<Response, ApiError>) {
    let def = &resource.def;
    // Scope checks: a cluster-scoped resource has no namespace in its path.
    if let Some(error) = scope_error(resource, target) {
        return ("", Err(error));
    }
    let options = match Options::parse(context.query.as_deref()) {
        Ok(options) => options,
        Err(error) => return ("", Err(error)),
    };
    // The limits layer authorized the same attributes before the body was read; this is the
    // same decision, kept here so that no handler path depends on the layer for it.
    let verb = match authorize_resource(app, &context.user, &context.method, def, target, &options)
    {
        Ok(verb) => verb,
        Err(error) => return ("", Err(error)),
    };
    if let Err(error) = validate_field_selector(def, &options.fields) {
        return ("", Err(error));
    }
    if let Err(error) = app.ensure_ready() {
        return ("", Err(error));
    }
    let request = ResourceRequest {
        context,
        target,
        options,
        verb,
    };
    if target.subresource == Some("scale") && target.name.is_some() {
        // Boxed: a path whose state holds a whole write sets the size of every request's
        // future (allocated per request with the answer's: BENCHMARKS.md, invocation BT).
        let served = boxed::pinned_in_place(|| scale::serve(app, &request, resource)).await;
        return (verb.label(), served);
    }
    if let Some(sub) = target.subresource
        && target.name.is_some()
        && pods::is_pod_subresource(def, sub)
    {
        // Boxed, as `scale::serve` above.
        let served = boxed::pinned_in_place(|| pods::serve(app, &request, resource)).await;
        return (verb.label(), served);
    }
    if let Some(sub) = target.subresource
        && target.name.is_some()
        && pod_streams::is_stream_subresource(def, sub)
    {
        // Boxed, as `scale::serve` above (~11 KB).
        let served = boxed::pinned_in_place(|| pod_streams::serve(app, &request, resource)).await;
        return (verb.label(), served);
    }
    if let Some(sub) = target.subresource
        && target.name.is_some()
        && token::is_token_subresource(def, sub)
    {
        // Boxed, as `scale::serve` above (~11.6 KB).
        let served = boxed::pinned_in_place(|| token::serve(app, &request, resource)).await;
        return (verb.label(), served);
    }
    if let Some(refusal) = converted::refused(resource, verb) {
        return (verb.label(), Err(refusal));
    }
    let result = match verb {
        Verb::Watch => watch::watch(app, &request, resource).await,
        // Boxed where they are made, as `scale::serve` above: a LIST's state (~17 KB: its
        // pages, conversions and encodings) and a GET's (~10 KB) had set the size of every
        // request's future, a PATCH's and a watch's included (the answer's box, ~20 KB per
        // request; a write's own path is ~2 KB and boxed below it).
        Verb::List => boxed::pinned_in_place(|| list(app, &request, resource)).await,
        Verb::Get => boxed::pinned_in_place(|| get(app, &request, resource)).await,
        Verb::Create if target.name.is_none() => write(app, &request, resource).await,
        Verb::Update | Verb::Patch if target.name.is_some() => write(app, &request, resource).await,
        Verb::Delete | Verb::DeleteCollection => write(app, &request, resource).await,
        Verb::Create | Verb::Update | Verb::Patch | Verb::Other => {
            return (
                "",
                Err(ApiError::method_not_allowed_on_resource(&context.method)),
            );
        }
    };
    (verb.label(), result)
}

async fn write(
    app: &App,
    request: &ResourceRequest<'_>,
    resource: &Resource,
) -> Result<Response, ApiError> {
    let conversion = conversion(&request.context.headers, &resource.def)?;
    let result = match resource.webhook.as_deref() {
        // Boxed, as `scale::serve`: a converting write holds a whole write and more.
        Some(view) => {
            boxed::pinned_in_place(|| converted::write(app, request, resource, view)).await
        }
        None => app.source.write(request, resource, &app.resources()).await,
    };
    if let Err(error) = &result
        && watchkeeper_api::patch::is_copy_limit_refusal(error)
    {
        app.limits.count(crate::limits::Limit::PatchCopyBytes);
    }
    if let Err(error) = &result
        && crate::source::catalog::VersionsBound::is_refusal(error)
    {
        app.limits
            .count(crate::limits::Limit::CustomResourceVersions);
    }
    match result {
        Ok(response)
            if conversion == Conversion::PartialObjectMetadata && request.target.name.is_some() =>
        {
            partial_object_metadata(response).await
        }
        other => other,
    }
}

/// A write's answer as kube-apiserver transforms it for an `Accept` asking for
/// `PartialObjectMetadata`: the object's kind and apiVersion become `PartialObjectMetadata`
/// and `meta.k8s.io/v1` and only its metadata stays; a `Status` (a deletion's answer) is
/// answered as it is.
async fn partial_object_metadata(response: Response) -> Result<Response, ApiError> {
    let (parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX)
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let object: Value = match watchkeeper_api::go_json::parse_stored(&bytes) {
        Ok(object @ Value::Object(_)) => object,
        _ => return Ok(Response::from_parts(parts, bytes.into())),
    };
    if object.get("kind").and_then(Value::as_str) == Some("Status") {
        return Ok(Response::from_parts(parts, bytes.into()));
    }
    let partial = json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": object.get("metadata").cloned().unwrap_or_else(|| json!({})),
    });
    Ok(json_response(
        parts.status,
        watchkeeper_api::object_body(&partial),
    ))
}

async fn list(
    app: &App,
    request: &ResourceRequest<'_>,
    resource: &Resource,
) -> Result<Response, ApiError> {
    request.options.validate_list()?;
    let negotiated = negotiated(&request.context.headers, Some(&resource.def))?;
    let conversion = negotiated.conversion;
    if conversion == Conversion::PartialObjectMetadata {
        return Err(ApiError::not_acceptable(format!(
            "you requested PartialObjectMetadata, but the requested object is a list (*{}.{})",
            resource.def.version,
            resource.def.list_kind()
        )));
    }
    let page = match app
        .source
        .list(resource, request.target.namespace, &request.options)
        .await
    {
        Ok(page) => page,
        Err(ReadError::Refused(error)) => return Err(error),
        Err(ReadError::Uncached(error)) => {
            return app.source.read_uncached(request, resource, error).await;
        }
    };
    let def = &resource.def;
    if conversion == Conversion::Table {
        // A long list's table is built on the blocking pool: its objects' stored sizes (1 KiB
        // each where the source gave none) times the printer columns against
        // `--heavy-request-body-bytes`.
        let size = page
            .items
            .iter()
            .map(|o| match o.size_hint() {
                0 => 1024,
                known => known,
            })
            .sum::<usize>()
            .saturating_mul(1 + def.printer_columns.len());
        let (revision, now) = (page.revision.to_string(), now_unix());
        let table = if app.offload.is_heavy(size) {
            let (def, items, continue_token) = (def.clone(), page.items, page.continue_token);
            app.offload
                .compute(size, move || {
                    table_json(&def, &items, &revision, continue_token.as_deref(), now)
                })
                .await?
        } else {
            let continue_token = page.continue_token.as_deref();
            table_json(def, &page.items, &revision, continue_token, now)
        };
        return Ok(json_response(StatusCode::OK, table));
    }
    let mut metadata = json!({"resourceVersion": page.revision.to_string()});
    if let Some(token) = &page.continue_token {
        metadata["continue"] = json!(token);
    }
    if let Some(remaining) = page.remaining {
        metadata["remainingItemCount"] = json!(remaining);
    }
    let stats = &resource.cache().metrics().encode;
    let (list_kind, api_version, encoding) = if conversion == Conversion::PartialObjectMetadataList
    {
        (
            "PartialObjectMetadataList".to_owned(),
            "meta.k8s.io/v1".to_owned(),
            Encoding::PartialMetadataJson,
        )
    } else {
        (def.list_kind(), def.api_version(), Encoding::Json)
    };
    if negotiated.format == Format::Protobuf {
        let framing = if conversion == Conversion::PartialObjectMetadataList {
            list_body::Framing::ProtobufMetadata
        } else {
            list_body::Framing::Protobuf
        };
        match protobuf_list(
            (&api_version, &list_kind, framing),
            &metadata,
            page.items,
            stats,
            app.config.list_chunk_bytes,
        ) {
            Ok(body) => {
                let mut response = json_response(StatusCode::OK, axum::body::Body::new(body));
                response.headers_mut().insert(
                    header::CONTENT_TYPE,
                    axum::http::HeaderValue::from_static(PROTOBUF_MEDIA_TYPE),
                );
                return Ok(response);
            }
            Err((error, _)) if !negotiated.json_fallback => {
                resource.mark_protobuf_incomplete();
                return Err(error);
            }
            Err((_, items)) => {
                resource.mark_protobuf_incomplete();
                // An item the protobuf schemas cannot hold: the whole list in JSON, which
                // client-go decodes by the response's Content-Type.
                let head = format!(
                    "{{\"kind\":\"{list_kind}\",\"apiVersion\":\"{api_version}\",\"metadata\":{metadata},\"items\":["
                );
                let body = list_body::ListBody::new(
                    stats,
                    list_body::Framing::Json(encoding),
                    head.into(),
                    items,
                    app.config.list_chunk_bytes,
                );
                let mut response = json_response(StatusCode::OK, axum::body::Body::new(body));
                response.extensions_mut().insert(KeepJson);
                return Ok(response);
            }
        }
    }
    let head = format!(
        "{{\"kind\":\"{list_kind}\",\"apiVersion\":\"{api_version}\",\"metadata\":{metadata},\"items\":["
    );
    // Streamed from the page's objects (shared with the cache), their cached encodings sent
    // as they are: no per-request serialization and no second copy of the response.
    let body = list_body::ListBody::new(
        stats,
        list_body::Framing::Json(encoding),
        head.into(),
        page.items,
        app.config.list_chunk_bytes,
    );
    Ok(json_response(StatusCode::OK, axum::body::Body::new(body)))
}

/// Rows of a `Table` built between two checks that its request is still there.
const TABLE_ROWS_PER_CHECK: usize = 8;

/// A LIST page as a `Table`, in JSON. On the heavy pool, its rows are built a few at a time,
/// and it stops (answering nothing: its request is gone) once its request is
/// ([`crate::offload::stopped`]).
fn table_json(
    def: &watchkeeper_api::ResourceDef,
    items: &[Arc<watchkeeper_core::Object>],
    revision: &str,
    continue_token: Option<&str>,
    now: i64,
) -> String {
    let bodies: Vec<&Value> = items.iter().map(|o| o.body()).collect();
    let mut chunks = bodies.chunks(TABLE_ROWS_PER_CHECK);
    let first = chunks.next().unwrap_or_default();
    let mut table = watchkeeper_api::to_table(def, first, revision, continue_token, now);
    for chunk in chunks {
        if crate::offload::stopped() {
            return String::new();
        }
        let mut more = watchkeeper_api::to_table_with(def, chunk, "", None, now, false);
        if let (Some(rows), Some(more)) = (
            table.get_mut("rows").and_then(Value::as_array_mut),
            more.get_mut("rows").and_then(Value::as_array_mut),
        ) {
            rows.append(more);
        }
    }
    table.to_string()
}

/// A LIST body in protobuf: the envelope (`apiVersion` and list kind, with the items'
/// `framing`) around the list message (its `ListMeta`, then every item's cached message, or
/// its `PartialObjectMetadata`), streamed like the JSON one.
///
/// # Errors
/// 406 NotAcceptable, with the items back, when an item cannot be encoded as protobuf.
#[allow(clippy::result_large_err)]
fn protobuf_list(
    (api_version, list_kind, framing): (&str, &str, list_body::Framing),
    metadata: &Value,
    items: Vec<Arc<watchkeeper_core::Object>>,
    stats: &watchkeeper_core::EncodeStats,
    piece_bytes: usize,
) -> Result<list_body::ListBody, (ApiError, Vec<Arc<watchkeeper_core::Object>>)> {
    let refuse = |message: String| {
        ApiError::not_acceptable(format!(
            "the response cannot be encoded as application/vnd.kubernetes.protobuf: {message}; accept application/json"
        ))
    };
    let list_meta = match watchkeeper_api::protobuf::list_meta_field(metadata) {
        Ok(list_meta) => list_meta,
        Err(error) => return Err((refuse(error.0), items)),
    };
    let Some(items_len) = list_body::protobuf_items_len(stats, &items, framing) else {
        let reason = items
            .iter()
            .find_map(|o| watchkeeper_api::protobuf::encode_object_message(o.body()).err())
            .map_or_else(
                || "an object's metadata has a field outside ObjectMeta".to_owned(),
                |error| error.0,
            );
        return Err((refuse(reason), items));
    };
    let mut head = watchkeeper_api::protobuf::envelope_head(
        api_version,
        list_kind,
        list_meta.len() + items_len,
    );
    head.extend_from_slice(&list_meta);
    Ok(list_body::ListBody::new(
        stats,
        framing,
        head.into(),
        items,
        piece_bytes,
    ))
}

async fn get(
    app: &App,
    request: &ResourceRequest<'_>,
    resource: &Resource,
) -> Result<Response, ApiError> {
    let conversion = conversion(&request.context.headers, &resource.def)?;
    if conversion == Conversion::PartialObjectMetadataList {
        return Err(ApiError::not_acceptable(format!(
            "you requested PartialObjectMetadataList, but the requested object is not a list (*{}.{})",
            resource.def.version, resource.def.kind
        )));
    }
    let target = &request.target;
    let name = target.name.unwrap_or_default();
    let bytes = match app
        .source
        .get(
            resource,
            target.namespace.unwrap_or_default(),
            name,
            &request.options,
        )
        .await
    {
        Ok(bytes) => bytes,
        Err(ReadError::Refused(error)) => return Err(error),
        Err(ReadError::Uncached(error)) => {
            return app.source.read_uncached(request, resource, error).await;
        }
    };
    if conversion == Conversion::PartialObjectMetadata {
        let object: Value = watchkeeper_api::go_json::parse_stored(&bytes)
            .map_err(|e| ApiError::internal(e.to_string()))?;
        let partial = json!({
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": object.get("metadata").cloned().unwrap_or_else(|| json!({})),
        });
        return Ok(json_response(
            StatusCode::OK,
            watchkeeper_api::object_body(&partial),
        ));
    }
    if conversion == Conversion::Table {
        // On the blocking pool when the object's size times the printer columns is heavy,
        // as a LIST's.
        let size = bytes
            .len()
            .saturating_mul(1 + resource.def.printer_columns.len());
        let def = resource.def.clone();
        let table = app
            .offload
            .compute(size, move || {
                let object: Value = watchkeeper_api::go_json::parse_stored(&bytes)
                    .map_err(|e| ApiError::internal(e.to_string()))?;
                let rv = object
                    .pointer("/metadata/resourceVersion")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                Ok::<_, ApiError>(
                    watchkeeper_api::to_table(&def, &[&object], &rv, None, now_unix()).to_string(),
                )
            })
            .await??;
        return Ok(json_response(StatusCode::OK, table));
    }
    Ok(json_response(StatusCode::OK, bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The size of the future `f` returns, without calling it.
    fn future_size<A, B, F: Future>(_: impl FnOnce(A, B) -> F) -> usize {
        std::mem::size_of::<F>()
    }

    /// Goal: the request handler's future stays small. Every layer around it (the limits,
    /// the request deadline, the audit id, the service's box) holds it and moves it, so its
    /// size is copied several times per request: a rare path's state machine awaited inline
    /// (the `proxy` subresource's, 12.8 KB) had made it 13.3 KB for every request. The large
    /// states are boxed where they are made (`boxed::pinned_in_place`).
    #[test]
    fn the_handlers_future_holds_no_large_state_inline() {
        let size = future_size(handle);
        assert!(size <= 2048, "the handler's future is {size} bytes");
    }

    /// Goal: the answer's future, allocated per request (`boxed::pinned_in_place`), holds no
    /// path's large state inline: not a rare path's that holds a whole write and more (a
    /// collection delete, the `scale`, pod, binding, stream and token subresources, a
    /// converting write), nor a LIST's, a GET's or a write's — each is boxed where it is made,
    /// so a request allocates the state of the path it takes. In a release build it was 26.3
    /// KB, then 20 KB (BENCHMARKS.md, invocation BT: a LIST's 17.4 KB set it), and is 6.5 KB
    /// (invocation BY: a watch's 3.8 KB and the routing's), in a test build too.
    #[test]
    fn the_answers_future_holds_no_rare_paths_state_inline() {
        fn size<F: Future>(
            _: impl FnOnce(
                Arc<App>,
                std::time::Instant,
                axum::http::request::Parts,
                axum::body::Bytes,
                User,
            ) -> F,
        ) -> usize {
            std::mem::size_of::<F>()
        }
        let size = size(answer);
        assert!(size <= 8 * 1024, "the answer's future is {size} bytes");
    }
}

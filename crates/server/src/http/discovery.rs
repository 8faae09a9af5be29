//! `/api` and `/apis`: the legacy discovery documents, or the aggregated ones
//! (`apidiscovery.k8s.io/v2`, `v2beta1`) when the client's `Accept` asks for them first, as
//! kube-apiserver negotiates them. The aggregated answer names its version in `Content-Type`
//! (how clients tell the two apart), carries an `ETag` with `Vary: Accept` and
//! `Cache-Control: public`, and a request whose `If-None-Match` names the current `ETag` gets
//! 304 without a body.
//!
//! Over a store, an APIService that hands a group/version the server does not serve to a
//! Service (`spec.service`; kube-aggregator would proxy to it) is listed in the legacy
//! documents (`/apis`, `/apis/{group}`) with its priorities, as kube's aggregator lists every
//! APIService's group whether or not its Service answers, and every path under it answers
//! 503 `service unavailable` in kube-aggregator's words and form ([`unavailable`]): this server
//! proxies to no Service (the APIService's `Available` condition says so,
//! `crate::controllers::apiservices`). The aggregated documents list such a version as kube's
//! lists one whose Service's discovery it could not read: `freshness: Stale`, no resources
//! (client-go then reports the group/version as failed). In caching-proxy mode
//! the API server's APIServices are its own business: nothing is listed or answered for them.

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use serde_json::Value;
use watchkeeper_api::{
    RemoteGroupVersion, aggregated_discovery, api_group_list, api_versions, discovery_etag,
    negotiate_discovery, serves_group_version,
};

use super::App;
use crate::request::RequestContext;
use crate::respond::{go_http_error, json_response};

/// The answer to `GET /api` (`core`) or `GET /apis`.
pub fn root(app: &App, context: &RequestContext, core: bool) -> Response {
    let accept = context
        .headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok());
    let remote = if core {
        Vec::new()
    } else {
        remote_group_versions(app)
    };
    let Some(version) = negotiate_discovery(accept) else {
        let legacy = if core {
            api_versions()
        } else {
            api_group_list(&app.resources().defs, &remote)
        };
        let mut response = json_response(StatusCode::OK, legacy.to_string());
        response
            .headers_mut()
            .insert(header::VARY, HeaderValue::from_static("Accept"));
        return response;
    };
    let body = aggregated_discovery(&app.resources().defs, &remote, core, version).to_string();
    let etag = discovery_etag(&body);
    let not_modified = context
        .headers
        .get(header::IF_NONE_MATCH)
        .is_some_and(|value| value.as_bytes() == etag.as_bytes());
    let mut response = if not_modified {
        let mut response = Response::new(Body::empty());
        *response.status_mut() = StatusCode::NOT_MODIFIED;
        response
    } else {
        let mut response = json_response(StatusCode::OK, body);
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(version.content_type()),
        );
        response
    };
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(&etag) {
        headers.insert(header::ETAG, value);
    }
    headers.insert(header::VARY, HeaderValue::from_static("Accept"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("public"));
    response
}

/// `/api/v1` or `/apis/{group}/{version}`: the `APIResourceList` of `served` there, each
/// resource with the `storageVersionHash` of the version its objects are stored at (a view's
/// storage version, e.g. core `v1` for `events.k8s.io/v1` Events and a CRD's storage version
/// for each of its served versions), as kube-apiserver lists it.
pub fn resource_list(
    served: &crate::cache::Served,
    group: &str,
    version: &str,
) -> Option<serde_json::Value> {
    let hash = |def: &watchkeeper_api::ResourceDef| {
        let resource = served.find(&def.group, &def.version, &def.plural)?;
        let storage = resource.conversion.as_ref().map_or_else(
            || watchkeeper_api::discovery::builtin_storage_api_version(def),
            |c| c.storage_api_version().to_owned(),
        );
        Some(watchkeeper_api::storage_version_hash(
            &storage,
            &def.kind,
            |bytes| {
                let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
                let mut out = [0; 32];
                out.copy_from_slice(digest.as_ref());
                out
            },
        ))
    };
    watchkeeper_api::api_resource_list(&served.defs, group, version, &hash)
}

/// The group/versions APIServices hand to a Service that the server does not serve itself (see
/// the module docs), from the cache; none in caching-proxy mode.
pub fn remote_group_versions(app: &App) -> Vec<RemoteGroupVersion> {
    if app.source.as_store().is_none() {
        return Vec::new();
    }
    let Some(api_services) = app.resource("apiregistration.k8s.io", "v1", "apiservices") else {
        return Vec::new();
    };
    let served = app.resources();
    let priority = |spec: &Value, field: &str| {
        spec.get(field)
            .and_then(Value::as_i64)
            .and_then(|p| i32::try_from(p).ok())
            .unwrap_or(0)
    };
    let mut remote: Vec<RemoteGroupVersion> = Vec::new();
    for object in api_services.cache().latest().range(None, None) {
        let Some(spec) = object.body().get("spec") else {
            continue;
        };
        let field = |name: &str| spec.get(name).and_then(Value::as_str).unwrap_or_default();
        let (group, version) = (field("group"), field("version"));
        if spec.get("service").is_none_or(Value::is_null)
            || group.is_empty()
            || version.is_empty()
            || serves_group_version(&served.defs, group, version)
            || remote.iter().any(|r| r.is(group, version))
        {
            continue;
        }
        remote.push(RemoteGroupVersion {
            group: group.to_owned(),
            version: version.to_owned(),
            group_priority: priority(spec, "groupPriorityMinimum"),
            version_priority: priority(spec, "versionPriority"),
        });
    }
    remote
}

/// kube-aggregator's answer for a group/version whose APIService's Service is not available
/// (`proxyError`: Go's `http.Error`, plain text), which is every remote one here.
pub fn unavailable() -> Response {
    go_http_error(StatusCode::SERVICE_UNAVAILABLE, "service unavailable\n")
}

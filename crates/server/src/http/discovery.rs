//! `/api` and `/apis`: the legacy discovery documents, or the aggregated ones
//! (`apidiscovery.k8s.io/v2`, `v2beta1`) when the client's `Accept` asks for them first, as
//! kube-apiserver negotiates them. The aggregated answer names its version in `Content-Type`
//! (how clients tell the two apart), carries an `ETag` with `Vary: Accept` and
//! `Cache-Control: public`, and a request whose `If-None-Match` names the current `ETag` gets
//! 304 without a body.

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use watchkeeper_api::{
    aggregated_discovery, api_group_list, api_versions, discovery_etag, negotiate_discovery,
};

use super::App;
use crate::request::RequestContext;
use crate::respond::json_response;

/// The answer to `GET /api` (`core`) or `GET /apis`.
pub fn root(app: &App, context: &RequestContext, core: bool) -> Response {
    let accept = context
        .headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok());
    let Some(version) = negotiate_discovery(accept) else {
        let legacy = if core {
            api_versions()
        } else {
            api_group_list(&app.resources().defs)
        };
        let mut response = json_response(StatusCode::OK, legacy.to_string());
        response
            .headers_mut()
            .insert(header::VARY, HeaderValue::from_static("Accept"));
        return response;
    };
    let body = aggregated_discovery(&app.resources().defs, core, version).to_string();
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

//! The reads and writes a subresource handler (`scale`, pods' `binding` and `eviction`) makes
//! on behalf of its request: a GET of one object from the cache, and a merge patch or a delete
//! sent through the ordinary write path as the request's user (so validation, dry run,
//! conflicts, watch events and the caching-proxy mode's forwarding are those of any write);
//! and the common start of a create-only subresource (pods' `binding` and `eviction`, service
//! accounts' `token`).

use axum::http::{HeaderValue, Method, header};
use axum::response::Response;
use serde_json::Value;
use watchkeeper_api::ApiError;
use watchkeeper_api::query::Options;

use super::App;
use crate::cache::Resource;
use crate::request::{RequestContext, ResourceRequest, Target, Verb};
use crate::source::read::ReadError;

/// The start of a create-only subresource: `Some` answer when the handler has nothing more to
/// do — kube-apiserver's 405 for any other verb, or, in caching-proxy mode, the upstream's own
/// answer to the request forwarded as it is (its own checks and state).
pub async fn create_only_or_forward(
    app: &App,
    request: &ResourceRequest<'_>,
    resource: &Resource,
) -> Option<Result<Response, ApiError>> {
    if request.verb != Verb::Create {
        return Some(Err(ApiError::method_not_allowed_on_resource(
            &request.context.method,
        )));
    }
    if app.source.as_upstream().is_some() {
        return Some(app.source.write(request, resource, &app.resources()).await);
    }
    None
}

/// One object of `resource`, decoded.
///
/// # Errors
/// 404, or the cache's refusal.
pub async fn read_object(
    app: &App,
    resource: &Resource,
    namespace: &str,
    name: &str,
) -> Result<Value, ApiError> {
    let bytes = match app
        .source
        .get(resource, namespace, name, &Options::parse(None)?)
        .await
    {
        Ok(bytes) => bytes,
        Err(ReadError::Refused(error) | ReadError::Uncached(error)) => return Err(error),
    };
    watchkeeper_api::go_json::parse_stored(&bytes).map_err(|e| ApiError::internal(e.to_string()))
}

/// Sends one write of `resource` at `target` (a merge patch with `body`, or a DELETE with
/// `body` as its options) through the ordinary write path, as `request`'s user, with `query`
/// as its options.
///
/// # Errors
/// As any write.
pub async fn write_as(
    app: &App,
    request: &ResourceRequest<'_>,
    resource: &Resource,
    method: Method,
    target: Target<'_>,
    body: &Value,
    query: Option<String>,
) -> Result<Response, ApiError> {
    let mut headers = request.context.headers.clone();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/merge-patch+json"),
    );
    let verb = if method == Method::DELETE {
        Verb::Delete
    } else {
        Verb::Patch
    };
    let options = Options::parse(query.as_deref())?;
    let context = RequestContext {
        method,
        path: request.context.path.clone(),
        query,
        headers,
        body: bytes::Bytes::from(body.to_string()),
        user: request.context.user.clone(),
        peer: request.context.peer,
    };
    let inner = ResourceRequest {
        context: &context,
        target,
        options,
        verb,
    };
    match resource.webhook.as_deref() {
        // A version converted by its CRD's webhook is written at the storage version.
        Some(view) => super::converted::write(app, &inner, resource, view).await,
        None => app.source.write(&inner, resource, &app.resources()).await,
    }
}

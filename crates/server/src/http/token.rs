//! `serviceaccounts/{name}/token`: the TokenRequest subresource (`authentication.k8s.io/v1`)
//! that `kubectl create token`, client-go's `CreateToken` and kube-rs's
//! `create_token_request` call, with kube-apiserver's semantics
//! (`pkg/registry/core/serviceaccount/storage/token.go`).
//!
//! ## Guarantees
//! - `POST` only (verb `create` on `serviceaccounts/token`, authorized like any subresource);
//!   the body is a `TokenRequest` in JSON or protobuf. The answer is 201 with the
//!   `TokenRequest`: its spec as defaulted (`audiences` → `--api-audiences`,
//!   `expirationSeconds` → 3600, capped by `--service-account-max-token-expiration-seconds`
//!   when set) and `status.token`, `status.expirationTimestamp`. Nothing is stored or watched.
//! - Refusals are kube-apiserver's, in its order: 422 for a body whose `metadata.name` or
//!   `namespace` is not the URL's; 404 `serviceaccounts "NAME" not found`; 422 for
//!   `expirationSeconds` under 600 (`may not specify a duration less than 10 minutes`) or
//!   over 2^32; a `boundObjectRef` must name a `v1` `Pod`, `Secret` or `Node` that exists
//!   (404 otherwise, 400 `cannot bind token to object of type ...` for another kind, 400 for a
//!   pod running with another service account, 409 when its `uid` is not the object's).
//! - The token is a JWT signed by the server ([`crate::auth::serviceaccount`]): the server's
//!   authenticator accepts it as `system:serviceaccount:NS:NAME` until it expires, or until
//!   the service account or its bound object is deleted.
//! - With NodeRestriction, a node's request is first checked as kube's plugin checks it
//!   (bound to an existing pod of its own: `crate::source::node_restriction::token_pod`).
//! - In caching-proxy mode the request is forwarded to the upstream, which issues the token.

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};
use watchkeeper_api::{ApiError, ResourceDef};

use super::App;
use super::inner::read_object;
use crate::auth::serviceaccount::{Binding, Ref, now_unix};
use crate::cache::Resource;
use crate::request::ResourceRequest;
use crate::respond::json_response;

/// The subresource's name.
pub const SUBRESOURCE: &str = "token";

/// kube-apiserver's default `expirationSeconds` (one hour).
pub const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;

/// kube-apiserver's shortest token lifetime (`MinTokenAgeSec`).
pub const MIN_EXPIRATION_SECONDS: i64 = 600;

/// kube-apiserver's longest token lifetime (`MaxTokenAgeSec`, 2^32 seconds).
pub const MAX_EXPIRATION_SECONDS: i64 = 1 << 32;

/// Whether `{plural}/{name}/{sub}` is this subresource.
#[must_use]
pub fn is_token_subresource(def: &ResourceDef, sub: &str) -> bool {
    def.group.is_empty() && def.plural == "serviceaccounts" && sub == SUBRESOURCE
}

/// The kind of the body and of the answer.
fn token_request_def() -> ResourceDef {
    ResourceDef::named(
        "authentication.k8s.io",
        "v1",
        "tokenrequests",
        "TokenRequest",
        true,
    )
}

fn invalid(name: &str, field: &str, value: &str, detail: &str) -> ApiError {
    ApiError::invalid(
        &token_request_def(),
        name,
        vec![(
            field.to_owned(),
            format!("Invalid value: {value}: {detail}"),
            "FieldValueInvalid".to_owned(),
        )],
    )
}

fn decode(request: &ResourceRequest<'_>) -> Result<Value, ApiError> {
    let body = &request.context.body;
    let protobuf = request
        .context
        .headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(watchkeeper_api::is_protobuf_media_type);
    let value: Value = if protobuf {
        watchkeeper_api::decode_protobuf(&token_request_def(), body)?
    } else if body.is_empty() {
        json!({})
    } else {
        watchkeeper_api::go_json::decode_object("TokenRequest", "v1", body)?
    };
    if !value.is_object() {
        return Err(ApiError::bad_request(
            "the request body must be a TokenRequest object".to_owned(),
        ));
    }
    if let Some(kind) = value.get("kind").and_then(Value::as_str)
        && !kind.is_empty()
        && kind != "TokenRequest"
    {
        return Err(ApiError::bad_request(format!(
            "the body of the request was of kind {kind:?}, expected \"TokenRequest\""
        )));
    }
    Ok(value)
}

fn uid_of(object: &Value) -> String {
    object
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// Reads a core `v1` object the token is bound to (404 when absent or not served).
async fn bound_object(
    app: &App,
    plural: &str,
    namespace: &str,
    name: &str,
) -> Result<Value, ApiError> {
    let resource = app
        .resource("", "v1", plural)
        .ok_or_else(|| ApiError::new(404, "NotFound", format!("{plural} {name:?} not found")))?;
    read_object(app, &resource, namespace, name).await
}

/// `POST serviceaccounts/{name}/token`.
///
/// # Errors
/// As kube-apiserver (see the module docs).
pub async fn serve(
    app: &App,
    request: &ResourceRequest<'_>,
    resource: &Resource,
) -> Result<Response, ApiError> {
    if let Some(answer) = super::inner::create_only_or_forward(app, request, resource).await {
        return answer;
    }
    let Some(tokens) = app.auth.service_accounts() else {
        return Err(ApiError::new(
            404,
            "NotFound",
            "the server could not find the requested resource (token)",
        ));
    };
    crate::respond::no_table(&request.context.headers)?;
    let namespace = request.target.namespace.unwrap_or_default();
    let name = request.target.name.unwrap_or_default();
    let body = decode(request)?;
    node_restriction(app, request, resource, &body).await?;
    for (field, url, what) in [
        ("name", name, "name"),
        ("namespace", namespace, "namespace"),
    ] {
        if let Some(given) = body
            .pointer(&format!("/metadata/{field}"))
            .and_then(Value::as_str)
            && !given.is_empty()
            && given != url
        {
            return Err(invalid(
                name,
                &format!("metadata.{field}"),
                &format!("{given:?}"),
                &format!("must match the service account {what} if specified"),
            ));
        }
    }
    let account = read_object(app, resource, namespace, name).await?;
    let account_uid = uid_of(&account);
    let spec = body.get("spec").cloned().unwrap_or_else(|| json!({}));
    let mut expiration = match spec.get("expirationSeconds") {
        None | Some(Value::Null) => DEFAULT_EXPIRATION_SECONDS,
        Some(value) => value.as_i64().ok_or_else(|| {
            ApiError::bad_request(format!(
                "spec.expirationSeconds must be an integer, got {value}"
            ))
        })?,
    };
    if expiration < MIN_EXPIRATION_SECONDS {
        return Err(invalid(
            name,
            "spec.expirationSeconds",
            &expiration.to_string(),
            "may not specify a duration less than 10 minutes",
        ));
    }
    if expiration > MAX_EXPIRATION_SECONDS {
        return Err(invalid(
            name,
            "spec.expirationSeconds",
            &expiration.to_string(),
            "may not specify a duration larger than 2^32 seconds",
        ));
    }
    if let Some(max) = app.config.service_accounts.max_token_expiration_seconds {
        expiration = expiration.min(i64::try_from(max).unwrap_or(i64::MAX));
    }
    let audiences: Vec<String> = match spec.get("audiences").and_then(Value::as_array) {
        Some(list) if !list.is_empty() => list
            .iter()
            .map(|a| {
                a.as_str().map(str::to_owned).ok_or_else(|| {
                    ApiError::bad_request("spec.audiences must be strings".to_owned())
                })
            })
            .collect::<Result<_, _>>()?,
        _ => tokens.audiences().to_vec(),
    };
    let bound_ref = spec.get("boundObjectRef").filter(|v| v.is_object());
    let binding = match bound_ref {
        Some(reference) => bind(app, reference, namespace, name).await?,
        None => Binding::default(),
    };
    let now = now_unix();
    let token = tokens
        .issue(
            (namespace, name, &account_uid),
            binding,
            audiences.clone(),
            now,
            expiration,
        )
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let answer = json!({
        "kind": "TokenRequest",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "creationTimestamp": watchkeeper_api::time::rfc3339_from_unix(now),
        },
        "spec": {
            "audiences": audiences,
            "expirationSeconds": expiration,
            "boundObjectRef": bound_ref.cloned().unwrap_or(Value::Null),
        },
        "status": {
            "token": token,
            "expirationTimestamp": watchkeeper_api::time::rfc3339_from_unix(now + expiration),
        },
    });
    Ok(json_response(StatusCode::CREATED, answer.to_string()))
}

/// NodeRestriction (when it runs) on a node's TokenRequest `body`, before anything else is
/// looked at, as kube's mutating admission runs before the token's storage
/// ([`crate::source::node_restriction::token_pod`]).
///
/// # Errors
/// kube's 403, or the bound pod's 404.
async fn node_restriction(
    app: &App,
    request: &ResourceRequest<'_>,
    resource: &Resource,
    body: &Value,
) -> Result<(), ApiError> {
    use crate::source::node_restriction::{requesting_node, token_pod, token_pod_checked};
    let user = &request.context.user;
    if !app.config.admission.node_restriction {
        return Ok(());
    }
    let name = request.target.name.unwrap_or_default();
    let forbidden = |message: String| ApiError::forbidden(&resource.def, name, message);
    let Some(node) = requesting_node(&user.name, &user.groups).map_err(forbidden)? else {
        return Ok(());
    };
    let (pod_name, uid) = token_pod(body.pointer("/spec/boundObjectRef")).map_err(forbidden)?;
    let namespace = request.target.namespace.unwrap_or_default();
    let pod = bound_object(app, "pods", namespace, pod_name).await?;
    token_pod_checked(node, uid, &pod).map_err(forbidden)
}

/// The objects a `boundObjectRef` binds the token to, checked as kube-apiserver does.
async fn bind(
    app: &App,
    reference: &Value,
    namespace: &str,
    account: &str,
) -> Result<Binding, ApiError> {
    let text = |key: &str| reference.get(key).and_then(Value::as_str).unwrap_or("");
    let (kind, api_version, name, uid) =
        (text("kind"), text("apiVersion"), text("name"), text("uid"));
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let mut binding = Binding::default();
    let object = match (group, kind) {
        ("", "Pod") => {
            let pod = bound_object(app, "pods", namespace, name).await?;
            let runs_as = pod
                .pointer("/spec/serviceAccountName")
                .and_then(Value::as_str)
                .unwrap_or("default");
            if runs_as != account {
                return Err(ApiError::bad_request(format!(
                    "cannot bind token for serviceaccount {account:?} to pod running with different serviceaccount name."
                )));
            }
            binding.pod = Some(Ref {
                name: name.to_owned(),
                uid: uid_of(&pod),
            });
            if let Some(node) = pod.pointer("/spec/nodeName").and_then(Value::as_str)
                && !node.is_empty()
                && let Ok(node_object) = bound_object(app, "nodes", "", node).await
            {
                binding.node = Some(Ref {
                    name: node.to_owned(),
                    uid: uid_of(&node_object),
                });
            }
            pod
        }
        ("", "Secret") => {
            let secret = bound_object(app, "secrets", namespace, name).await?;
            binding.secret = Some(Ref {
                name: name.to_owned(),
                uid: uid_of(&secret),
            });
            secret
        }
        ("", "Node") => {
            let node = bound_object(app, "nodes", "", name).await?;
            binding.node = Some(Ref {
                name: name.to_owned(),
                uid: uid_of(&node),
            });
            node
        }
        _ => {
            return Err(ApiError::bad_request(format!(
                "cannot bind token to object of type {group}/{version}, Kind={kind}"
            )));
        }
    };
    let actual = uid_of(&object);
    if !uid.is_empty() && uid != actual {
        let def = ResourceDef::named("", "v1", kind, kind, true);
        return Err(ApiError::conflict(
            &def,
            name,
            format!(
                "the UID in the bound object reference ({uid}) does not match the UID in record. The object might have been deleted and then recreated"
            ),
        ));
    }
    Ok(binding)
}

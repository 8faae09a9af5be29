//! The streaming subresources of pods — `log`, `exec`, `attach`, `portforward` — answered as
//! kube-apiserver answers them before it would reach a kubelet
//! (`pkg/registry/core/pod/strategy.go`'s `LogLocation` and `streamLocation`).
//!
//! ## Guarantees
//! - The pod must exist (404 as any GET). A named container (`?container=`) must be one of
//!   the pod's (containers, init and ephemeral containers): else 400 `container x is not valid
//!   for pod p`; without one, a pod with several containers is 400 `a container name must be
//!   specified for pod p, choose one of: [a b]` (and its init containers named after it).
//! - A pod no node runs yet (no `spec.nodeName`): its log is empty (200, as kube answers with
//!   no location), `exec`, `attach` and `portforward` are 400 `pod p does not have a host
//!   assigned`.
//! - A pod assigned to a node: watchkeeper runs no kubelet to stream from, so the answer is
//!   kube's when the node's kubelet cannot be reached, a 500 naming the node.
//! - In caching-proxy mode the request goes to the upstream as it is (its kubelets answer a
//!   log; `exec`, `attach` and `portforward` need a connection upgrade this server does not
//!   relay: 400 saying so).

use axum::http::{StatusCode, header};
use axum::response::Response;
use serde_json::Value;
use watchkeeper_api::{ApiError, ResourceDef};

use super::App;
use super::inner::read_object;
use crate::cache::Resource;
use crate::request::ResourceRequest;

/// Whether `pods/{name}/{sub}` is one of these subresources.
#[must_use]
pub fn is_stream_subresource(def: &ResourceDef, sub: &str) -> bool {
    def.group.is_empty()
        && def.plural == "pods"
        && matches!(sub, "log" | "exec" | "attach" | "portforward")
}

/// Answers `pods/{name}/{log,exec,attach,portforward}` (see the module docs).
///
/// # Errors
/// As kube-apiserver (see the module docs).
pub async fn serve(
    app: &App,
    request: &ResourceRequest<'_>,
    resource: &Resource,
) -> Result<Response, ApiError> {
    let sub = request.target.subresource.unwrap_or_default();
    if let Some(upstream) = app.source.as_upstream() {
        if sub == "log" {
            return upstream.forward(request, resource).await;
        }
        return Err(ApiError::bad_request(format!(
            "pods/{sub} needs a connection upgrade, which this caching proxy does not relay: send it to the upstream server"
        )));
    }
    let name = request.target.name.unwrap_or_default();
    let namespace = request.target.namespace.unwrap_or_default();
    let pod = read_object(app, resource, namespace, name).await?;
    let container = query_value(request.context.query.as_deref(), "container");
    if sub != "portforward" {
        check_container(&pod, name, container.as_deref(), sub == "log")?;
    }
    let node = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if node.is_empty() {
        if sub == "log" {
            let mut response = Response::new(axum::body::Body::empty());
            *response.status_mut() = StatusCode::OK;
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static("text/plain"),
            );
            return Ok(response);
        }
        return Err(ApiError::bad_request(format!(
            "pod {name} does not have a host assigned"
        )));
    }
    Err(ApiError::internal(format!(
        "error dialing backend: no kubelet for node {node:?}: watchkeeper runs no kubelets"
    )))
}

/// The first value of `key` in a query string, decoded (none when the query does not parse).
fn query_value(query: Option<&str>, key: &str) -> Option<String> {
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query?).ok()?;
    pairs.into_iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

/// kube's `validateContainer` (logs) and `streamLocation`'s container check.
fn check_container(
    pod: &Value,
    name: &str,
    container: Option<&str>,
    log: bool,
) -> Result<(), ApiError> {
    let names = |key: &str| -> Vec<String> {
        pod.pointer(&format!("/spec/{key}"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|c| c.get("name").and_then(Value::as_str))
            .map(str::to_owned)
            .collect()
    };
    let containers = names("containers");
    match container.filter(|c| !c.is_empty()) {
        Some(wanted) => {
            let known = containers.iter().any(|c| c == wanted)
                || names("initContainers").iter().any(|c| c == wanted)
                || names("ephemeralContainers").iter().any(|c| c == wanted);
            if known {
                Ok(())
            } else {
                Err(ApiError::bad_request(format!(
                    "container {wanted} is not valid for pod {name}"
                )))
            }
        }
        None => match containers.len() {
            1 => Ok(()),
            0 => Err(ApiError::bad_request(format!(
                "a container name must be specified for pod {name}"
            ))),
            _ => {
                let mut message = format!(
                    "a container name must be specified for pod {name}, choose one of: [{}]",
                    containers.join(" ")
                );
                let init = names("initContainers");
                if !init.is_empty() {
                    message.push_str(&format!(
                        " or one of the init containers: [{}]",
                        init.join(" ")
                    ));
                }
                if log {
                    let ephemeral = names("ephemeralContainers");
                    if !ephemeral.is_empty() {
                        message.push_str(&format!(
                            " or one of the ephemeral containers: [{}]",
                            ephemeral.join(" ")
                        ));
                    }
                }
                Err(ApiError::bad_request(message))
            }
        },
    }
}

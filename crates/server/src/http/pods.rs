//! The `binding` and `eviction` subresources of pods: what a scheduler and `kubectl drain`
//! call, with kube-apiserver's semantics (`pkg/registry/core/pod/storage`).
//!
//! ## Guarantees
//! - **Binding** (`POST pods/{name}/binding`, a `v1` `Binding`): sets `spec.nodeName` once,
//!   merges the binding's annotations into the pod's and marks the `PodScheduled` condition
//!   true, in one write conditioned on the pod's resourceVersion (retried if the pod changed
//!   meanwhile). A pod already assigned, or being deleted, is kube-apiserver's 409 on
//!   `pods/binding`; a name that differs from the URL's is 400; a target that is not a `Node`
//!   or has no name is 422. Answers `Status` Success, 201.
//! - **Eviction** (`POST pods/{name}/eviction`, a `policy/v1` `Eviction`): a pod that is
//!   Pending, Succeeded, Failed or already being deleted is deleted at once (it is not counted
//!   by a disruption budget); otherwise the PodDisruptionBudgets of its namespace whose
//!   selector matches its labels decide: none → deleted; more than one → 500 as
//!   kube-apiserver; one → its status (kept by a disruption controller, which watchkeeper does
//!   not run: a client or controller writes it) must have observed the budget's generation
//!   and allow a disruption, else 429 "Cannot evict pod as it would violate the pod's
//!   disruption budget." with the budget's cause; when it allows one, the budget's
//!   `disruptionsAllowed` is decremented and the pod recorded in `disruptedPods` (conditioned
//!   on the budget's resourceVersion, so two concurrent evictions cannot spend the same
//!   disruption) before the pod is deleted with the eviction's `deleteOptions` (gracefully
//!   for a pod on a node: `watchkeeper_api::graceful`).
//! - **Bindings** (`POST /api/v1/namespaces/{ns}/bindings`, the older form kube-apiserver still
//!   serves and lists): authorized as `create` on `bindings`, then exactly a `pods/binding` of
//!   the pod the Binding's `metadata.name` names (same checks, same answer); any other method
//!   is 405.
//! - With NodeRestriction, a node evicts only pods bound to itself (kube's 403, before the
//!   eviction's own checks: `crate::source::node_restriction::eviction_checked`).
//! - Both go through the ordinary write path (validation, dry run, conflicts, watch events).
//!   In caching-proxy mode both are forwarded to the upstream as they are.

use std::collections::BTreeMap;

use axum::http::{Method, StatusCode};
use axum::response::Response;
use serde_json::{Value, json};
use watchkeeper_api::query::Options;
use watchkeeper_api::{ApiError, ResourceDef};

use super::App;
use super::inner::{create_only_or_forward, read_object, write_as};
use crate::cache::Resource;
use crate::request::{ResourceRequest, Target};
use crate::respond::json_response;
use crate::source::node_restriction;
use crate::source::read::ReadError;

/// How often a binding or an eviction is retried when the pod or the budget changes under it.
const ATTEMPTS: usize = 5;

/// Whether `pods/{name}/{sub}` is one of these subresources.
#[must_use]
pub fn is_pod_subresource(def: &ResourceDef, sub: &str) -> bool {
    def.group.is_empty() && def.plural == "pods" && matches!(sub, "binding" | "eviction")
}

/// `POST pods/{name}/binding` or `pods/{name}/eviction`.
///
/// # Errors
/// As kube-apiserver (see the module docs).
pub async fn serve(
    app: &App,
    request: &ResourceRequest<'_>,
    resource: &Resource,
) -> Result<Response, ApiError> {
    // In caching-proxy mode: the upstream's own binding and eviction (its budgets, kept by its
    // disruption controller).
    if let Some(answer) = create_only_or_forward(app, request, resource).await {
        return answer;
    }
    crate::respond::no_table(&request.context.headers)?;
    let kind = if request.target.subresource == Some("binding") {
        "Binding"
    } else {
        "Eviction"
    };
    let group = if kind == "Eviction" { "policy" } else { "" };
    let json = request
        .context
        .json_body(&ResourceDef::named(group, "v1", "", kind, true))?;
    let body = watchkeeper_api::go_json::decode_object(kind, "v1", &json)?;
    let name = request.target.name.unwrap_or_default();
    match request.target.subresource {
        Some("binding") => bind(app, request, resource, name, &body).await,
        _ => evict(app, request, resource, name, &body).await,
    }
}

/// `POST /api/v1/namespaces/{namespace}/bindings`: the older form of `pods/{name}/binding`
/// that kube-apiserver still serves (`bindings`, create only): the pod is the one the
/// Binding's `metadata.name` names, and the answer is the subresource's. Authorized as
/// `create` on `bindings` in the namespace; any other method is 405.
///
/// # Errors
/// As kube-apiserver (see the module docs).
pub async fn serve_bindings(
    app: &App,
    context: &crate::request::RequestContext,
    namespace: &str,
) -> Result<Response, ApiError> {
    if context.method != Method::POST {
        return Err(ApiError::method_not_allowed_on_resource(&context.method));
    }
    let options = Options::parse(context.query.as_deref())?;
    let bindings = ResourceDef::named("", "v1", "bindings", "Binding", true);
    let collection = Target {
        group: "",
        version: "v1",
        plural: "bindings",
        namespace: Some(namespace),
        name: None,
        subresource: None,
        watch_path: false,
    };
    let verb = super::authorize_resource(
        app,
        &context.user,
        &context.method,
        &bindings,
        collection,
        &options,
    )?;
    app.ensure_ready()?;
    crate::respond::no_table(&context.headers)?;
    let pods = app
        .resource("", "v1", "pods")
        .ok_or_else(ApiError::path_not_found)?;
    let json = context.json_body(&ResourceDef::named("", "v1", "bindings", "Binding", true))?;
    let body = watchkeeper_api::go_json::decode_object("Binding", "v1", &json)?;
    let name = body
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let request = ResourceRequest {
        context,
        target: Target {
            plural: "pods",
            name: Some(&name),
            subresource: Some("binding"),
            ..collection
        },
        options,
        verb,
    };
    if let Some(answer) = create_only_or_forward(app, &request, &pods).await {
        return answer;
    }
    bind(app, &request, &pods, &name, &body).await
}

fn success() -> Response {
    json_response(
        StatusCode::CREATED,
        // In kube-apiserver's field order (a json! object would sort its keys).
        r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success","code":201}"#,
    )
}

/// Now, as the RFC 3339 seconds Kubernetes writes in conditions.
fn now() -> String {
    let seconds = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    watchkeeper_api::time::rfc3339_from_unix(seconds)
}

/// kube-apiserver's 400 when a subresource's body (a Binding, an Eviction) names another pod
/// than the URL.
fn check_body_name(body: &Value, name: &str, kind: &str) -> Result<(), ApiError> {
    let named = body
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if named == name {
        Ok(())
    } else {
        Err(ApiError::bad_request(format!(
            "name in URL does not match name in {kind} object"
        )))
    }
}

fn resource_version(object: &Value) -> String {
    object
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned()
}

/// The query of an inner write: the outer request's `dryRun`, if any.
fn dry_run_query(request: &ResourceRequest<'_>) -> Option<String> {
    request.context.query.as_deref().and_then(|query| {
        let kept: Vec<&str> = query
            .split('&')
            .filter(|pair| pair.starts_with("dryRun="))
            .collect();
        (!kept.is_empty()).then(|| kept.join("&"))
    })
}

async fn bind(
    app: &App,
    request: &ResourceRequest<'_>,
    resource: &Resource,
    name: &str,
    body: &Value,
) -> Result<Response, ApiError> {
    check_body_name(body, name, "Binding")?;
    let kind = body
        .pointer("/target/kind")
        .and_then(Value::as_str)
        .unwrap_or("");
    let node = body
        .pointer("/target/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let binding = ResourceDef::named("", "v1", "bindings", "Binding", true);
    let mut causes = Vec::new();
    if !kind.is_empty() && kind != "Node" {
        causes.push((
            "target.kind".to_owned(),
            format!("Unsupported value: {kind:?}: supported values: \"Node\", \"<empty>\""),
            "FieldValueNotSupported".to_owned(),
        ));
    }
    if node.is_empty() {
        causes.push((
            "target.name".to_owned(),
            "Required value".to_owned(),
            "FieldValueRequired".to_owned(),
        ));
    }
    if !causes.is_empty() {
        return Err(ApiError::invalid(&binding, name, causes));
    }
    let conflict_def = ResourceDef::named("", "v1", "pods/binding", "Pod", true);
    let namespace = request.target.namespace.unwrap_or_default();
    let mut last = None;
    for _ in 0..ATTEMPTS {
        let pod = read_object(app, resource, namespace, name).await?;
        if pod.pointer("/metadata/deletionTimestamp").is_some() {
            return Err(ApiError::conflict(
                &conflict_def,
                name,
                format!("pod {name} is being deleted, cannot be assigned to a host"),
            ));
        }
        let assigned = pod
            .pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .unwrap_or("");
        if !assigned.is_empty() {
            return Err(ApiError::conflict(
                &conflict_def,
                name,
                format!("pod {name} is already assigned to node {assigned:?}"),
            ));
        }
        let mut conditions: Vec<Value> = pod
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let now = now();
        let scheduled = json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null,
                               "lastTransitionTime": now});
        match conditions
            .iter_mut()
            .find(|c| c.get("type").and_then(Value::as_str) == Some("PodScheduled"))
        {
            Some(condition) => {
                let probe = condition
                    .get("lastProbeTime")
                    .cloned()
                    .unwrap_or(Value::Null);
                *condition = scheduled;
                condition["lastProbeTime"] = probe;
            }
            None => conditions.push(scheduled),
        }
        let mut patch = json!({
            "metadata": {"resourceVersion": resource_version(&pod)},
            "spec": {"nodeName": node},
            "status": {"conditions": conditions},
        });
        if let Some(annotations) = body
            .pointer("/metadata/annotations")
            .filter(|a| a.is_object())
        {
            patch["metadata"]["annotations"] = annotations.clone();
        }
        // Written as the pod with `binding` named, so that the pod update validation (which
        // forbids changing `spec.nodeName`) leaves it to the subresource that owns it.
        let target = Target {
            subresource: Some("binding"),
            ..request.target
        };
        match write_as(
            app,
            request,
            resource,
            Method::PATCH,
            target,
            &patch,
            dry_run_query(request),
        )
        .await
        {
            Ok(_) => return Ok(success()),
            Err(error) if error.code == 409 => last = Some(error),
            Err(error) => return Err(error),
        }
    }
    Err(last.unwrap_or_else(|| ApiError::internal("the binding was not written")))
}

/// Whether an object's labels match a `metav1.LabelSelector` (an empty selector matches
/// every pod, as in `policy/v1`; an unknown operator matches none).
fn selector_matches(selector: &Value, labels: &BTreeMap<String, String>) -> bool {
    watchkeeper_api::label_selector::label_selector_matches(selector, |key| {
        labels.get(key).map(String::as_str)
    })
    .unwrap_or(false)
}

fn labels_of(object: &Value) -> BTreeMap<String, String> {
    object
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

/// kube-apiserver's 429 for a budget that does not allow the eviction.
fn budget_refusal(cause: String) -> ApiError {
    let mut error = ApiError::too_many_requests(
        "Cannot evict pod as it would violate the pod's disruption budget.",
        0,
    );
    error.retry_after_seconds = None;
    error.details = Some(json!({"causes": [{"reason": "DisruptionBudget", "message": cause}]}));
    error
}

fn int_at(object: &Value, pointer: &str) -> i64 {
    object.pointer(pointer).and_then(Value::as_i64).unwrap_or(0)
}

async fn evict(
    app: &App,
    request: &ResourceRequest<'_>,
    resource: &Resource,
    name: &str,
    body: &Value,
) -> Result<Response, ApiError> {
    let namespace = request.target.namespace.unwrap_or_default();
    // NodeRestriction (kube's mutating admission, before the eviction's own checks).
    let user = &request.context.user;
    if app.config.admission.node_restriction {
        let forbidden = |message: String| ApiError::forbidden(&resource.def, name, message);
        let node =
            node_restriction::requesting_node(&user.name, &user.groups).map_err(forbidden)?;
        if let Some(node) = node {
            let pod = read_object(app, resource, namespace, name).await?;
            node_restriction::eviction_checked(node, &pod).map_err(forbidden)?;
        }
    }
    check_body_name(body, name, "Eviction")?;
    let pod_target = Target {
        subresource: None,
        ..request.target
    };
    let delete_options = body.get("deleteOptions").cloned().unwrap_or(json!({}));
    let delete = || {
        write_as(
            app,
            request,
            resource,
            Method::DELETE,
            pod_target,
            &delete_options,
            dry_run_query(request),
        )
    };
    let mut last = None;
    for _ in 0..ATTEMPTS {
        let pod = read_object(app, resource, namespace, name).await?;
        let phase = pod
            .pointer("/status/phase")
            .and_then(Value::as_str)
            .unwrap_or("Pending");
        if matches!(phase, "Pending" | "Succeeded" | "Failed")
            || pod.pointer("/metadata/deletionTimestamp").is_some()
        {
            delete().await?;
            return Ok(success());
        }
        let Some(budgets) = app.resource("policy", "v1", "poddisruptionbudgets") else {
            delete().await?;
            return Ok(success());
        };
        let labels = labels_of(&pod);
        let page = match app
            .source
            .list(&budgets, Some(namespace), &Options::parse(None)?)
            .await
        {
            Ok(page) => page,
            Err(ReadError::Refused(error) | ReadError::Uncached(error)) => return Err(error),
        };
        let matching: Vec<Value> = page
            .items
            .iter()
            .map(|object| object.body().clone())
            .filter(|pdb| {
                pdb.pointer("/spec/selector")
                    .is_some_and(|selector| selector_matches(selector, &labels))
            })
            .collect();
        let pdb = match matching.as_slice() {
            [] => {
                delete().await?;
                return Ok(success());
            }
            [pdb] => pdb,
            _ => {
                return Err(ApiError::internal(
                    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
                ));
            }
        };
        let pdb_name = pdb
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        if int_at(pdb, "/status/observedGeneration") < int_at(pdb, "/metadata/generation") {
            return Err(budget_refusal(format!(
                "The disruption budget {pdb_name} is still being processed by the server."
            )));
        }
        let allowed = int_at(pdb, "/status/disruptionsAllowed");
        if allowed < 0 {
            let def = ResourceDef::named(
                "policy",
                "v1",
                "poddisruptionbudget",
                "PodDisruptionBudget",
                true,
            );
            return Err(ApiError::forbidden(
                &def,
                &pdb_name,
                "pdb disruptions allowed is negative",
            ));
        }
        if allowed == 0 {
            return Err(budget_refusal(format!(
                "The disruption budget {pdb_name} needs {} healthy pods and has {} currently",
                int_at(pdb, "/status/desiredHealthy"),
                int_at(pdb, "/status/currentHealthy")
            )));
        }
        // Spend one disruption, conditioned on the budget as read, then delete the pod.
        let now = now();
        let spend = json!({
            "metadata": {"resourceVersion": resource_version(pdb)},
            "status": {"disruptionsAllowed": allowed - 1, "disruptedPods": {name: now}},
        });
        let pdb_target = Target {
            namespace: Some(namespace),
            name: Some(&pdb_name),
            subresource: Some("status"),
            ..request.target
        };
        match write_as(
            app,
            request,
            &budgets,
            Method::PATCH,
            pdb_target,
            &spend,
            dry_run_query(request),
        )
        .await
        {
            Ok(_) => {
                delete().await?;
                return Ok(success());
            }
            Err(error) if error.code == 409 => last = Some(error),
            Err(error) => return Err(error),
        }
    }
    Err(last.unwrap_or_else(|| ApiError::internal("the eviction was not written")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_selectors_match_as_kubernetes() {
        let labels: BTreeMap<String, String> = [
            ("app".to_owned(), "web".to_owned()),
            ("tier".to_owned(), "a".to_owned()),
        ]
        .into();
        assert!(
            selector_matches(&json!({}), &labels),
            "empty matches all (policy/v1)"
        );
        assert!(selector_matches(
            &json!({"matchLabels": {"app": "web"}}),
            &labels
        ));
        assert!(!selector_matches(
            &json!({"matchLabels": {"app": "db"}}),
            &labels
        ));
        assert!(selector_matches(
            &json!({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]},
                                         {"key": "gone", "operator": "DoesNotExist"}]}),
            &labels
        ));
        assert!(!selector_matches(
            &json!({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["a"]}]}),
            &labels
        ));
        assert!(!selector_matches(
            &json!({"matchExpressions": [{"key": "x", "operator": "Exists"}]}),
            &labels
        ));
    }

    #[test]
    fn a_blocking_budget_is_kube_apiservers_429() {
        let error = budget_refusal(
            "The disruption budget b needs 2 healthy pods and has 2 currently".into(),
        );
        assert_eq!(error.code, 429);
        assert_eq!(error.reason, "TooManyRequests");
        assert_eq!(
            error.message,
            "Cannot evict pod as it would violate the pod's disruption budget."
        );
        assert_eq!(
            error.details.unwrap()["causes"][0]["reason"],
            "DisruptionBudget"
        );
    }
}

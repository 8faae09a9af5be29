//! The `scale` subresource of deployments, replica sets, stateful sets and replication
//! controllers (`kubectl scale`, autoscalers), and of custom resources whose CRD declares
//! `subresources.scale`: an `autoscaling/v1` `Scale` read from and written to the parent
//! object's replicas (`spec.replicas`, or the CRD's `specReplicasPath`).
//!
//! ## Guarantees
//! - GET answers the parent as a `Scale`: its name, namespace, uid, resourceVersion and
//!   creationTimestamp, `spec.replicas`, `status.replicas` and `status.selector` (for the
//!   built-in kinds the parent's label selector as a string, as kube-apiserver prints it; for a
//!   custom resource the string at `labelSelectorPath`, empty without one). A custom resource's
//!   replicas missing at their paths read as 0, as kube-apiserver's `scaleFromCustomResource`.
//!   Asked for a `Table` (`kubectl get deployment x --subresource=scale`), the answer is
//!   kube's: the built-in printers' `printScale` (Name, Desired, Available, Age), or for a
//!   custom resource its CRD's columns over the Scale; asked for `PartialObjectMetadata`, the
//!   Scale's metadata.
//! - PUT and PATCH (merge, strategic, JSON patch) change only the parent's replicas,
//!   through the ordinary write path (so validation, dry run, conflicts, watch events and the
//!   caching-proxy mode's forwarding are those of any patch): the change is a merge patch of
//!   the parent carrying the `resourceVersion` it was computed against. A PUT with a
//!   `metadata.resourceVersion` makes that a precondition (409 on mismatch); a PATCH is
//!   computed against the current object and recomputed if the parent changed meanwhile.
//! - `spec.replicas` must be a non-negative integer: anything else is kube-apiserver's 422.

use axum::http::{Method, StatusCode, header};
use axum::response::Response;
use serde_json::{Value, json};
use watchkeeper_api::negotiate::Conversion;
use watchkeeper_api::patch::PatchType;
use watchkeeper_api::table::{partial_object_metadata, scale_table};
use watchkeeper_api::{ApiError, ResourceDef};

use super::App;
use super::inner::{read_object, write_as};
use crate::cache::Resource;
use crate::request::{ResourceRequest, Target, Verb};
use crate::respond::{conversion, json_response, now_unix};

/// How often a PATCH of a scale is recomputed when the parent changes under it.
const PATCH_ATTEMPTS: usize = 5;

pub use watchkeeper_api::discovery::has_scale;

/// Where a kind keeps what its `Scale` shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Paths {
    /// The desired replicas' field path (`spec.replicas`).
    spec_replicas: Vec<String>,
    /// The observed replicas' field path (`status.replicas`).
    status_replicas: Vec<String>,
    /// A custom resource's `labelSelectorPath`; `None` for the built-in kinds, whose selector
    /// is their `spec.selector`.
    label_selector: Option<Vec<String>>,
    /// Whether this is a custom resource (missing desired replicas read as 0, not 1).
    custom: bool,
}

/// A CRD's `.a.b` path as its fields.
fn fields_of(path: &str) -> Vec<String> {
    path.trim_start_matches('.')
        .split('.')
        .filter(|f| !f.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The scale paths of `resource`: the built-in kinds with a `scale`, or a custom resource
/// whose CRD declares one; `None` for the others (their `scale` is 404).
#[must_use]
pub fn paths(resource: &Resource) -> Option<Paths> {
    if has_scale(&resource.def) {
        return Some(Paths {
            spec_replicas: fields_of(".spec.replicas"),
            status_replicas: fields_of(".status.replicas"),
            label_selector: None,
            custom: false,
        });
    }
    let custom = resource.custom()?;
    custom_paths(custom.scale.as_ref()?)
}

/// The paths of a CRD's `subresources.scale`.
fn custom_paths(scale: &Value) -> Option<Paths> {
    let path = |key: &str| scale.get(key).and_then(Value::as_str).map(fields_of);
    Some(Paths {
        spec_replicas: path("specReplicasPath")?,
        status_replicas: path("statusReplicasPath")?,
        label_selector: Some(path("labelSelectorPath").unwrap_or_default()),
        custom: true,
    })
}

fn at<'v>(object: &'v Value, fields: &[String]) -> Option<&'v Value> {
    fields
        .iter()
        .try_fold(object, |value, field| value.get(field))
}

/// The parent's label selector as kube-apiserver prints it (`a=b,c in (x,y),!d`).
fn selector_string(def: &ResourceDef, parent: &Value) -> String {
    let selector = parent.pointer("/spec/selector");
    let mut terms = Vec::new();
    let labels = if def.plural == "replicationcontrollers" {
        selector
    } else {
        selector.and_then(|s| s.get("matchLabels"))
    };
    if let Some(labels) = labels.and_then(Value::as_object) {
        for (key, value) in labels {
            terms.push((
                key.clone(),
                format!("{key}={}", value.as_str().unwrap_or("")),
            ));
        }
    }
    let requirements = selector
        .into_iter()
        .flat_map(watchkeeper_api::label_selector::selector_requirements);
    for (key, operator, mut values) in requirements {
        values.sort_unstable();
        let term = match operator {
            Some("In") => format!("{key} in ({})", values.join(",")),
            Some("NotIn") => format!("{key} notin ({})", values.join(",")),
            Some("Exists") => key.to_owned(),
            Some("DoesNotExist") => format!("!{key}"),
            _ => continue,
        };
        terms.push((key.to_owned(), term));
    }
    terms.sort();
    terms
        .into_iter()
        .map(|(_, term)| term)
        .collect::<Vec<_>>()
        .join(",")
}

/// The parent object as a `Scale`.
fn scale_of(def: &ResourceDef, paths: &Paths, parent: &Value) -> Value {
    let mut metadata = serde_json::Map::new();
    for key in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ] {
        if let Some(value) = parent.pointer(&format!("/metadata/{key}")) {
            metadata.insert(key.to_owned(), value.clone());
        }
    }
    let replicas = at(parent, &paths.spec_replicas)
        .cloned()
        .unwrap_or(json!(if paths.custom { 0 } else { 1 }));
    let status_replicas = at(parent, &paths.status_replicas)
        .cloned()
        .unwrap_or(json!(0));
    let selector = match &paths.label_selector {
        None => selector_string(def, parent),
        Some(fields) if fields.is_empty() => String::new(),
        Some(fields) => at(parent, fields)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
    };
    // `ScaleSpec.replicas` and `ScaleStatus.selector` are `omitempty` in Go.
    let mut spec = json!({});
    if replicas != json!(0) {
        spec["replicas"] = replicas;
    }
    let mut status = json!({"replicas": status_replicas});
    if !selector.is_empty() {
        status["selector"] = json!(selector);
    }
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": metadata,
        "spec": spec,
        "status": status,
    })
}

fn scale_invalid(name: &str, detail: String) -> ApiError {
    // `autoscaling/v1` `Scale`: nothing is stored under it.
    ApiError::invalid(
        &ResourceDef::named("autoscaling", "v1", "scale", "Scale", true),
        name,
        vec![(
            "spec.replicas".to_owned(),
            detail,
            "FieldValueInvalid".to_owned(),
        )],
    )
}

/// `spec.replicas` of a desired `Scale`: a non-negative integer that fits Go's int32.
fn desired_replicas(name: &str, scale: &Value) -> Result<i64, ApiError> {
    match scale.pointer("/spec/replicas") {
        Some(Value::Number(n)) => match n.as_i64() {
            Some(replicas) if (0..=i64::from(i32::MAX)).contains(&replicas) => Ok(replicas),
            Some(replicas) if replicas < 0 => Err(scale_invalid(
                name,
                format!("Invalid value: {replicas}: must be greater than or equal to 0"),
            )),
            _ => Err(scale_invalid(
                name,
                format!("Invalid value: {n}: must be an int32"),
            )),
        },
        None | Some(Value::Null) => Ok(0),
        Some(other) => Err(scale_invalid(
            name,
            format!("Invalid value: {other}: must be an integer"),
        )),
    }
}

async fn read_parent(
    app: &App,
    request: &ResourceRequest<'_>,
    resource: &Resource,
) -> Result<Value, ApiError> {
    let target = &request.target;
    read_object(
        app,
        resource,
        target.namespace.unwrap_or_default(),
        target.name.unwrap_or_default(),
    )
    .await
}

/// A write's answer (status and JSON body), to turn the parent it carries into a `Scale`.
async fn body_json(response: Response) -> Result<(StatusCode, Value), ApiError> {
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let value = watchkeeper_api::go_json::parse_stored(&bytes)
        .map_err(|e| ApiError::internal(e.to_string()))?;
    Ok((status, value))
}

/// The `autoscaling/v1` Scale, as a body's type.
fn scale_def() -> watchkeeper_api::ResourceDef {
    watchkeeper_api::ResourceDef::named("autoscaling", "v1", "scales", "Scale", true)
}

/// kube's `checkName` on a PUT's `Scale`: a name or namespace in the body other than the
/// URL's is a 400 (before the parent is read).
fn check_body_names(
    request: &ResourceRequest<'_>,
    body: &[u8],
    name: &str,
) -> Result<(), ApiError> {
    let Ok(body) = serde_json::from_slice::<Value>(body) else {
        return Ok(());
    };
    let body_name = body.pointer("/metadata/name").and_then(Value::as_str);
    if let Some(body_name) = body_name.filter(|n| *n != name) {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        )));
    }
    let body_namespace = body.pointer("/metadata/namespace").and_then(Value::as_str);
    if let (Some(url), Some(object)) = (request.target.namespace, body_namespace)
        && !url.is_empty()
        && !object.is_empty()
        && url != object
    {
        return Err(ApiError::bad_request(format!(
            "the namespace of the object ({object}) does not match the namespace on the URL ({url})"
        )));
    }
    Ok(())
}

/// GET, PUT or PATCH of `{parent}/{name}/scale`.
pub async fn serve(
    app: &App,
    request: &ResourceRequest<'_>,
    resource: &Resource,
) -> Result<Response, ApiError> {
    let def = &resource.def;
    let paths = paths(resource).ok_or_else(|| {
        ApiError::new(
            404,
            "NotFound",
            "the server could not find the requested resource (scale)".to_owned(),
        )
    })?;
    let name = request.target.name.unwrap_or_default();
    // A PUT's `Scale` as JSON (client-go's scale client sends `autoscaling/v1` protobuf).
    let put_body = if request.verb == Verb::Update {
        let body = request.context.json_body(&scale_def())?;
        check_body_names(request, &body, name)?;
        body
    } else {
        bytes::Bytes::new()
    };
    match request.verb {
        Verb::Get => {
            let parent = read_parent(app, request, resource).await?;
            let scale = scale_of(def, &paths, &parent);
            let body = match conversion(&request.context.headers, def)? {
                // kube's scale subresources convert with the parent's table convertor: a
                // custom resource's columns (evaluated over the Scale), the built-in
                // printers' `printScale`.
                Conversion::Table if paths.custom => {
                    let rv = scale
                        .pointer("/metadata/resourceVersion")
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    watchkeeper_api::to_table(def, &[&scale], rv, None, now_unix())
                }
                Conversion::Table => scale_table(&scale, now_unix()),
                Conversion::PartialObjectMetadata => partial_object_metadata(&scale),
                Conversion::None | Conversion::PartialObjectMetadataList => scale,
            };
            Ok(json_response(StatusCode::OK, body.to_string()))
        }
        Verb::Update | Verb::Patch => {
            let attempts = if request.verb == Verb::Patch {
                PATCH_ATTEMPTS
            } else {
                1
            };
            let mut last = None;
            for _ in 0..attempts {
                let parent = read_parent(app, request, resource).await?;
                let current = scale_of(def, &paths, &parent);
                let (desired, precondition) = if request.verb == Verb::Update {
                    let body = watchkeeper_api::go_json::decode_object("Scale", "v1", &put_body)?;
                    let precondition = body
                        .pointer("/metadata/resourceVersion")
                        .and_then(Value::as_str)
                        .filter(|rv| !rv.is_empty())
                        .map(str::to_owned);
                    (body, precondition)
                } else {
                    let patch_type = request
                        .context
                        .headers
                        .get(header::CONTENT_TYPE)
                        .and_then(|v| v.to_str().ok())
                        .and_then(|ct| PatchType::from_content_type(ct.split(';').next().unwrap_or("").trim()))
                        .filter(|t| *t != PatchType::Apply)
                        .ok_or_else(|| {
                            ApiError::unsupported_media_type(
                                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json".to_owned(),
                            )
                        })?;
                    let desired = watchkeeper_api::apply_patch(
                        def,
                        patch_type,
                        &current,
                        &request.context.body,
                    )?;
                    (desired, None)
                };
                let replicas = desired_replicas(name, &desired)?;
                let rv = precondition.unwrap_or_else(|| {
                    current
                        .pointer("/metadata/resourceVersion")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned()
                });
                let mut patch = json!({"metadata": {"resourceVersion": rv}});
                let mut slot = &mut patch;
                for field in &paths.spec_replicas {
                    if slot.get(field).is_none() {
                        slot[field.as_str()] = json!({});
                    }
                    slot = &mut slot[field.as_str()];
                }
                *slot = json!(replicas);
                let target = Target {
                    subresource: None,
                    ..request.target
                };
                match write_as(
                    app,
                    request,
                    resource,
                    Method::PATCH,
                    target,
                    &patch,
                    request.context.query.clone(),
                )
                .await
                {
                    Ok(response) => {
                        let (status, parent) = body_json(response).await?;
                        return Ok(json_response(
                            status,
                            scale_of(def, &paths, &parent).to_string(),
                        ));
                    }
                    Err(error) if error.code == 409 && request.verb == Verb::Patch => {
                        last = Some(error);
                    }
                    Err(error) => return Err(error),
                }
            }
            Err(last.unwrap_or_else(|| ApiError::internal("the scale was not written")))
        }
        _ => Err(ApiError::method_not_allowed_on_resource(
            &request.context.method,
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(plural: &str) -> ResourceDef {
        watchkeeper_api::builtin_resources()
            .into_iter()
            .find(|d| d.plural == plural)
            .unwrap()
    }

    #[test]
    fn scales_carry_the_parents_replicas_and_selector() {
        let deployment = json!({"metadata": {"name": "d", "namespace": "n", "uid": "u", "resourceVersion": "7",
                                             "labels": {"x": "y"}},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"b": "2", "a": "1"},
                "matchExpressions": [{"key": "c", "operator": "In", "values": ["z", "y"]},
                                     {"key": "d", "operator": "DoesNotExist"}]}},
            "status": {"replicas": 2}});
        let builtin = Paths {
            spec_replicas: fields_of(".spec.replicas"),
            status_replicas: fields_of(".status.replicas"),
            label_selector: None,
            custom: false,
        };
        let scale = scale_of(&def("deployments"), &builtin, &deployment);
        assert_eq!(
            scale,
            json!({"kind": "Scale", "apiVersion": "autoscaling/v1",
                   "metadata": {"name": "d", "namespace": "n", "uid": "u", "resourceVersion": "7"},
                   "spec": {"replicas": 3},
                   "status": {"replicas": 2, "selector": "a=1,b=2,c in (y,z),!d"}})
        );
        let rc = json!({"metadata": {"name": "r"}, "spec": {"selector": {"app": "web"}}});
        let scale = scale_of(&def("replicationcontrollers"), &builtin, &rc);
        assert_eq!(
            scale["status"],
            json!({"replicas": 0, "selector": "app=web"})
        );
        assert_eq!(scale["spec"]["replicas"], 1);
        assert!(has_scale(&def("statefulsets")) && !has_scale(&def("daemonsets")));
    }

    #[test]
    fn custom_resources_scale_at_their_crds_paths() {
        let paths = custom_paths(&json!({"specReplicasPath": ".spec.size",
            "statusReplicasPath": ".status.count", "labelSelectorPath": ".status.selector"}))
        .unwrap();
        let foo = ResourceDef::named("example.com", "v1", "foos", "Foo", true);
        let object = json!({"metadata": {"name": "f"}, "spec": {"size": 3},
            "status": {"count": 2, "selector": "app=f"}});
        assert_eq!(
            scale_of(&foo, &paths, &object),
            json!({"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": {"name": "f"},
                   "spec": {"replicas": 3}, "status": {"replicas": 2, "selector": "app=f"}})
        );
        // Nothing at the paths reads as 0 (an omitted `spec.replicas`), no selector path as
        // no selector.
        let bare = custom_paths(&json!({"specReplicasPath": ".spec.size",
            "statusReplicasPath": ".status.count"}))
        .unwrap();
        assert_eq!(
            scale_of(&foo, &bare, &json!({"metadata": {"name": "f"}})),
            json!({"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": {"name": "f"},
                   "spec": {}, "status": {"replicas": 0}})
        );
        assert!(custom_paths(&json!({"statusReplicasPath": ".status.count"})).is_none());
    }

    #[test]
    fn replicas_must_be_a_non_negative_int32() {
        assert_eq!(
            desired_replicas("d", &json!({"spec": {"replicas": 4}})).unwrap(),
            4
        );
        for bad in [json!(-1), json!(1.5), json!("3"), json!(3_000_000_000_i64)] {
            let error = desired_replicas("d", &json!({"spec": {"replicas": bad}})).unwrap_err();
            assert_eq!(error.code, 422, "{bad}");
        }
        let error = desired_replicas("d", &json!({"spec": {"replicas": -2}})).unwrap_err();
        assert_eq!(
            error.message,
            "Scale.autoscaling \"d\" is invalid: spec.replicas: Invalid value: -2: must be greater than or equal to 0"
        );
    }
}

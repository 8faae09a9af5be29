//! `/api/v1/componentstatuses[/{name}]`: the read-only `v1` `ComponentStatus` resource
//! ([`watchkeeper_api::componentstatus`] has the objects and their guarantees).
//!
//! ## Guarantees
//! - Authorized as any resource request (`get` or `list` on `componentstatuses`, or the verb
//!   the method names), then: `GET` of the collection lists every component (filtered by the
//!   label and field selectors, which see only `metadata.name`), `GET` of a name answers that
//!   component or kube-apiserver's 500 `Component not found: {name}`; a watch (`?watch=true`)
//!   is 405 `MethodNotSupported` and every other method 405, as in kube-apiserver.
//! - `etcd-0` probes the store each time (its current revision, within kube-apiserver's 20 s
//!   probe timeout); in caching-proxy mode there is no store and no `etcd-N`.
//! - Table output (`kubectl get cs`) and `PartialObjectMetadata` as for other resources; every
//!   answer, refusals included, carries the deprecation warning kube-apiserver sends.

use std::collections::BTreeMap;
use std::time::Duration;

use axum::http::{Method, StatusCode};
use axum::response::Response;
use serde_json::{Value, json};
use watchkeeper_api::componentstatus::{self, DEPRECATION_WARNING, StoreHealth};
use watchkeeper_api::negotiate::Conversion;
use watchkeeper_api::query::Options;
use watchkeeper_api::{ApiError, object_body};
use watchkeeper_store::Store;

use super::App;
use crate::auth::Attributes;
use crate::request::{RequestContext, Verb};
use crate::respond::{error_response, json_response, negotiated, now_unix};

/// kube-apiserver's probe timeout for a component's health.
const PROBE_TIMEOUT: Duration = Duration::from_secs(20);

/// Answers `/api/v1/componentstatuses` and `/api/v1/componentstatuses/{name}` (`rest` is the
/// path after `/api/v1`) with the verb label for metrics; `None` for any other path.
pub async fn serve(
    app: &App,
    context: &RequestContext,
    rest: &[&str],
) -> Option<(&'static str, Response)> {
    let name = match rest {
        [componentstatus::PLURAL] => None,
        [componentstatus::PLURAL, name] => Some(*name),
        _ => return None,
    };
    let (label, result) = answer(app, context, name).await;
    let mut response = result.unwrap_or_else(|error| error_response(&error));
    if let Some(warning) = crate::respond::warning_header(DEPRECATION_WARNING) {
        response.headers_mut().append("warning", warning);
    }
    Some((label, response))
}

async fn answer(
    app: &App,
    context: &RequestContext,
    name: Option<&str>,
) -> (&'static str, Result<Response, ApiError>) {
    let def = componentstatus::def();
    let options = match Options::parse(context.query.as_deref()) {
        Ok(options) => options,
        Err(error) => return ("", Err(error)),
    };
    let verb = Verb::of(&context.method, name.is_some(), options.watch);
    let verb_name = verb.authorization_name(&context.method);
    let attributes = Attributes::Resource {
        verb: &verb_name,
        def: &def,
        namespace: "",
        name: name.unwrap_or_default(),
        subresource: "",
    };
    app.auth
        .prepare_authorization(&context.user, &attributes)
        .await;
    if let Err(error) = app.auth.authorize_request(&context.user, &attributes) {
        return ("", Err(error));
    }
    if context.method != Method::GET {
        return (
            "",
            Err(ApiError::method_not_allowed_on_resource(&context.method)),
        );
    }
    if verb == Verb::Watch {
        return ("", Err(watch_not_supported()));
    }
    let conversion = match negotiated(&context.headers, Some(&def)) {
        Ok(negotiated) => negotiated.conversion,
        Err(error) => return ("", Err(error)),
    };
    let store = store_health(app).await;
    let result = match name {
        Some(name) => get(&def, name, store.as_ref(), conversion),
        None => list(&def, &options, store.as_ref(), conversion),
    };
    (verb.label(), result)
}

/// kube-apiserver's answer to a watch of a resource whose storage cannot watch.
fn watch_not_supported() -> ApiError {
    ApiError {
        details: Some(json!({"kind": componentstatus::PLURAL})),
        ..ApiError::method_not_allowed(format!(
            "watch is not supported on resources of kind {:?}",
            componentstatus::PLURAL
        ))
    }
}

/// The store's health, `None` without a store (caching-proxy mode).
async fn store_health(app: &App) -> Option<StoreHealth> {
    let store = app.source.as_store()?;
    Some(
        match tokio::time::timeout(PROBE_TIMEOUT, store.current_revision()).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(error)) => Err(error.to_string()),
            Err(_) => Err("context deadline exceeded".to_owned()),
        },
    )
}

fn get(
    def: &watchkeeper_api::ResourceDef,
    name: &str,
    store: Option<&StoreHealth>,
    conversion: Conversion,
) -> Result<Response, ApiError> {
    if conversion == Conversion::PartialObjectMetadataList {
        return Err(ApiError::not_acceptable(format!(
            "you requested PartialObjectMetadataList, but the requested object is not a list (*v1.{})",
            def.kind
        )));
    }
    // kube-apiserver's storage answers a plain error here, which becomes a 500 without a
    // reason.
    let object = componentstatus::component(name, store, false)
        .ok_or_else(|| ApiError::new(500, "", format!("Component not found: {name}")))?;
    let body = match conversion {
        Conversion::Table => {
            watchkeeper_api::to_table(def, &[&object], "", None, now_unix()).to_string()
        }
        Conversion::PartialObjectMetadata => {
            object_body(&watchkeeper_api::table::partial_object_metadata(&object))
        }
        Conversion::None | Conversion::PartialObjectMetadataList => object_body(&object),
    };
    Ok(json_response(StatusCode::OK, body))
}

fn list(
    def: &watchkeeper_api::ResourceDef,
    options: &Options,
    store: Option<&StoreHealth>,
    conversion: Conversion,
) -> Result<Response, ApiError> {
    if conversion == Conversion::PartialObjectMetadata {
        return Err(ApiError::not_acceptable(format!(
            "you requested PartialObjectMetadata, but the requested object is a list (*v1.{})",
            def.list_kind()
        )));
    }
    let mut list = componentstatus::list(store);
    // Components have no labels; the only selectable field is their name.
    if let Some(items) = list.get_mut("items").and_then(Value::as_array_mut) {
        items.retain(|item| {
            let name = item["metadata"]["name"].as_str().unwrap_or_default();
            let fields = BTreeMap::from([("metadata.name".to_owned(), name.to_owned())]);
            options.labels.matches(&BTreeMap::new()) && options.fields.matches(&fields)
        });
    }
    let items: Vec<Value> = list["items"].as_array().cloned().unwrap_or_default();
    let body = match conversion {
        Conversion::Table => {
            let refs: Vec<&Value> = items.iter().collect();
            watchkeeper_api::to_table(def, &refs, "", None, now_unix()).to_string()
        }
        Conversion::PartialObjectMetadataList => object_body(&json!({
            "kind": "PartialObjectMetadataList",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": {},
            "items": items
                .iter()
                .map(|item| json!({"metadata": item["metadata"]}))
                .collect::<Vec<_>>(),
        })),
        Conversion::None | Conversion::PartialObjectMetadata => object_body(&list),
    };
    Ok(json_response(StatusCode::OK, body))
}

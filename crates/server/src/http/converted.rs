//! Requests to a version of a custom resource that its CRD's conversion webhook converts
//! (`source::webhook::conversion`): reads refused while the version's feed is failed, writes
//! converted to the storage version and their answers back.
//!
//! ## Guarantees
//! - **Reads** (GET, LIST, WATCH) are served from the version's cache as any other's, unless
//!   its feed's last conversion failed: then kube's 500 (`Internal error occurred: conversion
//!   webhook for <gvk> failed: ...`), as kube answers a read whose objects it cannot convert.
//! - **Creates and updates** (POST, PUT, a subresource's PUT): the body is checked for its
//!   `apiVersion` and `kind` (kube's 400s), converted to the storage version by the webhook,
//!   and written at the storage version — admission, validation and the store see the
//!   storage version's object, as kube converts a write to its storage version first.
//! - **Patches** (JSON and merge): the current object converted to this version, patched,
//!   converted back and written as an update preconditioned on the resource version it was
//!   read at; a conflict with another write is retried (kube's patcher retries its update
//!   the same way), [`PATCH_ATTEMPTS`] times at most.
//! - **Server-side apply** (of the object, not a subresource) at such a version applies at
//!   that version, as kube's field manager applies at the request's: the live object (its
//!   `managedFields` with it) converted to the version, the configuration applied to it
//!   (kube's conflicts, 409 in its words; `force` takes the fields), the applier's entry
//!   naming this version; the managers recorded at the storage version checked against what
//!   the apply changed there (`apply::versions`: their conflicts named at their version, the
//!   fields taken leave them); the result converted back and written at the storage version with
//!   exactly those managed fields (`StoreSource::write_managed`: no `Update` entry for the
//!   request), as a create when there is no object, an update preconditioned on the revision
//!   read otherwise (a conflict retried as a patch's).
//! - **Managed fields** of a create, update or patch (not of a subresource) are recorded at
//!   this version, as kube's field manager records a write at the request's version: the
//!   writer's `Update` entry from the object before and after at this version (an update
//!   converts the current object for it: one more call), the managers recorded at the
//!   storage version losing what the write changed there; stored as they are
//!   (`StoreSource::write_managed`). A subresource's write records them at the storage
//!   version.
//! - **Deletes**: written at the storage version.
//! - **Every answer** that is an object (or a list of them) at the storage version is
//!   converted back to the version asked for; a conversion that fails is kube's 500, and
//!   nothing is written when the body's conversion fails.
//!
//! ## Not here
//! - Managers at a third version (neither the request's nor the storage version) are left
//!   as recorded: they neither conflict with the applier nor lose the fields the apply
//!   changes (kube converts the objects to each manager's version, a webhook call each).
//! - Changes the storage version's admission plugins or defaults make to a write at such a
//!   version are not given to its writer in `managedFields` (its entry is decided at this
//!   version, before them).
//! - Server-side apply to a subresource (`status`, `scale`) at such a version is refused
//!   (415) as the patch code refuses it.

use axum::http::{Method, header};
use axum::response::Response;
use serde_json::Value;
use watchkeeper_api::ApiError;
use watchkeeper_api::patch::PatchType;

use super::App;
use crate::cache::{ConvertedView, Resource};
use crate::request::{RequestContext, ResourceRequest, Verb};

/// The most times a patch is tried again after its update met another write.
pub const PATCH_ATTEMPTS: usize = 5;

/// Why a read (GET, LIST, WATCH) of `resource` is refused: its objects are converted by a
/// webhook (another version's, or the storage version's stored at earlier versions) and its
/// feed's last conversion failed.
#[must_use]
pub fn refused(resource: &Resource, verb: Verb) -> Option<ApiError> {
    match verb {
        Verb::Get | Verb::List | Verb::Watch => resource.conversion_failure(),
        _ => None,
    }
}

/// A write at a converted version (see the module docs).
///
/// # Errors
/// The write's, or a conversion's (kube's 500).
pub async fn write(
    app: &App,
    request: &ResourceRequest<'_>,
    resource: &Resource,
    view: &dyn ConvertedView,
) -> Result<Response, ApiError> {
    let served = app.resources();
    let storage = served
        .resources
        .iter()
        .find(|r| r.name() == resource.name() && r.conversion.is_none())
        .ok_or_else(ApiError::path_not_found)?;
    let storage_version = storage.def.api_version();
    let context = request.context;
    let response = match context.method {
        Method::POST | Method::PUT => {
            // Custom resources only: their numbers as kube holds them once stored.
            let mut body = watchkeeper_api::go_json::decode_custom_object(
                &resource.def.kind,
                &resource.def.version,
                &context.body,
            )?;
            if let Some(object) = body.as_object_mut() {
                watchkeeper_api::meta::check_type(&resource.def, object)?;
            }
            // An update's current object at this version, for its managed fields.
            let live = match (&context.method, request.target) {
                (
                    &Method::PUT,
                    crate::request::Target {
                        name: Some(name),
                        subresource: None,
                        ..
                    },
                ) => {
                    let key = watchkeeper_core::object_key(
                        request.target.namespace.unwrap_or_default(),
                        name,
                    );
                    match storage.cache().get(&key).0 {
                        Some(current) => {
                            let at_view = view
                                .convert_one(current.body().clone(), &resource.def.api_version())
                                .await?;
                            Some((current, at_view))
                        }
                        None => None,
                    }
                }
                _ => None,
            };
            let mut stored = view.convert_one(body.clone(), &storage_version).await?;
            let managers = match (&context.method, &live) {
                (&Method::POST, _) if request.target.subresource.is_none() => Some(
                    update_managers(request, (resource, storage), (None, &body), (None, &stored))?,
                ),
                (_, Some((current, at_view))) => Some(update_managers(
                    request,
                    (resource, storage),
                    (Some(at_view), &body),
                    (Some(current.body()), &stored),
                )?),
                _ => None,
            };
            if let Some(managers) = &managers {
                watchkeeper_api::apply::set_managed_fields(&mut stored, managers);
            }
            let body = bytes::Bytes::from(stored.to_string());
            let rewritten = with_body(context, context.method.clone(), body);
            let request = ResourceRequest {
                context: &rewritten,
                target: request.target,
                options: request.options.clone(),
                verb: request.verb,
            };
            match managers {
                Some(managers) => {
                    app.source
                        .write_managed(&request, storage, &served.resources, managers)
                        .await?
                }
                None => {
                    app.source
                        .write(&request, storage, &served.resources)
                        .await?
                }
            }
        }
        Method::PATCH => patch(app, request, (resource, storage), view).await?,
        _ => {
            app.source
                .write(request, storage, &served.resources)
                .await?
        }
    };
    answered(view, response, resource).await
}

/// A PATCH at a converted version: read, convert, patch, convert back, update (see the
/// module docs).
async fn patch(
    app: &App,
    request: &ResourceRequest<'_>,
    (resource, storage): (&Resource, &std::sync::Arc<Resource>),
    view: &dyn ConvertedView,
) -> Result<Response, ApiError> {
    let context = request.context;
    let name = request.target.name.unwrap_or_default();
    let namespace = request.target.namespace.unwrap_or_default();
    let Some(patch_type) = context
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(PatchType::from_content_type)
    else {
        // Not a patch: refused by the write path (kube's 415) before anything is read.
        return app
            .source
            .write(request, storage, &app.resources().resources)
            .await;
    };
    if patch_type == PatchType::Apply && request.target.subresource.is_none() {
        return apply(app, request, (resource, storage), view).await;
    }
    let mut attempt = 0;
    loop {
        attempt += 1;
        let current = storage
            .cache()
            .get(&watchkeeper_core::object_key(namespace, name))
            .0
            .ok_or_else(|| ApiError::not_found(&resource.def, name))?;
        let revision = current.resource_version().to_string();
        let at_view = view
            .convert_one(current.body().clone(), &resource.def.api_version())
            .await?;
        let mut patched = watchkeeper_api::patch::apply_patch(
            &resource.def,
            patch_type,
            &at_view,
            &context.body,
        )?;
        let preconditioned = patched
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .is_some_and(|v| v != revision);
        if let Some(metadata) = patched.get_mut("metadata").and_then(Value::as_object_mut) {
            metadata
                .entry("resourceVersion")
                .or_insert_with(|| Value::String(revision.clone()));
        }
        let mut stored = view
            .convert_one(patched.clone(), &storage.def.api_version())
            .await?;
        let managers = match request.target.subresource {
            None => {
                let managers = update_managers(
                    request,
                    (resource, storage),
                    (Some(&at_view), &patched),
                    (Some(current.body()), &stored),
                )?;
                watchkeeper_api::apply::set_managed_fields(&mut stored, &managers);
                Some(managers)
            }
            Some(_) => None,
        };
        let rewritten = with_body(context, Method::PUT, bytes::Bytes::from(stored.to_string()));
        let update = ResourceRequest {
            context: &rewritten,
            target: request.target,
            options: request.options.clone(),
            verb: Verb::Update,
        };
        let resources = &app.resources().resources;
        let written = match managers {
            Some(managers) => {
                app.source
                    .write_managed(&update, storage, resources, managers)
                    .await
            }
            None => app.source.write(&update, storage, resources).await,
        };
        match written {
            Err(error) if error.code == 409 && !preconditioned && attempt < PATCH_ATTEMPTS => {
                // Another write came first: patch what it left, once the cache has it.
                caught_up(app, storage).await?;
            }
            other => return other,
        }
    }
}

/// A server-side apply at a converted version (see the module docs): the live object
/// converted to this version, the configuration applied there, the result converted back
/// and written with the managed fields the apply decided.
async fn apply(
    app: &App,
    request: &ResourceRequest<'_>,
    (resource, storage): (&Resource, &std::sync::Arc<Resource>),
    view: &dyn ConvertedView,
) -> Result<Response, ApiError> {
    let context = request.context;
    let name = request.target.name.unwrap_or_default();
    let namespace = request.target.namespace.unwrap_or_default();
    let options = watchkeeper_api::query::write_options(
        context.query.as_deref(),
        &[],
        watchkeeper_api::query::WriteOptionsKind::Patch,
        true,
    )?;
    let manager = options.field_manager.clone().unwrap_or_default();
    let config = watchkeeper_api::apply::config::parse_configuration(&context.body)?;
    if let Some(body_name) = config.pointer("/metadata/name").and_then(Value::as_str)
        && body_name != name
    {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        )));
    }
    let applier = watchkeeper_api::apply::ManagerId {
        manager: manager.clone(),
        operation: watchkeeper_api::apply::Operation::Apply,
        api_version: String::new(),
        subresource: String::new(),
    };
    let custom = resource.custom();
    let writer = watchkeeper_api::apply::Writer {
        manager: &manager,
        subresource: "",
        schema: custom.as_ref().and_then(|c| c.schema.as_deref()),
    };
    // What is written: a create or an update, without `force` (an apply's option alone).
    let query = context.query.as_deref().map(|query| {
        query
            .split('&')
            .filter(|pair| pair.split('=').next() != Some("force"))
            .collect::<Vec<_>>()
            .join("&")
    });
    let mut attempt = 0;
    loop {
        attempt += 1;
        let current = storage
            .cache()
            .get(&watchkeeper_core::object_key(namespace, name))
            .0;
        let live = match &current {
            Some(current) => Some(
                view.convert_one(current.body().clone(), &resource.def.api_version())
                    .await?,
            ),
            None => None,
        };
        let time = now();
        let (mut merged, mut managers) = watchkeeper_api::apply::apply(
            &resource.def,
            live.as_ref(),
            &config,
            writer,
            options.force,
            &time,
        )?;
        watchkeeper_api::apply::set_managed_fields(&mut merged, &managers);
        let preconditioned = config
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .is_some_and(|v| !v.is_empty());
        if preconditioned && current.is_none() {
            // As the apply path answers a precondition on an object that is not there.
            return Err(ApiError::not_found(&resource.def, name));
        }
        if let Some(metadata) = merged.get_mut("metadata").and_then(Value::as_object_mut) {
            metadata.insert("name".to_owned(), Value::String(name.to_owned()));
            if let Some(current) = &current
                && !preconditioned
            {
                let revision = current.resource_version().to_string();
                metadata.insert("resourceVersion".to_owned(), Value::String(revision));
            }
        }
        let mut stored = view.convert_one(merged, &storage.def.api_version()).await?;
        if let Some(current) = &current {
            // The managers recorded at the storage version, against what the apply changed
            // there (kube converts to each manager's version).
            let storage_custom = storage.custom();
            watchkeeper_api::apply::versions::at_version(
                &storage.def,
                storage_custom.as_ref().and_then(|c| c.schema.as_deref()),
                (current.body(), &stored),
                &mut managers,
                &applier,
                options.force,
            )?;
            watchkeeper_api::apply::set_managed_fields(&mut stored, &managers);
        }
        let method = if current.is_some() {
            Method::PUT
        } else {
            Method::POST
        };
        let mut rewritten = with_body(context, method, bytes::Bytes::from(stored.to_string()));
        rewritten.query.clone_from(&query);
        let write = ResourceRequest {
            context: &rewritten,
            target: crate::request::Target {
                name: current.as_ref().map(|_| name),
                ..request.target
            },
            options: request.options.clone(),
            verb: if current.is_some() {
                Verb::Update
            } else {
                Verb::Create
            },
        };
        match app
            .source
            .write_managed(&write, storage, &app.resources().resources, managers)
            .await
        {
            Err(error) if error.code == 409 && !preconditioned && attempt < PATCH_ATTEMPTS => {
                // Another write came first (or created it): apply to what it left.
                caught_up(app, storage).await?;
            }
            other => return other,
        }
    }
}

/// The time managed fields entries record (RFC 3339, seconds), as the write path's.
fn now() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

/// The managed fields after a create or update (not of a subresource) at a converted
/// version, as kube's field manager records it at the request's version: the writer's
/// `Update` entry from `live` and `new` at this version; the managers recorded at the
/// storage version lose what the write changed there (`before` and `after`).
fn update_managers(
    request: &ResourceRequest<'_>,
    (resource, storage): (&Resource, &Resource),
    (live, new): (Option<&Value>, &Value),
    (before, after): (Option<&Value>, &Value),
) -> Result<watchkeeper_api::apply::Managers, ApiError> {
    use watchkeeper_api::apply;
    let context = request.context;
    let kind = if context.method == Method::POST {
        watchkeeper_api::query::WriteOptionsKind::Create
    } else {
        watchkeeper_api::query::WriteOptionsKind::Update
    };
    let options =
        watchkeeper_api::query::write_options(context.query.as_deref(), &[], kind, false)?;
    let manager = options.field_manager.unwrap_or_else(|| {
        apply::default_manager(
            context
                .headers
                .get(header::USER_AGENT)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default(),
        )
    });
    let custom = resource.custom();
    let writer = apply::Writer {
        manager: &manager,
        subresource: "",
        schema: custom.as_ref().and_then(|c| c.schema.as_deref()),
    };
    let base = match live {
        Some(live) => apply::base_managers(Some(live), new),
        None => apply::Managers::new(),
    };
    let mut managers = apply::update(&resource.def, live, new, base, writer, &now());
    if let Some(before) = before {
        let writer = apply::ManagerId {
            manager,
            operation: apply::Operation::Update,
            api_version: resource.def.api_version(),
            subresource: String::new(),
        };
        let storage_custom = storage.custom();
        apply::versions::at_version(
            &storage.def,
            storage_custom.as_ref().and_then(|c| c.schema.as_deref()),
            (before, after),
            &mut managers,
            &writer,
            true,
        )?;
    }
    Ok(managers)
}

/// Once the storage version's cache has every write up to now (at most a second: the cache
/// is local), for a write retried after another came first.
async fn caught_up(app: &App, storage: &Resource) -> Result<(), ApiError> {
    let now = app.source.current_revision(&storage.def).await?;
    app.source
        .freshness()
        .nudge_unless_reached(storage.cache(), now);
    let fresh = storage.cache().wait_fresh(now);
    let _ = tokio::time::timeout(std::time::Duration::from_secs(1), fresh).await;
    Ok(())
}

/// `context` with `method` and `body`.
fn with_body(context: &RequestContext, method: Method, body: bytes::Bytes) -> RequestContext {
    let mut headers = context.headers.clone();
    headers.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    headers.remove(header::CONTENT_LENGTH);
    RequestContext {
        method,
        path: context.path.clone(),
        query: context.query.clone(),
        headers,
        body,
        user: context.user.clone(),
        peer: context.peer,
    }
}

/// A write's answer at `resource`'s version: an object or a list of them converted, anything
/// else (a `Status`) as it is.
async fn answered(
    view: &dyn ConvertedView,
    response: Response,
    resource: &Resource,
) -> Result<Response, ApiError> {
    let (mut parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX)
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let desired = resource.def.api_version();
    let mut object: Value = match watchkeeper_api::go_json::parse_stored(&bytes) {
        Ok(object @ Value::Object(_)) => object,
        _ => return Ok(Response::from_parts(parts, bytes.into())),
    };
    let kind = object
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if kind == resource.def.kind {
        object = view.convert_one(object, &desired).await?;
    } else if kind == resource.def.list_kind() {
        let items = object
            .get_mut("items")
            .and_then(Value::as_array_mut)
            .map(std::mem::take)
            .unwrap_or_default();
        object["items"] = Value::Array(view.convert(items, &desired).await?);
        object["apiVersion"] = Value::String(desired);
    } else {
        return Ok(Response::from_parts(parts, bytes.into()));
    }
    parts.headers.remove(header::CONTENT_LENGTH);
    Ok(Response::from_parts(
        parts,
        watchkeeper_api::object_body(&object).into(),
    ))
}

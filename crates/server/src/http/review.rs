//! Access and identity reviews, as kube-apiserver serves them for `kubectl auth can-i`,
//! `kubectl auth whoami` and controllers that delegate authorization:
//! `authorization.k8s.io/v1` `SelfSubjectAccessReview`, `SubjectAccessReview`,
//! `LocalSubjectAccessReview` and `SelfSubjectRulesReview`, and `authentication.k8s.io/v1`
//! `SelfSubjectReview` and `TokenReview`.
//!
//! ## Guarantees
//! - A review is answered by the server's own authorizer ([`crate::auth::Auth`]) for the
//!   attributes in its spec — the same decision a real request with those attributes gets —
//!   and is never stored or watched: create (POST) only, 201 with the review and its `status`
//!   (`reason`: RBAC's `allowed by ...` of an allowed review, the chain's reasons of a denied
//!   one, absent when the deciding modes gave none; a rules review lists
//!   each mode's rules, with RBAC's `resourceNames` and `evaluationError`).
//! - Self reviews answer for the caller and need no permission beyond being authenticated (as
//!   kube-apiserver's default `system:basic-user` role grants); a `SubjectAccessReview` (about
//!   another user) needs `create` on `subjectaccessreviews`, a `LocalSubjectAccessReview`
//!   `create` on `localsubjectaccessreviews` in its namespace, and its spec's namespace must
//!   be that namespace.
//! - A `TokenReview` (needs `create` on `tokenreviews`) answers who its `spec.token`
//!   authenticates as — a service account token of this server, verified for the spec's
//!   audiences (else the API audiences) as a request's would be, or a token of the token file
//!   — with `authenticated: true`, the user and the audiences; otherwise an empty user and
//!   kube-apiserver's reason in `status.error`. An empty token is 400.
//! - Bodies are JSON or Kubernetes protobuf (kubectl sends protobuf); anything else gets the
//!   server's usual 400/415 Status. A JSON body is decoded into the review's Go type as
//!   kube-apiserver decodes it: a field of the wrong type is its 400 `<Kind> in version "v1"
//!   cannot be handled as a <Kind>: json: cannot unmarshal ...`; fields the type does not
//!   declare (and repeated ones) are dropped and, as kube's create handler does for every
//!   kind, reported by `fieldValidation`: a `Warning` each (`Warn`, the default), kube's 400
//!   `... strict decoding error: unknown field "spec.x"` (`Strict`), nothing (`Ignore`). The
//!   query's create options are checked as kube checks them (an unknown `fieldValidation`
//!   is its 422 on `CreateOptions`).

use axum::http::{Method, StatusCode};
use axum::response::Response;
use serde_json::{Value, json};
use watchkeeper_api::discovery::REVIEW_RESOURCES;
use watchkeeper_api::query::FieldValidation;
use watchkeeper_api::{ApiError, ResourceDef};

use super::App;
use crate::auth::{Attributes, Decision, User};
use crate::request::RequestContext;
use crate::respond::json_response;

/// Answers a request under `/apis/{group}/{version}/...` if it names a review resource;
/// `None` otherwise (the request is an ordinary resource request).
pub async fn serve(
    app: &App,
    context: &RequestContext,
    group: &str,
    version: &str,
    rest: &[&str],
) -> Option<Result<Response, ApiError>> {
    let (namespace, plural) = match rest {
        [plural] => (None, *plural),
        ["namespaces", namespace, plural] => (Some(*namespace), *plural),
        _ => return None,
    };
    let &(_, _, _, kind, namespaced) = REVIEW_RESOURCES
        .iter()
        .find(|(g, v, p, _, _)| *g == group && *v == version && *p == plural)?;
    if namespaced != namespace.is_some() {
        return Some(Err(ApiError::path_not_found()));
    }
    if context.method != Method::POST {
        return Some(Err(ApiError::method_not_allowed_on_resource(
            &context.method,
        )));
    }
    let def = ResourceDef::named(group, version, plural, kind, namespaced);
    Some(review(app, context, &def, namespace).await)
}

/// The review of `context`'s body, decoded, its unknown and repeated fields reported into
/// `warnings` or refused as the query's `fieldValidation` asks (see the module docs).
fn decode(
    def: &ResourceDef,
    context: &RequestContext,
    warnings: &mut crate::respond::Warnings,
) -> Result<Value, ApiError> {
    let options = watchkeeper_api::query::write_options(
        context.query.as_deref(),
        &[],
        watchkeeper_api::query::WriteOptionsKind::Create,
        false,
    )?;
    let protobuf = context
        .headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(watchkeeper_api::is_protobuf_media_type);
    let value = if protobuf {
        watchkeeper_api::decode_protobuf(def, &context.body)?
    } else {
        // Decoded into the review's Go type, as kube-apiserver's create handler decodes it: a
        // field of the wrong type is its 400 (`SelfSubjectAccessReview in version "v1" cannot
        // be handled as a SelfSubjectAccessReview: json: cannot unmarshal ...`), a field the
        // type does not declare is dropped (not echoed back in the answer).
        let mut value = watchkeeper_api::schema::decode_body(def, &context.body)?;
        if let Value::Object(fields) = &value {
            watchkeeper_api::schema::check_body(def, fields)?;
        }
        let unknown = watchkeeper_api::schema::prune_unknown_fields(def, &mut value);
        let fields =
            watchkeeper_api::schema::strict_fields(def, &context.body).unwrap_or_else(|| {
                unknown
                    .into_iter()
                    .map(watchkeeper_api::schema::StrictField::Unknown)
                    .collect()
            });
        if !fields.is_empty() {
            match options.field_validation {
                FieldValidation::Ignore => {}
                FieldValidation::Strict => {
                    return Err(watchkeeper_api::schema::strict_body_error(def, &fields));
                }
                FieldValidation::Warn => {
                    for field in &fields {
                        warnings.add(field.to_string());
                    }
                }
            }
        }
        value
    };
    if value.is_object() {
        Ok(value)
    } else {
        Err(ApiError::bad_request(
            "the request body must be a JSON object".to_owned(),
        ))
    }
}

async fn review(
    app: &App,
    context: &RequestContext,
    def: &ResourceDef,
    namespace: Option<&str>,
) -> Result<Response, ApiError> {
    let caller = &context.user;
    let is_self = def.plural.starts_with("self");
    let create = Attributes::Resource {
        verb: "create",
        def,
        namespace: namespace.unwrap_or_default(),
        name: "",
        subresource: "",
    };
    let is_authenticated = caller.groups.iter().any(|g| g == "system:authenticated");
    if !(is_self && is_authenticated) {
        app.auth.prepare_authorization(caller, &create).await;
    }
    let authorized = app.auth.authorize(caller, &create);
    if let Err(error) = authorized
        && !(is_self && is_authenticated)
    {
        return Err(error);
    }
    crate::respond::no_table(&context.headers)?;
    let mut warnings = crate::respond::Warnings::new();
    let body = decode(def, context, &mut warnings)?;
    let spec = body.get("spec").cloned().unwrap_or_else(|| json!({}));
    let status = match def.plural.as_str() {
        "selfsubjectreviews" => json!({"userInfo": user_info(caller)}),
        "selfsubjectrulesreviews" => {
            let namespace = spec.get("namespace").and_then(Value::as_str).unwrap_or("");
            rules_status(app, caller, namespace)
        }
        "selfsubjectaccessreviews" => access_status(app, caller, &spec, None).await?,
        "tokenreviews" => token_status(app, &spec).await?,
        _ => {
            let subject = User {
                name: text(&spec, "user").to_owned(),
                uid: text(&spec, "uid").to_owned(),
                groups: spec
                    .get("groups")
                    .and_then(Value::as_array)
                    .map(|groups| {
                        groups
                            .iter()
                            .filter_map(Value::as_str)
                            .map(str::to_owned)
                            .collect()
                    })
                    .unwrap_or_default(),
                extra: Default::default(),
            };
            if subject.name.is_empty() && subject.groups.is_empty() {
                return Err(invalid(
                    def,
                    "spec.user",
                    "at least one of user or group must be specified",
                ));
            }
            access_status(app, &subject, &spec, namespace.map(|ns| (def, ns))).await?
        }
    };
    let metadata = body
        .get("metadata")
        .filter(|m| m.is_object())
        .cloned()
        .unwrap_or_else(|| json!({"creationTimestamp": null}));
    let mut answer = json!({
        "kind": def.kind,
        "apiVersion": def.api_version(),
        "metadata": metadata,
    });
    if def.plural != "selfsubjectreviews" {
        answer["spec"] = spec;
    }
    answer["status"] = status;
    Ok(warnings.on(json_response(StatusCode::CREATED, answer.to_string())))
}

/// `TokenReviewStatus` for the token in `spec`: the user it authenticates as and the
/// audiences it is good for, or kube-apiserver's empty user with the error.
async fn token_status(app: &App, spec: &Value) -> Result<Value, ApiError> {
    let token = text(spec, "token");
    if token.is_empty() {
        return Err(ApiError::bad_request(
            "token is required for TokenReview in authentication".to_owned(),
        ));
    }
    let audiences: Vec<String> = spec
        .get("audiences")
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    Ok(match app.auth.review_token(token, &audiences).await {
        Ok((user, audiences)) => {
            json!({"authenticated": true, "user": user_info(&user), "audiences": audiences})
        }
        Err(error) => json!({"user": {}, "error": error}),
    })
}

fn text<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or("")
}

fn invalid(def: &ResourceDef, field: &str, detail: &str) -> ApiError {
    ApiError::invalid(
        def,
        "",
        vec![(
            field.to_owned(),
            format!("Required value: {detail}"),
            "FieldValueRequired".to_owned(),
        )],
    )
}

fn user_info(user: &User) -> Value {
    let mut info = json!({"username": user.name, "groups": user.groups});
    if !user.uid.is_empty() {
        info["uid"] = json!(user.uid);
    }
    if !user.extra.is_empty() {
        info["extra"] = json!(user.extra);
    }
    info
}

/// `SubjectAccessReviewStatus` for the attributes in `spec`, decided for `subject`.
/// `local` is a `LocalSubjectAccessReview`'s namespace, which the spec must agree with.
async fn access_status(
    app: &App,
    subject: &User,
    spec: &Value,
    local: Option<(&ResourceDef, &str)>,
) -> Result<Value, ApiError> {
    let resource = spec.get("resourceAttributes").filter(|v| v.is_object());
    let non_resource = spec.get("nonResourceAttributes").filter(|v| v.is_object());
    let decision = match (resource, non_resource) {
        (Some(attributes), None) => {
            let mut namespace = text(attributes, "namespace");
            if let Some((def, local_namespace)) = local {
                if namespace.is_empty() {
                    namespace = local_namespace;
                } else if namespace != local_namespace {
                    return Err(ApiError::invalid(
                        def,
                        "",
                        vec![(
                            "spec.resourceAttributes.namespace".to_owned(),
                            format!("Invalid value: {namespace:?}: must match metadata.namespace"),
                            "FieldValueInvalid".to_owned(),
                        )],
                    ));
                }
            }
            let target = ResourceDef::named(
                text(attributes, "group"),
                text(attributes, "version"),
                text(attributes, "resource"),
                "",
                !namespace.is_empty(),
            );
            decided(
                app,
                subject,
                &Attributes::Resource {
                    verb: text(attributes, "verb"),
                    def: &target,
                    namespace,
                    name: text(attributes, "name"),
                    subresource: text(attributes, "subresource"),
                },
            )
            .await
        }
        (None, Some(attributes)) => {
            decided(
                app,
                subject,
                &Attributes::NonResource {
                    verb: text(attributes, "verb"),
                    path: text(attributes, "path"),
                },
            )
            .await
        }
        _ => {
            let def = local.map_or_else(
                || {
                    ResourceDef::named(
                        "authorization.k8s.io",
                        "v1",
                        "subjectaccessreviews",
                        "SubjectAccessReview",
                        false,
                    )
                },
                |(def, _)| def.clone(),
            );
            return Err(invalid(
                &def,
                "spec.resourceAttributes",
                "exactly one of nonResourceAttributes or resourceAttributes must be specified",
            ));
        }
    };
    Ok(decision)
}

/// The `SubjectAccessReviewStatus` of the chain's decision (the webhook's answer awaited
/// first, see `auth::authz_webhook`): `allowed`, `denied` when a mode denied outright, the
/// reason when the deciding modes gave one, and `evaluationError` when a webhook failed.
async fn decided(app: &App, subject: &User, attributes: &Attributes<'_>) -> Value {
    app.auth.prepare_authorization(subject, attributes).await;
    let (allowed, denied, reason, error) = match app.auth.decide(subject, attributes) {
        Decision::Allowed => (
            true,
            false,
            app.auth.allowed_reason(subject, attributes),
            String::new(),
        ),
        Decision::Denied(reason) => (false, false, reason, String::new()),
        Decision::Refused {
            reason,
            denied,
            error,
        } => (false, denied, reason, error),
    };
    let mut status = json!({"allowed": allowed});
    if denied {
        status["denied"] = json!(true);
    }
    if !reason.is_empty() {
        status["reason"] = json!(reason);
    }
    if !error.is_empty() {
        status["evaluationError"] = json!(error);
    }
    status
}

fn rules_status(app: &App, user: &User, namespace: &str) -> Value {
    let rules = app.auth.rules_for(user, namespace);
    let mut status = json!({
        "resourceRules": rules.resource,
        "nonResourceRules": rules.non_resource,
        "incomplete": rules.incomplete,
    });
    if !rules.evaluation_error.is_empty() {
        status["evaluationError"] = json!(rules.evaluation_error);
    }
    status
}

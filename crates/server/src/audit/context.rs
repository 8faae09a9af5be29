//! The audit record of the request being served: what code anywhere on the request's path
//! adds to its audit events — annotations, the authorization decision, the refusal, the
//! body — without knowing whether the request is audited. A leaf: it depends on nothing of
//! the server, so admission, authorization and the response builders may call it.
//!
//! ## Guarantees
//! - Each function is one task-local read when the current request is not audited (no
//!   policy, level `None`, outside a request): no allocation, no copy.
//! - Holds only what the request already holds (its body is shared, not copied) and the
//!   annotations added to it.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use watchkeeper_api::ApiError;

/// What one audited request learns while it is served.
#[derive(Debug)]
pub struct Context {
    wants_body: bool,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
pub(super) struct State {
    pub(super) annotations: BTreeMap<String, String>,
    pub(super) refusal: Option<ApiError>,
    pub(super) request_body: Option<Bytes>,
}

impl Context {
    pub(super) fn new(wants_body: bool) -> Context {
        Context {
            wants_body,
            state: Mutex::default(),
        }
    }

    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

tokio::task_local! {
    /// The audit context of the request the current task serves, when it is audited.
    static CURRENT: Option<Arc<Context>>;
}

/// Runs `future` as the audited request of `context`.
pub(super) fn scope<F: Future>(
    context: Arc<Context>,
    future: F,
) -> tokio::task::futures::TaskLocalFuture<Option<Arc<Context>>, F> {
    CURRENT.scope(Some(context), future)
}

/// Runs `future` with the current request's audit context, so that work moved to another
/// thread (the heavy requests' pool) still annotates its request.
pub fn carry<F: Future>(
    future: F,
) -> tokio::task::futures::TaskLocalFuture<Option<Arc<Context>>, F> {
    let current = CURRENT.try_with(Clone::clone).ok().flatten();
    CURRENT.scope(current, future)
}

fn with_current(f: impl FnOnce(&Context)) {
    let _ = CURRENT.try_with(|current| {
        if let Some(context) = current {
            f(context);
        }
    });
}

/// Adds `key: value` to the annotations of the current request's audit events (kube's
/// `audit.AddAuditAnnotation`): the events written from now on carry it. A key already set
/// keeps its first value, as kube keeps it. Does nothing when the request is not audited
/// (no policy, level `None`) or outside a request. Admission plugins (PodSecurity,
/// ValidatingAdmissionPolicy, webhooks) and authorizers call it.
pub fn annotate(key: &str, value: impl Into<String>) {
    with_current(|context| {
        let mut state = context.lock();
        if !state.annotations.contains_key(key) {
            state.annotations.insert(key.to_owned(), value.into());
        }
    });
}

/// Whether the current request is audited (so that work done only for its annotations, such
/// as PodSecurity's audit-level checks, can be skipped when it is not).
#[must_use]
pub fn is_audited() -> bool {
    CURRENT
        .try_with(|current| current.is_some())
        .unwrap_or(false)
}

/// Records the authorizer's decision on the current request (kube's
/// `authorization.k8s.io/decision`, `allow` or `forbid`, and `authorization.k8s.io/reason`,
/// the authorizer's reason: empty for the ABAC file and for no authorization). A later call
/// (the RBAC authorizer's, with its reason) replaces an earlier one.
pub fn authorized(allowed: bool, reason: &str) {
    with_current(|context| {
        let mut state = context.lock();
        let decision = if allowed { "allow" } else { "forbid" };
        state.annotations.insert(
            "authorization.k8s.io/decision".to_owned(),
            decision.to_owned(),
        );
        state
            .annotations
            .insert("authorization.k8s.io/reason".to_owned(), reason.to_owned());
    });
}

/// Notes the refusal the current request is answered with (its event's `responseStatus`);
/// called where refusals become responses.
pub fn refused(error: &ApiError) {
    with_current(|context| context.lock().refusal = Some(error.clone()));
}

/// Keeps the request's body for its events (`requestObject`, and the `objectRef` a create or
/// update completes from it), when its level and verb need it: shared, not copied. A body
/// that is not JSON (protobuf, before the store source decodes it and calls this again with
/// the JSON) is left out of the events.
pub fn request_body(body: &Bytes) {
    with_current(|context| {
        if context.wants_body && !body.is_empty() {
            context.lock().request_body = Some(body.clone());
        }
    });
}

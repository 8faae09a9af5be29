//! The `authorizer` variable of admission policies (kube's CEL authorization library,
//! [`watchkeeper_api::cel_rules::authz`]) backed by the server's authorization chain.
//!
//! ## Guarantees
//! - A check is decided by [`Auth::decide`], the chain every request goes through
//!   (`--authorization-mode`, kube's privileged group `system:masters` included), for the user
//!   the expression names: the request's user (name, uid, groups) or the service account of
//!   `authorizer.serviceAccount(ns, name)`.
//! - `allowed()` is the chain's decision; `reason()` is its reason: on an allow, RBAC's
//!   `RBAC: allowed by ...` ([`Auth::allowed_reason`]), on a denial the modes' reasons, one per
//!   line (`No policy matched.`, `Everything is forbidden.`, RBAC's missing roles), as kube's
//!   union authorizer gives them. No authorizer here fails, so `errored()` is always false.
//! - A resource check is a [`Attributes::Named`] request (any group and resource, served or
//!   not), a path check a non-resource request on the path as given.

use std::sync::Arc;

use serde_json::Value;
use watchkeeper_api::admission_policy::{Authorizer, AuthzDecision, CheckTarget};

use super::{Attributes, Auth, Decision, User};

/// [`Auth`] as the policies' `authorizer`.
#[derive(Debug)]
pub struct ChainAuthorizer(pub Arc<Auth>);

/// The policies' authorizer over `auth`.
#[must_use]
pub fn policy_authorizer(auth: Arc<Auth>) -> Arc<dyn Authorizer> {
    Arc::new(ChainAuthorizer(auth))
}

/// The user an `authentication/v1` `UserInfo` describes.
fn user_of(info: &Value) -> User {
    let text = |key: &str| info.get(key).and_then(Value::as_str).unwrap_or_default();
    User {
        name: text("username").to_owned(),
        uid: text("uid").to_owned(),
        groups: info
            .get("groups")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        extra: Default::default(),
    }
}

impl Authorizer for ChainAuthorizer {
    fn check(&self, user: &Value, verb: &str, target: &CheckTarget) -> AuthzDecision {
        let user = user_of(user);
        let attributes = match target {
            CheckTarget::Path(path) => Attributes::NonResource { verb, path },
            CheckTarget::Resource {
                group,
                resource,
                subresource,
                namespace,
                name,
            } => Attributes::Named {
                verb,
                group,
                resource,
                subresource,
                namespace,
                name,
            },
        };
        match self.0.decide(&user, &attributes) {
            Decision::Allowed => AuthzDecision {
                allowed: true,
                reason: self.0.allowed_reason(&user, &attributes),
                error: String::new(),
            },
            Decision::Denied(reason) => AuthzDecision {
                allowed: false,
                reason,
                error: String::new(),
            },
            Decision::Refused { reason, error, .. } => AuthzDecision {
                allowed: false,
                reason,
                error,
            },
        }
    }
}

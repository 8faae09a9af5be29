//! kube-apiserver's `Webhook` authorization mode (`--authorization-mode ...,Webhook,...`,
//! `k8s.io/apiserver/plugin/pkg/authorizer/webhook`): a request's attributes are POSTed as an
//! `authorization.k8s.io` `SubjectAccessReview` to the webhook a kubeconfig names
//! (`--authorization-webhook-config-file`), whose `status` decides.
//!
//! ## Guarantees
//! - **The review** is kube's: `apiVersion` `authorization.k8s.io/v1beta1` (kube's default) or
//!   `v1` (`--authorization-webhook-version`), `kind: SubjectAccessReview`, `metadata:
//!   {creationTimestamp: null}`, `status: {allowed: false}` and the spec's fields as Go
//!   marshals them (empty ones left out): `resourceAttributes` (`namespace`, `verb`, `group`,
//!   `version`, `resource`, `subresource`, `name`) or `nonResourceAttributes` (`path`,
//!   `verb`), then `user`, the groups — `group` in v1beta1, `groups` in v1, as kube's two
//!   types spell them —, `extra` and `uid`. Impersonation checks carry version `v1` (kube's
//!   `corev1`/`authenticationv1` kinds).
//! - **The answer**: `status.allowed: true` allows; `status.denied: true` denies and ends the
//!   chain (kube's `DecisionDeny`: later modes are not asked); otherwise the mode has no
//!   opinion and the next is asked. `status.reason` joins the chain's reasons (kube's union
//!   authorizer), so a 403 ends with it; both `allowed` and `denied` is kube's deny with the
//!   error `webhook subject access review returned both allow and deny response`.
//! - **Failures** (the kubeconfig cannot be used, no answer within kube's 30 s timeout, a
//!   non-2xx answer, one that does not decode): the mode has no opinion *with an error*, as
//!   kube's (`failurePolicy: NoOpinion` of its legacy flags). A later mode may still allow;
//!   if none does, kube's union authorizer returns the error and its `WithAuthorization`
//!   filter answers **500** `Internal Server Error: "<path>": <error>` (not 403), an
//!   `impersonate` check its 403 (kube's `WithImpersonation` refuses any non-allow so), and an
//!   access review answers `allowed: false` with `evaluationError`. A reset connection or a
//!   429, 500 or 504 answer is retried as kube's `DefaultShouldRetry`: five attempts, 500 ms
//!   apart, then 1.5 times longer each time (kube's `DefaultAuthWebhookRetryBackoff`, no
//!   jitter here). Failures are never cached.
//! - **Cache** (kube's `LRUExpireCache`, [`Answers`]): an answer is kept under its review's
//!   serialized (v1) spec, as kube keys it, for `--authorization-webhook-cache-authorized-ttl`
//!   when it allows (kube's 5m) or `--authorization-webhook-cache-unauthorized-ttl` otherwise
//!   (kube's 30s); 0 keeps none. At most `--authorization-webhook-cache-entries` (kube's
//!   8192) are kept, the least recently used dropped first. Time is the authorizer's clock
//!   ([`Ticks`]), so a test moves it by hand.
//! - **Bounds**: at most `--authorization-webhook-calls-max` calls in flight over all
//!   requests (a call waits for a slot within its 30 s); an answer is read up to
//!   `--max-request-body-bytes`; concurrent requests missing the same spec share one call
//!   (one in-flight entry per spec; the others wait for its outcome).
//!
//! ## The sync/async split
//! The chain ([`Auth::decide`]) is synchronous and called from many places; a network call
//! must not block a runtime worker. So every request-level path first awaits
//! [`Auth::prepare_authorization`] (this module's [`AuthzWebhook::prefetch`]) for the
//! attributes it is about to authorize, which makes the call on a miss and keeps the
//! outcome; the sync decision then reads it:
//! - the limits layer: the URL's authorization (`LayerState::prepare_authorize`, the same
//!   attributes `http::authorize_from_url` decides), and the `Impersonate-*` checks
//!   ([`Auth::prepare_impersonation`], in the audit layer too, before each authenticates);
//! - the access reviews (`SubjectAccessReview`, `LocalSubjectAccessReview`,
//!   `SelfSubjectAccessReview`: the caller's `create` and the spec's attributes) and
//!   `componentstatuses`, which authorize in their handlers.
//!
//! The outcome of each call — failures and answers with a TTL of 0 included — is also kept
//! for a minute (at most as many as the cache) as the *recent* outcome of its spec, read only
//! when the cache misses, so the request that prefetched decides on its own call's outcome
//! whatever the TTLs; a later request still calls again (failures are not cached).
//!
//! ## Differences from kube
//! - A sync decision whose spec was never prefetched (an admission policy's `authorizer`
//!   check, RBAC's `escalate`/`bind` checks, OwnerReferencesPermissionEnforcement, ...) does
//!   not call the webhook: the mode has no opinion with the reason `webhook decision not
//!   available` (kube would call it). Request paths always prefetch.
//! - kube's 500 body is `text/plain` and names the request URI with its query; here it is a
//!   JSON `Status` (reason `InternalError`) naming the path built from the attributes.
//! - Errors are kube-rs' words for the transport, not client-go's; a non-2xx answer is its
//!   `Status` message, else `the server responded with the status code N but did not return
//!   more information`.
//! - `fieldSelector`/`labelSelector` requirements (kube's `AuthorizeWithSelectors`) are not
//!   sent; structured authorization configuration (`--authorization-config`, match
//!   conditions, `failurePolicy: Deny`) is not supported.
//! - `SelfSubjectRulesReview` with `Webhook` in the chain is kube's: `incomplete: true` and
//!   the error `webhook authorizer does not support user rule resolution`.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{Attributes, Auth, AuthorizationMode, Decision, User};
use crate::config::authz::{AuthzWebhookConfig, SarVersion};
use crate::source::event_rate_limit::{MonotonicTicks, Ticks};
use crate::source::webhook::answers::Answers;
use crate::source::webhook::kubeconfig::{Failure, REQUEST_TIMEOUT, Target, with_retries};

/// The reason of the mode for a decision it was not asked for in time (see the module docs).
pub const NOT_AVAILABLE: &str = "webhook decision not available";

/// kube's first wait before a retry.
const RETRY_BACKOFF: Duration = Duration::from_millis(500);
/// How long the recent outcome of a call is kept for the decisions after its prefetch.
const RECENT_FOR: Duration = Duration::from_secs(60);

/// kube's `ResourceAttributes` (v1 and v1beta1 alike), empty fields left out.
#[derive(Serialize)]
struct ResourceAttributes<'a> {
    #[serde(skip_serializing_if = "str::is_empty")]
    namespace: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    verb: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    group: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    version: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    resource: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    subresource: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    name: &'a str,
}

/// kube's `NonResourceAttributes`.
#[derive(Serialize)]
struct NonResourceAttributes<'a> {
    #[serde(skip_serializing_if = "str::is_empty")]
    path: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    verb: &'a str,
}

/// kube's v1 `SubjectAccessReviewSpec`, in its field order (its JSON is the cache key).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Spec<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    resource_attributes: Option<ResourceAttributes<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    non_resource_attributes: Option<NonResourceAttributes<'a>>,
    #[serde(skip_serializing_if = "str::is_empty")]
    user: &'a str,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    groups: &'a [String],
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    extra: &'a BTreeMap<String, Vec<String>>,
    #[serde(skip_serializing_if = "str::is_empty")]
    uid: &'a str,
}

/// The review's serialized v1 spec for `user` doing `attributes`: the cache key.
#[must_use]
pub fn spec_key(user: &User, attributes: &Attributes<'_>) -> String {
    let (resource_attributes, non_resource_attributes) = match attributes {
        Attributes::Resource {
            verb,
            def,
            namespace,
            name,
            subresource,
        } => (
            Some(ResourceAttributes {
                namespace,
                verb,
                group: &def.group,
                version: &def.version,
                resource: &def.plural,
                subresource,
                name,
            }),
            None,
        ),
        Attributes::Named {
            verb,
            group,
            resource,
            subresource,
            namespace,
            name,
        } => (
            Some(ResourceAttributes {
                namespace,
                verb,
                group,
                // kube's impersonation checks name v1 kinds (`corev1`, `authenticationv1`).
                version: if *verb == "impersonate" { "v1" } else { "" },
                resource,
                subresource,
                name,
            }),
            None,
        ),
        Attributes::NonResource { verb, path } => {
            (None, Some(NonResourceAttributes { path, verb }))
        }
    };
    let spec = Spec {
        resource_attributes,
        non_resource_attributes,
        user: &user.name,
        groups: &user.groups,
        extra: &user.extra,
        uid: &user.uid,
    };
    serde_json::to_string(&spec).unwrap_or_default()
}

/// The review POSTed for the spec `key`, in `version`.
fn review_body(key: &str, version: SarVersion) -> Vec<u8> {
    let mut spec: serde_json::Value = serde_json::from_str(key).unwrap_or_default();
    if version == SarVersion::V1beta1
        && let Some(fields) = spec.as_object_mut()
        && let Some(groups) = fields.remove("groups")
    {
        fields.insert("group".to_owned(), groups);
    }
    serde_json::json!({
        "kind": "SubjectAccessReview",
        "apiVersion": version.api_version(),
        "metadata": {"creationTimestamp": null},
        "spec": spec,
        "status": {"allowed": false},
    })
    .to_string()
    .into_bytes()
}

/// The webhook's `SubjectAccessReviewStatus`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(default, rename_all = "camelCase")]
pub struct Status {
    /// `allowed`.
    pub allowed: bool,
    /// `denied`.
    pub denied: bool,
    /// `reason`.
    pub reason: String,
    /// `evaluationError`.
    pub evaluation_error: String,
}

#[derive(Deserialize)]
struct Review {
    #[serde(default)]
    status: Status,
}

/// A call's outcome.
#[derive(Clone, Debug)]
enum Outcome {
    Answered(Status),
    Failed(String),
}

/// What the mode says about one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Opinion {
    /// Allowed, with the webhook's reason.
    Allow(String),
    /// Denied, ending the chain (kube's `DecisionDeny`); `error` when the answer also allowed.
    Deny {
        /// The webhook's reason.
        reason: String,
        /// The evaluation error, empty for none.
        error: String,
    },
    /// No opinion: the next mode is asked.
    NoOpinion {
        /// The webhook's reason (or [`NOT_AVAILABLE`]).
        reason: String,
        /// Why the call failed, empty when it did not.
        error: String,
    },
}

fn opinion_of(status: Status) -> Opinion {
    match (status.allowed, status.denied) {
        (true, true) => Opinion::Deny {
            reason: status.reason,
            error: "webhook subject access review returned both allow and deny response".to_owned(),
        },
        (_, true) => Opinion::Deny {
            reason: status.reason,
            error: String::new(),
        },
        (true, false) => Opinion::Allow(status.reason),
        (false, false) => Opinion::NoOpinion {
            reason: status.reason,
            error: String::new(),
        },
    }
}

/// The authorization webhook: its configuration, client, cache and calls in flight.
pub struct AuthzWebhook {
    config: AuthzWebhookConfig,
    target: tokio::sync::OnceCell<Target>,
    answers: Mutex<Answers<Status>>,
    recent: Mutex<Answers<Outcome>>,
    in_flight: Mutex<HashMap<String, tokio::sync::watch::Receiver<bool>>>,
    slots: tokio::sync::Semaphore,
    ticks: Arc<dyn Ticks>,
    calls: AtomicU64,
    shared: AtomicU64,
    answer_bytes_max: usize,
}

impl std::fmt::Debug for AuthzWebhook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthzWebhook")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// Removes a call's in-flight entry and wakes its waiters, however the call ends.
struct InFlight<'a> {
    webhook: &'a AuthzWebhook,
    key: &'a str,
    done: tokio::sync::watch::Sender<bool>,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        lock(&self.webhook.in_flight).remove(self.key);
        let _ = self.done.send(true);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl AuthzWebhook {
    /// The authorizer for `config`, on the process's clock unless the configuration names
    /// one, its answers read up to `answer_bytes_max` bytes. The kubeconfig is read now.
    ///
    /// # Errors
    /// The kubeconfig cannot be read or used (kube-rs' words).
    pub async fn start(
        config: &AuthzWebhookConfig,
        answer_bytes_max: usize,
    ) -> Result<AuthzWebhook, String> {
        let target = Target::load(&config.config_file).await?;
        let ticks = config
            .clock
            .0
            .clone()
            .unwrap_or_else(|| Arc::new(MonotonicTicks::default()));
        let webhook = AuthzWebhook {
            config: config.clone(),
            target: tokio::sync::OnceCell::new_with(Some(target)),
            answers: Mutex::new(Answers::new(config.cache_entries)),
            recent: Mutex::new(Answers::new(config.cache_entries)),
            in_flight: Mutex::new(HashMap::new()),
            slots: tokio::sync::Semaphore::new(config.calls_max.max(1)),
            ticks,
            calls: AtomicU64::new(0),
            shared: AtomicU64::new(0),
            answer_bytes_max,
        };
        Ok(webhook)
    }

    /// Reviews POSTed so far (retries included).
    #[must_use]
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    /// Prefetches that waited for another's identical call instead of calling.
    #[must_use]
    pub fn shared(&self) -> u64 {
        self.shared.load(Ordering::Relaxed)
    }

    /// Decisions kept in the cache (expired ones not looked up since included).
    #[must_use]
    pub fn cached(&self) -> usize {
        lock(&self.answers).len()
    }

    /// Makes sure the decision for `user` doing `attributes` is known: a cached answer, or
    /// one call to the webhook (shared with concurrent identical misses) whose outcome is
    /// kept (see the module docs).
    pub async fn prefetch(&self, user: &User, attributes: &Attributes<'_>) {
        self.prefetch_key(spec_key(user, attributes)).await;
    }

    /// [`AuthzWebhook::prefetch`] of the spec `key` ([`spec_key`]).
    pub async fn prefetch_key(&self, key: String) {
        if lock(&self.answers).get(&key, self.ticks.now()).is_some() {
            return;
        }
        // Lead the call, or wait for the one in flight for the same spec.
        let joined = {
            let mut in_flight = lock(&self.in_flight);
            match in_flight.get(&key) {
                Some(waiting) => Err(waiting.clone()),
                None => {
                    let (done, waiting) = tokio::sync::watch::channel(false);
                    in_flight.insert(key.clone(), waiting);
                    Ok(done)
                }
            }
        };
        let done = match joined {
            Ok(done) => done,
            Err(mut waiting) => {
                self.shared.fetch_add(1, Ordering::Relaxed);
                let _ = waiting.wait_for(|done| *done).await;
                return;
            }
        };
        let _in_flight = InFlight {
            webhook: self,
            key: &key,
            done,
        };
        let outcome = self.call(&key).await;
        let now = self.ticks.now();
        if let Outcome::Answered(status) = &outcome {
            let ttl = if status.allowed {
                self.config.authorized_ttl
            } else {
                self.config.unauthorized_ttl
            };
            if !ttl.is_zero() {
                lock(&self.answers).add(key.clone(), status.clone(), now + ttl);
            }
        }
        lock(&self.recent).add(key.clone(), outcome, now + RECENT_FOR);
    }

    /// The webhook's answer to the review of `key`, with kube's retries.
    async fn call(&self, key: &str) -> Outcome {
        let Some(target) = self.target.get() else {
            return Outcome::Failed("the authorization webhook is not loaded".to_owned());
        };
        let body = review_body(key, self.config.version);
        let outcome = with_retries(RETRY_BACKOFF, || async {
            let Ok(Ok(_slot)) = tokio::time::timeout(REQUEST_TIMEOUT, self.slots.acquire()).await
            else {
                return Err(Failure {
                    reset: false,
                    cause: "context deadline exceeded".to_owned(),
                });
            };
            self.calls.fetch_add(1, Ordering::Relaxed);
            target
                .post(body.clone(), self.answer_bytes_max, Some(REQUEST_TIMEOUT))
                .await
        })
        .await;
        match outcome {
            Err(failure) => Outcome::Failed(failure.cause),
            Ok((status, answer)) if !(200..300).contains(&status) => {
                Outcome::Failed(status_error(status, &answer))
            }
            Ok((_, answer)) => match serde_json::from_slice::<Review>(&answer) {
                Ok(review) => Outcome::Answered(review.status),
                Err(error) => Outcome::Failed(error.to_string()),
            },
        }
    }

    /// The mode's opinion of `user` doing `attributes`, from the cache or the recent outcome
    /// of a prefetch; [`NOT_AVAILABLE`] when neither knows it.
    #[must_use]
    pub fn opinion(&self, user: &User, attributes: &Attributes<'_>) -> Opinion {
        let key = spec_key(user, attributes);
        let now = self.ticks.now();
        if let Some(status) = lock(&self.answers).get(&key, now) {
            return opinion_of(status);
        }
        match lock(&self.recent).get(&key, now) {
            Some(Outcome::Answered(status)) => opinion_of(status),
            Some(Outcome::Failed(error)) => Opinion::NoOpinion {
                reason: String::new(),
                error,
            },
            None => Opinion::NoOpinion {
                reason: NOT_AVAILABLE.to_owned(),
                error: String::new(),
            },
        }
    }

    /// kube's union authorizer over `auth`'s modes with this webhook among them (called by
    /// [`Auth::decide`] once the open paths and `system:masters` are past).
    pub(super) fn decide(&self, auth: &Auth, user: &User, attributes: &Attributes<'_>) -> Decision {
        let mut reasons = Vec::new();
        let mut errors = Vec::new();
        for mode in &auth.modes {
            if *mode != AuthorizationMode::Webhook {
                if auth.mode_allows(*mode, user, attributes) {
                    return Decision::Allowed;
                }
                reasons.extend(auth.mode_reason(*mode, user, attributes));
                continue;
            }
            match self.opinion(user, attributes) {
                Opinion::Allow(_) => return Decision::Allowed,
                Opinion::Deny { reason, error } => {
                    return Decision::Refused {
                        reason,
                        denied: true,
                        error,
                    };
                }
                Opinion::NoOpinion { reason, error } => {
                    if !reason.is_empty() {
                        reasons.push(reason);
                    }
                    if !error.is_empty() {
                        errors.push(error);
                    }
                }
            }
        }
        let reason = reasons.join("\n");
        if errors.is_empty() {
            Decision::Denied(reason)
        } else {
            Decision::Refused {
                reason,
                denied: false,
                error: watchkeeper_api::field::aggregate(&errors),
            }
        }
    }
}

/// A non-2xx answer's error: its `Status` message, else client-go's generic words.
fn status_error(status: u16, answer: &[u8]) -> String {
    serde_json::from_slice::<serde_json::Value>(answer)
        .ok()
        .and_then(|v| {
            v.get("message")
                .and_then(serde_json::Value::as_str)
                .filter(|m| !m.is_empty())
                .map(str::to_owned)
        })
        .unwrap_or_else(|| {
            format!(
                "the server responded with the status code {status} but did not return more information"
            )
        })
}

/// The request path `attributes` name, for kube's 500 message.
fn path_of(attributes: &Attributes<'_>) -> String {
    let (group, version, resource, subresource, namespace, name) = match attributes {
        Attributes::NonResource { path, .. } => return (*path).to_owned(),
        Attributes::Resource {
            def,
            namespace,
            name,
            subresource,
            ..
        } => (
            def.group.as_str(),
            def.version.as_str(),
            def.plural.as_str(),
            *subresource,
            *namespace,
            *name,
        ),
        Attributes::Named {
            group,
            resource,
            subresource,
            namespace,
            name,
            ..
        } => (*group, "v1", *resource, *subresource, *namespace, *name),
    };
    let mut path = if group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{group}/{version}")
    };
    for part in [
        if namespace.is_empty() {
            ""
        } else {
            "namespaces"
        },
        namespace,
        resource,
        name,
        subresource,
    ] {
        if !part.is_empty() {
            path.push('/');
            path.push_str(part);
        }
    }
    path
}

/// kube's answer to a request the chain refused with an evaluation error: its
/// `WithAuthorization` filter's 500 `Internal Server Error: "<path>": <error>`.
#[must_use]
pub fn internal_error(attributes: &Attributes<'_>, error: &str) -> watchkeeper_api::ApiError {
    watchkeeper_api::ApiError::new(
        500,
        "InternalError",
        format!("Internal Server Error: {:?}: {error}", path_of(attributes)),
    )
}

/// The `Impersonate-*` checks of `headers` in kube's order (the identities
/// [`Auth::impersonate`] checks), as (group, resource, subresource, namespace, name); empty
/// when the headers impersonate nobody or are malformed (impersonate refuses those itself).
pub(super) fn impersonation_checks(
    headers: &axum::http::HeaderMap,
) -> Vec<(&'static str, &'static str, String, String, String)> {
    let text = |value: &axum::http::HeaderValue| value.to_str().ok().map(str::to_owned);
    let Some(target) = headers.get("impersonate-user").and_then(text) else {
        return Vec::new();
    };
    if target.is_empty() {
        return Vec::new();
    }
    let mut checks = Vec::new();
    match super::split_service_account(&target) {
        Some((namespace, name)) => checks.push((
            "",
            "serviceaccounts",
            String::new(),
            namespace.to_owned(),
            name.to_owned(),
        )),
        None => checks.push(("", "users", String::new(), String::new(), target.clone())),
    }
    for group in headers.get_all("impersonate-group").iter().filter_map(text) {
        checks.push(("", "groups", String::new(), String::new(), group));
    }
    for (key, value) in headers {
        if let Some(extra) = key.as_str().strip_prefix("impersonate-extra-")
            && let Some(value) = text(value)
        {
            checks.push((
                super::AUTHENTICATION_GROUP,
                "userextras",
                super::unescape_extra_key(extra),
                String::new(),
                value,
            ));
        }
    }
    if let Some(uid) = headers.get("impersonate-uid").and_then(text) {
        checks.push((
            super::AUTHENTICATION_GROUP,
            "uids",
            String::new(),
            String::new(),
            uid,
        ));
    }
    checks
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user() -> User {
        User {
            name: "jane".to_owned(),
            uid: "u1".to_owned(),
            groups: vec!["dev".to_owned(), "system:authenticated".to_owned()],
            extra: [("scopes".to_owned(), vec!["a".to_owned()])]
                .into_iter()
                .collect(),
        }
    }

    #[test]
    fn the_spec_is_kube_s_in_go_s_field_order() {
        let defs = watchkeeper_api::builtin_resources();
        let deployments = defs.iter().find(|d| d.plural == "deployments").unwrap();
        let key = spec_key(
            &user(),
            &Attributes::Resource {
                verb: "get",
                def: deployments,
                namespace: "team",
                name: "web",
                subresource: "scale",
            },
        );
        assert_eq!(
            key,
            r#"{"resourceAttributes":{"namespace":"team","verb":"get","group":"apps","version":"v1","resource":"deployments","subresource":"scale","name":"web"},"user":"jane","groups":["dev","system:authenticated"],"extra":{"scopes":["a"]},"uid":"u1"}"#
        );
        let key = spec_key(
            &User::anonymous(),
            &Attributes::NonResource {
                verb: "get",
                path: "/metrics",
            },
        );
        assert_eq!(
            key,
            r#"{"nonResourceAttributes":{"path":"/metrics","verb":"get"},"user":"system:anonymous","groups":["system:unauthenticated"]}"#
        );
        let body: serde_json::Value =
            serde_json::from_slice(&review_body(&key, SarVersion::V1beta1)).unwrap();
        assert_eq!(body["apiVersion"], "authorization.k8s.io/v1beta1");
        assert_eq!(
            body["spec"]["group"],
            serde_json::json!(["system:unauthenticated"])
        );
        assert!(body["spec"].get("groups").is_none());
        let body: serde_json::Value =
            serde_json::from_slice(&review_body(&key, SarVersion::V1)).unwrap();
        assert_eq!(body["apiVersion"], "authorization.k8s.io/v1");
        assert_eq!(
            body["spec"]["groups"],
            serde_json::json!(["system:unauthenticated"])
        );
        assert_eq!(body["status"], serde_json::json!({"allowed": false}));
    }

    #[test]
    fn answers_become_kube_s_decisions() {
        let status = |allowed, denied| Status {
            allowed,
            denied,
            reason: "r".to_owned(),
            evaluation_error: String::new(),
        };
        assert_eq!(
            opinion_of(status(true, false)),
            Opinion::Allow("r".to_owned())
        );
        assert_eq!(
            opinion_of(status(false, true)),
            Opinion::Deny {
                reason: "r".to_owned(),
                error: String::new()
            }
        );
        assert!(matches!(
            opinion_of(status(true, true)),
            Opinion::Deny { error, .. } if error.contains("both allow and deny")
        ));
        assert_eq!(
            opinion_of(status(false, false)),
            Opinion::NoOpinion {
                reason: "r".to_owned(),
                error: String::new()
            }
        );
    }

    #[test]
    fn paths_for_the_500() {
        let defs = watchkeeper_api::builtin_resources();
        let configmaps = defs.iter().find(|d| d.plural == "configmaps").unwrap();
        assert_eq!(
            path_of(&Attributes::Resource {
                verb: "list",
                def: configmaps,
                namespace: "team",
                name: "",
                subresource: "",
            }),
            "/api/v1/namespaces/team/configmaps"
        );
        assert_eq!(
            internal_error(
                &Attributes::NonResource {
                    verb: "get",
                    path: "/metrics"
                },
                "boom"
            )
            .message,
            "Internal Server Error: \"/metrics\": boom"
        );
    }

    #[test]
    fn impersonation_checks_in_kube_s_order() {
        let mut headers = axum::http::HeaderMap::new();
        headers.insert(
            "impersonate-user",
            "system:serviceaccount:ci:builder".parse().unwrap(),
        );
        headers.append("impersonate-group", "g1".parse().unwrap());
        headers.insert("impersonate-uid", "u".parse().unwrap());
        let checks = impersonation_checks(&headers);
        assert_eq!(checks.len(), 3);
        assert_eq!(checks[0].1, "serviceaccounts");
        assert_eq!(checks[0].3, "ci");
        assert_eq!(checks[1].1, "groups");
        assert_eq!(checks[2].1, "uids");
        assert!(impersonation_checks(&axum::http::HeaderMap::new()).is_empty());
    }

    /// A plain-HTTP webhook answering `allowed: true` to each review once `release` is
    /// notified; counts the reviews it received.
    async fn held_webhook(
        release: Arc<tokio::sync::Notify>,
        received: Arc<AtomicU64>,
        arrived: Arc<tokio::sync::Notify>,
    ) -> u16 {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            loop {
                let Ok((mut stream, _)) = listener.accept().await else {
                    return;
                };
                let (release, received, arrived) =
                    (release.clone(), received.clone(), arrived.clone());
                tokio::spawn(async move {
                    let mut request = Vec::new();
                    let mut buffer = [0u8; 4096];
                    // Headers, then the body of Content-Length bytes.
                    loop {
                        let n = stream.read(&mut buffer).await.unwrap_or(0);
                        if n == 0 {
                            return;
                        }
                        request.extend_from_slice(&buffer[..n]);
                        let text = String::from_utf8_lossy(&request).to_string();
                        if let Some((head, body)) = text.split_once("\r\n\r\n") {
                            let length = head
                                .lines()
                                .find_map(|l| {
                                    let (name, value) = l.split_once(':')?;
                                    name.eq_ignore_ascii_case("content-length")
                                        .then(|| value.trim().parse::<usize>().ok())?
                                })
                                .unwrap_or(0);
                            if body.len() >= length {
                                break;
                            }
                        }
                    }
                    received.fetch_add(1, Ordering::SeqCst);
                    arrived.notify_one();
                    release.notified().await;
                    let body = r#"{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","status":{"allowed":true}}"#;
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    // One answer per connection, said so: the client never reuses a
                    // connection this server is closing (which it would retry as a reset).
                    let _ = stream.write_all(answer.as_bytes()).await;
                });
            }
        });
        port
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn identical_misses_share_one_call_and_answers_expire_on_the_clock() {
        let (release, received, arrived) = (
            Arc::new(tokio::sync::Notify::new()),
            Arc::new(AtomicU64::new(0)),
            Arc::new(tokio::sync::Notify::new()),
        );
        let port = held_webhook(release.clone(), received.clone(), arrived.clone()).await;
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("authz.kubeconfig");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: a\n  cluster:\n    server: http://127.0.0.1:{port}/authorize\nusers:\n- name: u\n  user: {{}}\ncontexts:\n- name: a\n  context:\n    cluster: a\n    user: u\ncurrent-context: a\n"
            ),
        )
        .unwrap();
        let ticks = Arc::new(crate::source::event_rate_limit::ManualTicks::default());
        let config = AuthzWebhookConfig {
            config_file: kubeconfig,
            version: SarVersion::V1,
            authorized_ttl: Duration::from_secs(300),
            unauthorized_ttl: Duration::from_secs(30),
            cache_entries: 2,
            calls_max: 4,
            clock: crate::config::authz::CacheClock(Some(ticks.clone())),
        };
        let webhook = Arc::new(AuthzWebhook::start(&config, 1 << 20).await.unwrap());
        let path = |p: &'static str| Attributes::NonResource {
            verb: "get",
            path: p,
        };
        let asked = user();
        // Two identical misses at once: one call; the second waits for the first's outcome.
        let first = {
            let (webhook, asked) = (webhook.clone(), asked.clone());
            tokio::spawn(async move { webhook.prefetch(&asked, &path("/a")).await })
        };
        arrived.notified().await;
        let second = {
            let (webhook, asked) = (webhook.clone(), asked.clone());
            tokio::spawn(async move { webhook.prefetch(&asked, &path("/a")).await })
        };
        // The second waits on the first's call (no wall-clock wait: until it has joined).
        tokio::time::timeout(Duration::from_secs(60), async {
            while webhook.shared() == 0 {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("the second prefetch never joined the first's call");
        release.notify_one();
        first.await.unwrap();
        second.await.unwrap();
        assert_eq!(received.load(Ordering::SeqCst), 1);
        assert_eq!(webhook.calls(), 1);
        assert!(lock(&webhook.in_flight).is_empty());
        assert_eq!(
            webhook.opinion(&asked, &path("/a")),
            Opinion::Allow(String::new())
        );
        // Cached until the TTL on the authorizer's clock; then asked again.
        webhook.prefetch(&asked, &path("/a")).await;
        assert_eq!(webhook.calls(), 1);
        ticks.advance(Duration::from_secs(300));
        release.notify_one();
        webhook.prefetch(&asked, &path("/a")).await;
        assert_eq!(webhook.calls(), 2);
        // Bounded: two entries at most.
        for p in ["/b", "/c"] {
            release.notify_one();
            webhook.prefetch(&asked, &path(p)).await;
        }
        assert_eq!(webhook.cached(), 2);
        // Never prefetched: no opinion, not available.
        assert_eq!(
            webhook.opinion(&asked, &path("/never")),
            Opinion::NoOpinion {
                reason: NOT_AVAILABLE.to_owned(),
                error: String::new()
            }
        );
    }
}

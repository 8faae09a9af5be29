//! kube-apiserver's `MutatingAdmissionWebhook` and `ValidatingAdmissionWebhook` admission
//! plugins on the store's writes: the webhook configurations read from their caches, the
//! webhooks matched and answered as [`watchkeeper_api::admission_webhook`] decides, called
//! with [`client::WebhookClient`].
//!
//! ## Guarantees
//! - **Order** (kube's plugin order): the mutating webhooks run after the in-process mutating
//!   plugins (LimitRanger's defaults, ServiceAccount, Priority, ...) and before the object's
//!   own validation; the validating webhooks after ValidatingAdmissionPolicy and before
//!   quota admission and the transaction. Creates, updates (PUT, PATCH, apply, subresource
//!   writes; every attempt of a guaranteed update, as kube calls admission inside its update
//!   loop) and deletes (validating only: a delete has no object to mutate) are admitted;
//!   the admission configuration kinds are not (kube exempts them), and the server's own
//!   controllers' writes are admitted like any other.
//! - **Mutating**: the webhooks are called one after another (configurations by name, each
//!   in its order), each seeing the object as the ones before left it; an answer's JSON patch
//!   applies to it. A webhook with `reinvocationPolicy: IfNeeded` is called once more, after
//!   the first round, when a webhook after it changed the object (kube's single
//!   reinvocation; the in-process plugins are not re-run).
//! - **Validating**: the matching webhooks are called at once; the first refusal in their
//!   order is the answer.
//! - **Refusals** are kube's: a denial is `admission webhook "x" denied the request: ...`
//!   with the webhook's code; a call that fails (unreachable, timed out, an answer that does
//!   not verify) is kube's 500 `failed calling webhook "x": ...` under `failurePolicy: Fail`
//!   and is ignored under `Ignore`; a dry run to a webhook whose `sideEffects` is not `None`
//!   or `NoneOnDryRun` is kube's 400 `admission webhook "x" does not support dry run`, the
//!   webhook not called.
//! - **Warnings** of every answer go out as `Warning` headers with the write's answer.
//! - **Read as they are**: configurations, services, endpoints and namespaces come from
//!   their caches (kube's informers); a configuration written is used by the requests after
//!   it once its cache has it (a write waits for its own revision before answering).
//! - A write with no configuration in the caches costs two cache lookups.
//! - `--disable-admission-plugins` turns either plugin off; `--webhook-calls-max` bounds the
//!   calls in flight (see [`client`]).
//!
//! ## Metrics
//! `apiserver_admission_webhook_admission_calls_total` (calls by `name`, `type`
//! `admit`/`validating`, `operation`, `rejected`: the count of kube's
//! `apiserver_admission_webhook_admission_duration_seconds`, no durations kept) and
//! `apiserver_admission_webhook_rejection_count_total` (kube's
//! `apiserver_admission_webhook_rejection_count`, with the `_total` every counter here has;
//! by `name`, `type`, `operation`, `error_type`
//! `calling_webhook_error`/`no_error`/`apiserver_internal_error`, `rejection_code`).
//! `apiserver_crd_conversion_webhook_duration_seconds` (kube's histogram of the CRD
//! conversion webhooks' calls by `crd_name`, `from_version`, `to_version`, `succeeded`;
//! see [`conversion::Durations`]).
//!
//! ## Not here
//! - Audit: each answer's `auditAnnotations` go to the request's audit event as
//!   `<webhook>/<key>` ([`audit_annotations`]); kube's `mutation.webhook.admission.k8s.io/*`
//!   and `patch.webhook.admission.k8s.io/*` annotations are not recorded.
//! - The object is sent at the request's version even when `matchPolicy: Equivalent`
//!   matched another version (kube converts it).

pub mod answers;
pub mod client;
pub mod conversion;
pub mod kubeconfig;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use futures_util::future::join_all;
use serde_json::Value;
use watchkeeper_api::ApiError;
use watchkeeper_api::admission_policy::{Attributes, Equivalent};
use watchkeeper_api::admission_webhook::{self, Call, Hook, Target};
use watchkeeper_core::object_key;

use crate::cache::Resource;
use crate::source::policy_admission::{self, Caches, Write};
use client::{Request, WebhookClient};

/// The two configuration kinds' resources.
const GROUP: &str = "admissionregistration.k8s.io";

/// A call's labels: name, type, operation, rejected.
pub type CallKey = (String, &'static str, &'static str, bool);

/// A rejection's labels: name, type, operation, error type, code.
pub type RejectionKey = (String, &'static str, &'static str, &'static str, u16);

/// The webhook plugins of a server.
#[derive(Debug)]
pub struct Webhooks {
    client: WebhookClient,
    calls: Mutex<BTreeMap<CallKey, u64>>,
    rejections: Mutex<BTreeMap<RejectionKey, u64>>,
    /// The conversion webhooks' call durations (they share the client).
    conversion_durations: conversion::Durations,
}

/// How one call ended, for the metrics.
enum Outcome {
    Allowed,
    /// A call that failed (ignored under `Ignore`).
    Failed {
        ignored: bool,
    },
    /// The webhook said no.
    Denied(u16),
    /// The server could not use the answer (a patch that does not apply).
    Internal,
}

/// What a webhook's audit annotations are recorded as in the audit log: `<webhook
/// name>/<key>` and the value (kube's keys).
#[must_use]
pub fn audit_annotations(webhook: &str, annotations: &[(String, String)]) -> Vec<(String, String)> {
    annotations
        .iter()
        .map(|(key, value)| (format!("{webhook}/{key}"), value.clone()))
        .collect()
}

impl Webhooks {
    /// The plugins, with at most `calls_max` calls in flight and answers of at most
    /// `answer_bytes_max` bytes.
    #[must_use]
    pub fn new(calls_max: usize, answer_bytes_max: usize) -> Webhooks {
        Webhooks {
            client: WebhookClient::new(calls_max, answer_bytes_max),
            calls: Mutex::new(BTreeMap::new()),
            rejections: Mutex::new(BTreeMap::new()),
            conversion_durations: conversion::Durations::default(),
        }
    }

    /// The conversion webhooks' call durations.
    #[must_use]
    pub fn conversion_durations(&self) -> &conversion::Durations {
        &self.conversion_durations
    }

    /// The client (conversion webhooks share it).
    #[must_use]
    pub fn client(&self) -> &WebhookClient {
        &self.client
    }

    /// The mutating webhooks on `write` (a create or update; its own `object` is not read),
    /// whose object is `object`: the object they leave, and whether a patch changed it.
    ///
    /// # Errors
    /// A webhook's denial, a failed call under `Fail`, a dry run a webhook does not support,
    /// a patch that does not apply.
    pub async fn mutate(
        &self,
        resources: &[Arc<Resource>],
        write: &Write<'_>,
        object: Value,
        warn: &(dyn Fn(String) + Sync),
    ) -> Result<(Value, bool), ApiError> {
        let configurations = configurations(resources, "mutatingwebhookconfigurations");
        if configurations.is_empty() {
            return Ok((object, false));
        }
        let hooks = admission_webhook::hooks(&configurations);
        let mut object = object;
        let mut invoked: Vec<usize> = Vec::new();
        let mut again = vec![false; hooks.len()];
        let mut any = false;
        for (index, hook) in hooks.iter().enumerate() {
            let Some(changed) = self
                .mutate_once(resources, write, hook, &mut object, warn)
                .await?
            else {
                continue;
            };
            any |= changed;
            if changed {
                for &earlier in &invoked {
                    again[earlier] = true;
                }
            }
            if hook.reinvoked_if_needed() {
                invoked.push(index);
            }
        }
        for (index, hook) in hooks.iter().enumerate() {
            if again[index] {
                let changed = self
                    .mutate_once(resources, write, hook, &mut object, warn)
                    .await?;
                any |= changed == Some(true);
            }
        }
        Ok((object, any))
    }

    /// One mutating webhook on the object as it is: `None` when not called, else whether its
    /// patch changed the object.
    async fn mutate_once(
        &self,
        resources: &[Arc<Resource>],
        write: &Write<'_>,
        hook: &Hook<'_>,
        object: &mut Value,
        warn: &(dyn Fn(String) + Sync),
    ) -> Result<Option<bool>, ApiError> {
        let current = Write {
            object: Some(object),
            ..*write
        };
        let attributes = policy_admission::attributes(&current);
        let matched = match admission_webhook::should_call(hook, &attributes, &Caches(resources)) {
            Call::Skip => return Ok(None),
            Call::Refuse(error) => return Err(error),
            Call::Call(matched) => matched,
        };
        let called = self
            .call(resources, hook, &attributes, &matched, true)
            .await;
        let answer = match called {
            Err(refusal) => return refusal.map(|()| Some(false)),
            Ok(answer) => answer,
        };
        for warning in answer.warnings {
            warn(warning);
        }
        let Some(patch) = answer.patch else {
            return Ok(Some(false));
        };
        let operation = attributes.operation.as_str();
        let patched = admission_webhook::patched(hook.name(), Some(object), &patch)
            .inspect_err(|_| self.count(hook.name(), "admit", operation, &Outcome::Internal))?;
        let changed = patched != *object;
        *object = patched;
        Ok(Some(changed))
    }

    /// The validating webhooks on `write`.
    ///
    /// # Errors
    /// The first refusal, in the webhooks' order.
    pub async fn validate(
        &self,
        resources: &[Arc<Resource>],
        write: &Write<'_>,
        warn: &(dyn Fn(String) + Sync),
    ) -> Result<(), ApiError> {
        let configurations = configurations(resources, "validatingwebhookconfigurations");
        if configurations.is_empty() {
            return Ok(());
        }
        let hooks = admission_webhook::hooks(&configurations);
        let attributes = policy_admission::attributes(write);
        let caches = Caches(resources);
        let mut called = Vec::new();
        for hook in &hooks {
            match admission_webhook::should_call(hook, &attributes, &caches) {
                Call::Skip => {}
                Call::Refuse(error) => return Err(error),
                Call::Call(matched) => called.push((hook, matched)),
            }
        }
        let answers = join_all(
            called
                .iter()
                .map(|(hook, matched)| self.call(resources, hook, &attributes, matched, false)),
        )
        .await;
        let mut refusal = None;
        for answer in answers {
            match answer {
                Ok(answer) => answer.warnings.into_iter().for_each(warn),
                Err(Ok(())) => {}
                Err(Err(error)) => {
                    refusal.get_or_insert(error);
                }
            }
        }
        refusal.map_or(Ok(()), Err)
    }

    /// Calls `hook` (matched as `matched`) on the write `attributes` describes: its allowing
    /// answer, or `Err(Ok(()))` for a failure ignored, or `Err(Err(refusal))`.
    async fn call(
        &self,
        resources: &[Arc<Resource>],
        hook: &Hook<'_>,
        attributes: &Attributes<'_>,
        matched: &Equivalent,
        mutating: bool,
    ) -> Result<admission_webhook::Answer, Result<(), ApiError>> {
        let name = hook.name();
        let kind = if mutating { "admit" } else { "validating" };
        let operation = attributes.operation.as_str();
        if attributes.dry_run && !hook.dry_run_safe() {
            return Err(Err(admission_webhook::dry_run_unsupported(name)));
        }
        let failed = |reason: String| {
            let ignored = hook.ignores_failures();
            self.count(name, kind, operation, &Outcome::Failed { ignored });
            if ignored {
                tracing::warn!(webhook = name, %reason, "failed calling webhook, failing open");
                Err(Ok(()))
            } else {
                Err(Err(admission_webhook::call_failed(name, &reason)))
            }
        };
        let version = match admission_webhook::review_version(hook) {
            Ok(version) => version,
            Err(reason) => return failed(reason),
        };
        let uid = uuid::Uuid::new_v4().to_string();
        let review =
            admission_webhook::review(version, &uid, attributes, matched, attributes.object);
        let timeout_seconds = hook.timeout_seconds();
        let Some(target) = Target::of(hook.client_config()) else {
            return failed("could not get REST client: no url or service".to_owned());
        };
        let authority = match resolve(resources, &target) {
            Ok(authority) => authority,
            Err(cause) => {
                let printed = target.printed(timeout_seconds);
                return failed(format!(
                    "failed to call webhook: Post \"{printed}\": {cause}"
                ));
            }
        };
        let ca_bundle = hook
            .client_config()
            .get("caBundle")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let posted = self
            .client
            .post(Request {
                target: &target,
                authority,
                ca_bundle,
                timeout_seconds,
                body: review.to_string().into_bytes(),
            })
            .await;
        let body = match posted {
            Ok(body) => body,
            Err(reason) => return failed(reason),
        };
        let answer = match admission_webhook::answer(version, &uid, mutating, &body) {
            Ok(answer) => answer,
            Err(reason) => return failed(reason),
        };
        for (key, value) in audit_annotations(name, &answer.audit_annotations) {
            crate::audit::context::annotate(&key, value);
        }
        if !answer.allowed {
            let refusal = admission_webhook::denied(name, answer.result.as_ref());
            self.count(name, kind, operation, &Outcome::Denied(refusal.code));
            for warning in answer.warnings {
                tracing::debug!(webhook = name, %warning, "warning of a denying webhook");
            }
            return Err(Err(refusal));
        }
        self.count(name, kind, operation, &Outcome::Allowed);
        Ok(answer)
    }

    fn count(&self, name: &str, kind: &'static str, operation: &'static str, outcome: &Outcome) {
        let rejected = match outcome {
            Outcome::Allowed | Outcome::Failed { ignored: true } => None,
            Outcome::Failed { ignored: false } => Some(("calling_webhook_error", 0)),
            Outcome::Denied(code) => Some(("no_error", *code)),
            Outcome::Internal => Some(("apiserver_internal_error", 0)),
        };
        *self
            .calls
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry((name.to_owned(), kind, operation, rejected.is_some()))
            .or_default() += 1;
        if let Some((error_type, code)) = rejected {
            *self
                .rejections
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .entry((name.to_owned(), kind, operation, error_type, code))
                .or_default() += 1;
        }
    }

    /// The calls and rejections counted so far, by their labels (`/metrics` formats them).
    #[must_use]
    pub fn counts(&self) -> (BTreeMap<CallKey, u64>, BTreeMap<RejectionKey, u64>) {
        let calls = self
            .calls
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let rejections = self
            .rejections
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        (calls, rejections)
    }
}

/// Whether the cache of the configurations `plural` holds one.
#[must_use]
pub fn configured(resources: &[Arc<Resource>], plural: &str) -> bool {
    policy_admission::served(resources, GROUP, plural)
        .is_some_and(|r| r.cache().latest().range(None, None).next().is_some())
}

/// The configurations of `plural` in their cache.
fn configurations(resources: &[Arc<Resource>], plural: &str) -> Vec<Value> {
    policy_admission::cached_objects(policy_admission::served(resources, GROUP, plural), None)
}

/// The address (`host:port`) a webhook at `target` is called at: the URL's host (port 443 by
/// default), or an address of the service's endpoints from the caches (kube's
/// `ResolveEndpoint`, see [`client`]).
///
/// # Errors
/// kube's words for what is missing.
fn resolve(resources: &[Arc<Resource>], target: &Target) -> Result<String, String> {
    let (namespace, name, port) = match target {
        Target::Url { host, .. } => {
            let has_port = if host.starts_with('[') {
                host.contains("]:")
            } else {
                host.contains(':')
            };
            return Ok(if has_port {
                host.clone()
            } else {
                format!("{host}:443")
            });
        }
        Target::Service {
            namespace,
            name,
            port,
            ..
        } => (namespace.as_str(), name.as_str(), *port),
    };
    let get = |group: &str, plural: &str| {
        policy_admission::served(resources, group, plural)
            .and_then(|r| r.cache().get(&object_key(namespace, name)).0)
            .map(|o| o.body().clone())
    };
    let service = get("", "services").ok_or_else(|| format!("service {name:?} not found"))?;
    let kind = service
        .pointer("/spec/type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP");
    if !matches!(kind, "ClusterIP" | "LoadBalancer" | "NodePort") {
        return Err(format!("unsupported service type {kind:?}"));
    }
    let service_port = service
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|p| p.get("port").and_then(Value::as_u64) == Some(u64::from(port)))
        .ok_or_else(|| format!("no service port {port} found for service {name:?}"))?;
    let port_name = service_port
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut candidates: Vec<String> = Vec::new();
    if let Some(endpoints) = get("", "endpoints") {
        for subset in endpoints
            .get("subsets")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let Some(port) = named_port(subset, port_name) else {
                continue;
            };
            candidates.extend(
                list(subset, "addresses")
                    .filter_map(|a| a.get("ip").and_then(Value::as_str))
                    .map(|ip| join_host_port(ip, port)),
            );
        }
    } else {
        let slices = policy_admission::cached_objects(
            policy_admission::served(resources, "discovery.k8s.io", "endpointslices"),
            Some(&format!("{namespace}/")),
        );
        for slice in slices.iter().filter(|s| {
            s.pointer("/metadata/namespace").and_then(Value::as_str) == Some(namespace)
                && s.pointer("/metadata/labels/kubernetes.io~1service-name")
                    .and_then(Value::as_str)
                    == Some(name)
        }) {
            let Some(port) = named_port(slice, port_name) else {
                continue;
            };
            for endpoint in list(slice, "endpoints") {
                if endpoint
                    .pointer("/conditions/ready")
                    .and_then(Value::as_bool)
                    == Some(false)
                {
                    continue;
                }
                candidates.extend(
                    list(endpoint, "addresses")
                        .filter_map(Value::as_str)
                        .map(|ip| join_host_port(ip, port)),
                );
            }
        }
    }
    if candidates.is_empty() {
        return Err(format!("service {namespace}/{name} has no endpoints"));
    }
    let pick = usize::try_from(rand::random::<u64>() % candidates.len() as u64).unwrap_or(0);
    Ok(candidates.swap_remove(pick))
}

fn list<'v>(value: &'v Value, key: &str) -> impl Iterator<Item = &'v Value> {
    value
        .get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

/// The port named `name` (kube matches the service port's name) of an Endpoints subset or an
/// EndpointSlice.
fn named_port(holder: &Value, name: &str) -> Option<u64> {
    list(holder, "ports")
        .find(|p| p.get("name").and_then(Value::as_str).unwrap_or_default() == name)
        .and_then(|p| p.get("port").and_then(Value::as_u64))
}

/// Go's `net.JoinHostPort`.
fn join_host_port(host: &str, port: u64) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

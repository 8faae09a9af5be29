//! kube-apiserver's `PodSecurity` admission plugin (`plugin/pkg/admission/security/podsecurity`)
//! on the store's write path: the checks and wording are
//! [`watchkeeper_api::pod_security`]'s; this module reads what they need from the caches.
//!
//! ## Guarantees
//! - Runs as kube's validating admission does: after the mutating plugins and the kind's
//!   validation, on creates and updates (dry runs too), before quota and the store; off with
//!   `--disable-admission-plugins PodSecurity`.
//! - **Pods**: a create, or an update that changes what a check sees, violating the enforce
//!   policy of its namespace's labels is refused with kube's 403 `pods "p" is forbidden:
//!   violates PodSecurity "restricted:latest": ...`, nothing written; otherwise a violation of
//!   the warn policy is a `Warning` header `would violate PodSecurity "...": ...`.
//! - **Workloads** (Deployments, ReplicaSets, StatefulSets, DaemonSets, Jobs, CronJobs,
//!   ReplicationControllers, PodTemplates): their pod templates only warn, never refuse.
//! - **Namespaces**: invalid `pod-security.kubernetes.io/*` labels are kube's 422 on a create
//!   and on an update that changes their errors; an update that tightens the enforce policy
//!   answers kube's warnings about the namespace's pods that violate it.
//! - `--admission-control-config-file`'s `PodSecurityConfiguration` sets the policy of modes a
//!   namespace has no label for and the exempt namespaces, users and runtime classes
//!   ([`watchkeeper_api::pod_security::config`]); without it, kube's defaults
//!   (`privileged:latest`, no exemptions).
//! - The namespace's labels and its pods are read from their caches as they are (kube reads
//!   its informers' listers); a pod's namespace missing from the cache counts as unlabelled
//!   (`privileged`). kube's 1 s budget for checking existing pods is not kept: all of them, up
//!   to kube's 3000, are checked.
//! - For a request the audit log records, kube's audit annotations
//!   (`pod-security.kubernetes.io/enforce-policy`, `.../audit-violations`) are added to its
//!   events ([`crate::audit::context::annotate`]); other requests do not pay for the audit checks.

use std::sync::Arc;

use serde_json::Value;
use watchkeeper_api::pod_security::{
    Attributes, Configuration, NamespaceReview, admit_namespace, admit_pod, admit_template,
    applies, existing_pod_warnings,
};
use watchkeeper_api::{ApiError, ResourceDef};

use crate::cache::Resource;

/// PodSecurity under `config` (`--admission-control-config-file`) on a write by `user` of
/// `object` of `def` (`subresource` empty for the object itself; `old` on updates),
/// `resources` being every served resource: the warnings to answer with.
///
/// # Errors
/// kube's 403 for a pod that violates the enforce policy; kube's 422 for a namespace's
/// invalid labels.
pub(super) fn admit(
    config: &Configuration,
    resources: &[Arc<Resource>],
    def: &ResourceDef,
    user: &str,
    (subresource, old): (&str, Option<&Value>),
    object: &Value,
) -> Result<Vec<String>, ApiError> {
    if !applies(&def.group, &def.plural) {
        return Ok(Vec::new());
    }
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if def.plural == "namespaces" {
        if !subresource.is_empty() {
            return Ok(Vec::new());
        }
        return match admit_namespace(config, object, old) {
            Err(causes) => Err(ApiError::invalid(def, name, causes)),
            Ok(NamespaceReview::Allowed) => Ok(Vec::new()),
            Ok(NamespaceReview::Exempt(warning)) => Ok(vec![warning]),
            Ok(NamespaceReview::CheckPods(enforce)) => {
                let pods = pods_in(resources, name);
                Ok(existing_pod_warnings(
                    config,
                    name,
                    enforce,
                    pods.iter().collect(),
                ))
            }
        };
    }
    let namespace = object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let labels = namespace_labels(resources, namespace);
    let write = Attributes {
        user,
        group: &def.group,
        plural: &def.plural,
        subresource,
        old,
        object,
        labels: labels.as_ref(),
    };
    if crate::audit::context::is_audited() {
        for (key, value) in watchkeeper_api::pod_security::audit_annotations(config, &write) {
            crate::audit::context::annotate(&format!("pod-security.kubernetes.io/{key}"), value);
        }
    }
    let decision = if def.plural == "pods" {
        admit_pod(config, &write)
    } else {
        admit_template(config, &write)
    };
    match decision.refusal {
        Some(refusal) => Err(ApiError::forbidden(def, name, refusal)),
        None => Ok(decision.warnings),
    }
}

/// The core v1 resource `plural` at its stored version.
fn core(resources: &[Arc<Resource>], plural: &str) -> Option<Arc<Resource>> {
    resources
        .iter()
        .find(|r| r.def.group.is_empty() && r.def.plural == plural && r.conversion.is_none())
        .cloned()
}

/// A namespace's `metadata.labels`, from the namespaces' cache.
fn namespace_labels(resources: &[Arc<Resource>], namespace: &str) -> Option<Value> {
    let namespaces = core(resources, "namespaces")?;
    let (found, _) = namespaces.cache().get(namespace);
    found.and_then(|ns| ns.body().pointer("/metadata/labels").cloned())
}

/// The pods of a namespace, from the pods' cache, by name.
fn pods_in(resources: &[Arc<Resource>], namespace: &str) -> Vec<Value> {
    let Some(pods) = core(resources, "pods") else {
        return Vec::new();
    };
    let prefix = format!("{namespace}/");
    pods.cache()
        .latest()
        .range(Some(&prefix), None)
        .take_while(|pod| pod.key().starts_with(&prefix))
        .map(|pod| pod.body().clone())
        .collect()
}

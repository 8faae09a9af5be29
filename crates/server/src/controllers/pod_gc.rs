//! The pod garbage collector: kube-controller-manager's `pod-garbage-collector` controller
//! (`pkg/controller/podgc/gc_controller.go`, v1.33) for a server over a store. Without it a
//! pod bound to a node is deleted gracefully and, with no kubelet, stays `Terminating`
//! forever (see `watchkeeper_api::graceful`), and so does a namespace that holds one.
//!
//! Every `--pod-gc-period-ms` (kube's 20 s), a pass reads the pods and Nodes from the caches,
//! both proven fresh to the store's current revision, and, in kube's order:
//! - **terminated** (`gcTerminated`): when more pods than `--terminated-pod-gc-threshold` are
//!   terminated (phase neither `Pending`, `Running` nor `Unknown`), the excess is deleted,
//!   evicted ones first (`Failed` with reason `Evicted`), then oldest `creationTimestamp`
//!   first, then by name;
//! - **terminating on an out-of-service node** (`gcTerminating`): a pod being deleted whose
//!   Node exists, is not Ready (its `Ready` condition not `True`) and has a taint of key
//!   `node.kubernetes.io/out-of-service`;
//! - **orphaned** (`gcOrphaned`): a pod whose `spec.nodeName` names a Node that does not
//!   exist, once that node has been absent at a pass and again at a pass at least
//!   `--pod-gc-quarantine-ms` later (kube's 40 s quarantine); its status first gets kube's
//!   condition `DisruptionTarget` (`True`, reason `DeletionByPodGC`, message `PodGC: node no
//!   longer exists`);
//! - **unscheduled terminating** (`gcUnscheduledTerminating`): a pod being deleted with no
//!   `spec.nodeName`.
//!
//! Each such pod that has not finished is first marked `Failed` through its `status`
//! subresource (kube's `markFailedAndDeletePodWithCondition`), then deleted with a grace period
//! of 0, as the user `system:serviceaccount:kube-system:pod-garbage-collector`.
//!
//! ## Guarantees
//! - A pass reads the caches only (no list from the store) and makes at most
//!   `--pod-gc-deletes-per-pass-max` deletions (each after at most one status patch); pods
//!   past the bound wait for the next pass (a node confirmed missing stays confirmed).
//! - Writes go through the ordinary write path, so admission, finalizers and watches see them
//!   as a client's; the status patch carries the pod's `resourceVersion` and the delete its
//!   `uid`, so a pod changed or recreated since the pass read it is left for the next pass.
//! - Time is the server's clock (tokio's monotonic clock for the period and the quarantine,
//!   the wall clock for the condition's `lastTransitionTime`); the core is not involved.
//!
//! ## Bounds
//! Holds one entry per node name that pods are bound to and that is missing (bounded by the
//! pods in the store); a pass's work is linear in the pods and Nodes in the caches.
//!
//! ## Differs from kube
//! - The period and quarantine are flags (kube compiles them in); the deletions of a pass are
//!   bounded (kube's are not), and made one after another (kube's in parallel goroutines).
//! - A missing node is checked again in the Nodes cache proven fresh, not by a GET.
//! - A pod that matches two rules is deleted once per pass (kube tries twice; the second
//!   gets 404), and one that has finished and is already deleted with a grace period of 0
//!   (held by its finalizers) is left alone (kube deletes it again each pass, a no-op).
//! - kube's status patch is a strategic merge patch with the pod's uid as precondition; this
//!   one is a merge patch of `status.phase` and `status.conditions` with the pod's
//!   `resourceVersion` as precondition (a conflicting change waits for the next pass).
//! - kube's `pod_gc_collector_force_delete_pods_total` metrics are not exported.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::time::Instant;
use watchkeeper_api::ApiError;
use watchkeeper_core::Object;

use crate::config::PodGcConfig;
use crate::source::store::Collect;

/// Its service account's name, as kube-controller-manager's (its writes' user).
const CONTROLLER: &str = "pod-garbage-collector";

/// kube's `v1.TaintNodeOutOfService`.
const OUT_OF_SERVICE_TAINT: &str = "node.kubernetes.io/out-of-service";

/// Why a pod is collected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reason {
    /// Terminated, beyond the threshold.
    Terminated,
    /// Terminating on a NotReady, out-of-service node.
    OutOfService,
    /// Bound to a node that does not exist.
    Orphaned,
    /// Terminating, never scheduled.
    UnscheduledTerminating,
}

/// The pod garbage collector (see the module docs).
#[derive(Debug)]
pub struct PodGc {
    config: PodGcConfig,
}

fn core(def: &watchkeeper_api::ResourceDef, plural: &str) -> bool {
    def.group.is_empty() && def.version == "v1" && def.plural == plural
}

fn text<'a>(body: &'a Value, pointer: &str) -> &'a str {
    body.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// kube's `isPodTerminated`: the phase is none of `Pending`, `Running`, `Unknown`.
fn terminated(pod: &Value) -> bool {
    !matches!(
        text(pod, "/status/phase"),
        "Pending" | "Running" | "Unknown"
    )
}

fn terminating(pod: &Value) -> bool {
    pod.pointer("/metadata/deletionTimestamp").is_some()
}

/// Whether a pass has nothing left to do to `pod`: it has finished and is already being
/// deleted with a grace period of 0 (only its finalizers hold it; kube's controller deletes it
/// again each pass, which changes nothing).
fn settled(pod: &Value) -> bool {
    terminating(pod)
        && pod
            .pointer("/metadata/deletionGracePeriodSeconds")
            .and_then(Value::as_i64)
            .unwrap_or(0)
            == 0
        && matches!(text(pod, "/status/phase"), "Succeeded" | "Failed")
}

/// kube's `nodeutil.IsNodeReady`: its `Ready` condition is `True`.
fn node_ready(node: &Value) -> bool {
    node.pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"))
        .is_some_and(|c| c.get("status").and_then(Value::as_str) == Some("True"))
}

fn out_of_service(node: &Value) -> bool {
    node.pointer("/spec/taints")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|t| t.get("key").and_then(Value::as_str) == Some(OUT_OF_SERVICE_TAINT))
}

/// kube's `byEvictionAndCreationTimestamp`: evicted pods first, then the oldest, then by name
/// (RFC 3339 times in UTC, as the server writes them, order as text).
fn eviction_then_age(pod: &Object) -> (bool, String, String) {
    let body = pod.body();
    let evicted =
        text(body, "/status/phase") == "Failed" && text(body, "/status/reason") == "Evicted";
    (
        !evicted,
        text(body, "/metadata/creationTimestamp").to_owned(),
        pod.name().to_owned(),
    )
}

/// The `status` merge patch that marks `pod` `Failed` (with `condition`, as kube's
/// `UpdatePodCondition` adds or replaces it, keeping its `lastTransitionTime` when its status
/// is unchanged) at `now` (RFC 3339); `None` when it has finished.
fn failed_status(
    body: &Value,
    resource_version: &str,
    condition: Option<Value>,
    now: &str,
) -> Option<Value> {
    if matches!(text(body, "/status/phase"), "Succeeded" | "Failed") {
        return None;
    }
    let mut status = json!({"phase": "Failed"});
    if let Some(mut condition) = condition {
        let mut conditions: Vec<Value> = body
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let kind = condition.get("type").cloned();
        condition["lastTransitionTime"] = json!(now);
        match conditions
            .iter_mut()
            .find(|c| c.get("type") == kind.as_ref())
        {
            Some(old) => {
                if old.get("status") == condition.get("status")
                    && let Some(time) = old.get("lastTransitionTime")
                {
                    condition["lastTransitionTime"] = time.clone();
                }
                *old = condition;
            }
            None => conditions.push(condition),
        }
        status["conditions"] = Value::Array(conditions);
    }
    Some(json!({
        "metadata": {"resourceVersion": resource_version},
        "status": status,
    }))
}

impl PodGc {
    /// A collector with `config` (its period, quarantine and bounds).
    #[must_use]
    pub fn new(config: PodGcConfig) -> Arc<PodGc> {
        Arc::new(PodGc { config })
    }

    /// Runs passes every period until `shutdown` turns true.
    pub async fn run(
        self: Arc<Self>,
        context: super::Context,
        shutdown: tokio::sync::watch::Receiver<bool>,
    ) {
        let passes = async {
            // Missing node names, by when their quarantine ends.
            let mut quarantined: BTreeMap<String, Instant> = BTreeMap::new();
            let mut ticks = tokio::time::interval(self.config.period);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                if let Err(error) = self.pass(&context, &mut quarantined).await {
                    tracing::debug!(%error.message, "pod garbage collection pass failed");
                }
            }
        };
        super::until_shutdown(passes, shutdown).await;
    }

    /// One pass (see the module docs).
    async fn pass(
        &self,
        context: &super::Context,
        quarantined: &mut BTreeMap<String, Instant>,
    ) -> Result<(), ApiError> {
        let served = context.registry.load();
        let find = |plural: &str| {
            served
                .iter()
                .find(|r| core(&r.def, plural) && r.conversion.is_none())
                .cloned()
        };
        let (Some(pods), Some(nodes)) = (find("pods"), find("nodes")) else {
            return Ok(());
        };
        if pods.cache().latest().is_empty() {
            // Nothing to collect: no read of the store's revision on an idle server.
            return Ok(());
        }
        let revision = context.source.current_revision().await?;
        context.fresh.wait(pods.cache(), revision).await?;
        context.fresh.wait(nodes.cache(), revision).await?;
        let all_pods = pods.cache().latest();
        let all_nodes = nodes.cache().latest();
        let now = Instant::now();
        let mut chosen: Vec<(Arc<Object>, Reason)> = Vec::new();
        let mut taken: BTreeSet<Arc<str>> = BTreeSet::new();
        let budget = self.config.deletes_per_pass_max;
        let mut choose = |pod: &Arc<Object>, reason: Reason| -> bool {
            if settled(pod.body()) {
                return true;
            }
            if chosen.len() >= budget {
                return false;
            }
            if taken.insert(pod.key().clone()) {
                chosen.push((pod.clone(), reason));
            }
            true
        };
        if let Some(threshold) = self.config.terminated_threshold {
            let mut done: Vec<&Arc<Object>> = all_pods
                .range(None, None)
                .filter(|pod| terminated(pod.body()))
                .collect();
            if done.len() > threshold {
                let excess = done.len() - threshold;
                done.sort_by_cached_key(|pod| eviction_then_age(pod));
                for pod in done.into_iter().take(excess) {
                    choose(pod, Reason::Terminated);
                }
            }
        }
        let mut stuck: Vec<&Arc<Object>> = all_pods
            .range(None, None)
            .filter(|pod| terminating(pod.body()))
            .filter(|pod| {
                all_nodes
                    .get(text(pod.body(), "/spec/nodeName"))
                    .is_some_and(|node| !node_ready(node.body()) && out_of_service(node.body()))
            })
            .collect();
        stuck.sort_by_cached_key(|pod| eviction_then_age(pod));
        for pod in stuck {
            choose(pod, Reason::OutOfService);
        }
        // Orphans: a node name missing now starts its quarantine (unless it has one); one
        // whose quarantine is over and that is still missing is gone.
        let mut missing: BTreeSet<&str> = BTreeSet::new();
        for pod in all_pods.range(None, None) {
            let node = text(pod.body(), "/spec/nodeName");
            if !node.is_empty() && all_nodes.get(node).is_none() {
                missing.insert(node);
            }
        }
        quarantined.retain(|node, _| missing.contains(node.as_str()));
        for node in &missing {
            quarantined
                .entry((*node).to_owned())
                .or_insert(now + self.config.quarantine);
        }
        let gone: BTreeSet<String> = quarantined
            .iter()
            .filter(|(_, due)| **due <= now)
            .map(|(node, _)| node.clone())
            .collect();
        let mut unfinished: BTreeSet<&str> = BTreeSet::new();
        for pod in all_pods.range(None, None) {
            let node = text(pod.body(), "/spec/nodeName");
            if gone.contains(node) && !choose(pod, Reason::Orphaned) {
                unfinished.insert(node);
            }
        }
        // kube takes a node out of its queue once looked at: its next pods wait a quarantine
        // of their own; a node with pods left over for the bound stays confirmed.
        quarantined.retain(|node, _| !gone.contains(node) || unfinished.contains(node.as_str()));
        for pod in all_pods.range(None, None) {
            if terminating(pod.body()) && text(pod.body(), "/spec/nodeName").is_empty() {
                choose(pod, Reason::UnscheduledTerminating);
            }
        }
        let wall = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
        let mut failed = None;
        for (pod, reason) in chosen {
            let condition = (reason == Reason::Orphaned).then(|| {
                json!({"type": "DisruptionTarget", "status": "True",
                    "reason": "DeletionByPodGC", "message": "PodGC: node no longer exists"})
            });
            if let Err(error) = collect(context, &served, &pods, &pod, condition, &wall).await {
                tracing::debug!(pod = %pod.key(), ?reason, %error.message, "pod garbage collection failed");
                failed.get_or_insert(error);
            }
        }
        failed.map_or(Ok(()), Err)
    }
}

/// Marks `pod` failed (with `condition`) unless it has finished, then deletes it with a
/// grace period of 0; a pod gone or changed meanwhile (404, 409) is no failure.
async fn collect(
    context: &super::Context,
    served: &[Arc<crate::cache::Resource>],
    pods: &crate::cache::Resource,
    pod: &Object,
    condition: Option<Value>,
    now: &str,
) -> Result<(), ApiError> {
    let target = (pod.namespace(), pod.name());
    let (source, fresh) = (&context.source, &context.fresh);
    let benign = |error: &ApiError| error.code == 404 || error.code == 409;
    let version = pod.resource_version().to_string();
    if let Some(patch) = failed_status(pod.body(), &version, condition, now) {
        let patched = source
            .collect(
                fresh,
                served,
                pods,
                CONTROLLER,
                target,
                Collect::PatchStatus(patch),
            )
            .await;
        match patched {
            Err(error) if benign(&error) => return Ok(()),
            other => other?,
        }
    }
    let uid = text(pod.body(), "/metadata/uid");
    let deleted = source
        .collect(
            fresh,
            served,
            pods,
            CONTROLLER,
            target,
            Collect::DeleteNow { uid },
        )
        .await;
    match deleted {
        Err(error) if benign(&error) => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// kube's `UpdatePodCondition`: a condition is added, or replaced keeping its
    /// `lastTransitionTime` when its status is unchanged; a finished pod is not patched.
    #[test]
    fn failed_status_adds_or_replaces_the_condition() {
        let condition = json!({"type": "DisruptionTarget", "status": "True",
            "reason": "DeletionByPodGC", "message": "PodGC: node no longer exists"});
        let running = json!({"status": {"phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}]}});
        let patch = failed_status(&running, "7", Some(condition.clone()), "T1").unwrap();
        assert_eq!(patch["metadata"]["resourceVersion"], "7");
        assert_eq!(patch["status"]["phase"], "Failed");
        let conditions = patch["status"]["conditions"].as_array().unwrap();
        assert_eq!(conditions.len(), 2);
        assert_eq!(conditions[1]["lastTransitionTime"], "T1");
        assert_eq!(conditions[1]["reason"], "DeletionByPodGC");
        let mut marked = running.clone();
        marked["status"]["conditions"] = json!([{"type": "DisruptionTarget", "status": "True",
            "reason": "Other", "lastTransitionTime": "T0"}]);
        let patch = failed_status(&marked, "8", Some(condition.clone()), "T1").unwrap();
        assert_eq!(
            patch["status"]["conditions"],
            json!([{"type": "DisruptionTarget", "status": "True", "reason": "DeletionByPodGC",
                "message": "PodGC: node no longer exists", "lastTransitionTime": "T0"}])
        );
        let plain = failed_status(&running, "9", None, "T1").unwrap();
        assert_eq!(plain["status"], json!({"phase": "Failed"}));
        let done = json!({"status": {"phase": "Succeeded"}});
        assert_eq!(failed_status(&done, "9", Some(condition), "T1"), None);
        let mut held = done.clone();
        held["metadata"] = json!({"deletionTimestamp": "T0", "deletionGracePeriodSeconds": 0});
        assert!(settled(&held));
        held["metadata"]["deletionGracePeriodSeconds"] = json!(30);
        assert!(!settled(&held));
        assert!(!settled(&done));
    }

    #[test]
    fn nodes_ready_and_out_of_service_as_kube_reads_them() {
        let node = |ready: &str, taint: &str| {
            json!({"spec": {"taints": [{"key": taint, "effect": "NoExecute"}]},
                "status": {"conditions": [{"type": "Ready", "status": ready}]}})
        };
        assert!(node_ready(&node("True", "x")));
        assert!(!node_ready(&node("Unknown", "x")));
        assert!(!node_ready(&json!({})));
        assert!(out_of_service(&node("False", OUT_OF_SERVICE_TAINT)));
        assert!(!out_of_service(&node(
            "False",
            "node.kubernetes.io/unreachable"
        )));
        for (phase, done) in [
            ("Pending", false),
            ("Running", false),
            ("Unknown", false),
            ("Succeeded", true),
            ("Failed", true),
            ("", true),
        ] {
            assert_eq!(
                terminated(&json!({"status": {"phase": phase}})),
                done,
                "{phase}"
            );
        }
    }
}

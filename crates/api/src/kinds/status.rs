//! The rules of writes to the `status` subresource, as kube-apiserver's status strategies
//! apply them (`ValidateUpdate` of `deploymentStatusStrategy`, `podStatusStrategy`, ...), in
//! kube's order and words.
//!
//! ## Guarantees
//! - Deployments, ReplicaSets, StatefulSets, DaemonSets, ReplicationControllers and Jobs: a
//!   write of `/status` is checked by these rules only (kube's status strategies do not check
//!   the spec, which such a write keeps): the counts are not negative, a ReplicaSet's,
//!   ReplicationController's, Deployment's and StatefulSet's ready, available, updated, current
//!   and fully labeled replicas are at most `status.replicas` (`cannot be greater than
//!   status.replicas`), available at most ready; a `collisionCount` is not decremented
//!   (`ValidateDeploymentStatus`, `ValidateReplicaSetStatus`, `ValidateStatefulSetStatus`,
//!   `validateDaemonSetStatus`, `ValidateReplicationControllerStatus`, the non-negative counts of
//!   `validateJobStatus`).
//! - Pods (`ValidatePodStatusUpdate`), after the pod's other rules: a condition of a type other
//!   than `PodScheduled`, `Ready` and `Initialized` has a qualified-name type (at kube's own path,
//!   `metadata.conditions[i].Type`); the node name does not change (`status.nodeName:
//!   Forbidden: may not be changed directly`); a changed `nominatedNodeName` is a DNS subdomain;
//!   `qosClass` never changes (a status written without one keeps the stored one: the store's
//!   `admit`, as kube's `PrepareForUpdate`); a container that terminated does not leave that state unless
//!   the pod's restart policy lets it restart (sidecars always, ephemeral containers never).
//!   `phase` and a condition's `status` have no rule, as in kube.
//! - Nodes: [`super::nodes::node_update`] only (kube's `nodeStatusStrategy`), with
//!   [`super::nodes::node`] too where the write changed the spec.
//! - Other kinds: the rules of their other writes ([`super::validate`]).
//!
//! ## Not checked (kube checks them)
//! A Job's condition and completion rules (`JobStatusValidationOptions`), a pod's resource
//! claim statuses and container statuses' users and allocated resources. A pod's status IPs
//! ([`super::pod_spec::status_ips`]) are checked before these rules, so a write failing both
//! is answered with the IPs' causes alone.

use serde_json::Value;

use super::common::{invalid, invalid_printed, items, present, text};
use crate::field::{Cause, forbidden, go_quote};
use crate::names::{validate_dns1123_subdomain, validate_qualified_name};
use crate::resources::ResourceDef;

/// Whether a `/status` write of `def` is checked by this module's rules alone.
pub(super) fn status_only(def: &ResourceDef) -> bool {
    matches!(
        (def.group.as_str(), def.kind.as_str()),
        (
            "apps",
            "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet"
        ) | ("", "ReplicationController" | "Node")
            | ("batch", "Job")
    )
}

/// The causes of a `/status` write turning `old` into `object`.
pub(super) fn validate(def: &ResourceDef, object: &Value, old: &Value, causes: &mut Vec<Cause>) {
    match (def.group.as_str(), def.kind.as_str()) {
        ("apps", "Deployment") => {
            counts(
                object,
                &[
                    "observedGeneration",
                    "replicas",
                    "updatedReplicas",
                    "readyReplicas",
                    "availableReplicas",
                    "unavailableReplicas",
                ],
                causes,
            );
            collision_count(object, causes);
            at_most_replicas(
                object,
                &["updatedReplicas", "readyReplicas", "availableReplicas"],
                causes,
            );
            available_at_most_ready(object, "cannot be greater than readyReplicas", causes);
            collision_decremented(object, old, causes);
        }
        ("apps", "ReplicaSet") | ("", "ReplicationController") => {
            counts(
                object,
                &[
                    "replicas",
                    "fullyLabeledReplicas",
                    "readyReplicas",
                    "availableReplicas",
                    "observedGeneration",
                ],
                causes,
            );
            at_most_replicas(
                object,
                &["fullyLabeledReplicas", "readyReplicas", "availableReplicas"],
                causes,
            );
            available_at_most_ready(object, "cannot be greater than readyReplicas", causes);
        }
        ("apps", "StatefulSet") => {
            counts(
                object,
                &[
                    "replicas",
                    "readyReplicas",
                    "currentReplicas",
                    "updatedReplicas",
                    "availableReplicas",
                    "observedGeneration",
                ],
                causes,
            );
            collision_count(object, causes);
            at_most_replicas(
                object,
                &[
                    "readyReplicas",
                    "currentReplicas",
                    "updatedReplicas",
                    "availableReplicas",
                ],
                causes,
            );
            available_at_most_ready(
                object,
                "cannot be greater than status.readyReplicas",
                causes,
            );
            collision_decremented(object, old, causes);
        }
        ("apps", "DaemonSet") => {
            counts(
                object,
                &[
                    "currentNumberScheduled",
                    "numberMisscheduled",
                    "desiredNumberScheduled",
                    "numberReady",
                    "observedGeneration",
                    "updatedNumberScheduled",
                    "numberAvailable",
                    "numberUnavailable",
                ],
                causes,
            );
            collision_count(object, causes);
            collision_decremented(object, old, causes);
        }
        ("batch", "Job") => counts(
            object,
            &["active", "succeeded", "failed", "ready", "terminating"],
            causes,
        ),
        ("", "Pod") => pod(object, old, causes),
        ("", "Node") => {
            if object.get("spec") != old.get("spec") {
                super::nodes::node(object, causes);
            }
            super::nodes::node_update(object, old, causes);
        }
        _ => {}
    }
}

/// `status.<field>` as Go's zero-valued integer reads it.
fn count(object: &Value, field: &str) -> i64 {
    present(object, &format!("status.{field}"))
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

/// `ValidateNonnegativeField` of each `status.<field>`.
fn counts(object: &Value, fields: &[&str], causes: &mut Vec<Cause>) {
    for field in fields {
        let value = count(object, field);
        if value < 0 {
            causes.push(invalid_printed(
                &format!("status.{field}"),
                &value.to_string(),
                "must be greater than or equal to 0",
            ));
        }
    }
}

fn collision_count(object: &Value, causes: &mut Vec<Cause>) {
    counts_present(object, "collisionCount", causes);
}

fn counts_present(object: &Value, field: &str, causes: &mut Vec<Cause>) {
    if present(object, &format!("status.{field}")).is_some() {
        counts(object, &[field], causes);
    }
}

fn at_most_replicas(object: &Value, fields: &[&str], causes: &mut Vec<Cause>) {
    let replicas = count(object, "replicas");
    for field in fields {
        let value = count(object, field);
        if value > replicas {
            causes.push(invalid_printed(
                &format!("status.{field}"),
                &value.to_string(),
                "cannot be greater than status.replicas",
            ));
        }
    }
}

fn available_at_most_ready(object: &Value, detail: &str, causes: &mut Vec<Cause>) {
    let available = count(object, "availableReplicas");
    if available > count(object, "readyReplicas") {
        causes.push(invalid_printed(
            "status.availableReplicas",
            &available.to_string(),
            detail,
        ));
    }
}

/// `IsDecremented` of `status.collisionCount`.
fn collision_decremented(object: &Value, old: &Value, causes: &mut Vec<Cause>) {
    let Some(before) = present(old, "status.collisionCount").and_then(Value::as_i64) else {
        return;
    };
    let now = present(object, "status.collisionCount").and_then(Value::as_i64);
    if now.is_none_or(|now| now < before) {
        causes.push(invalid_printed(
            "status.collisionCount",
            &now.unwrap_or(0).to_string(),
            "cannot be decremented",
        ));
    }
}

/// `ValidatePodStatusUpdate`'s rules beyond the status IPs.
fn pod(object: &Value, old: &Value, causes: &mut Vec<Cause>) {
    for (i, condition) in items(object, "status.conditions").iter().enumerate() {
        let kind = text(condition, "type");
        if matches!(kind, "PodScheduled" | "Ready" | "Initialized") {
            continue;
        }
        // kube builds the path from the metadata's.
        let at = format!("metadata.conditions[{i}].Type");
        if kind.is_empty() {
            // `IsQualifiedName` says both of an empty name.
            causes.push(invalid(
                &at,
                &Value::from(""),
                "name part must be non-empty",
            ));
            causes.push(invalid(
                &at,
                &Value::from(""),
                crate::names::QUALIFIED_NAME_PART_MESSAGE,
            ));
        } else if let Err(message) = validate_qualified_name(kind) {
            causes.push(invalid_printed(&at, &go_quote(kind), &message));
        }
    }
    if text(object, "spec.nodeName") != text(old, "spec.nodeName") {
        causes.push(forbidden("status.nodeName", "may not be changed directly"));
    }
    let nominated = text(object, "status.nominatedNodeName");
    if nominated != text(old, "status.nominatedNodeName")
        && !nominated.is_empty()
        && let Err(message) = validate_dns1123_subdomain(nominated)
    {
        causes.push(invalid_printed(
            "status.nominatedNodeName",
            &go_quote(nominated),
            &message,
        ));
    }
    let qos = text(object, "status.qosClass");
    if qos != text(old, "status.qosClass") {
        causes.push(invalid_printed(
            "status.qosClass",
            &go_quote(qos),
            "field is immutable",
        ));
    }
    let policy = text(old, "spec.restartPolicy");
    let sidecars: Vec<&str> = items(old, "spec.initContainers")
        .iter()
        .filter(|c| text(c, "restartPolicy") == "Always")
        .map(|c| text(c, "name"))
        .collect();
    for (key, policy, restartable) in [
        ("containerStatuses", policy, &[][..]),
        ("initContainerStatuses", policy, &sidecars[..]),
        ("ephemeralContainerStatuses", "Never", &[][..]),
    ] {
        transitions(object, old, key, policy, restartable, causes);
    }
}

/// `ValidateContainerStateTransition` (and its init containers' variant, which lets the
/// `restartable` sidecars restart) of `status.<key>`.
fn transitions(
    object: &Value,
    old: &Value,
    key: &str,
    policy: &str,
    restartable: &[&str],
    causes: &mut Vec<Cause>,
) {
    if policy == "Always" {
        return;
    }
    let statuses = items(object, &format!("status.{key}"));
    for (i, before) in items(old, &format!("status.{key}")).iter().enumerate() {
        let Some(terminated) = present(before, "state.terminated") else {
            continue;
        };
        let code = terminated
            .get("exitCode")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let name = text(before, "name");
        if (code != 0 && policy == "OnFailure") || restartable.contains(&name) {
            continue;
        }
        for now in statuses {
            if text(now, "name") == name && present(now, "state.terminated").is_none() {
                causes.push(forbidden(
                    &format!("status.{key}[{i}].state"),
                    "may not be transitioned to non-terminated state",
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    fn message(group: &str, plural: &str, object: Value, old: &Value) -> Option<String> {
        let def = crate::resources::builtin_resources()
            .into_iter()
            .find(|d| d.group == group && d.plural == plural)
            .unwrap();
        crate::kinds::validate_status(&def, &object, old)
            .err()
            .map(|e| e.message)
    }

    fn with_status(status: Value) -> Value {
        json!({"metadata": {"name": "w"}, "spec": {}, "status": status})
    }

    #[test]
    fn workload_counts() {
        let old = with_status(json!({"replicas": 1, "collisionCount": 2}));
        assert_eq!(
            message(
                "apps",
                "deployments",
                with_status(json!({"replicas": 3, "readyReplicas": 2, "collisionCount": 2})),
                &old
            ),
            None
        );
        assert_eq!(
            message(
                "apps",
                "deployments",
                with_status(json!({"replicas": -5, "readyReplicas": 10})),
                &old
            )
            .unwrap(),
            "Deployment.apps \"w\" is invalid: [status.replicas: Invalid value: -5: must be greater than or equal to 0, status.updatedReplicas: Invalid value: 0: cannot be greater than status.replicas, status.readyReplicas: Invalid value: 10: cannot be greater than status.replicas, status.availableReplicas: Invalid value: 0: cannot be greater than status.replicas, status.collisionCount: Invalid value: 0: cannot be decremented]"
        );
        assert_eq!(
            message("apps", "statefulsets", with_status(json!({"replicas": 1, "readyReplicas": 1, "availableReplicas": 2, "collisionCount": 1})), &old).unwrap(),
            "StatefulSet.apps \"w\" is invalid: [status.availableReplicas: Invalid value: 2: cannot be greater than status.replicas, status.availableReplicas: Invalid value: 2: cannot be greater than status.readyReplicas, status.collisionCount: Invalid value: 1: cannot be decremented]"
        );
        assert_eq!(
            message(
                "apps",
                "replicasets",
                with_status(
                    json!({"replicas": 1, "fullyLabeledReplicas": 2, "observedGeneration": -1})
                ),
                &old
            )
            .unwrap(),
            "ReplicaSet.apps \"w\" is invalid: [status.observedGeneration: Invalid value: -1: must be greater than or equal to 0, status.fullyLabeledReplicas: Invalid value: 2: cannot be greater than status.replicas]"
        );
        assert_eq!(
            message(
                "",
                "replicationcontrollers",
                with_status(json!({"replicas": 1, "availableReplicas": 1})),
                &old
            )
            .unwrap(),
            "ReplicationController \"w\" is invalid: status.availableReplicas: Invalid value: 1: cannot be greater than readyReplicas"
        );
        assert_eq!(
            message(
                "apps",
                "daemonsets",
                with_status(json!({"numberReady": -1, "collisionCount": -1})),
                &with_status(json!({}))
            )
            .unwrap(),
            "DaemonSet.apps \"w\" is invalid: [status.numberReady: Invalid value: -1: must be greater than or equal to 0, status.collisionCount: Invalid value: -1: must be greater than or equal to 0]"
        );
        assert_eq!(
            message(
                "batch",
                "jobs",
                with_status(json!({"active": -1, "ready": -2})),
                &with_status(json!({}))
            )
            .unwrap(),
            "Job.batch \"w\" is invalid: [status.active: Invalid value: -1: must be greater than or equal to 0, status.ready: Invalid value: -2: must be greater than or equal to 0]"
        );
    }

    #[test]
    fn pod_status_updates() {
        let pod = |status: Value| {
            json!({"metadata": {"name": "p"}, "spec": {"restartPolicy": "Never",
                "containers": [{"name": "c", "image": "nginx"}]}, "status": status})
        };
        let old = pod(json!({"phase": "Running", "qosClass": "BestEffort",
            "containerStatuses": [{"name": "c", "state": {"terminated": {"exitCode": 0}}}]}));
        let ok = pod(json!({"phase": "Bogus", "qosClass": "BestEffort",
            "conditions": [{"type": "Ready", "status": "Maybe"}, {"type": "example.com/ok", "status": "True"}],
            "containerStatuses": [{"name": "c", "state": {"terminated": {"exitCode": 0}}}]}));
        assert_eq!(message("", "pods", ok, &old), None);
        let bad = pod(
            json!({"phase": "Bogus", "qosClass": "Burstable", "nominatedNodeName": "No_de",
            "conditions": [{"type": "", "status": "Maybe"}],
            "containerStatuses": [{"name": "c", "state": {"running": {}}}]}),
        );
        assert_eq!(
            message("", "pods", bad, &old).unwrap(),
            "Pod \"p\" is invalid: [metadata.conditions[0].Type: Invalid value: \"\": name part must be non-empty, metadata.conditions[0].Type: Invalid value: \"\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]'), status.nominatedNodeName: Invalid value: \"No_de\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*'), status.qosClass: Invalid value: \"Burstable\": field is immutable, status.containerStatuses[0].state: Forbidden: may not be transitioned to non-terminated state]"
        );
    }
}

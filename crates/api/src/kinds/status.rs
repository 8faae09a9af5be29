//! The rules of writes to the `status` subresource, as kube-apiserver's status strategies
//! apply them (`ValidateUpdate` of `deploymentStatusStrategy`, `podStatusStrategy`, ...), in
//! kube's order and words.
//!
//! ## Guarantees
//! - Deployments, ReplicaSets, StatefulSets, DaemonSets and ReplicationControllers (and Jobs,
//!   below): a write of `/status` is checked by these rules only (kube's status strategies do
//!   not check the spec, which such a write keeps): the counts are not negative, a ReplicaSet's,
//!   ReplicationController's, Deployment's and StatefulSet's ready, available, updated, current
//!   and fully labeled replicas are at most `status.replicas` (`cannot be greater than
//!   status.replicas`), available at most ready; a `collisionCount` is not decremented
//!   (`ValidateDeploymentStatus`, `ValidateReplicaSetStatus`, `ValidateStatefulSetStatus`,
//!   `validateDaemonSetStatus`, `ValidateReplicationControllerStatus`).
//! - Jobs (kube 1.33's `ValidateJobUpdateStatus` with the options of its status strategy,
//!   `JobManagedBy` on): the counters are not negative; `uncountedTerminatedPods` UIDs are not
//!   empty nor repeated; then, each only when a field it reads changed (so a stored status that
//!   breaks it does not block other writes): not both `Complete` and `Failed` (or
//!   `FailureTarget`) True; `completionTime` set exactly when `Complete` is True, and not
//!   before `startTime`; a finished Job (`Complete` or `Failed` True) has no active or
//!   terminating pods, no uncounted ones and a `startTime` (unless suspended with
//!   `completions` 0); `completedIndexes` and `failedIndexes` parse as kube's
//!   `validateIndexesFormat` (intervals `x` or `x-y` below `completions`, increasing, with its
//!   error texts) and do not overlap (`failedIndexes and completedIndexes overlap at index:
//!   3`), `completedIndexes` only in an Indexed Job, `failedIndexes` only with
//!   `backoffLimitPerIndex`; `ready` at most `active`. Always: `SuccessCriteriaMet` not with
//!   `Failed` or `FailureTarget`, a Job with a `successPolicy` `Complete` only after
//!   `SuccessCriteriaMet`; the terminal conditions (`Failed`, `Complete`, `FailureTarget`) and
//!   `SuccessCriteriaMet` are not turned off, `SuccessCriteriaMet` not turned on after
//!   `Complete`; `failed` does not decrease, nor `succeeded` (but in an Indexed Job whose
//!   `completions` equal its `parallelism`); a set `completionTime` does not change; a
//!   `startTime` is not changed or removed while the Job is not suspended. Values print as
//!   kube's (`status.completionTime: Invalid value: 2026-01-01 00:00:00 +0000 UTC: ...`, times
//!   in UTC, kube-apiserver's zone in its images; conditions' rules without a value).
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
//! ## Differs from kube
//! A Job's `startTime` rule is kube 1.33.0's (`RejectStartTimeUpdateForUnsuspendedJob`: any
//! change of a set `startTime` while not suspended); kubernetes#134769, cherry-picked to later
//! 1.33 patch releases, lets a Job resumed after a suspension get a new one. The
//! suspended-with-zero-completions exception (kubernetes#132614, also a 1.33 patch) is
//! followed.
//!
//! ## Not checked (kube checks them)
//! A pod's resource claim statuses and container statuses' users and allocated resources. A
//! pod's status IPs
//! ([`super::pod_spec::status_ips`]) are checked before these rules, so a write failing both
//! is answered with the IPs' causes alone.

use serde_json::Value;

use super::common::{invalid, invalid_printed, items, present, text};
use crate::field::{Cause, duplicate, forbidden, go_quote, invalid_omitted, required};
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
        ("batch", "Job") => job(object, old, causes),
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

/// Whether the Job `object` has a condition of `kind` whose status is `True`
/// (`IsConditionTrue`).
fn condition(object: &Value, kind: &str) -> bool {
    items(object, "status.conditions")
        .iter()
        .any(|c| text(c, "type") == kind && text(c, "status") == "True")
}

/// A Job's terminal and success conditions (`IsJobComplete`, `IsJobFailed`,
/// `isJobFailureTarget`, `isJobSuccessCriteriaMet`).
#[derive(Clone, Copy, PartialEq)]
struct JobConditions {
    complete: bool,
    failed: bool,
    failure_target: bool,
    success_criteria_met: bool,
}

impl JobConditions {
    fn of(object: &Value) -> JobConditions {
        JobConditions {
            complete: condition(object, "Complete"),
            failed: condition(object, "Failed"),
            failure_target: condition(object, "FailureTarget"),
            success_criteria_met: condition(object, "SuccessCriteriaMet"),
        }
    }

    /// `IsJobFinished`.
    fn finished(self) -> bool {
        self.complete || self.failed
    }
}

/// A `metav1.Time` field of `status` as Unix seconds (its text when it does not parse).
fn status_time(object: &Value, field: &str) -> Option<Result<i64, String>> {
    let text = present(object, &format!("status.{field}"))?;
    let text = text.as_str().unwrap_or_default();
    Some(crate::time::unix_from_rfc3339(text).ok_or_else(|| text.to_owned()))
}

/// A `metav1.Time` as `field.Invalid` prints it (its `String()`, in the server's zone, UTC).
fn go_time(time: &Result<i64, String>) -> String {
    match time {
        Ok(seconds) => chrono::DateTime::from_timestamp(*seconds, 0).map_or_else(
            || seconds.to_string(),
            |t| t.format("%Y-%m-%d %H:%M:%S +0000 UTC").to_string(),
        ),
        Err(text) => go_quote(text),
    }
}

/// `status.<field>` of a Job as a pointer field reads it: absent or `null` is nil.
fn status_pointer<'a>(object: &'a Value, field: &str) -> Option<&'a Value> {
    present(object, &format!("status.{field}"))
}

/// kube 1.33's `ValidateJobUpdateStatus` with the options its status strategy gives
/// (`getStatusValidationOptions`, `JobManagedBy` on): most rules hold only when a field
/// they read changed, so a stored status that breaks one does not block other writes.
fn job(object: &Value, old: &Value, causes: &mut Vec<Cause>) {
    let at = |field: &str| format!("status.{field}");
    // `validateJobStatus`'s unconditional rules.
    counts(object, &["active", "succeeded", "failed"], causes);
    counts_present(object, "ready", causes);
    counts_present(object, "terminating", causes);
    uncounted_terminated_pods(object, causes);

    let (now, before) = (JobConditions::of(object), JobConditions::of(old));
    let indexed = text(object, "spec.completionMode") == "Indexed";
    let spec = |field: &str| present(object, &format!("spec.{field}"));
    let completions = spec("completions").and_then(Value::as_i64);
    let changed = |field: &str| status_pointer(object, field) != status_pointer(old, field);
    let finished_changed = now.finished() != before.finished();
    let complete_changed = now.complete != before.complete;
    let completed_indexes = text(object, "status.completedIndexes");
    let completed_changed = completed_indexes != text(old, "status.completedIndexes");
    let failed_indexes = status_pointer(object, "failedIndexes");
    let failed_changed = changed("failedIndexes");
    let active = count(object, "active");
    let active_changed = active != count(old, "active");
    let (start, completion) = (
        status_time(object, "startTime"),
        status_time(object, "completionTime"),
    );
    let start_changed = start != status_time(old, "startTime");
    let completion_changed = completion != status_time(old, "completionTime");
    let uncounted_changed = !super::common::semantic_eq(
        status_pointer(object, "uncountedTerminatedPods"),
        status_pointer(old, "uncountedTerminatedPods"),
    ) || status_pointer(object, "uncountedTerminatedPods").is_some()
        != status_pointer(old, "uncountedTerminatedPods").is_some();
    let suspended = spec("suspend").and_then(Value::as_bool) == Some(true);
    let suspended_with_zero_completions = suspended && completions == Some(0);

    if (complete_changed || now.failed != before.failed) && now.complete && now.failed {
        causes.push(invalid_omitted(
            &at("conditions"),
            "cannot set Complete=True and Failed=true conditions",
        ));
    }
    if (complete_changed || now.failure_target != before.failure_target)
        && now.complete
        && now.failure_target
    {
        causes.push(invalid_omitted(
            &at("conditions"),
            "cannot set Complete=True and FailureTarget=true conditions",
        ));
    }
    if complete_changed || completion_changed {
        match &completion {
            Some(time) if !now.complete => causes.push(invalid_printed(
                &at("completionTime"),
                &go_time(time),
                "cannot set completionTime when there is no Complete=True condition",
            )),
            None if now.complete => causes.push(required(
                &at("completionTime"),
                "completionTime is required for Complete jobs",
            )),
            _ => {}
        }
    }
    if (start_changed || completion_changed)
        && let (Some(Ok(started)), Some(Ok(completed))) = (&start, &completion)
        && completed < started
    {
        causes.push(invalid_printed(
            &at("completionTime"),
            &go_time(&Ok(*completed)),
            "completionTime cannot be set before startTime",
        ));
    }
    if (finished_changed || active_changed) && active > 0 && now.finished() {
        causes.push(invalid_printed(
            &at("active"),
            &active.to_string(),
            "active>0 is invalid for finished job",
        ));
    }
    if (finished_changed || start_changed)
        && !suspended_with_zero_completions
        && start.is_none()
        && now.finished()
    {
        causes.push(required(
            &at("startTime"),
            "startTime is required for finished job",
        ));
    }
    if (finished_changed || uncounted_changed)
        && now.finished()
        && let Some(uncounted) = status_pointer(object, "uncountedTerminatedPods")
        && ["succeeded", "failed"]
            .iter()
            .any(|list| !items(uncounted, list).is_empty())
    {
        causes.push(invalid_printed(
            &at("uncountedTerminatedPods"),
            &go_uncounted(uncounted),
            "uncountedTerminatedPods needs to be empty for finished job",
        ));
    }
    if completed_changed
        && let Some(completions) = completions
        && let Err(error) = indexes_format(completed_indexes, completions)
    {
        causes.push(invalid_printed(
            &at("completedIndexes"),
            &go_quote(completed_indexes),
            &format!("error parsing completedIndexes: {error}"),
        ));
    }
    let backoff_per_index = spec("backoffLimitPerIndex").is_some();
    let failed_text = failed_indexes.and_then(Value::as_str);
    if failed_changed
        && backoff_per_index
        && let (Some(completions), Some(failed)) = (completions, failed_text)
        && let Err(error) = indexes_format(failed, completions)
    {
        causes.push(invalid_printed(
            &at("failedIndexes"),
            &go_quote(failed),
            &format!("error parsing failedIndexes: {error}"),
        ));
    }
    if completed_changed && !completed_indexes.is_empty() && !indexed {
        causes.push(invalid_printed(
            &at("completedIndexes"),
            &go_quote(completed_indexes),
            "cannot set non-empty completedIndexes when non-indexed completion mode",
        ));
    }
    if failed_changed
        && !backoff_per_index
        && let Some(failed) = failed_indexes
    {
        causes.push(invalid_printed(
            &at("failedIndexes"),
            &go_quote(failed.as_str().unwrap_or_default()),
            "cannot set non-null failedIndexes when backoffLimitPerIndex is null",
        ));
    }
    if (failed_changed || completed_changed)
        && let (Some(completions), Some(failed)) = (completions, failed_text)
        && let Err(error) = indexes_not_overlapping(completed_indexes, failed, completions)
    {
        causes.push(invalid_printed(
            &at("failedIndexes"),
            &go_quote(failed),
            &error,
        ));
    }
    let terminating = status_pointer(object, "terminating").and_then(Value::as_i64);
    if (finished_changed || changed("terminating"))
        && terminating.is_some_and(|n| n > 0)
        && now.finished()
    {
        causes.push(invalid_printed(
            &at("terminating"),
            &terminating.unwrap_or_default().to_string(),
            "terminating>0 is invalid for finished job",
        ));
    }
    let ready = status_pointer(object, "ready").and_then(Value::as_i64);
    if (changed("ready") || active_changed) && ready.is_some_and(|n| n > active) {
        causes.push(invalid_printed(
            &at("ready"),
            &ready.unwrap_or_default().to_string(),
            "cannot set more ready pods than active",
        ));
    }
    // `AllowForSuccessCriteriaMetInExtendedScope` is on: these two hold in any case.
    if now.success_criteria_met && now.failed {
        causes.push(invalid_omitted(
            &at("conditions"),
            "cannot set SuccessCriteriaMet=True and Failed=true conditions",
        ));
    }
    if now.success_criteria_met && now.failure_target {
        causes.push(invalid_omitted(
            &at("conditions"),
            "cannot set SuccessCriteriaMet=True and FailureTarget=true conditions",
        ));
    }
    if spec("successPolicy").is_some() && !now.success_criteria_met && now.complete {
        causes.push(invalid_omitted(
            &at("conditions"),
            "cannot set Complete=True for Job with SuccessPolicy unless SuccessCriteriaMet=True",
        ));
    }

    // `ValidateJobStatusUpdate`'s transitions.
    for (kind, was, is) in [
        ("Failed", before.failed, now.failed),
        ("Complete", before.complete, now.complete),
        ("FailureTarget", before.failure_target, now.failure_target),
    ] {
        if was && !is {
            causes.push(invalid_omitted(
                &at("conditions"),
                &format!("cannot disable the terminal {kind}=True condition"),
            ));
        }
    }
    let failed = count(object, "failed");
    if failed < count(old, "failed") {
        causes.push(invalid_printed(
            &at("failed"),
            &failed.to_string(),
            "cannot decrease the failed counter",
        ));
    }
    // An Indexed Job whose completions equal its parallelism may be scaled down.
    let scalable = indexed && spec("parallelism") == spec("completions");
    let succeeded = count(object, "succeeded");
    if !scalable && succeeded < count(old, "succeeded") {
        causes.push(invalid_printed(
            &at("succeeded"),
            &succeeded.to_string(),
            "cannot decrease the succeeded counter",
        ));
    }
    if let (Some(now_time), Some(before_time)) = (&completion, &status_time(old, "completionTime"))
        && now_time != before_time
    {
        causes.push(invalid_printed(
            &at("completionTime"),
            &go_time(now_time),
            "completionTime cannot be mutated",
        ));
    }
    if start_changed && status_time(old, "startTime").is_some() && !suspended {
        causes.push(required(
            &at("startTime"),
            "startTime cannot be removed for unsuspended job",
        ));
    }
    if before.success_criteria_met && !now.success_criteria_met {
        causes.push(invalid_omitted(
            &at("conditions"),
            "cannot disable the SuccessCriteriaMet=True condition",
        ));
    }
    if before.complete && !before.success_criteria_met && now.success_criteria_met {
        causes.push(invalid_omitted(
            &at("conditions"),
            "cannot set SuccessCriteriaMet=True for Job already has Complete=true conditions",
        ));
    }
}

/// `status.uncountedTerminatedPods`' UIDs: none empty, none twice (across both lists).
fn uncounted_terminated_pods(object: &Value, causes: &mut Vec<Cause>) {
    let mut seen: Vec<&str> = Vec::new();
    for list in ["succeeded", "failed"] {
        let path = format!("status.uncountedTerminatedPods.{list}");
        for (i, uid) in items(object, &path).iter().enumerate() {
            let uid = uid.as_str().unwrap_or_default();
            let at = format!("{path}[{i}]");
            if uid.is_empty() {
                causes.push(invalid_printed(&at, "\"\"", "must not be empty"));
            } else if seen.contains(&uid) {
                causes.push(duplicate(&at, &go_quote(uid)));
            } else {
                seen.push(uid);
            }
        }
    }
}

/// `batch.UncountedTerminatedPods` as Go's `%#v` prints it.
fn go_uncounted(uncounted: &Value) -> String {
    let list = |key: &str| match uncounted.get(key).and_then(Value::as_array) {
        None => "[]types.UID(nil)".to_owned(),
        Some(uids) => {
            let quoted: Vec<String> = uids
                .iter()
                .map(|u| go_quote(u.as_str().unwrap_or_default()))
                .collect();
            format!("[]types.UID{{{}}}", quoted.join(", "))
        }
    };
    format!(
        "batch.UncountedTerminatedPods{{Succeeded:{}, Failed:{}}}",
        list("succeeded"),
        list("failed")
    )
}

/// Go's `strconv.Atoi` of an index (its sign allowed, 64 bits).
fn atoi(text: &str) -> Option<i64> {
    let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// `parseIndexInterval`: `x` or `x-y` (`x < y`), each below `completions`.
fn index_interval(interval: &str, completions: i64) -> Result<(i64, i64), String> {
    let limits: Vec<&str> = interval.split('-').collect();
    if limits.len() > 2 {
        return Err(format!(
            "the fragment {} violates the requirement that an index interval can have at most two parts separated by '-'",
            go_quote(interval)
        ));
    }
    let parse = |limit: &str| {
        let n = atoi(limit).ok_or_else(|| {
            format!(
                "cannot convert string to integer for index: {}",
                go_quote(limit)
            )
        })?;
        if n >= completions {
            return Err(format!("too large index: {}", go_quote(limit)));
        }
        Ok(n)
    };
    let x = parse(limits[0])?;
    let Some(high) = limits.get(1) else {
        return Ok((x, x));
    };
    let y = parse(high)?;
    if x >= y {
        return Err(format!("non-increasing order, previous: {x}, current: {y}"));
    }
    Ok((x, y))
}

/// `validateIndexesFormat`: comma-separated intervals in increasing order; the number of
/// indexes they hold.
pub(super) fn indexes_format(indexes: &str, completions: i64) -> Result<i64, String> {
    if indexes.is_empty() {
        return Ok(0);
    }
    let mut last: Option<i64> = None;
    let mut total = 0;
    for interval in indexes.split(',') {
        let (x, y) = index_interval(interval, completions)?;
        if let Some(last) = last.filter(|last| *last >= x) {
            return Err(format!(
                "non-increasing order, previous: {last}, current: {x}"
            ));
        }
        total += y - x + 1;
        last = Some(y);
    }
    Ok(total)
}

/// `validateFailedIndexesNotOverlapCompleted`: the first index both lists hold, walking
/// them as kube does (intervals that do not parse are skipped: the format rules report them).
fn indexes_not_overlapping(completed: &str, failed: &str, completions: i64) -> Result<(), String> {
    if completed.is_empty() || failed.is_empty() {
        return Ok(());
    }
    let completed: Vec<&str> = completed.split(',').collect();
    let failed: Vec<&str> = failed.split(',').collect();
    let (mut c, mut f) = (0, 0);
    let mut c_interval = index_interval(completed[0], completions);
    let mut f_interval = index_interval(failed[0], completions);
    while c < completed.len() && f < failed.len() {
        match (c_interval.clone(), f_interval.clone()) {
            (Err(_), _) => {
                c += 1;
                if c < completed.len() {
                    c_interval = index_interval(completed[c], completions);
                }
            }
            (_, Err(_)) => {
                f += 1;
                if f < failed.len() {
                    f_interval = index_interval(failed[f], completions);
                }
            }
            (Ok((cx, cy)), Ok((fx, fy))) => {
                if cx <= fy && fx <= cy {
                    return Err(format!(
                        "failedIndexes and completedIndexes overlap at index: {}",
                        cx.max(fx)
                    ));
                }
                if cx <= fx {
                    c += 1;
                    if c < completed.len() {
                        c_interval = index_interval(completed[c], completions);
                    }
                } else {
                    f += 1;
                    if f < failed.len() {
                        f_interval = index_interval(failed[f], completions);
                    }
                }
            }
        }
    }
    Ok(())
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

    fn job(spec: Value, status: Value) -> Value {
        json!({"metadata": {"name": "j"}, "spec": spec, "status": status})
    }

    fn job_causes(spec: &Value, status: Value, old_status: Value) -> Vec<String> {
        let def = crate::resources::builtin_resources()
            .into_iter()
            .find(|d| d.group == "batch" && d.plural == "jobs")
            .unwrap();
        let (object, old) = (job(spec.clone(), status), job(spec.clone(), old_status));
        crate::kinds::validate_status(&def, &object, &old)
            .err()
            .map_or_else(Vec::new, |e| e.cause_lines())
    }

    #[test]
    fn job_status_conditions_and_counters() {
        let spec = json!({"completions": 1, "parallelism": 1});
        let complete = json!([{"type": "Complete", "status": "True"}]);
        assert_eq!(
            job_causes(
                &spec,
                json!({"conditions": complete, "active": 1, "completionTime": "2026-01-01T00:00:00Z"}),
                json!({})
            ),
            [
                "status.active: Invalid value: 1: active>0 is invalid for finished job",
                "status.startTime: Required value: startTime is required for finished job",
            ]
        );
        // A stored status that breaks these rules does not block a write that keeps it.
        let finished = json!({"conditions": complete, "active": 1});
        assert_eq!(
            job_causes(&spec, finished.clone(), finished),
            Vec::<String>::new()
        );
        assert_eq!(
            job_causes(
                &spec,
                json!({"conditions": [{"type": "Complete", "status": "True"}, {"type": "Failed", "status": "True"}],
                    "startTime": "2026-01-01T00:10:00Z", "completionTime": "2026-01-01T00:00:00Z",
                    "failed": 1, "ready": 2}),
                json!({"conditions": [{"type": "FailureTarget", "status": "True"}], "failed": 2,
                    "completionTime": "2026-01-01T00:05:00Z"})
            ),
            [
                "status.conditions: Invalid value: cannot set Complete=True and Failed=true conditions",
                "status.completionTime: Invalid value: 2026-01-01 00:00:00 +0000 UTC: completionTime cannot be set before startTime",
                "status.ready: Invalid value: 2: cannot set more ready pods than active",
                "status.conditions: Invalid value: cannot disable the terminal FailureTarget=True condition",
                "status.failed: Invalid value: 1: cannot decrease the failed counter",
                "status.completionTime: Invalid value: 2026-01-01 00:00:00 +0000 UTC: completionTime cannot be mutated",
            ]
        );
        assert_eq!(
            job_causes(
                &spec,
                json!({"completionTime": "2026-01-01T00:00:00Z", "succeeded": 0,
                    "uncountedTerminatedPods": {"succeeded": ["a", ""], "failed": ["a"]}}),
                json!({"succeeded": 1, "startTime": "2026-01-01T00:00:00Z"})
            ),
            [
                "status.uncountedTerminatedPods.succeeded[1]: Invalid value: \"\": must not be empty",
                "status.uncountedTerminatedPods.failed[0]: Duplicate value: \"a\"",
                "status.completionTime: Invalid value: 2026-01-01 00:00:00 +0000 UTC: cannot set completionTime when there is no Complete=True condition",
                "status.succeeded: Invalid value: 0: cannot decrease the succeeded counter",
                "status.startTime: Required value: startTime cannot be removed for unsuspended job",
            ]
        );
    }

    #[test]
    fn job_status_indexes() {
        let indexed = json!({"completionMode": "Indexed", "completions": 5, "parallelism": 5,
            "backoffLimitPerIndex": 1});
        assert_eq!(
            job_causes(
                &indexed,
                json!({"completedIndexes": "0-2,4", "failedIndexes": "3"}),
                json!({})
            ),
            Vec::<String>::new()
        );
        assert_eq!(
            job_causes(
                &indexed,
                json!({"completedIndexes": "0,7", "failedIndexes": "0"}),
                json!({})
            ),
            [
                "status.completedIndexes: Invalid value: \"0,7\": error parsing completedIndexes: too large index: \"7\"",
                "status.failedIndexes: Invalid value: \"0\": failedIndexes and completedIndexes overlap at index: 0",
            ]
        );
        assert_eq!(
            job_causes(
                &indexed,
                json!({"completedIndexes": "2-1", "failedIndexes": "1-2-3"}),
                json!({})
            ),
            [
                "status.completedIndexes: Invalid value: \"2-1\": error parsing completedIndexes: non-increasing order, previous: 2, current: 1",
                "status.failedIndexes: Invalid value: \"1-2-3\": error parsing failedIndexes: the fragment \"1-2-3\" violates the requirement that an index interval can have at most two parts separated by '-'",
            ]
        );
        let plain = json!({"completions": 2, "parallelism": 1});
        assert_eq!(
            job_causes(
                &plain,
                json!({"completedIndexes": "x", "failedIndexes": ""}),
                json!({})
            ),
            [
                "status.completedIndexes: Invalid value: \"x\": error parsing completedIndexes: cannot convert string to integer for index: \"x\"",
                "status.completedIndexes: Invalid value: \"x\": cannot set non-empty completedIndexes when non-indexed completion mode",
                "status.failedIndexes: Invalid value: \"\": cannot set non-null failedIndexes when backoffLimitPerIndex is null",
            ]
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

//! Graceful deletion of pods, as kube-apiserver decides it (`rest.BeforeDelete` in
//! `k8s.io/apiserver/pkg/registry/rest/delete.go`, with the pod strategy's
//! `CheckGracefulDelete` in `pkg/registry/core/pod/strategy.go`).
//!
//! ## Guarantees
//! - A pod that is scheduled (`spec.nodeName` set) and not finished (phase neither `Succeeded`
//!   nor `Failed`) is not removed by a DELETE: it is marked, its `deletionTimestamp` the
//!   deletion's time plus its grace period and `deletionGracePeriodSeconds` that period (the
//!   DeleteOptions' `gracePeriodSeconds`, else the pod's `terminationGracePeriodSeconds`, else
//!   0; a negative one counts as 1), its `generation` moved on when it has one. Its kubelet would
//!   then stop it and remove it with a grace period of 0; watchkeeper runs no kubelet, so such a
//!   pod stays `Terminating` until a client deletes it with a shorter period of 0 (`kubectl
//!   delete --force --grace-period=0`), as with kube-apiserver and no node running.
//! - Any other pod, and a grace period of 0, deletes at once ([`Graceful::Now`]; the ordinary
//!   finalizer rules still apply).
//! - A pod already marked: a shorter period moves its `deletionTimestamp` earlier by the
//!   difference (a period of 0 deletes it, or, while finalizers hold it, makes its period 0
//!   and its `deletionTimestamp` the deletion's start: [`forced`]); no period, or one not shorter, leaves it as it is
//!   ([`Graceful::Pending`], the answer is the pod). A pod marked with a period of 0 or none
//!   (by a finalizer) deletes at once, as kube's recovery of a half-done deletion does.
//! - Pure: the time is a parameter (seconds since the Unix epoch); nothing here panics.

use serde_json::{Value, json};

use crate::time::{rfc3339_from_unix, unix_from_rfc3339};

/// What a DELETE does to a pod.
#[derive(Clone, Debug, PartialEq)]
pub enum Graceful {
    /// Deleted now (or by the finalizer rules: marked with a grace period of 0).
    Now,
    /// Already being deleted with a period no longer than the one asked: the pod unchanged.
    Pending,
    /// The pod as marked for deletion.
    Mark(Value),
}

/// kube's graceful deletion of `pod` for a DELETE with `options` (a `DeleteOptions`, or
/// null) at `now_unix_seconds`.
#[must_use]
pub fn pod_deletion(pod: &Value, options: &Value, now_unix_seconds: i64) -> Graceful {
    let asked = options.get("gracePeriodSeconds").and_then(Value::as_i64);
    let metadata = pod.get("metadata");
    let marked_at = metadata
        .and_then(|m| m.get("deletionTimestamp"))
        .and_then(Value::as_str);
    if let Some(marked_at) = marked_at {
        let current = metadata
            .and_then(|m| m.get("deletionGracePeriodSeconds"))
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if current == 0 {
            return Graceful::Now;
        }
        let Some(period) = asked.filter(|period| *period < current) else {
            return Graceful::Pending;
        };
        if period <= 0 {
            return Graceful::Now;
        }
        let at = unix_from_rfc3339(marked_at).unwrap_or(now_unix_seconds) - current + period;
        return Graceful::Mark(marked(pod, at, period, false));
    }
    let spec = pod.get("spec");
    let scheduled = spec
        .and_then(|s| s.get("nodeName"))
        .and_then(Value::as_str)
        .is_some_and(|node| !node.is_empty());
    let phase = pod
        .pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("");
    let finished = matches!(phase, "Succeeded" | "Failed");
    let mut period = asked
        .or_else(|| {
            spec.and_then(|s| s.get("terminationGracePeriodSeconds"))
                .and_then(Value::as_i64)
        })
        .unwrap_or(0);
    if !scheduled || finished {
        period = 0;
    }
    if period < 0 {
        period = 1;
    }
    if period == 0 {
        return Graceful::Now;
    }
    Graceful::Mark(marked(
        pod,
        now_unix_seconds.saturating_add(period),
        period,
        true,
    ))
}

/// A pod marked for a grace period (`deletionGracePeriodSeconds` above 0) that a DELETE with a
/// period of 0 finds held by finalizers ([`Graceful::Now`] on a marked pod): as kube's
/// `BeforeDelete` shortens it, its `deletionTimestamp` moved earlier by its period and
/// `deletionGracePeriodSeconds` 0, so it goes with its last finalizer. `None` for any other pod.
#[must_use]
pub fn forced(pod: &Value) -> Option<Value> {
    let metadata = pod.get("metadata")?;
    let period = metadata
        .get("deletionGracePeriodSeconds")
        .and_then(Value::as_i64)
        .filter(|period| *period > 0)?;
    let at = unix_from_rfc3339(metadata.get("deletionTimestamp")?.as_str()?)?;
    Some(marked(pod, at.saturating_sub(period), 0, false))
}

fn marked(pod: &Value, at: i64, period: i64, first: bool) -> Value {
    let mut pod = pod.clone();
    if let Some(metadata) = pod.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.insert("deletionTimestamp".to_owned(), json!(rfc3339_from_unix(at)));
        metadata.insert("deletionGracePeriodSeconds".to_owned(), json!(period));
        if first
            && let Some(generation) = metadata
                .get("generation")
                .and_then(Value::as_i64)
                .filter(|g| *g > 0)
        {
            metadata.insert("generation".to_owned(), json!(generation + 1));
        }
    }
    pod
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_767_225_600; // 2026-01-01T00:00:00Z

    fn pod(node: &str, phase: &str, grace: Option<i64>) -> Value {
        let mut pod = json!({"metadata": {"name": "p", "generation": 1},
            "spec": {"containers": []}, "status": {"phase": phase}});
        if !node.is_empty() {
            pod["spec"]["nodeName"] = json!(node);
        }
        if let Some(grace) = grace {
            pod["spec"]["terminationGracePeriodSeconds"] = json!(grace);
        }
        pod
    }

    fn mark(graceful: Graceful) -> Value {
        match graceful {
            Graceful::Mark(pod) => pod,
            other => panic!("not marked: {other:?}"),
        }
    }

    #[test]
    fn unscheduled_or_finished_pods_go_at_once() {
        assert_eq!(
            pod_deletion(&pod("", "Pending", Some(30)), &Value::Null, NOW),
            Graceful::Now
        );
        for phase in ["Succeeded", "Failed"] {
            assert_eq!(
                pod_deletion(&pod("n1", phase, Some(30)), &Value::Null, NOW),
                Graceful::Now
            );
        }
        let zero = json!({"gracePeriodSeconds": 0});
        assert_eq!(
            pod_deletion(&pod("n1", "Running", Some(30)), &zero, NOW),
            Graceful::Now
        );
        assert_eq!(
            pod_deletion(&pod("n1", "Running", None), &Value::Null, NOW),
            Graceful::Now
        );
    }

    #[test]
    fn scheduled_pods_are_marked_for_their_grace_period() {
        let marked = mark(pod_deletion(
            &pod("n1", "Running", Some(30)),
            &Value::Null,
            NOW,
        ));
        assert_eq!(
            marked["metadata"]["deletionTimestamp"],
            "2026-01-01T00:00:30Z"
        );
        assert_eq!(marked["metadata"]["deletionGracePeriodSeconds"], 30);
        assert_eq!(marked["metadata"]["generation"], 2);
        let asked = mark(pod_deletion(
            &pod("n1", "Pending", Some(30)),
            &json!({"gracePeriodSeconds": 5}),
            NOW,
        ));
        assert_eq!(asked["metadata"]["deletionGracePeriodSeconds"], 5);
        let negative = mark(pod_deletion(
            &pod("n1", "Running", Some(30)),
            &json!({"gracePeriodSeconds": -3}),
            NOW,
        ));
        assert_eq!(negative["metadata"]["deletionGracePeriodSeconds"], 1);
    }

    #[test]
    fn a_marked_pod_only_shortens() {
        let marked = mark(pod_deletion(
            &pod("n1", "Running", Some(30)),
            &Value::Null,
            NOW,
        ));
        assert_eq!(
            pod_deletion(&marked, &Value::Null, NOW + 1),
            Graceful::Pending
        );
        assert_eq!(
            pod_deletion(&marked, &json!({"gracePeriodSeconds": 30}), NOW + 1),
            Graceful::Pending
        );
        let shorter = mark(pod_deletion(
            &marked,
            &json!({"gracePeriodSeconds": 10}),
            NOW + 1,
        ));
        assert_eq!(
            shorter["metadata"]["deletionTimestamp"],
            "2026-01-01T00:00:10Z"
        );
        assert_eq!(shorter["metadata"]["deletionGracePeriodSeconds"], 10);
        assert_eq!(shorter["metadata"]["generation"], 2);
        assert_eq!(
            pod_deletion(&marked, &json!({"gracePeriodSeconds": 0}), NOW + 1),
            Graceful::Now
        );
        let forced = forced(&marked).expect("a marked pod");
        assert_eq!(
            forced["metadata"]["deletionTimestamp"],
            "2026-01-01T00:00:00Z"
        );
        assert_eq!(forced["metadata"]["deletionGracePeriodSeconds"], 0);
        assert_eq!(forced["metadata"]["generation"], 2);
        assert_eq!(super::forced(&forced), None);
        assert_eq!(super::forced(&pod("n1", "Running", Some(30))), None);
        let by_finalizer = json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z",
            "deletionGracePeriodSeconds": 0}, "spec": {"nodeName": "n1"}});
        assert_eq!(
            pod_deletion(&by_finalizer, &Value::Null, NOW),
            Graceful::Now
        );
    }
}

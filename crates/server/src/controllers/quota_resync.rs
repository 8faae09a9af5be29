//! The resource quota controller's recalculations: every `--resource-quota-sync-period`
//! (kube's 5 minutes) each ResourceQuota's `status.used` is recalculated, as
//! kube-controller-manager's `resourcequota` controller recalculates every quota on its resync
//! (`pkg/controller/resourcequota/resource_quota_controller.go`), and a quota just created or
//! whose `spec.hard` changed is recalculated again as soon as the caches have caught up with
//! its write (as kube's controller queues a quota it sees added or its hard limits changed;
//! see `crate::source::resource_quota::Recounts`). The usage of a quota changes without any
//! write to what it counts when time alone changes a charge: a pod terminating past its
//! `deletionTimestamp` plus `deletionGracePeriodSeconds` stops being charged (kube's
//! `QuotaV1Pod`; see `crate::source::resource_quota`).
//!
//! ## Guarantees
//! - The recalculation is the write path's own (a write of a quota fills `status.used` from
//!   the caches): each quota gets an empty merge patch of its `status` as the user
//!   `system:serviceaccount:kube-system:resourcequota-controller`; one whose usage is
//!   unchanged is a no-op write (no new resource version, no watch event).
//! - A marked quota is recalculated once the quota's and its counted resources' caches have
//!   the store's revision read after the quota's write committed: an object written at the
//!   same moment as the quota (the namespace controller's `default` ServiceAccount beside a
//!   quota made right after its namespace), which the quota's own count could miss and whose
//!   admission could not yet see the quota, is counted.
//! - A quota is counted from caches that have it as read (its resource version, so every
//!   object a write charged to it), and written only while it is still that version: a write
//!   charged meanwhile makes it read again (at most `RECOUNT_ATTEMPTS` times, then the next
//!   period), never overwritten by a count that missed it. A quota deleted meanwhile is done.
//! - Only these writes (and a new quota or a change of its `spec.hard`) recount a quota's
//!   status: a client's write of `status` is kept as written until the next period, as kube's
//!   controller ignores it until its resync (kube's conformance test "should apply changes to
//!   a resourcequota status" relies on both). That holds when the client's write comes
//!   between a change of `spec.hard` and its marked recount too: a marked recount skips a
//!   quota whose `status.hard` is not its `spec.hard` (only a client writes that), where
//!   kube's queued sync would race the client's write.
//!
//! ## Bounds
//! One write per quota per period, one after another, and one per marked quota (at most
//! `MAX_PENDING_RECOUNTS` waiting); holds nothing else between periods.
//!
//! ## Differs from kube
//! kube's controller also recalculates a quota after any change to what it counts; here every
//! charged write already writes the quotas it changes (`crate::source::resource_quota`), so
//! only the recalculation of new quotas and the periodic resync are emulated: an object whose
//! admission ran before a new quota reached the caches and which commits after the marked
//! recalculation read its revision is counted at the next period. kube's
//! `--concurrent-resource-quota-syncs` has no counterpart (the writes are sequential).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use watchkeeper_api::ApiError;

use crate::source::store::Collect;

/// Its service account's name, as kube-controller-manager's (its writes' user, the only
/// writer of a quota's `status` whose write is recounted).
use crate::source::resource_quota::{self, CONTROLLER};

/// Recalculates every quota each `period`, and each quota a write marked
/// ([`crate::source::resource_quota::Recounts`]) once the caches have caught up with it,
/// until `shutdown` turns true.
pub async fn run(
    context: super::Context,
    period: Duration,
    shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let recounts = context.source.quota_recounts().clone();
    let resyncs = async {
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let outcome = tokio::select! {
                _ = ticks.tick() => resync(&context, None).await,
                marked = recounts.marked() => resync(&context, Some(marked)).await,
            };
            if let Err(error) = outcome {
                tracing::debug!(%error.message, "resource quota resync failed");
            }
        }
    };
    super::until_shutdown(resyncs, shutdown).await;
}

/// One recalculation of every quota in the cache, or of the `marked` ones (namespace, name)
/// once the caches of what they count have the store's current revision (a marked quota's
/// write committed before it was marked, so it and what it raced with are counted).
async fn resync(
    context: &super::Context,
    marked: Option<BTreeSet<(String, String)>>,
) -> Result<(), ApiError> {
    let served = context.registry.load();
    let Some(quotas) = served
        .iter()
        .find(|r| {
            r.def.group.is_empty()
                && r.def.version == "v1"
                && r.def.plural == "resourcequotas"
                && r.conversion.is_none()
        })
        .cloned()
    else {
        return Ok(());
    };
    let all: Vec<Arc<watchkeeper_core::Object>> = match &marked {
        None => quotas.cache().latest().range(None, None).cloned().collect(),
        Some(marked) => {
            let revision = context.source.current_revision().await?;
            context.fresh.wait(quotas.cache(), revision).await?;
            let snapshot = quotas.cache().latest();
            let found: Vec<Arc<watchkeeper_core::Object>> = marked
                .iter()
                .filter_map(|(namespace, name)| {
                    snapshot
                        .get(&watchkeeper_core::object_key(namespace, name))
                        .cloned()
                })
                .collect();
            for quota in &found {
                for counted in counted_resources(&served, quota.body()) {
                    context.fresh.wait(counted.cache(), revision).await?;
                }
            }
            found
        }
    };
    let mut failed = None;
    let marked = marked.is_some();
    for quota in all {
        if let Err(error) = recount(
            context,
            &served,
            &quotas,
            quota.namespace(),
            quota.name(),
            marked,
        )
        .await
        {
            failed.get_or_insert(error);
        }
    }
    failed.map_or(Ok(()), Err)
}

/// How many times a recount reads a quota changed under it again.
const RECOUNT_ATTEMPTS: usize = 5;

/// Recalculates the quota `namespace`/`name`: counted from caches that have the quota as
/// read (its own resource version: whatever a write charged to it is in them), written only
/// if it is still that version (a write charged meanwhile is read again, up to
/// [`RECOUNT_ATTEMPTS`] times; else the next period recounts it). Gone is done; a `marked`
/// recount is done too once a client has written the quota's status.
async fn recount(
    context: &super::Context,
    served: &crate::cache::Served,
    quotas: &Arc<crate::cache::Resource>,
    namespace: &str,
    name: &str,
    marked: bool,
) -> Result<(), ApiError> {
    let key = watchkeeper_core::object_key(namespace, name);
    for _ in 0..RECOUNT_ATTEMPTS {
        let Some(quota) = quotas.cache().get(&key).0 else {
            return Ok(());
        };
        if marked && status_written_by_a_client(quota.body()) {
            return Ok(());
        }
        let version = quota.resource_version();
        for counted in counted_resources(served, quota.body()) {
            context.fresh.wait(counted.cache(), version).await?;
        }
        let patch = Collect::PatchStatus(json!({
            "metadata": {"resourceVersion": version.to_string()},
        }));
        match context
            .source
            .collect(
                &context.fresh,
                served,
                quotas,
                CONTROLLER,
                (namespace, name),
                patch,
            )
            .await
        {
            Err(error) if error.code == 409 => {
                let now = context.source.current_revision().await?;
                context.fresh.wait(quotas.cache(), now).await?;
            }
            Err(error) if error.code == 404 => return Ok(()),
            other => return other,
        }
    }
    Ok(())
}

/// Whether `quota`'s `status.hard` is not its `spec.hard`: a client wrote its status (every
/// write of this server that sets `status.hard` copies `spec.hard`), which a marked recount
/// leaves as written until the next period.
fn status_written_by_a_client(quota: &serde_json::Value) -> bool {
    let hard = |pointer: &str| {
        quota
            .pointer(pointer)
            .filter(|hard| !hard.is_null())
            .cloned()
            .unwrap_or_else(|| json!({}))
    };
    hard("/status/hard") != hard("/spec/hard")
}

/// The served resources whose objects `quota` counts (by the names of its `spec.hard`).
fn counted_resources<'a>(
    served: &'a [Arc<crate::cache::Resource>],
    quota: &serde_json::Value,
) -> Vec<&'a Arc<crate::cache::Resource>> {
    let Some(hard) = quota
        .pointer("/spec/hard")
        .and_then(serde_json::Value::as_object)
    else {
        return Vec::new();
    };
    let mut counted: Vec<&Arc<crate::cache::Resource>> = Vec::new();
    for name in hard.keys() {
        let Some((group, plural)) = resource_quota::charged_resource(name) else {
            continue;
        };
        if let Some(resource) = served.iter().find(|r| {
            r.def.namespaced
                && r.def.group == group
                && r.def.plural == plural
                && r.conversion.is_none()
        }) && !counted.iter().any(|c| Arc::ptr_eq(c, resource))
        {
            counted.push(resource);
        }
    }
    counted
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Goal: a marked recount leaves exactly the quotas whose `status.hard` a client wrote:
    /// not one whose status this server filled from `spec.hard` (absent and empty alike),
    /// one whose `status.hard` says anything else.
    #[test]
    fn only_a_status_hard_other_than_the_spec_s_is_a_client_s() {
        let quota = |spec: serde_json::Value, status: serde_json::Value| json!({"spec": spec, "status": status});
        let hard = json!({"cpu": "1", "memory": "1Gi"});
        assert!(!status_written_by_a_client(&quota(
            json!({"hard": hard}),
            json!({"hard": hard, "used": {"cpu": "0"}})
        )));
        assert!(!status_written_by_a_client(&quota(
            json!({}),
            json!({"hard": {}})
        )));
        assert!(!status_written_by_a_client(&quota(
            json!({"hard": null}),
            json!({})
        )));
        assert!(status_written_by_a_client(&quota(
            json!({"hard": hard}),
            json!({"hard": {"cpu": "2", "memory": "2Gi"}})
        )));
        assert!(status_written_by_a_client(&quota(
            json!({"hard": hard}),
            json!({"used": {}})
        )));
    }
}

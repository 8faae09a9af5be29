//! The resource quota controller's resync: every `--resource-quota-sync-period` (kube's
//! 5 minutes), each ResourceQuota's `status.used` is recalculated, as kube-controller-manager's
//! `resourcequota` controller recalculates every quota on its resync
//! (`pkg/controller/resourcequota/resource_quota_controller.go`). The usage of a quota
//! changes without any write to what it counts when time alone changes a charge: a pod
//! terminating past its `deletionTimestamp` plus `deletionGracePeriodSeconds` stops being
//! charged (kube's `QuotaV1Pod`; see `crate::source::resource_quota`).
//!
//! ## Guarantees
//! - The recalculation is the write path's own (a write of a quota fills `status.used` from
//!   the caches proven fresh): each quota gets an empty merge patch of its `status` as the
//!   user `system:serviceaccount:kube-system:resourcequota-controller`; one whose usage is
//!   unchanged is a no-op write (no new resource version, no watch event).
//! - A quota deleted or changed meanwhile (404, 409) waits for the next period.
//! - Only these writes (and a new quota or a change of its `spec.hard`) recount a quota's
//!   status: a client's write of `status` is kept as written until the next period, as kube's
//!   controller ignores it until its resync (kube's conformance test "should apply changes to
//!   a resourcequota status" relies on both).
//!
//! ## Bounds
//! One write per quota per period, one after another; holds nothing between periods.
//!
//! ## Differs from kube
//! kube's controller also recalculates a quota soon after a change to what it counts; here
//! every charged write already writes the quotas it changes (`crate::source::resource_quota`),
//! so only the periodic resync is emulated. kube's `--concurrent-resource-quota-syncs` has no
//! counterpart (the writes are sequential).

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use watchkeeper_api::ApiError;

use crate::source::store::Collect;

/// Its service account's name, as kube-controller-manager's (its writes' user, the only
/// writer of a quota's `status` whose write is recounted).
use crate::source::resource_quota::CONTROLLER;

/// Recalculates every quota each `period` until `shutdown` turns true.
pub async fn run(
    context: super::Context,
    period: Duration,
    shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let resyncs = async {
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            if let Err(error) = resync(&context).await {
                tracing::debug!(%error.message, "resource quota resync failed");
            }
        }
    };
    super::until_shutdown(resyncs, shutdown).await;
}

/// One recalculation of every quota in the cache.
async fn resync(context: &super::Context) -> Result<(), ApiError> {
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
    let all: Vec<Arc<watchkeeper_core::Object>> =
        quotas.cache().latest().range(None, None).cloned().collect();
    let mut failed = None;
    for quota in all {
        let target = (quota.namespace(), quota.name());
        let patch = Collect::PatchStatus(json!({}));
        match context
            .source
            .collect(&context.fresh, &served, &quotas, CONTROLLER, target, patch)
            .await
        {
            Ok(()) => {}
            Err(error) if error.code == 404 || error.code == 409 => {}
            Err(error) => {
                failed.get_or_insert(error);
            }
        }
    }
    failed.map_or(Ok(()), Err)
}

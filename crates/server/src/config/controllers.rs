//! The tunables of the emulated kube-controller-manager controllers that run on the server's
//! clock: the pod garbage collector (`--enable-pod-gc`, `--terminated-pod-gc-threshold`,
//! `--pod-gc-period-ms`, `--pod-gc-quarantine-ms`, `--pod-gc-deletes-per-pass-max`; see
//! `crate::controllers::pod_gc`) and the resource quota controller's resync
//! (`--resource-quota-sync-period`; see `crate::controllers::quota_resync`).
//!
//! ## Guarantees
//! - Defaults are kube-controller-manager's: the pod GC looks every 20 s (`gcCheckPeriod`),
//!   waits 40 s for a missing node (`quarantineTime`), keeps 12500 terminated pods
//!   (`--terminated-pod-gc-threshold`; 0 or less turns that part off, as kube's does); quotas
//!   are recalculated every 5 minutes (`--resource-quota-sync-period`, a Go duration as kube's
//!   flag takes it).
//! - Out-of-range values are refused at start with the flag, the value and the range.
//! - Differs from kube: the period and quarantine are flags (kube compiles them in), and a pass
//!   deletes at most `--pod-gc-deletes-per-pass-max` pods (kube's is unbounded).

use std::time::Duration;

use super::{ConfigError, ServeArgs};

/// kube's `gcCheckPeriod`.
pub const POD_GC_PERIOD_MS: u64 = 20_000;
/// kube's `quarantineTime`.
pub const POD_GC_QUARANTINE_MS: u64 = 40_000;
/// kube-controller-manager's `--terminated-pod-gc-threshold` default.
pub const TERMINATED_POD_GC_THRESHOLD: i64 = 12_500;
/// The most pods one pass of the pod GC deletes, by default.
pub const POD_GC_DELETES_PER_PASS_MAX: usize = 500;
/// kube-controller-manager's `--resource-quota-sync-period` default, five minutes.
pub const RESOURCE_QUOTA_SYNC_PERIOD: Duration = Duration::from_secs(300);

/// The pod garbage collector's tunables.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodGcConfig {
    /// `--enable-pod-gc`.
    pub enabled: bool,
    /// `--terminated-pod-gc-threshold`: terminated pods kept; `None` (0 or less) keeps all.
    pub terminated_threshold: Option<usize>,
    /// `--pod-gc-period-ms`: time between passes.
    pub period: Duration,
    /// `--pod-gc-quarantine-ms`: how long a node must stay absent before its pods go.
    pub quarantine: Duration,
    /// `--pod-gc-deletes-per-pass-max`: the most deletes of one pass.
    pub deletes_per_pass_max: usize,
}

/// The controllers' tunables of `args`.
///
/// # Errors
/// The refused flag, with why.
pub(super) fn from_args(args: &ServeArgs) -> Result<(PodGcConfig, Duration), ConfigError> {
    let period_ms = args.pod_gc_period_ms.unwrap_or(POD_GC_PERIOD_MS);
    if !(10..=3_600_000).contains(&period_ms) {
        return Err(ConfigError::flag(
            "--pod-gc-period-ms",
            format!("--pod-gc-period-ms {period_ms}: must be between 10 and 3600000 milliseconds"),
        ));
    }
    let quarantine_ms = args.pod_gc_quarantine_ms.unwrap_or(POD_GC_QUARANTINE_MS);
    if quarantine_ms > 3_600_000 {
        return Err(ConfigError::flag(
            "--pod-gc-quarantine-ms",
            format!(
                "--pod-gc-quarantine-ms {quarantine_ms}: must be between 0 and 3600000 milliseconds"
            ),
        ));
    }
    let deletes = args
        .pod_gc_deletes_per_pass_max
        .unwrap_or(POD_GC_DELETES_PER_PASS_MAX);
    if !(1..=100_000).contains(&deletes) {
        return Err(ConfigError::flag(
            "--pod-gc-deletes-per-pass-max",
            format!("--pod-gc-deletes-per-pass-max {deletes}: must be between 1 and 100000 pods"),
        ));
    }
    let threshold = args
        .terminated_pod_gc_threshold
        .unwrap_or(TERMINATED_POD_GC_THRESHOLD);
    let sync_period = match &args.resource_quota_sync_period {
        Some(text) => super::limits::parse_go_duration(text)
            .filter(|period| *period >= Duration::from_millis(10))
            .ok_or_else(|| {
                ConfigError::flag(
                    "--resource-quota-sync-period",
                    format!(
                        "--resource-quota-sync-period {text:?}: must be a duration from 10ms to 24h such as 5m0s, 30s or 500ms"
                    ),
                )
            })?,
        None => RESOURCE_QUOTA_SYNC_PERIOD,
    };
    let pod_gc = PodGcConfig {
        enabled: args.enable_pod_gc.unwrap_or(true),
        terminated_threshold: usize::try_from(threshold).ok().filter(|t| *t > 0),
        period: Duration::from_millis(period_ms),
        quarantine: Duration::from_millis(quarantine_ms),
        deletes_per_pass_max: deletes,
    };
    Ok((pod_gc, sync_period))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_kubes_and_ranges_are_checked() {
        let (pod_gc, sync) = from_args(&ServeArgs::default()).unwrap();
        assert_eq!(
            pod_gc,
            PodGcConfig {
                enabled: true,
                terminated_threshold: Some(12_500),
                period: Duration::from_secs(20),
                quarantine: Duration::from_secs(40),
                deletes_per_pass_max: 500,
            }
        );
        assert_eq!(sync, Duration::from_secs(300));
        let (off, sync) = from_args(&ServeArgs {
            terminated_pod_gc_threshold: Some(-1),
            resource_quota_sync_period: Some("1m30s".to_owned()),
            ..ServeArgs::default()
        })
        .unwrap();
        assert_eq!(off.terminated_threshold, None);
        assert_eq!(sync, Duration::from_secs(90));
        for (args, flag) in [
            (
                ServeArgs {
                    pod_gc_period_ms: Some(5),
                    ..ServeArgs::default()
                },
                "--pod-gc-period-ms 5: must be between 10 and 3600000 milliseconds",
            ),
            (
                ServeArgs {
                    pod_gc_quarantine_ms: Some(3_600_001),
                    ..ServeArgs::default()
                },
                "--pod-gc-quarantine-ms 3600001",
            ),
            (
                ServeArgs {
                    pod_gc_deletes_per_pass_max: Some(0),
                    ..ServeArgs::default()
                },
                "--pod-gc-deletes-per-pass-max 0",
            ),
            (
                ServeArgs {
                    resource_quota_sync_period: Some("1ms".to_owned()),
                    ..ServeArgs::default()
                },
                "--resource-quota-sync-period \"1ms\"",
            ),
            (
                ServeArgs {
                    resource_quota_sync_period: Some("300".to_owned()),
                    ..ServeArgs::default()
                },
                "--resource-quota-sync-period \"300\"",
            ),
        ] {
            let error = from_args(&args).unwrap_err().to_string();
            assert!(error.starts_with(flag), "{error}");
        }
    }
}

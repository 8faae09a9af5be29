//! The audit log part of the configuration: kube-apiserver's `--audit-policy-file` and
//! `--audit-log-*` flags, validated as kube validates them (the policy file itself is read and
//! validated at start, by [`crate::audit::policy`]).

use std::path::PathBuf;
use std::time::Duration;

use super::{ConfigError, ServeArgs};

/// How events reach the log (`--audit-log-mode`), kube-apiserver's three modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum AuditMode {
    /// Each event is written before the request goes on; a failed write is counted and the
    /// request still served.
    #[default]
    Blocking,
    /// As `Blocking`, but a failed write of the `RequestReceived` event fails the request (500).
    BlockingStrict,
    /// Events are queued (at most `--audit-log-batch-buffer-size`) and written behind the
    /// request; a full queue drops the event and counts it.
    Batch,
}

impl AuditMode {
    /// kube's names, in kube's order.
    pub const NAMES: [&'static str; 3] = ["batch", "blocking", "blocking-strict"];
}

/// How a backend groups events (kube's `BatchConfig`): at most `max_size` a batch, a batch
/// waiting at most `max_wait` after its first event for more (`batch` mode), and at most
/// `throttle` batches a second (QPS, burst).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Batching {
    /// The mode: only `batch` waits for more events.
    pub mode: AuditMode,
    /// Events in one batch at most.
    pub max_size: usize,
    /// How long a batch waits for more events after its first.
    pub max_wait: Duration,
    /// Batches a second and the burst allowed, when throttled.
    pub throttle: Option<(f64, usize)>,
}

/// The audit log part of the configuration.
#[derive(Clone, Debug)]
pub struct AuditConfig {
    /// `--audit-policy-file`: an `audit.k8s.io/v1` `Policy`, YAML or JSON.
    pub policy_file: Option<PathBuf>,
    /// `--audit-log-path`: the log file; `-` is standard output.
    pub log_path: Option<PathBuf>,
    /// `--audit-log-maxage`: days an old (rotated) file is kept; 0 = no age limit.
    pub max_age_days: u64,
    /// `--audit-log-maxbackup`: old files kept; 0 = all.
    pub max_backups: usize,
    /// `--audit-log-maxsize`: megabytes a file grows to before it is rotated; 0 = 100
    /// (lumberjack's default, as kube-apiserver passes 0 through).
    pub max_size_megabytes: u64,
    /// `--audit-log-mode`.
    pub mode: AuditMode,
    /// `--audit-log-batch-buffer-size`: events queued at most.
    pub batch_buffer_size: usize,
    /// `--audit-log-max-object-bytes`: the largest request or response body kept as an
    /// event's `requestObject` or `responseObject`.
    pub max_object_bytes: usize,
    /// `--audit-log-compress`: rotated files are gzipped.
    pub compress: bool,
    /// `--audit-log-batch-max-size`: events written at once at most (`batch` mode).
    pub batch_max_size: usize,
    /// `--audit-log-batch-max-wait`: how long a batch waits for more events (`batch` mode).
    pub batch_max_wait: Duration,
    /// `--audit-log-batch-throttle-*`: batches a second and the burst, when enabled.
    pub batch_throttle: Option<(f64, usize)>,
    /// `--audit-webhook-config-file`: the kubeconfig of the audit webhook.
    pub webhook_config_file: Option<PathBuf>,
    /// The audit webhook's `--audit-webhook-*` settings.
    pub webhook: AuditWebhookConfig,
}

/// The audit webhook's settings (`--audit-webhook-*`, see `crate::audit::webhook`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AuditWebhookConfig {
    /// `--audit-webhook-mode`.
    pub mode: AuditMode,
    /// `--audit-webhook-batch-buffer-size`: events queued at most.
    pub batch_buffer_size: usize,
    /// `--audit-webhook-batch-max-size`: events in one POST at most.
    pub batch_max_size: usize,
    /// `--audit-webhook-batch-max-wait`: how long a batch waits for more events.
    pub batch_max_wait: Duration,
    /// `--audit-webhook-initial-backoff`: the wait before the first retry.
    pub initial_backoff: Duration,
    /// `--audit-webhook-batch-throttle-*`: batches a second and the burst, when enabled.
    pub throttle: Option<(f64, usize)>,
}

impl Default for AuditWebhookConfig {
    fn default() -> Self {
        AuditWebhookConfig {
            mode: AuditMode::Batch,
            batch_buffer_size: DEFAULT_BATCH_BUFFER_SIZE,
            batch_max_size: 400,
            batch_max_wait: Duration::from_secs(30),
            initial_backoff: Duration::from_secs(10),
            throttle: Some((10.0, 15)),
        }
    }
}

impl Default for AuditConfig {
    fn default() -> Self {
        AuditConfig {
            policy_file: None,
            log_path: None,
            max_age_days: 0,
            max_backups: 0,
            max_size_megabytes: 0,
            mode: AuditMode::Blocking,
            batch_buffer_size: DEFAULT_BATCH_BUFFER_SIZE,
            max_object_bytes: DEFAULT_MAX_OBJECT_BYTES,
            compress: false,
            batch_max_size: 1,
            batch_max_wait: Duration::ZERO,
            batch_throttle: None,
            webhook_config_file: None,
            webhook: AuditWebhookConfig::default(),
        }
    }
}

/// kube-apiserver's `--audit-log-batch-buffer-size` default.
pub(super) const DEFAULT_BATCH_BUFFER_SIZE: usize = 10_000;
/// `--audit-log-max-object-bytes`' default (10 MiB, kube's largest truncated batch).
pub(super) const DEFAULT_MAX_OBJECT_BYTES: usize = 10 * 1024 * 1024;

impl AuditConfig {
    /// Whether events are written: a policy and a log path or a webhook, as kube-apiserver
    /// needs both.
    #[must_use]
    pub fn enabled(&self) -> bool {
        self.policy_file.is_some()
            && (self.log_path.is_some() || self.webhook_config_file.is_some())
    }

    /// How the log's writer groups events (`--audit-log-mode`, `--audit-log-batch-*`).
    #[must_use]
    pub fn log_batching(&self) -> Batching {
        Batching {
            mode: self.mode,
            max_size: self.batch_max_size,
            max_wait: self.batch_max_wait,
            throttle: self.batch_throttle,
        }
    }

    /// Validates the audit flags.
    ///
    /// # Errors
    /// The flag at fault, with kube-apiserver's wording where it has one.
    pub fn from_args(args: &ServeArgs) -> Result<AuditConfig, ConfigError> {
        let format = args.audit_log_format.as_deref().unwrap_or("json");
        match format {
            "json" => {}
            "legacy" => {
                return Err(ConfigError::flag(
                    "--audit-log-format",
                    "--audit-log-format: the \"legacy\" format is not supported by this server; use \"json\"",
                ));
            }
            other => {
                return Err(ConfigError::flag(
                    "--audit-log-format",
                    format!(
                        "invalid audit log format {other}, allowed formats are \"json,legacy\""
                    ),
                ));
            }
        }
        let mode = parse_mode("log", args.audit_log_mode.as_deref().unwrap_or("blocking"))?;
        let batch_buffer_size = args
            .audit_log_batch_buffer_size
            .unwrap_or(DEFAULT_BATCH_BUFFER_SIZE);
        if batch_buffer_size == 0 {
            return Err(ConfigError::flag(
                "--audit-log-batch-buffer-size",
                "invalid audit log batch config: --audit-log-batch-buffer-size 0 must be a positive number",
            ));
        }
        let batch_max_size = args.audit_log_batch_max_size.unwrap_or(1);
        if batch_max_size == 0 {
            return Err(ConfigError::flag(
                "--audit-log-batch-max-size",
                "invalid audit batch log max batch size 0, must be a positive number",
            ));
        }
        let batch_max_wait = match args.audit_log_batch_max_wait.as_deref() {
            None => Duration::ZERO,
            Some(text) => {
                let flag = "--audit-log-batch-max-wait";
                let seconds =
                    super::go_duration_seconds(text).map_err(|e| ConfigError::flag(flag, e))?;
                if seconds < 0.0 {
                    return Err(ConfigError::flag(
                        flag,
                        format!("{flag} {text} must not be negative"),
                    ));
                }
                Duration::from_secs_f64(seconds)
            }
        };
        let batch_throttle = throttle(
            "log",
            args.audit_log_batch_throttle_enable.unwrap_or(false),
            args.audit_log_batch_throttle_qps.unwrap_or(0.0),
            args.audit_log_batch_throttle_burst.unwrap_or(0),
        )?;
        let max_object_bytes = args
            .audit_log_max_object_bytes
            .unwrap_or(DEFAULT_MAX_OBJECT_BYTES);
        if max_object_bytes < 1024 {
            return Err(ConfigError::flag(
                "--audit-log-max-object-bytes",
                format!("--audit-log-max-object-bytes {max_object_bytes} must be at least 1024"),
            ));
        }
        Ok(AuditConfig {
            policy_file: args.audit_policy_file.clone(),
            log_path: args.audit_log_path.clone(),
            max_age_days: args.audit_log_maxage.unwrap_or(0),
            max_backups: args.audit_log_maxbackup.unwrap_or(0),
            max_size_megabytes: args.audit_log_maxsize.unwrap_or(0),
            mode,
            batch_buffer_size,
            max_object_bytes,
            compress: args.audit_log_compress.unwrap_or(false),
            batch_max_size,
            batch_max_wait,
            batch_throttle,
            webhook_config_file: args.audit_webhook_config_file.clone(),
            webhook: AuditWebhookConfig::from_args(args)?,
        })
    }
}

/// `--audit-<plugin>-mode` (kube's `validateBackendMode` wording).
fn parse_mode(plugin: &str, mode: &str) -> Result<AuditMode, ConfigError> {
    match mode {
        "blocking" => Ok(AuditMode::Blocking),
        "blocking-strict" => Ok(AuditMode::BlockingStrict),
        "batch" => Ok(AuditMode::Batch),
        other => Err(ConfigError::flag(
            if plugin == "log" {
                "--audit-log-mode"
            } else {
                "--audit-webhook-mode"
            },
            format!(
                "invalid audit {plugin} mode {other}, allowed modes are \"{}\"",
                AuditMode::NAMES.join(",")
            ),
        )),
    }
}

/// `--audit-<plugin>-batch-throttle-*`: `(qps, burst)` when enabled (kube's
/// `validateBackendBatchOptions` wording).
fn throttle(
    plugin: &str,
    enabled: bool,
    qps: f64,
    burst: usize,
) -> Result<Option<(f64, usize)>, ConfigError> {
    if !enabled {
        return Ok(None);
    }
    let (qps_flag, burst_flag) = if plugin == "log" {
        (
            "--audit-log-batch-throttle-qps",
            "--audit-log-batch-throttle-burst",
        )
    } else {
        (
            "--audit-webhook-batch-throttle-qps",
            "--audit-webhook-batch-throttle-burst",
        )
    };
    if qps.is_nan() || qps <= 0.0 {
        return Err(ConfigError::flag(
            qps_flag,
            format!("invalid audit batch {plugin} throttle QPS {qps}, must be a positive number"),
        ));
    }
    if burst == 0 {
        return Err(ConfigError::flag(
            burst_flag,
            format!("invalid audit batch {plugin} throttle burst 0, must be a positive number"),
        ));
    }
    Ok(Some((qps, burst)))
}

/// A positive Go duration flag.
fn positive_duration(
    flag: &'static str,
    text: Option<&str>,
    default: Duration,
) -> Result<Duration, ConfigError> {
    let Some(text) = text else {
        return Ok(default);
    };
    let seconds = super::go_duration_seconds(text).map_err(|e| ConfigError::flag(flag, e))?;
    if seconds <= 0.0 {
        return Err(ConfigError::flag(
            flag,
            format!("{flag} {text} must be a positive duration"),
        ));
    }
    Ok(Duration::from_secs_f64(seconds))
}

impl AuditWebhookConfig {
    /// Validates the `--audit-webhook-*` flags.
    ///
    /// # Errors
    /// The flag at fault, with kube-apiserver's wording where it has one.
    pub fn from_args(args: &ServeArgs) -> Result<AuditWebhookConfig, ConfigError> {
        let defaults = AuditWebhookConfig::default();
        let mode = parse_mode(
            "webhook",
            args.audit_webhook_mode.as_deref().unwrap_or("batch"),
        )?;
        let batch_buffer_size = args
            .audit_webhook_batch_buffer_size
            .unwrap_or(defaults.batch_buffer_size);
        if batch_buffer_size == 0 {
            return Err(ConfigError::flag(
                "--audit-webhook-batch-buffer-size",
                "invalid audit batch webhook buffer size 0, must be a positive number",
            ));
        }
        let batch_max_size = args
            .audit_webhook_batch_max_size
            .unwrap_or(defaults.batch_max_size);
        if batch_max_size == 0 {
            return Err(ConfigError::flag(
                "--audit-webhook-batch-max-size",
                "invalid audit batch webhook max batch size 0, must be a positive number",
            ));
        }
        Ok(AuditWebhookConfig {
            mode,
            batch_buffer_size,
            batch_max_size,
            batch_max_wait: positive_duration(
                "--audit-webhook-batch-max-wait",
                args.audit_webhook_batch_max_wait.as_deref(),
                defaults.batch_max_wait,
            )?,
            initial_backoff: positive_duration(
                "--audit-webhook-initial-backoff",
                args.audit_webhook_initial_backoff.as_deref(),
                defaults.initial_backoff,
            )?,
            throttle: throttle(
                "webhook",
                args.audit_webhook_batch_throttle_enable.unwrap_or(true),
                args.audit_webhook_batch_throttle_qps.unwrap_or(10.0),
                args.audit_webhook_batch_throttle_burst.unwrap_or(15),
            )?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(args: ServeArgs) -> Result<AuditConfig, String> {
        AuditConfig::from_args(&args).map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_are_kube_apiservers() {
        let config = parsed(ServeArgs::default()).unwrap();
        assert!(!config.enabled());
        assert_eq!(config.mode, AuditMode::Blocking);
        assert_eq!(config.batch_buffer_size, 10_000);
        assert_eq!(config.max_size_megabytes, 0);
    }

    #[test]
    fn refused_values_name_the_flag() {
        let legacy = ServeArgs {
            audit_log_format: Some("legacy".into()),
            ..ServeArgs::default()
        };
        assert!(parsed(legacy).unwrap_err().contains("not supported"));
        let format = ServeArgs {
            audit_log_format: Some("xml".into()),
            ..ServeArgs::default()
        };
        assert_eq!(
            parsed(format).unwrap_err(),
            "invalid audit log format xml, allowed formats are \"json,legacy\""
        );
        let mode = ServeArgs {
            audit_log_mode: Some("async".into()),
            ..ServeArgs::default()
        };
        assert_eq!(
            parsed(mode).unwrap_err(),
            "invalid audit log mode async, allowed modes are \"batch,blocking,blocking-strict\""
        );
        let buffer = ServeArgs {
            audit_log_batch_buffer_size: Some(0),
            ..ServeArgs::default()
        };
        assert!(parsed(buffer).unwrap_err().contains("positive"));
        let objects = ServeArgs {
            audit_log_max_object_bytes: Some(10),
            ..ServeArgs::default()
        };
        assert!(parsed(objects).unwrap_err().contains("at least 1024"));
    }

    #[test]
    fn log_batch_flags_are_kubes_with_its_defaults() {
        let config = parsed(ServeArgs::default()).unwrap();
        assert_eq!(
            (
                config.batch_max_size,
                config.batch_max_wait,
                config.batch_throttle,
                config.compress
            ),
            (1, Duration::ZERO, None, false)
        );
        let set = parsed(ServeArgs {
            audit_log_compress: Some(true),
            audit_log_batch_max_size: Some(50),
            audit_log_batch_max_wait: Some("2s".into()),
            audit_log_batch_throttle_enable: Some(true),
            audit_log_batch_throttle_qps: Some(2.5),
            audit_log_batch_throttle_burst: Some(4),
            ..ServeArgs::default()
        })
        .unwrap();
        assert_eq!(
            (
                set.batch_max_size,
                set.batch_max_wait,
                set.batch_throttle,
                set.compress
            ),
            (50, Duration::from_secs(2), Some((2.5, 4)), true)
        );
        for (args, message) in [
            (
                ServeArgs {
                    audit_log_batch_max_size: Some(0),
                    ..ServeArgs::default()
                },
                "invalid audit batch log max batch size 0, must be a positive number",
            ),
            (
                ServeArgs {
                    audit_log_batch_throttle_enable: Some(true),
                    ..ServeArgs::default()
                },
                "invalid audit batch log throttle QPS 0, must be a positive number",
            ),
            (
                ServeArgs {
                    audit_log_batch_throttle_enable: Some(true),
                    audit_log_batch_throttle_qps: Some(1.0),
                    ..ServeArgs::default()
                },
                "invalid audit batch log throttle burst 0, must be a positive number",
            ),
            (
                ServeArgs {
                    audit_log_batch_max_wait: Some("-1s".into()),
                    ..ServeArgs::default()
                },
                "--audit-log-batch-max-wait -1s must not be negative",
            ),
        ] {
            assert_eq!(parsed(args).unwrap_err(), message);
        }
    }

    #[test]
    fn webhook_flags_are_kubes_with_its_defaults() {
        let config = parsed(ServeArgs::default()).unwrap();
        assert_eq!(
            config.webhook,
            AuditWebhookConfig {
                mode: AuditMode::Batch,
                batch_buffer_size: 10_000,
                batch_max_size: 400,
                batch_max_wait: Duration::from_secs(30),
                initial_backoff: Duration::from_secs(10),
                throttle: Some((10.0, 15)),
            }
        );
        let set = parsed(ServeArgs {
            audit_webhook_mode: Some("blocking".into()),
            audit_webhook_batch_max_wait: Some("1m30s".into()),
            audit_webhook_initial_backoff: Some("250ms".into()),
            ..ServeArgs::default()
        })
        .unwrap();
        assert_eq!(set.webhook.mode, AuditMode::Blocking);
        assert_eq!(set.webhook.batch_max_wait, Duration::from_secs(90));
        assert_eq!(set.webhook.initial_backoff, Duration::from_millis(250));
        for (args, message) in [
            (
                ServeArgs {
                    audit_webhook_mode: Some("async".into()),
                    ..ServeArgs::default()
                },
                "invalid audit webhook mode async, allowed modes are \"batch,blocking,blocking-strict\"",
            ),
            (
                ServeArgs {
                    audit_webhook_batch_max_size: Some(0),
                    ..ServeArgs::default()
                },
                "invalid audit batch webhook max batch size 0, must be a positive number",
            ),
            (
                ServeArgs {
                    audit_webhook_batch_buffer_size: Some(0),
                    ..ServeArgs::default()
                },
                "invalid audit batch webhook buffer size 0, must be a positive number",
            ),
            (
                ServeArgs {
                    audit_webhook_batch_throttle_qps: Some(0.0),
                    ..ServeArgs::default()
                },
                "invalid audit batch webhook throttle QPS 0, must be a positive number",
            ),
            (
                ServeArgs {
                    audit_webhook_initial_backoff: Some("0s".into()),
                    ..ServeArgs::default()
                },
                "--audit-webhook-initial-backoff 0s must be a positive duration",
            ),
            (
                ServeArgs {
                    audit_webhook_batch_max_wait: Some("30".into()),
                    ..ServeArgs::default()
                },
                "time: missing unit in duration \"30\"",
            ),
        ] {
            assert_eq!(parsed(args).unwrap_err(), message);
        }
    }
}

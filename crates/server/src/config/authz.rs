//! The `--authorization-webhook-*` flags: kube-apiserver's `Webhook` authorization mode
//! (see `crate::auth::authz_webhook`), validated as kube's `BuiltInAuthorizationOptions`
//! validates them, plus this server's bounds on the cache and the calls in flight.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::{ConfigError, ServeArgs, bounded};
use crate::source::event_rate_limit::Ticks;

/// `--authorization-webhook-version`: the `SubjectAccessReview` version sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SarVersion {
    /// `authorization.k8s.io/v1beta1` (kube-apiserver's default): the groups are `group`.
    V1beta1,
    /// `authorization.k8s.io/v1`: the groups are `groups`.
    V1,
}

impl SarVersion {
    /// The review's `apiVersion`.
    #[must_use]
    pub fn api_version(self) -> &'static str {
        match self {
            SarVersion::V1beta1 => "authorization.k8s.io/v1beta1",
            SarVersion::V1 => "authorization.k8s.io/v1",
        }
    }
}

/// The authorization webhook's configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthzWebhookConfig {
    /// `--authorization-webhook-config-file`: the kubeconfig naming the webhook.
    pub config_file: PathBuf,
    /// `--authorization-webhook-version`.
    pub version: SarVersion,
    /// `--authorization-webhook-cache-authorized-ttl` (zero: not kept).
    pub authorized_ttl: Duration,
    /// `--authorization-webhook-cache-unauthorized-ttl` (zero: not kept).
    pub unauthorized_ttl: Duration,
    /// `--authorization-webhook-cache-entries`: the most decisions kept.
    pub cache_entries: usize,
    /// `--authorization-webhook-calls-max`: calls to the webhook in flight at once.
    pub calls_max: usize,
    /// The cache's clock (no flag: a test sets its own).
    pub clock: CacheClock,
}

/// The clock of the webhook's cache: `None` for the process's monotonic clock, or a test's
/// (`ManualTicks`), so that no test waits for a TTL. Configurations compare equal whatever
/// their clocks.
#[derive(Clone, Debug, Default)]
pub struct CacheClock(pub Option<Arc<dyn Ticks>>);

impl PartialEq for CacheClock {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for CacheClock {}

/// kube's default `--authorization-webhook-cache-authorized-ttl`.
pub const AUTHORIZED_TTL: Duration = Duration::from_secs(300);
/// kube's default `--authorization-webhook-cache-unauthorized-ttl`.
pub const UNAUTHORIZED_TTL: Duration = Duration::from_secs(30);
/// kube's cache size (`cache.NewLRUExpireCache(8192)` in its webhook authorizer).
pub const CACHE_ENTRIES: usize = 8192;
/// The default `--authorization-webhook-calls-max`.
pub const CALLS_MAX: usize = 64;
/// The longest TTL taken: a day.
const TTL_MAX: Duration = Duration::from_secs(86_400);

/// A TTL flag: a Go duration (`5m`, `30s`, `1h30m`, `0`), 0 to 24h.
fn ttl(
    flag: &'static str,
    value: Option<&str>,
    default: Duration,
) -> Result<Duration, ConfigError> {
    let Some(text) = value else {
        return Ok(default);
    };
    // pflag's words for a value `time.ParseDuration` refuses.
    let seconds = super::go_duration_seconds(text.trim()).map_err(|error| {
        ConfigError::flag(
            flag,
            format!("invalid argument {text:?} for \"{flag}\" flag: {error}"),
        )
    })?;
    if !(0.0..=TTL_MAX.as_secs_f64()).contains(&seconds) {
        return Err(ConfigError::flag(
            flag,
            format!("{flag} {text}: must be between 0s and 24h0m0s"),
        ));
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// The webhook's configuration from `args`, given the validated `--authorization-mode`
/// list; `None` when `Webhook` is not one of the modes.
///
/// # Errors
/// kube-apiserver's words: `authorization-mode Webhook's authorization config file not
/// passed`, `cannot specify --authorization-webhook-config-file without mode Webhook`,
/// `unsupported webhook authorizer version "v2", supported versions are "v1", "v1beta1"`;
/// pflag's for a duration that does not parse; a bound's range.
pub fn from_args(
    args: &ServeArgs,
    modes: &[AuthorizationMode],
) -> Result<Option<AuthzWebhookConfig>, ConfigError> {
    let webhook = modes.contains(&AuthorizationMode::Webhook);
    let file = args
        .authorization_webhook_config_file
        .as_ref()
        .filter(|f| !f.as_os_str().is_empty());
    let Some(file) = file else {
        if webhook {
            return Err(ConfigError::flag(
                "--authorization-mode",
                "authorization-mode Webhook's authorization config file not passed",
            ));
        }
        return Ok(None);
    };
    if !webhook {
        return Err(ConfigError::flag(
            "--authorization-webhook-config-file",
            "cannot specify --authorization-webhook-config-file without mode Webhook",
        ));
    }
    let version = match args.authorization_webhook_version.as_deref() {
        None | Some("v1beta1") => SarVersion::V1beta1,
        Some("v1") => SarVersion::V1,
        Some(other) => {
            return Err(ConfigError::flag(
                "--authorization-webhook-version",
                format!(
                    "unsupported webhook authorizer version {other:?}, supported versions are \"v1\", \"v1beta1\""
                ),
            ));
        }
    };
    Ok(Some(AuthzWebhookConfig {
        config_file: file.clone(),
        version,
        authorized_ttl: ttl(
            "--authorization-webhook-cache-authorized-ttl",
            args.authorization_webhook_cache_authorized_ttl.as_deref(),
            AUTHORIZED_TTL,
        )?,
        unauthorized_ttl: ttl(
            "--authorization-webhook-cache-unauthorized-ttl",
            args.authorization_webhook_cache_unauthorized_ttl.as_deref(),
            UNAUTHORIZED_TTL,
        )?,
        cache_entries: bounded(
            "--authorization-webhook-cache-entries",
            args.authorization_webhook_cache_entries,
            CACHE_ENTRIES,
            1..=1_000_000,
            "decisions",
        )?,
        calls_max: bounded(
            "--authorization-webhook-calls-max",
            args.authorization_webhook_calls_max,
            CALLS_MAX,
            1..=10_000,
            "calls",
        )?,
        clock: CacheClock::default(),
    }))
}

/// One authorizer of `--authorization-mode` (kube-apiserver's modes this server has).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuthorizationMode {
    /// Everything is allowed.
    AlwaysAllow,
    /// Nothing is allowed (no opinion, reason `Everything is forbidden.`).
    AlwaysDeny,
    /// `--authorization-policy-file`.
    Abac,
    /// The cached RBAC objects ([`rbac`]).
    Rbac,
    /// `--authorization-webhook-config-file` ([`authz_webhook`]).
    Webhook,
}

impl AuthorizationMode {
    /// The modes as kube-apiserver spells them.
    pub const NAMES: [&'static str; 5] = ["AlwaysAllow", "AlwaysDeny", "ABAC", "RBAC", "Webhook"];

    /// Today's behaviour without `--authorization-mode`: `ABAC` with a policy file, else
    /// `AlwaysAllow`.
    #[must_use]
    pub fn defaults(policy_file: bool) -> Vec<AuthorizationMode> {
        vec![if policy_file {
            AuthorizationMode::Abac
        } else {
            AuthorizationMode::AlwaysAllow
        }]
    }

    /// Parses the comma-separated `--authorization-mode` with kube-apiserver's checks
    /// (`BuiltInAuthorizationOptions.Validate`), given whether a policy file is set.
    ///
    /// # Errors
    /// kube-apiserver's message (an unknown mode, a mode given twice, `ABAC` without a policy
    /// file, a policy file without `ABAC`), or that `Node` is not supported here (`Webhook`'s
    /// file is checked by `config::authz`).
    pub fn parse_list(
        list: &[String],
        policy_file: bool,
    ) -> Result<Vec<AuthorizationMode>, String> {
        let mut modes = Vec::new();
        for name in list.iter().map(|m| m.trim()) {
            let mode = match name {
                "AlwaysAllow" => AuthorizationMode::AlwaysAllow,
                "AlwaysDeny" => AuthorizationMode::AlwaysDeny,
                "ABAC" => AuthorizationMode::Abac,
                "RBAC" => AuthorizationMode::Rbac,
                "Webhook" => AuthorizationMode::Webhook,
                "Node" => {
                    return Err(format!(
                        "authorization-mode {name:?} is not supported by watchkeeper (supported: {})",
                        Self::NAMES.join(", ")
                    ));
                }
                _ => return Err(format!("authorization-mode {name:?} is not a valid mode")),
            };
            if mode == AuthorizationMode::Abac && !policy_file {
                return Err(
                    "authorization-mode ABAC's authorization policy file not passed".to_owned(),
                );
            }
            if modes.contains(&mode) {
                let quoted: Vec<String> = list
                    .iter()
                    .map(|m| watchkeeper_core::gotext::go_quote(m))
                    .collect();
                return Err(format!(
                    "authorization-mode [{}] has mode specified more than once",
                    quoted.join(" ")
                ));
            }
            modes.push(mode);
        }
        if modes.is_empty() {
            return Err("at least one authorization-mode must be passed".to_owned());
        }
        if policy_file && !modes.contains(&AuthorizationMode::Abac) {
            return Err("cannot specify --authorization-policy-file without mode ABAC".to_owned());
        }
        Ok(modes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(
        args: ServeArgs,
        modes: &[AuthorizationMode],
    ) -> Result<Option<AuthzWebhookConfig>, String> {
        from_args(&args, modes).map_err(|e| e.to_string())
    }

    #[test]
    fn kube_s_checks_and_defaults() {
        use AuthorizationMode::{Rbac, Webhook};
        let with_file = || ServeArgs {
            authorization_webhook_config_file: Some(PathBuf::from("/k")),
            ..ServeArgs::default()
        };
        assert_eq!(parse(ServeArgs::default(), &[Rbac]), Ok(None));
        assert!(
            parse(ServeArgs::default(), &[Webhook])
                .unwrap_err()
                .contains("authorization-mode Webhook's authorization config file not passed")
        );
        assert!(
            parse(with_file(), &[Rbac]).unwrap_err().contains(
                "cannot specify --authorization-webhook-config-file without mode Webhook"
            )
        );
        let config = parse(with_file(), &[Webhook, Rbac]).unwrap().unwrap();
        assert_eq!(
            config,
            AuthzWebhookConfig {
                config_file: PathBuf::from("/k"),
                version: SarVersion::V1beta1,
                authorized_ttl: Duration::from_secs(300),
                unauthorized_ttl: Duration::from_secs(30),
                cache_entries: 8192,
                calls_max: 64,
                clock: CacheClock::default(),
            }
        );
        let error = parse(
            ServeArgs {
                authorization_webhook_version: Some("v2".to_owned()),
                ..with_file()
            },
            &[Webhook],
        )
        .unwrap_err();
        assert!(
            error.contains(
                "unsupported webhook authorizer version \"v2\", supported versions are \"v1\", \"v1beta1\""
            ),
            "{error}"
        );
        let config = parse(
            ServeArgs {
                authorization_webhook_version: Some("v1".to_owned()),
                authorization_webhook_cache_authorized_ttl: Some("1h30m".to_owned()),
                authorization_webhook_cache_unauthorized_ttl: Some("0".to_owned()),
                ..with_file()
            },
            &[Webhook],
        )
        .unwrap()
        .unwrap();
        assert_eq!(config.version, SarVersion::V1);
        assert_eq!(config.authorized_ttl, Duration::from_secs(5400));
        assert_eq!(config.unauthorized_ttl, Duration::ZERO);
        let error = parse(
            ServeArgs {
                authorization_webhook_cache_authorized_ttl: Some("5".to_owned()),
                ..with_file()
            },
            &[Webhook],
        )
        .unwrap_err();
        assert!(error.contains("missing unit in duration"), "{error}");
        let error = parse(
            ServeArgs {
                authorization_webhook_cache_unauthorized_ttl: Some("-1s".to_owned()),
                ..with_file()
            },
            &[Webhook],
        )
        .unwrap_err();
        assert!(error.contains("must be between 0s and 24h0m0s"), "{error}");
        assert!(
            parse(
                ServeArgs {
                    authorization_webhook_calls_max: Some(0),
                    ..with_file()
                },
                &[Webhook],
            )
            .is_err()
        );
    }
}

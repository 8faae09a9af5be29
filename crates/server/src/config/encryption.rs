//! `--encryption-provider-config`, `--encryption-provider-config-automatic-reload` and
//! `--encryption-provider-config-reload-interval-ms`: the encryption at rest configuration
//! (`crate::source::encryption`) and whether and how often it is reloaded
//! (`crate::source::encryption_reload`).
//!
//! ## Guarantees
//! - The file is read and validated at start either way; a refused file stops the server.
//! - Automatic reload without a file is kube's error (`--encryption-provider-config-automatic-reload
//!   must be set with --encryption-provider-config`); an interval outside 100 to 3600000
//!   milliseconds is refused.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::ConfigError;
use crate::source::encryption::Encryption;
use crate::source::encryption_reload::Reloading;

/// kube's `EncryptionConfigFileChangePollDuration`, one minute.
const RELOAD_INTERVAL_MS: u64 = 60_000;

/// The configuration in use, and its reload with its interval.
pub(super) type Configured = (Option<Arc<Encryption>>, Option<(Arc<Reloading>, Duration)>);

/// The flags' configuration for keys under `prefix`.
///
/// # Errors
/// The refused flag, with why.
pub(super) fn from_flags(
    (file, reload, interval_ms): (Option<&Path>, Option<bool>, Option<u64>),
    prefix: &str,
) -> Result<Configured, ConfigError> {
    let reload = reload.unwrap_or(false);
    let interval_ms = interval_ms.unwrap_or(RELOAD_INTERVAL_MS);
    if !(100..=3_600_000).contains(&interval_ms) {
        return Err(ConfigError::flag(
            "--encryption-provider-config-reload-interval-ms",
            format!(
                "--encryption-provider-config-reload-interval-ms {interval_ms}: must be between 100 and 3600000 milliseconds"
            ),
        ));
    }
    let refused = |message: String| {
        ConfigError::flag(
            "--encryption-provider-config",
            format!("--encryption-provider-config: {message}"),
        )
    };
    match (file, reload) {
        (None, false) => Ok((None, None)),
        (None, true) => Err(ConfigError::combination(
            &[
                "--encryption-provider-config-automatic-reload",
                "--encryption-provider-config",
            ],
            "--encryption-provider-config-automatic-reload must be set with --encryption-provider-config",
        )),
        (Some(file), false) => Ok((
            Some(Arc::new(Encryption::load(file, prefix).map_err(refused)?)),
            None,
        )),
        (Some(file), true) => {
            let reloading = Arc::new(Reloading::load(file, prefix).map_err(refused)?);
            let interval = Duration::from_millis(interval_ms);
            Ok((
                Some(Arc::clone(reloading.encryption())),
                Some((reloading, interval)),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reload_needs_a_file_and_a_sane_interval() {
        assert_eq!(
            from_flags((None, Some(true), None), "/registry")
                .unwrap_err()
                .to_string(),
            "--encryption-provider-config-automatic-reload must be set with --encryption-provider-config"
        );
        assert!(
            from_flags((None, None, Some(99)), "/registry")
                .unwrap_err()
                .to_string()
                .ends_with("must be between 100 and 3600000 milliseconds")
        );
        let (encryption, reload) = from_flags((None, None, None), "/registry").unwrap();
        assert!(encryption.is_none() && reload.is_none());
    }
}

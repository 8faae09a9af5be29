//! The limits part of the configuration (`--max-*`, `--request-read-timeout-seconds`,
//! `--watch-release-grace-seconds`); the limits themselves are in the `limits` module.

use std::time::Duration;

use super::{ConfigError, ServeArgs};

/// Largest request body accepted by default (3 MiB, as kube-apiserver); see
/// `--max-request-body-bytes`.
pub const REQUEST_BODY_MAX: usize = 3 * 1024 * 1024;

/// The limits part of the configuration.
#[derive(Clone, Debug)]
pub struct LimitsConfig {
    /// `--max-request-body-bytes` [3 MiB].
    pub request_body_bytes_max: usize,
    /// `--max-header-bytes` [1 MiB]: request line plus headers.
    pub header_bytes_max: usize,
    /// `--request-read-timeout-seconds` [60]: headers (HTTP/1.1) and body must arrive within.
    pub request_read_timeout: Duration,
    /// `--max-requests-inflight` [400], 0 = unlimited.
    pub requests_inflight_max: usize,
    /// `--max-mutating-requests-inflight` [200], 0 = unlimited.
    pub mutating_requests_inflight_max: usize,
    /// `--max-watches` [10000], 0 = unlimited.
    pub watches_max: usize,
    /// `--max-watches-per-user` [1000], 0 = unlimited.
    pub watches_per_user_max: usize,
    /// `--max-watches-per-connection` [250], 0 = unlimited.
    pub watches_per_connection_max: usize,
    /// `--watch-release-grace-seconds` [5]: a watch response not finished this long after its
    /// deadline closes its connection (the client is not reading).
    pub watch_release_grace: Duration,
}

impl Default for LimitsConfig {
    fn default() -> LimitsConfig {
        LimitsConfig {
            request_body_bytes_max: REQUEST_BODY_MAX,
            header_bytes_max: 1024 * 1024,
            request_read_timeout: Duration::from_secs(60),
            requests_inflight_max: 400,
            mutating_requests_inflight_max: 200,
            watches_max: 10_000,
            watches_per_user_max: 1000,
            watches_per_connection_max: 250,
            watch_release_grace: Duration::from_secs(5),
        }
    }
}

impl LimitsConfig {
    /// Validates the limit flags.
    ///
    /// # Errors
    /// A message naming the flag.
    pub fn from_args(args: &ServeArgs) -> Result<LimitsConfig, ConfigError> {
        let d = LimitsConfig::default();
        let config = LimitsConfig {
            request_body_bytes_max: args
                .max_request_body_bytes
                .unwrap_or(d.request_body_bytes_max),
            header_bytes_max: args.max_header_bytes.unwrap_or(d.header_bytes_max),
            request_read_timeout: args
                .request_read_timeout_seconds
                .map_or(d.request_read_timeout, Duration::from_secs),
            requests_inflight_max: args
                .max_requests_inflight
                .unwrap_or(d.requests_inflight_max),
            mutating_requests_inflight_max: args
                .max_mutating_requests_inflight
                .unwrap_or(d.mutating_requests_inflight_max),
            watches_max: args.max_watches.unwrap_or(d.watches_max),
            watches_per_user_max: args.max_watches_per_user.unwrap_or(d.watches_per_user_max),
            watches_per_connection_max: args
                .max_watches_per_connection
                .unwrap_or(d.watches_per_connection_max),
            watch_release_grace: args
                .watch_release_grace_seconds
                .map_or(d.watch_release_grace, Duration::from_secs),
        };
        if config.request_body_bytes_max < 1024 {
            return Err(ConfigError::flag(
                "--max-request-body-bytes",
                "--max-request-body-bytes must be at least 1024",
            ));
        }
        if !(4096..=16 * 1024 * 1024).contains(&config.header_bytes_max) {
            return Err(ConfigError::flag(
                "--max-header-bytes",
                "--max-header-bytes must be between 4096 and 16777216 (16 MiB)",
            ));
        }
        if config.request_read_timeout.is_zero() {
            return Err(ConfigError::flag(
                "--request-read-timeout-seconds",
                "--request-read-timeout-seconds must be positive",
            ));
        }
        if config.watch_release_grace.is_zero() {
            return Err(ConfigError::flag(
                "--watch-release-grace-seconds",
                "--watch-release-grace-seconds must be positive",
            ));
        }
        if config.watches_per_connection_max > 100_000 {
            return Err(ConfigError::flag(
                "--max-watches-per-connection",
                "--max-watches-per-connection must be at most 100000",
            ));
        }
        Ok(config)
    }

    /// hyper's HTTP/1.1 buffer bound: the header limit plus slack for the 431 Status path.
    #[must_use]
    pub fn max_buf_size(&self) -> usize {
        self.header_bytes_max + 16 * 1024
    }

    /// HTTP/2 concurrent streams: room for the watches plus ordinary requests.
    #[must_use]
    pub fn max_concurrent_streams(&self) -> u32 {
        let watches = if self.watches_per_connection_max == 0 {
            1000
        } else {
            self.watches_per_connection_max
        };
        u32::try_from(watches + 100).unwrap_or(u32::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_limits_are_named() {
        let err = LimitsConfig::from_args(&ServeArgs {
            max_header_bytes: Some(10),
            ..ServeArgs::default()
        })
        .unwrap_err();
        assert!(err.to_string().contains("--max-header-bytes"), "{err}");
        let err = LimitsConfig::from_args(&ServeArgs {
            request_read_timeout_seconds: Some(0),
            ..ServeArgs::default()
        })
        .unwrap_err();
        assert!(
            err.to_string().contains("--request-read-timeout-seconds"),
            "{err}"
        );
    }
}

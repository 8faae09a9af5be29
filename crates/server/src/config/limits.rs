//! The limits part of the configuration (`--max-*`, `--request-timeout`,
//! `--request-read-timeout-seconds`, `--watch-release-grace-seconds`); the limits themselves
//! are in the `limits` module.

use std::time::Duration;

use super::{ConfigError, ServeArgs};

/// Largest request body accepted by default (3 MiB, as kube-apiserver); see
/// `--max-request-body-bytes`.
pub const REQUEST_BODY_MAX: usize = 3 * 1024 * 1024;

/// Request bodies of at least this many bytes are handled off the runtime workers by default
/// (`--heavy-request-body-bytes`; chosen by measurement, see `offload`).
const HEAVY_REQUEST_BODY_BYTES: usize = 64 * 1024;

/// The most heavy requests handled at once (`--max-heavy-requests`): tokio's blocking pool
/// has 512 threads, shared with the LIST selections and the embedded store's committer.
pub(super) const HEAVY_REQUESTS_MAX: usize = 512;

/// After heavy requests, freed memory is given back to the system at most this often by
/// default (`--memory-release-interval-ms`; chosen by measurement, see `memory_release`).
const MEMORY_RELEASE_INTERVAL: Duration = Duration::from_secs(1);

/// The query bytes of the server's open watches by default (`--max-watch-query-bytes`):
/// 10,000 watches (`--max-watches`) of queries of a few hundred bytes use a twentieth of it.
const WATCH_QUERY_BYTES_MAX: usize = 64 * 1024 * 1024;

/// The query bytes of one user's open watches by default
/// (`--max-watch-query-bytes-per-user`): 64 watches of the longest URL the server reads, 1000
/// watches (`--max-watches-per-user`) of 4 KiB queries.
const WATCH_QUERY_BYTES_PER_USER_MAX: usize = 4 * 1024 * 1024;

/// The smallest positive `--max-watch-query-bytes(-per-user)`: the longest URL the server
/// reads (the `http` crate's 65534 bytes) fits.
const WATCH_QUERY_BYTES_MIN: usize = 65536;

/// The largest `--max-invalid-causes`.
const INVALID_CAUSES_MAX_LIMIT: usize = 1_000_000;

/// The limits part of the configuration.
#[derive(Clone, Debug)]
pub struct LimitsConfig {
    /// `--max-request-body-bytes` [3 MiB].
    pub request_body_bytes_max: usize,
    /// `--max-header-bytes` [1 MiB]: request line plus headers.
    pub header_bytes_max: usize,
    /// `--request-read-timeout-seconds` [60]: the body must arrive within (408), inside the
    /// request's deadline.
    pub request_read_timeout: Duration,
    /// `--request-timeout` [60 s, kube-apiserver's `--request-timeout`]: a request that is not
    /// long-running must be answered, to its last byte, within this of its arrival (504
    /// Timeout before the answer began; after, its HTTP/2 stream is reset or its HTTP/1.1
    /// connection closed). Its body's read (`--request-read-timeout-seconds`) is inside it;
    /// `--write-timeout-ms` is the other bound of an answer: no progress for that long, for
    /// every answer, watches included.
    pub request_timeout: Duration,
    /// `--request-header-timeout-ms` [32000, kube-apiserver's `ReadHeaderTimeout`]: the request
    /// line and headers must arrive within, from accept or from the request's first byte.
    pub request_header_timeout: Duration,
    /// `--idle-timeout-ms` [90000, kube-apiserver's `IdleTimeout` for HTTP/1.1 and HTTP/2]: a
    /// connection with nothing in flight is closed after.
    pub idle_timeout: Duration,
    /// `--http2-keepalive-interval-ms` [30000; zero = none]: HTTP/2 pings this often.
    pub http2_keepalive_interval: Duration,
    /// `--http2-keepalive-timeout-ms` [20000]: an unanswered ping closes the connection.
    pub http2_keepalive_timeout: Duration,
    /// `--write-timeout-ms` [60000]: a response write without progress this long closes the
    /// connection (its client stopped reading), freeing what it holds.
    pub write_timeout: Duration,
    /// `--http2-max-send-buffer-bytes` [409600, hyper's default]: response bytes buffered per
    /// HTTP/2 stream beyond the client's flow-control window.
    pub http2_max_send_buffer_bytes: usize,
    /// `--http2-initial-stream-window-bytes` [1048576, hyper's default]: request body bytes a
    /// client may send on one HTTP/2 stream before the server reads them.
    pub http2_initial_stream_window_bytes: u32,
    /// `--http2-initial-connection-window-bytes` [1048576, hyper's default]: the same, summed
    /// over an HTTP/2 connection's streams.
    pub http2_initial_connection_window_bytes: u32,
    /// `--socket-send-buffer-bytes` [0: the kernel's default and autotuning]: SO_SNDBUF of
    /// every connection (4096 to 16777216; Linux doubles it for its bookkeeping and caps it at
    /// `net.core.wmem_max`). What the kernel holds for a client that does not read is then
    /// bounded per connection; autotuned, it grows up to `net.ipv4.tcp_wmem`'s maximum (4 MiB
    /// by default) per connection, bounded overall only by the machine-wide `net.ipv4.tcp_mem`.
    pub socket_send_buffer_bytes: usize,
    /// `--max-requests-inflight` [400], 0 = unlimited.
    pub requests_inflight_max: usize,
    /// `--max-mutating-requests-inflight` [200], 0 = unlimited.
    pub mutating_requests_inflight_max: usize,
    /// `--heavy-request-body-bytes` [65536], 0 = never: a request whose body has at least this
    /// many bytes is handled on the blocking pool (see `offload`).
    pub heavy_request_body_bytes: usize,
    /// `--max-heavy-requests` [None: one per CPU, see [`LimitsConfig::heavy_requests`]; 1 to
    /// 512]: heavy requests handled at once; more wait for a slot within their deadline.
    pub heavy_requests_max: Option<usize>,
    /// `--memory-release-interval-ms` [1000, 0 = never, at most 3600000]: after heavy
    /// requests, the memory their transient copies freed is given back to the system
    /// (glibc's `malloc_trim`, see `memory_release`) at most once per this interval.
    pub memory_release_interval: Duration,
    /// `--max-invalid-causes` [1000, 1 to 1000000]: causes a 422 Invalid answer carries
    /// (`watchkeeper_api::error::set_invalid_causes_max`; kube answers every one).
    pub invalid_causes_max: usize,
    /// `--max-requests-inflight-per-user` [100], 0 = unlimited: in-flight requests (both kinds)
    /// of one user; the anonymous user's are counted per client address.
    pub requests_inflight_per_user_max: usize,
    /// `--enable-priority-and-fairness` [true]: API Priority and Fairness replaces the two
    /// in-flight pools; its levels share [`LimitsConfig::server_concurrency_limit`] seats.
    pub priority_and_fairness: bool,
    /// `--apf-borrowing-period-ms` [10000, 1 to 3600000]: how often the priority levels'
    /// current limits are recomputed from their seat demand (kube's fixed 10 s).
    pub apf_borrowing_period: Duration,
    /// `--max-watches` [10000], 0 = unlimited.
    pub watches_max: usize,
    /// `--max-watches-per-user` [1000], 0 = unlimited.
    pub watches_per_user_max: usize,
    /// `--max-watches-per-connection` [250], 0 = unlimited.
    pub watches_per_connection_max: usize,
    /// `--max-watch-query-bytes` [64 MiB], 0 = unlimited, else at least 65536: the query
    /// strings of the server's open watches, added up (a watch holds its parsed selectors for
    /// its life, up to ~18 times their text; see `limits`).
    pub watch_query_bytes_max: usize,
    /// `--max-watch-query-bytes-per-user` [4 MiB], 0 = unlimited, else at least 65536: the
    /// same for one user's open watches (the anonymous user's per client address).
    pub watch_query_bytes_per_user_max: usize,
    /// `--max-connections` [None: derived from the descriptor limit when serving, see
    /// `limits::connections::derived_max`], 0 = unlimited.
    pub connections_max: Option<usize>,
    /// `--watch-release-grace-seconds` [5]: a watch response not finished this long after its
    /// deadline closes its connection (the client is not reading).
    pub watch_release_grace: Duration,
    /// `--allowed-hosts` [none]: Host names a plain-HTTP loopback listener answers besides the
    /// loopback ones (lowercase, without port).
    pub allowed_hosts: Vec<String>,
}

impl Default for LimitsConfig {
    fn default() -> LimitsConfig {
        LimitsConfig {
            request_body_bytes_max: REQUEST_BODY_MAX,
            header_bytes_max: 1024 * 1024,
            request_read_timeout: Duration::from_secs(60),
            request_timeout: Duration::from_secs(60),
            request_header_timeout: Duration::from_secs(32),
            idle_timeout: Duration::from_secs(90),
            http2_keepalive_interval: Duration::from_secs(30),
            http2_keepalive_timeout: Duration::from_secs(20),
            write_timeout: Duration::from_secs(60),
            http2_max_send_buffer_bytes: 400 * 1024,
            http2_initial_stream_window_bytes: 1024 * 1024,
            http2_initial_connection_window_bytes: 1024 * 1024,
            socket_send_buffer_bytes: 0,
            requests_inflight_max: 400,
            mutating_requests_inflight_max: 200,
            heavy_request_body_bytes: HEAVY_REQUEST_BODY_BYTES,
            heavy_requests_max: None,
            memory_release_interval: MEMORY_RELEASE_INTERVAL,
            invalid_causes_max: watchkeeper_api::error::INVALID_CAUSES_MAX,
            requests_inflight_per_user_max: 100,
            priority_and_fairness: true,
            apf_borrowing_period: Duration::from_secs(10),
            watches_max: 10_000,
            watches_per_user_max: 1000,
            watches_per_connection_max: 250,
            watch_query_bytes_max: WATCH_QUERY_BYTES_MAX,
            watch_query_bytes_per_user_max: WATCH_QUERY_BYTES_PER_USER_MAX,
            connections_max: None,
            watch_release_grace: Duration::from_secs(5),
            allowed_hosts: Vec::new(),
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
            request_timeout: match &args.request_timeout {
                Some(text) => parse_go_duration(text).ok_or_else(|| {
                    ConfigError::flag(
                        "--request-timeout",
                        format!(
                            "--request-timeout {text:?}: must be a positive duration such as 60s, 1m0s or 500ms"
                        ),
                    )
                })?,
                None => d.request_timeout,
            },
            request_header_timeout: args
                .request_header_timeout_ms
                .map_or(d.request_header_timeout, Duration::from_millis),
            idle_timeout: args
                .idle_timeout_ms
                .map_or(d.idle_timeout, Duration::from_millis),
            http2_keepalive_interval: args
                .http2_keepalive_interval_ms
                .map_or(d.http2_keepalive_interval, Duration::from_millis),
            http2_keepalive_timeout: args
                .http2_keepalive_timeout_ms
                .map_or(d.http2_keepalive_timeout, Duration::from_millis),
            write_timeout: args
                .write_timeout_ms
                .map_or(d.write_timeout, Duration::from_millis),
            http2_max_send_buffer_bytes: args
                .http2_max_send_buffer_bytes
                .unwrap_or(d.http2_max_send_buffer_bytes),
            http2_initial_stream_window_bytes: args
                .http2_initial_stream_window_bytes
                .unwrap_or(d.http2_initial_stream_window_bytes),
            http2_initial_connection_window_bytes: args
                .http2_initial_connection_window_bytes
                .unwrap_or(d.http2_initial_connection_window_bytes),
            socket_send_buffer_bytes: args
                .socket_send_buffer_bytes
                .unwrap_or(d.socket_send_buffer_bytes),
            requests_inflight_max: args
                .max_requests_inflight
                .unwrap_or(d.requests_inflight_max),
            mutating_requests_inflight_max: args
                .max_mutating_requests_inflight
                .unwrap_or(d.mutating_requests_inflight_max),
            heavy_request_body_bytes: args
                .heavy_request_body_bytes
                .unwrap_or(d.heavy_request_body_bytes),
            heavy_requests_max: args.max_heavy_requests.or(d.heavy_requests_max),
            memory_release_interval: args
                .memory_release_interval_ms
                .map_or(d.memory_release_interval, Duration::from_millis),
            invalid_causes_max: args.max_invalid_causes.unwrap_or(d.invalid_causes_max),
            requests_inflight_per_user_max: args
                .max_requests_inflight_per_user
                .unwrap_or(d.requests_inflight_per_user_max),
            priority_and_fairness: args
                .enable_priority_and_fairness
                .unwrap_or(d.priority_and_fairness),
            apf_borrowing_period: args
                .apf_borrowing_period_ms
                .map_or(d.apf_borrowing_period, Duration::from_millis),
            watches_max: args.max_watches.unwrap_or(d.watches_max),
            watches_per_user_max: args.max_watches_per_user.unwrap_or(d.watches_per_user_max),
            watches_per_connection_max: args
                .max_watches_per_connection
                .unwrap_or(d.watches_per_connection_max),
            watch_query_bytes_max: args
                .max_watch_query_bytes
                .unwrap_or(d.watch_query_bytes_max),
            watch_query_bytes_per_user_max: args
                .max_watch_query_bytes_per_user
                .unwrap_or(d.watch_query_bytes_per_user_max),
            connections_max: args.max_connections.or(d.connections_max),
            watch_release_grace: args
                .watch_release_grace_seconds
                .map_or(d.watch_release_grace, Duration::from_secs),
            allowed_hosts: args
                .allowed_hosts
                .iter()
                .flatten()
                .map(|host| host.trim().to_ascii_lowercase())
                .collect(),
        };
        if let Some(bad) = config.allowed_hosts.iter().find(|host| {
            let bare = host.trim_start_matches('[').trim_end_matches(']');
            let name = bare
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
            bare.is_empty() || !(name || bare.parse::<std::net::Ipv6Addr>().is_ok())
        }) {
            return Err(ConfigError::flag(
                "--allowed-hosts",
                format!(
                    "--allowed-hosts {bad:?}: each entry must be a host name or address without port, scheme or path"
                ),
            ));
        }
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
        for (flag, value, max) in [
            (
                "--request-header-timeout-ms",
                config.request_header_timeout,
                600_000,
            ),
            ("--idle-timeout-ms", config.idle_timeout, 3_600_000),
            (
                "--http2-keepalive-timeout-ms",
                config.http2_keepalive_timeout,
                600_000,
            ),
            ("--write-timeout-ms", config.write_timeout, 3_600_000),
        ] {
            if value.is_zero() || value > Duration::from_millis(max) {
                return Err(ConfigError::flag(
                    flag,
                    format!(
                        "{flag} {}: must be between 1 and {max} milliseconds",
                        value.as_millis()
                    ),
                ));
            }
        }
        if config.http2_keepalive_interval > Duration::from_secs(3600) {
            return Err(ConfigError::flag(
                "--http2-keepalive-interval-ms",
                format!(
                    "--http2-keepalive-interval-ms {}: must be at most 3600000 milliseconds (0 = no pings)",
                    config.http2_keepalive_interval.as_millis()
                ),
            ));
        }
        if !(16 * 1024..=16 * 1024 * 1024).contains(&config.http2_max_send_buffer_bytes) {
            return Err(ConfigError::flag(
                "--http2-max-send-buffer-bytes",
                format!(
                    "--http2-max-send-buffer-bytes {}: must be between 16384 and 16777216 (16 MiB)",
                    config.http2_max_send_buffer_bytes
                ),
            ));
        }
        // HTTP/2 (RFC 9113 6.9): windows start at 65535 and may not exceed 2^31 - 1.
        for (flag, value) in [
            (
                "--http2-initial-stream-window-bytes",
                config.http2_initial_stream_window_bytes,
            ),
            (
                "--http2-initial-connection-window-bytes",
                config.http2_initial_connection_window_bytes,
            ),
        ] {
            if !(65_535..=2_147_483_647).contains(&value) {
                return Err(ConfigError::flag(
                    flag,
                    format!("{flag} {value}: must be between 65535 and 2147483647"),
                ));
            }
        }
        if config.socket_send_buffer_bytes != 0
            && !(4096..=16 * 1024 * 1024).contains(&config.socket_send_buffer_bytes)
        {
            return Err(ConfigError::flag(
                "--socket-send-buffer-bytes",
                format!(
                    "--socket-send-buffer-bytes {}: must be 0 (the kernel's default) or between 4096 and 16777216 (16 MiB)",
                    config.socket_send_buffer_bytes
                ),
            ));
        }
        if config.heavy_request_body_bytes != 0 && config.heavy_request_body_bytes < 1024 {
            return Err(ConfigError::flag(
                "--heavy-request-body-bytes",
                format!(
                    "--heavy-request-body-bytes {}: must be 0 (never) or at least 1024",
                    config.heavy_request_body_bytes
                ),
            ));
        }
        if let Some(max) = config.heavy_requests_max
            && !(1..=HEAVY_REQUESTS_MAX).contains(&max)
        {
            return Err(ConfigError::flag(
                "--max-heavy-requests",
                format!("--max-heavy-requests {max}: must be between 1 and {HEAVY_REQUESTS_MAX}"),
            ));
        }
        if config.memory_release_interval > Duration::from_secs(3600) {
            return Err(ConfigError::flag(
                "--memory-release-interval-ms",
                format!(
                    "--memory-release-interval-ms {}: must be 0 (never) or at most 3600000",
                    config.memory_release_interval.as_millis()
                ),
            ));
        }
        if !(1..=INVALID_CAUSES_MAX_LIMIT).contains(&config.invalid_causes_max) {
            return Err(ConfigError::flag(
                "--max-invalid-causes",
                format!(
                    "--max-invalid-causes {}: must be between 1 and {INVALID_CAUSES_MAX_LIMIT}",
                    config.invalid_causes_max
                ),
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
        for (flag, value) in [
            ("--max-watch-query-bytes", config.watch_query_bytes_max),
            (
                "--max-watch-query-bytes-per-user",
                config.watch_query_bytes_per_user_max,
            ),
        ] {
            // A watch of the longest URL the server reads always fits.
            if (1..WATCH_QUERY_BYTES_MIN).contains(&value) {
                return Err(ConfigError::flag(
                    flag,
                    format!(
                        "{flag} {value}: must be 0 (unlimited) or at least {WATCH_QUERY_BYTES_MIN} bytes"
                    ),
                ));
            }
        }
        let period = config.apf_borrowing_period;
        if period.is_zero() || period > Duration::from_secs(3600) {
            return Err(ConfigError::flag(
                "--apf-borrowing-period-ms",
                "--apf-borrowing-period-ms must be between 1 and 3600000",
            ));
        }
        if config.priority_and_fairness && config.server_concurrency_limit() == 0 {
            // kube-apiserver's words (`RecommendedOptions.ApplyTo`).
            return Err(ConfigError::flag(
                "--enable-priority-and-fairness",
                format!(
                    "invalid configuration: MaxRequestsInFlight={} and MaxMutatingRequestsInFlight={}; they must add up to something positive",
                    config.requests_inflight_max, config.mutating_requests_inflight_max
                ),
            ));
        }
        Ok(config)
    }

    /// The seats API Priority and Fairness's levels share: `--max-requests-inflight` +
    /// `--max-mutating-requests-inflight` (kube's server concurrency limit).
    #[must_use]
    pub fn server_concurrency_limit(&self) -> usize {
        self.requests_inflight_max
            .saturating_add(self.mutating_requests_inflight_max)
    }

    /// Whether requests of one user are counted ([`LimitsConfig::requests_inflight_per_user_max`]).
    #[must_use]
    pub fn per_user_inflight(&self) -> bool {
        self.requests_inflight_per_user_max > 0
    }

    /// Heavy requests handled at once: `--max-heavy-requests`, or one per CPU.
    #[must_use]
    pub fn heavy_requests(&self) -> usize {
        self.heavy_requests_max.unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map_or(1, std::num::NonZeroUsize::get)
                .min(HEAVY_REQUESTS_MAX)
        })
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

/// A Go duration as kube-apiserver's flags take it (`time.ParseDuration`): one or more
/// decimal numbers, each with a unit (`h`, `m`, `s`, `ms`, `us`, `µs`, `ns`), e.g. `1m0s`,
/// `1.5s`, `500ms`; `None` when it is not one, or not positive, or beyond a day.
#[must_use]
pub(super) fn parse_go_duration(text: &str) -> Option<Duration> {
    go_duration_seconds(text.trim())
        .ok()
        .filter(|total| *total > 0.0 && *total <= 86_400.0)
        .map(Duration::from_secs_f64)
}

/// Go's `time.ParseDuration` of `text`, in seconds (negative allowed): an optional sign, then
/// `0` alone or one or more decimal numbers (`1`, `1.5`, `.5`, `5.`), each with a unit (`h`,
/// `m`, `s`, `ms`, `us`, `µs`, `ns`). Counted in whole nanoseconds as Go counts them, so a
/// duration past Go's range (`2562047h47m16.854775808s`, `99999999999999999999h`, a number
/// with more digits than 2^63) is refused as Go refuses it, never rounded or saturated.
///
/// # Errors
/// Go's text: `time: invalid duration "x"`, `time: missing unit in duration "5"`,
/// `time: unknown unit "d" in duration "1d"`.
pub fn go_duration_seconds(text: &str) -> Result<f64, String> {
    const LIMIT: u64 = 1 << 63;
    let quoted = watchkeeper_api::field::go_quote(text);
    let invalid = || format!("time: invalid duration {quoted}");
    let (negative, mut rest) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if rest == "0" {
        return Ok(0.0);
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut total: u64 = 0;
    while !rest.is_empty() {
        if !rest.starts_with(|c: char| c == '.' || c.is_ascii_digit()) {
            return Err(invalid());
        }
        // Go's `leadingInt`: digits, refused past 2^63.
        let whole_len = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let mut whole: u64 = 0;
        for digit in rest[..whole_len].bytes() {
            whole = whole
                .checked_mul(10)
                .and_then(|w| w.checked_add(u64::from(digit - b'0')))
                .filter(|w| *w <= LIMIT)
                .ok_or_else(invalid)?;
        }
        rest = &rest[whole_len..];
        // Go's `leadingFraction`: digits past 2^63 stop adding precision.
        let (mut fraction, mut scale, mut fraction_len) = (0u64, 1f64, None);
        if let Some(after) = rest.strip_prefix('.') {
            let len = after
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(after.len());
            let mut full = false;
            for digit in after[..len].bytes() {
                match fraction
                    .checked_mul(10)
                    .and_then(|f| f.checked_add(u64::from(digit - b'0')))
                    .filter(|f| !full && *f <= LIMIT)
                {
                    Some(f) => {
                        fraction = f;
                        scale *= 10.0;
                    }
                    None => full = true,
                }
            }
            fraction_len = Some(len);
            rest = &after[len..];
        }
        if whole_len == 0 && fraction_len.unwrap_or(0) == 0 {
            return Err(invalid());
        }
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        let nanos: u64 = match unit {
            "" => return Err(format!("time: missing unit in duration {quoted}")),
            "h" => 3_600_000_000_000,
            "m" => 60_000_000_000,
            "s" => 1_000_000_000,
            "ms" => 1_000_000,
            "us" | "µs" | "μs" => 1_000,
            "ns" => 1,
            _ => {
                return Err(format!(
                    "time: unknown unit {} in duration {quoted}",
                    watchkeeper_api::field::go_quote(unit)
                ));
            }
        };
        rest = &rest[unit_len..];
        if whole > LIMIT / nanos {
            return Err(invalid());
        }
        let mut value = whole * nanos;
        if fraction > 0 {
            // As Go: float64 keeps fractions of hours nanosecond-accurate.
            #[allow(
                clippy::cast_precision_loss,
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss
            )]
            let part = (fraction as f64 * (nanos as f64 / scale)) as u64;
            value = value
                .checked_add(part)
                .filter(|v| *v <= LIMIT)
                .ok_or_else(invalid)?;
        }
        total = total
            .checked_add(value)
            .filter(|t| *t <= LIMIT)
            .ok_or_else(invalid)?;
    }
    if !negative && total == LIMIT {
        return Err(invalid());
    }
    let seconds = total as f64 / 1e9;
    Ok(if negative { -seconds } else { seconds })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_parse_as_gos() {
        for (text, seconds) in [
            ("0", 0.0),
            ("-0", 0.0),
            ("5s", 5.0),
            ("+5s", 5.0),
            ("-1.5s", -1.5),
            (".5s", 0.5),
            ("5.s", 5.0),
            ("1h2m", 3720.0),
            ("250ms", 0.25),
        ] {
            assert_eq!(go_duration_seconds(text), Ok(seconds), "{text}");
        }
        for bad in ["", "s", ".s", "abc", "-", "+"] {
            assert_eq!(
                go_duration_seconds(bad),
                Err(format!("time: invalid duration {bad:?}")),
                "{bad}"
            );
        }
        assert_eq!(
            go_duration_seconds("5"),
            Err("time: missing unit in duration \"5\"".to_owned())
        );
        assert_eq!(
            go_duration_seconds("1.2.3s"),
            Err("time: missing unit in duration \"1.2.3s\"".to_owned())
        );
        assert_eq!(
            go_duration_seconds("0x"),
            Err("time: unknown unit \"x\" in duration \"0x\"".to_owned())
        );
        assert_eq!(
            go_duration_seconds("1d"),
            Err("time: unknown unit \"d\" in duration \"1d\"".to_owned())
        );
        assert_eq!(
            go_duration_seconds("5 s"),
            Err("time: unknown unit \" s\" in duration \"5 s\"".to_owned())
        );
    }

    #[test]
    fn go_durations_past_gos_range_are_refused_as_go_refuses_them() {
        // Go's bounds: 2^63 - 1 nanoseconds, and -2^63.
        let most = i64::MAX as f64 / 1e9;
        assert_eq!(go_duration_seconds("2562047h47m16.854775807s"), Ok(most));
        assert_eq!(go_duration_seconds("-2562047h47m16.854775808s"), Ok(-most));
        assert_eq!(go_duration_seconds("9223372036854775807ns"), Ok(most));
        for bad in [
            "2562047h47m16.854775808s",
            "9223372036854775808ns",
            "2562048h",
            "99999999999999999999h",
            "99999999999999999999999999999999ns",
            "-2562047h47m16.854775809s",
            "2562047h2562047h",
        ] {
            assert_eq!(
                go_duration_seconds(bad),
                Err(format!("time: invalid duration {bad:?}")),
                "{bad}"
            );
        }
        // A fraction past 2^63 stops adding precision, as Go's `leadingFraction`.
        assert_eq!(
            go_duration_seconds(&format!("1.{}s", "0".repeat(40))),
            Ok(1.0)
        );
        assert_eq!(
            go_duration_seconds(&format!("0.{}1s", "0".repeat(40))),
            Ok(0.0)
        );
    }

    #[test]
    fn request_timeout_takes_go_durations() {
        for (text, millis) in [
            ("60s", 60_000),
            ("1m0s", 60_000),
            ("1m30s", 90_000),
            ("500ms", 500),
            ("1.5s", 1500),
            ("2h", 7_200_000),
        ] {
            assert_eq!(
                parse_go_duration(text),
                Some(Duration::from_millis(millis)),
                "{text}"
            );
        }
        for bad in ["", "60", "0s", "-1s", "1x", "s", "2d", "25h"] {
            assert_eq!(parse_go_duration(bad), None, "{bad}");
        }
        let err = LimitsConfig::from_args(&ServeArgs {
            request_timeout: Some("60".to_owned()),
            ..ServeArgs::default()
        })
        .unwrap_err();
        assert!(err.to_string().contains("--request-timeout"), "{err}");
    }

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
        for (args, flag) in [
            (
                ServeArgs {
                    idle_timeout_ms: Some(0),
                    ..ServeArgs::default()
                },
                "--idle-timeout-ms",
            ),
            (
                ServeArgs {
                    request_header_timeout_ms: Some(0),
                    ..ServeArgs::default()
                },
                "--request-header-timeout-ms",
            ),
            (
                ServeArgs {
                    write_timeout_ms: Some(0),
                    ..ServeArgs::default()
                },
                "--write-timeout-ms",
            ),
            (
                ServeArgs {
                    heavy_request_body_bytes: Some(1023),
                    ..ServeArgs::default()
                },
                "--heavy-request-body-bytes",
            ),
            (
                ServeArgs {
                    max_heavy_requests: Some(0),
                    ..ServeArgs::default()
                },
                "--max-heavy-requests",
            ),
            (
                ServeArgs {
                    max_heavy_requests: Some(513),
                    ..ServeArgs::default()
                },
                "--max-heavy-requests",
            ),
            (
                ServeArgs {
                    memory_release_interval_ms: Some(3_600_001),
                    ..ServeArgs::default()
                },
                "--memory-release-interval-ms",
            ),
            (
                ServeArgs {
                    max_invalid_causes: Some(0),
                    ..ServeArgs::default()
                },
                "--max-invalid-causes",
            ),
            (
                ServeArgs {
                    allowed_hosts: Some(vec!["dev.example:8080".to_owned()]),
                    ..ServeArgs::default()
                },
                "--allowed-hosts",
            ),
            (
                ServeArgs {
                    allowed_hosts: Some(vec!["http://dev.example".to_owned()]),
                    ..ServeArgs::default()
                },
                "--allowed-hosts",
            ),
        ] {
            let err = LimitsConfig::from_args(&args).unwrap_err();
            assert!(err.to_string().contains(flag), "{err}");
        }
        let config = LimitsConfig::from_args(&ServeArgs {
            allowed_hosts: Some(vec!["Dev.Example".to_owned(), "[fd00::1]".to_owned()]),
            http2_keepalive_interval_ms: Some(0),
            ..ServeArgs::default()
        })
        .unwrap();
        assert_eq!(config.allowed_hosts, ["dev.example", "[fd00::1]"]);
        assert!(config.http2_keepalive_interval.is_zero());
        let config = LimitsConfig::from_args(&ServeArgs {
            heavy_request_body_bytes: Some(0),
            max_heavy_requests: Some(3),
            ..ServeArgs::default()
        })
        .unwrap();
        assert_eq!(config.heavy_request_body_bytes, 0, "0 turns offloading off");
        assert_eq!(config.heavy_requests(), 3);
        assert!(LimitsConfig::default().heavy_requests() >= 1);
    }
}

//! The TLS part of the configuration (`--tls-*`, `--client-ca-file`, `--requestheader-*`,
//! `--insecure-allow-plain-http-on-non-loopback`); the connection layer is in `http`.

use std::path::PathBuf;
use std::time::Duration;

use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;

use super::{ConfigError, ServeArgs};

/// The TLS part of the configuration.
#[derive(Clone, Debug, Default)]
pub struct TlsConfig {
    /// `--tls-cert-file`: PEM certificate chain (leaf first).
    pub cert_file: Option<PathBuf>,
    /// `--tls-private-key-file`: PEM private key (PKCS#8, PKCS#1 or SEC1).
    pub key_file: Option<PathBuf>,
    /// `--client-ca-file`: PEM CA certificates that sign client certificates.
    pub client_ca_file: Option<PathBuf>,
    /// `--root-ca-file`: the PEM CA bundle of every namespace's `kube-root-ca.crt`.
    pub root_ca_file: Option<PathBuf>,
    /// `--insecure-allow-plain-http-on-non-loopback`.
    pub allow_plain_non_loopback: bool,
    /// `--tls-handshake-timeout-seconds` [default: 10].
    pub handshake_timeout: Duration,
    /// The front proxy's request headers (`--requestheader-*`), with their CA.
    pub requestheader: Option<RequestHeaderConfig>,
}

/// What this server trusts for `kube-system/extension-apiserver-authentication`: the
/// certificates of `--client-ca-file` and the front proxy's of `--requestheader-*` (PEM).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuthenticationInfo {
    /// `--client-ca-file`'s certificates.
    pub client_ca: Option<String>,
    /// `--requestheader-client-ca-file`'s certificates and the request-header flags.
    pub request_header: Option<(String, RequestHeaderConfig)>,
}

/// kube-apiserver's request-header authentication (`--requestheader-*`): who a front proxy,
/// authenticated by a client certificate of its own CA, says the caller is.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestHeaderConfig {
    /// `--requestheader-client-ca-file`.
    pub client_ca_file: PathBuf,
    /// `--requestheader-allowed-names` (empty: any the CA verifies).
    pub allowed_names: Vec<String>,
    /// `--requestheader-username-headers`, as given.
    pub username_headers: Vec<String>,
    /// `--requestheader-uid-headers`, as given.
    pub uid_headers: Vec<String>,
    /// `--requestheader-group-headers`, as given.
    pub group_headers: Vec<String>,
    /// `--requestheader-extra-headers-prefix`, as given.
    pub extra_headers_prefix: Vec<String>,
}

impl RequestHeaderConfig {
    /// The request-header flags, `None` without `--requestheader-client-ca-file` (kube builds
    /// no request-header authenticator then).
    ///
    /// # Errors
    /// kube's words for a value of only spaces; the CA without TLS.
    fn from_args(args: &ServeArgs) -> Result<Option<RequestHeaderConfig>, ConfigError> {
        let list = |flag: &'static str, values: &Option<Vec<String>>| {
            let values: Vec<String> = values.iter().flatten().cloned().collect();
            if values.iter().any(|v| !v.is_empty() && v.trim().is_empty()) {
                // kube's `checkForWhiteSpaceOnly`.
                return Err(ConfigError::flag(
                    flag,
                    format!("empty value in {}", flag.trim_start_matches('-')),
                ));
            }
            Ok(values
                .into_iter()
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
                .collect::<Vec<String>>())
        };
        let allowed_names = list(
            "--requestheader-allowed-names",
            &args.requestheader_allowed_names,
        )?;
        let username_headers = list(
            "--requestheader-username-headers",
            &args.requestheader_username_headers,
        )?;
        let uid_headers = list(
            "--requestheader-uid-headers",
            &args.requestheader_uid_headers,
        )?;
        let group_headers = list(
            "--requestheader-group-headers",
            &args.requestheader_group_headers,
        )?;
        let extra_headers_prefix = list(
            "--requestheader-extra-headers-prefix",
            &args.requestheader_extra_headers_prefix,
        )?;
        for (name, values) in [
            ("--requestheader-username-headers", &username_headers),
            ("--requestheader-uid-headers", &uid_headers),
            ("--requestheader-group-headers", &group_headers),
            (
                "--requestheader-extra-headers-prefix",
                &extra_headers_prefix,
            ),
        ] {
            if let Some(bad) = values
                .iter()
                .find(|v| axum::http::HeaderName::from_bytes(v.as_bytes()).is_err())
            {
                return Err(ConfigError::flag(
                    name,
                    format!("{name} {bad:?}: not a header name"),
                ));
            }
        }
        let Some(client_ca_file) = &args.requestheader_client_ca_file else {
            return Ok(None);
        };
        if args.tls_cert_file.is_none() {
            return Err(ConfigError::combination(
                &[
                    "--requestheader-client-ca-file",
                    "--tls-cert-file",
                    "--tls-private-key-file",
                ],
                "--requestheader-client-ca-file needs TLS: give --tls-cert-file and --tls-private-key-file",
            ));
        }
        Ok(Some(RequestHeaderConfig {
            client_ca_file: client_ca_file.clone(),
            allowed_names,
            username_headers,
            uid_headers,
            group_headers,
            extra_headers_prefix,
        }))
    }
}

impl TlsConfig {
    /// Validates the TLS flags.
    ///
    /// # Errors
    /// The flag or flags at fault.
    pub fn from_args(args: &ServeArgs) -> Result<TlsConfig, ConfigError> {
        if args.tls_cert_file.is_some() != args.tls_private_key_file.is_some() {
            return Err(ConfigError::combination(
                &["--tls-cert-file", "--tls-private-key-file"],
                "--tls-cert-file and --tls-private-key-file must be given together",
            ));
        }
        if args.client_ca_file.is_some() && args.tls_cert_file.is_none() {
            return Err(ConfigError::combination(
                &[
                    "--client-ca-file",
                    "--tls-cert-file",
                    "--tls-private-key-file",
                ],
                "--client-ca-file needs TLS: give --tls-cert-file and --tls-private-key-file",
            ));
        }
        let seconds = args.tls_handshake_timeout_seconds.unwrap_or(10);
        if seconds == 0 {
            return Err(ConfigError::flag(
                "--tls-handshake-timeout-seconds",
                "--tls-handshake-timeout-seconds must be positive",
            ));
        }
        let requestheader = RequestHeaderConfig::from_args(args)?;
        Ok(TlsConfig {
            requestheader,
            cert_file: args.tls_cert_file.clone(),
            key_file: args.tls_private_key_file.clone(),
            client_ca_file: args.client_ca_file.clone(),
            root_ca_file: args.root_ca_file.clone(),
            allow_plain_non_loopback: args
                .insecure_allow_plain_http_on_non_loopback
                .unwrap_or(false),
            handshake_timeout: Duration::from_secs(seconds),
        })
    }

    /// Whether the server speaks TLS.
    #[must_use]
    pub fn enabled(&self) -> bool {
        self.cert_file.is_some()
    }
}

/// The certificates of a PEM text, in order (at least one): those of the server's
/// `--tls-cert-file`, `--client-ca-file` and `--root-ca-file`, and of `--etcd-cafile` and
/// `--etcd-certfile`.
///
/// # Errors
/// A block is not valid PEM, or there is no `CERTIFICATE` block.
pub(crate) fn pem_certificates(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    if certs.is_empty() {
        return Err("no PEM CERTIFICATE block found".to_owned());
    }
    Ok(certs)
}

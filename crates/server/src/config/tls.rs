//! The TLS part of the configuration (`--tls-*`, `--client-ca-file`,
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
        Ok(TlsConfig {
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

//! `--etcd-cafile`, `--etcd-certfile` and `--etcd-keyfile`: TLS to etcd, as kube-apiserver's
//! flags of the same names (`k8s.io/apiserver/pkg/server/options/etcd.go`; the client is made
//! in `pkg/storage/storagebackend/factory/etcd3.go`, `newETCD3Client`).
//!
//! ## Guarantees
//! - The files are read and parsed at start: a file that cannot be read, holds no PEM
//!   certificate, or (`--etcd-keyfile`) no PEM private key, or a key that does not match its
//!   certificate stops the server with an error naming the flag and the file.
//! - `--etcd-certfile` and `--etcd-keyfile` go together (kube's etcd client refuses one
//!   without the other: `KeyFile and CertFile must both be present`).
//! - The flags apply to `--store etcd` only.
//! - Bounds: three files an operator names, read once; nothing a client sends is held here.
//!
//! ## Differences from kube
//! - TLS flags with an `http://` endpoint are refused: kube's etcd client drops the TLS
//!   configuration for `http://` endpoints and speaks plain HTTP (a configuration that reads
//!   as secure and is not). Endpoints without a scheme get TLS when the flags are given, as in
//!   kube.
//! - The files are read once at start; kube's etcd client reads the client certificate again
//!   at each handshake, so a rotated certificate is picked up without a restart. Here a
//!   rotation needs a restart.
//! - `https://` endpoints without `--etcd-cafile` verify etcd against the system's roots, as
//!   kube does.

use std::path::Path;

use rustls_pki_types::PrivateKeyDer;
use rustls_pki_types::pem::PemObject;
use watchkeeper_store::{EtcdTls, StoreKind};

use super::ConfigError;
use super::tls::pem_certificates;

/// The TLS configuration of the etcd client, `None` without the flags.
///
/// # Errors
/// The flag or flags at fault, and why.
pub(super) fn tls_from_flags(
    (ca, cert, key): (Option<&Path>, Option<&Path>, Option<&Path>),
    store: StoreKind,
    endpoints: &[String],
) -> Result<Option<EtcdTls>, ConfigError> {
    if ca.is_none() && cert.is_none() && key.is_none() {
        return Ok(None);
    }
    let given = [
        (ca, "--etcd-cafile"),
        (cert, "--etcd-certfile"),
        (key, "--etcd-keyfile"),
    ]
    .into_iter()
    .find_map(|(file, flag)| file.map(|_| flag))
    .unwrap_or("--etcd-cafile");
    if store != StoreKind::Etcd {
        return Err(ConfigError::combination(
            &[given, "--store"],
            format!("{given} applies to --store etcd (TLS to etcd)"),
        ));
    }
    if cert.is_some() != key.is_some() {
        return Err(ConfigError::combination(
            &["--etcd-certfile", "--etcd-keyfile"],
            "--etcd-certfile and --etcd-keyfile must be given together",
        ));
    }
    if let Some(plain) = endpoints.iter().find(|e| e.starts_with("http://")) {
        return Err(ConfigError::combination(
            &["--etcd-endpoints", given],
            format!(
                "--etcd-endpoints {plain}: {given} needs https:// endpoints (an http:// endpoint is plain HTTP, which kube-apiserver would use without TLS)"
            ),
        ));
    }
    let ca_pem = ca
        .map(|path| {
            let text = read("--etcd-cafile", path)?;
            let mut roots = rustls::RootCertStore::empty();
            for cert in pem_certificates(&text).map_err(|e| refused("--etcd-cafile", path, e))? {
                roots
                    .add(cert)
                    .map_err(|e| refused("--etcd-cafile", path, e))?;
            }
            Ok::<_, ConfigError>(text)
        })
        .transpose()?;
    let identity = match (cert, key) {
        (Some(cert_path), Some(key_path)) => {
            let cert = read("--etcd-certfile", cert_path)?;
            let chain =
                pem_certificates(&cert).map_err(|e| refused("--etcd-certfile", cert_path, e))?;
            let key = read("--etcd-keyfile", key_path)?;
            let key_der = PrivateKeyDer::from_pem_slice(&key).map_err(|e| {
                refused(
                    "--etcd-keyfile",
                    key_path,
                    format!("no PEM private key: {e}"),
                )
            })?;
            // Loads the key and checks it is the certificate's, as Go's tls.X509KeyPair.
            rustls::sign::CertifiedKey::from_der(
                chain,
                key_der,
                &rustls::crypto::ring::default_provider(),
            )
            .map_err(|e| refused("--etcd-certfile/--etcd-keyfile", cert_path, e))?;
            Some((cert, key))
        }
        _ => None,
    };
    Ok(Some(EtcdTls { ca_pem, identity }))
}

/// A file's bytes, or the flag's error.
fn read(flag: &'static str, path: &Path) -> Result<Vec<u8>, ConfigError> {
    std::fs::read(path).map_err(|e| refused(flag, path, format!("I/O error: {e}")))
}

/// `flag`'s file refused, and why.
fn refused(flag: &'static str, path: &Path, cause: impl std::fmt::Display) -> ConfigError {
    ConfigError::flag(flag, format!("{flag} {}: {cause}", path.display()))
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::super::{ServeArgs, ServeConfig};
    use super::*;

    /// The flags' arguments over etcd at `endpoint`.
    fn args(
        endpoint: &str,
        ca: Option<PathBuf>,
        cert: Option<PathBuf>,
        key: Option<PathBuf>,
    ) -> ServeArgs {
        ServeArgs {
            store: Some("etcd".to_owned()),
            etcd_endpoints: Some(vec![endpoint.to_owned()]),
            etcd_cafile: ca,
            etcd_certfile: cert,
            etcd_keyfile: key,
            ..ServeArgs::default()
        }
    }

    fn refusal(args: ServeArgs) -> (Vec<&'static str>, String) {
        match ServeConfig::from_args(args).unwrap_err() {
            ConfigError::Flag { flag, message } => (vec![flag], message),
            ConfigError::Combination { flags, message } => (flags, message),
            other => panic!("{other}"),
        }
    }

    /// A self-signed certificate and its key, PEM.
    fn self_signed() -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["etcd".to_owned()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        (cert.pem(), key.serialize_pem())
    }

    /// Goal: each refusal names the flag (and the file) at fault: a certificate without its
    /// key, the flags without `--store etcd`, an `http://` endpoint, a missing file, a file
    /// that is not PEM, a key that is not the certificate's; valid files are kept as read.
    #[test]
    fn the_flags_are_checked_at_start() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            path
        };
        let (cert, key) = self_signed();
        let (_, other_key) = self_signed();
        let (cert, key, other_key, junk) = (
            write("c.crt", &cert),
            write("c.key", &key),
            write("o.key", &other_key),
            write("junk", "not PEM"),
        );
        let https = "https://127.0.0.1:2379";

        let (flags, message) = refusal(args(https, None, Some(cert.clone()), None));
        assert_eq!(flags, ["--etcd-certfile", "--etcd-keyfile"]);
        assert_eq!(
            message,
            "--etcd-certfile and --etcd-keyfile must be given together"
        );

        let mut memory = args(https, Some(cert.clone()), None, None);
        memory.store = Some("memory".to_owned());
        let (flags, message) = refusal(memory);
        assert_eq!(flags, ["--etcd-cafile", "--store"]);
        assert_eq!(
            message,
            "--etcd-cafile applies to --store etcd (TLS to etcd)"
        );

        let (flags, message) = refusal(args(
            "http://127.0.0.1:2379",
            Some(cert.clone()),
            None,
            None,
        ));
        assert_eq!(flags, ["--etcd-endpoints", "--etcd-cafile"]);
        assert!(
            message.starts_with("--etcd-endpoints http://127.0.0.1:2379: "),
            "{message}"
        );

        let missing = dir.path().join("missing.crt");
        let (flags, message) = refusal(args(https, Some(missing.clone()), None, None));
        assert_eq!(flags, ["--etcd-cafile"]);
        assert!(
            message.starts_with(&format!("--etcd-cafile {}: I/O error: ", missing.display())),
            "{message}"
        );

        let (flags, message) = refusal(args(https, Some(junk.clone()), None, None));
        assert_eq!(flags, ["--etcd-cafile"]);
        assert_eq!(
            message,
            format!(
                "--etcd-cafile {}: no PEM CERTIFICATE block found",
                junk.display()
            )
        );

        let (flags, message) = refusal(args(https, None, Some(cert.clone()), Some(junk.clone())));
        assert_eq!(flags, ["--etcd-keyfile"]);
        assert!(
            message.starts_with(&format!(
                "--etcd-keyfile {}: no PEM private key",
                junk.display()
            )),
            "{message}"
        );

        let (flags, message) = refusal(args(https, None, Some(cert.clone()), Some(other_key)));
        assert_eq!(flags, ["--etcd-certfile/--etcd-keyfile"]);
        assert!(message.contains("key"), "{message}");

        let config = ServeConfig::from_args(args(
            "127.0.0.1:2379",
            Some(cert.clone()),
            Some(cert.clone()),
            Some(key.clone()),
        ))
        .unwrap();
        let tls = config.etcd_tls.unwrap();
        assert_eq!(tls.ca_pem, Some(std::fs::read(&cert).unwrap()));
        assert_eq!(
            tls.identity,
            Some((std::fs::read(&cert).unwrap(), std::fs::read(&key).unwrap()))
        );
        assert!(
            ServeConfig::from_args(args(https, None, None, None))
                .unwrap()
                .etcd_tls
                .is_none()
        );
    }

    /// Goal: the three keys are read from the `--config` TOML file as the flags are.
    #[test]
    fn the_config_file_has_the_same_keys() {
        let file: ServeArgs = toml::from_str(
            "etcd-cafile = \"/pki/ca.crt\"\netcd-certfile = \"/pki/c.crt\"\netcd-keyfile = \"/pki/c.key\"\n",
        )
        .unwrap();
        let merged = ServeArgs::default().or(file);
        assert_eq!(merged.etcd_cafile, Some(PathBuf::from("/pki/ca.crt")));
        assert_eq!(merged.etcd_certfile, Some(PathBuf::from("/pki/c.crt")));
        assert_eq!(merged.etcd_keyfile, Some(PathBuf::from("/pki/c.key")));
    }
}

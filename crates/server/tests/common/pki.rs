//! A CA made per test with rcgen, and the PEM files of its certificates in a temporary
//! directory (tls.rs: the server's own TLS; etcd_tls.rs: TLS to etcd).

use std::path::PathBuf;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair,
};
use watchkeeper::config::ServeArgs;

/// A CA and the PEM files a test needs.
pub struct Pki {
    dir: tempfile::TempDir,
    pub ca_pem: String,
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl Pki {
    pub fn new(name: &str) -> Pki {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        Pki {
            dir: tempfile::tempdir().unwrap(),
            ca_pem: issuer.pem(),
            issuer,
        }
    }

    /// The path of the file `name` in its directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.path(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    /// A leaf certificate for `usages` and its key, PEM.
    pub fn leaf(
        &self,
        sans: &[&str],
        cn: &str,
        orgs: &[&str],
        usages: &[ExtendedKeyUsagePurpose],
    ) -> (String, String) {
        let mut params =
            CertificateParams::new(sans.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>())
                .unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        for org in orgs {
            params
                .distinguished_name
                .push(DnType::OrganizationName, *org);
        }
        params.extended_key_usages = usages.to_vec();
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    /// Server flags: certificate for 127.0.0.1/localhost, this CA for client certificates.
    pub fn server_args(&self) -> ServeArgs {
        let (cert, key) = self.leaf(
            &["127.0.0.1", "localhost"],
            "watchkeeper",
            &[],
            &[ExtendedKeyUsagePurpose::ServerAuth],
        );
        ServeArgs {
            tls_cert_file: Some(self.write("server.crt", &cert)),
            tls_private_key_file: Some(self.write("server.key", &key)),
            client_ca_file: Some(self.write("ca.crt", &self.ca_pem)),
            ..ServeArgs::default()
        }
    }

    pub fn ca_file(&self) -> PathBuf {
        self.write("ca.crt", &self.ca_pem)
    }
}

//! Service account tokens, as kube-apiserver issues them for the `serviceaccounts/{name}/token`
//! subresource (TokenRequest) and accepts them as bearer tokens.
//!
//! ## Guarantees
//! - A token is a JWT signed by the server's key: the PEM private key of
//!   `--service-account-signing-key-file` (RSA, RS256; or ECDSA P-256, ES256), else a P-256 key
//!   generated at start. A generated key lives as long as the process: tokens issued before a
//!   restart, or by another instance over the same store, are refused (401) — give every
//!   instance the same key file to share tokens. The header names the key (`kid`: kube-apiserver's
//!   key id, the unpadded base64url SHA-256 of the public key's DER `SubjectPublicKeyInfo`).
//! - Tokens are verified with the signing key's public half and every public key of
//!   `--service-account-key-file` (repeatable; PEM public keys, RSA public keys, certificates
//!   or RSA/PKCS#8 private keys, as kube-apiserver reads them; RSA, ECDSA P-256 or P-384), the
//!   keys whose `kid` is the token's tried first: tokens of a retired key stay valid while its
//!   public key is listed. (kube-apiserver verifies with the listed files only; here the
//!   signing key is always one of them, so a token this server issues always verifies.)
//! - Its claims are kube-apiserver's: `iss` (the first `--service-account-issuer`), `sub`
//!   (`system:serviceaccount:NS:NAME`), `aud`, `exp`, `iat`, `nbf`, `jti`, and the private
//!   `kubernetes.io` claim with `namespace`, `serviceaccount` {`name`, `uid`} and, for a bound
//!   token, `pod`, `secret` or `node` {`name`, `uid`} (a pod-bound token also names the pod's
//!   node when it exists).
//! - A bearer token whose (unverified) `iss` is none of the issuers (every
//!   `--service-account-issuer` is accepted, so an issuer can be changed without refusing the
//!   tokens of the old one) is not looked at here and goes to the other authenticators, as
//!   kube-apiserver's JWT authenticator does. One of this
//!   issuer authenticates as user `system:serviceaccount:NS:NAME` (uid the service account's)
//!   in the groups `system:serviceaccounts`, `system:serviceaccounts:NS` and
//!   `system:authenticated` only if: its signature verifies with the key (algorithm pinned to
//!   the key's), it is within `nbf`..`exp` (60 s of leeway, as kube-apiserver), one of its
//!   audiences is one of the wanted ones (`--api-audiences` for requests), and the service
//!   account — and its bound pod, secret or node — still exists with the uid of the claims,
//!   read from the server's caches. Otherwise it is refused with the reason kube-apiserver
//!   gives (a TokenReview shows it; a request gets a bare 401).
//! - No token or key is ever logged.
//!
//! ## OIDC discovery
//! As kube-apiserver, the server publishes its verification keys for relying parties (cloud
//! identity federation, Vault): `/.well-known/openid-configuration` (`issuer`, `jwks_uri`,
//! `response_types_supported: ["id_token"]`, `subject_types_supported: ["public"]`, the keys'
//! algorithms) and `/openid/v1/jwks` (`application/jwk-set+json`: every verification key as a
//! public JWK with its `kid`, `use: sig` and `alg`), both `Cache-Control: public,
//! max-age=3600`, behind the usual authentication and authorization (kube-apiserver's default
//! RBAC grants them to `system:serviceaccounts`). `jwks_uri` is `--service-account-jwks-uri`,
//! else `https://<advertised address>/openid/v1/jwks`. Only an issuer that is an `https` URL
//! without query or fragment can be an OIDC issuer: with another, the two paths are 404 and
//! the start logs why, as kube-apiserver does ([`ServiceAccountTokens::discovery_documents`]).

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use ring::signature::{self, KeyPair};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::User;

/// The flag of the signing key.
pub const SIGNING_KEY_FLAG: &str = "--service-account-signing-key-file";

/// The flag of further verification keys.
pub const KEY_FILE_FLAG: &str = "--service-account-key-file";

/// Where the OIDC discovery document is served.
pub const OPENID_CONFIGURATION_PATH: &str = "/.well-known/openid-configuration";

/// Where the verification keys are served.
pub const JWKS_PATH: &str = "/openid/v1/jwks";

/// Seconds of clock skew allowed on `exp` and `nbf` (go-jose's default leeway, which
/// kube-apiserver uses).
pub const LEEWAY_SECONDS: i64 = 60;

/// Finds an object of the server's caches: `(plural, namespace, name)` → its uid, for
/// `serviceaccounts`, `pods`, `secrets` and `nodes` (core group).
pub type ObjectLookup = Arc<dyn Fn(&str, &str, &str) -> Option<String> + Send + Sync>;

/// A name and uid in the claims.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ref {
    /// The object's name.
    pub name: String,
    /// The object's uid.
    pub uid: String,
}

/// The `kubernetes.io` claim.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KubernetesClaims {
    /// The service account's namespace.
    pub namespace: String,
    /// The service account.
    pub serviceaccount: Ref,
    /// The pod the token is bound to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<Ref>,
    /// The secret the token is bound to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<Ref>,
    /// The node the token (or its pod) is bound to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<Ref>,
}

/// A token's claims.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// Audiences.
    pub aud: Vec<String>,
    /// Expiry, Unix seconds.
    pub exp: i64,
    /// Issued at, Unix seconds.
    pub iat: i64,
    /// The issuer.
    pub iss: String,
    /// A unique id of the token.
    pub jti: String,
    /// Not before, Unix seconds.
    pub nbf: i64,
    /// `system:serviceaccount:NS:NAME`.
    pub sub: String,
    /// The service account and bound objects.
    #[serde(rename = "kubernetes.io")]
    pub kubernetes: KubernetesClaims,
}

/// What a token is bound to besides its service account.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Binding {
    /// A pod.
    pub pod: Option<Ref>,
    /// A secret.
    pub secret: Option<Ref>,
    /// A node.
    pub node: Option<Ref>,
}

/// Where the keys come from: `--service-account-signing-key-file` and
/// `--service-account-key-file`.
#[derive(Clone, Copy, Debug, Default)]
pub struct KeyFiles<'a> {
    /// The signing key (a PEM private key); `None`: a P-256 key generated at start.
    pub signing: Option<&'a Path>,
    /// Files of further verification keys.
    pub verifying: &'a [PathBuf],
}

/// One public key tokens are verified with.
struct VerifyingKey {
    algorithm: Algorithm,
    key_id: String,
    decoding: DecodingKey,
    /// The public JWK as JSON text, in go-jose's field order (what kube-apiserver publishes).
    jwk: String,
}

/// The two OIDC discovery documents, rendered once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Discovery {
    /// `/.well-known/openid-configuration`.
    pub configuration: String,
    /// `/openid/v1/jwks`.
    pub keyset: String,
}

/// The issuer and verifier of service account tokens.
pub struct ServiceAccountTokens {
    /// Every accepted issuer; the first issues.
    issuers: Vec<String>,
    audiences: Vec<String>,
    algorithm: Algorithm,
    key_id: String,
    encoding: EncodingKey,
    /// The signing key's public half first, then those of `--service-account-key-file`.
    keys: Vec<VerifyingKey>,
    lookup: OnceLock<ObjectLookup>,
    discovery: OnceLock<Discovery>,
}

impl fmt::Debug for ServiceAccountTokens {
    /// Never prints a key.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let key_ids: Vec<&str> = self.keys.iter().map(|k| k.key_id.as_str()).collect();
        f.debug_struct("ServiceAccountTokens")
            .field("issuers", &self.issuers)
            .field("audiences", &self.audiences)
            .field("algorithm", &self.algorithm)
            .field("key_ids", &key_ids)
            .finish_non_exhaustive()
    }
}

/// Why a key cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct KeyError(pub String);

/// DER length octets.
fn der_length(length: usize, out: &mut Vec<u8>) {
    if length < 0x80 {
        out.push(u8::try_from(length).unwrap_or_default());
    } else {
        let bytes: Vec<u8> = length
            .to_be_bytes()
            .into_iter()
            .skip_while(|b| *b == 0)
            .collect();
        out.push(0x80 | u8::try_from(bytes.len()).unwrap_or_default());
        out.extend_from_slice(&bytes);
    }
}

fn der(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    der_length(content.len(), &mut out);
    out.extend_from_slice(content);
    out
}

/// The DER object identifier of P-256 (prime256v1) and of P-384 (secp384r1), without tag.
const P256_OID: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];
const P384_OID: &[u8] = &[0x2b, 0x81, 0x04, 0x00, 0x22];

/// The DER `SubjectPublicKeyInfo` of a public key as ring gives it (RSA: the PKCS#1
/// `RSAPublicKey`; ECDSA: the uncompressed point).
fn subject_public_key_info(algorithm: Algorithm, public: &[u8]) -> Vec<u8> {
    // rsaEncryption + NULL; id-ecPublicKey + the curve.
    let identifier = match algorithm {
        Algorithm::RS256 => vec![
            0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01, 0x05, 0x00,
        ],
        _ => {
            let mut identifier = der(0x06, &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01]);
            let curve = if algorithm == Algorithm::ES384 {
                P384_OID
            } else {
                P256_OID
            };
            identifier.extend(der(0x06, curve));
            identifier
        }
    };
    let mut bits = vec![0];
    bits.extend_from_slice(public);
    let mut content = der(0x30, &identifier);
    content.extend(der(0x03, &bits));
    der(0x30, &content)
}

impl VerifyingKey {
    /// The key of `public` (see [`subject_public_key_info`]) for `algorithm`.
    fn new(algorithm: Algorithm, public: &[u8]) -> Result<VerifyingKey, String> {
        use x509_parser::public_key::PublicKey;
        use x509_parser::x509::SubjectPublicKeyInfo;
        let spki = subject_public_key_info(algorithm, public);
        let digest = ring::digest::digest(&ring::digest::SHA256, &spki);
        let key_id = URL_SAFE_NO_PAD.encode(digest.as_ref());
        let b64 = |bytes: &[u8]| URL_SAFE_NO_PAD.encode(bytes);
        let (_, info) = <SubjectPublicKeyInfo as x509_parser::prelude::FromDer<_>>::from_der(&spki)
            .map_err(|e| format!("not a public key: {e}"))?;
        let jwk = match (info.parsed(), algorithm) {
            (Ok(PublicKey::RSA(rsa)), Algorithm::RS256) => {
                let unsigned = |bytes: &[u8]| {
                    let start = bytes.iter().position(|b| *b != 0).unwrap_or(bytes.len());
                    b64(&bytes[start..])
                };
                format!(
                    r#"{{"use":"sig","kty":"RSA","kid":"{key_id}","alg":"RS256","n":"{}","e":"{}"}}"#,
                    unsigned(rsa.modulus),
                    unsigned(rsa.exponent)
                )
            }
            (Ok(PublicKey::EC(point)), Algorithm::ES256 | Algorithm::ES384) => {
                let (crv, alg, size) = if algorithm == Algorithm::ES384 {
                    ("P-384", "ES384", 48)
                } else {
                    ("P-256", "ES256", 32)
                };
                let data = point.data();
                if data.len() != 1 + 2 * size || data[0] != 4 {
                    return Err("not an uncompressed ECDSA point".to_owned());
                }
                format!(
                    r#"{{"use":"sig","kty":"EC","kid":"{key_id}","crv":"{crv}","alg":"{alg}","x":"{}","y":"{}"}}"#,
                    b64(&data[1..=size]),
                    b64(&data[1 + size..])
                )
            }
            _ => return Err("not an RSA or ECDSA P-256/P-384 public key".to_owned()),
        };
        let decoding = match algorithm {
            Algorithm::RS256 => DecodingKey::from_rsa_der(public),
            _ => DecodingKey::from_ec_der(public),
        };
        Ok(VerifyingKey {
            algorithm,
            key_id,
            decoding,
            jwk,
        })
    }

    /// The keys of one PEM section of a `--service-account-key-file`.
    fn from_pem(section: &pem::Pem) -> Result<Option<VerifyingKey>, String> {
        use x509_parser::public_key::PublicKey;
        let spki_key = |der: &[u8]| -> Result<VerifyingKey, String> {
            use x509_parser::x509::SubjectPublicKeyInfo;
            let (_, info) =
                <SubjectPublicKeyInfo as x509_parser::prelude::FromDer<_>>::from_der(der)
                    .map_err(|e| format!("not a public key: {e}"))?;
            let curve = info
                .algorithm
                .parameters
                .as_ref()
                .and_then(|p| p.as_oid().ok())
                .map(|oid| oid.as_bytes().to_vec());
            let public = info.subject_public_key.data.to_vec();
            match info.parsed() {
                Ok(PublicKey::RSA(_)) => VerifyingKey::new(Algorithm::RS256, &public),
                Ok(PublicKey::EC(_)) if curve.as_deref() == Some(P256_OID) => {
                    VerifyingKey::new(Algorithm::ES256, &public)
                }
                Ok(PublicKey::EC(_)) if curve.as_deref() == Some(P384_OID) => {
                    VerifyingKey::new(Algorithm::ES384, &public)
                }
                _ => Err("not an RSA or ECDSA P-256/P-384 public key".to_owned()),
            }
        };
        match section.tag() {
            "PUBLIC KEY" => spki_key(section.contents()).map(Some),
            "RSA PUBLIC KEY" => VerifyingKey::new(Algorithm::RS256, section.contents()).map(Some),
            "CERTIFICATE" => {
                let (_, certificate) = x509_parser::parse_x509_certificate(section.contents())
                    .map_err(|e| format!("not a certificate: {e}"))?;
                spki_key(certificate.public_key().raw).map(Some)
            }
            "RSA PRIVATE KEY" => {
                let pair = signature::RsaKeyPair::from_der(section.contents())
                    .map_err(|e| format!("not a usable RSA key: {e}"))?;
                VerifyingKey::new(Algorithm::RS256, pair.public_key().as_ref()).map(Some)
            }
            "PRIVATE KEY" => {
                let der = section.contents();
                if let Ok(pair) = signature::RsaKeyPair::from_pkcs8(der) {
                    return VerifyingKey::new(Algorithm::RS256, pair.public_key().as_ref())
                        .map(Some);
                }
                let rng = ring::rand::SystemRandom::new();
                for (algorithm, signing) in [
                    (
                        Algorithm::ES256,
                        &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
                    ),
                    (
                        Algorithm::ES384,
                        &signature::ECDSA_P384_SHA384_FIXED_SIGNING,
                    ),
                ] {
                    if let Ok(pair) = signature::EcdsaKeyPair::from_pkcs8(signing, der, &rng) {
                        return VerifyingKey::new(algorithm, pair.public_key().as_ref()).map(Some);
                    }
                }
                Err("not an RSA or ECDSA P-256/P-384 private key".to_owned())
            }
            // Other sections (parameters, a SEC1 `EC PRIVATE KEY`, ...) are not keys read here.
            _ => Ok(None),
        }
    }
}

impl ServiceAccountTokens {
    /// The issuer of tokens for `audiences` (the API audiences) as `issuers[0]`, accepting
    /// every one of `issuers`, signing with the key of `keys.signing` or, without one, a key
    /// generated now, and verifying with it and the keys of `keys.verifying`.
    ///
    /// # Errors
    /// No issuer; a key file cannot be read, is not PEM, or holds no usable key.
    pub fn load(
        keys: KeyFiles<'_>,
        issuers: Vec<String>,
        audiences: Vec<String>,
    ) -> Result<ServiceAccountTokens, KeyError> {
        if issuers.is_empty() {
            return Err(KeyError("no service account issuer".to_owned()));
        }
        let rng = ring::rand::SystemRandom::new();
        let (algorithm, encoding, public) = match keys.signing {
            None => {
                let pkcs8 = signature::EcdsaKeyPair::generate_pkcs8(
                    &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
                    &rng,
                )
                .map_err(|_| KeyError("cannot generate a P-256 key".to_owned()))?;
                let pair = signature::EcdsaKeyPair::from_pkcs8(
                    &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
                    pkcs8.as_ref(),
                    &rng,
                )
                .map_err(|_| KeyError("cannot read the generated key".to_owned()))?;
                (
                    Algorithm::ES256,
                    EncodingKey::from_ec_der(pkcs8.as_ref()),
                    pair.public_key().as_ref().to_vec(),
                )
            }
            Some(path) => Self::read_key(path, &rng)?,
        };
        let signing = VerifyingKey::new(algorithm, &public).map_err(KeyError)?;
        let key_id = signing.key_id.clone();
        let mut verifying = vec![signing];
        for path in keys.verifying {
            for key in Self::read_public_keys(path)? {
                if verifying.iter().all(|k| k.key_id != key.key_id) {
                    verifying.push(key);
                }
            }
        }
        Ok(ServiceAccountTokens {
            issuers,
            audiences,
            algorithm,
            key_id,
            encoding,
            keys: verifying,
            lookup: OnceLock::new(),
            discovery: OnceLock::new(),
        })
    }

    /// The public keys of a `--service-account-key-file`: every PEM public key, RSA public key,
    /// certificate and RSA or PKCS#8 private key in it (kube-apiserver's
    /// `keyutil.PublicKeysFromFile`).
    fn read_public_keys(path: &Path) -> Result<Vec<VerifyingKey>, KeyError> {
        let fail = |why: String| KeyError(format!("{KEY_FILE_FLAG} {}: {why}", path.display()));
        let text = std::fs::read(path).map_err(|e| fail(format!("cannot read it: {e}")))?;
        let sections = pem::parse_many(&text).map_err(|e| fail(format!("not PEM: {e}")))?;
        let mut keys = Vec::new();
        for (index, section) in sections.iter().enumerate() {
            match VerifyingKey::from_pem(section) {
                Ok(Some(key)) => keys.push(key),
                Ok(None) => {}
                Err(why) => {
                    return Err(fail(format!(
                        "PEM block #{} ({}): {why}",
                        index + 1,
                        section.tag()
                    )));
                }
            }
        }
        if keys.is_empty() {
            return Err(fail(
                "data does not contain any valid RSA or ECDSA public keys".to_owned(),
            ));
        }
        Ok(keys)
    }

    /// Reads a PEM private key: PKCS#1 or PKCS#8 RSA (RS256), PKCS#8 P-256 (ES256).
    fn read_key(
        path: &Path,
        rng: &ring::rand::SystemRandom,
    ) -> Result<(Algorithm, EncodingKey, Vec<u8>), KeyError> {
        use rustls_pki_types::PrivateKeyDer;
        use rustls_pki_types::pem::PemObject;
        let fail = |why: String| KeyError(format!("{SIGNING_KEY_FLAG} {}: {why}", path.display()));
        let pem = std::fs::read(path).map_err(|e| fail(format!("cannot read it: {e}")))?;
        let key = PrivateKeyDer::from_pem_slice(&pem)
            .map_err(|e| fail(format!("no PEM private key in it: {e}")))?;
        let unsupported = || {
            fail("not an RSA or ECDSA P-256 private key (PKCS#1 or PKCS#8 PEM; convert a SEC1 `EC PRIVATE KEY` with `openssl pkcs8 -topk8 -nocrypt`)".to_owned())
        };
        match &key {
            PrivateKeyDer::Pkcs1(der) => {
                let pair = signature::RsaKeyPair::from_der(der.secret_pkcs1_der())
                    .map_err(|e| fail(format!("not a usable RSA key: {e}")))?;
                Ok((
                    Algorithm::RS256,
                    EncodingKey::from_rsa_der(der.secret_pkcs1_der()),
                    pair.public_key().as_ref().to_vec(),
                ))
            }
            PrivateKeyDer::Pkcs8(der) => {
                let der = der.secret_pkcs8_der();
                if let Ok(pair) = signature::RsaKeyPair::from_pkcs8(der) {
                    let encoding = EncodingKey::from_rsa_pem(&pem)
                        .map_err(|e| fail(format!("not a usable RSA key: {e}")))?;
                    return Ok((
                        Algorithm::RS256,
                        encoding,
                        pair.public_key().as_ref().to_vec(),
                    ));
                }
                let pair = signature::EcdsaKeyPair::from_pkcs8(
                    &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
                    der,
                    rng,
                )
                .map_err(|_| unsupported())?;
                Ok((
                    Algorithm::ES256,
                    EncodingKey::from_ec_der(der),
                    pair.public_key().as_ref().to_vec(),
                ))
            }
            _ => Err(unsupported()),
        }
    }

    /// Lets the verifier read the caches (set once, when the caches exist).
    pub fn set_lookup(&self, lookup: ObjectLookup) {
        let _ = self.lookup.set(lookup);
    }

    /// The issuer of the tokens issued here: the first `--service-account-issuer`.
    #[must_use]
    pub fn issuer(&self) -> &str {
        &self.issuers[0]
    }

    /// The OIDC discovery documents for `jwks_uri` (`--service-account-jwks-uri`), else for
    /// `https://{advertised}/openid/v1/jwks`.
    ///
    /// # Errors
    /// kube-apiserver's reason the issuer cannot be an OIDC issuer (then the discovery paths
    /// are not served).
    pub fn discovery_documents(
        &self,
        jwks_uri: Option<&str>,
        advertised: std::net::SocketAddr,
    ) -> Result<Discovery, String> {
        let issuer = self.issuer();
        let uri = issuer
            .parse::<axum::http::Uri>()
            .map_err(|e| format!("issuer URL {issuer:?} is not a URL: {e}"))?;
        if uri.scheme_str() != Some("https") || uri.host().is_none_or(str::is_empty) {
            return Err(format!("issuer URL must use https scheme, got: {issuer}"));
        }
        if uri.query().is_some() {
            return Err(format!("issuer URL may not include a query, got: {issuer}"));
        }
        if issuer.contains('#') {
            return Err(format!(
                "issuer URL may not include a fragment, got: {issuer}"
            ));
        }
        let jwks_uri =
            jwks_uri.map_or_else(|| format!("https://{advertised}{JWKS_PATH}"), str::to_owned);
        let mut algorithms: Vec<&str> = self
            .keys
            .iter()
            .map(|k| match k.algorithm {
                Algorithm::RS256 => "RS256",
                Algorithm::ES384 => "ES384",
                _ => "ES256",
            })
            .collect();
        algorithms.sort_unstable();
        algorithms.dedup();
        // Go's encoding/json of kube-apiserver's structs: fields in declaration order.
        let configuration = format!(
            "{{\"issuer\":{},\"jwks_uri\":{},\"response_types_supported\":[\"id_token\"],\"subject_types_supported\":[\"public\"],\"id_token_signing_alg_values_supported\":{}}}",
            Value::from(issuer),
            Value::from(jwks_uri),
            Value::from(algorithms),
        );
        let keys: Vec<&str> = self.keys.iter().map(|k| k.jwk.as_str()).collect();
        let keyset = format!("{{\"keys\":[{}]}}", keys.join(","));
        Ok(Discovery {
            configuration,
            keyset,
        })
    }

    /// Serves `discovery` from now on (set once, when the listening address is known).
    pub fn set_discovery(&self, discovery: Discovery) {
        let _ = self.discovery.set(discovery);
    }

    /// The OIDC discovery documents, when the issuer can be an OIDC issuer.
    #[must_use]
    pub fn discovery(&self) -> Option<&Discovery> {
        self.discovery.get()
    }

    /// `--api-audiences`: the audiences of a token when a TokenRequest names none, and those
    /// a request's bearer token must have one of.
    #[must_use]
    pub fn audiences(&self) -> &[String] {
        &self.audiences
    }

    /// Issues a token for the service account `namespace/name` (`uid`), for `audiences`,
    /// valid from `now` for `expiration_seconds`.
    ///
    /// # Errors
    /// Signing failed (not expected with a loaded key).
    pub fn issue(
        &self,
        service_account: (&str, &str, &str),
        binding: Binding,
        audiences: Vec<String>,
        now: i64,
        expiration_seconds: i64,
    ) -> Result<String, KeyError> {
        let (namespace, name, uid) = service_account;
        let claims = Claims {
            aud: audiences,
            exp: now + expiration_seconds,
            iat: now,
            iss: self.issuer().to_owned(),
            jti: uuid::Uuid::new_v4().to_string(),
            nbf: now,
            sub: format!("system:serviceaccount:{namespace}:{name}"),
            kubernetes: KubernetesClaims {
                namespace: namespace.to_owned(),
                serviceaccount: Ref {
                    name: name.to_owned(),
                    uid: uid.to_owned(),
                },
                pod: binding.pod,
                secret: binding.secret,
                node: binding.node,
            },
        };
        let mut header = Header::new(self.algorithm);
        header.kid = Some(self.key_id.clone());
        jsonwebtoken::encode(&header, &claims, &self.encoding)
            .map_err(|e| KeyError(format!("cannot sign the token: {e}")))
    }

    /// Whether `token` claims to come from this issuer (its payload, not verified): only then
    /// is it this authenticator's to accept or refuse.
    #[must_use]
    pub fn is_issued_here(&self, token: &str) -> bool {
        #[derive(Deserialize)]
        struct Issuer {
            #[serde(default)]
            iss: String,
        }
        let mut parts = token.split('.');
        let (Some(_), Some(payload), Some(_), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return false;
        };
        URL_SAFE_NO_PAD
            .decode(payload.trim_end_matches('='))
            .ok()
            .and_then(|bytes| serde_json::from_slice::<Issuer>(&bytes).ok())
            .is_some_and(|claims| self.issuers.contains(&claims.iss))
    }

    /// The user of a token of this issuer at `now` (Unix seconds), for `wanted` audiences
    /// (empty: the API audiences), with the audiences it was accepted for.
    ///
    /// # Errors
    /// kube-apiserver's reason the token is refused.
    pub fn verify(
        &self,
        token: &str,
        wanted: &[String],
        now: i64,
    ) -> Result<(User, Vec<String>), String> {
        let header =
            jsonwebtoken::decode_header(token).map_err(|e| format!("invalid bearer token, {e}"))?;
        // The keys of the token's algorithm, those named by its `kid` first; the first that
        // verifies it wins (kube-apiserver tries every key).
        let mut candidates: Vec<&VerifyingKey> = self
            .keys
            .iter()
            .filter(|k| k.algorithm == header.alg)
            .collect();
        candidates.sort_by_key(|k| header.kid.as_deref() != Some(k.key_id.as_str()));
        let mut outcome = Err("invalid bearer token, no key of the token's algorithm".to_owned());
        for key in candidates {
            let mut validation = Validation::new(key.algorithm);
            validation.validate_exp = false;
            validation.validate_nbf = false;
            validation.validate_aud = false;
            validation.required_spec_claims.clear();
            match jsonwebtoken::decode::<Claims>(token, &key.decoding, &validation) {
                Ok(data) => {
                    outcome = Ok(data);
                    break;
                }
                Err(e) => outcome = Err(format!("invalid bearer token, {e}")),
            }
        }
        let data = outcome?;
        let claims = data.claims;
        if !self.issuers.contains(&claims.iss) {
            return Err("invalid bearer token, the token's issuer is not this server".to_owned());
        }
        if now > claims.exp + LEEWAY_SECONDS {
            return Err("service account token has expired".to_owned());
        }
        if now + LEEWAY_SECONDS < claims.nbf {
            return Err("service account token is not valid yet".to_owned());
        }
        let wanted = if wanted.is_empty() {
            self.audiences.as_slice()
        } else {
            wanted
        };
        let accepted: Vec<String> = wanted
            .iter()
            .filter(|a| claims.aud.contains(a))
            .cloned()
            .collect();
        if accepted.is_empty() {
            return Err(format!(
                "token audiences {:?} is invalid for the target audiences {:?}",
                claims.aud, wanted
            ));
        }
        let k8s = &claims.kubernetes;
        let namespace = &k8s.namespace;
        if claims.sub
            != format!(
                "system:serviceaccount:{namespace}:{}",
                k8s.serviceaccount.name
            )
        {
            return Err(
                "invalid bearer token, the subject does not name its service account".to_owned(),
            );
        }
        let lookup = self
            .lookup
            .get()
            .ok_or_else(|| "the service accounts cannot be read yet".to_owned())?;
        let check = |plural: &str, kind: &str, namespace: &str, object: &Ref| {
            let shown = if namespace.is_empty() {
                object.name.clone()
            } else {
                format!("{namespace}/{}", object.name)
            };
            match lookup(plural, namespace, &object.name) {
                None => Err(format!("{kind} {shown} has been deleted")),
                Some(uid) if uid != object.uid => Err(format!(
                    "{kind} UID ({uid}) does not match claim ({})",
                    object.uid
                )),
                Some(_) => Ok(()),
            }
        };
        check(
            "serviceaccounts",
            "service account",
            namespace,
            &k8s.serviceaccount,
        )?;
        if let Some(pod) = &k8s.pod {
            check("pods", "pod", namespace, pod)?;
        }
        if let Some(secret) = &k8s.secret {
            check("secrets", "secret", namespace, secret)?;
        }
        if let Some(node) = &k8s.node
            && k8s.pod.is_none()
        {
            check("nodes", "node", "", node)?;
        }
        let user = User {
            name: claims.sub.clone(),
            uid: k8s.serviceaccount.uid.clone(),
            groups: vec![
                "system:serviceaccounts".to_owned(),
                format!("system:serviceaccounts:{namespace}"),
                "system:authenticated".to_owned(),
            ],
            extra: Default::default(),
        };
        Ok((user, accepted))
    }
}

/// Now, in Unix seconds.
#[must_use]
pub fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::sync::Mutex;

    const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
    const NOW: i64 = 1_800_000_000;

    type Objects = Arc<Mutex<BTreeMap<(String, String, String), String>>>;

    fn tokens() -> (ServiceAccountTokens, Objects) {
        let tokens = ServiceAccountTokens::load(
            KeyFiles::default(),
            vec![ISSUER.to_owned()],
            vec![ISSUER.to_owned()],
        )
        .unwrap();
        let objects: Objects = Arc::default();
        let seen = objects.clone();
        tokens.set_lookup(Arc::new(move |plural, namespace, name| {
            seen.lock()
                .unwrap()
                .get(&(plural.to_owned(), namespace.to_owned(), name.to_owned()))
                .cloned()
        }));
        (tokens, objects)
    }

    fn signing(path: &Path) -> KeyFiles<'_> {
        KeyFiles {
            signing: Some(path),
            verifying: &[],
        }
    }

    fn add(objects: &Objects, plural: &str, namespace: &str, name: &str, uid: &str) {
        objects.lock().unwrap().insert(
            (plural.to_owned(), namespace.to_owned(), name.to_owned()),
            uid.to_owned(),
        );
    }

    fn payload(token: &str) -> serde_json::Value {
        let part = token.split('.').nth(1).unwrap();
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(part).unwrap()).unwrap()
    }

    #[test]
    fn issued_tokens_carry_kube_apiservers_claims_and_authenticate() {
        let (tokens, objects) = tokens();
        add(&objects, "serviceaccounts", "team", "bot", "sa-uid");
        let token = tokens
            .issue(
                ("team", "bot", "sa-uid"),
                Binding::default(),
                vec![ISSUER.to_owned()],
                NOW,
                3600,
            )
            .unwrap();
        let header: serde_json::Value = serde_json::from_slice(
            &URL_SAFE_NO_PAD
                .decode(token.split('.').next().unwrap())
                .unwrap(),
        )
        .unwrap();
        assert_eq!(header["alg"], "ES256");
        assert_eq!(
            header["kid"].as_str().unwrap().len(),
            43,
            "base64url SHA-256"
        );
        let claims = payload(&token);
        assert_eq!(claims["iss"], ISSUER);
        assert_eq!(claims["sub"], "system:serviceaccount:team:bot");
        assert_eq!(claims["aud"], serde_json::json!([ISSUER]));
        assert_eq!(claims["exp"], NOW + 3600);
        assert_eq!(claims["iat"], NOW);
        assert_eq!(claims["nbf"], NOW);
        assert_eq!(
            claims["kubernetes.io"],
            serde_json::json!({"namespace": "team", "serviceaccount": {"name": "bot", "uid": "sa-uid"}})
        );
        assert!(tokens.is_issued_here(&token));
        let (user, audiences) = tokens.verify(&token, &[], NOW + 10).unwrap();
        assert_eq!(user.name, "system:serviceaccount:team:bot");
        assert_eq!(user.uid, "sa-uid");
        assert_eq!(
            user.groups,
            [
                "system:serviceaccounts",
                "system:serviceaccounts:team",
                "system:authenticated"
            ]
        );
        assert_eq!(audiences, [ISSUER]);
    }

    #[test]
    fn expired_early_foreign_audience_deleted_or_recreated_tokens_are_refused() {
        let (tokens, objects) = tokens();
        add(&objects, "serviceaccounts", "team", "bot", "sa-uid");
        let issue = |audiences: Vec<String>, binding: Binding| {
            tokens
                .issue(("team", "bot", "sa-uid"), binding, audiences, NOW, 600)
                .unwrap()
        };
        let token = issue(vec![ISSUER.to_owned()], Binding::default());
        assert!(
            tokens
                .verify(&token, &[], NOW + 600 + LEEWAY_SECONDS)
                .is_ok()
        );
        assert_eq!(
            tokens
                .verify(&token, &[], NOW + 600 + LEEWAY_SECONDS + 1)
                .unwrap_err(),
            "service account token has expired"
        );
        assert_eq!(
            tokens
                .verify(&token, &[], NOW - LEEWAY_SECONDS - 1)
                .unwrap_err(),
            "service account token is not valid yet"
        );
        let vault = issue(vec!["vault".to_owned()], Binding::default());
        let error = tokens.verify(&vault, &[], NOW).unwrap_err();
        assert!(
            error.starts_with("token audiences [\"vault\"] is invalid for the target audiences"),
            "{error}"
        );
        let (_, accepted) = tokens
            .verify(&vault, &["other".to_owned(), "vault".to_owned()], NOW)
            .unwrap();
        assert_eq!(accepted, ["vault"]);
        // Recreated under the same name: another uid.
        add(&objects, "serviceaccounts", "team", "bot", "new-uid");
        assert_eq!(
            tokens.verify(&token, &[], NOW).unwrap_err(),
            "service account UID (new-uid) does not match claim (sa-uid)"
        );
        objects.lock().unwrap().clear();
        assert_eq!(
            tokens.verify(&token, &[], NOW).unwrap_err(),
            "service account team/bot has been deleted"
        );
        // A pod-bound token dies with its pod.
        add(&objects, "serviceaccounts", "team", "bot", "sa-uid");
        add(&objects, "pods", "team", "web", "pod-uid");
        let bound = issue(
            vec![ISSUER.to_owned()],
            Binding {
                pod: Some(Ref {
                    name: "web".to_owned(),
                    uid: "pod-uid".to_owned(),
                }),
                ..Binding::default()
            },
        );
        assert!(tokens.verify(&bound, &[], NOW).is_ok());
        assert_eq!(payload(&bound)["kubernetes.io"]["pod"]["name"], "web");
        objects
            .lock()
            .unwrap()
            .remove(&("pods".to_owned(), "team".to_owned(), "web".to_owned()));
        assert_eq!(
            tokens.verify(&bound, &[], NOW).unwrap_err(),
            "pod team/web has been deleted"
        );
    }

    #[test]
    fn tokens_of_another_key_or_tampered_ones_are_refused() {
        let (tokens, objects) = tokens();
        let (other, _) = self::tokens();
        add(&objects, "serviceaccounts", "team", "bot", "sa-uid");
        let foreign = other
            .issue(
                ("team", "bot", "sa-uid"),
                Binding::default(),
                vec![ISSUER.to_owned()],
                NOW,
                3600,
            )
            .unwrap();
        assert!(tokens.is_issued_here(&foreign), "same issuer");
        let error = tokens.verify(&foreign, &[], NOW).unwrap_err();
        assert!(error.starts_with("invalid bearer token"), "{error}");
        let token = tokens
            .issue(
                ("team", "bot", "sa-uid"),
                Binding::default(),
                vec![ISSUER.to_owned()],
                NOW,
                3600,
            )
            .unwrap();
        // Another subject in the payload, the signature kept.
        let mut parts: Vec<String> = token.split('.').map(str::to_owned).collect();
        let mut claims = payload(&token);
        claims["kubernetes.io"]["serviceaccount"]["name"] = "admin".into();
        claims["sub"] = "system:serviceaccount:team:admin".into();
        parts[1] = URL_SAFE_NO_PAD.encode(claims.to_string());
        assert!(tokens.verify(&parts.join("."), &[], NOW).is_err());
        assert!(!tokens.is_issued_here("static-token"));
        assert!(!tokens.is_issued_here("a.b.c"));
    }

    #[test]
    fn rsa_and_p256_key_files_sign_and_verify() {
        let dir = std::env::temp_dir().join(format!("wk-sa-keys-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ec = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
            .unwrap()
            .serialize_pem();
        for (name, pem, alg) in [
            ("ec.pem", ec.as_str(), "ES256"),
            (
                "rsa-pkcs8.pem",
                include_str!("../../tests/fixtures/sa-signing-rsa-pkcs8.pem"),
                "RS256",
            ),
            (
                "rsa-pkcs1.pem",
                include_str!("../../tests/fixtures/sa-signing-rsa-pkcs1.pem"),
                "RS256",
            ),
        ] {
            let path = dir.join(name);
            std::fs::write(&path, pem).unwrap();
            let tokens = ServiceAccountTokens::load(
                signing(&path),
                vec![ISSUER.to_owned()],
                vec![ISSUER.to_owned()],
            )
            .unwrap();
            tokens.set_lookup(Arc::new(|_, _, _| Some("u".to_owned())));
            let token = tokens
                .issue(
                    ("a", "b", "u"),
                    Binding::default(),
                    vec![ISSUER.to_owned()],
                    NOW,
                    600,
                )
                .unwrap();
            let header = jsonwebtoken::decode_header(&token).unwrap();
            assert_eq!(format!("{:?}", header.alg), alg, "{name}");
            assert!(tokens.verify(&token, &[], NOW).is_ok(), "{name}");
        }
        // Both RSA files hold the same key: the same key id.
        let ids: Vec<String> = ["rsa-pkcs8.pem", "rsa-pkcs1.pem"]
            .iter()
            .map(|name| {
                ServiceAccountTokens::load(
                    signing(&dir.join(name)),
                    vec![ISSUER.to_owned()],
                    vec![],
                )
                .unwrap()
                .key_id
            })
            .collect();
        assert_eq!(ids[0], ids[1]);
        // kube-apiserver's key id: `openssl pkey -pubout -outform DER | sha256 | base64url`.
        assert_eq!(ids[0], "COwLEfhIJEXCCAuLASrtE23lWkrYDnCKeV0k2ikgS5c");
        let bad = dir.join("bad.pem");
        std::fs::write(&bad, "not a key").unwrap();
        let error = ServiceAccountTokens::load(signing(&bad), vec![ISSUER.to_owned()], vec![])
            .unwrap_err()
            .to_string();
        assert!(error.starts_with(SIGNING_KEY_FLAG), "{error}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("wk-sa-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn write_file(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Tokens with a generated signing key that also verify with the keys of `files`.
    fn verifying(files: &[PathBuf]) -> Result<ServiceAccountTokens, KeyError> {
        ServiceAccountTokens::load(
            KeyFiles {
                signing: None,
                verifying: files,
            },
            vec![ISSUER.to_owned()],
            vec![ISSUER.to_owned()],
        )
    }

    fn token_of(tokens: &ServiceAccountTokens) -> String {
        tokens
            .issue(
                ("a", "b", "u"),
                Binding::default(),
                vec![ISSUER.to_owned()],
                NOW,
                600,
            )
            .unwrap()
    }

    #[test]
    fn key_files_verify_tokens_of_retired_or_shared_keys_in_every_pem_form() {
        let dir = temp_dir("verify");
        let rsa_path = write_file(
            &dir,
            "rsa.pem",
            include_str!("../../tests/fixtures/sa-signing-rsa-pkcs1.pem"),
        );
        let certified = rcgen::generate_simple_self_signed(vec!["signer".to_owned()]).unwrap();
        let ec_path = dir.join("ec.pem");
        std::fs::write(&ec_path, certified.signing_key.serialize_pem()).unwrap();
        let rsa = ServiceAccountTokens::load(signing(&rsa_path), vec![ISSUER.to_owned()], vec![])
            .unwrap();
        let ec =
            ServiceAccountTokens::load(signing(&ec_path), vec![ISSUER.to_owned()], vec![]).unwrap();
        let (rsa_token, ec_token) = (token_of(&rsa), token_of(&ec));
        // The RSA key as a PKIX public key, the EC key as its certificate, both in one file.
        let pair = signature::RsaKeyPair::from_der(
            pem::parse(include_str!(
                "../../tests/fixtures/sa-signing-rsa-pkcs1.pem"
            ))
            .unwrap()
            .contents(),
        )
        .unwrap();
        let public = pem::encode(&pem::Pem::new(
            "PUBLIC KEY",
            subject_public_key_info(Algorithm::RS256, pair.public_key().as_ref()),
        ));
        let rsa_public = pem::encode(&pem::Pem::new(
            "RSA PUBLIC KEY",
            pair.public_key().as_ref().to_vec(),
        ));
        for (name, text) in [
            (
                "pkix-and-cert.pem",
                format!("{public}\n{}", certified.cert.pem()),
            ),
            ("pkcs1-public-and-private.pem", {
                format!("{rsa_public}\n{}", certified.signing_key.serialize_pem())
            }),
        ] {
            let verifier = verifying(&[write_file(&dir, name, &text)]).unwrap();
            verifier.set_lookup(Arc::new(|_, _, _| Some("u".to_owned())));
            assert_eq!(
                verifier.keys.len(),
                3,
                "{name}: its own key and the file's two"
            );
            assert!(verifier.verify(&rsa_token, &[], NOW).is_ok(), "{name}");
            assert!(verifier.verify(&ec_token, &[], NOW).is_ok(), "{name}");
            // Its own tokens still verify; a third key's do not.
            assert!(verifier.verify(&token_of(&verifier), &[], NOW).is_ok());
            let (stranger, _) = tokens();
            assert!(verifier.verify(&token_of(&stranger), &[], NOW).is_err());
        }
        for (text, why) in [
            (
                "no pem here",
                "data does not contain any valid RSA or ECDSA public keys",
            ),
            (
                "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n",
                "PEM block #1 (PUBLIC KEY): not a public key",
            ),
        ] {
            let error = verifying(&[write_file(&dir, "bad.pem", text)])
                .unwrap_err()
                .to_string();
            assert!(error.starts_with(KEY_FILE_FLAG), "{error}");
            assert!(error.contains(why), "{error}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn every_issuer_is_accepted_and_the_first_issues() {
        let issuers = vec!["https://new.example".to_owned(), ISSUER.to_owned()];
        let tokens =
            ServiceAccountTokens::load(KeyFiles::default(), issuers.clone(), issuers.clone())
                .unwrap();
        tokens.set_lookup(Arc::new(|_, _, _| Some("u".to_owned())));
        let token = token_of(&tokens);
        assert_eq!(payload(&token)["iss"], "https://new.example");
        // A token of the old issuer, signed by the same key.
        let old = ServiceAccountTokens {
            issuers: vec![ISSUER.to_owned()],
            audiences: issuers,
            algorithm: tokens.algorithm,
            key_id: tokens.key_id.clone(),
            encoding: tokens.encoding.clone(),
            keys: Vec::new(),
            lookup: OnceLock::new(),
            discovery: OnceLock::new(),
        };
        let old_token = token_of(&old);
        assert_eq!(payload(&old_token)["iss"], ISSUER);
        assert!(tokens.is_issued_here(&old_token));
        assert!(tokens.verify(&old_token, &[ISSUER.to_owned()], NOW).is_ok());
        let (other, _) = self::tokens();
        assert!(!other.is_issued_here(&token), "not one of its issuers");
    }

    #[test]
    fn discovery_documents_are_kube_apiservers() {
        let dir = temp_dir("discovery");
        let path = write_file(
            &dir,
            "rsa.pem",
            include_str!("../../tests/fixtures/sa-signing-rsa-pkcs8.pem"),
        );
        let advertised: std::net::SocketAddr = "192.0.2.7:6443".parse().unwrap();
        let load = |issuer: &str| {
            ServiceAccountTokens::load(signing(&path), vec![issuer.to_owned()], vec![]).unwrap()
        };
        let tokens = load(ISSUER);
        let discovery = tokens.discovery_documents(None, advertised).unwrap();
        assert_eq!(
            discovery.configuration,
            r#"{"issuer":"https://kubernetes.default.svc.cluster.local","jwks_uri":"https://192.0.2.7:6443/openid/v1/jwks","response_types_supported":["id_token"],"subject_types_supported":["public"],"id_token_signing_alg_values_supported":["RS256"]}"#
        );
        assert!(
            discovery.keyset.starts_with(
                r#"{"keys":[{"use":"sig","kty":"RSA","kid":"COwLEfhIJEXCCAuLASrtE23lWkrYDnCKeV0k2ikgS5c","alg":"RS256","n":""#
            ) && discovery.keyset.ends_with(r#"","e":"AQAB"}]}"#),
            "go-jose's field order: {}",
            discovery.keyset
        );
        let keyset: Value = serde_json::from_str(&discovery.keyset).unwrap();
        let key = &keyset["keys"][0];
        assert_eq!(key["kid"], "COwLEfhIJEXCCAuLASrtE23lWkrYDnCKeV0k2ikgS5c");
        assert_eq!(key["e"], "AQAB");
        let modulus = URL_SAFE_NO_PAD.decode(key["n"].as_str().unwrap()).unwrap();
        assert_eq!(modulus.len(), 256, "a 2048-bit modulus without a sign byte");
        assert_ne!(modulus[0], 0);
        // The JWK verifies the server's tokens, as a relying party would use it.
        let jwk: jsonwebtoken::jwk::Jwk = serde_json::from_value(key.clone()).unwrap();
        let mut validation = Validation::new(Algorithm::RS256);
        validation.set_audience(&[ISSUER]);
        tokens.set_lookup(Arc::new(|_, _, _| Some("u".to_owned())));
        assert!(
            jsonwebtoken::decode::<Claims>(
                &token_of(&tokens),
                &DecodingKey::from_jwk(&jwk).unwrap(),
                &{
                    validation.validate_exp = false;
                    validation
                }
            )
            .is_ok()
        );
        let with_uri = tokens
            .discovery_documents(Some("https://keys.example/jwks"), advertised)
            .unwrap();
        assert!(
            with_uri
                .configuration
                .contains(r#""jwks_uri":"https://keys.example/jwks""#)
        );
        // A generated P-256 key: an EC JWK.
        let (ec, _) = self::tokens();
        let keyset = ec.discovery_documents(None, advertised).unwrap().keyset;
        assert!(
            keyset.starts_with(r#"{"keys":[{"use":"sig","kty":"EC","kid":""#)
                && keyset.contains(r#"","crv":"P-256","alg":"ES256","x":""#),
            "{keyset}"
        );
        let point: Value = serde_json::from_str(&keyset).unwrap();
        for coordinate in ["x", "y"] {
            let bytes = URL_SAFE_NO_PAD
                .decode(point["keys"][0][coordinate].as_str().unwrap())
                .unwrap();
            assert_eq!(bytes.len(), 32, "{coordinate}");
        }
        for (issuer, error) in [
            (
                "kubernetes.default.svc",
                "issuer URL must use https scheme, got: kubernetes.default.svc",
            ),
            (
                "http://issuer.example",
                "issuer URL must use https scheme, got: http://issuer.example",
            ),
            (
                "https://issuer.example/?a=b",
                "issuer URL may not include a query, got: https://issuer.example/?a=b",
            ),
        ] {
            assert_eq!(
                load(issuer)
                    .discovery_documents(None, advertised)
                    .unwrap_err(),
                error
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

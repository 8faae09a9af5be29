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
//! - Its claims are kube-apiserver's: `iss` (`--service-account-issuer`), `sub`
//!   (`system:serviceaccount:NS:NAME`), `aud`, `exp`, `iat`, `nbf`, `jti`, and the private
//!   `kubernetes.io` claim with `namespace`, `serviceaccount` {`name`, `uid`} and, for a bound
//!   token, `pod`, `secret` or `node` {`name`, `uid`} (a pod-bound token also names the pod's
//!   node when it exists).
//! - A bearer token whose (unverified) `iss` is not the issuer is not looked at here and goes
//!   to the other authenticators, as kube-apiserver's JWT authenticator does. One of this
//!   issuer authenticates as user `system:serviceaccount:NS:NAME` (uid the service account's)
//!   in the groups `system:serviceaccounts`, `system:serviceaccounts:NS` and
//!   `system:authenticated` only if: its signature verifies with the key (algorithm pinned to
//!   the key's), it is within `nbf`..`exp` (60 s of leeway, as kube-apiserver), one of its
//!   audiences is one of the wanted ones (`--api-audiences` for requests), and the service
//!   account — and its bound pod, secret or node — still exists with the uid of the claims,
//!   read from the server's caches. Otherwise it is refused with the reason kube-apiserver
//!   gives (a TokenReview shows it; a request gets a bare 401).
//! - No token or key is ever logged.

use std::fmt;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use ring::signature::{self, KeyPair};
use serde::{Deserialize, Serialize};

use super::User;

/// The flag of the signing key.
pub const SIGNING_KEY_FLAG: &str = "--service-account-signing-key-file";

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

/// The issuer and verifier of service account tokens.
pub struct ServiceAccountTokens {
    issuer: String,
    audiences: Vec<String>,
    algorithm: Algorithm,
    key_id: String,
    encoding: EncodingKey,
    decoding: DecodingKey,
    lookup: OnceLock<ObjectLookup>,
}

impl fmt::Debug for ServiceAccountTokens {
    /// Never prints a key.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServiceAccountTokens")
            .field("issuer", &self.issuer)
            .field("audiences", &self.audiences)
            .field("algorithm", &self.algorithm)
            .field("key_id", &self.key_id)
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

/// The DER `SubjectPublicKeyInfo` of a public key as ring gives it (RSA: the PKCS#1
/// `RSAPublicKey`; P-256: the uncompressed point).
fn subject_public_key_info(algorithm: Algorithm, public: &[u8]) -> Vec<u8> {
    // OIDs with their tags: rsaEncryption + NULL; id-ecPublicKey + prime256v1.
    let identifier: &[u8] = match algorithm {
        Algorithm::RS256 => &[
            0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01, 0x05, 0x00,
        ],
        _ => &[
            0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a, 0x86, 0x48,
            0xce, 0x3d, 0x03, 0x01, 0x07,
        ],
    };
    let mut bits = vec![0];
    bits.extend_from_slice(public);
    let mut content = der(0x30, identifier);
    content.extend(der(0x03, &bits));
    der(0x30, &content)
}

impl ServiceAccountTokens {
    /// The issuer of `issuer` tokens for `audiences` (the API audiences), signing with the
    /// key in `signing_key_file` or, without one, a key generated now.
    ///
    /// # Errors
    /// The key file cannot be read, is not PEM, or holds no RSA or P-256 private key.
    pub fn load(
        signing_key_file: Option<&Path>,
        issuer: String,
        audiences: Vec<String>,
    ) -> Result<ServiceAccountTokens, KeyError> {
        let rng = ring::rand::SystemRandom::new();
        let (algorithm, encoding, public) = match signing_key_file {
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
        let decoding = match algorithm {
            Algorithm::RS256 => DecodingKey::from_rsa_der(&public),
            _ => DecodingKey::from_ec_der(&public),
        };
        let digest = ring::digest::digest(
            &ring::digest::SHA256,
            &subject_public_key_info(algorithm, &public),
        );
        Ok(ServiceAccountTokens {
            issuer,
            audiences,
            algorithm,
            key_id: URL_SAFE_NO_PAD.encode(digest.as_ref()),
            encoding,
            decoding,
            lookup: OnceLock::new(),
        })
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

    /// `--service-account-issuer`.
    #[must_use]
    pub fn issuer(&self) -> &str {
        &self.issuer
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
            iss: self.issuer.clone(),
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
            .is_some_and(|claims| claims.iss == self.issuer)
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
        let mut validation = Validation::new(self.algorithm);
        validation.validate_exp = false;
        validation.validate_nbf = false;
        validation.validate_aud = false;
        validation.required_spec_claims.clear();
        let data = jsonwebtoken::decode::<Claims>(token, &self.decoding, &validation)
            .map_err(|e| format!("invalid bearer token, {e}"))?;
        let claims = data.claims;
        if claims.iss != self.issuer {
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
        let tokens =
            ServiceAccountTokens::load(None, ISSUER.to_owned(), vec![ISSUER.to_owned()]).unwrap();
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
            let tokens =
                ServiceAccountTokens::load(Some(&path), ISSUER.to_owned(), vec![ISSUER.to_owned()])
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
                ServiceAccountTokens::load(Some(&dir.join(name)), ISSUER.to_owned(), vec![])
                    .unwrap()
                    .key_id
            })
            .collect();
        assert_eq!(ids[0], ids[1]);
        // kube-apiserver's key id: `openssl pkey -pubout -outform DER | sha256 | base64url`.
        assert_eq!(ids[0], "COwLEfhIJEXCCAuLASrtE23lWkrYDnCKeV0k2ikgS5c");
        let bad = dir.join("bad.pem");
        std::fs::write(&bad, "not a key").unwrap();
        let error = ServiceAccountTokens::load(Some(&bad), ISSUER.to_owned(), vec![])
            .unwrap_err()
            .to_string();
        assert!(error.starts_with(SIGNING_KEY_FLAG), "{error}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

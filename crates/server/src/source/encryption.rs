//! Encryption at rest: kube-apiserver's `--encryption-provider-config`, an
//! `EncryptionConfiguration` (`apiserver.config.k8s.io/v1`) whose rules choose, per resource,
//! the providers that write and read its stored values
//! (`staging/src/k8s.io/apiserver/pkg/server/options/encryptionconfig`, `storage/value`).
//!
//! ## Guarantees
//! - **The file** is read and validated at start (and, with
//!   `--encryption-provider-config-automatic-reload`, again when it changes:
//!   `super::encryption_reload`, whose new rules replace these at once, [`Encryption::replace`]),
//!   as kube validates it
//!   (`ValidateEncryptionConfiguration`: at least one rule, resource and provider; one provider
//!   per list element; keys named, base64, of the cipher's lengths — AES 16, 24 or 32 bytes,
//!   secretbox 32; resources lowercase, no `*`, no `events.k8s.io` or `extensions`, no
//!   duplicates or overlaps), with kube's field errors after `error while parsing file: `.
//!   `kms` providers need a plugin over gRPC this server does not speak: refused.
//! - **Which values**: a stored key `<prefix>/<storage name>/...` names its resource (built-in
//!   storage names, or `<group>/<plural>` for custom and group-stored resources). The first
//!   rule naming the resource exactly wins, then the first `*.<group>`, then the first
//!   `*.*` (kube's overrides); a resource no rule names is stored as it is.
//! - **Writing**: the rule's first provider writes, with its first key: `aescbc` (kube's
//!   `k8s:enc:aescbc:v1:<key>:` + 16-byte IV + AES-CBC with PKCS#7 padding), `aesgcm`
//!   (`k8s:enc:aesgcm:v1:<key>:` + 12-byte random nonce + AES-GCM sealed with the storage key
//!   as authenticated data), `secretbox` (`k8s:enc:secretbox:v1:<key>:` + 24-byte nonce +
//!   XSalsa20-Poly1305), `identity` (the value itself).
//! - **Reading**: every key of every provider of the rule is tried by its prefix, in order;
//!   `identity` reads what no `k8s:enc:` prefix marks (so a rule `[aescbc, identity]` reads
//!   values stored before encryption was turned on, and `[identity, aescbc]` reads values
//!   encrypted before it was turned off). What no provider reads (kube's `no matching prefix
//!   found`, or the cipher's own failure: a value changed in the store fails GCM's and
//!   secretbox's authentication) is logged with its key and handed on as unreadable
//!   (`watchkeeper_store::transform`), so the object is absent, as any stored value the server
//!   cannot decode, and every other object is served. kube answers 500 for such an object
//!   and fails a LIST that includes it; this server lists its registry as one, so one
//!   unreadable value must not keep every resource from loading.
//! - Rotation follows kube's procedure: add the new key second, restart (or let the automatic
//!   reload read the file), move it first, restart (or reload), rewrite the objects (`kubectl get secrets -A -o json | kubectl replace -f -`),
//!   remove the old key.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use aes_gcm::aead::{Aead, KeyInit, Payload};
use base64::Engine;
use bytes::Bytes;
use serde_json::Value;
use watchkeeper_store::ValueTransformer;

/// The `k8s:enc:` prefix every encrypting provider's values start with.
const ENCRYPTED: &[u8] = b"k8s:enc:";

/// One key of a provider: its prefix and its cipher.
#[derive(Clone)]
struct Keyed {
    prefix: Vec<u8>,
    cipher: Cipher,
}

#[derive(Clone)]
enum Cipher {
    Identity,
    AesCbc(Vec<u8>),
    AesGcm(Vec<u8>),
    Secretbox([u8; 32]),
}

impl std::fmt::Debug for Keyed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key material never reaches a log.
        write!(f, "{:?}", String::from_utf8_lossy(&self.prefix))
    }
}

/// The providers of one rule, in order: the first writes, all read.
#[derive(Clone, Debug)]
struct Providers(Vec<Keyed>);

/// The configuration's rules: which providers each resource's values go through.
#[derive(Debug, Default)]
struct Rules {
    /// Exact group-resources, by group then resource (`secrets` is `""` → `secrets`).
    exact: BTreeMap<String, BTreeMap<String, Arc<Providers>>>,
    /// `*.<group>` rules (`*.` is the core group).
    groups: BTreeMap<String, Arc<Providers>>,
    /// A `*.*` rule.
    everything: Option<Arc<Providers>>,
}

/// The configuration, as a [`ValueTransformer`] of the store's values.
#[derive(Debug)]
pub struct Encryption {
    /// The registry prefix (`--etcd-prefix`) with its trailing `/`.
    prefix: String,
    /// Built-in storage names to `(group, resource)`.
    storage_names: BTreeMap<String, (String, String)>,
    /// The rules, replaced whole by [`Encryption::replace`] (a reload): each value is written
    /// or read under one configuration, the old or the new.
    rules: std::sync::RwLock<Rules>,
    /// Operations by direction, transformer prefix and status (see [`ValueTransformer::operations`]).
    counts: std::sync::Mutex<BTreeMap<(&'static str, String, &'static str), u64>>,
}

impl Encryption {
    /// Reads the configuration at `path` for keys under `prefix` (`--etcd-prefix`).
    ///
    /// # Errors
    /// Why the file cannot be used, in kube's words where kube has them.
    pub fn load(path: &Path, prefix: &str) -> Result<Encryption, String> {
        Encryption::from_bytes(&Encryption::read(path)?, path, prefix)
    }

    /// The content of the configuration file at `path`.
    ///
    /// # Errors
    /// Why it cannot be read, in kube's words.
    pub fn read(path: &Path) -> Result<Vec<u8>, String> {
        std::fs::read(path).map_err(|error| {
            format!("error reading encryption provider configuration file {path:?}: {error}")
        })
    }

    /// The configuration in `bytes`, the content of the file at `path`.
    ///
    /// # Errors
    /// As [`Encryption::load`].
    pub fn from_bytes(bytes: &[u8], path: &Path, prefix: &str) -> Result<Encryption, String> {
        let json = watchkeeper_api::yaml::json_from_yaml_body(bytes).map_err(|error| {
            format!(
                "error decoding encryption provider configuration file {path:?}: {}",
                error.message
            )
        })?;
        let value: Value = serde_json::from_slice(&json).map_err(|error| {
            format!("error decoding encryption provider configuration file {path:?}: {error}")
        })?;
        Encryption::from_value(&value, prefix)
    }

    /// The configuration in `value` (an `EncryptionConfiguration`).
    ///
    /// # Errors
    /// As [`Encryption::load`].
    pub fn from_value(value: &Value, prefix: &str) -> Result<Encryption, String> {
        let text = |key: &str| value.get(key).and_then(Value::as_str).unwrap_or_default();
        if text("kind") != "EncryptionConfiguration"
            || text("apiVersion") != "apiserver.config.k8s.io/v1"
        {
            return Err(format!(
                "error decoding encryption provider configuration file: no kind {:?} is registered for version {:?}; expected an EncryptionConfiguration of apiserver.config.k8s.io/v1",
                text("kind"),
                text("apiVersion")
            ));
        }
        let mut errors = Vec::new();
        let rules = list(value.get("resources"));
        if rules.is_empty() {
            errors.push("resources: Required value: at least one resources is required".to_owned());
        }
        let mut encryption = Encryption {
            prefix: format!("{}/", prefix.trim_end_matches('/')),
            storage_names: watchkeeper_api::resources::builtin_resources()
                .into_iter()
                .map(|def| {
                    (
                        def.storage_prefix(),
                        (def.group.clone(), def.plural.clone()),
                    )
                })
                .collect(),
            rules: std::sync::RwLock::default(),
            counts: std::sync::Mutex::default(),
        };
        let mut rules_of = Rules::default();
        for (i, rule) in rules.iter().enumerate() {
            let resources: Vec<&str> = list(rule.get("resources"))
                .iter()
                .map(|r| r.as_str().unwrap_or_default())
                .collect();
            let path = format!("resources[{i}]");
            if resources.is_empty() {
                errors.push(format!(
                    "{path}.resources: Required value: at least one {path}.resources is required"
                ));
            }
            validate_resources(&resources, &format!("{path}.resources"), &mut errors);
            let providers = list(rule.get("providers"));
            if providers.is_empty() {
                errors.push(format!(
                    "{path}.providers: Required value: at least one {path}.providers is required"
                ));
            }
            let mut keyed = Vec::new();
            for (j, provider) in providers.iter().enumerate() {
                keyed.extend(provider_keys(
                    provider,
                    &format!("{path}.providers[{j}]"),
                    &mut errors,
                ));
            }
            let providers = Arc::new(Providers(keyed));
            for resource in resources {
                let (resource, group) = resource.split_once('.').unwrap_or((resource, ""));
                if resource == "*" && group == "*" {
                    rules_of
                        .everything
                        .get_or_insert_with(|| Arc::clone(&providers));
                } else if resource == "*" {
                    rules_of
                        .groups
                        .entry(group.to_owned())
                        .or_insert_with(|| Arc::clone(&providers));
                } else {
                    rules_of
                        .exact
                        .entry(group.to_owned())
                        .or_default()
                        .entry(resource.to_owned())
                        .or_insert_with(|| Arc::clone(&providers));
                }
            }
        }
        if !errors.is_empty() {
            return Err(format!(
                "error while parsing file: {}",
                watchkeeper_api::field::aggregate(&errors)
            ));
        }
        encryption.rules = std::sync::RwLock::new(rules_of);
        Ok(encryption)
    }

    /// Makes `new`'s rules this configuration's, at once: a value written or read before
    /// went through the old rules, one after through the new (the operation counts stay).
    pub fn replace(&self, new: Encryption) {
        let rules = new
            .rules
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *self
            .rules
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = rules;
    }

    /// The providers of the resource a stored `key` belongs to; `None` when no rule names it.
    fn providers(&self, key: &[u8]) -> Option<Arc<Providers>> {
        let key = std::str::from_utf8(key).ok()?;
        let rest = key.strip_prefix(&self.prefix)?;
        let mut parts = rest.split('/');
        let first = parts.next()?;
        // Looked up by the key's own text: nothing allocated per value read or written.
        let (group, resource) = if first.contains('.') {
            (first, parts.next()?)
        } else {
            let (group, resource) = self.storage_names.get(first)?;
            (group.as_str(), resource.as_str())
        };
        let rules = self
            .rules
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        rules
            .exact
            .get(group)
            .and_then(|resources| resources.get(resource))
            .or_else(|| rules.groups.get(group))
            .or(rules.everything.as_ref())
            .map(Arc::clone)
    }
}

fn list(value: Option<&Value>) -> &[Value] {
    value
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice)
}

/// Go's `%#v` of a `[]string`.
fn go_strings(values: &[&str]) -> String {
    let quoted: Vec<String> = values
        .iter()
        .map(|v| watchkeeper_api::field::go_quote(v))
        .collect();
    format!("[]string{{{}}}", quoted.join(", "))
}

/// kube's `validateResourceOverlap` and `validateResourceNames`.
fn validate_resources(resources: &[&str], path: &str, errors: &mut Vec<String>) {
    let parsed: Vec<(&str, &str)> = resources
        .iter()
        .map(|r| {
            let (resource, group) = r.split_once('.').unwrap_or((r, ""));
            (group, resource)
        })
        .collect();
    let (mut duplicate, mut overlap) = (false, false);
    for (i, a) in parsed.iter().enumerate() {
        for (j, b) in parsed.iter().enumerate() {
            if i == j {
                continue;
            }
            if a == b && !duplicate {
                duplicate = true;
                continue;
            }
            if overlap {
                continue;
            }
            if *a == ("*", "*") || (a.0 == b.0 && (a.1 == "*" || b.1 == "*")) {
                overlap = true;
            }
        }
    }
    let all = go_strings(resources);
    if duplicate {
        errors.push(format!(
            "{path}: Invalid value: {all}: the same resource cannot be specified multiple times"
        ));
    }
    if overlap {
        errors.push(format!(
            "{path}: Invalid value: {all}: using overlapping resources such as 'secrets' and '*.' in the same resource list is not allowed as they will be masked"
        ));
    }
    for (j, resource) in resources.iter().enumerate() {
        let (group, name) = parsed[j];
        let message = if resource.to_lowercase() != *resource {
            "resource name should not contain capital letters"
        } else if *resource == "*" {
            "use '*.' to encrypt all the resources from core API group or *.* to encrypt all resources"
        } else if matches!(
            *resource,
            "apiserveripinfo" | "serviceipallocations" | "servicenodeportallocations"
        ) {
            "resources which do not have REST API/s cannot be encrypted"
        } else if group == "events.k8s.io" {
            "'*.events.k8s.io' objects are stored using the 'events' API group in etcd. Use 'events' instead in the config file"
        } else if group == "extensions" {
            "'extensions' group has been removed and cannot be used for encryption"
        } else if group == "*" && name != "*" {
            "encrypting the same resource across groups is not supported"
        } else {
            continue;
        };
        errors.push(format!(
            "{path}[{j}]: Invalid value: {}: {message}",
            watchkeeper_api::field::go_quote(resource)
        ));
    }
}

/// One provider's keys (kube's `validateSingleProvider` and `validateKeys`).
fn provider_keys(provider: &Value, path: &str, errors: &mut Vec<String>) -> Vec<Keyed> {
    const KINDS: [&str; 5] = ["kms", "aesgcm", "aescbc", "secretbox", "identity"];
    let present: Vec<&str> = KINDS
        .iter()
        .copied()
        .filter(|kind| provider.get(*kind).is_some_and(|v| !v.is_null()))
        .collect();
    let kind = match present.as_slice() {
        [one] => *one,
        [] => {
            errors.push(format!("{path}: Invalid value: {provider}: provider does not contain any of the expected providers: KMS, AESGCM, AESCBC, Secretbox, Identity"));
            return Vec::new();
        }
        _ => {
            errors.push(format!("{path}: Invalid value: {provider}: more than one provider specified in a single element, should split into different list elements"));
            return Vec::new();
        }
    };
    let sizes: &[usize] = match kind {
        "identity" => {
            return vec![Keyed {
                prefix: Vec::new(),
                cipher: Cipher::Identity,
            }];
        }
        "kms" => {
            errors.push(format!(
                "{path}.kms: Invalid value: \"kms\": KMS providers are not supported by this server (they need a KMS plugin over gRPC); use aescbc, aesgcm or secretbox"
            ));
            return Vec::new();
        }
        "secretbox" => &[32],
        _ => &[16, 24, 32],
    };
    let keys_path = format!("{path}.{kind}.keys");
    let keys = list(provider.pointer(&format!("/{kind}/keys")));
    if keys.is_empty() {
        errors.push(format!(
            "{keys_path}: Required value: at least one keys is required"
        ));
        return Vec::new();
    }
    let mut keyed = Vec::new();
    for (i, key) in keys.iter().enumerate() {
        let path = format!("{keys_path}[{i}]");
        let name = key.get("name").and_then(Value::as_str).unwrap_or_default();
        let secret = key
            .get("secret")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if name.is_empty() {
            errors.push(format!(
                "{path}.name: Required value: name is a mandatory field for a key"
            ));
        }
        if secret.is_empty() {
            errors.push(format!(
                "{path}.secret: Required value: secret is a mandatory field for a key"
            ));
            continue;
        }
        let Ok(material) = base64::engine::general_purpose::STANDARD.decode(secret) else {
            errors.push(format!(
                "{path}.secret: Invalid value: \"REDACTED\": secrets must be base64 encoded"
            ));
            continue;
        };
        if !sizes.contains(&material.len()) {
            let expected: Vec<String> = sizes.iter().map(ToString::to_string).collect();
            errors.push(format!(
                "{path}.secret: Invalid value: \"REDACTED\": secret is not of the expected length, got {}, expected one of [{}]",
                material.len(),
                expected.join(" ")
            ));
            continue;
        }
        let cipher = match kind {
            "aescbc" => Cipher::AesCbc(material),
            "aesgcm" => Cipher::AesGcm(material),
            _ => {
                let mut fixed = [0u8; 32];
                fixed.copy_from_slice(&material);
                Cipher::Secretbox(fixed)
            }
        };
        keyed.push(Keyed {
            prefix: format!("k8s:enc:{kind}:v1:{name}:").into_bytes(),
            cipher,
        });
    }
    keyed
}

fn random<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    rand::RngCore::fill_bytes(&mut rand::rng(), &mut bytes);
    bytes
}

impl Cipher {
    fn seal(&self, key: &[u8], plain: &[u8]) -> Result<Vec<u8>, String> {
        match self {
            Cipher::Identity => Ok(plain.to_vec()),
            Cipher::AesCbc(material) => {
                use aes::cipher::{BlockEncryptMut, KeyIvInit, block_padding::Pkcs7};
                let iv = random::<16>();
                let sealed = match material.len() {
                    16 => cbc::Encryptor::<aes::Aes128>::new_from_slices(material, &iv)
                        .map(|c| c.encrypt_padded_vec_mut::<Pkcs7>(plain)),
                    24 => cbc::Encryptor::<aes::Aes192>::new_from_slices(material, &iv)
                        .map(|c| c.encrypt_padded_vec_mut::<Pkcs7>(plain)),
                    _ => cbc::Encryptor::<aes::Aes256>::new_from_slices(material, &iv)
                        .map(|c| c.encrypt_padded_vec_mut::<Pkcs7>(plain)),
                }
                .map_err(|error| error.to_string())?;
                Ok([&iv[..], &sealed].concat())
            }
            Cipher::AesGcm(material) => {
                let nonce = random::<12>();
                let payload = Payload {
                    msg: plain,
                    aad: key,
                };
                let sealed = match material.len() {
                    16 => aes_gcm::Aes128Gcm::new_from_slice(material)
                        .map_err(|e| e.to_string())?
                        .encrypt(&nonce.into(), payload),
                    24 => {
                        aes_gcm::AesGcm::<aes::Aes192, aes_gcm::aead::consts::U12>::new_from_slice(
                            material,
                        )
                        .map_err(|e| e.to_string())?
                        .encrypt(&nonce.into(), payload)
                    }
                    _ => aes_gcm::Aes256Gcm::new_from_slice(material)
                        .map_err(|e| e.to_string())?
                        .encrypt(&nonce.into(), payload),
                }
                .map_err(|_| "AES-GCM encryption failed".to_owned())?;
                Ok([&nonce[..], &sealed].concat())
            }
            Cipher::Secretbox(material) => {
                let nonce = random::<24>();
                let sealed = crypto_secretbox::XSalsa20Poly1305::new(material.into())
                    .encrypt(&nonce.into(), plain)
                    .map_err(|_| "secretbox encryption failed".to_owned())?;
                Ok([&nonce[..], &sealed].concat())
            }
        }
    }

    fn open(&self, key: &[u8], sealed: &[u8]) -> Result<Vec<u8>, String> {
        match self {
            Cipher::Identity => {
                if sealed.starts_with(ENCRYPTED) {
                    return Err("identity transformer tried to read encrypted data".to_owned());
                }
                Ok(sealed.to_vec())
            }
            Cipher::AesCbc(material) => {
                use aes::cipher::{BlockDecryptMut, KeyIvInit, block_padding::Pkcs7};
                if sealed.len() < 16 {
                    return Err("the stored data was shorter than the required size".to_owned());
                }
                let (iv, body) = sealed.split_at(16);
                if body.len() % 16 != 0 {
                    return Err("the stored data is not a multiple of the block size".to_owned());
                }
                match material.len() {
                    16 => cbc::Decryptor::<aes::Aes128>::new_from_slices(material, iv)
                        .map_err(|e| e.to_string())?
                        .decrypt_padded_vec_mut::<Pkcs7>(body),
                    24 => cbc::Decryptor::<aes::Aes192>::new_from_slices(material, iv)
                        .map_err(|e| e.to_string())?
                        .decrypt_padded_vec_mut::<Pkcs7>(body),
                    _ => cbc::Decryptor::<aes::Aes256>::new_from_slices(material, iv)
                        .map_err(|e| e.to_string())?
                        .decrypt_padded_vec_mut::<Pkcs7>(body),
                }
                .map_err(|_| "invalid PKCS7 data (empty or not padded)".to_owned())
            }
            Cipher::AesGcm(material) => {
                if sealed.len() < 12 {
                    return Err("the stored data was shorter than the required size".to_owned());
                }
                let (nonce, body) = sealed.split_at(12);
                let payload = Payload {
                    msg: body,
                    aad: key,
                };
                let nonce = aes_gcm::Nonce::from_slice(nonce);
                match material.len() {
                    16 => aes_gcm::Aes128Gcm::new_from_slice(material)
                        .map_err(|e| e.to_string())?
                        .decrypt(nonce, payload),
                    24 => {
                        aes_gcm::AesGcm::<aes::Aes192, aes_gcm::aead::consts::U12>::new_from_slice(
                            material,
                        )
                        .map_err(|e| e.to_string())?
                        .decrypt(nonce, payload)
                    }
                    _ => aes_gcm::Aes256Gcm::new_from_slice(material)
                        .map_err(|e| e.to_string())?
                        .decrypt(nonce, payload),
                }
                .map_err(|_| "cipher: message authentication failed".to_owned())
            }
            Cipher::Secretbox(material) => {
                if sealed.len() < 24 {
                    return Err("the stored data was shorter than the required size".to_owned());
                }
                let (nonce, body) = sealed.split_at(24);
                crypto_secretbox::XSalsa20Poly1305::new(material.into())
                    .decrypt(crypto_secretbox::Nonce::from_slice(nonce), body)
                    .map_err(|_| "secretbox: the stored data could not be decrypted (wrong key or changed data)".to_owned())
            }
        }
    }
}

impl Encryption {
    /// Counts one operation of `transformer` (its prefix; `identity` for the identity
    /// provider, empty when no provider matched).
    fn count(&self, direction: &'static str, transformer: &[u8], ok: bool) {
        let name = if transformer.is_empty() {
            "identity".to_owned()
        } else {
            String::from_utf8_lossy(transformer).into_owned()
        };
        let status = if ok { "OK" } else { "Unknown" };
        if let Ok(mut counts) = self.counts.lock() {
            *counts.entry((direction, name, status)).or_default() += 1;
        }
    }
}

impl ValueTransformer for Encryption {
    fn stored_form(&self, key: &[u8], value: Bytes) -> Result<Bytes, String> {
        let providers = self.providers(key);
        let Some(first) = providers.as_ref().and_then(|p| p.0.first()) else {
            return Ok(value);
        };
        if matches!(first.cipher, Cipher::Identity) {
            self.count("to_storage", &first.prefix, true);
            return Ok(value);
        }
        let sealed = first.cipher.seal(key, &value);
        self.count("to_storage", &first.prefix, sealed.is_ok());
        Ok([&first.prefix[..], &sealed?].concat().into())
    }

    fn read_stored(&self, key: &[u8], stored: Bytes) -> Result<Bytes, String> {
        let Some(providers) = self.providers(key) else {
            return Ok(stored);
        };
        for keyed in &providers.0 {
            let Some(body) = stored.strip_prefix(&keyed.prefix[..]) else {
                continue;
            };
            let opened = keyed.cipher.open(key, body);
            // kube: an identity provider's failure lets the next providers try.
            if opened.is_err() && keyed.prefix.is_empty() {
                continue;
            }
            self.count("from_storage", &keyed.prefix, opened.is_ok());
            return opened.map(Bytes::from);
        }
        self.count("from_storage", b"none", false);
        Err("no matching prefix found".to_owned())
    }

    fn operations(&self) -> Vec<((&'static str, String, &'static str), u64)> {
        self.counts
            .lock()
            .map(|counts| counts.iter().map(|(k, v)| (k.clone(), *v)).collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const KEY32: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
    const SECRET_KEY: &[u8] = b"/registry/secrets/default/s1";
    const PLAIN: &[u8] = br#"{"kind":"Secret","apiVersion":"v1","data":{"a":"Yg=="}}"#;

    fn config(resources: Value) -> Result<Encryption, String> {
        Encryption::from_value(
            &json!({"apiVersion": "apiserver.config.k8s.io/v1", "kind": "EncryptionConfiguration",
                "resources": resources}),
            "/registry",
        )
    }

    fn with(provider: Value) -> Encryption {
        config(json!([{"resources": ["secrets"], "providers": [provider, {"identity": {}}]}]))
            .unwrap()
    }

    #[test]
    fn values_written_by_kubes_transformers_are_read() {
        // Vectors made with Go's crypto/aes and crypto/cipher the way kube's aescbc and aesgcm
        // transformers write (IV or nonce first; GCM authenticating the storage key).
        let engine = base64::engine::general_purpose::STANDARD;
        let cbc = engine.decode("azhzOmVuYzphZXNjYmM6djE6a2V5MTpJVklWSVZJVklWSVZJVklWoWGOVg5AyMz2o/u3Ovn3UN+T0qfkbhM/TvoHID1VvFjVrNM203IYB5/5CFuG4W9Vw9D5VX6J7C/bJtOCeegL3A==").unwrap();
        let gcm = engine.decode("azhzOmVuYzphZXNnY206djE6a2V5MTpOT05DRU5PTkNFMTL26zgGvfKfP0Sk7itMELkOCDLDTmq7s6atLzO3xz5dSKXQk8q/F6l+w8z+yHtS3evRh/LajnEPEqpilohX7tGpWJ8NY6S2Cg==").unwrap();
        let keys = json!({"keys": [{"name": "key1", "secret": KEY32}]});
        let aescbc = with(json!({"aescbc": keys}));
        assert_eq!(aescbc.read_stored(SECRET_KEY, cbc.into()).unwrap(), PLAIN);
        let aesgcm = with(json!({"aesgcm": keys}));
        assert_eq!(
            aesgcm.read_stored(SECRET_KEY, gcm.clone().into()).unwrap(),
            PLAIN
        );
        // GCM authenticates the key: the same value under another key is refused.
        assert_eq!(
            aesgcm
                .read_stored(b"/registry/secrets/default/s2", gcm.into())
                .unwrap_err(),
            "cipher: message authentication failed"
        );
    }

    #[test]
    fn every_provider_and_key_size_round_trips() {
        let engine = base64::engine::general_purpose::STANDARD;
        for (kind, sizes) in [
            ("aescbc", &[16, 24, 32][..]),
            ("aesgcm", &[16, 24, 32]),
            ("secretbox", &[32]),
        ] {
            for &size in sizes {
                let secret = engine.encode(vec![7u8; size]);
                let encryption = with(json!({kind: {"keys": [{"name": "k", "secret": secret}]}}));
                let stored = encryption
                    .stored_form(SECRET_KEY, Bytes::from_static(PLAIN))
                    .unwrap();
                let prefix = format!("k8s:enc:{kind}:v1:k:");
                assert!(stored.starts_with(prefix.as_bytes()), "{kind}/{size}");
                assert!(
                    !stored.windows(6).any(|w| w == b"Secret"),
                    "{kind}/{size}: plaintext stored"
                );
                // A fresh IV or nonce each time.
                let again = encryption
                    .stored_form(SECRET_KEY, Bytes::from_static(PLAIN))
                    .unwrap();
                assert_ne!(stored, again);
                assert_eq!(
                    encryption.read_stored(SECRET_KEY, stored.clone()).unwrap(),
                    PLAIN
                );
                // A flipped byte is refused by the authenticated ciphers, and garbles or fails CBC.
                let mut changed = stored.to_vec();
                let last = changed.len() - 1;
                changed[last] ^= 1;
                let read = encryption.read_stored(SECRET_KEY, changed.into());
                if kind == "aescbc" {
                    assert_ne!(read.ok().as_deref(), Some(PLAIN));
                } else {
                    assert!(read.is_err(), "{kind}/{size}");
                }
            }
        }
    }

    #[test]
    fn rules_choose_resources_and_identity_reads_plain_values() {
        let keys = json!({"keys": [{"name": "k", "secret": KEY32}]});
        let encryption = config(json!([
            {"resources": ["secrets", "deployments.apps"], "providers": [{"aesgcm": keys}]},
            {"resources": ["*."], "providers": [{"secretbox": keys}, {"identity": {}}]},
            {"resources": ["*.*"], "providers": [{"identity": {}}, {"aescbc": keys}]},
        ]))
        .unwrap();
        let sealed = |key: &str| {
            let stored = encryption
                .stored_form(key.as_bytes(), Bytes::from_static(PLAIN))
                .unwrap();
            String::from_utf8_lossy(&stored[..stored.len().min(23)]).into_owned()
        };
        assert!(sealed("/registry/secrets/a/b").starts_with("k8s:enc:aesgcm:v1:k:"));
        assert!(sealed("/registry/deployments/a/b").starts_with("k8s:enc:aesgcm:v1:k:"));
        // The core group's other resources: secretbox (storage names included).
        assert!(sealed("/registry/configmaps/a/b").starts_with("k8s:enc:secretbox:v1:k:"));
        assert!(sealed("/registry/controllers/a/b").starts_with("k8s:enc:secretbox:v1:k:"));
        // Everything else (a custom resource, apps/replicasets): identity first, so plain.
        assert_eq!(
            sealed("/registry/example.com/widgets/a/b"),
            String::from_utf8_lossy(&PLAIN[..23])
        );
        assert_eq!(
            sealed("/registry/replicasets/a/b"),
            String::from_utf8_lossy(&PLAIN[..23])
        );
        // Outside the registry prefix: untouched.
        assert_eq!(
            sealed("/other/secrets/a/b"),
            String::from_utf8_lossy(&PLAIN[..23])
        );
        // [secretbox, identity] reads values stored before encryption; [aesgcm] alone does not.
        assert_eq!(
            encryption
                .read_stored(b"/registry/configmaps/a/b", Bytes::from_static(PLAIN))
                .unwrap(),
            PLAIN
        );
        assert_eq!(
            encryption
                .read_stored(b"/registry/secrets/a/b", Bytes::from_static(PLAIN))
                .unwrap_err(),
            "no matching prefix found"
        );
        // [identity, aescbc] reads values encrypted before encryption was turned off.
        let cbc_only = with(json!({"aescbc": keys}));
        let encrypted = cbc_only.stored_form(
            b"/registry/example.com/widgets/a/b",
            Bytes::from_static(PLAIN),
        );
        // (`with` configures secrets only: the widget's value was left plain.)
        assert_eq!(encrypted.unwrap(), PLAIN);
        let stored = cbc_only
            .stored_form(SECRET_KEY, Bytes::from_static(PLAIN))
            .unwrap();
        let widget_key = b"/registry/example.com/widgets/a/b";
        assert_eq!(encryption.read_stored(widget_key, stored).unwrap(), PLAIN);
    }

    #[test]
    fn configurations_kube_refuses_are_refused_with_its_errors() {
        let refused = |resources: Value| config(resources).unwrap_err();
        assert_eq!(
            refused(json!([])),
            "error while parsing file: resources: Required value: at least one resources is required"
        );
        assert_eq!(
            refused(
                json!([{"resources": ["secrets"], "providers": [{"aescbc": {"keys": [{"name": "k", "secret": "c2hvcnQ="}]}}]}])
            ),
            r#"error while parsing file: resources[0].providers[0].aescbc.keys[0].secret: Invalid value: "REDACTED": secret is not of the expected length, got 5, expected one of [16 24 32]"#
        );
        assert_eq!(
            refused(
                json!([{"resources": ["Secrets", "*"], "providers": [{"identity": {}, "aescbc": {"keys": []}}]}])
            ),
            concat!(
                // kube parses "*" as the core group's every resource: it overlaps "Secrets".
                r#"error while parsing file: [resources[0].resources: Invalid value: []string{"Secrets", "*"}: using overlapping resources such as 'secrets' and '*.' in the same resource list is not allowed as they will be masked, "#,
                r#"resources[0].resources[0]: Invalid value: "Secrets": resource name should not contain capital letters, "#,
                r#"resources[0].resources[1]: Invalid value: "*": use '*.' to encrypt all the resources from core API group or *.* to encrypt all resources, "#,
                r#"resources[0].providers[0]: Invalid value: {"aescbc":{"keys":[]},"identity":{}}: more than one provider specified in a single element, should split into different list elements]"#,
            )
        );
        assert_eq!(
            refused(
                json!([{"resources": ["secrets", "*.", "secrets"], "providers": [{"identity": {}}]}])
            ),
            concat!(
                r#"error while parsing file: [resources[0].resources: Invalid value: []string{"secrets", "*.", "secrets"}: the same resource cannot be specified multiple times, "#,
                r#"resources[0].resources: Invalid value: []string{"secrets", "*.", "secrets"}: using overlapping resources such as 'secrets' and '*.' in the same resource list is not allowed as they will be masked]"#,
            )
        );
        assert!(
            refused(json!([{"resources": ["secrets"], "providers": [{"kms": {"name": "x", "endpoint": "unix:///k.sock"}}]}]))
                .contains("KMS providers are not supported by this server")
        );
        assert!(
            refused(json!([{"resources": ["secrets"], "providers": [{"secretbox": {"keys": [{"name": "k", "secret": "%%%"}]}}]}]))
                .ends_with(r#"secret: Invalid value: "REDACTED": secrets must be base64 encoded"#)
        );
        // The key material never shows in the configuration's Debug.
        let encryption = with(json!({"aescbc": {"keys": [{"name": "k", "secret": KEY32}]}}));
        assert!(!format!("{encryption:?}").contains("0123456789"));
    }
}

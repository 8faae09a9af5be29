//! CertificateSigningRequests: their validation as kube-apiserver's
//! `pkg/apis/certificates/validation` applies it, and the strategies of the main endpoint,
//! `status` and the `approval` subresource (`kubectl certificate approve`) as
//! `pkg/registry/certificates/certificates/strategy.go` has them.
//!
//! ## Guarantees
//! - A request ([`validate`]) holds in `spec.request` a PEM `CERTIFICATE REQUEST` that parses
//!   and whose signature verifies with its own public key (kube's `ParseCSR` and
//!   `CheckSignature`; x509-parser with ring checks it); at least one usage, each of kube's 23
//!   (`spec.usages[i]: Unsupported value`), none twice; a signer name `<domain>/<path>` as
//!   kube's `ValidateSignerName` has it (not `kubernetes.io/legacy-unknown`); an
//!   `expirationSeconds` of at least 600; conditions with a type (once), a status `True`,
//!   `False` or `Unknown` (only `True` for `Approved`, `Denied` and `Failed`), not both
//!   `Approved` and `Denied`; a `status.certificate` of PEM `CERTIFICATE` blocks only, at least
//!   one, each parsing.
//! - An update removes no `Approved`, `Denied` or `Failed` condition; only `approval` adds or
//!   changes `Approved` / `Denied` conditions; only `status` sets the certificate, and only
//!   once. What a stored request already breaks (both conditions, duplicate or empty types,
//!   unknown or duplicate usages, the legacy signer, an unparsable certificate, a certificate
//!   left as it is) keeps being accepted, as kube's `getValidationOptions` has it.
//! - A write to the main endpoint keeps the stored spec and status, to `status` everything but
//!   the status ([`prepare_update`]); through `approval` only `status.conditions` (and the
//!   metadata the write path keeps: resourceVersion, managed fields) change, each condition
//!   getting `lastUpdateTime` = now when it has none, and `lastTransitionTime` from the stored
//!   condition of the same type and status when there is one (now otherwise), as
//!   `populateConditionTimestamps` does.
//! - A created request names its requester ([`prepare_create`]) and has no status.
//!
//! ## Differs from kube
//! - Go's error texts for a DER that does not parse (`asn1: ...`) are not reproduced: a
//!   request that is PEM but no certificate request reads `x509: malformed certificate
//!   request`, a certificate block that does not parse `x509: malformed certificate`; a
//!   `spec.request` that is not base64 (a decoding error in kube) is not a PEM request here.
//!   PEM headers in the certificate are not refused.
//! - The diff after `updates may not modify a condition` is the two lists as JSON.
//! - The `status` write does not fill condition timestamps.

use serde_json::{Map, Value, json};

use crate::field::{
    Cause, duplicate, forbidden, go_quote, invalid, not_supported, required, too_long,
};
use crate::names::{validate_dns1123_label, validate_dns1123_subdomain};
use crate::resources::ResourceDef;

/// The subresource's name.
pub const APPROVAL: &str = "approval";

/// Whether `def` is certificates.k8s.io certificatesigningrequests, which has `approval`.
#[must_use]
pub fn has_approval(def: &ResourceDef) -> bool {
    def.group == "certificates.k8s.io" && def.plural == "certificatesigningrequests"
}

fn conditions(object: &Value) -> Vec<Value> {
    object
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn text<'v>(value: &'v Value, key: &str) -> &'v str {
    value.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// kube's `allValidUsages`, sorted as `sets.String.List` sorts them.
const USAGES: [&str; 23] = [
    "any",
    "cert sign",
    "client auth",
    "code signing",
    "content commitment",
    "crl sign",
    "data encipherment",
    "decipher only",
    "digital signature",
    "email protection",
    "encipher only",
    "ipsec end system",
    "ipsec tunnel",
    "ipsec user",
    "key agreement",
    "key encipherment",
    "microsoft sgc",
    "netscape sgc",
    "ocsp signing",
    "s/mime",
    "server auth",
    "signing",
    "timestamping",
];

/// kube's `LegacyUnknownSignerName`, which only requests stored with it keep.
const LEGACY_SIGNER: &str = "kubernetes.io/legacy-unknown";

/// kube's `ParseCSR` message for anything that is not a PEM certificate request.
const NOT_A_REQUEST: &str = "PEM block type must be CERTIFICATE REQUEST";

/// The bytes of a `[]byte` field as JSON holds it (standard base64); `None` when it is not
/// base64.
fn bytes_of(value: Option<&Value>) -> Option<Vec<u8>> {
    use base64::Engine as _;
    match value.and_then(Value::as_str) {
        None => Some(Vec::new()),
        Some(text) => base64::engine::general_purpose::STANDARD.decode(text).ok(),
    }
}

/// Go's `%#v` of a `[]byte`: `[]byte{0x78, 0x79}`, `[]byte(nil)` when empty.
fn go_bytes(bytes: &[u8]) -> String {
    if bytes.is_empty() {
        return "[]byte(nil)".to_owned();
    }
    let items: Vec<String> = bytes.iter().map(|b| format!("0x{b:x}")).collect();
    format!("[]byte{{{}}}", items.join(", "))
}

/// The PEM certificate request in `pem`, parsed (kube's `ParseCSR`), with its signature
/// checked (`CheckSignature`) when `verify`.
fn parse_request<T>(
    pem: &[u8],
    verify: bool,
    read: impl FnOnce(&x509_parser::certification_request::X509CertificationRequest<'_>) -> T,
) -> Result<T, String> {
    use x509_parser::prelude::FromDer as _;
    let (_, block) = x509_parser::pem::parse_x509_pem(pem).map_err(|_| NOT_A_REQUEST.to_owned())?;
    if block.label != "CERTIFICATE REQUEST" {
        return Err(NOT_A_REQUEST.to_owned());
    }
    let (rest, request) =
        x509_parser::certification_request::X509CertificationRequest::from_der(&block.contents)
            .map_err(|_| "x509: malformed certificate request".to_owned())?;
    if !rest.is_empty() {
        return Err("asn1: syntax error: trailing data".to_owned());
    }
    if verify && request.verify_signature().is_err() {
        let key = request
            .certification_request_info
            .subject_pki
            .algorithm
            .algorithm
            .to_id_string();
        // Go's `CheckSignature` errors, by the key's algorithm.
        return Err(match key.as_str() {
            "1.2.840.113549.1.1.1" => "crypto/rsa: verification error",
            "1.2.840.10045.2.1" => "x509: ECDSA verification failure",
            "1.3.101.112" => "x509: Ed25519 verification failure",
            _ => "x509: cannot verify signature: algorithm unimplemented",
        }
        .to_owned());
    }
    Ok(read(&request))
}

/// The subject's organizations and common name of `request`, a CSR's base64 PEM (kube's
/// `ParseCSR`), for the admission plugins that read them.
///
/// # Errors
/// Why it does not parse, in kube's words.
pub fn csr_subject(request: &str) -> Result<(Vec<String>, String), String> {
    let pem = bytes_of(Some(&Value::String(request.to_owned())))
        .ok_or_else(|| NOT_A_REQUEST.to_owned())?;
    parse_request(&pem, false, |parsed| {
        let subject = &parsed.certification_request_info.subject;
        let organizations = subject
            .iter_organization()
            .map(|o| o.as_str().unwrap_or_default().to_owned())
            .collect();
        let common_name = subject
            .iter_common_name()
            .next()
            .and_then(|cn| cn.as_str().ok())
            .unwrap_or_default()
            .to_owned();
        (organizations, common_name)
    })
}

/// kube's `validateCertificate`: PEM `CERTIFICATE` blocks only, at least one, each parsing.
fn certificate_error(pem: &[u8]) -> Option<String> {
    use x509_parser::prelude::FromDer as _;
    if pem.is_empty() {
        return None;
    }
    let mut blocks = 0;
    for block in x509_parser::pem::Pem::iter_from_buffer(pem) {
        let Ok(block) = block else {
            break;
        };
        if block.label != "CERTIFICATE" {
            return Some(format!(
                "only CERTIFICATE PEM blocks are allowed, found {}",
                go_quote(&block.label)
            ));
        }
        blocks += 1;
        if x509_parser::certificate::X509Certificate::from_der(&block.contents).is_err() {
            return Some("x509: malformed certificate".to_owned());
        }
    }
    (blocks == 0).then(|| "must contain at least one CERTIFICATE PEM block".to_owned())
}

/// kube's `ValidateSignerName`.
fn signer_name(name: &str, causes: &mut Vec<Cause>) {
    const AT: &str = "spec.signerName";
    if name.is_empty() {
        causes.push(required(AT, ""));
        return;
    }
    let segments: Vec<&str> = name.split('/').collect();
    let [domain, path] = segments[..] else {
        causes.push(invalid(
            AT,
            &go_quote(name),
            "must be a fully qualified domain and path of the form 'example.com/signer-name'",
        ));
        return;
    };
    if domain.len() > 253 {
        causes.push(too_long(AT, 253));
    }
    let labels: Vec<&str> = domain.split('.').collect();
    for label in &labels {
        if let Err(message) = validate_dns1123_label(label) {
            causes.push(invalid(
                AT,
                &go_quote(domain),
                &format!("validating label {}: {message}", go_quote(label)),
            ));
            break;
        }
    }
    if labels.len() < 2 {
        causes.push(invalid(
            AT,
            &go_quote(domain),
            "should be a domain with at least two segments separated by dots",
        ));
    }
    for label in path.split('.') {
        if let Err(message) = validate_dns1123_subdomain(label) {
            causes.push(invalid(
                AT,
                &go_quote(path),
                &format!("validating label {}: {message}", go_quote(label)),
            ));
            break;
        }
    }
    if name.len() > 253 + 253 + 63 + 1 + 1 {
        causes.push(too_long(AT, 571));
    }
}

/// What a stored request `old` already breaks, which kube keeps tolerating on its updates
/// (`getValidationOptions`).
#[derive(Default)]
struct Tolerated {
    both: bool,
    legacy_signer: bool,
    duplicate_types: bool,
    empty_type: bool,
    arbitrary_certificate: bool,
    unknown_usages: bool,
    duplicate_usages: bool,
}

fn tolerated(object: &Value, old: Option<&Value>) -> Tolerated {
    let Some(old) = old else {
        return Tolerated::default();
    };
    let types: Vec<String> = conditions(old)
        .iter()
        .map(|c| text(c, "type").to_owned())
        .collect();
    let usages: Vec<&str> = old
        .pointer("/spec/usages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|u| u.as_str().unwrap_or(""))
        .collect();
    let certificate = |object: &Value| bytes_of(object.pointer("/status/certificate"));
    let old_certificate = certificate(old);
    Tolerated {
        both: types.iter().any(|t| t == "Approved") && types.iter().any(|t| t == "Denied"),
        legacy_signer: old.pointer("/spec/signerName").and_then(Value::as_str)
            == Some(LEGACY_SIGNER),
        duplicate_types: types
            .iter()
            .enumerate()
            .any(|(i, t)| types[..i].contains(t)),
        empty_type: types.iter().any(String::is_empty),
        arbitrary_certificate: certificate(object) == old_certificate
            || old_certificate.is_none_or(|c| certificate_error(&c).is_some()),
        unknown_usages: usages.iter().any(|u| !USAGES.contains(u)),
        duplicate_usages: usages
            .iter()
            .enumerate()
            .any(|(i, u)| usages[..i].contains(u)),
    }
}

/// `validateConditions`.
fn condition_causes(list: &[Value], allow: &Tolerated, causes: &mut Vec<Cause>) {
    let mut seen: Vec<&str> = Vec::new();
    let (mut approved, mut denied) = (false, false);
    for (index, condition) in list.iter().enumerate() {
        let at = format!("status.conditions[{index}]");
        let kind = text(condition, "type");
        let status = text(condition, "status");
        if kind.is_empty() && !allow.empty_type {
            causes.push(required(&format!("{at}.type"), ""));
        }
        let supported: &[&str] = if matches!(kind, "Approved" | "Denied" | "Failed") {
            &["True"]
        } else {
            &["False", "True", "Unknown"]
        };
        if status.is_empty() {
            causes.push(required(&format!("{at}.status"), ""));
        } else if !supported.contains(&status) {
            causes.push(not_supported(
                &format!("{at}.status"),
                &go_quote(status),
                supported,
            ));
        }
        if !allow.both {
            approved |= kind == "Approved";
            denied |= kind == "Denied";
            if matches!(kind, "Approved" | "Denied") && approved && denied {
                causes.push(invalid(
                    &format!("{at}.type"),
                    &go_quote(kind),
                    "Approved and Denied conditions are mutually exclusive",
                ));
            }
        }
        if !allow.duplicate_types && seen.contains(&kind) {
            causes.push(duplicate(&format!("{at}.type"), &go_quote(kind)));
        }
        seen.push(kind);
    }
}

/// The causes of the CertificateSigningRequest `object` written through `subresource` (`""`,
/// `status` or `approval`), updating `old`: kube's `ValidateCertificateSigningRequestCreate`,
/// `...Update`, `...StatusUpdate` and `...ApprovalUpdate` (see the module's guarantees).
pub(crate) fn validate(
    subresource: &str,
    object: &Value,
    old: Option<&Value>,
    causes: &mut Vec<Cause>,
) {
    let allow = tolerated(object, old);
    let request = object.pointer("/spec/request");
    let pem = bytes_of(request);
    let error = match &pem {
        Some(pem) => parse_request(pem, true, |_| ()).err(),
        None => Some(NOT_A_REQUEST.to_owned()),
    };
    if let Some(error) = error {
        causes.push(invalid(
            "spec.request",
            &go_bytes(pem.as_deref().unwrap_or_default()),
            &error,
        ));
    }
    let usages: Vec<&str> = object
        .pointer("/spec/usages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|u| u.as_str().unwrap_or(""))
        .collect();
    if usages.is_empty() {
        causes.push(required("spec.usages", ""));
    }
    if !allow.unknown_usages {
        for (i, usage) in usages.iter().enumerate() {
            if !USAGES.contains(usage) {
                causes.push(not_supported(
                    &format!("spec.usages[{i}]"),
                    &go_quote(usage),
                    &USAGES,
                ));
            }
        }
    }
    if !allow.duplicate_usages {
        for (i, usage) in usages.iter().enumerate() {
            if usages[..i].contains(usage) {
                causes.push(duplicate(&format!("spec.usages[{i}]"), &go_quote(usage)));
            }
        }
    }
    let signer = object
        .pointer("/spec/signerName")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !allow.legacy_signer && signer == LEGACY_SIGNER {
        causes.push(invalid(
            "spec.signerName",
            &go_quote(signer),
            "the legacy signerName is not allowed via this API version",
        ));
    } else {
        signer_name(signer, causes);
    }
    if let Some(seconds) = object
        .pointer("/spec/expirationSeconds")
        .and_then(Value::as_i64)
        .filter(|s| *s < 600)
    {
        causes.push(invalid(
            "spec.expirationSeconds",
            &seconds.to_string(),
            "may not specify a duration less than 600 seconds (10 minutes)",
        ));
    }
    let list = conditions(object);
    condition_causes(&list, &allow, causes);
    let certificate = bytes_of(object.pointer("/status/certificate"));
    if !allow.arbitrary_certificate {
        let error = match &certificate {
            Some(pem) => certificate_error(pem),
            None => Some("must contain at least one CERTIFICATE PEM block".to_owned()),
        };
        if let Some(error) = error {
            causes.push(invalid(
                "status.certificate",
                "\"<certificate data>\"",
                &error,
            ));
        }
    }
    let Some(old) = old else {
        return;
    };
    let old_list = conditions(old);
    let of_type = |list: &[Value], kind: &str| -> Vec<Value> {
        list.iter()
            .filter(|c| text(c, "type") == kind)
            .cloned()
            .collect()
    };
    for kind in ["Approved", "Denied", "Failed"] {
        if of_type(&list, kind).len() < of_type(&old_list, kind).len() {
            causes.push(forbidden(
                "status.conditions",
                &format!(
                    "updates may not remove a condition of type {}",
                    go_quote(kind)
                ),
            ));
        }
    }
    if subresource != APPROVAL {
        for kind in ["Approved", "Denied"] {
            let (was, is) = (of_type(&old_list, kind), of_type(&list, kind));
            if is.len() > was.len() {
                causes.push(forbidden(
                    "status.conditions",
                    &format!("updates may not add a condition of type {}", go_quote(kind)),
                ));
            } else if is.len() == was.len() && was != is {
                causes.push(forbidden(
                    "status.conditions",
                    &format!(
                        "updates may not modify a condition of type {}\n- {}\n+ {}\n",
                        go_quote(kind),
                        Value::Array(was),
                        Value::Array(is)
                    ),
                ));
            }
        }
    }
    let old_certificate = bytes_of(old.pointer("/status/certificate"));
    if certificate != old_certificate {
        if subresource != "status" {
            causes.push(forbidden(
                "status.certificate",
                "updates may not set certificate content",
            ));
        } else if old_certificate.is_some_and(|c| !c.is_empty()) {
            causes.push(forbidden(
                "status.certificate",
                "updates may not modify existing certificate content",
            ));
        }
    }
}

/// A write to the main endpoint or `status` of the stored request `old`, as kube's strategies
/// prepare it: the main endpoint keeps the stored spec and status (a request is immutable but
/// for its metadata); `status` keeps the stored spec and its `Approved` and `Denied`
/// conditions where the write has as many of each (`csrStatusStrategy`'s
/// `preserveConditionInstances`; a write that adds or removes one is refused by the
/// validation), and takes the rest as written, metadata included.
#[must_use]
pub fn prepare_update(subresource: &str, old: &Value, new: Value) -> Value {
    if subresource == "status" {
        let mut new = crate::crd::spec_kept(old, new);
        for kind in ["Approved", "Denied"] {
            preserve_condition_instances(&mut new, old, kind);
        }
        return new;
    }
    let mut new = new;
    if let Value::Object(map) = &mut new {
        for key in ["spec", "status"] {
            match old.get(key) {
                Some(value) => map.insert(key.to_owned(), value.clone()),
                None => map.remove(key),
            };
        }
    }
    new
}

/// kube's `preserveConditionInstances`: where `new` has as many `kind` conditions as `old`,
/// each takes the stored one's value.
fn preserve_condition_instances(new: &mut Value, old: &Value, kind: &str) {
    let of = |object: &Value| -> Vec<Value> {
        object
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|c| c.get("type").and_then(Value::as_str) == Some(kind))
            .cloned()
            .collect()
    };
    let stored = of(old);
    if stored.len() != of(new).len() {
        return;
    }
    let mut stored = stored.into_iter();
    if let Some(conditions) = new
        .pointer_mut("/status/conditions")
        .and_then(Value::as_array_mut)
    {
        for condition in conditions
            .iter_mut()
            .filter(|c| c.get("type").and_then(Value::as_str) == Some(kind))
        {
            if let Some(value) = stored.next() {
                *condition = value;
            }
        }
    }
}

/// A request as kube-apiserver creates it (`csrStrategy.PrepareForCreate`): the requesting
/// user's name, uid and groups replace whatever `spec.username`, `spec.uid`, `spec.groups` and
/// `spec.extra` say, and the status is emptied (nobody creates a request already approved).
pub fn prepare_create(object: &mut Value, username: &str, uid: &str, groups: &[String]) {
    if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
        for key in ["username", "uid", "groups", "extra"] {
            spec.remove(key);
        }
        if !username.is_empty() {
            spec.insert("username".to_owned(), json!(username));
        }
        if !uid.is_empty() {
            spec.insert("uid".to_owned(), json!(uid));
        }
        if !groups.is_empty() {
            spec.insert("groups".to_owned(), json!(groups));
        }
    }
    if let Value::Object(root) = object {
        root.insert("status".to_owned(), json!({}));
    }
}

/// The stored request `old` with the conditions of `new` (timestamps filled at `now`, RFC
/// 3339), and `new`'s resourceVersion and managed fields; [`validate`] then checks them.
#[must_use]
pub fn approval_update(old: &Value, new: &Value, now: &str) -> Value {
    let old_conditions = conditions(old);
    let mut wanted = conditions(new);
    for condition in &mut wanted {
        let Value::Object(map) = condition else {
            continue;
        };
        if map.get("lastUpdateTime").is_none_or(Value::is_null) {
            map.insert("lastUpdateTime".to_owned(), json!(now));
        }
        if map.get("lastTransitionTime").is_none_or(Value::is_null) {
            let kind = map.get("type").cloned().unwrap_or(Value::Null);
            let status = map.get("status").cloned().unwrap_or(Value::Null);
            let kept = old_conditions
                .iter()
                .find(|c| c.get("type") == Some(&kind) && c.get("status") == Some(&status))
                .and_then(|c| c.get("lastTransitionTime"))
                .filter(|t| !t.is_null())
                .cloned();
            map.insert(
                "lastTransitionTime".to_owned(),
                kept.unwrap_or_else(|| json!(now)),
            );
        }
    }
    let mut request = old.clone();
    if let Value::Object(root) = &mut request {
        let status = root
            .entry("status")
            .or_insert_with(|| Value::Object(Map::new()));
        if !status.is_object() {
            *status = Value::Object(Map::new());
        }
        if let Value::Object(status) = status {
            if wanted.is_empty() {
                status.remove("conditions");
            } else {
                status.insert("conditions".to_owned(), Value::Array(wanted));
            }
        }
    }
    for key in ["resourceVersion", "managedFields"] {
        if let Some(value) = new.pointer(&format!("/metadata/{key}"))
            && let Some(metadata) = request.get_mut("metadata").and_then(Value::as_object_mut)
        {
            metadata.insert(key.to_owned(), value.clone());
        }
    }
    request
}

#[cfg(test)]
mod tests {
    use base64::Engine as _;

    use super::*;

    /// A real request (openssl, P-256, `O=team, CN=alice`) and a self-signed certificate.
    const CSR_PEM: &str = include_str!("../testdata/csr.pem");
    const CERT_PEM: &str = include_str!("../testdata/cert.pem");

    fn b64(text: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(text)
    }

    fn csr(conditions: Value) -> Value {
        json!({"metadata": {"name": "c", "resourceVersion": "3"},
               "spec": {"request": b64(CSR_PEM), "signerName": "example.com/s", "usages": ["client auth"]},
               "status": {"conditions": conditions}})
    }

    /// The refusal of `object` written through `subresource` over `old`.
    fn refusal(subresource: &str, object: &Value, old: Option<&Value>) -> Option<String> {
        let def = crate::builtin_resources()
            .into_iter()
            .find(|d| d.plural == "certificatesigningrequests")
            .unwrap();
        crate::kinds::validate_write(&def, subresource, object, old)
            .err()
            .map(|e| e.message)
    }

    #[test]
    fn approval_changes_only_the_conditions() {
        let old = csr(json!([{"type": "Pending", "status": "True",
                              "lastTransitionTime": "2020-01-01T00:00:00Z"}]));
        let mut new = csr(json!([{"type": "Pending", "status": "True"},
                                 {"type": "Approved", "status": "True", "reason": "ok"}]));
        new["spec"]["signerName"] = json!("changed");
        new["metadata"]["resourceVersion"] = json!("4");
        let updated = approval_update(&old, &new, "2024-05-05T00:00:00Z");
        let mut expected = csr(json!([
            {"type": "Pending", "status": "True", "lastUpdateTime": "2024-05-05T00:00:00Z",
             "lastTransitionTime": "2020-01-01T00:00:00Z"},
            {"type": "Approved", "status": "True", "reason": "ok",
             "lastUpdateTime": "2024-05-05T00:00:00Z", "lastTransitionTime": "2024-05-05T00:00:00Z"}]));
        expected["metadata"]["resourceVersion"] = json!("4");
        assert_eq!(updated, expected);
        assert_eq!(refusal(APPROVAL, &updated, Some(&old)), None);
        // Elsewhere an Approved condition may not be added.
        assert_eq!(
            refusal("status", &updated, Some(&old)).unwrap(),
            "CertificateSigningRequest.certificates.k8s.io \"c\" is invalid: status.conditions: Forbidden: updates may not add a condition of type \"Approved\""
        );
    }

    #[test]
    fn a_created_request_names_its_requester() {
        let mut request = csr(json!([{"type": "Approved", "status": "True"}]));
        request["spec"]["username"] = json!("someone-else");
        request["spec"]["extra"] = json!({"k": ["v"]});
        prepare_create(&mut request, "alice", "", &["team".to_owned()]);
        assert_eq!(
            request["spec"],
            json!({"request": b64(CSR_PEM), "signerName": "example.com/s", "usages": ["client auth"],
                   "username": "alice", "groups": ["team"]})
        );
        assert_eq!(request["status"], json!({}));
    }

    #[test]
    fn requests_are_checked_as_kube_checks_them() {
        assert_eq!(refusal("", &csr(json!([])), None), None);
        assert_eq!(
            csr_subject(&b64(CSR_PEM)).unwrap(),
            (vec!["team".to_owned()], "alice".to_owned())
        );
        // The request probed against kube-apiserver.
        let bad = json!({"metadata": {"name": "c"},
            "spec": {"request": "eA==", "signerName": "bad", "usages": ["bogus"]}});
        assert_eq!(
            refusal("", &bad, None).unwrap(),
            "CertificateSigningRequest.certificates.k8s.io \"c\" is invalid: [spec.request: Invalid value: []byte{0x78}: PEM block type must be CERTIFICATE REQUEST, spec.usages[0]: Unsupported value: \"bogus\": supported values: \"any\", \"cert sign\", \"client auth\", \"code signing\", \"content commitment\", \"crl sign\", \"data encipherment\", \"decipher only\", \"digital signature\", \"email protection\", \"encipher only\", \"ipsec end system\", \"ipsec tunnel\", \"ipsec user\", \"key agreement\", \"key encipherment\", \"microsoft sgc\", \"netscape sgc\", \"ocsp signing\", \"s/mime\", \"server auth\", \"signing\", \"timestamping\", spec.signerName: Invalid value: \"bad\": must be a fully qualified domain and path of the form 'example.com/signer-name']"
        );
        let mut other = csr(json!([]));
        other["spec"]["usages"] = json!(["client auth", "client auth"]);
        other["spec"]["signerName"] = json!("example/Signer");
        other["spec"]["expirationSeconds"] = json!(60);
        other["status"]["certificate"] = json!(b64("-----BEGIN X-----\nAA==\n-----END X-----\n"));
        assert_eq!(
            refusal("", &other, None).unwrap(),
            "CertificateSigningRequest.certificates.k8s.io \"c\" is invalid: [spec.usages[1]: Duplicate value: \"client auth\", spec.signerName: Invalid value: \"example\": should be a domain with at least two segments separated by dots, spec.signerName: Invalid value: \"Signer\": validating label \"Signer\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*'), spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 600 seconds (10 minutes), status.certificate: Invalid value: \"<certificate data>\": only CERTIFICATE PEM blocks are allowed, found \"X\"]"
        );
    }

    #[test]
    fn a_signature_must_verify() {
        use x509_parser::prelude::FromDer as _;
        let (_, block) = x509_parser::pem::parse_x509_pem(CSR_PEM.as_bytes()).unwrap();
        let mut der = block.contents.clone();
        let last = der.len() - 1;
        der[last] ^= 1;
        assert!(
            x509_parser::certification_request::X509CertificationRequest::from_der(&der).is_ok()
        );
        let body = base64::engine::general_purpose::STANDARD.encode(&der);
        let lines: Vec<&str> = body
            .as_bytes()
            .chunks(64)
            .map(|c| std::str::from_utf8(c).unwrap())
            .collect();
        let pem = format!(
            "-----BEGIN CERTIFICATE REQUEST-----\n{}\n-----END CERTIFICATE REQUEST-----\n",
            lines.join("\n")
        );
        let mut forged = csr(json!([]));
        forged["spec"]["request"] = json!(b64(&pem));
        let message = refusal("", &forged, None).unwrap();
        assert!(
            message.ends_with(": x509: ECDSA verification failure"),
            "{message}"
        );
    }

    #[test]
    fn conditions_and_certificates_are_checked() {
        let old = csr(json!([]));
        let both = csr(json!([{"type": "Approved", "status": "True"},
                              {"type": "Denied", "status": "True"}]));
        assert_eq!(
            refusal(APPROVAL, &both, Some(&old)).unwrap(),
            "CertificateSigningRequest.certificates.k8s.io \"c\" is invalid: status.conditions[1].type: Invalid value: \"Denied\": Approved and Denied conditions are mutually exclusive"
        );
        let false_approval = csr(json!([{"type": "Approved", "status": "False"}]));
        assert_eq!(
            refusal(APPROVAL, &false_approval, Some(&old)).unwrap(),
            "CertificateSigningRequest.certificates.k8s.io \"c\" is invalid: status.conditions[0].status: Unsupported value: \"False\": supported values: \"True\""
        );
        let untyped = csr(json!([{"status": "True"}]));
        assert!(refusal(APPROVAL, &untyped, Some(&old)).is_some());
        let custom = csr(json!([{"type": "ApprovedFake", "status": "Unknown"}]));
        assert_eq!(refusal(APPROVAL, &custom, Some(&old)), None);
        let twice = csr(json!([{"type": "X", "status": "True"}, {"type": "X", "status": "False"}]));
        assert_eq!(
            refusal(APPROVAL, &twice, Some(&old)).unwrap(),
            "CertificateSigningRequest.certificates.k8s.io \"c\" is invalid: status.conditions[1].type: Duplicate value: \"X\""
        );
        // Stored duplicates keep being accepted.
        assert_eq!(refusal(APPROVAL, &twice, Some(&twice)), None);
        let approved = csr(json!([{"type": "Approved", "status": "True"}]));
        assert_eq!(
            refusal(APPROVAL, &old, Some(&approved)).unwrap(),
            "CertificateSigningRequest.certificates.k8s.io \"c\" is invalid: status.conditions: Forbidden: updates may not remove a condition of type \"Approved\""
        );
        // The certificate: only through status, only once.
        let mut signed = approved.clone();
        signed["status"]["certificate"] = json!(b64(CERT_PEM));
        assert_eq!(refusal("status", &signed, Some(&approved)), None);
        assert_eq!(
            refusal(APPROVAL, &signed, Some(&approved)).unwrap(),
            "CertificateSigningRequest.certificates.k8s.io \"c\" is invalid: status.certificate: Forbidden: updates may not set certificate content"
        );
        let mut resigned = signed.clone();
        resigned["status"]["certificate"] = json!(b64(&format!("{CERT_PEM}{CERT_PEM}")));
        assert_eq!(
            refusal("status", &resigned, Some(&signed)).unwrap(),
            "CertificateSigningRequest.certificates.k8s.io \"c\" is invalid: status.certificate: Forbidden: updates may not modify existing certificate content"
        );
        let mut garbage = approved.clone();
        garbage["status"]["certificate"] = json!(b64("not pem"));
        assert_eq!(
            refusal("status", &garbage, Some(&approved)).unwrap(),
            "CertificateSigningRequest.certificates.k8s.io \"c\" is invalid: status.certificate: Invalid value: \"<certificate data>\": must contain at least one CERTIFICATE PEM block"
        );
    }

    #[test]
    fn the_main_endpoint_keeps_spec_and_status() {
        let old = csr(json!([{"type": "Approved", "status": "True"}]));
        let mut new = csr(json!([]));
        new["spec"]["signerName"] = json!("other.com/x");
        new["metadata"]["labels"] = json!({"a": "b"});
        let kept = prepare_update("", &old, new);
        assert_eq!(kept["spec"], old["spec"]);
        assert_eq!(kept["status"], old["status"]);
        assert_eq!(kept["metadata"]["labels"], json!({"a": "b"}));
    }
}

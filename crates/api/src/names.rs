//! Kubernetes' name and label syntax, with its messages: DNS-1123 labels and subdomains, DNS-1035
//! labels, qualified names, label values, and the labels, annotations and finalizers of any
//! metadata (an object's, or an embedded resource's). A leaf: it imports nothing of the crate.

use serde_json::{Map, Value};

/// A cause of an Invalid error: `(field, message, reason)`.
type Cause = (String, String, String);

/// The largest total size of an object's annotations (keys plus values), Kubernetes' limit.
pub const ANNOTATIONS_SIZE_MAX_BYTES: usize = 256 * 1024;

pub(crate) const DNS1123_LABEL_MESSAGE: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

pub(crate) const DNS1123_SUBDOMAIN_MESSAGE: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

pub(crate) const DNS1035_LABEL_MESSAGE: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";

pub(crate) const QUALIFIED_NAME_PART_MESSAGE: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

pub(crate) const QUALIFIED_NAME_MESSAGE: &str = "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')";

pub(crate) const LABEL_VALUE_MESSAGE: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

pub(crate) fn is_lower_alnum(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

pub(crate) fn dns1123_label_ok(s: &str) -> bool {
    let bytes = s.as_bytes();
    !bytes.is_empty()
        && bytes.iter().all(|&b| is_lower_alnum(b) || b == b'-')
        && is_lower_alnum(bytes[0])
        && is_lower_alnum(bytes[bytes.len() - 1])
}

/// apimachinery's `IsDNS1123Label` (kube 1.33): its messages, in its order — the length, then
/// `must not contain dots` for a subdomain that is no label, else the pattern's message.
pub(crate) fn dns1123_label_problems(s: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if s.len() > 63 {
        problems.push("must be no more than 63 characters".to_owned());
    }
    if !dns1123_label_ok(s) {
        problems.push(if s.split('.').all(dns1123_label_ok) {
            "must not contain dots".to_owned()
        } else {
            DNS1123_LABEL_MESSAGE.to_owned()
        });
    }
    problems
}

/// The first of a check's messages, as the `validate_*` functions answer.
fn first(problems: Vec<String>) -> Result<(), String> {
    problems.into_iter().next().map_or(Ok(()), Err)
}

/// Checks a DNS-1123 label (at most 63 characters), with Kubernetes' messages.
///
/// # Errors
/// The reason the value is not a label (the first of [`dns1123_label_problems`]).
pub fn validate_dns1123_label(s: &str) -> Result<(), String> {
    first(dns1123_label_problems(s))
}

/// apimachinery's `IsDNS1123Subdomain`: its messages, in its order (the length, the pattern).
pub(crate) fn dns1123_subdomain_problems(s: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if s.len() > 253 {
        problems.push("must be no more than 253 characters".to_owned());
    }
    if !s.split('.').all(dns1123_label_ok) {
        problems.push(DNS1123_SUBDOMAIN_MESSAGE.to_owned());
    }
    problems
}

/// Checks a DNS-1123 subdomain (at most 253 characters), with Kubernetes' messages.
///
/// # Errors
/// The reason the value is not a subdomain.
pub fn validate_dns1123_subdomain(s: &str) -> Result<(), String> {
    first(dns1123_subdomain_problems(s))
}

pub(crate) fn validate_dns1035_label(s: &str) -> Result<(), String> {
    first(dns1035_label_problems(s))
}

/// apimachinery's `IsDNS1035Label`: its messages, in its order (the length, the pattern).
pub(crate) fn dns1035_label_problems(s: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if s.len() > 63 {
        problems.push("must be no more than 63 characters".to_owned());
    }
    if !dns1123_label_ok(s) || !s.as_bytes()[0].is_ascii_lowercase() {
        problems.push(DNS1035_LABEL_MESSAGE.to_owned());
    }
    problems
}

pub(crate) fn qualified_name_part_ok(s: &str) -> bool {
    let bytes = s.as_bytes();
    !bytes.is_empty()
        && bytes
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
}

/// apimachinery's `IsQualifiedName` (a label or annotation key: an optional DNS subdomain
/// prefix and `/`, then a name of at most 63 characters): its messages, in its order.
pub(crate) fn qualified_name_problems(key: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let parts: Vec<&str> = key.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                problems.push("prefix part must be non-empty".to_owned());
            } else {
                problems.extend(
                    dns1123_subdomain_problems(prefix)
                        .into_iter()
                        .map(|problem| format!("prefix part {problem}")),
                );
            }
            *name
        }
        _ => return vec![QUALIFIED_NAME_MESSAGE.to_owned()],
    };
    if name.is_empty() {
        problems.push("name part must be non-empty".to_owned());
    } else if name.len() > 63 {
        problems.push("name part must be no more than 63 characters".to_owned());
    }
    if !qualified_name_part_ok(name) {
        problems.push(QUALIFIED_NAME_PART_MESSAGE.to_owned());
    }
    problems
}

/// Checks a label or annotation key ([`qualified_name_problems`]).
///
/// # Errors
/// Kubernetes' message for the first rule broken.
pub fn validate_qualified_name(key: &str) -> Result<(), String> {
    first(qualified_name_problems(key))
}

/// apimachinery's `IsValidLabelValue`: its messages, in its order (the length, the pattern).
pub(crate) fn label_value_problems(value: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if value.len() > 63 {
        problems.push("must be no more than 63 characters".to_owned());
    }
    if !value.is_empty() && !qualified_name_part_ok(value) {
        problems.push(LABEL_VALUE_MESSAGE.to_owned());
    }
    problems
}

/// Checks a label value: empty, or at most 63 characters of the label alphabet.
///
/// # Errors
/// Kubernetes' message.
pub fn validate_label_value(value: &str) -> Result<(), String> {
    first(label_value_problems(value))
}

/// apimachinery's strict `IsValidIP` (kube 1.33, with `IPIsCanonical`), as `ValidateIPAddressName`
/// applies it to an IPAddress's name: its message, `Ok` when `name` is an address in the
/// canonical form Go's `netip.Addr.String` writes.
///
/// # Errors
/// The message.
pub(crate) fn validate_ip_address_name(name: &str) -> Result<(), String> {
    let Ok(address) = name.parse::<std::net::IpAddr>() else {
        return Err(if crate::strfmt::parse_ip_sloppy(name).is_some() {
            "must not have leading 0s".to_owned()
        } else {
            "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)".to_owned()
        });
    };
    if let std::net::IpAddr::V6(v6) = address
        && v6.to_ipv4_mapped().is_some()
    {
        return Err("must not be an IPv4-mapped IPv6 address".to_owned());
    }
    let canonical = address.to_string();
    if canonical == name {
        return Ok(());
    }
    Err(format!(
        "must be in canonical form ({})",
        watchkeeper_core::gotext::go_quote(&canonical)
    ))
}

/// apimachinery's `path.IsValidPathSegmentName` (`prefix`: `IsValidPathSegmentPrefix`, which
/// allows `.` and `..`): its messages for `name`, none when it is valid.
pub(crate) fn path_segment_problems(name: &str, prefix: bool) -> Vec<String> {
    if !prefix && (name == "." || name == "..") {
        return vec![format!("may not be '{name}'")];
    }
    ["/", "%"]
        .into_iter()
        .filter(|illegal| name.contains(illegal))
        .map(|illegal| format!("may not contain '{illegal}'"))
        .collect()
}

/// `field.Invalid(field, value, message)` of a string value (Go's `%q`).
pub(crate) fn invalid_value(field: &str, value: &str, message: &str) -> Cause {
    crate::field::invalid(field, &watchkeeper_core::gotext::go_quote(value), message)
}

pub(crate) fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Validates the labels, annotations and finalizers of `meta`, the metadata at `at`
/// (`metadata`, or an embedded resource's), collecting kube's Invalid causes
/// (`ValidateLabels`, `ValidateAnnotations` — keys checked lowercased —,
/// `ValidateFinalizerName`); `Err` says which of them has the wrong JSON type.
pub(crate) fn validate_meta_maps(
    at: &str,
    meta: &Map<String, Value>,
    causes: &mut Vec<Cause>,
) -> Result<(), String> {
    for key in ["labels", "annotations"] {
        let map = match meta.get(key) {
            None | Some(Value::Null) => continue,
            Some(Value::Object(map)) => map,
            Some(other) => {
                return Err(format!(
                    "{at}.{key} must be an object of strings, not {}",
                    type_name(other)
                ));
            }
        };
        // The field's path is made only for a cause (most writes have none).
        let field = || format!("{at}.{key}");
        let mut total = 0usize;
        for (name, value) in map {
            let Value::String(value) = value else {
                return Err(format!(
                    "{at}.{key}[{name:?}] must be a string, not {}",
                    type_name(value)
                ));
            };
            total += name.len() + value.len();
            let problems = if key == "annotations" {
                // Lowercased into a copy only when it changes the key.
                if name
                    .bytes()
                    .all(|b| b.is_ascii() && !b.is_ascii_uppercase())
                {
                    qualified_name_problems(name)
                } else {
                    qualified_name_problems(&name.to_lowercase())
                }
            } else {
                qualified_name_problems(name)
            };
            for message in problems {
                causes.push(invalid_value(&field(), name, &message));
            }
            if key == "labels" {
                for message in label_value_problems(value) {
                    causes.push(invalid_value(&field(), value, &message));
                }
            }
        }
        if key == "annotations" && total > ANNOTATIONS_SIZE_MAX_BYTES {
            causes.push((
                field(),
                format!("Too long: may not be more than {ANNOTATIONS_SIZE_MAX_BYTES} bytes"),
                "FieldValueTooLong".to_owned(),
            ));
        }
    }
    for name in meta
        .get("finalizers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        for message in qualified_name_problems(name) {
            causes.push(invalid_value(&format!("{at}.finalizers"), name, &message));
        }
    }
    Ok(())
}

/// kube's `validation.IsConfigMapKey` message.
const CONFIG_KEY_MESSAGE: &str = "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";

/// `validation.IsConfigMapKey`, each problem a cause at the path `path` makes (called only
/// for a key with a problem: a write validates every key of its config map or secret).
pub(crate) fn config_key(path: impl FnOnce() -> String, key: &str, causes: &mut Vec<Cause>) {
    use crate::field::{go_quote, invalid};
    let too_long = key.len() > 253;
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    let not_allowed = key.is_empty() || !key.chars().all(allowed);
    let dots = if key == "." {
        Some("must not be '.'")
    } else if key == ".." {
        Some("must not be '..'")
    } else if key.starts_with("..") {
        Some("must not start with '..'")
    } else {
        None
    };
    if !too_long && !not_allowed && dots.is_none() {
        return;
    }
    let path = path();
    let quoted = go_quote(key);
    if too_long {
        causes.push(invalid(
            &path,
            &quoted,
            "must be no more than 253 characters",
        ));
    }
    if not_allowed {
        causes.push(invalid(&path, &quoted, CONFIG_KEY_MESSAGE));
    }
    if let Some(message) = dots {
        causes.push(invalid(&path, &quoted, message));
    }
}

/// Whether `byte` stands for itself in a URL path segment: RFC 3986's `pchar` without `%`
/// (unreserved characters, sub-delimiters, `:` and `@`). Escaping one of these changes nothing
/// (RFC 3986 §6.2.2.2).
#[must_use]
pub fn plain_in_path_segment(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@".contains(&byte)
}

/// `segment` (a name) as a URL path segment: every byte that does not stand for itself
/// ([`plain_in_path_segment`]) escaped in upper-case hex (`a b` → `a%20b`), the spelling the
/// server's own request paths have.
#[must_use]
pub fn escape_path_segment(segment: &str) -> std::borrow::Cow<'_, str> {
    if segment.bytes().all(plain_in_path_segment) {
        return std::borrow::Cow::Borrowed(segment);
    }
    let mut escaped = String::with_capacity(segment.len() + 8);
    for byte in segment.bytes() {
        if plain_in_path_segment(byte) {
            escaped.push(char::from(byte));
        } else {
            escaped.push_str(&format!("%{byte:02X}"));
        }
    }
    std::borrow::Cow::Owned(escaped)
}

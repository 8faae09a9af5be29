//! Ingresses', IngressClasses', NetworkPolicies', ServiceCIDRs' and IPAddresses' rules as kube-apiserver's
//! `pkg/apis/networking/validation` applies them, in kube's order.
//!
//! ## Guarantees
//! - An Ingress has `rules` or a `defaultBackend` (`spec: Invalid value:
//!   []networking.IngressRule(nil): either `defaultBackend` or `rules` must be specified`);
//!   each rule's host is a DNS subdomain (or a wildcard one), not an IP; each HTTP path has a
//!   `pathType` (`Exact`, `Prefix`, `ImplementationSpecific`), an absolute path without `//`,
//!   `/./`, `/../`, `%2f` or a trailing `/.` / `/..` for the first two; each backend is a
//!   resource or a service, a service a DNS-1035 name and a port name or number, not both; an
//!   `ingressClassName` is a DNS subdomain.
//! - An IngressClass's `controller` is a domain-prefixed path (`acme.io/foo`) of at most 250
//!   characters, and never changes.
//! - A NetworkPolicy's pod selector is a label selector; each rule's ports have a protocol
//!   `TCP`, `UDP` or `SCTP`, a port number between 1 and 65535 or a port name, an `endPort`
//!   only after a numeric port and not below it; each peer is exactly one of a pod selector, a
//!   namespace selector (both together allowed) or an IP block; at most two policy types,
//!   `Ingress` or `Egress`.
//! - An Ingress's TLS hosts are (wildcard) DNS subdomains and its secret names DNS
//!   subdomains; a NetworkPolicy's IP block has a CIDR, and exceptions that are strict
//!   subsets of it.
//! - A ServiceCIDR has one or two CIDRs (two of different families), each strict (no
//!   leading zeros, no IPv4-mapped address, no bits past the prefix), and `spec.cidrs` never
//!   changes; an IPAddress has a `parentRef` whose `resource` and `name` are path segments
//!   (and `group` a DNS subdomain), never changed (its name, an address in canonical form,
//!   is checked with the metadata: `names::validate_ip_address_name`).
//! - Not checked (kube checks them): a resource backend's reference, an IngressClass's
//!   parameters.

use serde_json::Value;

use super::access::{get, list, text};
use super::common::CIDR_MESSAGE;
use super::pod_spec;
use crate::field::{Cause, forbidden, go_quote, invalid, not_supported, required, too_long};
use crate::names::{validate_dns1035_label, validate_dns1123_subdomain};

/// kube's `maxLenIngressClassController`.
const MAX_CONTROLLER_LENGTH: usize = 250;

const WILDCARD_MESSAGE: &str = "a wildcard DNS-1123 subdomain must start with '*.', followed by a valid DNS subdomain, which must consist of lower case alphanumeric characters, '-' or '.' and end with an alphanumeric character (e.g. '*.example.com', regex used for validation is '\\*\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

/// The causes of the Ingress `object`.
pub(super) fn ingress(object: &Value, causes: &mut Vec<Cause>) {
    let spec = object.get("spec").unwrap_or(&Value::Null);
    let rules = get(spec, "rules");
    let backend = get(spec, "defaultBackend");
    if list(spec, "rules").is_empty() && backend.is_none() {
        let printed = if rules.is_some_and(Value::is_array) {
            "[]networking.IngressRule{}"
        } else {
            "[]networking.IngressRule(nil)"
        };
        causes.push(invalid(
            "spec",
            printed,
            "either `defaultBackend` or `rules` must be specified",
        ));
    }
    if let Some(backend) = backend {
        ingress_backend(backend, "spec.defaultBackend", causes);
    }
    for (i, rule) in list(spec, "rules").iter().enumerate() {
        let at = format!("spec.rules[{i}]");
        let host = text(rule, "host");
        if !host.is_empty() {
            let quoted = go_quote(host);
            if crate::strfmt::is_ip_sloppy(host) {
                causes.push(invalid(
                    &format!("{at}.host"),
                    &quoted,
                    "must be a DNS name, not an IP address",
                ));
            }
            if host.contains('*') {
                wildcard_host(host, &format!("{at}.host"), causes);
            } else if let Err(message) = validate_dns1123_subdomain(host) {
                causes.push(invalid(&format!("{at}.host"), &quoted, &message));
            }
        }
        if let Some(http) = get(rule, "http") {
            let paths = list(http, "paths");
            if paths.is_empty() {
                causes.push(required(&format!("{at}.http.paths"), ""));
            }
            for (j, path) in paths.iter().enumerate() {
                http_path(path, &format!("{at}.http.paths[{j}]"), causes);
            }
        }
    }
    for (i, tls) in list(spec, "tls").iter().enumerate() {
        for (j, host) in list(tls, "hosts").iter().enumerate() {
            let host = host.as_str().unwrap_or("");
            let at = format!("spec.tls[{i}].hosts[{j}]");
            if host.contains('*') {
                wildcard_host(host, &at, causes);
            } else if let Err(message) = validate_dns1123_subdomain(host) {
                causes.push(invalid(&at, &go_quote(host), &message));
            }
        }
        let secret = text(tls, "secretName");
        if !secret.is_empty()
            && let Err(message) = validate_dns1123_subdomain(secret)
        {
            causes.push(invalid(
                &format!("spec.tls[{i}].secretName"),
                &go_quote(secret),
                &message,
            ));
        }
    }
    if let Some(class) = get(spec, "ingressClassName").and_then(Value::as_str)
        && let Err(message) = validate_dns1123_subdomain(class)
    {
        causes.push(invalid("spec.ingressClassName", &go_quote(class), &message));
    }
}

/// apimachinery's `IsWildcardDNS1123Subdomain`.
fn wildcard_host(host: &str, at: &str, causes: &mut Vec<Cause>) {
    if host.len() > 253 {
        causes.push(invalid(
            at,
            &go_quote(host),
            "must be no more than 253 characters",
        ));
    }
    let subdomain = host.strip_prefix("*.");
    if subdomain.is_none_or(|s| validate_dns1123_subdomain(s).is_err()) {
        causes.push(invalid(at, &go_quote(host), WILDCARD_MESSAGE));
    }
}

/// `validateHTTPIngressPath`.
fn http_path(path: &Value, at: &str, causes: &mut Vec<Cause>) {
    let Some(kind) = get(path, "pathType").and_then(Value::as_str) else {
        causes.push(required(
            &format!("{at}.pathType"),
            "pathType must be specified",
        ));
        return;
    };
    let text = text(path, "path");
    let here = format!("{at}.path");
    match kind {
        "Exact" | "Prefix" => {
            if !text.starts_with('/') {
                causes.push(invalid(&here, &go_quote(text), "must be an absolute path"));
            }
            for sequence in ["//", "/./", "/../", "%2f", "%2F"] {
                if text.contains(sequence) {
                    causes.push(invalid(
                        &here,
                        &go_quote(text),
                        &format!("must not contain '{sequence}'"),
                    ));
                }
            }
            for suffix in ["/..", "/."] {
                if text.ends_with(suffix) {
                    causes.push(invalid(
                        &here,
                        &go_quote(text),
                        &format!("cannot end with '{suffix}'"),
                    ));
                }
            }
        }
        "ImplementationSpecific" => {
            if !text.is_empty() && !text.starts_with('/') {
                causes.push(invalid(&here, &go_quote(text), "must be an absolute path"));
            }
        }
        other => causes.push(not_supported(
            &format!("{at}.pathType"),
            &go_quote(other),
            &["Exact", "ImplementationSpecific", "Prefix"],
        )),
    }
    ingress_backend(
        path.get("backend").unwrap_or(&Value::Null),
        &format!("{at}.backend"),
        causes,
    );
}

/// `validateIngressBackend` (a resource backend's reference is not checked).
fn ingress_backend(backend: &Value, at: &str, causes: &mut Vec<Cause>) {
    let (resource, service) = (get(backend, "resource"), get(backend, "service"));
    match (resource, service) {
        (Some(_), Some(_)) => causes.push(invalid(
            at,
            "\"\"",
            "cannot set both resource and service backends",
        )),
        (Some(_), None) => {}
        (None, Some(service)) => {
            let name = text(service, "name");
            if name.is_empty() {
                causes.push(required(&format!("{at}.service.name"), ""));
            } else if let Err(message) = validate_dns1035_label(name) {
                causes.push(invalid(
                    &format!("{at}.service.name"),
                    &go_quote(name),
                    &message,
                ));
            }
            let port = service.get("port").unwrap_or(&Value::Null);
            let port_name = text(port, "name");
            let number = port.get("number").and_then(Value::as_i64).unwrap_or(0);
            if !port_name.is_empty() && number != 0 {
                causes.push(invalid(
                    at,
                    "\"\"",
                    "cannot set both port name & port number",
                ));
            } else if !port_name.is_empty() {
                for message in pod_spec::port_name_messages(port_name) {
                    causes.push(invalid(
                        &format!("{at}.service.port.name"),
                        &go_quote(port_name),
                        message,
                    ));
                }
            } else if number != 0 {
                port_number(number, &format!("{at}.service.port.number"), causes);
            } else {
                causes.push(required(at, "port name or number is required"));
            }
        }
        (None, None) => causes.push(invalid(
            at,
            "\"\"",
            "resource or service backend is required",
        )),
    }
}

/// `IsValidPortNum`.
fn port_number(number: i64, at: &str, causes: &mut Vec<Cause>) {
    if !(1..=65535).contains(&number) {
        causes.push(invalid(
            at,
            &number.to_string(),
            "must be between 1 and 65535, inclusive",
        ));
    }
}

/// The causes of the IngressClass `object` (updating `old`).
pub(super) fn ingress_class(object: &Value, old: Option<&Value>, causes: &mut Vec<Cause>) {
    let controller = object
        .pointer("/spec/controller")
        .and_then(Value::as_str)
        .unwrap_or("");
    let at = "spec.controller";
    if controller.len() > MAX_CONTROLLER_LENGTH {
        causes.push(too_long(at, MAX_CONTROLLER_LENGTH as i64));
    }
    domain_prefixed_path(controller, at, causes);
    if let Some(old) = old {
        let before = old
            .pointer("/spec/controller")
            .and_then(Value::as_str)
            .unwrap_or("");
        if before != controller {
            causes.push(invalid(at, &go_quote(controller), "field is immutable"));
        }
    }
}

/// apimachinery's `IsDomainPrefixedPath`.
pub(super) fn domain_prefixed_path(path: &str, at: &str, causes: &mut Vec<Cause>) {
    if path.is_empty() {
        causes.push(required(at, ""));
        return;
    }
    let Some((host, rest)) = path
        .split_once('/')
        .filter(|(h, r)| !h.is_empty() && !r.is_empty())
    else {
        causes.push(invalid(
            at,
            &go_quote(path),
            "must be a domain-prefixed path (such as \"acme.io/foo\")",
        ));
        return;
    };
    if let Err(message) = validate_dns1123_subdomain(host) {
        causes.push(invalid(at, &go_quote(host), &message));
    }
    let path_ok = rest
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"/-._~%!$&'()*+,;=:".contains(&b));
    if !path_ok {
        causes.push(invalid(
            at,
            &go_quote(rest),
            "Invalid path (regex used for validation is '[A-Za-z0-9/\\-._~%!$&'()*+,;=:]+')",
        ));
    }
}

/// The causes of the IPAddress `object` (updating `old`): `ValidateIPAddress` (the name is
/// checked with the metadata: `names::validate_ip_address_name`) and `ValidateIPAddressUpdate`.
pub(super) fn ip_address(object: &Value, old: Option<&Value>, causes: &mut Vec<Cause>) {
    let parent = object.pointer("/spec/parentRef").filter(|p| !p.is_null());
    match parent {
        None => causes.push(required("spec.parentRef", "")),
        Some(parent) => {
            let group = text(parent, "group");
            if !group.is_empty()
                && let Err(message) = validate_dns1123_subdomain(group)
            {
                causes.push(invalid("spec.parentRef.group", &go_quote(group), &message));
            }
            for (key, needed) in [("resource", true), ("name", true), ("namespace", false)] {
                let value = text(parent, key);
                let at = format!("spec.parentRef.{key}");
                if value.is_empty() {
                    if needed {
                        causes.push(required(&at, ""));
                    }
                    continue;
                }
                for message in crate::names::path_segment_problems(value, false) {
                    causes.push(invalid(&at, &go_quote(value), &message));
                }
            }
        }
    }
    if let Some(old) = old {
        let before = old.pointer("/spec/parentRef").filter(|p| !p.is_null());
        if before != parent {
            causes.push(invalid(
                "spec.parentRef",
                &parent_reference_printed(parent),
                "field is immutable",
            ));
        }
    }
}

/// A `*networking.ParentReference` as Go's `%#v` prints it.
fn parent_reference_printed(parent: Option<&Value>) -> String {
    let Some(parent) = parent else {
        return "(*networking.ParentReference)(nil)".to_owned();
    };
    format!(
        "&networking.ParentReference{{Group:{}, Resource:{}, Namespace:{}, Name:{}}}",
        go_quote(text(parent, "group")),
        go_quote(text(parent, "resource")),
        go_quote(text(parent, "namespace")),
        go_quote(text(parent, "name")),
    )
}

/// apimachinery's strict `IsValidCIDR` (kube 1.33): its message for `cidr`, `None` when valid.
fn strict_cidr_problem(cidr: &str) -> Option<&'static str> {
    let Some((address, prefix)) = cidr.split_once('/') else {
        return Some(CIDR_MESSAGE);
    };
    if !crate::strfmt::is_cidr_sloppy(cidr) {
        return Some(CIDR_MESSAGE);
    }
    let leading_zero = prefix.len() > 1 && prefix.starts_with('0');
    let Ok(parsed) = address.parse::<std::net::IpAddr>() else {
        return Some("must not have leading 0s in IP or prefix length");
    };
    if leading_zero {
        return Some("must not have leading 0s in IP or prefix length");
    }
    if let std::net::IpAddr::V6(v6) = parsed
        && v6.to_ipv4_mapped().is_some()
    {
        return Some("must not have an IPv4-mapped IPv6 address");
    }
    let (_, network, _) = cidr_network(cidr)?;
    let bits = match parsed {
        std::net::IpAddr::V4(v4) => u128::from(u32::from(v4)),
        std::net::IpAddr::V6(v6) => u128::from(v6),
    };
    (bits != network).then_some("must not have bits set beyond the prefix length")
}

/// The causes of the ServiceCIDR `object` (updating `old`): `ValidateServiceCIDR` and
/// `ValidateServiceCIDRUpdate` (`spec.cidrs` never changes). A status write passes: kube
/// checks only its metadata there.
pub(super) fn service_cidr(object: &Value, old: Option<&Value>, causes: &mut Vec<Cause>) {
    let cidrs = object.pointer("/spec/cidrs").filter(|c| !c.is_null());
    let items = list(object.get("spec").unwrap_or(&Value::Null), "cidrs");
    let texts: Vec<&str> = items.iter().map(|c| c.as_str().unwrap_or("")).collect();
    let at = "spec.cidrs";
    let spec_printed = || {
        let quoted: Vec<String> = texts.iter().map(|c| go_quote(c)).collect();
        format!(
            "networking.ServiceCIDRSpec{{CIDRs:[]string{{{}}}}}",
            quoted.join(", ")
        )
    };
    if texts.is_empty() {
        causes.push(required(at, "at least one CIDR required"));
    } else if texts.len() > 2 {
        causes.push(invalid(at, &spec_printed(), "may only hold up to 2 values"));
    } else if texts.len() == 2
        && !matches!(
            (cidr_network(texts[0]), cidr_network(texts[1])),
            (Some((a, _, _)), Some((b, _, _))) if a != b
        )
    {
        causes.push(invalid(
            at,
            &spec_printed(),
            "may specify no more than one IP for each IP family, i.e 192.168.0.0/24 and 2001:db8::/64",
        ));
    } else {
        for (i, cidr) in texts.iter().enumerate() {
            if let Some(message) = strict_cidr_problem(cidr) {
                causes.push(invalid(&format!("{at}[{i}]"), &go_quote(cidr), message));
            }
        }
    }
    if let Some(old) = old {
        let before = old.pointer("/spec/cidrs").filter(|c| !c.is_null());
        if before != cidrs {
            let quoted: Vec<String> = texts.iter().map(|c| go_quote(c)).collect();
            let printed = if cidrs.is_none() {
                "[]string(nil)".to_owned()
            } else {
                format!("[]string{{{}}}", quoted.join(", "))
            };
            causes.push(invalid(at, &printed, "field is immutable"));
        }
    }
}

/// The causes of the NetworkPolicy `object`.
pub(super) fn network_policy(object: &Value, causes: &mut Vec<Cause>) {
    let spec = object.get("spec").unwrap_or(&Value::Null);
    pod_spec::label_selector(spec.get("podSelector"), "spec.podSelector", causes);
    for (direction, peers) in [("ingress", "from"), ("egress", "to")] {
        for (i, rule) in list(spec, direction).iter().enumerate() {
            let at = format!("spec.{direction}[{i}]");
            for (j, port) in list(rule, "ports").iter().enumerate() {
                policy_port(port, &format!("{at}.ports[{j}]"), causes);
            }
            for (j, peer) in list(rule, peers).iter().enumerate() {
                policy_peer(peer, &format!("{at}.{peers}[{j}]"), causes);
            }
        }
    }
    let types = list(spec, "policyTypes");
    if types.len() > 2 {
        causes.push(invalid(
            "spec.policyTypes",
            &Value::Array(types.to_vec()).to_string(),
            "may not specify more than two policyTypes",
        ));
        return;
    }
    for (i, kind) in types.iter().enumerate() {
        let kind = kind.as_str().unwrap_or("");
        if !matches!(kind, "Ingress" | "Egress") {
            causes.push(not_supported(
                &format!("spec.policyTypes[{i}]"),
                &go_quote(kind),
                &["Ingress", "Egress"],
            ));
        }
    }
}

/// `ValidateNetworkPolicyPort`.
fn policy_port(port: &Value, at: &str, causes: &mut Vec<Cause>) {
    if let Some(protocol) = get(port, "protocol").and_then(Value::as_str)
        && !matches!(protocol, "TCP" | "UDP" | "SCTP")
    {
        causes.push(not_supported(
            &format!("{at}.protocol"),
            &go_quote(protocol),
            &["TCP", "UDP", "SCTP"],
        ));
    }
    let end = get(port, "endPort").and_then(Value::as_i64);
    let end_path = format!("{at}.endPort");
    match get(port, "port") {
        Some(Value::String(name)) => {
            if let Some(end) = end {
                causes.push(invalid(
                    &end_path,
                    &end.to_string(),
                    "may not be specified when `port` is non-numeric",
                ));
            }
            for message in pod_spec::port_name_messages(name) {
                causes.push(invalid(&format!("{at}.port"), &go_quote(name), message));
            }
        }
        Some(number) => {
            let number = number.as_i64().unwrap_or(0);
            port_number(number, &format!("{at}.port"), causes);
            if let Some(end) = end {
                if end < number {
                    causes.push(invalid(
                        &end_path,
                        &number.to_string(),
                        "must be greater than or equal to `port`",
                    ));
                }
                port_number(end, &end_path, causes);
            }
        }
        None => {
            if let Some(end) = end {
                causes.push(invalid(
                    &end_path,
                    &end.to_string(),
                    "may not be specified when `port` is not specified",
                ));
            }
        }
    }
}

/// A CIDR's network address (its host bits cleared) and prefix length, as 128-bit numbers of
/// its family (`None` for a form the standard parser refuses but Go's sloppy one reads).
fn cidr_network(cidr: &str) -> Option<(bool, u128, u32)> {
    let (address, prefix) = cidr.split_once('/')?;
    let prefix: u32 = prefix.parse().ok()?;
    let (v6, bits, width) = match crate::strfmt::parse_ip_sloppy(address)? {
        std::net::IpAddr::V4(v4) if !address.contains(':') => {
            (false, u128::from(u32::from(v4)), 32_u32)
        }
        std::net::IpAddr::V4(_) => return None,
        std::net::IpAddr::V6(v6) => (true, u128::from(v6), 128),
    };
    let host_bits = width.checked_sub(prefix)?;
    let network = if host_bits >= 128 {
        0
    } else {
        (bits >> host_bits) << host_bits
    };
    Some((v6, network, prefix))
}

/// `ValidateIPBlock`: a CIDR, and exceptions that are strict subsets of it.
fn ip_block(block: &Value, at: &str, causes: &mut Vec<Cause>) {
    let cidr = text(block, "cidr");
    if cidr.is_empty() {
        causes.push(required(&format!("{at}.cidr"), ""));
        return;
    }
    if !crate::strfmt::is_cidr_sloppy(cidr) {
        causes.push(invalid(
            &format!("{at}.cidr"),
            &go_quote(cidr),
            CIDR_MESSAGE,
        ));
        return;
    }
    let outer = cidr_network(cidr);
    for (i, except) in list(block, "except").iter().enumerate() {
        let except = except.as_str().unwrap_or("");
        let here = format!("{at}.except[{i}]");
        if !crate::strfmt::is_cidr_sloppy(except) {
            causes.push(invalid(&here, &go_quote(except), CIDR_MESSAGE));
            continue;
        }
        let (Some((v6, network, prefix)), Some((inner_v6, inner, inner_prefix))) =
            (outer, cidr_network(except))
        else {
            continue;
        };
        let width = if v6 { 128 } else { 32 };
        let host_bits = width - prefix;
        let contained =
            v6 == inner_v6 && (host_bits >= 128 || (inner >> host_bits) << host_bits == network);
        if !contained || prefix >= inner_prefix {
            causes.push(invalid(
                &here,
                &go_quote(except),
                "must be a strict subset of `cidr`",
            ));
        }
    }
}

/// `ValidateNetworkPolicyPeer`.
fn policy_peer(peer: &Value, at: &str, causes: &mut Vec<Cause>) {
    let mut count = 0;
    for key in ["podSelector", "namespaceSelector"] {
        if let Some(selector) = get(peer, key) {
            count += 1;
            pod_spec::label_selector(Some(selector), &format!("{at}.{key}"), causes);
        }
    }
    let block = get(peer, "ipBlock");
    if let Some(block) = block {
        count += 1;
        ip_block(block, &format!("{at}.ipBlock"), causes);
    }
    let block = block.is_some();
    if count == 0 {
        causes.push(required(at, "must specify a peer"));
    } else if count > 1 && block {
        causes.push(forbidden(
            at,
            "may not specify both ipBlock and another peer",
        ));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    fn message(plural: &str, object: Value, old: Option<&Value>) -> Option<String> {
        crate::kinds::refusal("networking.k8s.io", plural, object, old)
    }

    #[test]
    fn strict_cidrs_and_canonical_addresses() {
        for (cidr, problem) in [
            ("10.0.0.0/8", None),
            ("fd00::/64", None),
            (
                "10.0.0.0/08",
                Some("must not have leading 0s in IP or prefix length"),
            ),
            (
                "010.0.0.0/8",
                Some("must not have leading 0s in IP or prefix length"),
            ),
            (
                "::ffff:10.0.0.0/104",
                Some("must not have an IPv4-mapped IPv6 address"),
            ),
            (
                "fd00::1/64",
                Some("must not have bits set beyond the prefix length"),
            ),
            ("10.0.0.0/33", Some(super::CIDR_MESSAGE)),
            ("10.0.0.0", Some(super::CIDR_MESSAGE)),
        ] {
            assert_eq!(super::strict_cidr_problem(cidr), problem, "{cidr}");
        }
        let named = |name: &str| crate::names::validate_ip_address_name(name).err();
        assert_eq!(named("fd00::1"), None);
        assert_eq!(named("192.168.1.5"), None);
        assert_eq!(
            named("FD00::1").as_deref(),
            Some("must be in canonical form (\"fd00::1\")")
        );
        let two =
            json!({"spec": {"cidrs": ["10.0.0.0/24", "fd00::/64"]}, "metadata": {"name": "c"}});
        assert_eq!(message("servicecidrs", two, None), None);
    }

    #[test]
    fn ingresses() {
        // `kubectl create ingress web --rule="example.com/*=web:80"`.
        let good = json!({"metadata": {"name": "i"}, "spec": {"rules": [{"host": "example.com",
            "http": {"paths": [{"path": "/", "pathType": "Prefix",
                "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]}});
        assert_eq!(message("ingresses", good, None), None);
        assert_eq!(
            message(
                "ingresses",
                json!({"metadata": {"name": "i"}, "spec": {}}),
                None
            )
            .unwrap(),
            "Ingress.networking.k8s.io \"i\" is invalid: spec: Invalid value: []networking.IngressRule(nil): either `defaultBackend` or `rules` must be specified"
        );
        let bad = json!({"metadata": {"name": "i"}, "spec": {"rules": [{"host": "10.0.0.1",
            "http": {"paths": [{"path": "a//b", "pathType": "Exact",
                "backend": {"service": {"name": "Web", "port": {}}}}, {"path": "/"}]}}]}});
        assert_eq!(
            message("ingresses", bad, None).unwrap(),
            "Ingress.networking.k8s.io \"i\" is invalid: [spec.rules[0].host: Invalid value: \"10.0.0.1\": must be a DNS name, not an IP address, spec.rules[0].http.paths[0].path: Invalid value: \"a//b\": must be an absolute path, spec.rules[0].http.paths[0].path: Invalid value: \"a//b\": must not contain '//', spec.rules[0].http.paths[0].backend.service.name: Invalid value: \"Web\": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?'), spec.rules[0].http.paths[0].backend: Required value: port name or number is required, spec.rules[0].http.paths[1].pathType: Required value: pathType must be specified]"
        );
    }

    #[test]
    fn ingress_tls_and_policy_ip_blocks() {
        let tls = json!({"metadata": {"name": "i"}, "spec": {"defaultBackend": {"service":
            {"name": "web", "port": {"name": "http"}}},
            "tls": [{"hosts": ["*.example.com", "*bad", "Example.com"], "secretName": "Tls"}]}});
        assert_eq!(
            message("ingresses", tls, None).unwrap(),
            format!(
                "Ingress.networking.k8s.io \"i\" is invalid: [spec.tls[0].hosts[1]: Invalid value: \"*bad\": {}, spec.tls[0].hosts[2]: Invalid value: \"Example.com\": {sub}, spec.tls[0].secretName: Invalid value: \"Tls\": {sub}]",
                super::WILDCARD_MESSAGE,
                sub = crate::names::DNS1123_SUBDOMAIN_MESSAGE
            )
        );
        let policy = |block: Value| {
            json!({"metadata": {"name": "p"}, "spec": {"podSelector": {},
            "egress": [{"to": [{"ipBlock": block}]}]}})
        };
        assert_eq!(
            message(
                "networkpolicies",
                policy(json!({"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]})),
                None
            ),
            None
        );
        assert_eq!(
            message(
                "networkpolicies",
                policy(json!({"cidr": "10.0.0.0/8",
                "except": ["11.0.0.0/16", "10.0.0.0/8", "bad", "fd00::/64"]})),
                None
            )
            .unwrap(),
            "NetworkPolicy.networking.k8s.io \"p\" is invalid: [spec.egress[0].to[0].ipBlock.except[0]: Invalid value: \"11.0.0.0/16\": must be a strict subset of `cidr`, spec.egress[0].to[0].ipBlock.except[1]: Invalid value: \"10.0.0.0/8\": must be a strict subset of `cidr`, spec.egress[0].to[0].ipBlock.except[2]: Invalid value: \"bad\": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64), spec.egress[0].to[0].ipBlock.except[3]: Invalid value: \"fd00::/64\": must be a strict subset of `cidr`]"
        );
        assert_eq!(
            message(
                "networkpolicies",
                policy(json!({"cidr": "10.0.0.0/33"})),
                None
            )
            .unwrap(),
            "NetworkPolicy.networking.k8s.io \"p\" is invalid: spec.egress[0].to[0].ipBlock.cidr: Invalid value: \"10.0.0.0/33\": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"
        );
    }

    #[test]
    fn ingress_classes_and_network_policies() {
        let class = |controller: &str| json!({"metadata": {"name": "c"}, "spec": {"controller": controller}});
        assert_eq!(
            message("ingressclasses", class("example.com/ingress"), None),
            None
        );
        assert_eq!(
            message("ingressclasses", class("bad controller"), None).unwrap(),
            "IngressClass.networking.k8s.io \"c\" is invalid: spec.controller: Invalid value: \"bad controller\": must be a domain-prefixed path (such as \"acme.io/foo\")"
        );
        let old = class("example.com/a");
        assert_eq!(
            message("ingressclasses", class("example.com/b"), Some(&old)).unwrap(),
            "IngressClass.networking.k8s.io \"c\" is invalid: spec.controller: Invalid value: \"example.com/b\": field is immutable"
        );
        let policy = |ingress: Value| json!({"metadata": {"name": "p"}, "spec": {"podSelector": {}, "ingress": ingress}});
        assert_eq!(
            message(
                "networkpolicies",
                policy(json!([{"ports": [{"port": 80, "endPort": 90}],
                "from": [{"podSelector": {}, "namespaceSelector": {}}]}])),
                None
            ),
            None
        );
        assert_eq!(
            message("networkpolicies", policy(json!([{"ports": [{"port": 70000}, {"port": "http", "endPort": 5},
                {"protocol": "ICMP"}], "from": [{}, {"podSelector": {}, "ipBlock": {"cidr": "10.0.0.0/8"}}]}])), None)
            .unwrap(),
            "NetworkPolicy.networking.k8s.io \"p\" is invalid: [spec.ingress[0].ports[0].port: Invalid value: 70000: must be between 1 and 65535, inclusive, spec.ingress[0].ports[1].endPort: Invalid value: 5: may not be specified when `port` is non-numeric, spec.ingress[0].ports[2].protocol: Unsupported value: \"ICMP\": supported values: \"TCP\", \"UDP\", \"SCTP\", spec.ingress[0].from[0]: Required value: must specify a peer, spec.ingress[0].from[1]: Forbidden: may not specify both ipBlock and another peer]"
        );
    }
}

//! EndpointSlices' rules as kube-apiserver's `pkg/apis/discovery/validation`
//! (`ValidateEndpointSlice`, `ValidateEndpointSliceUpdate`) applies them, in kube's order.
//!
//! ## Guarantees
//! - `addressType` is `IPv4`, `IPv6` or `FQDN`, and never changes.
//! - At most 1,000 endpoints, each with 1 to 100 addresses of the slice's type (IPv4 or IPv6
//!   addresses that are not unspecified or link-local (loopback accepted, see `nodes`); fully qualified domain names),
//!   a DNS-subdomain node name, at most 16 deprecated topology labels (valid labels), a
//!   DNS-label hostname, at most 8 zone hints with unique label-value names.
//! - At most 20,000 ports, each with a DNS-label name unique in the slice, a protocol `TCP`,
//!   `UDP` or `SCTP` and a qualified-name `appProtocol`.
//!
//! Differs from kube: none known (kube's internal error for a topology label
//! `topology.kubernetes.io/zone`, which its conversion removes, is not reproduced).

use serde_json::Value;

use super::access::list;
use super::{nodes, pod_spec};
use crate::field::{Cause, duplicate, go_quote, invalid, not_supported, required, too_many};
use crate::names::{validate_dns1123_label, validate_dns1123_subdomain, validate_label_value};

/// kube's `maxEndpoints`, `maxAddresses`, `maxPorts`, `maxTopologyLabels`, `maxZoneHints`.
const MAX_ENDPOINTS: usize = 1000;
const MAX_ADDRESSES: usize = 100;
const MAX_PORTS: usize = 20_000;
const MAX_TOPOLOGY_LABELS: usize = 16;
const MAX_ZONE_HINTS: usize = 8;

/// The causes of the EndpointSlice `object` (updating `old`).
pub(super) fn endpoint_slice(object: &Value, old: Option<&Value>, causes: &mut Vec<Cause>) {
    let address_type = object
        .get("addressType")
        .and_then(Value::as_str)
        .unwrap_or("");
    match address_type {
        "" => causes.push(required("addressType", "")),
        "IPv4" | "IPv6" | "FQDN" => {}
        other => causes.push(not_supported(
            "addressType",
            &go_quote(other),
            &["FQDN", "IPv4", "IPv6"],
        )),
    }
    endpoints(list(object, "endpoints"), address_type, causes);
    ports(list(object, "ports"), causes);
    if let Some(old) = old {
        let before = old.get("addressType").and_then(Value::as_str).unwrap_or("");
        if before != address_type {
            causes.push(invalid(
                "addressType",
                &go_quote(address_type),
                "field is immutable",
            ));
        }
    }
}

fn endpoints(endpoints: &[Value], address_type: &str, causes: &mut Vec<Cause>) {
    if endpoints.len() > MAX_ENDPOINTS {
        causes.push(too_many("endpoints", endpoints.len(), MAX_ENDPOINTS as i64));
        return;
    }
    for (i, endpoint) in endpoints.iter().enumerate() {
        let at = format!("endpoints[{i}]");
        let addresses_path = format!("{at}.addresses");
        let addresses = list(endpoint, "addresses");
        if addresses.is_empty() {
            causes.push(required(&addresses_path, "must contain at least 1 address"));
        } else if addresses.len() > MAX_ADDRESSES {
            causes.push(too_many(
                &addresses_path,
                addresses.len(),
                MAX_ADDRESSES as i64,
            ));
        }
        for (j, address) in addresses.iter().enumerate() {
            let address = address.as_str().unwrap_or("");
            let here = format!("{addresses_path}[{j}]");
            let family = crate::strfmt::ip_is_v6_sloppy(address);
            match address_type {
                "IPv4" => {
                    if family != Some(false) {
                        causes.push(invalid(
                            &here,
                            &go_quote(address),
                            "must be a valid IPv4 address",
                        ));
                    }
                    nodes::endpoint_ip(address, &here, causes);
                }
                "IPv6" => {
                    if family != Some(true) {
                        causes.push(invalid(
                            &here,
                            &go_quote(address),
                            "must be a valid IPv6 address",
                        ));
                    }
                    nodes::endpoint_ip(address, &here, causes);
                }
                "FQDN" => fully_qualified_domain_name(address, &here, causes),
                _ => {}
            }
        }
        if let Some(node) = endpoint.get("nodeName").and_then(Value::as_str)
            && let Err(message) = validate_dns1123_subdomain(node)
        {
            causes.push(invalid(
                &format!("{at}.nodeName"),
                &go_quote(node),
                &message,
            ));
        }
        let topology_path = format!("{at}.deprecatedTopology");
        let topology = endpoint.get("deprecatedTopology");
        let labels = topology.and_then(Value::as_object).map_or(0, |m| m.len());
        if labels > MAX_TOPOLOGY_LABELS {
            causes.push(too_many(&topology_path, labels, MAX_TOPOLOGY_LABELS as i64));
        }
        pod_spec::labels(topology, &topology_path, causes);
        if let Some(hostname) = endpoint.get("hostname").and_then(Value::as_str) {
            pod_spec::check_dns_label(&format!("{at}.hostname"), hostname, causes);
        }
        if let Some(hints) = endpoint.get("hints").filter(|h| !h.is_null()) {
            zone_hints(hints, &format!("{at}.hints.forZones"), causes);
        }
    }
}

/// `validateHints`.
fn zone_hints(hints: &Value, at: &str, causes: &mut Vec<Cause>) {
    let zones = list(hints, "forZones");
    if zones.len() > MAX_ZONE_HINTS {
        causes.push(too_many(at, zones.len(), MAX_ZONE_HINTS as i64));
        return;
    }
    let mut seen = Vec::new();
    for (i, zone) in zones.iter().enumerate() {
        let name = zone.get("name").and_then(Value::as_str).unwrap_or("");
        let here = format!("{at}[{i}].name");
        if seen.contains(&name) {
            causes.push(duplicate(&here, &go_quote(name)));
        } else {
            seen.push(name);
        }
        if let Err(message) = validate_label_value(name) {
            causes.push(invalid(&here, &go_quote(name), &message));
        }
    }
}

/// apimachinery's `IsFullyQualifiedDomainName`.
fn fully_qualified_domain_name(name: &str, at: &str, causes: &mut Vec<Cause>) {
    if name.is_empty() {
        causes.push(required(at, ""));
        return;
    }
    let name = name.strip_suffix('.').unwrap_or(name);
    if let Err(message) = validate_dns1123_subdomain(name) {
        causes.push(invalid(at, &go_quote(name), &message));
        return;
    }
    if !name.contains('.') {
        causes.push(invalid(
            at,
            &go_quote(name),
            "should be a domain with at least two segments separated by dots",
        ));
        return;
    }
    for label in name.split('.') {
        if let Err(message) = validate_dns1123_label(label) {
            causes.push(invalid(at, &go_quote(label), &message));
            return;
        }
    }
}

/// `validatePorts`.
fn ports(ports: &[Value], causes: &mut Vec<Cause>) {
    if ports.len() > MAX_PORTS {
        causes.push(too_many("ports", ports.len(), MAX_PORTS as i64));
        return;
    }
    let mut names = std::collections::HashSet::new();
    for (i, port) in ports.iter().enumerate() {
        let at = format!("ports[{i}]");
        let name = port.get("name").and_then(Value::as_str).unwrap_or("");
        if !name.is_empty() {
            pod_spec::check_dns_label(&format!("{at}.name"), name, causes);
        }
        if !names.insert(name) {
            causes.push(duplicate(&format!("{at}.name"), &go_quote(name)));
        }
        let protocol = port.get("protocol").and_then(Value::as_str);
        nodes::port_protocols(port, protocol, &at, causes);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    fn message(object: Value, old: Option<&Value>) -> Option<String> {
        crate::kinds::refusal("discovery.k8s.io", "endpointslices", object, old)
    }

    #[test]
    fn endpoint_slices() {
        let slice = |address_type: &str, address: &str| {
            json!({"metadata": {"name": "s"}, "addressType": address_type,
                "endpoints": [{"addresses": [address]}], "ports": [{"name": "http", "port": 80}]})
        };
        assert_eq!(message(slice("IPv4", "10.0.0.1"), None), None);
        assert_eq!(message(slice("FQDN", "example.com"), None), None);
        assert_eq!(
            message(slice("IPv4", "notanip"), None).unwrap(),
            "EndpointSlice.discovery.k8s.io \"s\" is invalid: [endpoints[0].addresses[0]: Invalid value: \"notanip\": must be a valid IPv4 address, endpoints[0].addresses[0]: Invalid value: \"notanip\": must be a valid IP address]"
        );
        assert_eq!(
            message(slice("IPv6", "10.0.0.1"), None).unwrap(),
            "EndpointSlice.discovery.k8s.io \"s\" is invalid: endpoints[0].addresses[0]: Invalid value: \"10.0.0.1\": must be a valid IPv6 address"
        );
        assert_eq!(
            message(slice("FQDN", "localhost"), None).unwrap(),
            "EndpointSlice.discovery.k8s.io \"s\" is invalid: endpoints[0].addresses[0]: Invalid value: \"localhost\": should be a domain with at least two segments separated by dots"
        );
        let old = slice("IPv4", "10.0.0.1");
        let mut bad = slice("IPv6", "::2");
        bad["endpoints"] = json!([{"addresses": []}]);
        bad["ports"] = json!([{"name": "a", "protocol": "ICMP"}, {"name": "a"}]);
        assert_eq!(
            message(bad, Some(&old)).unwrap(),
            "EndpointSlice.discovery.k8s.io \"s\" is invalid: [endpoints[0].addresses: Required value: must contain at least 1 address, ports[0].protocol: Unsupported value: \"ICMP\": supported values: \"SCTP\", \"TCP\", \"UDP\", ports[1].name: Duplicate value: \"a\", addressType: Invalid value: \"IPv6\": field is immutable]"
        );
    }
}

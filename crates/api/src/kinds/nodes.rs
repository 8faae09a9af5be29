//! Nodes' taints and Endpoints' subsets as kube-apiserver's `pkg/apis/core/validation`
//! (`ValidateNode`'s `validateNodeTaints`, `ValidateEndpoints`' `validateEndpointSubsets`)
//! checks them, on create and update alike.
//!
//! ## Guarantees
//! - Each taint of a Node has a label-name key, a label value, an effect `NoSchedule`,
//!   `PreferNoSchedule` or `NoExecute`, and no other taint with its key and effect. The path
//!   is kube's own: `metadata.taints[i]` (kube builds it from the metadata's path).
//! - Each Endpoints subset has addresses or not-ready addresses; each address an IP
//!   (`IsValidIPForLegacyField`) that is not unspecified or link-local
//!   (`ValidateEndpointIP`), a DNS-label hostname and a DNS-subdomain node name; each port a
//!   DNS-label name (required when there are several), a number between 1 and 65535, a
//!   protocol `TCP`, `UDP` or `SCTP` and a qualified-name `appProtocol`.
//! - Not checked (kube checks them): a Node's pod CIDRs, resources, config source and
//!   annotations; the Endpoints' annotations.
//!
//! Differs from kube: a loopback address (127.0.0.0/8, `::1`) is accepted in Endpoints and
//! EndpointSlices, where kube refuses it (`may not be in the loopback range`): this server
//! runs on one machine as often as in a cluster, reaches a Service-backed admission or
//! conversion webhook through its endpoints (a webhook on the same machine listens on
//! loopback), and seeds its own `kubernetes` endpoints with its listening address (kube's
//! endpoint reconciler writes that without validation). A duplicate taint is printed as Go's `%#v` of kube's `core.Taint` with
//! its `timeAdded` as `(*v1.Time)(nil)` or its JSON text (kube prints a pointer's address).

use serde_json::Value;

use super::access::{list, text};
use super::pod_spec;
use crate::field::{Cause, go_quote, invalid, not_supported, required};
use crate::names::{validate_dns1123_subdomain, validate_label_value, validate_qualified_name};

/// `validateNodeTaints` of the Node `object`.
pub(super) fn node(object: &Value, causes: &mut Vec<Cause>) {
    let spec = object.get("spec").unwrap_or(&Value::Null);
    // A set: a body may hold tens of thousands of taints.
    let mut seen = std::collections::HashSet::new();
    for (i, taint) in list(spec, "taints").iter().enumerate() {
        let at = format!("metadata.taints[{i}]");
        let (key, value, effect) = (
            text(taint, "key"),
            text(taint, "value"),
            text(taint, "effect"),
        );
        if let Err(message) = validate_qualified_name(key) {
            causes.push(invalid(&format!("{at}.key"), &go_quote(key), &message));
        }
        if let Err(message) = validate_label_value(value) {
            causes.push(invalid(&format!("{at}.value"), &go_quote(value), &message));
        }
        match effect {
            "" => causes.push(required(&format!("{at}.effect"), "")),
            "NoSchedule" | "PreferNoSchedule" | "NoExecute" => {}
            other => causes.push(not_supported(
                &format!("{at}.effect"),
                &go_quote(other),
                &["NoSchedule", "PreferNoSchedule", "NoExecute"],
            )),
        }
        if !seen.insert((effect, key)) {
            let added = taint
                .get("timeAdded")
                .filter(|t| !t.is_null())
                .map_or_else(|| "(*v1.Time)(nil)".to_owned(), Value::to_string);
            let printed = format!(
                "core.Taint{{Key:{}, Value:{}, Effect:{}, TimeAdded:{added}}}",
                go_quote(key),
                go_quote(value),
                go_quote(effect)
            );
            causes.push((
                at,
                format!("Duplicate value: {printed}: taints must be unique by key and effect pair"),
                "FieldValueDuplicate".to_owned(),
            ));
        }
    }
}

/// `validateEndpointSubsets` of the Endpoints `object`.
pub(super) fn endpoints(object: &Value, causes: &mut Vec<Cause>) {
    for (i, subset) in list(object, "subsets").iter().enumerate() {
        let at = format!("subsets[{i}]");
        let (ready, not_ready) = (list(subset, "addresses"), list(subset, "notReadyAddresses"));
        if ready.is_empty() && not_ready.is_empty() {
            causes.push(required(
                &at,
                "must specify `addresses` or `notReadyAddresses`",
            ));
        }
        for (key, addresses) in [("addresses", ready), ("notReadyAddresses", not_ready)] {
            for (j, address) in addresses.iter().enumerate() {
                endpoint_address(address, &format!("{at}.{key}[{j}]"), causes);
            }
        }
        let ports = list(subset, "ports");
        for (j, port) in ports.iter().enumerate() {
            endpoint_port(port, ports.len() > 1, &format!("{at}.ports[{j}]"), causes);
        }
    }
}

/// `validateEndpointAddress`.
fn endpoint_address(address: &Value, at: &str, causes: &mut Vec<Cause>) {
    let ip = text(address, "ip");
    let ip_path = format!("{at}.ip");
    pod_spec::check_ip(&ip_path, ip, causes);
    let hostname = text(address, "hostname");
    if !hostname.is_empty() {
        pod_spec::check_dns_label(&format!("{at}.hostname"), hostname, causes);
    }
    if let Some(node) = address.get("nodeName").and_then(Value::as_str)
        && let Err(message) = validate_dns1123_subdomain(node)
    {
        causes.push(invalid(
            &format!("{at}.nodeName"),
            &go_quote(node),
            &message,
        ));
    }
    endpoint_ip(ip, &ip_path, causes);
}

/// kube's `ValidateEndpointIP` (once `ValidateNonSpecialIP`), loopback addresses accepted.
pub(super) fn endpoint_ip(ip: &str, at: &str, causes: &mut Vec<Cause>) {
    non_special_ip(ip, at, false, causes);
}

/// kube's `ValidateNonSpecialIP` (a Service's external IPs), loopback addresses refused when
/// `loopback_refused` (endpoints accept them, see the module docs).
pub(super) fn non_special_ip(ip: &str, at: &str, loopback_refused: bool, causes: &mut Vec<Cause>) {
    use std::net::IpAddr;
    let Some(address) = crate::strfmt::parse_ip_sloppy(ip) else {
        causes.push(invalid(at, &go_quote(ip), "must be a valid IP address"));
        return;
    };
    // Loopback addresses are accepted (see the module docs).
    let (unspecified, link_local, link_local_multicast) = match address {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            (
                v4.is_unspecified(),
                o[0] == 169 && o[1] == 254,
                o[0] == 224 && o[1] == 0 && o[2] == 0,
            )
        }
        IpAddr::V6(v6) => {
            let s = v6.segments();
            (
                v6.is_unspecified(),
                s[0] & 0xffc0 == 0xfe80,
                s[0] & 0xff0f == 0xff02,
            )
        }
    };
    let quoted = go_quote(ip);
    if unspecified {
        causes.push(invalid(
            at,
            &quoted,
            &format!("may not be unspecified ({ip})"),
        ));
    }
    if loopback_refused && address.is_loopback() {
        causes.push(invalid(
            at,
            &quoted,
            "may not be in the loopback range (127.0.0.0/8, ::1/128)",
        ));
    }
    if link_local {
        causes.push(invalid(
            at,
            &quoted,
            "may not be in the link-local range (169.254.0.0/16, fe80::/10)",
        ));
    }
    if link_local_multicast {
        causes.push(invalid(
            at,
            &quoted,
            "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)",
        ));
    }
}

/// `validateEndpointPort`.
fn endpoint_port(port: &Value, require_name: bool, at: &str, causes: &mut Vec<Cause>) {
    let name = text(port, "name");
    if require_name && name.is_empty() {
        causes.push(required(&format!("{at}.name"), ""));
    } else if !name.is_empty() {
        pod_spec::check_dns_label(&format!("{at}.name"), name, causes);
    }
    let number = port.get("port").and_then(Value::as_i64).unwrap_or(0);
    if !(1..=65535).contains(&number) {
        causes.push(invalid(
            &format!("{at}.port"),
            &number.to_string(),
            "must be between 1 and 65535, inclusive",
        ));
    }
    let protocol = Some(text(port, "protocol")).filter(|p| !p.is_empty());
    port_protocols(port, protocol, at, causes);
}

/// An endpoint port's `protocol` (`None`: absent, or empty where kube's field is a plain
/// string) and `appProtocol`, as Endpoints' and EndpointSlices' validation check them.
pub(super) fn port_protocols(
    port: &Value,
    protocol: Option<&str>,
    at: &str,
    causes: &mut Vec<Cause>,
) {
    pod_spec::port_protocol(protocol, at, causes);
    app_protocol(port, at, causes);
}

/// A port's `appProtocol`, a qualified name when set.
pub(super) fn app_protocol(port: &Value, at: &str, causes: &mut Vec<Cause>) {
    if let Some(protocol) = port.get("appProtocol").and_then(Value::as_str)
        && let Err(message) = validate_qualified_name(protocol)
    {
        causes.push(invalid(
            &format!("{at}.appProtocol"),
            &go_quote(protocol),
            &message,
        ));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    fn message(plural: &str, object: Value) -> Option<String> {
        crate::kinds::refusal("", plural, object, None)
    }

    #[test]
    fn node_taints() {
        let node = |taints: Value| json!({"metadata": {"name": "n"}, "spec": {"taints": taints}});
        assert_eq!(
            message("nodes", node(json!([{"key": "a", "effect": "NoSchedule"}]))),
            None
        );
        assert_eq!(
            message(
                "nodes",
                node(json!([{"key": "a", "value": "b", "effect": "Bad"},
                {"key": "a", "effect": "NoExecute"}, {"key": "a", "effect": "NoExecute"},
                {"key": "c"}]))
            )
            .unwrap(),
            "Node \"n\" is invalid: [metadata.taints[0].effect: Unsupported value: \"Bad\": supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\", metadata.taints[2]: Duplicate value: core.Taint{Key:\"a\", Value:\"\", Effect:\"NoExecute\", TimeAdded:(*v1.Time)(nil)}: taints must be unique by key and effect pair, metadata.taints[3].effect: Required value]"
        );
    }

    #[test]
    fn endpoints_addresses_and_ports() {
        let endpoints = |subsets: Value| json!({"metadata": {"name": "e"}, "subsets": subsets});
        let good = endpoints(json!([{"addresses": [{"ip": "10.0.0.1", "hostname": "a"}],
            "ports": [{"port": 80, "protocol": "TCP"}]}]));
        assert_eq!(message("endpoints", good), None);
        let bad = endpoints(json!([{"addresses": [{"ip": "bad"}, {"ip": "127.0.0.1"}],
            "ports": [{"port": 70000, "protocol": "TCP"}, {"name": "b", "port": 1, "protocol": "ICMP"}]},
            {"ports": []}]));
        assert_eq!(
            message("endpoints", bad).unwrap(),
            "Endpoints \"e\" is invalid: [subsets[0].addresses[0].ip: Invalid value: \"bad\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff), subsets[0].addresses[0].ip: Invalid value: \"bad\": must be a valid IP address, subsets[0].ports[0].name: Required value, subsets[0].ports[0].port: Invalid value: 70000: must be between 1 and 65535, inclusive, subsets[0].ports[1].protocol: Unsupported value: \"ICMP\": supported values: \"SCTP\", \"TCP\", \"UDP\", subsets[1]: Required value: must specify `addresses` or `notReadyAddresses`]"
        );
    }
}

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
//! - A Node's pod CIDRs (`podCIDRs`, else `podCIDR`) are CIDRs, at most one of each family,
//!   without repeats, and never change once set; so its `providerID`; its `externalID` never
//!   changes; each quantity of its `status.capacity` and `status.allocatable` is not negative
//!   (an integer for the integer resources), at `status.capacity.<name>`; its
//!   `status.addresses` have no repeats. An update is checked as kube's `nodeStrategy` checks
//!   it, `ValidateNode` then `ValidateNodeUpdate` (so a bad taint or quantity is two causes, as
//!   kube's, one line of the message); a `/status` write by `ValidateNodeUpdate` alone
//!   ([`super::status`]).
//! - Not checked (kube checks them): a Node's config source and annotations; the Endpoints'
//!   annotations.
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
use super::common::CIDR_MESSAGE;
use super::pod_spec;
use crate::field::{Cause, forbidden, go_quote, invalid, not_supported, required};
use crate::names::{validate_dns1123_subdomain, validate_label_value, validate_qualified_name};

/// kube's `ValidateNode` of the Node `object` (its taints, resources and pod CIDRs).
pub(super) fn node(object: &Value, causes: &mut Vec<Cause>) {
    let spec = object.get("spec").unwrap_or(&Value::Null);
    taints(spec, causes);
    resources(object, causes);
    let cidrs = pod_cidrs(spec);
    let mut valid = true;
    for (i, cidr) in cidrs.iter().enumerate() {
        if !crate::strfmt::is_cidr_sloppy(cidr) {
            valid = false;
            causes.push(invalid(
                &format!("spec.podCIDRs[{i}]"),
                &go_quote(cidr),
                CIDR_MESSAGE,
            ));
        }
    }
    if cidrs.len() > 1 {
        let v6 = cidrs.iter().filter(|c| c.contains(':')).count();
        if valid && (cidrs.len() > 2 || v6 != 1) {
            let quoted: Vec<String> = cidrs.iter().map(|c| go_quote(c)).collect();
            causes.push(invalid(
                "spec.podCIDRs",
                &format!("[]string{{{}}}", quoted.join(", ")),
                "may specify no more than one CIDR for each IP family",
            ));
        }
        let mut seen = std::collections::HashSet::new();
        for (i, cidr) in cidrs.iter().enumerate() {
            if !seen.insert(*cidr) {
                causes.push(crate::field::duplicate(
                    &format!("spec.podCIDRs[{i}]"),
                    &go_quote(cidr),
                ));
            }
        }
    }
}

/// kube's `ValidateNodeUpdate` of the Node `object` replacing `old`: its resources again,
/// unique addresses, pod CIDRs and provider ID fixed once set, the external ID never changed,
/// its taints again.
pub(super) fn node_update(object: &Value, old: &Value, causes: &mut Vec<Cause>) {
    let spec = object.get("spec").unwrap_or(&Value::Null);
    let old_spec = old.get("spec").unwrap_or(&Value::Null);
    resources(object, causes);
    let status = object.get("status").unwrap_or(&Value::Null);
    let mut seen = std::collections::HashSet::new();
    for (i, address) in list(status, "addresses").iter().enumerate() {
        let (kind, at) = (text(address, "type"), text(address, "address"));
        if !seen.insert((kind, at)) {
            causes.push(crate::field::duplicate(
                &format!("status.addresses[{i}]"),
                &format!(
                    "core.NodeAddress{{Type:{}, Address:{}}}",
                    go_quote(kind),
                    go_quote(at)
                ),
            ));
        }
    }
    let (cidrs, old_cidrs) = (pod_cidrs(spec), pod_cidrs(old_spec));
    let fixed = "node updates may not change podCIDR except from \"\" to valid";
    if !old_cidrs.is_empty() {
        if old_cidrs.len() == cidrs.len() {
            for (before, now) in old_cidrs.iter().zip(&cidrs) {
                if before != now {
                    causes.push(forbidden("spec.podCIDRs", fixed));
                }
            }
        } else {
            causes.push(forbidden("spec.podCIDRs", fixed));
        }
    }
    let provider = text(old_spec, "providerID");
    if !provider.is_empty() && provider != text(spec, "providerID") {
        causes.push(forbidden(
            "spec.providerID",
            "node updates may not change providerID except from \"\" to valid",
        ));
    }
    taints(spec, causes);
    if text(spec, "externalID") != text(old_spec, "externalID") {
        causes.push(forbidden("spec.externalID", "may not be updated"));
    }
}

/// The pod CIDRs of a Node's v1 spec as kube's conversion reads them: `podCIDRs`, or
/// `podCIDR` alone when `podCIDRs` is empty.
fn pod_cidrs(spec: &Value) -> Vec<&str> {
    let cidrs: Vec<&str> = list(spec, "podCIDRs")
        .iter()
        .map(|c| c.as_str().unwrap_or(""))
        .collect();
    let single = text(spec, "podCIDR");
    if cidrs.is_empty() && !single.is_empty() {
        return vec![single];
    }
    cidrs
}

/// `ValidateNodeResources`: each quantity of `status.capacity` and `status.allocatable`
/// (`ValidateResourceQuantityValue`, at `status.capacity.<name>`).
fn resources(object: &Value, causes: &mut Vec<Cause>) {
    for key in ["capacity", "allocatable"] {
        let Some(map) = object
            .get("status")
            .and_then(|s| s.get(key))
            .and_then(Value::as_object)
        else {
            continue;
        };
        for (name, value) in map {
            if let Some(amount) = pod_spec::quantity(value) {
                pod_spec::resource_quantity(name, amount, &format!("status.{key}.{name}"), causes);
            }
        }
    }
}

/// `validateNodeTaints` of a Node's spec.
fn taints(spec: &Value, causes: &mut Vec<Cause>) {
    // A set: a body may hold tens of thousands of taints.
    let mut seen = std::collections::HashSet::new();
    for (i, taint) in list(spec, "taints").iter().enumerate() {
        let at = format!("metadata.taints[{i}]");
        let (key, value, effect) = (
            text(taint, "key"),
            text(taint, "value"),
            text(taint, "effect"),
        );
        for message in crate::names::qualified_name_problems(key) {
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
    fn node_pod_cidrs_resources_and_updates() {
        let node = |spec: Value, status: Value| json!({"metadata": {"name": "n"}, "spec": spec, "status": status});
        // The defaults copy the capacity into a missing `allocatable`, as kube's.
        assert_eq!(
            message(
                "nodes",
                node(
                    json!({"podCIDR": "bogus"}),
                    json!({"capacity": {"cpu": "-1", "pods": "1500m"}})
                )
            )
            .unwrap(),
            "Node \"n\" is invalid: [status.capacity.cpu: Invalid value: \"-1\": must be greater than or equal to 0, status.capacity.pods: Invalid value: \"1500m\": must be an integer, status.allocatable.cpu: Invalid value: \"-1\": must be greater than or equal to 0, status.allocatable.pods: Invalid value: \"1500m\": must be an integer, spec.podCIDRs[0]: Invalid value: \"bogus\": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)]"
        );
        assert_eq!(
            message(
                "nodes",
                node(
                    json!({"podCIDRs": ["10.0.0.0/24", "10.1.0.0/24", "10.0.0.0/24"]}),
                    json!({})
                )
            )
            .unwrap(),
            "Node \"n\" is invalid: [spec.podCIDRs: Invalid value: []string{\"10.0.0.0/24\", \"10.1.0.0/24\", \"10.0.0.0/24\"}: may specify no more than one CIDR for each IP family, spec.podCIDRs[2]: Duplicate value: \"10.0.0.0/24\"]"
        );
        let old = node(
            json!({"podCIDR": "10.0.0.0/24", "providerID": "aws://a"}),
            json!({"capacity": {"cpu": "4"}}),
        );
        assert_eq!(message("nodes", old.clone()), None);
        let changed = node(
            json!({"podCIDR": "10.0.1.0/24", "providerID": "aws://b"}),
            json!({"capacity": {"cpu": "-1"}, "addresses": [{"type": "InternalIP", "address": "10.0.0.1"},
                {"type": "InternalIP", "address": "10.0.0.1"}]}),
        );
        let def = crate::resources::builtin_resources()
            .into_iter()
            .find(|d| d.group.is_empty() && d.plural == "nodes")
            .unwrap();
        // The main endpoint: `ValidateNode` then `ValidateNodeUpdate`, the quantity twice
        // among the causes (once in the message, which says each error once).
        let error = crate::kinds::validate(&def, &changed, Some(&old)).unwrap_err();
        assert_eq!(error.cause_lines().len(), 5);
        assert_eq!(
            error.message,
            "Node \"n\" is invalid: [status.capacity.cpu: Invalid value: \"-1\": must be greater than or equal to 0, status.addresses[1]: Duplicate value: core.NodeAddress{Type:\"InternalIP\", Address:\"10.0.0.1\"}, spec.podCIDRs: Forbidden: node updates may not change podCIDR except from \"\" to valid, spec.providerID: Forbidden: node updates may not change providerID except from \"\" to valid]"
        );
        // `/status`: `ValidateNodeUpdate` alone.
        let mut status_write = old.clone();
        status_write["status"] = json!({"capacity": {"cpu": "-1"}});
        assert_eq!(
            crate::kinds::validate_status(&def, &status_write, &old)
                .unwrap_err()
                .message,
            "Node \"n\" is invalid: status.capacity.cpu: Invalid value: \"-1\": must be greater than or equal to 0"
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

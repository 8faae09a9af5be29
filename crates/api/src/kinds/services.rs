//! Services' validation as kube-apiserver's `pkg/apis/core/validation/validation.go` has it
//! (Kubernetes 1.33): `ValidateService`, `ValidateServiceUpdate` and
//! `ValidateServiceClusterIPsRelatedFields`, with kube's paths, wording and order.
//!
//! ## Guarantees
//! - [`validate`] gives, on create, `ValidateService`'s causes in its order: the topology
//!   annotations agree; ports are present (unless headless or `ExternalName`); the type's
//!   rules (`NodePort` and `LoadBalancer` Services are not headless; an `ExternalName` Service
//!   has no addresses, families or policy and an `externalName` that is a DNS subdomain, a
//!   trailing dot allowed); each port (`validateServicePort`: a DNS-label name, required and
//!   unique when there are several, a port and a numeric target port between 1 and 65535, a
//!   named target port a port name, protocol `TCP`, `UDP` or `SCTP`, `appProtocol` a qualified
//!   name); the selector's labels; `sessionAffinity` (`ClientIP` or `None`) and its config (a
//!   `ClientIP` timeout between 1 and 86400 seconds, none for `None`); the address fields
//!   ([`cluster_ips_related`]); external IPs (valid, not unspecified, loopback or link-local);
//!   the type; no `nodePort` on a `ClusterIP` Service; no node port twice for one protocol, no
//!   port twice for one protocol; `loadBalancerSourceRanges` (or kube's annotation) CIDRs, and
//!   only for `LoadBalancer` (at kube's path `spec.LoadBalancerSourceRanges`);
//!   `allocateLoadBalancerNodePorts` only and always for `LoadBalancer` (the missing one at
//!   kube's path `allocateLoadBalancerNodePorts`); `loadBalancerClass` a qualified name, only
//!   for `LoadBalancer`; `externalTrafficPolicy` (`Cluster` or `Local`, required exactly for
//!   externally accessible Services) and `healthCheckNodePort` (only with `LoadBalancer` and
//!   `Local`); `internalTrafficPolicy` (`Cluster` or `Local`, required but for
//!   `ExternalName`); `trafficDistribution` (`PreferClose`).
//! - On update (`ValidateServiceUpdate`), before those: the cluster IPs and IP families may not
//!   change once set (but to, from or on `ExternalName`, or to add or release a dual-stack
//!   secondary with the right policy), `loadBalancerClass` may not change on a `LoadBalancer`,
//!   and `healthCheckNodePort` may not change while both versions need one. An update that
//!   changes the status gets, after those, `ValidateLoadBalancerStatus` (kube's status
//!   strategy's): ingress points only for a `LoadBalancer`, a valid `ip` with an `ipMode`
//!   (`VIP` or `Proxy`) and no `ipMode` without one, a `hostname` that is a DNS subdomain and
//!   not an address.
//! - Values print as kube prints them: a duplicate port as Go's `%#v` of `core.ServicePort`,
//!   `clusterIPs` as `[]string{...}`, `ipFamilies` as `[]core.IPFamily{...}`, pointers to
//!   strings as the string or `null`.
//!
//! ## How it differs from kube
//! - kube allocates addresses and node ports before it validates (the registry's
//!   `BeginCreate` / `BeginUpdate`); this server validates before it claims them, so its
//!   Service registry (`service_ips` in the server) first fills and checks what allocation
//!   depends on (`initIPFamilyFields`, which calls [`cluster_ips_related`] and refuses alone,
//!   as kube's does; the static range checks of asked addresses and node ports; the type
//!   change's clearing) and claims after this validation. A `healthCheckNodePort` still 0 is
//!   therefore one the allocator gives, not a missing one: its `Required value` is not
//!   reported. When an asked address or node port is already taken *and* the object is
//!   invalid, this server reports the validation's causes where kube reports the taken one.
//! - kube validates the load balancer status on `/status` writes only (its main endpoint and
//!   its creates keep or clear the status); this server keeps a status the client sends, and
//!   validates it on any update that changes it.
//! - The object's metadata is validated by the write path (`meta`), not here.

use std::collections::HashSet;

use serde_json::Value;

use super::access::{get, list, text};
use super::{nodes, pod_spec};
use crate::field::{Cause, duplicate, forbidden, go_quote, invalid, not_supported, required};

const NONE: &str = "None";
const EXTERNAL_NAME: &str = "ExternalName";
const LOAD_BALANCER: &str = "LoadBalancer";
const NODE_PORT: &str = "NodePort";
const CLUSTER_IP: &str = "ClusterIP";
const SINGLE_STACK: &str = "SingleStack";

/// kube's `MaxClientIPServiceAffinitySeconds`.
const MAX_AFFINITY_SECONDS: i64 = 86_400;

/// The annotation kube took `loadBalancerSourceRanges` from before the field.
const SOURCE_RANGES_ANNOTATION: &str = "service.beta.kubernetes.io/load-balancer-source-ranges";
const TOPOLOGY_MODE: &str = "service.kubernetes.io/topology-mode";
const TOPOLOGY_HINTS: &str = "service.kubernetes.io/topology-aware-hints";
const PORT_RANGE: &str = "must be between 1 and 65535, inclusive";

/// The spec of a Service (`null` when absent).
fn spec(service: &Value) -> &Value {
    service.get("spec").unwrap_or(&Value::Null)
}

/// A list of strings of the spec, `None` when absent (Go's nil slice).
fn strings<'a>(service: &'a Value, key: &str) -> Option<Vec<&'a str>> {
    get(spec(service), key)
        .and_then(Value::as_array)
        .map(|items| items.iter().map(|v| v.as_str().unwrap_or("")).collect())
}

fn service_type(service: &Value) -> &str {
    text(spec(service), "type")
}

fn policy(service: &Value) -> Option<&str> {
    get(spec(service), "ipFamilyPolicy").and_then(Value::as_str)
}

/// Go's `%#v` of a `[]string` (`[]string(nil)` when absent), as kube prints `clusterIPs`.
#[must_use]
pub fn go_strings(values: Option<&[&str]>) -> String {
    go_slice("string", values)
}

fn go_slice(kind: &str, values: Option<&[&str]>) -> String {
    match values {
        None => format!("[]{kind}(nil)"),
        Some(values) => {
            let quoted: Vec<String> = values.iter().map(|v| go_quote(v)).collect();
            format!("[]{kind}{{{}}}", quoted.join(", "))
        }
    }
}

/// A pointer to a string as a field error prints it: the string quoted, or `null`.
fn go_pointer(value: Option<&str>) -> String {
    value.map_or_else(|| "null".to_owned(), go_quote)
}

/// `isHeadlessService`: `clusterIPs` is exactly `["None"]`.
fn headless(service: &Value) -> bool {
    strings(service, "clusterIPs").is_some_and(|ips| ips == [NONE])
}

/// `apiservice.ExternallyAccessible`.
fn externally_accessible(service: &Value) -> bool {
    match service_type(service) {
        NODE_PORT | LOAD_BALANCER => true,
        CLUSTER_IP => !list(spec(service), "externalIPs").is_empty(),
        _ => false,
    }
}

/// `apiservice.NeedsHealthCheck`: a `LoadBalancer` with `externalTrafficPolicy: Local`.
fn needs_health_check(service: &Value) -> bool {
    service_type(service) == LOAD_BALANCER
        && text(spec(service), "externalTrafficPolicy") == "Local"
}

fn number(value: &Value, key: &str) -> i64 {
    value.get(key).and_then(Value::as_i64).unwrap_or(0)
}

/// The causes of a Service (`old`: the stored one of an update), in kube's order (see the
/// module's guarantees).
pub fn validate(service: &Value, old: Option<&Value>, causes: &mut Vec<Cause>) {
    if let Some(old) = old {
        upgrade_downgrade_cluster_ips(old, service, causes);
        upgrade_downgrade_ip_families(old, service, causes);
        load_balancer_class(Some(old), service, causes);
        if needs_health_check(old)
            && needs_health_check(service)
            && number(spec(old), "healthCheckNodePort")
                != number(spec(service), "healthCheckNodePort")
        {
            causes.push(forbidden("spec.healthCheckNodePort", "field is immutable"));
        }
    }
    validate_service(service, causes);
    if let Some(old) = old
        && service.get("status") != old.get("status")
    {
        load_balancer_status(service, causes);
    }
}

/// `ValidateLoadBalancerStatus` (of `ValidateServiceStatusUpdate`): ingress points only for a
/// `LoadBalancer`, each with a valid IP and an `ipMode` (`VIP` or `Proxy`) exactly when it has
/// one, and a hostname that is a DNS subdomain, not an address.
fn load_balancer_status(service: &Value, causes: &mut Vec<Cause>) {
    let at = "status.loadBalancer.ingress";
    let ingress = service
        .pointer("/status/loadBalancer/ingress")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    if service_type(service) != LOAD_BALANCER && !ingress.is_empty() {
        causes.push(forbidden(
            at,
            "may only be used when `spec.type` is 'LoadBalancer'",
        ));
        return;
    }
    for (i, point) in ingress.iter().enumerate() {
        let here = format!("{at}[{i}]");
        let ip = text(point, "ip");
        if !ip.is_empty() {
            pod_spec::check_ip(&format!("{here}.ip"), ip, causes);
        }
        match get(point, "ipMode").and_then(Value::as_str) {
            None if !ip.is_empty() => causes.push(required(
                &format!("{here}.ipMode"),
                "must be specified when `ip` is set",
            )),
            None => {}
            Some(_) if ip.is_empty() => causes.push(forbidden(
                &format!("{here}.ipMode"),
                "may not be specified when `ip` is not set",
            )),
            Some("Proxy" | "VIP") => {}
            Some(other) => causes.push(not_supported(
                &format!("{here}.ipMode"),
                &go_quote(other),
                &["Proxy", "VIP"],
            )),
        }
        let hostname = text(point, "hostname");
        if !hostname.is_empty() {
            pod_spec::check_subdomain(&format!("{here}.hostname"), hostname, causes);
            if crate::strfmt::is_ip_sloppy(hostname) {
                causes.push(invalid(
                    &format!("{here}.hostname"),
                    &go_quote(hostname),
                    "must be a DNS name, not an IP address",
                ));
            }
        }
    }
}

/// `ValidateService` (but its metadata).
fn validate_service(service: &Value, causes: &mut Vec<Cause>) {
    let spec = spec(service);
    let annotations = service.pointer("/metadata/annotations");
    let annotation = |key: &str| annotations.and_then(|a| a.get(key)).and_then(Value::as_str);
    if let (Some(mode), Some(hints)) = (annotation(TOPOLOGY_MODE), annotation(TOPOLOGY_HINTS))
        && mode != hints
    {
        causes.push(invalid(
            &format!("metadata.annotations[{TOPOLOGY_MODE}]"),
            &go_quote(mode),
            &format!("must match annotations[{TOPOLOGY_HINTS}] when both are specified"),
        ));
    }
    let kind = service_type(service);
    let ports = list(spec, "ports");
    if ports.is_empty() && !headless(service) && kind != EXTERNAL_NAME {
        causes.push(required("spec.ports", ""));
    }
    match kind {
        LOAD_BALANCER | NODE_PORT if headless(service) => causes.push(invalid(
            "spec.clusterIPs[0]",
            &go_quote(NONE),
            &format!("may not be set to 'None' for {kind} services"),
        )),
        EXTERNAL_NAME => {
            for key in ["clusterIPs", "ipFamilies"] {
                if !list(spec, key).is_empty() {
                    causes.push(forbidden(
                        &format!("spec.{key}"),
                        "may not be set for ExternalName services",
                    ));
                }
            }
            if policy(service).is_some() {
                causes.push(forbidden(
                    "spec.ipFamilyPolicy",
                    "may not be set for ExternalName services",
                ));
            }
            let name = text(spec, "externalName");
            let name = name.strip_suffix('.').unwrap_or(name);
            if name.is_empty() {
                causes.push(required("spec.externalName", ""));
            } else {
                pod_spec::check_subdomain("spec.externalName", name, causes);
            }
        }
        _ => {}
    }
    let mut names = HashSet::new();
    for (i, port) in ports.iter().enumerate() {
        service_port(
            port,
            ports.len() > 1,
            &mut names,
            &format!("spec.ports[{i}]"),
            causes,
        );
    }
    pod_spec::labels(get(spec, "selector"), "spec.selector", causes);
    session_affinity(spec, causes);
    causes.extend(cluster_ips_related(service));
    for (i, ip) in list(spec, "externalIPs").iter().enumerate() {
        let at = format!("spec.externalIPs[{i}]");
        let ip = ip.as_str().unwrap_or("");
        let before = causes.len();
        pod_spec::check_ip(&at, ip, causes);
        if causes.len() == before {
            nodes::non_special_ip(ip, &at, true, causes);
        }
    }
    match kind {
        "" => causes.push(required("spec.type", "")),
        CLUSTER_IP | NODE_PORT | LOAD_BALANCER | EXTERNAL_NAME => {}
        other => causes.push(not_supported(
            "spec.type",
            &go_quote(other),
            &[CLUSTER_IP, EXTERNAL_NAME, LOAD_BALANCER, NODE_PORT],
        )),
    }
    if kind == CLUSTER_IP {
        for (i, port) in ports.iter().enumerate() {
            if number(port, "nodePort") != 0 {
                causes.push(forbidden(
                    &format!("spec.ports[{i}].nodePort"),
                    "may not be used when `type` is 'ClusterIP'",
                ));
            }
        }
    }
    let mut node_ports = HashSet::new();
    for (i, port) in ports.iter().enumerate() {
        let node_port = number(port, "nodePort");
        if node_port != 0 && !node_ports.insert((text(port, "protocol"), node_port)) {
            causes.push(duplicate(
                &format!("spec.ports[{i}].nodePort"),
                &node_port.to_string(),
            ));
        }
    }
    let mut numbers = HashSet::new();
    for (i, port) in ports.iter().enumerate() {
        let protocol = text(port, "protocol");
        let number = number(port, "port");
        if !numbers.insert((protocol, number)) {
            causes.push(duplicate(
                &format!("spec.ports[{i}]"),
                &format!(
                    "core.ServicePort{{Name:\"\", Protocol:{}, AppProtocol:(*string)(nil), Port:{number}, TargetPort:intstr.IntOrString{{Type:0, IntVal:0, StrVal:\"\"}}, NodePort:0}}",
                    go_quote(protocol)
                ),
            ));
        }
    }
    source_ranges(service, causes);
    let allocate = get(spec, "allocateLoadBalancerNodePorts");
    if allocate.is_some() && kind != LOAD_BALANCER {
        causes.push(forbidden(
            "spec.allocateLoadBalancerNodePorts",
            "may only be used when `type` is 'LoadBalancer'",
        ));
    }
    if kind == LOAD_BALANCER && allocate.is_none() {
        // kube's path, without `spec`.
        causes.push(required("allocateLoadBalancerNodePorts", ""));
    }
    load_balancer_class(None, service, causes);
    traffic_policies(service, causes);
    if let Some(distribution) = get(spec, "trafficDistribution").and_then(Value::as_str)
        && distribution != "PreferClose"
    {
        causes.push(not_supported(
            "spec.trafficDistribution",
            &go_quote(distribution),
            &["PreferClose"],
        ));
    }
}

/// `validateServicePort`.
fn service_port<'a>(
    port: &'a Value,
    require_name: bool,
    names: &mut HashSet<&'a str>,
    at: &str,
    causes: &mut Vec<Cause>,
) {
    let name = text(port, "name");
    if require_name && name.is_empty() {
        causes.push(required(&format!("{at}.name"), ""));
    } else if !name.is_empty() {
        pod_spec::check_dns_label(&format!("{at}.name"), name, causes);
        if !names.insert(name) {
            causes.push(duplicate(&format!("{at}.name"), &go_quote(name)));
        }
    }
    let number = number(port, "port");
    if !(1..=65535).contains(&number) {
        causes.push(invalid(
            &format!("{at}.port"),
            &number.to_string(),
            PORT_RANGE,
        ));
    }
    let protocol = Some(text(port, "protocol")).filter(|p| !p.is_empty());
    pod_spec::port_protocol(protocol, at, causes);
    pod_spec::port_num_or_name(port.get("targetPort"), &format!("{at}.targetPort"), causes);
    nodes::app_protocol(port, at, causes);
}

/// `sessionAffinity` and `validateClientIPAffinityConfig`.
fn session_affinity(spec: &Value, causes: &mut Vec<Cause>) {
    let affinity = text(spec, "sessionAffinity");
    match affinity {
        "" => causes.push(required("spec.sessionAffinity", "")),
        "ClientIP" | NONE => {}
        other => causes.push(not_supported(
            "spec.sessionAffinity",
            &go_quote(other),
            &["ClientIP", NONE],
        )),
    }
    let at = "spec.sessionAffinityConfig";
    let config = get(spec, "sessionAffinityConfig");
    if affinity == "ClientIP" {
        let detail = "when session affinity type is ClientIP";
        let client = config.and_then(|c| get(c, "clientIP"));
        let timeout = client.and_then(|c| get(c, "timeoutSeconds"));
        match (config, client, timeout) {
            (None, _, _) => causes.push(required(at, detail)),
            (Some(_), None, _) => causes.push(required(&format!("{at}.clientIP"), detail)),
            (_, Some(_), None) => {
                causes.push(required(&format!("{at}.clientIP.timeoutSeconds"), detail));
            }
            (_, _, Some(timeout)) => {
                let seconds = timeout.as_i64().unwrap_or(0);
                if !(1..=MAX_AFFINITY_SECONDS).contains(&seconds) {
                    causes.push(invalid(
                        &format!("{at}.clientIP.timeoutSeconds"),
                        &seconds.to_string(),
                        &format!("must be greater than 0 and less than {MAX_AFFINITY_SECONDS}"),
                    ));
                }
            }
        }
    } else if affinity == NONE && config.is_some() {
        causes.push(forbidden(
            at,
            "must not be set when session affinity is None",
        ));
    }
}

/// `loadBalancerSourceRanges`, or kube's annotation when the field is empty.
fn source_ranges(service: &Value, causes: &mut Vec<Cause>) {
    let load_balancer = service_type(service) == LOAD_BALANCER;
    let ranges = list(spec(service), "loadBalancerSourceRanges");
    let annotation = service
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(SOURCE_RANGES_ANNOTATION))
        .and_then(Value::as_str);
    let (at, values): (String, Vec<&str>) = if !ranges.is_empty() {
        let values = ranges.iter().map(|v| v.as_str().unwrap_or("")).collect();
        ("spec.LoadBalancerSourceRanges".to_owned(), values)
    } else if let Some(value) = annotation {
        let value = value.trim();
        let values = if value.is_empty() {
            Vec::new()
        } else {
            value.split(',').collect()
        };
        (
            format!("metadata.annotations[{SOURCE_RANGES_ANNOTATION}]"),
            values,
        )
    } else {
        return;
    };
    if !load_balancer {
        causes.push(forbidden(
            &at,
            "may only be used when `type` is 'LoadBalancer'",
        ));
    }
    for (i, value) in values.iter().enumerate() {
        let value = value.trim();
        if !crate::strfmt::is_cidr_sloppy(value) {
            // The field's entries are indexed, the annotation's are not.
            let here = if ranges.is_empty() {
                at.clone()
            } else {
                format!("{at}[{i}]")
            };
            causes.push(invalid(
                &here,
                &go_quote(value),
                super::common::CIDR_MESSAGE,
            ));
        }
    }
}

/// `validateLoadBalancerClassField`.
fn load_balancer_class(old: Option<&Value>, service: &Value, causes: &mut Vec<Cause>) {
    fn class(service: &Value) -> Option<&str> {
        get(spec(service), "loadBalancerClass").and_then(Value::as_str)
    }
    let at = "spec.loadBalancerClass";
    if let Some(old) = old
        && service_type(old) == LOAD_BALANCER
        && service_type(service) == LOAD_BALANCER
        && class(old) != class(service)
    {
        causes.push(invalid(
            at,
            &go_pointer(class(service)),
            "may not change once set",
        ));
    }
    match class(service) {
        Some(class) if service_type(service) == LOAD_BALANCER => {
            for message in crate::names::qualified_name_problems(class) {
                causes.push(invalid(at, &go_quote(class), &message));
            }
        }
        Some(_) => causes.push(forbidden(
            at,
            "may only be used when `type` is 'LoadBalancer'",
        )),
        None => {}
    }
}

/// `validateServiceExternalTrafficPolicy` and `validateServiceInternalTrafficFieldsValue`.
fn traffic_policies(service: &Value, causes: &mut Vec<Cause>) {
    let spec = spec(service);
    let external = text(spec, "externalTrafficPolicy");
    if !externally_accessible(service) {
        if !external.is_empty() {
            causes.push(invalid(
                "spec.externalTrafficPolicy",
                &go_quote(external),
                "may only be set for externally-accessible services",
            ));
        }
    } else if external.is_empty() {
        causes.push(required("spec.externalTrafficPolicy", ""));
    } else if !matches!(external, "Cluster" | "Local") {
        causes.push(not_supported(
            "spec.externalTrafficPolicy",
            &go_quote(external),
            &["Cluster", "Local"],
        ));
    }
    let health = number(spec, "healthCheckNodePort");
    if !needs_health_check(service) {
        if health != 0 {
            causes.push(invalid(
                "spec.healthCheckNodePort",
                &health.to_string(),
                "may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is 'Local'",
            ));
        }
    } else if health != 0 && !(1..=65535).contains(&health) {
        // 0 is the one the allocator gives (see the module's differences).
        causes.push(invalid(
            "spec.healthCheckNodePort",
            &health.to_string(),
            PORT_RANGE,
        ));
    }
    match get(spec, "internalTrafficPolicy").and_then(Value::as_str) {
        None => {
            if matches!(
                service_type(service),
                NODE_PORT | LOAD_BALANCER | CLUSTER_IP
            ) {
                causes.push(required("spec.internalTrafficPolicy", ""));
            }
        }
        Some("Cluster" | "Local") => {}
        Some(other) => causes.push(not_supported(
            "spec.internalTrafficPolicy",
            &go_quote(other),
            &["Cluster", "Local"],
        )),
    }
}

/// kube's `ValidateServiceClusterIPsRelatedFields`: `clusterIP` and `clusterIPs` agree,
/// `ipFamilies` and `ipFamilyPolicy` are known values, the addresses are valid (`None` alone),
/// at most one of each family and of the families `ipFamilies` names. The Service registry
/// checks them before it allocates (as kube's `initIPFamilyFields`), and refuses with them
/// alone.
#[must_use]
pub fn cluster_ips_related(service: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    if service_type(service) == EXTERNAL_NAME {
        return causes;
    }
    let ip = text(spec(service), "clusterIP");
    let ips = strings(service, "clusterIPs");
    let listed = ips.clone().unwrap_or_default();
    let quoted = go_strings(ips.as_deref());
    if !ip.is_empty() {
        if listed.is_empty() {
            causes.push(required("spec.clusterIPs", ""));
        } else if listed[0] != ip {
            causes.push(invalid(
                "spec.clusterIPs",
                &quoted,
                "first value must match `clusterIP`",
            ));
        }
    } else if !listed.is_empty() {
        causes.push(invalid(
            "spec.clusterIPs",
            &quoted,
            "must be empty when `clusterIP` is not specified",
        ));
    }
    let families = strings(service, "ipFamilies").unwrap_or_default();
    let mut seen = HashSet::new();
    for (i, family) in families.iter().enumerate() {
        let at = format!("spec.ipFamilies[{i}]");
        if !matches!(*family, "IPv4" | "IPv6") {
            causes.push(not_supported(&at, &go_quote(family), &["IPv4", "IPv6"]));
        }
        if !seen.insert(*family) {
            causes.push(duplicate(&at, &go_quote(family)));
        }
    }
    if let Some(chosen) = policy(service)
        && !matches!(
            chosen,
            SINGLE_STACK | "PreferDualStack" | "RequireDualStack"
        )
    {
        causes.push(not_supported(
            "spec.ipFamilyPolicy",
            &go_quote(chosen),
            &["PreferDualStack", "RequireDualStack", SINGLE_STACK],
        ));
    }
    let mut bad = false;
    for (i, address) in listed.iter().enumerate() {
        if i == 0 && *address == NONE {
            if listed.len() > 1 {
                bad = true;
                causes.push(invalid(
                    "spec.clusterIPs",
                    &quoted,
                    "'None' must be the first and only value",
                ));
            }
            continue;
        }
        // Parsed strictly (kube's legacy parser also reads leading zeros): the allocator
        // claims the address as parsed here.
        if address.parse::<std::net::IpAddr>().is_err() {
            bad = true;
            causes.push(invalid(
                &format!("spec.clusterIPs[{i}]"),
                &go_quote(address),
                pod_spec::IP_MESSAGE,
            ));
        }
    }
    if listed.len() > 2 {
        causes.push(invalid(
            "spec.clusterIPs",
            &quoted,
            "may only hold up to 2 values",
        ));
    }
    if bad {
        return causes;
    }
    if listed.len() > 1 {
        let distinct: HashSet<Option<bool>> = listed
            .iter()
            .map(|a| crate::strfmt::ip_is_v6_sloppy(a))
            .collect();
        if listed.len() != 2 || distinct.len() != 2 {
            causes.push(invalid(
                "spec.clusterIPs",
                &quoted,
                "may specify no more than one IP for each IP family",
            ));
        }
    }
    if !headless(service) && !listed.is_empty() && !families.is_empty() {
        for (i, (address, family)) in listed.iter().zip(&families).enumerate() {
            let expected = match (*family, crate::strfmt::ip_is_v6_sloppy(address)) {
                ("IPv4", Some(true)) => "IPv4",
                ("IPv6", Some(false)) => "IPv6",
                _ => continue,
            };
            causes.push(invalid(
                &format!("spec.clusterIPs[{i}]"),
                &go_quote(address),
                &format!("expected an {expected} value as indicated by `ipFamilies[{i}]`"),
            ));
        }
    }
    causes
}

/// `validateUpgradeDowngradeClusterIPs`.
fn upgrade_downgrade_cluster_ips(old: &Value, new: &Value, causes: &mut Vec<Cause>) {
    if service_type(old) == EXTERNAL_NAME
        || service_type(new) == EXTERNAL_NAME
        || (headless(old) && headless(new))
    {
        return;
    }
    let (before, after) = (
        strings(old, "clusterIPs").unwrap_or_default(),
        strings(new, "clusterIPs").unwrap_or_default(),
    );
    let quoted = go_strings(strings(new, "clusterIPs").as_deref());
    let changed = |causes: &mut Vec<Cause>, i: usize| {
        causes.push(invalid(
            &format!("spec.clusterIPs[{i}]"),
            &quoted,
            "may not change once set",
        ));
    };
    if before.len() == after.len() {
        for i in (0..before.len()).filter(|i| before[*i] != after[*i]) {
            changed(causes, i);
        }
    } else if before.len() > after.len() {
        if after.is_empty() {
            causes.push(invalid(
                "spec.clusterIPs[0]",
                &quoted,
                "primary clusterIP can not be unset",
            ));
        } else if after[0] != before[0] {
            changed(causes, 0);
        }
        if after.len() == 1 && policy(new) != Some(SINGLE_STACK) {
            causes.push(invalid(
                "spec.ipFamilyPolicy",
                &go_pointer(policy(new)),
                "must be set to 'SingleStack' when releasing the secondary clusterIP",
            ));
        }
    } else if !before.is_empty() && after[0] != before[0] {
        changed(causes, 0);
    }
}

/// `validateUpgradeDowngradeIPFamilies` (its paths and values as kube has them).
fn upgrade_downgrade_ip_families(old: &Value, new: &Value, causes: &mut Vec<Cause>) {
    if service_type(old) == EXTERNAL_NAME
        || service_type(new) == EXTERNAL_NAME
        || headless(old)
        || headless(new)
    {
        return;
    }
    let (before, after) = (
        strings(old, "ipFamilies").unwrap_or_default(),
        strings(new, "ipFamilies").unwrap_or_default(),
    );
    let families = go_slice("core.IPFamily", strings(new, "ipFamilies").as_deref());
    let addresses = go_strings(strings(new, "clusterIPs").as_deref());
    let at = "spec.ipFamilies[0]";
    if before.len() == after.len() {
        for _ in (0..before.len()).filter(|i| before[*i] != after[*i]) {
            causes.push(invalid(at, &families, "may not change once set"));
        }
    } else if before.len() > after.len() {
        if list(spec(new), "clusterIPs").is_empty() {
            causes.push(invalid(at, &families, "primary ipFamily can not be unset"));
        }
        if !after.is_empty() && after[0] != before[0] {
            causes.push(invalid(at, &addresses, "may not change once set"));
        }
        if after.len() == 1 && policy(new) != Some(SINGLE_STACK) {
            causes.push(invalid(
                "spec.ipFamilyPolicy",
                &go_pointer(policy(new)),
                "must be set to 'SingleStack' when releasing the secondary ipFamily",
            ));
        }
    } else if !before.is_empty() && !after.is_empty() && after[0] != before[0] {
        causes.push(invalid(at, &addresses, "may not change once set"));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    fn causes(service: Value, old: Option<&Value>) -> Vec<String> {
        crate::kinds::refusal_causes("", "services", service, old)
    }

    fn service(spec: Value) -> Value {
        json!({"metadata": {"name": "s", "namespace": "default"}, "spec": spec})
    }

    /// Goal: kube's `ValidateService` on a NodePort Service whose every field but the
    /// addresses is wrong: each cause, in kube's order.
    #[test]
    fn a_service_s_fields_are_checked_in_kube_s_order() {
        let bad = service(json!({"type": "NodePort",
            "ports": [{"port": 70000, "nodePort": 30001, "protocol": "XX", "appProtocol": "a b"},
                      {"name": "b", "port": 80, "targetPort": "no_such", "nodePort": 30002}],
            "selector": {"a": "b c"}, "sessionAffinity": "bogus",
            "externalIPs": ["127.0.0.1", "x"], "externalTrafficPolicy": "bogus",
            "internalTrafficPolicy": "Nope", "trafficDistribution": "Far",
            "loadBalancerSourceRanges": ["10.0.0.0/8", "nope"], "loadBalancerClass": "c",
            "allocateLoadBalancerNodePorts": true}));
        assert_eq!(
            causes(bad, None),
            [
                "spec.ports[0].name: Required value",
                "spec.ports[0].port: Invalid value: 70000: must be between 1 and 65535, inclusive",
                "spec.ports[0].protocol: Unsupported value: \"XX\": supported values: \"SCTP\", \"TCP\", \"UDP\"",
                "spec.ports[0].targetPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
                "spec.ports[0].appProtocol: Invalid value: \"a b\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
                "spec.ports[1].targetPort: Invalid value: \"no_such\": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)",
                "spec.selector: Invalid value: \"b c\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
                "spec.sessionAffinity: Unsupported value: \"bogus\": supported values: \"ClientIP\", \"None\"",
                "spec.externalIPs[0]: Invalid value: \"127.0.0.1\": may not be in the loopback range (127.0.0.0/8, ::1/128)",
                "spec.externalIPs[1]: Invalid value: \"x\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
                "spec.LoadBalancerSourceRanges: Forbidden: may only be used when `type` is 'LoadBalancer'",
                "spec.LoadBalancerSourceRanges[1]: Invalid value: \"nope\": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)",
                "spec.allocateLoadBalancerNodePorts: Forbidden: may only be used when `type` is 'LoadBalancer'",
                "spec.loadBalancerClass: Forbidden: may only be used when `type` is 'LoadBalancer'",
                "spec.externalTrafficPolicy: Unsupported value: \"bogus\": supported values: \"Cluster\", \"Local\"",
                "spec.internalTrafficPolicy: Unsupported value: \"Nope\": supported values: \"Cluster\", \"Local\"",
                "spec.trafficDistribution: Unsupported value: \"Far\": supported values: \"PreferClose\"",
            ]
        );
    }

    /// Goal: the rules of each type and of session affinity, duplicate ports, ClusterIP's
    /// node ports and the load balancer's required fields.
    #[test]
    fn types_affinity_and_duplicates() {
        let external = service(json!({"type": "ExternalName", "externalName": "bad_name.",
            "ipFamilyPolicy": "SingleStack"}));
        assert_eq!(
            causes(external, None),
            [
                "spec.ipFamilyPolicy: Forbidden: may not be set for ExternalName services",
                "spec.externalName: Invalid value: \"bad_name\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
            ]
        );
        let named = service(json!({"type": "ExternalName", "externalName": "example.com."}));
        assert!(causes(named, None).is_empty());
        let headless = service(json!({"type": "NodePort", "clusterIP": "None",
            "clusterIPs": ["None"], "ports": [{"port": 80}]}));
        assert_eq!(
            causes(headless, None),
            [
                "spec.clusterIPs[0]: Invalid value: \"None\": may not be set to 'None' for NodePort services"
            ]
        );
        let affinity = service(json!({"sessionAffinity": "ClientIP",
            "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 86401}},
            "ports": [{"port": 80, "nodePort": 30000}, {"name": "b", "port": 80}]}));
        assert_eq!(
            causes(affinity, None),
            [
                "spec.ports[0].name: Required value",
                "spec.sessionAffinityConfig.clientIP.timeoutSeconds: Invalid value: 86401: must be greater than 0 and less than 86400",
                "spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'",
                "spec.ports[1]: Duplicate value: core.ServicePort{Name:\"\", Protocol:\"TCP\", AppProtocol:(*string)(nil), Port:80, TargetPort:intstr.IntOrString{Type:0, IntVal:0, StrVal:\"\"}, NodePort:0}",
            ]
        );
        let doubled = service(json!({"type": "NodePort", "ports": [
            {"name": "a", "port": 80, "nodePort": 30001},
            {"name": "b", "port": 81, "nodePort": 30001}]}));
        assert_eq!(
            causes(doubled, None),
            ["spec.ports[1].nodePort: Duplicate value: 30001"]
        );
        let balancer = service(json!({"type": "LoadBalancer", "ports": [{"port": 80}],
            "loadBalancerClass": "a b", "healthCheckNodePort": 30001}));
        assert_eq!(
            causes(balancer, None),
            [
                "spec.loadBalancerClass: Invalid value: \"a b\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
                "spec.healthCheckNodePort: Invalid value: 30001: may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is 'Local'",
            ]
        );
        let local = service(json!({"externalTrafficPolicy": "Local", "ports": [{"port": 80}]}));
        assert_eq!(
            causes(local, None),
            [
                "spec.externalTrafficPolicy: Invalid value: \"Local\": may only be set for externally-accessible services"
            ]
        );
        assert_eq!(
            causes(service(json!({"ports": []})), None),
            ["spec.ports: Required value"]
        );
        let headless = service(json!({"clusterIP": "None", "clusterIPs": ["None"]}));
        assert!(causes(headless, None).is_empty());
    }

    /// Goal: `ValidateLoadBalancerStatus` on an update that changes the status.
    #[test]
    fn a_load_balancer_status_is_checked_when_it_changes() {
        let old = service(json!({"type": "LoadBalancer", "ports": [{"port": 80}],
            "externalTrafficPolicy": "Cluster"}));
        let mut new = old.clone();
        new["status"] = json!({"loadBalancer": {"ingress": [
            {"ip": "1.2.3", "ipMode": "VIP"}, {"hostname": "1.2.3.4", "ipMode": "Proxy"},
            {"ip": "1.2.3.4", "ipMode": "Tunnel"}]}});
        assert_eq!(
            causes(new.clone(), Some(&old)),
            [
                "status.loadBalancer.ingress[0].ip: Invalid value: \"1.2.3\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
                "status.loadBalancer.ingress[1].ipMode: Forbidden: may not be specified when `ip` is not set",
                "status.loadBalancer.ingress[1].hostname: Invalid value: \"1.2.3.4\": must be a DNS name, not an IP address",
                "status.loadBalancer.ingress[2].ipMode: Unsupported value: \"Tunnel\": supported values: \"Proxy\", \"VIP\"",
            ]
        );
        let mut cluster = old.clone();
        cluster["spec"]["type"] = json!("ClusterIP");
        cluster["spec"]
            .as_object_mut()
            .unwrap()
            .remove("externalTrafficPolicy");
        cluster["status"] = json!({"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}});
        assert_eq!(
            causes(cluster, Some(&old)),
            [
                "status.loadBalancer.ingress: Forbidden: may only be used when `spec.type` is 'LoadBalancer'"
            ]
        );
    }

    /// Goal: the address fields as `ValidateServiceClusterIPsRelatedFields` checks them, and
    /// an update's immutable addresses, families and load balancer class.
    #[test]
    fn addresses_and_updates() {
        let addressed = service(json!({"clusterIP": "10.0.0.1",
            "clusterIPs": ["10.0.0.2", "10.0.0.3", "x"], "ipFamilies": ["IPv4", "IPv4", "IPv5"],
            "ipFamilyPolicy": "Both", "ports": [{"port": 80}]}));
        assert_eq!(
            causes(addressed, None),
            [
                "spec.clusterIPs: Invalid value: []string{\"10.0.0.2\", \"10.0.0.3\", \"x\"}: first value must match `clusterIP`",
                "spec.ipFamilies[1]: Duplicate value: \"IPv4\"",
                "spec.ipFamilies[2]: Unsupported value: \"IPv5\": supported values: \"IPv4\", \"IPv6\"",
                "spec.ipFamilyPolicy: Unsupported value: \"Both\": supported values: \"PreferDualStack\", \"RequireDualStack\", \"SingleStack\"",
                "spec.clusterIPs[2]: Invalid value: \"x\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
                "spec.clusterIPs: Invalid value: []string{\"10.0.0.2\", \"10.0.0.3\", \"x\"}: may only hold up to 2 values",
            ]
        );
        let old = service(json!({"type": "LoadBalancer", "clusterIP": "10.0.0.1",
            "clusterIPs": ["10.0.0.1"], "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
            "loadBalancerClass": "a", "allocateLoadBalancerNodePorts": true,
            "ports": [{"port": 80, "nodePort": 30001}]}));
        let mut new = old.clone();
        new["spec"]["clusterIP"] = json!("10.0.0.9");
        new["spec"]["clusterIPs"] = json!(["10.0.0.9"]);
        new["spec"]["loadBalancerClass"] = json!("b");
        assert_eq!(
            causes(new, Some(&old)),
            [
                "spec.clusterIPs[0]: Invalid value: []string{\"10.0.0.9\"}: may not change once set",
                "spec.loadBalancerClass: Invalid value: \"b\": may not change once set",
            ]
        );
    }
}

//! ClusterIP, node port and health check node port allocation for Services, as kube-apiserver's
//! Service registry does it on create and update (`pkg/registry/core/service/storage`:
//! `beginCreate`, `beginUpdate`, `alloc.go`; the strategy's `dropTypeDependentFields`), with
//! kube-apiserver 1.33's IPAddress-backed address allocator
//! (`pkg/registry/core/service/ipallocator/ipallocator.go`, MultiCIDRServiceAllocator).
//!
//! ## Guarantees
//! - **No two Services hold one address or one node port**, across servers sharing a store.
//!   Every address a write gives a Service that its stored version did not hold is a
//!   `networking.k8s.io/v1` **IPAddress** object named by the address (IPv6 in canonical form),
//!   labelled `ipaddress.kubernetes.io/ip-family: IPv4|IPv6` and
//!   `ipaddress.kubernetes.io/managed-by: ipallocator.k8s.io`, with `spec.parentRef`
//!   `{resource: services, namespace, name}` ([`ip_address`]); every node port is a record
//!   `<prefix>/ranges/servicenodeports/<port>` (value: the Service's `namespace/name`). Both
//!   are written in the Service's own create or update transaction, on the condition that the
//!   key is absent or still the stale one that was read (its mod revision); an update's
//!   transaction also compares the Service's own revision. Two writes racing for one address:
//!   one transaction fails on the record and tries again. The IPAddress objects are served
//!   (`kubectl get ipaddresses` lists one per Service address) and watched like any other.
//! - **Releases are written with the Service**: the transaction that deletes a Service (a
//!   DELETE, one of a collection or of the garbage collector, the update that removes its last
//!   finalizer, its namespace's deletion) or an update that drops an address (to
//!   `ExternalName`, or to `SingleStack` from two families) also deletes the address's
//!   IPAddress, on its mod revision as read, when its `parentRef` names the Service.
//! - **What holds an address**: a cached Service whose addresses include it; any IPAddress of
//!   that name — one a client created reserves the address whatever its parent (a Service
//!   asking for it is refused, automatic allocation skips it) — unless it is an allocator's
//!   orphan: labelled `managed-by: ipallocator.k8s.io`, naming a Service as parent, seen by the
//!   cache (mod revision ≤ the cache's revision) and held by no cached Service; an orphan is
//!   taken over by the claim's transaction (on its mod revision), as kube-apiserver's repair
//!   loop (`repairip.go`) deletes orphans. So no release step a crash could skip is needed for
//!   correctness: a release the Service's transaction did not write is repaired at the next
//!   claim of the address.
//! - **Stores written before IPAddresses**: an older version of this server wrote
//!   `<prefix>/ranges/serviceips/<ip>` records instead. Its Services still hold their
//!   addresses (a cached Service holds what it names, with or without an IPAddress), and a
//!   record the cache has not seen yet holds its address until the cache has it; no new one is
//!   written, and a seen one is ignored. At start the server gives each in-range address a
//!   stored Service holds without an IPAddress the allocator's IPAddress, as kube's repair loop
//!   does (`crate::bootstrap`).
//! - **What a Service holds**: the addresses in `clusterIP` and `clusterIPs` of a Service that is
//!   not `ExternalName`; the `nodePort`s of a `NodePort` or `LoadBalancer` Service's ports; the
//!   `healthCheckNodePort` of a `LoadBalancer` Service with `externalTrafficPolicy: Local`. A
//!   node port is **free** when no cached Service holds it and its record, if any, is one the
//!   cache has seen (mod revision ≤ the cache's revision), so deleting a Service, or an update
//!   that drops one, frees it without a release step; an address is free as said above. An
//!   asked address or port whose record (an allocator's IPAddress) is newer than the cache
//!   waits for the cache to see it before it is judged.
//! - **Create**: a Service without `spec.clusterIP` (not headless `None`, not `ExternalName`)
//!   gets a free address of the range of each of its `ipFamilies`; an asked one is claimed when
//!   it lies in the range and is free, else 422 with kube-apiserver's wording (`spec.clusterIPs:
//!   Invalid value: []string{"X"}: failed to allocate IP X: provided IP is already allocated`,
//!   or `... the provided IP (X) is not in the valid range. The range of valid IPs is R`); a
//!   full range is 500 `failed to allocate a serviceIP: range is full`. Each port of a
//!   `NodePort` Service, or of a `LoadBalancer` one unless `allocateLoadBalancerNodePorts` is
//!   false, gets a node port (`initNodePorts`: ports sharing a port number share the node
//!   port); an asked one out of the range or held is 422 (`spec.ports[i].nodePort: Invalid
//!   value: P: provided port is already allocated`). A `LoadBalancer` Service with
//!   `externalTrafficPolicy: Local` gets `healthCheckNodePort` (an asked one that is held or
//!   outside the range is kube-apiserver's 500 `failed to allocate requested HealthCheck
//!   NodePort P: ...`).
//! - **Update** (PUT, every patch type, server-side apply): first kube-apiserver's
//!   `patchAllocatedValues` (a new object that leaves out `clusterIP`, `clusterIPs`, a port's
//!   `nodePort` (matched by port name) or `healthCheckNodePort` keeps the old value while both
//!   versions need it, so a `kubectl replace` of a manifest without them changes nothing) and
//!   `normalizeClusterIPs`. Then, as `allocateUpdate`: `ExternalName` to another type
//!   allocates addresses as a create does; a Service of a type that uses node ports gets one
//!   for every port without one (a type change from `ClusterIP`, or a port added) and claims
//!   every asked one its old version did not hold (422 as on create); one that comes to need a
//!   health check node port gets it. Then `dropTypeDependentFields`: a change to a type that
//!   does not use them clears `clusterIP`, `clusterIPs`, `ipFamilies` and `ipFamilyPolicy` (to
//!   `ExternalName`), the ports' `nodePort`s and `externalTrafficPolicy` (to `ClusterIP` or
//!   `ExternalName`), `healthCheckNodePort` (when the Service no longer needs one: another type
//!   or `externalTrafficPolicy: Cluster`), `allocateLoadBalancerNodePorts` and
//!   `loadBalancerClass` (from `LoadBalancer`), each only when the update did not also change
//!   it, and the load balancer status of a Service that is no longer a `LoadBalancer`.
//! - **IP families** (`initIPFamilyFields`): `ipFamilyPolicy` defaults to the old one on update,
//!   else `RequireDualStack` for a headless Service without selector, else `SingleStack`;
//!   `ipFamilies` is inferred from `clusterIPs`, then the range's family (the first range's),
//!   plus the other family for a dual-stack policy when two ranges are configured (a headless
//!   Service without selector gets both families whatever the ranges). `RequireDualStack`
//!   with one range is 422 `spec.ipFamilyPolicy: Invalid value: "RequireDualStack": this
//!   cluster is not configured for dual-stack services`; a family or address of a family
//!   without a range is 422 (`spec.ipFamilies[i]: Invalid value: "IPv6": not configured on
//!   this cluster`). `PreferDualStack` with one range gets one family and one address. With two
//!   ranges (`--service-cluster-ip-range=<v4>,<v6>`), a dual-stack Service gets an address of
//!   each, and an update to a dual-stack policy adds the second address (`SingleStack` again
//!   drops it).
//! - **Validation**: [`prepare`] refuses with the address fields' errors alone
//!   (`watchkeeper_api::kinds::services::cluster_ips_related`, as kube-apiserver's
//!   `initIPFamilyFields` does before it allocates), then clears what a type change leaves
//!   without use (`dropTypeDependentFields`, which kube's strategy runs after allocation: it
//!   clears only what allocation does not look at). The write path then refuses an asked
//!   address or node port outside its range ([`Allocators::out_of_range`], kube's allocator's
//!   422 or 500), then validates the whole Service (`watchkeeper_api::kinds::services`,
//!   kube's `ValidateService` / `ValidateServiceUpdate`) before anything is claimed, so an
//!   invalid Service claims nothing; an asked address or port that is taken is refused at
//!   the claim.
//! - Dynamic allocation prefers the upper part of a range, as kube-apiserver's static subranges
//!   do (the first `min(max(16, size / 16), 256)` addresses, `min(max(16, size / 32), 128)`
//!   ports, are left for values clients choose), taking the lowest free value there, then the
//!   lowest below. A write whose claim lost a race starts its next scan at a random point of the
//!   upper part (kube-apiserver picks at random every time), so concurrent writes spread out.
//! - A write of `services/{name}/status` keeps the stored spec (`serviceStatusStrategy`), so it
//!   claims nothing and can not take anything.
//! - A stored Service whose `ipFamilies` do not match its addresses (an older server defaulted
//!   `IPv4` whatever the range) is read by an update with the families of its `clusterIPs`
//!   (as kube-apiserver's `defaultOnReadIPFamilies` fills missing ones), so the update repairs
//!   it instead of failing validation.
//! - Not done: `defaultOnRead` on reads (GET and watch show a stored Service as it is); the
//!   `duplicate nodePort` 500 of `updateNodePorts`. Deviations: kube-apiserver allocates before
//!   it validates, so where an asked address or node port is taken *and* the Service is
//!   invalid, kube answers the refused claim and this server the validation's causes; an
//!   `ExternalName` Service's stray `nodePort`s are not held (kube-apiserver neither allocates
//!   nor releases them), so a change of it to `NodePort` claims them.
//! - Differs from kube (IPAddresses): kube-apiserver creates the IPAddress through its own
//!   client before the Service is stored and deletes it after (a crash between leaves an orphan
//!   its repair loop deletes after 60 s); here both are one transaction, so the allocator's
//!   IPAddress carries no `managedFields` entry of `kube-apiserver`, and an allocator-labelled
//!   IPAddress whose parent Service does not hold the address is taken over at once rather
//!   than after kube's grace period (a client that writes that label and parent gets no
//!   reservation). kube's repair loop runs all along; here its pass over Services runs once at
//!   start (`crate::bootstrap`), so an IPAddress a client deletes while its Service holds the
//!   address comes back only at the next start (the `kubernetes` Service's also when the
//!   keeper restores that Service), and meanwhile a client may create an IPAddress for that
//!   address (kube: 409 once its repair loop has created it); the repair's other fixes are
//!   not done (an orphan is not deleted but taken over by the next claim of its address, so
//!   one left by a release that missed it — a namespace's deletion reads its Services from the
//!   cache, which may not have a Service's last address yet — stays listed until then; an
//!   IPAddress with a wrong reference or labels is left), nor are its events. The allocator's
//!   IPAddress writes go through no admission (webhooks, policies) and no audit, which
//!   kube-apiserver's own client's create would. The `--service-cluster-ip-range` flags are
//!   the ranges: other ServiceCIDRs a client creates add no addresses to allocate from.

use std::collections::{HashMap, HashSet};
use std::fmt::Display;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use bytes::Bytes;
use serde_json::{Map, Value, json};
use watchkeeper_store::{Compare, KeyValue, TxnOp};

use crate::config::IpRange;

/// A field error as kube-apiserver's `field.Error` reports it: the field, the message, the
/// reason.
pub type Cause = (String, String, String);

const NONE: &str = "None";
const SINGLE_STACK: &str = "SingleStack";
const PREFER_DUAL_STACK: &str = "PreferDualStack";
const REQUIRE_DUAL_STACK: &str = "RequireDualStack";
const EXTERNAL_NAME: &str = "ExternalName";
const LOAD_BALANCER: &str = "LoadBalancer";
const NODE_PORT: &str = "NodePort";
const CLUSTER_IP: &str = "ClusterIP";

fn invalid(field: impl Into<String>, value: impl Display, detail: &str) -> Cause {
    (
        field.into(),
        format!("Invalid value: {value}: {detail}"),
        "FieldValueInvalid".to_owned(),
    )
}

/// Go's `%#v` of a `[]string` (`nil` when absent), as a field error quotes `clusterIPs`.
#[must_use]
pub fn go_strings(values: Option<&[String]>) -> String {
    let borrowed: Option<Vec<&str>> = values.map(|v| v.iter().map(String::as_str).collect());
    watchkeeper_api::kinds::services::go_strings(borrowed.as_deref())
}

/// A field error's value for a pointer to a string (`ipFamilyPolicy`): `null` or quoted.
fn go_pointer(value: Option<&str>) -> String {
    value.map_or_else(|| "null".to_owned(), |v| format!("{v:?}"))
}

fn spec(service: &Value) -> Option<&Map<String, Value>> {
    service.get("spec").and_then(Value::as_object)
}

fn spec_mut(service: &mut Value) -> Option<&mut Map<String, Value>> {
    service.get_mut("spec").and_then(Value::as_object_mut)
}

/// A string field of the spec, `""` when absent (Go's zero value).
fn text<'a>(service: &'a Value, field: &str) -> &'a str {
    spec(service)
        .and_then(|s| s.get(field))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// `spec.type`, `ClusterIP` when absent.
fn kind(service: &Value) -> &str {
    match text(service, "type") {
        "" => CLUSTER_IP,
        other => other,
    }
}

/// A list of strings of the spec, `None` when absent or null (Go's nil slice).
fn list(service: &Value, field: &str) -> Option<Vec<String>> {
    spec(service)
        .and_then(|s| s.get(field))
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .map(|v| v.as_str().unwrap_or_default().to_owned())
                .collect()
        })
}

/// A list of strings of the spec, empty when absent.
fn listed(service: &Value, field: &str) -> Vec<String> {
    list(service, field).unwrap_or_default()
}

fn policy(service: &Value) -> Option<&str> {
    spec(service)
        .and_then(|s| s.get("ipFamilyPolicy"))
        .and_then(Value::as_str)
}

fn ports(service: &Value) -> &[Value] {
    spec(service)
        .and_then(|s| s.get("ports"))
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// A number field, 0 when absent (or not a number).
fn number(value: Option<&Value>) -> u64 {
    value.and_then(Value::as_u64).unwrap_or(0)
}

fn node_port(port: &Value) -> u64 {
    number(port.get("nodePort"))
}

fn health_port(service: &Value) -> u64 {
    number(spec(service).and_then(|s| s.get("healthCheckNodePort")))
}

fn selectorless(service: &Value) -> bool {
    spec(service)
        .and_then(|s| s.get("selector"))
        .and_then(Value::as_object)
        .is_none_or(Map::is_empty)
}

fn set(service: &mut Value, field: &str, value: Value) {
    if let Some(spec) = spec_mut(service) {
        spec.insert(field.to_owned(), value);
    }
}

fn remove(service: &mut Value, field: &str) {
    if let Some(spec) = spec_mut(service) {
        spec.remove(field);
    }
}

fn set_list(service: &mut Value, field: &str, values: &[String]) {
    set(service, field, json!(values));
}

/// kube-apiserver's `needsClusterIP`: every type but `ExternalName`.
fn needs_cluster_ip(service: &Value) -> bool {
    kind(service) != EXTERNAL_NAME
}

/// A type whose ports carry node ports (the strategy's `needsNodePort`).
fn uses_node_ports(service: &Value) -> bool {
    matches!(kind(service), NODE_PORT | LOAD_BALANCER)
}

/// A Service whose ports without a node port get one (`shouldAllocateNodePorts`).
fn allocates_node_ports(service: &Value) -> bool {
    match kind(service) {
        NODE_PORT => true,
        LOAD_BALANCER => {
            spec(service)
                .and_then(|s| s.get("allocateLoadBalancerNodePorts"))
                .and_then(Value::as_bool)
                != Some(false)
        }
        _ => false,
    }
}

/// kube-apiserver's `NeedsHealthCheck`: a `LoadBalancer` with `externalTrafficPolicy: Local`.
fn needs_health_check(service: &Value) -> bool {
    kind(service) == LOAD_BALANCER && text(service, "externalTrafficPolicy") == "Local"
}

/// The node ports a Service's ports name (nonzero ones).
fn named_node_ports(service: &Value) -> HashSet<u64> {
    ports(service)
        .iter()
        .map(node_port)
        .filter(|p| *p != 0)
        .collect()
}

/// An IP family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Family {
    /// `IPv4`.
    V4,
    /// `IPv6`.
    V6,
}

impl Family {
    /// The family of an address.
    #[must_use]
    pub fn of(ip: IpAddr) -> Family {
        match ip {
            IpAddr::V4(_) => Family::V4,
            IpAddr::V6(_) => Family::V6,
        }
    }

    /// The family's name in `ipFamilies`.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Family::V4 => "IPv4",
            Family::V6 => "IPv6",
        }
    }

    fn parse(name: &str) -> Option<Family> {
        match name {
            "IPv4" => Some(Family::V4),
            "IPv6" => Some(Family::V6),
            _ => None,
        }
    }

    fn other(self) -> Family {
        match self {
            Family::V4 => Family::V6,
            Family::V6 => Family::V4,
        }
    }
}

/// What a create or update does before anything is allocated (kube-apiserver's
/// `patchAllocatedValues`, `normalizeClusterIPs` and `initIPFamilyFields`): fills what the new
/// object leaves out, and its IP families from `families` (the configured ranges' families,
/// the primary first). `old` is the stored Service of an update.
///
/// # Errors
/// The field errors of a 422.
pub fn prepare(
    old: Option<&Value>,
    new: &mut Value,
    families: &[Family],
) -> Result<(), Vec<Cause>> {
    if !new.get("spec").is_some_and(Value::is_object) {
        return Ok(());
    }
    let stored = old;
    let old = old.map(read_default);
    let old = old.as_deref();
    if let (Some(stored), Some(old)) = (stored, old)
        && list(new, "ipFamilies") == list(stored, "ipFamilies")
        && list(old, "ipFamilies") != list(stored, "ipFamilies")
    {
        // The update leaves the stored families as they were: it gets the repaired ones.
        set_list(new, "ipFamilies", &listed(old, "ipFamilies"));
    }
    if let Some(old) = old {
        patch_allocated_values(old, new);
    }
    normalize_cluster_ips(old, new);
    init_ip_families(old, new, families)?;
    // kube's strategy runs these after allocation (`PrepareForUpdate`); they clear only what
    // the new type does not use, which allocation does not look at, so they run before the
    // validation that precedes the claims here.
    if let Some(old) = old {
        drop_type_dependent_fields(old, new);
    }
    if kind(new) == EXTERNAL_NAME {
        // kube-apiserver defaulted it once for ExternalName Services and hides it on read.
        remove(new, "internalTrafficPolicy");
    }
    Ok(())
}

/// A stored Service as the registry reads it (kube-apiserver's `defaultOnReadIPFamilies`, for
/// addresses): one with addresses whose `ipFamilies` are missing or do not match them (an
/// older server defaulted `IPv4` whatever the range) gets the families of its `clusterIPs`.
fn read_default(stored: &Value) -> std::borrow::Cow<'_, Value> {
    let ips = listed(stored, "clusterIPs");
    let inferred: Vec<String> = ips
        .iter()
        .filter_map(|ip| ip.parse().ok().map(|ip| Family::of(ip).name().to_owned()))
        .collect();
    if !needs_cluster_ip(stored)
        || ips.is_empty()
        || inferred.len() != ips.len()
        || listed(stored, "ipFamilies") == inferred
    {
        return std::borrow::Cow::Borrowed(stored);
    }
    let mut repaired = stored.clone();
    if policy(&repaired).is_none() {
        let chosen = if inferred.len() == 2 {
            REQUIRE_DUAL_STACK
        } else {
            SINGLE_STACK
        };
        set(&mut repaired, "ipFamilyPolicy", json!(chosen));
    }
    set_list(&mut repaired, "ipFamilies", &inferred);
    std::borrow::Cow::Owned(repaired)
}

/// `patchAllocatedValues`: what the server allocated and the new object leaves out is kept
/// while both versions need it.
fn patch_allocated_values(old: &Value, new: &mut Value) {
    if needs_cluster_ip(old) && needs_cluster_ip(new) {
        if text(new, "clusterIP").is_empty() && !text(old, "clusterIP").is_empty() {
            set(new, "clusterIP", json!(text(old, "clusterIP")));
        }
        if listed(new, "clusterIPs").is_empty() && !listed(old, "clusterIPs").is_empty() {
            set_list(new, "clusterIPs", &listed(old, "clusterIPs"));
        }
    }
    if allocates_node_ports(old) && allocates_node_ports(new) {
        // Node ports both versions name can not be given to another port.
        let used: HashSet<u64> = named_node_ports(old)
            .intersection(&named_node_ports(new))
            .copied()
            .collect();
        let by_name: HashMap<&str, u64> = ports(old)
            .iter()
            .map(|p| {
                (
                    p.get("name").and_then(Value::as_str).unwrap_or_default(),
                    node_port(p),
                )
            })
            .collect();
        let by_name: HashMap<String, u64> = by_name
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
        if let Some(Value::Array(ports)) = spec_mut(new).and_then(|s| s.get_mut("ports")) {
            for port in ports.iter_mut() {
                if node_port(port) != 0 {
                    continue;
                }
                let name = port.get("name").and_then(Value::as_str).unwrap_or_default();
                let kept = by_name.get(name).copied().unwrap_or(0);
                if kept != 0
                    && !used.contains(&kept)
                    && let Value::Object(port) = port
                {
                    port.insert("nodePort".to_owned(), json!(kept));
                }
            }
        }
    }
    if needs_health_check(old) && needs_health_check(new) && health_port(new) == 0 {
        let kept = health_port(old);
        if kept != 0 {
            set(new, "healthCheckNodePort", json!(kept));
        }
    }
}

/// `normalizeClusterIPs`: `clusterIPs` follows `clusterIP` where the client managed only the
/// singular field.
fn normalize_cluster_ips(old: Option<&Value>, new: &mut Value) {
    let ip = text(new, "clusterIP").to_owned();
    let Some(old) = old else {
        if !ip.is_empty() && listed(new, "clusterIPs").is_empty() {
            set_list(new, "clusterIPs", &[ip]);
        }
        return;
    };
    let old_ip = text(old, "clusterIP");
    let old_ips = listed(old, "clusterIPs");
    if !old_ips.is_empty() && listed(new, "clusterIPs").is_empty() && old_ip == ip {
        set_list(new, "clusterIPs", &old_ips);
    }
    if old_ip != ip {
        let same = listed(new, "clusterIPs") == old_ips;
        if !old_ip.is_empty() && ip.is_empty() {
            if same {
                remove(new, "clusterIPs");
            }
        } else if same {
            set_list(new, "clusterIPs", &[ip]);
        }
    }
}

/// kube-apiserver's `isMatchingPreferDualStackClusterIPFields`: a `PreferDualStack` Service
/// whose address fields the update leaves alone is not upgraded or downgraded.
fn matching_prefer_dual_stack(old: Option<&Value>, new: &Value) -> bool {
    let Some(old) = old else {
        return false;
    };
    policy(new) == Some(PREFER_DUAL_STACK)
        && kind(old) == kind(new)
        && needs_cluster_ip(new)
        && policy(old).is_none_or(|p| p == PREFER_DUAL_STACK)
        && listed(old, "clusterIPs") == listed(new, "clusterIPs")
        && list(old, "ipFamilies") == list(new, "ipFamilies")
}

/// `initIPFamilyFields`.
fn init_ip_families(
    old: Option<&Value>,
    new: &mut Value,
    families: &[Family],
) -> Result<(), Vec<Cause>> {
    if kind(new) == EXTERNAL_NAME || matching_prefer_dual_stack(old, new) {
        return Ok(());
    }
    let headless_selectorless = text(new, "clusterIP") == NONE && selectorless(new);
    if policy(new).is_none() {
        let chosen = match old.and_then(policy) {
            Some(kept) => kept.to_owned(),
            None if headless_selectorless => REQUIRE_DUAL_STACK.to_owned(),
            None => SINGLE_STACK.to_owned(),
        };
        set(new, "ipFamilyPolicy", json!(chosen));
    }
    let errors = watchkeeper_api::kinds::services::cluster_ips_related(new);
    if !errors.is_empty() {
        return Err(errors);
    }
    let chosen = policy(new).unwrap_or_default().to_owned();
    let mut errors = Vec::new();
    if let Some(old) = old {
        if chosen == SINGLE_STACK {
            // Setting the policy to single-stack drops the secondary address and family.
            for field in ["clusterIPs", "ipFamilies"] {
                let values = listed(new, field);
                if values == listed(old, field) && values.len() > 1 {
                    set_list(new, field, &values[..1]);
                }
            }
        } else {
            for (field, what) in [("clusterIPs", "cluster IP"), ("ipFamilies", "IP family")] {
                let values = listed(new, field);
                if !values.is_empty() && values.len() < listed(old, field).len() {
                    errors.push(invalid(
                        "spec.ipFamilyPolicy",
                        go_pointer(Some(&chosen)),
                        &format!("must be 'SingleStack' to release the secondary {what}"),
                    ));
                }
            }
        }
    }
    if chosen == SINGLE_STACK {
        if listed(new, "clusterIPs").len() == 2 {
            errors.push(invalid(
                "spec.ipFamilyPolicy",
                go_pointer(Some(&chosen)),
                "must be 'RequireDualStack' or 'PreferDualStack' when multiple cluster IPs are specified",
            ));
        }
        if listed(new, "ipFamilies").len() == 2 {
            errors.push(invalid(
                "spec.ipFamilyPolicy",
                go_pointer(Some(&chosen)),
                "must be 'RequireDualStack' or 'PreferDualStack' when multiple IP families are specified",
            ));
        }
    }
    // Families inferred from the addresses.
    let ips = listed(new, "clusterIPs");
    let mut named = listed(new, "ipFamilies");
    let before = named.len();
    for (i, ip) in ips.iter().enumerate() {
        if ip == NONE {
            break;
        }
        let Some(family) = ip.parse().ok().map(Family::of) else {
            continue;
        };
        if i >= named.len() {
            if families.contains(&family) {
                named.push(family.name().to_owned());
            } else {
                errors.push(invalid(
                    format!("spec.clusterIPs[{i}]"),
                    go_strings(Some(&ips)),
                    &format!("{} is not configured on this cluster", family.name()),
                ));
            }
        }
    }
    if named.len() != before {
        set_list(new, "ipFamilies", &named);
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let primary = families.first().copied().unwrap_or(Family::V4);
    if headless_selectorless {
        // Headless without selector: any families, both for a dual-stack policy.
        if named.is_empty() {
            named.push(primary.name().to_owned());
        }
        if named.len() < 2 && chosen != SINGLE_STACK {
            let other = Family::parse(&named[0]).unwrap_or(primary).other();
            named.push(other.name().to_owned());
        }
        set_list(new, "ipFamilies", &named);
        return Ok(());
    }
    if chosen == REQUIRE_DUAL_STACK && families.len() < 2 {
        errors.push(invalid(
            "spec.ipFamilyPolicy",
            go_pointer(Some(&chosen)),
            "this cluster is not configured for dual-stack services",
        ));
    }
    for (i, name) in named.iter().enumerate() {
        if !Family::parse(name).is_some_and(|f| families.contains(&f)) {
            errors.push(invalid(
                format!("spec.ipFamilies[{i}]"),
                format!("{name:?}"),
                "not configured on this cluster",
            ));
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    if named.is_empty() {
        named.push(primary.name().to_owned());
    }
    if chosen != SINGLE_STACK && named.len() == 1 && families.len() == 2 {
        let other = Family::parse(&named[0]).unwrap_or(primary).other();
        named.push(other.name().to_owned());
    }
    set_list(new, "ipFamilies", &named);
    Ok(())
}

/// An address a write claims: of this family, the asked one or any.
pub type IpRequest = (Family, Option<IpAddr>);

/// The addresses a create (`old` absent) or update claims for `new`, once [`prepare`]d
/// (`allocClusterIPs` and `updateClusterIPs`): a created Service's, or one changed from
/// `ExternalName`, an address per family (unless headless); a single-stack Service upgraded to
/// two families, the secondary.
#[must_use]
pub fn ip_requests(old: Option<&Value>, new: &Value) -> Vec<IpRequest> {
    let old = old.map(read_default);
    let old = old.as_deref();
    let all = |new: &Value| -> Vec<IpRequest> {
        let ips = listed(new, "clusterIPs");
        if !needs_cluster_ip(new) || ips.first().is_some_and(|ip| ip == NONE) {
            return Vec::new();
        }
        listed(new, "ipFamilies")
            .iter()
            .enumerate()
            .filter_map(|(i, name)| {
                let asked = ips.get(i).and_then(|ip| ip.parse().ok());
                Family::parse(name).map(|family| (family, asked))
            })
            .collect()
    };
    let Some(old) = old else {
        return all(new);
    };
    if matching_prefer_dual_stack(Some(old), new) {
        return Vec::new();
    }
    if !needs_cluster_ip(old) && needs_cluster_ip(new) {
        return all(new);
    }
    if listed(old, "clusterIPs")
        .first()
        .is_some_and(|ip| ip == NONE)
        || !needs_cluster_ip(new)
    {
        return Vec::new();
    }
    let named = listed(new, "ipFamilies");
    if listed(old, "ipFamilies").len() == 1 && named.len() == 2 {
        let asked = listed(new, "clusterIPs")
            .get(1)
            .and_then(|ip| ip.parse().ok());
        return Family::parse(&named[1])
            .map(|family| vec![(family, asked)])
            .unwrap_or_default();
    }
    Vec::new()
}

/// Sets the claimed addresses in `clusterIPs` (at their families' places) and `clusterIP`.
pub fn set_cluster_ips(service: &mut Value, claimed: &[(Family, IpAddr)]) {
    if claimed.is_empty() {
        return;
    }
    let named = listed(service, "ipFamilies");
    let mut ips = listed(service, "clusterIPs");
    for (family, ip) in claimed {
        if let Some(i) = named.iter().position(|n| n == family.name()) {
            while ips.len() <= i {
                ips.push(String::new());
            }
            ips[i] = ip.to_string();
        }
    }
    if let Some(first) = ips.first().cloned() {
        set(service, "clusterIP", json!(first));
    }
    set_list(service, "clusterIPs", &ips);
}

/// Where a claimed node port goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    /// `spec.ports[i].nodePort`.
    Port(usize),
    /// `spec.healthCheckNodePort`.
    Health,
}

/// Which node port a slot asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ask {
    /// A free one.
    Any,
    /// This one (when free and in the range).
    This(u64),
    /// The one an earlier request of the same write got (a created Service's ports that share
    /// a port number share a node port).
    SameAs(usize),
}

/// A node port a write claims.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortRequest {
    /// Where it goes.
    pub slot: Slot,
    /// Which.
    pub ask: Ask,
}

/// The node ports a create (`old` absent) or update claims for `new`: kube-apiserver's
/// `initNodePorts` / `updateNodePorts` for the ports of a `NodePort` or `LoadBalancer` Service,
/// then a health check node port for a Service that comes to need one.
#[must_use]
pub fn port_requests(old: Option<&Value>, new: &Value) -> Vec<PortRequest> {
    let mut requests = Vec::new();
    let allocate = allocates_node_ports(new);
    if uses_node_ports(new) {
        let ports = ports(new);
        let number = |port: &Value| port.get("port").and_then(Value::as_i64).unwrap_or(0);
        match old {
            None => {
                // Port number -> the request that gave its node port, and what it asked.
                let mut shared: HashMap<i64, (usize, Ask)> = HashMap::new();
                for (i, port) in ports.iter().enumerate() {
                    let asked = node_port(port);
                    if asked == 0 && !allocate {
                        continue;
                    }
                    match shared.get(&number(port)).copied() {
                        None => {
                            let requested = ports
                                .iter()
                                .filter(|p| number(p) == number(port))
                                .map(node_port)
                                .find(|p| *p != 0);
                            let ask = requested.map_or(Ask::Any, Ask::This);
                            shared.insert(number(port), (requests.len(), ask));
                            requests.push(PortRequest {
                                slot: Slot::Port(i),
                                ask,
                            });
                        }
                        Some((first, ask)) => {
                            if asked == 0 {
                                requests.push(PortRequest {
                                    slot: Slot::Port(i),
                                    ask: Ask::SameAs(first),
                                });
                            } else if ask != Ask::This(asked) {
                                requests.push(PortRequest {
                                    slot: Slot::Port(i),
                                    ask: Ask::This(asked),
                                });
                            }
                        }
                    }
                }
            }
            Some(old) => {
                let held = if uses_node_ports(old) {
                    named_node_ports(old)
                } else {
                    HashSet::new()
                };
                let mut claimed = HashSet::new();
                for (i, port) in ports.iter().enumerate() {
                    let asked = node_port(port);
                    if asked == 0 && !allocate {
                        continue;
                    }
                    if asked == 0 {
                        requests.push(PortRequest {
                            slot: Slot::Port(i),
                            ask: Ask::Any,
                        });
                    } else if !held.contains(&asked) && claimed.insert(asked) {
                        requests.push(PortRequest {
                            slot: Slot::Port(i),
                            ask: Ask::This(asked),
                        });
                    }
                }
            }
        }
    }
    if needs_health_check(new) && !old.is_some_and(needs_health_check) {
        let asked = health_port(new);
        requests.push(PortRequest {
            slot: Slot::Health,
            ask: if asked == 0 {
                Ask::Any
            } else {
                Ask::This(asked)
            },
        });
    }
    requests
}

/// Sets the claimed node ports of a Service object.
pub fn set_node_ports(service: &mut Value, claims: &[PortClaim]) {
    for claim in claims {
        match claim.slot {
            Slot::Health => set(service, "healthCheckNodePort", json!(claim.port)),
            Slot::Port(index) => {
                if let Some(Value::Object(port)) = spec_mut(service)
                    .and_then(|s| s.get_mut("ports"))
                    .and_then(Value::as_array_mut)
                    .and_then(|ports| ports.get_mut(index))
                {
                    port.insert("nodePort".into(), json!(claim.port));
                }
            }
        }
    }
}

/// `dropTypeDependentFields`: what a type change leaves without use is cleared, when the
/// update did not also change it (a changed value is the client's, and validation judges it).
fn drop_type_dependent_fields(old: &Value, new: &mut Value) {
    let field = |service: &Value, name: &str| spec(service).and_then(|s| s.get(name)).cloned();
    if needs_cluster_ip(old) && !needs_cluster_ip(new) {
        if text(old, "clusterIP") == text(new, "clusterIP")
            && listed(old, "clusterIPs") == listed(new, "clusterIPs")
        {
            remove(new, "clusterIP");
            remove(new, "clusterIPs");
        }
        if list(old, "ipFamilies") == list(new, "ipFamilies") {
            remove(new, "ipFamilies");
        }
        if policy(old) == policy(new) {
            remove(new, "ipFamilyPolicy");
        }
    }
    if uses_node_ports(old) && !uses_node_ports(new) {
        if named_node_ports(new).is_subset(&named_node_ports(old))
            && let Some(Value::Array(ports)) = spec_mut(new).and_then(|s| s.get_mut("ports"))
        {
            for port in ports.iter_mut().filter_map(Value::as_object_mut) {
                port.remove("nodePort");
            }
        }
        if text(old, "externalTrafficPolicy") == text(new, "externalTrafficPolicy") {
            remove(new, "externalTrafficPolicy");
        }
    }
    if needs_health_check(old) && !needs_health_check(new) && health_port(old) == health_port(new) {
        remove(new, "healthCheckNodePort");
    }
    if kind(old) == LOAD_BALANCER && kind(new) != LOAD_BALANCER {
        let allocate =
            |s: &Value| field(s, "allocateLoadBalancerNodePorts").filter(Value::is_boolean);
        if allocate(old).is_some() && allocate(old) == allocate(new) {
            remove(new, "allocateLoadBalancerNodePorts");
        }
        let class = |s: &Value| field(s, "loadBalancerClass").filter(|v| !v.is_null());
        if class(old) == class(new) {
            remove(new, "loadBalancerClass");
        }
    }
    if kind(new) != LOAD_BALANCER
        && let Some(status) = new.get_mut("status").and_then(Value::as_object_mut)
    {
        status.insert("loadBalancer".to_owned(), json!({}));
    }
}

/// An asked value outside the configured ranges ([`Allocators::out_of_range`]).
#[derive(Debug)]
pub enum OutOfRange<'a> {
    /// An address, outside the range of its family.
    Ip(&'a ServiceIps, IpAddr),
    /// A node port (of a port, or the health check's).
    Port(Slot, u64),
}

/// The allocators of a server: a range of addresses per configured family (the primary
/// first) and the node port range.
#[derive(Clone, Debug)]
pub struct Allocators {
    ips: Vec<ServiceIps>,
    ports: NodePorts,
    /// The registry prefix.
    prefix: String,
}

/// Where the IPAddresses are stored under the registry `prefix`: kube-apiserver's
/// `<prefix>/ipaddresses/` (the resource's storage prefix, which a test checks).
fn ip_addresses_prefix(prefix: &str) -> String {
    format!("{prefix}/ipaddresses/")
}

/// `networkingv1.LabelIPAddressFamily`.
pub const FAMILY_LABEL: &str = "ipaddress.kubernetes.io/ip-family";
/// `networkingv1.LabelManagedBy`.
pub const MANAGED_BY_LABEL: &str = "ipaddress.kubernetes.io/managed-by";
/// kube-apiserver's address allocator (`ipallocator.ControllerName`).
pub const MANAGED_BY: &str = "ipallocator.k8s.io";

/// The IPAddress the allocator stores for `ip` of the Service `namespace/name` (kube's
/// `createIPAddress`), with its `uid` and `creationTimestamp`.
#[must_use]
pub fn ip_address(ip: IpAddr, (namespace, name): (&str, &str), uid: &str, created: &str) -> Value {
    json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "IPAddress",
        "metadata": {
            "name": ip.to_string(),
            "uid": uid,
            "creationTimestamp": created,
            "labels": {
                FAMILY_LABEL: Family::of(ip).name(),
                MANAGED_BY_LABEL: MANAGED_BY,
            },
        },
        "spec": {"parentRef": {"resource": "services", "namespace": namespace, "name": name}},
    })
}

/// The `spec.parentRef` of an IPAddress when it names a Service: its namespace and name.
fn parent_service(ip_address: &Value) -> Option<(&str, &str)> {
    let parent = ip_address.pointer("/spec/parentRef")?;
    let field = |key: &str| parent.get(key).and_then(Value::as_str).unwrap_or_default();
    (field("group").is_empty() && field("resource") == "services")
        .then(|| (field("namespace"), field("name")))
}

/// Whether an IPAddress is the allocator's, for a Service (kube's repair loop deletes those
/// whose Service does not hold the address).
fn allocated_for_a_service(ip_address: &Value) -> bool {
    ip_address
        .pointer("/metadata/labels")
        .and_then(|labels| labels.get(MANAGED_BY_LABEL))
        .and_then(Value::as_str)
        == Some(MANAGED_BY)
        && parent_service(ip_address).is_some()
}

/// Whether the IPAddress `ip_address` names the Service `namespace/name` as its parent.
#[must_use]
pub fn names_service(ip_address: &Value, namespace: &str, name: &str) -> bool {
    parent_service(ip_address) == Some((namespace, name))
}

/// The addresses the Service `old` holds that `new` (none: the Service is deleted) does not.
#[must_use]
pub fn released(old: &Value, new: Option<&Value>) -> Vec<IpAddr> {
    let kept = new
        .map(|new| held(std::iter::once(new)))
        .unwrap_or_default();
    let mut released: Vec<IpAddr> = held(std::iter::once(old))
        .into_iter()
        .filter(|ip| !kept.contains(ip))
        .collect();
    released.sort_unstable();
    released
}

impl Allocators {
    /// Allocators over `ranges` (one, or one of each family) and the node ports `ports`
    /// (first, last), with their records under the registry `prefix`.
    #[must_use]
    pub fn new(ranges: &[IpRange], ports: (u16, u16), prefix: &str) -> Allocators {
        Allocators {
            ips: ranges
                .iter()
                .map(|range| ServiceIps::new(*range, prefix))
                .collect(),
            ports: NodePorts::new(ports.0, ports.1, prefix),
            prefix: prefix.to_owned(),
        }
    }

    /// The first asked address (`ips`), then node port (`ports`), of a write that lies
    /// outside its range, in the order the claims are made: kube-apiserver's allocator
    /// refuses it before the Service is validated, so the write path checks it then (whether
    /// it is taken is known only at the claim).
    #[must_use]
    pub fn out_of_range(&self, ips: &[IpRequest], ports: &[PortRequest]) -> Option<OutOfRange<'_>> {
        for (family, asked) in ips {
            if let (Some(range), Some(ip)) = (self.ips(*family), asked)
                && range.offset(*ip).is_none()
            {
                return Some(OutOfRange::Ip(range, *ip));
            }
        }
        ports.iter().find_map(|request| match request.ask {
            Ask::This(port)
                if !(u64::from(self.ports.first)..=u64::from(self.ports.last)).contains(&port) =>
            {
                Some(OutOfRange::Port(request.slot, port))
            }
            _ => None,
        })
    }

    /// The configured families, the primary first.
    #[must_use]
    pub fn families(&self) -> Vec<Family> {
        self.ips.iter().map(ServiceIps::family).collect()
    }

    /// The range of a family.
    #[must_use]
    pub fn ips(&self, family: Family) -> Option<&ServiceIps> {
        self.ips.iter().find(|ips| ips.family() == family)
    }

    /// The prefix of every address record, the IPAddresses (one for both families).
    #[must_use]
    pub fn ip_records_prefix(&self) -> Bytes {
        Bytes::from(ip_addresses_prefix(&self.prefix))
    }

    /// The prefix of the address records an older version of this server wrote
    /// (`<prefix>/ranges/serviceips/`), read and never written.
    #[must_use]
    pub fn older_ip_records_prefix(&self) -> Bytes {
        Bytes::from(format!("{}/ranges/serviceips/", self.prefix))
    }

    /// The store key of the IPAddress of `ip`.
    #[must_use]
    pub fn ip_address_key(&self, ip: IpAddr) -> Bytes {
        Bytes::from(format!("{}{ip}", ip_addresses_prefix(&self.prefix)))
    }

    /// The addresses the records of an older version of this server (`older`, read under
    /// [`Self::older_ip_records_prefix`]) hold for a claim judged at the cache's revision
    /// `seen`: those the cache has not seen (see the module docs).
    #[must_use]
    pub fn older_held(&self, older: &[KeyValue], seen: u64) -> HashSet<IpAddr> {
        let prefix = self.older_ip_records_prefix();
        older
            .iter()
            .filter(|kv| kv.mod_revision > seen)
            .filter_map(|kv| {
                std::str::from_utf8(kv.key.strip_prefix(prefix.as_ref())?)
                    .ok()?
                    .parse()
                    .ok()
            })
            .collect()
    }

    /// The node ports.
    #[must_use]
    pub fn ports(&self) -> &NodePorts {
        &self.ports
    }
}

/// The addresses of one range, and their allocation records in the store (IPAddresses).
#[derive(Clone, Debug)]
pub struct ServiceIps {
    range: IpRange,
    /// `<prefix>/ipaddresses/`.
    records: String,
}

/// What the allocation of one address writes with the Service.
#[derive(Debug)]
pub struct Claim {
    /// The address.
    pub ip: IpAddr,
    /// The record is absent, or still the stale one read.
    pub compare: Compare,
    /// The record.
    pub put: TxnOp,
}

/// Why no address or port could be claimed.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// The asked value is held by another Service.
    Allocated,
    /// The asked value lies outside the range.
    NotInRange,
    /// Every value of the range is held.
    Full,
    /// The asked value's record was written at this revision, which the cache has not seen:
    /// whether its Service still holds it is known once the cache has it.
    Unseen(u64),
}

impl ServiceIps {
    /// The range's allocator, with its records under the registry `prefix`.
    #[must_use]
    pub fn new(range: IpRange, prefix: &str) -> ServiceIps {
        ServiceIps {
            range,
            records: ip_addresses_prefix(prefix),
        }
    }

    /// The range, as `--service-cluster-ip-range` gave it.
    #[must_use]
    pub fn range(&self) -> &IpRange {
        &self.range
    }

    /// Whether `ip` is a usable address of the range.
    #[must_use]
    pub fn contains(&self, ip: IpAddr) -> bool {
        self.offset(ip).is_some()
    }

    /// The range's family.
    #[must_use]
    pub fn family(&self) -> Family {
        Family::of(self.range.network)
    }

    /// The prefix of every allocation record.
    #[must_use]
    pub fn records_prefix(&self) -> Bytes {
        Bytes::from(self.records.clone())
    }

    /// Addresses in the range (network and, for IPv4, broadcast included).
    fn size(&self) -> u128 {
        let bits = match self.range.network {
            IpAddr::V4(_) => 32,
            IpAddr::V6(_) => 128,
        };
        1u128
            .checked_shl(u32::from(bits - self.range.prefix))
            .unwrap_or(u128::MAX)
    }

    fn nth(&self, n: u128) -> IpAddr {
        match self.range.network {
            IpAddr::V4(v4) => IpAddr::V4(Ipv4Addr::from(u32::from(v4).wrapping_add(n as u32))),
            IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from(u128::from(v6).wrapping_add(n))),
        }
    }

    /// The offset of `ip` from the network address, if it is a usable address of the range.
    fn offset(&self, ip: IpAddr) -> Option<u128> {
        let n = match (self.range.network, ip) {
            (IpAddr::V4(network), IpAddr::V4(ip)) => {
                u128::from(u32::from(ip).wrapping_sub(u32::from(network)))
            }
            (IpAddr::V6(network), IpAddr::V6(ip)) => {
                u128::from(ip).wrapping_sub(u128::from(network))
            }
            _ => return None,
        };
        (n >= 1 && n <= self.last()).then_some(n)
    }

    /// The last usable offset (IPv4 leaves the broadcast address).
    fn last(&self) -> u128 {
        match self.range.network {
            IpAddr::V4(_) => self.size() - 2,
            IpAddr::V6(_) => self.size() - 1,
        }
    }

    /// kube-apiserver's static subrange: `min(max(16, size / 16), 256)`, 0 for a range of 16
    /// addresses or fewer.
    fn static_band(&self) -> u128 {
        let size = self.size();
        if size <= 16 {
            0
        } else {
            (size / 16).clamp(16, 256)
        }
    }

    /// The claim of an address for a new Service: `asked`, or the first free one, scanning the
    /// upper part of the range from `rotate` addresses past its start (wrapping), then the
    /// lower part. `cached` are the addresses held whatever their records say (the cache's
    /// Services', at the cache's revision `seen`, and [`Allocators::older_held`]); `records`
    /// the IPAddresses read from the store: one frees its address only when it is the
    /// allocator's, the cache has seen it and the address is not in `cached` (an orphan, see
    /// the module docs; a client's always holds it). `record` is the stored IPAddress of a
    /// claimed address.
    ///
    /// # Errors
    /// See [`Refused`].
    pub fn claim(
        &self,
        asked: Option<IpAddr>,
        cached: &HashSet<IpAddr>,
        seen: u64,
        records: &[KeyValue],
        record: impl Fn(IpAddr) -> Bytes,
        rotate: u128,
    ) -> Result<Claim, Refused> {
        let asked = match asked {
            Some(ip) => Some(self.offset(ip).ok_or(Refused::NotInRange)?),
            None => None,
        };
        let held: HashSet<u128> = cached.iter().filter_map(|ip| self.offset(*ip)).collect();
        let space = Space {
            first: 1,
            last: self.last(),
            band: self.static_band(),
            records: &self.records,
            takeable: |kv| {
                serde_json::from_slice::<Value>(&kv.value)
                    .is_ok_and(|object| allocated_for_a_service(&object))
            },
        };
        let (n, compare, put) = space.claim(
            asked,
            &held,
            seen,
            &index(records),
            |n| record(self.nth(n)),
            rotate,
            |n| self.nth(n).to_string(),
        )?;
        Ok(Claim {
            ip: self.nth(n),
            compare,
            put,
        })
    }
}

/// Records by key.
fn index(records: &[KeyValue]) -> HashMap<&[u8], &KeyValue> {
    records.iter().map(|kv| (kv.key.as_ref(), kv)).collect()
}

/// Numbered slots `first..=last` (the offsets of a range's usable addresses, or port numbers)
/// whose first `band` are kept for slots clients ask for, with their records under `records`.
struct Space<'a> {
    first: u128,
    last: u128,
    band: u128,
    records: &'a str,
    /// Whether a record the cache has seen frees its slot when no cached Service holds it
    /// (a node port's record always; an IPAddress when it is the allocator's).
    takeable: fn(&KeyValue) -> bool,
}

impl Space<'_> {
    /// `asked` (a slot of the space), or the first free slot from `first + band` (rotated by
    /// `rotate`, wrapping), then from `first`: its record's compare and put.
    #[allow(clippy::too_many_arguments)]
    fn claim(
        &self,
        asked: Option<u128>,
        held: &HashSet<u128>,
        seen: u64,
        records: &HashMap<&[u8], &KeyValue>,
        value: impl Fn(u128) -> Bytes,
        rotate: u128,
        name: impl Fn(u128) -> String,
    ) -> Result<(u128, Compare, TxnOp), Refused> {
        let key = |n: u128| Bytes::from(format!("{}{}", self.records, name(n)));
        let free = |n: u128| -> Option<Compare> {
            if held.contains(&n) {
                return None;
            }
            let key = key(n);
            match records.get(key.as_ref()) {
                None => Some(Compare::Absent { key }),
                // A record the cache has seen whose Service no longer holds the slot.
                Some(kv) if kv.mod_revision <= seen && (self.takeable)(kv) => {
                    Some(Compare::ModRevision {
                        key,
                        revision: kv.mod_revision,
                    })
                }
                Some(_) => None,
            }
        };
        let claim = |n: u128, compare: Compare| {
            let put = TxnOp::Put {
                key: key(n),
                value: value(n),
            };
            (n, compare, put)
        };
        if let Some(n) = asked {
            if n < self.first || n > self.last {
                return Err(Refused::NotInRange);
            }
            if let Some(compare) = free(n) {
                return Ok(claim(n, compare));
            }
            return Err(match records.get(key(n).as_ref()) {
                Some(kv) if kv.mod_revision > seen && !held.contains(&n) && (self.takeable)(kv) => {
                    Refused::Unseen(kv.mod_revision)
                }
                _ => Refused::Allocated,
            });
        }
        // At most this many slots of each part are looked at: every held one is in `held` or
        // the records, so one more than those is free if the part is that large.
        let scan_max = held.len() + records.len() + 1;
        let split = (self.first + self.band).min(self.last + 1);
        let upper_len = self.last + 1 - split;
        let start = if upper_len == 0 {
            0
        } else {
            rotate % upper_len
        };
        let upper = (0..upper_len)
            .map(move |i| split + (start + i) % upper_len)
            .take(scan_max);
        let lower = (self.first..split).take(scan_max);
        upper
            .chain(lower)
            .find_map(|n| free(n).map(|compare| claim(n, compare)))
            .ok_or(Refused::Full)
    }
}

/// The node ports of one range (`--service-node-port-range`), and their allocation records.
#[derive(Clone, Debug)]
pub struct NodePorts {
    first: u16,
    last: u16,
    /// `<prefix>/ranges/servicenodeports/`.
    records: String,
}

/// One node port claimed for a Service.
#[derive(Debug)]
pub struct PortClaim {
    /// Where it goes.
    pub slot: Slot,
    /// The node port.
    pub port: u16,
    /// Its record's compare (absent, or still the stale one read) and put; none for a port
    /// shared with an earlier claim of the same write.
    pub record: Option<(Compare, TxnOp)>,
}

/// A node port the range could not give: where, the port asked (0: any), why.
pub type PortRefused = (Slot, u64, Refused);

impl NodePorts {
    /// The range `first..=last`, with its records under the registry `prefix`.
    #[must_use]
    pub fn new(first: u16, last: u16, prefix: &str) -> NodePorts {
        NodePorts {
            first,
            last,
            records: format!("{prefix}/ranges/servicenodeports/"),
        }
    }

    /// The prefix of every allocation record.
    #[must_use]
    pub fn records_prefix(&self) -> Bytes {
        Bytes::from(self.records.clone())
    }

    /// The range as kube-apiserver names it (`30000-32767`).
    #[must_use]
    pub fn describe(&self) -> String {
        format!("{}-{}", self.first, self.last)
    }

    /// kube-apiserver's static band of a port range: `min(max(16, size / 32), 128)`, 0 for 16
    /// ports or fewer.
    fn band(&self) -> u128 {
        let size = u128::from(self.last - self.first) + 1;
        if size <= 16 {
            0
        } else {
            (size / 32).clamp(16, 128)
        }
    }

    /// Claims the node ports of `requests` (from [`port_requests`]), in order: an asked one
    /// when it is in the range and free, else a free one. `held` are the node ports the cache's
    /// Services hold at the cache's revision `seen`; `records` the allocation records read.
    ///
    /// # Errors
    /// The first request the range could not give.
    pub fn claim(
        &self,
        requests: &[PortRequest],
        held: &HashSet<u16>,
        seen: u64,
        records: &[KeyValue],
        owner: &str,
        rotate: u128,
    ) -> Result<Vec<PortClaim>, PortRefused> {
        let space = Space {
            first: u128::from(self.first),
            last: u128::from(self.last),
            band: self.band(),
            records: &self.records,
            takeable: |_| true,
        };
        let records = index(records);
        let mut taken: HashSet<u128> = held.iter().map(|p| u128::from(*p)).collect();
        let mut claims: Vec<PortClaim> = Vec::new();
        for request in requests {
            let asked = match request.ask {
                Ask::SameAs(earlier) => {
                    let port = claims.get(earlier).map_or(0, |c| c.port);
                    claims.push(PortClaim {
                        slot: request.slot,
                        port,
                        record: None,
                    });
                    continue;
                }
                Ask::Any => None,
                Ask::This(port) => Some(port),
            };
            let (n, compare, put) = space
                .claim(
                    asked.map(u128::from),
                    &taken,
                    seen,
                    &records,
                    |_| Bytes::from(owner.to_owned()),
                    rotate,
                    |n| n.to_string(),
                )
                .map_err(|why| (request.slot, asked.unwrap_or(0), why))?;
            taken.insert(n);
            claims.push(PortClaim {
                slot: request.slot,
                port: u16::try_from(n).unwrap_or(u16::MAX),
                record: Some((compare, put)),
            });
        }
        Ok(claims)
    }
}

/// The node ports the Services in `services` hold: the ports' `nodePort`s of `NodePort` and
/// `LoadBalancer` Services, and the `healthCheckNodePort` of those that need one.
pub fn held_ports<'a>(services: impl Iterator<Item = &'a Value>) -> HashSet<u16> {
    let mut held = HashSet::new();
    for service in services {
        let health = needs_health_check(service).then(|| health_port(service));
        let listed = if uses_node_ports(service) {
            named_node_ports(service)
        } else {
            HashSet::new()
        };
        for port in listed.into_iter().chain(health) {
            if let Ok(port) = u16::try_from(port)
                && port != 0
            {
                held.insert(port);
            }
        }
    }
    held
}

/// The addresses the Services in `services` hold (`clusterIPs` and `clusterIP` of every
/// Service but `ExternalName` ones).
pub fn held<'a>(services: impl Iterator<Item = &'a Value>) -> HashSet<IpAddr> {
    let mut held = HashSet::new();
    for service in services.filter(|s| needs_cluster_ip(s)) {
        let single = Some(text(service, "clusterIP").to_owned());
        for text in listed(service, "clusterIPs").into_iter().chain(single) {
            if let Ok(ip) = text.parse() {
                held.insert(ip);
            }
        }
    }
    held
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ips(range: &str) -> ServiceIps {
        ServiceIps::new(IpRange::parse(range).unwrap(), "/registry")
    }

    fn record(ip: &str, mod_revision: u64) -> KeyValue {
        KeyValue {
            key: Bytes::from(format!("/registry/ipaddresses/{ip}")),
            // The allocator's IPAddress for a Service.
            value: owned(ip.parse().unwrap()),
            create_revision: mod_revision,
            mod_revision,
            version: 1,
        }
    }

    fn addrs(ips: &[&str]) -> HashSet<IpAddr> {
        ips.iter().map(|ip| ip.parse().unwrap()).collect()
    }

    fn service(spec: Value) -> Value {
        json!({"metadata": {"name": "s"}, "spec": spec, "status": {"loadBalancer": {}}})
    }

    const V4: &[Family] = &[Family::V4];

    /// An IPAddress record of the Service `default/s`.
    fn owned(ip: IpAddr) -> Bytes {
        Bytes::from(ip_address(ip, ("default", "s"), "u", "t").to_string())
    }

    /// Goal: the IPAddress kube-apiserver's allocator writes: named by the canonical address,
    /// labelled with its family and the allocator, its parent the Service; the store keys
    /// are the resource's.
    #[test]
    fn ip_addresses_are_written_as_kube_writes_them() {
        let v6 = ip_address("fd00::0:5".parse().unwrap(), ("ns", "web"), "u", "t");
        assert_eq!(
            v6,
            json!({"apiVersion": "networking.k8s.io/v1", "kind": "IPAddress",
                "metadata": {"name": "fd00::5", "uid": "u", "creationTimestamp": "t",
                    "labels": {"ipaddress.kubernetes.io/ip-family": "IPv6",
                        "ipaddress.kubernetes.io/managed-by": "ipallocator.k8s.io"}},
                "spec": {"parentRef": {"resource": "services", "namespace": "ns",
                    "name": "web"}}})
        );
        assert!(names_service(&v6, "ns", "web"));
        assert!(!names_service(&v6, "ns", "other"));
        let def = watchkeeper_api::resources::builtin_resources()
            .into_iter()
            .find(|d| d.group == "networking.k8s.io" && d.plural == "ipaddresses")
            .unwrap();
        let allocators = Allocators::new(
            &[IpRange::parse("10.0.0.0/24").unwrap()],
            (30000, 30100),
            "/registry",
        );
        assert_eq!(
            allocators.ip_address_key("10.0.0.9".parse().unwrap()),
            format!("/registry/{}/10.0.0.9", def.storage_prefix())
        );
        assert_eq!(
            allocators.ip_records_prefix(),
            format!("/registry/{}/", def.storage_prefix())
        );
    }

    /// Goal: what holds an address beyond the cached Services: a client's IPAddress always,
    /// an allocator's IPAddress only as a record (taken over once seen), an older record
    /// only until the cache has seen it.
    #[test]
    fn ip_addresses_reserve_what_they_name() {
        let allocators = Allocators::new(
            &[IpRange::parse("10.0.0.0/24").unwrap()],
            (30000, 30100),
            "/registry",
        );
        let kv = |key: String, value: Value, mod_revision| KeyValue {
            key: Bytes::from(key),
            value: Bytes::from(value.to_string()),
            create_revision: mod_revision,
            mod_revision,
            version: 1,
        };
        let allocated = ip_address("10.0.0.20".parse().unwrap(), ("default", "s"), "u", "t");
        let mut unlabelled = allocated.clone();
        unlabelled["metadata"]["name"] = json!("10.0.0.21");
        unlabelled["metadata"]["labels"] = json!({});
        let mut gateway = allocated.clone();
        gateway["metadata"]["name"] = json!("10.0.0.22");
        gateway["spec"]["parentRef"] = json!({"group": "gateway.networking.k8s.io",
            "resource": "gateways", "name": "g"});
        let stored = vec![
            kv("/registry/ipaddresses/10.0.0.20".into(), allocated, 5),
            kv("/registry/ipaddresses/10.0.0.21".into(), unlabelled, 5),
            kv("/registry/ipaddresses/10.0.0.22".into(), gateway, 5),
        ];
        let older = [
            kv(
                "/registry/ranges/serviceips/10.0.0.30".into(),
                json!("default/a"),
                4,
            ),
            kv(
                "/registry/ranges/serviceips/10.0.0.31".into(),
                json!("default/b"),
                9,
            ),
        ];
        assert_eq!(allocators.older_held(&older, 6), addrs(&["10.0.0.31"]));
        let range = allocators.ips(Family::V4).unwrap();
        let claim = |ip: &str, seen| {
            range.claim(
                Some(ip.parse().unwrap()),
                &addrs(&[]),
                seen,
                &stored,
                owned,
                0,
            )
        };
        // The allocator's orphan, seen, is taken over on its revision; unseen, it waits.
        let taken = claim("10.0.0.20", 6).unwrap();
        assert!(matches!(
            taken.compare,
            Compare::ModRevision { revision: 5, .. }
        ));
        assert_eq!(claim("10.0.0.20", 4).unwrap_err(), Refused::Unseen(5));
        // Held by a cached Service, it is allocated.
        let held = range.claim(
            Some("10.0.0.20".parse().unwrap()),
            &addrs(&["10.0.0.20"]),
            6,
            &stored,
            owned,
            0,
        );
        assert_eq!(held.unwrap_err(), Refused::Allocated);
        for client in ["10.0.0.21", "10.0.0.22"] {
            assert_eq!(
                claim(client, 6).unwrap_err(),
                Refused::Allocated,
                "{client}"
            );
            assert_eq!(
                claim(client, 4).unwrap_err(),
                Refused::Allocated,
                "{client}"
            );
        }
        // Dynamic allocation skips the clients' and takes over the orphan.
        let dynamic = range
            .claim(None, &addrs(&[]), 6, &stored, owned, 20 - 17)
            .unwrap();
        assert_eq!(dynamic.ip.to_string(), "10.0.0.20");
        let dynamic = range
            .claim(None, &addrs(&["10.0.0.20"]), 6, &stored, owned, 20 - 17)
            .unwrap();
        assert_eq!(dynamic.ip.to_string(), "10.0.0.23");
    }

    /// Goal: a deletion releases every address of a Service, an update those it drops.
    #[test]
    fn releases_are_what_the_new_version_no_longer_holds() {
        let dual = service(json!({"clusterIP": "10.0.0.5", "clusterIPs": ["10.0.0.5", "fd00::5"]}));
        let single = service(json!({"clusterIP": "10.0.0.5", "clusterIPs": ["10.0.0.5"]}));
        let external = service(json!({"type": "ExternalName", "externalName": "x"}));
        let ip = |text: &str| text.parse::<IpAddr>().unwrap();
        assert_eq!(released(&dual, None), [ip("10.0.0.5"), ip("fd00::5")]);
        assert_eq!(released(&dual, Some(&single)), [ip("fd00::5")]);
        assert_eq!(released(&single, Some(&external)), [ip("10.0.0.5")]);
        assert!(released(&single, Some(&single)).is_empty());
    }

    /// Goal: dynamic addresses come from above kube-apiserver's static band, lowest first,
    /// skipping what the cache's Services hold and records the cache has not seen; a record
    /// the cache has seen whose Service let the address go is reclaimed on its revision.
    #[test]
    fn dynamic_addresses_skip_held_ones_and_reclaim_released_ones() {
        let allocator = ips("10.0.0.0/24");
        let claim = allocator.claim(None, &addrs(&["10.0.0.1"]), 10, &[], owned, 0);
        let claim = claim.unwrap();
        assert_eq!(
            claim.ip.to_string(),
            "10.0.0.17",
            "above the static band of 16"
        );
        assert!(matches!(claim.compare, Compare::Absent { .. }));
        let held = addrs(&["10.0.0.1", "10.0.0.17"]);
        // A record newer than the cache: its Service may not be cached yet.
        let fresh = [record("10.0.0.18", 11)];
        let claim = allocator.claim(None, &held, 10, &fresh, owned, 0).unwrap();
        assert_eq!(claim.ip.to_string(), "10.0.0.19");
        // The same record once the cache has seen it and no Service holds the address.
        let claim = allocator.claim(None, &held, 11, &fresh, owned, 0).unwrap();
        assert_eq!(claim.ip.to_string(), "10.0.0.18");
        assert!(matches!(
            claim.compare,
            Compare::ModRevision { revision: 11, .. }
        ));
        // A rotated scan starts inside the upper part and wraps around it (238 addresses).
        let from = |rotate| {
            allocator
                .claim(None, &held, 10, &fresh, owned, rotate)
                .unwrap()
                .ip
                .to_string()
        };
        assert_eq!(from(5), "10.0.0.22");
        assert_eq!(from(237), "10.0.0.254");
        assert_eq!(
            from(238),
            "10.0.0.19",
            "wraps to the start, skipping held ones"
        );
    }

    /// Goal: an asked address is claimed only inside the range and when free; one whose
    /// record the cache has not seen waits for the cache.
    #[test]
    fn an_asked_address_must_be_in_the_range_and_free() {
        let allocator = ips("10.0.0.0/24");
        let held = addrs(&["10.0.0.5"]);
        let records = [record("10.0.0.7", 9)];
        let ask = |ip: &str| {
            allocator
                .claim(Some(ip.parse().unwrap()), &held, 1, &records, owned, 0)
                .map(|c| c.ip.to_string())
        };
        assert_eq!(ask("10.0.0.6"), Ok("10.0.0.6".to_owned()));
        assert_eq!(
            ask("10.0.0.3"),
            Ok("10.0.0.3".to_owned()),
            "the static band"
        );
        assert_eq!(ask("10.0.0.5"), Err(Refused::Allocated));
        assert_eq!(ask("10.0.0.7"), Err(Refused::Unseen(9)));
        for outside in [
            "10.0.0.0",
            "10.0.0.255",
            "10.0.1.1",
            "192.168.0.1",
            "fd00::1",
        ] {
            assert_eq!(ask(outside), Err(Refused::NotInRange), "{outside}");
        }
    }

    /// Goal: a small range has no static band, and a full range is refused.
    #[test]
    fn a_small_range_fills_up() {
        let allocator = ips("10.0.0.0/29");
        let mut held = addrs(&[]);
        for expected in 1..=6 {
            let claim = allocator.claim(None, &held, 1, &[], owned, 0).unwrap();
            assert_eq!(claim.ip.to_string(), format!("10.0.0.{expected}"));
            held.insert(claim.ip);
        }
        assert_eq!(
            allocator.claim(None, &held, 1, &[], owned, 0).unwrap_err(),
            Refused::Full
        );
    }

    /// Goal: an update that leaves out what was allocated keeps it (kube-apiserver's
    /// `patchAllocatedValues`): the address, node ports by port name (not one another port
    /// names), the health check node port; one to ExternalName keeps nothing.
    #[test]
    fn updates_keep_what_was_allocated() {
        let old = service(json!({"type": "LoadBalancer", "clusterIP": "10.0.0.17",
            "clusterIPs": ["10.0.0.17"], "externalTrafficPolicy": "Local",
            "healthCheckNodePort": 30099, "ipFamilyPolicy": "SingleStack", "ipFamilies": ["IPv4"],
            "ports": [{"name": "a", "port": 80, "nodePort": 30001},
                      {"name": "b", "port": 81, "nodePort": 30002}]}));
        let mut new = service(
            json!({"type": "LoadBalancer", "externalTrafficPolicy": "Local",
            "ports": [{"name": "b", "port": 81}, {"name": "a", "port": 80, "nodePort": 30002},
                      {"name": "c", "port": 82}]}),
        );
        prepare(Some(&old), &mut new, V4).unwrap();
        let spec = &new["spec"];
        assert_eq!(spec["clusterIP"], "10.0.0.17");
        assert_eq!(spec["clusterIPs"], json!(["10.0.0.17"]));
        assert_eq!(spec["healthCheckNodePort"], 30099);
        assert!(
            spec["ports"][0].get("nodePort").is_none(),
            "30002 is named by another port"
        );
        assert_eq!(spec["ports"][1]["nodePort"], 30002);
        assert!(spec["ports"][2].get("nodePort").is_none());
        assert_eq!(spec["ipFamilyPolicy"], "SingleStack", "the old policy");
        assert_eq!(spec["ipFamilies"], json!(["IPv4"]));
        let mut external = service(json!({"type": "ExternalName", "externalName": "example.com"}));
        prepare(Some(&old), &mut external, V4).unwrap();
        assert!(external["spec"].get("clusterIP").is_none());
    }

    /// Goal: a Service an older server stored with the IPv4 family it defaulted on an IPv6
    /// range is repaired by its next update (its families from its addresses), not refused.
    #[test]
    fn stored_families_that_do_not_match_the_addresses_are_repaired() {
        let stored = service(
            json!({"clusterIP": "fd00::101", "clusterIPs": ["fd00::101"],
            "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack", "ports": [{"port": 80}]}),
        );
        let mut new = stored.clone();
        new["metadata"]["labels"] = json!({"a": "b"});
        prepare(Some(&stored), &mut new, &[Family::V6]).unwrap();
        assert_eq!(new["spec"]["ipFamilies"], json!(["IPv6"]));
        assert!(ip_requests(Some(&stored), &new).is_empty());
        assert_eq!(new["spec"]["clusterIPs"], json!(["fd00::101"]));
    }

    /// Goal: the IP family fields as kube-apiserver's `initIPFamilyFields` fills and refuses
    /// them on a single-stack cluster (and on a dual-stack one).
    #[test]
    fn ip_families_follow_the_configured_ranges() {
        let prepared = |spec: Value, families: &[Family]| {
            let mut new = service(spec);
            prepare(None, &mut new, families).map(|()| new["spec"].clone())
        };
        let plain = prepared(json!({"selector": {"a": "b"}}), V4).unwrap();
        assert_eq!(
            (&plain["ipFamilyPolicy"], &plain["ipFamilies"]),
            (&json!("SingleStack"), &json!(["IPv4"]))
        );
        let v6 = prepared(json!({}), &[Family::V6]).unwrap();
        assert_eq!(v6["ipFamilies"], json!(["IPv6"]));
        let prefer = prepared(json!({"ipFamilyPolicy": "PreferDualStack"}), V4).unwrap();
        assert_eq!(prefer["ipFamilies"], json!(["IPv4"]));
        let both = prepared(
            json!({"ipFamilyPolicy": "PreferDualStack"}),
            &[Family::V4, Family::V6],
        )
        .unwrap();
        assert_eq!(both["ipFamilies"], json!(["IPv4", "IPv6"]));
        let headless = prepared(json!({"clusterIP": "None"}), V4).unwrap();
        assert_eq!(
            (&headless["ipFamilyPolicy"], &headless["ipFamilies"]),
            (&json!("RequireDualStack"), &json!(["IPv4", "IPv6"])),
            "headless without selector"
        );
        let refused = |spec: Value| {
            prepared(spec, V4)
                .unwrap_err()
                .into_iter()
                .map(|(field, message, _)| format!("{field}: {message}"))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            refused(json!({"ipFamilyPolicy": "RequireDualStack"})),
            [
                "spec.ipFamilyPolicy: Invalid value: \"RequireDualStack\": this cluster is not configured for dual-stack services"
            ]
        );
        assert_eq!(
            refused(json!({"ipFamilies": ["IPv6"]})),
            ["spec.ipFamilies[0]: Invalid value: \"IPv6\": not configured on this cluster"]
        );
        assert_eq!(
            refused(json!({"clusterIP": "fd00::5"})),
            [
                "spec.clusterIPs[0]: Invalid value: []string{\"fd00::5\"}: IPv6 is not configured on this cluster"
            ]
        );
        assert_eq!(
            refused(json!({"clusterIP": "ten"})),
            [
                "spec.clusterIPs[0]: Invalid value: \"ten\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"
            ]
        );
        assert_eq!(
            refused(json!({"ipFamilyPolicy": "SingleStack", "ipFamilies": ["IPv4", "IPv6"]})),
            [
                "spec.ipFamilyPolicy: Invalid value: \"SingleStack\": must be 'RequireDualStack' or 'PreferDualStack' when multiple IP families are specified"
            ]
        );
        assert_eq!(
            refused(json!({"ipFamilyPolicy": "Both"})),
            [
                "spec.ipFamilyPolicy: Unsupported value: \"Both\": supported values: \"PreferDualStack\", \"RequireDualStack\", \"SingleStack\""
            ]
        );
    }

    /// Goal: what a create or update claims: addresses for a create and for an update from
    /// ExternalName (none for headless ones, none for other updates), node ports for ports
    /// without one and asked ones the old version did not hold, a health check node port for
    /// a Service that comes to need one.
    #[test]
    fn writes_claim_what_is_new() {
        let prepared = |old: Option<&Value>, spec: Value| {
            let mut new = service(spec);
            prepare(old, &mut new, V4).unwrap();
            new
        };
        let created = prepared(None, json!({"ports": [{"port": 80}]}));
        assert_eq!(ip_requests(None, &created), vec![(Family::V4, None)]);
        let asked = prepared(None, json!({"clusterIP": "10.0.0.9"}));
        assert_eq!(
            ip_requests(None, &asked),
            vec![(Family::V4, Some("10.0.0.9".parse().unwrap()))]
        );
        let headless = prepared(None, json!({"clusterIP": "None"}));
        assert!(ip_requests(None, &headless).is_empty());
        let external = service(json!({"type": "ExternalName", "externalName": "x"}));
        assert!(ip_requests(None, &external).is_empty());
        let from_external = prepared(
            Some(&external),
            json!({"type": "NodePort",
            "ports": [{"port": 80}, {"port": 81, "nodePort": 30005}]}),
        );
        assert_eq!(
            ip_requests(Some(&external), &from_external),
            vec![(Family::V4, None)]
        );
        let any = |i| PortRequest {
            slot: Slot::Port(i),
            ask: Ask::Any,
        };
        let this = |i, port| PortRequest {
            slot: Slot::Port(i),
            ask: Ask::This(port),
        };
        assert_eq!(
            port_requests(Some(&external), &from_external),
            vec![any(0), this(1, 30005)]
        );
        let mut node_port = from_external.clone();
        set_cluster_ips(
            &mut node_port,
            &[(Family::V4, "10.0.0.20".parse().unwrap())],
        );
        set(
            &mut node_port,
            "ports",
            json!([{"port": 80, "nodePort": 30100},
            {"port": 81, "nodePort": 30005}]),
        );
        assert_eq!(node_port["spec"]["clusterIPs"], json!(["10.0.0.20"]));
        set(
            &mut node_port,
            "ports",
            json!([{"name": "a", "port": 80, "nodePort": 30100},
            {"name": "b", "port": 81, "nodePort": 30005}]),
        );
        let added = prepared(
            Some(&node_port),
            json!({"type": "NodePort", "ports": [
            {"name": "a", "port": 80}, {"name": "b", "port": 81, "nodePort": 30006},
            {"name": "c", "port": 82}]}),
        );
        assert!(ip_requests(Some(&node_port), &added).is_empty());
        assert_eq!(
            port_requests(Some(&node_port), &added),
            vec![this(1, 30006), any(2)]
        );
        let local = prepared(
            Some(&node_port),
            json!({"type": "LoadBalancer",
            "externalTrafficPolicy": "Local", "ports": [{"port": 80, "nodePort": 30100},
            {"port": 81, "nodePort": 30005}]}),
        );
        assert_eq!(
            port_requests(Some(&node_port), &local),
            vec![PortRequest {
                slot: Slot::Health,
                ask: Ask::Any
            }]
        );
        // A create shares a node port between ports of one number (TCP and UDP).
        let dns = prepared(
            None,
            json!({"type": "NodePort", "ports": [
            {"port": 53, "protocol": "TCP"}, {"port": 53, "protocol": "UDP", "nodePort": 30053}]}),
        );
        assert_eq!(
            port_requests(None, &dns),
            vec![this(0, 30053)],
            "the first port takes the one the second asks for"
        );
        let dns = prepared(
            None,
            json!({"type": "NodePort", "ports": [
            {"port": 53, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}]}),
        );
        assert_eq!(
            port_requests(None, &dns),
            vec![
                any(0),
                PortRequest {
                    slot: Slot::Port(1),
                    ask: Ask::SameAs(0)
                }
            ]
        );
    }

    /// Goal: kube-apiserver's `dropTypeDependentFields`: a type change clears what the new
    /// type does not use, unless the update changed it too (then validation refuses it).
    #[test]
    fn type_changes_clear_what_the_new_type_does_not_use() {
        let old = service(json!({"type": "LoadBalancer", "clusterIP": "10.0.0.17",
            "clusterIPs": ["10.0.0.17"], "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
            "externalTrafficPolicy": "Local", "healthCheckNodePort": 30099,
            "allocateLoadBalancerNodePorts": true, "internalTrafficPolicy": "Cluster",
            "ports": [{"port": 80, "nodePort": 30001}]}));
        let mut old_lb = old.clone();
        old_lb["status"] = json!({"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}});
        let def = watchkeeper_api::resources::builtin_resources()
            .into_iter()
            .find(|d| d.group.is_empty() && d.plural == "services")
            .unwrap();
        // Prepared, then validated as the write path does.
        let finished = |spec_change: Value| {
            let mut new = old_lb.clone();
            for (key, value) in spec_change.as_object().unwrap() {
                new["spec"][key] = value.clone();
            }
            watchkeeper_api::defaults::apply_defaults(&def, &mut new);
            prepare(Some(&old_lb), &mut new, V4).unwrap();
            let mut causes = Vec::new();
            watchkeeper_api::kinds::services::validate(&new, Some(&old_lb), &mut causes);
            if causes.is_empty() {
                Ok(new)
            } else {
                Err(causes)
            }
        };
        let cluster_ip = finished(json!({"type": "ClusterIP"})).unwrap();
        let spec = &cluster_ip["spec"];
        assert!(spec["ports"][0].get("nodePort").is_none());
        for gone in [
            "externalTrafficPolicy",
            "healthCheckNodePort",
            "allocateLoadBalancerNodePorts",
        ] {
            assert!(spec.get(gone).is_none(), "{gone}: {spec}");
        }
        assert_eq!(spec["clusterIP"], "10.0.0.17");
        assert_eq!(cluster_ip["status"], json!({"loadBalancer": {}}));
        let external =
            finished(json!({"type": "ExternalName", "externalName": "example.com"})).unwrap();
        for gone in [
            "clusterIP",
            "clusterIPs",
            "ipFamilies",
            "ipFamilyPolicy",
            "internalTrafficPolicy",
        ] {
            assert!(external["spec"].get(gone).is_none(), "{gone}");
        }
        let cluster = finished(json!({"externalTrafficPolicy": "Cluster"})).unwrap();
        assert!(cluster["spec"].get("healthCheckNodePort").is_none());
        assert_eq!(cluster["spec"]["ports"][0]["nodePort"], 30001);
        let messages = |result: Result<Value, Vec<Cause>>| {
            result
                .unwrap_err()
                .into_iter()
                .map(|(field, message, _)| format!("{field}: {message}"))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            messages(finished(
                json!({"type": "ClusterIP", "ports": [{"port": 80, "nodePort": 30002}]})
            )),
            ["spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'"]
        );
        assert_eq!(
            messages(finished(json!({"clusterIP": "10.0.0.99"}))),
            ["spec.clusterIPs[0]: Invalid value: []string{\"10.0.0.99\"}: may not change once set"]
        );
        assert_eq!(
            messages(finished(json!({"healthCheckNodePort": 30098}))),
            ["spec.healthCheckNodePort: Forbidden: field is immutable"]
        );
        assert_eq!(
            messages(finished(json!({"type": "ExternalName"}))),
            ["spec.externalName: Required value"]
        );
    }

    /// Goal: what kube-apiserver's allocator refuses before validation: the first asked
    /// address outside its family's range, then the first asked node port outside the range.
    #[test]
    fn asked_values_outside_the_ranges_are_found_before_the_claims() {
        let allocators = Allocators::new(
            &[IpRange::parse("10.0.0.0/24").unwrap()],
            (30000, 32767),
            "/registry",
        );
        let this = |slot, port| PortRequest {
            slot,
            ask: Ask::This(port),
        };
        let inside = [(Family::V4, Some("10.0.0.9".parse().unwrap()))];
        let outside = [(Family::V4, Some("10.1.0.9".parse().unwrap()))];
        let ports = [this(Slot::Port(0), 30001), this(Slot::Health, 99999)];
        assert!(allocators.out_of_range(&inside, &ports[..1]).is_none());
        assert!(matches!(
            allocators.out_of_range(&outside, &ports),
            Some(OutOfRange::Ip(_, ip)) if ip.to_string() == "10.1.0.9"
        ));
        assert!(matches!(
            allocators.out_of_range(&inside, &ports),
            Some(OutOfRange::Port(Slot::Health, 99999))
        ));
    }

    /// Goal: node ports as kube-apiserver allocates them: from above the static band of 86
    /// ports, an asked one when it is in the range and free, a shared one without a record.
    #[test]
    fn node_ports_are_claimed_per_request() {
        let ports = NodePorts::new(30000, 32767, "/registry");
        let claimed = |requests: &[PortRequest], held: &[u16]| {
            ports
                .claim(
                    requests,
                    &held.iter().copied().collect(),
                    1,
                    &[],
                    "default/a",
                    0,
                )
                .map(|claims| {
                    claims
                        .iter()
                        .map(|c| (c.slot, c.port, c.record.is_some()))
                        .collect::<Vec<_>>()
                })
        };
        let request = |slot, ask| PortRequest { slot, ask };
        let two = [
            request(Slot::Port(0), Ask::Any),
            request(Slot::Port(1), Ask::Any),
        ];
        assert_eq!(
            claimed(&two, &[]),
            Ok(vec![
                (Slot::Port(0), 30086, true),
                (Slot::Port(1), 30087, true)
            ])
        );
        assert_eq!(
            claimed(&two, &[30086]),
            Ok(vec![
                (Slot::Port(0), 30087, true),
                (Slot::Port(1), 30088, true)
            ])
        );
        let asked = [request(Slot::Port(0), Ask::This(30005))];
        assert_eq!(claimed(&asked, &[]), Ok(vec![(Slot::Port(0), 30005, true)]));
        assert_eq!(
            claimed(&asked, &[30005]),
            Err((Slot::Port(0), 30005, Refused::Allocated))
        );
        let outside = [
            request(Slot::Port(0), Ask::Any),
            request(Slot::Health, Ask::This(80)),
        ];
        assert_eq!(
            claimed(&outside, &[]),
            Err((Slot::Health, 80, Refused::NotInRange))
        );
        let shared = [
            request(Slot::Port(0), Ask::This(30053)),
            request(Slot::Port(1), Ask::SameAs(0)),
        ];
        assert_eq!(
            claimed(&shared, &[]),
            Ok(vec![
                (Slot::Port(0), 30053, true),
                (Slot::Port(1), 30053, false)
            ])
        );
        let small = NodePorts::new(30000, 30001, "/registry");
        let three = [
            request(Slot::Port(0), Ask::Any),
            request(Slot::Port(1), Ask::Any),
            request(Slot::Port(2), Ask::Any),
        ];
        let full = small.claim(&three, &HashSet::new(), 1, &[], "default/a", 0);
        assert_eq!(full.unwrap_err(), (Slot::Port(2), 0, Refused::Full));
    }

    /// Goal: what Services hold: addresses of every type but ExternalName, node ports of the
    /// types that use them, a health check node port of a Service that needs one.
    #[test]
    fn services_hold_what_their_type_uses() {
        let services = [
            service(json!({"clusterIP": "10.0.0.1", "clusterIPs": ["10.0.0.1"]})),
            service(json!({"clusterIP": "None"})),
            service(json!({"clusterIP": "10.0.0.30"})),
            service(json!({"type": "ExternalName", "clusterIP": "10.0.0.31"})),
        ];
        assert_eq!(held(services.iter()), addrs(&["10.0.0.1", "10.0.0.30"]));
        let services = [
            service(json!({"type": "NodePort", "ports": [{"nodePort": 30001}, {"port": 1}]})),
            service(
                json!({"type": "LoadBalancer", "externalTrafficPolicy": "Local",
                "healthCheckNodePort": 30002, "ports": [{"nodePort": 30003}]}),
            ),
            service(json!({"type": "LoadBalancer", "healthCheckNodePort": 30004})),
            service(json!({"type": "ExternalName", "ports": [{"nodePort": 30005}]})),
        ];
        assert_eq!(
            held_ports(services.iter()),
            [30001, 30002, 30003].into_iter().collect()
        );
    }
}

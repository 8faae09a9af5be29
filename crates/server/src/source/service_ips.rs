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
//! - **A claim's cost does not grow with the Services**: what the cached Services and
//!   IPAddresses hold is an index the reflector keeps with every list and change it feeds
//!   their caches ([`Allocators`] is its `Observer`, told of a revision before the caches have
//!   it), as kube-apiserver's allocator keeps a bitmap or an informer's lister. The index keeps
//!   the held values as runs, so a dynamic claim finds its candidate in one look-up however
//!   many are held; a claim then reads from the store the records of the values it looks at
//!   only (an address's IPAddress and older record, a node port's record) and judges them as
//!   said here, against the index's Services at their revision (at least the Services
//!   cache's). A stale index costs a retry, never a shared value: the records' compares are in
//!   the write's transaction, and a dynamic claim that meets 16 records the index does not
//!   know yet waits for the cache to see them and claims again.
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

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Display;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bytes::Bytes;
use serde_json::{Map, Value, json};
use watchkeeper_api::ResourceDef;
use watchkeeper_core::{Change, Object, Revision};
use watchkeeper_store::{Compare, KeyValue, TxnOp};

use crate::config::IpRange;
use crate::source::feed::Observer;

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
#[derive(Debug)]
pub struct Allocators {
    ips: Vec<ServiceIps>,
    ports: NodePorts,
    /// The registry prefix.
    prefix: String,
    /// What the cache's Services and IPAddresses hold.
    holdings: Mutex<Holdings>,
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
    /// (first, last), with their records under the registry `prefix`. Their index of what the
    /// cache holds is empty until the reflector tells them the first list (see [`Observer`]).
    #[must_use]
    pub fn new(ranges: &[IpRange], ports: (u16, u16), prefix: &str) -> Allocators {
        Allocators {
            ips: ranges.iter().map(|range| ServiceIps::new(*range)).collect(),
            ports: NodePorts::new(ports.0, ports.1, prefix),
            prefix: prefix.to_owned(),
            holdings: Mutex::new(Holdings {
                ranges: ranges.iter().map(|_| RangeHoldings::default()).collect(),
                ..Holdings::default()
            }),
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

    /// The store key of the IPAddress of `ip`.
    #[must_use]
    pub fn ip_address_key(&self, ip: IpAddr) -> Bytes {
        Bytes::from(format!("{}{ip}", ip_addresses_prefix(&self.prefix)))
    }

    /// The store key of the record an older version of this server wrote for `ip`
    /// (`<prefix>/ranges/serviceips/<ip>`), read and never written.
    #[must_use]
    pub fn older_ip_key(&self, ip: IpAddr) -> Bytes {
        Bytes::from(format!("{}/ranges/serviceips/{ip}", self.prefix))
    }

    /// The node ports.
    #[must_use]
    pub fn ports(&self) -> &NodePorts {
        &self.ports
    }

    fn holdings(&self) -> MutexGuard<'_, Holdings> {
        self.holdings.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The claim of an address of `family` for a Service: `asked`, or a free one, scanning the
    /// upper part of the range from `rotate` addresses past its start (wrapping), then the
    /// lower part (see the module docs for what is free). `cached` is the Services cache's
    /// revision, read before the call; the judgement is at the revision of the index's
    /// Services, at least `cached`. Only the records of the addresses looked at are read
    /// (`records`): the IPAddress and the older record of each. `value` is the stored
    /// IPAddress of a claimed address.
    ///
    /// # Errors
    /// A failed read (the outer error); what the range refused (the inner one, see
    /// [`Refused`]).
    pub async fn claim_ip<R: Records + Sync>(
        &self,
        (family, asked): IpRequest,
        cached: Revision,
        records: &R,
        value: impl Fn(IpAddr) -> Bytes,
        rotate: u128,
    ) -> Result<Result<Claim, Refused>, R::Error> {
        let Some(index) = self.ips.iter().position(|ips| ips.family() == family) else {
            return Ok(Err(Refused::NotInRange));
        };
        let range = &self.ips[index];
        let asked = match asked {
            Some(ip) => match range.offset(ip) {
                Some(n) => Some(n),
                None => return Ok(Err(Refused::NotInRange)),
            },
            None => None,
        };
        let space = range.space();
        let mut misses = Misses::default();
        loop {
            let (n, seen, by_service) = {
                let holdings = self.holdings();
                let Some(seen) = holdings.seen(cached) else {
                    return Ok(Err(Refused::Unseen(cached + 1)));
                };
                let held = &holdings.ranges[index];
                match asked {
                    Some(n) => (n, seen, held.services.contains_key(&n)),
                    None => match space.next_free(&held.taken, &misses.slots, rotate) {
                        Some(n) => (n, seen, false),
                        None => return Ok(Err(Refused::Full)),
                    },
                }
            };
            let ip = range.nth(n);
            let key = self.ip_address_key(ip);
            let (record, older) = futures_util::future::join(
                records.read(key.clone()),
                records.read(self.older_ip_key(ip)),
            )
            .await;
            let (record, older) = (record?, older?);
            // An older record the cache has not seen holds its address until it has.
            let older_holds = older.as_ref().is_some_and(|kv| kv.mod_revision > seen);
            let takeable = |kv: &KeyValue| {
                serde_json::from_slice::<Value>(&kv.value)
                    .is_ok_and(|object| allocated_for_a_service(&object))
            };
            let verdict = judge(
                key.clone(),
                by_service || older_holds,
                record.as_ref(),
                seen,
                takeable,
            );
            match (verdict, asked) {
                (Verdict::Free(compare), _) => {
                    let put = TxnOp::Put {
                        key,
                        value: value(ip),
                    };
                    return Ok(Ok(Claim { ip, compare, put }));
                }
                (verdict, Some(_)) => return Ok(Err(verdict.refusal())),
                (_, None) => {
                    let newest = [record, older]
                        .into_iter()
                        .flatten()
                        .map(|kv| kv.mod_revision);
                    if let Some(wait) = misses.add(n, newest.max().unwrap_or(0)) {
                        return Ok(Err(Refused::Unseen(wait)));
                    }
                }
            }
        }
    }

    /// Claims the node ports of `requests` (from [`port_requests`]), in order: an asked one
    /// when it is in the range and free, else a free one, as [`Self::claim_ip`] does (each
    /// port's record, `<prefix>/ranges/servicenodeports/<port>` with the value `owner`, is
    /// the only one read for it).
    ///
    /// # Errors
    /// A failed read (the outer error); the first request the range could not give (the inner
    /// one).
    pub async fn claim_ports<R: Records + Sync>(
        &self,
        requests: &[PortRequest],
        cached: Revision,
        records: &R,
        owner: &str,
        rotate: u128,
    ) -> Result<Result<Vec<PortClaim>, PortRefused>, R::Error> {
        let node_ports = &self.ports;
        let space = node_ports.space();
        let mut claims: Vec<PortClaim> = Vec::new();
        // The ports this write claimed already.
        let mut taken: HashSet<u128> = HashSet::new();
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
                Ask::This(port) => {
                    if !(u64::from(node_ports.first)..=u64::from(node_ports.last)).contains(&port) {
                        return Ok(Err((request.slot, port, Refused::NotInRange)));
                    }
                    Some(u128::from(port))
                }
            };
            let refused = |why| Ok(Err((request.slot, asked.map_or(0, |p| p as u64), why)));
            let mut misses = Misses {
                slots: taken.clone(),
                ..Misses::default()
            };
            let (n, compare) = loop {
                let (n, seen, held) = {
                    let holdings = self.holdings();
                    let Some(seen) = holdings.seen(cached) else {
                        return refused(Refused::Unseen(cached + 1));
                    };
                    match asked {
                        Some(n) => (n, seen, holdings.ports.contains(n) || taken.contains(&n)),
                        None => match space.next_free(&holdings.ports, &misses.slots, rotate) {
                            Some(n) => (n, seen, false),
                            None => return refused(Refused::Full),
                        },
                    }
                };
                let key = node_ports.key(n);
                let record = records.read(key.clone()).await?;
                match (judge(key, held, record.as_ref(), seen, |_| true), asked) {
                    (Verdict::Free(compare), _) => break (n, compare),
                    (verdict, Some(_)) => return refused(verdict.refusal()),
                    (_, None) => {
                        let newest = record.map_or(0, |kv| kv.mod_revision);
                        if let Some(wait) = misses.add(n, newest) {
                            return refused(Refused::Unseen(wait));
                        }
                    }
                }
            };
            taken.insert(n);
            let put = TxnOp::Put {
                key: node_ports.key(n),
                value: Bytes::from(owner.to_owned()),
            };
            claims.push(PortClaim {
                slot: request.slot,
                port: u16::try_from(n).unwrap_or(u16::MAX),
                record: Some((compare, put)),
            });
        }
        Ok(Ok(claims))
    }
}

/// Where a claim reads the records of the values it looks at, one key at a time (the store).
pub trait Records {
    /// What a read fails with.
    type Error;
    /// The record under `key`, if any.
    fn read(
        &self,
        key: Bytes,
    ) -> impl std::future::Future<Output = Result<Option<KeyValue>, Self::Error>> + Send;
}

/// How the record of one value was judged for a claim judged at the revision `seen`.
enum Verdict {
    /// Free: the record's compare (absent, or the record read, taken over).
    Free(Compare),
    /// Held by a cached Service, a client's IPAddress or an older record.
    Held,
    /// The allocator's record, written at this revision, which the claim's Services have not
    /// seen: whether its Service still holds the value is known once they have.
    Unseen(u64),
}

impl Verdict {
    fn refusal(self) -> Refused {
        match self {
            Verdict::Unseen(revision) => Refused::Unseen(revision),
            _ => Refused::Allocated,
        }
    }
}

/// The verdict on the value whose record is under `key`: `held` (by a cached Service), or
/// free when it has no `record`, or one the claim's Services have seen (mod revision ≤
/// `seen`) and that a Service's release would have left (`takeable`: a node port's record
/// always, an IPAddress when it is the allocator's).
fn judge(
    key: Bytes,
    held: bool,
    record: Option<&KeyValue>,
    seen: u64,
    takeable: impl Fn(&KeyValue) -> bool,
) -> Verdict {
    if held {
        return Verdict::Held;
    }
    match record {
        None => Verdict::Free(Compare::Absent { key }),
        Some(kv) if takeable(kv) && kv.mod_revision <= seen => {
            Verdict::Free(Compare::ModRevision {
                key,
                revision: kv.mod_revision,
            })
        }
        Some(kv) if takeable(kv) => Verdict::Unseen(kv.mod_revision),
        Some(_) => Verdict::Held,
    }
}

/// Values a dynamic claim looked at and found held although the index had them free (a
/// record written after the index's revision, or one the index has not been told of yet).
#[derive(Default)]
struct Misses {
    /// The values to skip.
    slots: HashSet<u128>,
    count: usize,
    /// The newest revision of their records.
    newest: u64,
}

/// Misses after which a dynamic claim waits for the cache to see the records it met (the
/// index is behind, or other writes are claiming the same values).
const MISSES: usize = 16;

impl Misses {
    /// One more miss, at `slot` whose record's revision is `revision`: the revision to wait
    /// for when there were too many.
    fn add(&mut self, slot: u128, revision: u64) -> Option<u64> {
        self.slots.insert(slot);
        self.count += 1;
        self.newest = self.newest.max(revision);
        (self.count >= MISSES).then_some(self.newest)
    }
}

/// The addresses of one range, and their allocation records in the store (IPAddresses).
#[derive(Clone, Debug)]
pub struct ServiceIps {
    range: IpRange,
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
    /// whether its Service still holds it is known once the cache has it. (A dynamic claim
    /// that met too many records its index did not know waits the same way.)
    Unseen(u64),
}

impl ServiceIps {
    /// The range's allocator (its records are the IPAddresses under the registry prefix).
    #[must_use]
    pub fn new(range: IpRange) -> ServiceIps {
        ServiceIps { range }
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

    /// The usable offsets, scanned as [`Space::next_free`] says.
    fn space(&self) -> Space {
        Space {
            first: 1,
            last: self.last(),
            band: self.static_band(),
        }
    }
}

/// Numbered slots `first..=last` (the offsets of a range's usable addresses, or port numbers)
/// whose first `band` are kept for slots clients ask for.
struct Space {
    first: u128,
    last: u128,
    band: u128,
}

impl Space {
    /// The first slot, in scan order, in neither `taken` nor `skipped`: from `first + band`
    /// rotated by `rotate` (wrapping within the upper part), then from `first`. Costs a
    /// look-up in `taken`'s runs per skipped slot met, whatever `taken` holds.
    fn next_free(&self, taken: &Runs, skipped: &HashSet<u128>, rotate: u128) -> Option<u128> {
        let split = (self.first + self.band).min(self.last + 1);
        let upper_len = self.last + 1 - split;
        let start = split
            + if upper_len == 0 {
                0
            } else {
                rotate % upper_len
            };
        let within = |from: u128, to: u128| {
            let mut at = from;
            while at <= to {
                let free = taken.next_free(at)?;
                if free > to {
                    return None;
                }
                if !skipped.contains(&free) {
                    return Some(free);
                }
                at = free.checked_add(1)?;
            }
            None
        };
        within(start, self.last)
            .or_else(|| (start > split).then(|| within(split, start - 1)).flatten())
            .or_else(|| {
                (split > self.first)
                    .then(|| within(self.first, split - 1))
                    .flatten()
            })
    }
}

/// A multiset of numbers kept with its maximal runs of consecutive members, so the first
/// number at or after a given one that is not a member is one look-up away (O(log n)),
/// however long the run of members before it.
#[derive(Debug, Default)]
struct Runs {
    /// Each member, and how many times it is in.
    counts: HashMap<u128, u32>,
    /// The first member of each run, and its last.
    runs: BTreeMap<u128, u128>,
}

impl Runs {
    fn contains(&self, n: u128) -> bool {
        self.counts.contains_key(&n)
    }

    fn add(&mut self, n: u128) {
        let count = self.counts.entry(n).or_insert(0);
        *count += 1;
        if *count > 1 {
            return;
        }
        let mut first = n;
        if let Some((&start, &end)) = self.runs.range(..n).next_back()
            && end.checked_add(1) == Some(n)
        {
            first = start;
        }
        let mut last = n;
        if let Some(next) = n.checked_add(1)
            && let Some(end) = self.runs.remove(&next)
        {
            last = end;
        }
        self.runs.insert(first, last);
    }

    fn remove(&mut self, n: u128) {
        match self.counts.get_mut(&n) {
            None => return,
            Some(count) if *count > 1 => {
                *count -= 1;
                return;
            }
            Some(_) => {
                self.counts.remove(&n);
            }
        }
        let Some((&start, &end)) = self.runs.range(..=n).next_back() else {
            return;
        };
        self.runs.remove(&start);
        if start < n {
            self.runs.insert(start, n - 1);
        }
        if n < end {
            self.runs.insert(n + 1, end);
        }
    }

    /// The first number at or after `from` that is not a member (none past `u128::MAX`).
    fn next_free(&self, from: u128) -> Option<u128> {
        match self.runs.range(..=from).next_back() {
            Some((_, &end)) if end >= from => end.checked_add(1),
            _ => Some(from),
        }
    }
}

/// What the cache's Services and IPAddresses hold, kept from every list and change the
/// reflector feeds their caches ([`Allocators`] is an [`Observer`]), so that a claim looks up
/// what it needs instead of reading every Service and record.
#[derive(Debug, Default)]
struct Holdings {
    /// The revision of the last list or changes of the Services told; `None` before the first
    /// list.
    services_at: Option<Revision>,
    /// What each cached Service that holds something holds, by cache key.
    services: HashMap<Arc<str>, Held>,
    /// The address of each cached IPAddress that reserves one (any but the allocator's for a
    /// Service), by cache key.
    reserved: HashMap<Arc<str>, IpAddr>,
    /// Per range of [`Allocators::ips`], in order.
    ranges: Vec<RangeHoldings>,
    /// The node ports cached Services hold.
    ports: Runs,
}

/// What one range's addresses are held by, as offsets.
#[derive(Debug, Default)]
struct RangeHoldings {
    /// Those cached Services hold, with how many hold each.
    services: HashMap<u128, u32>,
    /// Those a cached Service holds or a cached IPAddress reserves: what a dynamic claim
    /// skips without reading their records.
    taken: Runs,
}

/// What one Service holds ([`held`] and [`held_ports`] of it).
#[derive(Debug, Default)]
struct Held {
    ips: Vec<IpAddr>,
    ports: Vec<u16>,
}

impl Held {
    fn of(service: &Value) -> Held {
        let mut ips: Vec<IpAddr> = held(std::iter::once(service)).into_iter().collect();
        ips.sort_unstable();
        let mut ports: Vec<u16> = held_ports(std::iter::once(service)).into_iter().collect();
        ports.sort_unstable();
        Held { ips, ports }
    }
}

/// The range (its index) and offset of `ip`, when it lies in one.
fn locate(ranges: &[ServiceIps], ip: IpAddr) -> Option<(usize, u128)> {
    ranges
        .iter()
        .enumerate()
        .find_map(|(i, range)| range.offset(ip).map(|n| (i, n)))
}

impl Holdings {
    /// The revision a claim is judged at when the Services cache was at `cached` before the
    /// index was looked at: the index has every change up to `cached` (the reflector tells it
    /// a revision before the cache has it) and none after its own last one.
    fn seen(&self, cached: Revision) -> Option<Revision> {
        self.services_at.map(|at| at.max(cached))
    }

    /// The Service under `key` is now `service` (none: gone).
    fn put_service(&mut self, ranges: &[ServiceIps], key: &Arc<str>, service: Option<&Value>) {
        if let Some(old) = self.services.remove(key) {
            for ip in &old.ips {
                if let Some((i, n)) = locate(ranges, *ip) {
                    let range = &mut self.ranges[i];
                    if let Some(count) = range.services.get_mut(&n) {
                        *count -= 1;
                        if *count == 0 {
                            range.services.remove(&n);
                        }
                    }
                    range.taken.remove(n);
                }
            }
            for port in &old.ports {
                self.ports.remove(u128::from(*port));
            }
        }
        let Some(new) = service.map(Held::of) else {
            return;
        };
        if new.ips.is_empty() && new.ports.is_empty() {
            return;
        }
        for ip in &new.ips {
            if let Some((i, n)) = locate(ranges, *ip) {
                let range = &mut self.ranges[i];
                *range.services.entry(n).or_insert(0) += 1;
                range.taken.add(n);
            }
        }
        for port in &new.ports {
            self.ports.add(u128::from(*port));
        }
        self.services.insert(key.clone(), new);
    }

    /// The IPAddress under `key` is now `object` (none: gone).
    fn put_ip_address(&mut self, ranges: &[ServiceIps], key: &Arc<str>, object: Option<&Value>) {
        if let Some(old) = self.reserved.remove(key)
            && let Some((i, n)) = locate(ranges, old)
        {
            self.ranges[i].taken.remove(n);
        }
        let reserved = object
            .filter(|object| !allocated_for_a_service(object))
            .and_then(|object| object.pointer("/metadata/name")?.as_str()?.parse().ok());
        if let Some(ip) = reserved {
            if let Some((i, n)) = locate(ranges, ip) {
                self.ranges[i].taken.add(n);
            }
            self.reserved.insert(key.clone(), ip);
        }
    }
}

/// Which of the index's resources a definition is.
fn indexed(def: &ResourceDef) -> Option<bool> {
    match (def.group.as_str(), def.plural.as_str()) {
        ("", "services") => Some(true),
        ("networking.k8s.io", "ipaddresses") => Some(false),
        _ => None,
    }
}

impl Observer for Allocators {
    fn reset(&self, def: &ResourceDef, revision: Revision, objects: &[Arc<Object>]) {
        let Some(services) = indexed(def) else {
            return;
        };
        let mut holdings = self.holdings();
        let holdings = &mut *holdings;
        if services {
            let gone: Vec<Arc<str>> = holdings.services.keys().cloned().collect();
            for key in &gone {
                holdings.put_service(&self.ips, key, None);
            }
            for object in objects {
                holdings.put_service(&self.ips, object.key(), Some(object.body()));
            }
            holdings.services_at = Some(revision);
        } else {
            let gone: Vec<Arc<str>> = holdings.reserved.keys().cloned().collect();
            for key in &gone {
                holdings.put_ip_address(&self.ips, key, None);
            }
            for object in objects {
                holdings.put_ip_address(&self.ips, object.key(), Some(object.body()));
            }
        }
    }

    fn changes(&self, def: &ResourceDef, revision: Revision, changes: &[Change]) {
        let Some(services) = indexed(def) else {
            return;
        };
        let mut holdings = self.holdings();
        for change in changes {
            let object = change.object.as_deref().map(Object::body);
            if services {
                holdings.put_service(&self.ips, &change.key, object);
            } else {
                holdings.put_ip_address(&self.ips, &change.key, object);
            }
        }
        if services {
            holdings.services_at = Some(revision);
        }
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

    /// The range as kube-apiserver names it (`30000-32767`).
    #[must_use]
    pub fn describe(&self) -> String {
        format!("{}-{}", self.first, self.last)
    }

    /// The record of `port`.
    fn key(&self, port: u128) -> Bytes {
        Bytes::from(format!("{}{port}", self.records))
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

    fn space(&self) -> Space {
        Space {
            first: u128::from(self.first),
            last: u128::from(self.last),
            band: self.band(),
        }
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
    use futures_util::FutureExt as _;
    use std::collections::BTreeSet;
    use std::convert::Infallible;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Allocators over the addresses `range` and the node ports 30000-32767.
    fn ips(range: &str) -> Allocators {
        Allocators::new(
            &[IpRange::parse(range).unwrap()],
            (30000, 32767),
            "/registry",
        )
    }

    fn def(group: &str, plural: &str) -> ResourceDef {
        watchkeeper_api::resources::builtin_resources()
            .into_iter()
            .find(|d| d.group == group && d.plural == plural)
            .unwrap()
    }

    /// A cached object of the resource of `def` with `body`'s name (and namespace).
    fn cached(body: Value) -> Arc<Object> {
        let text = |path: &str| body.pointer(path).and_then(Value::as_str).unwrap_or("");
        let (namespace, name) = (
            text("/metadata/namespace").to_owned(),
            text("/metadata/name"),
        );
        let name = name.to_owned();
        Arc::new(Object::new(
            &namespace,
            &name,
            BTreeMap::new(),
            BTreeMap::new(),
            1,
            body,
        ))
    }

    /// The Service `default/<name>` with `spec`.
    fn named_service(name: &str, spec: Value) -> Value {
        let mut body = service(spec);
        body["metadata"] = json!({"name": name, "namespace": "default"});
        body
    }

    /// The allocators' index told the list of Services that hold `held` (one address each)
    /// and no IPAddress, at `revision`.
    fn listed(allocators: &Allocators, held: &[&str], revision: Revision) {
        let objects: Vec<Arc<Object>> = held
            .iter()
            .enumerate()
            .map(|(i, ip)| {
                cached(named_service(
                    &format!("h{i}"),
                    json!({"clusterIP": ip, "clusterIPs": [ip]}),
                ))
            })
            .collect();
        allocators.reset(&def("", "services"), revision, &objects);
        allocators.reset(&def("networking.k8s.io", "ipaddresses"), revision, &[]);
    }

    /// A store of records, counting its reads.
    #[derive(Default)]
    struct Store {
        records: BTreeMap<Bytes, KeyValue>,
        reads: AtomicUsize,
    }

    impl Records for Store {
        type Error = Infallible;

        async fn read(&self, key: Bytes) -> Result<Option<KeyValue>, Infallible> {
            self.reads.fetch_add(1, Ordering::Relaxed);
            Ok(self.records.get(&key).cloned())
        }
    }

    fn store(records: &[KeyValue]) -> Store {
        Store {
            records: records
                .iter()
                .map(|kv| (kv.key.clone(), kv.clone()))
                .collect(),
            reads: AtomicUsize::new(0),
        }
    }

    /// The claim of `asked` (any address when `None`) of the first range of `allocators` over
    /// `records`, the Services cache at `cached`.
    fn claim(
        allocators: &Allocators,
        asked: Option<&str>,
        cached: Revision,
        records: &Store,
        rotate: u128,
    ) -> Result<Claim, Refused> {
        let family = allocators.families()[0];
        let asked = asked.map(|ip| ip.parse().unwrap());
        let claim = allocators.claim_ip((family, asked), cached, records, owned, rotate);
        let Ok(claimed) = claim.now_or_never().expect("no read waits");
        claimed
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

    fn service(spec: Value) -> Value {
        json!({"metadata": {"name": "s"}, "spec": spec, "status": {"loadBalancer": {}}})
    }

    const V4: &[Family] = &[Family::V4];

    fn addrs(ips: &[&str]) -> HashSet<IpAddr> {
        ips.iter().map(|ip| ip.parse().unwrap()).collect()
    }

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
        let def = def("networking.k8s.io", "ipaddresses");
        let allocators = ips("10.0.0.0/24");
        assert_eq!(
            allocators.ip_address_key("10.0.0.9".parse().unwrap()),
            format!("/registry/{}/10.0.0.9", def.storage_prefix())
        );
        assert_eq!(
            allocators.older_ip_key("10.0.0.9".parse().unwrap()),
            "/registry/ranges/serviceips/10.0.0.9"
        );
    }

    /// Goal: what holds an address beyond the cached Services: a client's IPAddress always
    /// (known to the index or only to the store), an allocator's IPAddress only as a record
    /// (taken over once seen), an older record only until the cache has seen it.
    #[test]
    fn ip_addresses_reserve_what_they_name() {
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
        let clients = [unlabelled.clone(), gateway.clone()];
        let stored = store(&[
            kv("/registry/ipaddresses/10.0.0.20".into(), allocated, 5),
            kv("/registry/ipaddresses/10.0.0.21".into(), unlabelled, 5),
            kv("/registry/ipaddresses/10.0.0.22".into(), gateway, 5),
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
        ]);
        for told_clients in [false, true] {
            let allocators = ips("10.0.0.0/24");
            let at = |seen: Revision, held: &[&str]| {
                listed(&allocators, held, seen);
                if told_clients {
                    let objects: Vec<Arc<Object>> = clients.iter().cloned().map(cached).collect();
                    allocators.reset(&def("networking.k8s.io", "ipaddresses"), seen, &objects);
                }
            };
            let ask = |ip: &str| claim(&allocators, Some(ip), 0, &stored, 0);
            at(6, &[]);
            // An older record holds its address until the cache has seen it.
            assert_eq!(ask("10.0.0.31").unwrap_err(), Refused::Allocated);
            assert!(matches!(
                ask("10.0.0.30").unwrap().compare,
                Compare::Absent { .. }
            ));
            // The allocator's orphan, seen, is taken over on its revision; unseen, it waits.
            let taken = ask("10.0.0.20").unwrap();
            assert!(matches!(
                taken.compare,
                Compare::ModRevision { revision: 5, .. }
            ));
            for client in ["10.0.0.21", "10.0.0.22"] {
                assert_eq!(ask(client).unwrap_err(), Refused::Allocated, "{client}");
            }
            // Dynamic allocation skips the clients' and takes over the orphan.
            let dynamic = claim(&allocators, None, 0, &stored, 20 - 17).unwrap();
            assert_eq!(dynamic.ip.to_string(), "10.0.0.20");
            at(4, &[]);
            assert_eq!(ask("10.0.0.20").unwrap_err(), Refused::Unseen(5));
            for client in ["10.0.0.21", "10.0.0.22"] {
                assert_eq!(ask(client).unwrap_err(), Refused::Allocated, "{client}");
            }
            // Held by a cached Service, it is allocated.
            at(6, &["10.0.0.20"]);
            assert_eq!(ask("10.0.0.20").unwrap_err(), Refused::Allocated);
            let dynamic = claim(&allocators, None, 0, &stored, 20 - 17).unwrap();
            assert_eq!(
                dynamic.ip.to_string(),
                "10.0.0.23",
                "clients told: {told_clients}"
            );
        }
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
        listed(&allocator, &["10.0.0.1"], 10);
        let claimed = claim(&allocator, None, 10, &store(&[]), 0).unwrap();
        assert_eq!(
            claimed.ip.to_string(),
            "10.0.0.17",
            "above the static band of 16"
        );
        assert!(matches!(claimed.compare, Compare::Absent { .. }));
        listed(&allocator, &["10.0.0.1", "10.0.0.17"], 10);
        // A record newer than the cache: its Service may not be cached yet.
        let fresh = store(&[record("10.0.0.18", 11)]);
        let claimed = claim(&allocator, None, 10, &fresh, 0).unwrap();
        assert_eq!(claimed.ip.to_string(), "10.0.0.19");
        // The same record once the cache has seen it and no Service holds the address.
        let claimed = claim(&allocator, None, 11, &fresh, 0).unwrap();
        assert_eq!(claimed.ip.to_string(), "10.0.0.18");
        assert!(matches!(
            claimed.compare,
            Compare::ModRevision { revision: 11, .. }
        ));
        // A rotated scan starts inside the upper part and wraps around it (238 addresses).
        let from = |rotate| {
            claim(&allocator, None, 10, &fresh, rotate)
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

    /// Goal: a claim reads the records of the addresses it looks at only (the IPAddress and
    /// the older record of each), not one per Service: with 3,000 Services holding the
    /// lowest addresses of the upper part, a dynamic claim reads two keys and an asked one
    /// two; a run of records the index does not know makes the claim wait for the cache
    /// rather than read on.
    #[test]
    fn a_claim_reads_only_the_records_of_the_addresses_it_looks_at() {
        let allocator = ips("10.0.0.0/16");
        let held: Vec<String> = (0..3000u32)
            .map(|i| Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 0, 1, 1)) + i).to_string())
            .collect();
        let held: Vec<&str> = held.iter().map(String::as_str).collect();
        listed(&allocator, &held, 10);
        let empty = store(&[]);
        let claimed = claim(&allocator, None, 10, &empty, 0).unwrap();
        assert_eq!(claimed.ip.to_string(), "10.0.12.185", "past the 3,000 held");
        assert_eq!(empty.reads.load(Ordering::Relaxed), 2);
        let asked = claim(&allocator, Some("10.0.0.9"), 10, &empty, 0).unwrap();
        assert_eq!(asked.ip.to_string(), "10.0.0.9");
        assert_eq!(empty.reads.load(Ordering::Relaxed), 4);
        // Records written after the index's revision, unknown to it: each is a read, and
        // after 16 the claim waits for the cache to see the newest.
        let unknown: Vec<KeyValue> = (0..20u32)
            .map(|i| {
                let ip = Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 0, 12, 185)) + i);
                record(&ip.to_string(), 11 + u64::from(i))
            })
            .collect();
        let racing = store(&unknown);
        assert_eq!(
            claim(&allocator, None, 10, &racing, 0).unwrap_err(),
            Refused::Unseen(26)
        );
        assert_eq!(racing.reads.load(Ordering::Relaxed), 32);
    }

    /// Goal: an asked address is claimed only inside the range and when free; one whose
    /// record the cache has not seen waits for the cache.
    #[test]
    fn an_asked_address_must_be_in_the_range_and_free() {
        let allocator = ips("10.0.0.0/24");
        listed(&allocator, &["10.0.0.5"], 1);
        let records = store(&[record("10.0.0.7", 9)]);
        let ask = |ip: &str| claim(&allocator, Some(ip), 1, &records, 0).map(|c| c.ip.to_string());
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
        let mut held: Vec<String> = Vec::new();
        for expected in 1..=6 {
            listed(
                &allocator,
                &held.iter().map(String::as_str).collect::<Vec<_>>(),
                1,
            );
            let claimed = claim(&allocator, None, 1, &store(&[]), 0).unwrap();
            assert_eq!(claimed.ip.to_string(), format!("10.0.0.{expected}"));
            held.push(claimed.ip.to_string());
        }
        listed(
            &allocator,
            &held.iter().map(String::as_str).collect::<Vec<_>>(),
            1,
        );
        assert_eq!(
            claim(&allocator, None, 1, &store(&[]), 0).unwrap_err(),
            Refused::Full
        );
    }

    /// Goal: before the index has been told the Services' list, a claim waits for the cache
    /// rather than judge from nothing.
    #[test]
    fn a_claim_before_the_first_list_waits_for_the_cache() {
        let allocator = ips("10.0.0.0/24");
        assert_eq!(
            claim(&allocator, None, 0, &store(&[]), 0).unwrap_err(),
            Refused::Unseen(1)
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
    /// ports, an asked one when it is in the range and free, a shared one without a record;
    /// a record the cache has not seen holds its port, a seen one whose Service let the port
    /// go is taken over.
    #[test]
    fn node_ports_are_claimed_per_request() {
        let claimed_from =
            |range: (u16, u16), requests: &[PortRequest], held: &[u16], records: &[KeyValue]| {
                let allocators = Allocators::new(
                    &[IpRange::parse("10.0.0.0/24").unwrap()],
                    range,
                    "/registry",
                );
                let ports: Vec<Value> = held
                    .iter()
                    .map(|p| json!({"port": p, "nodePort": p}))
                    .collect();
                let holder = cached(named_service(
                    "h",
                    json!({"type": "NodePort", "ports": ports}),
                ));
                allocators.reset(&def("", "services"), 1, &[holder]);
                let records = store(records);
                let claim = allocators.claim_ports(requests, 1, &records, "default/a", 0);
                let Ok(claimed) = claim.now_or_never().expect("no read waits");
                claimed.map(|claims| {
                    claims
                        .iter()
                        .map(|c| (c.slot, c.port, c.record.is_some()))
                        .collect::<Vec<_>>()
                })
            };
        let claimed = |requests: &[PortRequest], held: &[u16]| {
            claimed_from((30000, 32767), requests, held, &[])
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
        let port_record = |port: u16, mod_revision| KeyValue {
            key: Bytes::from(format!("/registry/ranges/servicenodeports/{port}")),
            value: Bytes::from_static(b"default/b"),
            create_revision: mod_revision,
            mod_revision,
            version: 1,
        };
        assert_eq!(
            claimed_from((30000, 32767), &two, &[], &[port_record(30086, 2)]),
            Ok(vec![
                (Slot::Port(0), 30087, true),
                (Slot::Port(1), 30088, true)
            ]),
            "a record newer than the cache"
        );
        assert_eq!(
            claimed_from((30000, 32767), &two[..1], &[], &[port_record(30086, 1)]),
            Ok(vec![(Slot::Port(0), 30086, true)]),
            "a record the cache has seen, no Service holding its port"
        );
        let asked = [request(Slot::Port(0), Ask::This(30005))];
        assert_eq!(claimed(&asked, &[]), Ok(vec![(Slot::Port(0), 30005, true)]));
        assert_eq!(
            claimed(&asked, &[30005]),
            Err((Slot::Port(0), 30005, Refused::Allocated))
        );
        assert_eq!(
            claimed_from((30000, 32767), &asked, &[], &[port_record(30005, 2)]),
            Err((Slot::Port(0), 30005, Refused::Unseen(2)))
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
        let twice = [
            request(Slot::Port(0), Ask::This(30054)),
            request(Slot::Port(1), Ask::This(30054)),
        ];
        assert_eq!(
            claimed(&twice, &[]),
            Err((Slot::Port(1), 30054, Refused::Allocated)),
            "a port the write claimed already"
        );
        let three = [
            request(Slot::Port(0), Ask::Any),
            request(Slot::Port(1), Ask::Any),
            request(Slot::Port(2), Ask::Any),
        ];
        assert_eq!(
            claimed_from((30000, 30001), &three, &[], &[]),
            Err((Slot::Port(2), 0, Refused::Full))
        );
    }

    /// Goal: the runs of a multiset agree with the multiset: membership, and the first
    /// number at or after any that is not a member; runs are maximal and disjoint.
    #[test]
    fn runs_agree_with_their_members() {
        use proptest::prelude::*;
        let strategy = proptest::collection::vec((any::<bool>(), 0u128..40), 0..200);
        proptest!(ProptestConfig::with_cases(256), |(ops in strategy)| {
            let mut runs = Runs::default();
            let mut model: BTreeMap<u128, u32> = BTreeMap::new();
            for (add, n) in ops {
                if add {
                    runs.add(n);
                    *model.entry(n).or_insert(0) += 1;
                } else {
                    runs.remove(n);
                    if let Some(count) = model.get_mut(&n) {
                        *count -= 1;
                        if *count == 0 {
                            model.remove(&n);
                        }
                    }
                }
                for from in 0..42 {
                    prop_assert_eq!(runs.contains(from), model.contains_key(&from));
                    let free = (from..).find(|m| !model.contains_key(m));
                    prop_assert_eq!(runs.next_free(from), free);
                }
                let mut covered = 0;
                let mut previous: Option<u128> = None;
                for (&start, &end) in &runs.runs {
                    prop_assert!(start <= end);
                    prop_assert!(previous.is_none_or(|p| p + 1 < start), "not maximal or overlapping");
                    prop_assert!((start..=end).all(|m| model.contains_key(&m)));
                    covered += end - start + 1;
                    previous = Some(end);
                }
                prop_assert_eq!(covered, model.len() as u128);
            }
        });
    }

    /// A Service spec for the index's comparison, from picks: its type, addresses (in the
    /// range or not) and node ports.
    fn picked_service(kind: u8, ips: (u8, u8), ports: (u16, u16)) -> Value {
        let ip = |pick: u8| match pick % 4 {
            3 => "192.168.0.9".to_owned(),
            _ => format!("10.0.0.{}", pick % 40),
        };
        let mut spec = json!({"clusterIP": ip(ips.0), "clusterIPs": [ip(ips.0), ip(ips.1)],
            "ports": [{"port": 80, "nodePort": 30000 + ports.0 % 20},
                      {"port": 81, "nodePort": 30000 + ports.1 % 20}],
            "healthCheckNodePort": 30000 + (ports.0 % 20 + ports.1 % 20) % 20});
        let (kind, extra) = match kind % 6 {
            0 => ("ClusterIP", json!({})),
            1 => ("NodePort", json!({})),
            2 => ("LoadBalancer", json!({"externalTrafficPolicy": "Local"})),
            3 => ("LoadBalancer", json!({"externalTrafficPolicy": "Cluster"})),
            4 => ("ExternalName", json!({"externalName": "x"})),
            _ => (
                "ClusterIP",
                json!({"clusterIP": "None", "clusterIPs": ["None"]}),
            ),
        };
        spec["type"] = json!(kind);
        for (key, value) in extra.as_object().unwrap() {
            spec[key] = value.clone();
        }
        spec
    }

    /// Goal: the index kept from the reflector's lists and changes agrees with a full scan of
    /// the Services and IPAddresses it was told, after any creates, updates, deletes and
    /// relists: the addresses and node ports the Services hold, what a dynamic claim skips,
    /// and the first free address in scan order from any rotation.
    #[test]
    fn the_index_agrees_with_a_full_scan() {
        use proptest::prelude::*;
        // (resource: Services or IPAddresses, name, what: delete / relist / put, picks)
        let op = (
            any::<bool>(),
            0u8..8,
            0u8..10,
            (
                any::<u8>(),
                (any::<u8>(), any::<u8>()),
                (any::<u16>(), any::<u16>()),
            ),
        );
        let strategy = proptest::collection::vec(op, 1..60);
        proptest!(ProptestConfig::with_cases(128), |(ops in strategy, rotate in 0u128..64)| {
            let allocators = ips("10.0.0.0/26");
            let (services_def, ip_def) = (def("", "services"), def("networking.k8s.io", "ipaddresses"));
            allocators.reset(&services_def, 1, &[]);
            allocators.reset(&ip_def, 1, &[]);
            let mut services: BTreeMap<String, Value> = BTreeMap::new();
            let mut addresses: BTreeMap<String, Value> = BTreeMap::new();
            let mut services_at = 1;
            for (revision, (is_service, name, what, (kind, ips_pick, ports_pick))) in (2u64..).zip(ops) {
                if is_service {
                    services_at = revision;
                }
                let (model, def) = if is_service {
                    (&mut services, &services_def)
                } else {
                    (&mut addresses, &ip_def)
                };
                if what == 0 {
                    let key = if is_service { format!("default/s{name}") } else { format!("10.0.0.{}", name * 5) };
                    model.remove(&key);
                    allocators.changes(def, revision, &[Change::delete(key)]);
                } else if what == 1 {
                    let objects: Vec<Arc<Object>> = model.values().cloned().map(cached).collect();
                    allocators.reset(def, revision, &objects);
                } else {
                    let body = if is_service {
                        named_service(&format!("s{name}"), picked_service(kind, ips_pick, ports_pick))
                    } else {
                        let ip: IpAddr = format!("10.0.0.{}", name * 5).parse().unwrap();
                        let mut object = ip_address(ip, ("default", "s"), "u", "t");
                        if kind % 2 == 0 {
                            object["metadata"]["labels"] = json!({});
                        }
                        object
                    };
                    let object = cached(body.clone());
                    model.insert(object.key().to_string(), body);
                    allocators.changes(def, revision, &[Change::put(object)]);
                }
                // The full scan.
                let range = allocators.ips(Family::V4).unwrap();
                let by_services: BTreeSet<u128> = held(services.values())
                    .into_iter()
                    .filter_map(|ip| range.offset(ip))
                    .collect();
                let reserved: BTreeSet<u128> = addresses
                    .values()
                    .filter(|object| !allocated_for_a_service(object))
                    .filter_map(|object| range.offset(object["metadata"]["name"].as_str()?.parse().ok()?))
                    .collect();
                let ports: BTreeSet<u128> = held_ports(services.values()).into_iter().map(u128::from).collect();
                let holdings = allocators.holdings();
                let indexed: BTreeSet<u128> = holdings.ranges[0].services.keys().copied().collect();
                prop_assert_eq!(&indexed, &by_services);
                for n in 0..70 {
                    prop_assert_eq!(holdings.ranges[0].taken.contains(n), by_services.contains(&n) || reserved.contains(&n), "{}", n);
                    prop_assert_eq!(holdings.ports.contains(30000 + n), ports.contains(&(30000 + n)));
                }
                let space = range.space();
                let scan = (0..46u128)
                    .map(|i| 17 + (rotate + i) % 46)
                    .chain(1..17)
                    .find(|n| !by_services.contains(n) && !reserved.contains(n));
                prop_assert_eq!(space.next_free(&holdings.ranges[0].taken, &HashSet::new(), rotate), scan);
                prop_assert_eq!(holdings.seen(0), Some(services_at));
                prop_assert_eq!(holdings.seen(services_at + 3), Some(services_at + 3));
            }
        });
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

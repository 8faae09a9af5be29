//! ClusterIP and node port allocation for Services, as kube-apiserver's Service registry does
//! it on create.
//!
//! ## Guarantees
//! - A Service created without `spec.clusterIP` (not headless `None`, not `ExternalName`) gets
//!   a free address of `--service-cluster-ip-range` in `clusterIP` and `clusterIPs`. One created
//!   with an address gets it when it lies in the range and is free; otherwise 422 with
//!   kube-apiserver's wording (`spec.clusterIPs: Invalid value: []string{"X"}: failed to
//!   allocate IP X: provided IP is already allocated`, or `... the provided IP (X) is not in the
//!   valid range. The range of valid IPs is R`). A full range is 500 `failed to allocate a
//!   serviceIP: range is full`.
//! - **No two Services hold one address**, across servers sharing a store: each allocation is a
//!   record `<prefix>/ranges/serviceips/<ip>` (value: the Service's `namespace/name`) written in
//!   the Service's own create transaction, on the condition that the record is absent or still
//!   the stale one that was read (its mod revision). Two creates racing for an address: one
//!   transaction fails on the record and tries the next address.
//! - **An address is free** when no Service in the cache holds it and its record, if any, is one
//!   the cache has seen (mod revision ≤ the cache's revision) whose Service no longer holds it.
//!   So deleting a Service, or changing it to `ExternalName`, frees its address without a
//!   release step that a crash could skip (kube-apiserver runs a repair loop for those).
//! - Dynamic allocation prefers the upper part of the range, as kube-apiserver's static
//!   subrange does (the first `min(max(16, size / 16), 256)` addresses are left for addresses
//!   clients choose), taking the lowest free address there, then the lowest below. A create
//!   whose claim lost a race starts its next scan at a random point of the upper part
//!   (kube-apiserver picks at random every time), so concurrent creates spread out instead of
//!   all asking for the same next address.
//! - An update whose Service still needs an address but omits `clusterIP` or `clusterIPs`
//!   keeps the ones it had (kube-apiserver's `patchAllocatedValues`: a `kubectl replace` of a
//!   manifest without them does not drop the address).
//! - **Node ports** the same way, from `--service-node-port-range` (records
//!   `<prefix>/ranges/servicenodeports/<port>`): one per port of a `NodePort` Service, or of a
//!   `LoadBalancer` one unless `allocateLoadBalancerNodePorts` is false; kube-apiserver's band
//!   of `min(max(16, size / 32), 128)` ports is kept for asked ones (86 of 30000-32767); an
//!   asked port out of the range or held is 422 (`spec.ports[i].nodePort: Invalid value: P:
//!   provided port is already allocated`), a full range 500.
//! - Not done: dual-stack Services (one address of the range's family), health check node
//!   ports, addresses or ports for a Service updated to a type that needs them.

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use bytes::Bytes;
use serde_json::Value;
use watchkeeper_store::{Compare, KeyValue, TxnOp};

use crate::config::IpRange;

/// What a created Service needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Wanted {
    /// Nothing (`ExternalName`, or headless `clusterIP: None`).
    Nothing,
    /// A free address of the range.
    Any,
    /// This address.
    This(IpAddr),
    /// An address field that is not an address.
    Invalid(String),
}

/// What a Service object asks for.
#[must_use]
pub fn wanted(service: &Value) -> Wanted {
    let spec = service.get("spec");
    let field = |name: &str| spec.and_then(|s| s.get(name)).and_then(Value::as_str);
    if field("type") == Some("ExternalName") {
        return Wanted::Nothing;
    }
    match field("clusterIP") {
        Some("None") => Wanted::Nothing,
        None | Some("") => Wanted::Any,
        Some(text) => text
            .parse()
            .map_or_else(|_| Wanted::Invalid(text.to_owned()), Wanted::This),
    }
}

/// An update of a Service that needs an address (not `ExternalName`, before and after) keeps
/// the `clusterIP` and `clusterIPs` it had when the new object leaves them out.
pub fn keep_allocated(old: &Value, new: &mut Value) {
    let needs = |service: &Value| {
        service.pointer("/spec/type").and_then(Value::as_str) != Some("ExternalName")
    };
    if !needs(old) || !needs(new) {
        return;
    }
    let Some(old_spec) = old.get("spec").and_then(Value::as_object) else {
        return;
    };
    let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    let empty = |value: Option<&Value>| match value {
        None | Some(Value::Null) => true,
        Some(Value::String(text)) => text.is_empty(),
        Some(Value::Array(items)) => items.is_empty(),
        Some(_) => false,
    };
    for field in ["clusterIP", "clusterIPs"] {
        if empty(spec.get(field))
            && let Some(kept) = old_spec.get(field).filter(|v| !empty(Some(v)))
        {
            spec.insert(field.to_owned(), kept.clone());
        }
    }
}

/// Sets `clusterIP` and `clusterIPs` of a Service object.
pub fn set_address(service: &mut Value, ip: IpAddr) {
    if let Some(spec) = service.get_mut("spec").and_then(Value::as_object_mut) {
        spec.insert("clusterIP".into(), Value::String(ip.to_string()));
        spec.insert("clusterIPs".into(), serde_json::json!([ip.to_string()]));
    }
}

/// The addresses of one range, and their allocation records in the store.
#[derive(Clone, Debug)]
pub struct ServiceIps {
    range: IpRange,
    /// `<prefix>/ranges/serviceips/`.
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

/// Why no address could be claimed.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// The asked address is held by another Service.
    Allocated,
    /// The asked address lies outside the range.
    NotInRange,
    /// Every address of the range is held.
    Full,
}

impl ServiceIps {
    /// The range's allocator, with its records under the registry `prefix`.
    #[must_use]
    pub fn new(range: IpRange, prefix: &str) -> ServiceIps {
        ServiceIps {
            range,
            records: format!("{prefix}/ranges/serviceips/"),
        }
    }

    /// The range, as `--service-cluster-ip-range` gave it.
    #[must_use]
    pub fn range(&self) -> &IpRange {
        &self.range
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
    /// lower part. `cached` are the addresses the cache's Services hold, at the cache's
    /// revision `seen`; `records` the allocation records read from the store.
    ///
    /// # Errors
    /// See [`Refused`].
    pub fn claim(
        &self,
        asked: Option<IpAddr>,
        cached: &HashSet<IpAddr>,
        seen: u64,
        records: &[KeyValue],
        owner: &str,
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
        };
        let (n, compare, put) =
            space.claim(asked, &held, seen, &index(records), owner, rotate, |n| {
                self.nth(n).to_string()
            })?;
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
        owner: &str,
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
                Some(kv) if kv.mod_revision <= seen => Some(Compare::ModRevision {
                    key,
                    revision: kv.mod_revision,
                }),
                Some(_) => None,
            }
        };
        let claim = |n: u128, compare: Compare| {
            let put = TxnOp::Put {
                key: key(n),
                value: Bytes::from(owner.to_owned()),
            };
            (n, compare, put)
        };
        if let Some(n) = asked {
            if n < self.first || n > self.last {
                return Err(Refused::NotInRange);
            }
            return free(n)
                .map(|compare| claim(n, compare))
                .ok_or(Refused::Allocated);
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

/// One node port claimed for a Service's port.
#[derive(Debug)]
pub struct PortClaim {
    /// The index of the port in `spec.ports`.
    pub index: usize,
    /// The node port.
    pub port: u16,
    /// The record is absent, or still the stale one read.
    pub compare: Compare,
    /// The record.
    pub put: TxnOp,
}

/// A port the range could not give: its index in `spec.ports`, the port asked (0: any), why.
pub type PortRefused = (usize, u16, Refused);

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

    /// Claims a node port for every port of `service` that needs one (a `NodePort` Service,
    /// or a `LoadBalancer` one unless `allocateLoadBalancerNodePorts` is false): the port asked
    /// in `nodePort`, or a free one. `held` are the node ports the cache's Services hold.
    ///
    /// # Errors
    /// The first port the range could not give.
    pub fn claim(
        &self,
        service: &Value,
        held: &HashSet<u16>,
        seen: u64,
        records: &[KeyValue],
        owner: &str,
        rotate: u128,
    ) -> Result<Vec<PortClaim>, PortRefused> {
        let spec = service.get("spec");
        let kind = spec
            .and_then(|s| s.get("type"))
            .and_then(Value::as_str)
            .unwrap_or("ClusterIP");
        let balancer_ports = spec
            .and_then(|s| s.get("allocateLoadBalancerNodePorts"))
            .and_then(Value::as_bool)
            != Some(false);
        if !(kind == "NodePort" || (kind == "LoadBalancer" && balancer_ports)) {
            return Ok(Vec::new());
        }
        let ports = spec
            .and_then(|s| s.get("ports"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let space = Space {
            first: u128::from(self.first),
            last: u128::from(self.last),
            band: self.band(),
            records: &self.records,
        };
        let records = index(records);
        let mut taken: HashSet<u128> = held.iter().map(|p| u128::from(*p)).collect();
        let mut claims: Vec<PortClaim> = Vec::new();
        for (index, port) in ports.iter().enumerate() {
            let asked = port.get("nodePort").and_then(Value::as_u64).unwrap_or(0);
            let asked = u16::try_from(asked).unwrap_or(u16::MAX);
            // One node port asked for two ports of the Service (TCP and UDP): one record.
            if asked != 0 && claims.iter().any(|c| c.port == asked) {
                continue;
            }
            let (n, compare, put) = space
                .claim(
                    (asked != 0).then_some(u128::from(asked)),
                    &taken,
                    seen,
                    &records,
                    owner,
                    rotate,
                    |n| n.to_string(),
                )
                .map_err(|why| (index, asked, why))?;
            taken.insert(n);
            claims.push(PortClaim {
                index,
                port: u16::try_from(n).unwrap_or(u16::MAX),
                compare,
                put,
            });
        }
        Ok(claims)
    }
}

/// Sets the claimed node ports of a Service object.
pub fn set_node_ports(service: &mut Value, claims: &[PortClaim]) {
    let Some(ports) = service
        .pointer_mut("/spec/ports")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for claim in claims {
        if let Some(Value::Object(port)) = ports.get_mut(claim.index) {
            port.insert("nodePort".into(), Value::from(claim.port));
        }
    }
}

/// The node ports the Services in `services` hold (`spec.ports[].nodePort` and
/// `healthCheckNodePort`).
pub fn held_ports<'a>(services: impl Iterator<Item = &'a Value>) -> HashSet<u16> {
    let mut held = HashSet::new();
    for service in services {
        let spec = service.get("spec");
        let ports = spec
            .and_then(|s| s.get("ports"))
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let listed = ports.iter().filter_map(|p| p.get("nodePort"));
        let health = spec.and_then(|s| s.get("healthCheckNodePort"));
        for port in listed.chain(health) {
            if let Some(port) = port.as_u64().and_then(|p| u16::try_from(p).ok()) {
                held.insert(port);
            }
        }
    }
    held
}

/// The addresses the Services in `services` hold (`clusterIPs`, else `clusterIP`).
pub fn held<'a>(services: impl Iterator<Item = &'a Value>) -> HashSet<IpAddr> {
    let mut held = HashSet::new();
    for service in services {
        let spec = service.get("spec");
        let listed = spec
            .and_then(|s| s.get("clusterIPs"))
            .and_then(Value::as_array)
            .map(|ips| ips.iter().filter_map(Value::as_str).collect::<Vec<_>>())
            .unwrap_or_default();
        let single = spec
            .and_then(|s| s.get("clusterIP"))
            .and_then(Value::as_str);
        for text in listed.into_iter().chain(single) {
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
            key: Bytes::from(format!("/registry/ranges/serviceips/{ip}")),
            value: Bytes::from_static(b"default/x"),
            create_revision: mod_revision,
            mod_revision,
            version: 1,
        }
    }

    fn set(ips: &[&str]) -> HashSet<IpAddr> {
        ips.iter().map(|ip| ip.parse().unwrap()).collect()
    }

    /// Goal: dynamic addresses come from above kube-apiserver's static band, lowest first,
    /// skipping what the cache's Services hold and records the cache has not seen; a record
    /// the cache has seen whose Service let the address go is reclaimed on its revision.
    #[test]
    fn dynamic_addresses_skip_held_ones_and_reclaim_released_ones() {
        let allocator = ips("10.0.0.0/24");
        let claim = allocator.claim(None, &set(&["10.0.0.1"]), 10, &[], "default/a", 0);
        let claim = claim.unwrap();
        assert_eq!(
            claim.ip.to_string(),
            "10.0.0.17",
            "above the static band of 16"
        );
        assert!(matches!(claim.compare, Compare::Absent { .. }));
        let held = set(&["10.0.0.1", "10.0.0.17"]);
        // A record newer than the cache: its Service may not be cached yet.
        let fresh = [record("10.0.0.18", 11)];
        let claim = allocator
            .claim(None, &held, 10, &fresh, "default/b", 0)
            .unwrap();
        assert_eq!(claim.ip.to_string(), "10.0.0.19");
        // The same record once the cache has seen it and no Service holds the address.
        let claim = allocator
            .claim(None, &held, 11, &fresh, "default/b", 0)
            .unwrap();
        assert_eq!(claim.ip.to_string(), "10.0.0.18");
        assert!(matches!(
            claim.compare,
            Compare::ModRevision { revision: 11, .. }
        ));
        // A rotated scan starts inside the upper part and wraps around it (238 addresses).
        let from = |rotate| {
            allocator
                .claim(None, &held, 10, &fresh, "default/c", rotate)
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

    /// Goal: an asked address is claimed only inside the range and when free.
    #[test]
    fn an_asked_address_must_be_in_the_range_and_free() {
        let allocator = ips("10.0.0.0/24");
        let held = set(&["10.0.0.5"]);
        let ask = |ip: &str| {
            allocator
                .claim(Some(ip.parse().unwrap()), &held, 1, &[], "default/a", 0)
                .map(|c| c.ip.to_string())
        };
        assert_eq!(ask("10.0.0.6"), Ok("10.0.0.6".to_owned()));
        assert_eq!(
            ask("10.0.0.3"),
            Ok("10.0.0.3".to_owned()),
            "the static band"
        );
        assert_eq!(ask("10.0.0.5"), Err(Refused::Allocated));
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
        let mut held = set(&[]);
        for expected in 1..=6 {
            let claim = allocator
                .claim(None, &held, 1, &[], "default/a", 0)
                .unwrap();
            assert_eq!(claim.ip.to_string(), format!("10.0.0.{expected}"));
            held.insert(claim.ip);
        }
        assert_eq!(
            allocator
                .claim(None, &held, 1, &[], "default/a", 0)
                .unwrap_err(),
            Refused::Full
        );
    }

    /// Goal: an update that leaves the address out keeps it; one to ExternalName, or one that
    /// sets an address, is left as it is.
    #[test]
    fn updates_keep_the_allocated_address() {
        let old = serde_json::json!({"spec": {"type": "ClusterIP", "clusterIP": "10.0.0.17",
            "clusterIPs": ["10.0.0.17"], "ports": [{"port": 80}]}});
        let mut new = serde_json::json!({"spec": {"type": "ClusterIP", "clusterIP": "",
            "ports": [{"port": 81}]}});
        keep_allocated(&old, &mut new);
        assert_eq!(new["spec"]["clusterIP"], "10.0.0.17");
        assert_eq!(new["spec"]["clusterIPs"], serde_json::json!(["10.0.0.17"]));
        assert_eq!(new["spec"]["ports"][0]["port"], 81);
        let mut external = serde_json::json!({"spec": {"type": "ExternalName",
            "externalName": "example.com"}});
        keep_allocated(&old, &mut external);
        assert!(external["spec"].get("clusterIP").is_none());
        let mut moved = serde_json::json!({"spec": {"clusterIP": "10.0.0.9"}});
        keep_allocated(&old, &mut moved);
        assert_eq!(moved["spec"]["clusterIP"], "10.0.0.9");
        assert_eq!(
            moved["spec"]["clusterIPs"],
            serde_json::json!(["10.0.0.17"])
        );
    }

    /// Goal: node ports as kube-apiserver allocates them: one per port of a NodePort Service
    /// (and of a LoadBalancer one unless it opts out), from above the static band of 86 ports,
    /// an asked one when it is in the range and free, none for other types.
    #[test]
    fn node_ports_are_claimed_per_port() {
        let ports = NodePorts::new(30000, 32767, "/registry");
        let service = |spec: Value| serde_json::json!({"spec": spec});
        let claimed = |spec: Value, held: &[u16]| {
            ports
                .claim(
                    &service(spec),
                    &held.iter().copied().collect(),
                    1,
                    &[],
                    "default/a",
                    0,
                )
                .map(|claims| claims.iter().map(|c| (c.index, c.port)).collect::<Vec<_>>())
        };
        let two = serde_json::json!([{"port": 80}, {"port": 443}]);
        assert_eq!(
            claimed(serde_json::json!({"type": "NodePort", "ports": two}), &[]),
            Ok(vec![(0, 30086), (1, 30087)])
        );
        assert_eq!(
            claimed(
                serde_json::json!({"type": "NodePort", "ports": two}),
                &[30086]
            ),
            Ok(vec![(0, 30087), (1, 30088)])
        );
        assert_eq!(
            claimed(
                serde_json::json!({"type": "LoadBalancer", "ports": two}),
                &[]
            ),
            Ok(vec![(0, 30086), (1, 30087)])
        );
        for quiet in [
            serde_json::json!({"type": "ClusterIP", "ports": two}),
            serde_json::json!({"type": "LoadBalancer", "allocateLoadBalancerNodePorts": false, "ports": two}),
        ] {
            assert_eq!(claimed(quiet, &[]), Ok(vec![]));
        }
        let asked =
            serde_json::json!({"type": "NodePort", "ports": [{"port": 80, "nodePort": 30005}]});
        assert_eq!(claimed(asked.clone(), &[]), Ok(vec![(0, 30005)]));
        assert_eq!(
            claimed(asked, &[30005]),
            Err((0, 30005, Refused::Allocated))
        );
        let outside = serde_json::json!({"type": "NodePort", "ports": [{"port": 80}, {"port": 81, "nodePort": 80}]});
        assert_eq!(claimed(outside, &[]), Err((1, 80, Refused::NotInRange)));
        // TCP and UDP on one asked node port: one record.
        let both = serde_json::json!({"type": "NodePort", "ports": [
            {"port": 53, "protocol": "TCP", "nodePort": 30053},
            {"port": 53, "protocol": "UDP", "nodePort": 30053}]});
        assert_eq!(claimed(both, &[]), Ok(vec![(0, 30053)]));
        let small = NodePorts::new(30000, 30001, "/registry");
        let full = small.claim(
            &service(serde_json::json!({"type": "NodePort", "ports": [{"port": 1}, {"port": 2}, {"port": 3}]})),
            &HashSet::new(),
            1,
            &[],
            "default/a",
            0,
        );
        assert_eq!(full.unwrap_err(), (2, 0, Refused::Full));
        let held = held_ports(
            [service(serde_json::json!({"ports": [{"nodePort": 30001}, {"port": 1}], "healthCheckNodePort": 30002}))]
                .iter(),
        );
        assert_eq!(held, [30001, 30002].into_iter().collect());
    }

    /// Goal: what a Service asks for, and the addresses Services hold.
    #[test]
    fn services_ask_and_hold() {
        let service = |spec: Value| serde_json::json!({"spec": spec});
        assert_eq!(wanted(&service(serde_json::json!({}))), Wanted::Any);
        assert_eq!(
            wanted(&service(serde_json::json!({"clusterIP": ""}))),
            Wanted::Any
        );
        assert_eq!(
            wanted(&service(serde_json::json!({"clusterIP": "None"}))),
            Wanted::Nothing
        );
        assert_eq!(
            wanted(&service(
                serde_json::json!({"type": "ExternalName", "externalName": "x"})
            )),
            Wanted::Nothing
        );
        assert_eq!(
            wanted(&service(serde_json::json!({"clusterIP": "10.0.0.9"}))),
            Wanted::This("10.0.0.9".parse().unwrap())
        );
        assert_eq!(
            wanted(&service(serde_json::json!({"clusterIP": "ten"}))),
            Wanted::Invalid("ten".to_owned())
        );
        let services = [
            service(serde_json::json!({"clusterIP": "10.0.0.1", "clusterIPs": ["10.0.0.1"]})),
            service(serde_json::json!({"clusterIP": "None"})),
            service(serde_json::json!({"clusterIP": "10.0.0.30"})),
        ];
        assert_eq!(held(services.iter()), set(&["10.0.0.1", "10.0.0.30"]));
    }
}

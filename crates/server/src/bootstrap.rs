//! The objects kube-apiserver creates for itself at start, created in the store when missing.
//!
//! ## Guarantees
//! - Each object is written only where its key is absent (one compare-and-put per object), so
//!   a restart, or several instances sharing one etcd, never overwrites what is stored: a
//!   Service the user edited stays as edited.
//! - The objects are those of kube-apiserver's own start-up, with its names, labels and
//!   annotations:
//!   - the namespaces `default`, `kube-system`, `kube-public` and `kube-node-lease` (its
//!     system-namespaces controller);
//!   - the `kubernetes` ServiceCIDR (`spec.cidrs`: `--service-cluster-ip-range`, `Ready`), as
//!     its kubernetes-service-cidr-controller creates it;
//!   - the `default/kubernetes` Service (ClusterIP the first address of
//!     `--service-cluster-ip-range`, port `https` 443 to the server's port), with its
//!     Endpoints and EndpointSlice naming the server's address (its kubernetes-service
//!     controller), and the IPAddress of its ClusterIP as its allocator writes it
//!     (`crate::source::service_ips`; written after the Service, so a store written before
//!     IPAddresses gets it at the next start);
//!   - their `default` ServiceAccounts (its serviceaccounts controller's, which
//!     `controllers::namespaces` also is while serving);
//!   - the `cluster-admin` ClusterRole and its ClusterRoleBinding to the group
//!     `system:masters` (from its bootstrap RBAC policy; the other bootstrap roles are not
//!     created);
//!   - the PriorityClasses `system-node-critical` (2000001000) and `system-cluster-critical`
//!     (2000000000) with kube's descriptions (its scheduling REST storage's post-start hook);
//!   - the APIServices of the group/versions it serves (kube-aggregator's `autoregister`,
//!     `controllers::apiservices::built_in`), with the `Available` condition its local
//!     availability controller writes, stamped with the start (the controller then keeps
//!     them, and those of CRDs, while serving);
//!   - API Priority and Fairness' configuration (k8s.io/apiserver's
//!     `flowcontrol/bootstrap/default.go`): the mandatory PriorityLevelConfigurations and
//!     FlowSchemas `exempt` and `catch-all` and the suggested ones (`system`, `node-high`,
//!     `leader-election`, `workload-high`, `workload-low`, `global-default`; `probes`,
//!     `system-nodes`, ..., `service-accounts`, `global-default`), annotated
//!     `apf.kubernetes.io/autoupdate-spec: "true"` as its config-producer writes them; those
//!     that exist are then revised, and the unwanted ones deleted, by kube's ensurer rules
//!     ([`crate::limits::apf::bootstrap`]).
//! - Each address of a configured range that a stored Service holds without an IPAddress (a
//!   store written before IPAddresses) gets the allocator's IPAddress at start, as
//!   kube-apiserver's IPAddress repair loop creates it ([`repair_ip_addresses`]; best effort,
//!   written where absent and while the Service is as read).
//! - Every object is stored as kube-apiserver stores it after defaulting: the defaults of its
//!   kind change none of them (a test checks), and the kinds that keep `metadata.generation`
//!   have generation 1.
//! - While serving, what kube-apiserver keeps is created again when deleted
//!   ([`kept`], by `controllers::keeper`): the `kubernetes` Service (with its IPAddress),
//!   Endpoints and EndpointSlice (kube's kubernetes-service controller reconciles them every
//!   10 s), the
//!   `kubernetes` ServiceCIDR (its kubernetes-service-cidr-controller, every 10 s too) and the
//!   flow-control configuration, mandatory and suggested (its config-producer, which also
//!   revises them while serving: [`crate::limits::apf::bootstrap`]). The rest comes back at the next
//!   start, as kube-apiserver's RBAC bootstrap does; the system PriorityClasses may not be
//!   deleted, and the system namespaces neither.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use serde_json::{Value, json};
use watchkeeper_api::{ResourceDef, builtin_resources};
use watchkeeper_store::{AnyStore, Compare, Store, TxnOp, TxnRequest};

use crate::StartError;
use crate::config::IpRange;

/// The address the server advertises in the `kubernetes` Endpoints: its listening address,
/// or the loopback address of the same family when it listens on every address (kube-apiserver
/// would pick an interface's address; watchkeeper names the one it surely answers on).
#[must_use]
pub fn advertised(listening: SocketAddr) -> SocketAddr {
    let ip = match listening.ip() {
        IpAddr::V4(v4) if v4.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(v6) if v6.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    SocketAddr::new(ip, listening.port())
}

/// One object to create: its resource, namespace (empty when cluster-scoped) and body.
struct Seed {
    plural: &'static str,
    group: &'static str,
    namespace: &'static str,
    body: Value,
}

impl Seed {
    fn name(&self) -> &str {
        self.body["metadata"]["name"].as_str().unwrap_or_default()
    }
}

/// The objects kube-apiserver creates at start (see the module docs), stamped `now` (RFC 3339)
/// with fresh uids.
fn seeds(
    ranges: &[IpRange],
    server: SocketAddr,
    apiservices: &BTreeMap<String, Value>,
    now: &str,
) -> Vec<Seed> {
    let service_ip = ranges[0].first();
    let cidrs: Vec<String> = ranges.iter().map(ToString::to_string).collect();
    let family = if service_ip.is_ipv4() { "IPv4" } else { "IPv6" };
    let address_type = if server.is_ipv4() { "IPv4" } else { "IPv6" };
    let port = server.port();
    let server_ip = server.ip().to_string();
    let rbac_defaults = |name: &str| {
        json!({
            "name": name,
            "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
            "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
        })
    };
    let mut seeds: Vec<Seed> = ["default", "kube-system", "kube-public", "kube-node-lease"]
        .into_iter()
        .map(|name| Seed {
            plural: "namespaces",
            group: "",
            namespace: "",
            body: json!({
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}},
                "spec": {"finalizers": ["kubernetes"]},
                "status": {"phase": "Active"},
            }),
        })
        .collect();
    // Their `default` ServiceAccounts (kube's serviceaccounts controller gives every active
    // namespace one; seeded here so a start writes nothing behind its readiness).
    seeds.extend(
        ["default", "kube-system", "kube-public", "kube-node-lease"].map(|namespace| Seed {
            plural: "serviceaccounts",
            group: "",
            namespace,
            body: json!({"apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"name": "default"}}),
        }),
    );
    seeds.extend([
        Seed {
            plural: "services",
            group: "",
            namespace: "default",
            body: json!({
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {
                    "name": "kubernetes",
                    "labels": {"component": "apiserver", "provider": "kubernetes"},
                },
                "spec": {
                    "ports": [{"name": "https", "protocol": "TCP", "port": 443, "targetPort": port}],
                    "clusterIP": service_ip.to_string(),
                    "clusterIPs": [service_ip.to_string()],
                    "type": "ClusterIP",
                    "sessionAffinity": "None",
                    "ipFamilies": [family],
                    "ipFamilyPolicy": "SingleStack",
                    "internalTrafficPolicy": "Cluster",
                },
                "status": {"loadBalancer": {}},
            }),
        },
        // Its address's IPAddress, as kube-apiserver's allocator writes it (its uid and
        // creation time are stamped below), after the Service: until it is written the
        // cached Service holds the address.
        Seed {
            plural: "ipaddresses",
            group: "networking.k8s.io",
            namespace: "",
            body: crate::source::service_ips::ip_address(
                service_ip,
                ("default", "kubernetes"),
                "",
                now,
            ),
        },
        Seed {
            plural: "endpoints",
            group: "",
            namespace: "default",
            body: json!({
                "apiVersion": "v1",
                "kind": "Endpoints",
                "metadata": {
                    "name": "kubernetes",
                    "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"},
                },
                "subsets": [{
                    "addresses": [{"ip": server_ip}],
                    "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
                }],
            }),
        },
        Seed {
            plural: "endpointslices",
            group: "discovery.k8s.io",
            namespace: "default",
            body: json!({
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": {
                    "name": "kubernetes",
                    "labels": {"kubernetes.io/service-name": "kubernetes"},
                },
                "addressType": address_type,
                "endpoints": [{"addresses": [server_ip], "conditions": {"ready": true}}],
                "ports": [{"name": "https", "protocol": "TCP", "port": port}],
            }),
        },
        // kube-apiserver's default ServiceCIDR (its `kubernetes-service-cidr-controller`
        // creates it from `--service-cluster-ip-range` and applies `Ready`, without a reason).
        Seed {
            plural: "servicecidrs",
            group: "networking.k8s.io",
            namespace: "",
            body: json!({
                "apiVersion": "networking.k8s.io/v1",
                "kind": "ServiceCIDR",
                "metadata": {"name": "kubernetes"},
                "spec": {"cidrs": cidrs},
                "status": {"conditions": [{
                    "type": "Ready",
                    "status": "True",
                    "lastTransitionTime": now,
                    "reason": "",
                    "message": "Kubernetes default Service CIDR is ready",
                }]},
            }),
        },
        Seed {
            plural: "clusterroles",
            group: "rbac.authorization.k8s.io",
            namespace: "",
            body: json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": rbac_defaults("cluster-admin"),
                "rules": [
                    {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]},
                    {"verbs": ["*"], "nonResourceURLs": ["*"]},
                ],
            }),
        },
        Seed {
            plural: "clusterrolebindings",
            group: "rbac.authorization.k8s.io",
            namespace: "",
            body: json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": rbac_defaults("cluster-admin"),
                "subjects": [{
                    "kind": "Group",
                    "apiGroup": "rbac.authorization.k8s.io",
                    "name": "system:masters",
                }],
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": "cluster-admin",
                },
            }),
        },
    ]);
    seeds.extend(system_priority_classes());
    seeds.extend(flow_control_configuration(now));
    seeds.extend(apiservices.iter().map(|(name, spec)| Seed {
        plural: "apiservices",
        group: "apiregistration.k8s.io",
        namespace: "",
        body: crate::controllers::apiservices::started(name, spec, now),
    }));
    for seed in &mut seeds {
        let keeps_generation = seed.group == "flowcontrol.apiserver.k8s.io";
        let metadata = &mut seed.body["metadata"];
        metadata["uid"] = json!(uuid::Uuid::new_v4().to_string());
        metadata["creationTimestamp"] = json!(now);
        if keeps_generation {
            metadata["generation"] = json!(1);
        }
        if !seed.namespace.is_empty() {
            metadata["namespace"] = json!(seed.namespace);
        }
    }
    seeds
}

/// kube's `SystemCriticalPriorities` (`pkg/apis/scheduling`), with their defaulted
/// `preemptionPolicy`.
fn system_priority_classes() -> [Seed; 2] {
    watchkeeper_api::kinds::SYSTEM_PRIORITY_CLASSES.map(|(name, value, description)| Seed {
        plural: "priorityclasses",
        group: "scheduling.k8s.io",
        namespace: "",
        body: json!({
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": value,
            "description": description,
            "preemptionPolicy": "PreemptLowerPriority",
        }),
    })
}

/// API Priority and Fairness' configuration, mandatory and suggested
/// ([`crate::limits::apf::bootstrap::configuration`]), as defaulted and stored; the
/// FlowSchemas with the `Dangling` condition `controllers::flowschema_status` would write
/// (`False`: their levels are created with them), stamped `now`, so that a start writes no
/// status behind its readiness.
fn flow_control_configuration(now: &str) -> Vec<Seed> {
    crate::limits::apf::bootstrap::configuration()
        .into_iter()
        .map(|wanted| {
            let schema = wanted.plural == "flowschemas";
            let mut body = json!({
                "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
                "kind": if schema { "FlowSchema" } else { "PriorityLevelConfiguration" },
                "metadata": {"name": wanted.name,
                    "annotations": {crate::limits::apf::bootstrap::AUTOUPDATE_SPEC: "true"}},
                "spec": wanted.spec,
            });
            if schema {
                let level = body["spec"]["priorityLevelConfiguration"]["name"]
                    .as_str()
                    .unwrap_or_default();
                let (status, reason, message) =
                    crate::controllers::flowschema_status::dangling(level, true);
                body["status"] = json!({"conditions": [{"type": "Dangling", "status": status,
                    "lastTransitionTime": now, "reason": reason, "message": message}]});
            }
            Seed {
                plural: wanted.plural,
                group: "flowcontrol.apiserver.k8s.io",
                namespace: "",
                body,
            }
        })
        .collect()
}

/// Whether kube-apiserver creates the object (`group`, `plural`, `namespace`, `name`) again
/// while serving when it is deleted (see the module docs).
#[must_use]
pub fn kept(group: &str, plural: &str, namespace: &str, name: &str) -> bool {
    match (group, plural) {
        ("", "services" | "endpoints") | ("discovery.k8s.io", "endpointslices") => {
            namespace == "default" && name == "kubernetes"
        }
        ("networking.k8s.io", "servicecidrs") => name == "kubernetes",
        ("flowcontrol.apiserver.k8s.io", plural) => {
            crate::limits::apf::bootstrap::is_configured(plural, name)
        }
        _ => false,
    }
}

/// Creates the objects of [`seeds`] that are missing under `prefix`.
///
/// # Errors
/// The store refuses a write.
pub async fn bootstrap(
    store: &AnyStore,
    prefix: &str,
    ranges: &[IpRange],
    server: SocketAddr,
    apiservices: &BTreeMap<String, Value>,
) -> Result<(), StartError> {
    ensure(store, prefix, (ranges, server, apiservices), |_| true).await?;
    repair_ip_addresses(store, prefix, ranges).await;
    crate::limits::apf::bootstrap::ensure(store, prefix).await
}

/// Services read per page by [`repair_ip_addresses`].
const REPAIR_PAGE: usize = 500;

/// kube-apiserver's IPAddress repair loop's pass over Services (`repairip.go`'s
/// `syncService`), once at start: each address of a configured range that a stored Service
/// holds without an IPAddress (a store written by a version of this server from before
/// IPAddresses) gets the allocator's IPAddress, written where it is absent and the Service is
/// as read. Best effort: a failed read or write is logged and leaves the address held by its
/// cached Service, as before (see `crate::source::service_ips`); it never stops the start.
async fn repair_ip_addresses(store: &AnyStore, prefix: &str, ranges: &[IpRange]) {
    use crate::source::service_ips;
    use watchkeeper_store::{RangeRequest, StartKey};
    let allocators = service_ips::Allocators::new(ranges, (0, 0), prefix);
    let defs = builtin_resources();
    let Some(services) = defs
        .iter()
        .find(|d| d.group.is_empty() && d.plural == "services")
    else {
        return;
    };
    let services_prefix = bytes::Bytes::from(format!("{prefix}/{}/", services.storage_prefix()));
    let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    let mut start = None;
    loop {
        let mut request = RangeRequest::prefix(services_prefix.clone()).with_limit(REPAIR_PAGE);
        if let Some(last) = start.take() {
            request = request.starting(StartKey::Exclusive(last));
        }
        let page = match store.range(request).await {
            Ok(page) => page,
            Err(error) => {
                tracing::warn!(%error, "reading Services to give their addresses IPAddresses");
                return;
            }
        };
        for kv in &page.kvs {
            let Ok(service) = serde_json::from_slice::<Value>(&kv.value) else {
                continue;
            };
            let text = |path: &str| service.pointer(path).and_then(Value::as_str).unwrap_or("");
            let owner = (text("/metadata/namespace"), text("/metadata/name"));
            for ip in service_ips::held(std::iter::once(&service)) {
                let in_range = allocators
                    .ips(service_ips::Family::of(ip))
                    .is_some_and(|range| range.contains(ip));
                if !in_range {
                    continue;
                }
                let key = allocators.ip_address_key(ip);
                let uid = uuid::Uuid::new_v4().to_string();
                let object = service_ips::ip_address(ip, owner, &uid, &now);
                let request = TxnRequest::default()
                    .when(Compare::Absent { key: key.clone() })
                    .when(Compare::ModRevision {
                        key: kv.key.clone(),
                        revision: kv.mod_revision,
                    })
                    .then(TxnOp::Put {
                        key,
                        value: bytes::Bytes::from(object.to_string()),
                    });
                if let Err(error) = store.txn(request).await {
                    tracing::warn!(%error, %ip, "writing the IPAddress of a Service's address");
                }
            }
        }
        match page.kvs.last() {
            Some(last) if page.more => start = Some(last.key.clone()),
            _ => return,
        }
    }
}

/// Creates the objects kube-apiserver keeps ([`kept`]) that are missing under `prefix`.
///
/// # Errors
/// The store refuses a write.
pub async fn restore_kept(
    store: &AnyStore,
    prefix: &str,
    ranges: &[IpRange],
    server: SocketAddr,
) -> Result<(), StartError> {
    ensure(store, prefix, (ranges, server, &BTreeMap::new()), |seed| {
        kept(seed.group, seed.plural, seed.namespace, seed.name())
            // The `kubernetes` Service's IPAddress, created again with the Service (deleting
            // the Service deleted it).
            || (seed.group, seed.plural) == ("networking.k8s.io", "ipaddresses")
    })
    .await?;
    crate::limits::apf::bootstrap::ensure(store, prefix).await
}

/// Creates the objects of [`seeds`] that `wanted` picks and are missing under `prefix`.
async fn ensure(
    store: &AnyStore,
    prefix: &str,
    (ranges, server, apiservices): (&[IpRange], SocketAddr, &BTreeMap<String, Value>),
    wanted: impl Fn(&Seed) -> bool,
) -> Result<(), StartError> {
    let defs = builtin_resources();
    let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    for seed in seeds(ranges, server, apiservices, &now)
        .into_iter()
        .filter(|seed| wanted(seed))
    {
        let def: &ResourceDef = defs
            .iter()
            .find(|d| d.plural == seed.plural && d.group == seed.group)
            .expect("every bootstrap object is of a built-in resource");
        let mut key = format!("{prefix}/{}/", def.storage_prefix());
        if !seed.namespace.is_empty() {
            key.push_str(seed.namespace);
            key.push('/');
        }
        key.push_str(seed.name());
        let key = bytes::Bytes::from(key);
        let value = bytes::Bytes::from(seed.body.to_string());
        store
            .txn(
                // Exempt from the store quota, so a full store can still be restarted: a
                // fixed few KiB, written only where absent (see `watchkeeper_store::quota`).
                TxnRequest::default()
                    .when(Compare::Absent { key: key.clone() })
                    .then(TxnOp::Put { key, value })
                    .exempt_from_quota(),
            )
            .await
            .map_err(|source| StartError::Bootstrap {
                object: format!("{} {}", def.kind, seed.name()),
                source,
            })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kubernetes_service_points_at_the_server() {
        let server = advertised("0.0.0.0:6443".parse().unwrap());
        assert_eq!(server.to_string(), "127.0.0.1:6443");
        let range = |text: &str| vec![IpRange::parse(text).unwrap()];
        let v4 = seeds(
            &range("10.0.0.0/24"),
            server,
            &BTreeMap::new(),
            "2024-01-01T00:00:00Z",
        );
        let service = v4.iter().find(|s| s.plural == "services").unwrap();
        assert_eq!(service.body["spec"]["clusterIP"], "10.0.0.1");
        assert_eq!(service.body["spec"]["ports"][0]["targetPort"], 6443);
        assert_eq!(service.body["metadata"]["namespace"], "default");
        let endpoints = v4.iter().find(|s| s.plural == "endpoints").unwrap();
        assert_eq!(
            endpoints.body["subsets"][0]["addresses"][0]["ip"],
            "127.0.0.1"
        );
        let role = v4.iter().find(|s| s.plural == "clusterroles").unwrap();
        assert_eq!(role.name(), "cluster-admin");
        assert!(role.body["metadata"].get("namespace").is_none());
        let cidr = v4.iter().find(|s| s.plural == "servicecidrs").unwrap();
        assert_eq!(cidr.name(), "kubernetes");
        assert_eq!(cidr.body["spec"]["cidrs"], json!(["10.0.0.0/24"]));
        let v6 = seeds(
            &range("fd00::/108"),
            server,
            &BTreeMap::new(),
            "2024-01-01T00:00:00Z",
        );
        let service = v6.iter().find(|s| s.plural == "services").unwrap();
        assert_eq!(service.body["spec"]["ipFamilies"], json!(["IPv6"]));
        assert_eq!(service.body["spec"]["clusterIP"], "fd00::1");
    }

    #[test]
    fn kube_apiserver_priority_classes_flow_control_objects_and_apiservices() {
        let seeds = seeds(
            &[IpRange::parse("10.0.0.0/24").unwrap()],
            "127.0.0.1:6443".parse().unwrap(),
            &crate::controllers::apiservices::built_in(&builtin_resources()),
            "2024-01-01T00:00:00Z",
        );
        let find = |plural: &str, name: &str| {
            seeds
                .iter()
                .find(|s| s.plural == plural && s.name() == name)
                .unwrap_or_else(|| panic!("no {plural} {name}"))
        };
        // As the controller leaves them after its first look: nothing to write after start.
        let events = find("apiservices", "v1.events.k8s.io");
        assert_eq!(
            events.body["metadata"]["labels"],
            json!({"kube-aggregator.kubernetes.io/automanaged": "onstart"})
        );
        assert_eq!(events.body["spec"]["groupPriorityMinimum"], 17750);
        assert_eq!(
            events.body["status"]["conditions"][0]["reason"], "Local",
            "{}",
            events.body
        );
        assert!(
            find("apiservices", "v1.").body["spec"]
                .get("group")
                .is_none()
        );
        assert!(
            seeds
                .iter()
                .all(|s| s.name() != "v1.apiregistration.k8s.io")
        );
        let node = find("priorityclasses", "system-node-critical");
        assert_eq!(node.body["value"], 2_000_001_000);
        assert_eq!(
            node.body["description"],
            "Used for system critical pods that must not be moved from their current node."
        );
        assert_eq!(
            find("priorityclasses", "system-cluster-critical").body["value"],
            2_000_000_000
        );
        let levels = [
            "exempt",
            "catch-all",
            "system",
            "node-high",
            "leader-election",
            "workload-high",
            "workload-low",
            "global-default",
        ];
        let schemas = [
            "exempt",
            "probes",
            "system-leader-election",
            "endpoint-controller",
            "workload-leader-election",
            "system-node-high",
            "system-nodes",
            "kube-controller-manager",
            "kube-scheduler",
            "kube-system-service-accounts",
            "service-accounts",
            "global-default",
            "catch-all",
        ];
        for (plural, names) in [
            ("flowschemas", &schemas[..]),
            ("prioritylevelconfigurations", &levels[..]),
        ] {
            assert_eq!(
                seeds.iter().filter(|s| s.plural == plural).count(),
                names.len()
            );
            for name in names {
                let seed = find(plural, name);
                assert_eq!(
                    seed.body["metadata"]["annotations"]["apf.kubernetes.io/autoupdate-spec"],
                    "true"
                );
                assert_eq!(seed.body["metadata"]["generation"], 1);
            }
        }
        let catch_all = find("flowschemas", "catch-all");
        assert_eq!(catch_all.body["spec"]["matchingPrecedence"], 10_000);
        assert_eq!(
            catch_all.body["spec"]["distinguisherMethod"]["type"],
            "ByUser"
        );
        assert_eq!(
            catch_all.body["spec"]["rules"][0]["subjects"][1]["group"]["name"],
            "system:authenticated"
        );
        assert!(
            find("flowschemas", "exempt").body["spec"]
                .get("distinguisherMethod")
                .is_none()
        );
        assert_eq!(
            find("prioritylevelconfigurations", "catch-all").body["spec"]["limited"]["limitResponse"],
            json!({"type": "Reject"})
        );
        // Stored as kube-apiserver stores them: defaulting and validation change and refuse
        // nothing.
        let defs = builtin_resources();
        for seed in &seeds {
            let def = defs
                .iter()
                .find(|d| d.plural == seed.plural && d.group == seed.group)
                .unwrap();
            if matches!(
                seed.group,
                "scheduling.k8s.io" | "flowcontrol.apiserver.k8s.io"
            ) {
                let mut defaulted = seed.body.clone();
                watchkeeper_api::defaults::apply_defaults(def, &mut defaulted);
                assert_eq!(defaulted, seed.body, "{}", seed.name());
                watchkeeper_api::kinds::validate(def, &seed.body, None).unwrap();
                assert_eq!(
                    watchkeeper_api::defaults::keeps_generation(def),
                    seed.body["metadata"].get("generation").is_some(),
                    "{}",
                    seed.name()
                );
            }
        }
    }
}

//! ResourceQuota for object counts, as kube-apiserver's `ResourceQuota` admission plugin and
//! kube-controller-manager's resource quota controller do it between them (this server has no
//! controller manager, so it does the controller's part at write time).
//!
//! ## Guarantees
//! - **Counts are enforced.** A create of an object counted by a quota in its namespace
//!   (`count/<resource>[.<group>]`, and for core resources the names `pods`, `services`,
//!   `secrets`, `configmaps`, `persistentvolumeclaims`, `replicationcontrollers`,
//!   `resourcequotas`; for Services also `services.loadbalancers` and `services.nodeports`,
//!   counted as kube's service evaluator does: 1 per LoadBalancer, and per NodePort or
//!   LoadBalancer Service its number of ports — only those with a node port when a load
//!   balancer opts out of them) that would take the usage above the quota's `hard` value is
//!   refused with kube-apiserver's 403: `configmaps "c3" is forbidden: exceeded quota: q,
//!   requested: count/configmaps=1, used: count/configmaps=2, limited: count/configmaps=2`. A
//!   pod counts while it is not `Succeeded` or `Failed`, as kube's pod evaluator has it.
//! - **Exact under concurrency.** The count is taken from the caches once they are proven
//!   fresh, and the create's transaction also writes the quota's new `status.used` under a
//!   compare of the quota's revision: two creates that counted the same state cannot both
//!   commit (kube-apiserver serialises them the same way, through the quota's status update);
//!   the loser counts again.
//! - **Usage is shown.** Creating or updating a quota fills `status.hard` (from `spec.hard`)
//!   and `status.used` (the counts now), as the controller does; every counted create and
//!   delete writes the new `status.used` in its own transaction, so `kubectl describe quota`
//!   shows the usage at once.
//! - **Not enforced** (the quota is stored and shown as written): compute and storage
//!   resources (`requests.cpu`, `limits.memory`, `requests.storage`, ...), quotas with
//!   `scopes` or a `scopeSelector` (they select pods by properties this server does not
//!   evaluate), and usage an update changes (a Service turned into a LoadBalancer): kube
//!   checks updates too; here they are counted at the next create or delete.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

/// The quota names that count an object of `plural` in `group` (see the module docs).
#[must_use]
pub fn counted_names(group: &str, plural: &str) -> Vec<String> {
    const LEGACY: [&str; 7] = [
        "pods",
        "services",
        "secrets",
        "configmaps",
        "persistentvolumeclaims",
        "replicationcontrollers",
        "resourcequotas",
    ];
    let mut names = Vec::with_capacity(2);
    if group.is_empty() {
        names.push(format!("count/{plural}"));
        if LEGACY.contains(&plural) {
            names.push(plural.to_owned());
        }
        if plural == "services" {
            names.extend(SERVICE_USAGES.map(str::to_owned));
        }
    } else {
        names.push(format!("count/{plural}.{group}"));
    }
    names
}

/// The Service usages beside its counts.
const SERVICE_USAGES: [&str; 2] = ["services.loadbalancers", "services.nodeports"];

/// How much `object` uses of the quota resource `name` (one of [`counted_names`] for its
/// resource): 1 for an object count; for a Service, 1 load balancer if it is one, and as node
/// ports the number of its ports when it is a NodePort or LoadBalancer Service (only those
/// with a `nodePort` for a LoadBalancer with `allocateLoadBalancerNodePorts: false`), as
/// kube's service evaluator counts them.
#[must_use]
pub fn usage(name: &str, object: &Value) -> i64 {
    let kind = object.pointer("/spec/type").and_then(Value::as_str);
    let ports = || {
        object
            .pointer("/spec/ports")
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice)
    };
    let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
    match name {
        "services.loadbalancers" => i64::from(kind == Some("LoadBalancer")),
        "services.nodeports" => match kind {
            Some("NodePort") => count(ports().len()),
            Some("LoadBalancer")
                if object.pointer("/spec/allocateLoadBalancerNodePorts")
                    == Some(&Value::Bool(false)) =>
            {
                count(
                    ports()
                        .iter()
                        .filter(|port| {
                            port.get("nodePort").and_then(Value::as_i64).unwrap_or(0) != 0
                        })
                        .count(),
                )
            }
            Some("LoadBalancer") => count(ports().len()),
            _ => 0,
        },
        _ => 1,
    }
}

/// The resource (group, plural) a quota name counts, if it is a usage this module enforces.
#[must_use]
pub fn counted_resource(name: &str) -> Option<(String, String)> {
    if let Some(resource) = name.strip_prefix("count/") {
        return Some(match resource.split_once('.') {
            Some((plural, group)) => (group.to_owned(), plural.to_owned()),
            None => (String::new(), resource.to_owned()),
        });
    }
    if SERVICE_USAGES.contains(&name) {
        return Some((String::new(), "services".to_owned()));
    }
    counted_names("", name)
        .iter()
        .any(|legacy| legacy == name)
        .then(|| (String::new(), name.to_owned()))
}

/// Whether `object` of (`group`, `plural`) counts: every object but a pod that has finished.
#[must_use]
pub fn counts(group: &str, plural: &str, object: &Value) -> bool {
    if group.is_empty() && plural == "pods" {
        let phase = object.pointer("/status/phase").and_then(Value::as_str);
        return !matches!(phase, Some("Succeeded" | "Failed"));
    }
    true
}

/// A count as a Kubernetes quantity: an integer with an optional decimal (`k`, `M`, `G`, `T`,
/// `P`, `E`) or binary (`Ki` ... `Ei`) suffix. `None` for anything else (a fraction, a
/// milli-count): such a limit is not enforced.
#[must_use]
pub fn parse_count(quantity: &str) -> Option<i64> {
    let quantity = quantity.trim();
    let digits = quantity
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(quantity.len());
    let (number, suffix) = quantity.split_at(digits);
    let number: i64 = number.parse().ok()?;
    let factor: i64 = match suffix {
        "" => 1,
        "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        "P" => 1_000_000_000_000_000,
        "E" => 1_000_000_000_000_000_000,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        "Pi" => 1 << 50,
        "Ei" => 1 << 60,
        _ => return None,
    };
    number.checked_mul(factor)
}

/// Whether `quota` (a ResourceQuota body) has scopes: it then selects pods by properties this
/// server does not evaluate, and is not enforced.
#[must_use]
pub fn is_scoped(quota: &Value) -> bool {
    quota
        .pointer("/spec/scopes")
        .and_then(Value::as_array)
        .is_some_and(|scopes| !scopes.is_empty())
        || quota
            .pointer("/spec/scopeSelector")
            .is_some_and(|selector| !selector.is_null())
}

/// The limits of `quota` among `names`, with the hard value as written: `(name, hard, as
/// written)`. Empty for a scoped quota or one that limits none of them.
#[must_use]
pub fn limits(quota: &Value, names: &[String]) -> Vec<(String, i64, String)> {
    if is_scoped(quota) {
        return Vec::new();
    }
    let Some(hard) = quota.pointer("/spec/hard").and_then(Value::as_object) else {
        return Vec::new();
    };
    names
        .iter()
        .filter_map(|name| {
            let written = hard.get(name)?.as_str()?;
            Some((name.clone(), parse_count(written)?, written.to_owned()))
        })
        .collect()
}

/// kube-apiserver's refusal text when adding `requested` (by name) to `used` (by name) passes
/// a limit of the quota `quota_name` (`limits` as [`limits`] gives them); `None` when it fits.
/// Only names the request uses can fail.
#[must_use]
pub fn exceeded(
    quota_name: &str,
    limits: &[(String, i64, String)],
    used: &BTreeMap<String, i64>,
    requested: &BTreeMap<String, i64>,
) -> Option<String> {
    let amount = |map: &BTreeMap<String, i64>, name: &str| map.get(name).copied().unwrap_or(0);
    let mut failed: Vec<&(String, i64, String)> = limits
        .iter()
        .filter(|(name, hard, _)| {
            let asked = amount(requested, name);
            asked > 0 && amount(used, name).saturating_add(asked) > *hard
        })
        .collect();
    if failed.is_empty() {
        return None;
    }
    failed.sort_by(|a, b| a.0.cmp(&b.0));
    let list = |value: &dyn Fn(&(String, i64, String)) -> String| {
        failed
            .iter()
            .map(|limit| format!("{}={}", limit.0, value(limit)))
            .collect::<Vec<_>>()
            .join(",")
    };
    Some(format!(
        "exceeded quota: {quota_name}, requested: {}, used: {}, limited: {}",
        list(&|limit| amount(requested, &limit.0).to_string()),
        list(&|limit| amount(used, &limit.0).to_string()),
        list(&|limit| limit.2.clone()),
    ))
}

/// `quota` with `status.hard` from `spec.hard` and `status.used` set for `used` (other
/// `status.used` entries kept only for names still limited), as the controller writes them.
#[must_use]
pub fn with_status(mut quota: Value, used: &BTreeMap<String, i64>) -> Value {
    let hard = quota
        .pointer("/spec/hard")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let old_used = quota
        .pointer("/status/used")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut new_used = Map::new();
    for name in hard.keys() {
        if let Some(count) = used.get(name) {
            new_used.insert(name.clone(), Value::String(count.to_string()));
        } else if let Some(value) = old_used.get(name) {
            new_used.insert(name.clone(), value.clone());
        }
    }
    if let Some(object) = quota.as_object_mut() {
        let mut status = Map::new();
        status.insert("hard".to_owned(), Value::Object(hard));
        status.insert("used".to_owned(), Value::Object(new_used));
        object.insert("status".to_owned(), Value::Object(status));
    }
    quota
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_and_resources_both_ways() {
        assert_eq!(
            counted_names("", "configmaps"),
            ["count/configmaps", "configmaps"]
        );
        assert_eq!(counted_names("", "events"), ["count/events"]);
        assert_eq!(
            counted_names("apps", "deployments"),
            ["count/deployments.apps"]
        );
        assert_eq!(
            counted_resource("count/deployments.apps"),
            Some(("apps".to_owned(), "deployments".to_owned()))
        );
        assert_eq!(
            counted_resource("secrets"),
            Some((String::new(), "secrets".to_owned()))
        );
        assert_eq!(counted_resource("requests.cpu"), None);
        assert_eq!(
            counted_resource("services.nodeports"),
            Some((String::new(), "services".to_owned()))
        );
        assert_eq!(counted_resource("services.other"), None);
        assert_eq!(
            counted_names("", "services"),
            [
                "count/services",
                "services",
                "services.loadbalancers",
                "services.nodeports"
            ]
        );
        let service = |spec: serde_json::Value| json!({"spec": spec});
        let two_ports = json!([{"port": 80}, {"port": 443, "nodePort": 30001}]);
        let lb = service(json!({"type": "LoadBalancer", "ports": two_ports}));
        assert_eq!(usage("services.loadbalancers", &lb), 1);
        assert_eq!(usage("services.nodeports", &lb), 2);
        let lb_without = service(json!({"type": "LoadBalancer", "ports": two_ports,
            "allocateLoadBalancerNodePorts": false}));
        assert_eq!(usage("services.nodeports", &lb_without), 1);
        let node_port = service(json!({"type": "NodePort", "ports": two_ports}));
        assert_eq!(usage("services.loadbalancers", &node_port), 0);
        assert_eq!(usage("services.nodeports", &node_port), 2);
        let plain = service(json!({"ports": two_ports}));
        assert_eq!(usage("services.nodeports", &plain), 0);
        assert_eq!(usage("count/services", &plain), 1);
        assert!(counts("", "pods", &json!({"status": {"phase": "Running"}})));
        assert!(!counts(
            "",
            "pods",
            &json!({"status": {"phase": "Succeeded"}})
        ));
        assert!(counts(
            "",
            "configmaps",
            &json!({"status": {"phase": "Failed"}})
        ));
    }

    #[test]
    fn counts_as_quantities() {
        assert_eq!(parse_count("10"), Some(10));
        assert_eq!(parse_count("1k"), Some(1000));
        assert_eq!(parse_count("2Ki"), Some(2048));
        assert_eq!(parse_count("500m"), None);
        assert_eq!(parse_count("1.5"), None);
        assert_eq!(parse_count("x"), None);
        assert_eq!(parse_count("10E"), None, "overflows i64");
    }

    #[test]
    fn the_refusal_in_kube_apiserver_s_words() {
        let quota = json!({"spec": {"hard": {"count/configmaps": "2", "configmaps": "5", "requests.cpu": "1"}}});
        let names = counted_names("", "configmaps");
        let found = limits(&quota, &names);
        assert_eq!(found.len(), 2);
        let at = |n: i64| {
            BTreeMap::from([
                ("count/configmaps".to_owned(), n),
                ("configmaps".to_owned(), n),
            ])
        };
        assert_eq!(exceeded("q", &found, &at(1), &at(1)), None);
        assert_eq!(
            exceeded("q", &found, &at(2), &at(1)).unwrap(),
            "exceeded quota: q, requested: count/configmaps=1, used: count/configmaps=2, limited: count/configmaps=2"
        );
        assert_eq!(
            exceeded("q", &found, &at(5), &at(1)).unwrap(),
            "exceeded quota: q, requested: configmaps=1,count/configmaps=1, used: configmaps=5,count/configmaps=5, limited: configmaps=5,count/configmaps=2"
        );
        // A request that does not use a limited name never fails on it.
        assert_eq!(exceeded("q", &found, &at(9), &at(0)), None);
        let scoped = json!({"spec": {"hard": {"pods": "1"}, "scopes": ["BestEffort"]}});
        assert!(limits(&scoped, &counted_names("", "pods")).is_empty());
    }

    #[test]
    fn status_as_the_controller_writes_it() {
        let quota = json!({"spec": {"hard": {"count/configmaps": "2", "requests.cpu": "1"}},
            "status": {"used": {"requests.cpu": "0", "gone": "3"}}});
        let used = BTreeMap::from([("count/configmaps".to_owned(), 1)]);
        assert_eq!(
            with_status(quota, &used)["status"],
            json!({"hard": {"count/configmaps": "2", "requests.cpu": "1"},
                "used": {"count/configmaps": "1", "requests.cpu": "0"}})
        );
    }
}

//! API Priority and Fairness' bootstrap configuration, as kube-apiserver v1.33's
//! `priority-and-fairness-config-producer` post-start hook keeps it: the mandatory objects
//! and the suggested ones of k8s.io/apiserver's `apis/flowcontrol/bootstrap/default.go`,
//! kept by the rules of kube's `pkg/registry/flowcontrol/ensurer`.
//!
//! ## Guarantees
//! - The configuration ([`configuration`]) is kube's: the mandatory PriorityLevelConfigurations
//!   `exempt` and `catch-all` and FlowSchemas `exempt` and `catch-all`
//!   (`watchkeeper_api::kinds`' fixed specs), and the suggested PriorityLevelConfigurations
//!   `system` (30 shares), `node-high` (40), `leader-election` (10), `workload-high` (40),
//!   `workload-low` (100), `global-default` (20), with kube's `lendablePercent` and queuing,
//!   and FlowSchemas `probes` (2, to `exempt`), `system-leader-election` (100),
//!   `endpoint-controller` (150), `workload-leader-election` (200), `system-node-high` (400),
//!   `system-nodes` (500), `kube-controller-manager` and `kube-scheduler` (800),
//!   `kube-system-service-accounts` (900), `service-accounts` (9000) and `global-default`
//!   (9900), each as stored after defaulting (a test checks that defaulting and validation
//!   change and refuse none).
//! - Created where missing, by every start and while serving ([`crate::bootstrap`]: its seeds
//!   and its keeper), annotated `apf.kubernetes.io/autoupdate-spec: "true"`.
//! - An existing object of the configuration is revised as kube's `ReviseIfNeeded`
//!   ([`revise`]): a mandatory one always gets the configuration's spec and the annotation
//!   `"true"`; a suggested one only while it auto-updates (the annotation parses as Go's
//!   `strconv.ParseBool` true, or, without a readable annotation, its generation is 1), and
//!   its annotation is then written as `"true"`, otherwise as `"false"` (so a user's edit
//!   with the annotation removed sticks). A changed spec increments `metadata.generation`.
//! - A FlowSchema or PriorityLevelConfiguration that is not of the configuration is deleted
//!   only when it carries the annotation with a value parsing true (kube's
//!   `removeUnwantedObjects`: a user's objects, without it or `"false"`, are left alone).
//! - Every write is a compare-and-put (or compare-and-delete) on the revision read: a
//!   concurrent writer wins and the object is looked at again at the next pass.
//! - Runs at every start over a store, and, while serving, whenever the keeper sees a
//!   configuration object change or go (kube's producer looks once a minute).

use serde_json::{Value, json};
use watchkeeper_api::kinds::{mandatory_flow_schema_spec, mandatory_priority_level_spec};
use watchkeeper_api::{ResourceDef, builtin_resources};
use watchkeeper_store::{AnyStore, Compare, RangeRequest, Store, TxnOp, TxnRequest};

use crate::StartError;

/// The annotation by which an object is kept to the configuration.
pub const AUTOUPDATE_SPEC: &str = "apf.kubernetes.io/autoupdate-spec";

/// The flow-control resources.
pub const PRIORITY_LEVELS: &str = "prioritylevelconfigurations";
/// The FlowSchemas' resource.
pub const FLOW_SCHEMAS: &str = "flowschemas";

/// kube's suggested priority levels: name, `nominalConcurrencyShares`, `lendablePercent`,
/// and queuing (`queues`, `handSize`, `queueLengthLimit`).
const SUGGESTED_LEVELS: [(&str, u32, u32, [u32; 3]); 6] = [
    ("system", 30, 33, [64, 6, 50]),
    ("node-high", 40, 25, [64, 6, 50]),
    ("leader-election", 10, 0, [16, 4, 50]),
    ("workload-high", 40, 50, [128, 6, 50]),
    ("workload-low", 100, 90, [128, 6, 50]),
    ("global-default", 20, 50, [128, 6, 50]),
];

/// The names of kube's suggested FlowSchemas, in its order.
pub const SUGGESTED_FLOW_SCHEMAS: [&str; 11] = [
    "system-nodes",
    "system-node-high",
    "probes",
    "system-leader-election",
    "workload-leader-election",
    "endpoint-controller",
    "kube-controller-manager",
    "kube-scheduler",
    "kube-system-service-accounts",
    "service-accounts",
    "global-default",
];

/// The mandatory objects' names (of either resource).
pub const MANDATORY: [&str; 2] = ["exempt", "catch-all"];

/// One object of the configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct Wanted {
    /// `prioritylevelconfigurations` or `flowschemas`.
    pub plural: &'static str,
    /// Its name.
    pub name: &'static str,
    /// Its spec, as stored.
    pub spec: Value,
    /// Whether it is mandatory (kept whatever its annotation says).
    pub mandatory: bool,
}

/// The spec of kube's suggested priority level `name`, as stored; `None` for other names.
#[must_use]
pub fn suggested_priority_level_spec(name: &str) -> Option<Value> {
    let (_, shares, lendable, [queues, hand, length]) =
        SUGGESTED_LEVELS.iter().find(|level| level.0 == name)?;
    Some(json!({"type": "Limited", "limited": {
        "nominalConcurrencyShares": shares,
        "lendablePercent": lendable,
        "limitResponse": {"type": "Queue",
            "queuing": {"queues": queues, "handSize": hand, "queueLengthLimit": length}},
    }}))
}

fn group(name: &str) -> Value {
    json!({"kind": "Group", "group": {"name": name}})
}

fn user(name: &str) -> Value {
    json!({"kind": "User", "user": {"name": name}})
}

fn kube_system_service_account(name: &str) -> Value {
    json!({"kind": "ServiceAccount", "serviceAccount": {"namespace": "kube-system", "name": name}})
}

/// A resource rule (`clusterScope` omitted when false, as kube serializes it).
fn resource_rule(
    verbs: &[&str],
    groups: &[&str],
    resources: &[&str],
    namespaces: &[&str],
) -> Value {
    json!({"verbs": verbs, "apiGroups": groups, "resources": resources, "namespaces": namespaces})
}

/// The leader-election rules: `get`, `create`, `update` of endpoints and configmaps in
/// `core_namespace`, and of leases in every namespace.
fn leader_election_rules(core_namespace: &str) -> Value {
    let verbs = ["get", "create", "update"];
    json!([
        resource_rule(
            &verbs,
            &[""],
            &["endpoints", "configmaps"],
            &[core_namespace]
        ),
        resource_rule(&verbs, &["coordination.k8s.io"], &["leases"], &["*"]),
    ])
}

/// The spec of kube's suggested FlowSchema `name`, as stored; `None` for other names.
#[must_use]
pub fn suggested_flow_schema_spec(name: &str) -> Option<Value> {
    // kube's `NewFSAll*` rules: every verb of every resource and non-resource URL (the same
    // rule as the mandatory schemas').
    let everything = |subjects: Vec<Value>| {
        let mut rule = mandatory_flow_schema_spec("exempt")
            .map_or(Value::Null, |spec| spec["rules"][0].clone());
        rule["subjects"] = json!(subjects);
        json!([rule])
    };
    let (level, precedence, method, rules) = match name {
        "system-nodes" => (
            "system",
            500,
            Some("ByUser"),
            everything(vec![group("system:nodes")]),
        ),
        "system-node-high" => {
            let mut nodes = resource_rule(&["*"], &[""], &["nodes", "nodes/status"], &["*"]);
            nodes["clusterScope"] = json!(true);
            let leases = resource_rule(&["*"], &["coordination.k8s.io"], &["leases"], &["*"]);
            (
                "node-high",
                400,
                Some("ByUser"),
                json!([{"subjects": [group("system:nodes")], "resourceRules": [nodes, leases]}]),
            )
        }
        "probes" => (
            "exempt",
            2,
            None,
            json!([{
                "subjects": [group("system:unauthenticated"), group("system:authenticated")],
                "nonResourceRules": [{"verbs": ["get"],
                    "nonResourceURLs": ["/healthz", "/readyz", "/livez"]}],
            }]),
        ),
        "system-leader-election" => (
            "leader-election",
            100,
            Some("ByUser"),
            json!([{
                "subjects": [user("system:kube-controller-manager"),
                    user("system:kube-scheduler"), kube_system_service_account("*")],
                "resourceRules": leader_election_rules("kube-system"),
            }]),
        ),
        "workload-leader-election" => (
            "leader-election",
            200,
            Some("ByUser"),
            json!([{
                "subjects": [kube_system_service_account("*")],
                "resourceRules": leader_election_rules("*"),
            }]),
        ),
        "endpoint-controller" => (
            "workload-high",
            150,
            Some("ByUser"),
            json!([{
                "subjects": [user("system:kube-controller-manager"),
                    kube_system_service_account("endpoint-controller"),
                    kube_system_service_account("endpointslicemirroring-controller")],
                "resourceRules": [resource_rule(&["get", "create", "update"], &[""],
                    &["endpoints"], &["*"])],
            }]),
        ),
        "kube-controller-manager" => (
            "workload-high",
            800,
            Some("ByNamespace"),
            everything(vec![user("system:kube-controller-manager")]),
        ),
        "kube-scheduler" => (
            "workload-high",
            800,
            Some("ByNamespace"),
            everything(vec![user("system:kube-scheduler")]),
        ),
        "kube-system-service-accounts" => (
            "workload-high",
            900,
            Some("ByNamespace"),
            everything(vec![kube_system_service_account("*")]),
        ),
        "service-accounts" => (
            "workload-low",
            9000,
            Some("ByUser"),
            everything(vec![group("system:serviceaccounts")]),
        ),
        "global-default" => (
            "global-default",
            9900,
            Some("ByUser"),
            everything(vec![
                group("system:unauthenticated"),
                group("system:authenticated"),
            ]),
        ),
        _ => return None,
    };
    let mut spec = json!({
        "priorityLevelConfiguration": {"name": level},
        "matchingPrecedence": precedence,
        "rules": rules,
    });
    if let Some(method) = method {
        spec["distinguisherMethod"] = json!({"type": method});
    }
    Some(spec)
}

/// The whole configuration: priority levels first (the schemas name them), mandatory first.
#[must_use]
pub fn configuration() -> Vec<Wanted> {
    let mut wanted = Vec::new();
    let mut add = |plural, name, spec: Option<Value>, mandatory| {
        if let Some(spec) = spec {
            wanted.push(Wanted {
                plural,
                name,
                spec,
                mandatory,
            });
        }
    };
    for name in MANDATORY {
        add(
            PRIORITY_LEVELS,
            name,
            mandatory_priority_level_spec(name),
            true,
        );
    }
    for (name, ..) in SUGGESTED_LEVELS {
        add(
            PRIORITY_LEVELS,
            name,
            suggested_priority_level_spec(name),
            false,
        );
    }
    for name in MANDATORY {
        add(FLOW_SCHEMAS, name, mandatory_flow_schema_spec(name), true);
    }
    for name in SUGGESTED_FLOW_SCHEMAS {
        add(FLOW_SCHEMAS, name, suggested_flow_schema_spec(name), false);
    }
    wanted
}

/// Whether (`plural`, `name`) is an object of the configuration.
#[must_use]
pub fn is_configured(plural: &str, name: &str) -> bool {
    match plural {
        PRIORITY_LEVELS => {
            MANDATORY.contains(&name) || SUGGESTED_LEVELS.iter().any(|level| level.0 == name)
        }
        FLOW_SCHEMAS => MANDATORY.contains(&name) || SUGGESTED_FLOW_SCHEMAS.contains(&name),
        _ => false,
    }
}

/// Go's `strconv.ParseBool`.
fn parse_bool(text: &str) -> Option<bool> {
    match text {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// The object's annotation, if any.
fn annotation(object: &Value) -> Option<&str> {
    object["metadata"]["annotations"][AUTOUPDATE_SPEC].as_str()
}

/// `existing` revised towards `wanted` as kube's ensurer does (see the module docs); `None`
/// when nothing is to be written.
#[must_use]
pub fn revise(existing: &Value, wanted: &Wanted) -> Option<Value> {
    let auto_update = wanted.mandatory
        || annotation(existing)
            .and_then(parse_bool)
            .unwrap_or_else(|| existing["metadata"]["generation"].as_i64() == Some(1));
    let annotate = annotation(existing).and_then(parse_bool) != Some(auto_update);
    let respec = auto_update && existing["spec"] != wanted.spec;
    if !annotate && !respec {
        return None;
    }
    let mut revised = existing.clone();
    if annotate {
        let metadata = &mut revised["metadata"];
        if !metadata["annotations"].is_object() {
            metadata["annotations"] = json!({});
        }
        metadata["annotations"][AUTOUPDATE_SPEC] = json!(auto_update.to_string());
    }
    if respec {
        revised["spec"] = wanted.spec.clone();
        let generation = existing["metadata"]["generation"].as_i64().unwrap_or(0);
        revised["metadata"]["generation"] = json!(generation + 1);
    }
    Some(revised)
}

/// Whether an object not of the configuration is to be deleted (kube's
/// `removeUnwantedObjects`).
#[must_use]
pub fn unwanted(existing: &Value) -> bool {
    annotation(existing).and_then(parse_bool) == Some(true)
}

/// The resource of `plural`.
fn def(plural: &str) -> ResourceDef {
    builtin_resources()
        .into_iter()
        .find(|d| d.group == super::GROUP && d.plural == plural)
        .expect("the flow-control resources are built in")
}

/// One compare-and-write; a lost race or a read error is left for the next pass.
async fn write(
    store: &AnyStore,
    kind: &str,
    name: &str,
    compare: Compare,
    op: TxnOp,
) -> Result<(), StartError> {
    store
        .txn(
            TxnRequest::default()
                .when(compare)
                .then(op)
                .exempt_from_quota(),
        )
        .await
        .map(drop)
        .map_err(|source| StartError::Bootstrap {
            object: format!("{kind} {name}"),
            source,
        })
}

/// Revises the configuration's objects under `prefix` and deletes the unwanted ones (see
/// the module docs; creating the missing ones is the bootstrap's).
///
/// # Errors
/// The store refuses a write.
pub async fn ensure(store: &AnyStore, prefix: &str) -> Result<(), StartError> {
    let wanted = configuration();
    for plural in [PRIORITY_LEVELS, FLOW_SCHEMAS] {
        let def = def(plural);
        let collection = format!("{prefix}/{}/", def.storage_prefix());
        let read = match store.range(RangeRequest::prefix(collection.clone())).await {
            Ok(read) => read,
            Err(error) => {
                tracing::warn!(%error, %plural, "cannot read the flow-control objects; not revised");
                continue;
            }
        };
        for kv in read.kvs {
            let Ok(existing) = serde_json::from_slice::<Value>(&kv.value) else {
                continue;
            };
            let name = existing["metadata"]["name"].as_str().unwrap_or_default();
            let key = kv.key.clone();
            let compare = Compare::ModRevision {
                key: key.clone(),
                revision: kv.mod_revision,
            };
            match wanted.iter().find(|w| w.plural == plural && w.name == name) {
                Some(wanted) => {
                    if let Some(revised) = revise(&existing, wanted) {
                        let value = bytes::Bytes::from(revised.to_string());
                        write(store, &def.kind, name, compare, TxnOp::Put { key, value }).await?;
                    }
                }
                None if unwanted(&existing) => {
                    write(store, &def.kind, name, compare, TxnOp::Delete { key }).await?;
                }
                None => {}
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wanted(name: &str) -> Wanted {
        configuration()
            .into_iter()
            .find(|w| w.name == name && w.plural == PRIORITY_LEVELS)
            .unwrap()
    }

    fn object(annotation: Option<&str>, generation: i64, spec: &Value) -> Value {
        let mut object = json!({"metadata": {"name": "x", "generation": generation}, "spec": spec});
        if let Some(value) = annotation {
            object["metadata"]["annotations"] = json!({AUTOUPDATE_SPEC: value});
        }
        object
    }

    #[test]
    fn the_configuration_is_kubes() {
        let all = configuration();
        assert_eq!(all.len(), 8 + 13);
        let shares: u64 = all
            .iter()
            .filter(|w| w.plural == PRIORITY_LEVELS)
            .map(|w| {
                w.spec["limited"]["nominalConcurrencyShares"]
                    .as_u64()
                    .unwrap_or(0)
            })
            .sum();
        assert_eq!(shares, 245);
        // Every schema names a level of the configuration.
        for schema in all.iter().filter(|w| w.plural == FLOW_SCHEMAS) {
            let level = schema.spec["priorityLevelConfiguration"]["name"]
                .as_str()
                .unwrap();
            assert!(is_configured(PRIORITY_LEVELS, level), "{}", schema.name);
            assert!(is_configured(FLOW_SCHEMAS, schema.name));
        }
        assert!(!is_configured(FLOW_SCHEMAS, "system"));
        assert!(!is_configured(PRIORITY_LEVELS, "probes"));
        let probes = suggested_flow_schema_spec("probes").unwrap();
        assert!(probes.get("distinguisherMethod").is_none());
        assert_eq!(probes["priorityLevelConfiguration"]["name"], "exempt");
        assert_eq!(
            suggested_flow_schema_spec("global-default").unwrap()["rules"][0]["resourceRules"][0]["clusterScope"],
            true
        );
        assert_eq!(
            suggested_priority_level_spec("workload-low").unwrap()["limited"]["lendablePercent"],
            90
        );
    }

    #[test]
    fn mandatory_objects_are_always_revised() {
        let catch_all = wanted("catch-all");
        let edited = object(Some("false"), 3, &json!({"type": "Exempt"}));
        let revised = revise(&edited, &catch_all).unwrap();
        assert_eq!(revised["spec"], catch_all.spec);
        assert_eq!(revised["metadata"]["annotations"][AUTOUPDATE_SPEC], "true");
        assert_eq!(revised["metadata"]["generation"], 4);
        assert_eq!(revise(&revised, &catch_all), None);
    }

    #[test]
    fn suggested_objects_are_revised_only_while_they_auto_update() {
        let system = wanted("system");
        let edited = json!({"type": "Limited", "limited": {"nominalConcurrencyShares": 1}});
        // "true" (or Go's other spellings of it): the spec comes back.
        for value in ["true", "1", "T"] {
            let revised = revise(&object(Some(value), 2, &edited), &system).unwrap();
            assert_eq!(revised["spec"], system.spec);
            assert_eq!(revised["metadata"]["annotations"][AUTOUPDATE_SPEC], value);
            assert_eq!(revised["metadata"]["generation"], 3);
        }
        // "false": left as it is.
        assert_eq!(revise(&object(Some("false"), 2, &edited), &system), None);
        // No annotation, or an unreadable one: auto-updated only at generation 1, and the
        // annotation written either way.
        let fresh = revise(&object(None, 1, &edited), &system).unwrap();
        assert_eq!(fresh["spec"], system.spec);
        assert_eq!(fresh["metadata"]["annotations"][AUTOUPDATE_SPEC], "true");
        let kept = revise(&object(Some("maybe"), 2, &edited), &system).unwrap();
        assert_eq!(kept["spec"], edited);
        assert_eq!(kept["metadata"]["annotations"][AUTOUPDATE_SPEC], "false");
        assert_eq!(kept["metadata"]["generation"], 2);
        // Up to date: nothing to write.
        assert_eq!(
            revise(&object(Some("true"), 1, &system.spec), &system),
            None
        );
    }

    #[test]
    fn only_auto_updated_objects_outside_the_configuration_are_unwanted() {
        let spec = json!({});
        assert!(unwanted(&object(Some("true"), 1, &spec)));
        assert!(!unwanted(&object(Some("false"), 1, &spec)));
        assert!(!unwanted(&object(Some("yes"), 1, &spec)));
        assert!(!unwanted(&object(None, 1, &spec)));
    }
}

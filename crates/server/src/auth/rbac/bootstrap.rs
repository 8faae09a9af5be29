//! kube-apiserver's bootstrap RBAC policy and its `rbac/bootstrap-roles` post-start hook:
//! the default ClusterRoles, ClusterRoleBindings, and the Roles and RoleBindings of
//! `kube-system` and `kube-public`, reconciled into the store at start.
//!
//! ## Guarantees
//! - The policy is kube's own data ([`POLICY`], `bootstrap_policy.json`), converted by
//!   `scripts/rbac_bootstrap_policy.py` from the expanded policy kube keeps as test data
//!   (`plugin/pkg/auth/authorizer/rbac/bootstrappolicy/testdata/*.yaml`; the JSON's `source`
//!   names the commits): every object kube-apiserver v1.33 creates with its default feature
//!   gates, by name — the user-facing roles (`cluster-admin` bound to `system:masters`,
//!   `admin`, `edit`, `view` aggregated from the ClusterRoles labelled
//!   `rbac.authorization.k8s.io/aggregate-to-{admin,edit,view}`, `system:basic-user`,
//!   `system:discovery`, ...), the components' (`system:node`, `system:kube-scheduler`,
//!   `system:kube-controller-manager`, `system:volume-scheduler`, `system:kube-dns`, ...),
//!   every controller's `system:controller:*` ClusterRole bound to its `kube-system` service
//!   account, and the namespaced Roles and RoleBindings (`kube-system`'s
//!   `extension-apiserver-authentication-reader`, `system::leader-locking-*`,
//!   `system:controller:{bootstrap-signer,cloud-provider,token-cleaner}`, `kube-public`'s
//!   `system:controller:bootstrap-signer`), all with kube's labels
//!   (`kubernetes.io/bootstrapping: rbac-defaults`) and the annotation
//!   `rbac.authorization.kubernetes.io/autoupdate: "true"`. The rules of the roles are those
//!   of the test data the JSON names (see `source`: the controller and namespaced roles from a
//!   commit after v1.33, the other ClusterRoles and their bindings from v1.28's data).
//! - Reconciled as kube's `reconciliation.ReconcileRole` / `ReconcileRoleBinding` without
//!   removing anything, ClusterRoles, then ClusterRoleBindings, Roles, RoleBindings: a missing
//!   object is created (an aggregating ClusterRole with the
//!   rules it aggregates from the policy's roles, nested ones included, so that `admin`,
//!   `edit` and `view` grant from the first request rather than after the aggregation
//!   controller's first passes: a binding to `view` made right after start works); an object annotated autoupdate `"true"`
//!   gets the expected labels and annotations it lacks, the rules it does not cover (broken
//!   down, as kube adds them), the aggregation rule's selectors it lacks, and the subjects it
//!   lacks (a binding whose `roleRef` differs is replaced, as kube recreates it); an object
//!   annotated otherwise is left as it is. Each write is a compare-and-put on the revision
//!   read, retried when another writer came first, so concurrent starts never lose a write.
//! - A namespaced object is written only into a namespace that exists and is not
//!   terminating (kube's `tryEnsureNamespace` before a Role's create; `kube-system` and
//!   `kube-public` are created by [`crate::bootstrap`] just before this runs). Otherwise it
//!   is left for the next start, with a warning.
//! - Only with RBAC in `--authorization-mode`, over a store (`cluster-admin` and its binding
//!   are created by every start, see `crate::bootstrap`).

use serde_json::{Map, Value, json};
use watchkeeper_api::{ResourceDef, builtin_resources};
use watchkeeper_store::{AnyStore, Compare, RangeRequest, Store, TxnOp, TxnRequest};

use super::escalation::covers;
use super::{PolicyRule, binding_of, rules_of};
use crate::StartError;

/// kube's bootstrap policy (see the module docs).
pub const POLICY: &str = include_str!("bootstrap_policy.json");

/// The annotation that lets the reconciler add to an object.
pub const AUTOUPDATE: &str = "rbac.authorization.kubernetes.io/autoupdate";

/// The policy's objects by resource: `clusterroles`, `clusterrolebindings`, `roles`,
/// `rolebindings`, in the order they are reconciled.
#[derive(Debug, Default)]
pub struct Policy {
    /// ClusterRoles (kube's policy's and its controllers').
    pub cluster_roles: Vec<Value>,
    /// ClusterRoleBindings.
    pub cluster_role_bindings: Vec<Value>,
    /// Roles of `kube-system` and `kube-public`.
    pub roles: Vec<Value>,
    /// RoleBindings of `kube-system` and `kube-public`.
    pub role_bindings: Vec<Value>,
}

impl Policy {
    /// The objects of each resource (plural), in reconciling order.
    #[must_use]
    pub fn by_resource(&self) -> [(&'static str, &[Value]); 4] {
        [
            ("clusterroles", &self.cluster_roles),
            ("clusterrolebindings", &self.cluster_role_bindings),
            ("roles", &self.roles),
            ("rolebindings", &self.role_bindings),
        ]
    }
}

/// The policy's objects.
///
/// # Panics
/// Never: the data file is part of the build, and a test parses it.
#[must_use]
pub fn policy() -> Policy {
    let data: Value = serde_json::from_str(POLICY).expect("the bootstrap policy is JSON");
    let list = |key: &str| data[key].as_array().cloned().unwrap_or_default();
    Policy {
        cluster_roles: list("clusterRoles"),
        cluster_role_bindings: list("clusterRoleBindings"),
        roles: list("roles"),
        role_bindings: list("roleBindings"),
    }
}

/// Adds to `map` the entries of `expected` it lacks.
fn merge_missing(map: &mut Value, expected: &Value) -> bool {
    let Some(expected) = expected.as_object() else {
        return false;
    };
    if !map.is_object() {
        *map = Value::Object(Map::new());
    }
    let mut changed = false;
    if let Some(map) = map.as_object_mut() {
        for (key, value) in expected {
            if !map.contains_key(key) {
                map.insert(key.clone(), value.clone());
                changed = true;
            }
        }
    }
    changed
}

/// `existing` reconciled towards `expected` (see the module docs): `None` when nothing is to
/// be written.
#[must_use]
pub fn reconcile(plural: &str, existing: &Value, expected: &Value) -> Option<Value> {
    if existing
        .pointer(&format!(
            "/metadata/annotations/{}",
            AUTOUPDATE.replace('/', "~1")
        ))
        .and_then(Value::as_str)
        != Some("true")
    {
        return None;
    }
    let mut out = existing.clone();
    let mut changed = false;
    for field in ["labels", "annotations"] {
        changed |= merge_missing(&mut out["metadata"][field], &expected["metadata"][field]);
    }
    if plural == "clusterroles" || plural == "roles" {
        let (_, missing) = covers(&rules_of(existing), &rules_of(expected));
        if !missing.is_empty() {
            let mut rules = rules_of(existing);
            rules.extend(missing);
            out["rules"] = json!(rules);
            changed = true;
        }
        if let Some(selectors) = expected
            .pointer("/aggregationRule/clusterRoleSelectors")
            .and_then(Value::as_array)
        {
            let mut have = out
                .pointer("/aggregationRule/clusterRoleSelectors")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            for selector in selectors {
                if !have.contains(selector) {
                    have.push(selector.clone());
                    changed = true;
                }
            }
            out["aggregationRule"] = json!({"clusterRoleSelectors": have});
        }
    } else {
        let (have, want) = (binding_of(existing), binding_of(expected));
        if have.as_ref().map(|b| &b.role_ref) != want.as_ref().map(|b| &b.role_ref) {
            out["roleRef"] = expected["roleRef"].clone();
            changed = true;
        }
        let mut subjects = out["subjects"].as_array().cloned().unwrap_or_default();
        for subject in expected["subjects"].as_array().into_iter().flatten() {
            if !subjects.contains(subject) {
                subjects.push(subject.clone());
                changed = true;
            }
        }
        out["subjects"] = json!(subjects);
    }
    changed.then_some(out)
}

/// `roles` with the rules of each aggregating one (`admin`, `edit`, `view`) aggregated from the
/// others, repeated until nothing changes (`admin` aggregates `edit`, which aggregates
/// `view`'s): a role the bootstrap creates grants its rules from the server's first request,
/// not after the aggregation controller's first passes. An existing role's rules stay the
/// controller's (reconcile adds only what an autoupdated role lacks, as before).
fn with_aggregated_rules(mut roles: Vec<Value>) -> Vec<Value> {
    for _ in 0..roles.len() {
        let mut changed = false;
        for index in 0..roles.len() {
            if roles[index]
                .get("aggregationRule")
                .is_none_or(Value::is_null)
            {
                continue;
            }
            let rules = super::aggregated_rules(&roles[index], &roles);
            if rules_of(&roles[index]) != rules {
                roles[index]["rules"] = json!(rules);
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    roles
}

/// Whether the namespace `name` exists under `prefix` and is not terminating (a namespaced
/// object of the policy is written only then: see the module docs).
async fn namespace_usable(store: &AnyStore, prefix: &str, name: &str) -> bool {
    let key = bytes::Bytes::from(format!("{prefix}/namespaces/{name}"));
    match store.range(RangeRequest::key(key)).await {
        Ok(read) => read.kvs.first().is_some_and(|kv| {
            serde_json::from_slice::<Value>(&kv.value)
                .is_ok_and(|ns| ns.pointer("/status/phase") != Some(&json!("Terminating")))
        }),
        Err(_) => false,
    }
}

/// Reconciles the policy into the store under `prefix` (see the module docs).
///
/// # Errors
/// The store refuses a read or a write.
pub async fn reconcile_store(store: &AnyStore, prefix: &str) -> Result<(), StartError> {
    let defs = builtin_resources();
    let policy = policy();
    // Created with their aggregated rules; reconciled (when they exist) against the data.
    let created_roles = with_aggregated_rules(policy.cluster_roles.clone());
    let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    for (plural, objects) in policy.by_resource() {
        let def: &ResourceDef = defs
            .iter()
            .find(|d| d.group == super::GROUP && d.plural == plural)
            .expect("the RBAC resources are built in");
        for expected in objects {
            let name = expected["metadata"]["name"].as_str().unwrap_or_default();
            let namespace = expected["metadata"]["namespace"]
                .as_str()
                .unwrap_or_default();
            let key = if namespace.is_empty() {
                format!("{prefix}/{}/{name}", def.storage_prefix())
            } else {
                if !namespace_usable(store, prefix, namespace).await {
                    tracing::warn!(object = %name, %namespace, "the namespace of a bootstrap RBAC object is missing or terminating; not created");
                    continue;
                }
                format!("{prefix}/{}/{namespace}/{name}", def.storage_prefix())
            };
            let key = bytes::Bytes::from(key);
            let failed = |source| StartError::Bootstrap {
                object: format!("{} {name}", def.kind),
                source,
            };
            // A few tries: each loses only to another writer of the same key.
            let mut written = false;
            for _ in 0..8 {
                let current = match store.range(RangeRequest::key(key.clone())).await {
                    Ok(read) => read.kvs.into_iter().next(),
                    Err(error) => {
                        tracing::warn!(%error, object = %name, "cannot read a bootstrap RBAC object; not reconciled");
                        written = true;
                        break;
                    }
                };
                let (compare, value) = match &current {
                    None => {
                        let mut created = created_roles
                            .iter()
                            .find(|role| {
                                plural == "clusterroles" && role["metadata"]["name"] == name
                            })
                            .unwrap_or(expected)
                            .clone();
                        created["metadata"]["uid"] = json!(uuid::Uuid::new_v4().to_string());
                        created["metadata"]["creationTimestamp"] = json!(now);
                        (Compare::Absent { key: key.clone() }, created)
                    }
                    Some(kv) => {
                        let Ok(existing) = serde_json::from_slice::<Value>(&kv.value) else {
                            written = true;
                            break;
                        };
                        let Some(updated) = reconcile(plural, &existing, expected) else {
                            written = true;
                            break;
                        };
                        (
                            Compare::ModRevision {
                                key: key.clone(),
                                revision: kv.mod_revision,
                            },
                            updated,
                        )
                    }
                };
                let answer = store
                    .txn(
                        TxnRequest::default()
                            .when(compare)
                            .then(TxnOp::Put {
                                key: key.clone(),
                                value: bytes::Bytes::from(value.to_string()),
                            })
                            .exempt_from_quota(),
                    )
                    .await
                    .map_err(failed)?;
                if answer.succeeded {
                    written = true;
                    break;
                }
            }
            if !written {
                tracing::warn!(object = %name, "a bootstrap RBAC object kept changing under its reconciliation; left as it is");
            }
        }
    }
    Ok(())
}

/// The rules of the policy's ClusterRole `name` (tests, the aggregation controller's tests).
#[must_use]
pub fn role_rules(name: &str) -> Vec<PolicyRule> {
    policy()
        .cluster_roles
        .iter()
        .find(|r| r["metadata"]["name"] == name)
        .map(rules_of)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_is_kubes() {
        let policy = policy();
        let (roles, bindings) = (&policy.cluster_roles, &policy.cluster_role_bindings);
        let name = |o: &Value| o["metadata"]["name"].as_str().unwrap().to_owned();
        let roles_named: Vec<String> = roles.iter().map(name).collect();
        for wanted in [
            "cluster-admin",
            "admin",
            "edit",
            "view",
            "system:aggregate-to-admin",
            "system:aggregate-to-edit",
            "system:aggregate-to-view",
            "system:discovery",
            "system:basic-user",
            "system:public-info-viewer",
        ] {
            assert!(roles_named.iter().any(|n| n == wanted), "{wanted}");
        }
        for (_, objects) in policy.by_resource() {
            for object in objects {
                assert_eq!(object["metadata"]["annotations"][AUTOUPDATE], "true");
                assert_eq!(
                    object["metadata"]["labels"]["kubernetes.io/bootstrapping"],
                    "rbac-defaults"
                );
                assert!(object["metadata"].get("creationTimestamp").is_none());
            }
        }
        // Every binding names a role of the policy, of its kind and namespace.
        for binding in bindings {
            let role = binding["roleRef"]["name"].as_str().unwrap();
            assert_eq!(binding["roleRef"]["kind"], "ClusterRole");
            assert!(roles_named.iter().any(|n| n == role), "{role}");
        }
        for binding in &policy.role_bindings {
            assert_eq!(binding["roleRef"]["kind"], "Role");
            assert!(
                policy.roles.iter().any(|r| {
                    r["metadata"]["name"] == binding["roleRef"]["name"]
                        && r["metadata"]["namespace"] == binding["metadata"]["namespace"]
                }),
                "{binding}"
            );
        }
        // Every controller role is bound to its controller's service account.
        for role in roles_named
            .iter()
            .filter(|n| n.starts_with("system:controller:"))
        {
            let binding = bindings
                .iter()
                .find(|b| b["metadata"]["name"] == role.as_str())
                .unwrap_or_else(|| panic!("{role} is not bound"));
            assert_eq!(
                binding["subjects"],
                json!([{"kind": "ServiceAccount", "namespace": "kube-system",
                        "name": role.trim_start_matches("system:controller:")}])
            );
        }
        let admin = bindings
            .iter()
            .find(|b| b["metadata"]["name"] == "cluster-admin")
            .unwrap();
        assert_eq!(admin["subjects"][0]["name"], "system:masters");
        let view = roles
            .iter()
            .find(|r| r["metadata"]["name"] == "view")
            .unwrap();
        assert_eq!(
            view["aggregationRule"]["clusterRoleSelectors"][0]["matchLabels"]["rbac.authorization.k8s.io/aggregate-to-view"],
            "true"
        );
        assert!(view.get("rules").is_none());
        assert!(
            role_rules("system:basic-user")
                .iter()
                .any(|r| r.resources.contains(&"selfsubjectrulesreviews".to_owned()))
        );
    }

    #[test]
    fn reconcile_adds_what_is_missing_and_keeps_the_rest() {
        let expected = json!({
            "metadata": {"name": "r", "labels": {"a": "1"}, "annotations": {AUTOUPDATE: "true"}},
            "rules": [{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]}],
        });
        // Not annotated autoupdate true: left alone.
        let pinned =
            json!({"metadata": {"name": "r", "annotations": {AUTOUPDATE: "false"}}, "rules": []});
        assert_eq!(reconcile("clusterroles", &pinned, &expected), None);
        // Holds `get` and an extra rule: `list` is added, the extra rule and label stay.
        let existing = json!({
            "metadata": {"name": "r", "labels": {"mine": "x"}, "annotations": {AUTOUPDATE: "true"}},
            "rules": [
                {"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]},
                {"verbs": ["delete"], "apiGroups": [""], "resources": ["secrets"]},
            ],
        });
        let out = reconcile("clusterroles", &existing, &expected).unwrap();
        assert_eq!(out["metadata"]["labels"], json!({"mine": "x", "a": "1"}));
        let rules = rules_of(&out);
        assert_eq!(rules.len(), 3);
        assert_eq!(rules[2].verbs, ["list"]);
        assert_eq!(rules[1].resources, ["secrets"]);
        // Reconciled once, nothing more to do.
        assert_eq!(reconcile("clusterroles", &out, &expected), None);

        let expected = json!({
            "metadata": {"name": "b", "annotations": {AUTOUPDATE: "true"}},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "r"},
            "subjects": [{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "g"}],
        });
        let existing = json!({
            "metadata": {"name": "b", "annotations": {AUTOUPDATE: "true"}},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "r"},
            "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "u"}],
        });
        let out = reconcile("clusterrolebindings", &existing, &expected).unwrap();
        assert_eq!(out["subjects"].as_array().unwrap().len(), 2);
        assert_eq!(reconcile("clusterrolebindings", &out, &expected), None);
    }

    /// Over a store: the namespaced objects go only into a namespace that exists and is not
    /// terminating, and an autoupdated Role that lost a rule gets it back at the next start.
    #[tokio::test]
    async fn namespaced_objects_need_their_namespace_and_are_reconciled() {
        use watchkeeper_store::{MemoryConfig, MemoryStore};
        let store = AnyStore::Memory(MemoryStore::new(MemoryConfig::default()).unwrap());
        let put = |key: String, value: Value| {
            let store = store.clone();
            async move {
                let op = TxnOp::Put {
                    key: bytes::Bytes::from(key),
                    value: bytes::Bytes::from(value.to_string()),
                };
                store.txn(TxnRequest::default().then(op)).await.unwrap();
            }
        };
        let get = |key: &str| {
            let store = store.clone();
            let key = bytes::Bytes::from(key.to_owned());
            async move {
                store
                    .range(RangeRequest::key(key))
                    .await
                    .unwrap()
                    .kvs
                    .first()
                    .map(|kv| serde_json::from_slice::<Value>(&kv.value).unwrap())
            }
        };
        put(
            "/r/namespaces/kube-system".to_owned(),
            json!({"metadata": {"name": "kube-system"}, "status": {"phase": "Active"}}),
        )
        .await;
        put(
            "/r/namespaces/kube-public".to_owned(),
            json!({"metadata": {"name": "kube-public"}, "status": {"phase": "Terminating"}}),
        )
        .await;
        reconcile_store(&store, "/r").await.unwrap();
        let reader = "/r/roles/kube-system/extension-apiserver-authentication-reader";
        let created = get(reader).await.expect("created in kube-system");
        assert_eq!(created["metadata"]["namespace"], "kube-system");
        assert!(
            get("/r/rolebindings/kube-system/system::leader-locking-kube-scheduler")
                .await
                .is_some()
        );
        assert!(
            get("/r/roles/kube-public/system:controller:bootstrap-signer")
                .await
                .is_none()
        );
        assert!(
            get("/r/clusterroles/system:controller:namespace-controller")
                .await
                .is_some()
        );
        // A rule taken away comes back; a rule added stays.
        let mut edited = created.clone();
        edited["rules"] = json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]);
        put(reader.to_owned(), edited).await;
        put(
            "/r/namespaces/kube-public".to_owned(),
            json!({"metadata": {"name": "kube-public"}, "status": {"phase": "Active"}}),
        )
        .await;
        reconcile_store(&store, "/r").await.unwrap();
        // (Added broken down, one verb a rule, as kube's reconciliation adds them.)
        let rules = rules_of(&get(reader).await.unwrap());
        assert_eq!(rules[0].resources, ["secrets"]);
        let verbs: Vec<&str> = rules[1..]
            .iter()
            .flat_map(|r| r.verbs.iter().map(String::as_str))
            .collect();
        assert_eq!(verbs, ["get", "list", "watch"]);
        for rule in &rules[1..] {
            assert_eq!(rule.resource_names, ["extension-apiserver-authentication"]);
        }
        assert!(
            get("/r/roles/kube-public/system:controller:bootstrap-signer")
                .await
                .is_some()
        );
    }

    #[test]
    fn created_aggregating_roles_carry_their_nested_rules() {
        let roles = with_aggregated_rules(policy().cluster_roles);
        let rules = |name: &str| {
            rules_of(
                roles
                    .iter()
                    .find(|r| r["metadata"]["name"] == name)
                    .unwrap(),
            )
        };
        let grants = |name: &str, verb: &str, resource: &str| {
            rules(name).iter().any(|rule| {
                rule.verbs.iter().any(|v| v == verb || v == "*")
                    && rule.api_groups.iter().any(|g| g.is_empty())
                    && rule.resources.iter().any(|r| r == resource)
            })
        };
        // view's own (aggregate-to-view), edit's through view, admin's through edit and view.
        assert!(grants("view", "list", "configmaps"));
        assert!(grants("edit", "list", "configmaps"));
        assert!(grants("edit", "create", "configmaps"));
        assert!(grants("admin", "list", "configmaps"));
        assert!(grants("admin", "create", "configmaps"));
        assert!(!grants("view", "create", "configmaps"));
        assert!(!grants("view", "list", "secrets"));
        // The data itself is unchanged: aggregated roles are empty there.
        assert!(
            rules_of(
                policy()
                    .cluster_roles
                    .iter()
                    .find(|r| r["metadata"]["name"] == "admin")
                    .unwrap()
            )
            .is_empty()
        );
    }
}

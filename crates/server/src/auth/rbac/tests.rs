//! The rule matcher, the index and the escalation check against kube's own test tables
//! (`plugin/pkg/auth/authorizer/rbac/rbac_test.go`, component-helpers'
//! `policy_comparator_test.go`, `pkg/registry/rbac/validation/rule_test.go`).

use std::collections::BTreeMap;

use serde_json::json;

use super::escalation::{compact, compact_string, confirm_no_escalation, covers};
use super::*;

fn strings(list: &str) -> Vec<String> {
    list.split(',')
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// kube's `newRule(verbs, apiGroups, resources, nonResourceURLs)` (comma lists; a resource
/// rule's `""` group is the core group).
fn rule(verbs: &str, groups: &str, resources: &str, urls: &str) -> PolicyRule {
    PolicyRule {
        verbs: strings(verbs),
        api_groups: if resources.is_empty() {
            Vec::new()
        } else {
            groups.split(',').map(str::to_owned).collect()
        },
        resources: strings(resources),
        non_resource_urls: strings(urls),
        ..PolicyRule::default()
    }
}

fn def(group: &str, plural: &str) -> ResourceDef {
    ResourceDef::named(group, "v1", plural, "Kind", true)
}

fn user(name: &str, groups: &str) -> User {
    User {
        name: name.to_owned(),
        uid: String::new(),
        groups: strings(groups),
        extra: Default::default(),
    }
}

/// Does `rule` allow `verb` on `group`/`resource`/`subresource`?
fn allows(rule: &PolicyRule, verb: &str, group: &str, resource: &str, sub: &str) -> bool {
    let def = def(group, resource);
    rule.allows(&Attributes::Resource {
        verb,
        def: &def,
        namespace: "ns",
        name: "",
        subresource: sub,
    })
}

fn allows_path(rule: &PolicyRule, verb: &str, path: &str) -> bool {
    rule.allows(&Attributes::NonResource { verb, path })
}

#[test]
fn rule_matches_as_kubes_table() {
    // "star verb, exact match other"
    let r = rule("*", "group1", "resource1", "");
    assert!(allows(&r, "verb1", "group1", "resource1", ""));
    assert!(allows(&r, "verb2", "group1", "resource1", ""));
    assert!(!allows(&r, "verb1", "group2", "resource1", ""));
    assert!(!allows(&r, "verb1", "group1", "resource2", ""));
    // "star group, exact match other"
    let r = rule("verb1", "*", "resource1", "");
    assert!(allows(&r, "verb1", "group1", "resource1", ""));
    assert!(allows(&r, "verb1", "group2", "resource1", ""));
    assert!(!allows(&r, "verb1", "group1", "resource2", ""));
    assert!(!allows(&r, "verb2", "group1", "resource1", ""));
    // "star resource, exact match other"
    let r = rule("verb1", "group1", "*", "");
    assert!(allows(&r, "verb1", "group1", "resource1", ""));
    assert!(allows(&r, "verb1", "group1", "resource2", ""));
    assert!(!allows(&r, "verb1", "group2", "resource1", ""));
    assert!(!allows(&r, "verb2", "group1", "resource1", ""));
    // "tuple expansion"
    let r = rule("verb1,verb2", "group1,group2", "resource1,resource2", "");
    for verb in ["verb1", "verb2"] {
        for group in ["group1", "group2"] {
            for resource in ["resource1", "resource2"] {
                assert!(allows(&r, verb, group, resource, ""));
            }
        }
    }
    // "subresource expansion"
    let r = rule("*", "*", "resource1/subresource1", "");
    assert!(allows(&r, "verb1", "group1", "resource1", "subresource1"));
    assert!(allows(&r, "verb2", "group1", "resource1", "subresource1"));
    assert!(!allows(&r, "verb1", "group2", "resource1", "subresource2"));
    assert!(!allows(&r, "verb1", "group1", "resource2", "subresource1"));
    assert!(!allows(&r, "verb1", "group1", "resource1", ""));
    // "star nonresource, exact match other"
    let r = rule("verb1", "", "", "*");
    for path in [
        "/foo",
        "/foo/bar",
        "/foo/baz",
        "/foo/bar/one",
        "/foo/baz/one",
    ] {
        assert!(allows_path(&r, "verb1", path));
        assert!(!allows_path(&r, "verb2", path));
    }
    // "star nonresource subpath"
    let r = rule("verb1", "", "", "/foo/*");
    assert!(!allows_path(&r, "verb1", "/foo"));
    for path in ["/foo/bar", "/foo/baz", "/foo/bar/one", "/foo/baz/one"] {
        assert!(allows_path(&r, "verb1", path));
    }
    for path in ["/notfoo", "/notfoo/bar", "/notfoo/baz/one"] {
        assert!(!allows_path(&r, "verb1", path));
    }
    // "star verb, exact nonresource"
    let r = rule("*", "", "", "/foo,/foo/bar/one");
    for verb in ["verb1", "verb2"] {
        assert!(allows_path(&r, verb, "/foo"));
        assert!(allows_path(&r, verb, "/foo/bar/one"));
        assert!(!allows_path(&r, verb, "/foo/bar"));
        assert!(!allows_path(&r, verb, "/foo/baz/one"));
    }
    // A resource rule never allows a path, nor a path rule a resource.
    assert!(!allows_path(&rule("*", "*", "*", ""), "get", "/api"));
    assert!(!allows(&rule("*", "", "", "*"), "get", "", "pods", ""));
}

#[test]
fn resource_names_and_subresource_wildcards() {
    let r = PolicyRule {
        resource_names: strings("a,b"),
        ..rule("get", "", "configmaps", "")
    };
    let configmaps = def("", "configmaps");
    let named = |name| Attributes::Resource {
        verb: "get",
        def: &configmaps,
        namespace: "ns",
        name,
        subresource: "",
    };
    assert!(r.allows(&named("a")));
    assert!(!r.allows(&named("c")));
    assert!(!r.allows(&named("")), "a collection is never named");
    // kube's "test subresource resolution": pods/status and */scale.
    let status = rule("*", "*", "pods/status", "");
    let scale = rule("*", "*", "*/scale", "");
    assert!(allows(&status, "get", "", "pods", "status"));
    assert!(allows(&scale, "get", "", "pods", "scale"));
    assert!(allows(&scale, "get", "apps", "deployments", "scale"));
    assert!(allows(&scale, "get", "x", "anything", "scale"));
    assert!(!allows(&scale, "get", "", "pods", ""));
    assert!(!allows(&scale, "get", "", "pods", "scaled"));
    assert!(!allows(
        &rule("*", "*", "pods", ""),
        "get",
        "",
        "pods",
        "status"
    ));
    // Impersonation is the verb `impersonate` on users/groups in the core group.
    let users = rule("impersonate", "", "users", "");
    let impersonate = |resource, name| Attributes::Named {
        verb: "impersonate",
        group: "",
        resource,
        subresource: "",
        namespace: "",
        name,
    };
    assert!(users.allows(&impersonate("users", "alice")));
    assert!(!users.allows(&impersonate("groups", "dev")));
}

fn object(namespace: &str, body: serde_json::Value) -> Arc<Object> {
    let name = body["metadata"]["name"].as_str().unwrap().to_owned();
    Arc::new(Object::new(
        namespace,
        &name,
        BTreeMap::new(),
        BTreeMap::new(),
        1,
        body,
    ))
}

fn role(name: &str, rules: Vec<PolicyRule>) -> serde_json::Value {
    json!({"metadata": {"name": name}, "rules": rules})
}

/// `kind:name` subjects, kube's test shorthand (`User:admin`, `Group:admins`,
/// `ServiceAccount:ns/name`).
fn binding(name: &str, role_kind: &str, role: &str, subjects: &[&str]) -> serde_json::Value {
    let subjects: Vec<serde_json::Value> = subjects
        .iter()
        .map(|s| {
            let (kind, name) = s.split_once(':').unwrap();
            let (namespace, name) = name.split_once('/').unwrap_or(("", name));
            json!({"kind": kind, "name": name, "namespace": namespace})
        })
        .collect();
    json!({"metadata": {"name": name}, "roleRef": {"kind": role_kind, "name": role}, "subjects": subjects})
}

fn feed(rbac: &Rbac, plural: &str, namespace: &str, body: serde_json::Value) {
    let change = Change::put(object(namespace, body));
    rbac.changes(&def(GROUP, plural), 1, &[change]);
}

fn resource_allowed(
    rbac: &Rbac,
    who: &User,
    verb: &str,
    plural: &str,
    sub: &str,
    ns: &str,
) -> bool {
    let def = def("", plural);
    rbac.allows(
        who,
        &Attributes::Resource {
            verb,
            def: &def,
            namespace: ns,
            name: "",
            subresource: sub,
        },
    )
}

#[test]
fn authorizer_as_kubes_table() {
    let rbac = Rbac::new();
    feed(
        &rbac,
        "clusterroles",
        "",
        role("admin", vec![rule("*", "*", "*", "")]),
    );
    feed(
        &rbac,
        "rolebindings",
        "ns1",
        binding(
            "admin",
            "ClusterRole",
            "admin",
            &["User:admin", "Group:admins"],
        ),
    );
    let admin = user("admin", "");
    assert!(resource_allowed(&rbac, &admin, "get", "pods", "", "ns1"));
    assert!(resource_allowed(&rbac, &admin, "watch", "pods", "", "ns1"));
    assert!(resource_allowed(
        &rbac,
        &user("admin", "group1"),
        "watch",
        "foobar",
        "",
        "ns1"
    ));
    assert!(resource_allowed(
        &rbac,
        &user("joe", "admins"),
        "watch",
        "foobar",
        "",
        "ns1"
    ));
    assert!(resource_allowed(
        &rbac,
        &user("joe", "group1,admins"),
        "watch",
        "foobar",
        "",
        "ns1"
    ));
    assert!(!resource_allowed(&rbac, &admin, "get", "pods", "", "ns2"));
    assert!(!resource_allowed(&rbac, &admin, "get", "nodes", "", ""));
    assert!(!resource_allowed(
        &rbac,
        &user("admin", "admins"),
        "get",
        "pods",
        "",
        "ns2"
    ));

    // Non-resource URLs through ClusterRoleBindings.
    feed(
        &rbac,
        "clusterroles",
        "",
        role("getter", vec![rule("get", "", "", "/apis")]),
    );
    feed(
        &rbac,
        "clusterroles",
        "",
        role("any", vec![rule("*", "", "", "/apis")]),
    );
    feed(
        &rbac,
        "clusterroles",
        "",
        role("prefix", vec![rule("get", "", "", "/apis/*")]),
    );
    feed(
        &rbac,
        "clusterrolebindings",
        "",
        binding(
            "getter",
            "ClusterRole",
            "getter",
            &["User:foo", "Group:bar"],
        ),
    );
    feed(
        &rbac,
        "clusterrolebindings",
        "",
        binding("any", "ClusterRole", "any", &["User:admin", "Group:admin"]),
    );
    feed(
        &rbac,
        "clusterrolebindings",
        "",
        binding(
            "prefix",
            "ClusterRole",
            "prefix",
            &["User:prefixed", "Group:prefixed"],
        ),
    );
    let path = |who: &User, verb, path| rbac.allows(who, &Attributes::NonResource { verb, path });
    assert!(path(&user("foo", ""), "get", "/apis"));
    assert!(path(&user("", "bar"), "get", "/apis"));
    assert!(path(&user("admin", ""), "watch", "/apis"));
    assert!(path(&user("", "admin"), "watch", "/apis"));
    assert!(path(&user("prefixed", ""), "get", "/apis/v1/foobar"));
    assert!(path(&user("", "prefixed"), "get", "/apis/v1"));
    assert!(!path(&user("foo", ""), "watch", "/apis"));
    assert!(!path(&user("foo", ""), "get", "/api/v1"));
    assert!(!path(&user("admin", ""), "get", "/api/v1"));
    assert!(!path(&user("prefixed", ""), "get", "/api/v1"));
}

#[test]
fn service_accounts_roles_and_changes() {
    let rbac = Rbac::new();
    feed(
        &rbac,
        "roles",
        "ns1",
        role("reader", vec![rule("get,list", "", "pods", "")]),
    );
    // A RoleBinding's ServiceAccount without a namespace is of the binding's namespace.
    feed(
        &rbac,
        "rolebindings",
        "ns1",
        binding(
            "sa",
            "Role",
            "reader",
            &["ServiceAccount:robot", "ServiceAccount:other/bot"],
        ),
    );
    let robot = user("system:serviceaccount:ns1:robot", "system:serviceaccounts");
    let bot = user("system:serviceaccount:other:bot", "");
    assert!(resource_allowed(&rbac, &robot, "list", "pods", "", "ns1"));
    assert!(resource_allowed(&rbac, &bot, "list", "pods", "", "ns1"));
    assert!(!resource_allowed(&rbac, &robot, "list", "pods", "", "ns2"));
    assert!(!resource_allowed(
        &rbac, &robot, "delete", "pods", "", "ns1"
    ));
    // Access reviews name what allowed it, as kube's describers do.
    let pods = def("", "pods");
    let list = |namespace| Attributes::Resource {
        verb: "list",
        def: &pods,
        namespace,
        name: "",
        subresource: "",
    };
    assert_eq!(
        rbac.allowed_by(&robot, &list("ns1")).as_deref(),
        Some(
            "RBAC: allowed by RoleBinding \"sa/ns1\" of Role \"reader\" to ServiceAccount \"robot/ns1\""
        )
    );
    assert_eq!(rbac.allowed_by(&robot, &list("ns2")), None);
    // A ClusterRoleBinding's ServiceAccount needs a namespace.
    feed(
        &rbac,
        "clusterroles",
        "",
        role("all", vec![rule("*", "*", "*", "")]),
    );
    feed(
        &rbac,
        "clusterrolebindings",
        "",
        binding("sa", "ClusterRole", "all", &["ServiceAccount:robot"]),
    );
    assert!(!resource_allowed(
        &rbac, &robot, "delete", "pods", "", "ns1"
    ));
    // A Role of another namespace is not bound: a RoleBinding reads its own namespace's.
    feed(
        &rbac,
        "rolebindings",
        "ns2",
        binding("sa", "Role", "reader", &["ServiceAccount:ns1/robot"]),
    );
    assert!(!resource_allowed(&rbac, &robot, "list", "pods", "", "ns2"));
    assert_eq!(
        rbac.denial_reason(&robot, "ns2"),
        "RBAC: role.rbac.authorization.k8s.io \"reader\" not found"
    );
    // The binding changes: the next decision follows it; deleted, it grants nothing.
    feed(
        &rbac,
        "rolebindings",
        "ns1",
        binding("sa", "Role", "reader", &["User:alice"]),
    );
    assert!(!resource_allowed(&rbac, &robot, "list", "pods", "", "ns1"));
    assert!(resource_allowed(
        &rbac,
        &user("alice", ""),
        "list",
        "pods",
        "",
        "ns1"
    ));
    rbac.changes(
        &def(GROUP, "rolebindings"),
        2,
        &[Change {
            key: "ns1/sa".into(),
            object: None,
        }],
    );
    assert!(!resource_allowed(
        &rbac,
        &user("alice", ""),
        "list",
        "pods",
        "",
        "ns1"
    ));
    // A role deleted grants nothing, and the reason says why.
    feed(
        &rbac,
        "clusterrolebindings",
        "",
        binding("alice", "ClusterRole", "gone", &["User:alice"]),
    );
    assert!(!resource_allowed(
        &rbac,
        &user("alice", ""),
        "get",
        "pods",
        "",
        ""
    ));
    assert_eq!(
        rbac.denial_reason(&user("alice", ""), ""),
        "RBAC: clusterrole.rbac.authorization.k8s.io \"gone\" not found"
    );
    // A reset forgets what the new list does not hold.
    rbac.reset(&def(GROUP, "clusterrolebindings"), 3, &[]);
    assert_eq!(rbac.denial_reason(&user("alice", ""), ""), "");
    let resolved = rbac.resolve(&robot, "ns1");
    assert!(resolved.rules.is_empty() && resolved.errors.is_empty());
}

#[test]
fn covers_as_kubes_table() {
    // "exact match"
    let owner = [rule("create,delete", "v1", "builds", "")];
    assert!(covers(&owner, &[rule("delete", "v1", "builds", "")]).0);
    // "extra verbs" are not covered.
    let (ok, missing) = covers(&owner, &[rule("create,update", "v1", "builds", "")]);
    assert!(!ok);
    assert_eq!(missing, [rule("update", "v1", "builds", "")]);
    // "star verbs", "star groups", "star resources".
    assert!(
        covers(
            &[rule("*", "v1", "builds", "")],
            &[rule("get", "v1", "builds", "")]
        )
        .0
    );
    assert!(
        covers(
            &[rule("get", "*", "builds", "")],
            &[rule("get", "v1,v2", "builds", "")]
        )
        .0
    );
    assert!(
        covers(
            &[rule("get", "v1", "*", "")],
            &[rule("get", "v1", "pods,builds", "")]
        )
        .0
    );
    // "*/subresource" covers that subresource of any resource, not the resource itself.
    let scale = [rule("get", "", "*/scale", "")];
    assert!(covers(&scale, &[rule("get", "", "deployments/scale", "")]).0);
    assert!(!covers(&scale, &[rule("get", "", "deployments", "")]).0);
    // Resource names: an owner without names covers any; one with names only those.
    let named = PolicyRule {
        resource_names: strings("foo"),
        ..rule("get", "", "pods", "")
    };
    assert!(covers(&[rule("get", "", "pods", "")], std::slice::from_ref(&named)).0);
    assert!(covers(std::slice::from_ref(&named), std::slice::from_ref(&named)).0);
    assert!(!covers(&[named], &[rule("get", "", "pods", "")]).0);
    // Non-resource URLs, with prefixes.
    let urls = [rule("get", "", "", "/api/*")];
    assert!(covers(&urls, &[rule("get", "", "", "/api/v1,/api/")]).0);
    assert!(!covers(&urls, &[rule("get", "", "", "/apis")]).0);
    assert!(!covers(&[rule("get", "*", "*", "")], &[rule("get", "", "", "/api")]).0);
}

#[test]
fn escalation_message_is_kubes() {
    let rbac = Rbac::new();
    feed(
        &rbac,
        "roles",
        "ns1",
        role("r", vec![rule("get", "", "pods", "")]),
    );
    feed(
        &rbac,
        "rolebindings",
        "ns1",
        binding("b", "Role", "r", &["User:bob"]),
    );
    let bob = user("bob", "system:authenticated,dev");
    assert!(confirm_no_escalation(&rbac, &bob, "ns1", &[rule("get", "", "pods", "")]).is_ok());
    let error = confirm_no_escalation(
        &rbac,
        &bob,
        "ns1",
        &[
            rule("get,list,watch", "", "pods,secrets", ""),
            rule("get", "", "", "/metrics"),
        ],
    )
    .unwrap_err();
    assert_eq!(
        error,
        "user \"bob\" (groups=[\"system:authenticated\" \"dev\"]) is attempting to grant RBAC permissions not currently held:\n\
         {APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"list\" \"watch\"]}\n\
         {APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\" \"list\" \"watch\"]}\n\
         {NonResourceURLs:[\"/metrics\"], Verbs:[\"get\"]}"
    );
    // A bound role that is missing is named after the missing rules.
    feed(
        &rbac,
        "rolebindings",
        "ns1",
        binding("gone", "Role", "gone", &["User:bob"]),
    );
    let error =
        confirm_no_escalation(&rbac, &bob, "ns1", &[rule("list", "", "pods", "")]).unwrap_err();
    assert!(
        error.ends_with(
            "{APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"list\"]}; resolution errors: [role.rbac.authorization.k8s.io \"gone\" not found]"
        ),
        "{error}"
    );
    // In another namespace bob holds nothing.
    assert!(confirm_no_escalation(&rbac, &bob, "ns2", &[rule("get", "", "pods", "")]).is_err());
}

#[test]
fn compaction_as_kube() {
    let named = |name: &str, verb: &str| PolicyRule {
        resource_names: strings(name),
        ..rule(verb, "", "pods", "")
    };
    let rules = compact(&[
        rule("get", "", "pods", ""),
        rule("list", "", "pods", ""),
        named("a", "get"),
        named("a", "delete"),
        rule("get", "", "pods,secrets", ""),
    ]);
    let described: Vec<String> = rules.iter().map(compact_string).collect();
    assert_eq!(
        described,
        [
            "{APIGroups:[\"\"], Resources:[\"pods\" \"secrets\"], Verbs:[\"get\"]}",
            "{APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"get\" \"list\"]}",
            "{APIGroups:[\"\"], Resources:[\"pods\"], ResourceNames:[\"a\"], Verbs:[\"get\" \"delete\"]}",
        ]
    );
}

#[test]
fn role_writes_need_the_rules_or_escalate_and_aggregation_needs_everything() {
    use super::escalation::check_write;
    let auth =
        crate::auth::Auth::none().with_authorization(&[crate::auth::AuthorizationMode::Rbac]);
    let rbac = auth.rbac().unwrap().clone();
    feed(
        &rbac,
        "clusterroles",
        "",
        role(
            "writer",
            vec![
                rule("create,update", GROUP, "clusterroles", ""),
                rule("get", "", "pods", ""),
            ],
        ),
    );
    feed(
        &rbac,
        "clusterrolebindings",
        "",
        binding("bob", "ClusterRole", "writer", &["User:bob"]),
    );
    let bob = user("bob", "");
    let clusterroles = ResourceDef::named(GROUP, "v1", "clusterroles", "ClusterRole", false);
    let write = |old: Option<&serde_json::Value>, object: &serde_json::Value| {
        check_write(&auth, &rbac, &bob, &clusterroles, old, object).map_err(|e| e.message)
    };
    let held = json!({"metadata": {"name": "held"}, "rules": [rule("get", "", "pods", "")]});
    assert_eq!(write(None, &held), Ok(()));
    let aggregating = json!({"metadata": {"name": "agg"},
        "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"a": "b"}}]}});
    assert_eq!(
        write(None, &aggregating),
        Err("clusterroles.rbac.authorization.k8s.io \"agg\" is forbidden: must have cluster-admin privileges to use the aggregationRule".to_owned())
    );
    // Its aggregated rules may change (the controller's writes) when the rule stays.
    let aggregated = json!({"metadata": {"name": "agg"},
        "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"a": "b"}}]},
        "rules": [rule("get", "", "pods", "")]});
    assert_eq!(write(Some(&aggregating), &aggregated), Ok(()));
    // Only owner references or finalizers changed: never refused, whatever the rules.
    let big = json!({"metadata": {"name": "big", "resourceVersion": "1"}, "rules": [rule("*", "*", "*", "")]});
    let owned = json!({"metadata": {"name": "big", "resourceVersion": "2",
        "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": "u"}]},
        "rules": [rule("*", "*", "*", "")]});
    assert_eq!(write(Some(&big), &owned), Ok(()));
    assert!(
        write(None, &big)
            .unwrap_err()
            .contains("attempting to grant RBAC permissions not currently held")
    );
    // With `escalate`, anything goes.
    feed(
        &rbac,
        "clusterroles",
        "",
        role(
            "escalator",
            vec![rule("escalate", GROUP, "clusterroles", "")],
        ),
    );
    feed(
        &rbac,
        "clusterrolebindings",
        "",
        binding("bob-escalates", "ClusterRole", "escalator", &["User:bob"]),
    );
    assert_eq!(write(None, &big), Ok(()));
    assert_eq!(
        write(None, &aggregating),
        Ok(()),
        "escalate skips the aggregation check too"
    );
}

/// kube's `TestAppliesTo`: which subject of a binding names the user (the reason names it).
#[test]
fn applies_to_as_kubes_table() {
    for (subjects, who, namespace, applies, case) in [
        (
            &["User:foobar"][..],
            user("foobar", ""),
            "ns",
            Some("User \"foobar\""),
            "single subject that matches username",
        ),
        (
            &["User:barfoo", "User:foobar"],
            user("foobar", ""),
            "ns",
            Some("User \"foobar\""),
            "multiple subjects, one that matches username",
        ),
        (
            &["User:barfoo", "User:foobar"],
            user("zimzam", ""),
            "ns",
            None,
            "multiple subjects, none that match username",
        ),
        (
            &["User:barfoo", "Group:foobar"],
            user("zimzam", "foobar"),
            "",
            Some("Group \"foobar\""),
            "one that matches a group",
        ),
        (
            &["User:barfoo", "Group:foobar"],
            user("zimzam", "foobar"),
            "namespace1",
            Some("Group \"foobar\""),
            "a group, whatever the namespace",
        ),
        (
            &[
                "User:barfoo",
                "Group:foobar",
                "ServiceAccount:kube-system/default",
            ],
            user("system:serviceaccount:kube-system:default", ""),
            "default",
            Some("ServiceAccount \"default/kube-system\""),
            "a service account that matches",
        ),
        (
            &["User:*"],
            user("foobar", ""),
            "default",
            None,
            "* user subject name doesn't match all users",
        ),
        (
            &["Group:system:authenticated", "Group:system:unauthenticated"],
            user("foobar", "system:authenticated"),
            "default",
            Some("Group \"system:authenticated\""),
            "all authenticated",
        ),
        (
            &["Group:system:authenticated", "Group:system:unauthenticated"],
            user("system:anonymous", "system:unauthenticated"),
            "default",
            Some("Group \"system:unauthenticated\""),
            "anonymous",
        ),
    ] {
        let rbac = Rbac::new();
        feed(
            &rbac,
            "clusterroles",
            "",
            role("all", vec![rule("*", "*", "*", "")]),
        );
        let plural = if namespace.is_empty() {
            "clusterrolebindings"
        } else {
            "rolebindings"
        };
        feed(
            &rbac,
            plural,
            namespace,
            binding("b", "ClusterRole", "all", subjects),
        );
        let pods = def("", "pods");
        let get = Attributes::Resource {
            verb: "get",
            def: &pods,
            namespace,
            name: "x",
            subresource: "",
        };
        let reason = rbac.allowed_by(&who, &get);
        assert_eq!(
            reason.as_deref().map(|r| r.rsplit_once(" to ").unwrap().1),
            applies,
            "{case}"
        );
        assert_eq!(rbac.allows(&who, &get), applies.is_some(), "{case}");
    }
}

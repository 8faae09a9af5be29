//! kube's `checker_test.go`, case for case: the same requests, rules and expected levels.

use super::*;

const TIM_GROUPS: [&str; 2] = ["humans", "developers"];

fn groups() -> Vec<String> {
    TIM_GROUPS.iter().map(|g| (*g).to_owned()).collect()
}

fn request<'a>(name: &str, groups: &'a [String]) -> Attributes<'a> {
    let tim = Attributes {
        user: Some("tim@k8s.io"),
        groups,
        verb: "get",
        ..Attributes::default()
    };
    match name {
        "namespaced" => Attributes {
            namespace: "default",
            resource: "pods",
            name: "busybox",
            resource_request: true,
            path: "/api/v1/namespaces/default/pods/busybox",
            ..tim
        },
        "cluster" => Attributes {
            group: "rbac.authorization.k8s.io",
            resource: "clusterroles",
            name: "edit",
            resource_request: true,
            path: "/apis/rbac.authorization.k8s.io/v1beta1/clusterroles/edit",
            ..tim
        },
        "nonResource" => Attributes {
            path: "/logs/kubelet.log",
            ..tim
        },
        "subresource" => Attributes {
            namespace: "default",
            resource: "pods",
            subresource: "log",
            name: "busybox",
            resource_request: true,
            path: "/api/v1/namespaces/default/pods/busybox",
            ..tim
        },
        "Unauthorized" => Attributes {
            user: None,
            groups: &[],
            namespace: "default",
            resource: "pods",
            name: "busybox",
            resource_request: true,
            path: "/api/v1/namespaces/default/pods/busybox",
            ..tim
        },
        other => panic!("no request {other}"),
    }
}

fn rule(name: &str) -> Value {
    use serde_json::json;
    match name {
        "default" => json!({"level": "Metadata"}),
        "create" => json!({"level": "Request", "verbs": ["create"]}),
        "tims" => json!({"level": "Metadata", "users": ["tim@k8s.io"]}),
        "humans" => json!({"level": "Metadata", "userGroups": ["humans"]}),
        "serviceAccounts" => json!({"level": "Request", "userGroups": ["system:serviceaccounts"]}),
        "getPods" => {
            json!({"level": "RequestResponse", "verbs": ["get"], "resources": [{"resources": ["pods"]}]})
        }
        "getPodLogs" => {
            json!({"level": "Request", "verbs": ["get"], "resources": [{"resources": ["pods/log"]}]})
        }
        "getPodWildcardMatching" => {
            json!({"level": "Request", "verbs": ["get"], "resources": [{"resources": ["*"]}]})
        }
        "getPodResourceWildcardMatching" => {
            json!({"level": "Request", "verbs": ["get"], "resources": [{"resources": ["*/log"]}]})
        }
        "getPodSubResourceWildcardMatching" => {
            json!({"level": "Request", "verbs": ["get"], "resources": [{"resources": ["pods/*"]}]})
        }
        "getClusterRoles" => json!({"level": "RequestResponse", "verbs": ["get"],
            "resources": [{"group": "rbac.authorization.k8s.io", "resources": ["clusterroles"]}],
            "namespaces": [""]}),
        "getLogs" => {
            json!({"level": "RequestResponse", "verbs": ["get"], "nonResourceURLs": ["/logs*"]})
        }
        "getMetrics" => {
            json!({"level": "Request", "verbs": ["get"], "nonResourceURLs": ["/metrics"]})
        }
        "clusterRoleEdit" => {
            json!({"level": "Request", "resources": [{"group": "rbac.authorization.k8s.io",
            "resources": ["clusterroles"], "resourceNames": ["edit"]}]})
        }
        "omit RequestReceived" => json!({"level": "Request", "omitStages": ["RequestReceived"]}),
        "only audit panic" => json!({"level": "Request",
            "omitStages": ["RequestReceived", "ResponseStarted", "ResponseComplete"]}),
        other => panic!("no rule {other}"),
    }
}

fn policy(policy_stages: &[&str], rules: &[&str]) -> Policy {
    let rules: Vec<Value> = rules.iter().map(|r| rule(r)).collect();
    let document = serde_json::json!({
        "apiVersion": "audit.k8s.io/v1", "kind": "Policy",
        "omitStages": policy_stages, "rules": rules,
    });
    Policy::from_bytes(document.to_string().as_bytes()).expect("a valid policy")
}

fn stage_set(names: &[&str]) -> Stages {
    names.iter().fold(Stages::default(), |set, name| {
        set.with(
            *Stage::ALL
                .iter()
                .find(|s| s.as_str() == *name)
                .expect("a stage"),
        )
    })
}

#[track_caller]
fn check(req: &str, level: Level, policy_stages: &[&str], omitted: &[&str], rules: &[&str]) {
    let groups = groups();
    let decision = policy(policy_stages, rules).evaluate(&request(req, &groups));
    assert_eq!(decision.level, level, "request {req}, rules {rules:?}");
    assert_eq!(
        decision.omit_stages,
        stage_set(omitted),
        "request {req}, rules {rules:?}"
    );
}

fn levels(stages: &[&str]) {
    use Level::{Metadata, None, Request, RequestResponse};
    let s = stages;
    check("namespaced", Metadata, s, s, &["default"]);
    check("namespaced", None, s, s, &["create"]);
    check("namespaced", Metadata, s, s, &["tims"]);
    check("namespaced", Metadata, s, s, &["humans"]);
    check("namespaced", None, s, s, &["serviceAccounts"]);
    check("namespaced", RequestResponse, s, s, &["getPods"]);
    check("namespaced", None, s, s, &["getClusterRoles"]);
    check("namespaced", None, s, s, &["getLogs"]);
    check("namespaced", None, s, s, &["getMetrics"]);
    let rules = ["getMetrics", "serviceAccounts", "default"];
    check("namespaced", Metadata, s, s, &rules);
    let rules = ["getMetrics", "getPods", "default"];
    check("namespaced", RequestResponse, s, s, &rules);
    check(
        "namespaced",
        RequestResponse,
        s,
        s,
        &["getPodLogs", "getPods"],
    );

    check("cluster", Metadata, s, s, &["default"]);
    check("cluster", None, s, s, &["create"]);
    check("cluster", Metadata, s, s, &["tims"]);
    check("cluster", Metadata, s, s, &["humans"]);
    check("cluster", None, s, s, &["serviceAccounts"]);
    check("cluster", None, s, s, &["getPods"]);
    check("cluster", RequestResponse, s, s, &["getClusterRoles"]);
    check(
        "cluster",
        Request,
        s,
        s,
        &["clusterRoleEdit", "getClusterRoles"],
    );
    check("cluster", None, s, s, &["getLogs"]);
    check("cluster", None, s, s, &["getMetrics"]);
    let rules = ["getMetrics", "serviceAccounts", "default"];
    check("cluster", Metadata, s, s, &rules);
    let rules = ["getMetrics", "getClusterRoles", "default"];
    check("cluster", RequestResponse, s, s, &rules);
    check("cluster", None, s, s, &["getPodLogs", "getPods"]);

    check("nonResource", Metadata, s, s, &["default"]);
    check("nonResource", None, s, s, &["create"]);
    check("nonResource", Metadata, s, s, &["tims"]);
    check("nonResource", Metadata, s, s, &["humans"]);
    check("nonResource", None, s, s, &["serviceAccounts"]);
    check("nonResource", None, s, s, &["getPods"]);
    check("nonResource", None, s, s, &["getClusterRoles"]);
    check("nonResource", RequestResponse, s, s, &["getLogs"]);
    check("nonResource", None, s, s, &["getMetrics"]);
    let rules = ["getMetrics", "serviceAccounts", "default"];
    check("nonResource", Metadata, s, s, &rules);
    let rules = ["getLogs", "getClusterRoles", "default"];
    check("nonResource", RequestResponse, s, s, &rules);
    check("nonResource", None, s, s, &["getPodLogs", "getPods"]);

    check("subresource", Request, s, s, &["getPodLogs", "getPods"]);
    check("subresource", Request, s, s, &["getPodWildcardMatching"]);
    check(
        "subresource",
        Request,
        s,
        s,
        &["getPodResourceWildcardMatching"],
    );
    check(
        "subresource",
        Request,
        s,
        s,
        &["getPodSubResourceWildcardMatching"],
    );

    check("Unauthorized", None, s, s, &["tims"]);
    check("Unauthorized", Metadata, s, s, &["tims", "default"]);
    check("Unauthorized", None, s, s, &["humans"]);
    check("Unauthorized", Metadata, s, s, &["humans", "default"]);
}

#[test]
fn checker() {
    levels(&[]);
    let omit = ["RequestReceived"];
    let panic_only = ["RequestReceived", "ResponseStarted", "ResponseComplete"];
    for req in ["namespaced", "cluster", "nonResource"] {
        let rules = ["omit RequestReceived", "getPods", "default"];
        check(req, Level::Request, &[], &omit, &rules);
        let rules = ["only audit panic", "getPods", "default"];
        check(req, Level::Request, &[], &panic_only, &rules);
    }
}

#[test]
fn checker_policy_omit_stages() {
    let policy_stages = ["RequestReceived", "ResponseStarted"];
    levels(&policy_stages);
    let panic_only = ["RequestReceived", "ResponseStarted", "ResponseComplete"];
    for req in ["namespaced", "cluster"] {
        let rules = ["omit RequestReceived", "getPods", "default"];
        check(req, Level::Request, &policy_stages, &policy_stages, &rules);
        let rules = ["only audit panic", "getPods", "default"];
        check(req, Level::Request, &policy_stages, &panic_only, &rules);
    }
    let rules = ["default", "omit RequestReceived", "getPods"];
    check(
        "nonResource",
        Level::Metadata,
        &policy_stages,
        &policy_stages,
        &rules,
    );
    let rules = ["only audit panic", "getPods", "default"];
    check(
        "nonResource",
        Level::Request,
        &policy_stages,
        &panic_only,
        &rules,
    );
}

#[test]
fn omit_managed_fields_rule_overrides_policy() {
    let groups = groups();
    let get = request("nonResource", &groups);
    for (policy_wide, rule_value, want) in [
        (false, None, false),
        (true, None, true),
        (true, Some(false), false),
        (false, Some(true), true),
    ] {
        let mut rule = serde_json::json!({"level": "RequestResponse", "verbs": ["get"]});
        if let Some(value) = rule_value {
            rule["omitManagedFields"] = Value::Bool(value);
        }
        let document = serde_json::json!({"apiVersion": "audit.k8s.io/v1", "kind": "Policy",
            "omitManagedFields": policy_wide, "rules": [rule]});
        let policy = Policy::from_bytes(document.to_string().as_bytes()).unwrap();
        assert_eq!(policy.evaluate(&get).omit_managed_fields, want);
    }
}

#[test]
fn yaml_policies_are_read() {
    let yaml = b"apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: Metadata\n  nonResourceURLs: [\"/healthz*\"]\n- level: None\n";
    let policy = Policy::from_bytes(yaml).unwrap();
    let healthz = Attributes {
        user: Some("u"),
        verb: "get",
        path: "/healthz/ping",
        ..Attributes::default()
    };
    let decision = policy.evaluate(&healthz);
    assert_eq!(decision.level, Level::Metadata);
    assert!(decision.omit_stages.contains(Stage::RequestReceived));
    assert!(!decision.omit_stages.contains(Stage::ResponseComplete));
    let other = Attributes {
        path: "/version",
        ..healthz
    };
    assert_eq!(policy.evaluate(&other).level, Level::None);
}

#[test]
fn invalid_policies_are_refused_with_kubes_messages() {
    let refused = |text: &str| Policy::from_bytes(text.as_bytes()).unwrap_err();
    assert_eq!(
        refused("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: []\n"),
        "loaded illegal policy with 0 rules"
    );
    assert_eq!(
        refused("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Everything\n"),
        "rules[0].level: Unsupported value: \"Everything\": supported values: \"None\", \"Metadata\", \"Request\", \"RequestResponse\""
    );
    assert_eq!(
        refused(
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n- verbs: [get]\n  nonResourceURLs: [healthz, /a*b]\n  namespaces: [x]\n"
        ),
        "[rules[1].level: Required value, rules[1].nonResourceURLs[0]: Invalid value: \"healthz\": non-resource URL rules must begin with a '/' character, rules[1].nonResourceURLs[1]: Invalid value: \"/a*b\": non-resource URL wildcards '*' must be the final character of the rule, rules[1].nonResourceURLs: Invalid value: []string{\"healthz\", \"/a*b\"}: rules cannot apply to both regular resources and non-resource URLs]"
    );
    assert_eq!(
        refused(
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n  omitStages: [Done]\n  resources: [{group: Apps, resourceNames: [x]}]\n"
        ),
        "[rules[0].resources.group: Invalid value: \"Apps\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*'), rules[0].resources.resourceNames: Invalid value: []string{\"x\"}: using resourceNames requires at least one resource, rules[0].omitStages[0]: Invalid value: \"Done\": allowed stages are RequestReceived,ResponseStarted,ResponseComplete,Panic]"
    );
    assert!(
        refused("apiVersion: audit.k8s.io/v2\nkind: Policy\nrules: [{level: None}]\n")
            .contains("no kind \"Policy\" is registered for version \"audit.k8s.io/v2\"")
    );
    assert!(refused("rules: [{level: None}]\n").contains("Object 'Kind' is missing"));
}

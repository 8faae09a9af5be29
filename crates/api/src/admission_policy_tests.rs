use serde_json::json;

use super::*;
use crate::resources::builtin_resources;

fn def(group: &str, plural: &str) -> ResourceDef {
    builtin_resources()
        .into_iter()
        .find(|d| d.group == group && d.plural == plural)
        .unwrap()
}

/// Namespaces, ConfigMaps as params, and `apps/v1beta1` as another version of deployments.
#[derive(Default)]
struct Fake {
    namespaces: Vec<Value>,
    config_maps: Vec<Value>,
}

impl Cluster for Fake {
    fn namespace(&self, name: &str) -> Option<Value> {
        self.namespaces
            .iter()
            .find(|n| text(n, "/metadata/name") == name)
            .cloned()
    }
    fn param_scope(&self, api_version: &str, kind: &str) -> Option<bool> {
        match (api_version, kind) {
            ("v1", "ConfigMap") => Some(true),
            ("v1", "Node") => Some(false),
            _ => None,
        }
    }
    fn params(&self, api_version: &str, kind: &str, namespace: &str) -> Vec<Value> {
        if (api_version, kind) != ("v1", "ConfigMap") {
            return Vec::new();
        }
        self.config_maps
            .iter()
            .filter(|c| text(c, "/metadata/namespace") == namespace)
            .cloned()
            .collect()
    }
    fn equivalents(&self, group: &str, resource: &str) -> Vec<Equivalent> {
        if (group, resource) != ("apps", "deployments") {
            return Vec::new();
        }
        vec![Equivalent {
            group: "apps".into(),
            version: "v1beta1".into(),
            resource: "deployments".into(),
            kind: "Deployment".into(),
        }]
    }
}

fn cluster() -> Fake {
    Fake {
        namespaces: vec![
            json!({"metadata": {"name": "prod", "labels": {"env": "prod"}}, "spec": {"finalizers": ["kubernetes"]}}),
            json!({"metadata": {"name": "dev", "labels": {"env": "dev"}}}),
        ],
        config_maps: vec![
            json!({"metadata": {"name": "limits", "namespace": "prod", "labels": {"p": "yes"}}, "data": {"max": "5"}}),
            json!({"metadata": {"name": "strict", "namespace": "prod", "labels": {"p": "yes"}}, "data": {"max": "2"}}),
            json!({"metadata": {"name": "elsewhere", "namespace": "dev"}, "data": {"max": "1"}}),
        ],
    }
}

fn deployments_rule() -> Value {
    json!({"apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments"],
           "operations": ["CREATE", "UPDATE"]})
}

fn policy(name: &str, spec: Value) -> Value {
    let mut spec = spec;
    let spec_map = spec.as_object_mut().unwrap();
    spec_map
        .entry("matchConstraints")
        .or_insert_with(|| json!({"resourceRules": [deployments_rule()]}));
    spec_map.entry("failurePolicy").or_insert(json!("Fail"));
    json!({"metadata": {"name": name}, "spec": spec})
}

fn binding(name: &str, policy: &str, spec: Value) -> Value {
    let mut spec = spec;
    let spec_map = spec.as_object_mut().unwrap();
    spec_map.insert("policyName".into(), json!(policy));
    spec_map
        .entry("validationActions")
        .or_insert(json!(["Deny"]));
    json!({"metadata": {"name": name}, "spec": spec})
}

fn deployment(name: &str, replicas: i64, labels: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": name, "namespace": "prod", "labels": labels},
           "spec": {"replicas": replicas}})
}

fn attributes<'a>(
    def: &'a ResourceDef,
    operation: Operation,
    object: Option<&'a Value>,
    old: Option<&'a Value>,
) -> Attributes<'a> {
    let any = object.or(old).unwrap();
    Attributes {
        def,
        subresource: "",
        name: text(any, "/metadata/name"),
        namespace: text(any, "/metadata/namespace"),
        operation,
        object,
        old_object: old,
        user: json!({"username": "alice", "groups": ["devs", "system:authenticated"]}),
        dry_run: false,
        options: json!({"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}),
    }
}

/// The outcome of a create of `object` as a deployment in `prod`: the warnings, or the
/// Status's code, reason and message.
fn create(
    policies: &[Value],
    bindings: &[Value],
    object: &Value,
) -> Result<Vec<String>, (u16, String, String)> {
    let deployments = def("apps", "deployments");
    let attributes = attributes(&deployments, Operation::Create, Some(object), None);
    admit(policies, bindings, &attributes, &cluster()).map_err(|e| (e.code, e.reason, e.message))
}

fn denied(code: u16, reason: &str, message: &str) -> Result<Vec<String>, (u16, String, String)> {
    Err((code, reason.to_owned(), message.to_owned()))
}

#[test]
fn a_false_validation_denies_with_kubes_status_and_a_true_one_admits() {
    let policies = [policy(
        "max-replicas",
        json!({"validations": [{"expression": "object.spec.replicas <= 5"}]}),
    )];
    let bindings = [binding("max-replicas-binding", "max-replicas", json!({}))];
    assert_eq!(
        create(&policies, &bindings, &deployment("web", 5, json!({}))),
        Ok(vec![])
    );
    assert_eq!(
        create(&policies, &bindings, &deployment("web", 6, json!({}))),
        denied(
            422,
            "Invalid",
            "deployments.apps \"web\" is forbidden: ValidatingAdmissionPolicy 'max-replicas' with binding 'max-replicas-binding' denied request: failed expression: object.spec.replicas <= 5"
        )
    );
    // The message is also the Status's one cause.
    let deployments = def("apps", "deployments");
    let object = deployment("web", 6, json!({}));
    let error = admit(
        &policies,
        &bindings,
        &attributes(&deployments, Operation::Create, Some(&object), None),
        &cluster(),
    )
    .unwrap_err();
    assert_eq!(
        error.details,
        Some(
            json!({"name": "web", "group": "apps", "kind": "deployments", "causes": [{"message":
            "ValidatingAdmissionPolicy 'max-replicas' with binding 'max-replicas-binding' denied request: failed expression: object.spec.replicas <= 5"}]})
        )
    );
    // Without a binding, or with a binding of another policy, nothing is evaluated.
    let six = deployment("web", 6, json!({}));
    assert_eq!(create(&policies, &[], &six), Ok(vec![]));
    let other = [binding("b", "other", json!({}))];
    assert_eq!(create(&policies, &other, &six), Ok(vec![]));
}

/// A policy using kube's quantity library and the sets extension is enforced (both were
/// skipped, admitting everything, before they were here).
#[test]
fn quantity_and_sets_policies_are_enforced() {
    let policies = [policy(
        "small-and-labelled",
        json!({"validations": [
            {"expression": "!has(object.metadata.annotations) || !('memory' in object.metadata.annotations) || quantity(object.metadata.annotations.memory).isLessThan(quantity('1Gi'))",
             "message": "too much memory"},
            {"expression": "sets.contains(object.metadata.labels.map(k, k), ['team'])",
             "message": "needs a team label"}]}),
    )];
    let bindings = [binding("b", "small-and-labelled", json!({}))];
    let mut small = deployment("web", 1, json!({"team": "a"}));
    small["metadata"]["annotations"] = json!({"memory": "512Mi"});
    assert_eq!(create(&policies, &bindings, &small), Ok(vec![]));
    let mut large = small.clone();
    large["metadata"]["annotations"] = json!({"memory": "2Gi"});
    assert_eq!(
        create(&policies, &bindings, &large),
        denied(
            422,
            "Invalid",
            "deployments.apps \"web\" is forbidden: ValidatingAdmissionPolicy 'small-and-labelled' with binding 'b' denied request: too much memory"
        )
    );
    let unlabelled = deployment("web", 1, json!({"app": "web"}));
    assert_eq!(
        create(&policies, &bindings, &unlabelled),
        denied(
            422,
            "Invalid",
            "deployments.apps \"web\" is forbidden: ValidatingAdmissionPolicy 'small-and-labelled' with binding 'b' denied request: needs a team label"
        )
    );
}

#[test]
fn messages_come_from_message_expression_then_message_and_reasons_set_the_code() {
    let validations = json!([
        {"expression": "object.spec.replicas < 1", "messageExpression": "'replicas ' + string(object.spec.replicas) + ' too many'", "message": "unused", "reason": "Forbidden"},
    ]);
    let policies = [policy("p", json!({"validations": validations}))];
    let bindings = [binding("b", "p", json!({}))];
    let one = deployment("web", 3, json!({}));
    assert_eq!(
        create(&policies, &bindings, &one),
        denied(
            403,
            "Forbidden",
            "deployments.apps \"web\" is forbidden: ValidatingAdmissionPolicy 'p' with binding 'b' denied request: replicas 3 too many"
        )
    );
    for (reason, code) in [
        ("Unauthorized", 401),
        ("RequestEntityTooLarge", 413),
        ("Invalid", 422),
    ] {
        // A message expression that is not a usable string falls back to `message`.
        let policies = [policy(
            "p",
            json!({"validations": [
            {"expression": "false", "messageExpression": "'two\\nlines'", "message": " too big ", "reason": reason}]}),
        )];
        let got = create(&policies, &bindings, &one).unwrap_err();
        assert_eq!((got.0, got.1.as_str()), (code, reason));
        assert!(got.2.ends_with("denied request: too big"), "{}", got.2);
    }
}

#[test]
fn resource_rules_match_groups_versions_resources_subresources_operations_and_scope() {
    let deployments = def("apps", "deployments");
    let object = deployment("web", 1, json!({}));
    let decide = |rule: Value, subresource: &str, operation: Operation, exclude: Value| {
        let policies = [policy(
            "p",
            json!({
            "matchConstraints": {"resourceRules": [rule], "excludeResourceRules": exclude},
            "validations": [{"expression": "false"}]}),
        )];
        let bindings = [binding("b", "p", json!({}))];
        let mut attributes = attributes(&deployments, operation, Some(&object), None);
        attributes.subresource = subresource;
        admit(&policies, &bindings, &attributes, &cluster()).is_err()
    };
    let rule = |groups: &[&str], resources: &[&str], operations: &[&str], scope: &str| {
        json!({"apiGroups": groups, "apiVersions": ["*"], "resources": resources,
               "operations": operations, "scope": scope})
    };
    let none = json!([]);
    assert!(decide(
        rule(&["apps"], &["deployments"], &["CREATE"], "*"),
        "",
        Operation::Create,
        none.clone()
    ));
    assert!(!decide(
        rule(&["apps"], &["deployments"], &["UPDATE"], "*"),
        "",
        Operation::Create,
        none.clone()
    ));
    assert!(decide(
        rule(&["*"], &["*"], &["*"], "Namespaced"),
        "",
        Operation::Update,
        none.clone()
    ));
    assert!(!decide(
        rule(&["*"], &["*"], &["*"], "Cluster"),
        "",
        Operation::Update,
        none.clone()
    ));
    assert!(!decide(
        rule(&[""], &["*"], &["*"], "*"),
        "",
        Operation::Create,
        none.clone()
    ));
    // `*` is the main resource only; subresources are named.
    assert!(!decide(
        rule(&["apps"], &["*"], &["*"], "*"),
        "status",
        Operation::Update,
        none.clone()
    ));
    assert!(decide(
        rule(&["apps"], &["deployments/status"], &["*"], "*"),
        "status",
        Operation::Update,
        none.clone()
    ));
    assert!(decide(
        rule(&["apps"], &["*/scale"], &["*"], "*"),
        "scale",
        Operation::Update,
        none.clone()
    ));
    assert!(!decide(
        rule(&["apps"], &["*/scale"], &["*"], "*"),
        "status",
        Operation::Update,
        none.clone()
    ));
    assert!(decide(
        rule(&["apps"], &["deployments/*"], &["*"], "*"),
        "status",
        Operation::Update,
        none.clone()
    ));
    assert!(decide(
        rule(&["apps"], &["*/*"], &["*"], "*"),
        "",
        Operation::Update,
        none.clone()
    ));
    // Excluded, and named resources.
    let excluded = json!([{"apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments"],
        "operations": ["*"], "resourceNames": ["web"]}]);
    assert!(!decide(
        rule(&["*"], &["*"], &["*"], "*"),
        "",
        Operation::Create,
        excluded
    ));
    let other_name = json!([{"apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments"],
        "operations": ["*"], "resourceNames": ["api"]}]);
    assert!(decide(
        rule(&["*"], &["*"], &["*"], "*"),
        "",
        Operation::Create,
        other_name
    ));
}

#[test]
fn equivalent_match_policy_matches_another_version_and_says_so_in_the_request() {
    let rule = json!({"apiGroups": ["apps"], "apiVersions": ["v1beta1"], "resources": ["deployments"], "operations": ["*"]});
    let decide = |policy_kind: &str| {
        let policies = [policy(
            "p",
            json!({
            "matchConstraints": {"resourceRules": [rule.clone()], "matchPolicy": policy_kind},
            "validations": [{"expression": "request.kind.version == 'v1'", "messageExpression": "request.resource.version + '/' + request.requestResource.version"}]}),
        )];
        create(
            &policies,
            &[binding("b", "p", json!({}))],
            &deployment("web", 1, json!({})),
        )
    };
    assert_eq!(decide("Exact"), Ok(vec![]));
    let (_, _, message) = decide("Equivalent").unwrap_err();
    assert!(message.ends_with("denied request: v1beta1/v1"), "{message}");
}

#[test]
fn namespace_and_object_selectors_of_policies_and_bindings_choose_what_is_evaluated() {
    let policies = [policy(
        "p",
        json!({"validations": [{"expression": "false"}]}),
    )];
    let with = |resources: Value| [binding("b", "p", json!({"matchResources": resources}))];
    let labelled = deployment("web", 1, json!({"tier": "front"}));
    let plain = deployment("web", 1, json!({}));
    let prod = with(json!({"namespaceSelector": {"matchLabels": {"env": "prod"}}}));
    assert!(create(&policies, &prod, &plain).is_err());
    let dev = with(
        json!({"namespaceSelector": {"matchExpressions": [{"key": "env", "operator": "In", "values": ["dev"]}]}}),
    );
    assert_eq!(create(&policies, &dev, &plain), Ok(vec![]));
    let front = with(json!({"objectSelector": {"matchLabels": {"tier": "front"}}}));
    assert!(create(&policies, &front, &labelled).is_err());
    assert_eq!(create(&policies, &front, &plain), Ok(vec![]));
    // On an update the old object's labels count too.
    let deployments = def("apps", "deployments");
    let attrs = attributes(
        &deployments,
        Operation::Update,
        Some(&plain),
        Some(&labelled),
    );
    assert!(admit(&policies, &front, &attrs, &cluster()).is_err());
    // A policy's own constraints select too.
    let constrained = [policy(
        "p",
        json!({
        "matchConstraints": {"resourceRules": [deployments_rule()], "objectSelector": {"matchLabels": {"tier": "front"}}},
        "validations": [{"expression": "false"}]}),
    )];
    assert_eq!(
        create(&constrained, &[binding("b", "p", json!({}))], &plain),
        Ok(vec![])
    );
}

#[test]
fn match_conditions_skip_when_false_and_follow_the_failure_policy_on_errors() {
    let with = |conditions: Value, failure: &str| {
        [policy(
            "p",
            json!({"failurePolicy": failure, "matchConditions": conditions,
            "validations": [{"expression": "false", "message": "no"}]}),
        )]
    };
    let bindings = [binding("b", "p", json!({}))];
    let object = deployment("web", 1, json!({}));
    let skip = with(
        json!([{"name": "is-big", "expression": "object.spec.replicas > 3"}]),
        "Fail",
    );
    assert_eq!(create(&skip, &bindings, &object), Ok(vec![]));
    let run = with(
        json!([{"name": "is-small", "expression": "object.spec.replicas < 3"}]),
        "Fail",
    );
    assert!(
        create(&run, &bindings, &object)
            .unwrap_err()
            .2
            .ends_with("denied request: no")
    );
    let broken = json!([{"name": "broken", "expression": "object.spec.missing == 1"}]);
    assert_eq!(
        create(&with(broken.clone(), "Fail"), &bindings, &object)
            .unwrap_err()
            .2,
        "deployments.apps \"web\" is forbidden: ValidatingAdmissionPolicy 'p' with binding 'b' denied request: expression 'object.spec.missing == 1' resulted in error: no such key: missing"
    );
    assert_eq!(
        create(&with(broken, "Ignore"), &bindings, &object),
        Ok(vec![])
    );
}

#[test]
fn evaluation_errors_deny_under_fail_and_are_ignored_under_ignore() {
    let with = |failure: &str| {
        [policy(
            "p",
            json!({"failurePolicy": failure,
            "validations": [{"expression": "object.spec.replicas / 0 == 1"}]}),
        )]
    };
    let bindings = [binding("b", "p", json!({}))];
    let object = deployment("web", 1, json!({}));
    assert_eq!(
        create(&with("Fail"), &bindings, &object),
        denied(
            422,
            "Invalid",
            "deployments.apps \"web\" is forbidden: ValidatingAdmissionPolicy 'p' with binding 'b' denied request: expression 'object.spec.replicas / 0 == 1' resulted in error: division by zero"
        )
    );
    assert_eq!(create(&with("Ignore"), &bindings, &object), Ok(vec![]));
    // An expression past the cost limit does not run: kube's cancellation, as an error.
    let costly = [policy(
        "p",
        json!({"validations": [{"expression":
        "[1,2,3,4,5,6,7,8,9,10].all(a, [1,2,3,4,5,6,7,8,9,10].all(b, [1,2,3,4,5,6,7,8,9,10].all(c, [1,2,3,4,5,6,7,8,9,10].all(d, [1,2,3,4,5,6,7,8,9,10].all(e, [1,2,3,4,5,6,7,8,9,10].all(f, [1,2,3,4,5,6,7,8,9,10].all(g, true)))))))"}]}),
    )];
    let message = create(&costly, &bindings, &object).unwrap_err().2;
    assert!(
        message.ends_with("resulted in error: operation cancelled: actual cost limit exceeded"),
        "{message}"
    );
}

#[test]
fn params_are_looked_up_by_name_or_selector_with_one_evaluation_each() {
    let policies = [policy(
        "p",
        json!({
        "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
        "validations": [{"expression": "object.spec.replicas <= int(params.data.max)",
            "messageExpression": "'at most ' + params.data.max"}]}),
    )];
    let object = deployment("web", 3, json!({}));
    let named = |name: &str, action: &str| {
        [binding(
            "b",
            "p",
            json!({"paramRef": {"name": name, "parameterNotFoundAction": action}}),
        )]
    };
    assert_eq!(
        create(&policies, &named("limits", "Deny"), &object),
        Ok(vec![])
    );
    assert!(
        create(&policies, &named("strict", "Deny"), &object)
            .unwrap_err()
            .2
            .ends_with("denied request: at most 2")
    );
    // Not found: Allow evaluates nothing, Deny refuses.
    assert_eq!(
        create(&policies, &named("absent", "Allow"), &object),
        Ok(vec![])
    );
    assert_eq!(
        create(&policies, &named("absent", "Deny"), &object),
        denied(
            422,
            "Invalid",
            "deployments.apps \"web\" is forbidden: ValidatingAdmissionPolicy 'p' with binding 'b' denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"
        )
    );
    // Another namespace's param, named by the binding.
    let elsewhere = [binding(
        "b",
        "p",
        json!({"paramRef": {"name": "elsewhere", "namespace": "dev", "parameterNotFoundAction": "Deny"}}),
    )];
    assert!(
        create(&policies, &elsewhere, &object)
            .unwrap_err()
            .2
            .ends_with("denied request: at most 1")
    );
    // A selector: every param it selects is one evaluation; the warnings show each.
    let selected = [binding(
        "b",
        "p",
        json!({"validationActions": ["Warn"],
        "paramRef": {"selector": {"matchLabels": {"p": "yes"}}, "parameterNotFoundAction": "Deny"}}),
    )];
    let object = deployment("web", 9, json!({}));
    assert_eq!(
        create(&policies, &selected, &object),
        Ok(vec![
            "Validation failed for ValidatingAdmissionPolicy 'p' with binding 'b': at most 5"
                .to_owned(),
            "Validation failed for ValidatingAdmissionPolicy 'p' with binding 'b': at most 2"
                .to_owned(),
        ])
    );
    // A kind no resource serves is the policy's configuration error.
    let unknown = [policy(
        "q",
        json!({"paramKind": {"apiVersion": "example.com/v1", "kind": "Limit"},
        "validations": [{"expression": "true"}]}),
    )];
    assert_eq!(
        create(
            &unknown,
            &[binding(
                "b",
                "q",
                json!({"paramRef": {"name": "x", "parameterNotFoundAction": "Deny"}})
            )],
            &object
        )
        .unwrap_err()
        .2,
        "deployments.apps \"web\" is forbidden: ValidatingAdmissionPolicy 'q' denied request: failed to configure policy: failed to find resource referenced by paramKind: 'example.com/v1, Kind=Limit'"
    );
}

#[test]
fn variables_are_evaluated_when_used_and_their_errors_fail_what_uses_them() {
    let policies = [policy(
        "p",
        json!({
        "variables": [
            {"name": "replicas", "expression": "object.spec.replicas"},
            {"name": "doubled", "expression": "variables.replicas * 2"},
            {"name": "broken", "expression": "object.spec.missing"}
        ],
        "validations": [
            {"expression": "variables.doubled <= 10", "messageExpression": "'doubled is ' + string(variables.doubled)"}
        ]}),
    )];
    let bindings = [binding("b", "p", json!({}))];
    assert_eq!(
        create(&policies, &bindings, &deployment("web", 5, json!({}))),
        Ok(vec![])
    );
    assert!(
        create(&policies, &bindings, &deployment("web", 6, json!({})))
            .unwrap_err()
            .2
            .ends_with("denied request: doubled is 12")
    );
    let uses_broken = [policy(
        "p",
        json!({
        "variables": [{"name": "broken", "expression": "object.spec.missing"}],
        "validations": [{"expression": "variables.broken == 1"}]}),
    )];
    assert_eq!(
        create(&uses_broken, &bindings, &deployment("web", 1, json!({})))
            .unwrap_err()
            .2,
        "deployments.apps \"web\" is forbidden: ValidatingAdmissionPolicy 'p' with binding 'b' denied request: expression 'variables.broken == 1' resulted in error: composited variable \"broken\" fails to evaluate: no such key: missing"
    );
}

#[test]
fn the_request_old_object_and_namespace_are_kubes() {
    let policies = [policy(
        "p",
        json!({
        "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments"], "operations": ["*"]}]},
        "validations": [{"expression": "false", "messageExpression":
            "request.operation + ' ' + request.userInfo.username + ' ' + request.namespace + '/' + request.name + ' old=' + string(oldObject != null) + ' new=' + string(object != null) + ' ns=' + namespaceObject.metadata.labels.env + ' dry=' + string(request.dryRun)"}]}),
    )];
    let bindings = [binding("b", "p", json!({}))];
    let deployments = def("apps", "deployments");
    let object = deployment("web", 1, json!({}));
    let message = |operation, new: Option<&Value>, old: Option<&Value>| {
        let attrs = attributes(&deployments, operation, new, old);
        let message = admit(&policies, &bindings, &attrs, &cluster())
            .unwrap_err()
            .message;
        message
            .rsplit("denied request: ")
            .next()
            .unwrap()
            .to_owned()
    };
    assert_eq!(
        message(Operation::Create, Some(&object), None),
        "CREATE alice prod/web old=false new=true ns=prod dry=false"
    );
    assert_eq!(
        message(Operation::Update, Some(&object), Some(&object)),
        "UPDATE alice prod/web old=true new=true ns=prod dry=false"
    );
    assert_eq!(
        message(Operation::Delete, None, Some(&object)),
        "DELETE alice prod/web old=true new=false ns=prod dry=false"
    );
}

#[test]
fn warn_warns_audit_does_nothing_and_admission_configuration_is_exempt() {
    let policies = [policy(
        "p",
        json!({"validations": [{"expression": "false", "message": "m"}]}),
    )];
    let object = deployment("web", 1, json!({}));
    let warn = [binding(
        "b",
        "p",
        json!({"validationActions": ["Warn", "Audit"]}),
    )];
    assert_eq!(
        create(&policies, &warn, &object),
        Ok(vec![
            "Validation failed for ValidatingAdmissionPolicy 'p' with binding 'b': m".to_owned()
        ])
    );
    let audit = [binding("b", "p", json!({"validationActions": ["Audit"]}))];
    assert_eq!(create(&policies, &audit, &object), Ok(vec![]));
    // A policy matching everything does not see its own kind's writes.
    let everything = [policy(
        "p",
        json!({
        "matchConstraints": {"resourceRules": [{"apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"], "operations": ["*"]}]},
        "validations": [{"expression": "false"}]}),
    )];
    let bindings = [binding("b", "p", json!({}))];
    let vap = def(
        "admissionregistration.k8s.io",
        "validatingadmissionpolicies",
    );
    let attrs = attributes(&vap, Operation::Delete, None, Some(&everything[0]));
    assert!(admit(&everything, &bindings, &attrs, &cluster()).is_ok());
    assert!(is_exempt(&def(
        "admissionregistration.k8s.io",
        "validatingadmissionpolicybindings"
    )));
    assert!(!is_exempt(&def("apps", "deployments")));
}

#[test]
fn expressions_that_do_not_compile_are_the_policys_errors() {
    let errors = |spec: Value| -> Vec<String> {
        expression_errors(&json!({"spec": spec}))
            .into_iter()
            .map(|(path, expression, detail)| format!("{path}: {expression}: {detail}"))
            .collect()
    };
    assert_eq!(
        errors(json!({"validations": [{"expression": "object.spec.replicas <= 5"}]})),
        Vec::<String>::new()
    );
    let found = errors(json!({
        "variables": [{"name": "a", "expression": "variables.b"}, {"name": "b", "expression": "1"}],
        "matchConditions": [{"name": "c", "expression": "params.x"}],
        "validations": [{"expression": "object.(", "messageExpression": "foo + 'x'"}]}));
    assert_eq!(found.len(), 4, "{found:?}");
    // kube's order: the match conditions before the variables.
    assert!(found[0].starts_with("spec.matchConditions[0].expression: params.x: compilation failed: ERROR: <input>:1:1: undeclared reference to 'params' (in container '')"), "{}", found[0]);
    assert_eq!(
        found[1],
        "spec.variables[0].expression: variables.b: compilation failed: ERROR: <input>:1:10: undefined field 'b'\n | variables.b\n | .........^"
    );
    assert!(found[2].starts_with("spec.validations[0].expression: object.(: compilation failed: ERROR: <input>:1:8: Syntax error:"), "{}", found[2]);
    assert!(found[3].starts_with("spec.validations[0].messageExpression: foo + 'x': compilation failed: ERROR: <input>:1:1: undeclared reference to 'foo' (in container '')"), "{}", found[3]);
    // kube trims a match condition and an annotation's value before compiling them (their
    // columns count from the first non-blank), not a validation; it shows the trimmed match
    // condition, the others as written.
    let first_lines: Vec<String> = errors(json!({
        "matchConditions": [{"name": "c", "expression": "  foo(1)"}],
        "validations": [{"expression": "  foo(1)"}],
        "auditAnnotations": [{"key": "k", "valueExpression": "  foo(1)"}]}))
    .iter()
    .map(|e| e.lines().next().unwrap_or_default().to_owned())
    .collect();
    assert_eq!(
        first_lines,
        [
            "spec.matchConditions[0].expression: foo(1): compilation failed: ERROR: <input>:1:4: undeclared reference to 'foo' (in container '')",
            "spec.validations[0].expression:   foo(1): compilation failed: ERROR: <input>:1:6: undeclared reference to 'foo' (in container '')",
            "spec.auditAnnotations[0].valueExpression:   foo(1): compilation failed: ERROR: <input>:1:4: undeclared reference to 'foo' (in container '')",
        ]
    );
    // kube's validation declares no `variables` in match conditions (their compiler composes
    // none) and no `authorizer` in message expressions.
    let scoped = |spec: Value| -> Vec<String> {
        errors(spec)
            .iter()
            .map(|e| e.lines().next().unwrap_or_default().to_owned())
            .collect()
    };
    assert_eq!(
        scoped(json!({
            "variables": [{"name": "a", "expression": "1"}],
            "matchConditions": [{"name": "c", "expression": "variables.a == 1"}],
            "validations": [{"expression": "variables.a == 1 && authorizer.path('/').check('get').allowed()",
                "messageExpression": "authorizer.path('/').check('get').reason() + string(variables.a)"}]})),
        [
            "spec.matchConditions[0].expression: variables.a == 1: compilation failed: ERROR: <input>:1:1: undeclared reference to 'variables' (in container '')",
            "spec.validations[0].messageExpression: authorizer.path('/').check('get').reason() + string(variables.a): compilation failed: ERROR: <input>:1:1: undeclared reference to 'authorizer' (in container '')",
        ]
    );
    assert_eq!(
        scoped(
            json!({"paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "matchConditions": [{"name": "c", "expression": "params.data.a == '1' && authorizer.path('/').check('get').allowed()"}],
            "validations": [{"expression": "true", "messageExpression": "params.data.a"}]})
        ),
        Vec::<String>::new()
    );
    // Types: an operator without an overload, a result of another type.
    let typed = errors(json!({"validations": [
        {"expression": "1 + 'a' == 2"},
        {"expression": "'yes'", "messageExpression": "1 + 2"},
        {"expression": "object.spec.replicas + 1 > 2", "messageExpression": "'n=' + string(object.spec.replicas)"}]}));
    assert_eq!(typed.len(), 3, "{typed:?}");
    assert!(typed[0].starts_with("spec.validations[0].expression: 1 + 'a' == 2: compilation failed: ERROR: <input>:1:3: found no matching overload for '_+_' applied to '(int, string)'"), "{}", typed[0]);
    assert_eq!(
        typed[1],
        "spec.validations[1].expression: 'yes': must evaluate to bool"
    );
    assert_eq!(
        typed[2],
        "spec.validations[1].messageExpression: 1 + 2: must evaluate to string"
    );
    // With a paramKind, `params` is declared.
    assert!(
        errors(
            json!({"paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
        "validations": [{"expression": "params.data.x == 'y'"}]})
        )
        .is_empty()
    );
}

/// A create's outcome (as [`create`]'s) and its audit annotations.
type Audited = (
    Result<Vec<String>, (u16, String, String)>,
    Vec<(String, String)>,
);

/// The audit annotations of one create: the result and the annotations.
fn create_audited(policies: &[Value], bindings: &[Value], object: &Value) -> Audited {
    let deployments = def("apps", "deployments");
    let attributes = attributes(&deployments, Operation::Create, Some(object), None);
    let mut annotations = Vec::new();
    let result = admit_audited(
        policies,
        bindings,
        &attributes,
        &cluster(),
        None,
        &mut annotations,
    )
    .map_err(|e| (e.code, e.reason, e.message));
    (result, annotations)
}

#[test]
fn audit_action_and_audit_annotations_are_kubes_annotations() {
    let policies = [policy(
        "p",
        json!({"validations": [{"expression": "true"}, {"expression": "object.spec.replicas < 2", "message": "too many"}],
            "auditAnnotations": [
                {"key": "replicas", "valueExpression": "'replicas: ' + string(object.spec.replicas)"},
                {"key": "empty", "valueExpression": "'  '"},
                {"key": "none", "valueExpression": "null"}]}),
    )];
    let object = deployment("web", 3, json!({}));
    let audit = [binding(
        "b",
        "p",
        json!({"validationActions": ["Audit", "Warn"]}),
    )];
    let (result, annotations) = create_audited(&policies, &audit, &object);
    assert_eq!(result.unwrap().len(), 1);
    assert_eq!(
        annotations,
        [
            (
                "validation.policy.admission.k8s.io/validation_failure".to_owned(),
                r#"[{"message":"too many","policy":"p","binding":"b","expressionIndex":1,"validationActions":["Audit","Warn"]}]"#.to_owned()
            ),
            ("p/replicas".to_owned(), "replicas: 3".to_owned()),
        ]
    );
    // Two bindings: one value per distinct value, the key once.
    let two = [
        binding("a", "p", json!({"validationActions": ["Audit"]})),
        binding("b", "p", json!({"validationActions": ["Audit"]})),
    ];
    let (_, annotations) = create_audited(&policies, &two, &object);
    assert_eq!(annotations.len(), 2, "{annotations:?}");
    assert!(annotations[0].1.contains(r#""binding":"a""#));
    // A value that is not a string denies under Fail, is left out under Ignore.
    let typed = |failure: &str| {
        [policy(
            "q",
            json!({"failurePolicy": failure, "auditAnnotations": [{"key": "k", "valueExpression": "1"}]}),
        )]
    };
    let deny = [binding("b", "q", json!({}))];
    let (result, annotations) = create_audited(&typed("Fail"), &deny, &object);
    assert_eq!(
        result.unwrap_err().2,
        "deployments.apps \"web\" is forbidden: ValidatingAdmissionPolicy 'q' with binding 'b' denied request: valueExpression '1' resulted in unsupported return type: int. Return type must be either string or null."
    );
    assert!(annotations.is_empty());
    let (result, annotations) = create_audited(&typed("Ignore"), &deny, &object);
    assert_eq!(result, Ok(vec![]));
    assert!(annotations.is_empty());
}

/// An authorizer that allows what `allowed` lists (as `"<user> <verb> <target>"`, the
/// target as [`CheckTarget`]'s debug text), and records every check it is asked.
#[derive(Debug)]
struct Recording {
    allowed: Vec<String>,
    asked: std::sync::Mutex<Vec<String>>,
}

impl Authorizer for Recording {
    fn check(&self, user: &Value, verb: &str, target: &CheckTarget) -> AuthzDecision {
        let asked = format!("{} {verb} {target:?}", text(user, "/username"));
        let allowed = self.allowed.contains(&asked);
        self.asked.lock().unwrap().push(asked);
        AuthzDecision {
            allowed,
            reason: if allowed { "ok".into() } else { "no".into() },
            error: String::new(),
        }
    }
}

/// The outcome of a create of `object` with the policy's `validations` and `recording` as
/// the authorizer.
fn create_authorized(
    validations: Value,
    recording: &Arc<Recording>,
    object: &Value,
) -> Result<Vec<String>, (u16, String, String)> {
    let policies = [policy("p", json!({"validations": validations}))];
    let bindings = [binding("b", "p", json!({}))];
    let deployments = def("apps", "deployments");
    let attributes = attributes(&deployments, Operation::Create, Some(object), None);
    let authorizer: Arc<dyn Authorizer> = recording.clone();
    admit_audited(
        &policies,
        &bindings,
        &attributes,
        &cluster(),
        Some(&authorizer),
        &mut Vec::new(),
    )
    .map_err(|e| (e.code, e.reason, e.message))
}

fn resource_target(group: &str, resource: &str, sub: &str, ns: &str, name: &str) -> String {
    format!(
        "{:?}",
        CheckTarget::Resource {
            group: group.into(),
            resource: resource.into(),
            subresource: sub.into(),
            namespace: ns.into(),
            name: name.into(),
        }
    )
}

#[test]
fn the_authorizer_variable_asks_the_callers_authorizer_as_the_requests_user() {
    let pods_get = resource_target("", "pods", "", "prod", "");
    let recording = Arc::new(Recording {
        allowed: vec![format!("alice get {pods_get}")],
        asked: Default::default(),
    });
    let object = deployment("web", 1, json!({}));
    let allowed = json!([{"expression":
        "authorizer.group('').resource('pods').namespace(object.metadata.namespace).check('get').allowed()"}]);
    assert_eq!(create_authorized(allowed, &recording, &object), Ok(vec![]));
    let denied_expression = "authorizer.group('').resource('pods').namespace(object.metadata.namespace).check('delete').allowed()";
    assert_eq!(
        create_authorized(
            json!([{"expression": denied_expression}]),
            &recording,
            &object
        ),
        denied(
            422,
            "Invalid",
            &format!(
                "deployments.apps \"web\" is forbidden: ValidatingAdmissionPolicy 'p' with binding 'b' denied request: failed expression: {denied_expression}"
            )
        )
    );
    // Every part of a resource check reaches the authorizer; the decision's accessors.
    let full: Value = json!([{"expression":
        "authorizer.group('apps').resource('deployments').subresource('scale').namespace('ns').name('n').fieldSelector('a=b').labelSelector('c=d').check('update').reason() == 'no'"},
        {"expression": "!authorizer.path('/healthz').check('get').errored() && authorizer.path('/healthz').check('get').error() == ''"},
    ]);
    assert_eq!(
        create_authorized(full.clone(), &recording, &object),
        Ok(vec![])
    );
    // `requestResource` is the request's own resource; `serviceAccount` asks as the account.
    let own = json!([{"expression": "!authorizer.requestResource.check('create').allowed()"},
        {"expression": "!authorizer.serviceAccount('kube-system', 'builder').group('').resource('pods').check('list').allowed()"}]);
    assert_eq!(
        create_authorized(own.clone(), &recording, &object),
        Ok(vec![])
    );
    // Each of these compiles and type-checks where a policy is written.
    for validations in [&own, &full] {
        let written = policy("p", json!({"validations": validations}));
        assert_eq!(expression_errors(&written), Vec::new());
    }
    let asked = recording.asked.lock().unwrap().clone();
    assert_eq!(
        asked,
        [
            format!("alice get {pods_get}"),
            format!(
                "alice delete {}",
                resource_target("", "pods", "", "prod", "")
            ),
            format!(
                "alice update {}",
                resource_target("apps", "deployments", "scale", "ns", "n")
            ),
            "alice get Path(\"/healthz\")".to_owned(),
            "alice get Path(\"/healthz\")".to_owned(),
            format!(
                "alice create {}",
                resource_target("apps", "deployments", "", "prod", "web")
            ),
            format!(
                "system:serviceaccount:kube-system:builder list {}",
                resource_target("", "pods", "", "", "")
            ),
        ]
    );
}

#[test]
fn the_authorizer_librarys_errors_and_cost_are_kubes() {
    let recording = Arc::new(Recording {
        allowed: Vec::new(),
        asked: Default::default(),
    });
    let object = deployment("web", 1, json!({}));
    for (expression, error) in [
        (
            "authorizer.path(' ').check('get').allowed()",
            "path must not be empty",
        ),
        (
            "authorizer.group('').resource('').check('get').allowed()",
            "resource must not be empty",
        ),
        (
            "authorizer.serviceAccount('default', 'Not_Valid').path('/x').check('get').allowed()",
            "Invalid service account name",
        ),
        (
            "authorizer.serviceAccount('no.dots', 'ok').path('/x').check('get').allowed()",
            "Invalid service account namespace",
        ),
        // Two checks fit kube's per-call limit, a third does not (350,000 each).
        (
            "authorizer.path('/a').check('get').allowed() || authorizer.path('/b').check('get').allowed() || authorizer.path('/c').check('get').allowed()",
            "operation cancelled: actual cost limit exceeded",
        ),
    ] {
        assert_eq!(
            create_authorized(json!([{"expression": expression}]), &recording, &object),
            denied(
                422,
                "Invalid",
                &format!(
                    "deployments.apps \"web\" is forbidden: ValidatingAdmissionPolicy 'p' with binding 'b' denied request: expression '{expression}' resulted in error: {error}"
                )
            ),
            "{expression}"
        );
    }
    let two = "!authorizer.path('/a').check('get').allowed() && !authorizer.path('/b').check('get').allowed()";
    assert_eq!(
        create_authorized(json!([{"expression": two}]), &recording, &object),
        Ok(vec![])
    );
    // Nothing was asked but the two checks that ran.
    assert_eq!(recording.asked.lock().unwrap().len(), 2);
    // Without an authorizer, an expression naming it is skipped (admits).
    let policies = [policy(
        "p",
        json!({"validations": [{"expression": two.replace('!', "")}]}),
    )];
    assert_eq!(
        create(&policies, &[binding("b", "p", json!({}))], &object),
        Ok(vec![])
    );
}

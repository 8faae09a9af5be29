use serde_json::json;

use super::*;
use crate::admission_policy::Operation;
use crate::resources::{ResourceDef, builtin_resources};

fn def(group: &str, plural: &str) -> ResourceDef {
    builtin_resources()
        .into_iter()
        .find(|d| d.group == group && d.plural == plural)
        .unwrap()
}

/// Two namespaces; `apps/v1beta1` as another version of deployments.
struct Fake;

impl Cluster for Fake {
    fn namespace(&self, name: &str) -> Option<Value> {
        let labels = match name {
            "prod" => json!({"env": "prod"}),
            "dev" => json!({"env": "dev"}),
            _ => return None,
        };
        Some(json!({"metadata": {"name": name, "labels": labels}}))
    }
    fn param_scope(&self, _: &str, _: &str) -> Option<bool> {
        None
    }
    fn params(&self, _: &str, _: &str, _: &str) -> Vec<Value> {
        Vec::new()
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

fn attributes<'a>(
    def: &'a ResourceDef,
    object: Option<&'a Value>,
    operation: Operation,
) -> Attributes<'a> {
    Attributes {
        def,
        subresource: "",
        name: "web",
        namespace: "prod",
        operation,
        object,
        old_object: None,
        user: json!({"username": "alice"}),
        dry_run: false,
        options: json!({"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}),
    }
}

fn webhook(extra: Value) -> Value {
    let mut hook = json!({
        "name": "check.example.com",
        "clientConfig": {"url": "https://hooks.example.com/check"},
        "rules": [{"operations": ["CREATE"], "apiGroups": ["apps"], "apiVersions": ["v1"],
                   "resources": ["deployments"], "scope": "*"}],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "failurePolicy": "Fail",
        "matchPolicy": "Equivalent",
        "namespaceSelector": {},
        "objectSelector": {},
    });
    for (key, value) in extra.as_object().unwrap() {
        hook[key] = value.clone();
    }
    hook
}

fn decide(hook: &Value, object: &Value, operation: Operation) -> Call {
    let deployments = def("apps", "deployments");
    let attributes = attributes(&deployments, Some(object), operation);
    should_call(
        &Hook {
            configuration: "c",
            webhook: hook,
        },
        &attributes,
        &Fake,
    )
}

#[test]
fn rules_and_selectors_choose_the_webhooks_called() {
    let object =
        json!({"metadata": {"name": "web", "namespace": "prod", "labels": {"tier": "front"}}});
    assert!(
        matches!(decide(&webhook(json!({})), &object, Operation::Create), Call::Call(m) if m.version == "v1")
    );
    // Another operation, another namespace's labels, another object label: not called.
    assert!(matches!(
        decide(&webhook(json!({})), &object, Operation::Update),
        Call::Skip
    ));
    let by_namespace = webhook(json!({"namespaceSelector": {"matchLabels": {"env": "dev"}}}));
    assert!(matches!(
        decide(&by_namespace, &object, Operation::Create),
        Call::Skip
    ));
    let by_object = webhook(json!({"objectSelector": {"matchLabels": {"tier": "back"}}}));
    assert!(matches!(
        decide(&by_object, &object, Operation::Create),
        Call::Skip
    ));
    let by_label = webhook(json!({"objectSelector": {"matchLabels": {"tier": "front"}}}));
    assert!(matches!(
        decide(&by_label, &object, Operation::Create),
        Call::Call(_)
    ));
    // No rules: nothing.
    assert!(matches!(
        decide(&webhook(json!({"rules": []})), &object, Operation::Create),
        Call::Skip
    ));
}

#[test]
fn equivalent_match_policy_calls_for_another_version_and_exact_does_not() {
    let object = json!({"metadata": {"name": "web", "namespace": "prod"}});
    let rules = json!([{"operations": ["*"], "apiGroups": ["apps"], "apiVersions": ["v1beta1"],
                        "resources": ["deployments"]}]);
    let equivalent = webhook(json!({"rules": rules}));
    match decide(&equivalent, &object, Operation::Create) {
        Call::Call(matched) => assert_eq!(matched.version, "v1beta1"),
        other => panic!("{other:?}"),
    }
    let exact = webhook(json!({"rules": rules, "matchPolicy": "Exact"}));
    assert!(matches!(
        decide(&exact, &object, Operation::Create),
        Call::Skip
    ));
}

#[test]
fn match_conditions_skip_or_refuse_by_failure_policy() {
    let object = json!({"metadata": {"name": "web", "namespace": "prod"}, "spec": {"replicas": 3}});
    let conditions = |expression: &str| json!([{"name": "c", "expression": expression}]);
    let holds = webhook(json!({"matchConditions": conditions("object.spec.replicas > 2")}));
    assert!(matches!(
        decide(&holds, &object, Operation::Create),
        Call::Call(_)
    ));
    let fails = webhook(json!({"matchConditions": conditions("object.spec.replicas > 5")}));
    assert!(matches!(
        decide(&fails, &object, Operation::Create),
        Call::Skip
    ));
    let broken = conditions("object.spec.missing.deeper == 1");
    match decide(
        &webhook(json!({"matchConditions": broken})),
        &object,
        Operation::Create,
    ) {
        Call::Refuse(error) => {
            assert_eq!(error.code, 403);
            assert!(
                error
                    .message
                    .starts_with("deployments.apps \"web\" is forbidden: "),
                "{}",
                error.message
            );
        }
        other => panic!("{other:?}"),
    }
    let ignored = webhook(json!({"matchConditions": broken, "failurePolicy": "Ignore"}));
    assert!(matches!(
        decide(&ignored, &object, Operation::Create),
        Call::Skip
    ));
}

#[test]
fn configuration_kinds_are_never_sent() {
    let configurations = def(
        "admissionregistration.k8s.io",
        "validatingwebhookconfigurations",
    );
    let object = json!({"metadata": {"name": "web"}});
    let hook = webhook(json!({"rules": [{"operations": ["*"], "apiGroups": ["*"],
        "apiVersions": ["*"], "resources": ["*"]}]}));
    let attributes = Attributes {
        namespace: "",
        ..attributes(&configurations, Some(&object), Operation::Create)
    };
    let hook = Hook {
        configuration: "c",
        webhook: &hook,
    };
    assert!(matches!(should_call(&hook, &attributes, &Fake), Call::Skip));
}

#[test]
fn hooks_come_by_configuration_name_then_in_order() {
    let configurations = vec![
        json!({"metadata": {"name": "b"}, "webhooks": [{"name": "b1"}, {"name": "b2"}]}),
        json!({"metadata": {"name": "a"}, "webhooks": [{"name": "a2"}, {"name": "a1"}]}),
    ];
    let listed = hooks(&configurations);
    let names: Vec<&str> = listed.iter().map(Hook::name).collect();
    assert_eq!(names, ["a2", "a1", "b1", "b2"]);
}

#[test]
fn the_review_carries_kube_request_fields() {
    let deployments = def("apps", "deployments");
    let object = json!({"metadata": {"name": "web"}});
    let attributes = attributes(&deployments, Some(&object), Operation::Create);
    let matched = Equivalent {
        group: "apps".into(),
        version: "v1".into(),
        resource: "deployments".into(),
        kind: "Deployment".into(),
    };
    let review = review("v1beta1", "u-1", &attributes, &matched, Some(&object));
    assert_eq!(review["apiVersion"], "admission.k8s.io/v1beta1");
    let request = &review["request"];
    assert_eq!(request["uid"], "u-1");
    assert_eq!(
        request["kind"],
        json!({"group": "apps", "version": "v1", "kind": "Deployment"})
    );
    assert_eq!(request["operation"], "CREATE");
    assert_eq!(request["namespace"], "prod");
    assert_eq!(request["object"], object);
    assert_eq!(request["oldObject"], Value::Null);
    assert_eq!(request["userInfo"]["username"], "alice");
    let hook = webhook(json!({"admissionReviewVersions": ["v2", "v1beta1", "v1"]}));
    let hook = Hook {
        configuration: "c",
        webhook: &hook,
    };
    assert_eq!(review_version(&hook), Ok("v1beta1"));
}

#[test]
fn answers_are_verified_as_kube_verifies_them() {
    let body = |value: Value| value.to_string().into_bytes();
    let allowed = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "response": {"uid": "u", "allowed": true, "warnings": ["careful"]}});
    let answer = answer("v1", "u", false, &body(allowed.clone())).unwrap();
    assert!(answer.allowed);
    assert_eq!(answer.warnings, ["careful"]);
    assert_eq!(
        super::answer("v1", "other", false, &body(allowed)).unwrap_err(),
        "received invalid webhook response: expected response.uid=\"other\", got \"u\""
    );
    assert_eq!(
        super::answer("v1", "u", false, &body(json!({"kind": "AdmissionReview"}))).unwrap_err(),
        "received invalid webhook response: webhook response was absent"
    );
    let wrong_kind = json!({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview",
        "response": {"uid": "u", "allowed": true}});
    assert_eq!(
        super::answer("v1", "u", false, &body(wrong_kind)).unwrap_err(),
        "received invalid webhook response: expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got admission.k8s.io/v1beta1, Kind=AdmissionReview"
    );
    let patch =
        base64::engine::general_purpose::STANDARD.encode(r#"[{"op":"add","path":"/x","value":1}]"#);
    let untyped = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "response": {"uid": "u", "allowed": true, "patch": patch}});
    assert_eq!(
        super::answer("v1", "u", true, &body(untyped.clone())).unwrap_err(),
        "received invalid webhook response: webhook returned response.patch but not response.patchType"
    );
    // v1beta1 pins an untyped patch to a JSON patch.
    let mutated = super::answer("v1beta1", "ignored", true, &body(untyped)).unwrap();
    let patched = patched("m", Some(&json!({})), mutated.patch.as_ref().unwrap()).unwrap();
    assert_eq!(patched, json!({"x": 1}));
    assert!(super::patched("m", None, &json!([])).unwrap_err().message.contains(
        "admission webhook \"m\" attempted to modify the object, which is not supported for this operation"
    ));
}

#[test]
fn denials_and_failures_are_worded_as_kube() {
    let denied_with = denied(
        "deny.example.com",
        Some(&json!({"code": 403, "reason": "Forbidden", "message": "no"})),
    );
    assert_eq!(denied_with.code, 403);
    assert_eq!(denied_with.reason, "Forbidden");
    assert_eq!(
        denied_with.message,
        "admission webhook \"deny.example.com\" denied the request: no"
    );
    let bare = denied("deny.example.com", None);
    assert_eq!(bare.code, 500);
    assert_eq!(
        bare.message,
        "admission webhook \"deny.example.com\" denied the request without explanation"
    );
    let failed = call_failed("h.example.com", "failed to call webhook: boom");
    assert_eq!(failed.code, 500);
    assert_eq!(
        failed.message,
        "Internal error occurred: failed calling webhook \"h.example.com\": failed to call webhook: boom"
    );
    let dry = dry_run_unsupported("h.example.com");
    assert_eq!(
        (dry.code, dry.message.as_str()),
        (
            400,
            "admission webhook \"h.example.com\" does not support dry run"
        )
    );
}

#[test]
fn targets_name_their_server_and_url() {
    let service =
        Target::of(&json!({"service": {"namespace": "ns", "name": "hooks", "path": "/v"}}))
            .unwrap();
    assert_eq!(service.server_name(), "hooks.ns.svc");
    assert_eq!(
        service.printed(10),
        "https://hooks.ns.svc:443/v?timeout=10s"
    );
    assert_eq!(service.path_and_query(3), "/v?timeout=3s");
    let url = Target::of(&json!({"url": "https://127.0.0.1:8443/check"})).unwrap();
    assert_eq!(url.server_name(), "127.0.0.1");
    assert_eq!(url.path_and_query(1), "/check?timeout=1s");
    assert_eq!(host_only("[::1]:443"), "::1");
}

fn configuration_causes(kind: &str, webhooks: Value) -> String {
    let def = def(
        "admissionregistration.k8s.io",
        &format!("{}s", kind.to_lowercase()),
    );
    let object = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
        "metadata": {"name": "c"}, "webhooks": webhooks});
    crate::kinds::validate(&def, &object, None).map_or_else(|e| e.message, |()| String::new())
}

#[test]
fn configurations_are_validated_as_kube_validates_them() {
    assert_eq!(
        configuration_causes(
            "ValidatingWebhookConfiguration",
            json!([webhook(json!({}))])
        ),
        ""
    );
    let bad = json!([
        {"name": "short", "clientConfig": {"url": "http://h/x?q=1"},
         "rules": [{"operations": ["*", "CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": []}],
         "timeoutSeconds": 31, "admissionReviewVersions": ["v3"]},
        {"name": "a.b.c", "clientConfig": {}, "sideEffects": "Some", "admissionReviewVersions": ["v1", "v1"],
         "reinvocationPolicy": "Always",
         "namespaceSelector": {"matchExpressions": [{"key": "k", "operator": "In"}]},
         "objectSelector": {"matchLabels": {"bad key!": "v"}}},
        {"name": "a.b.c", "clientConfig": {"service": {"name": "s", "namespace": "n", "path": "x//"}},
         "sideEffects": "None", "admissionReviewVersions": ["v1"],
         "matchConditions": [{"name": "m", "expression": "object.("}]},
    ]);
    let message = configuration_causes("MutatingWebhookConfiguration", bad);
    for expected in [
        "webhooks[0].name: Invalid value: \"short\": should be a domain with at least three segments separated by dots",
        "webhooks[0].rules[0].operations: Invalid value: [\"*\",\"CREATE\"]: if '*' is present, must not specify other operations",
        "webhooks[0].rules[0].resources: Required value",
        "webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun",
        "webhooks[0].timeoutSeconds: Invalid value: 31: the timeout value must be between 1 and 30 seconds",
        "webhooks[0].clientConfig.url: Invalid value: \"http\": 'https' is the only allowed URL scheme; desired format: https://host[/path]",
        "webhooks[0].clientConfig.url: Invalid value: \"q=1\": query parameters are not permitted in the URL",
        "webhooks[0].admissionReviewVersions: Invalid value: [\"v3\"]: must include at least one of v1, v1beta1",
        "webhooks[1].sideEffects: Unsupported value: \"Some\": supported values: \"None\", \"NoneOnDryRun\"",
        "webhooks[1].namespaceSelector.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'",
        "webhooks[1].objectSelector.matchLabels: Invalid value: \"bad key!\": name part must consist of alphanumeric characters",
        "webhooks[1].reinvocationPolicy: Unsupported value: \"Always\": supported values: \"IfNeeded\", \"Never\"",
        "webhooks[1].clientConfig: Required value: exactly one of url or service is required",
        "webhooks[1].admissionReviewVersions[1]: Invalid value: \"v1\": duplicate version",
        "webhooks[2].clientConfig.service.path: Invalid value: \"x//\": must start with a '/'",
        "webhooks[2].matchConditions[0].expression: Invalid value: \"object.(\": compilation failed",
        "webhooks[2].name: Duplicate value: \"a.b.c\"",
    ] {
        assert!(
            message.contains(expected),
            "missing {expected:?} in {message}"
        );
    }
}

#[test]
fn match_conditions_calling_undeclared_functions_are_refused() {
    let conditions = json!([
        {"name": "typo", "expression": "object.metadata.name.startWith('a')"},
        {"name": "library", "expression": "!format.dns1123Label().validate(object.metadata.name).hasValue() && sets.contains(['a'], ['a'])"}]);
    let message = configuration_causes(
        "ValidatingWebhookConfiguration",
        json!([webhook(json!({"matchConditions": conditions}))]),
    );
    assert!(
        message.ends_with("webhooks[0].matchConditions[0].expression: Invalid value: \"object.metadata.name.startWith('a')\": compilation failed: ERROR: <input>:1:31: undeclared reference to 'startWith' (in container '')\n | object.metadata.name.startWith('a')\n | ..............................^"),
        "{message}"
    );
    assert!(!message.contains("matchConditions[1]"), "{message}");
}

#[test]
fn configurations_get_kube_defaults() {
    let def = def(
        "admissionregistration.k8s.io",
        "mutatingwebhookconfigurations",
    );
    let mut object = json!({"apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration", "metadata": {"name": "c"},
        "webhooks": [{"name": "a.b.c", "clientConfig": {"service": {"name": "s", "namespace": "n"}},
                      "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}]}]});
    crate::kinds::apply_defaults(&def, &mut object);
    let hook = &object["webhooks"][0];
    assert_eq!(hook["failurePolicy"], "Fail");
    assert_eq!(hook["matchPolicy"], "Equivalent");
    assert_eq!(hook["timeoutSeconds"], 10);
    assert_eq!(hook["reinvocationPolicy"], "Never");
    assert_eq!(hook["namespaceSelector"], json!({}));
    assert_eq!(hook["rules"][0]["scope"], "*");
    assert_eq!(hook["clientConfig"]["service"]["port"], 443);
}

//! ValidatingAdmissionPolicy over HTTP, as kube-apiserver evaluates it on writes (see
//! `source::policy_admission` and `watchkeeper_api::admission_policy`), following the
//! scenarios of kube's e2e `test/e2e/apimachinery/validatingadmissionpolicy.go`: a policy
//! bound to Deployments refuses what it denies in kube's words, warns under `Warn`, reads its
//! params, applies to custom resources and to deletes, to dry runs, stops when its binding
//! goes, and its expressions must compile.

use crate::common;

use serde_json::{Value, json};
use watchkeeper::config::ServeArgs;

use common::{request, send_json, server_with};

const POLICIES: &str = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies";
const BINDINGS: &str = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings";
const DEPLOYMENTS: &str = "/apis/apps/v1/namespaces/default/deployments";

async fn create(addr: std::net::SocketAddr, path: &str, object: &Value) {
    let (status, body) = send_json(addr, "POST", path, object).await;
    assert_eq!(status, 201, "POST {path}: {body}");
}

fn policy(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name}, "spec": spec})
}

fn binding(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": name}, "spec": spec})
}

/// kube's e2e policy: Deployments of at most 5 replicas (`replicas <= 5`), only for those
/// labelled `app`.
fn replicas_policy() -> Value {
    policy(
        "replicas-limit",
        json!({
            "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                "resources": ["deployments"], "operations": ["CREATE", "UPDATE"]}]},
            "matchConditions": [{"name": "labelled", "expression": "has(object.metadata.labels) && 'app' in object.metadata.labels"}],
            "validations": [{"expression": "object.spec.replicas <= 5"}]
        }),
    )
}

fn deployment(name: &str, replicas: i64) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})
}

/// A write's answer with its `Warning` headers.
async fn write(
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    content_type: &str,
    body: &Value,
) -> (u16, Value, Vec<String>) {
    let response = watchkeeper_testkit::request(
        addr,
        method,
        path,
        &[
            ("Content-Type", content_type),
            ("Accept", "application/json"),
        ],
        body.to_string().as_bytes(),
    )
    .await
    .unwrap();
    let warnings = response
        .headers
        .get_all("warning")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .map(str::to_owned)
        .collect();
    (response.status, response.json(), warnings)
}

/// Goal: kube's e2e "should validate against a Deployment": a Deployment of 6 replicas is
/// refused (422, kube's message, on create, on a patch to 6 and on a dry run), one of 5 is
/// created, an unlabelled one passes the match condition by; a changed policy and a deleted
/// binding apply to the next request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_bound_to_deployments_refuses_what_it_denies() {
    let server = server_with(ServeArgs::default()).await;
    let addr = server.addr;
    create(addr, POLICIES, &replicas_policy()).await;
    create(
        addr,
        BINDINGS,
        &binding(
            "replicas-limit-binding",
            json!({"policyName": "replicas-limit", "validationActions": ["Deny"]}),
        ),
    )
    .await;
    let refusal = "deployments.apps \"big\" is forbidden: ValidatingAdmissionPolicy 'replicas-limit' with binding 'replicas-limit-binding' denied request: failed expression: object.spec.replicas <= 5";
    let (status, body, _) = write(
        addr,
        "POST",
        DEPLOYMENTS,
        "application/json",
        &deployment("big", 6),
    )
    .await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["kind"], "Status");
    assert_eq!(body["reason"], "Invalid");
    assert_eq!(body["message"], refusal);
    assert_eq!(
        body["details"],
        json!({"name": "big", "group": "apps", "kind": "deployments",
            "causes": [{"message": refusal.split_once("is forbidden: ").unwrap().1}]})
    );
    let (status, body, _) = write(
        addr,
        "POST",
        &format!("{DEPLOYMENTS}?dryRun=All"),
        "application/json",
        &deployment("big", 6),
    )
    .await;
    assert_eq!((status, body["message"].as_str()), (422, Some(refusal)));
    let (status, body) = send_json(addr, "POST", DEPLOYMENTS, &deployment("small", 5)).await;
    assert_eq!(status, 201, "{body}");
    let (status, body, _) = write(
        addr,
        "PATCH",
        &format!("{DEPLOYMENTS}/small"),
        "application/merge-patch+json",
        &json!({"spec": {"replicas": 6}}),
    )
    .await;
    assert_eq!(status, 422, "{body}");
    assert!(
        body["message"].as_str().unwrap().starts_with(
            "deployments.apps \"small\" is forbidden: ValidatingAdmissionPolicy 'replicas-limit'"
        ),
        "{body}"
    );
    // Not matched by the match condition: not evaluated.
    let mut unlabelled = deployment("plain", 6);
    unlabelled["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("labels");
    let (status, body) = send_json(addr, "POST", DEPLOYMENTS, &unlabelled).await;
    assert_eq!(status, 201, "{body}");
    // A changed policy applies to the next request.
    common::merge_patch(
        addr,
        &format!("{POLICIES}/replicas-limit"),
        r#"{"spec": {"validations": [{"expression": "object.spec.replicas <= 6"}]}}"#,
    )
    .await;
    let (status, body) = send_json(addr, "POST", DEPLOYMENTS, &deployment("six", 6)).await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = send_json(addr, "POST", DEPLOYMENTS, &deployment("big", 7)).await;
    assert_eq!(status, 422, "{body}");
    // The binding gone, the next request is not refused.
    let (status, body) = request(
        addr,
        "DELETE",
        &format!("{BINDINGS}/replicas-limit-binding"),
        "application/json",
        "",
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = send_json(addr, "POST", DEPLOYMENTS, &deployment("big", 7)).await;
    assert_eq!(status, 201, "{body}");
}

/// Goal: a `Warn` binding lets the write through with kube's `Warning` header; the policy's
/// `reason` sets a `Deny` binding's code; a binding whose policy does not exist does nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warn_bindings_warn_and_reasons_set_the_code() {
    let server = server_with(ServeArgs::default()).await;
    let addr = server.addr;
    let mut policy = replicas_policy();
    policy["spec"]["validations"] = json!([{"expression": "object.spec.replicas <= 5",
        "messageExpression": "'replicas must be at most 5, not ' + string(object.spec.replicas)",
        "reason": "Forbidden"}]);
    create(addr, POLICIES, &policy).await;
    create(
        addr,
        BINDINGS,
        &binding(
            "orphan",
            json!({"policyName": "absent", "validationActions": ["Deny"]}),
        ),
    )
    .await;
    create(
        addr,
        BINDINGS,
        &binding(
            "warn",
            json!({"policyName": "replicas-limit", "validationActions": ["Warn"]}),
        ),
    )
    .await;
    let (status, body, warnings) = write(
        addr,
        "POST",
        DEPLOYMENTS,
        "application/json",
        &deployment("big", 7),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(
        warnings,
        [
            "299 - \"Validation failed for ValidatingAdmissionPolicy 'replicas-limit' with binding 'warn': replicas must be at most 5, not 7\""
        ]
    );
    create(
        addr,
        BINDINGS,
        &binding(
            "deny",
            json!({"policyName": "replicas-limit", "validationActions": ["Deny"]}),
        ),
    )
    .await;
    let (status, body, _) = write(
        addr,
        "POST",
        DEPLOYMENTS,
        "application/json",
        &deployment("bigger", 8),
    )
    .await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (403, Some("Forbidden")),
        "{body}"
    );
    assert_eq!(
        body["message"],
        "deployments.apps \"bigger\" is forbidden: ValidatingAdmissionPolicy 'replicas-limit' with binding 'deny' denied request: replicas must be at most 5, not 8"
    );
}

/// Goal: kube's e2e params scenario: the limit comes from a ConfigMap the binding names; a
/// change of the ConfigMap applies to the next request; a missing param under `Deny` refuses
/// with kube's text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn params_come_from_the_object_the_binding_names() {
    let server = server_with(ServeArgs::default()).await;
    let addr = server.addr;
    create(
        addr,
        POLICIES,
        &policy(
            "replicas-param",
            json!({
                "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
                "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                    "resources": ["deployments"], "operations": ["CREATE"]}]},
                "variables": [{"name": "limit", "expression": "int(params.data.maxReplicas)"}],
                "validations": [{"expression": "object.spec.replicas <= variables.limit",
                    "messageExpression": "'at most ' + string(variables.limit) + ' replicas'"}]
            }),
        ),
    )
    .await;
    create(
        addr,
        BINDINGS,
        &binding(
            "replicas-param-binding",
            json!({"policyName": "replicas-param", "validationActions": ["Deny"],
                "paramRef": {"name": "replica-limit", "parameterNotFoundAction": "Deny"}}),
        ),
    )
    .await;
    let (status, body) = send_json(addr, "POST", DEPLOYMENTS, &deployment("a", 1)).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(
        body["message"],
        "deployments.apps \"a\" is forbidden: ValidatingAdmissionPolicy 'replicas-param' with binding 'replicas-param-binding' denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"
    );
    create(
        addr,
        "/api/v1/namespaces/default/configmaps",
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "replica-limit"},
            "data": {"maxReplicas": "3"}}),
    )
    .await;
    let (status, body) = send_json(addr, "POST", DEPLOYMENTS, &deployment("a", 4)).await;
    assert_eq!(status, 422, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .ends_with("denied request: at most 3 replicas"),
        "{body}"
    );
    common::merge_patch(
        addr,
        "/api/v1/namespaces/default/configmaps/replica-limit",
        r#"{"data": {"maxReplicas": "4"}}"#,
    )
    .await;
    let (status, body) = send_json(addr, "POST", DEPLOYMENTS, &deployment("a", 4)).await;
    assert_eq!(status, 201, "{body}");
}

/// Goal: policies apply to custom resources and to deletes (`oldObject` set, `object`
/// null); the policy kinds themselves are exempt, so a policy denying every write can still
/// be deleted; `--disable-admission-plugins=ValidatingAdmissionPolicy` turns evaluation off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_resources_and_deletes_are_evaluated_and_policies_are_exempt() {
    let server = server_with(ServeArgs::default()).await;
    let addr = server.addr;
    create(
        addr,
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        &json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                        "spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}}}}]}}),
    )
    .await;
    create(
        addr,
        POLICIES,
        &policy(
            "guard",
            json!({
                "matchConstraints": {"resourceRules": [{"apiGroups": ["*"], "apiVersions": ["*"],
                    "resources": ["*"], "operations": ["*"]}]},
                "validations": [
                    {"expression": "request.resource.resource != 'widgets' || object == null || object.spec.size < 10",
                     "message": "widgets are small"},
                    {"expression": "request.operation != 'DELETE' || oldObject.metadata.name != 'keep'",
                     "message": "keep stays"}
                ]
            }),
        ),
    )
    .await;
    create(
        addr,
        BINDINGS,
        &binding(
            "guard",
            json!({"policyName": "guard", "validationActions": ["Deny"]}),
        ),
    )
    .await;
    let widgets = "/apis/example.com/v1/namespaces/default/widgets";
    let widget = |name: &str, size: i64| {
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name},
            "spec": {"size": size}})
    };
    let (status, body) = send_json(addr, "POST", widgets, &widget("w", 10)).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(
        body["message"],
        "widgets.example.com \"w\" is forbidden: ValidatingAdmissionPolicy 'guard' with binding 'guard' denied request: widgets are small"
    );
    create(addr, widgets, &widget("keep", 1)).await;
    let (status, body) = request(
        addr,
        "DELETE",
        &format!("{widgets}/keep"),
        "application/json",
        "",
    )
    .await;
    assert_eq!(status, 422, "{body}");
    assert!(body.contains("denied request: keep stays"), "{body}");
    // The policy kinds are never evaluated: the guard goes.
    for path in [format!("{BINDINGS}/guard"), format!("{POLICIES}/guard")] {
        let (status, body) = request(addr, "DELETE", &path, "application/json", "").await;
        assert_eq!(status, 200, "{body}");
    }
    create(addr, widgets, &widget("w", 10)).await;

    // Turned off, nothing is evaluated.
    let off = server_with(ServeArgs {
        disable_admission_plugins: Some(vec!["ValidatingAdmissionPolicy".into()]),
        ..ServeArgs::default()
    })
    .await;
    create(off.addr, POLICIES, &replicas_policy()).await;
    create(
        off.addr,
        BINDINGS,
        &binding(
            "b",
            json!({"policyName": "replicas-limit", "validationActions": ["Deny"]}),
        ),
    )
    .await;
    create(off.addr, DEPLOYMENTS, &deployment("big", 6)).await;
}

/// Goal: a call of a function kube's CEL environment does not declare refuses the policy as
/// kube-apiserver 1.33 refuses it (`undeclared reference to 'startWith'`, at the call's `(`,
/// with cel-go's source line and caret), in every field holding an expression; calls of
/// kube's libraries are accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policies_calling_undeclared_functions_are_refused() {
    let server = server_with(ServeArgs::default()).await;
    let addr = server.addr;
    // The Kubernetes documentation's own typo of `startsWith`.
    let mut typo = replicas_policy();
    typo["spec"]["validations"] = json!([{"expression": "object.metadata.name.startWith('a')"}]);
    let (status, body) = send_json(addr, "POST", POLICIES, &typo).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(
        body["message"],
        "ValidatingAdmissionPolicy.admissionregistration.k8s.io \"replicas-limit\" is invalid: spec.validations[0].expression: Invalid value: \"object.metadata.name.startWith('a')\": compilation failed: ERROR: <input>:1:31: undeclared reference to 'startWith' (in container '')\n | object.metadata.name.startWith('a')\n | ..............................^",
        "{body}"
    );
    // Every field with an expression, in kube's order.
    let mut everywhere = replicas_policy();
    everywhere["spec"]["variables"] = json!([{"name": "v", "expression": "foo(1)"}]);
    everywhere["spec"]["matchConditions"] =
        json!([{"name": "m", "expression": "object.bar() == 1"}]);
    everywhere["spec"]["validations"] =
        json!([{"expression": "true", "messageExpression": "math.greatest(1, 2)"}]);
    everywhere["spec"]["auditAnnotations"] =
        json!([{"key": "k", "valueExpression": "'a'.reverse()"}]);
    let (status, body) = send_json(addr, "POST", POLICIES, &everywhere).await;
    assert_eq!(status, 422, "{body}");
    let causes: Vec<(&str, &str)> = body["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let message = c["message"].as_str().unwrap();
            (
                c["field"].as_str().unwrap(),
                message.split('\n').next().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        causes,
        [
            (
                "spec.matchConditions[0].expression",
                "Invalid value: \"object.bar() == 1\": compilation failed: ERROR: <input>:1:11: undeclared reference to 'bar' (in container '')"
            ),
            (
                "spec.variables[0].expression",
                "Invalid value: \"foo(1)\": compilation failed: ERROR: <input>:1:4: undeclared reference to 'foo' (in container '')"
            ),
            (
                "spec.validations[0].messageExpression",
                "Invalid value: \"math.greatest(1, 2)\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'math' (in container '')"
            ),
            (
                "spec.auditAnnotations[0].valueExpression",
                "Invalid value: \"'a'.reverse()\": compilation failed: ERROR: <input>:1:12: undeclared reference to 'reverse' (in container '')"
            ),
        ],
        "{body}"
    );
    // kube's libraries, in each field.
    let mut valid = replicas_policy();
    valid["spec"]["variables"] = json!([
        {"name": "name", "expression": "object.metadata.name.lowerAscii().split('-').join('.')"},
        {"name": "ok", "expression": "sets.contains(['a', 'b'], [variables.name]) || isURL('https://' + variables.name)"}]);
    valid["spec"]["matchConditions"] = json!([{"name": "m",
        "expression": "!format.dns1123Label().validate(object.metadata.name).hasValue() && authorizer.group('apps').resource('deployments').check('get').allowed() || true"}]);
    valid["spec"]["validations"] = json!([
        {"expression": "object.spec.template.spec.containers.all(c, c.image.matches('^[a-z]') && c.image.find('[a-z]+') != '')",
         "messageExpression": "'image %s'.format([strings.quote(object.spec.template.spec.containers[0].image)])"},
        {"expression": "!has(object.spec.template.spec.containers[0].resources.limits) || object.spec.template.spec.containers[0].resources.limits.all(k, v, quantity(string(v)).isLessThan(quantity('64Gi')))"},
        {"expression": "[1, 2].isSorted() && ip.isCanonical('10.0.0.1') && cidr('10.0.0.0/8').containsIP(ip('10.0.0.1')) && semver('1.2.3').major() == 1 && optional.of(1).optMap(x, x + 1).value() == 2"}]);
    valid["spec"]["auditAnnotations"] = json!([{"key": "k",
        "valueExpression": "url('https://a.b/c').getHost() + string(object.metadata.?labels.orValue({}).size())"}]);
    let (status, body) = send_json(addr, "POST", POLICIES, &valid).await;
    assert_eq!(status, 201, "{body}");
}

/// Goal: kube's `ValidateValidatingAdmissionPolicy` on the expressions: one that does not
/// parse, or names a variable its environment does not declare (`params` without a
/// `paramKind`), refuses the policy with kube's field error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policies_whose_expressions_do_not_compile_are_refused() {
    let server = server_with(ServeArgs::default()).await;
    let addr = server.addr;
    let mut broken = replicas_policy();
    broken["spec"]["validations"] = json!([{"expression": "object.spec.replicas <"},
        {"expression": "params.max > 1"}]);
    let (status, body) = send_json(addr, "POST", POLICIES, &broken).await;
    assert_eq!(status, 422, "{body}");
    let causes = body["details"]["causes"].as_array().unwrap();
    assert_eq!(causes.len(), 2, "{body}");
    assert_eq!(causes[0]["field"], "spec.validations[0].expression");
    assert!(
        causes[0]["message"].as_str().unwrap().starts_with(
            "Invalid value: \"object.spec.replicas <\": compilation failed: ERROR: <input>:1:"
        ),
        "{body}"
    );
    assert_eq!(causes[1]["field"], "spec.validations[1].expression");
    assert!(
        causes[1]["message"].as_str().unwrap().contains(
            "compilation failed: ERROR: <input>:1:1: undeclared reference to 'params' (in container '')"
        ),
        "{body}"
    );
}

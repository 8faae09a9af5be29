use super::*;
use crate::resources::builtin_resources;

fn def(group: &str, plural: &str) -> ResourceDef {
    builtin_resources()
        .into_iter()
        .find(|d| d.group == group && d.plural == plural)
        .unwrap()
}

fn defaulted(group: &str, plural: &str, mut object: Value) -> Value {
    crate::defaults::apply_defaults(&def(group, plural), &mut object);
    object
}

fn message(group: &str, plural: &str, object: &Value, old: Option<&Value>) -> String {
    let err = validate(&def(group, plural), object, old).unwrap_err();
    assert_eq!(err.code, 422);
    err.message
}

#[test]
fn csi_driver_defaults() {
    let driver = defaulted(
        "storage.k8s.io",
        "csidrivers",
        json!({"metadata": {"name": "d"}, "spec": {"volumeLifecycleModes": []}}),
    );
    assert_eq!(
        driver["spec"],
        json!({"attachRequired": true, "podInfoOnMount": false, "storageCapacity": false,
               "fsGroupPolicy": "ReadWriteOnceWithFSType", "requiresRepublish": false,
               "seLinuxMount": false, "volumeLifecycleModes": ["Persistent"]})
    );
    let sent = json!({"metadata": {"name": "d"}, "spec": {"attachRequired": false,
        "volumeLifecycleModes": ["Ephemeral"], "fsGroupPolicy": "File"}});
    let kept = defaulted("storage.k8s.io", "csidrivers", sent);
    assert_eq!(kept["spec"]["attachRequired"], false);
    assert_eq!(kept["spec"]["volumeLifecycleModes"], json!(["Ephemeral"]));
    assert_eq!(kept["spec"]["fsGroupPolicy"], "File");
}

#[test]
fn admission_policy_defaults_only_fill_what_was_sent() {
    let policy = defaulted(
        "admissionregistration.k8s.io",
        "validatingadmissionpolicies",
        json!({"spec": {"matchConstraints": {"resourceRules": [{"operations": ["CREATE"]}]}}}),
    );
    assert_eq!(
        policy["spec"],
        json!({"failurePolicy": "Fail", "matchConstraints": {
            "matchPolicy": "Equivalent", "namespaceSelector": {}, "objectSelector": {},
            "resourceRules": [{"operations": ["CREATE"], "scope": "*"}]}})
    );
    let binding = defaulted(
        "admissionregistration.k8s.io",
        "validatingadmissionpolicybindings",
        json!({"spec": {"policyName": "p"}}),
    );
    assert_eq!(binding["spec"], json!({"policyName": "p"}));
}

#[test]
fn flow_control_defaults() {
    let schema = defaulted(
        "flowcontrol.apiserver.k8s.io",
        "flowschemas",
        json!({"spec": {"matchingPrecedence": 0}}),
    );
    assert_eq!(schema["spec"]["matchingPrecedence"], 1000);
    let level = defaulted(
        "flowcontrol.apiserver.k8s.io",
        "prioritylevelconfigurations",
        json!({"spec": {"type": "Limited", "limited": {"limitResponse": {"type": "Queue", "queuing": {}}}}}),
    );
    assert_eq!(
        level["spec"]["limited"],
        json!({"nominalConcurrencyShares": 30, "lendablePercent": 0,
               "limitResponse": {"type": "Queue", "queuing": {"handSize": 8, "queues": 64, "queueLengthLimit": 50}}})
    );
    let exempt = defaulted(
        "flowcontrol.apiserver.k8s.io",
        "prioritylevelconfigurations",
        json!({"spec": {"type": "Exempt", "exempt": {}}}),
    );
    assert_eq!(
        exempt["spec"],
        json!({"type": "Exempt", "exempt": {"nominalConcurrencyShares": 0, "lendablePercent": 0}})
    );
}

#[test]
fn runtime_class_handler_is_a_dns_label_and_immutable() {
    let class = json!({"metadata": {"name": "gvisor"}, "handler": "runsc"});
    assert!(validate(&def("node.k8s.io", "runtimeclasses"), &class, None).is_ok());
    let bad = json!({"metadata": {"name": "gvisor"}, "handler": "Run_SC"});
    assert_eq!(
        message("node.k8s.io", "runtimeclasses", &bad, None),
        format!(
            "RuntimeClass.node.k8s.io \"gvisor\" is invalid: handler: Invalid value: \"Run_SC\": {}",
            crate::names::DNS1123_LABEL_MESSAGE
        )
    );
    let changed = json!({"metadata": {"name": "gvisor"}, "handler": "kata"});
    assert_eq!(
        message("node.k8s.io", "runtimeclasses", &changed, Some(&class)),
        "RuntimeClass.node.k8s.io \"gvisor\" is invalid: handler: Invalid value: \"kata\": field is immutable"
    );
}

#[test]
fn csi_driver_validation() {
    let sent = json!({"metadata": {"name": "d"}, "spec": {"fsGroupPolicy": "Sometimes",
        "volumeLifecycleModes": ["Persistent", "Forever"],
        "tokenRequests": [{"audience": "a", "expirationSeconds": 60}, {"audience": "a"}]}});
    let driver = defaulted("storage.k8s.io", "csidrivers", sent);
    assert_eq!(
        message("storage.k8s.io", "csidrivers", &driver, None),
        "CSIDriver.storage.k8s.io \"d\" is invalid: [spec.fsGroupPolicy: Unsupported value: \"Sometimes\": supported values: \"File\", \"None\", \"ReadWriteOnceWithFSType\", spec.tokenRequests[0].expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes, spec.tokenRequests[1].audience: Duplicate value: \"a\", spec.volumeLifecycleModes: Unsupported value: \"Forever\": supported values: \"Persistent\", \"Ephemeral\"]"
    );
    let old = defaulted(
        "storage.k8s.io",
        "csidrivers",
        json!({"metadata": {"name": "d"}, "spec": {}}),
    );
    let mut new = old.clone();
    new["spec"]["attachRequired"] = json!(false);
    new["spec"]["podInfoOnMount"] = json!(true);
    assert_eq!(
        message("storage.k8s.io", "csidrivers", &new, Some(&old)),
        "CSIDriver.storage.k8s.io \"d\" is invalid: spec.attachedRequired: Invalid value: false: field is immutable"
    );
}

#[test]
fn volume_attachment_validation() {
    let none = json!({"metadata": {"name": "va"}, "spec": {"source": {}}});
    assert_eq!(
        message("storage.k8s.io", "volumeattachments", &none, None),
        format!(
            "VolumeAttachment.storage.k8s.io \"va\" is invalid: [spec.attacher: Required value, spec.source: Required value: must specify exactly one of inlineVolumeSpec and persistentVolumeName, spec.nodeName: Invalid value: \"\": {}]",
            crate::names::DNS1123_SUBDOMAIN_MESSAGE
        )
    );
    let good = json!({"metadata": {"name": "va"}, "spec": {"attacher": "csi.example.com",
        "source": {"persistentVolumeName": "pv-1"}, "nodeName": "node-1"}});
    assert!(validate(&def("storage.k8s.io", "volumeattachments"), &good, None).is_ok());
    let mut moved = good.clone();
    moved["spec"]["nodeName"] = json!("node-2");
    assert!(
        message("storage.k8s.io", "volumeattachments", &moved, Some(&good)).starts_with(
            "VolumeAttachment.storage.k8s.io \"va\" is invalid: spec: Invalid value: "
        )
    );
    assert!(
        message("storage.k8s.io", "volumeattachments", &moved, Some(&good))
            .ends_with(": field is immutable")
    );
}

#[test]
fn admission_policy_validation() {
    let empty = defaulted(
        "admissionregistration.k8s.io",
        "validatingadmissionpolicies",
        json!({"metadata": {"name": "p"}, "spec": {"failurePolicy": "Sometimes"}}),
    );
    assert_eq!(
        message(
            "admissionregistration.k8s.io",
            "validatingadmissionpolicies",
            &empty,
            None
        ),
        "ValidatingAdmissionPolicy.admissionregistration.k8s.io \"p\" is invalid: [spec.failurePolicy: Unsupported value: \"Sometimes\": supported values: \"Fail\", \"Ignore\", spec.matchConstraints: Required value, spec.validations: Required value: validations or auditAnnotations must contain at least one item]"
    );
    let mut reasons = defaulted(
        "admissionregistration.k8s.io",
        "validatingadmissionpolicies",
        json!({"metadata": {"name": "r"}, "spec": {
            "matchConstraints": {"resourceRules": [{"operations": ["CREATE"]}]},
            "validations": [{"expression": "true", "reason": "Teapot"}]}}),
    );
    assert_eq!(
        message(
            "admissionregistration.k8s.io",
            "validatingadmissionpolicies",
            &reasons,
            None
        ),
        "ValidatingAdmissionPolicy.admissionregistration.k8s.io \"r\" is invalid: spec.validations[0].reason: Unsupported value: \"Teapot\": supported values: \"Forbidden\", \"Invalid\", \"RequestEntityTooLarge\", \"Unauthorized\""
    );
    reasons["spec"]["validations"][0]["reason"] = json!("Forbidden");
    let policies = def(
        "admissionregistration.k8s.io",
        "validatingadmissionpolicies",
    );
    assert!(validate(&policies, &reasons, None).is_ok());
    let binding =
        json!({"metadata": {"name": "b"}, "spec": {"validationActions": ["Deny", "Deny"]}});
    assert_eq!(
        message(
            "admissionregistration.k8s.io",
            "validatingadmissionpolicybindings",
            &binding,
            None
        ),
        "ValidatingAdmissionPolicyBinding.admissionregistration.k8s.io \"b\" is invalid: [spec.policyName: Required value, spec.validationActions[1]: Duplicate value: \"Deny\"]"
    );
}

#[test]
fn flow_control_validation() {
    let schema = json!({"metadata": {"name": "s"}, "spec": {"matchingPrecedence": 1,
        "priorityLevelConfiguration": {"name": ""}, "rules": [{"subjects": []}]}});
    assert_eq!(
        message("flowcontrol.apiserver.k8s.io", "flowschemas", &schema, None),
        "FlowSchema.flowcontrol.apiserver.k8s.io \"s\" is invalid: [spec.matchingPrecedence: Invalid value: 1: only the schema named 'exempt' may have matchingPrecedence 1, spec.priorityLevelConfiguration.name: Required value: must reference a priority level, spec.rules[0].subjects: Required value: subjects must contain at least one value, spec.rules[0]: Required value: at least one of resourceRules and nonResourceRules has to be non-empty]"
    );
    let level = defaulted(
        "flowcontrol.apiserver.k8s.io",
        "prioritylevelconfigurations",
        json!({"metadata": {"name": "workload"}, "spec": {"type": "Limited",
            "limited": {"borrowingLimitPercent": -1,
                        "limitResponse": {"type": "Queue", "queuing": {"queues": 4, "handSize": 6}}}}}),
    );
    assert_eq!(
        message(
            "flowcontrol.apiserver.k8s.io",
            "prioritylevelconfigurations",
            &level,
            None
        ),
        "PriorityLevelConfiguration.flowcontrol.apiserver.k8s.io \"workload\" is invalid: [spec.limited.limitResponse.queuing.handSize: Invalid value: 6: should not be greater than queues (4), spec.limited.borrowingLimitPercent: Invalid value: -1: if specified, must be a non-negative integer]"
    );
    let subjects = json!({"metadata": {"name": "s"}, "spec": {"matchingPrecedence": 100,
        "priorityLevelConfiguration": {"name": "workload"},
        "rules": [{"subjects": [{"kind": "User", "group": {"name": "g"}}, {"kind": "Robot"}],
                   "resourceRules": [{"verbs": ["get", "fly"], "apiGroups": [""], "resources": ["pods"]}]}]}});
    assert_eq!(
        message(
            "flowcontrol.apiserver.k8s.io",
            "flowschemas",
            &subjects,
            None
        ),
        "FlowSchema.flowcontrol.apiserver.k8s.io \"s\" is invalid: [spec.rules[0].subjects[0].user: Required value: user is required when subject kind is 'User', spec.rules[0].subjects[0].group: Forbidden: group is forbidden when subject kind is not 'Group', spec.rules[0].subjects[1].kind: Unsupported value: \"Robot\": supported values: \"Group\", \"ServiceAccount\", \"User\", spec.rules[0].resourceRules[0].verbs: Unsupported value: [\"get\",\"fly\"]: supported values: \"create\", \"delete\", \"deletecollection\", \"get\", \"list\", \"patch\", \"proxy\", \"update\", \"watch\", spec.rules[0].resourceRules[0].namespaces: Required value: resource rules that are not cluster scoped must supply at least one namespace]"
    );
}

#[test]
fn mandatory_flow_control_objects_keep_their_fixed_spec() {
    let schemas = def("flowcontrol.apiserver.k8s.io", "flowschemas");
    let exempt = json!({"metadata": {"name": "exempt"},
        "spec": mandatory_flow_schema_spec("exempt").unwrap()});
    assert!(validate(&schemas, &exempt, None).is_ok());
    let mut changed = exempt.clone();
    changed["spec"]["matchingPrecedence"] = json!(2);
    let refused = message(
        "flowcontrol.apiserver.k8s.io",
        "flowschemas",
        &changed,
        None,
    );
    assert!(
        refused.starts_with(
            "FlowSchema.flowcontrol.apiserver.k8s.io \"exempt\" is invalid: spec: Invalid value: "
        ),
        "{refused}"
    );
    assert!(
        refused.ends_with(": spec of 'exempt' must equal the fixed value"),
        "{refused}"
    );
    let levels = def(
        "flowcontrol.apiserver.k8s.io",
        "prioritylevelconfigurations",
    );
    for name in ["exempt", "catch-all"] {
        let level = json!({"metadata": {"name": name},
            "spec": mandatory_priority_level_spec(name).unwrap()});
        assert!(validate(&levels, &level, None).is_ok(), "{name}");
        let mut defaulted = level.clone();
        crate::defaults::apply_defaults(&levels, &mut defaulted);
        assert_eq!(defaulted, level, "{name}");
    }
    let mut starved = json!({"metadata": {"name": "catch-all"},
        "spec": mandatory_priority_level_spec("catch-all").unwrap()});
    starved["spec"]["limited"]["nominalConcurrencyShares"] = json!(1);
    assert!(
        message(
            "flowcontrol.apiserver.k8s.io",
            "prioritylevelconfigurations",
            &starved,
            None
        )
        .ends_with(": spec of 'catch-all' must equal the fixed value")
    );
    assert!(mandatory_flow_schema_spec("workload").is_none());
}

#[test]
fn storage_capacity_and_revision_validation() {
    let capacity = json!({"metadata": {"name": "c", "namespace": "n"}, "storageClassName": "fast"});
    let mut moved = capacity.clone();
    moved["storageClassName"] = json!("slow");
    assert_eq!(
        message(
            "storage.k8s.io",
            "csistoragecapacities",
            &moved,
            Some(&capacity)
        ),
        "CSIStorageCapacity.storage.k8s.io \"c\" is invalid: storageClassName: Invalid value: \"slow\": field is immutable"
    );
    let revision = json!({"metadata": {"name": "r", "namespace": "n"}, "revision": -1});
    assert_eq!(
        message("apps", "controllerrevisions", &revision, None),
        "ControllerRevision.apps \"r\" is invalid: [data: Required value: data is mandatory, revision: Invalid value: -1: must be greater than or equal to 0]"
    );
}

#[test]
fn status_rules_and_generation() {
    for (group, plural) in [
        ("storage.k8s.io", "volumeattachments"),
        (
            "admissionregistration.k8s.io",
            "validatingadmissionpolicies",
        ),
        ("flowcontrol.apiserver.k8s.io", "flowschemas"),
        (
            "flowcontrol.apiserver.k8s.io",
            "prioritylevelconfigurations",
        ),
    ] {
        assert!(has_status_rules(&def(group, plural)), "{plural}");
    }
    assert!(!has_status_rules(&def("storage.k8s.io", "csidrivers")));
    assert!(crate::defaults::keeps_generation(&def(
        "admissionregistration.k8s.io",
        "validatingadmissionpolicybindings"
    )));
    assert!(!crate::defaults::keeps_generation(&def(
        "node.k8s.io",
        "runtimeclasses"
    )));
}

/// A pod with one container, `spec` merged over it.
fn pod(spec: Value) -> Value {
    let mut pod = json!({"metadata": {"name": "p", "namespace": "n"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
    for (key, value) in spec.as_object().unwrap() {
        pod["spec"][key] = value.clone();
    }
    pod
}

fn pod_update(new: &Value, old: &Value) -> Result<(), String> {
    validate_pod_update(&def("", "pods"), new, old).map_err(|err| {
        assert_eq!(err.code, 422);
        err.message
    })
}

const FORBIDDEN_SPEC: &str =
    "Pod \"p\" is invalid: spec: Forbidden: pod updates may not change fields other than ";

fn required_terms(terms: Value) -> Value {
    json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}})
}

#[test]
fn gated_pods_may_add_node_selectors_and_node_affinity() {
    let gates = json!([{"name": "example.com/gate"}]);
    let old = pod(json!({
        "schedulingGates": gates,
        "nodeSelector": {"a": "b"},
        "affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["x"]}]}
            ]},
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 1, "preference": {"matchExpressions": [{"key": "k", "operator": "Exists"}]}}
            ]
        }}
    }));
    let new = pod(json!({
        "schedulingGates": gates,
        "nodeSelector": {"a": "b", "c": "d"},
        "affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["x"]},
                                      {"key": "disk", "operator": "Exists"}],
                 "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
            ]},
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 5, "preference": {"matchExpressions": [{"key": "other", "operator": "Exists"}]}}
            ]
        }}
    }));
    assert_eq!(pod_update(&new, &old), Ok(()));
    // The old pod's gates count: removing them in the same update changes nothing.
    let mut ungated = new.clone();
    ungated["spec"]
        .as_object_mut()
        .unwrap()
        .remove("schedulingGates");
    assert_eq!(pod_update(&ungated, &old), Ok(()));
    // A pod without affinity may get a node affinity (kube's munged Affinity back to nil).
    let bare = pod(json!({"schedulingGates": gates}));
    let with_affinity = pod(json!({"schedulingGates": gates,
        "affinity": required_terms(json!([{"matchExpressions": [{"key": "a", "operator": "Exists"}]}]))}));
    assert_eq!(pod_update(&with_affinity, &bare), Ok(()));
    // Without scheduling gates, the same additions are other fields' changes.
    let mut old_ungated = old.clone();
    old_ungated["spec"]
        .as_object_mut()
        .unwrap()
        .remove("schedulingGates");
    let err = pod_update(&ungated, &old_ungated).unwrap_err();
    assert!(err.starts_with(FORBIDDEN_SPEC), "{err}");
    assert!(
        err.contains(
            "- \tNodeSelector: {\"a\":\"b\"},\n+ \tNodeSelector: {\"a\":\"b\",\"c\":\"d\"},\n"
        ),
        "{err}"
    );
    let selector_only = pod(json!({"nodeSelector": {"a": "b", "c": "d"}}));
    let err = pod_update(&selector_only, &pod(json!({"nodeSelector": {"a": "b"}}))).unwrap_err();
    assert!(err.starts_with(FORBIDDEN_SPEC), "{err}");
}

#[test]
fn gated_pods_may_not_change_or_delete_node_selectors() {
    let gates = json!([{"name": "g"}]);
    let old = pod(json!({"schedulingGates": gates, "nodeSelector": {"a": "b", "c": "d"}}));
    let changed = pod(json!({"schedulingGates": gates, "nodeSelector": {"c": "d", "a": "z"}}));
    assert_eq!(
        pod_update(&changed, &old),
        Err("Pod \"p\" is invalid: spec.nodeSelector: Invalid value: map[string]string{\"a\":\"z\", \"c\":\"d\"}: only additions to spec.nodeSelector are allowed (no mutations or deletions)".to_owned())
    );
    let deleted = pod(json!({"schedulingGates": gates, "nodeSelector": {"a": "b"}}));
    assert_eq!(
        pod_update(&deleted, &old),
        Err("Pod \"p\" is invalid: spec.nodeSelector: Invalid value: map[string]string{\"a\":\"b\"}: only additions to spec.nodeSelector are allowed (no mutations or deletions)".to_owned())
    );
    let none = pod(json!({"schedulingGates": gates}));
    assert_eq!(
        pod_update(&none, &old),
        Err("Pod \"p\" is invalid: spec.nodeSelector: Invalid value: map[string]string(nil): only additions to spec.nodeSelector are allowed (no mutations or deletions)".to_owned())
    );
    // Alongside another field's change, both are reported, the node selector first.
    let mut renamed = changed.clone();
    renamed["spec"]["hostname"] = json!("h");
    let err = pod_update(&renamed, &old).unwrap_err();
    assert!(
        err.starts_with("Pod \"p\" is invalid: [spec.nodeSelector: Invalid value: map[string]string{\"a\":\"z\", \"c\":\"d\"}: only additions to spec.nodeSelector are allowed (no mutations or deletions), spec: Forbidden: pod updates may not change fields other than "),
        "{err}"
    );
    assert!(
        err.contains("+ \tHostname: \"h\",\n") && !err.contains("NodeSelector"),
        "{err}"
    );
}

#[test]
fn gated_pods_may_only_add_to_required_node_selector_terms() {
    let gates = json!([{"name": "g"}]);
    let term = json!({"matchExpressions": [{"key": "a", "operator": "In", "values": ["x", "y"]}]});
    let old = pod(json!({"schedulingGates": gates, "affinity": required_terms(json!([term]))}));
    let path = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms";
    // A term added.
    let added = pod(
        json!({"schedulingGates": gates, "affinity": required_terms(json!([
            term, {"matchExpressions": [{"key": "b", "operator": "Exists"}]}
        ]))}),
    );
    assert_eq!(
        pod_update(&added, &old),
        Err(format!(
            "Pod \"p\" is invalid: {path}: Invalid value: []core.NodeSelectorTerm{{core.NodeSelectorTerm{{MatchExpressions:[]core.NodeSelectorRequirement{{core.NodeSelectorRequirement{{Key:\"a\", Operator:\"In\", Values:[]string{{\"x\", \"y\"}}}}}}, MatchFields:[]core.NodeSelectorRequirement(nil)}}, core.NodeSelectorTerm{{MatchExpressions:[]core.NodeSelectorRequirement{{core.NodeSelectorRequirement{{Key:\"b\", Operator:\"Exists\", Values:[]string(nil)}}}}, MatchFields:[]core.NodeSelectorRequirement(nil)}}}}: no additions/deletions to non-empty NodeSelectorTerms list are allowed"
        ))
    );
    // The required terms removed (an empty node affinity), or all terms removed.
    let removed = pod(json!({"schedulingGates": gates, "affinity": {"nodeAffinity": {}}}));
    assert_eq!(
        pod_update(&removed, &old),
        Err(format!(
            "Pod \"p\" is invalid: {path}: Invalid value: []core.NodeSelectorTerm(nil): no additions/deletions to non-empty NodeSelectorTerms list are allowed"
        ))
    );
    let emptied = pod(json!({"schedulingGates": gates, "affinity": required_terms(json!([]))}));
    assert_eq!(
        pod_update(&emptied, &old),
        Err(format!(
            "Pod \"p\" is invalid: {path}: Invalid value: []core.NodeSelectorTerm{{}}: no additions/deletions to non-empty NodeSelectorTerms list are allowed"
        ))
    );
    // An existing expression mutated (a value dropped), with matchFields sent empty.
    let mutated = pod(
        json!({"schedulingGates": gates, "affinity": required_terms(json!([
            {"matchExpressions": [{"key": "a", "operator": "In", "values": ["x"]},
                                  {"key": "b", "operator": "Exists"}],
             "matchFields": []}
        ]))}),
    );
    assert_eq!(
        pod_update(&mutated, &old),
        Err(format!(
            "Pod \"p\" is invalid: {path}[0]: Invalid value: core.NodeSelectorTerm{{MatchExpressions:[]core.NodeSelectorRequirement{{core.NodeSelectorRequirement{{Key:\"a\", Operator:\"In\", Values:[]string{{\"x\"}}}}, core.NodeSelectorRequirement{{Key:\"b\", Operator:\"Exists\", Values:[]string(nil)}}}}, MatchFields:[]core.NodeSelectorRequirement{{}}}}: only additions are allowed (no mutations or deletions)"
        ))
    );
    // An empty term (selects nothing) may not become populated.
    let empty = pod(json!({"schedulingGates": gates, "affinity": required_terms(json!([{}]))}));
    let populated = pod(
        json!({"schedulingGates": gates, "affinity": required_terms(json!([
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}]}
        ]))}),
    );
    assert_eq!(
        pod_update(&populated, &empty),
        Err(format!(
            "Pod \"p\" is invalid: {path}[0]: Invalid value: core.NodeSelectorTerm{{MatchExpressions:[]core.NodeSelectorRequirement(nil), MatchFields:[]core.NodeSelectorRequirement{{core.NodeSelectorRequirement{{Key:\"metadata.name\", Operator:\"In\", Values:[]string{{\"n\"}}}}}}}}: only additions are allowed (no mutations or deletions)"
        ))
    );
    // `values: []` and absent `values` are the same requirement.
    let same = pod(
        json!({"schedulingGates": gates, "affinity": required_terms(json!([
            {"matchExpressions": [{"key": "a", "operator": "In", "values": ["x", "y"]}]}
        ]))}),
    );
    let old_exists = pod(
        json!({"schedulingGates": gates, "affinity": required_terms(json!([
            {"matchExpressions": [{"key": "e", "operator": "Exists"}]}
        ]))}),
    );
    let new_exists = pod(
        json!({"schedulingGates": gates, "affinity": required_terms(json!([
            {"matchExpressions": [{"key": "e", "operator": "Exists", "values": []}, {"key": "f", "operator": "Exists"}]}
        ]))}),
    );
    assert_eq!(pod_update(&same, &old), Ok(()));
    assert_eq!(pod_update(&new_exists, &old_exists), Ok(()));
}

#[test]
fn gated_pods_may_not_change_pod_affinity() {
    let gates = json!([{"name": "g"}]);
    let bare = pod(json!({"schedulingGates": gates}));
    let pod_affinity = json!({"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "zone", "labelSelector": {"matchLabels": {"app": "a"}}}
    ]});
    for key in ["podAffinity", "podAntiAffinity"] {
        let mut affinity =
            required_terms(json!([{"matchExpressions": [{"key": "a", "operator": "Exists"}]}]));
        affinity[key] = pod_affinity.clone();
        let new = pod(json!({"schedulingGates": gates, "affinity": affinity}));
        let err = pod_update(&new, &bare).unwrap_err();
        assert!(err.starts_with(FORBIDDEN_SPEC), "{err}");
        // The node affinity is the old one (none) in the diff; the pod affinity is shown.
        assert!(
            err.contains(&format!("+ \tAffinity: {{\"{key}\":")),
            "{err}"
        );
    }
    // An unchanged pod affinity next to a changed node affinity passes.
    let old = pod(json!({"schedulingGates": gates, "affinity": {"podAffinity": pod_affinity}}));
    let new = pod(
        json!({"schedulingGates": gates, "affinity": {"podAffinity": pod_affinity,
        "nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "preference": {"matchExpressions": [{"key": "a", "operator": "Exists"}]}}
        ]}}}),
    );
    assert_eq!(pod_update(&new, &old), Ok(()));
    // Dropping the whole affinity also drops the pod affinity: refused.
    let err = pod_update(&bare, &old).unwrap_err();
    assert!(err.starts_with(FORBIDDEN_SPEC), "{err}");
}

/// Goal: scheduling gates may only be removed; each added one is reported at its index, by
/// name, as kube's `validateOnlyDeletedSchedulingGates` does.
#[test]
fn scheduling_gates_may_only_be_removed() {
    let old = pod(json!({"schedulingGates": [{"name": "g1"}, {"name": "g2"}]}));
    let fewer = pod(json!({"schedulingGates": [{"name": "g2"}]}));
    assert_eq!(pod_update(&fewer, &old), Ok(()));
    let more = pod(
        json!({"schedulingGates": [{"name": "g1"}, {"name": "n1"}, {"name": "g2"}, {"name": "n2"}]}),
    );
    assert_eq!(
        pod_update(&more, &old),
        Err("Pod \"p\" is invalid: [spec.schedulingGates[1].name: Forbidden: only deletion is allowed, but found new scheduling gate 'n1', spec.schedulingGates[3].name: Forbidden: only deletion is allowed, but found new scheduling gate 'n2']".to_owned())
    );
    let ungated = pod(json!({}));
    assert_eq!(
        pod_update(&pod(json!({"schedulingGates": [{"name": "x"}]})), &ungated),
        Err("Pod \"p\" is invalid: spec.schedulingGates[0].name: Forbidden: only deletion is allowed, but found new scheduling gate 'x'".to_owned())
    );
}

fn causes(group: &str, plural: &str, object: &Value, old: Option<&Value>) -> Vec<String> {
    // The apps kinds as the server validates them: after their defaults (their strategies'
    // zero values are refused).
    let mut object = object.clone();
    if group == "apps" {
        crate::defaults::apply_defaults(&def(group, plural), &mut object);
    }
    match validate(&def(group, plural), &object, old) {
        Ok(()) => Vec::new(),
        Err(err) => err.cause_lines(),
    }
}

#[test]
fn a_secret_s_string_data_is_written_into_its_data_and_never_kept() {
    let mut secret = json!({"metadata": {"name": "s"}, "data": {"u": "eA==", "keep": "eQ=="},
        "stringData": {"u": "hunter2", "p": "ü"}});
    workloads::convert(&def("", "secrets"), &mut secret);
    assert_eq!(
        secret,
        json!({"metadata": {"name": "s"}, "data": {"u": "aHVudGVyMg==", "keep": "eQ==",
            "p": "w7w="}})
    );
    let mut only = json!({"stringData": {"a": "b"}});
    workloads::convert(&def("", "secrets"), &mut only);
    assert_eq!(only, json!({"data": {"a": "Yg=="}}));
    // Other kinds keep a field of that name.
    let mut map = json!({"stringData": {"a": "b"}});
    workloads::convert(&def("", "configmaps"), &mut map);
    assert_eq!(map, json!({"stringData": {"a": "b"}}));
}

#[test]
fn config_maps_and_secrets_keys_and_immutability_as_kube() {
    let cm = json!({"metadata": {"name": "c"}, "data": {"bad key": "x", "ok": "y", "..x": "z"},
        "binaryData": {"ok": "eg=="}});
    assert_eq!(
        causes("", "configmaps", &cm, None),
        [
            "data[..x]: Invalid value: \"..x\": must not start with '..'",
            "data[bad key]: Invalid value: \"bad key\": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
            "data[ok]: Invalid value: \"ok\": duplicate of key present in binaryData",
        ]
    );
    let old = json!({"metadata": {"name": "c"}, "data": {"a": "b"}, "immutable": true});
    assert!(causes("", "configmaps", &old, Some(&old)).is_empty());
    let changed = json!({"metadata": {"name": "c"}, "data": {"a": "c"}, "immutable": false});
    assert_eq!(
        causes("", "configmaps", &changed, Some(&old)),
        [
            "immutable: Forbidden: field is immutable when `immutable` is set",
            "data: Forbidden: field is immutable when `immutable` is set",
        ]
    );
    // Not immutable before: anything goes, including becoming immutable.
    let mutable = json!({"metadata": {"name": "c"}, "data": {"a": "b"}});
    assert!(causes("", "configmaps", &changed, Some(&mutable)).is_empty());

    let tls =
        json!({"metadata": {"name": "t"}, "type": "kubernetes.io/tls", "data": {"tls.crt": ""}});
    assert_eq!(
        causes("", "secrets", &tls, None),
        ["data[tls.key]: Required value"]
    );
    let opaque = json!({"metadata": {"name": "t"}, "type": "Opaque", "data": {"tls.crt": ""}});
    assert_eq!(
        causes("", "secrets", &opaque, Some(&tls)),
        ["type: Invalid value: \"Opaque\": field is immutable"]
    );
    let auth = json!({"metadata": {"name": "a"}, "type": "kubernetes.io/basic-auth"});
    assert_eq!(
        causes("", "secrets", &auth, None),
        [
            "data[username]: Required value",
            "data[password]: Required value"
        ]
    );
}

#[test]
fn workloads_select_their_templates_and_keep_their_selectors() {
    let deployment = |selector: Value, labels: Value, replicas: i64| {
        json!({"metadata": {"name": "d"}, "spec": {"replicas": replicas, "selector": selector,
            "template": {"metadata": {"labels": labels}, "spec": {"restartPolicy": "Always",
                "containers": [{"name": "c", "image": "nginx"}]}}}})
    };
    let good = deployment(
        json!({"matchLabels": {"app": "web"}}),
        json!({"app": "web", "x": "y"}),
        1,
    );
    assert!(causes("apps", "deployments", &good, None).is_empty());
    let expressions = deployment(
        json!({"matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "api"]},
            {"key": "gone", "operator": "DoesNotExist"}]}),
        json!({"app": "api"}),
        0,
    );
    assert!(causes("apps", "deployments", &expressions, None).is_empty());
    let mismatched = deployment(json!({"matchLabels": {"a": "b"}}), json!({"a": "c"}), -3);
    assert_eq!(
        causes("apps", "deployments", &mismatched, None),
        [
            "spec.replicas: Invalid value: -3: must be greater than or equal to 0",
            "spec.template.metadata.labels: Invalid value: map[string]string{\"a\":\"c\"}: `selector` does not match template `labels`",
        ]
    );
    let empty = deployment(json!({}), json!({"a": "c"}), 1);
    assert_eq!(
        causes("apps", "statefulsets", &empty, None),
        [
            "spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string(nil), MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: empty selector is invalid for statefulset"
        ]
    );
    let mut none = good.clone();
    none["spec"].as_object_mut().unwrap().remove("selector");
    assert_eq!(
        causes("apps", "replicasets", &none, None),
        ["spec.selector: Required value"]
    );
    let moved = deployment(
        json!({"matchLabels": {"app": "web2"}}),
        json!({"app": "web2"}),
        1,
    );
    assert_eq!(
        causes("apps", "deployments", &moved, Some(&good)),
        [
            "spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{\"app\":\"web2\"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable"
        ]
    );
    let mut restarting = good.clone();
    restarting["spec"]["template"]["spec"]["restartPolicy"] = json!("Never");
    assert_eq!(
        causes("apps", "daemonsets", &restarting, None),
        [
            "spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\""
        ]
    );
}

#[test]
fn pods_and_jobs_need_their_containers_and_restart_policies() {
    let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": []}});
    assert_eq!(
        causes("", "pods", &pod, None),
        ["spec.containers: Required value"]
    );
    let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [
        {"name": "a"}, {"name": "a", "image": "x", "ports": [{"containerPort": 70000}]},
        {"name": "B", "image": "x"}]}});
    assert_eq!(
        causes("", "pods", &pod, None),
        [
            "spec.containers[0].image: Required value",
            "spec.containers[1].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
            "spec.containers[1].name: Duplicate value: \"a\"",
            "spec.containers[2].name: Invalid value: \"B\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
        ]
    );
    let job = defaulted(
        "batch",
        "jobs",
        json!({"metadata": {"name": "j"}, "spec": {"parallelism": -1, "template": {"spec": {
            "containers": [{"name": "c", "image": "busybox"}]}}}}),
    );
    assert_eq!(
        causes("batch", "jobs", &job, None),
        [
            "spec.parallelism: Invalid value: -1: must be greater than or equal to 0",
            "spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\"",
        ]
    );
}

#[test]
fn a_job_selects_its_pods_by_its_uid_unless_it_selects_them_itself() {
    let mut job = json!({"metadata": {"name": "j", "uid": "u-1"}, "spec": {"template": {
        "metadata": {"labels": {"job-name": "mine"}},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}});
    workloads::prepare_created(&def("batch", "jobs"), &mut job);
    crate::defaults::apply_defaults(&def("batch", "jobs"), &mut job);
    let labels = json!({"job-name": "mine", "batch.kubernetes.io/job-name": "j",
        "controller-uid": "u-1", "batch.kubernetes.io/controller-uid": "u-1"});
    assert_eq!(job["spec"]["template"]["metadata"]["labels"], labels);
    assert_eq!(
        job["spec"]["selector"],
        json!({"matchLabels": {"batch.kubernetes.io/controller-uid": "u-1"}})
    );
    assert_eq!(
        job["metadata"]["labels"], labels,
        "the template's, as kube defaults them"
    );
    assert!(causes("batch", "jobs", &job, None).is_empty());
    let mut manual = json!({"metadata": {"name": "j", "uid": "u-1"},
        "spec": {"manualSelector": true, "template": {}}});
    workloads::prepare_created(&def("batch", "jobs"), &mut manual);
    assert!(manual["spec"].get("selector").is_none());
}

/// `ValidatePodTemplateSpec`: a template's labels and annotations are checked as an object's,
/// at `spec.template.labels` (kube's path: the embedded `ObjectMeta` adds no `metadata`), before
/// its spec; the same for a PodTemplate's `template`.
#[test]
fn a_template_s_labels_and_annotations_are_validated() {
    let deployment = json!({"metadata": {"name": "d"}, "spec": {
        "selector": {"matchLabels": {"app": "bad value"}},
        "template": {"metadata": {"labels": {"app": "bad value"},
            "annotations": {"Not Valid/x": "1"}},
            "spec": {"containers": [{"name": "c", "image": "x",
                "terminationMessagePolicy": "File", "imagePullPolicy": "Always"}],
                "restartPolicy": "Always", "dnsPolicy": "ClusterFirst"}}}});
    let found = causes("apps", "deployments", &deployment, None);
    let at = |prefix: &str| found.iter().position(|c| c.starts_with(prefix));
    assert!(
        at("spec.template.labels: Invalid value: \"bad value\"").is_some(),
        "{found:?}"
    );
    assert!(
        at("spec.template.annotations: Invalid value: \"Not Valid/x\"").is_some(),
        "{found:?}"
    );
    let mut good = deployment.clone();
    good["spec"]["selector"] = json!({"matchLabels": {"app": "ok"}});
    good["spec"]["template"]["metadata"] = json!({"labels": {"app": "ok"}});
    assert_eq!(
        causes("apps", "deployments", &good, None),
        Vec::<String>::new()
    );
    let template = json!({"metadata": {"name": "t"}, "template": {
        "metadata": {"labels": {"-x": "y"}},
        "spec": {"containers": [{"name": "c", "image": "x", "terminationMessagePolicy": "File",
            "imagePullPolicy": "Always"}], "restartPolicy": "Always", "dnsPolicy": "ClusterFirst"}}});
    let found = causes("", "podtemplates", &template, None);
    assert!(
        found
            .iter()
            .any(|c| c.starts_with("template.labels: Invalid value: \"-x\"")),
        "{found:?}"
    );
}

/// `ValidatePodTemplateSpecForStatefulSet`: a StatefulSet's pod spec is not validated (its
/// containers mount the volume claim templates, which are not among its volumes), but for its
/// restart policy and `activeDeadlineSeconds`; its labels still are.
#[test]
fn a_stateful_set_s_template_spec_is_left_to_its_pods() {
    let set = |spec: Value| {
        json!({"metadata": {"name": "web"}, "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": spec},
            "volumeClaimTemplates": [{"metadata": {"name": "www"},
                "spec": {"accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": "1Gi"}}}}]}})
    };
    let mounting = json!({"restartPolicy": "Always", "containers": [{"name": "c", "image": "x",
        "volumeMounts": [{"name": "www", "mountPath": "/data"}]}]});
    assert_eq!(
        causes("apps", "statefulsets", &set(mounting.clone()), None),
        Vec::<String>::new()
    );
    // The same template in a Deployment names a volume it does not have.
    let mut deployment = set(mounting.clone());
    deployment["spec"]
        .as_object_mut()
        .unwrap()
        .remove("volumeClaimTemplates");
    let found = causes("apps", "deployments", &deployment, None);
    assert!(
        found
            .iter()
            .any(|c| c
                .starts_with("spec.template.spec.containers[0].volumeMounts[0].name: Not found")),
        "{found:?}"
    );
    let mut deadline = mounting;
    deadline["activeDeadlineSeconds"] = json!(10);
    assert_eq!(
        causes("apps", "statefulsets", &set(deadline), None),
        [
            "spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in StatefulSet is not Supported"
        ]
    );
}

#[test]
fn replication_controllers_select_their_templates() {
    let rc = |selector: Value| {
        defaulted(
            "",
            "replicationcontrollers",
            json!({"metadata": {"name": "rc"}, "spec": {"selector": selector, "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}),
        )
    };
    // No selector: kube's defaults take the template's labels.
    assert!(validate(&def("", "replicationcontrollers"), &rc(json!(null)), None).is_ok());
    assert_eq!(
        message(
            "",
            "replicationcontrollers",
            &rc(json!({"app": "db"})),
            None
        ),
        "ReplicationController \"rc\" is invalid: spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"web\"}: `selector` does not match template `labels`"
    );
    let mut deadline = rc(json!({"app": "web"}));
    deadline["spec"]["template"]["spec"]["activeDeadlineSeconds"] = json!(5);
    deadline["spec"]["replicas"] = json!(-1);
    assert_eq!(
        message("", "replicationcontrollers", &deadline, None),
        "ReplicationController \"rc\" is invalid: [spec.replicas: Invalid value: -1: must be greater than or equal to 0, spec.template.spec.activeDeadlineSeconds: Invalid value: 5: activeDeadlineSeconds in ReplicationController is not Supported]"
    );
}

#[test]
fn a_docker_config_secret_holds_a_json_object() {
    use base64::Engine;
    let secret = |kind: &str, key: &str, contents: &str| {
        let encoded = base64::engine::general_purpose::STANDARD.encode(contents);
        json!({"metadata": {"name": "s"}, "type": kind, "data": {key: encoded}})
    };
    let json_type = "kubernetes.io/dockerconfigjson";
    assert!(
        causes(
            "",
            "secrets",
            &secret(json_type, ".dockerconfigjson", r#"{"auths": {}}"#),
            None
        )
        .is_empty()
    );
    assert!(
        causes(
            "",
            "secrets",
            &secret(json_type, ".dockerconfigjson", "null"),
            None
        )
        .is_empty()
    );
    for (contents, error) in [
        (
            "not json",
            "invalid character 'o' in literal null (expecting 'u')",
        ),
        (
            "bogus",
            "invalid character 'b' looking for beginning of value",
        ),
        ("", "unexpected end of JSON input"),
        ("{\"a\": 1", "unexpected end of JSON input"),
        (
            "[1]",
            "json: cannot unmarshal array into Go value of type map[string]interface {}",
        ),
        (
            "\"x\"",
            "json: cannot unmarshal string into Go value of type map[string]interface {}",
        ),
    ] {
        assert_eq!(
            causes(
                "",
                "secrets",
                &secret(json_type, ".dockerconfigjson", contents),
                None
            ),
            [format!(
                "data[.dockerconfigjson]: Invalid value: \"<secret contents redacted>\": {error}"
            )],
            "{contents}"
        );
    }
    assert_eq!(
        causes(
            "",
            "secrets",
            &secret("kubernetes.io/dockercfg", ".dockercfg", "{"),
            None
        ),
        [
            "data[.dockercfg]: Invalid value: \"<secret contents redacted>\": unexpected end of JSON input"
        ]
    );
}

/// Goal: the pod update check's shortcut (`unchanged_but_updatable`, no copy of the spec) says
/// "unchanged" exactly when the copy with the updatable fields taken from the old spec equals
/// the old spec, for specs that differ (or not) in the updatable fields, the containers'
/// other fields, non-map containers, lists of other lengths, the negative grace period's
/// exception, and fields only one side has. Both answers occur often.
#[test]
fn unchanged_but_updatable_agrees_with_the_copy() {
    let containers = [
        Value::Null,
        json!([]),
        json!([{"name": "a", "image": "x"}]),
        json!([{"name": "a", "image": "y"}]),
        json!([{"name": "a"}]),
        json!([{"name": "b", "image": "x"}]),
        json!([{"name": "a", "image": "x"}, {"name": "c", "image": "z"}]),
        json!([{"name": "a", "image": "x"}, "not a map"]),
        json!(["not a map"]),
    ];
    let small = [
        Value::Null,
        json!(1),
        json!(-1),
        json!(30),
        json!([{"key": "k", "tolerationSeconds": 5}]),
        json!("n1"),
    ];
    let keys = [
        "containers",
        "initContainers",
        "activeDeadlineSeconds",
        "tolerations",
        "terminationGracePeriodSeconds",
        "nodeName",
        "schedulingGates",
    ];
    // A seeded generator: the same pairs on every run.
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = |n: usize| {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        usize::try_from(state >> 33).unwrap_or(0) % n
    };
    let spec = |next: &mut dyn FnMut(usize) -> usize| {
        let mut map = Map::new();
        for key in keys {
            // Absent a third of the time.
            if next(3) == 0 {
                continue;
            }
            let value = if key.ends_with("ontainers") {
                containers[next(containers.len())].clone()
            } else if key == "schedulingGates" {
                Value::Null
            } else {
                small[next(small.len())].clone()
            };
            map.insert(key.to_owned(), value);
        }
        map
    };
    let (mut same, mut changed) = (0, 0);
    for _ in 0..20_000 {
        let old = spec(&mut next);
        // Half the time a variation of the old spec in one field, so "unchanged" is common.
        let new = if next(2) == 0 {
            let mut new = old.clone();
            let key = keys[next(keys.len())];
            match next(3) {
                0 => {
                    new.remove(key);
                }
                1 if key.ends_with("ontainers") => {
                    new.insert(key.to_owned(), containers[next(containers.len())].clone());
                }
                _ => {
                    new.insert(key.to_owned(), small[next(small.len())].clone());
                }
            }
            new
        } else {
            spec(&mut next)
        };
        let expected = munged_spec(&new, &old) == old;
        assert_eq!(
            unchanged_but_updatable(&new, &old),
            expected,
            "new {new:?}\nold {old:?}"
        );
        if expected {
            same += 1;
        } else {
            changed += 1;
        }
    }
    assert!(
        same > 1_000 && changed > 1_000,
        "{same} unchanged, {changed} changed"
    );
}

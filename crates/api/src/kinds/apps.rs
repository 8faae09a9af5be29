//! The apps workloads' remaining spec rules as kube-apiserver's `pkg/apis/apps/validation`
//! (`ValidateDeploymentSpec`, `ValidateStatefulSetSpec`, `ValidateDaemonSetSpec`) applies
//! them, after the rules every workload shares ([`super::workloads`]: replicas,
//! `minReadySeconds`, selector, template).
//!
//! ## Guarantees
//! - Deployment (`ValidateDeploymentStrategy`, after the template): a strategy `Recreate`
//!   without `rollingUpdate` (`spec.strategy.rollingUpdate: Forbidden: may not be specified
//!   when strategy `type` is 'Recreate'`) or `RollingUpdate` whose `maxUnavailable` and
//!   `maxSurge` are each a non-negative integer or a percentage (`[0-9]+%`), not both 0
//!   (`may not be 0 when `maxSurge` is 0`), `maxUnavailable` at most 100%; any other type is
//!   `spec.strategy: Unsupported value: apps.DeploymentStrategy{...}`. Then
//!   `revisionHistoryLimit` is not negative and `progressDeadlineSeconds` not negative and
//!   greater than `minReadySeconds`. (`paused` has no rule.)
//! - StatefulSet (before the shared rules, as kube orders them): `podManagementPolicy` is
//!   `OrderedReady` or `Parallel`; `updateStrategy.type` is `RollingUpdate` (its
//!   `rollingUpdate.partition` not negative) or `OnDelete` (without `rollingUpdate`); the
//!   claim retention policy's `whenDeleted` and `whenScaled` are `Retain` or `Delete`; each of
//!   `volumeClaimTemplates` has a claim spec as a PersistentVolumeClaim's
//!   ([`super::storage::claim`], the paths under `spec.volumeClaimTemplates[i].spec`) on
//!   create and when an update changes the templates; `ordinals.start` is not negative, so
//!   `revisionHistoryLimit` when created or changed (kubernetes#129017); a created set's
//!   `serviceName` is empty or a DNS label (kubernetes#130233).
//! - StatefulSet updates (`ValidateStatefulSetUpdate`, after all the spec's other rules): the
//!   spec, less `replicas`, `ordinals`, `template`, `updateStrategy`, `revisionHistoryLimit`,
//!   `persistentVolumeClaimRetentionPolicy` and `minReadySeconds`, is the stored one (with
//!   today's defaults, as kube decodes a stored object; `apiequality.Semantic.DeepEqual`: absent and Go's zero values alike, quantities by
//!   amount), else `spec: Forbidden: updates to statefulset spec for fields other than
//!   'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit',
//!   'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden` (kube 1.33's
//!   list; 1.32's lacked `revisionHistoryLimit`). So `selector`, `serviceName`,
//!   `podManagementPolicy` and `volumeClaimTemplates` never change; a changed selector is
//!   this cause alone, as in kube (the StatefulSet strategy has no selector rule of its own).
//! - DaemonSet (after the template): `updateStrategy` `OnDelete`, or `RollingUpdate` with a
//!   `rollingUpdate` whose `maxUnavailable` and `maxSurge` are each a non-negative integer or a
//!   percentage of at most 100%, exactly one of them non-zero; then `revisionHistoryLimit` not
//!   negative.
//!
//! ## Differs from kube
//! - A value kube prints as Go's `%#v` of an internal struct prints so too, but a pointer
//!   field that is set prints as `(*T)(<its JSON>)` where Go prints an address.
//! - A Deployment's `minReadySeconds` is reported before its selector (the shared rules'
//!   order), kube's after the strategy; a StatefulSet's `replicas` and `minReadySeconds` after
//!   its `ordinals` and `serviceName`, kube's before.
//! - A StatefulSet's claim templates are checked as kube 1.34 checks them (kube 1.33 did not);
//!   its `rollingUpdate.maxUnavailable` is not checked (kube 1.33 drops it:
//!   `MaxUnavailableStatefulSet` is off). Not checked: a DaemonSet's `templateGeneration`
//!   (not in apps/v1).
//! - The StatefulSet update rule compares JSON: a pointer field sent as its zero value (`{}`,
//!   `0`) and one left out are alike here, different in Go (only inside
//!   `volumeClaimTemplates`, the other fields being defaulted or updatable).

use serde_json::{Value, json};

use super::common::{
    go_int_or_string, int_or_percent_value, invalid, invalid_printed, items,
    not_more_than_100_percent, not_supported, positive_int_or_percent, present, semantic_eq, text,
};
use crate::field::{Cause, forbidden, required};
use crate::resources::ResourceDef;

/// The StatefulSet rules kube checks before those every workload shares (see the module's
/// guarantees).
pub(super) fn before_shared(
    def: &ResourceDef,
    object: &Value,
    old: Option<&Value>,
    causes: &mut Vec<Cause>,
) {
    if (def.group.as_str(), def.kind.as_str()) == ("apps", "StatefulSet") {
        stateful_set(object, old, causes);
    }
}

/// The Deployment and DaemonSet rules kube checks after the template, and a StatefulSet
/// update's rule that only some spec fields change.
pub(super) fn after_shared(
    def: &ResourceDef,
    object: &Value,
    old: Option<&Value>,
    causes: &mut Vec<Cause>,
) {
    match (def.group.as_str(), def.kind.as_str()) {
        ("apps", "Deployment") => deployment(object, causes),
        ("apps", "DaemonSet") => daemon_set(object, causes),
        ("apps", "StatefulSet") => {
            if let Some(old) = old {
                // `old` as kube reads it, defaulted (`defaults::stored_as_read`): one written
                // before a default was added compares as if it had it.
                stateful_set_update(object, old, causes);
            }
        }
        _ => {}
    }
}

/// The spec fields of a StatefulSet an update may change (kube 1.33's
/// `ValidateStatefulSetUpdate` takes them from the old spec before comparing).
const STATEFUL_SET_UPDATABLE: [&str; 7] = [
    "replicas",
    "ordinals",
    "template",
    "updateStrategy",
    "revisionHistoryLimit",
    "persistentVolumeClaimRetentionPolicy",
    "minReadySeconds",
];

/// kube 1.33's detail when a StatefulSet update changes another spec field.
const STATEFUL_SET_FORBIDDEN: &str = "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden";

/// `ValidateStatefulSetUpdate`'s comparison: the spec without the updatable fields is
/// semantically the old one's (`apiequality.Semantic.DeepEqual`).
fn stateful_set_update(object: &Value, old: &Value, causes: &mut Vec<Cause>) {
    let rest = |o: &Value| -> Value {
        let mut spec = o.get("spec").cloned().unwrap_or(Value::Null);
        if let Some(fields) = spec.as_object_mut() {
            for key in STATEFUL_SET_UPDATABLE {
                fields.remove(key);
            }
        }
        spec
    };
    if !semantic_eq(Some(&rest(object)), Some(&rest(old))) {
        causes.push(forbidden("spec", STATEFUL_SET_FORBIDDEN));
    }
}

/// A pointer field of a Go struct as `%#v` prints it: `(*T)(nil)` when unset.
fn go_pointer(value: Option<&Value>, go_type: &str) -> String {
    value.map_or_else(
        || format!("(*{go_type})(nil)"),
        |v| format!("(*{go_type})({v})"),
    )
}

/// A strategy `{type, rollingUpdate}` as Go's `%#v` of `go_type` prints it.
fn go_strategy(strategy: &Value, go_type: &str, rolling_type: &str) -> String {
    format!(
        "{go_type}{{Type:{}, RollingUpdate:{}}}",
        crate::field::go_quote(text(strategy, "type")),
        go_pointer(present(strategy, "rollingUpdate"), rolling_type)
    )
}

/// `spec.<field>` is not negative when set.
fn nonnegative(object: &Value, field: &str, causes: &mut Vec<Cause>) {
    if let Some(value) = present(object, &format!("spec.{field}")).filter(|v| is_negative(v)) {
        causes.push(invalid(
            &format!("spec.{field}"),
            value,
            "must be greater than or equal to 0",
        ));
    }
}

fn is_negative(value: &Value) -> bool {
    value.as_i64().is_some_and(|n| n < 0)
}

fn deployment(object: &Value, causes: &mut Vec<Cause>) {
    let strategy = present(object, "spec.strategy").unwrap_or(&Value::Null);
    let rolling = present(strategy, "rollingUpdate");
    match text(strategy, "type") {
        "Recreate" => {
            if rolling.is_some() {
                causes.push(forbidden(
                    "spec.strategy.rollingUpdate",
                    "may not be specified when strategy `type` is 'Recreate'",
                ));
            }
        }
        "RollingUpdate" => match rolling {
            None => causes.push(required(
                "spec.strategy.rollingUpdate",
                "this should be defaulted and never be nil",
            )),
            Some(rolling) => {
                let at = "spec.strategy.rollingUpdate";
                let zero = json!(0);
                let unavailable = present(rolling, "maxUnavailable").unwrap_or(&zero);
                let surge = present(rolling, "maxSurge").unwrap_or(&zero);
                positive_int_or_percent(unavailable, &format!("{at}.maxUnavailable"), causes);
                positive_int_or_percent(surge, &format!("{at}.maxSurge"), causes);
                if int_or_percent_value(unavailable) == 0 && int_or_percent_value(surge) == 0 {
                    causes.push(invalid_printed(
                        &format!("{at}.maxUnavailable"),
                        &go_int_or_string(unavailable),
                        "may not be 0 when `maxSurge` is 0",
                    ));
                }
                not_more_than_100_percent(unavailable, &format!("{at}.maxUnavailable"), causes);
            }
        },
        _ => causes.push(crate::field::not_supported(
            "spec.strategy",
            &go_strategy(
                strategy,
                "apps.DeploymentStrategy",
                "apps.RollingUpdateDeployment",
            ),
            &["Recreate", "RollingUpdate"],
        )),
    }
    nonnegative(object, "revisionHistoryLimit", causes);
    if let Some(deadline) = present(object, "spec.progressDeadlineSeconds") {
        nonnegative(object, "progressDeadlineSeconds", causes);
        let ready = present(object, "spec.minReadySeconds")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if deadline.as_i64().is_some_and(|d| d <= ready) {
            causes.push(invalid(
                "spec.progressDeadlineSeconds",
                deadline,
                "must be greater than minReadySeconds",
            ));
        }
    }
}

fn stateful_set(object: &Value, old: Option<&Value>, causes: &mut Vec<Cause>) {
    match text(object, "spec.podManagementPolicy") {
        "" => causes.push(required("spec.podManagementPolicy", "")),
        "OrderedReady" | "Parallel" => {}
        other => causes.push(invalid(
            "spec.podManagementPolicy",
            &json!(other),
            "must be 'OrderedReady' or 'Parallel'",
        )),
    }
    let strategy = present(object, "spec.updateStrategy").unwrap_or(&Value::Null);
    let rolling = present(strategy, "rollingUpdate");
    match text(strategy, "type") {
        "" => causes.push(required("spec.updateStrategy", "")),
        "OnDelete" => {
            if let Some(rolling) = rolling {
                let printed = format!(
                    "apps.RollingUpdateStatefulSetStrategy{{Partition:{}, MaxUnavailable:{}}}",
                    rolling
                        .get("partition")
                        .and_then(Value::as_i64)
                        .unwrap_or(0),
                    go_pointer(present(rolling, "maxUnavailable"), "intstr.IntOrString")
                );
                causes.push(invalid_printed(
                    "spec.updateStrategy.rollingUpdate",
                    &printed,
                    "only allowed for updateStrategy 'RollingUpdate'",
                ));
            }
        }
        "RollingUpdate" => {
            if let Some(partition) = rolling
                .and_then(|r| present(r, "partition"))
                .filter(|p| is_negative(p))
            {
                causes.push(invalid(
                    "spec.updateStrategy.rollingUpdate.partition",
                    partition,
                    "must be greater than or equal to 0",
                ));
            }
        }
        _ => causes.push(invalid_printed(
            "spec.updateStrategy",
            &go_strategy(
                strategy,
                "apps.StatefulSetUpdateStrategy",
                "apps.RollingUpdateStatefulSetStrategy",
            ),
            "must be 'RollingUpdate' or 'OnDelete'",
        )),
    }
    if let Some(policy) = present(object, "spec.persistentVolumeClaimRetentionPolicy") {
        for key in ["whenDeleted", "whenScaled"] {
            let value = present(policy, key).cloned().unwrap_or(json!(""));
            if !matches!(value.as_str(), Some("Retain" | "Delete")) {
                causes.push(not_supported(
                    &format!("spec.persistentVolumeClaimRetentionPolicy.{key}"),
                    &value,
                    &["Retain", "Delete"],
                ));
            }
        }
    }
    let templates = items(object, "spec.volumeClaimTemplates");
    let changed = old.is_none_or(|old| items(old, "spec.volumeClaimTemplates") != templates);
    if changed {
        for (i, template) in templates.iter().enumerate() {
            claim_template(template, i, causes);
        }
    }
    if let Some(start) = present(object, "spec.ordinals.start").filter(|s| is_negative(s)) {
        causes.push(invalid(
            "spec.ordinals.start",
            start,
            "must be greater than or equal to 0",
        ));
    }
    // kubernetes#129017: a negative limit panicked the controller; a stored one is kept.
    let limit = |o: &Value| present(o, "spec.revisionHistoryLimit").cloned();
    if old.is_none_or(|old| limit(old) != limit(object)) {
        nonnegative(object, "revisionHistoryLimit", causes);
    }
    // kubernetes#130233: a created set's service name is a DNS label (its pods' subdomain);
    // an update keeps a stored one that is not (`AllowInvalidServiceName`).
    let service = text(object, "spec.serviceName");
    if old.is_none()
        && !service.is_empty()
        && let Err(message) = crate::names::validate_dns1123_label(service)
    {
        causes.push(invalid("spec.serviceName", &json!(service), &message));
    }
}

/// kube 1.34's `ValidateVolumeClaimTemplates` of one template: its claim spec as a claim's.
fn claim_template(template: &Value, index: usize, causes: &mut Vec<Cause>) {
    let spec = template.get("spec").cloned().unwrap_or(Value::Null);
    let mut found = Vec::new();
    super::storage::claim(&json!({ "spec": spec }), None, &mut found);
    let prefix = format!("spec.volumeClaimTemplates[{index}].spec");
    causes.extend(found.into_iter().map(|(path, message, reason)| {
        let rest = path.strip_prefix("spec").unwrap_or(&path);
        (format!("{prefix}{rest}"), message, reason)
    }));
}

fn daemon_set(object: &Value, causes: &mut Vec<Cause>) {
    let strategy = present(object, "spec.updateStrategy").unwrap_or(&Value::Null);
    match text(strategy, "type") {
        "OnDelete" => {}
        "RollingUpdate" => match present(strategy, "rollingUpdate") {
            None => causes.push(required("spec.updateStrategy.rollingUpdate", "")),
            Some(rolling) => {
                let at = "spec.updateStrategy.rollingUpdate";
                let zero = json!(0);
                let unavailable = present(rolling, "maxUnavailable").unwrap_or(&zero);
                let surge = present(rolling, "maxSurge").unwrap_or(&zero);
                let (unavailable_at, surge_at) =
                    (format!("{at}.maxUnavailable"), format!("{at}.maxSurge"));
                positive_int_or_percent(unavailable, &unavailable_at, causes);
                positive_int_or_percent(surge, &surge_at, causes);
                not_more_than_100_percent(unavailable, &unavailable_at, causes);
                not_more_than_100_percent(surge, &surge_at, causes);
                let has_unavailable = int_or_percent_value(unavailable) != 0;
                let has_surge = int_or_percent_value(surge) != 0;
                if has_unavailable && has_surge {
                    causes.push(invalid_printed(
                        &surge_at,
                        &go_int_or_string(surge),
                        "may not be set when maxUnavailable is non-zero",
                    ));
                } else if !has_unavailable && !has_surge {
                    causes.push(required(&unavailable_at, "cannot be 0 when maxSurge is 0"));
                }
            }
        },
        _ => causes.push(crate::field::not_supported(
            "spec.updateStrategy",
            &go_strategy(
                strategy,
                "apps.DaemonSetUpdateStrategy",
                "apps.RollingUpdateDaemonSet",
            ),
            &["RollingUpdate", "OnDelete"],
        )),
    }
    nonnegative(object, "revisionHistoryLimit", causes);
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    fn message(plural: &str, object: Value, old: Option<&Value>) -> Option<String> {
        crate::kinds::refusal("apps", plural, object, old)
    }

    fn workload(spec: Value) -> Value {
        let mut base = json!({"metadata": {"name": "w"}, "spec": {
            "selector": {"matchLabels": {"app": "w"}},
            "template": {"metadata": {"labels": {"app": "w"}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}});
        for (key, value) in spec.as_object().unwrap() {
            base["spec"][key] = value.clone();
        }
        base
    }

    #[test]
    fn deployment_strategies() {
        assert_eq!(message("deployments", workload(json!({})), None), None);
        assert_eq!(
            message(
                "deployments",
                workload(json!({"strategy": {"type": "Bogus"}})),
                None
            )
            .unwrap(),
            "Deployment.apps \"w\" is invalid: spec.strategy: Unsupported value: apps.DeploymentStrategy{Type:\"Bogus\", RollingUpdate:(*apps.RollingUpdateDeployment)(nil)}: supported values: \"Recreate\", \"RollingUpdate\""
        );
        assert_eq!(
            message(
                "deployments",
                workload(json!({"strategy": {"type": "Recreate", "rollingUpdate": {}}})),
                None
            )
            .unwrap(),
            "Deployment.apps \"w\" is invalid: spec.strategy.rollingUpdate: Forbidden: may not be specified when strategy `type` is 'Recreate'"
        );
        let zero = workload(
            json!({"strategy": {"rollingUpdate": {"maxUnavailable": 0, "maxSurge": "0%"}},
            "revisionHistoryLimit": -1, "minReadySeconds": 30, "progressDeadlineSeconds": 30}),
        );
        assert_eq!(
            message("deployments", zero, None).unwrap(),
            "Deployment.apps \"w\" is invalid: [spec.strategy.rollingUpdate.maxUnavailable: Invalid value: intstr.IntOrString{Type:0, IntVal:0, StrVal:\"\"}: may not be 0 when `maxSurge` is 0, spec.revisionHistoryLimit: Invalid value: -1: must be greater than or equal to 0, spec.progressDeadlineSeconds: Invalid value: 30: must be greater than minReadySeconds]"
        );
        let bad = workload(
            json!({"strategy": {"rollingUpdate": {"maxUnavailable": "150%", "maxSurge": "x"}}}),
        );
        assert_eq!(
            message("deployments", bad, None).unwrap(),
            "Deployment.apps \"w\" is invalid: [spec.strategy.rollingUpdate.maxSurge: Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:\"x\"}: a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%'), spec.strategy.rollingUpdate.maxUnavailable: Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:\"150%\"}: must not be greater than 100%]"
        );
    }

    #[test]
    fn stateful_set_specs() {
        let good = workload(
            json!({"serviceName": "w", "volumeClaimTemplates": [{"metadata": {"name": "v"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]}),
        );
        assert_eq!(message("statefulsets", good.clone(), None), None);
        let bad = workload(
            json!({"podManagementPolicy": "Bogus", "updateStrategy": {"type": "Bogus"},
            "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Keep"},
            "volumeClaimTemplates": [{"metadata": {"name": "v"}, "spec": {"accessModes": ["Bogus"],
                "resources": {"requests": {"storage": "1Gi"}}}}],
            "ordinals": {"start": -1}, "serviceName": "Bad.Name", "revisionHistoryLimit": -1, "replicas": -1}),
        );
        assert_eq!(
            message("statefulsets", bad, None).unwrap(),
            "StatefulSet.apps \"w\" is invalid: [spec.podManagementPolicy: Invalid value: \"Bogus\": must be 'OrderedReady' or 'Parallel', spec.updateStrategy: Invalid value: apps.StatefulSetUpdateStrategy{Type:\"Bogus\", RollingUpdate:(*apps.RollingUpdateStatefulSetStrategy)(nil)}: must be 'RollingUpdate' or 'OnDelete', spec.persistentVolumeClaimRetentionPolicy.whenDeleted: Unsupported value: \"Keep\": supported values: \"Retain\", \"Delete\", spec.volumeClaimTemplates[0].spec.accessModes: Unsupported value: \"Bogus\": supported values: \"ReadOnlyMany\", \"ReadWriteMany\", \"ReadWriteOnce\", \"ReadWriteOncePod\", spec.ordinals.start: Invalid value: -1: must be greater than or equal to 0, spec.revisionHistoryLimit: Invalid value: -1: must be greater than or equal to 0, spec.serviceName: Invalid value: \"Bad.Name\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?'), spec.replicas: Invalid value: -1: must be greater than or equal to 0]"
        );
        let on_delete = workload(
            json!({"updateStrategy": {"type": "OnDelete", "rollingUpdate": {"partition": 2}}}),
        );
        assert_eq!(
            message("statefulsets", on_delete, None).unwrap(),
            "StatefulSet.apps \"w\" is invalid: spec.updateStrategy.rollingUpdate: Invalid value: apps.RollingUpdateStatefulSetStrategy{Partition:2, MaxUnavailable:(*intstr.IntOrString)(nil)}: only allowed for updateStrategy 'RollingUpdate'"
        );
        let partition = workload(
            json!({"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": -2}}}),
        );
        assert_eq!(
            message("statefulsets", partition, None).unwrap(),
            "StatefulSet.apps \"w\" is invalid: spec.updateStrategy.rollingUpdate.partition: Invalid value: -2: must be greater than or equal to 0"
        );
        // Stored templates kube did not check are left alone by an update that keeps them.
        let mut old =
            workload(json!({"volumeClaimTemplates": [{"metadata": {"name": "v"}, "spec": {}}]}));
        crate::defaults::apply_defaults(&def("statefulsets"), &mut old);
        let mut kept = old.clone();
        kept["spec"]["replicas"] = json!(3);
        assert_eq!(message("statefulsets", kept, Some(&old)), None);
    }

    #[test]
    fn stateful_set_updates_change_only_some_spec_fields() {
        let forbidden = "StatefulSet.apps \"w\" is invalid: spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden";
        let mut old = workload(
            json!({"serviceName": "w", "volumeClaimTemplates": [{"metadata": {"name": "v"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]}),
        );
        crate::defaults::apply_defaults(&def("statefulsets"), &mut old);
        let changed = |f: &dyn Fn(&mut Value)| {
            let mut new = old.clone();
            f(&mut new);
            message("statefulsets", new, Some(&old))
        };
        // The updatable fields, and a quantity written another way.
        let updatable = changed(&|o| {
            o["spec"]["replicas"] = json!(5);
            o["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:2");
            o["spec"]["updateStrategy"] = json!({"type": "OnDelete"});
            o["spec"]["minReadySeconds"] = json!(3);
            o["spec"]["revisionHistoryLimit"] = json!(2);
            o["spec"]["ordinals"] = json!({"start": 1});
            o["spec"]["persistentVolumeClaimRetentionPolicy"] =
                json!({"whenDeleted": "Delete", "whenScaled": "Delete"});
            o["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"] =
                json!("1024Mi");
            o["spec"]["volumeClaimTemplates"][0]["metadata"]["labels"] = json!({});
        });
        assert_eq!(updatable, None);
        let grown = changed(&|o| {
            o["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"] =
                json!("2Gi");
        });
        assert_eq!(grown.as_deref(), Some(forbidden));
        let renamed = changed(&|o| o["spec"]["serviceName"] = json!("other"));
        assert_eq!(renamed.as_deref(), Some(forbidden));
        let parallel = changed(&|o| o["spec"]["podManagementPolicy"] = json!("Parallel"));
        assert_eq!(parallel.as_deref(), Some(forbidden));
        // A changed selector is the forbidden spec alone: no `field is immutable` of its own.
        let selected = changed(&|o| {
            o["spec"]["selector"] = json!({"matchLabels": {"app": "w", "tier": "db"}});
            o["spec"]["template"]["metadata"]["labels"] = json!({"app": "w", "tier": "db"});
        });
        assert_eq!(selected.as_deref(), Some(forbidden));
        // A stored set written before a default existed compares as if it had it (kube
        // defaults what it reads).
        let bare = workload(
            json!({"serviceName": "w", "volumeClaimTemplates": [{"metadata": {"name": "v"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]}),
        );
        let mut scaled = bare.clone();
        scaled["spec"]["replicas"] = json!(2);
        assert_eq!(message("statefulsets", scaled, Some(&bare)), None);
        // After the spec's other rules.
        let both = changed(&|o| {
            o["spec"]["serviceName"] = json!("other");
            o["spec"]["replicas"] = json!(-1);
        });
        assert_eq!(
            both.unwrap(),
            format!(
                "StatefulSet.apps \"w\" is invalid: [spec.replicas: Invalid value: -1: must be greater than or equal to 0, {}]",
                forbidden.split("invalid: ").nth(1).unwrap()
            )
        );
    }

    fn def(plural: &str) -> crate::resources::ResourceDef {
        crate::resources::builtin_resources()
            .into_iter()
            .find(|d| d.group == "apps" && d.plural == plural)
            .unwrap()
    }

    #[test]
    fn daemon_set_strategies() {
        assert_eq!(message("daemonsets", workload(json!({})), None), None);
        assert_eq!(
            message(
                "daemonsets",
                workload(json!({"updateStrategy": {"type": "Bogus"}})),
                None
            )
            .unwrap(),
            "DaemonSet.apps \"w\" is invalid: spec.updateStrategy: Unsupported value: apps.DaemonSetUpdateStrategy{Type:\"Bogus\", RollingUpdate:(*apps.RollingUpdateDaemonSet)(nil)}: supported values: \"RollingUpdate\", \"OnDelete\""
        );
        let both = workload(
            json!({"updateStrategy": {"rollingUpdate": {"maxSurge": 1}}, "revisionHistoryLimit": -3}),
        );
        assert_eq!(
            message("daemonsets", both, None).unwrap(),
            "DaemonSet.apps \"w\" is invalid: [spec.updateStrategy.rollingUpdate.maxSurge: Invalid value: intstr.IntOrString{Type:0, IntVal:1, StrVal:\"\"}: may not be set when maxUnavailable is non-zero, spec.revisionHistoryLimit: Invalid value: -3: must be greater than or equal to 0]"
        );
        let none = workload(
            json!({"updateStrategy": {"rollingUpdate": {"maxUnavailable": 0, "maxSurge": "200%"}}}),
        );
        assert_eq!(
            message("daemonsets", none, None).unwrap(),
            "DaemonSet.apps \"w\" is invalid: spec.updateStrategy.rollingUpdate.maxSurge: Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:\"200%\"}: must not be greater than 100%"
        );
    }
}

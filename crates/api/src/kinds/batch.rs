//! CronJobs' rules as kube-apiserver's `pkg/apis/batch/validation` (`ValidateCronJobCreate`,
//! `ValidateCronJobUpdate`) applies them, in kube's order, and what a Job update may not change
//! (`ValidateJobSpecUpdate`; a Job's spec rules are [`super::workloads`]', its `/status`
//! writes' [`super::status`]').
//!
//! ## Guarantees
//! - Job updates, after the spec's rules, in kube 1.33's order: `spec.completions` does not
//!   change (`spec.completions: Invalid value: 3: field is immutable`), but in an Indexed Job,
//!   where it changes with `parallelism` to the same value (`ElasticIndexedJob`, GA; else
//!   `can only be modified in tandem with spec.parallelism`); nor do `selector` (printed as
//!   Go's `%#v`), the pod `template`, `completionMode`, `podFailurePolicy`,
//!   `backoffLimitPerIndex`, `managedBy` and `successPolicy` (`field is immutable`; a pointer
//!   set and one left out differ, as in Go). The template of a Job whose stored spec is
//!   suspended and which never started (no `status.startTime`: `AllowMutableSchedulingDirectives`)
//!   may change its node affinity (and drop an affinity that had only that), node selector,
//!   tolerations, scheduling gates, labels and annotations, nothing else. Values compare as
//!   `apiequality.Semantic.DeepEqual` does (absent and zero alike, quantities by amount), the
//!   stored Job with today's defaults (as kube decodes it).
//! - `spec.schedule` is given and parses as kube's cron library (`robfig/cron/v3`'s
//!   `ParseStandard`) parses it, with its error text: five fields (`expected exactly 5 fields,
//!   found 1: [bad]`), each a list of `*`, `?`, numbers or names (`jan`, `sun`), ranges and
//!   steps within the field's bounds, or a descriptor (`@daily`, `@every 1h30m`). A `TZ=` or
//!   `CRON_TZ=` prefix is refused on create (`cannot use TZ or CRON_TZ in schedule, use
//!   timeZone field instead`), and on an update unless the stored schedule had one.
//! - `spec.timeZone`, when set (and, on an update, changed): not empty, of kube's characters,
//!   not `Local`, and an IANA zone Go's `time.LoadLocation` knows (the `chrono-tz` database).
//! - `startingDeadlineSeconds` and the history limits are not negative; `concurrencyPolicy`
//!   is `Allow`, `Forbid` or `Replace`; the job template's spec is checked as a Job's
//!   ([`job_spec`], at `spec.jobTemplate.spec`), its selector not set and `manualSelector` not
//!   true.
//! - Job specs, a Job's and a CronJob's job template's ([`job_spec`], kube's `validateJobSpec`
//!   in its order): `parallelism`, `completions`, `activeDeadlineSeconds`, `backoffLimit`,
//!   `ttlSecondsAfterFinished`, `backoffLimitPerIndex` and `maxFailedIndexes` not negative;
//!   `maxFailedIndexes` only with `backoffLimitPerIndex`; `managedBy` a domain-prefixed path of
//!   at most 63 bytes; `completionMode` `NonIndexed` or `Indexed`, an Indexed Job with
//!   `completions`, kube's limits on `parallelism` and `maxFailedIndexes` (100000, and 10000
//!   past 100000 completions with a backoff limit per index), `maxFailedIndexes` at most
//!   `completions`; the per-index fields and `successPolicy` only in an Indexed Job, the
//!   success policy's rules (1 to 20, each with `succeededIndexes` in kube's index format or
//!   `succeededCount` within `completions` and the indexes named); `podReplacementPolicy`
//!   `Failed` or `TerminatingOrFailed` (only `Failed` with a `podFailurePolicy`); then the pod
//!   template, whose restart policy is `OnFailure` or `Never` (`Always`, the v1 default, is
//!   `Required value: valid values: "OnFailure", "Never"`), `Never` with a `podFailurePolicy`.
//! - A created CronJob's name has at most 52 characters (the controller appends 11 to name its
//!   Jobs).
//! - A `podFailurePolicy`'s rules (`validatePodFailurePolicy`, after the per-index fields):
//!   at most 20, each with an action of `Count`, `FailIndex` (only with
//!   `backoffLimitPerIndex`), `FailJob` or `Ignore` and exactly one of `onExitCodes` (operator
//!   `In` or `NotIn`, a container or init container of the template, 1 to 255 values in
//!   ascending order without repeats, no `0` for `In`) and `onPodConditions` (at most 20, each
//!   a qualified condition type and a status `True`, `False` or `Unknown`).
//! - An Indexed Job's last pod hostname, `<name>-<completions - 1>`, is a DNS-1123 label
//!   (`metadata.name: Invalid value: "...": will not able to create pod with invalid DNS label:
//!   ...`), on create and update, after the spec's rules.
//! - Not checked (kube checks them): a Job's generated selector and labels
//!   (`validateGeneratedSelector`).
//!
//! Differs from kube: kube's cron library panics on a `TZ=` prefix without a space after it
//! (kube answers a 500); this one leaves such a schedule to the `TZ` rule alone. A Job
//! update's immutable struct fields (`template`, `podFailurePolicy`, `successPolicy`) print
//! their JSON where kube prints Go's `%#v` of its internal type; kube validates a Job update's
//! spec twice (`ValidateJob`, then `ValidateJobSpecUpdate`), so its Status lists each spec
//! cause twice (the message, deduplicated, once): here each cause is listed once.

use serde_json::{Map, Value};

use super::common::semantic_eq;
use super::workloads;
use crate::field::{Cause, go_quote, invalid, not_supported, required};

/// kube's `maxParallelismForIndexedJob` and `maxFailedIndexesForIndexedJob`.
const INDEXED_LIMIT: i64 = 100_000;
/// kube's `completionsSoftLimit`, and the limits past it with a backoff limit per index.
const COMPLETIONS_SOFT_LIMIT: i64 = 100_000;
const HIGH_COMPLETIONS_LIMIT: i64 = 10_000;

/// kube's `validateJobSpec` of the Job spec at `prefix` (`spec`, or a CronJob's
/// `spec.jobTemplate.spec`) in `object`, in kube's order: the counts and durations, the
/// backoff limits per index, `managedBy`, `completionMode` and what an Indexed Job needs,
/// `successPolicy`, `podReplacementPolicy`, then the pod template and its restart policy.
pub(super) fn job_spec(object: &Value, prefix: &str, causes: &mut Vec<Cause>) {
    let pointer = format!("/{}", prefix.replace('.', "/"));
    let spec = object.pointer(&pointer).cloned().unwrap_or(Value::Null);
    let field = |key: &str| spec.get(key).filter(|v| !v.is_null());
    let number = |key: &str| field(key).and_then(Value::as_i64);
    let at = |key: &str| format!("{prefix}.{key}");
    for key in [
        "parallelism",
        "completions",
        "activeDeadlineSeconds",
        "backoffLimit",
        "ttlSecondsAfterFinished",
        "backoffLimitPerIndex",
        "maxFailedIndexes",
    ] {
        if let Some(n) = number(key).filter(|n| *n < 0) {
            causes.push(invalid(
                &at(key),
                &n.to_string(),
                "must be greater than or equal to 0",
            ));
        }
    }
    let (parallelism, completions) = (number("parallelism"), number("completions"));
    let (per_index, max_failed) = (field("backoffLimitPerIndex"), number("maxFailedIndexes"));
    if field("maxFailedIndexes").is_some() && per_index.is_none() {
        causes.push(required(
            &at("backoffLimitPerIndex"),
            "when maxFailedIndexes is specified",
        ));
    }
    if let Some(managed_by) = field("managedBy") {
        let managed_by = managed_by.as_str().unwrap_or_default();
        super::networking::domain_prefixed_path(managed_by, &at("managedBy"), causes);
        if managed_by.len() > 63 {
            causes.push(crate::field::too_long(&at("managedBy"), 63));
        }
    }
    let mode = field("completionMode").map(|m| m.as_str().unwrap_or_default());
    if let Some(mode) = mode {
        if !matches!(mode, "NonIndexed" | "Indexed") {
            causes.push(not_supported(
                &at("completionMode"),
                &go_quote(mode),
                &["NonIndexed", "Indexed"],
            ));
        }
        if mode == "Indexed" {
            if completions.is_none() {
                causes.push(required(
                    &at("completions"),
                    "when completion mode is Indexed",
                ));
            }
            if let Some(p) = parallelism.filter(|p| *p > INDEXED_LIMIT) {
                causes.push(invalid(
                    &at("parallelism"),
                    &p.to_string(),
                    "must be less than or equal to 100000 when completion mode is Indexed",
                ));
            }
            if let (Some(c), Some(m)) = (completions, max_failed)
                && m > c
            {
                causes.push(invalid(
                    &at("maxFailedIndexes"),
                    &m.to_string(),
                    "must be less than or equal to completions",
                ));
            }
            if let Some(m) = max_failed.filter(|m| *m > INDEXED_LIMIT) {
                causes.push(invalid(
                    &at("maxFailedIndexes"),
                    &m.to_string(),
                    "must be less than or equal to 100000",
                ));
            }
            if completions.is_some_and(|c| c > COMPLETIONS_SOFT_LIMIT) && per_index.is_some() {
                let high =
                    "when completions are above 100000 and used with backoff limit per index";
                if field("maxFailedIndexes").is_none() {
                    causes.push(required(
                        &at("maxFailedIndexes"),
                        "must be specified when completions is above 100000",
                    ));
                }
                if let Some(p) = parallelism.filter(|p| *p > HIGH_COMPLETIONS_LIMIT) {
                    causes.push(invalid(
                        &at("parallelism"),
                        &p.to_string(),
                        &format!("must be less than or equal to 10000 {high}"),
                    ));
                }
                if let Some(m) = max_failed.filter(|m| *m > HIGH_COMPLETIONS_LIMIT) {
                    causes.push(invalid(
                        &at("maxFailedIndexes"),
                        &m.to_string(),
                        &format!("must be less than or equal to 10000 {high}"),
                    ));
                }
            }
        }
    }
    let indexed = mode == Some("Indexed");
    if !indexed {
        for key in ["backoffLimitPerIndex", "maxFailedIndexes"] {
            if let Some(value) = field(key) {
                causes.push(invalid(
                    &at(key),
                    &printed(Some(value)),
                    "requires indexed completion mode",
                ));
            }
        }
    }
    if let Some(policy) = field("podFailurePolicy") {
        pod_failure_policy(&spec, policy, &at("podFailurePolicy"), causes);
    }
    if let Some(policy) = field("successPolicy") {
        if indexed {
            success_policy(policy, completions, &at("successPolicy"), causes);
        } else {
            causes.push(invalid(
                &at("successPolicy"),
                &printed(Some(policy)),
                "requires indexed completion mode",
            ));
        }
    }
    if let Some(replacement) = field("podReplacementPolicy") {
        let replacement = replacement.as_str().unwrap_or_default();
        let supported: &[&str] = if field("podFailurePolicy").is_some() {
            &["Failed"]
        } else {
            &["Failed", "TerminatingOrFailed"]
        };
        if !supported.contains(&replacement) {
            causes.push(not_supported(
                &at("podReplacementPolicy"),
                &go_quote(replacement),
                supported,
            ));
        }
    }
    workloads::template(
        object,
        &at("template"),
        &["OnFailure", "Never"],
        false,
        causes,
    );
    let restart = spec
        .pointer("/template/spec/restartPolicy")
        .and_then(Value::as_str);
    if field("podFailurePolicy").is_some() && restart == Some("OnFailure") {
        causes.push(invalid(
            &at("template.spec.restartPolicy"),
            "\"OnFailure\"",
            "only \"Never\" is supported when podFailurePolicy is specified",
        ));
    }
}

/// kube's `validatePodFailurePolicy` of the Job spec `spec`'s `podFailurePolicy` (`policy`,
/// at `at`): at most 20 rules, each with a known action (`FailIndex` only with a backoff limit
/// per index) and exactly one of `onExitCodes` (an operator, a container of the template, 1
/// to 255 values in order, without repeats, no `0` for `In`) and `onPodConditions` (at most
/// 20 patterns, each a qualified condition type and a status).
fn pod_failure_policy(spec: &Value, policy: &Value, at: &str, causes: &mut Vec<Cause>) {
    const ACTIONS: [&str; 4] = ["Count", "FailIndex", "FailJob", "Ignore"];
    const OPERATORS: [&str; 2] = ["In", "NotIn"];
    const STATUSES: [&str; 3] = ["False", "True", "Unknown"];
    /// Go's `%q` of a string slice: `["In" "NotIn"]`.
    fn quoted_list(values: &[&str]) -> String {
        let quoted: Vec<String> = values.iter().map(|v| go_quote(v)).collect();
        format!("valid values: [{}]", quoted.join(" "))
    }
    let list = |value: &Value, key: &str| -> Vec<Value> {
        value
            .get(key)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let rules = list(policy, "rules");
    if rules.len() > 20 {
        causes.push(crate::field::too_many(
            &format!("{at}.rules"),
            rules.len(),
            20,
        ));
    }
    let template = spec.pointer("/template/spec").unwrap_or(&Value::Null);
    let names: Vec<Value> = ["containers", "initContainers"]
        .iter()
        .flat_map(|key| list(template, key))
        .filter_map(|c| c.get("name").cloned())
        .collect();
    let per_index = spec
        .get("backoffLimitPerIndex")
        .is_some_and(|v| !v.is_null());
    for (i, rule) in rules.iter().enumerate() {
        let rule_at = format!("{at}.rules[{i}]");
        let action = rule
            .get("action")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let action_at = format!("{rule_at}.action");
        if action.is_empty() {
            causes.push(required(&action_at, &quoted_list(&ACTIONS)));
        } else if action == "FailIndex" {
            if !per_index {
                causes.push(invalid(
                    &action_at,
                    &go_quote(action),
                    "requires the backoffLimitPerIndex to be set",
                ));
            }
        } else if !ACTIONS.contains(&action) {
            causes.push(not_supported(&action_at, &go_quote(action), &ACTIONS));
        }
        let on_exit = rule.get("onExitCodes").filter(|v| !v.is_null());
        let patterns = list(rule, "onPodConditions");
        if let Some(on_exit) = on_exit {
            let exit_at = format!("{rule_at}.onExitCodes");
            let operator = on_exit
                .get("operator")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if operator.is_empty() {
                causes.push(required(
                    &format!("{exit_at}.operator"),
                    &quoted_list(&OPERATORS),
                ));
            } else if !OPERATORS.contains(&operator) {
                causes.push(not_supported(
                    &format!("{exit_at}.operator"),
                    &go_quote(operator),
                    &OPERATORS,
                ));
            }
            if let Some(container) = on_exit.get("containerName").filter(|v| !v.is_null())
                && !names.contains(container)
            {
                causes.push(invalid(
                    &format!("{exit_at}.containerName"),
                    &go_quote(container.as_str().unwrap_or_default()),
                    "must be one of the container or initContainer names in the pod template",
                ));
            }
            let values: Vec<i64> = list(on_exit, "values")
                .iter()
                .filter_map(Value::as_i64)
                .collect();
            // Go's `%#v` of the `[]int32`.
            let printed = format!(
                "[]int32{{{}}}",
                values
                    .iter()
                    .map(i64::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            let values_at = format!("{exit_at}.values");
            if values.is_empty() {
                causes.push(invalid(
                    &values_at,
                    &printed,
                    "at least one value is required",
                ));
            } else if values.len() > 255 {
                causes.push(crate::field::too_many(&values_at, values.len(), 255));
            }
            for (j, value) in values.iter().enumerate() {
                let value_at = format!("{values_at}[{j}]");
                if operator == "In" && *value == 0 {
                    causes.push(invalid(&value_at, "0", "must not be 0 for the In operator"));
                }
                if values[..j].contains(value) {
                    causes.push(crate::field::duplicate(&value_at, &value.to_string()));
                }
            }
            if values.windows(2).any(|pair| pair[0] > pair[1]) {
                causes.push(invalid(&values_at, &printed, "must be ordered"));
            }
        }
        if !patterns.is_empty() {
            let patterns_at = format!("{rule_at}.onPodConditions");
            if patterns.len() > 20 {
                causes.push(crate::field::too_many(&patterns_at, patterns.len(), 20));
            }
            for (j, pattern) in patterns.iter().enumerate() {
                let kind = pattern
                    .get("type")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                for message in crate::names::qualified_name_problems(kind) {
                    causes.push(invalid(
                        &format!("{patterns_at}[{j}].type"),
                        &go_quote(kind),
                        &message,
                    ));
                }
                let status = pattern
                    .get("status")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let status_at = format!("{patterns_at}[{j}].status");
                if status.is_empty() {
                    causes.push(required(&status_at, &quoted_list(&STATUSES)));
                } else if !STATUSES.contains(&status) {
                    causes.push(not_supported(&status_at, &go_quote(status), &STATUSES));
                }
            }
        }
        match (on_exit.is_some(), patterns.is_empty()) {
            (true, false) => causes.push(crate::field::invalid_omitted(
                &rule_at,
                "specifying both OnExitCodes and OnPodConditions is not supported",
            )),
            (false, true) => causes.push(crate::field::invalid_omitted(
                &rule_at,
                "specifying one of OnExitCodes and OnPodConditions is required",
            )),
            _ => {}
        }
    }
}

/// kube's check in `ValidateJob` that an Indexed Job's last pod hostname
/// (`<name>-<completions - 1>`) is a DNS-1123 label.
pub(super) fn indexed_hostnames(object: &Value, causes: &mut Vec<Cause>) {
    let spec = object.get("spec").unwrap_or(&Value::Null);
    let completions = spec.get("completions").and_then(Value::as_i64);
    if spec.get("completionMode").and_then(Value::as_str) != Some("Indexed") {
        return;
    }
    let Some(completions) = completions.filter(|c| *c > 0) else {
        return;
    };
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let hostname = format!("{name}-{}", completions - 1);
    if crate::names::validate_dns1123_label(&hostname).is_err() {
        causes.push(invalid(
            "metadata.name",
            &go_quote(name),
            &format!("will not able to create pod with invalid DNS label: {hostname}"),
        ));
    }
}

/// `validateSuccessPolicy` of an Indexed Job's `successPolicy` at `at`.
fn success_policy(policy: &Value, completions: Option<i64>, at: &str, causes: &mut Vec<Cause>) {
    let rules = policy
        .get("rules")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    if rules.is_empty() {
        causes.push(required(
            &format!("{at}.rules"),
            "at least one rules must be specified when the successPolicy is specified",
        ));
    }
    if rules.len() > 20 {
        causes.push(crate::field::too_many(
            &format!("{at}.rules"),
            rules.len(),
            20,
        ));
    }
    // kube reads `completions` without a nil check (required above for an Indexed Job).
    let completions = completions.unwrap_or(0);
    for (i, rule) in rules.iter().enumerate() {
        let rule_at = format!("{at}.rules[{i}]");
        let indexes = rule.get("succeededIndexes").filter(|v| !v.is_null());
        let count = rule.get("succeededCount").filter(|v| !v.is_null());
        if indexes.is_none() && count.is_none() {
            causes.push(required(
                &rule_at,
                "at least one of succeededCount or succeededIndexes must be specified",
            ));
        }
        let mut total = 0;
        if let Some(indexes) = indexes {
            let indexes = indexes.as_str().unwrap_or_default();
            let indexes_at = format!("{rule_at}.succeededIndexes");
            if indexes.len() > 64 * 1024 {
                causes.push(crate::field::too_long(&indexes_at, 64 * 1024));
            }
            match super::status::indexes_format(indexes, completions) {
                Ok(n) => total = n,
                Err(error) => causes.push(invalid(
                    &indexes_at,
                    &go_quote(indexes),
                    &format!("error parsing succeededIndexes: {error}"),
                )),
            }
        }
        if let Some(count) = count.and_then(Value::as_i64) {
            let count_at = format!("{rule_at}.succeededCount");
            if count < 0 {
                causes.push(invalid(
                    &count_at,
                    &count.to_string(),
                    "must be greater than or equal to 0",
                ));
            }
            if count > completions {
                causes.push(invalid(
                    &count_at,
                    &count.to_string(),
                    &format!(
                        "must be less than or equal to {completions} (the number of specified completions)"
                    ),
                ));
            }
            if indexes.is_some() && count > total {
                causes.push(invalid(
                    &count_at,
                    &count.to_string(),
                    &format!(
                        "must be less than or equal to {total} (the number of indexes in the specified succeededIndexes field)"
                    ),
                ));
            }
        }
    }
}

/// kube's detail for a field an update may not change.
const IMMUTABLE: &str = "field is immutable";

/// `spec.<key>` of `object`, absent when `null`.
fn spec_field<'a>(object: &'a Value, key: &str) -> Option<&'a Value> {
    object
        .get("spec")
        .and_then(|spec| spec.get(key))
        .filter(|v| !v.is_null())
}

/// Whether a pointer field changed as Go's `apiequality.Semantic.DeepEqual` tells: set or
/// not, then its value.
fn pointer_changed(now: Option<&Value>, before: Option<&Value>) -> bool {
    now.is_some() != before.is_some() || !semantic_eq(now, before)
}

/// A pointer field's value as `field.Invalid` prints it: `null` when nil, else the value
/// (a struct as its JSON).
fn printed(value: Option<&Value>) -> String {
    value.map_or_else(|| "null".to_owned(), super::common::go_value)
}

/// kube's `ValidateJobSpecUpdate` beyond the spec's own rules (which [`super::workloads`]
/// checks first): what an update of the Job `old` into `object` may not change, in kube's
/// order.
pub(super) fn job_update(object: &Value, old: &Value, causes: &mut Vec<Cause>) {
    completions_update(object, old, causes);
    let (selector, old_selector) = (spec_field(object, "selector"), spec_field(old, "selector"));
    if pointer_changed(selector, old_selector) {
        causes.push(invalid(
            "spec.selector",
            &workloads::go_selector(selector),
            IMMUTABLE,
        ));
    }
    template_update(object, old, causes);
    for key in [
        "completionMode",
        "podFailurePolicy",
        "backoffLimitPerIndex",
        "managedBy",
        "successPolicy",
    ] {
        let (now, before) = (spec_field(object, key), spec_field(old, key));
        if pointer_changed(now, before) {
            causes.push(invalid(&format!("spec.{key}"), &printed(now), IMMUTABLE));
        }
    }
}

/// `validateCompletions` (`ElasticIndexedJob`, GA since 1.31): `completions` does not change
/// but in an Indexed Job, where it changes with `parallelism` to the same value.
fn completions_update(object: &Value, old: &Value, causes: &mut Vec<Cause>) {
    let (now, before) = (
        spec_field(object, "completions"),
        spec_field(old, "completions"),
    );
    if !pointer_changed(now, before) {
        return;
    }
    let indexed = spec_field(object, "completionMode").and_then(Value::as_str) == Some("Indexed");
    if !indexed {
        causes.push(invalid("spec.completions", &printed(now), IMMUTABLE));
        return;
    }
    // An Indexed Job without completions is refused by the spec's own rules.
    let Some(now) = now else { return };
    if spec_field(object, "parallelism").is_none_or(|p| !semantic_eq(Some(p), Some(now))) {
        causes.push(invalid(
            "spec.completions",
            &printed(Some(now)),
            "can only be modified in tandem with spec.parallelism",
        ));
    }
}

/// `validatePodTemplateUpdate`: the pod template does not change, but for a Job suspended
/// that never started (`AllowMutableSchedulingDirectives`: the stored Job's `suspend` is true
/// and it has no `status.startTime`) its node affinity, node selector, tolerations,
/// scheduling gates, labels and annotations may.
fn template_update(object: &Value, old: &Value, causes: &mut Vec<Cause>) {
    let template = spec_field(object, "template")
        .cloned()
        .unwrap_or(Value::Null);
    let mut before = spec_field(old, "template").cloned().unwrap_or(Value::Null);
    let suspended = spec_field(old, "suspend").and_then(Value::as_bool) == Some(true);
    let started = old
        .pointer("/status/startTime")
        .is_some_and(|t| !t.is_null());
    if suspended && !started {
        let mutable = |t: &Value, key: &str| t.get(key).filter(|v| !v.is_null()).cloned();
        let spec_now = template.get("spec").cloned().unwrap_or(Value::Null);
        let meta_now = template.get("metadata").cloned().unwrap_or(Value::Null);
        let spec_before = object_at(&mut before, "spec");
        let affinity_now = mutable(&spec_now, "affinity");
        let affinity_before = mutable(&Value::Object(spec_before.clone()), "affinity");
        match (affinity_now, affinity_before) {
            (None, Some(mut affinity)) => {
                // The affinity may be cleared if it had nothing but a node affinity.
                if let Some(fields) = affinity.as_object_mut() {
                    fields.remove("nodeAffinity");
                }
                let empty = affinity
                    .as_object()
                    .is_none_or(|f| f.values().all(Value::is_null));
                if empty {
                    spec_before.remove("affinity");
                } else {
                    spec_before.insert("affinity".to_owned(), affinity);
                }
            }
            (Some(now), None) => {
                let mut affinity = Map::new();
                if let Some(node) = mutable(&now, "nodeAffinity") {
                    affinity.insert("nodeAffinity".to_owned(), node);
                }
                spec_before.insert("affinity".to_owned(), Value::Object(affinity));
            }
            (Some(now), Some(mut affinity)) => {
                if let Some(fields) = affinity.as_object_mut() {
                    match mutable(&now, "nodeAffinity") {
                        Some(node) => fields.insert("nodeAffinity".to_owned(), node),
                        None => fields.remove("nodeAffinity"),
                    };
                }
                spec_before.insert("affinity".to_owned(), affinity);
            }
            (None, None) => {}
        }
        for key in ["nodeSelector", "tolerations", "schedulingGates"] {
            copy_field(&spec_now, spec_before, key);
        }
        let meta_before = object_at(&mut before, "metadata");
        for key in ["annotations", "labels"] {
            copy_field(&meta_now, meta_before, key);
        }
    }
    if !semantic_eq(Some(&template), Some(&before)) {
        causes.push(invalid(
            "spec.template",
            &super::common::go_value(&template),
            IMMUTABLE,
        ));
    }
}

/// The map at `key` of `value` (made an object, and the map made, when either is not).
fn object_at<'a>(value: &'a mut Value, key: &str) -> &'a mut Map<String, Value> {
    if !value.is_object() {
        *value = Value::Object(Map::new());
    }
    let Value::Object(fields) = value else {
        unreachable!("made an object above")
    };
    let entry = fields
        .entry(key)
        .or_insert_with(|| Value::Object(Map::new()));
    if !entry.is_object() {
        *entry = Value::Object(Map::new());
    }
    match entry {
        Value::Object(inner) => inner,
        _ => unreachable!("made an object above"),
    }
}

/// `to.<key> = from.<key>` (removed when `from` has none).
fn copy_field(from: &Value, to: &mut Map<String, Value>, key: &str) {
    match from.get(key) {
        Some(value) => to.insert(key.to_owned(), value.clone()),
        None => to.remove(key),
    };
}

/// The causes of the CronJob `object` (updating `old`).
pub(super) fn cron_job(object: &Value, old: Option<&Value>, causes: &mut Vec<Cause>) {
    let spec = object.get("spec").unwrap_or(&Value::Null);
    let old_spec = old.map(|old| old.get("spec").unwrap_or(&Value::Null));
    let schedule = spec.get("schedule").and_then(Value::as_str).unwrap_or("");
    let time_zone = spec.get("timeZone").filter(|v| !v.is_null());
    if schedule.is_empty() {
        causes.push(required("spec.schedule", ""));
    } else {
        let allow_tz = old_spec
            .and_then(|s| s.get("schedule"))
            .and_then(Value::as_str)
            .is_some_and(|s| s.contains("TZ"));
        schedule_format(schedule, allow_tz, time_zone.is_some(), causes);
    }
    nonnegative(spec, "startingDeadlineSeconds", causes);
    let old_zone = old_spec.map(|s| s.get("timeZone").filter(|v| !v.is_null()));
    if old_zone.is_none_or(|old_zone| old_zone != time_zone)
        && let Some(zone) = time_zone
    {
        time_zone_causes(zone.as_str().unwrap_or(""), causes);
    }
    match spec
        .get("concurrencyPolicy")
        .and_then(Value::as_str)
        .unwrap_or("")
    {
        "Allow" | "Forbid" | "Replace" => {}
        "" => causes.push(required("spec.concurrencyPolicy", "")),
        other => causes.push(not_supported(
            "spec.concurrencyPolicy",
            &go_quote(other),
            &["Allow", "Forbid", "Replace"],
        )),
    }
    job_spec(object, "spec.jobTemplate.spec", causes);
    if let Some(selector) = object
        .pointer("/spec/jobTemplate/spec/selector")
        .filter(|s| !s.is_null())
    {
        causes.push(invalid(
            "spec.jobTemplate.spec.selector",
            &workloads::go_selector(Some(selector)),
            "`selector` will be auto-generated",
        ));
    }
    if object
        .pointer("/spec/jobTemplate/spec/manualSelector")
        .and_then(Value::as_bool)
        == Some(true)
    {
        causes.push(not_supported(
            "spec.jobTemplate.spec.manualSelector",
            "true",
            &["nil", "false"],
        ));
    }
    nonnegative(spec, "successfulJobsHistoryLimit", causes);
    nonnegative(spec, "failedJobsHistoryLimit", causes);
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if old.is_none() && name.len() > 52 {
        causes.push(invalid(
            "metadata.name",
            &go_quote(name),
            "must be no more than 52 characters",
        ));
    }
}

fn nonnegative(spec: &Value, key: &str, causes: &mut Vec<Cause>) {
    if let Some(n) = spec.get(key).and_then(Value::as_i64).filter(|n| *n < 0) {
        causes.push(invalid(
            &format!("spec.{key}"),
            &n.to_string(),
            "must be greater than or equal to 0",
        ));
    }
}

/// `validateScheduleFormat`.
fn schedule_format(schedule: &str, allow_tz: bool, has_zone: bool, causes: &mut Vec<Cause>) {
    if let Err(message) = parse_standard(schedule) {
        causes.push(invalid("spec.schedule", &go_quote(schedule), &message));
    }
    let tz = schedule.contains("TZ");
    if allow_tz && tz && has_zone {
        causes.push(invalid(
            "spec.schedule",
            &go_quote(schedule),
            "cannot use both timeZone field and TZ or CRON_TZ in schedule",
        ));
    } else if !allow_tz && tz {
        causes.push(invalid(
            "spec.schedule",
            &go_quote(schedule),
            "cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
        ));
    }
}

/// Whether Go's `time.LoadLocation` finds `zone`.
fn known_zone(zone: &str) -> bool {
    matches!(zone, "" | "UTC" | "Local") || zone.parse::<chrono_tz::Tz>().is_ok()
}

/// `validateTimeZone` of a set `spec.timeZone`.
fn time_zone_causes(zone: &str, causes: &mut Vec<Cause>) {
    let at = "spec.timeZone";
    let printed = go_quote(zone);
    if zone.is_empty() {
        causes.push(invalid(
            at,
            &printed,
            "timeZone must be nil or non-empty string",
        ));
        return;
    }
    let part_ok = |part: &str| {
        part != "."
            && part != ".."
            && !part.starts_with('-')
            && (1..=14).contains(&part.len())
            && part
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b'+'))
    };
    if !zone.split('/').all(part_ok) {
        causes.push(invalid(at, &printed, &format!("unknown time zone {zone}")));
        return;
    }
    if zone.eq_ignore_ascii_case("Local") {
        causes.push(invalid(
            at,
            &printed,
            "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones",
        ));
    }
    if !known_zone(zone) {
        causes.push(invalid(at, &printed, &format!("unknown time zone {zone}")));
    }
}

/// A cron field's bounds and names (`robfig/cron`'s `bounds`).
struct Bounds {
    min: u64,
    max: u64,
    names: &'static [&'static str],
    /// The value of `names[0]`.
    first_name: u64,
}

const MINUTES: Bounds = Bounds {
    min: 0,
    max: 59,
    names: &[],
    first_name: 0,
};
const HOURS: Bounds = Bounds {
    min: 0,
    max: 23,
    names: &[],
    first_name: 0,
};
const DAYS_OF_MONTH: Bounds = Bounds {
    min: 1,
    max: 31,
    names: &[],
    first_name: 0,
};
const MONTHS: Bounds = Bounds {
    min: 1,
    max: 12,
    names: &[
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ],
    first_name: 1,
};
const DAYS_OF_WEEK: Bounds = Bounds {
    min: 0,
    max: 6,
    names: &["sun", "mon", "tue", "wed", "thu", "fri", "sat"],
    first_name: 0,
};

/// `cron.ParseStandard`: `Ok` or the library's error text.
pub(crate) fn parse_standard(spec: &str) -> Result<(), String> {
    if spec.is_empty() {
        return Err("empty spec string".to_owned());
    }
    let mut spec = spec;
    if spec.starts_with("TZ=") || spec.starts_with("CRON_TZ=") {
        let (Some(space), Some(eq)) = (spec.find(' '), spec.find('=')) else {
            return Ok(());
        };
        let zone = spec.get(eq + 1..space).unwrap_or("");
        if !known_zone(zone) {
            return Err(format!(
                "provided bad location {zone}: unknown time zone {zone}"
            ));
        }
        spec = spec[space..].trim();
    }
    if spec.starts_with('@') {
        return descriptor(spec);
    }
    let fields: Vec<&str> = spec.split_whitespace().collect();
    if fields.len() != 5 {
        return Err(format!(
            "expected exactly 5 fields, found {}: [{}]",
            fields.len(),
            fields.join(" ")
        ));
    }
    for (field, bounds) in
        fields
            .iter()
            .zip([&MINUTES, &HOURS, &DAYS_OF_MONTH, &MONTHS, &DAYS_OF_WEEK])
    {
        for expr in field.split(',').filter(|e| !e.is_empty()) {
            range(expr, bounds)?;
        }
    }
    Ok(())
}

/// `getRange`.
fn range(expr: &str, bounds: &Bounds) -> Result<(), String> {
    let range_and_step: Vec<&str> = expr.split('/').collect();
    let low_and_high: Vec<&str> = range_and_step[0].split('-').collect();
    let (start, mut end) = if matches!(low_and_high[0], "*" | "?") {
        (bounds.min, bounds.max)
    } else {
        let start = int_or_name(low_and_high[0], bounds)?;
        match low_and_high.len() {
            1 => (start, start),
            2 => (start, int_or_name(low_and_high[1], bounds)?),
            _ => return Err(format!("too many hyphens: {expr}")),
        }
    };
    let step = match range_and_step.len() {
        1 => 1,
        2 => {
            let step = parse_int(range_and_step[1])?;
            if low_and_high.len() == 1 {
                end = bounds.max;
            }
            step
        }
        _ => return Err(format!("too many slashes: {expr}")),
    };
    if start < bounds.min {
        return Err(format!(
            "beginning of range ({start}) below minimum ({}): {expr}",
            bounds.min
        ));
    }
    if end > bounds.max {
        return Err(format!(
            "end of range ({end}) above maximum ({}): {expr}",
            bounds.max
        ));
    }
    if start > end {
        return Err(format!(
            "beginning of range ({start}) beyond end of range ({end}): {expr}"
        ));
    }
    if step == 0 {
        return Err(format!("step of range should be a positive number: {expr}"));
    }
    Ok(())
}

fn int_or_name(expr: &str, bounds: &Bounds) -> Result<u64, String> {
    let lower = expr.to_ascii_lowercase();
    if let Some(i) = bounds.names.iter().position(|n| *n == lower) {
        return Ok(bounds.first_name + i as u64);
    }
    parse_int(expr)
}

/// `mustParseInt`: Go's `strconv.Atoi`, not negative.
fn parse_int(expr: &str) -> Result<u64, String> {
    let digits = expr.strip_prefix(['+', '-']).unwrap_or(expr);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "failed to parse int from {expr}: strconv.Atoi: parsing {}: invalid syntax",
            go_quote(expr)
        ));
    }
    let Ok(n) = expr.parse::<i64>() else {
        return Err(format!(
            "failed to parse int from {expr}: strconv.Atoi: parsing {}: value out of range",
            go_quote(expr)
        ));
    };
    u64::try_from(n).map_err(|_| format!("negative number ({n}) not allowed: {expr}"))
}

/// `parseDescriptor`.
fn descriptor(spec: &str) -> Result<(), String> {
    if matches!(
        spec,
        "@yearly" | "@annually" | "@monthly" | "@weekly" | "@daily" | "@midnight" | "@hourly"
    ) {
        return Ok(());
    }
    if let Some(duration) = spec.strip_prefix("@every ") {
        return go_duration(duration).map_err(|e| format!("failed to parse duration {spec}: {e}"));
    }
    Err(format!("unrecognized descriptor: {spec}"))
}

/// Go's `time.ParseDuration` (syntax and units; overflow is not checked): its error text.
fn go_duration(text: &str) -> Result<(), String> {
    let quoted = go_quote(text);
    let invalid = || format!("time: invalid duration {quoted}");
    let mut rest = text.strip_prefix(['+', '-']).unwrap_or(text);
    if rest == "0" {
        return Ok(());
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number = &rest[..number_end];
        if !number.bytes().any(|b| b.is_ascii_digit()) || number.matches('.').count() > 1 {
            return Err(invalid());
        }
        rest = &rest[number_end..];
        let unit_end = rest
            .find(|c: char| c == '.' || c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit = &rest[..unit_end];
        if unit.is_empty() {
            return Err(format!("time: missing unit in duration {quoted}"));
        }
        if !matches!(unit, "ns" | "us" | "µs" | "μs" | "ms" | "s" | "m" | "h") {
            return Err(format!(
                "time: unknown unit {} in duration {quoted}",
                go_quote(unit)
            ));
        }
        rest = &rest[unit_end..];
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::parse_standard;
    use crate::resources::builtin_resources;

    fn messages(mut object: Value, old: Option<&Value>) -> Vec<String> {
        let def = builtin_resources()
            .into_iter()
            .find(|d| d.group == "batch" && d.plural == "cronjobs")
            .unwrap();
        crate::defaults::apply_defaults(&def, &mut object);
        match crate::kinds::validate(&def, &object, old) {
            Ok(()) => Vec::new(),
            Err(err) => err.cause_lines(),
        }
    }

    fn cron_job(name: &str, spec: Value) -> Value {
        let mut spec = spec;
        spec["jobTemplate"] = json!({"spec": {"template": {"spec": {"restartPolicy": "OnFailure",
            "containers": [{"name": "c", "image": "busybox"}]}}}});
        json!({"metadata": {"name": name}, "spec": spec})
    }

    #[test]
    fn schedules_parse_as_kubes_cron_library_parses_them() {
        for good in [
            "*/5 * * * *",
            "0 3 * * mon-fri",
            "0 0 1 jan,jul ?",
            "@daily",
            "@every 1h30m",
            "TZ=UTC 0 * * * *",
        ] {
            assert_eq!(parse_standard(good), Ok(()), "{good}");
        }
        for (bad, message) in [
            ("bad", "expected exactly 5 fields, found 1: [bad]"),
            ("60 * * * *", "end of range (60) above maximum (59): 60"),
            ("* * 0 * *", "beginning of range (0) below minimum (1): 0"),
            (
                "5-1 * * * *",
                "beginning of range (5) beyond end of range (1): 5-1",
            ),
            (
                "*/0 * * * *",
                "step of range should be a positive number: */0",
            ),
            ("1-2-3 * * * *", "too many hyphens: 1-2-3"),
            (
                "x * * * *",
                "failed to parse int from x: strconv.Atoi: parsing \"x\": invalid syntax",
            ),
            ("* * * * 7", "end of range (7) above maximum (6): 7"),
            (
                "@every x",
                "failed to parse duration @every x: time: invalid duration \"x\"",
            ),
            (
                "@every 5",
                "failed to parse duration @every 5: time: missing unit in duration \"5\"",
            ),
            ("@often", "unrecognized descriptor: @often"),
            (
                "TZ=Mars/Base 0 * * * *",
                "provided bad location Mars/Base: unknown time zone Mars/Base",
            ),
        ] {
            assert_eq!(parse_standard(bad), Err(message.to_owned()), "{bad}");
        }
    }

    /// A stored Job as the server keeps it (its generated selector and labels, its defaults).
    fn stored_job(spec: Value) -> Value {
        let mut job = json!({"metadata": {"name": "j", "uid": "u"}, "spec": {
            "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "u"}},
            "template": {"metadata": {"labels": {"batch.kubernetes.io/controller-uid": "u",
                "batch.kubernetes.io/job-name": "j"}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}});
        for (key, value) in spec.as_object().unwrap() {
            job["spec"][key] = value.clone();
        }
        let def = builtin_resources()
            .into_iter()
            .find(|d| d.group == "batch" && d.plural == "jobs")
            .unwrap();
        crate::defaults::apply_defaults(&def, &mut job);
        job
    }

    /// The causes of updating `old` by `change`.
    fn job_update(old: &Value, change: impl Fn(&mut Value)) -> Vec<String> {
        let mut new = old.clone();
        change(&mut new);
        crate::kinds::refusal_causes("batch", "jobs", new, Some(old))
    }

    #[test]
    fn job_updates_keep_kubes_immutable_fields() {
        let old = stored_job(json!({"completions": 2}));
        // A stored Job written before a default existed compares as if it had it.
        let mut bare = old.clone();
        bare["spec"]["template"]["spec"]["containers"][0]
            .as_object_mut()
            .unwrap()
            .retain(|key, _| key == "name" || key == "image");
        assert_eq!(
            job_update(&bare, |j| j["spec"]["parallelism"] = json!(2)),
            Vec::<String>::new()
        );
        assert_eq!(
            job_update(&old, |j| j["spec"]["parallelism"] = json!(2)),
            Vec::<String>::new()
        );
        let image = job_update(&old, |j| {
            j["spec"]["template"]["spec"]["containers"][0]["image"] = json!("busybox:2");
        });
        assert_eq!(image.len(), 1, "{image:?}");
        assert!(
            image[0].starts_with("spec.template: Invalid value: {"),
            "{image:?}"
        );
        assert!(image[0].ends_with("}: field is immutable"), "{image:?}");
        assert_eq!(
            job_update(&old, |j| j["spec"]["completions"] = json!(3)),
            ["spec.completions: Invalid value: 3: field is immutable"]
        );
        assert_eq!(
            job_update(&old, |j| {
                j["spec"]["selector"]["matchExpressions"] =
                    json!([{"key": "batch.kubernetes.io/job-name", "operator": "Exists"}]);
            }),
            [
                "spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{\"batch.kubernetes.io/controller-uid\":\"u\"}, MatchExpressions:[]v1.LabelSelectorRequirement{v1.LabelSelectorRequirement{Key:\"batch.kubernetes.io/job-name\", Operator:\"Exists\", Values:[]string(nil)}}}: field is immutable"
            ]
        );
        assert_eq!(
            job_update(&old, |j| {
                j["spec"]["managedBy"] = json!("example.com/queue");
                j["spec"]["podFailurePolicy"] = json!({"rules": []});
            }),
            [
                // The stored, defaulted replacement policy does not go with a failure policy.
                "spec.podReplacementPolicy: Unsupported value: \"TerminatingOrFailed\": supported values: \"Failed\"",
                "spec.podFailurePolicy: Invalid value: {\"rules\":[]}: field is immutable",
                "spec.managedBy: Invalid value: \"example.com/queue\": field is immutable",
            ]
        );
        // An Indexed Job's completions change with its parallelism (`ElasticIndexedJob`).
        let indexed =
            stored_job(json!({"completionMode": "Indexed", "completions": 2, "parallelism": 2}));
        assert_eq!(
            job_update(&indexed, |j| {
                j["spec"]["completions"] = json!(4);
                j["spec"]["parallelism"] = json!(4);
            }),
            Vec::<String>::new()
        );
        assert_eq!(
            job_update(&indexed, |j| j["spec"]["completions"] = json!(4)),
            [
                "spec.completions: Invalid value: 4: can only be modified in tandem with spec.parallelism"
            ]
        );
        assert_eq!(
            job_update(&indexed, |j| j["spec"]["completionMode"] =
                json!("NonIndexed")),
            ["spec.completionMode: Invalid value: \"NonIndexed\": field is immutable"]
        );
    }

    #[test]
    fn a_suspended_job_that_never_started_changes_its_scheduling() {
        let old = stored_job(json!({"suspend": true,
            "template": {"metadata": {"labels": {"batch.kubernetes.io/controller-uid": "u"}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}],
                    "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 1, "preference": {"matchExpressions": [{"key": "a", "operator": "Exists"}]}}]}}}}}));
        let scheduling = |j: &mut Value| {
            let template = &mut j["spec"]["template"];
            template["metadata"]["labels"]["queue"] = json!("q");
            template["metadata"]["annotations"] = json!({"note": "n"});
            template["spec"]["nodeSelector"] = json!({"zone": "a"});
            template["spec"]["tolerations"] = json!([{"key": "k", "operator": "Exists"}]);
            template["spec"]["schedulingGates"] = json!([{"name": "g"}]);
            template["spec"]["affinity"] = Value::Null;
        };
        assert_eq!(job_update(&old, scheduling), Vec::<String>::new());
        // The rest of the template stays.
        let image = job_update(&old, |j| {
            scheduling(j);
            j["spec"]["template"]["spec"]["containers"][0]["image"] = json!("busybox:2");
        });
        assert_eq!(image.len(), 1, "{image:?}");
        assert!(image[0].starts_with("spec.template: "), "{image:?}");
        // Once started, or not suspended, nothing of the template changes.
        let mut started = old.clone();
        started["status"] = json!({"startTime": "2026-01-01T00:00:00Z"});
        let refused = job_update(&started, scheduling);
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert!(refused[0].ends_with(": field is immutable"), "{refused:?}");
        let mut running = old.clone();
        running["spec"]["suspend"] = json!(false);
        assert_eq!(job_update(&running, scheduling).len(), 1);
    }

    #[test]
    fn job_specs() {
        let job = |spec: Value| {
            let mut job = stored_job(json!({}));
            for (key, value) in spec.as_object().unwrap() {
                job["spec"][key] = value.clone();
            }
            crate::kinds::refusal_causes("batch", "jobs", job, None)
        };
        assert_eq!(
            job(
                json!({"activeDeadlineSeconds": -1, "ttlSecondsAfterFinished": -2,
                "maxFailedIndexes": 1, "managedBy": "bad", "completionMode": "Bogus",
                "podReplacementPolicy": "Sometimes", "successPolicy": {"rules": []},
                "template": {"spec": {"restartPolicy": "Always",
                    "containers": [{"name": "c", "image": "busybox"}]}}})
            ),
            [
                "spec.activeDeadlineSeconds: Invalid value: -1: must be greater than or equal to 0",
                "spec.ttlSecondsAfterFinished: Invalid value: -2: must be greater than or equal to 0",
                "spec.backoffLimitPerIndex: Required value: when maxFailedIndexes is specified",
                "spec.managedBy: Invalid value: \"bad\": must be a domain-prefixed path (such as \"acme.io/foo\")",
                "spec.completionMode: Unsupported value: \"Bogus\": supported values: \"NonIndexed\", \"Indexed\"",
                "spec.maxFailedIndexes: Invalid value: 1: requires indexed completion mode",
                "spec.successPolicy: Invalid value: {\"rules\":[]}: requires indexed completion mode",
                "spec.podReplacementPolicy: Unsupported value: \"Sometimes\": supported values: \"Failed\", \"TerminatingOrFailed\"",
                "spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\"",
            ]
        );
        assert_eq!(
            job(
                json!({"completionMode": "Indexed", "completions": 3, "parallelism": 3,
                "backoffLimitPerIndex": 1, "maxFailedIndexes": 4, "successPolicy": {"rules": [
                    {}, {"succeededIndexes": "0-1", "succeededCount": 3},
                    {"succeededIndexes": "5"}]}})
            ),
            [
                "spec.maxFailedIndexes: Invalid value: 4: must be less than or equal to completions",
                "spec.successPolicy.rules[0]: Required value: at least one of succeededCount or succeededIndexes must be specified",
                "spec.successPolicy.rules[1].succeededCount: Invalid value: 3: must be less than or equal to 2 (the number of indexes in the specified succeededIndexes field)",
                "spec.successPolicy.rules[2].succeededIndexes: Invalid value: \"5\": error parsing succeededIndexes: too large index: \"5\"",
            ]
        );
        assert_eq!(
            job(
                json!({"completionMode": "Indexed", "completions": 3, "parallelism": 3,
                "backoffLimitPerIndex": 1, "maxFailedIndexes": 1, "managedBy": "example.com/q",
                "successPolicy": {"rules": [{"succeededIndexes": "0-1", "succeededCount": 1}]}})
            ),
            Vec::<String>::new()
        );
    }

    #[test]
    fn pod_failure_policies_follow_kubes_rules() {
        let job = |policy: Value, per_index: bool| {
            let mut job = stored_job(json!({}));
            job["spec"]["template"]["spec"]["restartPolicy"] = json!("Never");
            job["spec"]["template"]["spec"]["initContainers"] =
                json!([{"name": "init", "image": "busybox"}]);
            job["spec"]["podFailurePolicy"] = policy;
            // Defaulted again (to `Failed`, with a pod failure policy).
            job["spec"]
                .as_object_mut()
                .unwrap()
                .remove("podReplacementPolicy");
            if per_index {
                job["spec"]["completionMode"] = json!("Indexed");
                job["spec"]["completions"] = json!(2);
                job["spec"]["backoffLimitPerIndex"] = json!(1);
            }
            crate::kinds::refusal_causes("batch", "jobs", job, None)
        };
        assert_eq!(
            job(
                json!({"rules": [
                    {"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [0, 3, 3, 1]}},
                    {"onExitCodes": {"operator": "Maybe", "containerName": "other", "values": []}},
                    {"action": "Retry", "onPodConditions": [{"type": "bad type"}, {"type": "DisruptionTarget", "status": "Maybe"}]},
                    {"action": "Ignore", "onExitCodes": {"values": [1]}, "onPodConditions": [{"type": "Ready", "status": "True"}]},
                    {"action": "Count"},
                ]}),
                false
            ),
            [
                "spec.podFailurePolicy.rules[0].action: Invalid value: \"FailIndex\": requires the backoffLimitPerIndex to be set",
                "spec.podFailurePolicy.rules[0].onExitCodes.values[0]: Invalid value: 0: must not be 0 for the In operator",
                "spec.podFailurePolicy.rules[0].onExitCodes.values[2]: Duplicate value: 3",
                "spec.podFailurePolicy.rules[0].onExitCodes.values: Invalid value: []int32{0, 3, 3, 1}: must be ordered",
                "spec.podFailurePolicy.rules[1].action: Required value: valid values: [\"Count\" \"FailIndex\" \"FailJob\" \"Ignore\"]",
                "spec.podFailurePolicy.rules[1].onExitCodes.operator: Unsupported value: \"Maybe\": supported values: \"In\", \"NotIn\"",
                "spec.podFailurePolicy.rules[1].onExitCodes.containerName: Invalid value: \"other\": must be one of the container or initContainer names in the pod template",
                "spec.podFailurePolicy.rules[1].onExitCodes.values: Invalid value: []int32{}: at least one value is required",
                "spec.podFailurePolicy.rules[2].action: Unsupported value: \"Retry\": supported values: \"Count\", \"FailIndex\", \"FailJob\", \"Ignore\"",
                "spec.podFailurePolicy.rules[2].onPodConditions[0].type: Invalid value: \"bad type\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
                "spec.podFailurePolicy.rules[2].onPodConditions[1].status: Unsupported value: \"Maybe\": supported values: \"False\", \"True\", \"Unknown\"",
                "spec.podFailurePolicy.rules[3].onExitCodes.operator: Required value: valid values: [\"In\" \"NotIn\"]",
                "spec.podFailurePolicy.rules[3]: Invalid value: specifying both OnExitCodes and OnPodConditions is not supported",
                "spec.podFailurePolicy.rules[4]: Invalid value: specifying one of OnExitCodes and OnPodConditions is required",
            ]
        );
        let many: Vec<Value> = (0..21)
            .map(|_| json!({"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}))
            .collect();
        assert_eq!(
            job(json!({"rules": many}), false),
            ["spec.podFailurePolicy.rules: Too many: 21: must have at most 20 items"]
        );
        // The documentation's examples: a container named in the template, an init
        // container, and `FailIndex` with a backoff limit per index.
        assert_eq!(
            job(
                json!({"rules": [
                    {"action": "FailJob", "onExitCodes": {"containerName": "c", "operator": "In", "values": [42]}},
                    {"action": "FailIndex", "onExitCodes": {"containerName": "init", "operator": "NotIn", "values": [0, 1, 2]}},
                    {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
                ]}),
                true
            ),
            // The last pattern's status is defaulted (`True`), as kube's v1 defaults do.
            Vec::<String>::new()
        );
    }

    #[test]
    fn an_indexed_job_s_pods_need_label_hostnames() {
        let job = |name: &str, completions: i64| {
            let mut job = stored_job(json!({}));
            job["metadata"]["name"] = json!(name);
            job["spec"]["completionMode"] = json!("Indexed");
            job["spec"]["completions"] = json!(completions);
            job["spec"]["parallelism"] = json!(1);
            crate::kinds::refusal_causes("batch", "jobs", job, None)
        };
        let long = "a".repeat(61);
        assert_eq!(job(&long, 10), Vec::<String>::new());
        assert_eq!(
            job(&long, 11),
            [format!(
                "metadata.name: Invalid value: \"{long}\": will not able to create pod with invalid DNS label: {long}-10"
            )]
        );
        assert_eq!(
            job("a.b", 1),
            [
                "metadata.name: Invalid value: \"a.b\": will not able to create pod with invalid DNS label: a.b-0"
            ]
        );
    }

    #[test]
    fn cron_jobs_job_templates_are_job_specs() {
        let mut bad = cron_job("c", json!({"schedule": "@hourly"}));
        let spec = &mut bad["spec"]["jobTemplate"]["spec"];
        spec["parallelism"] = json!(-1);
        spec["completions"] = json!(-2);
        spec["backoffLimit"] = json!(-3);
        spec["completionMode"] = json!("Indexed");
        spec["completions"] = json!(-2);
        assert_eq!(
            messages(bad, None),
            [
                "spec.jobTemplate.spec.parallelism: Invalid value: -1: must be greater than or equal to 0",
                "spec.jobTemplate.spec.completions: Invalid value: -2: must be greater than or equal to 0",
                "spec.jobTemplate.spec.backoffLimit: Invalid value: -3: must be greater than or equal to 0",
            ]
        );
        let mut always = cron_job("c", json!({"schedule": "@hourly"}));
        always["spec"]["jobTemplate"]["spec"]["template"]["spec"]["restartPolicy"] =
            json!("Always");
        assert_eq!(
            messages(always, None),
            [
                "spec.jobTemplate.spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\""
            ]
        );
    }

    #[test]
    fn cron_jobs() {
        // `kubectl create cronjob c --image=busybox --schedule="*/1 * * * *"`.
        let good = cron_job(
            "c",
            json!({"schedule": "*/1 * * * *", "timeZone": "Europe/Paris"}),
        );
        assert_eq!(messages(good, None), Vec::<String>::new());
        let bad = cron_job(
            "c",
            json!({"schedule": "bad", "timeZone": "Mars/Base",
            "concurrencyPolicy": "Sometimes", "startingDeadlineSeconds": -1,
            "failedJobsHistoryLimit": -2}),
        );
        assert_eq!(
            messages(bad, None),
            [
                "spec.schedule: Invalid value: \"bad\": expected exactly 5 fields, found 1: [bad]",
                "spec.startingDeadlineSeconds: Invalid value: -1: must be greater than or equal to 0",
                "spec.timeZone: Invalid value: \"Mars/Base\": unknown time zone Mars/Base",
                "spec.concurrencyPolicy: Unsupported value: \"Sometimes\": supported values: \"Allow\", \"Forbid\", \"Replace\"",
                "spec.failedJobsHistoryLimit: Invalid value: -2: must be greater than or equal to 0",
            ]
        );
        let tz = cron_job(
            "c",
            json!({"schedule": "TZ=UTC 0 * * * *", "timeZone": "Local"}),
        );
        assert_eq!(
            messages(tz.clone(), None),
            [
                "spec.schedule: Invalid value: \"TZ=UTC 0 * * * *\": cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
                "spec.timeZone: Invalid value: \"Local\": timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones",
            ]
        );
        // An update keeps a stored `TZ` schedule, and an unchanged time zone is not checked.
        assert_eq!(
            messages(tz.clone(), Some(&tz)),
            [
                "spec.schedule: Invalid value: \"TZ=UTC 0 * * * *\": cannot use both timeZone field and TZ or CRON_TZ in schedule"
            ]
        );
        let long = cron_job(&"a".repeat(53), json!({"schedule": "@hourly"}));
        assert_eq!(
            messages(long, None),
            [format!(
                "metadata.name: Invalid value: \"{}\": must be no more than 52 characters",
                "a".repeat(53)
            )]
        );
        let mut selected = cron_job("c", json!({"schedule": "@hourly"}));
        selected["spec"]["jobTemplate"]["spec"]["manualSelector"] = json!(true);
        assert_eq!(
            messages(selected, None),
            [
                "spec.jobTemplate.spec.manualSelector: Unsupported value: true: supported values: \"nil\", \"false\""
            ]
        );
    }
}

//! CronJobs' rules as kube-apiserver's `pkg/apis/batch/validation` (`ValidateCronJobCreate`,
//! `ValidateCronJobUpdate`) applies them, in kube's order.
//!
//! ## Guarantees
//! - `spec.schedule` is given and parses as kube's cron library (`robfig/cron/v3`'s
//!   `ParseStandard`) parses it, with its error text: five fields (`expected exactly 5 fields,
//!   found 1: [bad]`), each a list of `*`, `?`, numbers or names (`jan`, `sun`), ranges and
//!   steps within the field's bounds, or a descriptor (`@daily`, `@every 1h30m`). A `TZ=` or
//!   `CRON_TZ=` prefix is refused on create (`cannot use TZ or CRON_TZ in schedule, use
//!   timeZone field instead`), and on an update unless the stored schedule had one.
//! - `spec.timeZone`, when set (and, on an update, changed): not empty, of kube's characters,
//!   not `Local`, and an IANA zone Go's `time.LoadLocation` knows (the `chrono-tz` database).
//! - `startingDeadlineSeconds` and the history limits are not negative; `concurrencyPolicy`
//!   is `Allow`, `Forbid` or `Replace`; the job template's pod template is checked as a Job's
//!   ([`super::workloads`]), its selector not set and `manualSelector` not true.
//! - A created CronJob's name has at most 52 characters (the controller appends 11 to name its
//!   Jobs).
//! - Not checked (kube checks them): the job template's other Job spec fields
//!   (`parallelism`, `completions`, `backoffLimit`, success and failure policies).
//!
//! Differs from kube: kube's cron library panics on a `TZ=` prefix without a space after it
//! (kube answers a 500); this one leaves such a schedule to the `TZ` rule alone.

use serde_json::Value;

use super::workloads;
use crate::field::{Cause, go_quote, invalid, not_supported, required};

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
    workloads::template(
        object,
        "spec.jobTemplate.spec.template",
        &["OnFailure", "Never"],
        false,
        causes,
    );
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

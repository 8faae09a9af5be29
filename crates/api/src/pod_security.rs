//! kube-apiserver's `PodSecurity` admission (the Pod Security Standards,
//! `staging/src/k8s.io/pod-security-admission`): the namespace labels that choose a policy, the
//! versioned checks of the `baseline` and `restricted` levels, and the decisions, warnings and
//! refusals kube-apiserver words from them. Pure functions over JSON objects; the server wires
//! them into its admission path.
//!
//! ## Guarantees
//! - **Policy**: a namespace's labels `pod-security.kubernetes.io/{enforce,audit,warn}` (levels
//!   `privileged`, `baseline`, `restricted`) and `...-version` (`latest` or `v1.N`) choose its
//!   policy, each mode without a label taking the configuration's default ([`config`]:
//!   kube's `PodSecurityConfiguration`, `privileged:latest` in every mode when none is
//!   given). A label kube cannot parse is an error
//!   ([`Policy::of_labels`]) and still yields kube's policy: an invalid enforce level enforces
//!   `restricted` (fail closed), an invalid warn or audit level is `privileged` (fail open), an
//!   invalid version is `latest`. As in kube since v1.26, a namespace that sets a valid enforce
//!   level but no warn level warns at the enforce level (and version, unless the warn version
//!   is set), so its workloads' templates hear of what its pods would be refused for.
//! - **Checks**: every check of kube v1.33's default registry, at the policy version asked: a
//!   check applies from its minimum version, and the newest revision not newer than the version
//!   runs (`seccompProfile` of restricted from v1.19, `runAsUser` from v1.23, the Windows
//!   exemptions of v1.25, the sysctls of v1.27, v1.29 and v1.32, SELinux's
//!   `container_engine_t` of v1.31; versions past v1.32 and `latest` are v1.32's). `restricted`
//!   runs the baseline checks its own checks do not replace. Results come in kube's order
//!   (baseline checks by ID, then restricted by ID) with kube's reasons and details, word for
//!   word ([`evaluate`], [`forbidden_detail`]).
//! - **Pods** ([`admit_pod`]): a create, and an update that changes what a check can see
//!   (containers or init containers added or removed, an image, a container's seccomp
//!   annotation, an ephemeral container added or changed: [`is_significant_pod_update`]), is
//!   refused when it violates the enforce policy (`violates PodSecurity "restricted:latest":
//!   ...`); otherwise it gets the warning `would violate PodSecurity "baseline:v1.30": ...` when
//!   it violates the warn policy. Pod subresources other than `status`, `binding`, `eviction`
//!   and the connect ones are evaluated too (`ephemeralcontainers`).
//! - **Workloads** ([`pod_template`]): the pod templates of Deployments, ReplicaSets,
//!   StatefulSets, DaemonSets, Jobs, CronJobs, ReplicationControllers and PodTemplates are never
//!   enforced; their creates and updates (not their subresources) get the warn policy's warning.
//! - **Namespaces** ([`admit_namespace`]): a create with an invalid label, or an update that
//!   changes the labels' errors, is kube's 422 (`metadata.labels[...]: Invalid value: "x": must
//!   be one of privileged, baseline, restricted`). An update that tightens the enforce policy
//!   (not to `privileged`, not the same version at a level as or less strict) warns about the
//!   namespace's pods that violate it ([`existing_pod_warnings`]): kube's summary line, then
//!   one line per distinct violation, naming the first pod and counting the others, sorted;
//!   at most 3000 pods are checked (kube's bound), one pod per controller first.
//! - **Exemptions** ([`config::Exemptions`]): a pod or workload write in an exempt namespace
//!   or by an exempt user, and a pod or template naming an exempt runtime class, is admitted
//!   unevaluated, in kube's order (ignored subresources, namespace, user, then — for pods —
//!   the fully privileged namespace and the insignificant update, then the runtime class), with
//!   kube's audit annotation `exempt: namespace|user|runtimeClass`. An exempt namespace whose
//!   update sets a policy is warned that it will be ignored ([`NamespaceReview::Exempt`]);
//!   pods of an exempt runtime class are not counted when a namespace tightens.
//! - **Audit** is evaluated, as kube evaluates it, only for the audit log's annotations
//!   ([`audit_annotations`]): `enforce-policy` on a pod's write, `audit-violations` when the
//!   audit policy is violated (the server asks only for requests it audits).

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fmt;

use serde_json::{Map, Value};

use crate::field::Cause;
use crate::field::go_string as text;

pub mod config;

pub use config::Configuration;

/// The label naming the enforce level.
pub const ENFORCE_LEVEL_LABEL: &str = "pod-security.kubernetes.io/enforce";
/// The label naming the enforce policy's version.
pub const ENFORCE_VERSION_LABEL: &str = "pod-security.kubernetes.io/enforce-version";
/// The label naming the audit level.
pub const AUDIT_LEVEL_LABEL: &str = "pod-security.kubernetes.io/audit";
/// The label naming the audit policy's version.
pub const AUDIT_VERSION_LABEL: &str = "pod-security.kubernetes.io/audit-version";
/// The label naming the warn level.
pub const WARN_LEVEL_LABEL: &str = "pod-security.kubernetes.io/warn";
/// The label naming the warn policy's version.
pub const WARN_VERSION_LABEL: &str = "pod-security.kubernetes.io/warn-version";

/// kube's bound on the pods checked when a namespace's enforce level tightens.
pub const NAMESPACE_MAX_PODS_TO_CHECK: usize = 3000;

/// A Pod Security Standards level, ordered from the least strict.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// No checks.
    Privileged,
    /// The baseline checks.
    Baseline,
    /// The baseline checks restricted ones do not replace, and the restricted checks.
    Restricted,
}

impl Level {
    /// The level a label names.
    #[must_use]
    pub fn parse(value: &str) -> Option<Level> {
        match value {
            "privileged" => Some(Level::Privileged),
            "baseline" => Some(Level::Baseline),
            "restricted" => Some(Level::Restricted),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Level::Privileged => "privileged",
            Level::Baseline => "baseline",
            Level::Restricted => "restricted",
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A policy version: `v1.N` or `latest` (newer than every `v1.N`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Version {
    /// `v1.N`.
    Minor(u64),
    /// `latest`.
    Latest,
}

impl Version {
    /// The version a label names: `latest`, or `v1.` and a number without leading zeros.
    #[must_use]
    pub fn parse(value: &str) -> Option<Version> {
        if value == "latest" {
            return Some(Version::Latest);
        }
        let digits = value.strip_prefix("v1.")?;
        let well_formed = !digits.is_empty()
            && digits.bytes().all(|b| b.is_ascii_digit())
            && (digits == "0" || !digits.starts_with('0'));
        if !well_formed {
            return None;
        }
        // Go's Atoi: a number past int64 is an error too.
        digits
            .parse::<i64>()
            .ok()
            .and_then(|minor| u64::try_from(minor).ok())
            .map(Version::Minor)
    }

    /// The minor version the checks run at: `latest` and versions past the newest check's
    /// are the newest check's (kube's registry clamps to its maximum version).
    fn effective_minor(self) -> u64 {
        match self {
            Version::Minor(minor) => minor.min(MAX_CHECK_MINOR),
            Version::Latest => MAX_CHECK_MINOR,
        }
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Version::Minor(minor) => write!(f, "v1.{minor}"),
            Version::Latest => f.write_str("latest"),
        }
    }
}

/// A level at a version (`restricted:latest`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LevelVersion {
    /// The level.
    pub level: Level,
    /// The version.
    pub version: Version,
}

impl LevelVersion {
    /// `privileged:latest`, kube's default for every mode.
    pub const DEFAULT: LevelVersion = LevelVersion {
        level: Level::Privileged,
        version: Version::Latest,
    };
}

impl fmt::Display for LevelVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.level, self.version)
    }
}

/// A namespace's policy: what is enforced, audited and warned about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    /// Refuses pods that violate it.
    pub enforce: LevelVersion,
    /// Kube's audit annotations (no audit log here).
    pub audit: LevelVersion,
    /// Warns about pods and templates that violate it.
    pub warn: LevelVersion,
}

impl Policy {
    /// kube's default policy: `privileged:latest` in every mode.
    pub const DEFAULT: Policy = Policy {
        enforce: LevelVersion::DEFAULT,
        audit: LevelVersion::DEFAULT,
        warn: LevelVersion::DEFAULT,
    };

    /// The policy of a namespace's `labels` (its `metadata.labels`) and the labels' errors, as
    /// kube's `PolicyToEvaluate`: each mode without a label is `defaults`' (the
    /// configuration's, [`config::Configuration`]); each cause names
    /// `metadata.labels[<label>]`.
    #[must_use]
    pub fn of_labels(labels: Option<&Value>, defaults: &Policy) -> (Policy, Vec<Cause>) {
        let mut policy = *defaults;
        let mut causes = Vec::new();
        let Some(labels) = labels.and_then(Value::as_object).filter(|l| !l.is_empty()) else {
            return (policy, causes);
        };
        let modes: [(&str, &str, &mut LevelVersion, Level); 3] = [
            (
                ENFORCE_LEVEL_LABEL,
                ENFORCE_VERSION_LABEL,
                &mut policy.enforce,
                Level::Restricted,
            ),
            (
                AUDIT_LEVEL_LABEL,
                AUDIT_VERSION_LABEL,
                &mut policy.audit,
                Level::Privileged,
            ),
            (
                WARN_LEVEL_LABEL,
                WARN_VERSION_LABEL,
                &mut policy.warn,
                Level::Privileged,
            ),
        ];
        let mut valid_enforce_level = false;
        for (level_label, version_label, mode, fallback) in modes {
            if let Some(value) = label_value(labels, level_label) {
                let level = Level::parse(&value);
                valid_enforce_level |= level.is_some() && level_label == ENFORCE_LEVEL_LABEL;
                mode.level = level.unwrap_or_else(|| {
                    causes.push(label_cause(
                        level_label,
                        &value,
                        "must be one of privileged, baseline, restricted",
                    ));
                    fallback
                });
            }
            if let Some(value) = label_value(labels, version_label) {
                mode.version = Version::parse(&value).unwrap_or_else(|| {
                    causes.push(label_cause(
                        version_label,
                        &value,
                        "must be \"latest\" or \"v1.x\"",
                    ));
                    Version::Latest
                });
            }
        }
        // kube 1.26+: a valid enforce level stricter than an unset warn level is warned at
        // too, at the enforce version unless the warn version is set.
        if valid_enforce_level
            && !labels.contains_key(WARN_LEVEL_LABEL)
            && policy.enforce.level > policy.warn.level
        {
            policy.warn.level = policy.enforce.level;
            if !labels.contains_key(WARN_VERSION_LABEL) {
                policy.warn.version = policy.enforce.version;
            }
        }
        (policy, causes)
    }
}

/// A label's value as Go's `map[string]string` holds it.
fn label_value(labels: &Map<String, Value>, label: &str) -> Option<String> {
    labels.get(label).map(|value| text(Some(value)))
}

fn label_cause(label: &str, value: &str, message: &str) -> Cause {
    crate::names::invalid_value(&format!("metadata.labels[{label}]"), value, message)
}

/// One failed check: kube's `ForbiddenReason` and `ForbiddenDetail` (may be empty).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// `allowPrivilegeEscalation != false`.
    pub reason: String,
    /// `container "c" must set securityContext.allowPrivilegeEscalation=false`.
    pub detail: String,
}

impl Violation {
    fn new(reason: impl Into<String>, detail: impl Into<String>) -> Option<Violation> {
        Some(Violation {
            reason: reason.into(),
            detail: detail.into(),
        })
    }
}

/// A check's revision: the pod's metadata and spec to its violation, if any.
type CheckFn = fn(&Value, &Value) -> Option<Violation>;

/// A check of kube's registry.
struct Check {
    id: &'static str,
    level: Level,
    /// Revisions by minimum minor version, increasing.
    versions: &'static [(u64, CheckFn)],
    /// The baseline checks this restricted one replaces.
    overrides: &'static [&'static str],
}

impl Check {
    /// The revision that runs at `minor`, if the check applies there.
    fn at(&self, minor: u64) -> Option<CheckFn> {
        self.versions
            .iter()
            .rev()
            .find(|(min, _)| *min <= minor)
            .map(|(_, check)| *check)
    }
}

/// The newest minimum version of any check (kube's registry's maximum version).
const MAX_CHECK_MINOR: u64 = 32;

/// kube v1.33's default checks: baseline by ID, then restricted by ID (Go's byte order), the
/// order kube evaluates and reports them in.
const CHECKS: &[Check] = &[
    Check {
        id: "appArmorProfile",
        level: Level::Baseline,
        versions: &[(0, app_armor_profile)],
        overrides: &[],
    },
    Check {
        id: "capabilities_baseline",
        level: Level::Baseline,
        versions: &[(0, capabilities_baseline)],
        overrides: &[],
    },
    Check {
        id: "hostNamespaces",
        level: Level::Baseline,
        versions: &[(0, host_namespaces)],
        overrides: &[],
    },
    Check {
        id: "hostPathVolumes",
        level: Level::Baseline,
        versions: &[(0, host_path_volumes)],
        overrides: &[],
    },
    Check {
        id: "hostPorts",
        level: Level::Baseline,
        versions: &[(0, host_ports)],
        overrides: &[],
    },
    Check {
        id: "privileged",
        level: Level::Baseline,
        versions: &[(0, privileged)],
        overrides: &[],
    },
    Check {
        id: "procMount",
        level: Level::Baseline,
        versions: &[(0, proc_mount)],
        overrides: &[],
    },
    Check {
        id: "seLinuxOptions",
        level: Level::Baseline,
        versions: &[(0, se_linux_options_1_0), (31, se_linux_options_1_31)],
        overrides: &[],
    },
    Check {
        id: "seccompProfile_baseline",
        level: Level::Baseline,
        versions: &[(0, seccomp_annotations), (19, seccomp_baseline)],
        overrides: &[],
    },
    Check {
        id: "sysctls",
        level: Level::Baseline,
        versions: &[
            (0, sysctls_1_0),
            (27, sysctls_1_27),
            (29, sysctls_1_29),
            (32, sysctls_1_32),
        ],
        overrides: &[],
    },
    Check {
        id: "windowsHostProcess",
        level: Level::Baseline,
        versions: &[(0, windows_host_process)],
        overrides: &[],
    },
    Check {
        id: "allowPrivilegeEscalation",
        level: Level::Restricted,
        versions: &[
            (8, allow_privilege_escalation),
            (25, allow_privilege_escalation_1_25),
        ],
        overrides: &[],
    },
    Check {
        id: "capabilities_restricted",
        level: Level::Restricted,
        versions: &[
            (22, capabilities_restricted),
            (25, capabilities_restricted_1_25),
        ],
        overrides: &["capabilities_baseline"],
    },
    Check {
        id: "restrictedVolumes",
        level: Level::Restricted,
        versions: &[(0, restricted_volumes)],
        overrides: &["hostPathVolumes"],
    },
    Check {
        id: "runAsNonRoot",
        level: Level::Restricted,
        versions: &[(0, run_as_non_root)],
        overrides: &[],
    },
    Check {
        id: "runAsUser",
        level: Level::Restricted,
        versions: &[(23, run_as_user)],
        overrides: &[],
    },
    Check {
        id: "seccompProfile_restricted",
        level: Level::Restricted,
        versions: &[(19, seccomp_restricted), (25, seccomp_restricted_1_25)],
        overrides: &["seccompProfile_baseline"],
    },
];

/// Whether a pod says it runs on Windows (`spec.os.name`), which kube v1.25's restricted
/// checks of Linux-only fields let pass.
fn windows(spec: &Value) -> bool {
    spec.pointer("/os/name").and_then(Value::as_str) == Some("windows")
}

fn allow_privilege_escalation_1_25(meta: &Value, spec: &Value) -> Option<Violation> {
    (!windows(spec)).then(|| allow_privilege_escalation(meta, spec))?
}

fn capabilities_restricted_1_25(meta: &Value, spec: &Value) -> Option<Violation> {
    (!windows(spec)).then(|| capabilities_restricted(meta, spec))?
}

fn seccomp_restricted_1_25(meta: &Value, spec: &Value) -> Option<Violation> {
    (!windows(spec)).then(|| seccomp_restricted(meta, spec))?
}

/// The violations of a pod (its `metadata` and `spec`, or a template's) at a level and
/// version, in kube's order (kube's `EvaluatePod` and `AggregateCheckResults`).
#[must_use]
pub fn evaluate(policy: LevelVersion, meta: &Value, spec: &Value) -> Vec<Violation> {
    if policy.level == Level::Privileged {
        return Vec::new();
    }
    let minor = policy.version.effective_minor();
    let overridden: HashSet<&str> = if policy.level == Level::Restricted {
        CHECKS
            .iter()
            .filter(|c| c.level == Level::Restricted && c.at(minor).is_some())
            .flat_map(|c| c.overrides.iter().copied())
            .collect()
    } else {
        HashSet::new()
    };
    CHECKS
        .iter()
        .filter(|c| c.level <= policy.level && !overridden.contains(c.id))
        .filter_map(|c| c.at(minor))
        .filter_map(|check| check(meta, spec))
        .collect()
}

/// kube's `ForbiddenDetail`: `reason (detail), reason, ...`.
#[must_use]
pub fn forbidden_detail(violations: &[Violation]) -> String {
    violations
        .iter()
        .map(|v| {
            if v.detail.is_empty() {
                v.reason.clone()
            } else {
                format!("{} ({})", v.reason, v.detail)
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// kube's `ForbiddenReason`: the reasons, comma-separated.
#[must_use]
pub fn forbidden_reason(violations: &[Violation]) -> String {
    violations
        .iter()
        .map(|v| v.reason.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// What admission makes of a pod or a template: a refusal (the message after `pods "x" is
/// forbidden: `) or warnings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Decision {
    /// `violates PodSecurity "restricted:latest": ...`.
    pub refusal: Option<String>,
    /// `would violate PodSecurity "baseline:latest": ...`.
    pub warnings: Vec<String>,
}

/// kube's `EvaluatePod`: the enforce policy (when `enforce`, for pods) refuses; otherwise the
/// warn policy warns.
#[must_use]
pub fn decide(policy: &Policy, meta: &Value, spec: &Value, enforce: bool) -> Decision {
    let mut decision = Decision::default();
    if enforce {
        let violations = evaluate(policy.enforce, meta, spec);
        if !violations.is_empty() {
            decision.refusal = Some(format!(
                "violates PodSecurity \"{}\": {}",
                policy.enforce,
                forbidden_detail(&violations)
            ));
            return decision;
        }
    }
    let violations = evaluate(policy.warn, meta, spec);
    if !violations.is_empty() {
        decision.warnings.push(format!(
            "would violate PodSecurity \"{}\": {}",
            policy.warn,
            forbidden_detail(&violations)
        ));
    }
    decision
}

/// The pod subresources kube's admission does not evaluate.
const IGNORED_POD_SUBRESOURCES: [&str; 8] = [
    "exec",
    "attach",
    "binding",
    "eviction",
    "log",
    "portforward",
    "proxy",
    "status",
];

/// A write PodSecurity looks at: kube's admission attributes and the namespace's labels.
#[derive(Clone, Copy, Debug)]
pub struct Attributes<'a> {
    /// The requesting user's name (kube's `attrs.GetUserName()`).
    pub user: &'a str,
    /// The written resource's group.
    pub group: &'a str,
    /// The written resource.
    pub plural: &'a str,
    /// The subresource written, empty for the object itself.
    pub subresource: &'a str,
    /// The object before an update.
    pub old: Option<&'a Value>,
    /// The object written.
    pub object: &'a Value,
    /// The `metadata.labels` of the object's namespace, as the cache has them.
    pub labels: Option<&'a Value>,
}

impl Attributes<'_> {
    /// The request's namespace (the object's).
    fn namespace(&self) -> &str {
        self.object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    /// kube's short-circuits on exempt namespaces and users, in its order: the exemption's
    /// name (`namespace`, `user`), as its audit annotation `exempt` gives it.
    fn exempt(&self, config: &Configuration) -> Option<&'static str> {
        if config.exempt_namespace(self.namespace()) {
            Some("namespace")
        } else if config.exempt_user(self.user) {
            Some("user")
        } else {
            None
        }
    }

    fn is_pod(&self) -> bool {
        self.group.is_empty() && self.plural == "pods"
    }
}

/// kube's `ValidatePod`: a pod write, under `config`'s defaults and exemptions.
#[must_use]
pub fn admit_pod(config: &Configuration, write: &Attributes<'_>) -> Decision {
    if IGNORED_POD_SUBRESOURCES.contains(&write.subresource) || write.exempt(config).is_some() {
        return Decision::default();
    }
    // Audit aside (evaluated for the audit log only), a fully privileged namespace checks
    // nothing.
    let (policy, _) = Policy::of_labels(write.labels, &config.defaults);
    if policy.enforce.level == Level::Privileged && policy.warn.level == Level::Privileged {
        return Decision::default();
    }
    if let Some(old) = write.old
        && !is_significant_pod_update(write.object, old)
    {
        return Decision::default();
    }
    let spec = object_or_empty(write.object.get("spec"));
    if config.exempt_runtime_class(spec) {
        return Decision::default();
    }
    decide(
        &policy,
        object_or_empty(write.object.get("metadata")),
        spec,
        true,
    )
}

/// kube's `ValidatePodController`: a workload's write under `config` (warnings only; nothing
/// for a subresource or a kind without a pod template).
#[must_use]
pub fn admit_template(config: &Configuration, write: &Attributes<'_>) -> Decision {
    if !write.subresource.is_empty() || write.exempt(config).is_some() {
        return Decision::default();
    }
    let Some((meta, spec)) = pod_template(write.group, write.plural, write.object) else {
        return Decision::default();
    };
    if config.exempt_runtime_class(spec) {
        return Decision::default();
    }
    let (policy, _) = Policy::of_labels(write.labels, &config.defaults);
    decide(&policy, meta, spec, false)
}

/// kube's audit annotations of a pod or workload write (`EvaluatePod`,
/// `EvaluatePodController` and its shared responses), keys without the plugin's
/// `pod-security.kubernetes.io/` prefix: `exempt` (`namespace`, `user`, `runtimeClass`) for
/// a write not evaluated because of `config`'s exemptions, `enforce-policy` (pods: the
/// enforced level and version; `privileged:latest` for a fully privileged namespace) and
/// `audit-violations` (`would violate PodSecurity "LEVEL:VERSION": ...` against the audit
/// policy). Empty where kube admits without evaluating (ignored subresources, an update that
/// changes nothing a check sees, a kind without a pod template).
#[must_use]
pub fn audit_annotations(
    config: &Configuration,
    write: &Attributes<'_>,
) -> Vec<(&'static str, String)> {
    let ignored = if write.is_pod() {
        IGNORED_POD_SUBRESOURCES.contains(&write.subresource)
    } else {
        !write.subresource.is_empty()
    };
    if ignored {
        return Vec::new();
    }
    if let Some(reason) = write.exempt(config) {
        return vec![("exempt", reason.to_owned())];
    }
    let (policy, _) = Policy::of_labels(write.labels, &config.defaults);
    let (meta, spec) = if write.is_pod() {
        let fully_privileged = [policy.enforce, policy.warn, policy.audit]
            .iter()
            .all(|p| p.level == Level::Privileged);
        if fully_privileged {
            // kube's shared answer for a fully privileged namespace.
            return vec![("enforce-policy", LevelVersion::DEFAULT.to_string())];
        }
        if let Some(old) = write.old
            && !is_significant_pod_update(write.object, old)
        {
            return Vec::new();
        }
        (
            object_or_empty(write.object.get("metadata")),
            object_or_empty(write.object.get("spec")),
        )
    } else {
        match pod_template(write.group, write.plural, write.object) {
            Some(found) => found,
            None => return Vec::new(),
        }
    };
    if config.exempt_runtime_class(spec) {
        return vec![("exempt", "runtimeClass".to_owned())];
    }
    let mut annotations = Vec::new();
    if write.is_pod() {
        annotations.push(("enforce-policy", policy.enforce.to_string()));
    }
    let violations = evaluate(policy.audit, meta, spec);
    if !violations.is_empty() {
        annotations.push((
            "audit-violations",
            format!(
                "would violate PodSecurity \"{}\": {}",
                policy.audit,
                forbidden_detail(&violations)
            ),
        ));
    }
    annotations
}

/// Whether kube's PodSecurity admission looks at writes of (`group`, `plural`): pods,
/// namespaces and the workload kinds with a pod template.
#[must_use]
pub fn applies(group: &str, plural: &str) -> bool {
    (group.is_empty() && matches!(plural, "pods" | "namespaces"))
        || template_path(group, plural).is_some()
}

static EMPTY: Value = Value::Null;

fn object_or_empty(value: Option<&Value>) -> &Value {
    value.unwrap_or(&EMPTY)
}

/// Where a workload kind keeps its pod template (`spec.template`), `None` for other kinds.
#[must_use]
pub fn template_path(group: &str, plural: &str) -> Option<&'static str> {
    match (group, plural) {
        ("", "podtemplates") => Some("template"),
        ("", "replicationcontrollers")
        | ("apps", "replicasets" | "deployments" | "statefulsets" | "daemonsets")
        | ("batch", "jobs") => Some("spec.template"),
        ("batch", "cronjobs") => Some("spec.jobTemplate.spec.template"),
        _ => None,
    }
}

/// The pod template of a workload (its metadata and spec), as kube's `ExtractPodSpec`: `None`
/// for another kind or an absent optional template (a ReplicationController's).
#[must_use]
pub fn pod_template<'a>(
    group: &str,
    plural: &str,
    object: &'a Value,
) -> Option<(&'a Value, &'a Value)> {
    let pointer = format!("/{}", template_path(group, plural)?.replace('.', "/"));
    let template = object.pointer(&pointer).filter(|t| !t.is_null());
    match template {
        Some(template) => Some((
            object_or_empty(template.get("metadata")),
            object_or_empty(template.get("spec")),
        )),
        // Go's value types: a missing template is an empty one, but a ReplicationController's
        // is a pointer.
        None if plural == "replicationcontrollers" => None,
        None => Some((&EMPTY, &EMPTY)),
    }
}

/// kube's `isSignificantPodUpdate`: whether an update can change what a check sees.
#[must_use]
pub fn is_significant_pod_update(pod: &Value, old: &Value) -> bool {
    let annotation = |object: &Value, key: &str| {
        text(
            object
                .pointer("/metadata/annotations")
                .and_then(|a| a.get(key)),
        )
    };
    let container_changed = |new: &Value, before: &Value| {
        if text(new.get("image")) != text(before.get("image")) {
            return true;
        }
        let key = format!("{SECCOMP_CONTAINER_ANNOTATION_PREFIX}{}", name_of(new));
        annotation(pod, &key) != annotation(old, &key)
    };
    for key in ["containers", "initContainers"] {
        let (new, before) = (spec_list(pod, key), spec_list(old, key));
        if new.len() != before.len() || new.iter().zip(before).any(|(n, b)| container_changed(n, b))
        {
            return true;
        }
    }
    let before = spec_list(old, "ephemeralContainers");
    spec_list(pod, "ephemeralContainers").iter().any(|c| {
        match before.iter().find(|b| name_of(b) == name_of(c)) {
            None => true,
            Some(b) => container_changed(c, b),
        }
    })
}

/// A pod's `spec.<key>` list (empty when absent).
fn spec_list<'a>(pod: &'a Value, key: &str) -> &'a [Value] {
    items(pod.get("spec").unwrap_or(&EMPTY), key)
}

/// An object's list `key` (empty when absent or not a list).
pub(crate) fn items<'a>(object: &'a Value, key: &str) -> &'a [Value] {
    object
        .get(key)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// What kube's `ValidateNamespace` makes of an allowed namespace write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NamespaceReview {
    /// Nothing to add.
    Allowed,
    /// The update tightens the enforce policy to this: the namespace's existing pods are
    /// checked against it ([`existing_pod_warnings`]).
    CheckPods(LevelVersion),
    /// The namespace is exempt and its labels set a policy that will be ignored: kube's
    /// warning `namespace "x" is exempt from Pod Security, and the policy (enforce=...) will
    /// be ignored`.
    Exempt(String),
}

/// kube's `ValidateNamespace` under `config`: a namespace create (`old` `None`) or update (not
/// of a subresource).
///
/// A create is never found exempt: kube-apiserver gives a namespace's create the request's
/// namespace, which is empty for `POST /api/v1/namespaces`, so its exemption warning is only
/// seen on updates.
///
/// # Errors
/// The labels' causes (kube's 422) on a create with invalid labels, or an update whose labels'
/// errors changed.
pub fn admit_namespace(
    config: &Configuration,
    namespace: &Value,
    old: Option<&Value>,
) -> Result<NamespaceReview, Vec<Cause>> {
    let labels = namespace.pointer("/metadata/labels");
    let (policy, causes) = Policy::of_labels(labels, &config.defaults);
    let Some(old) = old else {
        return if causes.is_empty() {
            Ok(NamespaceReview::Allowed)
        } else {
            Err(causes)
        };
    };
    let (old_policy, old_causes) =
        Policy::of_labels(old.pointer("/metadata/labels"), &config.defaults);
    if !causes.is_empty() && (old_causes.is_empty() || causes != old_causes) {
        return Err(causes);
    }
    let (new, before) = (policy.enforce, old_policy.enforce);
    if new == before
        || new.level == Level::Privileged
        || (new.version == before.version && new.level <= before.level)
    {
        return Ok(NamespaceReview::Allowed);
    }
    let name = namespace
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if config.exempt_namespace(name) {
        return Ok(exempt_namespace_warning(config, name, &policy, labels)
            .map_or(NamespaceReview::Allowed, NamespaceReview::Exempt));
    }
    Ok(NamespaceReview::CheckPods(new))
}

/// kube's `exemptNamespaceWarning`: for an exempt namespace whose labels set a policy that is
/// neither fully privileged nor equivalent to the defaults, the modes its labels set.
fn exempt_namespace_warning(
    config: &Configuration,
    name: &str,
    policy: &Policy,
    labels: Option<&Value>,
) -> Option<String> {
    let equivalent = |a: LevelVersion, b: LevelVersion| {
        (a.level == Level::Privileged && b.level == Level::Privileged) || a == b
    };
    let defaults = &config.defaults;
    let fully_privileged = [policy.enforce, policy.audit, policy.warn]
        .iter()
        .all(|mode| mode.level == Level::Privileged);
    if fully_privileged
        || (equivalent(policy.enforce, defaults.enforce)
            && equivalent(policy.audit, defaults.audit)
            && equivalent(policy.warn, defaults.warn))
    {
        return None;
    }
    let has = |label: &str| labels.and_then(|l| l.get(label)).is_some();
    let modes = [
        (
            "enforce",
            policy.enforce,
            ENFORCE_LEVEL_LABEL,
            ENFORCE_VERSION_LABEL,
        ),
        (
            "audit",
            policy.audit,
            AUDIT_LEVEL_LABEL,
            AUDIT_VERSION_LABEL,
        ),
        ("warn", policy.warn, WARN_LEVEL_LABEL, WARN_VERSION_LABEL),
    ];
    let set: Vec<String> = modes
        .iter()
        .filter(|(_, mode, level, version)| {
            mode.level != Level::Privileged && (has(level) || has(version))
        })
        .map(|(key, mode, _, _)| format!("{key}={mode}"))
        .collect();
    Some(format!(
        "namespace {name:?} is exempt from Pod Security, and the policy ({}) will be ignored",
        set.join(", ")
    ))
}

/// kube's `EvaluatePodsInNamespace`: the warnings about a namespace's existing `pods` under
/// a new enforce policy.
#[must_use]
pub fn existing_pod_warnings(
    config: &Configuration,
    namespace: &str,
    enforce: LevelVersion,
    pods: Vec<&Value>,
) -> Vec<String> {
    let pods = prioritized(pods);
    let total = pods.len();
    let checked = total.min(NAMESPACE_MAX_PODS_TO_CHECK);
    // Each distinct violation: the lexically first pod showing it and how many do.
    let mut seen: BTreeMap<String, (String, usize)> = BTreeMap::new();
    for pod in pods.into_iter().take(checked) {
        let spec = object_or_empty(pod.get("spec"));
        if config.exempt_runtime_class(spec) {
            continue;
        }
        let violations = evaluate(enforce, object_or_empty(pod.get("metadata")), spec);
        if violations.is_empty() {
            continue;
        }
        let name = pod
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let entry = seen
            .entry(forbidden_reason(&violations))
            .or_insert_with(|| (name.to_owned(), 0));
        if name < entry.0.as_str() {
            name.clone_into(&mut entry.0);
        }
        entry.1 += 1;
    }
    let mut warnings = Vec::new();
    if checked < total {
        warnings.push(format!(
            "new PodSecurity enforce level only checked against the first {checked} of {total} existing pods"
        ));
    }
    if !seen.is_empty() {
        warnings.push(format!(
            "existing pods in namespace {namespace:?} violate the new PodSecurity enforce level \"{enforce}\""
        ));
    }
    let mut lines: Vec<String> = seen
        .into_iter()
        .map(|(reason, (first, count))| match count {
            1 => format!("{first}: {reason}"),
            2 => format!("{first} (and 1 other pod): {reason}"),
            n => format!("{first} (and {} other pods): {reason}", n - 1),
        })
        .collect();
    lines.sort();
    warnings.extend(lines);
    warnings
}

/// kube's `prioritizePods`: one pod per controller first (in list order), then the other
/// pods of controllers already seen.
fn prioritized(pods: Vec<&Value>) -> Vec<&Value> {
    let mut first = Vec::with_capacity(pods.len());
    let mut later = Vec::new();
    let mut controllers = HashSet::new();
    for pod in pods {
        let controller = pod
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .and_then(|refs| {
                refs.iter()
                    .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
            })
            .map(|r| {
                r.get("uid")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned()
            });
        let repeated = controller.is_some_and(|uid| !controllers.insert(uid));
        if repeated {
            later.push(pod);
        } else {
            first.push(pod);
        }
    }
    first.extend(later);
    first
}

// --- the checks -----------------------------------------------------------------------------

pub(crate) const SECCOMP_POD_ANNOTATION: &str = "seccomp.security.alpha.kubernetes.io/pod";
pub(crate) const SECCOMP_CONTAINER_ANNOTATION_PREFIX: &str =
    "container.seccomp.security.alpha.kubernetes.io/";
pub(crate) const APPARMOR_ANNOTATION_PREFIX: &str =
    "container.apparmor.security.beta.kubernetes.io/";

/// The pod's containers as kube's `visitContainers` visits them: init containers, containers,
/// ephemeral containers.
fn containers(spec: &Value) -> impl Iterator<Item = &Value> {
    containers_with_paths(spec).map(|(_, container)| container)
}

/// [`containers`] with their paths (`spec.containers[0]`), as kube's
/// `VisitContainersWithPath` gives them.
pub(crate) fn containers_with_paths(spec: &Value) -> impl Iterator<Item = (String, &Value)> {
    containers_at(spec, "spec")
}

/// [`containers_with_paths`] of the spec at `path` (`spec.template.spec.containers[0]`).
pub(crate) fn containers_at<'a>(
    spec: &'a Value,
    path: &str,
) -> impl Iterator<Item = (String, &'a Value)> + use<'a> {
    let path = path.to_owned();
    ["initContainers", "containers", "ephemeralContainers"]
        .into_iter()
        .flat_map(move |key| {
            let path = path.clone();
            items(spec, key)
                .iter()
                .enumerate()
                .map(move |(i, c)| (format!("{path}.{key}[{i}]"), c))
        })
}

fn name_of(object: &Value) -> String {
    object
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// A field of an object's `securityContext`, when set (not absent, not `null`).
fn security<'a>(object: &'a Value, path: &str) -> Option<&'a Value> {
    object
        .get("securityContext")
        .and_then(|sc| sc.pointer(path))
        .filter(|v| !v.is_null())
}

fn pluralize(singular: &'static str, plural: &'static str, count: usize) -> &'static str {
    if count == 1 { singular } else { plural }
}

/// kube's `joinQuote`: `"a", "b"`.
fn join_quote<S: AsRef<str>>(items: impl IntoIterator<Item = S>) -> String {
    items
        .into_iter()
        .map(|item| format!("{:?}", item.as_ref()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `containers "a", "b"`.
fn named(items: &[String]) -> String {
    format!(
        "{} {}",
        pluralize("container", "containers", items.len()),
        join_quote(items)
    )
}

/// The names of the containers `bad` picks.
fn bad_containers(spec: &Value, mut bad: impl FnMut(&Value) -> bool) -> Vec<String> {
    containers(spec).filter(|c| bad(c)).map(name_of).collect()
}

fn allow_privilege_escalation(_: &Value, spec: &Value) -> Option<Violation> {
    let bad = bad_containers(spec, |c| {
        security(c, "/allowPrivilegeEscalation").and_then(Value::as_bool) != Some(false)
    });
    if bad.is_empty() {
        return None;
    }
    Violation::new(
        "allowPrivilegeEscalation != false",
        format!(
            "{} must set securityContext.allowPrivilegeEscalation=false",
            named(&bad)
        ),
    )
}

fn app_armor_profile(meta: &Value, spec: &Value) -> Option<Violation> {
    let allowed_type = |profile: &Value| {
        matches!(
            text(profile.get("type")).as_str(),
            "RuntimeDefault" | "Localhost"
        )
    };
    let mut setters = Vec::new();
    let mut values = BTreeSet::new();
    if let Some(profile) = spec
        .get("securityContext")
        .and_then(|sc| sc.get("appArmorProfile"))
        .filter(|p| !p.is_null())
        && !allowed_type(profile)
    {
        setters.push("pod".to_owned());
        values.insert(text(profile.get("type")));
    }
    let bad = bad_containers(spec, |c| {
        security(c, "/appArmorProfile").is_some_and(|profile| {
            let bad = !allowed_type(profile);
            if bad {
                values.insert(text(profile.get("type")));
            }
            bad
        })
    });
    if !bad.is_empty() {
        setters.push(named(&bad));
    }
    let mut values: Vec<String> = values.into_iter().collect();
    let mut annotations: Vec<String> = meta
        .get("annotations")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter(|(key, _)| key.starts_with(APPARMOR_ANNOTATION_PREFIX))
        .map(|(key, value)| (key, text(Some(value))))
        .filter(|(_, value)| {
            !(value.is_empty() || value == "runtime/default" || value.starts_with("localhost/"))
        })
        .map(|(key, value)| format!("{key}={value:?}"))
        .collect();
    if !annotations.is_empty() {
        annotations.sort();
        setters.push(pluralize("annotation", "annotations", annotations.len()).to_owned());
        values.extend(annotations);
    }
    if setters.is_empty() {
        return None;
    }
    Violation::new(
        pluralize(
            "forbidden AppArmor profile",
            "forbidden AppArmor profiles",
            values.len(),
        ),
        format!(
            "{} must not set AppArmor profile type to {}",
            setters.join(" and "),
            join_quote(&values)
        ),
    )
}

/// The capabilities baseline allows adding.
const BASELINE_CAPABILITIES: [&str; 13] = [
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
];

/// A container's `securityContext.capabilities.<list>`.
fn capabilities(container: &Value, list: &str) -> Vec<String> {
    security(container, &format!("/capabilities/{list}"))
        .and_then(Value::as_array)
        .map(|items| items.iter().map(|c| text(Some(c))).collect())
        .unwrap_or_default()
}

fn capabilities_baseline(_: &Value, spec: &Value) -> Option<Violation> {
    let mut added = BTreeSet::new();
    let bad = bad_containers(spec, |c| {
        if security(c, "/capabilities").is_none() {
            return false;
        }
        let extra: Vec<String> = capabilities(c, "add")
            .into_iter()
            .filter(|cap| !BASELINE_CAPABILITIES.contains(&cap.as_str()))
            .collect();
        let bad = !extra.is_empty();
        added.extend(extra);
        bad
    });
    if bad.is_empty() {
        return None;
    }
    Violation::new(
        "non-default capabilities",
        format!(
            "{} must not include {} in securityContext.capabilities.add",
            named(&bad),
            join_quote(&added)
        ),
    )
}

fn capabilities_restricted(_: &Value, spec: &Value) -> Option<Violation> {
    let mut missing_drop = Vec::new();
    let mut adding = Vec::new();
    let mut forbidden = BTreeSet::new();
    for c in containers(spec) {
        if security(c, "/capabilities").is_none() {
            missing_drop.push(name_of(c));
            continue;
        }
        if !capabilities(c, "drop").iter().any(|cap| cap == "ALL") {
            missing_drop.push(name_of(c));
        }
        let extra: Vec<String> = capabilities(c, "add")
            .into_iter()
            .filter(|cap| cap != "NET_BIND_SERVICE")
            .collect();
        if !extra.is_empty() {
            adding.push(name_of(c));
            forbidden.extend(extra);
        }
    }
    let mut details = Vec::new();
    if !missing_drop.is_empty() {
        details.push(format!(
            "{} must set securityContext.capabilities.drop=[\"ALL\"]",
            named(&missing_drop)
        ));
    }
    if !adding.is_empty() {
        details.push(format!(
            "{} must not include {} in securityContext.capabilities.add",
            named(&adding),
            join_quote(&forbidden)
        ));
    }
    if details.is_empty() {
        return None;
    }
    Violation::new("unrestricted capabilities", details.join("; "))
}

fn host_namespaces(_: &Value, spec: &Value) -> Option<Violation> {
    let shared: Vec<&str> = [
        ("hostNetwork", "hostNetwork=true"),
        ("hostPID", "hostPID=true"),
        ("hostIPC", "hostIPC=true"),
    ]
    .into_iter()
    .filter(|(key, _)| spec.get(*key).and_then(Value::as_bool) == Some(true))
    .map(|(_, shown)| shown)
    .collect();
    if shared.is_empty() {
        return None;
    }
    Violation::new("host namespaces", shared.join(", "))
}

/// The pod's volumes.
fn volumes(spec: &Value) -> impl Iterator<Item = &Value> {
    items(spec, "volumes").iter()
}

/// Whether a volume sets a source (present, not `null`).
fn has_source(volume: &Value, source: &str) -> bool {
    volume.get(source).is_some_and(|s| !s.is_null())
}

fn host_path_volumes(_: &Value, spec: &Value) -> Option<Violation> {
    let host: Vec<String> = volumes(spec)
        .filter(|v| has_source(v, "hostPath"))
        .map(name_of)
        .collect();
    if host.is_empty() {
        return None;
    }
    Violation::new(
        "hostPath volumes",
        format!(
            "{} {}",
            pluralize("volume", "volumes", host.len()),
            join_quote(&host)
        ),
    )
}

fn host_ports(_: &Value, spec: &Value) -> Option<Violation> {
    // Go's `sets.String`: sorted as text, not as numbers.
    let mut ports = BTreeSet::new();
    let bad = bad_containers(spec, |c| {
        let used: Vec<i64> = items(c, "ports")
            .iter()
            .filter_map(|p| p.get("hostPort").and_then(Value::as_i64))
            .filter(|port| *port != 0)
            .collect();
        ports.extend(used.iter().map(ToString::to_string));
        !used.is_empty()
    });
    if bad.is_empty() {
        return None;
    }
    Violation::new(
        "hostPort",
        format!(
            "{} {} {} {}",
            named(&bad),
            pluralize("uses", "use", bad.len()),
            pluralize("hostPort", "hostPorts", ports.len()),
            ports.into_iter().collect::<Vec<_>>().join(", ")
        ),
    )
}

fn privileged(_: &Value, spec: &Value) -> Option<Violation> {
    let bad = bad_containers(spec, |c| {
        security(c, "/privileged").and_then(Value::as_bool) == Some(true)
    });
    if bad.is_empty() {
        return None;
    }
    Violation::new(
        "privileged",
        format!(
            "{} must not set securityContext.privileged=true",
            named(&bad)
        ),
    )
}

fn proc_mount(_: &Value, spec: &Value) -> Option<Violation> {
    let mut types = BTreeSet::new();
    let bad = bad_containers(spec, |c| {
        security(c, "/procMount").is_some_and(|mount| {
            let mount = text(Some(mount));
            let bad = mount != "Default";
            if bad {
                types.insert(mount);
            }
            bad
        })
    });
    if bad.is_empty() {
        return None;
    }
    Violation::new(
        "procMount",
        format!(
            "{} must not set securityContext.procMount to {}",
            named(&bad),
            join_quote(&types)
        ),
    )
}

/// The volume sources restricted allows.
const RESTRICTED_ALLOWED_VOLUMES: [&str; 9] = [
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "image",
    "persistentVolumeClaim",
    "projected",
    "secret",
];

/// The sources restricted refuses, in the order kube names a volume's type by.
const RESTRICTED_VOLUME_TYPES: [&str; 21] = [
    "hostPath",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "nfs",
    "iscsi",
    "glusterfs",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "fc",
    "azureFile",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "portworxVolume",
    "scaleIO",
    "storageos",
];

fn restricted_volumes(_: &Value, spec: &Value) -> Option<Violation> {
    let mut bad = Vec::new();
    let mut types = BTreeSet::new();
    for volume in volumes(spec) {
        if RESTRICTED_ALLOWED_VOLUMES
            .iter()
            .any(|source| has_source(volume, source))
        {
            continue;
        }
        bad.push(name_of(volume));
        let kind = RESTRICTED_VOLUME_TYPES
            .iter()
            .find(|source| has_source(volume, source))
            .copied()
            .unwrap_or("unknown");
        types.insert(kind);
    }
    if bad.is_empty() {
        return None;
    }
    Violation::new(
        "restricted volume types",
        format!(
            "{} {} {} {} {}",
            pluralize("volume", "volumes", bad.len()),
            join_quote(&bad),
            pluralize("uses", "use", bad.len()),
            pluralize(
                "restricted volume type",
                "restricted volume types",
                types.len()
            ),
            join_quote(&types)
        ),
    )
}

/// A pod-level `securityContext` field, when set.
fn pod_security<'a>(spec: &'a Value, field: &str) -> Option<&'a Value> {
    spec.get("securityContext")
        .and_then(|sc| sc.get(field))
        .filter(|v| !v.is_null())
}

fn run_as_non_root(_: &Value, spec: &Value) -> Option<Violation> {
    let mut setters = Vec::new();
    let pod = pod_security(spec, "runAsNonRoot").and_then(Value::as_bool);
    if pod == Some(false) {
        setters.push("pod".to_owned());
    }
    let mut explicit = Vec::new();
    let mut implicit = Vec::new();
    for c in containers(spec) {
        match security(c, "/runAsNonRoot").and_then(Value::as_bool) {
            Some(false) => explicit.push(name_of(c)),
            Some(true) => {}
            None if pod != Some(true) => implicit.push(name_of(c)),
            None => {}
        }
    }
    if !explicit.is_empty() {
        setters.push(named(&explicit));
    }
    if !setters.is_empty() {
        return Violation::new(
            "runAsNonRoot != true",
            format!(
                "{} must not set securityContext.runAsNonRoot=false",
                setters.join(" and ")
            ),
        );
    }
    if implicit.is_empty() {
        return None;
    }
    Violation::new(
        "runAsNonRoot != true",
        format!(
            "pod or {} must set securityContext.runAsNonRoot=true",
            named(&implicit)
        ),
    )
}

fn run_as_user(_: &Value, spec: &Value) -> Option<Violation> {
    let mut setters = Vec::new();
    if pod_security(spec, "runAsUser").and_then(Value::as_i64) == Some(0) {
        setters.push("pod".to_owned());
    }
    let bad = bad_containers(spec, |c| {
        security(c, "/runAsUser").and_then(Value::as_i64) == Some(0)
    });
    if !bad.is_empty() {
        setters.push(named(&bad));
    }
    if setters.is_empty() {
        return None;
    }
    Violation::new(
        "runAsUser=0",
        format!("{} must not set runAsUser=0", setters.join(" and ")),
    )
}

/// The SELinux types baseline allows until v1.31.
const SELINUX_TYPES_1_0: [&str; 4] = ["", "container_t", "container_init_t", "container_kvm_t"];
/// The SELinux types baseline allows from v1.31.
const SELINUX_TYPES_1_31: [&str; 5] = [
    "",
    "container_t",
    "container_init_t",
    "container_kvm_t",
    "container_engine_t",
];

fn se_linux_options_1_0(meta: &Value, spec: &Value) -> Option<Violation> {
    se_linux_options(meta, spec, &SELINUX_TYPES_1_0)
}

fn se_linux_options_1_31(meta: &Value, spec: &Value) -> Option<Violation> {
    se_linux_options(meta, spec, &SELINUX_TYPES_1_31)
}

fn se_linux_options(_: &Value, spec: &Value, allowed: &[&str]) -> Option<Violation> {
    let mut types = BTreeSet::new();
    let (mut user, mut role) = (false, false);
    let mut valid = |options: &Value| {
        let kind = text(options.get("type"));
        let mut ok = true;
        if !allowed.contains(&kind.as_str()) {
            ok = false;
            types.insert(kind);
        }
        if !text(options.get("user")).is_empty() {
            ok = false;
            user = true;
        }
        if !text(options.get("role")).is_empty() {
            ok = false;
            role = true;
        }
        ok
    };
    let mut setters = Vec::new();
    if let Some(options) = pod_security(spec, "seLinuxOptions")
        && !valid(options)
    {
        setters.push("pod".to_owned());
    }
    let bad = bad_containers(spec, |c| {
        security(c, "/seLinuxOptions").is_some_and(|options| !valid(options))
    });
    if !bad.is_empty() {
        setters.push(named(&bad));
    }
    if setters.is_empty() {
        return None;
    }
    let mut data = Vec::new();
    if !types.is_empty() {
        data.push(format!(
            "{} {}",
            pluralize("type", "types", types.len()),
            join_quote(&types)
        ));
    }
    if user {
        data.push("user may not be set".to_owned());
    }
    if role {
        data.push("role may not be set".to_owned());
    }
    Violation::new(
        "seLinuxOptions",
        format!(
            "{} set forbidden securityContext.seLinuxOptions: {}",
            setters.join(" and "),
            data.join("; ")
        ),
    )
}

fn valid_seccomp_type(profile: &Value) -> bool {
    matches!(
        text(profile.get("type")).as_str(),
        "RuntimeDefault" | "Localhost"
    )
}

/// Baseline before v1.19: the seccomp annotations.
fn seccomp_annotations(meta: &Value, spec: &Value) -> Option<Violation> {
    let annotation = |key: &str| {
        meta.get("annotations")
            .and_then(|a| a.get(key))
            .map(|v| text(Some(v)))
    };
    let valid = |value: &str| {
        value == "runtime/default" || value == "docker/default" || value.starts_with("localhost/")
    };
    let mut forbidden = BTreeSet::new();
    let keys = std::iter::once(SECCOMP_POD_ANNOTATION.to_owned()).chain(
        containers(spec).map(|c| format!("{SECCOMP_CONTAINER_ANNOTATION_PREFIX}{}", name_of(c))),
    );
    for key in keys {
        if let Some(value) = annotation(&key)
            && !valid(&value)
        {
            forbidden.insert(format!("{key}={value:?}"));
        }
    }
    if forbidden.is_empty() {
        return None;
    }
    Violation::new(
        "seccompProfile",
        format!(
            "forbidden {} {}",
            pluralize("annotation", "annotations", forbidden.len()),
            forbidden.into_iter().collect::<Vec<_>>().join(", ")
        ),
    )
}

/// The seccomp profiles set to a type other than `RuntimeDefault` or `Localhost`: the
/// setters (`pod`, `containers "a"`), the bad types, and the containers that set none.
struct Seccomp {
    setters: Vec<String>,
    values: BTreeSet<String>,
    pod_set: bool,
    unset: Vec<String>,
}

fn seccomp(spec: &Value) -> Seccomp {
    let mut found = Seccomp {
        setters: Vec::new(),
        values: BTreeSet::new(),
        pod_set: false,
        unset: Vec::new(),
    };
    if let Some(profile) = pod_security(spec, "seccompProfile") {
        if valid_seccomp_type(profile) {
            found.pod_set = true;
        } else {
            found.setters.push("pod".to_owned());
            found.values.insert(text(profile.get("type")));
        }
    }
    let mut explicit = Vec::new();
    for c in containers(spec) {
        match security(c, "/seccompProfile") {
            Some(profile) if !valid_seccomp_type(profile) => {
                explicit.push(name_of(c));
                found.values.insert(text(profile.get("type")));
            }
            Some(_) => {}
            None => found.unset.push(name_of(c)),
        }
    }
    if !explicit.is_empty() {
        found.setters.push(named(&explicit));
    }
    found
}

fn seccomp_setters_violation(found: &Seccomp) -> Option<Violation> {
    Violation::new(
        "seccompProfile",
        format!(
            "{} must not set securityContext.seccompProfile.type to {}",
            found.setters.join(" and "),
            join_quote(&found.values)
        ),
    )
}

/// Baseline from v1.19: no profile of another type.
fn seccomp_baseline(_: &Value, spec: &Value) -> Option<Violation> {
    let found = seccomp(spec);
    if found.setters.is_empty() {
        return None;
    }
    seccomp_setters_violation(&found)
}

/// Restricted: a profile of `RuntimeDefault` or `Localhost` for every container.
fn seccomp_restricted(_: &Value, spec: &Value) -> Option<Violation> {
    let found = seccomp(spec);
    if !found.setters.is_empty() {
        return seccomp_setters_violation(&found);
    }
    if found.pod_set || found.unset.is_empty() {
        return None;
    }
    Violation::new(
        "seccompProfile",
        format!(
            "pod or {} must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\"",
            named(&found.unset)
        ),
    )
}

/// The sysctls baseline allows from v1.0.
const SYSCTLS_1_0: [&str; 5] = [
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_unprivileged_port_start",
];
/// Added in v1.27.
const SYSCTLS_1_27: [&str; 1] = ["net.ipv4.ip_local_reserved_ports"];
/// Added in v1.29.
const SYSCTLS_1_29: [&str; 4] = [
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
];
/// Added in v1.32.
const SYSCTLS_1_32: [&str; 2] = ["net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"];

fn sysctls_1_0(_: &Value, spec: &Value) -> Option<Violation> {
    sysctls(spec, &[&SYSCTLS_1_0])
}

fn sysctls_1_27(_: &Value, spec: &Value) -> Option<Violation> {
    sysctls(spec, &[&SYSCTLS_1_0, &SYSCTLS_1_27])
}

fn sysctls_1_29(_: &Value, spec: &Value) -> Option<Violation> {
    sysctls(spec, &[&SYSCTLS_1_0, &SYSCTLS_1_27, &SYSCTLS_1_29])
}

fn sysctls_1_32(_: &Value, spec: &Value) -> Option<Violation> {
    sysctls(
        spec,
        &[&SYSCTLS_1_0, &SYSCTLS_1_27, &SYSCTLS_1_29, &SYSCTLS_1_32],
    )
}

fn sysctls(spec: &Value, allowed: &[&[&str]]) -> Option<Violation> {
    let forbidden: Vec<String> = pod_security(spec, "sysctls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|sysctl| text(sysctl.get("name")))
        .filter(|name| !allowed.iter().any(|set| set.contains(&name.as_str())))
        .collect();
    if forbidden.is_empty() {
        return None;
    }
    Violation::new("forbidden sysctls", forbidden.join(", "))
}

fn windows_host_process(_: &Value, spec: &Value) -> Option<Violation> {
    let bad = bad_containers(spec, |c| {
        security(c, "/windowsOptions/hostProcess").and_then(Value::as_bool) == Some(true)
    });
    let mut setters = Vec::new();
    if pod_security(spec, "windowsOptions")
        .and_then(|w| w.get("hostProcess"))
        .and_then(Value::as_bool)
        == Some(true)
    {
        setters.push("pod".to_owned());
    }
    if !bad.is_empty() {
        setters.push(named(&bad));
    }
    if setters.is_empty() {
        return None;
    }
    Violation::new(
        "hostProcess",
        format!(
            "{} must not set securityContext.windowsOptions.hostProcess=true",
            setters.join(" and ")
        ),
    )
}

#[cfg(test)]
mod tests;

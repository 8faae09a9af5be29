//! ValidatingAdmissionPolicy (`admissionregistration.k8s.io/v1`), evaluated as kube-apiserver's
//! `ValidatingAdmissionPolicy` admission plugin evaluates it on every write
//! (`k8s.io/apiserver/pkg/admission/plugin/policy/validating`, `policy/matching`,
//! `admission/plugin/cel`). Pure: the caller gives the policies, the bindings, the request's
//! attributes and a [`Cluster`] to look namespaces and params up in.
//!
//! ## Guarantees
//! - **Exempt**: writes of the admission configuration kinds themselves
//!   (`validatingadmissionpolicies`, `...bindings`, the webhook configurations, the mutating
//!   policies and their bindings) are never evaluated (kube's
//!   `IsExemptAdmissionConfigurationResource`).
//! - **Matching**, as kube's `matching.Matcher`: the policy's `matchConstraints`, then each of
//!   its bindings' `matchResources` (none: every request the policy matches): the
//!   `namespaceSelector` (cluster-scoped objects but Namespaces always pass; a Namespace's own
//!   labels on its create and update), the `objectSelector` (the new or the old object's
//!   labels), `excludeResourceRules`, then `resourceRules` (`apiGroups`, `apiVersions`,
//!   `resources` with `*`, `res/sub`, `*/sub`, `res/*`, `*/*`; `operations`; `scope`;
//!   `resourceNames`); with `matchPolicy: Equivalent` another version of the same resource
//!   that a rule names matches too ([`Cluster::equivalents`]), and `request.kind` /
//!   `request.resource` are then the matched version's (the object is not converted: it is
//!   the request's version). A binding whose policy does not exist does nothing.
//! - **Params**: without `paramKind`, or a binding without `paramRef`, one evaluation with
//!   `params` null; else one evaluation per param found (`name`, or every object the
//!   `selector` selects, in the namespace of `paramRef.namespace`, else the request's, for a
//!   namespaced kind). None found: nothing is evaluated under `parameterNotFoundAction:
//!   Allow`, and under `Deny` the binding fails (kube's `no params found for policy binding
//!   with `Deny` parameterNotFoundAction`). A kind no served resource has is kube's
//!   `failed to find resource referenced by paramKind`.
//! - **Evaluation** of each policy-binding-param: `matchConditions` first (all true, else
//!   skipped; an error under `failurePolicy: Fail` denies), then each validation with kube's
//!   variables: `object` and `oldObject` (null on create, `object` null on delete, as kube),
//!   `request` (kind, resource, subResource, requestKind, requestResource,
//!   requestSubResource, name, namespace, operation, userInfo, dryRun, options),
//!   `params`, `namespaceObject` (null for cluster-scoped objects and Namespaces),
//!   `variables` (each evaluated once, when first used), and `authorizer` and
//!   `authorizer.requestResource` (kube's authorization library,
//!   [`crate::cel_rules::authz`], asking the caller's [`Authorizer`] as the request's user). A validation that is not `true`
//!   denies with `messageExpression`'s string (when it gives a non-empty one-line string of
//!   at most 5 KiB), else `message`, else `failed expression: <expression>`, and the
//!   `reason`'s code (Invalid 422 by default, Forbidden 403, Unauthorized 401,
//!   RequestEntityTooLarge 413). An evaluation error (`expression '<e>' resulted in error:
//!   ...`) denies under `failurePolicy: Fail` (the default) and is ignored under `Ignore`.
//! - **Actions**, the binding's `validationActions`: `Deny` refuses the write with kube's
//!   Status (`<resource> "<name>" is forbidden: ValidatingAdmissionPolicy '<p>' with binding
//!   '<b>' denied request: <message>`, the message also its one cause; the first denial in
//!   policy name, then binding name order); `Warn` adds kube's warning (`Validation failed for
//!   ValidatingAdmissionPolicy '<p>' with binding '<b>': <message>`); `Audit` is kube's audit
//!   annotation `validation.policy.admission.k8s.io/validation_failure` ([`admit_audited`]).
//! - **`auditAnnotations`**: each `valueExpression` is evaluated when the policy's validations
//!   are; a trimmed non-empty string is the audit annotation `<policy>/<key>`, an empty string
//!   or null none, another type or an error (`valueExpression '<e>' resulted in unsupported
//!   return type: <type>. Return type must be either string or null.`) denies under
//!   `failurePolicy: Fail`, as kube.
//! - **Bounded work**: every expression runs within the CRD rules' cost bound
//!   ([`crate::cel_rules::PER_CALL_LIMIT`] each: `operation cancelled: actual cost limit
//!   exceeded`), the validations, variables and messages of one evaluation share
//!   [`crate::cel_rules::RUNTIME_BUDGET`], the match conditions their own
//!   [`MATCH_CONDITIONS_BUDGET`] (kube's values); past a budget the evaluation is kube's
//!   error `validation failed due to running out of cost budget, no further validation rules
//!   will be run`, under the failure policy.
//!
//! ## Not here
//! - Without an [`Authorizer`] (the caller gives none: [`admit`]) an expression naming
//!   `authorizer` is skipped (its validation admits), as one calling a missing function.
//! - An expression stored before a function it calls was refused at write time (one kube's
//!   CEL environment does not declare) is skipped when it runs (its validation admits),
//!   never a refusal; every function kube 1.33 declares runs (see [`crate::cel_rules`]). A function
//!   kube's CEL environment does not declare at all (`startWith`, `foo`, `math.greatest`)
//!   refuses the policy when it is written, as kube ([`expression_errors`]).
//! - A `*/scale` write is evaluated on
//!   the parent object, not on an `autoscaling/v1` Scale; a variable's error fails the
//!   expressions that name it even where CEL's short-circuit would not have read it.

use std::cell::OnceCell;
use std::sync::Arc;

use cel::common::value::{CowVal, Val};
use cel::context::VariableResolver;
use cel::objects::Key;
use serde_json::{Map, Value, json};

use crate::cel_rules::authz::AuthorizerVal;
pub use crate::cel_rules::authz::{Authorizer, AuthzDecision, CheckTarget};
use crate::cel_rules::{
    self, Compiled, Declared, Failure, Metered, RUNTIME_BUDGET, Size, Sizes, lendable, max_of,
    measured, measured_cel, to_val,
};
use crate::error::ApiError;
use crate::label_selector::label_selector_matches;
use crate::resources::ResourceDef;

/// The cost all match conditions of one evaluation may reach together (kube's
/// `RuntimeCELCostBudgetMatchConditions`).
pub const MATCH_CONDITIONS_BUDGET: f64 = 2_500_000.0;

/// The longest `messageExpression` result used as a message (kube's
/// `MaxEvaluatedMessageExpressionSizeBytes`), in bytes.
const MESSAGE_BYTES_MAX: usize = cel_rules::MESSAGE_EXPRESSION_BYTES_MAX;

/// The admission configuration resources kube never evaluates policies on.
const EXEMPT: [&str; 6] = [
    "validatingwebhookconfigurations",
    "mutatingwebhookconfigurations",
    "validatingadmissionpolicies",
    "validatingadmissionpolicybindings",
    "mutatingadmissionpolicies",
    "mutatingadmissionpolicybindings",
];

/// A write's operation, as admission names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    /// A create.
    Create,
    /// An update, patch or apply of an existing object.
    Update,
    /// A delete.
    Delete,
    /// A connection (`exec`, `proxy`; none here writes).
    Connect,
}

impl Operation {
    /// `CREATE`, `UPDATE`, `DELETE`, `CONNECT`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
            Operation::Connect => "CONNECT",
        }
    }
}

/// What admission knows of a write (kube's `admission.Attributes`).
#[derive(Debug)]
pub struct Attributes<'a> {
    /// The resource written, at the version of the request.
    pub def: &'a ResourceDef,
    /// The subresource (`status`, `scale`), or empty.
    pub subresource: &'a str,
    /// The object's name.
    pub name: &'a str,
    /// The object's namespace; for a Namespace its own name (as kube's request info gives).
    pub namespace: &'a str,
    /// What the write does.
    pub operation: Operation,
    /// The object written (`None` on a delete).
    pub object: Option<&'a Value>,
    /// The object before (`None` on a create).
    pub old_object: Option<&'a Value>,
    /// `authentication/v1` `UserInfo` (`username`, `uid`, `groups`, `extra`).
    pub user: Value,
    /// `dryRun=All`.
    pub dry_run: bool,
    /// The options object (`CreateOptions`, `UpdateOptions`, `DeleteOptions`).
    pub options: Value,
}

/// Another version of a resource (for `matchPolicy: Equivalent`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Equivalent {
    /// The API group.
    pub group: String,
    /// The other version.
    pub version: String,
    /// The plural resource name.
    pub resource: String,
    /// The kind at that version.
    pub kind: String,
}

/// What the evaluation looks up (kube's listers).
pub trait Cluster {
    /// The Namespace `name`, if it exists.
    fn namespace(&self, name: &str) -> Option<Value>;
    /// Whether a served resource has objects of `api_version`/`kind`: `Some(namespaced)`.
    fn param_scope(&self, api_version: &str, kind: &str) -> Option<bool>;
    /// The objects of `api_version`/`kind` in `namespace` (empty for a cluster-scoped kind).
    fn params(&self, api_version: &str, kind: &str, namespace: &str) -> Vec<Value>;
    /// The other served versions of `group`/`resource`.
    fn equivalents(&self, group: &str, resource: &str) -> Vec<Equivalent>;
}

/// Whether writes of `def` are exempt from policies (kube's
/// `IsExemptAdmissionConfigurationResource`).
#[must_use]
pub fn is_exempt(def: &ResourceDef) -> bool {
    def.group == "admissionregistration.k8s.io" && EXEMPT.contains(&def.plural.as_str())
}

/// Evaluates every policy and its bindings on the write `attributes` describes; the
/// warnings of `Warn` bindings.
///
/// # Errors
/// The first denial of a `Deny` binding, as kube words it (see the module's guarantees);
/// 404 when the request's namespace does not exist.
pub fn admit(
    policies: &[Value],
    bindings: &[Value],
    attributes: &Attributes<'_>,
    cluster: &impl Cluster,
) -> Result<Vec<String>, ApiError> {
    admit_audited(
        policies,
        bindings,
        attributes,
        cluster,
        None,
        &mut Vec::new(),
    )
}

/// [`admit`], also collecting kube's audit annotations into `annotations` (whatever the
/// outcome, as kube adds them before it refuses): `validation.policy.admission.k8s.io/validation_failure`
/// for a failed validation of a binding with the `Audit` action (kube's JSON list
/// `[{"message","policy","binding","expressionIndex","validationActions"}]`; the first such
/// failure, as kube's admission attributes keep the first value of a key), and each policy's
/// `auditAnnotations` as `<policy>/<key>` (trimmed non-empty string values of at most 10 KiB,
/// a key's distinct values over bindings and params joined with `, `).
///
/// `authorizer` backs the `authorizer` variable (checks as the request's user); without it
/// an expression naming `authorizer` is skipped.
///
/// # Errors
/// As [`admit`].
pub fn admit_audited(
    policies: &[Value],
    bindings: &[Value],
    attributes: &Attributes<'_>,
    cluster: &impl Cluster,
    authorizer: Option<&Arc<dyn Authorizer>>,
    annotations: &mut Vec<(String, String)>,
) -> Result<Vec<String>, ApiError> {
    if is_exempt(attributes.def) || policies.is_empty() || bindings.is_empty() {
        return Ok(Vec::new());
    }
    let name_of = |object: &Value| text(object, "/metadata/name").to_owned();
    let mut policies: Vec<&Value> = policies.iter().collect();
    policies.sort_by_key(|p| name_of(p));
    let mut bindings: Vec<&Value> = bindings.iter().collect();
    bindings.sort_by_key(|b| name_of(b));
    let mut warnings = Vec::new();
    let mut denied: Option<Denial> = None;
    // Looked up and converted once, when a binding first matches.
    let namespace_object: OnceCell<Option<Value>> = OnceCell::new();
    let shared: OnceCell<Shared<'_>> = OnceCell::new();
    for policy in policies {
        let policy_name = text(policy, "/metadata/name");
        let ours: Vec<&Value> = bindings
            .iter()
            .copied()
            .filter(|b| text(b, "/spec/policyName") == policy_name)
            .collect();
        if ours.is_empty() {
            continue;
        }
        let fail = text(policy, "/spec/failurePolicy") != "Ignore";
        // kube's `auditAnnotationCollector`: each key's distinct values, over bindings.
        let mut collected: Vec<(String, Vec<String>)> = Vec::new();
        let mut deny = |message: String, reason: &str, binding: Option<&str>| {
            if denied.is_none() {
                denied = Some(Denial {
                    policy: policy_name.to_owned(),
                    binding: binding.map(str::to_owned),
                    message,
                    reason: reason.to_owned(),
                });
            }
        };
        let constraints = policy.pointer("/spec/matchConstraints");
        let matched = match constraints {
            Some(constraints) => matches(constraints, attributes, cluster),
            None => Ok(None),
        };
        let matched = match matched {
            Ok(Some(matched)) => matched,
            Ok(None) => continue,
            Err(error) => {
                if fail {
                    deny(format!("failed to configure policy: {error}"), "", None);
                }
                continue;
            }
        };
        let param_kind = policy.pointer("/spec/paramKind").filter(|k| k.is_object());
        let param_scope = match param_kind {
            Some(kind) => {
                let (api_version, kind_name) = (text(kind, "/apiVersion"), text(kind, "/kind"));
                match cluster.param_scope(api_version, kind_name) {
                    Some(namespaced) => Some(namespaced),
                    None => {
                        if fail {
                            let (group, version) =
                                api_version.rsplit_once('/').unwrap_or(("", api_version));
                            deny(
                                format!(
                                    "failed to configure policy: failed to find resource referenced by paramKind: '{group}/{version}, Kind={kind_name}'"
                                ),
                                "",
                                None,
                            );
                        }
                        continue;
                    }
                }
            }
            None => None,
        };
        for binding in ours {
            let binding_name = text(binding, "/metadata/name");
            let binding_match = match binding.pointer("/spec/matchResources") {
                Some(resources) if resources.is_object() => {
                    matches(resources, attributes, cluster).map(|m| m.is_some())
                }
                _ => Ok(true),
            };
            match binding_match {
                Ok(true) => {}
                Ok(false) => continue,
                Err(error) => {
                    if fail {
                        let message = format!("failed to configure binding: {error}");
                        deny(message, "", Some(binding_name));
                    }
                    continue;
                }
            }
            let params = match collect_params(
                param_kind.zip(param_scope),
                binding.pointer("/spec/paramRef").filter(|r| r.is_object()),
                attributes.namespace,
                cluster,
            ) {
                Ok(params) => params,
                Err(error) => {
                    if fail {
                        let message = format!("failed to configure binding: {error}");
                        deny(message, "", Some(binding_name));
                    }
                    continue;
                }
            };
            if namespace_object.get().is_none() {
                let _ = namespace_object.set(namespace_of(attributes, cluster)?);
            }
            let namespace = namespace_object.get().and_then(Option::as_ref);
            let shared = shared.get_or_init(|| Shared::new(attributes, namespace, authorizer));
            let actions: Vec<&str> = binding
                .pointer("/spec/validationActions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            for param in &params {
                let request = request_value(attributes, &matched);
                let (decisions, audited) =
                    Evaluation::new(policy, shared, &request, param.as_ref()).decisions(fail);
                for decision in decisions {
                    for action in &actions {
                        match *action {
                            "Deny" => deny(decision.message.clone(), &decision.reason, Some(binding_name)),
                            "Warn" => warnings.push(format!(
                                "Validation failed for ValidatingAdmissionPolicy '{policy_name}' with binding '{binding_name}': {}",
                                decision.message
                            )),
                            "Audit" => {
                                let key = VALIDATION_FAILURE_ANNOTATION;
                                if !annotations.iter().any(|(k, _)| k == key) {
                                    let value = validation_failure(
                                        &decision,
                                        policy_name,
                                        binding_name,
                                        &actions,
                                    );
                                    annotations.push((key.to_owned(), value));
                                }
                            }
                            _ => {}
                        }
                    }
                }
                for result in audited {
                    match result {
                        AuditAnnotation::Publish(key, value) => {
                            match collected.iter_mut().find(|(k, _)| *k == key) {
                                Some((_, values)) if values.contains(&value) => {}
                                Some((_, values)) => values.push(value),
                                None => collected.push((key, vec![value])),
                            }
                        }
                        AuditAnnotation::Error(message) => {
                            deny(message, "", Some(binding_name));
                        }
                    }
                }
            }
        }
        for (key, values) in collected {
            let key = format!("{policy_name}/{key}");
            if !annotations.iter().any(|(k, _)| *k == key) {
                annotations.push((key, values.join(", ")));
            }
        }
    }
    match denied {
        Some(denial) => Err(denial.error(attributes)),
        None => Ok(warnings),
    }
}

/// Whether a webhook's match criteria (`criteria` holds its `namespaceSelector`,
/// `objectSelector`, `matchPolicy` and, as `resourceRules`, its `rules`) select the request,
/// with the same matcher as policies; the resource it matched as.
///
/// # Errors
/// A selector that does not parse (kube's internal error).
pub(crate) fn matched_as(
    criteria: &Value,
    attributes: &Attributes<'_>,
    cluster: &impl Cluster,
) -> Result<Option<Equivalent>, String> {
    Ok(matches(criteria, attributes, cluster)?.map(|m| Equivalent {
        group: m.group,
        version: m.version,
        resource: m.resource,
        kind: m.kind,
    }))
}

/// `request` for the resource the request `matched` as (kube's `CreateAdmissionRequest`):
/// what a webhook's AdmissionReview and its match conditions see, without `uid`, `object`
/// and `oldObject`.
pub(crate) fn request_as(attributes: &Attributes<'_>, matched: &Equivalent) -> Value {
    request_value(
        attributes,
        &Matched {
            group: matched.group.clone(),
            version: matched.version.clone(),
            resource: matched.resource.clone(),
            kind: matched.kind.clone(),
        },
    )
}

/// A webhook's `matchConditions` on the request (kube's `matchconditions.Matcher`, in the
/// policies' CEL environment and budget): all true, one false, or the evaluation's error.
///
/// # Errors
/// The errors of the conditions that did not evaluate (none false).
pub(crate) fn conditions_hold(
    conditions: &Value,
    attributes: &Attributes<'_>,
    matched: &Equivalent,
) -> Result<bool, String> {
    let holder = json!({"spec": {"matchConditions": conditions}});
    let shared = Shared::new(attributes, None, None);
    let request = request_as(attributes, matched);
    Evaluation::new(&holder, &shared, &request, None).match_conditions()
}

/// The first denial.
struct Denial {
    policy: String,
    binding: Option<String>,
    message: String,
    /// The validation's `reason`; empty is Invalid.
    reason: String,
}

impl Denial {
    /// kube's `admission.NewForbidden` with the reason's code.
    fn error(self, attributes: &Attributes<'_>) -> ApiError {
        let message = match &self.binding {
            Some(binding) => format!(
                "ValidatingAdmissionPolicy '{}' with binding '{binding}' denied request: {}",
                self.policy, self.message
            ),
            None => format!(
                "ValidatingAdmissionPolicy '{}' denied request: {}",
                self.policy, self.message
            ),
        };
        let name = attributes
            .object
            .or(attributes.old_object)
            .map(|o| text(o, "/metadata/name"))
            .filter(|n| !n.is_empty())
            .unwrap_or(attributes.name);
        let mut error = ApiError::forbidden(attributes.def, name, &message);
        let reason = if self.reason.is_empty() {
            "Invalid"
        } else {
            self.reason.as_str()
        };
        error.reason = reason.to_owned();
        error.code = match reason {
            "Forbidden" => 403,
            "Unauthorized" => 401,
            "RequestEntityTooLarge" => 413,
            _ => 422,
        };
        if let Some(Value::Object(details)) = &mut error.details {
            details.insert("causes".to_owned(), json!([{"message": message}]));
        }
        error
    }
}

/// One decision that is not an admit: its message and reason.
struct Decision {
    message: String,
    reason: String,
    /// The validation's index in `spec.validations` (0 for a match condition's error).
    index: usize,
}

/// The audit annotation key of a failed validation with the `Audit` action.
pub const VALIDATION_FAILURE_ANNOTATION: &str =
    "validation.policy.admission.k8s.io/validation_failure";

/// kube's `maxAuditAnnotationValueLength`.
const AUDIT_ANNOTATION_VALUE_MAX: usize = 10 * 1024;

/// An `auditAnnotations` entry's outcome that is not an exclusion.
enum AuditAnnotation {
    /// Its key and (trimmed, bounded) value.
    Publish(String, String),
    /// Its evaluation error, under `failurePolicy: Fail` (a denial).
    Error(String),
}

/// A CEL value's type as cel-go names it (`bool`, `int`, `list`, ...).
fn cel_type_name(value: &cel::Value) -> &'static str {
    match value {
        cel::Value::List(_) => "list",
        cel::Value::Map(_) => "map",
        cel::Value::Int(_) => "int",
        cel::Value::UInt(_) => "uint",
        cel::Value::Float(_) => "double",
        cel::Value::String(_) => "string",
        cel::Value::Bytes(_) => "bytes",
        cel::Value::Bool(_) => "bool",
        cel::Value::Duration(_) => "google.protobuf.Duration",
        cel::Value::Timestamp(_) => "google.protobuf.Timestamp",
        cel::Value::Null => "null_type",
        _ => "object",
    }
}

/// kube's `validation_failure` value: `[{"message","policy","binding","expressionIndex",
/// "validationActions"}]`, in that order.
fn validation_failure(
    decision: &Decision,
    policy: &str,
    binding: &str,
    actions: &[&str],
) -> String {
    let quoted = |s: &str| serde_json::to_string(s).unwrap_or_default();
    let actions: Vec<String> = actions.iter().map(|a| quoted(a)).collect();
    format!(
        "[{{\"message\":{},\"policy\":{},\"binding\":{},\"expressionIndex\":{},\"validationActions\":[{}]}}]",
        quoted(&decision.message),
        quoted(policy),
        quoted(binding),
        decision.index,
        actions.join(",")
    )
}

pub(crate) fn text<'v>(value: &'v Value, pointer: &str) -> &'v str {
    value
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn strings<'v>(value: &'v Value, key: &str) -> Vec<&'v str> {
    value
        .get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

/// The resource and kind a policy matched the request as.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Matched {
    group: String,
    version: String,
    resource: String,
    kind: String,
}

impl Matched {
    fn of(def: &ResourceDef) -> Matched {
        Matched {
            group: def.group.clone(),
            version: def.version.clone(),
            resource: def.plural.clone(),
            kind: def.kind.clone(),
        }
    }
}

/// kube's `Matcher.Matches` for a policy's `matchConstraints` or a binding's
/// `matchResources`: what the request matched as, or `None`.
///
/// # Errors
/// A selector that does not parse (kube's internal error).
fn matches(
    criteria: &Value,
    attributes: &Attributes<'_>,
    cluster: &impl Cluster,
) -> Result<Option<Matched>, String> {
    let selector_error = |selector: &Value| {
        let operator = unknown_operator(selector);
        format!("Internal error occurred: \"{operator}\" is not a valid label selector operator")
    };
    let namespace_match = match namespace_labels(attributes, cluster) {
        None => Ok(true),
        Some(labels) => match criteria.get("namespaceSelector").filter(|s| s.is_object()) {
            None => Ok(true),
            Some(selector) => {
                label_selector_matches(selector, |k| labels.get(k).and_then(Value::as_str))
                    .ok_or_else(|| selector_error(selector))
            }
        },
    };
    if matches!(namespace_match, Ok(false)) {
        return Ok(None);
    }
    let object_match = match criteria.get("objectSelector").filter(|s| s.is_object()) {
        None => Ok(true),
        Some(selector) => {
            let matched = |object: Option<&Value>| {
                object.map(|o| {
                    let labels = o.pointer("/metadata/labels");
                    label_selector_matches(selector, |k| {
                        labels.and_then(|l| l.get(k)).and_then(Value::as_str)
                    })
                })
            };
            match (matched(attributes.object), matched(attributes.old_object)) {
                (Some(None), _) | (_, Some(None)) => Err(selector_error(selector)),
                (new, old) => Ok(new == Some(Some(true)) || old == Some(Some(true))),
            }
        }
    };
    if matches!(object_match, Ok(false)) {
        return Ok(None);
    }
    let equivalent = criteria.get("matchPolicy").and_then(Value::as_str) == Some("Equivalent");
    let excluded = criteria
        .get("excludeResourceRules")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if rules_match(excluded, equivalent, attributes, cluster).is_some() {
        return Ok(None);
    }
    let rules = criteria
        .get("resourceRules")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let matched = if rules.is_empty() {
        Some(Matched::of(attributes.def))
    } else {
        rules_match(rules, equivalent, attributes, cluster)
    };
    let Some(matched) = matched else {
        return Ok(None);
    };
    namespace_match?;
    object_match?;
    Ok(Some(matched))
}

/// The first `matchExpressions` operator kube does not know in `selector`.
fn unknown_operator(selector: &Value) -> String {
    crate::label_selector::selector_requirements(selector)
        .filter_map(|(_, operator, _)| operator)
        .find(|op| !matches!(*op, "In" | "NotIn" | "Exists" | "DoesNotExist"))
        .unwrap_or_default()
        .to_owned()
}

/// The labels a `namespaceSelector` is matched against, or `None` when it is not asked
/// (a cluster-scoped object that is not a Namespace); a namespace not found has no labels.
fn namespace_labels(
    attributes: &Attributes<'_>,
    cluster: &impl Cluster,
) -> Option<Map<String, Value>> {
    let is_namespace = attributes.def.group.is_empty() && attributes.def.plural == "namespaces";
    if attributes.namespace.is_empty() && !is_namespace {
        return None;
    }
    let labels_of = |object: &Value| {
        object
            .pointer("/metadata/labels")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default()
    };
    if is_namespace
        && attributes.subresource.is_empty()
        && matches!(attributes.operation, Operation::Create | Operation::Update)
        && let Some(object) = attributes.object
    {
        return Some(labels_of(object));
    }
    Some(
        cluster
            .namespace(attributes.namespace)
            .map(|n| labels_of(&n))
            .unwrap_or_default(),
    )
}

/// The first of `rules` the request matches (kube's `matchesResourceRules`), then with
/// `equivalent` the first another version of the resource matches.
fn rules_match(
    rules: &[Value],
    equivalent: bool,
    attributes: &Attributes<'_>,
    cluster: &impl Cluster,
) -> Option<Matched> {
    let own = Matched::of(attributes.def);
    if rules
        .iter()
        .any(|rule| rule_matches(rule, &own, attributes))
    {
        return Some(own);
    }
    if !equivalent {
        return None;
    }
    let others = cluster.equivalents(&attributes.def.group, &attributes.def.plural);
    rules.iter().find_map(|rule| {
        others.iter().find_map(|other| {
            let candidate = Matched {
                group: other.group.clone(),
                version: other.version.clone(),
                resource: other.resource.clone(),
                kind: other.kind.clone(),
            };
            (candidate != own && rule_matches(rule, &candidate, attributes)).then_some(candidate)
        })
    })
}

/// kube's `rules.Matcher` and the rule's `resourceNames`, for the request as `resource`.
fn rule_matches(rule: &Value, resource: &Matched, attributes: &Attributes<'_>) -> bool {
    let listed = |key: &str, value: &str| {
        strings(rule, key)
            .iter()
            .any(|item| *item == "*" || *item == value)
    };
    let operation = listed("operations", attributes.operation.as_str());
    let group = listed("apiGroups", &resource.group);
    let version = listed("apiVersions", &resource.version);
    let named = strings(rule, "resources").iter().any(|item| {
        let (res, sub) = item.split_once('/').unwrap_or((item, ""));
        (res == "*" || res == resource.resource) && (sub == "*" || sub == attributes.subresource)
    });
    let is_namespace = resource.group.is_empty() && resource.resource == "namespaces";
    let scope = match rule.get("scope").and_then(Value::as_str) {
        None | Some("*") => true,
        Some("Namespaced") => !is_namespace && !attributes.namespace.is_empty(),
        Some("Cluster") => is_namespace || attributes.namespace.is_empty(),
        Some(_) => false,
    };
    let names = strings(rule, "resourceNames");
    let name = names.is_empty() || names.contains(&attributes.name);
    operation && group && version && named && scope && name
}

/// The params of one binding (kube's `CollectParams`): `[None]` without a param kind or
/// reference.
///
/// # Errors
/// kube's configuration errors.
fn collect_params(
    kind: Option<(&Value, bool)>,
    reference: Option<&Value>,
    namespace: &str,
    cluster: &impl Cluster,
) -> Result<Vec<Option<Value>>, String> {
    let (Some((kind, namespaced)), Some(reference)) = (kind, reference) else {
        return Ok(vec![None]);
    };
    let (api_version, kind) = (text(kind, "/apiVersion"), text(kind, "/kind"));
    let reference_namespace = text(reference, "/namespace");
    let in_namespace = if namespaced {
        if !reference_namespace.is_empty() {
            reference_namespace
        } else if namespace.is_empty() {
            return Err(
                "cannot use namespaced paramRef in policy binding that matches cluster-scoped resources"
                    .to_owned(),
            );
        } else {
            namespace
        }
    } else {
        if !reference_namespace.is_empty() {
            return Err(
                "paramRef.namespace must not be provided for a cluster-scoped `paramKind`"
                    .to_owned(),
            );
        }
        ""
    };
    let name = text(reference, "/name");
    let candidates = cluster.params(api_version, kind, in_namespace);
    let found: Vec<Option<Value>> = if !name.is_empty() {
        candidates
            .into_iter()
            .filter(|p| text(p, "/metadata/name") == name)
            .map(Some)
            .collect()
    } else if let Some(selector) = reference.get("selector").filter(|s| s.is_object()) {
        let mut selected = Vec::new();
        for param in candidates {
            let labels = param.pointer("/metadata/labels");
            let matched = label_selector_matches(selector, |k| {
                labels.and_then(|l| l.get(k)).and_then(Value::as_str)
            });
            match matched {
                Some(true) => selected.push(Some(param)),
                Some(false) => {}
                None => {
                    return Err(format!(
                        "\"{}\" is not a valid label selector operator",
                        unknown_operator(selector)
                    ));
                }
            }
        }
        selected
    } else {
        return Err("one of name or selector must be provided".to_owned());
    };
    if found.is_empty() && text(reference, "/parameterNotFoundAction") == "Deny" {
        return Err(
            "no params found for policy binding with `Deny` parameterNotFoundAction".to_owned(),
        );
    }
    Ok(found)
}

/// `namespaceObject`: the request's Namespace as kube's `CreateNamespaceObject` keeps it
/// (metadata's identity, labels, annotations and finalizers, the spec and status); `None`
/// for a cluster-scoped object or a Namespace.
///
/// # Errors
/// 404 when the namespace does not exist.
fn namespace_of(
    attributes: &Attributes<'_>,
    cluster: &impl Cluster,
) -> Result<Option<Value>, ApiError> {
    let is_namespace = attributes.def.group.is_empty() && attributes.def.plural == "namespaces";
    if attributes.namespace.is_empty() || is_namespace {
        return Ok(None);
    }
    let namespace = cluster
        .namespace(attributes.namespace)
        .ok_or_else(|| ApiError::namespace_not_found(attributes.namespace))?;
    let mut metadata = Map::new();
    if let Some(Value::Object(meta)) = namespace.get("metadata") {
        for key in [
            "name",
            "generateName",
            "namespace",
            "uid",
            "resourceVersion",
            "generation",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "labels",
            "annotations",
            "finalizers",
        ] {
            if let Some(value) = meta.get(key) {
                metadata.insert(key.to_owned(), value.clone());
            }
        }
    }
    let mut kept = Map::new();
    kept.insert("metadata".to_owned(), Value::Object(metadata));
    for key in ["spec", "status"] {
        if let Some(value) = namespace.get(key) {
            kept.insert(key.to_owned(), value.clone());
        }
    }
    Ok(Some(Value::Object(kept)))
}

/// `request` (kube's `CreateAdmissionRequest`, as unstructured: empty optional fields left
/// out).
fn request_value(attributes: &Attributes<'_>, matched: &Matched) -> Value {
    let def = attributes.def;
    let mut request = Map::new();
    request.insert("uid".to_owned(), json!(""));
    request.insert(
        "kind".to_owned(),
        json!({"group": matched.group, "version": matched.version, "kind": matched.kind}),
    );
    request.insert(
        "resource".to_owned(),
        json!({"group": matched.group, "version": matched.version, "resource": matched.resource}),
    );
    request.insert(
        "requestKind".to_owned(),
        json!({"group": def.group, "version": def.version, "kind": def.kind}),
    );
    request.insert(
        "requestResource".to_owned(),
        json!({"group": def.group, "version": def.version, "resource": def.plural}),
    );
    if !attributes.subresource.is_empty() {
        request.insert("subResource".to_owned(), json!(attributes.subresource));
        request.insert(
            "requestSubResource".to_owned(),
            json!(attributes.subresource),
        );
    }
    if !attributes.name.is_empty() {
        request.insert("name".to_owned(), json!(attributes.name));
    }
    if !attributes.namespace.is_empty() {
        request.insert("namespace".to_owned(), json!(attributes.namespace));
    }
    request.insert("operation".to_owned(), json!(attributes.operation.as_str()));
    request.insert("userInfo".to_owned(), attributes.user.clone());
    request.insert("dryRun".to_owned(), json!(attributes.dry_run));
    request.insert("options".to_owned(), attributes.options.clone());
    Value::Object(request)
}

/// A variable's outcome, once evaluated.
enum Variable {
    Value(cel::Value),
    /// kube's `composited variable "x" fails to evaluate: ...`.
    Error(String),
    /// It calls a function this server does not have.
    Skip,
}

/// How one expression ended.
enum Outcome {
    Value(cel::Value),
    /// `expression '<e>' resulted in error: ...` (or another of kube's evaluation errors).
    Error(String),
    Skip,
    /// The evaluation's budget is spent: kube's error, no further expression.
    OutOfBudget,
}

const OUT_OF_BUDGET: &str =
    "validation failed due to running out of cost budget, no further validation rules will be run";

/// The variables every evaluation of one request shares (`object`, `oldObject`,
/// `namespaceObject`), converted and measured once.
struct Shared<'a> {
    roots: Vec<(&'static str, &'a Value)>,
    bound: Vec<(&'static str, Box<dyn Val>)>,
    data: Size,
}

const NULL: &Value = &Value::Null;

impl<'a> Shared<'a> {
    fn new(
        attributes: &Attributes<'a>,
        namespace: Option<&'a Value>,
        authorizer: Option<&Arc<dyn Authorizer>>,
    ) -> Shared<'a> {
        let roots: Vec<(&'static str, &'a Value)> = vec![
            ("object", attributes.object.unwrap_or(NULL)),
            ("oldObject", attributes.old_object.unwrap_or(NULL)),
            ("namespaceObject", namespace.unwrap_or(NULL)),
        ];
        let data = roots.iter().fold(measured(NULL), |size, (_, value)| {
            max_of(size, measured(value))
        });
        let mut bound: Vec<(&'static str, Box<dyn Val>)> = roots
            .iter()
            .map(|(name, value)| (*name, to_val(None, value, false)))
            .collect();
        if let Some(authorizer) = authorizer {
            // kube's `NewAuthorizerVal` and `NewResourceAuthorizerVal` of the request.
            let authorizer = AuthorizerVal::new(authorizer.clone(), attributes.user.clone());
            let request = authorizer.request_resource(CheckTarget::Resource {
                group: attributes.def.group.clone(),
                resource: attributes.def.plural.clone(),
                subresource: attributes.subresource.to_owned(),
                namespace: attributes.namespace.to_owned(),
                name: attributes.name.to_owned(),
            });
            bound.push(("authorizer.requestResource", request));
            bound.push(("authorizer", Box::new(authorizer)));
        }
        Shared { roots, bound, data }
    }
}

/// One policy-binding-param evaluation: the variables bound for it, the budget left.
struct Evaluation<'a> {
    policy: &'a Value,
    declared: Declared,
    shared: &'a Shared<'a>,
    /// The roots of the bound: the shared ones, `request` and `params`.
    roots: Vec<(&'static str, &'a Value)>,
    /// `request` and `params`, converted.
    bound: Vec<(&'static str, Box<dyn Val>)>,
    variables: Vec<(String, Variable)>,
    variables_value: Box<dyn Val>,
    data: Size,
    sizes: Sizes,
    /// The budget of the validations, their variables and messages.
    budget: f64,
    /// The match conditions' own budget.
    match_budget: f64,
    /// Whether the expressions run now are match conditions (charged to `match_budget`).
    matching: bool,
}

impl<'a> Evaluation<'a> {
    fn new(
        policy: &'a Value,
        shared: &'a Shared<'a>,
        request: &'a Value,
        params: Option<&'a Value>,
    ) -> Evaluation<'a> {
        let declared = if policy
            .pointer("/spec/paramKind")
            .is_some_and(Value::is_object)
        {
            Declared::AdmissionWithParams
        } else {
            Declared::Admission
        };
        let own = [("request", request), ("params", params.unwrap_or(NULL))];
        let data = own.iter().fold(shared.data, |size, (_, value)| {
            max_of(size, measured(value))
        });
        let bound = own
            .iter()
            .map(|(name, value)| (*name, to_val(None, value, false)))
            .collect();
        let mut roots = shared.roots.clone();
        roots.extend(own);
        Evaluation {
            policy,
            declared,
            shared,
            roots,
            bound,
            variables: Vec::new(),
            variables_value: lendable(empty_map()),
            data,
            sizes: Sizes::new(),
            budget: RUNTIME_BUDGET,
            match_budget: MATCH_CONDITIONS_BUDGET,
            matching: false,
        }
    }

    /// The validations' decisions that are not admits (kube's `validator.Validate`), the
    /// match conditions first, and the outcomes of the `auditAnnotations` (when the match
    /// conditions hold and the budget lasts).
    fn decisions(mut self, fail: bool) -> (Vec<Decision>, Vec<AuditAnnotation>) {
        let error = |message: String, index: usize| Decision {
            message,
            reason: String::new(),
            index,
        };
        match self.match_conditions() {
            Ok(true) => {}
            Ok(false) => return (Vec::new(), Vec::new()),
            Err(message) => {
                return if fail {
                    (vec![error(message, 0)], Vec::new())
                } else {
                    (Vec::new(), Vec::new())
                };
            }
        }
        let validations = self
            .policy
            .pointer("/spec/validations")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let mut decisions = Vec::new();
        for (index, validation) in validations.iter().enumerate() {
            let expression = text(validation, "/expression");
            match self.expression(expression) {
                Outcome::Value(cel::Value::Bool(true)) | Outcome::Skip => {}
                Outcome::Value(_) => {
                    let message = self.message(validation);
                    decisions.push(Decision {
                        message,
                        reason: text(validation, "/reason").to_owned(),
                        index,
                    });
                }
                Outcome::Error(message) => {
                    if fail {
                        decisions.push(error(message, index));
                    }
                }
                Outcome::OutOfBudget => {
                    return if fail {
                        (vec![error(OUT_OF_BUDGET.to_owned(), index)], Vec::new())
                    } else {
                        (Vec::new(), Vec::new())
                    };
                }
            }
        }
        let audited = self.audit_annotations(fail);
        (decisions, audited)
    }

    /// kube's audit annotation results: a trimmed non-empty string is published (cut at
    /// 10 KiB), an empty one or null excluded, another type or an error is an error under
    /// `failurePolicy: Fail` (excluded under `Ignore`).
    fn audit_annotations(&mut self, fail: bool) -> Vec<AuditAnnotation> {
        let entries = self
            .policy
            .pointer("/spec/auditAnnotations")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let mut results = Vec::new();
        for entry in &entries {
            let key = text(entry, "/key").to_owned();
            let expression = text(entry, "/valueExpression");
            let failed = match self.expression(expression) {
                Outcome::Value(cel::Value::String(value)) => {
                    let mut value = value.trim().to_owned();
                    if !value.is_empty() {
                        if value.len() > AUDIT_ANNOTATION_VALUE_MAX {
                            let mut cut = AUDIT_ANNOTATION_VALUE_MAX;
                            while !value.is_char_boundary(cut) {
                                cut -= 1;
                            }
                            value.truncate(cut);
                        }
                        results.push(AuditAnnotation::Publish(key, value));
                    }
                    continue;
                }
                Outcome::Value(cel::Value::Null) | Outcome::Skip => continue,
                Outcome::Value(other) => format!(
                    "valueExpression '{expression}' resulted in unsupported return type: {}. Return type must be either string or null.",
                    cel_type_name(&other)
                ),
                Outcome::Error(message) => message,
                Outcome::OutOfBudget => OUT_OF_BUDGET.to_owned(),
            };
            if fail {
                results.push(AuditAnnotation::Error(failed));
            }
        }
        results
    }

    /// The match conditions: all true (`Ok(true)`), one false, or the errors (kube's
    /// aggregate).
    fn match_conditions(&mut self) -> Result<bool, String> {
        let conditions = self
            .policy
            .pointer("/spec/matchConditions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let mut errors = Vec::new();
        self.matching = true;
        for condition in &conditions {
            let outcome = self.expression(text(condition, "/expression"));
            match outcome {
                Outcome::Value(cel::Value::Bool(false)) => {
                    self.matching = false;
                    return Ok(false);
                }
                Outcome::Value(cel::Value::Bool(true)) | Outcome::Skip => {}
                Outcome::Value(_) => {}
                Outcome::Error(message) => errors.push(message),
                Outcome::OutOfBudget => {
                    self.matching = false;
                    return Err(OUT_OF_BUDGET.to_owned());
                }
            }
        }
        self.matching = false;
        match errors.len() {
            0 => Ok(true),
            1 => Err(errors.remove(0)),
            _ => Err(format!("[{}]", errors.join(", "))),
        }
    }

    /// A failed validation's message: `messageExpression`'s, else `message`, else
    /// `failed expression: <expression>`.
    fn message(&mut self, validation: &Value) -> String {
        let message_expression = text(validation, "/messageExpression");
        if !message_expression.trim().is_empty() {
            let outcome = self.expression(message_expression);
            if let Outcome::Value(cel::Value::String(s)) = outcome {
                let trimmed = s.trim();
                if !trimmed.is_empty()
                    && trimmed.len() <= MESSAGE_BYTES_MAX
                    && !trimmed.contains('\n')
                {
                    return trimmed.to_owned();
                }
            }
        }
        let message = text(validation, "/message").trim();
        if !message.is_empty() {
            return message.to_owned();
        }
        format!(
            "failed expression: {}",
            text(validation, "/expression").trim()
        )
    }

    /// Evaluates `expression` (the variables it reads first).
    fn expression(&mut self, expression: &str) -> Outcome {
        let compiled = match cel_rules::compile_in(expression, self.declared) {
            Ok(compiled) => compiled,
            Err(error) => {
                return Outcome::Error(format!("compilation error: compilation failed: {error}"));
            }
        };
        let wanted = cel_rules::variables_selected(&compiled);
        if let Some(stop) = self.variables_for(wanted.as_deref()) {
            return match stop {
                Variable::Error(message) => Outcome::Error(format!(
                    "expression '{expression}' resulted in error: {message}"
                )),
                Variable::Skip => Outcome::Skip,
                Variable::Value(_) => Outcome::OutOfBudget,
            };
        }
        match self.run(&compiled) {
            Ok(value) => Outcome::Value(value),
            Err(Failure::Skip) => Outcome::Skip,
            Err(Failure::Budget | Failure::Stop(_)) => Outcome::OutOfBudget,
            Err(Failure::CallLimit) => Outcome::Error(format!(
                "expression '{expression}' resulted in error: operation cancelled: actual cost limit exceeded"
            )),
            Err(Failure::Error(message)) => Outcome::Error(format!(
                "expression '{expression}' resulted in error: {}",
                message.unwrap_or_else(|| "no such overload".to_owned())
            )),
        }
    }

    /// Runs `compiled` on the evaluation's variables, charged to the budget in use.
    fn run(&mut self, compiled: &Compiled) -> Result<cel::Value, Failure> {
        let budget = if self.matching {
            &mut self.match_budget
        } else {
            &mut self.budget
        };
        let metered = Metered {
            data: self.data,
            roots: &self.roots,
            resolver: &Resolver {
                bound: &self.bound,
                shared: &self.shared.bound,
                variables: self.variables_value.as_ref(),
            },
        };
        cel_rules::run(compiled, &metered, budget, &mut self.sizes)
    }

    /// Evaluates the variables `wanted` (all when `None`) not evaluated yet, in their order
    /// (a variable reads only those before it); the first of them that failed, or
    /// `Some(Variable::Value(_))` when the budget ran out.
    fn variables_for(&mut self, wanted: Option<&[String]>) -> Option<Variable> {
        let declared = self
            .policy
            .pointer("/spec/variables")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        // The variables needed: the wanted ones and, transitively, those they read.
        let mut needed: Vec<String> = match wanted {
            Some(wanted) => wanted.to_vec(),
            None => declared
                .iter()
                .map(|v| text(v, "/name").to_owned())
                .collect(),
        };
        for variable in declared.iter().rev() {
            let name = text(variable, "/name");
            if !needed.iter().any(|n| n == name) {
                continue;
            }
            if let Ok(compiled) =
                cel_rules::compile_in(text(variable, "/expression"), self.declared)
            {
                match cel_rules::variables_selected(&compiled) {
                    Some(reads) => needed.extend(reads),
                    None => needed.extend(declared.iter().map(|v| text(v, "/name").to_owned())),
                }
            }
        }
        for variable in &declared {
            let name = text(variable, "/name");
            if !needed.iter().any(|n| n == name) || self.variables.iter().any(|(n, _)| n == name) {
                continue;
            }
            let outcome = match cel_rules::compile_in(text(variable, "/expression"), self.declared)
            {
                Err(error) => Variable::Error(format!(
                    "composited variable \"{name}\" fails to compile: compilation failed: {error}"
                )),
                Ok(compiled) => match self.run(&compiled) {
                    Ok(value) => Variable::Value(value),
                    Err(Failure::Skip) => Variable::Skip,
                    Err(Failure::Budget | Failure::Stop(_)) => {
                        return Some(Variable::Value(cel::Value::Null));
                    }
                    Err(Failure::CallLimit) => Variable::Error(format!(
                        "composited variable \"{name}\" fails to evaluate: operation cancelled: actual cost limit exceeded"
                    )),
                    Err(Failure::Error(message)) => Variable::Error(format!(
                        "composited variable \"{name}\" fails to evaluate: {}",
                        message.unwrap_or_else(|| "no such overload".to_owned())
                    )),
                },
            };
            if let Variable::Value(value) = &outcome {
                self.data = max_of(self.data, measured_cel(value));
            }
            self.variables.push((name.to_owned(), outcome));
            self.variables_value = lendable(self.variables_map());
        }
        let wanted_names: Vec<&str> = match wanted {
            Some(wanted) => wanted.iter().map(String::as_str).collect(),
            None => self.variables.iter().map(|(n, _)| n.as_str()).collect(),
        };
        self.variables
            .iter()
            .filter(|(name, _)| wanted_names.contains(&name.as_str()))
            .find_map(|(_, outcome)| match outcome {
                Variable::Error(message) => Some(Variable::Error(message.clone())),
                Variable::Skip => Some(Variable::Skip),
                Variable::Value(_) => None,
            })
    }

    /// `variables`: the map of the variables evaluated so far.
    fn variables_map(&self) -> cel::Value {
        let map = self
            .variables
            .iter()
            .filter_map(|(name, outcome)| match outcome {
                Variable::Value(value) => {
                    Some((Key::String(Arc::new(name.clone())), value.clone()))
                }
                _ => None,
            })
            .collect();
        cel::Value::Map(cel::objects::Map { map: Arc::new(map) })
    }
}

fn empty_map() -> cel::Value {
    cel::Value::Map(cel::objects::Map {
        map: Arc::new(std::collections::HashMap::new()),
    })
}

/// The variables of one evaluation, lent to each expression.
struct Resolver<'r> {
    bound: &'r [(&'static str, Box<dyn Val>)],
    shared: &'r [(&'static str, Box<dyn Val>)],
    variables: &'r dyn Val,
}

impl VariableResolver for Resolver<'_> {
    fn resolve<'b>(&'b self, variable: &str) -> Option<CowVal<'b, 'b>> {
        if variable == "variables" {
            return Some(CowVal::Borrowed(self.variables));
        }
        self.bound
            .iter()
            .chain(self.shared)
            .find(|(name, _)| *name == variable)
            .map(|(_, value)| CowVal::Borrowed(value.as_ref()))
    }
}

/// The expression errors of a policy, as kube's `ValidateValidatingAdmissionPolicy` reports
/// them, in kube's order: each `expression` of `matchConditions`, `variables` and
/// `validations`, each `messageExpression` and `auditAnnotations[].valueExpression`, that does
/// not compile in the policy's environment (`params` only with a `paramKind`; `variables.x`
/// only for a variable declared before, and `variables` not in a match condition; `authorizer`
/// not in a message expression; only functions kube declares: `undeclared reference
/// to 'startWith' (in container '')`, see [`crate::cel_rules`]), has a type error, or
/// certainly gives no `bool` (a validation, a match condition) or `string` (a message
/// expression), as far as the type check can be sure
/// (`object`, `params` and the variables are of unknown type, as kube's `dyn`; kube also
/// refuses a `dyn` result, this check does not), as `(path, expression, detail)`. A match
/// condition and an annotation's `valueExpression` are compiled trimmed, as kube compiles them
/// (their positions count from the first non-blank character; the match condition is shown
/// trimmed).
#[must_use]
pub fn expression_errors(policy: &Value) -> Vec<(String, String, String)> {
    let params = policy
        .pointer("/spec/paramKind")
        .is_some_and(Value::is_object);
    let (declared, in_condition, in_message) = if params {
        (
            Declared::AdmissionWithParams,
            Declared::ConditionWithParams,
            Declared::MessageWithParams,
        )
    } else {
        (Declared::Admission, Declared::Condition, Declared::Message)
    };
    let mut errors = Vec::new();
    // kube compiles a match condition and an annotation's value trimmed (so its positions
    // count from the first non-blank character), the others as written; the error shows the
    // match condition trimmed, the others as written.
    let mut check = |path: String,
                     written: &str,
                     (trimmed, declared): (bool, Declared),
                     variables: &[&str],
                     wanted: Option<cel_rules::Expression>| {
        let expression = if trimmed { written.trim() } else { written };
        if expression.trim().is_empty() {
            return;
        }
        let detail = match cel_rules::compile_in(expression, declared) {
            Err(error) => Some(format!("compilation failed: {error}")),
            Ok(compiled) => cel_rules::undefined_variable(expression, &compiled, variables)
                .map(|error| format!("compilation failed: {error}"))
                .or_else(|| cel_rules::admission_type_error(expression, &compiled, wanted)),
        };
        if let Some(detail) = detail {
            let shown = if path.starts_with("spec.matchConditions") {
                expression
            } else {
                written
            };
            errors.push((path, shown.to_owned(), detail));
        }
    };
    let list = |key: &str| {
        policy
            .pointer(&format!("/spec/{key}"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let variables = list("variables");
    let names: Vec<&str> = variables.iter().map(|v| text(v, "/name")).collect();
    // kube's order: the match conditions, the variables, the validations, the annotations.
    for (index, condition) in list("matchConditions").iter().enumerate() {
        check(
            format!("spec.matchConditions[{index}].expression"),
            text(condition, "/expression"),
            (true, in_condition),
            &[],
            Some(cel_rules::Expression::Rule),
        );
    }
    for (index, variable) in variables.iter().enumerate() {
        check(
            format!("spec.variables[{index}].expression"),
            text(variable, "/expression"),
            (false, declared),
            &names[..index],
            None,
        );
    }
    for (index, validation) in list("validations").iter().enumerate() {
        check(
            format!("spec.validations[{index}].expression"),
            text(validation, "/expression"),
            (false, declared),
            &names,
            Some(cel_rules::Expression::Rule),
        );
        check(
            format!("spec.validations[{index}].messageExpression"),
            text(validation, "/messageExpression"),
            (false, in_message),
            &names,
            Some(cel_rules::Expression::Message),
        );
    }
    for (index, annotation) in list("auditAnnotations").iter().enumerate() {
        check(
            format!("spec.auditAnnotations[{index}].valueExpression"),
            text(annotation, "/valueExpression"),
            (true, declared),
            &names,
            None,
        );
    }
    errors
}

#[cfg(test)]
#[path = "admission_policy_tests.rs"]
mod tests;

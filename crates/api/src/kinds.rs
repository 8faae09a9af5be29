//! The strategies of the kinds served since Kubernetes' storage, node, admission-policy and
//! flow-control groups joined the built-ins: RuntimeClass, CSIDriver, CSINode,
//! VolumeAttachment, CSIStorageCapacity, ControllerRevision, ValidatingAdmissionPolicy,
//! ValidatingAdmissionPolicyBinding, FlowSchema and PriorityLevelConfiguration; and the
//! validation of other built-in kinds by area, each module saying what it checks and what not:
//! `workloads`, `apps` (the workloads' strategies), `webhooks`, `autoscaling`, `policy`,
//! `batch`, `storage`, `persistent_volumes`, `limit_range`, `nodes` (and Endpoints),
//! `discovery`, `networking`, `coordination`, `rbac`, `services`, `namespaces`, `quota`
//! (ResourceQuotas), `events` (core and `events.k8s.io/v1`); and `status`, the rules of
//! `status` subresource writes ([`validate_status`]).
//!
//! ## Guarantees
//! - Defaults ([`apply_defaults`]) are those of kube's `pkg/apis/{storage,admissionregistration,
//!   flowcontrol}/v1/defaults.go` that need more than a fixed path (pointer structs, which exist
//!   only when sent, and zero values Go cannot tell from absent); the fixed ones are rows of
//!   [`crate::defaults::DEFAULTS`]. Like every default, they only fill what is absent.
//! - The `status` subresource's rules ([`has_status_rules`]): VolumeAttachments,
//!   ValidatingAdmissionPolicies, FlowSchemas, PriorityLevelConfigurations, ServiceCIDRs and
//!   APIServices are created without a status, and Deployments, ReplicaSets, StatefulSets, DaemonSets, Jobs, CronJobs,
//!   ReplicationControllers, PodDisruptionBudgets and Ingresses with their empty one
//!   ([`created_status`]); all keep their stored status on writes to the main endpoint and keep
//!   everything but the status on writes to `/status` (kube's strategies' `PrepareForCreate` /
//!   `PrepareForUpdate`). (Pods, Services, Nodes and Namespaces keep a status the client sends:
//!   this server has no kubelet or controllers to set it.)
//! - Validation ([`validate`]) is the cheap, common part of kube's `validation` packages for
//!   these kinds, with kube's paths and wording (kube's own spellings included, e.g.
//!   CSIDriver's `spec.attachedRequired` and the binding's `spec.matchResouces`): required
//!   fields, enumerations, DNS names, the immutable fields, the flow schemas' subjects and
//!   rules, and the fixed specs of API Priority and Fairness' mandatory objects
//!   ([`mandatory_flow_schema_spec`], [`mandatory_priority_level_spec`], which the server's
//!   bootstrap also creates them from). A ValidatingAdmissionPolicy's CEL expressions must
//!   compile and type-check as far as the CRD rules' check is sure
//!   ([`crate::admission_policy::expression_errors`]). Not checked:
//!   label selectors,
//!   tolerations, resource quantities' ranges and PersistentVolume specs inside
//!   VolumeAttachments.
//! - [`validate`] also dispatches to the per-group modules of the other built-in kinds
//!   (`autoscaling`, `policy`, `batch`, `storage`, `limit_range`, `nodes`, `discovery`,
//!   `networking`, `coordination`, `rbac`, [`services`], `namespaces`, `quota`, `events`;
//!   their docs say what each checks), after the core and workload rules of [`workloads`].
//! - Where kube prints a Go struct as the invalid value (`%#v` of an internal type, pointers
//!   included), the value here is the JSON of the field: the message's wording after the value is
//!   kube's. Pod updates' node selector and node selector terms are the exception: they print
//!   as Go's `%#v` does.
//! - Pod updates ([`validate_pod_update`]) follow kube's `ValidatePodUpdate`: only images, a
//!   lower `activeDeadlineSeconds`, added tolerations and removed scheduling gates change; a
//!   pod whose stored spec still has a scheduling gate may also add `nodeSelector` keys and
//!   change its node affinity within kube's limits (only additions to the required terms).

use serde_json::{Map, Value, json};

use crate::error::ApiError;
use crate::field::{Cause, forbidden, go_string, required};
use crate::names::{validate_dns1123_label, validate_dns1123_subdomain};
use crate::resources::{ResourceDef, lookup};
use common::{
    duplicate, fill, go_value, invalid, invalid_printed, items, not_supported, present, text,
};

/// kube's system PriorityClasses (`SystemPriorityClasses`): name, value, description. A
/// server bootstraps them; no other class may take the `system-` prefix, and none may pass
/// [`HIGHEST_USER_DEFINABLE_PRIORITY`].
pub const SYSTEM_PRIORITY_CLASSES: [(&str, i64, &str); 2] = [
    (
        "system-node-critical",
        2_000_001_000,
        "Used for system critical pods that must not be moved from their current node.",
    ),
    (
        "system-cluster-critical",
        2_000_000_000,
        "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary.",
    ),
];

/// kube's `HighestUserDefinablePriority`.
pub const HIGHEST_USER_DEFINABLE_PRIORITY: i64 = 1_000_000_000;

fn is(def: &ResourceDef, group: &str, kind: &str) -> bool {
    def.is_builtin() && def.group == group && def.kind == kind
}

/// Whether writes of `def` follow the `status` subresource's rules (see the module's
/// guarantees).
#[must_use]
pub fn has_status_rules(def: &ResourceDef) -> bool {
    created_status(def).is_some()
        || is(def, "storage.k8s.io", "VolumeAttachment")
        || is(
            def,
            "admissionregistration.k8s.io",
            "ValidatingAdmissionPolicy",
        )
        || is(def, "flowcontrol.apiserver.k8s.io", "FlowSchema")
        || is(def, "networking.k8s.io", "ServiceCIDR")
        || is(def, "apiregistration.k8s.io", "APIService")
        || is(
            def,
            "flowcontrol.apiserver.k8s.io",
            "PriorityLevelConfiguration",
        )
}

/// Whether a write of `def` to its main endpoint keeps the stored status, outside
/// [`has_status_rules`]' kinds: kube-apiserver's strategies for Pods, Nodes, Namespaces,
/// PersistentVolumes, PersistentVolumeClaims and HorizontalPodAutoscalers set
/// `newX.Status = oldX.Status` in `PrepareForUpdate` (Services and ResourceQuotas keep theirs
/// in their own write paths).
#[must_use]
pub fn main_endpoint_keeps_status(def: &ResourceDef) -> bool {
    matches!(
        (def.group.as_str(), def.kind.as_str()),
        (
            "",
            "Pod" | "Node" | "Namespace" | "PersistentVolume" | "PersistentVolumeClaim"
        ) | ("autoscaling", "HorizontalPodAutoscaler")
    )
}

/// A write of `def` (one of [`has_status_rules`]' kinds, or a CertificateSigningRequest) as
/// kube's strategies prepare it: the main endpoint keeps the stored status (none on create);
/// the `status` endpoint keeps the stored spec and takes the rest as written, as each kind's
/// status strategy does (`newJob.Spec = oldJob.Spec`): its labels, annotations, finalizers
/// and owner references too, but a Deployment's labels (`deploymentStatusStrategy` keeps
/// them) and the generation, which only a change of the spec moves. The kinds whose status
/// strategy keeps the whole stored metadata (`ResetObjectMetaForStatus` or a copy of it:
/// FlowSchemas, PriorityLevelConfigurations, VolumeAttachments, ValidatingAdmissionPolicies;
/// APIServices, whose `apiServerStatusStrategy` keeps the labels, annotations, finalizers and
/// owner references) keep all but the status and the managed fields ([`crate::crd::status_rules`], a custom
/// resource's rule).
#[must_use]
pub fn status_rules(
    def: &ResourceDef,
    subresource: &str,
    old: Option<&Value>,
    new: Value,
) -> Value {
    let keeps_metadata = is(def, "flowcontrol.apiserver.k8s.io", "FlowSchema")
        || is(
            def,
            "flowcontrol.apiserver.k8s.io",
            "PriorityLevelConfiguration",
        )
        || is(def, "storage.k8s.io", "VolumeAttachment")
        || is(
            def,
            "admissionregistration.k8s.io",
            "ValidatingAdmissionPolicy",
        )
        || is(def, "apiregistration.k8s.io", "APIService");
    let Some(old) = old.filter(|_| subresource == "status" && !keeps_metadata) else {
        return crate::crd::status_rules(subresource, old, new);
    };
    let mut new = crate::crd::spec_kept(old, new);
    if is(def, "apps", "Deployment")
        && let Some(meta) = new.get_mut("metadata").and_then(Value::as_object_mut)
    {
        match old.pointer("/metadata/labels") {
            Some(labels) => meta.insert("labels".to_owned(), labels.clone()),
            None => meta.remove("labels"),
        };
    }
    new
}

/// The status a workload kind's object is created with (its strategy's `PrepareForCreate`
/// resets it to the empty Go struct: [`crate::protobuf::gostruct::zero_field`], the fields
/// without `omitempty`, `{"replicas": 0}` for a ReplicaSet), for the workload kinds (and
/// APIServices, `{}`) whose writes follow the `status` subresource's rules as kube's
/// strategies (`PrepareForUpdate`) apply them; `None` for the others.
#[must_use]
pub fn created_status(def: &ResourceDef) -> Option<Value> {
    let created_empty = matches!(
        (def.group.as_str(), def.kind.as_str()),
        (
            "apps",
            "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet"
        ) | ("batch", "Job" | "CronJob")
            | ("", "ReplicationController")
            | ("policy", "PodDisruptionBudget")
            | ("networking.k8s.io", "Ingress")
            | ("apiregistration.k8s.io", "APIService")
    );
    if !created_empty {
        return None;
    }
    crate::protobuf::gostruct::zero_field(def, "status")
}

/// Whether kube-apiserver keeps `metadata.generation` for `def` among these kinds (the
/// admission policies and their bindings, the flow-control kinds: 1 on create; CSIDrivers:
/// none on create, see [`generation_starts_at_zero`]), one more on every change of the spec.
#[must_use]
pub fn keeps_generation(def: &ResourceDef) -> bool {
    matches!(
        (def.group.as_str(), def.kind.as_str()),
        (
            "admissionregistration.k8s.io",
            "ValidatingAdmissionPolicy" | "ValidatingAdmissionPolicyBinding"
        ) | (
            "flowcontrol.apiserver.k8s.io",
            "FlowSchema" | "PriorityLevelConfiguration"
        ) | ("storage.k8s.io", "CSIDriver")
    )
}

/// Whether a kind that keeps its generation is created without one (Go's zero, left out):
/// kube's CSIDriver strategy only bumps it when the spec changes (`PrepareForUpdate`), so its
/// first spec change makes it 1.
#[must_use]
pub fn generation_starts_at_zero(def: &ResourceDef) -> bool {
    is(def, "storage.k8s.io", "CSIDriver")
}

fn map_at<'a>(object: &'a mut Value, path: &str) -> Option<&'a mut Map<String, Value>> {
    path.split('.')
        .try_fold(object, |value, key| value.get_mut(key))
        .and_then(Value::as_object_mut)
}

/// `SetDefaults_MatchResources` and `SetDefaults_Rule` on a `MatchResources` that was sent.
fn match_resources_defaults(resources: &mut Map<String, Value>) {
    fill(resources, "matchPolicy", json!("Equivalent"));
    fill(resources, "namespaceSelector", json!({}));
    fill(resources, "objectSelector", json!({}));
    for key in ["resourceRules", "excludeResourceRules"] {
        if let Some(Value::Array(rules)) = resources.get_mut(key) {
            for rule in rules.iter_mut().filter_map(Value::as_object_mut) {
                fill(rule, "scope", json!("*"));
            }
        }
    }
}

/// The defaults of these kinds that depend on what was sent (see the module's guarantees).
pub fn apply_defaults(def: &ResourceDef, object: &mut Value) {
    match (def.group.as_str(), def.kind.as_str()) {
        ("storage.k8s.io", "CSIDriver") => {
            if let Some(spec) = map_at(object, "spec")
                && spec.get("volumeLifecycleModes").is_none_or(|modes| {
                    modes.is_null() || modes.as_array().is_some_and(Vec::is_empty)
                })
            {
                spec.insert("volumeLifecycleModes".into(), json!(["Persistent"]));
            }
        }
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy") => {
            if let Some(resources) = map_at(object, "spec.matchConstraints") {
                match_resources_defaults(resources);
            }
        }
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding") => {
            if let Some(resources) = map_at(object, "spec.matchResources") {
                match_resources_defaults(resources);
            }
        }
        ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration") => {
            webhooks::defaults(object, false);
        }
        ("admissionregistration.k8s.io", "MutatingWebhookConfiguration") => {
            webhooks::defaults(object, true);
        }
        ("flowcontrol.apiserver.k8s.io", "FlowSchema") => {
            if let Some(spec) = map_at(object, "spec") {
                let unset = spec
                    .get("matchingPrecedence")
                    .is_none_or(|p| p.is_null() || p.as_i64() == Some(0));
                if unset {
                    spec.insert("matchingPrecedence".into(), json!(1000));
                }
            }
        }
        ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration") => {
            if let Some(exempt) = map_at(object, "spec.exempt") {
                fill(exempt, "nominalConcurrencyShares", json!(0));
                fill(exempt, "lendablePercent", json!(0));
            }
            if let Some(limited) = map_at(object, "spec.limited") {
                fill(limited, "nominalConcurrencyShares", json!(30));
                fill(limited, "lendablePercent", json!(0));
            }
            if let Some(queuing) = map_at(object, "spec.limited.limitResponse.queuing") {
                for (key, default) in [("handSize", 8), ("queues", 64), ("queueLengthLimit", 50)] {
                    if queuing
                        .get(key)
                        .is_none_or(|v| v.is_null() || v.as_i64() == Some(0))
                    {
                        queuing.insert(key.to_owned(), json!(default));
                    }
                }
            }
        }
        _ => {}
    }
}

/// Validates an object of these kinds as kube's validation does on create (`old` is `None`)
/// or update; other kinds pass.
///
/// # Errors
/// 422 Invalid, one cause per failure, in kube's wording.
pub fn validate(def: &ResourceDef, object: &Value, old: Option<&Value>) -> Result<(), ApiError> {
    validate_write(def, "", object, old)
}

/// [`validate`] of a write through `subresource` (`""` for the main endpoint): the rules of
/// some kinds depend on it (a CertificateSigningRequest's approval conditions and
/// certificate, [`crate::certificates::validate`]). `old` is the stored object as kube reads
/// it ([`crate::defaults::stored_as_read`]): StatefulSets' and Jobs' update rules compare
/// whole specs with it.
///
/// # Errors
/// 422 Invalid, one cause per failure, in kube's wording.
pub fn validate_write(
    def: &ResourceDef,
    subresource: &str,
    object: &Value,
    old: Option<&Value>,
) -> Result<(), ApiError> {
    // `events.k8s.io/v1` Events are a view of core Events (see `crate::versions`).
    let events_v1 = def.group == "events.k8s.io" && def.kind == "Event";
    if !def.is_builtin() && !events_v1 {
        return Ok(());
    }
    let mut causes = Vec::new();
    apps::before_shared(def, object, old, &mut causes);
    workloads::validate(def, object, old, &mut causes);
    apps::after_shared(def, object, old, &mut causes);
    match (def.group.as_str(), def.kind.as_str()) {
        ("autoscaling", "HorizontalPodAutoscaler") => {
            autoscaling::validate(def, object, old, &mut causes);
        }
        ("policy", "PodDisruptionBudget") => policy::validate(object, &mut causes),
        ("batch", "CronJob") => batch::cron_job(object, old, &mut causes),
        ("batch", "Job") => {
            // After the template's rules ([`workloads::validate`]), as kube's order has it.
            batch::job_spec(object, "spec", &mut causes);
            batch::indexed_hostnames(object, &mut causes);
            if let Some(old) = old {
                // `old` as kube reads it: defaulted (`defaults::stored_as_read`).
                batch::job_update(object, old, &mut causes);
            }
        }
        ("", "PersistentVolumeClaim") => storage::claim(object, old, &mut causes),
        ("", "PersistentVolume") => persistent_volumes::validate(object, old, &mut causes),
        ("certificates.k8s.io", "CertificateSigningRequest") => {
            crate::certificates::validate(subresource, object, old, &mut causes);
        }
        ("storage.k8s.io", "StorageClass") => storage::storage_class(object, old, &mut causes),
        ("", "LimitRange") => limit_range::validate(object, &mut causes),
        ("", "Node") => {
            nodes::node(object, &mut causes);
            if let Some(old) = old {
                nodes::node_update(object, old, &mut causes);
            }
        }
        ("", "Endpoints") => nodes::endpoints(object, &mut causes),
        ("discovery.k8s.io", "EndpointSlice") => {
            discovery::endpoint_slice(object, old, &mut causes);
        }
        ("networking.k8s.io", "Ingress") => networking::ingress(object, &mut causes),
        ("networking.k8s.io", "IngressClass") => {
            networking::ingress_class(object, old, &mut causes);
        }
        ("networking.k8s.io", "NetworkPolicy") => networking::network_policy(object, &mut causes),
        ("networking.k8s.io", "IPAddress") => networking::ip_address(object, old, &mut causes),
        ("networking.k8s.io", "ServiceCIDR") => networking::service_cidr(object, old, &mut causes),
        ("coordination.k8s.io", "Lease") => coordination::lease(object, &mut causes),
        ("rbac.authorization.k8s.io", "Role") => rbac::role(object, true, &mut causes),
        ("rbac.authorization.k8s.io", "ClusterRole") => rbac::role(object, false, &mut causes),
        ("rbac.authorization.k8s.io", "RoleBinding") => {
            rbac::binding(object, old, true, &mut causes);
        }
        ("rbac.authorization.k8s.io", "ClusterRoleBinding") => {
            rbac::binding(object, old, false, &mut causes);
        }
        ("node.k8s.io", "RuntimeClass") => runtime_class(object, old, &mut causes),
        ("storage.k8s.io", "CSIDriver") => csi_driver(object, old, &mut causes),
        ("storage.k8s.io", "CSINode") => csi_node(object, old, &mut causes),
        ("storage.k8s.io", "VolumeAttachment") => volume_attachment(object, old, &mut causes),
        ("storage.k8s.io", "CSIStorageCapacity") => {
            csi_storage_capacity(object, old, &mut causes);
        }
        ("apps", "ControllerRevision") => controller_revision(object, old, &mut causes),
        ("scheduling.k8s.io", "PriorityClass") => priority_class(object, old, &mut causes),
        ("", "ResourceQuota") => quota::resource_quota(object, old, &mut causes),
        ("", "Namespace") => namespaces::namespace(object, old, &mut causes),
        ("", "Event") | ("events.k8s.io", "Event") => {
            events::event(object, old, def.group == "events.k8s.io", &mut causes);
        }
        ("", "Service") => services::validate(object, old, &mut causes),
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy") => {
            admission_policy(object, &mut causes);
            for (path, expression, detail) in crate::admission_policy::expression_errors(object) {
                causes.push(invalid(&path, &json!(expression), &detail));
            }
        }
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding") => {
            admission_policy_binding(object, &mut causes);
        }
        ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration") => {
            webhooks::validate(object, false, &mut causes);
        }
        ("admissionregistration.k8s.io", "MutatingWebhookConfiguration") => {
            webhooks::validate(object, true, &mut causes);
        }
        ("apiregistration.k8s.io", "APIService") => api_service(object, &mut causes),
        ("flowcontrol.apiserver.k8s.io", "FlowSchema") => flow_schema(object, &mut causes),
        ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration") => {
            priority_level(object, &mut causes);
        }
        _ => {}
    }
    answer(def, object, causes)
}

/// 422 Invalid with `causes` for `object`, or `Ok` when there are none.
fn answer(def: &ResourceDef, object: &Value, causes: Vec<Cause>) -> Result<(), ApiError> {
    if causes.is_empty() {
        return Ok(());
    }
    Err(ApiError::invalid(
        def,
        text(object, "metadata.name"),
        causes,
    ))
}

/// Validates a write of the `status` subresource turning `old` into `object` as kube's status
/// strategies do ([`status`]): the workloads' and Nodes' by their status rules alone, a Pod's
/// by [`validate`] then its status rules, other kinds' by [`validate`].
///
/// # Errors
/// 422 Invalid, one cause per failure, in kube's wording.
pub fn validate_status(def: &ResourceDef, object: &Value, old: &Value) -> Result<(), ApiError> {
    if !def.is_builtin() {
        return Ok(());
    }
    if !status::status_only(def) {
        validate_write(def, "status", object, Some(old))?;
    }
    let mut causes = Vec::new();
    status::validate(def, object, old, &mut causes);
    answer(def, object, causes)
}

/// The pod spec fields an update may change, as kube's `ValidatePodUpdate` lists them.
const UPDATABLE_POD_SPEC_FIELDS: &str = "`spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

/// kube's `ValidatePodUpdate` for the spec: only the fields of
/// [`UPDATABLE_POD_SPEC_FIELDS`] change (images, a lower `activeDeadlineSeconds`, added
/// tolerations and their `tolerationSeconds`, scheduling gates removed), the containers stay
/// the same in number. kube appends a `cmp.Diff` of the two specs to its refusal; this one
/// names the changed fields with their old (`-`) and new (`+`) values.
///
/// A *gated* pod, one whose stored (old) spec has at least one scheduling gate (so also when
/// the update removes the last gates), may in addition (kube's `podIsGated` block, GA with
/// PodSchedulingReadiness since 1.30):
/// - add keys to `spec.nodeSelector`; changing or removing a key is
///   `spec.nodeSelector: Invalid value: <the new map>: only additions to spec.nodeSelector are
///   allowed (no mutations or deletions)` (`validateNodeSelectorMutation`);
/// - change `spec.affinity.nodeAffinity` (`validateNodeAffinityMutation`): anything when the
///   old one or its `requiredDuringSchedulingIgnoredDuringExecution` is absent; otherwise a
///   non-empty list of required `nodeSelectorTerms` keeps its length (else
///   `...requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms: Invalid value:
///   <the new terms>: no additions/deletions to non-empty NodeSelectorTerms list are
///   allowed`) and each term only gains `matchExpressions` / `matchFields` after its old ones
///   (an empty term gains none; else `...nodeSelectorTerms[i]: Invalid value: <the new term>:
///   only additions are allowed (no mutations or deletions)`); the preferred terms are free.
///   The node affinity is then taken from the old spec as kube's switch does, so a change of
///   `podAffinity` / `podAntiAffinity` is still refused as a change of other fields.
///
/// These values print as Go's `%#v` of kube's internal types
/// (`map[string]string{"a":"b"}`, `[]core.NodeSelectorTerm{core.NodeSelectorTerm{...}}`,
/// absent lists as `[]T(nil)`, sent empty ones as `[]T{}`).
///
/// # Errors
/// 422 Invalid in kube's words.
pub fn validate_pod_update(def: &ResourceDef, pod: &Value, old: &Value) -> Result<(), ApiError> {
    let causes = pod_update_causes(pod, old);
    if causes.is_empty() {
        return Ok(());
    }
    Err(ApiError::invalid(def, text(pod, "metadata.name"), causes))
}

fn pod_update_causes(pod: &Value, old: &Value) -> Vec<Cause> {
    let empty = Map::new();
    let spec = pod.get("spec").and_then(Value::as_object).unwrap_or(&empty);
    let old_spec = old.get("spec").and_then(Value::as_object).unwrap_or(&empty);
    // Borrowed: this runs on every pod update, and the copies of the containers' lists were
    // 6 KB of a pod PATCH's allocations (BENCHMARKS.md, invocation BT).
    fn list<'a>(spec: &'a Map<String, Value>, key: &str) -> &'a [Value] {
        spec.get(key)
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice)
    }
    for key in ["containers", "initContainers"] {
        if list(spec, key).len() != list(old_spec, key).len() {
            return vec![forbidden(
                &format!("spec.{key}"),
                "pod updates may not add or remove containers",
            )];
        }
    }
    let mut causes = Vec::new();
    let deadline = |spec: &Map<String, Value>| {
        spec.get("activeDeadlineSeconds")
            .filter(|v| !v.is_null())
            .cloned()
    };
    match (deadline(spec), deadline(old_spec)) {
        (Some(new), old_deadline) => {
            let seconds = new.as_i64().unwrap_or(-1);
            if !(0..=i64::from(i32::MAX)).contains(&seconds) {
                return vec![invalid(
                    "spec.activeDeadlineSeconds",
                    &new,
                    &format!("must be between 0 and {}, inclusive", i32::MAX),
                )];
            }
            if old_deadline
                .and_then(|old| old.as_i64())
                .is_some_and(|old| old < seconds)
            {
                return vec![invalid(
                    "spec.activeDeadlineSeconds",
                    &new,
                    "must be less than or equal to previous value",
                )];
            }
        }
        (None, Some(_)) => causes.push(invalid(
            "spec.activeDeadlineSeconds",
            &Value::Null,
            "must not update from a positive integer to nil value",
        )),
        (None, None) => {}
    }
    // Tolerations: only additions, and changes of an existing one's `tolerationSeconds`.
    let tolerations = list(spec, "tolerations");
    for kept in list(old_spec, "tolerations") {
        if !tolerations
            .iter()
            .any(|new| equal_but(new, kept, "tolerationSeconds"))
        {
            causes.push(forbidden(
                "spec.tolerations",
                "existing toleration can not be modified except its tolerationSeconds",
            ));
            break;
        }
    }
    // Scheduling gates: only deletions (compared by name; a name given twice counts at its
    // last index, as kube's map of names does).
    let old_gates = list(old_spec, "schedulingGates");
    let new_gates = list(spec, "schedulingGates");
    let mut added: Vec<(usize, &str)> = Vec::new();
    for (index, gate) in new_gates.iter().enumerate() {
        let name = text(gate, "name");
        added.retain(|(_, seen)| *seen != name);
        if !old_gates.iter().any(|old| text(old, "name") == name) {
            added.push((index, name));
        }
    }
    added.sort_unstable();
    for (index, name) in added {
        causes.push(forbidden(
            &format!("spec.schedulingGates[{index}].name"),
            &format!("only deletion is allowed, but found new scheduling gate '{name}'"),
        ));
    }
    // Everything else as it was: the updatable fields taken from the old spec, then compared.
    // Most updates change none of the rest: that is told without copying the spec (a copy of
    // the whole spec per pod update, BENCHMARKS.md invocation BT); the copy below is made
    // only to name what changed (and for gated pods, whose checks change it).
    if old_gates.is_empty() && unchanged_but_updatable(spec, old_spec) {
        return causes;
    }
    let mut munged = munged_spec(spec, old_spec);
    // Gated pods: kube checks the old pod's gates, so removing the last ones still counts.
    if !old_gates.is_empty() {
        gated_pod_update(&mut munged, old_spec, &mut causes);
    }
    if &munged != old_spec {
        let diff = go_struct_diff("core.PodSpec", old_spec, &munged);
        causes.push(forbidden(
            "spec",
            &format!(
                "pod updates may not change fields other than {UPDATABLE_POD_SPEC_FIELDS}{diff}"
            ),
        ));
    }
    causes
}

/// The nearest this server comes to kube's `cmp.Diff(old, new)` of two Go structs of type
/// `go_type` (kube appends it to an immutability refusal): a line per changed field, its Go
/// name (the JSON key with a capital first letter), its old (`-`) and new (`+`) value as
/// JSON. cmp's own output (Go syntax, deliberately unstable whitespace) is not reproduced.
pub(crate) fn go_struct_diff(
    go_type: &str,
    old: &Map<String, Value>,
    new: &Map<String, Value>,
) -> String {
    let mut keys: Vec<&String> = new.keys().chain(old.keys()).collect();
    keys.sort();
    keys.dedup();
    let mut diff = format!("\n  {go_type}{{\n");
    for key in keys {
        let (was, is) = (old.get(key), new.get(key));
        if was == is {
            continue;
        }
        let field = {
            let mut chars = key.chars();
            chars.next().map_or_else(String::new, |first| {
                first.to_ascii_uppercase().to_string() + chars.as_str()
            })
        };
        if let Some(was) = was {
            diff.push_str(&format!("- \t{field}: {was},\n"));
        }
        if let Some(is) = is {
            diff.push_str(&format!("+ \t{field}: {is},\n"));
        }
    }
    diff.push_str("  }\n");
    diff
}

/// `spec` with the fields a pod update may change taken from `old_spec` (see
/// [`pod_update_causes`]; a gated pod's checks change it further).
fn munged_spec(spec: &Map<String, Value>, old_spec: &Map<String, Value>) -> Map<String, Value> {
    let mut munged = spec.clone();
    for key in ["containers", "initContainers"] {
        if let (Some(Value::Array(new)), Some(Value::Array(old))) =
            (munged.get_mut(key), old_spec.get(key))
        {
            for (container, was) in new.iter_mut().zip(old) {
                if let Some(container) = container.as_object_mut() {
                    match was.get("image") {
                        Some(image) => container.insert("image".into(), image.clone()),
                        None => container.remove("image"),
                    };
                }
            }
        }
    }
    for key in ["activeDeadlineSeconds", "schedulingGates", "tolerations"] {
        restore(&mut munged, old_spec, key);
    }
    if negative_grace_kept(spec, old_spec) {
        munged.insert(
            "terminationGracePeriodSeconds".into(),
            old_spec["terminationGracePeriodSeconds"].clone(),
        );
    }
    munged
}

/// Whether `spec` equals `old` once the fields a pod update may change are taken from `old`
/// — exactly when [`pod_update_causes`]' `munged` copy (for a pod without scheduling gates)
/// equals `old`: the containers' and init containers' images, `activeDeadlineSeconds`,
/// `schedulingGates`, `tolerations`, and a `terminationGracePeriodSeconds` of 1 over a
/// negative one. Tested against the copy in `unchanged_but_updatable_agrees_with_the_copy`.
fn unchanged_but_updatable(spec: &Map<String, Value>, old: &Map<String, Value>) -> bool {
    let negative_grace_kept = negative_grace_kept(spec, old);
    let keys = spec
        .keys()
        .chain(old.keys().filter(|key| !spec.contains_key(*key)));
    for key in keys {
        let (new_value, old_value) = (spec.get(key), old.get(key));
        let equal = match key.as_str() {
            "activeDeadlineSeconds" | "schedulingGates" | "tolerations" => true,
            "terminationGracePeriodSeconds" if negative_grace_kept => true,
            "containers" | "initContainers" => match (new_value, old_value) {
                (Some(Value::Array(new)), Some(Value::Array(was))) => {
                    new.len() == was.len()
                        && new.iter().zip(was).all(|(container, was)| match container {
                            Value::Object(_) => equal_but(container, was, "image"),
                            _ => container == was,
                        })
                }
                _ => new_value == old_value,
            },
            _ => new_value == old_value,
        };
        if !equal {
            return false;
        }
    }
    true
}

/// Whether an update's `terminationGracePeriodSeconds` of 1 stands for the old spec's negative
/// one (kube keeps the old value then: a negative period was stored as 1).
fn negative_grace_kept(spec: &Map<String, Value>, old: &Map<String, Value>) -> bool {
    let grace = |spec: &Map<String, Value>| {
        spec.get("terminationGracePeriodSeconds")
            .and_then(Value::as_i64)
    };
    grace(old).is_some_and(|old| old < 0) && grace(spec) == Some(1)
}

/// Whether `a` and `b` are equal once `key` is taken out of each (when they are maps).
fn equal_but(a: &Value, b: &Value, key: &str) -> bool {
    match (a.as_object(), b.as_object()) {
        // Maps iterate in key order (serde_json's `Map` is a `BTreeMap` here).
        (Some(a), Some(b)) => a
            .iter()
            .filter(|(k, _)| *k != key)
            .eq(b.iter().filter(|(k, _)| *k != key)),
        _ => a == b,
    }
}

/// Sets `key` of `munged` to what the old spec has there (absent when absent).
fn restore(munged: &mut Map<String, Value>, old: &Map<String, Value>, key: &str) {
    match old.get(key) {
        Some(value) => munged.insert(key.into(), value.clone()),
        None => munged.remove(key),
    };
}

/// A field that is neither absent nor `null` (a Go pointer, map or slice that is not nil).
fn set<'a>(object: Option<&'a Value>, key: &str) -> Option<&'a Value> {
    object?.get(key).filter(|v| !v.is_null())
}

/// kube's `podIsGated` block of `ValidatePodUpdate` (see [`validate_pod_update`]): the
/// node selector's and node affinity's checks, then both taken from the old spec.
/// A field that differs at all is checked and restored, which accepts what kube's
/// `Semantic.DeepEqual` accepts (a nil and an empty map or list are equal there).
fn gated_pod_update(
    munged: &mut Map<String, Value>,
    old_spec: &Map<String, Value>,
    causes: &mut Vec<Cause>,
) {
    if munged.get("nodeSelector") != old_spec.get("nodeSelector") {
        let new = go_string_map(munged.get("nodeSelector"));
        let old = go_string_map(old_spec.get("nodeSelector"));
        let kept = |(key, value): (&String, &String)| {
            new.as_ref().and_then(|new| new.get(key)) == Some(value)
        };
        if !old.iter().flatten().all(kept) {
            causes.push(invalid_printed(
                "spec.nodeSelector",
                &go_string_map_sharp(new.as_ref()),
                "only additions to spec.nodeSelector are allowed (no mutations or deletions)",
            ));
        }
        restore(munged, old_spec, "nodeSelector");
    }
    let old_affinity = old_spec.get("affinity").filter(|v| !v.is_null());
    let old_node_affinity = set(old_affinity, "nodeAffinity").cloned();
    let munged_affinity = munged.get("affinity").filter(|v| !v.is_null());
    let munged_node_affinity = set(munged_affinity, "nodeAffinity");
    if munged_node_affinity == old_node_affinity.as_ref() {
        return;
    }
    node_affinity_mutation(munged_node_affinity, old_node_affinity.as_ref(), causes);
    let other_affinities = ["podAffinity", "podAntiAffinity"]
        .iter()
        .any(|key| set(munged_affinity, key).is_some());
    match (munged_affinity.is_some(), old_node_affinity) {
        // Already effectively nil.
        (false, None) => {}
        (false, Some(old)) => {
            munged.insert("affinity".into(), json!({ "nodeAffinity": old }));
        }
        // Only the node affinity was set on a pod without affinity: nil again.
        (true, _) if old_affinity.is_none() && !other_affinities => {
            restore(munged, old_spec, "affinity");
        }
        (true, old) => {
            if let Some(affinity) = munged.get_mut("affinity").and_then(Value::as_object_mut) {
                match old {
                    Some(old) => affinity.insert("nodeAffinity".into(), old),
                    None => affinity.remove("nodeAffinity"),
                };
            }
        }
    }
}

/// kube's `validateNodeAffinityMutation` (see [`validate_pod_update`]).
fn node_affinity_mutation(new: Option<&Value>, old: Option<&Value>, causes: &mut Vec<Cause>) {
    const REQUIRED: &str = "requiredDuringSchedulingIgnoredDuringExecution";
    let Some(old_required) = set(old, REQUIRED) else {
        return;
    };
    let old_terms = go_terms(old_required.get("nodeSelectorTerms")).unwrap_or_default();
    let new_terms =
        set(new, REQUIRED).and_then(|required| go_terms(required.get("nodeSelectorTerms")));
    let path = format!("spec.affinity.nodeAffinity.{REQUIRED}.nodeSelectorTerms");
    let new_list = new_terms.as_deref().unwrap_or_default();
    if !old_terms.is_empty() && old_terms.len() != new_list.len() {
        causes.push(invalid_printed(
            &path,
            &go_slice_sharp(
                "core.NodeSelectorTerm",
                new_terms.as_deref(),
                NodeSelectorTerm::sharp,
            ),
            "no additions/deletions to non-empty NodeSelectorTerms list are allowed",
        ));
        return;
    }
    for (i, (new, old)) in new_list.iter().zip(&old_terms).enumerate() {
        if !new.has_only_additions(old) {
            causes.push(invalid_printed(
                &format!("{path}[{i}]"),
                &new.sharp(),
                "only additions are allowed (no mutations or deletions)",
            ));
        }
    }
}

/// A JSON list as a Go slice decodes it: absent or `null` is nil (`None`), `[]` is empty.
fn go_slice<T>(value: Option<&Value>, item: impl Fn(&Value) -> T) -> Option<Vec<T>> {
    value
        .and_then(Value::as_array)
        .map(|items| items.iter().map(item).collect())
}

/// Go's `%#v` of a slice: `[]T(nil)` when nil, `[]T{a, b}` otherwise.
fn go_slice_sharp<T>(type_name: &str, items: Option<&[T]>, sharp: impl Fn(&T) -> String) -> String {
    match items {
        None => format!("[]{type_name}(nil)"),
        Some(items) => {
            let printed: Vec<String> = items.iter().map(sharp).collect();
            format!("[]{type_name}{{{}}}", printed.join(", "))
        }
    }
}

/// Go's `Semantic.DeepEqual` of two slices: a nil one equals an empty one.
fn go_slices_equal<T: PartialEq>(a: Option<&[T]>, b: Option<&[T]>) -> bool {
    a.unwrap_or_default() == b.unwrap_or_default()
}

/// A JSON object as a Go `map[string]string` decodes it (`None` for nil).
fn go_string_map(value: Option<&Value>) -> Option<std::collections::BTreeMap<String, String>> {
    value.and_then(Value::as_object).map(|map| {
        map.iter()
            .map(|(key, value)| (key.clone(), go_string(Some(value))))
            .collect()
    })
}

/// Go's `%#v` of a `map[string]string`: keys sorted, `map[string]string{"a":"b", "c":"d"}`,
/// `map[string]string(nil)` when nil.
fn go_string_map_sharp(map: Option<&std::collections::BTreeMap<String, String>>) -> String {
    match map {
        None => "map[string]string(nil)".to_owned(),
        Some(map) => {
            let entries: Vec<String> = map.iter().map(|(k, v)| format!("{k:?}:{v:?}")).collect();
            format!("map[string]string{{{}}}", entries.join(", "))
        }
    }
}

/// kube's internal `core.NodeSelectorRequirement`.
#[derive(Debug)]
struct NodeSelectorRequirement {
    key: String,
    operator: String,
    values: Option<Vec<String>>,
}

impl NodeSelectorRequirement {
    fn from_json(value: &Value) -> Self {
        NodeSelectorRequirement {
            key: go_string(value.get("key")),
            operator: go_string(value.get("operator")),
            values: go_slice(value.get("values"), |v| go_string(Some(v))),
        }
    }

    /// Go's `%#v`.
    fn sharp(&self) -> String {
        format!(
            "core.NodeSelectorRequirement{{Key:{:?}, Operator:{:?}, Values:{}}}",
            self.key,
            self.operator,
            go_slice_sharp("string", self.values.as_deref(), |v| format!("{v:?}"))
        )
    }
}

/// Go's `Semantic.DeepEqual`: a nil `values` equals an empty one.
impl PartialEq for NodeSelectorRequirement {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
            && self.operator == other.operator
            && go_slices_equal(self.values.as_deref(), other.values.as_deref())
    }
}

/// kube's internal `core.NodeSelectorTerm`.
#[derive(Debug)]
struct NodeSelectorTerm {
    match_expressions: Option<Vec<NodeSelectorRequirement>>,
    match_fields: Option<Vec<NodeSelectorRequirement>>,
}

impl NodeSelectorTerm {
    fn from_json(value: &Value) -> Self {
        NodeSelectorTerm {
            match_expressions: go_slice(
                value.get("matchExpressions"),
                NodeSelectorRequirement::from_json,
            ),
            match_fields: go_slice(value.get("matchFields"), NodeSelectorRequirement::from_json),
        }
    }

    /// Go's `%#v`.
    fn sharp(&self) -> String {
        let list = |items: &Option<Vec<NodeSelectorRequirement>>| {
            go_slice_sharp(
                "core.NodeSelectorRequirement",
                items.as_deref(),
                NodeSelectorRequirement::sharp,
            )
        };
        format!(
            "core.NodeSelectorTerm{{MatchExpressions:{}, MatchFields:{}}}",
            list(&self.match_expressions),
            list(&self.match_fields)
        )
    }

    /// kube's `validateNodeSelectorTermHasOnlyAdditions`: an empty old term stays empty;
    /// otherwise both lists keep their old requirements, in order, as a prefix.
    fn has_only_additions(&self, old: &NodeSelectorTerm) -> bool {
        let new_expressions = self.match_expressions.as_deref().unwrap_or_default();
        let new_fields = self.match_fields.as_deref().unwrap_or_default();
        let old_expressions = old.match_expressions.as_deref().unwrap_or_default();
        let old_fields = old.match_fields.as_deref().unwrap_or_default();
        if old_expressions.is_empty()
            && old_fields.is_empty()
            && (!new_expressions.is_empty() || !new_fields.is_empty())
        {
            return false;
        }
        new_expressions.starts_with(old_expressions) && new_fields.starts_with(old_fields)
    }
}

/// A `nodeSelectorTerms` list as Go decodes it (`None` for nil).
fn go_terms(value: Option<&Value>) -> Option<Vec<NodeSelectorTerm>> {
    go_slice(value, NodeSelectorTerm::from_json)
}

/// `ValidateImmutableField`: `field: Invalid value: <new>: field is immutable`.
fn immutable(field: &str, object: &Value, old: Option<&Value>, causes: &mut Vec<Cause>) {
    if let Some(old) = old {
        let new_value = present(object, field).cloned().unwrap_or(Value::Null);
        let old_value = present(old, field).cloned().unwrap_or(Value::Null);
        if new_value != old_value {
            causes.push(invalid(field, &new_value, "field is immutable"));
        }
    }
}

/// kube's `ValidatePriorityClass` and `ValidatePriorityClassUpdate`.
fn priority_class(object: &Value, old: Option<&Value>, causes: &mut Vec<Cause>) {
    let name = text(object, "metadata.name");
    let value = object.get("value").and_then(Value::as_i64).unwrap_or(0);
    let global_default = object.get("globalDefault").and_then(Value::as_bool) == Some(true);
    if name.starts_with("system-") {
        let known = SYSTEM_PRIORITY_CLASSES
            .iter()
            .find(|(system, _, _)| *system == name);
        let error = match known {
            None => Some(format!("{name} is not a known system priority class")),
            Some((_, expected, _)) if *expected != value => {
                Some(format!("value of {name} PriorityClass must be {expected}"))
            }
            Some(_) if global_default => Some(format!(
                "globalDefault of {name} PriorityClass must be false"
            )),
            Some(_) => None,
        };
        if let Some(error) = error {
            causes.push(forbidden(
                "metadata.name",
                &format!(
                    "priority class names with 'system-' prefix are reserved for system use only. error: {error}"
                ),
            ));
        }
    } else if value > HIGHEST_USER_DEFINABLE_PRIORITY {
        causes.push(forbidden(
            "value",
            &format!(
                "maximum allowed value of a user defined priority is {HIGHEST_USER_DEFINABLE_PRIORITY}"
            ),
        ));
    }
    if let Some(policy) = object.get("preemptionPolicy").and_then(Value::as_str)
        && !matches!(policy, "Never" | "PreemptLowerPriority")
    {
        causes.push(not_supported(
            "preemptionPolicy",
            &json!(policy),
            &["Never", "PreemptLowerPriority"],
        ));
    }
    if let Some(old) = old {
        if old.get("value") != object.get("value") {
            causes.push(forbidden("value", "may not be changed in an update."));
        }
        immutable("preemptionPolicy", object, Some(old), causes);
    }
}

/// kube-aggregator's `ValidateAPIService` (the name after the generic path-segment check,
/// [`crate::meta::validate_name`]) and `ValidateAPIServiceStatus`.
fn api_service(object: &Value, causes: &mut Vec<Cause>) {
    let (group, version) = (text(object, "spec.group"), text(object, "spec.version"));
    let name = text(object, "metadata.name");
    let required_name = format!("{version}.{group}");
    if name != required_name {
        causes.push(invalid(
            "metadata.name",
            &json!(name),
            &format!(
                "must be `spec.version+\".\"+spec.group`: {}",
                crate::field::go_quote(&required_name)
            ),
        ));
    }
    if group.is_empty() && version != "v1" {
        causes.push(required(
            "spec.group",
            "only v1 may have an empty group and it better be legacy kube",
        ));
    }
    if !group.is_empty() {
        for problem in crate::names::dns1123_subdomain_problems(group) {
            causes.push(invalid("spec.group", &json!(group), &problem));
        }
    }
    for problem in crate::names::dns1035_label_problems(version) {
        causes.push(invalid("spec.version", &json!(version), &problem));
    }
    let int = |path: &str| lookup(object, path).and_then(Value::as_i64).unwrap_or(0);
    let group_priority = int("spec.groupPriorityMinimum");
    if group_priority <= 0 || group_priority > 20000 {
        causes.push(invalid(
            "spec.groupPriorityMinimum",
            &json!(group_priority),
            "must be positive and less than 20000",
        ));
    }
    let version_priority = int("spec.versionPriority");
    if version_priority <= 0 || version_priority > 1000 {
        causes.push(invalid(
            "spec.versionPriority",
            &json!(version_priority),
            "must be positive and less than 1000",
        ));
    }
    let ca_bundle = {
        use base64::Engine;
        let encoded = text(object, "spec.caBundle");
        base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .map_or(encoded.len(), |bytes| bytes.len())
    };
    let insecure =
        lookup(object, "spec.insecureSkipTLSVerify").and_then(Value::as_bool) == Some(true);
    match lookup(object, "spec.service").filter(|s| s.is_object()) {
        None => {
            if ca_bundle != 0 {
                causes.push(invalid(
                    "spec.caBundle",
                    &json!(format!("{ca_bundle} bytes")),
                    "local APIServices may not have a caBundle",
                ));
            }
            if insecure {
                causes.push(invalid(
                    "spec.insecureSkipTLSVerify",
                    &json!(true),
                    "local APIServices may not have insecureSkipTLSVerify",
                ));
            }
        }
        Some(service) => {
            for key in ["namespace", "name"] {
                if service[key].as_str().unwrap_or_default().is_empty() {
                    causes.push(required(&format!("spec.service.{key}"), ""));
                }
            }
            let port = service["port"].as_i64().unwrap_or(0);
            if !(1..=65535).contains(&port) {
                causes.push(invalid(
                    "spec.service.port",
                    &json!(port),
                    "port is not valid: must be between 1 and 65535, inclusive",
                ));
            }
            if insecure && ca_bundle > 0 {
                causes.push(invalid(
                    "spec.insecureSkipTLSVerify",
                    &json!(true),
                    "may not be true if caBundle is present",
                ));
            }
        }
    }
    for (i, condition) in items(object, "status.conditions").iter().enumerate() {
        let status = &condition["status"];
        if !matches!(status.as_str(), Some("True" | "False" | "Unknown")) {
            causes.push(not_supported(
                &format!("status.conditions[{i}].status"),
                status,
                &["True", "False", "Unknown"],
            ));
        }
    }
}

fn runtime_class(object: &Value, old: Option<&Value>, causes: &mut Vec<Cause>) {
    let handler = text(object, "handler");
    if let Err(message) = validate_dns1123_label(handler) {
        causes.push(invalid("handler", &json!(handler), &message));
    }
    if let Some(old) = old
        && text(old, "handler") != handler
    {
        causes.push(invalid("handler", &json!(handler), "field is immutable"));
    }
}

/// `ValidateCSIDriverName` (kube's `apivalidation`): required, at most 63 characters, a DNS
/// subdomain once lowercased.
fn csi_driver_name(field: &str, name: &str, causes: &mut Vec<Cause>) {
    if name.is_empty() {
        causes.push(required(field, ""));
    }
    if name.len() > 63 {
        causes.push((
            field.to_owned(),
            "Too long: may not be more than 63 bytes".to_owned(),
            "FieldValueTooLong".to_owned(),
        ));
    }
    if let Err(message) = validate_dns1123_subdomain(&name.to_ascii_lowercase()) {
        causes.push(invalid(field, &json!(name), &message));
    }
}

fn csi_driver(object: &Value, old: Option<&Value>, causes: &mut Vec<Cause>) {
    for (key, field) in [
        ("attachRequired", "spec.attachedRequired"),
        ("podInfoOnMount", "spec.podInfoOnMount"),
        ("storageCapacity", "spec.storageCapacity"),
    ] {
        if present(object, &format!("spec.{key}")).is_none() {
            causes.push(required(field, ""));
        }
    }
    match present(object, "spec.fsGroupPolicy") {
        None => causes.push(required("spec.fsGroupPolicy", "")),
        Some(policy) => {
            let supported = ["File", "None", "ReadWriteOnceWithFSType"];
            if !policy.as_str().is_some_and(|p| supported.contains(&p)) {
                causes.push(not_supported("spec.fsGroupPolicy", policy, &supported));
            }
        }
    }
    let mut audiences = Vec::new();
    for (index, request) in items(object, "spec.tokenRequests").iter().enumerate() {
        let at = format!("spec.tokenRequests[{index}]");
        let audience = text(request, "audience");
        if audiences.contains(&audience) {
            causes.push(duplicate(&format!("{at}.audience"), &json!(audience)));
            continue;
        }
        audiences.push(audience);
        if let Some(seconds) = present(request, "expirationSeconds").and_then(Value::as_i64) {
            let field = format!("{at}.expirationSeconds");
            if seconds < 600 {
                causes.push(invalid(
                    &field,
                    &json!(seconds),
                    "may not specify a duration less than 10 minutes",
                ));
            }
            if seconds > 1 << 32 {
                causes.push(invalid(
                    &field,
                    &json!(seconds),
                    "may not specify a duration larger than 2^32 seconds",
                ));
            }
        }
    }
    let modes = items(object, "spec.volumeLifecycleModes");
    if modes.is_empty() {
        causes.push(required(
            "spec.volumeLifecycleModes",
            "should specify at least one",
        ));
    }
    for mode in modes {
        if !matches!(mode.as_str(), Some("Persistent" | "Ephemeral")) {
            causes.push(not_supported(
                "spec.volumeLifecycleModes",
                mode,
                &["Persistent", "Ephemeral"],
            ));
        }
    }
    if let Some(old) = old {
        let attach = present(object, "spec.attachRequired").cloned();
        if attach != present(old, "spec.attachRequired").cloned() {
            causes.push(invalid(
                "spec.attachedRequired",
                &attach.unwrap_or(Value::Null),
                "field is immutable",
            ));
        }
        immutable("spec.volumeLifecycleModes", object, Some(old), causes);
    }
}

fn csi_node(object: &Value, old: Option<&Value>, causes: &mut Vec<Cause>) {
    let mut names = Vec::new();
    for (index, driver) in items(object, "spec.drivers").iter().enumerate() {
        let at = format!("spec.drivers[{index}]");
        let name = text(driver, "name");
        csi_driver_name(&format!("{at}.name"), name, causes);
        let node_id = text(driver, "nodeID");
        if node_id.is_empty() {
            causes.push(required(&format!("{at}.nodeID"), ""));
        }
        if node_id.len() > 192 {
            causes.push(invalid(
                &format!("{at}.nodeID"),
                &json!(node_id),
                "must be 192 characters or less",
            ));
        }
        if names.contains(&name) {
            causes.push(duplicate(&format!("{at}.name"), &json!(name)));
        }
        names.push(name);
    }
    if let Some(old) = old {
        for old_driver in items(old, "spec.drivers") {
            for driver in items(object, "spec.drivers") {
                if text(driver, "name") == text(old_driver, "name") && driver != old_driver {
                    causes.push(invalid("spec.drivers", driver, "field is immutable"));
                }
            }
        }
    }
}

fn volume_attachment(object: &Value, old: Option<&Value>, causes: &mut Vec<Cause>) {
    let attacher = text(object, "spec.attacher");
    if attacher.is_empty() {
        causes.push(required("spec.attacher", ""));
    }
    let pv = present(object, "spec.source.persistentVolumeName");
    let inline = present(object, "spec.source.inlineVolumeSpec");
    const EXACTLY_ONE: &str =
        "must specify exactly one of inlineVolumeSpec and persistentVolumeName";
    match (pv, inline) {
        (None, None) => causes.push(required("spec.source", EXACTLY_ONE)),
        (Some(_), Some(_)) => causes.push(forbidden("spec.source", EXACTLY_ONE)),
        (Some(name), None) if name.as_str() == Some("") => causes.push(required(
            "spec.source.persistentVolumeName",
            "must specify non empty persistentVolumeName",
        )),
        _ => {}
    }
    let node = text(object, "spec.nodeName");
    if let Err(message) = validate_dns1123_subdomain(node) {
        causes.push(invalid("spec.nodeName", &json!(node), &message));
    }
    if let Some(old) = old
        && lookup(object, "spec") != lookup(old, "spec")
    {
        causes.push(invalid(
            "spec",
            lookup(object, "spec").unwrap_or(&Value::Null),
            "field is immutable",
        ));
    }
    // `ValidateVolumeAttachmentV1`: the attacher is a CSI driver's name (its `Required value`
    // is the one above, which kube's message lists once).
    if !attacher.is_empty() {
        csi_driver_name("spec.attacher", attacher, causes);
    }
    if let Some(Value::String(name)) = pv
        && !name.is_empty()
        && let Err(message) = validate_dns1123_subdomain(name)
    {
        causes.push(invalid(
            "spec.source.persistentVolumeName",
            &json!(name),
            &message,
        ));
    }
}

fn csi_storage_capacity(object: &Value, old: Option<&Value>, causes: &mut Vec<Cause>) {
    let class = text(object, "storageClassName");
    if let Err(message) = validate_dns1123_subdomain(class) {
        causes.push(invalid("storageClassName", &json!(class), &message));
    }
    if let Some(old) = old {
        if lookup(object, "nodeTopology") != lookup(old, "nodeTopology") {
            causes.push(invalid(
                "nodeTopology",
                lookup(object, "nodeTopology").unwrap_or(&Value::Null),
                "field is immutable",
            ));
        }
        if text(old, "storageClassName") != class {
            causes.push(invalid(
                "storageClassName",
                &json!(class),
                "field is immutable",
            ));
        }
    }
}

fn controller_revision(object: &Value, old: Option<&Value>, causes: &mut Vec<Cause>) {
    if present(object, "data").is_none() {
        causes.push(required("data", "data is mandatory"));
    }
    if let Some(revision) = lookup(object, "revision").and_then(Value::as_i64)
        && revision < 0
    {
        causes.push(invalid(
            "revision",
            &json!(revision),
            "must be greater than or equal to 0",
        ));
    }
    immutable("data", object, old, causes);
}

/// `validateMatchResources`: the match policy's values.
fn match_resources(resources: &Value, at: &str, causes: &mut Vec<Cause>) {
    if let Some(policy) = present(resources, "matchPolicy")
        && !matches!(policy.as_str(), Some("Equivalent" | "Exact"))
    {
        causes.push(not_supported(
            &format!("{at}.matchPolicy"),
            policy,
            &["Equivalent", "Exact"],
        ));
    }
}

fn admission_policy(object: &Value, causes: &mut Vec<Cause>) {
    match present(object, "spec.failurePolicy") {
        None => causes.push(required("spec.failurePolicy", "")),
        Some(policy) if !matches!(policy.as_str(), Some("Fail" | "Ignore")) => {
            causes.push(not_supported(
                "spec.failurePolicy",
                policy,
                &["Fail", "Ignore"],
            ));
        }
        Some(_) => {}
    }
    if let Some(kind) = present(object, "spec.paramKind") {
        if text(kind, "apiVersion").is_empty() {
            causes.push(required("spec.paramKind.apiVersion", ""));
        }
        if text(kind, "kind").is_empty() {
            causes.push(required("spec.paramKind.kind", ""));
        }
    }
    match present(object, "spec.matchConstraints") {
        None => causes.push(required("spec.matchConstraints", "")),
        Some(constraints) => {
            match_resources(constraints, "spec.matchConstraints", causes);
            if items(constraints, "resourceRules").is_empty() {
                causes.push(required("spec.matchConstraints.resourceRules", ""));
            }
        }
    }
    let validations = items(object, "spec.validations");
    if validations.is_empty() && items(object, "spec.auditAnnotations").is_empty() {
        causes.push(required(
            "spec.validations",
            "validations or auditAnnotations must contain at least one item",
        ));
    }
    for (index, validation) in validations.iter().enumerate() {
        let at = format!("spec.validations[{index}]");
        if text(validation, "expression").trim().is_empty() {
            causes.push(required(
                &format!("{at}.expression"),
                "expression is not specified",
            ));
        }
        if let Some(reason) = present(validation, "reason")
            && !matches!(
                reason.as_str(),
                Some("Forbidden" | "Invalid" | "RequestEntityTooLarge" | "Unauthorized")
            )
        {
            causes.push(not_supported(
                &format!("{at}.reason"),
                reason,
                &[
                    "Forbidden",
                    "Invalid",
                    "RequestEntityTooLarge",
                    "Unauthorized",
                ],
            ));
        }
    }
    for (index, annotation) in items(object, "spec.auditAnnotations").iter().enumerate() {
        if text(annotation, "valueExpression").trim().is_empty() {
            causes.push(required(
                &format!("spec.auditAnnotations[{index}].valueExpression"),
                "valueExpression is not specified",
            ));
        }
    }
}

fn admission_policy_binding(object: &Value, causes: &mut Vec<Cause>) {
    let policy = text(object, "spec.policyName");
    if policy.is_empty() {
        causes.push(required("spec.policyName", ""));
    } else if let Err(message) = validate_dns1123_subdomain(policy) {
        causes.push(invalid("spec.policyName", &json!(policy), &message));
    }
    if let Some(reference) = present(object, "spec.paramRef") {
        let selector = present(reference, "selector");
        let name = text(reference, "name");
        if !name.is_empty() && selector.is_some() {
            causes.push(forbidden(
                "spec.paramRef.name",
                "name and selector are mutually exclusive",
            ));
        }
        if name.is_empty() && selector.is_none() {
            causes.push(required(
                "spec.paramRef",
                "one of name or selector must be specified",
            ));
        }
        match present(reference, "parameterNotFoundAction") {
            None => causes.push(required("spec.paramRef.parameterNotFoundAction", "")),
            Some(action) if action.as_str() == Some("") => {
                causes.push(required("spec.paramRef.parameterNotFoundAction", ""));
            }
            Some(action) if !matches!(action.as_str(), Some("Deny" | "Allow")) => {
                causes.push(not_supported(
                    "spec.paramRef.parameterNotFoundAction",
                    action,
                    &["Deny", "Allow"],
                ));
            }
            Some(_) => {}
        }
    }
    if let Some(resources) = present(object, "spec.matchResources") {
        // kube's path, spelled as kube spells it.
        match_resources(resources, "spec.matchResouces", causes);
    }
    let mut seen: Vec<&Value> = Vec::new();
    let actions = items(object, "spec.validationActions");
    for (index, action) in actions.iter().enumerate() {
        let at = format!("spec.validationActions[{index}]");
        if !matches!(action.as_str(), Some("Audit" | "Deny" | "Warn")) {
            causes.push(not_supported(&at, action, &["Audit", "Deny", "Warn"]));
        }
        if seen.contains(&action) {
            causes.push(duplicate(&at, action));
        }
        seen.push(action);
    }
    if seen.contains(&&json!("Deny")) && seen.contains(&&json!("Warn")) {
        let listed: Vec<String> = actions.iter().map(go_value).collect();
        causes.push((
            "spec.validationActions".to_owned(),
            format!(
                "Invalid value: []admissionregistration.ValidationAction{{{}}}: must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)",
                listed.join(", ")
            ),
            "FieldValueInvalid".to_owned(),
        ));
    }
    if seen.is_empty() {
        causes.push(required(
            "spec.validationActions",
            "at least one validation action is required",
        ));
    }
}

/// The spec kube-apiserver's API Priority and Fairness requires of its mandatory
/// FlowSchemas (`exempt`, `catch-all`), as defaulted and stored
/// (k8s.io/apiserver's `flowcontrol/bootstrap/default.go`); `None` for other names.
#[must_use]
pub fn mandatory_flow_schema_spec(name: &str) -> Option<Value> {
    let (precedence, method, groups): (u32, Option<&str>, &[&str]) = match name {
        "exempt" => (1, None, &["system:masters"]),
        "catch-all" => (
            10_000,
            Some("ByUser"),
            &["system:unauthenticated", "system:authenticated"],
        ),
        _ => return None,
    };
    let subjects: Vec<Value> = groups
        .iter()
        .map(|group| json!({"kind": "Group", "group": {"name": group}}))
        .collect();
    let mut spec = json!({
        "priorityLevelConfiguration": {"name": name},
        "matchingPrecedence": precedence,
        "rules": [{
            "subjects": subjects,
            "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                               "clusterScope": true, "namespaces": ["*"]}],
            "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
        }],
    });
    if let Some(method) = method {
        spec["distinguisherMethod"] = json!({"type": method});
    }
    Some(spec)
}

/// The spec of the mandatory PriorityLevelConfigurations (`exempt`, `catch-all`), as
/// defaulted and stored; `None` for other names.
#[must_use]
pub fn mandatory_priority_level_spec(name: &str) -> Option<Value> {
    match name {
        "exempt" => Some(json!({"type": "Exempt",
            "exempt": {"nominalConcurrencyShares": 0, "lendablePercent": 0}})),
        "catch-all" => Some(json!({"type": "Limited",
            "limited": {"nominalConcurrencyShares": 5, "lendablePercent": 0,
                        "limitResponse": {"type": "Reject"}}})),
        _ => None,
    }
}

/// A mandatory object's spec must be the fixed one (`ValidateFlowSchema`,
/// `ValidatePriorityLevelConfiguration`).
fn mandatory_spec(object: &Value, fixed: Option<Value>, causes: &mut Vec<Cause>) {
    if let Some(fixed) = fixed {
        let spec = lookup(object, "spec").cloned().unwrap_or(Value::Null);
        if spec != fixed {
            causes.push(invalid(
                "spec",
                &spec,
                &format!(
                    "spec of '{}' must equal the fixed value",
                    text(object, "metadata.name")
                ),
            ));
        }
    }
}

/// `Validate*Status`: condition types present and unique.
fn status_conditions(object: &Value, causes: &mut Vec<Cause>) {
    let mut seen = Vec::new();
    for (index, condition) in items(object, "status.conditions").iter().enumerate() {
        let at = format!("status.conditions[{index}]");
        let kind = text(condition, "type");
        if seen.contains(&kind) {
            causes.push(duplicate(&format!("{at}.type"), &json!(kind)));
        }
        seen.push(kind);
        if kind.is_empty() {
            causes.push(required(&format!("{at}.type"), "must not be empty"));
        }
    }
}

fn flow_schema(object: &Value, causes: &mut Vec<Cause>) {
    let name = text(object, "metadata.name");
    let precedence = lookup(object, "spec.matchingPrecedence")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let field = "spec.matchingPrecedence";
    if precedence <= 0 {
        causes.push(invalid(
            field,
            &json!(precedence),
            "must be a positive value",
        ));
    }
    if precedence > 10000 {
        causes.push(invalid(
            field,
            &json!(precedence),
            "must not be greater than 10000",
        ));
    }
    if precedence == 1 && name != "exempt" {
        causes.push(invalid(
            field,
            &json!(precedence),
            "only the schema named 'exempt' may have matchingPrecedence 1",
        ));
    }
    if let Some(method) = present(object, "spec.distinguisherMethod") {
        let kind = text(method, "type");
        if !matches!(kind, "ByUser" | "ByNamespace") {
            causes.push((
                "spec.distinguisherMethod.type".to_owned(),
                format!(
                    "Unsupported value: flowcontrol.FlowDistinguisherMethod{{Type:{kind:?}}}: supported values: \"ByNamespace\", \"ByUser\""
                ),
                "FieldValueNotSupported".to_owned(),
            ));
        }
    }
    let level = text(object, "spec.priorityLevelConfiguration.name");
    if level.is_empty() {
        causes.push(required(
            "spec.priorityLevelConfiguration.name",
            "must reference a priority level",
        ));
    } else if let Err(message) = validate_dns1123_subdomain(level) {
        causes.push(invalid(
            "spec.priorityLevelConfiguration.name",
            &json!(level),
            &message,
        ));
    }
    for (index, rule) in items(object, "spec.rules").iter().enumerate() {
        policy_rules(rule, &format!("spec.rules[{index}]"), causes);
    }
    mandatory_spec(object, mandatory_flow_schema_spec(name), causes);
    status_conditions(object, causes);
}

/// `ValidateFlowSchemaPolicyRulesWithSubjects`.
fn policy_rules(rule: &Value, at: &str, causes: &mut Vec<Cause>) {
    let subjects = items(rule, "subjects");
    if subjects.is_empty() {
        causes.push(required(
            &format!("{at}.subjects"),
            "subjects must contain at least one value",
        ));
    }
    for (index, subject) in subjects.iter().enumerate() {
        flow_subject(subject, &format!("{at}.subjects[{index}]"), causes);
    }
    let resource_rules = items(rule, "resourceRules");
    let non_resource_rules = items(rule, "nonResourceRules");
    if resource_rules.is_empty() && non_resource_rules.is_empty() {
        causes.push(required(
            at,
            "at least one of resourceRules and nonResourceRules has to be non-empty",
        ));
    }
    for (index, rule) in resource_rules.iter().enumerate() {
        let at = format!("{at}.resourceRules[{index}]");
        verbs(rule, &at, causes);
        for (key, what) in [("apiGroups", "api group"), ("resources", "resource")] {
            let values = items(rule, key);
            if values.is_empty() {
                causes.push(required(
                    &format!("{at}.{key}"),
                    &format!("resource rules must supply at least one {what}"),
                ));
            } else if values.len() > 1 && values.contains(&json!("*")) {
                causes.push(invalid(
                    &format!("{at}.{key}"),
                    &Value::Array(values.to_vec()),
                    &format!("if '*' is present, must not specify other {what}s"),
                ));
            }
        }
        let namespaces = items(rule, "namespaces");
        let cluster_scope = lookup(rule, "clusterScope").and_then(Value::as_bool) == Some(true);
        if namespaces.is_empty() && !cluster_scope {
            causes.push(required(
                &format!("{at}.namespaces"),
                "resource rules that are not cluster scoped must supply at least one namespace",
            ));
        } else if namespaces.contains(&json!("*")) {
            if namespaces.len() > 1 {
                causes.push(invalid(
                    &format!("{at}.namespaces"),
                    &Value::Array(namespaces.to_vec()),
                    "if '*' is present, must not specify other namespaces",
                ));
            }
        } else {
            for (index, namespace) in namespaces.iter().enumerate() {
                let namespace = namespace.as_str().unwrap_or_default();
                if let Err(message) = validate_dns1123_label(namespace) {
                    causes.push(invalid(
                        &format!("{at}.namespaces[{index}]"),
                        &json!(namespace),
                        &format!(
                            "each member of this list must be '*' or a DNS-1123 label; {message}"
                        ),
                    ));
                }
            }
        }
    }
    for (index, rule) in non_resource_rules.iter().enumerate() {
        let at = format!("{at}.nonResourceRules[{index}]");
        verbs(rule, &at, causes);
        let urls = items(rule, "nonResourceURLs");
        if urls.is_empty() {
            causes.push(required(
                &format!("{at}.nonResourceURLs"),
                "nonResourceURLs must contain at least one value",
            ));
        } else if urls.contains(&json!("*")) && urls.len() > 1 {
            causes.push(invalid(
                &format!("{at}.nonResourceURLs"),
                &Value::Array(urls.to_vec()),
                "if '*' is present, must not specify other non-resource URLs",
            ));
        }
    }
}

/// A policy rule's verbs: at least one, `*` alone, or kube's verbs.
fn verbs(rule: &Value, at: &str, causes: &mut Vec<Cause>) {
    const SUPPORTED: [&str; 9] = [
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "proxy",
        "update",
        "watch",
    ];
    let verbs = items(rule, "verbs");
    let field = format!("{at}.verbs");
    if verbs.is_empty() {
        causes.push(required(&field, "verbs must contain at least one value"));
    } else if verbs.contains(&json!("*")) {
        if verbs.len() > 1 {
            causes.push(invalid(
                &field,
                &Value::Array(verbs.to_vec()),
                "if '*' is present, must not specify other verbs",
            ));
        }
    } else if !verbs
        .iter()
        .all(|v| v.as_str().is_some_and(|v| SUPPORTED.contains(&v)))
    {
        causes.push(not_supported(
            &field,
            &Value::Array(verbs.to_vec()),
            &SUPPORTED,
        ));
    }
}

/// `ValidateFlowSchemaSubject`.
fn flow_subject(subject: &Value, at: &str, causes: &mut Vec<Cause>) {
    const OTHERS: [(&str, &str, &str); 3] = [
        (
            "ServiceAccount",
            "serviceAccount",
            "serviceAccount is forbidden when subject kind is not 'ServiceAccount'",
        ),
        (
            "User",
            "user",
            "user is forbidden when subject kind is not 'User'",
        ),
        (
            "Group",
            "group",
            "group is forbidden when subject kind is not 'Group'",
        ),
    ];
    let kind = text(subject, "kind");
    let Some(&(_, own, _)) = OTHERS.iter().find(|(k, _, _)| *k == kind) else {
        causes.push(not_supported(
            &format!("{at}.kind"),
            &json!(kind),
            &["Group", "ServiceAccount", "User"],
        ));
        return;
    };
    match present(subject, own) {
        None => causes.push(required(
            &format!("{at}.{own}"),
            &format!("{own} is required when subject kind is '{kind}'"),
        )),
        Some(named) => {
            if text(named, "name").is_empty() {
                causes.push(required(&format!("{at}.{own}.name"), ""));
            }
            if kind == "ServiceAccount" && text(named, "namespace").is_empty() {
                causes.push(required(
                    &format!("{at}.{own}.namespace"),
                    "must specify namespace for service account",
                ));
            }
        }
    }
    for (other, key, message) in OTHERS {
        if other != kind && present(subject, key).is_some() {
            causes.push(forbidden(&format!("{at}.{key}"), message));
        }
    }
}

fn priority_level(object: &Value, causes: &mut Vec<Cause>) {
    let name = text(object, "metadata.name");
    let kind = text(object, "spec.type");
    if (name == "exempt") != (kind == "Exempt") {
        causes.push(invalid(
            "spec.type",
            &json!(kind),
            "type must be 'Exempt' if and only if name is 'exempt'",
        ));
    }
    let limited = present(object, "spec.limited");
    let exempt = present(object, "spec.exempt");
    match kind {
        "Exempt" => {
            if limited.is_some() {
                causes.push(forbidden(
                    "spec.limited",
                    "must be nil if the type is not Limited",
                ));
            }
            if let Some(exempt) = exempt {
                non_negative_shares(exempt, "spec.exempt", causes);
                percent(
                    exempt,
                    "spec.exempt.lendablePercent",
                    "lendablePercent",
                    causes,
                );
            }
        }
        "Limited" => {
            if exempt.is_some() {
                causes.push(forbidden(
                    "spec.exempt",
                    "must be nil if the type is Limited",
                ));
            }
            match limited {
                None => causes.push(required(
                    "spec.limited",
                    "must not be empty when type is Limited",
                )),
                Some(limited) => limited_level(limited, causes),
            }
        }
        _ => causes.push(not_supported(
            "spec.type",
            &json!(kind),
            &["Exempt", "Limited"],
        )),
    }
    mandatory_spec(object, mandatory_priority_level_spec(name), causes);
    status_conditions(object, causes);
}

fn non_negative_shares(level: &Value, at: &str, causes: &mut Vec<Cause>) {
    if let Some(shares) = lookup(level, "nominalConcurrencyShares").and_then(Value::as_i64)
        && shares < 0
    {
        causes.push(invalid(
            &format!("{at}.nominalConcurrencyShares"),
            &json!(shares),
            "must be a non-negative integer",
        ));
    }
}

fn percent(level: &Value, field: &str, key: &str, causes: &mut Vec<Cause>) {
    if let Some(value) = lookup(level, key).and_then(Value::as_i64)
        && !(0..=100).contains(&value)
    {
        causes.push(invalid(
            field,
            &json!(value),
            "must be between 0 and 100, inclusive",
        ));
    }
}

/// `ValidateLimitedPriorityLevelConfiguration` for a `v1` request (zero shares allowed).
fn limited_level(limited: &Value, causes: &mut Vec<Cause>) {
    non_negative_shares(limited, "spec.limited", causes);
    let response = "spec.limited.limitResponse";
    let queuing = present(limited, "limitResponse.queuing");
    match text(limited, "limitResponse.type") {
        "Queue" => match queuing {
            None => causes.push(required(
                &format!("{response}.queuing"),
                "must not be empty if limited.limitResponse.type is Limited",
            )),
            Some(queuing) => queuing_configuration(queuing, causes),
        },
        "Reject" => {
            if queuing.is_some() {
                causes.push(forbidden(
                    &format!("{response}.queuing"),
                    "must be nil if limited.limitResponse.type is not Limited",
                ));
            }
        }
        other => causes.push(not_supported(
            &format!("{response}.type"),
            &json!(other),
            &["Queue", "Reject"],
        )),
    }
    percent(
        limited,
        "spec.limited.lendablePercent",
        "lendablePercent",
        causes,
    );
    if let Some(limit) = lookup(limited, "borrowingLimitPercent").and_then(Value::as_i64)
        && limit < 0
    {
        causes.push(invalid(
            "spec.limited.borrowingLimitPercent",
            &json!(limit),
            "if specified, must be a non-negative integer",
        ));
    }
}

/// `ValidatePriorityLevelQueuingConfiguration`.
fn queuing_configuration(queuing: &Value, causes: &mut Vec<Cause>) {
    /// Shuffle sharding's hash bits (`shufflesharding.MaxHashBits`).
    const MAX_HASH_BITS: f64 = 60.0;
    const MAX_QUEUES: i64 = 10_000_000;
    let at = "spec.limited.limitResponse.queuing";
    let value = |key: &str| lookup(queuing, key).and_then(Value::as_i64).unwrap_or(0);
    let (length, queues, hand) = (
        value("queueLengthLimit"),
        value("queues"),
        value("handSize"),
    );
    if length <= 0 {
        causes.push(invalid(
            &format!("{at}.queueLengthLimit"),
            &json!(length),
            "must be positive",
        ));
    }
    if queues <= 0 {
        causes.push(invalid(
            &format!("{at}.queues"),
            &json!(queues),
            "must be positive",
        ));
    } else if queues > MAX_QUEUES {
        causes.push(invalid(
            &format!("{at}.queues"),
            &json!(queues),
            &format!("must not be greater than {MAX_QUEUES}"),
        ));
    }
    #[allow(clippy::cast_precision_loss)]
    let entropy = ((queues.max(1) as f64).log2() * hand as f64).ceil();
    if hand <= 0 {
        causes.push(invalid(
            &format!("{at}.handSize"),
            &json!(hand),
            "must be positive",
        ));
    } else if hand > queues {
        causes.push(invalid(
            &format!("{at}.handSize"),
            &json!(hand),
            &format!("should not be greater than queues ({queues})"),
        ));
    } else if entropy > MAX_HASH_BITS {
        causes.push(invalid(
            &format!("{at}.handSize"),
            &json!(hand),
            &format!(
                "required entropy bits of deckSize {queues} and handSize {hand} should not be greater than 60"
            ),
        ));
    }
}

/// The 422's message for `object` of the built-in `group`/`plural` after its defaults (on an
/// update of `old`), `None` when it is valid: the kinds' modules' tests.
#[cfg(test)]
pub(crate) fn refusal(
    group: &str,
    plural: &str,
    object: Value,
    old: Option<&Value>,
) -> Option<String> {
    defaulted_refusal(group, plural, object, old).map(|e| e.message)
}

/// The causes (`field: message`) of [`refusal`]'s error, none when the object is valid.
#[cfg(test)]
pub(crate) fn refusal_causes(
    group: &str,
    plural: &str,
    object: Value,
    old: Option<&Value>,
) -> Vec<String> {
    defaulted_refusal(group, plural, object, old).map_or_else(Vec::new, |e| e.cause_lines())
}

#[cfg(test)]
fn defaulted_refusal(
    group: &str,
    plural: &str,
    mut object: Value,
    old: Option<&Value>,
) -> Option<ApiError> {
    let def = crate::resources::builtin_resources()
        .into_iter()
        .flat_map(|def| {
            let views = crate::versions::builtin_views(&def);
            std::iter::once(def).chain(views.into_iter().map(|(view, _)| view))
        })
        .find(|d| d.group == group && d.plural == plural)
        .unwrap();
    crate::defaults::apply_defaults(&def, &mut object);
    // The stored object as the server hands it over: as kube reads it.
    let old = old.map(|old| crate::defaults::stored_as_read(&def, old));
    validate(&def, &object, old.as_deref()).err()
}

mod access;
mod apps;
mod autoscaling;
mod batch;
mod common;
mod coordination;
mod discovery;
mod events;
mod limit_range;
mod namespaces;
mod networking;
mod nodes;
mod persistent_volumes;
mod pod_spec;
mod policy;
mod quota;
mod rbac;
pub mod services;
mod status;
mod storage;

/// kube's `ValidateTolerations` of `tolerations` at the path `at` (`spec.tolerations`): its
/// field errors (admission plugins' configurations hold tolerations too).
#[must_use]
pub fn toleration_errors(tolerations: &[Value], at: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    pod_spec::tolerations(tolerations, at, &mut causes);
    causes
}
#[cfg(test)]
mod pod_spec_tests;
pub mod webhooks;
pub mod workloads;

#[cfg(test)]
mod tests;

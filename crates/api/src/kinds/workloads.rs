//! The core and workload kinds' rules users meet first, as kube-apiserver's
//! `pkg/apis/{core,apps,batch}/validation` and the v1 conversions apply them: ConfigMaps,
//! Secrets, Pods, Deployments, ReplicaSets, StatefulSets, DaemonSets, ReplicationControllers,
//! Jobs and CronJobs' pod templates (CronJobs' other rules: [`super::batch`]).
//!
//! ## Guarantees
//! - Conversion ([`convert`]): a Secret's `stringData` is write-only, as in kube's v1
//!   conversion: each of its keys overwrites `data`'s with the base64 of its value, and it is
//!   never stored. (A Namespace's `kubernetes.io/metadata.name` label is reset to its name on
//!   every write by `meta`, as kube's `SetDefaults_Namespace`.)
//! - Validation ([`validate`]), with kube's paths and wording:
//!   - ConfigMap and Secret keys are config keys (`data[bad key]: Invalid value: "bad key": a
//!     valid config key must consist of ...`); a ConfigMap key is in `data` or `binaryData`, not
//!     both; a Secret of a known `type` has the keys its type needs (`kubernetes.io/tls`:
//!     `tls.crt`, `tls.key`; `kubernetes.io/basic-auth`, `kubernetes.io/ssh-auth`, the docker
//!     configs, `kubernetes.io/service-account-token`'s annotation); a docker config's
//!     contents are a JSON object (`data[.dockerconfigjson]: Invalid value: "<secret contents
//!     redacted>": <Go's json error>`); once `immutable` is true,
//!     `immutable`, `data` and `binaryData` do not change (`data: Forbidden: field is immutable
//!     when `immutable` is set`), and a Secret's `type` never changes.
//!   - Pod specs (pods and every template, CronJobs' job templates included — but a
//!     StatefulSet's, which kube leaves unchecked but for its restart policy and
//!     `activeDeadlineSeconds`, its volume claim templates being volumes it does not list): kube's
//!     `ValidatePodSpec` as [`super::pod_spec`] states it — volumes, containers, init and
//!     ephemeral containers (ports, env, mounts, resources, probes, lifecycle, security
//!     contexts, restart policies) and the pod-level fields, in kube's order; a Pod's
//!     containers have an image (templates' too, as kube's `validateContainerCommon`). The
//!     seccomp and AppArmor annotations of a Pod or template (StatefulSets' included) are
//!     checked before its spec, their agreement with the profile fields after it (a Pod's
//!     on create only); a Pod update that changes its status IPs gets kube's
//!     `validatePodIPs` / `validateHostIPs`.
//!   - A created Pod's pod (anti-)affinity terms get their `matchLabelKeys` /
//!     `mismatchLabelKeys` merged into their selectors before validation
//!     ([`prepare_created`], kube's `mutatePodAffinity`), and its AppArmor annotations and
//!     profile fields are synced as kube's `applyAppArmorVersionSkew` syncs them (a profile
//!     field gets its annotation; an annotation, on a container without a profile field, its
//!     field). Differs from kube: the `deprecated since v1.30; use the "appArmorProfile"
//!     field instead` warning kube gives a created Pod with such an annotation is not given
//!     (templates get it).
//!   - Workloads: `replicas` and `minReadySeconds` are not negative (a Job's spec:
//!     [`super::batch::job_spec`]); a ReplicationController has a selector that is not
//!     empty and matches its template's labels, and no `activeDeadlineSeconds`
//!     (`ValidateReplicationControllerSpec`); Deployments, ReplicaSets, StatefulSets and
//!     DaemonSets have a selector that is not empty, matches their template's labels (`spec.template.
//!     metadata.labels: Invalid value: map[string]string{"a":"c"}: `selector` does not match
//!     template `labels``); a Deployment's, ReplicaSet's and DaemonSet's selector never changes
//!     (`field is immutable`, printed as Go's `%#v` of the selector; a StatefulSet's is kept by
//!     its update rule, [`super::apps`], a Job's by [`super::batch`]); their pods restart
//!     `Always`; a Job's `OnFailure` or `Never`.
//!   - Workloads' selectors are label selectors (`ValidateLabelSelector`: operators, values,
//!     keys and values' syntax); a malformed one is also `spec.selector: Invalid value: ...:
//!     invalid label selector`, and is not matched against the template's labels.
//! - The apps workloads' other spec fields (strategies, `revisionHistoryLimit`,
//!   `progressDeadlineSeconds`, a StatefulSet's policies) are [`super::apps`]'s, and their
//!   `/status` writes [`super::status`]'s.
//! - Not checked (kube checks them): what [`super::pod_spec`] lists, a Job's selector (kube
//!   generates it) and a template's metadata.

use std::collections::BTreeMap;

use base64::Engine;
use serde_json::{Map, Value};

use super::pod_spec;
use crate::field::{Cause, forbidden, go_quote, invalid, not_supported, required};
use crate::label_selector::label_selector_matches;
use crate::resources::ResourceDef;

/// kube's detail for a field an immutable ConfigMap or Secret may not change.
const IMMUTABLE_SET: &str = "field is immutable when `immutable` is set";

/// Applies the v1 conversions that rewrite fields (a Secret's `stringData`, see the module's
/// guarantees) to a created or updated object of `def`'s kind, before its defaults.
pub fn convert(def: &ResourceDef, object: &mut Value) {
    if def.group.is_empty() && def.kind == "Secret" {
        string_data(object);
    }
}

/// What kube's create strategies add to a new object of `def`'s kind (metadata's name and uid
/// set): a Job without `manualSelector` gets the labels `job-name`,
/// `batch.kubernetes.io/job-name`, `controller-uid` and `batch.kubernetes.io/controller-uid`
/// on its pod template and a selector of its uid (`generateSelector`), labels it sets itself
/// kept; a Pod's affinity terms get their `matchLabelKeys` / `mismatchLabelKeys` merged into
/// their selectors (`merge_label_keys`), and its AppArmor annotations and fields are synced
/// (`app_armor_version_skew`).
pub fn prepare_created(def: &ResourceDef, object: &mut Value) {
    if (def.group.as_str(), def.kind.as_str()) == ("", "Pod") {
        merge_label_keys(object);
        app_armor_version_skew(object);
        return;
    }
    if (def.group.as_str(), def.kind.as_str()) != ("batch", "Job")
        || object
            .pointer("/spec/manualSelector")
            .and_then(Value::as_bool)
            == Some(true)
    {
        return;
    }
    let text = |pointer: &str| {
        object
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let (name, uid) = (text("/metadata/name"), text("/metadata/uid"));
    let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    let template = map_at(spec, "template");
    let labels = map_at(map_at(template, "metadata"), "labels");
    for (key, value) in [
        ("job-name", &name),
        ("batch.kubernetes.io/job-name", &name),
        ("controller-uid", &uid),
        ("batch.kubernetes.io/controller-uid", &uid),
    ] {
        labels
            .entry(key)
            .or_insert_with(|| Value::String(value.clone()));
    }
    let selector = map_at(map_at(spec, "selector"), "matchLabels");
    selector
        .entry("batch.kubernetes.io/controller-uid")
        .or_insert_with(|| Value::String(uid));
}

/// What kube's `applyAppArmorVersionSkew` does to a created Pod (not a Windows one): for each
/// container (init, regular, ephemeral), without its annotation
/// `container.apparmor.security.beta.kubernetes.io/<name>`, the annotation is written from the
/// container's `appArmorProfile`, else the pod's (`unconfined`, `runtime/default`,
/// `localhost/<profile>`); with the annotation but no container profile, the container gets
/// the profile the annotation names, when that profile is valid and differs from the pod's,
/// and the create is warned that the annotation is deprecated unless it names the pod's
/// profile. A template's are left as they are.
#[derive(Default)]
struct AppArmorSkew {
    /// Annotations to add: key, value.
    annotations: Vec<(String, String)>,
    /// Container profiles to set: the list, the container's index, the profile.
    fields: Vec<(&'static str, usize, Value)>,
    /// kube's warnings, in container order.
    warnings: Vec<String>,
}

fn app_armor_skew(pod: &Value) -> AppArmorSkew {
    use crate::pod_security::APPARMOR_ANNOTATION_PREFIX;
    let mut skew = AppArmorSkew::default();
    let Some(spec) = pod.get("spec").filter(|spec| spec.is_object()) else {
        return skew;
    };
    if spec.pointer("/os/name").and_then(Value::as_str) == Some("windows") {
        return skew;
    }
    let profile_of = |holder: &Value| {
        holder
            .pointer("/securityContext/appArmorProfile")
            .filter(|profile| profile.is_object())
            .cloned()
    };
    let pod_profile = profile_of(spec);
    let annotations = pod
        .pointer("/metadata/annotations")
        .and_then(Value::as_object);
    for list in ["initContainers", "containers", "ephemeralContainers"] {
        for (index, container) in spec
            .get(list)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let name = container.get("name").and_then(Value::as_str).unwrap_or("");
            let key = format!("{APPARMOR_ANNOTATION_PREFIX}{name}");
            let container_profile = profile_of(container);
            match annotations.and_then(|a| a.get(&key)) {
                None => {
                    let value = container_profile
                        .as_ref()
                        .or(pod_profile.as_ref())
                        .map(app_armor_annotation_for_field)
                        .unwrap_or_default();
                    if !value.is_empty() {
                        skew.annotations.push((key, value));
                    }
                }
                Some(annotation) if container_profile.is_none() => {
                    let field = annotation
                        .as_str()
                        .and_then(app_armor_field_for_annotation)
                        .filter(|field| {
                            let mut causes = Vec::new();
                            pod_spec::app_armor_profile(field, "", &mut causes);
                            causes.is_empty()
                        });
                    let same = field
                        .as_ref()
                        .is_some_and(|field| same_app_armor_profile(field, pod_profile.as_ref()));
                    if !same {
                        skew.warnings.push(format!(
                            r#"metadata.annotations[{key}]: deprecated since v1.30; use the "appArmorProfile" field instead"#
                        ));
                        if let Some(field) = field {
                            skew.fields.push((list, index, field));
                        }
                    }
                }
                Some(_) => {}
            }
        }
    }
    skew
}

/// Applies [`app_armor_skew`] to a created Pod.
fn app_armor_version_skew(pod: &mut Value) {
    let AppArmorSkew {
        annotations: new_annotations,
        fields: new_fields,
        ..
    } = app_armor_skew(pod);
    if !new_annotations.is_empty()
        && let Some(meta) = pod.get_mut("metadata").and_then(Value::as_object_mut)
    {
        let annotations = map_at(meta, "annotations");
        for (key, value) in new_annotations {
            annotations.insert(key, Value::String(value));
        }
    }
    for (list, index, field) in new_fields {
        if let Some(Value::Object(container)) = pod
            .get_mut("spec")
            .and_then(|spec| spec.get_mut(list))
            .and_then(|containers| containers.get_mut(index))
        {
            map_at(container, "securityContext").insert("appArmorProfile".to_owned(), field);
        }
    }
}

/// The warnings kube's create strategy gives while it prepares a new object of `def`'s kind
/// (`object` as the client sent it): a Pod's deprecated AppArmor annotations that
/// [`prepare_created`] turns into profile fields, or that name no valid profile.
#[must_use]
pub fn created_warnings(def: &ResourceDef, object: &Value) -> Vec<String> {
    if (def.group.as_str(), def.kind.as_str()) == ("", "Pod") {
        app_armor_skew(object).warnings
    } else {
        Vec::new()
    }
}

/// kube's `appArmorAnnotationForField`: the annotation naming an AppArmor profile field, or
/// `""` for a `Localhost` type without its profile or an unknown type.
fn app_armor_annotation_for_field(profile: &Value) -> String {
    match profile.get("type").and_then(Value::as_str) {
        Some("Unconfined") => "unconfined".to_owned(),
        Some("RuntimeDefault") => "runtime/default".to_owned(),
        Some("Localhost") => profile
            .get("localhostProfile")
            .and_then(Value::as_str)
            .map(|local| format!("localhost/{local}"))
            .unwrap_or_default(),
        _ => String::new(),
    }
}

/// kube's `apparmorFieldForAnnotation`: the profile field an annotation names, if any.
fn app_armor_field_for_annotation(annotation: &str) -> Option<Value> {
    match annotation {
        "unconfined" => Some(serde_json::json!({"type": "Unconfined"})),
        "runtime/default" => Some(serde_json::json!({"type": "RuntimeDefault"})),
        _ => annotation
            .strip_prefix("localhost/")
            .filter(|local| !local.is_empty())
            .map(|local| serde_json::json!({"type": "Localhost", "localhostProfile": local})),
    }
}

/// Go's `apiequality.Semantic.DeepEqual` of two `AppArmorProfile`s (`type`, and the optional
/// `localhostProfile`); `None` is a nil pod profile.
fn same_app_armor_profile(field: &Value, pod: Option<&Value>) -> bool {
    let Some(pod) = pod else {
        return false;
    };
    let part =
        |profile: &Value, key: &str| profile.get(key).filter(|value| !value.is_null()).cloned();
    part(field, "type") == part(pod, "type")
        && part(field, "localhostProfile") == part(pod, "localhostProfile")
}

/// kube's `mutatePodAffinity` (`MatchLabelKeysInPodAffinity`, on by default since 1.31) on a
/// created Pod: each pod (anti-)affinity term with a `labelSelector` gets, for each of its
/// `matchLabelKeys` the pod has as a label, the requirement `key In (value)`, and for each
/// `mismatchLabelKeys` one `key NotIn (value)`, appended to the selector's
/// `matchExpressions`. The keys' lists are kept; a template's terms are left as they are.
fn merge_label_keys(pod: &mut Value) {
    let labels = pod
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    for kind in ["podAffinity", "podAntiAffinity"] {
        let Some(affinity) = pod
            .pointer_mut(&format!("/spec/affinity/{kind}"))
            .and_then(Value::as_object_mut)
        else {
            continue;
        };
        for (list, nested) in [
            ("requiredDuringSchedulingIgnoredDuringExecution", false),
            ("preferredDuringSchedulingIgnoredDuringExecution", true),
        ] {
            for term in affinity
                .get_mut(list)
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                let term = if nested {
                    term.get_mut("podAffinityTerm")
                } else {
                    Some(term)
                };
                if let Some(Value::Object(term)) = term {
                    merge_term(term, &labels);
                }
            }
        }
    }
}

/// `applyMatchLabelKeysAndMismatchLabelKeys` of one term.
fn merge_term(term: &mut Map<String, Value>, labels: &Map<String, Value>) {
    let keys = |field: &str| -> Vec<String> {
        term.get(field)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|k| k.as_str().map(str::to_owned))
            .collect()
    };
    let (matches, mismatches) = (keys("matchLabelKeys"), keys("mismatchLabelKeys"));
    let Some(Value::Object(selector)) = term.get_mut("labelSelector") else {
        return;
    };
    let added: Vec<Value> = [(matches, "In"), (mismatches, "NotIn")]
        .into_iter()
        .flat_map(|(keys, operator)| {
            keys.into_iter().filter_map(move |key| {
                let value = labels.get(&key)?;
                Some(serde_json::json!({"key": key, "operator": operator, "values": [value]}))
            })
        })
        .collect();
    if added.is_empty() {
        return;
    }
    let expressions = selector
        .entry("matchExpressions")
        .or_insert_with(|| Value::Array(Vec::new()));
    match expressions {
        Value::Array(expressions) => expressions.extend(added),
        other => *other = Value::Array(added),
    }
}

/// The map at `key` of `map`, made one when absent or not a map (Go's nested structs and
/// maps are made as they are filled).
fn map_at<'m>(map: &'m mut Map<String, Value>, key: &str) -> &'m mut Map<String, Value> {
    let entry = map.entry(key).or_insert_with(|| Value::Object(Map::new()));
    if !entry.is_object() {
        *entry = Value::Object(Map::new());
    }
    match entry {
        Value::Object(inner) => inner,
        _ => unreachable!("made a map above"),
    }
}

/// kube's `Convert_v1_Secret_To_core_Secret`: `stringData` overwrites `data`, and goes.
fn string_data(object: &mut Value) {
    let Some(secret) = object.as_object_mut() else {
        return;
    };
    let Some(strings) = secret.remove("stringData") else {
        return;
    };
    let Value::Object(strings) = strings else {
        return;
    };
    if strings.is_empty() {
        return;
    }
    let data = secret
        .entry("data")
        .or_insert_with(|| Value::Object(Map::new()));
    if !data.is_object() {
        *data = Value::Object(Map::new());
    }
    if let Value::Object(data) = data {
        for (key, value) in strings {
            let text = match value {
                Value::String(text) => text,
                Value::Null => String::new(),
                other => other.to_string(),
            };
            let encoded = base64::engine::general_purpose::STANDARD.encode(text.as_bytes());
            data.insert(key, Value::String(encoded));
        }
    }
}

/// The causes of `object` (and of its change from `old`) under the rules of the module, for
/// the kinds it covers.
pub fn validate(def: &ResourceDef, object: &Value, old: Option<&Value>, causes: &mut Vec<Cause>) {
    match (def.group.as_str(), def.kind.as_str()) {
        ("", "ConfigMap") => config_map(object, old, causes),
        ("", "Secret") => secret(object, old, causes),
        ("", "Pod") => {
            let name = object
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("");
            let metadata = object.get("metadata");
            pod_spec::pod_annotations(metadata, object.get("spec"), "metadata.annotations", causes);
            pod_spec::validate(
                object.get("spec"),
                "spec",
                true,
                name,
                old.is_none(),
                causes,
            );
            match old {
                None => {
                    pod_spec::annotations_match_fields(metadata, object.get("spec"), "spec", causes)
                }
                Some(old) => pod_spec::status_ips(object, old, causes),
            }
        }
        ("", "PodTemplate") => {
            let template = object.get("template");
            if let Some(template) = template {
                template_metadata(template, "template", causes);
            }
            let metadata = template.and_then(|t| t.get("metadata"));
            let spec = object.pointer("/template/spec");
            pod_spec::pod_annotations(metadata, spec, "template.annotations", causes);
            pod_spec::validate(spec, "template.spec", false, "", false, causes);
            pod_spec::annotations_match_fields(metadata, spec, "template.spec", causes);
        }
        ("", "ReplicationController") => replication_controller(object, causes),
        ("apps", kind @ ("Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet")) => {
            if kind != "DaemonSet" {
                nonnegative(object, "replicas", causes);
            }
            nonnegative(object, "minReadySeconds", causes);
            selected(object, kind, causes);
            template(
                object,
                "spec.template",
                &["Always"],
                kind == "StatefulSet",
                causes,
            );
            // A StatefulSet's selector is one of the spec fields its update rule keeps
            // ([`super::apps`]); kube's StatefulSet strategy has no check of its own for it.
            if let Some(old) = old.filter(|_| kind != "StatefulSet") {
                let (now, before) = (
                    object.pointer("/spec/selector"),
                    old.pointer("/spec/selector"),
                );
                if now != before {
                    causes.push(invalid(
                        "spec.selector",
                        &go_selector(now),
                        "field is immutable",
                    ));
                }
            }
        }
        _ => {}
    }
}

/// kube's `ValidateReplicationControllerSpec`: `minReadySeconds`, a selector that is not
/// empty, `replicas`, then the template (`ValidatePodTemplateSpecForRC`): the selector
/// matches its labels, its metadata and spec, restart policy `Always` and no
/// `activeDeadlineSeconds`.
fn replication_controller(object: &Value, causes: &mut Vec<Cause>) {
    nonnegative(object, "minReadySeconds", causes);
    let selector = object
        .pointer("/spec/selector")
        .and_then(Value::as_object)
        .filter(|selector| !selector.is_empty());
    if selector.is_none() {
        causes.push(required("spec.selector", ""));
    }
    if object.pointer("/spec/replicas").is_none_or(Value::is_null) {
        causes.push(required("spec.replicas", ""));
    } else {
        nonnegative(object, "replicas", causes);
    }
    let template_present = object
        .pointer("/spec/template")
        .is_some_and(|t| !t.is_null());
    if let Some(selector) = selector
        && template_present
    {
        let labels = object.pointer("/spec/template/metadata/labels");
        let label = |key: &str| labels.and_then(|l| l.get(key)).and_then(Value::as_str);
        if selector
            .iter()
            .any(|(key, value)| label(key) != value.as_str())
        {
            causes.push(invalid(
                "spec.template.metadata.labels",
                &go_string_map(labels),
                "`selector` does not match template `labels`",
            ));
        }
    }
    template(object, "spec.template", &["Always"], false, causes);
    if let Some(deadline) = object
        .pointer("/spec/template/spec/activeDeadlineSeconds")
        .and_then(Value::as_i64)
    {
        causes.push(invalid(
            "spec.template.spec.activeDeadlineSeconds",
            &deadline.to_string(),
            "activeDeadlineSeconds in ReplicationController is not Supported",
        ));
    }
}

/// `spec.<field>` of `object` must not be negative (`ValidateNonnegativeField`).
fn nonnegative(object: &Value, field: &str, causes: &mut Vec<Cause>) {
    if let Some(value) = object
        .pointer(&format!("/spec/{field}"))
        .and_then(Value::as_i64)
        .filter(|value| *value < 0)
    {
        causes.push(invalid(
            &format!("spec.{field}"),
            &value.to_string(),
            "must be greater than or equal to 0",
        ));
    }
}

/// A pod template's labels and annotations (`ValidatePodTemplateSpec`: kube's
/// `ValidateLabels` and `ValidateAnnotations` at `{path}.labels` and `{path}.annotations` — the
/// template's `ObjectMeta` is embedded, so its path has no `metadata`), before its spec.
fn template_metadata(template: &Value, path: &str, causes: &mut Vec<Cause>) {
    let Some(metadata) = template.get("metadata").and_then(Value::as_object) else {
        return;
    };
    let maps: Map<String, Value> = metadata
        .iter()
        .filter(|(key, _)| matches!(key.as_str(), "labels" | "annotations"))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    // A wrong JSON type was refused when the body was decoded against the kind's schema.
    let _ = crate::names::validate_meta_maps(path, &maps, causes);
}

/// A workload's pod template at `path`: its metadata, its spec, and the restart policies it
/// may have.
pub(super) fn template(
    object: &Value,
    path: &str,
    restart: &[&str],
    stateful: bool,
    causes: &mut Vec<Cause>,
) {
    let pointer = format!("/{}", path.replace('.', "/"));
    let Some(template) = object.pointer(&pointer).filter(|t| !t.is_null()) else {
        causes.push(required(path, ""));
        return;
    };
    template_metadata(template, path, causes);
    pod_spec::pod_annotations(
        template.get("metadata"),
        template.get("spec"),
        &format!("{path}.annotations"),
        causes,
    );
    if stateful {
        // kube's `ValidatePodTemplateSpecForStatefulSet` leaves the spec unchecked (its volume
        // claim templates are volumes the spec does not list) but for its restart policy and
        // `activeDeadlineSeconds`.
        if template
            .pointer("/spec/activeDeadlineSeconds")
            .is_some_and(|v| !v.is_null())
        {
            causes.push(forbidden(
                &format!("{path}.spec.activeDeadlineSeconds"),
                "activeDeadlineSeconds in StatefulSet is not Supported",
            ));
        }
    } else {
        pod_spec::validate(
            template.get("spec"),
            &format!("{path}.spec"),
            false,
            "",
            false,
            causes,
        );
        pod_spec::annotations_match_fields(
            template.get("metadata"),
            template.get("spec"),
            &format!("{path}.spec"),
            causes,
        );
    }
    let policy = template
        .pointer("/spec/restartPolicy")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if restart == ["OnFailure", "Never"] && matches!(policy, "" | "Always") {
        // A Job's pods: `validateJobSpec` (a v1 pod spec defaults its policy to `Always`).
        causes.push(required(
            &format!("{path}.spec.restartPolicy"),
            "valid values: \"OnFailure\", \"Never\"",
        ));
    } else if !restart.contains(&policy) {
        causes.push(not_supported(
            &format!("{path}.spec.restartPolicy"),
            &go_quote(policy),
            restart,
        ));
    }
}

/// A selector that exists, is not empty and matches the template's labels.
fn selected(object: &Value, kind: &str, causes: &mut Vec<Cause>) {
    let selector = object.pointer("/spec/selector").filter(|s| !s.is_null());
    let Some(selector) = selector else {
        causes.push(required("spec.selector", ""));
        return;
    };
    let before = causes.len();
    pod_spec::label_selector(Some(selector), "spec.selector", causes);
    let malformed = causes.len() > before;
    let count = |key: &str| {
        selector.get(key).map_or(0, |v| {
            v.as_object().map_or(0, Map::len) + v.as_array().map_or(0, Vec::len)
        })
    };
    if count("matchLabels") + count("matchExpressions") == 0 {
        // kube's ReplicaSet validation says "deployment" too.
        let what = match kind {
            "StatefulSet" => "statefulset",
            "DaemonSet" => "daemonset",
            _ => "deployment",
        };
        causes.push(invalid(
            "spec.selector",
            &go_selector(Some(selector)),
            &format!("empty selector is invalid for {what}"),
        ));
        return;
    }
    if malformed {
        // `LabelSelectorAsSelector` refuses it too.
        causes.push(invalid(
            "spec.selector",
            &go_selector(Some(selector)),
            "invalid label selector",
        ));
        return;
    }
    let labels = object.pointer("/spec/template/metadata/labels");
    let label = |key: &str| labels.and_then(|l| l.get(key)).and_then(Value::as_str);
    if label_selector_matches(selector, label) == Some(false) {
        causes.push(invalid(
            "spec.template.metadata.labels",
            &go_string_map(labels),
            "`selector` does not match template `labels`",
        ));
    }
}

/// A `map[string]string` as Go's `%#v` prints it (`map[string]string{"a":"b"}`, keys sorted;
/// `map[string]string(nil)` when absent).
fn go_string_map(map: Option<&Value>) -> String {
    let Some(map) = map.and_then(Value::as_object) else {
        return "map[string]string(nil)".to_owned();
    };
    let sorted: BTreeMap<&String, &Value> = map.iter().collect();
    let pairs: Vec<String> = sorted
        .into_iter()
        .map(|(k, v)| format!("{}:{}", go_quote(k), go_quote(v.as_str().unwrap_or(""))))
        .collect();
    format!("map[string]string{{{}}}", pairs.join(", "))
}

/// A label selector as Go's `%#v` prints kube's `v1.LabelSelector`.
pub(super) fn go_selector(selector: Option<&Value>) -> String {
    let Some(selector) = selector.filter(|s| !s.is_null()) else {
        return "null".to_owned();
    };
    let expressions = match selector.get("matchExpressions").and_then(Value::as_array) {
        None => "[]v1.LabelSelectorRequirement(nil)".to_owned(),
        Some(items) => {
            let printed: Vec<String> = items
                .iter()
                .map(|r| {
                    let text = |k: &str| go_quote(r.get(k).and_then(Value::as_str).unwrap_or(""));
                    let values = match r.get("values").and_then(Value::as_array) {
                        None => "[]string(nil)".to_owned(),
                        Some(values) => {
                            let quoted: Vec<String> = values
                                .iter()
                                .map(|v| go_quote(v.as_str().unwrap_or("")))
                                .collect();
                            format!("[]string{{{}}}", quoted.join(", "))
                        }
                    };
                    format!(
                        "v1.LabelSelectorRequirement{{Key:{}, Operator:{}, Values:{values}}}",
                        text("key"),
                        text("operator")
                    )
                })
                .collect();
            format!("[]v1.LabelSelectorRequirement{{{}}}", printed.join(", "))
        }
    };
    format!(
        "v1.LabelSelector{{MatchLabels:{}, MatchExpressions:{expressions}}}",
        go_string_map(selector.get("matchLabels"))
    )
}

/// `ValidateConfigMap` and `ValidateConfigMapUpdate`.
fn config_map(object: &Value, old: Option<&Value>, causes: &mut Vec<Cause>) {
    let data = object.get("data").and_then(Value::as_object);
    let binary = object.get("binaryData").and_then(Value::as_object);
    for (bag, keys) in [("data", data), ("binaryData", binary)] {
        let mut keys: Vec<&String> = keys.into_iter().flat_map(Map::keys).collect();
        keys.sort();
        for key in keys {
            crate::names::config_key(|| format!("{bag}[{key}]"), key, causes);
            if bag == "data" && binary.is_some_and(|b| b.contains_key(key)) {
                causes.push(invalid(
                    &format!("data[{key}]"),
                    &go_quote(key),
                    "duplicate of key present in binaryData",
                ));
            }
        }
    }
    immutable_contents(object, old, &["data", "binaryData"], causes);
}

/// `ValidateSecret` and `ValidateSecretUpdate`.
fn secret(object: &Value, old: Option<&Value>, causes: &mut Vec<Cause>) {
    let data = object.get("data").and_then(Value::as_object);
    let mut keys: Vec<&String> = data.into_iter().flat_map(Map::keys).collect();
    keys.sort();
    for key in keys {
        crate::names::config_key(|| format!("data[{key}]"), key, causes);
    }
    let has = |key: &str| data.is_some_and(|d| d.contains_key(key));
    let secret_type = object.get("type").and_then(Value::as_str).unwrap_or("");
    match secret_type {
        "kubernetes.io/service-account-token" => {
            let named = object
                .pointer("/metadata/annotations/kubernetes.io~1service-account.name")
                .and_then(Value::as_str)
                .is_some_and(|n| !n.is_empty());
            if !named {
                causes.push(required(
                    "metadata.annotations[kubernetes.io/service-account.name]",
                    "",
                ));
            }
        }
        "kubernetes.io/dockercfg" | "kubernetes.io/dockerconfigjson" => {
            let key = if secret_type.ends_with("json") {
                ".dockerconfigjson"
            } else {
                ".dockercfg"
            };
            match data.and_then(|d| d.get(key)) {
                None => causes.push(required(&format!("data[{key}]"), "")),
                Some(contents) => {
                    if let Some(error) = docker_config_error(contents) {
                        causes.push(invalid(
                            &format!("data[{key}]"),
                            "\"<secret contents redacted>\"",
                            &error,
                        ));
                    }
                }
            }
        }
        "kubernetes.io/basic-auth" if !has("username") && !has("password") => {
            causes.push(required("data[username]", ""));
            causes.push(required("data[password]", ""));
        }
        "kubernetes.io/ssh-auth" => {
            let key = data
                .and_then(|d| d.get("ssh-privatekey"))
                .and_then(Value::as_str);
            if key.is_none_or(str::is_empty) {
                causes.push(required("data[ssh-privatekey]", ""));
            }
        }
        "kubernetes.io/tls" => {
            for key in ["tls.crt", "tls.key"] {
                if !has(key) {
                    causes.push(required(&format!("data[{key}]"), ""));
                }
            }
        }
        _ => {}
    }
    if let Some(old) = old {
        let old_type = old.get("type").and_then(Value::as_str).unwrap_or("");
        if old_type != secret_type {
            causes.push(invalid(
                "type",
                &go_quote(secret_type),
                "field is immutable",
            ));
        }
    }
    immutable_contents(object, old, &["data"], causes);
}

/// Why a docker config Secret's contents (base64, as stored) are no JSON object, in the words of
/// Go's `json.Unmarshal` into a `map[string]interface{}`: its syntax error, or the type
/// error of a value that is no object (`null` is an empty map).
fn docker_config_error(contents: &Value) -> Option<String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(contents.as_str().unwrap_or(""))
        // Stored data was base64 when decoded; nothing else is checked here.
        .ok()?;
    if let Some(error) = crate::go_json::syntax_error(&bytes) {
        return Some(error);
    }
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Object(_) | Value::Null) | Err(_) => None,
        Ok(other) => Some(format!(
            "json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
            crate::go_json::go_kind(&other)
        )),
    }
}

/// A ConfigMap's or Secret's contents once the stored object is `immutable`.
fn immutable_contents(
    object: &Value,
    old: Option<&Value>,
    fields: &[&str],
    causes: &mut Vec<Cause>,
) {
    let Some(old) = old else { return };
    let immutable = |o: &Value| o.get("immutable").and_then(Value::as_bool) == Some(true);
    if !immutable(old) {
        return;
    }
    if !immutable(object) {
        causes.push(forbidden("immutable", IMMUTABLE_SET));
    }
    let field = |o: &Value, key: &str| o.get(key).filter(|v| !v.is_null()).cloned();
    for key in fields {
        if field(object, key) != field(old, key) {
            causes.push(forbidden(key, IMMUTABLE_SET));
        }
    }
}

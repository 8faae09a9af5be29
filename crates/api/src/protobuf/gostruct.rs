//! A built-in object's JSON as kube-apiserver's Go structs leave it: what Go's `encoding/json`
//! gives when it decodes the body into the kind's struct and encodes the struct again.
//!
//! kube-apiserver decodes every create and update body, and every patch's result, into the
//! kind's Go struct before admission, defaulting, validation and managed fields
//! (`k8s.io/apiserver/pkg/endpoints/handlers/create.go`, `update.go`, `patch.go`: the decoder,
//! then `fieldmanager.UpdateNoErrors`; an apply's merged result is converted to the struct
//! too). So what a client sends is normalised: [`normalize`] does the same to the JSON, with
//! the Go field shapes of the protobuf tables (`omitempty`, pointer, slice, struct; k8s.io/api
//! 1.33's struct tags).
//!
//! ## Guarantees
//! For every field of every message the kind's object reaches (nested structs, slices of
//! structs, `json:",inline"` structs):
//! - an `omitempty` value field holding its zero (`""`, `0`, `false`, an empty map, slice or
//!   base64 string) is left out, as is `null` in any `omitempty` field that is not a struct
//!   and a `nil` pointer or slice with `omitempty`;
//! - `null` in, or absence of, a field without `omitempty` is its Go zero: `null` for a slice,
//!   map, `[]byte` or pointer, `""`, `0` or `false` for a scalar;
//! - a struct field (whatever its tag: Go never leaves a struct out) that is absent or `null`
//!   is its zero struct, recursively its fields without `omitempty` and its struct fields
//!   (`resources: {}`, a ReplicaSet's `status: {"replicas": 0}`, a template's
//!   `metadata: {"creationTimestamp": null}`);
//! - the types with their own `MarshalJSON` give what it gives for their zero: `metav1.Time`
//!   and `MicroTime` `null`, `IntOrString` `0`, `Quantity` `"0"`, `FieldsV1` and
//!   `RawExtension` `null`; a `RawExtension`'s or `FieldsV1`'s content is kept as it is;
//! - `null` items of a slice, and `null` values of a map, are their element's zero (`""` in a
//!   `map[string]string`, `"0"` in a `ResourceList`, the zero struct in a slice of structs).
//!
//! Keys no table names (`apiVersion`, `kind`, and whatever the unknown-field pruning left) and
//! values of another JSON type than the field's (the decode check refuses them) are left as
//! they are. Nothing is allocated unless something changes, and the walk is bounded by the
//! object (each value is visited once; zero structs are as deep as the tables).
//!
//! ## Bound
//! A zero struct can be far larger than what asked for it: a `null` item of a slice of
//! containers is two dozen bytes of zero `Container`, so a 3 MiB body of `null`s would become
//! tens of megabytes of JSON and hundreds of megabytes of memory. The zeros [`normalize`]
//! inserts are disjoint parts of its result, so once their compact JSON passes
//! [`OBJECT_SIZE_MAX_BYTES`] the result is larger than the server stores, and [`normalize`]
//! stops there and refuses the object with the 413 its size would get (`Request entity too
//! large`). An object that fits is never refused; the memory an object can grow by is bounded
//! by the limit's bytes of zeros.
//!
//! Custom resources: kube-apiserver coerces their `metadata` through `ObjectMeta`
//! (apiextensions-apiserver `pkg/apiserver/schema/objectmeta/coerce.go`: `GetObjectMeta`, then
//! `SetObjectMeta` with the unstructured converter, which leaves out `omitempty` zeros as
//! `encoding/json` does), so [`normalize`] normalises a custom resource's `metadata` the same
//! way and leaves the rest to its structural schema.
//!
//! ## Differences from kube
//! Numbers and times keep the text the rest of the server gives them (Go would also rewrite
//! `1.0` in an integer field, and times to UTC seconds: the unknown-field pruning walk does
//! the latter). CustomResourceDefinitions are left alone (their table serves protobuf only:
//! their JSON schemas' `JSONSchemaPropsOr…` unions and `JSON` values are not walked here); an
//! embedded resource's `metadata` inside a custom resource is not coerced.

use serde_json::{Map, Value};

use super::{Field, KINDS, Message, Ty, tables};
use crate::error::ApiError;
use crate::resources::ResourceDef;
use crate::size::{OBJECT_SIZE_MAX_BYTES, serialized_size};

/// The bytes of compact JSON the zeros inserted so far may still take before the result is
/// sure to be larger than [`OBJECT_SIZE_MAX_BYTES`].
struct Budget(usize);

/// The zeros outgrew [`OBJECT_SIZE_MAX_BYTES`]: the walk stops.
struct Exceeded;

impl Budget {
    /// Counts an inserted zero, `key`'s when it is a map entry.
    fn spend(&mut self, key: &str, zero: &Value) -> Result<(), Exceeded> {
        let bytes = if key.is_empty() { 0 } else { key.len() + 3 } + serialized_size(zero);
        self.0 = self.0.checked_sub(bytes).ok_or(Exceeded)?;
        Ok(())
    }
}

/// The message of `def`'s objects, for a built-in kind with a table (CustomResourceDefinitions
/// aside: see the module's differences).
fn message_of(def: &ResourceDef) -> Option<&'static Message> {
    if !def.is_builtin() || def.group == "apiextensions.k8s.io" {
        return None;
    }
    KINDS
        .iter()
        .find(|(api_version, kind, _)| {
            *kind == def.kind
                && match api_version.split_once('/') {
                    Some((group, version)) => group == def.group && version == def.version,
                    None => def.group.is_empty() && *api_version == def.version,
                }
        })
        .map(|(_, _, message)| *message)
}

/// Normalises `object` as Go's decode into its kind's struct and encode back would (see the
/// module docs): a built-in kind's whole object, a custom resource's `metadata`. Anything
/// else (a kind without a table, a body that is not an object) is left as it is.
///
/// # Errors
/// 413 RequestEntityTooLarge once the zeros it inserts pass [`OBJECT_SIZE_MAX_BYTES`] (the
/// module's Bound); `object` is then partly normalised and must be dropped.
pub fn normalize(def: &ResourceDef, object: &mut Value) -> Result<(), ApiError> {
    let Value::Object(map) = object else {
        return Ok(());
    };
    let mut budget = Budget(OBJECT_SIZE_MAX_BYTES);
    let walked = if let Some(message) = message_of(def) {
        normalize_message(message, map, &mut budget)
    } else if !def.is_builtin()
        && let Some(Value::Object(metadata)) = map.get_mut("metadata")
    {
        normalize_message(&tables::META_V1_OBJECT_META, metadata, &mut budget)
    } else {
        Ok(())
    };
    walked.map_err(|Exceeded| {
        ApiError::request_entity_too_large(format!(
            "the object is more than {OBJECT_SIZE_MAX_BYTES} bytes once its null and absent fields are decoded, more than the limit of {OBJECT_SIZE_MAX_BYTES} bytes"
        ))
    })
}

/// The object Go's zero value of `def`'s kind encodes to (`{"metadata":
/// {"creationTimestamp": null}, "spec": {...}, "status": {...}}`), for a built-in kind with a
/// table: what kube-apiserver's field manager compares a created object with.
#[must_use]
pub fn zero_object(def: &ResourceDef) -> Option<Value> {
    message_of(def).map(|message| Value::Object(zero_message(message)))
}

/// The zero value of the field `name` of `def`'s kind (`status`: a created workload's empty
/// status), when the kind has a table and the field; `None` also when Go leaves the zero out.
#[must_use]
pub fn zero_field(def: &ResourceDef, name: &str) -> Option<Value> {
    let message = message_of(def)?;
    message
        .fields
        .iter()
        .find(|field| field.name == name)
        .and_then(zero_of)
}

fn normalize_message(
    message: &'static Message,
    map: &mut Map<String, Value>,
    budget: &mut Budget,
) -> Result<(), Exceeded> {
    for field in message.fields {
        if let Ty::Inline(inner) = field.ty {
            normalize_message(inner, map, budget)?;
            continue;
        }
        let keep = match map.get_mut(field.name) {
            Some(value) => normalize_value(field, value, budget)?,
            None => {
                if let Some(zero) = zero_of(field) {
                    budget.spend(field.name, &zero)?;
                    map.insert(field.name.to_owned(), zero);
                }
                true
            }
        };
        if !keep {
            map.remove(field.name);
        }
    }
    Ok(())
}

/// Normalises a field's value in place; `false` when Go leaves the field out.
fn normalize_value(
    field: &Field,
    value: &mut Value,
    budget: &mut Budget,
) -> Result<bool, Exceeded> {
    if value.is_null() {
        return Ok(match zero_of(field) {
            Some(zero) => {
                budget.spend("", &zero)?;
                *value = zero;
                true
            }
            None => false,
        });
    }
    if field.repeated {
        if let Value::Array(items) = value {
            if items.is_empty() {
                return Ok(!field.omitempty);
            }
            for item in items {
                normalize_item(field.ty, item, budget)?;
            }
        }
        return Ok(true);
    }
    let omit_zero = field.omitempty && !field.pointer;
    Ok(match (field.ty, value) {
        (Ty::Msg(inner), Value::Object(map)) => {
            normalize_message(inner, map, budget)?;
            true
        }
        (
            ty @ (Ty::MapStr | Ty::MapBytes | Ty::MapQuantity | Ty::MapTime | Ty::MapStrList),
            Value::Object(entries),
        ) => {
            if entries.is_empty() {
                return Ok(!omit_zero);
            }
            if let Some(zero) = map_value_zero(ty) {
                for entry in entries.values_mut() {
                    if entry.is_null() {
                        budget.spend("", &zero)?;
                        *entry = zero.clone();
                    }
                }
            }
            true
        }
        (Ty::Str | Ty::Bytes, Value::String(text)) => !(omit_zero && text.is_empty()),
        (Ty::Int32 | Ty::Int64, Value::Number(number)) => {
            !(omit_zero && number.as_i64() == Some(0))
        }
        (Ty::Bool, Value::Bool(flag)) => *flag || !omit_zero,
        _ => true,
    })
}

/// A slice's item: `null` is the element's zero, a struct is normalised.
fn normalize_item(ty: Ty, item: &mut Value, budget: &mut Budget) -> Result<(), Exceeded> {
    match item {
        Value::Object(map) => {
            if let Ty::Msg(inner) = ty {
                normalize_message(inner, map, budget)?;
            }
        }
        Value::Null => {
            let zero = zero_value(ty);
            budget.spend("", &zero)?;
            *item = zero;
        }
        _ => {}
    }
    Ok(())
}

/// The value a `null` map value decodes to, when it is not `null` again: `""` for a
/// `map[string]string`, `"0"` for a `ResourceList` (`[]byte`, `ExtraValue` and `Time` values
/// are `null` again).
fn map_value_zero(ty: Ty) -> Option<Value> {
    match ty {
        Ty::MapStr => Some(Value::String(String::new())),
        Ty::MapQuantity => Some(Value::String("0".to_owned())),
        _ => None,
    }
}

/// What an absent (or `null`) field encodes to, `None` when Go leaves it out.
fn zero_of(field: &Field) -> Option<Value> {
    if field.repeated || field.pointer {
        // A nil slice or pointer: left out with `omitempty`, else `null`.
        return (!field.omitempty).then_some(Value::Null);
    }
    if field.omitempty && !field.ty.is_struct() {
        return None;
    }
    Some(zero_value(field.ty))
}

/// The JSON of a value of `ty` that is Go's zero.
fn zero_value(ty: Ty) -> Value {
    match ty {
        Ty::Str => Value::String(String::new()),
        Ty::Int32 | Ty::Int64 | Ty::Double | Ty::IntOrString => Value::from(0),
        Ty::Bool => Value::Bool(false),
        Ty::Quantity => Value::String("0".to_owned()),
        Ty::Msg(inner) | Ty::Inline(inner) => Value::Object(zero_message(inner)),
        // A nil `[]byte` or map, a zero time, `FieldsV1` or `RawExtension`: `null`.
        Ty::Bytes
        | Ty::MapStr
        | Ty::MapBytes
        | Ty::MapQuantity
        | Ty::MapTime
        | Ty::MapStrList
        | Ty::Time
        | Ty::MicroTime
        | Ty::FieldsV1
        | Ty::RawExtension
        | Ty::Json
        | Ty::Union(..)
        | Ty::MapMsg(_)
        | Ty::MapUnion(..) => Value::Null,
    }
}

/// The fields a zero struct of `message` encodes.
fn zero_message(message: &'static Message) -> Map<String, Value> {
    let mut map = Map::new();
    for field in message.fields {
        if let Ty::Inline(inner) = field.ty {
            map.extend(zero_message(inner));
        } else if let Some(zero) = zero_of(field) {
            map.insert(field.name.to_owned(), zero);
        }
    }
    map
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn def(group: &str, plural: &str) -> ResourceDef {
        crate::builtin_resources()
            .into_iter()
            .find(|d| d.group == group && d.plural == plural)
            .unwrap()
    }

    fn normalized(group: &str, plural: &str, mut object: Value) -> Value {
        normalize(&def(group, plural), &mut object).unwrap();
        object
    }

    #[test]
    fn empty_omitempty_values_are_left_out() {
        // ConfigMap: `Data map[string]string json:"data,omitempty"`, `BinaryData
        // map[string][]byte json:"binaryData,omitempty"`; ObjectMeta's labels, annotations and
        // finalizers are `omitempty` too, `Immutable *bool json:"immutable,omitempty"`.
        let object = normalized(
            "",
            "configmaps",
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "c", "annotations": {}, "labels": {}, "finalizers": [],
                    "namespace": "", "generation": 0},
                "data": {}, "binaryData": {}, "immutable": false}),
        );
        assert_eq!(
            object,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "c", "creationTimestamp": null}, "immutable": false})
        );
    }

    #[test]
    fn nulls_and_absent_fields_are_go_zero_values() {
        // `Rules []PolicyRule json:"rules"`: nil is null; `Verbs []string json:"verbs"` too.
        let role = normalized(
            "rbac.authorization.k8s.io",
            "clusterroles",
            json!({"metadata": {"name": "r", "labels": null}, "aggregationRule": null}),
        );
        assert_eq!(
            role,
            json!({"metadata": {"name": "r", "creationTimestamp": null}, "rules": null})
        );
        let role = normalized(
            "rbac.authorization.k8s.io",
            "clusterroles",
            json!({"metadata": {"name": "r"}, "rules": [{"apiGroups": [], "resources": ["pods"]}]}),
        );
        assert_eq!(
            role["rules"],
            json!([{"verbs": null, "resources": ["pods"]}])
        );
    }

    #[test]
    fn structs_are_never_left_out() {
        // `Resources ResourceRequirements json:"resources,omitempty"` is a struct; `Env
        // []EnvVar json:"env,omitempty"` and `HostNetwork bool json:"hostNetwork,omitempty"`
        // are not; `Containers []Container json:"containers"` has no omitempty.
        let pod = normalized(
            "",
            "pods",
            json!({"metadata": {"name": "p"}, "spec": {"hostNetwork": false, "nodeSelector": {},
                "tolerations": [], "containers": [{"name": "c", "env": [], "args": [],
                "ports": [{"containerPort": 80, "hostPort": 0, "protocol": ""}],
                "resources": {}}, null]}}),
        );
        assert_eq!(
            pod,
            json!({"metadata": {"name": "p", "creationTimestamp": null},
                "spec": {"containers": [
                    {"name": "c", "ports": [{"containerPort": 80}], "resources": {}},
                    {"name": "", "resources": {}}]},
                "status": {}})
        );
    }

    #[test]
    fn custom_marshallers_zero_values() {
        // ServicePort `TargetPort intstr.IntOrString json:"targetPort,omitempty"` (a struct:
        // `0`); `Port int32 json:"port"`; ServiceStatus `LoadBalancer LoadBalancerStatus`.
        let service = normalized(
            "",
            "services",
            json!({"metadata": {"name": "s"}, "spec": {"ports": [{"targetPort": null}]}}),
        );
        assert_eq!(
            service["spec"]["ports"],
            json!([{"port": 0, "targetPort": 0}])
        );
        assert_eq!(service["status"], json!({"loadBalancer": {}}));
        // `Limits ResourceList json:"limits,omitempty"`: a null quantity is Quantity's zero.
        let pod = normalized(
            "",
            "pods",
            json!({"spec": {"containers": [{"name": "c",
                "resources": {"limits": {"cpu": null}, "requests": {}}}]}}),
        );
        assert_eq!(
            pod["spec"]["containers"][0]["resources"],
            json!({"limits": {"cpu": "0"}})
        );
        // ControllerRevision `Data runtime.RawExtension json:"data,omitempty"`: nil Raw is
        // null; its content is kept as it is.
        let revision = normalized(
            "apps",
            "controllerrevisions",
            json!({"metadata": {"name": "r"}, "revision": 1}),
        );
        assert_eq!(revision["data"], Value::Null);
        let revision = normalized(
            "apps",
            "controllerrevisions",
            json!({"metadata": {"name": "r"}, "data": {"x": {}, "y": []}, "revision": 0}),
        );
        assert_eq!(revision["data"], json!({"x": {}, "y": []}));
        assert_eq!(revision["revision"], 0);
    }

    #[test]
    fn unchanged_objects_stay_unchanged() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "creationTimestamp": "2026-01-01T00:00:00Z",
                "labels": {"a": "b"}},
            "spec": {"containers": [{"name": "c", "image": "i", "resources": {}}]},
            "status": {"phase": "Pending"}});
        assert_eq!(normalized("", "pods", pod.clone()), pod);
        let again = normalized("", "pods", normalized("", "pods", json!({"spec": {}})));
        assert_eq!(normalized("", "pods", again.clone()), again, "idempotent");
    }

    #[test]
    fn zero_statuses_are_the_empty_go_structs() {
        assert_eq!(
            zero_field(&def("apps", "replicasets"), "status"),
            Some(json!({"replicas": 0}))
        );
        // What `kinds::created_status` listed by hand before the tables gave it.
        for (group, plural, status) in [
            ("apps", "deployments", json!({})),
            ("batch", "jobs", json!({})),
            ("batch", "cronjobs", json!({})),
            ("", "replicationcontrollers", json!({"replicas": 0})),
            (
                "apps",
                "statefulsets",
                json!({"replicas": 0, "availableReplicas": 0}),
            ),
            (
                "apps",
                "daemonsets",
                json!({"currentNumberScheduled": 0, "numberMisscheduled": 0,
                    "desiredNumberScheduled": 0, "numberReady": 0}),
            ),
            (
                "policy",
                "poddisruptionbudgets",
                json!({"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0,
                    "expectedPods": 0}),
            ),
            (
                "networking.k8s.io",
                "ingresses",
                json!({"loadBalancer": {}}),
            ),
        ] {
            assert_eq!(
                zero_field(&def(group, plural), "status"),
                Some(status),
                "{plural}"
            );
            assert_eq!(
                crate::kinds::created_status(&def(group, plural)),
                zero_field(&def(group, plural), "status")
            );
        }
        let zero = zero_object(&def("apps", "deployments")).unwrap();
        assert_eq!(
            zero["spec"]["template"]["metadata"],
            json!({"creationTimestamp": null})
        );
    }

    #[test]
    fn custom_resources_get_their_metadata_coerced() {
        let mut widget = json!({"metadata": {"name": "w", "annotations": {}, "labels": {}},
            "spec": {"empty": {}, "list": []}});
        let custom = ResourceDef {
            group: "example.com".into(),
            ..def("", "configmaps")
        };
        normalize(&custom, &mut widget).unwrap();
        assert_eq!(
            widget,
            json!({"metadata": {"name": "w", "creationTimestamp": null},
                "spec": {"empty": {}, "list": []}})
        );
    }

    #[test]
    fn zeros_past_the_object_limit_are_refused_before_they_are_built() {
        // A `null` container is `{"name":"","resources":{}}` (26 bytes): 70,000 of them
        // (350 KB of body) are 1.8 MB of zeros, more than the limit.
        let nulls = vec![Value::Null; 70_000];
        let mut pod = json!({"metadata": {"name": "p"}, "spec": {"containers": nulls}});
        let error = normalize(&def("", "pods"), &mut pod).unwrap_err();
        assert_eq!(
            (error.code, error.reason.as_str()),
            (413, "RequestEntityTooLarge")
        );
        assert_eq!(
            error.message,
            format!(
                "Request entity too large: the object is more than {OBJECT_SIZE_MAX_BYTES} bytes once its null and absent fields are decoded, more than the limit of {OBJECT_SIZE_MAX_BYTES} bytes"
            )
        );
        // Items that already hold their fields insert nothing, however many there are; 50,000
        // nulls (1.3 MB of zeros) fit.
        let full = vec![json!({"name": "c", "resources": {}}); 200_000];
        let mut pod = json!({"metadata": {"name": "p"}, "spec": {"containers": full}});
        normalize(&def("", "pods"), &mut pod).unwrap();
        let mut pod = json!({"metadata": {"name": "p"},
            "spec": {"containers": vec![Value::Null; 50_000]}});
        normalize(&def("", "pods"), &mut pod).unwrap();
        assert_eq!(
            pod["spec"]["containers"][49_999],
            json!({"name": "", "resources": {}})
        );
        // Map values count too: a ConfigMap's null values are "".
        let data: Map<String, Value> = (0..600_000)
            .map(|i| (format!("k{i}"), Value::Null))
            .collect();
        let mut map = json!({"metadata": {"name": "m"}, "data": data});
        assert!(
            normalize(&def("", "configmaps"), &mut map).is_ok(),
            "2 bytes each: 1.2 MB"
        );
    }
}

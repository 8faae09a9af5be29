//! Kubernetes protobuf (`application/vnd.kubernetes.protobuf`): request bodies decoded to the
//! JSON the rest of the server handles, and responses encoded from it ([`encode`]), with one
//! set of hand-written schema tables for both directions.
//!
//! ## Guarantees
//! - Anything outside the tables is refused, never dropped: an unknown field number in a
//!   known message is a 415 naming the message and the field, a kind without a table is a 415,
//!   and malformed bytes are a 400. No input panics (a property test feeds arbitrary bytes).
//! - Responses: whatever [`encode`] writes decodes back to the same JSON here (a property test
//!   for every kind), and an object with a field outside the tables is not encoded at all (the
//!   caller answers JSON, or 406).
//!
//! ## Requests
//! client-go (so kubectl's generator commands: `create configmap`, `create secret generic`,
//! `create namespace`, `create serviceaccount`, `create deployment`, `create service`, `run`,
//! `expose`, `create role|clusterrole|rolebinding|clusterrolebinding`,
//! `create job|cronjob|poddisruptionbudget|quota|priorityclass|ingress`, `auth can-i`,
//! `auth whoami`) sends built-in kinds as `application/vnd.kubernetes.protobuf` and does not fall
//! back to JSON on 415. The body is Kubernetes' envelope: the magic `k8s\0`, then a
//! `runtime.Unknown` message (1 `typeMeta` {1 `apiVersion`, 2 `kind`}, 2 `raw` = the object's
//! own protobuf, 3 `contentEncoding`, 4 `contentType`).
//!
//! [`decode_protobuf`] decodes `raw` with hand-written schema tables (field number → JSON name
//! and type) taken from the `generated.proto` files of `k8s.io/api` and
//! `k8s.io/apimachinery`. The output follows Go's `encoding/json` of the same struct: zero
//! values of `omitempty` scalars are left out (the Go marshaller writes every non-pointer
//! field, so they are on the wire), while fields that are pointers or are not `omitempty`
//! keep whatever value was sent; nested messages always appear (`resources: {}`), a zero
//! `metav1.Time` is `null`, `bytes` become base64 strings.
//!
//! ## Limits
//! The tables cover what kubectl's generators send, not whole kinds (no probes, volumes,
//! affinity, most status fields, …): a stored pod written by a controller usually has such
//! fields, and is then answered in JSON. A table per message both ways keeps one place to
//! complete.

use serde_json::{Map, Value};

use crate::error::ApiError;
use crate::resources::ResourceDef;

pub mod encode;

pub use encode::{
    ENVELOPE_TAIL, EncodeError, WatchFraming, cached_object_message, decode_response,
    decode_watch_stream, encode_object_message, encode_protobuf, envelope, envelope_head,
    has_protobuf_schema, list_item_head, list_meta_field, watch_frame, watch_frame_head,
};

/// The four bytes every Kubernetes protobuf body starts with.
pub const PROTOBUF_MAGIC: &[u8; 4] = b"k8s\0";

/// The media type of Kubernetes protobuf bodies.
pub const PROTOBUF_MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// Whether a `Content-Type` value names Kubernetes protobuf (parameters ignored).
#[must_use]
pub fn is_protobuf_media_type(content_type: &str) -> bool {
    content_type
        .split(';')
        .next()
        .is_some_and(|media| media.trim().eq_ignore_ascii_case(PROTOBUF_MEDIA_TYPE))
}

/// How one field's value is encoded and rendered.
#[derive(Clone, Copy)]
enum Ty {
    Str,
    Int32,
    Int64,
    Bool,
    /// `bytes`, rendered as standard base64.
    Bytes,
    Msg(&'static Message),
    /// A Go struct embedded with `json:",inline"`: its fields join the parent object.
    Inline(&'static Message),
    MapStr,
    MapBytes,
    MapQuantity,
    /// `metav1.Time` {1 seconds, 2 nanos} as RFC 3339 (whole seconds); zero is `null`.
    Time,
    /// `intstr.IntOrString` {1 type, 2 intVal, 3 strVal} as a number or a string.
    IntOrString,
    /// `resource.Quantity` {1 string} as its string.
    Quantity,
    /// `metav1.FieldsV1` {1 Raw} whose bytes are JSON.
    FieldsV1,
}

#[derive(Clone, Copy)]
struct Field {
    number: u32,
    name: &'static str,
    ty: Ty,
    repeated: bool,
    /// Rendered even when zero: the Go field is a pointer or not `omitempty`.
    keep_zero: bool,
}

struct Message {
    name: &'static str,
    fields: &'static [Field],
}

/// An `omitempty` field.
const fn f(number: u32, name: &'static str, ty: Ty) -> Field {
    Field {
        number,
        name,
        ty,
        repeated: false,
        keep_zero: false,
    }
}

/// A pointer or non-`omitempty` field: a zero value that was sent is kept.
const fn k(number: u32, name: &'static str, ty: Ty) -> Field {
    Field {
        number,
        name,
        ty,
        repeated: false,
        keep_zero: true,
    }
}

/// A repeated field.
const fn r(number: u32, name: &'static str, ty: Ty) -> Field {
    Field {
        number,
        name,
        ty,
        repeated: true,
        keep_zero: false,
    }
}

use Ty::{
    Bool, Bytes, FieldsV1, Inline, Int32, Int64, IntOrString, MapBytes, MapQuantity, MapStr, Msg,
    Quantity, Str, Time,
};

// ---- k8s.io/apimachinery/pkg/apis/meta/v1 ----

static OBJECT_META: Message = Message {
    name: "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
    fields: &[
        f(1, "name", Str),
        f(2, "generateName", Str),
        f(3, "namespace", Str),
        f(4, "selfLink", Str),
        f(5, "uid", Str),
        f(6, "resourceVersion", Str),
        f(7, "generation", Int64),
        k(8, "creationTimestamp", Time),
        k(9, "deletionTimestamp", Time),
        k(10, "deletionGracePeriodSeconds", Int64),
        f(11, "labels", MapStr),
        f(12, "annotations", MapStr),
        r(13, "ownerReferences", Msg(&OWNER_REFERENCE)),
        r(14, "finalizers", Str),
        r(17, "managedFields", Msg(&MANAGED_FIELDS_ENTRY)),
    ],
};

static OWNER_REFERENCE: Message = Message {
    name: "io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference",
    fields: &[
        k(1, "kind", Str),
        k(3, "name", Str),
        k(4, "uid", Str),
        k(5, "apiVersion", Str),
        k(6, "controller", Bool),
        k(7, "blockOwnerDeletion", Bool),
    ],
};

static MANAGED_FIELDS_ENTRY: Message = Message {
    name: "io.k8s.apimachinery.pkg.apis.meta.v1.ManagedFieldsEntry",
    fields: &[
        f(1, "manager", Str),
        f(2, "operation", Str),
        f(3, "apiVersion", Str),
        k(4, "time", Time),
        f(6, "fieldsType", Str),
        k(7, "fieldsV1", FieldsV1),
        f(8, "subresource", Str),
    ],
};

static LABEL_SELECTOR: Message = Message {
    name: "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector",
    fields: &[
        f(1, "matchLabels", MapStr),
        r(2, "matchExpressions", Msg(&LABEL_SELECTOR_REQUIREMENT)),
    ],
};

static LABEL_SELECTOR_REQUIREMENT: Message = Message {
    name: "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelectorRequirement",
    fields: &[k(1, "key", Str), k(2, "operator", Str), r(3, "values", Str)],
};

static CONDITION: Message = Message {
    name: "io.k8s.apimachinery.pkg.apis.meta.v1.Condition",
    fields: &[
        k(1, "type", Str),
        k(2, "status", Str),
        f(3, "observedGeneration", Int64),
        k(4, "lastTransitionTime", Time),
        k(5, "reason", Str),
        k(6, "message", Str),
    ],
};

static DELETE_OPTIONS: Message = Message {
    name: "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions",
    fields: &[
        k(1, "gracePeriodSeconds", Int64),
        k(2, "preconditions", Msg(&PRECONDITIONS)),
        k(3, "orphanDependents", Bool),
        k(4, "propagationPolicy", Str),
        r(5, "dryRun", Str),
        k(6, "ignoreStoreReadErrorWithClusterBreakingPotential", Bool),
    ],
};

static PRECONDITIONS: Message = Message {
    name: "io.k8s.apimachinery.pkg.apis.meta.v1.Preconditions",
    fields: &[k(1, "uid", Str), k(2, "resourceVersion", Str)],
};

// ---- k8s.io/api/core/v1 ----

static CONFIG_MAP: Message = Message {
    name: "io.k8s.api.core.v1.ConfigMap",
    fields: &[
        k(1, "metadata", Msg(&OBJECT_META)),
        f(2, "data", MapStr),
        f(3, "binaryData", MapBytes),
        k(4, "immutable", Bool),
    ],
};

static SECRET: Message = Message {
    name: "io.k8s.api.core.v1.Secret",
    fields: &[
        k(1, "metadata", Msg(&OBJECT_META)),
        f(2, "data", MapBytes),
        f(3, "type", Str),
        f(4, "stringData", MapStr),
        k(5, "immutable", Bool),
    ],
};

static NAMESPACE: Message = Message {
    name: "io.k8s.api.core.v1.Namespace",
    fields: &[
        k(1, "metadata", Msg(&OBJECT_META)),
        k(2, "spec", Msg(&NAMESPACE_SPEC)),
        k(3, "status", Msg(&NAMESPACE_STATUS)),
    ],
};

static NAMESPACE_SPEC: Message = Message {
    name: "io.k8s.api.core.v1.NamespaceSpec",
    fields: &[r(1, "finalizers", Str)],
};

static NAMESPACE_STATUS: Message = Message {
    name: "io.k8s.api.core.v1.NamespaceStatus",
    fields: &[
        f(1, "phase", Str),
        r(2, "conditions", Msg(&NAMESPACE_CONDITION)),
    ],
};

static NAMESPACE_CONDITION: Message = Message {
    name: "io.k8s.api.core.v1.NamespaceCondition",
    fields: &[
        k(1, "type", Str),
        k(2, "status", Str),
        k(4, "lastTransitionTime", Time),
        f(5, "reason", Str),
        f(6, "message", Str),
    ],
};

static SERVICE_ACCOUNT: Message = Message {
    name: "io.k8s.api.core.v1.ServiceAccount",
    fields: &[
        k(1, "metadata", Msg(&OBJECT_META)),
        r(2, "secrets", Msg(&OBJECT_REFERENCE)),
        r(3, "imagePullSecrets", Msg(&LOCAL_OBJECT_REFERENCE)),
        k(4, "automountServiceAccountToken", Bool),
    ],
};

static OBJECT_REFERENCE: Message = Message {
    name: "io.k8s.api.core.v1.ObjectReference",
    fields: &[
        f(1, "kind", Str),
        f(2, "namespace", Str),
        f(3, "name", Str),
        f(4, "uid", Str),
        f(5, "apiVersion", Str),
        f(6, "resourceVersion", Str),
        f(7, "fieldPath", Str),
    ],
};

static LOCAL_OBJECT_REFERENCE: Message = Message {
    name: "io.k8s.api.core.v1.LocalObjectReference",
    fields: &[f(1, "name", Str)],
};

static SERVICE: Message = Message {
    name: "io.k8s.api.core.v1.Service",
    fields: &[
        k(1, "metadata", Msg(&OBJECT_META)),
        k(2, "spec", Msg(&SERVICE_SPEC)),
        k(3, "status", Msg(&SERVICE_STATUS)),
    ],
};

static SERVICE_SPEC: Message = Message {
    name: "io.k8s.api.core.v1.ServiceSpec",
    fields: &[
        r(1, "ports", Msg(&SERVICE_PORT)),
        f(2, "selector", MapStr),
        f(3, "clusterIP", Str),
        f(4, "type", Str),
        r(5, "externalIPs", Str),
        f(7, "sessionAffinity", Str),
        f(8, "loadBalancerIP", Str),
        r(9, "loadBalancerSourceRanges", Str),
        f(10, "externalName", Str),
        f(11, "externalTrafficPolicy", Str),
        f(12, "healthCheckNodePort", Int32),
        f(13, "publishNotReadyAddresses", Bool),
        k(14, "sessionAffinityConfig", Msg(&SESSION_AFFINITY_CONFIG)),
        k(17, "ipFamilyPolicy", Str),
        r(18, "clusterIPs", Str),
        r(19, "ipFamilies", Str),
        k(20, "allocateLoadBalancerNodePorts", Bool),
        k(21, "loadBalancerClass", Str),
        k(22, "internalTrafficPolicy", Str),
        k(23, "trafficDistribution", Str),
    ],
};

static SERVICE_PORT: Message = Message {
    name: "io.k8s.api.core.v1.ServicePort",
    fields: &[
        f(1, "name", Str),
        f(2, "protocol", Str),
        k(3, "port", Int32),
        f(4, "targetPort", IntOrString),
        f(5, "nodePort", Int32),
        k(6, "appProtocol", Str),
    ],
};

static SESSION_AFFINITY_CONFIG: Message = Message {
    name: "io.k8s.api.core.v1.SessionAffinityConfig",
    fields: &[k(1, "clientIP", Msg(&CLIENT_IP_CONFIG))],
};

static CLIENT_IP_CONFIG: Message = Message {
    name: "io.k8s.api.core.v1.ClientIPConfig",
    fields: &[k(1, "timeoutSeconds", Int32)],
};

static SERVICE_STATUS: Message = Message {
    name: "io.k8s.api.core.v1.ServiceStatus",
    fields: &[
        k(1, "loadBalancer", Msg(&LOAD_BALANCER_STATUS)),
        r(2, "conditions", Msg(&CONDITION)),
    ],
};

static LOAD_BALANCER_STATUS: Message = Message {
    name: "io.k8s.api.core.v1.LoadBalancerStatus",
    fields: &[r(1, "ingress", Msg(&LOAD_BALANCER_INGRESS))],
};

static LOAD_BALANCER_INGRESS: Message = Message {
    name: "io.k8s.api.core.v1.LoadBalancerIngress",
    fields: &[
        f(1, "ip", Str),
        f(2, "hostname", Str),
        k(3, "ipMode", Str),
        r(4, "ports", Msg(&PORT_STATUS)),
    ],
};

static PORT_STATUS: Message = Message {
    name: "io.k8s.api.core.v1.PortStatus",
    fields: &[
        k(1, "port", Int32),
        k(2, "protocol", Str),
        k(3, "error", Str),
    ],
};

static POD: Message = Message {
    name: "io.k8s.api.core.v1.Pod",
    fields: &[
        k(1, "metadata", Msg(&OBJECT_META)),
        k(2, "spec", Msg(&POD_SPEC)),
        k(3, "status", Msg(&POD_STATUS)),
    ],
};

static POD_TEMPLATE_SPEC: Message = Message {
    name: "io.k8s.api.core.v1.PodTemplateSpec",
    fields: &[
        k(1, "metadata", Msg(&OBJECT_META)),
        k(2, "spec", Msg(&POD_SPEC)),
    ],
};

static POD_SPEC: Message = Message {
    name: "io.k8s.api.core.v1.PodSpec",
    fields: &[
        r(2, "containers", Msg(&CONTAINER)),
        f(3, "restartPolicy", Str),
        k(4, "terminationGracePeriodSeconds", Int64),
        k(5, "activeDeadlineSeconds", Int64),
        f(6, "dnsPolicy", Str),
        f(7, "nodeSelector", MapStr),
        f(8, "serviceAccountName", Str),
        f(9, "serviceAccount", Str),
        f(10, "nodeName", Str),
        f(11, "hostNetwork", Bool),
        f(12, "hostPID", Bool),
        f(13, "hostIPC", Bool),
        k(14, "securityContext", Msg(&POD_SECURITY_CONTEXT)),
        r(15, "imagePullSecrets", Msg(&LOCAL_OBJECT_REFERENCE)),
        f(16, "hostname", Str),
        f(17, "subdomain", Str),
        f(19, "schedulerName", Str),
        r(20, "initContainers", Msg(&CONTAINER)),
        k(21, "automountServiceAccountToken", Bool),
        r(22, "tolerations", Msg(&TOLERATION)),
        f(24, "priorityClassName", Str),
        k(25, "priority", Int32),
        k(27, "shareProcessNamespace", Bool),
        k(29, "runtimeClassName", Str),
        k(30, "enableServiceLinks", Bool),
        k(31, "preemptionPolicy", Str),
        f(32, "overhead", MapQuantity),
        k(35, "setHostnameAsFQDN", Bool),
        k(37, "hostUsers", Bool),
    ],
};

static TOLERATION: Message = Message {
    name: "io.k8s.api.core.v1.Toleration",
    fields: &[
        f(1, "key", Str),
        f(2, "operator", Str),
        f(3, "value", Str),
        f(4, "effect", Str),
        k(5, "tolerationSeconds", Int64),
    ],
};

static POD_SECURITY_CONTEXT: Message = Message {
    name: "io.k8s.api.core.v1.PodSecurityContext",
    fields: &[
        k(1, "seLinuxOptions", Msg(&SE_LINUX_OPTIONS)),
        k(2, "runAsUser", Int64),
        k(3, "runAsNonRoot", Bool),
        r(4, "supplementalGroups", Int64),
        k(5, "fsGroup", Int64),
        k(6, "runAsGroup", Int64),
        r(7, "sysctls", Msg(&SYSCTL)),
        k(9, "fsGroupChangePolicy", Str),
        k(10, "seccompProfile", Msg(&SECCOMP_PROFILE)),
    ],
};

static SE_LINUX_OPTIONS: Message = Message {
    name: "io.k8s.api.core.v1.SELinuxOptions",
    fields: &[
        f(1, "user", Str),
        f(2, "role", Str),
        f(3, "type", Str),
        f(4, "level", Str),
    ],
};

static SYSCTL: Message = Message {
    name: "io.k8s.api.core.v1.Sysctl",
    fields: &[k(1, "name", Str), k(2, "value", Str)],
};

static SECCOMP_PROFILE: Message = Message {
    name: "io.k8s.api.core.v1.SeccompProfile",
    fields: &[k(1, "type", Str), k(2, "localhostProfile", Str)],
};

static CONTAINER: Message = Message {
    name: "io.k8s.api.core.v1.Container",
    fields: &[
        k(1, "name", Str),
        f(2, "image", Str),
        r(3, "command", Str),
        r(4, "args", Str),
        f(5, "workingDir", Str),
        r(6, "ports", Msg(&CONTAINER_PORT)),
        r(7, "env", Msg(&ENV_VAR)),
        k(8, "resources", Msg(&RESOURCE_REQUIREMENTS)),
        f(13, "terminationMessagePath", Str),
        f(14, "imagePullPolicy", Str),
        k(15, "securityContext", Msg(&SECURITY_CONTEXT)),
        f(16, "stdin", Bool),
        f(17, "stdinOnce", Bool),
        f(18, "tty", Bool),
        r(19, "envFrom", Msg(&ENV_FROM_SOURCE)),
        f(20, "terminationMessagePolicy", Str),
        k(24, "restartPolicy", Str),
    ],
};

static CONTAINER_PORT: Message = Message {
    name: "io.k8s.api.core.v1.ContainerPort",
    fields: &[
        f(1, "name", Str),
        f(2, "hostPort", Int32),
        k(3, "containerPort", Int32),
        f(4, "protocol", Str),
        f(5, "hostIP", Str),
    ],
};

static ENV_VAR: Message = Message {
    name: "io.k8s.api.core.v1.EnvVar",
    fields: &[
        k(1, "name", Str),
        f(2, "value", Str),
        k(3, "valueFrom", Msg(&ENV_VAR_SOURCE)),
    ],
};

static ENV_VAR_SOURCE: Message = Message {
    name: "io.k8s.api.core.v1.EnvVarSource",
    fields: &[
        k(1, "fieldRef", Msg(&OBJECT_FIELD_SELECTOR)),
        k(2, "resourceFieldRef", Msg(&RESOURCE_FIELD_SELECTOR)),
        k(3, "configMapKeyRef", Msg(&KEY_SELECTOR)),
        k(4, "secretKeyRef", Msg(&KEY_SELECTOR)),
    ],
};

static OBJECT_FIELD_SELECTOR: Message = Message {
    name: "io.k8s.api.core.v1.ObjectFieldSelector",
    fields: &[f(1, "apiVersion", Str), k(2, "fieldPath", Str)],
};

static RESOURCE_FIELD_SELECTOR: Message = Message {
    name: "io.k8s.api.core.v1.ResourceFieldSelector",
    fields: &[
        f(1, "containerName", Str),
        k(2, "resource", Str),
        f(3, "divisor", Quantity),
    ],
};

/// ConfigMapKeySelector and SecretKeySelector have the same fields.
static KEY_SELECTOR: Message = Message {
    name: "io.k8s.api.core.v1.ConfigMapKeySelector",
    fields: &[
        k(1, "localObjectReference", Inline(&LOCAL_OBJECT_REFERENCE)),
        k(2, "key", Str),
        k(3, "optional", Bool),
    ],
};

static ENV_FROM_SOURCE: Message = Message {
    name: "io.k8s.api.core.v1.EnvFromSource",
    fields: &[
        f(1, "prefix", Str),
        k(2, "configMapRef", Msg(&ENV_SOURCE)),
        k(3, "secretRef", Msg(&ENV_SOURCE)),
    ],
};

/// ConfigMapEnvSource and SecretEnvSource have the same fields.
static ENV_SOURCE: Message = Message {
    name: "io.k8s.api.core.v1.ConfigMapEnvSource",
    fields: &[
        k(1, "localObjectReference", Inline(&LOCAL_OBJECT_REFERENCE)),
        k(2, "optional", Bool),
    ],
};

static RESOURCE_REQUIREMENTS: Message = Message {
    name: "io.k8s.api.core.v1.ResourceRequirements",
    fields: &[
        f(1, "limits", MapQuantity),
        f(2, "requests", MapQuantity),
        r(3, "claims", Msg(&RESOURCE_CLAIM)),
    ],
};

static RESOURCE_CLAIM: Message = Message {
    name: "io.k8s.api.core.v1.ResourceClaim",
    fields: &[k(1, "name", Str), f(2, "request", Str)],
};

static SECURITY_CONTEXT: Message = Message {
    name: "io.k8s.api.core.v1.SecurityContext",
    fields: &[
        k(1, "capabilities", Msg(&CAPABILITIES)),
        k(2, "privileged", Bool),
        k(3, "seLinuxOptions", Msg(&SE_LINUX_OPTIONS)),
        k(4, "runAsUser", Int64),
        k(5, "runAsNonRoot", Bool),
        k(6, "readOnlyRootFilesystem", Bool),
        k(7, "allowPrivilegeEscalation", Bool),
        k(8, "runAsGroup", Int64),
        k(9, "procMount", Str),
        k(11, "seccompProfile", Msg(&SECCOMP_PROFILE)),
    ],
};

static CAPABILITIES: Message = Message {
    name: "io.k8s.api.core.v1.Capabilities",
    fields: &[r(1, "add", Str), r(2, "drop", Str)],
};

static POD_STATUS: Message = Message {
    name: "io.k8s.api.core.v1.PodStatus",
    fields: &[
        f(1, "phase", Str),
        r(2, "conditions", Msg(&POD_CONDITION)),
        f(3, "message", Str),
        f(4, "reason", Str),
        f(5, "hostIP", Str),
        f(6, "podIP", Str),
        k(7, "startTime", Time),
        f(9, "qosClass", Str),
        f(11, "nominatedNodeName", Str),
        r(12, "podIPs", Msg(&POD_IP)),
    ],
};

static POD_CONDITION: Message = Message {
    name: "io.k8s.api.core.v1.PodCondition",
    fields: &[
        k(1, "type", Str),
        k(2, "status", Str),
        k(3, "lastProbeTime", Time),
        k(4, "lastTransitionTime", Time),
        f(5, "reason", Str),
        f(6, "message", Str),
        f(7, "observedGeneration", Int64),
    ],
};

static POD_IP: Message = Message {
    name: "io.k8s.api.core.v1.PodIP",
    fields: &[k(1, "ip", Str)],
};

// ---- k8s.io/api/apps/v1 ----

static DEPLOYMENT: Message = Message {
    name: "io.k8s.api.apps.v1.Deployment",
    fields: &[
        k(1, "metadata", Msg(&OBJECT_META)),
        k(2, "spec", Msg(&DEPLOYMENT_SPEC)),
        k(3, "status", Msg(&DEPLOYMENT_STATUS)),
    ],
};

static DEPLOYMENT_SPEC: Message = Message {
    name: "io.k8s.api.apps.v1.DeploymentSpec",
    fields: &[
        k(1, "replicas", Int32),
        k(2, "selector", Msg(&LABEL_SELECTOR)),
        k(3, "template", Msg(&POD_TEMPLATE_SPEC)),
        k(4, "strategy", Msg(&DEPLOYMENT_STRATEGY)),
        f(5, "minReadySeconds", Int32),
        k(6, "revisionHistoryLimit", Int32),
        f(7, "paused", Bool),
        k(9, "progressDeadlineSeconds", Int32),
        k(10, "podReplacementPolicy", Str),
    ],
};

static DEPLOYMENT_STRATEGY: Message = Message {
    name: "io.k8s.api.apps.v1.DeploymentStrategy",
    fields: &[
        f(1, "type", Str),
        k(2, "rollingUpdate", Msg(&ROLLING_UPDATE_DEPLOYMENT)),
    ],
};

static ROLLING_UPDATE_DEPLOYMENT: Message = Message {
    name: "io.k8s.api.apps.v1.RollingUpdateDeployment",
    fields: &[
        k(1, "maxUnavailable", IntOrString),
        k(2, "maxSurge", IntOrString),
    ],
};

static DEPLOYMENT_STATUS: Message = Message {
    name: "io.k8s.api.apps.v1.DeploymentStatus",
    fields: &[
        f(1, "observedGeneration", Int64),
        f(2, "replicas", Int32),
        f(3, "updatedReplicas", Int32),
        f(4, "availableReplicas", Int32),
        f(5, "unavailableReplicas", Int32),
        r(6, "conditions", Msg(&DEPLOYMENT_CONDITION)),
        f(7, "readyReplicas", Int32),
        k(8, "collisionCount", Int32),
        k(9, "terminatingReplicas", Int32),
    ],
};

static DEPLOYMENT_CONDITION: Message = Message {
    name: "io.k8s.api.apps.v1.DeploymentCondition",
    fields: &[
        k(1, "type", Str),
        k(2, "status", Str),
        f(4, "reason", Str),
        f(5, "message", Str),
        k(6, "lastUpdateTime", Time),
        k(7, "lastTransitionTime", Time),
    ],
};

// ---- k8s.io/api/batch/v1 ----

static JOB: Message = Message {
    name: "io.k8s.api.batch.v1.Job",
    fields: &[
        k(1, "metadata", Msg(&OBJECT_META)),
        k(2, "spec", Msg(&JOB_SPEC)),
        k(3, "status", Msg(&JOB_STATUS)),
    ],
};

/// Without `podFailurePolicy` (11), `successPolicy` (16) and `scheduling` (17): a body that
/// sets them is refused with a 415 naming the field, never decoded partly.
static JOB_SPEC: Message = Message {
    name: "io.k8s.api.batch.v1.JobSpec",
    fields: &[
        k(1, "parallelism", Int32),
        k(2, "completions", Int32),
        k(3, "activeDeadlineSeconds", Int64),
        k(4, "selector", Msg(&LABEL_SELECTOR)),
        k(5, "manualSelector", Bool),
        k(6, "template", Msg(&POD_TEMPLATE_SPEC)),
        k(7, "backoffLimit", Int32),
        k(8, "ttlSecondsAfterFinished", Int32),
        k(9, "completionMode", Str),
        k(10, "suspend", Bool),
        k(12, "backoffLimitPerIndex", Int32),
        k(13, "maxFailedIndexes", Int32),
        k(14, "podReplacementPolicy", Str),
        k(15, "managedBy", Str),
    ],
};

static JOB_STATUS: Message = Message {
    name: "io.k8s.api.batch.v1.JobStatus",
    fields: &[
        r(1, "conditions", Msg(&JOB_CONDITION)),
        k(2, "startTime", Time),
        k(3, "completionTime", Time),
        f(4, "active", Int32),
        f(5, "succeeded", Int32),
        f(6, "failed", Int32),
        f(7, "completedIndexes", Str),
        k(
            8,
            "uncountedTerminatedPods",
            Msg(&UNCOUNTED_TERMINATED_PODS),
        ),
        k(9, "ready", Int32),
        k(10, "failedIndexes", Str),
        k(11, "terminating", Int32),
    ],
};

static JOB_CONDITION: Message = Message {
    name: "io.k8s.api.batch.v1.JobCondition",
    fields: &[
        k(1, "type", Str),
        k(2, "status", Str),
        k(3, "lastProbeTime", Time),
        k(4, "lastTransitionTime", Time),
        f(5, "reason", Str),
        f(6, "message", Str),
    ],
};

static UNCOUNTED_TERMINATED_PODS: Message = Message {
    name: "io.k8s.api.batch.v1.UncountedTerminatedPods",
    fields: &[r(1, "succeeded", Str), r(2, "failed", Str)],
};

static JOB_TEMPLATE_SPEC: Message = Message {
    name: "io.k8s.api.batch.v1.JobTemplateSpec",
    fields: &[
        k(1, "metadata", Msg(&OBJECT_META)),
        k(2, "spec", Msg(&JOB_SPEC)),
    ],
};

static CRON_JOB: Message = Message {
    name: "io.k8s.api.batch.v1.CronJob",
    fields: &[
        k(1, "metadata", Msg(&OBJECT_META)),
        k(2, "spec", Msg(&CRON_JOB_SPEC)),
        k(3, "status", Msg(&CRON_JOB_STATUS)),
    ],
};

static CRON_JOB_SPEC: Message = Message {
    name: "io.k8s.api.batch.v1.CronJobSpec",
    fields: &[
        k(1, "schedule", Str),
        k(2, "startingDeadlineSeconds", Int64),
        f(3, "concurrencyPolicy", Str),
        k(4, "suspend", Bool),
        k(5, "jobTemplate", Msg(&JOB_TEMPLATE_SPEC)),
        k(6, "successfulJobsHistoryLimit", Int32),
        k(7, "failedJobsHistoryLimit", Int32),
        k(8, "timeZone", Str),
    ],
};

static CRON_JOB_STATUS: Message = Message {
    name: "io.k8s.api.batch.v1.CronJobStatus",
    fields: &[
        r(1, "active", Msg(&OBJECT_REFERENCE)),
        k(4, "lastScheduleTime", Time),
        k(5, "lastSuccessfulTime", Time),
    ],
};

// ---- k8s.io/api/policy/v1 ----

static POD_DISRUPTION_BUDGET: Message = Message {
    name: "io.k8s.api.policy.v1.PodDisruptionBudget",
    fields: &[
        k(1, "metadata", Msg(&OBJECT_META)),
        k(2, "spec", Msg(&POD_DISRUPTION_BUDGET_SPEC)),
        k(3, "status", Msg(&POD_DISRUPTION_BUDGET_STATUS)),
    ],
};

static POD_DISRUPTION_BUDGET_SPEC: Message = Message {
    name: "io.k8s.api.policy.v1.PodDisruptionBudgetSpec",
    fields: &[
        k(1, "minAvailable", IntOrString),
        k(2, "selector", Msg(&LABEL_SELECTOR)),
        k(3, "maxUnavailable", IntOrString),
        k(4, "unhealthyPodEvictionPolicy", Str),
    ],
};

/// Without `disruptedPods` (2, a map of times, written only by the disruption controller):
/// a body that sets it is refused with a 415 naming the field.
static POD_DISRUPTION_BUDGET_STATUS: Message = Message {
    name: "io.k8s.api.policy.v1.PodDisruptionBudgetStatus",
    fields: &[
        f(1, "observedGeneration", Int64),
        k(3, "disruptionsAllowed", Int32),
        k(4, "currentHealthy", Int32),
        k(5, "desiredHealthy", Int32),
        k(6, "expectedPods", Int32),
        r(7, "conditions", Msg(&CONDITION)),
    ],
};

// ---- k8s.io/api/core/v1 ResourceQuota, k8s.io/api/scheduling/v1 ----

static RESOURCE_QUOTA: Message = Message {
    name: "io.k8s.api.core.v1.ResourceQuota",
    fields: &[
        k(1, "metadata", Msg(&OBJECT_META)),
        k(2, "spec", Msg(&RESOURCE_QUOTA_SPEC)),
        k(3, "status", Msg(&RESOURCE_QUOTA_STATUS)),
    ],
};

static RESOURCE_QUOTA_SPEC: Message = Message {
    name: "io.k8s.api.core.v1.ResourceQuotaSpec",
    fields: &[
        f(1, "hard", MapQuantity),
        r(2, "scopes", Str),
        k(3, "scopeSelector", Msg(&SCOPE_SELECTOR)),
    ],
};

static RESOURCE_QUOTA_STATUS: Message = Message {
    name: "io.k8s.api.core.v1.ResourceQuotaStatus",
    fields: &[f(1, "hard", MapQuantity), f(2, "used", MapQuantity)],
};

static SCOPE_SELECTOR: Message = Message {
    name: "io.k8s.api.core.v1.ScopeSelector",
    fields: &[r(
        1,
        "matchExpressions",
        Msg(&SCOPED_RESOURCE_SELECTOR_REQUIREMENT),
    )],
};

static SCOPED_RESOURCE_SELECTOR_REQUIREMENT: Message = Message {
    name: "io.k8s.api.core.v1.ScopedResourceSelectorRequirement",
    fields: &[
        k(1, "scopeName", Str),
        k(2, "operator", Str),
        r(3, "values", Str),
    ],
};

static PRIORITY_CLASS: Message = Message {
    name: "io.k8s.api.scheduling.v1.PriorityClass",
    fields: &[
        k(1, "metadata", Msg(&OBJECT_META)),
        k(2, "value", Int32),
        f(3, "globalDefault", Bool),
        f(4, "description", Str),
        k(5, "preemptionPolicy", Str),
    ],
};

// ---- k8s.io/api/networking/v1 Ingress ----

static INGRESS: Message = Message {
    name: "io.k8s.api.networking.v1.Ingress",
    fields: &[
        k(1, "metadata", Msg(&OBJECT_META)),
        k(2, "spec", Msg(&INGRESS_SPEC)),
        k(3, "status", Msg(&INGRESS_STATUS)),
    ],
};

static INGRESS_SPEC: Message = Message {
    name: "io.k8s.api.networking.v1.IngressSpec",
    fields: &[
        k(1, "defaultBackend", Msg(&INGRESS_BACKEND)),
        r(2, "tls", Msg(&INGRESS_TLS)),
        r(3, "rules", Msg(&INGRESS_RULE)),
        k(4, "ingressClassName", Str),
    ],
};

static INGRESS_BACKEND: Message = Message {
    name: "io.k8s.api.networking.v1.IngressBackend",
    fields: &[
        k(3, "resource", Msg(&TYPED_LOCAL_OBJECT_REFERENCE)),
        k(4, "service", Msg(&INGRESS_SERVICE_BACKEND)),
    ],
};

static TYPED_LOCAL_OBJECT_REFERENCE: Message = Message {
    name: "io.k8s.api.core.v1.TypedLocalObjectReference",
    fields: &[k(1, "apiGroup", Str), k(2, "kind", Str), k(3, "name", Str)],
};

static INGRESS_SERVICE_BACKEND: Message = Message {
    name: "io.k8s.api.networking.v1.IngressServiceBackend",
    fields: &[k(1, "name", Str), k(2, "port", Msg(&SERVICE_BACKEND_PORT))],
};

static SERVICE_BACKEND_PORT: Message = Message {
    name: "io.k8s.api.networking.v1.ServiceBackendPort",
    fields: &[f(1, "name", Str), f(2, "number", Int32)],
};

static INGRESS_RULE: Message = Message {
    name: "io.k8s.api.networking.v1.IngressRule",
    fields: &[
        f(1, "host", Str),
        k(2, "ingressRuleValue", Inline(&INGRESS_RULE_VALUE)),
    ],
};

static INGRESS_RULE_VALUE: Message = Message {
    name: "io.k8s.api.networking.v1.IngressRuleValue",
    fields: &[k(1, "http", Msg(&HTTP_INGRESS_RULE_VALUE))],
};

static HTTP_INGRESS_RULE_VALUE: Message = Message {
    name: "io.k8s.api.networking.v1.HTTPIngressRuleValue",
    fields: &[r(1, "paths", Msg(&HTTP_INGRESS_PATH))],
};

static HTTP_INGRESS_PATH: Message = Message {
    name: "io.k8s.api.networking.v1.HTTPIngressPath",
    fields: &[
        f(1, "path", Str),
        k(2, "backend", Msg(&INGRESS_BACKEND)),
        k(3, "pathType", Str),
    ],
};

static INGRESS_TLS: Message = Message {
    name: "io.k8s.api.networking.v1.IngressTLS",
    fields: &[r(1, "hosts", Str), f(2, "secretName", Str)],
};

static INGRESS_STATUS: Message = Message {
    name: "io.k8s.api.networking.v1.IngressStatus",
    fields: &[k(1, "loadBalancer", Msg(&INGRESS_LOAD_BALANCER_STATUS))],
};

static INGRESS_LOAD_BALANCER_STATUS: Message = Message {
    name: "io.k8s.api.networking.v1.IngressLoadBalancerStatus",
    fields: &[r(1, "ingress", Msg(&INGRESS_LOAD_BALANCER_INGRESS))],
};

static INGRESS_LOAD_BALANCER_INGRESS: Message = Message {
    name: "io.k8s.api.networking.v1.IngressLoadBalancerIngress",
    fields: &[
        f(1, "ip", Str),
        f(2, "hostname", Str),
        r(4, "ports", Msg(&INGRESS_PORT_STATUS)),
    ],
};

static INGRESS_PORT_STATUS: Message = Message {
    name: "io.k8s.api.networking.v1.IngressPortStatus",
    fields: &[
        k(1, "port", Int32),
        k(2, "protocol", Str),
        k(3, "error", Str),
    ],
};

// ---- k8s.io/api/rbac/v1 ----

static POLICY_RULE: Message = Message {
    name: "io.k8s.api.rbac.v1.PolicyRule",
    fields: &[
        r(1, "verbs", Str),
        r(2, "apiGroups", Str),
        r(3, "resources", Str),
        r(4, "resourceNames", Str),
        r(5, "nonResourceURLs", Str),
    ],
};

static AGGREGATION_RULE: Message = Message {
    name: "io.k8s.api.rbac.v1.AggregationRule",
    fields: &[r(1, "clusterRoleSelectors", Msg(&LABEL_SELECTOR))],
};

static ROLE: Message = Message {
    name: "io.k8s.api.rbac.v1.Role",
    fields: &[
        k(1, "metadata", Msg(&OBJECT_META)),
        r(2, "rules", Msg(&POLICY_RULE)),
    ],
};

static CLUSTER_ROLE: Message = Message {
    name: "io.k8s.api.rbac.v1.ClusterRole",
    fields: &[
        k(1, "metadata", Msg(&OBJECT_META)),
        r(2, "rules", Msg(&POLICY_RULE)),
        f(3, "aggregationRule", Msg(&AGGREGATION_RULE)),
    ],
};

static SUBJECT: Message = Message {
    name: "io.k8s.api.rbac.v1.Subject",
    fields: &[
        k(1, "kind", Str),
        f(2, "apiGroup", Str),
        k(3, "name", Str),
        f(4, "namespace", Str),
    ],
};

static ROLE_REF: Message = Message {
    name: "io.k8s.api.rbac.v1.RoleRef",
    fields: &[k(1, "apiGroup", Str), k(2, "kind", Str), k(3, "name", Str)],
};

static ROLE_BINDING: Message = Message {
    name: "io.k8s.api.rbac.v1.RoleBinding",
    fields: &[
        k(1, "metadata", Msg(&OBJECT_META)),
        r(2, "subjects", Msg(&SUBJECT)),
        k(3, "roleRef", Msg(&ROLE_REF)),
    ],
};

static CLUSTER_ROLE_BINDING: Message = Message {
    name: "io.k8s.api.rbac.v1.ClusterRoleBinding",
    fields: &[
        k(1, "metadata", Msg(&OBJECT_META)),
        r(2, "subjects", Msg(&SUBJECT)),
        k(3, "roleRef", Msg(&ROLE_REF)),
    ],
};

// ---- k8s.io/api/authorization/v1 and authentication/v1 (reviews, never stored) ----

static RESOURCE_ATTRIBUTES: Message = Message {
    name: "io.k8s.api.authorization.v1.ResourceAttributes",
    fields: &[
        f(1, "namespace", Str),
        f(2, "verb", Str),
        f(3, "group", Str),
        f(4, "version", Str),
        f(5, "resource", Str),
        f(6, "subresource", Str),
        f(7, "name", Str),
    ],
};

static NON_RESOURCE_ATTRIBUTES: Message = Message {
    name: "io.k8s.api.authorization.v1.NonResourceAttributes",
    fields: &[f(1, "path", Str), f(2, "verb", Str)],
};

static SUBJECT_ACCESS_REVIEW_STATUS: Message = Message {
    name: "io.k8s.api.authorization.v1.SubjectAccessReviewStatus",
    fields: &[
        k(1, "allowed", Bool),
        f(2, "reason", Str),
        f(3, "evaluationError", Str),
        f(4, "denied", Bool),
    ],
};

static SELF_SUBJECT_ACCESS_REVIEW_SPEC: Message = Message {
    name: "io.k8s.api.authorization.v1.SelfSubjectAccessReviewSpec",
    fields: &[
        f(1, "resourceAttributes", Msg(&RESOURCE_ATTRIBUTES)),
        f(2, "nonResourceAttributes", Msg(&NON_RESOURCE_ATTRIBUTES)),
    ],
};

static SELF_SUBJECT_ACCESS_REVIEW: Message = Message {
    name: "io.k8s.api.authorization.v1.SelfSubjectAccessReview",
    fields: &[
        k(1, "metadata", Msg(&OBJECT_META)),
        k(2, "spec", Msg(&SELF_SUBJECT_ACCESS_REVIEW_SPEC)),
        k(3, "status", Msg(&SUBJECT_ACCESS_REVIEW_STATUS)),
    ],
};

static SUBJECT_ACCESS_REVIEW_SPEC: Message = Message {
    name: "io.k8s.api.authorization.v1.SubjectAccessReviewSpec",
    fields: &[
        f(1, "resourceAttributes", Msg(&RESOURCE_ATTRIBUTES)),
        f(2, "nonResourceAttributes", Msg(&NON_RESOURCE_ATTRIBUTES)),
        f(3, "user", Str),
        r(4, "groups", Str),
        f(6, "uid", Str),
    ],
};

static SUBJECT_ACCESS_REVIEW: Message = Message {
    name: "io.k8s.api.authorization.v1.SubjectAccessReview",
    fields: &[
        k(1, "metadata", Msg(&OBJECT_META)),
        k(2, "spec", Msg(&SUBJECT_ACCESS_REVIEW_SPEC)),
        k(3, "status", Msg(&SUBJECT_ACCESS_REVIEW_STATUS)),
    ],
};

static SELF_SUBJECT_RULES_REVIEW_SPEC: Message = Message {
    name: "io.k8s.api.authorization.v1.SelfSubjectRulesReviewSpec",
    fields: &[f(1, "namespace", Str)],
};

static RESOURCE_RULE: Message = Message {
    name: "io.k8s.api.authorization.v1.ResourceRule",
    fields: &[
        r(1, "verbs", Str),
        r(2, "apiGroups", Str),
        r(3, "resources", Str),
        r(4, "resourceNames", Str),
    ],
};

static NON_RESOURCE_RULE: Message = Message {
    name: "io.k8s.api.authorization.v1.NonResourceRule",
    fields: &[r(1, "verbs", Str), r(2, "nonResourceURLs", Str)],
};

static SUBJECT_RULES_REVIEW_STATUS: Message = Message {
    name: "io.k8s.api.authorization.v1.SubjectRulesReviewStatus",
    fields: &[
        r(1, "resourceRules", Msg(&RESOURCE_RULE)),
        r(2, "nonResourceRules", Msg(&NON_RESOURCE_RULE)),
        k(3, "incomplete", Bool),
        f(4, "evaluationError", Str),
    ],
};

static SELF_SUBJECT_RULES_REVIEW: Message = Message {
    name: "io.k8s.api.authorization.v1.SelfSubjectRulesReview",
    fields: &[
        k(1, "metadata", Msg(&OBJECT_META)),
        k(2, "spec", Msg(&SELF_SUBJECT_RULES_REVIEW_SPEC)),
        k(3, "status", Msg(&SUBJECT_RULES_REVIEW_STATUS)),
    ],
};

static USER_INFO: Message = Message {
    name: "io.k8s.api.authentication.v1.UserInfo",
    fields: &[f(1, "username", Str), f(2, "uid", Str), r(3, "groups", Str)],
};

static SELF_SUBJECT_REVIEW_STATUS: Message = Message {
    name: "io.k8s.api.authentication.v1.SelfSubjectReviewStatus",
    fields: &[f(1, "userInfo", Msg(&USER_INFO))],
};

static SELF_SUBJECT_REVIEW: Message = Message {
    name: "io.k8s.api.authentication.v1.SelfSubjectReview",
    fields: &[
        k(1, "metadata", Msg(&OBJECT_META)),
        k(2, "status", Msg(&SELF_SUBJECT_REVIEW_STATUS)),
    ],
};

static BOUND_OBJECT_REFERENCE: Message = Message {
    name: "io.k8s.api.authentication.v1.BoundObjectReference",
    fields: &[
        f(1, "kind", Str),
        f(2, "apiVersion", Str),
        f(3, "name", Str),
        f(4, "uid", Str),
    ],
};

static TOKEN_REQUEST_SPEC: Message = Message {
    name: "io.k8s.api.authentication.v1.TokenRequestSpec",
    fields: &[
        r(1, "audiences", Str),
        f(3, "boundObjectRef", Msg(&BOUND_OBJECT_REFERENCE)),
        f(4, "expirationSeconds", Int64),
    ],
};

static TOKEN_REQUEST_STATUS: Message = Message {
    name: "io.k8s.api.authentication.v1.TokenRequestStatus",
    fields: &[k(1, "token", Str), k(2, "expirationTimestamp", Time)],
};

static TOKEN_REQUEST: Message = Message {
    name: "io.k8s.api.authentication.v1.TokenRequest",
    fields: &[
        k(1, "metadata", Msg(&OBJECT_META)),
        k(2, "spec", Msg(&TOKEN_REQUEST_SPEC)),
        k(3, "status", Msg(&TOKEN_REQUEST_STATUS)),
    ],
};

static TOKEN_REVIEW_SPEC: Message = Message {
    name: "io.k8s.api.authentication.v1.TokenReviewSpec",
    fields: &[f(1, "token", Str), r(2, "audiences", Str)],
};

static TOKEN_REVIEW_STATUS: Message = Message {
    name: "io.k8s.api.authentication.v1.TokenReviewStatus",
    fields: &[
        f(1, "authenticated", Bool),
        f(2, "user", Msg(&USER_INFO)),
        f(3, "error", Str),
        r(4, "audiences", Str),
    ],
};

static TOKEN_REVIEW: Message = Message {
    name: "io.k8s.api.authentication.v1.TokenReview",
    fields: &[
        k(1, "metadata", Msg(&OBJECT_META)),
        k(2, "spec", Msg(&TOKEN_REVIEW_SPEC)),
        k(3, "status", Msg(&TOKEN_REVIEW_STATUS)),
    ],
};

/// The kinds decoded from protobuf: (API group, kind, schema).
static KINDS: &[(&str, &str, &Message)] = &[
    ("", "ConfigMap", &CONFIG_MAP),
    ("", "Secret", &SECRET),
    ("", "Namespace", &NAMESPACE),
    ("", "ServiceAccount", &SERVICE_ACCOUNT),
    ("", "Service", &SERVICE),
    ("", "Pod", &POD),
    ("apps", "Deployment", &DEPLOYMENT),
    ("batch", "Job", &JOB),
    ("batch", "CronJob", &CRON_JOB),
    ("policy", "PodDisruptionBudget", &POD_DISRUPTION_BUDGET),
    ("", "ResourceQuota", &RESOURCE_QUOTA),
    ("scheduling.k8s.io", "PriorityClass", &PRIORITY_CLASS),
    ("networking.k8s.io", "Ingress", &INGRESS),
    ("rbac.authorization.k8s.io", "Role", &ROLE),
    ("rbac.authorization.k8s.io", "ClusterRole", &CLUSTER_ROLE),
    ("rbac.authorization.k8s.io", "RoleBinding", &ROLE_BINDING),
    (
        "rbac.authorization.k8s.io",
        "ClusterRoleBinding",
        &CLUSTER_ROLE_BINDING,
    ),
    (
        "authorization.k8s.io",
        "SelfSubjectAccessReview",
        &SELF_SUBJECT_ACCESS_REVIEW,
    ),
    (
        "authorization.k8s.io",
        "SubjectAccessReview",
        &SUBJECT_ACCESS_REVIEW,
    ),
    (
        "authorization.k8s.io",
        "SelfSubjectRulesReview",
        &SELF_SUBJECT_RULES_REVIEW,
    ),
    (
        "authentication.k8s.io",
        "SelfSubjectReview",
        &SELF_SUBJECT_REVIEW,
    ),
    ("authentication.k8s.io", "TokenRequest", &TOKEN_REQUEST),
    ("authentication.k8s.io", "TokenReview", &TOKEN_REVIEW),
];

/// Why a body could not be decoded.
enum DecodeError {
    /// The bytes are not valid protobuf for the schema (400).
    Malformed(String),
    /// Valid protobuf this server does not understand (415).
    Unsupported(String),
}

type Result<T> = std::result::Result<T, DecodeError>;

fn malformed<T>(message: &Message, what: impl std::fmt::Display) -> Result<T> {
    Err(DecodeError::Malformed(format!(
        "{what} in {}",
        message.name
    )))
}

/// A cursor over protobuf bytes.
struct Reader<'a> {
    bytes: &'a [u8],
    position: usize,
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { bytes, position: 0 }
    }

    fn done(&self) -> bool {
        self.position >= self.bytes.len()
    }

    /// A base-128 varint of at most ten bytes.
    fn varint(&mut self, message: &Message) -> Result<u64> {
        let mut value: u64 = 0;
        for index in 0..10 {
            let Some(&byte) = self.bytes.get(self.position) else {
                return malformed(message, "a truncated varint");
            };
            self.position += 1;
            value |= u64::from(byte & 0x7f) << (7 * index);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        malformed(message, "a varint longer than ten bytes")
    }

    /// A length-delimited value.
    fn delimited(&mut self, message: &Message) -> Result<&'a [u8]> {
        let length = self.varint(message)?;
        let remaining = self.bytes.len() - self.position;
        match usize::try_from(length) {
            Ok(length) if length <= remaining => {
                let value = &self.bytes[self.position..self.position + length];
                self.position += length;
                Ok(value)
            }
            _ => malformed(
                message,
                format!("a length of {length} bytes past the end of the data"),
            ),
        }
    }
}

const WIRE_VARINT: u64 = 0;
const WIRE_DELIMITED: u64 = 2;

fn wire_name(wire: u64) -> &'static str {
    match wire {
        0 => "varint",
        1 => "64-bit",
        2 => "length-delimited",
        3 => "start-group",
        4 => "end-group",
        5 => "32-bit",
        _ => "invalid",
    }
}

/// Decodes one message into a JSON object.
fn decode_message(message: &'static Message, bytes: &[u8]) -> Result<Map<String, Value>> {
    let mut out = Map::new();
    let mut reader = Reader::new(bytes);
    while !reader.done() {
        let tag = reader.varint(message)?;
        let wire = tag & 7;
        let number = tag >> 3;
        if number == 0 || number > u64::from(u32::MAX >> 3) {
            return malformed(message, format!("an invalid field number {number}"));
        }
        let Some(field) = message
            .fields
            .iter()
            .find(|f| u64::from(f.number) == number)
        else {
            return Err(DecodeError::Unsupported(format!(
                "field number {number} ({} wire type) of protobuf message {} is not known to this server; send the object as application/json",
                wire_name(wire),
                message.name
            )));
        };
        decode_field(message, field, wire, &mut reader, &mut out)?;
    }
    Ok(out)
}

fn expect_wire(message: &Message, field: &Field, wire: u64, expected: u64) -> Result<()> {
    if wire == expected {
        Ok(())
    } else {
        malformed(
            message,
            format!(
                "field {} ({}) with {} wire type, expected {}",
                field.number,
                field.name,
                wire_name(wire),
                wire_name(expected)
            ),
        )
    }
}

fn utf8(message: &Message, field: &Field, bytes: &[u8]) -> Result<String> {
    match std::str::from_utf8(bytes) {
        Ok(text) => Ok(text.to_owned()),
        Err(_) => malformed(
            message,
            format!("field {} ({}) is not valid UTF-8", field.number, field.name),
        ),
    }
}

/// Whether a decoded scalar is its type's zero value (left out of `omitempty` fields).
fn is_zero(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_i64() == Some(0),
        Value::Array(_) | Value::Object(_) => false,
    }
}

#[allow(clippy::cast_possible_wrap, clippy::cast_possible_truncation)]
fn decode_field(
    message: &'static Message,
    field: &Field,
    wire: u64,
    reader: &mut Reader<'_>,
    out: &mut Map<String, Value>,
) -> Result<()> {
    let value = match field.ty {
        Int32 | Int64 | Bool if field.repeated && wire == WIRE_DELIMITED => {
            // A packed repeated scalar.
            let mut packed = Reader::new(reader.delimited(message)?);
            let items = out
                .entry(field.name)
                .or_insert_with(|| Value::Array(Vec::new()));
            let Value::Array(items) = items else {
                return malformed(message, format!("field {} twice", field.number));
            };
            while !packed.done() {
                let raw = packed.varint(message)?;
                items.push(scalar_from_varint(field.ty, raw));
            }
            return Ok(());
        }
        Int32 | Int64 | Bool => {
            expect_wire(message, field, wire, WIRE_VARINT)?;
            scalar_from_varint(field.ty, reader.varint(message)?)
        }
        Str => {
            expect_wire(message, field, wire, WIRE_DELIMITED)?;
            Value::String(utf8(message, field, reader.delimited(message)?)?)
        }
        Bytes => {
            expect_wire(message, field, wire, WIRE_DELIMITED)?;
            Value::String(base64(reader.delimited(message)?))
        }
        Msg(inner) => {
            expect_wire(message, field, wire, WIRE_DELIMITED)?;
            Value::Object(decode_message(inner, reader.delimited(message)?)?)
        }
        Inline(inner) => {
            expect_wire(message, field, wire, WIRE_DELIMITED)?;
            let fields = decode_message(inner, reader.delimited(message)?)?;
            out.extend(fields);
            return Ok(());
        }
        MapStr | MapBytes | MapQuantity => {
            expect_wire(message, field, wire, WIRE_DELIMITED)?;
            let (key, value) = decode_map_entry(message, field, reader.delimited(message)?)?;
            let map = out
                .entry(field.name)
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(map) = map {
                map.insert(key, value);
            }
            return Ok(());
        }
        Time => {
            expect_wire(message, field, wire, WIRE_DELIMITED)?;
            decode_time(reader.delimited(message)?)?
        }
        IntOrString => {
            expect_wire(message, field, wire, WIRE_DELIMITED)?;
            decode_int_or_string(reader.delimited(message)?)?
        }
        Quantity => {
            expect_wire(message, field, wire, WIRE_DELIMITED)?;
            decode_quantity(reader.delimited(message)?)?
        }
        FieldsV1 => {
            expect_wire(message, field, wire, WIRE_DELIMITED)?;
            decode_fields_v1(reader.delimited(message)?)?
        }
    };
    if field.repeated {
        let items = out
            .entry(field.name)
            .or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(items) = items {
            items.push(value);
        }
    } else if field.keep_zero || !is_zero(&value) {
        out.insert(field.name.to_owned(), value);
    } else {
        out.remove(field.name);
    }
    Ok(())
}

#[allow(clippy::cast_possible_wrap, clippy::cast_possible_truncation)]
fn scalar_from_varint(ty: Ty, raw: u64) -> Value {
    match ty {
        // int32 is sign-extended to 64 bits on the wire; truncation restores it.
        Int32 => Value::from(raw as i32),
        Bool => Value::Bool(raw != 0),
        _ => Value::from(raw as i64),
    }
}

static MAP_ENTRY: Message = Message {
    name: "map entry",
    fields: &[],
};

fn decode_map_entry(message: &Message, field: &Field, bytes: &[u8]) -> Result<(String, Value)> {
    let mut reader = Reader::new(bytes);
    let mut key = String::new();
    let mut value = match field.ty {
        MapQuantity => Value::String("0".to_owned()),
        _ => Value::String(String::new()),
    };
    while !reader.done() {
        let tag = reader.varint(&MAP_ENTRY)?;
        let (number, wire) = (tag >> 3, tag & 7);
        if wire != WIRE_DELIMITED || !(1..=2).contains(&number) {
            return malformed(
                message,
                format!(
                    "field {} ({}) with a map entry holding field {number} ({} wire type)",
                    field.number,
                    field.name,
                    wire_name(wire)
                ),
            );
        }
        let bytes = reader.delimited(&MAP_ENTRY)?;
        if number == 1 {
            key = utf8(message, field, bytes)?;
        } else {
            value = match field.ty {
                MapBytes => Value::String(base64(bytes)),
                MapQuantity => decode_quantity(bytes)?,
                _ => Value::String(utf8(message, field, bytes)?),
            };
        }
    }
    Ok((key, value))
}

static TIME: Message = Message {
    name: "io.k8s.apimachinery.pkg.apis.meta.v1.Time",
    fields: &[k(1, "seconds", Int64), k(2, "nanos", Int32)],
};

/// 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z, the range of `metav1.Time`.
const TIME_MIN: i64 = -62_135_596_800;
const TIME_MAX: i64 = 253_402_300_799;

fn decode_time(bytes: &[u8]) -> Result<Value> {
    let fields = decode_message(&TIME, bytes)?;
    let seconds = fields.get("seconds").and_then(Value::as_i64).unwrap_or(0);
    let nanos = fields.get("nanos").and_then(Value::as_i64).unwrap_or(0);
    if seconds == 0 && nanos == 0 {
        return Ok(Value::Null);
    }
    if !(TIME_MIN..=TIME_MAX).contains(&seconds) || !(0..1_000_000_000).contains(&nanos) {
        return malformed(
            &TIME,
            format!("a time out of range ({seconds}s, {nanos}ns)"),
        );
    }
    Ok(Value::String(crate::time::rfc3339_from_unix(seconds)))
}

static INT_OR_STRING: Message = Message {
    name: "io.k8s.apimachinery.pkg.util.intstr.IntOrString",
    fields: &[
        k(1, "type", Int64),
        k(2, "intVal", Int32),
        k(3, "strVal", Str),
    ],
};

fn decode_int_or_string(bytes: &[u8]) -> Result<Value> {
    let mut fields = decode_message(&INT_OR_STRING, bytes)?;
    match fields.get("type").and_then(Value::as_i64).unwrap_or(0) {
        0 => Ok(fields.remove("intVal").unwrap_or_else(|| Value::from(0))),
        1 => Ok(fields
            .remove("strVal")
            .unwrap_or_else(|| Value::String(String::new()))),
        other => malformed(&INT_OR_STRING, format!("an unknown type {other}")),
    }
}

static QUANTITY: Message = Message {
    name: "io.k8s.apimachinery.pkg.api.resource.Quantity",
    fields: &[k(1, "string", Str)],
};

fn decode_quantity(bytes: &[u8]) -> Result<Value> {
    let mut fields = decode_message(&QUANTITY, bytes)?;
    Ok(fields
        .remove("string")
        .unwrap_or_else(|| Value::String("0".to_owned())))
}

static FIELDS_V1: Message = Message {
    name: "io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1",
    fields: &[k(1, "Raw", Bytes)],
};

fn decode_fields_v1(bytes: &[u8]) -> Result<Value> {
    let mut reader = Reader::new(bytes);
    let mut raw: &[u8] = b"{}";
    while !reader.done() {
        let tag = reader.varint(&FIELDS_V1)?;
        if tag != (1 << 3 | WIRE_DELIMITED) {
            return Err(DecodeError::Unsupported(format!(
                "field number {} of protobuf message {} is not known to this server",
                tag >> 3,
                FIELDS_V1.name
            )));
        }
        raw = reader.delimited(&FIELDS_V1)?;
    }
    match serde_json::from_slice::<Value>(raw) {
        Ok(value) => Ok(value),
        Err(e) => malformed(&FIELDS_V1, format!("Raw that is not JSON ({e})")),
    }
}

/// Standard base64 with padding, as Go's `encoding/json` writes `[]byte`.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        for (index, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if index <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> shift & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

static UNKNOWN: Message = Message {
    name: "io.k8s.apimachinery.pkg.runtime.Unknown",
    fields: &[
        k(1, "typeMeta", Msg(&TYPE_META)),
        k(2, "raw", Bytes),
        k(3, "contentEncoding", Str),
        k(4, "contentType", Str),
    ],
};

static TYPE_META: Message = Message {
    name: "io.k8s.apimachinery.pkg.runtime.TypeMeta",
    fields: &[k(1, "apiVersion", Str), k(2, "kind", Str)],
};

/// The parts of the `runtime.Unknown` envelope.
struct Envelope<'a> {
    api_version: String,
    kind: String,
    raw: &'a [u8],
    content_encoding: String,
}

fn decode_envelope(bytes: &[u8]) -> Result<Envelope<'_>> {
    let mut envelope = Envelope {
        api_version: String::new(),
        kind: String::new(),
        raw: &[],
        content_encoding: String::new(),
    };
    let mut reader = Reader::new(bytes);
    while !reader.done() {
        let tag = reader.varint(&UNKNOWN)?;
        let (number, wire) = (tag >> 3, tag & 7);
        let Some(field) = UNKNOWN
            .fields
            .iter()
            .find(|f| u64::from(f.number) == number)
        else {
            return Err(DecodeError::Unsupported(format!(
                "field number {number} of protobuf message {} is not known to this server",
                UNKNOWN.name
            )));
        };
        expect_wire(&UNKNOWN, field, wire, WIRE_DELIMITED)?;
        let value = reader.delimited(&UNKNOWN)?;
        match number {
            1 => {
                let type_meta = decode_message(&TYPE_META, value)?;
                let text = |key: &str| {
                    type_meta
                        .get(key)
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned()
                };
                envelope.api_version = text("apiVersion");
                envelope.kind = text("kind");
            }
            2 => envelope.raw = value,
            3 => envelope.content_encoding = utf8(&UNKNOWN, field, value)?,
            _ => {
                utf8(&UNKNOWN, field, value)?;
            }
        }
    }
    Ok(envelope)
}

/// The kinds [`decode_protobuf`] understands, as `group/kind` (core kinds without a group).
#[must_use]
pub fn protobuf_kinds() -> Vec<String> {
    let mut kinds: Vec<String> = KINDS
        .iter()
        .map(|(group, kind, _)| {
            if group.is_empty() {
                (*kind).to_owned()
            } else {
                format!("{group}/{kind}")
            }
        })
        .collect();
    kinds.push("DeleteOptions".to_owned());
    kinds
}

/// Decodes a Kubernetes protobuf request body (`k8s\0` + `runtime.Unknown`) sent to the
/// resource `def` into the JSON object Go's `encoding/json` would produce for it, with
/// `apiVersion` and `kind` from the envelope (the resource's when the envelope has none).
/// A `DeleteOptions` body (the body of a DELETE) is decoded whatever `def` is.
///
/// # Errors
/// 400 BadRequest for bytes that are not a well-formed envelope or message; 415
/// UnsupportedMediaType for a kind without a schema here, a compressed `raw`, or a field
/// number this server does not know (the message names the protobuf message and the field).
pub fn decode_protobuf(def: &ResourceDef, body: &[u8]) -> std::result::Result<Value, ApiError> {
    let Some(rest) = body.strip_prefix(PROTOBUF_MAGIC) else {
        return Err(ApiError::bad_request(
            "the protobuf body does not start with the Kubernetes magic bytes \"k8s\\x00\""
                .to_owned(),
        ));
    };
    decode_body(def, rest).map_err(protobuf_error)
}

fn decode_body(def: &ResourceDef, bytes: &[u8]) -> Result<Value> {
    let envelope = decode_envelope(bytes)?;
    if !envelope.content_encoding.is_empty() {
        return Err(DecodeError::Unsupported(format!(
            "protobuf bodies with contentEncoding {:?} are not supported",
            envelope.content_encoding
        )));
    }
    let kind = if envelope.kind.is_empty() {
        def.kind.clone()
    } else {
        envelope.kind
    };
    let api_version = if envelope.api_version.is_empty() {
        def.api_version()
    } else {
        envelope.api_version
    };
    let group = api_version
        .rsplit_once('/')
        .map_or("", |(group, _version)| group);
    let schema = if kind == "DeleteOptions" {
        &DELETE_OPTIONS
    } else if let Some((_, _, schema)) = KINDS.iter().find(|(g, k, _)| *g == group && *k == kind) {
        schema
    } else {
        return Err(DecodeError::Unsupported(format!(
            "this server decodes protobuf bodies only for {}; a {kind} ({api_version}) body must be sent as application/json",
            protobuf_kinds().join(", ")
        )));
    };
    let fields = decode_message(schema, envelope.raw)?;
    let mut object = Map::new();
    object.insert("apiVersion".to_owned(), Value::String(api_version));
    object.insert("kind".to_owned(), Value::String(kind));
    object.extend(fields);
    Ok(Value::Object(object))
}

fn protobuf_error(error: DecodeError) -> ApiError {
    match error {
        DecodeError::Malformed(message) => {
            ApiError::bad_request(format!("the protobuf body is malformed: {message}"))
        }
        DecodeError::Unsupported(message) => ApiError::unsupported_media_type(message),
    }
}

/// A response body of any shape this server encodes (object, list, Status) back to JSON.
fn decode_any(body: &[u8]) -> std::result::Result<Value, ApiError> {
    let Some(rest) = body.strip_prefix(PROTOBUF_MAGIC) else {
        return Err(ApiError::bad_request(
            "the protobuf body does not start with the Kubernetes magic bytes".to_owned(),
        ));
    };
    let envelope = decode_envelope(rest).map_err(protobuf_error)?;
    let fields = match encode::shape_of(&envelope.api_version, &envelope.kind) {
        Some(encode::Shape::Object(schema)) => decode_message(schema, envelope.raw),
        Some(encode::Shape::Status) => decode_message(&encode::STATUS, envelope.raw),
        Some(encode::Shape::List(schema)) => decode_list(schema, envelope.raw),
        None => Err(DecodeError::Unsupported(format!(
            "no protobuf schema for {} ({})",
            envelope.kind, envelope.api_version
        ))),
    }
    .map_err(protobuf_error)?;
    let mut object = Map::new();
    object.insert("apiVersion".to_owned(), Value::String(envelope.api_version));
    object.insert("kind".to_owned(), Value::String(envelope.kind));
    object.extend(fields);
    Ok(Value::Object(object))
}

static LIST: Message = Message {
    name: "list",
    fields: &[],
};

/// A list message: 1 `metadata` (ListMeta), 2 `items` (the kind's message, repeated).
fn decode_list(schema: &'static Message, bytes: &[u8]) -> Result<Map<String, Value>> {
    let mut out = Map::new();
    let mut items = Vec::new();
    let mut reader = Reader::new(bytes);
    while !reader.done() {
        let tag = reader.varint(&LIST)?;
        let value = match tag & 7 {
            WIRE_DELIMITED => reader.delimited(&LIST)?,
            wire => return malformed(&LIST, format!("a {} field", wire_name(wire))),
        };
        match tag >> 3 {
            1 => {
                out.insert(
                    "metadata".to_owned(),
                    Value::Object(decode_message(&encode::LIST_META, value)?),
                );
            }
            2 => items.push(Value::Object(decode_message(schema, value)?)),
            number => {
                return Err(DecodeError::Unsupported(format!(
                    "field number {number} of a list is not known to this server"
                )));
            }
        }
    }
    out.insert("items".to_owned(), Value::Array(items));
    Ok(out)
}

/// A `WatchEvent` message: its `type` and its object's `raw` bytes.
fn decode_watch_event(bytes: &[u8]) -> std::result::Result<(String, &[u8]), ApiError> {
    static WATCH_EVENT: Message = Message {
        name: "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent",
        fields: &[],
    };
    let inner = || -> Result<(String, &[u8])> {
        let mut event_type = String::new();
        let mut raw: &[u8] = &[];
        let mut reader = Reader::new(bytes);
        while !reader.done() {
            let tag = reader.varint(&WATCH_EVENT)?;
            if tag & 7 != WIRE_DELIMITED {
                return malformed(&WATCH_EVENT, "a field that is not length-delimited");
            }
            let value = reader.delimited(&WATCH_EVENT)?;
            match tag >> 3 {
                1 => {
                    event_type = String::from_utf8(value.to_vec()).map_err(|_| {
                        DecodeError::Malformed("a WatchEvent type that is not UTF-8".to_owned())
                    })?;
                }
                2 => {
                    let mut extension = Reader::new(value);
                    while !extension.done() {
                        let tag = extension.varint(&WATCH_EVENT)?;
                        if tag != (1 << 3 | WIRE_DELIMITED) {
                            return malformed(&WATCH_EVENT, "a RawExtension field other than raw");
                        }
                        raw = extension.delimited(&WATCH_EVENT)?;
                    }
                }
                number => return malformed(&WATCH_EVENT, format!("field number {number}")),
            }
        }
        Ok((event_type, raw))
    };
    inner().map_err(protobuf_error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::builtin_resources;
    use proptest::prelude::*;
    use serde_json::json;

    fn def(plural: &str) -> ResourceDef {
        builtin_resources()
            .into_iter()
            .find(|d| d.plural == plural)
            .unwrap()
    }

    /// A tiny protobuf encoder for the tests.
    #[derive(Default)]
    struct Enc(Vec<u8>);

    impl Enc {
        fn varint(&mut self, mut v: u64) -> &mut Self {
            loop {
                let byte = (v & 0x7f) as u8;
                v >>= 7;
                if v == 0 {
                    self.0.push(byte);
                    return self;
                }
                self.0.push(byte | 0x80);
            }
        }
        fn uint(&mut self, field: u64, v: u64) -> &mut Self {
            self.varint(field << 3).varint(v)
        }
        fn bytes(&mut self, field: u64, v: &[u8]) -> &mut Self {
            self.varint(field << 3 | 2).varint(v.len() as u64);
            self.0.extend_from_slice(v);
            self
        }
        fn str(&mut self, field: u64, v: &str) -> &mut Self {
            self.bytes(field, v.as_bytes())
        }
        fn msg(&mut self, field: u64, build: impl FnOnce(&mut Enc)) -> &mut Self {
            let mut inner = Enc::default();
            build(&mut inner);
            self.bytes(field, &inner.0)
        }
        fn entry(&mut self, field: u64, key: &str, value: &[u8]) -> &mut Self {
            self.msg(field, |e| {
                e.str(1, key).bytes(2, value);
            })
        }
    }

    fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
        let mut e = Enc::default();
        e.msg(1, |t| {
            t.str(1, api_version).str(2, kind);
        })
        .bytes(2, raw)
        .str(3, "")
        .str(4, "");
        let mut body = PROTOBUF_MAGIC.to_vec();
        body.extend_from_slice(&e.0);
        body
    }

    /// ObjectMeta as gogo-protobuf writes it: every non-pointer field, zero or not.
    fn meta(e: &mut Enc, name: &str) {
        e.str(1, name)
            .str(2, "")
            .str(3, "")
            .str(4, "")
            .str(5, "")
            .str(6, "")
            .uint(7, 0)
            .msg(8, |t| {
                t.uint(1, 0).uint(2, 0);
            });
    }

    #[test]
    fn configmap_as_kubectl_create_sends_it() {
        let mut raw = Enc::default();
        raw.msg(1, |m| {
            meta(m, "demo");
            m.entry(11, "app", b"web");
        })
        .entry(2, "a", b"1")
        .entry(2, "b", b"two")
        .entry(3, "bin", &[0, 1, 2, 255]);
        let body = envelope("v1", "ConfigMap", &raw.0);
        let value = decode_protobuf(&def("configmaps"), &body).unwrap();
        assert_eq!(
            value,
            json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "demo", "creationTimestamp": null, "labels": {"app": "web"}},
                "data": {"a": "1", "b": "two"},
                "binaryData": {"bin": "AAEC/w=="}
            })
        );
    }

    fn unhex(text: &str) -> Vec<u8> {
        (0..text.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
            .collect()
    }

    /// The exact body kubectl 1.33.1 POSTs for
    /// `kubectl create deployment fixture3 --image=nginx:1.27 --replicas=0 --port=8080 -n fx`
    /// (from `-v=9`); the expected value is that command's `--dry-run=client -o json` output.
    #[test]
    fn kubectl_create_deployment_body() {
        let body = unhex(&[
        "6b3873000a150a07617070732f7631120a4465706c6f796d656e7412d4010a2b0a08666978747572653312001a026678",
        "22002a003200380042005a0f0a0361707012086669787475726533129601080012110a0f0a0361707012086669787475",
        "7265331a770a210a0012001a0022002a003200380042005a0f0a0361707012086669787475726533125212340a056e67",
        "696e78120a6e67696e783a312e32372a00320b0a00100018903f22002a0042006a007200800100880100900100a20100",
        "1a00320042004a0052005800600068008201008a01009a0100c2010022020a00280038001a0c08001000180020002800",
        "38001a002200",
        ]
        .concat());
        let value = decode_protobuf(&def("deployments"), &body).unwrap();
        assert_eq!(
            value,
            json!({"kind": "Deployment", "apiVersion": "apps/v1",
                "metadata": {"name": "fixture3", "namespace": "fx", "creationTimestamp": null, "labels": {"app": "fixture3"}},
                "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "fixture3"}},
                    "template": {"metadata": {"creationTimestamp": null, "labels": {"app": "fixture3"}},
                        "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27",
                            "ports": [{"containerPort": 8080}], "resources": {}}]}},
                    "strategy": {}},
                "status": {}})
        );
    }

    #[test]
    fn secret_data_is_base64() {
        let mut raw = Enc::default();
        raw.msg(1, |m| meta(m, "s"))
            .entry(2, "password", b"hunter2")
            .str(3, "Opaque");
        let value = decode_protobuf(&def("secrets"), &envelope("v1", "Secret", &raw.0)).unwrap();
        assert_eq!(value["data"]["password"], "aHVudGVyMg==");
        assert_eq!(value["type"], "Opaque");
    }

    #[test]
    fn deployment_with_template_selector_and_strategy() {
        let mut raw = Enc::default();
        raw.msg(1, |m| {
            meta(m, "web");
            m.entry(11, "app", b"web");
        })
        .msg(2, |spec| {
            spec.uint(1, 0) // replicas: 0 is a pointer that was set
                .msg(2, |sel| {
                    sel.entry(1, "app", b"web").msg(2, |req| {
                        req.str(1, "tier").str(2, "In").str(3, "a").str(3, "b");
                    });
                })
                .msg(3, |template| {
                    template
                        .msg(1, |m| {
                            meta(m, "");
                            m.entry(11, "app", b"web");
                        })
                        .msg(2, |pod| {
                            pod.msg(2, |c| {
                                c.str(1, "nginx")
                                    .str(2, "nginx:1.27")
                                    .str(3, "sh")
                                    .str(3, "-c")
                                    .msg(6, |p| {
                                        p.str(1, "").uint(2, 0).uint(3, 80).str(4, "TCP");
                                    })
                                    .msg(7, |env| {
                                        env.str(1, "A").str(2, "1");
                                    })
                                    .msg(8, |res| {
                                        res.msg(1, |entry| {
                                            entry.str(1, "cpu").msg(2, |q| {
                                                q.str(1, "500m");
                                            });
                                        });
                                    })
                                    .str(13, "")
                                    .str(14, "")
                                    .uint(16, 0);
                            })
                            .str(3, "")
                            .str(6, "")
                            .msg(14, |_| {});
                        });
                })
                .msg(4, |strategy| {
                    strategy.str(1, "RollingUpdate").msg(2, |ru| {
                        ru.msg(1, |ios| {
                            ios.uint(1, 1).uint(2, 0).str(3, "25%");
                        })
                        .msg(2, |ios| {
                            ios.uint(1, 0).uint(2, 2).str(3, "");
                        });
                    });
                })
                .uint(5, 0)
                .uint(7, 0);
        })
        .msg(3, |_| {});
        let value = decode_protobuf(
            &def("deployments"),
            &envelope("apps/v1", "Deployment", &raw.0),
        )
        .unwrap();
        assert_eq!(
            value,
            json!({
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "web", "creationTimestamp": null, "labels": {"app": "web"}},
                "spec": {
                    "replicas": 0,
                    "selector": {
                        "matchLabels": {"app": "web"},
                        "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]
                    },
                    "template": {
                        "metadata": {"creationTimestamp": null, "labels": {"app": "web"}},
                        "spec": {
                            "containers": [{
                                "name": "nginx",
                                "image": "nginx:1.27",
                                "command": ["sh", "-c"],
                                "ports": [{"containerPort": 80, "protocol": "TCP"}],
                                "env": [{"name": "A", "value": "1"}],
                                "resources": {"limits": {"cpu": "500m"}}
                            }],
                            "securityContext": {}
                        }
                    },
                    "strategy": {
                        "type": "RollingUpdate",
                        "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": 2}
                    }
                },
                "status": {}
            })
        );
    }

    #[test]
    fn service_ports_with_int_or_string_target() {
        let mut raw = Enc::default();
        raw.msg(1, |m| meta(m, "svc"))
            .msg(2, |spec| {
                spec.msg(1, |port| {
                    port.str(1, "http")
                        .str(2, "TCP")
                        .uint(3, 80)
                        .msg(4, |t| {
                            t.uint(1, 1).uint(2, 0).str(3, "web");
                        })
                        .uint(5, 0);
                })
                .entry(2, "app", b"web")
                .str(3, "")
                .str(4, "ClusterIP")
                .str(7, "");
            })
            .msg(3, |status| {
                status.msg(1, |_| {});
            });
        let value = decode_protobuf(&def("services"), &envelope("v1", "Service", &raw.0)).unwrap();
        assert_eq!(
            value["spec"],
            json!({"ports": [{"name": "http", "protocol": "TCP", "port": 80, "targetPort": "web"}],
                   "selector": {"app": "web"}, "type": "ClusterIP"})
        );
        assert_eq!(value["status"], json!({"loadBalancer": {}}));
    }

    #[test]
    fn times_owner_references_and_negative_ints() {
        let mut raw = Enc::default();
        raw.msg(1, |m| {
            m.str(1, "x")
                .msg(8, |t| {
                    t.uint(1, 1_764_428_400).uint(2, 0);
                })
                .uint(10, (-5_i64) as u64)
                .msg(13, |o| {
                    o.str(1, "Deployment")
                        .str(3, "web")
                        .str(4, "uid-1")
                        .str(5, "apps/v1")
                        .uint(6, 1);
                })
                .str(14, "a/b");
        });
        let value =
            decode_protobuf(&def("namespaces"), &envelope("v1", "Namespace", &raw.0)).unwrap();
        let meta = &value["metadata"];
        assert_eq!(meta["creationTimestamp"], "2025-11-29T15:00:00Z");
        assert_eq!(meta["deletionGracePeriodSeconds"], -5);
        assert_eq!(
            meta["ownerReferences"],
            json!([{"kind": "Deployment", "name": "web", "uid": "uid-1", "apiVersion": "apps/v1", "controller": true}])
        );
        assert_eq!(meta["finalizers"], json!(["a/b"]));
    }

    #[test]
    fn delete_options_decode_for_any_resource() {
        let mut raw = Enc::default();
        raw.uint(1, 0).str(4, "Background").str(5, "All");
        let body = envelope("meta.k8s.io/v1", "DeleteOptions", &raw.0);
        let value = decode_protobuf(&def("pods"), &body).unwrap();
        assert_eq!(
            value,
            json!({"apiVersion": "meta.k8s.io/v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0,
                   "propagationPolicy": "Background", "dryRun": ["All"]})
        );
    }

    #[test]
    fn unknown_field_is_a_415_naming_message_and_field() {
        let mut raw = Enc::default();
        raw.msg(1, |m| {
            meta(m, "p");
        })
        .msg(2, |spec| {
            spec.msg(2, |c| {
                c.str(1, "c").msg(10, |_| {}); // livenessProbe: not in the tables
            });
        });
        let error = decode_protobuf(&def("pods"), &envelope("v1", "Pod", &raw.0)).unwrap_err();
        assert_eq!(error.code, 415);
        assert!(
            error.message.contains("field number 10"),
            "{}",
            error.message
        );
        assert!(
            error.message.contains("io.k8s.api.core.v1.Container"),
            "{}",
            error.message
        );
    }

    #[test]
    fn unsupported_kind_is_a_415() {
        let body = envelope("storage.k8s.io/v1", "StorageClass", &[]);
        let error = decode_protobuf(&def("pods"), &body).unwrap_err();
        assert_eq!(error.code, 415);
        assert!(
            error.message.contains("StorageClass (storage.k8s.io/v1)"),
            "{}",
            error.message
        );
    }

    #[test]
    fn malformed_bodies_are_400() {
        let pods = def("pods");
        assert_eq!(decode_protobuf(&pods, b"{}").unwrap_err().code, 400);
        assert_eq!(
            decode_protobuf(&pods, b"k8s\0\x0a\x05ab").unwrap_err().code,
            400
        );
        // A string field sent as a varint.
        let mut raw = Enc::default();
        raw.msg(1, |m| {
            m.uint(1, 7);
        });
        let error = decode_protobuf(&pods, &envelope("v1", "Pod", &raw.0)).unwrap_err();
        assert_eq!(error.code, 400);
        assert!(
            error.message.contains("field 1 (name)"),
            "{}",
            error.message
        );
        // A compressed body.
        let mut e = Enc::default();
        e.msg(1, |t| {
            t.str(1, "v1").str(2, "Pod");
        })
        .str(3, "gzip");
        let mut body = PROTOBUF_MAGIC.to_vec();
        body.extend_from_slice(&e.0);
        assert_eq!(decode_protobuf(&pods, &body).unwrap_err().code, 415);
    }

    #[test]
    fn base64_matches_the_standard_alphabet() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foob"), "Zm9vYg==");
        assert_eq!(base64(&[0xfb, 0xff]), "+/8=");
    }

    #[test]
    fn media_type_detection() {
        assert!(is_protobuf_media_type(
            "application/vnd.kubernetes.protobuf"
        ));
        assert!(is_protobuf_media_type(
            "application/vnd.kubernetes.protobuf; charset=binary"
        ));
        assert!(!is_protobuf_media_type("application/json"));
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let pods = def("pods");
            let _ = decode_protobuf(&pods, &bytes);
            let mut body = PROTOBUF_MAGIC.to_vec();
            body.extend_from_slice(&bytes);
            let _ = decode_protobuf(&pods, &body);
        }

        #[test]
        fn arbitrary_raw_objects_never_panic(
            kind in proptest::sample::select(vec!["Pod", "ConfigMap", "Secret", "Service", "Namespace", "ServiceAccount", "DeleteOptions"]),
            raw in proptest::collection::vec(any::<u8>(), 0..512),
        ) {
            let _ = decode_protobuf(&def("pods"), &envelope("v1", kind, &raw));
            let _ = decode_protobuf(&def("deployments"), &envelope("apps/v1", "Deployment", &raw));
        }
    }
}

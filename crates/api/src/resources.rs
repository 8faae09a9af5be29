//! Resource definitions: the built-in kinds, custom kinds from a TOML file, and the selectable
//! fields and labels of an object.
//!
//! Field values follow Kubernetes' `fields.Set` for the built-in kinds: a field of a typed Go
//! struct always has a value, so a missing string reads as `""` and a missing bool as `"false"`
//! (which is what makes `spec.nodeName=` select unscheduled pods). For custom resources a missing
//! field is absent from the map.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

/// One kind of object the server serves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceDef {
    /// The API group, `""` for the core group.
    pub group: String,
    /// The version, e.g. `v1`.
    pub version: String,
    /// The kind, e.g. `Pod`.
    pub kind: String,
    /// The plural resource name used in URLs, e.g. `pods`.
    pub plural: String,
    /// The singular name, e.g. `pod`.
    pub singular: String,
    /// Short names kubectl accepts, e.g. `po`.
    pub short_names: Vec<String>,
    /// Whether objects live in a namespace.
    pub namespaced: bool,
    /// Fields a field selector may name beyond `metadata.name` and `metadata.namespace`.
    pub selectable_fields: Vec<String>,
    /// The indexed field watchers are bucketed by, e.g. `spec.nodeName` for pods.
    pub trigger_field: Option<String>,
    /// Discovery categories, e.g. `all`.
    pub categories: Vec<String>,
    /// A custom resource's `additionalPrinterColumns` (its CRD's), for Table output; empty
    /// for the others.
    pub printer_columns: Vec<Value>,
    /// The subresources a CustomResourceDefinition declares for the served version (`status`,
    /// `scale`), which are then the only ones served and listed; `None` for the other kinds,
    /// whose subresources follow from the kind.
    pub declared_subresources: Option<Vec<String>>,
}

/// The groups Kubernetes itself serves. Their resources are stored under `/registry/{resource}`
/// without the group, except for [`GROUP_STORED_BUILTIN_GROUPS`].
const BUILTIN_GROUPS: &[&str] = &[
    "",
    "apps",
    "coordination.k8s.io",
    "discovery.k8s.io",
    "batch",
    "autoscaling",
    "policy",
    "networking.k8s.io",
    "rbac.authorization.k8s.io",
    "storage.k8s.io",
    "scheduling.k8s.io",
    "admissionregistration.k8s.io",
    "apiregistration.k8s.io",
    "certificates.k8s.io",
    "node.k8s.io",
    "flowcontrol.apiserver.k8s.io",
];

/// Built-in groups served by kube-apiserver's aggregator or extensions server, which store
/// their resources under `/registry/{group}/{resource}` as custom resources are.
const GROUP_STORED_BUILTIN_GROUPS: &[&str] = &["apiregistration.k8s.io"];

/// Built-in resources kube-apiserver stores under another name than their plural.
const STORAGE_NAMES: &[(&str, &str, &str)] = &[
    ("", "replicationcontrollers", "controllers"),
    ("networking.k8s.io", "ingresses", "ingress"),
];

impl ResourceDef {
    /// A definition with only its names and scope (no short names, selectable fields or
    /// categories): for resources the server answers without storing them (reviews, `Scale`)
    /// and for resources named in a request's attributes.
    #[must_use]
    pub fn named(
        group: &str,
        version: &str,
        plural: &str,
        kind: &str,
        namespaced: bool,
    ) -> ResourceDef {
        ResourceDef {
            group: group.to_owned(),
            version: version.to_owned(),
            kind: kind.to_owned(),
            plural: plural.to_owned(),
            singular: kind.to_ascii_lowercase(),
            short_names: Vec::new(),
            namespaced,
            selectable_fields: Vec::new(),
            trigger_field: None,
            categories: Vec::new(),
            printer_columns: Vec::new(),
            declared_subresources: None,
        }
    }

    /// `v1` for the core group, `{group}/{version}` otherwise.
    #[must_use]
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The kind of a list of these objects, e.g. `PodList`.
    #[must_use]
    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }

    /// The group/version string; the same as [`ResourceDef::api_version`].
    #[must_use]
    pub fn group_version(&self) -> String {
        self.api_version()
    }

    /// The storage key prefix below the registry prefix, as Kubernetes lays it out: `pods` for
    /// built-in groups and `{group}/{plural}` for custom resources.
    #[must_use]
    pub fn storage_prefix(&self) -> String {
        if self.is_builtin() && !GROUP_STORED_BUILTIN_GROUPS.contains(&self.group.as_str()) {
            STORAGE_NAMES
                .iter()
                .find(|(group, plural, _)| *group == self.group && *plural == self.plural)
                .map_or_else(|| self.plural.clone(), |(_, _, name)| (*name).to_owned())
        } else {
            format!("{}/{}", self.group, self.plural)
        }
    }

    /// Whether the resource belongs to a group Kubernetes itself serves.
    #[must_use]
    pub fn is_builtin(&self) -> bool {
        BUILTIN_GROUPS.contains(&self.group.as_str())
    }

    /// Whether kube-apiserver serves the kind from a Go type (the built-in groups, and the
    /// CustomResourceDefinitions and `events.k8s.io` Events this server serves beside them),
    /// so that a strategic merge patch applies to it; custom resources have none.
    #[must_use]
    pub fn has_go_type(&self) -> bool {
        self.is_builtin()
            || matches!(
                self.group.as_str(),
                "apiextensions.k8s.io" | "events.k8s.io"
            )
    }

    /// The resource qualified by its group as Kubernetes prints it in errors: `pods`,
    /// `deployments.apps`.
    #[must_use]
    pub fn qualified_resource(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// The kind qualified by its group as Kubernetes prints it in errors: `Pod`,
    /// `Deployment.apps`.
    #[must_use]
    pub fn qualified_kind(&self) -> String {
        if self.group.is_empty() {
            self.kind.clone()
        } else {
            format!("{}.{}", self.kind, self.group)
        }
    }

    /// Every field a field selector may name on this resource.
    #[must_use]
    pub fn supported_fields(&self) -> Vec<String> {
        let mut fields = vec!["metadata.name".to_owned()];
        if self.namespaced {
            fields.push("metadata.namespace".to_owned());
        }
        for field in &self.selectable_fields {
            if !fields.contains(field) {
                fields.push(field.clone());
            }
        }
        fields
    }
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

#[allow(clippy::too_many_arguments)]
fn builtin(
    group: &str,
    kind: &str,
    plural: &str,
    short_names: &[&str],
    namespaced: bool,
    selectable_fields: &[&str],
    trigger_field: Option<&str>,
    categories: &[&str],
) -> ResourceDef {
    ResourceDef {
        short_names: strings(short_names),
        selectable_fields: strings(selectable_fields),
        trigger_field: trigger_field.map(str::to_owned),
        categories: strings(categories),
        ..ResourceDef::named(group, "v1", plural, kind, namespaced)
    }
}

/// A built-in resource outside version `v1` (e.g. `autoscaling/v2`).
fn builtin_at(version: &str, def: ResourceDef) -> ResourceDef {
    ResourceDef {
        version: version.to_owned(),
        ..def
    }
}

/// The built-in resources: core v1 namespaces, nodes, pods, configmaps, secrets, services,
/// endpoints, events, serviceaccounts, persistentvolumeclaims, persistentvolumes,
/// resourcequotas, limitranges, replicationcontrollers and podtemplates; apps/v1 deployments,
/// replicasets, statefulsets and daemonsets; coordination.k8s.io/v1 leases;
/// discovery.k8s.io/v1 endpointslices; batch/v1 jobs and cronjobs; autoscaling/v2
/// horizontalpodautoscalers; policy/v1 poddisruptionbudgets; networking.k8s.io/v1
/// networkpolicies, ingresses, ingressclasses, ipaddresses and servicecidrs; rbac.authorization.k8s.io/v1 roles,
/// rolebindings, clusterroles and clusterrolebindings; storage.k8s.io/v1 storageclasses;
/// scheduling.k8s.io/v1 priorityclasses; certificates.k8s.io/v1 certificatesigningrequests;
/// admissionregistration.k8s.io/v1 validating and
/// mutating webhook configurations; apiregistration.k8s.io/v1 apiservices; node.k8s.io/v1
/// runtimeclasses; storage.k8s.io/v1 csidrivers, csinodes, volumeattachments and
/// csistoragecapacities; apps/v1 controllerrevisions; admissionregistration.k8s.io/v1
/// validatingadmissionpolicies and validatingadmissionpolicybindings;
/// flowcontrol.apiserver.k8s.io/v1 flowschemas and prioritylevelconfigurations. (The first
/// fifteen in this order come first, so older clients' indexes into the list keep their
/// meaning.)
#[must_use]
pub fn builtin_resources() -> Vec<ResourceDef> {
    let all = &["all"][..];
    let mut defs = vec![
        builtin(
            "",
            "Namespace",
            "namespaces",
            &["ns"],
            false,
            &["status.phase"],
            None,
            &[],
        ),
        builtin(
            "",
            "Node",
            "nodes",
            &["no"],
            false,
            &["spec.unschedulable"],
            None,
            &[],
        ),
        builtin(
            "",
            "Pod",
            "pods",
            &["po"],
            true,
            &[
                "spec.nodeName",
                "spec.restartPolicy",
                "spec.schedulerName",
                "spec.serviceAccountName",
                "spec.hostNetwork",
                "status.phase",
                "status.podIP",
                "status.nominatedNodeName",
            ],
            Some("spec.nodeName"),
            all,
        ),
        builtin("", "ConfigMap", "configmaps", &["cm"], true, &[], None, &[]),
        builtin("", "Secret", "secrets", &[], true, &["type"], None, &[]),
        // kube's `AddFieldLabelConversionsForService` (since 1.30; kube-proxy selects
        // `spec.clusterIP!=None`).
        builtin(
            "",
            "Service",
            "services",
            &["svc"],
            true,
            &["spec.clusterIP", "spec.type"],
            None,
            all,
        ),
        builtin("", "Endpoints", "endpoints", &["ep"], true, &[], None, &[]),
        builtin(
            "",
            "Event",
            "events",
            &["ev"],
            true,
            &[
                "involvedObject.kind",
                "involvedObject.namespace",
                "involvedObject.name",
                "involvedObject.uid",
                "involvedObject.apiVersion",
                "involvedObject.resourceVersion",
                "involvedObject.fieldPath",
                "reason",
                "reportingComponent",
                "source",
                "type",
            ],
            None,
            &[],
        ),
        builtin(
            "",
            "ServiceAccount",
            "serviceaccounts",
            &["sa"],
            true,
            &[],
            None,
            &[],
        ),
        builtin(
            "apps",
            "Deployment",
            "deployments",
            &["deploy"],
            true,
            &[],
            None,
            all,
        ),
        builtin(
            "apps",
            "ReplicaSet",
            "replicasets",
            &["rs"],
            true,
            &["status.replicas"],
            None,
            all,
        ),
        builtin(
            "apps",
            "StatefulSet",
            "statefulsets",
            &["sts"],
            true,
            &[],
            None,
            all,
        ),
        builtin(
            "apps",
            "DaemonSet",
            "daemonsets",
            &["ds"],
            true,
            &[],
            None,
            all,
        ),
        builtin(
            "coordination.k8s.io",
            "Lease",
            "leases",
            &[],
            true,
            &[],
            None,
            &[],
        ),
        builtin(
            "discovery.k8s.io",
            "EndpointSlice",
            "endpointslices",
            &[],
            true,
            &[],
            None,
            &[],
        ),
    ];
    defs.extend(more_builtin_resources());
    defs
}

/// The built-in resources beyond the first fifteen (see [`builtin_resources`]).
fn more_builtin_resources() -> Vec<ResourceDef> {
    let all = &["all"][..];
    // (group, kind, plural, short names, namespaced, selectable fields, categories)
    type Row<'a> = (
        &'a str,
        &'a str,
        &'a str,
        &'a [&'a str],
        bool,
        &'a [&'a str],
        &'a [&'a str],
    );
    let rows: &[Row<'_>] = &[
        (
            "",
            "PersistentVolumeClaim",
            "persistentvolumeclaims",
            &["pvc"],
            true,
            &[],
            &[],
        ),
        (
            "",
            "PersistentVolume",
            "persistentvolumes",
            &["pv"],
            false,
            &[],
            &[],
        ),
        (
            "",
            "ResourceQuota",
            "resourcequotas",
            &["quota"],
            true,
            &[],
            &[],
        ),
        ("", "LimitRange", "limitranges", &["limits"], true, &[], &[]),
        (
            "",
            "ReplicationController",
            "replicationcontrollers",
            &["rc"],
            true,
            &["status.replicas"],
            all,
        ),
        ("", "PodTemplate", "podtemplates", &[], true, &[], &[]),
        (
            "batch",
            "Job",
            "jobs",
            &[],
            true,
            &["status.successful"],
            all,
        ),
        ("batch", "CronJob", "cronjobs", &["cj"], true, &[], all),
        (
            "policy",
            "PodDisruptionBudget",
            "poddisruptionbudgets",
            &["pdb"],
            true,
            &[],
            &[],
        ),
        (
            "networking.k8s.io",
            "NetworkPolicy",
            "networkpolicies",
            &["netpol"],
            true,
            &[],
            &[],
        ),
        (
            "networking.k8s.io",
            "Ingress",
            "ingresses",
            &["ing"],
            true,
            &[],
            &[],
        ),
        (
            "networking.k8s.io",
            "IngressClass",
            "ingressclasses",
            &[],
            false,
            &[],
            &[],
        ),
        (
            "networking.k8s.io",
            "IPAddress",
            "ipaddresses",
            &["ip"],
            false,
            &[],
            &[],
        ),
        (
            "networking.k8s.io",
            "ServiceCIDR",
            "servicecidrs",
            &[],
            false,
            &[],
            &[],
        ),
        (
            "rbac.authorization.k8s.io",
            "Role",
            "roles",
            &[],
            true,
            &[],
            &[],
        ),
        (
            "rbac.authorization.k8s.io",
            "RoleBinding",
            "rolebindings",
            &[],
            true,
            &[],
            &[],
        ),
        (
            "rbac.authorization.k8s.io",
            "ClusterRole",
            "clusterroles",
            &[],
            false,
            &[],
            &[],
        ),
        (
            "rbac.authorization.k8s.io",
            "ClusterRoleBinding",
            "clusterrolebindings",
            &[],
            false,
            &[],
            &[],
        ),
        (
            "storage.k8s.io",
            "StorageClass",
            "storageclasses",
            &["sc"],
            false,
            &[],
            &[],
        ),
        (
            "scheduling.k8s.io",
            "PriorityClass",
            "priorityclasses",
            &["pc"],
            false,
            &[],
            &[],
        ),
        (
            "certificates.k8s.io",
            "CertificateSigningRequest",
            "certificatesigningrequests",
            &["csr"],
            false,
            &["spec.signerName"],
            &[],
        ),
        (
            "admissionregistration.k8s.io",
            "ValidatingWebhookConfiguration",
            "validatingwebhookconfigurations",
            &[],
            false,
            &[],
            &["api-extensions"],
        ),
        (
            "admissionregistration.k8s.io",
            "MutatingWebhookConfiguration",
            "mutatingwebhookconfigurations",
            &[],
            false,
            &[],
            &["api-extensions"],
        ),
        // Stored by kube-apiserver's aggregator under its group:
        // /registry/apiregistration.k8s.io/apiservices/{name}.
        (
            "apiregistration.k8s.io",
            "APIService",
            "apiservices",
            &[],
            false,
            &[],
            &["api-extensions"],
        ),
        (
            "node.k8s.io",
            "RuntimeClass",
            "runtimeclasses",
            &[],
            false,
            &[],
            &[],
        ),
        (
            "storage.k8s.io",
            "CSIDriver",
            "csidrivers",
            &[],
            false,
            &[],
            &[],
        ),
        (
            "storage.k8s.io",
            "CSINode",
            "csinodes",
            &[],
            false,
            &[],
            &[],
        ),
        (
            "storage.k8s.io",
            "VolumeAttachment",
            "volumeattachments",
            &[],
            false,
            &[],
            &[],
        ),
        (
            "storage.k8s.io",
            "CSIStorageCapacity",
            "csistoragecapacities",
            &[],
            true,
            &[],
            &[],
        ),
        (
            "apps",
            "ControllerRevision",
            "controllerrevisions",
            &[],
            true,
            &[],
            &[],
        ),
        (
            "admissionregistration.k8s.io",
            "ValidatingAdmissionPolicy",
            "validatingadmissionpolicies",
            &[],
            false,
            &[],
            &["api-extensions"],
        ),
        (
            "admissionregistration.k8s.io",
            "ValidatingAdmissionPolicyBinding",
            "validatingadmissionpolicybindings",
            &[],
            false,
            &[],
            &["api-extensions"],
        ),
        (
            "flowcontrol.apiserver.k8s.io",
            "FlowSchema",
            "flowschemas",
            &[],
            false,
            &[],
            &[],
        ),
        (
            "flowcontrol.apiserver.k8s.io",
            "PriorityLevelConfiguration",
            "prioritylevelconfigurations",
            &[],
            false,
            &[],
            &[],
        ),
    ];
    let mut defs: Vec<ResourceDef> = rows
        .iter()
        .map(
            |&(group, kind, plural, short, namespaced, fields, categories)| {
                builtin(
                    group, kind, plural, short, namespaced, fields, None, categories,
                )
            },
        )
        .collect();
    defs.push(builtin_at(
        "v2",
        builtin(
            "autoscaling",
            "HorizontalPodAutoscaler",
            "horizontalpodautoscalers",
            &["hpa"],
            true,
            &[],
            None,
            all,
        ),
    ));
    defs
}

/// One `[[resource]]` table of a resources file.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ResourceEntry {
    group: String,
    version: String,
    kind: String,
    plural: String,
    singular: Option<String>,
    #[serde(default)]
    short_names: Vec<String>,
    namespaced: bool,
    #[serde(default)]
    selectable_fields: Vec<String>,
    trigger_field: Option<String>,
    #[serde(default)]
    categories: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ResourcesFile {
    #[serde(default)]
    resource: Vec<ResourceEntry>,
}

fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.split('.').all(is_dns_label)
}

fn is_field_path(s: &str) -> bool {
    !s.is_empty()
        && s.split('.').all(|part| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        })
}

/// Parses a resources file: a TOML document of `[[resource]]` tables with the keys `group`,
/// `version`, `kind`, `plural`, `singular` (default: the lowercased kind), `short_names`,
/// `namespaced`, `selectable_fields`, `trigger_field` and `categories`.
///
/// # Errors
/// A message naming the offending resource and key: TOML syntax, a missing or unknown key, an
/// invalid name, a trigger field that is not selectable, or a duplicate of another entry.
pub fn parse_resources_file(text: &str) -> Result<Vec<ResourceDef>, String> {
    let file: ResourcesFile =
        toml::from_str(text).map_err(|e| format!("invalid resources file: {e}"))?;
    let mut defs: Vec<ResourceDef> = Vec::new();
    for (index, entry) in file.resource.into_iter().enumerate() {
        let at = format!("resource #{} ({:?})", index + 1, entry.plural);
        if !entry.group.is_empty() && !is_dns_subdomain(&entry.group) {
            return Err(format!(
                "{at}: group {:?} must be empty or a DNS subdomain",
                entry.group
            ));
        }
        if !is_dns_label(&entry.version) {
            return Err(format!(
                "{at}: version {:?} must be a DNS label such as v1",
                entry.version
            ));
        }
        if entry.kind.is_empty()
            || !entry.kind.starts_with(|c: char| c.is_ascii_uppercase())
            || !entry.kind.chars().all(|c| c.is_ascii_alphanumeric())
        {
            return Err(format!(
                "{at}: kind {:?} must be CamelCase letters and digits starting with an upper-case letter",
                entry.kind
            ));
        }
        if !is_dns_label(&entry.plural) {
            return Err(format!(
                "{at}: plural {:?} must be a lowercase DNS label",
                entry.plural
            ));
        }
        let singular = entry
            .singular
            .unwrap_or_else(|| entry.kind.to_ascii_lowercase());
        if !is_dns_label(&singular) {
            return Err(format!(
                "{at}: singular {singular:?} must be a lowercase DNS label"
            ));
        }
        for short in &entry.short_names {
            if !is_dns_label(short) {
                return Err(format!(
                    "{at}: short name {short:?} must be a lowercase DNS label"
                ));
            }
        }
        for field in &entry.selectable_fields {
            if !is_field_path(field) {
                return Err(format!(
                    "{at}: selectable field {field:?} must be a dotted path such as spec.color"
                ));
            }
        }
        if let Some(trigger) = &entry.trigger_field
            && !entry.selectable_fields.contains(trigger)
        {
            return Err(format!(
                "{at}: trigger_field {trigger:?} must also be listed in selectable_fields"
            ));
        }
        let def = ResourceDef {
            group: entry.group,
            version: entry.version,
            kind: entry.kind,
            plural: entry.plural,
            singular,
            short_names: entry.short_names,
            namespaced: entry.namespaced,
            selectable_fields: entry.selectable_fields,
            trigger_field: entry.trigger_field,
            categories: entry.categories,
            printer_columns: Vec::new(),
            declared_subresources: None,
        };
        if let Some(other) = defs
            .iter()
            .find(|d| d.group == def.group && d.version == def.version && d.plural == def.plural)
        {
            return Err(format!(
                "{at}: duplicate resource {}/{} {}",
                other.group, other.version, other.plural
            ));
        }
        defs.push(def);
    }
    Ok(defs)
}

/// Kubernetes' version priority (apimachinery's `CompareKubeAwareVersionStrings`), highest
/// first: versions of the form `v<major>[(alpha|beta)<minor>]` before any other; among them GA
/// before beta before alpha, then the greater major, then the greater minor; other versions
/// by name. (kube-core's `Version::priority` differs on versions such as `v1beta`, which it
/// reads as a beta and apimachinery as not Kubernetes-like.)
#[must_use]
pub fn compare_kube_versions(a: &str, b: &str) -> std::cmp::Ordering {
    /// `(stability: 2 GA / 1 beta / 0 alpha, major, minor)` of a Kubernetes-like version.
    fn parse(version: &str) -> Option<(u8, u64, u64)> {
        let rest = version.strip_prefix('v')?;
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let (major, rest) = rest.split_at(digits);
        if major.is_empty() {
            return None;
        }
        let major = major.parse().ok()?;
        if rest.is_empty() {
            return Some((2, major, 0));
        }
        let (stability, minor) = if let Some(minor) = rest.strip_prefix("beta") {
            (1, minor)
        } else {
            (0, rest.strip_prefix("alpha")?)
        };
        if minor.is_empty() || !minor.chars().all(|c| c.is_ascii_digit()) {
            return None;
        }
        Some((stability, major, minor.parse().ok()?))
    }
    match (parse(a), parse(b)) {
        (Some(x), Some(y)) => y.cmp(&x),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => a.cmp(b),
    }
}

/// The string at the JSON pointer `pointer` of `object` (empty when absent or not a string).
pub(crate) fn pointer_text<'a>(object: &'a Value, pointer: &str) -> &'a str {
    object
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// Follows a dotted path through nested objects.
pub(crate) fn lookup<'a>(object: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.')
        .try_fold(object, |value, key| value.get(key))
}

/// A scalar as a `fields.Set` string; objects, arrays and null have none.
fn scalar_string(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        Value::Null | Value::Array(_) | Value::Object(_) => None,
    }
}

/// The zero value Kubernetes' typed struct gives a missing built-in field.
fn builtin_zero_value(field: &str) -> &'static str {
    match field {
        "spec.unschedulable" | "spec.hostNetwork" => "false",
        "status.replicas" | "status.successful" => "0",
        _ => "",
    }
}

/// The value of one selectable field, with Kubernetes' special cases for built-ins.
fn builtin_field_value(def: &ResourceDef, object: &Value, field: &str) -> Option<String> {
    match (def.group.as_str(), def.plural.as_str(), field) {
        ("", "pods", "status.podIP") => lookup(object, "status.podIPs")
            .and_then(|ips| ips.get(0))
            .and_then(|ip| ip.get("ip"))
            .or_else(|| lookup(object, "status.podIP"))
            .and_then(scalar_string),
        ("", "events", "source") => lookup(object, "source.component")
            .and_then(scalar_string)
            .filter(|s| !s.is_empty())
            .or_else(|| lookup(object, "reportingComponent").and_then(scalar_string)),
        // The same core field, read from the `events.k8s.io/v1` form.
        ("events.k8s.io", "events", "source") => lookup(object, "deprecatedSource.component")
            .and_then(scalar_string)
            .filter(|s| !s.is_empty())
            .or_else(|| lookup(object, "reportingController").and_then(scalar_string)),
        _ => lookup(object, field).and_then(scalar_string),
    }
}

/// The selectable field values of an object, as Kubernetes' `fields.Set`: `metadata.name`,
/// `metadata.namespace` (namespaced resources only) and the resource's selectable fields.
/// Booleans read `"true"`/`"false"`, numbers in decimal. A missing field of a built-in resource
/// reads as its Go zero value; a missing field of a custom resource is absent.
#[must_use]
pub fn field_values(def: &ResourceDef, object: &Value) -> BTreeMap<String, String> {
    let mut values = BTreeMap::new();
    let meta = |key: &str| {
        object
            .get("metadata")
            .and_then(|m| m.get(key))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    values.insert("metadata.name".to_owned(), meta("name"));
    if def.namespaced {
        values.insert("metadata.namespace".to_owned(), meta("namespace"));
    }
    add_selectable_values(def, object, &mut values, |_| true);
    values
}

/// [`field_values`] without `metadata.name` and `metadata.namespace` (what a cache object
/// keeps beside its name and namespace), made without them rather than made and removed.
#[must_use]
pub fn field_values_beside_name(def: &ResourceDef, object: &Value) -> BTreeMap<String, String> {
    let mut values = BTreeMap::new();
    add_selectable_values(def, object, &mut values, |field| {
        !matches!(field, "metadata.name" | "metadata.namespace")
    });
    values
}

/// Adds the values of `def`'s selectable fields that `wanted` keeps (see [`field_values`]).
fn add_selectable_values(
    def: &ResourceDef,
    object: &Value,
    values: &mut BTreeMap<String, String>,
    wanted: impl Fn(&str) -> bool,
) {
    // `events.k8s.io/v1` Events are core Events (their fields read as Go's zero values too).
    let builtin = def.is_builtin() || (def.group == "events.k8s.io" && def.plural == "events");
    for field in def.selectable_fields.iter().filter(|field| wanted(field)) {
        let value = if builtin {
            builtin_field_value(def, object, field)
                .or_else(|| Some(builtin_zero_value(field).to_owned()))
        } else {
            lookup(object, field).and_then(scalar_string)
        };
        if let Some(value) = value {
            values.insert(field.clone(), value);
        }
    }
}

/// The labels of an object (`metadata.labels`); non-string values are skipped.
#[must_use]
pub fn labels_of(object: &Value) -> BTreeMap<String, String> {
    object
        .get("metadata")
        .and_then(|m| m.get("labels"))
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

/// Finds a resource by plural name within a group and version.
#[must_use]
pub fn find_resource<'a>(
    defs: &'a [ResourceDef],
    group: &str,
    version: &str,
    plural: &str,
) -> Option<&'a ResourceDef> {
    defs.iter()
        .find(|d| d.group == group && d.version == version && d.plural == plural)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use watchkeeper_core::FieldSelector;

    fn def(plural: &str) -> ResourceDef {
        builtin_resources()
            .into_iter()
            .find(|d| d.plural == plural)
            .unwrap()
    }

    #[test]
    fn builtin_names_are_consistent() {
        let defs = builtin_resources();
        assert_eq!(defs.len(), 50);
        let mut seen = std::collections::BTreeSet::new();
        for d in &defs {
            assert!(seen.insert((d.group.clone(), d.plural.clone())), "{d:?}");
            let version = if d.group == "autoscaling" { "v2" } else { "v1" };
            assert_eq!(d.version, version);
            assert_eq!(d.singular, d.kind.to_ascii_lowercase());
            assert!(is_dns_label(&d.plural) && d.plural.ends_with('s'), "{d:?}");
            assert!(d.is_builtin());
            let storage = match d.plural.as_str() {
                "ingresses" => "ingress",
                "replicationcontrollers" => "controllers",
                "apiservices" => "apiregistration.k8s.io/apiservices",
                plural => plural,
            };
            assert_eq!(d.storage_prefix(), storage);
            assert_eq!(d.list_kind(), format!("{}List", d.kind));
            assert_eq!(d.api_version(), d.group_version());
            if let Some(trigger) = &d.trigger_field {
                assert!(d.selectable_fields.contains(trigger));
            }
            for short in &d.short_names {
                assert!(
                    defs.iter()
                        .filter(|o| o.short_names.contains(short))
                        .count()
                        == 1
                );
            }
        }
        assert_eq!(def("pods").api_version(), "v1");
        assert_eq!(def("deployments").api_version(), "apps/v1");
        assert_eq!(def("leases").storage_prefix(), "leases");
        assert_eq!(def("deployments").qualified_resource(), "deployments.apps");
        assert!(!def("nodes").namespaced && !def("namespaces").namespaced);
        assert_eq!(def("pods").categories, vec!["all"]);
    }

    #[test]
    fn custom_resource_prefix_includes_group() {
        let crd = parse_resources_file(
            r#"
            [[resource]]
            group = "example.com"
            version = "v1alpha1"
            kind = "Widget"
            plural = "widgets"
            short_names = ["wd"]
            namespaced = true
            selectable_fields = ["spec.color"]
            "#,
        )
        .unwrap();
        assert_eq!(crd.len(), 1);
        let w = &crd[0];
        assert_eq!(w.singular, "widget");
        assert_eq!(w.storage_prefix(), "example.com/widgets");
        assert_eq!(w.api_version(), "example.com/v1alpha1");
        assert!(!w.is_builtin());
        assert_eq!(w.short_names, vec!["wd"]);
        assert_eq!(w.selectable_fields, vec!["spec.color"]);
        assert!(w.categories.is_empty());
    }

    #[test]
    fn resources_file_errors_are_clear() {
        let base = |extra: &str| {
            format!(
                "[[resource]]\ngroup = \"example.com\"\nversion = \"v1\"\nkind = \"Widget\"\nplural = \"widgets\"\nnamespaced = true\n{extra}"
            )
        };
        assert!(parse_resources_file("").unwrap().is_empty());
        let err = parse_resources_file("[[resource]]\ngroup = \"x.io\"").unwrap_err();
        assert!(err.contains("missing field"), "{err}");
        let err = parse_resources_file(&base("colour = 1")).unwrap_err();
        assert!(err.contains("unknown field"), "{err}");
        let err = parse_resources_file("[[resource]\n").unwrap_err();
        assert!(err.starts_with("invalid resources file"), "{err}");
        let err = parse_resources_file(&base("").replace("Widget", "widget")).unwrap_err();
        assert!(err.contains("kind \"widget\""), "{err}");
        let err =
            parse_resources_file(&base("").replace("\"widgets\"", "\"Widgets\"")).unwrap_err();
        assert!(err.contains("plural"), "{err}");
        let err = parse_resources_file(&base("trigger_field = \"spec.x\"")).unwrap_err();
        assert!(err.contains("trigger_field"), "{err}");
        let err = parse_resources_file(&base("selectable_fields = [\"spec..x\"]")).unwrap_err();
        assert!(err.contains("selectable field"), "{err}");
        let twice = format!("{}\n{}", base(""), base(""));
        let err = parse_resources_file(&twice).unwrap_err();
        assert!(err.contains("duplicate"), "{err}");
        let err =
            parse_resources_file(&base("").replace("example.com", "Example_com")).unwrap_err();
        assert!(err.contains("group"), "{err}");
    }

    #[test]
    fn pod_field_values() {
        let pod = json!({
            "metadata": {"name": "a", "namespace": "ns"},
            "spec": {"nodeName": "n1", "restartPolicy": "Always"},
            "status": {"phase": "Running", "podIPs": [{"ip": "10.0.0.1"}], "podIP": "10.0.0.9"}
        });
        let fields = field_values(&def("pods"), &pod);
        assert_eq!(fields["metadata.name"], "a");
        assert_eq!(fields["metadata.namespace"], "ns");
        assert_eq!(fields["spec.nodeName"], "n1");
        assert_eq!(fields["status.phase"], "Running");
        assert_eq!(fields["status.podIP"], "10.0.0.1");
        assert_eq!(fields["spec.hostNetwork"], "false");
        assert_eq!(fields["spec.schedulerName"], "");
        let unscheduled = json!({"metadata": {"name": "b", "namespace": "ns"}, "spec": {}});
        let fields = field_values(&def("pods"), &unscheduled);
        assert_eq!(fields["spec.nodeName"], "");
        let selector = FieldSelector::parse("spec.nodeName=").unwrap();
        assert!(selector.matches(&fields));
    }

    #[test]
    fn event_secret_node_field_values() {
        let event = json!({
            "metadata": {"name": "e", "namespace": "default"},
            "involvedObject": {"kind": "Pod", "name": "a", "namespace": "default", "uid": "u1"},
            "reason": "Scheduled", "type": "Normal", "reportingComponent": "sched",
            "source": {}
        });
        let fields = field_values(&def("events"), &event);
        assert_eq!(fields["involvedObject.kind"], "Pod");
        assert_eq!(fields["involvedObject.uid"], "u1");
        assert_eq!(fields["involvedObject.fieldPath"], "");
        assert_eq!(fields["reason"], "Scheduled");
        assert_eq!(fields["source"], "sched");
        assert_eq!(fields["reportingComponent"], "sched");
        let with_source = json!({"metadata": {"name": "e"}, "source": {"component": "kubelet"}});
        assert_eq!(
            field_values(&def("events"), &with_source)["source"],
            "kubelet"
        );

        let secret = json!({"metadata": {"name": "s", "namespace": "d"}, "type": "Opaque"});
        assert_eq!(field_values(&def("secrets"), &secret)["type"], "Opaque");

        let node = json!({"metadata": {"name": "n"}, "spec": {"unschedulable": true}});
        let fields = field_values(&def("nodes"), &node);
        assert_eq!(fields["spec.unschedulable"], "true");
        assert!(!fields.contains_key("metadata.namespace"));
        let rs = json!({"metadata": {"name": "r", "namespace": "d"}, "status": {"replicas": 3}});
        assert_eq!(
            field_values(&def("replicasets"), &rs)["status.replicas"],
            "3"
        );
    }

    /// Goal: the values beside the name are every field value but `metadata.name` and
    /// `metadata.namespace`, for every built-in resource (a pod's and an event's computed
    /// ones included) and for a custom resource selecting `metadata.name` itself.
    #[test]
    fn values_beside_the_name_are_the_field_values_without_it() {
        let object = json!({
            "metadata": {"name": "a", "namespace": "ns"},
            "spec": {"nodeName": "n1", "unschedulable": true},
            "status": {"phase": "Running", "podIPs": [{"ip": "10.0.0.1"}], "replicas": 2},
            "type": "Opaque", "reason": "Scheduled", "source": {"component": "kubelet"}
        });
        let mut custom = def("pods");
        custom.group = "example.com".into();
        custom.selectable_fields = vec!["metadata.name".into(), "spec.nodeName".into()];
        let defs: Vec<ResourceDef> = builtin_resources().into_iter().chain([custom]).collect();
        let mut compared = 0;
        for def in &defs {
            let mut expected = field_values(def, &object);
            expected.remove("metadata.name");
            expected.remove("metadata.namespace");
            compared += expected.len();
            assert_eq!(
                field_values_beside_name(def, &object),
                expected,
                "{}",
                def.plural
            );
        }
        assert!(compared > 20, "{compared} values compared");
    }

    #[test]
    fn custom_missing_field_is_absent() {
        let mut crd = def("pods");
        crd.group = "example.com".into();
        crd.selectable_fields = vec!["spec.color".into()];
        let fields = field_values(&crd, &json!({"metadata": {"name": "w"}}));
        assert!(!fields.contains_key("spec.color"));
        let fields = field_values(
            &crd,
            &json!({"metadata": {"name": "w"}, "spec": {"color": "red"}}),
        );
        assert_eq!(fields["spec.color"], "red");
    }

    #[test]
    fn labels() {
        let object = json!({"metadata": {"labels": {"app": "web", "n": 1}}});
        let labels = labels_of(&object);
        assert_eq!(labels.len(), 1);
        assert_eq!(labels["app"], "web");
        assert!(labels_of(&json!(5)).is_empty());
    }
}

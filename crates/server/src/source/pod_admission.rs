//! kube-apiserver's pod admission plugins that every cluster runs by default and that change
//! what a created pod says: `ServiceAccount`, `Priority` (with its checks of PriorityClasses),
//! `DefaultTolerationSeconds` and `RuntimeClass` (`plugin/pkg/admission/serviceaccount`,
//! `plugin/pkg/admission/priority`, `plugin/pkg/admission/defaulttolerationseconds`,
//! `plugin/pkg/admission/runtimeclass`), each of which `--disable-admission-plugins` can turn
//! off ([`AdmissionPlugins`], which also names the other modules' plugins, `PodSecurity` among
//! them: `super::pod_security`, and kube's optional ones: `super::plugin_admission`; the flags
//! that choose them are `crate::config`'s).
//!
//! ## Guarantees
//! - **ServiceAccount, on a pod create**: a pod naming no service account gets `default`
//!   (`serviceAccountName` and its deprecated twin `serviceAccount`); the account must exist,
//!   else kube's 403 `error looking up service account ns/sa: serviceaccount "sa" not found`
//!   (the `default` account, which the namespace controller creates a moment after its
//!   namespace, is waited for as kube retries for it: up to 10 lookups 100 ms apart). Unless
//!   the pod or the account sets `automountServiceAccountToken: false`, every container and
//!   init container that mounts nothing at `/var/run/secrets/kubernetes.io/serviceaccount`
//!   mounts kube's projected `kube-api-access-<5 random>` volume there (a bound token of
//!   3607 s, `kube-root-ca.crt`'s `ca.crt`, the namespace), read-only; a pod without image
//!   pull secrets gets the account's.
//! - **Priority, on a pod create**: a pod naming a PriorityClass gets its `value` as
//!   `spec.priority` and its `preemptionPolicy`; one naming none gets the global default
//!   class's (its name too; the lowest value when several claim to be the default, as kube
//!   breaks that race) or priority 0 and `PreemptLowerPriority`. A class that does not exist
//!   is kube's 403 `no PriorityClass with name high was found`; a pod that states a priority
//!   or a preemption policy other than the computed one is kube's 403 (`the integer value of
//!   priority (5) must not be provided in pod spec; priority admission controller computed
//!   1000 from the given PriorityClass name`). On an update that leaves them out, the old
//!   pod's priority and policy are kept (validation then refuses any other change to them).
//! - **PriorityClasses**: a create of a second `globalDefault` class, or an update that makes
//!   another class the default while one exists, is kube's 403 `PriorityClass d2 is marked as
//!   default, but d1 is already the default`. Their validation (`value` past 1,000,000,000,
//!   the reserved `system-` prefix, immutable `value` and `preemptionPolicy`) is kube's
//!   `ValidatePriorityClass`, with the other kinds' (`watchkeeper_api::kinds`).
//! - **DefaultTolerationSeconds, on a pod create or update** (of the main endpoint): a pod
//!   that does not already tolerate the `node.kubernetes.io/not-ready` and
//!   `node.kubernetes.io/unreachable` `NoExecute` taints gets kube's tolerations of them for
//!   300 seconds.
//! - **RuntimeClass, on a pod create**: see [`admit_runtime_class`] (kube's 403s: `pod
//!   rejected: RuntimeClass "kata" not found`, a conflicting overhead or node selector).
//! - The classes are read from their cache; a name it does not hold is looked up again once
//!   the cache is proven fresh (kube's lister, then its refusal), so a class created just
//!   before is found.

use serde_json::{Value, json};

/// The admission plugins this server runs, each on or off (`--enable-admission-plugins`,
/// `--disable-admission-plugins`, `--admission-control`); [`Default`] is kube-apiserver's
/// default set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AdmissionPlugins {
    /// `ServiceAccount`.
    pub service_account: bool,
    /// `Priority`.
    pub priority: bool,
    /// `DefaultTolerationSeconds`.
    pub default_toleration_seconds: bool,
    /// `LimitRanger` (`super::limit_ranger`).
    pub limit_ranger: bool,
    /// `ResourceQuota` (`super::resource_quota`).
    pub resource_quota: bool,
    /// `RuntimeClass`.
    pub runtime_class: bool,
    /// `DefaultStorageClass` (`super::object_admission`).
    pub default_storage_class: bool,
    /// `DefaultIngressClass` (`super::object_admission`).
    pub default_ingress_class: bool,
    /// `TaintNodesByCondition` (`super::object_admission`).
    pub taint_nodes_by_condition: bool,
    /// `PodSecurity` (`super::pod_security`).
    pub pod_security: bool,
    /// `ValidatingAdmissionPolicy` (`super::policy_admission`).
    pub validating_admission_policy: bool,
    /// `MutatingAdmissionWebhook` (`crate::source::webhook`).
    pub mutating_admission_webhook: bool,
    /// `ValidatingAdmissionWebhook` (`crate::source::webhook`).
    pub validating_admission_webhook: bool,
    /// `NamespaceLifecycle` (`super::store`): creates only in a namespace that exists and is
    /// not terminating; `default`, `kube-system`, `kube-public` not deleted.
    pub namespace_lifecycle: bool,
    /// `NamespaceExists` (`super::store`), default off: creates only in a namespace that
    /// exists.
    pub namespace_exists: bool,
    /// `AlwaysPullImages` (`super::plugin_admission`), default off.
    pub always_pull_images: bool,
    /// `DenyServiceExternalIPs` (`super::plugin_admission`), default off.
    pub deny_service_external_ips: bool,
    /// `LimitPodHardAntiAffinityTopology` (`super::plugin_admission`), default off.
    pub limit_pod_hard_anti_affinity_topology: bool,
    /// `CertificateSubjectRestriction` (`super::plugin_admission`).
    pub certificate_subject_restriction: bool,
    /// `NodeRestriction` (`super::node_restriction`), default off.
    pub node_restriction: bool,
    /// `PersistentVolumeClaimResize` (`super::plugin_admission`).
    pub persistent_volume_claim_resize: bool,
    /// `CertificateApproval` (`super::plugin_admission`).
    pub certificate_approval: bool,
    /// `CertificateSigning` (`super::plugin_admission`).
    pub certificate_signing: bool,
    /// `NamespaceAutoProvision` (`super::store`), default off: a create in a missing
    /// namespace creates it first.
    pub namespace_auto_provision: bool,
    /// `AlwaysAdmit` (deprecated in kube), default off: admits everything, so does nothing.
    pub always_admit: bool,
    /// `AlwaysDeny` (deprecated in kube; `super::plugin_admission`), default off.
    pub always_deny: bool,
    /// `ExtendedResourceToleration` (`super::plugin_admission`), default off.
    pub extended_resource_toleration: bool,
    /// `PodNodeSelector` (`super::plugin_admission`), default off.
    pub pod_node_selector: bool,
    /// `StorageObjectInUseProtection` (`super::plugin_admission`, with
    /// `crate::controllers::storage_protection`).
    pub storage_object_in_use_protection: bool,
    /// `OwnerReferencesPermissionEnforcement` (`super::plugin_admission`), default off.
    pub owner_references_permission_enforcement: bool,
    /// `EventRateLimit` (`super::event_rate_limit`), default off.
    pub event_rate_limit: bool,
    /// `PodTolerationRestriction` (`super::pod_toleration_restriction`), default off.
    pub pod_toleration_restriction: bool,
    /// `ImagePolicyWebhook` (`super::image_policy`), default off.
    pub image_policy_webhook: bool,
}

impl Default for AdmissionPlugins {
    fn default() -> Self {
        AdmissionPlugins {
            service_account: true,
            priority: true,
            default_toleration_seconds: true,
            limit_ranger: true,
            resource_quota: true,
            runtime_class: true,
            default_storage_class: true,
            default_ingress_class: true,
            taint_nodes_by_condition: true,
            pod_security: true,
            validating_admission_policy: true,
            mutating_admission_webhook: true,
            validating_admission_webhook: true,
            namespace_lifecycle: true,
            namespace_exists: false,
            always_pull_images: false,
            deny_service_external_ips: false,
            limit_pod_hard_anti_affinity_topology: false,
            certificate_subject_restriction: true,
            node_restriction: false,
            persistent_volume_claim_resize: true,
            certificate_approval: true,
            certificate_signing: true,
            namespace_auto_provision: false,
            always_admit: false,
            always_deny: false,
            extended_resource_toleration: false,
            pod_node_selector: false,
            storage_object_in_use_protection: true,
            owner_references_permission_enforcement: false,
            event_rate_limit: false,
            pod_toleration_restriction: false,
            image_policy_webhook: false,
        }
    }
}

impl AdmissionPlugins {
    /// The plugins' names, as kube-apiserver's flag spells them.
    pub const NAMES: [&'static str; 33] = [
        "ServiceAccount",
        "Priority",
        "DefaultTolerationSeconds",
        "LimitRanger",
        "ResourceQuota",
        "RuntimeClass",
        "DefaultStorageClass",
        "DefaultIngressClass",
        "TaintNodesByCondition",
        "PodSecurity",
        "ValidatingAdmissionPolicy",
        "MutatingAdmissionWebhook",
        "ValidatingAdmissionWebhook",
        "NamespaceLifecycle",
        "NamespaceExists",
        "AlwaysPullImages",
        "DenyServiceExternalIPs",
        "LimitPodHardAntiAffinityTopology",
        "CertificateSubjectRestriction",
        "NodeRestriction",
        "PersistentVolumeClaimResize",
        "CertificateApproval",
        "CertificateSigning",
        "NamespaceAutoProvision",
        "AlwaysAdmit",
        "AlwaysDeny",
        "ExtendedResourceToleration",
        "PodNodeSelector",
        "StorageObjectInUseProtection",
        "OwnerReferencesPermissionEnforcement",
        "EventRateLimit",
        "PodTolerationRestriction",
        "ImagePolicyWebhook",
    ];

    /// Every plugin off.
    #[must_use]
    pub fn none() -> AdmissionPlugins {
        let mut plugins = AdmissionPlugins::default();
        for name in Self::NAMES {
            if let Some(on) = plugins.switch(name) {
                *on = false;
            }
        }
        plugins
    }

    /// The switch of the plugin kube names `name`; `None` for a name not in [`Self::NAMES`].
    pub fn switch(&mut self, name: &str) -> Option<&mut bool> {
        Some(match name {
            "ServiceAccount" => &mut self.service_account,
            "Priority" => &mut self.priority,
            "DefaultTolerationSeconds" => &mut self.default_toleration_seconds,
            "LimitRanger" => &mut self.limit_ranger,
            "ResourceQuota" => &mut self.resource_quota,
            "RuntimeClass" => &mut self.runtime_class,
            "DefaultStorageClass" => &mut self.default_storage_class,
            "DefaultIngressClass" => &mut self.default_ingress_class,
            "TaintNodesByCondition" => &mut self.taint_nodes_by_condition,
            "PodSecurity" => &mut self.pod_security,
            "ValidatingAdmissionPolicy" => &mut self.validating_admission_policy,
            "MutatingAdmissionWebhook" => &mut self.mutating_admission_webhook,
            "ValidatingAdmissionWebhook" => &mut self.validating_admission_webhook,
            "NamespaceLifecycle" => &mut self.namespace_lifecycle,
            "NamespaceExists" => &mut self.namespace_exists,
            "AlwaysPullImages" => &mut self.always_pull_images,
            "DenyServiceExternalIPs" => &mut self.deny_service_external_ips,
            "LimitPodHardAntiAffinityTopology" => &mut self.limit_pod_hard_anti_affinity_topology,
            "CertificateSubjectRestriction" => &mut self.certificate_subject_restriction,
            "NodeRestriction" => &mut self.node_restriction,
            "PersistentVolumeClaimResize" => &mut self.persistent_volume_claim_resize,
            "CertificateApproval" => &mut self.certificate_approval,
            "CertificateSigning" => &mut self.certificate_signing,
            "NamespaceAutoProvision" => &mut self.namespace_auto_provision,
            "AlwaysAdmit" => &mut self.always_admit,
            "AlwaysDeny" => &mut self.always_deny,
            "ExtendedResourceToleration" => &mut self.extended_resource_toleration,
            "PodNodeSelector" => &mut self.pod_node_selector,
            "StorageObjectInUseProtection" => &mut self.storage_object_in_use_protection,
            "OwnerReferencesPermissionEnforcement" => {
                &mut self.owner_references_permission_enforcement
            }
            "EventRateLimit" => &mut self.event_rate_limit,
            "PodTolerationRestriction" => &mut self.pod_toleration_restriction,
            "ImagePolicyWebhook" => &mut self.image_policy_webhook,
            _ => return None,
        })
    }

    /// The default plugins but those `disabled` names.
    ///
    /// # Errors
    /// The first name that is not one of [`Self::NAMES`].
    pub fn without(disabled: &[String]) -> Result<AdmissionPlugins, String> {
        let mut plugins = AdmissionPlugins::default();
        for name in disabled {
            *plugins.switch(name).ok_or_else(|| name.clone())? = false;
        }
        Ok(plugins)
    }
}

/// RuntimeClass on a created `pod`, `classes` being every RuntimeClass: the named class must
/// exist; its `overhead.podFixed` becomes the pod's `overhead` (a different one stated is
/// refused) and its `scheduling` node selector and tolerations join the pod's (a selector
/// value that differs is refused), as kube's plugin does.
///
/// # Errors
/// kube's 403 message.
pub fn admit_runtime_class(pod: &mut Value, classes: &[Value]) -> Result<(), String> {
    let Some(name) = pod
        .pointer("/spec/runtimeClassName")
        .and_then(Value::as_str)
        .filter(|name| !name.is_empty())
        .map(str::to_owned)
    else {
        return Ok(());
    };
    let Some(class) = classes
        .iter()
        .find(|class| class.pointer("/metadata/name").and_then(Value::as_str) == Some(&name))
    else {
        return Err(format!("pod rejected: RuntimeClass {name:?} not found"));
    };
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return Ok(());
    };
    if let Some(fixed) = class.pointer("/overhead/podFixed").filter(|o| !o.is_null()) {
        let stated = spec
            .get("overhead")
            .filter(|o| o.as_object().is_some_and(|o| !o.is_empty()));
        if let Some(stated) = stated
            && !same_amounts(stated, fixed)
        {
            return Err(
                "pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead"
                    .to_owned(),
            );
        }
        spec.insert("overhead".into(), fixed.clone());
    }
    let Some(scheduling) = class.get("scheduling").filter(|s| !s.is_null()) else {
        return Ok(());
    };
    if let Some(Value::Object(required)) = scheduling.get("nodeSelector") {
        let mut selector = spec
            .get("nodeSelector")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        for (key, value) in required {
            match selector.get(key) {
                Some(own) if own != value => {
                    return Err(format!(
                        "conflict: runtimeClass.scheduling.nodeSelector[{key}] = {}; pod.spec.nodeSelector[{key}] = {}",
                        value.as_str().unwrap_or_default(),
                        own.as_str().unwrap_or_default()
                    ));
                }
                _ => {
                    selector.insert(key.clone(), value.clone());
                }
            }
        }
        spec.insert("nodeSelector".into(), Value::Object(selector));
    }
    if let Some(Value::Array(extra)) = scheduling.get("tolerations") {
        let tolerations = spec.entry("tolerations").or_insert_with(|| json!([]));
        if tolerations.is_null() {
            *tolerations = json!([]);
        }
        if let Value::Array(tolerations) = tolerations {
            for toleration in extra {
                if !tolerations.contains(toleration) {
                    tolerations.push(toleration.clone());
                }
            }
        }
    }
    Ok(())
}

/// Whether two resource lists hold the same amounts (`1000m` is `1`).
fn same_amounts(a: &Value, b: &Value) -> bool {
    let parse = |list: &Value| super::resource_quota::quantities(Some(list));
    parse(a) == parse(b)
}

/// The service account a created pod runs as (`default` when it names none).
#[must_use]
pub fn account_named(pod: &Value) -> &str {
    pod.pointer("/spec/serviceAccountName")
        .and_then(Value::as_str)
        .filter(|name| !name.is_empty())
        .unwrap_or("default")
}

/// Where kube mounts the service account's token.
const TOKEN_MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// The prefix of the token volume's name.
const TOKEN_VOLUME_PREFIX: &str = "kube-api-access-";

/// ServiceAccount on a created `pod` whose account is `account` (see the module docs);
/// `suffix` names the token volume if one is made.
pub fn admit_service_account(pod: &mut Value, account: &Value, suffix: &str) {
    let name = account_named(pod).to_owned();
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    spec.insert("serviceAccountName".into(), json!(name));
    spec.insert("serviceAccount".into(), json!(name));
    let automount = spec
        .get("automountServiceAccountToken")
        .and_then(Value::as_bool)
        .or_else(|| {
            account
                .get("automountServiceAccountToken")
                .and_then(Value::as_bool)
        })
        .unwrap_or(true);
    if automount {
        let existing = spec
            .get("volumes")
            .and_then(Value::as_array)
            .and_then(|volumes| {
                volumes.iter().find_map(|volume| {
                    volume
                        .get("name")
                        .and_then(Value::as_str)
                        .filter(|name| name.starts_with(TOKEN_VOLUME_PREFIX))
                        .map(str::to_owned)
                })
            });
        let volume = existing
            .clone()
            .unwrap_or_else(|| format!("{TOKEN_VOLUME_PREFIX}{suffix}"));
        let mut mounted = false;
        for list in ["initContainers", "containers"] {
            for container in spec
                .get_mut(list)
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                let mounts = container
                    .as_object_mut()
                    .map(|c| c.entry("volumeMounts").or_insert_with(|| json!([])));
                let Some(Value::Array(mounts)) = mounts else {
                    continue;
                };
                let taken = mounts.iter().any(|mount| {
                    mount.get("mountPath").and_then(Value::as_str) == Some(TOKEN_MOUNT_PATH)
                });
                if !taken {
                    mounts.push(json!({"name": volume, "readOnly": true,
                        "mountPath": TOKEN_MOUNT_PATH}));
                    mounted = true;
                }
            }
        }
        if mounted && existing.is_none() {
            let volumes = spec.entry("volumes").or_insert_with(|| json!([]));
            if let Value::Array(volumes) = volumes {
                volumes.push(json!({"name": volume, "projected": {"defaultMode": 420,
                "sources": [
                    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                    {"configMap": {"name": "kube-root-ca.crt",
                        "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                    {"downwardAPI": {"items": [{"path": "namespace",
                        "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}
                ]}}));
            }
        }
    }
    let no_pull_secrets = spec
        .get("imagePullSecrets")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty);
    if no_pull_secrets
        && let Some(secrets) = account.get("imagePullSecrets").and_then(Value::as_array)
        && !secrets.is_empty()
    {
        let names: Vec<Value> = secrets
            .iter()
            .filter_map(|secret| secret.get("name"))
            .map(|name| json!({"name": name}))
            .collect();
        spec.insert("imagePullSecrets".into(), Value::Array(names));
    }
}

/// kube's default preemption policy.
const PREEMPT_LOWER_PRIORITY: &str = "PreemptLowerPriority";

/// The default PriorityClass among `classes`: the `globalDefault` one with the lowest value.
fn default_class(classes: &[Value]) -> Option<&Value> {
    classes
        .iter()
        .filter(|class| class.get("globalDefault").and_then(Value::as_bool) == Some(true))
        .min_by_key(|class| class.get("value").and_then(Value::as_i64).unwrap_or(0))
}

fn name_of(object: &Value) -> &str {
    object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// A class's name, priority and preemption policy.
fn resolved(class: &Value) -> (String, i64, String) {
    (
        name_of(class).to_owned(),
        class.get("value").and_then(Value::as_i64).unwrap_or(0),
        class
            .get("preemptionPolicy")
            .and_then(Value::as_str)
            .unwrap_or(PREEMPT_LOWER_PRIORITY)
            .to_owned(),
    )
}

/// The class `pod` names, when it names one.
#[must_use]
pub fn class_named(pod: &Value) -> Option<&str> {
    pod.pointer("/spec/priorityClassName")
        .and_then(Value::as_str)
        .filter(|name| !name.is_empty())
}

/// Priority on a created `pod`, `classes` being every PriorityClass (see the module docs).
///
/// # Errors
/// kube's 403 message (without the `pods "x" is forbidden: ` prefix).
pub fn admit_priority(pod: &mut Value, classes: &[Value]) -> Result<(), String> {
    let (class_name, priority, policy) = match class_named(pod) {
        Some(name) => {
            let Some(class) = classes.iter().find(|class| name_of(class) == name) else {
                return Err(format!("no PriorityClass with name {name} was found"));
            };
            resolved(class)
        }
        None => default_class(classes).map_or_else(
            || (String::new(), 0, PREEMPT_LOWER_PRIORITY.to_owned()),
            resolved,
        ),
    };
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return Ok(());
    };
    if let Some(stated) = spec.get("priority").and_then(Value::as_i64)
        && stated != priority
    {
        return Err(format!(
            "the integer value of priority ({stated}) must not be provided in pod spec; priority admission controller computed {priority} from the given PriorityClass name"
        ));
    }
    if let Some(stated) = spec.get("preemptionPolicy").and_then(Value::as_str)
        && stated != policy
    {
        return Err(format!(
            "the string value of PreemptionPolicy ({stated}) must not be provided in pod spec; priority admission controller computed {policy} from the given PriorityClass name"
        ));
    }
    if !class_name.is_empty() {
        spec.insert("priorityClassName".into(), json!(class_name));
    }
    spec.insert("priority".into(), json!(priority));
    spec.insert("preemptionPolicy".into(), json!(policy));
    Ok(())
}

/// Priority on an updated `pod`: the priority and preemption policy it leaves out are
/// `old`'s.
pub fn keep_priority(pod: &mut Value, old: &Value) {
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    for field in ["priority", "preemptionPolicy"] {
        if spec.get(field).is_none_or(Value::is_null)
            && let Some(kept) = old.pointer(&format!("/spec/{field}"))
        {
            spec.insert(field.into(), kept.clone());
        }
    }
}

/// Priority on a PriorityClass write: a second default is kube's 403 (its message), `classes`
/// being every PriorityClass before the write.
#[must_use]
pub fn default_conflict(class: &Value, classes: &[Value], create: bool) -> Option<String> {
    if class.get("globalDefault").and_then(Value::as_bool) != Some(true) {
        return None;
    }
    let existing = default_class(classes)?;
    (create || name_of(existing) != name_of(class)).then(|| {
        format!(
            "PriorityClass {} is marked as default, but {} is already the default",
            name_of(class),
            name_of(existing)
        )
    })
}

/// The taints kube's DefaultTolerationSeconds tolerates for 300 seconds.
const DEFAULT_TOLERATED: [&str; 2] = [
    "node.kubernetes.io/not-ready",
    "node.kubernetes.io/unreachable",
];

/// DefaultTolerationSeconds on a created `pod` (see the module docs).
pub fn default_tolerations(pod: &mut Value) {
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    let tolerations = spec.entry("tolerations").or_insert_with(|| json!([]));
    if tolerations.is_null() {
        *tolerations = json!([]);
    }
    let Some(list) = tolerations.as_array_mut() else {
        return;
    };
    for taint in DEFAULT_TOLERATED {
        // kube's `ToleratesTaint` for a NoExecute taint of that key.
        let tolerated = list.iter().any(|toleration| {
            let text = |field: &str| toleration.get(field).and_then(Value::as_str).unwrap_or("");
            let effect = text("effect");
            let key = text("key");
            let exists = text("operator") == "Exists";
            (effect.is_empty() || effect == "NoExecute")
                && ((key.is_empty() && exists)
                    || (key == taint && (exists || text("value").is_empty())))
        });
        if !tolerated {
            list.push(
                json!({"key": taint, "operator": "Exists", "effect": "NoExecute",
                "tolerationSeconds": 300}),
            );
        }
    }
    if list.is_empty() {
        spec.remove("tolerations");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(name: &str, value: i64, default: bool) -> Value {
        json!({"metadata": {"name": name}, "value": value, "globalDefault": default})
    }

    fn pod(spec: Value) -> Value {
        json!({"metadata": {"name": "p"}, "spec": spec})
    }

    #[test]
    fn priority_comes_from_the_named_or_default_class() {
        let classes = [
            class("high", 1000, false),
            class("d1", 10, true),
            class("d0", 5, true),
        ];
        let mut named = pod(json!({"priorityClassName": "high"}));
        admit_priority(&mut named, &classes).unwrap();
        assert_eq!(named["spec"]["priority"], 1000);
        assert_eq!(named["spec"]["preemptionPolicy"], "PreemptLowerPriority");
        // The lowest of two defaults, its name set.
        let mut unnamed = pod(json!({}));
        admit_priority(&mut unnamed, &classes).unwrap();
        assert_eq!(unnamed["spec"]["priorityClassName"], "d0");
        assert_eq!(unnamed["spec"]["priority"], 5);
        let mut bare = pod(json!({}));
        admit_priority(&mut bare, &[]).unwrap();
        assert_eq!(
            bare["spec"],
            json!({"priority": 0, "preemptionPolicy": "PreemptLowerPriority"})
        );

        let mut missing = pod(json!({"priorityClassName": "nope"}));
        assert_eq!(
            admit_priority(&mut missing, &classes).unwrap_err(),
            "no PriorityClass with name nope was found"
        );
        let mut stated = pod(json!({"priorityClassName": "high", "priority": 5}));
        assert_eq!(
            admit_priority(&mut stated, &classes).unwrap_err(),
            "the integer value of priority (5) must not be provided in pod spec; priority admission controller computed 1000 from the given PriorityClass name"
        );
        let mut same = pod(json!({"priorityClassName": "high", "priority": 1000}));
        admit_priority(&mut same, &classes).unwrap();
        let never = json!({"metadata": {"name": "never"}, "value": 1, "preemptionPolicy": "Never"});
        let mut policy = pod(json!({"priorityClassName": "never",
            "preemptionPolicy": "PreemptLowerPriority"}));
        assert!(admit_priority(&mut policy, &[never]).unwrap_err().starts_with(
            "the string value of PreemptionPolicy (PreemptLowerPriority) must not be provided"
        ));

        let mut updated = pod(json!({"containers": []}));
        keep_priority(&mut updated, &named);
        assert_eq!(updated["spec"]["priority"], 1000);
        assert_eq!(updated["spec"]["preemptionPolicy"], "PreemptLowerPriority");
    }

    #[test]
    fn one_default_class() {
        let existing = [class("d1", 10, true), class("other", 1, false)];
        assert_eq!(
            default_conflict(&class("d2", 5, true), &existing, true).unwrap(),
            "PriorityClass d2 is marked as default, but d1 is already the default"
        );
        assert!(default_conflict(&class("d1", 10, true), &existing, false).is_none());
        assert!(default_conflict(&class("other", 1, true), &existing, false).is_some());
        assert!(default_conflict(&class("plain", 1, false), &existing, true).is_none());
    }

    #[test]
    fn the_service_account_and_its_token_volume() {
        let account = json!({"metadata": {"name": "default"},
            "imagePullSecrets": [{"name": "registry"}]});
        let mut plain = pod(json!({"containers": [{"name": "a"}],
            "initContainers": [{"name": "i", "volumeMounts": [{"name": "own", "mountPath": "/x"}]}]}));
        admit_service_account(&mut plain, &account, "abcde");
        let spec = &plain["spec"];
        assert_eq!(spec["serviceAccountName"], "default");
        assert_eq!(spec["serviceAccount"], "default");
        let mount = json!({"name": "kube-api-access-abcde", "readOnly": true,
            "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"});
        assert_eq!(spec["containers"][0]["volumeMounts"], json!([mount]));
        assert_eq!(spec["initContainers"][0]["volumeMounts"][1], mount);
        let volumes = spec["volumes"].as_array().unwrap();
        assert_eq!(volumes.len(), 1);
        assert_eq!(
            volumes[0]["projected"]["sources"][1]["configMap"]["name"],
            "kube-root-ca.crt"
        );
        assert_eq!(spec["imagePullSecrets"], json!([{"name": "registry"}]));

        // The pod's own mount at the path, and its refusal of the token, are kept.
        let mut own = pod(json!({"containers": [{"name": "a", "volumeMounts": [
            {"name": "mine", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}]}],
            "imagePullSecrets": [{"name": "mine"}]}));
        admit_service_account(&mut own, &account, "abcde");
        assert!(own["spec"].get("volumes").is_none(), "{own}");
        assert_eq!(own["spec"]["imagePullSecrets"], json!([{"name": "mine"}]));
        let mut refusing = pod(json!({"serviceAccountName": "builder",
            "automountServiceAccountToken": false, "containers": [{"name": "a"}]}));
        admit_service_account(&mut refusing, &json!({}), "abcde");
        assert_eq!(refusing["spec"]["serviceAccount"], "builder");
        assert!(refusing["spec"].get("volumes").is_none(), "{refusing}");
        let mut by_account = pod(json!({"containers": [{"name": "a"}]}));
        admit_service_account(
            &mut by_account,
            &json!({"automountServiceAccountToken": false}),
            "x",
        );
        assert!(by_account["spec"].get("volumes").is_none());

        assert_eq!(
            AdmissionPlugins::without(&["ServiceAccount".to_owned()]).unwrap(),
            AdmissionPlugins {
                service_account: false,
                ..AdmissionPlugins::default()
            }
        );
        assert_eq!(
            AdmissionPlugins::without(&["Nope".to_owned()]).unwrap_err(),
            "Nope"
        );
    }

    #[test]
    fn runtime_classes_set_overhead_and_scheduling() {
        let classes = [json!({"metadata": {"name": "gvisor"}, "handler": "runsc",
            "overhead": {"podFixed": {"cpu": "250m", "memory": "120Mi"}},
            "scheduling": {"nodeSelector": {"sandbox": "yes"},
                "tolerations": [{"key": "sandbox", "operator": "Exists", "effect": "NoSchedule"}]}})];
        let mut sandboxed = pod(json!({"runtimeClassName": "gvisor",
            "nodeSelector": {"zone": "a"}, "containers": []}));
        admit_runtime_class(&mut sandboxed, &classes).unwrap();
        assert_eq!(
            sandboxed["spec"]["overhead"],
            json!({"cpu": "250m", "memory": "120Mi"})
        );
        assert_eq!(
            sandboxed["spec"]["nodeSelector"],
            json!({"sandbox": "yes", "zone": "a"})
        );
        assert_eq!(
            sandboxed["spec"]["tolerations"].as_array().unwrap().len(),
            1
        );
        // Stated as the class has it (in another spelling): kept.
        let mut same = pod(json!({"runtimeClassName": "gvisor",
            "overhead": {"cpu": "0.25", "memory": "120Mi"}}));
        admit_runtime_class(&mut same, &classes).unwrap();
        let mut other = pod(json!({"runtimeClassName": "gvisor", "overhead": {"cpu": "1"}}));
        assert_eq!(
            admit_runtime_class(&mut other, &classes).unwrap_err(),
            "pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead"
        );
        let mut conflict =
            pod(json!({"runtimeClassName": "gvisor", "nodeSelector": {"sandbox": "no"}}));
        assert_eq!(
            admit_runtime_class(&mut conflict, &classes).unwrap_err(),
            "conflict: runtimeClass.scheduling.nodeSelector[sandbox] = yes; pod.spec.nodeSelector[sandbox] = no"
        );
        let mut missing = pod(json!({"runtimeClassName": "kata"}));
        assert_eq!(
            admit_runtime_class(&mut missing, &classes).unwrap_err(),
            "pod rejected: RuntimeClass \"kata\" not found"
        );
        let mut none = pod(json!({"containers": []}));
        admit_runtime_class(&mut none, &classes).unwrap();
        assert_eq!(none["spec"], json!({"containers": []}));
    }

    #[test]
    fn not_ready_and_unreachable_are_tolerated_for_five_minutes() {
        let mut bare = pod(json!({}));
        default_tolerations(&mut bare);
        assert_eq!(
            bare["spec"]["tolerations"],
            json!([
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
            ])
        );
        // Already tolerated: kept as the pod says.
        let own = json!({"key": "node.kubernetes.io/not-ready", "operator": "Exists",
            "effect": "NoExecute", "tolerationSeconds": 10});
        let mut tolerating = pod(json!({"tolerations": [own.clone()]}));
        default_tolerations(&mut tolerating);
        let list = tolerating["spec"]["tolerations"].as_array().unwrap();
        assert_eq!(list.len(), 2);
        assert_eq!(list[0], own);
        let mut everything = pod(json!({"tolerations": [{"operator": "Exists"}]}));
        default_tolerations(&mut everything);
        assert_eq!(
            everything["spec"]["tolerations"].as_array().unwrap().len(),
            1
        );
    }
}

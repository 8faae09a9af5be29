//! PersistentVolumes' rules as kube-apiserver's `pkg/apis/core/validation`
//! (`ValidatePersistentVolumeSpec`, `ValidatePersistentVolumeUpdate`) and
//! `pkg/volume/validation` (`checkMountOption`) apply them, in kube's order.
//!
//! ## Guarantees
//! - A volume has at least one access mode, each one kube supports, `ReadWriteOncePod` alone;
//!   a `capacity` holding exactly `storage` (`spec.capacity: Unsupported value: ...: supported
//!   values: "storage"` otherwise), each quantity neither negative (`must be a valid resource
//!   quantity`, with its integer value) nor zero (`must be greater than zero`); a reclaim
//!   policy `Delete`, `Recycle` or `Retain` (not `Recycle` for a hostPath of `/`); a storage
//!   class name that is a DNS subdomain; a volume mode `Block` or `Filesystem`.
//! - Exactly one volume source (`spec: Required value: must specify a volume type`; each
//!   further one `spec.<source>: Forbidden: may not specify more than 1 volume type`, with
//!   kube's quirks: a `flexVolume` is counted without that check, and the child kube names for
//!   `cephfs` is `cephFS`). Each source's required fields as kube checks them: hostPath's path
//!   (no `..`) and type, nfs' server and absolute path, csi's driver (a DNS subdomain of at most
//!   63 characters), volume handle and secret references (name a DNS subdomain, namespace a
//!   DNS label), local's path (no `..`) with a node affinity, fc's WWNs / WWIDs and LUN,
//!   flocker's dataset, quobyte's registry and volume, flexVolume's driver and reserved option
//!   namespaces, iscsi's portal, IQN / EUI / NAA names (kube's patterns), LUN and CHAP secret,
//!   and the required fields of the other in-tree sources.
//! - A node affinity has `required` node selector terms, each a valid node selector term.
//! - The mount options annotation `volume.beta.kubernetes.io/mount-options` only on the
//!   sources kube allows it for.
//! - An update keeps the volume source (`spec.persistentvolumesource: Forbidden:
//!   spec.persistentvolumesource is immutable after creation` and a diff; a CSI source may
//!   gain a `controllerExpandSecretRef`), the volume mode (`volumeMode: Invalid value: ...:
//!   field is immutable`, kube's path) and, once set, the node affinity (`nodeAffinity: Invalid
//!   value: ...: field is immutable, except for updating from beta label to GA`; a beta
//!   topology key may become its GA key).
//!
//! ## Differs from kube
//! - The diff after the immutable-source message is [`super::go_struct_diff`]'s (field names
//!   with a capital first letter, values as JSON), not go-cmp's; Go structs kube prints as
//!   invalid values (the capacity map, the node affinity) print as their JSON.
//! - Not checked: Azure disks' caching
//!   modes, kinds and URIs, StorageOS' DNS labels, Cinder's and CephFS' secret references'
//!   namespaces; `volumeAttributesClassName` is never seen here (the defaults drop it, as
//!   kube 1.33 does with `VolumeAttributesClass` off). The status subresource's rules (kube checks only
//!   metadata there) need nothing more.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Map, Value};

use super::access::{get, list, text};
use super::pod_spec;
use crate::field::{Cause, forbidden, go_quote, invalid, not_supported, required};
use crate::names::{validate_dns1123_label, validate_dns1123_subdomain};
use crate::quantity::Quantity;

/// The persistent volume sources in `ValidatePersistentVolumeSpec`'s order: the JSON key and
/// the child kube names in its more-than-one-source error.
const SOURCES: [(&str, &str); 22] = [
    ("hostPath", "hostPath"),
    ("gcePersistentDisk", "gcePersistentDisk"),
    ("awsElasticBlockStore", "awsElasticBlockStore"),
    ("glusterfs", "glusterfs"),
    ("flocker", "flocker"),
    ("nfs", "nfs"),
    ("rbd", "rbd"),
    ("quobyte", "quobyte"),
    ("cephfs", "cephFS"),
    ("iscsi", "iscsi"),
    ("cinder", "cinder"),
    ("fc", "fc"),
    ("flexVolume", "flexVolume"),
    ("azureFile", "azureFile"),
    ("vsphereVolume", "vsphereVolume"),
    ("photonPersistentDisk", "photonPersistentDisk"),
    ("portworxVolume", "portworxVolume"),
    ("azureDisk", "azureDisk"),
    ("scaleIO", "scaleIO"),
    ("local", "local"),
    ("storageos", "storageos"),
    ("csi", "csi"),
];

/// The sources the mount options annotation is allowed for (`checkMountOption`).
const MOUNT_OPTION_SOURCES: [&str; 13] = [
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "glusterfs",
    "nfs",
    "rbd",
    "quobyte",
    "iscsi",
    "cinder",
    "cephfs",
    "azureFile",
    "vsphereVolume",
    "azureDisk",
    "photonPersistentDisk",
];

/// kube's `MountOptionAnnotation`.
const MOUNT_OPTIONS: &str = "volume.beta.kubernetes.io/mount-options";

/// The beta topology labels a node affinity may trade for their GA names on update.
const BETA_TO_GA: [(&str, &str); 3] = [
    (
        "failure-domain.beta.kubernetes.io/zone",
        "topology.kubernetes.io/zone",
    ),
    (
        "failure-domain.beta.kubernetes.io/region",
        "topology.kubernetes.io/region",
    ),
    (
        "beta.kubernetes.io/instance-type",
        "node.kubernetes.io/instance-type",
    ),
];

/// The causes of the PersistentVolume `object` (updating `old`).
pub(super) fn validate(object: &Value, old: Option<&Value>, causes: &mut Vec<Cause>) {
    let spec = object.get("spec").unwrap_or(&Value::Null);
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    spec_causes(spec, name, causes);
    mount_options(object, spec, causes);
    if let Some(old) = old {
        update(spec, old.get("spec").unwrap_or(&Value::Null), causes);
    }
}

/// `ValidatePersistentVolumeSpec` for a volume that is not inline, named `name`.
fn spec_causes(spec: &Value, name: &str, causes: &mut Vec<Cause>) {
    let modes = list(spec, "accessModes");
    if modes.is_empty() {
        causes.push(required("spec.accessModes", ""));
    }
    super::storage::access_modes(modes.iter().map(|m| m.as_str().unwrap_or("")), causes);
    capacity(spec, causes);
    let policy = text(spec, "persistentVolumeReclaimPolicy");
    if !policy.is_empty() && !matches!(policy, "Delete" | "Recycle" | "Retain") {
        causes.push(not_supported(
            "spec.persistentVolumeReclaimPolicy",
            &go_quote(policy),
            &["Delete", "Recycle", "Retain"],
        ));
    }
    let affinity = get(spec, "nodeAffinity");
    if let Some(affinity) = affinity {
        match get(affinity, "required") {
            Some(selector) => {
                pod_spec::node_selector(selector, "spec.nodeAffinity.required", causes);
            }
            None => causes.push(required(
                "spec.nodeAffinity.required",
                "must specify required node constraints",
            )),
        }
    }
    let mut count = 0;
    for (key, child) in SOURCES {
        let Some(source) = get(spec, key) else {
            continue;
        };
        if count > 0 && key != "flexVolume" {
            causes.push(forbidden(
                &format!("spec.{child}"),
                "may not specify more than 1 volume type",
            ));
            continue;
        }
        count += 1;
        if key == "iscsi" {
            iscsi(source, name, causes);
        } else {
            volume_source(key, source, causes);
        }
        if key == "local" && affinity.is_none() {
            causes.push(required(
                "spec.nodeAffinity",
                "Local volume requires node affinity",
            ));
        }
    }
    if count == 0 {
        causes.push(required("spec", "must specify a volume type"));
    }
    if let Some(host) = get(spec, "hostPath")
        && clean_is_root(text(host, "path"))
        && policy == "Recycle"
    {
        causes.push(forbidden(
            "spec.persistentVolumeReclaimPolicy",
            "may not be 'recycle' for a hostPath mount of '/'",
        ));
    }
    let class = text(spec, "storageClassName");
    if !class.is_empty()
        && let Err(message) = validate_dns1123_subdomain(class)
    {
        causes.push(invalid("spec.storageClassName", &go_quote(class), &message));
    }
    if let Some(mode) = get(spec, "volumeMode") {
        let mode = mode.as_str().unwrap_or("");
        if !matches!(mode, "Block" | "Filesystem") {
            causes.push(not_supported(
                "spec.volumeMode",
                &go_quote(mode),
                &["Block", "Filesystem"],
            ));
        }
    }
}

/// The capacity: `storage` alone, each quantity valid and positive.
fn capacity(spec: &Value, causes: &mut Vec<Cause>) {
    let empty = Map::new();
    let present = get(spec, "capacity");
    let map = present.and_then(Value::as_object).unwrap_or(&empty);
    if map.is_empty() {
        causes.push(required("spec.capacity", ""));
    }
    if !map.contains_key("storage") || map.len() > 1 {
        // Go prints the `core.ResourceList`: nil when absent, else (here) its JSON.
        let printed = match present {
            None => "core.ResourceList(nil)".to_owned(),
            Some(value) => value.to_string(),
        };
        causes.push(not_supported("spec.capacity", &printed, &["storage"]));
    }
    // Go walks the map in random order; sorted here.
    let mut names: Vec<&String> = map.keys().collect();
    names.sort();
    for name in names {
        let at = format!("spec.capacity[{name}]");
        // A text that is no quantity was refused when the body was decoded.
        let Some(amount) = pod_spec::quantity(&map[name]) else {
            continue;
        };
        // `Quantity.Value()`: rounded up to an integer.
        let value = amount.nanos().div_euclid(1_000_000_000)
            + i128::from(amount.nanos().rem_euclid(1_000_000_000) != 0);
        if value < 0 {
            causes.push(invalid(
                &at,
                &value.to_string(),
                "must be a valid resource quantity",
            ));
        }
        if amount <= Quantity::zero() {
            causes.push(invalid(
                &at,
                &go_quote(&amount.to_string()),
                "must be greater than zero",
            ));
        }
    }
}

/// Whether Go's `path.Clean(path)` is `/`.
fn clean_is_root(path: &str) -> bool {
    path.starts_with('/')
        && path
            .split('/')
            .filter(|part| !part.is_empty() && *part != ".")
            .fold(0usize, |depth, part| {
                if part == ".." {
                    depth.saturating_sub(1)
                } else {
                    depth + 1
                }
            })
            == 0
}

/// The rules of one persistent volume source `key`.
fn volume_source(key: &str, source: &Value, causes: &mut Vec<Cause>) {
    let here = format!("spec.{key}");
    let need = |field: &str, causes: &mut Vec<Cause>| {
        if text(source, field).is_empty() {
            causes.push(required(&format!("{here}.{field}"), ""));
        }
    };
    match key {
        "hostPath" => pod_spec::host_path(source, &here, causes),
        "nfs" => pod_spec::nfs(source, &here, causes),
        "local" => {
            let path = text(source, "path");
            if path.is_empty() {
                causes.push(required(&format!("{here}.path"), ""));
            } else {
                pod_spec::no_backsteps(path, &format!("{here}.path"), causes);
            }
        }
        "csi" => {
            pod_spec::csi_driver(text(source, "driver"), &format!("{here}.driver"), causes);
            need("volumeHandle", causes);
            for secret in [
                "controllerPublishSecretRef",
                "controllerExpandSecretRef",
                "nodePublishSecretRef",
                "nodeExpandSecretRef",
            ] {
                if let Some(reference) = get(source, secret) {
                    secret_reference(reference, &format!("{here}.{secret}"), causes);
                }
            }
        }
        "flexVolume" => {
            need("driver", causes);
            let empty = Map::new();
            let options = get(source, "options")
                .and_then(Value::as_object)
                .unwrap_or(&empty);
            for option in options.keys() {
                let namespace = option.split_once('/').map_or(option.as_str(), |(n, _)| n);
                let normalized = format!(".{}", namespace.to_lowercase());
                if normalized.ends_with(".kubernetes.io") || normalized.ends_with(".k8s.io") {
                    causes.push(invalid(
                        &format!("{here}.options[{option}]"),
                        &go_quote(option),
                        "kubernetes.io and k8s.io namespaces are reserved",
                    ));
                }
            }
        }
        "azureFile" => {
            need("secretName", causes);
            need("shareName", causes);
            if get(source, "secretNamespace").is_some_and(|n| n.as_str() == Some("")) {
                causes.push(required(&format!("{here}.secretNamespace"), ""));
            }
        }
        // A pod's volume and a persistent volume check these the same way.
        "fc" | "flocker" | "quobyte" => {
            let mut volume = Map::new();
            volume.insert(key.to_owned(), source.clone());
            pod_spec::volume_source(&Value::Object(volume), "spec", "", "", causes);
        }
        _ => {
            pod_spec::simple_source_required(key, source, "spec", causes);
        }
    }
}

/// kube's `iscsiInitiatorIqnRegex`, `...EuiRegex` and `...NaaRegex` (Go's `\s` is ASCII).
static IQN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"iqn\.\d{4}-\d{2}\.([[:alnum:]-.]+)(:[^,;*&$|\t\n\x0C\r ]+)$")
        .expect("a fixed pattern")
});
static EUI: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^eui.[[:alnum:]]{16}$").expect("a fixed pattern"));
static NAA: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^naa.[[:alnum:]]{32}$").expect("a fixed pattern"));

/// Whether `name` is an iSCSI name kube accepts; `None` when it has none of the prefixes
/// `iqn`, `eui` and `naa`.
fn iscsi_name_ok(name: &str) -> Option<bool> {
    if name.starts_with("iqn") {
        Some(IQN.is_match(name))
    } else if name.starts_with("eui") {
        Some(EUI.is_match(name))
    } else if name.starts_with("naa") {
        Some(NAA.is_match(name))
    } else {
        None
    }
}

/// `validateISCSIPersistentVolumeSource` of the volume named `volume`.
fn iscsi(source: &Value, volume: &str, causes: &mut Vec<Cause>) {
    const HERE: &str = "spec.iscsi";
    const FORMAT: &str = "must be valid format";
    let portal = text(source, "targetPortal");
    if portal.is_empty() {
        causes.push(required(&format!("{HERE}.targetPortal"), ""));
    }
    let initiator = get(source, "initiatorName").map(|n| n.as_str().unwrap_or(""));
    if initiator.is_some() && volume.len() + 1 + portal.len() > 64 {
        causes.push(invalid(
            &format!("{HERE}.targetportal"),
            &go_quote(portal),
            "Total length of <volume name>:<iscsi.targetPortal> must be under 64 characters if iscsi.initiatorName is specified.",
        ));
    }
    let iqn = text(source, "iqn");
    if iqn.is_empty() {
        causes.push(required(&format!("{HERE}.iqn"), ""));
    } else if iscsi_name_ok(iqn) != Some(true) {
        causes.push(invalid(&format!("{HERE}.iqn"), &go_quote(iqn), FORMAT));
    }
    let lun = pod_spec::int(source, "lun").unwrap_or(0);
    if !(0..=255).contains(&lun) {
        causes.push(invalid(
            &format!("{HERE}.lun"),
            &lun.to_string(),
            "must be between 0 and 255, inclusive",
        ));
    }
    let chap = ["discoveryCHAPAuth", "sessionCHAPAuth"]
        .iter()
        .any(|key| source.get(*key).and_then(Value::as_bool) == Some(true));
    let secret = get(source, "secretRef");
    if chap && secret.is_none() {
        causes.push(required(&format!("{HERE}.secretRef"), ""));
    }
    if secret.is_some_and(|s| text(s, "name").is_empty()) {
        causes.push(required(&format!("{HERE}.secretRef.name"), ""));
    }
    if let Some(initiator) = initiator
        && iscsi_name_ok(initiator) != Some(true)
    {
        causes.push(invalid(
            &format!("{HERE}.initiatorname"),
            &go_quote(initiator),
            FORMAT,
        ));
    }
}

/// `validatePVSecretReference`.
fn secret_reference(reference: &Value, at: &str, causes: &mut Vec<Cause>) {
    let name = text(reference, "name");
    if name.is_empty() {
        causes.push(required(&format!("{at}.name"), ""));
    } else if let Err(message) = validate_dns1123_subdomain(name) {
        causes.push(invalid(&format!("{at}.name"), &go_quote(name), &message));
    }
    let namespace = text(reference, "namespace");
    if namespace.is_empty() {
        causes.push(required(&format!("{at}.namespace"), ""));
    } else if let Err(message) = validate_dns1123_label(namespace) {
        causes.push(invalid(
            &format!("{at}.namespace"),
            &go_quote(namespace),
            &message,
        ));
    }
}

/// `checkMountOption`: the annotation only on the sources that take mount options.
fn mount_options(object: &Value, spec: &Value, causes: &mut Vec<Cause>) {
    if MOUNT_OPTION_SOURCES
        .iter()
        .any(|key| get(spec, key).is_some())
    {
        return;
    }
    if object
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .is_some_and(|annotations| annotations.contains_key(MOUNT_OPTIONS))
    {
        causes.push(forbidden(
            &format!("metadata.annotations.{MOUNT_OPTIONS}"),
            "may not specify mount options for this volume type",
        ));
    }
}

/// The volume source of `spec` (`core.PersistentVolumeSource`'s fields that are set).
fn source_of(spec: &Value) -> Map<String, Value> {
    SOURCES
        .iter()
        .filter_map(|(key, _)| get(spec, key).map(|v| ((*key).to_owned(), v.clone())))
        .collect()
}

/// `ValidatePersistentVolumeUpdate`'s own rules.
fn update(spec: &Value, old: &Value, causes: &mut Vec<Cause>) {
    let old_source = source_of(old);
    let mut new_source = source_of(spec);
    // A CSI source may gain a `controllerExpandSecretRef`.
    let old_csi_without = old_source
        .get("csi")
        .is_some_and(|csi| get(csi, "controllerExpandSecretRef").is_none());
    if old_csi_without && let Some(csi) = new_source.get_mut("csi").and_then(Value::as_object_mut) {
        csi.remove("controllerExpandSecretRef");
    }
    if !sources_equal(&old_source, &new_source) {
        let diff = super::go_struct_diff("core.PersistentVolumeSource", &old_source, &new_source);
        causes.push(forbidden(
            "spec.persistentvolumesource",
            &format!("spec.persistentvolumesource is immutable after creation{diff}"),
        ));
    }
    let (mode, old_mode) = (get(spec, "volumeMode"), get(old, "volumeMode"));
    if mode != old_mode {
        let printed = mode.map_or_else(|| "null".to_owned(), crate::field::go_value);
        causes.push(invalid("volumeMode", &printed, "field is immutable"));
    }
    if let Some(old_affinity) = get(old, "nodeAffinity") {
        let affinity = get(spec, "nodeAffinity");
        if !affinity.is_some_and(|new| affinity_kept(old_affinity, new)) {
            let printed = affinity.map_or_else(|| "null".to_owned(), Value::to_string);
            causes.push(invalid(
                "nodeAffinity",
                &printed,
                "field is immutable, except for updating from beta label to GA",
            ));
        }
    }
}

/// Two sources equal as Go compares them (numbers by value).
fn sources_equal(a: &Map<String, Value>, b: &Map<String, Value>) -> bool {
    crate::field::json_equal(&Value::Object(a.clone()), &Value::Object(b.clone()))
}

/// Whether the node affinity `new` is `old`, but for beta topology keys in `old` that became
/// their GA names in `new`.
fn affinity_kept(old: &Value, new: &Value) -> bool {
    match (old, new) {
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len()
                && a.iter().all(|(key, value)| {
                    b.get(key).is_some_and(|other| {
                        if key == "key"
                            && let (Some(was), Some(is)) = (value.as_str(), other.as_str())
                        {
                            was == is || BETA_TO_GA.contains(&(was, is))
                        } else {
                            affinity_kept(value, other)
                        }
                    })
                })
        }
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| affinity_kept(x, y))
        }
        (a, b) => crate::field::json_equal(a, b),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    fn message(object: Value, old: Option<&Value>) -> Option<String> {
        crate::kinds::refusal("", "persistentvolumes", object, old)
    }

    fn volume(spec: Value) -> Value {
        json!({"metadata": {"name": "v"}, "spec": spec})
    }

    #[test]
    fn a_valid_volume_passes() {
        let good = volume(json!({"capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/data"},
            "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "manual"}));
        assert_eq!(message(good, None), None);
        let local = volume(
            json!({"capacity": {"storage": "5Gi"}, "accessModes": ["ReadWriteOncePod"],
            "local": {"path": "/mnt/disk"}, "nodeAffinity": {"required": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In",
                    "values": ["n1"]}]}]}}}),
        );
        assert_eq!(message(local, None), None);
        let csi = volume(
            json!({"capacity": {"storage": "5Gi"}, "accessModes": ["ReadWriteMany"],
            "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "vol-1",
                "nodePublishSecretRef": {"name": "s", "namespace": "default"}}}),
        );
        assert_eq!(message(csi, None), None);
    }

    #[test]
    fn the_probed_volume_is_refused_as_kube_refuses_it() {
        let bad = volume(
            json!({"capacity": {"storage": "-1Gi"}, "accessModes": ["Bogus"],
            "persistentVolumeReclaimPolicy": "X"}),
        );
        assert_eq!(
            message(bad, None).unwrap(),
            "PersistentVolume \"v\" is invalid: [spec.accessModes: Unsupported value: \"Bogus\": supported values: \"ReadOnlyMany\", \"ReadWriteMany\", \"ReadWriteOnce\", \"ReadWriteOncePod\", spec.capacity[storage]: Invalid value: -1073741824: must be a valid resource quantity, spec.capacity[storage]: Invalid value: \"-1Gi\": must be greater than zero, spec.persistentVolumeReclaimPolicy: Unsupported value: \"X\": supported values: \"Delete\", \"Recycle\", \"Retain\", spec: Required value: must specify a volume type]"
        );
        assert_eq!(
            message(volume(json!({})), None).unwrap(),
            "PersistentVolume \"v\" is invalid: [spec.accessModes: Required value, spec.capacity: Required value, spec.capacity: Unsupported value: core.ResourceList(nil): supported values: \"storage\", spec: Required value: must specify a volume type]"
        );
    }

    #[test]
    fn sources_are_checked() {
        let base = |source: Value| {
            let mut spec =
                json!({"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"]});
            for (k, v) in source.as_object().unwrap() {
                spec[k] = v.clone();
            }
            volume(spec)
        };
        assert_eq!(
            message(
                base(json!({"hostPath": {"path": "/a"}, "nfs": {"server": "s", "path": "/x"}})),
                None
            )
            .unwrap(),
            "PersistentVolume \"v\" is invalid: spec.nfs: Forbidden: may not specify more than 1 volume type"
        );
        assert_eq!(
            message(base(json!({"nfs": {"path": "rel"}})), None).unwrap(),
            "PersistentVolume \"v\" is invalid: [spec.nfs.server: Required value, spec.nfs.path: Invalid value: \"rel\": must be an absolute path]"
        );
        assert_eq!(
            message(
                base(
                    json!({"csi": {"driver": "Bad_Driver", "nodeExpandSecretRef": {"name": "s"}}})
                ),
                None
            )
            .unwrap(),
            "PersistentVolume \"v\" is invalid: [spec.csi.driver: Invalid value: \"Bad_Driver\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*'), spec.csi.volumeHandle: Required value, spec.csi.nodeExpandSecretRef.namespace: Required value]"
        );
        assert_eq!(
            message(base(json!({"local": {"path": "/a/../b"}})), None).unwrap(),
            "PersistentVolume \"v\" is invalid: [spec.local.path: Invalid value: \"/a/../b\": must not contain '..', spec.nodeAffinity: Required value: Local volume requires node affinity]"
        );
        let mut recycled = base(json!({"hostPath": {"path": "/tmp/.."}, "nodeAffinity": {}}));
        recycled["spec"]["persistentVolumeReclaimPolicy"] = json!("Recycle");
        recycled["metadata"]["annotations"] =
            json!({"volume.beta.kubernetes.io/mount-options": "ro"});
        assert_eq!(
            message(recycled, None).unwrap(),
            "PersistentVolume \"v\" is invalid: [spec.nodeAffinity.required: Required value: must specify required node constraints, spec.hostPath.path: Invalid value: \"/tmp/..\": must not contain '..', spec.persistentVolumeReclaimPolicy: Forbidden: may not be 'recycle' for a hostPath mount of '/', metadata.annotations.volume.beta.kubernetes.io/mount-options: Forbidden: may not specify mount options for this volume type]"
        );
        assert_eq!(
            message(
                base(
                    json!({"iscsi": {"targetPortal": "1.2.3.4"}, "volumeMode": "Raw",
                "storageClassName": "A"})
                ),
                None
            )
            .unwrap(),
            "PersistentVolume \"v\" is invalid: [spec.iscsi.iqn: Required value, spec.storageClassName: Invalid value: \"A\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*'), spec.volumeMode: Unsupported value: \"Raw\": supported values: \"Block\", \"Filesystem\"]"
        );
        let mut two =
            base(json!({"capacity": {"storage": "1Gi", "cpu": "1"}, "hostPath": {"path": "/a"}}));
        two["spec"]["accessModes"] = json!(["ReadWriteOncePod", "ReadOnlyMany"]);
        assert_eq!(
            message(two, None).unwrap(),
            "PersistentVolume \"v\" is invalid: [spec.accessModes: Forbidden: may not use ReadWriteOncePod with other access modes, spec.capacity: Unsupported value: {\"cpu\":\"1\",\"storage\":\"1Gi\"}: supported values: \"storage\"]"
        );
    }

    #[test]
    fn iscsi_names_follow_kubes_patterns() {
        let iscsi = |source: Value| {
            volume(
                json!({"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                "iscsi": source}),
            )
        };
        let good = iscsi(json!({"targetPortal": "10.0.0.1:3260",
            "iqn": "iqn.2001-04.com.example:storage", "lun": 0,
            "initiatorName": "naa.0123456789abcdef0123456789abcdef"}));
        assert_eq!(message(good, None), None);
        let bad = iscsi(json!({"targetPortal": "p", "iqn": "eui.123", "lun": 300,
            "sessionCHAPAuth": true, "initiatorName": "bogus"}));
        assert_eq!(
            message(bad, None).unwrap(),
            "PersistentVolume \"v\" is invalid: [spec.iscsi.iqn: Invalid value: \"eui.123\": must be valid format, spec.iscsi.lun: Invalid value: 300: must be between 0 and 255, inclusive, spec.iscsi.secretRef: Required value, spec.iscsi.initiatorname: Invalid value: \"bogus\": must be valid format]"
        );
    }

    #[test]
    fn updates_keep_the_source_the_mode_and_the_affinity() {
        let affinity = |key: &str| {
            json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": key, "operator": "In", "values": ["z1"]}]}]}})
        };
        let old = volume(
            json!({"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
            "nfs": {"server": "a", "path": "/x"}, "volumeMode": "Filesystem",
            "nodeAffinity": affinity("failure-domain.beta.kubernetes.io/zone")}),
        );
        let mut grown = old.clone();
        grown["spec"]["capacity"]["storage"] = json!("2Gi");
        grown["spec"]["nodeAffinity"] = affinity("topology.kubernetes.io/zone");
        assert_eq!(message(grown, Some(&old)), None);
        let mut moved = old.clone();
        moved["spec"]["nfs"]["server"] = json!("b");
        moved["spec"]["volumeMode"] = json!("Block");
        moved["spec"]["nodeAffinity"] = affinity("other");
        assert_eq!(
            message(moved, Some(&old)).unwrap(),
            "PersistentVolume \"v\" is invalid: [spec.persistentvolumesource: Forbidden: spec.persistentvolumesource is immutable after creation\n  core.PersistentVolumeSource{\n- \tNfs: {\"path\":\"/x\",\"server\":\"a\"},\n+ \tNfs: {\"path\":\"/x\",\"server\":\"b\"},\n  }\n, volumeMode: Invalid value: \"Block\": field is immutable, nodeAffinity: Invalid value: {\"required\":{\"nodeSelectorTerms\":[{\"matchExpressions\":[{\"key\":\"other\",\"operator\":\"In\",\"values\":[\"z1\"]}]}]}}: field is immutable, except for updating from beta label to GA]"
        );
        let csi = volume(
            json!({"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
            "csi": {"driver": "d.example.com", "volumeHandle": "h"}, "volumeMode": "Filesystem"}),
        );
        let mut expand = csi.clone();
        expand["spec"]["csi"]["controllerExpandSecretRef"] = json!({"name": "s", "namespace": "n"});
        assert_eq!(message(expand, Some(&csi)), None);
    }
}

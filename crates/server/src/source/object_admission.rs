//! kube-apiserver's default mutating admission plugins for kinds other than pods:
//! `DefaultStorageClass` (PersistentVolumeClaims), `DefaultIngressClass` (Ingresses) and
//! `TaintNodesByCondition` (Nodes) — `plugin/pkg/admission/storage/storageclass/setdefault`,
//! `plugin/pkg/admission/network/defaultingressclass`, `plugin/pkg/admission/nodetaint`.
//! Each runs on creates only, and `--disable-admission-plugins` can turn it off.
//!
//! ## Guarantees
//! - **DefaultStorageClass**: a claim that names no class (no `spec.storageClassName`, not
//!   even `""`, and no beta `volume.beta.kubernetes.io/storage-class` annotation) gets the
//!   default StorageClass's name: the class annotated
//!   `storageclass.kubernetes.io/is-default-class: "true"` (or the beta annotation), the
//!   newest when several are (kube's choice since 1.26); none when no class is the default.
//! - **DefaultIngressClass**: an Ingress without `spec.ingressClassName` and without the
//!   `kubernetes.io/ingress.class` annotation gets the IngressClass annotated
//!   `ingressclass.kubernetes.io/is-default-class: "true"` (the newest of several).
//! - **TaintNodesByCondition**: a created Node gets the `node.kubernetes.io/not-ready`
//!   `NoSchedule` taint unless it has one with that key and effect (kube's node lifecycle
//!   controller removes it once the node's kubelet reports Ready; no kubelet reports here).
//! - The classes are read from their caches as they are (kube's listers).

use serde_json::{Value, json};

/// The default class among `classes` by `annotations` (either annotation `"true"`): the
/// newest by `creationTimestamp`, then the first by name.
fn default_class<'a>(classes: &'a [Value], annotations: &[&str]) -> Option<&'a Value> {
    let stamp = |class: &Value| {
        class
            .pointer("/metadata/creationTimestamp")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let name = |class: &Value| {
        class
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    classes
        .iter()
        .filter(|class| {
            annotations.iter().any(|key| {
                class
                    .pointer("/metadata/annotations")
                    .and_then(|a| a.get(*key))
                    .and_then(Value::as_str)
                    == Some("true")
            })
        })
        // Newest first; on equal times the smaller name.
        .max_by(|a, b| stamp(a).cmp(&stamp(b)).then_with(|| name(b).cmp(&name(a))))
}

fn annotated(object: &Value, key: &str) -> bool {
    object
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(key))
        .is_some()
}

/// DefaultStorageClass on a created `claim`, `classes` being every StorageClass.
pub fn default_storage_class(claim: &mut Value, classes: &[Value]) {
    let named = claim
        .pointer("/spec/storageClassName")
        .is_some_and(|name| !name.is_null());
    if named || annotated(claim, "volume.beta.kubernetes.io/storage-class") {
        return;
    }
    let Some(class) = default_class(
        classes,
        &[
            "storageclass.kubernetes.io/is-default-class",
            "storageclass.beta.kubernetes.io/is-default-class",
        ],
    ) else {
        return;
    };
    let name = class.pointer("/metadata/name").cloned().unwrap_or_default();
    if let Some(spec) = claim.get_mut("spec").and_then(Value::as_object_mut) {
        spec.insert("storageClassName".into(), name);
    }
}

/// DefaultIngressClass on a created `ingress`, `classes` being every IngressClass.
pub fn default_ingress_class(ingress: &mut Value, classes: &[Value]) {
    let named = ingress
        .pointer("/spec/ingressClassName")
        .is_some_and(|name| !name.is_null());
    if named || annotated(ingress, "kubernetes.io/ingress.class") {
        return;
    }
    let Some(class) = default_class(classes, &["ingressclass.kubernetes.io/is-default-class"])
    else {
        return;
    };
    let name = class.pointer("/metadata/name").cloned().unwrap_or_default();
    if let Some(spec) = ingress.get_mut("spec").and_then(Value::as_object_mut) {
        spec.insert("ingressClassName".into(), name);
    }
}

/// TaintNodesByCondition on a created `node`.
pub fn taint_not_ready(node: &mut Value) {
    const KEY: &str = "node.kubernetes.io/not-ready";
    let Some(object) = node.as_object_mut() else {
        return;
    };
    let spec = object.entry("spec").or_insert_with(|| json!({}));
    let Some(spec) = spec.as_object_mut() else {
        return;
    };
    let taints = spec.entry("taints").or_insert_with(|| json!([]));
    if taints.is_null() {
        *taints = json!([]);
    }
    if let Value::Array(taints) = taints
        && !taints.iter().any(|taint| {
            taint.get("key").and_then(Value::as_str) == Some(KEY)
                && taint.get("effect").and_then(Value::as_str) == Some("NoSchedule")
        })
    {
        taints.push(json!({"key": KEY, "effect": "NoSchedule"}));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(name: &str, created: &str, annotation: Option<&str>) -> Value {
        let mut class =
            json!({"metadata": {"name": name, "creationTimestamp": created, "annotations": {}}});
        if let Some(key) = annotation {
            class["metadata"]["annotations"][key] = json!("true");
        }
        class
    }

    #[test]
    fn claims_and_ingresses_get_the_newest_default_class() {
        let key = "storageclass.kubernetes.io/is-default-class";
        let beta = "storageclass.beta.kubernetes.io/is-default-class";
        let classes = [
            class("old", "2026-01-01T00:00:00Z", Some(key)),
            class("new", "2026-02-01T00:00:00Z", Some(beta)),
            class("plain", "2026-03-01T00:00:00Z", None),
        ];
        let mut claim = json!({"metadata": {"name": "c"}, "spec": {}});
        default_storage_class(&mut claim, &classes);
        assert_eq!(claim["spec"]["storageClassName"], "new");
        // A class named, even empty, or the beta annotation: left alone.
        for spec in [
            json!({"storageClassName": ""}),
            json!({"storageClassName": "x"}),
        ] {
            let mut claim = json!({"metadata": {"name": "c"}, "spec": spec.clone()});
            default_storage_class(&mut claim, &classes);
            assert_eq!(claim["spec"], spec);
        }
        let mut annotated_claim = json!({"metadata": {"name": "c", "annotations":
            {"volume.beta.kubernetes.io/storage-class": "x"}}, "spec": {}});
        default_storage_class(&mut annotated_claim, &classes);
        assert!(annotated_claim["spec"].get("storageClassName").is_none());
        let mut no_default = json!({"metadata": {"name": "c"}, "spec": {}});
        default_storage_class(&mut no_default, &classes[2..]);
        assert!(no_default["spec"].get("storageClassName").is_none());

        let ingress_key = "ingressclass.kubernetes.io/is-default-class";
        let ingress_classes = [
            class("b", "2026-01-01T00:00:00Z", Some(ingress_key)),
            class("a", "2026-01-01T00:00:00Z", Some(ingress_key)),
        ];
        let mut ingress = json!({"metadata": {"name": "i"}, "spec": {}});
        default_ingress_class(&mut ingress, &ingress_classes);
        assert_eq!(ingress["spec"]["ingressClassName"], "a");
        let mut old_style = json!({"metadata": {"name": "i", "annotations":
            {"kubernetes.io/ingress.class": "nginx"}}, "spec": {}});
        default_ingress_class(&mut old_style, &ingress_classes);
        assert!(old_style["spec"].get("ingressClassName").is_none());
    }

    #[test]
    fn new_nodes_are_not_ready_until_a_kubelet_says() {
        let mut node = json!({"metadata": {"name": "n"}});
        taint_not_ready(&mut node);
        assert_eq!(
            node["spec"]["taints"],
            json!([{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}])
        );
        taint_not_ready(&mut node);
        assert_eq!(node["spec"]["taints"].as_array().unwrap().len(), 1);
    }
}

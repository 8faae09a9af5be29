//! `v1` `ComponentStatus` (`componentstatuses`, short name `cs`), as kube-apiserver serves it
//! for `kubectl get componentstatuses` and for clients that read it (kube-runtime's event
//! recorder test references the `scheduler` one).
//!
//! Guarantees:
//! - Read-only and cluster-scoped: `get` and `list` only (discovery lists those two verbs; the
//!   server answers other methods 405 and a watch 405 `MethodNotSupported`, as
//!   kube-apiserver's storage, which has no watch, does). Nothing is stored.
//! - The components are kube-apiserver's: `scheduler`, `controller-manager` and one `etcd-N`
//!   per storage backend, each with a single `Healthy` condition.
//! - Honest health: watchkeeper runs no scheduler and no controller-manager, so their
//!   condition is what kube-apiserver answers when their health endpoints (HTTPS on
//!   127.0.0.1:10259 and :10257, path `/healthz`) refuse connections: status `False` and the
//!   Go HTTP client's error as the message. `etcd-0` is the store's own health ([`etcd`]):
//!   `True` with message `ok` when it answers, `False` with its error otherwise.
//! - Every answer carries kube-apiserver's deprecation warning ([`DEPRECATION_WARNING`]).

use serde_json::{Value, json};

use crate::resources::ResourceDef;

/// The resource's plural.
pub const PLURAL: &str = "componentstatuses";

/// The kind.
pub const KIND: &str = "ComponentStatus";

/// The verbs kube-apiserver serves for it.
pub const VERBS: &[&str] = &["get", "list"];

/// The warning kube-apiserver attaches to every `v1` `ComponentStatus` answer (the text of
/// its `Warning: 299 - "..."` header).
pub const DEPRECATION_WARNING: &str = "v1 ComponentStatus is deprecated in v1.19+";

/// The components kube-apiserver probes over HTTP, with the port of their default secure
/// health endpoint on 127.0.0.1.
const PROBED: &[(&str, u16)] = &[("scheduler", 10259), ("controller-manager", 10257)];

/// The resource definition (core group, `v1`, cluster-scoped, short name `cs`).
#[must_use]
pub fn def() -> ResourceDef {
    let mut def = ResourceDef::named("", "v1", PLURAL, KIND, false);
    def.singular = "componentstatus".to_owned();
    def.short_names = vec!["cs".to_owned()];
    def
}

/// Whether `def` is this resource.
#[must_use]
pub fn is_component_status(def: &ResourceDef) -> bool {
    def.group.is_empty() && def.version == "v1" && def.plural == PLURAL
}

/// One `ComponentStatus` with its `Healthy` condition (`status` is `True`, `False` or
/// `Unknown`; an empty message or error is left out, as Go's `omitempty` does). `item` leaves
/// out `kind` and `apiVersion`, as items of a list have none.
fn status(name: &str, condition: &str, message: &str, error: &str, item: bool) -> Value {
    let mut healthy = json!({"type": "Healthy", "status": condition});
    if !message.is_empty() {
        healthy["message"] = json!(message);
    }
    if !error.is_empty() {
        healthy["error"] = json!(error);
    }
    let mut object = json!({
        "metadata": {"name": name, "creationTimestamp": null},
        "conditions": [healthy],
    });
    if !item {
        object = json!({
            "kind": KIND,
            "apiVersion": "v1",
            "metadata": object["metadata"].take(),
            "conditions": object["conditions"].take(),
        });
    }
    object
}

/// The health of the store behind the server, as `etcd-N` reports it: `Ok(())` when it
/// answered, or its error.
pub type StoreHealth = Result<(), String>;

/// The names of the components served, in the order listed: the probed ones, then one
/// `etcd-N` per store (`stores` of them: 1 with a store, 0 in caching-proxy mode).
#[must_use]
pub fn names(stores: usize) -> Vec<String> {
    PROBED
        .iter()
        .map(|(name, _)| (*name).to_owned())
        .chain((0..stores).map(|i| format!("etcd-{i}")))
        .collect()
}

/// The `ComponentStatus` of `name` (one of [`names`]), `None` for another name. `store` is
/// the store's health (used for `etcd-N`).
#[must_use]
pub fn component(name: &str, store: Option<&StoreHealth>, item: bool) -> Option<Value> {
    if let Some((_, port)) = PROBED.iter().find(|(n, _)| *n == name) {
        // Go's net/http error for a refused connection, which kube-apiserver's prober reports
        // as the failure's message.
        let message = format!(
            "Get \"https://127.0.0.1:{port}/healthz\": dial tcp 127.0.0.1:{port}: connect: connection refused"
        );
        return Some(status(name, "False", &message, "", item));
    }
    let store = store?;
    if name != "etcd-0" {
        return None;
    }
    Some(etcd(name, store, item))
}

/// An `etcd-N` status from the store's health: kube-apiserver's storage prober answers `ok`
/// on success and the error (with status `False`) otherwise.
fn etcd(name: &str, health: &StoreHealth, item: bool) -> Value {
    match health {
        Ok(()) => status(name, "True", "ok", "", item),
        Err(error) => status(name, "False", "", error, item),
    }
}

/// The `ComponentStatusList` of every component (`metadata` empty: the list has no resource
/// version, as kube-apiserver's has none).
#[must_use]
pub fn list(store: Option<&StoreHealth>) -> Value {
    let stores = usize::from(store.is_some());
    let items: Vec<Value> = names(stores)
        .iter()
        .filter_map(|name| component(name, store, true))
        .collect();
    json!({"kind": "ComponentStatusList", "apiVersion": "v1", "metadata": {}, "items": items})
}

/// The `Status`, `Message` and `Error` cells of a `ComponentStatus` row, as kubectl's printer
/// computes them from its `Healthy` condition (`Unknown` without one).
#[must_use]
pub fn table_cells(object: &Value) -> (String, String, String) {
    let healthy = object
        .get("conditions")
        .and_then(Value::as_array)
        .and_then(|conditions| conditions.iter().find(|c| c["type"] == "Healthy"));
    match healthy {
        None => ("Unknown".to_owned(), String::new(), String::new()),
        Some(condition) => {
            let text = |key: &str| condition[key].as_str().unwrap_or_default().to_owned();
            let status = if condition["status"] == "True" {
                "Healthy"
            } else {
                "Unhealthy"
            };
            (status.to_owned(), text("message"), text("error"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn components_are_kube_apiservers_with_honest_conditions() {
        let healthy: StoreHealth = Ok(());
        let list = list(Some(&healthy));
        let names: Vec<&str> = list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["scheduler", "controller-manager", "etcd-0"]);
        assert!(list["items"][0].get("kind").is_none());
        let scheduler = component("scheduler", Some(&healthy), false).unwrap();
        assert_eq!(scheduler["kind"], "ComponentStatus");
        assert_eq!(scheduler["apiVersion"], "v1");
        assert_eq!(scheduler["conditions"][0]["status"], "False");
        assert_eq!(
            scheduler["conditions"][0]["message"],
            "Get \"https://127.0.0.1:10259/healthz\": dial tcp 127.0.0.1:10259: connect: connection refused"
        );
        assert!(scheduler["conditions"][0].get("error").is_none());
        let etcd = component("etcd-0", Some(&healthy), false).unwrap();
        assert_eq!(
            etcd["conditions"][0],
            json!({"type": "Healthy", "status": "True", "message": "ok"})
        );
        let broken: StoreHealth = Err("context deadline exceeded".to_owned());
        let etcd = component("etcd-0", Some(&broken), false).unwrap();
        assert_eq!(
            etcd["conditions"][0],
            json!({"type": "Healthy", "status": "False", "error": "context deadline exceeded"})
        );
        assert!(component("etcd-1", Some(&healthy), false).is_none());
        assert!(component("kubelet", Some(&healthy), false).is_none());
        // Without a store (caching-proxy mode) there is no etcd-N.
        assert!(component("etcd-0", None, false).is_none());
        assert_eq!(list_len(None), 2);
    }

    fn list_len(store: Option<&StoreHealth>) -> usize {
        list(store)["items"].as_array().unwrap().len()
    }

    #[test]
    fn table_cells_follow_kubectls_printer() {
        let healthy: StoreHealth = Ok(());
        let etcd = component("etcd-0", Some(&healthy), true).unwrap();
        assert_eq!(
            table_cells(&etcd),
            ("Healthy".to_owned(), "ok".to_owned(), String::new())
        );
        let broken: StoreHealth = Err("down".to_owned());
        let etcd = component("etcd-0", Some(&broken), true).unwrap();
        assert_eq!(
            table_cells(&etcd),
            ("Unhealthy".to_owned(), String::new(), "down".to_owned())
        );
        assert_eq!(
            table_cells(&json!({"metadata": {"name": "x"}})),
            ("Unknown".to_owned(), String::new(), String::new())
        );
    }
}

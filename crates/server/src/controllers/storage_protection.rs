//! kube-controller-manager's `pvc-protection` and `pv-protection` controllers
//! (`pkg/controller/volume/pvcprotection`, `pvprotection`) for a server over a store, the
//! other half of the `StorageObjectInUseProtection` admission plugin (which gives every
//! created claim the finalizer `kubernetes.io/pvc-protection` and every created volume
//! `kubernetes.io/pv-protection`: `crate::source::plugin_admission`). Runs when the plugin
//! runs.
//!
//! ## Guarantees
//! - A PersistentVolumeClaim being deleted loses its finalizer once no pod uses it: a
//!   scheduled pod (`spec.nodeName` set) of its namespace with a `persistentVolumeClaim`
//!   volume naming it, or a pod not shut down (phase neither `Succeeded` nor `Failed`) whose
//!   `ephemeral` volume's claim (`<pod>-<volume>`) it is (kube's `podUsesPVC`). Until then it
//!   stays, marked, as in kube.
//! - A PersistentVolume being deleted loses its finalizer once its `status.phase` is not
//!   `Bound` (kube's `isBeingUsed`).
//! - The finalizer is removed through the ordinary write path as
//!   `system:serviceaccount:kube-system:pvc-protection-controller` (or
//!   `pv-protection-controller`), with the resource version read as precondition; nothing else
//!   of the object changes. A claim is looked at again when it changes and whenever a pod of its
//!   namespace changes or goes; a failed look is retried with [`super::Retries`]'s back-off.
//!
//! ## Bounds
//! It holds the names of the claims and volumes being deleted with their finalizer.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use watchkeeper_api::{ApiError, ResourceDef};
use watchkeeper_core::{Change, Object, Revision};

use super::Retries;
use crate::source::feed::Observer;
pub use crate::source::plugin_admission::{PV_FINALIZER, PVC_FINALIZER};
use crate::source::store::Collect;

/// The first retry delay of a failed look (kube's default controller rate limiter's).
pub const RETRY_BASE: Duration = Duration::from_millis(5);

/// The longest retry delay.
pub const RETRY_MAX: Duration = Duration::from_secs(1000);

/// A queued claim's key starts with this (then `<namespace>/<name>`); a volume's with
/// [`VOLUME`] (then its name).
const CLAIM: &str = "claim:";
const VOLUME: &str = "volume:";

#[derive(Debug, Default)]
struct State {
    /// Claims being deleted with the finalizer (`<namespace>/<name>`).
    claims: BTreeSet<String>,
    /// Keys to look at.
    queued: BTreeSet<String>,
    /// The newest revision told.
    revision: Revision,
}

impl super::Queued for State {
    fn queued(&mut self) -> (&mut BTreeSet<String>, Revision) {
        (&mut self.queued, self.revision)
    }
}

/// The controllers (see the module docs).
#[derive(Debug, Default)]
pub struct StorageProtection {
    queue: super::NameQueue<State>,
}

fn core(def: &ResourceDef, plural: &str) -> bool {
    def.group.is_empty() && def.plural == plural
}

/// Whether `object` is being deleted and still holds `finalizer`.
fn held(object: &Value, finalizer: &str) -> bool {
    object.pointer("/metadata/deletionTimestamp").is_some()
        && finalizers(object).contains(&finalizer)
}

fn finalizers(object: &Value) -> Vec<&str> {
    object
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

/// Whether `pod` uses the claim `claim` (kube's `podUsesPVC`).
fn uses(pod: &Value, claim: &str) -> bool {
    let text = |pointer: &str| {
        pod.pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    if text("/spec/nodeName").is_empty() {
        return false;
    }
    let shut_down = matches!(text("/status/phase"), "Succeeded" | "Failed");
    let pod_name = text("/metadata/name");
    pod.pointer("/spec/volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|volume| {
            let named = volume
                .pointer("/persistentVolumeClaim/claimName")
                .and_then(Value::as_str)
                == Some(claim);
            let ephemeral = volume.get("ephemeral").is_some()
                && !shut_down
                && format!(
                    "{pod_name}-{}",
                    volume
                        .get("name")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                ) == claim;
            named || ephemeral
        })
}

impl StorageProtection {
    /// Controllers that know of no claim or volume yet.
    #[must_use]
    pub fn new() -> Arc<StorageProtection> {
        Arc::new(StorageProtection::default())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.queue.lock()
    }

    /// Notes `object` of `def` (a claim, volume or pod), queueing what it may release.
    fn saw(state: &mut State, def: &ResourceDef, key: &str, object: Option<&Object>) {
        if core(def, "persistentvolumeclaims") {
            match object.filter(|o| held(o.body(), PVC_FINALIZER)) {
                Some(_) => {
                    state.claims.insert(key.to_owned());
                    state.queued.insert(format!("{CLAIM}{key}"));
                }
                None => {
                    state.claims.remove(key);
                }
            }
        } else if core(def, "persistentvolumes") {
            if object.is_some_and(|o| held(o.body(), PV_FINALIZER)) {
                state.queued.insert(format!("{VOLUME}{key}"));
            }
        } else if core(def, "pods") {
            let namespace = key.split_once('/').map_or("", |(ns, _)| ns);
            let prefix = format!("{namespace}/");
            let waiting: Vec<String> = state
                .claims
                .range(prefix.clone()..)
                .take_while(|claim| claim.starts_with(&prefix))
                .map(|claim| format!("{CLAIM}{claim}"))
                .collect();
            state.queued.extend(waiting);
        }
    }

    /// Runs the controllers with `context` until `shutdown` turns true.
    pub async fn run(
        self: Arc<Self>,
        context: super::Context,
        shutdown: tokio::sync::watch::Receiver<bool>,
    ) {
        self.queue
            .run(
                Retries::new(RETRY_BASE, RETRY_MAX),
                |key, revision| {
                    let context = &context;
                    async move { look(context, &key, revision).await }
                },
                "storage object in-use protection",
                shutdown,
            )
            .await;
    }
}

/// Removes the finalizer of the claim or volume `key` when nothing uses it any more.
async fn look(context: &super::Context, key: &str, revision: Revision) -> Result<(), ApiError> {
    let served = context.registry.load();
    let find = |plural: &str| served.iter().find(|r| core(&r.def, plural)).cloned();
    let (resource, namespace, name, finalizer, controller) =
        if let Some(claim) = key.strip_prefix(CLAIM) {
            let (namespace, name) = claim.split_once('/').unwrap_or(("", claim));
            let Some(claims) = find("persistentvolumeclaims") else {
                return Ok(());
            };
            (
                claims,
                namespace,
                name,
                PVC_FINALIZER,
                "pvc-protection-controller",
            )
        } else {
            let name = key.strip_prefix(VOLUME).unwrap_or(key);
            let Some(volumes) = find("persistentvolumes") else {
                return Ok(());
            };
            (volumes, "", name, PV_FINALIZER, "pv-protection-controller")
        };
    context.fresh.wait(resource.cache(), revision).await?;
    let cache_key = if namespace.is_empty() {
        name.to_owned()
    } else {
        format!("{namespace}/{name}")
    };
    let Some(object) = resource.cache().get(&cache_key).0 else {
        return Ok(());
    };
    let body = object.body();
    if !held(body, finalizer) {
        return Ok(());
    }
    let in_use = if finalizer == PVC_FINALIZER {
        let Some(pods) = find("pods") else {
            return Ok(());
        };
        context.fresh.wait(pods.cache(), revision).await?;
        let prefix = format!("{namespace}/");
        pods.cache()
            .latest()
            .range(Some(&prefix), None)
            .take_while(|pod| pod.key().starts_with(&prefix))
            .any(|pod| uses(pod.body(), name))
    } else {
        body.pointer("/status/phase").and_then(Value::as_str) == Some("Bound")
    };
    if in_use {
        return Ok(());
    }
    let kept: Vec<&str> = finalizers(body)
        .into_iter()
        .filter(|f| *f != finalizer)
        .collect();
    let patch = json!({"metadata": {
        "resourceVersion": object.resource_version().to_string(),
        "finalizers": kept,
    }});
    match context
        .source
        .collect(
            &context.fresh,
            &served,
            &resource,
            controller,
            (namespace, name),
            Collect::Patch(patch),
        )
        .await
    {
        // Gone, or changed since: told again.
        Err(error) if error.code == 404 || error.code == 409 => Ok(()),
        other => other,
    }
}

impl Observer for StorageProtection {
    fn reset(&self, def: &ResourceDef, revision: Revision, objects: &[Arc<Object>]) {
        let watched = ["persistentvolumeclaims", "persistentvolumes", "pods"];
        if !watched.iter().any(|plural| core(def, plural)) {
            return;
        }
        let mut state = self.lock();
        state.revision = state.revision.max(revision);
        if core(def, "persistentvolumeclaims") {
            state.claims.clear();
        }
        for object in objects {
            Self::saw(&mut state, def, object.key(), Some(object));
        }
        self.queue.release(state);
    }

    fn changes(&self, def: &ResourceDef, revision: Revision, changes: &[Change]) {
        let watched = ["persistentvolumeclaims", "persistentvolumes", "pods"];
        if changes.is_empty() || !watched.iter().any(|plural| core(def, plural)) {
            return;
        }
        let mut state = self.lock();
        state.revision = state.revision.max(revision);
        for change in changes {
            Self::saw(&mut state, def, &change.key, change.object.as_deref());
        }
        self.queue.release(state);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_is_used_by_scheduled_pods_that_name_it() {
        let pod = |node: &str, phase: &str, volume: Value| {
            json!({"metadata": {"name": "p"}, "spec": {"nodeName": node, "volumes": [volume]},
                "status": {"phase": phase}})
        };
        let named = json!({"name": "v", "persistentVolumeClaim": {"claimName": "data"}});
        assert!(uses(&pod("n", "Running", named.clone()), "data"));
        assert!(uses(&pod("n", "Succeeded", named.clone()), "data"));
        assert!(!uses(&pod("", "Pending", named.clone()), "data"));
        assert!(!uses(&pod("n", "Running", named), "other"));
        let ephemeral = json!({"name": "scratch", "ephemeral": {}});
        assert!(uses(&pod("n", "Running", ephemeral.clone()), "p-scratch"));
        assert!(!uses(&pod("n", "Failed", ephemeral), "p-scratch"));
    }

    #[test]
    fn only_deleted_objects_with_the_finalizer_are_held() {
        let object = |deleted: bool, finalizers: Value| {
            let mut object = json!({"metadata": {"finalizers": finalizers}});
            if deleted {
                object["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
            }
            object
        };
        assert!(held(&object(true, json!([PVC_FINALIZER])), PVC_FINALIZER));
        assert!(!held(&object(false, json!([PVC_FINALIZER])), PVC_FINALIZER));
        assert!(!held(&object(true, json!(["other"])), PVC_FINALIZER));
    }
}

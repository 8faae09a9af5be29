//! The CRD finalizer: apiextensions-apiserver's `CRDFinalizer`
//! (`pkg/controller/finalizer/crd_finalizer.go`) for a server over a store.
//!
//! ## Guarantees
//! - A CRD's first DELETE only marks it (`deletionTimestamp`, the finalizer
//!   `customresourcecleanup.apiextensions.k8s.io`, the condition `Terminating` True
//!   `InstanceDeletionPending`; see `source::store`). While it is marked its resource stays
//!   served — get, list, watch, update, patch and delete work, creates are refused (405
//!   `create not allowed while custom resource definition is terminating`).
//! - This controller then sets `Terminating` True `InstanceDeletionInProgress` (`CustomResource
//!   deletion is in progress`), deletes every object of the CRD's resource through the
//!   ordinary write path (uid precondition, `Background`, as kube's `DeleteCollection` with no
//!   options), so an object with finalizers of its own stays, marked, and keeps the CRD
//!   terminating until a client removes them; once none is left it sets `Terminating` False
//!   `InstanceDeletionCompleted` (`removed all instances`) and then removes its finalizer, after
//!   which the CRD goes (when no other finalizer holds it) and its resource with it. A CRD
//!   that was never established gets `NeverEstablished` (`resource was never established`),
//!   one whose resource is a built-in's (`apiservices.apiregistration.k8s.io`,
//!   `customresourcedefinitions.apiextensions.k8s.io`) `OverlappingBuiltInResource`
//!   (`instances overlap with built-in resources in storage`), and neither deletes objects.
//! - Deterministic: each look decides from the caches at the revision it was told, writes one
//!   change at most to the CRD (with its resource version as precondition) and is looked at
//!   again when that change is told. Unlike kube it does not poll for a minute before
//!   reporting objects that remain: it is looked at again after each change to its objects.
//!
//! ## Bounds
//! It holds the names of the CRDs being deleted (bounded by the CRDs in the store) and of
//! those queued; a failed look is retried after a delay doubling from [`RETRY_BASE`] to
//! [`RETRY_MAX`] ([`super::Retries`], kube's default controller rate limiter's 5 ms to
//! 1,000 s). Deletes are issued one at a time, each object once per look.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use watchkeeper_api::ApiError;
use watchkeeper_api::ResourceDef;
use watchkeeper_api::crd::{self, CLEANUP_FINALIZER};
use watchkeeper_api::gc::{DeletePolicy, Propagation};
use watchkeeper_core::{Change, Object, Revision};

use super::Retries;
use crate::source::feed::Observer;
use crate::source::store::{Collect, overlaps_built_in};

/// How long a CRD whose look failed first waits before it is looked at again; each further
/// failure in a row doubles it, up to [`RETRY_MAX`].
pub const RETRY_BASE: Duration = Duration::from_millis(5);

/// The longest wait between two looks at a CRD that keeps failing.
pub const RETRY_MAX: Duration = Duration::from_secs(1000);

/// Its writes' user (`system:serviceaccount:kube-system:<controller>`).
const CONTROLLER: &str = "crd-finalizer";

/// The `Terminating` condition while objects are deleted.
const IN_PROGRESS: (&str, &str, &str, &str) = (
    "Terminating",
    "True",
    "InstanceDeletionInProgress",
    "CustomResource deletion is in progress",
);

/// The `Terminating` condition once no object is left.
const COMPLETED: (&str, &str, &str, &str) = (
    "Terminating",
    "False",
    "InstanceDeletionCompleted",
    "removed all instances",
);

/// The `Terminating` condition of a CRD that was never established.
const NEVER_ESTABLISHED: (&str, &str, &str, &str) = (
    "Terminating",
    "False",
    "NeverEstablished",
    "resource was never established",
);

/// The `Terminating` condition of a CRD whose objects' keys are a built-in resource's.
const OVERLAPPING: (&str, &str, &str, &str) = (
    "Terminating",
    "False",
    "OverlappingBuiltInResource",
    "instances overlap with built-in resources in storage",
);

#[derive(Debug, Default)]
struct State {
    /// CRDs being deleted that still carry the finalizer: name → (group, plural).
    terminating: BTreeMap<String, (String, String)>,
    /// CRDs to look at.
    queued: BTreeSet<String>,
    /// The newest revision told.
    revision: Revision,
}

impl super::Queued for State {
    fn queued(&mut self) -> (&mut BTreeSet<String>, Revision) {
        (&mut self.queued, self.revision)
    }
}

/// The CRD finalizer (see the module docs).
#[derive(Debug, Default)]
pub struct CrdFinalizer {
    queue: super::NameQueue<State>,
}

/// Whether `crd` is being deleted and still carries the cleanup finalizer.
fn awaits_cleanup(crd: &Value) -> bool {
    crd.pointer("/metadata/deletionTimestamp").is_some()
        && crd
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| f.iter().any(|f| f.as_str() == Some(CLEANUP_FINALIZER)))
}

fn text<'v>(value: &'v Value, path: &str) -> &'v str {
    value.pointer(path).and_then(Value::as_str).unwrap_or("")
}

/// Whether `crd`'s condition `kind` is `(status, reason, message)`.
fn has_condition(crd: &Value, (kind, status, reason, message): (&str, &str, &str, &str)) -> bool {
    crd.pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| {
            text(c, "/type") == kind
                && text(c, "/status") == status
                && text(c, "/reason") == reason
                && text(c, "/message") == message
        })
}

fn established(crd: &Value) -> bool {
    crd.pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| text(c, "/type") == "Established" && text(c, "/status") == "True")
}

impl CrdFinalizer {
    /// A controller that knows of no CRD yet.
    #[must_use]
    pub fn new() -> Arc<CrdFinalizer> {
        Arc::new(CrdFinalizer::default())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.queue.lock()
    }

    fn saw_crd(state: &mut State, object: &Object) {
        let body = object.body();
        if awaits_cleanup(body) {
            let names = (
                text(body, "/spec/group").to_owned(),
                text(body, "/spec/names/plural").to_owned(),
            );
            state.terminating.insert(object.name().to_owned(), names);
            state.queued.insert(object.name().to_owned());
        } else {
            state.terminating.remove(object.name());
        }
    }

    /// Runs the controller with `context` until `shutdown` turns true.
    pub async fn run(
        self: Arc<Self>,
        context: super::Context,
        shutdown: tokio::sync::watch::Receiver<bool>,
    ) {
        self.queue
            .run(
                Retries::new(RETRY_BASE, RETRY_MAX),
                |name, revision| {
                    let (this, context) = (&self, &context);
                    async move { this.look(context, &name, revision).await }
                },
                "CRD cleanup",
                shutdown,
            )
            .await;
    }

    /// Takes the CRD `name` one step towards its deletion (see the module docs).
    async fn look(
        &self,
        context: &super::Context,
        name: &str,
        revision: Revision,
    ) -> Result<(), ApiError> {
        let (source, fresh) = (&context.source, &context.fresh);
        tracing::debug!(crd = %name, %revision, "CRD cleanup look");
        let served = context.registry.load();
        let Some(crds) = served.iter().find(|r| crd::is_crd(&r.def)).cloned() else {
            return Ok(());
        };
        fresh.wait(crds.cache(), revision).await?;
        let Some(object) = crds.cache().get(name).0 else {
            self.lock().terminating.remove(name);
            return Ok(());
        };
        let body = object.body();
        if !awaits_cleanup(body) {
            self.lock().terminating.remove(name);
            return Ok(());
        }
        let version = object.resource_version().to_string();
        let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
        let write = |change: Collect<'static>| {
            let (served, crds) = (&served, &crds);
            async move {
                match source
                    .collect(fresh, served, crds, CONTROLLER, ("", name), change)
                    .await
                {
                    // Gone, or changed since: told again.
                    Err(error) if error.code == 404 || error.code == 409 => {
                        tracing::debug!(crd = %name, %error.message, "CRD write refused; waiting to be told");
                        Ok(())
                    }
                    other => other,
                }
            }
        };
        // The status as it is to be: each write is one step, looked at again once told.
        let status_write = |condition: (&str, &str, &str, &str)| {
            let mut changed = body.clone();
            crd::set_condition(&mut changed, condition, &now);
            Collect::PatchStatus(json!({
                "metadata": {"resourceVersion": version},
                "status": {"conditions": changed.pointer("/status/conditions").cloned().unwrap_or(json!([]))},
            }))
        };
        let (group, plural) = (text(body, "/spec/group"), text(body, "/spec/names/plural"));
        let done = if overlaps_built_in(group, plural) {
            OVERLAPPING
        } else if !established(body) {
            NEVER_ESTABLISHED
        } else {
            if !has_condition(body, IN_PROGRESS) && !has_condition(body, COMPLETED) {
                return write(status_write(IN_PROGRESS)).await;
            }
            // The storage version's resource (other versions share its keys).
            let resource = served
                .iter()
                .find(|r| r.def.group == group && r.def.plural == plural && r.conversion.is_none())
                .cloned();
            let mut remaining = 0usize;
            if let Some(resource) = resource {
                fresh.wait(resource.cache(), revision).await?;
                let objects: Vec<Arc<Object>> = resource
                    .cache()
                    .latest()
                    .range(None, None)
                    .cloned()
                    .collect();
                remaining = objects.len();
                for object in objects {
                    let body = object.body();
                    if body.pointer("/metadata/deletionTimestamp").is_some() {
                        continue;
                    }
                    let uid = text(body, "/metadata/uid");
                    let policy = DeletePolicy::propagating(Propagation::Background);
                    match source
                        .collect(
                            fresh,
                            &served,
                            &resource,
                            CONTROLLER,
                            (object.namespace(), object.name()),
                            Collect::Delete { uid, policy },
                        )
                        .await
                    {
                        Ok(()) => {}
                        Err(error) if error.code == 404 || error.code == 409 => {}
                        Err(error) => return Err(error),
                    }
                }
            }
            if remaining > 0 {
                // Looked at again after each change to its objects.
                if !has_condition(body, IN_PROGRESS) {
                    return write(status_write(IN_PROGRESS)).await;
                }
                return Ok(());
            }
            COMPLETED
        };
        if !has_condition(body, done) {
            return write(status_write(done)).await;
        }
        let kept: Vec<&Value> = body
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|f| f.as_str() != Some(CLEANUP_FINALIZER))
            .collect();
        write(Collect::Patch(json!({
            "metadata": {"resourceVersion": version, "finalizers": kept},
        })))
        .await
    }
}

impl Observer for CrdFinalizer {
    fn reset(&self, def: &ResourceDef, revision: Revision, objects: &[Arc<Object>]) {
        let mut state = self.lock();
        state.revision = state.revision.max(revision);
        if crd::is_crd(def) {
            for object in objects {
                Self::saw_crd(&mut state, object);
            }
        }
        // Anything may have gone in the gap: look at every CRD being deleted again.
        let terminating: Vec<String> = state.terminating.keys().cloned().collect();
        state.queued.extend(terminating);
        self.queue.release(state);
    }

    fn changes(&self, def: &ResourceDef, revision: Revision, changes: &[Change]) {
        let mut state = self.lock();
        state.revision = state.revision.max(revision);
        if crd::is_crd(def) {
            for change in changes {
                match &change.object {
                    Some(object) => Self::saw_crd(&mut state, object),
                    None => {
                        state.terminating.remove(&*change.key);
                    }
                }
            }
        } else if !changes.is_empty() {
            // A change to the objects of a CRD being deleted: looked at again.
            let owners: Vec<String> = state
                .terminating
                .iter()
                .filter(|(_, (group, plural))| *group == def.group && *plural == def.plural)
                .map(|(name, _)| name.clone())
                .collect();
            state.queued.extend(owners);
        }
        self.queue.release(state);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd_body(finalizers: &[&str], deleting: bool) -> Value {
        let mut crd = json!({"metadata": {"name": "widgets.example.com", "finalizers": finalizers},
            "spec": {"group": "example.com", "names": {"plural": "widgets"}}});
        if deleting {
            crd["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        }
        crd
    }

    #[test]
    fn only_a_deleted_crd_with_the_finalizer_awaits_cleanup() {
        assert!(awaits_cleanup(&crd_body(&[CLEANUP_FINALIZER], true)));
        assert!(!awaits_cleanup(&crd_body(&[CLEANUP_FINALIZER], false)));
        assert!(!awaits_cleanup(&crd_body(&["example.com/hold"], true)));
    }

    #[test]
    fn conditions_are_matched_on_every_part() {
        let mut crd = crd_body(&[], true);
        assert!(!has_condition(&crd, IN_PROGRESS));
        crd::set_condition(&mut crd, IN_PROGRESS, "t1");
        assert!(has_condition(&crd, IN_PROGRESS));
        assert!(!has_condition(&crd, COMPLETED));
        // The same type moved to another status: one condition, its transition time moved.
        assert!(crd::set_condition(&mut crd, COMPLETED, "t2"));
        assert!(has_condition(&crd, COMPLETED) && !has_condition(&crd, IN_PROGRESS));
        let conditions = crd["status"]["conditions"].as_array().map_or(0, Vec::len);
        assert_eq!(conditions, 1);
        assert_eq!(crd["status"]["conditions"][0]["lastTransitionTime"], "t2");
        assert!(
            !crd::set_condition(&mut crd, COMPLETED, "t3"),
            "no change, no write"
        );
    }
}

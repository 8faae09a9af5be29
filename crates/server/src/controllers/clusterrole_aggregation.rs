//! The ClusterRole aggregation controller: kube-controller-manager's
//! `clusterrole-aggregation` (`pkg/controller/clusterroleaggregation`) for a server over a
//! store with RBAC in `--authorization-mode`.
//!
//! ## Guarantees
//! - A ClusterRole with an `aggregationRule` gets as its rules those of the other ClusterRoles
//!   its `clusterRoleSelectors` match (a `metav1.LabelSelector` each; selectors in order,
//!   matching roles by name, each distinct rule once, as kube's `syncClusterRole`), written
//!   through the ordinary write path as the service account
//!   `system:serviceaccount:kube-system:clusterrole-aggregation-controller` (bound by the
//!   bootstrap policy to `escalate` on ClusterRoles, as in kube), with the resource version
//!   read as precondition. Nothing is written when the rules are already those.
//! - Any ClusterRole change looks at every aggregating ClusterRole again (kube enqueues them
//!   all on every change), after the cache has the change; a failed look is retried with
//!   [`super::Retries`]'s back-off, a conflict waits for the change that caused it.
//!
//! ## Bounds
//! It holds the names of the aggregating ClusterRoles and of those queued.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use watchkeeper_api::{ApiError, ResourceDef};
use watchkeeper_core::{Change, Object, Revision};

use super::Retries;
use crate::auth::rbac::{GROUP, aggregated_rules, rules_of};
use crate::source::feed::Observer;
use crate::source::store::Collect;

/// The first retry delay of a failed look (kube's default controller rate limiter's).
pub const RETRY_BASE: Duration = Duration::from_millis(5);

/// The longest retry delay.
pub const RETRY_MAX: Duration = Duration::from_secs(1000);

/// Its writes' user (`system:serviceaccount:kube-system:<controller>`).
pub const CONTROLLER: &str = "clusterrole-aggregation-controller";

#[derive(Debug, Default)]
struct State {
    /// The ClusterRoles with an aggregation rule.
    aggregating: BTreeSet<String>,
    /// Those to look at.
    queued: BTreeSet<String>,
    /// The newest revision told.
    revision: Revision,
}

impl super::Queued for State {
    fn queued(&mut self) -> (&mut BTreeSet<String>, Revision) {
        (&mut self.queued, self.revision)
    }
}

/// The controller (see the module docs).
#[derive(Debug, Default)]
pub struct ClusterRoleAggregation {
    queue: super::NameQueue<State>,
}

fn is_cluster_roles(def: &ResourceDef) -> bool {
    def.group == GROUP && def.plural == "clusterroles"
}

fn aggregates(role: &Value) -> bool {
    role.get("aggregationRule").is_some_and(|r| !r.is_null())
}

impl ClusterRoleAggregation {
    /// A controller that knows of no ClusterRole yet.
    #[must_use]
    pub fn new() -> Arc<ClusterRoleAggregation> {
        Arc::new(ClusterRoleAggregation::default())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.queue.lock()
    }

    fn saw(state: &mut State, object: &Object) {
        if aggregates(object.body()) {
            state.aggregating.insert(object.name().to_owned());
        } else {
            state.aggregating.remove(object.name());
        }
    }

    /// Queues every aggregating ClusterRole and wakes the task.
    fn queue_all(&self, mut state: std::sync::MutexGuard<'_, State>) {
        let all: Vec<String> = state.aggregating.iter().cloned().collect();
        state.queued.extend(all);
        self.queue.release(state);
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
                "ClusterRole aggregation",
                shutdown,
            )
            .await;
    }

    /// Writes the aggregated rules of the ClusterRole `name` when they differ.
    async fn look(
        &self,
        context: &super::Context,
        name: &str,
        revision: Revision,
    ) -> Result<(), ApiError> {
        let served = context.registry.load();
        let Some(roles) = served.iter().find(|r| is_cluster_roles(&r.def)).cloned() else {
            return Ok(());
        };
        context.fresh.wait(roles.cache(), revision).await?;
        let Some(object) = roles.cache().get(name).0 else {
            return Ok(());
        };
        let role = object.body();
        if !aggregates(role) {
            return Ok(());
        }
        let all = crate::source::policy_admission::cached_objects(Some(&roles), None);
        let rules = aggregated_rules(role, &all);
        if rules_of(role) == rules {
            return Ok(());
        }
        let patch = json!({
            "metadata": {"resourceVersion": object.resource_version().to_string()},
            "rules": rules,
        });
        match context
            .source
            .collect(
                &context.fresh,
                &served,
                &roles,
                CONTROLLER,
                ("", name),
                Collect::Patch(patch),
            )
            .await
        {
            // Gone, or changed since: told again.
            Err(error) if error.code == 404 || error.code == 409 => Ok(()),
            other => other,
        }
    }
}

impl Observer for ClusterRoleAggregation {
    fn reset(&self, def: &ResourceDef, revision: Revision, objects: &[Arc<Object>]) {
        if !is_cluster_roles(def) {
            return;
        }
        let mut state = self.lock();
        state.revision = state.revision.max(revision);
        state.aggregating.clear();
        for object in objects {
            Self::saw(&mut state, object);
        }
        self.queue_all(state);
    }

    fn changes(&self, def: &ResourceDef, revision: Revision, changes: &[Change]) {
        if !is_cluster_roles(def) || changes.is_empty() {
            return;
        }
        let mut state = self.lock();
        state.revision = state.revision.max(revision);
        for change in changes {
            match &change.object {
                Some(object) => Self::saw(&mut state, object),
                None => {
                    state.aggregating.remove(&*change.key);
                }
            }
        }
        self.queue_all(state);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aggregates_the_matching_roles_in_name_order_each_rule_once() {
        let rule = |verb: &str| json!({"verbs": [verb], "apiGroups": [""], "resources": ["pods"]});
        let role = |name: &str, labels: Value, rules: Value| json!({"metadata": {"name": name, "labels": labels}, "rules": rules});
        let view = json!({
            "metadata": {"name": "view"},
            "aggregationRule": {"clusterRoleSelectors": [
                {"matchLabels": {"to-view": "true"}},
                {"matchExpressions": [{"key": "extra", "operator": "Exists"}]},
            ]},
            "rules": [rule("stale")],
        });
        let roles = vec![
            role(
                "b",
                json!({"to-view": "true"}),
                json!([rule("list"), rule("get")]),
            ),
            role("a", json!({"to-view": "true"}), json!([rule("get")])),
            role("c", json!({"to-view": "false"}), json!([rule("delete")])),
            role("d", json!({"extra": ""}), json!([rule("watch")])),
            view.clone(),
        ];
        let verbs: Vec<String> = aggregated_rules(&view, &roles)
            .into_iter()
            .map(|r| r.verbs[0].clone())
            .collect();
        assert_eq!(verbs, ["get", "list", "watch"]);
        // A role whose selectors match nothing aggregates no rule (its own never count).
        let lonely = json!({"metadata": {"name": "view", "labels": {"to-view": "true"}},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"none": "x"}}]}});
        assert!(aggregated_rules(&lonely, std::slice::from_ref(&lonely)).is_empty());
    }
}

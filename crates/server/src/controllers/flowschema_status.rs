//! The `Dangling` condition of FlowSchemas, as kube-apiserver's API Priority and Fairness
//! config controller writes it (`util/flowcontrol/apf_controller.go`,
//! `presyncFlowSchemaStatus`), for a server over a store.
//!
//! ## Guarantees
//! - Every FlowSchema gets the condition `Dangling`: `True`, reason `NotFound`, `This
//!   FlowSchema references the PriorityLevelConfiguration object named "x" but there is no
//!   such object` when its level is not cached; else `False`, reason `Found`, `... named "x"
//!   and it exists` (kube's words), with `lastTransitionTime` the time of the write. Written
//!   through the ordinary write path as a JSON merge patch of the `status` subresource, with
//!   the resource version read as precondition, by the field manager
//!   `watchkeeper-api-priority-and-fairness-config-consumer-v1`; nothing is written when the
//!   status, reason and message are already those (its other conditions are kept).
//! - A FlowSchema is looked at when it changes, every FlowSchema when a
//!   PriorityLevelConfiguration is created or deleted, after the cache has the change; a
//!   failed look is retried with [`super::Retries`]'s back-off, a conflict waits for the change
//!   that caused it.
//!
//! ## Bounds
//! It holds the names of the FlowSchemas (the store's quota bounds them) and of those queued.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use watchkeeper_api::{ApiError, ResourceDef};
use watchkeeper_core::{Change, Object, Revision};

use super::Retries;
use crate::limits::apf::kind_of;
use crate::source::feed::Observer;
use crate::source::store::Collect;

/// The first retry delay of a failed look.
pub const RETRY_BASE: Duration = Duration::from_millis(5);

/// The longest retry delay.
pub const RETRY_MAX: Duration = Duration::from_secs(1000);

/// Its writes' name (kube's field manager, prefixed by the write path).
pub const CONTROLLER: &str = "api-priority-and-fairness-config-consumer-v1";

#[derive(Debug, Default)]
struct State {
    /// Every FlowSchema's level, by FlowSchema name.
    schemas: BTreeMap<String, String>,
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
pub struct FlowSchemaStatus {
    queue: super::NameQueue<State>,
}

fn level_of(object: &Object) -> String {
    object
        .body()
        .pointer("/spec/priorityLevelConfiguration/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// The `Dangling` condition's status, reason and message for a schema naming `level`.
#[must_use]
pub fn dangling(level: &str, exists: bool) -> (&'static str, &'static str, String) {
    let quoted = watchkeeper_core::gotext::go_quote(level);
    if exists {
        (
            "False",
            "Found",
            format!(
                "This FlowSchema references the PriorityLevelConfiguration object named {quoted} and it exists"
            ),
        )
    } else {
        (
            "True",
            "NotFound",
            format!(
                "This FlowSchema references the PriorityLevelConfiguration object named {quoted} but there is no such object"
            ),
        )
    }
}

impl FlowSchemaStatus {
    /// A controller that knows of no FlowSchema yet.
    #[must_use]
    pub fn new() -> Arc<FlowSchemaStatus> {
        Arc::new(FlowSchemaStatus::default())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.queue.lock()
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
                    let context = &context;
                    async move { Self::look(context, &name, revision).await }
                },
                "FlowSchema status",
                shutdown,
            )
            .await;
    }

    /// Writes the `Dangling` condition of the FlowSchema `name` when it differs.
    async fn look(
        context: &super::Context,
        name: &str,
        revision: Revision,
    ) -> Result<(), ApiError> {
        let served = context.registry.load();
        let find = |schemas: bool| {
            served
                .iter()
                .find(|r| kind_of(&r.def) == Some(schemas))
                .cloned()
        };
        let (Some(schemas), Some(levels)) = (find(true), find(false)) else {
            return Ok(());
        };
        context.fresh.wait(schemas.cache(), revision).await?;
        context.fresh.wait(levels.cache(), revision).await?;
        let Some(object) = schemas.cache().get(name).0 else {
            return Ok(());
        };
        let level = level_of(&object);
        let exists = levels.cache().get(&level).0.is_some();
        let (status, reason, message) = dangling(&level, exists);
        let conditions = object
            .body()
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let current = conditions.iter().find(|c| c["type"] == "Dangling");
        if current.is_some_and(|c| {
            c["status"] == status && c["reason"] == reason && c["message"] == message.as_str()
        }) {
            return Ok(());
        }
        let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
        let condition = json!({"type": "Dangling", "status": status, "lastTransitionTime": now,
            "reason": reason, "message": message});
        let mut conditions: Vec<Value> = conditions
            .into_iter()
            .filter(|c| c["type"] != "Dangling")
            .collect();
        conditions.push(condition);
        let patch = json!({
            "metadata": {"resourceVersion": object.resource_version().to_string()},
            "status": {"conditions": conditions},
        });
        match context
            .source
            .collect(
                &context.fresh,
                &served,
                &schemas,
                CONTROLLER,
                ("", name),
                Collect::PatchStatus(patch),
            )
            .await
        {
            // Gone, or changed since: told again.
            Err(error) if error.code == 404 || error.code == 409 => Ok(()),
            other => other,
        }
    }
}

impl Observer for FlowSchemaStatus {
    fn reset(&self, def: &ResourceDef, revision: Revision, objects: &[Arc<Object>]) {
        let Some(schemas) = kind_of(def) else {
            return;
        };
        let mut state = self.lock();
        state.revision = state.revision.max(revision);
        if schemas {
            state.schemas = objects
                .iter()
                .map(|o| (o.name().to_owned(), level_of(o)))
                .collect();
        }
        let all: Vec<String> = state.schemas.keys().cloned().collect();
        state.queued.extend(all);
        self.queue.release(state);
    }

    fn changes(&self, def: &ResourceDef, revision: Revision, changes: &[Change]) {
        let Some(schemas) = kind_of(def) else {
            return;
        };
        let mut state = self.lock();
        state.revision = state.revision.max(revision);
        if schemas {
            for change in changes {
                let name = change.key.to_string();
                match &change.object {
                    Some(object) => {
                        state.schemas.insert(name.clone(), level_of(object));
                        state.queued.insert(name);
                    }
                    None => {
                        state.schemas.remove(&name);
                    }
                }
            }
        } else {
            // A level created or deleted: the schemas naming it change their condition (an
            // update of a level changes none).
            let names: BTreeSet<&str> = changes.iter().map(|c| &*c.key).collect();
            let affected: Vec<String> = state
                .schemas
                .iter()
                .filter(|(_, level)| names.contains(level.as_str()))
                .map(|(schema, _)| schema.clone())
                .collect();
            state.queued.extend(affected);
        }
        self.queue.release(state);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_condition_is_kubes() {
        assert_eq!(
            dangling("workload", true),
            (
                "False",
                "Found",
                "This FlowSchema references the PriorityLevelConfiguration object named \"workload\" and it exists".to_owned()
            )
        );
        assert_eq!(
            dangling("gone", false),
            (
                "True",
                "NotFound",
                "This FlowSchema references the PriorityLevelConfiguration object named \"gone\" but there is no such object".to_owned()
            )
        );
    }
}

//! The open watches by what they watch, for the work estimate of a write (kube's
//! `watchTracker` in `util/flowcontrol/watch_tracker.go`): a create, update, patch or delete
//! holds extra seats for the fan-out to the watches interested in its object, counted as
//! kube's `GetInterestedWatchCount` counts them: the watches of the whole resource, of the
//! object's namespace, and of the object by name (`fieldSelector=metadata.name=...`).
//!
//! ## Guarantees
//! - A watch is counted from when the limits layer admitted it (its seat granted, before
//!   authorization, as kube's filter registers it) until its response ends ([`Tracked`]
//!   dropped with the watch's slot); a watch refused later (403, or by its handler) is
//!   forgotten with its answer.
//! - A write reads three counters under one lock, without allocating; registering and
//!   forgetting a watch allocate its keys. Nothing here is on the core's path: the core does
//!   not know of it.
//!
//! ## Bounds
//! One entry per distinct (API group, resource, namespace, name) of the open watches,
//! removed with its last watch: at most the open watches, which `--max-watches` bounds.
//!
//! ## Differences from kube
//! kube counts a watch's namespace and name as its RequestInfo parsed them; so does this
//! (the name only from an exact `metadata.name` field requirement that is a valid path
//! segment, as kube's `NewRequestInfo`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use super::rules::{RequestInfo, selected_name};

/// The open watches of one resource.
#[derive(Debug, Default)]
struct Resource {
    /// Watches of every object.
    all: usize,
    /// Watches of one namespace (or, under `""`, of cluster-scoped objects by name).
    namespaces: HashMap<String, Scope>,
}

/// The open watches of one namespace.
#[derive(Debug, Default)]
struct Scope {
    /// Watches of the whole namespace.
    all: usize,
    /// Watches of one object, by name.
    names: HashMap<String, usize>,
}

/// What a watch watches.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Key {
    group: String,
    resource: String,
    namespace: String,
    name: String,
}

/// The open watches by API group and resource.
#[derive(Debug, Default)]
pub struct WatchTracker {
    groups: Mutex<HashMap<String, HashMap<String, Resource>>>,
}

/// A watch counted in its [`WatchTracker`] until dropped.
#[derive(Debug)]
pub struct Tracked {
    tracker: Arc<WatchTracker>,
    key: Key,
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.tracker.forget(&self.key);
    }
}

impl WatchTracker {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, HashMap<String, Resource>>> {
        self.groups.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts the watch `info` (with `query`) until the returned guard is dropped; `None` for
    /// a request that is not a resource's watch.
    #[must_use]
    pub fn track(self: &Arc<Self>, info: &RequestInfo<'_>, query: Option<&str>) -> Option<Tracked> {
        if !info.resource_request || info.verb != "watch" {
            return None;
        }
        let name = if info.name.is_empty() {
            serde_urlencoded::from_str::<Vec<(String, String)>>(query.unwrap_or_default())
                .unwrap_or_default()
                .into_iter()
                .find(|(key, _)| key == "fieldSelector")
                .and_then(|(_, selector)| selected_name(&selector).map(str::to_owned))
                .unwrap_or_default()
        } else {
            info.name.to_owned()
        };
        let key = Key {
            group: info.group.to_owned(),
            resource: info.resource.to_owned(),
            namespace: info.namespace.to_owned(),
            name,
        };
        let mut groups = self.lock();
        let resource = groups
            .entry(key.group.clone())
            .or_default()
            .entry(key.resource.clone())
            .or_default();
        if key.namespace.is_empty() && key.name.is_empty() {
            resource.all += 1;
        } else {
            let scope = resource
                .namespaces
                .entry(key.namespace.clone())
                .or_default();
            if key.name.is_empty() {
                scope.all += 1;
            } else {
                *scope.names.entry(key.name.clone()).or_default() += 1;
            }
        }
        drop(groups);
        Some(Tracked {
            tracker: self.clone(),
            key,
        })
    }

    fn forget(&self, key: &Key) {
        let mut groups = self.lock();
        let Some(resources) = groups.get_mut(&key.group) else {
            return;
        };
        let Some(resource) = resources.get_mut(&key.resource) else {
            return;
        };
        if key.namespace.is_empty() && key.name.is_empty() {
            resource.all = resource.all.saturating_sub(1);
        } else if let Some(scope) = resource.namespaces.get_mut(&key.namespace) {
            if key.name.is_empty() {
                scope.all = scope.all.saturating_sub(1);
            } else if let Some(count) = scope.names.get_mut(&key.name) {
                *count -= 1;
                if *count == 0 {
                    scope.names.remove(&key.name);
                }
            }
            if scope.all == 0 && scope.names.is_empty() {
                resource.namespaces.remove(&key.namespace);
            }
        }
        if resource.all == 0 && resource.namespaces.is_empty() {
            resources.remove(&key.resource);
        }
        if resources.is_empty() {
            groups.remove(&key.group);
        }
    }

    /// The open watches interested in the object of the request `info` (kube's
    /// `GetInterestedWatchCount`): the resource's, its namespace's and its name's.
    #[must_use]
    pub fn interested(&self, info: &RequestInfo<'_>) -> usize {
        let groups = self.lock();
        let Some(resource) = groups
            .get(info.group)
            .and_then(|resources| resources.get(info.resource))
        else {
            return 0;
        };
        let mut count = resource.all;
        if let Some(scope) = resource.namespaces.get(info.namespace) {
            if !info.namespace.is_empty() {
                count += scope.all;
            }
            if !info.name.is_empty() {
                count += scope.names.get(info.name).copied().unwrap_or(0);
            }
        }
        count
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_counts_the_watches_of_its_resource_namespace_and_name() {
        let tracker = Arc::new(WatchTracker::default());
        let watch = |path: &'static str, query: &'static str| {
            let info = RequestInfo::of("GET", path, Some(query));
            tracker.track(&info, Some(query)).expect("a watch")
        };
        let all = watch("/api/v1/configmaps", "watch=true");
        let in_a = watch("/api/v1/namespaces/a/configmaps", "watch=1");
        let _in_b = watch("/api/v1/namespaces/b/configmaps", "watch=1");
        let x_in_a = watch(
            "/api/v1/namespaces/a/configmaps",
            "watch=1&fieldSelector=metadata.name%3Dx",
        );
        let write = |path: &str| tracker.interested(&RequestInfo::of("PUT", path, None));
        assert_eq!(write("/api/v1/namespaces/a/configmaps/x"), 3);
        assert_eq!(write("/api/v1/namespaces/a/configmaps/y"), 2);
        assert_eq!(write("/api/v1/namespaces/c/configmaps/x"), 1);
        assert_eq!(write("/api/v1/namespaces/a/secrets/x"), 0);
        drop((all, in_a, x_in_a));
        assert_eq!(write("/api/v1/namespaces/a/configmaps/x"), 0);
        assert_eq!(write("/api/v1/namespaces/b/configmaps/x"), 1);
        // A list or a write is no watch.
        let info = RequestInfo::of("GET", "/api/v1/configmaps", None);
        assert!(tracker.track(&info, None).is_none());
    }

    #[test]
    fn only_an_exact_valid_name_selects_an_object() {
        assert_eq!(selected_name("metadata.name=x"), Some("x"));
        assert_eq!(selected_name("a=b,metadata.name==x"), Some("x"));
        assert_eq!(selected_name("metadata.name!=x"), None);
        assert_eq!(selected_name("metadata.name=a/b"), None);
        assert_eq!(selected_name("metadata.namespace=x"), None);
    }
}

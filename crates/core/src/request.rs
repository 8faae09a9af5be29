//! Watch requests and the selection a watcher applies: where a watch starts, what it
//! selects (namespace, name, trigger field, label and field selectors), and the one
//! [`Selection`] copy the live path, the catch-up passes and a consumer's refills all select
//! through (KEP-6268 invariant 4).

use std::sync::Arc;

use crate::event::{Event, EventType, SharedEvent, WatchItem};
use crate::object::{Object, Revision};
use crate::selector::{FieldSelector, LabelSelector};
use crate::time::Instant;

/// A watcher's identity, unique within one cache, assigned in registration order.
pub type WatcherId = u64;

/// Where a watch starts. The server maps Kubernetes' `resourceVersion`,
/// `resourceVersionMatch` and `sendInitialEvents` onto these (see docs/ARCHITECTURE.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatchStart {
    /// From the cache's current resource version, with no initial state
    /// (`resourceVersion=0`, `sendInitialEvents=false`).
    Now,
    /// Every event with a resource version above `N` (`resourceVersion=N`). A position below
    /// the history's floor gets an in-stream 410; one above the cache's resource version waits
    /// for the cache rather than fail.
    After(Revision),
    /// The full state at a cache resource version of at least `min_revision` as ADDED events,
    /// then (if bookmarks are allowed) the initial-events-end bookmark, then every later change
    /// (`sendInitialEvents=true`). If the cache does not reach `min_revision` within
    /// `fresh_wait_max`, the watch ends with 504 "Too large resource version".
    InitialState {
        /// The lowest acceptable resource version of the initial state; `None` takes the
        /// cache as it is (`resourceVersion=0`).
        min_revision: Option<Revision>,
    },
}

/// A request to watch one resource of the cache.
#[derive(Clone, Debug)]
pub struct WatchRequest {
    /// Where the watch starts.
    pub start: WatchStart,
    /// The namespace of the request path, if any (narrower than a field selector).
    pub namespace: Option<String>,
    /// The label selector.
    pub labels: LabelSelector,
    /// The field selector. Exact `metadata.name`, `metadata.namespace` and trigger-field
    /// requirements also choose which events visit the watcher at all.
    pub fields: FieldSelector,
    /// Whether the client accepts BOOKMARK events.
    pub allow_bookmarks: bool,
    /// When the watch ends by itself (`timeoutSeconds`); a bookmark is sent shortly before.
    pub deadline: Option<Instant>,
    /// The queue capacity; `None` sizes it like Kubernetes from the history capacity.
    pub queue_capacity: Option<usize>,
}

impl WatchRequest {
    /// A watch of everything, from `start`, with bookmarks and no deadline.
    #[must_use]
    pub fn new(start: WatchStart) -> WatchRequest {
        WatchRequest {
            start,
            namespace: None,
            labels: LabelSelector::everything(),
            fields: FieldSelector::everything(),
            allow_bookmarks: true,
            deadline: None,
            queue_capacity: None,
        }
    }
}

/// How events reach a watcher on the live path.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Route {
    /// By the object's trigger-field value.
    Trigger(Arc<str>),
    /// By the object's namespace and name; `None` matches any.
    Scope(Option<Arc<str>>, Option<Arc<str>>),
}

/// What a watcher selects: a copy taken at registration, shared by the live path and passes so
/// both select exactly the same events (KEP-6268 invariant 4). The live path's
/// [`Selection::event_type_in_scope`] skips only the comparisons its route already made, so it
/// selects what [`Selection::event_type`] selects (debug builds assert it).
#[derive(Debug)]
pub(crate) struct Selection {
    pub(crate) namespace: Option<Arc<str>>,
    pub(crate) name: Option<Arc<str>>,
    trigger: Option<(Arc<str>, Arc<str>)>,
    labels: LabelSelector,
    fields: FieldSelector,
}

impl Selection {
    pub(crate) fn new(request: &WatchRequest, trigger_field: Option<&str>) -> Selection {
        let namespace = request
            .namespace
            .as_deref()
            .or_else(|| request.fields.exact("metadata.namespace"))
            .map(Arc::from);
        let name = request.fields.exact("metadata.name").map(Arc::from);
        let trigger = trigger_field.and_then(|field| {
            request
                .fields
                .exact(field)
                .map(|value| (Arc::from(field), Arc::from(value)))
        });
        Selection {
            namespace,
            name,
            trigger,
            labels: request.labels.clone(),
            fields: request.fields.clone(),
        }
    }

    /// Takes the next whole revision of `events` from `*index` on (events in revision order):
    /// fills `batch` with what this watcher selects of it (empty when nothing), moves `*index`
    /// past it and returns its revision. Passes and consumer refills both serve through it.
    pub(crate) fn select_revision(
        &self,
        events: &[SharedEvent],
        index: &mut usize,
        batch: &mut Vec<WatchItem>,
    ) -> Revision {
        let revision = events[*index].revision();
        batch.clear();
        while let Some(event) = events.get(*index).filter(|e| e.revision() == revision) {
            if let Some(event_type) = self.event_type(event) {
                batch.push(WatchItem::Event {
                    event_type,
                    event: event.clone(),
                });
            }
            *index += 1;
        }
        revision
    }

    pub(crate) fn route(&self) -> Route {
        match &self.trigger {
            Some((_, value)) => Route::Trigger(value.clone()),
            None => Route::Scope(self.namespace.clone(), self.name.clone()),
        }
    }

    /// Whether the object is selected.
    pub(crate) fn matches(&self, object: &Object) -> bool {
        if let Some(namespace) = &self.namespace
            && object.namespace() != &**namespace
        {
            return false;
        }
        if let Some(name) = &self.name
            && object.name() != &**name
        {
            return false;
        }
        if let Some((field, value)) = &self.trigger
            && object.field(field) != &**value
        {
            return false;
        }
        self.matches_in_scope(object)
    }

    /// [`Selection::matches`] without the namespace, name and trigger: for an object already
    /// known to be in this watcher's scope route.
    fn matches_in_scope(&self, object: &Object) -> bool {
        self.labels.matches(object.labels()) && self.fields.matches(object.fields())
    }

    /// The event as this watcher sees it: ADDED when the object enters the selection, DELETED
    /// (carrying the previous object) when it leaves, MODIFIED when it stays; `None` when it is
    /// outside both before and after.
    pub(crate) fn event_type(&self, event: &Event) -> Option<EventType> {
        Self::event_type_with(event, |o| self.matches(o))
    }

    /// [`Selection::event_type`] for a watcher found through the scope route of the event's
    /// own namespace and name ([`Route::Scope`]): a watcher is routed there by its namespace
    /// and name, and an event's object and previous object share one key, so those are not
    /// compared again — per watcher and event, the dispatcher's largest cost after the queue
    /// push (its own copies of the strings, cold in cache; BENCHMARKS.md, invocation AO).
    pub(crate) fn event_type_in_scope(&self, event: &Event) -> Option<EventType> {
        debug_assert!(
            self.trigger.is_none(),
            "a trigger watcher is routed by its value"
        );
        debug_assert!(
            event.object().into_iter().chain(event.prev()).all(|o| self
                .namespace
                .as_deref()
                .is_none_or(|ns| ns == o.namespace())
                && self.name.as_deref().is_none_or(|name| name == o.name())),
            "routed outside its scope"
        );
        Self::event_type_with(event, |o| self.matches_in_scope(o))
    }

    fn event_type_with(event: &Event, matches: impl Fn(&Object) -> bool) -> Option<EventType> {
        let now = event.object().is_some_and(|o| matches(o));
        let before = event.prev().is_some_and(|o| matches(o));
        match (now, before) {
            (true, false) => Some(EventType::Added),
            (true, true) => Some(EventType::Modified),
            (false, true) => Some(EventType::Deleted),
            (false, false) => None,
        }
    }

    /// The key range of the initial state this watcher can select: a single key, a namespace
    /// prefix, or everything.
    pub(crate) fn key_prefix(&self) -> Option<String> {
        self.namespace.as_ref().map(|ns| format!("{ns}/"))
    }
}

//! Events as they flow from the store into the history and out to watchers.
//!
//! An [`Event`] is built once, when its revision enters the cache, and shared by `Arc`
//! ([`SharedEvent`]) between the history, the live path, catch-up passes and every watcher
//! queue. It never changes afterwards. The object it carries caches its own encoding (see
//! [`crate::object`]); the one encoding that belongs to the event itself, the previous object at
//! the deletion's resource version that a DELETED watch event carries, is cached here. So an
//! event is serialized at most once per encoding however many watchers receive it, on the live
//! path, in catch-up passes and in initial replays alike. A conversion the server makes per
//! watcher (a `Table`, which depends on the second it is made in) is shared the same way
//! through [`Event::derived`]: once per event and key, not once per watcher.

use std::sync::{Arc, OnceLock};

use bytes::Bytes;

use crate::metrics::MemoryAccount;
use crate::object::{EncodeStats, Encoding, ExternalEncoder, Object, Revision};

/// What happened to the object, as stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// The key was created.
    Added,
    /// The key was updated.
    Modified,
    /// The key was deleted.
    Deleted,
}

/// The type of a watch event as one watcher sees it, after its selection is applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventType {
    /// The object entered the watcher's selection (or was created inside it).
    Added,
    /// The object changed and stayed inside the selection.
    Modified,
    /// The object left the selection (or was deleted); carries the previous object at the
    /// event's resource version.
    Deleted,
}

impl EventType {
    /// The Kubernetes wire name.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One change to one key at one revision. Several events may share a revision.
#[derive(Debug)]
pub struct Event {
    revision: Revision,
    kind: EventKind,
    object: Option<Arc<Object>>,
    prev: Option<Arc<Object>>,
    deleted_encoded: [OnceLock<Bytes>; Encoding::ALL.len()],
    deleted_external: OnceLock<Option<Bytes>>,
    /// The last [`Event::derived`] conversion made, with its key: of the new object (0) and
    /// of the previous one, as a DELETED carries it (1).
    derived: [std::sync::Mutex<Option<(u64, Bytes)>>; 2],
}

/// An event shared between the history, passes and watcher queues.
pub type SharedEvent = Arc<Event>;

impl Event {
    /// Builds an event. `object` is the new object (`None` for a deletion); `prev` the object
    /// before the change (`None` for a creation).
    ///
    /// # Panics
    /// If neither object is given, or the new object's resource version is not `revision`.
    #[must_use]
    pub fn new(
        revision: Revision,
        object: Option<Arc<Object>>,
        prev: Option<Arc<Object>>,
    ) -> Event {
        let kind = match (&object, &prev) {
            (Some(_), None) => EventKind::Added,
            (Some(_), Some(_)) => EventKind::Modified,
            (None, Some(_)) => EventKind::Deleted,
            (None, None) => panic!("an event needs an object or a previous object"),
        };
        if let Some(object) = &object {
            assert_eq!(
                object.resource_version(),
                revision,
                "an event's object carries the event's revision"
            );
        }
        Event {
            revision,
            kind,
            object,
            prev,
            deleted_encoded: Default::default(),
            deleted_external: OnceLock::new(),
            derived: Default::default(),
        }
    }

    /// The memory the event keeps alive: the weight of the object it carries and of the one
    /// it replaced or deleted ([`Object::weight`]). A version is counted by each event that
    /// holds it, so the count errs high.
    #[must_use]
    pub fn weight(&self) -> usize {
        self.object.as_ref().map_or(0, |object| object.weight())
            + self.prev.as_ref().map_or(0, |object| object.weight())
    }

    /// Whether a version the event carries (its object or the one it replaced) was let go
    /// by the cache while still held ([`Object::is_released`]).
    #[must_use]
    pub fn holds_released(&self) -> bool {
        self.object.as_ref().is_some_and(|o| o.is_released())
            || self.prev.as_ref().is_some_and(|o| o.is_released())
    }

    /// Called by the history for an event it let go (evicted, oldest first, or dropped by a
    /// relist) once the cache's own snapshots no longer need it: the version the event
    /// replaced is then neither live nor in the cache (the event that made it went first).
    /// If that version is still held elsewhere — directly (a watch's snapshot or initial-state
    /// item, a request), or through this event (a watcher's queue) — its weight counts in
    /// `account` as released until it is dropped. (The event's own object is counted when
    /// the event that replaces it goes; after a relist, by the dispatcher's reset, which releases
    /// every object the list replaced that is still held.)
    pub(crate) fn release(event: &SharedEvent, account: &Arc<MemoryAccount>) {
        // The caller holds the event: a count above one means another holder.
        if let Some(prev) = &event.prev
            && (Arc::strong_count(event) > 1 || Arc::strong_count(prev) > 1)
        {
            Object::release(prev, account);
        }
    }

    /// The revision (resource version) of the change.
    #[must_use]
    pub fn revision(&self) -> Revision {
        self.revision
    }

    /// What happened in the store.
    #[must_use]
    pub fn kind(&self) -> EventKind {
        self.kind
    }

    /// The object after the change; `None` for a deletion.
    #[must_use]
    pub fn object(&self) -> Option<&Arc<Object>> {
        self.object.as_ref()
    }

    /// The object before the change; `None` for a creation.
    #[must_use]
    pub fn prev(&self) -> Option<&Arc<Object>> {
        self.prev.as_ref()
    }

    /// The key of the changed object.
    #[must_use]
    pub fn key(&self) -> &Arc<str> {
        self.object
            .as_ref()
            .or(self.prev.as_ref())
            .map(|o| o.key())
            .expect("an event has an object or a previous object")
    }

    /// The encoding a watcher receives for this event as `event_type`, computed at most once
    /// per encoding and shared by all watchers.
    pub fn encoded(&self, event_type: EventType, encoding: Encoding, stats: &EncodeStats) -> Bytes {
        match event_type {
            EventType::Added | EventType::Modified => self
                .object
                .as_ref()
                .expect("ADDED and MODIFIED carry the new object")
                .encoded(encoding, stats)
                .clone(),
            EventType::Deleted => {
                let prev = self
                    .prev
                    .as_ref()
                    .expect("DELETED carries the previous object");
                self.deleted_encoded[encoding.slot()]
                    .get_or_init(|| {
                        stats.count();
                        prev.encode_at(self.revision, encoding)
                    })
                    .clone()
            }
        }
    }
}

impl Event {
    /// A conversion of what a watcher receives for this event as `event_type` (the new object,
    /// or the previous one for a DELETED) that the server would otherwise make per watcher:
    /// `make`'s, for `key` (what it depends on besides the object, e.g. the second a `Table`'s
    /// ages are computed in). The last one made is kept, and made once: the other watchers
    /// wanting the same key wait for it rather than make it again (a `Table` of a custom
    /// resource's printer columns can cost seconds; 100 watchers made it 100 times). Each one
    /// made is counted in `stats`.
    pub fn derived(
        &self,
        event_type: EventType,
        key: u64,
        stats: &EncodeStats,
        make: impl FnOnce() -> Bytes,
    ) -> Bytes {
        let slot = &self.derived[usize::from(event_type == EventType::Deleted)];
        let mut last = slot
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((made_for, bytes)) = &*last
            && *made_for == key
        {
            return bytes.clone();
        }
        stats.count();
        let bytes = make();
        *last = Some((key, bytes.clone()));
        bytes
    }

    /// [`Event::encoded`] in the external encoding ([`ExternalEncoder`]): computed at most once
    /// per event and shared by all watchers; `None` when the object has no such encoding.
    pub fn encoded_external(
        &self,
        event_type: EventType,
        encoder: ExternalEncoder,
        stats: &EncodeStats,
    ) -> Option<Bytes> {
        match event_type {
            EventType::Added | EventType::Modified => self
                .object
                .as_ref()
                .expect("ADDED and MODIFIED carry the new object")
                .encoded_external(encoder, stats)
                .cloned(),
            EventType::Deleted => {
                let prev = self
                    .prev
                    .as_ref()
                    .expect("DELETED carries the previous object");
                self.deleted_external
                    .get_or_init(|| {
                        stats.count();
                        prev.encode_external_at(self.revision, encoder)
                    })
                    .clone()
            }
        }
    }
}

/// One item in a watcher's queue.
#[derive(Clone, Debug)]
pub enum WatchItem {
    /// A change, typed for this watcher.
    Event {
        /// ADDED, MODIFIED or DELETED as this watcher sees it.
        event_type: EventType,
        /// The shared event.
        event: SharedEvent,
    },
    /// One object of a watch's initial state, delivered as ADDED.
    Initial(Arc<Object>),
    /// A bookmark: every event up to `revision` that this watcher selects has been delivered.
    Bookmark {
        /// The bookmark's resource version.
        revision: Revision,
        /// Whether this is the bookmark that ends the initial events
        /// (annotation `k8s.io/initial-events-end: "true"`).
        initial_events_end: bool,
    },
}

impl WatchItem {
    /// The resource version this item moves the client to.
    #[must_use]
    pub fn revision(&self) -> Revision {
        match self {
            WatchItem::Event { event, .. } => event.revision(),
            WatchItem::Initial(object) => object.resource_version(),
            WatchItem::Bookmark { revision, .. } => *revision,
        }
    }

    /// The watch event type and the object's encoding, for items that carry an object.
    /// Bookmarks return `None`: their body depends on the resource's kind (the server's part).
    pub fn encoded(&self, encoding: Encoding, stats: &EncodeStats) -> Option<(EventType, Bytes)> {
        match self {
            WatchItem::Event { event_type, event } => {
                Some((*event_type, event.encoded(*event_type, encoding, stats)))
            }
            WatchItem::Initial(object) => {
                Some((EventType::Added, object.encoded(encoding, stats).clone()))
            }
            WatchItem::Bookmark { .. } => None,
        }
    }

    /// The item's whole JSON watch frame when it is one shared buffer already: a MODIFIED
    /// event's ([`Object::modified_frame`]); `None` for any other item.
    pub fn modified_frame(&self, stats: &EncodeStats) -> Option<&Bytes> {
        match self {
            WatchItem::Event {
                event_type: EventType::Modified,
                event,
            } => event
                .object
                .as_ref()
                .and_then(|object| object.modified_frame(stats)),
            _ => None,
        }
    }

    /// An ADDED item's JSON encoding followed by its frame's tail ([`FRAME_TAIL`]), one slice
    /// of the object's shared frame buffer ([`Object::modified_frame`]): with the static ADDED
    /// head before it, the whole frame in two pieces, nothing copied. `None` for any other
    /// item (a MODIFIED event's frame is [`WatchItem::modified_frame`]; a DELETED event's
    /// encoding is its own, at the deletion's revision).
    ///
    /// [`FRAME_TAIL`]: crate::object::FRAME_TAIL
    pub fn added_json_and_tail(&self, stats: &EncodeStats) -> Option<Bytes> {
        let object = match self {
            WatchItem::Event {
                event_type: EventType::Added,
                event,
            } => event.object.as_ref()?,
            WatchItem::Initial(object) => object,
            _ => return None,
        };
        let frame = object.modified_frame(stats)?;
        Some(frame.slice(crate::object::MODIFIED_FRAME_HEAD.len()..))
    }

    /// [`WatchItem::encoded`] in the external encoding ([`ExternalEncoder`]): the event type and
    /// the object's encoding (`None` inside when the object has none). Bookmarks return `None`.
    pub fn encoded_external(
        &self,
        encoder: ExternalEncoder,
        stats: &EncodeStats,
    ) -> Option<(EventType, Option<Bytes>)> {
        match self {
            WatchItem::Event { event_type, event } => Some((
                *event_type,
                event.encoded_external(*event_type, encoder, stats),
            )),
            WatchItem::Initial(object) => Some((
                EventType::Added,
                object.encoded_external(encoder, stats).cloned(),
            )),
            WatchItem::Bookmark { .. } => None,
        }
    }
}

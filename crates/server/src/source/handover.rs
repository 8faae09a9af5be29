//! The hand-over of a written object from the write path to the reflector, so the reflector
//! does not parse the bytes the writer has just serialized.
//!
//! A guaranteed update (PATCH, PUT) holds the object it stores as a decoded value. Before its
//! transaction it offers that value ([`Handover::offer`]) under the store key, together with
//! the exact bytes it stores. When the store's watch brings a put of that key whose value is
//! byte for byte the offered bytes, the reflector takes the offered value instead of parsing
//! the bytes ([`Handover::take`]) and decodes it into the cache object exactly as it would
//! have decoded the parsed bytes (same resource, key and revision: the store event's). The
//! writer then answers from that object ([`Offer::outcome`]): its cached encoding is both the
//! answer and what every watcher is sent. That encoding is made from the stored bytes (written
//! in kube-apiserver's order without the resource version, which the offer's
//! [`RevisionSlot`] places; see `decode::decode_written`), so a write serializes its object
//! once, for the store, the answer and every watcher.
//!
//! ## Guarantees
//! - The cache holds exactly what decoding the stored bytes gives: an offered value is used
//!   only for a put whose bytes equal the bytes serialized from it, and serializing a JSON
//!   value and parsing the text gives the same value (maps are sorted, floats round-trip:
//!   the workspace's `float_roundtrip`; tested in `handed_over_values_are_the_stored_bytes_parsed`).
//!   The stored bytes leave out `metadata.resourceVersion`; the offered value keeps the one
//!   it was read at, which the decode replaces with the store event's revision in place, as it
//!   sets it on parsed bytes (so the two decode alike, and the write does not take it out).
//! - The encoding made from the stored bytes is byte for byte the cache object's serialized
//!   encoding: only an object that decoding leaves as it is takes it, and the bytes with the
//!   revision in its slot are what writing the object with it gives (tested in `order`'s
//!   `a_resource_version_put_in_its_slot_gives_the_bytes_of_the_object_written_with_it` and
//!   `answers_from_the_cache_are_the_written_objects`; debug builds compare every one with a
//!   serialization).
//! - Nothing depends on the hand-over happening: without it (a write through another instance
//!   or another client of the store, an etcd store's event after the writer gave up waiting,
//!   a relist, a restart) the reflector parses the bytes as before, and the writer answers
//!   from its own value. Whichever of the two comes first decides; the other adapts.
//! - Bounded: an offer lives only while its write runs. The reflector removes what it takes,
//!   and the writer removes its offer when it is done or dropped (a cancelled request), so the
//!   table holds at most one entry per write in flight; a second offer for the same key
//!   replaces the first (whose put, if any, is then parsed).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bytes::Bytes;
use serde_json::Value;
use watchkeeper_core::order::RevisionSlot;
use watchkeeper_core::{Object, Revision};

/// The offers of the writes in flight, by store key.
#[derive(Debug, Default)]
pub struct Handover {
    slots: Mutex<HashMap<Bytes, Arc<Slot>>>,
}

/// One offered value.
#[derive(Debug)]
struct Slot {
    /// The bytes stored for it.
    value: Bytes,
    /// Where the resource version goes in them (`None`: the value has no metadata map).
    revision_slot: Option<RevisionSlot>,
    state: Mutex<State>,
}

#[derive(Debug)]
enum State {
    /// Offered, not taken yet: the value as stored (its `metadata.resourceVersion`, if any,
    /// is replaced when it is decoded or returned).
    Offered(Value),
    /// Taken by the reflector and decoded into this cache object.
    Decoded(Arc<Object>),
    /// Given back to the writer.
    Returned,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Handover {
    /// Offers `body` (the value written into `value` by
    /// [`watchkeeper_core::order::write_object_without_revision`], which returned
    /// `revision_slot`: the bytes to be stored at `key`) to the reflector until the returned
    /// [`Offer`] is dropped.
    pub fn offer(
        self: &Arc<Self>,
        key: Bytes,
        value: Bytes,
        body: Value,
        revision_slot: Option<RevisionSlot>,
    ) -> Offer {
        let slot = Arc::new(Slot {
            value,
            revision_slot,
            state: Mutex::new(State::Offered(body)),
        });
        lock(&self.slots).insert(key.clone(), slot.clone());
        Offer {
            handover: self.clone(),
            key,
            slot,
        }
    }

    /// The cache object of a put of `value` at `key`, from the offered value when there is
    /// one for exactly these bytes (`decode` turns it into the object, as it would the
    /// parsed bytes); `None` when there is none (the caller parses `value`). An offered value
    /// that is not an object with an object (or no) `metadata` is left alone (`None`): the
    /// parse of the bytes reports it as before.
    ///
    /// # Errors
    /// `decode`'s (not expected: `decode` is given an object with a metadata map).
    pub fn take(
        &self,
        key: &[u8],
        value: &Bytes,
        decode: impl FnOnce(Value, Option<&RevisionSlot>) -> Result<Arc<Object>, String>,
    ) -> Option<Result<Arc<Object>, String>> {
        let slot = {
            let mut slots = lock(&self.slots);
            let slot = slots.get(key)?;
            if slot.value != *value {
                return None;
            }
            slots.remove(key)?
        };
        let mut state = lock(&slot.state);
        if !matches!(&*state, State::Offered(body) if decodable(body)) {
            return None;
        }
        let State::Offered(body) = std::mem::replace(&mut *state, State::Returned) else {
            return None;
        };
        let decoded = decode(body, slot.revision_slot.as_ref());
        if let Ok(object) = &decoded {
            *state = State::Decoded(object.clone());
        }
        Some(decoded)
    }

    /// Offers in the table (for tests).
    #[must_use]
    pub fn len(&self) -> usize {
        lock(&self.slots).len()
    }

    /// Whether the table is empty (for tests).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A writer's offer; dropping it withdraws it.
#[derive(Debug)]
pub struct Offer {
    handover: Arc<Handover>,
    key: Bytes,
    slot: Arc<Slot>,
}

/// What became of an offer once its write succeeded at a revision.
#[derive(Debug)]
pub enum Outcome {
    /// The reflector decoded it into this cache object at the written revision.
    Cached(Arc<Object>),
    /// The written object: the offered value at the written revision (the reflector had not
    /// taken it, or took it for an identical put at another revision).
    Value(Value),
}

impl Offer {
    /// The written object at `revision`, withdrawing the offer: the reflector's cache object
    /// when it took the offer for the put at `revision`, else the offered value with
    /// `metadata.resourceVersion` set to `revision`.
    #[must_use]
    pub fn outcome(self, revision: Revision) -> Outcome {
        let state = std::mem::replace(&mut *lock(&self.slot.state), State::Returned);
        match state {
            State::Decoded(object) if object.resource_version() == revision => {
                Outcome::Cached(object)
            }
            State::Decoded(object) => {
                Outcome::Value(with_revision(object.body().clone(), revision))
            }
            State::Offered(body) => Outcome::Value(with_revision(body, revision)),
            // `take` leaves an offer it does not decode as it was, and `outcome` consumes the
            // offer: not reached.
            State::Returned => Outcome::Value(Value::Null),
        }
    }
}

impl Drop for Offer {
    fn drop(&mut self) {
        let mut slots = lock(&self.handover.slots);
        if slots
            .get(&self.key)
            .is_some_and(|slot| Arc::ptr_eq(slot, &self.slot))
        {
            slots.remove(&self.key);
        }
    }
}

/// Whether the decoder accepts `body` whatever its key: an object whose `metadata`, if any,
/// is an object.
fn decodable(body: &Value) -> bool {
    body.as_object()
        .is_some_and(|map| map.get("metadata").is_none_or(Value::is_object))
}

/// `object` with `metadata.resourceVersion` set to `revision` (when it has a metadata map).
#[must_use]
pub fn with_revision(mut object: Value, revision: Revision) -> Value {
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.insert(
            "resourceVersion".to_owned(),
            Value::String(revision.to_string()),
        );
    }
    object
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::*;

    fn object(body: Value, revision: Revision) -> Arc<Object> {
        Arc::new(Object::new(
            "ns",
            "a",
            BTreeMap::new(),
            BTreeMap::new(),
            revision,
            body,
        ))
    }

    fn decode(
        revision: Revision,
    ) -> impl FnOnce(Value, Option<&RevisionSlot>) -> Result<Arc<Object>, String> {
        move |body, _| Ok(object(body, revision))
    }

    fn body() -> Value {
        json!({"metadata": {"name": "a"}, "data": {"k": "v"}})
    }

    #[test]
    fn the_reflector_takes_an_offer_for_the_same_bytes_and_the_writer_answers_with_it() {
        let handover = Arc::new(Handover::default());
        let key = Bytes::from_static(b"/registry/configmaps/ns/a");
        let mut written = Vec::new();
        let slot = watchkeeper_core::order::write_object_without_revision(&mut written, &body());
        let value = Bytes::from(written);
        let offer = handover.offer(key.clone(), value.clone(), body(), slot.clone());
        // Other bytes at the key (another writer's put): not this offer.
        assert!(
            handover
                .take(&key, &Bytes::from_static(b"{}"), decode(5))
                .is_none()
        );
        // The same bytes, not the same buffer: taken.
        let copy = Bytes::copy_from_slice(&value);
        let taken = handover
            .take(&key, &copy, |body, given| {
                // The decoder is told where the resource version goes in the bytes.
                assert_eq!(given, slot.as_ref());
                decode(5)(body, given)
            })
            .unwrap()
            .unwrap();
        assert_eq!(taken.resource_version(), 5);
        assert!(handover.is_empty(), "taken offers leave the table");
        assert!(handover.take(&key, &value, decode(6)).is_none());
        match offer.outcome(5) {
            Outcome::Cached(cached) => assert!(Arc::ptr_eq(&cached, &taken)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_offer_not_taken_goes_back_to_the_writer_at_its_revision() {
        let handover = Arc::new(Handover::default());
        let key = Bytes::from_static(b"k");
        let offer = handover.offer(key.clone(), Bytes::from_static(b"v"), body(), None);
        assert_eq!(handover.len(), 1);
        match offer.outcome(9) {
            Outcome::Value(value) => assert_eq!(
                value,
                json!({"metadata": {"name": "a", "resourceVersion": "9"}, "data": {"k": "v"}})
            ),
            other => panic!("{other:?}"),
        }
        assert!(handover.is_empty(), "a finished offer leaves the table");
        assert!(
            handover
                .take(&key, &Bytes::from_static(b"v"), decode(9))
                .is_none()
        );
    }

    #[test]
    fn an_identical_put_at_another_revision_leaves_the_writer_its_own_revision() {
        let handover = Arc::new(Handover::default());
        let key = Bytes::from_static(b"k");
        let offer = handover.offer(key.clone(), Bytes::from_static(b"v"), body(), None);
        let taken = handover
            .take(&key, &Bytes::from_static(b"v"), decode(4))
            .unwrap()
            .unwrap();
        assert_eq!(taken.resource_version(), 4);
        match offer.outcome(8) {
            Outcome::Value(value) => assert_eq!(value["metadata"]["resourceVersion"], "8"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn offers_are_withdrawn_when_dropped_and_replaced_by_newer_ones() {
        let handover = Arc::new(Handover::default());
        let key = Bytes::from_static(b"k");
        let first = handover.offer(key.clone(), Bytes::from_static(b"1"), body(), None);
        let second = handover.offer(key.clone(), Bytes::from_static(b"2"), body(), None);
        assert_eq!(handover.len(), 1);
        // The first's bytes are no longer offered; dropping it leaves the second's.
        assert!(
            handover
                .take(&key, &Bytes::from_static(b"1"), decode(1))
                .is_none()
        );
        drop(first);
        assert_eq!(handover.len(), 1);
        drop(second);
        assert!(handover.is_empty());
    }

    #[test]
    fn what_the_decoder_refuses_is_left_to_the_parse_of_the_bytes() {
        let handover = Arc::new(Handover::default());
        let key = Bytes::from_static(b"k");
        let offer = handover.offer(
            key.clone(),
            Bytes::from_static(b"v"),
            json!({"metadata": "not a map"}),
            None,
        );
        assert!(
            handover
                .take(&key, &Bytes::from_static(b"v"), decode(2))
                .is_none()
        );
        match offer.outcome(2) {
            Outcome::Value(value) => assert_eq!(value, json!({"metadata": "not a map"})),
            other => panic!("{other:?}"),
        }
    }
}

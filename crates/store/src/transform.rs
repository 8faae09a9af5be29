//! Values transformed on their way to and from the backend: kube-apiserver's storage
//! transformers (encryption at rest), as a decorator over any backend.
//!
//! ## Guarantees
//! - Every value a [`Transformed`] store writes (a transaction's puts) goes through
//!   [`ValueTransformer::stored_form`] first, and every value it hands back (reads, a
//!   transaction's events and current versions, watch events and their previous values)
//!   through [`ValueTransformer::read_stored`]: callers see exactly the bytes they wrote.
//!   Keys, revisions, compares, compaction, counters and the quota are the backend's,
//!   untouched (the quota counts the transformed bytes, as etcd counts kube's ciphertext).
//! - A value the transformer cannot read back (a key that is not configured any more, a
//!   corrupt or foreign value) is never handed on as something it is not: it is replaced by
//!   [`UNREADABLE`], which is not JSON, so the server's decoder treats the key as it treats
//!   any value it cannot decode (as absent, counted and logged), and the cause is logged here
//!   with the key. One such value does not fail the read or the watch it is part of (a list
//!   of the whole registry, a reflector's watch): the other keys are served.
//! - A watch keeps its order and grouping: each item of the backend's watch is mapped in turn
//!   when the consumer asks for it, in the consumer's task (no task or channel of its own).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;

use crate::{
    AnyStore, BackendError, CompactError, Event, KeySelector, KeyValue, QuotaUsage, RangeError,
    RangeRequest, RangeResponse, Store, StoreCounters, TxnError, TxnOp, TxnRequest, TxnResponse,
    Watch, WatchError, WatchItem,
};

/// How values are stored: applied per key (a transformer may leave some keys as they are).
pub trait ValueTransformer: Send + Sync + fmt::Debug {
    /// The stored form of `value`, written under `key`.
    ///
    /// # Errors
    /// Why the value cannot be stored (the write fails, nothing is written).
    fn stored_form(&self, key: &[u8], value: Bytes) -> Result<Bytes, String>;

    /// The value of a stored form read under `key`.
    ///
    /// # Errors
    /// Why the stored bytes cannot be read back.
    fn read_stored(&self, key: &[u8], stored: Bytes) -> Result<Bytes, String>;

    /// Operations so far, for `/metrics`: `(direction, transformer, status)` with a count;
    /// direction `to_storage` or `from_storage` and status `OK` or `Unknown`, as kube labels
    /// `apiserver_storage_transformation_operations_total`.
    fn operations(&self) -> Vec<((&'static str, String, &'static str), u64)> {
        Vec::new()
    }
}

/// A backend whose values go through a [`ValueTransformer`] ([`AnyStore::Transformed`]).
#[derive(Debug)]
pub struct Transformed {
    inner: AnyStore,
    transformer: Arc<dyn ValueTransformer>,
}

impl Transformed {
    /// `inner` with its values transformed by `transformer`.
    pub fn new(inner: AnyStore, transformer: Arc<dyn ValueTransformer>) -> Transformed {
        Transformed { inner, transformer }
    }

    /// The backend underneath.
    pub fn inner(&self) -> &AnyStore {
        &self.inner
    }

    /// The transformer.
    pub fn transformer(&self) -> &dyn ValueTransformer {
        self.transformer.as_ref()
    }

    fn read(&self, kv: &mut KeyValue) {
        read(self.transformer.as_ref(), kv);
    }

    fn read_event(&self, event: &mut Event) {
        read_event(self.transformer.as_ref(), event);
    }
}

/// What a value the transformer cannot read back is replaced by: not JSON, so never decoded
/// as an object.
pub const UNREADABLE: &[u8] = b"k8s:enc:unreadable";

/// `kv`'s value read back by `transformer` (a tombstone's empty value stays empty);
/// [`UNREADABLE`] when it cannot be.
fn read(transformer: &dyn ValueTransformer, kv: &mut KeyValue) {
    if kv.value.is_empty() {
        return;
    }
    let stored = std::mem::take(&mut kv.value);
    kv.value = transformer
        .read_stored(&kv.key, stored)
        .unwrap_or_else(|error| {
            tracing::warn!(
                key = %String::from_utf8_lossy(&kv.key),
                %error,
                "a stored value cannot be transformed back; handed on as unreadable"
            );
            Bytes::from_static(UNREADABLE)
        });
}

/// An event's values read back by `transformer`.
fn read_event(transformer: &dyn ValueTransformer, event: &mut Event) {
    read(transformer, &mut event.kv);
    if let Some(prev) = event.prev_kv.as_mut() {
        read(transformer, prev);
    }
}

/// A boxed future: [`AnyStore`]'s futures contain a [`Transformed`]'s, which await an
/// [`AnyStore`]'s, so the type has to be named (boxed) somewhere to be finite.
type Boxed<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// [`Store`]'s operations (called by [`AnyStore`]'s dispatch; inherent, with boxed futures).
impl Transformed {
    pub(crate) fn current_revision(&self) -> Boxed<'_, Result<u64, RangeError>> {
        Box::pin(self.inner.current_revision())
    }

    pub(crate) fn range(&self, req: RangeRequest) -> Boxed<'_, Result<RangeResponse, RangeError>> {
        Box::pin(async move {
            let mut response = self.inner.range(req).await?;
            for kv in &mut response.kvs {
                self.read(kv);
            }
            Ok(response)
        })
    }

    pub(crate) fn txn(&self, mut req: TxnRequest) -> Boxed<'_, Result<TxnResponse, TxnError>> {
        Box::pin(async move {
            for op in &mut req.success {
                if let TxnOp::Put { key, value } = op {
                    let plain = std::mem::take(value);
                    *value = self.transformer.stored_form(key, plain).map_err(|error| {
                        BackendError::Storage(format!(
                            "unable to transform key {:?}: {error}",
                            String::from_utf8_lossy(key)
                        ))
                    })?;
                }
            }
            let mut response = self.inner.txn(req).await?;
            for event in &mut response.events {
                self.read_event(event);
            }
            for (_, current) in &mut response.current {
                if let Some(kv) = current.as_mut() {
                    self.read(kv);
                }
            }
            Ok(response)
        })
    }

    pub(crate) fn watch(
        &self,
        keys: KeySelector,
        from_revision: u64,
    ) -> Boxed<'_, Result<Watch, WatchError>> {
        Box::pin(async move {
            let inner = self.inner.watch(keys, from_revision).await?;
            let transformer = Arc::clone(&self.transformer);
            // Each item is transformed when the consumer asks for it, in its task: no task
            // or channel between the two watches; dropping this one drops the inner one.
            Ok(Watch::from_stream(futures_util::stream::unfold(
                Some((inner, transformer)),
                |state| async move {
                    let (mut inner, transformer) = state?;
                    let mut item = inner.next().await?;
                    if let WatchItem::Revision { events, .. } = &mut item {
                        for event in events {
                            read_event(transformer.as_ref(), event);
                        }
                    }
                    let terminal =
                        matches!(item, WatchItem::Failed(_) | WatchItem::Compacted { .. });
                    Some((item, (!terminal).then_some((inner, transformer))))
                },
            )))
        })
    }

    pub(crate) fn compact(&self, revision: u64) -> Boxed<'_, Result<(), CompactError>> {
        Box::pin(self.inner.compact(revision))
    }

    pub(crate) fn counters(&self) -> &StoreCounters {
        self.inner.counters()
    }

    pub(crate) fn quota_usage(&self) -> Option<QuotaUsage> {
        self.inner.quota_usage()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{EventKind, MemoryConfig, MemoryStore};

    /// Reverses values under `/s/`, refuses to read back values that do not start with `!`.
    #[derive(Debug)]
    struct Reverse;

    impl ValueTransformer for Reverse {
        fn stored_form(&self, key: &[u8], value: Bytes) -> Result<Bytes, String> {
            if !key.starts_with(b"/s/") {
                return Ok(value);
            }
            let mut stored = b"!".to_vec();
            stored.extend(value.iter().rev());
            Ok(stored.into())
        }

        fn read_stored(&self, key: &[u8], stored: Bytes) -> Result<Bytes, String> {
            if !key.starts_with(b"/s/") {
                return Ok(stored);
            }
            match stored.strip_prefix(b"!") {
                Some(rest) => Ok(rest.iter().rev().copied().collect::<Vec<u8>>().into()),
                None => Err("no marker".to_owned()),
            }
        }
    }

    #[tokio::test]
    async fn callers_see_what_they_wrote_and_the_backend_the_stored_form() {
        let memory = AnyStore::Memory(MemoryStore::new(MemoryConfig::default()).unwrap());
        let store = AnyStore::Transformed(Arc::new(Transformed::new(
            memory.clone(),
            Arc::new(Reverse),
        )));
        let mut watch = store
            .watch(KeySelector::Prefix("/".into()), 1)
            .await
            .unwrap();
        store.put("/s/a", "abc").await.unwrap();
        store.put("/p/a", "abc").await.unwrap();
        store.put("/s/a", "xyz").await.unwrap();
        assert_eq!(store.get("/s/a").await.unwrap().unwrap().value, "xyz");
        assert_eq!(memory.get("/s/a").await.unwrap().unwrap().value, "!zyx");
        assert_eq!(memory.get("/p/a").await.unwrap().unwrap().value, "abc");
        let mut seen = Vec::new();
        while seen.len() < 3 {
            if let Some(WatchItem::Revision { events, .. }) = watch.next().await {
                for event in events {
                    assert_eq!(event.kind, EventKind::Put);
                    let prev = event.prev_kv.map(|kv| kv.value);
                    seen.push((event.kv.value, prev));
                }
            }
        }
        assert_eq!(
            seen,
            vec![
                (Bytes::from("abc"), None),
                (Bytes::from("abc"), None),
                (Bytes::from("xyz"), Some(Bytes::from("abc"))),
            ]
        );
        // A stored value the transformer cannot read is handed on as unreadable, on reads and
        // watches, and the other keys still are read.
        memory.put("/s/b", "plain").await.unwrap();
        assert_eq!(store.get("/s/b").await.unwrap().unwrap().value, UNREADABLE);
        let listed = store.range(RangeRequest::prefix("/s/")).await.unwrap();
        let values: Vec<&[u8]> = listed.kvs.iter().map(|kv| &kv.value[..]).collect();
        assert_eq!(values, vec![&b"xyz"[..], UNREADABLE]);
        loop {
            match watch.next().await {
                Some(WatchItem::Revision { events, .. }) => {
                    assert_eq!(events[0].kv.value, UNREADABLE);
                    break;
                }
                Some(WatchItem::Progress { .. }) => {}
                other => panic!("expected the unreadable put, got {other:?}"),
            }
        }
        drop(watch);
    }
}

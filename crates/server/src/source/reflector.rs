//! The reflector: lists the store's registry prefix at one revision, loads every resource's
//! cache, then watches the whole prefix from the next revision and feeds each cache one
//! revision at a time.
//!
//! One store watch covers every resource, so every store revision reaches every cache: a
//! revision with changes for a resource is dispatched to it, and one without is a progress
//! notification for it. The caches' resource versions therefore track the store's revision
//! closely, and a consistent read (read the store's revision, wait until the cache has it)
//! needs no progress request — which etcd 3.4.23 cannot answer safely.
//!
//! On compaction (the resume revision is gone) or a failed watch, it re-lists and re-initialises
//! every cache; their watchers get an honest in-stream 410, never a silent gap. Retries back off
//! with jitter and are logged.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::time::Duration;

use bytes::Bytes;
use serde_json::Value;
use watchkeeper_api::{ResourceDef, field_values, labels_of};
use watchkeeper_core::{Change, Object, object_key};
use watchkeeper_store::{
    AnyStore, EventKind, KeySelector, KeyValue, RangeRequest, StartKey, Store, WatchItem,
};

use crate::cache::Input;

/// What the reflector feeds for one resource.
#[derive(Debug)]
pub struct Feed {
    /// The resource.
    pub def: ResourceDef,
    /// Its key prefix below the registry prefix, with a trailing slash (`pods/`).
    pub storage_prefix: String,
    /// The resource's dispatcher thread.
    pub input: Sender<Input>,
}

/// Shared reflector status.
#[derive(Debug, Default)]
pub struct ReflectorStatus {
    /// Set once the first list is loaded.
    pub ready: AtomicBool,
    /// The newest store revision the reflector has seen.
    pub store_revision: AtomicU64,
    /// Lists done (the first and every relist).
    pub lists: AtomicU64,
    /// Objects decoded from store values.
    pub decodes: AtomicU64,
    /// Store values that could not be decoded (skipped, logged).
    pub decode_errors: AtomicU64,
}

/// Decodes a store value into a cache object. `None` when it is not a JSON object.
#[must_use]
pub fn decode(
    def: &ResourceDef,
    namespace: &str,
    name: &str,
    kv: &KeyValue,
) -> Option<Arc<Object>> {
    let mut body: Value = serde_json::from_slice(&kv.value).ok()?;
    let map = body.as_object_mut()?;
    map.entry("apiVersion")
        .or_insert_with(|| Value::String(def.api_version()));
    map.entry("kind")
        .or_insert_with(|| Value::String(def.kind.clone()));
    let metadata = map
        .entry("metadata")
        .or_insert_with(|| Value::Object(serde_json::Map::new()));
    let metadata = metadata.as_object_mut()?;
    metadata.insert("name".to_owned(), Value::String(name.to_owned()));
    if namespace.is_empty() {
        metadata.remove("namespace");
    } else {
        metadata.insert("namespace".to_owned(), Value::String(namespace.to_owned()));
    }
    let labels = labels_of(&body);
    let mut fields = field_values(def, &body);
    fields.remove("metadata.name");
    fields.remove("metadata.namespace");
    Some(Arc::new(Object::new(
        namespace,
        name,
        labels,
        fields,
        kv.mod_revision,
        body,
    )))
}

/// The reflector over one store and a set of resources.
#[derive(Debug)]
pub struct Reflector {
    store: AnyStore,
    /// The registry prefix with a trailing slash (`/registry/`).
    prefix: String,
    feeds: Vec<Feed>,
    status: Arc<ReflectorStatus>,
}

impl Reflector {
    /// A reflector of `feeds` under `prefix` (no trailing slash).
    #[must_use]
    pub fn new(
        store: AnyStore,
        prefix: &str,
        feeds: Vec<Feed>,
        status: Arc<ReflectorStatus>,
    ) -> Reflector {
        Reflector {
            store,
            prefix: format!("{prefix}/"),
            feeds,
            status,
        }
    }

    /// Which feed a key belongs to, and the object's namespace and name.
    fn route<'k>(&self, key: &'k str) -> Option<(usize, &'k str, &'k str)> {
        let rest = key.strip_prefix(&self.prefix)?;
        let (index, feed) = self
            .feeds
            .iter()
            .enumerate()
            .filter(|(_, f)| rest.starts_with(&f.storage_prefix))
            .max_by_key(|(_, f)| f.storage_prefix.len())?;
        let rest = &rest[feed.storage_prefix.len()..];
        if feed.def.namespaced {
            let (namespace, name) = rest.split_once('/')?;
            (!namespace.is_empty() && !name.is_empty() && !name.contains('/'))
                .then_some((index, namespace, name))
        } else {
            (!rest.is_empty() && !rest.contains('/')).then_some((index, "", rest))
        }
    }

    fn decode_put(&self, index: usize, namespace: &str, name: &str, kv: &KeyValue) -> Change {
        self.status.decodes.fetch_add(1, Ordering::Relaxed);
        match decode(&self.feeds[index].def, namespace, name, kv) {
            Some(object) => Change::put(object),
            None => {
                self.status.decode_errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(
                    key = %String::from_utf8_lossy(&kv.key),
                    "store value is not a JSON object; treating the key as absent"
                );
                Change::delete(object_key(namespace, name))
            }
        }
    }

    /// Lists everything under the prefix at one revision, a page at a time.
    async fn list(&self) -> Result<(u64, Vec<Vec<Arc<Object>>>), String> {
        let mut per_feed: Vec<Vec<Arc<Object>>> = vec![Vec::new(); self.feeds.len()];
        let mut revision = 0;
        let mut start: Option<Bytes> = None;
        let mut loaded = 0usize;
        loop {
            let mut request =
                RangeRequest::prefix(Bytes::from(self.prefix.clone())).with_limit(1000);
            if revision != 0 {
                request = request.at_revision(revision);
            }
            if let Some(key) = start.take() {
                request = request.starting(StartKey::Exclusive(key));
            }
            let page = self.store.range(request).await.map_err(|e| e.to_string())?;
            revision = page.revision;
            for kv in &page.kvs {
                let key = String::from_utf8_lossy(&kv.key);
                if let Some((index, namespace, name)) = self.route(&key)
                    && let Change {
                        object: Some(object),
                        ..
                    } = self.decode_put(index, namespace, name, kv)
                {
                    per_feed[index].push(object);
                }
            }
            loaded += page.kvs.len();
            if loaded > 0 && loaded % 100_000 < 1000 {
                tracing::info!(loaded, revision, "loading the store");
            }
            match (page.more, page.kvs.last()) {
                (true, Some(last)) => start = Some(last.key.clone()),
                _ => break,
            }
        }
        Ok((revision, per_feed))
    }

    /// Runs until the store is gone for good or every cache stopped.
    pub async fn run(self) {
        let mut backoff = Duration::from_millis(100);
        loop {
            let (revision, per_feed) = match self.list().await {
                Ok(listed) => listed,
                Err(error) => {
                    tracing::warn!(%error, ?backoff, "listing the store failed; retrying");
                    tokio::time::sleep(jitter(backoff)).await;
                    backoff = (backoff * 2).min(Duration::from_secs(10));
                    continue;
                }
            };
            let total: usize = per_feed.iter().map(Vec::len).sum();
            for (feed, objects) in self.feeds.iter().zip(per_feed) {
                if feed.input.send(Input::Reset(revision, objects)).is_err() {
                    return;
                }
            }
            self.status
                .store_revision
                .fetch_max(revision, Ordering::Relaxed);
            self.status.lists.fetch_add(1, Ordering::Relaxed);
            self.status.ready.store(true, Ordering::Release);
            tracing::info!(revision, objects = total, "caches loaded");
            let mut watch = match self
                .store
                .watch(
                    KeySelector::Prefix(Bytes::from(self.prefix.clone())),
                    revision + 1,
                )
                .await
            {
                Ok(watch) => watch,
                Err(error) => {
                    tracing::warn!(%error, "watching the store failed; relisting");
                    tokio::time::sleep(jitter(backoff)).await;
                    backoff = (backoff * 2).min(Duration::from_secs(10));
                    continue;
                }
            };
            backoff = Duration::from_millis(100);
            loop {
                match watch.next().await {
                    Some(WatchItem::Revision { revision, events }) => {
                        let mut changes: BTreeMap<usize, Vec<Change>> = BTreeMap::new();
                        for event in &events {
                            let key = String::from_utf8_lossy(&event.kv.key);
                            let Some((index, namespace, name)) = self.route(&key) else {
                                continue;
                            };
                            let change = match event.kind {
                                EventKind::Put => {
                                    self.decode_put(index, namespace, name, &event.kv)
                                }
                                EventKind::Delete => Change::delete(object_key(namespace, name)),
                            };
                            changes.entry(index).or_default().push(change);
                        }
                        for (index, feed) in self.feeds.iter().enumerate() {
                            let input = match changes.remove(&index) {
                                Some(changes) => Input::Revision(revision, changes),
                                None => Input::Progress(revision),
                            };
                            if feed.input.send(input).is_err() {
                                return;
                            }
                        }
                        self.status
                            .store_revision
                            .fetch_max(revision, Ordering::Relaxed);
                    }
                    Some(WatchItem::Progress { revision }) => {
                        for feed in &self.feeds {
                            if feed.input.send(Input::Progress(revision)).is_err() {
                                return;
                            }
                        }
                        self.status
                            .store_revision
                            .fetch_max(revision, Ordering::Relaxed);
                    }
                    Some(WatchItem::Compacted {
                        requested,
                        compact_revision,
                    }) => {
                        tracing::warn!(
                            requested,
                            compact_revision,
                            "the store compacted past the cache; relisting (watchers get 410)"
                        );
                        break;
                    }
                    Some(WatchItem::Failed(error)) => {
                        tracing::warn!(%error, "the store watch failed; relisting");
                        tokio::time::sleep(jitter(backoff)).await;
                        break;
                    }
                    None => {
                        tracing::warn!("the store watch ended; relisting");
                        tokio::time::sleep(jitter(backoff)).await;
                        break;
                    }
                }
            }
        }
    }
}

/// A delay between half and all of `base`.
fn jitter(base: Duration) -> Duration {
    let fraction: f64 = rand::random::<f64>() * 0.5 + 0.5;
    base.mul_f64(fraction)
}

//! CustomResourceDefinition conversion webhooks (`spec.conversion.strategy: Webhook`): every
//! served version of such a CRD is served, the versions other than the storage version
//! converted by the webhook, as kube-apiserver's `webhookConverter` calls it (reviews built
//! and checked by [`watchkeeper_api::conversion_review`], sent with the admission webhooks'
//! [`super::client::WebhookClient`]).
//!
//! ## Guarantees
//! - **Writes** at another version ([`crate::http::converted`]): the body is converted to the
//!   storage version by the webhook before anything else sees it (admission, validation,
//!   the store), and the answer back to the requested version; a failed conversion is kube's
//!   500 `Internal error occurred: conversion webhook for <gvk> failed: ...` and nothing is
//!   written.
//! - **Reads** (GET, LIST, WATCH) at another version are served from that version's own
//!   cache, which holds the converted objects: **one conversion per event per version**,
//!   shared by every watcher and every read (kube converts each watcher's events on its own
//!   and each read's objects). The cache is fed by a task per version ([`Converter::start`])
//!   from the storage version's revisions, relayed off the reflector's path
//!   ([`crate::cache::InputSender::with_relay`]: a relay only queues, so a slow or dead
//!   webhook never stalls the reflector or other resources). The task converts what is
//!   queued in one review (a list, or several revisions' objects together), bounded in bytes
//!   (below), and hands the view's cache the revisions in order, each once, its progress
//!   after the revisions it covers.
//! - **A failed conversion is never a silent gap**: the version is marked failed (GET, LIST
//!   and new WATCHes at it answer the failure, kube's 500), its cache is reset at the last
//!   revision it got, which ends every watch of it with the failure as an in-stream error
//!   (kube ends a watch whose event cannot be converted with an error event), and the task
//!   retries with back-off ([`BACKOFF`]): it re-lists the storage version's cache at or past
//!   every revision relayed, converts the whole list, and resets the view's cache at that
//!   revision — from then on the version is served again, the revisions relayed meanwhile
//!   skipped up to the list's. The same re-list serves a queue that outgrows
//!   [`crate::cache::INPUT_CAPACITY`] revisions (a webhook slower than the writes): the
//!   queue is dropped and the view's watches end with a 410, as a cache too far behind ends
//!   them.
//! - What is converted to another version gets that version's schema's defaults and pruning,
//!   as what is read from the store at the storage version gets the storage version's.
//! - **Bounded**: calls in flight share `--webhook-calls-max` with the admission webhooks; a
//!   review carries objects of at most half of `--max-request-body-bytes` (at least one), so
//!   its answer (about as large) fits the bound the client reads answers up to; a call
//!   times out after [`TIMEOUT_SECONDS`]. The relay's queue holds at most
//!   [`crate::cache::INPUT_CAPACITY`] revisions (progress coalesced into one mark between two).
//!
//! - A consistent GET read from the store (`--consistent-get-from-cache=false`) at another
//!   version converts the object it read (`StoreSource::get`), one review.
//! - **Objects stored at an earlier storage version** (the CRD's `status.storedVersions`
//!   names a version other than the storage version; kube's "non homogeneous list"
//!   conformance case) are converted by the webhook, never only renamed: the reflector feeds
//!   a cache of the objects as stored (each at the `apiVersion` it was stored at, no schema
//!   applied), which is not served, and a [`Converter`] of the storage version feeds the
//!   storage version's cache from it, as the other versions' feed theirs (from the same
//!   cache: an object stored at `v1` reads at `v1` without a call). Objects already at the
//!   storage version pass without a call; what is converted gets the storage schema's
//!   defaults and pruning. Everything above holds for it: one conversion per event, bounded
//!   reviews, and a failed conversion fails the storage version's reads (500, watches ended)
//!   until a re-list converts again — its writes wait for its cache meanwhile. A consistent
//!   GET from the store converts the object read when it is at an earlier version.
//! - **Metrics**: every review is timed into kube's
//!   `apiserver_crd_conversion_webhook_duration_seconds` ([`Durations`]: `crd_name`,
//!   `from_version`, `to_version`, `succeeded`).
//!
//! ## Not here
//! - kube's `apiserver_webhooks_x509_*` counters: the client refuses a certificate without
//!   SAN or signed with SHA-1 (as Go's does) without counting them.
//! - A review mixing objects of several earlier versions is named (its errors' GVK, the
//!   metric's `from_version`) by the first object's version; kube converts a list of one
//!   version at a time.

use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde_json::Value;
use watchkeeper_api::admission_webhook::Target;
use watchkeeper_api::conversion_review::{self, ConversionWebhook, Sent};
use watchkeeper_api::crd::CustomResource;
use watchkeeper_api::{ApiError, ResourceDef};
use watchkeeper_core::metrics::Histogram;
use watchkeeper_core::{Change, Object, Revision, WatchCache};

use super::Webhooks;
use super::client::Request;
use crate::cache::{ConvertedView, INPUT_CAPACITY, Input, InputSender, Registry, Relay};
use crate::source::decode::{Identity, decode_sized};

/// How long a conversion webhook call may take: kube's webhook client default (the CRD has
/// no `timeoutSeconds`).
pub const TIMEOUT_SECONDS: u64 = 30;

/// The feed's back-off after a failed conversion: the first wait and the longest (not
/// tunables: they only decide how soon a webhook that answers again is used).
pub const BACKOFF: (Duration, Duration) = (Duration::from_millis(100), Duration::from_secs(10));

/// The longest the feed waits for the storage version's cache to reach what was relayed
/// before it tries again (that cache is local; only a stopped one takes this long).
const FRESH_WAIT: Duration = Duration::from_secs(1);

/// What every conversion webhook call needs: the client, and the served resources (a
/// service's Endpoints).
#[derive(Clone, Debug)]
pub struct Caller {
    webhooks: Arc<Webhooks>,
    registry: Arc<Registry>,
}

impl Caller {
    /// Calls with `webhooks`' client, resolving services from `registry`'s caches.
    #[must_use]
    pub fn new(webhooks: Arc<Webhooks>, registry: Arc<Registry>) -> Caller {
        Caller { webhooks, registry }
    }

    /// The most bytes of objects one review carries.
    fn review_bytes_max(&self) -> usize {
        self.webhooks.client().answer_bytes_max() / 2
    }

    /// One review of `objects` (none at `desired`) to `desired`; `gvk` and `list` as kube's
    /// errors print them.
    async fn review(
        &self,
        webhook: &ConversionWebhook,
        objects: &[&Value],
        desired: &str,
        (gvk, list): (&str, bool),
    ) -> Result<Vec<Value>, String> {
        let version = webhook.review_version()?;
        let uid = uuid::Uuid::new_v4().to_string();
        let body = conversion_review::review(version, &uid, desired, objects)
            .to_string()
            .into_bytes();
        let failed = |cause: String| format!("conversion webhook for {gvk} failed: {cause}");
        let target = Target::of(&webhook.client_config)
            .ok_or_else(|| failed("no url or service".to_owned()))?;
        let authority = {
            let served = self.registry.load();
            super::resolve(&served.resources, &target).map_err(|cause| {
                failed(format!(
                    "Post \"{}\": {cause}",
                    target.printed(TIMEOUT_SECONDS)
                ))
            })?
        };
        let ca_bundle = webhook
            .client_config
            .get("caBundle")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let answer = self
            .webhooks
            .client()
            .call(Request {
                target: &target,
                authority,
                ca_bundle,
                timeout_seconds: TIMEOUT_SECONDS,
                body,
            })
            .await
            .map_err(failed)?;
        conversion_review::converted(
            &Sent {
                version,
                uid: &uid,
                desired,
                objects,
                list,
                gvk,
            },
            &answer,
        )
    }

    /// `objects` of `kind` converted to `desired`, in order: those already at `desired` kept
    /// as they are, the others sent in reviews of at most [`Caller::review_bytes_max`] bytes
    /// each (kube names a batch of more than one object as a list in its errors).
    ///
    /// # Errors
    /// The first review's failure, in kube's words.
    pub async fn convert(
        &self,
        webhook: &ConversionWebhook,
        kind: &str,
        mut objects: Vec<Value>,
        desired: &str,
    ) -> Result<Vec<Value>, String> {
        let api_version = |o: &Value| {
            o.get("apiVersion")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let pending: Vec<usize> = (0..objects.len())
            .filter(|&i| api_version(&objects[i]) != desired)
            .collect();
        let Some(&first) = pending.first() else {
            return Ok(objects);
        };
        let list = pending.len() > 1;
        let source = api_version(&objects[first]);
        let gvk = if list {
            conversion_review::printed_gvk(&source, &format!("{kind}List"))
        } else {
            conversion_review::printed_gvk(&source, kind)
        };
        let bound = self.review_bytes_max();
        let mut start = 0;
        while start < pending.len() {
            let mut end = start;
            let mut bytes = 0usize;
            while end < pending.len() {
                let size = encoded_len(&objects[pending[end]]);
                if end > start && bytes.saturating_add(size) > bound {
                    break;
                }
                bytes = bytes.saturating_add(size);
                end += 1;
            }
            let batch: Vec<&Value> = pending[start..end].iter().map(|&i| &objects[i]).collect();
            let started = std::time::Instant::now();
            let converted = self.review(webhook, &batch, desired, (&gvk, list)).await;
            self.webhooks.conversion_durations().observe(
                (&webhook.crd, version_of(&source), version_of(desired)),
                converted.is_ok(),
                started.elapsed(),
            );
            let converted = converted?;
            for (&index, object) in pending[start..end].iter().zip(converted) {
                objects[index] = object;
            }
            start = end;
        }
        Ok(objects)
    }
}

/// The version of an `apiVersion` (`v1` of `example.com/v1`).
fn version_of(api_version: &str) -> &str {
    api_version.rsplit('/').next().unwrap_or(api_version)
}

/// A conversion duration's labels: the CRD's name, the version converted from and to, and
/// whether it succeeded.
pub type DurationKey = (String, String, String, bool);

/// kube's `apiserver_crd_conversion_webhook_duration_seconds`: the webhook calls' durations
/// by [`DurationKey`], in milliseconds (the histogram's bounds, 1 ms doubling, are kube's
/// buckets — 1 ms to 16.384 s — and six more up to 1048.576 s).
#[derive(Debug, Default)]
pub struct Durations(Mutex<std::collections::BTreeMap<DurationKey, Arc<Histogram>>>);

impl Durations {
    /// Records one call of `crd`'s webhook from one version to another (`versions`).
    pub fn observe(&self, (crd, from, to): (&str, &str, &str), succeeded: bool, took: Duration) {
        let key = (crd.to_owned(), from.to_owned(), to.to_owned(), succeeded);
        let histogram = lock(&self.0).entry(key).or_default().clone();
        // Rounded up: a call under a millisecond counts in the first bucket (1 ms).
        let millis = took.as_micros().div_ceil(1000);
        histogram.observe(u64::try_from(millis).unwrap_or(u64::MAX));
    }

    /// Every label set's histogram (`/metrics` formats them, in seconds).
    #[must_use]
    pub fn snapshot(&self) -> Vec<(DurationKey, Arc<Histogram>)> {
        lock(&self.0)
            .iter()
            .map(|(key, histogram)| (key.clone(), histogram.clone()))
            .collect()
    }
}

/// The length of `value`'s JSON encoding, without keeping it.
fn encoded_len(value: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// One version of a custom resource converted by its CRD's webhook (see the module docs).
#[derive(Debug)]
pub struct Converter {
    caller: Caller,
    /// The version served.
    view: ResourceDef,
    webhook: RwLock<ConversionWebhook>,
    /// The version's schema, whose defaults and pruning apply to what is converted to it
    /// (as to what is read from the store at the storage version).
    schema: RwLock<Option<Arc<Value>>>,
    /// Why the version cannot be read now (its feed's last conversion failed).
    failure: Mutex<Option<ApiError>>,
}

impl ConvertedView for Converter {
    fn failure(&self) -> Option<ApiError> {
        self.failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn convert<'a>(
        &'a self,
        objects: Vec<Value>,
        desired: &'a str,
    ) -> BoxFuture<'a, Result<Vec<Value>, ApiError>> {
        Box::pin(async move { self.at(objects, desired).await.map_err(ApiError::internal) })
    }

    fn reconfigure(&self, custom: &CustomResource) {
        if let Some(webhook) = &custom.conversion_webhook {
            *self.webhook.write().unwrap_or_else(PoisonError::into_inner) = webhook.clone();
        }
        (*self.schema.write().unwrap_or_else(PoisonError::into_inner)).clone_from(&custom.schema);
    }
}

/// What the reflector's relay queues for a converter.
enum Relayed {
    /// One revision's changes (not empty).
    Changes(Revision, Vec<Change>),
    /// A list.
    Reset(Revision, Vec<Arc<Object>>),
    /// Progress: the highest revision in the slot, relayed after every change before it.
    Progress(Arc<Mutex<Revision>>),
}

/// The relay's side of the queue.
#[derive(Default)]
struct Queue {
    /// The queue outgrew its bound: nothing is queued until the converter re-lists.
    overflowed: bool,
    /// The highest revision relayed (queued or not).
    relayed_max: Revision,
    /// The progress mark queued last, while no change was queued after it: later progress
    /// raises it rather than queueing another.
    mark: Option<Arc<Mutex<Revision>>>,
}

/// The converter task's ends of the relay.
struct Feed {
    queue: Arc<Mutex<Queue>>,
    receiver: flume::Receiver<Relayed>,
    sender: flume::WeakSender<Relayed>,
    view_input: InputSender,
    view_cache: WatchCache,
    storage_cache: WatchCache,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Queue {
    /// Queues a progress mark at `revision` (or raises the one queued last).
    fn progress(&mut self, sender: &flume::Sender<Relayed>, revision: Revision) {
        if let Some(mark) = &self.mark {
            let mut mark = lock(mark);
            *mark = (*mark).max(revision);
            return;
        }
        let mark = Arc::new(Mutex::new(revision));
        if sender.send(Relayed::Progress(mark.clone())).is_ok() {
            self.mark = Some(mark);
        }
    }

    /// What the relay does with one input (never waits).
    fn relay(&mut self, sender: &flume::Sender<Relayed>, input: &Input) {
        let (revision, item) = match input {
            Input::Revision(revision, changes) if !changes.is_empty() => {
                (*revision, Relayed::Changes(*revision, changes.clone()))
            }
            Input::Reset(revision, objects) => {
                (*revision, Relayed::Reset(*revision, objects.clone()))
            }
            Input::Revision(revision, _) | Input::Progress(revision) => {
                self.relayed_max = self.relayed_max.max(*revision);
                if !self.overflowed {
                    self.progress(sender, *revision);
                }
                return;
            }
            Input::Wake | Input::Shutdown | Input::Stop => return,
        };
        self.relayed_max = self.relayed_max.max(revision);
        if self.overflowed || sender.len() >= 2 * INPUT_CAPACITY {
            self.overflowed = true;
            return;
        }
        let _ = sender.send(item);
        self.mark = None;
    }
}

impl Converter {
    /// Starts converting into `view`'s cache (`view_input`, `view_cache`) what the storage
    /// version's cache (`storage_cache`) is sent: the converter, and the relay to add to the
    /// storage version's input ([`InputSender::with_relay`]). The task ends when the view's
    /// cache stops or the relay is dropped.
    #[must_use]
    pub fn start(
        caller: Caller,
        view: &CustomResource,
        webhook: ConversionWebhook,
        (view_input, view_cache): (InputSender, WatchCache),
        storage_cache: WatchCache,
    ) -> (Arc<Converter>, Relay) {
        let converter = Arc::new(Converter {
            caller,
            view: view.def.clone(),
            webhook: RwLock::new(webhook),
            schema: RwLock::new(view.schema.clone()),
            failure: Mutex::new(None),
        });
        let (sender, receiver) = flume::unbounded();
        let queue = Arc::new(Mutex::new(Queue::default()));
        let feed = Feed {
            queue: queue.clone(),
            receiver,
            sender: sender.downgrade(),
            view_input,
            view_cache,
            storage_cache,
        };
        tokio::spawn(converter.clone().run(feed));
        let relay: Relay = Arc::new(move |input: &Input| lock(&queue).relay(&sender, input));
        (converter, relay)
    }

    /// `objects` converted to `desired`; at this version, with its schema's defaults and
    /// pruning applied.
    async fn at(&self, objects: Vec<Value>, desired: &str) -> Result<Vec<Value>, String> {
        let mut converted = self
            .caller
            .convert(&self.webhook(), &self.view.kind, objects, desired)
            .await?;
        if desired == self.view.api_version() {
            let schema = self.schema.read().unwrap_or_else(PoisonError::into_inner);
            if let Some(schema) = schema.as_ref() {
                for object in &mut converted {
                    let _pruned = watchkeeper_api::structural::prune_and_default(schema, object);
                }
            }
        }
        Ok(converted)
    }

    fn webhook(&self) -> ConversionWebhook {
        self.webhook
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn set_failure(&self, failure: Option<ApiError>) {
        *lock(&self.failure) = failure;
    }

    /// Stored objects converted to this version, as cache objects at the same keys and
    /// revisions.
    async fn converted(&self, stored: &[Arc<Object>]) -> Result<Vec<Arc<Object>>, String> {
        let bodies = stored.iter().map(|o| o.body().clone()).collect();
        let converted = self.at(bodies, &self.view.api_version()).await?;
        stored
            .iter()
            .zip(converted)
            .map(|(object, body)| {
                decode_sized(
                    &self.view,
                    body,
                    Identity::Key {
                        namespace: object.namespace(),
                        name: object.name(),
                        revision: object.resource_version(),
                    },
                    object.size_hint(),
                )
            })
            .collect()
    }

    /// The task: converts what is relayed, in order (see the module docs).
    async fn run(self: Arc<Converter>, feed: Feed) {
        let name = crate::cache::name_of(&self.view);
        // Revisions at or below were covered by a re-list.
        let mut covered: Revision = 0;
        // The last revision the view's cache was sent.
        let mut delivered: Revision = 0;
        let mut backoff = BACKOFF.0;
        let mut relist = false;
        loop {
            if relist || lock(&feed.queue).overflowed {
                match self.relist(&feed).await {
                    Ok(Some(revision)) => {
                        (covered, delivered, relist, backoff) =
                            (revision, revision, false, BACKOFF.0);
                        self.set_failure(None);
                    }
                    Ok(None) => return,
                    Err(error) => {
                        tracing::warn!(resource = %name, %error, "a conversion webhook failed; retrying");
                        if !self.fail(&feed, error, delivered).await {
                            return;
                        }
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(BACKOFF.1);
                    }
                }
                continue;
            }
            let Ok(first) = feed.receiver.recv_async().await else {
                return;
            };
            let batch = self.gather(first, &feed);
            match self.inputs(batch, covered, &feed.queue).await {
                Ok(inputs) => {
                    for input in inputs {
                        let revision = match &input {
                            Input::Revision(r, _) | Input::Reset(r, _) | Input::Progress(r) => *r,
                            _ => delivered,
                        };
                        let sent = match input {
                            Input::Progress(r) => feed.view_input.progress(r),
                            input => feed.view_input.send_async(input).await,
                        };
                        if sent.is_err() {
                            return;
                        }
                        delivered = delivered.max(revision);
                    }
                }
                Err(error) => {
                    tracing::warn!(resource = %name, %error, "a conversion webhook failed; the version's watches end");
                    if !self.fail(&feed, error, delivered).await {
                        return;
                    }
                    relist = true;
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(BACKOFF.1);
                }
            }
        }
    }

    /// `first` and what else is queued now, up to a review's bytes or
    /// [`INPUT_CAPACITY`] items.
    fn gather(&self, first: Relayed, feed: &Feed) -> Vec<Relayed> {
        let bound = self.caller.review_bytes_max();
        let size = |item: &Relayed| match item {
            Relayed::Changes(_, changes) => changes
                .iter()
                .filter_map(|c| c.object.as_ref())
                .map(|o| o.size_hint().max(1))
                .sum(),
            Relayed::Reset(_, objects) => objects.iter().map(|o| o.size_hint().max(1)).sum(),
            Relayed::Progress(_) => 0,
        };
        let mut bytes: usize = size(&first);
        let mut batch = vec![first];
        while bytes < bound && batch.len() < INPUT_CAPACITY {
            let Ok(item) = feed.receiver.try_recv() else {
                break;
            };
            bytes = bytes.saturating_add(size(&item));
            batch.push(item);
        }
        batch
    }

    /// The view's inputs for `batch` (what a re-list covered left out), converted in one go.
    async fn inputs(
        &self,
        batch: Vec<Relayed>,
        covered: Revision,
        queue: &Mutex<Queue>,
    ) -> Result<Vec<Input>, String> {
        let mut stored: Vec<Arc<Object>> = Vec::new();
        let mut kept = Vec::with_capacity(batch.len());
        for item in batch {
            match item {
                Relayed::Changes(revision, changes) if revision > covered => {
                    stored.extend(changes.iter().filter_map(|c| c.object.clone()));
                    kept.push(Relayed::Changes(revision, changes));
                }
                Relayed::Reset(revision, objects) if revision > covered => {
                    stored.extend(objects.iter().cloned());
                    kept.push(Relayed::Reset(revision, objects));
                }
                Relayed::Progress(mark) => kept.push(Relayed::Progress(mark)),
                Relayed::Changes(..) | Relayed::Reset(..) => {}
            }
        }
        let mut converted = self.converted(&stored).await?.into_iter();
        let mut inputs = Vec::with_capacity(kept.len());
        for item in kept {
            match item {
                Relayed::Changes(revision, changes) => {
                    let changes = changes
                        .into_iter()
                        .map(|change| match change.object {
                            Some(_) => converted.next().map(Change::put).unwrap_or(change),
                            None => change,
                        })
                        .collect();
                    inputs.push(Input::Revision(revision, changes));
                }
                Relayed::Reset(revision, objects) => {
                    inputs.push(Input::Reset(
                        revision,
                        converted.by_ref().take(objects.len()).collect(),
                    ));
                }
                Relayed::Progress(mark) => {
                    // Taken: later progress queues a new mark rather than raising this one.
                    let revision = {
                        let mut queue = lock(queue);
                        if queue.mark.as_ref().is_some_and(|m| Arc::ptr_eq(m, &mark)) {
                            queue.mark = None;
                        }
                        *lock(&mark)
                    };
                    if revision > covered {
                        inputs.push(Input::Progress(revision));
                    }
                }
            }
        }
        Ok(inputs)
    }

    /// A failed conversion: the version marked failed with `error`, and its watches ended —
    /// its cache reset at `delivered` with what it holds (each watch ends with the failure,
    /// see `http::watch`). False when the view's cache stopped.
    async fn fail(&self, feed: &Feed, error: String, delivered: Revision) -> bool {
        self.set_failure(Some(ApiError::internal(error)));
        let _ = tokio::time::timeout(FRESH_WAIT, feed.view_cache.wait_fresh(delivered)).await;
        let objects = feed
            .view_cache
            .latest()
            .range(None, None)
            .cloned()
            .collect();
        feed.view_input
            .send_async(Input::Reset(delivered, objects))
            .await
            .is_ok()
    }

    /// Re-lists: the storage version's cache once it has every revision relayed, converted
    /// and sent to the view's cache as a reset. The revision listed; `None` when the view's
    /// cache stopped or the relay is gone.
    async fn relist(&self, feed: &Feed) -> Result<Option<Revision>, String> {
        let target = {
            let mut queue = lock(&feed.queue);
            queue.overflowed = false;
            queue.relayed_max
        };
        loop {
            if tokio::time::timeout(FRESH_WAIT, feed.storage_cache.wait_fresh(target))
                .await
                .is_ok()
            {
                break;
            }
            if feed.sender.upgrade().is_none() || feed.view_input.progress(0).is_err() {
                return Ok(None);
            }
        }
        let snapshot = feed.storage_cache.latest();
        let revision = snapshot.revision();
        let stored: Vec<Arc<Object>> = snapshot.range(None, None).cloned().collect();
        let converted = self.converted(&stored).await?;
        if feed
            .view_input
            .send_async(Input::Reset(revision, converted))
            .await
            .is_err()
        {
            return Ok(None);
        }
        // The progress relayed past the list, after the revisions queued since.
        let Some(sender) = feed.sender.upgrade() else {
            return Ok(None);
        };
        let mut queue = lock(&feed.queue);
        let latest = queue.relayed_max;
        queue.progress(&sender, latest);
        Ok(Some(revision))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(name: &str, revision: Revision) -> Arc<Object> {
        Arc::new(Object::new(
            "default",
            name,
            std::collections::BTreeMap::new(),
            std::collections::BTreeMap::new(),
            revision,
            serde_json::json!({"metadata": {"name": name}}),
        ))
    }

    fn drained(receiver: &flume::Receiver<Relayed>) -> Vec<String> {
        receiver
            .try_iter()
            .map(|item| match item {
                Relayed::Changes(r, _) => format!("changes {r}"),
                Relayed::Reset(r, _) => format!("reset {r}"),
                Relayed::Progress(mark) => format!("progress {}", lock(&mark)),
            })
            .collect()
    }

    /// Goal: progress is coalesced into one mark between two changes, never raised past a
    /// change queued after it; a queue past its bound stops queueing until a re-list.
    #[test]
    fn the_relay_keeps_order_and_its_bound() {
        let (sender, receiver) = flume::unbounded();
        let mut queue = Queue::default();
        let change = |r| Input::Revision(r, vec![Change::put(object("a", r))]);
        queue.relay(&sender, &Input::Reset(1, vec![object("a", 1)]));
        queue.relay(&sender, &Input::Progress(2));
        queue.relay(&sender, &Input::Progress(3));
        queue.relay(&sender, &Input::Revision(4, Vec::new()));
        queue.relay(&sender, &change(5));
        queue.relay(&sender, &Input::Progress(6));
        queue.relay(&sender, &Input::Shutdown);
        assert_eq!(
            drained(&receiver),
            ["reset 1", "progress 4", "changes 5", "progress 6"]
        );
        assert_eq!(queue.relayed_max, 6);
        // Past the bound: nothing more is queued, the highest revision is still known.
        for r in 0..(2 * INPUT_CAPACITY as u64) {
            queue.relay(&sender, &change(10 + r));
        }
        assert!(!queue.overflowed);
        queue.relay(&sender, &change(100_000));
        queue.relay(&sender, &Input::Progress(100_001));
        assert!(queue.overflowed);
        assert_eq!(receiver.len(), 2 * INPUT_CAPACITY);
        assert_eq!(queue.relayed_max, 100_001);
    }

    #[test]
    fn encoded_len_is_the_json_length() {
        let value = serde_json::json!({"a": [1, "two"], "b": null});
        assert_eq!(encoded_len(&value), value.to_string().len());
    }
}

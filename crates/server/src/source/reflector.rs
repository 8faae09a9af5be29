//! The reflector: the one loop that keeps caches equal to their source — list, reset, watch,
//! resume, relist, back off — whatever the source (the store or an upstream API server; the
//! source-specific steps are [`Lister`]'s).
//!
//! ## Guarantees
//! - A cache is (re)initialised only from a complete list at one revision
//!   ([`Input::Reset`]), then fed every later revision in order: a revision with changes for
//!   a resource as [`Input::Revision`], one without as [`Input::Progress`] (which only raises
//!   the cache's progress mark). No revision is fed twice or out of order.
//! - A cache's input is bounded: while its dispatcher is behind, the loop waits (back-pressure
//!   on the source's watch), and nothing is dropped.
//! - A watch that breaks resumes from the last revision fed when the source can resume
//!   ([`Stop::Resume`]); when the resume point is gone (compaction, 410) or the stream broke
//!   the rules it relists ([`Stop::Relist`]), which re-initialises the cache: its watchers get
//!   an honest in-stream 410, never a silent gap.
//! - Failures back off with jitter (a delay between half and all of the current back-off),
//!   doubling from [`Backoff::initial`] up to [`Backoff::max`]; a watch that made progress
//!   resets the back-off. Every retry is logged.
//! - A relist of one resource can be requested ([`RelistRequests`], used by the consistency
//!   checker): a store reflection lists that resource's keys at the revision it has fed and
//!   resets that one cache there (its watchers get 410; the other caches see nothing), then
//!   goes on with the same watch; an upstream reflection (one resource) relists as after a
//!   410. A request is served between two watch items, never inside one.
//! - History rebuilding (store source, `--rebuild-history`): the first list may be taken at an
//!   older revision than the store's ([`Listed::ready_at`]); the watch then replays every
//!   revision since through the same path as live ones, so each cache's history holds what
//!   it would have held had it been running (bounded by its capacity), and a client resumes
//!   from a resource version it saw before a restart or on a sibling instance. The caches
//!   count as loaded only once the replay has reached the store's revision of the list's
//!   time and the caches have applied it, so no read is served from the past.
//! - The store reflection may carry a [`Catalog`]: after each list and each revision that
//!   changed a CustomResourceDefinition it starts the caches of newly established CRDs (reset
//!   with their keys at exactly that revision) and stops those of CRDs gone, then resumes its
//!   watch from the same revision with the new set of feeds (see [`crate::source::catalog`]).
//! - The server is ready once every reflection has loaded its caches once: once each cache has
//!   applied the list (and the replay), not when they were sent to its thread.
//! - The loop ends when a cache stops (its input channel is closed).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};

use watchkeeper_core::Revision;

use crate::cache::{Input, name_of};
use crate::source::catalog::Catalog;
use crate::source::feed::{Backoff, Feed, Item, Listed, Observer, ReflectorStatus, Stop, jitter};
use crate::source::store::{StoreEvents, StoreLister};
use crate::source::upstream::{UpstreamEvents, UpstreamLister};

/// The source-specific steps of the loop.
pub enum Lister {
    /// Every resource under the store's registry prefix, with one store watch.
    Store(StoreLister),
    /// One resource of an upstream API server.
    Upstream(UpstreamLister),
}

/// An open watch of a [`Lister`].
pub enum Events {
    /// A store watch.
    Store(StoreEvents),
    /// An upstream watch.
    Upstream(Box<UpstreamEvents>),
}

impl Lister {
    /// What this lister is, for the logs.
    fn name(&self) -> String {
        match self {
            Lister::Store(_) => "the store".to_owned(),
            Lister::Upstream(lister) => format!("the upstream's {}", lister.resource()),
        }
    }

    /// A complete list, and the stream that goes on as its watch (a streaming list), if any.
    async fn list(&self, feeds: &[Feed], first: bool) -> Result<(Listed, Option<Events>), Stop> {
        match self {
            Lister::Store(lister) => Ok((lister.list(feeds, first).await?, None)),
            Lister::Upstream(lister) => {
                let (listed, events) = lister.list(first).await?;
                Ok((listed, events.map(|e| Events::Upstream(Box::new(e)))))
            }
        }
    }

    async fn watch(&self, feeds: &[Feed], after: Revision) -> Result<Events, Stop> {
        match self {
            Lister::Store(lister) => lister.watch(feeds, after).await.map(Events::Store),
            Lister::Upstream(lister) => lister
                .watch(after)
                .await
                .map(|e| Events::Upstream(Box::new(e))),
        }
    }

    /// The objects of feed `index` alone at `revision`; `None` when this lister relists
    /// whole (an upstream reflection has one feed).
    async fn list_feed(
        &self,
        feeds: &[Feed],
        index: usize,
        revision: Revision,
    ) -> Option<Result<Vec<Arc<watchkeeper_core::Object>>, Stop>> {
        match self {
            Lister::Store(lister) => Some(lister.list_feed(feeds, index, revision).await),
            Lister::Upstream(_) => None,
        }
    }

    /// Records that the source reached `revision`.
    fn observed(&self, revision: Revision) {
        match self {
            Lister::Store(lister) => lister.observed(revision),
            Lister::Upstream(lister) => lister.observed(revision),
        }
    }
}

impl Events {
    async fn next(&mut self, last: Revision) -> Item {
        match self {
            Events::Store(events) => events.next().await,
            Events::Upstream(events) => events.next(last).await,
        }
    }
}

/// Where relist requests for one reflection's feeds go (by resource name, `plural.group`).
#[derive(Debug, Clone)]
pub struct RelistRequests(UnboundedSender<String>);

impl RelistRequests {
    /// A sender and the receiver its reflection reads.
    #[must_use]
    pub fn channel() -> (RelistRequests, UnboundedReceiver<String>) {
        let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
        (RelistRequests(sender), receiver)
    }

    /// Asks for a relist of the feed of resource `name`; false when the reflection has
    /// stopped.
    pub fn request(&self, name: &str) -> bool {
        self.0.send(name.to_owned()).is_ok()
    }
}

/// What the reflector does next after a relist request.
enum Next {
    Item(Item),
    Relist(String),
}

/// Brings the feeds in line with the CRDs at `revision` (see [`Catalog`]): the CRDs' cache at
/// `at` with `changes` applied (the CRDs' changes at `revision`, not sent yet). True when
/// the feeds changed (the watch must be opened again with the new feeds).
async fn reconcile(
    catalog: &mut Catalog,
    lister: &Lister,
    feeds: &mut Vec<Feed>,
    (at, changes): (Revision, &[watchkeeper_core::Change]),
    revision: Revision,
    observer: Option<&Arc<dyn Observer>>,
) -> Result<bool, Stop> {
    let wanted = catalog.wanted(at, changes).await;
    let (stop, start, restarts) = catalog.plan(&wanted);
    let changed = !stop.is_empty() || !start.is_empty();
    // A resource started again because its schema reads differently is replaced without a
    // gap (`Catalog::replace`); every other stop goes first.
    for name in &stop {
        feeds.retain(|feed| name_of(&feed.def) != *name);
        if !restarts.contains(name) {
            catalog.stop(name, at).await;
        }
    }
    for resource in start {
        let name = name_of(&resource.def);
        // A restart that cannot start stops the old resource (as a plain stop would have):
        // it is no longer fed.
        let restart = restarts.contains(&name);
        let started = match catalog.start(&resource) {
            Ok(started) => started,
            Err(error) => {
                tracing::error!(resource = %name, %error, "cannot start the cache of a custom resource");
                if restart {
                    catalog.stop(&name, at).await;
                }
                continue;
            }
        };
        feeds.push(started.feed);
        let index = feeds.len() - 1;
        let objects = match lister.list_feed(feeds, index, revision).await {
            Some(Ok(objects)) => objects,
            Some(Err(stop)) => {
                feeds.pop();
                if restart {
                    catalog.stop(&name, at).await;
                }
                return Err(stop);
            }
            None => Vec::new(),
        };
        // The observer is told once the resource is served (below), so a look it queues finds
        // it served, never in the gap before; still before any change of it is told.
        let told = observer.map(|_| objects.clone());
        if feeds[index]
            .input
            .send_async(Input::Reset(revision, objects))
            .await
            .is_err()
        {
            feeds.pop();
            if restart {
                catalog.stop(&name, at).await;
            }
            continue;
        }
        if restart {
            catalog
                .replace(&resource, started.resource, started.others, (revision, at))
                .await;
        } else {
            catalog
                .serve(&resource, started.resource, started.others, revision)
                .await;
        }
        if let (Some(observer), Some(objects)) = (observer, told) {
            observer.reset(&feeds[index].def, revision, &objects);
        }
    }
    Ok(changed)
}

/// What a store reflection carries besides its feeds.
#[derive(Default)]
pub struct Extras {
    /// The CRDs' catalog, when it serves them.
    pub catalog: Option<Catalog>,
    /// Told of every object fed (the controllers over a store, the RBAC index in both modes).
    pub observer: Option<Arc<dyn Observer>>,
}

/// Counts reflections until each has loaded once, then marks the server ready.
#[derive(Debug)]
pub struct Readiness {
    remaining: AtomicUsize,
    status: Arc<ReflectorStatus>,
}

impl Readiness {
    /// Readiness after `reflections` first loads.
    #[must_use]
    pub fn new(reflections: usize, status: Arc<ReflectorStatus>) -> Arc<Readiness> {
        Arc::new(Readiness {
            remaining: AtomicUsize::new(reflections),
            status,
        })
    }

    /// One reflection has loaded `feeds` at `revision`, once each of their caches has applied
    /// it: ready then means every read serves the list (and the replay), not only that they
    /// were sent to the caches' threads (a `resourceVersion=0` read right after could get a
    /// cache still behind it).
    async fn loaded(&self, feeds: &[Feed], revision: Revision) {
        for feed in feeds {
            feed.input.applied(revision).await;
        }
        if self.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.status.ready.store(true, Ordering::Release);
            tracing::info!("caches loaded");
        }
    }
}

/// The CRDs' changes among a revision's changes by feed name.
fn definitions_of(
    by_name: &BTreeMap<String, Vec<watchkeeper_core::Change>>,
) -> Vec<watchkeeper_core::Change> {
    by_name
        .get(&Catalog::definitions_feed())
        .cloned()
        .unwrap_or_default()
}

/// Runs one reflection (`lister` over `feeds`, with the `catalog` of CRDs when it serves
/// them) until a cache stops.
pub async fn run(
    lister: Lister,
    mut feeds: Vec<Feed>,
    status: Arc<ReflectorStatus>,
    readiness: Arc<Readiness>,
    backoff: Backoff,
    mut relists: UnboundedReceiver<String>,
    extras: Extras,
) {
    let Extras {
        mut catalog,
        observer,
    } = extras;
    let name = lister.name();
    let mut delay = backoff.initial;
    let mut first = true;
    // A first list older than the source (history rebuilding): loaded once the watch has
    // replayed up to this revision.
    let mut pending_ready: Option<Revision> = None;
    loop {
        let (listed, mut events) = match lister.list(&feeds, first).await {
            Ok(listed) => listed,
            Err(Stop::Relist(error) | Stop::Resume(error) | Stop::Restart(error)) => {
                tracing::warn!(source = %name, %error, ?delay, "listing failed; retrying");
                tokio::time::sleep(jitter(delay)).await;
                delay = backoff.next(delay);
                continue;
            }
        };
        let revision = listed.revision;
        let ready_at = listed.ready_at;
        let total: usize = listed.objects.iter().map(Vec::len).sum();
        // Counted before the caches see it: whoever observes the reloaded cache (a 410, an
        // object only the list has) also observes the count.
        status.lists.fetch_add(1, Ordering::Relaxed);
        for (feed, objects) in feeds.iter().zip(listed.objects) {
            if let Some(observer) = &observer {
                observer.reset(&feed.def, revision, &objects);
            }
            if feed
                .input
                .send_async(Input::Reset(revision, objects))
                .await
                .is_err()
            {
                return;
            }
        }
        lister.observed(revision);
        if let Some(catalog) = catalog.as_mut()
            && let Err(Stop::Relist(error) | Stop::Resume(error) | Stop::Restart(error)) =
                reconcile(
                    catalog,
                    &lister,
                    &mut feeds,
                    (revision, &[]),
                    revision,
                    observer.as_ref(),
                )
                .await
        {
            tracing::warn!(source = %name, %error, ?delay, "starting custom resources failed; relisting");
            tokio::time::sleep(jitter(delay)).await;
            delay = backoff.next(delay);
            continue;
        }
        if first {
            first = false;
            if ready_at > revision {
                pending_ready = Some(ready_at);
            } else {
                readiness.loaded(&feeds, revision).await;
            }
        } else if pending_ready.take().is_some() {
            readiness.loaded(&feeds, revision).await;
        }
        tracing::debug!(source = %name, revision, objects = total, "listed");
        let mut last = revision;
        loop {
            let mut stream = match events.take() {
                Some(stream) => stream,
                None => match lister.watch(&feeds, last).await {
                    Ok(stream) => stream,
                    Err(Stop::Relist(reason)) => {
                        tracing::warn!(source = %name, %reason, "relisting (watchers get 410)");
                        break;
                    }
                    Err(Stop::Restart(error)) => {
                        tracing::warn!(source = %name, %error, "watching failed; relisting");
                        tokio::time::sleep(jitter(delay)).await;
                        delay = backoff.next(delay);
                        break;
                    }
                    Err(Stop::Resume(error)) => {
                        tracing::debug!(source = %name, %error, last, "watching failed; retrying");
                        tokio::time::sleep(jitter(delay)).await;
                        delay = backoff.next(delay);
                        continue;
                    }
                },
            };
            let before = last;
            let stop = loop {
                let next = tokio::select! {
                    biased;
                    Some(index) = relists.recv() => Next::Relist(index),
                    item = stream.next(last) => Next::Item(item),
                };
                let item = match next {
                    Next::Item(item) => item,
                    Next::Relist(relist) => {
                        let Some(index) = feeds.iter().position(|f| name_of(&f.def) == relist)
                        else {
                            continue;
                        };
                        let feed = &feeds[index];
                        match lister.list_feed(&feeds, index, last).await {
                            Some(Ok(objects)) => {
                                tracing::warn!(source = %name, resource = %crate::cache::name_of(&feed.def), revision = last, objects = objects.len(), "relisted one resource on request (its watchers get 410)");
                                status.lists.fetch_add(1, Ordering::Relaxed);
                                if let Some(observer) = &observer {
                                    observer.reset(&feed.def, last, &objects);
                                }
                                if feed.input.send(Input::Reset(last, objects)).is_err() {
                                    return;
                                }
                                continue;
                            }
                            Some(Err(
                                Stop::Relist(reason) | Stop::Resume(reason) | Stop::Restart(reason),
                            )) => {
                                break Stop::Relist(format!(
                                    "relisting one resource failed ({reason}); relisting all"
                                ));
                            }
                            None => break Stop::Relist("a relist was requested".to_owned()),
                        }
                    }
                };
                match item {
                    Item::Changes(revision, mut changes) => {
                        // A CRD changed: the served set changes first (new caches reset at
                        // this revision, gone ones removed), then the revision goes out.
                        let mut feeds_changed = false;
                        if let Some(catalog) = catalog.as_mut()
                            && feeds
                                .iter()
                                .position(|f| watchkeeper_api::crd::is_crd(&f.def))
                                .is_some_and(|index| changes.contains_key(&index))
                        {
                            let by_name: BTreeMap<String, Vec<watchkeeper_core::Change>> =
                                std::mem::take(&mut changes)
                                    .into_iter()
                                    .filter_map(|(index, changes)| {
                                        feeds.get(index).map(|f| (name_of(&f.def), changes))
                                    })
                                    .collect();
                            let definitions = definitions_of(&by_name);
                            match reconcile(
                                catalog,
                                &lister,
                                &mut feeds,
                                (last, &definitions),
                                revision,
                                observer.as_ref(),
                            )
                            .await
                            {
                                Ok(changed) => feeds_changed = changed,
                                Err(stop) => break stop,
                            }
                            changes = by_name
                                .into_iter()
                                .filter_map(|(name, changes)| {
                                    feeds
                                        .iter()
                                        .position(|f| name_of(&f.def) == name)
                                        .map(|index| (index, changes))
                                })
                                .collect();
                        }
                        // The changes are in feed order: walked beside the feeds, not looked
                        // up and removed once per feed (~50 per write).
                        let mut changes = changes.into_iter();
                        let mut next = changes.next();
                        for (index, feed) in feeds.iter().enumerate() {
                            let mine = match next.take() {
                                Some((changed, mine)) if changed == index => {
                                    next = changes.next();
                                    Some(mine)
                                }
                                other => {
                                    next = other;
                                    None
                                }
                            };
                            let sent = match mine {
                                Some(changes) => {
                                    if let Some(observer) = &observer {
                                        observer.changes(&feed.def, revision, &changes);
                                    }
                                    feed.input
                                        .send_async(Input::Revision(revision, changes))
                                        .await
                                }
                                None => feed.input.progress(revision),
                            };
                            if sent.is_err() {
                                return;
                            }
                        }
                        lister.observed(revision);
                        last = last.max(revision);
                        if pending_ready.is_some_and(|at| last >= at) {
                            pending_ready = None;
                            readiness.loaded(&feeds, last).await;
                        }
                        if feeds_changed {
                            break Stop::Resume("the served custom resources changed".to_owned());
                        }
                    }
                    Item::Progress(revision) => {
                        for feed in &feeds {
                            if feed.input.progress(revision).is_err() {
                                return;
                            }
                        }
                        lister.observed(revision);
                        last = last.max(revision);
                        if pending_ready.is_some_and(|at| last >= at) {
                            pending_ready = None;
                            readiness.loaded(&feeds, last).await;
                        }
                    }
                    Item::Stopped(stop) => break stop,
                }
            };
            drop(stream);
            if last > before {
                delay = backoff.initial;
            }
            match stop {
                Stop::Relist(reason) => {
                    tracing::warn!(source = %name, %reason, "relisting (watchers get 410)");
                    break;
                }
                Stop::Restart(error) => {
                    tracing::warn!(source = %name, %error, "the watch failed; relisting");
                    tokio::time::sleep(jitter(delay)).await;
                    break;
                }
                Stop::Resume(reason) => {
                    tracing::debug!(source = %name, %reason, last, "resuming the watch");
                    if last == before {
                        tokio::time::sleep(jitter(delay)).await;
                        delay = backoff.next(delay);
                    }
                }
            }
        }
    }
}

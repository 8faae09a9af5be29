//! Reads from the caches with Kubernetes' consistency (KEP-2340, KEP-4988, KEP-6404).
//!
//! ## Guarantees
//! - A consistent LIST or GET (`resourceVersion` unset) reads the source's current revision,
//!   waits until the cache has dispatched it (at most the fresh wait), and serves the cache's
//!   state. Over etcd, a wait that lasts `--fresh-nudge-ms` nudges the store's watch
//!   ([`crate::source::nudge`]), so a revision etcd reached outside the prefix never leaves it
//!   waiting for etcd's progress notification. When the wait runs out the read is [`ReadError::Uncached`] (504 Timeout with
//!   `retryAfterSeconds: 1` from the store; forwarded by an upstream source), never a silent
//!   fallback to stale data.
//! - `resourceVersion=0`: the cache as it is. `resourceVersion=N`: wait for N, then the latest
//!   state (NotOlderThan) or exactly the snapshot at N (Exact, 410 if gone).
//! - Pages are served from the snapshot at the first page's revision; the continue token
//!   carries that revision and the last key, and is validated (garbage: 400; expired: 410;
//!   both [`ReadError::Uncached`], as the source may still serve them).

use crate::cache::wake_relay::after_watchers;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use serde_json::json;
use watchkeeper_api::ApiError;
use watchkeeper_api::query::{ContinueToken, Match, Options, ResourceVersion};
use watchkeeper_core::selector::LabelOperator;
use watchkeeper_core::{Object, Revision, Snapshot, WatchCache};

use crate::cache::Resource;

/// Counters of the write and read paths (for `/metrics` and the benchmarks).
#[derive(Debug, Default)]
pub struct PathCounters {
    /// Update conflicts seen by guaranteed updates.
    pub conflicts: AtomicU64,
    /// Writes skipped because they changed nothing.
    pub noop_writes: AtomicU64,
    /// Guaranteed updates whose attempt from the cache as it was failed without a transaction
    /// (not found, a precondition, a refusal, nothing to change) and ran again from a cache
    /// proven fresh.
    pub unproven_retries: AtomicU64,
    /// Consistent GETs served from the store (switch off).
    pub store_gets: AtomicU64,
    /// Objects decoded on the request path (GETs from the store).
    pub request_decodes: AtomicU64,
    /// Consistent reads that timed out waiting for the cache.
    pub fresh_timeouts: AtomicU64,
}

/// How long a read waits for a cache to reach a revision, and where timeouts are counted.
#[derive(Debug, Clone)]
pub struct Freshness {
    /// The bound (`--fresh-wait-ms`).
    pub wait: Duration,
    /// The counters (`fresh_timeouts`).
    pub counters: Arc<PathCounters>,
    /// Over etcd, the nudge a wait writes when the cache does not reach its revision soon
    /// ([`crate::source::nudge`]).
    pub nudge: Option<Arc<crate::source::nudge::Nudge>>,
}

impl Freshness {
    /// Waits until `cache` has dispatched `revision`, at most [`Freshness::wait`].
    ///
    /// # Errors
    /// 504 "Too large resource version" with `retryAfterSeconds: 1`.
    pub async fn wait(&self, cache: &WatchCache, revision: Revision) -> Result<(), ApiError> {
        if cache.dispatched() >= revision {
            return Ok(());
        }
        self.nudge_unless_reached(cache, revision);
        match tokio::time::timeout(self.wait, after_watchers(cache.wait_fresh(revision))).await {
            Ok(_) => Ok(()),
            Err(_) => {
                self.counters.fresh_timeouts.fetch_add(1, Ordering::Relaxed);
                Err(too_large(revision, cache.dispatched()))
            }
        }
    }

    /// Over etcd, nudges the store's watch ([`crate::source::nudge`]) on a task of its own
    /// unless `cache` reaches `revision` within the nudge's delay: the caller's wait goes on
    /// meanwhile, and a caller that gives up does not cancel a nudge others share.
    pub fn nudge_unless_reached(&self, cache: &WatchCache, revision: Revision) {
        let Some(nudge) = self.nudge.clone() else {
            return;
        };
        if cache.dispatched() >= revision {
            return;
        }
        let reached = cache.wait_fresh(revision);
        tokio::spawn(async move {
            if tokio::time::timeout(nudge.after(), reached).await.is_err() {
                nudge.cover(revision).await;
            }
        });
    }
}

/// 504 Timeout "Too large resource version", as the watch cache answers.
#[must_use]
pub fn too_large(requested: Revision, current: Revision) -> ApiError {
    let mut error = ApiError::timeout(
        format!("Too large resource version: {requested}, current: {current}"),
        1,
    );
    error.details = Some(json!({
        "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
        "retryAfterSeconds": 1,
    }));
    error
}

/// Why a read was not served from the cache.
#[derive(Debug)]
pub enum ReadError {
    /// The answer (a 4xx, or a 5xx the source cannot help with).
    Refused(ApiError),
    /// The cache cannot serve it (not proven fresh in time, or a continue token it cannot
    /// continue): the source may (an upstream forwards it); otherwise this is the answer.
    Uncached(ApiError),
}

impl ReadError {
    /// The answer when the source does not serve an uncached read itself.
    #[must_use]
    pub fn into_api(self) -> ApiError {
        match self {
            ReadError::Refused(error) | ReadError::Uncached(error) => error,
        }
    }
}

impl From<ApiError> for ReadError {
    fn from(error: ApiError) -> ReadError {
        ReadError::Refused(error)
    }
}

/// The answer to a list: the objects of one page and the list's metadata.
#[derive(Debug)]
pub struct ListPage {
    /// Objects in key order.
    pub items: Vec<Arc<Object>>,
    /// The list's resource version.
    pub revision: Revision,
    /// The continue token, if there is more.
    pub continue_token: Option<String>,
    /// How many items remain after this page (when known).
    pub remaining: Option<usize>,
}

/// The snapshot a read with these options is served from; `latest` is the source's current
/// revision (awaited only for a consistent read).
///
/// # Errors
/// See the module docs.
pub async fn snapshot(
    resource: &Resource,
    options: &Options,
    fresh: &Freshness,
    latest: impl Future<Output = Result<Revision, ApiError>>,
) -> Result<Snapshot, ReadError> {
    let cache = resource.cache();
    match (options.resource_version, options.resource_version_match) {
        (ResourceVersion::Latest, _) => {
            let revision = latest.await?;
            fresh
                .wait(cache, revision)
                .await
                .map_err(ReadError::Uncached)?;
            Ok(cache.latest())
        }
        (ResourceVersion::Any, _) => Ok(cache.latest()),
        (ResourceVersion::At(revision), Some(Match::Exact)) => {
            fresh.wait(cache, revision).await?;
            cache.snapshot_at(revision).map_err(|e| {
                ReadError::Refused(match e {
                    watchkeeper_core::ReadError::TooOld { requested, .. } => {
                        ApiError::gone(format!("too old resource version: {requested}"))
                    }
                    watchkeeper_core::ReadError::TooLarge { requested, current } => {
                        too_large(requested, current)
                    }
                })
            })
        }
        (ResourceVersion::At(revision), _) => {
            fresh.wait(cache, revision).await?;
            Ok(cache.latest())
        }
    }
}

/// kube-apiserver's 410 for a continue token whose revision is no longer served
/// (`inconsistentContinue`), with the token that goes on from the same key at the latest
/// revision in `metadata.continue`.
fn expired_continue(start_after: &str) -> ApiError {
    ApiError {
        extra: Some(Box::new(watchkeeper_api::error::ErrorExtra {
            list_continue: Some(
                ContinueToken {
                    revision: None,
                    start_after: start_after.to_owned(),
                }
                .encode()
                .into(),
            ),
            warnings: Vec::new(),
        })),
        ..ApiError::gone("The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.".to_owned())
    }
}

/// Label and field requirement checks (a set's values counted one by one) above which a
/// LIST's selection leaves the runtime worker for the blocking pool: about a millisecond of
/// CPU in a release build (measured in debug: a 64 KB label selector, 5400 requirements, over
/// 5000 objects held a worker 1.5 s, and six of them delayed another client's GET by 5.5 s).
const INLINE_SELECTION_COST: usize = 1 << 18;

/// The requirement checks selecting from `snapshot` under `options` may take: its objects
/// times the selectors' requirements (a set's values counted one by one).
fn selection_cost(snapshot: &Snapshot, options: &Options) -> usize {
    let labels: usize = options
        .labels
        .requirements()
        .iter()
        .map(|requirement| match &requirement.operator {
            LabelOperator::In(values) | LabelOperator::NotIn(values) => values.len().max(1),
            LabelOperator::Exists
            | LabelOperator::DoesNotExist
            | LabelOperator::GreaterThan(_)
            | LabelOperator::LessThan(_) => 1,
        })
        .sum();
    let per_object = labels + options.fields.requirements().len();
    snapshot.len().saturating_mul(per_object)
}

/// Sets its flag when dropped: the selection on the blocking pool then stops.
struct StopWhenDropped(Arc<AtomicBool>);

impl Drop for StopWhenDropped {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Objects checked between two looks at the stop flag.
const STOP_CHECK_EVERY: usize = 256;

/// The first `limit` objects of `snapshot` in the namespace `prefix` after `start_after`
/// matching `options`' selectors, and how many more match; `None` when `stop` was set.
fn select(
    snapshot: &Snapshot,
    prefix: Option<&str>,
    start_after: Option<&str>,
    options: &Options,
    limit: usize,
    stop: &AtomicBool,
) -> Option<(Vec<Arc<Object>>, usize)> {
    let mut checked = 0usize;
    let mut stopped = false;
    let mut matching = snapshot.range(prefix, start_after).filter(|o| {
        checked += 1;
        if checked.is_multiple_of(STOP_CHECK_EVERY) && stop.load(Ordering::Relaxed) {
            stopped = true;
        }
        !stopped && options.labels.matches(o.labels()) && options.fields.matches(o.fields())
    });
    let mut items = Vec::new();
    for object in matching.by_ref() {
        items.push(object.clone());
        if items.len() == limit {
            break;
        }
    }
    let remaining = if items.len() == limit {
        matching.count()
    } else {
        0
    };
    (!stopped).then_some((items, remaining))
}

/// LIST: one page of the objects matching the options.
///
/// # Errors
/// As Kubernetes: 400 bad options, 410 expired continue token, 504 not fresh.
pub async fn list(
    resource: &Resource,
    namespace: Option<&str>,
    options: &Options,
    fresh: &Freshness,
    latest: impl Future<Output = Result<Revision, ApiError>>,
) -> Result<ListPage, ReadError> {
    let cache = resource.cache();
    let (snapshot, start_after) = match &options.continue_token {
        Some(token) => {
            if options.resource_version_match.is_some()
                || !matches!(options.resource_version, ResourceVersion::Latest)
            {
                return Err(ReadError::Uncached(ApiError::bad_request(
                    "specifying resource version is not allowed when using continue".to_owned(),
                )));
            }
            let token = ContinueToken::decode(token).map_err(ReadError::Uncached)?;
            let snapshot = match token.revision {
                Some(revision) => cache
                    .snapshot_at(revision)
                    .map_err(|_| ReadError::Uncached(expired_continue(&token.start_after)))?,
                // The token an expiry offered: the rest of the list, at the latest revision
                // (a consistent read, as kube-apiserver's quorum read for `"rv":-1`).
                None => {
                    let latest_options = Options {
                        resource_version: ResourceVersion::Latest,
                        resource_version_match: None,
                        ..options.clone()
                    };
                    snapshot(resource, &latest_options, fresh, latest).await?
                }
            };
            (snapshot, Some(token.start_after))
        }
        None => (snapshot(resource, options, fresh, latest).await?, None),
    };
    let prefix = namespace.map(|ns| format!("{ns}/"));
    let limit = if options.limit == 0 {
        usize::MAX
    } else {
        options.limit
    };
    let (items, remaining) = if selection_cost(&snapshot, options) <= INLINE_SELECTION_COST {
        select(
            &snapshot,
            prefix.as_deref(),
            start_after.as_deref(),
            options,
            limit,
            &AtomicBool::new(false),
        )
        .unwrap_or_default()
    } else {
        // An expensive selection (many objects times a long selector) runs on the blocking
        // pool, not on a runtime worker that other clients' requests wait for; dropped (the
        // request's deadline passed, or its client went away), it stops at its next check.
        let stop = Arc::new(AtomicBool::new(false));
        let _stop_when_dropped = StopWhenDropped(stop.clone());
        let (snapshot, options) = (snapshot.clone(), options.clone());
        let start_after = start_after.clone();
        tokio::task::spawn_blocking(move || {
            select(
                &snapshot,
                prefix.as_deref(),
                start_after.as_deref(),
                &options,
                limit,
                &stop,
            )
        })
        .await
        .map_err(|error| {
            ReadError::Uncached(ApiError::internal(format!(
                "the list's selection failed: {error}"
            )))
        })?
        .unwrap_or_default()
    };
    let continue_token = (remaining > 0).then(|| {
        ContinueToken {
            revision: Some(snapshot.revision()),
            start_after: items
                .last()
                .map(|o| o.key().to_string())
                .unwrap_or_default(),
        }
        .encode()
    });
    Ok(ListPage {
        items,
        revision: snapshot.revision(),
        continue_token,
        remaining: (remaining > 0).then_some(remaining),
    })
}

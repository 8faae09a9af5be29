//! Watch streams: a watch request becomes a core watch on the resource's cache and a response
//! body that pulls from its queue.
//!
//! ## Under back-pressure
//! The response body pulls from the watcher's queue, up to `--watch-chunk-items` items per chunk
//! (64 by default). When the socket or the HTTP/2 window is full, hyper stops polling the body, the
//! queue fills, and the next push from the cache fails: the watcher goes unsynced and is
//! caught up later on the same connection (stall-resume mode). It is never force-closed for
//! that. Errors after the stream started are in-stream `ERROR` events carrying a Status with
//! HTTP 200 (kube-rs retries forever on an HTTP-level 410).
//!
//! ## On shutdown
//! A stream is not cut when shutdown begins: the cache ends it (`WatchEnd::Shutdown`) after
//! every item it was owed and, when the client allows bookmarks, a final bookmark at the last
//! dispatched revision, so the client can resume from it on another instance or on this one
//! restarted. A client that does not read loses its connection when the shutdown grace
//! period (`--shutdown-grace-period-ms`) ends.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderValue, header};
use axum::response::Response;
use bytes::{Buf as _, BufMut, Bytes, BytesMut};
use watchkeeper_api::ApiError;
use watchkeeper_api::negotiate::{Conversion, Format};
use watchkeeper_api::query::{Options, ResourceVersion};
use watchkeeper_api::watch_frame::{
    PROTOBUF_WATCH_CONTENT_TYPE, encode_frames, encode_protobuf_frames, protobuf_error_frame,
};
use watchkeeper_core::{FieldSelector, WatchEnd, WatchItem, WatchRequest, WatchStart};

use crate::cache::Resource;
use crate::http::chunk::Chunk;
use crate::http::state::App;
use crate::operator::WatchInfo;
use crate::request::ResourceRequest;
use crate::respond::{negotiated, now_unix};
use crate::source::read::too_large;

/// Maps Kubernetes' watch parameters onto the core's start: a watch without a resource
/// version starts after the source's revision for watches ([`crate::source::Source::watch_revision`]).
async fn watch_start(
    app: &App,
    resource: &Resource,
    options: &Options,
) -> Result<WatchStart, ApiError> {
    let revision = match options.resource_version {
        ResourceVersion::Latest => Some(app.source.watch_revision(resource).await?),
        ResourceVersion::Any => None,
        ResourceVersion::At(revision) => Some(revision),
    };
    Ok(match (options.send_initial_events, revision) {
        (Some(true), min_revision) => {
            // The initial state waits for the cache to reach the revision: over etcd, nudge
            // its watch when the store moved on outside the prefix (`source::nudge`).
            if let Some(revision) = min_revision {
                app.source
                    .freshness()
                    .nudge_unless_reached(resource.cache(), revision);
            }
            WatchStart::InitialState { min_revision }
        }
        (_, Some(revision)) => WatchStart::After(revision),
        (_, None) => WatchStart::Now,
    })
}

/// A watch: the response streams the watcher's events until its deadline, the client goes
/// away, or the server shuts down.
///
/// # Errors
/// 400/422 bad options, 503 when the source cannot be asked.
pub async fn watch(
    app: &Arc<App>,
    request: &ResourceRequest<'_>,
    resource: &Arc<Resource>,
) -> Result<Response, ApiError> {
    let negotiated = negotiated(&request.context.headers, Some(&resource.def))?;
    let conversion = negotiated.conversion;
    // A resource known to hold objects outside the protobuf schemas is watched in JSON when
    // the client accepts it: a protobuf watch would end (410) at each such object.
    let format = if negotiated.json_fallback && resource.protobuf_incomplete() {
        Format::Json
    } else {
        negotiated.format
    };
    let mut options = request.options.clone();
    if let Some(name) = request.target.name {
        // A watch of one object is a watch with fieldSelector metadata.name.
        let by_name = FieldSelector::parse(&format!("metadata.name={name}"))
            .map_err(|e| ApiError::bad_request(e.to_string()))?;
        options.fields = merge_fields(&options.fields, &by_name);
    }
    options.validate_watch(&resource.def.plural)?;
    let start = watch_start(app, resource, &options).await?;
    let timeout = match options.timeout_seconds {
        Some(seconds) => Duration::from_secs(seconds),
        None => {
            // Like kube-apiserver: a random deadline in [min, 2 * min).
            let min = app.config.min_request_timeout;
            min + min.mul_f64(rand::random::<f64>())
        }
    };
    let now = app.clock.now();
    let namespace = request.target.namespace;
    let watch_request = WatchRequest {
        start,
        namespace: namespace.map(str::to_owned),
        labels: options.labels.clone(),
        fields: options.fields.clone(),
        allow_bookmarks: options.allow_bookmarks,
        deadline: Some(now + timeout),
        queue_capacity: None,
    };
    let watch = resource.cache().watch(watch_request, now);
    let headers = &request.context.headers;
    let user_agent = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let id = app.watches.register(WatchInfo {
        resource: resource.name(),
        namespace: namespace.map(str::to_owned),
        label_selector: options.label_selector_text.clone(),
        field_selector: field_text(&options),
        user_agent,
        user: request.context.user.name.clone(),
        started: now,
        queue: watch.queue().clone(),
        client: request.context.peer,
    });
    let chunk = app.config.watch_chunk_items;
    let stream = WatchStream {
        watch,
        app: app.clone(),
        resource: resource.clone(),
        id,
        conversion,
        format,
        chunk,
        // Grows with the batches actually taken (an idle watch holds none): a preallocated
        // chunk's worth cost every idle stream 64 items × 16 bytes. (Reverted once for
        // changing the outcome of `tests/limits.rs`' never-reading clients; it did not: that
        // outcome raced the watches' deadline, BENCHMARKS.md invocation AD.)
        buffer: Vec::new(),
        done: false,
        delivered: app.debug.delivered_counter(&resource.name()),
        relay_waker: None,
        parked: false,
    };
    // On shutdown the cache ends the watch (after a final bookmark when the client allows
    // bookmarks); the stream delivers what it was owed until then, and the connection layer
    // drops a connection that has not finished within the shutdown grace period.
    // A resource that stops being served (its CRD deleted or changed) has its cache end the
    // watch the same way, after every event owed, and the end becomes a 404 error
    // ([`end_error`]).
    let body = WatchBody {
        stream,
        parts: Vec::new(),
    };
    // The connection takes the body out of the response and hands hyper its batches as one
    // frame each ([`crate::http::chunk`]); anything else reading the response reads it
    // through the shell, its batches copied into one piece each.
    let handoff = WatchHandoff(Arc::new(std::sync::Mutex::new(Some(Box::new(body)))));
    let mut response = Response::new(Body::new(WatchShell(handoff.clone())));
    response.extensions_mut().insert(handoff);
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(match format {
            Format::Json => "application/json",
            Format::Protobuf => PROTOBUF_WATCH_CONTENT_TYPE,
        }),
    );
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, private"),
    );
    response.extensions_mut().insert(crate::respond::KeepJson);
    Ok(response)
}

fn merge_fields(a: &FieldSelector, b: &FieldSelector) -> FieldSelector {
    let mut terms: Vec<String> = a
        .requirements()
        .iter()
        .chain(b.requirements())
        .map(|r| {
            format!(
                "{}{}{}",
                r.field,
                if r.negated { "!=" } else { "=" },
                escape_field_value(&r.value)
            )
        })
        .collect();
    terms.dedup();
    FieldSelector::parse(&terms.join(",")).unwrap_or_else(|_| b.clone())
}

fn escape_field_value(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace(',', "\\,")
        .replace('=', "\\=")
}

fn field_text(options: &Options) -> String {
    options
        .fields
        .requirements()
        .iter()
        .map(|r| {
            format!(
                "{}{}{}",
                r.field,
                if r.negated { "!=" } else { "=" },
                r.value
            )
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// The body of one watch response.
struct WatchStream {
    watch: watchkeeper_core::Watch,
    app: Arc<App>,
    resource: Arc<Resource>,
    id: u64,
    /// Objects, Tables or metadata only, as the client's `Accept` asked.
    conversion: Conversion,
    /// JSON or protobuf frames.
    format: Format,
    /// Items per chunk at most.
    chunk: usize,
    buffer: Vec<WatchItem>,
    done: bool,
    /// Events written to clients of this resource (`/debug/watchers`).
    delivered: Arc<std::sync::atomic::AtomicU64>,
    /// The task's waker behind the server's wake relay, made at the first park.
    relay_waker: Option<crate::cache::wake_relay::RelayWaker>,
    /// The last look at the queue found it empty and registered `relay_waker`: until that is
    /// woken, the queue holds nothing new for this stream.
    parked: bool,
}

impl Drop for WatchStream {
    fn drop(&mut self) {
        self.app.watches.unregister(self.id);
    }
}

impl WatchStream {
    /// Takes up to a chunk of queued items and appends their frames (and the end's, if it
    /// came) to `parts` as body pieces (see [`encode_frames`]: large objects' cached encodings
    /// are shared, not copied per watcher). Pending (with the waker registered) while the
    /// queue is empty.
    fn poll_chunk(&mut self, cx: &mut Context<'_>, parts: &mut Vec<Bytes>) -> Poll<()> {
        // Readers that dispatcher steps put on the relay's express list (a writer's answer):
        // woken from here, a runtime thread, they run soon rather than behind the runtime's
        // whole queue.
        self.app.wake_relay.wake_express();
        // Registered behind the server's wake relay: the dispatcher's and catch-up threads'
        // wake-ups reach this task from a runtime thread (see `cache::wake_relay`).
        if !self
            .relay_waker
            .as_ref()
            .is_some_and(|w| w.wakes(cx.waker()))
        {
            self.relay_waker = Some(self.app.wake_relay.waker(cx.waker()));
            self.parked = false;
        }
        let relay = self.relay_waker.as_ref().expect("made above");
        // Parked on the queue and not woken since: nothing in the queue changed (every change
        // a consumer can see — an item, a refill to make, the end — wakes the registered
        // waker), so the poll is answered without the queue's locks. A watch response that
        // writes one event per wake-up is polled three times: for the chunk (whose pop, when
        // it empties the queue, parks and registers the waker in the same lock), right after
        // it, and by hyper again after the flush (these two, and polls on socket readiness,
        // are answered here).
        if !relay.take_woken() && self.parked {
            return Poll::Pending;
        }
        let (polled, parked) = self.watch.poll_pop_many_parking(
            &mut Context::from_waker(relay.waker()),
            self.chunk,
            &mut self.buffer,
        );
        self.parked = parked;
        let Poll::Ready(end) = polled else {
            return Poll::Pending;
        };
        let stats = &self.resource.cache().metrics().encode;
        let events = self
            .buffer
            .iter()
            .filter(|item| !matches!(item, WatchItem::Bookmark { .. }))
            .count();
        self.delivered
            .fetch_add(events as u64, std::sync::atomic::Ordering::Relaxed);
        let mut failed = None;
        match self.format {
            // Tables are made here (an event's once for all its watchers, per second; an
            // initial object's per watcher), at a cost of the objects' sizes times the printer
            // columns: a heavy chunk is converted with the runtime worker's other tasks handed
            // on (`Offload::hand_on`), so a watch of a custom resource whose columns cost
            // seconds a row does not hold the other clients (10 such watches' initial states
            // held every other request for 30 s).
            Format::Json if self.conversion == Conversion::Table => {
                let columns = 1 + self.resource.def.printer_columns.len();
                let size = self
                    .buffer
                    .iter()
                    .map(|item| match item {
                        WatchItem::Initial(object) => object.json_size(),
                        WatchItem::Event { event, .. } => event
                            .object()
                            .or(event.prev())
                            .map_or(0, |object| object.json_size()),
                        WatchItem::Bookmark { .. } => 0,
                    })
                    .sum::<usize>()
                    .saturating_mul(columns);
                let (def, buffer) = (&self.resource.def, &self.buffer);
                // The second the ages are computed in.
                let now = now_unix();
                self.app.offload.hand_on(size, || {
                    encode_frames(parts, def, buffer, Conversion::Table, stats, now);
                });
            }
            Format::Json => encode_frames(
                parts,
                &self.resource.def,
                &self.buffer,
                self.conversion,
                stats,
                // Only a Table reads the clock (a read per chunk otherwise).
                0,
            ),
            Format::Protobuf => {
                failed = encode_protobuf_frames(
                    parts,
                    &self.resource.def,
                    &self.buffer,
                    self.conversion,
                    stats,
                )
                .err();
            }
        }
        self.buffer.clear();
        if let Some(error) = failed {
            // An object the protobuf schemas cannot hold: the watch ends here.
            self.resource.mark_protobuf_incomplete();
            self.done = true;
            parts.push(error_frame(self.format, &error));
            return Poll::Ready(());
        }
        if let Some(end) = end {
            self.done = true;
            // A converted version whose conversion failed ends its watches with the failure.
            let failure = matches!(end, WatchEnd::Expired { .. })
                .then(|| self.resource.conversion_failure())
                .flatten();
            if let Some(error) = failure.or_else(|| end_error(&end, self.resource.is_removed())) {
                parts.push(error_frame(self.format, &error));
            }
        }
        Poll::Ready(())
    }
}

/// A watch response's body: the frames of the watcher's queue, a chunk at a time, until the
/// watch ends or the resource is no longer served.
pub struct WatchBody {
    stream: WatchStream,
    /// Body pieces of the next batch (reused from batch to batch, see [`Chunk::from_parts`]).
    parts: Vec<Bytes>,
}

impl WatchBody {
    /// The frames of the next batch of queued items (up to `--watch-chunk-items`) as one
    /// chunk, `None` once the watch ended; pending (with the waker registered) while the
    /// queue is empty.
    pub fn poll_chunk(&mut self, cx: &mut Context<'_>) -> Poll<Option<Chunk>> {
        loop {
            if !self.parts.is_empty() {
                return Poll::Ready(Some(Chunk::from_parts(&mut self.parts)));
            }
            if self.stream.done {
                return Poll::Ready(None);
            }
            if self.stream.poll_chunk(cx, &mut self.parts).is_ready() {
                continue;
            }
            return Poll::Pending;
        }
    }
}

/// A watch response's body, put in the response's extensions for the connection to take
/// ([`crate::http::conn_body::ConnBody`]); the response's own body is a [`WatchShell`] of it.
#[derive(Clone)]
pub struct WatchHandoff(Arc<std::sync::Mutex<Option<Box<WatchBody>>>>);

impl WatchHandoff {
    /// The watch's body, taken out of the response (whose own body then ends at once, or
    /// when the layers around it end).
    #[must_use]
    pub fn take(&self) -> Option<Box<WatchBody>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }
}

/// A watch response's own body: the watch's batches, each copied into one piece, unless the
/// connection took the watch's body (then it has no frames).
struct WatchShell(WatchHandoff);

impl hyper::body::Body for WatchShell {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Bytes>, Infallible>>> {
        let mut body = (self.0)
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(events) = body.as_mut() else {
            return Poll::Ready(None);
        };
        match ready!(events.poll_chunk(cx)) {
            Some(mut chunk) => {
                let bytes = chunk.copy_to_bytes(chunk.remaining());
                Poll::Ready(Some(Ok(hyper::body::Frame::data(bytes))))
            }
            None => {
                *body = None;
                Poll::Ready(None)
            }
        }
    }
}

/// An in-stream ERROR event carrying `error`'s Status.
fn error_frame(format: Format, error: &ApiError) -> Bytes {
    if format == Format::Protobuf {
        return protobuf_error_frame(error);
    }
    let mut out = BytesMut::new();
    out.put_slice(b"{\"type\":\"ERROR\",\"object\":");
    out.put_slice(error.to_status().to_string().as_bytes());
    out.put_slice(b"}\n");
    out.freeze()
}

/// The in-stream error for how a watch ended, if it is one.
fn end_error(end: &WatchEnd, removed: bool) -> Option<ApiError> {
    match end {
        // The resource is no longer served: an in-stream error rather than a clean end, so a
        // client does not reconnect to a watch that would only get 404.
        WatchEnd::Shutdown if removed => Some(ApiError::path_not_found()),
        WatchEnd::Expired {
            position, floor, ..
        } => Some(ApiError::gone(format!(
            "too old resource version: {position} ({floor})"
        ))),
        WatchEnd::TooLargeResourceVersion { requested, current } => {
            Some(too_large(*requested, *current))
        }
        WatchEnd::Unresponsive
        | WatchEnd::InitialNoProgress
        | WatchEnd::Deadline
        | WatchEnd::Shutdown => None,
    }
}

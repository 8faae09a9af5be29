//! The bare hyper pipe: the reference the fan-out figures are measured against (issue 15).
//!
//! A minimal HTTP/1.1 server with no cache, no store and no API machinery, answering the same
//! requests as the fan-out load generator sends to watchkeeper:
//! - a watch (`GET ...?watch=true...`) registers a bounded per-connection queue
//!   ([`QUEUE_CAPACITY`] events) and streams what it receives, up to [`BATCH`] queued events
//!   per body chunk (one event as its shared bytes, several copied into one chunk);
//! - any other request with a body (the writers' PATCHes) becomes one pre-encoded ~1 KiB
//!   `MODIFIED` watch event, encoded once and pushed as a shared reference into every
//!   watcher's queue (a full queue makes the write wait: back-pressure, nothing is lost), and
//!   is answered 200 with the event's object;
//! - any other request (a list) is answered with an empty list.
//!
//! It runs on its own 2-worker runtime in the bench process, like the in-process watchkeeper
//! server, so the bench process's CPU time is the pipe's while the clients run in a child.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http_body_util::{BodyExt as _, Full, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use hyper::{Request, Response};
use tokio::sync::mpsc;

/// Events a watcher's queue holds (watchkeeper's largest queue capacity by default).
pub const QUEUE_CAPACITY: usize = 1_000;
/// Queued events written as one body chunk at most (watchkeeper's `--watch-chunk-items`).
pub const BATCH: usize = 64;
/// Bytes of payload in each event's object (the fan-out ConfigMaps' payload).
pub const PAYLOAD: usize = 1024;

type Body = BoxBody<Bytes, Infallible>;

#[derive(Default)]
struct Shared {
    watchers: Mutex<Vec<mpsc::Sender<Bytes>>>,
    revision: AtomicU64,
}

impl Shared {
    /// One write: encodes the event once and queues it for every watcher.
    async fn write(&self) -> Bytes {
        let revision = self.revision.fetch_add(1, Ordering::Relaxed) + 1;
        let object = format!(
            "{{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{{\"name\":\"cm\",\"namespace\":\"default\",\"resourceVersion\":\"{revision}\",\"labels\":{{\"app\":\"bench\"}}}},\"data\":{{\"payload\":\"{}\",\"sent\":\"0\"}}}}",
            "x".repeat(PAYLOAD)
        );
        let event = Bytes::from(format!("{{\"type\":\"MODIFIED\",\"object\":{object}}}\n"));
        let mut waiting = Vec::new();
        {
            let mut watchers = self.watchers.lock().unwrap_or_else(|e| e.into_inner());
            watchers.retain(|tx| match tx.try_send(event.clone()) {
                Ok(()) => true,
                Err(mpsc::error::TrySendError::Full(_)) => {
                    waiting.push(tx.clone());
                    true
                }
                Err(mpsc::error::TrySendError::Closed(_)) => false,
            });
        }
        for tx in waiting {
            let _ = tx.send(event.clone()).await;
        }
        Bytes::from(object)
    }

    fn watch(&self) -> Body {
        let (tx, rx) = mpsc::channel(QUEUE_CAPACITY);
        self.watchers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(tx);
        let chunks = futures_util::stream::unfold(rx, |mut rx| async move {
            let mut batch = Vec::with_capacity(BATCH);
            if rx.recv_many(&mut batch, BATCH).await == 0 {
                return None;
            }
            let chunk = if batch.len() == 1 {
                batch.pop().unwrap_or_default()
            } else {
                let mut out = BytesMut::with_capacity(batch.iter().map(Bytes::len).sum());
                for event in &batch {
                    out.extend_from_slice(event);
                }
                out.freeze()
            };
            Some((Ok::<_, Infallible>(Frame::data(chunk)), rx))
        });
        StreamBody::new(chunks).boxed()
    }
}

async fn serve(
    shared: Arc<Shared>,
    request: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    let is_watch = request
        .uri()
        .query()
        .is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"));
    let has_body = request.method() != hyper::Method::GET;
    let body: Body = if is_watch {
        shared.watch()
    } else if has_body {
        // The request body is read (as a server must) and not interpreted.
        let _ = request.into_body().collect().await;
        Full::new(shared.write().await).boxed()
    } else {
        Full::new(Bytes::from_static(
            b"{\"kind\":\"ConfigMapList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"0\"},\"items\":[]}",
        ))
        .boxed()
    };
    let mut response = Response::new(body);
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    Ok(response)
}

/// A running pipe on its own runtime.
pub struct Pipe {
    runtime: tokio::runtime::Runtime,
    /// Its address.
    pub addr: SocketAddr,
}

impl Pipe {
    /// Starts the pipe on a loopback port.
    ///
    /// # Errors
    /// The runtime or the listener could not start.
    pub fn start() -> Result<Pipe, String> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("pipe")
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .map_err(|e| e.to_string())?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let shared = Arc::new(Shared::default());
        runtime.spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let shared = shared.clone();
                tokio::spawn(async move {
                    let service =
                        hyper::service::service_fn(move |request| serve(shared.clone(), request));
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok(Pipe { runtime, addr })
    }

    /// Stops the pipe (its connections are dropped).
    pub fn stop(self) {
        self.runtime.shutdown_timeout(Duration::from_secs(5));
    }
}

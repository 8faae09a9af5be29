//! The audit webhook backend, as kube-apiserver's `--audit-webhook-config-file`: the events
//! POSTed as `audit.k8s.io/v1` `EventList`s to the server a kubeconfig names.
//!
//! ## Guarantees
//! - **Where and how**: the kubeconfig's current context gives the server URL, its CA
//!   (`certificate-authority[-data]`, else the system's roots), the client certificate and key
//!   (`client-certificate[-data]`, `client-key[-data]`) or a bearer token, read with kube-rs'
//!   kubeconfig loader (kube's `clientcmd` semantics); a file that cannot be read or used is a
//!   startup error naming it. Each batch is one `POST` of
//!   `{"kind":"EventList","apiVersion":"audit.k8s.io/v1","metadata":{},"items":[...]}` to the
//!   server URL, the items in the order the events were queued.
//! - **Modes** (`--audit-webhook-mode`): `batch` (the default) queues each event
//!   (`--audit-webhook-batch-buffer-size`, 10000) and sends batches of at most
//!   `--audit-webhook-batch-max-size` (400) events, a batch leaving at the latest
//!   `--audit-webhook-batch-max-wait` (30 s) after its first event was taken; an event that
//!   finds the queue full is dropped and counted (`apiserver_audit_error_total{plugin="buffered"}`,
//!   kube's buffered backend's name). `blocking` and `blocking-strict`: the request waits for
//!   its event's POST (events queued meanwhile go in the same POST); a failure is counted and
//!   the request served (`blocking`) or, for its `RequestReceived` event, failed with kube's 500
//!   (`blocking-strict`).
//! - **Retries**: a POST answered 429, 500 or 504, or whose connection was reset, is retried
//!   after `--audit-webhook-initial-backoff` (10 s), then 1.5 times longer each time (±20 %),
//!   five attempts in all (kube's `DefaultShouldRetry` and backoff); any other failure, or the
//!   last, counts the batch's events in `apiserver_audit_error_total{plugin="webhook"}`.
//! - **Off the runtime**: the events are batched and encoded on a thread of their own; only
//!   the POST runs on the runtime (the thread waits for it). A shutdown waits for the events
//!   queued before it to be sent (or failed), as the log's.
//!
//! - **Throttled** (`batch` mode, kube's defaults): at most `--audit-webhook-batch-throttle-qps`
//!   (10) batches a second, `--audit-webhook-batch-throttle-burst` (15) at once, unless
//!   `--audit-webhook-batch-throttle-enable false`; the thread waits, the queue fills, and then
//!   drops.
//!
//! ## Not here
//! - `--audit-webhook-version` other than `audit.k8s.io/v1`, `--audit-webhook-truncate-*`.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::backend::{Backend, Counters, Queued, next_batch};
use crate::config::AuditWebhookConfig;
use crate::config::Batching;
use crate::source::webhook::kubeconfig::Target as WebhookTarget;

/// kube's retry attempts of one batch (its backoff's `Steps`).
const ATTEMPTS: u32 = 5;

/// The webhook backend cannot start.
#[derive(Debug, thiserror::Error)]
#[error("--audit-webhook-config-file {path}: {cause}")]
pub struct WebhookError {
    /// The kubeconfig's path.
    pub path: String,
    /// Why it cannot be used.
    pub cause: String,
}

/// Where batches go.
struct Target {
    webhook: WebhookTarget,
    runtime: tokio::runtime::Handle,
}

/// Starts the webhook backend over the kubeconfig `config` names (run within the runtime).
///
/// # Errors
/// The kubeconfig cannot be read or used, or the thread started.
pub(super) async fn start(
    config: &AuditWebhookConfig,
    path: &Path,
    counters: Arc<Counters>,
) -> Result<Backend, WebhookError> {
    let failed = |cause: String| WebhookError {
        path: path.display().to_string(),
        cause,
    };
    let target = Target {
        webhook: WebhookTarget::load(path).await.map_err(failed)?,
        runtime: tokio::runtime::Handle::current(),
    };
    let settings = *config;
    Backend::spawn(
        "audit-webhook",
        config.mode,
        config.batch_buffer_size,
        move |receiver| run(&receiver, &target, &settings, &counters),
    )
    .map_err(|e| failed(e.to_string()))
}

/// The backend's thread: batches, sends, reports.
fn run(
    receiver: &flume::Receiver<Queued>,
    target: &Target,
    settings: &AuditWebhookConfig,
    counters: &Counters,
) {
    let batching = Batching {
        mode: settings.mode,
        max_size: settings.batch_max_size,
        max_wait: settings.batch_max_wait,
        throttle: settings.throttle,
    };
    let mut throttle = batching.throttled();
    while let Some(batch) = next_batch(receiver, &batching) {
        if let Some(throttle) = &mut throttle {
            throttle.accept();
        }
        let mut items: Vec<Vec<u8>> = Vec::with_capacity(batch.len());
        let mut waiting = Vec::new();
        for queued in batch {
            if let Some(line) = (queued.encode)() {
                items.push(line);
            }
            waiting.extend(queued.done);
        }
        let sent = items.is_empty() || send(target, settings, &items, counters);
        for done in waiting {
            let _ = done.send(sent);
        }
    }
}

/// `items` (JSON lines) as one `EventList`.
fn event_list(items: &[Vec<u8>]) -> Vec<u8> {
    let mut body =
        br#"{"kind":"EventList","apiVersion":"audit.k8s.io/v1","metadata":{},"items":["#.to_vec();
    for (index, item) in items.iter().enumerate() {
        if index > 0 {
            body.push(b',');
        }
        body.extend_from_slice(item.trim_ascii_end());
    }
    body.extend_from_slice(b"]}");
    body
}

/// POSTs `items`, retrying as kube does; whether they were delivered (a failure is counted).
fn send(
    target: &Target,
    settings: &AuditWebhookConfig,
    items: &[Vec<u8>],
    counters: &Counters,
) -> bool {
    let body = event_list(items);
    let mut wait = settings.initial_backoff;
    for attempt in 1..=ATTEMPTS {
        let outcome = target.runtime.block_on(post(target, body.clone()));
        match outcome {
            Ok(()) => return true,
            Err((retry, cause)) => {
                if !retry || attempt == ATTEMPTS {
                    tracing::warn!(%cause, events = items.len(), "audit webhook: cannot send events");
                    break;
                }
                let jitter = 1.0 + 0.2 * (rand::random::<f64>() * 2.0 - 1.0);
                std::thread::sleep(wait.mul_f64(jitter));
                wait = wait.mul_f64(1.5);
            }
        }
    }
    counters
        .webhook_errors
        .fetch_add(items.len() as u64, Ordering::Relaxed);
    false
}

/// One POST: `Err((retry, cause))` when it failed.
async fn post(target: &Target, body: Vec<u8>) -> Result<(), (bool, String)> {
    // The answer is read (and dropped) so the connection can be reused.
    let (status, _) = target
        .webhook
        .post(body, usize::MAX, None)
        .await
        .map_err(|failure| (failure.reset, failure.cause))?;
    match status {
        200..=299 => Ok(()),
        429 | 500 | 504 => Err((true, format!("the server responded with status {status}"))),
        _ => Err((false, format!("the server responded with status {status}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_list_holds_the_lines_in_order_without_their_newlines() {
        let list = event_list(&[b"{\"a\":1}\n".to_vec(), b"{\"b\":2}\n".to_vec()]);
        let parsed: serde_json::Value = serde_json::from_slice(&list).unwrap();
        assert_eq!(
            parsed,
            serde_json::json!({"kind": "EventList", "apiVersion": "audit.k8s.io/v1",
                "metadata": {}, "items": [{"a": 1}, {"b": 2}]})
        );
    }
}

//! The audit log, as kube-apiserver's `--audit-policy-file` and `--audit-log-path` write it:
//! one `audit.k8s.io/v1` `Event` per line for each stage of each request the policy selects;
//! and the audit webhook (`--audit-webhook-config-file`, [`webhook`]), which receives the same
//! events as `EventList`s. With both, every event goes to both, each in its own mode.
//!
//! ## Guarantees
//! - **Audit-Id**: every response carries an `Audit-Id` header, as kube-apiserver's
//!   `WithAuditInit` sets it whether or not a policy is configured: the request's own
//!   `Audit-ID` header when it sent one, else a new random (v4) UUID. It is the events'
//!   `auditID`.
//! - **What is logged**: with a policy and a log path or a webhook, each request is evaluated against the
//!   policy ([`policy`]) with the authenticated user (before impersonation, as kube's filter
//!   order has it); level `None` logs nothing. Otherwise, unless the policy omits the stage:
//!   `RequestReceived` before the request is handled; `ResponseStarted` when a long-running
//!   request's (a watch's, a pod's `log`, `exec`, `attach`, `portforward`, `proxy`) headers
//!   are sent; `ResponseComplete` when the response's last byte was handed to the connection
//!   (or the client went away); `Panic` when the handler panicked (the panic then goes on). A
//!   request whose authentication fails is logged as kube's failed-authentication event: one
//!   `ResponseStarted` event with an empty `user`.
//! - **Fields** as kube writes them: `level`, `auditID`, `stage`, `requestURI`, `verb` (kube's
//!   resource verbs, `watch` for `?watch=1`; a non-resource request's method in lower case),
//!   `user`, `impersonatedUser`, `sourceIPs` (kube's `SourceIPs`: `X-Forwarded-For`, then
//!   `X-Real-Ip`, then the peer), `userAgent`, `objectRef` (resource, namespace, name,
//!   apiGroup, apiVersion, subresource; a create's or update's name, namespace, uid and
//!   resourceVersion completed from its body), `responseStatus` (`code`, and for a refusal
//!   the Status's `status`, `message`, `reason`, `details`), `requestObject` (level `Request`
//!   and up, writes with a JSON body: the body as sent, a patch as the patch),
//!   `responseObject` (level `RequestResponse`, JSON answers that are not long-running),
//!   `requestReceivedTimestamp`, `stageTimestamp` (RFC 3339, microseconds) and
//!   `annotations` (`authorization.k8s.io/decision` and `authorization.k8s.io/reason`,
//!   admission's — PodSecurity's, ValidatingAdmissionPolicy's — and any [`annotate`] adds).
//!   `omitManagedFields` drops `metadata.managedFields` from both objects (and list items).
//! - **Bodies**: a YAML request body is logged as the JSON it is read as, a protobuf one as
//!   the JSON the store source decodes (in caching-proxy mode, where nothing decodes it, it is
//!   left out). A YAML or protobuf answer is logged as its object, JSON-encoded (decoded on the
//!   log's thread, as kube logs the object whatever the encoding; one the decoder does not
//!   know is left out). Not logged as an object: an answer longer than
//!   `--audit-log-max-object-bytes`, left out with the event annotated
//!   `audit.k8s.io/truncated: "true"`.
//! - **Cost**: without a policy a request pays the `Audit-Id` header only (a random UUID and
//!   its header value, kube's `WithAuditInit`) and a few task-local reads
//!   ([`context`]): no policy lookup, no body copy, no event. With one, only the selected requests' bodies are kept, shared
//!   with the request (no copy), and every event is encoded to JSON on the log's own thread
//!   ([`backend`]), never on a runtime worker.
//! - **Bounds**: events queued at most `--audit-log-batch-buffer-size` (`batch` drops and
//!   counts beyond it; the blocking modes wait); each holds at most the request's body
//!   (bounded by `--max-request-body-bytes`) and `--audit-log-max-object-bytes` of answer.

pub mod backend;
pub mod context;
pub mod policy;
pub mod webhook;

mod event;
mod request;

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};

use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue};
use axum::response::Response;
use bytes::Bytes;
use futures_util::FutureExt;
use futures_util::future::{BoxFuture, Either};
use watchkeeper_api::ApiError;

pub use backend::Counters;
pub use context::{annotate, authorized, carry, is_audited, refused, request_body};
pub use policy::{Level, Policy, PolicyError, Stage};

use crate::auth::Auth;
use crate::config::{AuditConfig, AuditMode};
use backend::Backend;
use context::Context as AuditContext;

/// The response header naming a request's audit ID.
pub const AUDIT_ID_HEADER: &str = "audit-id";

/// The auditing of one server: its policy, the log's queue and the counters.
pub struct Audit {
    policy: Policy,
    /// The log's and the webhook's queues (each gets every event).
    backends: Vec<Backend>,
    counters: Arc<Counters>,
    auth: Arc<Auth>,
    max_object_bytes: usize,
}

impl std::fmt::Debug for Audit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Audit").finish_non_exhaustive()
    }
}

/// The audit log cannot start: the policy is refused or the log cannot be opened.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// kube's refusal of the policy file.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// The webhook's kubeconfig cannot be read or used.
    #[error(transparent)]
    Webhook(#[from] webhook::WebhookError),
    /// The log file cannot be opened.
    #[error("cannot open the audit log {path}: {source}")]
    Log {
        /// `--audit-log-path`.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

impl Audit {
    /// Loads the policy and starts the log's writer and the webhook's sender; `None` when
    /// nothing is to be logged (no policy, or neither a log path nor a webhook: the policy is
    /// still read and validated).
    ///
    /// # Errors
    /// See [`AuditError`].
    pub async fn start(
        config: &AuditConfig,
        auth: Arc<Auth>,
    ) -> Result<Option<Arc<Audit>>, AuditError> {
        let Some(policy_file) = &config.policy_file else {
            return Ok(None);
        };
        let policy = Policy::load(policy_file)?;
        if config.log_path.is_none() && config.webhook_config_file.is_none() {
            tracing::warn!(
                "--audit-policy-file is given without --audit-log-path or --audit-webhook-config-file: no audit events are written"
            );
            return Ok(None);
        }
        let counters = Arc::new(Counters::default());
        let mut backends = Vec::new();
        if let Some(path) = &config.log_path {
            backends.push(
                Backend::start(config, path, counters.clone()).map_err(|source| {
                    AuditError::Log {
                        path: path.display().to_string(),
                        source,
                    }
                })?,
            );
        }
        if let Some(path) = &config.webhook_config_file {
            backends.push(webhook::start(&config.webhook, path, counters.clone()).await?);
        }
        Ok(Some(Arc::new(Audit {
            policy,
            backends,
            counters,
            auth,
            max_object_bytes: config.max_object_bytes,
        })))
    }

    /// Waits until every event queued so far is written (or failed): the server's shutdown
    /// calls it, so that a batch queue is not lost with the process.
    pub async fn drain(&self) {
        for backend in &self.backends {
            backend.write(Box::new(|| None)).await;
        }
    }

    /// The counters (for `/metrics`).
    #[must_use]
    pub fn counters(&self) -> &Counters {
        &self.counters
    }
}

/// What a request's events share: fixed when the request arrives, plus what it learns.
pub struct Record {
    audit: Arc<Audit>,
    id: String,
    decision: policy::Decision,
    received_micros: i64,
    info: request::Info,
    context: Arc<AuditContext>,
}

impl std::fmt::Debug for Record {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Record")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// Whether a request of `verb` at `level` keeps its body (the `requestObject`, and the
/// `objectRef` a create or update completes from it).
fn wants_request_body(level: Level, verb: &str) -> bool {
    level >= Level::Metadata
        && matches!(
            verb,
            "create" | "update" | "patch" | "delete" | "deletecollection"
        )
}

/// How a stage ended, for its event.
#[derive(Default)]
struct Outcome {
    code: Option<u16>,
    /// The status written instead of the refusal (a panic, a failed authentication).
    status: Option<ApiError>,
    response: Option<Bytes>,
    /// How `response` is encoded.
    response_format: Option<event::AnswerFormat>,
    response_gzip: bool,
    truncated: bool,
}

impl Record {
    /// The event of `stage`, to be encoded on a backend's thread (once, whichever backend
    /// first needs it): one encoding per backend; `None` when omitted.
    fn event(self: &Arc<Self>, stage: Stage, outcome: Outcome) -> Option<Vec<Encode>> {
        if self.decision.omit_stages.contains(stage) {
            return None;
        }
        self.audit.counters.events.fetch_add(1, Ordering::Relaxed);
        let stage_micros = event::now_micros();
        let (annotations, refusal, request_body) = {
            let state = self.context.lock();
            (
                state.annotations.clone(),
                state.refusal.clone(),
                state.request_body.clone(),
            )
        };
        let record = self.clone();
        let encode: Encode = Box::new(move || {
            Some(event::encode(&event::Parts {
                record: &record,
                stage,
                stage_micros,
                outcome,
                annotations,
                refusal,
                request_body,
            }))
        });
        if self.audit.backends.len() == 1 {
            return Some(vec![encode]);
        }
        let shared = Arc::new(SharedEncoding {
            encode: std::sync::Mutex::new(Some(encode)),
            line: std::sync::OnceLock::new(),
        });
        Some(
            self.audit
                .backends
                .iter()
                .map(|_| {
                    let shared = shared.clone();
                    Box::new(move || shared.line()) as Encode
                })
                .collect(),
        )
    }

    /// Hands the event of `stage` to each backend as its mode says: waits for it (blocking
    /// modes) or queues it (batch; a full queue counted as a drop). `false` when a
    /// `blocking-strict` backend could not write it.
    async fn emit(self: &Arc<Self>, stage: Stage, outcome: Outcome) -> bool {
        let Some(encodings) = self.event(stage, outcome) else {
            return true;
        };
        let mut stored = true;
        for (backend, encode) in self.audit.backends.iter().zip(encodings) {
            match backend.mode() {
                AuditMode::Batch => {
                    let queued = backend::Queued { encode, done: None };
                    if !backend.try_queue(queued) {
                        self.audit.counters.dropped.fetch_add(1, Ordering::Relaxed);
                    }
                }
                mode @ (AuditMode::Blocking | AuditMode::BlockingStrict) => {
                    if !backend.write(encode).await && mode == AuditMode::BlockingStrict {
                        stored = false;
                    }
                }
            }
        }
        stored
    }

    /// Hands the event of `stage` to each backend without waiting (a response whose client
    /// is gone): a full queue drops it, counted.
    fn emit_now(self: &Arc<Self>, stage: Stage, outcome: Outcome) {
        let Some(encodings) = self.event(stage, outcome) else {
            return;
        };
        for (backend, encode) in self.audit.backends.iter().zip(encodings) {
            if !backend.try_queue(backend::Queued { encode, done: None }) {
                self.audit.counters.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// The encoding of one event for one backend: its JSON line.
type Encode = Box<dyn FnOnce() -> Option<Vec<u8>> + Send>;

/// An event shared by several backends, encoded by the first that needs it.
struct SharedEncoding {
    encode: std::sync::Mutex<Option<Encode>>,
    line: std::sync::OnceLock<Option<Vec<u8>>>,
}

impl SharedEncoding {
    fn line(&self) -> Option<Vec<u8>> {
        self.line
            .get_or_init(|| {
                let encode = self
                    .encode
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .take();
                encode.and_then(|encode| encode())
            })
            .clone()
    }
}

/// The tower layer that audits every request (outermost: it sees 401s, 403s and 429s too).
#[derive(Clone, Debug)]
pub struct AuditLayer {
    audit: Option<Arc<Audit>>,
}

impl AuditLayer {
    /// The layer; without `audit` it only sets `Audit-Id`.
    #[must_use]
    pub fn new(audit: Option<Arc<Audit>>) -> AuditLayer {
        AuditLayer { audit }
    }
}

impl<S> tower::Layer<S> for AuditLayer {
    type Service = AuditService<S>;

    fn layer(&self, inner: S) -> AuditService<S> {
        AuditService {
            inner,
            audit: self.audit.clone(),
        }
    }
}

/// The service of [`AuditLayer`].
#[derive(Clone, Debug)]
pub struct AuditService<S> {
    inner: S,
    audit: Option<Arc<Audit>>,
}

impl<S> tower::Service<Request> for AuditService<S>
where
    S: tower::Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Either<WithAuditId<S::Future>, BoxFuture<'static, Result<Response, Infallible>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let id = audit_id(request.headers());
        match &self.audit {
            None => Either::Left(WithAuditId {
                inner: self.inner.call(request),
                id: Some(id),
            }),
            Some(audit) => {
                let ready = self.inner.clone();
                let inner = std::mem::replace(&mut self.inner, ready);
                Either::Right(Box::pin(audited(audit.clone(), inner, request, id)))
            }
        }
    }
}

pin_project_lite::pin_project! {
    /// A response future that sets `Audit-Id` on its response.
    pub struct WithAuditId<F> {
        #[pin]
        inner: F,
        id: Option<HeaderValue>,
    }
}

impl<F: Future<Output = Result<Response, Infallible>>> Future for WithAuditId<F> {
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let Ok(mut response) = futures_util::ready!(this.inner.poll(cx));
        if let Some(id) = this.id.take() {
            response.headers_mut().insert(AUDIT_ID_HEADER, id);
        }
        Poll::Ready(Ok(response))
    }
}

/// The request's own `Audit-ID`, or a new v4 UUID.
fn audit_id(headers: &HeaderMap) -> HeaderValue {
    if let Some(id) = headers.get(AUDIT_ID_HEADER).filter(|v| !v.is_empty()) {
        return id.clone();
    }
    let uuid = uuid::Builder::from_random_bytes(rand::random()).into_uuid();
    let mut text = [0u8; uuid::fmt::Hyphenated::LENGTH];
    let text = uuid.hyphenated().encode_lower(&mut text);
    HeaderValue::from_str(text).unwrap_or_else(|_| HeaderValue::from_static(""))
}

async fn audited<S>(
    audit: Arc<Audit>,
    mut inner: S,
    request: Request,
    id: HeaderValue,
) -> Result<Response, Infallible>
where
    S: tower::Service<Request, Response = Response, Error = Infallible>,
{
    let received_micros = event::now_micros();
    let prepared = audit.auth.prepare(request.headers()).await;
    let peer = request
        .extensions()
        .get::<Arc<crate::limits::Connection>>()
        .and_then(|c| c.peer.as_ref());
    audit
        .auth
        .prepare_impersonation(request.uri().path(), request.headers(), peer, &prepared)
        .await;
    let info = request::Info::of(&audit.auth, &request, &prepared);
    // The limits layer authenticates with it too (the token webhook is asked once).
    let mut request = request;
    request.extensions_mut().insert(prepared);
    let decision = audit.policy.evaluate(&info.attributes());
    if decision.level == Level::None {
        let Ok(mut response) = inner.call(request).await;
        response.headers_mut().insert(AUDIT_ID_HEADER, id);
        return Ok(response);
    }
    audit.counters.levels[decision.level as usize].fetch_add(1, Ordering::Relaxed);
    let record = Arc::new(Record {
        audit: audit.clone(),
        id: id.to_str().unwrap_or_default().to_owned(),
        decision,
        received_micros,
        context: Arc::new(AuditContext::new(wants_request_body(
            decision.level,
            &info.verb,
        ))),
        info,
    });
    if record.info.user.is_some()
        && !record
            .emit(Stage::RequestReceived, Outcome::default())
            .await
    {
        audit.counters.rejected.fetch_add(1, Ordering::Relaxed);
        // kube's `responsewriters.InternalError`: plain text.
        let text = format!(
            "Internal Server Error: {:?}: failed to store audit event\n",
            record.info.request_uri
        );
        let mut response = Response::new(axum::body::Body::from(text));
        *response.status_mut() = axum::http::StatusCode::INTERNAL_SERVER_ERROR;
        let headers = response.headers_mut();
        headers.insert(
            axum::http::header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        headers.insert(
            "x-content-type-options",
            HeaderValue::from_static("nosniff"),
        );
        headers.insert(AUDIT_ID_HEADER, id);
        return Ok(response);
    }
    let handled =
        std::panic::AssertUnwindSafe(context::scope(record.context.clone(), async move {
            let Ok(response) = inner.call(request).await;
            response
        }))
        .catch_unwind()
        .await;
    let response = match handled {
        Ok(response) => response,
        Err(panic) => {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            let status = ApiError::new(
                500,
                "InternalError",
                format!("APIServer panic'd: {message}"),
            );
            let outcome = Outcome {
                code: Some(500),
                status: Some(status),
                ..Outcome::default()
            };
            record.emit(Stage::Panic, outcome).await;
            std::panic::resume_unwind(panic);
        }
    };
    let (mut parts, body) = response.into_parts();
    parts.headers.insert(AUDIT_ID_HEADER, id);
    let code = parts.status.as_u16();
    if record.info.user.is_none() {
        // kube's failed-authentication event: ResponseStarted only.
        let outcome = Outcome {
            code: Some(code),
            ..Outcome::default()
        };
        record.emit(Stage::ResponseStarted, outcome).await;
        return Ok(Response::from_parts(parts, body));
    }
    if record.info.long_running {
        let outcome = Outcome {
            code: Some(code),
            ..Outcome::default()
        };
        record.emit(Stage::ResponseStarted, outcome).await;
    }
    let header = |name: axum::http::HeaderName| {
        parts
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    let content_type = header(axum::http::header::CONTENT_TYPE);
    // kube logs the answer's object, JSON-encoded, whatever the answer's encoding.
    let format = event::AnswerFormat::of(&content_type);
    let capture = record.decision.level == Level::RequestResponse
        && !record.info.long_running
        && format.is_some();
    let body = event::AuditBody::new(
        body,
        record,
        code,
        capture.then_some(format).flatten(),
        header(axum::http::header::CONTENT_ENCODING) == "gzip",
    );
    Ok(Response::from_parts(parts, axum::body::Body::new(body)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn audit_ids_are_v4_uuids_or_the_clients() {
        let id = audit_id(&HeaderMap::new());
        let text = id.to_str().unwrap();
        let parsed = uuid::Uuid::parse_str(text).unwrap();
        assert_eq!(parsed.get_version_num(), 4);
        assert_ne!(audit_id(&HeaderMap::new()), id);
        let mut headers = HeaderMap::new();
        headers.insert("audit-id", HeaderValue::from_static("mine"));
        assert_eq!(audit_id(&headers), "mine");
    }
}

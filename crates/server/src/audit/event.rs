//! An event's JSON line (kube's `audit.k8s.io/v1` `Event`, in its field order), encoded on the
//! log's thread, and the response body that writes `ResponseComplete` when it ends.

use std::collections::BTreeMap;
use std::io::Read;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use futures_util::future::BoxFuture;
use hyper::body::{Frame, SizeHint};
use serde_json::Value;
use watchkeeper_api::ApiError;

use super::{Outcome, Record, Stage};
use crate::auth::User;

/// Now, in Unix microseconds.
pub(super) fn now_micros() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

/// What one event is made of.
pub(super) struct Parts<'a> {
    pub(super) record: &'a Record,
    pub(super) stage: Stage,
    pub(super) stage_micros: i64,
    pub(super) outcome: Outcome,
    pub(super) annotations: BTreeMap<String, String>,
    pub(super) refusal: Option<ApiError>,
    pub(super) request_body: Option<Bytes>,
}

fn push_str(out: &mut Vec<u8>, key: &str, value: &str) {
    out.extend_from_slice(format!(",\"{key}\":").as_bytes());
    // Writing a string into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, value);
}

fn push_raw(out: &mut Vec<u8>, key: &str, raw: &str) {
    out.extend_from_slice(format!(",\"{key}\":{raw}").as_bytes());
}

fn user_json(user: Option<&User>) -> String {
    let Some(user) = user else {
        return "{}".to_owned();
    };
    let mut out = Vec::new();
    out.extend_from_slice(b"{\"username\":");
    let _ = serde_json::to_writer(&mut out, &user.name);
    if !user.uid.is_empty() {
        push_str(&mut out, "uid", &user.uid);
    }
    if !user.groups.is_empty() {
        out.extend_from_slice(b",\"groups\":");
        let _ = serde_json::to_writer(&mut out, &user.groups);
    }
    if !user.extra.is_empty() {
        out.extend_from_slice(b",\"extra\":");
        let _ = serde_json::to_writer(&mut out, &user.extra);
    }
    out.push(b'}');
    String::from_utf8(out).unwrap_or_default()
}

/// A body's JSON as an event holds it: compact, in kube's field order, without
/// `managedFields` when the policy says so; `None` when it is not JSON.
fn object_json(bytes: &[u8], omit_managed_fields: bool) -> Option<(String, Value)> {
    let mut value: Value = serde_json::from_slice(bytes).ok()?;
    if omit_managed_fields {
        strip_managed_fields(&mut value);
    }
    let text = if value.is_object() {
        watchkeeper_api::object_body(&value).trim_end().to_owned()
    } else {
        value.to_string()
    };
    Some((text, value))
}

fn strip_managed_fields(value: &mut Value) {
    if let Some(metadata) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.remove("managedFields");
    }
    if let Some(items) = value.get_mut("items").and_then(Value::as_array_mut) {
        items.iter_mut().for_each(strip_managed_fields);
    }
}

fn status_json(code: u16, status: Option<&ApiError>) -> String {
    let Some(error) = status else {
        return format!("{{\"metadata\":{{}},\"code\":{code}}}");
    };
    let mut out = Vec::new();
    out.extend_from_slice(b"{\"metadata\":{},\"status\":\"Failure\"");
    push_str(&mut out, "message", &error.message);
    if !error.reason.is_empty() {
        push_str(&mut out, "reason", &error.reason);
    }
    if let Some(details) = &error.details {
        push_raw(&mut out, "details", &details.to_string());
    }
    push_raw(&mut out, "code", &code.to_string());
    out.push(b'}');
    String::from_utf8(out).unwrap_or_default()
}

fn gunzip(bytes: &[u8], limit: usize) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .take(limit as u64 + 1)
        .read_to_end(&mut out)
        .ok()?;
    (out.len() <= limit).then_some(out)
}

/// The event's line (with its newline).
pub(super) fn encode(parts: &Parts<'_>) -> Vec<u8> {
    let record = parts.record;
    let info = &record.info;
    let omit_managed_fields = record.decision.omit_managed_fields;
    let level = record.decision.level;
    let mut annotations = parts.annotations.clone();
    let mut out = Vec::with_capacity(1024);
    out.extend_from_slice(b"{\"kind\":\"Event\",\"apiVersion\":\"audit.k8s.io/v1\"");
    push_str(&mut out, "level", level.as_str());
    push_str(&mut out, "auditID", &record.id);
    push_str(&mut out, "stage", parts.stage.as_str());
    push_str(&mut out, "requestURI", &info.request_uri);
    push_str(&mut out, "verb", &info.verb);
    push_raw(&mut out, "user", &user_json(info.user.as_ref()));
    if let Some(impersonated) = &info.impersonated {
        push_raw(&mut out, "impersonatedUser", &user_json(Some(impersonated)));
    }
    push_raw(
        &mut out,
        "sourceIPs",
        &serde_json::to_string(&info.source_ips).unwrap_or_default(),
    );
    if let Some(agent) = &info.user_agent {
        push_str(&mut out, "userAgent", agent);
    }
    // The request's body, after RequestReceived (kube reads it in the handler).
    let request_object = match (&parts.request_body, parts.stage) {
        (_, Stage::RequestReceived) | (None, _) => None,
        (Some(bytes), _) => object_json(bytes, omit_managed_fields),
    };
    if let Some(object_ref) = &info.object_ref {
        let mut object_ref = object_ref.clone();
        let (mut uid, mut resource_version) = (String::new(), String::new());
        if matches!(info.verb.as_str(), "create" | "update")
            && let Some((_, body)) = &request_object
            && let Some(metadata) = body.get("metadata")
        {
            let field = |name: &str| {
                metadata
                    .get(name)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned()
            };
            if object_ref.namespace.is_empty() {
                object_ref.namespace = field("namespace");
            }
            if object_ref.name.is_empty() {
                object_ref.name = field("name");
            }
            uid = field("uid");
            resource_version = field("resourceVersion");
        }
        out.extend_from_slice(b",\"objectRef\":{");
        let mut first = true;
        for (key, value) in [
            ("resource", &object_ref.resource),
            ("namespace", &object_ref.namespace),
            ("name", &object_ref.name),
            ("uid", &uid),
            ("apiGroup", &object_ref.api_group),
            ("apiVersion", &object_ref.api_version),
            ("resourceVersion", &resource_version),
            ("subresource", &object_ref.subresource),
        ] {
            if value.is_empty() {
                continue;
            }
            if !first {
                out.push(b',');
            }
            first = false;
            let _ = serde_json::to_writer(&mut out, key);
            out.push(b':');
            let _ = serde_json::to_writer(&mut out, value);
        }
        out.push(b'}');
    }
    if let Some(code) = parts.outcome.code {
        let status = parts
            .outcome
            .status
            .as_ref()
            .or(parts.refusal.as_ref().filter(|r| r.code == code));
        push_raw(&mut out, "responseStatus", &status_json(code, status));
    }
    if level >= super::Level::Request
        && let Some((text, _)) = &request_object
    {
        push_raw(&mut out, "requestObject", text);
    }
    if parts.outcome.truncated {
        annotations.insert("audit.k8s.io/truncated".to_owned(), "true".to_owned());
    }
    if level >= super::Level::RequestResponse
        && let Some(response) = &parts.outcome.response
    {
        let limit = record.audit.max_object_bytes;
        let decoded = if parts.outcome.response_gzip {
            gunzip(response, limit)
        } else {
            Some(response.to_vec())
        };
        let json = decoded.and_then(|bytes| match parts.outcome.response_format {
            Some(AnswerFormat::Yaml) => watchkeeper_api::yaml::json_from_yaml_body(&bytes).ok(),
            Some(AnswerFormat::Protobuf) => watchkeeper_api::protobuf::decode_any(&bytes)
                .ok()
                .and_then(|value| serde_json::to_vec(&value).ok()),
            Some(AnswerFormat::Json) | None => Some(bytes),
        });
        if let Some((text, _)) = json
            .as_deref()
            .and_then(|bytes| object_json(bytes, omit_managed_fields))
        {
            push_raw(&mut out, "responseObject", &text);
        }
    }
    push_str(
        &mut out,
        "requestReceivedTimestamp",
        &watchkeeper_api::time::rfc3339_micro_from_unix(record.received_micros),
    );
    push_str(
        &mut out,
        "stageTimestamp",
        &watchkeeper_api::time::rfc3339_micro_from_unix(parts.stage_micros),
    );
    if !annotations.is_empty() {
        push_raw(
            &mut out,
            "annotations",
            &serde_json::to_string(&annotations).unwrap_or_default(),
        );
    }
    out.extend_from_slice(b"}\n");
    out
}

/// How an answer kept for `responseObject` is encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum AnswerFormat {
    /// `application/json`.
    Json,
    /// `application/yaml`.
    Yaml,
    /// `application/vnd.kubernetes.protobuf`.
    Protobuf,
}

impl AnswerFormat {
    /// The format of an answer of `content_type`, `None` for another (a table is JSON).
    pub(super) fn of(content_type: &str) -> Option<AnswerFormat> {
        if content_type.starts_with("application/json") {
            Some(AnswerFormat::Json)
        } else if content_type.starts_with("application/yaml") {
            Some(AnswerFormat::Yaml)
        } else if watchkeeper_api::is_protobuf_media_type(content_type) {
            Some(AnswerFormat::Protobuf)
        } else {
            None
        }
    }
}

/// A response body that writes its request's `ResponseComplete` event when it ends (in the
/// blocking modes, before it reports its end) or is dropped unfinished, keeping up to
/// `--audit-log-max-object-bytes` of it for the event when the level asks for the response.
pub(super) struct AuditBody {
    inner: axum::body::Body,
    record: Option<Arc<Record>>,
    code: u16,
    capture: Option<BytesMut>,
    format: Option<AnswerFormat>,
    gzip: bool,
    truncated: bool,
    writing: Option<BoxFuture<'static, bool>>,
}

impl AuditBody {
    pub(super) fn new(
        inner: axum::body::Body,
        record: Arc<Record>,
        code: u16,
        capture: Option<AnswerFormat>,
        gzip: bool,
    ) -> AuditBody {
        AuditBody {
            inner,
            record: Some(record),
            code,
            capture: capture.map(|_| BytesMut::new()),
            format: capture,
            gzip,
            truncated: false,
            writing: None,
        }
    }

    fn outcome(&mut self) -> Outcome {
        Outcome {
            code: Some(self.code),
            status: None,
            response: self.capture.take().map(BytesMut::freeze),
            response_format: self.format,
            response_gzip: self.gzip,
            truncated: self.truncated,
        }
    }
}

impl hyper::body::Body for AuditBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = &mut *self;
        let limit = this.record_limit();
        if let Some(writing) = &mut this.writing {
            futures_util::ready!(writing.as_mut().poll(cx));
            this.writing = None;
            return Poll::Ready(None);
        }
        match futures_util::ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
            Some(Ok(frame)) => {
                if let Some(data) = frame.data_ref()
                    && let Some(captured) = &mut this.capture
                {
                    if captured.len() + data.len() > limit {
                        this.capture = None;
                        this.truncated = true;
                    } else {
                        captured.extend_from_slice(data);
                    }
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Some(Err(error)) => Poll::Ready(Some(Err(error))),
            None => {
                let Some(record) = this.record.take() else {
                    return Poll::Ready(None);
                };
                let outcome = this.outcome();
                let mut writing: BoxFuture<'static, bool> =
                    Box::pin(async move { record.emit(Stage::ResponseComplete, outcome).await });
                if writing.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(None);
                }
                this.writing = Some(writing);
                Poll::Pending
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.record.is_none() && self.writing.is_none() && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl AuditBody {
    fn record_limit(&self) -> usize {
        self.record
            .as_ref()
            .map_or(usize::MAX, |r| r.audit.max_object_bytes)
    }
}

impl Drop for AuditBody {
    fn drop(&mut self) {
        // Unfinished (the client went away, the connection closed): written without waiting.
        if let Some(record) = self.record.take() {
            let outcome = self.outcome();
            record.emit_now(Stage::ResponseComplete, outcome);
        }
    }
}

//! Admission webhooks (`admissionregistration.k8s.io/v1` Mutating- and
//! ValidatingWebhookConfigurations) as kube-apiserver's `MutatingAdmissionWebhook` and
//! `ValidatingAdmissionWebhook` plugins decide them
//! (`k8s.io/apiserver/pkg/admission/plugin/webhook/{generic,request,errors}`). Pure: which
//! webhooks a write calls, the AdmissionReview each is sent, what its answer means and kube's
//! words for every refusal. The calls themselves are the server's (`crate::source::webhook` there).
//!
//! ## Guarantees
//! - **Order**: [`hooks`] lists the webhooks of every configuration, configurations by name,
//!   each configuration's in its own order (kube sorts its sources by name).
//! - **Exempt**: writes of the admission configuration kinds are never sent to webhooks
//!   ([`crate::admission_policy::is_exempt`], kube's `IsExemptAdmissionConfigurationResource`).
//! - **Matching** ([`should_call`]), as kube's `ShouldCallHook`: a webhook without rules calls
//!   nothing; otherwise its `namespaceSelector` (cluster-scoped objects but Namespaces always
//!   pass; a Namespace's own labels), `objectSelector` (the new or the old object's labels),
//!   `rules` (operations, groups, versions, resources with `*` and subresources, scope) and
//!   `matchPolicy` (`Equivalent`: another served version of the resource a rule names) are the
//!   policies' matcher's; then `matchConditions` in the policies' CEL environment and budget
//!   (all true calls it; one false skips it; an error refuses the write with kube's 403 under
//!   `failurePolicy: Fail` and skips the webhook under `Ignore`). A selector that does not
//!   parse is kube's 500.
//! - **Review** ([`review`]): the first of the webhook's `admissionReviewVersions` that is
//!   `v1` or `v1beta1`, with kube's request fields (`uid`, `kind`, `resource`, `subResource`,
//!   `requestKind`, `requestResource`, `requestSubResource`, `name`, `namespace`,
//!   `operation`, `userInfo`, `object`, `oldObject`, `dryRun`, `options`); `kind` and
//!   `resource` are the version the webhook matched, the object is sent as the request has it
//!   (not converted to that version).
//! - **Answers** ([`answer`]): kube's `VerifyAdmissionResponse` checks and words (a missing
//!   response, another uid or kind for `v1`, a patch without its type, a patch from a
//!   validating webhook); `allowed: false` is [`denied`] (`admission webhook "x" denied the
//!   request: ...` with the webhook's code, 500 when it gives none, as kube's response writer
//!   answers a code-less failure); a JSON patch applies to the object ([`patched`]).
//! - **Failures** ([`call_failed`]) are kube's 500 `failed calling webhook "x": ...`, which
//!   the caller ignores under `failurePolicy: Ignore`; a dry run to a webhook whose
//!   `sideEffects` is not `None`/`NoneOnDryRun` is [`dry_run_unsupported`], and the webhook
//!   is not called.
//! - `auditAnnotations` of an answer are read and dropped: this server has no audit log
//!   ([`Answer::audit_annotations`] is where one would take them).

use base64::Engine;
use serde_json::{Value, json};

use crate::admission_policy::{self, Attributes, Cluster, Equivalent, text};
use crate::error::ApiError;
use crate::kinds::webhooks::{REVIEW_VERSIONS, url_parts};

/// One webhook of a configuration.
#[derive(Clone, Copy, Debug)]
pub struct Hook<'c> {
    /// The configuration's name.
    pub configuration: &'c str,
    /// The webhook (an item of the configuration's `webhooks`).
    pub webhook: &'c Value,
}

impl Hook<'_> {
    /// The webhook's name.
    #[must_use]
    pub fn name(&self) -> &str {
        text(self.webhook, "/name")
    }

    /// `failurePolicy: Ignore`.
    #[must_use]
    pub fn ignores_failures(&self) -> bool {
        text(self.webhook, "/failurePolicy") == "Ignore"
    }

    /// `reinvocationPolicy: IfNeeded`.
    #[must_use]
    pub fn reinvoked_if_needed(&self) -> bool {
        text(self.webhook, "/reinvocationPolicy") == "IfNeeded"
    }

    /// `timeoutSeconds` (kube's default 10, within 1-30).
    #[must_use]
    pub fn timeout_seconds(&self) -> u64 {
        self.webhook
            .get("timeoutSeconds")
            .and_then(Value::as_u64)
            .unwrap_or(10)
            .clamp(1, 30)
    }

    /// Whether a dry run may call it (`sideEffects` `None` or `NoneOnDryRun`).
    #[must_use]
    pub fn dry_run_safe(&self) -> bool {
        matches!(text(self.webhook, "/sideEffects"), "None" | "NoneOnDryRun")
    }

    /// Its `clientConfig`.
    #[must_use]
    pub fn client_config(&self) -> &Value {
        self.webhook.get("clientConfig").unwrap_or(&Value::Null)
    }
}

/// The webhooks of `configurations`, configurations by name, each in its own order.
#[must_use]
pub fn hooks(configurations: &[Value]) -> Vec<Hook<'_>> {
    let mut sorted: Vec<&Value> = configurations.iter().collect();
    sorted.sort_by_key(|c| text(c, "/metadata/name"));
    sorted
        .into_iter()
        .flat_map(|configuration| {
            let name = text(configuration, "/metadata/name");
            configuration
                .get("webhooks")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(move |webhook| Hook {
                    configuration: name,
                    webhook,
                })
        })
        .collect()
}

/// Whether a write calls a webhook.
#[derive(Debug)]
pub enum Call {
    /// Not called.
    Skip,
    /// Called, the request matched as this resource.
    Call(Equivalent),
    /// The write is refused before any call (a match condition's error under `Fail`, a
    /// selector that does not parse).
    Refuse(ApiError),
}

/// kube's `ShouldCallHook` for `hook` on the write `attributes` describes (see the module's
/// guarantees).
pub fn should_call(hook: &Hook<'_>, attributes: &Attributes<'_>, cluster: &impl Cluster) -> Call {
    if admission_policy::is_exempt(attributes.def) {
        return Call::Skip;
    }
    let webhook = hook.webhook;
    let rules = webhook
        .get("rules")
        .filter(|r| r.as_array().is_some_and(|a| !a.is_empty()));
    let Some(rules) = rules else {
        return Call::Skip;
    };
    let mut criteria = serde_json::Map::new();
    for key in ["namespaceSelector", "objectSelector", "matchPolicy"] {
        if let Some(value) = webhook.get(key) {
            criteria.insert(key.to_owned(), value.clone());
        }
    }
    criteria.insert("resourceRules".to_owned(), rules.clone());
    let matched = match admission_policy::matched_as(&Value::Object(criteria), attributes, cluster)
    {
        Ok(Some(matched)) => matched,
        Ok(None) => return Call::Skip,
        Err(error) => {
            let message = error
                .strip_prefix("Internal error occurred: ")
                .unwrap_or(&error);
            return Call::Refuse(ApiError::internal(message));
        }
    };
    let conditions = webhook
        .get("matchConditions")
        .filter(|c| c.as_array().is_some_and(|a| !a.is_empty()));
    if let Some(conditions) = conditions {
        match admission_policy::conditions_hold(conditions, attributes, &matched) {
            Ok(true) => {}
            Ok(false) => return Call::Skip,
            Err(_) if hook.ignores_failures() => return Call::Skip,
            Err(error) => {
                return Call::Refuse(ApiError::forbidden(attributes.def, attributes.name, error));
            }
        }
    }
    Call::Call(matched)
}

/// The AdmissionReview version kube sends `hook`: the first of its `admissionReviewVersions`
/// it knows.
///
/// # Errors
/// kube's `webhook does not accept known AdmissionReview versions (v1, v1beta1)`.
pub fn review_version(hook: &Hook<'_>) -> Result<&'static str, String> {
    hook.webhook
        .get("admissionReviewVersions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .find_map(|v| REVIEW_VERSIONS.iter().find(|known| **known == v).copied())
        .ok_or_else(|| {
            "could not create admission objects: webhook does not accept known AdmissionReview versions (v1, v1beta1)"
                .to_owned()
        })
}

/// The AdmissionReview (`admission.k8s.io/<version>`) of the write, the request matched as
/// `matched`, with request `uid`; `object` is the object as admission has it now (a mutating
/// webhook sees what the ones before it made).
#[must_use]
pub fn review(
    version: &str,
    uid: &str,
    attributes: &Attributes<'_>,
    matched: &Equivalent,
    object: Option<&Value>,
) -> Value {
    let mut request = admission_policy::request_as(attributes, matched);
    request["uid"] = json!(uid);
    request["object"] = object.cloned().unwrap_or(Value::Null);
    request["oldObject"] = attributes.old_object.cloned().unwrap_or(Value::Null);
    json!({
        "kind": "AdmissionReview",
        "apiVersion": format!("admission.k8s.io/{version}"),
        "request": request,
    })
}

/// A webhook's verified answer (kube's `AdmissionResponse`).
#[derive(Debug, Default)]
pub struct Answer {
    /// `allowed`.
    pub allowed: bool,
    /// `status` (the `result` of the answer), if any.
    pub result: Option<Value>,
    /// The JSON patch's operations (mutating webhooks; `None` without a patch).
    pub patch: Option<Value>,
    /// `warnings`, for the answer's `Warning` headers.
    pub warnings: Vec<String>,
    /// `auditAnnotations`: kept for an audit log (this server has none yet; kube records
    /// them as `<webhook name>/<key>`).
    pub audit_annotations: Vec<(String, String)>,
}

/// Why an answer is refused: kube's `ErrCallingWebhook` reason.
fn invalid_answer(reason: &str) -> String {
    format!("received invalid webhook response: {reason}")
}

/// Reads `body`, the webhook's answer to the review of `version` with `uid`, as kube's
/// `VerifyAdmissionResponse` does (`mutating` for a mutating webhook).
///
/// # Errors
/// The reason for kube's `failed calling webhook` (undecodable, absent, mismatched).
pub fn answer(version: &str, uid: &str, mutating: bool, body: &[u8]) -> Result<Answer, String> {
    let review: Value =
        serde_json::from_slice(body).map_err(|error| format!("failed to call webhook: {error}"))?;
    let Some(response) = review.get("response").filter(|r| r.is_object()) else {
        return Err(invalid_answer("webhook response was absent"));
    };
    if version == "v1" {
        let got = text(response, "/uid");
        if got != uid {
            return Err(invalid_answer(&format!(
                "expected response.uid={uid:?}, got {got:?}"
            )));
        }
        let api_version = text(&review, "/apiVersion");
        let kind = text(&review, "/kind");
        if api_version != "admission.k8s.io/v1" || kind != "AdmissionReview" {
            let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
            return Err(invalid_answer(&format!(
                "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {group}/{version}, Kind={kind}"
            )));
        }
    }
    let patch = text(response, "/patch");
    let patch_type = response.get("patchType").and_then(Value::as_str);
    if mutating && version == "v1" {
        if !patch.is_empty() && patch_type.is_none() {
            return Err(invalid_answer(
                "webhook returned response.patch but not response.patchType",
            ));
        }
        if patch.is_empty() && patch_type.is_some() {
            return Err(invalid_answer(
                "webhook returned response.patchType but not response.patch",
            ));
        }
    } else if !mutating && (!patch.is_empty() || patch_type.is_some()) {
        return Err(invalid_answer(
            "validating webhook may not return response.patch or response.patchType",
        ));
    }
    let patch = if patch.is_empty() {
        None
    } else {
        if let Some(kind) = patch_type.filter(|t| *t != "JSONPatch") {
            return Err(format!("unsupported patch type {kind:?}"));
        }
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(patch)
            .map_err(|error| format!("failed to call webhook: {error}"))?;
        let operations: Value = serde_json::from_slice(&bytes)
            .map_err(|error| format!("received undecodable patch in webhook response: {error}"))?;
        if !operations.is_array() {
            return Err(
                "received undecodable patch in webhook response: json: cannot unmarshal object into Go value of type jsonpatch.Patch"
                    .to_owned(),
            );
        }
        Some(operations)
    };
    let strings = |key: &str| -> Vec<String> {
        response
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect()
    };
    let audit_annotations = response
        .get("auditAnnotations")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
        .collect();
    Ok(Answer {
        allowed: response.get("allowed").and_then(Value::as_bool) == Some(true),
        result: response.get("status").filter(|s| s.is_object()).cloned(),
        patch,
        warnings: strings("warnings"),
        audit_annotations,
    })
}

/// A webhook's denial (kube's `ToStatusErr` of v1.33): its status, the message prefixed by
/// `admission webhook "<name>" denied the request`; a status without a code is answered
/// 500 as kube's response writer answers it.
#[must_use]
pub fn denied(name: &str, result: Option<&Value>) -> ApiError {
    let result = result.cloned().unwrap_or_else(|| json!({}));
    let denied_by = format!("admission webhook {name:?} denied the request");
    let message = text(&result, "/message");
    let reason = text(&result, "/reason");
    let message = if !message.is_empty() {
        format!("{denied_by}: {message}")
    } else if !reason.is_empty() {
        format!("{denied_by}: {reason}")
    } else {
        format!("{denied_by} without explanation")
    };
    let code = result
        .get("code")
        .and_then(Value::as_u64)
        .and_then(|c| u16::try_from(c).ok())
        .filter(|c| *c != 0)
        .unwrap_or(500);
    ApiError {
        details: result.get("details").filter(|d| d.is_object()).cloned(),
        ..ApiError::new(code, reason, message)
    }
}

/// A call that failed (kube's `ErrCallingWebhook` as `NewInternalError`): 500 `failed calling
/// webhook "<name>": <reason>`.
#[must_use]
pub fn call_failed(name: &str, reason: &str) -> ApiError {
    ApiError::internal(format!("failed calling webhook {name:?}: {reason}"))
}

/// kube's `NewDryRunUnsupportedErr`: 400.
#[must_use]
pub fn dry_run_unsupported(name: &str) -> ApiError {
    ApiError::bad_request(format!(
        "admission webhook {name:?} does not support dry run"
    ))
}

/// `object` with a mutating webhook's JSON patch applied.
///
/// # Errors
/// kube's 500 for a patch that does not apply, or that a delete (no object) was given.
pub fn patched(name: &str, object: Option<&Value>, patch: &Value) -> Result<Value, ApiError> {
    let Some(object) = object else {
        return Err(ApiError::internal(format!(
            "admission webhook {name:?} attempted to modify the object, which is not supported for this operation"
        )));
    };
    crate::patch::json_patch(object, patch).map_err(|error| ApiError::internal(error.message))
}

/// Where a webhook is called.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// `clientConfig.url`: host (and port, 443 by default) and path.
    Url {
        /// The URL as configured (for error messages).
        url: String,
        /// `host[:port]` as in the URL.
        host: String,
        /// The path, query excluded.
        path: String,
    },
    /// `clientConfig.service`.
    Service {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// `path` (empty for `/`).
        path: String,
        /// `port` (443 by default).
        port: u16,
    },
}

impl Target {
    /// The target of a `clientConfig` (`None` when it has neither form).
    #[must_use]
    pub fn of(config: &Value) -> Option<Target> {
        if let Some(url) = config.get("url").and_then(Value::as_str) {
            let parts = url_parts(url);
            return Some(Target::Url {
                url: url.to_owned(),
                host: parts.host.to_owned(),
                path: parts.path.to_owned(),
            });
        }
        let service = config.get("service").filter(|s| s.is_object())?;
        Some(Target::Service {
            namespace: text(service, "/namespace").to_owned(),
            name: text(service, "/name").to_owned(),
            path: text(service, "/path").to_owned(),
            port: service
                .get("port")
                .and_then(Value::as_u64)
                .and_then(|p| u16::try_from(p).ok())
                .unwrap_or(443),
        })
    }

    /// The server name the webhook's certificate is verified for: the URL's host, or
    /// `<service>.<namespace>.svc`.
    #[must_use]
    pub fn server_name(&self) -> String {
        match self {
            Target::Url { host, .. } => host_only(host).to_owned(),
            Target::Service {
                namespace, name, ..
            } => format!("{name}.{namespace}.svc"),
        }
    }

    /// The URL kube's errors name, with its `timeout` parameter (kube's rest client adds
    /// the call's timeout in whole seconds).
    #[must_use]
    pub fn printed(&self, timeout_seconds: u64) -> String {
        match self {
            Target::Url { url, .. } => format!("{url}?timeout={timeout_seconds}s"),
            Target::Service {
                namespace,
                name,
                path,
                port,
            } => format!("https://{name}.{namespace}.svc:{port}{path}?timeout={timeout_seconds}s"),
        }
    }

    /// The request path with the timeout parameter.
    #[must_use]
    pub fn path_and_query(&self, timeout_seconds: u64) -> String {
        let path = match self {
            Target::Url { path, .. } | Target::Service { path, .. } => path.as_str(),
        };
        let path = if path.is_empty() { "/" } else { path };
        format!("{path}?timeout={timeout_seconds}s")
    }
}

/// `host` without its port (an IPv6 literal without its brackets).
#[must_use]
pub fn host_only(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    host.rsplit_once(':').map_or(host, |(h, _)| h)
}

#[cfg(test)]
#[path = "admission_webhook_tests.rs"]
mod tests;

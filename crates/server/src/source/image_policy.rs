//! kube-apiserver's `ImagePolicyWebhook` admission plugin (`plugin/pkg/admission/imagepolicy`,
//! off by default): a pod's images are judged by a webhook, which is POSTed an
//! `imagepolicy.k8s.io/v1alpha1` `ImageReview` and answers whether they are allowed.
//!
//! ## Guarantees
//! - **Configuration** (`imagePolicy`, in `--admission-control-config-file` or kube's legacy
//!   unversioned file; [`parse`]): `kubeConfigFile` names the webhook (a kubeconfig, read as
//!   `crate::source::webhook::kubeconfig` reads it: its server URL, CA, client certificate or
//!   token); `allowTTL` and `denyTTL` (seconds; 0: kube's 5 minutes and 30 seconds; -1: not
//!   cached; else 1 s < TTL ≤ 30 min), `retryBackoff` (milliseconds; 0: 500 ms; -1: none; else
//!   up to 5 minutes) and `defaultAllow`, normalized and refused as kube's
//!   `normalizeWebhookConfig` refuses them (`valid value is between 1s and 30m0s, got 1h0m0s`);
//!   the plugin enabled without a configuration is kube's `no config specified`.
//! - **Which writes**: every create and update of a pod (its containers' and init
//!   containers' images), and every write of its `ephemeralcontainers` (their images), as
//!   kube's plugin since CVE-2023-2727; other subresources are not looked at. The review's
//!   spec holds the images, the pod's annotations whose key contains `.image-policy.k8s.io/`,
//!   and the namespace.
//! - **Answers**: `status.allowed: false` is kube's 403 `pods "p" is forbidden: image policy
//!   webhook backend denied one or more images: <reason>` (`one or more images rejected by
//!   webhook backend` without a reason); the answer's `auditAnnotations` are recorded in the
//!   request's audit event under `imagepolicywebhook.image-policy.k8s.io/`.
//! - **Failures** (no answer within 30 s — kube's webhook request timeout —, an answer that is
//!   not a 2xx, or one that does not decode; a reset connection or a 429, 500 or 504 answer
//!   is retried up to five attempts, `retryBackoff` apart and 1.5 times longer each time): with
//!   `defaultAllow: true` the pod is admitted, annotated `alpha.image-policy.k8s.io/failed-open:
//!   "true"` and the audit event `imagepolicywebhook.image-policy.k8s.io/failed-open: "true"`;
//!   else kube's 403 with the failure (`pods "p" is forbidden: Error contacting webhook: 503`).
//! - **Cache** (bounded): answers are kept by their review's spec for `allowTTL` (allowed) or
//!   `denyTTL` (denied), at most [`CACHE_ENTRIES`] (kube's 1024) of them, the least recently
//!   used dropped first; failures are not kept. Time is the plugin's clock
//!   (`super::event_rate_limit::Ticks`), so a test moves it by hand.
//! - The webhook's answer is read up to `--max-request-body-bytes`.
//!
//! ## Differences from kube
//! - kube runs the plugin among the validating plugins before PodSecurity; here it runs after
//!   the object's own validation on creates (before PodSecurity), and, on updates, after the
//!   in-process validating plugins, before the validating webhooks.
//! - kube's kubeconfig errors are client-go's; these are kube-rs'.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use watchkeeper_api::time::go_duration;

use super::event_rate_limit::{MonotonicTicks, Ticks};
use super::webhook::answers::Answers;
use super::webhook::kubeconfig::{REQUEST_TIMEOUT, Target, with_retries};

/// The most answers kept (kube's `NewLRUExpireCache(1024)`).
pub const CACHE_ENTRIES: usize = 1024;

/// A second and a minute, in nanoseconds.
const SECOND: i128 = 1_000_000_000;
const MINUTE: i128 = 60 * SECOND;

/// The annotation a pod admitted in spite of a failed webhook gets.
pub const FAILED_OPEN: &str = "alpha.image-policy.k8s.io/failed-open";

/// The prefix of the plugin's audit annotations.
pub const AUDIT_PREFIX: &str = "imagepolicywebhook.image-policy.k8s.io/";

/// The plugin's configuration, normalized.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// `kubeConfigFile`.
    pub kubeconfig: PathBuf,
    /// How long an allowed answer is kept (zero: not kept).
    pub allow_ttl: Duration,
    /// How long a denied answer is kept (zero: not kept).
    pub deny_ttl: Duration,
    /// The first wait before a retry (zero: none).
    pub retry_backoff: Duration,
    /// `defaultAllow`: admit when the webhook fails.
    pub default_allow: bool,
}

/// kube's `normalizeConfigDuration`: `value` in `scale` nanoseconds.
fn normalize(
    value: i64,
    scale: i128,
    (min, max, default): (i128, i128, i128),
) -> Result<Duration, String> {
    let nanos = match value {
        -1 => 0,
        0 => default,
        value => {
            let nanos = i128::from(value) * scale;
            if nanos <= min || nanos > max {
                return Err(format!(
                    "valid value is between {} and {}, got {}",
                    go_duration(min),
                    go_duration(max),
                    go_duration(nanos)
                ));
            }
            nanos
        }
    };
    Ok(Duration::from_nanos(u64::try_from(nanos).unwrap_or(0)))
}

/// Go's JSON decoding of a field of `config` (`imagePolicy`'s) of Go type `kind`.
fn decode_error(key: &str, kind: &str) -> String {
    format!(
        "json: cannot unmarshal into Go struct field imagePolicyWebhookConfig.imagePolicy.{key} of type {kind}"
    )
}

/// The plugin's configuration from `value` (`None`: none given), decoded and normalized as
/// kube's `NewImagePolicyWebhook` does (the kubeconfig is read when the server starts).
///
/// # Errors
/// kube's error.
pub fn parse(value: Option<&Value>) -> Result<Config, String> {
    let value = value.ok_or_else(|| "no config specified".to_owned())?;
    // Go's decoder matches keys without regard to case.
    let field = |object: &Value, key: &str| -> Option<Value> {
        object
            .as_object()?
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| v.clone())
    };
    let policy = field(value, "imagePolicy").unwrap_or(Value::Null);
    let number = |key: &str| -> Result<i64, String> {
        match field(&policy, key) {
            None | Some(Value::Null) => Ok(0),
            Some(Value::Number(n)) => n.as_i64().ok_or_else(|| decode_error(key, "time.Duration")),
            Some(_) => Err(decode_error(key, "time.Duration")),
        }
    };
    let kubeconfig = match field(&policy, "kubeConfigFile") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(path)) => path,
        Some(_) => return Err(decode_error("kubeConfigFile", "string")),
    };
    let default_allow = match field(&policy, "defaultAllow") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(allow)) => allow,
        Some(_) => return Err(decode_error("defaultAllow", "bool")),
    };
    let retry_backoff = normalize(
        number("retryBackoff")?,
        1_000_000,
        (1, 5 * MINUTE, 500_000_000),
    )?;
    let allow_ttl = normalize(
        number("allowTTL")?,
        SECOND,
        (SECOND, 30 * MINUTE, 5 * MINUTE),
    )?;
    let deny_ttl = normalize(
        number("denyTTL")?,
        SECOND,
        (SECOND, 30 * MINUTE, 30 * SECOND),
    )?;
    if kubeconfig.is_empty() {
        // kube's `GenericWebhook` reads the kubeconfig's path at once.
        return Err("invalid configuration: no configuration has been provided, try setting KUBERNETES_MASTER environment variable".to_owned());
    }
    Ok(Config {
        kubeconfig: PathBuf::from(kubeconfig),
        allow_ttl,
        deny_ttl,
        retry_backoff,
        default_allow,
    })
}

/// A kept answer: its status, when it expires, its last use.
/// The plugin: its configuration, its webhook's client (made on first use, within the
/// runtime; until one is made, a review fails as an unreachable webhook does), its answers
/// kept.
#[derive(Debug)]
pub struct ImagePolicy {
    config: Config,
    webhook: tokio::sync::OnceCell<Target>,
    answers: Mutex<Answers<Value>>,
    ticks: Arc<dyn Ticks>,
    calls: std::sync::atomic::AtomicU64,
}

impl PartialEq for ImagePolicy {
    fn eq(&self, other: &Self) -> bool {
        self.config == other.config
    }
}

impl Eq for ImagePolicy {}

/// A pod write the plugin judges.
#[derive(Clone, Copy, Debug)]
pub struct PodWrite<'a> {
    /// The namespace.
    pub namespace: &'a str,
    /// The subresource written (`""` or `ephemeralcontainers`).
    pub subresource: &'a str,
}

impl ImagePolicy {
    /// The plugin for `config`, on the process's clock.
    #[must_use]
    pub fn new(config: Config) -> ImagePolicy {
        ImagePolicy::with_ticks(config, Arc::new(MonotonicTicks::default()))
    }

    /// The plugin for `config`, on `ticks`.
    #[must_use]
    pub fn with_ticks(config: Config, ticks: Arc<dyn Ticks>) -> ImagePolicy {
        ImagePolicy {
            config,
            webhook: tokio::sync::OnceCell::new(),
            answers: Mutex::new(Answers::new(CACHE_ENTRIES)),
            ticks,
            calls: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// The same configuration, nothing kept, on `ticks` (a test's clock).
    #[must_use]
    pub fn on(&self, ticks: Arc<dyn Ticks>) -> ImagePolicy {
        ImagePolicy::with_ticks(self.config.clone(), ticks)
    }

    /// The configuration.
    #[must_use]
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Reviews posted to the webhook so far.
    #[must_use]
    pub fn calls(&self) -> u64 {
        self.calls.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The review's spec of a write of `pod`.
    fn spec(pod: &Value, write: PodWrite<'_>) -> Value {
        let lists: &[&str] = if write.subresource.is_empty() {
            &["containers", "initContainers"]
        } else {
            &["ephemeralContainers"]
        };
        let containers: Vec<Value> = lists
            .iter()
            .filter_map(|list| pod.pointer(&format!("/spec/{list}")))
            .filter_map(Value::as_array)
            .flatten()
            .map(|c| json!({"image": c.get("image").and_then(Value::as_str).unwrap_or_default()}))
            .collect();
        let annotations: serde_json::Map<String, Value> = pod
            .pointer("/metadata/annotations")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter(|(key, _)| key.contains(".image-policy.k8s.io/"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mut spec = serde_json::Map::new();
        if !containers.is_empty() {
            spec.insert("containers".to_owned(), Value::Array(containers));
        }
        if !annotations.is_empty() {
            spec.insert("annotations".to_owned(), Value::Object(annotations));
        }
        if !write.namespace.is_empty() {
            spec.insert("namespace".to_owned(), Value::from(write.namespace));
        }
        Value::Object(spec)
    }

    /// The webhook's answer (its `status`) to `review`, with kube's retries.
    async fn ask(&self, review: &Value, answer_bytes_max: usize) -> Result<Value, String> {
        // Made on first use (a failure is not kept: the next review tries again).
        let target = self
            .webhook
            .get_or_try_init(|| Target::load(&self.config.kubeconfig))
            .await?;
        let body = review.to_string().into_bytes();
        let (status, answer) = with_retries(self.config.retry_backoff, || {
            self.calls
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            target.post(body.clone(), answer_bytes_max, Some(REQUEST_TIMEOUT))
        })
        .await
        .map_err(|failure| failure.cause)?;
        if !(200..300).contains(&status) {
            return Err(format!("Error contacting webhook: {status}"));
        }
        let answer: Value = serde_json::from_slice(&answer).map_err(|error| error.to_string())?;
        Ok(answer.get("status").cloned().unwrap_or(Value::Null))
    }

    /// kube's `Validate` on a write of `pod`: annotated in place when admitted in spite of a
    /// failed webhook. The webhook's answer is read up to `answer_bytes_max` bytes.
    ///
    /// # Errors
    /// The 403's message (after `pods "p" is forbidden: `).
    pub async fn admit(
        &self,
        pod: &mut Value,
        write: PodWrite<'_>,
        answer_bytes_max: usize,
    ) -> Result<(), String> {
        let spec = Self::spec(pod, write);
        let key = spec.to_string();
        let now = self.ticks.now();
        let kept = self
            .answers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&key, now);
        let status = match kept {
            Some(status) => status,
            None => {
                let review = json!({"kind": "ImageReview", "apiVersion": "imagepolicy.k8s.io/v1alpha1",
                    "metadata": {"creationTimestamp": null}, "spec": spec,
                    "status": {"allowed": false}});
                match self.ask(&review, answer_bytes_max).await {
                    Ok(status) => {
                        let allowed = status.get("allowed").and_then(Value::as_bool) == Some(true);
                        let ttl = if allowed {
                            self.config.allow_ttl
                        } else {
                            self.config.deny_ttl
                        };
                        if !ttl.is_zero() {
                            self.answers
                                .lock()
                                .unwrap_or_else(std::sync::PoisonError::into_inner)
                                .add(key, status.clone(), self.ticks.now() + ttl);
                        }
                        status
                    }
                    Err(error) => return self.failed(pod, error),
                }
            }
        };
        if let Some(annotations) = status.get("auditAnnotations").and_then(Value::as_object) {
            for (key, value) in annotations {
                let value = value.as_str().unwrap_or_default().to_owned();
                crate::audit::context::annotate(&format!("{AUDIT_PREFIX}{key}"), value);
            }
        }
        if status.get("allowed").and_then(Value::as_bool) == Some(true) {
            return Ok(());
        }
        match status
            .get("reason")
            .and_then(Value::as_str)
            .filter(|r| !r.is_empty())
        {
            Some(reason) => Err(format!(
                "image policy webhook backend denied one or more images: {reason}"
            )),
            None => Err("one or more images rejected by webhook backend".to_owned()),
        }
    }

    /// kube's `webhookError`: admitted and annotated under `defaultAllow`, else refused.
    fn failed(&self, pod: &mut Value, error: String) -> Result<(), String> {
        tracing::debug!(%error, "error contacting the image policy webhook");
        if !self.config.default_allow {
            return Err(error);
        }
        crate::audit::context::annotate(&format!("{AUDIT_PREFIX}failed-open"), "true".to_owned());
        if let Some(metadata) = pod.get_mut("metadata").and_then(Value::as_object_mut) {
            let annotations = metadata
                .entry("annotations")
                .or_insert_with(|| Value::Object(serde_json::Map::new()));
            if let Some(annotations) = annotations.as_object_mut() {
                annotations.insert(FAILED_OPEN.to_owned(), Value::from("true"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_print_as_go_prints_them() {
        assert_eq!(go_duration(1), "1ns");
        assert_eq!(go_duration(1_000_000_000), "1s");
        assert_eq!(go_duration(1_800_000_000_000), "30m0s");
        assert_eq!(go_duration(3_600_000_000_000), "1h0m0s");
        assert_eq!(go_duration(400_000_000_000), "6m40s");
        assert_eq!(go_duration(1_500_000), "1.5ms");
    }

    #[test]
    fn kube_s_configuration_and_its_errors() {
        assert_eq!(parse(None).unwrap_err(), "no config specified");
        let config = parse(Some(&json!({"imagePolicy": {"kubeConfigFile": "/k",
            "allowTTL": 50, "denyTTL": -1, "retryBackoff": 0, "defaultAllow": true}})))
        .unwrap();
        assert_eq!(
            config,
            Config {
                kubeconfig: PathBuf::from("/k"),
                allow_ttl: Duration::from_secs(50),
                deny_ttl: Duration::ZERO,
                retry_backoff: Duration::from_millis(500),
                default_allow: true,
            }
        );
        assert_eq!(
            parse(Some(
                &json!({"imagePolicy": {"kubeConfigFile": "/k", "allowTTL": 3600}})
            ))
            .unwrap_err(),
            "valid value is between 1s and 30m0s, got 1h0m0s"
        );
        assert_eq!(
            parse(Some(
                &json!({"imagePolicy": {"kubeConfigFile": "/k", "denyTTL": 1}})
            ))
            .unwrap_err(),
            "valid value is between 1s and 30m0s, got 1s"
        );
        assert_eq!(
            parse(Some(
                &json!({"imagePolicy": {"kubeConfigFile": "/k", "retryBackoff": 400000}})
            ))
            .unwrap_err(),
            "valid value is between 1ns and 5m0s, got 6m40s"
        );
        assert!(
            parse(Some(
                &json!({"imagePolicy": {"kubeConfigFile": "/k", "allowTTL": "5m"}})
            ))
            .unwrap_err()
            .starts_with("json: cannot unmarshal")
        );
    }

    #[test]
    fn reviews_hold_the_images_and_the_policy_annotations() {
        let pod = json!({"metadata": {"annotations": {"a.image-policy.k8s.io/x": "1", "b": "2"}},
            "spec": {"containers": [{"name": "c", "image": "app"}],
                "initContainers": [{"name": "i", "image": "init"}],
                "ephemeralContainers": [{"name": "e", "image": "debug"}]}});
        let write = PodWrite {
            namespace: "ns",
            subresource: "",
        };
        assert_eq!(
            ImagePolicy::spec(&pod, write),
            json!({"containers": [{"image": "app"}, {"image": "init"}],
                "annotations": {"a.image-policy.k8s.io/x": "1"}, "namespace": "ns"})
        );
        let debug = PodWrite {
            namespace: "ns",
            subresource: "ephemeralcontainers",
        };
        assert_eq!(
            ImagePolicy::spec(&pod, debug)["containers"],
            json!([{"image": "debug"}])
        );
    }

    #[test]
    fn the_cache_is_bounded_and_expires() {
        let mut answers = Answers::new(CACHE_ENTRIES);
        let at = Duration::from_secs;
        answers.add("a".to_owned(), json!({"allowed": true}), at(10));
        assert!(answers.get("a", at(9)).is_some());
        assert!(answers.get("a", at(10)).is_none());
        for i in 0..=CACHE_ENTRIES {
            answers.add(i.to_string(), json!({}), at(100));
        }
        assert_eq!(answers.len(), CACHE_ENTRIES);
        assert!(answers.get("0", at(1)).is_none(), "the oldest went");
    }
}

//! Webhook token authentication, as kube-apiserver's
//! `--authentication-token-webhook-config-file`: a bearer token that no other authenticator
//! of this server knows is sent, in a `TokenReview`, to the server a kubeconfig names, and its
//! answer says who the caller is. Pointed at a Kubernetes API server's
//! `/apis/authentication.k8s.io/v1/tokenreviews`, this server accepts that cluster's tokens
//! (service account tokens, its OIDC tokens, whatever its authenticators take) as an
//! aggregated API server's delegated authentication does.
//!
//! ## Guarantees
//! - **Order**: the webhook is asked last, as kube's union authenticator asks it: a token of
//!   this server's service account issuer, of a JWT issuer or of the token file is decided
//!   here and never sent (`crate::auth::Auth::authenticate`).
//! - **The review** is kube's (`k8s.io/apiserver/plugin/pkg/authenticator/token/webhook`):
//!   `TokenReview` of `authentication.k8s.io/v1beta1` (kube-apiserver's default) or `v1`
//!   (`--authentication-token-webhook-version`), `spec.token` and, when this server has API
//!   audiences (`--api-audiences`, else the service account issuer), `spec.audiences`. It is
//!   POSTed to the kubeconfig's server URL, its own path (`crate::source::webhook::kubeconfig`),
//!   with the kubeconfig's CA and credentials. The answer's `status.authenticated`,
//!   `status.user` (`username`, `uid`, `groups`, `extra`) and `status.audiences` decide; with
//!   audiences asked, the token must be good for one of them (the answer's audiences, or
//!   without any this server's own), else it is refused.
//! - **Retries**: a call answered 429, 500 or 504, or whose connection was reset, is made
//!   again, five attempts at most, 500 ms apart and 1.5 times longer each time (kube's
//!   `DefaultAuthWebhookRetryBackoff`); each attempt within 30 s (kube's webhook timeout).
//! - **Cache** (bounded): an answer is kept for `--authentication-token-webhook-cache-ttl`
//!   (kube's default 2m) under an HMAC-SHA256 of the token (a key drawn at start: tokens are
//!   never kept) and the audiences asked, at most `--authentication-token-webhook-cache-entries`
//!   answers, the least recently used dropped first. As kube's, a refusal the webhook gave
//!   without an error is kept as long as an acceptance; a failed call, or a refusal with
//!   `status.error`, is not kept.
//! - **Bounded calls**: at most `--authentication-token-webhook-calls-max` calls in flight
//!   (a request waits for a slot within its own deadline); requests presenting the same token
//!   at once share one call.
//! - **Never blocks a worker**: the call is made before the request is authenticated
//!   ([`TokenWebhook::review`] from `Auth::prepare`), on the request's task; the synchronous
//!   authentication takes the answer it produced.
//! - Refusals are kube's 401 `Unauthorized`, whatever the webhook said (the reason is logged
//!   at debug level, never sent).
//!
//! ## Differences from kube
//! - The kubeconfig is read with kube-rs' loader; its errors are kube-rs' words.
//! - The answer is read up to `--max-request-body-bytes`.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::{OnceCell, Semaphore};

use super::User;
pub use crate::config::authn::TokenWebhookConfig;
use crate::source::event_rate_limit::{MonotonicTicks, Ticks};
use crate::source::webhook::answers::Answers;
use crate::source::webhook::kubeconfig::{REQUEST_TIMEOUT, Target, with_retries};

/// kube's first retry delay (`DefaultAuthWebhookRetryBackoff`'s `Duration`).
const FIRST_RETRY: Duration = Duration::from_millis(500);

/// What a refusal without the webhook's own error says (a `TokenReview`'s `status.error`, as
/// this server's other authenticators say it of a token they do not know).
const INVALID: &str = "invalid bearer token";

/// What the webhook answered for a token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// The token authenticates this user, good for these audiences.
    User(User, Vec<String>),
    /// It does not; why (for the log and a `TokenReview`'s `status.error`).
    Refused(String),
}

/// The token webhook of a server: its client, its kept answers and its calls in flight.
pub struct TokenWebhook {
    config: TokenWebhookConfig,
    target: Target,
    /// The audiences a token must be good for when the review names none (`--api-audiences`).
    api_audiences: Vec<String>,
    answers: Mutex<Answers<Answer>>,
    in_flight: Mutex<HashMap<String, Arc<OnceCell<Answer>>>>,
    slots: Semaphore,
    cache_key: ring::hmac::Key,
    ticks: Arc<dyn Ticks>,
    answer_bytes_max: usize,
    calls: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for TokenWebhook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenWebhook")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl TokenWebhook {
    /// The webhook `config` names, answers read up to `answer_bytes_max` bytes; tokens asked
    /// about without audiences must be good for `api_audiences` (none: not checked). Run
    /// within the runtime.
    ///
    /// # Errors
    /// The kubeconfig cannot be read or used, or no random key could be drawn.
    pub async fn start(
        config: &TokenWebhookConfig,
        api_audiences: Vec<String>,
        answer_bytes_max: usize,
    ) -> Result<TokenWebhook, String> {
        Self::with_ticks(
            config,
            api_audiences,
            answer_bytes_max,
            Arc::new(MonotonicTicks::default()),
        )
        .await
    }

    /// [`TokenWebhook::start`] on `ticks` (tests move time by hand).
    ///
    /// # Errors
    /// As [`TokenWebhook::start`].
    pub async fn with_ticks(
        config: &TokenWebhookConfig,
        api_audiences: Vec<String>,
        answer_bytes_max: usize,
        ticks: Arc<dyn Ticks>,
    ) -> Result<TokenWebhook, String> {
        let target = Target::load(&config.config_file).await.map_err(|error| {
            format!(
                "--authentication-token-webhook-config-file {}: {error}",
                config.config_file.display()
            )
        })?;
        let cache_key =
            ring::hmac::Key::generate(ring::hmac::HMAC_SHA256, &ring::rand::SystemRandom::new())
                .map_err(|_| "could not draw the token cache's key".to_owned())?;
        Ok(TokenWebhook {
            config: config.clone(),
            target,
            api_audiences,
            answers: Mutex::new(Answers::new(config.cache_entries)),
            in_flight: Mutex::new(HashMap::new()),
            slots: Semaphore::new(config.calls_max.max(1)),
            cache_key,
            ticks,
            answer_bytes_max,
            calls: std::sync::atomic::AtomicU64::new(0),
        })
    }

    /// The calls made to the webhook so far (retries included).
    #[must_use]
    pub fn calls(&self) -> u64 {
        self.calls.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The audiences a review of `audiences` asks about: those, else this server's own.
    fn wanted<'a>(&'a self, audiences: &'a [String]) -> &'a [String] {
        if audiences.is_empty() {
            &self.api_audiences
        } else {
            audiences
        }
    }

    /// The cache's key of `token` asked about `audiences`: never the token itself.
    fn key(&self, token: &str, audiences: &[String]) -> String {
        let mut context = ring::hmac::Context::with_key(&self.cache_key);
        for audience in audiences {
            context.update(&(audience.len() as u64).to_be_bytes());
            context.update(audience.as_bytes());
        }
        context.update(b"\0");
        context.update(token.as_bytes());
        context
            .sign()
            .as_ref()
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect()
    }

    /// What the webhook answers for `token` asked about `audiences` (empty: this server's API
    /// audiences): a kept answer, else one call shared by every request asking the same at
    /// once.
    pub async fn review(&self, token: &str, audiences: &[String]) -> Answer {
        let audiences = self.wanted(audiences);
        let key = self.key(token, audiences);
        if let Some(answer) = self.kept(&key) {
            return answer;
        }
        let flight = Flight {
            webhook: self,
            key: &key,
            cell: Some(
                self.in_flight
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .entry(key.clone())
                    .or_default()
                    .clone(),
            ),
        };
        let Some(cell) = flight.cell.as_ref() else {
            unreachable!("a flight holds its cell until dropped")
        };
        let answer = cell
            .get_or_init(|| async {
                // Another request may have kept it between the look and the cell.
                if let Some(answer) = self.kept(&key) {
                    return answer;
                }
                let (answer, keep) = self.call(token, audiences).await;
                if keep && !self.config.cache_ttl.is_zero() {
                    self.answers
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .add(
                            key.clone(),
                            answer.clone(),
                            self.ticks.now() + self.config.cache_ttl,
                        );
                }
                answer
            })
            .await
            .clone();
        // Answered: the next asker of this key starts afresh (a kept answer, or a new call).
        let mut in_flight = self
            .in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if in_flight
            .get(&key)
            .is_some_and(|current| Arc::ptr_eq(current, cell))
        {
            in_flight.remove(&key);
        }
        drop(in_flight);
        drop(flight);
        answer
    }

    /// The answer kept for `token` asked about this server's own audiences, if any (for a
    /// request authenticated without [`TokenWebhook::review`] first).
    #[must_use]
    pub fn kept_for(&self, token: &str) -> Option<Answer> {
        self.kept(&self.key(token, &self.api_audiences))
    }

    /// The answer kept for `key`, if any.
    fn kept(&self, key: &str) -> Option<Answer> {
        self.answers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(key, self.ticks.now())
    }

    /// One review with kube's retries: the answer and whether kube would keep it.
    async fn call(&self, token: &str, audiences: &[String]) -> (Answer, bool) {
        let Ok(_slot) = self.slots.acquire().await else {
            return (Answer::Refused("the webhook is closed".to_owned()), false);
        };
        let mut spec = serde_json::Map::new();
        spec.insert("token".to_owned(), Value::from(token));
        if !audiences.is_empty() {
            spec.insert("audiences".to_owned(), json!(audiences));
        }
        let review = json!({
            "kind": "TokenReview",
            "apiVersion": format!("authentication.k8s.io/{}", self.config.version),
            "metadata": {"creationTimestamp": null},
            "spec": spec,
            "status": {"user": {}},
        });
        let body = review.to_string().into_bytes();
        let answer = with_retries(FIRST_RETRY, || {
            self.calls
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.target
                .post(body.clone(), self.answer_bytes_max, Some(REQUEST_TIMEOUT))
        })
        .await;
        let (status, answer) = match answer {
            Ok(answer) => answer,
            Err(failure) => return (Answer::Refused(failure.cause), false),
        };
        if !(200..300).contains(&status) {
            return (
                Answer::Refused(format!("the token webhook answered {status}")),
                false,
            );
        }
        let Ok(answer) = serde_json::from_slice::<Value>(&answer) else {
            return (
                Answer::Refused("the token webhook's answer is not JSON".to_owned()),
                false,
            );
        };
        interpret(
            answer.get("status").unwrap_or(&Value::Null),
            audiences,
            &self.api_audiences,
        )
    }
}

/// One asker of a key in flight: when the last asker of a call leaves before it is answered
/// (their requests gone), the key is taken out, so abandoned calls leave nothing behind.
struct Flight<'a> {
    webhook: &'a TokenWebhook,
    key: &'a str,
    cell: Option<Arc<OnceCell<Answer>>>,
}

impl Drop for Flight<'_> {
    fn drop(&mut self) {
        let Some(ours) = self.cell.take() else {
            return;
        };
        // Every clone and drop of a cell's handles but the map's happens under this lock, so
        // the count read here is exact.
        let mut in_flight = self
            .webhook
            .in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let current = in_flight
            .get(self.key)
            .is_some_and(|cell| Arc::ptr_eq(cell, &ours));
        drop(ours);
        if current
            && in_flight
                .get(self.key)
                .is_some_and(|cell| Arc::strong_count(cell) == 1)
        {
            in_flight.remove(self.key);
        }
    }
}

/// kube's reading of a `TokenReview`'s `status` for a review that asked about `audiences`
/// (`implicit`: this server's own, for an answer naming none): the answer and whether kube
/// keeps it (not a refusal with an error).
fn interpret(status: &Value, audiences: &[String], implicit: &[String]) -> (Answer, bool) {
    let strings = |value: Option<&Value>| -> Vec<String> {
        value
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect()
    };
    let mut good_for = Vec::new();
    if !audiences.is_empty() {
        let answered = strings(status.get("audiences"));
        let got = if answered.is_empty() {
            implicit
        } else {
            &answered
        };
        good_for = audiences
            .iter()
            .filter(|audience| got.contains(audience))
            .cloned()
            .collect();
        if good_for.is_empty() {
            // kube's webhook says nothing more (no error): the token is unknown here.
            return (Answer::Refused(INVALID.to_owned()), true);
        }
    }
    if status.get("authenticated").and_then(Value::as_bool) != Some(true) {
        let error = status
            .get("error")
            .and_then(Value::as_str)
            .unwrap_or_default();
        return if error.is_empty() {
            (Answer::Refused(INVALID.to_owned()), true)
        } else {
            (Answer::Refused(error.to_owned()), false)
        };
    }
    let user = status.get("user").unwrap_or(&Value::Null);
    let text = |field: &str| {
        user.get(field)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let extra: BTreeMap<String, Vec<String>> = user
        .get("extra")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(key, values)| (key.clone(), strings(Some(values))))
        .collect();
    (
        Answer::User(
            User {
                name: text("username"),
                uid: text("uid"),
                groups: strings(user.get("groups")),
                extra,
            },
            good_for,
        ),
        true,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Requests that give up on a call (their clients gone) leave no key in flight behind.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn abandoned_calls_leave_nothing_in_flight() {
        use tokio::io::AsyncReadExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let arrived = Arc::new(tokio::sync::Notify::new());
        let signal = arrived.clone();
        // A webhook that reads a review and never answers.
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((mut stream, _)) = listener.accept().await {
                let mut buffer = [0u8; 4096];
                let _ = stream.read(&mut buffer).await;
                signal.notify_one();
                held.push(stream);
            }
        });
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("webhook.kubeconfig");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters: [{{name: w, cluster: {{server: \"http://127.0.0.1:{port}/authenticate\"}}}}]\nusers: [{{name: u, user: {{}}}}]\ncontexts: [{{name: w, context: {{cluster: w, user: u}}}}]\ncurrent-context: w\n"
            ),
        )
        .unwrap();
        let config = TokenWebhookConfig {
            config_file: kubeconfig,
            version: "v1",
            cache_ttl: Duration::from_secs(120),
            cache_entries: 16,
            calls_max: 4,
        };
        let webhook = Arc::new(
            TokenWebhook::start(&config, Vec::new(), 1 << 20)
                .await
                .unwrap(),
        );
        let in_flight = |webhook: &TokenWebhook| {
            webhook
                .in_flight
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .len()
        };
        let ask = |webhook: &Arc<TokenWebhook>| {
            let webhook = webhook.clone();
            tokio::spawn(async move { webhook.review("t", &[]).await })
        };
        let (first, second) = (ask(&webhook), ask(&webhook));
        arrived.notified().await;
        assert_eq!(in_flight(&webhook), 1, "one call for both");
        // (A waiter whose leader left takes the call over: it may make its own.)
        for task in [first, second] {
            task.abort();
            assert!(task.await.unwrap_err().is_cancelled());
        }
        assert_eq!(in_flight(&webhook), 0, "the abandoned call left its key");
    }

    #[test]
    fn an_answer_is_read_as_kube_reads_it() {
        let s = |list: &[&str]| list.iter().map(|a| (*a).to_owned()).collect::<Vec<_>>();
        let accepted = json!({"authenticated": true,
            "user": {"username": "jane", "uid": "1", "groups": ["dev"], "extra": {"scopes.example.com": ["a", "b"]}}});
        let (answer, keep) = interpret(&accepted, &[], &[]);
        assert!(keep);
        let Answer::User(jane, audiences) = answer else {
            panic!("refused: {answer:?}")
        };
        assert_eq!(jane.name, "jane");
        assert_eq!(jane.uid, "1");
        assert_eq!(jane.groups, s(&["dev"]));
        assert_eq!(jane.extra["scopes.example.com"], s(&["a", "b"]));
        assert!(audiences.is_empty());

        // Asked about audiences: the answer's, else this server's own, must meet them.
        let (answer, _) = interpret(&accepted, &s(&["api"]), &s(&["api"]));
        assert!(matches!(answer, Answer::User(_, ref a) if *a == s(&["api"])));
        let (answer, keep) = interpret(&accepted, &s(&["api"]), &s(&["other"]));
        assert!(matches!(answer, Answer::Refused(_)) && keep);
        let mut for_api = accepted.clone();
        for_api["audiences"] = json!(["x", "api"]);
        let (answer, _) = interpret(&for_api, &s(&["api", "y"]), &[]);
        assert!(matches!(answer, Answer::User(_, ref a) if *a == s(&["api"])));

        // A refusal is kept unless it carries an error (kube's cache keeps no errors).
        let (answer, keep) = interpret(&json!({"authenticated": false}), &[], &[]);
        assert!(matches!(answer, Answer::Refused(_)) && keep);
        let (answer, keep) = interpret(
            &json!({"authenticated": false, "error": "token expired"}),
            &[],
            &[],
        );
        assert_eq!(answer, Answer::Refused("token expired".to_owned()));
        assert!(!keep);
    }
}

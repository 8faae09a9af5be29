//! The HTTPS client of admission (and conversion) webhooks, as kube-apiserver's webhook
//! `ClientManager` calls them.
//!
//! ## Guarantees
//! - **Where**: a `clientConfig.url` is called at its host (resolved off the runtime's
//!   workers, by hyper's resolver on the blocking pool); a `clientConfig.service` at an
//!   address of its Endpoints (or, without them, its EndpointSlices) from the store's caches —
//!   kube-apiserver's endpoint routing (`--enable-aggregator-routing`), since this server runs
//!   no kube-proxy: the service port whose `port` is the configured one (443 by default), the
//!   endpoint port of the same name, a ready address picked at random. Missing pieces are
//!   kube's words (`service "s" not found`, `no service port 443 found for service "s"`,
//!   `service ns/s has no endpoints`).
//! - **TLS**: https only, verified against `caBundle` (PEM, as the configuration's base64
//!   bytes carry it) or, when it is empty, the system's roots; the name verified is the URL's
//!   host, or `<service>.<namespace>.svc` for a service. HTTP/1.1.
//! - **Bounded**: a call takes one of `--webhook-calls-max` slots for its whole length
//!   (waiting for one counts against its timeout), and everything — the slot, the connection,
//!   the request, the answer — within the webhook's `timeoutSeconds`, after which it is kube's
//!   `context deadline exceeded`; the answer is read up to `--max-request-body-bytes`. A call
//!   is a future on the request's task: the request's own deadline (the limits layer drops the
//!   handler then) ends it too. Nothing here blocks a runtime worker.
//! - **Reuse**: one pooled client per (CA bundle, verified name), its idle connections kept
//!   for 90 s; at most [`CLIENTS_MAX`] such clients are kept (past it they are all dropped and
//!   made again as calls need them).
//! - **Errors** are the reason kube's `ErrCallingWebhook` prints: `failed to call webhook:
//!   Post "<url>?timeout=<n>s": <cause>` with Go's wording for the common causes
//!   (`context deadline exceeded`, `dial tcp <addr>: connect: connection refused`); an answer
//!   that is not a success is Go's rest client's error for it (its `Status`'s message), after
//!   `failed to call webhook: ` only. A conversion webhook's are the same without that prefix
//!   ([`WebhookClient::call`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_rustls::{FixedServerNameResolver, HttpsConnector};
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use tokio::sync::Semaphore;
use watchkeeper_api::admission_webhook::Target;

/// The most pooled clients (distinct CA bundle and name pairs) kept.
pub const CLIENTS_MAX: usize = 256;

/// How long an idle connection to a webhook is kept.
const IDLE: Duration = Duration::from_secs(90);

type Pooled = HyperClient<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// The webhook client of a server.
pub struct WebhookClient {
    slots: Arc<Semaphore>,
    answer_bytes_max: usize,
    clients: Mutex<HashMap<(String, String), Pooled>>,
    system_roots: OnceLock<Arc<RootCertStore>>,
}

impl std::fmt::Debug for WebhookClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookClient")
            .field("slots", &self.slots.available_permits())
            .field("answer_bytes_max", &self.answer_bytes_max)
            .finish_non_exhaustive()
    }
}

/// One call: where, how long, what.
pub struct Request<'a> {
    /// The webhook's target.
    pub target: &'a Target,
    /// The address to connect to (`host:port`; for a URL, its own host).
    pub authority: String,
    /// `caBundle` (base64 of PEM), empty for the system's roots.
    pub ca_bundle: &'a str,
    /// `timeoutSeconds`.
    pub timeout_seconds: u64,
    /// The JSON body.
    pub body: Vec<u8>,
}

impl WebhookClient {
    /// A client with `calls_max` calls in flight at most, answers of at most
    /// `answer_bytes_max` bytes.
    #[must_use]
    pub fn new(calls_max: usize, answer_bytes_max: usize) -> WebhookClient {
        WebhookClient {
            slots: Arc::new(Semaphore::new(calls_max.max(1))),
            answer_bytes_max,
            clients: Mutex::new(HashMap::new()),
            system_roots: OnceLock::new(),
        }
    }

    /// POSTs `request`'s body; the answer's body when the webhook answered 2xx.
    ///
    /// # Errors
    /// The reason kube's `ErrCallingWebhook` prints (see the module's guarantees).
    pub async fn post(&self, request: Request<'_>) -> Result<Bytes, String> {
        self.call(request)
            .await
            .map_err(|error| format!("failed to call webhook: {error}"))
    }

    /// The most bytes of an answer read (`--max-request-body-bytes`).
    #[must_use]
    pub fn answer_bytes_max(&self) -> usize {
        self.answer_bytes_max
    }

    /// [`WebhookClient::post`], its errors Go's rest client's own (`Post "<url>": <cause>`),
    /// as a conversion webhook's are printed.
    ///
    /// # Errors
    /// As [`WebhookClient::post`], without the `failed to call webhook: ` prefix.
    pub async fn call(&self, request: Request<'_>) -> Result<Bytes, String> {
        let printed = request.target.printed(request.timeout_seconds);
        let failed = |cause: String| format!("Post \"{printed}\": {cause}");
        let timeout = Duration::from_secs(request.timeout_seconds);
        let call = async {
            let _slot = self
                .slots
                .acquire()
                .await
                .map_err(|_| "the webhook client is closed".to_owned())?;
            let client = self.client(request.target, request.ca_bundle)?;
            let uri = format!(
                "https://{}{}",
                request.authority,
                request.target.path_and_query(request.timeout_seconds)
            );
            let http = axum::http::Request::post(uri)
                .header("content-type", "application/json")
                .header("accept", "application/json, */*")
                .body(Full::new(Bytes::from(request.body)))
                .map_err(|e| e.to_string())?;
            let response = client
                .request(http)
                .await
                .map_err(|error| go_cause(&error, &request.authority))?;
            let status = response.status();
            let body = Limited::new(response.into_body(), self.answer_bytes_max)
                .collect()
                .await
                .map_err(|error| error.to_string())?
                .to_bytes();
            // An answer that is not a success is Go's rest client's error for it, without
            // the request's `Post "<url>"` (which only names the failures to call).
            if !status.is_success() {
                return Ok(Err(unsuccessful(status.as_u16(), &body)));
            }
            Ok(Ok(body))
        };
        match tokio::time::timeout(timeout, call).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(cause)) => Err(failed(cause)),
            Err(_) => Err(failed("context deadline exceeded".to_owned())),
        }
    }

    /// The pooled client for `target` verified against `ca_bundle`.
    fn client(&self, target: &Target, ca_bundle: &str) -> Result<Pooled, String> {
        let name = target.server_name();
        let key = (ca_bundle.to_owned(), name.clone());
        let mut clients = self
            .clients
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(client) = clients.get(&key) {
            return Ok(client.clone());
        }
        let roots = if ca_bundle.is_empty() {
            self.system_roots.get_or_init(system_roots).clone()
        } else {
            Arc::new(bundle_roots(ca_bundle)?)
        };
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
        let server_name = ServerName::try_from(name.clone())
            .map_err(|_| format!("invalid server name {name:?}"))?;
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(config)
            .https_only()
            .with_server_name_resolver(FixedServerNameResolver::new(server_name))
            .enable_http1()
            .wrap_connector(http);
        let client = HyperClient::builder(TokioExecutor::new())
            .pool_idle_timeout(IDLE)
            .build(connector);
        if clients.len() >= CLIENTS_MAX {
            clients.clear();
        }
        clients.insert(key, client.clone());
        Ok(client)
    }
}

/// The system's trust roots (none when they cannot be read).
fn system_roots() -> Arc<RootCertStore> {
    let mut roots = RootCertStore::empty();
    let found = rustls_native_certs::load_native_certs();
    roots.add_parsable_certificates(found.certs);
    Arc::new(roots)
}

/// The roots of a `caBundle` (base64 of PEM certificates).
fn bundle_roots(ca_bundle: &str) -> Result<RootCertStore, String> {
    use base64::Engine;
    let pem = base64::engine::general_purpose::STANDARD
        .decode(ca_bundle.trim())
        .map_err(|e| format!("unable to load root certificates: {e}"))?;
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|e| format!("unable to load root certificates: {e}"))?;
        roots
            .add(cert)
            .map_err(|e| format!("unable to load root certificates: {e}"))?;
    }
    if roots.is_empty() {
        return Err("unable to load root certificates: no certificates found".to_owned());
    }
    Ok(roots)
}

/// A failed call's cause as Go's client prints the common ones.
pub(crate) fn go_cause(error: &hyper_util::client::legacy::Error, authority: &str) -> String {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    let mut chain = Vec::new();
    while let Some(cause) = source {
        if let Some(io) = cause.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::ConnectionRefused
        {
            return format!("dial tcp {authority}: connect: connection refused");
        }
        chain.push(cause.to_string());
        source = cause.source();
    }
    chain.join(": ")
}

/// The error of a webhook's non-2xx answer: its Status's message when it sent one, else
/// Go's rest client's generic text.
fn unsuccessful(code: u16, body: &[u8]) -> String {
    if let Ok(status) = serde_json::from_slice::<serde_json::Value>(body)
        && status.get("kind").and_then(serde_json::Value::as_str) == Some("Status")
        && let Some(message) = status.get("message").and_then(serde_json::Value::as_str)
    {
        return message.to_owned();
    }
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if text.is_empty() {
        format!(
            "the server responded with the status code {code} but did not return more information"
        )
    } else {
        format!("an error on the server ({text:?}) has prevented the request from succeeding")
    }
}

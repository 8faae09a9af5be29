//! Webhooks named by a kubeconfig file, as kube's `GenericWebhook` and its audit webhook
//! backend reach them (the audit webhook, `crate::audit`, and ImagePolicyWebhook,
//! `crate::source::image_policy`): the kubeconfig's current context gives the server URL, its
//! CA (`certificate-authority[-data]`, else the system's roots), the client certificate and
//! key (`client-certificate[-data]`, `client-key[-data]`) or a bearer token, read with
//! kube-rs' kubeconfig loader (kube's `clientcmd` semantics).
//!
//! ## Guarantees
//! - One client per kubeconfig, made once ([`Target::load`]); every POST goes to the URL's own
//!   path with a JSON body ([`Target::post`]), its answer read up to a bound the caller gives
//!   and within the caller's deadline.
//! - Errors are kube-rs' words for the file or the call; a reset connection is told apart
//!   (kube retries those: [`Failure::reset`]).

use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};

/// A webhook a kubeconfig names: its client and the URL's path.
#[derive(Clone)]
pub struct Target {
    client: kube::Client,
    path: String,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// Why a POST failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// The connection was reset (kube's `IsConnectionReset`).
    pub reset: bool,
    /// What went wrong.
    pub cause: String,
}

impl Target {
    /// The webhook the kubeconfig at `path` names (run within the runtime).
    ///
    /// # Errors
    /// Why the kubeconfig cannot be read or used.
    pub async fn load(path: &Path) -> Result<Target, String> {
        let kubeconfig = kube::config::Kubeconfig::read_from(path).map_err(|e| e.to_string())?;
        let mut config = kube::Config::from_custom_kubeconfig(
            kubeconfig,
            &kube::config::KubeConfigOptions::default(),
        )
        .await
        .map_err(|e| e.to_string())?;
        // The client joins its base URL's path and the request's: the base is the server's
        // root, the request the server's own path.
        let server = config.cluster_url.clone();
        let target_path = server.path().to_owned();
        let root = format!(
            "{}://{}/",
            server.scheme_str().unwrap_or("https"),
            server.authority().map(|a| a.as_str()).unwrap_or_default()
        );
        config.cluster_url = root.parse().map_err(|e| format!("{e}"))?;
        config.default_retry = false;
        let client = kube::Client::try_from(config).map_err(|e| e.to_string())?;
        Ok(Target {
            client,
            path: if target_path.is_empty() {
                "/".to_owned()
            } else {
                target_path
            },
        })
    }

    /// POSTs the JSON `body`: the answer's status and body (read up to `answer_bytes_max`
    /// bytes), within `timeout` (`None`: the caller bounds it).
    ///
    /// # Errors
    /// The call failed (no answer, or one that cannot be read).
    pub async fn post(
        &self,
        body: Vec<u8>,
        answer_bytes_max: usize,
        timeout: Option<Duration>,
    ) -> Result<(u16, Bytes), Failure> {
        let failed = |cause: String| Failure {
            reset: false,
            cause,
        };
        let call = async {
            let request = axum::http::Request::post(self.path.as_str())
                .header("content-type", "application/json")
                .header("accept", "application/json, */*")
                .body(kube::client::Body::from(body))
                .map_err(|e| failed(e.to_string()))?;
            let response = self.client.send(request).await.map_err(|error| Failure {
                reset: connection_reset(&error),
                cause: error.to_string(),
            })?;
            let status = response.status().as_u16();
            let body = Limited::new(response.into_body(), answer_bytes_max)
                .collect()
                .await
                .map_err(|e| failed(e.to_string()))?
                .to_bytes();
            Ok((status, body))
        };
        match timeout {
            Some(timeout) => tokio::time::timeout(timeout, call)
                .await
                .unwrap_or_else(|_| Err(failed("context deadline exceeded".to_owned()))),
            None => call.await,
        }
    }
}

/// kube's webhook request timeout (`GenericWebhook`'s): each attempt of a call.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// kube's attempts of one call (its webhooks' backoff `Steps`).
pub const ATTEMPTS: u32 = 5;

/// kube's `WithExponentialBackoff` with `DefaultShouldRetry` around one webhook call: `attempt`
/// is made again when it was answered 429, 500 or 504 or its connection was reset, at most
/// [`ATTEMPTS`] times, `first_wait` apart and 1.5 times longer each time; the last outcome is
/// returned.
///
/// # Errors
/// The last attempt's failure.
pub async fn with_retries<F, Fut>(
    first_wait: Duration,
    mut attempt: F,
) -> Result<(u16, Bytes), Failure>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(u16, Bytes), Failure>>,
{
    let mut wait = first_wait;
    let mut made = 1;
    loop {
        let outcome = attempt().await;
        let retry = match &outcome {
            Ok((status, _)) => matches!(status, 429 | 500 | 504),
            Err(failure) => failure.reset,
        };
        if !retry || made == ATTEMPTS {
            return outcome;
        }
        tokio::time::sleep(wait).await;
        wait = wait.mul_f64(1.5);
        made += 1;
    }
}

/// Whether `error` is a reset connection (kube's `IsConnectionReset`).
fn connection_reset(error: &kube::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(cause) = source {
        if let Some(io) = cause.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::ConnectionReset
        {
            return true;
        }
        source = cause.source();
    }
    false
}

//! Fixtures: a server on a free loopback port and the objects tests write.
//!
//! Guarantees: [`start_server`] returns only a server whose caches have loaded their first list
//! (so no request gets the not-ready 429), or an error; it waits for that under a hang guard,
//! never a pause.

use std::time::Duration;

use serde_json::Value;
use watchkeeper::Server;
use watchkeeper::config::{ServeArgs, ServeConfig};

/// How long [`start_server`] waits for the caches' first list: exceeding it is a bug, not
/// slowness.
pub const READY_GUARD: Duration = Duration::from_secs(60);

/// `args` on a free loopback port (`127.0.0.1:0`, whatever `args.listen` says), with the
/// memory store unless `args` name one, and without `kube-root-ca.crt` ConfigMaps or the
/// ServiceAccount admission plugin unless `args` ask for them.
#[must_use]
pub fn loopback(args: ServeArgs) -> ServeArgs {
    ServeArgs {
        listen: Some(std::net::SocketAddr::from(([127, 0, 0, 1], 0))),
        store: args.store.or(Some("memory".to_owned())),
        // Off unless a test asks: tests count the objects they create in `default`.
        enable_root_ca_cert_publisher: args.enable_root_ca_cert_publisher.or(Some(false)),
        // As kube's integration tests run kube-apiserver: pods as they were sent, not given
        // a token volume (and no wait for a namespace's `default` account), unless asked
        // (`--admission-control`, which excludes the flag, names exactly what runs).
        disable_admission_plugins: args.disable_admission_plugins.or_else(|| {
            args.admission_control
                .is_none()
                .then(|| vec!["ServiceAccount".to_owned()])
        }),
        ..args
    }
}

/// Starts a server with `args` as given and waits until it is ready.
///
/// # Errors
/// The configuration is refused, the server cannot start, or it is not ready within
/// [`READY_GUARD`].
pub async fn start_server(args: ServeArgs) -> Result<Server, String> {
    let config = ServeConfig::from_args(args).map_err(|e| e.to_string())?;
    start_configured(config).await
}

/// Starts a server with `config` (a test's own, e.g. with a plugin's clock replaced) and
/// waits until it is ready.
///
/// # Errors
/// The server cannot start, or it is not ready within [`READY_GUARD`].
pub async fn start_configured(config: ServeConfig) -> Result<Server, String> {
    let server = watchkeeper::start(config)
        .await
        .map_err(|e| e.to_string())?;
    tokio::time::timeout(READY_GUARD, server.ready())
        .await
        .map_err(|_| "server not ready in time".to_owned())?;
    Ok(server)
}

/// A ConfigMap named `name` labelled `app=test`, with `payload` bytes of data.
#[must_use]
pub fn configmap(name: &str, payload: usize) -> Value {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": {"app": "test"}},
        "data": {"payload": "x".repeat(payload)}
    })
}

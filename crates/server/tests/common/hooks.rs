//! A webhook server for tests over real HTTPS ([`super::https_server`], its certificate for
//! `hooks.default.svc` and `127.0.0.1` from a CA made here, the CA's PEM given as `caBundle`),
//! answering each review with the test's own function, and a server with the Service
//! `default/hooks` whose Endpoints point at it (kube's endpoint routing). The admission
//! (`webhooks.rs`) and conversion (`conversion_webhook.rs`) tests use it.

use std::sync::{Arc, Mutex};

use base64::Engine;
use bytes::Bytes;
use futures_util::future::BoxFuture;
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};
use watchkeeper::Server;
use watchkeeper::config::ServeArgs;

use super::{send_json, server_with};

/// What the test's webhook server received: (path, review).
pub type Received = Arc<Mutex<Vec<(String, Value)>>>;

/// How the test's webhook answers a review posted at a path: the status and the JSON body.
pub type Answer = Arc<dyn Fn(String, Value) -> BoxFuture<'static, (u16, Value)> + Send + Sync>;

/// The test's HTTPS webhook server.
pub struct Hooks {
    pub port: u16,
    /// The CA's PEM, base64 (a `caBundle`).
    pub ca_bundle: String,
    pub received: Received,
}

impl Hooks {
    /// Starts it, answering with `answer` (its certificate for `hooks.default.svc`).
    pub async fn start(answer: Answer) -> Hooks {
        let received: Received = Arc::default();
        let log = received.clone();
        let (port, ca) = super::https_server(&["hooks.default.svc"], move |request| {
            respond(request, log.clone(), answer.clone())
        })
        .await;
        Hooks {
            port,
            ca_bundle: base64::engine::general_purpose::STANDARD.encode(ca),
            received,
        }
    }

    /// A kubeconfig naming this server at `path` (its CA; a bearer token of its own), written
    /// in `dir`: how kube's webhooks configured by file (token, authorization) reach it.
    pub fn kubeconfig(&self, dir: &std::path::Path, path: &str) -> std::path::PathBuf {
        let file = dir.join("webhook.kubeconfig");
        std::fs::write(
            &file,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: hook\n  cluster:\n    server: https://127.0.0.1:{}{path}\n    certificate-authority-data: {}\nusers:\n- name: apiserver\n  user: {{token: webhook-credential}}\ncontexts:\n- name: hook\n  context: {{cluster: hook, user: apiserver}}\ncurrent-context: hook\n",
                self.port, self.ca_bundle
            ),
        )
        .unwrap();
        file
    }

    /// The reviews received at `path`.
    pub fn at(&self, path: &str) -> Vec<Value> {
        self.received
            .lock()
            .unwrap()
            .iter()
            .filter(|(p, _)| p == path)
            .map(|(_, review)| review.clone())
            .collect()
    }
}

/// One review: logged, then answered by the test's function.
async fn respond(
    request: hyper::Request<hyper::body::Incoming>,
    received: Received,
    answer: Answer,
) -> hyper::Response<Full<Bytes>> {
    let path = request.uri().path().to_owned();
    let review: Value =
        serde_json::from_slice(&request.into_body().collect().await.unwrap().to_bytes()).unwrap();
    received
        .lock()
        .unwrap()
        .push((path.clone(), review.clone()));
    let (status, body) = answer(path, review).await;
    let mut response = hyper::Response::new(Full::new(Bytes::from(body.to_string())));
    *response.status_mut() = hyper::StatusCode::from_u16(status).unwrap();
    response
}

/// A server and the Service `default/hooks` (port 443) whose Endpoints point at `port` on
/// 127.0.0.1.
pub async fn server_and_service(port: u16) -> Server {
    server_and_service_with(port, ServeArgs::default()).await
}

/// [`server_and_service`] with `args`.
pub async fn server_and_service_with(port: u16, args: ServeArgs) -> Server {
    let server = server_with(args).await;
    let addr = server.addr;
    let (status, body) = send_json(
        addr,
        "POST",
        "/api/v1/namespaces/default/services",
        &json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "hooks"},
            "spec": {"ports": [{"name": "https", "port": 443, "targetPort": port}]}}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = send_json(
        addr,
        "POST",
        "/api/v1/namespaces/default/endpoints",
        &json!({"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "hooks"},
            "subsets": [{"addresses": [{"ip": "127.0.0.1"}],
                "ports": [{"name": "https", "port": port}]}]}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    server
}

//! The `proxy` subresources — `pods/{name}/proxy`, `services/{name}/proxy`,
//! `nodes/{name}/proxy`, each with a path after it — answered as kube-apiserver answers them:
//! the request is sent on to the object's address and the backend's answer streamed back
//! (`pkg/registry/core/{pod,service,node}` `ResourceLocation` and the `Connect` of their proxy
//! REST, over apimachinery's `proxy.UpgradeAwareHandler`).
//!
//! ## Guarantees
//! - **Paths and names.** `/api/v1/namespaces/NS/pods/ID/proxy[/PATH]`,
//!   `/api/v1/namespaces/NS/services/ID/proxy[/PATH]`, `/api/v1/nodes/ID/proxy[/PATH]`, where
//!   `ID` is `name`, `name:port` or `scheme:name:port` (kube's `SplitSchemeNamePort`; scheme
//!   `http` or `https`): anything else is 400 `invalid pod request "ID"` (`service`, `node`).
//!   Without a path after `proxy`, the `path` query parameter is the path, as kube's
//!   `PodProxyOptions` reads it. The backend path is kube's
//!   `net.JoinPreservingTrailingSlash` of it (Go's `path.Join`: `..` cannot climb out), the
//!   query passed on as it came; an empty path of a GET or HEAD is kube's 301 to the same URL
//!   with a `/` after it.
//! - **Authorization** is that of any subresource: verb from the method as kube's
//!   `RequestInfoFactory` (GET and HEAD `get`, POST `create`, PUT `update`, PATCH `patch`,
//!   DELETE `delete`, OPTIONS the empty verb), resource `pods` (`services`, `nodes`),
//!   subresource `proxy`, the name the whole `ID` segment (`web:80`); denied is kube's 403.
//! - **Pods** (kube's words): the pod must exist (404); the port is the one named, else the
//!   first container port declared, else none (the scheme's default); the pod's first
//!   `status.podIPs` address must parse and be global unicast (Go's `IsGlobalUnicast`: not
//!   loopback, unspecified, link-local, multicast or broadcast), else 400 `address not
//!   allowed`.
//! - **Services** (kube's words): a port number must be one of the service's ports (else 503
//!   `no service port 80 found for service "web"`) and stands for that port's name; the
//!   Endpoints must exist (404) and have subsets (else 503 `no endpoints available for service
//!   "web"`); from a subset picked at random (the next ones in turn), its port of that name
//!   and an address picked at random: an address is used only when its `targetRef` is a Pod of
//!   the same namespace whose `status.podIPs` hold the address (kube's `isValidAddress`) **and**
//!   it is global unicast; none is 503 `no endpoints available for service "ID"`. The scheme is
//!   the one named (https for `https:web:443`), else http.
//! - **Nodes** (kube's `NodeConnectionInfoGetter`): the node must exist (404); its address is
//!   the first of its `status.addresses` of the types kube-apiserver prefers by default
//!   (`Hostname` — or the `kubernetes.io/hostname` label —, `InternalDNS`, `InternalIP`,
//!   `ExternalDNS`, `ExternalIP`), none is kube's 500 `no preferred addresses found; known
//!   addresses: [...]`; the port, without one named, is the kubelet's
//!   (`status.daemonEndpoints.kubeletEndpoint.Port`, else 10250) over https, else the one
//!   named over the scheme named. A host name is resolved, and every address it has must be
//!   global unicast (kube's `IsProxyableHostname`: 400 `address not allowed`).
//! - **Never to this machine's loopback.** Whatever the object says, no connection is made to
//!   a loopback, unspecified, link-local, multicast or broadcast address. This server accepts
//!   loopback addresses in Endpoints and EndpointSlices (for webhooks on the same machine, see
//!   `watchkeeper_api::kinds::nodes`), so without this rule a client allowed to write Endpoints
//!   and to proxy could reach etcd or anything else listening on the server's loopback. kube
//!   checks pods' addresses and other-port node addresses; services' only against their pods
//!   (whose addresses it allows anywhere but loopback-like ones), so the rule is the same.
//! - **The request sent on**: method, path, query and body as they came; the headers but the
//!   hop-by-hop ones (`Connection` and those it names, `Keep-Alive`, `Proxy-*`, `TE`,
//!   `Trailer`, `Transfer-Encoding`, `Upgrade`), the caller's `Authorization` and
//!   `Impersonate-*` (kube's authentication and impersonation filters remove them; so are a
//!   front proxy's `--requestheader-*` headers that authenticated the request), with
//!   `X-Forwarded-For` (the client's address added) and `X-Forwarded-Uri` (the path the client
//!   asked, as kube's proxy transport sets it); the `Host` header is the client's, as kube's.
//!   https is spoken without verifying the backend's certificate, as kube's proxy transport
//!   (`InsecureSkipVerify`; kube-apiserver does not verify kubelets' certificates either
//!   unless `--kubelet-certificate-authority` is set).
//! - **The answer**: the backend's status, headers (but the hop-by-hop ones and the
//!   `Access-Control-Allow-*` ones kube removes) and body, streamed as it arrives (never read
//!   whole). A redirect's `Location` on the backend (a path, or a URL of the backend's or the
//!   client's host) is rewritten under the `.../proxy` prefix, as kube's proxy transport does,
//!   and so are the links of a `text/html` answer ([`super::proxy_html`]).
//!   A backend that cannot be reached is kube's 503 `error trying to reach service: <Go's
//!   dial error>` (`dial tcp 10.0.0.5:80: connect: connection refused`, `... i/o timeout`).
//! - **Bounded**: a proxied request holds one of `--proxy-requests-max` slots until its
//!   answer's last byte (past it: 429 `Too many requests, please try again later.`,
//!   `Retry-After: 1`, counted as `limit="proxy_requests"`); connecting takes at most
//!   `--proxy-connect-timeout-ms`; the body is the one the limits layer read within
//!   `--max-request-body-bytes`. Like kube, these requests are long-running
//!   (`limits::is_long_running`): no `--request-timeout` deadline, no in-flight seat; the slot
//!   bound is what keeps them from holding the server.
//! - **Caching-proxy mode**: the request goes to the upstream as it came (method, path,
//!   query, body, headers but the caller's credentials and hop-by-hop ones), after the same
//!   authorization, holding the same slot; its answer is streamed back.
//!
//! ## Differences from kube-apiserver
//! - Connection upgrades (`Connection: Upgrade`, a WebSocket through the proxy) are not
//!   relayed: 400 saying so, after the location is found (kube relays them).
//! - A port given by name (`pods/p:http/proxy`) is not looked up in the system's services
//!   database as Go's dialer does: 503 `error trying to reach service: dial tcp: lookup
//!   tcp/http: unknown port`.
//! - No client certificate is presented to a node's kubelet (this server has none; it runs no
//!   kubelets, so a node's address is usually nothing that answers).
//! - A host name (a node's) is resolved once and the connection made to the address found,
//!   after the address check (kube's dialer resolves it again).
//!
//! As in kube, an address of this machine that is not a loopback one (its own non-loopback
//! interfaces) is an address like any other: a server whose etcd or other services listen on
//! such an address should keep them from the clients allowed to write Pods' status, Endpoints
//! or Nodes and to use these subresources.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::response::Response;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use watchkeeper_api::{ApiError, ResourceDef};

use super::App;
use super::inner::read_object;
use crate::cache::Resource;
use crate::request::{RequestContext, Target};

/// How long an idle connection to a backend is kept.
const IDLE: Duration = Duration::from_secs(90);

/// The kubelet's port when a node does not say (kube's `ports.KubeletPort`).
const KUBELET_PORT: u16 = 10250;

type Pooled = HyperClient<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// The client of the `proxy` subresources: its slots and its pooled connections.
pub struct ProxyClient {
    slots: Arc<Semaphore>,
    client: Pooled,
    connect_timeout: Duration,
}

impl std::fmt::Debug for ProxyClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxyClient")
            .field("slots", &self.slots.available_permits())
            .finish_non_exhaustive()
    }
}

impl ProxyClient {
    /// A client of `requests_max` requests in flight at most, each connecting within
    /// `connect_timeout`.
    #[must_use]
    pub fn new(requests_max: usize, connect_timeout: Duration) -> ProxyClient {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map(|builder| {
                builder
                    .dangerous()
                    .with_custom_certificate_verifier(Arc::new(Unverified(provider)))
                    .with_no_client_auth()
            });
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_connect_timeout(Some(connect_timeout));
        http.set_nodelay(true);
        let builder = hyper_rustls::HttpsConnectorBuilder::new();
        let connector = match config {
            Ok(config) => builder.with_tls_config(config),
            // ring's provider has the safe default versions; this is never taken.
            Err(_) => builder.with_tls_config(
                rustls::ClientConfig::builder()
                    .with_root_certificates(rustls::RootCertStore::empty())
                    .with_no_client_auth(),
            ),
        }
        .https_or_http()
        .enable_http1()
        .wrap_connector(http);
        let client = HyperClient::builder(TokioExecutor::new())
            .pool_idle_timeout(IDLE)
            .build(connector);
        ProxyClient {
            slots: Arc::new(Semaphore::new(requests_max.max(1))),
            client,
            connect_timeout,
        }
    }

    /// A slot, or kube's 429 when every one is taken.
    fn slot(&self, app: &App) -> Result<OwnedSemaphorePermit, ApiError> {
        self.slots.clone().try_acquire_owned().map_err(|_| {
            app.limits.count(crate::limits::Limit::ProxyRequests);
            ApiError::too_many_requests("Too many requests, please try again later.", 1)
        })
    }
}

/// The TLS verifier of kube's proxy transport (`InsecureSkipVerify`): any certificate is
/// accepted; the handshake's signatures are still checked.
#[derive(Debug)]
struct Unverified(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for Unverified {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls_pki_types::CertificateDer<'_>,
        _intermediates: &[rustls_pki_types::CertificateDer<'_>],
        _server_name: &rustls_pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls_pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls_pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls_pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// Whether `{def}/{name}/{sub}` is a `proxy` subresource served here.
#[must_use]
pub fn is_proxy_subresource(def: &ResourceDef, sub: &str) -> bool {
    sub == "proxy"
        && def.group.is_empty()
        && matches!(def.plural.as_str(), "pods" | "services" | "nodes")
}

/// Whether a (decoded) request path addresses a `proxy` subresource of a core pod, service or
/// node: such a request's body and answer are passed through untouched.
#[must_use]
pub fn is_proxy_path(path: &str) -> bool {
    if !path.contains("/proxy") {
        return false;
    }
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    match segments[..] {
        ["api", "v1", ref rest @ ..] => Target::parse("", "v1", rest).is_some_and(|target| {
            target.subresource == Some("proxy")
                && target.name.is_some()
                && !target.watch_path
                && matches!(target.plural, "pods" | "services" | "nodes")
        }),
        _ => false,
    }
}

/// The verb kube's `RequestInfoFactory` gives a request to a `proxy` subresource.
#[must_use]
pub fn verb(method: &Method) -> &'static str {
    match *method {
        Method::POST => "create",
        Method::GET | Method::HEAD => "get",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE => "delete",
        _ => "",
    }
}

/// The request metrics' label of a proxied request's method.
#[must_use]
pub fn verb_label(method: &Method) -> &'static str {
    match *method {
        Method::POST => "CREATE",
        Method::GET | Method::HEAD => "GET",
        Method::PUT => "UPDATE",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        _ => "",
    }
}

/// kube's `utilnet.SplitSchemeNamePort`: `name`, `name:port` or `scheme:name:port`, the
/// scheme empty, `http` or `https`, the name not empty.
fn split_scheme_name_port(id: &str) -> Option<(&str, &str, &str)> {
    let parts: Vec<&str> = id.split(':').collect();
    let (scheme, name, port) = match parts[..] {
        [name] => ("", name, ""),
        [name, port] => ("", name, port),
        [scheme, name, port] => (scheme, name, port),
        _ => return None,
    };
    (!name.is_empty() && matches!(scheme, "" | "http" | "https")).then_some((scheme, name, port))
}

/// Go's `net.IP.IsGlobalUnicast` (an IPv4-mapped IPv6 address as its IPv4 address).
#[must_use]
pub fn is_global_unicast(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            !(v4.is_broadcast()
                || v4.is_unspecified()
                || v4.is_loopback()
                || v4.is_multicast()
                || v4.is_link_local())
        }
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => is_global_unicast(IpAddr::V4(v4)),
            None => {
                !(v6.is_unspecified()
                    || v6.is_loopback()
                    || v6.is_multicast()
                    || (v6.segments()[0] & 0xffc0) == 0xfe80)
            }
        },
    }
}

/// Where a proxied request goes.
struct Location {
    /// `http` or `https`.
    scheme: &'static str,
    /// The address's host as the object gave it (an IP address, or a node's host name).
    host: String,
    /// The port, as given (may be a name, or empty for the scheme's default).
    port: String,
}

fn scheme_of(named: &str, default: &'static str) -> &'static str {
    match named {
        "https" => "https",
        "http" => "http",
        _ => default,
    }
}

fn status_ips(pod: &Value) -> Vec<String> {
    pod.pointer("/status/podIPs")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|ip| ip.get("ip").and_then(Value::as_str))
        .map(str::to_owned)
        .collect()
}

fn parse_ip(text: &str) -> Option<IpAddr> {
    text.parse::<IpAddr>().ok()
}

/// kube's pod `ResourceLocation`.
async fn pod_location(
    app: &App,
    resource: &Resource,
    namespace: &str,
    id: &str,
) -> Result<Location, ApiError> {
    let Some((scheme, name, port)) = split_scheme_name_port(id) else {
        return Err(ApiError::bad_request(format!("invalid pod request {id:?}")));
    };
    let pod = read_object(app, resource, namespace, name).await?;
    let mut port = port.to_owned();
    if port.is_empty() {
        let first = pod
            .pointer("/spec/containers")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|c| c.get("ports").and_then(Value::as_array))
            .find_map(|ports| ports.first())
            .and_then(|p| p.get("containerPort"))
            .and_then(Value::as_i64);
        if let Some(first) = first {
            port = first.to_string();
        }
    }
    let ip = status_ips(&pod).into_iter().next().unwrap_or_default();
    match parse_ip(&ip) {
        Some(address) if is_global_unicast(address) => Ok(Location {
            scheme: scheme_of(scheme, "http"),
            host: address.to_string(),
            port,
        }),
        _ => Err(ApiError::bad_request("address not allowed")),
    }
}

/// kube's service `ResourceLocation`, with its addresses limited to global unicast ones.
async fn service_location(
    app: &App,
    resource: &Resource,
    namespace: &str,
    id: &str,
) -> Result<Location, ApiError> {
    let Some((scheme, name, port)) = split_scheme_name_port(id) else {
        return Err(ApiError::bad_request(format!(
            "invalid service request {id:?}"
        )));
    };
    let mut port_name = port.to_owned();
    if let Ok(number) = port.parse::<i64>() {
        let service = read_object(app, resource, namespace, name).await?;
        let found = service
            .pointer("/spec/ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|p| p.get("port").and_then(Value::as_i64) == Some(number));
        match found {
            Some(p) => {
                port_name = p
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
            }
            None => {
                return Err(ApiError::service_unavailable(format!(
                    "no service port {number} found for service {name:?}"
                )));
            }
        }
    }
    let endpoints_resource = app
        .resource("", "v1", "endpoints")
        .ok_or_else(|| ApiError::service_unavailable("endpoints are not served"))?;
    let endpoints = read_object(app, &endpoints_resource, namespace, name).await?;
    let subsets: Vec<&Value> = endpoints
        .get("subsets")
        .and_then(Value::as_array)
        .map(|s| s.iter().collect())
        .unwrap_or_default();
    if subsets.is_empty() {
        return Err(ApiError::service_unavailable(format!(
            "no endpoints available for service {name:?}"
        )));
    }
    let pods = app.resource("", "v1", "pods");
    let start = random_below(subsets.len());
    for i in 0..subsets.len() {
        let subset = subsets[(start + i) % subsets.len()];
        let addresses: Vec<&Value> = subset
            .get("addresses")
            .and_then(Value::as_array)
            .map(|a| a.iter().collect())
            .unwrap_or_default();
        if addresses.is_empty() {
            continue;
        }
        let ports = subset
            .get("ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten();
        for endpoint_port in ports {
            let this_name = endpoint_port
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if this_name != port_name {
                continue;
            }
            let number = endpoint_port
                .get("port")
                .and_then(Value::as_i64)
                .unwrap_or_default();
            let seed = random_below(addresses.len());
            for try_ in 0..addresses.len() {
                let address = addresses[(seed + try_) % addresses.len()];
                let Some(ip) = address.get("ip").and_then(Value::as_str) else {
                    continue;
                };
                if !allowed_endpoint(app, pods.as_deref(), namespace, address, ip).await {
                    continue;
                }
                return Ok(Location {
                    scheme: scheme_of(scheme, "http"),
                    host: ip.to_owned(),
                    port: number.to_string(),
                });
            }
        }
    }
    Err(ApiError::service_unavailable(format!(
        "no endpoints available for service {id:?}"
    )))
}

/// kube's `isValidAddress` (a Pod target of the namespace whose IPs hold the address), and
/// the address global unicast.
async fn allowed_endpoint(
    app: &App,
    pods: Option<&Resource>,
    namespace: &str,
    address: &Value,
    ip: &str,
) -> bool {
    if !parse_ip(ip).is_some_and(is_global_unicast) {
        return false;
    }
    let Some(target) = address.get("targetRef") else {
        return false;
    };
    if target
        .get("namespace")
        .and_then(Value::as_str)
        .unwrap_or_default()
        != namespace
    {
        return false;
    }
    let (Some(pods), Some(pod_name)) = (pods, target.get("name").and_then(Value::as_str)) else {
        return false;
    };
    match read_object(app, pods, namespace, pod_name).await {
        Ok(pod) => status_ips(&pod).iter().any(|pod_ip| pod_ip == ip),
        Err(_) => false,
    }
}

/// A number in `0..n` (`n` > 0).
fn random_below(n: usize) -> usize {
    usize::try_from(rand::random::<u64>() % n.max(1) as u64).unwrap_or(0)
}

/// kube's node `ResourceLocation` over its `NodeConnectionInfoGetter`.
async fn node_location(app: &App, resource: &Resource, id: &str) -> Result<Location, ApiError> {
    let Some((scheme, name, port)) = split_scheme_name_port(id) else {
        return Err(ApiError::bad_request(format!(
            "invalid node request {id:?}"
        )));
    };
    let node = read_object(app, resource, "", name).await?;
    let addresses: Vec<(String, String)> = node
        .pointer("/status/addresses")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|a| {
            let field = |key| {
                a.get(key)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned()
            };
            (field("type"), field("address"))
        })
        .collect();
    let preferred = [
        "Hostname",
        "InternalDNS",
        "InternalIP",
        "ExternalDNS",
        "ExternalIP",
    ]
    .iter()
    .find_map(|wanted| {
        addresses
            .iter()
            .find(|(kind, _)| kind == wanted)
            .map(|(_, address)| address.clone())
            .or_else(|| {
                (*wanted == "Hostname")
                    .then(|| {
                        node.pointer("/metadata/labels/kubernetes.io~1hostname")
                            .and_then(Value::as_str)
                            .map(str::to_owned)
                    })
                    .flatten()
            })
    });
    let Some(host) = preferred else {
        let known: Vec<String> = addresses
            .iter()
            .map(|(kind, address)| format!("{{{kind} {address}}}"))
            .collect();
        return Err(ApiError::new(
            500,
            "",
            format!(
                "no preferred addresses found; known addresses: [{}]",
                known.join(" ")
            ),
        ));
    };
    let kubelet_port = node
        .pointer("/status/daemonEndpoints/kubeletEndpoint/Port")
        .and_then(Value::as_i64)
        .filter(|p| *p > 0)
        .map_or(KUBELET_PORT.to_string(), |p| p.to_string());
    if port.is_empty() || port == kubelet_port {
        return Ok(Location {
            scheme: "https",
            host,
            port: kubelet_port,
        });
    }
    Ok(Location {
        scheme: scheme_of(scheme, "http"),
        host,
        port: port.to_owned(),
    })
}

/// The address to connect to: the location's host resolved (a host name) and every address
/// it has global unicast (else 400 `address not allowed`), its port a number.
async fn dial_address(
    location: &Location,
    connect_timeout: Duration,
) -> Result<SocketAddr, ApiError> {
    let port = if location.port.is_empty() {
        if location.scheme == "https" { 443 } else { 80 }
    } else {
        location.port.parse::<u16>().map_err(|_| {
            ApiError::service_unavailable(format!(
                "error trying to reach service: dial tcp: lookup tcp/{}: unknown port",
                location.port
            ))
        })?
    };
    let host = location.host.trim_start_matches('[').trim_end_matches(']');
    if let Some(ip) = parse_ip(host) {
        if !is_global_unicast(ip) {
            return Err(ApiError::bad_request("address not allowed"));
        }
        return Ok(SocketAddr::new(ip, port));
    }
    // The name is resolved within the connect timeout (Go's dialer counts it in).
    let resolved: Vec<SocketAddr> =
        match tokio::time::timeout(connect_timeout, tokio::net::lookup_host((host, port))).await {
            Ok(Ok(found)) => found.collect(),
            Ok(Err(_)) => {
                return Err(ApiError::service_unavailable(format!(
                    "error trying to reach service: dial tcp: lookup {host}: no such host"
                )));
            }
            Err(_) => {
                return Err(ApiError::service_unavailable(format!(
                    "error trying to reach service: dial tcp: lookup {host}: i/o timeout"
                )));
            }
        };
    if resolved.is_empty() || resolved.iter().any(|a| !is_global_unicast(a.ip())) {
        return Err(ApiError::bad_request("address not allowed"));
    }
    Ok(resolved[0])
}

/// Go's `path.Clean` of a path that starts with `/` or is empty (`""` stays `""`).
fn go_clean(path: &str) -> String {
    if path.is_empty() {
        return String::new();
    }
    let rooted = path.starts_with('/');
    let mut out: Vec<&str> = Vec::new();
    for segment in path.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                if out.last().is_some_and(|last| *last != "..") {
                    out.pop();
                } else if !rooted {
                    out.push("..");
                }
            }
            other => out.push(other),
        }
    }
    let joined = out.join("/");
    match (rooted, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".to_owned(),
        (false, false) => joined,
    }
}

/// kube's `net.JoinPreservingTrailingSlash("", sub)`.
fn join_preserving_trailing_slash(sub: &str) -> String {
    let mut joined = go_clean(sub);
    if joined == "." {
        joined.clear();
    }
    if sub.ends_with('/') && !joined.ends_with('/') {
        joined.push('/');
    }
    joined
}

/// Go's `url.URL.EscapedPath` of a decoded path (`shouldEscape` in path mode).
#[must_use]
pub fn escape_path(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for byte in path.bytes() {
        let keep = byte.is_ascii_alphanumeric()
            || matches!(
                byte,
                b'-' | b'_'
                    | b'.'
                    | b'~'
                    | b'$'
                    | b'&'
                    | b'+'
                    | b','
                    | b'/'
                    | b':'
                    | b';'
                    | b'='
                    | b'@'
            );
        if keep {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// The path a request asks of the backend: what follows `proxy` in the URL (kube's subpath,
/// with a leading `/` and the URL's trailing `/`), else the `path` query parameter.
fn requested_path(context: &RequestContext, namespaced: bool) -> String {
    let trimmed = context.path.trim_matches('/');
    let parts: Vec<&str> = trimmed.split('/').collect();
    let start = if namespaced { 7 } else { 5 };
    if parts.len() > start || context.path.ends_with('/') {
        let mut sub = parts.get(start..).map(|p| p.join("/")).unwrap_or_default();
        if !sub.is_empty() && !sub.starts_with('/') {
            sub.insert(0, '/');
        }
        if context.path.ends_with('/') && !sub.ends_with('/') {
            sub.push('/');
        }
        return sub;
    }
    context
        .query
        .as_deref()
        .and_then(|q| serde_urlencoded::from_str::<Vec<(String, String)>>(q).ok())
        .and_then(|pairs| pairs.into_iter().find(|(k, _)| k == "path"))
        .map(|(_, v)| v)
        .unwrap_or_default()
}

/// Whether the request asks for a connection upgrade (Go's `httpstream.IsUpgradeRequest`).
fn is_upgrade(headers: &HeaderMap) -> bool {
    headers.get_all(header::CONNECTION).iter().any(|value| {
        value.to_str().is_ok_and(|v| {
            v.split(',')
                .any(|token| token.trim().eq_ignore_ascii_case("upgrade"))
        })
    })
}

/// The hop-by-hop headers Go's reverse proxy removes, and those `Connection` names.
fn remove_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|token| HeaderName::from_bytes(token.trim().as_bytes()).ok())
        .collect();
    for name in named {
        headers.remove(name);
    }
    for name in [
        "connection",
        "proxy-connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    ] {
        headers.remove(name);
    }
}

/// The request's headers as they are sent on: hop-by-hop ones, the caller's credentials and
/// impersonation removed, `Content-Length` left to the client.
fn forwarded_headers(context: &RequestContext) -> HeaderMap {
    let mut headers = context.headers.clone();
    remove_hop_by_hop(&mut headers);
    headers.remove(header::AUTHORIZATION);
    headers.remove(header::CONTENT_LENGTH);
    let impersonation: Vec<HeaderName> = headers
        .keys()
        .filter(|name| name.as_str().starts_with("impersonate-"))
        .cloned()
        .collect();
    for name in impersonation {
        headers.remove(name);
    }
    headers
}

/// Answers a request to a `proxy` subresource (see the module docs), once authorized.
///
/// # Errors
/// As kube-apiserver (see the module docs).
pub async fn serve(
    app: &App,
    context: &RequestContext,
    target: Target<'_>,
    resource: &Resource,
) -> Result<Response, ApiError> {
    if !matches!(
        context.method,
        Method::GET
            | Method::POST
            | Method::PUT
            | Method::PATCH
            | Method::DELETE
            | Method::HEAD
            | Method::OPTIONS
    ) {
        return Err(ApiError::method_not_allowed_on_resource(&context.method));
    }
    let client = &app.resource_proxy;
    if let Some(upstream) = app.source.as_upstream() {
        if is_upgrade(&context.headers) {
            return Err(upgrade_refused(&resource.def));
        }
        let slot = client.slot(app)?;
        let mut path_and_query = escape_path(&context.path);
        if let Some(query) = context.query.as_deref().filter(|q| !q.is_empty()) {
            path_and_query.push('?');
            path_and_query.push_str(query);
        }
        let mut headers = forwarded_headers(context);
        headers.remove(header::HOST);
        let answer = upstream
            .forward_proxied(crate::source::upstream::ProxiedRequest {
                method: &context.method,
                path_and_query: &path_and_query,
                headers,
                body: context.body.clone(),
                user: &context.user,
            })
            .await?;
        let (mut parts, body) = answer.into_parts();
        remove_hop_by_hop(&mut parts.headers);
        return Ok(Response::from_parts(parts, held_body(body, slot)));
    }
    let namespace = target.namespace.unwrap_or_default();
    let id = target.name.unwrap_or_default();
    let location = match resource.def.plural.as_str() {
        "pods" => pod_location(app, resource, namespace, id).await?,
        "services" => service_location(app, resource, namespace, id).await?,
        _ => node_location(app, resource, id).await?,
    };
    let sub = requested_path(context, resource.def.namespaced);
    let location_path = join_preserving_trailing_slash(&sub);
    let mut path = location_path.clone();
    if is_upgrade(&context.headers) {
        return Err(upgrade_refused(&resource.def));
    }
    if !path.ends_with('/') && context.path.ends_with('/') {
        path.push('/');
    }
    if path.is_empty() && matches!(context.method, Method::GET | Method::HEAD) {
        let mut to = escape_path(&context.path);
        to.push('/');
        if let Some(query) = context.query.as_deref().filter(|q| !q.is_empty()) {
            to.push('?');
            to.push_str(query);
        }
        let mut response = Response::new(axum::body::Body::empty());
        *response.status_mut() = StatusCode::MOVED_PERMANENTLY;
        if let Ok(value) = HeaderValue::from_str(&to) {
            response.headers_mut().insert(header::LOCATION, value);
        }
        return Ok(response);
    }
    let slot = client.slot(app)?;
    let address = dial_address(&location, client.connect_timeout).await?;
    let escaped = escape_path(&path);
    let authority = match address.ip() {
        IpAddr::V6(v6) => format!("[{v6}]:{}", address.port()),
        IpAddr::V4(v4) => format!("{v4}:{}", address.port()),
    };
    // An empty path is sent as `/`, as Go's client writes it.
    let sent_path = if escaped.is_empty() { "/" } else { &escaped };
    let mut uri = format!("{}://{authority}{sent_path}", location.scheme);
    if let Some(query) = context.query.as_deref().filter(|q| !q.is_empty()) {
        uri.push('?');
        uri.push_str(query);
    }
    // kube's proxy transport: the prefix its answers' paths are put under.
    let incoming = escape_path(&context.path);
    let mut suffix = escape_path(&location_path);
    if incoming.ends_with('/') && !suffix.ends_with('/') {
        suffix.push('/');
    }
    let prefix = incoming
        .strip_suffix(suffix.as_str())
        .unwrap_or(&incoming)
        .to_owned();
    let mut headers = forwarded_headers(context);
    let mut forwarded_uri = go_clean(&format!("{prefix}/{escaped}"));
    if path.ends_with('/') && !forwarded_uri.ends_with('/') {
        forwarded_uri.push('/');
    }
    if let Ok(value) = HeaderValue::from_str(&forwarded_uri) {
        headers.insert("x-forwarded-uri", value);
    }
    if let Some(peer) = context.peer {
        let client_ip = peer.ip().to_string();
        let value = match headers.get("x-forwarded-for").and_then(|v| v.to_str().ok()) {
            Some(prior) => format!("{prior}, {client_ip}"),
            None => client_ip,
        };
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.insert("x-forwarded-for", value);
        }
    }
    let mut request = axum::http::Request::builder()
        .method(context.method.clone())
        .uri(&uri);
    if let Some(request_headers) = request.headers_mut() {
        *request_headers = headers;
    }
    let request = request
        .body(Full::new(context.body.clone()))
        .map_err(|e| ApiError::bad_request(format!("cannot proxy the request: {e}")))?;
    let incoming_host = context
        .headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let answer = client
        .client
        .request(request)
        .await
        .map_err(|error| unreachable(&error, &authority))?;
    let (mut parts, body) = answer.into_parts();
    remove_hop_by_hop(&mut parts.headers);
    for name in [
        "access-control-allow-credentials",
        "access-control-allow-headers",
        "access-control-allow-methods",
        "access-control-allow-origin",
    ] {
        parts.headers.remove(name);
    }
    if let Some(location) = parts
        .headers
        .get(header::LOCATION)
        .and_then(|v| v.to_str().ok())
    {
        let rewritten = rewrite_location(location, &authority, &incoming_host, &prefix);
        if let Ok(value) = HeaderValue::from_str(&rewritten) {
            parts.headers.insert(header::LOCATION, value);
        }
        return Ok(Response::from_parts(parts, held_body(body, slot)));
    }
    // kube's transport rewrites the links of an HTML answer (not of a redirect's).
    let text = |name| {
        parts
            .headers
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
    };
    if super::proxy_html::is_html(text(header::CONTENT_TYPE))
        && let Some(encoding) = super::proxy_html::Encoding::of(text(header::CONTENT_ENCODING))
    {
        parts.headers.remove(header::CONTENT_LENGTH);
        let rewrite = super::proxy_html::Rewrite::new(encoding, move |link| {
            rewrite_location(link, &authority, &incoming_host, &prefix)
        });
        let body = super::proxy_html::rewritten(body, rewrite);
        return Ok(Response::from_parts(parts, held_body(body, slot)));
    }
    Ok(Response::from_parts(parts, held_body(body, slot)))
}

/// An answer's body that holds its slot until it is finished or dropped.
fn held_body<B>(body: B, slot: OwnedSemaphorePermit) -> axum::body::Body
where
    B: hyper::body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    axum::body::Body::new(body.map_frame(move |frame| {
        let _held = &slot;
        frame
    }))
}

fn upgrade_refused(def: &ResourceDef) -> ApiError {
    ApiError::bad_request(format!(
        "{}/proxy: connection upgrades (Upgrade requests, such as WebSocket) are not relayed by this server",
        def.plural
    ))
}

/// kube's answer when the backend cannot be reached (its proxy transport's
/// `errors.NewServiceUnavailable("error trying to reach service: ...")`).
fn unreachable(error: &hyper_util::client::legacy::Error, authority: &str) -> ApiError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(cause) = source {
        if let Some(io) = cause.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::TimedOut
        {
            return ApiError::service_unavailable(format!(
                "error trying to reach service: dial tcp {authority}: i/o timeout"
            ));
        }
        source = cause.source();
    }
    let cause = crate::source::webhook::client::go_cause(error, authority);
    ApiError::service_unavailable(format!("error trying to reach service: {cause}"))
}

/// kube's proxy transport's `rewriteURL` of a redirect's `Location`: a path (or a URL of the
/// backend's host, or of the client's) put under `prefix`; a relative one, or one of another
/// host, unchanged.
fn rewrite_location(location: &str, backend: &str, incoming_host: &str, prefix: &str) -> String {
    let (rest, fragment) = match location.split_once('#') {
        Some((rest, fragment)) => (rest, Some(fragment)),
        None => (location, None),
    };
    let (rest, query) = match rest.split_once('?') {
        Some((rest, query)) => (rest, Some(query)),
        None => (rest, None),
    };
    let (scheme, host, path) = match rest.split_once("://") {
        Some((scheme, after))
            if !scheme.is_empty()
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')) =>
        {
            let (host, path) = after
                .find('/')
                .map_or((after, ""), |at| (&after[..at], &after[at..]));
            (Some(scheme), host, path)
        }
        _ => match rest.strip_prefix("//") {
            Some(after) => {
                let (host, path) = after
                    .find('/')
                    .map_or((after, ""), |at| (&after[..at], &after[at..]));
                (None, host, path)
            }
            None => (None, "", rest),
        },
    };
    let different_host = !host.is_empty() && host != backend && host != incoming_host;
    if different_host || !path.starts_with('/') {
        return location.to_owned();
    }
    // The server's request URL has no scheme or host: they are dropped unless the URL is
    // the client's own host.
    let (scheme, host) = if host == incoming_host && !host.is_empty() {
        (scheme, host)
    } else {
        (None, "")
    };
    let path = if path.starts_with(prefix) {
        path.to_owned()
    } else {
        let mut joined = go_clean(&format!("{prefix}/{path}"));
        if path.ends_with('/') && !joined.ends_with('/') {
            joined.push('/');
        }
        joined
    };
    let mut out = String::new();
    if let Some(scheme) = scheme {
        out.push_str(scheme);
        out.push(':');
    }
    if !host.is_empty() {
        out.push_str("//");
        out.push_str(host);
    }
    out.push_str(&path);
    if let Some(query) = query {
        out.push('?');
        out.push_str(query);
    }
    if let Some(fragment) = fragment {
        out.push('#');
        out.push_str(fragment);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_split_as_kube_splits_them() {
        assert_eq!(split_scheme_name_port("p"), Some(("", "p", "")));
        assert_eq!(split_scheme_name_port("p:80"), Some(("", "p", "80")));
        assert_eq!(
            split_scheme_name_port("https:p:443"),
            Some(("https", "p", "443"))
        );
        assert_eq!(split_scheme_name_port("ftp:p:21"), None);
        assert_eq!(split_scheme_name_port(":80"), None);
        assert_eq!(split_scheme_name_port("a:b:c:d"), None);
    }

    #[test]
    fn only_global_unicast_addresses_are_allowed() {
        for bad in [
            "127.0.0.1",
            "127.1.2.3",
            "0.0.0.0",
            "169.254.169.254",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fe80::1",
            "ff02::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(!is_global_unicast(bad.parse().unwrap()), "{bad}");
        }
        for good in ["10.0.0.5", "192.0.2.2", "8.8.8.8", "fd00::1", "2001:db8::1"] {
            assert!(is_global_unicast(good.parse().unwrap()), "{good}");
        }
    }

    #[test]
    fn paths_join_as_go_joins_them() {
        assert_eq!(join_preserving_trailing_slash(""), "");
        assert_eq!(join_preserving_trailing_slash("/"), "/");
        assert_eq!(join_preserving_trailing_slash("/a/b"), "/a/b");
        assert_eq!(join_preserving_trailing_slash("/a/b/"), "/a/b/");
        assert_eq!(join_preserving_trailing_slash("/a/../../etc"), "/etc");
        assert_eq!(join_preserving_trailing_slash("a//b"), "a/b");
        assert_eq!(escape_path("/a b/%?"), "/a%20b/%25%3F");
    }

    #[test]
    fn redirects_are_put_under_the_prefix() {
        let prefix = "/api/v1/namespaces/d/pods/p:80/proxy";
        let backend = "10.0.0.5:80";
        let host = "server:6443";
        assert_eq!(
            rewrite_location("/login?x=1", backend, host, prefix),
            "/api/v1/namespaces/d/pods/p:80/proxy/login?x=1"
        );
        assert_eq!(
            rewrite_location("http://10.0.0.5:80/a/", backend, host, prefix),
            "/api/v1/namespaces/d/pods/p:80/proxy/a/"
        );
        assert_eq!(
            rewrite_location("https://example.com/a", backend, host, prefix),
            "https://example.com/a"
        );
        assert_eq!(rewrite_location("next", backend, host, prefix), "next");
        assert_eq!(
            rewrite_location(&format!("{prefix}/x"), backend, host, prefix),
            format!("{prefix}/x")
        );
    }
}

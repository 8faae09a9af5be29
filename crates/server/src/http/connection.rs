//! The connection layer: the accept loop, TLS (rustls) with HTTP/2 by ALPN, client
//! certificates, and the hyper connection per socket.
//!
//! ## Guarantees
//! - The accept loop only accepts: every TLS handshake runs in the connection's own task,
//!   bounded by `--tls-handshake-timeout-seconds`; a client that opens a socket and says
//!   nothing costs one task and one socket until then, and never delays other clients.
//! - Plain HTTP is served only on a loopback address unless
//!   `--insecure-allow-plain-http-on-non-loopback` is given; otherwise startup fails with a
//!   message naming the flags (see [`check_plain_http`]).
//! - With TLS, ALPN offers `h2` and `http/1.1`; both are served by the same handler. On plain
//!   sockets HTTP/2 with prior knowledge (h2c) is served too: a peek at the first bytes (the
//!   HTTP/2 preface or not) picks the protocol before hyper reads anything, and hyper's own
//!   detection is left only for what the peek cannot tell (see [`Protocol`]: it costs an idle
//!   HTTP/1.1 connection an 8 KiB larger read buffer).
//! - With `--client-ca-file`, a client certificate is requested and, when presented, verified
//!   against that CA (a certificate that does not verify fails the handshake). A verified
//!   certificate authenticates the connection's requests as user = its subject's CN, groups =
//!   its subject's O values, as kube-apiserver does ([`PeerIdentity`]). Clients without a
//!   certificate may still authenticate with a bearer token.
//! - Request headers larger than `--max-header-bytes` (plus a 16 KiB slack that is hyper's hard
//!   cut-off) are refused with a 431 Status: within the slack by the limits layer, beyond it by
//!   hyper, whose bare answers (431, 414 for a URI over 64 KiB, 400 for a malformed request) are
//!   rewritten as Status answers beneath it ([`crate::http::wire`]). The HTTP/1.1 read and
//!   write buffers are bounded by the same figure (hyper's `max_buf_size`), so a client that
//!   never reads costs at most that much buffered response per connection, plus its queue.
//! - With `--socket-send-buffer-bytes`, every connection's kernel send buffer is that size
//!   (SO_SNDBUF, set on the listening socket and inherited by each accepted one), so a client
//!   that does not read holds at most that much of the kernel's memory besides hyper's buffer
//!   and its watch queue; without it the kernel autotunes it, up to `net.ipv4.tcp_wmem`'s
//!   maximum.
//! - The listening socket's accept queue is as long as the system allows
//!   (`net.core.somaxconn`, as Go's listeners and so kube-apiserver's take it; [`listen`]), so
//!   thousands of clients reconnecting at once after a restart wait in the queue instead of
//!   overflowing it (an overflowed handshake is retried by the client's kernel after seconds).
//! - No connection stays open doing nothing: the first request (its line and headers over
//!   HTTP/1.1, its first stream over HTTP/2) must arrive within `--request-header-timeout-ms`
//!   of accept (TLS handshake included, so a client that completes the handshake and sends
//!   nothing is closed then); with nothing in flight (every response finished), a connection
//!   is closed after `--idle-timeout-ms`, and an HTTP/1.1 request's head must be complete
//!   within `--request-header-timeout-ms` of its first byte (kube-apiserver: Go's
//!   `ReadHeaderTimeout` 32 s, `IdleTimeout` 90 s for HTTP/1.1 and HTTP/2). Expiry closes
//!   the connection gracefully (HTTP/2: GOAWAY) and is counted as
//!   `limit="request_header_timeout"` or `"idle_timeout"`. HTTP/2 connections are pinged
//!   every `--http2-keepalive-interval-ms` and closed when a ping goes unanswered for
//!   `--http2-keepalive-timeout-ms`. A response write that makes no progress for
//!   `--write-timeout-ms` closes the connection ([`crate::http::wire`]). The body timeout is
//!   in [`crate::limits`].
//! - Every request that is not long-running gets its deadline (`--request-timeout`) when it
//!   arrives ([`crate::limits::RequestDeadline`]); an answer begun and not finished by then is
//!   cut off: an HTTP/1.1 connection is dropped by its task, an HTTP/2 stream's task is ended
//!   ([`crate::http::deadline`]), with what they hold; counted as `limit="request_timeout"`.
//!
//! ## Overload
//! Sockets are accepted as fast as the kernel hands them over; accept errors (e.g. out of file
//! descriptors) are logged and retried after a short pause instead of ending the server.
//! On shutdown the loop stops accepting (the listening socket is closed), every connection is
//! asked to finish gracefully (HTTP/1.1 after its response in flight, HTTP/2 with GOAWAY; watch
//! streams end when their cache ends them, after a final bookmark) and is dropped if it has
//! not finished within `--shutdown-grace-period-ms` (a client that does not read would
//! otherwise hold it), and [`serve`] returns once all connections are closed.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use crate::http::service::Service;
use hyper_util::rt::{TokioIo, TokioTimer};
use rustls::ServerConfig;
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::ClientCertVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
use tower::ServiceExt;

use crate::auth::PeerIdentity;
use crate::config::TlsConfig;
use crate::http::conn_body::ConnBody;
use crate::http::deadline::AnswerDeadline;
use crate::http::in_poll::{Executor, InPoll};
use crate::http::on_wake::{OnWake, Wakes};
use crate::http::watch::WatchHandoff;
use crate::http::wire::{Activity, Wire};
use crate::limits::connections::{Admission, ConnectionSlot};
use crate::limits::{
    Connection, HANDSHAKE_FAILURES, HoldBody, Limit, Limits, OPEN_CONNECTIONS, RequestDeadline,
    TimedOut,
};

/// Plain HTTP refused on a non-loopback address (without
/// `--insecure-allow-plain-http-on-non-loopback`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "refusing to serve plain HTTP on the non-loopback address {listen}: anyone on the network could read and change every object. Give --tls-cert-file and --tls-private-key-file, listen on a loopback address (e.g. 127.0.0.1), or pass --insecure-allow-plain-http-on-non-loopback if the network is trusted"
)]
pub struct PlainHttpRefused {
    /// The address asked for.
    pub listen: SocketAddr,
}

/// The longest accept queue of a listening socket: the system's `net.core.somaxconn`, capped
/// at 65535 as Go caps it (4096, Linux's default since 5.4, when it cannot be read).
fn listen_backlog() -> u32 {
    std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .ok()
        .and_then(|text| text.trim().parse::<u32>().ok())
        .filter(|n| *n > 0)
        .map_or(4096, |n| n.min(65535))
}

/// A listening socket on `addr` (address reuse on, as std's listeners set it, so a restarted
/// server binds its port again at once) with the accept queue of [`listen_backlog`], and, when
/// `send_buffer` is not 0, that SO_SNDBUF (`--socket-send-buffer-bytes`), which every accepted
/// connection inherits from the listening socket.
///
/// # Errors
/// The socket cannot be made, bound or put to listen.
pub fn listen(addr: SocketAddr, send_buffer: usize) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    if send_buffer != 0 {
        socket.set_send_buffer_size(u32::try_from(send_buffer).unwrap_or(u32::MAX))?;
    }
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(listen_backlog())
}

/// Refuses plain HTTP on a non-loopback address unless explicitly allowed.
///
/// # Errors
/// [`PlainHttpRefused`], printed at startup.
pub fn check_plain_http(tls: &TlsConfig, listen: SocketAddr) -> Result<(), PlainHttpRefused> {
    if tls.enabled() || listen.ip().is_loopback() || tls.allow_plain_non_loopback {
        return Ok(());
    }
    Err(PlainHttpRefused { listen })
}

/// A TLS file that cannot be used, or a TLS setup rustls refuses.
#[derive(Debug, thiserror::Error)]
pub enum TlsSetupError {
    /// A certificate, key or CA file cannot be read, parsed or used.
    #[error("{flag} {}: {cause}", path.display())]
    File {
        /// The flag naming the file (`--tls-cert-file`, `--tls-private-key-file`,
        /// `--client-ca-file`, or `--tls-cert-file/--tls-private-key-file` for a pair that
        /// does not match).
        flag: &'static str,
        /// The file.
        path: PathBuf,
        /// What is wrong.
        cause: String,
    },
    /// rustls refuses the protocol versions of its provider.
    #[error("TLS: {0}")]
    Protocol(String),
}

impl TlsSetupError {
    fn file(flag: &'static str, path: &Path, cause: impl std::fmt::Display) -> TlsSetupError {
        TlsSetupError::File {
            flag,
            path: path.to_owned(),
            cause: cause.to_string(),
        }
    }
}

fn read_pem_certs(
    flag: &'static str,
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, TlsSetupError> {
    let text = std::fs::read(path)
        .map_err(|e| TlsSetupError::file(flag, path, format!("I/O error: {e}")))?;
    crate::config::pem_certificates(&text).map_err(|e| TlsSetupError::file(flag, path, e))
}

/// The CA bundle every namespace's `kube-root-ca.crt` ConfigMap publishes (PEM): the
/// certificates of `--root-ca-file`; else those of `--tls-cert-file` after its leaf (the
/// chain's issuers), or its leaf when it is alone (a self-signed certificate); empty without
/// TLS (kube-controller-manager publishes its client configuration's CA data, empty for a
/// plain-HTTP server).
///
/// # Errors
/// A file cannot be read or holds no certificate.
pub fn root_ca_bundle(tls: &TlsConfig) -> Result<String, TlsSetupError> {
    let certs = match (&tls.root_ca_file, &tls.cert_file) {
        (Some(path), _) => read_pem_certs("--root-ca-file", path)?,
        (None, Some(path)) => {
            let mut chain = read_pem_certs("--tls-cert-file", path)?;
            if chain.len() > 1 {
                chain.remove(0);
            }
            chain
        }
        (None, None) => return Ok(String::new()),
    };
    Ok(pem_bundle(certs.iter().map(AsRef::as_ref)))
}

/// Certificates (DER) as a PEM bundle: one `CERTIFICATE` block after another, LF line
/// endings, as a CA bundle file has them.
pub fn pem_bundle<'a>(certs: impl IntoIterator<Item = &'a [u8]>) -> String {
    let config = pem::EncodeConfig::new().set_line_ending(pem::LineEnding::LF);
    certs
        .into_iter()
        .map(|cert| pem::encode_config(&pem::Pem::new("CERTIFICATE", cert), config))
        .collect()
}

/// What kube-apiserver publishes in `kube-system/extension-apiserver-authentication`: the
/// certificates of `--client-ca-file` and of `--requestheader-client-ca-file` (each a PEM
/// bundle, one block after another) with the request-header flags; `None` without either.
///
/// # Errors
/// A file cannot be read or holds no certificate.
pub fn authentication_info(
    tls: &TlsConfig,
) -> Result<Option<crate::config::tls::AuthenticationInfo>, TlsSetupError> {
    let bundle = |flag: &'static str, path: &Path| -> Result<String, TlsSetupError> {
        let certs = read_pem_certs(flag, path)?;
        Ok(pem_bundle(certs.iter().map(AsRef::as_ref)))
    };
    let client_ca = match &tls.client_ca_file {
        Some(path) => Some(bundle("--client-ca-file", path)?),
        None => None,
    };
    let request_header = match &tls.requestheader {
        Some(config) => Some((
            bundle("--requestheader-client-ca-file", &config.client_ca_file)?,
            config.clone(),
        )),
        None => None,
    };
    Ok((client_ca.is_some() || request_header.is_some()).then_some(
        crate::config::tls::AuthenticationInfo {
            client_ca,
            request_header,
        },
    ))
}

/// Builds the rustls configuration (ring provider, TLS 1.2 and 1.3, ALPN h2 then http/1.1),
/// or `None` without TLS.
///
/// # Errors
/// A file cannot be read or parsed, or the key does not match the certificate.
pub fn server_config(tls: &TlsConfig) -> Result<Option<Arc<ServerConfig>>, TlsSetupError> {
    let (Some(cert_file), Some(key_file)) = (&tls.cert_file, &tls.key_file) else {
        return Ok(None);
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let certs = read_pem_certs("--tls-cert-file", cert_file)?;
    let key = PrivateKeyDer::from_pem_file(key_file)
        .map_err(|e| TlsSetupError::file("--tls-private-key-file", key_file, e))?;
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsSetupError::Protocol(e.to_string()))?;
    // Client certificates of either CA are taken in the handshake; which one verified a
    // certificate is then told by `PeerRoots`.
    let cas: Vec<(&'static str, &Path)> = client_cas(tls);
    let builder = if cas.is_empty() {
        builder.with_no_client_auth()
    } else {
        builder.with_client_cert_verifier(client_verifier(&cas, provider)?)
    };
    let mut config = builder
        .with_single_cert(certs, key)
        .map_err(|e| TlsSetupError::file("--tls-cert-file/--tls-private-key-file", cert_file, e))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Some(Arc::new(config)))
}

/// The client CAs of `tls`: `--client-ca-file` and `--requestheader-client-ca-file`.
fn client_cas(tls: &TlsConfig) -> Vec<(&'static str, &Path)> {
    let mut cas = Vec::new();
    if let Some(file) = &tls.client_ca_file {
        cas.push(("--client-ca-file", file.as_path()));
    }
    if let Some(requestheader) = &tls.requestheader {
        cas.push((
            "--requestheader-client-ca-file",
            requestheader.client_ca_file.as_path(),
        ));
    }
    cas
}

/// A verifier of client certificates signed by any of `cas`; a client without one is let in.
fn client_verifier(
    cas: &[(&'static str, &Path)],
    provider: Arc<rustls::crypto::CryptoProvider>,
) -> Result<Arc<dyn ClientCertVerifier>, TlsSetupError> {
    let mut roots = rustls::RootCertStore::empty();
    for (flag, file) in cas {
        for cert in read_pem_certs(flag, file)? {
            roots
                .add(cert)
                .map_err(|e| TlsSetupError::file(flag, file, e))?;
        }
    }
    let (flag, file) = cas[0];
    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
        .allow_unauthenticated()
        .build()
        .map_err(|e| TlsSetupError::file(flag, file, e))
}

/// Which of the server's client CAs verified a client certificate: `--client-ca-file` (its
/// CN and O are the caller) and `--requestheader-client-ca-file` (a front proxy, whose request
/// headers name the caller when its CN is one of `--requestheader-allowed-names`), as kube's
/// x509 and request-header authenticators each verify against their own CA.
#[derive(Debug, Default)]
pub struct PeerRoots {
    client_ca: Option<Arc<dyn ClientCertVerifier>>,
    front_proxy: Option<Arc<dyn ClientCertVerifier>>,
    allowed_names: Vec<String>,
}

impl PeerRoots {
    /// The verifiers of `tls`'s client CAs (none without request-header authentication: the
    /// handshake's verification against `--client-ca-file` alone says it all then).
    ///
    /// # Errors
    /// A CA file cannot be read.
    pub fn new(tls: &TlsConfig) -> Result<PeerRoots, TlsSetupError> {
        let Some(requestheader) = &tls.requestheader else {
            return Ok(PeerRoots::default());
        };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let client_ca = match &tls.client_ca_file {
            Some(file) => Some(client_verifier(
                &[("--client-ca-file", file.as_path())],
                provider.clone(),
            )?),
            None => None,
        };
        let front_proxy = client_verifier(
            &[(
                "--requestheader-client-ca-file",
                requestheader.client_ca_file.as_path(),
            )],
            provider,
        )?;
        Ok(PeerRoots {
            client_ca,
            front_proxy: Some(front_proxy),
            allowed_names: requestheader.allowed_names.clone(),
        })
    }

    /// The identity of a client that presented `certs` (leaf first, verified by the
    /// handshake against the union of the CAs); `None` when no CA of its own vouches for it
    /// (a front proxy's certificate with a name not allowed).
    ///
    /// # Errors
    /// The certificate cannot be read or has no common name.
    pub fn identify(
        &self,
        certs: &[rustls_pki_types::CertificateDer<'_>],
    ) -> Result<Option<PeerIdentity>, String> {
        let Some(leaf) = certs.first() else {
            return Ok(None);
        };
        let mut identity = PeerIdentity::from_der(leaf)?;
        let Some(front_proxy) = &self.front_proxy else {
            return Ok(Some(identity));
        };
        let now = rustls_pki_types::UnixTime::now();
        let verified = |verifier: &Arc<dyn ClientCertVerifier>| {
            verifier.verify_client_cert(leaf, &certs[1..], now).is_ok()
        };
        identity.x509 = self.client_ca.as_ref().is_some_and(verified);
        identity.front_proxy = verified(front_proxy)
            && (self.allowed_names.is_empty() || self.allowed_names.contains(&identity.user));
        Ok((identity.x509 || identity.front_proxy).then_some(identity))
    }
}

/// The hyper settings of every connection.
#[derive(Clone, Debug)]
pub struct ConnectionSettings {
    /// TLS, if configured.
    pub tls: Option<Arc<ServerConfig>>,
    /// Which client CA verified a client certificate.
    pub peer_roots: Arc<PeerRoots>,
    /// TLS handshake bound.
    pub handshake_timeout: Duration,
    /// HTTP/1.1 read/write buffer bound (headers and buffered response bytes).
    pub max_buf_size: usize,
    /// HTTP/2 header list bound.
    pub max_header_list_size: u32,
    /// Request line and headers bound, from accept or from a request's first byte.
    pub header_timeout: Duration,
    /// A connection with nothing in flight is closed after this.
    pub idle_timeout: Duration,
    /// HTTP/2 keep-alive ping interval (`None`: no pings).
    pub http2_keepalive_interval: Option<Duration>,
    /// An unanswered HTTP/2 ping closes the connection after this.
    pub http2_keepalive_timeout: Duration,
    /// A response write without progress this long closes the connection.
    pub write_timeout: Duration,
    /// HTTP/2 concurrent streams per connection.
    pub max_concurrent_streams: u32,
    /// Response bytes buffered per HTTP/2 stream (`--http2-max-send-buffer-bytes`).
    pub http2_max_send_buf_size: usize,
    /// HTTP/2 initial stream and connection windows (`--http2-initial-*-window-bytes`).
    pub http2_windows: (u32, u32),
    /// How long a connection may take to finish after shutdown began (or after a timeout
    /// closed it) before it is dropped (`--shutdown-grace-period-ms`: a client that does not
    /// read would hold it forever).
    pub shutdown_grace: Duration,
    /// The limits' state (refusals made below the handlers are counted there; the
    /// connection slots of `--max-connections`).
    pub limits: Arc<Limits>,
}

struct OpenGuard;

impl Drop for OpenGuard {
    fn drop(&mut self) {
        OPEN_CONNECTIONS.fetch_sub(1, Ordering::Relaxed);
    }
}

/// What a connection holds for as long as it is open: the sender [`serve`] waits on at
/// shutdown, and its place in the count of open connections.
struct Open {
    _alive: tokio::sync::mpsc::Sender<()>,
    _guard: OpenGuard,
}

/// A phase of a connection's task (see [`ConnectionTask`]): ready with the next phase, or
/// `None` once the connection is closed.
struct Phase(Pin<Box<dyn Future<Output = Option<Phase>> + Send>>);

impl Phase {
    /// The last phase: `run`, then nothing.
    fn last(run: impl Future<Output = ()> + Send + 'static) -> Phase {
        Phase(Box::pin(Last { run }))
    }
}

pin_project_lite::pin_project! {
    /// [`Phase::last`]'s future (not an `async` block, which would hold `run` twice: as
    /// captured and as awaited).
    struct Last<F> {
        #[pin]
        run: F,
    }
}

impl<F: Future<Output = ()>> Future for Last<F> {
    type Output = Option<Phase>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Phase>> {
        ready!(self.project().run.poll(cx));
        Poll::Ready(None)
    }
}

/// A connection's task: the TLS handshake or the protocol sniff (the connection to serve, or
/// `None` when it closed), then the hyper connection.
///
/// Each phase is a box of its own and the task holds only the pointer: a task holding the
/// future inline is as large as its largest state (a TLS handshake's, or the sniff's timers)
/// for as long as the connection lives (an idle watch's whole life over HTTP/1.1), and the
/// opening phase's box is freed once the connection is served. One pointer, no enum: with
/// the [`InPoll`] around it the task's future stays 24 bytes, and tokio's task cell (aligned
/// to 128 bytes) stays one 128-byte allocation instead of 256.
struct ConnectionTask(Phase);

impl Future for ConnectionTask {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        loop {
            match ready!(self.0.0.as_mut().poll(cx)) {
                Some(next) => self.0 = next,
                None => return Poll::Ready(()),
            }
        }
    }
}

/// Accepts and serves connections until `shutdown` turns true, then waits for every
/// connection to close.
pub async fn serve(
    listener: TcpListener,
    service: Service,
    settings: ConnectionSettings,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let settings = Arc::new(settings);
    let acceptor = settings.tls.clone().map(tokio_rustls::TlsAcceptor::from);
    // Plain HTTP on loopback answers loopback Host names only (DNS-rebinding guard).
    let check_host = acceptor.is_none()
        && listener
            .local_addr()
            .is_ok_and(|local| local.ip().is_loopback());
    // Every connection task holds a sender; when all are dropped, `recv` returns None.
    let (alive_tx, mut alive_rx) = tokio::sync::mpsc::channel::<()>(1);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = shutdown.wait_for(|stopped| *stopped) => break,
        };
        let accepted_at = tokio::time::Instant::now();
        let (tcp, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                // EMFILE and friends: keep serving the open connections, retry shortly.
                tracing::warn!(%error, "accept failed");
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_millis(50)) => continue,
                    _ = shutdown.wait_for(|stopped| *stopped) => break,
                }
            }
        };
        // At `--max-connections`: this one takes the place of a connection with nothing in
        // flight, or is closed unread (dropped here) when every one has a request in flight.
        let slot = match settings.limits.connections().admit() {
            Admission::Admitted(slot) => slot,
            Admission::Evicted(slot) => {
                settings.limits.count(Limit::ConnectionEvicted);
                slot
            }
            Admission::Refused => {
                settings.limits.count(Limit::Connections);
                tracing::debug!(%peer, "connection refused: every open one is busy");
                continue;
            }
        };
        // Watch events are small writes; without TCP_NODELAY, Nagle's algorithm meets the
        // client's delayed ACKs and every event waits ~40 ms (the benchmark found it).
        if let Err(error) = tcp.set_nodelay(true) {
            tracing::debug!(%error, "cannot set TCP_NODELAY");
        }
        OPEN_CONNECTIONS.fetch_add(1, Ordering::Relaxed);
        let open = Open {
            _alive: alive_tx.clone(),
            _guard: OpenGuard,
        };
        let opening = Box::pin(open_connection(
            Accepted {
                tcp,
                peer,
                at: accepted_at,
                slot,
                open,
            },
            service.clone(),
            settings.clone(),
            acceptor.clone(),
            shutdown.clone(),
            check_host,
        ));
        // A connection wakes itself inside its own poll once or more per request: answered
        // by polling again at once, not by waking another worker (see `InPoll`).
        tokio::spawn(InPoll::new(ConnectionTask(Phase(opening))));
    }
    drop(listener);
    drop(alive_tx);
    let _ = alive_rx.recv().await;
}

/// A socket just accepted, with what it holds.
struct Accepted {
    tcp: tokio::net::TcpStream,
    peer: SocketAddr,
    at: tokio::time::Instant,
    slot: ConnectionSlot,
    open: Open,
}

/// The opening phase of a connection: the TLS handshake and client certificate, or the
/// protocol sniff of a plain socket; then the connection to serve (`None`: it is closed).
async fn open_connection(
    accepted: Accepted,
    service: Service,
    settings: Arc<ConnectionSettings>,
    acceptor: Option<tokio_rustls::TlsAcceptor>,
    shutdown: tokio::sync::watch::Receiver<bool>,
    check_host: bool,
) -> Option<Phase> {
    let Accepted {
        tcp,
        peer,
        at: accepted_at,
        slot,
        open,
    } = accepted;
    let Some(acceptor) = acceptor else {
        // The protocol from the first bytes, without consuming them (see [`Protocol`]); a
        // connection that says nothing is left to the timeouts of `drive`.
        let mut stopping = shutdown.clone();
        let protocol = tokio::select! {
            protocol = sniff(&tcp) => protocol,
            () = tokio::time::sleep_until(accepted_at + settings.header_timeout) => Protocol::Detect,
            _ = stopping.wait_for(|stopped| *stopped) => Protocol::Detect,
            () = slot.evicted() => return None,
        };
        let connection = Arc::new(Connection {
            remote: Some(peer),
            check_host,
            ..Connection::default()
        });
        return Some(serving(
            tcp,
            protocol,
            Held {
                accepted: accepted_at,
                connection,
                slot,
                open,
            },
            service,
            settings,
            shutdown,
        ));
    };
    let handshake = tokio::select! {
        handshake = tokio::time::timeout(
            settings.handshake_timeout,
            Box::pin(acceptor.accept(tcp)),
        ) => handshake,
        () = slot.evicted() => return None,
    };
    let stream = match handshake {
        Ok(Ok(stream)) => stream,
        Ok(Err(error)) => {
            HANDSHAKE_FAILURES.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(%peer, %error, "TLS handshake failed");
            return None;
        }
        Err(_) => {
            HANDSHAKE_FAILURES.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(%peer, "TLS handshake timed out");
            return None;
        }
    };
    let peer_identity = match stream
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|certs| certs.first())
    {
        Some(_) => match settings
            .peer_roots
            .identify(stream.get_ref().1.peer_certificates().unwrap_or_default())
        {
            Ok(identity) => identity,
            Err(error) => {
                tracing::debug!(%peer, %error, "client certificate refused");
                return None;
            }
        },
        None => None,
    };
    // ALPN names the protocol; a client that offered none is detected by its first bytes.
    let protocol = match stream.get_ref().1.alpn_protocol() {
        Some(b"h2") => Protocol::Http2,
        Some(b"http/1.1") => Protocol::Http1,
        _ => Protocol::Detect,
    };
    let connection = Arc::new(Connection {
        peer: peer_identity,
        watches: AtomicUsize::new(0),
        tls: true,
        remote: Some(peer),
        check_host: false,
        release: tokio::sync::Notify::new(),
    });
    Some(serving(
        stream,
        protocol,
        Held {
            accepted: accepted_at,
            connection,
            slot,
            open,
        },
        service,
        settings,
        shutdown,
    ))
}

/// The HTTP version a connection speaks, when known before hyper reads it.
///
/// hyper's automatic detection reads the first 24 bytes itself and hands them back to the
/// HTTP/1.1 parser as a short first read; the parser then asks for another 8 KiB of room
/// and its read buffer doubles to 16 KiB for the life of the connection (an idle watch
/// connection's largest allocation). Knowing the version beforehand (ALPN, or a peek at a
/// plain socket's first bytes) serves the connection without that detour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Protocol {
    /// HTTP/1.1 (TLS with ALPN `http/1.1`, or a plain socket whose first bytes are not the
    /// HTTP/2 preface).
    Http1,
    /// HTTP/2 (ALPN `h2`, or the whole HTTP/2 preface: prior knowledge).
    Http2,
    /// Not known yet (nothing or only part of the preface arrived, or TLS without ALPN):
    /// hyper detects it.
    Detect,
}

/// The HTTP/2 connection preface (RFC 9113 3.4).
const H2_PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// The protocol of a plain connection from its first bytes, left unread (see [`Protocol`]).
async fn sniff(tcp: &tokio::net::TcpStream) -> Protocol {
    let mut first = [0u8; 24];
    match tcp.peek(&mut first).await {
        Ok(n) if n > 0 && first[..n] != H2_PREFACE[..n] => Protocol::Http1,
        Ok(24) => Protocol::Http2,
        _ => Protocol::Detect,
    }
}

/// Where a connection stands for its timeouts.
#[derive(Clone, Copy, Debug)]
enum Wait {
    /// The request's head (HTTP/1.1) or the first request (either protocol) must arrive by
    /// then (`--request-header-timeout-ms`, from accept or from the next request's first byte).
    Head(tokio::time::Instant),
    /// Nothing in flight: the next request's first byte (HTTP/1.1) or stream (HTTP/2) must
    /// arrive by then (`--idle-timeout-ms`).
    Idle(tokio::time::Instant),
    /// A request is in flight (its body and response have their own bounds).
    Busy,
}

/// What an open connection holds besides its stream: when it was accepted, its state for the
/// handlers and the limits, its `--max-connections` slot, and its place among the open ones.
struct Held {
    accepted: tokio::time::Instant,
    connection: Arc<Connection>,
    slot: ConnectionSlot,
    open: Open,
}

/// The service of a connection's requests: the server's ([`crate::http::service`]), with
/// the connection's state put in each request, each answer finished as axum's router did
/// ([`crate::http::service::finish`]), and a watch's body taken out of its response for the
/// connection to write (see [`crate::http::chunk`]).
///
/// A hyper service of its own (not a tower service behind hyper-util's adapter): hyper keeps
/// the service's future of a request in a box per HTTP/1.1 connection, and inline in each
/// HTTP/2 stream's task, for as long as the connection or stream lives; the adapter's future
/// holds the whole request inline (hundreds of bytes), this one a pointer.
#[derive(Clone)]
struct ConnService {
    connection: Arc<Connection>,
    activity: Arc<Activity>,
    service: Service,
    limits: Arc<Limits>,
}

/// Who cuts an answer off at its deadline.
enum CutOff {
    /// The HTTP/2 stream's task ([`crate::http::deadline`]).
    Stream(Arc<AnswerDeadline>),
    /// The HTTP/1.1 connection's task ([`drive`]), whose timer runs from the request's start.
    Connection(Arc<Activity>),
}

/// The answer of [`ConnService`] to one request.
type Responding =
    Pin<Box<dyn Future<Output = Result<axum::http::Response<ConnBody>, Infallible>> + Send>>;

impl hyper::service::Service<axum::http::Request<hyper::body::Incoming>> for ConnService {
    type Response = axum::http::Response<ConnBody>;
    type Error = Infallible;
    type Future = Responding;

    fn call(&self, mut request: axum::http::Request<hyper::body::Incoming>) -> Responding {
        let h2 = request.version() == axum::http::Version::HTTP_2;
        // The request's deadline (`--request-timeout`, none when long-running): the limits
        // layer answers 504 when the handler has not answered by then; an answer begun is cut
        // off there, over HTTP/2 by the stream's task (handed to the executor, which hyper
        // calls next), over HTTP/1.1 by the connection's task (told the deadline as the
        // request begins).
        let deadline = RequestDeadline::of(&request, self.limits.config());
        let in_flight = self.activity.begin(h2, deadline.0.filter(|_| !h2));
        request.extensions_mut().insert(deadline);
        let cut_off = deadline.0.map(|at| {
            if h2 {
                let stream = AnswerDeadline::new(at, self.limits.clone());
                crate::http::deadline::hand_over(stream.clone());
                CutOff::Stream(stream)
            } else {
                CutOff::Connection(self.activity.clone())
            }
        });
        // The client's address is the connection's (`Connection::remote`): one extension
        // fewer to box and hash per request.
        request.extensions_mut().insert(self.connection.clone());
        let service = self.service.clone();
        let method = request.method().clone();
        // Boxed: the request and the service's future live in it until the response is ready,
        // and are freed then (a watch's response lives on without them).
        Box::pin(async move {
            // A panic in a request's handling is this server's bug; the request is answered as
            // kube-apiserver's panic recovery answers one (the audit layer inside has recorded
            // its `Panic` stage), and the connection and its other requests go on.
            let answered = futures_util::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(
                service.oneshot(request.map(axum::body::Body::new)),
            ))
            .await;
            let mut response = match answered {
                Ok(response) => response?,
                Err(_) => crate::respond::panic_response(),
            };
            crate::http::service::finish(&method, &mut response);
            // The answer began before its deadline (else it is the 504, never cut off).
            if response.extensions().get::<TimedOut>().is_none() {
                match cut_off {
                    Some(CutOff::Stream(stream)) => stream.arm(),
                    Some(CutOff::Connection(activity)) => activity.answer_began(),
                    None => {}
                }
            }
            // A watch's batches go to hyper as one frame each (see `chunk`).
            let events = response
                .extensions_mut()
                .remove::<WatchHandoff>()
                .and_then(|handoff| handoff.take());
            if events.is_some() {
                // hyper keeps a response's header map, emptied, for the rest of an HTTP/1.1
                // connection (to parse the next request's headers into): a watch's, exactly
                // sized, instead of the six-entry map the layers grew (624 bytes of entries).
                let grown = std::mem::take(response.headers_mut());
                let mut exact = axum::http::HeaderMap::with_capacity(grown.len());
                exact.extend(grown);
                *response.headers_mut() = exact;
            }
            Ok::<_, Infallible>(response.map(|body| {
                let shell = HoldBody::wrap(body, in_flight);
                match events {
                    Some(events) => ConnBody::Watch {
                        events: Some(events),
                        shell,
                    },
                    None => ConnBody::Plain(shell),
                }
            }))
        })
    }
}

/// The hyper connection of an accepted stream, boxed (see [`ConnectionTask`]).
///
/// A protocol known before hyper reads is served by hyper's own HTTP/1.1 or HTTP/2
/// connection, not hyper-util's automatic one: that one is an enum as large as its largest
/// protocol's state (HTTP/2's), which an HTTP/1.1 connection would carry for its whole life.
fn serving<S>(
    stream: S,
    protocol: Protocol,
    held: Held,
    service: Service,
    settings: Arc<ConnectionSettings>,
    shutdown: tokio::sync::watch::Receiver<bool>,
) -> Phase
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let activity = Arc::new(Activity::default());
    let service = ConnService {
        connection: held.connection.clone(),
        activity: activity.clone(),
        service,
        limits: settings.limits.clone(),
    };
    let io = TokioIo::new(Wire::new(
        stream,
        settings.limits.clone(),
        activity.clone(),
        settings.write_timeout,
    ));
    // No HTTP upgrades are served (no handler answers 101).
    match protocol {
        Protocol::Http1 => {
            let conn = http1_builder(&settings).serve_connection(io, service);
            Phase::last(drive(Box::pin(conn), held, activity, settings, shutdown))
        }
        Protocol::Http2 => {
            let conn = http2_builder(&settings).serve_connection(io, service);
            Phase::last(drive(Box::pin(conn), held, activity, settings, shutdown))
        }
        Protocol::Detect => {
            let conn = auto_builder(&settings)
                .serve_connection(io, service)
                .into_owned();
            Phase::last(drive(Box::pin(conn), held, activity, settings, shutdown))
        }
    }
}

// The three builders take the same settings (hyper-util's automatic builder wraps hyper's two).

fn http1_builder(settings: &ConnectionSettings) -> hyper::server::conn::http1::Builder {
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        // The connection task bounds the head (from accept, or from the request's first byte).
        .header_read_timeout(None)
        .max_buf_size(settings.max_buf_size);
    builder
}

fn http2_builder(settings: &ConnectionSettings) -> hyper::server::conn::http2::Builder<Executor> {
    let mut builder = hyper::server::conn::http2::Builder::new(Executor);
    builder
        .timer(TokioTimer::new())
        .max_header_list_size(settings.max_header_list_size)
        .max_concurrent_streams(settings.max_concurrent_streams)
        .max_send_buf_size(settings.http2_max_send_buf_size)
        .initial_stream_window_size(settings.http2_windows.0)
        .initial_connection_window_size(settings.http2_windows.1)
        .keep_alive_interval(settings.http2_keepalive_interval)
        .keep_alive_timeout(settings.http2_keepalive_timeout);
    builder
}

fn auto_builder(
    settings: &ConnectionSettings,
) -> hyper_util::server::conn::auto::Builder<Executor> {
    let mut builder = hyper_util::server::conn::auto::Builder::new(Executor);
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(None)
        .max_buf_size(settings.max_buf_size);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_header_list_size(settings.max_header_list_size)
        .max_concurrent_streams(settings.max_concurrent_streams)
        .max_send_buf_size(settings.http2_max_send_buf_size)
        .initial_stream_window_size(settings.http2_windows.0)
        .initial_connection_window_size(settings.http2_windows.1)
        .keep_alive_interval(settings.http2_keepalive_interval)
        .keep_alive_timeout(settings.http2_keepalive_timeout);
    builder
}

/// A hyper connection asked to finish gracefully (HTTP/1.1 after its response in flight,
/// HTTP/2 with GOAWAY).
trait Graceful {
    fn graceful(self: Pin<&mut Self>);
}

type Io<S> = TokioIo<Wire<S>>;

impl<S> Graceful for hyper::server::conn::http1::Connection<Io<S>, ConnService>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    fn graceful(self: Pin<&mut Self>) {
        self.graceful_shutdown();
    }
}

impl<S> Graceful for hyper::server::conn::http2::Connection<Io<S>, ConnService, Executor>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    fn graceful(self: Pin<&mut Self>) {
        self.graceful_shutdown();
    }
}

impl<S> Graceful
    for hyper_util::server::conn::auto::Connection<'static, Io<S>, ConnService, Executor>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    fn graceful(self: Pin<&mut Self>) {
        self.graceful_shutdown();
    }
}

/// Serves `conn` to its end, closing it at its timeouts, at shutdown, when another
/// connection takes its slot, or when the limits release it.
///
/// `conn` comes boxed: an `async fn` keeps each argument twice (as passed, and moved into the
/// body), which for hyper's connection state would be 700 bytes more per connection.
async fn drive<C, E>(
    mut conn: Pin<Box<C>>,
    held: Held,
    activity: Arc<Activity>,
    settings: Arc<ConnectionSettings>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) where
    C: Future<Output = Result<(), E>> + Graceful,
    E: std::fmt::Display,
{
    let Held {
        accepted,
        connection,
        mut slot,
        open: _open,
    } = held;
    let mut wait = Wait::Head(accepted + settings.header_timeout);
    let mut seen = 0;
    // One flag for every turn's `OnWake` (an allocation less per turn: ~3 per request).
    let wakes = Wakes::new();
    loop {
        // The head or idle deadline; none while a request is in flight (then no timer is
        // made: a watch connection holds the wait below for its whole life).
        let mut deadline = match wait {
            Wait::Head(at) | Wait::Idle(at) => Some(Box::pin(tokio::time::sleep_until(at))),
            // An HTTP/1.1 answer under way with a deadline (`--request-timeout`).
            Wait::Busy => activity
                .answer_deadline()
                .map(|at| Box::pin(tokio::time::sleep_until(at))),
        };
        // What the connection waits for besides its own traffic, polled only when one of
        // those woke it: every write of a watch event wakes this task, and polling these
        // (shared locks of `Notify` and `watch`) per event cost more than the write.
        let others = OnWake::with(&wakes, async {
            tokio::select! {
                () = connection.release.notified() => Other::Release,
                _ = shutdown.wait_for(|stopped| *stopped) => Other::Shutdown,
                () = activity.changed() => Other::Activity,
                () = slot.evicted() => Other::Evicted,
                () = async {
                    match deadline.as_mut() {
                        Some(sleep) => sleep.await,
                        None => std::future::pending().await,
                    }
                } => Other::Deadline,
            }
        });
        let other = tokio::select! {
            biased;
            result = conn.as_mut() => {
                if let Err(error) = result {
                    tracing::debug!(%error, "connection ended with an error");
                }
                return;
            }
            other = others => other,
        };
        match other {
            // Dropping the connection closes the socket and drops the stuck response bodies.
            Other::Release => return,
            // Another connection took this one's slot (counted when it was admitted), unless a
            // request began at that moment: it keeps the connection.
            Other::Evicted if activity.inflight() > 0 => slot.keep(),
            Other::Shutdown | Other::Evicted => break,
            // The answer began after its deadline passed (the handler answered as it passed).
            Other::Activity if activity.answer_overdue() => {
                settings.limits.count(Limit::RequestTimeout);
                tracing::debug!(
                    "an HTTP/1.1 answer began after its deadline: closing its connection"
                );
                return;
            }
            // HTTP/2 "rapid reset": GOAWAY, and the streams in flight finish.
            Other::Activity if activity.too_many_resets() => {
                settings.limits.count(Limit::Http2Resets);
                tracing::debug!(
                    "an HTTP/2 client cancelled most of its streams: closing its connection"
                );
                break;
            }
            Other::Activity => {
                wait = next_wait(&activity, wait, &mut seen, &settings);
                slot_follows(&mut slot, wait);
            }
            Other::Deadline
                if activity.inflight() > 0
                    && activity
                        .answer_deadline()
                        .is_some_and(|at| at <= tokio::time::Instant::now())
                    && activity.deadline_passed() =>
            {
                // The answer is not finished by its deadline: as kube-apiserver aborts an
                // HTTP/1.1 handler, the connection is closed (dropped now, with the response
                // body and the slots it holds). An answer not begun is the limits layer's 504
                // (the wait below then has no timer).
                settings.limits.count(Limit::RequestTimeout);
                tracing::debug!("an HTTP/1.1 answer outlived its deadline: closing its connection");
                return;
            }
            Other::Deadline => {
                wait = next_wait(&activity, wait, &mut seen, &settings);
                slot_follows(&mut slot, wait);
                let limit = match wait {
                    Wait::Head(at) if at <= tokio::time::Instant::now() => Limit::HeaderTimeout,
                    Wait::Idle(at) if at <= tokio::time::Instant::now() => Limit::IdleTimeout,
                    _ => continue,
                };
                settings.limits.count(limit);
                tracing::debug!(limit = limit.as_str(), "closing a connection");
                break;
            }
        }
    }
    conn.as_mut().graceful();
    match tokio::time::timeout(settings.shutdown_grace, conn).await {
        Ok(Err(error)) => tracing::debug!(%error, "connection ended with an error"),
        Ok(Ok(())) => {}
        Err(_) => tracing::debug!("connection dropped: it did not finish after shutdown"),
    }
}

/// What ended a connection task's wait besides its own traffic.
#[derive(Clone, Copy, Debug)]
enum Other {
    /// The limits released the connection (dropped now).
    Release,
    /// The server is shutting down.
    Shutdown,
    /// A request began or finished, or an awaited byte arrived.
    Activity,
    /// The head or idle deadline passed.
    Deadline,
    /// A new connection took this one's slot (`--max-connections`).
    Evicted,
}

/// A connection may give way to a new one only while nothing is in flight.
fn slot_follows(slot: &mut ConnectionSlot, wait: Wait) {
    match wait {
        Wait::Busy => slot.busy(),
        Wait::Head(_) | Wait::Idle(_) => slot.idle(),
    }
}

/// Where a connection stands after a change of its activity (or its deadline passing).
fn next_wait(
    activity: &Activity,
    wait: Wait,
    seen: &mut usize,
    settings: &ConnectionSettings,
) -> Wait {
    let now = tokio::time::Instant::now();
    if activity.inflight() > 0 {
        activity.await_byte(false);
        return Wait::Busy;
    }
    // A request that began and finished since the last look counts as a busy spell.
    let begun = activity.begun();
    let wait = if begun == *seen { wait } else { Wait::Busy };
    *seen = begun;
    match wait {
        Wait::Busy => {
            // HTTP/2 frames (pings, settings) do not start a request: only streams count.
            activity.await_byte(!activity.is_h2());
            Wait::Idle(now + settings.idle_timeout)
        }
        Wait::Idle(_) if !activity.is_h2() && activity.byte_arrived() => {
            Wait::Head(now + settings.header_timeout)
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The accept queue is the system's `somaxconn` (what `ss` shows as a listening socket's
    /// Send-Q), not tokio's default of 1024 or std's 128.
    #[tokio::test]
    async fn the_accept_queue_is_as_long_as_the_system_allows() {
        let listener = listen("127.0.0.1:0".parse().unwrap(), 0).unwrap();
        let port = listener.local_addr().unwrap().port();
        let out = std::process::Command::new("ss")
            .args(["-ltnH", &format!("sport = :{port}")])
            .output()
            .expect("ss (iproute2) runs");
        let text = String::from_utf8_lossy(&out.stdout);
        let send_q: u32 = text
            .split_whitespace()
            .nth(2)
            .and_then(|field| field.parse().ok())
            .unwrap_or_else(|| panic!("no listening socket on {port} in {text:?}"));
        let somaxconn: u32 = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert_eq!(send_q, somaxconn.min(65535));
        // A second listener binds the same port once the first is gone (address reuse).
        drop(listener);
        listen(format!("127.0.0.1:{port}").parse().unwrap(), 0).unwrap();
    }

    /// `kube-root-ca.crt`'s bundle: `--root-ca-file`'s certificates, else the serving chain's
    /// issuers (its leaf when alone), else nothing; a file without a certificate is refused.
    #[test]
    fn the_root_ca_bundle_comes_from_the_flags() {
        let dir = tempfile::tempdir().unwrap();
        let cert = |name: &str| {
            rcgen::generate_simple_self_signed(vec![name.to_owned()])
                .unwrap()
                .cert
                .pem()
        };
        let (leaf, issuer, other) = (cert("leaf"), cert("issuer"), cert("other"));
        let write = |file: &str, text: &str| {
            let path = dir.path().join(file);
            std::fs::write(&path, text).unwrap();
            Some(path)
        };
        let normal = |text: &str| text.replace("\r\n", "\n");
        let chain = TlsConfig {
            cert_file: write("chain.pem", &format!("{leaf}{issuer}")),
            ..TlsConfig::default()
        };
        assert_eq!(root_ca_bundle(&chain).unwrap(), normal(&issuer));
        let alone = TlsConfig {
            cert_file: write("leaf.pem", &leaf),
            ..TlsConfig::default()
        };
        assert_eq!(root_ca_bundle(&alone).unwrap(), normal(&leaf));
        let named = TlsConfig {
            root_ca_file: write("ca.pem", &format!("{issuer}{other}")),
            ..chain
        };
        assert_eq!(
            root_ca_bundle(&named).unwrap(),
            normal(&format!("{issuer}{other}"))
        );
        assert_eq!(root_ca_bundle(&TlsConfig::default()).unwrap(), "");
        let empty = TlsConfig {
            root_ca_file: write("empty.pem", "not a certificate\n"),
            ..TlsConfig::default()
        };
        let refused = root_ca_bundle(&empty).unwrap_err().to_string();
        assert!(refused.contains("--root-ca-file"), "{refused}");
    }
}

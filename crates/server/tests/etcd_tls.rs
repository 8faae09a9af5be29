//! A server over an etcd that serves its clients over TLS and asks for client certificates
//! (`--client-cert-auth`, as kubeadm's etcd), given kube-apiserver's `--etcd-cafile`,
//! `--etcd-certfile` and `--etcd-keyfile`: it creates, lists and watches, and survives an
//! etcd restart; without a client certificate, or trusting another CA, it does not start and
//! says why; when etcd comes back with a certificate it does not trust, `/readyz` and `/livez`
//! fail their `etcd` checks with the handshake's reason; a certificate without its key is
//! refused at start.
//!
//! Each test makes its certificates with rcgen and starts its own etcd from `ETCD_BINARY`
//! (scripts/test sets it; a test fails without it rather than skipping).

use crate::common;

use std::net::SocketAddr;
use std::path::PathBuf;

use rcgen::ExtendedKeyUsagePurpose;
use serde_json::Value;
use watchkeeper::config::{ConfigError, ServeArgs, ServeConfig};

use common::etcd::{EtcdFlags, EtcdTlsFiles, OwnEtcd};
use common::pki::Pki;
use common::{HANG_GUARD, WatchReader, configmap, get_json, request, send_json, server_with};

const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";

/// An etcd serving TLS with a certificate of `pki` for 127.0.0.1 and localhost, asking for
/// client certificates signed by `pki`.
fn tls_etcd(pki: &Pki) -> OwnEtcd {
    // Both usages, as kubeadm's etcd server certificate: etcd's gateway dials etcd with it.
    let (cert, key) = pki.leaf(
        &["127.0.0.1", "localhost"],
        "etcd",
        &[],
        &[
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ],
    );
    OwnEtcd::start(EtcdFlags {
        tls: Some(EtcdTlsFiles {
            cert: pki.write("etcd.crt", &cert),
            key: pki.write("etcd.key", &key),
            client_ca: pki.ca_file(),
        }),
        ..EtcdFlags::default()
    })
}

/// A client certificate of `pki` and its key, as kubeadm's `apiserver-etcd-client`.
fn client_files(pki: &Pki) -> (PathBuf, PathBuf) {
    let (cert, key) = pki.leaf(
        &[],
        "kube-apiserver-etcd-client",
        &[],
        &[ExtendedKeyUsagePurpose::ClientAuth],
    );
    (
        pki.write("apiserver-etcd-client.crt", &cert),
        pki.write("apiserver-etcd-client.key", &key),
    )
}

/// The server's arguments over `etcd` with these TLS files.
fn over(etcd: &OwnEtcd, ca: Option<PathBuf>, client: Option<(PathBuf, PathBuf)>) -> ServeArgs {
    let (cert, key) = client.unzip();
    ServeArgs {
        store: Some("etcd".into()),
        etcd_endpoints: Some(vec![etcd.endpoint.clone()]),
        etcd_cafile: ca,
        etcd_certfile: cert,
        etcd_keyfile: key,
        ..ServeArgs::default()
    }
}

/// Creates `name` until etcd answers (201, or 409 when an attempt whose answer was lost
/// created it); fails the test on a hang.
async fn create_when_etcd_answers(addr: SocketAddr, name: &str) {
    tokio::time::timeout(HANG_GUARD, async {
        loop {
            let (code, body) = send_json(addr, "POST", CONFIGMAPS, &configmap(name, 1)).await;
            match code {
                201 | 409 => return,
                500..=599 | 429 => tokio::task::yield_now().await,
                _ => panic!("{code} {body}"),
            }
        }
    })
    .await
    .expect("etcd answers again");
}

/// Polls `path` until it answers `code`; returns the body. Fails the test on a hang.
async fn until_answer(addr: SocketAddr, path: &str, code: u16) -> String {
    tokio::time::timeout(HANG_GUARD, async {
        loop {
            let (got, body) = request(addr, "GET", path, "application/json", "").await;
            if got == code {
                return body;
            }
            tokio::task::yield_now().await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{path} never answered {code}"))
}

/// The next watch event's type and object name.
async fn next_event(watch: &mut WatchReader) -> (String, String) {
    let event = watch.next().await.expect("a watch event");
    (
        event["type"].as_str().unwrap_or_default().to_owned(),
        event["object"]["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    )
}

/// Goal: with kube's three flags the server becomes ready over an etcd that requires client
/// certificates, creates, lists and watches, `/readyz` reports `[+]etcd ok`, and after etcd is
/// killed and started again the same watch goes on and writes succeed again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_uses_a_tls_etcd_with_kube_apiservers_flags() {
    let pki = Pki::new("etcd-ca");
    let mut etcd = tls_etcd(&pki);
    assert!(etcd.endpoint.starts_with("https://127.0.0.1:"));
    let server = server_with(over(&etcd, Some(pki.ca_file()), Some(client_files(&pki)))).await;

    let (code, created) = send_json(server.addr, "POST", CONFIGMAPS, &configmap("a", 1)).await;
    assert_eq!(code, 201, "{created}");
    let (code, list) = get_json(server.addr, CONFIGMAPS).await;
    assert_eq!(code, 200, "{list}");
    let names: Vec<&Value> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| &item["metadata"]["name"])
        .collect();
    assert_eq!(names, ["a"]);
    let ready = until_answer(server.addr, "/readyz?verbose", 200).await;
    assert!(ready.contains("[+]etcd ok\n"), "{ready}");
    assert!(ready.contains("[+]etcd-readiness ok\n"), "{ready}");

    let version = list["metadata"]["resourceVersion"].as_str().unwrap();
    let mut watch = WatchReader::open(
        server.addr,
        &format!("{CONFIGMAPS}?watch=true&resourceVersion={version}"),
        None,
    )
    .await;
    let (code, body) = send_json(server.addr, "POST", CONFIGMAPS, &configmap("b", 1)).await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(next_event(&mut watch).await, ("ADDED".into(), "b".into()));

    etcd.restart();
    create_when_etcd_answers(server.addr, "c").await;
    assert_eq!(next_event(&mut watch).await, ("ADDED".into(), "c".into()));
    let ready = until_answer(server.addr, "/readyz?verbose", 200).await;
    assert!(ready.contains("[+]etcd ok\n"), "{ready}");
    server.shutdown().await;
}

/// Starts a server with `args`; returns why it could not start.
async fn start_error(args: ServeArgs) -> String {
    let config = ServeConfig::from_args(watchkeeper_testkit::loopback(args)).unwrap();
    match watchkeeper::start(config).await {
        Ok(_) => panic!("the server started"),
        Err(error) => error.to_string(),
    }
}

/// Goal: trusting etcd's CA but without a client certificate, the server does not start
/// (as kube-apiserver, which cannot make its etcd client): its first write is refused at
/// once, not after the request timeout, and the error gives etcd's alert for want of a
/// certificate. Under TLS 1.3 the client's handshake ends before etcd checks its certificate,
/// and etcd's alert races with its reset of the connection (the request already sent is
/// unread): when the reset wins, all the client can say is that etcd closed the connection
/// (or, if it was still writing, that the pipe broke).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_client_certificate_the_server_does_not_start() {
    let pki = Pki::new("etcd-ca");
    let etcd = tls_etcd(&pki);
    let error = start_error(over(&etcd, Some(pki.ca_file()), None)).await;
    assert!(
        error.starts_with("cannot create Namespace default: "),
        "{error}"
    );
    // The alert, or, when etcd's reset won, the connection it closed (read as closed, as
    // reset, or as a broken pipe when the client was still writing).
    assert!(
        error.contains("received fatal alert: BadCertificate")
            || error.contains("received fatal alert: CertificateRequired")
            || error.ends_with("transport error: connection closed")
            || error.ends_with("stream closed because of a broken pipe")
            || error.contains("Connection reset by peer"),
        "{error}"
    );
    assert!(!error.contains("timed out"), "{error}");
}

/// Goal: with a client certificate etcd accepts but another CA in `--etcd-cafile`, etcd's
/// serving certificate is refused and the server does not start; the error says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_another_ca_the_server_does_not_start() {
    let pki = Pki::new("etcd-ca");
    let etcd = tls_etcd(&pki);
    let stranger = Pki::new("stranger-ca");
    let error = start_error(over(
        &etcd,
        Some(stranger.ca_file()),
        Some(client_files(&pki)),
    ))
    .await;
    assert!(
        error.starts_with("cannot create Namespace default: "),
        "{error}"
    );
    assert!(
        error.contains("invalid peer certificate: UnknownIssuer"),
        "{error}"
    );
}

/// Goal: a running server whose etcd comes back with a certificate of a CA it does not trust
/// is no longer ready: `/readyz` fails its `etcd` checks (`[-]etcd failed`), and the check's
/// own path gives the handshake's reason; once etcd serves its former certificate again the
/// server is ready again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_fails_the_etcd_check_when_etcds_certificate_is_refused() {
    let pki = Pki::new("etcd-ca");
    let mut etcd = tls_etcd(&pki);
    let server = server_with(over(&etcd, Some(pki.ca_file()), Some(client_files(&pki)))).await;
    let ready = until_answer(server.addr, "/readyz?verbose", 200).await;
    assert!(ready.contains("[+]etcd ok\n"), "{ready}");

    // The same files, now of another CA (etcd reads them at start).
    let files = std::fs::read(pki.path("etcd.crt")).unwrap();
    let key = std::fs::read(pki.path("etcd.key")).unwrap();
    let stranger = Pki::new("stranger-ca");
    let (cert, stranger_key) = stranger.leaf(
        &["127.0.0.1", "localhost"],
        "etcd",
        &[],
        &[
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ],
    );
    pki.write("etcd.crt", &cert);
    pki.write("etcd.key", &stranger_key);
    etcd.restart();
    let reason = until_answer(server.addr, "/readyz/etcd", 500).await;
    assert!(
        reason.contains("invalid peer certificate: UnknownIssuer"),
        "{reason}"
    );
    let (code, verbose) = request(server.addr, "GET", "/readyz?verbose", "", "").await;
    assert_eq!(code, 500, "{verbose}");
    assert!(
        verbose.contains("[-]etcd failed: reason withheld\n"),
        "{verbose}"
    );
    assert!(
        verbose.contains("[-]etcd-readiness failed: reason withheld\n"),
        "{verbose}"
    );
    let (code, live) = request(server.addr, "GET", "/livez?verbose", "", "").await;
    assert_eq!(code, 500, "{live}");
    assert!(live.contains("[-]etcd failed: reason withheld\n"), "{live}");

    std::fs::write(pki.path("etcd.crt"), files).unwrap();
    std::fs::write(pki.path("etcd.key"), key).unwrap();
    etcd.restart();
    let ready = until_answer(server.addr, "/readyz?verbose", 200).await;
    assert!(ready.contains("[+]etcd ok\n"), "{ready}");
    server.shutdown().await;
}

/// Goal: `--etcd-certfile` without `--etcd-keyfile` is refused at start, naming both flags
/// (kube's etcd client: `KeyFile and CertFile must both be present`).
#[test]
fn a_client_certificate_without_its_key_is_refused() {
    let pki = Pki::new("etcd-ca");
    let (cert, _) = client_files(&pki);
    let error = ServeConfig::from_args(ServeArgs {
        store: Some("etcd".into()),
        etcd_endpoints: Some(vec!["https://127.0.0.1:2379".into()]),
        etcd_cafile: Some(pki.ca_file()),
        etcd_certfile: Some(cert),
        ..ServeArgs::default()
    })
    .unwrap_err();
    assert!(
        matches!(&error, ConfigError::Combination { flags, .. } if flags[..] == ["--etcd-certfile", "--etcd-keyfile"]),
        "{error}"
    );
    assert_eq!(
        error.to_string(),
        "--etcd-certfile and --etcd-keyfile must be given together"
    );
}

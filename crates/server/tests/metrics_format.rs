//! `/metrics` keeps what scrapers rely on. The fixtures under `tests/fixtures/` are the output of
//! a running server (store mode, and caching-proxy mode in front of a second server) captured
//! after the same requests this test makes: every metric family's `# TYPE` and `# HELP` line
//! and every sample's name and label set in them must still be served. Values are not compared
//! (they depend on timing), and a histogram's `le` bound is compared as the number it denotes
//! (`0.000001` and `1e-06` are the same bucket to every Prometheus parser).

use crate::common;

use std::collections::BTreeSet;
use std::net::SocketAddr;

use common::HANG_GUARD;
use watchkeeper::config::{ServeArgs, ServeConfig};

/// What a scraper keys on in one exposition.
#[derive(Debug, Default)]
struct Exposition {
    /// (family, type) from `# TYPE` lines.
    types: BTreeSet<(String, String)>,
    /// (family, help) from `# HELP` lines.
    helps: BTreeSet<(String, String)>,
    /// (sample name, sorted label pairs) of every sample.
    samples: BTreeSet<(String, Vec<(String, String)>)>,
}

/// Parses the Prometheus text format (version 0.0.4) as far as this test needs: label values
/// here never hold `,`, `}` or escaped quotes.
fn parse(text: &str) -> Exposition {
    let mut out = Exposition::default();
    for line in text.lines().filter(|l| !l.is_empty()) {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("a typed family");
            out.types.insert((name.to_owned(), kind.to_owned()));
        } else if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').expect("a family with help");
            out.helps.insert((name.to_owned(), help.to_owned()));
        } else if line.starts_with('#') {
            panic!("an unexpected comment line: {line}");
        } else {
            let (series, _value) = line.rsplit_once(' ').expect("a sample with a value");
            let (name, labels) = match series.split_once('{') {
                Some((name, labels)) => (name, labels.strip_suffix('}').expect("closed labels")),
                None => (series, ""),
            };
            let mut pairs: Vec<(String, String)> = labels
                .split(',')
                .filter(|pair| !pair.is_empty())
                .map(|pair| {
                    let (key, value) = pair.split_once('=').expect("key=value");
                    let value = value.trim_matches('"');
                    let value = if key == "le" && value != "+Inf" {
                        value.parse::<f64>().expect("a numeric le").to_string()
                    } else {
                        value.to_owned()
                    };
                    (key.to_owned(), value)
                })
                .collect();
            pairs.sort();
            out.samples.insert((name.to_owned(), pairs));
        }
    }
    out
}

/// Asserts `now` still has everything `before` had.
fn assert_keeps(before: &str, now: &str) {
    let (before, now) = (parse(before), parse(now));
    assert!(!before.types.is_empty(), "the fixture has families");
    let missing = |what: &str, a: Vec<String>| {
        assert!(a.is_empty(), "{what} no longer served:\n{}", a.join("\n"));
    };
    missing(
        "types",
        before
            .types
            .difference(&now.types)
            .map(|t| format!("{t:?}"))
            .collect(),
    );
    missing(
        "help texts",
        before
            .helps
            .difference(&now.helps)
            .map(|h| format!("{h:?}"))
            .collect(),
    );
    missing(
        "samples",
        before
            .samples
            .difference(&now.samples)
            .map(|s| format!("{s:?}"))
            .collect(),
    );
}

/// The requests the fixtures were captured after: a create (201), a list (200), a get of a
/// missing object (404); then `/metrics` with its content type.
async fn exercise(addr: SocketAddr) -> (String, String) {
    let path = "/api/v1/namespaces/default/configmaps";
    let body = common::configmap("metrics-fixture", 1).to_string();
    let (status, _) = common::request(addr, "POST", path, "application/json", &body).await;
    assert_eq!(status, 201);
    let (status, _) = common::request(addr, "GET", path, "application/json", "").await;
    assert_eq!(status, 200);
    let (status, _) = common::request(addr, "GET", &format!("{path}/absent"), "", "").await;
    assert_eq!(status, 404);
    let response = tokio::time::timeout(
        HANG_GUARD,
        watchkeeper_testkit::request(addr, "GET", "/metrics", &[], b""),
    )
    .await
    .expect("metrics hang")
    .expect("metrics answer");
    assert_eq!(response.status, 200);
    (
        response.header("content-type").unwrap_or("").to_owned(),
        response.text(),
    )
}

fn assert_text_format(content_type: &str) {
    assert!(
        content_type.starts_with("text/plain"),
        "the Prometheus text format, not {content_type:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_mode_metrics_keep_their_names_labels_and_types() {
    let server = common::server().await;
    let (content_type, text) = exercise(server.addr).await;
    assert_text_format(&content_type);
    assert_keeps(include_str!("fixtures/metrics-store-mode.txt"), &text);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_mode_metrics_keep_their_names_labels_and_types() {
    let upstream = common::server().await;
    let config = ServeConfig::from_args(ServeArgs {
        listen: Some("127.0.0.1:0".parse().unwrap()),
        upstream: Some(format!("http://{}", upstream.addr)),
        ..ServeArgs::default()
    })
    .unwrap();
    let proxy = watchkeeper::start(config).await.expect("the proxy starts");
    tokio::time::timeout(HANG_GUARD, proxy.ready())
        .await
        .expect("proxy ready");
    let (content_type, text) = exercise(proxy.addr).await;
    assert_text_format(&content_type);
    assert_keeps(include_str!("fixtures/metrics-proxy-mode.txt"), &text);
    proxy.shutdown().await;
    upstream.shutdown().await;
}

/// The parser sees a dropped family, a renamed label and a changed type.
#[test]
fn the_comparison_finds_what_changed() {
    let before = "# HELP a_total A.\n# TYPE a_total counter\na_total{x=\"1\"} 3\n\
                  # HELP h H.\n# TYPE h histogram\nh_bucket{le=\"0.000001\"} 1\nh_bucket{le=\"+Inf\"} 1\n";
    // The same with other values and another spelling of the bound: kept.
    let same = "# HELP a_total A.\n# TYPE a_total counter\na_total{x=\"1\"} 9\n\
                # HELP h H.\n# TYPE h histogram\nh_bucket{le=\"1e-06\"} 4\nh_bucket{le=\"+Inf\"} 4\n";
    assert_keeps(before, same);
    for changed in [
        same.replace("a_total{x=", "a_total{y="),
        same.replace("# TYPE a_total counter", "# TYPE a_total gauge"),
        same.replace("# HELP a_total A.", "# HELP a_total A"),
        same.replace("1e-06", "2e-06"),
    ] {
        let outcome = std::panic::catch_unwind(|| assert_keeps(before, &changed));
        assert!(outcome.is_err(), "not noticed: {changed}");
    }
}

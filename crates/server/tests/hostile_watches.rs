//! Hostile watches: a watch holds its parsed selectors for its life (up to ~18 times their
//! text), so the query strings of one user's open watches, and of the server's, are bounded in
//! bytes (`--max-watch-query-bytes-per-user`, `--max-watch-query-bytes`): past either, kube's
//! 429 with `Retry-After`, counted, and another user still watches; a closed watch gives its
//! bytes back. A selector of thousands of requirements still selects exactly what kube's
//! would (its matching cost is bounded by the object's labels: `watchkeeper_core::selector`).
//! An event's `Table` is made once for all its `as=Table` watchers (per second), not once per
//! watcher: a custom resource's printer columns can make one cost seconds; and a watch's
//! heavy Tables (objects' sizes times columns) are made with the runtime worker handed on.

use crate::common;

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use watchkeeper::config::ServeArgs;
use watchkeeper_testkit::raw::{self, Answer};

use common::{HANG_GUARD, WatchReader, metric, metrics_text, rejections, send_json, server_with};

const CM: &str = "/api/v1/namespaces/default/configmaps";

/// A label selector of `count` requirements (`!k00000,...`) that objects labelled `zzz=1`
/// pass: about 7 bytes per requirement.
fn long_selector(count: usize) -> String {
    let mut terms: Vec<String> = (0..count).map(|i| format!("!k{i:05}")).collect();
    terms.push("zzz=1".to_owned());
    terms.join(",")
}

/// Sends a watch of `query` from `source` (a loopback address: the anonymous user is one user
/// per client address) and reads its answer's head: the stream, and the answer when refused.
async fn watch_from(addr: SocketAddr, source: &str, query: &str) -> (TcpStream, Option<Answer>) {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(format!("{source}:0").parse().unwrap()).unwrap();
    let mut stream = socket.connect(addr).await.unwrap();
    let head = format!("GET {CM}?watch=1&{query} HTTP/1.1\r\nHost: {addr}\r\n\r\n");
    stream.write_all(head.as_bytes()).await.unwrap();
    let head = tokio::time::timeout(HANG_GUARD, raw::read_head(&mut stream))
        .await
        .expect("watch head")
        .unwrap();
    if raw::status_of(&head) == 200 {
        return (stream, None);
    }
    // A refusal: a small answer with its length.
    let length: usize = head
        .to_ascii_lowercase()
        .lines()
        .find_map(|line| line.strip_prefix("content-length:"))
        .and_then(|value| value.trim().parse().ok())
        .expect("a refusal's length");
    let mut body = vec![0u8; length];
    tokio::time::timeout(HANG_GUARD, stream.read_exact(&mut body))
        .await
        .expect("a refusal's body")
        .unwrap();
    let answer = Answer {
        status: raw::status_of(&head),
        head,
        body: String::from_utf8(body).unwrap(),
    };
    (stream, Some(answer))
}

fn assert_refused(answer: &Answer, message_start: &str, message_end: &str) {
    common::assert_status(answer, 429, "TooManyRequests");
    assert!(
        answer.head.to_ascii_lowercase().contains("retry-after: 1"),
        "{}",
        answer.head
    );
    let status = answer.json();
    assert_eq!(status["details"]["retryAfterSeconds"], 1, "{}", answer.body);
    let message = status["message"].as_str().unwrap();
    assert!(
        message.starts_with(message_start) && message.ends_with(message_end),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_query_bytes_are_bounded_per_user_and_for_the_server() {
    let server = server_with(ServeArgs {
        max_watch_query_bytes_per_user: Some(150_000),
        max_watch_query_bytes: Some(250_000),
        ..ServeArgs::default()
    })
    .await;
    let addr = server.addr;
    let query = format!("labelSelector={}", long_selector(8_000));
    assert!((56_000..65_000).contains(&query.len()), "{}", query.len());
    let bytes = query.len() + "watch=1&".len();

    // One user: two such watches fit its 150,000 bytes, the third is refused.
    let (first, _) = watch_from(addr, "127.0.0.1", &query).await;
    let (second, _) = watch_from(addr, "127.0.0.1", &query).await;
    assert_eq!(
        metric(addr, "watchkeeper_open_watch_query_bytes").await,
        2 * bytes as u64
    );
    let (_, refused) = watch_from(addr, "127.0.0.1", &query).await;
    let refused = refused.expect("the user's third watch refused");
    assert_refused(
        &refused,
        &format!(
            "Too many requests: the open watches of user \"system:anonymous\" at 127.0.0.1 have {} bytes of query strings, and this one's {bytes} would pass the limit per user of 150000; please try again later",
            2 * bytes
        ),
        "",
    );
    // A small watch of the same user still fits.
    let (small, refused) = watch_from(addr, "127.0.0.1", "labelSelector=zzz%3D1").await;
    assert!(refused.is_none(), "{refused:?}");

    // Another user's watch is served, until the server's 250,000 bytes.
    let (other, refused) = watch_from(addr, "127.0.0.2", &query).await;
    assert!(refused.is_none(), "{refused:?}");
    let (_, refused) = watch_from(addr, "127.0.0.3", &query).await;
    let refused = refused.expect("the server's bound");
    assert_refused(
        &refused,
        "Too many requests: the server's open watches have ",
        &format!(
            " bytes of query strings, and this one's {bytes} would pass the limit of 250000; please try again later"
        ),
    );
    let text = metrics_text(addr).await;
    assert_eq!(rejections(&text, "watch_query_bytes_per_user"), 1);
    assert_eq!(rejections(&text, "watch_query_bytes"), 1);

    // Closed watches give their bytes back: the user watches with a long selector again.
    drop((first, second, small, other));
    tokio::time::timeout(HANG_GUARD, async {
        while metric(addr, "watchkeeper_open_watch_query_bytes").await != 0 {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the closed watches' bytes given back");
    // The long selector selects what kube's would: the labelled object only.
    let mut reader = WatchReader::open(addr, &format!("{CM}?watch=1&{query}"), None).await;
    for (name, labels) in [
        ("plain", serde_json::json!({"k00007": "x"})),
        ("other", serde_json::json!({"zzz": "2"})),
        ("chosen", serde_json::json!({"zzz": "1", "app": "a"})),
    ] {
        let (status, body) = send_json(
            addr,
            "POST",
            CM,
            &serde_json::json!({"metadata": {"name": name, "labels": labels}}),
        )
        .await;
        assert_eq!(status, 201, "{body}");
    }
    let event = reader.next().await.expect("an event");
    assert_eq!(event["type"], "ADDED");
    assert_eq!(event["object"]["metadata"]["name"], "chosen");
}

/// The `Table`s made for one write: its serializations with `TABLES` Table watches open, less
/// those with as many plain ones (the object's own JSON, its answer's).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_s_table_is_made_once_for_all_its_table_watchers() {
    const WATCHES: usize = 20;
    let server = common::server().await;
    let addr = server.addr;
    let serializations =
        "apiserver_watch_cache_serializations_total{group=\"\",resource=\"configmaps\"}";
    let mut made = Vec::new();
    for (round, accept) in [
        "application/json",
        "application/json;as=Table;v=v1;g=meta.k8s.io",
    ]
    .into_iter()
    .enumerate()
    {
        let mut watches = Vec::new();
        for _ in 0..WATCHES {
            let path = format!("{CM}?watch=1&resourceVersion=0&labelSelector=round%3D{round}");
            watches.push(
                WatchReader::open_with_headers(addr, &path, None, &[("Accept", accept)]).await,
            );
        }
        let before = metric(addr, serializations).await;
        let name = format!("r{round}");
        let (status, body) = send_json(
            addr,
            "POST",
            CM,
            &serde_json::json!({"metadata": {"name": name, "labels": {"round": round.to_string()}}}),
        )
        .await;
        assert_eq!(status, 201, "{body}");
        // Every watch has the event (so every conversion is made and counted).
        for watch in &mut watches {
            let event = watch.next().await.expect("the event");
            assert_eq!(event["type"], "ADDED");
            let object = &event["object"];
            if round == 1 {
                assert_eq!(object["kind"], "Table", "{object}");
                assert_eq!(object["rows"][0]["cells"][0], name.as_str());
            } else {
                assert_eq!(object["metadata"]["name"], name.as_str());
            }
        }
        made.push(metric(addr, serializations).await - before);
    }
    // One Table, or two when the watchers' encodings straddled a second; never one each.
    let tables = made[1] - made[0];
    assert!((1..=2).contains(&tables), "{made:?}");
}

/// A Table watch's rows whose objects' sizes times the printer columns pass
/// `--heavy-request-body-bytes` are made with the runtime worker's other tasks handed on
/// (counted as `outcome="in_place"`): its initial state and its events alike; a GET's such
/// Table is made on the heavy pool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_s_heavy_tables_are_made_with_the_worker_handed_on() {
    let server = common::server().await;
    let addr = server.addr;
    let mut crd = common::widgets_crd();
    let columns: Vec<serde_json::Value> = (0..100)
        .map(|i| serde_json::json!({"name": format!("c{i}"), "type": "string", "jsonPath": ".spec.a"}))
        .collect();
    crd["spec"]["versions"][0]["additionalPrinterColumns"] = serde_json::Value::Array(columns);
    let (status, body) = send_json(
        addr,
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        &crd,
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let widgets = "/apis/example.com/v1/namespaces/default/widgets";
    let widget = |name: &str| {
        serde_json::json!({"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": name}, "spec": {"a": "x".repeat(1000)}})
    };
    tokio::time::timeout(HANG_GUARD, async {
        loop {
            let (status, _) = send_json(addr, "POST", widgets, &widget("first")).await;
            if status == 201 {
                break;
            }
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the widgets served");
    let in_place = "watchkeeper_heavy_requests_total{outcome=\"in_place\"}";
    let before = metric(addr, in_place).await;
    let table = [("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")];
    let mut watch =
        WatchReader::open_with_headers(addr, &format!("{widgets}?watch=1"), None, &table).await;
    let event = watch.next().await.expect("the initial object");
    assert_eq!(event["type"], "ADDED");
    assert_eq!(event["object"]["rows"][0]["cells"][0], "first");
    assert_eq!(event["object"]["rows"][0]["cells"][1], "x".repeat(1000));
    common::metric_at_least(addr, in_place, before + 1).await;
    let (status, body) = send_json(addr, "POST", widgets, &widget("second")).await;
    assert_eq!(status, 201, "{body}");
    let event = watch.next().await.expect("the event");
    assert_eq!(event["object"]["rows"][0]["cells"][0], "second");
    common::metric_at_least(addr, in_place, before + 2).await;
    // A GET's Table of such an object is made on the heavy pool, as a LIST's.
    let answered = "watchkeeper_heavy_requests_total{outcome=\"answered\"}";
    let before = metric(addr, answered).await;
    let (status, body) =
        common::request_with_headers(addr, "GET", &format!("{widgets}/first"), &table, "").await;
    assert_eq!(status, 200, "{body}");
    let answer: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["rows"][0]["cells"][0], "first");
    assert_eq!(metric(addr, answered).await, before + 1);
}

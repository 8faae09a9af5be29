//! Label selectors over HTTP, as kube-apiserver answers them: a selector kube's `labels.Parse`
//! refuses is a 400 BadRequest Status whose message is the parser's text as is
//! (`DecodeParameters` → `errors.NewBadRequest(err.Error())`), and `>` / `<` select the
//! objects whose label is an integer above / below the bound, in a LIST and in a WATCH.

use crate::common;

use std::net::SocketAddr;

use common::{WatchReader, get_json, send_json, server};
use serde_json::{Value, json};

const BASE: &str = "/api/v1/namespaces/default/configmaps";

/// Creates a ConfigMap labelled `n=<n>` (no label for `None`); returns its resourceVersion.
async fn create(addr: SocketAddr, name: &str, n: Option<&str>) -> String {
    let mut object = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}});
    if let Some(n) = n {
        object["metadata"]["labels"] = json!({"n": n});
    }
    let (status, created) = send_json(addr, "POST", BASE, &object).await;
    assert_eq!(status, 201, "{created}");
    created["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned()
}

async fn list_names(addr: SocketAddr, selector: &str) -> Vec<String> {
    let (status, list) = get_json(addr, &format!("{BASE}?labelSelector={selector}")).await;
    assert_eq!(status, 200, "{selector}: {list}");
    let mut names: Vec<String> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["metadata"]["name"].as_str().unwrap().to_owned())
        .collect();
    names.sort();
    names
}

fn event_summary(event: &Value) -> (String, String) {
    (
        event["type"].as_str().unwrap_or_default().to_owned(),
        event["object"]["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_selectors_are_kubes_400_status() {
    let server = server().await;
    let addr = server.addr;
    let cases = [
        (
            "a%20in%20(b",
            "unable to parse requirement: found '', expected: ',' or ')'",
        ),
        ("a%3Db%2C", "found '', expected: identifier after ','"),
        (
            "a%3E%3D1",
            "unable to parse requirement: found '=', expected: identifier",
        ),
        (
            "a%20b",
            "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt",
        ),
        (
            "a%3Ex",
            "unable to parse requirement: values[0]: Invalid value: \"x\": for 'Gt', 'Lt' operators, the value must be an integer",
        ),
        (
            "-a",
            "unable to parse requirement: <nil>: Invalid value: \"-a\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
        ),
    ];
    for (selector, message) in cases {
        for path in [
            format!("{BASE}?labelSelector={selector}"),
            format!("{BASE}?watch=true&labelSelector={selector}"),
            format!("/api/v1/pods?labelSelector={selector}"),
        ] {
            let (status, body) = get_json(addr, &path).await;
            assert_eq!(status, 400, "{path}: {body}");
            assert_eq!(
                body,
                json!({
                    "kind": "Status",
                    "apiVersion": "v1",
                    "metadata": {},
                    "status": "Failure",
                    "message": message,
                    "reason": "BadRequest",
                    "code": 400,
                }),
                "{path}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn greater_and_less_than_filter_lists_and_watches() {
    let server = server().await;
    let addr = server.addr;
    for (name, n) in [
        ("n0", Some("0")),
        ("n1", Some("1")),
        ("n2", Some("2")),
        ("n3", Some("3")),
        ("n10", Some("10")),
        ("nx", Some("x")),
        ("none", None),
    ] {
        create(addr, name, n).await;
    }
    assert_eq!(list_names(addr, "n%3E1").await, ["n10", "n2", "n3"]);
    assert_eq!(list_names(addr, "n%3C3").await, ["n0", "n1", "n2"]);
    assert_eq!(list_names(addr, "n%3E1%2Cn%3C3").await, ["n2"]);
    assert_eq!(
        list_names(addr, "n%20%3E%200").await,
        ["n1", "n10", "n2", "n3"]
    );

    // Watches from now: `n>1` and `n<3`.
    let (_, list) = get_json(addr, BASE).await;
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut above = WatchReader::open(
        addr,
        &format!("{BASE}?watch=true&resourceVersion={rv}&labelSelector=n%3E1"),
        None,
    )
    .await;
    let mut below = WatchReader::open(
        addr,
        &format!("{BASE}?watch=true&resourceVersion={rv}&labelSelector=n%3C3"),
        None,
    )
    .await;
    create(addr, "w5", Some("5")).await; // above only
    create(addr, "wx", Some("x")).await; // neither
    create(addr, "w-none", None).await; // neither
    let (status, body) = common::request(
        addr,
        "PATCH",
        &format!("{BASE}/n2"),
        "application/merge-patch+json",
        r#"{"metadata":{"labels":{"n":"7"}}}"#,
    )
    .await;
    assert_eq!(status, 200, "{body}"); // n2: stays above, leaves below
    create(addr, "w1", Some("1")).await; // below only

    let mut seen_above = Vec::new();
    for _ in 0..2 {
        seen_above.push(event_summary(&above.next().await.unwrap()));
    }
    assert_eq!(
        seen_above,
        [
            ("ADDED".to_owned(), "w5".to_owned()),
            ("MODIFIED".to_owned(), "n2".to_owned()),
        ]
    );
    let mut seen_below = Vec::new();
    for _ in 0..2 {
        seen_below.push(event_summary(&below.next().await.unwrap()));
    }
    assert_eq!(
        seen_below,
        [
            ("DELETED".to_owned(), "n2".to_owned()),
            ("ADDED".to_owned(), "w1".to_owned()),
        ]
    );
    // Nothing else reached `n>1` before the next object that belongs to it.
    create(addr, "w9", Some("9")).await;
    assert_eq!(
        event_summary(&above.next().await.unwrap()),
        ("ADDED".to_owned(), "w9".to_owned())
    );
}

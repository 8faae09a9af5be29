//! Findings of the hostile-client audit: bodies kube-apiserver refuses in its own words, which
//! the server answered in others. A create or update body that Go's `encoding/json` does not
//! read (a byte-order mark, trailing bytes, an empty body, nesting past the limit, a top level
//! that is not an object) is kube's 400 `the object provided is unrecognized (must be of type
//! <Kind>): couldn't get version/kind; json parse error: ...`, and nothing is written; bytes
//! of a string that are not UTF-8 are read as Go reads them (U+FFFD), not refused; a DELETE's
//! options Go does not read are its error as kube's handler answers it (500). A YAML
//! body whose aliases expand too far, or that nests too deep, is refused with go-yaml's words
//! (`yaml: document contains excessive aliasing`, `exceeded max depth of ...`), not the
//! parser's, which quoted the body back, in kube's frame for a create's undecodable body. A body past `--max-request-body-bytes` is kube's 413
//! `Request entity too large: limit is N`, declared or chunked.

use crate::common;

use watchkeeper::config::ServeArgs;

use common::{HANG_GUARD, request, server_with};
use watchkeeper_testkit::raw;

const CM: &str = "/api/v1/namespaces/default/configmaps";

fn unrecognized(cause: &str, summary: &str) -> String {
    format!(
        "the object provided is unrecognized (must be of type ConfigMap): couldn't get version/kind; json parse error: {cause} ({summary})"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_go_does_not_read_are_kube_s_400_and_write_nothing() {
    let server = server_with(ServeArgs::default()).await;
    let addr = server.addr;
    let object = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}"#;
    let deep = format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"a"}},"x":{}{}}}"#,
        "[".repeat(20_000),
        "]".repeat(20_000)
    );
    let just_past_go = format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"a"}},"x":{}{}}}"#,
        "[".repeat(10_000),
        "]".repeat(10_000)
    );
    let cases = [
        (
            format!("\u{feff}{object}"),
            unrecognized(
                "invalid character 'ï' looking for beginning of value",
                "efbbbf7b2261706956657273696f6e223a227631222c226b696e64223a22 ...",
            ),
        ),
        (
            format!("{object} x"),
            unrecognized(
                "invalid character 'x' after top-level value",
                r#"{"apiVersion":"v1","kind":"Con ..."#,
            ),
        ),
        (
            String::new(),
            unrecognized("unexpected end of JSON input", "<empty>"),
        ),
        (
            object[..20].to_owned(),
            unrecognized("unexpected end of JSON input", r#"{"apiVersion":"v1",""#),
        ),
        (
            deep,
            unrecognized(
                "invalid character '[' exceeded max depth",
                r#"{"apiVersion":"v1","kind":"Con ..."#,
            ),
        ),
        // One level past Go's 10,000 (the object's own level counted).
        (
            just_past_go,
            unrecognized(
                "invalid character '[' exceeded max depth",
                r#"{"apiVersion":"v1","kind":"Con ..."#,
            ),
        ),
        (
            "[1]".to_owned(),
            unrecognized(
                r#"json: cannot unmarshal array into Go value of type struct { APIVersion string "json:\"apiVersion,omitempty\""; Kind string "json:\"kind,omitempty\"" }"#,
                "5b315d",
            ),
        ),
    ];
    for (body, message) in &cases {
        for (method, path) in [("POST", CM.to_owned()), ("PUT", format!("{CM}/a"))] {
            let (status, text) = request(addr, method, &path, "application/json", body).await;
            assert_eq!(status, 400, "{method} {text}");
            let refusal: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert_eq!(refusal["kind"], "Status", "{text}");
            assert_eq!(refusal["reason"], "BadRequest", "{text}");
            assert_eq!(refusal["message"], message.as_str(), "{method}");
        }
    }
    let (status, text) = request(addr, "GET", CM, "application/json", "").await;
    assert_eq!(status, 200, "{text}");
    let list: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(list["items"], serde_json::json!([]), "{text}");
    // The same object without the hostile bytes is created.
    let (status, text) = request(addr, "POST", CM, "application/json", object).await;
    assert_eq!(status, 201, "{text}");
    // Bytes of a string that are not UTF-8 are read as Go reads them: U+FFFD each.
    let body = b"{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"b\"},\"data\":{\"k\":\"x\xff\xfey\"}}";
    let head = format!(
        "POST {CM} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let mut stream = raw::send(addr, &head, body).await.unwrap();
    let created = tokio::time::timeout(HANG_GUARD, raw::read_answer(&mut stream))
        .await
        .expect("an answer");
    assert_eq!(created.status, 201, "{}", created.body);
    assert_eq!(created.json()["data"]["k"], "x\u{fffd}\u{fffd}y");
    // A DELETE's options that Go does not read: kube's handler answers the error as it is.
    for path in [format!("{CM}/b"), CM.to_owned()] {
        let (status, text) = request(addr, "DELETE", &path, "application/json", "{} x").await;
        assert_eq!(status, 500, "{text}");
        let refusal: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            refusal["message"],
            "couldn't get version/kind; json parse error: invalid character 'x' after top-level value"
        );
    }
    let (status, text) = request(addr, "GET", &format!("{CM}/b"), "", "").await;
    assert_eq!(status, 200, "{text}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn yaml_bombs_and_depth_are_refused_in_go_yaml_s_words() {
    let server = server_with(ServeArgs::default()).await;
    let addr = server.addr;
    let head = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: laughs}\n";
    let mut laughs = format!("{head}a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for level in 1..9u8 {
        let (name, previous) = (char::from(b'a' + level), char::from(b'a' + level - 1));
        let items = vec![format!("*{previous}"); 9].join(", ");
        laughs.push_str(&format!("{name}: &{name} [{items}]\n"));
    }
    let deep = format!("{head}x: {}{}\n", "[".repeat(20_000), "]".repeat(20_000));
    let cases = [
        (&laughs, "yaml: document contains excessive aliasing"),
        (&deep, "yaml: line 4: exceeded max depth of 64"),
    ];
    for (body, cause) in cases {
        let (status, text) = request(addr, "POST", CM, "application/yaml", body).await;
        assert_eq!(status, 400, "{text}");
        let refusal: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(refusal["reason"], "BadRequest", "{text}");
        // kube's frame for a body whose kind is not known yet, the body's first 30 bytes in hex.
        assert_eq!(
            refusal["message"],
            format!(
                "the object provided is unrecognized (must be of type ConfigMap): error converting YAML to JSON: {cause} (61706956657273696f6e3a2076310a6b696e643a20436f6e6669674d6170 ...)"
            )
        );
        let apply = format!("{CM}/laughs?fieldManager=m");
        let (status, text) =
            request(addr, "PATCH", &apply, "application/apply-patch+yaml", body).await;
        assert_eq!(status, 400, "{text}");
        let refusal: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            refusal["message"],
            format!("error decoding YAML: error converting YAML to JSON: {cause}")
        );
    }
    let (status, text) = request(addr, "GET", &format!("{CM}/laughs"), "", "").await;
    assert_eq!(status, 404, "{text}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_past_the_limit_is_kube_s_413_declared_or_chunked() {
    let server = server_with(ServeArgs {
        max_request_body_bytes: Some(4096),
        ..ServeArgs::default()
    })
    .await;
    let addr = server.addr;
    let body = format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"big"}},"data":{{"a":"{}"}}}}"#,
        "x".repeat(5000)
    );
    let declared = format!(
        "POST {CM} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let chunked_head = format!(
        "POST {CM} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    );
    let chunked = format!("{:x}\r\n{body}\r\n0\r\n\r\n", body.len());
    for (head, bytes) in [(declared, body.clone()), (chunked_head, chunked)] {
        let mut stream = raw::send(addr, &head, bytes.as_bytes()).await.unwrap();
        let refused = tokio::time::timeout(HANG_GUARD, raw::read_answer(&mut stream))
            .await
            .expect("an answer");
        assert_eq!(refused.status, 413, "{}", refused.body);
        let status = refused.json();
        assert_eq!(
            status["reason"], "RequestEntityTooLarge",
            "{}",
            refused.body
        );
        assert_eq!(status["message"], "Request entity too large: limit is 4096");
    }
    let (status, text) = request(addr, "GET", &format!("{CM}/big"), "", "").await;
    assert_eq!(status, 404, "{text}");
    server.shutdown().await;
}

//! Hostile inputs, round four: bodies and values kube-apiserver answers in its own way, which
//! the server answered in others. The `\u` escape of a lone UTF-16 surrogate is read as Go's
//! `encoding/json` reads it (U+FFFD), in a body and in a patch, not refused; a name or value
//! with control characters is quoted in a refusal as Go's `%q` quotes it (`"a\x00b"`); a body
//! that ends before its length, or whose chunked encoding is malformed, is kube's 500 with Go's
//! `net/http` text and no reason, and nothing is written. A continue token that is not one is
//! kube's 400 in its words. A YAML body nested to the reader's bound never overflows a runtime
//! worker's stack (it aborted the server); an object nested near the body's bound, whose
//! managed fields nest deeper, is read back from the store, before and after a restart, and
//! answered in YAML when asked (it was stored, then absent from the cache: its GET a 404).
//! Bodies nest to Go's 10,000 levels: a custom resource nested so deep, and a CRD whose schema
//! nests so deep with its objects, are served by every path (on the server's runtime); so are
//! objects 4,000 levels deep under a CRD with a CEL rule at every level (they ran out of the
//! rules' budget, each level's value converted whole).
//! A body of `null` items, each a zero struct once decoded as kube's Go structs, is refused
//! once those zeros pass the object limit, before they are built (a 3 MB body of them took the
//! server's memory from 44 MB to 554 MB). A plain YAML body of 300,000 items is read, as
//! kube reads it (it was refused as an alias bomb). A review's JSON body is decoded into its Go
//! type (an array of access-review attributes was answered, and echoed back as sent).

use crate::common;

use tokio::io::AsyncWriteExt;
use watchkeeper::config::ServeArgs;
use watchkeeper_testkit::raw;

use common::{
    HANG_GUARD, merge_patch, request, request_with_headers, restarted, send_json, server_with,
    widgets_crd, write_warned,
};

const CM: &str = "/api/v1/namespaces/default/configmaps";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lone_surrogates_are_read_as_go_reads_them() {
    let server = server_with(ServeArgs::default()).await;
    let addr = server.addr;
    let body = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"s"},"data":{"a":"\ud800","b":"x\udc00\u0041","c":"\ud83d\ude00"}}"#;
    let (status, text) = request(addr, "POST", CM, "application/json", body).await;
    assert_eq!(status, 201, "{text}");
    let created: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        created["data"],
        serde_json::json!({"a": "\u{fffd}", "b": "x\u{fffd}A", "c": "\u{1f600}"})
    );
    let patched = merge_patch(addr, &format!("{CM}/s"), r#"{"data":{"d":"\udbff!"}}"#).await;
    assert_eq!(patched["data"]["d"], "\u{fffd}!");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_and_values_in_refusals_are_quoted_as_go_quotes_them() {
    let server = server_with(ServeArgs::default()).await;
    let addr = server.addr;
    let (status, refusal) = send_json(
        addr,
        "POST",
        CM,
        &serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a\u{0}b"}}),
    )
    .await;
    assert_eq!(status, 422, "{refusal}");
    let message = refusal["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            r#"ConfigMap "a\x00b" is invalid: metadata.name: Invalid value: "a\x00b": a lowercase RFC 1123 subdomain"#
        ),
        "{message}"
    );
    let (status, refusal) = send_json(
        addr,
        "POST",
        CM,
        &serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "l", "labels": {"k": "v\u{1}\u{a0}"}}}),
    )
    .await;
    assert_eq!(status, 422, "{refusal}");
    let cause = refusal["details"]["causes"][0]["message"].as_str().unwrap();
    assert!(
        cause.starts_with(r#"Invalid value: "v\x01\u00a0": a valid label must"#),
        "{cause}"
    );
    let (status, text) = request(addr, "GET", CM, "application/json", "").await;
    assert_eq!(status, 200, "{text}");
    assert!(text.contains(r#""items":[]"#), "{text}");
    server.shutdown().await;
}

/// The answer to `head` and `body` sent on one connection, its writing side shut after them.
async fn cut_off(addr: std::net::SocketAddr, head: &str, body: &[u8]) -> raw::Answer {
    let mut stream = raw::send(addr, head, body).await.unwrap();
    stream.shutdown().await.unwrap();
    tokio::time::timeout(HANG_GUARD, raw::read_answer(&mut stream))
        .await
        .expect("an answer")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_cut_short_or_malformed_is_kube_s_500_and_writes_nothing() {
    let server = server_with(ServeArgs::default()).await;
    let addr = server.addr;
    let object = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cut"}}"#;
    let chunked = format!(
        "POST {CM} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    );
    let cases = [
        (
            format!(
                "POST {CM} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                object.len() + 10
            ),
            object.to_owned(),
            "unexpected EOF",
        ),
        (
            chunked.clone(),
            format!("{:x}\r\n{object}\r\n", object.len() + 10),
            "unexpected EOF",
        ),
        (
            chunked.clone(),
            format!("zz\r\n{object}\r\n0\r\n\r\n"),
            "invalid byte in chunk length",
        ),
        (
            chunked,
            format!("3\r\n{object}\r\n0\r\n\r\n"),
            "malformed chunked encoding",
        ),
    ];
    for (head, body, message) in &cases {
        let answer = cut_off(addr, head, body.as_bytes()).await;
        assert_eq!(answer.status, 500, "{message}: {}", answer.body);
        let refusal = answer.json();
        assert_eq!(refusal["kind"], "Status", "{}", answer.body);
        assert_eq!(refusal["code"], 500, "{}", answer.body);
        assert_eq!(refusal.get("reason"), None, "{}", answer.body);
        assert_eq!(refusal["message"], *message, "{}", answer.body);
    }
    let (status, text) = request(addr, "GET", &format!("{CM}/cut"), "", "").await;
    assert_eq!(status, 404, "{text}");
    server.shutdown().await;
}

/// A continue token that is not one, or is forged, is kube's 400 in its words (`invalid
/// continue token: continue key is not valid...`); one whose start key names another
/// namespace reads nothing outside the list's own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_continue_tokens_are_kube_s_400_and_read_nothing_outside_the_list() {
    use base64::Engine as _;
    let server = server_with(ServeArgs::default()).await;
    let addr = server.addr;
    for (namespace, name) in [
        ("default", "a"),
        ("default", "b"),
        ("kube-system", "hidden"),
    ] {
        let (status, created) = send_json(
            addr,
            "POST",
            &format!("/api/v1/namespaces/{namespace}/configmaps"),
            &serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}),
        )
        .await;
        assert_eq!(status, 201, "{created}");
    }
    let token = |start: &str| {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!(
            r#"{{"v":"meta.k8s.io/v1","rv":-1,"start":"{start}"}}"#
        ))
    };
    for (forged, cause) in [
        (
            "garbage".to_owned(),
            r": invalid character '\u0081' looking for beginning of value",
        ),
        (token("../../secrets/"), ": ../../secrets/"),
        (
            token(""),
            ": encoded start key empty (version meta.k8s.io/v1)",
        ),
    ] {
        let (status, text) = request(
            addr,
            "GET",
            &format!("{CM}?limit=1&continue={forged}"),
            "",
            "",
        )
        .await;
        assert_eq!(status, 400, "{text}");
        let refusal: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(refusal["reason"], "BadRequest", "{text}");
        assert_eq!(
            refusal["message"],
            format!("invalid continue token: continue key is not valid{cause}")
        );
    }
    for start in ["kube-system/a", "kube-system", "a"] {
        let path = format!("{CM}?limit=5&continue={}", token(start));
        let (status, text) = request(addr, "GET", &path, "", "").await;
        assert_eq!(status, 200, "{text}");
        let list: serde_json::Value = serde_json::from_str(&text).unwrap();
        for item in list["items"].as_array().unwrap() {
            assert_eq!(item["metadata"]["namespace"], "default", "{start}: {text}");
        }
    }
    server.shutdown().await;
}

/// An apply body of 127 nested flow sequences (JSON under the apply media type: serde_json
/// refused it, so it was read as YAML) took the YAML reader to its depth bound on a runtime
/// worker's stack, which a debug build overflowed: the server aborted. A JSON body within
/// the body's nesting bound (Go's 10,000 levels) is now read as JSON; past it, as YAML, which
/// refuses it in kube's frame with go-yaml's words, and the server answers the next request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_apply_nested_to_the_yaml_bound_is_refused_and_the_server_stays_up() {
    let server = server_with(ServeArgs::default()).await;
    let addr = server.addr;
    // The object's own level counted: 10,001 and 20,001 levels.
    for levels in [10_000, 20_000] {
        let body = format!(
            r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"deep"}},"x":{}1{}}}"#,
            "[".repeat(levels),
            "]".repeat(levels)
        );
        assert_eq!(
            apply_refused(addr, "deep", &body).await,
            "error decoding YAML: error converting YAML to JSON: yaml: exceeded max depth of 64"
        );
    }
    let (status, text) = request(addr, "GET", &format!("{CM}/deep"), "", "").await;
    assert_eq!(status, 404, "{text}");
    server.shutdown().await;
}

/// The message of the 400 a server-side apply of the YAML `body` to the ConfigMap `name` gets.
async fn apply_refused(addr: std::net::SocketAddr, name: &str, body: &str) -> String {
    let (status, text) = request(
        addr,
        "PATCH",
        &format!("{CM}/{name}?fieldManager=m"),
        "application/apply-patch+yaml",
        body,
    )
    .await;
    assert_eq!(status, 400, "{text}");
    let refusal: serde_json::Value = serde_json::from_str(&text).unwrap();
    refusal["message"].as_str().unwrap().to_owned()
}

/// The widget `default/deep` is served with `spec`, alone in its list.
async fn read_back(addr: std::net::SocketAddr, spec: &serde_json::Value) {
    let widgets = "/apis/example.com/v1/namespaces/default/widgets";
    // Its managed fields nest past serde_json's limit: read as the server reads it.
    let read = |text: &str| watchkeeper_api::go_json::parse_stored(text.as_bytes()).unwrap();
    let (status, got) = request(addr, "GET", &format!("{widgets}/deep"), "", "").await;
    assert_eq!(status, 200, "{got}");
    assert_eq!(&read(&got)["spec"], spec);
    let (status, list) = request(addr, "GET", widgets, "", "").await;
    assert_eq!(status, 200, "{list}");
    let list = read(&list);
    assert_eq!(list["items"][0]["metadata"]["name"], "deep", "{list}");
}

/// A widget nested 126 objects deep under `spec` (a body within serde_json's bound): its
/// managed fields nest a few levels deeper than any body may, and the stored value was never
/// read back (GET 404, absent from lists, an apply 409 forever). Now it is served, as YAML
/// too, and read back after a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_nested_near_the_body_bound_is_read_back_from_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let args = ServeArgs {
        store: Some("embedded".into()),
        data_dir: Some(dir.path().to_owned()),
        durable_commits: Some(false),
        ..ServeArgs::default()
    };
    let server = server_with(args.clone()).await;
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let (status, crd) = send_json(server.addr, "POST", crds, &widgets_crd()).await;
    assert_eq!(status, 201, "{crd}");
    let widgets = "/apis/example.com/v1/namespaces/default/widgets";
    let spec = (0..126).fold(
        serde_json::json!(1),
        |inner, _| serde_json::json!({"a": inner}),
    );
    let widget = serde_json::json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "deep"}, "spec": spec});
    let (status, created) = send_json(server.addr, "POST", widgets, &widget).await;
    assert_eq!(status, 201, "{created}");
    read_back(server.addr, &widget["spec"]).await;
    let (status, yaml) = request_with_headers(
        server.addr,
        "GET",
        &format!("{widgets}/deep"),
        &[("Accept", "application/yaml")],
        "",
    )
    .await;
    assert_eq!(status, 200, "{yaml}");
    assert!(yaml.starts_with("apiVersion: example.com/v1\n"), "{yaml}");
    server.shutdown().await;
    let server = restarted(args).await;
    read_back(server.addr, &widget["spec"]).await;
    server.shutdown().await;
}

/// A Pod whose containers are 600,000 `null`s (a 3 MB body) is 15 MB of zero `Container`s
/// once decoded as kube's Go structs: refused with 413 once the zeros pass the object limit,
/// by a create and by a merge patch, and nothing is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn null_items_that_decode_past_the_object_limit_are_refused_before_they_are_built() {
    let server = server_with(ServeArgs::default()).await;
    let addr = server.addr;
    let pods = "/api/v1/namespaces/default/pods";
    let nulls = vec!["null"; 600_000].join(",");
    let expected = "Request entity too large: the object is more than 1572864 bytes once its null and absent fields are decoded, more than the limit of 1572864 bytes";
    let body = format!(
        r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"p"}},"spec":{{"containers":[{nulls}]}}}}"#
    );
    let (status, text) = request(addr, "POST", pods, "application/json", &body).await;
    assert_eq!(status, 413, "{text}");
    let refusal: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(refusal["reason"], "RequestEntityTooLarge");
    assert_eq!(refusal["message"], expected);
    let (status, _) = request(addr, "GET", &format!("{pods}/p"), "", "").await;
    assert_eq!(status, 404);

    let pod = serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "i"}]}});
    let (status, created) = send_json(addr, "POST", pods, &pod).await;
    assert_eq!(status, 201, "{created}");
    let patch = format!(r#"{{"spec":{{"containers":[{nulls}]}}}}"#);
    let (status, text) = request(
        addr,
        "PATCH",
        &format!("{pods}/p"),
        "application/merge-patch+json",
        &patch,
    )
    .await;
    assert_eq!(status, 413, "{text}");
    let refusal: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(refusal["message"], expected);
    let (status, text) = request(addr, "GET", &format!("{pods}/p"), "", "").await;
    assert_eq!(status, 200, "{text}");
    let stored: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        stored["metadata"]["resourceVersion"],
        created["metadata"]["resourceVersion"]
    );
    assert_eq!(stored["spec"]["containers"][0]["name"], "c");
    server.shutdown().await;
}

/// A plain YAML body of 300,000 items (2.4 MB, no aliases) was refused as `excessive
/// aliasing` (the YAML reader's fixed budget of 250,000 nodes); kube-apiserver reads it
/// (go-yaml bounds the share of nodes aliases add). Now it is read, by a create and by an
/// apply; an alias bomb is still refused in go-yaml's words. (A ConfigMap cannot show it: past
/// 125,000 keys its managed fields alone pass etcd's object limit, in kube too.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_yaml_body_of_300_000_items_is_read() {
    let server = server_with(ServeArgs::default()).await;
    let addr = server.addr;
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let (status, crd) = send_json(addr, "POST", crds, &widgets_crd()).await;
    assert_eq!(status, 201, "{crd}");
    let widgets = "/apis/example.com/v1/namespaces/default/widgets";
    let widget = |name: &str| {
        format!(
            "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: {name}\nspec:\n  items:\n"
        ) + &"    - 1\n".repeat(300_000)
    };
    let body = widget("many");
    assert!(body.len() > 2_400_000, "{}", body.len());
    let deadline = std::time::Instant::now() + HANG_GUARD;
    let (status, text) = loop {
        let answer = request(addr, "POST", widgets, "application/yaml", &body).await;
        if answer.0 != 404 || std::time::Instant::now() > deadline {
            break answer;
        }
        tokio::task::yield_now().await;
    };
    assert_eq!(status, 201, "{}", &text[..text.len().min(500)]);
    let count = |text: &str| {
        let value: serde_json::Value = serde_json::from_str(text).unwrap();
        value["spec"]["items"].as_array().map(Vec::len)
    };
    assert_eq!(count(&text), Some(300_000));
    let apply = format!("{widgets}/applied?fieldManager=m");
    let (status, text) = request(
        addr,
        "PATCH",
        &apply,
        "application/apply-patch+yaml",
        &widget("applied"),
    )
    .await;
    assert_eq!(status, 201, "{}", &text[..text.len().min(500)]);
    assert_eq!(count(&text), Some(300_000));
    // An alias bomb: a 300-byte tree whose expansion has 9^5 leaves.
    let mut bomb = String::from(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bomb}\na0: &a0 [x, x, x, x, x, x, x, x, x]\n",
    );
    for level in 1..5 {
        let items = vec![format!("*a{}", level - 1); 9].join(", ");
        bomb.push_str(&format!("a{level}: &a{level} [{items}]\n"));
    }
    assert_eq!(
        apply_refused(addr, "bomb", &bomb).await,
        "error decoding YAML: error converting YAML to JSON: yaml: document contains excessive aliasing"
    );
    server.shutdown().await;
}

/// A widget whose `spec` nests `levels` objects (or arrays) deep: the body nests
/// `levels + 1` levels, its root counted, as Go's `maxNestingDepth` counts them.
fn deep_widget(name: &str, levels: usize, arrays: bool, leaf: u32) -> String {
    let spec = if arrays {
        format!("{}{leaf}{}", "[".repeat(levels), "]".repeat(levels))
    } else {
        format!("{}{leaf}{}", "{\"a\":".repeat(levels), "}".repeat(levels))
    };
    format!(
        r#"{{"apiVersion":"example.com/v1","kind":"Widget","metadata":{{"name":"{name}"}},"spec":{spec}}}"#
    )
}

/// The depth of `value` at its deepest and the number at its bottom (read without recursion).
fn depth_and_leaf(value: &serde_json::Value) -> (usize, serde_json::Value) {
    let (mut levels, mut at) = (0, value);
    while let Some(inner) = at.get("a").or_else(|| at.get(0)) {
        (levels, at) = (levels + 1, inner);
    }
    (levels, at.clone())
}

/// kube-apiserver reads a JSON body nested up to Go's 10,000 levels, and so does this server
/// (before, 1,000: past about 2,000 the answers' writer overflowed a worker's stack, and
/// serde_json's own drop and clone of such an object need more than a 2 MiB stack in a debug
/// build; an apply copied every level's subtree, 24 GB at 10,000 levels). A custom resource
/// nested to the limit round-trips on the server's runtime (`runtime_builder`): create, get,
/// watch, merge patch, JSON patch, apply, update, a Table, YAML (objects and arrays), a
/// restart of the embedded store. One level more is kube's 400 for a body past its limit, in
/// Go's words; so is a body nested 100,000 levels, and the server keeps serving.
#[test]
fn a_custom_resource_nested_to_the_body_limit_round_trips_and_one_past_it_is_refused() {
    common::on_server_runtime(
        a_custom_resource_nested_to_the_body_limit_round_trips_and_one_past_it_is_refused_run,
    );
}

async fn a_custom_resource_nested_to_the_body_limit_round_trips_and_one_past_it_is_refused_run() {
    use watchkeeper_api::go_json::{BODY_MAX_DEPTH, parse_stored};
    let dir = tempfile::tempdir().unwrap();
    let args = ServeArgs {
        store: Some("embedded".into()),
        data_dir: Some(dir.path().to_owned()),
        durable_commits: Some(false),
        ..ServeArgs::default()
    };
    let server = server_with(args.clone()).await;
    let addr = server.addr;
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let mut crd = widgets_crd();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["x-kubernetes-validations"] =
        serde_json::json!([{"rule": "self.spec == self.spec"}]);
    let (status, text) = send_json(addr, "POST", crds, &crd).await;
    assert_eq!(status, 201, "{text}");
    let widgets = "/apis/example.com/v1/namespaces/default/widgets";
    let levels = BODY_MAX_DEPTH - 1;
    let body = deep_widget("deep", levels, false, 1);
    let deadline = std::time::Instant::now() + HANG_GUARD;
    let (status, text) = loop {
        let answer = request(addr, "POST", widgets, "application/json", &body).await;
        if answer.0 != 404 || std::time::Instant::now() > deadline {
            break answer;
        }
        tokio::task::yield_now().await;
    };
    assert_eq!(status, 201, "{}", &text[..text.len().min(500)]);
    let read = |text: &str| parse_stored(text.as_bytes()).unwrap();
    assert_eq!(depth_and_leaf(&read(&text)["spec"]), (levels, 1.into()));
    let mut watch =
        common::WatchReader::open(addr, &format!("{widgets}?watch=1&resourceVersion=0"), None)
            .await;
    let event = read(&watch.next_text().await.unwrap());
    assert_eq!(event["type"], "ADDED");
    assert_eq!(depth_and_leaf(&event["object"]["spec"]), (levels, 1.into()));
    let path = format!("{widgets}/deep");
    let (status, text) = request(addr, "GET", &path, "", "").await;
    assert_eq!(status, 200);
    assert_eq!(depth_and_leaf(&read(&text)["spec"]), (levels, 1.into()));
    for accept in [
        "application/yaml",
        "application/json;as=Table;v=v1;g=meta.k8s.io",
    ] {
        let (status, text) =
            request_with_headers(addr, "GET", &path, &[("Accept", accept)], "").await;
        assert_eq!(status, 200, "{accept}: {}", &text[..text.len().min(500)]);
        if accept == "application/yaml" {
            assert!(
                text.starts_with("apiVersion: example.com/v1\n"),
                "{}",
                &text[..text.len().min(500)]
            );
        }
    }
    // A merge patch, a JSON patch, an apply and an update each change the deepest number.
    let merge = deep_widget("deep", levels, false, 2);
    let pointer = format!("/spec{}", "/a".repeat(levels));
    let json_patch = format!(r#"[{{"op":"replace","path":"{pointer}","value":3}}]"#);
    let apply = deep_widget("deep", levels, false, 4);
    for (leaf, content_type, target, patch) in [
        (2, "application/merge-patch+json", path.clone(), merge),
        (3, "application/json-patch+json", path.clone(), json_patch),
        (
            4,
            "application/apply-patch+yaml",
            format!("{path}?fieldManager=deep&force=true"),
            apply,
        ),
    ] {
        let (status, text) = request(addr, "PATCH", &target, content_type, &patch).await;
        assert_eq!(
            status,
            200,
            "{content_type}: {}",
            &text[..text.len().min(500)]
        );
        assert_eq!(depth_and_leaf(&read(&text)["spec"]), (levels, leaf.into()));
        let event = read(&watch.next_text().await.unwrap());
        assert_eq!(event["type"], "MODIFIED");
        assert_eq!(
            depth_and_leaf(&event["object"]["spec"]),
            (levels, leaf.into())
        );
    }
    let (_, text) = request(addr, "GET", &path, "", "").await;
    let version = read(&text)["metadata"]["resourceVersion"].clone();
    let update = deep_widget("deep", levels, false, 5).replacen(
        "\"name\":\"deep\"",
        &format!("\"name\":\"deep\",\"resourceVersion\":{version}"),
        1,
    );
    let (status, text) = request(addr, "PUT", &path, "application/json", &update).await;
    assert_eq!(status, 200, "{}", &text[..text.len().min(500)]);
    // Arrays nest as deep.
    let (status, text) = request(
        addr,
        "POST",
        widgets,
        "application/json",
        &deep_widget("arrays", levels, true, 6),
    )
    .await;
    assert_eq!(status, 201, "{}", &text[..text.len().min(500)]);
    let (status, text) = request_with_headers(
        addr,
        "GET",
        &format!("{widgets}/arrays"),
        &[("Accept", "application/yaml")],
        "",
    )
    .await;
    assert_eq!(status, 200, "{}", &text[..text.len().min(500)]);
    assert!(
        text.starts_with("apiVersion: example.com/v1\n"),
        "{}",
        &text[..text.len().min(500)]
    );
    // One level past the limit, and far past Go's: kube's 400 for a body it cannot read.
    for (levels, arrays) in [
        (BODY_MAX_DEPTH, false),
        (BODY_MAX_DEPTH, true),
        (100_000, true),
    ] {
        let body = deep_widget("past", levels, arrays, 1);
        let (status, text) = request(addr, "POST", widgets, "application/json", &body).await;
        assert_eq!(status, 400, "{levels}: {}", &text[..text.len().min(500)]);
        let refusal: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(refusal["reason"], "BadRequest");
        let bracket = if arrays { '[' } else { '{' };
        assert_eq!(
            refusal["message"],
            format!(
                "the object provided is unrecognized (must be of type Widget): couldn't get version/kind; json parse error: invalid character '{bracket}' exceeded max depth ({{\"apiVersion\":\"example.com/v1\" ...)"
            )
        );
        let patch = format!(
            "{{\"spec\":{}}}",
            &body[body.find("\"spec\":").unwrap() + 7..body.len() - 1]
        );
        let (status, text) =
            request(addr, "PATCH", &path, "application/merge-patch+json", &patch).await;
        assert_eq!(status, 400, "{levels}: {}", &text[..text.len().min(500)]);
    }
    // Still serving, and the object as last written.
    let (status, text) = request(addr, "GET", &path, "", "").await;
    assert_eq!(status, 200);
    assert_eq!(depth_and_leaf(&read(&text)["spec"]), (levels, 5.into()));
    server.shutdown().await;
    let server = restarted(args).await;
    let (status, text) = request(server.addr, "GET", &path, "", "").await;
    assert_eq!(status, 200);
    assert_eq!(depth_and_leaf(&read(&text)["spec"]), (levels, 5.into()));
    let (status, text) = request(server.addr, "GET", &format!("{widgets}/arrays"), "", "").await;
    assert_eq!(status, 200);
    assert_eq!(depth_and_leaf(&read(&text)["spec"]), (levels, 6.into()));
    server.shutdown().await;
}

/// A cache's dispatcher and catch-up threads run on a small stack
/// (`core::stack::CACHE_THREAD_STACK`): they only move shared objects and drop them flat. Deep
/// objects through both: a watch that reads nothing while 10,000-level widgets (each with
/// 512 KiB beside its nesting, more than the socket buffers and the queue hold) are patched
/// stalls and is caught up from the history, while a history of `--history-bytes-max` 4 MiB
/// evicts (drops) them; the watch then reads its events in order, as written, or its backlog
/// and a 410, and the server goes on serving.
#[test]
fn deep_objects_pass_a_stalled_watch_and_an_evicting_history_on_the_caches_threads() {
    common::on_server_runtime(
        deep_objects_pass_a_stalled_watch_and_an_evicting_history_on_the_caches_threads_run,
    );
}

async fn deep_objects_pass_a_stalled_watch_and_an_evicting_history_on_the_caches_threads_run() {
    use watchkeeper_api::go_json::{BODY_MAX_DEPTH, parse_stored};
    let server = server_with(ServeArgs {
        history_bytes_max: Some(4 << 20),
        // The watch reads nothing while the patches run: only the cache may end it.
        write_timeout_ms: Some(3_600_000),
        ..ServeArgs::default()
    })
    .await;
    let addr = server.addr;
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let (status, text) = send_json(addr, "POST", crds, &widgets_crd()).await;
    assert_eq!(status, 201, "{text}");
    let widgets = "/apis/example.com/v1/namespaces/default/widgets";
    let levels = BODY_MAX_DEPTH - 2;
    let pad = "x".repeat(512 << 10);
    let body = |leaf: u32| {
        format!(
            r#"{{"apiVersion":"example.com/v1","kind":"Widget","metadata":{{"name":"deep"}},"spec":{{"pad":"{pad}","a":{}{leaf}{}}}}}"#,
            "{\"a\":".repeat(levels - 1),
            "}".repeat(levels - 1)
        )
    };
    let deadline = std::time::Instant::now() + HANG_GUARD;
    let (status, text) = loop {
        let answer = request(addr, "POST", widgets, "application/json", &body(0)).await;
        if answer.0 != 404 || std::time::Instant::now() > deadline {
            break answer;
        }
        tokio::task::yield_now().await;
    };
    assert_eq!(status, 201, "{}", &text[..text.len().min(500)]);
    let read = |text: &str| parse_stored(text.as_bytes()).unwrap();
    let created = read(&text)["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut watch = common::WatchReader::open(
        addr,
        &format!("{widgets}?watch=1&resourceVersion={created}"),
        Some(4096),
    )
    .await;
    let patches = 40;
    for leaf in 1..=patches {
        let (status, text) = request(
            addr,
            "PATCH",
            &format!("{widgets}/deep"),
            "application/merge-patch+json",
            &body(leaf),
        )
        .await;
        assert_eq!(status, 200, "{}", &text[..text.len().min(500)]);
    }
    let stalls = |text: &str| -> u64 {
        text.lines()
            .filter(|l| {
                l.starts_with("apiserver_watch_cache_watcher_stalls_total{")
                    && l.contains("widgets")
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .map(|v| v as u64)
            .sum()
    };
    assert!(
        stalls(&common::metrics_text(addr).await) >= 1,
        "the watch stalled"
    );
    let mut leaves = Vec::new();
    let mut gone = false;
    while let Some(text) = watch.next_text().await {
        let event = read(&text);
        if event["type"] == "ERROR" {
            assert_eq!(
                event["object"]["code"],
                410,
                "{}",
                &text[..text.len().min(500)]
            );
            gone = true;
            break;
        }
        assert_eq!(event["type"], "MODIFIED");
        let (depth, leaf) = depth_and_leaf(&event["object"]["spec"]);
        assert_eq!(depth, levels);
        leaves.push(leaf.as_u64().unwrap());
        if leaves.len() == patches as usize {
            break;
        }
    }
    // In order, from the first patch, each once: every one (caught up) or a backlog then 410.
    assert_eq!(leaves, (1..=leaves.len() as u64).collect::<Vec<_>>());
    assert!(gone || leaves.len() == patches as usize, "{leaves:?}");
    let (status, text) = request(addr, "GET", &format!("{widgets}/deep"), "", "").await;
    assert_eq!(status, 200);
    assert_eq!(
        depth_and_leaf(&read(&text)["spec"]),
        (levels, patches.into())
    );
    server.shutdown().await;
}

/// A CRD whose schema nests to the body's bound (4,990 levels of `properties`, the body
/// nesting 9,987 levels) is created and published (OpenAPI v2 and v3), and an object nested
/// as deep as it declares is created, merge-patched, applied and answered in YAML: every walk
/// over a schema and over an object along it (structural schema, pruning, validation, field
/// sets typed by the schema) takes the depth on the server's threads.
#[test]
fn a_crd_whose_schema_nests_to_the_body_bound_serves_its_objects() {
    common::on_server_runtime(a_crd_whose_schema_nests_to_the_body_bound_serves_its_objects_run);
}

async fn a_crd_whose_schema_nests_to_the_body_bound_serves_its_objects_run() {
    let server = server_with(ServeArgs::default()).await;
    let addr = server.addr;
    let levels = 4_990;
    let schema = format!(
        "{}{}{}",
        r#"{"type":"object","properties":{"a":"#.repeat(levels),
        r#"{"type":"integer"}"#,
        "}}".repeat(levels)
    );
    let crd = format!(
        r#"{{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{{"name":"deeps.example.com"}},"spec":{{"group":"example.com","scope":"Namespaced","names":{{"plural":"deeps","kind":"Deep"}},"versions":[{{"name":"v1","served":true,"storage":true,"schema":{{"openAPIV3Schema":{schema}}}}}]}}}}"#
    );
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let (status, text) = request(addr, "POST", crds, "application/json", &crd).await;
    assert_eq!(status, 201, "{}", &text[..text.len().min(500)]);
    for path in ["/openapi/v3/apis/example.com/v1", "/openapi/v2"] {
        let (status, text) = request(addr, "GET", path, "", "").await;
        assert_eq!(status, 200, "{path}: {}", &text[..text.len().min(500)]);
    }
    let deep = |leaf: u32| {
        format!(
            r#"{{"apiVersion":"example.com/v1","kind":"Deep","metadata":{{"name":"d"}},"a":{}{leaf}{}}}"#,
            r#"{"a":"#.repeat(levels - 1),
            "}".repeat(levels - 1)
        )
    };
    let deeps = "/apis/example.com/v1/namespaces/default/deeps";
    let deadline = std::time::Instant::now() + HANG_GUARD;
    let (status, text) = loop {
        let answer = request(addr, "POST", deeps, "application/json", &deep(1)).await;
        if answer.0 != 404 || std::time::Instant::now() > deadline {
            break answer;
        }
        tokio::task::yield_now().await;
    };
    assert_eq!(status, 201, "{}", &text[..text.len().min(500)]);
    let path = format!("{deeps}/d");
    let (status, text) = request(
        addr,
        "PATCH",
        &path,
        "application/merge-patch+json",
        r#"{"metadata":{"labels":{"x":"y"}}}"#,
    )
    .await;
    assert_eq!(status, 200, "{}", &text[..text.len().min(500)]);
    let (status, text) = request(
        addr,
        "PATCH",
        &format!("{path}?fieldManager=deep&force=true"),
        "application/apply-patch+yaml",
        &deep(2),
    )
    .await;
    assert_eq!(status, 200, "{}", &text[..text.len().min(500)]);
    let read = watchkeeper_api::go_json::parse_stored(text.as_bytes()).unwrap();
    assert_eq!(depth_and_leaf(&read["a"]), (levels - 1, 2.into()));
    let (status, text) =
        request_with_headers(addr, "GET", &path, &[("Accept", "application/yaml")], "").await;
    assert_eq!(status, 200, "{}", &text[..text.len().min(500)]);
    assert!(
        text.starts_with("a:\n  a:\n"),
        "{}",
        &text[..text.len().min(500)]
    );
    server.shutdown().await;
}

/// A CRD with a cheap rule at every level of a schema nested 4,000 levels: objects 1,000 and
/// 4,000 levels deep are created, and merge-patched with a transition rule at every level, as
/// kube-apiserver accepts them (it reads `self.a` lazily, a field selection: a few units of
/// its budget per level). Each level's `self` was converted whole and charged 2 per byte of
/// its subtree: past ~1,000 levels the object was refused, `validation failed due to running
/// out of cost budget`, after seconds of CPU.
#[test]
fn rules_at_every_level_of_a_deep_crd_accept_its_deep_objects() {
    common::on_server_runtime(rules_at_every_level_of_a_deep_crd_accept_its_deep_objects_run);
}

async fn rules_at_every_level_of_a_deep_crd_accept_its_deep_objects_run() {
    let server = server_with(ServeArgs::default()).await;
    let addr = server.addr;
    let levels = 4_000;
    let level = r#"{"type":"object","x-kubernetes-validations":[{"rule":"has(self.a) || true"},{"rule":"has(oldSelf.a) == has(self.a)"}],"properties":{"a":"#;
    let schema = format!(
        "{}{}{}",
        level.repeat(levels),
        r#"{"type":"integer"}"#,
        "}}".repeat(levels)
    );
    let crd = format!(
        r#"{{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{{"name":"ruled.example.com"}},"spec":{{"group":"example.com","scope":"Namespaced","names":{{"plural":"ruled","kind":"Ruled"}},"versions":[{{"name":"v1","served":true,"storage":true,"schema":{{"openAPIV3Schema":{schema}}}}}]}}}}"#
    );
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let (status, text) = request(addr, "POST", crds, "application/json", &crd).await;
    assert_eq!(status, 201, "{}", &text[..text.len().min(500)]);
    // `depth` objects deep: the last one `{}`, or the schema's integer at its last level.
    let deep = |name: &str, depth: usize| {
        let leaf = if depth == levels { "1" } else { "{}" };
        format!(
            r#"{{"apiVersion":"example.com/v1","kind":"Ruled","metadata":{{"name":"{name}"}},"a":{}{leaf}{}}}"#,
            r#"{"a":"#.repeat(depth - 1),
            "}".repeat(depth - 1)
        )
    };
    let ruled = "/apis/example.com/v1/namespaces/default/ruled";
    let deadline = std::time::Instant::now() + HANG_GUARD;
    for (name, depth) in [("shallower", 1_000), ("deepest", levels)] {
        let (status, text) = loop {
            let answer = request(addr, "POST", ruled, "application/json", &deep(name, depth)).await;
            if answer.0 != 404 || std::time::Instant::now() > deadline {
                break answer;
            }
            tokio::task::yield_now().await;
        };
        assert_eq!(status, 201, "{name}: {}", &text[..text.len().min(500)]);
        let (status, text) = request(
            addr,
            "PATCH",
            &format!("{ruled}/{name}"),
            "application/merge-patch+json",
            r#"{"metadata":{"labels":{"x":"y"}}}"#,
        )
        .await;
        assert_eq!(status, 200, "{name}: {}", &text[..text.len().min(500)]);
        let read = watchkeeper_api::go_json::parse_stored(text.as_bytes()).unwrap();
        assert_eq!(read["metadata"]["labels"]["x"], "y");
    }
    server.shutdown().await;
}

/// Goal: a review's body is decoded into its Go type, as kube-apiserver's create handler
/// decodes it: a field of the wrong type is its 400 in `transformDecodeError`'s words, not a
/// review answered for an array of attributes and echoed back as sent (which no client could
/// read: the answer broke the review's published schema); a field the type does not declare
/// is dropped from the answer, and reported as `fieldValidation` asks. Found by schemathesis
/// (tests/python/schemathesis_run.sh).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_review_body_is_decoded_into_its_go_type() {
    let server = server_with(ServeArgs::default()).await;
    let addr = server.addr;
    let reviews = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
    let refused = [
        (
            serde_json::json!({"spec": {"resourceAttributes": [null, null]}}),
            "SelfSubjectAccessReview in version \"v1\" cannot be handled as a SelfSubjectAccessReview: json: cannot unmarshal array into Go struct field SelfSubjectAccessReviewSpec.spec.resourceAttributes of type v1.ResourceAttributes",
        ),
        (
            serde_json::json!({"spec": {"resourceAttributes": {"verb": 7}}}),
            "SelfSubjectAccessReview in version \"v1\" cannot be handled as a SelfSubjectAccessReview: json: cannot unmarshal number into Go struct field ResourceAttributes.spec.resourceAttributes.verb of type string",
        ),
    ];
    for (body, message) in refused {
        let (status, answer) = send_json(addr, "POST", reviews, &body).await;
        assert_eq!(status, 400, "{answer}");
        assert_eq!(answer["reason"], "BadRequest", "{answer}");
        assert_eq!(answer["message"], message, "{answer}");
    }
    let (status, answer) = send_json(
        addr,
        "POST",
        "/apis/authentication.k8s.io/v1/tokenreviews",
        &serde_json::json!({"spec": {"token": 5}}),
    )
    .await;
    assert_eq!(status, 400, "{answer}");
    assert_eq!(
        answer["message"],
        "TokenReview in version \"v1\" cannot be handled as a TokenReview: json: cannot unmarshal number into Go struct field TokenReviewSpec.spec.token of type string"
    );

    let body = serde_json::json!({
        "spec": {"resourceAttributes": {"verb": "get", "resource": "pods", "color": "red"}, "extra": 5},
    });
    let (status, answer) = send_json(addr, "POST", reviews, &body).await;
    assert_eq!(status, 201, "{answer}");
    assert_eq!(
        answer["spec"],
        serde_json::json!({"resourceAttributes": {"verb": "get", "resource": "pods"}})
    );
    assert_eq!(answer["status"]["allowed"], true, "{answer}");

    // Those fields are reported as kube's create handler reports them for every kind, in the
    // body's order (the sent text has `extra` first): a warning each by default, kube's 400 when strict, nothing when ignored; a
    // `fieldValidation` kube does not know is its 422 on the create options.
    let text = body.to_string();
    let (status, answer, warnings) =
        write_warned(addr, "POST", reviews, "application/json", &text).await;
    assert_eq!(status, 201, "{answer}");
    assert_eq!(
        warnings,
        [
            "299 - \"unknown field \\\"spec.extra\\\"\"",
            "299 - \"unknown field \\\"spec.resourceAttributes.color\\\"\""
        ]
    );
    let (status, answer, warnings) = write_warned(
        addr,
        "POST",
        &format!("{reviews}?fieldValidation=Strict"),
        "application/json",
        &text,
    )
    .await;
    assert_eq!((status, warnings.len()), (400, 0), "{answer}");
    assert_eq!(
        answer["message"],
        "SelfSubjectAccessReview in version \"v1\" cannot be handled as a SelfSubjectAccessReview: strict decoding error: unknown field \"spec.extra\", unknown field \"spec.resourceAttributes.color\""
    );
    let (status, _, warnings) = write_warned(
        addr,
        "POST",
        &format!("{reviews}?fieldValidation=Ignore"),
        "application/json",
        &text,
    )
    .await;
    assert_eq!((status, warnings.len()), (201, 0));
    let (status, answer, _) = write_warned(
        addr,
        "POST",
        &format!("{reviews}?fieldValidation=Loose"),
        "application/json",
        &text,
    )
    .await;
    assert_eq!(status, 422, "{answer}");
    assert_eq!(
        answer["message"],
        "CreateOptions.meta.k8s.io \"\" is invalid: fieldValidation: Unsupported value: \"Loose\": supported values: \"\", \"Ignore\", \"Strict\", \"Warn\""
    );
}

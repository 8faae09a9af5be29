//! Goal: numbers answered and stored byte for byte as kube-apiserver answers them. A custom
//! resource's free-form number is decoded by `sigs.k8s.io/json` (an integer literal of int64
//! as int64, any other as float64), written by Go's `encoding/json` and answered as read back
//! from storage: `1.0` is `1`, `1e3` `1000`, `1e20` `100000000000000000000`, `1e21` `1e+21`,
//! `-0` and `-0.0` `0`, `12345678901234567890` `12345678901234567000`, `0.10` `0.1`; whether
//! it came in JSON, YAML, a merge patch, a JSON patch (`1.50` is `1.5`: kube decodes the
//! patched bytes as a body's) or an apply, read by GET, LIST or WATCH, and as stored
//! (a new server over the same embedded store or etcd answers the same), on each store. In YAML
//! answers, go-yaml's `%g` text of a float (`1e+20`, `1e-07`). A built-in kind's integer field
//! refuses a float literal and an int32 overflow in Go's words, and takes `-0` as 0.

use crate::common;

use common::{request, request_with_headers, send_json, server, server_with};
use serde_json::{Value, json};
use watchkeeper::config::ServeArgs;

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const WIDGETS: &str = "/apis/example.com/v1/namespaces/default/widgets";
const DEPLOYMENTS: &str = "/apis/apps/v1/namespaces/default/deployments";

/// Each literal a client sends, kube-apiserver's JSON text of it and go-yaml's (its YAML
/// answer's). The JSON texts: `UnmarshalCaseSensitivePreserveInts`, `json.Marshal`, then the
/// same again from etcd; the YAML texts: `JSONToYAML` of those (go-yaml v2 reads an integer
/// of int64 or uint64 as one, any other number as a float64 it writes with
/// `strconv.FormatFloat(f, 'g', -1, 64)`).
const CASES: [(&str, &str, &str); 18] = [
    ("1", "1", "1"),
    ("1.0", "1", "1"),
    ("1e3", "1000", "1000"),
    ("1e20", "100000000000000000000", "1e+20"),
    ("1e21", "1e+21", "1e+21"),
    ("-0", "0", "0"),
    ("-0.0", "0", "0"),
    (
        "12345678901234567890",
        "12345678901234567000",
        "12345678901234567000",
    ),
    ("0.10", "0.1", "0.1"),
    ("1.50", "1.5", "1.5"),
    // Past int64: a float64 (from YAML, go-yaml's uint64 first, then `json.Marshal`'s digits,
    // which kube's decoder reads as a float64). `-2^63` as a float64 is written
    // `-9223372036854776000`, past int64 again: it stays a float. In YAML, go-yaml reads the
    // JSON answer's digits as a uint64 when they fit one.
    (
        "9223372036854775808",
        "9223372036854776000",
        "9223372036854776000",
    ),
    (
        "18446744073709551616",
        "18446744073709552000",
        "1.8446744073709552e+19",
    ),
    (
        "-9223372036854775809",
        "-9223372036854776000",
        "-9.223372036854776e+18",
    ),
    ("1e-7", "1e-7", "1e-07"),
    (
        "9223372036854775807",
        "9223372036854775807",
        "9223372036854775807",
    ),
    ("5e-324", "5e-324", "5e-324"),
    (
        "1.7976931348623157e308",
        "1.7976931348623157e+308",
        "1.7976931348623157e+308",
    ),
    ("1234567.5", "1234567.5", "1.2345675e+06"),
];

/// `"spec":{"n00":<text>,...}` with the case's column (0: the literal, 1: kube's text).
fn spec_json(column: usize) -> String {
    let fields: Vec<String> = CASES
        .iter()
        .enumerate()
        .map(|(index, case)| {
            let text = [case.0, case.1][column];
            format!("\"n{index:02}\":{text}")
        })
        .collect();
    format!("\"spec\":{{{}}}", fields.join(","))
}

fn widget_json(name: &str) -> String {
    format!(
        "{{\"apiVersion\":\"example.com/v1\",\"kind\":\"Widget\",\"metadata\":{{\"name\":\"{name}\"}},{}}}",
        spec_json(0)
    )
}

fn widget_yaml(name: &str) -> String {
    let mut text =
        format!("apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: {name}\nspec:\n");
    for (index, (literal, _, _)) in CASES.iter().enumerate() {
        text.push_str(&format!("  n{index:02}: {literal}\n"));
    }
    text
}

/// The answer's text holds kube's spec, byte for byte.
#[track_caller]
fn assert_spec(what: &str, status: u16, want_status: u16, text: &str) {
    assert_eq!(status, want_status, "{what}: {text}");
    let want = spec_json(1);
    assert!(text.contains(&want), "{what}:\n{text}\nwants\n{want}");
}

/// The server's arguments over `store` (a fresh data directory or etcd prefix), and the
/// directory to keep while they are used.
fn store_args(store: &str) -> (ServeArgs, Option<tempfile::TempDir>) {
    match store {
        "memory" => (ServeArgs::default(), None),
        "embedded" => {
            let dir = tempfile::tempdir().unwrap();
            let args = ServeArgs {
                store: Some("embedded".into()),
                data_dir: Some(dir.path().to_owned()),
                durable_commits: Some(false),
                ..ServeArgs::default()
            };
            (args, Some(dir))
        }
        _ => {
            let args = common::etcd::shared_args(&common::etcd::fresh_prefix());
            (args, None)
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn free_form_numbers_are_kube_s_text_in_every_answer_memory() {
    free_form_numbers("memory").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn free_form_numbers_are_kube_s_text_in_every_answer_embedded() {
    free_form_numbers("embedded").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn free_form_numbers_are_kube_s_text_in_every_answer_etcd() {
    free_form_numbers("etcd").await;
}

async fn free_form_numbers(store: &str) {
    let (args, _dir) = store_args(store);
    let server = server_with(args.clone()).await;
    let addr = server.addr;
    let (status, body) = send_json(addr, "POST", CRDS, &common::widgets_crd()).await;
    assert_eq!(status, 201, "{body}");
    let mut watch = None;
    for _ in 0..5_000 {
        let (status, list) = request(addr, "GET", WIDGETS, "application/json", "").await;
        if status == 200 {
            let list: Value = serde_json::from_str(&list).unwrap();
            let rv = list["metadata"]["resourceVersion"].as_str().unwrap();
            let path = format!("{WIDGETS}?watch=true&resourceVersion={rv}");
            watch = Some(
                watchkeeper_testkit::RawWatch::open(addr, &path, None, &[])
                    .await
                    .unwrap(),
            );
            break;
        }
        tokio::task::yield_now().await;
    }
    let mut watch = watch.expect("widgets served");

    // Create in JSON and in YAML.
    let (status, text) = request(
        addr,
        "POST",
        WIDGETS,
        "application/json",
        &widget_json("json"),
    )
    .await;
    assert_spec("create (JSON)", status, 201, &text);
    let (status, text) = request(
        addr,
        "POST",
        WIDGETS,
        "application/yaml",
        &widget_yaml("yaml"),
    )
    .await;
    assert_spec("create (YAML)", status, 201, &text);

    // A merge patch of an empty spec.
    let (status, text) = request(
        addr,
        "POST",
        WIDGETS,
        "application/json",
        r#"{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"patched"},"spec":{}}"#,
    )
    .await;
    assert_eq!(status, 201, "{text}");
    let (status, text) = request(
        addr,
        "PATCH",
        &format!("{WIDGETS}/patched"),
        "application/merge-patch+json",
        &format!("{{{}}}", spec_json(0)),
    )
    .await;
    assert_spec("merge patch", status, 200, &text);
    // A JSON patch: kube keeps each value's literal in the patched bytes, then decodes them as
    // a body's (`UnmarshalCaseSensitivePreserveInts`): `1.50` is the float64 1.5, answered `1.5`.
    let (status, text) = request(
        addr,
        "POST",
        WIDGETS,
        "application/json",
        r#"{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"json-patched"},"spec":{}}"#,
    )
    .await;
    assert_eq!(status, 201, "{text}");
    let (status, text) = request(
        addr,
        "PATCH",
        &format!("{WIDGETS}/json-patched"),
        "application/json-patch+json",
        &format!(
            r#"[{{"op":"replace","path":"/spec","value":{}}}]"#,
            &spec_json(0)["\"spec\":".len()..]
        ),
    )
    .await;
    assert_spec("JSON patch", status, 200, &text);

    // Server-side apply, of JSON and of YAML.
    let (status, text) = request(
        addr,
        "PATCH",
        &format!("{WIDGETS}/applied?fieldManager=numbers"),
        "application/apply-patch+yaml",
        &widget_json("applied"),
    )
    .await;
    assert_spec("apply (JSON)", status, 201, &text);
    let (status, text) = request(
        addr,
        "PATCH",
        &format!("{WIDGETS}/applied-yaml?fieldManager=numbers"),
        "application/apply-patch+yaml",
        &widget_yaml("applied-yaml"),
    )
    .await;
    assert_spec("apply (YAML)", status, 201, &text);

    // Read back: GET, LIST, WATCH.
    let names = [
        "json",
        "yaml",
        "patched",
        "json-patched",
        "applied",
        "applied-yaml",
    ];
    for name in names {
        let (status, text) = request(
            addr,
            "GET",
            &format!("{WIDGETS}/{name}"),
            "application/json",
            "",
        )
        .await;
        assert_spec(&format!("GET {name}"), status, 200, &text);
    }
    let (status, text) = request(addr, "GET", WIDGETS, "application/json", "").await;
    assert_eq!(
        text.matches(&spec_json(1)).count(),
        names.len(),
        "LIST: {text}"
    );
    assert_eq!(status, 200);
    let mut seen = 0;
    while seen < names.len() + 2 {
        let line = tokio::time::timeout(common::HANG_GUARD, watch.next_line())
            .await
            .expect("watch hang")
            .unwrap()
            .expect("an event");
        let line = String::from_utf8(line).unwrap();
        seen += 1;
        // The patched widgets' first events are their empty specs.
        if (line.contains("\"name\":\"patched\"") || line.contains("\"name\":\"json-patched\""))
            && line.contains("\"spec\":{}")
        {
            continue;
        }
        assert_spec("WATCH", 200, 200, &line);
    }

    // YAML answers: go-yaml's texts.
    let (status, text) = request_with_headers(
        addr,
        "GET",
        &format!("{WIDGETS}/json"),
        &[("Accept", "application/yaml")],
        "",
    )
    .await;
    assert_eq!(status, 200, "{text}");
    let mut want = String::from("spec:\n");
    for (index, (_, _, yaml)) in CASES.iter().enumerate() {
        want.push_str(&format!("  n{index:02}: {yaml}\n"));
    }
    assert!(text.ends_with(&want), "{text}\nwants\n{want}");

    // A number past float64: Go's refusal, in kube's decode-error frame.
    let (status, text) = request(
        addr,
        "POST",
        WIDGETS,
        "application/json",
        r#"{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"big"},"spec":{"a":1e400}}"#,
    )
    .await;
    assert_eq!(status, 400, "{text}");
    let status: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(status["reason"], "BadRequest", "{status}");
    assert_eq!(
        status["message"],
        "Widget in version \"v1\" cannot be handled as a Widget: json: cannot unmarshal number 1e400 into Go value of type float64"
    );

    // What was stored: a new server over the same store answers from the stored bytes.
    if store != "memory" {
        drop(watch);
        server.shutdown().await;
        let server = common::restarted(args).await;
        for name in names {
            let path = format!("{WIDGETS}/{name}");
            let mut answer = (0, String::new());
            for _ in 0..5_000 {
                answer = request(server.addr, "GET", &path, "application/json", "").await;
                if answer.0 == 200 {
                    break;
                }
                tokio::task::yield_now().await;
            }
            assert_spec(&format!("stored {name}"), answer.0, 200, &answer.1);
        }
    }
}

fn deployment(replicas: &str) -> String {
    format!(
        r#"{{"apiVersion":"apps/v1","kind":"Deployment","metadata":{{"name":"d{}"}},"spec":{{"replicas":{replicas},"selector":{{"matchLabels":{{"app":"a"}}}},"template":{{"metadata":{{"labels":{{"app":"a"}}}},"spec":{{"containers":[{{"name":"c","image":"i"}}]}}}}}}}}"#,
        replicas.len()
    )
}

/// Expected answers: kube-apiserver's for a Deployment body Go decodes into
/// `appsv1.Deployment` (`transformDecodeError` around `encoding/json`'s
/// `UnmarshalTypeError`, which quotes the literal), and for patches: a merge patch's result is
/// decoded from its bytes (the literal kept: refused), a strategic merge patch's and an
/// apply's are converted from a map (`DefaultUnstructuredConverter` sets an integer field from
/// an integral float64).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_built_in_integer_field_takes_numbers_as_go_decodes_them() {
    let server = server().await;
    let addr = server.addr;
    for (replicas, message) in [
        (
            "1.0",
            "Deployment in version \"v1\" cannot be handled as a Deployment: json: cannot unmarshal number 1.0 into Go struct field DeploymentSpec.spec.replicas of type int32",
        ),
        (
            "3000000000",
            "Deployment in version \"v1\" cannot be handled as a Deployment: json: cannot unmarshal number 3000000000 into Go struct field DeploymentSpec.spec.replicas of type int32",
        ),
    ] {
        let (status, text) = request(
            addr,
            "POST",
            DEPLOYMENTS,
            "application/json",
            &deployment(replicas),
        )
        .await;
        assert_eq!(status, 400, "{replicas}: {text}");
        let answer: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(answer["reason"], "BadRequest", "{answer}");
        assert_eq!(answer["message"], message, "{replicas}");
    }
    let (status, text) = request(
        addr,
        "POST",
        DEPLOYMENTS,
        "application/json",
        &deployment("-0"),
    )
    .await;
    assert_eq!(status, 201, "{text}");
    assert!(text.contains("\"replicas\":0,"), "{text}");
    let path = format!("{DEPLOYMENTS}/d2");
    let (status, text) = request(addr, "GET", &path, "application/json", "").await;
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("\"replicas\":0,"), "{text}");

    let patch = r#"{"spec":{"replicas":2.0}}"#;
    let (status, text) = request(addr, "PATCH", &path, "application/merge-patch+json", patch).await;
    assert_eq!(status, 422, "{text}");
    assert!(
        text.contains("json: cannot unmarshal number 2.0 into Go struct field DeploymentSpec.spec.replicas of type int32"),
        "{text}"
    );
    let (status, text) = request(
        addr,
        "PATCH",
        &path,
        "application/strategic-merge-patch+json",
        patch,
    )
    .await;
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("\"replicas\":2,"), "{text}");
    let (_, deployment) = common::get_json(addr, &path).await;
    assert_eq!(deployment["spec"]["replicas"], json!(2));
    // Server-side apply: the applied map is converted into the Go type, as the strategic
    // merge patch's is.
    let (status, text) = request(
        addr,
        "PATCH",
        &format!("{path}?fieldManager=numbers&force=true"),
        "application/apply-patch+yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d2\nspec:\n  replicas: 3.0\n",
    )
    .await;
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("\"replicas\":3,"), "{text}");
}

/// Goal: a custom resource's `2.0` in a `type: integer` field is the integer 2 to what reads
/// the object, as in kube (which holds it as read back from etcd): its text is `2` and a
/// Table column of type integer shows 2 (a float there is no integer to the column).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_custom_resource_s_integral_float_is_an_integer_to_its_readers() {
    let server = server().await;
    let addr = server.addr;
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gauges.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "gauges", "kind": "Gauge"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "additionalPrinterColumns": [{"name": "N", "type": "integer", "jsonPath": ".spec.n"}],
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"n": {"type": "integer"}}}}}}}]}});
    let (status, body) = send_json(addr, "POST", CRDS, &crd).await;
    assert_eq!(status, 201, "{body}");
    let gauges = "/apis/example.com/v1/namespaces/default/gauges";
    let body = r#"{"apiVersion":"example.com/v1","kind":"Gauge","metadata":{"name":"g"},"spec":{"n":2.0}}"#;
    let mut created = (0, String::new());
    for _ in 0..5_000 {
        created = request(addr, "POST", gauges, "application/json", body).await;
        if created.0 != 404 {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert_eq!(created.0, 201, "{}", created.1);
    assert!(created.1.contains("\"spec\":{\"n\":2}"), "{}", created.1);
    let (status, text) = request_with_headers(
        addr,
        "GET",
        gauges,
        &[("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")],
        "",
    )
    .await;
    assert_eq!(status, 200, "{text}");
    let table: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(table["rows"][0]["cells"][1], json!(2), "{table}");
}

/// go-yaml v2 reads a plain number past float64's range as the string it is (`resolve.go`:
/// its `ParseFloat` fails, the scalar stays a string), so kube-apiserver takes `x: 1e400` in a
/// YAML ConfigMap's data, created or applied, as `"1e400"`; an explicit `.inf` is a float to
/// go-yaml, which JSON cannot hold: refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_yaml_number_past_float64_is_the_string_go_yaml_reads() {
    let server = server().await;
    let addr = server.addr;
    let configmaps = "/api/v1/namespaces/default/configmaps";
    let yaml = |name: &str, value: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  a: {value}\n  b: -1e400\n"
        )
    };
    let mut created = (0, String::new());
    for _ in 0..5_000 {
        created = request(
            addr,
            "POST",
            configmaps,
            "application/yaml",
            &yaml("c", "1e400"),
        )
        .await;
        if created.0 != 429 {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert_eq!(created.0, 201, "{}", created.1);
    let object: Value = serde_json::from_str(&created.1).unwrap();
    assert_eq!(object["data"], json!({"a": "1e400", "b": "-1e400"}));
    let (status, text) = request(
        addr,
        "PATCH",
        &format!("{configmaps}/applied?fieldManager=numbers"),
        "application/apply-patch+yaml",
        &yaml("applied", "1E999"),
    )
    .await;
    assert_eq!(status, 201, "{text}");
    let object: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(object["data"], json!({"a": "1E999", "b": "-1e400"}));
    let (status, text) = request(
        addr,
        "POST",
        configmaps,
        "application/yaml",
        &yaml("inf", ".inf"),
    )
    .await;
    assert_eq!(status, 400, "{text}");
}

/// A Deployment named `name` with `replicas` as its literal, in JSON or in YAML.
fn deployment_named(name: &str, replicas: &str, yaml: bool) -> String {
    if yaml {
        return format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\nspec:\n  replicas: {replicas}\n  selector:\n    matchLabels: {{app: a}}\n  template:\n    metadata:\n      labels: {{app: a}}\n    spec:\n      containers: [{{name: c, image: i}}]\n"
        );
    }
    deployment(replicas).replacen(
        &format!("\"name\":\"d{}\"", replicas.len()),
        &format!("\"name\":\"{name}\""),
        1,
    )
}

/// Goal: an int32 field takes or refuses each literal as kube-apiserver does, on each way in,
/// and a refusal quotes the literal as sent. kube's answers: a JSON create, a merge patch and
/// a JSON patch are decoded into the Go type by `encoding/json`, which reads an integer
/// field's literal with `strconv.ParseInt` (`-0` is 0; `0.0`, `-0.0`, `1.0`, `1e2`, `1e0`,
/// `1.50` refused, quoted as sent: both patches keep the patch's bytes, evanphx/json-patch's
/// `lazyNode`; a JSON patch's were quoted as serde_json prints the float, `-0.0` taken);
/// a strategic merge patch and an apply are read into a map (`util/json`: `-0` an int64, the
/// others float64) and converted (`converter.go` `fromUnstructured`: a float64 equal to its
/// `math.Trunc` is set: all taken); a YAML body is converted to JSON by `sigs.k8s.io/yaml`
/// (go-yaml's float64 written by `json.Marshal`: `1.0` is `1`, `-0.0` `-0`, `1e2` `100`: all
/// taken; `1.5` stays `1.5`, refused).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_int32_field_takes_each_literal_as_kube_does_on_each_way_in() {
    let server = server().await;
    let addr = server.addr;
    let refused = |literal: &str| {
        format!(
            "json: cannot unmarshal number {literal} into Go struct field DeploymentSpec.spec.replicas of type int32"
        )
    };
    // (literal, what a JSON create and a merge patch give: Some(replicas) taken, None refused,
    // what a strategic merge patch and an apply give).
    let table: [(&str, Option<i64>, i64); 7] = [
        ("-0", Some(0), 0),
        ("0.0", None, 0),
        ("-0.0", None, 0),
        ("1.0", None, 1),
        ("1e2", None, 100),
        ("1e0", None, 1),
        ("1.50", None, 0),
    ];
    for (index, (literal, json_answer, map_answer)) in table.into_iter().enumerate() {
        let name = format!("lit{index}");
        let (status, text) = request(
            addr,
            "POST",
            DEPLOYMENTS,
            "application/json",
            &deployment_named(&name, literal, false),
        )
        .await;
        match json_answer {
            Some(replicas) => {
                assert_eq!(status, 201, "create {literal}: {text}");
                assert!(
                    text.contains(&format!("\"replicas\":{replicas},")),
                    "{text}"
                );
            }
            None => {
                assert_eq!(status, 400, "create {literal}: {text}");
                let answer: Value = serde_json::from_str(&text).unwrap();
                assert_eq!(
                    answer["message"],
                    format!(
                        "Deployment in version \"v1\" cannot be handled as a Deployment: {}",
                        refused(literal)
                    ),
                    "create {literal}"
                );
                let (status, text) = request(
                    addr,
                    "POST",
                    DEPLOYMENTS,
                    "application/json",
                    &deployment_named(&name, "5", false),
                )
                .await;
                assert_eq!(status, 201, "{text}");
            }
        }
        let path = format!("{DEPLOYMENTS}/{name}");
        let patch = format!(r#"{{"spec":{{"replicas":{literal}}}}}"#);
        let (status, text) =
            request(addr, "PATCH", &path, "application/merge-patch+json", &patch).await;
        match json_answer {
            Some(replicas) => {
                assert_eq!(status, 200, "merge patch {literal}: {text}");
                assert!(
                    text.contains(&format!("\"replicas\":{replicas},")),
                    "{text}"
                );
            }
            None => {
                assert_eq!(status, 422, "merge patch {literal}: {text}");
                assert!(
                    text.contains(&refused(literal)),
                    "merge patch {literal}: {text}"
                );
            }
        }
        // A JSON patch: kube applies it to the object's bytes keeping the value's literal
        // (evanphx/json-patch's `lazyNode`), then decodes them as a merge patch's.
        let operations =
            format!(r#"[{{"op":"replace","path":"/spec/replicas","value":{literal}}}]"#);
        let (status, text) = request(
            addr,
            "PATCH",
            &path,
            "application/json-patch+json",
            &operations,
        )
        .await;
        match json_answer {
            Some(replicas) => {
                assert_eq!(status, 200, "JSON patch {literal}: {text}");
                assert!(
                    text.contains(&format!("\"replicas\":{replicas},")),
                    "{text}"
                );
            }
            None => {
                assert_eq!(status, 422, "JSON patch {literal}: {text}");
                assert!(
                    text.contains(&refused(literal)),
                    "JSON patch {literal}: {text}"
                );
            }
        }
        if literal == "1.50" {
            // Not integral: the converter refuses it too, in its own words.
            continue;
        }
        for (content_type, patch) in [
            ("application/strategic-merge-patch+json", patch.clone()),
            (
                "application/apply-patch+yaml",
                format!(
                    "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\nspec:\n  replicas: {literal}\n"
                ),
            ),
        ] {
            let target = if content_type.starts_with("application/apply") {
                format!("{path}?fieldManager=numbers&force=true")
            } else {
                path.clone()
            };
            // Away from the answer first, so that the patch's effect shows.
            let reset = r#"{"spec":{"replicas":7}}"#;
            let (status, text) =
                request(addr, "PATCH", &path, "application/merge-patch+json", reset).await;
            assert_eq!(status, 200, "{text}");
            let (status, text) = request(addr, "PATCH", &target, content_type, &patch).await;
            assert_eq!(status, 200, "{content_type} {literal}: {text}");
            assert!(
                text.contains(&format!("\"replicas\":{map_answer},")),
                "{content_type} {literal}: {text}"
            );
        }
    }
    // An int-or-string field: `intstr.IntOrString`'s own decoder reads the literal into an
    // int32 (`-0` is 0), and its error is Go's without a field.
    for (index, (literal, refused)) in [("-0", false), ("1e0", true), ("-0.0", true)]
        .into_iter()
        .enumerate()
    {
        let body = deployment_named(&format!("surge{index}"), "1", false).replacen(
            "\"spec\":{\"replicas\":1,",
            &format!(
                "\"spec\":{{\"replicas\":1,\"strategy\":{{\"type\":\"RollingUpdate\",\"rollingUpdate\":{{\"maxSurge\":{literal}}}}},"
            ),
            1,
        );
        let (status, text) = request(addr, "POST", DEPLOYMENTS, "application/json", &body).await;
        if refused {
            assert_eq!(status, 400, "maxSurge {literal}: {text}");
            let answer: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(
                answer["message"],
                format!(
                    "Deployment in version \"v1\" cannot be handled as a Deployment: json: cannot unmarshal number {literal} into Go value of type int32"
                ),
                "maxSurge {literal}"
            );
        } else {
            assert_eq!(status, 201, "maxSurge {literal}: {text}");
            assert!(text.contains("\"maxSurge\":0"), "{text}");
        }
    }
    // YAML bodies: converted to JSON as go-yaml and `json.Marshal` write the float.
    for (index, (literal, answer)) in [
        ("-0", Ok(0)),
        ("0.0", Ok(0)),
        ("-0.0", Ok(0)),
        ("1.0", Ok(1)),
        ("1e2", Ok(100)),
        ("1.50", Err("1.5")),
        ("3000000000", Err("3000000000")),
        // go-yaml reads an integer past int64 but within uint64 as a uint64, which
        // `json.Marshal` writes as its digits; past uint64, as a float64, written by
        // `floatEncoder`; so is one below int64.
        ("9223372036854775808", Err("9223372036854775808")),
        ("18446744073709551615", Err("18446744073709551615")),
        ("18446744073709551616", Err("18446744073709552000")),
        ("-9223372036854775809", Err("-9223372036854776000")),
    ]
    .into_iter()
    .enumerate()
    {
        let (status, text) = request(
            addr,
            "POST",
            DEPLOYMENTS,
            "application/yaml",
            &deployment_named(&format!("yaml{index}"), literal, true),
        )
        .await;
        match answer {
            Ok(replicas) => {
                assert_eq!(status, 201, "YAML {literal}: {text}");
                assert!(
                    text.contains(&format!("\"replicas\":{replicas},")),
                    "{text}"
                );
            }
            Err(quoted) => {
                assert_eq!(status, 400, "YAML {literal}: {text}");
                let answer: Value = serde_json::from_str(&text).unwrap();
                assert_eq!(
                    answer["message"],
                    format!(
                        "Deployment in version \"v1\" cannot be handled as a Deployment: {}",
                        refused(quoted)
                    ),
                    "YAML {literal}"
                );
            }
        }
    }
}

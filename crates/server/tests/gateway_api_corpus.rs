//! Gateway API's own corpus as a regression suite: its CRDs, valid and invalid examples
//! (vendored from kubernetes-sigs/gateway-api at one commit, `fixtures/gateway-api/`, see its
//! README) and its CEL validation tests (`tests/cel/*_test.go`, ported to data in
//! `fixtures/gateway-api/cel-cases.yaml`), run for both channels Gateway API's CI tests
//! (`standard` and `experimental`), each on a fresh server, as its CI runs them on a real
//! kube-apiserver (`tests/crd/crd_test.go`, `tests/cel/main_test.go`):
//!
//! - the channel's CRDs (and the safe-upgrades ValidatingAdmissionPolicy shipped beside them)
//!   install with the real `kubectl apply --server-side`, and every resource they define is
//!   served;
//! - every valid example (`examples/standard`, and `examples/experimental` on the experimental
//!   channel) is accepted by `kubectl apply --recursive` as upstream applies them, and every
//!   object of them is then stored;
//! - every invalid example (`hack/invalid-examples`, its `experimental` directory only on the
//!   experimental channel) is refused by `kubectl apply -f` with what upstream's
//!   `expectedValidationError` looks for (`is invalid`, `missing required field`,
//!   `denied request` or `Invalid value`), and each of its objects, created over HTTP, is
//!   refused with a Kubernetes `Status` (422 `Invalid`) each of whose causes kubectl printed
//!   (`field: message`);
//! - on the standard channel, the safe-upgrades policy then refuses the experimental channel's
//!   CRDs of `gateway.networking.k8s.io` over the standard ones (kube's
//!   `ValidatingAdmissionPolicy ... denied request` with the policy's message), while those
//!   of `gateway.networking.x-k8s.io` install;
//! - every ported CEL case is accepted, or refused with a 422 `Status` whose message contains
//!   each of the case's expected substrings (upstream's `celErrorStringMatches`: `more` may
//!   read `longer`); a case may create, then update the object or its status, and the
//!   expectation is of its last write.
//!
//! A third test applies one more project's corpus the same way: Envoy Gateway's CRDs (beside
//! Gateway API's experimental channel) and its Kubernetes examples (`fixtures/envoy-gateway/`),
//! each example object accepted and stored, and a selection of its CEL validation tests
//! (`test/cel-validation/*_test.go`, 168 cases ported to `fixtures/envoy-gateway/cel-cases.yaml`,
//! compared without regard to case as upstream compares them).
//!
//! Failures are collected and reported together, each naming its file or case.

use crate::common;
use crate::kubectl_support;

use std::collections::BTreeMap;
use std::io::Read;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde_json::Value;

use common::{get_json, send_json};
use kubectl_support::Kubectl;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");

/// A project's vendored files (`fixtures/<project>/corpus.json.gz`): path in its repository →
/// text.
fn corpus(project: &str) -> BTreeMap<String, String> {
    let gz = std::fs::read(format!("{FIXTURES}/{project}/corpus.json.gz")).unwrap();
    let mut text = String::new();
    flate2::read::GzDecoder::new(&gz[..])
        .read_to_string(&mut text)
        .unwrap();
    let bundle: Value = serde_json::from_str(&text).unwrap();
    bundle["files"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(path, text)| (path.clone(), text.as_str().unwrap().to_owned()))
        .collect()
}

/// The documents of a YAML stream as JSON (read as kube-apiserver reads a YAML body), empty
/// documents left out.
fn documents(text: &str) -> Vec<Value> {
    let mut docs = Vec::new();
    let mut current = String::new();
    for line in text.lines().chain(std::iter::once("---")) {
        if line.trim_end() == "---" {
            let json = watchkeeper_api::yaml::json_from_yaml_body(current.as_bytes())
                .unwrap_or_else(|e| panic!("cannot read YAML: {e:?}\n{current}"));
            let value: Value = serde_json::from_slice(&json).unwrap();
            if !value.is_null() {
                docs.push(value);
            }
            current.clear();
        } else {
            current.push_str(line);
            current.push('\n');
        }
    }
    docs
}

/// How to reach a kind: its plural and whether it is namespaced.
#[derive(Clone)]
struct Resource {
    plural: String,
    namespaced: bool,
}

/// The resources the installed CRDs define, by `group/Kind`, and the core kinds examples use.
fn resources(crds: &[Value]) -> BTreeMap<String, Resource> {
    let mut map = BTreeMap::new();
    for crd in crds
        .iter()
        .filter(|d| d["kind"] == "CustomResourceDefinition")
    {
        let spec = &crd["spec"];
        map.insert(
            format!(
                "{}/{}",
                spec["group"].as_str().unwrap(),
                spec["names"]["kind"].as_str().unwrap()
            ),
            Resource {
                plural: spec["names"]["plural"].as_str().unwrap().to_owned(),
                namespaced: spec["scope"] == "Namespaced",
            },
        );
    }
    for (group, kind, plural, namespaced) in [
        ("", "Namespace", "namespaces", false),
        ("", "Service", "services", true),
        ("", "Secret", "secrets", true),
        ("", "ConfigMap", "configmaps", true),
        ("", "ServiceAccount", "serviceaccounts", true),
        ("apps", "Deployment", "deployments", true),
    ] {
        map.insert(
            format!("{group}/{kind}"),
            Resource {
                plural: plural.to_owned(),
                namespaced,
            },
        );
    }
    map
}

/// The collection path of `object` (its namespace, or `default`).
fn collection(resources: &BTreeMap<String, Resource>, object: &Value) -> String {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let (group, prefix) = match api_version.split_once('/') {
        Some((group, _)) => (group, format!("/apis/{api_version}")),
        None => ("", format!("/api/{api_version}")),
    };
    let kind = object["kind"].as_str().unwrap_or_default();
    let resource = resources
        .get(&format!("{group}/{kind}"))
        .unwrap_or_else(|| panic!("no resource for {api_version} {kind}"));
    if resource.namespaced {
        let namespace = object["metadata"]["namespace"]
            .as_str()
            .unwrap_or("default");
        format!("{prefix}/namespaces/{namespace}/{}", resource.plural)
    } else {
        format!("{prefix}/{}", resource.plural)
    }
}

/// The files under `prefix` written below `root` ([`write_tree`]), then applied with
/// `kubectl apply --recursive -f`, as upstream applies its examples: their paths and
/// kubectl's output.
async fn apply_tree(
    k: &Kubectl,
    files: &BTreeMap<String, String>,
    prefix: &str,
    root: &Path,
) -> (Vec<PathBuf>, kubectl_support::Output) {
    let paths = write_tree(files, prefix, root);
    let dir = root.join(prefix);
    let out = k
        .run(&["apply", "--recursive", "-f", &dir.to_string_lossy()])
        .await;
    (paths, out)
}

/// The vendored files under `prefix`, written below `root`; their paths.
fn write_tree(files: &BTreeMap<String, String>, prefix: &str, root: &Path) -> Vec<PathBuf> {
    let mut written = Vec::new();
    for (path, text) in files.range(prefix.to_owned()..) {
        if !path.starts_with(prefix) {
            break;
        }
        let target = root.join(path);
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::write(&target, text).unwrap();
        written.push(target);
    }
    written
}

/// What one channel's run saw, for the summary line.
#[derive(Default)]
struct Counts {
    crds: usize,
    valid_files: usize,
    valid_objects: usize,
    invalid_files: usize,
    cel_cases: usize,
    cel_refused: usize,
}

/// Gateway API's standard channel (see the module docs), with the safe-upgrades check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standard_channel() {
    channel("standard").await;
}

/// Gateway API's experimental channel (see the module docs): its CRDs, the standard and
/// experimental examples, every invalid example, every CEL case of either tag.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn experimental_channel() {
    channel("experimental").await;
}

/// One channel's run on a fresh server; every divergence is collected, then reported.
async fn channel(channel: &str) {
    let server = common::server().await;
    let addr = server.addr;
    let k = Kubectl::new(addr);
    let files = corpus("gateway-api");
    let root = k.dir().join("gateway-api");
    let mut failures = Vec::new();
    let mut counts = Counts::default();

    // The CRDs, as large as CRDs get: server-side apply, as kubectl's own advice has it.
    let crd_dir = format!("config/crd/{channel}/");
    let crd_files = write_tree(&files, &crd_dir, &root);
    assert!(!crd_files.is_empty(), "no CRDs vendored for {channel}");
    let out = k
        .ok(&[
            "apply",
            "--server-side",
            "-f",
            &root.join(&crd_dir).to_string_lossy(),
        ])
        .await;
    let mut crds = Vec::new();
    for path in &crd_files {
        crds.extend(documents(&std::fs::read_to_string(path).unwrap()));
    }
    let resources = resources(&crds);
    for crd in crds
        .iter()
        .filter(|d| d["kind"] == "CustomResourceDefinition")
    {
        counts.crds += 1;
        let name = crd["metadata"]["name"].as_str().unwrap();
        assert!(
            out.contains(&format!(
                "customresourcedefinition.apiextensions.k8s.io/{name} serverside-applied"
            )),
            "{out}"
        );
        for version in crd["spec"]["versions"].as_array().unwrap() {
            if version["served"] != true {
                continue;
            }
            let list = format!(
                "/apis/{}/{}/{}",
                crd["spec"]["group"].as_str().unwrap(),
                version["name"].as_str().unwrap(),
                crd["spec"]["names"]["plural"].as_str().unwrap()
            );
            let (status, body) = get_json(addr, &list).await;
            if status != 200 {
                failures.push(format!("{name}: LIST {list} answered {status}: {body}"));
            }
        }
    }

    // Valid examples: `kubectl apply --recursive`, as upstream's crd_test.go applies them.
    let mut example_dirs = vec!["examples/standard/"];
    if channel == "experimental" {
        example_dirs.push("examples/experimental/");
    }
    for dir in example_dirs {
        let (paths, out) = apply_tree(&k, &files, dir, &root).await;
        if !out.success() {
            failures.push(format!(
                "kubectl apply --recursive -f {dir} failed:\n{}\n{}",
                out.stderr, out.stdout
            ));
        }
        for path in &paths {
            counts.valid_files += 1;
            let file = path.strip_prefix(&root).unwrap().display().to_string();
            for object in documents(&std::fs::read_to_string(path).unwrap()) {
                counts.valid_objects += 1;
                let name = object["metadata"]["name"].as_str().unwrap();
                let path = format!("{}/{name}", collection(&resources, &object));
                let (status, body) = get_json(addr, &path).await;
                if status != 200 {
                    failures.push(format!(
                        "{file}: {path} not stored after apply: {status} {body}"
                    ));
                }
            }
        }
    }

    // Invalid examples: each refused, by kubectl as upstream checks and over HTTP as a Status.
    let invalid = write_tree(&files, "hack/invalid-examples/", &root);
    for path in &invalid {
        let file = path.strip_prefix(&root).unwrap().display().to_string();
        if channel == "standard" && file.contains("experimental") {
            continue;
        }
        counts.invalid_files += 1;
        let out = k.run(&["apply", "-f", &path.to_string_lossy()]).await;
        let printed = format!("{}{}", out.stdout, out.stderr);
        let expected = [
            "is invalid",
            "missing required field",
            "denied request",
            "Invalid value",
        ];
        if out.success() || !expected.iter().any(|e| printed.contains(e)) {
            failures.push(format!(
                "{file}: kubectl apply was not refused as upstream expects: {printed}"
            ));
            continue;
        }
        for object in documents(&std::fs::read_to_string(path).unwrap()) {
            let (status, body) =
                send_json(addr, "POST", &collection(&resources, &object), &object).await;
            if status != 422 || body["kind"] != "Status" || body["reason"] != "Invalid" {
                failures.push(format!("{file}: created over HTTP: {status} {body}"));
                continue;
            }
            // kubectl prints the Status's causes, one `field: message` each.
            let causes = body["details"]["causes"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            if causes.is_empty() {
                failures.push(format!("{file}: a Status without causes: {body}"));
            }
            for cause in causes {
                let field = cause["field"].as_str().unwrap_or_default();
                let message = cause["message"].as_str().unwrap_or_default();
                if !printed.contains(&format!("{field}: {message}")) {
                    failures.push(format!(
                        "{file}: kubectl printed {printed:?}, the Status's cause is {cause}"
                    ));
                }
            }
        }
    }

    let fixture = ("gateway-api/cel-cases.yaml", Matching::GatewayApi);
    cel_cases(
        addr,
        fixture,
        channel,
        &resources,
        &mut counts,
        &mut failures,
    )
    .await;
    if channel == "standard" {
        safe_upgrades(addr, &k, &files, &root, &mut failures).await;
    }

    eprintln!(
        "gateway-api {channel}: {} CRDs; {} valid example files ({} objects) applied; {} invalid \
         examples refused; {} CEL cases ({} refused as expected)",
        counts.crds,
        counts.valid_files,
        counts.valid_objects,
        counts.invalid_files,
        counts.cel_cases,
        counts.cel_refused
    );
    assert!(
        failures.is_empty(),
        "{} divergences from kube-apiserver on Gateway API's {channel} corpus:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Gateway API's safe-upgrades ValidatingAdmissionPolicy (installed with the standard
/// channel): the experimental channel's CRDs of `gateway.networking.k8s.io` may not replace
/// the standard ones (each refused with the policy's message, the stored CRD still of the
/// standard channel); those of other groups (`gateway.networking.x-k8s.io`) install.
async fn safe_upgrades(
    addr: SocketAddr,
    k: &Kubectl,
    files: &BTreeMap<String, String>,
    root: &Path,
    failures: &mut Vec<String>,
) {
    let dir = "config/crd/experimental/";
    let paths = write_tree(files, dir, root);
    let out = k
        .run(&[
            "apply",
            "--server-side",
            "-f",
            &root.join(dir).to_string_lossy(),
        ])
        .await;
    let printed = format!("{}{}", out.stdout, out.stderr);
    if out.success() {
        failures.push(format!(
            "experimental CRDs over standard ones were not refused: {printed}"
        ));
    }
    let policy = "safe-upgrades.gateway.networking.k8s.io";
    for path in &paths {
        for crd in documents(&std::fs::read_to_string(path).unwrap()) {
            if crd["kind"] != "CustomResourceDefinition" {
                continue;
            }
            let name = crd["metadata"]["name"].as_str().unwrap();
            if crd["spec"]["group"] != "gateway.networking.k8s.io" {
                if !printed.contains(&format!("{name} serverside-applied")) {
                    failures.push(format!(
                        "{name}: not installed beside the standard channel: {printed}"
                    ));
                }
                continue;
            }
            let refusal = format!(
                "customresourcedefinitions.apiextensions.k8s.io \"{name}\" is forbidden: \
                 ValidatingAdmissionPolicy '{policy}' with binding '{policy}' denied request: \
                 Installing experimental CRDs on top of standard channel CRDs is prohibited by default."
            );
            if !printed.contains(&refusal) {
                failures.push(format!(
                    "{name}: the experimental CRD was not refused as kube refuses it: {printed}"
                ));
            }
            let crd_path =
                format!("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}");
            let (_, stored) = get_json(addr, &crd_path).await;
            let channel = &stored["metadata"]["annotations"]["gateway.networking.k8s.io/channel"];
            if channel != "standard" {
                failures.push(format!("{name}: the stored CRD's channel is {channel}"));
            }
        }
    }
}

/// Envoy Gateway's CRDs (vendored from envoyproxy/gateway, `fixtures/envoy-gateway/`) beside
/// Gateway API's experimental channel, and its Kubernetes examples (`examples/kubernetes`):
/// the CRDs install with `kubectl apply --server-side`, `kubectl apply --recursive` accepts
/// every example object (in the namespaces its install and guides create first), and each is
/// then stored; the one kind of another project (Prometheus' `PodMonitor`) is what kubectl
/// reports as not found, and nothing else fails; then the ported cases of its CEL tests.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envoy_gateway_examples() {
    let server = common::server().await;
    let addr = server.addr;
    let k = Kubectl::new(addr);
    let gateway_api = corpus("gateway-api");
    let envoy = corpus("envoy-gateway");
    let root = k.dir().join("envoy-gateway");
    let mut crds = Vec::new();
    for (files, dir) in [
        (&gateway_api, "config/crd/experimental/"),
        (&envoy, "charts/gateway-helm/charts/crds/crds/generated/"),
    ] {
        for path in write_tree(files, dir, &root) {
            crds.extend(documents(&std::fs::read_to_string(path).unwrap()));
        }
        k.ok(&[
            "apply",
            "--server-side",
            "-f",
            &root.join(dir).to_string_lossy(),
        ])
        .await;
    }
    let resources = resources(&crds);
    for namespace in [
        "envoy-gateway-system",
        "team-a",
        "team-b",
        "submariner-operator",
    ] {
        k.ok(&["create", "namespace", namespace]).await;
    }
    let dir = "examples/kubernetes/";
    let (paths, out) = apply_tree(&k, &envoy, dir, &root).await;
    let mut failures = Vec::new();
    let mut unserved = Vec::new();
    let mut objects = 0;
    for path in &paths {
        let file = path.strip_prefix(&root).unwrap().display().to_string();
        for object in documents(&std::fs::read_to_string(path).unwrap()) {
            let api_version = object["apiVersion"].as_str().unwrap_or_default();
            let kind = object["kind"].as_str().unwrap_or_default();
            let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
            if !resources.contains_key(&format!("{group}/{kind}")) {
                unserved.push(format!(
                    "no matches for kind \"{kind}\" in version \"{api_version}\""
                ));
                continue;
            }
            objects += 1;
            let name = object["metadata"]["name"].as_str().unwrap();
            let path = format!("{}/{name}", collection(&resources, &object));
            let (status, body) = get_json(addr, &path).await;
            if status != 200 {
                failures.push(format!(
                    "{file}: {path} not stored after apply: {status} {body}"
                ));
            }
        }
    }
    assert_eq!(unserved.len(), 1, "{unserved:?}");
    let mut counts = Counts::default();
    let fixture = ("envoy-gateway/cel-cases.yaml", Matching::FoldCase);
    cel_cases(addr, fixture, "", &resources, &mut counts, &mut failures).await;
    for line in out.stderr.lines() {
        let expected = line.starts_with("Warning: ")
            || line == "ensure CRDs are installed first"
            || (line
                .trim_start_matches("error: ")
                .starts_with("resource mapping not found")
                && unserved.iter().any(|u| line.ends_with(u.as_str())));
        if !expected {
            failures.push(format!("kubectl apply: {line}"));
        }
    }
    eprintln!(
        "envoy-gateway: {} CRDs; {} example files, {objects} objects applied; {} CEL cases ({} \
         refused as expected)",
        crds.iter()
            .filter(|d| d["kind"] == "CustomResourceDefinition")
            .count(),
        paths.len(),
        counts.cel_cases,
        counts.cel_refused
    );
    assert!(
        failures.is_empty(),
        "{} divergences on Envoy Gateway's examples:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// How a project's CEL tests compare a refusal's message with what they expect.
#[derive(Clone, Copy)]
enum Matching {
    /// Gateway API's `celErrorStringMatches`: `message` contains `want`, or `want` with
    /// `more` read as `longer` (some CEL messages changed so in kube 1.32).
    GatewayApi,
    /// Envoy Gateway's: `message` contains `want`, both lowercased.
    FoldCase,
}

fn matches(matching: Matching, message: &str, want: &str) -> bool {
    match matching {
        Matching::GatewayApi => {
            message.contains(want) || message.contains(&want.replace("more", "longer"))
        }
        Matching::FoldCase => message.to_lowercase().contains(&want.to_lowercase()),
    }
}

/// The ported CEL cases of `fixture` (`fixtures/<project>/cel-cases.yaml`) for `channel`
/// (see the module docs).
async fn cel_cases(
    addr: SocketAddr,
    (fixture, matching): (&str, Matching),
    channel: &str,
    resources: &BTreeMap<String, Resource>,
    counts: &mut Counts,
    failures: &mut Vec<String>,
) {
    let text = std::fs::read_to_string(format!("{FIXTURES}/{fixture}")).unwrap();
    let cases = documents(&text);
    assert!(!cases.is_empty(), "no CEL cases");
    for (index, case) in cases.iter().enumerate() {
        let name = case["name"].as_str().unwrap_or("?");
        if let Some(channels) = case["channels"].as_array()
            && !channels.iter().any(|c| c == channel)
        {
            continue;
        }
        counts.cel_cases += 1;
        let mut object = case["create"].clone();
        // The test's own name where the expectation quotes it, else one of the case's own.
        if object["metadata"]["name"].is_null() {
            object["metadata"]["name"] = Value::from(format!("case-{index}"));
        }
        let object_name = object["metadata"]["name"].as_str().unwrap().to_owned();
        let path = collection(resources, &object);
        let (mut status, mut body) = send_json(addr, "POST", &path, &object).await;
        for (step, subresource) in [("update", ""), ("updateStatus", "/status")] {
            let Some(change) = case.get(step) else {
                continue;
            };
            if status != 201 {
                failures.push(format!(
                    "{name}: the create before {step} failed: {status} {body}"
                ));
                break;
            }
            let mut updated = body.clone();
            for (field, value) in change.as_object().unwrap() {
                updated[field] = value.clone();
            }
            let target = format!("{path}/{object_name}{subresource}");
            (status, body) = send_json(addr, "PUT", &target, &updated).await;
        }
        let wants: Vec<&str> = case["wantErrors"]
            .as_array()
            .map(|w| w.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if wants.is_empty() {
            if status != 200 && status != 201 {
                failures.push(format!("{name}: refused, kube accepts it: {status} {body}"));
            }
            continue;
        }
        let message = body["message"].as_str().unwrap_or_default();
        if status != 422 || body["kind"] != "Status" || body["reason"] != "Invalid" {
            failures.push(format!("{name}: accepted or not a 422 Invalid Status, kube refuses it with {wants:?}: {status} {body}"));
            continue;
        }
        counts.cel_refused += 1;
        let missing: Vec<&&str> = wants
            .iter()
            .filter(|w| !matches(matching, message, w))
            .collect();
        if !missing.is_empty() {
            failures.push(format!("{name}: the message lacks {missing:?}: {message}"));
        }
    }
}

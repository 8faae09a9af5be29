//! The aggregator's APIServices over HTTP (`controllers::apiservices`): those registered for
//! the served group/versions and for CRDs, their `Available` condition, how a restart syncs
//! them, and the kind's own rules (validation, status strategy, defaults). Every wait is on a
//! watch event, never on time.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;

use serde_json::{Value, json};
use watchkeeper::config::ServeArgs;

use common::{
    WatchReader, created, get_json, invalid_message, merge_patch, request, request_with_headers,
    restarted, send_json, server, server_with, written,
};

const APISERVICES: &str = "/apis/apiregistration.k8s.io/v1/apiservices";
const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const MANAGED: &str = "kube-aggregator.kubernetes.io/automanaged";

/// `kubectl get apiservices` of kube-apiserver 1.33 with its default group/versions.
const KUBE_S: [&str; 20] = [
    "v1.",
    "v1.admissionregistration.k8s.io",
    "v1.apiextensions.k8s.io",
    "v1.apps",
    "v1.authentication.k8s.io",
    "v1.authorization.k8s.io",
    "v1.autoscaling",
    "v1.batch",
    "v1.certificates.k8s.io",
    "v1.coordination.k8s.io",
    "v1.discovery.k8s.io",
    "v1.events.k8s.io",
    "v1.flowcontrol.apiserver.k8s.io",
    "v1.networking.k8s.io",
    "v1.node.k8s.io",
    "v1.policy",
    "v1.rbac.authorization.k8s.io",
    "v1.scheduling.k8s.io",
    "v1.storage.k8s.io",
    "v2.autoscaling",
];

/// The APIServices as a watch tells them, from the list on.
struct ApiServices {
    watch: WatchReader,
    current: BTreeMap<String, Value>,
}

impl ApiServices {
    async fn watch(addr: SocketAddr) -> ApiServices {
        let (status, list) = get_json(addr, APISERVICES).await;
        assert_eq!(status, 200, "{list}");
        let current = list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| {
                (
                    i["metadata"]["name"].as_str().unwrap().to_owned(),
                    i.clone(),
                )
            })
            .collect();
        let rv = list["metadata"]["resourceVersion"].as_str().unwrap();
        let watch = WatchReader::open(
            addr,
            &format!("{APISERVICES}?watch=1&resourceVersion={rv}"),
            None,
        )
        .await;
        ApiServices { watch, current }
    }

    /// Reads events until `done` holds of the APIServices.
    async fn until(&mut self, mut done: impl FnMut(&BTreeMap<String, Value>) -> bool) {
        while !done(&self.current) {
            let event = self.watch.next().await.expect("the watch goes on");
            let name = event["object"]["metadata"]["name"]
                .as_str()
                .unwrap()
                .to_owned();
            if event["type"] == "DELETED" {
                self.current.remove(&name);
            } else {
                self.current.insert(name, event["object"].clone());
            }
        }
    }
}

/// The `Available` condition's status and reason of `apiservice`, if it has one.
fn available(apiservice: &Value) -> Option<(String, String)> {
    let condition = apiservice["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Available")?;
    Some((
        condition["status"].as_str()?.to_owned(),
        condition["reason"].as_str()?.to_owned(),
    ))
}

fn locally_available(all: &BTreeMap<String, Value>, name: &str) -> bool {
    all.get(name).and_then(available) == Some(("True".to_owned(), "Local".to_owned()))
}

/// Goal: a server over a store lists the APIServices kube-apiserver registers for its
/// group/versions (`kubectl get apiservices`), with kube's specs, labels and `Local`
/// availability, and discovery orders the groups by them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_served_group_versions_are_registered_and_locally_available() {
    let server = server().await;
    let addr = server.addr;
    let mut apiservices = ApiServices::watch(addr).await;
    apiservices
        .until(|all| KUBE_S.iter().all(|name| locally_available(all, name)))
        .await;
    let names: Vec<&str> = apiservices.current.keys().map(String::as_str).collect();
    assert_eq!(names, KUBE_S, "no more, no less than kube's");
    let (status, apps) = get_json(addr, &format!("{APISERVICES}/v1.apps")).await;
    assert_eq!(status, 200, "{apps}");
    assert_eq!(apps["metadata"]["labels"], json!({MANAGED: "onstart"}));
    assert_eq!(
        apps["spec"],
        json!({"group": "apps", "version": "v1", "groupPriorityMinimum": 17800,
            "versionPriority": 15})
    );
    let condition = &apps["status"]["conditions"][0];
    assert_eq!(
        condition["message"],
        "Local APIServices are always available"
    );
    let (_, core) = get_json(addr, &format!("{APISERVICES}/v1.")).await;
    assert!(
        core["spec"].get("group").is_none(),
        "Go's omitempty: {core}"
    );
    assert_eq!(core["spec"]["groupPriorityMinimum"], 18000);
    // `kubectl get apiservices`' columns.
    let (status, table) = request(
        addr,
        "GET",
        &format!("{APISERVICES}/v2.autoscaling"),
        "application/json",
        "",
    )
    .await;
    assert_eq!(status, 200, "{table}");
    server.shutdown().await;
}

fn gadgets(versions: &[(&str, bool)]) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .enumerate()
        .map(|(i, (name, served))| {
            json!({"name": name, "served": served, "storage": i == 0,
                "schema": {"openAPIV3Schema": {"type": "object"}}})
        })
        .collect();
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.example.org"},
        "spec": {"group": "example.org", "scope": "Namespaced",
            "names": {"plural": "gadgets", "kind": "Gadget"}, "versions": versions}})
}

/// Goal: each version a CRD serves has its APIService (kube's `crdRegistrationController`)
/// while it is served, and it goes with the version or the CRD.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crd_s_served_versions_have_apiservices_while_served() {
    let server = server().await;
    let addr = server.addr;
    let mut apiservices = ApiServices::watch(addr).await;
    created(
        addr,
        CRDS,
        &gadgets(&[("v1", true), ("v2beta1", true), ("v0", false)]),
    )
    .await;
    apiservices
        .until(|all| {
            locally_available(all, "v1.example.org")
                && locally_available(all, "v2beta1.example.org")
        })
        .await;
    let v1 = &apiservices.current["v1.example.org"];
    assert_eq!(v1["metadata"]["labels"], json!({MANAGED: "true"}));
    assert_eq!(
        v1["spec"],
        json!({"group": "example.org", "version": "v1", "groupPriorityMinimum": 1000,
            "versionPriority": 100})
    );
    assert!(!apiservices.current.contains_key("v0.example.org"));
    // A client's change of a CRD's APIService is set back.
    merge_patch(
        addr,
        &format!("{APISERVICES}/v1.example.org"),
        r#"{"spec":{"versionPriority":7}}"#,
    )
    .await;
    apiservices
        .until(|all| all["v1.example.org"]["spec"]["versionPriority"] == 100)
        .await;
    // A version no longer served loses its APIService; the CRD's deletion, the rest.
    let crd = format!("{CRDS}/gadgets.example.org");
    written(addr, "PUT", &crd, &{
        let (_, mut stored) = get_json(addr, &crd).await;
        stored["spec"]["versions"][1]["served"] = json!(false);
        stored
    })
    .await;
    apiservices
        .until(|all| !all.contains_key("v2beta1.example.org"))
        .await;
    assert!(apiservices.current.contains_key("v1.example.org"));
    let (status, body) = send_json(addr, "DELETE", &crd, &json!({})).await;
    assert_eq!(status, 200, "{body}");
    apiservices
        .until(|all| !all.contains_key("v1.example.org"))
        .await;
    server.shutdown().await;
}

/// Goal: an APIService naming a Service gets kube's availability checks in kube's order and
/// words, re-checked as the Service and its EndpointSlices come; past them, it is not
/// available, since this server proxies to no aggregated API server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_apiservice_naming_a_service_is_checked_as_kube_checks_it() {
    let server = server().await;
    let addr = server.addr;
    let mut apiservices = ApiServices::watch(addr).await;
    let reason_is = |reason: &'static str| {
        move |all: &BTreeMap<String, Value>| {
            all.get("v1beta1.metrics.k8s.io")
                .and_then(available)
                .is_some_and(|(status, r)| status == "False" && r == reason)
        }
    };
    let stored = written(
        addr,
        "POST",
        APISERVICES,
        &json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": "v1beta1.metrics.k8s.io"},
            "spec": {"group": "metrics.k8s.io", "version": "v1beta1",
                "groupPriorityMinimum": 100, "versionPriority": 100,
                "insecureSkipTLSVerify": true,
                "service": {"namespace": "kube-system", "name": "metrics-server"}}}),
    )
    .await;
    assert_eq!(
        stored["spec"]["service"]["port"], 443,
        "kube's default port"
    );
    apiservices.until(reason_is("ServiceNotFound")).await;
    let message = |all: &BTreeMap<String, Value>| {
        all["v1beta1.metrics.k8s.io"]["status"]["conditions"][0]["message"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(
        message(&apiservices.current),
        "service/metrics-server in \"kube-system\" is not present"
    );
    let first_transition = apiservices.current["v1beta1.metrics.k8s.io"]["status"]["conditions"][0]
        ["lastTransitionTime"]
        .clone();
    created(
        addr,
        "/api/v1/namespaces/kube-system/services",
        &json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "metrics-server"},
            "spec": {"ports": [{"name": "https", "port": 443, "targetPort": 4443}]}}),
    )
    .await;
    apiservices.until(reason_is("EndpointsNotFound")).await;
    assert_eq!(
        message(&apiservices.current),
        "cannot find endpointslices for service/metrics-server in \"kube-system\""
    );
    let slices = "/apis/discovery.k8s.io/v1/namespaces/kube-system/endpointslices";
    let slice = |port: &str| {
        json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": format!("metrics-server-{port}"),
                "labels": {"kubernetes.io/service-name": "metrics-server"}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["10.0.0.5"], "conditions": {"ready": true}}],
            "ports": [{"name": port, "port": 4443}]})
    };
    created(addr, slices, &slice("http")).await;
    apiservices.until(reason_is("MissingEndpoints")).await;
    assert_eq!(
        message(&apiservices.current),
        "endpointslices for service/metrics-server in \"kube-system\" have no addresses with port name \"https\""
    );
    created(addr, slices, &slice("https")).await;
    apiservices.until(reason_is("FailedDiscoveryCheck")).await;
    let (_, service) = get_json(
        addr,
        "/api/v1/namespaces/kube-system/services/metrics-server",
    )
    .await;
    let ip = service["spec"]["clusterIP"].as_str().unwrap();
    assert_eq!(
        message(&apiservices.current),
        format!(
            "failing or missing response from https://{ip}:443/apis/metrics.k8s.io/v1beta1: this server does not proxy to aggregated API servers"
        )
    );
    assert_eq!(
        apiservices.current["v1beta1.metrics.k8s.io"]["status"]["conditions"][0]["lastTransitionTime"],
        first_transition,
        "the status stayed False: the transition time stays"
    );
    // No controller label: the registration leaves it alone.
    assert!(
        apiservices.current["v1beta1.metrics.k8s.io"]["metadata"]
            .get("labels")
            .is_none()
    );
    server.shutdown().await;
}

/// GET `path` as raw HTTP: the status, the head (lowercased) and the body.
async fn raw_get(addr: SocketAddr, method: &str, path: &str) -> watchkeeper_testkit::raw::Answer {
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n"
    );
    let mut stream = watchkeeper_testkit::raw::send(addr, &head, b"{}")
        .await
        .expect("send");
    watchkeeper_testkit::raw::read_answer(&mut stream).await
}

/// Goal: a group/version an APIService hands to a Service, which this server does not serve,
/// is listed by discovery as kube's aggregator lists it (`/apis` in its priority's place,
/// `/apis/{group}`), and every path under it — its resource list, a resource, a write —
/// answers kube-aggregator's 503 `service unavailable` in plain text, not 404; the same for a
/// remote version of a group the server serves, whose own version stays its own; deleting the
/// APIService takes it away again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_version_handed_to_a_service_is_listed_and_answers_503() {
    let server = server().await;
    let addr = server.addr;
    let api_service = |group: &str, version: &str, group_priority: i64, version_priority: i64| {
        json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": format!("{version}.{group}")},
            "spec": {"group": group, "version": version,
                "groupPriorityMinimum": group_priority, "versionPriority": version_priority,
                "insecureSkipTLSVerify": true,
                "service": {"namespace": "kube-system", "name": "metrics-server"}}})
    };
    created(
        addr,
        APISERVICES,
        &api_service("metrics.k8s.io", "v1beta1", 100, 100),
    )
    .await;
    created(addr, APISERVICES, &api_service("batch", "v9", 17400, 1)).await;

    let (status, groups) = get_json(addr, "/apis").await;
    assert_eq!(status, 200);
    let groups = groups["groups"].as_array().unwrap();
    let last = groups.last().unwrap();
    assert_eq!(
        last["name"], "metrics.k8s.io",
        "the lowest priority is last"
    );
    assert_eq!(
        last["preferredVersion"]["groupVersion"],
        "metrics.k8s.io/v1beta1"
    );
    let batch = groups.iter().find(|g| g["name"] == "batch").unwrap();
    let versions: Vec<&str> = batch["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["version"].as_str().unwrap())
        .collect();
    assert_eq!(
        versions,
        ["v1", "v9"],
        "the served version's priority is higher"
    );
    assert_eq!(batch["preferredVersion"]["version"], "v1");
    let (status, group) = get_json(addr, "/apis/metrics.k8s.io").await;
    assert_eq!(
        (status, &group["kind"]),
        (200, &json!("APIGroup")),
        "{group}"
    );
    // The aggregated document: stale, without resources, as kube lists an APIService whose
    // Service's discovery it could not read.
    let aggregated = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
    let (status, body) =
        request_with_headers(addr, "GET", "/apis", &[("Accept", aggregated)], "").await;
    assert_eq!(status, 200);
    let items: Value = serde_json::from_str(&body).unwrap();
    let items = items["items"].as_array().unwrap();
    assert_eq!(
        items.last().unwrap(),
        &json!({"metadata": {"name": "metrics.k8s.io", "creationTimestamp": null},
            "versions": [{"version": "v1beta1", "freshness": "Stale"}]})
    );
    let batch = items
        .iter()
        .find(|g| g["metadata"]["name"] == "batch")
        .unwrap();
    assert_eq!(batch["versions"][0]["freshness"], "Current");
    assert_eq!(
        batch["versions"][1],
        json!({"version": "v9", "freshness": "Stale"})
    );

    for (method, path) in [
        ("GET", "/apis/metrics.k8s.io/v1beta1"),
        ("GET", "/apis/metrics.k8s.io/v1beta1/nodes"),
        (
            "GET",
            "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/web",
        ),
        (
            "POST",
            "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods",
        ),
        ("GET", "/apis/batch/v9/jobs"),
    ] {
        let answer = raw_get(addr, method, path).await;
        assert_eq!(answer.status, 503, "{method} {path}: {answer:?}");
        assert!(
            answer
                .head
                .contains("content-type: text/plain; charset=utf-8"),
            "{answer:?}"
        );
        assert!(answer.body.contains("service unavailable\n"), "{answer:?}");
    }
    assert_eq!(get_json(addr, "/apis/batch/v1/jobs").await.0, 200);
    assert_eq!(
        get_json(addr, "/apis/other.example.com/v1/things").await.0,
        404
    );

    let (status, _) = send_json(
        addr,
        "DELETE",
        &format!("{APISERVICES}/v1beta1.metrics.k8s.io"),
        &json!({}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        get_json(addr, "/apis/metrics.k8s.io/v1beta1/nodes").await.0,
        404
    );
    assert_eq!(get_json(addr, "/apis/metrics.k8s.io").await.0, 404);
    let (_, groups) = get_json(addr, "/apis").await;
    assert!(
        !groups["groups"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["name"] == "metrics.k8s.io")
    );
    server.shutdown().await;
}

/// Goal: as kube's, the APIServices registered at start are synced once after each start: one
/// a client deleted is back after a restart, one whose spec a client changed has it set back,
/// one a client took over (its label removed) stays as the client left it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apiservices_of_the_start_are_synced_once_per_start() {
    let dir = tempfile::tempdir().unwrap();
    let args = ServeArgs {
        store: Some("embedded".into()),
        data_dir: Some(dir.path().to_owned()),
        ..ServeArgs::default()
    };
    let server = server_with(args.clone()).await;
    let addr = server.addr;
    let mut apiservices = ApiServices::watch(addr).await;
    apiservices
        .until(|all| KUBE_S.iter().all(|name| locally_available(all, name)))
        .await;
    let (status, body) = send_json(
        addr,
        "DELETE",
        &format!("{APISERVICES}/v1.apps"),
        &json!({}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    merge_patch(
        addr,
        &format!("{APISERVICES}/v1.policy"),
        r#"{"spec":{"versionPriority":3}}"#,
    )
    .await;
    created(addr, CRDS, &gadgets(&[("v1", true)])).await;
    apiservices
        .until(|all| locally_available(all, "v1.example.org"))
        .await;
    let crd_s = apiservices.current["v1.example.org"]["metadata"]["uid"].clone();
    merge_patch(
        addr,
        &format!("{APISERVICES}/v1.batch"),
        &format!(
            r#"{{"metadata":{{"labels":{{"{MANAGED}":null}}}},"spec":{{"versionPriority":4}}}}"#
        ),
    )
    .await;
    server.shutdown().await;

    let server = restarted(args).await;
    let addr = server.addr;
    let mut apiservices = ApiServices::watch(addr).await;
    apiservices
        .until(|all| {
            locally_available(all, "v1.apps") && all["v1.policy"]["spec"]["versionPriority"] == 15
        })
        .await;
    let (_, batch) = get_json(addr, &format!("{APISERVICES}/v1.batch")).await;
    assert_eq!(batch["spec"]["versionPriority"], 4, "{batch}");
    assert!(batch["metadata"].get("labels").is_none(), "{batch}");
    // A restart keeps a CRD's APIService: once a new CRD's is there (the controller has read
    // the CRDs), the stored CRD's is still the one made before the restart.
    let mut things = gadgets(&[("v1", true)]);
    things["metadata"]["name"] = json!("things.example.net");
    things["spec"]["group"] = json!("example.net");
    things["spec"]["names"] = json!({"plural": "things", "kind": "Thing"});
    created(addr, CRDS, &things).await;
    apiservices
        .until(|all| locally_available(all, "v1.example.net"))
        .await;
    assert_eq!(
        apiservices.current["v1.example.org"]["metadata"]["uid"], crd_s,
        "deleted and made again at the start"
    );
    let names: BTreeSet<&String> = apiservices.current.keys().collect();
    assert_eq!(names.len(), KUBE_S.len() + 2);
    server.shutdown().await;
}

fn local(name: &str, group: &str, version: &str) -> Value {
    json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": name},
        "spec": {"group": group, "version": version, "groupPriorityMinimum": 100,
            "versionPriority": 10}})
}

/// Goal: APIService writes are validated in kube-aggregator's words, created without the
/// status a client sends, and `/status` writes change the status only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apiservice_writes_follow_kube_aggregator_s_strategy() {
    let server = server().await;
    let addr = server.addr;
    let mut wrong = local("v1.foo.io", "bar.io", "v1");
    wrong["spec"]["groupPriorityMinimum"] = json!(0);
    wrong["spec"]["versionPriority"] = json!(1001);
    wrong["spec"]["caBundle"] = json!("AAECAw==");
    assert_eq!(
        invalid_message(addr, "POST", APISERVICES, &wrong).await,
        "APIService.apiregistration.k8s.io \"v1.foo.io\" is invalid: [metadata.name: Invalid value: \"v1.foo.io\": must be `spec.version+\".\"+spec.group`: \"v1.bar.io\", spec.groupPriorityMinimum: Invalid value: 0: must be positive and less than 20000, spec.versionPriority: Invalid value: 1001: must be positive and less than 1000, spec.caBundle: Invalid value: \"4 bytes\": local APIServices may not have a caBundle]"
    );
    let mut legacy = local("v2.", "", "v2");
    legacy["spec"]["service"] = json!({"namespace": "", "name": "x", "port": 70000});
    assert_eq!(
        invalid_message(addr, "POST", APISERVICES, &legacy).await,
        "APIService.apiregistration.k8s.io \"v2.\" is invalid: [spec.group: Required value: only v1 may have an empty group and it better be legacy kube, spec.service.namespace: Required value, spec.service.port: Invalid value: 70000: port is not valid: must be between 1 and 65535, inclusive]"
    );
    let mut sent = local("v1.foo.io", "foo.io", "v1");
    sent["status"] = json!({"conditions": [{"type": "Available", "status": "False",
        "reason": "Mine", "message": "m", "lastTransitionTime": "2020-01-01T00:00:00Z"}]});
    let stored = written(addr, "POST", APISERVICES, &sent).await;
    assert_eq!(
        stored["status"],
        json!({}),
        "created without the status sent"
    );
    // Through /status: the status changes, the labels and spec do not. (Patches: the
    // controller writes the condition meanwhile.)
    let status_path = format!("{APISERVICES}/v1.foo.io/status");
    let condition = |status: &str| {
        json!({"conditions": [{"type": "Available", "status": status, "reason": "Mine",
            "message": "m", "lastTransitionTime": "2020-01-01T00:00:00Z"}]})
    };
    let patch = |status: &str| {
        json!({"metadata": {"labels": {"mine": "yes"}}, "spec": {"versionPriority": 20},
            "status": condition(status)})
        .to_string()
    };
    let (code, body) = request(
        addr,
        "PATCH",
        &status_path,
        "application/merge-patch+json",
        &patch("Maybe"),
    )
    .await;
    assert_eq!(code, 422, "{body}");
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        body["message"],
        "APIService.apiregistration.k8s.io \"v1.foo.io\" is invalid: status.conditions[0].status: Unsupported value: \"Maybe\": supported values: \"True\", \"False\", \"Unknown\""
    );
    let after = merge_patch(addr, &status_path, &patch("Unknown")).await;
    assert_eq!(after["status"], condition("Unknown"), "{after}");
    assert!(after["metadata"].get("labels").is_none(), "{after}");
    assert_eq!(after["spec"]["versionPriority"], 10, "{after}");
    // Through the main endpoint: the status stays as stored.
    let after = merge_patch(
        addr,
        &format!("{APISERVICES}/v1.foo.io"),
        &json!({"spec": {"versionPriority": 20}, "status": {"conditions": null}}).to_string(),
    )
    .await;
    assert_eq!(after["spec"]["versionPriority"], 20, "{after}");
    assert!(
        after["status"]["conditions"]
            .as_array()
            .is_some_and(|c| c.len() == 1),
        "{after}"
    );
    server.shutdown().await;
}

//! Writes as kube-apiserver does them, over HTTP against an in-process server: `dryRun=All`
//! on every write (the full path runs, nothing is stored or watched) and kube-apiserver's 422
//! for other `dryRun` values; server-side apply (JSON and YAML bodies) and the managed fields
//! of every write (at most 10 Update managers); the `binding` and `eviction` subresources of
//! pods; fields a kind does not declare and fields given twice, dropped and warned about or
//! refused as `fieldValidation` says, in bodies, patches, apply bodies and custom resources.

use crate::common;

use serde_json::{Value, json};

use common::{WatchReader, get_json, patch, request, send_json, write_warned, written};

const CMS: &str = "/api/v1/namespaces/default/configmaps";

fn rv(object: &Value) -> String {
    object["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

async fn list_rv(addr: std::net::SocketAddr) -> String {
    let (status, list) = get_json(addr, CMS).await;
    assert_eq!(status, 200, "{list}");
    rv(&list)
}

/// Every write with `dryRun=All` answers what it would have done, and the store, the caches
/// and an open watch see nothing of it; the real write after them is the next event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_writes_store_nothing() {
    let server = common::server().await;
    let addr = server.addr;
    let (status, kept) = send_json(
        addr,
        "POST",
        CMS,
        &json!({"metadata": {"name": "kept"}, "data": {"a": "1"}}),
    )
    .await;
    assert_eq!(status, 201, "{kept}");
    let before = list_rv(addr).await;
    let mut watch = WatchReader::open(
        addr,
        &format!("{CMS}?watch=1&resourceVersion={before}"),
        None,
    )
    .await;

    // Create: the object as it would be stored (uid, creationTimestamp), no resource version.
    let (status, created) = send_json(
        addr,
        "POST",
        &format!("{CMS}?dryRun=All"),
        &json!({"metadata": {"name": "dry"}, "data": {"a": "1"}}),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["metadata"]["name"], "dry");
    assert!(created["metadata"]["uid"].is_string(), "{created}");
    assert!(
        created["metadata"]["creationTimestamp"].is_string(),
        "{created}"
    );
    assert!(
        created["metadata"].get("resourceVersion").is_none(),
        "{created}"
    );
    assert_eq!(get_json(addr, &format!("{CMS}/dry")).await.0, 404);

    // A dry-run create runs the checks: a taken name is 409, a bad name 422, a bad type 400.
    let (status, taken) = send_json(
        addr,
        "POST",
        &format!("{CMS}?dryRun=All"),
        &json!({"metadata": {"name": "kept"}}),
    )
    .await;
    assert_eq!(
        (status, taken["reason"].as_str()),
        (409, Some("AlreadyExists")),
        "{taken}"
    );
    let (status, bad) = send_json(
        addr,
        "POST",
        &format!("{CMS}?dryRun=All"),
        &json!({"metadata": {"name": "Not_A_Name"}}),
    )
    .await;
    assert_eq!(status, 422, "{bad}");
    let (status, bad) = send_json(
        addr,
        "POST",
        &format!("{CMS}?dryRun=All"),
        &json!({"metadata": {"name": "typed"}, "data": {"a": 1}}),
    )
    .await;
    assert_eq!(status, 400, "{bad}");
    let (status, missing) = send_json(
        addr,
        "POST",
        "/api/v1/namespaces/nowhere/configmaps?dryRun=All",
        &json!({"metadata": {"name": "x"}}),
    )
    .await;
    assert_eq!(status, 404, "{missing}");

    // Update: the new object at the current resource version; a stale precondition is 409.
    let (status, updated) = send_json(
        addr,
        "PUT",
        &format!("{CMS}/kept?dryRun=All"),
        &json!({"metadata": {"name": "kept", "resourceVersion": rv(&kept)}, "data": {"a": "2"}}),
    )
    .await;
    assert_eq!(status, 200, "{updated}");
    assert_eq!(updated["data"]["a"], "2");
    assert_eq!(rv(&updated), rv(&kept));
    let (status, stale) = send_json(
        addr,
        "PUT",
        &format!("{CMS}/kept?dryRun=All"),
        &json!({"metadata": {"name": "kept", "resourceVersion": "1"}, "data": {"a": "2"}}),
    )
    .await;
    assert_eq!(
        (status, stale["reason"].as_str()),
        (409, Some("Conflict")),
        "{stale}"
    );

    // Patches of the three types; a patch whose result does not decode is still 422.
    let path = format!("{CMS}/kept?dryRun=All");
    for (content_type, body, key) in [
        ("application/merge-patch+json", r#"{"data":{"m":"1"}}"#, "m"),
        (
            "application/strategic-merge-patch+json",
            r#"{"data":{"s":"1"}}"#,
            "s",
        ),
        (
            "application/json-patch+json",
            r#"[{"op":"add","path":"/data/j","value":"1"}]"#,
            "j",
        ),
    ] {
        let (status, patched) = patch(addr, &path, content_type, body).await;
        assert_eq!(status, 200, "{content_type}: {patched}");
        assert_eq!(patched["data"][key], "1", "{content_type}: {patched}");
        assert_eq!(patched["data"]["a"], "1", "{content_type}: {patched}");
    }
    let (status, invalid) = patch(
        addr,
        &path,
        "application/merge-patch+json",
        r#"{"data":{"k":7}}"#,
    )
    .await;
    assert_eq!(status, 422, "{invalid}");

    // Delete (query or body) and deletecollection: answered, nothing deleted.
    let (status, deleted) = request(addr, "DELETE", &path, "application/json", "").await;
    assert_eq!(status, 200, "{deleted}");
    let (status, deleted) = request(
        addr,
        "DELETE",
        &format!("{CMS}/kept"),
        "application/json",
        r#"{"kind":"DeleteOptions","apiVersion":"v1","dryRun":["All"]}"#,
    )
    .await;
    assert_eq!(status, 200, "{deleted}");
    let (status, collection) = request(
        addr,
        "DELETE",
        &format!("{CMS}?dryRun=All"),
        "application/json",
        "",
    )
    .await;
    assert_eq!(status, 200, "{collection}");
    let (status, missing) = request(
        addr,
        "DELETE",
        &format!("{CMS}/never?dryRun=All"),
        "application/json",
        "",
    )
    .await;
    assert_eq!(status, 404, "{missing}");

    // Nothing changed: the object, the list's revision.
    let (status, now) = get_json(addr, &format!("{CMS}/kept")).await;
    assert_eq!(status, 200);
    assert_eq!(now, kept);
    assert_eq!(list_rv(addr).await, before);

    // The watch's next event is the real write after all of them.
    let (status, real) = send_json(addr, "POST", CMS, &json!({"metadata": {"name": "real"}})).await;
    assert_eq!(status, 201, "{real}");
    let event = watch.next().await.expect("an event");
    assert_eq!(event["type"], "ADDED", "{event}");
    assert_eq!(event["object"]["metadata"]["name"], "real", "{event}");
    server.shutdown().await;
}

/// `dryRun` values other than `All` are kube-apiserver's 422 on the write's options kind, and
/// nothing is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_dry_run_values_are_invalid() {
    let server = common::server().await;
    let addr = server.addr;
    let (status, error) = send_json(
        addr,
        "POST",
        &format!("{CMS}?dryRun=Server"),
        &json!({"metadata": {"name": "x"}}),
    )
    .await;
    assert_eq!(status, 422, "{error}");
    assert_eq!(
        error["message"],
        r#"CreateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: []string{"Server"}: supported values: "All""#
    );
    assert_eq!(error["reason"], "Invalid");
    assert_eq!(error["details"]["causes"][0]["field"], "dryRun");
    assert_eq!(get_json(addr, &format!("{CMS}/x")).await.0, 404);
    for (method, kind, content_type) in [
        ("PUT", "UpdateOptions", "application/json"),
        ("PATCH", "PatchOptions", "application/merge-patch+json"),
        ("DELETE", "DeleteOptions", "application/json"),
    ] {
        let (status, body) = request(
            addr,
            method,
            &format!("{CMS}/x?dryRun=true"),
            content_type,
            "{}",
        )
        .await;
        assert_eq!(status, 422, "{method}: {body}");
        assert!(
            body.contains(&format!("{kind}.meta.k8s.io")),
            "{method}: {body}"
        );
    }
    server.shutdown().await;
}

const APPLY: &str = "application/apply-patch+yaml";

fn entries(object: &Value) -> Vec<(String, String)> {
    object["metadata"]["managedFields"]
        .as_array()
        .map(|entries| {
            entries
                .iter()
                .map(|e| {
                    (
                        e["manager"].as_str().unwrap_or_default().to_owned(),
                        e["operation"].as_str().unwrap_or_default().to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn fields_of<'a>(object: &'a Value, manager: &str) -> &'a Value {
    object["metadata"]["managedFields"]
        .as_array()
        .and_then(|entries| entries.iter().find(|e| e["manager"] == manager))
        .map_or(&Value::Null, |e| &e["fieldsV1"])
}

/// Server-side apply over HTTP: create, idempotence, conflicts (409, nothing stored), force,
/// removal of fields no longer applied, Update entries of other writes, dry run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_apply() {
    let server = common::server().await;
    let addr = server.addr;
    let path = |query: &str| format!("{CMS}/applied?{query}");
    let config = |data: Value| {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "applied"}, "data": data})
            .to_string()
    };

    // fieldManager is required; force is only for apply.
    let (status, error) = patch(addr, &path(""), APPLY, &config(json!({"a": "1"}))).await;
    assert_eq!(status, 422, "{error}");
    assert_eq!(
        error["message"],
        r#"PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch"#
    );

    // A dry-run apply creates nothing.
    let (status, dry) = patch(
        addr,
        &path("fieldManager=alice&dryRun=All"),
        APPLY,
        &config(json!({"a": "1"})),
    )
    .await;
    assert_eq!(status, 201, "{dry}");
    assert_eq!(get_json(addr, &format!("{CMS}/applied")).await.0, 404);

    // Apply creates (201) with an Apply entry owning exactly the configuration.
    let (status, created) = patch(
        addr,
        &path("fieldManager=alice"),
        APPLY,
        &config(json!({"a": "1", "b": "1"})),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(
        entries(&created),
        [("alice".to_owned(), "Apply".to_owned())]
    );
    assert_eq!(
        fields_of(&created, "alice"),
        &json!({"f:data": {"f:a": {}, "f:b": {}}})
    );
    let entry = &created["metadata"]["managedFields"][0];
    assert_eq!(entry["apiVersion"], "v1");
    assert_eq!(entry["fieldsType"], "FieldsV1");
    assert!(entry["time"].is_string(), "{entry}");
    let (_, stored) = get_json(addr, &format!("{CMS}/applied")).await;
    assert_eq!(stored, created);

    // The same configuration again writes nothing.
    let (status, again) = patch(
        addr,
        &path("fieldManager=alice"),
        APPLY,
        &config(json!({"a": "1", "b": "1"})),
    )
    .await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(rv(&again), rv(&created));

    // Another manager changing alice's field: 409 in kube-apiserver's words, nothing stored.
    let (status, conflict) = patch(
        addr,
        &path("fieldManager=bob"),
        APPLY,
        &config(json!({"a": "2", "c": "3"})),
    )
    .await;
    assert_eq!(status, 409, "{conflict}");
    assert_eq!(
        conflict["message"],
        r#"Apply failed with 1 conflict: conflict with "alice": .data.a"#
    );
    assert_eq!(conflict["reason"], "Conflict");
    assert_eq!(
        conflict["details"]["causes"],
        json!([{"reason": "FieldManagerConflict", "message": "conflict with \"alice\"", "field": ".data.a"}])
    );
    assert_eq!(get_json(addr, &format!("{CMS}/applied")).await.1, created);

    // force=true takes the field.
    let (status, forced) = patch(
        addr,
        &path("fieldManager=bob&force=true"),
        APPLY,
        &config(json!({"a": "2", "c": "3"})),
    )
    .await;
    assert_eq!(status, 200, "{forced}");
    assert_eq!(forced["data"], json!({"a": "2", "b": "1", "c": "3"}));
    assert_eq!(fields_of(&forced, "alice"), &json!({"f:data": {"f:b": {}}}));
    assert_eq!(
        fields_of(&forced, "bob"),
        &json!({"f:data": {"f:a": {}, "f:c": {}}})
    );

    // alice no longer applies b: it is removed (nobody else owns it).
    let (status, pruned) =
        patch(addr, &path("fieldManager=alice"), APPLY, &config(json!({}))).await;
    assert_eq!(status, 200, "{pruned}");
    assert_eq!(pruned["data"], json!({"a": "2", "c": "3"}));

    // A merge patch records an Update entry for its manager (fieldManager, else the
    // User-Agent's); force on a non-apply patch is refused.
    let (status, patched) = request(
        addr,
        "PATCH",
        &format!("{CMS}/applied"),
        "application/merge-patch+json",
        r#"{"data":{"d":"4"}}"#,
    )
    .await;
    assert_eq!(status, 200, "{patched}");
    let (status, body) = common::request_with_headers(
        addr,
        "PATCH",
        &format!("{CMS}/applied"),
        &[
            ("Content-Type", "application/merge-patch+json"),
            ("User-Agent", "my-tool/1.2 (linux)"),
        ],
        r#"{"data":{"e":"5"}}"#,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let patched: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        fields_of(&patched, "my-tool"),
        &json!({"f:data": {"f:e": {}}})
    );
    let update = patched["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["manager"] == "my-tool")
        .unwrap();
    assert_eq!(update["operation"], "Update");
    let (status, forbidden) = patch(
        addr,
        &format!("{CMS}/applied?force=true"),
        "application/merge-patch+json",
        r#"{"data":{"f":"6"}}"#,
    )
    .await;
    assert_eq!(status, 422, "{forbidden}");
    assert_eq!(
        forbidden["message"],
        r#"PatchOptions.meta.k8s.io "" is invalid: force: Forbidden: may not be specified for non-apply patch"#
    );

    // Creates record an Update entry too.
    let (status, created) = common::request_with_headers(
        addr,
        "POST",
        &format!("{CMS}?fieldManager=creator"),
        &[],
        &json!({"metadata": {"name": "made"}, "data": {"x": "1"}}).to_string(),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let created: Value = serde_json::from_str(&created).unwrap();
    assert_eq!(
        entries(&created),
        [("creator".to_owned(), "Update".to_owned())]
    );
    assert_eq!(
        fields_of(&created, "creator"),
        &json!({"f:data": {".": {}, "f:x": {}}})
    );
    server.shutdown().await;
}

/// Apply bodies in YAML are accepted as kube-apiserver accepts them (the same object as the
/// JSON body), and YAML that does not decode is its 400; a YAML body of the wrong type for the
/// schema is refused as a JSON one is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_apply_takes_yaml_bodies() {
    let server = common::server().await;
    let addr = server.addr;
    let path = format!("{CMS}/from-yaml?fieldManager=yaml-user");
    let yaml = "# applied with curl\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-yaml\n  labels: {app: web}\ndata:\n  a: \"1\"\n  script: |\n    echo one\n    echo two\n";
    let (status, created) = patch(addr, &path, APPLY, yaml).await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["metadata"]["labels"], json!({"app": "web"}));
    assert_eq!(
        created["data"],
        json!({"a": "1", "script": "echo one\necho two\n"})
    );
    assert_eq!(
        entries(&created),
        [("yaml-user".to_owned(), "Apply".to_owned())]
    );
    assert_eq!(
        fields_of(&created, "yaml-user"),
        &json!({"f:data": {"f:a": {}, "f:script": {}}, "f:metadata": {"f:labels": {"f:app": {}}}})
    );
    // The same configuration again, in flow style: nothing changes.
    let flow = "{apiVersion: v1, kind: ConfigMap, metadata: {name: from-yaml, labels: {app: web}}, data: {a: '1', script: \"echo one\\necho two\\n\"}}";
    let (status, again) = patch(addr, &path, APPLY, flow).await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(rv(&again), rv(&created));

    for (body, wanted) in [
        (
            "apiVersion: v1\nkind: [ConfigMap\n",
            "error decoding YAML: error converting YAML to JSON: yaml: ",
        ),
        (
            "- apiVersion: v1\n",
            "error decoding YAML: error unmarshaling JSON: while decoding JSON: json: cannot unmarshal array into Go value of type map[string]interface {}",
        ),
    ] {
        let (status, error) = patch(addr, &path, APPLY, body).await;
        assert_eq!(status, 400, "{error}");
        assert_eq!(error["kind"], "Status");
        assert_eq!(error["reason"], "BadRequest");
        assert!(
            error["message"].as_str().unwrap().starts_with(wanted),
            "{error}"
        );
    }
    // Valid YAML, wrong type for the schema: the write path's refusal, nothing stored.
    let (status, error) = patch(
        addr,
        &format!("{CMS}/bad-yaml?fieldManager=yaml-user"),
        APPLY,
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bad-yaml}\ndata:\n  n: 7\n",
    )
    .await;
    assert_eq!(status, 400, "{error}");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("cannot unmarshal number into Go struct field ConfigMap.data of type string"),
        "{error}"
    );
    assert_eq!(get_json(addr, &format!("{CMS}/bad-yaml")).await.0, 404);
    server.shutdown().await;
}

/// kube-apiserver keeps at most 10 Update managers per object: the eleventh and later writers
/// get their own entries while the oldest are merged into `ancient-changes`, which keeps their
/// fields; Apply entries are not counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_managers_are_capped_at_ten() {
    let server = common::server().await;
    let addr = server.addr;
    let object = format!("{CMS}/many-writers");
    let (status, created) = patch(
        addr,
        &format!("{object}?fieldManager=applier"),
        APPLY,
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "many-writers"}, "data": {"applied": "1"}}).to_string(),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let mut last = created;
    for i in 0..13 {
        let (status, patched) = patch(
            addr,
            &format!("{object}?fieldManager=writer-{i:02}"),
            "application/merge-patch+json",
            &json!({"data": {format!("k{i:02}"): "v"}}).to_string(),
        )
        .await;
        assert_eq!(status, 200, "{patched}");
        last = patched;
    }
    let all = entries(&last);
    let updates: Vec<&str> = all
        .iter()
        .filter(|(_, operation)| operation == "Update")
        .map(|(manager, _)| manager.as_str())
        .collect();
    assert_eq!(updates.len(), 10, "{all:?}");
    assert!(updates.contains(&"ancient-changes"), "{all:?}");
    assert!(
        updates.contains(&"writer-12"),
        "the newest keeps its entry: {all:?}"
    );
    assert!(
        all.contains(&("applier".to_owned(), "Apply".to_owned())),
        "{all:?}"
    );
    // Every key a writer set is still owned by someone.
    let owned: String = last["metadata"]["managedFields"].to_string();
    for i in 0..13 {
        assert!(owned.contains(&format!("f:k{i:02}")), "k{i:02}: {owned}");
    }
    let (_, stored) = get_json(addr, &object).await;
    assert_eq!(
        stored["metadata"]["managedFields"],
        last["metadata"]["managedFields"]
    );
    server.shutdown().await;
}

/// A patch of fields its manager owns leaves every other entry as it was and gives its own
/// the write's time, in kube's order; entries a client sends that kube would write otherwise
/// (a `.` alone under a field, a `k:` key out of order) are written as kube writes them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patches_keep_or_rewrite_managed_fields_as_kube_writes_them() {
    let server = common::server().await;
    let addr = server.addr;
    let object = format!("{CMS}/kept");
    let (status, created) = send_json(
        addr,
        "POST",
        &format!("{CMS}?fieldManager=alice"),
        &json!({"metadata": {"name": "kept"}, "data": {"a": "1"}}),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let merge = "application/merge-patch+json";
    let by = |manager: &str| format!("{object}?fieldManager={manager}");
    let (status, before) = patch(addr, &by("bob"), merge, r#"{"data":{"b":"2"}}"#).await;
    assert_eq!(status, 200, "{before}");
    let (status, after) = patch(addr, &by("alice"), merge, r#"{"data":{"a":"3"}}"#).await;
    assert_eq!(status, 200, "{after}");
    let entry = |object: &Value, manager: &str| {
        object["metadata"]["managedFields"]
            .as_array()
            .and_then(|entries| entries.iter().find(|e| e["manager"] == manager).cloned())
            .unwrap_or(Value::Null)
    };
    assert_eq!(entry(&after, "bob"), entry(&before, "bob"));
    assert_eq!(
        entry(&after, "alice")["fieldsV1"],
        json!({"f:data": {".": {}, "f:a": {}}})
    );
    let times: Vec<&str> = after["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["time"].as_str().unwrap())
        .collect();
    assert!(times.is_sorted(), "{after}");
    let (_, stored) = get_json(addr, &object).await;
    assert_eq!(
        stored["metadata"]["managedFields"],
        after["metadata"]["managedFields"]
    );
    // Sent entries replace the stored ones, written as kube writes them.
    let sent = json!({
        "metadata": {"managedFields": [{"manager": "alice", "operation": "Update", "apiVersion": "v1",
            "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:data": {"f:a": {".": {}}}, "f:spec": {"k:{\"b\":1,\"a\":2}": {}}}}]},
        "data": {"a": "4"}
    });
    let (status, rewritten) = patch(addr, &by("alice"), merge, &sent.to_string()).await;
    assert_eq!(status, 200, "{rewritten}");
    let entries = rewritten["metadata"]["managedFields"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "{rewritten}");
    assert_eq!(
        entries[0]["fieldsV1"],
        json!({"f:data": {"f:a": {}}, "f:spec": {"k:{\"a\":2,\"b\":1}": {}}})
    );
    assert_ne!(entries[0]["time"], "2026-01-01T00:00:00Z", "{rewritten}");
    server.shutdown().await;
}

const PODS: &str = "/api/v1/namespaces/default/pods";
const PDBS: &str = "/apis/policy/v1/namespaces/default/poddisruptionbudgets";

async fn create_pod(addr: std::net::SocketAddr, name: &str) {
    let (status, pod) = send_json(
        addr,
        "POST",
        PODS,
        &json!({"metadata": {"name": name, "labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}}),
    )
    .await;
    assert_eq!(status, 201, "{pod}");
}

/// `pods/{name}/binding` as a scheduler uses it: sets `spec.nodeName` once (with the binding's
/// annotations and the PodScheduled condition), then 409 as kube-apiserver; bad targets 422,
/// a mismatched name 400; both subresources are in discovery with their kinds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_binding_assigns_a_node_once() {
    let server = common::server().await;
    let addr = server.addr;
    create_pod(addr, "b1").await;
    let binding = |node: &str| {
        json!({"apiVersion": "v1", "kind": "Binding",
               "metadata": {"name": "b1", "annotations": {"scheduled-by": "test"}},
               "target": {"kind": "Node", "name": node}})
    };
    let (status, body) = request(
        addr,
        "POST",
        &format!("{PODS}/b1/binding"),
        "application/json",
        &binding("n1").to_string(),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(
        body,
        r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success","code":201}"#
    );
    let (_, pod) = get_json(addr, &format!("{PODS}/b1")).await;
    assert_eq!(pod["spec"]["nodeName"], "n1");
    assert_eq!(pod["metadata"]["annotations"]["scheduled-by"], "test");
    let conditions = pod["status"]["conditions"].as_array().unwrap();
    assert!(
        conditions
            .iter()
            .any(|c| c["type"] == "PodScheduled" && c["status"] == "True"),
        "{pod}"
    );
    let (status, again) =
        send_json(addr, "POST", &format!("{PODS}/b1/binding"), &binding("n2")).await;
    assert_eq!(status, 409, "{again}");
    assert_eq!(
        again["message"],
        "Operation cannot be fulfilled on pods/binding \"b1\": pod b1 is already assigned to node \"n1\""
    );
    let (status, invalid) = send_json(
        addr,
        "POST",
        &format!("{PODS}/b1/binding"),
        &json!({"metadata": {"name": "b1"}, "target": {"kind": "Pod"}}),
    )
    .await;
    assert_eq!(status, 422, "{invalid}");
    assert_eq!(invalid["details"]["causes"].as_array().unwrap().len(), 2);
    let (status, _) = send_json(
        addr,
        "POST",
        &format!("{PODS}/b1/binding"),
        &json!({"metadata": {"name": "other"}, "target": {"name": "n1"}}),
    )
    .await;
    assert_eq!(status, 400);

    let (_, v1) = get_json(addr, "/api/v1").await;
    let names: Vec<(&str, &str)> = v1["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["name"].as_str().unwrap(), r["kind"].as_str().unwrap()))
        .collect();
    assert!(names.contains(&("pods/binding", "Binding")), "{names:?}");
    assert!(names.contains(&("pods/eviction", "Eviction")), "{names:?}");
    // Only create: any other method is kube-apiserver's 405.
    let (status, refused) = request(
        addr,
        "PUT",
        &format!("{PODS}/b1/binding"),
        "application/json",
        &binding("n3").to_string(),
    )
    .await;
    assert_eq!(status, 405, "{refused}");
    let refused: Value = serde_json::from_str(&refused).unwrap();
    assert_eq!(refused["reason"], "MethodNotAllowed");
    assert_eq!(
        refused["message"],
        "the server does not allow this method on the requested resource: PUT"
    );
}

/// `pods/{name}/eviction` as `kubectl drain` uses it: a running pod behind a budget that has
/// not been processed, or allows no disruption, gets kube-apiserver's 429 and stays; once the
/// budget allows one, the eviction spends it (recorded in the budget's status) and deletes the
/// pod; a second pod is then refused; a Pending pod is evicted whatever the budget.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_eviction_honours_the_disruption_budget() {
    let server = common::server().await;
    let addr = server.addr;
    for name in ["e1", "e2", "e3"] {
        create_pod(addr, name).await;
    }
    for name in ["e1", "e2"] {
        let (status, pod) = patch(
            addr,
            &format!("{PODS}/{name}/status"),
            "application/merge-patch+json",
            r#"{"status":{"phase":"Running"}}"#,
        )
        .await;
        assert_eq!(status, 200, "{pod}");
    }
    let (status, pdb) = send_json(
        addr,
        "POST",
        PDBS,
        &json!({"metadata": {"name": "web"},
                "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}}),
    )
    .await;
    assert_eq!(status, 201, "{pdb}");
    let evict = |name: &str| json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}});
    let refused = |body: &Value, cause: &str| {
        assert_eq!(body["code"], 429, "{body}");
        assert_eq!(
            body["message"],
            "Cannot evict pod as it would violate the pod's disruption budget."
        );
        assert_eq!(body["details"]["causes"][0]["reason"], "DisruptionBudget");
        assert_eq!(body["details"]["causes"][0]["message"], cause, "{body}");
    };
    // Not yet processed by a disruption controller.
    let (_, body) = send_json(addr, "POST", &format!("{PODS}/e1/eviction"), &evict("e1")).await;
    refused(
        &body,
        "The disruption budget web is still being processed by the server.",
    );
    // Processed, no disruption allowed.
    let status_patch = |allowed: i64, healthy: i64| {
        format!(
            r#"{{"status":{{"observedGeneration":1,"disruptionsAllowed":{allowed},"currentHealthy":{healthy},"desiredHealthy":1,"expectedPods":2}}}}"#
        )
    };
    let (status, _) = patch(
        addr,
        &format!("{PDBS}/web/status"),
        "application/merge-patch+json",
        &status_patch(0, 1),
    )
    .await;
    assert_eq!(status, 200);
    let (_, body) = send_json(addr, "POST", &format!("{PODS}/e1/eviction"), &evict("e1")).await;
    refused(
        &body,
        "The disruption budget web needs 1 healthy pods and has 1 currently",
    );
    let (status, _) = get_json(addr, &format!("{PODS}/e1")).await;
    assert_eq!(status, 200, "a refused eviction deletes nothing");
    // One disruption allowed: the first eviction spends it, the second is refused.
    let (status, _) = patch(
        addr,
        &format!("{PDBS}/web/status"),
        "application/merge-patch+json",
        &status_patch(1, 2),
    )
    .await;
    assert_eq!(status, 200);
    let (status, body) =
        send_json(addr, "POST", &format!("{PODS}/e1/eviction"), &evict("e1")).await;
    assert_eq!(status, 201, "{body}");
    let (status, _) = get_json(addr, &format!("{PODS}/e1")).await;
    assert_eq!(status, 404, "the evicted pod is deleted");
    let (_, budget) = get_json(addr, &format!("{PDBS}/web")).await;
    assert_eq!(budget["status"]["disruptionsAllowed"], 0, "{budget}");
    assert!(
        budget["status"]["disruptedPods"]["e1"].is_string(),
        "{budget}"
    );
    let (_, body) = send_json(addr, "POST", &format!("{PODS}/e2/eviction"), &evict("e2")).await;
    refused(
        &body,
        "The disruption budget web needs 1 healthy pods and has 2 currently",
    );
    // A Pending pod is not counted by budgets: evicted at once.
    let (status, body) =
        send_json(addr, "POST", &format!("{PODS}/e3/eviction"), &evict("e3")).await;
    assert_eq!(status, 201, "{body}");
    let (status, _) = get_json(addr, &format!("{PODS}/e3")).await;
    assert_eq!(status, 404);
}

/// Fields a built-in kind does not declare are never stored (Go's decoding drops them), and
/// `fieldValidation` says what the client hears of them: a `Warning` each by default and with
/// `Warn`, nothing with `Ignore`, a 400 with `Strict` (kubectl's default), in kube-apiserver's
/// words; server-side apply refuses them whatever `fieldValidation` says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fields_a_kind_does_not_declare_are_dropped_warned_or_refused() {
    let server = common::server().await;
    let addr = server.addr;
    let body = |name: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "bogus": 1}, "data": {"k": "v"}, "x": [1, 2]})
        .to_string()
    };
    let json = "application/json";
    // Default (Warn): created without the fields, one warning each.
    let (status, created, warnings) = write_warned(addr, "POST", CMS, json, &body("a")).await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(
        warnings,
        [
            r#"299 - "unknown field \"metadata.bogus\"""#,
            r#"299 - "unknown field \"x\"""#
        ]
    );
    assert!(created.get("x").is_none() && created["metadata"].get("bogus").is_none());
    let (_, stored) = get_json(addr, &format!("{CMS}/a")).await;
    assert!(stored.get("x").is_none(), "{stored}");
    assert_eq!(stored["data"]["k"], "v");
    // Ignore: the same object, no warning.
    let (status, _, warnings) = write_warned(
        addr,
        "POST",
        &format!("{CMS}?fieldValidation=Ignore"),
        json,
        &body("b"),
    )
    .await;
    assert_eq!((status, warnings.len()), (201, 0));
    // Strict: refused, nothing stored.
    let (status, refused, _) = write_warned(
        addr,
        "POST",
        &format!("{CMS}?fieldValidation=Strict"),
        json,
        &body("c"),
    )
    .await;
    assert_eq!(status, 400, "{refused}");
    assert_eq!(refused["reason"], "BadRequest");
    assert_eq!(
        refused["message"],
        r#"ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: unknown field "metadata.bogus", unknown field "x""#
    );
    assert_eq!(get_json(addr, &format!("{CMS}/c")).await.0, 404);
    // Updates the same way.
    let mut update: Value = serde_json::from_str(&body("a")).unwrap();
    update["spec"] = json!({"replicas": 1});
    let (status, refused, _) = write_warned(
        addr,
        "PUT",
        &format!("{CMS}/a?fieldValidation=Strict"),
        json,
        &update.to_string(),
    )
    .await;
    assert_eq!(status, 400, "{refused}");
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .ends_with(r#"strict decoding error: unknown field "metadata.bogus", unknown field "spec", unknown field "x""#),
        "{refused}"
    );
    // A patch's result is checked: Strict answers kube-apiserver's 422 on the field `patch`,
    // whose value is the patched object.
    let merge = "application/merge-patch+json";
    let (status, refused, _) = write_warned(
        addr,
        "PATCH",
        &format!("{CMS}/a?fieldValidation=Strict"),
        merge,
        r#"{"data":{"k":"w"},"extra":{"deep":1}}"#,
    )
    .await;
    assert_eq!(status, 422, "{refused}");
    assert_eq!(refused["reason"], "Invalid");
    assert_eq!(refused["details"]["causes"][0]["field"], "patch");
    let message = refused["message"].as_str().unwrap();
    assert!(
        message.starts_with(r#" "" is invalid: patch: Invalid value: "{\"apiVersion\":\"v1\","#),
        "{message}"
    );
    assert!(message.contains(r#"\"extra\":{\"deep\":1}"#), "{message}");
    assert!(
        message.ends_with(r#"": strict decoding error: unknown field "extra""#),
        "{message}"
    );
    let (status, patched, warnings) = write_warned(
        addr,
        "PATCH",
        &format!("{CMS}/a"),
        merge,
        r#"{"data":{"k":"w"},"extra":{"deep":1}}"#,
    )
    .await;
    assert_eq!(status, 200, "{patched}");
    assert_eq!(warnings, [r#"299 - "unknown field \"extra\"""#]);
    assert_eq!(patched["data"]["k"], "w");
    assert!(patched.get("extra").is_none());
    // A JSON body is reported in its text's order, duplicate fields too (kube-apiserver's own
    // field validation test body and message).
    let deployment = r#"{"apiVersion":"apps/v1","kind":"Deployment",
        "metadata":{"name":"dd","name":"dd","unknownMeta":"metaVal","labels":{"app":"nginx"}},
        "spec":{"unknown1":"val1","unknownDupe":"valDupe","unknownDupe":"valDupe2",
          "paused":true,"paused":false,"selector":{"matchLabels":{"app":"nginx"}},
          "template":{"metadata":{"labels":{"app":"nginx"}},"spec":{"containers":[{
            "name":"nginx","image":"nginx:latest","unknownNested":"val1",
            "imagePullPolicy":"Always","imagePullPolicy":"Never"}]}}}}"#;
    let deployments = "/apis/apps/v1/namespaces/default/deployments";
    let (status, refused, _) = write_warned(
        addr,
        "POST",
        &format!("{deployments}?fieldValidation=Strict"),
        json,
        deployment,
    )
    .await;
    assert_eq!(status, 400, "{refused}");
    assert_eq!(
        refused["message"],
        r#"Deployment in version "v1" cannot be handled as a Deployment: strict decoding error: duplicate field "metadata.name", unknown field "metadata.unknownMeta", unknown field "spec.unknown1", unknown field "spec.unknownDupe", duplicate field "spec.paused", unknown field "spec.template.spec.containers[0].unknownNested", duplicate field "spec.template.spec.containers[0].imagePullPolicy""#
    );
    let (status, created, warnings) =
        write_warned(addr, "POST", deployments, json, deployment).await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(warnings.len(), 7, "{warnings:?}");
    assert_eq!(warnings[0], r#"299 - "duplicate field \"metadata.name\"""#);
    // The last of duplicated values is kept, as Go's decoder keeps it.
    // (`false`, which Go leaves out: `Paused bool json:"paused,omitempty"`.)
    assert_eq!(created["spec"].get("paused"), None, "{created}");
    assert_eq!(
        created["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"],
        "Never"
    );
    // Nested paths are named as kube-apiserver names them.
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "i", "imagePullPolicyy": "Always"}]}});
    let (status, refused, _) = write_warned(
        addr,
        "POST",
        "/api/v1/namespaces/default/pods?fieldValidation=Strict",
        json,
        &pod.to_string(),
    )
    .await;
    assert_eq!(status, 400, "{refused}");
    assert_eq!(
        refused["message"],
        r#"Pod in version "v1" cannot be handled as a Pod: strict decoding error: unknown field "spec.containers[0].imagePullPolicyy""#
    );
    // Any other value is an invalid option.
    let (status, refused, _) = write_warned(
        addr,
        "POST",
        &format!("{CMS}?fieldValidation=Loose"),
        json,
        &body("d"),
    )
    .await;
    assert_eq!(status, 422, "{refused}");
    assert_eq!(
        refused["message"],
        r#"CreateOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: "Loose": supported values: "", "Ignore", "Strict", "Warn""#
    );
    // Server-side apply cannot type such a configuration (structured-merge-diff's 500).
    let (status, refused, _) = write_warned(
        addr,
        "PATCH",
        &format!("{CMS}/e?fieldManager=m&fieldValidation=Ignore"),
        "application/apply-patch+yaml",
        &body("e"),
    )
    .await;
    assert_eq!(status, 500, "{refused}");
    assert!(refused.get("reason").is_none(), "{refused}");
    assert_eq!(
        refused["message"],
        "failed to create typed patch object (default/e; /v1, Kind=ConfigMap): errors:\n  .metadata.bogus: field not declared in schema\n  .x: field not declared in schema"
    );
    assert_eq!(get_json(addr, &format!("{CMS}/e")).await.0, 404);
    server.shutdown().await;
}

/// A write refused after its body was decoded still carries the warnings of the fields its
/// kind does not declare (`fieldValidation` Warn, the default): kube-apiserver's warning
/// recorder puts each in the answer's headers as the decoder reports it, before admission and
/// validation refuse the object. kr8s's `test_pod_errors` creates such a pod (a container with
/// `name1` for `name`): 422 `Required value`, and kube's warning about `name1`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_write_still_warns_of_unknown_fields() {
    let server = common::server().await;
    let addr = server.addr;
    let json = "application/json";
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bad"},
        "spec": {"containers": [{"name1": "pause", "image": "pause"}]}});
    let (status, refused, warnings) =
        write_warned(addr, "POST", PODS, json, &pod.to_string()).await;
    assert_eq!(status, 422, "{refused}");
    assert_eq!(
        refused["message"],
        r#"Pod "bad" is invalid: spec.containers[0].name: Required value"#
    );
    assert_eq!(
        warnings,
        [r#"299 - "unknown field \"spec.containers[0].name1\"""#]
    );
    // Ignore: the same refusal, no warning.
    let (status, _, warnings) = write_warned(
        addr,
        "POST",
        &format!("{PODS}?fieldValidation=Ignore"),
        json,
        &pod.to_string(),
    )
    .await;
    assert_eq!((status, warnings.len()), (422, 0));
    // A refusal past validation too: a create of a name taken (409 AlreadyExists).
    let cm = |extra: i64| {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "taken"},
            "extra": extra})
        .to_string()
    };
    let (status, _, _) = write_warned(addr, "POST", CMS, json, &cm(1)).await;
    assert_eq!(status, 201);
    let (status, refused, warnings) = write_warned(addr, "POST", CMS, json, &cm(2)).await;
    assert_eq!(status, 409, "{refused}");
    assert_eq!(refused["reason"], "AlreadyExists");
    assert_eq!(warnings, [r#"299 - "unknown field \"extra\"""#]);
    server.shutdown().await;
}

/// A DELETE whose body is JSON `null` (some clients send their absent options so) deletes with
/// the default options, as Go's decoder reads `null` into empty DeleteOptions; an array is
/// still refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_with_a_null_body_uses_the_default_options() {
    let server = common::server().await;
    let addr = server.addr;
    for name in ["n1", "n2"] {
        let (status, _) = send_json(
            addr,
            "POST",
            CMS,
            &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}),
        )
        .await;
        assert_eq!(status, 201);
    }
    let (status, body) = request(
        addr,
        "DELETE",
        &format!("{CMS}/n1"),
        "application/json",
        "null",
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(get_json(addr, &format!("{CMS}/n1")).await.0, 404);
    let (status, body) = request(
        addr,
        "DELETE",
        &format!("{CMS}/n2"),
        "application/json",
        "[]",
    )
    .await;
    // kube-apiserver v1.33 answers the decoder's error as it is, a 500 (400 from v1.35,
    // kubernetes#133358).
    assert_eq!(status, 500, "{body}");
    assert!(
        body.contains("couldn't get version/kind; json parse error: json: cannot unmarshal array"),
        "{body}"
    );
    assert_eq!(get_json(addr, &format!("{CMS}/n2")).await.0, 200);
    server.shutdown().await;
}

/// The deployment of kube-apiserver's field validation tests.
fn nginx_deployment(name: &str) -> String {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "labels": {"app": "nginx"}},
        "spec": {"selector": {"matchLabels": {"app": "nginx"}},
            "template": {"metadata": {"labels": {"app": "nginx"}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx:latest"}]}}}})
    .to_string()
}

/// Strategic merge patches give what kube-apiserver gives: apimachinery's walk, then the Go
/// struct. A nested map's `$patch: delete` leaves `{}`, which the kind's `omitempty` map field
/// then drops; a merged list is in apimachinery's order (`normalizeElementOrder`: the patch's
/// items first in its order, an item of the object before one of them only where the object
/// had it before that one, so a container the object lacks goes before the object's); a
/// container the patch appends keeps no `null` member; a merging list given items of another
/// type is apimachinery's error, 500 without a reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strategic_merge_patches_as_kube_apiserver_applies_them() {
    let server = common::server().await;
    let addr = server.addr;
    let deployments = "/apis/apps/v1/namespaces/default/deployments";
    let (status, created) = send_json(
        addr,
        "POST",
        deployments,
        &serde_json::from_str(&nginx_deployment("smp")).unwrap(),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let strategic = "application/strategic-merge-patch+json";
    let path = format!("{deployments}/smp");
    let names = |object: &Value| -> Vec<String> {
        object["spec"]["template"]["spec"]["containers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|container| container["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let (status, patched) = patch(
        addr,
        &path,
        strategic,
        r#"{"metadata":{"labels":{"$patch":"delete"}},
            "spec":{"template":{"spec":{"containers":[{"name":"sidecar","image":"envoy:1"}]}}}}"#,
    )
    .await;
    assert_eq!(status, 200, "{patched}");
    assert!(patched["metadata"].get("labels").is_none(), "{patched}");
    assert_eq!(names(&patched), ["sidecar", "nginx"]);

    let (status, patched) = patch(
        addr,
        &path,
        strategic,
        r#"{"spec":{"template":{"spec":{"containers":[
            {"name":"nginx","image":"nginx:2"},
            {"name":"third","image":"busybox","workingDir":null,"env":[{"name":"A","value":null}]}]}}}}"#,
    )
    .await;
    assert_eq!(status, 200, "{patched}");
    assert_eq!(names(&patched), ["sidecar", "nginx", "third"]);
    let third = &patched["spec"]["template"]["spec"]["containers"][2];
    assert!(third.get("workingDir").is_none(), "{third}");
    assert_eq!(third["env"], json!([{"name": "A"}]), "{third}");
    assert_eq!(
        patched["spec"]["template"]["spec"]["containers"][1]["image"],
        "nginx:2"
    );

    let (status, refused) = patch(
        addr,
        &path,
        strategic,
        r#"{"spec":{"template":{"spec":{"containers":["nginx"]}}}}"#,
    )
    .await;
    assert_eq!(status, 500, "{refused}");
    assert_eq!(
        refused["reason"].as_str().unwrap_or_default(),
        "",
        "{refused}"
    );
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .starts_with("list element types are not identical: [[map["),
        "{refused}"
    );
}

/// `fieldValidation` on what a patch body itself holds, as kube-apiserver's field validation
/// tests send it (their bodies, messages and warnings): duplicate fields of merge and
/// strategic merge patches and the unknown and duplicate fields of JSON patch operations come
/// first, then the unknown fields of the patched object; `Strict` is kube-apiserver's 422 on
/// the field `patch`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicate_and_unknown_fields_of_patch_bodies() {
    let server = common::server().await;
    let addr = server.addr;
    let deployments = "/apis/apps/v1/namespaces/default/deployments";
    let (status, created, _) = write_warned(
        addr,
        "POST",
        deployments,
        "application/json",
        &nginx_deployment("dp"),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let merge_body = r#"{"spec": {"unknown1": "val1", "unknownDupe": "valDupe", "unknownDupe": "valDupe2",
        "paused": true, "paused": false,
        "template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:latest",
            "unknownNested": "val1", "imagePullPolicy": "Always", "imagePullPolicy": "Never"}]}}}}"#;
    let expected = [
        r#"duplicate field "spec.unknownDupe""#,
        r#"duplicate field "spec.paused""#,
        r#"duplicate field "spec.template.spec.containers[0].imagePullPolicy""#,
        r#"unknown field "spec.template.spec.containers[0].unknownNested""#,
        r#"unknown field "spec.unknown1""#,
        r#"unknown field "spec.unknownDupe""#,
    ];
    let header = |text: &str| format!("299 - {text:?}");
    for patch_type in [
        "application/merge-patch+json",
        "application/strategic-merge-patch+json",
    ] {
        let (status, refused, _) = write_warned(
            addr,
            "PATCH",
            &format!("{deployments}/dp?fieldValidation=Strict"),
            patch_type,
            merge_body,
        )
        .await;
        assert_eq!(status, 422, "{patch_type}: {refused}");
        let message = refused["message"].as_str().unwrap();
        assert!(
            message.ends_with(&format!(
                "\": strict decoding error: {}",
                expected.join(", ")
            )),
            "{patch_type}: {message}"
        );
        let (status, patched, warnings) = write_warned(
            addr,
            "PATCH",
            &format!("{deployments}/dp"),
            patch_type,
            merge_body,
        )
        .await;
        assert_eq!(status, 200, "{patch_type}: {patched}");
        let expected: Vec<String> = expected.iter().map(|w| header(w)).collect();
        assert_eq!(warnings, expected, "{patch_type}");
        // (`false`, which Go leaves out: `Paused bool json:"paused,omitempty"`.)
        assert_eq!(patched["spec"].get("paused"), None, "{patched}");
        let (status, _, warnings) = write_warned(
            addr,
            "PATCH",
            &format!("{deployments}/dp?fieldValidation=Ignore"),
            patch_type,
            merge_body,
        )
        .await;
        assert_eq!((status, warnings.len()), (200, 0), "{patch_type}");
    }
    // A strategic merge patch's value is the decoded patch as Go prints a map.
    let (status, refused, _) = write_warned(
        addr,
        "PATCH",
        &format!("{deployments}/dp?fieldValidation=Strict"),
        "application/strategic-merge-patch+json",
        r#"{"spec": {"paused": true, "paused": false, "replicas": 2}}"#,
    )
    .await;
    assert_eq!(status, 422, "{refused}");
    assert_eq!(
        refused["message"],
        r#" "" is invalid: patch: Invalid value: "map[spec:map[paused:false replicas:2]]": strict decoding error: duplicate field "spec.paused""#
    );
    // JSON patch: its operations are read strictly ("json patch ..."); the duplicated path's
    // last value is the one applied.
    let json_patch = r#"[
        {"op": "add", "path": "/spec/unknown1", "value": "val1", "foo": "bar"},
        {"op": "add", "path": "/spec/unknown2", "path": "/spec/unknown3", "value": "val1"},
        {"op": "add", "path": "/spec/unknownDupe", "value": "valDupe"},
        {"op": "add", "path": "/spec/template/spec/containers/0/unknownNested", "value": "val1"}]"#;
    let expected = [
        r#"json patch unknown field "[0].foo""#,
        r#"json patch duplicate field "[1].path""#,
        r#"unknown field "spec.template.spec.containers[0].unknownNested""#,
        r#"unknown field "spec.unknown1""#,
        r#"unknown field "spec.unknown3""#,
        r#"unknown field "spec.unknownDupe""#,
    ];
    let (status, refused, _) = write_warned(
        addr,
        "PATCH",
        &format!("{deployments}/dp?fieldValidation=Strict"),
        "application/json-patch+json",
        json_patch,
    )
    .await;
    assert_eq!(status, 422, "{refused}");
    assert!(
        refused["message"].as_str().unwrap().ends_with(&format!(
            "\": strict decoding error: {}",
            expected.join(", ")
        )),
        "{refused}"
    );
    let (status, patched, warnings) = write_warned(
        addr,
        "PATCH",
        &format!("{deployments}/dp?fieldValidation=Warn"),
        "application/json-patch+json",
        json_patch,
    )
    .await;
    assert_eq!(status, 200, "{patched}");
    let expected: Vec<String> = expected.iter().map(|w| header(w)).collect();
    assert_eq!(warnings, expected);
    server.shutdown().await;
}

/// Where json-patch v4 panics (a `test` without a value of a key that is not there), kube's
/// panic recovery answers Go's plain-text 500, not a `Status`; nothing is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_json_patch_on_which_kube_panics_is_its_plain_text_500() {
    let server = common::server().await;
    let addr = server.addr;
    let created = written(
        addr,
        "POST",
        CMS,
        &json!({"metadata": {"name": "panics"}, "data": {"a": "1"}}),
    )
    .await;
    let answer = watchkeeper_testkit::request(
        addr,
        "PATCH",
        &format!("{CMS}/panics"),
        &[("Content-Type", "application/json-patch+json")],
        br#"[{"op": "add", "path": "/data/b", "value": "2"}, {"op": "test", "path": "/data/c"}]"#,
    )
    .await
    .expect("answer");
    assert_eq!(answer.status, 500, "{}", answer.text());
    assert_eq!(
        answer.text(),
        "This request caused apiserver to panic. Look in the logs for details.\n"
    );
    assert_eq!(
        answer.header("content-type"),
        Some("text/plain; charset=utf-8")
    );
    assert_eq!(answer.header("x-content-type-options"), Some("nosniff"));
    let (status, stored) = get_json(addr, &format!("{CMS}/panics")).await;
    assert_eq!(status, 200, "{stored}");
    assert_eq!(stored["data"], json!({"a": "1"}));
    assert_eq!(
        stored["metadata"]["resourceVersion"],
        created["metadata"]["resourceVersion"]
    );
    server.shutdown().await;
}

/// A JSON or merge patch body that does not decode into its operation type (JSON patch: a
/// list of `op`/`path`/`from` strings) or a map is kube-apiserver's 400 `error decoding patch`
/// under `fieldValidation` `Warn` (the default) and `Strict`, and json-patch v4's own answer
/// under `Ignore` (which skips the strict decode); a missing object is a 404 first either way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patch_bodies_that_do_not_decode_are_refused_as_kube_decodes_them() {
    let server = common::server().await;
    let addr = server.addr;
    let (status, created) = send_json(
        addr,
        "POST",
        CMS,
        &json!({"metadata": {"name": "undecoded"}, "data": {"a": "1"}}),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let json_patch = "application/json-patch+json";
    let merge_patch = "application/merge-patch+json";
    let numeric_op = r#"[{"op": 5, "path": "/data/a", "value": "2"}]"#;
    for query in ["", "?fieldValidation=Warn", "?fieldValidation=Strict"] {
        let (status, refused) = patch(
            addr,
            &format!("{CMS}/undecoded{query}"),
            json_patch,
            numeric_op,
        )
        .await;
        assert_eq!(status, 400, "{query}: {refused}");
        assert_eq!(
            refused["message"],
            "error decoding patch: json: cannot unmarshal number into Go struct field jsonPatchOp.op of type string",
            "{query}"
        );
        let (status, refused) =
            patch(addr, &format!("{CMS}/undecoded{query}"), merge_patch, "[1]").await;
        assert_eq!(status, 400, "{query}: {refused}");
        assert_eq!(
            refused["message"],
            "error decoding patch: json: cannot unmarshal array into Go value of type map[string]interface {}",
            "{query}"
        );
        let (status, missing) = patch(
            addr,
            &format!("{CMS}/absent{query}"),
            json_patch,
            numeric_op,
        )
        .await;
        assert_eq!(status, 404, "{query}: {missing}");
    }
    // Without the strict decode, json-patch v4 reads the operation's kind as `unknown`.
    let (status, refused) = patch(
        addr,
        &format!("{CMS}/undecoded?fieldValidation=Ignore"),
        json_patch,
        numeric_op,
    )
    .await;
    assert_eq!(status, 422, "{refused}");
    assert_eq!(
        refused["details"]["causes"][0]["message"], "Unexpected kind: unknown",
        "{refused}"
    );
    let (status, refused) = patch(
        addr,
        &format!("{CMS}/undecoded?fieldValidation=Ignore"),
        merge_patch,
        "[1]",
    )
    .await;
    assert_ne!(status, 400, "{refused}");
    assert_eq!(refused["kind"], "Status", "{refused}");
    // Nothing was written by any of them.
    let (status, current) = get_json(addr, &format!("{CMS}/undecoded")).await;
    assert_eq!(status, 200);
    assert_eq!(current["data"], json!({"a": "1"}));
    assert_eq!(rv(&current), rv(&created));
    server.shutdown().await;
}

/// Keys repeated in a server-side apply body: read last-wins, then, once the apply succeeded,
/// refused under `Strict` and named under `Warn` as go-yaml's strict reader reports them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_keys_of_apply_bodies() {
    let server = common::server().await;
    let addr = server.addr;
    let deployments = "/apis/apps/v1/namespaces/default/deployments";
    let body = |name: &str| {
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\nspec:\n  paused: true\n  paused: false\n  selector:\n    matchLabels:\n      app: nginx\n  template:\n    metadata:\n      labels:\n        app: nginx\n    spec:\n      containers:\n      - name: nginx\n        image: nginx:latest\n        imagePullPolicy: Always\n        imagePullPolicy: Never\n"
        )
    };
    let yaml = "application/apply-patch+yaml";
    let (status, refused, _) = write_warned(
        addr,
        "PATCH",
        &format!("{deployments}/a1?fieldManager=m&fieldValidation=Strict"),
        yaml,
        &body("a1"),
    )
    .await;
    assert_eq!(status, 400, "{refused}");
    assert_eq!(refused["reason"], "BadRequest");
    assert_eq!(
        refused["message"],
        "error strict decoding YAML: error converting YAML to JSON: yaml: unmarshal errors:\n  line 7: key \"paused\" already set in map\n  line 20: key \"imagePullPolicy\" already set in map"
    );
    assert_eq!(get_json(addr, &format!("{deployments}/a1")).await.0, 404);
    let (status, applied, warnings) = write_warned(
        addr,
        "PATCH",
        &format!("{deployments}/a1?fieldManager=m"),
        yaml,
        &body("a1"),
    )
    .await;
    assert_eq!(status, 201, "{applied}");
    assert_eq!(
        warnings,
        [
            r#"299 - "line 7: key \"paused\" already set in map""#,
            r#"299 - "line 20: key \"imagePullPolicy\" already set in map""#
        ]
    );
    // (`false`, which Go leaves out: `Paused bool json:"paused,omitempty"`.)
    assert_eq!(applied["spec"].get("paused"), None, "{applied}");
    assert_eq!(
        applied["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"],
        "Never"
    );
    // On an existing object too; Ignore says nothing.
    let (status, refused, _) = write_warned(
        addr,
        "PATCH",
        &format!("{deployments}/a1?fieldManager=m&fieldValidation=Strict"),
        yaml,
        &body("a1"),
    )
    .await;
    assert_eq!(status, 400, "{refused}");
    let (status, _, warnings) = write_warned(
        addr,
        "PATCH",
        &format!("{deployments}/a1?fieldManager=m&fieldValidation=Ignore"),
        yaml,
        &body("a1"),
    )
    .await;
    assert_eq!((status, warnings.len()), (200, 0));
    server.shutdown().await;
}

/// A custom resource's fields its structural schema prunes are reported as a built-in kind's
/// unknown fields are (after the body's duplicate fields): warnings under `Warn`, kube-apiserver's
/// strict decoding 400 under `Strict`, nothing under `Ignore`; they are never stored. Its
/// schema's list markers type it for server-side apply.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_resources_pruned_fields_are_warned_or_refused() {
    let server = common::server().await;
    let addr = server.addr;
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let definition = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {
                        "size": {"type": "integer"},
                        "items": {"type": "array", "x-kubernetes-list-type": "map",
                            "x-kubernetes-list-map-keys": ["name"], "items": {"type": "object",
                            "required": ["name"],
                            "properties": {"name": {"type": "string"}}}}}}}}}}]}});
    let (status, created) = send_json(addr, "POST", crds, &definition).await;
    assert_eq!(status, 201, "{created}");
    let widgets = "/apis/example.com/v1/namespaces/default/widgets";
    let widget = |name: &str| {
        format!(
            r#"{{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {{"name": "{name}"}},
            "spec": {{"size": 1, "size": 2, "extra": true, "items": [{{"name": "a", "x": 1}}]}}, "top": 1}}"#
        )
    };
    let json = "application/json";
    let (status, refused, _) = write_warned(
        addr,
        "POST",
        &format!("{widgets}?fieldValidation=Strict"),
        json,
        &widget("w1"),
    )
    .await;
    assert_eq!(status, 400, "{refused}");
    assert_eq!(
        refused["message"],
        r#"Widget in version "v1" cannot be handled as a Widget: strict decoding error: duplicate field "spec.size", unknown field "spec.extra", unknown field "spec.items[0].x", unknown field "top""#
    );
    assert_eq!(get_json(addr, &format!("{widgets}/w1")).await.0, 404);
    let (status, created, warnings) =
        write_warned(addr, "POST", widgets, json, &widget("w1")).await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(
        warnings,
        [
            r#"299 - "duplicate field \"spec.size\"""#,
            r#"299 - "unknown field \"spec.extra\"""#,
            r#"299 - "unknown field \"spec.items[0].x\"""#,
            r#"299 - "unknown field \"top\"""#
        ]
    );
    assert_eq!(
        created["spec"],
        json!({"size": 2, "items": [{"name": "a"}]})
    );
    assert!(created.get("top").is_none());
    let (status, _, warnings) = write_warned(
        addr,
        "POST",
        &format!("{widgets}?fieldValidation=Ignore"),
        json,
        &widget("w2"),
    )
    .await;
    assert_eq!((status, warnings.len()), (201, 0));
    // A patch's result the same way (merge patch: custom resources take no strategic merge).
    let merge = "application/merge-patch+json";
    let (status, patched, warnings) = write_warned(
        addr,
        "PATCH",
        &format!("{widgets}/w1"),
        merge,
        r#"{"spec": {"other": 1}}"#,
    )
    .await;
    assert_eq!(status, 200, "{patched}");
    assert_eq!(warnings, [r#"299 - "unknown field \"spec.other\"""#]);
    assert!(patched["spec"].get("other").is_none());
    let (status, refused, _) = write_warned(
        addr,
        "PATCH",
        &format!("{widgets}/w1?fieldValidation=Strict"),
        merge,
        r#"{"spec": {"other": 1}}"#,
    )
    .await;
    assert_eq!(status, 422, "{refused}");
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .ends_with(r#"": strict decoding error: unknown field "spec.other""#),
        "{refused}"
    );
    // Server-side apply follows the schema's markers: two appliers' items of a list-map
    // coexist (an atomic list would conflict).
    let yaml = "application/apply-patch+yaml";
    for (manager, item) in [("m1", "a"), ("m2", "b")] {
        let config = json!({"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "w3"}, "spec": {"items": [{"name": item}]}});
        let (status, applied, _) = write_warned(
            addr,
            "PATCH",
            &format!("{widgets}/w3?fieldManager={manager}"),
            yaml,
            &config.to_string(),
        )
        .await;
        assert!(matches!(status, 200 | 201), "{applied}");
    }
    let (_, stored) = get_json(addr, &format!("{widgets}/w3")).await;
    assert_eq!(
        stored["spec"]["items"],
        json!([{"name": "a"}, {"name": "b"}])
    );
    // An apply configuration with fields the schema does not declare cannot be typed:
    // structured-merge-diff's 500, whatever fieldValidation says.
    let config = json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w3"}, "spec": {"size": 1, "extra": 1, "zz": {"a": 1}}});
    let (status, refused, _) = write_warned(
        addr,
        "PATCH",
        &format!("{widgets}/w3?fieldManager=m1&fieldValidation=Ignore"),
        yaml,
        &config.to_string(),
    )
    .await;
    assert_eq!(status, 500, "{refused}");
    assert_eq!(
        refused["message"],
        "failed to create typed patch object (default/w3; example.com/v1, Kind=Widget): errors:\n  .spec.extra: field not declared in schema\n  .spec.zz: field not declared in schema"
    );
    server.shutdown().await;
}

/// One request; the whole answer (status, headers, body).
async fn answer(
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    content_type: &str,
    body: &str,
) -> watchkeeper_testkit::http::Response {
    tokio::time::timeout(
        common::HANG_GUARD,
        watchkeeper_testkit::request(
            addr,
            method,
            path,
            &[("Content-Type", content_type)],
            body.as_bytes(),
        ),
    )
    .await
    .expect("request hang")
    .unwrap()
}

/// A PATCH or PUT is answered from the object the cache holds for it (the reflector decodes
/// it from what the writer handed over, not from the stored bytes): the answer is byte for
/// byte the cached object's GET and a newline (with its `Content-Length`), the cached object is the one
/// decoded from the stored bytes, and a write the reflector did not get from the writer (a
/// create) is decoded from the store as before. Namespaced and cluster-scoped objects, a
/// no-op patch, a pod (generation, defaults), and a write `fieldValidation` warns about.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_answer_the_cached_object_decoded_from_the_handed_over_value() {
    let server = common::server().await;
    let addr = server.addr;
    let handovers = || {
        server
            .app
            .reflector
            .handovers
            .load(std::sync::atomic::Ordering::Relaxed)
    };
    use watchkeeper_store::Store as _;
    let store = server.app.source.as_store().expect("a store source");
    let pods = "/api/v1/namespaces/default/pods";
    let namespaces = "/api/v1/namespaces";
    let creates = [
        (CMS, json!({"metadata": {"name": "h"}, "data": {"a": "1"}})),
        (
            pods,
            json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}),
        ),
        (namespaces, json!({"metadata": {"name": "hand"}})),
    ];
    for (path, body) in &creates {
        let (status, created) = send_json(addr, "POST", path, body).await;
        assert_eq!(status, 201, "{created}");
    }
    let before = handovers();
    let writes = [
        (
            "PATCH",
            format!("{CMS}/h"),
            "application/merge-patch+json",
            r#"{"data":{"b":"2"}}"#.to_owned(),
        ),
        (
            "PATCH",
            format!("{CMS}/h"),
            "application/merge-patch+json",
            r#"{"data":{"b":"2"}}"#.to_owned(),
        ),
        (
            "PUT",
            format!("{CMS}/h"),
            "application/json",
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "h", "labels": {"x": "y"}}, "data": {"c": "3"}, "unknown": 1}).to_string(),
        ),
        (
            "PATCH",
            format!("{CMS}/h?fieldManager=other"),
            "application/json-patch+json",
            r#"[{"op":"add","path":"/data/d","value":"4"}]"#.to_owned(),
        ),
        (
            "PATCH",
            format!("{pods}/p"),
            "application/strategic-merge-patch+json",
            r#"{"spec":{"containers":[{"name":"c","image":"nginx:2"}]}}"#.to_owned(),
        ),
        (
            "PATCH",
            format!("{namespaces}/hand"),
            "application/merge-patch+json",
            r#"{"metadata":{"labels":{"l":"v"}}}"#.to_owned(),
        ),
    ];
    for (method, path, content_type, body) in &writes {
        let written = answer(addr, method, path, content_type, body).await;
        assert_eq!(written.status, 200, "{method} {path}: {}", written.text());
        let read = answer(addr, "GET", path.split('?').next().unwrap(), "", "").await;
        assert_eq!(read.status, 200);
        // kube-apiserver ends a write's answer with a newline; a GET's is the bare encoding.
        assert_eq!(
            written.text(),
            format!("{}\n", read.text()),
            "{method} {path}"
        );
        assert_eq!(
            written.header("content-length"),
            Some(written.body.len().to_string().as_str()),
            "{method} {path}"
        );
        assert_eq!(
            written.header("content-type"),
            Some("application/json"),
            "{method} {path}"
        );
    }
    // One hand-over per write that changed something (the second PATCH changed nothing).
    assert_eq!(handovers() - before, 5);
    // What the caches hold is what decoding the stored bytes gives.
    for (group_path, plural, namespace, name) in [
        (CMS, "configmaps", "default", "h"),
        (pods, "pods", "default", "p"),
        (namespaces, "namespaces", "", "hand"),
    ] {
        let resource = server.app.resource("", "v1", plural).unwrap();
        let kv = store
            .get(bytes::Bytes::from(resource.store_key(namespace, name)))
            .await
            .unwrap()
            .unwrap();
        let decoded = watchkeeper::source::decode::decode_stored(
            &resource.def,
            None,
            namespace,
            name,
            kv.mod_revision,
            &kv.value,
        )
        .unwrap();
        let key = watchkeeper_core::object_key(namespace, name);
        let cached = resource.cache().get(&key).0.expect("cached");
        assert_eq!(cached.body(), decoded.body(), "{group_path}");
        assert_eq!(cached.labels(), decoded.labels());
        assert_eq!(cached.fields(), decoded.fields());
        assert_eq!(cached.resource_version(), decoded.resource_version());
    }
    assert!(
        server
            .app
            .source
            .as_store_source()
            .unwrap()
            .handover()
            .is_empty(),
        "no offer outlives its write"
    );
}

/// Goal: a strategic merge patch applies to the kinds kube serves from Go types beside the
/// built-in groups — a CustomResourceDefinition (`kubectl patch crd` sends one by default)
/// and an `events.k8s.io/v1` Event (kube's conformance test patches its series so) — and
/// stays kube's 415 for a custom resource.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strategic_merge_patches_apply_to_definitions_and_events_v1() {
    let server = common::server().await;
    let addr = server.addr;
    let strategic = "application/strategic-merge-patch+json";
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let crd = written(addr, "POST", crds, &common::widgets_crd()).await;
    let name = crd["metadata"]["name"].as_str().unwrap().to_owned();
    let (status, patched) = patch(
        addr,
        &format!("{crds}/{name}"),
        strategic,
        r#"{"metadata": {"labels": {"patched": "true"}}}"#,
    )
    .await;
    assert_eq!(status, 200, "{patched}");
    assert_eq!(patched["metadata"]["labels"]["patched"], "true");

    let events = "/apis/events.k8s.io/v1/namespaces/default/events";
    let event = json!({"metadata": {"name": "ev"}, "eventTime": "2026-12-06T12:00:00.000000Z",
        "note": "n", "action": "Do", "reason": "Test", "type": "Normal",
        "reportingController": "test-controller", "reportingInstance": "test-node",
        "regarding": {"namespace": "default", "name": "x", "kind": "Pod"}});
    common::created(addr, events, &event).await;
    let (status, patched) = patch(
        addr,
        &format!("{events}/ev"),
        strategic,
        r#"{"series": {"count": 2, "lastObservedTime": "2017-09-19T13:49:11.000000Z"}}"#,
    )
    .await;
    assert_eq!(status, 200, "{patched}");
    assert_eq!(
        patched["series"],
        json!({"count": 2, "lastObservedTime": "2017-09-19T13:49:11.000000Z"})
    );

    let group = crd["spec"]["group"].as_str().unwrap();
    let plural = crd["spec"]["names"]["plural"].as_str().unwrap();
    let version = crd["spec"]["versions"][0]["name"].as_str().unwrap();
    let kind = crd["spec"]["names"]["kind"].as_str().unwrap();
    let widgets = format!("/apis/{group}/{version}/namespaces/default/{plural}");
    common::created(
        addr,
        &widgets,
        &json!({"apiVersion": format!("{group}/{version}"), "kind": kind,
            "metadata": {"name": "w"}}),
    )
    .await;
    let (status, refused) = patch(
        addr,
        &format!("{widgets}/w"),
        strategic,
        r#"{"metadata": {"labels": {"a": "b"}}}"#,
    )
    .await;
    assert_eq!(status, 415, "{refused}");
    server.shutdown().await;
}

/// A `metav1.MicroTime` (a lease's `acquireTime` and `renewTime`, an Event's `eventTime`) is
/// read as Go's `time.Parse(RFC3339Micro, …)` reads it: six fractional digits exactly, else
/// kube-apiserver's 400 for a body its Go struct cannot take. @kubernetes/client-node writes
/// a JavaScript `Date` as `toISOString()` gives it (milliseconds), which kube refuses
/// (kubernetes-client/javascript#828); a server that took it would let a program pass here
/// that fails against kube. Creates, updates and patches alike; six digits with an offset are
/// taken and written back in UTC.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn micro_times_take_six_fractional_digits_as_kube_reads_them() {
    let server = common::server().await;
    let addr = server.addr;
    let leases = "/apis/coordination.k8s.io/v1/namespaces/default/leases";
    let lease = |name: &str, renew: &str| {
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name}, "spec": {"holderIdentity": "h", "renewTime": renew}})
    };
    let bad_request = |body: &Value, time: &str, value: &str, element: &str| {
        assert_eq!(body["code"], 400, "{body}");
        assert_eq!(body["reason"], "BadRequest", "{body}");
        assert_eq!(
            body["message"],
            format!(
                "Lease in version \"v1\" cannot be handled as a Lease: parsing time {time:?} as \"2006-01-02T15:04:05.000000Z07:00\": cannot parse {value:?} as {element:?}"
            ),
            "{body}"
        );
    };
    for (time, value, element) in [
        ("2026-12-06T14:10:00.123Z", ".123Z", ".000000"),
        ("2026-12-06T14:10:00Z", "Z", ".000000"),
        ("2026-12-06T14:10:00.123456789Z", "789Z", "Z07:00"),
    ] {
        let (status, body) = send_json(addr, "POST", leases, &lease("l", time)).await;
        assert_eq!(status, 400, "{time}: {body}");
        bad_request(&body, time, value, element);
    }
    let created = written(
        addr,
        "POST",
        leases,
        &lease("l", "2026-12-06T15:10:00.123456+01:00"),
    )
    .await;
    assert_eq!(created["spec"]["renewTime"], "2026-12-06T14:10:00.123456Z");
    let mut replacement = created.clone();
    replacement["spec"]["renewTime"] = json!("2026-12-06T14:11:00.5Z");
    let (status, body) = send_json(addr, "PUT", &format!("{leases}/l"), &replacement).await;
    assert_eq!(status, 400, "{body}");
    bad_request(&body, "2026-12-06T14:11:00.5Z", ".5Z", ".000000");
    let (status, body) = patch(
        addr,
        &format!("{leases}/l"),
        "application/merge-patch+json",
        r#"{"spec": {"acquireTime": "2026-12-06T14:12:00.250Z"}}"#,
    )
    .await;
    // A patch's result that does not decode: kube's 422 with the `patch` cause.
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["reason"], "Invalid", "{body}");
    assert!(
        body["message"].as_str().unwrap_or_default().ends_with(
            "parsing time \"2026-12-06T14:12:00.250Z\" as \"2006-01-02T15:04:05.000000Z07:00\": cannot parse \".250Z\" as \".000000\""
        ),
        "{body}"
    );
    // The lease is as it was.
    let (status, kept) = get_json(addr, &format!("{leases}/l")).await;
    assert_eq!(status, 200, "{kept}");
    assert_eq!(kept["spec"]["renewTime"], "2026-12-06T14:10:00.123456Z");
    assert!(kept["spec"].get("acquireTime").is_none(), "{kept}");
    // A core Event's eventTime alike.
    let events = "/api/v1/namespaces/default/events";
    let event = json!({"metadata": {"name": "ev"}, "eventTime": "2026-12-06T12:00:00.000Z",
        "action": "Do", "reason": "Test", "type": "Normal",
        "reportingComponent": "test-controller", "reportingInstance": "test-node",
        "involvedObject": {"namespace": "default", "name": "x", "kind": "Pod"}});
    let (status, body) = send_json(addr, "POST", events, &event).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(
        body["message"],
        "Event in version \"v1\" cannot be handled as a Event: parsing time \"2026-12-06T12:00:00.000Z\" as \"2006-01-02T15:04:05.000000Z07:00\": cannot parse \".000Z\" as \".000000\"",
        "{body}"
    );
    // And an events.k8s.io/v1 Event's (its own Go type: the same MicroTime): created, patched.
    let events = "/apis/events.k8s.io/v1/namespaces/default/events";
    let mut event = json!({"metadata": {"name": "ev"}, "eventTime": "2026-12-06T12:00:00.000Z",
        "note": "n", "action": "Do", "reason": "Test", "type": "Normal",
        "reportingController": "test-controller", "reportingInstance": "test-node",
        "regarding": {"namespace": "default", "name": "x", "kind": "Pod"}});
    let (status, body) = send_json(addr, "POST", events, &event).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(
        body["message"],
        "Event in version \"v1\" cannot be handled as a Event: parsing time \"2026-12-06T12:00:00.000Z\" as \"2006-01-02T15:04:05.000000Z07:00\": cannot parse \".000Z\" as \".000000\"",
        "{body}"
    );
    event["eventTime"] = json!("2026-12-06T12:00:00.000000Z");
    written(addr, "POST", events, &event).await;
    let (status, body) = patch(
        addr,
        &format!("{events}/ev"),
        "application/merge-patch+json",
        r#"{"series": {"count": 2, "lastObservedTime": "2026-12-06T12:00:01Z"}}"#,
    )
    .await;
    assert_eq!(status, 422, "{body}");
    assert!(
        body["message"].as_str().unwrap_or_default().ends_with(
            "parsing time \"2026-12-06T12:00:01Z\" as \"2006-01-02T15:04:05.000000Z07:00\": cannot parse \"Z\" as \".000000\""
        ),
        "{body}"
    );
}

/// Goal: as kube's update and patch handlers (`checkName`), a PUT whose object has no name
/// and a patch whose result has none (a JSON patch removing it, a merge patch nulling it, a
/// strategic merge patch deleting the metadata or, at its root, the whole object) are kube's
/// 400 naming the two names, and write nothing; they were taken, the name filled from the URL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_that_leaves_the_object_without_its_name_is_kube_s_400() {
    let server = common::server().await;
    let addr = server.addr;
    let stored = written(
        addr,
        "POST",
        CMS,
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm1"},
            "data": {"a": "b"}}),
    )
    .await;
    let path = format!("{CMS}/cm1");
    let nameless = "the name of the object () does not match the name on the URL (cm1)";
    let (status, answer) = send_json(
        addr,
        "PUT",
        &path,
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}, "data": {"a": "c"}}),
    )
    .await;
    assert_eq!(
        (status, answer["message"].as_str()),
        (400, Some(nameless)),
        "{answer}"
    );
    for (content_type, body, message) in [
        (
            "application/json-patch+json",
            r#"[{"op": "remove", "path": "/metadata/name"}]"#,
            nameless,
        ),
        (
            "application/merge-patch+json",
            r#"{"metadata": {"name": null}}"#,
            nameless,
        ),
        (
            "application/strategic-merge-patch+json",
            r#"{"metadata": {"$patch": "delete"}}"#,
            nameless,
        ),
        (
            "application/strategic-merge-patch+json",
            r#"{"$patch": "delete"}"#,
            nameless,
        ),
        (
            "application/merge-patch+json",
            r#"{"metadata": {"name": "cm2"}}"#,
            "the name of the object (cm2) does not match the name on the URL (cm1)",
        ),
    ] {
        let (status, answer) = patch(addr, &path, content_type, body).await;
        assert_eq!(status, 400, "{body}: {answer}");
        assert_eq!(answer["reason"], "BadRequest", "{answer}");
        assert_eq!(answer["message"], message, "{body}");
    }
    let (_, now) = get_json(addr, &path).await;
    assert_eq!(rv(&now), rv(&stored), "nothing was written");
    server.shutdown().await;
}

/// The subresources whose handlers read JSON take client-go's protobuf bodies too, encoded
/// here by k8s-pb's generated types: a scheduler's `Binding` (kube-scheduler's clients speak
/// protobuf), an `Eviction`, and the scale client's `autoscaling/v1` `Scale` on a Deployment
/// and a ReplicationController (kube-controller-manager's autoscaler). They were refused 400
/// (`couldn't get version/kind; json parse error`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subresources_take_protobuf_bodies_as_typed_clients_send_them() {
    use k8s_pb::api::autoscaling::v1::{Scale, ScaleSpec};
    use k8s_pb::api::core::v1::{Binding, ObjectReference};
    use k8s_pb::api::policy::v1::Eviction;
    use k8s_pb::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use prost::Message;
    let server = common::server().await;
    let addr = server.addr;
    let envelope = common::protobuf_envelope;
    let send = |method: &'static str, path: String, body: Vec<u8>| async move {
        let got = watchkeeper_testkit::request(
            addr,
            method,
            &path,
            &[
                ("content-type", "application/vnd.kubernetes.protobuf"),
                ("accept", "application/json"),
            ],
            &body,
        )
        .await
        .unwrap();
        (got.status, String::from_utf8_lossy(&got.body).into_owned())
    };
    let meta = |name: &str| ObjectMeta {
        name: Some(name.to_owned()),
        namespace: Some("default".to_owned()),
        ..Default::default()
    };

    create_pod(addr, "pb1").await;
    let binding = Binding {
        metadata: Some(meta("pb1")),
        target: Some(ObjectReference {
            kind: Some("Node".to_owned()),
            name: Some("n1".to_owned()),
            ..Default::default()
        }),
    };
    let body = envelope("v1", "Binding", binding.encode_to_vec());
    let (status, answer) = send("POST", format!("{PODS}/pb1/binding"), body).await;
    assert_eq!(status, 201, "{answer}");
    let (_, pod) = get_json(addr, &format!("{PODS}/pb1")).await;
    assert_eq!(pod["spec"]["nodeName"], "n1");

    create_pod(addr, "pb2").await;
    let eviction = Eviction {
        metadata: Some(meta("pb2")),
        delete_options: None,
    };
    let body = envelope("policy/v1", "Eviction", eviction.encode_to_vec());
    let (status, answer) = send("POST", format!("{PODS}/pb2/eviction"), body).await;
    assert_eq!(status, 201, "{answer}");
    let (_, pod) = get_json(addr, &format!("{PODS}/pb2")).await;
    assert!(
        pod["metadata"]["deletionTimestamp"].is_string() || pod["code"] == 404,
        "{pod}"
    );

    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"a": "b"}},
            "template": {"metadata": {"labels": {"a": "b"}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}});
    let deployments = "/apis/apps/v1/namespaces/default/deployments";
    let (status, _) = send_json(addr, "POST", deployments, &deployment).await;
    assert_eq!(status, 201);
    let rc = json!({"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "r"},
        "spec": {"replicas": 1, "selector": {"a": "b"},
            "template": {"metadata": {"labels": {"a": "b"}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}});
    let rcs = "/api/v1/namespaces/default/replicationcontrollers";
    let (status, _) = send_json(addr, "POST", rcs, &rc).await;
    assert_eq!(status, 201);
    for (parent, replicas) in [(format!("{deployments}/d"), 3), (format!("{rcs}/r"), 4)] {
        let scale = Scale {
            metadata: Some(meta(parent.rsplit('/').next().unwrap())),
            spec: Some(ScaleSpec {
                replicas: Some(replicas),
            }),
            status: None,
        };
        let body = envelope("autoscaling/v1", "Scale", scale.encode_to_vec());
        let (status, answer) = send("PUT", format!("{parent}/scale"), body).await;
        assert_eq!(status, 200, "{answer}");
        let (_, stored) = get_json(addr, &parent).await;
        assert_eq!(stored["spec"]["replicas"], replicas, "{stored}");
        // A malformed body is kube's 400, and nothing is written.
        let (status, answer) = send("PUT", format!("{parent}/scale"), b"k8s\0\x0a".to_vec()).await;
        assert_eq!(status, 400, "{answer}");
        let (_, again) = get_json(addr, &parent).await;
        assert_eq!(rv(&again), rv(&stored));
    }
    server.shutdown().await;
}

/// A Namespace's main endpoint and `finalize` keep its stored status, as kube-apiserver's
/// `namespaceStrategy` and `namespaceFinalizeStrategy` do: `kubectl replace` of a manifest
/// without a status is taken (it was a 422 `status.Phase: Invalid value: ""`), and a phase in
/// the body is not taken; only `/status` changes the phase, under its rule.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_keeps_its_status_but_through_its_status_endpoint() {
    let server = common::server().await;
    let addr = server.addr;
    let namespaces = "/api/v1/namespaces";
    let (status, _) = send_json(
        addr,
        "POST",
        namespaces,
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "keep"}}),
    )
    .await;
    assert_eq!(status, 201);
    let replaced = written(
        addr,
        "PUT",
        &format!("{namespaces}/keep"),
        &json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "keep", "labels": {"team": "a"}}}),
    )
    .await;
    assert_eq!(replaced["status"], json!({"phase": "Active"}), "{replaced}");
    assert_eq!(replaced["metadata"]["labels"]["team"], "a");
    let terminating = written(
        addr,
        "PUT",
        &format!("{namespaces}/keep"),
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "keep"},
            "status": {"phase": "Terminating"}}),
    )
    .await;
    assert_eq!(terminating["status"], json!({"phase": "Active"}));
    let finalized = written(
        addr,
        "PUT",
        &format!("{namespaces}/keep/finalize"),
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "keep"},
            "spec": {"finalizers": []}, "status": {"phase": "Terminating"}}),
    )
    .await;
    assert_eq!(finalized["status"], json!({"phase": "Active"}));
    assert_eq!(finalized["spec"], json!({}), "{finalized}");
    let (status, refused) = send_json(
        addr,
        "PUT",
        &format!("{namespaces}/keep/status"),
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "keep"},
            "status": {"phase": "Terminating"}}),
    )
    .await;
    assert_eq!(status, 422, "{refused}");
    assert_eq!(
        refused["message"],
        "Namespace \"keep\" is invalid: status.Phase: Invalid value: \"Terminating\": may only be 'Active' if `deletionTimestamp` is empty"
    );
    server.shutdown().await;
}

/// The main endpoints of the kinds whose kube strategy sets `newX.Status = oldX.Status`
/// (Pods, Nodes, PersistentVolumes, PersistentVolumeClaims, HorizontalPodAutoscalers) keep
/// the stored status: a PUT with another status leaves it (it was taken), one without keeps
/// it; and a pod's PUT of the manifest it was created from is taken, the default tolerations
/// added again as kube's DefaultTolerationSeconds does on updates (it was a 422 `existing
/// toleration can not be modified`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn main_endpoints_keep_the_stored_status_as_kube_strategies_do() {
    let server = common::server().await;
    let addr = server.addr;
    let cases = [
        (
            PODS,
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "keep"},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}}),
            json!({"phase": "Running", "podIP": "10.0.0.9"}),
        ),
        (
            "/api/v1/nodes",
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "keep"}}),
            json!({"capacity": {"cpu": "4"}}),
        ),
        (
            "/api/v1/persistentvolumes",
            json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "keep"},
                "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                    "hostPath": {"path": "/tmp"}}}),
            json!({"phase": "Bound"}),
        ),
        (
            "/api/v1/namespaces/default/persistentvolumeclaims",
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "keep"},
                "spec": {"accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": "1Gi"}}}}),
            json!({"phase": "Bound"}),
        ),
        (
            "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers",
            json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                "metadata": {"name": "keep"},
                "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"},
                    "maxReplicas": 3}}),
            json!({"currentReplicas": 2, "desiredReplicas": 2}),
        ),
    ];
    for (path, object, other_status) in cases {
        let created = written(addr, "POST", path, &object).await;
        let one = format!("{path}/keep");
        let mut with_status = object.clone();
        with_status["status"] = other_status;
        let replaced = written(addr, "PUT", &one, &with_status).await;
        assert_eq!(replaced["status"], created["status"], "{path}: {replaced}");
        let mut relabelled = object.clone();
        relabelled["metadata"]["labels"] = json!({"replaced": "yes"});
        let replaced = written(addr, "PUT", &one, &relabelled).await;
        assert_eq!(replaced["status"], created["status"], "{path}: {replaced}");
        assert_eq!(replaced["metadata"]["labels"]["replaced"], "yes", "{path}");
        if path == PODS {
            assert_eq!(
                replaced["spec"]["tolerations"],
                created["spec"]["tolerations"]
            );
            assert_eq!(
                created["spec"]["tolerations"].as_array().map(Vec::len),
                Some(2)
            );
        }
    }
    server.shutdown().await;
}

//! Goal: `weight::heap_bytes` estimates what a parsed body holds on the heap within 0.9x to
//! 1.1x, for bodies of every shape the cache meets (real objects, long strings, many tiny
//! maps, wide maps, nested maps and arrays), measured by a counting allocator over the parse
//! the reflector does (`serde_json::from_slice`). Each allocation counts its requested bytes
//! plus `ALLOCATION_OVERHEAD`, as the estimate does. One test function: dhat allows one
//! profiler per process at a time.

use serde_json::{Value, json};
use watchkeeper_core::weight::{ALLOCATION_OVERHEAD, heap_bytes};

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

/// What parsing `text` leaves allocated (each live allocation's bytes plus the overhead the
/// estimate counts), and the value.
fn parsed(text: &[u8]) -> (usize, Value) {
    let before = dhat::HeapStats::get();
    let value: Value = serde_json::from_slice(text).expect("valid JSON");
    let after = dhat::HeapStats::get();
    let bytes = after.curr_bytes - before.curr_bytes;
    let blocks = after.curr_blocks - before.curr_blocks;
    (bytes + blocks * ALLOCATION_OVERHEAD, value)
}

fn pod(containers: usize) -> Value {
    let container = |i: usize| {
        json!({"name": format!("c{i}"), "image": "registry.k8s.io/pause:3.9",
            "imagePullPolicy": "IfNotPresent", "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File",
            "resources": {"limits": {"cpu": "100m", "memory": "64Mi"}, "requests": {"cpu": "50m"}},
            "env": [{"name": "A", "value": "1"}, {"name": "B", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}}],
            "ports": [{"containerPort": 8080, "protocol": "TCP", "name": "http"}],
            "volumeMounts": [{"name": "data", "mountPath": "/data"}]})
    };
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web-0", "namespace": "default", "uid": "6f1c2f5e-8f3a-4d7e-9c1b-2a3b4c5d6e7f",
            "resourceVersion": "12345", "creationTimestamp": "2026-12-05T10:00:00Z",
            "labels": {"app": "web", "pod-template-hash": "5d8f7c9b6d"},
            "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-12-05T09:59:00Z"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d8f7c9b6d",
                "uid": "1a2b3c4d-0000-1111-2222-333344445555", "controller": true, "blockOwnerDeletion": true}]},
        "spec": {"containers": (0..containers).map(container).collect::<Vec<_>>(),
            "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default", "schedulerName": "default-scheduler",
            "securityContext": {}, "volumes": [{"name": "data", "emptyDir": {}}],
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]},
        "status": {"phase": "Pending", "qosClass": "Burstable"}})
}

#[test]
fn the_estimate_is_within_a_small_factor_of_what_a_parse_allocates() {
    let _profiler = dhat::Profiler::builder().testing().build();
    let tiny_maps: Vec<Value> = (0..20_000).map(|_| json!({"a": 1})).collect();
    let wide: serde_json::Map<String, Value> = (0..5_000)
        .map(|i| (format!("key-{i:05}"), json!(format!("value {i}"))))
        .collect();
    let mut nested = json!(1);
    for _ in 0..100 {
        nested = json!({"": nested});
    }
    let mut nested_arrays = json!(1);
    for _ in 0..100 {
        nested_arrays = json!([nested_arrays, "x"]);
    }
    let bodies = [
        ("a pod with one container", pod(1)),
        ("a pod with 20 containers", pod(20)),
        (
            "a config map of long strings",
            json!({"kind": "ConfigMap", "metadata": {"name": "c"},
                "data": {"a": "x".repeat(100_000), "b": "y".repeat(50_000)}}),
        ),
        ("20,000 one-entry maps", json!({"spec": tiny_maps})),
        ("a map of 5,000 keys", json!({"data": wide})),
        ("maps nested 100 deep", nested),
        ("arrays nested 100 deep", nested_arrays),
        (
            "numbers",
            json!({"spec": (0..10_000).map(|i| json!(i)).collect::<Vec<_>>()}),
        ),
    ];
    let mut report = Vec::new();
    for (name, body) in &bodies {
        let text = serde_json::to_vec(body).expect("encodes");
        let (measured, value) = parsed(&text);
        let estimate = heap_bytes(&value);
        let ratio = estimate as f64 / measured as f64;
        report.push(format!(
            "{name}: {} bytes of JSON, {measured} allocated, {estimate} estimated ({ratio:.2}x)",
            text.len()
        ));
        assert!((0.9..=1.1).contains(&ratio), "{}", report.join("\n"));
    }
    println!("{}", report.join("\n"));
}

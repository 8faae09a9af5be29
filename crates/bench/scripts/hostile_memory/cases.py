#!/usr/bin/env python3
"""Hostile-input memory probes (docs/ARCHITECTURE.md, "Limits" and "The caches' memory").

Each case starts a fresh `watchkeeper serve --store memory` on 127.0.0.1:$PORT (binary $WK,
default target/debug/watchkeeper; extra flags in $EXTRA), sends its requests and prints the
server's peak (VmHWM) and resident (VmRSS) memory in MB. Measurements, not tests: run them by
name, e.g.

    WK=target/debug/watchkeeper EXTRA="--cache-memory-bytes 268435456" \
        python3 crates/bench/scripts/hostile_memory/cases.py cr_stalled_watchers

The cases that call `malloc_trim(0)` in the server need gdb.
"""
import os
import json, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from probe import *
NS = "/api/v1/namespaces/default"
def pod(containers_json, extra_spec=""):
    return '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{%s"containers":[' % extra_spec, ']}}'
CASES = {}
def case(f): CASES[f.__name__] = f; return f

@case
def baseline_configmap():
    body = json.dumps({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"a":"x"*(1000*1000)}}).encode()
    run("configmap 1MB", [], ("POST", NS+"/configmaps", "application/json", body))














@case
def jsonpatch_copy_doubling():
    setup = [("POST", NS+"/configmaps", "application/json", json.dumps({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"a":"x"*1000}}).encode())]
    ops = [{"op":"copy","from":"/data/a","path":"/data/b%d" % i} for i in range(40000)]
    body = json.dumps(ops).encode()
    run(f"jsonpatch {len(ops)} copies of 1KB", setup, ("PATCH", NS+"/configmaps/c", "application/json-patch+json", body))

@case
def jsonpatch_copy_obj_doubling():
    setup = [("POST", NS+"/configmaps", "application/json", json.dumps({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"a":"x"*1000}}).encode())]
    ops = [{"op":"copy","from":"/data","path":"/metadata/annotations"}] + [{"op":"copy","from":"/metadata/annotations","path":"/metadata/x%d" % i} for i in range(40000)]
    body = json.dumps(ops).encode()
    run(f"jsonpatch {len(ops)} copies of object", setup, ("PATCH", NS+"/configmaps/c", "application/json-patch+json", body))

@case
def label_selector_list():
    sel = "a in (" + ",".join("v%d" % i for i in range(5000)) + ")"
    import urllib.parse
    q = urllib.parse.quote(sel)
    run(f"list labelSelector in({5000})", [], ("GET", NS+"/configmaps?labelSelector="+q, "", b""))








# Cases whose body is a prefix, as many items as fit the body limit, and a suffix:
# (name, label with {} for the count, setup requests, (method, path, content type),
#  prefix, item(i), suffix).
FILLED = [
    ('pod_many_containers', 'pod {} containers', [], ("POST", NS+"/pods", "application/json"),
     pod(None)[0], lambda i: '{"name":"a%d","image":"x"}' % i, pod(None)[1]),
    ('pod_many_ports', 'pod {} ports', [], ("POST", NS+"/pods", "application/json"),
     '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"a","image":"x","ports":[', lambda i: '{"containerPort":%d}' % (i % 65535 + 1), ']}]}}'),
    ('pod_many_env', 'pod {} env', [], ("POST", NS+"/pods", "application/json"),
     '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"a","image":"x","env":[', lambda i: '{"name":"e%d"}' % i, ']}]}}'),
    ('pod_many_volumes', 'pod {} volumes', [], ("POST", NS+"/pods", "application/json"),
     '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"a","image":"x"}],"volumes":[', lambda i: '{"name":"v%d","emptyDir":{}}' % i, ']}}'),
    ('deploy_many_containers', 'deployment {} containers', [], ("POST", "/apis/apps/v1/namespaces/default/deployments", "application/json"),
     '{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"a":"b"}},"spec":{"containers":[', lambda i: '{"name":"a%d","image":"x"}' % i, ']}}}}'),
    ('pod_dup_names', 'pod {} duplicate containers', [], ("POST", NS+"/pods", "application/json"),
     pod(None)[0], lambda i: '{"name":"a","image":"x"}', pod(None)[1]),
    ('pod_empty_containers', 'pod {} {{}} containers', [], ("POST", NS+"/pods", "application/json"),
     pod(None)[0], lambda i: '{}', pod(None)[1]),
    ('cm_many_keys', 'configmap {} keys', [], ("POST", NS+"/configmaps", "application/json"),
     '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{', lambda i: '"k%d":""' % i, '}}'),
    ('cm_many_bad_keys', 'configmap {} invalid keys', [], ("POST", NS+"/configmaps", "application/json"),
     '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{', lambda i: '"#%d":""' % i, '}}'),
    ('cm_many_labels_bad', 'configmap {} invalid labels', [], ("POST", NS+"/configmaps", "application/json"),
     '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","labels":{', lambda i: '"#%d":""' % i, '}}}'),
    ('apply_cm_many_keys', 'apply configmap {} keys', [], ("PATCH", NS+"/configmaps/c?fieldManager=m", "application/apply-patch+yaml"),
     '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{', lambda i: '"k%d":""' % i, '}}'),
    ('apply_pod_many_containers', 'apply pod {} containers', [], ("PATCH", NS+"/pods/p?fieldManager=m", "application/apply-patch+yaml"),
     pod(None)[0], lambda i: '{"name":"a%d","image":"x"}' % i, pod(None)[1]),
    ('smp_pod_many_containers', 'smp pod {} containers', [("POST", NS+"/pods", "application/json", b'{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"a","image":"x"}]}}')], ("PATCH", NS+"/pods/p", "application/strategic-merge-patch+json"),
     '{"spec":{"containers":[', lambda i: '{"name":"a%d","image":"x"}' % i, ']}}'),
    ('yaml_flow_empty', 'yaml pod {} {{}}', [], ("POST", NS+"/pods", "application/yaml"),
     'apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [', lambda i: '{}', ']\n'),
    ('yaml_flow_null', 'yaml pod {} ~', [], ("POST", NS+"/pods", "application/yaml"),
     'apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [', lambda i: '~', ']\n'),
    ('json_null_containers', 'json pod {} null', [], ("POST", NS+"/pods", "application/json"),
     pod(None)[0], lambda i: 'null', pod(None)[1]),
    ('dryrun_pod_many_containers', 'dryRun pod {} containers', [], ("POST", NS+"/pods?dryRun=All", "application/json"),
     pod(None)[0], lambda i: '{"name":"a%d","image":"x"}' % i, pod(None)[1]),
    ('update_managed_fields', 'put {} managedFields entries', [("POST", NS+"/configmaps", "application/json", b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}')], ("PUT", NS+"/configmaps/c", "application/json"),
     '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","managedFields":[', lambda i: '{"manager":"m%d","operation":"Update","apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{}}' % i, ']}}'),
    ('update_managed_fields_wide', 'put managedFields {} fields', [("POST", NS+"/configmaps", "application/json", b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}')], ("PUT", NS+"/configmaps/c", "application/json"),
     '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","managedFields":[{"manager":"m","operation":"Update","apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{"f:data":{', lambda i: '"f:k%d":{}' % i, '}}}]}}'),
]

def filled_case(name, label, setup, target, prefix, item, suffix):
    def run_case():
        body, n = fill(prefix, item, suffix)
        method, path, ctype = target
        run(label.format(n), setup, (method, path, ctype, body))
    run_case.__name__ = name
    CASES[name] = run_case

for row in FILLED:
    filled_case(*row)

CRD = json.dumps({"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"blobs.example.com"},
  "spec":{"group":"example.com","scope":"Namespaced","names":{"plural":"blobs","singular":"blob","kind":"Blob"},
  "versions":[{"name":"v1","served":True,"storage":True,"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":True}}}]}}).encode()

BLOBS = "/apis/example.com/v1/namespaces/default/blobs"

def blob(name, k):
    """A Blob of about 1.4 MiB of one-entry maps `{"a":k}` (90 times its JSON decoded)."""
    pre = '{"apiVersion":"example.com/v1","kind":"Blob","metadata":{"name":"%s"},"spec":[' % name
    return fill(pre, lambda i: '{"a":%d}' % (k % 10), ']}', limit=1400*1024)

def write_blob(k, name="b"):
    """Version k of blob `name`: created at 0, merge-patched after."""
    body, n = blob(name, k)
    if k == 0:
        return req("POST", BLOBS, "application/json", body)[0], n
    return req("PATCH", f"{BLOBS}/{name}", "application/merge-patch+json", body)[0], n

def with_blobs(measure):
    """Starts a server ($EXTRA flags), serves the Blob CRD, runs measure(p, base), stops it."""
    import time as _t
    p = start(os.environ.get("EXTRA","").split())
    try:
        st, d = req("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", "application/json", CRD); print("crd", st)
        for _ in range(100):
            if req("GET", BLOBS)[0] == 200: break
            _t.sleep(0.2)
        _t.sleep(1)
        measure(p, hwm(p.pid))
    finally:
        p.terminate(); p.wait(15)

def cache_metrics():
    st, m = req("GET", "/metrics")
    m = m.decode() if isinstance(m, bytes) else m
    print("\n".join(l for l in m.splitlines() if (l.startswith("watchkeeper_cache_") and ("blobs" in l or "{" not in l)) or "terminated_watchers_total{" in l and "blobs" in l and not l.endswith(" 0")))

def trimmed(p):
    """RSS after glibc gives back what it keeps (gdb calls malloc_trim(0) in the server)."""
    import subprocess as _sp
    _sp.run(["gdb", "-p", str(p.pid), "-batch", "-ex", "call (int)malloc_trim(0)"], capture_output=True)
    return hwm(p.pid)

def settled(p, base, what):
    import time as _t
    _t.sleep(2)
    after = hwm(p.pid)
    print(f"{what} hwm {base['VmHWM']}->{after['VmHWM']} rss={after['VmRSS']}", flush=True)

@case
def cr_tiny_maps_stored():
    def measure(p, base):
        sent = 0
        for k in range(8):
            body, n = blob(f"b{k}", 1)
            st = req("POST", BLOBS, "application/json", body)[0]
            sent += len(body)
            print(f"  b{k} {n} items status={st} hwm={hwm(p.pid)}", flush=True)
        settled(p, base, f"cr tiny maps x8 stored sent={sent}")
    with_blobs(measure)

@case
def cr_tiny_maps_updated():
    def measure(p, base):
        for k in range(10):
            st, n = write_blob(k)
            print(f"  v{k} {n} items status={st} hwm={hwm(p.pid)}", flush=True)
        settled(p, base, "cr tiny maps updated x10")
        cache_metrics()
        if os.environ.get("TRIM"):
            print("after malloc_trim", trimmed(p), flush=True)
    with_blobs(measure)

@case
def cr_stalled_watchers():
    """Never-reading watchers of a resource whose large objects are rewritten: what their
    queues keep alive of versions the history let go ($WATCHERS watches, each opened after
    another write, $VERSIONS versions)."""
    import socket as _s
    socks = []
    def measure(p, base):
        W = int(os.environ.get("WATCHERS", "3"))
        for k in range(int(os.environ.get("VERSIONS", "12"))):
            st, n = write_blob(k)
            if k < W:
                s = _s.socket(); s.setsockopt(_s.SOL_SOCKET, _s.SO_RCVBUF, 4096)
                s.connect(("127.0.0.1", PORT))
                s.sendall(f"GET {BLOBS}?watch=1&timeoutSeconds=3600 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
                socks.append(s)
            print(f"  v{k} status={st} hwm={hwm(p.pid)}", flush=True)
        settled(p, base, f"stalled watchers={W}")
        cache_metrics()
        st, w = req("GET", "/debug/watchers")
        for r in json.loads(w)["resources"]:
            if r["plural"] == "blobs": print({k: r[k] for k in ("history","totals","watchersByState","stalledWatchers")})
        print("after malloc_trim", trimmed(p), "alive", req("GET", "/readyz")[0], flush=True)
    try:
        with_blobs(measure)
    finally:
        for s in socks: s.close()

def _varint(n):
    out = b""
    while True:
        b = n & 0x7f; n >>= 7
        if n: out += bytes([b | 0x80])
        else: return out + bytes([b])
def _field(num, payload):
    return _varint(num << 3 | 2) + _varint(len(payload)) + payload

@case
def protobuf_empty_containers():
    n = (LIMIT - 2000) // 2
    spec = b"\x12\x00" * n
    pod = _field(1, _field(1, b"p")) + _field(2, spec)
    unknown = _field(1, _field(1, b"v1") + _field(2, b"Pod")) + _field(2, pod)
    body = b"k8s\x00" + unknown
    run(f"protobuf pod {n} empty containers", [], ("POST", NS+"/pods", "application/vnd.kubernetes.protobuf", body))

@case
def protobuf_empty_env():
    n = (LIMIT - 2000) // 2
    cont = _field(1, b"a") + _field(2, b"x") + b"\x3a\x00" * n   # env = field 7
    pod = _field(1, _field(1, b"p")) + _field(2, _field(2, cont))
    unknown = _field(1, _field(1, b"v1") + _field(2, b"Pod")) + _field(2, pod)
    body = b"k8s\x00" + unknown
    run(f"protobuf pod {n} empty env", [], ("POST", NS+"/pods", "application/vnd.kubernetes.protobuf", body))

@case
def protobuf_cm_empty_keys():
    # ConfigMap data = field 2 map<string,string>; entry {} -> key "" value ""
    n = (LIMIT - 2000) // 2
    cm = _field(1, _field(1, b"c")) + b"\x12\x00" * n
    unknown = _field(1, _field(1, b"v1") + _field(2, b"ConfigMap")) + _field(2, cm)
    body = b"k8s\x00" + unknown
    run(f"protobuf configmap {n} empty entries", [], ("POST", NS+"/configmaps", "application/vnd.kubernetes.protobuf", body))


if __name__ == "__main__":
    for name in sys.argv[1:] or CASES:
        try: CASES[name]()
        except Exception as e: print(name, "ERROR", e, flush=True)

#!/usr/bin/env python3
"""Creates CRDs against a watchkeeper (memory store) and prints threads, RSS and responsiveness after each step.

Usage: crd_cost.py BINARY PORT 100,500,1000,2000 --max-custom-resource-versions 100000
"""
import json, subprocess, sys, time, urllib.request

BIN, PORT = sys.argv[1], int(sys.argv[2])
steps = [int(x) for x in sys.argv[3].split(",")]
extra = sys.argv[4:]
base = f"http://127.0.0.1:{PORT}"
proc = subprocess.Popen([BIN, "serve", "--store", "memory", "--listen", f"127.0.0.1:{PORT}"] + extra,
                        stdout=subprocess.DEVNULL, stderr=open("/dev/null", "w"))

def req(method, path, body=None, accept="application/json"):
    data = json.dumps(body).encode() if body is not None else None
    r = urllib.request.Request(base + path, data=data, method=method,
                               headers={"Content-Type": "application/json", "Accept": accept})
    try:
        with urllib.request.urlopen(r, timeout=120) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()

for _ in range(600):
    try:
        if req("GET", "/readyz")[0] == 200:
            break
    except Exception:
        pass
    time.sleep(0.1)

def status():
    st = {}
    for line in open(f"/proc/{proc.pid}/status"):
        k, v = line.split(":", 1)
        st[k] = v.strip()
    return int(st["Threads"]), int(st["VmRSS"].split()[0])

def crd(i, versions=1):
    plural = f"things{i}"
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.m{i % 50}.example.com"},
            "spec": {"group": f"m{i % 50}.example.com", "scope": "Namespaced",
                     "names": {"plural": plural, "kind": f"Thing{i}"},
                     "versions": [{"name": f"v{n}", "served": True, "storage": n == 1,
                                   "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}
                                  for n in range(1, versions + 1)]}}

def timed(f):
    t = time.monotonic(); out = f(); return out, time.monotonic() - t

def report(label, n, create_s=None):
    threads, rss = status()
    _, kubectl = timed(lambda: subprocess.run(["kubectl", "--server", base, "get", "ns"], capture_output=True, check=True))
    (code, legacy), t_legacy = timed(lambda: req("GET", "/apis"))
    (code2, agg), t_agg = timed(lambda: req("GET", "/apis", accept="application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"))
    print(json.dumps({"step": label, "crds": n, "threads": threads, "rss_kib": rss,
                      "kubectl_get_ns_s": round(kubectl, 3), "apis_s": round(t_legacy, 3), "apis_bytes": len(legacy),
                      "aggregated_s": round(t_agg, 3), "aggregated_bytes": len(agg),
                      "create_ms_avg_last_batch": create_s}), flush=True)

report("start", 0)
n = 0
for step in steps:
    t0 = time.monotonic(); batch = 0
    while n < step:
        code, body = req("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd(n))
        if code != 201:
            print("create", n, code, body[:300], flush=True); break
        n += 1; batch += 1
    report(f"after {n}", n, round((time.monotonic() - t0) * 1000 / max(batch, 1), 1))
    if code != 201:
        break
if True:  # one CRD with many versions
    v = 100
    code, body = req("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd(999999, v))
    print("many-versions create", v, code, body[:200] if code != 201 else "", flush=True)
    report(f"after +1 CRD x {v} versions", n + 1)
proc.terminate(); proc.wait()

#!/usr/bin/env python3
"""Whether a write's cost grows with what is stored (BENCHMARKS invocations BM and BN).

Against a running server (PORT on 127.0.0.1, one keep-alive connection, sequential requests):

    write_scaling.py create KIND PORT N [--quota]   # N creates of KIND in `default`; ms per
                                                   # create for each block of 500
    write_scaling.py delete PORT N [--quota]        # N ConfigMaps, then the first 500 deleted
                                                   # one by one; ms per delete
    write_scaling.py nsdelete PORT N [--quota]      # namespace `big` with N ConfigMaps, then
                                                   # DELETE of it; seconds until it is gone

KIND is svc (ClusterIP Service), nodeport, cm, pod or ns. With --quota the namespace first gets
a ResourceQuota `q` of `count/configmaps: 100000` (counted ConfigMap writes). Start each run
on a fresh server, e.g. `watchkeeper serve --store memory --listen 127.0.0.1:PORT
--service-cluster-ip-range 10.96.0.0/16` (a /24 holds 238 Services).
"""
import http.client
import json
import sys
import time


def main():
    mode, args = sys.argv[1], sys.argv[2:]
    quota = "--quota" in args
    args = [a for a in args if a != "--quota"]
    kind = args.pop(0) if mode == "create" else "cm"
    port, n = int(args[0]), int(args[1])
    conn = http.client.HTTPConnection("127.0.0.1", port)

    def req(method, path, body=None):
        conn.request(method, path, json.dumps(body) if body is not None else None,
                     {"Content-Type": "application/json"})
        answer = conn.getresponse()
        return answer.status, answer.read()

    ns = "big" if mode == "nsdelete" else "default"
    if mode == "nsdelete":
        req("POST", "/api/v1/namespaces", {"metadata": {"name": ns}})
    if quota:
        status, body = req("POST", f"/api/v1/namespaces/{ns}/resourcequotas",
                           {"metadata": {"name": "q"},
                            "spec": {"hard": {"count/configmaps": "100000"}}})
        assert status == 201, body

    def create(i):
        path, obj = {
            "svc": ("services", {"spec": {"ports": [{"port": 80}]}}),
            "nodeport": ("services", {"spec": {"type": "NodePort", "ports": [{"port": 80}]}}),
            "cm": ("configmaps", {"data": {"a": "b"}}),
            "pod": ("pods", {"spec": {"containers": [{"name": "c", "image": "nginx"}]}}),
            "ns": (None, {}),
        }[kind]
        obj["metadata"] = {"name": f"{kind}{i}"}
        url = "/api/v1/namespaces" if path is None else f"/api/v1/namespaces/{ns}/{path}"
        status, body = req("POST", url, obj)
        if status != 201:
            sys.exit(f"create {i}: {status} {body[:300]!r}")

    last = time.time()
    for i in range(n):
        create(i)
        if mode == "create" and (i + 1) % 500 == 0:
            now = time.time()
            print(f"{kind} {i + 1}: {1000 * (now - last) / 500:.2f} ms/create", flush=True)
            last = now
    if mode == "delete":
        start = time.time()
        for i in range(min(500, n)):
            status, body = req("DELETE", f"/api/v1/namespaces/{ns}/configmaps/{kind}{i}")
            assert status == 200, body
        print(f"n={n}: {1000 * (time.time() - start) / min(500, n):.2f} ms/delete")
    elif mode == "nsdelete":
        start = time.time()
        req("DELETE", f"/api/v1/namespaces/{ns}")
        while req("GET", f"/api/v1/namespaces/{ns}")[0] != 404:
            time.sleep(0.05)
        print(f"n={n}: namespace gone in {time.time() - start:.2f} s")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The hostile mix (issue 18): every kind of careless or hostile client at once, against one
`watchkeeper` binary, with an admin's request latency measured beside them.

For DURATION seconds, together:
  - IDLE anonymous TCP connections that send nothing (closed by --request-header-timeout-ms,
    and opened again);
  - SLOW unauthorized writers: a POST announcing a 1 MiB body as a user with no rights,
    sending it 64 bytes at a time (403 before the body is read);
  - BOMBS patchers sending JSON patches whose `copy` operations would grow an object past
    kube-apiserver's copy limit (422);
  - LISTS connections that ask for the whole collection and never read;
  - WATCHES watches that never read, while a writer updates objects (events to queue);
  - the admin: a GET and a small LIST in a loop, in a process of its own; their latency is
    reported (p50/p99/max), beside the same loop run alone for --admin-baseline seconds first.

The server's resident set is sampled; its peak (VmHWM, reset after the objects are loaded)
is reported against the documented bound: the idle baseline, plus once the collection's
encodings (the first LIST's), plus per client the README's bounds (LIST: 8 bytes per item +
--list-chunk-bytes + 1 KiB + hyper's HTTP/1.1 buffer; watch: queue x 32 bytes + hyper's
buffer + 64 events + 64 KiB; any connection: 64 KiB; a patch in flight: body + object +
copy limit).

Usage:
    hostile_mix.py WATCHKEEPER_BINARY [--duration S] [--objects N] [--object-bytes B]
        [--idle N] [--slow N] [--bombs N] [--lists N] [--watches N] [--port P]
        [--admin-baseline S] [--max-connections N]

Standard library only; Linux (reads /proc).
"""

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

CM = "/api/v1/namespaces/default/configmaps"
KIB = 1024
MIB = 1024 * 1024


def status_kib(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


class Server:
    def __init__(self, binary, port, workdir, extra=()):
        tokens = os.path.join(workdir, "tokens.csv")
        with open(tokens, "w") as f:
            f.write('admin-token,admin,1,"system:masters"\n'
                    "patcher-token,patcher,2\nnobody-token,nobody,3\n")
        policy = os.path.join(workdir, "policy.jsonl")
        specs = [
            {"group": "system:masters", "namespace": "*", "resource": "*", "apiGroup": "*",
             "nonResourcePath": "*"},
            {"user": "patcher", "namespace": "bomb", "resource": "*", "apiGroup": "*"},
        ]
        with open(policy, "w") as f:
            f.write("\n".join(json.dumps({
                "apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy",
                "spec": spec}) for spec in specs))
        self.port = port
        self.proc = subprocess.Popen(
            [binary, "serve", "--store", "memory", "--listen", f"127.0.0.1:{port}",
             "--token-auth-file", tokens, "--authorization-policy-file", policy,
             "--request-header-timeout-ms", "5000", "--write-timeout-ms", "20000", *extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                if self.request("GET", "/readyz")[0] == 200:
                    return
            except OSError:
                time.sleep(0.2)
        sys.exit("server not ready")

    def request(self, method, path, body=None, token="admin-token",
                content_type="application/json"):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        headers = {"Authorization": f"Bearer {token}", "Content-Type": content_type}
        conn.request(method, path, body, headers)
        response = conn.getresponse()
        data = response.read()
        conn.close()
        return response.status, data


def configmap(name, namespace, payload):
    return json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": name, "namespace": namespace},
                       "data": {"payload": payload}})


def raw(port, head):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", port))
    if head:
        s.sendall(head.encode())
    return s


def admin_loop(port, seconds):
    """The admin's requests (a GET and a small LIST, 50 ms apart) for `seconds`, in a process of
    its own so that its latency is the server's and not this script's threads' (Python runs one
    thread at a time): prints {"ms": [...], "errors": N}."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"Authorization": "Bearer admin-token"}
    latencies, errors = [], 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for path in (f"{CM}/cm-000000", "/api/v1/namespaces/bomb/configmaps"):
            started = time.monotonic()
            try:
                conn.request("GET", path, headers=headers)
                response = conn.getresponse()
                response.read()
                ok = response.status == 200
            except OSError:
                ok = False
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            latencies.append((time.monotonic() - started) * 1000)
            errors += not ok
        time.sleep(0.05)
    print(json.dumps({"ms": latencies, "errors": errors}))


def start_admin(port, seconds):
    return subprocess.Popen([sys.executable, os.path.abspath(__file__), "--admin-loop",
                             str(port), str(seconds)], stdout=subprocess.PIPE)


def finish_admin(proc):
    out, _ = proc.communicate()
    result = json.loads(out)
    ms = sorted(result["ms"])
    return {
        "requests": len(ms),
        "errors": result["errors"],
        "p50_ms": round(statistics.median(ms), 2) if ms else None,
        "p99_ms": round(ms[max(int(len(ms) * 0.99) - 1, 0)], 2) if ms else None,
        "max_ms": round(ms[-1], 2) if ms else None,
    }


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--admin-loop":
        admin_loop(int(sys.argv[2]), float(sys.argv[3]))
        return
    p = argparse.ArgumentParser()
    p.add_argument("binary")
    p.add_argument("--duration", type=float, default=60)
    p.add_argument("--objects", type=int, default=2000)
    p.add_argument("--object-bytes", type=int, default=10 * KIB)
    p.add_argument("--idle", type=int, default=200)
    p.add_argument("--slow", type=int, default=50)
    p.add_argument("--bombs", type=int, default=4)
    p.add_argument("--lists", type=int, default=10)
    p.add_argument("--watches", type=int, default=200)
    p.add_argument("--port", type=int, default=18478)
    p.add_argument("--max-connections", type=int, default=None,
                   help="the server's --max-connections (default: its own, from the "
                        "descriptor limit)")
    p.add_argument("--admin-baseline", type=float, default=10,
                   help="seconds of the admin alone before the attack starts")
    a = p.parse_args()

    workdir = tempfile.mkdtemp(prefix="hostile-mix-")
    extra = [] if a.max_connections is None else ["--max-connections", str(a.max_connections)]
    server = Server(a.binary, a.port, workdir, extra)
    pid = server.proc.pid
    stop = threading.Event()
    counts = {"idle_opened": 0, "slow_refused": 0, "bombs_refused": 0, "writes": 0}
    lock = threading.Lock()

    def count(key, n=1):
        with lock:
            counts[key] += n

    try:
        payload = "x" * a.object_bytes
        for i in range(a.objects):
            status, _ = server.request("POST", CM, configmap(f"cm-{i:06d}", "default", payload))
            assert status == 201, status
        server.request("POST", "/api/v1/namespaces",
                       json.dumps({"apiVersion": "v1", "kind": "Namespace",
                                   "metadata": {"name": "bomb"}}))
        status, _ = server.request("POST", "/api/v1/namespaces/bomb/configmaps",
                                   configmap("target", "bomb", "y"), token="patcher-token")
        assert status == 201, status
        status, listed = server.request("GET", CM)
        list_bytes = len(listed)
        del listed
        time.sleep(3)
        baseline = status_kib(pid, "VmRSS")
        # The admin alone first, for the latency to compare with.
        quiet = finish_admin(start_admin(a.port, a.admin_baseline))
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
        threads = []

        def idle():
            while not stop.is_set():
                sockets = [raw(a.port, None) for _ in range(a.idle)]
                count("idle_opened", len(sockets))
                stop.wait(6)  # past the 5 s header timeout: closed by the server
                for s in sockets:
                    s.close()

        def slow():
            while not stop.is_set():
                try:
                    s = raw(a.port, f"POST {CM} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                    "Authorization: Bearer nobody-token\r\n"
                                    "Content-Type: application/json\r\n"
                                    f"Content-Length: {MIB}\r\n\r\n")
                    s.settimeout(10)
                    try:
                        for _ in range(20):
                            s.sendall(b"x" * 64)
                            stop.wait(0.1)
                    except OSError:
                        pass  # answered and closed before the body: the answer is readable
                    if b" 403 " in s.recv(4096):
                        count("slow_refused")
                    s.close()
                except OSError:
                    pass

        def bomb():
            patch = [{"op": "add", "path": "/metadata/annotations",
                      "value": {"a": "z" * (512 * KIB)}}]
            patch += [{"op": "copy", "from": "/metadata/annotations/a",
                       "path": f"/metadata/annotations/a{i}"} for i in range(12)]
            body = json.dumps(patch)
            while not stop.is_set():
                status, _ = server.request("PATCH", "/api/v1/namespaces/bomb/configmaps/target",
                                           body, token="patcher-token",
                                           content_type="application/json-patch+json")
                if status == 422:
                    count("bombs_refused")

        def writer():
            i = 0
            while not stop.is_set():
                name = f"cm-{i % a.objects:06d}"
                patch = json.dumps({"metadata": {"labels": {"round": str(i)}}})
                server.request("PATCH", f"{CM}/{name}", patch,
                               content_type="application/merge-patch+json")
                count("writes")
                i += 1
                stop.wait(0.05)

        held = []
        for _ in range(a.lists):
            held.append(raw(a.port, f"GET {CM} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                    "Authorization: Bearer admin-token\r\n\r\n"))
        for _ in range(a.watches):
            held.append(raw(a.port, f"GET {CM}?watch=true HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                    "Authorization: Bearer admin-token\r\n\r\n"))
        admin = start_admin(a.port, a.duration)
        for target, n in ((idle, 1), (slow, a.slow), (bomb, a.bombs), (writer, 1)):
            for _ in range(n):
                t = threading.Thread(target=target, daemon=True)
                t.start()
                threads.append(t)
        started = time.time()
        samples = []
        while time.time() - started < a.duration:
            samples.append(status_kib(pid, "VmRSS"))
            time.sleep(0.5)
        peak = status_kib(pid, "VmHWM")
        stop.set()
        for s in held:
            s.close()
        for t in threads:
            t.join(timeout=15)
        under_attack = finish_admin(admin)
        _, metrics = server.request("GET", "/metrics")
        refusals = [line for line in metrics.decode().splitlines()
                    if line.startswith("watchkeeper_limit_rejections_total")]

        event_bytes = a.object_bytes + 400
        hyper_buffer = MIB + 16 * KIB
        connection = 64 * KIB
        bound = (baseline * KIB + list_bytes
                 + a.lists * (8 * a.objects + 64 * KIB + KIB + hyper_buffer + connection)
                 + a.watches * (1000 * 32 + hyper_buffer + 64 * event_bytes + connection)
                 + (a.idle + a.slow + a.bombs + 2) * connection
                 + a.bombs * (3 * MIB + 2 * 512 * KIB + 3 * MIB))
        print(json.dumps({
            "load": {"duration_s": a.duration, "objects": a.objects,
                     "object_bytes": a.object_bytes, "idle": a.idle, "slow": a.slow,
                     "bombs": a.bombs, "lists": a.lists, "watches": a.watches,
                     "max_connections": a.max_connections},
            "list_bytes": list_bytes,
            "baseline_rss_mib": round(baseline / 1024, 1),
            "peak_rss_mib": round(peak / 1024, 1),
            "documented_bound_mib": round(bound / MIB, 1),
            "admin_alone": quiet,
            "admin_under_attack": under_attack,
            "counts": counts,
            "refusals": refusals,
        }, indent=2))
    finally:
        stop.set()
        server.proc.terminate()
        server.proc.wait()


if __name__ == "__main__":
    main()

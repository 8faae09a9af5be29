#!/usr/bin/env python3
"""The cost of one cache consistency check (issue 20) on a large resource.

Starts a `watchkeeper` binary (memory store by default, or `--etcd URL`), creates OBJECTS
ConfigMaps of about OBJECT_BYTES each (THREADS connections in parallel), waits until the
server has settled, then runs `POST /debug/consistency?resource=configmaps` CHECKS times and
reports, per check, the wall time of the request and the server process's CPU time (user +
system, from /proc/PID/stat) spent meanwhile, with their medians, the checked revision, the
object count and the status of each check. Other resources are not checked.

Usage:
    consistency_cost.py WATCHKEEPER_BINARY [--objects N] [--object-bytes B] [--checks C]
        [--threads T] [--port P] [--etcd URL]

Standard library only; Linux (reads /proc).
"""

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

PATH = "/api/v1/namespaces/default/configmaps"
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def wait_ready(port, proc):
    deadline = time.time() + 120
    while time.time() < deadline:
        if proc.poll() is not None:
            sys.exit(f"server exited with {proc.returncode}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/readyz")
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    sys.exit("server not ready")


def create(port, names, payload, errors):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    for name in names:
        body = json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": name}, "data": {"payload": payload}})
        conn.request("POST", PATH, body, {"Content-Type": "application/json"})
        response = conn.getresponse()
        response.read()
        if response.status != 201:
            errors.append((name, response.status))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binary")
    parser.add_argument("--objects", type=int, default=100_000)
    parser.add_argument("--object-bytes", type=int, default=1024)
    parser.add_argument("--checks", type=int, default=5)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--port", type=int, default=18479)
    parser.add_argument("--etcd", default=None, help="an etcd client URL (default: memory store)")
    args = parser.parse_args()

    data_dir = tempfile.mkdtemp(prefix="consistency-cost-")
    store = ["--store", "memory"] if args.etcd is None else [
        "--store", "etcd", "--etcd-endpoints", args.etcd,
        "--etcd-prefix", f"/consistency-cost-{os.getpid()}"]
    proc = subprocess.Popen(
        [args.binary, "serve", *store, "--data-dir", data_dir,
         "--listen", f"127.0.0.1:{args.port}", "--consistency-check-interval-ms", "0"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_ready(args.port, proc)
        started = time.time()
        payload = "x" * args.object_bytes
        names = [f"cm-{i:07d}" for i in range(args.objects)]
        errors = []
        threads = [threading.Thread(target=create,
                                    args=(args.port, names[t::args.threads], payload, errors))
                   for t in range(args.threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            sys.exit(f"{len(errors)} creates failed, first: {errors[0]}")
        created = time.time() - started
        time.sleep(2)
        checks = []
        conn = http.client.HTTPConnection("127.0.0.1", args.port, timeout=600)
        for _ in range(args.checks):
            cpu = cpu_seconds(proc.pid)
            began = time.monotonic()
            conn.request("POST", "/debug/consistency?resource=configmaps")
            response = conn.getresponse()
            report = json.loads(response.read())
            wall = time.monotonic() - began
            cpu = cpu_seconds(proc.pid) - cpu
            check = report["checks"][0]
            checks.append({"status": check["status"], "revision": check["revision"],
                           "objects": (check.get("cache") or {}).get("objects"),
                           "wall_ms": round(wall * 1000, 1), "cpu_ms": round(cpu * 1000, 1)})
        print(json.dumps({
            "binary": args.binary,
            "store": "memory" if args.etcd is None else "etcd",
            "objects": args.objects,
            "object_bytes": args.object_bytes,
            "create_seconds": round(created, 1),
            "loadavg": open("/proc/loadavg").read().split()[:3],
            "checks": checks,
            "median_wall_ms": statistics.median(c["wall_ms"] for c in checks),
            "median_cpu_ms": statistics.median(c["cpu_ms"] for c in checks),
        }, indent=2))
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    main()

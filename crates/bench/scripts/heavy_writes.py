#!/usr/bin/env python3
"""Heavy writes beside a light reader: another client's GET latency while C clients each send
large writes back to back, and the time a heavy write with `?timeout=` takes to get its 504.

Kinds of heavy write (--kind):
  managed  PUT of a ConfigMap whose metadata.managedFields is about --bytes of JSON
  smp      strategic merge PATCH of about --bytes (one data key per entry)
  small    a small JSON merge PATCH of a ConfigMap of about --bytes (created first), a write
           whose body does not announce its cost

For each concurrency in --clients (e.g. 2,4,8): C writer threads write for --seconds while a
reader process (its own interpreter, so the figures are the server's latency and not this
script's threads') GETs a small ConfigMap every 20 ms; prints the reader's p50/p99/max and the
writers' answers. Then, with --timeout, one heavy write with `?timeout=` while the writers run:
the seconds until its answer and the answer's code.

Usage:
    heavy_writes.py WATCHKEEPER_BINARY [--kind managed|smp] [--bytes B] [--clients 2,4,8]
        [--seconds S] [--timeout 1s] [--port P] [-- extra serve flags]

Standard library only.
"""

import argparse
import http.client
import json
import statistics
import subprocess
import sys
import threading
import time

CM = "/api/v1/namespaces/default/configmaps"


def call(port, method, path, body=None, content_type="application/json", timeout=120):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    conn.request(method, path, body, {"Content-Type": content_type})
    response = conn.getresponse()
    data = response.read()
    conn.close()
    return response.status, data


def managed_body(name, size):
    entries, total, index = [], 0, 0
    while total < size:
        entry = {"manager": f"manager-{index:06d}", "operation": "Update", "apiVersion": "v1",
                 "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:data": {f"f:key-{index:06d}": {}}}}
        total += len(json.dumps(entry))
        entries.append(entry)
        index += 1
    return json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": name, "managedFields": entries},
                       "data": {"a": "b"}}).encode()


def smp_body(size):
    data, total, index = {}, 0, 0
    while total < size:
        data[f"key-{index:06d}"] = "v" * 40
        total += 56
        index += 1
    return json.dumps({"data": data}).encode()


def heavy_request(kind, name, size):
    if kind == "managed":
        return "PUT", f"{CM}/{name}", managed_body(name, size), "application/json"
    if kind == "small":
        patch = json.dumps({"data": {"key-000000": str(time.monotonic())}}).encode()
        return "PATCH", f"{CM}/{name}", patch, "application/merge-patch+json"
    return ("PATCH", f"{CM}/{name}", smp_body(size),
            "application/strategic-merge-patch+json")


def reader(port, seconds):
    """GETs a small ConfigMap every 20 ms for `seconds`; prints {"ms": [...], "errors": N}."""
    latencies, errors = [], 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        started = time.monotonic()
        try:
            status, _ = call(port, "GET", f"{CM}/probe")
            errors += status != 200
        except OSError:
            errors += 1
        latencies.append((time.monotonic() - started) * 1000)
        time.sleep(0.02)
    print(json.dumps({"ms": latencies, "errors": errors}))


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p))]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binary")
    parser.add_argument("--kind", default="managed", choices=["managed", "smp", "small"])
    parser.add_argument("--bytes", type=int, default=1_400_000)
    parser.add_argument("--clients", default="2,4,8")
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--timeout", default="1s")
    parser.add_argument("--port", type=int, default=18443)
    parser.add_argument("--reader", action="store_true", help=argparse.SUPPRESS)
    args, extra = parser.parse_known_args()
    if args.reader:
        reader(args.port, args.seconds)
        return
    extra = [e for e in extra if e != "--"]
    server = subprocess.Popen(
        [args.binary, "serve", "--store", "memory", "--listen", f"127.0.0.1:{args.port}",
         *extra], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        run(args, server)
    finally:
        server.terminate()
        server.wait()


def run(args, server):
    port = args.port
    deadline = time.time() + 60
    while True:
        try:
            if call(port, "GET", "/readyz")[0] == 200:
                break
        except OSError:
            pass
        if time.time() > deadline or server.poll() is not None:
            sys.exit("server not ready")
        time.sleep(0.2)
    small = json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": "probe"}, "data": {"a": "b"}})
    assert call(port, "POST", CM, small)[0] == 201
    clients = [int(c) for c in args.clients.split(",")]
    for index in range(max(clients) + 1):
        data = json.loads(smp_body(args.bytes))["data"] if args.kind == "small" else {"a": "b"}
        body = json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": f"heavy-{index}"}, "data": data})
        assert call(port, "POST", CM, body)[0] == 201
    started = time.monotonic()
    method, path, body, content_type = heavy_request(args.kind, "heavy-0", args.bytes)
    status, _ = call(port, method, path, body, content_type)
    print(f"{args.kind} {len(body)} B alone: {status} in "
          f"{(time.monotonic() - started) * 1000:.0f} ms")
    for count in [0, *clients]:
        stop = threading.Event()
        answers = {}
        lock = threading.Lock()

        def writer(index):
            method, path, body, content_type = heavy_request(
                args.kind, f"heavy-{index}", args.bytes)
            while not stop.is_set():
                try:
                    status, _ = call(port, method, path, body, content_type)
                except OSError:
                    status = "error"
                with lock:
                    answers[status] = answers.get(status, 0) + 1

        threads = [threading.Thread(target=writer, args=(i,)) for i in range(count)]
        for thread in threads:
            thread.start()
        probe = subprocess.run(
            [sys.executable, __file__, "--reader", "--port", str(port), "--seconds",
             str(args.seconds), args.binary], capture_output=True, text=True, check=True)
        result = json.loads(probe.stdout)
        timed = None
        if count == max(clients) and args.timeout:
            method, path, body, content_type = heavy_request(
                args.kind, f"heavy-{max(clients)}", args.bytes)
            started = time.monotonic()
            status, _ = call(port, method, f"{path}?timeout={args.timeout}", body, content_type)
            timed = (status, time.monotonic() - started)
        stop.set()
        for thread in threads:
            thread.join()
        ms = result["ms"]
        print(f"{count} writers: GET p50 {statistics.median(ms):.1f} ms, "
              f"p99 {percentile(ms, 0.99):.1f} ms, max {max(ms):.1f} ms "
              f"({len(ms)} GETs, {result['errors']} errors); writers' answers {answers}")
        if timed:
            print(f"  heavy write with ?timeout={args.timeout}: {timed[0]} after "
                  f"{timed[1]:.2f} s")


if __name__ == "__main__":
    main()

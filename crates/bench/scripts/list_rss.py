#!/usr/bin/env python3
"""Peak server memory under concurrent LISTs whose clients never read (issue 18).

Starts a `watchkeeper` binary on the memory store, creates OBJECTS ConfigMaps of about
OBJECT_BYTES each, waits for the server to settle and takes its resident set (VmRSS) as the
idle baseline, resets the kernel's peak counter (VmHWM, `echo 5 > /proc/PID/clear_refs`), opens
LISTS HTTP/1.1 connections with a 4 KiB receive buffer that each ask for the whole collection
and never read, waits until the server's resident set has stopped growing, and reports the
peak over the baseline against one LIST's encoded size (read in full afterwards).

Usage:
    list_rss.py WATCHKEEPER_BINARY [--objects N] [--object-bytes B] [--lists L] [--port P]

Only the standard library; Linux only (reads /proc). The server's first LIST encodes every
object once and caches the encoding in the object (shared by every later LIST and watch), so
about one list's size of the peak is that cache being filled; the rest is what the LISTs hold.
"""

import argparse
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

PATH = "/api/v1/namespaces/default/configmaps"


def status_kib(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def wait_ready(port, proc):
    deadline = time.time() + 60
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


def settle(pid, quiet_seconds=3.0, limit_seconds=60.0):
    """Waits until VmRSS has not changed by more than 1 MiB for quiet_seconds."""
    start = time.time()
    last = status_kib(pid, "VmRSS")
    stable_since = time.time()
    while time.time() - start < limit_seconds:
        time.sleep(0.25)
        now = status_kib(pid, "VmRSS")
        if abs(now - last) > 1024:
            last = now
            stable_since = time.time()
        elif time.time() - stable_since >= quiet_seconds:
            return now
    return status_kib(pid, "VmRSS")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binary")
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--object-bytes", type=int, default=10 * 1024)
    parser.add_argument("--lists", type=int, default=10)
    parser.add_argument("--port", type=int, default=18477)
    args = parser.parse_args()

    data_dir = tempfile.mkdtemp(prefix="list-rss-")
    proc = subprocess.Popen(
        [args.binary, "serve", "--store", "memory", "--data-dir", data_dir,
         "--listen", f"127.0.0.1:{args.port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_ready(args.port, proc)
        pid = proc.pid
        started = time.time()
        conn = http.client.HTTPConnection("127.0.0.1", args.port, timeout=60)
        payload = "x" * args.object_bytes
        for i in range(args.objects):
            body = json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                               "metadata": {"name": f"cm-{i:07d}"},
                               "data": {"payload": payload}})
            conn.request("POST", PATH, body, {"Content-Type": "application/json"})
            response = response_read(conn)
            if response != 201:
                sys.exit(f"create {i}: {response}")
        conn.close()
        created = time.time() - started
        baseline = settle(pid)
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
        sockets = []
        for _ in range(args.lists):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.connect(("127.0.0.1", args.port))
            s.sendall(f"GET {PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
            sockets.append(s)
        held = settle(pid)
        peak = status_kib(pid, "VmHWM")
        for s in sockets:
            s.close()
        after = settle(pid)
        conn = http.client.HTTPConnection("127.0.0.1", args.port, timeout=120)
        conn.request("GET", PATH)
        response = conn.getresponse()
        list_bytes = len(response.read())
        conn.close()
        over = (peak - baseline) * 1024
        print(json.dumps({
            "binary": args.binary,
            "objects": args.objects,
            "object_bytes": args.object_bytes,
            "lists": args.lists,
            "create_seconds": round(created, 1),
            "list_bytes": list_bytes,
            "baseline_rss_mib": round(baseline / 1024, 1),
            "held_rss_mib": round(held / 1024, 1),
            "peak_rss_mib": round(peak / 1024, 1),
            "after_close_rss_mib": round(after / 1024, 1),
            "peak_over_baseline_mib": round(over / 2**20, 1),
            "peak_over_baseline_per_list_size": round(over / list_bytes, 3),
        }, indent=2))
    finally:
        proc.terminate()
        proc.wait()


def response_read(conn):
    response = conn.getresponse()
    response.read()
    return response.status


if __name__ == "__main__":
    main()

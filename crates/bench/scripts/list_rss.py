#!/usr/bin/env python3
"""Peak server memory under concurrent LISTs whose clients never read (issue 18).

Starts a `watchkeeper` binary on the memory store, creates OBJECTS ConfigMaps of about
OBJECT_BYTES each, waits for the server to settle and takes its resident set (VmRSS) as the
idle baseline, resets the kernel's peak counter (VmHWM, `echo 5 > /proc/PID/clear_refs`), opens
LISTS HTTP/1.1 connections with a 4 KiB receive buffer that each ask for the whole collection
and never read, waits until the server's resident set has stopped growing, and reports the
peak over the baseline against one LIST's encoded size (read in full afterwards).

With --http2, the LISTS requests are streams of ONE cleartext HTTP/2 connection (prior
knowledge) whose client announces a stream window of 0 and never opens it: the server may only
buffer what its send buffer allows per stream (`--http2-max-send-buffer-bytes`). The client
acknowledges the server's SETTINGS and PINGs (so keep-alive does not close it) and reads
nothing else.

Usage:
    list_rss.py WATCHKEEPER_BINARY [--objects N] [--object-bytes B] [--lists L] [--port P]
        [--http2]

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
import struct
import tempfile
import threading
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


def h2_frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(
        ">I", stream) + payload


def hpack_literal(index, value):
    """A header field without indexing, its name from the static table entry `index` (< 15),
    its value a plain string (< 127 bytes)."""
    data = value.encode()
    assert index < 15 and len(data) < 127
    return bytes([index, len(data)]) + data


def h2_unread_lists(port, streams):
    """One HTTP/2 connection asking for the list on `streams` streams with a stream window of
    0; a thread answers the server's SETTINGS and PINGs and counts the response heads
    (`answered[0]`). Returns the socket and that counter."""
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
              + h2_frame(4, 0, 0, struct.pack(">HI", 4, 0)))  # INITIAL_WINDOW_SIZE = 0
    # :method GET (static 2), :scheme http (static 6), :path (4), :authority (1).
    block = b"\x82\x86" + hpack_literal(4, PATH) + hpack_literal(1, "127.0.0.1")
    for i in range(streams):
        s.sendall(h2_frame(1, 0x5, 2 * i + 1, block))  # END_STREAM | END_HEADERS

    answered = [0]

    def answer():
        buffer = b""
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    return
                buffer += chunk
                while len(buffer) >= 9:
                    length = int.from_bytes(buffer[:3], "big")
                    if len(buffer) < 9 + length:
                        break
                    kind, flags = buffer[3], buffer[4]
                    payload = buffer[9:9 + length]
                    buffer = buffer[9 + length:]
                    if kind == 1:
                        answered[0] += 1
                    elif kind == 4 and not flags & 1:
                        s.sendall(h2_frame(4, 1, 0))
                    elif kind == 6 and not flags & 1:
                        s.sendall(h2_frame(6, 1, 0, payload))
        except OSError:
            return

    threading.Thread(target=answer, daemon=True).start()
    return s, answered


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binary")
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--object-bytes", type=int, default=10 * 1024)
    parser.add_argument("--lists", type=int, default=10)
    parser.add_argument("--port", type=int, default=18477)
    parser.add_argument("--http2", action="store_true")
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
        answered = None
        sockets = []
        if args.http2:
            h2, answered = h2_unread_lists(args.port, args.lists)
            sockets.append(h2)
        for _ in range(0 if args.http2 else args.lists):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.connect(("127.0.0.1", args.port))
            s.sendall(f"GET {PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
            sockets.append(s)
        held = settle(pid)
        peak = status_kib(pid, "VmHWM")
        answered = list(answered) if answered else None
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
            "transport": "one HTTP/2 connection" if args.http2 else "HTTP/1.1 connections",
            "http2_streams_answered": answered[0] if answered else None,
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

#!/usr/bin/env python3
"""Watches with expensive selectors (hostile audit, candidate 1): does one user's watches with
long selectors delay another user's watcher of the same resource?

Against one `watchkeeper serve --store memory` (started here):
  - the hostile user (anonymous, from 127.0.0.1) opens WATCHES watches of ConfigMaps, each with
    a label (or field) selector of REQS requirements that every event's object passes but the
    last (`!a00001,...,!aNNNNN,zzz=1`, or `metadata.name!=aN,...,metadata.name=zzz`), so each
    event costs each of them a full evaluation and is delivered to none; they read and discard;
  - the healthy user (anonymous, from 127.0.0.2) watches the same ConfigMaps with no selector
    and GETs one ConfigMap in a loop;
  - a writer (127.0.0.3) merge-patches a ConfigMap RATE times a second for DURATION seconds,
    its send time in the object.
Reports the healthy watcher's event latency (p50/p99/max, and how long after the writer's
last write its last event came), the healthy GET latency and the server's RSS.

Usage: watch_selectors.py BINARY [--watches N] [--reqs N] [--field] [--rate R]
           [--duration S] [--port P] [--flags "SERVER FLAGS"]
(1000 such watches of one user need `--flags "--max-watch-query-bytes-per-user 0
--max-watch-query-bytes 0"`: by default its 65th is refused.)
Standard library only; Linux (reads /proc).
"""

import argparse
import asyncio
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time

CM = "/api/v1/namespaces/default/configmaps"


def rss_mb(pid, field="VmRSS"):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return 0.0


def selector(reqs, field):
    if field:
        terms = [f"metadata.name!=a{i:05}" for i in range(reqs - 1)]
        return "fieldSelector=" + ",".join(terms + ["metadata.name=zzz"])
    terms = [f"!a{i:05}" for i in range(reqs - 1)]
    return "labelSelector=" + ",".join(terms + ["zzz=1"])


async def open_watch(port, source, query):
    while True:
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", port, local_addr=(source, 0))
        writer.write(f"GET {CM}?watch=1&{query} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n"
                     .encode())
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        if status == 200:
            return reader, writer
        writer.close()
        if status != 429:
            raise SystemExit(f"watch refused: {head[:200]!r}")
        await asyncio.sleep(0.2)


async def drain(reader):
    try:
        while await reader.read(65536):
            pass
    except (ConnectionError, asyncio.IncompleteReadError):
        pass


async def healthy_watch(port, latencies, stop):
    reader, _ = await open_watch(port, "127.0.0.2", "resourceVersion=0")
    buffer = b""
    while not stop.is_set():
        try:
            chunk = await asyncio.wait_for(reader.read(65536), 1)
        except asyncio.TimeoutError:
            continue
        if not chunk:
            return
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if not line.strip().startswith(b"{"):
                continue  # chunk sizes
            event = json.loads(line)
            sent = (event["object"].get("data") or {}).get("sent")
            if sent and event["object"]["metadata"]["name"] == "w":
                latencies.append((time.time() - float(sent), time.time()))


def writer(port, rate, duration, done):
    conn = http.client.HTTPConnection("127.0.0.1", port, source_address=("127.0.0.3", 0))
    conn.request("POST", CM, json.dumps({"metadata": {"name": "w"}}),
                 {"Content-Type": "application/json"})
    conn.getresponse().read()
    start = time.time()
    n = 0
    while time.time() - start < duration:
        body = json.dumps({"data": {"sent": repr(time.time())}})
        conn.request("PATCH", CM + "/w", body,
                     {"Content-Type": "application/merge-patch+json"})
        conn.getresponse().read()
        n += 1
        pause = start + n / rate - time.time()
        if pause > 0:
            time.sleep(pause)
    done.append((time.time(), n))


def getter(port, latencies, stop):
    conn = http.client.HTTPConnection("127.0.0.1", port, source_address=("127.0.0.2", 0))
    while not stop.is_set():
        t = time.time()
        conn.request("GET", CM + "/w")
        conn.getresponse().read()
        latencies.append(time.time() - t)
        time.sleep(0.05)


def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


async def main():
    p = argparse.ArgumentParser()
    p.add_argument("binary")
    p.add_argument("--watches", type=int, default=1000)
    p.add_argument("--reqs", type=int, default=8000)
    p.add_argument("--field", action="store_true")
    p.add_argument("--rate", type=float, default=100)
    p.add_argument("--duration", type=float, default=10)
    p.add_argument("--port", type=int, default=25640)
    p.add_argument("--flags", default="")
    a = p.parse_args()
    server = subprocess.Popen(
        [a.binary, "serve", "--store", "memory", "--listen", f"127.0.0.1:{a.port}", *a.flags.split()],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            try:
                socket.create_connection(("127.0.0.1", a.port), 1).close()
                break
            except OSError:
                time.sleep(0.1)
        base = rss_mb(server.pid)
        query = selector(a.reqs, a.field)
        hostile = []
        for start in range(0, a.watches, 50):
            hostile += await asyncio.gather(*[
                open_watch(a.port, "127.0.0.1", query)
                for _ in range(start, min(a.watches, start + 50))])
        drains = [asyncio.create_task(drain(r)) for r, _ in hostile]
        opened = rss_mb(server.pid)
        stop = threading.Event()
        astop = asyncio.Event()
        events, gets, done = [], [], []
        watch = asyncio.create_task(healthy_watch(a.port, events, astop))
        await asyncio.sleep(1)
        threading.Thread(target=getter, args=(a.port, gets, stop), daemon=True).start()
        w = threading.Thread(target=writer, args=(a.port, a.rate, a.duration, done))
        w.start()
        cpu0 = sum(map(int, open(f"/proc/{server.pid}/stat").read().split()[13:15]))
        while w.is_alive():
            await asyncio.sleep(0.2)
        end, written = done[0]
        # Wait (bounded) for the healthy watcher to see the last write.
        deadline = time.time() + 600
        while time.time() < deadline and len(events) < written:
            await asyncio.sleep(0.2)
        cpu1 = sum(map(int, open(f"/proc/{server.pid}/stat").read().split()[13:15]))
        stop.set()
        astop.set()
        lat = [x for x, _ in events]
        last = events[-1][1] - end if events else float("nan")
        print(f"watches={a.watches} reqs={a.reqs} field={a.field} selector_bytes={len(query)} "
              f"rate={a.rate} duration={a.duration} written={written} seen={len(events)}")
        print(f"healthy watch event latency ms: p50={pct(lat, .5)*1e3:.1f} "
              f"p99={pct(lat, .99)*1e3:.1f} max={max(lat, default=float('nan'))*1e3:.1f}; "
              f"last event {last:.2f}s after the last write")
        print(f"healthy GET ms: p50={pct(gets, .5)*1e3:.1f} p99={pct(gets, .99)*1e3:.1f} "
              f"max={max(gets, default=float('nan'))*1e3:.1f} (n={len(gets)})")
        print(f"server CPU s during writes+drain: {(cpu1 - cpu0) / os.sysconf('SC_CLK_TCK'):.1f}")
        print(f"RSS MB: idle={base:.0f} watches_open={opened:.0f} "
              f"end={rss_mb(server.pid):.0f} peak={rss_mb(server.pid, 'VmHWM'):.0f}")
        for t in drains:
            t.cancel()
        watch.cancel()
    finally:
        server.kill()
        server.wait()


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))

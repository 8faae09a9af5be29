#!/usr/bin/env python3
"""Probe: start a fresh server, run setup requests, send one hostile request, report VmHWM."""
import http.client, json, os, subprocess, sys, tempfile, time

BIN = os.environ.get("WK", os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../../target/debug/watchkeeper"))
PORT = int(os.environ.get("PORT", "24110"))
LIMIT = 3 * 1024 * 1024

def hwm(pid):
    out = {}
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(("VmHWM", "VmRSS")):
            k, v = line.split(":"); out[k] = int(v.split()[0]) // 1024
    return out

def req(method, path, ctype="application/json", body=b"", timeout=300):
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=timeout)
    h = {"Content-Type": ctype} if body else {}
    c.request(method, path, body=body, headers=h)
    r = c.getresponse(); data = r.read(); c.close()
    return r.status, data

def start(extra):
    d = tempfile.mkdtemp(dir="/dev/shm")
    p = subprocess.Popen([BIN, "serve", "--listen", f"127.0.0.1:{PORT}", "--store", "memory",
                          "--data-dir", d] + extra, stdout=subprocess.DEVNULL, stderr=open(os.environ.get("SERVER_ERR", "/dev/null"), "w"))
    for _ in range(600):
        try:
            if req("GET", "/readyz")[0] == 200: break
        except Exception: pass
        time.sleep(0.1)
    return p

def run(name, setup, hostile, extra=()):
    p = start(list(extra))
    try:
        for s in setup:
            st, data = req(*s)
            if st >= 300: print("  setup", s[0], s[1], st, data[:200])
        time.sleep(0.5)
        base = hwm(p.pid)
        t = time.time()
        method, path, ctype, body = hostile
        st, data = req(method, path, ctype, body)
        dt = time.time() - t
        after = hwm(p.pid)
        try: msg = json.loads(data).get("message", "")[:150] if st >= 300 else ""
        except Exception: msg = data[:150]
        alive = req("GET", "/readyz")[0]
        print(f"{name:40s} sent={len(body):>8d} hwm {base['VmHWM']:>5d}->{after['VmHWM']:>5d} MB rss={after['VmRSS']} "
              f"status={st} resp={len(data)}B t={dt:.1f}s alive={alive} {msg!r}", flush=True)
    finally:
        p.terminate()
        try: p.wait(15)
        except subprocess.TimeoutExpired: p.kill(); p.wait()

def fill(prefix, item_fn, suffix, limit=LIMIT - 1024):
    """Body = prefix + item,item,... + suffix within limit."""
    parts = []; size = len(prefix) + len(suffix); i = 0
    while True:
        it = item_fn(i)
        if size + len(it) + 1 > limit: break
        parts.append(it); size += len(it) + 1; i += 1
    return (prefix + ",".join(parts) + suffix).encode(), i

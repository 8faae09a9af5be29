#!/usr/bin/env python3
"""How much of a server thread's stack the deepest objects touch.

Starts `watchkeeper serve` (WK, default target/debug/watchkeeper; memory store; PORT, default
25250), serves a Widget CRD whose objects keep unknown fields, then runs every path a body nested
to Go's 10,000 levels takes (create, get as JSON / YAML / Table, a watch, merge patch, JSON
patch, server-side apply, update, objects and arrays, a delete; a CEL rule compares the spec) and reads /proc/PID/smaps: a
thread's stack is one anonymous mapping of `core::stack::THREAD_STACK` bytes, and its resident
pages are what its deepest walk touched (the pages stay resident); a cache's dispatcher and
catch-up threads have `core::stack::CACHE_THREAD_STACK`. Prints the largest resident stack per
kind of thread, the mappings' sizes and how many threads there are.

    WK=target/release/watchkeeper python3 crates/bench/scripts/deep_stack.py
"""
import http.client, json, os, re, subprocess, sys, tempfile, time

BIN = os.environ.get("WK", "target/debug/watchkeeper")
PORT = int(os.environ.get("PORT", "25250"))
LEVELS = 9_999  # the body nests one level more: Go's 10,000
# core::stack::THREAD_STACK: 32 MiB in a release build, 128 MiB in a debug build
STACK_KB = int(os.environ.get("STACK_MIB", "32" if "/release/" in BIN else "128")) * 1024
# core::stack::CACHE_THREAD_STACK (a cache's dispatcher and catch-up threads): 2 / 8 MiB
CACHE_STACK_KB = int(os.environ.get("CACHE_STACK_MIB", "2" if "/release/" in BIN else "8")) * 1024


def req(method, path, ctype="application/json", body=b"", headers=None):
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=600)
    h = dict(headers or {})
    if body:
        h["Content-Type"] = ctype
    c.request(method, path, body=body, headers=h)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


def widget(name, leaf, arrays=False, extra_meta=""):
    if arrays:
        spec = "[" * LEVELS + str(leaf) + "]" * LEVELS
    else:
        spec = '{"a":' * LEVELS + str(leaf) + "}" * LEVELS
    return (
        '{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"%s"%s},"spec":%s}'
        % (name, extra_meta, spec)
    ).encode()


def by_thread(pid):
    """{thread name: [resident kB of its stack]}: each thread's stack is the mapping holding
    the stack pointer it sleeps with (/proc/PID/task/TID/syscall)."""
    maps = []
    for line in open(f"/proc/{pid}/smaps"):
        m = re.match(r"^([0-9a-f]+)-([0-9a-f]+) ", line)
        if m:
            maps.append([int(m.group(1), 16), int(m.group(2), 16), 0])
        elif line.startswith("Rss:") and maps:
            maps[-1][2] = int(line.split()[1])
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            name = open(f"/proc/{pid}/task/{tid}/comm").read().strip()
            fields = open(f"/proc/{pid}/task/{tid}/syscall").read().split()
        except OSError:
            continue
        if len(fields) < 3 or fields[0] == "running":
            continue
        sp = int(fields[-2], 16)
        rss = next((r for lo, hi, r in maps if lo <= sp < hi), 0)
        out.setdefault(re.sub(r"[-_]?\d+$", "", name), []).append(rss)
    return out


def stacks(pid, size_kb=None):
    """(size kB, rss kB) of every anonymous mapping of a thread stack's size (STACK_MIB): the
    threads' stacks and `core::stack`'s segments while a walk runs on one."""
    size_kb = size_kb or STACK_KB
    out, cur = [], None
    for line in open(f"/proc/{pid}/smaps"):
        m = re.match(r"^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ (\d+)\s*(.*)$", line)
        if m:
            cur = {"anon": m.group(5) == "" or m.group(5).startswith("[stack"), "size": 0, "rss": 0}
            out.append(cur)
        elif cur is not None and line.startswith(("Size:", "Rss:")):
            key = "size" if line.startswith("Size:") else "rss"
            cur[key] = int(line.split()[1])
    return [(s["size"], s["rss"]) for s in out if s["anon"] and s["size"] == size_kb]


def cache_stacks(pid):
    """[`stacks`] of a cache thread's size (CACHE_STACK_MIB)."""
    return stacks(pid, CACHE_STACK_KB)


def main():
    d = tempfile.mkdtemp(dir="/dev/shm")
    p = subprocess.Popen(
        [BIN, "serve", "--listen", f"127.0.0.1:{PORT}", "--store", "memory", "--data-dir", d],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            try:
                if req("GET", "/readyz")[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.1)
        crd = {
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                     "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": {
                                       "type": "object",
                                       "x-kubernetes-preserve-unknown-fields": True,
                                       "x-kubernetes-validations": [
                                           {"rule": "self.spec == self.spec"}]}}}]}}
        st, _ = req("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                    body=json.dumps(crd).encode())
        assert st == 201, st
        base = "/apis/example.com/v1/namespaces/default/widgets"
        for _ in range(600):
            st, _ = req("GET", base)
            if st == 200:
                break
            time.sleep(0.1)
        watch = http.client.HTTPConnection("127.0.0.1", PORT, timeout=600)
        watch.request("GET", base + "?watch=1")
        watch_answer = watch.getresponse()
        steps = [
            ("create", "POST", base, "application/json", widget("deep", 1), None),
            ("get json", "GET", base + "/deep", "", b"", None),
            ("get yaml", "GET", base + "/deep", "", b"", {"Accept": "application/yaml"}),
            ("get table", "GET", base + "/deep", "", b"",
             {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}),
            ("list", "GET", base, "", b"", None),
            ("merge patch", "PATCH", base + "/deep", "application/merge-patch+json",
             widget("deep", 2), None),
            ("json patch", "PATCH", base + "/deep", "application/json-patch+json",
             ('[{"op":"replace","path":"/spec%s","value":3}]' % ("/a" * LEVELS)).encode(), None),
            ("apply", "PATCH", base + "/deep?fieldManager=deep&force=true",
             "application/apply-patch+yaml", widget("deep", 4), None),
            ("update", "PUT", base + "/deep", "application/json", None, None),
            ("arrays", "POST", base, "application/json", widget("arrays", 6, arrays=True), None),
            ("arrays yaml", "GET", base + "/arrays", "", b"", {"Accept": "application/yaml"}),
            ("delete", "DELETE", base + "/deep", "", b"", None),
        ]
        worst = 0
        for name, method, path, ctype, body, headers in steps:
            if body is None:  # an update of what is stored
                _, now = req("GET", path)
                version = re.search(rb'"resourceVersion":"(\d+)"', now).group(1).decode()
                body = widget("deep", 5, extra_meta=',"resourceVersion":"%s"' % version)
            t = time.time()
            st, data = req(method, path, ctype, body, headers)
            now = max(r for _, r in stacks(p.pid))
            worst = max(worst, now)
            print(f"{name:12s} {st} {len(data):>9d} B {time.time() - t:6.2f} s  "
                  f"largest resident stack now {now / 1024:6.2f} MiB", flush=True)
            assert st < 300, data[:300]
        watch.close()
        for name, sizes in sorted(by_thread(p.pid).items()):
            print(f"  {name:28s} {len(sizes):3d} threads, resident stack largest "
                  f"{max(sizes) / 1024:6.2f} MiB, sum {sum(sizes) / 1024:7.2f} MiB")
        found = stacks(p.pid)
        sizes = sorted({s for s, _ in found})
        cache = [r for s, r in cache_stacks(p.pid)]
        print(f"cache threads' stack mappings: {len(cache)} of {CACHE_STACK_KB} kB, resident "
              f"largest {max(cache, default=0) / 1024:.2f} MiB, sum {sum(cache) / 1024:.2f} MiB")
        print(f"threads' stack mappings: {len(found)} of {sizes} kB; "
              f"resident now: largest {max(r for _, r in found) / 1024:.2f} MiB, "
              f"sum {sum(r for _, r in found) / 1024:.2f} MiB; largest after any step "
              f"{worst / 1024:.2f} MiB")
    finally:
        p.terminate()
        p.wait(30)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Schemathesis against the server's own OpenAPI v3 documents, every finding triaged.

Run through `schemathesis_run.sh` (which installs the pinned schemathesis in a virtualenv under
the cargo target directory); by hand:

    WK=target/debug/watchkeeper crates/server/tests/python/schemathesis_run.sh
    WK=... SEED=7 N=25 GV="api/v1 apis/apps/v1" crates/server/tests/python/schemathesis_run.sh

For each group/version of `/openapi/v3` (GV: a space-separated subset; default every one, a
custom resource's included) a fresh `watchkeeper serve --store memory` on a free loopback port
(fresh, so one group's deletes and creates do not change what the next one sees and a run is
the same from one time to the next) gets a CustomResourceDefinition of its own, then
`schemathesis run` on that group/version's document: every operation, `N` examples each
(default 10), seed `SEED` (default 1), one worker, the phases `PHASES` (default examples,
fuzzing, stateful; `coverage` — every schema keyword of every field broken one at a time, some
10,000 requests for a pod's create alone — is for a longer run by hand, about 40 minutes:
PHASES=examples,coverage,fuzzing,stateful), no cache or example database kept between runs
(schemathesis.toml), so a seed sends the same requests every time (bar multipart boundaries),
the checks

- `not_a_server_error`, `response_schema_conformance`, `content_type_conformance` (schemathesis's),
- `use_after_free`, `ensure_resource_availability` (stateful: a deleted object is gone, a
  created one can be read),
- `kube_success_codes`, `kube_status_errors` (schemathesis_hooks.py: schemathesis's
  `status_code_conformance` without the 4xx that kube's documents never declare, and every
  error a Status with its code). A list with `watch` gets `timeoutSeconds=1` (the hooks'
  `before_call`): a watch is read to its end.

Schemathesis runs with one worker: with two, 4.32.5 on Python 3.11 failed with a runtime error
of its own ("AST constructor recursion depth mismatch", hypothesis describing a lambda).

Every failing check of every response is read back from schemathesis's NDJSON report and
matched against SUPPRESSIONS below: findings that are kube-apiserver's own behaviour, each
with why. Anything else — or a schemathesis error, a reference a document does not resolve, a
server that exits — is printed with a curl command that reproduces it, and the exit status is 1.
Reports stay in OUT (default $CARGO_TARGET_DIR/schemathesis/out).
"""

import base64
import glob
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
BIN = os.environ.get("WK", "target/debug/watchkeeper")
ST = os.environ.get("SCHEMATHESIS", "schemathesis")
SEED = os.environ.get("SEED", "1")
N = os.environ.get("N", "10")
PHASES = os.environ.get("PHASES", "examples,fuzzing,stateful")
GV = os.environ.get("GV", "").split()
OUT = os.environ.get("OUT", os.path.join(os.environ.get("CARGO_TARGET_DIR", "target"), "schemathesis", "out"))
# The `proxy` subresources' connect operations (`pods/{name}/proxy[/{path}]`, services',
# nodes') are left out. Their kube answers are 5xx by design when a backend is missing or
# unreachable (kube's 503 `no endpoints available for service "s"`, `error trying to reach
# service: ...`, a node's 500 `no preferred addresses found; ...`), which `not_a_server_error`
# would report, and an object the fuzzer made could point them at any address on the network
# (a connection to it waits up to --proxy-connect-timeout-ms). They are tested against a real
# backend in crates/server/tests/proxy_subresources.rs.
PROXY_PATHS = r"/proxy(/\{path\})?$"
CHECKS = [
    "not_a_server_error",
    "response_schema_conformance",
    "content_type_conformance",
    "use_after_free",
    "ensure_resource_availability",
    "kube_success_codes",
    "kube_status_errors",
]

# A custom resource with a schema of every shape (int-or-string, nullable, maps, lists, a
# status subresource), so a custom group/version is fuzzed with the built-in ones.
CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.fuzz.example.com"},
    "spec": {
        "group": "fuzz.example.com",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
        "versions": [{
            "name": "v1",
            "served": True,
            "storage": True,
            "subresources": {"status": {}},
            "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {
                    "spec": {
                        "type": "object",
                        "properties": {
                            "size": {"type": "integer", "minimum": 0, "maximum": 100},
                            "port": {"x-kubernetes-int-or-string": True},
                            "color": {"type": "string", "enum": ["red", "blue"]},
                            "note": {"type": "string", "nullable": True, "maxLength": 20},
                            "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
                            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                        },
                    },
                    "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}},
                },
            }},
        }],
    },
}


def suppressed_watch_body(f):
    """A watch answers a stream of `WatchEvent`s where kube's documents declare the list (kube's
    own imprecision: its list operations carry `watch` as a parameter and the List schema for
    every media type, `application/json;stream=watch` included)."""
    return f["check"] in ("response_schema_conformance",) and f["method"] == "GET" and f["watch"]


# Fields that kube-apiserver writes as `null` though its documents declare them non-nullable:
# Go struct fields without `omitempty` whose nil value encoding/json writes as null.
GO_NULL_FIELDS = {
    # metav1.Time is a struct, so `omitempty` keeps it: a zero creation time is `null`
    # (component statuses are made up on each read and have none, in kube too).
    ("io.k8s.apimachinery.pkg.apis.meta.v1.Time", "string"),
    # EndpointSlice's `endpoints` and `ports` are `json:"endpoints"`, `json:"ports"`.
    ("io.k8s.api.discovery.v1.EndpointSlice/properties/ports", "array"),
    ("io.k8s.api.discovery.v1.EndpointSlice/properties/endpoints", "array"),
}


def suppressed_go_null(f):
    if f["check"] != "response_schema_conformance":
        return False
    m = re.match(r'null is not of type "(\w+)"', f["message"])
    if not m:
        return False
    at = re.search(r"Schema at /components/schemas/(\S+?):", f["message"])
    return bool(at) and (at.group(1), m.group(1)) in GO_NULL_FIELDS


# Kinds whose kube store answers a delete with the deleted object (`ReturnDeletedObject: true`
# in pkg/registry/.../storage): services.
RETURNS_DELETED_OBJECT = {"Service"}


def suppressed_delete_answers_the_object(f):
    """A delete that does not remove the object at once (a finalizer, a namespace's content)
    answers the object, its `deletionTimestamp` set, as kube-apiserver's generic store does
    (registry/generic/registry/store.go `Delete` returns the object when it is not deleted
    immediately, the namespace store likewise), and so does every delete of a kind whose store
    returns the deleted object; kube's documents declare `Status` for it."""
    body = f["body"] if isinstance(f["body"], dict) else {}
    kind = body.get("kind")
    return (f["check"] == "response_schema_conformance" and f["method"] == "DELETE"
            and kind not in (None, "Status")
            and (kind in RETURNS_DELETED_OBJECT
                 or bool((body.get("metadata") or {}).get("deletionTimestamp"))))


def suppressed_componentstatus_500(f):
    """`GET /api/v1/componentstatuses/NAME` of a name that is not a component: kube's
    componentstatus REST returns `fmt.Errorf("Component not found: %s")`, which
    responsewriters turns into a 500 Status without a reason
    (pkg/registry/core/componentstatus/rest.go)."""
    body = f["body"] if isinstance(f["body"], dict) else {}
    return (f["label"] == "GET /api/v1/componentstatuses/{name}" and f["status"] == 500
            and f["check"] in ("not_a_server_error",)
            and str(body.get("message", "")).startswith("Component not found: ")
            and "reason" not in body)


# The decoder's own errors, as kube's codecs word them.
DELETE_OPTIONS_DECODE_ERRORS = (
    "couldn't get version/kind; json parse error: ",
    "no kind ",
    "decoded object cannot be converted to DeleteOptions",
    "json: cannot unmarshal ",
    "Object 'Kind' is missing in ",
)


def suppressed_delete_options_500(f):
    """A delete whose body does not decode as `DeleteOptions`: kube 1.33's delete and
    deletecollection handlers pass the codec's plain error to `scope.err`, a 500 without a
    reason (handlers/delete.go; later kube wraps it in a 400)."""
    body = f["body"] if isinstance(f["body"], dict) else {}
    return (f["check"] == "not_a_server_error" and f["method"] == "DELETE" and f["status"] == 500
            and "reason" not in body and bool((f["request"].get("body") or {}).get("$base64"))
            and str(body.get("message", "")).startswith(DELETE_OPTIONS_DECODE_ERRORS))


SUPPRESSIONS = [
    ("delete-options-decode-500", suppressed_delete_options_500),
    ("watch-stream-body", suppressed_watch_body),
    ("go-null-field", suppressed_go_null),
    ("delete-answers-the-object", suppressed_delete_answers_the_object),
    ("componentstatus-not-found-500", suppressed_componentstatus_500),
]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(method, url, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json"} if data else {})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


class Server:
    def __init__(self, log_path):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen([BIN, "serve", "--store", "memory", "--listen", f"127.0.0.1:{self.port}"],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        for _ in range(600):
            try:
                if http("GET", self.base + "/readyz")[0] == 200:
                    break
            except OSError:
                pass
            if self.proc.poll() is not None:
                sys.exit(f"the server did not start: see {log_path}")
            time.sleep(0.1)
        status, body = http("POST", self.base + "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", CRD)
        assert status == 201, body
        for _ in range(600):
            if http("GET", self.base + "/openapi/v3/apis/fuzz.example.com/v1")[0] == 200:
                break
            time.sleep(0.1)

    def stop(self):
        alive = self.proc.poll() is None
        self.proc.terminate()
        self.proc.wait(30)
        self.log.close()
        return alive


def unresolved_references(document):
    schemas = document.get("components", {}).get("schemas", {})
    missing = set()
    stack = [document]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            ref = v.get("$ref")
            if isinstance(ref, str) and (not ref.startswith("#/components/schemas/")
                                         or ref[len("#/components/schemas/"):] not in schemas):
                missing.add(ref)
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return sorted(missing)


def findings_of(ndjson):
    """Every failing check of every response, and schemathesis's own errors."""
    out, errors = [], []
    for line in open(ndjson):
        event = json.loads(line)
        if "NonFatalError" in event:
            errors.append(event["NonFatalError"])
        finished = event.get("ScenarioFinished")
        if not finished:
            continue
        rec = finished["recorder"]
        for case_id, checks in rec.get("checks", {}).items():
            for check in checks:
                if check["status"] != "failure":
                    continue
                failure = check["failure_info"]["failure"]
                inter = rec.get("interactions", {}).get(case_id) or {}
                req, resp = inter.get("request") or {}, inter.get("response") or {}
                raw = resp.get("content", {}).get("$base64")
                text = base64.b64decode(raw).decode("utf-8", "replace") if raw else ""
                try:
                    body = json.loads(text)
                except ValueError:
                    body = text
                case = rec.get("cases", {}).get(case_id, {}).get("value", {})
                query = case.get("query") or {}
                out.append({
                    "check": check["name"],
                    "title": failure.get("title", ""),
                    "message": failure.get("message", ""),
                    "label": f"{case.get('method', req.get('method'))} {case.get('path', '')}",
                    "method": req.get("method"),
                    "uri": req.get("uri", ""),
                    "status": resp.get("status_code"),
                    "body": body,
                    "watch": "watch" in query,
                    "request": req,
                })
    return out, errors


def curl(f):
    req = f["request"]
    parts = ["curl", "-X", req.get("method", "GET")]
    for name, values in (req.get("headers") or {}).items():
        for v in values:
            parts += ["-H", f"'{name}: {v}'"]
    raw = (req.get("body") or {}).get("$base64")
    if raw:
        parts += ["--data-binary", "'" + base64.b64decode(raw).decode("utf-8", "replace").replace("'", "'\\''") + "'"]
    parts.append("'" + f["uri"] + "'")
    return " ".join(parts)


def main():
    os.makedirs(OUT, exist_ok=True)
    for old in glob.glob(os.path.join(OUT, "*")):
        os.remove(old)
    started = time.time()
    probe = Server(os.path.join(OUT, "server-index.log"))
    try:
        index = json.loads(http("GET", probe.base + "/openapi/v3")[1])
    finally:
        probe.stop()
    group_versions = [gv for gv in index["paths"] if not GV or gv in GV]
    unexplained, suppressed, totals = [], {}, {"operations": 0, "requests": 0}
    for gv in group_versions:
        name = gv.replace("/", "_")
        server = Server(os.path.join(OUT, f"server-{name}.log"))
        try:
            document = json.loads(http("GET", f"{server.base}/openapi/v3/{gv}")[1])
            for ref in unresolved_references(document):
                unexplained.append(f"{gv}: the document refers to {ref}, which it does not define")
            ndjson = os.path.join(OUT, f"{name}.ndjson")
            cmd = [ST, "--config-file", os.path.join(HERE, "schemathesis.toml"),
                   "run", f"{server.base}/openapi/v3/{gv}", "--url", server.base,
                   "--checks", ",".join(CHECKS), "--max-examples", N, "--seed", SEED,
                   "--workers", "1", "--request-timeout", "30", "--no-color",
                   "--phases", PHASES,
                   "--exclude-path-regex", PROXY_PATHS,
                   "--report", "ndjson", "--report-ndjson-path", ndjson]
            env = dict(os.environ, SCHEMATHESIS_HOOKS="schemathesis_hooks",
                       PYTHONPATH=HERE + os.pathsep + os.environ.get("PYTHONPATH", ""))
            t = time.time()
            with open(os.path.join(OUT, f"{name}.out"), "w") as log:
                subprocess.run(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=1800, cwd=OUT)
            findings, errors = findings_of(ndjson)
            for error in errors:
                unexplained.append(f"{gv}: schemathesis error: {json.dumps(error)[:600]}")
            ops = len(document.get("paths", {}) and [m for p in document["paths"].values() for m in p if m != "parameters"])
            requests = sum(len(json.loads(l).get("ScenarioFinished", {}).get("recorder", {}).get("interactions", {}))
                           for l in open(ndjson))
            totals["operations"] += ops
            totals["requests"] += requests
            kept = 0
            for f in findings:
                for tag, rule in SUPPRESSIONS:
                    if rule(f):
                        suppressed[tag] = suppressed.get(tag, 0) + 1
                        break
                else:
                    kept += 1
                    unexplained.append(f"{gv}: {f['label']}: {f['check']} ({f['title']}), {f['status']}: "
                                       f"{f['message'][:800]}\n    body: {json.dumps(f['body'])[:400]}\n    {curl(f)[:1500]}")
            print(f"{gv}: {ops} operations, {requests} requests, {len(findings)} failing checks, "
                  f"{kept} unexplained, {time.time() - t:.0f}s", flush=True)
        finally:
            if not server.stop():
                unexplained.append(f"{gv}: the server exited during the run: see {server.log.name}")
    for tag, count in sorted(suppressed.items()):
        print(f"suppressed (kube's own behaviour) {tag}: {count}")
    for u in unexplained:
        print("UNEXPLAINED " + u)
    print(f"schemathesis: {len(group_versions)} group/versions, {totals['operations']} operations, "
          f"{totals['requests']} requests, {len(unexplained)} unexplained findings, "
          f"{time.time() - started:.0f}s", flush=True)
    sys.exit(1 if unexplained else 0)


if __name__ == "__main__":
    main()

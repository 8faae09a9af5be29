#!/usr/bin/env python3
"""A black-box HTTP fuzzer for the server: random requests, each checked as a client sees it.

Starts `watchkeeper serve` (WK, default target/debug/watchkeeper; the embedded store under
/dev/shm; PORT, default a free one) with the cache consistency check every second, serves a Widget
CRD in two versions (v1 stored, with status and scale subresources; v2), then sends N random requests per seed (SEEDS, default
"1 2"; N default 1500): every method on ~40 built-in and custom resources, collections and
objects, odd names, subresources, query parameters (valid, invalid and out of range: watch,
resourceVersion and its match, limit, continue, selectors, dryRun, fieldManager, force,
timeouts, propagation, fieldValidation, ...), every content type and Accept kube knows (and a
few it does not), bodies that are valid objects, mutated objects, patches of each kind and
random bytes. Writes change what later requests find, so a seed's sequence is a history.

Fails (exit 1) on what a client must never see or the server must never do:
- a 5xx other than 503 and 504 (kube's own 500s are allowed: for an apply of a field outside
  the schema, `failed to create typed patch object`; where json-patch v4 panics; for the
  strategic merge errors kube-apiserver gives no status of their own, `unknown patch type`,
  `does not contain declared merge key`, ...; a node's proxy without a preferred address, `no
  preferred addresses found`);
- a 4xx answer in JSON that is not a `Status`;
- a connection closed without an answer;
- the cache differing from the store (`consistency check failed` in the server's log: the
  check runs every second over every resource during the run);
- a panic in the server's log.

    WK=target/debug/watchkeeper SEEDS="1 2 3" N=3000 python3 crates/bench/scripts/http_fuzz.py
    WK=target/debug/watchkeeper SEEDS="1 2 3 4" CONCURRENT=1 python3 crates/bench/scripts/http_fuzz.py

Every request and its answer's first bytes go to OUT/req-SEED.log (OUT default /tmp/http_fuzz),
the server's log to OUT/server-PORT.log.
"""
import http.client, json, os, random, re, shutil, subprocess, sys, tempfile, threading, time, urllib.parse

BIN = os.environ.get("WK", "target/debug/watchkeeper")
def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


PORT = int(os.environ.get("PORT") or free_port())
SEEDS = [int(s) for s in os.environ.get("SEEDS", "1 2").split()]
N = int(os.environ.get("N", "1500"))
# CONCURRENT=1: the seeds run at once, one client thread each (races between writers and the
# check; a finding is then not replayable by its seed alone).
CONCURRENT = os.environ.get("CONCURRENT") == "1"
OUT = os.environ.get("OUT", "/tmp/http_fuzz")
# More server flags, e.g. ARGS="--store etcd --etcd-endpoints http://127.0.0.1:2379".
ARGS = os.environ.get("ARGS", "")


class _Rnd:
    """The current thread's random source (each seed's thread has its own)."""
    local = threading.local()

    def __getattr__(self, name):
        return getattr(self.local.r, name)


rnd = _Rnd()

CRD = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
       "metadata": {"name": "widgets.stable.example.com"},
       "spec": {"group": "stable.example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                "versions": [{"name": "v2", "served": True, "storage": False,
                              "subresources": {"status": {}},
                              "schema": {"openAPIV3Schema": {"type": "object",
                                         "x-kubernetes-preserve-unknown-fields": True}}},
                             {"name": "v1", "served": True, "storage": True,
                              "subresources": {"status": {}, "scale": {
                                  "specReplicasPath": ".spec.replicas",
                                  "statusReplicasPath": ".status.replicas"}},
                              "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                                  "spec": {"type": "object",
                                           "x-kubernetes-preserve-unknown-fields": True,
                                           "properties": {"replicas": {"type": "integer"}}},
                                  "status": {"type": "object",
                                             "x-kubernetes-preserve-unknown-fields": True}}}}}]}}

RES=[("", "v1","configmaps",True),("","v1","pods",True),("","v1","services",True),("","v1","namespaces",False),("","v1","nodes",False),("","v1","secrets",True),("","v1","serviceaccounts",True),("","v1","persistentvolumeclaims",True),("","v1","resourcequotas",True),("","v1","limitranges",True),("","v1","events",True),("","v1","endpoints",True),("","v1","replicationcontrollers",True),
("apps","v1","deployments",True),("apps","v1","statefulsets",True),("apps","v1","daemonsets",True),("apps","v1","replicasets",True),("batch","v1","jobs",True),("batch","v1","cronjobs",True),("networking.k8s.io","v1","ingresses",True),("networking.k8s.io","v1","networkpolicies",True),("rbac.authorization.k8s.io","v1","roles",True),("rbac.authorization.k8s.io","v1","clusterroles",False),("rbac.authorization.k8s.io","v1","rolebindings",True),("apiextensions.k8s.io","v1","customresourcedefinitions",False),("coordination.k8s.io","v1","leases",True),("policy","v1","poddisruptionbudgets",True),("autoscaling","v2","horizontalpodautoscalers",True),("autoscaling","v1","horizontalpodautoscalers",True),("storage.k8s.io","v1","storageclasses",False),("admissionregistration.k8s.io","v1","validatingwebhookconfigurations",False),("admissionregistration.k8s.io","v1","validatingadmissionpolicies",False),("scheduling.k8s.io","v1","priorityclasses",False),("discovery.k8s.io","v1","endpointslices",True),("certificates.k8s.io","v1","certificatesigningrequests",False),("flowcontrol.apiserver.k8s.io","v1","flowschemas",False),("stable.example.com","v1","widgets",True),("stable.example.com","v2","widgets",True),("events.k8s.io","v1","events",True),("rbac.authorization.k8s.io","v1","clusterrolebindings",False),("networking.k8s.io","v1","ingressclasses",False),("","v1","podtemplates",True),("node.k8s.io","v1","runtimeclasses",False),("storage.k8s.io","v1","csidrivers",False),("apps","v1","controllerrevisions",True),("networking.k8s.io","v1","servicecidrs",False),("networking.k8s.io","v1","ipaddresses",False),("","v1","persistentvolumes",False)]
SUB=["status","scale","binding","eviction","ephemeralcontainers","resize","token","approval","log","exec","proxy","attach","portforward","finalize",""]
NAMES=["a","b-1","10.0.0.5","x"*253,"fd00::5","x"*254,"A","a.b","a..b","-a","a/b","%2F","..",".","a%00","ñ","a b","0"]
KIND={"configmaps":"ConfigMap","pods":"Pod","services":"Service","namespaces":"Namespace","nodes":"Node","secrets":"Secret","serviceaccounts":"ServiceAccount","persistentvolumeclaims":"PersistentVolumeClaim","resourcequotas":"ResourceQuota","limitranges":"LimitRange","events":"Event","endpoints":"Endpoints","replicationcontrollers":"ReplicationController","deployments":"Deployment","statefulsets":"StatefulSet","daemonsets":"DaemonSet","replicasets":"ReplicaSet","jobs":"Job","cronjobs":"CronJob","ingresses":"Ingress","networkpolicies":"NetworkPolicy","roles":"Role","clusterroles":"ClusterRole","rolebindings":"RoleBinding","customresourcedefinitions":"CustomResourceDefinition","leases":"Lease","poddisruptionbudgets":"PodDisruptionBudget","horizontalpodautoscalers":"HorizontalPodAutoscaler","storageclasses":"StorageClass","validatingwebhookconfigurations":"ValidatingWebhookConfiguration","validatingadmissionpolicies":"ValidatingAdmissionPolicy","priorityclasses":"PriorityClass","endpointslices":"EndpointSlice","certificatesigningrequests":"CertificateSigningRequest","flowschemas":"FlowSchema","widgets":"Widget","clusterrolebindings":"ClusterRoleBinding","ingressclasses":"IngressClass","podtemplates":"PodTemplate","runtimeclasses":"RuntimeClass","csidrivers":"CSIDriver","controllerrevisions":"ControllerRevision","servicecidrs":"ServiceCIDR","ipaddresses":"IPAddress","persistentvolumes":"PersistentVolume"}
def rv(): return rnd.choice(["0","1","","-1","abc","99999999999999999999","18446744073709551615", str(rnd.randint(0,500))])
QP={"watch":lambda: rnd.choice(["true","1","false","x",""]),"resourceVersion":rv,"resourceVersionMatch":lambda: rnd.choice(["Exact","NotOlderThan","x",""]),
"limit":lambda: rnd.choice(["1","0","-1","x","9999999999999999999999","500"]),"continue":lambda: rnd.choice(["x","eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MSwic3RhcnQiOiJhIn0","",]),
"fieldSelector":lambda: rnd.choice(["metadata.name=a","metadata.name!=a","spec.nodeName=x","status.phase=Running","foo=bar","metadata.name","=","metadata.name==a,metadata.namespace=x","metadata.name in (a)"]),
"labelSelector":lambda: rnd.choice(["a=b","a in (b,c)","!a","a notin (x)","a>1","=","a=","a=b,c!=d","x"*70+"=1","a in ()","a,b"]),
"dryRun":lambda: rnd.choice(["All","x",""]),"fieldManager":lambda: rnd.choice(["m","x"*200,"","\u00e9"]),"force":lambda: rnd.choice(["true","false","x"]),
"timeoutSeconds":lambda: rnd.choice(["1","0","-1","x","99999999999"]),"sendInitialEvents":lambda: rnd.choice(["true","false","x"]),"allowWatchBookmarks":lambda: rnd.choice(["true","x"]),
"pretty":lambda: rnd.choice(["true","x"]),"propagationPolicy":lambda: rnd.choice(["Foreground","Background","Orphan","x"]),"gracePeriodSeconds":lambda: rnd.choice(["0","-1","30","x","99999999999999999"]),
"fieldValidation":lambda: rnd.choice(["Strict","Warn","Ignore","x"]),"orphanDependents":lambda: rnd.choice(["true","x"]),"timeout":lambda: rnd.choice(["1s","x","-1s","10ms"]),"includeObject":lambda: rnd.choice(["None","Object","Metadata","x"]),"container":lambda:"c"}
CT=["application/json","application/yaml","application/merge-patch+json","application/strategic-merge-patch+json","application/json-patch+json","application/apply-patch+yaml","application/vnd.kubernetes.protobuf","text/plain","application/json;charset=utf-8","application/apply-patch+cbor","application/cbor",""]
AC=["application/json","application/yaml","application/vnd.kubernetes.protobuf","application/json;as=Table;v=v1;g=meta.k8s.io","application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io","application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io","application/vnd.kubernetes.protobuf;stream=watch","*/*","text/html","application/cbor","application/json;as=Table;v=v1beta1;g=meta.k8s.io","application/json;as=APIGroupDiscoveryList;v=v2;g=apidiscovery.k8s.io","application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json","application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1","application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1"]
def rand_val(d=0):
    c=rnd.random()
    if d>3 or c<0.3: return rnd.choice([None,True,False,0,-1,1.5,1e300,2**63,-2**63-1,"","x","1Gi","100m","2026-01-01T00:00:00Z","a"*300,{"a":1},[],[1,"x"]])
    if c<0.65: return {rnd.choice(["a","spec","status","metadata","name","labels","containers","replicas","selector","template","data","items","$patch","$retainKeys","$setElementOrder/containers","$deleteFromPrimitiveList/x","x-y"]): rand_val(d+1) for _ in range(rnd.randint(0,4))}
    return [rand_val(d+1) for _ in range(rnd.randint(0,3))]
def mutate(o,d=0):
    if isinstance(o,dict):
        o=dict(o)
        if o and rnd.random()<0.3:
            k=rnd.choice(list(o)); o[k]=rand_val() if rnd.random()<0.5 else mutate(o[k],d+1)
        if rnd.random()<0.2: o[rnd.choice(["spec","status","metadata","data","extra","apiVersion","kind"])]=rand_val()
        return o
    if isinstance(o,list): return [mutate(x,d+1) for x in o]
    return o
def obj(res,ns,name):
    g,v,r,_=res
    api=(g+"/"+v) if g else v
    o={"apiVersion":api,"kind":KIND[r],"metadata":{"name":name,"labels":{"a":"b"}}}
    if ns: o["metadata"]["namespace"]=ns
    if r=="configmaps": o["data"]={"k":"v"}
    if r=="pods": o["spec"]={"containers":[{"name":"c","image":"i","ports":[{"containerPort":80}],"resources":{"limits":{"cpu":"1"}}}]}
    if r=="deployments" or r=="replicasets" or r=="statefulsets" or r=="daemonsets": o["spec"]={"replicas":1,"selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"a":"b"}},"spec":{"containers":[{"name":"c","image":"i"}]}}}
    if r=="services": o["spec"]={"ports":[{"port":80}],"type":rnd.choice(["ClusterIP","NodePort","LoadBalancer","ExternalName"])}
    if r=="jobs": o["spec"]={"template":{"spec":{"restartPolicy":"Never","containers":[{"name":"c","image":"i"}]}}}
    if r=="leases": o["spec"]={"holderIdentity":"x","leaseDurationSeconds":10}
    return mutate(o) if rnd.random()<0.6 else o
def enc(o,ct):
    if rnd.random()<0.05: return bytes(rnd.getrandbits(8) for _ in range(rnd.randint(0,64)))
    if "yaml" in ct:
        try:
            import yaml  # PyYAML when installed; JSON is YAML too
            return yaml.safe_dump(o).encode()
        except Exception:
            return json.dumps(o).encode()
    if "json-patch" in ct:
        ops=[{"op":rnd.choice(["add","remove","replace","move","copy","test","x"]),"path":rnd.choice(["/metadata/labels/a","/spec","/data/k","/","","/metadata/labels/~1x","/spec/containers/0","/spec/containers/-","/x/y/z","/metadata/finalizers/0","/metadata/name","/metadata/resourceVersion"]),"value":rand_val(),"from":rnd.choice(["/data","/metadata/labels","/"])} for _ in range(rnd.randint(0,4))]
        return json.dumps(ops).encode()
    return json.dumps(o,allow_nan=True).encode()


def request(method, path, headers, body):
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=3)
    c.request(method, path, body=body, headers=headers)
    r = c.getresponse()
    if r.getheader("Transfer-Encoding"):  # a watch or a streamed answer: its first bytes
        data = r.fp.read1(2000) if hasattr(r.fp, "read1") else b""
    else:
        data = r.read(200000)
    c.close()
    return r.status, r.getheader("Content-Type") or "", data


def one(i, log):
    res = rnd.choice(RES)
    g, v, r, nsd = res
    ns = rnd.choice(["default", "kube-system", "nope", ""]) if nsd else ""
    name = rnd.choice(NAMES[:3]) if rnd.random() < 0.7 else rnd.choice(NAMES)
    base = ("/api/" + v) if not g else "/apis/%s/%s" % (g, v)
    path = base + (("/namespaces/" + ns) if ns else "") + "/" + r
    m = rnd.choice(["GET", "GET", "POST", "PUT", "PATCH", "PATCH", "DELETE", "DELETE", "HEAD", "OPTIONS"])
    if m in ("PUT", "PATCH") or (m in ("GET", "DELETE") and rnd.random() < 0.5):
        path += "/" + urllib.parse.quote(name, safe="%/")
    if rnd.random() < 0.15 and m != "POST":
        path += "/" + rnd.choice(SUB)
    elif rnd.random() < 0.1:
        path += "/" + rnd.choice(SUB)
    q = {k: QP[k]() for k in rnd.sample(list(QP), rnd.randint(0, 4))}
    if q:
        path += "?" + urllib.parse.urlencode(q)
    h = {"Accept": rnd.choice(AC)}
    ct = rnd.choice(CT)
    if m == "PATCH" and rnd.random() < 0.7:
        ct = rnd.choice(CT[2:6])
    b = None
    if m in ("POST", "PUT", "PATCH"):
        if ct:
            h["Content-Type"] = ct
        o = obj(res, ns, name)
        if m == "PATCH" and "apply" not in ct and rnd.random() < 0.6:
            o = mutate({"metadata": {"labels": {"x": "y"}}, "data": {"k": "z"}, "spec": rand_val()})
        b = enc(o, ct)
    log.write("%d %s %s %s %r\n" % (i, m, path, h, (b or b"")[:400]))
    try:
        s, cth, d = request(m, path, h, b)
    except TimeoutError:
        return None  # a watch (or a long answer) still open: nothing to judge
    except Exception as e:  # noqa: BLE001 - any other failure to answer is a finding
        return "no answer: %s %s %r" % (m, path, e)
    log.write("  -> %d %r\n" % (s, d[:300]))
    if s >= 500 and s not in (503, 504) and not any(t in d for t in KUBE_500_TEXTS):
        return "%d: %s %s %s %r -> %r" % (s, m, path, h, (b or b"")[:300], d[:300])
    if 400 <= s < 500 and m != "HEAD" and "json" in cth and not re.search(rb'"kind": ?"Status"', d[:300]):
        return "not a Status: %d %s %s %r" % (s, m, path, d[:300])
    return None


# The 500s kube-apiserver itself answers to a request (see the module doc).
KUBE_500_TEXTS = (
    b"failed to create typed patch object",
    b"This request caused apiserver to panic. Look in the logs for details.",
    b"unknown patch type: ",
    b" does not contain declared merge key: ",
    b"expected a []interface {}, but received a ",
    b"merging lists cannot yet be specified in the patch",
    # nodes/{name}/proxy of a node without an address of a preferred type (kube's
    # NodeConnectionInfoGetter).
    b"no preferred addresses found; known addresses: ",
)


def main():
    os.makedirs(OUT, exist_ok=True)
    data = tempfile.mkdtemp(prefix="http_fuzz.", dir="/dev/shm")
    log_path = os.path.join(OUT, f"server-{PORT}.log")
    server_log = open(log_path, "w")
    p = subprocess.Popen([BIN, "serve", "--listen", f"127.0.0.1:{PORT}", "--data-dir", data,
                          "--consistency-check-interval-ms", "1000"] + ARGS.split(),
                         stdout=server_log, stderr=subprocess.STDOUT)
    findings = []
    try:
        for _ in range(600):
            try:
                if request("GET", "/readyz", {}, None)[0] == 200:
                    break
            except OSError:
                pass
            if p.poll() is not None:
                sys.exit(f"the server did not start: see {log_path}")
            time.sleep(0.1)
        s, _, d = request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                          {"Content-Type": "application/json"}, json.dumps(CRD).encode())
        assert s == 201, d
        def run(seed):
            _Rnd.local.r = random.Random(seed)
            with open(os.path.join(OUT, f"req-{seed}.log"), "w") as log:
                for i in range(N):
                    finding = one(i, log)
                    if finding:
                        findings.append(f"seed {seed} #{i}: {finding}")
                        print(findings[-1], flush=True)
            print(f"seed {seed}: {N} requests", flush=True)

        if CONCURRENT:
            threads = [threading.Thread(target=run, args=(seed,)) for seed in SEEDS]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        else:
            for seed in SEEDS:
                run(seed)
        time.sleep(2.5)  # one more consistency check over the final state
    finally:
        p.terminate()
        p.wait(30)
        server_log.close()
        shutil.rmtree(data, ignore_errors=True)
    text = re.sub(r"\x1b\[[0-9;]*m", "", open(log_path).read())
    for line in text.splitlines():
        if "consistency check failed" in line or "panicked" in line:
            findings.append("server: " + line[:400])
            print(findings[-1])
    print(f"{len(findings)} findings (server log: {log_path})")
    sys.exit(1 if findings else 0)


if __name__ == "__main__":
    main()

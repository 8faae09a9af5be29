"""The official Python client (kubernetes 37.0.2) against watchkeeper, unchanged.

Usage: client_python.py http://127.0.0.1:PORT

Lists namespaces, writes ConfigMaps, pages a list, watches the changes another thread makes
(with allow_watch_bookmarks and timeout_seconds), does a streaming list (send_initial_events)
that ends with the initial-events-end bookmark, sees an in-stream 410 raised as
ApiException(410), and creates an apiregistration.k8s.io APIService twice (the conflict's
Status body as kube-apiserver writes it), and reads, patches and deletes a ClusterRole whose
name holds ':' (which the client escapes in the path). Prints one line per check and exits non-zero on any mismatch.
"""

import signal
import sys
import threading

# A hang guard, not a timing assertion: a wedged run fails instead of blocking the test.
signal.alarm(120)

from kubernetes import client, watch  # noqa: E402
from kubernetes.client.rest import ApiException  # noqa: E402

NS = "default"
failures = []


def check(ok, what):
    print(("ok:   " if ok else "FAIL: ") + what, flush=True)
    if not ok:
        failures.append(what)


def configmap(name, data):
    return client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name=name, labels={"app": "py"}), data=data
    )


def main(host):
    cfg = client.Configuration()
    cfg.host = host
    cfg.verify_ssl = False
    api = client.CoreV1Api(client.ApiClient(cfg))

    # Namespaces.
    namespaces = api.list_namespace()
    names = {n.metadata.name for n in namespaces.items}
    check({"default", "kube-system", "kube-public"} <= names, f"list namespaces: {sorted(names)}")
    check(bool(namespaces.metadata.resource_version), "namespace list has a resourceVersion")

    # Create, read, conflict, 404.
    created = api.create_namespaced_config_map(NS, configmap("py-a", {"k": "v"}))
    check(bool(created.metadata.resource_version), "created ConfigMap has a resourceVersion")
    check(bool(created.metadata.uid), "created ConfigMap has a uid")
    read = api.read_namespaced_config_map("py-a", NS)
    check(read.data == {"k": "v"}, f"read back data {read.data}")
    try:
        api.create_namespaced_config_map(NS, configmap("py-a", {}))
        check(False, "second create raises 409")
    except ApiException as e:
        check(e.status == 409, f"second create raises 409 (got {e.status})")
    try:
        api.read_namespaced_config_map("missing", NS)
        check(False, "read of a missing object raises 404")
    except ApiException as e:
        check(e.status == 404, f"read of a missing object raises 404 (got {e.status})")

    # Paging.
    for i in range(5):
        api.create_namespaced_config_map(NS, configmap(f"py-page-{i}", {"i": str(i)}))
    paged, token, pages = [], None, 0
    while True:
        kwargs = {"limit": 2}
        if token:
            kwargs["_continue"] = token
        page = api.list_namespaced_config_map(NS, **kwargs)
        pages += 1
        paged += [o.metadata.name for o in page.items]
        token = page.metadata._continue
        if not token:
            break
    check(sorted(paged) == sorted(set(paged)) and len(paged) == 6 and pages == 3,
          f"paged list: {pages} pages, {paged}")
    for i in range(5):
        api.delete_namespaced_config_map(f"py-page-{i}", NS)

    # A watch from a list's resourceVersion sees another thread's create, patch and delete.
    listed = api.list_namespaced_config_map(NS, label_selector="app=py")
    list_rv = listed.metadata.resource_version

    def writer():
        api.create_namespaced_config_map(NS, configmap("py-b", {"k": "1"}))
        api.patch_namespaced_config_map("py-b", NS, {"data": {"k": "2"}})
        api.delete_namespaced_config_map("py-b", NS)

    thread = threading.Thread(target=writer)
    thread.start()
    seen = []
    w = watch.Watch()
    for event in w.stream(
        api.list_namespaced_config_map,
        NS,
        label_selector="app=py",
        resource_version=list_rv,
        allow_watch_bookmarks=True,
        timeout_seconds=30,
    ):
        if event["type"] == "BOOKMARK":
            continue
        obj = event["object"]
        seen.append((event["type"], obj.metadata.name, (obj.data or {}).get("k")))
        if len(seen) == 3:
            w.stop()
    thread.join()
    check(
        seen == [("ADDED", "py-b", "1"), ("MODIFIED", "py-b", "2"), ("DELETED", "py-b", "2")],
        f"watch events {seen}",
    )

    # A streaming list: the existing objects as ADDED, then the initial-events-end bookmark.
    added, bookmark = [], None
    w = watch.Watch()
    for event in w.stream(
        api.list_namespaced_config_map,
        NS,
        send_initial_events=True,
        resource_version_match="NotOlderThan",
        resource_version="",
        allow_watch_bookmarks=True,
        timeout_seconds=30,
    ):
        if event["type"] == "ADDED":
            added.append(event["object"].metadata.name)
        elif event["type"] == "BOOKMARK":
            bookmark = event["object"]
            w.stop()
        else:
            check(False, f"unexpected event {event['type']} in a streaming list")
            w.stop()
    check(added == ["py-a"], f"streaming list initial events {added}")
    # The client leaves a BOOKMARK's object as the raw dict (it may be incomplete).
    metadata = (bookmark or {}).get("metadata", {})
    annotations = metadata.get("annotations") or {}
    check(
        annotations.get("k8s.io/initial-events-end") == "true",
        f"initial-events-end bookmark {annotations}",
    )
    check((bookmark or {}).get("kind") == "ConfigMap", f"bookmark kind {(bookmark or {}).get('kind')}")
    bookmark_rv = metadata.get("resourceVersion")
    check(
        bookmark_rv is not None and int(bookmark_rv) >= int(list_rv),
        f"bookmark resourceVersion {bookmark_rv} >= list {list_rv}",
    )
    check(w.resource_version == bookmark_rv, f"watch resumes from the bookmark ({w.resource_version})")

    # An old resourceVersion: the in-stream 410 (an HTTP 200 stream) raises ApiException(410).
    try:
        for event in watch.Watch().stream(
            api.list_namespaced_config_map, NS, resource_version="1", timeout_seconds=10
        ):
            check(False, f"no event before the 410, got {event['type']}")
            break
        check(False, "a watch at resourceVersion 1 raises 410")
    except ApiException as e:
        check(e.status == 410, f"a watch at resourceVersion 1 raises 410 (got {e.status})")

    # An aggregated APIService (client-python's own e2e suite creates one): typed read back,
    # and the second create's Status body byte for byte as kube-apiserver writes it.
    reg = client.ApiregistrationV1Api(client.ApiClient(cfg))
    service = client.V1APIService(
        metadata=client.V1ObjectMeta(name="v1alpha1.wardle.k8s.io"),
        spec=client.V1APIServiceSpec(
            group="wardle.k8s.io",
            version="v1alpha1",
            group_priority_minimum=1000,
            version_priority=15,
            insecure_skip_tls_verify=True,
            service=client.ApiregistrationV1ServiceReference(name="api", namespace="wardle"),
        ),
    )
    reg.create_api_service(service)
    got = reg.read_api_service("v1alpha1.wardle.k8s.io")
    check(
        (got.spec.group, got.spec.version) == ("wardle.k8s.io", "v1alpha1"),
        f"APIService read back: {got.spec.group}/{got.spec.version}",
    )
    try:
        reg.create_api_service(service)
        check(False, "second APIService create raises 409")
    except ApiException as e:
        expected = (
            '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
            '"message":"apiservices.apiregistration.k8s.io \\"v1alpha1.wardle.k8s.io\\" '
            'already exists","reason":"AlreadyExists","details":{"name":"v1alpha1.wardle.k8s.io",'
            '"group":"apiregistration.k8s.io","kind":"apiservices"},"code":409}\n'
        )
        check(e.status == 409 and e.body == expected, f"APIService conflict body: {e.body!r}")
    reg.delete_api_service("v1alpha1.wardle.k8s.io")

    # A name with ':' (kube's `system:` roles): client-python escapes every path parameter
    # but letters, digits and `_.-~`, so it asks for `clusterroles/py%3Areader`.
    rbac = client.RbacAuthorizationV1Api(client.ApiClient(cfg))
    role = client.V1ClusterRole(
        metadata=client.V1ObjectMeta(name="py:reader"),
        rules=[client.V1PolicyRule(api_groups=[""], resources=["pods"], verbs=["get"])],
    )
    rbac.create_cluster_role(role)
    got = rbac.read_cluster_role("py:reader")
    check(got.metadata.name == "py:reader", f"ClusterRole py:reader read back: {got.metadata.name}")
    patched = rbac.patch_cluster_role("py:reader", {"metadata": {"labels": {"k": "v"}}})
    check(patched.metadata.labels == {"k": "v"}, f"ClusterRole py:reader patched: {patched.metadata.labels}")
    rbac.delete_cluster_role("py:reader")
    try:
        rbac.read_cluster_role("py:reader")
        check(False, "a deleted ClusterRole py:reader raises 404")
    except ApiException as e:
        check(e.status == 404, f"a deleted ClusterRole py:reader raises 404 (got {e.status})")

    api.delete_namespaced_config_map("py-a", NS)
    try:
        api.read_namespaced_config_map("py-a", NS)
        check(False, "deleted ConfigMap is gone")
    except ApiException as e:
        check(e.status == 404, "deleted ConfigMap is gone")


if __name__ == "__main__":
    try:
        main(sys.argv[1])
    except Exception as e:  # noqa: BLE001 - any exception is a failure with its trace
        import traceback

        traceback.print_exc()
        failures.append(f"exception: {e!r}")
    if failures:
        print(f"{len(failures)} check(s) failed", flush=True)
        sys.exit(1)
    print("all checks passed", flush=True)

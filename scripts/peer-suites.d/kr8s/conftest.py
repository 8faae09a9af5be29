# The kr8s suite's cluster (scripts/peer-suites kr8s). kr8s's tests take their cluster from
# the `k8s_cluster` fixture of kr8s's repository-root conftest.py, which the wheel does not
# ship: there pytest-kind creates a kind cluster, KUBECONFIG is set to its kubeconfig, and the
# fixture waits for the `default` service account. This file stands in for that conftest and
# is copied beside kr8s's tests (kr8s/tests/conftest.py in the suite's virtualenv; kr8s ships
# none there): the same fixtures (`k8s_cluster`, `ensure_gc`) for the fresh watchkeeper the
# script started, with the attributes and method kr8s's tests use of pytest-kind's
# KindCluster (`kubeconfig_path`, `kubectl_path`, `kubectl(...)`), over the kubeconfig the
# script wrote (TLS, a client certificate of `kubernetes-admin` in `system:masters`, like
# kind's admin kubeconfig). It overrides one fixture of kr8s's own kr8s/conftest.py,
# `kubectl_proxy`, for one reason only: upstream's proxy listens on kubectl's default port
# 8001, here on the port the script reserved (KR8S_PEER_PROXY_PORT); otherwise it is the same
# fixture. No test file is changed.
import gc
import os
import shutil
import socket
import subprocess
import time
from contextlib import closing
from pathlib import Path

import anyio
import pytest


class WatchkeeperCluster:
    """pytest-kind's KindCluster, as far as kr8s's tests use it."""

    def __init__(self, kubeconfig_path: Path):
        self.name = "watchkeeper"
        self.kubeconfig_path = kubeconfig_path
        self.kubectl_path = Path(shutil.which("kubectl"))

    def kubectl(self, *args: str) -> str:
        return subprocess.check_output(
            [str(self.kubectl_path), *args],
            env={**os.environ, "KUBECONFIG": str(self.kubeconfig_path)},
            encoding="utf-8",
        )


@pytest.fixture(scope="session", autouse=True)
def k8s_cluster():
    cluster = WatchkeeperCluster(Path(os.environ["KR8S_PEER_KUBECONFIG"]))
    os.environ["KUBECONFIG"] = str(cluster.kubeconfig_path)
    # As upstream's fixture: the `default` service account first (made by watchkeeper's
    # service account controller), 30 tries at most.
    for attempt in range(30):
        try:
            cluster.kubectl("get", "serviceaccount", "default")
            break
        except subprocess.CalledProcessError:
            if attempt == 29:
                raise
            time.sleep(1)
    yield cluster
    del os.environ["KUBECONFIG"]


@pytest.fixture
def ensure_gc():
    """Ensure garbage collection is run before and after the test."""
    gc.collect()
    yield
    gc.collect()


def _listening(host, port):
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        return sock.connect_ex((host, port)) == 0


@pytest.fixture
async def kubectl_proxy(k8s_cluster):
    port = int(os.environ["KR8S_PEER_PROXY_PORT"])
    proxy = subprocess.Popen(
        [k8s_cluster.kubectl_path, "proxy", "--port", str(port)],
        env={**os.environ, "KUBECONFIG": str(k8s_cluster.kubeconfig_path)},
    )
    host = "localhost"
    while not _listening(host, port):
        await anyio.sleep(0.1)
    yield f"http://{host}:{port}"
    proxy.kill()
    proxy.wait()

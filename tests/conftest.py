"""Shared fixtures: a cluster over real HTTP — the embedded one, and a real kube-apiserver when
``KUBEBUILDER_ASSETS`` names its binaries — and clients pointed at it.

A test that asks for ``cluster`` (or a module fixture built with :func:`open_cluster`) runs once
per server: ``[embedded]`` and ``[real]``. One real control plane serves the whole session;
each module's nodes are registered on it and removed with everything the module made. A test
that only one server can run says so by name: ``@pytest.mark.embedded_only("why")`` or
``@pytest.mark.real_only("why")``.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from pyscheduler_sim.cluster import ClusterSpec, PoolSpec
from pyscheduler_sim.envtest import ControlPlane, RealCluster, missing_assets
from pyscheduler_sim.harness import BackgroundCluster

KUBECTL = shutil.which("kubectl")


def small_cluster() -> ClusterSpec:
    return ClusterSpec(pools=[PoolSpec(name="node", count=3, cpu="4", memory="8Gi")],
                       pod_start_seconds=0.05, pod_termination_seconds=0.2,
                       lease_renew_seconds=2.0)


SERVERS = ("embedded", "real")
#: Why the real-server runs are skipped on this machine (None: they run).
NO_REAL_SERVER = missing_assets(("kube-apiserver", "etcd", "kube-controller-manager"))

#: Why a test cannot run on the test bed's real server: the etcd it runs on (Debian's 3.4.23)
#: lacks RequestWatchProgress, and kube-apiserver 1.36 then refuses a watch without a
#: resourceVersion with 500. A cluster's etcd (3.5 or later) serves it.
ETCD_34_WATCH = ("the test bed's etcd 3.4.23 lacks RequestWatchProgress, and kube-apiserver 1.36 "
                 "then answers a watch without a resourceVersion with 500")

#: Either server's cluster, as tests see it.
AnyCluster = BackgroundCluster | RealCluster


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "embedded_only(why): runs on the embedded cluster alone")
    config.addinivalue_line("markers", "real_only(why): runs on a real kube-apiserver alone")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        server = getattr(item, "callspec", None) and item.callspec.params.get("server")
        if server == "real" and NO_REAL_SERVER:
            item.add_marker(pytest.mark.skip(reason=f"real kube-apiserver: {NO_REAL_SERVER}"))
        for name, other in (("embedded_only", "real"), ("real_only", "embedded")):
            marker = item.get_closest_marker(name)
            if marker is not None and server == other:
                why = marker.args[0] if marker.args else "not said"
                item.add_marker(pytest.mark.skip(reason=f"{name.replace('_', ' ')}: {why}"))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    skipped = [r for r in terminalreporter.stats.get("skipped", [])
               if "[real" in r.nodeid or "-real" in r.nodeid]
    if NO_REAL_SERVER and skipped:
        terminalreporter.write_line(f"{len(skipped)} tests on a real kube-apiserver skipped: "
                                    f"{NO_REAL_SERVER}")


@pytest.fixture(scope="session", params=SERVERS)
def server(request: pytest.FixtureRequest) -> str:
    """Which server the test runs against: the embedded cluster or a real kube-apiserver."""
    return str(request.param)


@pytest.fixture(scope="session")
def control_plane() -> Iterator[ControlPlane]:
    """The session's real control plane: etcd, kube-apiserver and kube-controller-manager."""
    if NO_REAL_SERVER:
        pytest.skip(NO_REAL_SERVER)
    with ControlPlane() as plane:
        yield plane


@contextlib.contextmanager
def open_cluster(request: pytest.FixtureRequest, spec: ClusterSpec, workdir: Path,
                 **embedded: Any) -> Iterator[AnyCluster]:
    """``spec``'s cluster on the server the test runs against (``embedded``: options of the
    embedded cluster, not used on a real server). The fixture that calls this
    must take ``server`` among its arguments: that is what runs its tests once per server."""
    if request.getfixturevalue("server") == "real":
        # ``embedded`` tunes the double (its watch history, ...): a real server has its own.
        with RealCluster(request.getfixturevalue("control_plane"), spec) as real:
            yield real
    else:
        with BackgroundCluster(spec, workdir, **embedded) as c:
            yield c


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, server: str,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[AnyCluster]:
    """One cluster per server and module; tests isolate themselves by namespace. (A real
    control plane holds one module's nodes at a time.)"""
    with open_cluster(request, small_cluster(), tmp_path_factory.mktemp("cluster")) as c:
        yield c


@pytest.fixture(scope="module")
def api(cluster: AnyCluster) -> client.ApiClient:
    return config.new_client_from_config(config_file=str(cluster.kubeconfig))


@pytest.fixture(scope="module")
def core(api: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api)


@pytest.fixture
def namespace(core: client.CoreV1Api) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": name}})
    return name


class Http:
    """Plain HTTPS requests with the cluster's token, for what typed clients cannot send."""

    def __init__(self, cluster: AnyCluster) -> None:
        import urllib3

        self.base = cluster.url
        self.token = cluster.token
        self.pool = urllib3.PoolManager(ca_certs=str(cluster.ca_file), retries=False)

    def raw(self, method: str, path: str, body: Any = None,
            content_type: str = "application/json",
            headers: dict[str, str] | None = None) -> Any:
        if body is not None and not isinstance(body, bytes):
            body = json.dumps(body).encode()
        return self.pool.request(method, self.base + path, body=body, preload_content=True,
                                 headers={"Authorization": f"Bearer {self.token}",
                                          "Content-Type": content_type, **(headers or {})})

    def __call__(self, method: str, path: str, body: Any = None,
                 content_type: str = "application/json",
                 headers: dict[str, str] | None = None) -> tuple[int, Any]:
        r = self.raw(method, path, body, content_type, headers)
        if "json" not in r.headers.get("Content-Type", ""):
            return r.status, r.data.decode()  # a real server's mux 404 is plain text
        return r.status, json.loads(r.data)


@pytest.fixture(scope="module")
def http(cluster: AnyCluster) -> Http:
    return Http(cluster)


class Kubectl:
    def __init__(self, kubeconfig: Path, cache: Path) -> None:
        self.base = [KUBECTL or "kubectl", "--kubeconfig", str(kubeconfig), "--cache-dir",
                     str(cache), "--request-timeout", "20s"]

    def __call__(self, *args: str, input: str | None = None,
                 check: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([*self.base, *args], input=input, capture_output=True, text=True,
                              timeout=60)
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({proc.returncode}):\n"
                                 f"{proc.stdout}\n{proc.stderr}")
        return proc

    def json(self, *args: str) -> Any:
        return json.loads(self(*args, "-o", "json").stdout)


@pytest.fixture(scope="module")
def kubectl(cluster: AnyCluster, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    if KUBECTL is None:
        pytest.skip("kubectl is not installed on this machine")
    return Kubectl(cluster.kubeconfig, tmp_path_factory.mktemp("kubectl-cache"))


def wait_for(predicate: Callable[[], Any], timeout: float = 10.0, interval: float = 0.05,
             what: str = "condition") -> Any:
    """Poll until ``predicate`` returns something truthy; fail with ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


class SchedulerThread:
    """A pyscheduler instance on its own event loop thread, against an embedded cluster."""

    def __init__(self, kubeconfig: Path, kube: dict[str, Any] | None = None,
                 **config: Any) -> None:
        """``config``: the settings document; ``kube``: a KubeSchedulerConfiguration beside
        it (the settings then being its second document)."""
        import asyncio
        import threading

        from pyscheduler.config import parse_documents

        self.config = parse_documents(
            [d for d in (kube, {"metricsAddress": "127.0.0.1:0", **config}) if d], "test")
        self.kubeconfig = kubeconfig
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.app: Any = None
        self.client: Any = None

    def start(self) -> SchedulerThread:
        import asyncio

        from pyscheduler.kube.client import KubeClient
        from pyscheduler.runner import SchedulerApp

        self.thread.start()

        async def start() -> None:
            self.client = await KubeClient.from_kubeconfig(str(self.kubeconfig))
            self.app = SchedulerApp(self.config, self.client)
            await self.app.start()

        asyncio.run_coroutine_threadsafe(start(), self.loop).result(30)
        return self

    def call(self, fn: Callable[[], Any]) -> Any:
        import asyncio

        async def run() -> Any:
            return fn()
        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(30)

    def stop(self, release: bool = True) -> None:
        import asyncio

        async def stop() -> None:
            await self.app.stop(release=release)
            await self.client.close()

        try:
            asyncio.run_coroutine_threadsafe(stop(), self.loop).result(30)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)


def install_crd(kubeconfig: Path | str) -> None:
    """Install the WsspSchedulerConfiguration CRD through the official client."""
    import yaml

    from pyscheduler.wasm.resource import CRD_PATH
    api = client.ApiextensionsV1Api(config.new_client_from_config(config_file=str(kubeconfig)))
    api.create_custom_resource_definition(yaml.safe_load(CRD_PATH.read_text()))


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="session")
def moto_s3() -> Iterator[Any]:
    """An S3-protocol server (moto) on loopback, as the storage configuration to reach it."""
    import contextlib
    import socket
    import subprocess
    import sys
    import time

    from pyscheduler.wasm.storage import StorageConfig

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p",
                             str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"moto server exited: {proc.stderr.read().decode()[-2000:]}"
                                   if proc.stderr else "moto server exited")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            if time.monotonic() > deadline:
                raise RuntimeError("moto server did not start within 30 s")
            time.sleep(0.05)
        yield StorageConfig(endpoint=f"127.0.0.1:{port}", access_key="testing",
                            secret_key="testing", region="us-east-1", timeout_seconds=5.0)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


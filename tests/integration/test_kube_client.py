"""KubeClient against the embedded API server, over real HTTPS with the cluster's own CA."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest

from pyscheduler.kube import errors
from pyscheduler.kube.client import ConnectionConfig, KubeClient, api_path, load_config
from pyscheduler_sim.harness import BackgroundCluster
from tests.conftest import ETCD_34_WATCH

T = TypeVar("T")


def run(fn: Callable[[], Awaitable[T]], timeout: float = 20.0) -> T:
    """Run one async test body on a fresh loop, bounded."""
    async def bounded() -> T:
        return await asyncio.wait_for(fn(), timeout)
    return asyncio.run(bounded())


def configmap(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


def pod(name: str, scheduler: str = "no-such-scheduler") -> dict[str, Any]:
    """A pod no running scheduler picks up: the tests bind it themselves."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"schedulerName": scheduler,
                     "containers": [{"name": "app", "image": "nginx:1.27"}]}}


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_load_config_reads_the_kubeconfig(cluster: BackgroundCluster) -> None:
    config = load_config(str(cluster.kubeconfig))
    assert config.host == cluster.url
    assert config.token == cluster.token
    assert config.ca_file and config.verify_ssl
    assert cluster.token not in repr(config)  # secrets stay out of logs


def test_load_config_without_a_path_falls_back_to_the_default_kubeconfig(
        cluster: BackgroundCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(cluster.kubeconfig))
    config = load_config(None)
    assert config.host == cluster.url and str(cluster.kubeconfig) in config.source
    monkeypatch.setenv("KUBECONFIG", "/nonexistent/kubeconfig")
    with pytest.raises(errors.ConfigError, match="not in a cluster"):
        load_config(None)


def test_load_config_in_a_pod_uses_the_service_account_files(
        cluster: BackgroundCluster, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the Deployment's pods do: no kubeconfig, KUBERNETES_SERVICE_HOST/PORT and the
    mounted token and CA (their paths moved into a temporary directory). The connection
    reaches the API server, and the token is read through the loader's refresh hook (projected
    tokens rotate), not copied once."""
    import kubernetes.config.incluster_config as incluster
    from urllib.parse import urlsplit
    token_file, ca_file = tmp_path / "token", tmp_path / "ca.crt"
    token_file.write_text(cluster.token)
    ca_file.write_bytes(cluster.ca_file.read_bytes())
    monkeypatch.setattr(incluster, "SERVICE_TOKEN_FILENAME", str(token_file))
    monkeypatch.setattr(incluster, "SERVICE_CERT_FILENAME", str(ca_file))
    url = urlsplit(cluster.url)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", str(url.hostname))
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(url.port))
    monkeypatch.setenv("KUBECONFIG", "/nonexistent/kubeconfig")  # must not be needed
    config = load_config(None)
    assert config.source == "in-cluster service account"
    assert config.host == cluster.url and config.ca_file and config.verify_ssl
    assert config.token_source is not None   # projected tokens rotate: read through a hook

    async def body() -> str:
        async with KubeClient(config) as kube:
            await kube.create("/api/v1/namespaces/default/configmaps",
                              configmap("from-a-pod", written="in-cluster"))
        async with KubeClient(load_config(str(cluster.kubeconfig))) as admin:
            read = await admin.get("/api/v1/namespaces/default/configmaps/from-a-pod")
            await admin.delete("/api/v1/namespaces/default/configmaps/from-a-pod")
        return str(read["data"]["written"])
    assert run(body) == "in-cluster"

    # Without the service account, the error names both sources it tried.
    monkeypatch.setattr(incluster, "SERVICE_TOKEN_FILENAME", str(tmp_path / "missing"))
    with pytest.raises(errors.ConfigError, match="not in a cluster"):
        load_config(None)


def test_load_config_names_what_failed(tmp_path: Any) -> None:
    with pytest.raises(errors.ConfigError, match="cannot load kubeconfig"):
        load_config(str(tmp_path / "missing"))


def test_api_path() -> None:
    assert api_path("v1", "pods") == "/api/v1/pods"
    assert api_path("v1", "pods", namespace="a", name="b", subresource="binding") == \
        "/api/v1/namespaces/a/pods/b/binding"
    assert api_path("coordination.k8s.io/v1", "leases", namespace="kube-system") == \
        "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"
    assert api_path("v1", "nodes", name="n") == "/api/v1/nodes/n"


def test_crud_round_trip(cluster: BackgroundCluster, namespace: str) -> None:
    async def body() -> None:
        async with await KubeClient.from_kubeconfig(str(cluster.kubeconfig)) as client:
            collection = api_path("v1", "configmaps", namespace=namespace)
            path = api_path("v1", "configmaps", namespace=namespace, name="a")
            created = await client.create(collection, configmap("a", k="1"))
            assert created["metadata"]["uid"] and created["data"] == {"k": "1"}

            got = await client.get(path)
            assert got["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]

            patched = await client.patch(path, {"data": {"k": "2"}}, "merge")
            assert patched["data"] == {"k": "2"}
            patched = await client.patch(path, [{"op": "add", "path": "/data/j", "value": "3"}],
                                         "json")
            assert patched["data"] == {"k": "2", "j": "3"}

            replaced = await client.update(path, {**patched, "data": {"only": "x"}})
            assert replaced["data"] == {"only": "x"}

            listed = await client.list(collection, {"labelSelector": None, "limit": 10})
            assert [i["metadata"]["name"] for i in listed["items"]] == ["a"]

            await client.delete(path, uid=created["metadata"]["uid"])
            with pytest.raises(errors.NotFoundError):
                await client.get(path)
    run(body)


def test_error_mapping(cluster: BackgroundCluster, namespace: str) -> None:
    async def body() -> None:
        async with await KubeClient.from_kubeconfig(str(cluster.kubeconfig)) as client:
            collection = api_path("v1", "configmaps", namespace=namespace)
            path = api_path("v1", "configmaps", namespace=namespace, name="a")

            with pytest.raises(errors.NotFoundError) as not_found:
                await client.get(path)
            assert not_found.value.code == 404 and not_found.value.reason == "NotFound"
            assert 'configmaps "a" not found' in not_found.value.message
            assert not errors.is_retryable(not_found.value)

            created = await client.create(collection, configmap("a"))
            with pytest.raises(errors.AlreadyExistsError) as exists:
                await client.create(collection, configmap("a"))
            assert exists.value.code == 409 and exists.value.reason == "AlreadyExists"

            stale = {**created, "data": {"x": "y"}}
            await client.patch(path, {"data": {"changed": "1"}})
            with pytest.raises(errors.ConflictError) as conflict:
                await client.update(path, stale)
            assert conflict.value.code == 409 and conflict.value.reason == "Conflict"
            assert not isinstance(conflict.value, errors.AlreadyExistsError)

            with pytest.raises(errors.ConflictError):
                await client.delete(path, uid="00000000-0000-0000-0000-000000000000")

            with pytest.raises(errors.InvalidError) as invalid:
                await client.create(collection, configmap("Not_A_Valid_Name"))
            assert invalid.value.code == 422 and invalid.value.causes

            with pytest.raises(errors.BadRequestError):
                await client.list(collection, {"labelSelector": "a in ("})

            wrong = ConnectionConfig(host=client.config.host, token="not-the-token",
                                     ca_file=client.config.ca_file)
            async with KubeClient(wrong) as intruder:
                with pytest.raises(errors.UnauthorizedError) as unauthorized:
                    await intruder.get(path)
            assert unauthorized.value.code == 401

            async with client.with_config(host=f"https://127.0.0.1:{closed_port()}") as dead:
                with pytest.raises(errors.TransportError) as transport:
                    await dead.get(path, timeout=2.0)
            assert errors.is_retryable(transport.value)
    run(body)


def test_bind_and_bind_conflicts(cluster: BackgroundCluster, namespace: str) -> None:
    async def body() -> None:
        async with await KubeClient.from_kubeconfig(str(cluster.kubeconfig)) as client:
            pods = api_path("v1", "pods", namespace=namespace)
            web = await client.create(pods, pod("web"))
            status = await client.bind(namespace, "web", "node-0", uid=web["metadata"]["uid"])
            assert status.get("status") == "Success"
            bound = await client.get(api_path("v1", "pods", namespace=namespace, name="web"))
            assert bound["spec"]["nodeName"] == "node-0"
            conditions = {c["type"]: c["status"] for c in bound["status"]["conditions"]}
            assert conditions["PodScheduled"] == "True"

            # Already bound: a second bind is refused, whatever the node.
            with pytest.raises(errors.ConflictError) as twice:
                await client.bind(namespace, "web", "node-1")
            assert "already assigned" in twice.value.message

            # A stale uid (pod deleted and recreated under the same name) is refused.
            await client.create(pods, pod("api"))
            with pytest.raises(errors.ConflictError) as stale:
                await client.bind(namespace, "api", "node-1",
                                  uid="00000000-0000-0000-0000-000000000000")
            assert "Precondition failed" in stale.value.message

            with pytest.raises(errors.NotFoundError):
                await client.bind(namespace, "ghost", "node-1")
    run(body)


def test_patch_pod_status_merges_conditions(cluster: BackgroundCluster, namespace: str) -> None:
    async def body() -> None:
        async with await KubeClient.from_kubeconfig(str(cluster.kubeconfig)) as client:
            await client.create(api_path("v1", "pods", namespace=namespace), pod("p"))
            condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                         "message": "0/3 nodes are available", "lastProbeTime": None,
                         "lastTransitionTime": "2026-01-01T00:00:00Z"}
            updated = await client.patch_pod_status(namespace, "p",
                                                    {"status": {"conditions": [condition]}})
            mine = [c for c in updated["status"]["conditions"] if c["type"] == "PodScheduled"]
            assert len(mine) == 1 and mine[0]["reason"] == "Unschedulable"
    run(body)


def test_concurrent_requests_share_a_bounded_pool(cluster: BackgroundCluster,
                                                  namespace: str) -> None:
    async def body() -> None:
        async with await KubeClient.from_kubeconfig(str(cluster.kubeconfig),
                                                    max_connections=4) as client:
            collection = api_path("v1", "configmaps", namespace=namespace)
            await asyncio.gather(*(client.create(collection, configmap(f"c{i}"))
                                   for i in range(40)))
            listed = await client.list(collection)
            assert len(listed["items"]) == 40
    run(body)


@pytest.mark.embedded_only(ETCD_34_WATCH)
def test_stream_yields_watch_events(cluster: BackgroundCluster, namespace: str) -> None:
    async def body() -> None:
        async with await KubeClient.from_kubeconfig(str(cluster.kubeconfig)) as client:
            collection = api_path("v1", "configmaps", namespace=namespace)
            await client.create(collection, configmap("a"))
            seen = []
            async for event in client.stream(collection, {"watch": True, "timeoutSeconds": 1,
                                                          "allowWatchBookmarks": True}):
                seen.append((event["type"], event["object"]["metadata"].get("name")))
            assert ("ADDED", "a") in seen  # and the server ended the stream after 1 s
    run(body)

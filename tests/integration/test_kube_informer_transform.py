"""An informer's transform changes listed and watched objects before the cache and the
handlers see them (how the scheduler drops managedFields)."""

from __future__ import annotations

import asyncio
from typing import Any

from pyscheduler.kube.client import KubeClient, api_path
from pyscheduler.kube.informer import Informer, drop_managed_fields
from pyscheduler_sim.harness import BackgroundCluster
from tests.integration.test_kube_client import configmap, run
from tests.integration.test_kube_informer import eventually


def test_transform_applies_to_listed_and_watched_objects(cluster: BackgroundCluster,
                                                        namespace: str) -> None:
    def drop_bulk(obj: dict[str, Any]) -> None:
        (obj.get("data") or {}).pop("bulk", None)

    async def body() -> None:
        async with await KubeClient.from_kubeconfig(str(cluster.kubeconfig)) as client:
            collection = api_path("v1", "configmaps", namespace=namespace)
            await client.create(collection, configmap("listed", bulk="x" * 1000, v="1"))
            seen: list[dict[str, Any]] = []
            informer = Informer(client, collection, transform=drop_bulk,
                                on_add=seen.append, on_update=lambda old, new: seen.append(new))
            informer.start()
            try:
                await asyncio.wait_for(informer.synced.wait(), 5)
                await client.create(collection, configmap("watched", bulk="y" * 1000, v="2"))
                await client.patch(api_path("v1", "configmaps", namespace=namespace,
                                            name="listed"), {"data": {"v": "3"}})
                await eventually(lambda: len(seen) == 3, what="add, add, update")
                assert [o["data"] for o in seen] == [{"v": "1"}, {"v": "2"}, {"v": "3"}]
                assert all("bulk" not in o["data"] for o in informer.objects.values())
            finally:
                await informer.stop()
    run(body)


def test_drop_managed_fields() -> None:
    obj = {"metadata": {"name": "a", "managedFields": [{"manager": "kubectl"}]}}
    drop_managed_fields(obj)
    assert obj == {"metadata": {"name": "a"}}
    drop_managed_fields({"metadata": None})  # nothing to drop, nothing raised


def test_slim_pod_keeps_what_scheduling_reads_of_a_bound_pod() -> None:
    from pyscheduler.kube.informer import slim_pod

    def bound(node: str) -> dict[str, Any]:
        return {"metadata": {"name": "p", "managedFields": [{}]},
                "spec": {"nodeName": node, "containers": [{"name": "c"}]},
                "status": {"phase": "Running", "startTime": "2026-01-01T00:00:00Z",
                           "qosClass": "Burstable", "podIP": "10.0.0.1",
                           "conditions": [{"type": "Ready", "status": "True"},
                                          {"type": "DisruptionTarget", "status": "True"}],
                           "containerStatuses": [{"name": "c", "ready": True}]}}

    real = bound("n-0")
    slim_pod(real, keep_status_of=lambda node: node.startswith("wssp-virtual-"))
    assert real["status"] == {"phase": "Running", "startTime": "2026-01-01T00:00:00Z",
                              "qosClass": "Burstable",
                              "conditions": [{"type": "DisruptionTarget", "status": "True"}]}
    assert "managedFields" not in real["metadata"]
    assert real["spec"] == bound("n-0")["spec"]
    # A pod on a virtual node keeps its whole status (the provider reads it); a pending pod
    # keeps its conditions (the scheduler reads its PodScheduled condition).
    virtual = bound("wssp-virtual-aci")
    slim_pod(virtual, keep_status_of=lambda node: node.startswith("wssp-virtual-"))
    assert virtual["status"] == bound("x")["status"]
    pending = {"metadata": {"name": "q"}, "spec": {}, "status": {
        "phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False"}]}}
    slim_pod(pending)
    assert pending["status"]["conditions"] == [{"type": "PodScheduled", "status": "False"}]

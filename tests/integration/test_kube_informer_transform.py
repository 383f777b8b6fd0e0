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

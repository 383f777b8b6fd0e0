"""A victim is evicted once: a second preemptor whose dry run still counts a pod this
scheduler is already evicting (the informer has not shown it terminating yet) neither deletes
it again nor records a second Preempted event; a victim that could not be evicted, or was only
turned away at permit, may be evicted later."""

from __future__ import annotations

import asyncio
from typing import Any

from pyscheduler.config import parse_config
from pyscheduler.framework.cache import Cache
from pyscheduler.framework.pod import pod_info
from pyscheduler.kube.events import EventRecorder
from pyscheduler.postfilter.preemption import Preemption


class Client:
    """The two writes an eviction makes, written down; ``fail`` makes the delete fail."""

    def __init__(self) -> None:
        self.deleted: list[str] = []
        self.fail = False

    async def patch_pod_status(self, namespace: str, name: str, body: Any) -> None:
        return None

    async def delete(self, path: str, uid: str | None = None) -> None:
        if self.fail:
            raise OSError("connection reset")
        self.deleted.append(path.rsplit("/", 1)[-1])


def pods() -> tuple[Any, Any, Any]:
    def one(name: str, priority: int) -> Any:
        return pod_info({"metadata": {"name": name, "namespace": "d", "uid": f"u-{name}"},
                         "spec": {"schedulerName": "pyscheduler", "priority": priority,
                                  "nodeName": "n1" if name == "web" else "",
                                  "containers": [{"name": "c", "image": "x"}]}})
    return one("first", 10), one("second", 10), one("web", 0)


def test_a_victim_is_evicted_once_and_again_only_if_it_could_not_be() -> None:
    client = Client()
    recorder = EventRecorder(client, reporting_controller="pyscheduler",  # type: ignore[arg-type]
                             reporting_instance="test")
    preemption = Preemption(client, parse_config({}, "t"), recorder,  # type: ignore[arg-type]
                            Cache().table)
    first, second, web = pods()

    async def run() -> None:
        await preemption._evict(first, web, "n1")
        await preemption._evict(second, web, "n1")  # its dry run still saw web running
    asyncio.run(run())
    assert client.deleted == ["web"] and preemption.preempted == 1
    assert recorder.recorded == 1  # one Preempted event
    preemption.pod_gone(web.uid)
    client.fail = True
    asyncio.run(preemption._evict(first, web, "n1"))
    assert preemption.preempted == 1  # the delete failed: web still runs...
    client.fail = False
    asyncio.run(preemption._evict(second, web, "n1"))
    assert client.deleted == ["web", "web"] and preemption.preempted == 2  # ...and may go later

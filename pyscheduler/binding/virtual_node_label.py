"""VirtualNodeLabel (PreBind): a pod bound for a cloud pool's virtual node is labelled
``wssp/virtual-node: "true"`` first, so that it reads as virtual from the moment it is bound
(the rebalancer moves only pods that carry it). Skip for real nodes."""

from __future__ import annotations

from typing import ClassVar

from pyscheduler.api.names import VIRTUAL_LABEL
from pyscheduler.binding.pod_metadata import patch_pod_metadata
from pyscheduler.framework.interface import CycleContext
from pyscheduler.framework.status import Code, Status
from pyscheduler.kube.client import KubeClient

__all__ = ["VirtualNodeLabel"]

SKIP = Status(Code.SKIP)


class VirtualNodeLabel:
    name: ClassVar[str] = "VirtualNodeLabel"

    def __init__(self, client: KubeClient) -> None:
        self.client = client

    async def pre_bind(self, ctx: CycleContext, node: str) -> Status | None:
        table = ctx.table
        slot = table.slots.get(node)
        info = table.infos[slot] if slot is not None else None
        if info is None or info.pool is None:
            return SKIP
        return await patch_pod_metadata(self.client, ctx.pod, {"labels": {VIRTUAL_LABEL: "true"}})

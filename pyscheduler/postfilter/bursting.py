"""CloudBurst, the PostFilter plugin that places a pod no real node fits on a cloud pool.

The burst pass runs the same filters as the real nodes' pass over the pools' virtual nodes
(rows of the same node table, with the filters' burst-pass checks: a pool's quota and its
largest instance, hostNetwork and local volumes refused), and the pools' configured order is
the only score. The pod's fragment narrows this pass too (its filter's answer for the virtual
rows); its score does not count. On success the pod is placed at once on the pool's virtual
node (``PostFilterResult.node``): it is reserved and bound in this attempt. Otherwise the
reason is the pass's own diagnosis, in the words of the filters, counted in cloud pools.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from pyscheduler.framework.events import on
from pyscheduler.framework.interface import ActionType, ClusterEventWithHint, CycleContext
from pyscheduler.framework.pipeline import Filtered, Pipeline, Profile, explain
from pyscheduler.framework.status import SUCCESS, Code, PostFilterResult, Status
from pyscheduler.postfilter import BURSTING

__all__ = ["CloudBurst"]


class CloudBurst:
    name: ClassVar[str] = BURSTING

    def __init__(self, profile: Profile, *, seed: int | None = None) -> None:
        self.pipeline = Pipeline(profile, seed=seed)

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        """What may let a pool take a pod it refused: any change of a node (virtual nodes
        carry the pools' quota, limits and health), a pod deleted, a volume object changed.
        (A pool's refusal expires with time: the queue's periodic flush retries.)"""
        return (on("Node", ActionType.ALL), on("Pod", ActionType.DELETE),
                *(on(kind, ActionType.ADD | ActionType.UPDATE) for kind in (
                    "PersistentVolumeClaim", "PersistentVolume", "StorageClass", "CSINode")))

    def post_filter(self, ctx: CycleContext,
                    filtered: Filtered) -> tuple[PostFilterResult | None, Status]:
        burst_ctx = CycleContext.for_pod(ctx.pod, ctx.table, ctx.namespaces,
                                         virtual_pass=True)
        override = filtered.override
        if override is not None:
            override = dataclasses.replace(override, score=None)
        result = self.pipeline.schedule(burst_ctx, override, explain=filtered.explain)
        explanation = {**explain(result, ctx.table.names), "pass": "burst"} \
            if filtered.explain else None
        if result.node is not None:
            return PostFilterResult(node=result.node, explanation=explanation), SUCCESS
        diagnosis = result.filtered.diagnose().message().replace(
            "nodes are available", "cloud pools are available", 1)
        return PostFilterResult(explanation=explanation), Status(
            Code.UNSCHEDULABLE, (f"Burst: {diagnosis}",))

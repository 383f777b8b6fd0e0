"""InstanceLimits: a pod bursts only to a pool whose instances can hold it.

Applies in the burst pass only. A cloud pool runs each pod as one container instance, and a pool
has a largest instance (``wssp/max-instance-cpu`` and ``wssp/max-instance-memory`` on its virtual
node, as the cloud reports them): a pod asking more cpu or memory than that fails there, however
much quota the pool has left (``UnschedulableAndUnresolvable``). Until the cloud has reported the
limits (a scheduler that just started, a cloud that has not answered yet) nothing bursts to the
pool: a guess would have the cloud refuse instances one by one.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from pyscheduler.framework.events import on
from pyscheduler.framework.interface import ActionType, ClusterEventWithHint
from pyscheduler.framework.interface import CycleContext, FilterResult, Reason

__all__ = ["ERR_LIMITS_UNKNOWN", "NAME", "InstanceLimits"]

NAME = "InstanceLimits"
ERR_LIMITS_UNKNOWN = "cloud pool(s) whose instance limits are not known yet"


class InstanceLimits:
    """Filter (burst pass): pools whose largest instance is smaller than the pod fail."""

    name: ClassVar[str] = NAME

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        """The events that may make a pod this plugin rejected schedulable."""
        return (on("Node", ActionType.ADD | ActionType.UPDATE_NODE_ANNOTATION | ActionType.UPDATE_NODE_ALLOCATABLE),)

    def filter(self, ctx: CycleContext) -> FilterResult:
        if not ctx.virtual_pass:
            return FilterResult.all_pass()
        n = ctx.n
        limits = ctx.table.max_instance[:n]
        candidates = ctx.nodes()
        unknown = candidates & ((limits[:, 0] == 0) | (limits[:, 1] == 0))
        cpu = ctx.pod.requests.get("cpu", 0)
        memory = ctx.pod.requests.get("memory", 0)
        small_cpu = candidates & ~unknown & (limits[:, 0] < cpu)
        small_memory = candidates & ~unknown & ~small_cpu & (limits[:, 1] < memory)
        if not (unknown.any() or small_cpu.any() or small_memory.any()):
            return FilterResult.all_pass()
        reasons = [Reason(ERR_LIMITS_UNKNOWN, unknown)]
        if small_cpu.any():
            reasons.append(Reason(f"cloud pool(s) whose largest instance has less than "
                                  f"{cpu}m cpu", small_cpu, True))
        if small_memory.any():
            reasons.append(Reason(f"cloud pool(s) whose largest instance has less than "
                                  f"{memory} bytes of memory", small_memory, True))
        passed = ~(unknown | small_cpu | small_memory)
        return FilterResult(np.asarray(passed, np.bool_), [r for r in reasons if r.failed.any()])

    def filter_row(self, ctx: CycleContext, slot: int) -> bool:
        """:meth:`filter`'s verdict for one row (the pipeline's incremental path)."""
        if not ctx.virtual_pass or not ctx.table.virtual[slot]:
            return True
        cpu, memory = ctx.table.max_instance[slot].tolist()
        return bool(cpu and memory and ctx.pod.requests.get("cpu", 0) <= cpu
                    and ctx.pod.requests.get("memory", 0) <= memory)

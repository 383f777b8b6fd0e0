"""PoolRefusals: a pool that kept refusing an instance this large is skipped for a while.

Applies in the burst pass only. When the provider gives up on a pod because its pool kept
refusing the instance (quota, capacity), the virtual node's row remembers the size
(:meth:`NodeTable.refuse`): pods at least as large in cpu and memory skip that pool until the
refusal ages out (five minutes), so that a controller's replacement goes to the next pool rather
than into the same refusal. The reason is resolvable: the refusal ages out.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import ClassVar

import numpy as np

from pyscheduler.framework.events import on
from pyscheduler.framework.interface import ActionType, ClusterEventWithHint
from pyscheduler.framework.interface import CycleContext, FilterResult

__all__ = ["ERR_REFUSED", "NAME", "PoolRefusals"]

NAME = "PoolRefusals"
ERR_REFUSED = "cloud pool(s) refused an instance this large lately"


class PoolRefusals:
    """Filter (burst pass): pools that refused a pod this large lately fail."""

    name: ClassVar[str] = NAME

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        """The events that may make a pod this plugin rejected schedulable."""
        return (on("Node", ActionType.ADD | ActionType.UPDATE),
                on("Pod", ActionType.DELETE))

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock

    def filter(self, ctx: CycleContext) -> FilterResult:
        table = ctx.table
        if not ctx.virtual_pass or not table.refusals:
            return FilterResult.all_pass()
        cpu = ctx.pod.requests.get("cpu", 0)
        memory = ctx.pod.requests.get("memory", 0)
        now = self.clock()
        passed = np.ones(ctx.n, np.bool_)
        for slot in list(table.refusals):
            if slot < ctx.n and table.refused(slot, cpu, memory, now):
                passed[slot] = False
        if passed.all():
            return FilterResult.all_pass()
        return FilterResult.single(passed, ERR_REFUSED)

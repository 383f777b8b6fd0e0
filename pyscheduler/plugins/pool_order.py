"""PoolOrder: bursting tries the configured pools in their order.

The burst pass's only score: the first pool of ``virtualNodes.pools`` scores 100 and each later
one less, so the first pool that passes every filter wins — the fallback order the
configuration states. As a filter (burst pass), a virtual node whose pool this scheduler does not
serve fails: another scheduler's pool, or one removed from the configuration, is not a target.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from pyscheduler.framework.events import on
from pyscheduler.framework.interface import ActionType, ClusterEventWithHint
from pyscheduler.api.names import virtual_node_name
from pyscheduler.framework.interface import MAX_NODE_SCORE, CycleContext, FilterResult
from pyscheduler.framework.nodetable import BoolArray, IntArray

__all__ = ["NAME", "PoolOrder"]

NAME = "PoolOrder"


class PoolOrder:
    """Filter: pools not configured here fail (burst pass). Score: the configured order."""

    name: ClassVar[str] = NAME

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        """The events that may make a pod this plugin rejected schedulable."""
        return (on("Node", ActionType.ADD),)

    def __init__(self, pools: Sequence[str]) -> None:
        self.pools = tuple(pools)
        step = MAX_NODE_SCORE // max(len(self.pools), 1)
        self._rank = {virtual_node_name(p): MAX_NODE_SCORE - i * step
                      for i, p in enumerate(self.pools)}

    def _mask_and_scores(self, ctx: CycleContext) -> tuple[BoolArray, IntArray]:
        table = ctx.table
        n = ctx.n
        ours = np.zeros(n, np.bool_)
        scores = np.zeros(n, np.int64)
        for slot in np.flatnonzero(table.virtual[:n]).tolist():
            rank = self._rank.get(table.names[slot])
            if rank is not None:
                ours[slot] = True
                scores[slot] = rank
        return ours, scores

    def filter(self, ctx: CycleContext) -> FilterResult:
        if not ctx.virtual_pass:
            return FilterResult.all_pass()
        ours, _ = self._mask_and_scores(ctx)
        if (ctx.nodes() <= ours).all():
            return FilterResult.all_pass()
        return FilterResult.single(ours, "cloud pool(s) not served by this scheduler",
                                   unresolvable=True)

    def score(self, ctx: CycleContext, feasible: BoolArray) -> IntArray:
        _, scores = self._mask_and_scores(ctx)
        return scores

    def filter_row(self, ctx: CycleContext, slot: int) -> bool:
        """:meth:`filter`'s verdict for one row (the pipeline's incremental path)."""
        table = ctx.table
        return not (ctx.virtual_pass and table.virtual[slot]
                    and table.names[slot] not in self._rank)

    def score_row(self, ctx: CycleContext, slot: int) -> int:
        """:meth:`score` for one row."""
        table = ctx.table
        return self._rank.get(table.names[slot], 0) if table.virtual[slot] else 0

"""NodeReady: a node that reports itself not Ready takes no pods.

kube-scheduler has no such plugin: it relies on the node lifecycle controller tainting a
NotReady node (``node.kubernetes.io/not-ready``, ``unreachable``), which TaintToleration then
enforces. That leaves a window — from the node's own ``Ready: False`` to the taint — and no
protection where taint-based eviction is off. pyscheduler refuses such a node directly: it is one
of the host's invariant filters, which hold whatever a fragment answers. A node that reports no
Ready condition at all counts as ready (nodes created by tests and tools often do not).

The reason is resolvable: the node may become ready again.
"""

from __future__ import annotations

from typing import ClassVar

from pyscheduler.framework.events import on
from pyscheduler.framework.interface import ActionType, ClusterEventWithHint
from pyscheduler.framework.interface import CycleContext, FilterResult, Reason

__all__ = ["ERR_REASON_NOT_READY", "NAME", "NodeReady"]

NAME = "NodeReady"
ERR_REASON_NOT_READY = "node(s) were not ready"


class NodeReady:
    """Filter: rows whose node reports Ready False or Unknown fail."""

    name: ClassVar[str] = NAME

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        """The events that may make a pod this plugin rejected schedulable."""
        return (on("Node", ActionType.ADD | ActionType.UPDATE_NODE_CONDITION),)

    def filter(self, ctx: CycleContext) -> FilterResult:
        down = ctx.table.not_ready[: ctx.n]
        if not down.any():
            return FilterResult.all_pass()
        failed = down.copy()  # the column is the table's; the result must outlive changes
        return FilterResult(~failed, [Reason(ERR_REASON_NOT_READY, failed)])

    def filter_row(self, ctx: CycleContext, slot: int) -> bool:
        """:meth:`filter`'s verdict for one row (the pipeline's incremental path)."""
        return not ctx.table.not_ready[slot]

"""NodeName: a pod that names its node (``spec.nodeName``) fits only that node.

Reproduces the behaviour of kube-scheduler's ``pkg/scheduler/framework/plugins/nodename``: ``Fits`` is
``pod.Spec.NodeName == "" || pod.Spec.NodeName == node.Name``, and every other node fails with
``node(s) didn't match the requested node name`` (``UnschedulableAndUnresolvable``).

The scheduler normally never sees such pods (the API server treats ``nodeName`` as already
bound), but a pod can reach the pipeline with it set, for example when it is re-evaluated by the
rebalancer or explained after the fact; the plugin keeps the answer right for those.

Vectorized: one slot lookup in the table's name index; the mask has at most one row set (none
when the named node is unknown).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from pyscheduler.framework.events import on
from pyscheduler.framework.interface import ActionType, ClusterEventWithHint
from pyscheduler.framework.interface import CycleContext, FilterResult

__all__ = ["ERR_REASON", "NAME", "NodeName"]

NAME = "NodeName"

ERR_REASON = "node(s) didn't match the requested node name"


class NodeName:
    """Filter: only the node named by ``spec.nodeName`` passes."""

    name: ClassVar[str] = NAME

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        """The events that may make a pod this plugin rejected schedulable (kube's, with
        queueing hints on)."""
        return (on("Node", ActionType.ADD),)

    def filter(self, ctx: CycleContext) -> FilterResult:
        wanted = ctx.pod.node_name
        if not wanted:
            return FilterResult.all_pass()
        passed = np.zeros(ctx.n, np.bool_)
        slot = ctx.table.slots.get(wanted)
        if slot is not None and slot < ctx.n:
            passed[slot] = True
        return FilterResult.single(passed, ERR_REASON, unresolvable=True)

    def filter_row(self, ctx: CycleContext, slot: int) -> bool:
        """:meth:`filter`'s verdict for one row (the pipeline's incremental path)."""
        return not ctx.pod.node_name or ctx.table.names[slot] == ctx.pod.node_name

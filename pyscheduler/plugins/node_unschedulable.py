"""NodeUnschedulable: cordoned nodes (``spec.unschedulable``) take no new pods.

Reproduces the behaviour of kube-scheduler's ``pkg/scheduler/framework/plugins/nodeunschedulable``: a node with
``spec.unschedulable: true`` fails with ``node(s) were unschedulable``
(``UnschedulableAndUnresolvable``: evicting pods cannot uncordon a node) unless the pod tolerates
the taint ``node.kubernetes.io/unschedulable:NoSchedule`` (empty value), which is how DaemonSet
pods get onto cordoned nodes. The toleration check is ``TolerationsTolerateTaint`` against that
synthetic taint, so ``operator: Exists`` with the key, an empty-key ``Exists`` toleration, or an
``Equal`` toleration with an empty value all count.

Vectorized: the answer is the table's ``unschedulable`` column, negated. When no node is cordoned
or the pod tolerates cordons, every node passes and the plugin reports that it does not apply.
"""

from __future__ import annotations

from typing import ClassVar

from pyscheduler.framework.events import on
from pyscheduler.framework.interface import ActionType, ClusterEventWithHint
from pyscheduler.framework.interface import CycleContext, FilterResult, Reason
from pyscheduler.framework.pod import Toleration

__all__ = [
    "ERR_REASON_UNSCHEDULABLE",
    "NAME",
    "UNSCHEDULABLE_TAINT_KEY",
    "NodeUnschedulable",
    "tolerates_unschedulable",
]

NAME = "NodeUnschedulable"

ERR_REASON_UNSCHEDULABLE = "node(s) were unschedulable"

#: The taint the node lifecycle controller puts on cordoned nodes (``v1.TaintNodeUnschedulable``).
UNSCHEDULABLE_TAINT_KEY = "node.kubernetes.io/unschedulable"


def tolerates_unschedulable(tolerations: tuple[Toleration, ...]) -> bool:
    """Whether the pod tolerates ``node.kubernetes.io/unschedulable:NoSchedule``."""
    return any(t.tolerates(UNSCHEDULABLE_TAINT_KEY, "", "NoSchedule") for t in tolerations)


class NodeUnschedulable:
    """Filter: cordoned nodes fail unless the pod tolerates the unschedulable taint."""

    name: ClassVar[str] = NAME

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        """The events that may make a pod this plugin rejected schedulable (kube's, with
        queueing hints on)."""
        return (on("Node", ActionType.ADD | ActionType.UPDATE_NODE_TAINT),
                on("Pod", ActionType.UPDATE_POD_TOLERATION))

    def filter(self, ctx: CycleContext) -> FilterResult:
        if tolerates_unschedulable(ctx.pod.tolerations):
            return FilterResult.all_pass()
        cordoned = ctx.table.unschedulable[: ctx.n]
        if not cordoned.any():
            return FilterResult.all_pass()
        failed = cordoned.copy()  # the column is the table's; the result must outlive changes
        return FilterResult(~failed, [Reason(ERR_REASON_UNSCHEDULABLE, failed, True)])

    def filter_row(self, ctx: CycleContext, slot: int) -> bool:
        """:meth:`filter`'s verdict for one row (the pipeline's incremental path)."""
        return not ctx.table.unschedulable[slot] or tolerates_unschedulable(ctx.pod.tolerations)

"""CloudPlatform: a pod labelled ``wssp/cloud-platform: <platform>`` bursts only to a pool of
that platform.

Applies in the burst pass only. The label is a requirement, like a node selector on the virtual
nodes' ``wssp/cloud-platform`` label; a pod without it may go to any pool. Rows of another
platform fail with ``node(s) are not on cloud platform <platform>``
(``UnschedulableAndUnresolvable``).
"""

from __future__ import annotations

from typing import ClassVar

from pyscheduler.framework.events import on
from pyscheduler.framework.interface import ActionType, ClusterEventWithHint
from pyscheduler.api.names import PLATFORM_LABEL
from pyscheduler.framework.interface import CycleContext, FilterResult

__all__ = ["NAME", "CloudPlatform"]

NAME = "CloudPlatform"


class CloudPlatform:
    """Filter (burst pass): virtual nodes of another platform than the pod asks for fail."""

    name: ClassVar[str] = NAME

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        """The events that may make a pod this plugin rejected schedulable."""
        return (on("Node", ActionType.ADD | ActionType.UPDATE_NODE_LABEL),)

    def filter(self, ctx: CycleContext) -> FilterResult:
        if not ctx.virtual_pass:
            return FilterResult.all_pass()
        wanted = ctx.pod.labels.get(PLATFORM_LABEL)
        if wanted is None:
            return FilterResult.all_pass()
        match = ctx.table.label_mask(PLATFORM_LABEL, wanted)
        return FilterResult.single(match, f"node(s) are not on cloud platform {wanted}",
                                   unresolvable=True)

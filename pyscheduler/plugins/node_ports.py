"""NodePorts: a host port can be bound by one pod per node (and address).

Reproduces the behaviour of kube-scheduler's ``pkg/scheduler/framework/plugins/nodeports``: a node fails with
``node(s) didn't have free ports for the requested pod ports`` (plain ``Unschedulable``:
preempting the pod that holds the port frees it) when any of the pod's host ports conflicts with
one already used there. Conflicts follow ``HostPortInfo.CheckConflict``: ports are keyed by
(protocol, port); a wildcard address ``0.0.0.0`` on either side conflicts with every address,
otherwise only the same address conflicts; ports ``<= 0`` never conflict. The pod's own host
ports (containers, and every container port under ``hostNetwork``) are collected by
:func:`pyscheduler.framework.pod.pod_info`.

Vectorized: the table keeps per-row use counts for every (protocol, port, address) in use, so a
pod's check is one OR per requested port. A pod without host ports, or whose ports nobody uses,
passes everywhere and the plugin reports that it does not apply (kube's PreFilter ``Skip``).
"""

from __future__ import annotations

from typing import ClassVar

from pyscheduler.framework.events import on
from pyscheduler.framework.interface import ActionType, ClusterEventWithHint
from pyscheduler.framework.interface import CycleContext, FilterResult, Reason
from pyscheduler.framework.nodetable import BoolArray

__all__ = ["ERR_REASON", "NAME", "NodePorts"]

NAME = "NodePorts"

ERR_REASON = "node(s) didn't have free ports for the requested pod ports"

_ANY_ADDRESS = "0.0.0.0"


class NodePorts:
    """Filter: nodes where a requested host port is already taken fail."""

    name: ClassVar[str] = NAME

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        """The events that may make a pod this plugin rejected schedulable (kube's, with
        queueing hints on)."""
        return (on("Pod", ActionType.DELETE),
                on("Node", ActionType.ADD))

    def filter(self, ctx: CycleContext) -> FilterResult:
        table = ctx.table
        conflict: BoolArray | None = None
        for hp in ctx.pod.host_ports:
            protocol = hp.protocol or "TCP"
            if hp.port <= 0 or (protocol, hp.port) not in table.port_index:
                continue
            rows = table.port_conflicts(protocol, hp.port, hp.ip or _ANY_ADDRESS)
            if conflict is None:
                conflict = rows
            else:
                conflict |= rows  # port_conflicts returns a fresh array
        if conflict is None:
            return FilterResult.all_pass()
        return FilterResult(~conflict, [Reason(ERR_REASON, conflict)])

    def filter_row(self, ctx: CycleContext, slot: int) -> bool:
        """:meth:`filter`'s verdict for one row (the pipeline's incremental path)."""
        table = ctx.table
        for hp in ctx.pod.host_ports:
            protocol = hp.protocol or "TCP"
            ips = table.port_index.get((protocol, hp.port)) if hp.port > 0 else None
            if not ips:
                continue
            wanted = hp.ip or _ANY_ADDRESS
            for used_ip, counts in ips.items():
                if counts[slot] > 0 and (wanted == _ANY_ADDRESS or used_ip == _ANY_ADDRESS
                                         or used_ip == wanted):
                    return False
        return True

"""BurstEligible: pods that can never run on a cloud pool's virtual node.

Applies in the burst pass only (``ctx.virtual_pass``). A container instance in a cloud pool is
not a machine of the cluster: it has no host network, no host ports, no host paths or local
volumes, no way to attach the cluster's persistent volumes, and DaemonSet pods belong on every real node, not in a pool. A pod annotated
``wssp/burst: "never"`` opts out. Such a pod fails on every virtual node with one reason naming
why — ``cloud pool(s) cannot take the pod: the pod uses hostNetwork`` —
(``UnschedulableAndUnresolvable``: only editing the pod changes it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from pyscheduler.framework.events import on
from pyscheduler.framework.interface import ActionType, ClusterEventWithHint
from pyscheduler.api.names import BURST_ANNOTATION, NEVER
from pyscheduler.framework.interface import CycleContext, FilterResult

__all__ = ["NAME", "BurstEligible", "burst_blocker"]

NAME = "BurstEligible"


def burst_blocker(pod: Mapping[str, Any]) -> str | None:
    """Why this pod may never run on a virtual node, or None when it may."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    if (meta.get("annotations") or {}).get(BURST_ANNOTATION) == NEVER:
        return f'the pod is annotated {BURST_ANNOTATION}: "{NEVER}"'
    for ref in meta.get("ownerReferences") or ():
        if isinstance(ref, Mapping) and ref.get("kind") == "DaemonSet":
            return "DaemonSet pods run on every real node and never burst"
    if spec.get("hostNetwork"):
        return "the pod uses hostNetwork"
    for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        for p in (c.get("ports") or ()) if isinstance(c, Mapping) else ():
            if isinstance(p, Mapping) and p.get("hostPort"):
                return f"container {c.get('name')} uses hostPort {p.get('hostPort')}"
    for v in spec.get("volumes") or ():
        if isinstance(v, Mapping):
            if "hostPath" in v:
                return f"volume {v.get('name')} is a hostPath volume"
            if "local" in v:
                return f"volume {v.get('name')} is a local volume"
            if "persistentVolumeClaim" in v or "ephemeral" in v:
                # A cluster's persistent volumes attach to its own nodes, not to instances in
                # a cloud pool.
                return (f"volume {v.get('name')} is a PersistentVolumeClaim, which a cloud "
                        "pool cannot attach")
    return None


class BurstEligible:
    """Filter (burst pass): every virtual node fails for a pod that may not burst."""

    name: ClassVar[str] = NAME

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        """The events that may make a pod this plugin rejected schedulable."""
        return (on("Node", ActionType.ADD),)

    def filter(self, ctx: CycleContext) -> FilterResult:
        if not ctx.virtual_pass:
            return FilterResult.all_pass()
        blocker = burst_blocker(ctx.pod.raw)
        if blocker is None:
            return FilterResult.all_pass()
        return FilterResult.single(~ctx.nodes(), f"cloud pool(s) cannot take the pod: {blocker}",
                                   unresolvable=True)

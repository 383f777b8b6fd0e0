"""Cluster events, as the plugins register them and the informers report them (kube's
``framework.ClusterEvent`` and its ``ActionType``s).

A plugin that rejects a pod says which events may make it schedulable again
(:class:`~pyscheduler.framework.interface.EnqueueExtensions`); the queue moves a parked pod
only for an event one of the plugins that rejected it registered. The informer handlers say
what changed on a node with :func:`node_update`, as kube's event handlers do.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from pyscheduler.framework.interface import ActionType, ClusterEvent, ClusterEventWithHint
from pyscheduler.framework.nodetable import NodeInfo
from pyscheduler.framework.pod import PodInfo

__all__ = [
    "ClusterListener",
    "ASSIGNED_POD_ADD",
    "ASSIGNED_POD_DELETE",
    "NODE",
    "NODE_ADD",
    "namespace_and_labels",
    "POD",
    "node_update",
    "on",
]

NODE: Final = "Node"
POD: Final = "Pod"
NODE_ADD: Final = ClusterEvent(NODE, ActionType.ADD)
NODE_DELETE: Final = ClusterEvent(NODE, ActionType.DELETE)
ASSIGNED_POD_ADD: Final = ClusterEvent(POD, ActionType.ADD)
ASSIGNED_POD_DELETE: Final = ClusterEvent(POD, ActionType.DELETE)


def on(resource: str, action: ActionType) -> ClusterEventWithHint:
    """A registration without a hint: every such event may help."""
    return ClusterEventWithHint(ClusterEvent(resource, action))


def namespace_and_labels(obj: object) -> tuple[str, Mapping[str, str]] | None:
    """A pod object's namespace and labels, for hints (None: not a pod object)."""
    if not isinstance(obj, Mapping):
        return None
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        return None
    labels = meta.get("labels")
    return str(meta.get("namespace") or ""), labels if isinstance(labels, Mapping) else {}


def node_update(old: NodeInfo, new: NodeInfo) -> ActionType | None:
    """What changed on a node, as kube names it; None when nothing scheduling reads did (a
    heartbeat)."""
    action = ActionType(0)
    if old.allocatable != new.allocatable:
        action |= ActionType.UPDATE_NODE_ALLOCATABLE
    if old.labels != new.labels:
        action |= ActionType.UPDATE_NODE_LABEL
    if old.taints != new.taints or old.unschedulable != new.unschedulable:
        action |= ActionType.UPDATE_NODE_TAINT
    if old.ready != new.ready:
        action |= ActionType.UPDATE_NODE_CONDITION
    if (old.max_instance_cpu, old.max_instance_memory, old.price_per_cpu_hour) != (
            new.max_instance_cpu, new.max_instance_memory, new.price_per_cpu_hour):
        action |= ActionType.UPDATE_NODE_ANNOTATION  # a cloud pool's instance limits
    return action or None


class ClusterListener:
    """What a plugin that keeps state per pod or node hears from the informers, beside the
    events that requeue pods: the scheduler tells every plugin of its profiles that is one.
    Each does nothing here; a plugin overrides what it needs. Called on the scheduling loop;
    none may block or raise."""

    def pod_pending(self, pod: PodInfo) -> None:
        """A pending pod of this scheduler's, as the cluster shows it now."""

    def pod_settled(self, uid: str) -> None:
        """The pod is no longer pending here: bound (by anyone), being deleted, finished."""

    def pod_gone(self, uid: str) -> None:
        """The pod was deleted."""

    def node_gone(self, name: str) -> None:
        """The node left the cluster (before its row is emptied)."""

"""The scheduler's cache: what every node has, including decisions not yet confirmed.

Fed by the informers (nodes, and pods that are assigned to a node) and by the scheduler's own
decisions, it keeps the :class:`~pyscheduler.framework.nodetable.NodeTable` current:

* **assume** — the moment a node is chosen, the pod is counted on it, so the next pod does not
  take the same capacity while the binding is in flight;
* **confirm** — when the informer shows the pod bound, the assumption becomes fact (on whatever
  node the API server says);
* **forget** — a failed binding takes the pod off the node again;
* **expire** — an assumption whose binding finished but which the informer never confirmed is
  dropped after a TTL (kube-scheduler's ``cleanupAssumedPods``), so a lost watch event cannot
  leak capacity forever.

Pods bound to a node the cache has not seen yet are kept aside and counted when the node
appears. Finished pods (Succeeded/Failed) hold no resources and are not counted.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from pyscheduler.framework.nodetable import NodeInfo, NodeTable
from pyscheduler.framework.pod import PodInfo

__all__ = ["Cache", "PodState"]


@dataclass(slots=True)
class PodState:
    pod: PodInfo
    node: str
    assumed: bool
    binding_done: bool = False
    deadline: float = 0.0


class Cache:
    def __init__(self, table: NodeTable | None = None, *, assumed_ttl: float = 30.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.table = table or NodeTable()
        self.assumed_ttl = assumed_ttl
        self.clock = clock
        self.pods: dict[str, PodState] = {}
        # The assumed among them, so that the once-a-second expiry and sizes walk the few
        # bindings in flight, not every pod of the cluster.
        self._assumed: dict[str, PodState] = {}
        self._waiting: dict[str, dict[str, PodInfo]] = {}  # node name -> uid -> pod

    # -- sizes (scheduler_cache_size) ----------------------------------------------------------

    def sizes(self) -> dict[str, int]:
        return {"assumed_pods": len(self._assumed), "pods": len(self.pods),
                "nodes": len(self.table.slots)}

    # -- nodes ---------------------------------------------------------------------------------

    def set_node(self, info: NodeInfo) -> None:
        slot = self.table.set_node(info)
        for pod in self._waiting.pop(info.name, {}).values():
            self.table.add_pod(slot, pod)

    def remove_node(self, name: str) -> None:
        for pod in self.table.remove_node(name):
            # The pods stay known: if the node comes back they count again.
            self._waiting.setdefault(name, {})[pod.uid] = pod

    # -- pods ----------------------------------------------------------------------------------

    def _place(self, pod: PodInfo, node: str) -> None:
        slot = self.table.slots.get(node)
        if slot is None:
            self._waiting.setdefault(node, {})[pod.uid] = pod
        else:
            self.table.add_pod(slot, pod)

    def _unplace(self, uid: str, node: str) -> None:
        slot = self.table.slots.get(node)
        if slot is not None:
            self.table.remove_pod(slot, uid)
        waiting = self._waiting.get(node)
        if waiting is not None:
            waiting.pop(uid, None)
            if not waiting:
                del self._waiting[node]

    def assume(self, pod: PodInfo, node: str) -> None:
        if pod.uid in self.pods:
            raise ValueError(f"pod {pod.key} ({pod.uid}) is already in the cache")
        self.pods[pod.uid] = self._assumed[pod.uid] = PodState(pod, node, assumed=True)
        self._place(pod, node)

    def finish_binding(self, uid: str) -> None:
        """The binding call returned; start the confirmation deadline."""
        state = self.pods.get(uid)
        if state is not None and state.assumed:
            state.binding_done = True
            state.deadline = self.clock() + self.assumed_ttl

    def forget(self, uid: str) -> None:
        state = self.pods.get(uid)
        if state is not None and state.assumed:
            del self.pods[uid]
            del self._assumed[uid]
            self._unplace(uid, state.node)

    def confirm(self, uid: str, node: str, labels: dict[str, str]) -> bool:
        """The informer shows an assumed pod bound where we put it, with the labels it had:
        the assumption becomes fact without re-counting anything. False when that is not the
        case (the caller then adds the pod as seen)."""
        state = self.pods.get(uid)
        if state is None or not state.assumed or state.node != node \
                or state.pod.labels != labels:
            return False
        state.assumed = False
        del self._assumed[uid]
        return True

    def refresh(self, uid: str, node: str, obj: dict[str, Any]) -> bool:
        """A new version of a pod counted on ``node`` whose spec is unchanged (a status
        write: the kubelet's, a condition): when its labels and annotations are as counted
        too, only its phase and raw object change, nothing to parse or re-count. False when
        that is not the case (the caller then adds the pod as seen)."""
        state = self.pods.get(uid)
        if state is None or state.assumed or state.node != node:
            return False
        pod = state.pod
        meta = obj.get("metadata") or {}
        if pod.node_name != node or bool(meta.get("deletionTimestamp")) != pod.deleting \
                or (meta.get("labels") or {}) != pod.labels \
                or (meta.get("annotations") or {}) != pod.annotations:
            return False
        phase = (obj.get("status") or {}).get("phase") or "Pending"
        if not isinstance(phase, str) or phase in ("Succeeded", "Failed"):
            return False
        pod.phase = phase
        pod.raw = dict(obj)
        return True

    def is_assumed(self, uid: str) -> bool:
        state = self.pods.get(uid)
        return state is not None and state.assumed

    def add_pod(self, pod: PodInfo) -> None:
        """An assigned pod seen by the informer (new, or confirming an assumption)."""
        if pod.terminal:
            self.remove_pod(pod.uid)
            return
        state = self.pods.get(pod.uid)
        if state is not None:
            self._unplace(pod.uid, state.node)
            self._assumed.pop(pod.uid, None)
        self.pods[pod.uid] = PodState(pod, pod.node_name, assumed=False)
        self._place(pod, pod.node_name)

    update_pod = add_pod

    def remove_pod(self, uid: str) -> PodInfo | None:
        state = self.pods.pop(uid, None)
        if state is None:
            return None
        self._assumed.pop(uid, None)
        self._unplace(uid, state.node)
        return state.pod

    def expire(self) -> list[PodInfo]:
        """Drop assumptions whose binding finished long ago without confirmation."""
        now = self.clock()
        expired = [s for s in self._assumed.values() if s.binding_done and s.deadline <= now]
        for s in expired:
            self.forget(s.pod.uid)
        return [s.pod for s in expired]

    def assigned(self) -> Iterator[PodState]:
        return iter(self.pods.values())

"""The DaemonSet controller of the embedded cluster (kube-controller-manager's
``pkg/controller/daemon``, ``manage`` and ``updateDaemonSetStatus``).

Every decision is :mod:`pyscheduler_sim.daemonsets`'; this loop reads the DaemonSet, the nodes
and the namespace's pods, and writes:

* the pods it claims: its own (controller reference) that still match its selector, and
  orphans that match it (adopted); its own that stopped matching are released;
* one pod per node that should run it, when the node has none (terminating ones count, as in
  kube: the replacement comes once they are gone); on a node where the pod may stay, failed or
  completed daemon pods are deleted and, of several running ones, all but the oldest; on a
  node where it may not stay (an untolerated ``NoExecute`` taint, a label that no longer
  matches), all of them;
* pods meant for nodes that no longer exist: deleted, and those already bound to the vanished
  node removed at once (grace period 0), as kube's pod garbage collector does for pods whose
  kubelet is gone;
* the status: ``desiredNumberScheduled`` (nodes that should run it),
  ``currentNumberScheduled`` (of those, nodes with a daemon pod), ``numberMisscheduled``
  (other nodes with one), ``numberReady``, ``numberAvailable`` (ready for ``minReadySeconds``),
  ``updatedNumberScheduled`` (pods of the current template), ``numberUnavailable`` and
  ``observedGeneration``, judged on each node's oldest daemon pod, scheduled ones first.

Rolling updates are not paced: pods of an older template stay until deleted (as with
``updateStrategy: OnDelete``). ControllerRevisions are not written; the pods carry the
template's hash in ``controller-revision-hash`` all the same.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Hashable, Iterable
from typing import Any

from pyscheduler.api.labels import LabelSelector, SelectorError, label_selector_from_dict
from pyscheduler_sim import errors
from pyscheduler_sim.controller import Controller
from pyscheduler_sim.controller_utils import condition_true, controller_ref, owner_ref, \
    template_hash
from pyscheduler_sim.daemonsets import (
    HASH_LABEL,
    TEMPLATE_GENERATION_LABEL,
    new_pod,
    should_run,
    target_node,
    template_generation,
)
from pyscheduler_sim.registry import Registry
from pyscheduler_sim.resources import ResourceType
from pyscheduler_sim.store import Stored

__all__ = ["DaemonSetController"]

Obj = dict[str, Any]
# The status fields that have no omitempty: they are written even when zero.
_ALWAYS = ("currentNumberScheduled", "numberMisscheduled", "desiredNumberScheduled",
           "numberReady")


def _oldest_first(pod: Obj) -> tuple[bool, str, str]:
    """``podByCreationTimestampAndPhase``: scheduled pods first, then the oldest."""
    return (not pod["spec"].get("nodeName"), str(pod["metadata"].get("creationTimestamp") or ""),
            str(pod["metadata"]["name"]))


def _ready_for(pod: Obj, now: dt.datetime) -> float:
    """Seconds the pod has been ready, or -1."""
    for c in (pod.get("status") or {}).get("conditions") or ():
        if c.get("type") == "Ready" and c.get("status") == "True":
            try:
                since = dt.datetime.strptime(str(c.get("lastTransitionTime")),
                                             "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.timezone.utc)
            except ValueError:
                return 0.0
            return (now - since).total_seconds()
    return -1.0


class DaemonSetController(Controller):
    name = "daemonset-controller"

    def __init__(self, registry: Registry) -> None:
        super().__init__(registry)
        self.daemonsets = registry.type("apps", "v1", "daemonsets")

    def on_change(self, kind: str, rt: ResourceType, obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        if rt is self.daemonsets:
            self.enqueue((meta["namespace"], meta["name"]))
        elif rt is self.registry.pods:
            ref = controller_ref(obj)
            if ref is not None:
                if ref.get("kind") == "DaemonSet":
                    self.enqueue((meta["namespace"], ref["name"]))
            elif kind != "DELETED":
                # An orphan may be adopted by a DaemonSet of its namespace.
                for s in self.registry.store.iter(self.daemonsets, meta["namespace"]):
                    self.enqueue((s.namespace, s.name))
        elif rt is self.registry.nodes:
            for s in self.registry.store.iter(self.daemonsets):
                self.enqueue((s.namespace, s.name))

    def all_keys(self) -> Iterable[Hashable]:
        return [(s.namespace, s.name) for s in self.registry.store.iter(self.daemonsets)]

    async def reconcile(self, key: Any) -> None:
        namespace, name = key
        stored = self.registry.store.get(self.daemonsets, namespace, name)
        if stored is None:
            return  # the garbage collector removes its pods
        ds = stored.obj
        if ds["metadata"].get("deletionTimestamp"):
            return
        try:
            selector = label_selector_from_dict((ds.get("spec") or {}).get("selector"))
        except SelectorError:
            return
        nodes = [s.view for s in self.registry.store.iter(self.registry.nodes)]
        revision = template_hash((ds.get("spec") or {}).get("template") or {})
        self._manage(ds, stored, selector, nodes, revision)
        self._update_status(ds, stored, selector, nodes, revision)

    def _claim(self, ds: Obj, stored: Stored, selector: LabelSelector) -> dict[str, list[Obj]]:
        """The DaemonSet's pods by target node, adopting matching orphans and releasing its own
        pods that stopped matching (``ClaimPods``)."""
        by_node: dict[str, list[Obj]] = {}
        for s in list(self.registry.store.iter(self.registry.pods, stored.namespace)):
            matches = selector.matches(s.labels)
            if s.controller_uid == stored.uid:
                pod = s.view
                if not matches:
                    if not pod["metadata"].get("deletionTimestamp"):
                        released = s.obj
                        released["metadata"]["ownerReferences"] = [
                            r for r in released["metadata"]["ownerReferences"]
                            if r.get("uid") != stored.uid]
                        self.registry.update(self.registry.pods, s.namespace, s.name, released)
                    continue
            elif s.controller_uid or not matches:
                continue
            else:
                pod = s.obj
                if pod["metadata"].get("deletionTimestamp") or (pod.get("status") or {}).get(
                        "phase") in ("Succeeded", "Failed"):
                    continue
                pod["metadata"].setdefault("ownerReferences", []).append(
                    owner_ref(ds, "DaemonSet", "apps/v1"))
                pod = self.registry.update(self.registry.pods, s.namespace, s.name, pod)
            by_node.setdefault(target_node(pod), []).append(pod)
        return by_node

    def _manage(self, ds: Obj, stored: Stored, selector: LabelSelector, nodes: list[Obj],
                revision: str) -> None:
        by_node = self._claim(ds, stored, selector)
        create: list[str] = []
        delete: list[Obj] = []
        force: list[Obj] = []
        for node in nodes:
            node_name = node["metadata"]["name"]
            run, stay = should_run(ds, node)
            pods = by_node.get(node_name, [])
            live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
            if run and not pods:
                create.append(node_name)
            elif stay:
                running = []
                for pod in live:
                    if (pod.get("status") or {}).get("phase") in ("Failed", "Succeeded"):
                        delete.append(pod)
                    else:
                        running.append(pod)
                delete.extend(sorted(running, key=_oldest_first)[1:])
            else:
                delete.extend(live)
        known = {n["metadata"]["name"] for n in nodes}
        for target, pods in by_node.items():
            if target in known:
                continue
            for pod in pods:
                if pod["spec"].get("nodeName"):
                    force.append(pod)
                elif not pod["metadata"].get("deletionTimestamp"):
                    delete.append(pod)
        for node_name in create:
            self.registry.create(self.registry.pods, stored.namespace,
                                 new_pod(ds, node_name, revision))
        for pod, options in [(p, None) for p in delete] + [(p, {"gracePeriodSeconds": 0})
                                                            for p in force]:
            try:
                self.registry.delete(self.registry.pods, stored.namespace,
                                     pod["metadata"]["name"], options)
            except errors.ApiError as exc:
                if exc.code != 404:
                    raise

    def _update_status(self, ds: Obj, stored: Stored, selector: LabelSelector,
                       nodes: list[Obj], revision: str) -> None:
        by_node: dict[str, list[Obj]] = {}
        for s in self.registry.store.iter(self.registry.pods, stored.namespace):
            if s.controller_uid == stored.uid and selector.matches(s.labels):
                pod = s.view
                by_node.setdefault(target_node(pod), []).append(pod)
        min_ready = int((ds.get("spec") or {}).get("minReadySeconds") or 0)
        generation = str(template_generation(ds))
        now = dt.datetime.now(dt.timezone.utc)
        counts = dict.fromkeys(("desiredNumberScheduled", "currentNumberScheduled",
                                "numberReady", "numberAvailable", "updatedNumberScheduled",
                                "numberMisscheduled"), 0)
        wake_in: float | None = None
        for node in nodes:
            pods = sorted(by_node.get(node["metadata"]["name"], []), key=_oldest_first)
            if not should_run(ds, node)[0]:
                counts["numberMisscheduled"] += bool(pods)
                continue
            counts["desiredNumberScheduled"] += 1
            if not pods:
                continue
            counts["currentNumberScheduled"] += 1
            pod = pods[0]
            if condition_true(pod, "Ready"):
                counts["numberReady"] += 1
                ready_for = _ready_for(pod, now)
                if ready_for >= min_ready:
                    counts["numberAvailable"] += 1
                else:
                    left = min_ready - ready_for
                    wake_in = left if wake_in is None else min(wake_in, left)
            labels = pod["metadata"].get("labels") or {}
            if labels.get(HASH_LABEL) == revision \
                    or labels.get(TEMPLATE_GENERATION_LABEL) == generation:
                counts["updatedNumberScheduled"] += 1
        status: Obj = {
            **counts,
            "numberUnavailable": counts["desiredNumberScheduled"] - counts["numberAvailable"],
            "observedGeneration": ds["metadata"].get("generation", 1),
        }
        status = {k: v for k, v in status.items() if v or k in _ALWAYS}
        if wake_in is not None:
            # Available after minReadySeconds: look again then.
            asyncio.get_running_loop().call_later(wake_in + 0.5, self.enqueue,
                                                  (stored.namespace, stored.name))
        current = self.registry.get(self.daemonsets, stored.namespace, stored.name)
        if current.get("status") != status:
            current["status"] = status
            self.registry.update(self.daemonsets, stored.namespace, stored.name, current,
                                 "status")

"""The kube-controller-manager part of the embedded cluster.

* :class:`ReplicaSetController` keeps ``spec.replicas`` pods, adopts orphans that match its
  selector and releases owned pods that stop matching. On scale-down it deletes pods in
  kube-controller-manager's order (``controller.ActivePodsWithRanks``): unassigned before assigned,
  Pending before Unknown before Running, not ready before ready, lower
  ``controller.kubernetes.io/pod-deletion-cost`` first, pods doubled up on a node first, ready for
  less time first, more restarts first, newer first.
* :class:`DeploymentController` owns one ReplicaSet per pod template (named by the
  ``pod-template-hash``), rolls out with RollingUpdate (maxSurge/maxUnavailable) or Recreate,
  scales, and keeps ``revisionHistoryLimit`` old ReplicaSets.
* :class:`GarbageCollector` deletes dependents whose owners are all gone (background
  propagation), orphans dependents of an owner deleted with ``Orphan``, and holds an owner deleted
  with ``Foreground`` until its dependents are gone.
* :class:`DisruptionController` keeps PodDisruptionBudget status current for the eviction
  subresource.
* :class:`NamespaceController` empties a terminating namespace, then removes it.

The DaemonSet controller (:mod:`pyscheduler_sim.daemonset_controller`) and the PersistentVolume
controller with its simulated provisioner (:mod:`pyscheduler_sim.volumes`) have modules of their
own; what controllers share about the objects they manage is in
:mod:`pyscheduler_sim.controller_utils`. The cluster (:mod:`pyscheduler_sim.cluster`) starts
them all.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import math
from fractions import Fraction
from collections.abc import Hashable, Iterable
from typing import Any, NamedTuple

import orjson

from pyscheduler_sim import errors
from pyscheduler_sim.controller import Controller
from pyscheduler_sim.controller_utils import (
    condition_true,
    controller_ref,
    is_active,
    owner_ref,
    template_hash,
)
from pyscheduler_sim.registry import Registry, now_rfc3339
from pyscheduler_sim.resources import ResourceType
from pyscheduler.api.labels import SelectorError, label_selector_from_dict
from pyscheduler.api.quantity import QuantityError, format_quantity, parse_quantity
from pyscheduler_sim.store import Stored

__all__ = [
    "DeploymentController",
    "DisruptionController",
    "GarbageCollector",
    "NamespaceController",
    "ReplicaSetController",
    "ResourceQuotaController",
    "all_controllers",
]

Obj = dict[str, Any]
DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
REVISION = "deployment.kubernetes.io/revision"


def _ready_since(pod: Obj) -> str:
    for c in (pod.get("status") or {}).get("conditions") or ():
        if c.get("type") == "Ready" and c.get("status") == "True":
            return str(c.get("lastTransitionTime") or "")
    return ""


def _selector(obj: Obj) -> Any:
    try:
        return label_selector_from_dict((obj.get("spec") or {}).get("selector"))
    except SelectorError:
        return None


# -- ReplicaSet ---------------------------------------------------------------------------------

class ReplicaSetController(Controller):
    name = "replicaset-controller"
    # A resync reconciles every ReplicaSet, each reading every pod of its namespace: with
    # 3000 ReplicaSets over 150,000 pods, a second of the server's CPU. kube-controller-manager
    # resyncs its informers every 12 to 24 hours; every 5 minutes here (a safety net only:
    # every write that matters enqueues its ReplicaSet).
    resync_seconds = 300.0
    # A reconcile reads every pod of the namespace. While thousands of a ReplicaSet's pods
    # change state (a burst turning Running), draining at most every 50 ms instead of 5 ms
    # keeps that cost from following every single pod update.
    batch_seconds = 0.05

    def __init__(self, registry: Registry) -> None:
        super().__init__(registry)
        self.rs = registry.type("apps", "v1", "replicasets")
        # Per ReplicaSet: the template labels and selector its pods' facts were found under,
        # and those facts by (namespace, name).
        self._facts: dict[Hashable, tuple[Any, dict[tuple[str, str], _PodFacts]]] = {}

    def on_change(self, kind: str, rt: ResourceType, obj: Obj) -> None:
        if rt is self.rs:
            # (A deleted ReplicaSet is reconciled too: that drops what was kept for it.)
            meta = obj["metadata"]
            self.enqueue((meta["namespace"], meta["name"]))
        elif rt is self.registry.pods:
            ref = controller_ref(obj)
            ns = obj["metadata"]["namespace"]
            if ref is not None and ref.get("kind") == "ReplicaSet":
                self.enqueue((ns, ref["name"]))
            elif kind != "DELETED" and ref is None:
                # A pod without a controller may be adopted by a ReplicaSet of its namespace.
                for s in self.registry.store.iter(self.rs, ns):
                    self.enqueue((ns, s.name))

    def all_keys(self) -> Iterable[Hashable]:
        return [(s.namespace, s.name) for s in self.registry.store.iter(self.rs)]

    async def reconcile(self, key: Any) -> None:
        namespace, name = key
        stored = self.registry.store.get(self.rs, namespace, name)
        if stored is None:
            self._facts.pop(key, None)
            return
        rs = stored.obj
        selector = _selector(rs)
        if selector is None:
            return
        active = [f for f in self._claim(key, rs, stored, selector) if f.active]
        deleting = rs["metadata"].get("deletionTimestamp")
        want = int(rs["spec"].get("replicas", 1))
        if not deleting:
            if len(active) < want:
                for _ in range(want - len(active)):
                    self._create_pod(rs)
            elif len(active) > want:
                pods = [f.stored.obj for f in active]
                for pod in self._deletion_order(pods)[:len(active) - want]:
                    try:
                        self.registry.delete(self.registry.pods, namespace,
                                             pod["metadata"]["name"])
                    except errors.ApiError as exc:
                        if exc.code != 404:
                            raise
        self._update_status(stored, rs, active)

    def _claim(self, key: tuple[str, str], rs: Obj, stored: Stored,
               selector: Any) -> list[_PodFacts]:
        """Owned pods, adopting matching orphans and releasing owned pods that stopped matching.

        What a reconcile needs of each pod is kept per stored version of it (a few flags, not
        the decoded pod), so a reconcile decodes only the pods that changed since the previous
        one, and a ReplicaSet's thousands of pods cost little memory here."""
        out = []
        uid = stored.uid
        template = _template_labels(rs)
        basis = (template, orjson.dumps((rs.get("spec") or {}).get("selector")))
        known_basis, known = self._facts.get(key, (None, {}))
        if known_basis != basis:
            known = {}  # facts found under another template or selector do not carry over
        facts: dict[tuple[str, str], _PodFacts] = {}
        for s in list(self.registry.store.iter(self.registry.pods, stored.namespace)):
            if s.controller_uid not in ("", uid):
                continue  # another controller's
            if s.controller_uid:
                f = known.get(s.key)
                if f is not None and f.stored is s:
                    facts[s.key] = f
                    out.append(f)
                    continue
            matches = selector.matches(s.labels)
            if not matches and not s.controller_uid:
                continue  # neither ours nor adoptable: no need to decode it
            view = s.view  # shared and read-only; writes below go through a private copy
            if s.controller_uid:
                if matches:
                    f = _PodFacts.of(view, s, template)
                    facts[s.key] = f
                    out.append(f)
                elif not view["metadata"].get("deletionTimestamp"):
                    pod = s.obj
                    pod["metadata"]["ownerReferences"] = [
                        r for r in pod["metadata"]["ownerReferences"] if r.get("uid") != uid]
                    self.registry.update(self.registry.pods, s.namespace, s.name, pod)
            elif is_active(view) and not rs["metadata"].get("deletionTimestamp"):
                pod = s.obj
                pod["metadata"].setdefault("ownerReferences", []).append(
                    owner_ref(rs, "ReplicaSet", "apps/v1"))
                adopted = self.registry.update(self.registry.pods, s.namespace, s.name, pod)
                now = self.registry.store.get(self.registry.pods, s.namespace, s.name)
                if now is not None:
                    f = _PodFacts.of(adopted, now, template)
                    facts[s.key] = f
                    out.append(f)
        self._facts[key] = (basis, facts)
        return out

    def _create_pod(self, rs: Obj) -> None:
        template = rs["spec"].get("template") or {}
        tmeta = dict(template.get("metadata") or {})
        meta = {"generateName": rs["metadata"]["name"] + "-",
                "namespace": rs["metadata"]["namespace"],
                "labels": dict(tmeta.get("labels") or {}),
                "ownerReferences": [owner_ref(rs, "ReplicaSet", "apps/v1")]}
        if tmeta.get("annotations"):
            meta["annotations"] = dict(tmeta["annotations"])
        if tmeta.get("finalizers"):
            meta["finalizers"] = list(tmeta["finalizers"])
        self.registry.create(self.registry.pods, rs["metadata"]["namespace"], {
            "apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": orjson.loads(orjson.dumps(template.get("spec") or {}))})

    @staticmethod
    def _deletion_order(pods: list[Obj]) -> list[Obj]:
        per_node: dict[str, int] = {}
        for p in pods:
            node = p["spec"].get("nodeName") or ""
            if node:
                per_node[node] = per_node.get(node, 0) + 1
        phase_rank = {"Pending": 0, "Unknown": 1, "Running": 2}

        def cost(p: Obj) -> int:
            raw = (p["metadata"].get("annotations") or {}).get(DELETION_COST, "0")
            try:
                return int(raw)
            except ValueError:
                return 0

        def restarts(p: Obj) -> int:
            return sum(int(c.get("restartCount", 0))
                       for c in (p.get("status") or {}).get("containerStatuses") or ())

        def key(p: Obj) -> tuple[Any, ...]:
            node = p["spec"].get("nodeName") or ""
            ready = condition_true(p, "Ready")
            return (
                1 if node else 0,
                phase_rank.get((p.get("status") or {}).get("phase", ""), 3),
                1 if ready else 0,
                cost(p),
                -per_node.get(node, 0),
                # ready for less time (later transition) goes first
                _Reverse(_ready_since(p)) if ready else _Reverse(""),
                -restarts(p),
                _Reverse(p["metadata"].get("creationTimestamp", "")),
            )

        return sorted(pods, key=key)

    def _update_status(self, stored: Stored, rs: Obj, active: list[_PodFacts]) -> None:
        ready = sum(1 for f in active if f.ready)
        status = {
            "replicas": len(active),
            "fullyLabeledReplicas": sum(1 for f in active if f.labeled),
            "readyReplicas": ready,
            "availableReplicas": ready,
            "observedGeneration": rs["metadata"].get("generation", 1),
        }
        # Zero values of omitempty fields are not serialized (replicas has no omitempty).
        status = {k: v for k, v in status.items() if v or k == "replicas"}
        if rs.get("status") != status:
            rs["status"] = status
            self.registry.update(self.rs, stored.namespace, stored.name, rs, "status")


def _template_labels(rs: Obj) -> frozenset[tuple[str, str]]:
    template = (rs.get("spec") or {}).get("template") or {}
    return frozenset(((template.get("metadata") or {}).get("labels") or {}).items())


class _PodFacts(NamedTuple):
    """What a ReplicaSet's reconcile needs of one of its pods, as of one stored version."""

    stored: Stored           # the version these facts describe
    active: bool
    ready: bool
    labeled: bool            # carries every label of the pod template

    @classmethod
    def of(cls, pod: Obj, stored: Stored,
           template: frozenset[tuple[str, str]]) -> _PodFacts:
        labels = pod["metadata"].get("labels") or {}
        return cls(stored, is_active(pod), condition_true(pod, "Ready"),
                   all(labels.get(k) == v for k, v in template))


class _Reverse:
    """Sorts its value in descending order inside an ascending tuple sort."""

    __slots__ = ("value",)

    def __init__(self, value: str) -> None:
        self.value = value

    def __lt__(self, other: _Reverse) -> bool:
        return self.value > other.value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Reverse) and self.value == other.value


# -- Deployment ---------------------------------------------------------------------------------

def _scaled(value: Any, total: int, round_up: bool) -> int:
    if isinstance(value, str) and value.endswith("%"):
        pct = float(value[:-1]) / 100.0 * total
        return math.ceil(pct) if round_up else math.floor(pct)
    return int(value or 0)


class DeploymentController(Controller):
    name = "deployment-controller"

    def __init__(self, registry: Registry) -> None:
        super().__init__(registry)
        self.deploy = registry.type("apps", "v1", "deployments")
        self.rs = registry.type("apps", "v1", "replicasets")

    def on_change(self, kind: str, rt: ResourceType, obj: Obj) -> None:
        if rt is self.deploy and kind != "DELETED":
            self.enqueue((obj["metadata"]["namespace"], obj["metadata"]["name"]))
        elif rt is self.rs:
            ref = controller_ref(obj)
            if ref is not None and ref.get("kind") == "Deployment":
                self.enqueue((obj["metadata"]["namespace"], ref["name"]))

    def all_keys(self) -> Iterable[Hashable]:
        return [(s.namespace, s.name) for s in self.registry.store.iter(self.deploy)]

    def _owned(self, stored: Stored) -> list[Obj]:
        return [rs for rs in (s.obj for s in self.registry.store.iter(self.rs, stored.namespace)
                              if stored.uid in s.owner_uids)
                if (controller_ref(rs) or {}).get("uid") == stored.uid]

    async def reconcile(self, key: Any) -> None:
        namespace, name = key
        stored = self.registry.store.get(self.deploy, namespace, name)
        if stored is None:
            return
        d = stored.obj
        if d["metadata"].get("deletionTimestamp"):
            return
        owned = self._owned(stored)
        template = d["spec"].get("template") or {}
        thash = template_hash(template)
        new = next((rs for rs in owned
                    if (rs["metadata"].get("labels") or {}).get("pod-template-hash") == thash),
                   None)
        old = [rs for rs in owned if rs is not new]
        revision = 1 + max((int((rs["metadata"].get("annotations") or {}).get(REVISION, "0"))
                            for rs in owned), default=0)
        if new is None:
            new = self._create_rs(d, thash, revision, 0 if old else d["spec"]["replicas"])
        elif old and (new["metadata"].get("annotations") or {}).get(REVISION) != str(
                revision - 1):
            new["metadata"].setdefault("annotations", {})[REVISION] = str(revision)
            new = self.registry.update(self.rs, namespace, new["metadata"]["name"], new)
        self._rollout(d, new, old)
        self._cleanup(d, old)
        self._update_status(stored, d, new)

    def _create_rs(self, d: Obj, thash: str, revision: int, replicas: int) -> Obj:
        template = orjson.loads(orjson.dumps(d["spec"]["template"]))
        template.setdefault("metadata", {}).setdefault("labels", {})["pod-template-hash"] = thash
        selector = orjson.loads(orjson.dumps(d["spec"]["selector"]))
        selector.setdefault("matchLabels", {})["pod-template-hash"] = thash
        meta = d["metadata"]
        return self.registry.create(self.rs, meta["namespace"], {
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": f"{meta['name']}-{thash}", "namespace": meta["namespace"],
                         "labels": dict(template["metadata"]["labels"]),
                         "annotations": {REVISION: str(revision),
                                         "deployment.kubernetes.io/desired-replicas":
                                             str(d["spec"]["replicas"])},
                         "ownerReferences": [owner_ref(d, "Deployment", "apps/v1")]},
            "spec": {"replicas": replicas, "selector": selector, "template": template,
                     "minReadySeconds": d["spec"].get("minReadySeconds", 0)}})

    def _scale(self, rs: Obj, replicas: int) -> None:
        if rs["spec"].get("replicas") != replicas:
            rs["spec"]["replicas"] = replicas
            self.registry.update(self.rs, rs["metadata"]["namespace"], rs["metadata"]["name"],
                                 rs)

    def _rollout(self, d: Obj, new: Obj, old: list[Obj]) -> None:
        want = int(d["spec"]["replicas"])
        strategy = d["spec"].get("strategy") or {}
        if d["spec"].get("paused"):
            return
        old_live = [rs for rs in old if rs["spec"].get("replicas", 0) > 0
                    or (rs.get("status") or {}).get("replicas", 0) > 0]
        if strategy.get("type") == "Recreate":
            for rs in old_live:
                self._scale(rs, 0)
            if not any((rs.get("status") or {}).get("replicas", 0) for rs in old_live):
                self._scale(new, want)
            return
        if not old_live:
            self._scale(new, want)
            return
        rolling = strategy.get("rollingUpdate") or {}
        surge = _scaled(rolling.get("maxSurge", "25%"), want, True)
        unavailable = _scaled(rolling.get("maxUnavailable", "25%"), want, False)
        if surge == 0 and unavailable == 0:
            unavailable = 1
        total = new["spec"].get("replicas", 0) + sum(rs["spec"].get("replicas", 0)
                                                      for rs in old_live)
        # Scale the new ReplicaSet up within the surge budget.
        room = want + surge - total
        if room > 0 and new["spec"].get("replicas", 0) < want:
            self._scale(new, min(want, new["spec"].get("replicas", 0) + room))
            total = new["spec"]["replicas"] + sum(rs["spec"].get("replicas", 0)
                                                  for rs in old_live)
        # Scale old ReplicaSets down as far as availability allows, oldest first.
        available = sum((rs.get("status") or {}).get("availableReplicas", 0)
                        for rs in [new, *old_live])
        can_remove = available - (want - unavailable)
        # Replicas that are not available can go at once: they serve nothing.
        for rs in sorted(old_live, key=lambda r: r["metadata"].get("creationTimestamp", "")):
            spec_replicas = rs["spec"].get("replicas", 0)
            unhealthy = spec_replicas - (rs.get("status") or {}).get("availableReplicas", 0)
            cut = min(spec_replicas, max(unhealthy, 0) + max(can_remove, 0))
            if cut > 0:
                healthy_cut = max(0, cut - max(unhealthy, 0))
                can_remove -= healthy_cut
                self._scale(rs, spec_replicas - cut)

    def _cleanup(self, d: Obj, old: list[Obj]) -> None:
        limit = int(d["spec"].get("revisionHistoryLimit", 10))
        dead = [rs for rs in old if rs["spec"].get("replicas", 0) == 0
                and (rs.get("status") or {}).get("replicas", 0) == 0]
        dead.sort(key=lambda r: int((r["metadata"].get("annotations") or {}).get(REVISION, "0")))
        for rs in dead[:max(0, len(dead) - limit)]:
            try:
                self.registry.delete(self.rs, rs["metadata"]["namespace"], rs["metadata"]["name"])
            except errors.ApiError as exc:
                if exc.code != 404:
                    raise

    def _update_status(self, stored: Stored, d: Obj, new: Obj) -> None:
        owned = self._owned(stored)
        replicas = sum((rs.get("status") or {}).get("replicas", 0) for rs in owned)
        ready = sum((rs.get("status") or {}).get("readyReplicas", 0) for rs in owned)
        available = sum((rs.get("status") or {}).get("availableReplicas", 0) for rs in owned)
        new_now = next((rs for rs in owned if rs["metadata"]["uid"] == new["metadata"]["uid"]),
                       new)
        updated = (new_now.get("status") or {}).get("replicas", 0)
        want = int(d["spec"]["replicas"])
        rolling = (d["spec"].get("strategy") or {}).get("rollingUpdate") or {}
        min_available = want - _scaled(rolling.get("maxUnavailable", "25%"), want, False)
        old_status = d.get("status") or {}
        now = now_rfc3339()

        def condition(type_: str, status: str, reason: str, message: str) -> Obj:
            for c in old_status.get("conditions") or ():
                if c.get("type") == type_ and c.get("status") == status \
                        and c.get("reason") == reason:
                    return dict(c)
            return {"type": type_, "status": status, "reason": reason, "message": message,
                    "lastUpdateTime": now, "lastTransitionTime": now}

        complete = updated == want and replicas == want and available >= want
        status: Obj = {
            "observedGeneration": d["metadata"].get("generation", 1),
            "replicas": replicas,
            "updatedReplicas": updated,
            "readyReplicas": ready,
            "availableReplicas": available,
            "unavailableReplicas": max(0, want - available),
            "conditions": [
                condition("Available", "True", "MinimumReplicasAvailable",
                          "Deployment has minimum availability.")
                if available >= min_available else
                condition("Available", "False", "MinimumReplicasUnavailable",
                          "Deployment does not have minimum availability."),
                condition("Progressing", "True", "NewReplicaSetAvailable",
                          f'ReplicaSet "{new["metadata"]["name"]}" has successfully progressed.')
                if complete else
                condition("Progressing", "True", "ReplicaSetUpdated",
                          f'ReplicaSet "{new["metadata"]["name"]}" is progressing.'),
            ],
        }
        for k in [k for k, v in status.items() if v == 0 and k != "observedGeneration"]:
            del status[k]
        if old_status != status:
            d["status"] = status
            self.registry.update(self.deploy, stored.namespace, stored.name, d, "status")
        revision = (new["metadata"].get("annotations") or {}).get(REVISION)
        if revision and (d["metadata"].get("annotations") or {}).get(REVISION) != revision:
            current = self.registry.get(self.deploy, stored.namespace, stored.name)
            current["metadata"].setdefault("annotations", {})[REVISION] = revision
            self.registry.update(self.deploy, stored.namespace, stored.name, current)


# -- garbage collection -------------------------------------------------------------------------

class GarbageCollector(Controller):
    """Background, foreground and orphan propagation over ownerReferences."""

    name = "garbage-collector"
    resync_seconds = 5.0

    def on_change(self, kind: str, rt: ResourceType, obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        uid = meta.get("uid", "")
        if kind == "DELETED":
            if uid in self.registry.store.dependents:
                self.enqueue(("gone", uid))
        elif meta.get("deletionTimestamp") and {"orphan", "foregroundDeletion"} & set(
                meta.get("finalizers") or ()):
            self.enqueue(("owner", rt.key, meta.get("namespace", ""), meta.get("name", "")))
        elif kind == "ADDED" and meta.get("ownerReferences"):
            # A dependent created with a dangling owner reference is collected too.
            self.enqueue(("check", rt.key, meta.get("namespace", ""), meta.get("name", "")))

    def _live_uids(self) -> set[str]:
        return set(self.registry.store.uids)

    def all_keys(self) -> Iterable[Hashable]:
        live = self._live_uids()
        keys: list[Hashable] = [("gone", uid) for uid in self.registry.store.dependents
                                if uid not in live]
        # Only objects being deleted can wait for the orphan or foreground finalizer: the
        # store knows which they are without reading every object's JSON.
        for table in self.registry.store.tables.values():
            for key in table.terminating:
                s = table.objects.get(key)
                if s is not None and (b'"orphan"' in s.raw
                                      or b'"foregroundDeletion"' in s.raw):
                    keys.append(("owner", table.rt.key, s.namespace, s.name))
        return keys

    def _table_type(self, key: tuple[str, str]) -> ResourceType | None:
        table = self.registry.store.tables.get(key)
        return table.rt if table is not None else None

    async def reconcile(self, key: Any) -> None:
        what = key[0]
        if what == "gone":
            self._owner_gone(key[1])
        elif what == "owner":
            _, tkey, ns, name = key
            self._owner_deleting(tkey, ns, name)
        elif what == "check":
            _, tkey, ns, name = key
            rt = self._table_type(tkey)
            s = self.registry.store.get(rt, ns, name) if rt is not None else None
            if s is not None:
                live = self.registry.store.uids
                for uid in [u for u in s.owner_uids if u not in live]:
                    self._owner_gone(uid)

    def _dependents(self, uid: str) -> list[tuple[ResourceType, Stored]]:
        out = []
        for tkey, (ns, name) in list(self.registry.store.dependents.get(uid, ())):
            rt = self._table_type(tkey)
            s = self.registry.store.get(rt, ns, name) if rt is not None else None
            if rt is not None and s is not None:
                out.append((rt, s))
        return out

    def _owner_gone(self, uid: str) -> None:
        live = self._live_uids()
        for rt, s in self._dependents(uid):
            obj = s.obj
            refs = obj["metadata"].get("ownerReferences") or []
            if any(r.get("uid") in live for r in refs):
                # Other owners remain: only the dangling reference goes.
                obj["metadata"]["ownerReferences"] = [r for r in refs if r.get("uid") in live]
                self.registry.update(rt, s.namespace, s.name, obj)
            elif not obj["metadata"].get("deletionTimestamp"):
                self.registry.delete(rt, s.namespace, s.name, {"propagationPolicy": "Background"})

    def _owner_deleting(self, tkey: tuple[str, str], ns: str, name: str) -> None:
        rt = self._table_type(tkey)
        s = self.registry.store.get(rt, ns, name) if rt is not None else None
        if rt is None or s is None:
            return
        owner = s.obj
        finalizers = list(owner["metadata"].get("finalizers") or ())
        if "orphan" in finalizers:
            for drt, dep in self._dependents(s.uid):
                obj = dep.obj
                obj["metadata"]["ownerReferences"] = [
                    r for r in obj["metadata"].get("ownerReferences") or ()
                    if r.get("uid") != s.uid]
                self.registry.update(drt, dep.namespace, dep.name, obj)
            finalizers.remove("orphan")
        elif "foregroundDeletion" in finalizers:
            deps = self._dependents(s.uid)
            for drt, dep in deps:
                if not b'"deletionTimestamp"' in dep.raw:
                    self.registry.delete(drt, dep.namespace, dep.name,
                                         {"propagationPolicy": "Foreground"})
            if any(self.registry.store.get(drt, dep.namespace, dep.name) is not None
                   for drt, dep in deps):
                return  # the dependents' own deletions will re-trigger us
            finalizers.remove("foregroundDeletion")
        else:
            return
        owner = self.registry.get(rt, ns, name)
        owner["metadata"]["finalizers"] = finalizers
        self.registry.update(rt, ns, name, owner)


# -- PodDisruptionBudgets -----------------------------------------------------------------------

#: How long a DisruptionTarget=True condition may stand on a pod that is not deleted before
#: kube's disruption controller takes it for stale and sets it to False.
STALE_DISRUPTION_SECONDS = 120.0


def _utc(stamp: Any) -> dt.datetime | None:
    try:
        return dt.datetime.strptime(str(stamp), "%Y-%m-%dT%H:%M:%SZ").replace(
            tzinfo=dt.timezone.utc)
    except ValueError:
        return None


def stale_disruption_in(pod: Obj, now: dt.datetime) -> float | None:
    """Seconds until the pod's DisruptionTarget condition is stale (0 when it is), or None when
    it has none that can be: the pod is deleting or finished, the condition is not True, or the
    kubelet set it. A condition without a transition time is stale at once, as in kube."""
    status = pod.get("status") or {}
    if pod["metadata"].get("deletionTimestamp") or status.get("phase") in ("Succeeded", "Failed"):
        return None
    for c in status.get("conditions") or ():
        if c.get("type") == "DisruptionTarget":
            if c.get("status") != "True" or c.get("reason") == "TerminationByKubelet":
                return None
            since = _utc(c.get("lastTransitionTime"))
            if since is None:
                return 0.0
            return max(0.0, STALE_DISRUPTION_SECONDS - (now - since).total_seconds())
    return None


class DisruptionController(Controller):
    """PodDisruptionBudget status, and the reset of a stale DisruptionTarget condition (a
    disruption announced on a pod that was then not deleted). Keys: a namespace for its
    budgets, ``("pod", namespace, name)`` for a pod's condition."""

    name = "disruption-controller"

    def on_change(self, kind: str, rt: ResourceType, obj: Obj) -> None:
        if rt is self.registry.pdbs and kind != "DELETED":
            self.enqueue(obj["metadata"]["namespace"])
        elif rt is self.registry.pods:
            ns = obj["metadata"]["namespace"]
            if kind != "DELETED":
                self._check_stale(obj)
            if self.registry.store.tables[self.registry.pdbs.key].objects and any(
                    True for _ in self.registry.store.iter(self.registry.pdbs, ns)):
                self.enqueue(ns)

    def all_keys(self) -> Iterable[Hashable]:
        return {s.namespace for s in self.registry.store.iter(self.registry.pdbs)}

    def _check_stale(self, pod: Obj) -> None:
        wait = stale_disruption_in(pod, dt.datetime.now(dt.timezone.utc))
        if wait is None:
            return
        key = ("pod", pod["metadata"]["namespace"], pod["metadata"]["name"])
        if wait <= 0:
            self.enqueue(key)
            return
        try:
            asyncio.get_running_loop().call_later(wait, self.enqueue, key)
        except RuntimeError:  # a write from outside the server's loop: the resync finds it
            pass

    def _reset_stale(self, namespace: str, name: str) -> None:
        stored = self.registry.store.get(self.registry.pods, namespace, name)
        if stored is None:
            return
        pod = stored.obj
        wait = stale_disruption_in(pod, dt.datetime.now(dt.timezone.utc))
        if wait is None:
            return
        if wait > 0:
            self._check_stale(pod)
            return
        status = dict(pod.get("status") or {})
        status["conditions"] = [
            {"type": "DisruptionTarget", "status": "False", "lastProbeTime": None,
             "lastTransitionTime": now_rfc3339()} if c.get("type") == "DisruptionTarget" else c
            for c in status.get("conditions") or ()]
        try:
            self.registry.update(self.registry.pods, namespace, name, {**pod, "status": status},
                                 "status")
        except errors.ApiError as exc:
            if exc.code == 409:
                self.enqueue(("pod", namespace, name))
            elif exc.code != 404:
                raise

    async def reconcile(self, key: Any) -> None:
        if isinstance(key, tuple):
            self._reset_stale(key[1], key[2])
            return
        namespace = str(key)
        pods = [s for s in self.registry.store.iter(self.registry.pods, namespace)]
        for s in list(self.registry.store.iter(self.registry.pdbs, namespace)):
            pdb = s.obj
            selector = _selector(pdb)
            if selector is None:
                continue
            matching = [p.obj for p in pods if selector.matches(p.labels)]
            matching = [p for p in matching
                        if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
            status = dict(pdb.get("status") or {})
            disrupted = dict(status.get("disruptedPods") or {})
            now = dt.datetime.now(dt.timezone.utc)
            live_names = {p["metadata"]["name"] for p in matching
                          if not p["metadata"].get("deletionTimestamp")}
            # An eviction is remembered until the pod is seen deleting, or for 2 minutes.
            for pod_name, when in list(disrupted.items()):
                stamp = _utc(when) or now
                if pod_name not in live_names or (now - stamp).total_seconds() > 120:
                    del disrupted[pod_name]
            healthy = sum(1 for p in matching if condition_true(p, "Ready")
                          and not p["metadata"].get("deletionTimestamp")
                          and p["metadata"]["name"] not in disrupted)
            expected = len(matching)
            spec = pdb.get("spec") or {}
            if "maxUnavailable" in spec:
                desired = max(0, expected - _scaled(spec["maxUnavailable"], expected, True))
            else:
                desired = _scaled(spec.get("minAvailable", 1), expected, True)
            allowed = max(0, healthy - desired)
            new_status: Obj = {
                "observedGeneration": pdb["metadata"].get("generation", 1),
                "disruptionsAllowed": allowed,
                "currentHealthy": healthy,
                "desiredHealthy": desired,
                "expectedPods": expected,
                "conditions": [self._condition(status, allowed)],
            }
            if disrupted:
                new_status["disruptedPods"] = disrupted
            if new_status != status:
                pdb["status"] = new_status
                self.registry.update(self.registry.pdbs, namespace, s.name, pdb, "status")

    @staticmethod
    def _condition(status: Obj, allowed: int) -> Obj:
        state, reason = ("True", "SufficientPods") if allowed > 0 else ("False", "InsufficientPods")
        for c in status.get("conditions") or ():
            if c.get("type") == "DisruptionAllowed" and c.get("status") == state:
                return dict(c)
        return {"type": "DisruptionAllowed", "status": state, "reason": reason, "message": "",
                "observedGeneration": 1, "lastTransitionTime": now_rfc3339()}


# -- resource quotas ----------------------------------------------------------------------------

#: The resources a quota's usage is counted for here: the pod evaluator's compute resources
#: and the pod count. Anything else a quota names is reported with nothing used.
_COMPUTE = {"cpu": ("requests", "cpu"), "memory": ("requests", "memory"),
            "requests.cpu": ("requests", "cpu"), "requests.memory": ("requests", "memory"),
            "limits.cpu": ("limits", "cpu"), "limits.memory": ("limits", "memory")}


def _pod_usage(pod: Obj, name: str) -> Fraction:
    """A pod's use of ``name`` as the quota counts it: the sum over its containers, or the
    largest init container when that is more."""
    kind, resource = _COMPUTE[name]
    spec = pod.get("spec") or {}

    def amount(c: Obj) -> Fraction:
        value = ((c.get("resources") or {}).get(kind) or {}).get(resource)
        try:
            return parse_quantity(value) if value is not None else Fraction(0)
        except QuantityError:
            return Fraction(0)

    total = sum((amount(c) for c in spec.get("containers") or ()), Fraction(0))
    return max([total, *(amount(c) for c in spec.get("initContainers") or ())])


class ResourceQuotaController(Controller):
    """A ResourceQuota's status, as kube-controller-manager keeps it: ``hard`` as the spec
    says and ``used`` by the namespace's pods that have not finished (for the pod count and
    the compute resources; 0 for the rest). Quotas are reported, not enforced."""

    name = "resourcequota-controller"

    def __init__(self, registry: Registry) -> None:
        super().__init__(registry)
        self.quotas = registry.types[("", "v1", "resourcequotas")]

    def on_change(self, kind: str, rt: ResourceType, obj: Obj) -> None:
        if rt is self.quotas and kind != "DELETED":
            self.enqueue(obj["metadata"]["namespace"])
        elif rt is self.registry.pods:
            ns = obj["metadata"]["namespace"]
            if self.registry.store.tables[self.quotas.key].objects and any(
                    True for _ in self.registry.store.iter(self.quotas, ns)):
                self.enqueue(ns)

    def all_keys(self) -> Iterable[Hashable]:
        return {s.namespace for s in self.registry.store.iter(self.quotas)}

    async def reconcile(self, key: Any) -> None:
        namespace = str(key)
        pods = [s.view for s in self.registry.store.iter(self.registry.pods, namespace)
                if (s.view.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
        for stored in list(self.registry.store.iter(self.quotas, namespace)):
            quota = stored.obj
            hard = dict((quota.get("spec") or {}).get("hard") or {})
            used: dict[str, str] = {}
            for name in hard:
                if name == "pods":
                    used[name] = str(len(pods))
                elif name in _COMPUTE:
                    total = sum((_pod_usage(p, name) for p in pods), Fraction(0))
                    used[name] = format_quantity(total, binary="memory" in name)
                else:
                    used[name] = "0"
            status = {"hard": hard, "used": used}
            if quota.get("status") != status:
                quota["status"] = status
                try:
                    self.registry.update(self.quotas, namespace, stored.name, quota, "status")
                except errors.ApiError as exc:
                    if exc.code == 409:
                        self.enqueue(namespace)
                    elif exc.code != 404:
                        raise


# -- namespaces ---------------------------------------------------------------------------------

class NamespaceController(Controller):
    name = "namespace-controller"
    resync_seconds = 2.0

    def on_change(self, kind: str, rt: ResourceType, obj: Obj) -> None:
        if rt is self.registry.namespaces and kind == "MODIFIED" \
                and obj["metadata"].get("deletionTimestamp"):
            self.enqueue(obj["metadata"]["name"])

    def all_keys(self) -> Iterable[Hashable]:
        return [s.name for s in self.registry.store.iter(self.registry.namespaces)
                if b'"deletionTimestamp"' in s.raw]

    async def reconcile(self, key: Any) -> None:
        name = str(key)
        remaining = 0
        for table in list(self.registry.store.tables.values()):
            rt = table.rt
            if not rt.namespaced:
                continue
            for s in list(self.registry.store.iter(rt, name)):
                remaining += 1
                if b'"deletionTimestamp"' not in s.raw:
                    try:
                        self.registry.delete(rt, name, s.name)
                    except errors.ApiError as exc:
                        if exc.code != 404:
                            raise
        if remaining == 0:
            self.registry.finalize_namespace(name)
        else:
            self.enqueue(name)


def all_controllers(registry: Registry) -> list[Controller]:
    return [ReplicaSetController(registry), DeploymentController(registry),
            GarbageCollector(registry), DisruptionController(registry),
            NamespaceController(registry), ResourceQuotaController(registry)]

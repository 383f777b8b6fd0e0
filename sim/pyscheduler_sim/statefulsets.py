"""The StatefulSet controller of the embedded cluster.

As kube-controller-manager's (``pkg/controller/statefulset``), for what a scheduler meets:

* pods named ``<set>-<ordinal>``, labelled ``statefulset.kubernetes.io/pod-name`` and
  ``apps.kubernetes.io/pod-index``, with ``hostname``/``subdomain`` set and the set as their
  controller;
* one PersistentVolumeClaim per ``volumeClaimTemplates`` entry and ordinal, named
  ``<template>-<set>-<ordinal>``, created before the pod (and kept when the pod or the set
  goes: the default ``Retain`` policy), and mounted by the pod in place of the volume of that
  name;
* ``OrderedReady`` (the default): ordinal *i* is created only when every lower ordinal is
  Running and Ready, and scaling down removes the highest ordinal first, one at a time;
  ``Parallel`` creates and deletes all at once;
* a pod that fails or is deleted is created again under the same name;
* status: ``replicas``, ``readyReplicas``, ``currentReplicas``, ``availableReplicas``,
  ``observedGeneration``.

Rolling updates of the template are not simulated (pods keep the template they were created
with).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any

import orjson

from pyscheduler_sim import errors
from pyscheduler_sim.controller import Controller
from pyscheduler_sim.controller_utils import condition_true, controller_ref, is_active, owner_ref
from pyscheduler_sim.registry import Registry
from pyscheduler_sim.resources import ResourceType

__all__ = ["StatefulSetController"]

Obj = dict[str, Any]
POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"


def _ordinal(set_name: str, pod_name: str) -> int | None:
    prefix = set_name + "-"
    if not pod_name.startswith(prefix) or not pod_name[len(prefix):].isdigit():
        return None
    return int(pod_name[len(prefix):])


def claim_name(template: Obj, set_name: str, ordinal: int) -> str:
    return f"{(template.get('metadata') or {}).get('name', '')}-{set_name}-{ordinal}"


class StatefulSetController(Controller):
    name = "statefulset-controller"

    def __init__(self, registry: Registry) -> None:
        super().__init__(registry)
        self.sts = registry.type("apps", "v1", "statefulsets")
        self.pvcs = registry.type("", "v1", "persistentvolumeclaims")

    def on_change(self, kind: str, rt: ResourceType, obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        if rt is self.sts:
            self.enqueue((meta.get("namespace"), meta.get("name")))
        elif rt is self.registry.pods:
            ref = controller_ref(obj)
            if ref is not None and ref.get("kind") == "StatefulSet":
                self.enqueue((meta.get("namespace"), ref.get("name")))

    def all_keys(self) -> Iterable[Hashable]:
        return [(s.namespace, s.name) for s in self.registry.store.iter(self.sts)]

    async def reconcile(self, key: Any) -> None:
        namespace, name = key
        stored = self.registry.store.get(self.sts, namespace, name)
        if stored is None:
            return
        sts = stored.obj
        spec = sts.get("spec") or {}
        want = int(spec.get("replicas", 1))
        parallel = spec.get("podManagementPolicy") == "Parallel"
        pods: dict[int, Obj] = {}
        for s in self.registry.store.iter(self.registry.pods, namespace):
            if s.controller_uid != stored.uid:
                continue
            ordinal = _ordinal(name, s.name)
            if ordinal is not None:
                pods[ordinal] = s.view
        deleting = bool(sts["metadata"].get("deletionTimestamp"))
        if not deleting:
            self._scale(sts, pods, want, parallel)
        self._update_status(stored.namespace, stored.name, sts, pods)

    def _scale(self, sts: Obj, pods: dict[int, Obj], want: int, parallel: bool) -> None:
        namespace, name = sts["metadata"]["namespace"], sts["metadata"]["name"]
        # Failed or finished pods are removed and made again under the same name.
        for pod in list(pods.values()):
            if not is_active(pod) and not pod["metadata"].get("deletionTimestamp"):
                self._delete(namespace, pod["metadata"]["name"])
        for ordinal in range(want):
            current = pods.get(ordinal)
            if current is None:
                self._create(sts, ordinal)
                if not parallel:
                    return  # one at a time: the next waits for this one to be Ready
                continue
            if not parallel and not (is_active(current) and condition_true(current, "Ready")
                                     and not current["metadata"].get("deletionTimestamp")):
                return
        extra = sorted((o for o in pods if o >= want), reverse=True)
        for ordinal in extra if parallel else extra[:1]:
            pod = pods[ordinal]
            if not pod["metadata"].get("deletionTimestamp"):
                self._delete(namespace, pod["metadata"]["name"])

    def _delete(self, namespace: str, name: str) -> None:
        try:
            self.registry.delete(self.registry.pods, namespace, name)
        except errors.ApiError as exc:
            if exc.code != 404:
                raise

    def _create(self, sts: Obj, ordinal: int) -> None:
        meta = sts["metadata"]
        namespace, set_name = meta["namespace"], meta["name"]
        spec = sts.get("spec") or {}
        template = spec.get("template") or {}
        tmeta = template.get("metadata") or {}
        pod_name = f"{set_name}-{ordinal}"
        labels = {**(tmeta.get("labels") or {}), POD_NAME_LABEL: pod_name,
                  POD_INDEX_LABEL: str(ordinal)}
        pod_spec = orjson.loads(orjson.dumps(template.get("spec") or {}))
        pod_spec.setdefault("hostname", pod_name)
        if spec.get("serviceName"):
            pod_spec.setdefault("subdomain", spec["serviceName"])
        volumes = [v for v in pod_spec.get("volumes") or ()]
        for claim_template in spec.get("volumeClaimTemplates") or ():
            volume = (claim_template.get("metadata") or {}).get("name", "")
            claim = claim_name(claim_template, set_name, ordinal)
            self._ensure_claim(sts, claim_template, claim)
            volumes = [v for v in volumes if v.get("name") != volume]
            volumes.append({"name": volume, "persistentVolumeClaim": {"claimName": claim}})
        if volumes:
            pod_spec["volumes"] = volumes
        pod_meta: Obj = {"name": pod_name, "namespace": namespace, "labels": labels,
                         "ownerReferences": [owner_ref(sts, "StatefulSet", "apps/v1")]}
        if tmeta.get("annotations"):
            pod_meta["annotations"] = dict(tmeta["annotations"])
        try:
            self.registry.create(self.registry.pods, namespace, {
                "apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": pod_spec})
        except errors.ApiError as exc:
            if exc.code != 409:  # the previous pod of that name is still terminating
                raise

    def _ensure_claim(self, sts: Obj, template: Obj, name: str) -> None:
        namespace = sts["metadata"]["namespace"]
        if self.registry.store.get(self.pvcs, namespace, name) is not None:
            return
        tmeta = template.get("metadata") or {}
        selector = ((sts.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                 "metadata": {"name": name, "namespace": namespace,
                              "labels": {**(tmeta.get("labels") or {}), **selector}},
                 "spec": orjson.loads(orjson.dumps(template.get("spec") or {}))}
        if tmeta.get("annotations"):
            claim["metadata"]["annotations"] = dict(tmeta["annotations"])
        self.registry.create(self.pvcs, namespace, claim)

    def _update_status(self, namespace: str, name: str, sts: Obj,
                       pods: dict[int, Obj]) -> None:
        active = [p for p in pods.values() if is_active(p)
                  and not p["metadata"].get("deletionTimestamp")]
        ready = sum(1 for p in active if condition_true(p, "Ready"))
        status = {"replicas": len(active), "readyReplicas": ready,
                  "currentReplicas": len(active), "updatedReplicas": len(active),
                  "availableReplicas": ready,
                  "observedGeneration": sts["metadata"].get("generation", 1)}
        status = {k: v for k, v in status.items() if v or k == "replicas"}
        if sts.get("status") != status:
            sts["status"] = status
            self.registry.update(self.sts, namespace, name, sts, "status")

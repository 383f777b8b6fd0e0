"""Persistent volumes for the scheduler: the informers that feed the volume plugins, and the
binding of a pod's claims before the pod (kube's ``SchedulerVolumeBinder``).

* **Informers** for PersistentVolumeClaims, PersistentVolumes, StorageClasses and CSINodes keep
  the node table's :class:`~pyscheduler.framework.volumes.VolumeCatalog` current. A change to
  any of them may make a waiting pod schedulable (a claim created, bound, a volume freed), so it
  moves the unschedulable pods back to the active queue.
* **Assume** (on the loop, when the pod is assumed): the binding plan for the chosen node —
  a static volume per waiting claim, or dynamic provisioning — is computed, and the static
  volumes are assumed in the catalog so the next pod does not count on them.
* **Bind** (in the pod's binding task, before the pod's own binding): a static volume gets
  the claim in ``spec.claimRef`` (with the volume's resourceVersion as a precondition, so a
  volume taken meanwhile is not stolen); a claim to provision gets the
  ``volume.kubernetes.io/selected-node`` annotation, which tells the provisioner where. The
  binding then waits until the PV controller has bound every claim (kube's
  ``checkBindings``), up to ``bindTimeoutSeconds`` — only then is the pod bound, so a pod never
  runs before its volumes exist. Any failure undoes the assumption and the pod is retried.

Writes are recorded on the objects (claimRef, selected-node): a scheduler that takes over
sees them in the catalog, and the PV controller finishes the binding whoever leads.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, ClassVar

import structlog

from pyscheduler.framework.events import ClusterListener
from pyscheduler.framework.interface import ActionType, ClusterEvent, CycleContext
from pyscheduler.framework.nodetable import NodeTable
from pyscheduler.framework.pod import PodInfo
from pyscheduler.framework.status import Code, Status
from pyscheduler.framework.volumes import SELECTED_NODE, Claim, VolumeCatalog
from pyscheduler.kube.client import KubeClient, api_path
from pyscheduler.kube.errors import ConflictError, NotFoundError
from pyscheduler.kube.informer import Informer, Obj
from pyscheduler.plugins.volume_binding import BindingPlan, plan

__all__ = ["VolumeBinder"]

log = structlog.get_logger(__name__)

BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"


class VolumeBinder(ClusterListener):
    name: ClassVar[str] = "VolumeBinding"

    def __init__(self, client: KubeClient, table: NodeTable, *,
                 on_change: Callable[[ClusterEvent, Any, Any, str], None], bind_timeout_seconds: float = 600.0,
                 poll_seconds: float = 0.1) -> None:
        self.client = client
        self.catalog: VolumeCatalog = table.volumes
        self.on_change = on_change
        self.bind_timeout = bind_timeout_seconds
        self.poll = poll_seconds
        self.plans: dict[str, BindingPlan] = {}  # pod uid -> plan being carried out
        catalog = self.catalog

        def informer(path: str, name: str, event: str, set_: Callable[[Obj], None],
                     delete: Callable[[Obj], None]) -> Informer:
            def added(obj: Obj) -> None:
                set_(obj)
                on_change(ClusterEvent(event, ActionType.ADD), None, obj, f"{event}Add")

            def updated(old: Obj, new: Obj) -> None:
                set_(new)
                on_change(ClusterEvent(event, ActionType.UPDATE), old, new, f"{event}Update")

            def deleted(obj: Obj) -> None:
                delete(obj)
                on_change(ClusterEvent(event, ActionType.DELETE), obj, None, f"{event}Delete")
            return Informer(client, path, name=name, on_add=added, on_update=updated,
                            on_delete=deleted)

        self.informers = (
            informer(api_path("v1", "persistentvolumeclaims"), "persistentvolumeclaims",
                     "PersistentVolumeClaim", catalog.set_claim, catalog.delete_claim),
            informer(api_path("v1", "persistentvolumes"), "persistentvolumes",
                     "PersistentVolume", catalog.set_volume, catalog.delete_volume),
            informer(api_path("storage.k8s.io/v1", "storageclasses"), "storageclasses",
                     "StorageClass", catalog.set_class, catalog.delete_class),
            informer(api_path("storage.k8s.io/v1", "csinodes"), "csinodes", "CSINode",
                     catalog.set_csinode, catalog.delete_csinode),
        )

    # -- on the loop ---------------------------------------------------------------------------

    def assume(self, ctx: CycleContext, slot: int) -> str | None:
        """Plan the binding of ``ctx.pod``'s claims on the node in ``slot`` and assume its
        static volumes; returns why that is impossible, or None."""
        pod = ctx.pod
        if not pod.claims:
            return None
        chosen = plan(ctx, slot)
        if isinstance(chosen, str):
            return chosen
        for claim, volume in chosen.static:
            self.catalog.assumed[volume.name] = claim.key
        if not chosen.empty:
            self.plans[pod.uid] = chosen
        return None

    def pod_gone(self, uid: str) -> None:
        self.forget(uid)

    def forget(self, uid: str) -> None:
        """Undo :meth:`assume` (the pod's binding failed or it is gone)."""
        chosen = self.plans.pop(uid, None)
        if chosen is None:
            return
        for claim, volume in chosen.static:
            if self.catalog.assumed.get(volume.name) == claim.key:
                del self.catalog.assumed[volume.name]

    # -- as the VolumeBinding plugin's Reserve, Unreserve, PreBind and PostBind ------------------

    def reserve(self, ctx: CycleContext, node: str) -> Status | None:
        """On the loop (so no pod scheduled next can take the same volume)."""
        if not ctx.pod.claims:
            return None
        slot = ctx.table.slots.get(node)
        problem = "node is gone" if slot is None else self.assume(ctx, slot)
        # The claims changed between the filters and now: try again shortly.
        return None if problem is None else Status(Code.UNSCHEDULABLE, (problem,))

    def unreserve(self, ctx: CycleContext, node: str) -> None:
        self.forget(ctx.pod.uid)

    async def pre_bind(self, ctx: CycleContext, node: str) -> Status | None:
        if ctx.pod.uid not in self.plans:
            return Status(Code.SKIP)
        problem = await self.bind(ctx.pod, node)
        if problem is None:
            return None
        log.warning("could not bind the pod's volumes", pod=ctx.pod.key, node=node,
                    problem=problem)
        return Status(Code.ERROR, (problem,))

    async def post_bind(self, ctx: CycleContext, node: str) -> None:
        self.forget(ctx.pod.uid)

    # -- in the binding task -------------------------------------------------------------------

    async def bind(self, pod: PodInfo, node: str) -> str | None:
        """Write the plan made for ``pod`` and wait until its claims are bound; returns what
        went wrong, or None when the pod may be bound."""
        chosen = self.plans.get(pod.uid)
        if chosen is None:
            return None
        try:
            for claim, volume in chosen.static:
                await self._bind_volume(claim, volume.name, volume_version(self.catalog,
                                                                           volume.name))
            for claim in chosen.dynamic:
                await self._select_node(claim, node)
        except (ConflictError, NotFoundError) as exc:
            return f"binding volumes failed: {exc}"
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            return f"binding volumes failed: {type(exc).__name__}: {exc}"
        return await self._wait_bound(pod)

    async def _bind_volume(self, claim: Claim, volume: str, version: str) -> None:
        patch: dict[str, object] = {
            "metadata": {"annotations": {BOUND_BY_CONTROLLER: "yes"},
                         **({"resourceVersion": version} if version else {})},
            "spec": {"claimRef": {"kind": "PersistentVolumeClaim", "apiVersion": "v1",
                                  "namespace": claim.namespace, "name": claim.name,
                                  "uid": claim.uid}}}
        await self.client.patch(api_path("v1", "persistentvolumes", name=volume), patch,
                                "merge")

    async def _select_node(self, claim: Claim, node: str) -> None:
        if claim.selected_node == node:
            return
        await self.client.patch(
            api_path("v1", "persistentvolumeclaims", namespace=claim.namespace,
                     name=claim.name),
            {"metadata": {"annotations": {SELECTED_NODE: node}}}, "merge")

    async def _wait_bound(self, pod: PodInfo) -> str | None:
        deadline = time.monotonic() + self.bind_timeout
        while True:
            waiting = self._unbound(pod)
            if waiting is None:
                return None
            if time.monotonic() >= deadline:
                return (f"binding volumes: timed out waiting for the condition: claim "
                        f"{pod.namespace}/{waiting} not bound")
            await asyncio.sleep(self.poll)

    def _unbound(self, pod: PodInfo) -> str | None:
        """A claim of ``pod`` not bound yet (or gone), or None when all are bound."""
        for name in pod.claims:
            claim = self.catalog.claims.get((pod.namespace, name))
            if claim is None or not claim.volume_name or not claim.bind_completed:
                return name
            volume = self.catalog.volumes.get(claim.volume_name)
            if volume is None or volume.claim is None or volume.claim[:2] != claim.key:
                return name
        return None


def volume_version(catalog: VolumeCatalog, name: str) -> str:
    volume = catalog.volumes.get(name)
    return volume.resource_version if volume is not None else ""

"""The rebalancer: virtual pods come back to real nodes when real capacity frees up.

Triggers: an assigned real pod deleted, a node added, uncordoned or grown (the scheduler calls
:meth:`Rebalancer.poke`), and a periodic sweep. A sweep looks at the pods on virtual nodes in
order — priority first, then the most expensive pool, then the longest on the cloud — and runs
each through the scheduler's own pipeline (the pod's fragment included) over the real nodes.
When one fits, the capacity is **reserved** in the cache at once (an assumed placeholder), so
pods scheduled meanwhile cannot take it, and the pod is moved:

* **A bare pod** (no controller): make-before-break. A copy is created bound to the reserved node
  (name ``<name>-rb-<n>``: a pod's node cannot change, so the copy is a new pod); once the copy is
  Ready the virtual pod is deleted, and with it its cloud instance. If the copy fails to become
  Ready in time it is deleted and the virtual pod stays.
* **A pod owned by a controller** cannot be moved that way: its ReplicaSet would adopt the copy
  and, one pod too many, delete the newest not-ready one — the copy. Instead the virtual pod gets
  ``controller.kubernetes.io/pod-deletion-cost: "-1000"`` and is **evicted** through the Eviction
  API, which honours PodDisruptionBudgets (429: retried on a later sweep). The controller creates
  the replacement, which the scheduler places on a real node; the reservation is released for
  it. The trade-off: between eviction and the replacement's start the workload runs one pod
  short (exactly what a PDB allows), where make-before-break never does.

Safety: a pod must have been on the cloud ``min_cloud_seconds`` (hysteresis) before it moves;
at most ``max_moves_per_cycle`` moves per sweep and ``max_moves_per_namespace`` per namespace;
``wssp/rebalance: "never"`` keeps a pod where it is; ``dry_run`` only reports. Every move and
every skip is an event on the pod (reasons ``Rebalance``, ``RebalanceSkipped``,
``RebalanceFailed``) and a metric.
"""

from __future__ import annotations

import asyncio
import calendar
import copy
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import structlog

from pyscheduler.api.names import (
    DELETION_COST_ANNOTATION,
    INSTANCE_ANNOTATION,
    MOVED_FROM_ANNOTATION,
    NEVER,
    POOL_LABEL,
    REBALANCE_ANNOTATION,
    VIRTUAL_LABEL,
    VIRTUAL_NODE_PREFIX,
)
from pyscheduler.config import RebalancerConfig
from pyscheduler.framework.pod import PodInfo, PodSpecError, pod_info
from pyscheduler.kube.errors import (
    AlreadyExistsError,
    ConflictError,
    KubeError,
    NotFoundError,
    TooManyRequestsError,
)
from pyscheduler.kube.tasks import cancel_and_wait

__all__ = ["Rebalancer"]

log = structlog.get_logger("pyscheduler.rebalancer")

Obj = dict[str, Any]


class Rebalancer:
    """Moves pods from virtual nodes back to real ones; runs on the scheduler's event loop."""

    def __init__(self, scheduler: Any, settings: RebalancerConfig, *,
                 pool_price: Callable[[str], float] | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.scheduler = scheduler
        self.settings = settings
        self.pool_price = pool_price or (lambda pool: 0.0)
        self.clock = clock
        self.virtual_pods: dict[str, Obj] = {}  # uid -> pod, for pods on virtual nodes
        self.moving: dict[str, str] = {}  # virtual pod uid -> reservation uid
        self._evicted: dict[str, set[str]] = {}  # evicted pod uid -> its controller uids
        self._targets: dict[str, str] = {}  # evicted pod uid -> the real node reserved for it
        self._poke = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._moves: set[asyncio.Task[None]] = set()
        self.moved = 0

    # -- what the scheduler tells us -----------------------------------------------------------

    def pod_seen(self, obj: Obj) -> None:
        uid = str(obj["metadata"].get("uid"))
        if obj.get("metadata", {}).get("deletionTimestamp") or \
                (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            self.virtual_pods.pop(uid, None)
        else:
            self.virtual_pods[uid] = obj

    def pod_gone(self, uid: str) -> None:
        self.virtual_pods.pop(uid, None)

    def poke(self) -> None:
        """Capacity may have freed up: sweep soon."""
        self._poke.set()

    # -- running -------------------------------------------------------------------------------

    @property
    def tasks(self) -> dict[str, asyncio.Task[None]]:
        """The long-lived task while started, for the process to watch."""
        return {"rebalancer": self._task} if self._task is not None else {}

    def start(self) -> None:
        if self.settings.enabled and self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="rebalancer")

    async def stop(self) -> None:
        # cancel_and_wait cancels again until a task has ended: a single cancel can be lost
        # (asyncio.wait_for on Python < 3.12 swallows one that lands as its wait completes).
        for task in [self._task, *self._moves]:
            await cancel_and_wait(task)
        self._task = None

    async def _run(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self._poke.wait(), self.settings.interval_seconds)
            except asyncio.TimeoutError:
                pass
            self._poke.clear()
            await asyncio.sleep(0.2)  # let the event that poked us settle in the cache
            try:
                await self.sweep()
            except asyncio.CancelledError:
                raise
            except Exception:  # a sweep never stops the loop
                log.exception("rebalance sweep failed")

    def _order(self, obj: Obj) -> tuple[int, float, float]:
        spec = obj.get("spec") or {}
        pool = str(((obj.get("metadata") or {}).get("labels") or {}).get(
            "wssp/cloud-pool") or str(spec.get("nodeName") or "").removeprefix("wssp-virtual-"))
        return (-int(spec.get("priority") or 0), -self.pool_price(pool), self._since(obj))

    def _since(self, obj: Obj) -> float:
        """When the pod started on the cloud (status.startTime, else its creation)."""
        text = (obj.get("status") or {}).get("startTime") or \
            (obj.get("metadata") or {}).get("creationTimestamp")
        if not text:
            return self.clock()
        try:
            return float(calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%SZ")))
        except ValueError:
            return self.clock()

    async def sweep(self) -> list[tuple[str, str]]:
        """One pass: returns (pod key, outcome) for every pod looked at."""
        s = self.settings
        sched = self.scheduler
        outcomes: list[tuple[str, str]] = []
        per_namespace: dict[str, int] = {}
        moves = 0
        room = self._most_room()
        for obj in sorted(list(self.virtual_pods.values()), key=self._order):
            meta = obj["metadata"]
            uid, key = str(meta.get("uid")), f"{meta.get('namespace')}/{meta.get('name')}"
            if uid in self.moving:
                continue
            if (obj.get("status") or {}).get("phase") != "Running":
                continue
            if (meta.get("annotations") or {}).get(REBALANCE_ANNOTATION) == NEVER:
                outcomes.append((key, "never"))
                continue
            if self.clock() - self._since(obj) < s.min_cloud_seconds:
                outcomes.append((key, "too-recent"))
                continue
            if moves >= s.max_moves_per_cycle:
                outcomes.append((key, "cycle-limit"))
                continue
            ns = str(meta.get("namespace"))
            if per_namespace.get(ns, 0) >= s.max_moves_per_namespace:
                outcomes.append((key, "namespace-limit"))
                continue
            target = await self._fit(obj) if self._may_fit(obj, room) else None
            if uid in self.moving or uid not in self.virtual_pods:
                continue  # moved or gone while its placement was worked out
            if target is None:
                outcomes.append((key, "no-fit"))
                continue
            owned = any(r.get("controller") for r in meta.get("ownerReferences") or ())
            strategy = "evict" if owned else "copy"
            if s.dry_run:
                sched.recorder.record(obj, type_="Normal", reason="Rebalance",
                                      action="Rebalance",
                                      note=f"dry run: would move to {target} ({strategy})")
                outcomes.append((key, f"dry-run:{target}"))
                continue
            reservation = self.reserve(obj, target)
            if reservation is None:
                outcomes.append((key, "no-fit"))
                continue
            self.moving[uid] = reservation
            moves += 1
            per_namespace[ns] = per_namespace.get(ns, 0) + 1
            task = asyncio.get_running_loop().create_task(
                self._move(obj, target, strategy, reservation))
            self._moves.add(task)
            task.add_done_callback(self._moves.discard)
            outcomes.append((key, f"{strategy}:{target}"))
        return outcomes

    def _most_room(self) -> tuple[int, int]:
        """The most free cpu and the most free memory on any one real node (not necessarily the
        same node): a pod asking more of either fits no real node, whatever its other rules."""
        table = self.scheduler.cache.table
        n = table.n
        if not n:
            return 0, 0
        real = table.valid[:n] & np.array(
            [not name.startswith(VIRTUAL_NODE_PREFIX) for name in table.names[:n]], bool)
        if not real.any():
            return 0, 0
        cols = [table.resource_index["cpu"], table.resource_index["memory"]]
        free = table.allocatable[:n, cols] - table.requested[:n, cols]
        most = free[real].max(axis=0)
        return int(most[0]), int(most[1])

    def _may_fit(self, obj: Obj, room: tuple[int, int]) -> bool:
        """False when the pod's cpu or memory request exceeds what any real node has free, so
        that a full cluster costs a sweep no pipeline run per virtual pod."""
        try:
            requests = pod_info(obj).requests
        except PodSpecError:
            return True  # _fit reports it
        return requests.get("cpu", 0) <= room[0] and requests.get("memory", 0) <= room[1]

    async def _fit(self, obj: Obj) -> str | None:
        """The real node the scheduler's pipeline would choose for the pod now, or None."""
        clone = copy.deepcopy(obj)
        clone["spec"].pop("nodeName", None)
        clone["metadata"]["uid"] = f"rebalance:{obj['metadata']['uid']}"
        try:
            node: str | None = await self.scheduler.try_placement(pod_info(clone))
            return node
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # fragment unavailable, a spec we cannot read...
            log.info("rebalance: cannot evaluate pod", pod=obj["metadata"].get("name"),
                     error=str(exc))
            return None

    def reserve(self, obj: Obj, node: str) -> str | None:
        """Hold ``obj``'s requests on ``node`` in the cache (an assumed placeholder pod)."""
        clone = copy.deepcopy(obj)
        clone["spec"]["nodeName"] = node
        uid = f"rebalance:{obj['metadata']['uid']}"
        clone["metadata"]["uid"] = uid
        try:
            self.scheduler.cache.assume(pod_info(clone), node)
        except (PodSpecError, ValueError):
            return None
        return uid

    def await_replacement(self, obj: Obj, node: str) -> None:
        """``obj`` (being moved, its capacity reserved on ``node``) was evicted: the next pod of
        its controller gets the reservation (:meth:`release_for_owner`)."""
        meta = obj["metadata"]
        owners = {r.get("uid") for r in meta.get("ownerReferences") or () if r.get("controller")}
        self._evicted[str(meta["uid"])] = {str(o) for o in owners}
        self._targets[str(meta["uid"])] = node

    def release(self, reservation: str) -> None:
        self.scheduler.cache.forget(reservation)

    def release_for_owner(self, pod: PodInfo) -> str | None:
        """A new pod of a controller whose virtual pod we evicted: free the reserved capacity
        just before it is scheduled, and answer the node it was reserved on (the scheduler
        steers the pod there when that node passes its filters)."""
        owners = {r.get("uid") for r in (pod.raw.get("metadata") or {}).get(
            "ownerReferences") or () if r.get("controller")}
        if not owners:
            return None
        for uid, reservation in list(self.moving.items()):
            evicted = self._evicted.get(uid)
            if evicted is not None and evicted & owners:
                self.release(reservation)
                del self.moving[uid]
                self._evicted.pop(uid, None)
                return self._targets.pop(uid, None)
        return None

    async def _move(self, obj: Obj, node: str, strategy: str, reservation: str) -> None:
        sched = self.scheduler
        meta = obj["metadata"]
        uid = str(meta["uid"])
        ok = False
        try:
            if strategy == "copy":
                ok = await self._copy_then_delete(obj, node, reservation)
            else:
                ok = await self._evict(obj, node)
        except Exception as exc:
            log.warning("rebalance move failed", pod=meta.get("name"), error=str(exc))
            sched.recorder.record(obj, type_="Warning", reason="RebalanceFailed",
                                  action="Rebalance", note=f"move to {node} failed: {exc}")
        finally:
            if strategy == "copy" or not ok:
                self.moving.pop(uid, None)
                self.release(reservation)
        if ok:
            self.moved += 1
        if sched.metrics is not None:
            sched.metrics.rebalance_moves.labels(strategy, "ok" if ok else "failed").inc()

    async def _copy_then_delete(self, obj: Obj, node: str, reservation: str) -> bool:
        sched = self.scheduler
        client = sched.client
        meta = obj["metadata"]
        ns, name = meta["namespace"], meta["name"]
        copy_obj: Obj = {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": f"{name}-rb-{int(self.clock()) % 100000}",
                "namespace": ns,
                "labels": {k: v for k, v in (meta.get("labels") or {}).items()
                           if k not in (VIRTUAL_LABEL, POOL_LABEL)},
                "annotations": {**{k: v for k, v in (meta.get("annotations") or {}).items()
                                   if k != INSTANCE_ANNOTATION},
                                MOVED_FROM_ANNOTATION: f"{name} ({meta.get('uid')})"},
            },
            "spec": {k: v for k, v in obj["spec"].items() if k != "nodeName"},
        }
        copy_obj["spec"]["nodeName"] = node
        created = await client.create(f"/api/v1/namespaces/{ns}/pods", copy_obj)
        # The copy now holds the capacity for real: drop the placeholder, count the copy.
        self.release(reservation)
        copy_name = created["metadata"]["name"]
        deadline = asyncio.get_running_loop().time() + self.settings.ready_timeout_seconds
        while asyncio.get_running_loop().time() < deadline:
            current = await client.get(f"/api/v1/namespaces/{ns}/pods/{copy_name}")
            if any(c.get("type") == "Ready" and c.get("status") == "True"
                   for c in (current.get("status") or {}).get("conditions") or ()):
                break
            await asyncio.sleep(0.2)
        else:
            await client.delete(f"/api/v1/namespaces/{ns}/pods/{copy_name}")
            sched.recorder.record(obj, type_="Warning", reason="RebalanceFailed",
                                  action="Rebalance",
                                  note=f"copy {copy_name} on {node} did not become Ready "
                                       f"within {self.settings.ready_timeout_seconds:g}s; "
                                       f"the pod stays on the cloud")
            return False
        try:
            await client.delete(f"/api/v1/namespaces/{ns}/pods/{name}", uid=str(meta["uid"]))
        except (NotFoundError, ConflictError):
            pass
        sched.recorder.record(obj, type_="Normal", reason="Rebalance", action="Rebalance",
                              note=f"moved back to real node {node} as {copy_name} "
                                   f"(make-before-break)")
        return True

    async def _evict(self, obj: Obj, node: str) -> bool:
        sched = self.scheduler
        client = sched.client
        meta = obj["metadata"]
        ns, name, uid = meta["namespace"], meta["name"], str(meta["uid"])
        try:
            await client.patch(f"/api/v1/namespaces/{ns}/pods/{name}", {
                "metadata": {"annotations": {DELETION_COST_ANNOTATION: "-1000"}}})
            await client.create(f"/api/v1/namespaces/{ns}/pods/{name}/eviction", {
                "apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": name, "namespace": ns},
                "deleteOptions": {"preconditions": {"uid": uid}}})
        except TooManyRequestsError as exc:
            sched.recorder.record(obj, type_="Normal", reason="RebalanceSkipped",
                                  action="Rebalance",
                                  note=f"eviction refused ({exc}): a PodDisruptionBudget "
                                       f"allows no disruption now; retried later")
            return False
        except (NotFoundError, ConflictError, AlreadyExistsError):
            return False
        except KubeError:
            raise
        self.await_replacement(obj, node)
        sched.recorder.record(obj, type_="Normal", reason="Rebalance", action="Rebalance",
                              note=f"evicted so that its controller replaces it on a real "
                                   f"node ({node} has room)")
        # The reservation stays until the replacement arrives (release_for_owner) or the
        # next sweep finds the pod gone.
        asyncio.get_running_loop().call_later(
            30.0, lambda: self._expire_eviction(uid))
        return True

    def _expire_eviction(self, uid: str) -> None:
        reservation = self.moving.pop(uid, None)
        self._evicted.pop(uid, None)
        self._targets.pop(uid, None)
        if reservation is not None:
            self.release(reservation)

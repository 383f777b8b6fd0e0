"""The rebalancer: virtual pods come back to real nodes when real capacity frees up.

Triggers: an assigned real pod deleted, a node added, uncordoned or grown (the scheduler calls
:meth:`Rebalancer.capacity_freed`), and a periodic sweep. A sweep looks at the pods on virtual
nodes in order — priority first, then the most expensive pool, then the longest on the cloud —
and asks the scheduler where each would go now (:meth:`Placement.try_placement`: its own
pipeline, the pod's fragment included, over the real nodes). When one fits, the capacity is
**reserved** at once (an assumed placeholder), so pods scheduled meanwhile cannot take it, and the
pod is moved:

* **A bare pod** (no controller): make-before-break. A copy is created bound to the reserved node
  (name ``<name>-rb-<n>``: a pod's node cannot change, so the copy is a new pod); once the copy is
  Ready the virtual pod is deleted, and with it its cloud instance. If the copy fails to become
  Ready in time it is deleted and the virtual pod stays.
* **A pod owned by a controller** cannot be moved that way: its ReplicaSet would adopt the copy
  and, one pod too many, delete the newest not-ready one — the copy. Instead the virtual pod gets
  ``controller.kubernetes.io/pod-deletion-cost: "-1000"`` and is **evicted** through the Eviction
  API, which honours PodDisruptionBudgets (429: retried on a later sweep). The controller creates
  the replacement, which the scheduler places on a real node; the reservation is released for
  it (:meth:`steer`). Between eviction and the replacement's start the workload runs one pod
  short (exactly what a PDB allows), where make-before-break never does.

**Only our own.** The rebalancer moves only pods whose ``schedulerName`` is this scheduler's and
that this scheduler placed on a virtual node (they carry ``wssp/virtual-node: "true"``, which the
scheduler writes just before binding): not another scheduler's pods, not a pod a user put on a
virtual node with ``nodeName``. Before a copy is made, the original is read again: it must still
exist, with the same uid, on its virtual node, and not be being deleted — a pod the user just
deleted is never copied.

**Every move can be finished by any leader.** Before the copy is created, the move is recorded
on the original (annotation ``wssp/move``: the copy's name, the target node, when it started).
A leader that takes over (or this one after a restart) looks at every pod carrying it
(:meth:`recover`): if the copy is Ready it finishes the move (the original is deleted); if the
copy is still starting it waits for the rest of the ready timeout; if the copy does not exist,
or did not become Ready in time, it rolls back (the copy deleted, the record removed). So a
leader killed in the middle of a move never leaves the pod running twice for longer than the
ready timeout.

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
import json
import time
from collections.abc import Callable, Mapping
from typing import Any

import structlog

from pyscheduler.api.names import (
    DELETION_COST_ANNOTATION,
    INSTANCE_ANNOTATION,
    MOVE_ANNOTATION,
    MOVED_FROM_ANNOTATION,
    NEVER,
    POOL_LABEL,
    REBALANCE_ANNOTATION,
    VIRTUAL_LABEL,
    VIRTUAL_NODE_PREFIX,
)
from pyscheduler.settings import RebalancerConfig
from pyscheduler.framework.pod import PodInfo, PodSpecError, pod_info
from pyscheduler.kube.errors import (
    AlreadyExistsError,
    ConflictError,
    KubeError,
    NotFoundError,
    TooManyRequestsError,
)
from pyscheduler.kube.tasks import cancel_and_wait
from pyscheduler.virtual.types import Placement
from pyscheduler.kube.client import api_path

__all__ = ["RETRY_AFTER_ROLL_BACK_SECONDS", "Rebalancer", "move_record"]

log = structlog.get_logger("pyscheduler.rebalancer")

Obj = dict[str, Any]
_TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
#: A pod whose move was rolled back (its copy never became Ready) is not tried again for this
#: long: a copy that cannot start would otherwise be made and deleted on every sweep.
RETRY_AFTER_ROLL_BACK_SECONDS = 300.0


def move_record(obj: Mapping[str, Any]) -> dict[str, Any] | None:
    """The move in flight recorded on a virtual pod (``{"copy", "node", "since"}``), if any."""
    raw = ((obj.get("metadata") or {}).get("annotations") or {}).get(MOVE_ANNOTATION)
    if not raw:
        return None
    try:
        record = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(record, dict) or not isinstance(record.get("copy"), str):
        return None
    return record


def _ready(obj: Mapping[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (obj.get("status") or {}).get("conditions") or ())


def _seconds(text: object, default: float) -> float:
    if not isinstance(text, str):
        return default
    try:
        return float(calendar.timegm(time.strptime(text, _TIME_FORMAT)))
    except ValueError:
        return default


class _MoveInFlight(Exception):
    """The pod read before a move already records one: follow that one instead."""

    def __init__(self, current: Obj) -> None:
        super().__init__("a move is already recorded on the pod")
        self.current = current


class Rebalancer:
    """Moves pods from virtual nodes back to real ones; runs on the scheduler's event loop.

    It is the scheduler's :class:`~pyscheduler.scheduler.PlacementObserver` and asks the
    scheduler through :class:`~pyscheduler.virtual.types.Placement` only."""

    def __init__(self, placement: Placement, settings: RebalancerConfig, *,
                 clock: Callable[[], float] = time.time) -> None:
        self.placement = placement
        self.settings = settings
        self.clock = clock
        self.virtual_pods: dict[str, Obj] = {}  # uid -> pod, for our pods on virtual nodes
        self.moving: dict[str, str] = {}  # virtual pod uid -> reservation uid
        self._evicted: dict[str, set[str]] = {}  # evicted pod uid -> its controller uids
        self._targets: dict[str, str] = {}  # evicted pod uid -> the real node reserved for it
        self._rolled_back: dict[str, float] = {}  # pod uid -> when its move was rolled back
        self._poke = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._moves: set[asyncio.Task[None]] = set()
        self.moved = 0

    # -- what the scheduler tells us (PlacementObserver) ---------------------------------------

    def _ours(self, obj: Obj) -> bool:
        """A pod this scheduler placed on a virtual node (see the module docstring)."""
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        return spec.get("schedulerName") in self.placement.names \
            and (meta.get("labels") or {}).get(VIRTUAL_LABEL) == "true"

    def pod_seen(self, obj: Obj) -> None:
        uid = str(obj["metadata"].get("uid"))
        if not self._ours(obj) or obj.get("metadata", {}).get("deletionTimestamp") or \
                (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            self.virtual_pods.pop(uid, None)
        else:
            self.virtual_pods[uid] = obj

    def pod_gone(self, uid: str) -> None:
        self.virtual_pods.pop(uid, None)
        self._rolled_back.pop(uid, None)

    def capacity_freed(self) -> None:
        """Capacity may have freed up: sweep soon."""
        self._poke.set()

    def steer(self, pod: PodInfo) -> str | None:
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
                self.placement.release(reservation)
                del self.moving[uid]
                self._evicted.pop(uid, None)
                return self._targets.pop(uid, None)
        return None

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
        try:
            await self.recover()
        except asyncio.CancelledError:
            raise
        except Exception:  # recovery is retried by the sweeps below
            log.exception("recovering the moves in flight failed")
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
        pool = str(((obj.get("metadata") or {}).get("labels") or {}).get(POOL_LABEL)
                   or str(spec.get("nodeName") or "").removeprefix(VIRTUAL_NODE_PREFIX))
        return (-int(spec.get("priority") or 0), -self.placement.pool_price(pool),
                self._since(obj))

    def _since(self, obj: Obj) -> float:
        """When the pod started on the cloud (status.startTime, else its creation)."""
        text = (obj.get("status") or {}).get("startTime") or \
            (obj.get("metadata") or {}).get("creationTimestamp")
        return _seconds(text, self.clock())

    async def sweep(self) -> list[tuple[str, str]]:
        """One pass: returns (pod key, outcome) for every pod looked at."""
        s = self.settings
        outcomes: list[tuple[str, str]] = []
        per_namespace: dict[str, int] = {}
        moves = 0
        room = self.placement.most_room()
        for obj in sorted(list(self.virtual_pods.values()), key=self._order):
            meta = obj["metadata"]
            uid, key = str(meta.get("uid")), f"{meta.get('namespace')}/{meta.get('name')}"
            if uid in self.moving:
                continue
            if move_record(obj) is not None:
                # A move in flight that no task of ours follows (another leader's): finish it.
                self._follow(obj)
                outcomes.append((key, "recovering"))
                continue
            if (obj.get("status") or {}).get("phase") != "Running":
                continue
            if (meta.get("annotations") or {}).get(REBALANCE_ANNOTATION) == NEVER:
                outcomes.append((key, "never"))
                continue
            if self.clock() - self._rolled_back.get(uid, -RETRY_AFTER_ROLL_BACK_SECONDS) < \
                    RETRY_AFTER_ROLL_BACK_SECONDS:
                outcomes.append((key, "rolled-back"))
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
                self.placement.recorder.record(
                    obj, type_="Normal", reason="Rebalance", action="Rebalance",
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
            self._spawn(self._move(obj, target, strategy, reservation))
            outcomes.append((key, f"{strategy}:{target}"))
        return outcomes

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._moves.add(task)
        task.add_done_callback(self._moves.discard)

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
            return await self.placement.try_placement(pod_info(clone))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # fragment unavailable, a spec we cannot read...
            log.info("rebalance: cannot evaluate pod", pod=obj["metadata"].get("name"),
                     error=str(exc))
            return None

    def reserve(self, obj: Obj, node: str) -> str | None:
        """Hold ``obj``'s requests on ``node`` (an assumed placeholder)."""
        clone = copy.deepcopy(obj)
        clone["spec"]["nodeName"] = node
        uid = f"rebalance:{obj['metadata']['uid']}"
        clone["metadata"]["uid"] = uid
        try:
            return uid if self.placement.reserve(pod_info(clone), node) else None
        except (PodSpecError, ValueError):
            return None

    def await_replacement(self, obj: Obj, node: str) -> None:
        """``obj`` (being moved, its capacity reserved on ``node``) was evicted: the next pod of
        its controller gets the reservation (:meth:`steer`)."""
        meta = obj["metadata"]
        owners = {r.get("uid") for r in meta.get("ownerReferences") or () if r.get("controller")}
        self._evicted[str(meta["uid"])] = {str(o) for o in owners}
        self._targets[str(meta["uid"])] = node

    async def _move(self, obj: Obj, node: str, strategy: str, reservation: str) -> None:
        placement = self.placement
        meta = obj["metadata"]
        uid = str(meta["uid"])
        ok = False
        in_flight: Obj | None = None
        try:
            if strategy == "copy":
                ok = await self._copy_then_delete(obj, node, reservation)
            else:
                ok = await self._evict(obj, node)
        except asyncio.CancelledError:
            raise
        except _MoveInFlight as exc:
            in_flight = exc.current
        except Exception as exc:
            log.warning("rebalance move failed", pod=meta.get("name"), error=str(exc))
            placement.recorder.record(obj, type_="Warning", reason="RebalanceFailed",
                                      action="Rebalance", note=f"move to {node} failed: {exc}")
        finally:
            if strategy == "copy" or not ok:
                self.moving.pop(uid, None)
                placement.release(reservation)
        if in_flight is not None:
            self._follow(in_flight)
            return
        if ok:
            self.moved += 1
        if placement.metrics is not None:
            placement.metrics.rebalance_moves.labels(strategy, "ok" if ok else "failed").inc()

    # -- make-before-break, recorded on the pod ---------------------------------------------------

    def _pod_path(self, namespace: str, name: str) -> str:
        return api_path("v1", "pods", namespace=namespace, name=name)

    async def _current(self, obj: Obj) -> Obj | None:
        """The pod as the API server has it now, if it is still the same pod, on its virtual
        node, and not being deleted; None otherwise (and the pod is forgotten: what the watch
        still showed of it was out of date)."""
        meta = obj["metadata"]
        try:
            current = await self.placement.client.get(
                self._pod_path(meta["namespace"], meta["name"]))
        except NotFoundError:
            current = None
        cmeta = (current or {}).get("metadata") or {}
        if current is None or cmeta.get("uid") != meta.get("uid") or \
                cmeta.get("deletionTimestamp") or \
                (current.get("spec") or {}).get("nodeName") != obj["spec"].get("nodeName"):
            self.virtual_pods.pop(str(meta.get("uid")), None)
            return None
        return current

    def _copy_of(self, obj: Obj, node: str, copy_name: str) -> Obj:
        meta = obj["metadata"]
        copy_obj: Obj = {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": copy_name,
                "namespace": meta["namespace"],
                "labels": {k: v for k, v in (meta.get("labels") or {}).items()
                           if k not in (VIRTUAL_LABEL, POOL_LABEL)},
                "annotations": {**{k: v for k, v in (meta.get("annotations") or {}).items()
                                   if k not in (INSTANCE_ANNOTATION, MOVE_ANNOTATION)},
                                MOVED_FROM_ANNOTATION: f"{meta['name']} ({meta.get('uid')})"},
            },
            "spec": {k: v for k, v in obj["spec"].items() if k != "nodeName"},
        }
        copy_obj["spec"]["nodeName"] = node
        return copy_obj

    async def _copy_then_delete(self, obj: Obj, node: str, reservation: str) -> bool:
        client = self.placement.client
        meta = obj["metadata"]
        ns, name = meta["namespace"], meta["name"]
        current = await self._current(obj)
        if current is None:
            return False  # deleted (or being deleted) meanwhile: nothing to move
        if move_record(current) is not None:
            # A move recorded since our cache last saw the pod (a previous leader's): that one
            # is finished or undone, never overwritten, or its copy would be left behind.
            raise _MoveInFlight(current)
        copy_name = f"{name}-rb-{int(self.clock()) % 100000}"
        record = {"copy": copy_name, "node": node,
                  "since": time.strftime(_TIME_FORMAT, time.gmtime(self.clock()))}
        # The record first, on the version just read: a pod changed (or deleted) since is not
        # moved, and whoever leads next knows what to finish or undo.
        try:
            await client.patch(self._pod_path(ns, name), {"metadata": {
                "resourceVersion": (current.get("metadata") or {}).get("resourceVersion"),
                "annotations": {MOVE_ANNOTATION: json.dumps(record, sort_keys=True)}}}, "merge")
        except (ConflictError, NotFoundError):
            return False
        try:
            await client.create(api_path("v1", "pods", namespace=ns),
                                self._copy_of(current, node, copy_name))
        except AlreadyExistsError:
            pass  # made by an earlier attempt of this very move
        except KubeError:
            await self._clear_record(obj)
            raise
        # The copy now holds the capacity for real: drop the placeholder, count the copy.
        self.placement.release(reservation)
        return await self._finish(obj, record)

    async def _finish(self, obj: Obj, record: Mapping[str, Any]) -> bool:
        """Wait (what is left of the ready timeout) for the recorded copy to be Ready, then
        delete the original; roll back when it is not Ready in time or is gone."""
        client = self.placement.client
        meta = obj["metadata"]
        ns, name = meta["namespace"], meta["name"]
        copy_name = str(record["copy"])
        node = str(record.get("node") or "")
        started = _seconds(record.get("since"), self.clock())
        deadline = started + self.settings.ready_timeout_seconds
        ready = False
        while True:
            try:
                current = await client.get(self._pod_path(ns, copy_name))
            except NotFoundError:
                break
            if _ready(current):
                ready = True
                break
            if self.clock() >= deadline:
                break
            await asyncio.sleep(0.2)
        if not ready:
            await self._roll_back(obj, copy_name, f"copy {copy_name} on {node} did not become "
                                                  f"Ready within "
                                                  f"{self.settings.ready_timeout_seconds:g}s; "
                                                  f"the pod stays on the cloud")
            return False
        try:
            await client.delete(self._pod_path(ns, name), uid=str(meta["uid"]))
        except (NotFoundError, ConflictError):
            pass
        self.placement.recorder.record(
            obj, type_="Normal", reason="Rebalance", action="Rebalance",
            note=f"moved back to real node {node} as {copy_name} (make-before-break)")
        return True

    async def _roll_back(self, obj: Obj, copy_name: str, why: str) -> None:
        meta = obj["metadata"]
        self._rolled_back[str(meta["uid"])] = self.clock()
        try:
            await self.placement.client.delete(self._pod_path(meta["namespace"], copy_name))
        except NotFoundError:
            pass
        await self._clear_record(obj)
        self.placement.recorder.record(obj, type_="Warning", reason="RebalanceFailed",
                                       action="Rebalance", note=why)

    async def _clear_record(self, obj: Obj) -> None:
        meta = obj["metadata"]
        try:
            await self.placement.client.patch(
                self._pod_path(meta["namespace"], meta["name"]),
                {"metadata": {"annotations": {MOVE_ANNOTATION: None}}}, "merge")
        except NotFoundError:
            pass

    async def recover(self) -> None:
        """Finish or undo every move recorded on a pod (see the module docstring): what a
        leader does first, for the moves a previous leader left in flight."""
        for obj in list(self.virtual_pods.values()):
            if move_record(obj) is not None:
                self._follow(obj)

    def _follow(self, obj: Obj) -> None:
        """Take over the recorded move of ``obj`` in a task of its own."""
        uid = str(obj["metadata"]["uid"])
        if uid in self.moving:
            return
        record = move_record(obj)
        assert record is not None
        self.moving[uid] = ""

        async def follow() -> None:
            try:
                current = await self._current(obj)
                if current is None:
                    # The original is gone: the move was finished (or the pod deleted); a copy
                    # left behind is a pod of its own now.
                    return
                if await self._finish(current, record):
                    self.moved += 1
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("recovering a move failed", pod=obj["metadata"].get("name"),
                            error=str(exc))
            finally:
                self.moving.pop(uid, None)
        self._spawn(follow())

    # -- eviction --------------------------------------------------------------------------------

    async def _evict(self, obj: Obj, node: str) -> bool:
        placement = self.placement
        client = placement.client
        meta = obj["metadata"]
        ns, name, uid = meta["namespace"], meta["name"], str(meta["uid"])
        if await self._current(obj) is None:
            return False
        try:
            await client.patch(self._pod_path(ns, name), {
                "metadata": {"annotations": {DELETION_COST_ANNOTATION: "-1000"}}})
            await client.create(api_path("v1", "pods", namespace=ns, name=name,
                                         subresource="eviction"), {
                "apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": name, "namespace": ns},
                "deleteOptions": {"preconditions": {"uid": uid}}})
        except TooManyRequestsError as exc:
            placement.recorder.record(obj, type_="Normal", reason="RebalanceSkipped",
                                      action="Rebalance",
                                      note=f"eviction refused ({exc}): a PodDisruptionBudget "
                                           f"allows no disruption now; retried later")
            return False
        except (NotFoundError, ConflictError, AlreadyExistsError):
            return False
        self.await_replacement(obj, node)
        placement.recorder.record(obj, type_="Normal", reason="Rebalance", action="Rebalance",
                                  note=f"evicted so that its controller replaces it on a real "
                                       f"node ({node} has room)")
        # The reservation stays until the replacement arrives (steer) or a while passes.
        asyncio.get_running_loop().call_later(
            30.0, lambda: self._expire_eviction(uid))
        return True

    def _expire_eviction(self, uid: str) -> None:
        reservation = self.moving.pop(uid, None)
        self._evicted.pop(uid, None)
        self._targets.pop(uid, None)
        if reservation:
            self.placement.release(reservation)

"""Virtual Nodes: one Kubernetes Node per cloud container-instance pool.

A virtual node is what the scheduler sees of a cloud pool (the virtual-kubelet *node* role):
``wssp-virtual-<pool>``, labelled ``type=virtual-kubelet``, ``kubernetes.io/role=agent``,
``wssp/cloud-platform=<platform>`` and ``wssp/cloud-pool=<pool>``, and tainted
``virtual-kubelet.io/provider=<platform>:NoSchedule`` so that only pods meant to burst land on
it. The :mod:`pyscheduler.virtual.provider` runs the pods bound to it.

Design
------
* **Capacity is the pool's quota.** ``capacity`` and ``allocatable`` are the quota reported by
  :meth:`CloudAdapter.capacity` (CPU millicores as a quantity, memory in bytes, ``pods`` the
  instance quota, capped by the pool's ``max_pods``), refreshed every ``refresh_seconds``. The
  scheduler then accounts the pods bound to the node exactly as for a real node, so it never
  sends a pool more than its quota.
* **Two loops, as the kubelet has.** The *heartbeat* renews the node's Lease in
  ``kube-node-lease`` every ``heartbeat_seconds`` (the kubelet's ``NodeLease`` heartbeat); it
  never talks to the cloud, so a slow or failing cloud cannot make the node look dead. The
  *status* loop (one per pool) asks the cloud for the capacity and writes the node status
  (capacity, allocatable, conditions with a fresh ``lastHeartbeatTime``), like the kubelet's
  ``nodeStatusUpdateFrequency`` loop.
* **Readiness tolerates transient cloud errors.** A failed capacity call keeps the last known
  capacity and the node stays Ready; only when every call has failed for
  ``not_ready_after_seconds`` does ``Ready`` turn False (reason ``CloudUnavailable``, the message
  naming the last error). The first success makes it Ready again. This mirrors how the node
  lifecycle controller waits ``node-monitor-grace-period`` before declaring a node unhealthy:
  a blip must not make pods move.
* **Self-healing registration.** A node deleted behind our back is registered again at the next
  status write; on start an existing node is adopted (our labels and taint are re-applied, other
  taints kept) and its last capacity kept until the cloud answers.

All Kubernetes I/O goes through :class:`~pyscheduler.kube.client.KubeClient`; everything about
the cloud goes through the :class:`~pyscheduler.virtual.types.CloudAdapter`.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import math
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import structlog

from pyscheduler.api.names import (
    MAX_INSTANCE_CPU_ANNOTATION,
    MAX_INSTANCE_MEMORY_ANNOTATION,
    PLATFORM_LABEL,
    POOL_LABEL,
    PRICE_ANNOTATION,
    PROVIDER_TAINT_KEY,
    ROLE_AGENT,
    ROLE_LABEL,
    TYPE_LABEL,
    TYPE_VIRTUAL_KUBELET,
    VIRTUAL_NODE_PREFIX,
    virtual_node_name,
)
from pyscheduler.api.quantity import format_quantity
from pyscheduler.kube.client import KubeClient, api_path
from pyscheduler.kube.errors import AlreadyExistsError, KubeError, NotFoundError
from pyscheduler.kube.tasks import bounded, cancel_and_wait
from pyscheduler.virtual.types import CloudAdapter, CloudError, PoolCapacity
from pyscheduler.api.times import micro_time, rfc3339, utcnow

__all__ = [
    "CLOUD_UNAVAILABLE",
    "NODE_LEASE_NAMESPACE",
    "PoolConfig",
    "VirtualNodeManager",
    "describe_cloud_failure",
    "node_capacity",
    "pool_annotations",
    "virtual_node",
]

log = structlog.get_logger("pyscheduler.virtual.node")

Obj = dict[str, Any]

LABEL_HOSTNAME = "kubernetes.io/hostname"
NODE_LEASE_NAMESPACE = "kube-node-lease"
LEASES_API = "coordination.k8s.io/v1"
CLOUD_UNAVAILABLE = "CloudUnavailable"
KUBELET_VERSION = "v1.32.0-pyscheduler-virtual"
# The kubelet's default lease duration; the renew interval is a quarter of it.
DEFAULT_LEASE_SECONDS = 40

# A pool name becomes part of a node name (a DNS subdomain) and of a label value.
_POOL_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,48}[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")






@dataclass(frozen=True, slots=True)
class PoolConfig:
    """One cloud pool served by a virtual node. ``max_pods`` caps the node's ``pods`` capacity
    below the pool's instance quota (``None``: the quota alone)."""

    name: str
    platform: str
    max_pods: int | None = None
    #: More labels for the virtual node (where the pool is: region, zone); never ours.
    labels: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if not _POOL_NAME.match(self.name):
            raise ValueError(f"pool name {self.name!r} must be a DNS label of at most 50 "
                             "characters (lower-case letters, digits and '-')")
        if not self.platform or not _LABEL_VALUE.match(self.platform):
            raise ValueError(f"pool {self.name}: platform {self.platform!r} must be a non-empty "
                             "label value")
        if self.max_pods is not None and self.max_pods < 0:
            raise ValueError(f"pool {self.name}: max_pods must not be negative, "
                             f"got {self.max_pods}")

    @property
    def node_name(self) -> str:
        return virtual_node_name(self.name)


def node_capacity(pool: PoolConfig, capacity: PoolCapacity) -> dict[str, str]:
    """The node's ``capacity`` (= ``allocatable``) for a pool's quota."""
    pods = capacity.instances
    if pool.max_pods is not None:
        pods = min(pods, pool.max_pods)
    return {
        "cpu": format_quantity(Fraction(max(capacity.cpu_millis, 0), 1000)),
        "memory": format_quantity(max(capacity.memory_bytes, 0), binary=True),
        "pods": str(max(pods, 0)),
    }


def _condition(type_: str, status: str, reason: str, message: str, heartbeat: str,
               transition: str) -> Obj:
    return {"type": type_, "status": status, "reason": reason, "message": message,
            "lastHeartbeatTime": heartbeat, "lastTransitionTime": transition}


def _conditions(ready: bool, message: str, heartbeat: str, transition: str,
                since: str) -> list[Obj]:
    """The kubelet's node conditions: no pressure (a cloud pool has none to report) and Ready."""
    return [
        _condition("MemoryPressure", "False", "KubeletHasSufficientMemory",
                   "cloud pool has sufficient memory available", heartbeat, since),
        _condition("DiskPressure", "False", "KubeletHasNoDiskPressure",
                   "cloud pool has no disk pressure", heartbeat, since),
        _condition("PIDPressure", "False", "KubeletHasSufficientPID",
                   "cloud pool has sufficient PID available", heartbeat, since),
        _condition("Ready", "True" if ready else "False",
                   "KubeletReady" if ready else CLOUD_UNAVAILABLE, message, heartbeat,
                   transition),
    ]


def _labels(pool: PoolConfig) -> dict[str, str]:
    return {
        **dict(pool.labels),
        TYPE_LABEL: TYPE_VIRTUAL_KUBELET,
        ROLE_LABEL: ROLE_AGENT,
        LABEL_HOSTNAME: pool.node_name,
        PLATFORM_LABEL: pool.platform,
        POOL_LABEL: pool.name,
        "kubernetes.io/os": "linux",
        "beta.kubernetes.io/os": "linux",
        # A virtual node is no backend for a cloud load balancer (virtual-kubelet sets both).
        "node.kubernetes.io/exclude-from-external-load-balancers": "true",
        "alpha.service-controller.exclude-balancer": "true",
    }


def _taint(pool: PoolConfig) -> Obj:
    return {"key": PROVIDER_TAINT_KEY, "value": pool.platform, "effect": "NoSchedule"}


def pool_annotations(quota: PoolCapacity) -> dict[str, str]:
    """What the scheduler reads of a pool on its virtual node: the largest instance the pool
    runs and its price per CPU-hour."""
    return {
        MAX_INSTANCE_CPU_ANNOTATION: format_quantity(
            Fraction(quota.max_instance_cpu_millis, 1000)),
        MAX_INSTANCE_MEMORY_ANNOTATION: format_quantity(
            Fraction(quota.max_instance_memory_bytes), binary=True),
        PRICE_ANNOTATION: f"{quota.price_per_cpu_hour:g}",
    }


def virtual_node(pool: PoolConfig, capacity: dict[str, str], *, ready: bool = True,
                 message: str = "", now: dt.datetime | None = None,
                 annotations: dict[str, str] | None = None) -> Obj:
    """The Node object registered for ``pool`` (the shape a kubelet registers)."""
    stamp = rfc3339(now or utcnow())
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": pool.node_name, "labels": _labels(pool),
                     "annotations": {"node.alpha.kubernetes.io/ttl": "0",
                                     **(annotations or {})}},
        "spec": {"taints": [_taint(pool)]},
        "status": {
            "capacity": dict(capacity),
            "allocatable": dict(capacity),
            "conditions": _conditions(ready, message or _ready_message(pool), stamp, stamp,
                                      stamp),
            "addresses": [{"type": "Hostname", "address": pool.node_name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {"kubeletVersion": KUBELET_VERSION, "kubeProxyVersion": "",
                         "osImage": f"{pool.platform} container instances",
                         "kernelVersion": "", "containerRuntimeVersion": pool.platform,
                         "operatingSystem": "linux", "architecture": "amd64",
                         "machineID": "", "systemUUID": "", "bootID": ""},
        },
    }


def _ready_message(pool: PoolConfig) -> str:
    return f"cloud pool {pool.name} ({pool.platform}) is reachable"


def describe_cloud_failure(exc: BaseException) -> str:
    """A failed cloud call in one line, its class first: ``rejected (QuotaExceeded): ...``,
    ``unavailable (CircuitOpen): ...``. A timeout, or an adapter raising something other than
    :class:`CloudError`, counts as ``unavailable``."""
    if isinstance(exc, CloudError):
        reason = f" ({exc.reason})" if exc.reason else ""
        return f"{exc.kind}{reason}: {exc.message}"
    if isinstance(exc, asyncio.TimeoutError):
        return "unavailable: timed out"
    text = str(exc)
    return f"unavailable: {type(exc).__name__}{': ' + text if text else ''}"


class _PoolState:
    """What the manager knows of one pool and its node."""

    __slots__ = ("config", "capacity", "quota", "registered", "node_uid", "ready",
                 "transition", "since", "failing_since", "last_error", "lease_created",
                 "annotated")

    def __init__(self, config: PoolConfig, now: str) -> None:
        self.config = config
        self.capacity: dict[str, str] | None = None   # None: not known yet
        self.quota: PoolCapacity | None = None
        self.registered = False
        self.node_uid = ""
        self.ready = True
        self.transition = now                          # Ready's last transition
        self.since = now                               # the pressure conditions' (constant)
        self.failing_since: float | None = None       # clock() of the first failure in a row
        self.last_error = ""
        self.lease_created = False
        self.annotated: dict[str, str] | None = None  # the pool annotations on the node


class VirtualNodeManager:
    """Register one virtual Node per pool and keep its capacity, Ready condition and Lease
    current; see the module docstring.

    ``clock`` (monotonic seconds) measures how long the cloud has been failing; ``wall_clock``
    stamps conditions and leases. ``cloud_timeout_seconds`` bounds each capacity call.
    """

    def __init__(self, client: KubeClient, adapter: CloudAdapter, pools: Sequence[PoolConfig],
                 *, heartbeat_seconds: float = 10.0, refresh_seconds: float = 15.0,
                 not_ready_after_seconds: float = 120.0, cloud_timeout_seconds: float = 10.0,
                 clock: Callable[[], float] = time.monotonic,
                 wall_clock: Callable[[], dt.datetime] = utcnow) -> None:
        if not pools:
            raise ValueError("at least one pool is needed")
        names = [p.name for p in pools]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate pool names: {', '.join(sorted(names))}")
        if min(heartbeat_seconds, refresh_seconds, cloud_timeout_seconds) <= 0:
            raise ValueError("heartbeat_seconds, refresh_seconds and cloud_timeout_seconds "
                             "must be positive")
        if not_ready_after_seconds < 0:
            raise ValueError("not_ready_after_seconds must not be negative")
        self.client = client
        self.adapter = adapter
        self.pools = tuple(pools)
        self.heartbeat_seconds = heartbeat_seconds
        self.refresh_seconds = refresh_seconds
        self.not_ready_after_seconds = not_ready_after_seconds
        self.cloud_timeout_seconds = cloud_timeout_seconds
        self.lease_duration_seconds = max(DEFAULT_LEASE_SECONDS, math.ceil(4 * heartbeat_seconds))
        self._clock = clock
        self._wall_clock = wall_clock
        stamp = rfc3339(wall_clock())
        self._state = {p.name: _PoolState(p, stamp) for p in pools}
        self._tasks: list[asyncio.Task[None]] = []
        # Counters for metrics.
        self.capacity_failures = 0
        self.status_writes = 0
        self.lease_renewals = 0
        self.write_failures = 0

    # -- what others may ask -------------------------------------------------------------------

    @property
    def node_names(self) -> tuple[str, ...]:
        return tuple(p.node_name for p in self.pools)

    def is_ready(self, pool: str) -> bool:
        """Whether the pool's node currently reports Ready=True."""
        return self._state[pool].ready

    def pool_capacity(self, pool: str) -> PoolCapacity | None:
        """The pool's quota and use as last reported by the cloud (``None`` before any)."""
        return self._state[pool].quota

    def last_error(self, pool: str) -> str:
        """The last capacity error of the pool (``""`` after a success)."""
        return self._state[pool].last_error

    # -- lifecycle -----------------------------------------------------------------------------

    @property
    def tasks(self) -> dict[str, asyncio.Task[None]]:
        """The long-lived tasks while started, for the process to watch."""
        return {task.get_name(): task for task in self._tasks}

    async def start(self) -> None:
        """Register every node (one capacity call each, bounded by ``cloud_timeout_seconds``)
        and start the status and heartbeat loops. Failures are logged and retried by the loops,
        so this returns even when the API server or the cloud is down."""
        if self._tasks:
            return
        await asyncio.gather(*(self._sync_pool(s) for s in self._state.values()))
        await asyncio.gather(*(self._renew_lease(s) for s in self._state.values()))
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._heartbeat_loop(), name="virtual node heartbeat")]
        for state in self._state.values():
            self._tasks.append(loop.create_task(
                self._status_loop(state), name=f"virtual node status {state.config.name}"))

    async def stop(self) -> None:
        """Stop both loops. The nodes stay registered (the kubelet does not deregister either);
        their leases expire if no one renews them."""
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            await cancel_and_wait(task)

    # -- status --------------------------------------------------------------------------------

    async def _status_loop(self, state: _PoolState) -> None:
        while True:
            await asyncio.sleep(self.refresh_seconds)
            await self._sync_pool(state)

    async def _sync_pool(self, state: _PoolState) -> None:
        """Ask the cloud for the quota, judge readiness, write the node. Never raises."""
        try:
            await self._refresh_capacity(state)
            await self._write_node(state)
        except asyncio.CancelledError:
            raise
        except KubeError as exc:
            self.write_failures += 1
            log.warning("writing the virtual node failed; will retry", node=state.config.node_name,
                        error=str(exc))
        except Exception:
            self.write_failures += 1
            log.exception("virtual node status update failed", node=state.config.node_name)

    async def _refresh_capacity(self, state: _PoolState) -> None:
        pool = state.config
        try:
            quota = await bounded(self.adapter.capacity(pool.name), self.cloud_timeout_seconds)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # CloudError, a timeout, or a broken adapter: all "failing"
            self.capacity_failures += 1
            now = self._clock()
            if state.failing_since is None:
                state.failing_since = now
            state.last_error = describe_cloud_failure(exc)
            failing_for = now - state.failing_since
            if state.ready and failing_for >= self.not_ready_after_seconds:
                self._set_ready(state, False)
                log.warning("cloud pool unavailable; virtual node is NotReady", pool=pool.name,
                            failing_for=round(failing_for, 1), error=state.last_error)
            else:
                log.info("cloud capacity call failed; keeping the last capacity", pool=pool.name,
                         failing_for=round(failing_for, 1), error=state.last_error)
            return
        if quota.platform and quota.platform != pool.platform:
            log.warning("cloud reports another platform for the pool", pool=pool.name,
                        configured=pool.platform, reported=quota.platform)
        state.quota = quota
        state.capacity = node_capacity(pool, quota)
        state.failing_since = None
        state.last_error = ""
        if not state.ready:
            self._set_ready(state, True)
            log.info("cloud pool reachable again; virtual node is Ready", pool=pool.name)

    def _set_ready(self, state: _PoolState, ready: bool) -> None:
        state.ready = ready
        state.transition = rfc3339(self._wall_clock())

    def _ready_message(self, state: _PoolState) -> str:
        if state.ready:
            return _ready_message(state.config)
        return (f"cloud pool {state.config.name} has been unavailable for "
                f"{self.not_ready_after_seconds:g}s or more: {state.last_error}")

    def _status(self, state: _PoolState) -> Obj:
        heartbeat = rfc3339(self._wall_clock())
        status: Obj = {"conditions": _conditions(state.ready, self._ready_message(state),
                                                 heartbeat, state.transition, state.since)}
        if state.capacity is not None:
            status["capacity"] = dict(state.capacity)
            status["allocatable"] = dict(state.capacity)
        return status

    async def _write_node(self, state: _PoolState) -> None:
        pool = state.config
        status_path = api_path("v1", "nodes", name=pool.node_name, subresource="status")
        if not state.registered:
            await self._register(state)
        try:
            node = await self.client.patch(status_path, {"status": self._status(state)},
                                           "strategic")
        except NotFoundError:
            # Deleted behind our back: register again (the next write goes to the new node).
            log.warning("virtual node vanished; registering it again", node=pool.node_name)
            state.registered = False
            await self._register(state)
            node = await self.client.patch(status_path, {"status": self._status(state)},
                                           "strategic")
        self._observe_uid(state, str((node.get("metadata") or {}).get("uid") or ""))
        self.status_writes += 1
        if state.quota is not None:
            wanted = pool_annotations(state.quota)
            if state.annotated is None:
                notes = (node.get("metadata") or {}).get("annotations") or {}
                state.annotated = {k: v for k, v in notes.items() if k in wanted}
            if state.annotated != wanted:
                # Metadata is not written through the status subresource: a patch of its own,
                # made only when the cloud reports other limits or another price.
                await self.client.patch(api_path("v1", "nodes", name=pool.node_name),
                                        {"metadata": {"annotations": wanted}}, "merge")
                state.annotated = wanted

    @staticmethod
    def _observe_uid(state: _PoolState, uid: str) -> None:
        if uid and uid != state.node_uid:
            state.node_uid = uid
            # A (re)registered node: the lease's owner reference must follow (the garbage
            # collector deletes a lease whose owner is gone).
            state.lease_created = False

    async def _register(self, state: _PoolState) -> None:
        """Create the node, or adopt an existing one (our labels and taint re-applied)."""
        pool = state.config
        path = api_path("v1", "nodes", name=pool.node_name)
        try:
            current = await self.client.get(path)
        except NotFoundError:
            capacity = state.capacity or {"cpu": "0", "memory": "0", "pods": "0"}
            notes = pool_annotations(state.quota) if state.quota is not None else None
            body = virtual_node(pool, capacity, ready=state.ready,
                               message=self._ready_message(state), now=self._wall_clock(),
                               annotations=notes)
            created = await self.client.create(api_path("v1", "nodes"), body)
            self._observe_uid(state, str(created["metadata"].get("uid") or ""))
            state.annotated = notes
            state.registered = True
            log.info("virtual node registered", node=pool.node_name, capacity=capacity)
            return
        meta = current.get("metadata") or {}
        spec = current.get("spec") or {}
        labels = meta.get("labels") or {}
        taints = [t for t in spec.get("taints") or () if isinstance(t, dict)]
        patch: Obj = {"metadata": {"resourceVersion": meta.get("resourceVersion")}}
        wanted = _labels(pool)
        if any(labels.get(k) != v for k, v in wanted.items()):
            patch["metadata"]["labels"] = wanted
        ours = _taint(pool)
        if ours not in taints:
            # Taints have no merge key: the list is written whole, keeping everyone else's.
            patch["spec"] = {"taints": [t for t in taints if t.get("key") != PROVIDER_TAINT_KEY]
                             + [ours]}
        if len(patch) > 1 or "labels" in patch["metadata"]:
            await self.client.patch(path, patch, "merge")
        if state.capacity is None:
            # Keep what the node last said until the cloud answers.
            known = (current.get("status") or {}).get("capacity")
            if isinstance(known, dict) and known:
                state.capacity = {str(k): str(v) for k, v in known.items()}
        self._observe_uid(state, str(meta.get("uid") or ""))
        state.registered = True
        log.info("virtual node adopted", node=pool.node_name)

    # -- heartbeat -----------------------------------------------------------------------------

    async def _heartbeat_loop(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_seconds)
            await asyncio.gather(*(self._renew_lease(s) for s in self._state.values()))

    async def _renew_lease(self, state: _PoolState) -> None:
        """Renew (or create) the node's Lease. Independent of the cloud. Never raises."""
        name = state.config.node_name
        path = api_path(LEASES_API, "leases", namespace=NODE_LEASE_NAMESPACE, name=name)
        now = micro_time(self._wall_clock())
        try:
            if state.lease_created:
                try:
                    await self.client.patch(path, {"spec": {"renewTime": now,
                                                            "holderIdentity": name}}, "merge")
                    self.lease_renewals += 1
                    return
                except NotFoundError:
                    state.lease_created = False
            await self._create_lease(state, now)
            self.lease_renewals += 1
        except asyncio.CancelledError:
            raise
        except KubeError as exc:
            self.write_failures += 1
            log.warning("renewing the node lease failed", node=name, error=str(exc))

    async def _create_lease(self, state: _PoolState, now: str) -> None:
        name = state.config.node_name
        owner = ([{"apiVersion": "v1", "kind": "Node", "name": name, "uid": state.node_uid}]
                 if state.node_uid else [])
        body: Obj = {
            "apiVersion": LEASES_API, "kind": "Lease",
            "metadata": {"name": name, "namespace": NODE_LEASE_NAMESPACE,
                         "ownerReferences": owner},
            "spec": {"holderIdentity": name,
                     "leaseDurationSeconds": self.lease_duration_seconds, "renewTime": now},
        }
        try:
            await self.client.create(api_path(LEASES_API, "leases",
                                              namespace=NODE_LEASE_NAMESPACE), body)
        except AlreadyExistsError:
            # Left by an earlier run: take it over.
            path = api_path(LEASES_API, "leases", namespace=NODE_LEASE_NAMESPACE, name=name)
            with contextlib.suppress(NotFoundError):
                await self.client.patch(path, {"metadata": {"ownerReferences": owner},
                                               "spec": body["spec"]}, "merge")
        state.lease_created = True

"""The simulated IaaS: container-instance pools behind the REST contract of ``docs/cloud-api.md``.

Design
------
:class:`SimCloud` holds the pools and their instances and builds the ``aiohttp`` application;
:class:`CloudSimServer` serves it on a loopback port from the current event loop;
:class:`BackgroundCloudSim` runs both on a thread of its own, for synchronous tests (like
:class:`pyscheduler_sim.harness.BackgroundCluster` does for the embedded cluster).

Each pool (:class:`PoolSpec`) has a quota (CPU, memory, instance count), a largest instance, a
creation latency, a rate of transient create failures and prices. State lives on one event
loop and every handler checks and changes it without awaiting in between, so a create is
atomic: it either makes a whole instance or leaves nothing behind. Instances are ``Pending``
for ``creation_latency_seconds`` and then ``Running`` with an address from the pool's
``ip_prefix`` (the transition is computed when the instance is read, so no timers run). Every
existing instance counts against the quota until it is deleted, whatever its phase — as
container groups do on real clouds — so a ``Failed`` instance must be cleaned up.

Faults for tests live under ``/admin`` (simulator only, outside the contract): a pool can be
``down`` (every request answered 503), slow (``latencySeconds`` before each answer), flaky
(``failureRate``, or ``failNext`` deterministic create failures), out of stock (``rejectNext``
creates refused ``409 InsufficientCapacity``, as a region without capacity answers); instances can vanish behind
the provider's back, fail or succeed. ``GET /admin/stats`` counts the contract requests that
reached the server, which lets a test prove that an open circuit made no call at all.

Cloud files (``load_cloud_file``) are YAML::

    cloudPools:
    - name: aci
      platform: azure
      cpu: "100"             # quantities, as in Kubernetes
      memory: 400Gi
      instances: 100
      maxInstanceCpu: "4"
      maxInstanceMemory: 16Gi
      creationLatencySeconds: 1.0
      failureRate: 0.0       # 0..1, transient create failures (503)
      pricePerCpuHour: 0.0486
      pricePerGiBHour: 0.0053
      ipPrefix: 100.64.      # optional; default 100.<64 + pool index>.

``add_cli`` registers ``cloud-sim serve`` for the command line.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import heapq
import os
import random
import re
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import orjson
import structlog
import yaml
from aiohttp import web

from pyscheduler.api.quantity import QuantityError, milli_value, parse_quantity, value
from pyscheduler.kube.tasks import stop_on_signals
from pyscheduler.virtual.cloud import (
    API_PREFIX,
    decode_request,
    encode_capacity,
    encode_instance,
    error_body,
)
from pyscheduler.virtual.types import (
    FAILED,
    PENDING,
    RUNNING,
    SUCCEEDED,
    Instance,
    InstanceRequest,
    PoolCapacity,
)

__all__ = [
    "BackgroundCloudSim",
    "CloudConfigError",
    "CloudSimServer",
    "PoolSpec",
    "SimCloud",
    "add_cli",
    "default_pools",
    "load_cloud_file",
    "parse_cloud",
    "serve_command",
]

log = structlog.get_logger("pyscheduler_sim.cloud")

T = TypeVar("T")
GIB = 1 << 30
DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000
_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")


class CloudConfigError(ValueError):
    """A cloud file that cannot be used; the message names the field."""


# -- pools -------------------------------------------------------------------------------------

def _prefix_octets(prefix: str) -> int:
    """How many leading octets ``prefix`` fixes (``"100.64."`` → 2); ``ValueError`` if bad."""
    if not prefix.endswith("."):
        raise ValueError(f"must end with '.', got {prefix!r}")
    parts = prefix[:-1].split(".")
    if not 1 <= len(parts) <= 3 or not all(p.isdigit() and int(p) <= 255 for p in parts):
        raise ValueError(f"must be one to three octets followed by '.', got {prefix!r}")
    return len(parts)


def _address_count(prefix: str) -> int:
    """Usable addresses under ``prefix`` (last octet 1..254)."""
    free_octets = 4 - _prefix_octets(prefix)
    count: int = 256 ** (free_octets - 1) * 254
    return count


def _address(prefix: str, n: int) -> str:
    """The ``n``-th (0-based) usable address under ``prefix``."""
    free_octets = 4 - _prefix_octets(prefix)
    high, low = divmod(n, 254)
    octets = [low + 1]
    for _ in range(free_octets - 1):
        high, octet = divmod(high, 256)
        octets.append(octet)
    return prefix + ".".join(str(o) for o in reversed(octets))


@dataclass(frozen=True)
class PoolSpec:
    """One container-instance pool. Quantities are integers: CPU in millicores, memory in
    bytes. ``failure_rate`` (0..1) is the share of creates answered 503 without acting.
    ``ip_prefix`` (``"100.64."``, ``"10.1.2."``) defaults to ``100.<64 + pool index>.``."""

    name: str
    platform: str = "generic"
    cpu_millis: int = 100_000
    memory_bytes: int = 400 * GIB
    instances: int = 100
    max_instance_cpu_millis: int = 4_000
    max_instance_memory_bytes: int = 16 * GIB
    creation_latency_seconds: float = 1.0
    failure_rate: float = 0.0
    price_per_cpu_hour: float = 0.0
    price_per_gib_hour: float = 0.0
    ip_prefix: str = ""

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ValueError(f"pool name must be a DNS label, got {self.name!r}")
        for attr in ("cpu_millis", "memory_bytes", "instances", "max_instance_cpu_millis",
                     "max_instance_memory_bytes"):
            if getattr(self, attr) < 0:
                raise ValueError(f"pool {self.name}: {attr} must not be negative")
        for attr in ("creation_latency_seconds", "price_per_cpu_hour", "price_per_gib_hour"):
            if getattr(self, attr) < 0:
                raise ValueError(f"pool {self.name}: {attr} must not be negative")
        if not 0.0 <= self.failure_rate <= 1.0:
            raise ValueError(f"pool {self.name}: failure_rate must be between 0 and 1, "
                             f"got {self.failure_rate}")
        if self.ip_prefix:
            try:
                _prefix_octets(self.ip_prefix)
            except ValueError as exc:
                raise ValueError(f"pool {self.name}: ip_prefix {exc}") from None


def default_pools() -> list[PoolSpec]:
    """Two pools: ``aci`` (Azure Container Instances-like) and ``eci`` (Alibaba ECI-like)."""
    return [
        PoolSpec(name="aci", platform="azure", cpu_millis=100_000, memory_bytes=400 * GIB,
                 instances=100, max_instance_cpu_millis=4_000,
                 max_instance_memory_bytes=16 * GIB, creation_latency_seconds=1.0,
                 price_per_cpu_hour=0.0486, price_per_gib_hour=0.0053),
        PoolSpec(name="eci", platform="alibaba", cpu_millis=64_000, memory_bytes=256 * GIB,
                 instances=64, max_instance_cpu_millis=8_000,
                 max_instance_memory_bytes=32 * GIB, creation_latency_seconds=1.5,
                 price_per_cpu_hour=0.0450, price_per_gib_hour=0.0049),
    ]


# -- cloud files -------------------------------------------------------------------------------

_POOL_FIELDS = ("name", "platform", "cpu", "memory", "instances", "maxInstanceCpu",
                "maxInstanceMemory", "creationLatencySeconds", "failureRate", "pricePerCpuHour",
                "pricePerGiBHour", "ipPrefix")


def _typed(raw: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str,
           default: Any = ...) -> Any:
    if key not in raw:
        if default is ...:
            raise CloudConfigError(f"{where}.{key}: required")
        return default
    v = raw[key]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if not isinstance(v, kinds) or (isinstance(v, bool) and bool not in kinds):
        names = "/".join(k.__name__ for k in kinds)
        raise CloudConfigError(f"{where}.{key}: expected {names}, got {v!r}")
    return v


def _quantity(raw: Mapping[str, Any], key: str, where: str, default: int, *,
              milli: bool) -> int:
    if key not in raw:
        return default
    q = _typed(raw, key, (str, int, float), where)
    try:
        parsed = parse_quantity(q)
    except QuantityError:
        raise CloudConfigError(f"{where}.{key}: not a quantity: {q!r}") from None
    if parsed < 0:
        raise CloudConfigError(f"{where}.{key}: must not be negative, got {q!r}")
    return milli_value(parsed) if milli else value(parsed)


def _non_negative(raw: Mapping[str, Any], key: str, where: str, default: float) -> float:
    v = float(_typed(raw, key, (int, float), where, default))
    if v < 0:
        raise CloudConfigError(f"{where}.{key}: must not be negative, got {v:g}")
    return v


def parse_cloud(data: Any, source: str = "cloud file") -> list[PoolSpec]:
    """Pools from a decoded cloud file; :class:`CloudConfigError` names the bad field."""
    if not isinstance(data, dict):
        raise CloudConfigError(f"{source}: expected a mapping with cloudPools at the top level")
    unknown = set(data) - {"cloudPools"}
    if unknown:
        raise CloudConfigError(f"{source}: unknown field(s): {', '.join(sorted(unknown))}")
    raw_pools = _typed(data, "cloudPools", list, source)
    if not raw_pools:
        raise CloudConfigError(f"{source}: cloudPools: at least one pool is required")
    pools: list[PoolSpec] = []
    seen: set[str] = set()
    for i, raw in enumerate(raw_pools):
        where = f"{source}: cloudPools[{i}]"
        if not isinstance(raw, dict):
            raise CloudConfigError(f"{where}: expected a mapping")
        unknown = set(raw) - set(_POOL_FIELDS)
        if unknown:
            raise CloudConfigError(f"{where}: unknown field(s): {', '.join(sorted(unknown))}")
        name = _typed(raw, "name", str, where)
        if not _NAME.match(name):
            raise CloudConfigError(f"{where}.name: must be a DNS label (lowercase letters, "
                                   f"digits, '-'), got {name!r}")
        if name in seen:
            raise CloudConfigError(f"{where}.name: duplicate pool name {name!r}")
        seen.add(name)
        where = f"{source}: cloudPools[{i}] ({name})"
        instances = _typed(raw, "instances", int, where, 100)
        if instances < 0:
            raise CloudConfigError(f"{where}.instances: must not be negative, got {instances}")
        failure_rate = _non_negative(raw, "failureRate", where, 0.0)
        if failure_rate > 1:
            raise CloudConfigError(f"{where}.failureRate: must be between 0 and 1, "
                                   f"got {failure_rate:g}")
        prefix = _typed(raw, "ipPrefix", str, where, f"100.{64 + i}.")
        try:
            if _address_count(prefix) < instances:
                raise CloudConfigError(f"{where}.ipPrefix: {prefix!r} has fewer addresses "
                                       f"than instances ({instances})")
        except ValueError as exc:
            if isinstance(exc, CloudConfigError):
                raise
            raise CloudConfigError(f"{where}.ipPrefix: {exc}") from None
        pools.append(PoolSpec(
            name=name, platform=_typed(raw, "platform", str, where, "generic"),
            cpu_millis=_quantity(raw, "cpu", where, 100_000, milli=True),
            memory_bytes=_quantity(raw, "memory", where, 400 * GIB, milli=False),
            instances=instances,
            max_instance_cpu_millis=_quantity(raw, "maxInstanceCpu", where, 4_000, milli=True),
            max_instance_memory_bytes=_quantity(raw, "maxInstanceMemory", where, 16 * GIB,
                                                milli=False),
            creation_latency_seconds=_non_negative(raw, "creationLatencySeconds", where, 1.0),
            failure_rate=failure_rate,
            price_per_cpu_hour=_non_negative(raw, "pricePerCpuHour", where, 0.0),
            price_per_gib_hour=_non_negative(raw, "pricePerGiBHour", where, 0.0),
            ip_prefix=prefix))
    return pools


def load_cloud_file(path: str | os.PathLike[str]) -> list[PoolSpec]:
    """Read a cloud file (YAML); :class:`CloudConfigError` names the file and the bad field."""
    try:
        data = yaml.safe_load(Path(path).read_text())
    except OSError as exc:
        raise CloudConfigError(f"cannot read cloud file {path}: "
                               f"{exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise CloudConfigError(f"cloud file {path} is not valid YAML: {exc}") from None
    return parse_cloud(data, str(path))


# -- state -------------------------------------------------------------------------------------

@dataclass
class _Record:
    """An instance as the simulator keeps it (mutable; :meth:`view` freezes it)."""

    id: str
    pool: str
    request: InstanceRequest
    phase: str
    ip: str
    address_index: int
    created_at: float          # unix seconds
    ready_at: float            # monotonic seconds
    latency: float
    price_per_hour: float
    message: str = ""
    started_at: float = 0.0

    def advance(self, now: float) -> None:
        if self.phase == PENDING and now >= self.ready_at:
            self.phase = RUNNING
            self.started_at = self.created_at + self.latency
            self.message = ""

    def view(self) -> Instance:
        running = self.phase == RUNNING
        return Instance(
            id=self.id, pool=self.pool, pod_uid=self.request.pod_uid,
            namespace=self.request.namespace, name=self.request.name, phase=self.phase,
            ip=self.ip if self.phase in (RUNNING, SUCCEEDED, FAILED) and self.started_at
            else "",
            message=self.message, created_at=self.created_at, started_at=self.started_at,
            cpu_millis=self.request.cpu_millis, memory_bytes=self.request.memory_bytes,
            price_per_hour=self.price_per_hour,
            containers=tuple((c.name, running, 0) for c in self.request.containers))


@dataclass
class _Faults:
    failure_rate: float = 0.0
    down: bool = False
    latency_seconds: float = 0.0
    fail_next: int = 0
    reject_next: int = 0

    def as_json(self) -> dict[str, Any]:
        return {"failureRate": self.failure_rate, "down": self.down,
                "latencySeconds": self.latency_seconds, "failNext": self.fail_next,
                "rejectNext": self.reject_next}


@dataclass
class _Pool:
    spec: PoolSpec
    prefix: str
    faults: _Faults
    instances: dict[str, _Record] = field(default_factory=dict)
    by_uid: dict[str, str] = field(default_factory=dict)
    free_addresses: list[int] = field(default_factory=list)   # a heap
    next_address: int = 0
    requests: dict[str, int] = field(default_factory=dict)
    used_cpu: int = 0       # sums over ``instances``, kept by add() and release()
    used_memory: int = 0

    def used(self) -> tuple[int, int, int]:
        return self.used_cpu, self.used_memory, len(self.instances)

    def add(self, record: _Record) -> None:
        self.instances[record.id] = record
        self.by_uid[record.request.pod_uid] = record.id
        self.used_cpu += record.request.cpu_millis
        self.used_memory += record.request.memory_bytes

    def capacity(self) -> PoolCapacity:
        cpu, memory, count = self.used()
        s = self.spec
        return PoolCapacity(
            pool=s.name, platform=s.platform, cpu_millis=s.cpu_millis,
            memory_bytes=s.memory_bytes, instances=s.instances, used_cpu_millis=cpu,
            used_memory_bytes=memory, used_instances=count,
            max_instance_cpu_millis=s.max_instance_cpu_millis,
            max_instance_memory_bytes=s.max_instance_memory_bytes,
            price_per_cpu_hour=s.price_per_cpu_hour, price_per_gib_hour=s.price_per_gib_hour)

    def allocate_address(self) -> int:
        if self.free_addresses:
            return heapq.heappop(self.free_addresses)
        self.next_address += 1
        return self.next_address - 1

    def release(self, record: _Record) -> None:
        del self.instances[record.id]
        self.by_uid.pop(record.request.pod_uid, None)
        self.used_cpu -= record.request.cpu_millis
        self.used_memory -= record.request.memory_bytes
        heapq.heappush(self.free_addresses, record.address_index)


class _HttpError(Exception):
    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.message = message


def _json(status: int, body: Any) -> web.Response:
    return web.Response(status=status, body=orjson.dumps(body),
                        content_type="application/json")


# -- the simulated cloud -----------------------------------------------------------------------

class SimCloud:
    """The pools, their instances and the ``aiohttp`` application serving the contract.

    ``token``: when set, contract and admin requests must carry ``Authorization: Bearer
    <token>``. ``seed`` makes random create failures reproducible. All methods run on the
    loop serving :attr:`app` (from another thread, use :meth:`BackgroundCloudSim.call`).
    """

    def __init__(self, pools: Sequence[PoolSpec] | None = None, *, token: str | None = None,
                 seed: int | None = None) -> None:
        specs = list(default_pools() if pools is None else pools)
        if not specs:
            raise ValueError("SimCloud needs at least one pool")
        self.pools: dict[str, _Pool] = {}
        for index, spec in enumerate(specs):
            if spec.name in self.pools:
                raise ValueError(f"duplicate pool name {spec.name!r}")
            prefix = spec.ip_prefix or f"100.{64 + index}."
            if _address_count(prefix) < spec.instances:
                raise ValueError(f"pool {spec.name}: ip prefix {prefix!r} has fewer addresses "
                                 f"than its {spec.instances} instances")
            self.pools[spec.name] = _Pool(spec=spec, prefix=prefix,
                                          faults=_Faults(failure_rate=spec.failure_rate))
        self.token = token or None
        self.rng = random.Random(seed)
        self.global_faults = _Faults()
        self.requests = 0
        self._seq = 0
        self.app = self._build_app()

    # -- instance state ------------------------------------------------------------------------

    def _pool(self, name: str) -> _Pool:
        pool = self.pools.get(name)
        if pool is None:
            raise _HttpError(404, "PoolNotFound", f"no cloud pool {name!r}")
        return pool

    def _find(self, instance_id: str) -> tuple[_Pool, _Record] | None:
        for pool in self.pools.values():
            record = pool.instances.get(instance_id)
            if record is not None:
                record.advance(time.monotonic())
                return pool, record
        return None

    def create(self, request: InstanceRequest) -> tuple[Instance, bool]:
        """Create (or find, by pod UID) an instance: ``(instance, created)``. Raises
        ``_HttpError`` for quota and limit refusals; never leaves a partial instance."""
        pool = self._pool(request.pool)
        existing = pool.by_uid.get(request.pod_uid)
        if existing is not None:
            record = pool.instances[existing]
            record.advance(time.monotonic())
            return record.view(), False
        spec = pool.spec
        cpu, memory = request.cpu_millis, request.memory_bytes
        if cpu > spec.max_instance_cpu_millis or memory > spec.max_instance_memory_bytes:
            raise _HttpError(
                422, "LimitExceeded",
                f"pool {spec.name}: an instance may have at most "
                f"{spec.max_instance_cpu_millis}m CPU and {spec.max_instance_memory_bytes} "
                f"bytes of memory; {request.namespace}/{request.name} asks {cpu}m and "
                f"{memory} bytes")
        used_cpu, used_memory, used_count = pool.used()
        short = []
        if used_count + 1 > spec.instances:
            short.append(f"instances ({used_count}/{spec.instances} used)")
        if used_cpu + cpu > spec.cpu_millis:
            short.append(f"cpu ({used_cpu}m of {spec.cpu_millis}m used, {cpu}m asked)")
        if used_memory + memory > spec.memory_bytes:
            short.append(f"memory ({used_memory} of {spec.memory_bytes} bytes used, "
                         f"{memory} asked)")
        if short:
            raise _HttpError(409, "QuotaExceeded",
                             f"pool {spec.name}: quota exceeded: {', '.join(short)}")
        self._seq += 1
        address = pool.allocate_address()
        latency = spec.creation_latency_seconds
        record = _Record(
            id=f"{spec.name}-{self._seq:08d}", pool=spec.name, request=request, phase=PENDING,
            ip=_address(pool.prefix, address), address_index=address, created_at=time.time(),
            ready_at=time.monotonic() + latency, latency=latency,
            price_per_hour=round(cpu / 1000 * spec.price_per_cpu_hour
                                 + memory / GIB * spec.price_per_gib_hour, 6),
            message="creating")
        pool.add(record)
        record.advance(time.monotonic())
        log.debug("instance created", pool=spec.name, id=record.id, pod_uid=request.pod_uid)
        return record.view(), True

    def get(self, pool_name: str, instance_id: str) -> Instance:
        pool = self._pool(pool_name)
        record = pool.instances.get(instance_id)
        if record is None:
            raise _HttpError(404, "InstanceNotFound",
                             f"pool {pool_name}: no instance {instance_id!r}")
        record.advance(time.monotonic())
        return record.view()

    def delete(self, pool_name: str, instance_id: str) -> bool:
        """Delete an instance; ``False`` if there was none (the pool must exist)."""
        pool = self._pool(pool_name)
        record = pool.instances.get(instance_id)
        if record is None:
            return False
        pool.release(record)
        return True

    def list(self, pool_name: str) -> list[Instance]:
        pool = self._pool(pool_name)
        now = time.monotonic()
        out = []
        for instance_id in sorted(pool.instances):
            record = pool.instances[instance_id]
            record.advance(now)
            out.append(record.view())
        return out

    def capacity(self, pool_name: str) -> PoolCapacity:
        return self._pool(pool_name).capacity()

    # -- admin controls ------------------------------------------------------------------------

    def set_faults(self, pool: str | None = None, *, failure_rate: float | None = None,
                   down: bool | None = None, latency_seconds: float | None = None,
                   fail_next: int | None = None, reject_next: int | None = None) -> None:
        """Change faults of one pool, or of every pool (and the pool-less endpoints) when
        ``pool`` is ``None``. Arguments left ``None`` are unchanged."""
        if failure_rate is not None and not 0.0 <= failure_rate <= 1.0:
            raise ValueError("failureRate must be between 0 and 1")
        if latency_seconds is not None and latency_seconds < 0:
            raise ValueError("latencySeconds must not be negative")
        if fail_next is not None and fail_next < 0:
            raise ValueError("failNext must not be negative")
        if reject_next is not None and reject_next < 0:
            raise ValueError("rejectNext must not be negative")
        targets = [self._pool(pool).faults] if pool is not None else [
            self.global_faults, *(p.faults for p in self.pools.values())]
        for faults in targets:
            if failure_rate is not None:
                faults.failure_rate = failure_rate
            if down is not None:
                faults.down = down
            if latency_seconds is not None:
                faults.latency_seconds = latency_seconds
            if fail_next is not None:
                faults.fail_next = fail_next
            if reject_next is not None:
                faults.reject_next = reject_next

    def clear_faults(self) -> None:
        """Back to the pools' own failure rates, nothing down, no added latency."""
        self.global_faults = _Faults()
        for pool in self.pools.values():
            pool.faults = _Faults(failure_rate=pool.spec.failure_rate)

    def vanish(self, instance_id: str) -> bool:
        """Remove an instance behind the provider's back (as an out-of-band deletion)."""
        found = self._find(instance_id)
        if found is None:
            return False
        found[0].release(found[1])
        return True

    def finish(self, instance_id: str, phase: str, message: str = "") -> bool:
        """Move an instance to ``Failed`` or ``Succeeded``."""
        found = self._find(instance_id)
        if found is None:
            return False
        record = found[1]
        record.phase = phase
        record.message = message or ("failed by the simulator" if phase == FAILED
                                     else "completed")
        return True

    def stats(self) -> dict[str, Any]:
        """Contract requests that reached the server: in total and per pool and operation."""
        return {"requests": self.requests,
                "pools": {name: dict(pool.requests) for name, pool in self.pools.items()}}

    def reset_stats(self) -> None:
        self.requests = 0
        for pool in self.pools.values():
            pool.requests.clear()

    # -- HTTP ----------------------------------------------------------------------------------

    def _build_app(self) -> web.Application:
        app = web.Application(middlewares=[self._middleware])
        p = API_PREFIX
        r = app.router
        r.add_get("/healthz", self._healthz)
        r.add_get(f"{p}/pools", self._list_pools)
        r.add_get(p + "/pools/{pool}", self._capacity)
        r.add_post(p + "/pools/{pool}/instances", self._create)
        r.add_get(p + "/pools/{pool}/instances", self._list)
        r.add_get(p + "/pools/{pool}/instances/{id}", self._get)
        r.add_delete(p + "/pools/{pool}/instances/{id}", self._delete)
        r.add_get("/admin/stats", self._admin_stats)
        r.add_delete("/admin/stats", self._admin_reset_stats)
        r.add_get("/admin/faults", self._admin_get_faults)
        r.add_post("/admin/faults", self._admin_set_faults)
        r.add_delete("/admin/faults", self._admin_clear_faults)
        r.add_delete("/admin/instances/{id}", self._admin_vanish)
        r.add_post("/admin/instances/{id}/fail", self._admin_fail)
        r.add_post("/admin/instances/{id}/succeed", self._admin_succeed)
        return app

    @web.middleware
    async def _middleware(self, request: web.Request,
                          handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                          ) -> web.StreamResponse:
        try:
            if request.path == "/healthz":
                return await handler(request)
            admin = request.path.startswith("/admin/")
            if not admin:
                self.requests += 1
            if self.token is not None and request.headers.get(
                    "Authorization", "") != f"Bearer {self.token}":
                raise _HttpError(401, "Unauthorized", "missing or wrong bearer token")
            if admin:
                return await handler(request)
            pool_name = request.match_info.get("pool")
            pool = self.pools.get(pool_name) if pool_name is not None else None
            faults = pool.faults if pool is not None else self.global_faults
            if pool is not None:
                operation = _operation(request)
                pool.requests[operation] = pool.requests.get(operation, 0) + 1
            if faults.latency_seconds > 0:
                await asyncio.sleep(faults.latency_seconds)
            if faults.down:
                what = f"cloud pool {pool_name}" if pool_name else "cloud API"
                raise _HttpError(503, "Unavailable", f"{what} is down (simulated)")
            return await handler(request)
        except _HttpError as exc:
            return _json(exc.status, error_body(exc.status, exc.reason, exc.message))
        except web.HTTPException as exc:
            if exc.status < 400:
                raise
            reason = {404: "NotFound", 405: "MethodNotAllowed"}.get(exc.status, "InvalidRequest")
            return _json(exc.status, error_body(exc.status, reason,
                                                f"{request.method} {request.path}: {exc.reason}"))

    async def _healthz(self, request: web.Request) -> web.Response:
        return _json(200, {"ok": True})

    async def _list_pools(self, request: web.Request) -> web.Response:
        return _json(200, {"items": [encode_capacity(p.capacity())
                                     for p in self.pools.values()]})

    async def _capacity(self, request: web.Request) -> web.Response:
        return _json(200, encode_capacity(self.capacity(request.match_info["pool"])))

    async def _create(self, request: web.Request) -> web.Response:
        pool = self._pool(request.match_info["pool"])
        if pool.faults.fail_next > 0:
            pool.faults.fail_next -= 1
            raise _HttpError(503, "TransientFailure",
                             f"pool {pool.spec.name}: transient create failure (simulated)")
        if pool.faults.failure_rate > 0 and self.rng.random() < pool.faults.failure_rate:
            raise _HttpError(503, "TransientFailure",
                             f"pool {pool.spec.name}: transient create failure (simulated)")
        if pool.faults.reject_next > 0:
            pool.faults.reject_next -= 1
            raise _HttpError(409, "InsufficientCapacity",
                             f"pool {pool.spec.name}: no capacity for new instances in the "
                             f"region right now (simulated)")
        body = await _read_json(request)
        try:
            instance_request = decode_request(pool.spec.name, body)
        except ValueError as exc:
            raise _HttpError(400, "InvalidRequest", str(exc)) from None
        instance, created = self.create(instance_request)
        return _json(201 if created else 200, encode_instance(instance))

    async def _list(self, request: web.Request) -> web.Response:
        pool_name = request.match_info["pool"]
        items = self.list(pool_name)
        raw_limit = request.query.get("limit", str(DEFAULT_PAGE_SIZE))
        try:
            limit = int(raw_limit)
            if limit < 1:
                raise ValueError
        except ValueError:
            raise _HttpError(400, "InvalidRequest",
                             f"limit must be a positive integer, got {raw_limit!r}") from None
        limit = min(limit, MAX_PAGE_SIZE)
        after = request.query.get("continue", "")
        if after:
            if not after.startswith(f"{pool_name}-"):
                raise _HttpError(400, "InvalidRequest", f"invalid continue token {after!r}")
            items = [i for i in items if i.id > after]
        page = items[:limit]
        token = page[-1].id if len(items) > limit else ""
        return _json(200, {"items": [encode_instance(i) for i in page], "continue": token})

    async def _get(self, request: web.Request) -> web.Response:
        instance = self.get(request.match_info["pool"], request.match_info["id"])
        return _json(200, encode_instance(instance))

    async def _delete(self, request: web.Request) -> web.Response:
        pool, instance_id = request.match_info["pool"], request.match_info["id"]
        if not self.delete(pool, instance_id):
            raise _HttpError(404, "InstanceNotFound",
                             f"pool {pool}: no instance {instance_id!r}")
        return web.Response(status=204)

    async def _admin_stats(self, request: web.Request) -> web.Response:
        return _json(200, self.stats())

    async def _admin_reset_stats(self, request: web.Request) -> web.Response:
        self.reset_stats()
        return web.Response(status=204)

    def _faults_json(self) -> dict[str, Any]:
        return {"global": self.global_faults.as_json(),
                "pools": {name: p.faults.as_json() for name, p in self.pools.items()}}

    async def _admin_get_faults(self, request: web.Request) -> web.Response:
        return _json(200, self._faults_json())

    async def _admin_set_faults(self, request: web.Request) -> web.Response:
        body = await _read_json(request)
        if not isinstance(body, dict):
            raise _HttpError(400, "InvalidRequest", "body: expected a JSON object")
        unknown = set(body) - {"pool", "failureRate", "down", "latencySeconds", "failNext",
                               "rejectNext"}
        if unknown:
            raise _HttpError(400, "InvalidRequest",
                             f"body: unknown field(s): {', '.join(sorted(unknown))}")
        checks: dict[str, tuple[type, ...]] = {
            "pool": (str,), "failureRate": (int, float), "down": (bool,),
            "latencySeconds": (int, float), "failNext": (int,), "rejectNext": (int,)}
        for key, kinds in checks.items():
            v = body.get(key)
            if v is not None and (not isinstance(v, kinds)
                                  or (isinstance(v, bool) and bool not in kinds)):
                raise _HttpError(400, "InvalidRequest", f"body.{key}: wrong type")
        try:
            self.set_faults(
                body.get("pool"),
                failure_rate=None if body.get("failureRate") is None
                else float(body["failureRate"]),
                down=body.get("down"),
                latency_seconds=None if body.get("latencySeconds") is None
                else float(body["latencySeconds"]),
                fail_next=body.get("failNext"), reject_next=body.get("rejectNext"))
        except ValueError as exc:
            raise _HttpError(400, "InvalidRequest", f"body: {exc}") from None
        return _json(200, self._faults_json())

    async def _admin_clear_faults(self, request: web.Request) -> web.Response:
        self.clear_faults()
        return _json(200, self._faults_json())

    async def _admin_vanish(self, request: web.Request) -> web.Response:
        instance_id = request.match_info["id"]
        if not self.vanish(instance_id):
            raise _HttpError(404, "InstanceNotFound", f"no instance {instance_id!r}")
        return web.Response(status=204)

    async def _admin_finish(self, request: web.Request, phase: str) -> web.Response:
        instance_id = request.match_info["id"]
        message = ""
        if request.can_read_body:
            body = await _read_json(request)
            if isinstance(body, dict) and isinstance(body.get("message"), str):
                message = body["message"]
        if not self.finish(instance_id, phase, message):
            raise _HttpError(404, "InstanceNotFound", f"no instance {instance_id!r}")
        found = self._find(instance_id)
        assert found is not None
        return _json(200, encode_instance(found[1].view()))

    async def _admin_fail(self, request: web.Request) -> web.Response:
        return await self._admin_finish(request, FAILED)

    async def _admin_succeed(self, request: web.Request) -> web.Response:
        return await self._admin_finish(request, SUCCEEDED)


def _operation(request: web.Request) -> str:
    if "id" in request.match_info:
        return "delete" if request.method == "DELETE" else "get"
    if request.path.endswith("/instances"):
        return "create" if request.method == "POST" else "list"
    return "capacity"


async def _read_json(request: web.Request) -> Any:
    raw = await request.read()
    if not raw.strip():
        raise _HttpError(400, "InvalidRequest", "body: a JSON object is required")
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise _HttpError(400, "InvalidRequest", f"body is not JSON: {exc}") from None


# -- serving -----------------------------------------------------------------------------------

class CloudSimServer:
    """Serve a :class:`SimCloud` over HTTP from the running event loop."""

    def __init__(self, sim: SimCloud, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.sim = sim
        self.host = host
        self.port = port
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    async def start(self) -> str:
        """Listen and return the base URL (``http://127.0.0.1:<port>``)."""
        runner = web.AppRunner(self.sim.app, access_log=None, handle_signals=False,
                               shutdown_timeout=0.5)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port, reuse_address=True)
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        server = site._server
        assert server is not None and server.sockets  # type: ignore[attr-defined]
        self.port = int(server.sockets[0].getsockname()[1])  # type: ignore[attr-defined]
        return self.url

    async def stop(self) -> None:
        """Stop listening; requests in flight get half a second to finish. Idempotent."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


class BackgroundCloudSim:
    """A :class:`SimCloud` served from a thread of its own, for synchronous callers::

        with BackgroundCloudSim([PoolSpec("aci", "azure")]) as cloud:
            adapter = HttpCloudAdapter(cloud.url)     # used from any other loop
            cloud.call(lambda: cloud.sim.set_faults("aci", down=True))
    """

    def __init__(self, pools: Sequence[PoolSpec] | None = None, *, token: str | None = None,
                 seed: int | None = None, host: str = "127.0.0.1", port: int = 0) -> None:
        self.sim = SimCloud(pools, token=token, seed=seed)
        self.server = CloudSimServer(self.sim, host=host, port=port)
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="cloud-sim",
                                        daemon=True)
        self.url = ""

    def __enter__(self) -> BackgroundCloudSim:
        self._thread.start()
        try:
            self.url = asyncio.run_coroutine_threadsafe(self.server.start(),
                                                        self.loop).result(30)
        except BaseException:
            self._shutdown()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self.server.stop(), self.loop).result(10)
        self._shutdown()

    def _shutdown(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()

    def call(self, fn: Callable[[], T], timeout: float = 10) -> T:
        """Run ``fn`` on the simulator's loop (where its state lives) and return its result."""
        async def run() -> T:
            return fn()
        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout)

    def stats(self) -> dict[str, Any]:
        return self.call(self.sim.stats)


# -- command line ------------------------------------------------------------------------------

def serve_command(args: argparse.Namespace) -> int:
    """``cloud-sim serve``: run the simulated cloud until SIGINT/SIGTERM. Prints
    ``listening on http://...`` first. Exit code 2 for a bad cloud file or address."""
    prog = "pyscheduler cloud-sim serve"
    try:
        pools = load_cloud_file(args.pools) if args.pools else default_pools()
        sim = SimCloud(pools, token=args.token or os.environ.get("PYSCHEDULER_CLOUD_TOKEN"),
                       seed=args.seed)
    except (CloudConfigError, ValueError) as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2

    async def run() -> int:
        stop = stop_on_signals()
        server = CloudSimServer(sim, host=args.host, port=args.port)
        try:
            url = await server.start()
        except OSError as exc:
            print(f"{prog}: cannot listen on {args.host}:{args.port}: "
                  f"{exc.strerror or exc}", file=sys.stderr)
            return 2
        print(f"listening on {url}", flush=True)
        for pool in sim.pools.values():
            s = pool.spec
            print(f"  pool {s.name} ({s.platform}): {s.cpu_millis / 1000:g} CPU, "
                  f"{s.memory_bytes / GIB:g}Gi, {s.instances} instances, largest "
                  f"{s.max_instance_cpu_millis / 1000:g} CPU/"
                  f"{s.max_instance_memory_bytes / GIB:g}Gi, addresses {pool.prefix}*",
                  flush=True)
        try:
            await stop.wait()
        finally:
            log.info("stopping simulated cloud")
            await server.stop()
        return 0

    return asyncio.run(run())


def add_cli(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``cloud-sim serve --host --port --pools FILE [--token] [--seed]``."""
    cloud = subparsers.add_parser("cloud-sim", help="the simulated cloud (container instances)")
    sub = cloud.add_subparsers(dest="cloud_sim_command", required=True)
    serve = sub.add_parser("serve", help="serve the simulated cloud API until interrupted")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=0, help="port (default: any free port)")
    serve.add_argument("--pools", metavar="FILE", default=None,
                       help="cloud file (YAML, cloudPools); default: pools aci (azure) and "
                            "eci (alibaba)")
    serve.add_argument("--token", default=None,
                       help="require this bearer token (or $PYSCHEDULER_CLOUD_TOKEN); "
                            "default: no authentication")
    serve.add_argument("--seed", type=int, default=None,
                       help="seed for simulated failures (reproducible runs)")
    serve.set_defaults(func=serve_command)

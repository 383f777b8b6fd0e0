"""Values shared by the cloud adapter, the simulated IaaS, the provider and the scheduler.

The adapter protocol (:class:`CloudAdapter`) is what a thin gateway in front of any real cloud
implements (over the JSON REST contract in ``docs/cloud-api.md``). Quantities are integers:
CPU in millicores, memory in bytes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pyscheduler.framework.pod import PodInfo
    from pyscheduler.kube.client import KubeClient
    from pyscheduler.kube.events import EventRecorder
    from pyscheduler.metrics import SchedulerMetrics

__all__ = [
    "CloudAdapter",
    "Placement",
    "CloudError",
    "ContainerSpec",
    "Instance",
    "InstanceRequest",
    "PoolCapacity",
]

# Instance phases, as the cloud reports them.
PENDING, RUNNING, SUCCEEDED, FAILED = "Pending", "Running", "Succeeded", "Failed"


class CloudError(Exception):
    """A cloud call that failed. ``kind``: ``unavailable`` (timeout, connection refused, 5xx,
    circuit open: retry later), ``rejected`` (4xx: the request itself is wrong or over quota —
    ``reason`` says which, e.g. ``QuotaExceeded``, ``LimitExceeded``, ``InvalidRequest``),
    ``not_found``."""

    def __init__(self, kind: str, message: str, *, reason: str = "",
                 status: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.reason = reason
        self.status = status
        self.message = message


@dataclass(frozen=True, slots=True)
class ContainerSpec:
    name: str
    image: str
    command: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cpu_millis: int = 0       # requests (limits normalized to requests)
    memory_bytes: int = 0


@dataclass(frozen=True, slots=True)
class InstanceRequest:
    """A container-instance request made from a pod. ``pod_uid`` is the idempotency key: a
    second create with the same uid returns the existing instance."""

    pool: str
    pod_uid: str
    namespace: str
    name: str
    containers: tuple[ContainerSpec, ...]
    tags: Mapping[str, str] = field(default_factory=dict)

    @property
    def cpu_millis(self) -> int:
        return sum(c.cpu_millis for c in self.containers)

    @property
    def memory_bytes(self) -> int:
        return sum(c.memory_bytes for c in self.containers)


@dataclass(frozen=True, slots=True)
class Instance:
    id: str
    pool: str
    pod_uid: str
    namespace: str
    name: str
    phase: str                # Pending | Running | Succeeded | Failed
    ip: str = ""
    message: str = ""
    created_at: float = 0.0   # unix seconds
    started_at: float = 0.0
    cpu_millis: int = 0
    memory_bytes: int = 0
    price_per_hour: float = 0.0
    containers: tuple[tuple[str, bool, int], ...] = ()  # (name, ready, restarts)


@dataclass(frozen=True, slots=True)
class PoolCapacity:
    """A pool's quota and use, and the largest instance it accepts."""

    pool: str
    platform: str
    cpu_millis: int
    memory_bytes: int
    instances: int
    used_cpu_millis: int
    used_memory_bytes: int
    used_instances: int
    max_instance_cpu_millis: int
    max_instance_memory_bytes: int
    price_per_cpu_hour: float = 0.0
    price_per_gib_hour: float = 0.0


class CloudAdapter(Protocol):
    """What the provider and the scheduler need from a cloud. Every method raises
    :class:`CloudError` on failure."""

    async def create(self, request: InstanceRequest) -> Instance: ...
    async def delete(self, pool: str, instance_id: str) -> None: ...   # idempotent
    async def get(self, pool: str, instance_id: str) -> Instance: ...  # not_found when gone
    async def list(self, pool: str) -> Sequence[Instance]: ...
    async def capacity(self, pool: str) -> PoolCapacity: ...
    async def close(self) -> None: ...


class Placement(Protocol):
    """What the virtual package (the rebalancer, refusal handling) asks of the scheduler. The
    scheduler implements it; nothing here imports the scheduler."""

    #: The scheduler's name (its first profile's), which its events and lease carry.
    name: str
    #: Every profile's scheduler name: only pods with one of them are ever moved.
    names: frozenset[str]
    client: KubeClient
    recorder: EventRecorder
    metrics: SchedulerMetrics | None

    async def try_placement(self, pod: PodInfo) -> str | None:
        """The real node the scheduler would choose for ``pod`` now (its fragment included),
        or None; nothing is assumed."""

    def reserve(self, pod: PodInfo, node: str) -> bool:
        """Hold ``pod``'s requests on ``node`` (an assumed placeholder), so that no pod
        scheduled meanwhile takes them; False when that cannot be done."""

    def release(self, uid: str) -> None:
        """Drop the placeholder held for ``uid``."""

    def most_room(self) -> tuple[int, int]:
        """The most free cpu (millicores) and the most free memory (bytes) on any one real
        node (not necessarily the same node)."""

    def pool_refused(self, node: str, cpu_millis: int, memory_bytes: int,
                     until: float) -> None:
        """The pool of virtual node ``node`` kept refusing an instance this large: pods at
        least as large skip it until ``until`` (``time.monotonic()``)."""

    def pool_price(self, pool: str) -> float:
        """The pool's price per CPU-hour, as its virtual node reports it (0 when unknown)."""

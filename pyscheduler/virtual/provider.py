"""The virtual-kubelet *pod* role: run the pods bound to virtual nodes as cloud instances.

For every pod bound to a virtual node (``spec.nodeName`` = ``wssp-virtual-<pool>``) the provider
creates one container instance in that pool through the :class:`CloudAdapter`, reports the
instance's life back into the pod's status, deletes the instance when the pod goes, and
removes the pod object once the instance is gone — what a kubelet does for a real node.

Design
------
* **Kubernetes here, the cloud behind the adapter.** As in virtual-kubelet
  (``node/podcontroller.go`` + a small provider interface), everything Kubernetes-facing —
  informers, the work queue, status patches through ``pods/status``, events, retries — lives in
  this module; the adapter only creates, gets, lists and deletes instances. The mapping lives
  in pure modules, unit-tested without any I/O: :mod:`~pyscheduler.virtual.conversion`
  (pod → :class:`InstanceRequest`) and :mod:`~pyscheduler.virtual.podstatus` (instance → pod
  status); the keyed queue is :mod:`~pyscheduler.virtual.workqueue`.
* **Errors are classified, as virtual-kubelet classifies them**, from :class:`CloudError.kind`:
  ``rejected`` (and ``not_found`` on create: the request itself is wrong, e.g. over quota) is
  retried with exponential backoff ``create_retries`` times, the pod showing reason
  ``ProviderFailed`` meanwhile, and then the pod is marked Failed (reason ``ProviderFailed``) so
  its controller replaces it — the ``on_create_failed`` hook then runs (the scheduler side uses
  it to try another pool). ``unavailable`` (and timeouts, and anything unexpected) is retried
  with backoff forever: a cloud outage must never lose a pod.
* **One work queue keyed by pod UID** (client-go's workqueue semantics: a key is processed by
  one worker at a time; a change during processing queues it once more). The UID, not the name,
  is the identity, because it is also the cloud's idempotency key: creating twice for one UID
  returns the same instance, so a retry after a timeout, or a restart in the middle of a burst,
  never duplicates an instance.
* **State is rebuilt, never trusted.** The instance of a pod is recorded on the pod
  (annotation ``wssp/cloud-instance: <pool>/<id>``, in the first status write: ``pods/status``
  takes metadata changes, as in Kubernetes); after a restart the provider rebuilds its
  state from the pods (informers) and from ``adapter.list()``, adopting an instance created
  before the annotation was written. A pod with the annotation whose instance no longer exists
  is marked Failed with reason ``NotFound`` (the instance vanished: its controller replaces it).
* **No instance without a pod.** A pod deleted (even force-deleted) while its instance is being
  created has the instance deleted as soon as the create returns (the queue runs the pod's key
  again); if the outcome of a create is unknown (a timeout) the pool is listed by pod UID. As a
  safety net the reconciler, every ``reconcile_seconds``, deletes any instance whose pod has not
  existed for ``orphan_grace_seconds`` (after checking the API server itself, so a slow
  informer cannot cost a running pod its instance).
* **Status by polling, batched per pool.** Instances are listed per pool (one call per pool,
  however many pods): every ``status_poll_seconds`` while some instance is still Pending, and
  every ``reconcile_seconds`` in any case. Only a changed status is written. A finished instance
  (Succeeded/Failed) makes the pod Succeeded/Failed and is then deleted to free the quota; the
  pod object stays for its controller, as on a real node.
* **Events in one format.** Every create/delete outcome is a pod event with reason
  ``ProviderCreate``/``ProviderCreateFailed``/``ProviderDelete``/``ProviderDeleteFailed`` (and
  ``ProviderInstanceNotFound`` for a vanished instance) and the note
  ``"<op> instance <id> in pool <pool>: <result>"`` (:func:`event_note`).

Every cloud call is bounded by ``cloud_timeout_seconds``; every task is cancelled by
:meth:`VirtualPodProvider.stop`.
"""

from __future__ import annotations

import asyncio
import collections
import datetime as dt
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn, Protocol

import structlog

from pyscheduler.api.names import INSTANCE_ANNOTATION
from pyscheduler.api.quantity import value
from pyscheduler.api.times import utcnow
from pyscheduler.kube.client import KubeClient, api_path
from pyscheduler.kube.errors import ConflictError, KubeError, NotFoundError
from pyscheduler.kube.events import EventRecorder, EventType
from pyscheduler.kube.informer import Handlers, Informer
from pyscheduler.kube.tasks import bounded, cancel_and_wait
from pyscheduler.virtual.conversion import PodConversionError, build_instance_request
from pyscheduler.virtual.node import PoolConfig, describe_cloud_failure
from pyscheduler.virtual.podstatus import (
    instance_pod_status,
    lost_pod_status,
    merged_status_key,
    provider_failed_status,
    status_key,
)
from pyscheduler.virtual.types import (
    FAILED,
    PENDING,
    RUNNING,
    SUCCEEDED,
    CloudAdapter,
    CloudError,
    Instance,
)
from pyscheduler.virtual.workqueue import WorkQueue

__all__ = [
    "ACTION_CREATE",
    "ACTION_DELETE",
    "ACTION_GET",
    "METRIC_NAMES",
    "OnCreateFailed",
    "ProviderMetrics",
    "REASON_CREATE",
    "REASON_RUNNING",
    "REASON_CREATE_FAILED",
    "REASON_DELETE",
    "REASON_DELETE_FAILED",
    "REASON_INSTANCE_NOT_FOUND",
    "REASON_UNSUPPORTED",
    "VirtualPodProvider",
    "event_note",
    "parse_instance_annotation",
]

log = structlog.get_logger("pyscheduler.virtual.provider")

Obj = dict[str, Any]
OnCreateFailed = Callable[[Obj], Awaitable[None]]


# Pod event reasons and actions (events.k8s.io ``reason``/``action``).
REASON_CREATE = "ProviderCreate"
REASON_CREATE_FAILED = "ProviderCreateFailed"
REASON_DELETE = "ProviderDelete"
REASON_DELETE_FAILED = "ProviderDeleteFailed"
REASON_INSTANCE_NOT_FOUND = "ProviderInstanceNotFound"
REASON_UNSUPPORTED = "ProviderUnsupported"
REASON_RUNNING = "ProviderRunning"
ACTION_CREATE = "CreateInstance"
ACTION_DELETE = "DeleteInstance"
ACTION_GET = "GetInstance"

# Counter names, as kept in ``VirtualPodProvider.counters`` (and ``pool_counters``).
METRIC_INSTANCES_CREATED = "instances_created"
METRIC_CREATE_FAILURES = "instance_create_failures"
METRIC_INSTANCES_DELETED = "instances_deleted"
METRIC_DELETE_FAILURES = "instance_delete_failures"
METRIC_ORPHANS_COLLECTED = "orphans_collected"
METRIC_PODS_FAILED = "pods_failed_provider"
METRIC_PODS_LOST = "pods_instance_lost"
METRIC_NAMES = (METRIC_INSTANCES_CREATED, METRIC_CREATE_FAILURES, METRIC_INSTANCES_DELETED,
                METRIC_DELETE_FAILURES, METRIC_ORPHANS_COLLECTED, METRIC_PODS_FAILED,
                METRIC_PODS_LOST)

_TERMINAL = ("Succeeded", "Failed")


class _CounterChild(Protocol):
    def inc(self, amount: float = ...) -> None: ...


class _GaugeChild(Protocol):
    def set(self, value: float) -> None: ...


class _CounterFamily(Protocol):
    def labels(self, *labelvalues: Any) -> _CounterChild: ...


class _GaugeFamily(Protocol):
    def labels(self, *labelvalues: Any) -> _GaugeChild: ...


class ProviderMetrics(Protocol):
    """The Prometheus families the provider writes (``pyscheduler.metrics.SchedulerMetrics``
    has them; this package may not import it): orphans collected per pool, pods on virtual
    nodes per pool and phase, the hourly price of the instances alive per pool, and the
    instances currently seen without a pod per pool."""

    @property
    def cloud_orphans_collected(self) -> _CounterFamily: ...   # labels: pool

    @property
    def virtual_pods(self) -> _GaugeFamily: ...                # labels: pool, phase

    @property
    def cloud_cost_per_hour(self) -> _GaugeFamily: ...         # labels: pool

    @property
    def cloud_orphan_instances(self) -> _GaugeFamily: ...      # labels: pool


def event_note(op: str, instance_id: str, pool: str, result: str) -> str:
    """The one format of every provider event note:
    ``"<op> instance <id> in pool <pool>: <result>"`` (``-`` while the cloud has assigned no
    id)."""
    return f"{op} instance {instance_id or '-'} in pool {pool}: {result}"


def parse_instance_annotation(pod: Obj) -> tuple[str, str] | None:
    """``(pool, instance id)`` from the pod's ``wssp/cloud-instance`` annotation, if any."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    raw = annotations.get(INSTANCE_ANNOTATION)
    if not isinstance(raw, str) or "/" not in raw:
        return None
    pool, _, instance_id = raw.partition("/")
    return (pool, instance_id) if pool and instance_id else None


def _rejected(exc: BaseException) -> bool:
    """Whether a failed create will fail the same way again (the request is wrong), as opposed
    to a cloud that is unavailable for now."""
    return isinstance(exc, CloudError) and exc.kind in ("rejected", "not_found")


# -- the work queue -----------------------------------------------------------------------------

class _Retry(Exception):
    """Internal: run this pod's key again after ``delay`` seconds."""

    def __init__(self, delay: float) -> None:
        super().__init__(f"retry in {delay:.2f}s")
        self.delay = delay


@dataclass(eq=False)
class _Tracked:
    """What the provider knows about one pod (by UID)."""

    uid: str
    namespace: str
    name: str
    pool: PoolConfig
    instance_id: str = ""
    instance: Instance | None = None     # last seen state of the instance
    known_at: float = 0.0                # clock() when instance_id became known
    seen_at: float = 0.0                 # clock() when `instance` was read
    annotated: bool = False
    # The last status written: (what the pod reported then, what it reports after the write).
    # While the informer still shows the former, the write is in flight, not lost.
    written: tuple[tuple[Any, ...], tuple[Any, ...]] | None = None
    create_attempted: bool = False
    rejections: int = 0
    unavailable: int = 0
    next_create: float = 0.0
    errors: int = 0                      # consecutive failed syncs, for the backoff
    gave_up: bool = False
    failure: str = ""                    # why we gave up
    hooked: bool = False                 # on_create_failed has run
    released: bool = False               # the instance is deleted (or never existed)
    suspect: bool = False                # the last list did not show the instance
    warned: bool = False

    def reference(self) -> Obj:
        return {"apiVersion": "v1", "kind": "Pod", "namespace": self.namespace,
                "name": self.name, "uid": self.uid}




def _uid(pod: Obj) -> str:
    return str((pod.get("metadata") or {}).get("uid") or "")


def _terminating(pod: Obj) -> bool:
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def _phase(pod: Obj) -> str:
    return str((pod.get("status") or {}).get("phase") or "")


# -- the provider -------------------------------------------------------------------------------

class VirtualPodProvider:
    """Run the pods bound to the virtual nodes of ``pools`` as cloud instances; see the module
    docstring.

    ``recorder`` receives the pod events (none without it). ``metrics`` (see
    :class:`ProviderMetrics`) receives the orphans collected and, at each pool listing, the
    pods per phase and the hourly price of the live instances. Every count
    (:data:`METRIC_NAMES`) is also kept in :attr:`counters` (and per pool in
    :attr:`pool_counters`). ``on_create_failed(pod)`` runs once, after a pod was marked Failed
    because the cloud kept refusing its instance (or the pod cannot run as one); exceptions in
    it are logged. It is where the scheduler side can try another pool. ``create_retries`` is
    the number of retries after the first refused create. Backoff starts at
    ``retry_backoff_seconds`` and doubles up to ``retry_backoff_max_seconds`` (with jitter).
    ``workers`` pods are handled concurrently; ``status_poll_seconds`` is how often a pool with
    a Pending instance is listed. ``clock`` (monotonic seconds) drives grace periods and
    backoff; ``wall_clock`` stamps statuses. ``pods``, an informer of every pod that its owner
    runs (the scheduler's), is shared instead of watching each virtual node's pods again.
    """

    def __init__(self, client: KubeClient, adapter: CloudAdapter, pools: Sequence[PoolConfig],
                 *, recorder: EventRecorder | None = None, orphan_grace_seconds: float = 60.0,
                 reconcile_seconds: float = 10.0, create_retries: int = 3,
                 metrics: ProviderMetrics | None = None,
                 on_create_failed: OnCreateFailed | None = None,
                 status_poll_seconds: float = 1.0, retry_backoff_seconds: float = 1.0,
                 retry_backoff_max_seconds: float = 30.0, cloud_timeout_seconds: float = 30.0,
                 workers: int = 16, clock: Callable[[], float] = time.monotonic,
                 wall_clock: Callable[[], dt.datetime] = utcnow,
                 rng: random.Random | None = None, pods: Informer | None = None) -> None:
        if not pools:
            raise ValueError("at least one pool is needed")
        if len({p.name for p in pools}) != len(pools):
            raise ValueError("pool names must be unique")
        if min(reconcile_seconds, status_poll_seconds, retry_backoff_seconds,
               cloud_timeout_seconds) <= 0:
            raise ValueError("reconcile_seconds, status_poll_seconds, retry_backoff_seconds and "
                             "cloud_timeout_seconds must be positive")
        if retry_backoff_max_seconds < retry_backoff_seconds:
            raise ValueError("retry_backoff_max_seconds must be at least retry_backoff_seconds")
        if orphan_grace_seconds < 0 or create_retries < 0 or workers < 1:
            raise ValueError("orphan_grace_seconds and create_retries must not be negative, "
                             "workers must be at least 1")
        self.client = client
        self.adapter = adapter
        self.pools = tuple(pools)
        self.recorder = recorder
        self.metrics = metrics
        self.on_create_failed = on_create_failed
        self.orphan_grace_seconds = orphan_grace_seconds
        self.reconcile_seconds = reconcile_seconds
        self.status_poll_seconds = status_poll_seconds
        self.create_retries = create_retries
        self.retry_backoff_seconds = retry_backoff_seconds
        self.retry_backoff_max_seconds = retry_backoff_max_seconds
        self.cloud_timeout_seconds = cloud_timeout_seconds
        self.workers = workers
        self._clock = clock
        self._wall_clock = wall_clock
        self._rng = rng or random.Random()
        self._by_node = {p.node_name: p for p in pools}
        self.counters: collections.Counter[str] = collections.Counter(
            {name: 0 for name in METRIC_NAMES})
        self.pool_counters: dict[str, collections.Counter[str]] = {
            p.name: collections.Counter() for p in pools}
        self._pods: dict[str, Obj] = {}                    # uid -> pod, from the informers
        self._tracked: dict[str, _Tracked] = {}            # uid -> state
        self._listed: dict[str, dict[str, Instance]] = {}  # pool -> pod uid -> instance
        self._orphans: dict[tuple[str, str], float] = {}   # (pool, id) -> first seen
        self._deleted: dict[tuple[str, str], float] = {}   # (pool, id) -> when we deleted it
        self._queue: WorkQueue | None = None
        self._primed: asyncio.Event | None = None
        self._informers: list[Informer] = []
        # An informer of every pod that someone else runs (the scheduler's): the provider then
        # takes the virtual nodes' pods from it instead of watching them a second time.
        self._shared = pods
        self._subscription: Handlers | None = None
        self._tasks: list[asyncio.Task[None]] = []

    # -- lifecycle -----------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return bool(self._tasks)

    @property
    def tasks(self) -> dict[str, asyncio.Task[None]]:
        """The long-lived tasks while started, for the process to watch."""
        return {task.get_name(): task for task in self._tasks}

    async def start(self) -> None:
        """Start the informers, the workers and the reconciler. Returns at once; work begins
        when the informers have synced and the pools have been listed once (see
        :meth:`wait_primed`)."""
        if self._tasks:
            return
        loop = asyncio.get_running_loop()
        # Every start rebuilds the state from the API server and the cloud.
        self._pods.clear()
        self._tracked.clear()
        self._listed.clear()
        self._orphans.clear()
        self._queue = WorkQueue()
        self._primed = asyncio.Event()
        if self._shared is not None:
            self._subscription = self._shared.add_handlers(
                on_add=self._on_shared_pod, on_update=self._on_shared_pod_update,
                on_delete=self._on_shared_pod_delete)
        else:
            self._informers = [
                Informer(self.client, api_path("v1", "pods"),
                         field_selector=f"spec.nodeName={p.node_name}", on_add=self._on_pod,
                         on_update=self._on_pod_update, on_delete=self._on_pod_delete,
                         name=f"virtual pods {p.node_name}")
                for p in self.pools]
            for informer in self._informers:
                informer.start()
        self._tasks = [loop.create_task(self._run(), name="virtual provider reconciler")]
        self._tasks += [loop.create_task(self._worker(), name=f"virtual provider worker {i}")
                        for i in range(self.workers)]

    async def wait_primed(self, timeout: float | None = None) -> bool:
        """Wait until the provider has rebuilt its state and works; False on timeout."""
        if self._primed is None:
            return False
        try:
            await bounded(self._primed.wait(), timeout)
            return True
        except asyncio.TimeoutError:
            return False

    async def stop(self) -> None:
        """Stop every task (a create in flight is abandoned: its instance is adopted, or
        collected, by the next run). The cloud adapter is the caller's to close."""
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            await cancel_and_wait(task)
        for informer in self._informers:
            await informer.stop()
        self._informers = []
        if self._shared is not None and self._subscription is not None:
            self._shared.remove_handlers(self._subscription)
            self._subscription = None
        if self._queue is not None:
            self._queue.close()

    # -- informer handlers (quick, on the loop) ------------------------------------------------

    def _on_pod(self, pod: Obj) -> None:
        uid = _uid(pod)
        if uid and self._queue is not None:
            self._pods[uid] = pod
            self._queue.add(uid)

    def _on_pod_update(self, old: Obj, new: Obj) -> None:
        self._on_pod(new)

    def _on_pod_delete(self, pod: Obj) -> None:
        uid = _uid(pod)
        if uid and self._queue is not None:
            self._pods.pop(uid, None)
            self._queue.add(uid)

    def _on_virtual_node(self, pod: Obj) -> bool:
        return (pod.get("spec") or {}).get("nodeName") in self._by_node

    # The shared informer holds every pod; a pod's node never changes once it is bound, so
    # the virtual nodes' pods are those whose spec.nodeName names one.

    def _on_shared_pod(self, pod: Obj) -> None:
        if self._on_virtual_node(pod):
            self._on_pod(pod)

    def _on_shared_pod_update(self, old: Obj, new: Obj) -> None:
        if self._on_virtual_node(new):
            self._on_pod(new)

    def _on_shared_pod_delete(self, pod: Obj) -> None:
        if self._on_virtual_node(pod):
            self._on_pod_delete(pod)

    # -- bookkeeping ---------------------------------------------------------------------------

    def _count(self, name: str, pool: str, amount: int = 1) -> None:
        self.counters[name] += amount
        self.pool_counters[pool][name] += amount
        if name == METRIC_ORPHANS_COLLECTED and self.metrics is not None:
            self.metrics.cloud_orphans_collected.labels(pool).inc(amount)

    def _export_gauges(self, pool: PoolConfig, instances: Sequence[Instance]) -> None:
        """Pods per phase and the price of the live instances, for one pool."""
        if self.metrics is None:
            return
        phases = collections.Counter(
            _phase(p) or "Pending" for p in self._pods.values() if self._pool_of(p) is pool)
        for phase in ("Pending", "Running", "Succeeded", "Failed"):
            self.metrics.virtual_pods.labels(pool.name, phase).set(phases.get(phase, 0))
        cost = sum(i.price_per_hour for i in instances if i.phase in (PENDING, RUNNING))
        self.metrics.cloud_cost_per_hour.labels(pool.name).set(cost)
        self.metrics.cloud_orphan_instances.labels(pool.name).set(
            sum(1 for key in self._orphans if key[0] == pool.name))

    def _event(self, regarding: Obj, type_: EventType, reason: str, action: str,
               note: str) -> None:
        if self.recorder is not None:
            self.recorder.record(regarding, type_=type_, reason=reason, action=action, note=note)

    def _backoff(self, failures: int) -> float:
        nominal = min(self.retry_backoff_seconds * 2.0 ** max(failures - 1, 0),
                      self.retry_backoff_max_seconds)
        return min(nominal * (0.75 + 0.5 * self._rng.random()), self.retry_backoff_max_seconds)

    def _pool_of(self, pod: Obj) -> PoolConfig | None:
        return self._by_node.get(str((pod.get("spec") or {}).get("nodeName") or ""))

    def _track(self, pod: Obj, pool: PoolConfig) -> _Tracked:
        meta = pod["metadata"]
        st = _Tracked(uid=meta["uid"], namespace=str(meta.get("namespace") or "default"),
                      name=str(meta.get("name") or ""), pool=pool)
        listed = self._listed.get(pool.name, {}).get(st.uid)
        recorded = parse_instance_annotation(pod)
        if recorded is not None:
            if recorded[0] != pool.name:
                log.warning("instance annotation names another pool; using the node's pool",
                            pod=f"{st.namespace}/{st.name}", annotation=recorded[0],
                            pool=pool.name)
            st.instance_id = recorded[1]
            st.annotated = True
            st.create_attempted = True
        elif listed is not None:
            # Created before a restart, before the annotation was written: adopt it.
            st.instance_id = listed.id
        if st.instance_id:
            st.known_at = self._clock()
            if listed is not None and listed.id == st.instance_id:
                st.instance = listed
                st.seen_at = self._clock()
            elif (_phase(pod) in _TERMINAL and recorded is not None
                  and pool.name in self._listed):
                # A finished pod whose instance the last (successful) list no longer shows:
                # already released, so a restart does not delete every finished pod again.
                st.released = True
        self._tracked[st.uid] = st
        return st

    # -- the workers ---------------------------------------------------------------------------

    async def _worker(self) -> None:
        assert self._queue is not None and self._primed is not None
        await self._primed.wait()
        queue = self._queue
        while True:
            uid = await queue.get()
            try:
                await self._sync(uid)
                st = self._tracked.get(uid)
                if st is not None:
                    st.errors = 0
            except asyncio.CancelledError:
                raise
            except _Retry as retry:
                queue.add_after(uid, retry.delay)
            except Exception as exc:
                st = self._tracked.get(uid)
                errors = 1
                if st is not None:
                    st.errors += 1
                    errors = st.errors
                delay = self._backoff(errors)
                if isinstance(exc, KubeError):
                    log.warning("pod sync failed; will retry", uid=uid, error=str(exc),
                                retry_in=round(delay, 2))
                else:
                    log.exception("pod sync failed unexpectedly; will retry", uid=uid)
                queue.add_after(uid, delay)
            finally:
                queue.done(uid)

    async def _sync(self, uid: str) -> None:
        """Bring one pod and its instance in line. Raises :class:`_Retry` or a KubeError to be
        run again later."""
        pod = self._pods.get(uid)
        st = self._tracked.get(uid)
        if pod is None:
            if st is not None:
                await self._release(st, "pod deleted")
                self._tracked.pop(uid, None)
            return
        pool = self._pool_of(pod)
        if pool is None:
            return
        if st is None:
            st = self._track(pod, pool)
        if _terminating(pod):
            await self._release(st, "pod deleted")
            await self._remove_pod(pod)
            return
        if _phase(pod) in _TERMINAL:
            if st.instance_id and not st.released:
                await self._release(st, f"pod {_phase(pod)}")
            return
        listed = self._listed.get(pool.name, {}).get(uid)
        if not st.instance_id and listed is not None:
            # A create whose answer was lost (a timeout) did happen: adopt its instance.
            st.instance_id, st.instance = listed.id, listed
            st.known_at = st.seen_at = self._clock()
            st.create_attempted = True
        if not st.instance_id:
            if not await self._create(pod, st):
                return
            current = self._pods.get(uid)
            if current is None or _terminating(current):
                return  # the key runs again (the handler queued it): the instance goes then
            pod = current
        instance = await self._instance(st)
        if instance is None:
            await self._mark_lost(pod, st)
            return
        await self._write_status(pod, st, instance)
        if instance.phase in (SUCCEEDED, FAILED):
            await self._release(st, f"instance {instance.phase}")

    # -- create --------------------------------------------------------------------------------

    async def _create(self, pod: Obj, st: _Tracked) -> bool:
        """Create the pod's instance; True when it exists now."""
        if st.gave_up:
            await self._finish_give_up(pod, st)
            return False
        wait = st.next_create - self._clock()
        if wait > 0:
            raise _Retry(wait)
        pool = st.pool.name
        try:
            conversion = build_instance_request(pod, pool)
        except PodConversionError as exc:
            self._event(pod, "Warning", REASON_CREATE_FAILED, ACTION_CREATE,
                        event_note("create", "", pool, f"invalid pod: {exc}"))
            await self._give_up(pod, st, f"the pod cannot run as a cloud instance: {exc}")
            return False
        if conversion.skipped and not st.warned:
            st.warned = True
            self._event(pod, "Warning", REASON_UNSUPPORTED, ACTION_CREATE,
                        "; ".join(conversion.skipped))
        st.create_attempted = True
        try:
            instance = await bounded(self.adapter.create(conversion.request),
                                     self.cloud_timeout_seconds)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            await self._create_failed(pod, st, exc)
            return False
        st.instance_id = instance.id
        st.instance = instance
        st.known_at = st.seen_at = self._clock()
        st.rejections = st.unavailable = 0
        st.released = False
        self._count(METRIC_INSTANCES_CREATED, pool)
        self._event(pod, "Normal", REASON_CREATE, ACTION_CREATE,
                    event_note("create", instance.id, pool, f"created ({instance.phase})"))
        log.info("instance created", pod=f"{st.namespace}/{st.name}", pool=pool,
                 instance=instance.id, phase=instance.phase)
        return True

    async def _create_failed(self, pod: Obj, st: _Tracked, exc: BaseException) -> None:
        pool = st.pool.name
        what = describe_cloud_failure(exc)
        self._count(METRIC_CREATE_FAILURES, pool)
        if not isinstance(exc, (CloudError, asyncio.TimeoutError)):
            log.error("cloud adapter failed unexpectedly; treated as unavailable", pool=pool,
                      error=what, exc_info=exc)
        if not _rejected(exc):
            st.unavailable += 1
            delay = self._backoff(st.unavailable)
            st.next_create = self._clock() + delay
            self._event(pod, "Warning", REASON_CREATE_FAILED, ACTION_CREATE,
                        event_note("create", "", pool, f"{what}; retrying"))
            log.info("cloud unavailable for a create; will retry", pool=pool,
                     pod=f"{st.namespace}/{st.name}", error=what, retry_in=round(delay, 2))
            raise _Retry(delay)
        st.rejections += 1
        if st.rejections > self.create_retries:
            self._event(pod, "Warning", REASON_CREATE_FAILED, ACTION_CREATE,
                        event_note("create", "", pool, f"{what}; giving up after "
                                   f"{st.rejections} attempts"))
            await self._give_up(pod, st, f"pool {pool} refused the instance "
                                f"{st.rejections} times: {what}")
            return
        delay = self._backoff(st.rejections)
        st.next_create = self._clock() + delay
        self._event(pod, "Warning", REASON_CREATE_FAILED, ACTION_CREATE,
                    event_note("create", "", pool, f"{what}; retry {st.rejections} of "
                               f"{self.create_retries}"))
        message = (f"pool {pool} refused the instance: {what} (retry {st.rejections} of "
                   f"{self.create_retries})")
        await self._patch_status(pod, provider_failed_status(pod, message, final=False,
                                                             now=self._wall_clock()))
        raise _Retry(delay)

    async def _give_up(self, pod: Obj, st: _Tracked, message: str) -> None:
        """Mark the pod Failed (reason ProviderFailed) and hand it to ``on_create_failed``."""
        st.gave_up = True
        st.released = True
        st.failure = message
        self._count(METRIC_PODS_FAILED, st.pool.name)
        log.warning("pod failed: the cloud refused its instance", pod=f"{st.namespace}/{st.name}",
                    pool=st.pool.name, message=message)
        await self._finish_give_up(pod, st)

    async def _finish_give_up(self, pod: Obj, st: _Tracked) -> None:
        """Write the Failed status (again, if an earlier write failed), then run the hook once."""
        if _phase(pod) != "Failed":
            await self._patch_status(pod, provider_failed_status(pod, st.failure, final=True,
                                                                 now=self._wall_clock()))
        if st.hooked:
            return
        st.hooked = True
        if self.on_create_failed is not None:
            try:
                await self.on_create_failed(pod)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("on_create_failed hook failed", pod=f"{st.namespace}/{st.name}")

    # -- status --------------------------------------------------------------------------------

    async def _instance(self, st: _Tracked) -> Instance | None:
        """The pod's instance as the cloud last reported it; ``None`` if it is gone. Reads it
        when nothing recent is known (or the last list missed it)."""
        if st.instance is not None and not st.suspect:
            return st.instance
        try:
            instance = await bounded(self.adapter.get(st.pool.name, st.instance_id),
                                     self.cloud_timeout_seconds)
        except asyncio.CancelledError:
            raise
        except CloudError as exc:
            if exc.kind == "not_found":
                return None
            if st.instance is not None:
                return st.instance  # keep reporting what we know; the next list checks again
            st.errors += 1
            raise _Retry(self._backoff(st.errors)) from None
        except asyncio.TimeoutError:
            st.errors += 1
            raise _Retry(self._backoff(st.errors)) from None
        st.instance = instance
        st.seen_at = self._clock()
        st.suspect = False
        return instance

    async def _write_status(self, pod: Obj, st: _Tracked, instance: Instance) -> None:
        """Report ``instance`` in the pod's status when that changes what the pod shows, and
        record the instance on the pod (annotation ``wssp/cloud-instance``) in the same write
        if it is not there yet: ``pods/status`` takes metadata changes too, as in Kubernetes,
        so a restarted provider finds the instance without another request per pod."""
        status = instance_pod_status(pod, instance, now=self._wall_clock())
        before = status_key(pod.get("status") or {})
        after = merged_status_key(pod, status)
        if st.written is not None and st.written[0] != before:
            st.written = None  # the informer has moved on from what the last write saw
        if st.annotated and (after == before or st.written == (before, after)):
            return
        if await self._patch_status(pod, status, st):
            st.written = (before, after)
            if status.get("phase") == RUNNING and before[0] != RUNNING:
                where = f"running, IP {instance.ip}" if instance.ip else "running"
                self._event(pod, "Normal", REASON_RUNNING, ACTION_GET,
                            event_note("get", instance.id, st.pool.name, where))

    async def _patch_status(self, pod: Obj, status: Obj, st: _Tracked | None = None) -> bool:
        """Merge ``status`` into the pod's; with ``st``, also record its instance on the pod if
        that is not done yet. False when the pod is gone or was replaced."""
        meta = pod["metadata"]
        patch_meta: Obj = {"uid": meta["uid"]}
        record = st if st is not None and not st.annotated and st.instance_id else None
        if record is not None:
            patch_meta["annotations"] = {
                INSTANCE_ANNOTATION: f"{record.pool.name}/{record.instance_id}"}
        try:
            await self.client.patch_pod_status(
                str(meta.get("namespace") or "default"), str(meta["name"]),
                {"metadata": patch_meta, "status": status})
        except (NotFoundError, ConflictError):
            return False  # gone or replaced: the informer tells us what happened
        if record is not None:
            record.annotated = True
        return True

    async def _mark_lost(self, pod: Obj, st: _Tracked) -> None:
        pool = st.pool.name
        message = f"instance {st.instance_id} in pool {pool} no longer exists"
        await self._patch_status(pod, lost_pod_status(pod, message, now=self._wall_clock()), st)
        st.released = True
        st.suspect = False
        self._count(METRIC_PODS_LOST, pool)
        self._event(pod, "Warning", REASON_INSTANCE_NOT_FOUND, ACTION_GET,
                    event_note("get", st.instance_id, pool, "not found; pod marked Failed"))
        log.warning("instance vanished; pod marked Failed", pod=f"{st.namespace}/{st.name}",
                    pool=pool, instance=st.instance_id)

    # -- delete --------------------------------------------------------------------------------

    async def _instance_ids(self, st: _Tracked) -> list[str]:
        if st.instance_id:
            return [st.instance_id]
        listed = self._listed.get(st.pool.name, {}).get(st.uid)
        if listed is not None:
            return [listed.id]
        if not st.create_attempted and st.pool.name in self._listed:
            return []  # never created by this process, and not in the (successful) last list
        # A create whose outcome is unknown (a timeout, a cancelled call): ask the cloud.
        try:
            instances = await bounded(self.adapter.list(st.pool.name),
                                      self.cloud_timeout_seconds)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            st.errors += 1
            log.info("listing the pool to find an instance failed; will retry",
                     pool=st.pool.name, error=describe_cloud_failure(exc))
            raise _Retry(self._backoff(st.errors)) from None
        return [i.id for i in instances if i.pod_uid == st.uid]

    async def _release(self, st: _Tracked, why: str) -> None:
        """Delete the pod's instance (idempotent). Raises :class:`_Retry` while the cloud
        cannot confirm it."""
        if st.released:
            return
        pool = st.pool.name
        for instance_id in await self._instance_ids(st):
            try:
                await bounded(self.adapter.delete(pool, instance_id), self.cloud_timeout_seconds)
                result = f"deleted ({why})"
                self._count(METRIC_INSTANCES_DELETED, pool)
            except asyncio.CancelledError:
                raise
            except CloudError as exc:
                if exc.kind != "not_found":
                    await self._delete_failed(st, instance_id, exc)
                result = f"already gone ({why})"
            except Exception as exc:
                await self._delete_failed(st, instance_id, exc)
            self._deleted[(pool, instance_id)] = self._clock()
            self._listed.get(pool, {}).pop(st.uid, None)
            self._event(st.reference(), "Normal", REASON_DELETE, ACTION_DELETE,
                        event_note("delete", instance_id, pool, result))
            log.info("instance deleted", pod=f"{st.namespace}/{st.name}", pool=pool,
                     instance=instance_id, why=why)
        st.released = True

    async def _delete_failed(self, st: _Tracked, instance_id: str,
                             exc: BaseException) -> NoReturn:
        pool = st.pool.name
        what = describe_cloud_failure(exc)
        st.errors += 1
        delay = self._backoff(st.errors)
        self._count(METRIC_DELETE_FAILURES, pool)
        self._event(st.reference(), "Warning", REASON_DELETE_FAILED, ACTION_DELETE,
                    event_note("delete", instance_id, pool, f"{what}; retrying"))
        log.info("instance delete failed; will retry", pool=pool, instance=instance_id,
                 error=what, retry_in=round(delay, 2))
        raise _Retry(delay)

    async def _remove_pod(self, pod: Obj) -> None:
        """The kubelet's last word on a deleted pod: remove the object (grace 0, same UID)."""
        meta = pod["metadata"]
        try:
            await self.client.delete(
                api_path("v1", "pods", namespace=str(meta.get("namespace") or "default"),
                         name=str(meta["name"])), grace_period_seconds=0, uid=str(meta["uid"]))
        except (NotFoundError, ConflictError):
            pass

    # -- the reconciler ------------------------------------------------------------------------

    async def _run(self) -> None:
        """Prime (informers synced, pools listed, every pod queued), then reconcile."""
        assert self._primed is not None and self._queue is not None
        for informer in self._informers:
            await informer.synced.wait()
        if self._shared is not None:
            await self._shared.synced.wait()
        await asyncio.gather(*(self._reconcile_pool(p, full=False) for p in self.pools))
        for uid in list(self._pods):
            self._queue.add(uid)
        self._primed.set()
        log.info("virtual pod provider primed", pods=len(self._pods),
                 instances=sum(len(v) for v in self._listed.values()))
        last_full = self._clock()
        while True:
            await asyncio.sleep(min(self.status_poll_seconds, self.reconcile_seconds))
            full = self._clock() - last_full >= self.reconcile_seconds
            if full:
                last_full = self._clock()
            pools = [p for p in self.pools if full or self._has_pending(p)]
            await asyncio.gather(*(self._reconcile_pool(p, full=full) for p in pools))

    def _has_pending(self, pool: PoolConfig) -> bool:
        return any(st.pool is pool and st.instance is not None and not st.released
                   and st.instance.phase == PENDING for st in self._tracked.values())

    async def _reconcile_pool(self, pool: PoolConfig, *, full: bool) -> None:
        """List the pool; queue pods whose instance changed; on a full pass also collect
        orphans and suspect vanished instances. Never raises."""
        started = self._clock()
        try:
            instances = await bounded(self.adapter.list(pool.name), self.cloud_timeout_seconds)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            # Judge nothing on a failed list: no orphan, no vanished instance.
            log.info("listing the pool failed", pool=pool.name,
                     error=describe_cloud_failure(exc))
            return
        try:
            await self._reconcile_listed(pool, instances, started, full=full)
            self._export_gauges(pool, instances)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("reconciling the pool failed", pool=pool.name)

    async def _reconcile_listed(self, pool: PoolConfig, instances: Sequence[Instance],
                                started: float, *, full: bool) -> None:
        assert self._queue is not None
        now = self._clock()
        listed: dict[str, Instance] = {}
        strays: list[Instance] = []
        for inst in instances:
            pod = self._pods.get(inst.pod_uid)
            st = self._tracked.get(inst.pod_uid)
            ours = (pod is not None and self._pool_of(pod) is pool
                    and (st is None or not st.instance_id or st.instance_id == inst.id)
                    and inst.pod_uid not in listed)
            if not ours:
                if st is None or st.released or st.instance_id != inst.id:
                    strays.append(inst)
                continue
            listed[inst.pod_uid] = inst
            if st is None or not st.instance_id:
                self._queue.add(inst.pod_uid)       # adopt it
            elif st.instance != inst or st.suspect:
                st.instance = inst
                st.seen_at = now
                st.suspect = False
                self._queue.add(inst.pod_uid)
        self._listed[pool.name] = listed
        if not full:
            return
        self._prune_deleted(now)
        # Pods whose instance did not show up, although it was known before the list began.
        for uid, st in self._tracked.items():
            if (st.pool is pool and st.instance_id and not st.released and not st.suspect
                    and st.known_at < started and uid not in listed):
                pod = self._pods.get(uid)
                if pod is not None and not _terminating(pod) and _phase(pod) not in _TERMINAL:
                    st.suspect = True
                    self._queue.add(uid)
        seen: set[tuple[str, str]] = set()
        for inst in strays:
            key = (pool.name, inst.id)
            seen.add(key)
            first = self._orphans.setdefault(key, now)
            if now - first >= self.orphan_grace_seconds:
                if await self._collect_orphan(pool, inst):
                    seen.discard(key)
        for key in [k for k in self._orphans if k[0] == pool.name and k not in seen]:
            del self._orphans[key]

    def _prune_deleted(self, now: float) -> None:
        horizon = max(self.orphan_grace_seconds, self.reconcile_seconds) * 2
        for key in [k for k, at in self._deleted.items() if now - at > horizon]:
            del self._deleted[key]

    async def _collect_orphan(self, pool: PoolConfig, inst: Instance) -> bool:
        """Delete an instance whose pod has been gone for the grace period; True when done."""
        key = (pool.name, inst.id)
        # The informer may lag behind: ask the API server before deleting a running workload.
        if inst.namespace and inst.name:
            try:
                pod = await self.client.get(api_path("v1", "pods", namespace=inst.namespace,
                                                     name=inst.name))
            except NotFoundError:
                pod = None
            except KubeError as exc:
                log.info("cannot check the pod of a stray instance; trying later",
                         pool=pool.name, instance=inst.id, error=str(exc))
                return False
            if pod is not None and _uid(pod) == inst.pod_uid and self._pool_of(pod) is pool:
                self._orphans.pop(key, None)
                return False
        try:
            await bounded(self.adapter.delete(pool.name, inst.id), self.cloud_timeout_seconds)
        except asyncio.CancelledError:
            raise
        except CloudError as exc:
            if exc.kind != "not_found":
                self._count(METRIC_DELETE_FAILURES, pool.name)
                log.info("deleting an orphan instance failed; trying later", pool=pool.name,
                         instance=inst.id, error=describe_cloud_failure(exc))
                return False
        except Exception as exc:
            self._count(METRIC_DELETE_FAILURES, pool.name)
            log.info("deleting an orphan instance failed; trying later", pool=pool.name,
                     instance=inst.id, error=describe_cloud_failure(exc))
            return False
        self._orphans.pop(key, None)
        if key not in self._deleted:
            self._count(METRIC_ORPHANS_COLLECTED, pool.name)
            self._count(METRIC_INSTANCES_DELETED, pool.name)
            self._event({"apiVersion": "v1", "kind": "Pod", "namespace": inst.namespace,
                         "name": inst.name, "uid": inst.pod_uid}, "Normal", REASON_DELETE,
                        ACTION_DELETE, event_note("delete", inst.id, pool.name,
                                                  "deleted (orphan: its pod is gone)"))
            log.warning("orphan instance collected", pool=pool.name, instance=inst.id,
                        pod=f"{inst.namespace}/{inst.name}", pod_uid=inst.pod_uid)
        self._deleted[key] = self._clock()
        return True

"""Kubernetes Events for scheduling decisions, written the way kube-scheduler writes them.

kube-scheduler records through client-go's ``k8s.io/client-go/tools/events`` into the
``events.k8s.io/v1`` API: ``reportingController`` is the scheduler's name, ``reportingInstance``
its identity, ``action`` what it was doing (``Scheduling``, ``Binding``), ``reason`` the outcome
(``Scheduled``, ``FailedScheduling``), ``type`` ``Normal`` or ``Warning``, ``regarding`` a
reference to the pod (with its uid), ``note`` the human message and ``eventTime`` a MicroTime.
The API server also shows these through ``core/v1`` (``kubectl describe pod``).

A pod that cannot be scheduled is retried again and again, with the same message each time; an
Event per attempt would flood the server (and etcd). So, like client-go's event broadcaster, we
aggregate *isomorphic* events into an ``EventSeries``:

* The first occurrence of a (regarding uid, type, reason, action, note) key
  creates an Event object.
* Further occurrences within ``series_window`` seconds of the previous one only bump a local
  count. The count reaches the server as a merge-patch of ``series`` (``count``,
  ``lastObservedTime``) on the existing object, at most once every ``series_interval`` seconds
  per series (client-go writes the first repeat at once and then only every 30 minutes; a
  bounded interval keeps ``kubectl describe`` closer to the truth at the same bounded cost).
  Pending counts are written on :meth:`EventRecorder.flush` and :meth:`EventRecorder.stop`.
* If the object vanished (events expire after an hour), the next write creates a new one.

On top, a global token bucket (``qps``/``burst``, like client-go's 25/s burst 100 spam filter
for the legacy API) limits how many *new* Event objects are created; events over the limit are
dropped and counted. Series updates are not charged: they are already bounded by one write per
series per interval.

:meth:`EventRecorder.record` never blocks and never raises: it updates the aggregation state
and enqueues; one background task writes, one request at a time (events must never compete
with binds for connections). Write failures are logged and counted.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import datetime as dt
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import structlog

from pyscheduler.kube.client import KubeClient, api_path
from pyscheduler.kube.errors import KubeError, NotFoundError, is_retryable
from pyscheduler.kube.tasks import bounded, cancel_and_wait
from pyscheduler.pacing import TokenBucket
from pyscheduler.api.times import micro_time, utcnow

__all__ = [
    "EventRecorder",
    "EventType",
    "NOTE_LIMIT",
    "object_reference",
]

log = structlog.get_logger("pyscheduler.kube.events")

Obj = dict[str, Any]
EventType = Literal["Normal", "Warning"]
# events.k8s.io/v1 validation rejects a note longer than 1 KiB (NoteLengthLimit).
NOTE_LIMIT = 1024
EVENTS_API = "events.k8s.io/v1"
_SeriesKey = tuple[str, str, str, str, str]






def object_reference(obj: Obj) -> Obj:
    """An ``ObjectReference`` for an object (or a copy of one given as a reference already)."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return {k: v for k, v in obj.items() if k in (
            "apiVersion", "kind", "namespace", "name", "uid", "resourceVersion", "fieldPath")}
    ref: Obj = {"apiVersion": obj.get("apiVersion") or "v1", "kind": obj.get("kind") or "Pod"}
    for key in ("namespace", "name", "uid", "resourceVersion"):
        if meta.get(key):
            ref[key] = meta[key]
    return ref


def _truncate(note: str) -> str:
    raw = note.encode()
    if len(raw) <= NOTE_LIMIT:
        return note
    return raw[:NOTE_LIMIT - 3].decode("utf-8", "ignore") + "..."


@dataclass(eq=False)
class _Series:
    """Aggregation state of one isomorphic event."""

    key: _SeriesKey
    namespace: str
    body: Obj                  # the event as created (name, eventTime, regarding, note, ...)
    count: int = 1             # occurrences seen
    written: int = 0           # occurrences the server knows about
    last_seen: float = 0.0     # monotonic, for the window
    last_observed: dt.datetime = field(default_factory=utcnow)
    last_write: float = 0.0    # monotonic
    created: bool = False
    queued: bool = False
    attempts: int = 0

    @property
    def name(self) -> str:
        return str(self.body["metadata"]["name"])

    @property
    def dirty(self) -> bool:
        return self.created and self.count > self.written


class EventRecorder:
    """Record Events about objects (pods) without blocking the caller.

    ``reporting_controller`` is the scheduler name, ``reporting_instance`` this process's identity
    (e.g. the leader-election identity). ``qps``/``burst`` pace the creates (events wait their
    turn; only more than ``max_queue`` waiting drops new ones, as client-go's broadcaster does).
    ``clock`` (monotonic seconds) drives aggregation windows and the pacing; ``wall_clock``
    stamps the events.
    Call :meth:`start` on the loop, and :meth:`stop` on shutdown.
    """

    def __init__(self, client: KubeClient, *, reporting_instance: str,
                 reporting_controller: str = "pyscheduler",
                 series_window: float = 600.0, series_interval: float = 30.0,
                 qps: float = 25.0, burst: int = 100, max_queue: int = 1000,
                 max_series: int = 10000, retries: int = 3,
                 clock: Callable[[], float] = time.monotonic,
                 wall_clock: Callable[[], dt.datetime] = utcnow) -> None:
        if not reporting_instance:
            raise ValueError("reporting_instance must not be empty")
        self.client = client
        self.reporting_controller = reporting_controller
        self.reporting_instance = reporting_instance
        self.series_window = series_window
        self.series_interval = series_interval
        self.max_queue = max_queue
        self.max_series = max_series
        self.retries = retries
        self._clock = clock
        self._wall_clock = wall_clock
        self._bucket = TokenBucket(rate=qps, burst=burst, clock=clock)
        self._series: collections.OrderedDict[_SeriesKey, _Series] = collections.OrderedDict()
        self._queue: collections.deque[_Series] = collections.deque()
        self._retiring: list[_Series] = []  # evicted from the cache with a count still to write
        self._pending_series: set[_Series] = set()  # counts the server may not know yet
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._flush_all = False
        self._task: asyncio.Task[None] | None = None
        self._last_nanos = 0
        # Counters for metrics.
        self.recorded = 0
        self.created = 0
        self.series_updates = 0
        self.aggregated = 0
        self.dropped_queue_full = 0
        self.failed = 0

    # -- recording (synchronous, never raises) -------------------------------------------------

    def record(self, regarding: Obj, *, type_: EventType, reason: str, action: str,
               note: str, related: Obj | None = None) -> None:
        """Record one event about ``regarding`` (an object such as a pod, or a reference).

        Returns at once; the write happens in the background. Never raises.
        """
        try:
            self._record(regarding, type_, reason, action, note, related)
        except Exception:
            self.failed += 1
            log.exception("recording an event failed", reason=reason)

    def _record(self, regarding: Obj, type_: str, reason: str, action: str, note: str,
                related: Obj | None) -> None:
        self.recorded += 1
        if type_ not in ("Normal", "Warning"):
            self.failed += 1
            log.error("event type must be Normal or Warning; event dropped", type=type_,
                      reason=reason)
            return
        ref = object_reference(regarding)
        note = _truncate(note)
        identity = str(ref.get("uid") or f"{ref.get('namespace', '')}/{ref.get('name', '')}")
        key: _SeriesKey = (identity, type_, reason, action, note)
        now = self._clock()
        series = self._series.get(key)
        if series is not None and now - series.last_seen <= self.series_window:
            series.count += 1
            series.last_seen = now
            series.last_observed = self._wall_clock()
            self._series.move_to_end(key)
            self._pending_series.add(series)
            self.aggregated += 1
            self._kick()
            return
        if len(self._queue) >= self.max_queue:
            self.dropped_queue_full += 1
            return
        wall = self._wall_clock()
        namespace = str(ref.get("namespace") or "default")
        body: Obj = {
            "apiVersion": EVENTS_API, "kind": "Event",
            "metadata": {"name": self._event_name(str(ref.get("name") or "event"), wall),
                         "namespace": namespace},
            "eventTime": micro_time(wall),
            "reportingController": self.reporting_controller,
            "reportingInstance": self.reporting_instance,
            "action": action,
            "reason": reason,
            "regarding": ref,
            "note": note,
            "type": type_,
        }
        if related is not None:
            body["related"] = object_reference(related)
        series = _Series(key=key, namespace=namespace, body=body, last_seen=now,
                         last_observed=wall, queued=True)
        if key in self._series:
            self._retire(self._series.pop(key))
        self._series[key] = series
        self._queue.append(series)
        while len(self._series) > self.max_series:
            _, oldest = self._series.popitem(last=False)
            self._retire(oldest)
        self._kick()

    def _retire(self, series: _Series) -> None:
        self._pending_series.discard(series)
        if series.dirty:
            self._retiring.append(series)

    def _event_name(self, base: str, wall: dt.datetime) -> str:
        # client-go names events "<regarding name>.<unix nanoseconds in hex>"; keep it unique
        # even when the wall clock is coarse.
        nanos = int(wall.timestamp() * 1_000_000) * 1000
        nanos = max(nanos, self._last_nanos + 1)
        self._last_nanos = nanos
        return f"{base}.{nanos:x}"

    def _kick(self) -> None:
        self._idle.clear()
        self._wake.set()

    # -- lifecycle -----------------------------------------------------------------------------

    @property
    def task(self) -> asyncio.Task[None] | None:
        """The background writer's task while started."""
        return self._task

    def start(self) -> asyncio.Task[None]:
        """Start the background writer on the running loop (idempotent)."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(),
                                                                name="event recorder")
        return self._task

    async def flush(self, *, timeout: float = 5.0) -> bool:
        """Write everything pending now, series counts included; False if ``timeout`` passed."""
        if self._task is None or self._task.done():
            self.start()
        self._flush_all = True
        self._kick()
        try:
            await bounded(self._idle.wait(), timeout)
            return True
        except asyncio.TimeoutError:
            return False

    async def stop(self, *, timeout: float = 5.0) -> None:
        """Flush (bounded by ``timeout``), then stop the writer."""
        if self._task is not None and not self._task.done():
            if not await self.flush(timeout=timeout):
                log.warning("events still pending at shutdown were dropped",
                            queued=len(self._queue))
        task, self._task = self._task, None
        await cancel_and_wait(task)

    # -- the writer ----------------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            self._wake.clear()
            try:
                next_due = await self._write_pending()
            except asyncio.CancelledError:
                raise
            except Exception:  # never let the writer die
                log.exception("event writer failed")
                next_due = self._clock() + 1.0
            if next_due is None and not self._queue:
                self._flush_all = False
                self._idle.set()
            timeout = None if next_due is None else max(0.0, next_due - self._clock())
            with contextlib.suppress(asyncio.TimeoutError):
                await bounded(self._wake.wait(), timeout)

    async def _write_pending(self) -> float | None:
        """Create queued events, write due series; return when the next series write is due."""
        paced_until: float | None = None
        while self._queue:
            # Creates are paced by the rate limit (like a client's QPS), never dropped by it:
            # only a full queue drops events.
            if not self._bucket.try_take():
                paced_until = self._clock() + self._bucket.wait_time()
                break
            series = self._queue.popleft()
            series.queued = False
            await self._create(series)
        while self._retiring:
            await self._write_series(self._retiring.pop())
        now = self._clock()
        next_due: float | None = None
        # Only series with occurrences not yet written: never a scan of the whole cache.
        for series in list(self._pending_series):
            if not series.created:
                continue  # still queued for creation; its count goes with the create
            if not series.dirty:
                self._pending_series.discard(series)
                continue
            due = series.last_write + self.series_interval
            if self._flush_all or due <= now:
                await self._write_series(series)
                if not series.dirty:
                    self._pending_series.discard(series)
                else:  # a failed write: try again after another interval
                    due = series.last_write + self.series_interval
                    next_due = due if next_due is None else min(next_due, due)
            else:
                next_due = due if next_due is None else min(next_due, due)
        self._prune(now)
        if paced_until is not None:
            next_due = paced_until if next_due is None else min(next_due, paced_until)
        return next_due

    def _prune(self, now: float) -> None:
        while self._series:
            key, oldest = next(iter(self._series.items()))
            if now - oldest.last_seen <= self.series_window or oldest.dirty or oldest.queued:
                break
            del self._series[key]

    def _series_field(self, series: _Series) -> Obj:
        return {"count": series.count, "lastObservedTime": micro_time(series.last_observed)}

    async def _create(self, series: _Series) -> None:
        if series.attempts:
            # A retry after a transient failure: give the server a moment (bounded).
            await asyncio.sleep(min(0.2 * 2 ** series.attempts, 2.0))
        body = dict(series.body)
        count = series.count
        if count >= 2:
            body["series"] = self._series_field(series)
        path = api_path(EVENTS_API, "events", namespace=series.namespace)
        try:
            await self.client.create(path, body)
        except KubeError as exc:
            self._failed(series, "create", exc)
            return
        series.created = True
        series.written = count
        series.last_write = self._clock()
        series.attempts = 0
        self.created += 1

    async def _write_series(self, series: _Series) -> None:
        count = series.count
        path = api_path(EVENTS_API, "events", namespace=series.namespace, name=series.name)
        try:
            await self.client.patch(path, {"series": self._series_field(series)}, "merge")
        except NotFoundError:
            # The event expired or was deleted: start a new object carrying the count so far.
            series.created = False
            series.body = {**series.body, "metadata": {
                "name": self._event_name(str(series.body["regarding"].get("name") or "event"),
                                         self._wall_clock()),
                "namespace": series.namespace}}
            await self._create(series)
            return
        except KubeError as exc:
            series.last_write = self._clock()
            self._failed(series, "series update", exc)
            return
        series.written = count
        series.last_write = self._clock()
        self.series_updates += 1

    def _failed(self, series: _Series, what: str, exc: KubeError) -> None:
        series.attempts += 1
        if what != "create":
            if not is_retryable(exc):
                series.written = series.count  # give these occurrences up; later ones retry
            self.failed += 1
            log.warning("writing an event series failed", error=str(exc), event_name=series.name)
            return
        if is_retryable(exc) and series.attempts < self.retries:
            log.info("writing an event failed; will retry", error=str(exc), event_name=series.name)
            series.queued = True
            self._queue.append(series)
            return
        self.failed += 1
        log.warning("writing an event failed", error=str(exc), event_name=series.name,
                    reason=series.body.get("reason"))
        self._pending_series.discard(series)
        if self._series.get(series.key) is series:
            # Forget it so that the next occurrence tries a fresh create.
            del self._series[series.key]

"""Lease-based leader election with client-go's semantics (``tools/leaderelection``).

Several scheduler replicas may run; exactly one may bind pods. They compete for one
``coordination.k8s.io/v1`` Lease:

* **Acquire.** A candidate reads the Lease every ``retry_period`` (plus up to 1.2 × jitter, as
  ``wait.JitterUntil`` does) and takes it when it is free (no ``holderIdentity``) or expired.
  Expiry is judged the way client-go judges it: not from the timestamps written in the Lease
  (other machines' clocks) but from *this* process's monotonic clock — the lease is expired
  when ``leaseDurationSeconds`` have passed since we last saw the Lease record *change*. Taking
  over another holder's lease increments ``leaseTransitions`` and sets ``acquireTime``.
* **Optimistic concurrency.** Every write is a PUT carrying the ``resourceVersion`` that was
  read; a 409 means someone else wrote first, and the next attempt re-reads. A leader first
  tries to renew from the record it last wrote (no GET), as client-go's fast path does.
* **Renew.** The leader renews every ``retry_period``. If no renewal succeeds within
  ``renew_deadline`` of the last successful one, it stops leading *at once*: the in-flight
  request is abandoned at the deadline, :attr:`LeaderElector.is_leader` turns false even before
  the loop notices, and ``on_stopped_leading`` runs. Because ``renew_deadline`` is shorter than
  ``lease_duration``, the old leader has stopped before any candidate can consider the lease
  expired — the scheduler never binds with two leaders. (client-go counts the deadline from the
  start of a renewal round, up to one ``retry_period`` later; counting from the last success is
  stricter.) A renewal that finds another holder in the Lease also stops leadership at once.
* **Release.** :meth:`LeaderElector.stop` (by default) releases the lease on shutdown: it writes
  an empty ``holderIdentity`` and ``leaseDurationSeconds: 1`` so that a standby takes over
  within one retry period instead of waiting for the lease to expire.

After losing leadership the elector becomes a candidate again (client-go's ``Run`` returns and
kube-scheduler exits; a library should leave that choice to its caller, who can call
:meth:`LeaderElector.stop`).

``on_started_leading`` may be a plain callable or a coroutine function; a coroutine runs as a
task that is cancelled the moment leadership is lost (like the context client-go passes to
``OnStartedLeading``). ``on_stopped_leading`` and ``on_new_leader(identity)`` are plain
callables. Exceptions in callbacks are logged.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import inspect
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from pyscheduler.kube.client import KubeClient, api_path
from pyscheduler.kube.errors import KubeError, NotFoundError
from pyscheduler.kube.tasks import bounded, cancel_and_wait
from pyscheduler.api.times import micro_time, utcnow

__all__ = ["JITTER_FACTOR", "LeaderElector"]

log = structlog.get_logger("pyscheduler.kube.leader")

Obj = dict[str, Any]
# client-go's leaderelection.JitterFactor.
JITTER_FACTOR = 1.2
LEASES_API = "coordination.k8s.io/v1"
_RECORD_FIELDS = ("holderIdentity", "leaseDurationSeconds", "acquireTime", "renewTime",
                  "leaseTransitions")




def _record(lease: Obj) -> tuple[Any, ...]:
    spec = lease.get("spec")
    spec = spec if isinstance(spec, dict) else {}
    return tuple(spec.get(f) for f in _RECORD_FIELDS)


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


class LeaderElector:
    """Compete for the Lease ``namespace/name`` as ``identity``; see the module docstring.

    Durations are in seconds and must satisfy client-go's rules: ``lease_duration >
    renew_deadline > JITTER_FACTOR × retry_period``. ``clock`` (monotonic seconds) measures
    expiry and deadlines; ``wall_clock`` stamps ``acquireTime``/``renewTime``.
    """

    def __init__(self, client: KubeClient, *, namespace: str, name: str, identity: str,
                 lease_duration: float = 15.0, renew_deadline: float = 10.0,
                 retry_period: float = 2.0,
                 on_started_leading: Callable[[], Awaitable[None] | None] | None = None,
                 on_stopped_leading: Callable[[], None] | None = None,
                 on_new_leader: Callable[[str], None] | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 wall_clock: Callable[[], dt.datetime] = utcnow,
                 rng: random.Random | None = None) -> None:
        if not identity:
            raise ValueError("identity must not be empty")
        if lease_duration < 1:
            raise ValueError(f"lease_duration must be at least 1 second, got {lease_duration:g}")
        if renew_deadline >= lease_duration:
            raise ValueError(f"renew_deadline ({renew_deadline:g}) must be less than "
                             f"lease_duration ({lease_duration:g})")
        if renew_deadline <= JITTER_FACTOR * retry_period:
            raise ValueError(f"renew_deadline ({renew_deadline:g}) must be greater than "
                             f"{JITTER_FACTOR:g} × retry_period ({retry_period:g})")
        if retry_period <= 0:
            raise ValueError("retry_period must be positive")
        self.client = client
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.on_started_leading = on_started_leading
        self.on_stopped_leading = on_stopped_leading
        self.on_new_leader = on_new_leader
        self._clock = clock
        self._wall_clock = wall_clock
        self._rng = rng or random.Random()
        self._path = api_path(LEASES_API, "leases", namespace=namespace, name=name)
        # What we last saw of the Lease, and when (by our clock) it last changed.
        self._observed: Obj | None = None
        self._observed_record: tuple[Any, ...] | None = None
        self._observed_time = 0.0
        self._leading = False
        self._deadline = 0.0          # leadership ends at this clock() unless renewed
        self._task: asyncio.Task[None] | None = None
        self._leader_task: asyncio.Task[None] | None = None
        self.leader_identity = ""     # the holder we last observed
        # Counters for metrics.
        self.acquisitions = 0
        self.losses = 0

    # -- state ---------------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        """True while this process holds the lease and its last renewal is within the deadline.

        Check it right before every bind: it turns false at the deadline even if the event loop
        was too busy to run the renewal loop.
        """
        return self._leading and self._clock() < self._deadline

    # -- one attempt ---------------------------------------------------------------------------

    def _observe(self, lease: Obj) -> None:
        record = _record(lease)
        self._observed = lease
        if record != self._observed_record:
            self._observed_record = record
            self._observed_time = self._clock()
            holder = record[0] if isinstance(record[0], str) else ""
            if holder != self.leader_identity:
                self.leader_identity = holder
                if holder and self.on_new_leader is not None:
                    self._callback(self.on_new_leader, holder)

    def _valid_for_others(self) -> bool:
        """Whether the observed lease still binds other candidates (by our clock)."""
        assert self._observed is not None
        spec = self._observed.get("spec") or {}
        duration = _int(spec.get("leaseDurationSeconds"), int(self.lease_duration))
        return self._observed_time + duration > self._clock()

    def _spec(self, previous: Obj | None) -> Obj:
        now = micro_time(self._wall_clock())
        old = (previous or {}).get("spec") or {}
        holder = old.get("holderIdentity") or ""
        transitions = _int(old.get("leaseTransitions"), 0)
        ours = holder == self.identity
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": max(1, round(self.lease_duration)),
            "acquireTime": old.get("acquireTime") if ours and old.get("acquireTime") else now,
            "renewTime": now,
            "leaseTransitions": transitions if ours or previous is None else transitions + 1,
        }

    async def try_acquire_or_renew(self, *, timeout: float | None = None) -> bool:
        """One attempt to take or renew the lease; True if we hold it afterwards.

        Never raises for API failures (they mean "not this time"). Exposed for tests and for
        callers that drive their own loop.
        """
        if self._leading and self._observed is not None:
            # Fast path: renew from the record we wrote last; any failure falls back to a read.
            lease = {**self._observed, "spec": self._spec(self._observed)}
            try:
                self._observe(await self.client.update(self._path, lease, timeout=timeout))
                return True
            except KubeError as exc:
                log.debug("optimistic renewal failed; re-reading the lease", error=str(exc))
        try:
            current = await self.client.get(self._path, timeout=timeout)
        except NotFoundError:
            lease = {"apiVersion": LEASES_API, "kind": "Lease",
                     "metadata": {"name": self.name, "namespace": self.namespace},
                     "spec": self._spec(None)}
            try:
                created = await self.client.create(
                    api_path(LEASES_API, "leases", namespace=self.namespace), lease,
                    timeout=timeout)
            except KubeError as exc:
                log.debug("creating the lease failed", error=str(exc))
                return False
            self._observe(created)
            return True
        except KubeError as exc:
            log.info("reading the lease failed", lease=self._path, error=str(exc))
            return False
        self._observe(current)
        holder = (current.get("spec") or {}).get("holderIdentity") or ""
        if holder and holder != self.identity and self._valid_for_others():
            return False
        lease = {**current, "spec": self._spec(current)}
        try:
            self._observe(await self.client.update(self._path, lease, timeout=timeout))
        except KubeError as exc:  # a 409 means someone else wrote first: next time, re-read
            log.debug("writing the lease failed", error=str(exc))
            return False
        return True

    # -- the loop ------------------------------------------------------------------------------

    def start(self) -> asyncio.Task[None]:
        """Start competing for the lease in a task on the running loop (idempotent)."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name=f"leader election {self.namespace}/{self.name}")
        return self._task

    async def stop(self, *, release: bool = True) -> None:
        """Stop competing. A leader stops leading first (callback), then, with ``release``,
        hands the lease back so a standby takes over quickly."""
        task, self._task = self._task, None
        await cancel_and_wait(task)
        was_leader = self._leading
        if was_leader:
            self._stop_leading("stopped")
        if release and was_leader:
            await self.release()

    async def release(self) -> bool:
        """Write an empty holder and a 1 s duration if we still hold the lease; True if done."""
        if self._leading:
            self._stop_leading("released")
        observed = self._observed
        if observed is None or (observed.get("spec") or {}).get("holderIdentity") != \
                self.identity:
            return False
        now = micro_time(self._wall_clock())
        spec = {"holderIdentity": "", "leaseDurationSeconds": 1, "acquireTime": now,
                "renewTime": now,
                "leaseTransitions": _int((observed.get("spec") or {}).get("leaseTransitions"),
                                         0)}
        try:
            self._observe(await self.client.update(self._path, {**observed, "spec": spec},
                                                   timeout=self.renew_deadline))
        except KubeError as exc:
            log.warning("releasing the lease failed", lease=self._path, error=str(exc))
            return False
        log.info("lease released", lease=self._path, identity=self.identity)
        return True

    async def _run(self) -> None:
        try:
            while True:
                await self._acquire()
                self._start_leading()
                await self._renew()
                self._stop_leading("renewal failed")
        except asyncio.CancelledError:
            raise
        except Exception:
            # Nothing above should raise; if it does, leadership must not outlive the loop.
            log.exception("leader election loop failed", lease=self._path)
            if self._leading:
                self._stop_leading("election loop failed")
            raise

    async def _acquire(self) -> None:
        while True:
            started = self._clock()
            if await self._attempt(self.renew_deadline):
                self._deadline = started + self.renew_deadline
                return
            await asyncio.sleep(self.retry_period * (1 + self._rng.random() * JITTER_FACTOR))

    async def _attempt(self, timeout: float) -> bool:
        try:
            return await bounded(self.try_acquire_or_renew(timeout=timeout), timeout)
        except asyncio.TimeoutError:
            return False

    async def _renew(self) -> None:
        """Renew until a renewal misses the deadline; return then (at once)."""
        while True:
            wait = min(self.retry_period, self._deadline - self._clock())
            if wait > 0:
                await asyncio.sleep(wait)
            remaining = self._deadline - self._clock()
            if remaining <= 0:
                log.warning("lease not renewed within the renew deadline", lease=self._path,
                            identity=self.identity)
                return
            started = self._clock()
            if await self._attempt(remaining):
                self._deadline = started + self.renew_deadline
                continue
            if self.leader_identity and self.leader_identity != self.identity:
                log.warning("another identity holds the lease", lease=self._path,
                            holder=self.leader_identity)
                return

    # -- transitions and callbacks -------------------------------------------------------------

    def _start_leading(self) -> None:
        self._leading = True
        self.acquisitions += 1
        log.info("started leading", lease=self._path, identity=self.identity)
        if self.on_started_leading is None:
            return
        try:
            result = self.on_started_leading()
        except Exception:
            log.exception("on_started_leading failed")
            return
        if inspect.isawaitable(result):
            async def lead(awaitable: Awaitable[None]) -> None:
                try:
                    await awaitable
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("on_started_leading failed")
            self._leader_task = asyncio.get_running_loop().create_task(
                lead(result), name="leading")

    def _stop_leading(self, why: str) -> None:
        if not self._leading:
            return
        self._leading = False
        self._deadline = 0.0
        self.losses += 1
        log.warning("stopped leading", lease=self._path, identity=self.identity, why=why)
        task, self._leader_task = self._leader_task, None
        if task is not None and not task.done():
            task.cancel()
        if self.on_stopped_leading is not None:
            self._callback(self.on_stopped_leading)

    @staticmethod
    def _callback(fn: Callable[..., Any], *args: Any) -> None:
        try:
            fn(*args)
        except Exception:
            log.exception("leader election callback failed")

"""The scheduling queue: which pending pod to try next, and when to try again.

Three sub-queues, as in kube-scheduler's ``PriorityQueue``:

* **active** — pods ready to be tried, popped by priority (higher first), then by the time they
  entered the queue (older first);
* **backoff** — pods that failed and wait out a per-pod backoff (initial 1 s doubling to a 10 s
  cap by default) before returning to active;
* **unschedulable** — pods no node could take. They go back to active (or backoff, if their
  backoff has not expired) when the cluster changes in a way that may help: an event that one
  of the plugins that rejected the pod registered (kube's ``EventsToRegister``; a node's
  allocatable growing for NodeResourcesFit, a label for NodeAffinity, an assigned pod added
  for InterPodAffinity). A pod rejected by logic that registered nothing (a fragment's
  filter) moves on every event but an assigned pod added or updated. Pods left there longer
  than ``max_in_unschedulable`` (5 minutes) are retried anyway by a periodic flush.

Pods with ``schedulingGates`` are *gated*: kept, counted, never popped until an update removes
the gates. A cluster event that arrives while a pod is being tried is remembered: if that
attempt then fails and the event is one that may help it, the pod goes to backoff instead of
unschedulable, so the event is not missed (kube's in-flight events).

The queue is pure (no I/O) with an injectable clock; the scheduler awaits :meth:`pop`.
"""

from __future__ import annotations

import asyncio
import collections
import heapq
import itertools
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyscheduler.framework.interface import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    QueueingHint,
)
from pyscheduler.framework.pod import PodInfo

__all__ = ["QueuedPod", "SchedulingQueue"]


@dataclass(slots=True)
class QueuedPod:
    pod: PodInfo
    attempts: int = 0
    initial_attempt: float = 0.0  # when the pod was first seen pending (for the SLI metric)
    enqueued: float = 0.0  # when it entered its current sub-queue
    backoff_until: float = 0.0
    cycle: int = 0  # the move request cycle at the time it was popped
    #: The plugins that rejected it in its last attempt (empty: not known).
    rejected_by: frozenset[str] = frozenset()


#: Events kept while pods are being tried, for those that fail meanwhile.
IN_FLIGHT_EVENTS = 1024
#: Registrations by plugin name: the events each plugin says may help a pod it rejected.
Registrations = Mapping[str, Sequence[ClusterEventWithHint]]
_QUIET = ActionType.ADD | ActionType.UPDATE  # an assigned pod's: no reason for the unknown


def _moves_the_unknown(event: ClusterEvent) -> bool:
    """Whether a pod rejected by logic that registered nothing moves on ``event``: on every
    event but an assigned pod added or updated (which would retry it at every binding)."""
    return not (event.resource == "Pod" and not event.action & ~_QUIET)


class SchedulingQueue:
    def __init__(self, *, initial_backoff: float = 1.0, max_backoff: float = 10.0,
                 max_in_unschedulable: float = 300.0,
                 clock: Callable[[], float] = time.monotonic,
                 on_event: Callable[[str, str], None] | None = None,
                 registrations: Registrations | None = None) -> None:
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.max_in_unschedulable = max_in_unschedulable
        self.clock = clock
        self.on_event = on_event  # (queue, event) for scheduler_queue_incoming_pods_total
        self.entries: dict[str, QueuedPod] = {}  # every pending pod we know, by uid
        self._active: list[tuple[int, float, int, str]] = []
        self._in_active: set[str] = set()
        self._backoff: list[tuple[float, int, str]] = []
        self._in_backoff: set[str] = set()
        self.unschedulable: dict[str, QueuedPod] = {}
        #: What each plugin registered (None: every event moves every parked pod).
        self.registrations = registrations
        # Parked pods by a plugin that rejected them, and those whose rejectors are unknown.
        self._parked: dict[str, set[str]] = {}
        self._parked_unknown: set[str] = set()
        self._matching: dict[ClusterEvent, frozenset[str]] = {}
        # Events while pods are being tried: (scheduling cycle, event, old, new).
        self._in_flight_events: collections.deque[tuple[int, ClusterEvent, Any, Any]] = \
            collections.deque(maxlen=IN_FLIGHT_EVENTS)
        self.gated: set[str] = set()
        #: The pods being tried (popped, not yet done or requeued): uid -> the scheduling
        #: cycle it was popped in, oldest first.
        self.in_flight: dict[str, int] = {}
        self._seq = itertools.count()
        self._wake = asyncio.Event()
        self.move_request_cycle = 0
        self.scheduling_cycle = 0
        self.closed = False

    # -- sizes (scheduler_pending_pods) --------------------------------------------------------

    def counts(self) -> dict[str, int]:
        return {"active": len(self._in_active), "backoff": len(self._in_backoff),
                "unschedulable": len(self.unschedulable), "gated": len(self.gated)}

    def pending(self, uid: str) -> bool:
        """Whether the pod is pending here (waiting in a sub-queue, or being scheduled)."""
        return uid in self.entries

    def waiting(self, uid: str) -> bool:
        """Whether the pod is pending and not being scheduled right now."""
        return uid in self.entries and uid not in self.in_flight

    def __len__(self) -> int:
        return len(self.entries)

    # -- informer side -------------------------------------------------------------------------

    def _note(self, queue: str, event: str) -> None:
        if self.on_event is not None:
            self.on_event(queue, event)

    def _park(self, entry: QueuedPod) -> None:
        uid = entry.pod.uid
        self.unschedulable[uid] = entry
        known = self.registrations
        if known is None or not entry.rejected_by or any(
                p not in known for p in entry.rejected_by):
            self._parked_unknown.add(uid)
        for plugin in entry.rejected_by:
            if known is not None and plugin in known:
                self._parked.setdefault(plugin, set()).add(uid)

    def _unpark(self, uid: str) -> None:
        entry = self.unschedulable.pop(uid, None)
        if entry is None:
            return
        self._parked_unknown.discard(uid)
        for plugin in entry.rejected_by:
            parked = self._parked.get(plugin)
            if parked is not None:
                parked.discard(uid)

    def _push_active(self, entry: QueuedPod, event: str) -> None:
        uid = entry.pod.uid
        self._unpark(uid)
        if uid in self._in_active:
            return
        entry.enqueued = self.clock()
        heapq.heappush(self._active, (-entry.pod.priority, entry.enqueued, next(self._seq), uid))
        self._in_active.add(uid)
        self._note("active", event)
        self._wake.set()

    def _push_backoff(self, entry: QueuedPod, event: str) -> None:
        uid = entry.pod.uid
        self._unpark(uid)
        if uid in self._in_backoff or uid in self._in_active:
            return
        heapq.heappush(self._backoff, (entry.backoff_until, next(self._seq), uid))
        self._in_backoff.add(uid)
        self._note("backoff", event)
        self._wake.set()

    def add(self, pod: PodInfo) -> None:
        """A pending pod appeared (or was updated: see :meth:`update`)."""
        if pod.uid in self.entries:
            self.update(pod)
            return
        now = self.clock()
        entry = QueuedPod(pod, initial_attempt=now, enqueued=now)
        self.entries[pod.uid] = entry
        if pod.gated:
            self.gated.add(pod.uid)
            self._note("gated", "PodAdd")
            return
        self._push_active(entry, "PodAdd")

    def update(self, pod: PodInfo) -> None:
        entry = self.entries.get(pod.uid)
        if entry is None:
            self.add(pod)
            return
        old = entry.pod
        entry.pod = pod
        if pod.uid in self.in_flight:
            return
        if pod.gated:
            return
        if pod.uid in self.gated:
            self.gated.discard(pod.uid)
            self._push_active(entry, "PodUpdate")
            return
        if pod.uid in self.unschedulable and _spec_changed(old, pod):
            # An edited pod may fit now: retry it (respecting its backoff).
            if entry.backoff_until > self.clock():
                self._push_backoff(entry, "PodUpdate")
            else:
                self._push_active(entry, "PodUpdate")

    def delete(self, uid: str) -> None:
        self.entries.pop(uid, None)
        self._unpark(uid)
        self.gated.discard(uid)
        self._in_active.discard(uid)  # heap entries of unknown uids are skipped on pop
        self._in_backoff.discard(uid)

    def move_all_to_active(self, event: str) -> None:
        """Something that may make any parked pod schedulable (a permit wait released, a
        fragment Ready): every one goes back (kube's MoveAllToActiveOrBackoffQueue without an
        event filter)."""
        self.move_request_cycle = self.scheduling_cycle
        for entry in list(self.unschedulable.values()):
            self._move(entry, event)

    def _move(self, entry: QueuedPod, event: str) -> None:
        if entry.backoff_until > self.clock():
            self._push_backoff(entry, event)
        else:
            self._push_active(entry, event)

    def cluster_event(self, event: ClusterEvent, old: Any = None, new: Any = None,
                      label: str = "") -> None:
        """A change in the cluster (``old`` and ``new``: the object before and after, None
        for an add or a delete): the parked pods it may help go back — those rejected by a
        plugin that registered it (and whose hint, if any, says so), and those rejected by
        logic that registered nothing."""
        label = label or f"{event.resource}{event.action.name or ''}"
        if self.in_flight:
            self._in_flight_events.append((self.scheduling_cycle, event, old, new))
        if self.registrations is None:
            self.move_all_to_active(label)
            return
        candidates: set[str] = set()
        for plugin in self._plugins_for(event):
            candidates |= self._parked.get(plugin, set())
        if _moves_the_unknown(event):
            candidates |= self._parked_unknown
        for uid in candidates:
            entry = self.unschedulable.get(uid)
            if entry is not None and self._worth(entry, event, old, new):
                self._move(entry, label)

    def _plugins_for(self, event: ClusterEvent) -> frozenset[str]:
        found = self._matching.get(event)
        if found is None:
            assert self.registrations is not None
            found = self._matching[event] = frozenset(
                plugin for plugin, regs in self.registrations.items()
                if any(r.event.matches(event) for r in regs))
        return found

    def _worth(self, entry: QueuedPod, event: ClusterEvent, old: Any, new: Any) -> bool:
        """Whether ``event`` may make ``entry``'s pod schedulable (kube's isPodWorthRequeuing:
        a hint that raises counts as Queue)."""
        known = self.registrations
        if known is None or not entry.rejected_by:
            return True
        for plugin in entry.rejected_by:
            regs = known.get(plugin)
            if regs is None:
                if _moves_the_unknown(event):
                    return True
                continue
            for reg in regs:
                if not reg.event.matches(event):
                    continue
                if reg.hint is None:
                    return True
                try:
                    if reg.hint(entry.pod, old, new) is QueueingHint.QUEUE:
                        return True
                except Exception:
                    return True
        return False

    # -- scheduler side ------------------------------------------------------------------------

    def _flush(self) -> float | None:
        """Move due pods to active; returns seconds until the next timed move, if any."""
        now = self.clock()
        while self._backoff and self._backoff[0][0] <= now:
            _, _, uid = heapq.heappop(self._backoff)
            if uid in self._in_backoff:
                self._in_backoff.discard(uid)
                entry = self.entries.get(uid)
                if entry is not None:
                    self._push_active(entry, "BackoffComplete")
        for uid, entry in list(self.unschedulable.items()):
            if now - entry.enqueued >= self.max_in_unschedulable:
                self._push_active(entry, "UnschedulableTimeout")
        waits = []
        if self._backoff:
            waits.append(self._backoff[0][0] - now)
        if self.unschedulable:
            oldest = min(e.enqueued for e in self.unschedulable.values())
            waits.append(oldest + self.max_in_unschedulable - now)
        return max(min(waits), 0.0) if waits else None

    def pop_nowait(self) -> QueuedPod | None:
        self._flush()
        while self._active:
            _, _, _, uid = heapq.heappop(self._active)
            if uid not in self._in_active:
                continue
            self._in_active.discard(uid)
            entry = self.entries.get(uid)
            if entry is None:
                continue
            self.scheduling_cycle += 1
            entry.cycle = self.scheduling_cycle
            entry.attempts += 1
            self.in_flight[uid] = self.scheduling_cycle
            return entry
        return None

    async def pop(self) -> QueuedPod:
        while True:
            entry = self.pop_nowait()
            if entry is not None:
                return entry
            if self.closed:
                raise asyncio.CancelledError("scheduling queue closed")
            wait = self._flush()
            self._wake.clear()
            await _wait_set(self._wake, wait if wait is not None else 1.0)

    def done(self, uid: str) -> None:
        """The pod was scheduled (assumed): it leaves the queue."""
        self.in_flight.pop(uid, None)
        self.entries.pop(uid, None)
        self._forget_events()

    def _backoff_for(self, attempts: int) -> float:
        return float(min(self.initial_backoff * (2.0 ** max(attempts - 1, 0)), self.max_backoff))

    def requeue_unschedulable(self, uid: str,
                              rejected_by: frozenset[str] = frozenset()) -> None:
        """The attempt found no node (``rejected_by``: the plugins that said no; empty: not
        known). Park the pod until an event that may help it."""
        self.in_flight.pop(uid, None)
        entry = self.entries.get(uid)
        if entry is None:
            return
        entry.rejected_by = rejected_by
        entry.backoff_until = self.clock() + self._backoff_for(entry.attempts)
        if entry.cycle <= self.move_request_cycle or self._missed(entry):
            # Something that may help changed while it was being tried: do not wait for
            # another event.
            self._push_backoff(entry, "ScheduleAttemptFailure")
            self._forget_events()
            return
        entry.enqueued = self.clock()
        self._park(entry)
        self._forget_events()
        self._note("unschedulable", "ScheduleAttemptFailure")

    def _missed(self, entry: QueuedPod) -> bool:
        """Whether an event since ``entry``'s attempt began may help it."""
        events = self._in_flight_events
        if not events:
            return False
        if len(events) == events.maxlen and events[0][0] >= entry.cycle:
            return True  # some of the events of its attempt were let go: assume the worst
        for cycle, event, old, new in reversed(events):  # newest first, in cycle order
            if cycle < entry.cycle:
                return False
            if self._worth(entry, event, old, new):
                return True
        return False

    def _forget_events(self) -> None:
        """The events no pod being tried can still need (kube clears them likewise)."""
        events = self._in_flight_events
        if not events:
            return
        if not self.in_flight:
            events.clear()
            return
        oldest = next(iter(self.in_flight.values()))  # popped first: the lowest cycle
        while events and events[0][0] < oldest:
            events.popleft()

    def requeue_backoff(self, uid: str, event: str = "ScheduleAttemptFailure") -> None:
        """The attempt failed for another reason (bind error, API error): retry after backoff."""
        self.in_flight.pop(uid, None)
        entry = self.entries.get(uid)
        if entry is None:
            return
        entry.backoff_until = self.clock() + self._backoff_for(entry.attempts)
        self._push_backoff(entry, event)
        self._forget_events()

    def close(self) -> None:
        self.closed = True
        self._wake.set()


async def _wait_set(event: asyncio.Event, seconds: float) -> None:
    """Wait until ``event`` is set or ``seconds`` have passed. With ``asyncio.timeout``
    (3.11) rather than ``wait_for``: no task per wait, and the loop waits for most pods while
    they are being created."""
    if sys.version_info >= (3, 11):
        try:
            async with asyncio.timeout(seconds):
                await event.wait()
        except TimeoutError:
            pass
        return
    try:  # pragma: no cover - Python 3.10
        await asyncio.wait_for(event.wait(), seconds)
    except asyncio.TimeoutError:  # pragma: no cover
        pass


def _spec_changed(old: PodInfo, new: PodInfo) -> bool:
    old_spec = old.raw.get("spec")
    new_spec = new.raw.get("spec")
    return old_spec != new_spec or old.labels != new.labels

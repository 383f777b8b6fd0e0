"""A small work-queue controller base for the embedded cluster's in-process controllers.

Each controller keeps a set of dirty keys fed by the registry's change listener and drains it on
the event loop, the way client-go's work queues de-duplicate keys: many changes to one object
before the controller runs cost one reconcile. A periodic resync re-queues everything, so a
missed trigger only delays convergence. A reconcile that raises is logged and retried later;
it never stops the controller. A drain hands the event loop back to the API server every
``slice_seconds``, as kube's controllers run beside kube-apiserver rather than in its way: a
resync of 3000 ReplicaSets over 150,000 pods would otherwise hold every request for half a
second.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable, Iterable
from typing import Any

import structlog

from pyscheduler.kube.tasks import cancel_and_wait
from pyscheduler_sim import errors
from pyscheduler_sim.registry import Registry
from pyscheduler_sim.resources import ResourceType

__all__ = ["Controller"]


class Controller:
    name = "controller"
    resync_seconds = 10.0
    # Coalesce bursts of changes: wait this long after the first dirty key before draining.
    batch_seconds = 0.005
    # The longest a drain runs before it lets the server's requests in.
    slice_seconds = 0.005

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self.log = structlog.get_logger(f"pyscheduler_sim.{self.name}")
        self._dirty: dict[Hashable, None] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        registry.listeners.append(self.on_change)

    # -- to override ---------------------------------------------------------------------------

    def on_change(self, kind: str, rt: ResourceType, obj: dict[str, Any]) -> None:
        """Called synchronously for every write; must only enqueue keys."""

    def all_keys(self) -> Iterable[Hashable]:
        """Every key, for the periodic resync. A generator is consumed in slices, the event
        loop free in between: it must not iterate a live dict (iterate a copy)."""
        return ()

    async def reconcile(self, key: Any) -> None:
        raise NotImplementedError

    # -- machinery -----------------------------------------------------------------------------

    def enqueue(self, key: Hashable) -> None:
        self._dirty[key] = None
        self._wake.set()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=self.name)

    async def stop(self) -> None:
        if self.on_change in self.registry.listeners:
            self.registry.listeners.remove(self.on_change)
        # cancel_and_wait cancels again until the task has ended: before Python 3.12, the
        # wait_for in _run swallows a cancellation that lands as its event is set.
        task, self._task = self._task, None
        await cancel_and_wait(task)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        next_resync = loop.time() + self.resync_seconds
        while True:
            timeout = max(next_resync - loop.time(), 0.0)
            try:
                await asyncio.wait_for(self._wake.wait(), timeout)
            except asyncio.TimeoutError:
                pass
            self._wake.clear()
            if loop.time() >= next_resync:
                slice_end = loop.time() + self.slice_seconds
                for key in self.all_keys():  # a generator is consumed in slices
                    self._dirty[key] = None
                    if loop.time() >= slice_end:
                        await asyncio.sleep(0)
                        slice_end = loop.time() + self.slice_seconds
                next_resync = loop.time() + self.resync_seconds
            if self.batch_seconds:
                await asyncio.sleep(self.batch_seconds)
            keys = list(self._dirty)
            self._dirty.clear()
            slice_end = loop.time() + self.slice_seconds
            for key in keys:
                if loop.time() >= slice_end:
                    await asyncio.sleep(0)
                    slice_end = loop.time() + self.slice_seconds
                try:
                    await self.reconcile(key)
                except errors.ApiError as exc:
                    if exc.code in (404, 409):
                        # The world moved on between read and write: look again soon.
                        self._dirty[key] = None
                    else:
                        self.log.warning("reconcile failed", key=str(key), error=exc.message)
                except Exception:
                    self.log.exception("reconcile failed", key=str(key))
            if self._dirty:
                self._wake.set()
                await asyncio.sleep(0.05)

"""Task helpers that never lose a cancellation.

Two traps of plain asyncio that matter for a process that must stop cleanly:

* ``task.cancel(); with suppress(CancelledError): await task`` also suppresses the *caller's*
  own cancellation if it arrives while waiting, so the caller carries on as if nothing happened.
* Before Python 3.12, ``asyncio.wait_for`` can swallow a cancellation that arrives at the moment
  its inner awaitable completes (it returns the result instead of raising). A background loop
  built on it may then survive ``task.cancel()`` and run forever.

:func:`cancel_and_wait` waits with :func:`asyncio.wait` (which never raises the task's outcome)
and cancels again if a cancellation was lost on the way; :func:`bounded` is a ``wait_for`` that
lets the caller's cancellation through in every case.

:class:`Supervisor` watches a process's long-lived tasks: a task that ends while it is watched —
with an exception, by returning, or cancelled by anyone but its owner — is a failure of the whole
process, reported once, so that the process stops being ready and leading instead of carrying on
healthy-looking but dead.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import structlog

__all__ = ["Supervisor", "bounded", "cancel_and_wait", "stop_on_signals"]

log = structlog.get_logger("pyscheduler.kube.tasks")

T = TypeVar("T")

# How long to wait for a cancelled task before assuming the cancellation was lost and
# cancelling again (a task busy with legitimate clean-up simply gets another nudge).
RECANCEL_SECONDS = 1.0


async def cancel_and_wait(task: asyncio.Task[Any] | None) -> None:
    """Cancel ``task`` and wait until it has finished; log (never raise) a failure of it."""
    if task is None:
        return
    while not task.done():
        task.cancel()
        await asyncio.wait([task], timeout=RECANCEL_SECONDS)
        if not task.done():
            log.debug("task still running after cancel; cancelling again", task=task.get_name())
    if not task.cancelled() and task.exception() is not None:
        exc = task.exception()
        log.error("background task failed", task=task.get_name(),
                  error=f"{type(exc).__name__}: {exc}")


async def bounded(awaitable: Awaitable[T], timeout: float | None) -> T:
    """Await ``awaitable`` for at most ``timeout`` seconds (``None``: no limit).

    Raises :class:`asyncio.TimeoutError` when time runs out (the work is cancelled first). A
    cancellation of the caller always propagates, and cancels the work too.
    """
    task = asyncio.ensure_future(awaitable)
    try:
        done, _ = await asyncio.wait([task], timeout=timeout)
    except asyncio.CancelledError:
        task.cancel()
        raise
    if not done:
        await cancel_and_wait(task)
        raise asyncio.TimeoutError()
    return task.result()


# After a stop signal, a process that has not ended this much later is ended without clean-up
# (a thread stuck in a system call, a library waiting on a dead server).
STOP_GRACE_SECONDS = 15.0


def stop_on_signals(grace: float | None = STOP_GRACE_SECONDS) -> asyncio.Event:
    """An event the running loop sets on SIGINT or SIGTERM (where the platform lets a loop
    handle signals): what a command that runs until stopped waits for.

    Stopping must work in every state: after the first signal the process has ``grace`` seconds
    to stop cleanly before it is ended at once (exit 1), and a second signal ends it at once."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def requested(sig: signal.Signals) -> None:
        if stop.is_set():
            log.warning("second stop signal: exiting now", signal=sig.name)
            _exit_now()
        stop.set()
        if grace is not None:
            timer = threading.Timer(grace, _exit_late, (grace,))
            timer.daemon = True
            timer.start()

    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, requested, sig)
    return stop


def _exit_late(grace: float) -> None:
    log.error("still running after the stop grace period: exiting without clean-up",
              seconds=grace)
    _exit_now()


def _exit_now() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(1)


class Supervisor:
    """Watch long-lived tasks; the first one to end unexpectedly calls ``on_failure(name, why)``.

    A task's owner calls :meth:`unwatch` before it stops the task on purpose (or
    :meth:`stop` for all of them at shutdown); anything else that ends a watched task is a
    failure: an exception, a return (a loop that should run forever stopped), or a
    cancellation from outside.
    """

    def __init__(self, on_failure: Callable[[str, str], None]) -> None:
        self.on_failure = on_failure
        self._watched: dict[asyncio.Task[Any], str] = {}
        self._stopped = False
        self.failure: tuple[str, str] | None = None

    def watch(self, name: str, task: asyncio.Task[Any] | None) -> None:
        if task is None or task in self._watched:
            return
        if task.done():
            self._ended(name, task)
            return
        self._watched[task] = name
        task.add_done_callback(self._done)

    def watch_all(self, tasks: dict[str, asyncio.Task[Any]]) -> None:
        for name, task in tasks.items():
            self.watch(name, task)

    def unwatch(self, task: asyncio.Task[Any] | None) -> None:
        if task is not None and self._watched.pop(task, None) is not None:
            task.remove_done_callback(self._done)

    def stop(self) -> None:
        """Shutting down: tasks ending from now on are expected."""
        self._stopped = True
        for task in list(self._watched):
            self.unwatch(task)

    @property
    def watched(self) -> dict[str, asyncio.Task[Any]]:
        return {name: task for task, name in self._watched.items()}

    def _done(self, task: asyncio.Task[Any]) -> None:
        name = self._watched.pop(task, None)
        if name is not None:
            self._ended(name, task)

    def _ended(self, name: str, task: asyncio.Task[Any]) -> None:
        if self._stopped or self.failure is not None:
            return
        if task.cancelled():
            why = "cancelled"
        elif task.exception() is not None:
            exc = task.exception()
            why = f"failed: {type(exc).__name__}: {exc}"
        else:
            why = "returned"
        self.failure = (name, why)
        log.error("a core task ended: the process is no longer fit to serve", task=name,
                  why=why)
        self.on_failure(name, why)

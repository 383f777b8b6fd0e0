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
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Awaitable
from typing import Any, TypeVar

import structlog

__all__ = ["bounded", "cancel_and_wait", "stop_on_signals"]

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


def stop_on_signals() -> asyncio.Event:
    """An event the running loop sets on SIGINT or SIGTERM (where the platform lets a loop
    handle signals): what a command that runs until stopped waits for."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    return stop

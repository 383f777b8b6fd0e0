"""Guest code runs off the event loop: one worker thread per serving fragment.

The event loop is the scheduler's control loop: it renews the leader Lease, runs the informers,
answers ``/healthz`` and ``/metrics``, and schedules every pod. None of that may wait for a
fragment, whose calls may legitimately take up to their deadline (and a hostile one always will).
So every call into guest code — instantiation with ``wssp_init``, and each pod's stage calls —
is handed to the fragment's :class:`CallWorker`, and the loop awaits the answer like any other
I/O. Why a thread per fragment rather than the leader elector on a thread of its own: the
informers, health and metrics need the loop as much as the Lease does, and pods that do not name
a slow fragment must keep being scheduled while its call runs (see ``Scheduler``), which needs
the loop free too.

wasmtime runs guest code without the GIL: it is called through ctypes, which releases the GIL
for the duration of the foreign call, so a call spinning until its deadline costs the loop one
CPU core of competition, not its turn. wasmer's Python binding (1.1) keeps the GIL while guest
code runs: on wasmer the loop still waits for each call, which fuel bounds (0.2 to 0.45 s at the
default fuel on this machine), and gets its turn between calls. wasmtime, the default, is the
runtime to use where that matters.

One thread per fragment keeps a slow fragment's backlog its own: pods naming another fragment
are served by another thread. Calls of one fragment run in submission order, one at a time (the
instance is not reentrant).

A spinning call still competes for CPU with the loop (and, on a small machine, with the API
server). The worker threads therefore run at a lower CPU priority (``nice``, 10 by default:
``fragments.callThreadNice``), so that when cores are short the kernel serves the control loop
first: measured with ``hack/bench_fairness.py`` on two cores shared with the API server, pods
that name no fragment kept 0.87 of their throughput beside 20 pods naming a fragment whose
calls take 90 % of their deadline, against 0.64 at the same priority. The price is paid by the
slow fragment's own pods, whose calls take longer in wall-clock time under contention.

The threads are daemons: stopping the scheduler never waits for a call in flight (each ends at
its own deadline anyway), and a result that arrives after its waiter was cancelled is dropped.
"""

from __future__ import annotations

import asyncio
import os
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["CallWorker"]

T = TypeVar("T")

_Job = tuple[Callable[[], Any], asyncio.AbstractEventLoop, "asyncio.Future[Any]"]


def _settle(future: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if future.done():  # the waiter was cancelled meanwhile
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)


class CallWorker:
    """A daemon thread that runs the functions handed to it, one at a time, in order."""

    def __init__(self, name: str, *, nice: int = 0) -> None:
        self.name = name
        self.nice = nice
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._stopped = False

    def submit(self, fn: Callable[[], T]) -> asyncio.Future[T]:
        """Run ``fn`` on the worker thread; the future (of the running loop) gets its result or
        exception. Cancelling the future does not stop ``fn``: it finishes, and its result is
        dropped."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        with self._lock:
            if self._stopped:
                raise RuntimeError(f"call worker {self.name} is stopped")
            if self._thread is None:
                # The thread holds the queue, not the worker: a worker nobody holds any more
                # is collected, and its __del__ ends the thread.
                self._thread = threading.Thread(target=_serve, args=(self._jobs, self.nice),
                                                name=f"wssp-{self.name}", daemon=True)
                self._thread.start()
        self._jobs.put((fn, loop, future))
        return future

    def stop(self) -> None:
        """No new work; the thread ends after the job it is running, if any (not waited for)."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            if self._thread is not None:
                self._jobs.put(None)

    def __del__(self) -> None:
        # No lock here (a collection may run anywhere); SimpleQueue.put is reentrant.
        if not self._stopped and self._thread is not None:
            self._stopped = True
            self._jobs.put(None)

    @property
    def alive(self) -> bool:
        thread = self._thread
        return thread is not None and thread.is_alive()


def _serve(jobs: queue.SimpleQueue[_Job | None], nice: int) -> None:
    if nice:
        try:
            # On Linux a thread is a task of its own: this lowers this thread only.
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)
        except (OSError, AttributeError):
            pass  # a platform without per-thread priorities: the calls run at the process's
    while True:
        job = jobs.get()
        if job is None:
            return
        fn, loop, future = job
        del job
        try:
            ok, value = True, fn()
        except BaseException as exc:  # handed to the waiter, whatever it is
            ok, value = False, exc
        del fn
        try:
            loop.call_soon_threadsafe(_settle, future, ok, value)
        except RuntimeError:
            pass  # the loop is closed: nobody waits any more
        del future, value, loop

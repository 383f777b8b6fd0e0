"""A loaded fragment: one compiled module, its configuration, the instance serving it, the thread
its calls run on, and the breaker that quarantines it when it keeps failing.

:meth:`Fragment.compile` does what can fail before anything runs — compile (CPU heavy: the manager
runs it in a worker thread), check the ABI exports and imports. :meth:`Fragment.start` then
instantiates (``wssp_init``) on the fragment's :class:`~pyscheduler.wasm.worker.CallWorker` and
writes the node table on the loop, so that a fragment that loaded serves.

Three ways to call it:

* :meth:`Fragment.evaluate_inline` — the scheduler's first choice: on the loop, for a fragment
  whose calls are short, each call bounded to ``inline_seconds`` (a few milliseconds: what a
  built-in plugin costs at 5000 nodes). A thread hand-off costs about 0.1 ms of CPU here, more
  than a typical call; a call that overruns the bound is stopped there (the loop never waits
  longer), and the fragment is *offloaded*: its calls go to the worker thread until twenty in a
  row take less than half the bound.
* :meth:`Fragment.evaluate` — for one pod, ``begin`` (the table's changes and the pod record
  written into guest memory) on the loop, then the filter and score calls together on the
  worker thread, awaited; the loop goes on meanwhile. One pod at a time per fragment (an
  instance is not reentrant): pods naming the same fragment wait their turn, others do not
  wait at all. The :class:`Answers` carry the rows as they were when the calls began, so that
  the caller can tell which rows still hold the same node.
* :meth:`Fragment.filter` and :meth:`Fragment.score` — everything on the calling thread, for
  the offline what-if tool, benchmarks and tests.

``evaluate`` and ``evaluate_inline`` also make a module's ``wssp_prefilter`` call, first in the
same batch, when asked to: a prefilter that fails or rejects the pod leaves filter and score
uncalled, one that restricts the rows narrows the score call's candidates. The other lifecycle
stages of ABI minor 3 are one call each, with the same three ways: :meth:`Fragment.call`
(awaited, like ``evaluate``), :meth:`Fragment.call_now` (inline only, like ``evaluate_inline``)
and :meth:`Fragment.call_sync` (on the calling thread). They take their turn with the
fragment's other calls, count for the breaker, and answer a :class:`StageAnswer` or the
:class:`CallError`.

Any failed call (trap, fuel, deadline, bad output, a fresh instance that cannot start) raises or
returns :class:`CallError`; the instance is dropped and the next call gets a fresh one.

**Quarantine.** A fragment whose calls keep failing costs every pod that names it a full deadline
and the machine a core. After ``threshold`` consecutive failed attempts the :class:`Breaker`
opens: for a cool-down (30 s, doubling while it keeps failing, at most 5 min) the fragment is not
called at all and every attempt answers :class:`CallError` of kind ``quarantined`` at once (the
resource's failure policy decides what that means for the pod). After the cool-down one attempt
is let through: success closes the breaker, failure opens it again. A new generation of the
resource is a new :class:`Fragment` with a closed breaker.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import numpy as np

from pyscheduler.framework.interface import CycleContext, FilterResult
from pyscheduler.framework.nodetable import BoolArray, IntArray, NodeTable
from pyscheduler.wasm.abi import (
    NEW_STAGES,
    PREFILTER_REJECT,
    Guest,
    Resize,
    StageAnswer,
    TableShape,
    check_module,
    exported_stages,
)
from pyscheduler.wasm.errors import CallError, LoadError
from pyscheduler.wasm.vm import Limits, Module, get_runtime
from pyscheduler.wasm.worker import CallWorker

__all__ = ["Answers", "Breaker", "BreakerState", "Fragment", "FragmentStats", "StageAnswer",
           "unchanged_rows"]

LogFn = Callable[[int, bytes], None]
BreakerState = Literal["closed", "open", "half-open"]

BREAKER_THRESHOLD = 5
BREAKER_COOLDOWN_SECONDS = 30.0
BREAKER_MAX_COOLDOWN_SECONDS = 300.0
# Fresh instances tried for one pod when the table keeps outgrowing them.
RESIZE_TRIES = 3
# Consecutive short calls off the loop after which an offloaded fragment runs on the loop again.
INLINE_AGAIN_AFTER = 20
T = TypeVar("T")
# One batch of calls on a guest: its result, the first failure in it, the CPU seconds it took.
Job = Callable[[Guest], tuple[T, CallError | None, float]]


@dataclass(slots=True)
class FragmentStats:
    calls: int = 0
    failures: int = 0
    instances: int = 0
    last_error: str = ""


class Breaker:
    """Consecutive failures open it for a cool-down; see the module docstring.

    ``on_change(state, message)`` is told every transition (on the scheduling loop)."""

    def __init__(self, *, threshold: int = BREAKER_THRESHOLD,
                 cooldown: float = BREAKER_COOLDOWN_SECONDS,
                 max_cooldown: float = BREAKER_MAX_COOLDOWN_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if threshold < 1 or cooldown <= 0 or max_cooldown < cooldown:
            raise ValueError("breaker needs threshold >= 1 and 0 < cooldown <= max_cooldown")
        self.threshold = threshold
        self.initial_cooldown = cooldown
        self.max_cooldown = max_cooldown
        self.clock = clock
        self.state: BreakerState = "closed"
        self.failures = 0          # consecutive
        self.cooldown = cooldown   # the next time it opens
        self.open_until = 0.0
        self.last_error = ""
        self.on_change: Callable[[BreakerState, str], None] | None = None

    def admit(self) -> CallError | None:
        """None when a call may go ahead; else the error every pod gets while it is open."""
        if self.state == "closed":
            return None
        now = self.clock()
        if self.state == "open" and now >= self.open_until:
            self._set("half-open", "cool-down over: the next call is a trial")
            return None
        if self.state == "half-open":
            return None  # calls are serialized per fragment: this is the trial
        return CallError("quarantined", f"quarantined after {self.failures} consecutive failed "
                                        f"calls (last: {self.last_error}); called again in "
                                        f"{max(self.open_until - now, 0):.0f}s")

    def record(self, error: CallError | None) -> None:
        """The outcome of one admitted attempt."""
        if error is None:
            if self.state != "closed":
                self.failures = 0
                self.cooldown = self.initial_cooldown
                self._set("closed", "a call succeeded: serving again")
            self.failures = 0
            return
        self.failures += 1
        self.last_error = f"{error.kind}: {error.message}"
        if self.state == "half-open" or self.failures >= self.threshold:
            self.open_until = self.clock() + self.cooldown
            message = (f"{self.failures} consecutive failed calls (last: {self.last_error}): "
                       f"not called for {self.cooldown:.0f}s")
            self.cooldown = min(self.cooldown * 2, self.max_cooldown)
            self._set("open", message)

    def seconds_left(self) -> float:
        return max(self.open_until - self.clock(), 0.0) if self.state == "open" else 0.0

    def _set(self, state: BreakerState, message: str) -> None:
        self.state = state
        if self.on_change is not None:
            self.on_change(state, message)


@dataclass(frozen=True, slots=True)
class Answers:
    """What one pod's stage calls answered. ``filter``/``scores`` are None when the stage was
    not asked for or the prefilter rejected the pod; a :class:`CallError` when the call failed
    (or was not made: the prefilter or filter call failing first, or the fragment
    quarantined). ``prefilter`` is None when no prefilter call was asked for (or the module
    has none). Rows are the table's as they were when the calls began: ``occupant`` is
    ``table.occupant[:n]`` then."""

    filter: FilterResult | CallError | None
    scores: IntArray | CallError | None
    occupant: IntArray | None  # None: answered at once, on rows that cannot have changed
    filter_seconds: float = 0.0
    score_seconds: float = 0.0
    prefilter: StageAnswer | CallError | None = None
    prefilter_seconds: float = 0.0

    def failure(self) -> CallError | None:
        """The first failed call, in call order."""
        return next((x for x in (self.prefilter, self.filter, self.scores)
                     if isinstance(x, CallError)), None)

    @classmethod
    def failed(cls, error: CallError, *, filter: bool, score: bool,
               prefilter: bool) -> Answers:
        """Every asked-for stage answered ``error`` (quarantined, no instance)."""
        return cls(error if filter else None, error if score else None, None,
                   prefilter=error if prefilter else None)


def _rows(mask: BoolArray, n: int) -> BoolArray:
    """``mask`` over ``n`` rows: cut, or padded with False for rows added since it was made."""
    if len(mask) >= n:
        return mask[:n]
    out = np.zeros(n, np.bool_)
    out[: len(mask)] = mask
    return out


def _stages(guest: Guest, filter: bool, score: bool, base: BoolArray, *,
            prefilter: bool = False, waiting: bytes = b"",
            ) -> tuple[Answers, CallError | None, float]:
    """The stage calls of one pod (on the worker thread, or inline): the prefilter call first,
    if asked for; unless it failed or rejected the pod, the filter and score calls. The score
    call sees as candidates the ``base`` rows the filter call passed (and the prefilter kept).
    Returns the answers (with the wall-clock seconds of each stage), the first failure and the
    CPU seconds this thread spent on the calls: unlike the wall clock, which a busy machine
    stretches (preemption, waiting for the GIL), CPU time says whether the calls themselves
    are long."""
    pre: StageAnswer | CallError | None = None
    verdict: FilterResult | CallError | None = None
    scores: IntArray | CallError | None = None
    cpu0 = time.thread_time()
    start = time.perf_counter()
    if prefilter:
        try:
            pre = guest.call_stage("prefilter", waiting=waiting)
        except CallError as exc:
            pre = exc
    t0 = time.perf_counter()
    if isinstance(pre, CallError):
        skipped = CallError(pre.kind, "not called: the prefilter call failed")
        answers = Answers(skipped if filter else None, skipped if score else None, None,
                          prefilter=pre, prefilter_seconds=t0 - start)
        return answers, pre, time.thread_time() - cpu0
    if pre is not None and pre.code == PREFILTER_REJECT:
        answers = Answers(None, None, None, prefilter=pre, prefilter_seconds=t0 - start)
        return answers, None, time.thread_time() - cpu0
    if pre is not None and pre.rows is not None:
        base = base & _rows(pre.rows, len(base))
    if filter:
        try:
            verdict = guest.call_filter()
        except CallError as exc:
            verdict = exc
    t1 = time.perf_counter()
    if score:
        if isinstance(verdict, CallError):
            scores = CallError(verdict.kind, "not called: the filter call failed")
        else:
            candidates = base
            if verdict is not None and verdict.passed is not None:
                candidates = candidates & verdict.passed[: len(candidates)]
            try:
                scores = guest.call_score(candidates)
            except CallError as exc:
                scores = exc
    t2 = time.perf_counter()
    answers = Answers(verdict, scores, None, t1 - t0, t2 - t1, pre, t0 - start)
    return answers, answers.failure(), time.thread_time() - cpu0


def _one_stage(guest: Guest, stage: str, node_row: int | None, waiting: bytes, cause: int,
               ) -> tuple[StageAnswer | CallError, CallError | None, float]:
    """One lifecycle call (on the worker thread, or inline): the answer or the failure, the
    failure again, and the CPU seconds it took."""
    cpu0 = time.thread_time()
    try:
        answer: StageAnswer | CallError = guest.call_stage(
            stage, node_row=node_row, waiting=waiting, cause=cause)
        failure = None
    except CallError as exc:
        answer = failure = exc
    return answer, failure, time.thread_time() - cpu0


@dataclass(eq=False)
class Fragment:
    """A compiled fragment ready to serve its stages."""

    name: str
    module: Module
    config: Mapping[str, Any]
    has_filter: bool
    has_score: bool
    digest: str
    runtime: str
    load_seconds: float = 0.0
    log: LogFn | None = None
    stats: FragmentStats = field(default_factory=FragmentStats)
    breaker: Breaker = field(default_factory=Breaker)
    _guest: Guest | None = None
    _worker: CallWorker | None = None
    _lock: asyncio.Lock | None = None
    waiting: int = 0  # pods waiting for their turn or in a call (evaluate)
    call_nice: int = 0  # CPU priority of the call thread (see pyscheduler.wasm.worker)
    # Calls may run on the caller's thread while they take at most this long (0: never);
    # ``offloaded`` turns True for good the first time one does not.
    inline_seconds: float = 0.0
    offloaded: bool = False
    fast_calls: int = 0  # consecutive off-loop evaluations well within inline_seconds
    stages: frozenset[str] = frozenset()  # the lifecycle stages the module exports

    @classmethod
    def compile(cls, wasm: bytes, *, name: str = "fragment",
                config: Mapping[str, Any] | None = None, filter: bool = True,
                score: bool = True, runtime: str = "wasmtime", limits: Limits | None = None,
                log: LogFn | None = None) -> Fragment:
        """Compile and check a module (no instance yet): safe to run in a worker thread."""
        start = time.perf_counter()
        module = get_runtime(runtime).compile(wasm, limits or Limits())
        check_module(module, filter=filter, score=score)
        return cls(name=name, module=module, config=dict(config or {}), has_filter=filter,
                   has_score=score, digest=hashlib.sha256(wasm).hexdigest(), runtime=runtime,
                   load_seconds=time.perf_counter() - start, log=log,
                   stages=exported_stages(module))

    @classmethod
    def load(cls, wasm: bytes, *, name: str = "fragment",
             config: Mapping[str, Any] | None = None, filter: bool = True, score: bool = True,
             runtime: str = "wasmtime", limits: Limits | None = None,
             log: LogFn | None = None, table: NodeTable | None = None) -> Fragment:
        """Compile, check and instantiate (``wssp_init`` included) over ``table``, all on the
        calling thread."""
        fragment = cls.compile(wasm, name=name, config=config, filter=filter, score=score,
                               runtime=runtime, limits=limits, log=log)
        start = time.perf_counter()
        fragment.prepare(table if table is not None else NodeTable())
        fragment.load_seconds += time.perf_counter() - start
        return fragment

    # -- instances -----------------------------------------------------------------------------

    def _usable(self, table: NodeTable) -> Guest | None:
        guest = self._guest
        if guest is None or guest.instance.poisoned or guest.table is not table:
            return None
        return guest

    def _instantiate(self, shape: TableShape, label_capacity: int) -> Guest:
        """A fresh instance (guest code runs: on the worker thread when serving)."""
        guest = Guest(self.module, self.config, shape, log=self.log,
                      label_capacity=label_capacity)
        self.stats.instances += 1
        return guest

    def prepare(self, table: NodeTable) -> Guest:
        """The serving instance for ``table``, created on this thread when there is none or it
        cannot serve."""
        return self._usable(table) or self._new_guest(table)

    def _new_guest(self, table: NodeTable, label_capacity: int = 16) -> Guest:
        self._guest = None
        guest = self._instantiate(TableShape.of(table), label_capacity)
        guest.attach(table)
        self._guest = guest
        return guest

    @property
    def worker(self) -> CallWorker:
        if self._worker is None:
            self._worker = CallWorker(f"fragment-{self.name}", nice=self.call_nice)
        return self._worker

    async def start(self, table: NodeTable) -> Guest:
        """The serving instance for ``table``: instantiated on the worker thread (so that a
        ``wssp_init`` that runs to its limit never holds up the loop), then attached on the
        loop. Raises :class:`LoadError`."""
        guest = self._usable(table)
        if guest is not None:
            return guest
        return await self._start_fresh(table, 16)

    async def _start_fresh(self, table: NodeTable, label_capacity: int) -> Guest:
        self._guest = None
        shape = TableShape.of(table)
        guest = await self.worker.submit(lambda: self._instantiate(shape, label_capacity))
        for _ in range(RESIZE_TRIES):
            try:
                guest.attach(table)
                break
            except Resize:  # the table grew while the instance started
                shape = TableShape.of(table)
                guest = await self.worker.submit(
                    lambda: self._instantiate(shape, label_capacity))
        else:
            raise LoadError("the node table keeps outgrowing fresh instances")
        self._guest = guest
        return guest

    def stop(self) -> None:
        """No more calls: the worker thread ends (a call in flight finishes on its own)."""
        if self._worker is not None:
            self._worker.stop()

    # -- the scheduler's path: off the loop ----------------------------------------------------

    def evaluate_inline(self, ctx: CycleContext, base: BoolArray, *, filter: bool = True,
                        score: bool = True, prefilter: bool = False,
                        waiting: bytes = b"") -> Answers | None:
        """:meth:`evaluate` on the calling thread, when that is safe: the fragment has not
        been offloaded, an instance is serving and no call is in flight or waiting. The calls
        are bounded by ``inline_seconds``; None is returned when this cannot answer (the
        caller then awaits :meth:`evaluate`)."""
        filter, score = filter and self.has_filter, score and self.has_score
        prefilter = prefilter and "prefilter" in self.stages
        guest = self._inline_guest(ctx)
        if isinstance(guest, CallError):
            return Answers.failed(guest, filter=filter, score=score, prefilter=prefilter)
        if guest is None:
            return None
        return self._inline(guest, lambda g: _stages(
            g, filter, score, _rows(base, len(g._valid)), prefilter=prefilter,
            waiting=waiting))

    def _inline_guest(self, ctx: CycleContext) -> Guest | CallError | None:
        """The serving instance begun for ``ctx``'s pod, when its calls may run on this thread
        now; the breaker's refusal when it is open; None when the calls must be awaited."""
        if self.offloaded or not self.inline_seconds or self.waiting \
                or (self._lock is not None and self._lock.locked()):
            return None
        refused = self.breaker.admit()
        if refused is not None:
            return refused
        guest = self._usable(ctx.table)
        if guest is None:
            return None
        try:
            guest.begin(ctx)
        except Resize:
            return None  # a fresh instance is started by the worker
        except (LoadError, CallError):  # its allocator failed: the awaited path starts afresh
            self._guest = None
            return None
        return guest

    def _inline(self, guest: Guest, job: Job[T]) -> T | None:
        """The calls of the pod ``guest`` was begun for, on this thread within
        ``inline_seconds``. None, with the instance dropped, when they overran that bound:
        the pod's calls must be made again on the worker thread, with the whole deadline; when
        the calls themselves used most of the bound (rather than a machine too busy to run
        them), the fragment is offloaded: its calls go there from now on."""
        if not guest.instance.deadlines:
            return None  # no bound to hold the calls to (wasmer): never on the loop
        self.stats.calls += 1
        guest.instance.shorten_deadline(self.inline_seconds)
        try:
            result, failure, cpu = job(guest)
        finally:
            guest.instance.shorten_deadline(None)
        if failure is not None and failure.kind == "timeout" \
                and self.inline_seconds < self.module.limits.timeout_seconds:
            self.stats.calls -= 1
            self._guest = None
            if cpu >= self.inline_seconds / 2:
                self.offloaded = True
                self.fast_calls = 0
            return None
        self._settle(failure, cpu)
        return result

    def _settle(self, failure: CallError | None, cpu: float) -> None:
        """Book one evaluation: the breaker, and whether an offloaded fragment's calls are
        plainly short again (then it runs on the loop again after INLINE_AGAIN_AFTER)."""
        if failure is not None:
            self._failed(failure)
        else:
            self.breaker.record(None)
        if self.offloaded:
            quick = failure is None and cpu < self.inline_seconds / 2
            self.fast_calls = self.fast_calls + 1 if quick else 0
            if self.fast_calls >= INLINE_AGAIN_AFTER:
                self.offloaded = False
                self.fast_calls = 0

    async def evaluate(self, ctx: CycleContext, base: BoolArray, *, filter: bool = True,
                       score: bool = True, prefilter: bool = False,
                       waiting: bytes = b"") -> Answers:
        """This pod's filter and/or score calls: in turn with the fragment's other pods, a
        fresh instance started on the worker thread when needed, the calls on this thread when
        the fragment's calls are short (:meth:`_inline`), else on the worker thread. ``base``:
        rows the score call may consider besides the fragment's own verdicts (the built-in
        filters' answer). With ``prefilter`` (and a module exporting ``wssp_prefilter``) the
        prefilter call comes first, ``waiting`` its waiting pods' lines. Never raises
        :class:`CallError`: failures are in the :class:`Answers`."""
        filter, score = filter and self.has_filter, score and self.has_score
        prefilter = prefilter and "prefilter" in self.stages
        table = ctx.table
        async with self._turn():
            refused = self.breaker.admit()
            if refused is not None:
                return Answers.failed(refused, filter=filter, score=score, prefilter=prefilter)

            def job(guest: Guest, base: BoolArray = base) -> tuple[
                    Answers, CallError | None, float]:
                return _stages(guest, filter, score, _rows(base, len(guest._valid)),
                               prefilter=prefilter, waiting=waiting)
            begun = await self._begin_or_inline(ctx, job)
            if isinstance(begun, Answers):
                return begun
            if isinstance(begun, CallError):
                return Answers.failed(begun, filter=filter, score=score, prefilter=prefilter)
            occupant = table.occupant[: table.n].copy()
            rows = _rows(base, table.n).copy()
            answers = await self._on_worker(begun, lambda g: job(g, rows))
            return dataclasses.replace(answers, occupant=occupant)

    async def call(self, stage: str, ctx: CycleContext, *, node_row: int | None = None,
                   waiting: bytes = b"", cause: int = 0) -> StageAnswer | CallError:
        """One lifecycle call (``wssp_<stage>``, ABI.md §9) for ``ctx``'s pod, as
        :meth:`evaluate` makes its calls: in turn with the fragment's other calls, on this
        thread when they are short, else on the worker thread; refused at once while the
        fragment is quarantined. ``node_row``, ``waiting`` and ``cause`` are the context fields
        of :meth:`Guest.call_stage`. Never raises :class:`CallError`: it is the answer."""
        self._check_stage(stage)
        async with self._turn():
            refused = self.breaker.admit()
            if refused is not None:
                return refused

            def job(guest: Guest) -> tuple[StageAnswer | CallError, CallError | None, float]:
                return _one_stage(guest, stage, node_row, waiting, cause)
            begun = await self._begin_or_inline(ctx, job)
            if isinstance(begun, (StageAnswer, CallError)):
                return begun
            return await self._on_worker(begun, job)

    def call_now(self, stage: str, ctx: CycleContext, *, node_row: int | None = None,
                 waiting: bytes = b"", cause: int = 0) -> StageAnswer | CallError | None:
        """:meth:`call` on the calling thread, when that is safe (see :meth:`evaluate_inline`);
        None when it cannot answer now (the caller then awaits :meth:`call`)."""
        self._check_stage(stage)
        guest = self._inline_guest(ctx)
        if guest is None or isinstance(guest, CallError):
            return guest
        return self._inline(guest, lambda g: _one_stage(g, stage, node_row, waiting, cause))

    def _check_stage(self, stage: str) -> None:
        if stage not in NEW_STAGES:
            raise ValueError(f"unknown stage {stage!r}: one of {', '.join(NEW_STAGES)}")
        if stage not in self.stages:
            raise ValueError(f"fragment {self.name} does not export wssp_{stage}")

    @contextlib.asynccontextmanager
    async def _turn(self) -> AsyncIterator[None]:
        """This call's turn: one pod's calls at a time per fragment (an instance is not
        reentrant); ``waiting`` counts the calls waiting or in flight."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        self.waiting += 1
        try:
            async with self._lock:
                yield
        finally:
            self.waiting -= 1

    async def _begin_or_inline(self, ctx: CycleContext, job: Job[T]) -> T | Guest | CallError:
        """The serving instance begun for ``ctx``'s pod, or already ``job``'s result when it
        could run on this thread (:meth:`_inline`); the failure when no instance can serve."""
        try:
            guest = await self._begun(ctx)
            if not self.offloaded and self.inline_seconds and guest.instance.deadlines:
                result = self._inline(guest, job)
                if result is not None:
                    return result
                guest = await self._begun(ctx)  # the overrun dropped the instance
        except CallError as exc:
            return self._failed(exc)
        return guest

    async def _on_worker(self, guest: Guest, job: Job[T]) -> T:
        """``job`` on the worker thread, booked."""
        self.stats.calls += 1
        try:
            result, failure, cpu = await self.worker.submit(lambda: job(guest))
        except asyncio.CancelledError:
            # The call goes on in the worker thread: nobody may touch this instance again.
            self._guest = None
            raise
        self._settle(failure, cpu)
        return result

    async def _begun(self, ctx: CycleContext) -> Guest:
        """The serving instance (started on the worker thread if needed), begun for the pod of
        ``ctx``; :class:`CallError` when no instance can serve."""
        table = ctx.table
        try:
            guest = await self.start(table)
            for _ in range(RESIZE_TRIES):
                try:
                    guest.begin(ctx)
                    return guest
                except Resize:
                    guest = await self._start_fresh(table, 2 * guest.label_capacity)
        except LoadError as exc:
            raise CallError("trap", f"fresh instance failed: {exc}") from None
        raise CallError("trap", "the node table keeps outgrowing fresh instances")

    def _failed(self, error: CallError) -> CallError:
        self.stats.failures += 1
        self.stats.last_error = error.message
        self._guest = None  # the next call instantiates afresh
        self.breaker.record(error)
        return error

    # -- everything on the calling thread ------------------------------------------------------

    def _run(self, ctx: CycleContext, stage: Callable[[Guest], Any]) -> Any:
        self.stats.calls += 1
        try:
            guest = self.prepare(ctx.table)
            for _ in range(RESIZE_TRIES):
                try:
                    return stage(guest)
                except Resize:
                    guest = self._new_guest(ctx.table, 2 * guest.label_capacity)
            raise CallError("trap", "the node table keeps outgrowing fresh instances")
        except LoadError as exc:
            # A module that loaded once but cannot be instantiated now (its wssp_init refuses,
            # or runs out of memory on a larger table): this call fails like a trap.
            self._sync_failed(str(exc))
            raise CallError("trap", f"fresh instance failed: {exc}") from None
        except CallError as exc:
            self._sync_failed(exc.message)
            raise

    def _sync_failed(self, message: str) -> None:
        self.stats.failures += 1
        self.stats.last_error = message
        self._guest = None

    def filter(self, ctx: CycleContext) -> FilterResult:
        result: FilterResult = self._run(ctx, lambda g: g.filter(ctx))
        return result

    def score(self, ctx: CycleContext, feasible: BoolArray) -> IntArray:
        scores: IntArray = self._run(ctx, lambda g: g.score(ctx, feasible))
        return scores

    def call_sync(self, stage: str, ctx: CycleContext, *, node_row: int | None = None,
                  waiting: bytes = b"", cause: int = 0) -> StageAnswer:
        """One lifecycle call on the calling thread; raises :class:`CallError`."""
        self._check_stage(stage)
        answer: StageAnswer = self._run(ctx, lambda g: g.stage(
            stage, ctx, node_row=node_row, waiting=waiting, cause=cause))
        return answer


def unchanged_rows(answers: Answers, table: NodeTable) -> BoolArray | None:
    """Over ``table``'s current rows: those that still hold the node the answers were computed
    for (a row added or given to another node since is False); None when every row does."""
    n = table.n
    old = answers.occupant
    if old is None:
        return None
    same = np.zeros(n, np.bool_)
    m = min(n, len(old))
    same[:m] = table.occupant[:m] == old[:m]
    return None if m == n and bool(same.all()) else same

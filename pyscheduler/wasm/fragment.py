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
import hashlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from pyscheduler.framework.interface import CycleContext, FilterResult
from pyscheduler.framework.nodetable import BoolArray, IntArray, NodeTable
from pyscheduler.wasm.abi import Guest, Resize, TableShape, check_module
from pyscheduler.wasm.errors import CallError, LoadError
from pyscheduler.wasm.vm import Limits, Module, get_runtime
from pyscheduler.wasm.worker import CallWorker

__all__ = ["Answers", "Breaker", "BreakerState", "Fragment", "FragmentStats", "unchanged_rows"]

LogFn = Callable[[int, bytes], None]
BreakerState = Literal["closed", "open", "half-open"]

BREAKER_THRESHOLD = 5
BREAKER_COOLDOWN_SECONDS = 30.0
BREAKER_MAX_COOLDOWN_SECONDS = 300.0
# Fresh instances tried for one pod when the table keeps outgrowing them.
RESIZE_TRIES = 3
# Consecutive short calls off the loop after which an offloaded fragment runs on the loop again.
INLINE_AGAIN_AFTER = 20


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
    not asked for; a :class:`CallError` when the call failed (or was not made: the filter call
    failing first, or the fragment quarantined). Rows are the table's as they were when the
    calls began: ``occupant`` is ``table.occupant[:n]`` then."""

    filter: FilterResult | CallError | None
    scores: IntArray | CallError | None
    occupant: IntArray | None  # None: answered at once, on rows that cannot have changed
    filter_seconds: float = 0.0
    score_seconds: float = 0.0


def _rows(mask: BoolArray, n: int) -> BoolArray:
    """``mask`` over ``n`` rows: cut, or padded with False for rows added since it was made."""
    if len(mask) >= n:
        return mask[:n]
    out = np.zeros(n, np.bool_)
    out[: len(mask)] = mask
    return out


def _stages(guest: Guest, filter: bool, score: bool, base: BoolArray,
            ) -> tuple[FilterResult | CallError | None, IntArray | CallError | None,
                       float, float, float]:
    """The stage calls of one pod (on the worker thread, or inline). The score call sees as
    candidates the ``base`` rows the filter call passed. Returns the answers, the wall-clock
    seconds of each stage and the CPU seconds this thread spent on both: unlike the wall
    clock, which a busy machine stretches (preemption, waiting for the GIL), CPU time says
    whether the calls themselves are long."""
    verdict: FilterResult | CallError | None = None
    scores: IntArray | CallError | None = None
    cpu0 = time.thread_time()
    t0 = time.perf_counter()
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
    return verdict, scores, t1 - t0, t2 - t1, time.thread_time() - cpu0


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
                   load_seconds=time.perf_counter() - start, log=log)

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
                        score: bool = True) -> Answers | None:
        """:meth:`evaluate` on the calling thread, when that is safe: the fragment has not
        been offloaded, an instance is serving and no call is in flight or waiting. The calls
        are bounded by ``inline_seconds``; None is returned when this cannot answer (the
        caller then awaits :meth:`evaluate`)."""
        if self.offloaded or not self.inline_seconds or self.waiting \
                or (self._lock is not None and self._lock.locked()):
            return None
        refused = self.breaker.admit()
        if refused is not None:
            return Answers(refused if filter else None, refused if score else None, None)
        guest = self._usable(ctx.table)
        if guest is None:
            return None
        try:
            guest.begin(ctx)
        except Resize:
            return None  # a fresh instance is started by the worker
        return self._inline(guest, base, filter and self.has_filter, score and self.has_score)

    def _inline(self, guest: Guest, base: BoolArray, filter: bool,
                score: bool) -> Answers | None:
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
            verdict, scores, filter_seconds, score_seconds, cpu = _stages(
                guest, filter, score, _rows(base, len(guest._valid)))
        finally:
            guest.instance.shorten_deadline(None)
        failure = next((x for x in (verdict, scores) if isinstance(x, CallError)), None)
        if failure is not None and failure.kind == "timeout" \
                and self.inline_seconds < self.module.limits.timeout_seconds:
            self.stats.calls -= 1
            self._guest = None
            if cpu >= self.inline_seconds / 2:
                self.offloaded = True
                self.fast_calls = 0
            return None
        self._settle(failure, cpu)
        return Answers(verdict, scores, None, filter_seconds, score_seconds)

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
                       score: bool = True) -> Answers:
        """This pod's filter and/or score calls: in turn with the fragment's other pods, a
        fresh instance started on the worker thread when needed, the calls on this thread when
        the fragment's calls are short (:meth:`_inline`), else on the worker thread. ``base``:
        rows the score call may consider besides the fragment's own verdicts (the built-in
        filters' answer). Never raises :class:`CallError`: failures are in the
        :class:`Answers`."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        self.waiting += 1
        try:
            async with self._lock:
                return await self._evaluate(ctx, base, filter and self.has_filter,
                                            score and self.has_score)
        finally:
            self.waiting -= 1

    async def _evaluate(self, ctx: CycleContext, base: BoolArray, filter: bool,
                        score: bool) -> Answers:
        table = ctx.table
        refused = self.breaker.admit()
        if refused is not None:
            return Answers(refused if filter else None, refused if score else None, None)
        try:
            guest = await self._begun(ctx)
            if not self.offloaded and self.inline_seconds and guest.instance.deadlines:
                answers = self._inline(guest, base, filter, score)
                if answers is not None:
                    return answers
                guest = await self._begun(ctx)  # the overrun dropped the instance
        except CallError as exc:
            error = self._failed(exc)
            return Answers(error if filter else None, error if score else None, None)
        self.stats.calls += 1
        occupant = table.occupant[: table.n].copy()
        base = _rows(base, table.n).copy()
        try:
            verdict, scores, filter_seconds, score_seconds, cpu = await self.worker.submit(
                lambda: _stages(guest, filter, score, base))
        except asyncio.CancelledError:
            # The call goes on in the worker thread: nobody may touch this instance again.
            self._guest = None
            raise
        self._settle(next((x for x in (verdict, scores) if isinstance(x, CallError)), None),
                     cpu)
        return Answers(verdict, scores, occupant, filter_seconds, score_seconds)

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

"""A loaded fragment: one compiled module, its configuration, and the instance serving it.

:meth:`Fragment.load` does everything that can fail at load time — compile (CPU heavy: the manager
runs it in a worker thread), check the ABI exports and imports, instantiate, ``wssp_init`` and the
first full write of the node table — so that a fragment that loaded serves. Its :meth:`filter`
and :meth:`score` are the pipeline's stage functions (see
:class:`pyscheduler.framework.pipeline.StageOverride`). They raise :class:`CallError` on any
failed call; the instance is then dropped and the next call gets a fresh one (instantiating from
the compiled module is cheap next to compiling), as it does when the node table outgrows the
instance's buffers.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pyscheduler.framework.interface import CycleContext, FilterResult
from pyscheduler.framework.nodetable import BoolArray, IntArray, NodeTable
from pyscheduler.wasm.abi import Guest, Resize, check_module
from pyscheduler.wasm.errors import CallError, LoadError
from pyscheduler.wasm.vm import Limits, Module, get_runtime

__all__ = ["Fragment", "FragmentStats"]

LogFn = Callable[[int, bytes], None]


@dataclass(slots=True)
class FragmentStats:
    calls: int = 0
    failures: int = 0
    instances: int = 0
    last_error: str = ""


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
    _guest: Guest | None = None

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
        """Compile, check and instantiate (``wssp_init`` included) over ``table``."""
        fragment = cls.compile(wasm, name=name, config=config, filter=filter, score=score,
                               runtime=runtime, limits=limits, log=log)
        start = time.perf_counter()
        fragment.prepare(table if table is not None else NodeTable())
        fragment.load_seconds += time.perf_counter() - start
        return fragment

    def prepare(self, table: NodeTable) -> Guest:
        """The serving instance for ``table``, created when there is none or it cannot serve."""
        guest = self._guest
        if guest is None or guest.instance.poisoned or guest.table is not table:
            guest = self._new_guest(table)
        return guest

    def _new_guest(self, table: NodeTable, label_capacity: int = 16) -> Guest:
        self._guest = None
        guest = Guest(self.module, self.config, table, log=self.log,
                      label_capacity=label_capacity)
        self.stats.instances += 1
        self._guest = guest
        return guest

    def _run(self, ctx: CycleContext, stage: Callable[[Guest], Any]) -> Any:
        self.stats.calls += 1
        try:
            guest = self.prepare(ctx.table)
            for _ in range(3):
                try:
                    return stage(guest)
                except Resize:
                    guest = self._new_guest(ctx.table, 2 * guest.label_capacity)
            raise CallError("trap", "the node table keeps outgrowing fresh instances")
        except LoadError as exc:
            # A module that loaded once but cannot be instantiated now (its wssp_init refuses,
            # or runs out of memory on a larger table): this call fails like a trap.
            self._failed(str(exc))
            raise CallError("trap", f"fresh instance failed: {exc}") from None
        except CallError as exc:
            self._failed(exc.message)
            raise

    def _failed(self, message: str) -> None:
        self.stats.failures += 1
        self.stats.last_error = message
        self._guest = None  # the next call instantiates afresh

    def filter(self, ctx: CycleContext) -> FilterResult:
        result: FilterResult = self._run(ctx, lambda g: g.filter(ctx))
        return result

    def score(self, ctx: CycleContext, feasible: BoolArray) -> IntArray:
        scores: IntArray = self._run(ctx, lambda g: g.score(ctx, feasible))
        return scores

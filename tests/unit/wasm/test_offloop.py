"""Fragment calls off the scheduling loop: the worker thread, the breaker that quarantines a
failing fragment, and answers mapped back onto rows that may have changed meanwhile."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import numpy as np
import pytest

from pyscheduler.framework.interface import CycleContext
from pyscheduler.framework.nodetable import NodeTable, node_info
from pyscheduler.framework.pod import pod_info
from pyscheduler.wasm.errors import CallError
from pyscheduler.wasm.fragment import Breaker, Fragment, unchanged_rows
from pyscheduler.wasm.manager import CHANGED_ROW_REASON, _on_current_rows
from pyscheduler.wasm.vm import Limits
from pyscheduler.wasm.worker import CallWorker
from tests.unit.plugins.builders import make_node, make_pod

wasmtime = pytest.importorskip("wasmtime")
HOSTILE = Path(__file__).resolve().parents[3] / "fragments" / "hostile"

# wssp_filter traps while the table has more than 3 nodes, and lets every node pass otherwise.
FAILS_ABOVE_THREE = """
(module
  (memory (export "memory") 1)
  (global $heap (mut i32) (i32.const 1024))
  (func (export "wssp_abi_v1") (result i32) (i32.const 1))
  (func (export "wssp_alloc") (param $size i32) (result i32)
    (local $ptr i32)
    (local.set $ptr (global.get $heap))
    (global.set $heap (i32.and (i32.add (i32.add (local.get $ptr) (local.get $size))
                                        (i32.const 7)) (i32.const -8)))
    (if (i32.gt_u (global.get $heap) (i32.shl (memory.size) (i32.const 16)))
      (then (if (i32.eq (memory.grow (i32.const 4)) (i32.const -1))
              (then (return (i32.const 0))))))
    (local.get $ptr))
  (func (export "wssp_init") (param i32 i32 i32) (result i32) (i32.const 0))
  (func (export "wssp_filter") (param $ctx i32) (result i32)
    (if (i32.gt_u (i32.load offset=8 (local.get $ctx)) (i32.const 3)) (then (unreachable)))
    (i32.const 0))
)
"""


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def node(name: str) -> dict[str, object]:
    return make_node(name).capacity(cpu="4", memory="8Gi", pods=10).obj()


def table_of(*names: str) -> NodeTable:
    table = NodeTable()
    for name in names:
        table.set_node(node_info(node(name)))
    return table


def ctx_for(table: NodeTable) -> CycleContext:
    return CycleContext.for_pod(pod_info(make_pod().req(cpu="1").obj()), table)


# -- the worker ---------------------------------------------------------------------------------

def test_the_worker_runs_jobs_in_order_on_its_own_thread() -> None:
    async def main() -> None:
        worker = CallWorker("t")
        seen: list[tuple[int, str]] = []
        futures = [worker.submit(lambda i=i: seen.append((i, threading.current_thread().name))
                                 or i) for i in range(20)]
        assert await asyncio.gather(*futures) == list(range(20))
        assert [i for i, _ in seen] == list(range(20))
        assert {name for _, name in seen} == {"wssp-t"}

        def boom() -> None:
            raise ValueError("in the job")
        with pytest.raises(ValueError, match="in the job"):
            await worker.submit(boom)
        worker.stop()
        with pytest.raises(RuntimeError, match="stopped"):
            worker.submit(lambda: 1)
    asyncio.run(main())


@pytest.mark.skipif(not hasattr(threading, "get_native_id"), reason="no thread ids")
def test_the_worker_runs_at_the_priority_it_was_given() -> None:
    import os

    async def main() -> tuple[int, int]:
        worker = CallWorker("low", nice=7)
        own = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
        there = await worker.submit(
            lambda: os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
        worker.stop()
        return own, there
    own, there = asyncio.run(main())
    assert there == min(own + 7, 19)


def test_the_loop_runs_while_a_fragment_call_spins_to_its_deadline() -> None:
    """infinite-loop.wasm's filter runs until its deadline; meanwhile the loop keeps turning (on
    the scheduling loop itself, as before, it could not turn at all until the call ended)."""
    async def main() -> None:
        table = table_of("a", "b")
        frag = Fragment.compile((HOSTILE / "infinite-loop.wasm").read_bytes(), score=False,
                                limits=Limits(fuel=10**12, timeout_seconds=0.5))
        await frag.start(table)
        ctx = ctx_for(table)
        call = asyncio.ensure_future(frag.evaluate(ctx, ctx.nodes().copy(), score=False))
        turns_during_call = 0
        while not call.done():
            await asyncio.sleep(0.01)
            if not call.done():
                turns_during_call += 1
        answers = call.result()
        assert isinstance(answers.filter, CallError) and answers.filter.kind == "timeout"
        assert turns_during_call > 0
        frag.stop()
    asyncio.run(main())


def test_instantiation_runs_on_the_fragment_thread() -> None:
    """A wssp_init that loops never runs on the loop: start() fails with the deadline, and the
    loop turned meanwhile."""
    from pyscheduler.wasm.errors import LoadError

    async def main() -> None:
        frag = Fragment.compile((HOSTILE / "init-loops.wasm").read_bytes(),
                                limits=Limits(fuel=10**12, timeout_seconds=0.2))
        start = asyncio.ensure_future(frag.start(table_of("a")))
        turns = 0
        while not start.done():
            await asyncio.sleep(0.01)
            turns += not start.done()
        with pytest.raises(LoadError, match="wssp_init failed: deadline exceeded"):
            start.result()
        assert turns > 0
        frag.stop()
    asyncio.run(main())


# -- the breaker --------------------------------------------------------------------------------

def test_breaker_opens_after_consecutive_failures_and_retries_after_a_cool_down() -> None:
    clock = Clock()
    breaker = Breaker(threshold=3, cooldown=10, max_cooldown=25, clock=clock)
    changes: list[str] = []
    breaker.on_change = lambda state, message: changes.append(state)
    failure = CallError("timeout", "deadline exceeded")
    for _ in range(2):
        assert breaker.admit() is None
        breaker.record(failure)
    breaker.record(None)  # a success in between: the count starts over
    for _ in range(3):
        assert breaker.admit() is None
        breaker.record(failure)
    assert changes == ["open"]
    refused = breaker.admit()
    assert refused is not None and refused.kind == "quarantined"
    assert "3 consecutive failed calls (last: timeout: deadline exceeded)" in refused.message
    clock.now += 9.9
    assert breaker.admit() is not None
    clock.now += 0.2
    assert breaker.admit() is None and changes == ["open", "half-open"]
    breaker.record(failure)  # the trial failed: open again, for twice as long
    assert changes[-1] == "open" and breaker.seconds_left() == pytest.approx(20)
    clock.now += 20.1
    assert breaker.admit() is None
    breaker.record(failure)
    assert breaker.seconds_left() == pytest.approx(25)  # at most max_cooldown
    clock.now += 25.1
    assert breaker.admit() is None
    breaker.record(None)
    assert changes[-1] == "closed" and breaker.admit() is None
    for _ in range(2):
        breaker.record(failure)
    assert breaker.state == "closed"  # the cool-down starts over too
    breaker.record(failure)
    assert breaker.seconds_left() == pytest.approx(10)


def test_a_fragment_that_keeps_failing_is_not_called_until_its_cool_down_ends() -> None:
    async def main() -> None:
        clock = Clock()
        table = table_of("a", "b", "c", "d")  # four nodes: the filter traps
        frag = Fragment.compile(wasmtime.wat2wasm(FAILS_ABOVE_THREE), score=False)
        frag.breaker = Breaker(threshold=2, cooldown=30, clock=clock)
        await frag.start(table)
        ctx = ctx_for(table)
        kinds = []
        for _ in range(5):
            answers = await frag.evaluate(ctx, ctx.nodes().copy(), score=False)
            assert isinstance(answers.filter, CallError)
            kinds.append(answers.filter.kind)
        assert kinds == ["trap", "trap", "quarantined", "quarantined", "quarantined"]
        assert frag.stats.calls == 2 and frag.breaker.state == "open"
        small = table_of("a", "b", "c")  # calls would work here, but the fragment waits
        answers = await frag.evaluate(ctx_for(small), small.valid[: small.n].copy(),
                                      score=False)
        assert isinstance(answers.filter, CallError) and answers.filter.kind == "quarantined"
        clock.now += 31
        answers = await frag.evaluate(ctx_for(small), small.valid[: small.n].copy(),
                                      score=False)
        assert not isinstance(answers.filter, CallError)
        assert frag.breaker.state == "closed" and frag.stats.calls == 3
        frag.stop()
    asyncio.run(main())


# -- answers on the rows of now -----------------------------------------------------------------

def test_rows_that_changed_node_while_the_fragment_decided_fail_its_filter() -> None:
    async def main() -> None:
        table = table_of("a", "b", "c")
        frag = Fragment.compile(wasmtime.wat2wasm(FAILS_ABOVE_THREE), score=False)
        await frag.start(table)
        answers = await frag.evaluate(ctx_for(table), table.valid[: table.n].copy(),
                                      score=False)
        frag.stop()
        table.remove_node("b")
        table.set_node(node_info(node("x")))  # takes b's slot
        table.set_node(node_info(node("y")))  # a new row
        same = unchanged_rows(answers, table)
        assert same.tolist() == [True, False, True, False]
        assert not isinstance(answers.filter, CallError) and answers.filter is not None
        verdict = _on_current_rows(answers.filter, same)
        assert verdict.passed is not None
        assert verdict.passed.tolist() == [True, False, True, False]
        [changed] = [r for r in verdict.reasons if r.message == CHANGED_ROW_REASON]
        assert np.flatnonzero(changed.failed).tolist() == [1, 3]
    asyncio.run(main())


# -- short calls stay on the loop, long ones move off it --------------------------------------

def counting(frag: Fragment) -> list[int]:
    """Count the jobs handed to the fragment's worker thread."""
    jobs = [0]
    worker = frag.worker
    submit = worker.submit

    def counted(fn):  # type: ignore[no-untyped-def]
        jobs[0] += 1
        return submit(fn)
    worker.submit = counted  # type: ignore[method-assign]
    return jobs


def test_short_calls_run_on_the_loop_and_a_long_one_moves_the_fragment_off_it() -> None:
    async def main() -> None:
        table = table_of("a", "b")
        ctx = ctx_for(table)
        fast = Fragment.compile(wasmtime.wat2wasm(FAILS_ABOVE_THREE), score=False)
        fast.inline_seconds = 0.005
        await fast.start(table)
        jobs = counting(fast)
        for _ in range(5):
            answers = fast.evaluate_inline(ctx, ctx.nodes().copy(), score=False)
            assert answers is not None and not isinstance(answers.filter, CallError)
        assert jobs == [0] and not fast.offloaded

        slow = Fragment.compile((HOSTILE / "infinite-loop.wasm").read_bytes(), score=False,
                                limits=Limits(fuel=10**12, timeout_seconds=0.3))
        slow.inline_seconds = 0.005
        await slow.start(table)
        jobs = counting(slow)
        # Stopped at the inline bound (not at its 0.3 s deadline), and no failure counted:
        # the call is made again off the loop, where it gets the whole deadline.
        assert slow.evaluate_inline(ctx, ctx.nodes().copy(), score=False) is None
        assert slow.offloaded and slow.stats.failures == 0 and slow.breaker.failures == 0
        assert slow.evaluate_inline(ctx, ctx.nodes().copy(), score=False) is None
        answers = await slow.evaluate(ctx, ctx.nodes().copy(), score=False)
        assert isinstance(answers.filter, CallError)
        assert answers.filter.message == "deadline exceeded: the call ran longer than 0.3 s"
        assert jobs[0] == 2  # a fresh instance, then the call
        fast.stop()
        slow.stop()
    asyncio.run(main())


def test_an_offloaded_fragment_returns_to_the_loop_once_its_calls_are_short_again() -> None:
    from pyscheduler.wasm.fragment import INLINE_AGAIN_AFTER

    async def main() -> None:
        table = table_of("a", "b")
        ctx = ctx_for(table)
        frag = Fragment.compile(wasmtime.wat2wasm(FAILS_ABOVE_THREE), score=False)
        frag.inline_seconds = 0.5  # every call is well within half of it
        await frag.start(table)
        frag.offloaded = True  # as after one call that overran (a hiccup of the machine)
        for i in range(INLINE_AGAIN_AFTER):
            assert frag.offloaded, i
            await frag.evaluate(ctx, ctx.nodes().copy(), score=False)
        assert not frag.offloaded
        assert frag.evaluate_inline(ctx, ctx.nodes().copy(), score=False) is not None
        frag.stop()
    asyncio.run(main())


def test_a_base_computed_before_nodes_were_added_is_padded() -> None:
    """The rows the score call may consider were worked out before the pod's turn came; the
    table grew meanwhile: the new rows are simply not candidates."""
    async def main() -> None:
        table = table_of("a", "b")
        base = table.valid[: table.n].copy()
        for name in ("c", "d", "e"):
            table.set_node(node_info(node(name)))
        from pyscheduler.wasm.manager import PACKAGED_DIR

        frag = Fragment.compile((PACKAGED_DIR / "default-v1.0.0.wasm").read_bytes())
        await frag.start(table)
        for inline in (0.0, 0.005):  # on the worker thread, and on the loop
            frag.inline_seconds = inline
            answers = await frag.evaluate(ctx_for(table), base)
            assert not isinstance(answers.filter, CallError) and answers.filter is not None
            assert not isinstance(answers.scores, CallError) and answers.scores is not None
            assert answers.scores.tolist()[2:] == [0, 0, 0]  # not candidates: no score
            assert min(answers.scores.tolist()[:2]) > 0
        frag.stop()
    asyncio.run(main())

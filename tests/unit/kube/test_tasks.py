"""cancel_and_wait and bounded never lose a cancellation."""

from __future__ import annotations

import asyncio

import pytest

from pyscheduler.kube.tasks import bounded, cancel_and_wait


def test_cancel_and_wait_outlasts_a_swallowed_cancellation() -> None:
    async def body() -> None:
        swallowed = []

        async def stubborn() -> None:
            while True:
                try:
                    await asyncio.sleep(10)
                except asyncio.CancelledError:
                    if not swallowed:  # lose the first cancellation, as a racy wait_for can
                        swallowed.append(True)
                        continue
                    raise
        task = asyncio.get_running_loop().create_task(stubborn())
        await asyncio.sleep(0)
        await asyncio.wait_for(cancel_and_wait(task), 5)
        assert task.cancelled() and swallowed
    asyncio.run(body())


def test_cancel_and_wait_lets_the_callers_cancellation_through() -> None:
    async def body() -> None:
        async def slow_cleanup() -> None:
            try:
                await asyncio.sleep(10)
            finally:
                await asyncio.shield(asyncio.sleep(0.3))
        task = asyncio.get_running_loop().create_task(slow_cleanup())
        await asyncio.sleep(0)
        stopper = asyncio.get_running_loop().create_task(cancel_and_wait(task))
        await asyncio.sleep(0.05)
        stopper.cancel()
        with pytest.raises(asyncio.CancelledError):
            await stopper
        await asyncio.wait([task])
    asyncio.run(body())


def test_bounded_times_out_and_cancels_the_work() -> None:
    async def body() -> None:
        started = asyncio.Event()

        async def forever() -> None:
            started.set()
            await asyncio.sleep(10)
        with pytest.raises(asyncio.TimeoutError):
            await bounded(forever(), 0.05)
        assert started.is_set()
        assert await bounded(asyncio.sleep(0, result=7), 1) == 7
        with pytest.raises(ZeroDivisionError):
            await bounded(_fail(), 1)
    asyncio.run(body())


async def _fail() -> None:
    raise ZeroDivisionError


def test_bounded_never_swallows_a_cancellation_at_completion() -> None:
    async def body() -> None:
        for _ in range(50):
            inner = asyncio.Event()

            async def waiter() -> None:
                await bounded(inner.wait(), 5)
                await asyncio.sleep(10)  # must never get here after a cancel
            task = asyncio.get_running_loop().create_task(waiter())
            await asyncio.sleep(0)
            inner.set()       # the inner completes ...
            task.cancel()     # ... in the same loop iteration as the cancellation
            await asyncio.wait([task], timeout=1)
            assert task.cancelled()
    asyncio.run(body())


# -- Supervisor ---------------------------------------------------------------------------------

@pytest.mark.parametrize("how", ["raises", "returns", "cancelled from outside"])
def test_a_watched_task_that_ends_is_a_failure(how: str) -> None:
    from pyscheduler.kube.tasks import Supervisor

    async def main() -> list[tuple[str, str]]:
        failures: list[tuple[str, str]] = []
        supervisor = Supervisor(lambda name, why: failures.append((name, why)))

        async def body() -> None:
            await asyncio.sleep(0.01)
            if how == "raises":
                raise RuntimeError("bug")
            if how == "returns":
                return
            await asyncio.sleep(10)

        task = asyncio.get_running_loop().create_task(body())
        calm = asyncio.get_running_loop().create_task(asyncio.sleep(10))
        supervisor.watch("the loop", task)
        supervisor.watch("calm", calm)
        if how == "cancelled from outside":
            await asyncio.sleep(0.02)
            task.cancel()
        await asyncio.wait([task])
        await asyncio.sleep(0)
        # One failure is all it takes; what ends afterwards is not reported again.
        calm.cancel()
        await asyncio.wait([calm])
        await asyncio.sleep(0)
        return failures

    failures = asyncio.run(main())
    why = {"raises": "failed: RuntimeError: bug", "returns": "returned",
           "cancelled from outside": "cancelled"}[how]
    assert failures == [("the loop", why)]


def test_tasks_stopped_on_purpose_are_not_failures() -> None:
    from pyscheduler.kube.tasks import Supervisor

    async def main() -> list[tuple[str, str]]:
        failures: list[tuple[str, str]] = []
        supervisor = Supervisor(lambda name, why: failures.append((name, why)))
        owned = asyncio.get_running_loop().create_task(asyncio.sleep(10))
        rest = asyncio.get_running_loop().create_task(asyncio.sleep(10))
        supervisor.watch("owned", owned)
        supervisor.watch("rest", rest)
        supervisor.unwatch(owned)
        await cancel_and_wait(owned)
        supervisor.stop()
        await cancel_and_wait(rest)
        await asyncio.sleep(0)
        assert supervisor.watched == {}
        return failures

    assert asyncio.run(main()) == []

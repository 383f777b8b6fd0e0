"""The pod's fragment at PostFilter: it runs first, and its answer bounds what the other
PostFilter plugins may do — which of them run, on which nodes — and its message joins the
pod's, under the fragment's name."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

from pyscheduler.binding.fragment import Fragment, attach
from pyscheduler.framework.interface import CycleContext
from pyscheduler.framework.lifecycle import PostFilterAnswer, PostFilterChoice
from pyscheduler.framework.pipeline import Filtered, StageFailed
from pyscheduler.framework.runtime import Framework
from pyscheduler.framework.status import Code, Status
from pyscheduler.kube.client import ConnectionConfig, KubeClient
from tests.unit.framework.test_runtime import context, nothing_fits


class Logic:
    """A pod's post-filter logic answering from a script (now, or only off the loop)."""

    name = "gang"
    stages = frozenset({"postfilter"})

    def __init__(self, answer: PostFilterAnswer | Exception, now: bool = True) -> None:
        self.answer = answer
        self.now = now
        self.asked = 0

    def _give(self) -> PostFilterAnswer:
        self.asked += 1
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer

    def postfilter_now(self, ctx: CycleContext) -> PostFilterAnswer | None:
        return self._give() if self.now else None

    async def postfilter(self, ctx: CycleContext) -> PostFilterAnswer:
        return self._give()


class Helper:
    """A PostFilter plugin that writes down the nodes it was allowed to look at."""

    def __init__(self, name: str, seen: list[tuple[str, list[str]]]) -> None:
        self.name = name
        self.seen = seen

    def post_filter(self, ctx: CycleContext, filtered: Filtered) -> Any:
        names = [ctx.table.names[i] for i in np.flatnonzero(filtered.outcome.valid)]
        self.seen.append((self.name, names))
        return None, Status.of(Code.UNSCHEDULABLE, f"{self.name}: no")


def attempt(logic: Logic, answers: dict[str, str] | None = None
            ) -> tuple[Any, list[tuple[str, list[str]]], Framework, CycleContext, Filtered]:
    ctx = context()
    attach(ctx, logic, answers)  # type: ignore[arg-type]
    seen: list[tuple[str, list[str]]] = []
    fw = Framework("t", post_filter=(
        Fragment(KubeClient(ConnectionConfig(host="http://127.0.0.1:9"))),
        Helper("DefaultPreemption", seen), Helper("CloudBurst", seen)))
    filtered = nothing_fits(ctx)
    return fw.run_post_filter(ctx, filtered), seen, fw, ctx, filtered


@pytest.mark.parametrize(("answer", "ran", "code"), [
    (PostFilterAnswer(), [("DefaultPreemption", ["n1", "n2", "n3"]),
                          ("CloudBurst", ["n1", "n2", "n3"])], Code.UNSCHEDULABLE),
    (PostFilterAnswer(PostFilterChoice.PREEMPT),
     [("DefaultPreemption", ["n1", "n2", "n3"])], Code.UNSCHEDULABLE),
    (PostFilterAnswer(PostFilterChoice.BURST),
     [("CloudBurst", ["n1", "n2", "n3"])], Code.UNSCHEDULABLE),
    (PostFilterAnswer(PostFilterChoice.NOMINATE, "n2"),
     [("DefaultPreemption", ["n2"])], Code.UNSCHEDULABLE),
    (PostFilterAnswer(PostFilterChoice.WAIT), [], Code.UNSCHEDULABLE_AND_UNRESOLVABLE),
], ids=["default", "preempt", "burst", "nominate", "wait"])
def test_the_fragments_answer_bounds_the_other_postfilter_plugins(
        answer: PostFilterAnswer, ran: list[tuple[str, list[str]]], code: Code) -> None:
    answers: dict[str, str] = {}
    run, seen, _, _, _ = attempt(Logic(answer), answers)
    assert seen == ran
    assert run.status.code is code
    assert run.reasons == tuple(f"{name}: no" for name, _ in ran)
    assert answers == {"postfilter": answer.describe()}


def test_the_fragments_message_joins_the_reasons_under_its_name_in_plugin_order() -> None:
    run, _, _, _, _ = attempt(Logic(PostFilterAnswer(message="group incomplete")))
    assert run.reasons == ("gang: group incomplete", "DefaultPreemption: no", "CloudBurst: no")
    assert run.status.plugin == "Fragment"


def test_an_answer_worked_out_off_the_loop_is_kept_for_the_next_attempt() -> None:
    logic = Logic(PostFilterAnswer(PostFilterChoice.BURST), now=False)
    run, seen, fw, ctx, filtered = attempt(logic)
    assert run.status.code is Code.PENDING and run.deferred is not None
    assert seen == []
    asyncio.run(run.deferred[1])
    again = fw.run_post_filter(ctx, filtered)
    assert seen == [("CloudBurst", ["n1", "n2", "n3"])]
    assert logic.asked == 1  # kept, not asked twice
    third = fw.run_post_filter(ctx, filtered)
    assert third.status.code is Code.PENDING  # used once: a later attempt asks again
    assert third.deferred is not None
    asyncio.run(third.deferred[1])
    assert again.status.code is Code.UNSCHEDULABLE


def test_a_fragment_failing_under_policy_fail_is_an_error_of_its_plugin() -> None:
    run, seen, _, _, _ = attempt(Logic(StageFailed("fragment gang failed: trap")))
    assert (run.status.code, run.status.plugin) == (Code.ERROR, "Fragment")
    assert isinstance(run.status.error, StageFailed) and seen == []


def test_a_pod_without_a_postfilter_stage_leaves_the_others_as_configured() -> None:
    logic = Logic(PostFilterAnswer(PostFilterChoice.WAIT))
    logic.stages = frozenset({"permit"})
    run, seen, _, _, _ = attempt(logic)
    assert [name for name, _ in seen] == ["DefaultPreemption", "CloudBurst"]
    assert logic.asked == 0 and run.status.plugin == "DefaultPreemption"

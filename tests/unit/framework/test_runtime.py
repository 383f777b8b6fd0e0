"""The framework's rules at each extension point, as kube's ``frameworkImpl`` applies them:
which plugins run, in which order, what stops a point, what one failure undoes, and that a
plugin that raises is a fault of that plugin, never a crash."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

from pyscheduler.framework.cache import Cache
from pyscheduler.framework.interface import CycleContext
from pyscheduler.framework.nodetable import BoolArray, node_info
from pyscheduler.framework.pipeline import (
    FilterOutcome,
    Filtered,
    Pipeline,
    Profile,
    ScheduleResult,
)
from pyscheduler.framework.pod import pod_info
from pyscheduler.framework.runtime import SAMPLE_PLUGINS, Framework
from pyscheduler.framework.status import (
    SUCCESS,
    Code,
    PostFilterResult,
    PreFilterResult,
    Status,
)


def context() -> CycleContext:
    cache = Cache()
    for name in ("n1", "n2", "n3"):
        cache.set_node(node_info({"metadata": {"name": name}, "status": {"allocatable": {
            "cpu": "4", "memory": "8Gi", "pods": "10"}}}))
    pod = pod_info({"metadata": {"name": "p", "namespace": "d", "uid": "u"},
                    "spec": {"containers": [{"name": "c", "image": "x"}]}})
    return CycleContext.for_pod(pod, cache.table)


def nothing_fits(ctx: CycleContext) -> Filtered:
    outcome = FilterOutcome(np.zeros(ctx.n, np.bool_), ctx.nodes())
    return Filtered(Pipeline(Profile("test", (), ())), ctx, ScheduleResult(None, -1, outcome))


class Recorder:
    """Plugins that answer from a script and write down what was called, in order."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.faults: list[tuple[str, str, str]] = []
        self.observed: list[tuple[str, str]] = []

    def plugin(self, name: str, **answers: Any) -> Any:
        recorder = self

        class Plugin:
            def __getattr__(self, point: str) -> Any:
                if point not in answers:
                    raise AttributeError(point)

                def call(*args: Any) -> Any:
                    recorder.calls.append(f"{name}.{point}")
                    answer = answers[point]
                    if isinstance(answer, BaseException):
                        raise answer
                    return answer(*args) if callable(answer) else answer
                return call

        p = Plugin()
        p.name = name  # type: ignore[attr-defined]
        return p

    def framework(self, **points: Any) -> Framework:
        return Framework("default-scheduler", **points,
                         observe=lambda point, code, _s: self.observed.append((point, code)),
                         on_fault=lambda point, plugin, pod, exc: self.faults.append(
                             (point, plugin, str(exc))))


def done(value: Any) -> Any:
    async def coro(*_args: Any) -> Any:
        return value
    return coro


# -- PreFilter ---------------------------------------------------------------------------------

def test_prefilter_results_intersect_and_skips_are_recorded() -> None:
    r = Recorder()
    fw = r.framework(pre_filter=[
        r.plugin("A", pre_filter=(PreFilterResult(frozenset({"n1", "n2"})), None)),
        r.plugin("B", pre_filter=(None, Status.of(Code.SKIP))),
        r.plugin("C", pre_filter=(PreFilterResult(frozenset({"n2", "n3"})), SUCCESS))])
    run = fw.run_pre_filter(context())
    assert run.status.success and run.prefilter.node_names == frozenset({"n2"})
    assert run.skipped == frozenset({"B"})
    assert r.calls == ["A.pre_filter", "B.pre_filter", "C.pre_filter"]
    assert r.observed == [("PreFilter", "Success")]


@pytest.mark.parametrize("answer,code", [
    ((None, Status.of(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "no claim")),
     Code.UNSCHEDULABLE_AND_UNRESOLVABLE),
    (ValueError("broken"), Code.ERROR),
], ids=["rejects", "raises"])
def test_a_prefilter_that_rejects_or_raises_stops_the_attempt(answer: Any, code: Code) -> None:
    r = Recorder()
    fw = r.framework(pre_filter=[r.plugin("A", pre_filter=answer),
                                 r.plugin("B", pre_filter=(None, None))])
    run = fw.run_pre_filter(context())
    assert (run.status.code, run.status.plugin) == (code, "A")
    assert r.calls == ["A.pre_filter"]  # B never ran
    assert r.observed == [("PreFilter", str(code))]


def test_a_prefilter_answered_elsewhere_ends_the_run_pending_then_counts() -> None:
    r = Recorder()
    fw = r.framework(pre_filter=[
        r.plugin("Fragment", pre_filter=done((PreFilterResult(frozenset({"n3"})), None)))])
    ctx = context()
    run = fw.run_pre_filter(ctx)
    assert (run.status.code, run.status.plugin) == (Code.PENDING, "Fragment")
    assert run.deferred is not None and run.deferred[0] == "Fragment"
    answer = asyncio.run(run.deferred[1])
    again = fw.run_pre_filter(ctx, {"Fragment": answer})
    assert again.status.success and again.prefilter.node_names == frozenset({"n3"})
    assert r.calls == ["Fragment.pre_filter"]  # the answer was not asked for twice


# -- PostFilter --------------------------------------------------------------------------------

def test_postfilter_plugins_run_in_order_until_one_makes_room() -> None:
    r = Recorder()
    fw = r.framework(post_filter=[
        r.plugin("DefaultPreemption", post_filter=(None, Status.of(
            Code.UNSCHEDULABLE, "0/3 nodes are available: 3 No preemption victims found."))),
        r.plugin("Burst", post_filter=(PostFilterResult(node="wssp-virtual-aci"), SUCCESS)),
        r.plugin("Never", post_filter=(None, None))])
    ctx = context()
    run = fw.run_post_filter(ctx, nothing_fits(ctx))
    assert run.status.success and run.postfilter == PostFilterResult(node="wssp-virtual-aci")
    assert run.reasons == ("0/3 nodes are available: 3 No preemption victims found.",)
    assert r.calls == ["DefaultPreemption.post_filter", "Burst.post_filter"]


def test_unresolvable_stops_the_postfilter_plugins_and_none_helping_is_unschedulable() -> None:
    r = Recorder()
    ctx = context()
    fw = r.framework(post_filter=[
        r.plugin("A", post_filter=(None, Status.of(Code.UNSCHEDULABLE, "a: no"))),
        r.plugin("B", post_filter=(None, Status.of(Code.UNSCHEDULABLE, "b: no")))])
    run = fw.run_post_filter(ctx, nothing_fits(ctx))
    assert (run.status.code, run.status.reasons) == (Code.UNSCHEDULABLE, ("a: no", "b: no"))
    r2 = Recorder()
    fw = r2.framework(post_filter=[
        r2.plugin("A", post_filter=(None, Status.of(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "x"))),
        r2.plugin("B", post_filter=(None, None))])
    run = fw.run_post_filter(ctx, nothing_fits(ctx))
    assert (run.status.code, run.status.plugin) == (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "A")
    assert r2.calls == ["A.post_filter"]


def test_a_postfilter_that_raises_is_an_error_of_that_plugin() -> None:
    r = Recorder()
    ctx = context()
    fw = r.framework(post_filter=[r.plugin("A", post_filter=RuntimeError("api down")),
                                  r.plugin("B", post_filter=(None, None))])
    run = fw.run_post_filter(ctx, nothing_fits(ctx))
    assert (run.status.code, run.status.plugin, run.status.message) == (
        Code.ERROR, "A", "api down")
    assert r.calls == ["A.post_filter"]


def test_a_postfilter_result_bounds_the_later_plugins_and_the_reasons_keep_the_order() -> None:
    r = Recorder()
    ctx = context()
    seen: list[int] = []

    def preempt(_ctx: CycleContext, filtered: Filtered) -> Any:
        seen.append(int(filtered.outcome.valid.sum()))
        return None, Status.of(Code.UNSCHEDULABLE, "preemption: no")

    fw = r.framework(post_filter=[
        r.plugin("Fragment", post_filter=(PostFilterResult(
            only=frozenset({"DefaultPreemption"}), nodes=frozenset({"n2"})),
            Status.of(Code.UNSCHEDULABLE, "gang: only n2"))),
        r.plugin("CloudBurst", post_filter=(PostFilterResult(node="v"), SUCCESS)),
        r.plugin("DefaultPreemption", post_filter=preempt)])
    run = fw.run_post_filter(ctx, nothing_fits(ctx))
    assert r.calls == ["Fragment.post_filter", "DefaultPreemption.post_filter"]
    assert seen == [1]  # n2 only
    assert (run.status.code, run.status.plugin) == (Code.UNSCHEDULABLE, "Fragment")
    assert run.reasons == run.status.reasons == ("gang: only n2", "preemption: no")
    # the last result a plugin gave that did not help is kept (kube's)
    assert run.postfilter is not None and run.postfilter.nodes == frozenset({"n2"})


def test_a_postfilter_plugin_that_cannot_help_runs_last_for_its_reasons_only() -> None:
    r = Recorder()
    ctx = context()
    preemption = r.plugin("DefaultPreemption", post_filter=(None, Status.of(
        Code.UNSCHEDULABLE, "preemption: no victims")), may_help=False)
    fw = r.framework(post_filter=[preemption, r.plugin("CloudBurst", post_filter=(
        None, Status.of(Code.UNSCHEDULABLE, "Burst: 0/1 cloud pools are available.")))])
    run = fw.run_post_filter(ctx, nothing_fits(ctx))
    assert r.calls == ["DefaultPreemption.may_help", "CloudBurst.post_filter",
                       "DefaultPreemption.post_filter"]
    assert run.reasons == ("preemption: no victims", "Burst: 0/1 cloud pools are available.")
    r2 = Recorder()
    fw = r2.framework(post_filter=[
        r2.plugin("DefaultPreemption", post_filter=(None, None), may_help=False),
        r2.plugin("CloudBurst", post_filter=(PostFilterResult(node="v"), SUCCESS))])
    run = fw.run_post_filter(ctx, nothing_fits(ctx))
    assert run.status.success and r2.calls == ["DefaultPreemption.may_help",
                                               "CloudBurst.post_filter"]


def test_wait_is_no_postfilter_answer_and_skip_steps_aside() -> None:
    r = Recorder()
    ctx = context()
    fw = r.framework(post_filter=[r.plugin("A", post_filter=(None, Status(Code.SKIP))),
                                  r.plugin("B", post_filter=(None, Status.of(Code.WAIT, "w")))])
    run = fw.run_post_filter(ctx, nothing_fits(ctx))
    assert (run.status.code, run.status.plugin) == (Code.ERROR, "B")
    assert r.calls == ["A.post_filter", "B.post_filter"]


def test_a_deferred_postfilter_answer_ends_the_point_pending() -> None:
    r = Recorder()
    ctx = context()
    fw = r.framework(post_filter=[
        r.plugin("Fragment", post_filter=done((None, Status(Code.UNSCHEDULABLE)))),
        r.plugin("B", post_filter=(None, None))])
    run = fw.run_post_filter(ctx, nothing_fits(ctx))
    assert run.status.code is Code.PENDING and run.deferred is not None
    assert run.deferred[0] == "Fragment" and r.calls == ["Fragment.post_filter"]
    asyncio.run(run.deferred[1])


def test_a_sampled_attempt_times_each_postfilter_plugin_with_its_status() -> None:
    r = Recorder()
    timed: list[tuple[str, str, str]] = []
    fw = r.framework(post_filter=[
        r.plugin("A", post_filter=(None, Status.of(Code.UNSCHEDULABLE, "a: no"))),
        r.plugin("B", post_filter=(PostFilterResult(nominated_node="n1"), SUCCESS))])
    fw.observe_plugin = lambda plugin, point, code, _s: timed.append((plugin, point, code))
    ctx = context()
    fw.run_post_filter(ctx, nothing_fits(ctx))
    assert timed == []  # not sampled
    ctx.state[SAMPLE_PLUGINS] = True
    fw.run_post_filter(ctx, nothing_fits(ctx))
    assert timed == [("A", "PostFilter", "Unschedulable"), ("B", "PostFilter", "Success")]


# -- PreScore ----------------------------------------------------------------------------------

def test_prescore_skips_are_recorded_and_a_failure_stops() -> None:
    r = Recorder()
    ctx = context()
    feasible: BoolArray = ctx.nodes()
    fw = r.framework(pre_score=[r.plugin("A", pre_score=Status.of(Code.SKIP)),
                                r.plugin("B", pre_score=None)])
    assert fw.run_pre_score(ctx, feasible).skipped == frozenset({"A"})
    fw = r.framework(pre_score=[r.plugin("C", pre_score=KeyError("state")),
                                r.plugin("D", pre_score=None)])
    run = fw.run_pre_score(ctx, feasible)
    assert (run.status.code, run.status.plugin) == (Code.ERROR, "C")
    assert "D.pre_score" not in r.calls


# -- Reserve / Unreserve -----------------------------------------------------------------------

@pytest.mark.parametrize("failure", [
    Status.of(Code.UNSCHEDULABLE, "claim taken"),
    ValueError("broken"),
], ids=["rejects", "raises"])
def test_a_failed_reserve_unreserves_every_plugin_in_reverse_order(failure: Any) -> None:
    r = Recorder()
    fw = r.framework(reserve_plugins=[
        r.plugin("Volumes", reserve=None, unreserve=None),
        r.plugin("Fragment", reserve=done(SUCCESS), unreserve=done(None)),
        r.plugin("Devices", reserve=failure, unreserve=None),
        r.plugin("Later", reserve=None, unreserve=None)])
    status = asyncio.run(fw.reserve(context(), "n1"))
    assert status.plugin == "Devices" and not status.success
    assert r.calls == ["Volumes.reserve", "Fragment.reserve", "Devices.reserve",
                       # every plugin gives its room back, last first (also those that did
                       # not reserve: unreserve is idempotent)
                       "Later.unreserve", "Devices.unreserve", "Fragment.unreserve",
                       "Volumes.unreserve"]
    assert r.observed == [("Reserve", str(status.code)), ("Unreserve", "Success")]


def test_reserve_plugins_that_answer_at_once_run_on_the_loop_the_rest_is_awaited() -> None:
    """What the first plugins reserve is taken before any other pod's cycle: they run in
    run_reserve itself; from the first plugin that answers elsewhere on, the rest (in order)
    is what the binding cycle awaits."""
    r = Recorder()
    fw = r.framework(reserve_plugins=[
        r.plugin("Volumes", reserve=None),
        r.plugin("Fragment", reserve=done(None)),
        r.plugin("Later", reserve=None)])
    pending = fw.run_reserve(context(), "n1")
    assert r.calls == ["Volumes.reserve", "Fragment.reserve"] and r.observed == []
    assert not isinstance(pending, Status)

    async def finish() -> Any:
        return await pending  # type: ignore[misc]
    assert asyncio.run(finish()) == SUCCESS
    assert r.calls == ["Volumes.reserve", "Fragment.reserve", "Later.reserve"]
    assert r.observed == [("Reserve", "Success")]


def test_a_reserve_refused_at_once_is_answered_at_once_and_leaves_unreserve_to_the_caller(
        ) -> None:
    r = Recorder()
    fw = r.framework(reserve_plugins=[
        r.plugin("Volumes", reserve=Status.of(Code.UNSCHEDULABLE, "claim changed"),
                 unreserve=None),
        r.plugin("Fragment", reserve=done(None), unreserve=None)])
    status = fw.run_reserve(context(), "n1")
    assert isinstance(status, Status)
    assert (status.code, status.plugin, status.message) == (
        Code.UNSCHEDULABLE, "Volumes", "claim changed")
    assert r.calls == ["Volumes.reserve"]  # the fragment is not asked; nothing unreserved yet


# -- Permit ------------------------------------------------------------------------------------

@pytest.mark.parametrize("answers,expected,timeout,calls", [
    ([(None, 0.0), (None, 0.0)], (Code.SUCCESS, ""), 0.0, ["A", "B"]),
    ([(Status.of(Code.WAIT, "gang"), 5.0), (Status.of(Code.WAIT, "quota"), 9.0)],
     (Code.WAIT, "A"), 9.0, ["A", "B"]),
    ([(Status.of(Code.WAIT, "gang"), 5.0), (Status.of(Code.UNSCHEDULABLE, "no"), 0.0),
      (None, 0.0)], (Code.UNSCHEDULABLE, "B"), 0.0, ["A", "B"]),
    ([(None, 0.0), ValueError("broken")], (Code.ERROR, "B"), 0.0, ["A", "B"]),
], ids=["allow", "wait-longest", "reject-stops", "raises"])
def test_permit_allows_waits_for_the_longest_or_rejects_at_the_first_refusal(
        answers: list[Any], expected: tuple[Code, str], timeout: float,
        calls: list[str]) -> None:
    r = Recorder()
    names = "ABC"
    fw = r.framework(permit=[
        r.plugin(names[i], permit=a if isinstance(a, BaseException) else done(a))
        for i, a in enumerate(answers)])
    status, seconds = asyncio.run(fw.run_permit(context(), "n1"))
    assert (status.code, status.plugin) == expected and seconds == timeout
    assert r.calls == [f"{n}.permit" for n in calls]
    assert r.observed == [("Permit", str(expected[0]))]


def test_an_unreserve_that_raises_is_reported_and_the_others_still_run() -> None:
    r = Recorder()
    fw = r.framework(reserve_plugins=[r.plugin("A", unreserve=None),
                                      r.plugin("B", unreserve=OSError("gone"))])
    asyncio.run(fw.unreserve(context(), "n1"))
    assert r.calls == ["B.unreserve", "A.unreserve"]
    assert r.faults == [("Unreserve", "B", "gone")]


# -- PreBind, Bind, PostBind -------------------------------------------------------------------

def test_bind_plugins_run_until_one_does_not_skip() -> None:
    r = Recorder()
    fw = r.framework(bind=[r.plugin("Mine", bind=done(Status.of(Code.SKIP))),
                           r.plugin("DefaultBinder", bind=done(None)),
                           r.plugin("Never", bind=done(None))])
    assert asyncio.run(fw.run_bind(context(), "n1")).success
    assert r.calls == ["Mine.bind", "DefaultBinder.bind"]
    r2 = Recorder()
    fw = r2.framework(bind=[r2.plugin("Mine", bind=done(Status.of(Code.SKIP)))])
    status = asyncio.run(fw.run_bind(context(), "n1"))
    assert status.failed and status.message == "no bind plugin bound the pod"


def test_bind_and_prebind_failures_name_the_plugin() -> None:
    async def broken(*_args: Any) -> Status:
        raise ConnectionError("reset")

    r = Recorder()
    fw = r.framework(pre_bind=[r.plugin("Volumes", pre_bind=done(None)),
                               r.plugin("Labels", pre_bind=done(Status.of(
                                   Code.UNSCHEDULABLE, "refused"))),
                               r.plugin("Never", pre_bind=done(None))],
                     bind=[r.plugin("Binder", bind=broken)])
    ctx = context()
    pre = asyncio.run(fw.run_pre_bind(ctx, "n1"))
    assert (pre.code, pre.plugin, pre.message) == (Code.UNSCHEDULABLE, "Labels", "refused")
    assert "Never.pre_bind" not in r.calls
    bound = asyncio.run(fw.run_bind(ctx, "n1"))
    assert (bound.code, bound.plugin, bound.message) == (Code.ERROR, "Binder", "reset")


def test_postbind_runs_every_plugin_and_reports_what_raises() -> None:
    async def broken(*_args: Any) -> None:
        raise RuntimeError("event not written")

    r = Recorder()
    fw = r.framework(post_bind=[r.plugin("A", post_bind=broken),
                                r.plugin("B", post_bind=done(None))])
    asyncio.run(fw.run_post_bind(context(), "n1"))
    assert r.calls == ["A.post_bind", "B.post_bind"]
    assert r.faults == [("PostBind", "A", "event not written")]
    assert r.observed == [("PostBind", "Success")]


"""The scheduler's binding cycle runs the framework's points in kube's order, and every
failure after Reserve has the one undo: each Reserve plugin's unreserve in reverse order, the
assumed pod forgotten, the pod back in the queue (or out of it when it is gone)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pyscheduler.binding.outcome import BOUND_ELSEWHERE, POD_GONE
from pyscheduler.config import parse_config
from pyscheduler.framework.nodetable import node_info
from pyscheduler.framework.pod import pod_info
from pyscheduler.framework.runtime import Framework
from pyscheduler.framework.status import Code, Status
from pyscheduler.kube.client import ConnectionConfig, KubeClient
from pyscheduler.metrics import SchedulerMetrics
from pyscheduler.scheduler import Scheduler

#: A write that did not go through: retried without a condition written (no API call here).
WRITE_FAILED = Status(Code.ERROR, ("write failed",))


class Plugin:
    """Answers from a script; writes down every call."""

    def __init__(self, name: str, calls: list[str], fail_at: str | None,
                 answer: Status) -> None:
        self.name = name
        self.calls = calls
        self.fail_at = fail_at
        self.answer = answer

    def _say(self, point: str) -> Status | None:
        self.calls.append(f"{self.name}.{point}")
        return self.answer if point == self.fail_at else None

    def reserve(self, ctx: Any, node: str) -> Any:
        if self.name == "Now":
            return self._say("reserve")

        async def later() -> Status | None:
            return self._say("reserve")
        return later()

    def unreserve(self, ctx: Any, node: str) -> None:
        self.calls.append(f"{self.name}.unreserve")

    async def permit(self, ctx: Any, node: str) -> tuple[Status | None, float]:
        return self._say("permit"), 0.0

    async def pre_bind(self, ctx: Any, node: str) -> Status | None:
        return self._say("pre_bind")

    async def bind(self, ctx: Any, node: str) -> Status | None:
        return self._say("bind")

    async def post_bind(self, ctx: Any, node: str) -> None:
        self.calls.append(f"{self.name}.post_bind")


def run(fail_at: str | None, who: str = "Later", answer: Status = WRITE_FAILED, *,
        metrics: SchedulerMetrics | None = None,
        sample: bool = False) -> tuple[Scheduler, list[str]]:
    calls: list[str] = []

    async def attempt() -> Scheduler:
        s = Scheduler(KubeClient(ConnectionConfig(host="http://127.0.0.1:9")),
                      parse_config({}, "t"), metrics=metrics)
        s.cache.set_node(node_info({"metadata": {"name": "n1"}, "status": {"allocatable": {
            "cpu": "4", "memory": "8Gi", "pods": "10"}}}))
        now = Plugin("Now", calls, fail_at if who == "Now" else None, answer)
        later = Plugin("Later", calls, fail_at if who == "Later" else None, answer)
        s.framework = Framework("t", reserve_plugins=(now, later), permit=(now, later),
                                pre_bind=(now, later), bind=(later,),
                                post_bind=(now, later),
                                observe_plugin=s.framework.observe_plugin)
        s.queue.add(pod_info({"metadata": {"name": "p", "namespace": "d", "uid": "u"},
                              "spec": {"schedulerName": "t", "containers": [
                                  {"name": "c", "image": "x", "resources": {
                                      "requests": {"cpu": "1"}}}]}}))
        entry = s.queue.pop_nowait()
        assert entry is not None
        s._reserve(entry, "n1", None, None, 0.0, sample)
        # The plugins that answer at once ran on the loop, with the pod assumed.
        assert calls[:1] == ["Now.reserve"] and s.cache.is_assumed("u")
        for task in list(s._binds):
            await task
        return s
    return asyncio.run(attempt()), calls


def test_success_runs_every_point_in_kubes_order() -> None:
    s, calls = run(None)
    assert calls == ["Now.reserve", "Later.reserve", "Now.permit", "Later.permit",
                     "Now.pre_bind", "Later.pre_bind", "Later.bind",
                     "Now.post_bind", "Later.post_bind"]
    assert not s.queue.pending("u") and s.scheduled == 1
    assert s.cache.is_assumed("u")   # still counted on n1 until the informer confirms it


@pytest.mark.parametrize("point,who,before", [
    ("reserve", "Now", []),
    ("reserve", "Later", ["Later.reserve"]),
    ("permit", "Later", ["Later.reserve", "Now.permit", "Later.permit"]),
    ("pre_bind", "Now", ["Later.reserve", "Now.permit", "Later.permit", "Now.pre_bind"]),
    ("bind", "Later", ["Later.reserve", "Now.permit", "Later.permit", "Now.pre_bind",
                       "Later.pre_bind", "Later.bind"]),
])
def test_every_failure_after_reserve_unreserves_in_reverse_and_requeues(
        point: str, who: str, before: list[str]) -> None:
    s, calls = run(point, who)
    assert calls == ["Now.reserve", *before, "Later.unreserve", "Now.unreserve"]
    assert not s.cache.is_assumed("u")            # the room given back
    assert s.queue.pending("u") and s.queue.counts()["backoff"] == 1
    assert s.scheduled == 0


@pytest.mark.parametrize("answer", [POD_GONE, BOUND_ELSEWHERE], ids=["gone", "elsewhere"])
def test_a_pod_gone_or_bound_elsewhere_is_unreserved_and_leaves_the_queue(
        answer: Status) -> None:
    s, calls = run("bind", "Later", answer)
    assert calls[-2:] == ["Later.unreserve", "Now.unreserve"]
    assert not s.cache.is_assumed("u") and not s.queue.pending("u")


def plugin_times(metrics: SchedulerMetrics) -> dict[tuple[str, str, str], float]:
    return {(m.labels["plugin"], m.labels["extension_point"], m.labels["status"]): m.value
            for family in metrics.registry.collect()
            if family.name == "scheduler_plugin_execution_duration_seconds"
            for m in family.samples if m.name.endswith("_count")}


def test_a_sampled_attempt_times_every_plugin_at_every_binding_point() -> None:
    metrics = SchedulerMetrics(process_metrics=False)
    run("pre_bind", "Later", Status.of(Code.UNSCHEDULABLE, "no"), metrics=metrics, sample=True)
    assert plugin_times(metrics) == {
        ("Now", "Reserve", "Success"): 1, ("Later", "Reserve", "Success"): 1,
        ("Now", "Permit", "Success"): 1, ("Later", "Permit", "Success"): 1,
        ("Now", "PreBind", "Success"): 1, ("Later", "PreBind", "Unschedulable"): 1,
        ("Later", "Unreserve", "Success"): 1, ("Now", "Unreserve", "Success"): 1}
    unsampled = SchedulerMetrics(process_metrics=False)
    run(None, metrics=unsampled, sample=False)
    assert plugin_times(unsampled) == {}

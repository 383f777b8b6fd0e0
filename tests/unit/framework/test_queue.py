"""The scheduling queue: ordering, backoff, unschedulable parking and moves, gates."""

from __future__ import annotations

import asyncio
from typing import Any

from pyscheduler.framework.pod import PodInfo, pod_info
from pyscheduler.framework.queue import SchedulingQueue


def pod(name: str, priority: int = 0, gated: bool = False, **spec: Any) -> PodInfo:
    body: dict[str, Any] = {"containers": [{"name": "c", "image": "x"}], "priority": priority,
                            **spec}
    if gated:
        body["schedulingGates"] = [{"name": "wait"}]
    return pod_info({"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
                     "spec": body})


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_priority_then_age() -> None:
    clock = Clock()
    q = SchedulingQueue(clock=clock)
    q.add(pod("low-old", 0))
    clock.now += 1
    q.add(pod("high", 10))
    clock.now += 1
    q.add(pod("low-new", 0))
    order = [q.pop_nowait().pod.name for _ in range(3)]  # type: ignore[union-attr]
    assert order == ["high", "low-old", "low-new"]
    assert q.pop_nowait() is None


def test_unschedulable_waits_for_a_cluster_event_then_respects_backoff() -> None:
    clock = Clock()
    q = SchedulingQueue(clock=clock, initial_backoff=1, max_backoff=10)
    q.add(pod("p"))
    entry = q.pop_nowait()
    assert entry is not None
    q.requeue_unschedulable(entry.pod.uid)
    assert q.counts()["unschedulable"] == 1
    clock.now += 5
    assert q.pop_nowait() is None  # no event yet
    q.move_all_to_active("NodeAdd")
    assert q.pop_nowait() is not None  # backoff (1 s) long expired


def test_backoff_doubles_up_to_the_cap() -> None:
    clock = Clock()
    q = SchedulingQueue(clock=clock, initial_backoff=1, max_backoff=4)
    q.add(pod("p"))
    entry = q.pop_nowait()
    assert entry is not None
    waits = []
    for _ in range(5):
        start = clock.now
        q.requeue_backoff(entry.pod.uid)
        while q.pop_nowait() is None:  # each successful pop is the next attempt
            clock.now += 0.25
        waits.append(clock.now - start)
    assert waits == [1.0, 2.0, 4.0, 4.0, 4.0]


def test_event_during_attempt_sends_pod_to_backoff_not_unschedulable() -> None:
    clock = Clock()
    q = SchedulingQueue(clock=clock, initial_backoff=1)
    q.add(pod("p"))
    entry = q.pop_nowait()
    assert entry is not None
    q.move_all_to_active("NodeAdd")  # arrives while the pod is in flight
    q.requeue_unschedulable(entry.pod.uid)
    assert q.counts() == {"active": 0, "backoff": 1, "unschedulable": 0, "gated": 0}
    clock.now += 1
    assert q.pop_nowait() is not None


def test_unschedulable_pods_are_flushed_after_the_maximum_stay() -> None:
    clock = Clock()
    q = SchedulingQueue(clock=clock, max_in_unschedulable=300)
    q.add(pod("p"))
    entry = q.pop_nowait()
    assert entry is not None
    q.requeue_unschedulable(entry.pod.uid)
    clock.now += 299
    assert q.pop_nowait() is None
    clock.now += 2
    assert q.pop_nowait() is not None


def test_gated_pods_wait_for_their_gates_to_go() -> None:
    q = SchedulingQueue(clock=Clock())
    q.add(pod("g", gated=True))
    assert q.pop_nowait() is None and q.counts()["gated"] == 1
    q.update(pod("g"))
    got = q.pop_nowait()
    assert got is not None and got.pod.name == "g"


def test_deleted_pods_are_never_popped() -> None:
    q = SchedulingQueue(clock=Clock())
    q.add(pod("a"))
    q.add(pod("b"))
    q.delete("uid-a")
    got = q.pop_nowait()
    assert got is not None and got.pod.name == "b"
    assert q.pop_nowait() is None


def test_updated_unschedulable_pod_is_retried() -> None:
    clock = Clock()
    q = SchedulingQueue(clock=clock)
    q.add(pod("p"))
    entry = q.pop_nowait()
    assert entry is not None
    q.requeue_unschedulable(entry.pod.uid)
    clock.now += 10
    q.update(pod("p", nodeSelector={"disk": "ssd"}))
    assert q.pop_nowait() is not None


def test_pop_waits_for_a_pod() -> None:
    async def run() -> str:
        q = SchedulingQueue()
        asyncio.get_running_loop().call_later(0.01, q.add, pod("late"))
        entry = await asyncio.wait_for(q.pop(), 2)
        return entry.pod.name
    assert asyncio.run(run()) == "late"


def test_pending_and_waiting_follow_a_pod_through_its_attempt() -> None:
    q = SchedulingQueue(clock=Clock())
    q.add(pod("p"))
    assert q.pending("uid-p") and q.waiting("uid-p")
    entry = q.pop_nowait()
    assert entry is not None and q.pending("uid-p") and not q.waiting("uid-p")  # in flight
    q.requeue_backoff("uid-p")
    assert q.pending("uid-p") and q.waiting("uid-p")
    q.delete("uid-p")
    assert not q.pending("uid-p") and not q.waiting("uid-p")

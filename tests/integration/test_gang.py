"""Gang scheduling with the example fragment (fragments/examples/gang, in C and AssemblyScript)
on the embedded cluster: a group that fits binds together and not before its last member is
placed; a group too large for the cluster binds none and keeps no room; two groups competing for
the same room do not deadlock — one binds whole, the other binds nothing."""

from __future__ import annotations

import collections
import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from tests.conftest import AnyCluster, SchedulerThread, wait_for
from tests.fragment_cluster import apply_fragment, assumed, fragment_cluster, held_at_permit

pytest.importorskip("wasmtime")

REPO = Path(__file__).resolve().parents[2]
MODULES = {"c": REPO / "fragments" / "examples" / "gang" / "gang.wasm",
           "as": REPO / "fragments" / "assemblyscript" / "examples" / "gang" / "gang.wasm"}
SCHEDULER = "gang-sched"
NODES = 3
GROUP_LABEL = "pod-group.wssp.io/name"
MIN_MEMBER = "pod-group.wssp.io/min-member"


@pytest.fixture(scope="module")
def sim(request: pytest.FixtureRequest, server: str,
        tmp_path_factory: pytest.TempPathFactory) -> Iterator[AnyCluster]:
    with fragment_cluster(request, tmp_path_factory.mktemp("gang"), NODES) as c:
        yield c


@pytest.fixture(scope="module")
def core(sim: AnyCluster) -> client.CoreV1Api:
    return client.CoreV1Api(config.new_client_from_config(config_file=str(sim.kubeconfig)))


@pytest.fixture(scope="module")
def scheduler(sim: AnyCluster, core: client.CoreV1Api) -> Iterator[SchedulerThread]:
    s = SchedulerThread(sim.kubeconfig, schedulerName=SCHEDULER,
                        leaderElection={"enabled": False}, podInitialBackoffSeconds=0.2,
                        podMaxBackoffSeconds=0.5, seed=3,
                        storage={"allowedFileDirs": [str(REPO / "fragments")]}).start()
    for language, path in MODULES.items():
        apply_fragment(client.CustomObjectsApi(core.api_client), f"gang-{language}-v1.0.0",
                       path, {"prefilter": {}, "postfilter": {"mode": "replace"},
                              "permit": {}, "unreserve": {}}, config={"timeoutSeconds": 4})
    yield s
    s.stop()


@pytest.fixture
def ns(core: client.CoreV1Api, request: pytest.FixtureRequest) -> Iterator[str]:
    name = "g-" + hashlib.sha1(request.node.name.encode()).hexdigest()[:8]
    core.create_namespace({"metadata": {"name": name}})
    yield name
    core.delete_collection_namespaced_pod(name, grace_period_seconds=0)


def member(core: client.CoreV1Api, ns: str, name: str, group: str, size: int, *, cpu: str,
           language: str = "c") -> None:
    core.create_namespaced_pod(ns, {
        "metadata": {"name": name, "labels": {GROUP_LABEL: group},
                     "annotations": {MIN_MEMBER: str(size),
                                     "wssp/schedulefragment": f"gang-{language}"}},
        "spec": {"schedulerName": SCHEDULER, "containers": [
            {"name": "c", "image": "pause",
             "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}]}})


def bound(core: client.CoreV1Api, ns: str) -> dict[str, str]:
    return {p.metadata.name: p.spec.node_name for p in core.list_namespaced_pod(ns).items
            if p.spec.node_name}


def events(core: client.CoreV1Api, ns: str, reason: str) -> list[str]:
    return [e.message for e in core.list_namespaced_event(ns).items if e.reason == reason]


@pytest.mark.parametrize("language", ["c", "as"])
def test_a_group_that_fits_binds_together_and_not_before(
        scheduler: SchedulerThread, core: client.CoreV1Api, ns: str, language: str) -> None:
    for i in range(3):
        member(core, ns, f"w{i}", "trainer", 4, cpu="1", language=language)
    # Three of four are reserved and held at permit; none is bound.
    wait_for(lambda: held_at_permit(scheduler) == 3, what="three members held at permit")
    assert bound(core, ns) == {}
    notes = wait_for(lambda: events(core, ns, "WaitingOnPermit") or None, what="events")
    assert f"waiting for pod group {ns}/trainer: 1 of 4 members reserved" in notes
    member(core, ns, "w3", "trainer", 4, cpu="1", language=language)
    placed = wait_for(lambda: (b := bound(core, ns)) and len(b) == 4 and b, timeout=20,
                      what="the whole group bound")
    assert sorted(placed) == ["w0", "w1", "w2", "w3"]
    assert held_at_permit(scheduler) == 0
    wait_for(lambda: assumed(scheduler) == 0, what="every binding confirmed")


def test_a_group_too_large_binds_none_and_keeps_no_room(
        scheduler: SchedulerThread, core: client.CoreV1Api, ns: str) -> None:
    # Five members of 3 cpu: one fits per node, so at most three are ever reserved.
    for i in range(5):
        member(core, ns, f"big{i}", "huge", 5, cpu="3")
    wait_for(lambda: events(core, ns, "FailedScheduling") and any(
        "cannot be placed" in m for m in events(core, ns, "FailedScheduling")),
        timeout=20, what="the group released when a member fits nowhere")
    # It keeps trying (with backoff) and never binds a member.
    wait_for(lambda: held_at_permit(scheduler) == 0, timeout=20, what="a moment with nothing held")
    assert bound(core, ns) == {}
    # Room is free between attempts: a plain pod that needs a whole node's worth binds.
    core.create_namespaced_pod(ns, {"metadata": {"name": "plain"}, "spec": {
        "schedulerName": SCHEDULER, "containers": [
            {"name": "c", "image": "pause", "resources": {"requests": {"cpu": "3500m"}}}]}})
    wait_for(lambda: "plain" in bound(core, ns), timeout=20, what="the plain pod bound")
    for i in range(5):
        core.delete_namespaced_pod(f"big{i}", ns, grace_period_seconds=0)
    wait_for(lambda: held_at_permit(scheduler) == 0 and assumed(scheduler) == 0, timeout=20,
             what="nothing held once the group is gone")
    assert set(bound(core, ns)) == {"plain"}


def test_two_groups_competing_for_the_same_room_do_not_deadlock(
        scheduler: SchedulerThread, core: client.CoreV1Api, ns: str) -> None:
    # Each group needs all three nodes (3 cpu of 4 per member): only one can run.
    for i in range(3):
        member(core, ns, f"a{i}", "alpha", 3, cpu="3")
        member(core, ns, f"b{i}", "beta", 3, cpu="3")
    placed = wait_for(lambda: (b := bound(core, ns)) and len(b) == 3 and b, timeout=30,
                      what="one whole group bound")
    groups = collections.Counter(name[0] for name in placed)
    assert len(groups) == 1 and sum(groups.values()) == 3, placed
    loser = "b" if "a" in groups else "a"
    # The other group waits (at prefilter or permit, timing out cleanly) and binds nothing.
    notes: list[Any] = events(core, ns, "FailedScheduling")
    assert notes
    wait_for(lambda: held_at_permit(scheduler) == 0, timeout=20, what="the loser not holding room")
    assert all(not name.startswith(loser) for name in bound(core, ns))


def test_a_member_held_at_permit_is_preempted_by_rejection_not_deletion(
        scheduler: SchedulerThread, core: client.CoreV1Api, ns: str) -> None:
    scheduling = client.SchedulingV1Api(core.api_client)
    if not any(pc.metadata.name == "gang-test-high"
               for pc in scheduling.list_priority_class().items):
        scheduling.create_priority_class({"metadata": {"name": "gang-test-high"},
                                          "value": 1000})
    for i in range(3):  # three of four: held at permit, one on each node
        member(core, ns, f"w{i}", "trainer", 4, cpu="3")
    wait_for(lambda: held_at_permit(scheduler) == 3, what="three members held")
    core.create_namespaced_pod(ns, {"metadata": {"name": "urgent"}, "spec": {
        "schedulerName": SCHEDULER, "priorityClassName": "gang-test-high", "containers": [
            {"name": "c", "image": "pause", "resources": {"requests": {"cpu": "2"}}}]}})
    wait_for(lambda: "urgent" in bound(core, ns), timeout=20, what="the urgent pod bound")
    # The victim was not bound: it was rejected at permit (its group released with it) and
    # stays a Pending pod, not deleted.
    names = {p.metadata.name: p for p in core.list_namespaced_pod(ns).items}
    assert {"w0", "w1", "w2"} <= set(names)
    assert all(names[f"w{i}"].metadata.deletion_timestamp is None for i in range(3))
    assert set(bound(core, ns)) == {"urgent"}

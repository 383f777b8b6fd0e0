"""The scheduler under faults: leader failover, dropped watches, expired watch history."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client, config

from pyscheduler_sim.cluster import ClusterSpec, PoolSpec
from tests.conftest import AnyCluster, SchedulerThread, open_cluster, wait_for


@pytest.fixture(scope="module")
def sim(request: pytest.FixtureRequest, server: str,
        tmp_path_factory: pytest.TempPathFactory) -> Iterator[AnyCluster]:
    spec = ClusterSpec(pools=[PoolSpec(name="n", count=20, cpu="8", memory="32Gi")],
                       run_pods=False, lease_renew_seconds=5)
    # A short watch history, so that a scheduler cut off during a burst must relist (410).
    with open_cluster(request, spec, tmp_path_factory.mktemp("faults"), history=60) as c:
        yield c


@pytest.fixture(scope="module")
def core(sim: AnyCluster) -> client.CoreV1Api:
    return client.CoreV1Api(config.new_client_from_config(config_file=str(sim.kubeconfig)))


def make_ns(core: client.CoreV1Api) -> str:
    name = f"f-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": name}})
    return name


def pod(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"app": "f"}},
            "spec": {"schedulerName": "pyscheduler", "containers": [{
                "name": "c", "image": "x",
                "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]}}


def bound(core: client.CoreV1Api, ns: str) -> dict[str, str]:
    return {p.metadata.name: p.spec.node_name for p in core.list_namespaced_pod(ns).items
            if p.spec.node_name}


def scheduled_events(core: client.CoreV1Api, ns: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for e in core.list_namespaced_event(ns).items:
        if e.reason == "Scheduled":
            counts[e.involved_object.name] = counts.get(e.involved_object.name, 0) + (
                e.count or 1)
    return counts


def test_standby_takes_over_when_the_leader_dies(sim: AnyCluster,
                                                 core: client.CoreV1Api) -> None:
    ns = make_ns(core)
    election = {"enabled": True, "leaseName": f"lease-{ns}", "leaseDurationSeconds": 2,
                "renewDeadlineSeconds": 1.5, "retryPeriodSeconds": 0.5}
    a = SchedulerThread(sim.kubeconfig, leaderElection={**election, "identity": "a"}).start()
    b = SchedulerThread(sim.kubeconfig, leaderElection={**election, "identity": "b"}).start()
    try:
        leaders = wait_for(lambda: [s for s in (a, b) if s.call(lambda s=s: s.app.leading)],
                           what="a leader")
        assert len(leaders) == 1
        leader, standby = (a, b) if leaders[0] is a else (b, a)
        for i in range(60):
            core.create_namespaced_pod(ns, pod(f"p{i}"))
        wait_for(lambda: len(bound(core, ns)) >= 10, what="the leader binding")
        leader.stop(release=False)  # dies without giving the lease back
        for i in range(60, 120):
            core.create_namespaced_pod(ns, pod(f"p{i}"))
        placed = wait_for(lambda: len(b_ := bound(core, ns)) == 120 and b_, timeout=30,
                          what="the standby finishing the work")
        assert standby.call(lambda: standby.app.leading)
        assert len(placed) == 120
        # Nobody bound a pod twice: at most one Scheduled event per pod.
        assert all(n <= 1 for n in scheduled_events(core, ns).values())
    finally:
        for s in (a, b):
            if s.thread.is_alive():
                s.stop()


@pytest.mark.embedded_only("drops the embedded server's watches and shrinks its history")
def test_dropped_watches_and_expired_history_lose_nothing(sim: AnyCluster,
                                                          core: client.CoreV1Api) -> None:
    ns = make_ns(core)
    s = SchedulerThread(sim.kubeconfig, leaderElection={"enabled": False}).start()
    stop = threading.Event()

    def chaos() -> None:
        abrupt = False
        while not stop.is_set():
            time.sleep(0.15)
            sim.call(lambda a=abrupt: sim.cluster.server.drop_watches(abrupt=a))
            abrupt = not abrupt

    chaos_thread = threading.Thread(target=chaos, daemon=True)
    try:
        chaos_thread.start()
        for i in range(400):  # far more than the 60-event history: some resumes must relist
            core.create_namespaced_pod(ns, pod(f"w{i}"))
        placed = wait_for(lambda: len(b_ := bound(core, ns)) == 400 and b_, timeout=60,
                          what="all pods bound despite the faults")
        assert len(placed) == 400
    finally:
        stop.set()
        chaos_thread.join(5)
        relists = s.call(lambda: s.app.scheduler._pods.relists)
        s.stop()
    assert relists >= 1, "the history window never expired: the test did not test a 410"
    assert all(n <= 1 for n in scheduled_events(core, ns).values())


@pytest.mark.embedded_only("injects bind failures into the embedded server")
def test_bind_errors_are_retried_and_never_bind_twice(sim: AnyCluster,
                                                      core: client.CoreV1Api) -> None:
    ns = make_ns(core)
    s = SchedulerThread(sim.kubeconfig, leaderElection={"enabled": False},
                        podInitialBackoffSeconds=0.2).start()
    try:
        # Two failures: the binding's own retries absorb them.
        sim.call(lambda: sim.cluster.server.inject_failures(
            "POST", rf"/namespaces/{ns}/pods/a/binding$", 500, 2))
        core.create_namespaced_pod(ns, pod("a"))
        wait_for(lambda: bound(core, ns).get("a"), what="a bound after retried 500s")
        # More failures than retries: the pod goes back to the queue and is bound later.
        sim.call(lambda: sim.cluster.server.inject_failures(
            "POST", rf"/namespaces/{ns}/pods/b/binding$", 503, 6))
        core.create_namespaced_pod(ns, pod("b"))
        wait_for(lambda: bound(core, ns).get("b"), timeout=20,
                 what="b bound after being requeued")
        errors_seen = s.call(lambda: s.app.metrics.registry.get_sample_value(
            "pyscheduler_bind_errors_total", {"reason": "InternalError"}))
        assert errors_seen == 2
        # A binding carried out whose answer is lost (a gateway timing out after the server
        # bound the pod): the retry gets 409, the pod is found bound to our node, and that is
        # success — no second binding, no Conflict counted.
        sim.call(lambda: sim.cluster.server.inject_failures(
            "POST", rf"/namespaces/{ns}/pods/c/binding$", 504, 1, after=True))
        core.create_namespaced_pod(ns, pod("c"))
        wait_for(lambda: bound(core, ns).get("c"), what="c bound despite the lost answer")
        sample = s.app.metrics.registry.get_sample_value
        wait_for(lambda: s.call(lambda: sample("pyscheduler_bind_errors_total",
                                               {"reason": "Timeout"})) == 1,
                 what="the lost answer counted once")
        assert not s.call(lambda: sample("pyscheduler_bind_errors_total",
                                         {"reason": "Conflict"}))
    finally:
        s.stop()
    assert all(n <= 1 for n in scheduled_events(core, ns).values())

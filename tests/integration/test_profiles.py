"""Several profiles in one process, from a KubeSchedulerConfiguration as kube-scheduler reads
it: each schedulerName gets its own plugins (a spreading profile with preemption, a packing
one without), they share one cache so neither over-commits a node, and the metrics say which
profile made each attempt."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from tests.conftest import AnyCluster, SchedulerThread, wait_for

KUBE = {
    "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
    "leaderElection": {"leaderElect": False},
    "profiles": [
        {"schedulerName": "spread"},
        {"schedulerName": "pack",
         "plugins": {"score": {"disabled": [{"name": "*"}],
                               "enabled": [{"name": "NodeResourcesFit"}]},
                     "postFilter": {"disabled": [{"name": "DefaultPreemption"}]}},
         "pluginConfig": [{"name": "NodeResourcesFit", "args": {
             "scoringStrategy": {"type": "MostAllocated"}}}]},
    ]}


@pytest.fixture(scope="module")
def scheduler(cluster: AnyCluster) -> Iterator[SchedulerThread]:
    s = SchedulerThread(cluster.kubeconfig, kube=KUBE, seed=3).start()
    yield s
    s.stop()


def pod(name: str, scheduler: str, cpu: str = "500m") -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"schedulerName": scheduler, "containers": [
        {"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu,
                                                               "memory": "64Mi"}}}]}}


def node_of(core: client.CoreV1Api, ns: str, name: str) -> str:
    return wait_for(lambda: core.read_namespaced_pod(name, ns).spec.node_name,  # type: ignore
                    what=f"{name} bound")


def unschedulable(core: client.CoreV1Api, ns: str, name: str) -> Any:
    def message() -> Any:
        conditions = core.read_namespaced_pod(name, ns).status.conditions or ()
        return next((c.message for c in conditions
                     if c.type == "PodScheduled" and c.status == "False"), None)
    return wait_for(message, what=f"{name}'s unschedulable condition")


def test_each_profile_schedules_its_own_pods_with_its_own_plugins(
        core: client.CoreV1Api, namespace: str, scheduler: SchedulerThread) -> None:
    ns = namespace
    for i in range(3):
        core.create_namespaced_pod(ns, pod(f"s{i}", "spread"))
        node_of(core, ns, f"s{i}")
    spread = {node_of(core, ns, f"s{i}") for i in range(3)}
    assert len(spread) == 3  # LeastAllocated and topology spread: one pod a node
    for i in range(3):
        core.create_namespaced_pod(ns, pod(f"p{i}", "pack"))
        node_of(core, ns, f"p{i}")
    packed = {node_of(core, ns, f"p{i}") for i in range(3)}
    assert len(packed) == 1  # MostAllocated alone: the pods pile onto one node
    core.create_namespaced_pod(ns, pod("foreign", "default-scheduler"))
    # Too big for any node: the spreading profile preempts (and says why it could not), the
    # packing one has no DefaultPreemption.
    core.create_namespaced_pod(ns, pod("huge-spread", "spread", cpu="6"))
    core.create_namespaced_pod(ns, pod("huge-pack", "pack", cpu="6"))
    assert unschedulable(core, ns, "huge-spread") == (
        "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 "
        "Preemption is not helpful for scheduling.")
    assert unschedulable(core, ns, "huge-pack") == "0/3 nodes are available: 3 Insufficient cpu."
    assert core.read_namespaced_pod("foreign", ns).spec.node_name is None
    attempts = {(m.labels["profile"], m.labels["result"]): m.value
                for family in scheduler.app.metrics.registry.collect()
                if family.name == "scheduler_schedule_attempts"
                for m in family.samples if m.name.endswith("_total")}
    assert attempts[("spread", "scheduled")] >= 3 and attempts[("pack", "scheduled")] >= 3
    assert attempts[("pack", "unschedulable")] >= 1


def test_profiles_share_one_cache_and_never_overcommit_a_node(
        core: client.CoreV1Api, namespace: str, scheduler: SchedulerThread) -> None:
    ns = namespace
    # 3 nodes of 4 cpu, 14 pods of 1 cpu from both profiles at once: some must wait, and no
    # node may hold more than it has, whichever profile placed what.
    for i in range(14):
        core.create_namespaced_pod(ns, pod(f"w{i}", ("spread", "pack")[i % 2], cpu="1"))

    def decided() -> bool:
        for p in core.list_namespaced_pod(ns).items:
            waiting = any(c.type == "PodScheduled" and c.status == "False"
                          for c in p.status.conditions or ())
            if not p.spec.node_name and not waiting:
                return False
        return True
    wait_for(decided, what="every pod bound or reported unschedulable")
    used: dict[str, int] = {}
    for p in core.list_pod_for_all_namespaces().items:
        if p.spec.node_name and p.status.phase not in ("Succeeded", "Failed"):
            cpu = p.spec.containers[0].resources.requests["cpu"]
            used[p.spec.node_name] = used.get(p.spec.node_name, 0) + (
                int(cpu[:-1]) if cpu.endswith("m") else int(cpu) * 1000)
    assert used and all(v <= 4000 for v in used.values()), used
    bound = [p for p in core.list_namespaced_pod(ns).items if p.spec.node_name]
    assert 0 < len(bound) <= 12

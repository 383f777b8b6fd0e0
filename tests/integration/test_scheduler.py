"""pyscheduler against the embedded cluster over real HTTPS: placement, unschedulable pods,
no over-commitment or double binding, other schedulers' pods untouched, leader election,
watch drops."""

from __future__ import annotations

import collections
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client, config

from pyscheduler.api.quantity import milli_value, parse_quantity, value
from pyscheduler_sim.cluster import ClusterSpec, PoolSpec
from tests.conftest import AnyCluster, SchedulerThread, open_cluster, wait_for


@pytest.fixture(scope="module")
def sim(request: pytest.FixtureRequest, server: str,
        tmp_path_factory: pytest.TempPathFactory) -> Iterator[AnyCluster]:
    spec = ClusterSpec(pools=[
        PoolSpec(name="small", count=4, cpu="2", memory="4Gi", zones=("zone-a", "zone-b")),
        PoolSpec(name="big", count=2, cpu="8", memory="32Gi", zones=("zone-a",),
                 labels={"disk": "ssd"}),
        PoolSpec(name="gpu", count=1, cpu="8", memory="32Gi", zones=("zone-b",),
                 extended={"nvidia.com/gpu": "2"},
                 taints=[{"key": "nvidia.com/gpu", "value": "present",
                          "effect": "NoSchedule"}]),
    ], pod_start_seconds=0.05, lease_renew_seconds=5)
    with open_cluster(request, spec, tmp_path_factory.mktemp("sched")) as c:
        yield c


@pytest.fixture(scope="module")
def core(sim: AnyCluster) -> client.CoreV1Api:
    return client.CoreV1Api(config.new_client_from_config(config_file=str(sim.kubeconfig)))


@pytest.fixture(scope="module")
def scheduler(sim: AnyCluster) -> Iterator[SchedulerThread]:
    s = SchedulerThread(sim.kubeconfig, leaderElection={"enabled": False}, seed=7).start()
    yield s
    s.stop()


@pytest.fixture
def ns(core: client.CoreV1Api) -> Iterator[str]:
    import uuid
    name = f"s-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": name}})
    yield name
    core.delete_collection_namespaced_pod(name, grace_period_seconds=0)


def pod(name: str, cpu: str = "100m", memory: str = "128Mi", scheduler: str = "pyscheduler",
        **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": spec.pop("labels", {"app": name})},
            "spec": {"schedulerName": scheduler, "containers": [{
                "name": "c", "image": "x",
                "resources": {"requests": {"cpu": cpu, "memory": memory},
                              **spec.pop("resources", {})}}], **spec}}


def node_of(core: client.CoreV1Api, ns: str, name: str) -> str:
    return wait_for(lambda: core.read_namespaced_pod(name, ns).spec.node_name,
                    what=f"{name} bound")  # type: ignore[no-any-return]


@pytest.mark.parametrize("spec, allowed", [
    pytest.param({"nodeSelector": {"disk": "ssd"}}, {"big-0", "big-1"}, id="node selector"),
    pytest.param({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-b"]},
            {"key": "wssp.pyscheduler.io/pool", "operator": "NotIn", "values": ["gpu"]}]}]}}}},
        {"small-1", "small-3"}, id="required node affinity"),
    pytest.param({"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
                  "resources": {"limits": {"nvidia.com/gpu": "1"}}},
                 {"gpu-0"}, id="extended resource on a tainted node"),
    pytest.param({"cpu": "6"}, {"big-0", "big-1"}, id="resources fit only big nodes"),
    pytest.param({"nodeName_hint": True, "affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In",
                              "values": ["small-2"]}]}]}}}}, {"small-2"}, id="match fields"),
])
def test_placement_honours_predicates(core: client.CoreV1Api, ns: str,
                                      scheduler: SchedulerThread, spec: dict[str, Any],
                                      allowed: set[str]) -> None:
    spec = dict(spec)
    spec.pop("nodeName_hint", None)
    cpu = spec.pop("cpu", "100m")
    core.create_namespaced_pod(ns, pod("p", cpu=cpu, **spec))
    assert node_of(core, ns, "p") in allowed


def test_taints_repel_pods_without_tolerations(core: client.CoreV1Api, ns: str,
                                               scheduler: SchedulerThread) -> None:
    for i in range(8):
        core.create_namespaced_pod(ns, pod(f"p{i}"))
    nodes = {node_of(core, ns, f"p{i}") for i in range(8)}
    assert "gpu-0" not in nodes


def test_unschedulable_pod_is_reported_and_scheduled_when_a_node_fits(
        core: client.CoreV1Api, ns: str, scheduler: SchedulerThread) -> None:
    core.create_namespaced_pod(ns, pod("huge", cpu="12", nodeSelector={"tier": "xl"}))

    def condition() -> Any:
        conds = core.read_namespaced_pod("huge", ns).status.conditions or []
        return next((c for c in conds if c.type == "PodScheduled"), None)

    cond = wait_for(condition, what="PodScheduled condition")
    assert (cond.status, cond.reason) == ("False", "Unschedulable")
    # Each node is charged to the first filter that rejects it, in kube's order.
    assert cond.message == (
        "0/7 nodes are available: 1 node(s) had untolerated taint {nvidia.com/gpu: present}, "
        "6 node(s) didn't match Pod's node affinity/selector. preemption: 0/7 nodes are "
        "available: 7 Preemption is not helpful for scheduling.")
    events = wait_for(lambda: [e for e in core.list_namespaced_event(
        ns, field_selector="involvedObject.name=huge").items
        if e.reason == "FailedScheduling"], what="FailedScheduling event")
    assert events[0].type == "Warning" and events[0].message == cond.message
    core.create_node({"metadata": {"name": "xl-0", "labels": {"tier": "xl"}},
                      "status": {"allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"},
                                 "capacity": {"cpu": "16", "memory": "64Gi", "pods": "110"}}})
    try:
        assert node_of(core, ns, "huge") == "xl-0"
        scheduled = wait_for(lambda: [e for e in core.list_namespaced_event(
            ns, field_selector="involvedObject.name=huge").items if e.reason == "Scheduled"],
            what="Scheduled event")
        assert scheduled[0].message == f"Successfully assigned {ns}/huge to xl-0"
    finally:
        core.delete_namespaced_pod("huge", ns, grace_period_seconds=0)
        core.delete_node("xl-0")


def test_bad_pod_is_reported_and_does_not_block_others(core: client.CoreV1Api, ns: str,
                                                       scheduler: SchedulerThread) -> None:
    # kube-apiserver accepts one value of any label form for Gt; only a scheduler reads it as
    # the integer it must be.
    bad = pod("bad")
    bad["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "a", "operator": "Gt", "values": ["ten"]}]}]}}}
    core.create_namespaced_pod(ns, bad)
    core.create_namespaced_pod(ns, pod("good"))
    assert node_of(core, ns, "good")

    def message() -> Any:
        conds = core.read_namespaced_pod("bad", ns).status.conditions or []
        return next((c.message for c in conds if c.type == "PodScheduled"), None)

    assert "values: must be a single integer for operator Gt" in wait_for(message)


def test_explain_annotation(core: client.CoreV1Api, ns: str, scheduler: SchedulerThread) -> None:
    p = pod("why")
    p["metadata"]["annotations"] = {"wssp/explain": "true"}
    core.create_namespaced_pod(ns, p)
    node = node_of(core, ns, "why")
    import json
    decision = json.loads(wait_for(lambda: (core.read_namespaced_pod("why", ns).metadata
                                            .annotations or {}).get("wssp/decision")))
    assert decision["selected"] == node and decision["feasibleNodes"] == 6
    assert decision["failures"] == {"node(s) had untolerated taint {nvidia.com/gpu: present}": 1}
    best = decision["top"][0]["score"]
    assert node in [t["node"] for t in decision["top"] if t["score"] == best]  # ties: random
    # The shipped default logic: most free memory in place of kube's resource scores.
    plugins = decision["top"][0]["plugins"]
    assert "fragment:default-v1.0.0" in plugins and "NodeResourcesFit" not in plugins
    assert "TaintToleration" in plugins


def test_many_pods_no_overcommit_no_double_binding_others_untouched(
        core: client.CoreV1Api, ns: str, scheduler: SchedulerThread) -> None:
    for i in range(5):
        core.create_namespaced_pod(ns, pod(f"other-{i}", scheduler="default-scheduler"))
    total = 300
    for i in range(total):
        core.create_namespaced_pod(ns, pod(f"m-{i}", cpu="250m", memory="512Mi"))
    pods = wait_for(lambda: (items := core.list_namespaced_pod(ns).items) and all(
        p.spec.node_name or (p.status.conditions and any(
            c.type == "PodScheduled" and c.status == "False" for c in p.status.conditions))
        for p in items if p.metadata.name.startswith("m-")) and items, timeout=60,
        what="every pod bound or unschedulable")
    others = [p for p in pods if p.metadata.name.startswith("other-")]
    assert all(not p.spec.node_name for p in others)
    # Capacity: no node over-committed, counting every pod on it. (A pod left on a node an
    # earlier test deleted stays until kube-controller-manager's pod GC removes it: it is on
    # no node of the cluster.)
    nodes = {n.metadata.name: n for n in core.list_node().items}
    used: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0, 0])
    for p in core.list_pod_for_all_namespaces().items:
        if p.spec.node_name in nodes and p.status.phase not in ("Succeeded", "Failed"):
            req = p.spec.containers[0].resources.requests or {}
            used[p.spec.node_name][0] += milli_value(parse_quantity(req.get("cpu", "0")))
            used[p.spec.node_name][1] += value(parse_quantity(req.get("memory", "0")))
            used[p.spec.node_name][2] += 1
    for name, (cpu, mem, count) in used.items():
        alloc = nodes[name].status.allocatable
        assert cpu <= milli_value(parse_quantity(alloc["cpu"])), name
        assert mem <= value(parse_quantity(alloc["memory"])), name
        assert count <= int(alloc["pods"]), name
    bound = [p for p in pods if p.metadata.name.startswith("m-") and p.spec.node_name]
    # small: 4 x 2 cpu, big: 2 x 8 cpu => 24 cpu (minus earlier pods) / 250m: ~90 pods fit
    assert 60 <= len(bound) <= 96
    # Every Scheduled event names the node the pod is on: nothing was bound twice. (Events
    # are written in the background, after the binding: wait for them.)
    for p in bound[:20]:
        events = wait_for(lambda p=p: [e for e in core.list_namespaced_event(  # type: ignore
            ns, field_selector=f"involvedObject.name={p.metadata.name}").items
            if e.reason == "Scheduled"], what=f"the Scheduled event of {p.metadata.name}")
        assert len(events) == 1 and events[0].message.endswith(f" to {p.spec.node_name}")

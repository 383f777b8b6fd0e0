"""The embedded cluster's DaemonSet controller, driven reconcile by reconcile against a
registry (no HTTP, no kubelets, no scheduler): which pods it makes, keeps, deletes and adopts,
and the status it reports."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pyscheduler_sim.daemonset_controller import DaemonSetController
from pyscheduler_sim.daemonsets import target_node
from pyscheduler_sim.registry import Registry, now_rfc3339

Obj = dict[str, Any]


class World:
    def __init__(self, nodes: int = 3) -> None:
        self.r = Registry()
        self.controller = DaemonSetController(self.r)
        self.ds = self.r.type("apps", "v1", "daemonsets")
        for i in range(nodes):
            self.r.create(self.r.nodes, "", {"metadata": {"name": f"node-{i}",
                                                          "labels": {"disk": "hdd"}}})

    def settle(self) -> None:
        async def run() -> None:
            for _ in range(30):
                before = self.r.store.rv
                for key in list(self.controller.all_keys()):
                    await self.controller.reconcile(key)
                if self.r.store.rv == before:
                    return
            raise AssertionError("the controller did not settle")
        asyncio.run(run())

    def create(self, **pod_spec: Any) -> None:
        self.r.create(self.ds, "default", {"metadata": {"name": "agent"}, "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "template": {"metadata": {"labels": {"app": "agent"}},
                         "spec": {"containers": [{"name": "c", "image": "agent:1"}],
                                  **pod_spec}}}})

    def pods(self) -> list[Obj]:
        return [s.view for s in self.r.store.iter(self.r.pods, "default")]

    def by_node(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for pod in self.pods():
            if not pod["metadata"].get("deletionTimestamp"):
                out[target_node(pod)] = out.get(target_node(pod), 0) + 1
        return out

    def status(self) -> Obj:
        return dict(self.r.get(self.ds, "default", "agent")["status"])

    def node(self, name: str) -> Obj:
        return self.r.get(self.r.nodes, "", name)

    def run_pod(self, pod: Obj, ready: bool = True) -> None:
        """Play the scheduler and the kubelet: bind the pod where it belongs and run it."""
        name = pod["metadata"]["name"]
        self.r.bind("default", name, {"target": {"kind": "Node", "name": target_node(pod)}})
        current = self.r.get(self.r.pods, "default", name)
        current["status"].update(phase="Running", conditions=[
            {"type": "Ready", "status": "True" if ready else "False",
             "lastTransitionTime": now_rfc3339()}])
        self.r.update(self.r.pods, "default", name, current, "status")


@pytest.fixture
def w() -> World:
    return World()


def test_one_pod_per_node_placed_by_affinity_not_by_node_name(w: World) -> None:
    w.create()
    w.settle()
    assert w.by_node() == {"node-0": 1, "node-1": 1, "node-2": 1}
    for pod in w.pods():
        assert "nodeName" not in pod["spec"]
        assert pod["spec"]["schedulerName"] == "default-scheduler"
        assert pod["metadata"]["ownerReferences"][0]["kind"] == "DaemonSet"
        # Created through the API: admission and defaulting ran.
        assert pod["spec"]["priority"] == 0 and pod["status"]["phase"] == "Pending"
        assert "controller-revision-hash" in pod["metadata"]["labels"]
    assert w.status() == {"currentNumberScheduled": 3, "numberMisscheduled": 0,
                          "desiredNumberScheduled": 3, "numberReady": 0,
                          "updatedNumberScheduled": 3, "numberUnavailable": 3,
                          "observedGeneration": 1}


def test_ready_pods_count_as_ready_and_available(w: World) -> None:
    w.create()
    w.settle()
    pods = w.pods()
    w.run_pod(pods[0])
    w.run_pod(pods[1], ready=False)
    w.settle()
    status = w.status()
    assert (status["numberReady"], status["numberAvailable"], status["numberUnavailable"]) == (
        1, 1, 2)


def test_node_selector_and_taints(w: World) -> None:
    node = w.node("node-1")
    node["metadata"]["labels"]["disk"] = "ssd"
    w.r.update(w.r.nodes, "", "node-1", node)
    node = w.node("node-2")
    node["metadata"]["labels"]["disk"] = "ssd"
    node.setdefault("spec", {})["taints"] = [{"key": "dedicated", "effect": "NoSchedule"}]
    w.r.update(w.r.nodes, "", "node-2", node)
    w.create(nodeSelector={"disk": "ssd"})
    w.settle()
    assert w.by_node() == {"node-1": 1}
    assert w.status()["desiredNumberScheduled"] == 1


def test_a_node_that_stops_matching_loses_its_pod(w: World) -> None:
    w.create()
    w.settle()
    node = w.node("node-0")
    node.setdefault("spec", {})["taints"] = [{"key": "evict", "effect": "NoExecute"}]
    w.r.update(w.r.nodes, "", "node-0", node)
    node = w.node("node-1")
    node.setdefault("spec", {})["taints"] = [{"key": "cordon", "effect": "NoSchedule"}]
    w.r.update(w.r.nodes, "", "node-1", node)
    w.settle()
    # NoExecute removes the pod; NoSchedule keeps the one the node has.
    assert w.by_node() == {"node-1": 1, "node-2": 1}
    status = w.status()
    assert (status["desiredNumberScheduled"], status["numberMisscheduled"]) == (1, 1)


def test_pods_of_deleted_nodes_are_removed(w: World) -> None:
    w.create()
    w.settle()
    bound = next(p for p in w.pods() if target_node(p) == "node-0")
    w.run_pod(bound)
    w.r.delete(w.r.nodes, "", "node-0")
    w.r.delete(w.r.nodes, "", "node-1")
    w.settle()
    # The unscheduled pod of node-1 and the bound one of node-0 (its kubelet is gone: removed
    # at once, as the pod garbage collector does) are both gone.
    assert [target_node(p) for p in w.pods()] == ["node-2"]
    assert w.status()["desiredNumberScheduled"] == 1


def test_extra_and_failed_pods_are_replaced(w: World) -> None:
    w.create()
    w.settle()
    first = next(p for p in w.pods() if target_node(p) == "node-0")
    w.run_pod(first)
    # A second pod for node-0 (as after a race): the newer one goes.
    extra = {k: v for k, v in first.items() if k != "status"}
    extra["metadata"] = {**{k: v for k, v in first["metadata"].items()
                            if k in ("labels", "ownerReferences", "generateName")}}
    extra["spec"] = {k: v for k, v in first["spec"].items() if k != "nodeName"}
    w.r.create(w.r.pods, "default", extra)
    w.settle()
    survivors = [p for p in w.pods() if target_node(p) == "node-0"]
    assert [p["metadata"]["name"] for p in survivors] == [first["metadata"]["name"]]
    # A failed daemon pod is deleted; once gone, a new one is made.
    failed = w.r.get(w.r.pods, "default", first["metadata"]["name"])
    failed["status"]["phase"] = "Failed"
    w.r.update(w.r.pods, "default", first["metadata"]["name"], failed, "status")
    w.settle()
    names = [p["metadata"]["name"] for p in w.pods() if target_node(p) == "node-0"]
    assert len(names) == 1 and names[0] != first["metadata"]["name"]


def test_orphans_are_adopted_and_strays_released(w: World) -> None:
    w.r.create(w.r.pods, "default", {"metadata": {"name": "orphan", "labels": {"app": "agent"}},
                                     "spec": {"nodeName": "node-0", "containers": [
                                         {"name": "c", "image": "agent:1"}]}})
    w.create()
    w.settle()
    orphan = w.r.get(w.r.pods, "default", "orphan")
    assert orphan["metadata"]["ownerReferences"][0]["name"] == "agent"
    assert w.by_node() == {"node-0": 1, "node-1": 1, "node-2": 1}
    orphan["metadata"]["labels"] = {"app": "other"}
    w.r.update(w.r.pods, "default", "orphan", orphan)
    w.settle()
    assert not w.r.get(w.r.pods, "default", "orphan")["metadata"].get("ownerReferences")
    assert w.by_node()["node-0"] == 2  # the stray, and a new daemon pod for node-0

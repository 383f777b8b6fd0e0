"""A pod that fits nowhere comes back for the cluster changes that may help it, as kube's
queue brings it back: a pod waiting for required pod affinity is placed as soon as a pod it
may join is bound (by anyone), and a pod no node's labels suit is not tried again for every
pod deleted, only when a node's labels change."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from tests.conftest import AnyCluster, SchedulerThread, wait_for


@pytest.fixture(scope="module")
def scheduler(cluster: AnyCluster) -> Iterator[SchedulerThread]:
    # The periodic retry of parked pods far away: only events bring them back here.
    s = SchedulerThread(cluster.kubeconfig, leaderElection={"enabled": False},
                        podMaxInUnschedulablePodsSeconds=3600, scheduleFragment=None).start()
    yield s
    s.stop()


def pod(name: str, **spec: Any) -> dict[str, Any]:
    labels = spec.pop("labels", {"app": name})
    return {"metadata": {"name": name, "labels": labels}, "spec": {
        "schedulerName": "pyscheduler", "containers": [{"name": "c", "image": "x", "resources": {
            "requests": {"cpu": "100m", "memory": "64Mi"}}}], **spec}}


def attempts(scheduler: SchedulerThread, ns: str, name: str) -> int:
    def count() -> int:
        for entry in scheduler.app.scheduler.queue.entries.values():
            if entry.pod.namespace == ns and entry.pod.name == name:
                return int(entry.attempts)
        return -1
    return int(scheduler.call(count))


def condition(core: client.CoreV1Api, ns: str, name: str) -> Any:
    conditions = core.read_namespaced_pod(name, ns).status.conditions or ()
    return next((c.message for c in conditions
                 if c.type == "PodScheduled" and c.status == "False"), None)


def test_a_pod_waiting_for_pod_affinity_is_placed_when_a_partner_is_bound(
        core: client.CoreV1Api, namespace: str, scheduler: SchedulerThread) -> None:
    ns = namespace
    core.create_namespaced_pod(ns, pod("web", affinity={"podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": {"app": "db"}},
            "topologyKey": "kubernetes.io/hostname"}]}}))
    wait_for(lambda: condition(core, ns, "web"), what="web reported unschedulable")
    assert core.read_namespaced_pod("web", ns).spec.node_name is None
    node = core.list_node().items[0].metadata.name
    # A pod bound by someone else (here: created on its node), the one web may join.
    db = pod("db", labels={"app": "db"})
    db["spec"]["nodeName"] = node
    db["spec"].pop("schedulerName")
    core.create_namespaced_pod(ns, db)
    assert wait_for(lambda: core.read_namespaced_pod("web", ns).spec.node_name,
                    timeout=30, what="web bound beside db") == node


def test_a_pod_no_nodes_labels_suit_waits_for_a_label_not_for_pod_deletions(
        core: client.CoreV1Api, namespace: str, scheduler: SchedulerThread) -> None:
    ns = namespace
    key = f"pool-{uuid.uuid4().hex[:6]}"
    core.create_namespaced_pod(ns, pod("picky", nodeSelector={key: "yes"}))
    wait_for(lambda: condition(core, ns, "picky"), what="picky reported unschedulable")
    tried = attempts(scheduler, ns, "picky")
    assert tried >= 1
    for i in range(3):
        core.create_namespaced_pod(ns, pod(f"other{i}"))
    wait_for(lambda: all(core.read_namespaced_pod(f"other{i}", ns).spec.node_name
                         for i in range(3)), what="the others bound")
    for i in range(3):
        core.delete_namespaced_pod(f"other{i}", ns, grace_period_seconds=0)
    wait_for(lambda: not core.list_namespaced_pod(ns, label_selector="app in (other0,other1,"
                                                  "other2)").items, what="the others gone")
    assert attempts(scheduler, ns, "picky") == tried  # no event of NodeAffinity's
    node = core.list_node().items[0].metadata.name
    core.patch_node(node, {"metadata": {"labels": {key: "yes"}}})
    try:
        assert wait_for(lambda: core.read_namespaced_pod("picky", ns).spec.node_name,
                        timeout=30, what="picky bound once a node has the label") == node
    finally:
        core.patch_node(node, {"metadata": {"labels": {key: None}}})

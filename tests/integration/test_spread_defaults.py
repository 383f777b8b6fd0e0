"""kube's default topology spread constraints on the embedded cluster: a Deployment whose pods
declare no ``topologySpreadConstraints`` spreads over the nodes as the system defaults say,
where resource scoring alone packs it onto the biggest node.

The cluster: one big node (32 CPU, 128Gi) and two small ones (4 CPU, 16Gi), without zone
labels, so only the hostname default ({maxSkew: 3}) tells nodes apart: with the system
defaults, nodes lacking the zone key are still scored (kube's ``systemDefaulted``). Pods ask for
250m CPU and 512Mi.

The scheduler runs kube's default profile (``scheduleFragment: null``: the shipped default
fragment would replace the scores with its most-free-memory rule).

Why the outcome is certain (kube's arithmetic, default weights): LeastAllocated gives the big
node 96 even with its sixth pod ((95 + 97) / 2) and an empty small node 94 ((93 + 96) / 2);
BalancedAllocation gives both 98 or more; every other score plugin gives all three nodes the
same. So without defaults the big node takes all six pods. With them, PodTopologySpread (weight
2) scores a node ``round(count x log(3 + 2) + 3 - 1)`` before normalization: as soon as a node
holds one pod more than another, the emptier one scores at least 20 points more (40 weighted),
while resources favour the big node by 10 at most; when counts are equal, the big node wins.
The first pod lands on the big node, the second and third on the small ones, the fourth on the
big node, the fifth and sixth on the small ones: two each.
"""

from __future__ import annotations

import collections
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client, config

from pyscheduler_sim.cluster import ClusterSpec, PoolSpec
from tests.conftest import AnyCluster, SchedulerThread, open_cluster, wait_for

REPLICAS = 6


@pytest.fixture
def sim(request: pytest.FixtureRequest, server: str,
        tmp_path_factory: pytest.TempPathFactory) -> Iterator[AnyCluster]:
    spec = ClusterSpec(pools=[
        PoolSpec(name="big", count=1, cpu="32", memory="128Gi", zones=()),
        PoolSpec(name="small", count=2, cpu="4", memory="16Gi", zones=()),
    ], pod_start_seconds=0.05, pod_termination_seconds=0.1, lease_renew_seconds=5)
    with open_cluster(request, spec, tmp_path_factory.mktemp("spread-defaults")) as c:
        yield c


@pytest.fixture
def api(sim: AnyCluster) -> client.ApiClient:
    return config.new_client_from_config(config_file=str(sim.kubeconfig))


@pytest.fixture
def ns(api: client.ApiClient) -> str:
    name = f"spread-{uuid.uuid4().hex[:6]}"
    client.CoreV1Api(api).create_namespace({"metadata": {"name": name}})
    return name


def deployment(name: str, scheduler: str) -> dict[str, Any]:
    labels = {"app": name}
    return {"metadata": {"name": name},
            "spec": {"replicas": 0, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {
                         "schedulerName": scheduler,
                         "containers": [{"name": "c", "image": "x", "resources": {
                             "requests": {"cpu": "250m", "memory": "512Mi"}}}]}}}}


def roll_out(api: client.ApiClient, ns: str, name: str, scheduler: SchedulerThread,
             defaults: bool) -> dict[str, int]:
    """Create the Deployment with no replicas, wait until the scheduler knows its ReplicaSet
    (its informer and the pods' informer race otherwise), scale it up and count the pods per
    node once every one is bound."""
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    apps.create_namespaced_deployment(ns, deployment(name, scheduler.config.scheduler_name))
    if defaults:
        known = scheduler.app.scheduler.spread_defaults.selectors.replica_sets
        wait_for(lambda: scheduler.call(lambda: bool(known.get(ns))),
                 what="the ReplicaSet in the scheduler's informer")
    apps.patch_namespaced_deployment_scale(name, ns, {"spec": {"replicas": REPLICAS}})

    def placed() -> dict[str, int] | None:
        pods = core.list_namespaced_pod(ns, label_selector=f"app={name}").items
        nodes = [p.spec.node_name for p in pods]
        if len(nodes) != REPLICAS or not all(nodes):
            return None
        return dict(collections.Counter(nodes))

    result: dict[str, int] = wait_for(placed, timeout=30, what=f"{REPLICAS} pods bound")
    return result


def test_a_deployment_spreads_as_the_system_defaults_say(sim: AnyCluster,
                                                         api: client.ApiClient,
                                                         ns: str) -> None:
    scheduler = SchedulerThread(sim.kubeconfig, leaderElection={"enabled": False},
                                scheduleFragment=None, seed=7).start()
    try:
        assert scheduler.config.pod_topology_spread.defaulting_type == "System"
        placed = roll_out(api, ns, "web", scheduler, defaults=True)
    finally:
        scheduler.stop()
    assert placed == {"big-0": 2, "small-0": 2, "small-1": 2}


def test_without_default_constraints_resources_pack_the_big_node(sim: AnyCluster,
                                                                  api: client.ApiClient,
                                                                  ns: str) -> None:
    scheduler = SchedulerThread(sim.kubeconfig, leaderElection={"enabled": False},
                                scheduleFragment=None, seed=7,
                                podTopologySpread={"defaultingType": "List"}).start()
    try:
        assert scheduler.app.scheduler.spread_defaults.informers == ()
        placed = roll_out(api, ns, "web", scheduler, defaults=False)
    finally:
        scheduler.stop()
    assert placed == {"big-0": REPLICAS}

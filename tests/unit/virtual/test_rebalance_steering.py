"""An evicted virtual pod's replacement gets the capacity reserved for it, and the node."""

from __future__ import annotations

from typing import Any

from pyscheduler.config import parse_config
from pyscheduler.settings import RebalancerConfig
from pyscheduler.framework.cache import Cache
from pyscheduler.framework.interface import CycleContext
from pyscheduler.framework.nodetable import node_info
from pyscheduler.framework.pipeline import Pipeline
from pyscheduler.framework.pod import pod_info
from pyscheduler.plugins.registry import build_profile
from pyscheduler.kube.client import ConnectionConfig, KubeClient
from pyscheduler.scheduler import Scheduler, steered
from pyscheduler.virtual.node import PoolConfig, virtual_node
from pyscheduler.virtual.rebalancer import Rebalancer


def scheduler() -> Scheduler:
    """A scheduler as the rebalancer's Placement; these tests make no API call."""
    return Scheduler(KubeClient(ConnectionConfig(host="http://127.0.0.1:9")),
                     parse_config({}, "t"))


def node(name: str, cpu: str = "4") -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "110"}}}


def web_pod(name: str, uid: str, owner: str = "rs-1", cpu: str = "1",
            node_name: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x", "resources": {
        "requests": {"cpu": cpu, "memory": "1Gi"}}}]}
    if node_name:
        spec["nodeName"] = node_name
    return {"metadata": {"name": name, "namespace": "d", "uid": uid, "ownerReferences": [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner, "uid": owner,
         "controller": True}]}, "spec": spec}


def requested_cpu(cache: Cache, name: str) -> int:
    slot = cache.table.slots[name]
    return int(cache.table.requested[slot, 0])


def test_the_replacement_gets_the_reservation_and_the_reserved_node() -> None:
    placement = scheduler()
    cache = placement.cache
    for name in ("a", "b", "c"):
        cache.set_node(node_info(node(name)))
    rebalancer = Rebalancer(placement, RebalancerConfig())
    virtual = web_pod("web-x", "v-1", node_name="wssp-virtual-aci")
    reservation = rebalancer.reserve(virtual, "b")
    assert reservation is not None
    rebalancer.moving["v-1"] = reservation
    assert requested_cpu(cache, "b") == 1000          # held while the eviction is under way
    rebalancer.await_replacement(virtual, "b")

    # Another controller's pod neither takes nor frees the reservation.
    assert rebalancer.steer(pod_info(web_pod("other", "o-1", owner="rs-2"))) \
        is None
    assert requested_cpu(cache, "b") == 1000
    replacement = pod_info(web_pod("web-y", "r-1"))
    assert rebalancer.steer(replacement) == "b"
    assert requested_cpu(cache, "b") == 0 and rebalancer.moving == {}
    assert rebalancer.steer(replacement) is None   # given once

    # Three equal nodes: the pipeline's random tie-break may pick any; steering picks b.
    picks = set()
    for seed in range(12):
        pipeline = Pipeline(build_profile(parse_config({}, "t")), seed=seed)
        result = pipeline.schedule(CycleContext.for_pod(replacement, cache.table))
        picks.add(result.node)
        moved = steered(result, cache.table.slots, "b")
        assert moved.node == "b" and moved.slot == cache.table.slots["b"]
    assert len(picks) > 1                             # steering is what made it b


def test_steering_never_overrides_the_filters() -> None:
    cache = Cache()
    cache.set_node(node_info(node("a", cpu="4")))
    cache.set_node(node_info(node("b", cpu="1")))        # too small for the pod
    pod = pod_info(web_pod("web-y", "r-1", cpu="2"))
    result = Pipeline(build_profile(parse_config({}, "t")), seed=1).schedule(
        CycleContext.for_pod(pod, cache.table))
    assert result.node == "a"
    assert steered(result, cache.table.slots, "b") is result
    assert steered(result, cache.table.slots, "gone") is result


def test_a_full_cluster_is_seen_before_any_pipeline_run() -> None:
    """The sweep's quick check: the most free cpu and memory on one real node (virtual nodes,
    whose allocatable is a whole cloud pool, do not count)."""
    placement = scheduler()
    cache = placement.cache
    cache.set_node(node_info(node("a", cpu="4")))
    cache.set_node(node_info(node("b", cpu="8")))
    cache.set_node(node_info(virtual_node(PoolConfig("aci", "azure"),
                                          {"cpu": "1000", "memory": "4Ti", "pods": "1000"})))
    cache.add_pod(pod_info(web_pod("on-b", "u-b", cpu="7", node_name="b")))
    rebalancer = Rebalancer(placement, RebalancerConfig())
    room = placement.most_room()
    assert room == (4000, 16 * 2**30)   # cpu: a has 4 free (b 1); memory: a has all 16Gi
    assert rebalancer._may_fit(web_pod("x", "u-x", cpu="4"), room)
    assert not rebalancer._may_fit(web_pod("y", "u-y", cpu="5"), room)


def test_stop_ends_a_move_that_loses_a_cancellation() -> None:
    """A cancel that lands as a wait completes can be lost (asyncio.wait_for before Python
    3.12); stop cancels again until every move has ended instead of waiting for it forever."""
    import asyncio

    async def body() -> None:
        rebalancer = Rebalancer(scheduler(), RebalancerConfig())
        swallowed: list[bool] = []

        async def stubborn_move() -> None:
            while True:
                try:
                    await asyncio.sleep(10)
                except asyncio.CancelledError:
                    if not swallowed:
                        swallowed.append(True)
                        continue
                    raise
        move = asyncio.get_running_loop().create_task(stubborn_move())
        rebalancer._moves.add(move)
        await asyncio.sleep(0)
        stopping = asyncio.get_running_loop().create_task(rebalancer.stop())
        done, _ = await asyncio.wait([stopping], timeout=5)  # not wait_for: it would cancel
        for _ in range(2):
            move.cancel()  # let the loop close cleanly if stop did not end the move
            await asyncio.sleep(0)
        assert done == {stopping}, "stop waited on a move that lost its cancellation"
        assert swallowed
    asyncio.run(body())


def test_a_virtual_pod_listed_before_its_virtual_node_reaches_the_rebalancer() -> None:
    """A new leader's informers list concurrently: a pod this scheduler put on a virtual node
    may arrive before the node does. The pod's own label says it is ours on the cloud, so the
    rebalancer learns of it (and of a move recorded on it) without waiting for an update."""
    placement = scheduler()
    rebalancer = Rebalancer(placement, RebalancerConfig())
    placement.observer = rebalancer
    obj = web_pod("web-x", "v-1", node_name="wssp-virtual-aci")
    obj["spec"]["schedulerName"] = placement.name
    obj["metadata"]["labels"] = {"wssp/virtual-node": "true"}
    obj["metadata"]["annotations"] = {"wssp/move": '{"copy": "web-x-rb-1", "node": "a"}'}
    obj["status"] = {"phase": "Running"}
    placement._pod_added(obj)
    assert list(rebalancer.virtual_pods) == ["v-1"]
    # A pod on a node not (yet) known and without the label is not the rebalancer's.
    other = web_pod("web-y", "v-2", node_name="wssp-virtual-aci")
    other["spec"]["schedulerName"] = placement.name
    placement._pod_added(other)
    assert list(rebalancer.virtual_pods) == ["v-1"]

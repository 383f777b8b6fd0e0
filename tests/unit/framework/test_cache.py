"""The scheduler cache: assume, confirm, forget, expire; pods before their node."""

from __future__ import annotations

from typing import Any

import numpy as np

from pyscheduler.framework.cache import Cache
from pyscheduler.framework.nodetable import CPU, MEMORY, PODS, node_info
from pyscheduler.framework.pod import PodInfo, pod_info


def node(name: str, cpu: str = "4", memory: str = "8Gi") -> Any:
    return node_info({"metadata": {"name": name, "labels": {"zone": "a"}},
                      "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": "110"}}})


def pod(name: str, cpu: str = "500m", node_name: str = "", phase: str = "Pending") -> PodInfo:
    return pod_info({"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
                     "spec": {"nodeName": node_name, "containers": [
                         {"name": "c", "image": "x",
                          "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]},
                     "status": {"phase": phase}})


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def requested(cache: Cache, name: str) -> list[int]:
    row = cache.table.requested[cache.table.slots[name]]
    return [int(row[CPU]), int(row[MEMORY] // 2**30), int(row[PODS])]


def test_assume_counts_immediately_and_confirm_keeps_one_copy() -> None:
    cache = Cache()
    cache.set_node(node("n1"))
    cache.assume(pod("a"), "n1")
    assert requested(cache, "n1") == [500, 1, 1]
    cache.add_pod(pod("a", node_name="n1"))  # the informer confirms
    assert requested(cache, "n1") == [500, 1, 1]
    assert not cache.is_assumed("uid-a")


def test_confirmation_on_another_node_moves_the_pod() -> None:
    cache = Cache()
    cache.set_node(node("n1"))
    cache.set_node(node("n2"))
    cache.assume(pod("a"), "n1")
    cache.add_pod(pod("a", node_name="n2"))
    assert requested(cache, "n1") == [0, 0, 0] and requested(cache, "n2") == [500, 1, 1]


def test_forget_releases_capacity() -> None:
    cache = Cache()
    cache.set_node(node("n1"))
    cache.assume(pod("a"), "n1")
    cache.forget("uid-a")
    assert requested(cache, "n1") == [0, 0, 0] and cache.sizes()["pods"] == 0


def test_unconfirmed_assumption_expires_only_after_binding_finished() -> None:
    clock = Clock()
    cache = Cache(assumed_ttl=30, clock=clock)
    cache.set_node(node("n1"))
    cache.assume(pod("a"), "n1")
    clock.now = 1000
    assert cache.expire() == []  # binding still in flight: never expire
    cache.finish_binding("uid-a")
    clock.now += 29
    assert cache.expire() == []
    clock.now += 2
    assert [p.name for p in cache.expire()] == ["a"]
    assert requested(cache, "n1") == [0, 0, 0]


def test_pod_seen_before_its_node_is_counted_when_the_node_arrives() -> None:
    cache = Cache()
    cache.add_pod(pod("early", node_name="late-node"))
    cache.set_node(node("late-node"))
    assert requested(cache, "late-node") == [500, 1, 1]


def test_finished_pods_hold_nothing() -> None:
    cache = Cache()
    cache.set_node(node("n1"))
    cache.add_pod(pod("a", node_name="n1"))
    cache.add_pod(pod("a", node_name="n1", phase="Succeeded"))
    assert requested(cache, "n1") == [0, 0, 0]


def test_node_removal_and_return_keeps_pods_counted() -> None:
    cache = Cache()
    cache.set_node(node("n1"))
    cache.add_pod(pod("a", node_name="n1"))
    cache.remove_node("n1")
    assert "n1" not in cache.table.slots
    cache.set_node(node("n1"))
    assert requested(cache, "n1") == [500, 1, 1]


def test_label_index_follows_node_updates() -> None:
    cache = Cache()
    cache.set_node(node("n1"))
    assert cache.table.label_mask("zone", "a").tolist() == [True]
    cache.set_node(node_info({"metadata": {"name": "n1", "labels": {"zone": "b"}},
                              "status": {"allocatable": {"cpu": "1"}}}))
    assert cache.table.label_mask("zone", "a").tolist() == [False]
    assert cache.table.label_mask("zone", "b").tolist() == [True]
    ids, values = cache.table.domains("zone")
    assert values == ["b"] and ids.tolist() == [0]
    assert np.array_equal(cache.table.has_label("zone"), [True])


def test_confirm_accepts_only_the_assumed_placement() -> None:
    cache = Cache()
    cache.set_node(node("n1"))
    cache.set_node(node("n2"))
    cache.assume(pod("a"), "n1")
    assert not cache.confirm("uid-a", "n2", {})  # bound elsewhere: caller re-adds
    assert not cache.confirm("uid-a", "n1", {"changed": "yes"})  # labels moved on
    assert cache.confirm("uid-a", "n1", {})
    assert not cache.is_assumed("uid-a") and requested(cache, "n1") == [500, 1, 1]
    assert not cache.confirm("uid-a", "n1", {})  # already confirmed


# -- bounds: nothing the cluster holds can overflow the columns ---------------------------------

def test_a_node_offering_more_than_the_bound_counts_as_the_bound() -> None:
    from pyscheduler.framework.pod import MAX_QUANTITY

    info = node("huge", cpu="100000000000000000", memory="100Ei")
    assert info.allocatable["cpu"] == MAX_QUANTITY and info.allocatable["memory"] == MAX_QUANTITY


def test_requested_sums_saturate_instead_of_wrapping() -> None:
    """Pods at the bound, however many on one node, never wrap the int64 sum negative (which
    would make the node look empty to the fit check)."""
    from pyscheduler.framework.nodetable import REQUESTED_LIMIT
    from pyscheduler.framework.pod import MAX_QUANTITY, PodSpecError

    cache = Cache()
    cache.set_node(node("n1"))
    slot = cache.table.slots["n1"]
    for i in range(1100):  # 1100 * 2**53 > 2**63
        try:
            pod_info({"metadata": {"name": f"p{i}", "namespace": "ns", "uid": f"u{i}"},
                      "spec": {"nodeName": "n1", "containers": [{"name": "c", "resources": {
                          "requests": {"cpu": "10000000000000000"}}}]}})
        except PodSpecError as exc:
            assert exc.partial is not None
            cache.add_pod(exc.partial)
    cpu = int(cache.table.requested[slot, CPU])
    assert cpu == REQUESTED_LIMIT and cpu > MAX_QUANTITY
    # ... and the scoring arithmetic stays in range: (requested + request) * 100 < 2**63
    assert (REQUESTED_LIMIT + MAX_QUANTITY) * 100 < 2**63
    assert int(cache.table.requested[slot, PODS]) == 1100


def test_a_slot_given_to_another_node_changes_its_occupant() -> None:
    cache = Cache()
    cache.set_node(node("a"))
    cache.set_node(node("b"))
    table = cache.table
    before = table.occupant[: table.n].copy()
    cache.set_node(node("a", cpu="8"))  # an update: same node, same occupant
    assert np.array_equal(table.occupant[: table.n], before)
    cache.remove_node("a")
    cache.set_node(node("c"))  # takes a's slot
    assert table.slots["c"] == 0 and table.occupant[0] != before[0]
    assert table.occupant[1] == before[1]


def test_refresh_takes_a_status_write_without_recounting() -> None:
    cache = Cache()
    cache.set_node(node("n1"))
    bound = pod("a", node_name="n1")
    cache.add_pod(bound)
    running = {**bound.raw, "status": {"phase": "Running", "startTime": "2026-01-01T00:00:00Z"}}
    assert cache.refresh(bound.uid, "n1", running)
    state = cache.pods[bound.uid]
    assert state.pod.phase == "Running" and state.pod.raw["status"]["startTime"]
    assert requested(cache, "n1") == [500, 1, 1]


def test_refresh_declines_what_it_cannot_take_alone() -> None:
    cache = Cache()
    cache.set_node(node("n1"))
    cache.set_node(node("n2"))
    bound = pod("a", node_name="n1")
    cache.add_pod(bound)
    meta = bound.raw["metadata"]
    for changed, where in [
            ({**bound.raw, "metadata": {**meta, "labels": {"app": "x"}}}, "n1"),
            ({**bound.raw, "metadata": {**meta, "annotations": {"a": "b"}}}, "n1"),
            ({**bound.raw, "metadata": {**meta, "deletionTimestamp": "2026-01-01T00:00:00Z"}},
             "n1"),
            ({**bound.raw, "status": {"phase": "Succeeded"}}, "n1"),
            (bound.raw, "n2")]:
        assert not cache.refresh(bound.uid, where, changed)
    assumed = pod("b")
    cache.assume(assumed, "n1")
    assert not cache.refresh(assumed.uid, "n1", assumed.raw)  # confirm's case, not this one
    assert not cache.refresh("unknown", "n1", bound.raw)


def test_assumed_pods_are_counted_through_every_way_out() -> None:
    """The count of assumed pods (scheduler_cache_size) and what expiry looks at follow each
    way an assumption ends: confirmed, forgotten, replaced by the informer's view, deleted,
    expired."""
    clock = Clock()
    cache = Cache(assumed_ttl=5.0, clock=clock)
    cache.set_node(node("n1"))
    names = ["confirmed", "forgotten", "replaced", "deleted", "expired"]
    for name in names:
        cache.assume(pod(name), "n1")
    cache.add_pod(pod("bound", node_name="n1", phase="Running"))
    assert cache.sizes() == {"assumed_pods": 5, "pods": 6, "nodes": 1}
    assert cache.confirm("uid-confirmed", "n1", {})
    cache.forget("uid-forgotten")
    cache.add_pod(pod("replaced", node_name="n1", phase="Running"))
    cache.remove_pod("uid-deleted")
    assert cache.sizes() == {"assumed_pods": 1, "pods": 4, "nodes": 1}
    for uid in ("uid-confirmed", "uid-replaced", "uid-expired"):
        cache.finish_binding(uid)  # a no-op for pods no longer assumed
    clock.now = 10.0
    assert [p.name for p in cache.expire()] == ["expired"]
    assert cache.sizes() == {"assumed_pods": 0, "pods": 3, "nodes": 1}
    assert requested(cache, "n1") == [1500, 3, 3]
    cache.assume(pod("again"), "n1")  # a new assumption after all that counts again
    assert cache.sizes()["assumed_pods"] == 1

"""NodeResourcesFit: fitsRequest reasons, LeastAllocated / MostAllocated / MostFreeMemory."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from pyscheduler.plugins.node_resources_fit import (
    NAME,
    TOO_MANY_PODS,
    NodeResourcesFit,
    is_extended_resource,
)
from tests.unit.plugins.builders import (
    NodeBuilder,
    PodBuilder,
    context,
    make_node,
    make_pod,
    outcome,
    rows,
    scores,
)

GPU = "nvidia.com/gpu"
Gi = 2**30
Mi = 2**20


def busy_cluster(pod: PodBuilder, pods_allowed: int = 3) -> Any:
    """n1: 2 cpu, 1000 bytes, 2 gpus, 1000 bytes of ephemeral storage, with a pod using
    1500m / 600 / 1 gpu; n2: large and empty."""
    n1 = make_node("n1").capacity({GPU: 2}, cpu="2", memory=1000, pods=pods_allowed,
                                  ephemeral_storage=1000)
    n2 = make_node("n2").capacity({GPU: 4}, cpu="8", memory=10000, pods=110,
                                  ephemeral_storage=10000)
    used = make_pod("used").req({GPU: 1}, cpu="1500m", memory=600)
    return context(pod.obj(), [n1.obj(), n2.obj()], pods={"n1": [used.obj()]})


def short(resource: str, hopeless: bool = False) -> tuple[str, bool]:
    return (f"Insufficient {resource}", hopeless)


@pytest.mark.parametrize(("pod", "n1", "n2"), [
    pytest.param(make_pod().req(cpu="500m", memory=400), [], [], id="fits exactly"),
    pytest.param(make_pod().req(cpu="501m", memory=400), [short("cpu")], [],
                 id="Insufficient cpu"),
    pytest.param(make_pod().req(cpu="100m", memory=401), [short("memory")], [],
                 id="Insufficient memory"),
    pytest.param(make_pod().req(cpu="1", memory=500), [short("cpu"), short("memory")], [],
                 id="a node may fail for several resources"),
    pytest.param(make_pod().req(cpu="3"), [short("cpu", True)], [],
                 id="request above allocatable is unresolvable"),
    pytest.param(make_pod().req({GPU: 2}), [short(GPU)], [], id="Insufficient extended resource"),
    pytest.param(make_pod().req({GPU: 3}), [short(GPU, True)], [],
                 id="extended request above allocatable is unresolvable"),
    pytest.param(make_pod().req({"example.com/foo": 1}), [short("example.com/foo", True)],
                 [short("example.com/foo", True)], id="resource no node has"),
    pytest.param(make_pod().req(ephemeral_storage=1001), [short("ephemeral-storage", True)], [],
                 id="Insufficient ephemeral-storage"),
    pytest.param(make_pod().req(cpu=0, memory=0), [], [],
                 id="explicit zero requests are not checked"),
    pytest.param(make_pod().req(cpu="300m").req(cpu="300m"), [short("cpu")], [],
                 id="containers add up"),
    pytest.param(make_pod().init_req(cpu="1").req(cpu="100m"), [short("cpu")], [],
                 id="the largest init container counts"),
])
def test_filter(pod: PodBuilder, n1: list[tuple[str, bool]], n2: list[tuple[str, bool]]) -> None:
    ctx = busy_cluster(pod)
    got = outcome(NodeResourcesFit().filter(ctx), ctx.table)
    assert {k: sorted(v) for k, v in got.items()} == {"n1": sorted(n1), "n2": sorted(n2)}


@pytest.mark.parametrize(("pod", "want"), [
    pytest.param(make_pod(), [(TOO_MANY_PODS, False)], id="best-effort pod still needs a slot"),
    pytest.param(make_pod().req(cpu="1"), [(TOO_MANY_PODS, False), short("cpu")],
                 id="too many pods and a shortfall"),
])
def test_too_many_pods(pod: PodBuilder, want: list[tuple[str, bool]]) -> None:
    ctx = busy_cluster(pod, pods_allowed=1)
    got = outcome(NodeResourcesFit().filter(ctx), ctx.table)
    assert sorted(got["n1"]) == sorted(want) and got["n2"] == []


def test_node_without_pod_capacity_takes_no_pods() -> None:
    ctx = context(make_pod().obj(), [make_node("n1").capacity(cpu="1").obj()])
    assert outcome(NodeResourcesFit().filter(ctx), ctx.table) == {"n1": [(TOO_MANY_PODS, False)]}


@pytest.mark.parametrize(("plugin", "want"), [
    pytest.param(NodeResourcesFit(ignored_resources=[GPU]), [short("cpu", True)],
                 id="ignored extended resource"),
    pytest.param(NodeResourcesFit(ignored_resource_groups=["nvidia.com"]), [short("cpu", True)],
                 id="ignored resource group"),
    pytest.param(NodeResourcesFit(ignored_resources=["cpu"]),
                 [short("cpu", True), short(GPU, True)], id="native resources cannot be ignored"),
])
def test_ignored_resources(plugin: NodeResourcesFit, want: list[tuple[str, bool]]) -> None:
    ctx = busy_cluster(make_pod().req({GPU: 5}, cpu="3"))
    assert sorted(outcome(plugin.filter(ctx), ctx.table)["n1"]) == sorted(want)


def test_assumed_pods_count_immediately() -> None:
    ctx = busy_cluster(make_pod().req(cpu="300m"))
    assert outcome(NodeResourcesFit().filter(ctx), ctx.table)["n1"] == []
    ctx.table.add_pod(0, make_pod("assumed").req(cpu="300m").info())
    assert outcome(NodeResourcesFit().filter(ctx), ctx.table)["n1"] == [short("cpu")]


# -- scores -------------------------------------------------------------------------------------

def two_nodes(pod: PodBuilder, a: NodeBuilder, b: NodeBuilder,
              used: dict[str, list[PodBuilder]] | None = None) -> Any:
    return context(pod.obj(), [a.obj(), b.obj()],
                   pods={k: [p.obj() for p in v] for k, v in (used or {}).items()})


SCORE_CASES = [
    pytest.param(two_nodes(make_pod().req(cpu="3", memory=5000),
                           make_node("a").capacity(cpu="4", memory=10000),
                           make_node("b").capacity(cpu="6", memory=10000)),
                 {}, {"a": 37, "b": 50}, {"a": 62, "b": 50},
                 id="differently sized nodes"),
    pytest.param(two_nodes(make_pod().req(cpu="400m", memory=312 * Mi),
                           make_node("a").capacity(cpu="1", memory=Gi),
                           make_node("b").capacity(cpu="1", memory=Gi),
                           {"a": [make_pod("be")]}),
                 {}, {"a": 50, "b": 64}, {"a": 50, "b": 35},
                 id="best-effort pods on the node count with 100m and 200Mi"),
    pytest.param(two_nodes(make_pod(),
                           make_node("a").capacity(cpu="1", memory=Gi),
                           make_node("b").capacity(cpu="2", memory=2 * Gi)),
                 {}, {"a": 85, "b": 92}, {"a": 14, "b": 7},
                 id="best-effort incoming pod counts with 100m and 200Mi"),
    pytest.param(two_nodes(make_pod().req(cpu="250m", memory=768 * Mi),
                           make_node("a").capacity(cpu="1", memory=Gi),
                           make_node("b").capacity(cpu="1", memory=Gi)),
                 {"resources": [("cpu", 3), ("memory", 1)]}, {"a": 62, "b": 62},
                 {"a": 37, "b": 37}, id="weighted average"),
    pytest.param(two_nodes(make_pod().req(cpu="2", memory=200 * Mi),
                           make_node("a").capacity(cpu="1", memory=Gi),
                           make_node("b").capacity(cpu="4", memory=Gi)),
                 {}, {"a": 40, "b": 65}, {"a": 59, "b": 34},
                 id="over-committed resource: least 0, most capped at 100"),
    pytest.param(two_nodes(make_pod().req({GPU: 1}, cpu="500m", memory=512 * Mi),
                           make_node("a").capacity({GPU: 4}, cpu="1", memory=Gi),
                           make_node("b").capacity(cpu="1", memory=Gi)),
                 {"resources": [("cpu", 1), ("memory", 1), (GPU, 2)]},
                 {"a": 62, "b": 50}, {"a": 37, "b": 50},
                 id="extended resource scored where the node has it"),
    pytest.param(two_nodes(make_pod().req(cpu="500m", memory=512 * Mi),
                           make_node("a").capacity({GPU: 4}, cpu="1", memory=Gi),
                           make_node("b").capacity(cpu="1", memory=Gi)),
                 {"resources": [("cpu", 1), ("memory", 1), (GPU, 2)]},
                 {"a": 50, "b": 50}, {"a": 50, "b": 50},
                 id="extended resource not requested is left out"),
    pytest.param(two_nodes(make_pod().req(cpu="1"),
                           make_node("a"), make_node("b").capacity(cpu="2")),
                 {}, {"a": 0, "b": 50}, {"a": 0, "b": 50},
                 id="resources without allocatable are left out"),
    pytest.param(two_nodes(make_pod().req(ephemeral_storage=100),
                           make_node("a").capacity(cpu="1", ephemeral_storage=400),
                           make_node("b").capacity(cpu="1", ephemeral_storage=1000)),
                 {"resources": [("ephemeral-storage", 1)]}, {"a": 75, "b": 90},
                 {"a": 25, "b": 10}, id="ephemeral storage"),
]


@pytest.mark.parametrize(("ctx", "args", "least", "most"), SCORE_CASES)
def test_least_and_most_allocated(ctx: Any, args: dict[str, Any], least: dict[str, int],
                                  most: dict[str, int]) -> None:
    feasible = ctx.nodes().copy()
    got_least = NodeResourcesFit(strategy="LeastAllocated", **args).score(ctx, feasible)
    got_most = NodeResourcesFit(strategy="MostAllocated", **args).score(ctx, feasible)
    assert scores(got_least, ctx.table) == least
    assert scores(got_most, ctx.table) == most


@pytest.mark.parametrize(("scored", "want"), [
    pytest.param(("a", "b", "c", "d"), {"a": 50, "b": 100, "c": 16, "d": 0},
                 id="most free memory gets 100, others proportionally"),
    pytest.param(("a", "c", "d"), {"a": 100, "c": 33, "d": 0},
                 id="normalized over the scored nodes"),
    pytest.param(("d",), {"d": 0}, id="no free memory anywhere scores zero"),
])
def test_most_free_memory(scored: tuple[str, ...], want: dict[str, int]) -> None:
    nodes = [make_node("a").capacity(memory=4 * Gi), make_node("b").capacity(memory=8 * Gi),
             make_node("c").capacity(memory=2 * Gi), make_node("d").capacity(memory=Gi // 2)]
    ctx = context(make_pod().req(memory=Gi).obj(), [n.obj() for n in nodes],
                  pods={"b": [make_pod("x").req(memory=Gi).obj()]})
    feasible = rows(ctx.table, scored)
    got = NodeResourcesFit(strategy="MostFreeMemory").score(ctx, feasible)
    assert scores(got, ctx.table, feasible) == want
    assert ((got >= 0) & (got <= 100)).all()  # rows not scored: ignored, but in range


@pytest.mark.parametrize(("kwargs", "message"), [
    pytest.param({"strategy": "RequestedToCapacityRatio"}, "is not supported",
                 id="unknown strategy"),
    pytest.param({"resources": []}, "at least one resource", id="no resources"),
    pytest.param({"resources": [("cpu", 0)]}, r"resources\[0\].weight", id="zero weight"),
    pytest.param({"resources": [("cpu", 101)]}, r"resources\[0\].weight", id="weight above 100"),
    pytest.param({"resources": [("cpu", 1), ("cpu", 2)]}, "duplicate", id="duplicate resource"),
    pytest.param({"resources": [("", 1)]}, r"resources\[0\].name", id="empty name"),
])
def test_invalid_arguments(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        NodeResourcesFit(**kwargs)


def test_most_free_memory_needs_no_resources() -> None:
    assert NodeResourcesFit(strategy="MostFreeMemory", resources=[]).resources == ()


@pytest.mark.parametrize(("name", "extended"), [
    ("nvidia.com/gpu", True), ("cpu", False), ("hugepages-2Mi", False),
    ("kubernetes.io/something", False), ("requests.example.com/x", False),
])
def test_is_extended_resource(name: str, extended: bool) -> None:
    assert is_extended_resource(name) is extended


def test_holes_are_well_defined() -> None:
    ctx = context(make_pod().req(cpu="1").obj(),
                  [make_node("x").capacity(cpu="4", pods=10).obj(),
                   make_node("y").capacity(cpu="4", pods=10).obj()], removed=["x"])
    result = NodeResourcesFit().filter(ctx)
    assert result.passed is not None and len(result.passed) == 2
    assert np.array_equal(NodeResourcesFit().score(ctx, ctx.nodes()), [0, 75])


def test_name() -> None:
    assert NAME == NodeResourcesFit.name == "NodeResourcesFit"

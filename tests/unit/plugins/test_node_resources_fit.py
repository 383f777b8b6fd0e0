"""NodeResourcesFit: fitsRequest reasons, LeastAllocated / MostAllocated /
RequestedToCapacityRatio / MostFreeMemory."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from pyscheduler.plugins.node_resources_fit import (
    NAME,
    TOO_MANY_PODS,
    NodeResourcesFit,
    broken_linear,
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
DEFAULT_FIT_RESOURCES = [("cpu", 1), ("memory", 1)]


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


def kube_fit_score_case(pod: PodBuilder) -> Any:
    """kube's TestFitScore cluster: node1 4000 / 10000 running 2000 / 4000, node2 6000 / 10000
    running 1000 / 2000 (cpu in cores, as kube's test writes "4000")."""
    return two_nodes(pod, make_node("node1").capacity(cpu="4000", memory=10000),
                     make_node("node2").capacity(cpu="6000", memory=10000),
                     {"node1": [make_pod("e1").req(cpu="2000", memory=4000)],
                      "node2": [make_pod("e2").req(cpu="1000", memory=2000)]})


def test_kube_fit_score_least_and_most_allocated() -> None:
    """kube's TestFitScore, LeastAllocated and MostAllocated cases."""
    ctx = kube_fit_score_case(make_pod().req(cpu="1000", memory=2000))
    feasible = ctx.nodes().copy()
    assert scores(NodeResourcesFit(strategy="LeastAllocated").score(ctx, feasible),
                  ctx.table) == {"node1": 32, "node2": 63}
    assert scores(NodeResourcesFit(strategy="MostAllocated").score(ctx, feasible),
                  ctx.table) == {"node1": 67, "node2": 36}


# -- RequestedToCapacityRatio (kube's requested_to_capacity_ratio_test.go and fit_test.go) ------

SPREAD = [(0, 10), (100, 0)]  # least requested nodes first
PACK = [(0, 0), (100, 10)]
PACK_ONE = [(0, 0), (100, 1)]
FOO, BAR = "intel.com/foo", "intel.com/bar"


def kube_node(name: str, milli_cpu: int, memory: int, extended: dict[str, int]) -> NodeBuilder:
    """kube's noderesources ``makeNode``."""
    return make_node(name).capacity(dict(extended), cpu=f"{milli_cpu}m", memory=memory)


def extended_pair(foo1: int, foo2: int, bar1: int | None = None,
                  bar2: int | None = None) -> tuple[NodeBuilder, NodeBuilder]:
    one = {FOO: foo1} if bar1 is None else {FOO: foo1, BAR: bar1}
    two = {FOO: foo2} if bar2 is None else {FOO: foo2, BAR: bar2}
    return (kube_node("node1", 4000, 10000 * Mi, one), kube_node("node2", 4000, 10000 * Mi, two))


BIG = (make_node("node1").capacity(cpu="4000", memory=10000),
       make_node("node2").capacity(cpu="4000", memory=10000))
SIZED = (make_node("node1").capacity(cpu="4000", memory=10000),
         make_node("node2").capacity(cpu="6000", memory=10000))

RATIO_CASES = [
    # TestRequestedToCapacityRatioScoringStrategy
    pytest.param(make_pod().bare(), BIG, {"node1": [make_pod("e1").bare(), make_pod("e2").bare()]},
                 DEFAULT_FIT_RESOURCES, SPREAD, {"node1": 100, "node2": 100},
                 id="nothing scheduled, nothing requested"),
    pytest.param(make_pod().bare().req(cpu="1000", memory=2000).req(cpu="2000", memory=3000),
                 SIZED, {"node1": [make_pod("e1").bare(), make_pod("e2").bare()]},
                 DEFAULT_FIT_RESOURCES, SPREAD, {"node1": 38, "node2": 50},
                 id="nothing scheduled, resources requested, differently sized nodes"),
    pytest.param(make_pod().bare(), SIZED,
                 {"node1": [make_pod("e1").req(cpu="3000", memory=5000)],
                  "node2": [make_pod("e2").req(cpu="3000", memory=5000)]},
                 DEFAULT_FIT_RESOURCES, SPREAD, {"node1": 38, "node2": 50},
                 id="no resources requested, pods scheduled with resources"),
    # TestFitScore
    pytest.param(make_pod().req(cpu="3000", memory=5000), SIZED,
                 {"node1": [make_pod("e1").req(cpu="2000", memory=4000)],
                  "node2": [make_pod("e2").req(cpu="1000", memory=2000)]},
                 DEFAULT_FIT_RESOURCES, SPREAD, {"node1": 10, "node2": 32},
                 id="fit score case1: over-committed cpu scores f(100) = 0 and is left out"),
    pytest.param(make_pod().req(cpu="3000", memory=5000), SIZED,
                 {"node1": [make_pod("e1").req(cpu="2000", memory=4000)],
                  "node2": [make_pod("e2").req(cpu="1000", memory=2000)]},
                 DEFAULT_FIT_RESOURCES, PACK, {"node1": 95, "node2": 68},
                 id="fit score case2: bin packing"),
    # TestResourceBinPackingSingleExtended
    pytest.param(make_pod().bare(), extended_pair(8, 4), {}, [(FOO, 1)], PACK_ONE,
                 {"node1": 0, "node2": 0}, id="single extended: nothing requested"),
    pytest.param(make_pod().bare().req({FOO: 2}), extended_pair(8, 4), {}, [(FOO, 1)],
                 PACK_ONE, {"node1": 2, "node2": 5},
                 id="single extended: pods scheduled with less resources"),
    pytest.param(make_pod().bare().req({FOO: 2}), extended_pair(8, 4),
                 {"node2": [make_pod("e").bare().req({FOO: 2})]}, [(FOO, 1)], PACK_ONE,
                 {"node1": 2, "node2": 10}, id="single extended: on node with existing pod"),
    pytest.param(make_pod().bare().req({FOO: 4}), extended_pair(8, 4), {}, [(FOO, 1)],
                 PACK_ONE, {"node1": 5, "node2": 10},
                 id="single extended: pods scheduled with more resources"),
    # TestResourceBinPackingMultipleExtended
    pytest.param(make_pod().bare(), extended_pair(8, 4, 4, 8), {}, [(FOO, 3), (BAR, 5)],
                 PACK_ONE, {"node1": 0, "node2": 0}, id="multiple extended: nothing requested"),
    pytest.param(make_pod().bare().req({FOO: 2, BAR: 2}), extended_pair(8, 4, 4, 8), {},
                 [(FOO, 3), (BAR, 5)], PACK_ONE, {"node1": 4, "node2": 3},
                 id="multiple extended: pods scheduled with less resources"),
    pytest.param(make_pod().bare().req({FOO: 2, BAR: 2}), extended_pair(8, 4, 4, 8),
                 {"node2": [make_pod("e").bare().req({FOO: 4, BAR: 2})]},
                 [(FOO, 3), (BAR, 5)], PACK_ONE, {"node1": 4, "node2": 7},
                 id="multiple extended: on node with existing pod (over-committed foo)"),
    pytest.param(make_pod().bare().req({FOO: 4, BAR: 2}), extended_pair(8, 4, 4, 8), {},
                 [(FOO, 3), (BAR, 5)], PACK_ONE, {"node1": 5, "node2": 5},
                 id="multiple extended: pods scheduled with more resources"),
]


@pytest.mark.parametrize(("pod", "nodes", "running", "resources", "shape", "want"), RATIO_CASES)
def test_requested_to_capacity_ratio(pod: PodBuilder, nodes: tuple[NodeBuilder, ...],
                                     running: dict[str, list[PodBuilder]],
                                     resources: list[tuple[str, int]],
                                     shape: list[tuple[int, int]], want: dict[str, int]) -> None:
    ctx = context(pod.obj(), [n.obj() for n in nodes],
                  pods={k: [p.obj() for p in v] for k, v in running.items()})
    plugin = NodeResourcesFit(strategy="RequestedToCapacityRatio", resources=resources,
                              shape=shape)
    got = plugin.score(ctx, ctx.nodes().copy())
    assert scores(got, ctx.table) == want
    assert [plugin.score_row(ctx, slot) for slot in range(ctx.n)] == got.tolist()


@pytest.mark.parametrize(("points", "expected"), [
    pytest.param([(10, 1), (90, 9)],
                 {-10: 1, 0: 1, 9: 1, 10: 1, 15: 1, 19: 1, 20: 2, 89: 8, 90: 9, 99: 9, 100: 9,
                  110: 9}, id="rising, flat outside the points"),
    pytest.param([(0, 2), (40, 10), (100, 0)],
                 {-10: 2, 0: 2, 20: 6, 30: 8, 40: 10, 70: 5, 100: 0, 110: 0},
                 id="up then down"),
    pytest.param([(0, 2), (40, 2), (100, 2)],
                 {-10: 2, 0: 2, 20: 2, 30: 2, 40: 2, 70: 2, 100: 2, 110: 2}, id="constant"),
    pytest.param([(0, 100), (100, 0)], {33: 67, 50: 50, 99: 1}, id="falling: exact"),
    pytest.param([(0, 10), (60, 0)], {5: 10, 7: 9, 59: 1, 60: 0},
                 id="falling: Go truncates toward zero, not down"),
    pytest.param([(50, 7)], {0: 7, 50: 7, 100: 7}, id="one point"),
])
def test_broken_linear_function(points: list[tuple[int, int]], expected: dict[int, int]) -> None:
    """kube's TestBrokenLinearFunction, plus truncation of a falling segment."""
    assert {p: broken_linear(points, p) for p in expected} == expected


@pytest.mark.parametrize(("cpu", "want"), [
    pytest.param("400m", 3, id="cpu 4, memory 1: 2.5 rounds to 3 (Python's round: 2)"),
    pytest.param("800m", 5, id="cpu 8, memory 1: 4.5 rounds to 5 (Python's round: 4)"),
    pytest.param("700m", 4, id="cpu 7, memory 1: exactly 4"),
])
def test_rounding_is_go_math_round(cpu: str, want: int) -> None:
    """The node score is Go's math.Round of the weighted mean: halves away from zero."""
    plugin = NodeResourcesFit(strategy="RequestedToCapacityRatio",
                              resources=[("cpu", 1), ("memory", 1)], shape=PACK_ONE)
    ctx = context(make_pod().bare().req(cpu=cpu, memory=Gi * 15 // 100).obj(),
                  [make_node("n").capacity(cpu="1", memory=Gi).obj()])
    got = plugin.score(ctx, ctx.nodes().copy())
    assert scores(got, ctx.table) == {"n": want}
    assert plugin.score_row(ctx, 0) == want


@pytest.mark.parametrize(("shape", "message"), [
    pytest.param([], r"shape: at least one point must be specified", id="no points"),
    pytest.param([(0, 0), (0, 10)],
                 r"shape\[1\]\.utilization: utilization values must be sorted in increasing "
                 r"order, got 0 after 0", id="equal utilizations"),
    pytest.param([(50, 0), (10, 10)], r"shape\[1\]\.utilization: .*sorted", id="decreasing"),
    pytest.param([(0, 0), (101, 10)], r"shape\[1\]\.utilization: must be an integer from 0 to "
                                      r"100, got 101", id="utilization above 100"),
    pytest.param([(-1, 0)], r"shape\[0\]\.utilization: .*got -1", id="negative utilization"),
    pytest.param([(0, 11)], r"shape\[0\]\.score: must be an integer from 0 to 10, got 11",
                 id="score above 10"),
    pytest.param([(0, -1)], r"shape\[0\]\.score: .*got -1", id="negative score"),
])
def test_invalid_shape(shape: list[tuple[int, int]], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        NodeResourcesFit(strategy="RequestedToCapacityRatio", shape=shape)


def test_shape_only_with_requested_to_capacity_ratio() -> None:
    with pytest.raises(ValueError, match="requestedToCapacityRatio: only used with type"):
        NodeResourcesFit(strategy="LeastAllocated", shape=[(0, 0), (100, 10)])


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
    pytest.param({"strategy": "BalancedAllocation"}, "is not supported",
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

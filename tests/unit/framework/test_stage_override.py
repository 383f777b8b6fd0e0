"""Stage overrides: a per-pod replacement or extension of the filter and score stages."""

from __future__ import annotations

import numpy as np

from pyscheduler.config import parse_config
from pyscheduler.framework.cache import Cache
from pyscheduler.framework.interface import CycleContext, FilterResult
from pyscheduler.framework.nodetable import BoolArray, IntArray, node_info
from pyscheduler.framework.pipeline import Pipeline, StageOverride
from pyscheduler.framework.pod import pod_info
from pyscheduler.plugins.registry import build_profile


def setup() -> tuple[Pipeline, CycleContext]:
    cache = Cache()
    for name, cpu in (("small", "1"), ("big", "8"), ("odd", "4")):
        cache.set_node(node_info({"metadata": {"name": name},
                                  "status": {"allocatable": {"cpu": cpu, "memory": "8Gi",
                                                             "pods": "10"}}}))
    pod = pod_info({"metadata": {"name": "p", "namespace": "d", "uid": "u"},
                    "spec": {"containers": [{"name": "c", "image": "x", "resources": {
                        "requests": {"cpu": "2"}}}]}})
    return Pipeline(build_profile(parse_config({}, "t")), seed=1), \
        CycleContext.for_pod(pod, cache.table)


def only(name: str):  # type: ignore[no-untyped-def]
    def fn(ctx: CycleContext) -> FilterResult:
        return FilterResult.single(np.array([n == name for n in ctx.table.names]),
                                   "node(s) were not chosen by the fragment")
    return fn


def prefer(name: str):  # type: ignore[no-untyped-def]
    def fn(ctx: CycleContext, feasible: BoolArray) -> IntArray:
        return np.array([100 if n == name else 0 for n in ctx.table.names], np.int64)
    return fn


def test_replacing_the_filter_never_waives_the_invariant_filters() -> None:
    pipeline, ctx = setup()
    # "small" lacks cpu for the pod: whatever a replacing filter answers, it stays infeasible.
    result = pipeline.schedule(ctx, StageOverride("frag", filter=only("small")))
    assert result.node is None
    assert result.filtered.diagnose().message() == (
        "0/3 nodes are available: 1 Insufficient cpu, "
        "2 node(s) were not chosen by the fragment.")


def test_replacing_the_filter_replaces_the_policy_filters() -> None:
    cache = Cache()
    for name, zone in (("a", "x"), ("b", "y")):
        cache.set_node(node_info({"metadata": {"name": name, "labels": {"zone": zone}},
                                  "status": {"allocatable": {"cpu": "4", "memory": "8Gi",
                                                             "pods": "10"}}}))
    pod = pod_info({"metadata": {"name": "p", "namespace": "d", "uid": "u"},
                    "spec": {"nodeSelector": {"zone": "x"},
                             "containers": [{"name": "c", "image": "x"}]}})
    pipeline = Pipeline(build_profile(parse_config({}, "t")), seed=1)
    ctx = CycleContext.for_pod(pod, cache.table)
    # The node selector says "a"; a fragment that replaces the filter stage says "b" and wins:
    # node affinity is policy, not safety.
    assert pipeline.schedule(ctx, StageOverride("frag", filter=only("b"))).node == "b"
    assert pipeline.schedule(ctx).node == "a"


def test_extending_the_filter_adds_to_the_built_ins() -> None:
    pipeline, ctx = setup()
    result = pipeline.schedule(ctx, StageOverride("frag", filter=only("small"),
                                                  filter_mode="extend"))
    assert result.node is None
    assert result.filtered.diagnose().message() == (
        "0/3 nodes are available: 1 Insufficient cpu, "
        "2 node(s) were not chosen by the fragment.")


def test_score_replace_and_extend() -> None:
    pipeline, ctx = setup()
    assert pipeline.schedule(ctx).node == "big"  # least allocated
    assert pipeline.schedule(ctx, StageOverride("frag", score=prefer("odd"))).node == "odd"
    heavy = StageOverride("frag", score=prefer("odd"), score_mode="extend", score_weight=10)
    assert pipeline.schedule(ctx, heavy).node == "odd"
    light = StageOverride("frag", score=prefer("odd"), score_mode="extend", score_weight=0)
    assert pipeline.schedule(ctx, light).node == "big"


def test_percentage_of_nodes_to_score_limits_the_scored_nodes() -> None:
    from pyscheduler.framework.pipeline import nodes_to_score

    assert nodes_to_score(50, 10) == 50  # fewer than 100 nodes: all of them
    assert nodes_to_score(5000, 100) == 5000
    assert nodes_to_score(5000, 10) == 500
    assert nodes_to_score(5000, 1) == 100  # never fewer than 100
    assert nodes_to_score(5000, 0) == 5000 * 10 // 100  # adaptive: 50 - 5000/125 = 10 %
    cache = Cache()
    for i in range(300):
        cache.set_node(node_info({"metadata": {"name": f"n{i}"}, "status": {
            "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "10"}}}))
    pipeline = Pipeline(build_profile(parse_config({"percentageOfNodesToScore": 10}, "t")),
                        seed=1, incremental=False)
    pod = pod_info({"metadata": {"name": "p", "namespace": "d", "uid": "u"},
                    "spec": {"containers": [{"name": "c", "image": "x"}]}})
    seen = set()
    for _ in range(3):
        result = pipeline.schedule(CycleContext.for_pod(pod, cache.table), explain=True)
        assert result.feasible_count == 100  # 10 % of 300 is below the floor of 100
        seen.add(result.node)
    # The start index rotates, so successive attempts look at different nodes.
    assert len(seen) == 3

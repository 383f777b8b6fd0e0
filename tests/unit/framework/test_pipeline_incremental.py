"""The pipeline's incremental path (row-local answers recomputed for changed rows only, per-row
scalar methods for a handful of rows) must choose exactly what the full path chooses — also when
a score that is not row-local (ImageLocality's spread) moves on rows that did not change."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pyscheduler.config import parse_config
from pyscheduler.framework.cache import Cache
from pyscheduler.framework.interface import CycleContext
from pyscheduler.framework.nodetable import node_info
from pyscheduler.framework.pipeline import Pipeline
from pyscheduler.framework.pod import pod_info
from pyscheduler.plugins.balanced_allocation import BalancedAllocation
from pyscheduler.plugins.node_resources_fit import NodeResourcesFit
from pyscheduler.plugins.node_unschedulable import NodeUnschedulable
from pyscheduler.plugins.registry import build_profile
from tests.unit.plugins.builders import make_node, make_pod

CPUS = st.sampled_from(["0", "100m", "250m", "1", "1500m"])
MEMS = st.sampled_from(["0", "64Mi", "512Mi", "1Gi", "3Gi"])


@st.composite
def nodes(draw: Any) -> list[dict[str, Any]]:
    out = []
    for i in range(draw(st.integers(1, 12))):  # > SCALAR_ROWS: views are used too
        b = make_node(f"n{i}").capacity(cpu=draw(st.sampled_from(["1", "2", "4"])),
                                        memory=draw(st.sampled_from(["2Gi", "4Gi", "0"])),
                                        pods=draw(st.sampled_from([2, 5, 110])))
        b.label("zone", draw(st.sampled_from(["a", "b"])))
        if draw(st.booleans()):
            b.taint("dedicated", "x", draw(st.sampled_from(["NoSchedule", "PreferNoSchedule"])))
        if draw(st.integers(0, 5)) == 0:
            b.unschedulable()
        out.append(b.obj())
    return out


@st.composite
def pods(draw: Any) -> list[dict[str, Any]]:
    shapes = []
    for _ in range(draw(st.integers(1, 3))):
        b = make_pod().req(cpu=draw(CPUS), memory=draw(MEMS))
        if draw(st.booleans()):
            b.toleration("dedicated", "x")
        if draw(st.booleans()):
            b.node_selector({"zone": draw(st.sampled_from(["a", "b"]))})
        shapes.append(b.obj())
    out = []
    for i in range(draw(st.integers(1, 25))):
        p = dict(shapes[draw(st.integers(0, len(shapes) - 1))])
        p["metadata"] = {**p["metadata"], "name": f"p{i}", "uid": f"u{i}"}
        out.append(p)
    return out


STRATEGIES: list[dict[str, Any]] = [
    {"type": "LeastAllocated"}, {"type": "MostAllocated"},
    {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {"shape": [
        {"utilization": 0, "score": 2}, {"utilization": 40, "score": 10},
        {"utilization": 100, "score": 0}]}}]


@settings(max_examples=150, deadline=None)
@given(nodes(), pods(), st.sampled_from(STRATEGIES))
def test_incremental_and_full_paths_choose_the_same_nodes(
        node_objs: list[dict[str, Any]], pod_objs: list[dict[str, Any]],
        strategy: dict[str, Any]) -> None:
    config = parse_config({"scoringStrategy": strategy}, "test")
    caches = [Cache(), Cache()]
    for cache in caches:
        for n in node_objs:
            cache.set_node(node_info(n))
    full = Pipeline(build_profile(config), seed=3, incremental=False)
    fast = Pipeline(build_profile(config), seed=3, incremental=True)
    assert fast.incremental
    for obj in pod_objs:
        chosen = []
        for cache, pipeline in zip(caches, (full, fast)):
            pod = pod_info(obj)
            result = pipeline.schedule(CycleContext.for_pod(pod, cache.table))
            chosen.append(result.node)
            if result.node is not None:
                cache.assume(pod, result.node)
        assert chosen[0] == chosen[1]


@settings(max_examples=150, deadline=None)
@given(nodes(), pods())
def test_per_row_methods_agree_with_the_vectorized_plugins(
        node_objs: list[dict[str, Any]], pod_objs: list[dict[str, Any]]) -> None:
    cache = Cache()
    for n in node_objs:
        cache.set_node(node_info(n))
    for i, obj in enumerate(pod_objs[:-1]):  # some load on the nodes
        cache.add_pod(pod_info({**obj, "spec": {**obj["spec"],
                                                "nodeName": node_objs[i % len(node_objs)][
                                                    "metadata"]["name"]}}))
    ctx = CycleContext.for_pod(pod_info(pod_objs[-1]), cache.table)
    everything = np.ones(ctx.n, np.bool_)
    for plugin in (NodeResourcesFit(strategy="LeastAllocated"),
                   NodeResourcesFit(strategy="MostAllocated"),
                   NodeResourcesFit(strategy="RequestedToCapacityRatio",
                                    shape=[(0, 0), (50, 10), (100, 3)]),
                   BalancedAllocation()):
        vector = plugin.score(ctx, everything)
        assert [plugin.score_row(ctx, s) for s in range(ctx.n)] == vector.tolist()
    for f in (NodeResourcesFit(), NodeUnschedulable()):
        result = f.filter(ctx)
        expected = result.passed.tolist() if result.passed is not None else [True] * ctx.n
        assert [f.filter_row(ctx, s) for s in range(ctx.n)] == expected


@settings(max_examples=100, deadline=None)
@given(nodes(), pods())
def test_per_row_filters_agree_with_the_vectorized_filters(
        node_objs: list[dict[str, Any]], pod_objs: list[dict[str, Any]]) -> None:
    from pyscheduler.plugins.node_affinity import NodeAffinity
    from pyscheduler.plugins.node_name import NodeName
    from pyscheduler.plugins.node_ports import NodePorts
    from pyscheduler.plugins.taint_toleration import TaintToleration

    cache = Cache()
    for n in node_objs:
        cache.set_node(node_info(n))
    for i, obj in enumerate(pod_objs[:-1]):
        cache.add_pod(pod_info({**obj, "spec": {**obj["spec"], "nodeName": node_objs[
            i % len(node_objs)]["metadata"]["name"]}}))
    porter = make_pod("porter").uid("porter").host_port(8080).obj()
    cache.add_pod(pod_info({**porter, "spec": {**porter["spec"], "nodeName": "n0"}}))
    last = pod_objs[-1]
    variants = [last, {**last, "spec": {**last["spec"], "nodeName": "n0"}},
                make_pod("wants-port").uid("w").host_port(8080).obj()]
    for obj in variants:
        ctx = CycleContext.for_pod(pod_info(obj), cache.table)
        for f in (NodeName(), NodePorts(), TaintToleration(), NodeAffinity()):
            result = f.filter(ctx)
            expected = result.passed.tolist() if result.passed is not None else [True] * ctx.n
            assert [f.filter_row(ctx, s) for s in range(ctx.n)] == expected, f.name


def _extending_override() -> Any:
    """An override that extends both stages: rejects odd rows of zone "b", prefers even rows."""
    from pyscheduler.framework.interface import FilterResult
    from pyscheduler.framework.pipeline import StageOverride

    def extra_filter(ctx: CycleContext) -> FilterResult:
        rows = np.arange(ctx.n)
        zone_b = ctx.table.label_index["zone"]["b"][: ctx.n] if "zone" in \
            ctx.table.label_index and "b" in ctx.table.label_index["zone"] \
            else np.zeros(ctx.n, np.bool_)
        return FilterResult.single(~(zone_b & (rows % 2 == 1)), "odd row in zone b")

    def extra_score(ctx: CycleContext, feasible: Any) -> Any:
        return np.where(np.arange(ctx.n) % 2 == 0, 40, 0).astype(np.int64)

    return StageOverride("extra", filter=extra_filter, filter_mode="extend", score=extra_score,
                         score_mode="extend", score_weight=2)


@settings(max_examples=100, deadline=None)
@given(nodes(), pods())
def test_the_fast_path_with_an_extending_override_chooses_like_the_full_path(
        node_objs: list[dict[str, Any]], pod_objs: list[dict[str, Any]]) -> None:
    config = parse_config({}, "test")
    caches = [Cache(), Cache()]
    for cache in caches:
        for n in node_objs:
            cache.set_node(node_info(n))
    full = Pipeline(build_profile(config), seed=5, incremental=False)
    fast = Pipeline(build_profile(config), seed=5, incremental=True)
    override = _extending_override()
    for obj in pod_objs:
        chosen = []
        for cache, pipeline in zip(caches, (full, fast)):
            pod = pod_info(obj)
            result = pipeline.schedule(CycleContext.for_pod(pod, cache.table), override)
            chosen.append(result.node)
            if result.node is not None:
                cache.assume(pod, result.node)
        assert chosen[0] == chosen[1]


MiB = 2**20
IMAGES = [("app:v1", 900 * MiB), ("app:v2", 1200 * MiB), ("db:latest", 3000 * MiB)]
IMAGE_SETS = st.lists(st.sampled_from(IMAGES), unique=True, max_size=2)


@settings(max_examples=100, deadline=None)
@given(nodes(), pods(), st.lists(st.tuples(st.integers(0, 11), IMAGE_SETS), max_size=25),
       st.lists(st.sampled_from(["app:v1", "app:v2", "db"]), min_size=1, max_size=2))
def test_image_changes_on_other_rows_reach_the_fast_path(
        node_objs: list[dict[str, Any]], pod_objs: list[dict[str, Any]],
        pulls: list[tuple[int, list[tuple[str, int]]]], images: list[str]) -> None:
    """Between pods, a node pulls or drops images: the spread of an image changes the score
    of every node holding it, rows the table did not touch included. ImageLocality must not be
    answered from the row-local memo (the profile runs it for every pod)."""
    config = parse_config({}, "test")
    assert "ImageLocality" in config.plugins.score_weights
    caches = [Cache(), Cache()]
    for cache in caches:
        for n in node_objs:
            cache.set_node(node_info(n))
    full = Pipeline(build_profile(config), seed=4, incremental=False)
    fast = Pipeline(build_profile(config), seed=4, incremental=True)
    for i, obj in enumerate(pod_objs):
        if i < len(pulls):
            row, listed = pulls[i]
            node = node_objs[row % len(node_objs)]
            changed = {**node, "status": {**node["status"], "images": [
                {"names": [name], "sizeBytes": size} for name, size in listed]}}
            for cache in caches:
                cache.set_node(node_info(changed))
        spec = {**obj["spec"], "containers": obj["spec"]["containers"] + [
            {"name": f"img{j}", "image": image} for j, image in enumerate(images)]}
        results = []
        for cache, pipeline in zip(caches, (full, fast)):
            pod = pod_info({**obj, "spec": spec})
            result = pipeline.schedule(CycleContext.for_pod(pod, cache.table))
            results.append(result)
            if result.node is not None:
                cache.assume(pod, result.node)
        assert results[0].node == results[1].node
        if results[0].total is not None and results[1].total is not None:
            feasible = results[0].filtered.feasible
            assert results[0].total[feasible].tolist() == results[1].total[feasible].tolist()


def test_changed_since_lists_the_rows_a_scan_would_find() -> None:
    """The table's log of recent changes answers as a scan of row generations does: for a
    generation in the log, one older than the log holds (the scan), and the current one."""
    from pyscheduler.framework.nodetable import NodeTable
    table = NodeTable()
    table.CHANGE_LOG = 8  # trim often
    for i in range(20):
        table.set_node(node_info(make_node(f"n{i}").capacity(cpu="4").obj()))
    rng = np.random.default_rng(7)
    seen = [table.generation]
    for step in range(200):
        slot = int(rng.integers(table.n))
        table.add_pod(slot, pod_info(make_pod(f"p{step}").uid(f"u{step}").req(cpu="1m").obj()))
        seen.append(table.generation)
        for since in (seen[-1], seen[-2], seen[max(0, len(seen) - 5)], seen[0], -1, 0):
            want = np.flatnonzero(table.row_generation[: table.n] > since)
            got = table.changed_since(since)
            assert got.dtype == np.intp and got.tolist() == want.tolist(), (step, since)
    assert len(table._log) <= 2 * table.CHANGE_LOG  # the log stays bounded

"""The default logic (``scheduleFragment: default:v1.0.0``) as shipped: among the feasible nodes,
the one with the most free memory wins, in place of kube's resource scores (and ImageLocality);
the pod's own preferences still count as in kube. Run through the fragment manager and the
pipeline as the scheduler runs them, natively and in WebAssembly."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import numpy as np
import pytest

from pyscheduler.config import parse_config
from pyscheduler.framework.interface import CycleContext, FilterResult
from pyscheduler.framework.nodetable import NodeTable, node_info
from pyscheduler.framework.pipeline import Pipeline, StageOverride
from pyscheduler.framework.pod import PodInfo, pod_info
from pyscheduler.plugins.default_logic import REPLACED_SCORES, IncrementalMostFreeMemory
from pyscheduler.plugins.node_resources_fit import most_free_memory
from pyscheduler.plugins.registry import build_profile
from pyscheduler.wasm.manager import FragmentManager
from tests.unit.plugins.builders import expr, make_node, make_pod

IMAGE = "registry.example.com/app:1"
GB = 2**30


def cluster() -> NodeTable:
    """``roomy``: the most free memory but its CPU mostly taken (kube's LeastAllocated and
    BalancedAllocation prefer ``balanced``); ``balanced``: less free memory, idle CPU, and the
    pod's image already pulled (ImageLocality prefers it too); ``tainted`` and ``cordoned``:
    more memory still, but not feasible; ``soft``: the most memory of all behind a
    PreferNoSchedule taint."""
    table = NodeTable(capacity=8)
    for node in (
            make_node("roomy").capacity(cpu="8", memory="64Gi", pods=110).label("zone", "a"),
            make_node("balanced").capacity(cpu="8", memory="64Gi", pods=110).label("zone", "b")
            .image(IMAGE, size=2 * GB),
            make_node("tainted").capacity(cpu="8", memory="128Gi", pods=110)
            .taint("dedicated", "db").image(IMAGE, size=2 * GB),
            make_node("cordoned").capacity(cpu="8", memory="128Gi", pods=110).unschedulable()
            .image(IMAGE, size=2 * GB)):
        table.set_node(node_info(node.obj()))
    placed = {"roomy": ("7", "8Gi"), "balanced": ("1", "12Gi")}
    for name, (cpu, memory) in placed.items():
        table.add_pod(table.slots[name], pod_info(
            make_pod(f"on-{name}").req(cpu=cpu, memory=memory).obj()))
    return table


def managers(table: NodeTable) -> list[FragmentManager]:
    return [FragmentManager(table), FragmentManager(table, native=False)]


async def place(manager: FragmentManager, pod: PodInfo, table: NodeTable, *,
                fast: bool) -> str | None:
    """One attempt as the scheduler makes it: the pod's selection, its logic evaluated, the
    pipeline run (the incremental fast path or the full one)."""
    pipeline = Pipeline(build_profile(parse_config({}, "test")), seed=1, incremental=fast)
    ctx = CycleContext.for_pod(pod, table)
    active = manager.select(pod).active
    assert active is not None
    if active.evaluate is not None:
        base = pipeline.base_feasible(ctx, active)
        assert active.evaluate_now is not None
        active = active.evaluate_now(ctx, base) or await active.evaluate(ctx, base)
        ctx = CycleContext.for_pod(pod, table)
    return pipeline.schedule(ctx, active, explain=not fast).node


def placements(pod: dict[str, Any], table: NodeTable) -> set[str | None]:
    """Where ``pod`` lands under the shipped configuration: native and in WebAssembly, on the
    fast and the full path (one answer expected)."""
    async def main() -> set[str | None]:
        out = set()
        for manager in managers(table):
            await manager.start()
            try:
                for fast in (True, False):
                    out.add(await place(manager, pod_info(pod), table, fast=fast))
            finally:
                await manager.stop()
        return out
    return asyncio.run(main())


def builtin_only(pod: dict[str, Any], table: NodeTable) -> str | None:
    pipeline = Pipeline(build_profile(parse_config({}, "test")), seed=1)
    return pipeline.schedule(CycleContext.for_pod(pod_info(pod), table)).node


def test_a_pod_without_preferences_lands_on_the_feasible_node_with_the_most_free_memory() -> None:
    pytest.importorskip("wasmtime")
    table = cluster()
    pod = make_pod("web").req(cpu="500m", memory="1Gi").image(IMAGE).obj()
    assert builtin_only(pod, table) == "balanced"  # kube's resource scores and image locality
    # 55Gi free against 51Gi: kube's scores would prefer "balanced" by far (idle CPU, and an
    # image most nodes have), most free memory alone counts here.
    assert placements(pod, table) == {"roomy"}


def test_a_preferred_node_affinity_still_wins_as_in_kube() -> None:
    pytest.importorskip("wasmtime")
    table = cluster()
    pod = make_pod("web").req(cpu="500m", memory="1Gi") \
        .preferred_term(10, expr("zone", "In", "b")).obj()
    assert builtin_only(pod, table) == "balanced"
    assert placements(pod, table) == {"balanced"}


def test_a_prefer_no_schedule_taint_still_counts_as_in_kube() -> None:
    pytest.importorskip("wasmtime")
    table = cluster()
    table.set_node(node_info(make_node("soft").capacity(cpu="8", memory="256Gi", pods=110)
                             .taint("spot", "true", "PreferNoSchedule").obj()))
    pod = make_pod("web").req(cpu="500m", memory="1Gi").obj()
    assert placements(pod, table) == {"roomy"}  # TaintToleration (weight 3) keeps it off "soft"
    tolerant = make_pod("batch").req(cpu="500m", memory="1Gi") \
        .toleration("spot", "true", effect="PreferNoSchedule").obj()
    assert placements(tolerant, table) == {"soft"}


def test_a_cordoned_node_is_feasible_for_a_pod_tolerating_the_cordon_as_in_kube() -> None:
    pytest.importorskip("wasmtime")
    table = cluster()
    pod = make_pod("rescue").req(cpu="500m", memory="1Gi") \
        .toleration("node.kubernetes.io/unschedulable", effect="NoSchedule").obj()
    assert placements(pod, table) == {"cordoned"}


def test_an_override_standing_in_for_scores_that_defers_gives_the_built_in_answer() -> None:
    """A fragment whose score fails under the "Default" policy hands the stage back: the
    plugins its score stands in for count again, on both paths."""
    table = cluster()
    pod = pod_info(make_pod("web").req(cpu="500m", memory="1Gi").image(IMAGE)
                   .obj())
    deferring = StageOverride(name="fragment:x", filter=lambda c: FilterResult.all_pass(),
                              filter_mode="extend", score=lambda c, f: None,
                              score_mode="extend", score_replaces=REPLACED_SCORES)
    profile = build_profile(parse_config({}, "test"))
    for fast in (True, False):
        expected = Pipeline(profile, seed=3, incremental=fast).schedule(
            CycleContext.for_pod(pod, table), explain=not fast)
        got = Pipeline(profile, seed=3, incremental=fast).schedule(
            CycleContext.for_pod(pod, table), deferring, explain=not fast)
        assert got.node == expected.node == "balanced"
        assert expected.total is not None and got.total is not None
        assert np.array_equal(got.total[got.filtered.feasible],
                              expected.total[expected.filtered.feasible])


def test_the_incremental_most_free_memory_gives_the_plain_scores() -> None:
    """Pods of a few memory requests, in turn, over a table whose nodes change, fill up and
    leave, with candidates that change between pods: on every scored row the incremental
    score is the plain one."""
    rng = random.Random(7)
    table = NodeTable(capacity=4)
    for i in range(30):
        table.set_node(node_info(make_node(f"n{i}").capacity(
            cpu="8", memory=f"{rng.choice([1, 2, 4, 8])}Gi", pods=110).obj()))
    scorer = IncrementalMostFreeMemory()
    for i in range(400):
        memory = rng.choice(["0", "256Mi", "1Gi", "3Gi"])
        pod = pod_info(make_pod(f"p{i}").req(cpu="100m", memory=memory).obj())
        ctx = CycleContext.for_pod(pod, table)
        feasible = ctx.nodes() & (np.array([rng.random() < 0.8 for _ in range(ctx.n)])
                                  if rng.random() < 0.5 else ctx.nodes())
        got, want = scorer(ctx, feasible), most_free_memory(ctx, feasible)
        assert np.array_equal(got[feasible], want[feasible]), i
        action = rng.random()
        slot = rng.choice(sorted(table.slots.values()))
        if action < 0.5:
            table.add_pod(slot, pod)
        elif action < 0.6:
            table.set_node(node_info(make_node(table.names[slot]).capacity(
                cpu="8", memory=f"{rng.choice([1, 2, 4, 16])}Gi", pods=110).obj()))
        elif action < 0.65 and table.n > 3:
            table.remove_node(table.names[slot])
        elif action < 0.7:
            table.set_node(node_info(make_node(f"new-{i}").capacity(
                cpu="8", memory="6Gi", pods=110).obj()))

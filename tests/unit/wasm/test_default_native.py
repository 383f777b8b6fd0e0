"""The shipped default module and its native equivalent give identical verdicts and scores.

``scheduleFragment: default:v1.0.0`` runs the packaged ``default-v1.0.0.wasm`` natively when its
sha256 is the shipped build's (:data:`pyscheduler.wasm.manager.NATIVE_DEFAULTS`). Here the same
module is also loaded in WebAssembly (``FragmentManager(native=False)``) and both are run as the
scheduler runs them, over random clusters (random allocatable, labels, taints of every effect,
cordoned nodes, pods already placed, nodes changing and leaving) and random pods (requests,
nodeSelector, required and preferred node affinity, tolerations including the cordon's):

* the module's filter verdict on every row equals the AND of the built-in filters it duplicates
  (NodeUnschedulable, TaintToleration, NodeAffinity, NodeResourcesFit), so extending them with it
  changes nothing and the native override needs no filter;
* its score on every candidate row equals the native most-free-memory score;
* the whole attempt — feasible nodes, every plugin's scores, the totals and the chosen node —
  is the same, on the full path (explain) and on the incremental fast path.
"""

from __future__ import annotations

import asyncio
import copy
import random
from typing import Any

import numpy as np
import pytest

from pyscheduler.config import parse_config
from pyscheduler.framework.interface import CycleContext
from pyscheduler.framework.nodetable import BoolArray, NodeTable, node_info
from pyscheduler.framework.pipeline import Pipeline, StageOverride
from pyscheduler.framework.pod import PodInfo, pod_info
from pyscheduler.plugins.default_logic import MOST_FREE_MEMORY_WEIGHT, REPLACED_SCORES
from pyscheduler.plugins.node_resources_fit import most_free_memory
from pyscheduler.plugins.registry import build_profile
from pyscheduler.wasm.manager import NATIVE_DEFAULTS, PACKAGED_DIR, FragmentManager
from tests.unit.plugins.builders import expr, make_node, make_pod

pytest.importorskip("wasmtime")

DUPLICATED_FILTERS = ("NodeUnschedulable", "TaintToleration", "NodeAffinity", "NodeResourcesFit")
ZONES = ("a", "b", "c")
TAINT_KEYS = ("dedicated", "gpu", "spot")
EFFECTS = ("NoSchedule", "NoExecute", "PreferNoSchedule")
CORDON = "node.kubernetes.io/unschedulable"


def random_node(rng: random.Random, name: str) -> dict[str, Any]:
    node = make_node(name).capacity(
        {"example.com/gpu": rng.choice([None, "0", "2", "4"])},
        cpu=rng.choice(["1", "2", "4", "8"]),
        memory=f"{rng.choice([1, 2, 4, 8, 16, 32])}Gi",
        pods=rng.choice([5, 20, 110]))
    if rng.random() < 0.9:
        node.label("zone", rng.choice(ZONES))
    if rng.random() < 0.5:
        node.label("tier", rng.choice(["x", "y"]))
    if rng.random() < 0.3:
        node.label("rank", str(rng.randint(0, 9)))
    for _ in range(rng.choice([0, 0, 0, 1, 2])):
        node.taint(rng.choice(TAINT_KEYS), rng.choice(["", "true"]), rng.choice(EFFECTS))
    if rng.random() < 0.1:
        node.unschedulable()
    return node.obj()


def random_requests(rng: random.Random) -> dict[str, str | None]:
    return {"cpu": rng.choice([None, "100m", "250m", "500m", "1", "3"]),
            "memory": rng.choice([None, "100Mi", "500Mi", "1Gi", "2Gi", "6Gi", "20Gi"]),
            "example.com/gpu": rng.choice([None] * 8 + ["1", "3"])}


def random_pod(rng: random.Random, name: str) -> dict[str, Any]:
    pod = make_pod(name)
    requests = {k: v for k, v in random_requests(rng).items() if v is not None}
    pod.container(requests) if requests else pod.bare()
    if rng.random() < 0.2:
        pod.node_selector(zone=rng.choice(ZONES))
    if rng.random() < 0.25:
        pod.required_term(rng.choice([
            expr("zone", "In", *rng.sample(ZONES, 2)), expr("tier", "NotIn", "x"),
            expr("tier", "Exists"), expr("rank", "DoesNotExist"), expr("rank", "Gt", "4")]))
        if rng.random() < 0.3:
            pod.required_term(expr("zone", "In", rng.choice(ZONES)))
    if rng.random() < 0.3:
        pod.preferred_term(rng.randint(1, 100), expr("zone", "In", rng.choice(ZONES)))
    for _ in range(rng.choice([0, 1, 2, 3])):
        pod.toleration(rng.choice(TAINT_KEYS), rng.choice([None, "true"]),
                       effect=rng.choice(("",) + EFFECTS))
    if rng.random() < 0.15:
        pod.toleration(CORDON, effect="NoSchedule")
    if rng.random() < 0.05:
        pod.toleration(operator="Exists")  # tolerates every taint
    return pod.obj()


def random_table(rng: random.Random, nodes: int) -> NodeTable:
    table = NodeTable(capacity=8)
    for i in range(nodes):
        table.set_node(node_info(random_node(rng, f"n{i}")))
    for i in range(nodes):
        placed = pod_info(make_pod(f"placed-{i}").req(
            cpu=rng.choice([None, "100m", "500m"]),
            memory=rng.choice([None, "500Mi", "1Gi", "2Gi"])).obj())
        table.request_vector(placed)
        table.add_pod(table.slots[f"n{rng.randrange(nodes)}"], placed)
    return table


def builtin_verdict(pipeline: Pipeline, ctx: CycleContext) -> BoolArray:
    passed: BoolArray = ctx.nodes().copy()
    for plugin in pipeline.profile.filters:
        if plugin.name in DUPLICATED_FILTERS:
            result = plugin.filter(ctx)
            if result.passed is not None:
                passed &= result.passed[: len(passed)]
    return passed


async def compare_one(pod: PodInfo, table: NodeTable, wasm: StageOverride,
                      native: StageOverride, pipelines: dict[str, Pipeline]) -> str | None:
    """Both overrides for one pod, as the scheduler runs them; returns the chosen node."""
    ctx = CycleContext.for_pod(pod, table)
    base = pipelines["wasm"].base_feasible(ctx, wasm)
    assert wasm.evaluate_now is not None and wasm.evaluate is not None
    # On the loop when the calls are short, else awaited (a busy machine), as the scheduler does.
    resolved = wasm.evaluate_now(ctx, base) or await wasm.evaluate(ctx, base)
    assert resolved.answered == (("filter", "ok"), ("score", "ok"))
    # The module's verdict, row by row, is the built-in filters' it duplicates.
    assert resolved.filter is not None
    verdict = resolved.filter(ctx)
    assert verdict is not None and verdict.passed is not None
    valid = ctx.nodes()
    expected = builtin_verdict(pipelines["wasm"], ctx)
    got = verdict.passed[: len(valid)] & valid
    assert (got == expected).all(), (pod.name, np.flatnonzero(got != expected))
    # Its score, on every candidate row, is the native one.
    candidates = base & got
    assert resolved.score is not None
    module_scores = resolved.score(ctx, candidates)
    assert module_scores is not None
    native_scores = most_free_memory(ctx, candidates)
    rows = np.flatnonzero(candidates)
    assert (module_scores[rows] == native_scores[rows]).all(), pod.name
    # The whole attempt: full path with every plugin's scores, then the fast path.
    full_wasm = pipelines["wasm"].schedule(ctx, resolved, explain=True)
    full_native = pipelines["native"].schedule(CycleContext.for_pod(pod, table), native,
                                               explain=True)
    assert (full_wasm.filtered.feasible == full_native.filtered.feasible).all()
    assert full_wasm.node == full_native.node
    if full_wasm.total is not None or full_native.total is not None:
        assert full_wasm.total is not None and full_native.total is not None
        feasible = full_wasm.filtered.feasible
        assert (full_wasm.total[feasible] == full_native.total[feasible]).all()
        per_wasm, per_native = full_wasm.per_plugin or {}, full_native.per_plugin or {}
        assert per_wasm.keys() == per_native.keys()
        assert not REPLACED_SCORES & per_native.keys()
        for name in per_wasm:
            assert (per_wasm[name][feasible] == per_native[name][feasible]).all(), name
    fast_wasm = pipelines["fast-wasm"].schedule(CycleContext.for_pod(pod, table), resolved)
    fast_native = pipelines["fast-native"].schedule(CycleContext.for_pod(pod, table), native)
    assert fast_wasm.node == fast_native.node == full_native.node
    if fast_wasm.total is not None and fast_native.total is not None:
        feasible = fast_native.filtered.feasible
        assert (fast_wasm.total[feasible] == fast_native.total[feasible]).all()
    return fast_native.node


@pytest.mark.parametrize("seed", range(6))
def test_the_native_default_gives_the_modules_verdicts_and_scores(seed: int) -> None:
    rng = random.Random(seed)

    async def main() -> None:
        nodes = rng.choice([6, 20, 40])
        table = random_table(rng, nodes)
        wasm_manager = FragmentManager(table, native=False)
        native_manager = FragmentManager(table)
        await wasm_manager.start()
        await native_manager.start()
        try:
            probe = pod_info(make_pod("probe").obj())
            wasm = wasm_manager.select(probe).active
            native = native_manager.select(probe).active
            assert wasm is not None and wasm.evaluate is not None  # runs the module
            assert native is not None and native.evaluate is None  # no call at all
            assert native.filter is None and native.score_mode == "extend"
            assert wasm.score_replaces == native.score_replaces == REPLACED_SCORES
            assert wasm.score_weight == native.score_weight == MOST_FREE_MEMORY_WEIGHT
            profile = build_profile(parse_config({}, "test"))
            pipelines = {name: Pipeline(profile, seed=seed, incremental="fast" in name)
                         for name in ("wasm", "native", "fast-wasm", "fast-native")}
            shapes: list[dict[str, Any]] = []
            for i in range(60):
                # Pods of one shape come again (the row memos' and the module's incremental
                # paths), with the cluster changed meanwhile.
                if shapes and rng.random() < 0.4:
                    obj = copy.deepcopy(rng.choice(shapes))
                    obj["metadata"]["name"] = obj["metadata"]["uid"] = f"p{i}"
                else:
                    obj = random_pod(rng, f"p{i}")
                    shapes.append(obj)
                pod = pod_info(obj)
                chosen = await compare_one(pod, table, wasm, native, pipelines)
                if chosen is not None and rng.random() < 0.7:  # assumed there
                    table.request_vector(pod)
                    table.add_pod(table.slots[chosen], pod)
                if rng.random() < 0.15:  # a node changes (taints, cordon, labels, size)
                    name = f"n{rng.randrange(nodes)}"
                    if name in table.slots:
                        table.set_node(node_info(random_node(rng, name)))
                if rng.random() < 0.05 and table.n > 2:  # a node leaves
                    name = f"n{rng.randrange(nodes)}"
                    if name in table.slots:
                        table.remove_node(name)
        finally:
            await wasm_manager.stop()
            await native_manager.stop()

    asyncio.run(main())


def test_the_shipped_module_is_the_one_run_natively() -> None:
    import hashlib

    wasm = (PACKAGED_DIR / "default-v1.0.0.wasm").read_bytes()
    assert hashlib.sha256(wasm).hexdigest() == NATIVE_DEFAULTS["default-v1.0.0"], \
        "the shipped default module changed: run this file's differential test on the new " \
        "build, then update NATIVE_DEFAULTS (and its version if its behaviour changed)"

"""The whole vectorized pipeline against a plain per-node reference of the same rules: every
node is charged to the first filter (in profile order) that rejects it, feasible nodes are
scored with kube's default weights, and the pipeline picks one of the reference's best nodes.
ImageLocality's spread counts every node, feasible or not."""

from __future__ import annotations

import collections
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
from pyscheduler.plugins.registry import build_profile
from tests.unit.plugins import reference as ref
from tests.unit.plugins.builders import expr, make_node, make_pod

FILTERS = ["NodeUnschedulable", "NodeName", "TaintToleration", "NodeAffinity", "NodePorts",
           "NodeResourcesFit"]
WEIGHTS = {"TaintToleration": 3, "NodeAffinity": 2, "NodeResourcesFit": 1,
           "NodeResourcesBalancedAllocation": 1, "ImageLocality": 1}
MiB = 2**20
NODE_IMAGES = [("web:1", 600 * MiB), ("web:2", 600 * MiB), ("db:latest", 1500 * MiB),
               ("tiny:latest", 10 * MiB)]
REF_FILTERS = [ref.node_unschedulable, ref.node_name, ref.taint_toleration, ref.node_affinity,
               ref.node_ports, ref.node_resources_fit]


@st.composite
def scenario(draw: Any) -> tuple[list[dict[str, Any]], list[tuple[int, dict[str, Any]]],
                                 dict[str, Any]]:
    nodes = []
    for i in range(draw(st.integers(1, 7))):
        b = make_node(f"n{i}").capacity(cpu=draw(st.sampled_from(["1", "2", "4"])),
                                        memory=draw(st.sampled_from(["1Gi", "4Gi"])),
                                        pods=draw(st.sampled_from([1, 3, 110])))
        b.label("zone", draw(st.sampled_from(["a", "b", "c"])))
        for effect in draw(st.lists(st.sampled_from(["NoSchedule", "PreferNoSchedule"]),
                                    max_size=2, unique=True)):
            b.taint(draw(st.sampled_from(["k1", "k2"])), "v", effect)
        if draw(st.integers(0, 6)) == 0:
            b.unschedulable()
        for name, size in draw(st.lists(st.sampled_from(NODE_IMAGES), unique=True,
                                        max_size=3)):
            b.image(name, size=size)
        nodes.append(b.obj())
    existing = []
    for j in range(draw(st.integers(0, 6))):
        p = make_pod(f"e{j}").uid(f"e{j}").req(cpu=draw(st.sampled_from(["100m", "500m"])),
                                              memory="256Mi")
        if draw(st.booleans()):
            p.host_port(8080)
        existing.append((draw(st.integers(0, len(nodes) - 1)), p.obj()))
    pod = make_pod("new").uid("new").req(cpu=draw(st.sampled_from(["0", "200m", "900m", "3"])),
                                         memory=draw(st.sampled_from(["0", "512Mi", "2Gi"])))
    if draw(st.booleans()):
        pod.toleration(draw(st.sampled_from(["k1", "k2"])), "v")
    if draw(st.booleans()):
        pod.node_affinity_in("zone", *draw(st.lists(st.sampled_from("abc"), min_size=1,
                                                    max_size=2, unique=True)))
    if draw(st.booleans()):
        pod.preferred_term(draw(st.integers(1, 100)), expr("zone", "In", draw(
            st.sampled_from("abc"))))
    if draw(st.booleans()):
        pod.host_port(8080)
    for image in draw(st.lists(st.sampled_from(["web:1", "web:2", "db", "tiny", "other"]),
                               max_size=2)):
        pod.image(image)
    return nodes, existing, pod.obj()


@settings(max_examples=200, deadline=None)
@given(scenario())
def test_pipeline_matches_the_per_node_reference(
        s: tuple[list[dict[str, Any]], list[tuple[int, dict[str, Any]]], dict[str, Any]]
) -> None:
    node_objs, existing, pod_obj = s
    cache = Cache()
    for n in node_objs:
        cache.set_node(node_info(n))
    for index, p in existing:
        cache.add_pod(pod_info({**p, "spec": {**p["spec"], "nodeName": f"n{index}"}}))
    config = parse_config({"plugins": {"filter": FILTERS, "score": WEIGHTS}}, "test")
    pod = pod_info(pod_obj)
    result = Pipeline(build_profile(config), seed=0, incremental=False).schedule(
        CycleContext.for_pod(pod, cache.table), explain=True)

    table = cache.table
    refs = [ref.RefNode(table.infos[slot], list(table.pods[slot].values()))  # type: ignore[arg-type]
            for slot in range(table.n)]
    charged: collections.Counter[str] = collections.Counter()
    feasible = []
    for node in refs:
        for check in REF_FILTERS:
            reasons = check(pod, node)
            if reasons:
                for message, _ in reasons:
                    charged[message] += 1
                break
        else:
            feasible.append(node)
    assert result.filtered.diagnose().reasons == charged
    if not feasible:
        assert result.node is None
        return
    totals = collections.Counter({n.name: 0 for n in feasible})
    for name, score in zip([n.name for n in feasible], ref.taint_toleration_score(pod, feasible)):
        totals[name] += 3 * score
    for name, score in zip([n.name for n in feasible], ref.node_affinity_score(pod, feasible)):
        totals[name] += 2 * score
    images = ref.RefImageStates()
    for n in node_objs:
        images.set_node(n["metadata"]["name"], n["status"].get("images", []))
    for n in feasible:
        totals[n.name] += ref.least_allocated(pod, n) + ref.balanced_allocation(pod, n)
        totals[n.name] += ref.image_locality(pod, images.node_states(n.name), len(node_objs))
    best = max(totals.values())
    assert result.node in {name for name, t in totals.items() if t == best}
    if result.total is not None:
        got = {table.names[int(r)]: int(result.total[r])
               for r in np.flatnonzero(result.filtered.feasible)}
        assert got == dict(totals)

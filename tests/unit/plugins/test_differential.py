"""Differential tests: every vectorized plugin agrees with the plain per-node reference.

Hypothesis builds small random clusters (labels from small alphabets, taints, capacities, pods
already running with requests and host ports, some nodes removed again to leave holes) and random
pods (requests, node selectors, required and preferred affinity with every operator, tolerations,
host ports, a node name). For each plugin, the pass mask and the reasons of every node, and the
scores of a random set of scored nodes, must equal :mod:`tests.unit.plugins.reference`.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyscheduler.framework.interface import CycleContext
from pyscheduler.framework.nodetable import BoolArray, NodeTable
from pyscheduler.framework.pod import pod_info
from pyscheduler.plugins.balanced_allocation import BalancedAllocation
from pyscheduler.plugins.node_affinity import NodeAffinity
from pyscheduler.plugins.node_name import NodeName
from pyscheduler.plugins.node_ports import NodePorts
from pyscheduler.plugins.node_resources_fit import NodeResourcesFit
from pyscheduler.plugins.node_unschedulable import NodeUnschedulable
from pyscheduler.plugins.taint_toleration import TaintToleration
from tests.unit.plugins import reference
from tests.unit.plugins.builders import (
    build_table,
    expr,
    field,
    make_node,
    make_pod,
    outcome,
    scores,
)

SETTINGS = settings(max_examples=200, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])

GPU = "nvidia.com/gpu"
NODE_NAMES = [f"n{i}" for i in range(6)]
LABEL_KEYS = ["zone", "tier", "num"]
LABEL_VALUES = ["a", "b", "", "1", "5", "07", "10", "x1"]
INT_BOUNDS = ["0", "5", "-1", "+6", "10"]
TAINT_KEYS = ["dedicated", "gpu", "node.kubernetes.io/unschedulable", "spot"]
TAINT_VALUES = ["", "true", "infra"]
EFFECTS = ["NoSchedule", "NoExecute", "PreferNoSchedule"]
PORTS = [(80, "TCP", ""), (80, "TCP", "10.0.0.1"), (80, "UDP", ""), (443, "TCP", "10.0.0.2"),
         (443, "TCP", "")]
CPU = ["0", "100m", "250m", "1", "1500m", "4"]
MEMORY = [0, 100, 1000, 4096, 200 * 2**20, 2**30]


@dataclass
class Scenario:
    nodes: list[dict[str, Any]]
    pods: dict[str, list[dict[str, Any]]]
    removed: list[str]
    pod: dict[str, Any]
    scored: list[str]

    def build(self) -> tuple[CycleContext, list[reference.RefNode]]:
        table = build_table(self.nodes, self.pods, self.removed)
        ctx = CycleContext.for_pod(pod_info(self.pod), table)
        refs = []
        for slot in range(table.n):
            info = table.infos[slot]
            if table.valid[slot] and info is not None:
                refs.append(reference.RefNode(info, list(table.pods[slot].values())))
        return ctx, refs

    def feasible(self, table: NodeTable) -> BoolArray:
        mask = np.zeros(table.n, np.bool_)
        for name in self.scored:
            slot = table.slots.get(name)
            if slot is not None:
                mask[slot] = True
        return mask


@st.composite
def nodes(draw: st.DrawFn) -> dict[str, Any]:
    name = draw(st.sampled_from(NODE_NAMES))
    node = make_node(name)
    for key in draw(st.lists(st.sampled_from(LABEL_KEYS), unique=True, max_size=3)):
        node.label(key, draw(st.sampled_from(LABEL_VALUES)))
    for key, effect in draw(st.lists(st.tuples(st.sampled_from(TAINT_KEYS),
                                               st.sampled_from(EFFECTS)),
                                     unique=True, max_size=3)):
        node.taint(key, draw(st.sampled_from(TAINT_VALUES)), effect)
    node.capacity(cpu=draw(st.sampled_from(["0", "1", "2", "4"])),
                  memory=draw(st.sampled_from([0, 1000, 2**30, 4 * 2**30])),
                  pods=draw(st.sampled_from([0, 1, 2, 3, 110])))
    if draw(st.booleans()):
        node.capacity({GPU: draw(st.integers(0, 4))})
    if draw(st.booleans()):
        node.capacity(ephemeral_storage=draw(st.sampled_from([0, 500, 10000])))
    node.unschedulable(draw(st.booleans()))
    return node.obj()


def requests(draw: st.DrawFn) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if draw(st.booleans()):
        out["cpu"] = draw(st.sampled_from(CPU))
    if draw(st.booleans()):
        out["memory"] = draw(st.sampled_from(MEMORY))
    if draw(st.integers(0, 3)) == 0:
        out[GPU] = draw(st.integers(0, 3))
    if draw(st.integers(0, 3)) == 0:
        out["ephemeral-storage"] = draw(st.sampled_from([0, 300, 5000]))
    if draw(st.integers(0, 9)) == 0:
        out["example.com/foo"] = 1
    return out


@st.composite
def running_pod(draw: st.DrawFn, name: str) -> dict[str, Any]:
    pod = make_pod(name)
    for _ in range(draw(st.integers(0, 2))):
        pod.container(requests(draw))
    for port, protocol, ip in draw(st.lists(st.sampled_from(PORTS), unique=True, max_size=2)):
        pod.host_port(port, protocol, ip)
    return pod.obj()


@st.composite
def requirement(draw: st.DrawFn) -> dict[str, Any]:
    key = draw(st.sampled_from(LABEL_KEYS))
    op = draw(st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]))
    if op in ("In", "NotIn"):
        values = draw(st.lists(st.sampled_from(LABEL_VALUES), min_size=1, max_size=3))
        return expr(key, op, *values)
    if op in ("Gt", "Lt"):
        return expr(key, op, draw(st.sampled_from(INT_BOUNDS)))
    return expr(key, op)


@st.composite
def term(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    expressions = draw(st.lists(requirement(), max_size=3))
    fields = []
    if draw(st.integers(0, 3)) == 0:
        names = draw(st.lists(st.sampled_from(NODE_NAMES), min_size=1, max_size=2))
        fields.append(field(draw(st.sampled_from(["In", "NotIn"])), *names))
    return expressions, fields


@st.composite
def pending_pod(draw: st.DrawFn) -> dict[str, Any]:
    pod = make_pod("incoming")
    for _ in range(draw(st.integers(0, 2))):
        pod.container(requests(draw))
    if draw(st.integers(0, 3)) == 0:
        pod.init_req(requests(draw))
    for key in draw(st.lists(st.sampled_from(LABEL_KEYS), unique=True, max_size=2)):
        pod.node_selector({key: draw(st.sampled_from(LABEL_VALUES))})
    for expressions, fields in draw(st.lists(term(), max_size=3)):
        pod.required_term(*expressions, fields=fields)
    for expressions, fields in draw(st.lists(term(), max_size=3)):
        pod.preferred_term(draw(st.integers(1, 100)), *expressions, fields=fields)
    for _ in range(draw(st.integers(0, 3))):
        key = draw(st.sampled_from(["", *TAINT_KEYS]))
        value = None if key == "" else draw(st.sampled_from([None, *TAINT_VALUES]))
        pod.toleration(key, value, effect=draw(st.sampled_from(["", *EFFECTS])))
    for port, protocol, ip in draw(st.lists(st.sampled_from(PORTS), unique=True, max_size=2)):
        pod.host_port(port, protocol, ip)
    if draw(st.integers(0, 5)) == 0:
        pod.node_name(draw(st.sampled_from([*NODE_NAMES, "elsewhere"])))
    return pod.obj()


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    node_objs = draw(st.lists(nodes(), min_size=1, max_size=6,
                              unique_by=lambda n: str(n["metadata"]["name"])))
    names = [str(n["metadata"]["name"]) for n in node_objs]
    pods = {name: [draw(running_pod(f"{name}-p{i}")) for i in range(draw(st.integers(0, 3)))]
            for name in names}
    removed = draw(st.lists(st.sampled_from(names), unique=True, max_size=len(names) - 1))
    scored = [name for name in names if draw(st.booleans())]
    return Scenario(node_objs, pods, removed, draw(pending_pod()), scored)


def expected(refs: list[reference.RefNode],
             rule: Any) -> dict[str, list[tuple[str, bool]]]:
    return {ref.name: sorted(rule(ref)) for ref in refs}


def check_filter(s: Scenario, plugin: Any, rule: Any) -> None:
    ctx, refs = s.build()
    got = outcome(plugin.filter(ctx), ctx.table)
    assert {k: sorted(v) for k, v in got.items()} == expected(refs, lambda r: rule(ctx.pod, r))


def scored_refs(s: Scenario, ctx: CycleContext,
                refs: list[reference.RefNode]) -> tuple[BoolArray, list[reference.RefNode]]:
    feasible = s.feasible(ctx.table)
    return feasible, [r for r in refs if feasible[ctx.table.slots[r.name]]]


def check_per_node_score(s: Scenario, plugin: Any, rule: Any) -> None:
    ctx, refs = s.build()
    feasible, chosen = scored_refs(s, ctx, refs)
    got = scores(plugin.score(ctx, feasible), ctx.table, feasible)
    assert got == {r.name: rule(ctx.pod, r) for r in chosen}


def check_normalized_score(s: Scenario, plugin: Any, rule: Any) -> None:
    ctx, refs = s.build()
    feasible, chosen = scored_refs(s, ctx, refs)
    got = scores(plugin.score(ctx, feasible), ctx.table, feasible)
    assert got == dict(zip([r.name for r in chosen], rule(ctx.pod, chosen), strict=True))


@SETTINGS
@given(scenarios())
def test_node_unschedulable(s: Scenario) -> None:
    check_filter(s, NodeUnschedulable(), reference.node_unschedulable)


@SETTINGS
@given(scenarios())
def test_node_name(s: Scenario) -> None:
    check_filter(s, NodeName(), reference.node_name)


@SETTINGS
@given(scenarios())
def test_node_ports(s: Scenario) -> None:
    check_filter(s, NodePorts(), reference.node_ports)


@SETTINGS
@given(scenarios())
def test_node_affinity(s: Scenario) -> None:
    check_filter(s, NodeAffinity(), reference.node_affinity)
    check_normalized_score(s, NodeAffinity(), reference.node_affinity_score)


@SETTINGS
@given(scenarios())
def test_taint_toleration(s: Scenario) -> None:
    ctx, refs = s.build()
    got = outcome(TaintToleration().filter(ctx), ctx.table)
    charged: collections.Counter[str] = collections.Counter()
    for ref in refs:
        untolerated = reference.untolerated_taints(ctx.pod, ref)
        reasons = got[ref.name]
        # Pass/fail exactly as kube; one reason per failing node, naming a taint it has and
        # the pod does not tolerate (kube's first one whenever there is only one).
        assert len(reasons) == min(len(untolerated), 1)
        if reasons:
            assert reasons[0][1] is True
            assert reasons[0][0] in untolerated
            if len(set(untolerated)) == 1:
                assert reasons == reference.taint_toleration(ctx.pod, ref)
            charged[reasons[0][0]] += 1
    assert sum(charged.values()) == sum(1 for r in refs if reference.untolerated_taints(ctx.pod, r))
    check_normalized_score(s, TaintToleration(), reference.taint_toleration_score)


@SETTINGS
@given(scenarios(), st.sampled_from([[], [GPU]]), st.sampled_from([[], ["nvidia.com"]]))
def test_node_resources_fit_filter(s: Scenario, ignored: list[str],
                                   groups: list[str]) -> None:
    plugin = NodeResourcesFit(ignored_resources=ignored, ignored_resource_groups=groups)
    check_filter(s, plugin,
                 lambda pod, node: reference.node_resources_fit(pod, node, ignored, groups))


RESOURCE_SETS = [
    [("cpu", 1), ("memory", 1)],
    [("cpu", 3), ("memory", 1), (GPU, 2)],
    [("memory", 5), ("ephemeral-storage", 1), ("example.com/foo", 1), ("pods", 1)],
]


@SETTINGS
@given(scenarios(), st.sampled_from(RESOURCE_SETS))
def test_node_resources_fit_score(s: Scenario, resources: list[tuple[str, int]]) -> None:
    least = NodeResourcesFit(strategy="LeastAllocated", resources=resources)
    check_per_node_score(s, least, lambda p, n: reference.least_allocated(p, n, resources))
    most = NodeResourcesFit(strategy="MostAllocated", resources=resources)
    check_per_node_score(s, most, lambda p, n: reference.most_allocated(p, n, resources))
    check_normalized_score(s, NodeResourcesFit(strategy="MostFreeMemory"),
                           reference.most_free_memory)


@SETTINGS
@given(scenarios(), st.sampled_from([("cpu", "memory"), ("cpu", "memory", GPU),
                                     ("memory", "ephemeral-storage", "cpu", "example.com/foo")]))
def test_balanced_allocation(s: Scenario, resources: tuple[str, ...]) -> None:
    check_per_node_score(s, BalancedAllocation(resources=resources),
                         lambda p, n: reference.balanced_allocation(p, n, resources))

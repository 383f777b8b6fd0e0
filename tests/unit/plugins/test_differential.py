"""Differential tests: every vectorized plugin agrees with the plain per-node reference.

Hypothesis builds small random clusters (labels from small alphabets, taints, capacities, pods
already running with requests and host ports, some nodes removed again to leave holes) and random
pods (requests, node selectors, required and preferred affinity with every operator, tolerations,
host ports, a node name). For each plugin, the pass mask and the reasons of every node, and the
scores of a random set of scored nodes, must equal :mod:`tests.unit.plugins.reference`.

ImageLocality's scenarios are sequences of node events (added, updated with other images,
removed) against kube's cache bookkeeping written out (:class:`reference.RefImageStates`), since
its index is maintained incrementally and its spread depends on every node.
"""

from __future__ import annotations

import collections
import itertools
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyscheduler.framework.interface import CycleContext, FilterPlugin, ScorePlugin
from pyscheduler.framework.nodetable import BoolArray, NodeTable, RowView, node_info
from pyscheduler.framework.pod import pod_info
from pyscheduler.plugins.balanced_allocation import BalancedAllocation
from pyscheduler.plugins.image_locality import ImageLocality
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


# Whole capacities, label sets and request lists are sampled as one choice each: hypothesis
# spends its time per choice, and these products cover the interesting combinations.
CAPACITIES = [
    {"cpu": cpu, "memory": memory, "pods": pods, "ephemeral-storage": storage, GPU: gpus}
    for cpu, memory, pods, storage, gpus in itertools.product(
        ["0", "1", "2", "4"], [0, 1000, 2**30, 4 * 2**30], [0, 1, 2, 3, 110],
        [None, 0, 500, 10000], [None, 0, 1, 2, 4])
]
LABEL_SETS = [
    {k: v for k, v in zip(LABEL_KEYS, values, strict=True) if v is not None}
    for values in itertools.product([None, *LABEL_VALUES], repeat=len(LABEL_KEYS))
]
REQUEST_SETS = [
    {k: v for k, v in (("cpu", cpu), ("memory", memory), *extra) if v is not None}
    for cpu, memory, extra in itertools.product(
        [None, *CPU], [None, *MEMORY],
        [(), ((GPU, 0),), ((GPU, 1),), ((GPU, 3),), (("ephemeral-storage", 300),),
         (("ephemeral-storage", 0),), (("example.com/foo", 1),)])
]
CAPACITY = st.sampled_from(CAPACITIES)
LABELS = st.sampled_from(LABEL_SETS)
REQUESTS = st.sampled_from(REQUEST_SETS)
TAINTS = st.lists(st.tuples(st.sampled_from(TAINT_KEYS), st.sampled_from(TAINT_VALUES),
                            st.sampled_from(EFFECTS)),
                  unique_by=lambda t: (t[0], t[2]), max_size=3)
HOST_PORTS = st.lists(st.sampled_from(PORTS), unique=True, max_size=2)
OPERATORS = st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"])
VALUE_LISTS = st.lists(st.sampled_from(LABEL_VALUES), min_size=1, max_size=3)
NAME_LISTS = st.lists(st.sampled_from(NODE_NAMES), min_size=1, max_size=2)
TOLERATIONS = st.lists(st.tuples(st.sampled_from(["", *TAINT_KEYS]),
                                 st.sampled_from([None, *TAINT_VALUES]),
                                 st.sampled_from(["", *EFFECTS])), max_size=3)


@dataclass(frozen=True)
class Features:
    """Which parts of the cluster and the pod a test varies; the rest stays plain."""

    labels: bool = False
    taints: bool = False
    unschedulable: bool = False
    resources: bool = False
    ports: bool = False
    affinity: bool = False
    tolerations: bool = False
    node_name: bool = False

    @property
    def running_pods(self) -> bool:
        return self.resources or self.ports


@st.composite
def nodes(draw: st.DrawFn, name: str, f: Features) -> dict[str, Any]:
    node = make_node(name)
    if f.labels:
        node.labels(draw(LABELS))
    if f.taints:
        for key, value, effect in draw(TAINTS):
            node.taint(key, value, effect)
    if f.unschedulable:
        node.unschedulable(draw(st.booleans()))
    if f.resources:
        node.capacity(draw(CAPACITY))
    return node.obj()


@st.composite
def running_pod(draw: st.DrawFn, name: str, f: Features) -> dict[str, Any]:
    pod = make_pod(name)
    if f.resources:
        for requests in draw(st.lists(REQUESTS, max_size=2)):
            pod.container(requests)
    if f.ports:
        for port, protocol, ip in draw(HOST_PORTS):
            pod.host_port(port, protocol, ip)
    return pod.obj()


@st.composite
def requirement(draw: st.DrawFn) -> dict[str, Any]:
    key = draw(st.sampled_from(LABEL_KEYS))
    op = draw(OPERATORS)
    if op in ("In", "NotIn"):
        return expr(key, op, *draw(VALUE_LISTS))
    if op in ("Gt", "Lt"):
        return expr(key, op, draw(st.sampled_from(INT_BOUNDS)))
    return expr(key, op)


@st.composite
def term(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    expressions = draw(st.lists(requirement(), max_size=3))
    fields = []
    if draw(st.integers(0, 3)) == 0:
        fields.append(field(draw(st.sampled_from(["In", "NotIn"])), draw(st.sampled_from(NODE_NAMES))))  # the API server allows one value
    return expressions, fields


TERMS = st.lists(term(), max_size=3)
WEIGHTED_TERMS = st.lists(st.tuples(st.integers(1, 100), term()), max_size=3)
SELECTORS = st.dictionaries(st.sampled_from(LABEL_KEYS), st.sampled_from(LABEL_VALUES),
                            max_size=2)


@st.composite
def pending_pod(draw: st.DrawFn, f: Features) -> dict[str, Any]:
    pod = make_pod("incoming")
    if f.resources:
        for requests in draw(st.lists(REQUESTS, max_size=2)):
            pod.container(requests)
        if draw(st.integers(0, 3)) == 0:
            pod.init_req(draw(REQUESTS))
    if f.affinity:
        pod.node_selector(draw(SELECTORS))
        for expressions, fields in draw(TERMS):
            pod.required_term(*expressions, fields=fields)
        for weight, (expressions, fields) in draw(WEIGHTED_TERMS):
            pod.preferred_term(weight, *expressions, fields=fields)
    if f.tolerations:
        for key, value, effect in draw(TOLERATIONS):
            pod.toleration(key, None if key == "" else value, effect=effect)
    if f.ports:
        for port, protocol, ip in draw(HOST_PORTS):
            pod.host_port(port, protocol, ip)
    if f.node_name and draw(st.integers(0, 3)) > 0:
        pod.node_name(draw(st.sampled_from([*NODE_NAMES, "elsewhere"])))
    return pod.obj()


@st.composite
def scenarios(draw: st.DrawFn, f: Features) -> Scenario:
    names = NODE_NAMES[: draw(st.integers(1, 5))]
    node_objs = [draw(nodes(name, f)) for name in names]
    pods: dict[str, list[dict[str, Any]]] = {}
    if f.running_pods:
        pods = {name: [draw(running_pod(f"{name}-p{i}", f))
                       for i in range(draw(st.integers(0, 2)))] for name in names}
    removed = draw(st.lists(st.sampled_from(names), unique=True, max_size=len(names) - 1))
    scored = [name for name in names if draw(st.booleans())]
    return Scenario(node_objs, pods, removed, draw(pending_pod(f)), scored)


RESOURCES = Features(resources=True)


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
@given(scenarios(Features(unschedulable=True, tolerations=True, taints=True)))
def test_node_unschedulable(s: Scenario) -> None:
    check_filter(s, NodeUnschedulable(), reference.node_unschedulable)


@SETTINGS
@given(scenarios(Features(node_name=True)))
def test_node_name(s: Scenario) -> None:
    check_filter(s, NodeName(), reference.node_name)


@SETTINGS
@given(scenarios(Features(ports=True)))
def test_node_ports(s: Scenario) -> None:
    check_filter(s, NodePorts(), reference.node_ports)


@SETTINGS
@given(scenarios(Features(labels=True, affinity=True)))
def test_node_affinity(s: Scenario) -> None:
    check_filter(s, NodeAffinity(), reference.node_affinity)
    check_normalized_score(s, NodeAffinity(), reference.node_affinity_score)


@SETTINGS
@given(scenarios(Features(taints=True, tolerations=True)))
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
@given(scenarios(RESOURCES), st.sampled_from([[], [GPU]]),
       st.sampled_from([[], ["nvidia.com"]]))
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
@given(scenarios(RESOURCES), st.sampled_from(RESOURCE_SETS))
def test_node_resources_fit_score(s: Scenario, resources: list[tuple[str, int]]) -> None:
    least = NodeResourcesFit(strategy="LeastAllocated", resources=resources)
    check_per_node_score(s, least, lambda p, n: reference.least_allocated(p, n, resources))
    most = NodeResourcesFit(strategy="MostAllocated", resources=resources)
    check_per_node_score(s, most, lambda p, n: reference.most_allocated(p, n, resources))
    check_normalized_score(s, NodeResourcesFit(strategy="MostFreeMemory"),
                           reference.most_free_memory)


SHAPES = [
    [(0, 0), (100, 10)],
    [(0, 10), (100, 0)],
    [(0, 2), (40, 10), (100, 0)],
    [(10, 1), (33, 7), (90, 9)],
    [(50, 5)],
    [(0, 0), (60, 10), (61, 3), (100, 4)],
]


@SETTINGS
@given(scenarios(RESOURCES), st.sampled_from(RESOURCE_SETS), st.sampled_from(SHAPES))
def test_requested_to_capacity_ratio(s: Scenario, resources: list[tuple[str, int]],
                                     shape: list[tuple[int, int]]) -> None:
    plugin = NodeResourcesFit(strategy="RequestedToCapacityRatio", resources=resources,
                              shape=shape)
    check_per_node_score(s, plugin, lambda p, n: reference.requested_to_capacity_ratio(
        p, n, resources, shape))
    ctx, _ = s.build()
    assert [plugin.score_row(ctx, slot) for slot in range(ctx.n)] == \
        plugin.score(ctx, np.ones(ctx.n, np.bool_)).tolist()


@SETTINGS
@given(scenarios(RESOURCES), st.sampled_from([("cpu", "memory"), ("cpu", "memory", GPU),
                                     ("memory", "ephemeral-storage", "cpu", "example.com/foo")]))
def test_balanced_allocation(s: Scenario, resources: tuple[str, ...]) -> None:
    check_per_node_score(s, BalancedAllocation(resources=resources),
                         lambda p, n: reference.balanced_allocation(p, n, resources))


EVERYTHING = Features(labels=True, taints=True, unschedulable=True, resources=True, ports=True,
                      affinity=True, tolerations=True, node_name=True)
ROW_LOCAL_FILTERS: list[FilterPlugin] = [NodeUnschedulable(), NodeName(), NodePorts(),
                                         NodeAffinity(), TaintToleration(), NodeResourcesFit()]
ROW_LOCAL_SCORES: list[ScorePlugin] = [NodeResourcesFit(),
                                       NodeResourcesFit(strategy="MostAllocated"),
                                       NodeResourcesFit(strategy="RequestedToCapacityRatio",
                                                        shape=[(0, 2), (40, 10), (100, 0)]),
                                       BalancedAllocation()]


@settings(SETTINGS, max_examples=100)
@given(scenarios(EVERYTHING), st.lists(st.booleans(), min_size=6, max_size=6))
def test_row_local_plugins_answer_the_same_on_a_row_view(s: Scenario, pick: list[bool]) -> None:
    """The pipeline re-runs row-local plugins on just the rows that changed (a RowView): each
    row's verdict, reasons and score must not depend on which other rows are present."""
    ctx, _ = s.build()
    rows = np.flatnonzero(np.array(pick[: ctx.n], np.bool_))
    view = RowView(ctx.table, rows)
    sub = CycleContext(ctx.pod, cast(NodeTable, view), ctx.request)
    valid = ctx.nodes()[rows]
    for plugin in ROW_LOCAL_FILTERS:
        full, part = plugin.filter(ctx), plugin.filter(sub)
        for i, row in enumerate(rows.tolist()):
            if valid[i]:
                assert [(r.message, r.unresolvable) for r in full.reasons if r.failed[row]] == \
                    [(r.message, r.unresolvable) for r in part.reasons if r.failed[i]], plugin.name
    for scorer in ROW_LOCAL_SCORES:
        everywhere = scorer.score(ctx, ctx.nodes().copy())[rows]
        here = scorer.score(sub, view.valid.copy())
        assert np.array_equal(everywhere[valid], here[valid]), scorer.name


# -- ImageLocality ------------------------------------------------------------------------------

MiB = 2**20
# Names of a few images in the forms nodes report and pods write: tagless, tagged, with a
# registry port, by digest, and one name two nodes may report with different sizes.
IMAGE_NAMES = ["app:latest", "app:v1", "reg.io:5000/app:latest", "reg.io:5000/app:v2",
               "app@sha256:0a1b", "side:latest", "docker.io/library/side:latest", "big:latest"]
POD_IMAGES = ["app", "app:v1", "reg.io:5000/app", "reg.io:5000/app:v2", "app@sha256:0a1b", "side",
              "docker.io/library/side", "big", "big:latest", "missing", ""]
IMAGE_SIZES = [0, 5 * MiB, 23 * MiB, 40 * MiB, 300 * MiB, 999 * MiB, 1500 * MiB, 4000 * MiB]
IMAGE_LISTS = st.lists(st.fixed_dictionaries({
    "names": st.lists(st.sampled_from(IMAGE_NAMES), min_size=1, max_size=3),
    "sizeBytes": st.sampled_from(IMAGE_SIZES)}), max_size=4)
NODE_EVENTS = st.lists(st.tuples(st.sampled_from(NODE_NAMES), st.one_of(st.none(), IMAGE_LISTS)),
                       min_size=1, max_size=14)


@SETTINGS
@given(NODE_EVENTS, st.lists(st.sampled_from(POD_IMAGES), max_size=3),
       st.lists(st.sampled_from(POD_IMAGES), max_size=2))
def test_image_locality(events: list[tuple[str, list[dict[str, Any]] | None]],
                        images: list[str], init: list[str]) -> None:
    """Nodes are added, updated (other images, other sizes) and removed (None); the table's
    index and the vectorized score must match kube's cache bookkeeping and per-node score."""
    table = NodeTable(capacity=2)
    states = reference.RefImageStates()
    for name, listed in events:
        if listed is None:
            table.remove_node(name)
            states.remove_node(name)
        else:
            table.set_node(node_info(make_node(name).obj() | {"status": {"images": listed}}))
            states.set_node(name, listed)
    pod = make_pod("incoming").bare()
    for image in init:
        pod.image(image, init=True)
    for image in images:
        pod.image(image)
    ctx = CycleContext.for_pod(pod_info(pod.obj()), table)
    got = scores(ImageLocality().score(ctx, ctx.nodes().copy()), table)
    total = len(states.images)
    assert got == {name: reference.image_locality(ctx.pod, states.node_states(name), total)
                   for name in states.images}
    # The index itself: every name some node lists, with kube's size and holders.
    for image_name, (size, holders) in states.states.items():
        found = table.image_nodes(image_name)
        assert found is not None
        assert found[0] == size
        assert sorted(table.names[r] for r in found[1].tolist()) == sorted(holders)
    for image_name in IMAGE_NAMES:
        if image_name not in states.states:
            assert table.image_nodes(image_name) is None

"""Differential tests: the vectorized plugins agree with the node-by-node reference.

Random clusters (nodes over 2-4 zones, some without a zone, hostname or rack label, some
tainted; existing pods in several namespaces, some terminating, some with their own
(anti-)affinity terms) and a random incoming pod with spread constraints, node affinity,
tolerations and (anti-)affinity terms; a second property uses wider clusters (up to 30
nodes, 12 racks) so that many domains are hit at once. For every node the filter verdict
(message and unresolvable flag) and the score must equal those of
:mod:`tests.unit.plugins.reference_spread_affinity`. Each example is then mutated (a pod added,
removed or turning terminating, a node removed) up to three times and compared again with
the same plugin objects, which exercises the incremental counters and indexes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyscheduler.api.labels import LabelSelector, label_selector_from_dict
from pyscheduler.framework.interface import CycleContext, FilterResult
from pyscheduler.framework.nodetable import NodeTable
from pyscheduler.framework.pod import PodInfo, SpreadConstraint, pod_info
from pyscheduler.plugins.inter_pod_affinity import InterPodAffinity
from pyscheduler.plugins import pod_topology_spread
from pyscheduler.plugins.pod_topology_spread import PodTopologySpread

from . import reference_spread_affinity as ref
from .builders import build_table, make_node

Obj = dict[str, Any]
HOST = "kubernetes.io/hostname"
NAMESPACE_LABELS = {"default": {"team": "x"}, "other": {"team": "y"}, "third": {"team": "x"}}
NAMESPACES = sorted(NAMESPACE_LABELS)
# Mostly one namespace, so that selectors meet the pods they select.
LIKELY_NAMESPACES = ["default", "default", "default", "other", "third"]
APPS = ["web", "db", "cache"]
LIKELY_APPS = ["web", "web", "web", "db", "cache", None]  # one big workload, a few others
LIKELY_KEYS = ["zone", "zone", HOST, "rack"]
TAINTS = [("dedicated", "gpu", "NoSchedule"), ("maint", "", "NoExecute"),
          ("maint", "", "NoExecute"), ("soft", "", "PreferNoSchedule")]

SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def resolve(selector: LabelSelector) -> frozenset[str]:
    return frozenset(ns for ns, labels in NAMESPACE_LABELS.items() if selector.matches(labels))


# -- strategies ---------------------------------------------------------------------------------

def selectors() -> st.SearchStrategy[Obj | None]:
    return st.one_of(
        st.just({"matchLabels": {"app": "web"}}),
        st.sampled_from(APPS).map(lambda a: {"matchLabels": {"app": a}}),
        st.lists(st.sampled_from(APPS), min_size=1, max_size=2, unique=True).map(
            lambda apps: {"matchExpressions": [{"key": "app", "operator": "In",
                                                "values": apps}]}),
        st.sampled_from(["x", "y"]).map(lambda t: {"matchLabels": {"tier": t}}),
        st.just({"matchExpressions": [{"key": "app", "operator": "Exists"}]}),
        st.just({}),
        st.just(None),
    )


@st.composite
def affinity_terms(draw: st.DrawFn, weighted: bool) -> Obj:
    term: Obj = {"topologyKey": draw(st.sampled_from(LIKELY_KEYS))}
    sel = draw(selectors())
    if sel is not None:
        term["labelSelector"] = sel
    if draw(st.integers(0, 4)) == 0:
        term["namespaces"] = draw(st.lists(st.sampled_from(NAMESPACES), min_size=1,
                                           max_size=2, unique=True))
    ns_sel = draw(st.sampled_from([None, None, None, {}, {"matchLabels": {"team": "x"}},
                                   {"matchLabels": {"team": "y"}}]))
    if ns_sel is not None:
        term["namespaceSelector"] = ns_sel
    if weighted:
        return {"weight": draw(st.integers(1, 100)), "podAffinityTerm": term}
    return term


@st.composite
def pod_affinity(draw: st.DrawFn, rich: bool) -> Obj:
    most = 2 if rich else 1
    out: Obj = {}
    for field, required, preferred in (("podAffinity", "affinity", "preferred"),
                                       ("podAntiAffinity", "anti", "preferred-anti")):
        group: Obj = {}
        req = draw(st.lists(affinity_terms(False), max_size=most))
        pref = draw(st.lists(affinity_terms(True), max_size=most))
        if req:
            group["requiredDuringSchedulingIgnoredDuringExecution"] = req
        if pref:
            group["preferredDuringSchedulingIgnoredDuringExecution"] = pref
        if group:
            out[field] = group
    return out


@st.composite
def labels(draw: st.DrawFn) -> dict[str, str]:
    out: dict[str, str] = {}
    app = draw(st.sampled_from(LIKELY_APPS))
    if app is not None:
        out["app"] = app
    tier = draw(st.sampled_from(["x", "y", None]))
    if tier is not None:
        out["tier"] = tier
    return out


@st.composite
def existing_pods(draw: st.DrawFn, index: int, nodes: int) -> tuple[str, Obj]:
    ns = draw(st.sampled_from(LIKELY_NAMESPACES))
    name = f"e{index}"
    obj: Obj = {"metadata": {"name": name, "namespace": ns, "uid": f"uid-{name}",
                             "labels": draw(labels())},
                "spec": {"containers": [{"name": "c", "image": "pause"}]}}
    if draw(st.integers(0, 6)) == 0:
        obj["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    if draw(st.booleans()):
        affinity = draw(pod_affinity(False))
        if affinity:
            obj["spec"]["affinity"] = affinity
    # Node 0 is a hot spot, so that some domains hold many pods.
    return f"n{draw(st.one_of(st.just(0), st.integers(0, nodes - 1)))}", obj


@st.composite
def spread_constraints(draw: st.DrawFn) -> Obj:
    c: Obj = {"maxSkew": draw(st.sampled_from([1, 1, 1, 2, 3])),
              "topologyKey": draw(st.sampled_from(LIKELY_KEYS)),
              "whenUnsatisfiable": draw(st.sampled_from(["DoNotSchedule", "ScheduleAnyway"]))}
    sel = draw(selectors())
    if sel is not None:
        c["labelSelector"] = sel
    min_domains = draw(st.sampled_from([None, None, 1, 2, 3, 5]))
    if min_domains is not None:
        c["minDomains"] = min_domains
    for policy in ("nodeAffinityPolicy", "nodeTaintsPolicy"):
        value = draw(st.sampled_from([None, "Honor", "Ignore"]))
        if value is not None:
            c[policy] = value
    if draw(st.integers(0, 5)) == 0:
        c["matchLabelKeys"] = ["tier"]
    return c


@st.composite
def incoming_pods(draw: st.DrawFn, zones: list[str]) -> Obj:
    spec: Obj = {"containers": [{"name": "c", "image": "pause"}]}
    spread = draw(st.lists(spread_constraints(), min_size=1, max_size=2)) \
        if draw(st.integers(0, 4)) else []
    if spread:
        spec["topologySpreadConstraints"] = spread
    affinity = draw(pod_affinity(True))
    choice = draw(st.integers(0, 4))
    if choice == 1:
        spec["nodeSelector"] = {"disk": "ssd"}
    elif choice == 2:
        values = draw(st.lists(st.sampled_from(zones), min_size=1, max_size=2, unique=True))
        affinity["nodeAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": "zone", "operator": "In", "values": values}]}]}}
    elif choice == 3:
        affinity["nodeAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "rack", "operator": "DoesNotExist"}]},
                {"matchExpressions": [{"key": "cpus", "operator": "Gt", "values": ["8"]}]}]}}
    if affinity:
        spec["affinity"] = affinity
    if draw(st.booleans()):
        spec["tolerations"] = [{"key": "dedicated", "operator": "Equal", "value": "gpu",
                                "effect": "NoSchedule"}]
    return {"metadata": {"name": "incoming", "uid": "uid-incoming",
                         "namespace": draw(st.sampled_from(LIKELY_NAMESPACES)),
                         "labels": draw(labels())},
            "spec": spec}


@st.composite
def nodes_of(draw: st.DrawFn, wide: bool, blank_zone: bool = False
             ) -> tuple[list[Obj], list[str]]:
    zones = [f"z{i}" for i in range(draw(st.integers(2, 4)))]
    if blank_zone:  # a zone label with the empty value: the domain kube files unlabelled nodes
        zones.append("")  # in (and, in that case, a third of the nodes without a zone)
    racks = [None, *(f"r{i}" for i in range(12 if wide else 2))]
    out = []
    for i in range(draw(st.integers(12, 30) if wide else st.integers(1, 10))):
        b = make_node(f"n{i}").capacity(cpu="4", memory="32Gi", pods=110)
        if draw(st.integers(0, 2 if blank_zone else 9)):
            b.label("zone", draw(st.sampled_from(zones)))
        if draw(st.integers(0, 9)):
            b.label(HOST, f"n{i}")
        rack = draw(st.sampled_from(racks))
        if rack is not None:
            b.label("rack", rack)
        if draw(st.booleans()):
            b.label("disk", draw(st.sampled_from(["ssd", "hdd"])))
        if draw(st.integers(0, 2)) == 0:
            b.label("cpus", draw(st.sampled_from(["4", "16", "x"])))
        if draw(st.integers(0, 3)) == 0:
            key, value, effect = draw(st.sampled_from(TAINTS))
            b.taint(key, value, effect)
        out.append(b.obj())
    return out, zones


@st.composite
def scenarios(draw: st.DrawFn, wide: bool = False, blank_zone: bool = False
              ) -> tuple[NodeTable, Obj, list[bool], Any]:
    nodes, zones = draw(nodes_of(wide, blank_zone))
    placed: dict[str, list[Obj]] = {}
    for i in range(draw(st.integers(0, 60 if wide else 30))):
        node_name, obj = draw(existing_pods(i, len(nodes)))
        placed.setdefault(node_name, []).append(obj)
    removed = [f"n{draw(st.integers(0, len(nodes) - 1))}"] \
        if len(nodes) > 1 and draw(st.integers(0, 4)) == 0 else []
    table = build_table(nodes, placed, removed)
    incoming = draw(incoming_pods(zones))
    feasible = draw(st.lists(st.booleans(), min_size=table.n, max_size=table.n))
    mutations = draw(st.lists(st.tuples(st.sampled_from([0, 0, 1, 2, 3]),
                                        st.integers(0, 10**6),
                                        existing_pods(99, len(nodes))),
                              min_size=1, max_size=3))
    return table, incoming, feasible, mutations


# -- comparison ---------------------------------------------------------------------------------

def verdicts(result: FilterResult, table: NodeTable) -> list[ref.Verdict]:
    out: list[ref.Verdict] = []
    for slot in range(table.n):
        if result.passed is None or not table.valid[slot]:
            out.append(None)
            continue
        hits = [(r.message, r.unresolvable) for r in result.reasons if r.failed[slot]]
        if result.passed[slot]:
            assert not hits
            out.append(None)
        else:
            assert len(hits) == 1, hits
            out.append(hits[0])
    return out


def compare(table: NodeTable, incoming: Obj, feasible: list[bool],
            spread: PodTopologySpread, affinities: list[tuple[InterPodAffinity, dict[str, Any]]],
            view: Callable[[PodInfo], PodInfo] = lambda pod: pod) -> None:
    pod = view(pod_info(incoming))
    rows = ref.rows_of(table)
    mask = np.array(feasible[: table.n] + [False] * (table.n - len(feasible)), np.bool_)
    mask &= table.valid[: table.n]
    scored = [bool(x) for x in mask]

    def fresh() -> CycleContext:
        return CycleContext.for_pod(pod, table, resolve)

    assert verdicts(spread.filter(fresh()), table) == ref.spread_filter(rows, pod)
    got = spread.score(fresh(), mask)
    want = ref.spread_score(rows, pod, scored)
    assert [int(got[s]) if scored[s] else 0 for s in range(table.n)] == want
    for plugin, options in affinities:
        assert verdicts(plugin.filter(fresh()), table) == \
            ref.affinity_filter(rows, pod, NAMESPACE_LABELS)
        got = plugin.score(fresh(), mask)
        want = ref.affinity_score(rows, pod, scored, NAMESPACE_LABELS, **options)
        assert [int(got[s]) if scored[s] else 0 for s in range(table.n)] == want


def mutate(table: NodeTable, mutation: Any, step: int) -> None:
    kind, pick, (node_name, obj) = mutation
    obj = dict(obj, metadata=dict(obj["metadata"], name=f"m{step}", uid=f"uid-m{step}"))
    everyone = [(slot, p) for slot, p in table.all_pods()]
    if kind == 0 and node_name in table.slots:
        table.add_pod(table.slots[node_name], pod_info(obj))
    elif kind == 1 and everyone:
        slot, p = everyone[pick % len(everyone)]
        table.remove_pod(slot, p.uid)
    elif kind == 2 and everyone:
        slot, p = everyone[pick % len(everyone)]
        raw = dict(p.raw)
        raw["metadata"] = dict(raw["metadata"], deletionTimestamp="2024-01-01T00:00:00Z")
        table.remove_pod(slot, p.uid)
        table.add_pod(slot, pod_info(raw))
    elif kind == 3 and len(table.slots) > 1:
        names = sorted(table.slots)
        table.remove_node(names[pick % len(names)])


def check(scenario: tuple[NodeTable, Obj, list[bool], Any],
          view: Callable[[PodInfo], PodInfo] = lambda pod: pod) -> None:
    table, incoming, feasible, mutations = scenario
    spread = PodTopologySpread()
    affinities = [
        (InterPodAffinity(), {}),
        (InterPodAffinity(hard_pod_affinity_weight=7,
                          ignore_preferred_terms_of_existing_pods=True),
         {"hard_pod_affinity_weight": 7, "ignore_preferred_terms_of_existing_pods": True}),
    ]
    compare(table, incoming, feasible, spread, affinities, view)
    for step, mutation in enumerate(mutations):
        mutate(table, mutation, step)
        compare(table, incoming, feasible, spread, affinities, view)


@SETTINGS
@given(scenarios())
def test_plugins_agree_with_reference(scenario: tuple[NodeTable, Obj, list[bool], Any]) -> None:
    check(scenario)


@settings(SETTINGS, max_examples=40)
@given(scenarios(wide=True))
def test_many_domains_agree_with_reference(scenario: tuple[NodeTable, Obj, list[bool], Any]
                                           ) -> None:
    """12-30 nodes over up to 12 racks, and rows of hit domains found by per-row lookup
    rather than by OR-ing the domains' label masks (forced for every hit count)."""
    saved = pod_topology_spread._FEW_DOMAINS
    pod_topology_spread._FEW_DOMAINS = 0
    try:
        check(scenario)
    finally:
        pod_topology_spread._FEW_DOMAINS = saved


@st.composite
def system_defaults(draw: st.DrawFn) -> Callable[[PodInfo], PodInfo]:
    """Gives a pod kube's system default constraints (hostname maxSkew 3, zone maxSkew 5,
    ScheduleAnyway) with a drawn non-empty selector, as the scheduler's defaulting does for a
    pod without constraints of its own; sometimes in the other order, or only one of them."""
    # Mostly the big workload's selector, so that domains hold different counts.
    sel = label_selector_from_dict(draw(st.one_of(
        st.just({"matchLabels": {"app": "web"}}),
        st.just({"matchExpressions": [{"key": "app", "operator": "Exists"}]}),
        selectors().filter(lambda s: bool(s)))))
    keys = draw(st.sampled_from([(HOST, "zone"), ("zone", HOST), (HOST,), ("zone",)]))
    constraints = tuple(SpreadConstraint(
        max_skew=3 if key == HOST else 5, topology_key=key, when_unsatisfiable="ScheduleAnyway",
        selector=sel, selector_key=str(sel), min_domains=None, node_affinity_policy="Honor",
        node_taints_policy="Ignore", match_label_keys=(), system_default=True)
        for key in keys)
    return lambda pod: dataclasses.replace(pod, spread=constraints)


@settings(SETTINGS, max_examples=300)
@given(scenarios(blank_zone=True), system_defaults())
def test_system_defaults_agree_with_reference(scenario: tuple[NodeTable, Obj, list[bool], Any],
                                              view: Callable[[PodInfo], PodInfo]) -> None:
    """Constraints from the system defaults: nodes lacking a key are scored, and counted in the
    domain "" (where nodes labelled with the empty zone are too)."""
    check(scenario, view)

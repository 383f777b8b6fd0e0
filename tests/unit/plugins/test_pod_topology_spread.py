"""PodTopologySpread: kube's filter verdicts and messages, its scoring arithmetic, and both with
the default constraints a pod without its own gets."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest

from pyscheduler.framework.interface import CycleContext
from pyscheduler.framework.pod import PodInfo, pod_info
from pyscheduler.plugins.pod_topology_spread import (
    ERR_REASON_CONSTRAINTS_NOT_MATCH as SKEW,
)
from pyscheduler.plugins.pod_topology_spread import (
    ERR_REASON_NODE_LABEL_NOT_MATCH as MISSING,
)
from pyscheduler.plugins.pod_topology_spread import (
    NAME,
    PodTopologySpread,
)

from pyscheduler.settings import DefaultSpreadConstraint, PodTopologySpreadConfig
from pyscheduler.spread_defaults import SpreadDefaults, WorkloadSelectors

from .builders import build_table, make_node, make_pod, verdicts
from .workloads import feed_workload, replica_set, service

Obj = dict[str, Any]
HOST = "kubernetes.io/hostname"
WEB = {"matchLabels": {"app": "web"}}


def node(name: str, zone: str | None = None, **labels: str) -> Obj:
    b = make_node(name).capacity(cpu="4", memory="32Gi", pods=110).label(HOST, name)
    if zone is not None:
        b.label("zone", zone)
    for k, v in labels.items():
        b.label(k, v)
    return b.obj()


def pod(name: str, app: str | None = "web", namespace: str = "default",
        deleting: bool = False) -> Obj:
    b = make_pod(name, namespace)
    if app is not None:
        b.label("app", app)
    obj = b.obj()
    if deleting:
        obj["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    return obj


def spread(obj: Obj, max_skew: int, key: str, when: str = "DoNotSchedule",
           selector: Mapping[str, Any] | None = WEB, **extra: Any) -> Obj:
    c: Obj = {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": when, **extra}
    if selector is not None:
        c["labelSelector"] = dict(selector)
    obj["spec"].setdefault("topologySpreadConstraints", []).append(c)
    return obj


def pods_on(**counts: int) -> dict[str, list[Obj]]:
    """``pods_on(n1=2, n3=1)``: that many app=web pods on each node."""
    return {n: [pod(f"{n}-p{i}") for i in range(k)] for n, k in counts.items()}


ZONES_ABC = [node("n1", "a"), node("n2", "a"), node("n3", "b"), node("n4", "c")]
ZONES_AB = [node("n1", "a"), node("n2", "a"), node("n3", "b")]


@pytest.mark.parametrize(("incoming", "nodes", "pods", "expected"), [
    pytest.param(spread(pod("p"), 1, "zone"), ZONES_ABC, pods_on(n1=2, n3=1),
                 {"n1": (SKEW, False), "n2": (SKEW, False), "n3": (SKEW, False)},
                 id="zone skew 1: only the empty zone fits"),
    pytest.param(spread(pod("p"), 2, "zone"), ZONES_ABC, pods_on(n1=2, n3=1),
                 {"n1": (SKEW, False), "n2": (SKEW, False)},
                 id="zone skew 2"),
    pytest.param(spread(pod("p"), 1, "zone"), ZONES_AB, pods_on(n1=1, n3=1),
                 {}, id="balanced zones all fit"),
    pytest.param(spread(pod("p"), 1, "zone"), ZONES_AB, pods_on(n1=2, n3=1),
                 {"n1": (SKEW, False), "n2": (SKEW, False)},
                 id="self match adds one"),
    pytest.param(spread(pod("p", app="other"), 1, "zone"), ZONES_AB, pods_on(n1=2, n3=1),
                 {}, id="incoming pod not matching its own selector"),
    pytest.param(spread(pod("p"), 1, HOST), ZONES_AB, pods_on(n1=1),
                 {"n1": (SKEW, False)}, id="hostname spread"),
    pytest.param(spread(pod("p"), 1, HOST), ZONES_AB, pods_on(n1=1, n2=1, n3=1),
                 {}, id="hostname spread, evenly filled"),
    pytest.param(spread(pod("p"), 1, "zone", minDomains=3), ZONES_AB, pods_on(n1=1, n3=1),
                 {"n1": (SKEW, False), "n2": (SKEW, False), "n3": (SKEW, False)},
                 id="minDomains above the domain count makes the global minimum 0"),
    pytest.param(spread(pod("p"), 1, "zone", minDomains=2), ZONES_AB, pods_on(n1=1, n3=1),
                 {}, id="minDomains met"),
    pytest.param(spread(pod("p"), 1, "zone"), [node("n1", "a"), node("n2", "a")],
                 pods_on(n1=2), {}, id="a single domain is its own minimum"),
    pytest.param(spread(pod("p"), 1, "zone", minDomains=2), [node("n1", "a"), node("n2", "a")],
                 pods_on(n1=2), {"n1": (SKEW, False), "n2": (SKEW, False)},
                 id="a single domain below minDomains"),
    pytest.param(spread(pod("p"), 1, "zone"), [*ZONES_AB, node("n5")], pods_on(n1=1),
                 {"n1": (SKEW, False), "n2": (SKEW, False), "n5": (MISSING, True)},
                 id="node without the topology key"),
    pytest.param(spread(spread(pod("p"), 1, "zone"), 1, "rack"),
                 [node("n1", "a", rack="r1"), node("n2", "b"), node("n3", "b", rack="r2")],
                 pods_on(n2=3),
                 {"n2": (MISSING, True)},
                 id="nodes lacking any hard key are not counted"),
    pytest.param(spread(spread(pod("p"), 1, "zone"), 5, "rack"),
                 [node("n1", "a", rack="r1"), node("n2", "a"), node("n3", "b", rack="r1")],
                 pods_on(n1=2),
                 {"n1": (SKEW, False), "n2": (SKEW, False)},
                 id="first failing constraint wins"),
    pytest.param(spread(pod("p"), 1, "zone"), ZONES_AB,
                 {"n1": [pod("x1", namespace="other"), pod("x2", namespace="other")]},
                 {}, id="pods of other namespaces do not count"),
    pytest.param(spread(pod("p"), 1, "zone"), ZONES_AB,
                 {"n1": [pod("x1", deleting=True), pod("x2", deleting=True)]},
                 {}, id="terminating pods do not count"),
    pytest.param(spread(pod("p"), 1, "zone", selector=None), ZONES_AB, pods_on(n1=3),
                 {}, id="absent labelSelector matches nothing"),
    pytest.param(spread(pod("p"), 1, "zone", selector={}), ZONES_AB,
                 {"n1": [pod("x", app="db")]},
                 {"n1": (SKEW, False), "n2": (SKEW, False)},
                 id="empty labelSelector matches every pod"),
    pytest.param(spread(pod("p"), 1, "zone", matchLabelKeys=["rev"]),
                 ZONES_AB, pods_on(n1=2), {"n1": (SKEW, False), "n2": (SKEW, False)},
                 id="matchLabelKeys without the label on the pod"),
])
def test_filter(incoming: Obj, nodes: list[Obj], pods: dict[str, list[Obj]],
                expected: dict[str, tuple[str, bool]]) -> None:
    table = build_table(nodes, pods)
    result = PodTopologySpread().filter(CycleContext.for_pod(pod_info(incoming), table))
    assert verdicts(result, table) == expected


def test_match_label_keys_narrow_the_selector() -> None:
    incoming = spread(pod("p"), 1, "zone", matchLabelKeys=["rev"])
    incoming["metadata"]["labels"]["rev"] = "2"
    old = pod("old")  # no rev label: another revision
    new = pod("new")
    new["metadata"]["labels"]["rev"] = "2"
    table = build_table(ZONES_AB, {"n1": [old, pod("old2")], "n3": [new]})
    result = PodTopologySpread().filter(CycleContext.for_pod(pod_info(incoming), table))
    assert verdicts(result, table) == {"n3": (SKEW, False)}


AFFINITY_NODES = [node("n1", "a"), node("n2", "b"), node("n3", "c", tier="batch")]


@pytest.mark.parametrize(("policy", "expected"), [
    pytest.param({}, {}, id="nodeAffinityPolicy Honor by default: zone c not counted"),
    pytest.param({"nodeAffinityPolicy": "Honor"}, {}, id="nodeAffinityPolicy Honor"),
    pytest.param({"nodeAffinityPolicy": "Ignore"}, {"n1": (SKEW, False), "n2": (SKEW, False)},
                 id="nodeAffinityPolicy Ignore: empty zone c is the minimum"),
])
def test_node_affinity_policy(policy: dict[str, Any],
                              expected: dict[str, tuple[str, bool]]) -> None:
    incoming = spread(make_pod("p").label("app", "web").node_affinity_in("zone", "a", "b").obj(),
                      1, "zone", **policy)
    table = build_table(AFFINITY_NODES, pods_on(n1=1, n2=1))
    result = PodTopologySpread().filter(CycleContext.for_pod(pod_info(incoming), table))
    assert verdicts(result, table) == expected


def test_node_selector_counts_as_node_affinity() -> None:
    incoming = spread(make_pod("p").label("app", "web").node_selector(tier="web").obj(), 1, "zone")
    nodes = [node("n1", "a", tier="web"), node("n2", "b", tier="web"), node("n3", "c")]
    table = build_table(nodes, pods_on(n1=1, n2=1))
    result = PodTopologySpread().filter(CycleContext.for_pod(pod_info(incoming), table))
    assert verdicts(result, table) == {}


def test_node_affinity_mask_from_cycle_state_is_used() -> None:
    incoming = spread(pod("p"), 1, "zone")  # no node affinity of its own
    table = build_table(AFFINITY_NODES, pods_on(n1=1, n2=1))
    ctx = CycleContext.for_pod(pod_info(incoming), table)
    ctx.state["NodeAffinity/required"] = np.array([True, True, False])
    assert verdicts(PodTopologySpread().filter(ctx), table) == {
        "n1": (SKEW, False), "n2": (SKEW, False)}
    # The provided mask is only consulted when the pod has node affinity of its own.
    # (Computed from the pod, zone=a, only n1 would be counted and every node would fit.)
    incoming = spread(make_pod("p").label("app", "web").node_selector(zone="a").obj(), 1, "zone")
    ctx = CycleContext.for_pod(pod_info(incoming), table)
    ctx.state["NodeAffinity/required"] = np.array([True, False, True])
    assert verdicts(PodTopologySpread().filter(ctx), table) == {"n1": (SKEW, False)}


def tainted(effect: str) -> list[Obj]:
    return [node("n1", "a"), node("n2", "b"),
            make_node("n3").label("zone", "c").label(HOST, "n3")
            .taint("dedicated", "gpu", effect).obj()]


@pytest.mark.parametrize(("effect", "policy", "expected"), [
    pytest.param("NoExecute", {"nodeTaintsPolicy": "Honor"}, {},
                 id="nodeTaintsPolicy Honor: NoExecute taints exclude too"),
    pytest.param("PreferNoSchedule", {"nodeTaintsPolicy": "Honor"},
                 {"n1": (SKEW, False), "n2": (SKEW, False)},
                 id="nodeTaintsPolicy Honor: PreferNoSchedule taints do not"),
])
def test_taint_effects(effect: str, policy: dict[str, Any],
                       expected: dict[str, tuple[str, bool]]) -> None:
    incoming = spread(pod("p"), 1, "zone", **policy)
    table = build_table(tainted(effect), pods_on(n1=1, n2=1))
    result = PodTopologySpread().filter(CycleContext.for_pod(pod_info(incoming), table))
    assert verdicts(result, table) == expected


TAINTED = tainted("NoSchedule")


@pytest.mark.parametrize(("policy", "tolerate", "expected"), [
    pytest.param({}, False, {"n1": (SKEW, False), "n2": (SKEW, False)},
                 id="nodeTaintsPolicy Ignore by default: tainted zone counts"),
    pytest.param({"nodeTaintsPolicy": "Honor"}, False, {},
                 id="nodeTaintsPolicy Honor: untolerated tainted zone not counted"),
    pytest.param({"nodeTaintsPolicy": "Honor"}, True, {"n1": (SKEW, False), "n2": (SKEW, False)},
                 id="nodeTaintsPolicy Honor: tolerated taint counts"),
])
def test_node_taints_policy(policy: dict[str, Any], tolerate: bool,
                            expected: dict[str, tuple[str, bool]]) -> None:
    b = make_pod("p").label("app", "web")
    if tolerate:
        b.toleration("dedicated", "gpu", effect="NoSchedule")
    incoming = spread(b.obj(), 1, "zone", **policy)
    table = build_table(TAINTED, pods_on(n1=1, n2=1))
    result = PodTopologySpread().filter(CycleContext.for_pod(pod_info(incoming), table))
    assert verdicts(result, table) == expected


def test_no_hard_constraints_pass_everything() -> None:
    table = build_table(ZONES_AB, pods_on(n1=3))
    plugin = PodTopologySpread()
    assert plugin.filter(CycleContext.for_pod(pod_info(pod("p")), table)).passed is None
    soft = spread(pod("p"), 1, "zone", when="ScheduleAnyway")
    assert plugin.filter(CycleContext.for_pod(pod_info(soft), table)).passed is None
    assert PodTopologySpread.name == NAME == "PodTopologySpread"


def test_holes_get_no_reason() -> None:
    table = build_table([*ZONES_AB, node("gone", "a")], pods_on(n1=2), removed=["gone"])
    result = PodTopologySpread().filter(CycleContext.for_pod(
        pod_info(spread(pod("p"), 1, "zone")), table))
    assert result.passed is not None
    hole = 3
    assert not table.valid[hole]
    assert not any(r.failed[hole] for r in result.reasons)
    assert verdicts(result, table) == {"n1": (SKEW, False), "n2": (SKEW, False)}


def test_counts_follow_table_changes() -> None:
    table = build_table(ZONES_AB, pods_on(n1=1, n3=1))
    plugin = PodTopologySpread()
    incoming = pod_info(spread(pod("p"), 1, "zone"))
    assert verdicts(plugin.filter(CycleContext.for_pod(incoming, table)), table) == {}
    table.add_pod(table.slots["n1"], pod_info(pod("more")))
    assert verdicts(plugin.filter(CycleContext.for_pod(incoming, table)), table) == {
        "n1": (SKEW, False), "n2": (SKEW, False)}
    # The pod starts terminating: the cache replaces it (remove + add).
    table.remove_pod(table.slots["n1"], "uid-default-more")
    table.add_pod(table.slots["n1"], pod_info(pod("more", deleting=True)))
    assert verdicts(plugin.filter(CycleContext.for_pod(incoming, table)), table) == {}


# -- score --------------------------------------------------------------------------------------

def scores(incoming: Obj, nodes: list[Obj], pods: dict[str, list[Obj]],
           feasible: Sequence[str] | None = None) -> dict[str, int]:
    table = build_table(nodes, pods)
    mask = table.valid[: table.n].copy()
    if feasible is not None:
        mask &= np.array([name in feasible for name in table.names[: table.n]])
    out = PodTopologySpread().score(CycleContext.for_pod(pod_info(incoming), table), mask)
    return {table.names[s]: int(out[s]) for s in range(table.n) if mask[s]}


def soft(max_skew: int, key: str, obj: Obj | None = None, **extra: Any) -> Obj:
    return spread(obj if obj is not None else pod("p"), max_skew, key, when="ScheduleAnyway",
                  **extra)


@pytest.mark.parametrize(("incoming", "nodes", "pods", "feasible", "expected"), [
    # weight log(2+2); raw a=round(2*1.386)=3, b=round(1.386)=1; 100*(3+1-s)/3
    pytest.param(soft(1, "zone"), ZONES_AB, pods_on(n1=2, n3=1), None,
                 {"n1": 33, "n2": 33, "n3": 100}, id="zone counts, inverse normalization"),
    # weight log(3+2)=1.609; raw 3, 0, 2; 100*(3+0-s)/3
    pytest.param(soft(1, HOST), ZONES_AB, pods_on(n1=2, n3=1), None,
                 {"n1": 0, "n2": 100, "n3": 33}, id="hostname counts per node"),
    # maxSkew 3 adds 2 to every raw score: 5, 5, 3 -> 100*(5+3-s)/5
    pytest.param(soft(3, "zone"), ZONES_AB, pods_on(n1=2, n3=1), None,
                 {"n1": 60, "n2": 60, "n3": 100}, id="maxSkew waters the differences down"),
    pytest.param(soft(1, "zone"), ZONES_AB, {}, None,
                 {"n1": 100, "n2": 100, "n3": 100}, id="no matching pods: all 100"),
    pytest.param(soft(1, "zone"), [*ZONES_AB, node("n4")], pods_on(n1=2, n3=1), None,
                 {"n1": 33, "n2": 33, "n3": 100, "n4": 0}, id="node without the key scores 0"),
    # Only n1, n3 feasible; weight log(2+2) still; counts over all nodes of those domains.
    pytest.param(soft(1, "zone"), ZONES_AB, pods_on(n2=2, n3=1), ["n1", "n3"],
                 {"n1": 33, "n3": 100}, id="domain counts include infeasible nodes"),
    # Zone c not among feasible nodes: its pods are not counted anywhere, weight log(2+2).
    pytest.param(soft(1, "zone"), ZONES_ABC, pods_on(n4=5, n1=1), ["n1", "n2", "n3"],
                 {"n1": 0, "n2": 0, "n3": 100}, id="domains outside the feasible set ignored"),
    # Two constraints: zone (log 4) + hostname (log 5), per node n1: 2*1.386+2*1.609=5.99->6,
    # n2: 2.77+0=2.77->3, n3: 1.386+1.609=2.996->3; 100*(6+3-s)/6
    pytest.param(soft(1, HOST, soft(1, "zone")), ZONES_AB, pods_on(n1=2, n3=1), None,
                 {"n1": 50, "n2": 100, "n3": 100}, id="zone and hostname together"),
    pytest.param(spread(pod("p"), 1, "zone"), ZONES_AB, pods_on(n1=2), None,
                 {"n1": 0, "n2": 0, "n3": 0}, id="hard constraints only: no score"),
])
def test_score(incoming: Obj, nodes: list[Obj], pods: dict[str, list[Obj]],
               feasible: list[str] | None, expected: dict[str, int]) -> None:
    assert scores(incoming, nodes, pods, feasible) == expected


@pytest.mark.parametrize(("policy", "expected"), [
    # Honor: n2 (zone a, no tier=web) is not counted: a=0, b=1 -> raw 0, 1.
    pytest.param("Honor", {"n1": 100, "n3": 0}, id="nodeAffinityPolicy Honor"),
    # Ignore: a=4 -> raw round(4*log 4)=6, b -> 1: 100*(6+1-s)//6.
    pytest.param("Ignore", {"n1": 16, "n3": 100}, id="nodeAffinityPolicy Ignore"),
])
def test_score_node_affinity_policy(policy: str, expected: dict[str, int]) -> None:
    nodes = [node("n1", "a", tier="web"), node("n2", "a"), node("n3", "b", tier="web")]
    incoming = soft(1, "zone", make_pod("p").label("app", "web").node_selector(tier="web").obj(),
                    nodeAffinityPolicy=policy)
    assert scores(incoming, nodes, pods_on(n2=4, n3=1), ["n1", "n3"]) == expected


def test_hostname_score_counts_the_node_itself() -> None:
    # kube counts a hostname domain straight from the node, without inclusion policies: n2
    # fails the pod's nodeSelector (Honor) yet its own pods still count when it is scored.
    nodes = [node("n1", "a", tier="web"), node("n2", "a")]
    incoming = soft(1, HOST, make_pod("p").label("app", "web").node_selector(tier="web").obj())
    assert scores(incoming, nodes, pods_on(n2=2)) == {"n1": 100, "n2": 0}


def test_go_rounding_is_half_away_from_zero() -> None:
    from pyscheduler.plugins.pod_topology_spread import _go_round
    got = _go_round(np.array([0.5, 1.5, 2.5, 2.4999999999999996, 0.49999999999999994, -0.5]))
    assert got.tolist() == [1, 2, 3, 2, 0, -1]


# -- default constraints ------------------------------------------------------------------------
# Pods without constraints of their own get the defaults from the scheduler's
# pyscheduler.spread_defaults (kube's buildDefaultConstraints); the plugin scores the system
# defaults as kube's PreScore does with systemDefaulted (requireAllTopologies false).

ZONE = "topology.kubernetes.io/zone"
FOO_EXISTS = {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}


def defaulted(obj: Obj, *workloads: Obj,
              settings: PodTopologySpreadConfig = PodTopologySpreadConfig()) -> PodInfo:
    """The pod as an attempt sees it, with the defaults that ``workloads`` (Services,
    ReplicaSets, ...) give it."""
    selectors = WorkloadSelectors()
    for w in workloads:
        feed_workload(selectors, w)
    return SpreadDefaults(None, settings, selectors=selectors).view(pod_info(obj))


def host(name: str, zone: str | None = None, hostname: bool = True) -> Obj:
    b = make_node(name).capacity(cpu="4", memory="32Gi", pods=110)
    if hostname:
        b.label(HOST, name)
    if zone is not None:
        b.label(ZONE, zone)
    return b.obj()


def foo_pods(**counts: int) -> dict[str, list[Obj]]:
    """``foo_pods(a=2)``: that many pods labelled foo="" (kube's test pods) on each node."""
    return {n: [make_pod(f"{n}-p{i}").label("foo", "").obj() for i in range(k)]
            for n, k in counts.items()}


def owned(obj: Obj, kind: str, name: str, api_version: str = "apps/v1") -> Obj:
    obj["metadata"]["ownerReferences"] = [{"apiVersion": api_version, "kind": kind,
                                           "name": name, "uid": f"uid-{name}",
                                           "controller": True}]
    return obj


FOO_SERVICE = service("svc", {"foo": ""})
RS1 = replica_set("rs1", FOO_EXISTS)
INCOMING = make_pod("p").label("foo", "").obj()
NO_ZONES = [host("node-a"), host("node-b"), host("node-c"), host("node-d")]
HALF_ZONED = [host("node-a", "mars"), host("node-b", "mars"), host("node-c"), host("node-d")]


@pytest.mark.parametrize(("incoming", "nodes", "pods", "expected"), [
    # kube: TestPodTopologySpreadScore "system defaulting, nodes don't have zone, pods match
    # service": the same scores as the hostname constraint alone (maxSkew 3).
    pytest.param(defaulted(INCOMING, FOO_SERVICE), NO_ZONES,
                 foo_pods(**{"node-a": 4, "node-b": 3, "node-c": 2, "node-d": 1}),
                 {"node-a": 44, "node-b": 66, "node-c": 77, "node-d": 100},
                 id="system defaulting, nodes don't have zone, pods match service"),
    # kube: TestPreScoreStateEmptyNodes "system default constraints and a replicaset": nodes
    # without a zone are not ignored, they form the zone "" (weights log(4+2), log(2+2)).
    # Raw: a, b = 2 + 4 = 6; c, d = 2 (no zone term) -> 100*(6+2-s)/6.
    pytest.param(defaulted(owned(make_pod("p").label("foo", "tar").obj(), "ReplicaSet", "rs1"),
                           RS1),
                 HALF_ZONED, {}, {"node-a": 33, "node-b": 33, "node-c": 100, "node-d": 100},
                 id="system default constraints and a replicaset"),
    # a: 1.79+2 + 1.39+4 = 9.18 -> 9; b: 2 + 5.39 -> 7; c: 2*1.79+2 = 5.58 -> 6; d: 2.
    pytest.param(defaulted(owned(make_pod("p").label("foo", "tar").obj(), "ReplicaSet", "rs1"),
                           RS1),
                 HALF_ZONED, foo_pods(**{"node-a": 1, "node-c": 2}),
                 {"node-a": 22, "node-b": 44, "node-c": 55, "node-d": 100},
                 id="system defaults: pods on nodes with and without a zone"),
    # The unlabelled nodes' domain "" counts in the zone's size: log(2 + 2), not log(1 + 2).
    # a: 3*1.79+2 + 4*1.39+4 = 16.9 -> 17, b: 1.79+2 + 9.55 -> 13, c, d: 2 -> 100*(19-s)/17.
    pytest.param(defaulted(INCOMING, FOO_SERVICE), HALF_ZONED,
                 foo_pods(**{"node-a": 3, "node-b": 1}),
                 {"node-a": 11, "node-b": 35, "node-c": 100, "node-d": 100},
                 id="system defaults: nodes without a zone widen the zone topology"),
    # Zones everywhere: hostname log(5), zone log(4); n1: 3.22+2 + 2.77+4 = 11.99 -> 12,
    # n2: 2 + 6.77 -> 9, n3: 1.61+2 + 1.39+4 = 9.0 -> 9 -> 100*(21-s)/12.
    pytest.param(defaulted(INCOMING, FOO_SERVICE),
                 [host("n1", "a"), host("n2", "a"), host("n3", "b")],
                 foo_pods(n1=2, n3=1), {"n1": 75, "n2": 100, "n3": 100},
                 id="system defaults over zoned nodes"),
    # A node labelled with the empty zone shares the domain "" with nodes without the label:
    # "" counts b's pod and c's 3; a: 9.18 -> 9, b: 1.79+2 + 4*1.39+4 = 13.3 -> 13, c: 3*1.79+2
    # = 7.4 -> 7, d: 2 + 5.39 -> 7.
    pytest.param(defaulted(INCOMING, FOO_SERVICE),
                 [host("node-a", "mars"), host("node-b", ""), host("node-c"),
                  host("node-d", "mars")],
                 foo_pods(**{"node-a": 1, "node-b": 1, "node-c": 3}),
                 {"node-a": 84, "node-b": 53, "node-c": 100, "node-d": 100},
                 id="system defaults: an empty zone value is the unlabelled nodes' domain"),
    # b has no hostname label: no hostname term, still scored; a: 3.22+2 + 3*1.39+4 = 13.4
    # -> 13, b: 8.16 -> 8, c: 6.
    pytest.param(defaulted(INCOMING, FOO_SERVICE),
                 [host("a", "x"), host("b", "x", hostname=False), host("c", "y")],
                 foo_pods(a=2, b=1), {"a": 46, "b": 84, "c": 100},
                 id="system defaults: a node without a hostname label"),
    # The same two constraints declared by the pod itself: nodes lacking the zone are ignored.
    pytest.param(spread(spread(make_pod("p").label("foo", "tar").obj(), 3, HOST,
                               "ScheduleAnyway", FOO_EXISTS), 5, ZONE, "ScheduleAnyway",
                        FOO_EXISTS),
                 HALF_ZONED, foo_pods(**{"node-a": 1, "node-c": 2}),
                 {"node-a": 87, "node-b": 100, "node-c": 0, "node-d": 0},
                 id="the same constraints of the pod's own ignore nodes without a zone"),
    # List defaulting (not system): nodes lacking a key are ignored as for the pod's own.
    pytest.param(defaulted(owned(make_pod("p").label("foo", "tar").obj(), "ReplicaSet", "rs1"),
                           RS1, settings=PodTopologySpreadConfig("List", (
                               DefaultSpreadConstraint(3, HOST, "ScheduleAnyway"),
                               DefaultSpreadConstraint(5, ZONE, "ScheduleAnyway")))),
                 HALF_ZONED, foo_pods(**{"node-a": 1, "node-c": 2}),
                 {"node-a": 87, "node-b": 100, "node-c": 0, "node-d": 0},
                 id="List defaults ignore nodes without a key"),
    pytest.param(defaulted(make_pod("p").label("foo", "").obj(), service("other", {"baz": "k"})),
                 NO_ZONES, foo_pods(**{"node-a": 4}),
                 {"node-a": 0, "node-b": 0, "node-c": 0, "node-d": 0},
                 id="nothing selects the pod: no defaults, no score"),
])
def test_score_with_default_constraints(incoming: PodInfo | Obj, nodes: list[Obj],
                                        pods: dict[str, list[Obj]],
                                        expected: dict[str, int]) -> None:
    pod = incoming if isinstance(incoming, PodInfo) else pod_info(incoming)
    table = build_table(nodes, pods)
    mask = table.valid[: table.n].copy()
    out = PodTopologySpread().score(CycleContext.for_pod(pod, table), mask)
    assert {table.names[s]: int(out[s]) for s in range(table.n)} == expected


LIST_HARD = PodTopologySpreadConfig("List", (
    DefaultSpreadConstraint(1, "zone", "DoNotSchedule"),
    DefaultSpreadConstraint(2, HOST, "ScheduleAnyway")))
WEB_SERVICE = service("web", {"app": "web"})


@pytest.mark.parametrize(("incoming", "expected"), [
    pytest.param(defaulted(pod("p"), WEB_SERVICE, settings=LIST_HARD),
                 {"n1": (SKEW, False), "n2": (SKEW, False), "n3": (SKEW, False)},
                 id="a hard default constraint filters as the pod's own would"),
    pytest.param(defaulted(pod("p"), WEB_SERVICE), {},
                 id="the system defaults are soft: the filter passes every node"),
    pytest.param(defaulted(pod("p"), service("db", {"app": "db"}), settings=LIST_HARD), {},
                 id="no workload selects the pod: no defaults"),
    pytest.param(defaulted(spread(pod("p"), 5, "zone"), WEB_SERVICE, settings=LIST_HARD), {},
                 id="the pod's own constraints replace the defaults"),
])
def test_filter_with_default_constraints(incoming: PodInfo,
                                         expected: dict[str, tuple[str, bool]]) -> None:
    table = build_table(ZONES_ABC, pods_on(n1=2, n3=1))
    result = PodTopologySpread().filter(CycleContext.for_pod(incoming, table))
    assert verdicts(result, table) == expected

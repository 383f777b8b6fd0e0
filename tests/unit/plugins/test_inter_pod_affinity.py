"""InterPodAffinity: kube's filter verdicts and messages, and its scoring arithmetic."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest

from pyscheduler.api.labels import LabelSelector
from pyscheduler.framework.interface import CycleContext
from pyscheduler.framework.nodetable import NodeTable, node_info
from pyscheduler.framework.pod import pod_info
from pyscheduler.plugins.inter_pod_affinity import (
    ERR_REASON_AFFINITY_RULES_NOT_MATCH as AFF,
)
from pyscheduler.plugins.inter_pod_affinity import (
    ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH as ANTI,
)
from pyscheduler.plugins.inter_pod_affinity import (
    ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH as EXISTING,
)
from pyscheduler.plugins.inter_pod_affinity import (
    NAME,
    InterPodAffinity,
)

from .builders import build_table, make_node, make_pod, verdicts

Obj = dict[str, Any]
HOST = "kubernetes.io/hostname"
NAMESPACE_LABELS = {"default": {"team": "x"}, "other": {"team": "y"}, "third": {"team": "x"}}


def resolve(selector: LabelSelector) -> frozenset[str]:
    return frozenset(ns for ns, labels in NAMESPACE_LABELS.items() if selector.matches(labels))


def node(name: str, zone: str | None = None) -> Obj:
    b = make_node(name).capacity(cpu="4", memory="32Gi", pods=110).label(HOST, name)
    if zone is not None:
        b.label("zone", zone)
    return b.obj()


def pod(name: str, app: str | None = None, namespace: str = "default") -> Obj:
    b = make_pod(name, namespace)
    if app is not None:
        b.label("app", app)
    return b.obj()


def term(obj: Obj, kind: str, key: str, app: str | None, *, weight: int = 0,
         namespaces: Sequence[str] = (), namespace_selector: Mapping[str, Any] | None = None,
         selector: Mapping[str, Any] | None = None) -> Obj:
    """Add a pod (anti-)affinity term. ``kind``: affinity, anti, preferred, preferred-anti."""
    t: Obj = {"topologyKey": key}
    if selector is not None:
        t["labelSelector"] = dict(selector)
    elif app is not None:
        t["labelSelector"] = {"matchLabels": {"app": app}}
    if namespaces:
        t["namespaces"] = list(namespaces)
    if namespace_selector is not None:
        t["namespaceSelector"] = dict(namespace_selector)
    field = "podAntiAffinity" if kind in ("anti", "preferred-anti") else "podAffinity"
    group = obj["spec"].setdefault("affinity", {}).setdefault(field, {})
    if kind.startswith("preferred"):
        group.setdefault("preferredDuringSchedulingIgnoredDuringExecution", []).append(
            {"weight": weight, "podAffinityTerm": t})
    else:
        group.setdefault("requiredDuringSchedulingIgnoredDuringExecution", []).append(t)
    return obj


def ctx_for(incoming: Obj, table: NodeTable) -> CycleContext:
    return CycleContext.for_pod(pod_info(incoming), table, resolve)


NODES = [node("n1", "a"), node("n2", "a"), node("n3", "b"), node("n4", "c")]


@pytest.mark.parametrize(("incoming", "pods", "expected"), [
    pytest.param(term(pod("p"), "affinity", "zone", "db"), {"n1": [pod("db1", "db")]},
                 {"n3": (AFF, True), "n4": (AFF, True)}, id="affinity by zone"),
    pytest.param(term(pod("p"), "affinity", HOST, "db"), {"n1": [pod("db1", "db")]},
                 {"n2": (AFF, True), "n3": (AFF, True), "n4": (AFF, True)},
                 id="affinity by hostname"),
    pytest.param(term(pod("p", "db"), "affinity", "zone", "db"), {}, {},
                 id="first pod of a group matching its own term"),
    pytest.param(term(pod("p", "web"), "affinity", "zone", "db"), {},
                 {n: (AFF, True) for n in ("n1", "n2", "n3", "n4")},
                 id="no matching pod and not matching itself"),
    pytest.param(term(pod("p", "db"), "affinity", "zone", "db"),
                 {"n3": [pod("db1", "db", namespace="other")]}, {},
                 id="pods of other namespaces do not count"),
    pytest.param(term(pod("p", "db"), "affinity", "zone", "db", namespaces=["other"]),
                 {"n3": [pod("db1", "db", namespace="other")]},
                 {"n1": (AFF, True), "n2": (AFF, True), "n4": (AFF, True)},
                 id="term namespaces"),
    pytest.param(term(pod("p", "db"), "affinity", "zone", "db",
                      namespace_selector={"matchLabels": {"team": "y"}}),
                 {"n3": [pod("db1", "db", namespace="other")]},
                 {"n1": (AFF, True), "n2": (AFF, True), "n4": (AFF, True)},
                 id="term namespaceSelector"),
    pytest.param(term(pod("p", "db"), "affinity", "zone", "db", namespace_selector={}),
                 {"n4": [pod("db1", "db", namespace="other")]},
                 {"n1": (AFF, True), "n2": (AFF, True), "n3": (AFF, True)},
                 id="empty namespaceSelector selects every namespace"),
    pytest.param(term(term(pod("p"), "affinity", "zone", "db"), "affinity", HOST, None,
                      selector={"matchLabels": {"tier": "cache"}}),
                 {"n1": [pod("db1", "db")],
                  "n2": [make_pod("c").label("app", "db").label("tier", "cache").obj()]},
                 {"n1": (AFF, True), "n3": (AFF, True), "n4": (AFF, True)},
                 id="only pods matching all terms count"),
    pytest.param(term(pod("p"), "anti", HOST, "web"), {"n1": [pod("w1", "web")]},
                 {"n1": (ANTI, False)}, id="anti-affinity by hostname"),
    pytest.param(term(pod("p"), "anti", "zone", "web"), {"n1": [pod("w1", "web")]},
                 {"n1": (ANTI, False), "n2": (ANTI, False)}, id="anti-affinity by zone"),
    pytest.param(term(pod("p"), "anti", "zone", "web"),
                 {"n1": [pod("w1", "web", namespace="other")]}, {},
                 id="anti-affinity ignores other namespaces"),
    pytest.param(term(pod("p"), "anti", "rack", "web"), {"n1": [pod("w1", "web")]}, {},
                 id="anti-affinity key absent everywhere"),
    pytest.param(pod("p", "web"),
                 {"n1": [term(pod("e", "db"), "anti", "zone", "web")]},
                 {"n1": (EXISTING, False), "n2": (EXISTING, False)},
                 id="existing pod anti-affinity is symmetric"),
    pytest.param(pod("p", "web"),
                 {"n3": [term(pod("e", "db"), "anti", HOST, "web")]},
                 {"n3": (EXISTING, False)}, id="existing pod anti-affinity by hostname"),
    pytest.param(pod("p", "api"),
                 {"n1": [term(pod("e", "db"), "anti", "zone", "web")]}, {},
                 id="existing anti-affinity not matching the incoming pod"),
    pytest.param(pod("p", "web", namespace="other"),
                 {"n1": [term(pod("e", "db"), "anti", "zone", "web")]}, {},
                 id="existing anti-affinity in its own namespace only"),
    pytest.param(pod("p", "web", namespace="third"),
                 {"n1": [term(pod("e", "db"), "anti", "zone", "web",
                              namespace_selector={"matchLabels": {"team": "x"}})]},
                 {"n1": (EXISTING, False), "n2": (EXISTING, False)},
                 id="existing anti-affinity with namespaceSelector"),
    pytest.param(term(term(pod("p", "web"), "affinity", "zone", "db"), "anti", HOST, "web"),
                 {"n1": [pod("db1", "db"), pod("w1", "web")],
                  "n3": [term(pod("e", "x"), "anti", "zone", "web")]},
                 {"n1": (ANTI, False), "n3": (AFF, True), "n4": (AFF, True)},
                 id="affinity is checked before anti-affinity"),
    pytest.param(term(pod("p", "web"), "anti", HOST, "web"),
                 {"n1": [term(pod("e", "web"), "anti", "zone", "web")]},
                 {"n1": (ANTI, False), "n2": (EXISTING, False)},
                 id="own anti-affinity before existing pods'"),
])
def test_filter(incoming: Obj, pods: dict[str, list[Obj]],
                expected: dict[str, tuple[str, bool]]) -> None:
    table = build_table(NODES, pods)
    result = InterPodAffinity().filter(ctx_for(incoming, table))
    assert verdicts(result, table) == expected


def test_affinity_requires_every_topology_key() -> None:
    nodes = [*NODES, node("bare")]
    table = build_table(nodes, {})
    incoming = term(pod("p", "db"), "affinity", "zone", "db")  # first pod: allowed...
    result = InterPodAffinity().filter(ctx_for(incoming, table))
    assert verdicts(result, table) == {"bare": (AFF, True)}  # ...but only with the key


def test_first_pod_exception_needs_no_match_on_keyed_nodes() -> None:
    # A matching pod on a node without the zone label does not count as "existing".
    nodes = [*NODES, node("bare")]
    table = build_table(nodes, {"bare": [pod("db1", "db")]})
    result = InterPodAffinity().filter(ctx_for(term(pod("p", "db"), "affinity", "zone", "db"),
                                               table))
    assert verdicts(result, table) == {"bare": (AFF, True)}


def test_no_terms_anywhere_pass_everything() -> None:
    table = build_table(NODES, {"n1": [pod("w", "web")]})
    plugin = InterPodAffinity()
    assert plugin.filter(ctx_for(pod("p", "web"), table)).passed is None
    assert InterPodAffinity.name == NAME == "InterPodAffinity"


def test_existing_terms_follow_table_changes() -> None:
    table = build_table(NODES, {})
    plugin = InterPodAffinity()
    incoming = pod("p", "web")
    assert plugin.filter(ctx_for(incoming, table)).passed is None
    guard = pod_info(term(pod("e", "db"), "anti", "zone", "web"))
    table.add_pod(table.slots["n3"], guard)
    assert verdicts(plugin.filter(ctx_for(incoming, table)), table) == {"n3": (EXISTING, False)}
    table.remove_pod(table.slots["n3"], guard.uid)
    assert plugin.filter(ctx_for(incoming, table)).passed is None
    table.add_pod(table.slots["n1"], guard)
    table.remove_node("n2")
    table.set_node(node_info(node("n5", "a")))  # reuses n2's slot
    assert verdicts(plugin.filter(ctx_for(incoming, table)), table) == {
        "n1": (EXISTING, False), "n5": (EXISTING, False)}


def test_table_growth_keeps_the_index() -> None:
    table = build_table(NODES, {"n1": [term(pod("e", "db"), "anti", HOST, "web")]})
    plugin = InterPodAffinity()
    plugin.filter(ctx_for(pod("p", "web"), table))
    for i in range(40):
        table.set_node(node_info(node(f"m{i}", "z")))
    table.add_pod(table.slots["m39"], pod_info(term(pod("e2", "db"), "anti", HOST, "web")))
    assert verdicts(plugin.filter(ctx_for(pod("p", "web"), table)), table) == {
        "n1": (EXISTING, False), "m39": (EXISTING, False)}



def test_only_pods_with_terms_move_the_term_generation() -> None:
    """The table's term generation (which the index of existing pods' terms follows) moves when
    a pod carrying terms comes or goes, its node included, and not for other pods."""
    table = build_table(NODES, {})
    plugin = InterPodAffinity()
    incoming = pod("p", "web")
    plugin.filter(ctx_for(incoming, table))
    before = table.term_generation
    table.add_pod(table.slots["n1"], pod_info(pod("plain", "web")))
    table.remove_pod(table.slots["n1"], "plain")
    assert table.term_generation == before
    guard = pod_info(term(pod("e", "db"), "anti", HOST, "web"))
    table.add_pod(table.slots["n2"], guard)
    assert table.term_generation == before + 1
    assert verdicts(plugin.filter(ctx_for(incoming, table)), table) == {"n2": (EXISTING, False)}
    table.add_pod(table.slots["n2"], pod_info(pod("plain2", "web")))  # the row changes...
    assert verdicts(plugin.filter(ctx_for(incoming, table)), table) == {"n2": (EXISTING, False)}
    table.remove_node("n2")  # ...and its node goes, with the pod carrying the term
    assert table.term_generation == before + 2
    assert plugin.filter(ctx_for(incoming, table)).passed is None


def test_existing_terms_are_looked_up_by_the_incoming_pods_namespace() -> None:
    """Existing pods' terms are filed by the namespaces they select: a pod of another namespace
    is not held by a term of this one, a term with a namespace selector holds whatever its
    selector picks, and terms coming and going (filed anew each time) are seen at once."""
    table = build_table(NODES, {"n1": [term(pod("e", "db"), "anti", HOST, "web")]})
    plugin = InterPodAffinity()
    here, elsewhere = pod("p", "web"), pod("q", "web", namespace="other")
    assert verdicts(plugin.filter(ctx_for(here, table)), table) == {"n1": (EXISTING, False)}
    assert plugin.filter(ctx_for(elsewhere, table)).passed is None
    # A term naming the other namespace, then one selecting namespaces of team y.
    named = pod_info(term(pod("e2", "db"), "anti", HOST, "web", namespaces=["other"]))
    table.add_pod(table.slots["n2"], named)
    assert verdicts(plugin.filter(ctx_for(elsewhere, table)), table) == {
        "n2": (EXISTING, False)}
    by_selector = pod_info(term(pod("e3", "db", namespace="third"), "anti", HOST, "web",
                                namespace_selector={"matchLabels": {"team": "y"}}))
    table.add_pod(table.slots["n3"], by_selector)
    assert verdicts(plugin.filter(ctx_for(elsewhere, table)), table) == {
        "n2": (EXISTING, False), "n3": (EXISTING, False)}
    assert verdicts(plugin.filter(ctx_for(here, table)), table) == {"n1": (EXISTING, False)}
    table.remove_pod(table.slots["n2"], named.uid)
    table.remove_pod(table.slots["n3"], by_selector.uid)
    assert plugin.filter(ctx_for(elsewhere, table)).passed is None
    # Scores follow the same filing: a preferred term of another namespace adds nothing.
    table.add_pod(table.slots["n2"], pod_info(term(pod("e4", "db", namespace="other"),
                                                   "preferred-anti", HOST, "web", weight=10)))
    ctx = ctx_for(elsewhere, table)
    feasible = np.ones(table.n, np.bool_)
    assert plugin.score(ctx, feasible)[table.slots["n2"]] == 0
    assert plugin.score(ctx, feasible).max() == 100
    assert not plugin.score(ctx_for(here, table), feasible).any()

# -- score --------------------------------------------------------------------------------------

def scores(incoming: Obj, pods: dict[str, list[Obj]], feasible: Sequence[str] | None = None,
           plugin: InterPodAffinity | None = None) -> dict[str, int]:
    table = build_table(NODES, pods)
    mask = table.valid[: table.n].copy()
    if feasible is not None:
        mask &= np.array([name in feasible for name in table.names[: table.n]])
    out = (plugin or InterPodAffinity()).score(ctx_for(incoming, table), mask)
    return {table.names[s]: int(out[s]) for s in range(table.n) if mask[s]}


@pytest.mark.parametrize(("incoming", "pods", "expected"), [
    pytest.param(term(pod("p"), "preferred", "zone", "db", weight=10),
                 {"n1": [pod("db1", "db")]},
                 {"n1": 100, "n2": 100, "n3": 0, "n4": 0}, id="preferred affinity by zone"),
    pytest.param(term(pod("p"), "preferred-anti", HOST, "web", weight=5),
                 {"n1": [pod("w1", "web")]},
                 {"n1": 0, "n2": 100, "n3": 100, "n4": 100}, id="preferred anti-affinity"),
    pytest.param(term(term(pod("p"), "preferred", "zone", "db", weight=10),
                      "preferred-anti", HOST, "web", weight=5),
                 {"n1": [pod("db1", "db"), pod("db2", "db")], "n2": [pod("w", "web")],
                  "n3": [pod("db3", "db")]},
                 # raw n1=20, n2=15, n3=10, n4=0 -> 100*(s-0)/20
                 {"n1": 100, "n2": 75, "n3": 50, "n4": 0}, id="weights add up per domain"),
    pytest.param(pod("p", "web"),
                 {"n3": [term(pod("e", "db"), "preferred-anti", "zone", "web", weight=7)]},
                 {"n1": 100, "n2": 100, "n3": 0, "n4": 100},
                 id="existing pod's preferred anti-affinity"),
    pytest.param(pod("p", "web"),
                 {"n3": [term(pod("e", "db"), "preferred", "zone", "web", weight=7)]},
                 {"n1": 0, "n2": 0, "n3": 100, "n4": 0},
                 id="existing pod's preferred affinity"),
    pytest.param(pod("p", "web"),
                 {"n4": [term(pod("e", "db"), "affinity", "zone", "web")]},
                 {"n1": 0, "n2": 0, "n3": 0, "n4": 100},
                 id="existing pod's required affinity with hardPodAffinityWeight"),
    pytest.param(pod("p", "api"),
                 {"n4": [term(pod("e", "db"), "affinity", "zone", "web")]},
                 {"n1": 0, "n2": 0, "n3": 0, "n4": 0}, id="existing terms not matching"),
    # raw: n1,n2 = -5, n3 = +3, n4 = +10: 100*(s+5)/15 -> 0, 0, 53, 100
    pytest.param(term(term(pod("p", "web"), "preferred-anti", "zone", "db", weight=5),
                      "preferred", HOST, "cache", weight=10),
                 {"n1": [pod("d", "db")], "n4": [pod("c", "cache")],
                  "n3": [term(pod("e", "x"), "preferred", "zone", "web", weight=3)]},
                 {"n1": 0, "n2": 0, "n3": 53, "n4": 100}, id="negative scores, float truncation"),
    pytest.param(term(pod("p"), "preferred", "zone", "db", weight=10), {},
                 {"n1": 0, "n2": 0, "n3": 0, "n4": 0}, id="nothing matches: all 0"),
    pytest.param(term(pod("p"), "preferred", "zone", "db", weight=10,
                      namespace_selector={"matchLabels": {"team": "y"}}),
                 {"n3": [pod("d", "db", namespace="other")], "n1": [pod("d", "db")]},
                 {"n1": 0, "n2": 0, "n3": 100, "n4": 0}, id="namespaceSelector in scoring"),
])
def test_score(incoming: Obj, pods: dict[str, list[Obj]], expected: dict[str, int]) -> None:
    assert scores(incoming, pods) == expected


def test_score_normalizes_over_feasible_nodes_only() -> None:
    pods = {"n1": [pod("d1", "db"), pod("d2", "db")], "n3": [pod("d3", "db")]}
    incoming = term(pod("p"), "preferred", HOST, "db", weight=10)
    # raw n1=20, n3=10, n4=0; without n1 the max is 10.
    assert scores(incoming, pods, ["n3", "n4"]) == {"n3": 100, "n4": 0}


def test_hard_pod_affinity_weight_option() -> None:
    pods = {"n4": [term(pod("e", "db"), "affinity", "zone", "web")],
            "n1": [term(pod("f", "db"), "preferred", "zone", "web", weight=2)]}
    # weight 1: raw n4=1, n1=n2=2 -> n4 = 50; weight 10: n4 = 10 -> n1 = 20.
    assert scores(pod("p", "web"), pods) == {"n1": 100, "n2": 100, "n3": 0, "n4": 50}
    heavy = InterPodAffinity(hard_pod_affinity_weight=10)
    assert scores(pod("p", "web"), pods, plugin=heavy) == {"n1": 20, "n2": 20, "n3": 0,
                                                          "n4": 100}
    off = InterPodAffinity(hard_pod_affinity_weight=0)
    assert scores(pod("p", "web"), pods, plugin=off) == {"n1": 100, "n2": 100, "n3": 0, "n4": 0}
    with pytest.raises(ValueError, match="hard_pod_affinity_weight"):
        InterPodAffinity(hard_pod_affinity_weight=101)


def test_ignore_preferred_terms_of_existing_pods() -> None:
    pods = {"n3": [term(pod("e", "db"), "preferred", "zone", "web", weight=7)]}
    plugin = InterPodAffinity(ignore_preferred_terms_of_existing_pods=True)
    assert scores(pod("p", "web"), pods, plugin=plugin) == {"n1": 0, "n2": 0, "n3": 0, "n4": 0}
    # With preferred terms of its own, existing pods' terms count again.
    incoming = term(pod("p", "web"), "preferred", "zone", "nothing", weight=1)
    assert scores(incoming, pods, plugin=plugin) == {"n1": 0, "n2": 0, "n3": 100, "n4": 0}

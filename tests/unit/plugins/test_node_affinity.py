"""NodeAffinity: nodeSelector and required node affinity (filter), preferred terms (score)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from pyscheduler.framework.interface import CycleContext
from pyscheduler.framework.pod import NodeSelectorRequirement, NodeSelectorTerm
from pyscheduler.plugins.node_affinity import (
    ERR_REASON_CONFLICT,
    ERR_REASON_POD,
    ERR_REASON_PREFILTER,
    NAME,
    NodeAffinity,
    parse_int64,
)
from tests.unit.plugins.builders import (
    PodBuilder,
    context,
    expr,
    field,
    make_node,
    make_pod,
    outcome,
    rows,
    scores,
)

ALL = ("n1", "n2", "n3", "n4")


def cluster(pod: PodBuilder) -> CycleContext:
    return context(pod.obj(), [
        make_node("n1").labels({"zone": "a", "tier": "web", "num": "5"}).obj(),
        make_node("n2").labels({"zone": "b", "num": "10"}).obj(),
        make_node("n3").labels({"tier": "db", "num": "x1"}).obj(),
        make_node("n4").obj(),
    ])


@pytest.mark.parametrize(("pod", "passing"), [
    pytest.param(make_pod().node_selector(zone="a"), {"n1"}, id="nodeSelector label"),
    pytest.param(make_pod().node_selector(zone="a", tier="web"), {"n1"},
                 id="nodeSelector needs every label"),
    pytest.param(make_pod().node_selector(zone="a", tier="db"), set(),
                 id="nodeSelector with one label off matches nothing"),
    pytest.param(make_pod().node_selector(tier=""), set(),
                 id="nodeSelector empty value needs the label present"),
    pytest.param(make_pod().node_affinity_in("zone", "a", "b"), {"n1", "n2"}, id="In"),
    pytest.param(make_pod().node_affinity_not_in("zone", "a"), {"n2", "n3", "n4"},
                 id="NotIn matches nodes without the label"),
    pytest.param(make_pod().required_term(expr("tier", "Exists")), {"n1", "n3"}, id="Exists"),
    pytest.param(make_pod().required_term(expr("tier", "DoesNotExist")), {"n2", "n4"},
                 id="DoesNotExist"),
    pytest.param(make_pod().required_term(expr("num", "Gt", "5")), {"n2"},
                 id="Gt compares integers"),
    pytest.param(make_pod().required_term(expr("num", "Lt", "6")), {"n1"},
                 id="Lt compares integers not strings"),
    pytest.param(make_pod().required_term(expr("num", "Gt", "-100")), {"n1", "n2"},
                 id="Gt skips labels that are not integers"),
    pytest.param(make_pod().required_term(expr("zone", "In", "a", "b"), expr("num", "Gt", "7")),
                 {"n2"}, id="requirements of a term are ANDed"),
    pytest.param(make_pod().node_affinity_in("zone", "a").node_affinity_in("tier", "db"),
                 {"n1", "n3"}, id="terms are ORed"),
    pytest.param(make_pod().node_selector(zone="a").node_affinity_in("tier", "db"), set(),
                 id="nodeSelector and affinity must both match"),
    pytest.param(make_pod().required_term(), set(), id="empty term matches nothing"),
    pytest.param(make_pod().required_term().node_affinity_in("zone", "b"), {"n2"},
                 id="empty term is skipped among others"),
    pytest.param(make_pod().required_term(fields=[field("NotIn", "n3")]), {"n1", "n2", "n4"},
                 id="matchFields NotIn metadata.name"),
    pytest.param(make_pod().required_term(expr("tier", "Exists"), fields=[field("NotIn", "n3")]),
                 {"n1"}, id="matchFields and matchExpressions are ANDed"),
    # Pod validation lets any string through as a value; kube's selector parsing refuses one
    # that is not a valid label value and the term then matches no node, even with NotIn.
    pytest.param(make_pod().required_term(expr("zone", "NotIn", "not a label value!")), set(),
                 id="NotIn with an invalid label value matches nothing"),
    pytest.param(make_pod().required_term(expr("zone", "In", "a", "-bad-")), set(),
                 id="In with an invalid label value matches nothing"),
    pytest.param(make_pod().required_term(expr("zone", "NotIn", "x" * 64))
                 .node_affinity_in("zone", "b"), {"n2"},
                 id="a term with a too-long value is skipped among others"),
])
def test_filter(pod: PodBuilder, passing: set[str]) -> None:
    ctx = cluster(pod)
    want = {n: [] if n in passing else [(ERR_REASON_POD, True)] for n in ALL}
    assert outcome(NodeAffinity().filter(ctx), ctx.table) == want


@pytest.mark.parametrize(("pod", "want"), [
    pytest.param(make_pod().required_term(fields=[field("In", "n3")]),
                 {"n3": [], "n1": [(ERR_REASON_PREFILTER, True)],
                  "n2": [(ERR_REASON_PREFILTER, True)], "n4": [(ERR_REASON_PREFILTER, True)]},
                 id="pinned node name: other nodes are reported as filtered out up front"),
    pytest.param(make_pod().required_term(expr("zone", "In", "b"), fields=[field("In", "n3")]),
                 {"n3": [(ERR_REASON_POD, True)], "n1": [(ERR_REASON_PREFILTER, True)],
                  "n2": [(ERR_REASON_PREFILTER, True)], "n4": [(ERR_REASON_PREFILTER, True)]},
                 id="pinned node that fails the labels reports the affinity reason"),
    pytest.param(make_pod().required_term(fields=[field("In", "n1")])
                 .node_affinity_in("zone", "b"),
                 {"n1": [], "n2": [], "n3": [(ERR_REASON_POD, True)],
                  "n4": [(ERR_REASON_POD, True)]},
                 id="a term without a pinned name keeps every node a candidate"),
    pytest.param(make_pod().required_term(fields=[field("In", "n1"), field("In", "n2")]),
                 {n: [(ERR_REASON_CONFLICT, True)] for n in ALL},
                 id="conflicting pinned names fail the pod everywhere"),
    pytest.param(make_pod().required_term(fields=[field("In", "gone")]),
                 {n: [(ERR_REASON_PREFILTER, True)] for n in ALL},
                 id="pinned unknown node"),
])
def test_filter_pinned_node_names(pod: PodBuilder,
                                  want: dict[str, list[tuple[str, bool]]]) -> None:
    ctx = cluster(pod)
    assert outcome(NodeAffinity().filter(ctx), ctx.table) == want


def test_unparseable_requirement_makes_its_term_match_nothing() -> None:
    ctx = cluster(make_pod().node_affinity_in("zone", "b"))
    bad = NodeSelectorTerm((NodeSelectorRequirement("num", "Gt", ("1_0",)),), ())
    ctx.pod = dataclasses.replace(ctx.pod, required_terms=(*ctx.pod.required_terms, bad))
    got = outcome(NodeAffinity().filter(ctx), ctx.table)
    assert [n for n, reasons in got.items() if not reasons] == ["n2"]


def test_does_not_apply_without_selector_or_required_terms() -> None:
    ctx = cluster(make_pod().preferred_term(1, expr("zone", "In", "a")))
    assert NodeAffinity().filter(ctx).passed is None


def test_result_is_not_a_view_of_the_label_index() -> None:
    ctx = cluster(make_pod().node_selector(zone="a"))
    result = NodeAffinity().filter(ctx)
    assert result.passed is not None
    result.passed[:] = False
    assert ctx.table.label_mask("zone", "a")[0]


@pytest.mark.parametrize(("pod", "scored", "want"), [
    pytest.param(make_pod(), ALL, {n: 0 for n in ALL}, id="no preferred terms scores zero"),
    pytest.param(make_pod().preferred_term(2, expr("zone", "In", "a"))
                 .preferred_term(6, expr("num", "Gt", "5")), ALL,
                 {"n1": 33, "n2": 100, "n3": 0, "n4": 0},
                 id="matching weights add up, the best node gets 100"),
    pytest.param(make_pod().preferred_term(2, expr("zone", "In", "a"))
                 .preferred_term(6, expr("num", "Gt", "5")), ("n1", "n3", "n4"),
                 {"n1": 100, "n3": 0, "n4": 0},
                 id="normalized over the scored nodes only"),
    pytest.param(make_pod().preferred_term(3, expr("tier", "Exists"))
                 .preferred_term(4, expr("tier", "In", "web")), ALL,
                 {"n1": 100, "n2": 0, "n3": 42, "n4": 0},
                 id="integer arithmetic truncates"),
    pytest.param(make_pod().preferred_term(5, expr("zone", "In", "z")), ALL,
                 {n: 0 for n in ALL}, id="nothing matches, all zero"),
    pytest.param(make_pod().preferred_term(5).preferred_term(1, expr("zone", "In", "b")), ALL,
                 {"n1": 0, "n2": 100, "n3": 0, "n4": 0}, id="empty preference matches nothing"),
    pytest.param(make_pod().preferred_term(1, fields=[field("In", "n4")]), ALL,
                 {"n1": 0, "n2": 0, "n3": 0, "n4": 100}, id="preferred matchFields"),
])
def test_score(pod: PodBuilder, scored: tuple[str, ...], want: dict[str, int]) -> None:
    ctx = cluster(pod)
    feasible = rows(ctx.table, scored)
    got = NodeAffinity().score(ctx, feasible)
    assert scores(got, ctx.table, feasible) == want
    assert ((got >= 0) & (got <= 100)).all()  # rows not scored: ignored, but in range


@pytest.mark.parametrize(("text", "want"), [
    ("10", 10), ("+3", 3), ("-7", -7), ("007", 7), ("9223372036854775807", 2**63 - 1),
    ("9223372036854775808", None), ("1_0", None), (" 1", None), ("1.0", None), ("", None),
    ("x1", None),
])
def test_parse_int64_follows_go(text: str, want: int | None) -> None:
    assert parse_int64(text) == want


def test_name() -> None:
    assert NAME == NodeAffinity.name == "NodeAffinity"


def test_holes_are_well_defined() -> None:
    ctx = context(make_pod().node_affinity_not_in("zone", "a").obj(),
                  [make_node("x").label("zone", "b").obj(), make_node("y").obj()],
                  removed=["x"])
    result = NodeAffinity().filter(ctx)
    assert result.passed is not None and len(result.passed) == ctx.n
    assert np.array_equal(ctx.nodes(), [False, True])

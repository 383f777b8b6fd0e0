"""TaintToleration: untolerated NoSchedule/NoExecute taints filter; PreferNoSchedule scores."""

from __future__ import annotations

import numpy as np
import pytest

from pyscheduler.framework.interface import CycleContext

from pyscheduler.framework.nodetable import RowView, node_info
from pyscheduler.plugins.taint_toleration import NAME, TaintToleration
from tests.unit.plugins.builders import (
    NodeBuilder,
    PodBuilder,
    context,
    make_node,
    make_pod,
    outcome,
    rows,
    scores,
)


def untolerated(key: str, value: str = "") -> list[tuple[str, bool]]:
    return [(f"node(s) had untolerated taint {{{key}: {value}}}", True)]


@pytest.mark.parametrize(("pod", "node", "want"), [
    pytest.param(make_pod(), make_node("n1"), [], id="no taints"),
    pytest.param(make_pod(), make_node("n1").taint("dedicated", "infra"),
                 untolerated("dedicated", "infra"), id="untolerated NoSchedule taint"),
    pytest.param(make_pod(), make_node("n1").taint("dedicated", "infra", "NoExecute"),
                 untolerated("dedicated", "infra"), id="untolerated NoExecute taint"),
    pytest.param(make_pod(), make_node("n1").taint("dedicated", effect="NoSchedule"),
                 untolerated("dedicated"), id="empty value prints as an empty value"),
    pytest.param(make_pod(), make_node("n1").taint("dedicated", "infra", "PreferNoSchedule"),
                 [], id="PreferNoSchedule never filters"),
    pytest.param(make_pod().toleration("dedicated", "infra", effect="NoSchedule"),
                 make_node("n1").taint("dedicated", "infra"), [],
                 id="tolerates NoSchedule taint"),
    pytest.param(make_pod().toleration("dedicated", "infra"),
                 make_node("n1").taint("dedicated", "infra", "NoExecute"), [],
                 id="toleration without effect tolerates every effect"),
    pytest.param(make_pod().toleration("dedicated", effect="NoSchedule"),
                 make_node("n1").taint("dedicated", "anything"), [],
                 id="Exists tolerates any value"),
    pytest.param(make_pod().toleration(), make_node("n1").taint("a", "1").taint("b", "2"), [],
                 id="empty key with Exists tolerates every taint"),
    pytest.param(make_pod().toleration("dedicated", "other", effect="NoSchedule"),
                 make_node("n1").taint("dedicated", "infra"), untolerated("dedicated", "infra"),
                 id="Equal needs the same value"),
    pytest.param(make_pod().toleration("dedicated", "infra", effect="NoExecute"),
                 make_node("n1").taint("dedicated", "infra"), untolerated("dedicated", "infra"),
                 id="toleration for another effect does not help"),
    pytest.param(make_pod().toleration("a", "1", effect="NoSchedule"),
                 make_node("n1").taint("a", "1").taint("b", "2"), untolerated("b", "2"),
                 id="every taint must be tolerated"),
    pytest.param(make_pod(), make_node("n1").taint("a", "1").taint("b", "2"),
                 untolerated("a", "1"), id="first untolerated taint is reported"),
    pytest.param(make_pod().toleration("virtual-kubelet.io/provider", effect="NoSchedule"),
                 make_node("n1").taint("virtual-kubelet.io/provider", "aliyun"), [],
                 id="tolerates the virtual node taint"),
])
def test_filter(pod: PodBuilder, node: NodeBuilder, want: list[tuple[str, bool]]) -> None:
    ctx = context(pod.obj(), [node.obj(), make_node("clean").obj()])
    got = outcome(TaintToleration().filter(ctx), ctx.table)
    assert got == {"n1": want, "clean": []}


def test_each_failing_node_is_charged_once() -> None:
    nodes = [make_node("n1").taint("a", "1").obj(),
             make_node("n2").taint("a", "1").taint("b", "2").obj(),
             make_node("n3").taint("b", "2").obj(),
             make_node("n4").taint("a", "1", "NoSchedule").taint("a", "1", "NoExecute").obj()]
    ctx = context(make_pod().obj(), nodes)
    got = outcome(TaintToleration().filter(ctx), ctx.table)
    assert got == {"n1": untolerated("a", "1"), "n2": untolerated("a", "1"),
                   "n3": untolerated("b", "2"), "n4": untolerated("a", "1")}


def test_a_node_is_charged_its_own_first_untolerated_taint() -> None:
    # "dedicated" is indexed first (n0 brings it), but n1 lists "gpu" first: kube reports the
    # first untolerated taint of the node's own list.
    nodes = [make_node("n0").taint("dedicated", "", "NoExecute").obj(),
             make_node("n1").taint("gpu", "").taint("dedicated", "").obj()]
    ctx = context(make_pod().obj(), nodes)
    got = outcome(TaintToleration().filter(ctx), ctx.table)
    assert got == {"n0": untolerated("dedicated", ""), "n1": untolerated("gpu", "")}
    view = RowView(ctx.table, np.array([1]))
    result = TaintToleration().filter(CycleContext(ctx.pod, view, ctx.request))  # type: ignore[arg-type]
    assert [r.message for r in result.reasons] == ["node(s) had untolerated taint {gpu: }"]


def test_does_not_apply_when_everything_is_tolerated() -> None:
    nodes = [make_node("n1").taint("a", "1").obj(),
             make_node("n2").taint("b", "2", "PreferNoSchedule").obj()]
    ctx = context(make_pod().toleration("a").obj(), nodes)
    assert TaintToleration().filter(ctx).passed is None


def test_taint_removed_from_the_node_no_longer_filters() -> None:
    ctx = context(make_pod().obj(), [make_node("n1").taint("a", "1").obj()])
    ctx.table.set_node(node_info(make_node("n1").obj()))
    assert TaintToleration().filter(ctx).passed is None


def prefer(node: NodeBuilder, *taints: str) -> NodeBuilder:
    for key in taints:
        node.taint(key, "x", "PreferNoSchedule")
    return node


@pytest.mark.parametrize(("pod", "scored", "want"), [
    pytest.param(make_pod(), ("n0", "n1", "n2", "n3"), {"n0": 100, "n1": 67, "n2": 34, "n3": 0},
                 id="fewer intolerable taints score higher"),
    pytest.param(make_pod().toleration("a", "x", effect="PreferNoSchedule"),
                 ("n0", "n1", "n2", "n3"), {"n0": 100, "n1": 100, "n2": 50, "n3": 0},
                 id="PreferNoSchedule toleration removes the taint from the count"),
    pytest.param(make_pod().toleration("a", "x"), ("n0", "n1", "n2", "n3"),
                 {"n0": 100, "n1": 100, "n2": 50, "n3": 0},
                 id="toleration without effect counts"),
    pytest.param(make_pod().toleration("a", "x", effect="NoSchedule"), ("n0", "n1", "n2", "n3"),
                 {"n0": 100, "n1": 67, "n2": 34, "n3": 0},
                 id="NoSchedule toleration does not count for scoring"),
    pytest.param(make_pod().toleration(), ("n0", "n1", "n2", "n3"),
                 {"n0": 100, "n1": 100, "n2": 100, "n3": 100},
                 id="everything tolerated scores 100 everywhere"),
    pytest.param(make_pod(), ("n0", "n1"), {"n0": 100, "n1": 0},
                 id="normalized over the scored nodes only"),
])
def test_score(pod: PodBuilder, scored: tuple[str, ...], want: dict[str, int]) -> None:
    nodes = [prefer(make_node("n0")), prefer(make_node("n1"), "a"),
             prefer(make_node("n2"), "a", "b"),
             prefer(make_node("n3"), "a", "b", "c").taint("hard", "1", "NoSchedule")]
    ctx = context(pod.obj(), [n.obj() for n in nodes])
    feasible = rows(ctx.table, scored)
    got = TaintToleration().score(ctx, feasible)
    assert scores(got, ctx.table, feasible) == want
    assert ((got >= 0) & (got <= 100)).all()  # rows not scored: ignored, but in range


def test_name() -> None:
    assert NAME == TaintToleration.name == "TaintToleration"

"""NodeUnschedulable: cordoned nodes, and the pods that tolerate cordons."""

from __future__ import annotations

import dataclasses

import pytest

from pyscheduler.plugins.node_unschedulable import (
    ERR_REASON_UNSCHEDULABLE,
    NAME,
    NodeUnschedulable,
)
from tests.unit.plugins.builders import (
    NodeBuilder,
    PodBuilder,
    context,
    make_node,
    make_pod,
    outcome,
)

CORDONED = [(ERR_REASON_UNSCHEDULABLE, True)]


@pytest.mark.parametrize(("pod", "node", "want"), [
    pytest.param(make_pod(), make_node("n1"), [], id="schedulable node passes"),
    pytest.param(make_pod(), make_node("n1").unschedulable(False), [],
                 id="unschedulable false passes"),
    pytest.param(make_pod(), make_node("n1").unschedulable(), CORDONED,
                 id="cordoned node fails"),
    pytest.param(make_pod().toleration("node.kubernetes.io/unschedulable", effect="NoSchedule"),
                 make_node("n1").unschedulable(), [],
                 id="tolerates the unschedulable taint with Exists"),
    pytest.param(make_pod().toleration("node.kubernetes.io/unschedulable", ""),
                 make_node("n1").unschedulable(), [],
                 id="Equal toleration with the empty value and any effect"),
    pytest.param(make_pod().toleration(), make_node("n1").unschedulable(), [],
                 id="empty-key Exists toleration tolerates everything"),
    pytest.param(make_pod().toleration("node.kubernetes.io/unschedulable", effect="NoExecute"),
                 make_node("n1").unschedulable(), CORDONED,
                 id="toleration for another effect does not help"),
    pytest.param(make_pod().toleration("node.kubernetes.io/unschedulable", "true"),
                 make_node("n1").unschedulable(), CORDONED,
                 id="Equal toleration with another value does not help"),
    pytest.param(make_pod().toleration("other", effect="NoSchedule"),
                 make_node("n1").unschedulable(), CORDONED,
                 id="toleration for another key does not help"),
])
def test_filter(pod: PodBuilder, node: NodeBuilder, want: list[tuple[str, bool]]) -> None:
    ctx = context(pod.obj(), [node.obj(), make_node("other").obj()])
    got = outcome(NodeUnschedulable().filter(ctx), ctx.table)
    assert got == {"n1": want, "other": []}


def test_does_not_apply_without_cordoned_nodes() -> None:
    ctx = context(make_pod().obj(), [make_node("a").obj(), make_node("b").obj()])
    assert NodeUnschedulable().filter(ctx).passed is None


def test_does_not_apply_when_the_pod_tolerates_cordons() -> None:
    pod = make_pod().toleration("node.kubernetes.io/unschedulable", effect="NoSchedule")
    ctx = context(pod.obj(), [make_node("a").unschedulable().obj()])
    assert NodeUnschedulable().filter(ctx).passed is None


def test_result_does_not_alias_the_table() -> None:
    ctx = context(make_pod().obj(), [make_node("a").unschedulable().obj()])
    result = NodeUnschedulable().filter(ctx)
    info = ctx.table.infos[0]
    assert info is not None
    ctx.table.set_node(dataclasses.replace(info, unschedulable=False))  # uncordoned later
    assert result.passed is not None and not result.passed[0]
    assert result.reasons[0].failed[0]


def test_name() -> None:
    assert NAME == NodeUnschedulable.name == "NodeUnschedulable"

"""NodeName: a pod naming its node fits only there."""

from __future__ import annotations

import pytest

from pyscheduler.plugins.node_name import ERR_REASON, NAME, NodeName
from tests.unit.plugins.builders import PodBuilder, context, make_node, make_pod, outcome

MISMATCH = [(ERR_REASON, True)]


@pytest.mark.parametrize(("pod", "want"), [
    pytest.param(make_pod().node_name("n1"), {"n1": [], "n2": MISMATCH, "n3": MISMATCH},
                 id="only the named node passes"),
    pytest.param(make_pod().node_name("gone"),
                 {"n1": MISMATCH, "n2": MISMATCH, "n3": MISMATCH},
                 id="unknown node name fails everywhere"),
])
def test_filter(pod: PodBuilder, want: dict[str, list[tuple[str, bool]]]) -> None:
    ctx = context(pod.obj(), [make_node(n).obj() for n in ("n1", "n2", "n3")])
    assert outcome(NodeName().filter(ctx), ctx.table) == want


def test_does_not_apply_without_node_name() -> None:
    ctx = context(make_pod().obj(), [make_node("n1").obj()])
    assert NodeName().filter(ctx).passed is None


def test_removed_node_is_not_matched() -> None:
    ctx = context(make_pod().node_name("n2").obj(),
                  [make_node(n).obj() for n in ("n1", "n2")], removed=["n2"])
    result = NodeName().filter(ctx)
    assert result.passed is not None and not result.passed.any()


def test_name() -> None:
    assert NAME == NodeName.name == "NodeName"

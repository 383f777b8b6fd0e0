"""The status values extension points answer, and the values they exchange, as kube's
framework defines them (``interface.go`` and its tests)."""

from __future__ import annotations

import pytest

from pyscheduler.framework.interface import ActionType, ClusterEvent
from pyscheduler.framework.status import (
    SUCCESS,
    Code,
    PreFilterResult,
    Status,
    as_status,
)


def test_codes_are_kubes_in_kubes_order() -> None:
    assert [str(c) for c in Code] == ["Success", "Error", "Unschedulable",
                                      "UnschedulableAndUnresolvable", "Wait", "Skip",
                                      "Pending"]
    assert [int(c) for c in Code] == list(range(7))


@pytest.mark.parametrize("code,success,rejected,waiting,skipped,failed", [
    (Code.SUCCESS, True, False, False, False, False),
    (Code.ERROR, False, False, False, False, True),
    (Code.UNSCHEDULABLE, False, True, False, False, False),
    (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, False, True, False, False, False),
    (Code.WAIT, False, False, True, False, False),
    (Code.SKIP, False, False, False, True, False),
    (Code.PENDING, False, True, False, False, False),
])
def test_what_each_code_means(code: Code, success: bool, rejected: bool, waiting: bool,
                              skipped: bool, failed: bool) -> None:
    status = Status.of(code, "why")
    assert (status.success, status.rejected, status.waiting, status.skipped, status.failed) == (
        success, rejected, waiting, skipped, failed)
    # kube's AsError: nothing for what is not a failure of the pod's attempt.
    assert (status.as_error() is None) == (code in (Code.SUCCESS, Code.WAIT, Code.SKIP))


def test_the_message_joins_the_reasons_after_the_fault() -> None:
    assert Status.of(Code.UNSCHEDULABLE, "a", "b").message == "a, b"
    assert str(Status.of(Code.UNSCHEDULABLE, "a").with_reason("b")) == "a, b"
    fault = as_status(ValueError("boom")).with_reason("while reading")
    assert (fault.code, fault.message) == (Code.ERROR, "boom, while reading")
    assert isinstance(fault.as_error(), ValueError)
    plain = Status.of(Code.UNSCHEDULABLE, "no room").as_error()
    assert isinstance(plain, RuntimeError) and str(plain) == "no room"
    assert SUCCESS.success and SUCCESS.message == ""


def test_the_plugin_is_recorded_without_changing_the_verdict() -> None:
    status = Status.of(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "x").with_plugin("NodeAffinity")
    assert (status.code, status.reasons, status.plugin) == (
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("x",), "NodeAffinity")
    assert status == Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("x",), "NodeAffinity")
    assert status != Status.of(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "x")


@pytest.mark.parametrize("a,b,merged", [
    (None, None, None),
    (None, {"n1", "n2"}, {"n1", "n2"}),
    ({"n1"}, None, {"n1"}),
    ({"n1", "n2"}, {"n2", "n3"}, {"n2"}),
    ({"n1"}, {"n2"}, set()),
], ids=["all-all", "all-some", "some-all", "intersect", "disjoint"])
def test_prefilter_results_intersect(a: set[str] | None, b: set[str] | None,
                                     merged: set[str] | None) -> None:
    """kube's ``PreFilterResult.Merge``: None is every node; two sets intersect (an empty set
    is no node at all, not every node)."""
    left = PreFilterResult(frozenset(a) if a is not None else None)
    right = PreFilterResult(frozenset(b) if b is not None else None)
    result = left.merge(right)
    assert result.all_nodes == (merged is None)
    assert result.node_names == (frozenset(merged) if merged is not None else None)
    assert left.merge(None) == left


def test_a_registered_event_covers_the_actions_it_names() -> None:
    labels = ClusterEvent("Node", ActionType.ADD | ActionType.UPDATE_NODE_LABEL)
    assert labels.matches(ClusterEvent("Node", ActionType.UPDATE_NODE_LABEL))
    assert labels.matches(ClusterEvent("Node", ActionType.ADD))
    assert not labels.matches(ClusterEvent("Node", ActionType.UPDATE_NODE_TAINT))
    assert not labels.matches(ClusterEvent("Pod", ActionType.ADD))
    assert ClusterEvent("*", ActionType.ALL).matches(ClusterEvent("Pod", ActionType.DELETE))
    assert ActionType.UPDATE_POD_LABEL in ActionType.UPDATE
    assert ActionType.ADD not in ActionType.UPDATE

"""VolumeRestrictions: ReadWriteOncePod claims, one pod at a time.

The cases of kube's ``volume_restrictions_test.go`` ``TestAccessModeConflicts`` with kube's
fixtures and messages (its in-tree disk conflict cases are not implemented, by design), then
how the verdict follows the pods using the claim (preemption's dry run removes them).
"""

from __future__ import annotations

from typing import Any

import pytest

from pyscheduler.plugins.volume_restrictions import ERR_REASON_RWOP, NAME, VolumeRestrictions
from tests.unit.plugins.builders import (
    PodBuilder,
    context,
    make_node,
    make_pod,
    make_pvc,
    outcome,
)

Obj = dict[str, Any]
CONFLICT = [(ERR_REASON_RWOP, False)]

RWOP_1 = make_pvc("claim-with-rwop-1").access("ReadWriteOncePod").obj()
RWOP_2 = make_pvc("claim-with-rwop-2").access("ReadWriteOncePod").obj()
RWX = make_pvc("claim-with-rwx").access("ReadWriteMany").obj()


def pod(name: str, *claims: str) -> PodBuilder:
    out = make_pod(name)
    for claim in claims:
        out.pvc(claim)
    return out


with_one_pvc = pod("pod-with-one-pvc", "claim-with-rwop-1")
with_two_pvcs = pod("pod-with-two-pvcs", "claim-with-rwop-1", "claim-with-rwop-2")
with_one_conflict = pod("pod-with-one-conflict", "claim-with-rwop-1")
with_two_conflicts = pod("pod-with-two-conflicts", "claim-with-rwop-1", "claim-with-rwop-2")
with_rwx = pod("pod-with-rwx", "claim-with-rwx")


@pytest.mark.parametrize(("incoming", "existing", "claims", "want"), [
    pytest.param(make_pod(), [], [], [], id="nothing"),
    pytest.param(with_one_pvc, [], [],
                 [('persistentvolumeclaim "claim-with-rwop-1" not found', True)],
                 id="failed to get PVC"),
    pytest.param(with_one_pvc, [with_rwx], [RWOP_1, RWX], [], id="no access mode conflict"),
    pytest.param(with_one_conflict, [with_one_pvc, with_rwx], [RWOP_1, RWX], CONFLICT,
                 id="access mode conflict, unschedulable"),
    pytest.param(with_two_conflicts, [with_two_pvcs, with_rwx], [RWOP_1, RWOP_2, RWX], CONFLICT,
                 id="two conflicts, unschedulable"),
])
def test_kube_access_mode_conflicts(incoming: PodBuilder, existing: list[PodBuilder],
                                    claims: list[Obj], want: list[tuple[str, bool]]) -> None:
    ctx = context(incoming.obj(), [make_node("node-1").obj()],
                  pods={"node-1": [p.obj() for p in existing]}, storage=claims)
    assert outcome(VolumeRestrictions().filter(ctx), ctx.table) == {"node-1": want}


def test_a_claim_in_use_anywhere_fails_every_node() -> None:
    """kube's IsPVCUsedByPods looks at the whole cluster: the node of the user is not special."""
    ctx = context(with_one_conflict.obj(), [make_node(n).obj() for n in ("a", "b", "c")],
                  pods={"b": [with_one_pvc.obj()]}, storage=[RWOP_1])
    assert outcome(VolumeRestrictions().filter(ctx), ctx.table) == \
        {"a": CONFLICT, "b": CONFLICT, "c": CONFLICT}


def test_the_claim_is_free_once_its_user_is_gone() -> None:
    ctx = context(with_one_conflict.obj(), [make_node("a").obj()],
                  pods={"a": [with_one_pvc.obj()]}, storage=[RWOP_1])
    assert outcome(VolumeRestrictions().filter(ctx), ctx.table) == {"a": CONFLICT}
    ctx.table.remove_pod(0, "uid-default-pod-with-one-pvc")
    assert VolumeRestrictions().filter(ctx).passed is None


@pytest.mark.parametrize(("modes", "want"), [
    pytest.param(("ReadWriteOnce",), [], id="ReadWriteOnce is per node, not this plugin's"),
    pytest.param(("ReadOnlyMany",), [], id="ReadOnlyMany"),
    pytest.param(("ReadWriteOncePod",), CONFLICT, id="ReadWriteOncePod"),
])
def test_only_read_write_once_pod_is_exclusive(modes: tuple[str, ...],
                                               want: list[tuple[str, bool]]) -> None:
    claim = make_pvc("shared").access(*modes).obj()
    ctx = context(pod("new", "shared").obj(), [make_node("a").obj()],
                  pods={"a": [pod("old", "shared").obj()]}, storage=[claim])
    assert outcome(VolumeRestrictions().filter(ctx), ctx.table) == {"a": want}


def test_a_missing_claim_is_reported_before_a_conflict() -> None:
    """kube's PreFilter reads every claim before it counts users."""
    ctx = context(pod("new", "claim-with-rwop-1", "missing").obj(), [make_node("a").obj()],
                  pods={"a": [with_one_pvc.obj()]}, storage=[RWOP_1])
    assert outcome(VolumeRestrictions().filter(ctx), ctx.table) == \
        {"a": [('persistentvolumeclaim "missing" not found', True)]}


def test_ephemeral_volumes_are_not_looked_at() -> None:
    incoming = make_pod("web").ephemeral("scratch").obj()
    ctx = context(incoming, [make_node("a").obj()], storage=[])
    assert VolumeRestrictions().filter(ctx).passed is None


def test_name() -> None:
    assert NAME == VolumeRestrictions.name == "VolumeRestrictions"


def test_a_missing_claim_is_a_prefilter_rejection_a_conflict_is_not() -> None:
    ctx = context(pod("new", "missing").obj(), [make_node("a").obj()], storage=[])
    [reason] = VolumeRestrictions().filter(ctx).reasons
    assert reason.prefilter and reason.unresolvable
    ctx = context(with_one_conflict.obj(), [make_node("a").obj()],
                  pods={"a": [with_one_pvc.obj()]}, storage=[RWOP_1])
    [reason] = VolumeRestrictions().filter(ctx).reasons
    assert not reason.prefilter and not reason.unresolvable

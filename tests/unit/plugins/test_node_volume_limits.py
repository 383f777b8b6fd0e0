"""NodeVolumeLimits: CSI attach limits from CSINode.

The cases of kube's ``csi_test.go`` ``TestCSILimits`` with kube's fixtures and messages:
claims ``csi-<driver>-<i>`` bound to CSI volumes of that driver, ``csi-4`` pending with class
``csi-sc`` (provisioned by the first driver), ``csi-5`` without a class, ``csi-6`` naming a
volume that does not exist. Not covered, as not implemented: in-tree volumes migrated to CSI,
and ``VolumeAttachment`` objects counted towards the limit. Where kube's test uses a fake
lister (``persistentvolumeclaims "abc-xyz" not found``), the message is the real informer
lister's; kube's Error for an ephemeral claim the pod does not own is an unresolvable reason.
"""

from __future__ import annotations

from typing import Any

import pytest

from pyscheduler.plugins.node_volume_limits import ERR_REASON, NAME, NodeVolumeLimits
from tests.unit.plugins.builders import (
    PodBuilder,
    context,
    make_csinode,
    make_node,
    make_pod,
    make_pv,
    make_pvc,
    make_storage_class,
    outcome,
)

Obj = dict[str, Any]
EBS = "ebs.csi.aws.com"
GCE = "pd.csi.storage.gke.io"
NODE = "node-for-max-pd-test-1"
EXCEEDED = [(ERR_REASON, False)]
_count = iter(range(1_000_000))


def pvcs_pod(*claims: str, name: str = "") -> PodBuilder:
    """kube's ``st.MakePod().PVC(...)``: every pod a fresh name."""
    out = make_pod(name or f"pod-{next(_count)}")
    for claim in claims:
        out.pvc(claim)
    return out


def storage(*drivers: str) -> list[Obj]:
    """``getFakeCSIPVLister``, ``getFakeCSIPVCLister``, ``getFakeCSIStorageClassLister``."""
    out: list[Obj] = [make_storage_class("csi-sc", drivers[0], mode="Immediate")]
    for driver in drivers:
        for i in range(4):
            name = f"csi-{driver}-{i}"
            out.append(make_pv(name).csi(driver, name).obj())
            out.append(make_pvc(name).prebound(name).obj())
    out.append(make_pvc("csi-4").cls("csi-sc").obj())
    out.append(make_pvc("csi-5").obj())
    out.append(make_pvc("csi-6").cls("csi-sc").prebound("missing-in-action").obj())
    return out


def csinode(limit: int | None, *drivers: str) -> Obj:
    return make_csinode(NODE, {d: limit for d in drivers})


ephemeral_pod = make_pod("abc", "test").uid("12345").ephemeral("xyz")
ephemeral_claim = make_pvc("abc-xyz", "test").cls("csi-sc").owned_by(ephemeral_pod.obj()).obj()
conflicting_claim = make_pvc("abc-xyz", "test").cls("csi-sc").obj()
two_ephemeral_pod = make_pod("abc", "test").uid("12345II").ephemeral("x").ephemeral("y")
ephemeral_x = make_pvc("abc-x", "test").cls("csi-sc").owned_by(two_ephemeral_pod.obj()).obj()
ephemeral_y = make_pvc("abc-y", "test").cls("csi-sc").owned_by(two_ephemeral_pod.obj()).obj()


def config_secret(pod: PodBuilder) -> Obj:
    """The pod, with a ConfigMap and a Secret volume first."""
    obj = pod.obj()
    obj["spec"]["volumes"] = [{"name": "cm", "configMap": {"name": "cm"}},
                              {"name": "secret", "secret": {"secretName": "s"}},
                              *obj["spec"].get("volumes", [])]
    return obj


running = pvcs_pod(f"csi-{EBS}-3", name="running")
pending = pvcs_pod("csi-4", name="pending")
pending_too = pvcs_pod("csi-4", name="pending-too")
missing_pv = pvcs_pod("csi-6", name="missing-pv")
no_sc = pvcs_pod("csi-5", name="no-sc")
gce_two = pvcs_pod(f"csi-{GCE}-1", f"csi-{GCE}-2", name="gce-two")
ebs_one = pvcs_pod(f"csi-{EBS}-0", name="ebs-one")
ebs_two = pvcs_pod(f"csi-{EBS}-1", f"csi-{EBS}-2", name="ebs-two")


@pytest.mark.parametrize(("incoming", "existing", "extra", "limit", "drivers", "want"), [
    pytest.param(ebs_one, [running, ebs_two], [], 4, [EBS], [],
                 id="fits when node volume limit >= new pods CSI volume"),
    pytest.param(ebs_one, [running, ebs_two], [], 2, [EBS], EXCEEDED,
                 id="doesn't when node volume limit <= pods CSI volume"),
    pytest.param(ebs_one, [running, ebs_two], [], None, [EBS], [],
                 id="should when driver does not support volume limits"),
    pytest.param(ebs_one, [pending, ebs_two], [], 2, [EBS], EXCEEDED,
                 id="count pending PVCs towards volume limit <= pods CSI volume"),
    pytest.param(ebs_one, [pending, pending_too, ebs_two], [], 4, [EBS], [],
                 id="count multiple pending pvcs towards volume limit >= pods CSI volume"),
    pytest.param(ebs_one, [missing_pv, ebs_two], [], 2, [EBS], EXCEEDED,
                 id="should count PVCs with invalid PV name but valid SC"),
    pytest.param(ebs_one, [running, no_sc], [], 2, [EBS], [],
                 id="don't count pvcs with missing SC towards volume limit"),
    pytest.param(ebs_one, [gce_two, ebs_two], [], 2, [EBS, GCE], EXCEEDED,
                 id="count pvcs with the same type towards volume limit"),
    pytest.param(gce_two, [ebs_two, running], [], 2, [EBS, GCE], [],
                 id="don't count pvcs with different type towards volume limit"),
    pytest.param(ephemeral_pod, [], [], None, [EBS],
                 [('looking up PVC test/abc-xyz: persistentvolumeclaim "abc-xyz" not found',
                   True)], id="ephemeral volume missing"),
    pytest.param(ephemeral_pod, [], [conflicting_claim], None, [EBS],
                 [("PVC test/abc-xyz was not created for pod test/abc (pod is not owner)",
                   True)], id="ephemeral volume not owned"),
    pytest.param(ephemeral_pod, [], [ephemeral_claim], None, [EBS], [],
                 id="ephemeral volume unbound"),
    pytest.param(ephemeral_pod, [running, ebs_two], [ephemeral_claim], 2, [EBS], EXCEEDED,
                 id="ephemeral doesn't when node volume limit <= pods CSI volume"),
    pytest.param(ebs_one, [running, two_ephemeral_pod], [ephemeral_x, ephemeral_y], 2, [EBS],
                 EXCEEDED,
                 id="ephemeral doesn't when node volume limit <= pods ephemeral CSI volume"),
    pytest.param(ebs_one, [running, ephemeral_pod, ebs_two], [ephemeral_claim], 3, [EBS],
                 EXCEEDED, id="persistent doesn't when node volume limit <= pods ephemeral CSI "
                              "volume + persistent volume"),
    pytest.param(ebs_one, [running, ephemeral_pod, ebs_two], [ephemeral_claim], 5, [EBS], [],
                 id="persistent okay when node volume limit > pods ephemeral CSI volume + "
                    "persistent volume"),
    pytest.param(config_secret(make_pod("cm-secret")), [], [], 2, [EBS], [],
                 id="skip Filter when the pod only uses secrets and configmaps"),
    pytest.param(config_secret(pvcs_pod(f"csi-{EBS}-0")), [], [], 2, [EBS], [],
                 id="don't skip Filter when the pod has pvcs"),
    pytest.param(config_secret(make_pod("abc", "test").ephemeral("xyz")), [], [], None, [EBS],
                 [('looking up PVC test/abc-xyz: persistentvolumeclaim "abc-xyz" not found',
                   True)], id="don't skip Filter when the pod has ephemeral volumes"),
])
def test_kube_csi_limits(incoming: PodBuilder | Obj, existing: list[PodBuilder],
                         extra: list[Obj], limit: int | None, drivers: list[str],
                         want: list[tuple[str, bool]]) -> None:
    objects = [*storage(*drivers), *extra, csinode(limit, *drivers)]
    pod = incoming if isinstance(incoming, dict) else incoming.obj()
    ctx = context(pod, [make_node(NODE).obj()],
                  pods={NODE: [p.obj() for p in existing]}, storage=objects)
    assert outcome(NodeVolumeLimits().filter(ctx), ctx.table) == {NODE: want}


def test_limits_are_per_node() -> None:
    nodes = [make_node(n).obj() for n in ("small", "big", "bare")]
    objects = [*storage(EBS), make_csinode("small", {EBS: 2}), make_csinode("big", {EBS: 10})]
    ctx = context(ebs_one.obj(), nodes,
                  pods={"small": [running.obj(), ebs_two.obj()],
                        "big": [running.obj(), ebs_two.obj()],
                        "bare": [running.obj(), ebs_two.obj()]}, storage=objects)
    assert outcome(NodeVolumeLimits().filter(ctx), ctx.table) == \
        {"small": EXCEEDED, "big": [], "bare": []}


def test_a_volume_already_attached_does_not_count_again() -> None:
    objects = [*storage(EBS), csinode(2, EBS)]
    ctx = context(pvcs_pod(f"csi-{EBS}-1").obj(), [make_node(NODE).obj()],
                  pods={NODE: [ebs_two.obj()]}, storage=objects)
    assert outcome(NodeVolumeLimits().filter(ctx), ctx.table) == {NODE: []}


def test_a_new_node_of_no_claims_counts_only_the_new_volumes() -> None:
    objects = [*storage(EBS), csinode(1, EBS)]
    ctx = context(ebs_two.obj(), [make_node(NODE).obj()], storage=objects)
    assert outcome(NodeVolumeLimits().filter(ctx), ctx.table) == {NODE: EXCEEDED}


def test_non_csi_volumes_and_volumes_without_a_handle_do_not_count() -> None:
    plain = make_pv("plain").obj()  # hostPath
    no_handle = make_pv("no-handle").csi(EBS).obj()
    no_handle["spec"]["csi"]["volumeHandle"] = ""
    objects = [plain, no_handle, make_pvc("a").prebound("plain").obj(),
               make_pvc("b").prebound("no-handle").obj(), csinode(0, EBS)]
    ctx = context(pvcs_pod("a", "b").obj(), [make_node(NODE).obj()], storage=objects)
    assert NodeVolumeLimits().filter(ctx).passed is None


def test_limits_follow_csinode_changes() -> None:
    objects = [*storage(EBS), csinode(1, EBS)]
    ctx = context(ebs_two.obj(), [make_node(NODE).obj()], storage=objects)
    plugin = NodeVolumeLimits()
    assert outcome(plugin.filter(ctx), ctx.table) == {NODE: EXCEEDED}
    ctx.table.volumes.set_csinode(csinode(2, EBS))
    assert plugin.filter(ctx).passed is None


def test_name() -> None:
    assert NAME == NodeVolumeLimits.name == "NodeVolumeLimits"


def test_a_missing_claim_fails_every_node_in_filter() -> None:
    """kube's CSILimits reports a missing claim from Filter (node by node), not PreFilter."""
    ctx = context(pvcs_pod("absent").obj(), [make_node(NODE).obj()], storage=[])
    [reason] = NodeVolumeLimits().filter(ctx).reasons
    assert reason.unresolvable and not reason.prefilter

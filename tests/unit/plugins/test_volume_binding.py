"""VolumeBinding: claims bound, bindable or provisionable where the node is; the binding plan.

The cases of kube's ``volume_binding_test.go`` (``TestVolumeBinding``: its filter statuses) and
``binder_test.go`` (``TestFindPodVolumesWithoutProvisioning``, ``...WithProvisioning``,
``TestFindAssumeVolumes``), with kube's fixtures and messages, then ``FindMatchingVolume``'s
rules (component-helpers ``pv_helpers.go``) one at a time, and :func:`plan`.

kube's PreFilter failures (a claim missing, unbound immediate claims, ...) hold on every node;
here every node fails with that message.
"""

from __future__ import annotations

from typing import Any

import pytest

from pyscheduler.framework.interface import CycleContext
from pyscheduler.plugins.volume_binding import (
    BIND_CONFLICT,
    IMMEDIATE_UNBOUND,
    NAME,
    NODE_CONFLICT,
    PV_NOT_EXIST,
    BindingPlan,
    VolumeBinding,
    plan,
)
from tests.unit.plugins.builders import (
    PodBuilder,
    context,
    expr,
    field,
    make_node,
    make_pod,
    make_pv,
    make_pvc,
    make_storage_class,
    outcome,
)

Obj = dict[str, Any]
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"


def unresolvable(*messages: str) -> list[tuple[str, bool]]:
    return [(m, True) for m in messages]


def check(ctx: CycleContext, want: dict[str, list[tuple[str, bool]]]) -> None:
    result = VolumeBinding().filter(ctx)
    got = outcome(result, ctx.table)
    assert got == want
    if not any(want.values()):
        assert result.passed is None or bool(result.passed[ctx.nodes()].all())


# -- kube's volume_binding_test.go: TestVolumeBinding ----------------------------------------

WAIT_SC = make_storage_class("wait-sc", provisioner="")
WAIT_HDD_SC = make_storage_class("wait-hdd-sc", provisioner="")
IMMEDIATE_SC = make_storage_class("immediate-sc", provisioner="", mode="Immediate")
SCS = [WAIT_SC, WAIT_HDD_SC, IMMEDIATE_SC]


def kpv(name: str, cls: str = "wait-sc", capacity: str = "1Gi", **affinity: list[str]) -> Obj:
    """kube's ``makePV(name, class).withPhase(Available)...withNodeAffinity(...)``: one term,
    a requirement ``key In values`` per key."""
    volume = make_pv(name).cls(cls).capacity(capacity)
    if affinity:
        volume.node_term(*(expr(k.replace("__", "/").replace("_", "."), "In", *v)
                           for k, v in affinity.items()))
    return volume.obj()


def local_pv(name: str, node: str, capacity: str, cls: str = "wait-sc") -> Obj:
    return make_pv(name).cls(cls).capacity(capacity).node_affinity(HOSTNAME, node).obj()


def zonal_pv(name: str, zone: str, region: str, capacity: str) -> Obj:
    return make_pv(name).cls("wait-sc").capacity(capacity).node_term(
        expr(REGION, "In", region), expr(ZONE, "In", zone)).obj()


def host(name: str) -> Obj:
    return make_node(name).label(HOSTNAME, name).obj()


def zonal_node(name: str, zone: str, region: str) -> Obj:
    return make_node(name).label(HOSTNAME, name).label(ZONE, zone).label(REGION, region).obj()


ZONAL_NODES = [zonal_node(f"zone-{z}-node-{n}", f"zone-{z}", f"region-{z}")
               for z in "abc" for n in "ab"]
ZONAL_PVS = [zonal_pv("pv-a-0", "zone-a", "region-a", "200Gi"),
             zonal_pv("pv-a-1", "zone-a", "region-a", "200Gi"),
             zonal_pv("pv-b-0", "zone-b", "region-b", "100Gi"),
             zonal_pv("pv-b-1", "zone-b", "region-b", "100Gi")]
LOCAL_PVS = [local_pv("pv-a-0", "node-a", "200Gi"), local_pv("pv-a-1", "node-a", "200Gi"),
             local_pv("pv-b-0", "node-b", "100Gi"), local_pv("pv-b-1", "node-b", "100Gi")]
LOCAL_HDD_PVS = [local_pv("pv-a-2", "node-a", "200Gi", "wait-hdd-sc"),
                 local_pv("pv-a-3", "node-a", "200Gi", "wait-hdd-sc"),
                 local_pv("pv-b-2", "node-b", "100Gi", "wait-hdd-sc"),
                 local_pv("pv-b-3", "node-b", "100Gi", "wait-hdd-sc")]
ABC = [host("node-a"), host("node-b"), host("node-c")]


@pytest.mark.parametrize(("pod", "nodes", "storage", "want"), [
    pytest.param(make_pod("pod-a"), [host("node-a")], [], {"node-a": []},
                 id="pod has not pvcs"),
    pytest.param(make_pod("pod-a").pvc("pvc-a"), [host("node-a")],
                 [make_pvc("pvc-a").cls("wait-sc").bound("pv-a").obj(), kpv("pv-a")],
                 {"node-a": []}, id="all bound"),
    pytest.param(make_pod("pod-a").pvc("pvc-a", "volume-a").pvc("pvc-b", "volume-b"),
                 [host("node-a"), host("node-b")],
                 [make_pvc("pvc-a").cls("wait-sc").bound("pv-a").obj(),
                  make_pvc("pvc-b").cls("wait-sc").bound("pv-b").obj(),
                  local_pv("pv-a", "node-a", "1Gi"), local_pv("pv-b", "node-a", "1Gi")],
                 {"node-a": [], "node-b": unresolvable(NODE_CONFLICT)},
                 id="all bound with local volumes"),
    pytest.param(make_pod("pod-a").pvc("pvc-a"), [host("node-a")], [],
                 {"node-a": unresolvable('persistentvolumeclaim "pvc-a" not found')},
                 id="PVC does not exist"),
    pytest.param(make_pod("pod-a").pvc("pvc-a").pvc("pvc-b"), [host("node-a")],
                 [make_pvc("pvc-a").cls("wait-sc").bound("pv-a").obj()],
                 {"node-a": unresolvable('persistentvolumeclaim "pvc-b" not found')},
                 id="Part of PVCs do not exist"),
    pytest.param(make_pod("pod-a").pvc("pvc-a"), [host("node-a")],
                 [make_pvc("pvc-a").cls("immediate-sc").obj()],
                 {"node-a": unresolvable(IMMEDIATE_UNBOUND)}, id="immediate claims not bound"),
    pytest.param(make_pod("pod-a").pvc("pvc-a"), [host("node-a")],
                 [make_pvc("pvc-a").cls("wait-sc").obj()],
                 {"node-a": unresolvable(BIND_CONFLICT)}, id="unbound claims no matches"),
    pytest.param(make_pod("pod-a").pvc("pvc-a").pvc("pvc-b"),
                 [make_node("node-a").label("foo", "barbar").obj()],
                 [make_pvc("pvc-a").cls("wait-sc").bound("pv-a").obj(),
                  make_pvc("pvc-b").cls("wait-sc").obj(), kpv("pv-a", foo=["bar"])],
                 {"node-a": unresolvable(NODE_CONFLICT, BIND_CONFLICT)},
                 id="bound and unbound unsatisfied"),
    pytest.param(make_pod("pod-a").pvc("pvc-a"), [host("node-a")],
                 [make_pvc("pvc-a").cls("wait-sc").bound("pv-a").obj()],
                 {"node-a": unresolvable(PV_NOT_EXIST)}, id="pv not found"),
    pytest.param(make_pod("pod-a").pvc("pvc-a"), [host("node-a")],
                 [make_pvc("pvc-a").cls("wait-sc").bound("pv-a").lost().obj()],
                 {"node-a": unresolvable('persistentvolumeclaim "pvc-a" bound to non-existent '
                                         'persistentvolume "pv-a"')},
                 id="pv not found claim lost"),
    pytest.param(make_pod("pod-a").pvc("pvc-a"), ABC,
                 [make_pvc("pvc-a").cls("wait-sc").request("50Gi").obj(), *LOCAL_PVS],
                 {"node-a": [], "node-b": [], "node-c": unresolvable(BIND_CONFLICT)},
                 id="local volumes with close capacity are preferred"),
    pytest.param(make_pod("pod-a").pvc("pvc-0").pvc("pvc-1"), ABC,
                 [make_pvc("pvc-0").cls("wait-sc").request("50Gi").obj(),
                  make_pvc("pvc-1").cls("wait-hdd-sc").request("100Gi").obj(),
                  *LOCAL_PVS, *LOCAL_HDD_PVS],
                 {"node-a": [], "node-b": [], "node-c": unresolvable(BIND_CONFLICT)},
                 id="local volumes with close capacity are preferred (multiple pvcs)"),
    pytest.param(make_pod("pod-a").pvc("pvc-a"), ZONAL_NODES,
                 [make_pvc("pvc-a").cls("wait-sc").request("50Gi").obj(), *ZONAL_PVS],
                 {"zone-a-node-a": [], "zone-a-node-b": [], "zone-b-node-a": [],
                  "zone-b-node-b": [], "zone-c-node-a": unresolvable(BIND_CONFLICT),
                  "zone-c-node-b": unresolvable(BIND_CONFLICT)},
                 id="zonal volumes with close capacity are preferred"),
])
def test_kube_volume_binding(pod: PodBuilder, nodes: list[Obj], storage: list[Obj],
                             want: dict[str, list[tuple[str, bool]]]) -> None:
    check(context(pod.obj(), nodes, storage=[*SCS, *storage]), want)


# -- kube's binder_test.go: FindPodVolumes ---------------------------------------------------

NODE_KEY = "nodeKey"
PROVISIONER = "test-provisioner"
CLASSES = [
    make_storage_class("waitClassWithProvisioner", PROVISIONER,
                       topologies=[{NODE_KEY: ["node1", "reference-value"]}]),
    make_storage_class("immediateClass", "", mode="Immediate"),
    make_storage_class("waitClass", "kubernetes.io/no-provisioner"),
    make_storage_class("topoMismatchClass", PROVISIONER,
                       topologies=[{NODE_KEY: ["reference-value"]}]),
]
NS = "testns"


def kube_pvc(name: str, size: str, cls: str, *, bound: str = "", prebound: str = "",
             selected: str = "") -> Obj:
    """``makeTestPVC``: the same uid for every claim, as kube's fixtures have."""
    claim = make_pvc(name, NS).cls(cls).request(size)
    if bound:
        claim.bound(bound)
    if prebound:
        claim.prebound(prebound)
    if selected:
        claim.selected_node(selected)
    out = claim.obj()
    out["metadata"]["uid"] = "pvc-uid"
    return out


def kube_pv(name: str, node: str, capacity: str, cls: str, claim: Obj | None = None) -> Obj:
    """``makeTestPV``: affinity ``nodeKey In [node]``, Available, optionally bound."""
    volume = make_pv(name).cls(cls).capacity(capacity)
    if node:
        volume.node_affinity(NODE_KEY, node)
    if claim is not None:
        volume.claim_ref(claim)
    return volume.obj()


unboundPVC = kube_pvc("unbound-pvc", "1G", "waitClass")
unboundPVC2 = kube_pvc("unbound-pvc2", "5G", "waitClass")
preboundPVC = kube_pvc("prebound-pvc", "1G", "waitClass", prebound="pv-node1a")
boundPVC = kube_pvc("bound-pvc", "1G", "waitClass", bound="pv-bound")
immediateUnboundPVC = kube_pvc("immediate-unbound-pvc", "1G", "immediateClass")
immediateBoundPVC = kube_pvc("immediate-bound-pvc", "1G", "immediateClass",
                             bound="pv-bound-immediate")
provisionedPVC = kube_pvc("provisioned-pvc", "1Gi", "waitClassWithProvisioner")
noProvisionerPVC = kube_pvc("no-provisioner-pvc", "1Gi", "waitClass")
topoMismatchPVC = kube_pvc("topo-mismatch-pvc", "1Gi", "topoMismatchClass")
selectedNodePVC = kube_pvc("provisioned-pvc", "1Gi", "waitClassWithProvisioner",
                           selected="node1")

pvNode1a = kube_pv("pv-node1a", "node1", "5G", "waitClass")
pvNode1b = kube_pv("pv-node1b", "node1", "10G", "waitClass")
pvNode2 = kube_pv("pv-node2", "node2", "1G", "waitClass")
pvBound = kube_pv("pv-bound", "node1", "1G", "waitClass", boundPVC)
pvNode1aBound = kube_pv("pv-node1a", "node1", "5G", "waitClass", unboundPVC)
pvBoundImmediate = kube_pv("pv-bound-immediate", "node1", "1G", "immediateClass",
                           immediateBoundPVC)
pvBoundImmediateNode2 = kube_pv("pv-bound-immediate", "node2", "1G", "immediateClass",
                                immediateBoundPVC)


def ephemeral_pod(volume: str) -> PodBuilder:
    return make_pod("test-pod", NS).node_name("node1").ephemeral(volume)


def generic_pvc(owned: bool) -> Obj:
    """``makeGenericEphemeralPVC``: the claim of volume test-volume, bound."""
    claim = make_pvc("test-pod-test-volume", NS).cls("immediateClass").request("1G") \
        .bound("pv-bound")
    if owned:
        claim.owned_by(ephemeral_pod("test-volume").obj())
    return claim.obj()


pvBoundGeneric = kube_pv("pv-bound", "node1", "1G", "waitClass", generic_pvc(True))


def claims_pod(*claims: Obj) -> PodBuilder:
    pod = make_pod("test-pod", NS).node_name("node1")
    for claim in claims:
        pod.pvc(claim["metadata"]["name"])
    return pod


Plan = tuple[list[tuple[str, str]], list[str]]


@pytest.mark.parametrize(("pod", "storage", "reasons", "want_plan"), [
    # TestFindPodVolumesWithoutProvisioning
    pytest.param(make_pod("test-pod", NS), [], [], ([], []), id="no-volumes"),
    pytest.param(make_pod("test-pod", NS), [], [], ([], []), id="no-pvcs"),
    pytest.param(claims_pod(boundPVC), [],
                 ['persistentvolumeclaim "bound-pvc" not found'], None, id="pvc-not-found"),
    pytest.param(claims_pod(boundPVC), [boundPVC, pvBound], [], ([], []), id="bound-pvc"),
    pytest.param(claims_pod(boundPVC), [boundPVC], [PV_NOT_EXIST], None,
                 id="bound-pvc,pv-not-exists"),
    pytest.param(claims_pod(preboundPVC), [preboundPVC, pvNode1aBound], [IMMEDIATE_UNBOUND],
                 None, id="prebound-pvc"),
    pytest.param(claims_pod(unboundPVC), [unboundPVC, pvNode2, pvNode1a, pvNode1b], [],
                 ([("unbound-pvc", "pv-node1a")], []), id="unbound-pvc,pv-same-node"),
    pytest.param(claims_pod(unboundPVC), [unboundPVC, pvNode2], [BIND_CONFLICT], None,
                 id="unbound-pvc,pv-different-node"),
    pytest.param(claims_pod(unboundPVC, unboundPVC2),
                 [unboundPVC, unboundPVC2, pvNode1a, pvNode1b], [],
                 ([("unbound-pvc", "pv-node1a"), ("unbound-pvc2", "pv-node1b")], []),
                 id="two-unbound-pvcs"),
    pytest.param(claims_pod(unboundPVC2, unboundPVC),
                 [unboundPVC, unboundPVC2, pvNode1a, pvNode1b], [],
                 ([("unbound-pvc", "pv-node1a"), ("unbound-pvc2", "pv-node1b")], []),
                 id="two-unbound-pvcs,order-by-size"),
    pytest.param(claims_pod(unboundPVC, unboundPVC2), [unboundPVC, unboundPVC2, pvNode1a],
                 [BIND_CONFLICT], None, id="two-unbound-pvcs,partial-match"),
    pytest.param(claims_pod(unboundPVC, boundPVC), [unboundPVC, boundPVC, pvBound, pvNode1a],
                 [], ([("unbound-pvc", "pv-node1a")], []), id="one-bound,one-unbound"),
    pytest.param(claims_pod(unboundPVC, boundPVC), [unboundPVC, boundPVC, pvBound, pvNode2],
                 [BIND_CONFLICT], None, id="one-bound,one-unbound,no-match"),
    pytest.param(claims_pod(unboundPVC, preboundPVC),
                 [unboundPVC, preboundPVC, pvNode1a, pvNode1b], [IMMEDIATE_UNBOUND], None,
                 id="one-prebound,one-unbound"),
    pytest.param(claims_pod(immediateBoundPVC), [immediateBoundPVC, pvBoundImmediate], [],
                 ([], []), id="immediate-bound-pvc"),
    pytest.param(claims_pod(immediateBoundPVC), [immediateBoundPVC, pvBoundImmediateNode2],
                 [NODE_CONFLICT], None, id="immediate-bound-pvc-wrong-node"),
    pytest.param(claims_pod(immediateUnboundPVC), [immediateUnboundPVC], [IMMEDIATE_UNBOUND],
                 None, id="immediate-unbound-pvc"),
    pytest.param(claims_pod(immediateUnboundPVC, boundPVC),
                 [immediateUnboundPVC, boundPVC, pvBound], [IMMEDIATE_UNBOUND], None,
                 id="immediate-unbound-pvc,delayed-mode-bound"),
    pytest.param(claims_pod(immediateUnboundPVC, unboundPVC),
                 [immediateUnboundPVC, unboundPVC], [IMMEDIATE_UNBOUND], None,
                 id="immediate-unbound-pvc,delayed-mode-unbound"),
    pytest.param(ephemeral_pod("no-such-pvc"), [],
                 ["waiting for ephemeral volume controller to create the persistentvolumeclaim "
                  '"test-pod-no-such-pvc"'], None, id="generic-ephemeral,no-pvc"),
    pytest.param(ephemeral_pod("test-volume"), [generic_pvc(True), pvBoundGeneric], [],
                 ([], []), id="generic-ephemeral,with-pvc"),
    pytest.param(ephemeral_pod("test-volume"), [generic_pvc(False), pvBoundGeneric],
                 ["PVC testns/test-pod-test-volume was not created for pod testns/test-pod "
                  "(pod is not owner)"], None, id="generic-ephemeral,wrong-pvc"),
    # TestFindPodVolumesWithProvisioning
    pytest.param(claims_pod(provisionedPVC), [provisionedPVC], [], ([], ["provisioned-pvc"]),
                 id="one-provisioned"),
    pytest.param(claims_pod(unboundPVC, provisionedPVC), [unboundPVC, provisionedPVC, pvNode1a],
                 [], ([("unbound-pvc", "pv-node1a")], ["provisioned-pvc"]),
                 id="two-unbound-pvcs,one-matched,one-provisioned"),
    pytest.param(claims_pod(boundPVC, provisionedPVC), [boundPVC, provisionedPVC, pvBound], [],
                 ([], ["provisioned-pvc"]), id="one-bound,one-provisioned"),
    pytest.param(claims_pod(boundPVC, selectedNodePVC), [boundPVC, selectedNodePVC, pvBound],
                 [], ([], ["provisioned-pvc"]), id="one-binding,one-selected-node"),
    pytest.param(claims_pod(immediateUnboundPVC), [immediateUnboundPVC], [IMMEDIATE_UNBOUND],
                 None, id="provisioning: immediate-unbound-pvc"),
    pytest.param(claims_pod(immediateBoundPVC, provisionedPVC),
                 [immediateBoundPVC, provisionedPVC, pvBoundImmediate], [],
                 ([], ["provisioned-pvc"]), id="one-immediate-bound,one-provisioned"),
    pytest.param(claims_pod(noProvisionerPVC), [noProvisionerPVC], [BIND_CONFLICT], None,
                 id="invalid-provisioner"),
    pytest.param(claims_pod(topoMismatchPVC), [topoMismatchPVC], [BIND_CONFLICT], None,
                 id="volume-topology-unsatisfied"),
])
def test_kube_find_pod_volumes(pod: PodBuilder, storage: list[Obj], reasons: list[str],
                               want_plan: Plan | None) -> None:
    node1 = make_node("node1").label(NODE_KEY, "node1").obj()
    ctx = context(pod.obj(), [node1], storage=[*CLASSES, *storage])
    check(ctx, {"node1": unresolvable(*reasons)})
    got = plan(ctx, ctx.table.slots["node1"])
    if want_plan is None:
        assert got == reasons[0]
    else:
        assert isinstance(got, BindingPlan)
        assert ([(c.name, v.name) for c, v in got.static], [c.name for c in got.dynamic]) \
            == want_plan


def test_kube_find_assume_volumes() -> None:
    """``TestFindAssumeVolumes``: once the chosen volume is assumed for the claim, finding
    volumes again keeps choosing it (pvNode1a and pvNode1c are the same size)."""
    pvNode1c = kube_pv("pv-node1c", "node1", "5G", "waitClass")
    node1 = make_node("node1").label(NODE_KEY, "node1").obj()
    ctx = context(claims_pod(unboundPVC).obj(), [node1],
                  storage=[*CLASSES, unboundPVC, pvNode2, pvNode1a, pvNode1c])
    first = plan(ctx, 0)
    assert isinstance(first, BindingPlan) and len(first.static) == 1
    claim, volume = first.static[0]
    ctx.table.volumes.assumed[volume.name] = claim.key
    for _ in range(3):
        again = plan(ctx, 0)
        assert isinstance(again, BindingPlan)
        assert [(c.name, v.name) for c, v in again.static] == [("unbound-pvc", volume.name)]
    # Another claim no longer sees the assumed volume.
    other = kube_pvc("other-pvc", "1G", "waitClass")
    ctx = context(claims_pod(other).obj(), [node1],
                  storage=[*CLASSES, other, pvNode2, pvNode1a, pvNode1c])
    ctx.table.volumes.assumed[volume.name] = claim.key
    left = plan(ctx, 0)
    assert isinstance(left, BindingPlan)
    assert [v.name for _, v in left.static] == [({"pv-node1a", "pv-node1c"} - {volume.name}).pop()]


def test_selected_node_fits_only_that_node() -> None:
    """``FindPodVolumes``' fast path: a claim being provisioned for node1 fails node2 even
    though node2 could provision it."""
    nodes = [make_node(n).label(NODE_KEY, "node1").obj() for n in ("node1", "node2")]
    ctx = context(claims_pod(selectedNodePVC).obj(), nodes,
                  storage=[*CLASSES, selectedNodePVC])
    check(ctx, {"node1": [], "node2": unresolvable(BIND_CONFLICT)})


# -- FindMatchingVolume, rule by rule ----------------------------------------------------------

LOCAL = make_storage_class("local")
DYNAMIC = make_storage_class("dynamic", "csi.example.com",
                             topologies=[{ZONE: ["a", "b"]}, {HOSTNAME: ["n3"]}])
NODES = [make_node("n1").label(HOSTNAME, "n1").label(ZONE, "a").obj(),
         make_node("n2").label(HOSTNAME, "n2").label(ZONE, "b").obj(),
         make_node("n3").label(HOSTNAME, "n3").label(ZONE, "c").obj()]


def claim(name: str = "data") -> Any:
    return make_pvc(name).cls("local").request("5Gi")


def on(node: str, name: str = "", capacity: str = "10Gi") -> Any:
    return make_pv(name or f"pv-{node}").cls("local").capacity(capacity) \
        .node_affinity(HOSTNAME, node)


FAILS = unresolvable(BIND_CONFLICT)


@pytest.mark.parametrize(("storage", "want"), [
    pytest.param([claim().obj(), on("n1").obj()], {"n1": [], "n2": FAILS, "n3": FAILS},
                 id="an available volume fits where its node affinity allows"),
    pytest.param([claim().obj(), make_pv("anywhere").cls("local").capacity("5Gi").obj()],
                 {"n1": [], "n2": [], "n3": []}, id="a volume without node affinity fits anywhere"),
    pytest.param([claim().obj(), on("n1", capacity="4Gi").obj()],
                 {"n1": FAILS, "n2": FAILS, "n3": FAILS}, id="too small"),
    pytest.param([claim().obj(), on("n1").cls("other").obj()],
                 {"n1": FAILS, "n2": FAILS, "n3": FAILS}, id="another class"),
    pytest.param([claim().beta_cls("local").obj(),
                  on("n1").obj()], {"n1": [], "n2": FAILS, "n3": FAILS},
                 id="the beta class annotation names the claim's class"),
    pytest.param([claim().obj(), on("n1").phase("Released").obj()],
                 {"n1": FAILS, "n2": FAILS, "n3": FAILS}, id="not Available"),
    pytest.param([claim().obj(), on("n1").deleting().obj()],
                 {"n1": FAILS, "n2": FAILS, "n3": FAILS}, id="being deleted"),
    pytest.param([claim().mode("Block").obj(), on("n1").obj()],
                 {"n1": FAILS, "n2": FAILS, "n3": FAILS}, id="volume mode mismatch"),
    pytest.param([claim().access("ReadWriteMany").obj(), on("n1").obj()],
                 {"n1": FAILS, "n2": FAILS, "n3": FAILS}, id="access mode not offered"),
    pytest.param([claim().access("ReadWriteOnce").obj(),
                  on("n1").access("ReadWriteOnce", "ReadOnlyMany").obj()],
                 {"n1": [], "n2": FAILS, "n3": FAILS}, id="access modes a subset"),
    pytest.param([claim().selector(tier="fast").obj(), on("n1").label("tier", "slow").obj(),
                  on("n2").label("tier", "fast").obj()],
                 {"n1": FAILS, "n2": [], "n3": FAILS}, id="selector"),
    pytest.param([claim().attributes_class("gold").obj(), on("n1").obj(),
                  on("n2").attributes_class("gold").obj()],
                 {"n1": FAILS, "n2": [], "n3": FAILS}, id="volume attributes class"),
    pytest.param([claim().obj(), on("n1").claim_ref("someone-else").obj()],
                 {"n1": FAILS, "n2": FAILS, "n3": FAILS}, id="bound to another claim"),
    pytest.param([claim().obj(), on("n1").claim_ref("data", uid="old-uid").obj()],
                 {"n1": FAILS, "n2": FAILS, "n3": FAILS},
                 id="pre-bound to an earlier claim of the same name"),
    pytest.param([claim().obj(), on("n1").claim_ref("data").phase("Released")
                  .access("ReadOnlyMany").obj()],
                 {"n1": [], "n2": FAILS, "n3": FAILS},
                 id="pre-bound: phase and access modes are not checked"),
    pytest.param([claim().obj(), on("n1").claim_ref("data").obj(), on("n2").obj()],
                 {"n1": [], "n2": FAILS, "n3": FAILS},
                 id="pre-bound: the only answer, other volumes are not considered"),
    pytest.param([claim().obj(), on("n1").claim_ref("data").capacity("1Gi").obj(),
                  on("n2").obj()],
                 {"n1": FAILS, "n2": [], "n3": FAILS},
                 id="pre-bound but too small: ignored"),
    pytest.param([claim().obj(), make_pv("fields").cls("local").capacity("5Gi")
                  .node_term(fields=[field("In", "n2")]).obj()],
                 {"n1": [], "n2": [], "n3": []},
                 id="matchFields are ignored, as CheckNodeAffinity's nameless node"),
    pytest.param([claim().obj(), make_pv("mixed").cls("local").capacity("5Gi")
                  .node_term(expr(ZONE, "In", "a"), fields=[field("In", "n2")]).obj()],
                 {"n1": [], "n2": FAILS, "n3": FAILS},
                 id="matchFields beside expressions are ignored"),
    pytest.param([claim().obj(), make_pv("two-terms").cls("local").capacity("5Gi")
                  .node_term(expr(ZONE, "In", "a")).node_term(expr(HOSTNAME, "In", "n3")).obj()],
                 {"n1": [], "n2": FAILS, "n3": []}, id="node affinity terms are ORed"),
    pytest.param([make_pvc("data").cls("dynamic").obj()],
                 {"n1": [], "n2": [], "n3": []}, id="provisioned within allowedTopologies"),
    pytest.param([make_pvc("data").cls("dynamic").obj(), make_storage_class(
        "dynamic", "csi.example.com", topologies=[{ZONE: ["b"]}])],
                 {"n1": FAILS, "n2": [], "n3": FAILS}, id="allowedTopologies exclude nodes"),
])
def test_find_matching_volume(storage: list[Obj], want: dict[str, list[tuple[str, bool]]]) -> None:
    ctx = context(make_pod().pvc("data").obj(), NODES, storage=[LOCAL, DYNAMIC, *storage])
    check(ctx, want)


def test_bound_claims_are_checked_in_order_until_one_fails() -> None:
    """``checkBoundClaims`` stops at the first claim that fails a node: a missing volume
    first hides the other claim's conflict; a conflict first hides the missing volume."""
    conflict = make_pvc("conflict").cls("local").bound("pv-n1").obj()
    missing = make_pvc("missing").cls("local").bound("gone").obj()
    storage = [LOCAL, conflict, missing, on("n1").claim_ref(conflict).obj()]
    ctx = context(make_pod().pvc("missing").pvc("conflict").obj(), NODES, storage=storage)
    check(ctx, {n: unresolvable(PV_NOT_EXIST) for n in ("n1", "n2", "n3")})
    ctx = context(make_pod().pvc("conflict").pvc("missing").obj(), NODES, storage=storage)
    check(ctx, {"n1": unresolvable(PV_NOT_EXIST), "n2": unresolvable(NODE_CONFLICT),
                "n3": unresolvable(NODE_CONFLICT)})


@pytest.mark.parametrize(("claim_obj", "message"), [
    pytest.param(make_pvc("data").cls("local").deleting().obj(),
                 'persistentvolumeclaim "data" is being deleted', id="claim being deleted"),
    pytest.param(make_pvc("data").cls("local").prebound("pv-n1").obj(), IMMEDIATE_UNBOUND,
                 id="pre-bound claim waits for the PV controller"),
    pytest.param(make_pvc("data").obj(), IMMEDIATE_UNBOUND, id="claim without a class"),
    pytest.param(make_pvc("data").cls("missing").obj(), IMMEDIATE_UNBOUND,
                 id="class that does not exist: immediate"),
])
def test_pod_level_problems(claim_obj: Obj, message: str) -> None:
    ctx = context(make_pod().pvc("data").obj(), NODES, storage=[LOCAL, claim_obj])
    check(ctx, {n: unresolvable(message) for n in ("n1", "n2", "n3")})
    assert plan(ctx, 0) == message


# -- plan --------------------------------------------------------------------------------------

def static_of(got: BindingPlan | str) -> list[tuple[str, str]]:
    assert isinstance(got, BindingPlan), got
    return [(c.name, v.name) for c, v in got.static]


def dynamic_of(got: BindingPlan | str) -> list[str]:
    assert isinstance(got, BindingPlan), got
    return [c.name for c in got.dynamic]


def test_plan_takes_the_smallest_fitting_volume_a_different_one_per_claim() -> None:
    storage = [LOCAL, claim("small").request("1Gi").obj(), claim("big").request("8Gi").obj(),
               on("n1", "pv-20", "20Gi").obj(), on("n1", "pv-10", "10Gi").obj(),
               on("n1", "pv-2", "2Gi").obj(), on("n2", "pv-n2", "1Gi").obj()]
    ctx = context(make_pod().pvc("big").pvc("small").obj(), NODES, storage=storage)
    check(ctx, {"n1": [], "n2": FAILS, "n3": FAILS})
    got = plan(ctx, ctx.table.slots["n1"])
    assert static_of(got) == [("small", "pv-2"), ("big", "pv-10")]
    assert plan(ctx, ctx.table.slots["n2"]) == BIND_CONFLICT


def test_plan_two_claims_one_volume_greedy_like_kube() -> None:
    """The smaller claim takes the only volume both fit; the bigger one is left without and
    its class cannot provision."""
    storage = [LOCAL, claim("a").request("1Gi").obj(), claim("b").request("2Gi").obj(),
               on("n1", "pv", "5Gi").obj()]
    ctx = context(make_pod().pvc("b").pvc("a").obj(), NODES, storage=storage)
    check(ctx, {"n1": FAILS, "n2": FAILS, "n3": FAILS})


def test_plan_provisions_what_no_static_volume_serves() -> None:
    storage = [LOCAL, DYNAMIC, claim("static").obj(), make_pvc("dyn").cls("dynamic").obj(),
               on("n1").obj()]
    ctx = context(make_pod().pvc("dyn").pvc("static").obj(), NODES, storage=storage)
    check(ctx, {"n1": [], "n2": FAILS, "n3": FAILS})
    got = plan(ctx, ctx.table.slots["n1"])
    assert static_of(got) == [("static", "pv-n1")]
    assert dynamic_of(got) == ["dyn"]


def test_plan_dynamic_class_prefers_a_static_volume_where_one_fits() -> None:
    storage = [make_pvc("data").cls("dynamic").obj(),
               make_pv("pv-static").cls("dynamic").capacity("1Gi")
               .node_affinity(HOSTNAME, "n2").obj()]
    ctx = context(make_pod().pvc("data").obj(), NODES, storage=[LOCAL, DYNAMIC, *storage])
    check(ctx, {"n1": [], "n2": [], "n3": []})
    assert static_of(plan(ctx, ctx.table.slots["n2"])) == [("data", "pv-static")]
    assert dynamic_of(plan(ctx, ctx.table.slots["n1"])) == ["data"]
    assert dynamic_of(plan(ctx, ctx.table.slots["n3"])) == ["data"]


def test_plan_respects_allowed_topologies() -> None:
    sc = make_storage_class("dynamic", "csi.example.com", topologies=[{HOSTNAME: ["n3"]}])
    ctx = context(make_pod().pvc("data").obj(), NODES,
                  storage=[sc, make_pvc("data").cls("dynamic").obj()])
    check(ctx, {"n1": FAILS, "n2": FAILS, "n3": []})
    assert dynamic_of(plan(ctx, ctx.table.slots["n3"])) == ["data"]
    assert plan(ctx, ctx.table.slots["n1"]) == BIND_CONFLICT


def test_plan_uses_a_volume_pre_bound_to_the_claim() -> None:
    data = claim().obj()
    storage = [LOCAL, data, on("n1", "small", "5Gi").obj(),
               on("n2", "mine", "50Gi").claim_ref(data).obj()]
    ctx = context(make_pod().pvc("data").obj(), NODES, storage=storage)
    check(ctx, {"n1": FAILS, "n2": [], "n3": FAILS})
    assert static_of(plan(ctx, ctx.table.slots["n2"])) == [("data", "mine")]


def test_plan_ignores_bound_claims_and_reports_their_conflicts() -> None:
    bound = make_pvc("bound").cls("local").bound("pv-n2").obj()
    storage = [LOCAL, bound, on("n2").claim_ref(bound).obj(), claim("new").obj(),
               on("n1", "pv-a").obj(), on("n2", "pv-b").obj()]
    ctx = context(make_pod().pvc("bound").pvc("new").obj(), NODES, storage=storage)
    check(ctx, {"n1": unresolvable(NODE_CONFLICT), "n2": [],
                "n3": unresolvable(NODE_CONFLICT, BIND_CONFLICT)})
    assert static_of(plan(ctx, ctx.table.slots["n2"])) == [("new", "pv-b")]
    assert plan(ctx, ctx.table.slots["n1"]) == NODE_CONFLICT


def test_holes_are_skipped() -> None:
    ctx = context(make_pod().pvc("data").obj(), NODES, removed=["n2"],
                  storage=[LOCAL, claim().obj(), on("n1").obj()])
    check(ctx, {"n1": [], "n3": FAILS})


def test_name() -> None:
    assert NAME == VolumeBinding.name == "VolumeBinding"


def test_pod_level_problems_are_prefilter_rejections() -> None:
    """kube rejects the pod in PreFilter: the diagnosis is the message, not a node count."""
    ctx = context(make_pod().pvc("missing").obj(), NODES, storage=[LOCAL])
    [reason] = VolumeBinding().filter(ctx).reasons
    assert reason.prefilter and reason.unresolvable
    ctx = context(make_pod().pvc("data").obj(), NODES, storage=[LOCAL, claim().obj()])
    assert not any(r.prefilter for r in VolumeBinding().filter(ctx).reasons)

"""Differential tests: the volume plugins agree with the plain per-node reference.

Hypothesis builds small random clusters — nodes with hostname, zone and region labels (some
removed again, leaving holes), storage classes of every binding mode and provisioner, volumes
of every class, size, phase, access mode and node affinity (hostname, zone, ``matchFields``,
several terms), bound, pre-bound or assumed for claims, with zone labels and CSI drivers;
claims bound, pre-bound, unbound, being provisioned for a node, lost or being deleted; pods on
the nodes using them and generic ephemeral volumes; CSINode attach limits — and a pod mounting
some claims (one perhaps missing) and perhaps an ephemeral volume. For every node, each
plugin's reasons must equal :mod:`tests.unit.plugins.reference_volumes`, and where
VolumeBinding passes, :func:`plan` must bind and provision what kube's ``FindPodVolumes`` does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyscheduler.framework.interface import CycleContext
from pyscheduler.framework.pod import pod_info
from pyscheduler.plugins.node_volume_limits import NodeVolumeLimits
from pyscheduler.plugins.volume_binding import BindingPlan, VolumeBinding, plan
from pyscheduler.plugins.volume_restrictions import VolumeRestrictions
from pyscheduler.plugins.volume_zone import VolumeZone
from tests.unit.plugins import reference_volumes as ref
from tests.unit.plugins.builders import (
    build_table,
    expr,
    feed,
    field,
    make_csinode,
    make_node,
    make_pod,
    make_pv,
    make_pvc,
    make_storage_class,
    outcome,
)

SETTINGS = settings(max_examples=400, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

Obj = dict[str, Any]
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
NODE_NAMES = [f"n{i}" for i in range(5)]
CLAIM_NAMES = [f"c{i}" for i in range(5)]
VOLUME_NAMES = [f"pv{i}" for i in range(8)]

CLASSES = [
    make_storage_class("wait"),
    make_storage_class("prov", "csi.a"),
    make_storage_class("topo", "csi.b", topologies=[{ZONE: ["a"]}, {HOSTNAME: ["n3"]}]),
    make_storage_class("imm", "csi.a", mode="Immediate"),
]
# Weighted towards the classes that bind when a pod is scheduled.
CLASS_NAMES = ["wait"] * 6 + ["prov", "prov", "topo", "topo", "imm", "", "ghost"]
SIZES = ["1Gi", "2Gi", "3Gi", "5Gi"]
ACCESS = [("ReadWriteOnce",), ("ReadWriteOnce",), ("ReadWriteOnce", "ReadOnlyMany"),
          ("ReadWriteMany",), ("ReadWriteOncePod",)]
AFFINITIES: list[list[tuple[list[Obj], list[Obj]]] | None] = [
    None, None, None, None,
    [([expr(HOSTNAME, "In", "n0")], [])],
    [([expr(HOSTNAME, "In", "n1")], [])],
    [([expr(HOSTNAME, "In", "n2", "n3")], [])],
    [([expr(ZONE, "In", "a")], [])],
    [([expr(ZONE, "NotIn", "a")], [])],
    [([expr(ZONE, "DoesNotExist")], [])],
    [([], [field("In", "n1")])],
    [([expr(ZONE, "In", "b")], [field("In", "n0")])],
    [([expr(ZONE, "In", "b")], []), ([expr(HOSTNAME, "In", "n0")], [])],
    [([expr(REGION, "In", "r1"), expr(ZONE, "Exists")], [])],
]
ZONE_LABELS: list[dict[str, str]] = [
    {}, {}, {ZONE: "a"}, {ZONE: "a__b"}, {BETA_ZONE: "b"}, {REGION: "r1"},
    {ZONE: "a", REGION: "r2"}, {ZONE: "a____b"}, {BETA_ZONE: "a"}]
CSI = [None, None, ("csi.a", "h-a"), ("csi.b", "h-b"), ("csi.a", "h-shared"), ("csi.a", "")]


@dataclass
class Scenario:
    nodes: list[Obj]
    pods: dict[str, list[Obj]]
    removed: list[str]
    storage: list[Obj]
    assumed: dict[str, tuple[str, str]]
    pod: Obj

    def build(self) -> tuple[CycleContext, ref.Cluster]:
        table = feed(build_table(self.nodes, self.pods, self.removed), self.storage)
        table.volumes.assumed.update(self.assumed)
        ctx = CycleContext.for_pod(pod_info(self.pod), table)
        kinds: dict[str, list[Obj]] = {}
        for obj in self.storage:
            kinds.setdefault(obj["kind"], []).append(obj)
        cluster = ref.Cluster(kinds.get("PersistentVolumeClaim", []),
                              kinds.get("PersistentVolume", []), kinds.get("StorageClass", []),
                              kinds.get("CSINode", []), dict(self.assumed))
        return ctx, cluster

    def live_nodes(self) -> list[Obj]:
        return [n for n in self.nodes if n["metadata"]["name"] not in self.removed]


@st.composite
def nodes(draw: st.DrawFn, name: str) -> Obj:
    node = make_node(name).label(HOSTNAME, name)
    for key, values in ((ZONE, ["a", "b"]), (REGION, ["r1", "r2"]), (BETA_ZONE, ["a", "b"])):
        choice = draw(st.sampled_from([None, *values]))
        if choice is not None:
            node.label(key, choice)
    return node.obj()


# Each choice lists its plain case first: hypothesis draws (and shrinks to) the first entries
# most often, so the common case stays common and the odd ones still come up.

@st.composite
def volumes(draw: st.DrawFn, name: str) -> Obj:
    volume = make_pv(name).capacity(draw(st.sampled_from(["5Gi", *SIZES])))
    cls = draw(st.sampled_from(["wait"] * 5 + ["prov", "topo", "imm", "", "beta"]))
    if cls == "beta":
        volume._obj["metadata"].setdefault("annotations", {})[
            "volume.beta.kubernetes.io/storage-class"] = "wait"
    elif cls:
        volume.cls(cls)
    volume.access(*draw(st.sampled_from(ACCESS)))
    terms = draw(st.sampled_from(AFFINITIES))
    for expressions, fields in terms or ():
        volume.node_term(*expressions, fields=fields)
    for key, val in draw(st.sampled_from(ZONE_LABELS)).items():
        volume.label(key, val)
    tier = draw(st.sampled_from([None, "fast", "slow"]))
    if tier is not None:
        volume.label("tier", tier)
    csi = draw(st.sampled_from(CSI))
    if csi is not None:
        volume.csi(csi[0], csi[1] or name)
        if not csi[1]:
            volume._obj["spec"]["csi"]["volumeHandle"] = ""
    claim_ref = draw(st.sampled_from(["none"] * 7 + ["uid", "name", "stale"]))
    if claim_ref != "none":
        claim = draw(st.sampled_from(CLAIM_NAMES))
        uid = {"uid": f"pvc-uid-default-{claim}", "name": None, "stale": "stale"}[claim_ref]
        volume.claim_ref(claim, uid=uid)
    volume.phase(draw(st.sampled_from(["Available"] * 5 + ["Bound", "Released"])))
    odd = draw(st.sampled_from([None] * 8 + ["block", "deleting", "gold"]))
    if odd == "block":
        volume.mode("Block")
    elif odd == "deleting":
        volume.deleting()
    elif odd == "gold":
        volume.attributes_class("gold")
    return volume.obj()


@st.composite
def claims(draw: st.DrawFn, name: str, namespace: str = "default") -> Obj:
    claim = make_pvc(name, namespace).request(draw(st.sampled_from(SIZES[:3])))
    cls = draw(st.sampled_from(CLASS_NAMES))
    if cls and draw(st.sampled_from([False] * 5 + [True])):
        claim.beta_cls(cls)
    elif cls:
        claim.cls(cls)
    claim.access(*draw(st.sampled_from(ACCESS)))
    binding = draw(st.sampled_from(["none"] * 6 + ["bound", "bound", "prebound"]))
    if binding == "bound":
        claim.bound(draw(st.sampled_from([*VOLUME_NAMES, "gone"])))
    elif binding == "prebound":
        claim.prebound(draw(st.sampled_from([*VOLUME_NAMES, "gone"])))
    selected = draw(st.sampled_from([None] * 6 + [*NODE_NAMES[:3], "elsewhere"]))
    if selected is not None:
        claim.selected_node(selected)
    if draw(st.sampled_from([False] * 5 + [True])):
        claim.selector(tier="fast")
    odd = draw(st.sampled_from([None] * 20 + ["lost", "deleting", "block", "gold"]))
    if odd == "lost":
        claim.lost()
    elif odd == "deleting":
        claim.deleting()
    elif odd == "block":
        claim.mode("Block")
    elif odd == "gold":
        claim.attributes_class("gold")
    return claim.obj()


@st.composite
def pods(draw: st.DrawFn, name: str, ephemeral: list[Obj], *, incoming: bool = False) -> Obj:
    """A pod mounting some claims; a generic ephemeral volume's claim goes to ``ephemeral``
    (owned by the pod, except sometimes for the incoming pod, whose claim may also be
    missing)."""
    pod = make_pod(name)
    for claim in draw(st.lists(st.sampled_from(CLAIM_NAMES), unique=True,
                               min_size=1 if incoming else 0, max_size=2 if incoming else 3)):
        pod.pvc(claim)
    if incoming and draw(st.sampled_from([False] * 15 + [True])):
        pod.pvc("c-missing")
    if draw(st.sampled_from([False] * 3 + [True])):
        pod.ephemeral("e0")
        state = draw(st.sampled_from(["owned"] * 6 + ["foreign", "missing"])
                     if incoming else st.just("owned"))
        if state != "missing":
            own = make_pvc(f"{name}-e0")
            cls = draw(st.sampled_from(["wait", "prov", "topo", "imm"]))
            own.cls(cls)
            if cls == "imm" or draw(st.booleans()):  # bound
                own.bound(draw(st.sampled_from(VOLUME_NAMES)))
            if state == "owned":
                own.owned_by(pod.obj())
            ephemeral.append(own.obj())
    return pod.obj()


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    names = NODE_NAMES[: draw(st.integers(1, 5))]
    node_objs = [draw(nodes(name)) for name in names]
    storage: list[Obj] = list(CLASSES)
    storage += [draw(volumes(name)) for name in VOLUME_NAMES[: draw(st.integers(0, 8))]]
    storage += [draw(claims(name)) for name in CLAIM_NAMES
                if draw(st.sampled_from([True] * 15 + [False]))]
    ephemeral: list[Obj] = []
    running = {name: [draw(pods(f"{name}-p{i}", ephemeral))
                      for i in range(draw(st.integers(0, 2)))] for name in names}
    incoming = draw(pods("incoming", ephemeral, incoming=True))
    storage += ephemeral
    for name in names:
        if draw(st.sampled_from([True, True, False])):
            limits = {d: draw(st.sampled_from([None, 0, 1, 2, 3])) for d in ("csi.a", "csi.b")
                      if draw(st.booleans())}
            storage.append(make_csinode(name, limits))
    assumed = {}
    for volume in storage:
        if volume["kind"] == "PersistentVolume" and "claimRef" not in volume["spec"] \
                and draw(st.sampled_from([False] * 4 + [True])):
            assumed[volume["metadata"]["name"]] = ("default", draw(st.sampled_from(CLAIM_NAMES)))
    removed = draw(st.lists(st.sampled_from(names), unique=True, max_size=len(names) - 1))
    return Scenario(node_objs, running, removed, storage, assumed, incoming)


@st.composite
def matching_scenarios(draw: st.DrawFn) -> Scenario:
    """Scenarios for kube's volume matching: a pod of several claims all waiting for their
    first consumer, unbound, and plain available volumes of their classes of various sizes
    and node affinities — so that claims compete for the volumes that fit a node."""
    names = NODE_NAMES[: draw(st.integers(1, 5))]
    node_objs = [draw(nodes(name)) for name in names]
    storage: list[Obj] = list(CLASSES)
    for name in VOLUME_NAMES[: draw(st.integers(1, 8))]:
        volume = make_pv(name).cls(draw(st.sampled_from(["wait", "wait", "prov", "topo"]))) \
            .capacity(draw(st.sampled_from(SIZES))).access(*draw(st.sampled_from(ACCESS[:3])))
        for expressions, fields in draw(st.sampled_from(AFFINITIES)) or ():
            volume.node_term(*expressions, fields=fields)
        if draw(st.sampled_from([False] * 4 + [True])):
            volume.claim_ref(draw(st.sampled_from(CLAIM_NAMES)))
        storage.append(volume.obj())
    pod = make_pod("incoming")
    for name in draw(st.lists(st.sampled_from(CLAIM_NAMES), unique=True, min_size=1,
                              max_size=4)):
        claim = make_pvc(name).cls(draw(st.sampled_from(["wait", "wait", "prov", "topo"]))) \
            .request(draw(st.sampled_from(SIZES[:3]))).access(*draw(st.sampled_from(ACCESS[:3])))
        selected = draw(st.sampled_from([None] * 8 + NODE_NAMES[:3]))
        if selected is not None:
            claim.selected_node(selected)
        storage.append(claim.obj())
        pod.pvc(name)
    assumed = {}
    for obj in storage:
        if obj["kind"] == "PersistentVolume" and "claimRef" not in obj["spec"] \
                and draw(st.sampled_from([False] * 5 + [True])):
            assumed[obj["metadata"]["name"]] = ("default", draw(st.sampled_from(CLAIM_NAMES)))
    removed = draw(st.lists(st.sampled_from(names), unique=True, max_size=len(names) - 1))
    return Scenario(node_objs, {}, removed, storage, assumed, pod.obj())


def _labels(node: Obj) -> dict[str, str]:
    return dict(node["metadata"]["labels"])


def check_volume_binding(s: Scenario) -> None:
    ctx, cluster = s.build()
    got = outcome(VolumeBinding().filter(ctx), ctx.table)
    want = {}
    for node in s.live_nodes():
        name = node["metadata"]["name"]
        found = ref.find_pod_volumes(s.pod, name, _labels(node), cluster)
        want[name] = found.reasons
        chosen = plan(ctx, ctx.table.slots[name])
        if found.reasons:
            assert chosen == found.reasons[0][0], name
        else:
            assert isinstance(chosen, BindingPlan), (name, chosen)
            assert [(c.name, v.name) for c, v in chosen.static] == found.static, name
            assert [c.name for c in chosen.dynamic] == found.dynamic, name
    assert got == want


@SETTINGS
@given(scenarios())
def test_volume_binding(s: Scenario) -> None:
    check_volume_binding(s)


@SETTINGS
@given(matching_scenarios())
def test_volume_binding_matching(s: Scenario) -> None:
    check_volume_binding(s)


@SETTINGS
@given(scenarios())
def test_volume_zone(s: Scenario) -> None:
    ctx, cluster = s.build()
    got = outcome(VolumeZone().filter(ctx), ctx.table)
    assert got == {n["metadata"]["name"]: ref.volume_zone(s.pod, _labels(n), cluster)
                   for n in s.live_nodes()}


@SETTINGS
@given(scenarios())
def test_volume_restrictions(s: Scenario) -> None:
    ctx, cluster = s.build()
    live = [n["metadata"]["name"] for n in s.live_nodes()]
    everyone = [p for name in live for p in s.pods.get(name, [])]
    got = outcome(VolumeRestrictions().filter(ctx), ctx.table)
    assert got == {name: ref.volume_restrictions(s.pod, everyone, cluster) for name in live}


@SETTINGS
@given(scenarios())
def test_node_volume_limits(s: Scenario) -> None:
    ctx, cluster = s.build()
    got = outcome(NodeVolumeLimits().filter(ctx), ctx.table)
    assert got == {n["metadata"]["name"]: ref.node_volume_limits(
        s.pod, n["metadata"]["name"], s.pods.get(n["metadata"]["name"], []), cluster)
        for n in s.live_nodes()}

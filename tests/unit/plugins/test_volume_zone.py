"""VolumeZone: bound volumes' zone and region labels against the node's.

The cases of kube's ``volume_zone_test.go`` (``TestSingleZone``, ``TestMultiZone``,
``TestWithBinding``) with kube's fixtures and messages, on one node each. kube's PreFilter
failures hold on every node; here every node fails with that message. Where kube's test uses a
fake lister (``storageclasses.storage.k8s.io "Class_0" not found``, a class without a binding
mode), the message is the one the real informer lister gives and the class is defaulted as the
API server does (``Immediate``).
"""

from __future__ import annotations

from typing import Any

import pytest

from pyscheduler.plugins.volume_zone import ERR_REASON, NAME, VolumeZone, zones
from tests.unit.plugins.builders import (
    context,
    make_node,
    make_pod,
    make_pv,
    make_pvc,
    make_storage_class,
    outcome,
)

Obj = dict[str, Any]
BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION = "failure-domain.beta.kubernetes.io/region"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
CONFLICT = [(ERR_REASON, True)]


def pv(name: str, **labels: str) -> Obj:
    volume = make_pv(name)
    for key, value in labels.items():
        volume.label(key, value)
    return volume.obj()


def pvc(name: str, volume: str = "", cls: str = "") -> Obj:
    claim = make_pvc(name)
    if volume:
        claim.bound(volume)
    if cls:
        claim.cls(cls)
    return claim.obj()


SINGLE_ZONE = [
    pv("Vol_1", **{BETA_ZONE: "us-west1-a"}),
    pv("Vol_2", **{BETA_REGION: "us-west1", "uselessLabel": "none"}),
    pv("Vol_3", **{BETA_REGION: "us-west1"}),
    pv("Vol_Stable_1", **{ZONE: "us-west1-a"}),
    pv("Vol_Stable_2", **{REGION: "us-west1", "uselessLabel": "none"}),
    pv("Vol_Stable_3", **{ZONE: "us-west1-a", REGION: "us-west1-a"}),
    pvc("PVC_1", "Vol_1"), pvc("PVC_2", "Vol_2"), pvc("PVC_3", "Vol_3"),
    pvc("PVC_4", "Vol_not_exist"), pvc("PVC_Stable_1", "Vol_Stable_1"),
    pvc("PVC_Stable_2", "Vol_Stable_2"), pvc("PVC_Stable_3", "Vol_Stable_3"),
]
MULTI_ZONE = [
    pv("Vol_1", **{BETA_ZONE: "us-west1-a"}),
    pv("Vol_2", **{BETA_ZONE: "us-west1-b", "uselessLabel": "none"}),
    pv("Vol_3", **{BETA_ZONE: "us-west1-c__us-west1-a"}),
    pv("Vol_Stable_1", **{ZONE: "us-west1-a"}),
    pv("Vol_Stable_2", **{ZONE: "us-west1-c__us-west1-a"}),
    pvc("PVC_1", "Vol_1"), pvc("PVC_2", "Vol_2"), pvc("PVC_3", "Vol_3"),
    pvc("PVC_4", "Vol_not_exist"), pvc("PVC_Stable_1", "Vol_Stable_1"),
    pvc("PVC_Stable_2", "Vol_Stable_2"),
]
WITH_BINDING = [
    make_storage_class("Class_Immediate", mode="Immediate"),
    make_storage_class("Class_Wait"),
    pv("Vol_1", **{BETA_ZONE: "us-west1-a"}),
    pvc("PVC_1", "Vol_1"), pvc("PVC_NoSC", cls="Class_0"), pvc("PVC_EmptySC"),
    pvc("PVC_WaitSC", cls="Class_Wait"), pvc("PVC_ImmediateSC", cls="Class_Immediate"),
]
TEST_NODE = {BETA_ZONE: "us-west1-a", "uselessLabel": "none"}


def node(**labels: str) -> Obj:
    return make_node("host1").labels(labels).obj()


@pytest.mark.parametrize(("storage", "claim", "labels", "want"), [
    # TestSingleZone
    pytest.param(SINGLE_ZONE, None, {BETA_ZONE: "us-west1-a"}, [], id="pod without volume"),
    pytest.param(SINGLE_ZONE, "PVC_1", {}, [], id="node without labels"),
    pytest.param(SINGLE_ZONE, "PVC_1", {BETA_ZONE: "us-west1-a", "uselessLabel": "none"}, [],
                 id="beta zone label matched"),
    pytest.param(SINGLE_ZONE, "PVC_2", {BETA_REGION: "us-west1", "uselessLabel": "none"}, [],
                 id="beta region label matched"),
    pytest.param(SINGLE_ZONE, "PVC_2", {BETA_REGION: "no_us-west1", "uselessLabel": "none"},
                 CONFLICT, id="beta region label doesn't match"),
    pytest.param(SINGLE_ZONE, "PVC_1", {BETA_ZONE: "no_us-west1-a", "uselessLabel": "none"},
                 CONFLICT, id="beta zone label doesn't match"),
    pytest.param(SINGLE_ZONE, "PVC_Stable_1", {ZONE: "us-west1-a", "uselessLabel": "none"}, [],
                 id="zone label matched"),
    pytest.param(SINGLE_ZONE, "PVC_Stable_2", {REGION: "us-west1", "uselessLabel": "none"}, [],
                 id="region label matched"),
    pytest.param(SINGLE_ZONE, "PVC_Stable_2", {REGION: "no_us-west1", "uselessLabel": "none"},
                 CONFLICT, id="region label doesn't match"),
    pytest.param(SINGLE_ZONE, "PVC_Stable_1", {ZONE: "no_us-west1-a", "uselessLabel": "none"},
                 CONFLICT, id="zone label doesn't match"),
    pytest.param(SINGLE_ZONE, "PVC_Stable_3", {ZONE: "us-west1-a"}, CONFLICT,
                 id="pv with zone and region, node with only zone"),
    pytest.param(SINGLE_ZONE, "PVC_Stable_1", {BETA_ZONE: "us-west1-a"}, CONFLICT,
                 id="pv with zone,node with beta zone"),
    pytest.param(SINGLE_ZONE, "PVC_1", {ZONE: "us-west1-a"}, [],
                 id="pv with beta label,node with ga label, matched"),
    pytest.param(SINGLE_ZONE, "PVC_1", {ZONE: "us-west1-b"}, CONFLICT,
                 id="pv with beta label,node with ga label, don't match"),
    pytest.param(SINGLE_ZONE, "PVC_4", {ZONE: "us-west1-a"},
                 [('persistentvolume "Vol_not_exist" not found', True)], id="pv not found"),
    # TestMultiZone
    pytest.param(MULTI_ZONE, "PVC_3", {}, [], id="multi: node without labels"),
    pytest.param(MULTI_ZONE, "PVC_3", {BETA_ZONE: "us-west1-a", "uselessLabel": "none"}, [],
                 id="multi: beta zone label matched"),
    pytest.param(MULTI_ZONE, "PVC_1", {BETA_ZONE: "us-west1-b", "uselessLabel": "none"},
                 CONFLICT, id="multi: beta zone label doesn't match"),
    pytest.param(MULTI_ZONE, "PVC_Stable_2", {ZONE: "us-west1-a", "uselessLabel": "none"}, [],
                 id="multi: zone label matched"),
    pytest.param(MULTI_ZONE, "PVC_Stable_1", {ZONE: "us-west1-b", "uselessLabel": "none"},
                 CONFLICT, id="multi: zone label doesn't match"),
    # TestWithBinding
    pytest.param(WITH_BINDING, "PVC_1", TEST_NODE, [], id="label zone failure domain matched"),
    pytest.param(WITH_BINDING, "PVC_EmptySC", TEST_NODE,
                 [("PersistentVolumeClaim had no pv name and storageClass name", True)],
                 id="unbound volume empty storage class"),
    pytest.param(WITH_BINDING, "PVC_NoSC", TEST_NODE,
                 [('storageclass.storage.k8s.io "Class_0" not found', True)],
                 id="unbound volume no storage class"),
    pytest.param(WITH_BINDING, "PVC_ImmediateSC", TEST_NODE,
                 [("PersistentVolume had no name", True)],
                 id="unbound volume immediate binding mode"),
    pytest.param(WITH_BINDING, "PVC_WaitSC", TEST_NODE, [], id="unbound volume wait binding mode"),
    pytest.param(WITH_BINDING, "PVC_missing", TEST_NODE,
                 [('persistentvolumeclaim "PVC_missing" not found', True)], id="pvc not found"),
])
def test_kube_volume_zone(storage: list[Obj], claim: str | None, labels: dict[str, str],
                          want: list[tuple[str, bool]]) -> None:
    pod = make_pod("pod_1")
    if claim is not None:
        pod.pvc(claim)
    ctx = context(pod.obj(), [node(**labels)], storage=storage)
    assert outcome(VolumeZone().filter(ctx), ctx.table) == {"host1": want}


def test_every_volume_and_label_must_match() -> None:
    storage = [pv("east", **{ZONE: "a", REGION: "r1"}), pv("west", **{ZONE: "a__b"}),
               pvc("one", "east"), pvc("two", "west")]
    nodes = [make_node("n-a").labels({ZONE: "a", REGION: "r1"}).obj(),
             make_node("n-b").labels({ZONE: "b", REGION: "r1"}).obj(),
             make_node("n-a-r2").labels({ZONE: "a", REGION: "r2"}).obj(),
             make_node("plain").label("other", "x").obj()]
    ctx = context(make_pod().pvc("one").pvc("two").obj(), nodes, storage=storage)
    assert outcome(VolumeZone().filter(ctx), ctx.table) == {
        "n-a": [], "n-b": CONFLICT, "n-a-r2": CONFLICT, "plain": []}


def test_beta_label_is_read_before_the_ga_one() -> None:
    """A node with the deprecated label is judged by it, even when its GA label matches."""
    ctx = context(make_pod().pvc("c").obj(),
                  [make_node("n").labels({BETA_ZONE: "b", ZONE: "a"}).obj()],
                  storage=[pv("v", **{BETA_ZONE: "a"}), pvc("c", "v")])
    assert outcome(VolumeZone().filter(ctx), ctx.table) == {"n": CONFLICT}


def test_ephemeral_volumes_are_not_looked_at() -> None:
    pod = make_pod("web").ephemeral("scratch").obj()
    ctx = context(pod, [node(**{ZONE: "b"})],
                  storage=[pv("v", **{ZONE: "a"}), pvc("web-scratch", "v")])
    assert VolumeZone().filter(ctx).passed is None


@pytest.mark.parametrize(("label", "want"), [
    pytest.param("a", frozenset({"a"}), id="one"),
    pytest.param("a__b", frozenset({"a", "b"}), id="two"),
    pytest.param(" a __ b", frozenset({"a", "b"}), id="trimmed"),
    pytest.param("a____b", None, id="an empty entry: label ignored"),
    pytest.param("", None, id="empty"),
])
def test_label_zones_to_set(label: str, want: frozenset[str] | None) -> None:
    assert zones(label) == want


def test_name() -> None:
    assert NAME == VolumeZone.name == "VolumeZone"


def test_pod_level_problems_are_prefilter_rejections() -> None:
    ctx = context(make_pod().pvc("missing").obj(), [node(**{ZONE: "a"})], storage=[])
    [reason] = VolumeZone().filter(ctx).reasons
    assert reason.prefilter and reason.unresolvable
    ctx = context(make_pod().pvc("c").obj(), [node(**{ZONE: "b"})],
                  storage=[pv("v", **{ZONE: "a"}), pvc("c", "v")])
    [reason] = VolumeZone().filter(ctx).reasons
    assert not reason.prefilter

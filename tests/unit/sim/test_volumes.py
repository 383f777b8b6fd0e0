"""The embedded cluster's PersistentVolume controller and simulated provisioner, driven
reconcile by reconcile against a registry (no HTTP, no timers): binding, provisioning and its
topology, reclaiming, protection and the retroactive default class."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pyscheduler_sim.controller import Controller
from pyscheduler_sim.registry import Registry
from pyscheduler_sim.volumes import PersistentVolumeController

Obj = dict[str, Any]
ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"


class World:
    """A registry, the PV controller, and shorthands."""

    def __init__(self) -> None:
        self.r = Registry()
        self.controller = PersistentVolumeController(self.r)
        self.pvs = self.r.type("", "v1", "persistentvolumes")
        self.pvcs = self.r.type("", "v1", "persistentvolumeclaims")
        self.classes = self.r.type("storage.k8s.io", "v1", "storageclasses")
        self.csinodes = self.r.type("storage.k8s.io", "v1", "csinodes")

    def settle(self) -> None:
        """Reconcile everything until nothing changes any more."""
        asyncio.run(_settle(self.r, [self.controller]))

    def node(self, name: str, **labels: str) -> None:
        self.r.create(self.r.nodes, "", {"metadata": {"name": name, "labels": {
            HOSTNAME: name, **labels}}})

    def sc(self, name: str, provisioner: str = "ebs.csi.aws.com", default: bool = False,
           **fields: Any) -> None:
        meta: Obj = {"name": name}
        if default:
            meta["annotations"] = {"storageclass.kubernetes.io/is-default-class": "true"}
        self.r.create(self.classes, "", {"metadata": meta, "provisioner": provisioner,
                                         **fields})

    def pv(self, name: str, size: str = "5Gi", modes: tuple[str, ...] = ("ReadWriteOnce",),
           labels: Obj | None = None, **spec: Any) -> None:
        self.r.create(self.pvs, "", {"metadata": {"name": name, "labels": labels or {}},
                                     "spec": {"capacity": {"storage": size},
                                              "accessModes": list(modes),
                                              "hostPath": {"path": f"/{name}"}, **spec}})

    def pvc(self, name: str, size: str = "1Gi", modes: tuple[str, ...] = ("ReadWriteOnce",),
            annotations: Obj | None = None, **spec: Any) -> None:
        self.r.create(self.pvcs, "default", {
            "metadata": {"name": name, "annotations": annotations or {}},
            "spec": {"accessModes": list(modes), "resources": {"requests": {"storage": size}},
                     **spec}})

    def claim(self, name: str) -> Obj:
        return self.r.get(self.pvcs, "default", name)

    def volume(self, name: str) -> Obj:
        return self.r.get(self.pvs, "", name)

    def volumes(self) -> set[str]:
        return {s.name for s in self.r.store.iter(self.pvs)}

    def events(self, name: str) -> list[tuple[str, str, str]]:
        return [(e["type"], e["reason"], e["message"])
                for e in (s.view for s in self.r.store.iter(self.r.events))
                if e["involvedObject"]["name"] == name]


async def _settle(registry: Registry, controllers: list[Controller]) -> None:
    for _ in range(30):
        before = registry.store.rv
        for controller in controllers:
            for key in list(controller.all_keys()):
                await controller.reconcile(key)
        if registry.store.rv == before:
            return
    raise AssertionError("the controllers did not settle")


@pytest.fixture
def w() -> World:
    return World()


def bound(w: World, claim: str) -> str:
    pvc = w.claim(claim)
    assert pvc["status"]["phase"] == "Bound", pvc["status"]
    return str(pvc["spec"]["volumeName"])


# -- binding ------------------------------------------------------------------------------------

def test_new_volume_becomes_available(w: World) -> None:
    w.pv("pv-a")
    assert w.volume("pv-a")["status"]["phase"] == "Pending"
    w.settle()
    assert w.volume("pv-a")["status"]["phase"] == "Available"


def test_claim_binds_to_the_smallest_volume_that_fits(w: World) -> None:
    w.pv("pv-big", "10Gi")
    w.pv("pv-small", "2Gi")
    w.pv("pv-tiny", "500Mi")
    w.pv("pv-rox", "2Gi", modes=("ReadOnlyMany",))
    w.pvc("data", "1Gi", storageClassName="")
    w.settle()
    assert bound(w, "data") == "pv-small"
    pvc, pv = w.claim("data"), w.volume("pv-small")
    assert pvc["metadata"]["annotations"] == {"pv.kubernetes.io/bind-completed": "yes",
                                              "pv.kubernetes.io/bound-by-controller": "yes"}
    assert pvc["status"] == {"phase": "Bound", "accessModes": ["ReadWriteOnce"],
                             "capacity": {"storage": "2Gi"}}
    ref = pv["spec"]["claimRef"]
    assert (ref["kind"], ref["namespace"], ref["name"], ref["uid"], ref["apiVersion"]) == (
        "PersistentVolumeClaim", "default", "data", pvc["metadata"]["uid"], "v1")
    assert pv["metadata"]["annotations"] == {"pv.kubernetes.io/bound-by-controller": "yes"}
    assert pv["status"]["phase"] == "Bound"
    assert w.volume("pv-big")["status"]["phase"] == "Available"


def test_fewest_access_modes_first_then_size(w: World) -> None:
    w.pv("pv-many", "1Gi", modes=("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany"))
    w.pv("pv-one", "8Gi")
    w.pvc("data", storageClassName="")
    w.settle()
    assert bound(w, "data") == "pv-one"


@pytest.mark.parametrize("claim,expected", [
    pytest.param({"storageClassName": "gold"}, "pv-gold", id="class must be equal"),
    pytest.param({"storageClassName": "",
                  "selector": {"matchLabels": {"tier": "fast"}}}, "pv-fast", id="selector"),
    pytest.param({"storageClassName": "", "volumeMode": "Block"}, "pv-block", id="volume mode"),
])
def test_matching_rules(w: World, claim: Obj, expected: str) -> None:
    w.pv("pv-plain", "1Gi")
    w.pv("pv-gold", "9Gi", storageClassName="gold")
    w.pv("pv-fast", "9Gi", labels={"tier": "fast"})
    w.pv("pv-block", "9Gi", volumeMode="Block")
    w.pvc("data", **claim)
    w.settle()
    assert bound(w, "data") == expected


def test_unmatched_claim_without_class_stays_pending(w: World) -> None:
    w.pv("pv-small", "100Mi")
    w.pvc("data", "1Gi")
    w.settle()
    assert w.claim("data")["status"] == {"phase": "Pending"}
    assert w.events("data") == [("Normal", "FailedBinding", "no persistent volumes available "
                                 "for this claim and no storage class is set")]


def test_volume_pre_bound_by_hand_wins(w: World) -> None:
    w.pv("pv-small", "1Gi")
    w.pv("pv-mine", "9Gi", claimRef={"namespace": "default", "name": "data"})
    w.pvc("data", storageClassName="")
    w.settle()
    assert bound(w, "data") == "pv-mine"
    # The reference was the user's: the volume is not marked as bound by the controller.
    assert "pv.kubernetes.io/bound-by-controller" not in (
        w.volume("pv-mine")["metadata"].get("annotations") or {})
    assert w.volume("pv-mine")["spec"]["claimRef"]["uid"] == w.claim("data")["metadata"]["uid"]


def test_claim_naming_its_volume(w: World) -> None:
    w.pv("pv-a", "1Gi")
    w.pv("pv-b", "1Gi")
    w.pvc("data", "1Gi", storageClassName="", volumeName="pv-b")
    w.pvc("big", "5Gi", storageClassName="", volumeName="pv-a")
    w.settle()
    assert bound(w, "data") == "pv-b"
    assert w.claim("big")["status"]["phase"] == "Pending"
    assert w.events("big") == [("Warning", "VolumeMismatch",
                                'Cannot bind to requested volume "pv-a": requested PV is too '
                                "small")]


# -- WaitForFirstConsumer and the scheduler ----------------------------------------------------

def test_wait_for_first_consumer_is_left_to_the_scheduler(w: World) -> None:
    w.sc("local", provisioner="kubernetes.io/no-provisioner",
         volumeBindingMode="WaitForFirstConsumer")
    w.pv("pv-local", "5Gi", storageClassName="local")
    w.pvc("data", storageClassName="local")
    w.settle()
    assert w.claim("data")["status"]["phase"] == "Pending"
    assert w.volume("pv-local")["status"]["phase"] == "Available"
    assert w.events("data") == [("Normal", "WaitForFirstConsumer",
                                 "waiting for first consumer to be created before binding")]
    # The scheduler's VolumeBinding plugin pre-binds the volume; the controller completes it.
    pv = w.volume("pv-local")
    pvc = w.claim("data")
    pv["spec"]["claimRef"] = {"kind": "PersistentVolumeClaim", "namespace": "default",
                              "name": "data", "uid": pvc["metadata"]["uid"], "apiVersion": "v1"}
    pv["metadata"]["annotations"] = {"pv.kubernetes.io/bound-by-controller": "yes"}
    w.r.update(w.pvs, "", "pv-local", pv)
    w.settle()
    assert bound(w, "data") == "pv-local"
    assert w.volume("pv-local")["status"]["phase"] == "Bound"


def provisioned(w: World, claim: str) -> Obj:
    pvc = w.claim(claim)
    return w.volume(f"pvc-{pvc['metadata']['uid']}")


def test_immediate_class_provisions_at_once(w: World) -> None:
    w.sc("fast", reclaimPolicy="Retain", mountOptions=["noatime"])
    w.pvc("data", "3Gi", storageClassName="fast")
    w.settle()
    pv = provisioned(w, "data")
    assert bound(w, "data") == pv["metadata"]["name"]
    annotations = w.claim("data")["metadata"]["annotations"]
    assert annotations["volume.kubernetes.io/storage-provisioner"] == "ebs.csi.aws.com"
    assert annotations["volume.beta.kubernetes.io/storage-provisioner"] == "ebs.csi.aws.com"
    spec = pv["spec"]
    assert spec["capacity"] == {"storage": "3Gi"}
    assert (spec["persistentVolumeReclaimPolicy"], spec["storageClassName"],
            spec["mountOptions"], spec["volumeMode"]) == ("Retain", "fast", ["noatime"],
                                                          "Filesystem")
    assert spec["csi"] == {"driver": "ebs.csi.aws.com", "volumeHandle": pv["metadata"]["name"],
                           "fsType": "ext4"}
    assert "nodeAffinity" not in spec
    assert pv["metadata"]["annotations"] == {"pv.kubernetes.io/provisioned-by":
                                             "ebs.csi.aws.com"}
    assert [reason for _, reason, _ in w.events("data")] == [
        "ExternalProvisioning", "Provisioning", "ProvisioningSucceeded"]


def test_waiting_class_provisions_in_the_selected_nodes_zone(w: World) -> None:
    w.node("node-1", **{ZONE: "zone-b"})
    w.sc("wait", volumeBindingMode="WaitForFirstConsumer")
    w.pvc("data", storageClassName="wait")
    w.settle()
    assert w.volumes() == set()
    pvc = w.claim("data")
    pvc["metadata"]["annotations"] = {"volume.kubernetes.io/selected-node": "node-1"}
    w.r.update(w.pvcs, "default", "data", pvc)
    w.settle()
    pv = provisioned(w, "data")
    assert bound(w, "data") == pv["metadata"]["name"]
    assert pv["spec"]["nodeAffinity"] == {"required": {"nodeSelectorTerms": [{
        "matchExpressions": [{"key": ZONE, "operator": "In", "values": ["zone-b"]}]}]}}


@pytest.mark.parametrize("provisioner,csinode,allowed,expected", [
    pytest.param("topo.csi", ["topology.topo.csi/node", ZONE], None,
                 [("topology.topo.csi/node", "n-7"), (ZONE, "zone-b")],
                 id="the CSINode's topology keys"),
    pytest.param("rancher.io/local-path", None, None, [(HOSTNAME, "node-1")],
                 id="a local provisioner: the hostname"),
    pytest.param("ebs.csi.aws.com", None,
                 [{"matchLabelExpressions": [{"key": "topology.kubernetes.io/region",
                                              "values": ["r1"]}]}],
                 [("topology.kubernetes.io/region", "r1")],
                 id="the keys of the allowed topologies"),
])
def test_topology_of_a_provisioned_volume(w: World, provisioner: str, csinode: list[str] | None,
                                          allowed: list[Obj] | None,
                                          expected: list[tuple[str, str]]) -> None:
    w.node("node-1", **{ZONE: "zone-b", "topology.topo.csi/node": "n-7",
                        "topology.kubernetes.io/region": "r1"})
    if csinode is not None:
        w.r.create(w.csinodes, "", {"metadata": {"name": "node-1"}, "spec": {"drivers": [
            {"name": provisioner, "nodeID": "n-7", "topologyKeys": csinode}]}})
    extra = {"allowedTopologies": allowed} if allowed else {}
    w.sc("wait", provisioner=provisioner, volumeBindingMode="WaitForFirstConsumer", **extra)
    w.pvc("data", storageClassName="wait",
          annotations={"volume.kubernetes.io/selected-node": "node-1"})
    w.settle()
    pv = provisioned(w, "data")
    terms = pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
    assert [(e["key"], e["values"][0]) for e in terms[0]["matchExpressions"]] == expected
    if provisioner == "rancher.io/local-path":
        # Not a CSI driver name: a host path.
        assert pv["spec"]["hostPath"]["path"].endswith(pv["metadata"]["name"])


def test_node_outside_the_allowed_topologies_is_refused(w: World) -> None:
    w.node("node-1", **{ZONE: "zone-b"})
    w.sc("wait", volumeBindingMode="WaitForFirstConsumer", allowedTopologies=[
        {"matchLabelExpressions": [{"key": ZONE, "values": ["zone-a"]}]}])
    w.pvc("data", storageClassName="wait",
          annotations={"volume.kubernetes.io/selected-node": "node-1"})
    w.settle()
    assert w.volumes() == set()
    assert ("Warning", "ProvisioningFailed",
            'failed to provision volume with StorageClass "wait": node "node-1" does not match '
            "the allowedTopologies of the class") in w.events("data")


def test_immediate_provisioning_takes_the_first_allowed_topology(w: World) -> None:
    w.sc("fast", allowedTopologies=[{"matchLabelExpressions": [
        {"key": ZONE, "values": ["zone-c", "zone-a"]}]}])
    w.pvc("data", storageClassName="fast")
    w.settle()
    assert provisioned(w, "data")["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"] == [
        {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["zone-c"]}]}]


@pytest.mark.parametrize("class_name,provisioner,message", [
    pytest.param("none", "kubernetes.io/no-provisioner",
                 "no volume plugin matched name: kubernetes.io/no-provisioner",
                 id="no provisioner"),
    pytest.param("missing", None, 'storageclass.storage.k8s.io "missing" not found',
                 id="missing class"),
])
def test_claims_that_cannot_be_provisioned(w: World, class_name: str, provisioner: str | None,
                                           message: str) -> None:
    if provisioner is not None:
        w.sc(class_name, provisioner=provisioner)
    w.pvc("data", storageClassName=class_name)
    w.settle()
    assert w.claim("data")["status"]["phase"] == "Pending"
    assert w.events("data") == [("Warning", "ProvisioningFailed", message)]
    assert w.volumes() == set()


def test_default_class_is_given_to_waiting_claims_retroactively(w: World) -> None:
    w.pvc("data")
    w.settle()
    assert "storageClassName" not in w.claim("data")["spec"]
    w.sc("fast", default=True)
    w.settle()
    assert w.claim("data")["spec"]["storageClassName"] == "fast"
    assert bound(w, "data") == provisioned(w, "data")["metadata"]["name"]


# -- reclaiming and protection ------------------------------------------------------------------

def test_deleting_the_claim_of_a_provisioned_volume_deletes_the_volume(w: World) -> None:
    w.sc("fast")
    w.pvc("data", storageClassName="fast")
    w.settle()
    name = provisioned(w, "data")["metadata"]["name"]
    w.r.delete(w.pvcs, "default", "data")
    w.settle()
    assert w.r.store.get(w.pvcs, "default", "data") is None
    assert name not in w.volumes()


@pytest.mark.parametrize("policy,phase", [
    pytest.param("Retain", "Released", id="retain"),
    pytest.param("Delete", "Failed", id="delete a volume no provisioner made"),
    pytest.param("Recycle", "Available", id="recycle"),
])
def test_reclaim_policies(w: World, policy: str, phase: str) -> None:
    w.pv("pv-a", persistentVolumeReclaimPolicy=policy)
    w.pvc("data", storageClassName="")
    w.settle()
    assert bound(w, "data") == "pv-a"
    w.r.delete(w.pvcs, "default", "data")
    w.settle()
    pv = w.volume("pv-a")
    assert pv["status"]["phase"] == phase
    if phase == "Failed":
        message = ('error getting deleter volume plugin for volume "pv-a": no deletable volume '
                   "plugin matched")
        assert pv["status"]["message"] == message
        assert w.events("pv-a") == [("Warning", "VolumeFailedDelete", message)]
    if phase == "Available":
        assert "claimRef" not in pv["spec"]


def test_a_claim_in_use_stays_until_its_pod_is_gone(w: World) -> None:
    w.pv("pv-a")
    w.pvc("data", storageClassName="")
    w.settle()
    w.r.create(w.r.pods, "default", {"metadata": {"name": "user"}, "spec": {
        "nodeName": "node-0", "containers": [{"name": "c", "image": "pause"}],
        "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "data"}}]}})
    w.r.delete(w.pvcs, "default", "data")
    w.settle()
    claim = w.claim("data")
    assert claim["metadata"]["deletionTimestamp"]
    assert claim["metadata"]["finalizers"] == ["kubernetes.io/pvc-protection"]
    # The bound volume is protected too while its claim lives.
    w.r.delete(w.pvs, "", "pv-a")
    w.settle()
    assert w.volume("pv-a")["metadata"]["deletionTimestamp"]
    w.r.remove_now(w.r.pods, "default", "user")
    w.settle()
    assert w.r.store.get(w.pvcs, "default", "data") is None
    # The volume's claim is gone: Released (Retain), no longer Bound, so it goes too.
    assert w.volumes() == set()


def test_a_lost_volume_makes_the_bound_claim_lost(w: World) -> None:
    w.pv("pv-a")
    w.pvc("data", storageClassName="")
    w.settle()
    w.r.remove_now(w.pvs, "", "pv-a")  # bypassing its finalizer, as an etcd mishap would
    w.settle()
    assert w.claim("data")["status"]["phase"] == "Lost"
    assert ("Warning", "ClaimLost", "Bound claim has lost reference to PersistentVolume. Data "
            "on the volume is lost!") in w.events("data")

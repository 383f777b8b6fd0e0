"""Storage on the embedded cluster, through the official client and kubectl: StorageClasses
(with a default one), PersistentVolumes and claims bound by the PV controller, provisioning by
the simulated provisioner (at once, or in the node the scheduler selected), the scheduler's
pre-binding, reclaiming, CSINodes and CSIDrivers, and kube's validation messages.

The cluster is this module's own: a default StorageClass changes every claim created after it,
which must not leak into other tests."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from pyscheduler_sim.harness import BackgroundCluster
from tests.conftest import KUBECTL, Kubectl, small_cluster, wait_for

ZONE = "topology.kubernetes.io/zone"


@pytest.fixture(scope="module")
def own(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BackgroundCluster]:
    with BackgroundCluster(small_cluster(), tmp_path_factory.mktemp("storage")) as c:
        yield c


@pytest.fixture(scope="module")
def api(own: BackgroundCluster) -> client.ApiClient:
    return config.new_client_from_config(config_file=str(own.kubeconfig))


@pytest.fixture(scope="module")
def core(api: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api)


@pytest.fixture(scope="module")
def storage(api: client.ApiClient) -> client.StorageV1Api:
    return client.StorageV1Api(api)


@pytest.fixture(scope="module")
def kubectl(own: BackgroundCluster, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    if KUBECTL is None:
        pytest.skip("kubectl is not installed on this machine")
    return Kubectl(Path(own.kubeconfig), tmp_path_factory.mktemp("kubectl-cache"))


@pytest.fixture
def namespace(core: client.CoreV1Api) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": name}})
    return name


@pytest.fixture(scope="module")
def default_class(storage: client.StorageV1Api) -> str:
    """A default WaitForFirstConsumer class, as most clusters have."""
    storage.create_storage_class({
        "metadata": {"name": "standard",
                     "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
        "provisioner": "ebs.csi.aws.com", "volumeBindingMode": "WaitForFirstConsumer"})
    return "standard"


def claim(name: str, size: str = "1Gi", **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name},
            "spec": {"accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": size}}, **spec}}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def bound_claim(core: client.CoreV1Api, namespace: str, name: str) -> Any:
    return wait_for(lambda: (c := core.read_namespaced_persistent_volume_claim(name, namespace))
                    .status.phase == "Bound" and c, what=f"claim {name} bound")


def event_reasons(core: client.CoreV1Api, namespace: str, name: str) -> list[str]:
    return [e.reason for e in core.list_namespaced_event(
        namespace, field_selector=f"involvedObject.name={name}").items]


def test_default_class_and_provisioning_in_the_selected_nodes_zone(
        core: client.CoreV1Api, storage: client.StorageV1Api, namespace: str,
        default_class: str) -> None:
    created = core.create_namespaced_persistent_volume_claim(namespace, claim("data"))
    assert created.spec.storage_class_name == default_class
    assert created.status.phase == "Pending" and created.spec.volume_mode == "Filesystem"
    assert created.metadata.finalizers == ["kubernetes.io/pvc-protection"]
    wait_for(lambda: "WaitForFirstConsumer" in event_reasons(core, namespace, "data"),
             what="the WaitForFirstConsumer event")
    # The scheduler chose node-1 (zone-b): the provisioner makes a volume there.
    core.patch_namespaced_persistent_volume_claim("data", namespace, {"metadata": {
        "annotations": {"volume.kubernetes.io/selected-node": "node-1"}}})
    pvc = bound_claim(core, namespace, "data")
    assert pvc.spec.volume_name == f"pvc-{pvc.metadata.uid}"
    assert pvc.metadata.annotations["volume.kubernetes.io/storage-provisioner"] == \
        "ebs.csi.aws.com"
    assert pvc.metadata.annotations["pv.kubernetes.io/bind-completed"] == "yes"
    assert pvc.status.capacity == {"storage": "1Gi"}
    pv = core.read_persistent_volume(pvc.spec.volume_name)
    assert pv.status.phase == "Bound" and pv.spec.claim_ref.name == "data"
    assert pv.metadata.annotations["pv.kubernetes.io/provisioned-by"] == "ebs.csi.aws.com"
    expression = pv.spec.node_affinity.required.node_selector_terms[0].match_expressions[0]
    assert (expression.key, expression.operator, expression.values) == (ZONE, "In", ["zone-b"])
    assert pv.spec.csi.driver == "ebs.csi.aws.com"
    assert pv.spec.persistent_volume_reclaim_policy == "Delete"
    assert {"ExternalProvisioning", "ProvisioningSucceeded"} <= set(
        event_reasons(core, namespace, "data"))
    # Reclaim policy Delete: the claim goes, and the volume with it.
    core.delete_namespaced_persistent_volume_claim("data", namespace)
    wait_for(lambda: pv.metadata.name not in {v.metadata.name for v in
                                              core.list_persistent_volume().items},
             what="the provisioned volume deleted")


def test_static_volume_binding_and_release(core: client.CoreV1Api, namespace: str) -> None:
    small, big = unique("pv-small"), unique("pv-big")
    for name, size in ((small, "2Gi"), (big, "20Gi")):
        core.create_persistent_volume({"metadata": {"name": name, "labels": {"ns": namespace}},
                                       "spec": {"capacity": {"storage": size},
                                                "accessModes": ["ReadWriteOnce"],
                                                "nfs": {"server": "nfs.local", "path": "/x"}}})
    fresh = core.read_persistent_volume(small)
    assert fresh.spec.persistent_volume_reclaim_policy == "Retain"
    assert fresh.status.phase in ("Pending", "Available")
    selector = {"matchLabels": {"ns": namespace}}
    core.create_namespaced_persistent_volume_claim(
        namespace, claim("data", storageClassName="", selector=selector))
    pvc = bound_claim(core, namespace, "data")
    assert pvc.spec.volume_name == small
    assert pvc.status.capacity == {"storage": "2Gi"}
    assert pvc.metadata.annotations["pv.kubernetes.io/bound-by-controller"] == "yes"
    pv = core.read_persistent_volume(small)
    assert pv.metadata.annotations["pv.kubernetes.io/bound-by-controller"] == "yes"
    assert pv.spec.claim_ref.uid == pvc.metadata.uid
    core.delete_namespaced_persistent_volume_claim("data", namespace)
    wait_for(lambda: core.read_persistent_volume(small).status.phase == "Released",
             what="the volume released")
    assert core.read_persistent_volume(big).status.phase == "Available"


def test_scheduler_prebinding_is_completed(core: client.CoreV1Api, storage: client.StorageV1Api,
                                           namespace: str) -> None:
    """kube-scheduler's VolumeBinding plugin writes the claimRef of a WaitForFirstConsumer
    volume; the PV controller finishes the binding."""
    local = unique("local")
    storage.create_storage_class({"metadata": {"name": local},
                                  "provisioner": "kubernetes.io/no-provisioner",
                                  "volumeBindingMode": "WaitForFirstConsumer"})
    name = unique("pv-local")
    core.create_persistent_volume({"metadata": {"name": name}, "spec": {
        "capacity": {"storage": "5Gi"}, "accessModes": ["ReadWriteOnce"],
        "storageClassName": local, "local": {"path": "/mnt/disks/1"},
        "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": ["node-0"]}]}]}}}})
    pvc = core.create_namespaced_persistent_volume_claim(namespace,
                                                        claim("data", storageClassName=local))
    wait_for(lambda: core.read_persistent_volume(name).status.phase == "Available",
             what="the volume available")
    core.patch_persistent_volume(name, {
        "metadata": {"annotations": {"pv.kubernetes.io/bound-by-controller": "yes"}},
        "spec": {"claimRef": {"kind": "PersistentVolumeClaim", "namespace": namespace,
                              "name": "data", "uid": pvc.metadata.uid, "apiVersion": "v1"}}})
    assert bound_claim(core, namespace, "data").spec.volume_name == name


def test_invalid_objects_get_kubes_messages(core: client.CoreV1Api, namespace: str,
                                            kubectl: Kubectl) -> None:
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_persistent_volume_claim(namespace, {
            "metadata": {"name": "bad"},
            "spec": {"accessModes": ["ReadWriteOncePod", "ReadWriteOnce"]}})
    assert caught.value.status == 422
    assert json.loads(caught.value.body)["message"] == (
        'PersistentVolumeClaim "bad" is invalid: [spec.accessModes: Forbidden: may not use '
        "ReadWriteOncePod with other access modes, spec.resources[storage]: Required value]")
    manifest = """
apiVersion: v1
kind: PersistentVolume
metadata: {name: bad-pv}
spec:
  accessModes: [ReadWriteOnce]
  hostPath: {path: /a}
  nfs: {server: s, path: /b}
"""
    out = kubectl("apply", "-f", "-", input=manifest, check=False)
    assert out.returncode != 0
    # kubectl lists the causes of the 422 it got.
    assert out.stderr.strip() == (
        'The PersistentVolume "bad-pv" is invalid: \n'
        "* spec.capacity: Required value\n"
        '* spec.capacity: Unsupported value: null: supported values: "storage"\n'
        "* spec.nfs: Forbidden: may not specify more than 1 volume type")


def test_csi_nodes_and_drivers(storage: client.StorageV1Api, kubectl: Kubectl) -> None:
    storage.create_csi_driver({"metadata": {"name": "ebs.csi.aws.com"},
                               "spec": {"attachRequired": True}})
    driver = storage.read_csi_driver("ebs.csi.aws.com")
    assert (driver.spec.fs_group_policy, driver.spec.volume_lifecycle_modes) == (
        "ReadWriteOnceWithFSType", ["Persistent"])
    storage.create_csi_node({"metadata": {"name": "node-2"}, "spec": {"drivers": [
        {"name": "ebs.csi.aws.com", "nodeID": "i-2", "topologyKeys": [ZONE],
         "allocatable": {"count": 25}}]}})
    node = storage.read_csi_node("node-2")
    assert node.spec.drivers[0].allocatable.count == 25
    rows = kubectl("get", "csinode").stdout.splitlines()
    assert rows[0].split() == ["NAME", "DRIVERS", "AGE"]
    assert rows[1].split()[:2] == ["node-2", "1"]
    rows = kubectl("get", "csidriver").stdout.splitlines()
    assert rows[0].split() == ["NAME", "ATTACHREQUIRED", "PODINFOONMOUNT", "STORAGECAPACITY",
                               "TOKENREQUESTS", "REQUIRESREPUBLISH", "MODES", "AGE"]
    assert rows[1].split()[:7] == ["ebs.csi.aws.com", "true", "false", "false", "<unset>",
                                   "false", "Persistent"]


def test_kubectl_apply_and_get(kubectl: Kubectl, namespace: str, default_class: str) -> None:
    fast, pv = unique("fast"), unique("pv")
    manifests = f"""
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {{name: {fast}}}
provisioner: disk.csi.example.com
reclaimPolicy: Retain
allowVolumeExpansion: true
---
apiVersion: v1
kind: PersistentVolume
metadata: {{name: {pv}}}
spec:
  capacity: {{storage: 3Gi}}
  accessModes: [ReadWriteMany]
  storageClassName: ""
  nfs: {{server: nfs.local, path: /export}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {{name: shared}}
spec:
  storageClassName: ""
  accessModes: [ReadWriteMany]
  resources: {{requests: {{storage: 1Gi}}}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {{name: quick}}
spec:
  storageClassName: {fast}
  accessModes: [ReadWriteOnce]
  resources: {{requests: {{storage: 2Gi}}}}
"""
    out = kubectl("apply", "-n", namespace, "-f", "-", input=manifests).stdout.splitlines()
    assert out == [f"storageclass.storage.k8s.io/{fast} created",
                   f"persistentvolume/{pv} created", "persistentvolumeclaim/shared created",
                   "persistentvolumeclaim/quick created"]
    wait_for(lambda: all(c["status"]["phase"] == "Bound" for c in kubectl.json(
        "get", "pvc", "-n", namespace)["items"]), what="both claims bound")
    rows = kubectl("get", "pvc", "-n", namespace, "shared").stdout.splitlines()
    assert rows[0].split() == ["NAME", "STATUS", "VOLUME", "CAPACITY", "ACCESS", "MODES",
                               "STORAGECLASS", "VOLUMEATTRIBUTESCLASS", "AGE"]
    assert rows[1].split()[:5] == ["shared", "Bound", pv, "3Gi", "RWX"]
    rows = kubectl("get", "pv", pv).stdout.splitlines()
    assert rows[0].split()[:6] == ["NAME", "CAPACITY", "ACCESS", "MODES", "RECLAIM", "POLICY"]
    assert rows[1].split()[:6] == [pv, "3Gi", "RWX", "Retain", "Bound", f"{namespace}/shared"]
    classes = {row.split()[0]: row.split()[1:5] for row in
               kubectl("get", "sc").stdout.splitlines()[1:]}
    assert classes[fast] == ["disk.csi.example.com", "Retain", "Immediate", "true"]
    assert classes[default_class] == ["(default)", "ebs.csi.aws.com", "Delete",
                                      "WaitForFirstConsumer"]
    # Re-applying changes nothing; changing a class's parameters is refused as in kube.
    assert kubectl("apply", "-n", namespace, "-f", "-", input=manifests).stdout.count(
        "unchanged") == 4
    refused = kubectl("apply", "-f", "-", check=False,
                      input=manifests.split("---")[0] + "parameters: {type: io2}\n")
    assert f'The StorageClass "{fast}" is invalid: parameters: Forbidden: updates to ' \
           "parameters are forbidden." in refused.stderr

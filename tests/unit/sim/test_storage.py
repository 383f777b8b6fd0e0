"""PersistentVolumes, PersistentVolumeClaims, StorageClasses, CSINodes and CSIDrivers in the
embedded API server, through the registry: kube's defaults, validation messages, update rules
and admission (DefaultStorageClass, StorageObjectInUseProtection)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from pyscheduler_sim import errors
from pyscheduler_sim.registry import Registry
from pyscheduler_sim.resources import ResourceType
from pyscheduler_sim.storage import default_storage_class

Obj = dict[str, Any]

DNS_SUBDOMAIN = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                 "characters, '-' or '.', and must start and end with an alphanumeric character "
                 "(e.g. 'example.com', regex used for validation is "
                 "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
ACCESS_MODES = '"ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"'


@pytest.fixture
def registry() -> Registry:
    return Registry()


def kind(registry: Registry, group: str, plural: str) -> ResourceType:
    return registry.type(group, "v1", plural)


def pvs(r: Registry) -> ResourceType:
    return kind(r, "", "persistentvolumes")


def pvcs(r: Registry) -> ResourceType:
    return kind(r, "", "persistentvolumeclaims")


def classes(r: Registry) -> ResourceType:
    return kind(r, "storage.k8s.io", "storageclasses")


def claim(name: str = "data", **spec: Any) -> Obj:
    return {"metadata": {"name": name},
            "spec": {"accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": "1Gi"}}, **spec}}


def volume(name: str = "pv-1", **spec: Any) -> Obj:
    return {"metadata": {"name": name},
            "spec": {"capacity": {"storage": "5Gi"}, "accessModes": ["ReadWriteOnce"],
                     "hostPath": {"path": "/data"}, **spec}}


def storage_class(name: str = "fast", **fields: Any) -> Obj:
    return {"metadata": {"name": name}, "provisioner": "ebs.csi.aws.com", **fields}


def causes(exc: errors.ApiError) -> list[str]:
    assert exc.details is not None
    return [f"{c['field']}: {c['message']}" for c in exc.details["causes"]]


def refused(registry: Registry, rt: ResourceType, body: Obj, namespace: str = "") -> list[str]:
    with pytest.raises(errors.ApiError) as caught:
        registry.create(rt, namespace, body)
    assert caught.value.code == 422, caught.value.message
    return causes(caught.value)


def without(spec_key: str, body: Obj) -> Obj:
    out = copy.deepcopy(body)
    out["spec"].pop(spec_key)
    return out


# -- claims -------------------------------------------------------------------------------------

def test_claim_defaults_status_and_protection(registry: Registry) -> None:
    created = registry.create(pvcs(registry), "default", {**claim(), "status": {
        "phase": "Bound", "capacity": {"storage": "9Gi"}}})
    assert created["spec"]["volumeMode"] == "Filesystem"
    assert created["status"] == {"phase": "Pending"}       # status is reset on create
    assert created["metadata"]["finalizers"] == ["kubernetes.io/pvc-protection"]
    assert "storageClassName" not in created["spec"]       # no default class yet
    assert "generation" not in created["metadata"]


@pytest.mark.parametrize("body,expected", [
    pytest.param(without("accessModes", claim()),
                 ["spec.accessModes: Required value: at least 1 access mode is required"],
                 id="no access modes"),
    pytest.param(claim(accessModes=["ReadWriteSometimes"]),
                 ['spec.accessModes: Unsupported value: "ReadWriteSometimes": supported values: '
                  + ACCESS_MODES], id="unknown access mode"),
    pytest.param(claim(accessModes=["ReadWriteOncePod", "ReadOnlyMany"]),
                 ["spec.accessModes: Forbidden: may not use ReadWriteOncePod with other access "
                  "modes"], id="ReadWriteOncePod with another mode"),
    pytest.param(claim(resources={"requests": {"cpu": "1"}}),
                 ["spec.resources[storage]: Required value"], id="no storage request"),
    pytest.param(claim(resources={"requests": {"storage": "0"}}),
                 ['spec.resources[storage]: Invalid value: "0": must be greater than zero'],
                 id="zero storage"),
    pytest.param(claim(resources={"requests": {"storage": "-1Gi"}}),
                 ['spec.resources[storage]: Invalid value: "-1Gi": must be greater than zero'],
                 id="negative storage"),
    pytest.param(claim(storageClassName="Fast_SSD"),
                 [f'spec.storageClassName: Invalid value: "Fast_SSD": {DNS_SUBDOMAIN}'],
                 id="class name not a DNS subdomain"),
    pytest.param(claim(volumeMode="Raw"),
                 ['spec.volumeMode: Unsupported value: "Raw": supported values: "Block", '
                  '"Filesystem"'], id="unknown volume mode"),
    pytest.param({"metadata": {"name": "x"}, "spec": {}},
                 ["spec.accessModes: Required value: at least 1 access mode is required",
                  "spec.resources[storage]: Required value"], id="empty spec"),
])
def test_invalid_claims_are_refused(registry: Registry, body: Obj, expected: list[str]) -> None:
    assert refused(registry, pvcs(registry), body, "default") == expected


def test_claim_spec_is_immutable_except_what_kube_allows(registry: Registry) -> None:
    rt = pvcs(registry)
    created = registry.create(rt, "default", claim())
    # volumeName may be set once, and an unset class set once (retroactive default class).
    created["spec"]["volumeName"] = "pv-1"
    created["spec"]["storageClassName"] = "fast"
    updated = registry.update(rt, "default", "data", created)
    assert updated["spec"]["volumeName"] == "pv-1"
    for change in ({"volumeName": "pv-2"}, {"accessModes": ["ReadWriteMany"]},
                   {"storageClassName": "slow"}):
        with pytest.raises(errors.ApiError) as caught:
            registry.update(rt, "default", "data",
                            {**updated, "spec": {**updated["spec"], **change}})
        message = causes(caught.value)[0]
        assert message.startswith(
            "spec: Forbidden: spec is immutable after creation except resources.requests and "
            "volumeAttributesClassName for bound claims\n  core.PersistentVolumeClaimSpec{"), \
            message


def test_storage_request_may_grow_only_on_a_bound_claim(registry: Registry) -> None:
    rt = pvcs(registry)
    created = registry.create(rt, "default", claim())
    grown = {**created, "spec": {**created["spec"],
                                 "resources": {"requests": {"storage": "2Gi"}}}}
    with pytest.raises(errors.ApiError) as caught:
        registry.update(rt, "default", "data", grown)
    assert causes(caught.value)[0].startswith("spec: Forbidden: spec is immutable")
    # The same size spelled differently is no change.
    same = {**created, "spec": {**created["spec"],
                                "resources": {"requests": {"storage": "1024Mi"}}}}
    registry.update(rt, "default", "data", same)
    bound = registry.get(rt, "default", "data")
    bound["status"] = {"phase": "Bound", "capacity": {"storage": "1Gi"}}
    bound = registry.update(rt, "default", "data", bound, "status")
    bound["spec"]["resources"] = {"requests": {"storage": "2Gi"}}
    assert registry.update(rt, "default", "data", bound)["spec"]["resources"] == {
        "requests": {"storage": "2Gi"}}
    bound["spec"]["resources"] = {"requests": {"storage": "512Mi"}}
    bound["metadata"]["resourceVersion"] = None
    with pytest.raises(errors.ApiError) as caught:
        registry.update(rt, "default", "data", bound)
    assert causes(caught.value) == ["spec.resources.requests.storage: Forbidden: field can "
                                    "not be less than status.capacity"]


def test_claim_volume_mode_is_immutable(registry: Registry) -> None:
    rt = pvcs(registry)
    created = registry.create(rt, "default", claim())
    created["spec"]["volumeMode"] = "Block"
    with pytest.raises(errors.ApiError) as caught:
        registry.update(rt, "default", "data", created)
    assert causes(caught.value)[-1] == 'volumeMode: Invalid value: "Block": field is immutable'


# -- volumes ------------------------------------------------------------------------------------

def test_volume_defaults_status_and_protection(registry: Registry) -> None:
    created = registry.create(pvs(registry), "", volume())
    spec = created["spec"]
    assert (spec["persistentVolumeReclaimPolicy"], spec["volumeMode"], spec["hostPath"]) == (
        "Retain", "Filesystem", {"path": "/data", "type": ""})
    assert created["status"]["phase"] == "Pending"
    assert created["status"]["lastPhaseTransitionTime"] == created["metadata"][
        "creationTimestamp"]
    assert created["metadata"]["finalizers"] == ["kubernetes.io/pv-protection"]


def test_a_phase_change_is_stamped(registry: Registry) -> None:
    rt = pvs(registry)
    created = registry.create(rt, "", volume())
    created["status"] = {"phase": "Available",
                         "lastPhaseTransitionTime": "2000-01-01T00:00:00Z"}
    updated = registry.update(rt, "", "pv-1", created, "status")
    # A client's own stamp is kept; the same stamp as before is replaced.
    assert updated["status"]["lastPhaseTransitionTime"] == "2000-01-01T00:00:00Z"
    updated["status"]["phase"] = "Bound"
    bound = registry.update(rt, "", "pv-1", updated, "status")
    assert bound["status"]["lastPhaseTransitionTime"] != "2000-01-01T00:00:00Z"


NODE_AFFINITY = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
    {"key": "kubernetes.io/hostname", "operator": "In", "values": ["node-0"]}]}]}}


@pytest.mark.parametrize("body,expected", [
    pytest.param(without("accessModes", volume()), ["spec.accessModes: Required value"],
                 id="no access modes"),
    pytest.param(without("capacity", volume()),
                 ["spec.capacity: Required value",
                  'spec.capacity: Unsupported value: null: supported values: "storage"'],
                 id="no capacity"),
    pytest.param(volume(capacity={"storage": "1Gi", "cpu": "1"}),
                 ['spec.capacity: Unsupported value: {"cpu":"1","storage":"1Gi"}: supported '
                  'values: "storage"'], id="capacity besides storage"),
    pytest.param(volume(capacity={"storage": "0"}),
                 ['spec.capacity[storage]: Invalid value: "0": must be greater than zero'],
                 id="zero capacity"),
    pytest.param(without("hostPath", volume()),
                 ["spec: Required value: must specify a volume type"], id="no volume source"),
    pytest.param(volume(nfs={"server": "nfs", "path": "/export"}),
                 ["spec.nfs: Forbidden: may not specify more than 1 volume type"],
                 id="two volume sources"),
    pytest.param(volume(persistentVolumeReclaimPolicy="Keep"),
                 ['spec.persistentVolumeReclaimPolicy: Unsupported value: "Keep": supported '
                  'values: "Delete", "Recycle", "Retain"'], id="unknown reclaim policy"),
    pytest.param(without("hostPath", volume(local={"path": "/mnt/disk"})),
                 ["spec.nodeAffinity: Required value: Local volume requires node affinity"],
                 id="local volume without node affinity"),
    pytest.param(volume(nodeAffinity={}),
                 ["spec.nodeAffinity.required: Required value: must specify required node "
                  "constraints"], id="node affinity without required"),
    pytest.param(volume(nodeAffinity={"required": {"nodeSelectorTerms": []}}),
                 ["spec.nodeAffinity.required.nodeSelectorTerms: Required value: must have at "
                  "least one node selector term"], id="no node selector terms"),
    pytest.param(volume(nodeAffinity={"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "zone", "operator": "In"}, {"key": "z", "operator": "Exists", "values": ["a"]},
        {"key": "n", "operator": "Gt", "values": ["1", "2"]},
        {"key": "k", "operator": "Near", "values": ["x"]}]}]}}),
        ["spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].values: Required "
         "value: must be specified when `operator` is 'In' or 'NotIn'",
         "spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[1].values: "
         "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
         "spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[2].values: Required "
         "value: must be specified single value when `operator` is 'Lt' or 'Gt'",
         'spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[3].operator: '
         'Invalid value: "Near": not a valid selector operator'], id="bad node selector terms"),
    pytest.param(volume(nodeAffinity={"required": {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.uid", "operator": "In", "values": ["a", "b"]}]}]}}),
        ["spec.nodeAffinity.required.nodeSelectorTerms[0].matchFields[0].values: Required "
         "value: must be only one value when `operator` is 'In' or 'NotIn' for node field "
         "selector",
         'spec.nodeAffinity.required.nodeSelectorTerms[0].matchFields[0].key: Invalid value: '
         '"metadata.uid": not a valid field selector key'], id="bad node field selector"),
    pytest.param(without("hostPath", volume(csi={"driver": "Bad/Driver"})),
                 [f'spec.csi.driver: Invalid value: "Bad/Driver": {DNS_SUBDOMAIN}',
                  "spec.csi.volumeHandle: Required value"], id="bad csi source"),
    pytest.param(without("hostPath", volume(nfs={"server": "nfs", "path": "export"})),
                 ['spec.nfs.path: Invalid value: "export": must be an absolute path'],
                 id="relative nfs path"),
    pytest.param(volume(hostPath={"path": "/a/../b", "type": "Folder"}),
                 ["spec.hostPath.path: Invalid value: \"/a/../b\": must not contain '..'",
                  'spec.hostPath.type: Unsupported value: "Folder": supported values: "", '
                  '"BlockDevice", "CharDevice", "Directory", "DirectoryOrCreate", "File", '
                  '"FileOrCreate", "Socket"'], id="bad host path"),
])
def test_invalid_volumes_are_refused(registry: Registry, body: Obj, expected: list[str]) -> None:
    assert refused(registry, pvs(registry), body) == expected


def test_valid_local_volume(registry: Registry) -> None:
    created = registry.create(pvs(registry), "", without("hostPath", volume(
        local={"path": "/mnt/disk"}, nodeAffinity=NODE_AFFINITY)))
    assert created["spec"]["nodeAffinity"] == NODE_AFFINITY


def test_volume_source_and_node_affinity_are_immutable(registry: Registry) -> None:
    rt = pvs(registry)
    created = registry.create(rt, "", volume(nodeAffinity=NODE_AFFINITY))
    moved = copy.deepcopy(created)
    moved["spec"]["hostPath"]["path"] = "/elsewhere"
    with pytest.raises(errors.ApiError) as caught:
        registry.update(rt, "", "pv-1", moved)
    assert causes(caught.value)[0].startswith(
        "spec.persistentvolumesource: Forbidden: spec.persistentvolumesource is immutable after "
        "creation\n  core.PersistentVolumeSource{")
    other_node = copy.deepcopy(created)
    other_node["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0][
        "matchExpressions"][0]["values"] = ["node-1"]
    with pytest.raises(errors.ApiError) as caught:
        registry.update(rt, "", "pv-1", other_node)
    assert causes(caught.value)[0].endswith(
        ": field is immutable, except for updating from beta label to GA")
    # The capacity, reclaim policy and class may change.
    created["spec"]["capacity"] = {"storage": "10Gi"}
    created["spec"]["persistentVolumeReclaimPolicy"] = "Delete"
    assert registry.update(rt, "", "pv-1", created)["spec"]["capacity"] == {"storage": "10Gi"}


def test_beta_zone_label_may_become_the_ga_one(registry: Registry) -> None:
    rt = pvs(registry)
    beta = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "failure-domain.beta.kubernetes.io/zone", "operator": "In", "values": ["a"]}]}]}}
    created = registry.create(rt, "", volume(nodeAffinity=beta))
    created["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0][
        "key"] = "topology.kubernetes.io/zone"
    registry.update(rt, "", "pv-1", created)


# -- storage classes ----------------------------------------------------------------------------

def test_storage_class_defaults(registry: Registry) -> None:
    created = registry.create(classes(registry), "", storage_class())
    assert (created["reclaimPolicy"], created["volumeBindingMode"]) == ("Delete", "Immediate")
    assert "generation" not in created["metadata"]


@pytest.mark.parametrize("body,expected", [
    pytest.param({"metadata": {"name": "x"}}, ["provisioner: Required value"],
                 id="no provisioner"),
    pytest.param(storage_class(provisioner="Example.com/Bad Name"),
                 ['provisioner: Invalid value: "example.com/bad name": name part must consist '
                  "of alphanumeric characters, '-', '_' or '.', and must start and end with an "
                  "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex "
                  "used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"],
                 id="provisioner not a qualified name"),
    pytest.param(storage_class(reclaimPolicy="Recycle"),
                 ['reclaimPolicy: Unsupported value: "Recycle": supported values: "Delete", '
                  '"Retain"'], id="recycling class"),
    pytest.param(storage_class(volumeBindingMode="Later"),
                 ['volumeBindingMode: Unsupported value: "Later": supported values: '
                  '"Immediate", "WaitForFirstConsumer"'], id="unknown binding mode"),
    pytest.param(storage_class(parameters={"": "x"}),
                 ['parameters: Invalid value: "": field can not be empty.'],
                 id="empty parameter name"),
    pytest.param(storage_class(allowedTopologies=[
        {"matchLabelExpressions": [{"key": "topology.kubernetes.io/zone", "values": []},
                                   {"key": "topology.kubernetes.io/zone",
                                    "values": ["a", "a"]}]}]),
        ["allowedTopologies[0].matchLabelExpressions[0].values: Required value",
         'allowedTopologies[0].matchLabelExpressions[1].values[1]: Duplicate value: "a"',
         'allowedTopologies[0].matchLabelExpressions[1].key: Duplicate value: '
         '"topology.kubernetes.io/zone"'], id="bad topology terms"),
    pytest.param(storage_class(allowedTopologies=[
        {"matchLabelExpressions": [{"key": "zone", "values": ["a"]}]},
        {"matchLabelExpressions": [{"key": "zone", "values": ["a"]}]}]),
        ['allowedTopologies[1].matchLabelExpressions: Duplicate value: ""'],
        id="duplicate topology term"),
])
def test_invalid_storage_classes_are_refused(registry: Registry, body: Obj,
                                             expected: list[str]) -> None:
    assert refused(registry, classes(registry), body) == expected


def test_storage_class_update_rules(registry: Registry) -> None:
    rt = classes(registry)
    created = registry.create(rt, "", storage_class(parameters={"type": "gp3"}))
    changed = {**created, "provisioner": "other.csi", "parameters": {"type": "io2"},
               "reclaimPolicy": "Retain", "volumeBindingMode": "WaitForFirstConsumer"}
    with pytest.raises(errors.ApiError) as caught:
        registry.update(rt, "", "fast", changed)
    assert causes(caught.value) == [
        "parameters: Forbidden: updates to parameters are forbidden.",
        "provisioner: Forbidden: updates to provisioner are forbidden.",
        "reclaimPolicy: Forbidden: updates to reclaimPolicy are forbidden.",
        'volumeBindingMode: Invalid value: "WaitForFirstConsumer": field is immutable']
    # allowedTopologies, mount options, expansion and annotations may change (as in kube).
    created.update(allowedTopologies=[{"matchLabelExpressions": [
        {"key": "topology.kubernetes.io/zone", "values": ["zone-a"]}]}],
        mountOptions=["debug"], allowVolumeExpansion=True)
    created["metadata"]["annotations"] = {"storageclass.kubernetes.io/is-default-class": "true"}
    assert registry.update(rt, "", "fast", created)["allowVolumeExpansion"] is True


def test_default_class_is_the_newest_marked_one() -> None:
    def sc(name: str, created: str, default: str | None) -> Obj:
        annotations = {"storageclass.kubernetes.io/is-default-class": default} if default else {}
        return {"metadata": {"name": name, "creationTimestamp": created,
                             "annotations": annotations}}
    assert default_storage_class([sc("a", "2024-01-01T00:00:00Z", "true"),
                                  sc("b", "2024-01-02T00:00:00Z", "true"),
                                  sc("c", "2024-01-03T00:00:00Z", "false")])["metadata"][
        "name"] == "b"
    same = "2024-01-01T00:00:00Z"
    assert default_storage_class([sc("z", same, "true"), sc("y", same, "true")])["metadata"][
        "name"] == "y"
    beta = {"metadata": {"name": "beta", "creationTimestamp": same, "annotations": {
        "storageclass.beta.kubernetes.io/is-default-class": "true"}}}
    assert default_storage_class([beta]) is beta
    assert default_storage_class([sc("x", same, None)]) is None


def test_a_claim_without_class_gets_the_default_one(registry: Registry) -> None:
    registry.create(classes(registry), "", storage_class("fast", metadata={
        "name": "fast", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}}))
    rt = pvcs(registry)
    assert registry.create(rt, "default", claim("a"))["spec"]["storageClassName"] == "fast"
    # An explicit class, even the empty one ("no class"), is kept, as is the beta annotation.
    assert registry.create(rt, "default", claim("b", storageClassName=""))["spec"][
        "storageClassName"] == ""
    beta = claim("c")
    beta["metadata"]["annotations"] = {"volume.beta.kubernetes.io/storage-class": "slow"}
    assert "storageClassName" not in registry.create(rt, "default", beta)["spec"]


# -- CSI nodes and drivers ----------------------------------------------------------------------

def test_csidriver_defaults_and_update_rules(registry: Registry) -> None:
    rt = kind(registry, "storage.k8s.io", "csidrivers")
    created = registry.create(rt, "", {"metadata": {"name": "ebs.csi.aws.com"}})
    assert created["spec"] == {"attachRequired": True, "podInfoOnMount": False,
                               "storageCapacity": False,
                               "fsGroupPolicy": "ReadWriteOnceWithFSType",
                               "requiresRepublish": False, "seLinuxMount": False,
                               "volumeLifecycleModes": ["Persistent"]}
    created["spec"]["attachRequired"] = False
    with pytest.raises(errors.ApiError) as caught:
        registry.update(rt, "", "ebs.csi.aws.com", created)
    # kube spells the path "attachedRequired".
    assert causes(caught.value) == ["spec.attachedRequired: Invalid value: false: field is "
                                    "immutable"]
    assert refused(registry, rt, {"metadata": {"name": "x"}, "spec": {
        "fsGroupPolicy": "Sometimes", "volumeLifecycleModes": ["Forever"],
        "tokenRequests": [{"audience": "a", "expirationSeconds": 60}]}}) == [
        'spec.fsGroupPolicy: Unsupported value: "Sometimes": supported values: "File", "None", '
        '"ReadWriteOnceWithFSType"',
        "spec.tokenRequests[0].expirationSeconds: Invalid value: 60: may not specify a duration "
        "less than 10 minutes",
        'spec.volumeLifecycleModes: Unsupported value: "Forever": supported values: '
        '"Persistent", "Ephemeral"']


def test_csinode_validation_and_drivers_are_immutable(registry: Registry) -> None:
    rt = kind(registry, "storage.k8s.io", "csinodes")
    driver = {"name": "ebs.csi.aws.com", "nodeID": "i-1",
              "topologyKeys": ["topology.kubernetes.io/zone"], "allocatable": {"count": 25}}
    created = registry.create(rt, "", {"metadata": {"name": "node-0"},
                                       "spec": {"drivers": [driver]}})
    created["spec"]["drivers"][0]["nodeID"] = "i-2"
    with pytest.raises(errors.ApiError) as caught:
        registry.update(rt, "", "node-0", created)
    assert causes(caught.value)[0].startswith("spec.drivers: Invalid value: ")
    assert causes(caught.value)[0].endswith(": field is immutable")
    assert refused(registry, rt, {"metadata": {"name": "node-1"}, "spec": {"drivers": [
        {"name": "a.csi", "nodeID": "", "topologyKeys": ["k", "k"],
         "allocatable": {"count": -1}},
        {"name": "a.csi", "nodeID": "n", "topologyKeys": []}]}}) == [
        "spec.drivers[0].nodeID: Required value",
        "spec.drivers[0].allocatable.count: Invalid value: -1: must be greater than or equal "
        "to 0",
        'spec.drivers[0]: Duplicate value: "k"',
        'spec.drivers[1].name: Duplicate value: "a.csi"']

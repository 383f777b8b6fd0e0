"""PersistentVolumes, PersistentVolumeClaims, StorageClasses, CSINodes and CSIDrivers as
kube-apiserver stores them: their names, defaulting, validation and admission.

The public names kube's storage components write on objects (annotations, finalizers, the
``no-provisioner`` provisioner) are spelled here once; :mod:`pyscheduler_sim.volumes` (the
simulated PV controller and provisioner) imports them.

Defaulting (``pkg/apis/core/v1/defaults.go``, ``pkg/apis/storage/v1/defaults.go``) and the
strategies' ``PrepareForCreate``:

* a PersistentVolume gets ``persistentVolumeReclaimPolicy: Retain``, ``volumeMode: Filesystem``
  and a new one ``status: {phase: Pending, lastPhaseTransitionTime: <now>}``; a phase change
  stamps ``lastPhaseTransitionTime`` again (``pkg/registry/core/persistentvolume``);
* a PersistentVolumeClaim gets ``volumeMode: Filesystem`` and a new one
  ``status: {phase: Pending}``;
* a StorageClass gets ``reclaimPolicy: Delete`` and ``volumeBindingMode: Immediate``;
* a CSINode always has ``spec.drivers`` and each driver ``topologyKeys`` (null when unset:
  they have no ``omitempty``);
* a CSIDriver gets ``attachRequired: true``, ``podInfoOnMount``, ``storageCapacity``,
  ``requiresRepublish`` and ``seLinuxMount`` false, ``fsGroupPolicy: ReadWriteOnceWithFSType``
  and ``volumeLifecycleModes: [Persistent]``.

Validation (``pkg/apis/core/validation``, ``pkg/apis/storage/validation``), with kube's
messages: a claim needs access modes (known ones, ``ReadWriteOncePod`` alone) and a positive
``resources.requests[storage]``, and its spec cannot change after creation except
``resources.requests`` of a bound claim, a ``volumeName`` that was empty and a
``storageClassName`` that was unset; a volume needs access modes, exactly one
``capacity[storage]``, exactly one volume source (``hostPath``, ``nfs``, ``local`` and ``csi``
are checked in detail, the legacy in-tree sources are only counted), a well-formed
``nodeAffinity.required`` (required for ``local``), and its source and node affinity cannot
change; a StorageClass's ``provisioner``, ``parameters``, ``reclaimPolicy`` and
``volumeBindingMode`` cannot change (``allowedTopologies`` can, as in kube); CSINode drivers
cannot change; a CSIDriver's ``attachRequired`` and ``volumeLifecycleModes`` cannot change.

A rejected immutable spec is reported with kube's message followed by a summary of what
changed in the shape of ``cmp.Diff``; kube's own diff is unstable by design (``cmp``
randomizes its spacing), so only the first line is meant to be compared.

Admission (:class:`StorageAdmission`): DefaultStorageClass gives a new claim without a class
the default StorageClass (``storageclass.kubernetes.io/is-default-class: "true"``, the newest
when several are marked, ties by name); StorageObjectInUseProtection gives new claims and
volumes the ``kubernetes.io/pvc-protection`` / ``kubernetes.io/pv-protection`` finalizers, which
the PV controller removes once nothing uses them.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from fractions import Fraction
from typing import Any

from pyscheduler.api import validation as v
from pyscheduler.api.labels import SelectorError, label_selector_from_dict
from pyscheduler.api.quantity import QuantityError, canonical_quantity, parse_quantity
from pyscheduler.api.validation import FieldError, Verbatim
from pyscheduler_sim import validation as ov
from pyscheduler_sim.admission import Operation
from pyscheduler_sim.resources import ResourceType
from pyscheduler_sim.store import Store

__all__ = [
    "ACCESS_MODES",
    "ANN_BETA_STORAGE_CLASS",
    "ANN_BETA_STORAGE_PROVISIONER",
    "ANN_BIND_COMPLETED",
    "ANN_BOUND_BY_CONTROLLER",
    "ANN_PROVISIONED_BY",
    "ANN_SELECTED_NODE",
    "ANN_STORAGE_PROVISIONER",
    "DEFAULT_CLASS_ANNOTATION",
    "GROUP",
    "NO_PROVISIONER",
    "PVC_PROTECTION",
    "PV_PROTECTION",
    "StorageAdmission",
    "claim_class",
    "default",
    "default_storage_class",
    "is_default_class",
    "prepare_for_create",
    "prepare_for_update",
    "quantity",
    "validate_claim",
    "validate_claim_spec",
    "validate_claim_update",
    "validate_csidriver",
    "validate_csidriver_update",
    "validate_csinode",
    "validate_csinode_update",
    "validate_storage_class",
    "validate_storage_class_update",
    "validate_volume",
    "validate_volume_update",
    "volume_class",
]

Obj = dict[str, Any]

GROUP = "storage.k8s.io"

# -- names kube's storage components write ---------------------------------------------------

#: On a claim the PV controller bound (``pv.kubernetes.io/bind-completed: "yes"``).
ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
#: On a claim and a volume whose binding the controller (or the scheduler) made.
ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
#: On a provisioned volume: the provisioner that made it.
ANN_PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
#: On a claim to provision: which provisioner is expected to do it.
ANN_STORAGE_PROVISIONER = "volume.kubernetes.io/storage-provisioner"
ANN_BETA_STORAGE_PROVISIONER = "volume.beta.kubernetes.io/storage-provisioner"
#: On a claim of a WaitForFirstConsumer class: the node the scheduler chose.
ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node"
#: The class of a claim or volume, before ``storageClassName`` existed; it still wins.
ANN_BETA_STORAGE_CLASS = "volume.beta.kubernetes.io/storage-class"
#: ``"true"`` on the default StorageClass.
DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"
_BETA_DEFAULT_CLASS_ANNOTATION = "storageclass.beta.kubernetes.io/is-default-class"
PVC_PROTECTION = "kubernetes.io/pvc-protection"
PV_PROTECTION = "kubernetes.io/pv-protection"
#: The provisioner of classes whose volumes are only ever created by hand.
NO_PROVISIONER = "kubernetes.io/no-provisioner"

ACCESS_MODES = ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod")
_READ_WRITE_ONCE_POD = "ReadWriteOncePod"
_VOLUME_MODES = ("Block", "Filesystem")
_RECLAIM_POLICIES = ("Delete", "Recycle", "Retain")
_CLASS_RECLAIM_POLICIES = ("Delete", "Retain")
_BINDING_MODES = ("Immediate", "WaitForFirstConsumer")
_HOST_PATH_TYPES = ("", "BlockDevice", "CharDevice", "Directory", "DirectoryOrCreate", "File",
                    "FileOrCreate", "Socket")
_FS_GROUP_POLICIES = ("File", "None", "ReadWriteOnceWithFSType")
_LIFECYCLE_MODES = ("Persistent", "Ephemeral")
# The volume sources of a PersistentVolume, in the order ValidatePersistentVolumeSpec checks
# them, with the path it names for a second one ("cephFS" is kube's spelling there).
_PV_SOURCES = (
    ("hostPath", "hostPath"), ("gcePersistentDisk", "gcePersistentDisk"),
    ("awsElasticBlockStore", "awsElasticBlockStore"), ("glusterfs", "glusterfs"),
    ("flocker", "flocker"), ("nfs", "nfs"), ("rbd", "rbd"), ("quobyte", "quobyte"),
    ("cephfs", "cephFS"), ("iscsi", "iscsi"), ("cinder", "cinder"), ("fc", "fc"),
    ("flexVolume", "flexVolume"), ("azureFile", "azureFile"), ("vsphereVolume", "vsphereVolume"),
    ("photonPersistentDisk", "photonPersistentDisk"), ("portworxVolume", "portworxVolume"),
    ("azureDisk", "azureDisk"), ("scaleIO", "scaleIO"), ("local", "local"),
    ("storageos", "storageos"), ("csi", "csi"),
)
_PV_SOURCE_KEYS = frozenset(key for key, _ in _PV_SOURCES)
# Go field order, for the immutable-spec summaries.
_CLAIM_SPEC_FIELDS = ("accessModes", "selector", "resources", "volumeName", "storageClassName",
                      "volumeMode", "dataSource", "dataSourceRef", "volumeAttributesClassName")
_BETA_TO_GA_LABELS = {
    "failure-domain.beta.kubernetes.io/zone": "topology.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region": "topology.kubernetes.io/region",
    "beta.kubernetes.io/os": "kubernetes.io/os",
    "beta.kubernetes.io/arch": "kubernetes.io/arch",
    "beta.kubernetes.io/instance-type": "node.kubernetes.io/instance-type",
}
_MAX_PARAMETERS = 512
_MAX_PARAMETER_BYTES = 256 * 1024
_CSI_NODE_ID_MAX = 256


# -- helpers the controllers share --------------------------------------------------------------

def _dict(value: object) -> Obj:
    return value if isinstance(value, dict) else {}


def _annotations(obj: Obj) -> Obj:
    return _dict(_dict(obj.get("metadata")).get("annotations"))


def claim_class(pvc: Obj) -> str | None:
    """``GetPersistentVolumeClaimClass``, keeping an unset class (None) apart from ``""``."""
    annotations = _annotations(pvc)
    if ANN_BETA_STORAGE_CLASS in annotations:
        return str(annotations[ANN_BETA_STORAGE_CLASS])
    name = _dict(pvc.get("spec")).get("storageClassName")
    return None if name is None else str(name)


def volume_class(pv: Obj) -> str:
    """``GetPersistentVolumeClass``."""
    annotations = _annotations(pv)
    if ANN_BETA_STORAGE_CLASS in annotations:
        return str(annotations[ANN_BETA_STORAGE_CLASS])
    return str(_dict(pv.get("spec")).get("storageClassName") or "")


def is_default_class(sc: Obj) -> bool:
    """``IsDefaultAnnotation``."""
    annotations = _annotations(sc)
    return "true" in (annotations.get(DEFAULT_CLASS_ANNOTATION),
                      annotations.get(_BETA_DEFAULT_CLASS_ANNOTATION))


def default_storage_class(classes: Iterable[Obj]) -> Obj | None:
    """``GetDefaultClass``: of the classes marked default, the newest (ties: by name)."""
    marked = [sc for sc in classes if is_default_class(sc)]
    marked.sort(key=lambda sc: str(sc["metadata"].get("name") or ""))
    marked.sort(key=lambda sc: str(sc["metadata"].get("creationTimestamp") or ""), reverse=True)
    return marked[0] if marked else None


def quantity(value: object) -> Fraction | None:
    """A quantity's value, or None when it is not one."""
    try:
        return parse_quantity(value)  # type: ignore[arg-type]
    except (QuantityError, TypeError):
        return None


# -- defaulting ---------------------------------------------------------------------------------

def default(kind: str, obj: Obj) -> None:
    """The defaulting of every write of one of the storage kinds (kube defaults each decoded
    object)."""
    spec = obj.get("spec")
    if kind == "PersistentVolume":
        if isinstance(spec, dict):
            if not spec.get("persistentVolumeReclaimPolicy"):
                spec["persistentVolumeReclaimPolicy"] = "Retain"
            if spec.get("volumeMode") is None:
                spec["volumeMode"] = "Filesystem"
            host_path = spec.get("hostPath")
            if isinstance(host_path, dict) and host_path.get("type") is None:
                host_path["type"] = ""
        status = obj.get("status")
        if isinstance(status, dict) and not status.get("phase"):
            status["phase"] = "Pending"
    elif kind == "PersistentVolumeClaim":
        if isinstance(spec, dict) and spec.get("volumeMode") is None:
            spec["volumeMode"] = "Filesystem"
        status = obj.get("status")
        if isinstance(status, dict) and not status.get("phase"):
            status["phase"] = "Pending"
    elif kind == "StorageClass":
        if obj.get("reclaimPolicy") is None:
            obj["reclaimPolicy"] = "Delete"
        if obj.get("volumeBindingMode") is None:
            obj["volumeBindingMode"] = "Immediate"
    elif kind == "CSINode" and isinstance(spec, dict):
        # Fields without omitempty: kube shows them as null when unset.
        drivers = spec.setdefault("drivers", None)
        for driver in drivers if isinstance(drivers, list) else ():
            if isinstance(driver, dict):
                driver.setdefault("topologyKeys", None)
    elif kind == "CSIDriver" and isinstance(spec, dict):
        for key, value in (("attachRequired", True), ("podInfoOnMount", False),
                           ("storageCapacity", False), ("fsGroupPolicy", "ReadWriteOnceWithFSType"),
                           ("requiresRepublish", False), ("seLinuxMount", False)):
            if spec.get(key) is None:
                spec[key] = value
        if not spec.get("volumeLifecycleModes"):
            spec["volumeLifecycleModes"] = ["Persistent"]


def prepare_for_create(kind: str, obj: Obj, now: str) -> None:
    """``PrepareForCreate``: a new volume or claim starts Pending, whatever status it carries."""
    if kind == "PersistentVolume":
        obj["status"] = {"phase": "Pending", "lastPhaseTransitionTime": now}
    elif kind == "PersistentVolumeClaim":
        obj["status"] = {"phase": "Pending"}
    elif kind in ("CSIDriver", "CSINode"):
        obj.setdefault("spec", {})
    default(kind, obj)


def prepare_for_update(kind: str, obj: Obj, old: Obj, now: str) -> None:
    """``PrepareForUpdate``: a volume's phase change is stamped."""
    default(kind, obj)
    if kind != "PersistentVolume":
        return
    status, old_status = _dict(obj.get("status")), _dict(old.get("status"))
    if status.get("phase") != old_status.get("phase") and (
            status.get("lastPhaseTransitionTime") in (None,
                                                      old_status.get("lastPhaseTransitionTime"))):
        status["lastPhaseTransitionTime"] = now


# -- claims -------------------------------------------------------------------------------------

def _validate_access_modes(modes: object, path: str, detail: str,
                           errs: list[FieldError]) -> None:
    if not modes:
        errs.append(v.required(path, detail))
        return
    once_pod = other = False
    for mode in modes if isinstance(modes, list) else [modes]:
        if mode not in ACCESS_MODES:
            errs.append(v.not_supported(path, mode, sorted(ACCESS_MODES)))
        elif mode == _READ_WRITE_ONCE_POD:
            once_pod = True
        else:
            other = True
    if once_pod and other:
        errs.append(v.forbidden(path, "may not use ReadWriteOncePod with other access modes"))


def _validate_positive_quantity(raw: object, path: str, errs: list[FieldError]) -> None:
    """``ValidatePositiveQuantityValue`` (a value that is no quantity cannot even decode in
    kube; here it is reported like any other invalid quantity)."""
    try:
        q = parse_quantity(raw)  # type: ignore[arg-type]
    except (QuantityError, TypeError) as exc:
        errs.append(v.invalid(path, raw, str(exc)))
        return
    if q <= 0:
        errs.append(v.invalid(path, canonical_quantity(raw), "must be greater than zero"))  # type: ignore[arg-type]


def validate_claim_spec(spec: object, path: str) -> list[FieldError]:
    """``ValidatePersistentVolumeClaimSpec`` (also for the claim templates of StatefulSets)."""
    if not isinstance(spec, dict):
        return [v.required(path) if spec is None else v.invalid(path, spec, v.MUST_BE_OBJECT)]
    errs: list[FieldError] = []
    modes = spec.get("accessModes")
    if not modes:
        errs.append(v.required(path + ".accessModes", "at least 1 access mode is required"))
    selector = spec.get("selector")
    if selector is not None:
        try:
            label_selector_from_dict(selector)
        except SelectorError as exc:
            errs.append(v.invalid(path + ".selector", selector, str(exc)))
    if modes:
        _validate_access_modes(modes, path + ".accessModes", "", errs)
    requests = _dict(_dict(spec.get("resources")).get("requests"))
    if "storage" not in requests:
        errs.append(v.required(path + ".resources[storage]"))
    else:
        _validate_positive_quantity(requests["storage"], path + ".resources[storage]", errs)
    class_name = spec.get("storageClassName")
    if class_name:
        errs.extend(v.validate_dns1123_subdomain(class_name, path + ".storageClassName"))
    mode = spec.get("volumeMode")
    if mode is not None and mode not in _VOLUME_MODES:
        errs.append(v.not_supported(path + ".volumeMode", mode, _VOLUME_MODES))
    source = spec.get("dataSource")
    if isinstance(source, dict):
        for key in ("name", "kind"):
            if not source.get(key):
                errs.append(v.required(f"{path}.dataSource.{key}"))
        if not source.get("apiGroup") and source.get("kind") != "PersistentVolumeClaim":
            errs.append(v.invalid(path + ".dataSource", source.get("kind") or "",
                                  "must be 'PersistentVolumeClaim' when referencing the "
                                  "default apiGroup"))
    return errs


def validate_claim(obj: Obj) -> list[FieldError]:
    """``ValidatePersistentVolumeClaim`` (metadata is checked by the generic validation)."""
    return validate_claim_spec(obj.get("spec"), "spec")


def _requests_equal(a: Obj, b: Obj) -> bool:
    """Quantities compare by value, as ``apiequality.Semantic`` compares them."""
    if a.keys() != b.keys():
        return False
    for key, raw in a.items():
        qa, qb = quantity(raw), quantity(b[key])
        if (qa != qb) if qa is not None and qb is not None else raw != b[key]:
            return False
    return True


def _go_struct(spec: Obj) -> Obj:
    """A spec as Go compares it: null and absent are one, an empty struct is absent."""
    return {k: val for k, val in spec.items() if val is not None and val != {}}


def _go_field(key: str) -> str:
    return key[:1].upper() + key[1:]


def _change_summary(type_name: str, old: Obj, new: Obj, order: tuple[str, ...]) -> str:
    """What changed between two structs, in the shape of ``cmp.Diff`` (values as JSON)."""
    keys = [k for k in order if k in old or k in new]
    keys += sorted(k for k in set(old) | set(new) if k not in order)
    lines = [f"  {type_name}{{"]
    same = 0
    for key in keys:
        if old.get(key) == new.get(key):
            same += 1
            continue
        for sign, side in (("-", old), ("+", new)):
            if key in side:
                lines.append(f"{sign} \t{_go_field(key)}: "
                             f"{json.dumps(side[key], sort_keys=True, separators=(',', ':'))},")
    if same:
        lines.append(f"  \t... // {same} identical fields")
    lines.append("  }")
    return "\n".join(lines)


def validate_claim_update(new: Obj, old: Obj) -> list[FieldError]:
    """``ValidatePersistentVolumeClaimUpdate``."""
    errs: list[FieldError] = []
    new_spec, old_spec = copy.deepcopy(_dict(new.get("spec"))), copy.deepcopy(_dict(old.get("spec")))
    if not old_spec.get("volumeName"):
        # The PV controller sets volumeName once.
        old_spec.pop("volumeName", None)
        if "volumeName" in new_spec:
            old_spec["volumeName"] = new_spec["volumeName"]
    old_ann, new_ann = _annotations(old), _annotations(new)
    if old_ann.get(ANN_BETA_STORAGE_CLASS) != new_ann.get(ANN_BETA_STORAGE_CLASS):
        errs.append(v.invalid(f"metadata.annotations[{ANN_BETA_STORAGE_CLASS}]",
                              new_ann.get(ANN_BETA_STORAGE_CLASS, ""), "field is immutable"))
    if new_spec.get("storageClassName") is not None and old_spec.get("storageClassName") is None \
            and old_ann.get(ANN_BETA_STORAGE_CLASS) in (None, new_spec["storageClassName"]):
        # An unset class may be set once (the retroactive default class assignment).
        old_spec["storageClassName"] = new_spec["storageClassName"]
    new_requests = _dict(_dict(new_spec.get("resources")).get("requests"))
    old_requests = _dict(_dict(old_spec.get("resources")).get("requests"))
    if _dict(new.get("status")).get("phase") == "Bound" and new_requests:
        if "storage" in old_requests:
            new_requests["storage"] = old_requests["storage"]
        else:
            new_requests.pop("storage", None)
    new_spec.pop("volumeAttributesClassName", None)
    old_spec.pop("volumeAttributesClassName", None)
    for spec in (new_spec, old_spec):
        resources = spec.get("resources")
        if isinstance(resources, dict):
            spec["resources"] = {k: val for k, val in resources.items() if k != "requests"}
    if _go_struct(new_spec) != _go_struct(old_spec) \
            or not _requests_equal(new_requests, old_requests):
        new_spec["resources"] = {**_dict(new_spec.get("resources")), "requests": new_requests}
        old_spec["resources"] = {**_dict(old_spec.get("resources")), "requests": old_requests}
        errs.append(v.forbidden("spec", "spec is immutable after creation except "
                                        "resources.requests and volumeAttributesClassName for "
                                        "bound claims\n" + _change_summary(
                                            "core.PersistentVolumeClaimSpec", old_spec, new_spec,
                                            _CLAIM_SPEC_FIELDS)))
    new_size = quantity(_dict(_dict(_dict(new.get("spec")).get("resources")).get("requests"))
                        .get("storage"))
    old_size = quantity(_dict(_dict(_dict(old.get("spec")).get("resources")).get("requests"))
                        .get("storage"))
    status_size = quantity(_dict(_dict(old.get("status")).get("capacity")).get("storage")) or 0
    if new_size is not None and old_size is not None and new_size < old_size \
            and new_size <= status_size:
        # RecoverVolumeExpansionFailure (beta, on in 1.32): down to the recorded capacity.
        errs.append(v.forbidden("spec.resources.requests.storage",
                                "field can not be less than status.capacity"))
    new_mode, old_mode = _dict(new.get("spec")).get("volumeMode"), _dict(old.get("spec")).get(
        "volumeMode")
    if new_mode != old_mode:
        errs.append(v.invalid("volumeMode", new_mode, "field is immutable"))
    return errs


# -- volumes ------------------------------------------------------------------------------------

def _validate_pv_source(key: str, source: object, path: str, errs: list[FieldError]) -> None:
    """The checks of the sources the simulator knows; the legacy ones are only counted."""
    if not isinstance(source, dict):
        errs.append(v.invalid(path, source, v.MUST_BE_OBJECT))
        return
    if key in ("hostPath", "local"):
        p = source.get("path")
        if not p:
            errs.append(v.required(path + ".path"))
            return
        errs.extend(ov.validate_path_no_backsteps(str(p), path + ".path"))
        kind = source.get("type")
        if key == "hostPath" and kind is not None and kind not in _HOST_PATH_TYPES:
            errs.append(v.not_supported(path + ".type", kind, _HOST_PATH_TYPES))
    elif key == "nfs":
        if not source.get("server"):
            errs.append(v.required(path + ".server"))
        p = str(source.get("path") or "")
        if not p:
            errs.append(v.required(path + ".path"))
        if not p.startswith("/"):
            errs.append(v.invalid(path + ".path", p, "must be an absolute path"))
    elif key == "csi":
        errs.extend(ov.validate_csi_driver_name(source.get("driver") or "", path + ".driver"))
        if not source.get("volumeHandle"):
            errs.append(v.required(path + ".volumeHandle"))


def validate_volume(obj: Obj) -> list[FieldError]:
    """``ValidatePersistentVolumeSpec`` (metadata is checked by the generic validation)."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        spec = {}
    errs: list[FieldError] = []
    _validate_access_modes(spec.get("accessModes"), "spec.accessModes", "", errs)
    capacity = spec.get("capacity")
    if not capacity:
        errs.append(v.required("spec.capacity"))
    if not isinstance(capacity, dict) or "storage" not in capacity or len(capacity) > 1:
        # A nil ResourceList renders as JSON null.
        errs.append(v.not_supported("spec.capacity", Verbatim("null") if capacity is None
                                    else capacity, ("storage",)))
    for name, raw in (capacity.items() if isinstance(capacity, dict) else ()):
        path = f"spec.capacity[{name}]"
        q = quantity(raw)
        if q is not None and q < 0:
            # validateBasicResource: the value, rounded away from zero to an integer.
            errs.append(v.invalid(path, q.numerator // q.denominator,
                                  "must be a valid resource quantity"))
        _validate_positive_quantity(raw, path, errs)
    policy = spec.get("persistentVolumeReclaimPolicy")
    if policy and policy not in _RECLAIM_POLICIES:
        errs.append(v.not_supported("spec.persistentVolumeReclaimPolicy", policy,
                                    _RECLAIM_POLICIES))
    affinity = spec.get("nodeAffinity")
    if affinity is not None:
        required = _dict(affinity).get("required")
        if required is None:
            errs.append(v.required("spec.nodeAffinity.required",
                                   "must specify required node constraints"))
        else:
            errs.extend(ov.validate_node_selector(required, "spec.nodeAffinity.required"))
    count = 0
    for key, name in _PV_SOURCES:
        if spec.get(key) is None:
            continue
        if count and key != "flexVolume":
            errs.append(v.forbidden(f"spec.{name}", "may not specify more than 1 volume type"))
            continue
        count += 1
        _validate_pv_source(key, spec[key], f"spec.{key}", errs)
        if key == "local" and affinity is None:
            errs.append(v.required("spec.nodeAffinity", "Local volume requires node affinity"))
    if not count:
        errs.append(v.required("spec", "must specify a volume type"))
    host_path = _dict(spec.get("hostPath"))
    if host_path.get("path") and str(host_path["path"]).rstrip("/") == "" \
            and policy == "Recycle":
        errs.append(v.forbidden("spec.persistentVolumeReclaimPolicy",
                                "may not be 'recycle' for a hostPath mount of '/'"))
    class_name = spec.get("storageClassName")
    if class_name:
        errs.extend(v.validate_dns1123_subdomain(class_name, "spec.storageClassName"))
    mode = spec.get("volumeMode")
    if mode is not None and mode not in _VOLUME_MODES:
        errs.append(v.not_supported("spec.volumeMode", mode, _VOLUME_MODES))
    return errs


def _affinity_equal(new: object, old: object) -> bool:
    """Node affinities equal, a beta topology label in ``old`` matching its GA successor."""
    if isinstance(new, dict) and isinstance(old, dict):
        if old.get("key") in _BETA_TO_GA_LABELS and new.get("key") == \
                _BETA_TO_GA_LABELS[str(old["key"])]:
            old = {**old, "key": new["key"]}
        return new.keys() == old.keys() and all(_affinity_equal(new[k], old[k]) for k in new)
    if isinstance(new, list) and isinstance(old, list):
        return len(new) == len(old) and all(_affinity_equal(a, b) for a, b in zip(new, old))
    return new == old


def validate_volume_update(new: Obj, old: Obj) -> list[FieldError]:
    """``ValidatePersistentVolumeUpdate``."""
    errs: list[FieldError] = []
    new_spec, old_spec = _dict(new.get("spec")), _dict(old.get("spec"))
    new_source = {k: val for k, val in new_spec.items() if k in _PV_SOURCE_KEYS}
    old_source = {k: val for k, val in old_spec.items() if k in _PV_SOURCE_KEYS}
    new_csi, old_csi = new_source.get("csi"), old_source.get("csi")
    if isinstance(new_csi, dict) and isinstance(old_csi, dict) \
            and old_csi.get("controllerExpandSecretRef") is None:
        # The expansion secret may be added later.
        new_source["csi"] = {k: val for k, val in new_csi.items()
                             if k != "controllerExpandSecretRef"}
    if new_source != old_source:
        errs.append(v.forbidden("spec.persistentvolumesource",
                                "spec.persistentvolumesource is immutable after creation\n"
                                + _change_summary("core.PersistentVolumeSource", old_source,
                                                  new_source, tuple(k for k, _ in _PV_SOURCES))))
    if new_spec.get("volumeMode") != old_spec.get("volumeMode"):
        errs.append(v.invalid("volumeMode", new_spec.get("volumeMode"), "field is immutable"))
    if old_spec.get("nodeAffinity") is not None and not _affinity_equal(
            new_spec.get("nodeAffinity"), old_spec["nodeAffinity"]):
        errs.append(v.invalid("nodeAffinity", new_spec.get("nodeAffinity"),
                              "field is immutable, except for updating from beta label to GA"))
    return errs


# -- storage classes ----------------------------------------------------------------------------

def validate_storage_class(obj: Obj) -> list[FieldError]:
    """``ValidateStorageClass`` (metadata is checked by the generic validation)."""
    errs: list[FieldError] = []
    provisioner = obj.get("provisioner")
    if not provisioner:
        errs.append(v.required("provisioner"))
    elif isinstance(provisioner, str):
        lowered = provisioner.lower()
        errs.extend(v.invalid_each("provisioner", lowered, v.is_qualified_name(lowered)))
    else:
        errs.append(v.invalid("provisioner", provisioner, v.MUST_BE_STRING))
    parameters = obj.get("parameters")
    if isinstance(parameters, dict):
        if len(parameters) > _MAX_PARAMETERS:
            errs.append(v.too_long("parameters", "", _MAX_PARAMETERS))
        else:
            size = 0
            for key, value in parameters.items():
                if not key:
                    errs.append(v.invalid("parameters", key, "field can not be empty."))
                size += len(str(key)) + len(str(value))
            if size > _MAX_PARAMETER_BYTES:
                errs.append(v.too_long("parameters", "", _MAX_PARAMETER_BYTES))
    elif parameters is not None:
        errs.append(v.invalid("parameters", parameters, v.MUST_BE_OBJECT))
    policy = obj.get("reclaimPolicy")
    if policy and policy not in _CLASS_RECLAIM_POLICIES:
        errs.append(v.not_supported("reclaimPolicy", policy, _CLASS_RECLAIM_POLICIES))
    mode = obj.get("volumeBindingMode")
    if mode is None:
        errs.append(v.required("volumeBindingMode"))
    elif mode not in _BINDING_MODES:
        errs.append(v.not_supported("volumeBindingMode", mode, _BINDING_MODES))
    topologies = obj.get("allowedTopologies")
    if isinstance(topologies, list) and topologies:
        # kube compares each term with the ones before it, in a list that starts with as many
        # empty terms as there are terms: an empty term is therefore always a duplicate.
        seen: list[dict[str, frozenset[str]]] = [{} for _ in topologies]
        for i, term in enumerate(topologies):
            path = f"allowedTopologies[{i}]"
            found = ov.validate_topology_selector_term(term, path, errs)
            if found in seen:
                errs.append(v.duplicate(path + ".matchLabelExpressions", ""))
            seen.append(found)
    return errs


def validate_storage_class_update(new: Obj, old: Obj) -> list[FieldError]:
    """``ValidateStorageClassUpdate``."""
    errs: list[FieldError] = []
    if new.get("parameters") != old.get("parameters"):
        errs.append(v.forbidden("parameters", "updates to parameters are forbidden."))
    if new.get("provisioner") != old.get("provisioner"):
        errs.append(v.forbidden("provisioner", "updates to provisioner are forbidden."))
    if new.get("reclaimPolicy") != old.get("reclaimPolicy"):
        errs.append(v.forbidden("reclaimPolicy", "updates to reclaimPolicy are forbidden."))
    if new.get("volumeBindingMode") != old.get("volumeBindingMode"):
        errs.append(v.invalid("volumeBindingMode", new.get("volumeBindingMode"),
                              "field is immutable"))
    return errs


# -- CSI nodes and drivers ----------------------------------------------------------------------

def validate_csinode(obj: Obj) -> list[FieldError]:
    """``ValidateCSINode`` (metadata is checked by the generic validation)."""
    errs: list[FieldError] = []
    drivers = _dict(obj.get("spec")).get("drivers")
    names: set[str] = set()
    for i, driver in enumerate(drivers if isinstance(drivers, list) else ()):
        path = f"spec.drivers[{i}]"
        if not isinstance(driver, dict):
            errs.append(v.invalid(path, driver, v.MUST_BE_OBJECT))
            continue
        name = str(driver.get("name") or "")
        errs.extend(ov.validate_csi_driver_name(name, path + ".name"))
        node_id = str(driver.get("nodeID") or "")
        if not node_id:
            errs.append(v.required(path + ".nodeID"))
        if len(node_id) > _CSI_NODE_ID_MAX:
            errs.append(v.invalid(path + ".nodeID", node_id,
                                  f"must be {_CSI_NODE_ID_MAX} characters or less"))
        count = _dict(driver.get("allocatable")).get("count")
        if isinstance(count, int) and count < 0:
            errs.append(v.invalid(path + ".allocatable.count", count,
                                  "must be greater than or equal to 0"))
        if name in names:
            errs.append(v.duplicate(path + ".name", name))
        names.add(name)
        keys: set[str] = set()
        for key in driver.get("topologyKeys") or ():
            key = str(key)
            if not key:
                errs.append(v.required(path))
            if key in keys:
                errs.append(v.duplicate(path, key))
            keys.add(key)
            errs.extend(v.invalid_each(path, key, v.is_qualified_name(key)))
    return errs


def validate_csinode_update(new: Obj, old: Obj) -> list[FieldError]:
    """``ValidateCSINodeUpdate``: a driver, once registered, does not change."""
    errs: list[FieldError] = []
    new_drivers = _dict(new.get("spec")).get("drivers") or []
    for old_driver in _dict(old.get("spec")).get("drivers") or ():
        for new_driver in new_drivers:
            if isinstance(new_driver, dict) and isinstance(old_driver, dict) \
                    and new_driver.get("name") == old_driver.get("name") \
                    and new_driver != old_driver:
                errs.append(v.invalid("spec.drivers", new_driver, "field is immutable"))
    return errs


def validate_csidriver(obj: Obj) -> list[FieldError]:
    """``validateCSIDriverSpec`` (metadata is checked by the generic validation)."""
    errs: list[FieldError] = []
    spec = _dict(obj.get("spec"))
    for key, path in (("attachRequired", "spec.attachedRequired"),
                      ("podInfoOnMount", "spec.podInfoOnMount"),
                      ("storageCapacity", "spec.storageCapacity"),
                      ("seLinuxMount", "spec.seLinuxMount")):
        if spec.get(key) is None:
            errs.append(v.required(path))
    policy = spec.get("fsGroupPolicy")
    if policy is not None and policy not in _FS_GROUP_POLICIES:
        errs.append(v.not_supported("spec.fsGroupPolicy", policy, _FS_GROUP_POLICIES))
    audiences: set[str] = set()
    for i, request in enumerate(spec.get("tokenRequests") or ()):
        path = f"spec.tokenRequests[{i}]"
        audience = str(_dict(request).get("audience") or "")
        if audience in audiences:
            errs.append(v.duplicate(path + ".audience", audience))
            continue
        audiences.add(audience)
        seconds = _dict(request).get("expirationSeconds")
        if isinstance(seconds, int) and seconds < 600:
            errs.append(v.invalid(path + ".expirationSeconds", seconds,
                                  "may not specify a duration less than 10 minutes"))
        if isinstance(seconds, int) and seconds > 2**32:
            errs.append(v.invalid(path + ".expirationSeconds", seconds,
                                  "may not specify a duration larger than 2^32 seconds"))
    for mode in spec.get("volumeLifecycleModes") or ():
        if mode not in _LIFECYCLE_MODES:
            errs.append(v.not_supported("spec.volumeLifecycleModes", mode, _LIFECYCLE_MODES))
    period = spec.get("nodeAllocatableUpdatePeriodSeconds")
    if isinstance(period, int) and period < 10:
        errs.append(v.invalid("spec.nodeAllocatableUpdatePeriodSeconds", period,
                              "must be greater than or equal to 10 seconds"))
    return errs


def validate_csidriver_update(new: Obj, old: Obj) -> list[FieldError]:
    """``ValidateCSIDriverUpdate`` (``attachedRequired`` is kube's spelling of the path)."""
    errs: list[FieldError] = []
    new_spec, old_spec = _dict(new.get("spec")), _dict(old.get("spec"))
    if new_spec.get("attachRequired") != old_spec.get("attachRequired"):
        errs.append(v.invalid("spec.attachedRequired", new_spec.get("attachRequired"),
                              "field is immutable"))
    if new_spec.get("volumeLifecycleModes") != old_spec.get("volumeLifecycleModes"):
        errs.append(v.invalid("spec.volumeLifecycleModes", new_spec.get("volumeLifecycleModes"),
                              "field is immutable"))
    return errs


# -- admission ----------------------------------------------------------------------------------

class StorageAdmission:
    """DefaultStorageClass and StorageObjectInUseProtection
    (an :class:`~pyscheduler_sim.admission.AdmissionPlugin`)."""

    def __init__(self, store: Store, classes: ResourceType) -> None:
        self.store = store
        self.classes = classes

    def default_class(self) -> Obj | None:
        return default_storage_class(s.view for s in self.store.iter(self.classes))

    def admit(self, operation: Operation, rt: ResourceType, obj: Obj, old: Obj | None) -> None:
        if operation != "CREATE" or rt.group != "" or rt.plural not in (
                "persistentvolumeclaims", "persistentvolumes"):
            return
        spec = obj.get("spec")
        if rt.plural == "persistentvolumeclaims" and isinstance(spec, dict) \
                and spec.get("storageClassName") is None \
                and ANN_BETA_STORAGE_CLASS not in _annotations(obj):
            chosen = self.default_class()
            if chosen is not None:
                spec["storageClassName"] = chosen["metadata"]["name"]
        meta = obj.get("metadata")
        if isinstance(meta, dict):
            finalizer = PVC_PROTECTION if rt.plural == "persistentvolumeclaims" else PV_PROTECTION
            finalizers = meta.get("finalizers")
            if finalizers is None:
                meta["finalizers"] = [finalizer]
            elif isinstance(finalizers, list) and finalizer not in finalizers:
                finalizers.append(finalizer)

    def validate(self, operation: Operation, rt: ResourceType, obj: Obj,
                 old: Obj | None) -> None:
        return None

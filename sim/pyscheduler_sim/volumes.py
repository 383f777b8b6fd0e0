"""The PersistentVolume controller of the embedded cluster, with a simulated provisioner.

What kube-controller-manager's ``persistentvolume-binder``, ``pvc-protection`` and
``pv-protection`` controllers (``pkg/controller/volume``) and a CSI external-provisioner do,
as far as the API shows it. The names they write are :mod:`pyscheduler_sim.storage`'s.

Binding (``syncUnboundClaim``, ``FindMatchingVolume``, ``bind``)
    An unbound claim of an ``Immediate`` class (or of no class) is bound to the best Available
    volume: same class, every requested access mode, same volume mode, labels matching the
    claim's selector, capacity at least the request; among those, the volumes with the fewest
    access modes first, then the smallest. A volume whose ``claimRef`` already names the claim
    (pre-bound by a user, by the scheduler's VolumeBinding plugin, or by the provisioner) wins
    over any other, even for a ``WaitForFirstConsumer`` class, whose other claims the controller
    leaves to the scheduler (event ``WaitForFirstConsumer``). Binding sets the volume's
    ``claimRef`` (annotated ``pv.kubernetes.io/bound-by-controller: "yes"`` unless the reference
    was already there), its phase ``Bound``, the claim's ``volumeName``, its annotations
    ``pv.kubernetes.io/bind-completed`` and ``bound-by-controller``, and its status (``Bound``,
    the volume's access modes and capacity). A claim naming a volume itself is bound to it when
    the volume fits (else event ``VolumeMismatch``); a bound claim whose volume is gone or taken
    is ``Lost``.

Provisioning (simulated)
    A claim no volume fits, of a class whose provisioner is not ``kubernetes.io/no-provisioner``,
    is annotated ``volume.kubernetes.io/storage-provisioner`` (and the beta annotation) as the
    PV controller hands it to an external provisioner, which this controller then plays at once:
    for an ``Immediate`` class right away, for ``WaitForFirstConsumer`` once the scheduler has
    written ``volume.kubernetes.io/selected-node``. The new volume is ``pvc-<claim uid>``,
    annotated ``pv.kubernetes.io/provisioned-by: <provisioner>``, pre-bound to the claim, of the
    requested size, access modes and volume mode, with the class's reclaim policy and mount
    options. Its ``nodeAffinity.required`` pins it to the selected node's values of the topology
    keys, which are, in order: the ``topologyKeys`` the node's CSINode lists for a driver of the
    provisioner's name (what a CSI provisioner uses); ``kubernetes.io/hostname`` for the local
    provisioners in :data:`LOCAL_PROVISIONERS`; the keys of the class's ``allowedTopologies``;
    else ``topology.kubernetes.io/zone``, standing for a zonal block-storage driver. A node
    outside the class's ``allowedTopologies`` is refused (``ProvisioningFailed``). Without a
    selected node the volume gets the first value of each key of the first allowed topology
    term, or no affinity; a local provisioner needs the node and refuses. The volume source is
    ``csi`` (driver: the provisioner) when the provisioner's name is a CSI driver name, else a
    ``hostPath`` under :data:`VOLUME_ROOT`.

Reclaiming
    A bound volume whose claim is deleted becomes ``Released``. With reclaim policy ``Delete``
    a provisioned volume is deleted; a hand-made one fails (``VolumeFailedDelete``, as kube's
    controller finds no deleter for it). ``Retain`` keeps it Released. ``Recycle`` (deprecated)
    makes it Available again at once.

Protection
    New claims and volumes carry ``kubernetes.io/pvc-protection`` / ``pv-protection`` (added by
    admission); the finalizer goes once the claim is used by no scheduled, unfinished pod of its
    namespace, and once the volume is not ``Bound``.

Default class (retroactive assignment, GA in 1.28)
    A claim created with no class and matching no volume gets the default StorageClass once
    one exists.

Events are recorded once per object and reason (kube's recorder would count repeats).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any

from pyscheduler.api.labels import SelectorError, label_selector_from_dict
from pyscheduler.api.validation import is_dns1123_subdomain
from pyscheduler_sim import errors, storage
from pyscheduler_sim.controller import Controller
from pyscheduler_sim.events import event_about
from pyscheduler_sim.registry import Registry, now_rfc3339
from pyscheduler_sim.resources import ResourceType
from pyscheduler_sim.storage import (
    ANN_BETA_STORAGE_PROVISIONER,
    ANN_BIND_COMPLETED,
    ANN_BOUND_BY_CONTROLLER,
    ANN_PROVISIONED_BY,
    ANN_SELECTED_NODE,
    ANN_STORAGE_PROVISIONER,
    NO_PROVISIONER,
    PV_PROTECTION,
    PVC_PROTECTION,
)

__all__ = ["LOCAL_PROVISIONERS", "PersistentVolumeController", "VOLUME_ROOT", "provisioned_topology",
           "provisioned_volume"]

Obj = dict[str, Any]

COMPONENT = "persistentvolume-controller"
#: Provisioners of node-local volumes: their volumes are pinned to the node (by hostname).
LOCAL_PROVISIONERS = ("rancher.io/local-path", "openebs.io/local")
#: Where the ``hostPath`` volumes of provisioners that are not CSI drivers live.
VOLUME_ROOT = "/var/lib/pyscheduler-sim/volumes"
HOSTNAME_LABEL = "kubernetes.io/hostname"
ZONE_LABEL = "topology.kubernetes.io/zone"


def _dict(value: object) -> Obj:
    return value if isinstance(value, dict) else {}


def _annotations(obj: Obj) -> Obj:
    return _dict(obj["metadata"].get("annotations"))


def _claim_ref(pvc: Obj) -> Obj:
    """``reference.GetReference`` of a claim."""
    meta = pvc["metadata"]
    return {"kind": "PersistentVolumeClaim", "namespace": meta["namespace"],
            "name": meta["name"], "uid": meta["uid"], "apiVersion": "v1",
            "resourceVersion": meta.get("resourceVersion", "")}


def _bound_to(pv: Obj, pvc: Obj) -> bool:
    """``IsVolumeBoundToClaim``: the reference names the claim (its uid, when it has one)."""
    ref = _dict(pv.get("spec")).get("claimRef")
    meta = pvc["metadata"]
    return isinstance(ref, dict) and ref.get("name") == meta["name"] \
        and ref.get("namespace") == meta["namespace"] \
        and ref.get("uid") in (None, "", meta["uid"])


def _modes(obj: Obj) -> frozenset[str]:
    return frozenset(_dict(obj.get("spec")).get("accessModes") or ())


def _volume_mode(obj: Obj) -> str:
    return str(_dict(obj.get("spec")).get("volumeMode") or "Filesystem")


def _capacity(pv: Obj) -> Any:
    return storage.quantity(_dict(_dict(pv.get("spec")).get("capacity")).get("storage"))


def _request(pvc: Obj) -> Any:
    resources = _dict(_dict(pvc.get("spec")).get("resources"))
    return storage.quantity(_dict(resources.get("requests")).get("storage"))


def _mismatch(pv: Obj, pvc: Obj) -> str:
    """``checkVolumeSatisfyClaim``: why a named volume cannot serve the claim, or ''."""
    if pv["metadata"].get("deletionTimestamp"):
        return f'the volume is marked for deletion "{pv["metadata"]["name"]}"'
    capacity, request = _capacity(pv), _request(pvc)
    if capacity is None or request is None or capacity < request:
        return "requested PV is too small"
    if storage.volume_class(pv) != (storage.claim_class(pvc) or ""):
        return "storageClassName does not match"
    if _volume_mode(pv) != _volume_mode(pvc):
        return "incompatible volumeMode"
    if not _modes(pvc) <= _modes(pv):
        return "incompatible accessMode"
    return ""


def _topology_matches(terms: object, labels: Obj) -> bool:
    """``MatchTopologySelectorTerms``: no terms, or a term whose every requirement holds."""
    if not isinstance(terms, list) or not terms:
        return True
    return any(all(labels.get(req.get("key")) in (req.get("values") or ())
                   for req in _dict(term).get("matchLabelExpressions") or ())
               for term in terms)


def _ordered_keys(terms: Iterable[Any]) -> tuple[str, ...]:
    keys: dict[str, None] = {}
    for term in terms:
        for req in _dict(term).get("matchLabelExpressions") or ():
            keys[str(_dict(req).get("key"))] = None
    return tuple(keys)


def _csinode_keys(csinode: Obj | None, provisioner: str) -> tuple[str, ...] | None:
    for driver in _dict((csinode or {}).get("spec")).get("drivers") or ():
        if _dict(driver).get("name") == provisioner:
            return tuple(str(k) for k in driver.get("topologyKeys") or ())
    return None


def provisioned_topology(provisioner: str, sc: Obj, node: Obj | None,
                         csinode: Obj | None) -> tuple[Obj | None, str]:
    """The node affinity of a volume that ``provisioner`` makes for a claim of class ``sc``
    whose pod goes to ``node`` (with its CSINode), or why there can be none (see the module
    docstring for the keys chosen)."""
    allowed = sc.get("allowedTopologies") or []
    local = provisioner in LOCAL_PROVISIONERS
    expressions: list[Obj] = []
    if node is not None:
        labels = node["metadata"].get("labels") or {}
        name = node["metadata"]["name"]
        if not _topology_matches(allowed, labels):
            return None, f'node "{name}" does not match the allowedTopologies of the class'
        keys = _csinode_keys(csinode, provisioner)
        if keys is None:
            keys = (HOSTNAME_LABEL,) if local else _ordered_keys(allowed) or (ZONE_LABEL,)
        expressions = [{"key": k, "operator": "In", "values": [labels[k]]}
                       for k in keys if k in labels]
    elif local:
        return None, "a local volume needs the node of its pod (volumeBindingMode: " \
                     "WaitForFirstConsumer)"
    elif allowed:
        expressions = [{"key": req["key"], "operator": "In", "values": [req["values"][0]]}
                       for req in _dict(allowed[0]).get("matchLabelExpressions") or ()
                       if _dict(req).get("values")]
    if not expressions:
        return None, ""
    return {"required": {"nodeSelectorTerms": [{"matchExpressions": expressions}]}}, ""


def provisioned_volume(name: str, pvc: Obj, class_name: str, sc: Obj, provisioner: str,
                       affinity: Obj | None) -> Obj:
    """The PersistentVolume a provisioner creates for ``pvc``: pre-bound to it, of its size,
    access and volume modes, with the class's reclaim policy and mount options."""
    claim_spec = pvc["spec"]
    spec: Obj = {
        "capacity": {"storage": claim_spec["resources"]["requests"]["storage"]},
        "accessModes": list(claim_spec.get("accessModes") or ()),
        "claimRef": _claim_ref(pvc),
        "persistentVolumeReclaimPolicy": sc.get("reclaimPolicy") or "Delete",
        "storageClassName": class_name,
        "volumeMode": _volume_mode(pvc),
    }
    if sc.get("mountOptions"):
        spec["mountOptions"] = list(sc["mountOptions"])
    if affinity is not None:
        spec["nodeAffinity"] = affinity
    if provisioner not in LOCAL_PROVISIONERS and len(provisioner) <= 63 \
            and not is_dns1123_subdomain(provisioner.lower()):
        spec["csi"] = {"driver": provisioner, "volumeHandle": name}
        if spec["volumeMode"] == "Filesystem":
            spec["csi"]["fsType"] = "ext4"
    else:
        spec["hostPath"] = {"path": f"{VOLUME_ROOT}/{name}", "type": "DirectoryOrCreate"}
    return {"apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": name, "annotations": {ANN_PROVISIONED_BY: provisioner}},
            "spec": spec}


class PersistentVolumeController(Controller):
    name = "persistentvolume-controller"
    resync_seconds = 15.0  # kube-controller-manager's --pvclaimbinder-sync-period

    def __init__(self, registry: Registry) -> None:
        super().__init__(registry)
        self.volumes = registry.type("", "v1", "persistentvolumes")
        self.claims = registry.type("", "v1", "persistentvolumeclaims")
        self.classes = registry.storage_classes
        self.csinodes = registry.type(storage.GROUP, "v1", "csinodes")
        self._reported: set[tuple[str, str]] = set()

    # -- triggers ------------------------------------------------------------------------------

    def on_change(self, kind: str, rt: ResourceType, obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        if rt is self.claims:
            if kind == "DELETED":
                volume = _dict(obj.get("spec")).get("volumeName")
                if volume:
                    self.enqueue(("volume", "", volume))
                self._forget(meta.get("uid", ""))
            else:
                self.enqueue(("claim", meta.get("namespace", ""), meta.get("name", "")))
        elif rt is self.volumes:
            if kind == "DELETED":
                self._forget(meta.get("uid", ""))
                return
            self.enqueue(("volume", "", meta.get("name", "")))
            ref = _dict(_dict(obj.get("spec")).get("claimRef"))
            if ref.get("name"):
                self.enqueue(("claim", ref.get("namespace", ""), ref["name"]))
        elif rt is self.classes and kind != "DELETED":
            # A new class may unblock the claims waiting for it, or be the default at last.
            for s in self.registry.store.iter(self.claims):
                if b'"volumeName"' not in s.raw:
                    self.enqueue(("claim", s.namespace, s.name))
        elif rt is self.registry.pods:
            # A pod that goes away may release the claims it protected.
            spec = _dict(obj.get("spec"))
            if kind == "DELETED" or meta.get("deletionTimestamp") or _dict(
                    obj.get("status")).get("phase") in ("Succeeded", "Failed"):
                for volume in spec.get("volumes") or ():
                    claim = _dict(_dict(volume).get("persistentVolumeClaim")).get("claimName")
                    if claim:
                        self.enqueue(("claim", meta.get("namespace", ""), claim))

    def all_keys(self) -> Iterable[Hashable]:
        keys: list[Hashable] = [("claim", s.namespace, s.name)
                                for s in self.registry.store.iter(self.claims)]
        keys += [("volume", "", s.name) for s in self.registry.store.iter(self.volumes)]
        return keys

    async def reconcile(self, key: Any) -> None:
        what, namespace, name = key
        if what == "claim":
            self._sync_claim(namespace, name)
        else:
            self._sync_volume(name)

    # -- events --------------------------------------------------------------------------------

    def _record(self, obj: Obj, reason: str, message: str, type_: str = "Normal",
                component: str = COMPONENT) -> None:
        key = (str(obj["metadata"].get("uid", "")), reason)
        if key in self._reported:
            return
        self._reported.add(key)
        event = event_about(obj, reason, message, component, now_rfc3339(), type_)
        self.registry.create(self.registry.events, event["metadata"]["namespace"], event)

    def _forget(self, uid: str) -> None:
        self._reported = {key for key in self._reported if key[0] != uid}

    # -- claims --------------------------------------------------------------------------------

    def _sync_claim(self, namespace: str, name: str) -> None:
        stored = self.registry.store.get(self.claims, namespace, name)
        if stored is None:
            return
        pvc = stored.obj
        if pvc["metadata"].get("deletionTimestamp"):
            self._unprotect_claim(pvc)
        elif not _dict(pvc.get("spec")).get("volumeName"):
            self._sync_unbound_claim(pvc)
        else:
            self._sync_bound_claim(pvc)

    def _class(self, name: str) -> Obj | None:
        stored = self.registry.store.get(self.classes, "", name)
        return stored.view if stored is not None else None

    def _sync_unbound_claim(self, pvc: Obj) -> None:
        class_name = storage.claim_class(pvc)
        sc = self._class(class_name) if class_name else None
        delayed = sc is not None and sc.get("volumeBindingMode") == "WaitForFirstConsumer"
        volume = self._best_match(pvc, class_name or "", delayed)
        if volume is not None:
            self._bind(volume, pvc)
            return
        if class_name is None:
            chosen = storage.default_storage_class(
                s.view for s in self.registry.store.iter(self.classes))
            if chosen is not None:
                pvc["spec"]["storageClassName"] = chosen["metadata"]["name"]
                self._update_claim(pvc)
                return
        if delayed and ANN_SELECTED_NODE not in _annotations(pvc):
            self._record(pvc, "WaitForFirstConsumer",
                         "waiting for first consumer to be created before binding")
        elif class_name:
            self._provision(pvc, class_name, sc)
            return
        else:
            self._record(pvc, "FailedBinding",
                         "no persistent volumes available for this claim and no storage class "
                         "is set")
        self._set_claim_phase(pvc, "Pending")

    def _best_match(self, pvc: Obj, class_name: str, delayed: bool) -> Obj | None:
        """``findByClaim``: the volume groups with every requested mode, fewest modes first;
        in the first group with a match, a volume pre-bound to the claim, else the smallest."""
        request = _request(pvc)
        if request is None:
            return None
        wanted = _modes(pvc)
        try:
            selector = label_selector_from_dict(_dict(pvc.get("spec")).get("selector") or {})
        except SelectorError:
            return None
        groups: dict[frozenset[str], list[Obj]] = {}
        for s in self.registry.store.iter(self.volumes):
            pv = s.view
            modes = _modes(pv)
            if wanted <= modes:
                groups.setdefault(modes, []).append(pv)
        for modes in sorted(groups, key=lambda m: (len(m), sorted(m))):
            best: Obj | None = None
            for pv in groups[modes]:
                capacity = _capacity(pv)
                if capacity is None or capacity < request or _volume_mode(pv) != _volume_mode(pvc) \
                        or pv["metadata"].get("deletionTimestamp"):
                    continue
                if _bound_to(pv, pvc):
                    return pv
                if delayed or _dict(pv.get("status")).get("phase") != "Available" \
                        or _dict(pv.get("spec")).get("claimRef") \
                        or not selector.matches(pv["metadata"].get("labels") or {}) \
                        or storage.volume_class(pv) != class_name:
                    continue
                if best is None or capacity < _capacity(best):
                    best = pv
            if best is not None:
                return best
        return None

    def _sync_bound_claim(self, pvc: Obj) -> None:
        """A claim naming its volume: finish (or repair) the binding, or report it lost."""
        volume_name = str(pvc["spec"]["volumeName"])
        completed = ANN_BIND_COMPLETED in _annotations(pvc)
        stored = self.registry.store.get(self.volumes, "", volume_name)
        if stored is None:
            if completed:
                self._lose(pvc, "Bound claim has lost reference to PersistentVolume. Data on "
                                "the volume is lost!")
            else:
                self._set_claim_phase(pvc, "Pending")
            return
        pv = stored.obj
        if _dict(pv.get("spec")).get("claimRef") is None or _bound_to(pv, pvc):
            why = "" if _bound_to(pv, pvc) else _mismatch(pv, pvc)
            if why:
                self._record(pvc, "VolumeMismatch",
                             f'Cannot bind to requested volume "{volume_name}": {why}', "Warning")
                self._set_claim_phase(pvc, "Pending")
                return
            self._bind(pv, pvc)
        elif completed:
            self._lose(pvc, "Bound claim has lost its PersistentVolume. Data on the volume is "
                            "lost!")
        else:
            self._record(pvc, "FailedBinding",
                         f'volume "{volume_name}" already bound to a different claim.', "Warning")
            self._set_claim_phase(pvc, "Pending")

    def _lose(self, pvc: Obj, message: str) -> None:
        if _dict(pvc.get("status")).get("phase") != "Lost":
            self._record(pvc, "ClaimLost", message, "Warning")
            self._set_claim_phase(pvc, "Lost")

    def _bind(self, pv: Obj, pvc: Obj) -> None:
        """``bind``: the volume to the claim, the volume's phase, the claim to the volume, the
        claim's status; each write only when something changes."""
        pv = self.registry.get(self.volumes, "", pv["metadata"]["name"])
        ref = _dict(pv["spec"].get("claimRef"))
        meta = pvc["metadata"]
        if ref.get("name") != meta["name"] or ref.get("namespace") != meta["namespace"] \
                or ref.get("uid") != meta["uid"]:
            by_controller = not _bound_to(pv, pvc)
            pv["spec"]["claimRef"] = _claim_ref(pvc)
            if by_controller:
                pv["metadata"].setdefault("annotations", {}).setdefault(ANN_BOUND_BY_CONTROLLER,
                                                                        "yes")
            pv = self.registry.update(self.volumes, "", pv["metadata"]["name"], pv)
        pv = self._set_volume_phase(pv, "Bound")
        name = pv["metadata"]["name"]
        annotations = meta.setdefault("annotations", {})
        changed = False
        if pvc["spec"].get("volumeName") != name:
            pvc["spec"]["volumeName"] = name
            annotations.setdefault(ANN_BOUND_BY_CONTROLLER, "yes")
            changed = True
        if ANN_BIND_COMPLETED not in annotations:
            annotations[ANN_BIND_COMPLETED] = "yes"
            changed = True
        if changed:
            pvc = self._update_claim(pvc)
        status = dict(_dict(pvc.get("status")))
        wanted = {**status, "phase": "Bound",
                  "accessModes": list(pv["spec"].get("accessModes") or ()),
                  "capacity": dict(pv["spec"].get("capacity") or {})}
        if wanted != status:
            pvc["status"] = wanted
            self.registry.update(self.claims, meta["namespace"], meta["name"], pvc, "status")

    def _update_claim(self, pvc: Obj) -> Obj:
        meta = pvc["metadata"]
        return self.registry.update(self.claims, meta["namespace"], meta["name"], pvc)

    def _set_claim_phase(self, pvc: Obj, phase: str) -> None:
        status = _dict(pvc.get("status"))
        if status.get("phase") != phase:
            pvc["status"] = {**status, "phase": phase}
            meta = pvc["metadata"]
            self.registry.update(self.claims, meta["namespace"], meta["name"], pvc, "status")

    def _claim_in_use(self, pvc: Obj) -> bool:
        """The pvc-protection controller's test: a scheduled, unfinished pod mounts it."""
        name = pvc["metadata"]["name"]
        for s in self.registry.store.iter(self.registry.pods, pvc["metadata"]["namespace"]):
            if b'"persistentVolumeClaim"' not in s.raw:
                continue
            pod = s.view
            if not _dict(pod.get("spec")).get("nodeName") or _dict(pod.get("status")).get(
                    "phase") in ("Succeeded", "Failed"):
                continue
            if any(_dict(_dict(v).get("persistentVolumeClaim")).get("claimName") == name
                   for v in pod["spec"].get("volumes") or ()):
                return True
        return False

    def _unprotect_claim(self, pvc: Obj) -> None:
        finalizers = list(pvc["metadata"].get("finalizers") or ())
        if PVC_PROTECTION in finalizers and not self._claim_in_use(pvc):
            finalizers.remove(PVC_PROTECTION)
            pvc["metadata"]["finalizers"] = finalizers
            self._update_claim(pvc)

    # -- provisioning --------------------------------------------------------------------------

    def _provision(self, pvc: Obj, class_name: str, sc: Obj | None) -> None:
        """The PV controller's ``provisionClaim`` for an external provisioner, then that
        provisioner (simulated)."""
        if sc is None:
            self._record(pvc, "ProvisioningFailed",
                         f'storageclass.storage.k8s.io "{class_name}" not found', "Warning")
            self._set_claim_phase(pvc, "Pending")
            return
        provisioner = str(sc.get("provisioner") or "")
        if provisioner == NO_PROVISIONER:
            self._record(pvc, "ProvisioningFailed",
                         f"no volume plugin matched name: {provisioner}", "Warning")
            self._set_claim_phase(pvc, "Pending")
            return
        annotations = pvc["metadata"].setdefault("annotations", {})
        if annotations.get(ANN_STORAGE_PROVISIONER) != provisioner \
                or annotations.get(ANN_BETA_STORAGE_PROVISIONER) != provisioner:
            annotations[ANN_STORAGE_PROVISIONER] = provisioner
            annotations[ANN_BETA_STORAGE_PROVISIONER] = provisioner
            pvc = self._update_claim(pvc)
            self._record(pvc, "ExternalProvisioning",
                         "Waiting for a volume to be created either by the external provisioner "
                         f"'{provisioner}' or manually by the system administrator. If volume "
                         "creation is delayed, please verify that the provisioner is running "
                         "and correctly registered.")
        meta = pvc["metadata"]
        volume_name = f"pvc-{meta['uid']}"
        if self.registry.store.get(self.volumes, "", volume_name) is not None:
            return  # provisioned already: the volume's sync binds it
        node: Obj | None = None
        node_name = _annotations(pvc).get(ANN_SELECTED_NODE)
        if node_name:
            stored = self.registry.store.get(self.registry.nodes, "", str(node_name))
            if stored is None:
                self._record(pvc, "ProvisioningFailed",
                             f'failed to get target node: node "{node_name}" not found',
                             "Warning", provisioner)
                return
            node = stored.view
        affinity, problem = self._topology(provisioner, sc, node)
        if problem:
            self._record(pvc, "ProvisioningFailed", f'failed to provision volume with '
                                                    f'StorageClass "{class_name}": {problem}',
                         "Warning", provisioner)
            return
        self._record(pvc, "Provisioning", "External provisioner is provisioning volume for "
                                          f'claim "{meta["namespace"]}/{meta["name"]}"',
                     component=provisioner)
        try:
            self.registry.create(self.volumes, "", provisioned_volume(
                volume_name, pvc, class_name, sc, provisioner, affinity))
        except errors.ApiError as exc:
            if exc.code != 409:
                raise
        self._record(pvc, "ProvisioningSucceeded",
                     f"Successfully provisioned volume {volume_name}", component=provisioner)

    def _csinode(self, node: str) -> Obj | None:
        stored = self.registry.store.get(self.csinodes, "", node)
        return stored.view if stored else None

    def _topology(self, provisioner: str, sc: Obj, node: Obj | None) -> tuple[Obj | None, str]:
        csinode = self._csinode(node["metadata"]["name"]) if node is not None else None
        return provisioned_topology(provisioner, sc, node, csinode)

    # -- volumes -------------------------------------------------------------------------------

    def _set_volume_phase(self, pv: Obj, phase: str, message: str = "",
                          reason: str = "") -> Obj:
        status = _dict(pv.get("status"))
        if status.get("phase") == phase and status.get("message", "") == message:
            return pv
        status = {k: val for k, val in status.items() if k not in ("message", "reason")}
        status["phase"] = phase
        if message:
            status["message"] = message
        if reason:
            status["reason"] = reason
        pv["status"] = status
        return self.registry.update(self.volumes, "", pv["metadata"]["name"], pv, "status")

    def _sync_volume(self, name: str) -> None:
        stored = self.registry.store.get(self.volumes, "", name)
        if stored is None:
            return
        pv = stored.obj
        if pv["metadata"].get("deletionTimestamp"):
            finalizers = list(pv["metadata"].get("finalizers") or ())
            if PV_PROTECTION in finalizers and _dict(pv.get("status")).get("phase") != "Bound":
                finalizers.remove(PV_PROTECTION)
                pv["metadata"]["finalizers"] = finalizers
                self.registry.update(self.volumes, "", name, pv)
                return
            # Still bound: synced as any volume, so that it is released when its claim goes.
        ref = _dict(pv["spec"].get("claimRef"))
        if not ref:
            self._set_volume_phase(pv, "Available")
            return
        if not ref.get("uid"):
            # Pre-bound by hand to a claim that may not exist yet.
            self._set_volume_phase(pv, "Available")
            self.enqueue(("claim", ref.get("namespace", ""), ref.get("name", "")))
            return
        claim = self.registry.store.get(self.claims, str(ref.get("namespace", "")),
                                        str(ref.get("name", "")))
        if claim is None or claim.uid != ref["uid"]:
            self._reclaim(pv)
            return
        bound_to = _dict(claim.view.get("spec")).get("volumeName")
        if not bound_to:
            # Pre-bound by the scheduler or the provisioner: the claim's sync completes it.
            self.enqueue(("claim", claim.namespace, claim.name))
        elif bound_to == name:
            self._set_volume_phase(pv, "Bound")
        else:
            # The claim went to another volume.
            if ANN_BOUND_BY_CONTROLLER in _annotations(pv):
                pv["spec"].pop("claimRef", None)
                pv["metadata"]["annotations"].pop(ANN_BOUND_BY_CONTROLLER, None)
                pv = self.registry.update(self.volumes, "", name, pv)
            self._set_volume_phase(pv, "Available")

    def _reclaim(self, pv: Obj) -> None:
        """The claim of a bound volume is gone: release, then apply the reclaim policy."""
        name = pv["metadata"]["name"]
        if _dict(pv.get("status")).get("phase") == "Failed":
            return
        pv = self._set_volume_phase(pv, "Released")
        policy = pv["spec"].get("persistentVolumeReclaimPolicy")
        if policy == "Delete":
            if ANN_PROVISIONED_BY in _annotations(pv):
                try:
                    self.registry.delete(self.volumes, "", name)
                except errors.ApiError as exc:
                    if exc.code != 404:
                        raise
            else:
                message = (f'error getting deleter volume plugin for volume "{name}": no '
                           "deletable volume plugin matched")
                self._record(pv, "VolumeFailedDelete", message, "Warning")
                self._set_volume_phase(pv, "Failed", message)
        elif policy == "Recycle":
            pv["spec"].pop("claimRef", None)
            pv = self.registry.update(self.volumes, "", name, pv)
            self._set_volume_phase(pv, "Available")

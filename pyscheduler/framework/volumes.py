"""Persistent storage as the scheduler sees it: claims, volumes, storage classes, CSI nodes.

The scheduler's informers keep a :class:`VolumeCatalog` of what the volume plugins read
(kube's PVC/PV/StorageClass/CSINode listers), parsed once per object change into small frozen
values. The catalog also holds the scheduler's own decisions not yet visible in the API
(kube's ``AssumeCache`` of PersistentVolumes): a static volume chosen for a claim is *assumed*
the moment the pod is assumed, so the next pod does not pick the same volume while the
binding is written; a failed binding forgets it again.

What is read the way kube's storage helpers (``k8s.io/component-helpers/storage/volume``) read
it:

* a claim's or volume's class is the ``volume.beta.kubernetes.io/storage-class`` annotation
  when present, else ``spec.storageClassName`` (``GetPersistentVolumeClaimClass``,
  ``GetPersistentVolumeClass``);
* a claim is *bound* when it names a volume **and** carries ``pv.kubernetes.io/bind-completed``
  (``isPVCFullyBound``); one that names a volume without it is pre-bound, not bound yet;
* a volume's node affinity is checked the way ``CheckNodeAffinity`` checks it, against a node
  made of the node's labels only: ``matchFields`` (``metadata.name``) requirements are ignored,
  so a term of ``matchFields`` alone matches every node, and a malformed term matches none;
* which volume may serve a claim is ``FindMatchingVolume``'s answer
  (:meth:`VolumeCatalog.static_candidates`).

Quantities of storage are bytes; access modes are kube's strings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pyscheduler.api.labels import LabelSelector, label_selector_from_dict
from pyscheduler.api.quantity import QuantityError, parse_quantity, value
from pyscheduler.framework.pod import (
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodInfo,
    node_term,
)

__all__ = [
    "BETA_CLASS_ANNOTATION",
    "BIND_COMPLETED",
    "NO_PROVISIONER",
    "READ_WRITE_ONCE_POD",
    "SELECTED_NODE",
    "VOLUME_AVAILABLE",
    "WAIT_FOR_FIRST_CONSUMER",
    "Claim",
    "ClaimRef",
    "StorageClass",
    "Volume",
    "VolumeCatalog",
    "claim_refs",
    "not_found",
    "not_owner",
]

SELECTED_NODE = "volume.kubernetes.io/selected-node"
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
BETA_CLASS_ANNOTATION = "volume.beta.kubernetes.io/storage-class"
NO_PROVISIONER = "kubernetes.io/no-provisioner"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
READ_WRITE_ONCE_POD = "ReadWriteOncePod"
VOLUME_AVAILABLE = "Available"
CLAIM_LOST = "Lost"
DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"

Obj = Mapping[str, Any]


def not_found(resource: str, name: str) -> str:
    """The message of a lister's NotFound error: ``persistentvolumeclaim "data" not found``
    (``resource`` as the informer lister names it: ``persistentvolumeclaim``,
    ``persistentvolume``, ``storageclass.storage.k8s.io``)."""
    return f'{resource} "{name}" not found'


def not_owner(pod: PodInfo, claim: str) -> str:
    """``ephemeral.VolumeIsForPod``'s error: a generic ephemeral volume's claim exists but is
    not controlled by the pod."""
    return (f"PVC {pod.namespace}/{claim} was not created for pod "
            f"{pod.namespace}/{pod.name} (pod is not owner)")


@dataclass(frozen=True, slots=True)
class ClaimRef:
    """One claim a pod mounts: a ``persistentVolumeClaim`` volume, or a generic ``ephemeral``
    volume (whose claim, ``<pod>-<volume>``, the pod must own)."""

    name: str
    ephemeral: bool


def claim_refs(pod: PodInfo) -> tuple[ClaimRef, ...]:
    """The pod's claims in ``spec.volumes`` order, each once, with how it is mounted (the
    plugins differ: VolumeZone and VolumeRestrictions look at ``persistentVolumeClaim``
    volumes only). A pod without its raw object: :attr:`PodInfo.claims`, all persistent."""
    spec = pod.raw.get("spec")
    volumes = spec.get("volumes") if isinstance(spec, Mapping) else None
    if not isinstance(volumes, list):
        return tuple(ClaimRef(name, False) for name in pod.claims)
    out: dict[str, ClaimRef] = {}
    for volume in volumes:
        if not isinstance(volume, Mapping):
            continue
        source = volume.get("persistentVolumeClaim")
        if isinstance(source, Mapping) and source.get("claimName"):
            name = str(source["claimName"])
            out.setdefault(name, ClaimRef(name, False))
        elif isinstance(volume.get("ephemeral"), Mapping):
            name = f"{pod.name}-{volume.get('name', '')}"
            out.setdefault(name, ClaimRef(name, True))
    return tuple(out.values())


def _bytes(raw: Any) -> int:
    try:
        return max(value(parse_quantity(raw)), 0)
    except (QuantityError, TypeError, ValueError):
        return 0


def _class(meta: Obj, spec: Obj) -> str:
    annotations = meta.get("annotations") or {}
    if BETA_CLASS_ANNOTATION in annotations:
        return str(annotations[BETA_CLASS_ANNOTATION] or "")
    return str(spec.get("storageClassName") or "")


def _volume_affinity(raw: Any) -> tuple[NodeSelectorTerm, ...] | None:
    """``spec.nodeAffinity`` of a volume as ``CheckNodeAffinity`` applies it: None when it
    does not restrict nodes, else the terms (ORed) that can match a node's labels."""
    required = raw.get("required") if isinstance(raw, Mapping) else None
    if not isinstance(required, Mapping):
        return None
    terms = []
    for raw_term in required.get("nodeSelectorTerms") or ():
        problems: list[str] = []
        term = node_term(raw_term, "", problems)
        if term is None or problems:
            continue  # a term kube cannot parse matches no node
        if not term.match_expressions:
            if term.match_fields:
                return None  # only fields, which a nameless node does not have: any node
            continue  # an empty term selects nothing
        terms.append(NodeSelectorTerm(term.match_expressions, ()))
    return tuple(terms)


@dataclass(frozen=True, slots=True)
class Claim:
    """A PersistentVolumeClaim."""

    namespace: str
    name: str
    uid: str
    volume_name: str  # spec.volumeName; "" while unbound
    storage_class: str
    access_modes: frozenset[str]
    request: int
    selector: LabelSelector | None
    volume_mode: str
    deleting: bool
    #: The ``volume.kubernetes.io/selected-node`` annotation (None: absent).
    selected_node: str | None
    bind_completed: bool = False
    lost: bool = False  # status.phase Lost: its volume is gone
    owner_uid: str = ""  # uid of the controlling owner reference
    attributes_class: str = ""  # spec.volumeAttributesClassName

    @classmethod
    def from_object(cls, obj: Obj) -> Claim:
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        annotations = meta.get("annotations") or {}
        requests = (spec.get("resources") or {}).get("requests") or {}
        raw_selector = spec.get("selector")
        try:
            selector = label_selector_from_dict(raw_selector) if raw_selector else None
        except Exception:
            selector = LabelSelector(nothing=True)
        owner = ""
        for ref in meta.get("ownerReferences") or ():
            if isinstance(ref, Mapping) and ref.get("controller") is True:
                owner = str(ref.get("uid") or "")
                break
        selected = annotations.get(SELECTED_NODE)
        return cls(str(meta.get("namespace") or ""), str(meta.get("name") or ""),
                   str(meta.get("uid") or ""), str(spec.get("volumeName") or ""),
                   _class(meta, spec), frozenset(spec.get("accessModes") or ()),
                   _bytes(requests.get("storage")), selector,
                   str(spec.get("volumeMode") or "Filesystem"),
                   bool(meta.get("deletionTimestamp")),
                   None if selected is None else str(selected),
                   BIND_COMPLETED in annotations,
                   (obj.get("status") or {}).get("phase") == CLAIM_LOST, owner,
                   str(spec.get("volumeAttributesClassName") or ""))

    @property
    def key(self) -> tuple[str, str]:
        return self.namespace, self.name

    @property
    def bound(self) -> bool:
        """Bound by the PV controller: a volume named and the binding completed."""
        return bool(self.volume_name) and self.bind_completed


@dataclass(frozen=True, slots=True)
class Volume:
    """A PersistentVolume."""

    name: str
    capacity: int
    access_modes: frozenset[str]
    storage_class: str
    claim: tuple[str, str, str] | None  # claimRef (namespace, name, uid)
    #: spec.nodeAffinity.required as it restricts nodes: None = any node; () = no node
    node_terms: tuple[NodeSelectorTerm, ...] | None
    labels: Mapping[str, str]
    csi_driver: str
    handle: str  # spec.csi.volumeHandle: what counts once against a node's attach limit
    phase: str
    volume_mode: str
    deleting: bool
    attributes_class: str = ""  # spec.volumeAttributesClassName
    resource_version: str = ""

    @classmethod
    def from_object(cls, obj: Obj) -> Volume:
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        ref = spec.get("claimRef")
        claim = None
        if isinstance(ref, Mapping):
            claim = (str(ref.get("namespace") or ""), str(ref.get("name") or ""),
                     str(ref.get("uid") or ""))
        raw_csi = spec.get("csi")
        csi: Obj = raw_csi if isinstance(raw_csi, Mapping) else {}
        return cls(str(meta.get("name") or ""),
                   _bytes((spec.get("capacity") or {}).get("storage")),
                   frozenset(spec.get("accessModes") or ()), _class(meta, spec), claim,
                   _volume_affinity(spec.get("nodeAffinity")),
                   dict(meta.get("labels") or {}), str(csi.get("driver") or ""),
                   str(csi.get("volumeHandle") or ""),
                   str((obj.get("status") or {}).get("phase") or ""),
                   str(spec.get("volumeMode") or "Filesystem"),
                   bool(meta.get("deletionTimestamp")),
                   str(spec.get("volumeAttributesClassName") or ""),
                   str(meta.get("resourceVersion") or ""))


@dataclass(frozen=True, slots=True)
class StorageClass:
    name: str
    provisioner: str
    binding_mode: str
    #: allowedTopologies as node selector terms (() = any node)
    allowed_topologies: tuple[NodeSelectorTerm, ...]
    default: bool

    @classmethod
    def from_object(cls, obj: Obj) -> StorageClass:
        meta = obj.get("metadata") or {}
        terms = []
        for term in obj.get("allowedTopologies") or ():
            reqs = tuple(NodeSelectorRequirement(str(e.get("key") or ""), "In",
                                                 tuple(str(v) for v in e.get("values") or ()))
                         for e in (term or {}).get("matchLabelExpressions") or ())
            terms.append(NodeSelectorTerm(reqs, ()))
        return cls(str(meta.get("name") or ""), str(obj.get("provisioner") or ""),
                   str(obj.get("volumeBindingMode") or "Immediate"), tuple(terms),
                   (meta.get("annotations") or {}).get(DEFAULT_CLASS_ANNOTATION) == "true")


@dataclass
class VolumeCatalog:
    """Everything the volume plugins read, and the volumes this scheduler assumed."""

    claims: dict[tuple[str, str], Claim] = field(default_factory=dict)
    volumes: dict[str, Volume] = field(default_factory=dict)
    classes: dict[str, StorageClass] = field(default_factory=dict)
    #: node name -> CSI driver -> attach limit (drivers without a limit are absent)
    csi_limits: dict[str, dict[str, int]] = field(default_factory=dict)
    #: volume name -> claim (namespace, name) it was chosen for, by this scheduler
    assumed: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: bumped when a CSI node's limits change
    csi_generation: int = 0
    #: storage class -> volume name -> volume (kube's PV cache is indexed by class)
    _by_class: dict[str, dict[str, Volume]] = field(default_factory=dict, repr=False)

    # -- informer feeds ------------------------------------------------------------------------

    def set_claim(self, obj: Obj) -> None:
        claim = Claim.from_object(obj)
        self.claims[claim.key] = claim

    def delete_claim(self, obj: Obj) -> None:
        claim = Claim.from_object(obj)
        self.claims.pop(claim.key, None)

    def set_volume(self, obj: Obj) -> None:
        volume = Volume.from_object(obj)
        old = self.volumes.get(volume.name)
        if old is not None:
            self._unindex(old)
        self.volumes[volume.name] = volume
        self._by_class.setdefault(volume.storage_class, {})[volume.name] = volume
        if volume.claim is not None and self.assumed.get(volume.name) == volume.claim[:2]:
            del self.assumed[volume.name]  # our choice is now in the API

    def delete_volume(self, obj: Obj) -> None:
        name = str((obj.get("metadata") or {}).get("name") or "")
        old = self.volumes.pop(name, None)
        if old is not None:
            self._unindex(old)
        self.assumed.pop(name, None)

    def _unindex(self, volume: Volume) -> None:
        same = self._by_class.get(volume.storage_class)
        if same is not None:
            same.pop(volume.name, None)
            if not same:
                del self._by_class[volume.storage_class]

    def set_class(self, obj: Obj) -> None:
        sc = StorageClass.from_object(obj)
        self.classes[sc.name] = sc

    def delete_class(self, obj: Obj) -> None:
        self.classes.pop(str((obj.get("metadata") or {}).get("name") or ""), None)

    def set_csinode(self, obj: Obj) -> None:
        name = str((obj.get("metadata") or {}).get("name") or "")
        limits: dict[str, int] = {}
        for driver in (obj.get("spec") or {}).get("drivers") or ():
            count = ((driver or {}).get("allocatable") or {}).get("count")
            if isinstance(count, int) and not isinstance(count, bool):
                limits[str(driver.get("name") or "")] = count
        if self.csi_limits.get(name) != limits:
            self.csi_limits[name] = limits
            self.csi_generation += 1

    def delete_csinode(self, obj: Obj) -> None:
        if self.csi_limits.pop(str((obj.get("metadata") or {}).get("name") or ""), None):
            self.csi_generation += 1

    # -- reading -------------------------------------------------------------------------------

    def volume_of(self, claim: Claim) -> Volume | None:
        """The volume a claim names (bound or pre-bound), if it exists."""
        return self.volumes.get(claim.volume_name) if claim.volume_name else None

    def reserved_for(self, volume: Volume) -> tuple[str, str, str] | None:
        """The claim (namespace, name, uid; uid "" when unknown) ``volume`` is bound or
        pre-bound to in the API, or assumed for by this scheduler."""
        if volume.claim is not None:
            return volume.claim
        key = self.assumed.get(volume.name)
        return None if key is None else (key[0], key[1], "")

    def taken(self, volume: Volume) -> bool:
        """Whether ``volume`` is bound, pre-bound, or assumed for some claim."""
        return self.reserved_for(volume) is not None

    def bound_to(self, volume: Volume, claim: Claim) -> bool:
        """``IsVolumeBoundToClaim``: the volume's claim reference names ``claim`` (and, when
        it has a uid, the same uid)."""
        ref = self.reserved_for(volume)
        return ref is not None and ref[:2] == claim.key and (not ref[2] or ref[2] == claim.uid)

    def static_candidates(self, claim: Claim) -> list[Volume]:
        """The volumes kube's ``FindMatchingVolume`` would consider for ``claim``, before node
        affinity and before the volumes other claims of the pod took, in the order it decides.

        A volume of the claim's class pre-bound to the claim (its ``claimRef``, or assumed for
        it here) that is big enough, of the claim's volume mode and attributes class and not
        being deleted is kube's only answer, fitting the node or not: then it is returned
        alone. Otherwise the ``Available`` volumes of the class that nobody claims, big enough,
        of the same volume mode and attributes class, matching the claim's selector and
        offering all its access modes, the smallest first (ties by name)."""
        found: list[Volume] = []
        same_class = self._by_class.get(claim.storage_class) or {}
        for name in sorted(same_class):
            volume = same_class[name]
            ref = self.reserved_for(volume)
            mine = ref is not None and ref[:2] == claim.key and (not ref[2] or ref[2] == claim.uid)
            if ref is not None and not mine:
                continue
            if volume.capacity < claim.request or volume.volume_mode != claim.volume_mode:
                continue
            if claim.attributes_class and volume.attributes_class != claim.attributes_class:
                continue
            if volume.deleting:
                continue
            if mine:
                return [volume]
            if volume.phase != VOLUME_AVAILABLE:
                continue
            if claim.selector is not None and not claim.selector.matches(volume.labels):
                continue
            if not claim.access_modes <= volume.access_modes:
                continue
            found.append(volume)
        found.sort(key=lambda v: (v.capacity, v.name))
        return found

"""Plain reference implementations of the volume plugins, one node at a time.

Written straight from kube-scheduler's ``volumebinding`` (``binder.go``: ``GetPodVolumeClaims``,
``FindPodVolumes``, with component-helpers' ``FindMatchingVolume`` and ``CheckNodeAffinity``),
``volumezone``, ``volumerestrictions`` (ReadWriteOncePod) and ``nodevolumelimits`` (``csi.go``)
plugins, reading the API objects themselves: the claims, volumes, storage classes and CSI nodes
as JSON dicts (:class:`Cluster`), the pod's ``spec.volumes``, the node's labels and the pods on
it. No numpy, no catalog, nothing shared with the vectorized plugins.

Filters return the node's reasons as ``(message, unresolvable)`` pairs in kube's order; an
empty list means the node passes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyscheduler.api.quantity import parse_quantity, value

__all__ = [
    "Cluster",
    "Found",
    "find_pod_volumes",
    "node_volume_limits",
    "volume_binding",
    "volume_restrictions",
    "volume_zone",
]

Obj = Mapping[str, Any]
Reasons = list[tuple[str, bool]]

IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
NODE_CONFLICT = "node(s) had volume node affinity conflict"
BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
ZONE_CONFLICT = "node(s) had no available volume zone"
RWOP_CONFLICT = ("node has pod using PersistentVolumeClaim with the same name and "
                 "ReadWriteOncePod access mode")
MAX_VOLUMES = "node(s) exceed max volume count"

TOPOLOGY_LABELS = ["failure-domain.beta.kubernetes.io/zone",
                   "failure-domain.beta.kubernetes.io/region",
                   "topology.kubernetes.io/zone", "topology.kubernetes.io/region"]


@dataclass
class Cluster:
    """What kube's listers hold, plus the PV assume cache's assumptions (volume name ->
    (namespace, claim name) it is assumed bound to)."""

    claims: Sequence[Obj] = field(default_factory=list)
    volumes: Sequence[Obj] = field(default_factory=list)
    classes: Sequence[Obj] = field(default_factory=list)
    csinodes: Sequence[Obj] = field(default_factory=list)
    assumed: dict[str, tuple[str, str]] = field(default_factory=dict)

    def claim(self, namespace: str, name: str) -> Obj | None:
        for c in self.claims:
            if c["metadata"]["namespace"] == namespace and c["metadata"]["name"] == name:
                return c
        return None

    def volume(self, name: str) -> Obj | None:
        for v in self.volumes:
            if v["metadata"]["name"] == name:
                return v
        return None

    def storage_class(self, name: str) -> Obj | None:
        for sc in self.classes:
            if sc["metadata"]["name"] == name:
                return sc
        return None

    def csinode(self, name: str) -> Obj | None:
        for n in self.csinodes:
            if n["metadata"]["name"] == name:
                return n
        return None


# -- small helpers, each a kube function ------------------------------------------------------

def _meta(obj: Obj) -> Obj:
    return obj.get("metadata") or {}


def _spec(obj: Obj) -> Obj:
    return obj.get("spec") or {}


def _annotations(obj: Obj) -> Obj:
    return _meta(obj).get("annotations") or {}


def _bytes(q: Any) -> int:
    return value(parse_quantity(q)) if q is not None else 0


def pod_volumes(pod: Obj) -> list[tuple[str, bool]]:
    """(claim name, ephemeral) for each PVC and generic ephemeral volume (``VolumeClaimName``)."""
    out = []
    for vol in _spec(pod).get("volumes") or []:
        if vol.get("persistentVolumeClaim") is not None:
            out.append((vol["persistentVolumeClaim"]["claimName"], False))
        elif vol.get("ephemeral") is not None:
            out.append((f"{_meta(pod)['name']}-{vol['name']}", True))
    return out


def claim_class(pvc: Obj) -> str:
    """``GetPersistentVolumeClaimClass`` (and ``GetPersistentVolumeClass``: the same rule)."""
    annotations = _annotations(pvc)
    if "volume.beta.kubernetes.io/storage-class" in annotations:
        return str(annotations["volume.beta.kubernetes.io/storage-class"])
    return str(_spec(pvc).get("storageClassName") or "")


def controlled_by(pvc: Obj, pod: Obj) -> bool:
    """``metav1.IsControlledBy``."""
    for ref in _meta(pvc).get("ownerReferences") or []:
        if ref.get("controller") is True:
            return bool(ref.get("uid") == _meta(pod).get("uid"))
    return False


def _requirement(r: Obj, labels: Obj) -> bool | None:
    """One matchExpressions requirement against labels; None when kube cannot parse it."""
    key, op, values = str(r.get("key")), r.get("operator"), list(r.get("values") or [])
    if op in ("In", "NotIn"):
        if not values:
            return None
        found = key in labels and bool(labels[key] in values)
        return found if op == "In" else not found
    if op in ("Exists", "DoesNotExist"):
        if values:
            return None
        return bool((key in labels) == (op == "Exists"))
    if op in ("Gt", "Lt"):
        try:
            bound = int(values[0]) if len(values) == 1 else None
        except ValueError:
            return None
        if bound is None:
            return None
        try:
            have = int(labels[key])
        except (KeyError, ValueError):
            return False
        return have > bound if op == "Gt" else have < bound
    return None


def check_node_affinity(pv: Obj, labels: Obj) -> bool:
    """``CheckNodeAffinity``: the terms matched against a node made of ``labels`` only, so
    ``matchFields`` select nothing to compare with and are skipped (but must parse)."""
    affinity = _spec(pv).get("nodeAffinity")
    if affinity is None or affinity.get("required") is None:
        return True
    for term in affinity["required"].get("nodeSelectorTerms") or []:
        expressions = term.get("matchExpressions") or []
        fields = term.get("matchFields") or []
        if not expressions and not fields:
            continue
        if any(len(f.get("values") or []) != 1 or f.get("operator") not in ("In", "NotIn")
               or f.get("key") != "metadata.name" for f in fields):
            continue
        results = [_requirement(r, labels) for r in expressions]
        if None in results:
            continue
        if all(results):
            return True
    return False


def _topology_ok(sc: Obj, labels: Obj) -> bool:
    """``MatchTopologySelectorTerms``."""
    terms = sc.get("allowedTopologies") or []
    if not terms:
        return True
    for term in terms:
        expressions = term.get("matchLabelExpressions") or []
        if expressions and all(e["key"] in labels and labels[e["key"]] in e["values"]
                               for e in expressions):
            return True
    return False


def _claim_ref(pv: Obj, cluster: Cluster) -> tuple[str, str, str] | None:
    ref = _spec(pv).get("claimRef")
    if ref is not None:
        return ref.get("namespace", ""), ref.get("name", ""), ref.get("uid", "")
    assumed = cluster.assumed.get(_meta(pv)["name"])
    return None if assumed is None else (assumed[0], assumed[1], "")


def _bound_to(ref: tuple[str, str, str], pvc: Obj) -> bool:
    """``IsVolumeBoundToClaim``."""
    meta = _meta(pvc)
    return ref[0] == meta["namespace"] and ref[1] == meta["name"] and \
        (not ref[2] or ref[2] == meta.get("uid"))


def _selector_matches(pvc: Obj, labels: Obj) -> bool:
    selector = _spec(pvc).get("selector")
    if selector is None:
        return True
    return all(labels.get(k) == v for k, v in (selector.get("matchLabels") or {}).items())


def find_matching_volume(pvc: Obj, labels: Obj, excluded: set[str],
                         cluster: Cluster) -> Obj | None:
    """``FindMatchingVolume`` on the scheduler path (a node given, delayed binding), over the
    volumes of the claim's class in name order."""
    wanted_class = claim_class(pvc)
    requested = _bytes(((_spec(pvc).get("resources") or {}).get("requests") or {}).get("storage"))
    claim_vac = _spec(pvc).get("volumeAttributesClassName") or ""
    smallest: Obj | None = None
    for pv in sorted(cluster.volumes, key=lambda v: _meta(v)["name"]):
        if claim_class(pv) != wanted_class or _meta(pv)["name"] in excluded:
            continue
        ref = _claim_ref(pv, cluster)
        if ref is not None and not _bound_to(ref, pvc):
            continue
        capacity = _bytes((_spec(pv).get("capacity") or {}).get("storage"))
        if capacity < requested:
            continue
        if (_spec(pvc).get("volumeMode") or "Filesystem") != \
                (_spec(pv).get("volumeMode") or "Filesystem"):
            continue
        if claim_vac and (_spec(pv).get("volumeAttributesClassName") or "") != claim_vac:
            continue
        if _meta(pv).get("deletionTimestamp"):
            continue
        affinity_ok = check_node_affinity(pv, labels)
        if ref is not None:
            return pv if affinity_ok else None
        if (pv.get("status") or {}).get("phase") != "Available":
            continue
        if not _selector_matches(pvc, _meta(pv).get("labels") or {}):
            continue
        if not affinity_ok:
            continue
        if not set(_spec(pvc).get("accessModes") or []) <= set(_spec(pv).get("accessModes") or []):
            continue
        if smallest is None or \
                _bytes(_spec(smallest)["capacity"]["storage"]) > capacity:
            smallest = pv
    return smallest


# -- VolumeBinding -----------------------------------------------------------------------------

@dataclass
class Found:
    """``FindPodVolumes``' answer for one node."""

    reasons: Reasons
    static: list[tuple[str, str]] = field(default_factory=list)  # (claim, volume)
    dynamic: list[str] = field(default_factory=list)  # claims to provision


def find_pod_volumes(pod: Obj, node_name: str, labels: Obj, cluster: Cluster) -> Found:
    namespace = _meta(pod)["namespace"]
    # PreFilter: podHasPVCs
    claims = []
    for name, ephemeral in pod_volumes(pod):
        pvc = cluster.claim(namespace, name)
        if pvc is None:
            if ephemeral:
                return Found([("waiting for ephemeral volume controller to create the "
                               f'persistentvolumeclaim "{name}"', True)])
            return Found([(f'persistentvolumeclaim "{name}" not found', True)])
        if (pvc.get("status") or {}).get("phase") == "Lost":
            return Found([(f'persistentvolumeclaim "{name}" bound to non-existent '
                           f'persistentvolume "{_spec(pvc).get("volumeName", "")}"', True)])
        if _meta(pvc).get("deletionTimestamp"):
            return Found([(f'persistentvolumeclaim "{name}" is being deleted', True)])
        if ephemeral and not controlled_by(pvc, pod):
            return Found([(f"PVC {namespace}/{name} was not created for pod "
                           f"{namespace}/{_meta(pod)['name']} (pod is not owner)", True)])
        claims.append(pvc)
    # GetPodVolumeClaims
    bound: list[Obj] = []
    delayed: list[Obj] = []
    immediate: list[Obj] = []
    for pvc in claims:
        volume_name = _spec(pvc).get("volumeName") or ""
        if volume_name and "pv.kubernetes.io/bind-completed" in _annotations(pvc):
            bound.append(pvc)
            continue
        name = claim_class(pvc)
        sc = cluster.storage_class(name) if name else None
        delay = sc is not None and sc.get("volumeBindingMode") == "WaitForFirstConsumer"
        (delayed if delay and not volume_name else immediate).append(pvc)
    if immediate:
        return Found([(IMMEDIATE, True)])
    # Filter: FindPodVolumes
    bound_ok, pvs_found, unbound_ok = True, True, True
    found = Found([])
    for pvc in bound:
        pv = cluster.volume(_spec(pvc)["volumeName"])
        if pv is None:
            pvs_found = False
            break
        if not check_node_affinity(pv, labels):
            bound_ok = False
            break
    if delayed:
        to_provision, to_match = [], []
        fast_fail = False
        for pvc in delayed:
            selected = _annotations(pvc).get("volume.kubernetes.io/selected-node")
            if selected is not None:
                if selected != node_name:
                    fast_fail = True
                    break
                to_provision.append(pvc)
            else:
                to_match.append(pvc)
        if fast_fail:
            unbound_ok = False
        else:
            def size(c: Obj) -> int:
                return _bytes((_spec(c).get("resources") or {}).get("requests", {})
                              .get("storage"))
            chosen: set[str] = set()
            for pvc in sorted(to_match, key=size):
                pv = find_matching_volume(pvc, labels, chosen, cluster)
                if pv is None:
                    to_provision.append(pvc)
                    unbound_ok = False
                    continue
                chosen.add(_meta(pv)["name"])
                found.static.append((_meta(pvc)["name"], _meta(pv)["name"]))
            if to_provision:
                unbound_ok = True
                for pvc in to_provision:
                    sc = cluster.storage_class(claim_class(pvc))
                    assert sc is not None
                    provisioner = sc.get("provisioner") or ""
                    if provisioner in ("", "kubernetes.io/no-provisioner") or \
                            not _topology_ok(sc, labels):
                        unbound_ok = False
                        break
                    found.dynamic.append(_meta(pvc)["name"])
    if not bound_ok:
        found.reasons.append((NODE_CONFLICT, True))
    if not unbound_ok:
        found.reasons.append((BIND_CONFLICT, True))
    if not pvs_found:
        found.reasons.append((PV_NOT_EXIST, True))
    return found


def volume_binding(pod: Obj, node_name: str, labels: Obj, cluster: Cluster) -> Reasons:
    return find_pod_volumes(pod, node_name, labels, cluster).reasons


# -- VolumeZone --------------------------------------------------------------------------------

def _label_zones(value_: str) -> set[str] | None:
    """``LabelZonesToSet``."""
    out = set()
    for zone in value_.split("__"):
        if not zone.strip():
            return None
        out.add(zone.strip())
    return out


def volume_zone(pod: Obj, labels: Obj, cluster: Cluster) -> Reasons:
    namespace = _meta(pod)["namespace"]
    topologies = []
    for name, ephemeral in pod_volumes(pod):
        if ephemeral:
            continue
        pvc = cluster.claim(namespace, name)
        if pvc is None:
            return [(f'persistentvolumeclaim "{name}" not found', True)]
        pv_name = _spec(pvc).get("volumeName") or ""
        if not pv_name:
            sc_name = claim_class(pvc)
            if not sc_name:
                return [("PersistentVolumeClaim had no pv name and storageClass name", True)]
            sc = cluster.storage_class(sc_name)
            if sc is None:
                return [(f'storageclass.storage.k8s.io "{sc_name}" not found', True)]
            if sc.get("volumeBindingMode") == "WaitForFirstConsumer":
                continue
            return [("PersistentVolume had no name", True)]
        pv = cluster.volume(pv_name)
        if pv is None:
            return [(f'persistentvolume "{pv_name}" not found', True)]
        for key in TOPOLOGY_LABELS:
            if key in (_meta(pv).get("labels") or {}):
                zones = _label_zones(_meta(pv)["labels"][key])
                if zones is not None:
                    topologies.append((key, zones))
    if not any(key in labels for key in TOPOLOGY_LABELS):
        return []
    for key, zones in topologies:
        have = labels.get(key)
        if have is None:
            have = labels.get(key.replace("failure-domain.beta.kubernetes.io/",
                                          "topology.kubernetes.io/"))
        if have is None or have not in zones:
            return [(ZONE_CONFLICT, True)]
    return []


# -- VolumeRestrictions ------------------------------------------------------------------------

def volume_restrictions(pod: Obj, all_pods: Sequence[Obj], cluster: Cluster) -> Reasons:
    namespace = _meta(pod)["namespace"]
    rwop = set()
    for name, ephemeral in pod_volumes(pod):
        if ephemeral:
            continue
        pvc = cluster.claim(namespace, name)
        if pvc is None:
            return [(f'persistentvolumeclaim "{name}" not found', True)]
        if "ReadWriteOncePod" in (_spec(pvc).get("accessModes") or []):
            rwop.add(name)
    for name in rwop:
        # StorageInfos().IsPVCUsedByPods: persistentVolumeClaim volumes of the pods on nodes.
        for other in all_pods:
            if _meta(other)["namespace"] == namespace and \
                    (name, False) in pod_volumes(other):
                return [(RWOP_CONFLICT, False)]
    return []


# -- NodeVolumeLimits --------------------------------------------------------------------------

def _driver_info(pvc: Obj, cluster: Cluster) -> tuple[str, str] | None:
    """``getCSIDriverInfo`` (and ``getCSIDriverInfoFromSC``)."""
    pv_name = _spec(pvc).get("volumeName") or ""
    pv = cluster.volume(pv_name) if pv_name else None
    if pv is None:
        sc_name = claim_class(pvc)
        sc = cluster.storage_class(sc_name) if sc_name else None
        if sc is None:
            return None
        driver = sc.get("provisioner") or ""
        handle = f"random-prefix-{_meta(pvc)['namespace']}/{_meta(pvc)['name']}"
        return (driver, handle) if driver else None
    csi = _spec(pv).get("csi")
    if csi is None:
        return None
    driver, handle = csi.get("driver") or "", csi.get("volumeHandle") or ""
    return (driver, handle) if driver and handle else None


def node_volume_limits(pod: Obj, node_name: str, node_pods: Sequence[Obj],
                       cluster: Cluster) -> Reasons:
    namespace = _meta(pod)["namespace"]
    if not pod_volumes(pod):
        return []
    new: dict[str, str] = {}
    for name, ephemeral in pod_volumes(pod):
        pvc = cluster.claim(namespace, name)
        if pvc is None:
            return [(f'looking up PVC {namespace}/{name}: persistentvolumeclaim "{name}" '
                     "not found", True)]
        if ephemeral and not controlled_by(pvc, pod):
            return [(f"PVC {namespace}/{name} was not created for pod "
                     f"{namespace}/{_meta(pod)['name']} (pod is not owner)", True)]
        info = _driver_info(pvc, cluster)
        if info is not None:
            new[f"{info[0]}/{info[1]}"] = info[0]
    if not new:
        return []
    csinode = cluster.csinode(node_name)
    limits = {}
    for driver in _spec(csinode).get("drivers") or [] if csinode is not None else []:
        count = (driver.get("allocatable") or {}).get("count")
        if count is not None:
            limits[driver["name"]] = count
    if not limits:
        return []
    attached: dict[str, str] = {}
    for other in node_pods:
        for name, _ in pod_volumes(other):
            pvc = cluster.claim(_meta(other)["namespace"], name)
            if pvc is None:
                continue
            info = _driver_info(pvc, cluster)
            if info is not None:
                attached[f"{info[0]}/{info[1]}"] = info[0]
    attached_count: dict[str, int] = {}
    for unique, driver in attached.items():
        new.pop(unique, None)
        attached_count[driver] = attached_count.get(driver, 0) + 1
    new_count: dict[str, int] = {}
    for driver in new.values():
        new_count[driver] = new_count.get(driver, 0) + 1
    for driver, count in new_count.items():
        if driver in limits and attached_count.get(driver, 0) + count > limits[driver]:
            return [(MAX_VOLUMES, False)]
    return []

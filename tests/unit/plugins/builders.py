"""Fluent builders for pod and node JSON, in the spirit of kube's
``pkg/scheduler/testing/wrappers.go``.

Tests describe objects the way they read::

    make_pod("web").req(cpu="100m", memory="1Gi").node_selector(zone="a")
        .toleration("gpu", "true", effect="NoSchedule").obj()
    make_node("n1").capacity(cpu="4", memory="32Gi", pods=110).label("zone", "a")
        .taint("gpu", "true").image("nginx:1.25", "docker.io/library/nginx:1.25", size=70 * MB)
        .obj()

``obj()`` returns a fresh plain dict (the shape the informers decode), so a builder can be reused
and its output fed to :func:`pyscheduler.framework.pod.pod_info` and
:func:`pyscheduler.framework.nodetable.node_info`. :func:`build_table` places nodes and their
pods into a :class:`NodeTable` and :func:`context` opens a scheduling cycle over it;
:func:`outcome` and :func:`scores` read a plugin's arrays back per node name, checking the filter
contract on the way.

Storage objects for the volume plugins are built the same way (``make_pvc``, ``make_pv``,
``make_storage_class``, ``make_csinode``) and fed to a table's catalog with :func:`feed`::

    make_pvc("data").cls("local").request("5Gi").obj()
    make_pv("pv-1").cls("local").capacity("10Gi").node_affinity("kubernetes.io/hostname", "n1")
        .obj()
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from pyscheduler.framework.interface import CycleContext, FilterResult
from pyscheduler.framework.nodetable import BoolArray, IntArray, NodeTable, node_info
from pyscheduler.framework.pod import PodInfo, pod_info

__all__ = [
    "verdicts",
    "NodeBuilder",
    "PodBuilder",
    "ClaimBuilder",
    "VolumeBuilder",
    "build_table",
    "context",
    "feed",
    "expr",
    "field",
    "make_csinode",
    "make_node",
    "make_pod",
    "make_pv",
    "make_pvc",
    "make_storage_class",
    "outcome",
    "rows",
    "scores",
]

Obj = dict[str, Any]
Quantity = str | int


def _quantities(resources: Mapping[str, Quantity | None] | None,
                named: Mapping[str, Quantity | None]) -> dict[str, Quantity]:
    out: dict[str, Quantity] = {}
    for k, v in (resources or {}).items():
        if v is not None:
            out[k] = v
    for k, v in named.items():
        if v is not None:
            out[k.replace("_", "-")] = v
    return out


def expr(key: str, operator: str, *values: str) -> Obj:
    """A ``matchExpressions`` requirement: ``expr("zone", "In", "a", "b")``."""
    out: Obj = {"key": key, "operator": operator}
    if values:
        out["values"] = list(values)
    return out


def field(operator: str, *values: str) -> Obj:
    """A ``matchFields`` requirement on ``metadata.name``."""
    return {"key": "metadata.name", "operator": operator, "values": list(values)}


def _term(expressions: Sequence[Obj], fields: Sequence[Obj]) -> Obj:
    term: Obj = {}
    if expressions:
        term["matchExpressions"] = [dict(e) for e in expressions]
    if fields:
        term["matchFields"] = [dict(f) for f in fields]
    return term


class PodBuilder:
    """Builds a pod JSON dict; every method returns the builder."""

    def __init__(self, name: str = "pod", namespace: str = "default") -> None:
        self._pod: Obj = {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}"},
            "spec": {"schedulerName": "pyscheduler", "containers": []},
        }
        self._bare = False

    @property
    def _spec(self) -> Obj:
        spec: Obj = self._pod["spec"]
        return spec

    def _node_affinity(self) -> Obj:
        affinity: Obj = self._spec.setdefault("affinity", {})
        node_affinity: Obj = affinity.setdefault("nodeAffinity", {})
        return node_affinity

    def uid(self, uid: str) -> PodBuilder:
        self._pod["metadata"]["uid"] = uid
        return self

    def label(self, key: str, value: str) -> PodBuilder:
        self._pod["metadata"].setdefault("labels", {})[key] = value
        return self

    def annotation(self, key: str, value: str) -> PodBuilder:
        self._pod["metadata"].setdefault("annotations", {})[key] = value
        return self

    def container(self, requests: Mapping[str, Quantity] | None = None,
                  ports: Sequence[Obj] = ()) -> PodBuilder:
        """Add a container with these requests (none: a best-effort container) and ports."""
        containers: list[Obj] = self._spec["containers"]
        c: Obj = {"name": f"c{len(containers)}", "image": "registry.k8s.io/pause:3.9"}
        if requests:
            c["resources"] = {"requests": dict(requests)}
        if ports:
            c["ports"] = [dict(p) for p in ports]
        containers.append(c)
        return self

    def image(self, image: str, *, init: bool = False) -> PodBuilder:
        """Add a container (or an init container) running ``image``, requesting nothing."""
        key = "initContainers" if init else "containers"
        containers: list[Obj] = self._spec.setdefault(key, [])
        containers.append({"name": f"{key[:4]}{len(containers)}", "image": image})
        return self

    def bare(self) -> PodBuilder:
        """Keep the containers list as built, even empty (kube's ``st.MakePod()``: no default
        container, so no default non-zero requests either)."""
        self._bare = True
        return self

    def req(self, resources: Mapping[str, Quantity | None] | None = None, /, *,
            cpu: Quantity | None = None, memory: Quantity | None = None,
            ephemeral_storage: Quantity | None = None) -> PodBuilder:
        """Add a container requesting these resources (kube's ``Req``)."""
        return self.container(_quantities(resources, {"cpu": cpu, "memory": memory,
                                                      "ephemeral_storage": ephemeral_storage}))

    def init_req(self, resources: Mapping[str, Quantity | None] | None = None, /, *,
                 cpu: Quantity | None = None, memory: Quantity | None = None) -> PodBuilder:
        """Add an init container requesting these resources."""
        inits: list[Obj] = self._spec.setdefault("initContainers", [])
        inits.append({"name": f"init{len(inits)}", "image": "registry.k8s.io/pause:3.9",
                      "resources": {"requests": _quantities(resources,
                                                            {"cpu": cpu, "memory": memory})}})
        return self

    def host_port(self, port: int, protocol: str = "TCP", ip: str = "") -> PodBuilder:
        """Add a container exposing ``port`` as a host port."""
        p: Obj = {"containerPort": port, "hostPort": port, "protocol": protocol}
        if ip:
            p["hostIP"] = ip
        return self.container(ports=[p])

    def node_name(self, name: str) -> PodBuilder:
        self._spec["nodeName"] = name
        return self

    def node_selector(self, selector: Mapping[str, str] | None = None, /,
                      **labels: str) -> PodBuilder:
        merged = self._spec.setdefault("nodeSelector", {})
        merged.update(selector or {})
        merged.update(labels)
        return self

    def required_term(self, *expressions: Obj, fields: Sequence[Obj] = ()) -> PodBuilder:
        """Add a required node selector term (terms are ORed; requirements in one ANDed)."""
        required = self._node_affinity().setdefault(
            "requiredDuringSchedulingIgnoredDuringExecution", {"nodeSelectorTerms": []})
        required["nodeSelectorTerms"].append(_term(expressions, fields))
        return self

    def node_affinity_in(self, key: str, *values: str) -> PodBuilder:
        """kube's ``NodeAffinityIn``: a required term ``key In values``."""
        return self.required_term(expr(key, "In", *values))

    def node_affinity_not_in(self, key: str, *values: str) -> PodBuilder:
        return self.required_term(expr(key, "NotIn", *values))

    def preferred_term(self, weight: int, *expressions: Obj,
                       fields: Sequence[Obj] = ()) -> PodBuilder:
        preferred = self._node_affinity().setdefault(
            "preferredDuringSchedulingIgnoredDuringExecution", [])
        preferred.append({"weight": weight, "preference": _term(expressions, fields)})
        return self

    def toleration(self, key: str = "", value: str | None = None, *, effect: str = "",
                   operator: str | None = None) -> PodBuilder:
        """Add a toleration; ``operator`` defaults to Exists without a value, Equal with one."""
        t: Obj = {"operator": operator or ("Exists" if value is None else "Equal")}
        if key:
            t["key"] = key
        if value is not None:
            t["value"] = value
        if effect:
            t["effect"] = effect
        self._spec.setdefault("tolerations", []).append(t)
        return self

    def pvc(self, claim: str, volume: str = "") -> PodBuilder:
        """Mount PersistentVolumeClaim ``claim`` (kube's ``PVC``), as volume ``volume``."""
        self._spec.setdefault("volumes", []).append(
            {"name": volume or claim, "persistentVolumeClaim": {"claimName": claim}})
        return self

    def ephemeral(self, volume: str) -> PodBuilder:
        """Add a generic ephemeral volume; its claim is ``<pod name>-<volume>``."""
        self._spec.setdefault("volumes", []).append(
            {"name": volume, "ephemeral": {"volumeClaimTemplate": {"spec": {}}}})
        return self

    def obj(self) -> Obj:
        pod = copy.deepcopy(self._pod)
        if not pod["spec"]["containers"] and not self._bare:
            pod["spec"]["containers"] = [{"name": "c0", "image": "registry.k8s.io/pause:3.9"}]
        return pod

    def info(self) -> PodInfo:
        return pod_info(self.obj())


class NodeBuilder:
    """Builds a node JSON dict; every method returns the builder."""

    def __init__(self, name: str) -> None:
        self._node: Obj = {"apiVersion": "v1", "kind": "Node",
                           "metadata": {"name": name, "labels": {}},
                           "spec": {}, "status": {"capacity": {}, "allocatable": {}}}

    def capacity(self, resources: Mapping[str, Quantity | None] | None = None, /, *,
                 cpu: Quantity | None = None, memory: Quantity | None = None,
                 pods: Quantity | None = None,
                 ephemeral_storage: Quantity | None = None) -> NodeBuilder:
        """Set capacity and allocatable (equal, as for a node without reservations)."""
        values = _quantities(resources, {"cpu": cpu, "memory": memory, "pods": pods,
                                         "ephemeral_storage": ephemeral_storage})
        status = self._node["status"]
        status["capacity"].update({k: str(v) for k, v in values.items()})
        status["allocatable"].update({k: str(v) for k, v in values.items()})
        return self

    def label(self, key: str, value: str) -> NodeBuilder:
        self._node["metadata"]["labels"][key] = value
        return self

    def labels(self, labels: Mapping[str, str]) -> NodeBuilder:
        self._node["metadata"]["labels"].update(labels)
        return self

    def taint(self, key: str, value: str = "", effect: str = "NoSchedule") -> NodeBuilder:
        t: Obj = {"key": key, "effect": effect}
        if value:
            t["value"] = value
        self._node["spec"].setdefault("taints", []).append(t)
        return self

    def unschedulable(self, cordoned: bool = True) -> NodeBuilder:
        self._node["spec"]["unschedulable"] = cordoned
        return self

    def image(self, *names: str, size: int) -> NodeBuilder:
        """List an image in ``status.images`` under ``names``, of ``size`` bytes."""
        self._node["status"].setdefault("images", []).append(
            {"names": list(names), "sizeBytes": size})
        return self

    def obj(self) -> Obj:
        return copy.deepcopy(self._node)


class ClaimBuilder:
    """Builds a PersistentVolumeClaim JSON dict (defaulted as the API server stores it)."""

    def __init__(self, name: str, namespace: str) -> None:
        self._obj: Obj = {
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": namespace,
                         "uid": f"pvc-uid-{namespace}-{name}"},
            "spec": {"accessModes": ["ReadWriteOnce"], "volumeMode": "Filesystem",
                     "resources": {"requests": {"storage": "1Gi"}}},
            "status": {"phase": "Pending"}}

    def _annotate(self, key: str, value: str) -> ClaimBuilder:
        self._obj["metadata"].setdefault("annotations", {})[key] = value
        return self

    def cls(self, name: str) -> ClaimBuilder:
        self._obj["spec"]["storageClassName"] = name
        return self

    def beta_cls(self, name: str) -> ClaimBuilder:
        """The class as the deprecated ``volume.beta.kubernetes.io/storage-class`` annotation."""
        return self._annotate("volume.beta.kubernetes.io/storage-class", name)

    def request(self, storage: Quantity) -> ClaimBuilder:
        self._obj["spec"]["resources"]["requests"]["storage"] = storage
        return self

    def access(self, *modes: str) -> ClaimBuilder:
        self._obj["spec"]["accessModes"] = list(modes)
        return self

    def mode(self, volume_mode: str) -> ClaimBuilder:
        self._obj["spec"]["volumeMode"] = volume_mode
        return self

    def attributes_class(self, name: str) -> ClaimBuilder:
        self._obj["spec"]["volumeAttributesClassName"] = name
        return self

    def selector(self, **labels: str) -> ClaimBuilder:
        self._obj["spec"]["selector"] = {"matchLabels": dict(labels)}
        return self

    def bound(self, volume: str) -> ClaimBuilder:
        """Bound by the PV controller: ``volumeName`` and ``bind-completed``."""
        self._obj["spec"]["volumeName"] = volume
        self._obj["status"]["phase"] = "Bound"
        return self._annotate("pv.kubernetes.io/bind-completed", "yes")

    def prebound(self, volume: str) -> ClaimBuilder:
        """``volumeName`` set by a user, the binding not completed yet."""
        self._obj["spec"]["volumeName"] = volume
        return self

    def lost(self) -> ClaimBuilder:
        self._obj["status"]["phase"] = "Lost"
        return self

    def selected_node(self, node: str) -> ClaimBuilder:
        return self._annotate("volume.kubernetes.io/selected-node", node)

    def deleting(self) -> ClaimBuilder:
        self._obj["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
        return self

    def owned_by(self, pod: Obj) -> ClaimBuilder:
        """Controlled by ``pod`` (a generic ephemeral volume's claim)."""
        meta = pod["metadata"]
        self._obj["metadata"]["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Pod", "name": meta["name"], "uid": meta["uid"],
             "controller": True}]
        return self

    def obj(self) -> Obj:
        return copy.deepcopy(self._obj)


class VolumeBuilder:
    """Builds a PersistentVolume JSON dict (``Available`` unless told otherwise)."""

    def __init__(self, name: str) -> None:
        self._obj: Obj = {
            "apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": name},
            "spec": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"},
                     "volumeMode": "Filesystem", "persistentVolumeReclaimPolicy": "Retain",
                     "hostPath": {"path": f"/mnt/{name}"}},
            "status": {"phase": "Available"}}

    def cls(self, name: str) -> VolumeBuilder:
        self._obj["spec"]["storageClassName"] = name
        return self

    def capacity(self, storage: Quantity) -> VolumeBuilder:
        self._obj["spec"]["capacity"]["storage"] = storage
        return self

    def access(self, *modes: str) -> VolumeBuilder:
        self._obj["spec"]["accessModes"] = list(modes)
        return self

    def mode(self, volume_mode: str) -> VolumeBuilder:
        self._obj["spec"]["volumeMode"] = volume_mode
        return self

    def attributes_class(self, name: str) -> VolumeBuilder:
        self._obj["spec"]["volumeAttributesClassName"] = name
        return self

    def phase(self, phase: str) -> VolumeBuilder:
        self._obj["status"]["phase"] = phase
        return self

    def label(self, key: str, value: str) -> VolumeBuilder:
        self._obj["metadata"].setdefault("labels", {})[key] = value
        return self

    def claim_ref(self, claim: Obj | str, namespace: str = "default",
                  uid: str | None = None) -> VolumeBuilder:
        """Bound or pre-bound to a claim (its dict, or a name in ``namespace``)."""
        if isinstance(claim, str):
            ref: Obj = {"kind": "PersistentVolumeClaim", "namespace": namespace, "name": claim}
        else:
            meta = claim["metadata"]
            ref = {"kind": "PersistentVolumeClaim", "namespace": meta["namespace"],
                   "name": meta["name"], "uid": meta["uid"]}
        if uid is not None:
            ref["uid"] = uid
        self._obj["spec"]["claimRef"] = ref
        self._obj["status"]["phase"] = "Bound"
        return self

    def node_term(self, *expressions: Obj, fields: Sequence[Obj] = ()) -> VolumeBuilder:
        """Add a ``nodeAffinity.required`` term (terms ORed, requirements ANDed)."""
        required = self._obj["spec"].setdefault("nodeAffinity", {}).setdefault(
            "required", {"nodeSelectorTerms": []})
        required["nodeSelectorTerms"].append(_term(expressions, fields))
        return self

    def node_affinity(self, key: str, *values: str) -> VolumeBuilder:
        """A required term ``key In values`` (a local volume's hostname)."""
        return self.node_term(expr(key, "In", *values))

    def csi(self, driver: str, handle: str = "") -> VolumeBuilder:
        spec = self._obj["spec"]
        spec.pop("hostPath", None)
        spec["csi"] = {"driver": driver, "volumeHandle": handle or self._obj["metadata"]["name"]}
        return self

    def deleting(self) -> VolumeBuilder:
        self._obj["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
        return self

    def obj(self) -> Obj:
        return copy.deepcopy(self._obj)


def make_pvc(name: str, namespace: str = "default") -> ClaimBuilder:
    return ClaimBuilder(name, namespace)


def make_pv(name: str) -> VolumeBuilder:
    return VolumeBuilder(name)


def make_storage_class(name: str, provisioner: str = "kubernetes.io/no-provisioner", *,
                       mode: str = "WaitForFirstConsumer",
                       topologies: Sequence[Mapping[str, Sequence[str]]] = ()) -> Obj:
    """A StorageClass; each of ``topologies`` is one allowedTopologies term, key -> values."""
    sc: Obj = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
               "metadata": {"name": name}, "provisioner": provisioner,
               "reclaimPolicy": "Delete", "volumeBindingMode": mode}
    if topologies:
        sc["allowedTopologies"] = [
            {"matchLabelExpressions": [{"key": k, "values": list(v)} for k, v in term.items()]}
            for term in topologies]
    return sc


def make_csinode(node: str, limits: Mapping[str, int | None]) -> Obj:
    """A CSINode listing the drivers in ``limits`` (None: a driver without a limit)."""
    drivers = []
    for driver, count in limits.items():
        entry: Obj = {"name": driver, "nodeID": node, "topologyKeys": None}
        if count is not None:
            entry["allocatable"] = {"count": count}
        drivers.append(entry)
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
            "metadata": {"name": node}, "spec": {"drivers": drivers}}


def feed(table: NodeTable, objects: Iterable[Obj]) -> NodeTable:
    """Add claims, volumes, storage classes and CSI nodes to the table's catalog, as the
    informers do."""
    catalog = table.volumes
    setters = {"PersistentVolumeClaim": catalog.set_claim, "PersistentVolume": catalog.set_volume,
               "StorageClass": catalog.set_class, "CSINode": catalog.set_csinode}
    for obj in objects:
        setters[obj["kind"]](obj)
    return table


def make_pod(name: str = "pod", namespace: str = "default") -> PodBuilder:
    return PodBuilder(name, namespace)


def make_node(name: str) -> NodeBuilder:
    return NodeBuilder(name)


def build_table(nodes: Iterable[Obj], pods: Mapping[str, Iterable[Obj]] | None = None,
                removed: Iterable[str] = ()) -> NodeTable:
    """A table holding ``nodes``, with ``pods[node name]`` running on them; the nodes named in
    ``removed`` are then deleted again, leaving holes."""
    table = NodeTable(capacity=4)
    for node in nodes:
        table.set_node(node_info(node))
    for node_name, node_pods in (pods or {}).items():
        slot = table.slots[node_name]
        for pod in node_pods:
            info = pod_info(pod)
            # Register resources first seen on this pod before counting it: add_pod reads the
            # requested column before request_vector() widens it.
            table.request_vector(info)
            table.add_pod(slot, info)
    for name in removed:
        table.remove_node(name)
    return table


def context(pod: Obj, nodes: Iterable[Obj], pods: Mapping[str, Iterable[Obj]] | None = None,
            removed: Iterable[str] = (), storage: Iterable[Obj] = ()) -> CycleContext:
    """A scheduling cycle for ``pod`` over a fresh table (its catalog fed with ``storage``:
    claims, volumes, storage classes, CSI nodes)."""
    table = feed(build_table(nodes, pods, removed), storage)
    return CycleContext.for_pod(pod_info(pod), table)


# -- reading results back -----------------------------------------------------------------------

def verdicts(result: FilterResult, table: NodeTable) -> dict[str, tuple[str, bool]]:
    """Failing node name -> (message, unresolvable), asserting each failing node has exactly
    one reason and passing nodes none (plugins that charge one reason per node)."""
    out: dict[str, tuple[str, bool]] = {}
    if result.passed is None:
        return out
    for slot in range(table.n):
        if not table.valid[slot]:
            continue
        hits = [(r.message, r.unresolvable) for r in result.reasons if r.failed[slot]]
        if result.passed[slot]:
            assert not hits, table.names[slot]
        else:
            assert len(hits) == 1, (table.names[slot], hits)
            out[table.names[slot]] = hits[0]
    return out


def outcome(result: FilterResult, table: NodeTable) -> dict[str, list[tuple[str, bool]]]:
    """Per node (holes skipped): its reasons as (message, unresolvable); [] means it passes.

    Also checks the filter contract: arrays of length ``table.n``, and a node passes exactly
    when no reason names it.
    """
    for reason in result.reasons:
        assert reason.failed.dtype == np.bool_ and len(reason.failed) == table.n, reason
    if result.passed is not None:
        assert result.passed.dtype == np.bool_ and len(result.passed) == table.n
    out: dict[str, list[tuple[str, bool]]] = {}
    for slot in range(table.n):
        if not table.valid[slot]:
            continue
        reasons = [(r.message, r.unresolvable) for r in result.reasons if r.failed[slot]]
        passed = True if result.passed is None else bool(result.passed[slot])
        assert passed == (not reasons), (table.names[slot], passed, reasons)
        out[table.names[slot]] = reasons
    return out


def rows(table: NodeTable, names: Iterable[str]) -> BoolArray:
    """A row mask selecting the named nodes."""
    mask = np.zeros(table.n, np.bool_)
    for name in names:
        mask[table.slots[name]] = True
    return mask


def scores(values: IntArray, table: NodeTable, feasible: BoolArray | None = None
           ) -> dict[str, int]:
    """Per scored node (feasible and not a hole): its score."""
    assert values.dtype == np.int64 and len(values) == table.n
    chosen = table.valid[: table.n] if feasible is None else feasible & table.valid[: table.n]
    return {table.names[slot]: int(values[slot]) for slot in np.flatnonzero(chosen).tolist()}

"""Fluent builders for pod and node JSON, in the spirit of kube's
``pkg/scheduler/testing/wrappers.go``.

Tests describe objects the way they read::

    make_pod("web").req(cpu="100m", memory="1Gi").node_selector(zone="a")
        .toleration("gpu", "true", effect="NoSchedule").obj()
    make_node("n1").capacity(cpu="4", memory="32Gi", pods=110).label("zone", "a")
        .taint("gpu", "true").obj()

``obj()`` returns a fresh plain dict (the shape the informers decode), so a builder can be reused
and its output fed to :func:`pyscheduler.framework.pod.pod_info` and
:func:`pyscheduler.framework.nodetable.node_info`. :func:`build_table` places nodes and their
pods into a :class:`NodeTable` and :func:`context` opens a scheduling cycle over it;
:func:`outcome` and :func:`scores` read a plugin's arrays back per node name, checking the filter
contract on the way.
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
    "build_table",
    "context",
    "expr",
    "field",
    "make_node",
    "make_pod",
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

    def obj(self) -> Obj:
        pod = copy.deepcopy(self._pod)
        if not pod["spec"]["containers"]:
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

    def obj(self) -> Obj:
        return copy.deepcopy(self._node)


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
            removed: Iterable[str] = ()) -> CycleContext:
    """A scheduling cycle for ``pod`` over a fresh table."""
    return CycleContext.for_pod(pod_info(pod), build_table(nodes, pods, removed))


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

"""Node pools: many nodes written compactly, and the Node objects they stand for.

A *cluster file* describes nodes by pool (``fragment test --cluster`` reads it, and so does the
embedded cluster, which runs such nodes)::

    nodePools:
      - name: general            # node names are <name>-<index>
        count: 100
        cpu: "4"
        memory: 32Gi
        pods: 110
        ephemeralStorage: 100Gi  # optional
        extendedResources: {nvidia.com/gpu: 1}   # optional
        zones: [zone-a, zone-b]  # spread round-robin into topology.kubernetes.io/zone
        labels: {node.kubernetes.io/instance-type: m5.xlarge}
        taints: [{key: dedicated, value: gpu, effect: NoSchedule}]

Other top-level sections (the embedded cluster's ``kubelet`` and ``cloudPools``) are read by
whoever runs them; :func:`parse_node_pools` reads ``nodePools`` only.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyscheduler.api.problems import InputError
from pyscheduler.api.quantity import QuantityError, parse_quantity
from pyscheduler.api.times import rfc3339

__all__ = ["DEFAULT_ZONES", "KUBELET_VERSION", "NodePoolError", "NodeShape", "PoolSpec",
           "expand_pools", "node_object", "parse_node_pools", "ready_conditions"]

DEFAULT_ZONES = ("zone-a", "zone-b", "zone-c")
#: The kubelet version the Node objects report.
KUBELET_VERSION = "v1.32.0-pyscheduler.sim"
_POOL_FIELDS = frozenset({"name", "count", "cpu", "memory", "pods", "ephemeralStorage",
                          "extendedResources", "zones", "labels", "taints"})


class NodePoolError(InputError):
    """A node pool that cannot be used; the message names the field."""

    def __init__(self, problem: str) -> None:
        super().__init__([problem])


@dataclass
class PoolSpec:
    """One pool of identical nodes."""

    name: str
    count: int
    cpu: str = "4"
    memory: str = "32Gi"
    pods: int = 110
    ephemeral_storage: str = "100Gi"
    extended: dict[str, str] = field(default_factory=dict)
    zones: tuple[str, ...] = DEFAULT_ZONES
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class NodeShape:
    """One node of a pool: what its Node object says."""

    name: str
    capacity: dict[str, str]
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[dict[str, Any]] = field(default_factory=list)
    pod_cidr: str = ""
    internal_ip: str = ""


def expand_pools(pools: Sequence[PoolSpec]) -> list[NodeShape]:
    """Every node of ``pools``, in order: ``<pool>-<index>``, each with a /24 for pods from
    10.64.0.0/10, an address in 172.20.0.0/14, and its zone taken round-robin."""
    out = []
    index = 0
    for pool in pools:
        capacity = {"cpu": pool.cpu, "memory": pool.memory, "pods": str(pool.pods),
                    "ephemeral-storage": pool.ephemeral_storage, **pool.extended}
        for i in range(pool.count):
            cidr = ipaddress.ip_network(f"10.{64 + index // 256}.{index % 256}.0/24")
            ip = ipaddress.ip_address("172.20.0.0") + index + 1
            labels = {"node.kubernetes.io/instance-type": "sim-standard",
                      "wssp.pyscheduler.io/pool": pool.name, **pool.labels}
            if pool.zones:
                zone = pool.zones[i % len(pool.zones)]
                labels.setdefault("topology.kubernetes.io/zone", zone)
                labels.setdefault("topology.kubernetes.io/region", "sim")
            out.append(NodeShape(name=f"{pool.name}-{i}", capacity=dict(capacity), labels=labels,
                                 taints=[dict(t) for t in pool.taints], pod_cidr=str(cidr),
                                 internal_ip=str(ip)))
            index += 1
    return out


def _condition(type_: str, status: str, reason: str, message: str, now: str) -> dict[str, Any]:
    return {"type": type_, "status": status, "reason": reason, "message": message,
            "lastHeartbeatTime": now, "lastTransitionTime": now}


def ready_conditions(state: str, now: str) -> list[dict[str, Any]]:
    """A kubelet's node conditions: no pressure, and Ready ``Ready``/``NotReady``/``Unknown``."""
    ready = {
        "Ready": _condition("Ready", "True", "KubeletReady",
                            "kubelet is posting ready status", now),
        "NotReady": _condition("Ready", "False", "KubeletNotReady",
                               "container runtime network not ready (simulated fault)", now),
        "Unknown": _condition("Ready", "Unknown", "NodeStatusUnknown",
                              "Kubelet stopped posting node status.", now),
    }[state]
    return [
        _condition("MemoryPressure", "False", "KubeletHasSufficientMemory",
                   "kubelet has sufficient memory available", now),
        _condition("DiskPressure", "False", "KubeletHasNoDiskPressure",
                   "kubelet has no disk pressure", now),
        _condition("PIDPressure", "False", "KubeletHasSufficientPID",
                   "kubelet has sufficient PID available", now),
        ready,
    ]


def node_object(shape: NodeShape, now: str | None = None) -> dict[str, Any]:
    """The Node a kubelet registers for ``shape`` (Ready; ``now`` stamps its conditions)."""
    now = now or rfc3339()
    labels = {"kubernetes.io/hostname": shape.name, "kubernetes.io/os": "linux",
              "kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
              "beta.kubernetes.io/arch": "amd64", **shape.labels}
    node: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": shape.name, "labels": labels,
                     "annotations": {"node.alpha.kubernetes.io/ttl": "0"}},
        "spec": {},
        "status": {
            "capacity": dict(shape.capacity),
            "allocatable": dict(shape.capacity),
            "conditions": ready_conditions("Ready", now),
            "addresses": [{"type": "InternalIP", "address": shape.internal_ip},
                          {"type": "Hostname", "address": shape.name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {"kubeletVersion": KUBELET_VERSION, "kubeProxyVersion": "",
                         "osImage": "pyscheduler simulated node", "kernelVersion": "sim",
                         "containerRuntimeVersion": "sim://1.0", "operatingSystem": "linux",
                         "architecture": "amd64", "machineID": "", "systemUUID": "",
                         "bootID": ""},
        },
    }
    if shape.pod_cidr:
        node["spec"]["podCIDR"] = shape.pod_cidr
        node["spec"]["podCIDRs"] = [shape.pod_cidr]
    if shape.taints:
        node["spec"]["taints"] = [dict(t) for t in shape.taints]
    return node


# -- parsing -------------------------------------------------------------------------------------

def field_of(data: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str,
             default: Any = None) -> Any:
    """``data[key]`` checked to be a ``kind``; ``default`` when absent (None: required)."""
    if key not in data:
        if default is None:
            raise NodePoolError(f"{where}.{key}: required")
        return default
    value = data[key]
    if not isinstance(value, kind) or isinstance(value, bool) and bool not in (
            kind if isinstance(kind, tuple) else (kind,)):
        names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise NodePoolError(f"{where}.{key}: expected {names}, got {value!r}")
    return value


def _quantity_field(data: Mapping[str, Any], key: str, where: str, default: str) -> str:
    value = str(field_of(data, key, (str, int, float), where, default))
    try:
        if parse_quantity(value) < 0:
            raise NodePoolError(f"{where}.{key}: must not be negative, got {value!r}")
    except QuantityError:
        raise NodePoolError(f"{where}.{key}: not a quantity: {value!r}") from None
    return value


def parse_node_pools(data: Mapping[str, Any], source: str = "cluster file") -> list[PoolSpec]:
    """The ``nodePools`` of a cluster file's top level ``data``."""
    pools_raw = field_of(data, "nodePools", list, source)
    pools = []
    seen: set[str] = set()
    for i, raw in enumerate(pools_raw):
        where = f"nodePools[{i}]"
        if not isinstance(raw, dict):
            raise NodePoolError(f"{where}: expected a mapping")
        unknown = set(raw) - _POOL_FIELDS
        if unknown:
            raise NodePoolError(f"{where}: unknown field(s): {', '.join(sorted(unknown))}")
        name = field_of(raw, "name", str, where)
        if name in seen:
            raise NodePoolError(f"{where}.name: duplicate pool name {name!r}")
        seen.add(name)
        count = field_of(raw, "count", int, where)
        if count < 0:
            raise NodePoolError(f"{where}.count: must not be negative, got {count}")
        extended = field_of(raw, "extendedResources", dict, where, {})
        for key in extended:
            _quantity_field(extended, key, f"{where}.extendedResources", "0")
        taints = field_of(raw, "taints", list, where, [])
        for j, t in enumerate(taints):
            if not isinstance(t, dict) or "key" not in t or t.get("effect") not in (
                    "NoSchedule", "PreferNoSchedule", "NoExecute"):
                raise NodePoolError(
                    f"{where}.taints[{j}]: needs a key and an effect of NoSchedule, "
                    "PreferNoSchedule or NoExecute")
        zones = field_of(raw, "zones", list, where, list(DEFAULT_ZONES))
        pools.append(PoolSpec(
            name=name, count=count,
            cpu=_quantity_field(raw, "cpu", where, "4"),
            memory=_quantity_field(raw, "memory", where, "32Gi"),
            pods=field_of(raw, "pods", int, where, 110),
            ephemeral_storage=_quantity_field(raw, "ephemeralStorage", where, "100Gi"),
            extended={k: str(v) for k, v in extended.items()},
            zones=tuple(str(z) for z in zones),
            labels={str(k): str(v) for k, v in field_of(raw, "labels", dict, where, {}).items()},
            taints=[dict(t) for t in taints]))
    return pools

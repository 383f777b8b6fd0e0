"""The embedded cluster as a whole: API server, simulated kubelets and controllers.

A cluster is described by a YAML *cluster file*::

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
    kubelet:
      podStartSeconds: 0.2       # bound pod -> Running
      podTerminationSeconds: 1   # deleting pod -> gone (capped by its grace period)
      leaseRenewSeconds: 10
      runPods: true              # false: bound pods stay Pending (scheduler benchmarks)

or simply by a node count (``--nodes N``), which gives nodes shaped like Kubernetes'
scheduler_perf ones (4 CPU, 32Gi, 110 pods) spread over three zones.
"""

from __future__ import annotations

import base64
import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from pyscheduler.api.quantity import QuantityError, parse_quantity
from pyscheduler.sim.controller import Controller
from pyscheduler.sim.controllers import all_controllers
from pyscheduler.sim.kubelet import KubeletFleet, NodeSpec
from pyscheduler.sim.registry import Registry
from pyscheduler.sim.server import ApiServer
from pyscheduler.sim.store import Store

__all__ = ["Cluster", "ClusterConfigError", "ClusterSpec", "PoolSpec", "load_cluster_file",
           "write_kubeconfig"]

DEFAULT_ZONES = ("zone-a", "zone-b", "zone-c")


class ClusterConfigError(ValueError):
    """A cluster file that cannot be used; the message names the field."""


@dataclass
class PoolSpec:
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
class ClusterSpec:
    pools: list[PoolSpec]
    pod_start_seconds: float = 0.2
    pod_termination_seconds: float = 1.0
    lease_renew_seconds: float = 10.0
    # False: bound pods stay Pending, as on scheduler_perf's fake nodes (for benchmarks).
    run_pods: bool = True

    @classmethod
    def with_nodes(cls, count: int) -> ClusterSpec:
        return cls(pools=[PoolSpec(name="node", count=count)])

    def node_specs(self) -> list[NodeSpec]:
        out = []
        index = 0
        for pool in self.pools:
            capacity = {"cpu": pool.cpu, "memory": pool.memory, "pods": str(pool.pods),
                        "ephemeral-storage": pool.ephemeral_storage, **pool.extended}
            for i in range(pool.count):
                # Each node gets a /24 for pods from 10.64.0.0/10 and an address in 172.20/14.
                cidr = ipaddress.ip_network(f"10.{64 + index // 256}.{index % 256}.0/24")
                ip = ipaddress.ip_address("172.20.0.0") + index + 1
                labels = {"node.kubernetes.io/instance-type": "sim-standard",
                          "wssp.pyscheduler.io/pool": pool.name, **pool.labels}
                if pool.zones:
                    zone = pool.zones[i % len(pool.zones)]
                    labels.setdefault("topology.kubernetes.io/zone", zone)
                    labels.setdefault("topology.kubernetes.io/region", "sim")
                out.append(NodeSpec(
                    name=f"{pool.name}-{i}", capacity=capacity, labels=labels,
                    taints=[dict(t) for t in pool.taints], pod_cidr=str(cidr),
                    internal_ip=str(ip), pod_start_seconds=self.pod_start_seconds,
                    pod_termination_seconds=self.pod_termination_seconds))
                index += 1
        return out


def _field(data: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str,
           default: Any = None) -> Any:
    if key not in data:
        if default is None:
            raise ClusterConfigError(f"{where}.{key}: required")
        return default
    value = data[key]
    if not isinstance(value, kind) or isinstance(value, bool) and bool not in (
            kind if isinstance(kind, tuple) else (kind,)):
        names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise ClusterConfigError(f"{where}.{key}: expected {names}, got {value!r}")
    return value


def _quantity_field(data: Mapping[str, Any], key: str, where: str, default: str) -> str:
    value = str(_field(data, key, (str, int, float), where, default))
    try:
        if parse_quantity(value) < 0:
            raise ClusterConfigError(f"{where}.{key}: must not be negative, got {value!r}")
    except QuantityError:
        raise ClusterConfigError(f"{where}.{key}: not a quantity: {value!r}") from None
    return value


def parse_cluster(data: Any, source: str = "cluster file") -> ClusterSpec:
    if not isinstance(data, dict):
        raise ClusterConfigError(f"{source}: expected a mapping at the top level")
    # cloudPools belongs to the simulated cloud next to the cluster (pyscheduler sim up).
    unknown = set(data) - {"nodePools", "kubelet", "cloudPools"}
    if unknown:
        raise ClusterConfigError(f"{source}: unknown field(s): {', '.join(sorted(unknown))}")
    pools_raw = _field(data, "nodePools", list, source)
    pools = []
    seen: set[str] = set()
    for i, raw in enumerate(pools_raw):
        where = f"nodePools[{i}]"
        if not isinstance(raw, dict):
            raise ClusterConfigError(f"{where}: expected a mapping")
        unknown = set(raw) - {"name", "count", "cpu", "memory", "pods", "ephemeralStorage",
                              "extendedResources", "zones", "labels", "taints"}
        if unknown:
            raise ClusterConfigError(f"{where}: unknown field(s): {', '.join(sorted(unknown))}")
        name = _field(raw, "name", str, where)
        if name in seen:
            raise ClusterConfigError(f"{where}.name: duplicate pool name {name!r}")
        seen.add(name)
        count = _field(raw, "count", int, where)
        if count < 0:
            raise ClusterConfigError(f"{where}.count: must not be negative, got {count}")
        extended = _field(raw, "extendedResources", dict, where, {})
        for key in extended:
            _quantity_field(extended, key, f"{where}.extendedResources", "0")
        taints = _field(raw, "taints", list, where, [])
        for j, t in enumerate(taints):
            if not isinstance(t, dict) or "key" not in t or t.get("effect") not in (
                    "NoSchedule", "PreferNoSchedule", "NoExecute"):
                raise ClusterConfigError(
                    f"{where}.taints[{j}]: needs a key and an effect of NoSchedule, "
                    "PreferNoSchedule or NoExecute")
        zones = _field(raw, "zones", list, where, list(DEFAULT_ZONES))
        pools.append(PoolSpec(
            name=name, count=count,
            cpu=_quantity_field(raw, "cpu", where, "4"),
            memory=_quantity_field(raw, "memory", where, "32Gi"),
            pods=_field(raw, "pods", int, where, 110),
            ephemeral_storage=_quantity_field(raw, "ephemeralStorage", where, "100Gi"),
            extended={k: str(v) for k, v in extended.items()},
            zones=tuple(str(z) for z in zones),
            labels={str(k): str(v) for k, v in _field(raw, "labels", dict, where, {}).items()},
            taints=[dict(t) for t in taints]))
    kubelet = _field(data, "kubelet", dict, source, {})
    spec = ClusterSpec(pools=pools)
    for key, attr in (("podStartSeconds", "pod_start_seconds"),
                      ("podTerminationSeconds", "pod_termination_seconds"),
                      ("leaseRenewSeconds", "lease_renew_seconds")):
        if key in kubelet:
            value = _field(kubelet, key, (int, float), "kubelet")
            if value < 0:
                raise ClusterConfigError(f"kubelet.{key}: must not be negative")
            setattr(spec, attr, float(value))
    unknown = set(kubelet) - {"podStartSeconds", "podTerminationSeconds", "leaseRenewSeconds",
                              "runPods"}
    if unknown:
        raise ClusterConfigError(f"kubelet: unknown field(s): {', '.join(sorted(unknown))}")
    spec.run_pods = _field(kubelet, "runPods", bool, "kubelet", True)
    return spec


def load_cluster_file(path: str | os.PathLike[str]) -> ClusterSpec:
    try:
        data = yaml.safe_load(Path(path).read_text())
    except OSError as exc:
        raise ClusterConfigError(f"cannot read cluster file {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ClusterConfigError(f"cluster file {path} is not valid YAML: {exc}") from None
    return parse_cluster(data, str(path))


def kubeconfig(server: str, token: str, ca_pem: bytes,
               name: str = "pyscheduler-sim") -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": name, "cluster": {
            "server": server,
            "certificate-authority-data": base64.b64encode(ca_pem).decode()}}],
        "users": [{"name": f"{name}-admin", "user": {"token": token}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": f"{name}-admin",
                                                "namespace": "default"}}],
        "current-context": name,
        "preferences": {},
    }


def write_kubeconfig(path: str | os.PathLike[str], server: str, token: str,
                     ca_pem: bytes) -> None:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".tmp")
    tmp.write_text(yaml.safe_dump(kubeconfig(server, token, ca_pem), sort_keys=False))
    tmp.chmod(0o600)
    tmp.replace(target)  # atomic: a reader never sees half a file


class Cluster:
    """API server + kubelets + controllers, started and stopped together."""

    def __init__(self, spec: ClusterSpec, *, token: str | None = None,
                 history: int = 10000, bookmark_interval: float = 5.0) -> None:
        self.spec = spec
        self.registry = Registry(Store(history=history))
        self.server = ApiServer(self.registry, token=token, bookmark_interval=bookmark_interval)
        self.kubelets = KubeletFleet(self.registry, spec.node_specs(),
                                     lease_renew_seconds=spec.lease_renew_seconds,
                                     run_pods=spec.run_pods)
        self.controllers: list[Controller] = [self.kubelets, *all_controllers(self.registry)]

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.kubelets.register()
        for c in self.controllers:
            c.start()
        await self.server.start(host, port)

    async def stop(self) -> None:
        await self.server.stop()
        for c in self.controllers:
            await c.stop()

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def token(self) -> str:
        return self.server.token

    def write_kubeconfig(self, path: str | os.PathLike[str]) -> None:
        write_kubeconfig(path, self.url, self.token, self.server.certs.ca_pem)

    async def __aenter__(self) -> Cluster:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

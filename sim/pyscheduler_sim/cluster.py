"""The embedded cluster as a whole: API server, simulated kubelets and controllers.

A cluster is described by a YAML *cluster file*: ``nodePools`` (see
:mod:`pyscheduler.nodepools`, which ``fragment test`` reads too) and how its kubelets behave::

    nodePools: [...]
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
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from pyscheduler.nodepools import (
    NodePoolError,
    PoolSpec,
    expand_pools,
    field_of,
    parse_node_pools,
)
from pyscheduler_sim.controller import Controller
from pyscheduler_sim.controllers import all_controllers
from pyscheduler_sim.daemonset_controller import DaemonSetController
from pyscheduler_sim.kubelet import KubeletFleet, NodeSpec
from pyscheduler_sim.registry import Registry
from pyscheduler_sim.server import ApiServer
from pyscheduler_sim.store import Store
from pyscheduler_sim.statefulsets import StatefulSetController
from pyscheduler_sim.volumes import PersistentVolumeController

__all__ = ["Cluster", "ClusterConfigError", "ClusterSpec", "PoolSpec", "load_cluster_file",
           "write_kubeconfig"]

#: A cluster file that cannot be used; the message names the field.
ClusterConfigError = NodePoolError


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
        return [NodeSpec(name=n.name, capacity=n.capacity, labels=n.labels, taints=n.taints,
                         pod_cidr=n.pod_cidr, internal_ip=n.internal_ip,
                         pod_start_seconds=self.pod_start_seconds,
                         pod_termination_seconds=self.pod_termination_seconds)
                for n in expand_pools(self.pools)]


def parse_cluster(data: Any, source: str = "cluster file") -> ClusterSpec:
    if not isinstance(data, dict):
        raise ClusterConfigError(f"{source}: expected a mapping at the top level")
    # cloudPools belongs to the simulated cloud next to the cluster (pyscheduler sim up).
    unknown = set(data) - {"nodePools", "kubelet", "cloudPools"}
    if unknown:
        raise ClusterConfigError(f"{source}: unknown field(s): {', '.join(sorted(unknown))}")
    pools = parse_node_pools(data, source)
    kubelet = field_of(data, "kubelet", dict, source, {})
    spec = ClusterSpec(pools=pools)
    for key, attr in (("podStartSeconds", "pod_start_seconds"),
                      ("podTerminationSeconds", "pod_termination_seconds"),
                      ("leaseRenewSeconds", "lease_renew_seconds")):
        if key in kubelet:
            value = field_of(kubelet, key, (int, float), "kubelet")
            if value < 0:
                raise ClusterConfigError(f"kubelet.{key}: must not be negative")
            setattr(spec, attr, float(value))
    unknown = set(kubelet) - {"podStartSeconds", "podTerminationSeconds", "leaseRenewSeconds",
                              "runPods"}
    if unknown:
        raise ClusterConfigError(f"kubelet: unknown field(s): {', '.join(sorted(unknown))}")
    spec.run_pods = field_of(kubelet, "runPods", bool, "kubelet", True)
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
                 history: int = 10000, bookmark_interval: float = 5.0,
                 slow_watcher_seconds: float | None = 1.0) -> None:
        self.spec = spec
        self.registry = Registry(Store(history=history,
                                       slow_watcher_seconds=slow_watcher_seconds))
        self.server = ApiServer(self.registry, token=token, bookmark_interval=bookmark_interval)
        self.kubelets = KubeletFleet(self.registry, spec.node_specs(),
                                     lease_renew_seconds=spec.lease_renew_seconds,
                                     run_pods=spec.run_pods)
        self.controllers: list[Controller] = [
            self.kubelets, *all_controllers(self.registry), DaemonSetController(self.registry),
            StatefulSetController(self.registry), PersistentVolumeController(self.registry)]

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

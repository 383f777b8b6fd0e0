"""Simulated kubelets: nodes that register, heartbeat, and run the pods bound to them.

One :class:`KubeletFleet` plays the kubelet of every simulated node, as KWOK does, because one
Python object per node would not scale to thousands of nodes. What it does, per node, is what a
kubelet does that the API can observe:

* registers the Node (capacity, allocatable, labels, taints, addresses, nodeInfo, conditions) and
  renews its Lease in ``kube-node-lease`` (spread over the renew interval so 5000 nodes do not
  write at once);
* a pod bound to the node becomes Running after a start delay, with a pod IP from the node's
  CIDR, container statuses and the Ready condition;
* a pod being deleted terminates after its grace period (capped by the pool's termination time)
  and is then removed (the kubelet's final delete with grace period 0);
* faults can be injected through the API itself, so they work from ``kubectl``:
  a node annotated ``sim.pyscheduler.io/condition: NotReady`` (or ``Unknown``) reports that
  condition with the taints the node lifecycle controller would add; ``Ready`` recovers it.
  A pod annotated ``sim.pyscheduler.io/fail: "true"`` fails (exit code 1) instead of running, and
  ``sim.pyscheduler.io/run-seconds: "N"`` makes it complete after N seconds;
  ``sim.pyscheduler.io/start-seconds: "N"`` makes it take N seconds to start (a slow image pull)
  instead of the pool's start delay.
"""

from __future__ import annotations

import asyncio
import ipaddress
import time
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Any

from pyscheduler import nodepools
from pyscheduler.nodepools import NodeShape
from pyscheduler_sim import errors
from pyscheduler_sim.controller import Controller
from pyscheduler_sim.registry import Registry, now_rfc3339
from pyscheduler_sim.resources import ResourceType

__all__ = ["FAIL_ANNOTATION", "FAULT_ANNOTATION", "KubeletFleet", "NodeSpec", "NodeState",
           "RUN_SECONDS_ANNOTATION", "START_SECONDS_ANNOTATION", "container_events",
           "node_object", "pod_event"]


FAULT_ANNOTATION = "sim.pyscheduler.io/condition"
FAIL_ANNOTATION = "sim.pyscheduler.io/fail"
RUN_SECONDS_ANNOTATION = "sim.pyscheduler.io/run-seconds"
START_SECONDS_ANNOTATION = "sim.pyscheduler.io/start-seconds"
KUBELET_VERSION = nodepools.KUBELET_VERSION


@dataclass
class NodeSpec(NodeShape):
    """What one simulated node is made of (from the cluster file) and how its kubelet behaves."""

    pod_start_seconds: float = 0.2
    pod_termination_seconds: float = 1.0


class NodeState:
    """What a kubelet keeps about its node: its Ready condition and the pod IPs it handed out
    from the node's pod CIDR (freed ones are reused)."""

    __slots__ = ("spec", "network", "free_ips", "next_ip", "condition", "pod_ips")

    def __init__(self, spec: NodeSpec) -> None:
        self.spec = spec
        self.network = ipaddress.ip_network(spec.pod_cidr) if spec.pod_cidr else None
        self.free_ips: list[str] = []
        self.next_ip = 2
        self.condition = "Ready"
        self.pod_ips: dict[str, str] = {}

    def allocate_ip(self, pod_uid: str) -> str:
        if pod_uid in self.pod_ips:
            return self.pod_ips[pod_uid]
        if self.network is None:
            return ""
        if self.free_ips:
            ip = self.free_ips.pop()
        else:
            ip = str(self.network.network_address + self.next_ip)
            self.next_ip += 1
        self.pod_ips[pod_uid] = ip
        return ip

    def release_ip(self, pod_uid: str) -> None:
        ip = self.pod_ips.pop(pod_uid, None)
        if ip:
            self.free_ips.append(ip)


def pod_event(pod: dict[str, Any], reason: str, message: str, node: str,
              type_: str = "Normal", field_path: str = "") -> dict[str, Any]:
    """A core/v1 Event about a pod, as the kubelet records it."""
    meta = pod["metadata"]
    now = now_rfc3339()
    involved = {"kind": "Pod", "namespace": meta["namespace"], "name": meta["name"],
                "uid": meta["uid"], "apiVersion": "v1",
                "resourceVersion": meta.get("resourceVersion", "")}
    if field_path:
        involved["fieldPath"] = field_path
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{meta['name']}.{time.time_ns():x}",
                         "namespace": meta["namespace"]},
            "involvedObject": involved, "reason": reason, "message": message,
            "source": {"component": "kubelet", "host": node}, "firstTimestamp": now,
            "lastTimestamp": now, "count": 1, "type": type_, "eventTime": None,
            "reportingComponent": "kubelet", "reportingInstance": node}


def container_events(pod: dict[str, Any], node: str, failed: bool) -> list[dict[str, Any]]:
    """The events a kubelet records as it starts a pod's containers (and, when they fail,
    backs off restarting them)."""
    events = []
    for c in pod["spec"].get("containers") or ():
        path = f"spec.containers{{{c.get('name')}}}"
        for reason, message in (
                ("Pulled", f'Container image "{c.get("image")}" already present on machine'),
                ("Created", f"Created container {c.get('name')}"),
                ("Started", f"Started container {c.get('name')}")):
            events.append(pod_event(pod, reason, message, node, field_path=path))
        if failed:
            events.append(pod_event(
                pod, "BackOff", f"Back-off restarting failed container {c.get('name')}",
                node, "Warning", path))
    return events


def node_object(spec: NodeSpec) -> dict[str, Any]:
    """The Node a simulated kubelet registers for ``spec`` (Ready)."""
    return nodepools.node_object(spec, now_rfc3339())


def annotation_seconds(text: object, default: float) -> float:
    """An annotation's number of seconds (0 to one hour); ``default`` when absent or not one."""
    try:
        value = float(str(text))
    except ValueError:
        return default
    return value if 0 <= value <= 3600 else default


class KubeletFleet(Controller):
    """The kubelets of all simulated nodes."""

    name = "kubelet"
    # Every change is seen through the listener; the resync is only a safety net.
    resync_seconds = 30.0

    def __init__(self, registry: Registry, nodes: Iterable[NodeSpec], *,
                 lease_renew_seconds: float = 10.0, run_pods: bool = True) -> None:
        super().__init__(registry)
        self.run_pods = run_pods
        self.nodes: dict[str, NodeState] = {n.name: NodeState(n) for n in nodes}
        self.lease_renew_seconds = lease_renew_seconds
        self.leases = registry.type("coordination.k8s.io", "v1", "leases")
        self._timers: dict[tuple[str, str, str], asyncio.TimerHandle] = {}
        self._lease_task: asyncio.Task[None] | None = None

    # -- registration --------------------------------------------------------------------------

    def node_object(self, spec: NodeSpec) -> dict[str, Any]:
        return node_object(spec)

    @staticmethod
    def _conditions(state: str, now: str) -> list[dict[str, Any]]:
        return nodepools.ready_conditions(state, now)

    def register(self) -> None:
        """Create every Node and its Lease (idempotent)."""
        for state in self.nodes.values():
            spec = state.spec
            if self.registry.store.get(self.registry.nodes, "", spec.name) is None:
                self.registry.create(self.registry.nodes, "", self.node_object(spec))
            self._renew_lease(spec.name)

    def _renew_lease(self, name: str) -> None:
        now = now_rfc3339()[:-1] + ".000000Z"
        current = self.registry.store.get(self.leases, "kube-node-lease", name)
        if current is None:
            node = self.registry.store.get(self.registry.nodes, "", name)
            owner = [{"apiVersion": "v1", "kind": "Node", "name": name, "uid": node.uid}] \
                if node is not None else []
            self.registry.create(self.leases, "kube-node-lease", {
                "metadata": {"name": name, "namespace": "kube-node-lease",
                             "ownerReferences": owner},
                "spec": {"holderIdentity": name, "leaseDurationSeconds": 40,
                         "renewTime": now}})
            return
        lease = current.obj
        lease["spec"]["renewTime"] = now
        self.registry.update(self.leases, "kube-node-lease", name, lease)

    async def _renew_leases(self) -> None:
        """Renew every healthy node's lease once per interval, spread evenly over it."""
        while True:
            names = [n for n, s in self.nodes.items() if s.condition == "Ready"]
            if not names:
                await asyncio.sleep(self.lease_renew_seconds)
                continue
            per_tick = max(1, len(names) // max(1, int(self.lease_renew_seconds * 10)))
            for i in range(0, len(names), per_tick):
                for name in names[i:i + per_tick]:
                    try:
                        self._renew_lease(name)
                    except errors.ApiError:
                        pass
                await asyncio.sleep(self.lease_renew_seconds * per_tick / len(names))

    def start(self) -> None:
        super().start()
        self._lease_task = asyncio.get_running_loop().create_task(self._renew_leases())

    async def stop(self) -> None:
        if self._lease_task is not None:
            self._lease_task.cancel()
            self._lease_task = None
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        await super().stop()

    # -- reacting to the API -------------------------------------------------------------------

    def on_change(self, kind: str, rt: ResourceType, obj: dict[str, Any]) -> None:
        if rt is self.registry.pods and self.run_pods:
            node = (obj.get("spec") or {}).get("nodeName")
            if node in self.nodes:
                meta = obj["metadata"]
                if kind == "DELETED":
                    self.nodes[node].release_ip(meta.get("uid", ""))
                    return
                self.enqueue(("pod", meta["namespace"], meta["name"]))
        elif rt is self.registry.nodes and kind == "MODIFIED":
            name = obj["metadata"]["name"]
            if name in self.nodes:
                wanted = (obj["metadata"].get("annotations") or {}).get(FAULT_ANNOTATION, "Ready")
                if wanted != self.nodes[name].condition:
                    self.enqueue(("node", "", name))

    def all_keys(self) -> Iterable[Hashable]:
        if not self.run_pods:
            return
        for s in self.registry.store.iter(self.registry.pods):
            # Only pods that still need the kubelet: unstarted or terminating.
            if s.fields.get("spec.nodeName") in self.nodes:
                phase = s.fields.get("status.phase")
                if phase == "Pending" or phase == "Running":
                    yield ("pod", s.namespace, s.name)

    async def reconcile(self, key: Any) -> None:
        what, namespace, name = key
        if what == "node":
            self._apply_node_fault(name)
            return
        stored = self.registry.store.get(self.registry.pods, namespace, name)
        if stored is None:
            return
        pod = stored.obj
        node_name = pod["spec"].get("nodeName")
        state = self.nodes.get(node_name)
        if state is None:
            return
        meta = pod["metadata"]
        phase = (pod.get("status") or {}).get("phase")
        loop = asyncio.get_running_loop()
        if meta.get("deletionTimestamp"):
            if ("kill", namespace, name) not in self._timers:
                grace = float(meta.get("deletionGracePeriodSeconds") or 0)
                if phase == "Running":
                    for c in pod["spec"].get("containers") or ():
                        self.registry.create(self.registry.events, namespace, pod_event(
                            pod, "Killing", f"Stopping container {c.get('name')}",
                            state.spec.name, field_path=f"spec.containers{{{c.get('name')}}}"))
                delay = min(grace, state.spec.pod_termination_seconds)
                self._timers[("kill", namespace, name)] = loop.call_later(
                    delay, self._finish_deletion, namespace, name, stored.uid)
            return
        if phase == "Pending" and not (pod.get("status") or {}).get("startTime"):
            if ("start", namespace, name) not in self._timers:
                delay = annotation_seconds((meta.get("annotations") or {}).get(START_SECONDS_ANNOTATION),
                                 state.spec.pod_start_seconds)
                self._timers[("start", namespace, name)] = loop.call_later(
                    delay, self._start_pod, namespace, name, stored.uid)

    def _apply_node_fault(self, name: str) -> None:
        state = self.nodes[name]
        node = self.registry.get(self.registry.nodes, "", name)
        wanted = (node["metadata"].get("annotations") or {}).get(FAULT_ANNOTATION, "Ready")
        if wanted not in ("Ready", "NotReady", "Unknown"):
            self.log.warning("unknown node condition requested", node=name, condition=wanted)
            return
        state.condition = wanted
        now = now_rfc3339()
        node["status"]["conditions"] = self._conditions(wanted, now)
        self.registry.update(self.registry.nodes, "", name, node, "status")
        # The node lifecycle controller's taints for an unhealthy node.
        node = self.registry.get(self.registry.nodes, "", name)
        taints = [t for t in node["spec"].get("taints") or ()
                  if t.get("key") not in ("node.kubernetes.io/not-ready",
                                          "node.kubernetes.io/unreachable")]
        if wanted != "Ready":
            key = "node.kubernetes.io/not-ready" if wanted == "NotReady" \
                else "node.kubernetes.io/unreachable"
            taints += [{"key": key, "effect": "NoSchedule"},
                       {"key": key, "effect": "NoExecute", "timeAdded": now}]
        if taints:
            node["spec"]["taints"] = taints
        else:
            node["spec"].pop("taints", None)
        self.registry.update(self.registry.nodes, "", name, node)

    def _start_pod(self, namespace: str, name: str, uid: str) -> None:
        self._timers.pop(("start", namespace, name), None)
        stored = self.registry.store.get(self.registry.pods, namespace, name)
        if stored is None or stored.uid != uid:
            return
        pod = stored.obj
        state = self.nodes.get(pod["spec"].get("nodeName"))
        if state is None or pod["metadata"].get("deletionTimestamp"):
            return
        annotations = pod["metadata"].get("annotations") or {}
        fail = annotations.get(FAIL_ANNOTATION) == "true"
        now = now_rfc3339()
        ip = state.allocate_ip(uid)
        statuses = []
        for c in pod["spec"].get("containers") or ():
            cs: dict[str, Any] = {
                "name": c.get("name"), "image": c.get("image"),
                "imageID": f"sim://{c.get('image')}",
                "containerID": f"sim://{uid[:8]}-{c.get('name')}",
                "restartCount": 0, "ready": not fail, "started": not fail,
            }
            if fail:
                cs["state"] = {"terminated": {"exitCode": 1, "reason": "Error",
                                              "startedAt": now, "finishedAt": now}}
            else:
                cs["state"] = {"running": {"startedAt": now}}
            statuses.append(cs)
        ready = "False" if fail else "True"
        # The kubelet writes the conditions it owns and keeps everyone else's (PodScheduled,
        # a DisruptionTarget a preemption wrote just before, readiness gates' conditions).
        owned = (("PodReadyToStartContainers", "True"), ("Initialized", "True"),
                 ("Ready", ready), ("ContainersReady", ready))
        conditions = [c for c in (pod.get("status") or {}).get("conditions") or ()
                      if c.get("type") not in {ctype for ctype, _ in owned}]
        for ctype, cstatus in owned:
            conditions.append({"type": ctype, "status": cstatus, "lastProbeTime": None,
                               "lastTransitionTime": now})
        status = pod.setdefault("status", {})
        status.update({
            "phase": "Failed" if fail else "Running",
            "conditions": conditions,
            "hostIP": state.spec.internal_ip, "hostIPs": [{"ip": state.spec.internal_ip}],
            "podIP": ip, "podIPs": [{"ip": ip}] if ip else [],
            "startTime": now, "containerStatuses": statuses,
        })
        try:
            self.registry.update(self.registry.pods, namespace, name, pod, "status")
        except errors.ApiError as exc:
            self.log.warning("pod start failed", pod=f"{namespace}/{name}", error=exc.message)
            self.enqueue(("pod", namespace, name))
            return
        self._container_events(pod, state.spec.name, fail)
        run_seconds = annotations.get(RUN_SECONDS_ANNOTATION)
        if run_seconds and not fail:
            try:
                delay = float(run_seconds)
            except ValueError:
                self.log.warning("bad run-seconds annotation", pod=f"{namespace}/{name}",
                                 value=run_seconds)
                return
            asyncio.get_running_loop().call_later(delay, self._complete_pod, namespace, name,
                                                  uid)

    def _container_events(self, pod: dict[str, Any], node: str, failed: bool) -> None:
        for event in container_events(pod, node, failed):
            self.registry.create(self.registry.events, pod["metadata"]["namespace"], event)

    def _complete_pod(self, namespace: str, name: str, uid: str) -> None:
        stored = self.registry.store.get(self.registry.pods, namespace, name)
        if stored is None or stored.uid != uid:
            return
        pod = stored.obj
        now = now_rfc3339()
        status = pod["status"]
        status["phase"] = "Succeeded"
        for cs in status.get("containerStatuses") or ():
            started = (cs.get("state") or {}).get("running", {}).get("startedAt", now)
            cs["state"] = {"terminated": {"exitCode": 0, "reason": "Completed",
                                          "startedAt": started, "finishedAt": now}}
            cs["ready"] = False
            cs["started"] = False
        for c in status.get("conditions") or ():
            if c["type"] in ("Ready", "ContainersReady"):
                c["status"] = "False"
                c["reason"] = "PodCompleted"
        self.registry.update(self.registry.pods, namespace, name, pod, "status")

    def _finish_deletion(self, namespace: str, name: str, uid: str) -> None:
        self._timers.pop(("kill", namespace, name), None)
        stored = self.registry.store.get(self.registry.pods, namespace, name)
        if stored is None or stored.uid != uid:
            return
        try:
            self.registry.delete(self.registry.pods, namespace, name,
                                 {"gracePeriodSeconds": 0, "preconditions": {"uid": uid}})
        except errors.ApiError as exc:
            if exc.code != 404:
                self.log.warning("pod removal failed", pod=f"{namespace}/{name}",
                                 error=exc.message)

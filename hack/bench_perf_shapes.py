"""kube-scheduler's scheduler_perf workloads for preemption, volumes and churn, end to end.

Each scenario repeats one of the workloads Kubernetes' CI runs with ``scheduler_perf``
(``test/integration/scheduler_perf``: ``default_preemption/``, ``volumes/`` and ``misc/``
``performance-config.yaml``), at its size, with its pod, node, volume and churn templates, and
prints our throughput beside the threshold kube-scheduler must reach there (pods/s; absent when
kube sets none for that workload):

==============================================  =====  ==============  ================  =========
scenario (kube's test case / workload)          nodes  initial pods    measured pods     threshold
==============================================  =====  ==============  ================  =========
PreemptionBasic/1000Nodes                        1000  4000 low        1000 high         –
PreemptionAsync/5000Nodes                        5000  20000 low       5000 (churn)      570
Unschedulable/5kNodes/20kInit/10kPods            5000  20000           10000 (churn)     600
SchedulingCSIPVs/5000Nodes_5000Pods              5000  5000 with PV    5000 with PV      100
SchedulingWithMixedChurn/5000Nodes_10000Pods     5000  –               10000 (churn)     710
PreemptionPVs/1000Nodes                          1000  4000 low        1000 high, PV     –
==============================================  =====  ==============  ================  =========

How it runs (as ``bench_scheduler.py e2e``): ``pyscheduler sim up`` (nodes of 4 CPU / 32Gi /
110 pods whose bound pods stay Pending, as scheduler_perf's fake nodes) and ``pyscheduler run``
(the built-in profile unless ``--schedule-fragment`` says otherwise) in their own processes,
on loopback; this process is the benchmark client. The workload's operations run in kube's
order, in namespaces named as kube names them (``namespace-<op index>``):

* **createPods** creates pods from 30 concurrent workers (kube's ``ParallelizeUntil(30)``) and
  waits until all are bound (at most 10 minutes, kube's timeout). With a volume template, every
  pod first gets a PersistentVolume ``<namespace>-vol-<i>`` (CSI source ``ebs.csi.aws.com``,
  volume handle = its name, ``ReadOnlyMany``, 1Gi, ``Retain``, ``claimRef`` naming its claim) and
  a claim ``pvc-<i>`` (``volumeName`` set, annotated ``pv.kubernetes.io/bind-completed``), each
  status then written ``Bound``, as kube's ``CreatePodWithPersistentVolume`` does — except that
  the volume is created before the claim: the embedded cluster runs a PersistentVolume
  controller (scheduler_perf runs none), which would report a bind-completed claim whose volume
  does not exist yet as ``Lost``.
* **churn** runs beside the measured pods and stops with them: ``create`` makes one object per
  template every interval; ``recreate`` (``number: 1``) creates them on one tick and deletes
  them on the next.
* **createNodes** with ``nodeAllocatableStrategy`` (SchedulingCSIPVs): every node has the
  allocatable ``attachable-volumes-csi-ebs.csi.aws.com: 39`` and a CSINode listing driver
  ``ebs.csi.aws.com`` with ``allocatable.count: 39``.

Pods name this scheduler (``schedulerName: pyscheduler``). PreemptionPVs gives its pods kube's
CSI volume template (``pv-csi.yaml``) instead of its in-tree AWS EBS one: in-tree volumes are
migrated to CSI drivers, which is what this scheduler's volume plugins count. A generated name
(``generateName``) that is taken is drawn again, as kube-apiserver does itself.

Priorities come from PriorityClasses (the embedded API server's Priority admission refuses a
pod that sets ``spec.priority`` itself): kube's high-priority templates say ``priority: 10``,
so their pods name the class ``high-priority`` of value 10; the low-priority template sets
none, so those pods have none either (priority 0).

Throughput is measured as scheduler_perf's throughput collector does it: a watch notes every
measured pod (those of the measured namespace) the first time it is seen bound; a 1 s ticker,
started before the measured pods are created, skips ticks until the first binding, drops that
first sample, merges ticks without a binding into the next sample, and stops when a 1 s poll
started after creation sees every measured pod bound. The average of the samples is what
kube compares with its threshold; p50 is kube's (the sorted sample at ceil(n/2)).
Also printed: the overall rate (measured pods over the time from the start of their creation to
the last binding: where all bindings come in one burst, as in PreemptionBasic, the samples say
little), the bindings of each second, the scheduler's CPU seconds per 1000 measured pods (and
the API server's and this client's), the scheduler's peak RSS, and preemption attempts and
victims over the measured phase from the scheduler's ``/metrics``
(``scheduler_preemption_attempts_total``, ``scheduler_preemption_victims``).

Figures only, nothing asserted about time. Every loop is bounded. Usage:

    python hack/bench_perf_shapes.py                      # every scenario
    python hack/bench_perf_shapes.py --scenario PreemptionAsync --scenario SchedulingCSIPVs \\
        --json shapes.json
    python hack/bench_perf_shapes.py --scenario Unschedulable --profile /tmp/unsched.txt

``--scenario`` takes a full name or kube's test-case name (its first part). ``--profile FILE``
records the scheduler with py-spy during the measured phase (collapsed stacks), when py-spy is
installed. ``--scale F`` multiplies node and pod counts, for a quick trial.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import yaml

sys.path.insert(0, str(Path(__file__).parent))
from bench_apiserver import (  # noqa: E402
    Client,
    cpu_seconds,
    interrupt,
    rss_kib,
    run_pool,
    run_scheduler,
    sim_up,
)

Obj = dict[str, Any]

SCHEDULER = "pyscheduler"
HIGH_PRIORITY_CLASS = "high-priority"
HIGH_PRIORITY = 10  # kube's pod-high-priority*.yaml: priority: 10
CSI_DRIVER = "ebs.csi.aws.com"
CSI_LIMIT = 39
WORKERS = 30  # kube's CreatePod: workqueue.ParallelizeUntil(ctx, 30, ...)
WAIT_SECONDS = 600.0  # kube's waitUntilPodsScheduledInNamespace: 10 minutes
SAMPLE_SECONDS = 1.0  # kube's throughputSampleInterval

# -- kube's templates (test/integration/scheduler_perf/templates), as pods of this scheduler ---


def _container(image: str, cpu: str, memory: str = "500Mi", limits: bool = True,
               ) -> Obj:
    requests = {"cpu": cpu, "memory": memory}
    resources: Obj = {"requests": requests}
    if limits:
        resources["limits"] = dict(requests)
    return {"name": "pause", "image": image, "ports": [{"containerPort": 80}],
            "resources": resources}


def _pod(spec: Obj, generate_name: str = "pod-") -> Obj:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": generate_name},
            "spec": {"schedulerName": SCHEDULER, **spec}}


POD_TEMPLATES: dict[str, Callable[[], Obj]] = {
    # makeBasePod (testutils.MakePodSpec): the template of createPods without podTemplatePath.
    "base": lambda: _pod({"containers": [_container("registry.k8s.io/pause:3.10", "100m")]}),
    "pod-default.yaml": lambda: _pod(
        {"containers": [_container("registry.k8s.io/pause:3.10.1", "100m")]}),
    "pod-low-priority.yaml": lambda: _pod(
        {"terminationGracePeriodSeconds": 0,
         "containers": [_container("registry.k8s.io/pause:3.10", "900m")]}),
    "pod-high-priority.yaml": lambda: _pod(
        {"priorityClassName": HIGH_PRIORITY_CLASS,
         "containers": [_container("registry.k8s.io/pause:3.10", "3000m")]}),
    "pod-high-priority-large-cpu.yaml": lambda: _pod(
        {"priorityClassName": HIGH_PRIORITY_CLASS,
         "containers": [_container("registry.k8s.io/pause:3.10.1", "9", limits=False)]},
        "pod-h-"),
}


def pv_csi(namespace: str, i: int) -> Obj:
    """pv-csi.yaml through kube's volume factory, pre-bound to ``pvc-<i>``."""
    name = f"{namespace}-vol-{i}"
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
            "spec": {"accessModes": ["ReadOnlyMany"], "capacity": {"storage": "1Gi"},
                     "csi": {"driver": CSI_DRIVER, "volumeHandle": name},
                     "persistentVolumeReclaimPolicy": "Retain",
                     "claimRef": {"kind": "PersistentVolumeClaim", "namespace": namespace,
                                  "name": f"pvc-{i}", "apiVersion": "v1"}}}


def pvc(namespace: str, i: int) -> Obj:
    """pvc.yaml, bound to its volume."""
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": f"pvc-{i}", "namespace": namespace,
                         "annotations": {"pv.kubernetes.io/bind-completed": "true"}},
            "spec": {"accessModes": ["ReadOnlyMany"],
                     "resources": {"requests": {"storage": "1Gi"}},
                     "volumeName": f"{namespace}-vol-{i}"}}


# churn/node-default.yaml (capacity pods: "0"; kube-apiserver defaults allocatable to it).
CHURN_NODE: Obj = {"apiVersion": "v1", "kind": "Node",
                   "metadata": {"generateName": "node-churn-"},
                   "status": {"capacity": {"pods": "0"}, "allocatable": {"pods": "0"},
                              "conditions": [{"status": "True", "type": "Ready"}],
                              "phase": "Running"}}
# churn/service-default.yaml
CHURN_SERVICE: Obj = {"apiVersion": "v1", "kind": "Service",
                      "metadata": {"generateName": "service-churn-"},
                      "spec": {"selector": {"app": "foo"}, "ports": [
                          {"protocol": "TCP", "port": 8080, "targetPort": 8080}]}}


@dataclass(frozen=True)
class Churn:
    mode: str  # "create" | "recreate"
    templates: tuple[str, ...]  # pod template names, or "node" / "service"
    interval_ms: int
    number: int = 0  # recreate: objects per template kept in turn (kube's op.Number)


@dataclass(frozen=True)
class CreatePods:
    count: int
    template: str
    volumes: bool = False


@dataclass(frozen=True)
class Scenario:
    name: str
    nodes: int
    init: CreatePods | None
    measure: CreatePods
    churn: Churn | None = None
    csi_nodes: bool = False
    threshold: float | None = None
    source: str = ""
    notes: str = ""
    preemption: bool = False

    @property
    def test_case(self) -> str:
        return self.name.split("/", 1)[0]

    def namespaces(self) -> tuple[str | None, str | None, str]:
        """kube's ``namespace-<op index>`` for the init pods, the churn and the measured pods
        (op 0 creates the nodes)."""
        index = 1
        init = churn = None
        if self.init is not None:
            init = f"namespace-{index}"
            index += 1
        if self.churn is not None:
            churn = f"namespace-{index}"
            index += 1
        return init, churn, f"namespace-{index}"


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("PreemptionBasic/1000Nodes", 1000,
             CreatePods(4000, "pod-low-priority.yaml"),
             CreatePods(1000, "pod-high-priority.yaml"),
             source="default_preemption", preemption=True,
             notes="kube: labels performance, short; no threshold"),
    Scenario("PreemptionAsync/5000Nodes", 5000,
             CreatePods(20000, "pod-low-priority.yaml"),
             CreatePods(5000, "pod-default.yaml"),
             churn=Churn("create", ("pod-high-priority.yaml",), 200),
             threshold=570, source="default_preemption", preemption=True),
    Scenario("Unschedulable/5kNodes/20kInit/10kPods", 5000,
             CreatePods(20000, "base"),
             CreatePods(10000, "pod-default.yaml"),
             churn=Churn("create", ("pod-high-priority-large-cpu.yaml",), 200),
             threshold=600, source="default_preemption", preemption=True),
    Scenario("SchedulingCSIPVs/5000Nodes_5000Pods", 5000,
             CreatePods(5000, "base", volumes=True),
             CreatePods(5000, "base", volumes=True),
             csi_nodes=True, threshold=100, source="volumes"),
    Scenario("SchedulingWithMixedChurn/5000Nodes_10000Pods", 5000, None,
             CreatePods(10000, "pod-default.yaml"),
             churn=Churn("recreate", ("node", "pod-high-priority-large-cpu.yaml", "service"),
                         1000, number=1),
             threshold=710, source="misc", preemption=True),
    Scenario("PreemptionPVs/1000Nodes", 1000,
             CreatePods(4000, "pod-low-priority.yaml"),
             CreatePods(1000, "pod-high-priority.yaml", volumes=True),
             source="volumes", preemption=True,
             notes="kube's PV template is in-tree AWS EBS (pv-aws.yaml); here the CSI one "
                   "(in-tree volumes are migrated to CSI, which is what this scheduler "
                   "counts); no threshold in kube"),
)


def select(names: list[str] | None) -> list[Scenario]:
    if not names:
        return list(SCENARIOS)
    chosen: list[Scenario] = []
    for wanted in names:
        found = [s for s in SCENARIOS if wanted in (s.name, s.test_case)]
        if not found:
            raise SystemExit(f"unknown scenario {wanted!r}; known: "
                             + ", ".join(s.name for s in SCENARIOS))
        chosen += [s for s in found if s not in chosen]
    return chosen


def scaled(s: Scenario, factor: float) -> Scenario:
    if factor == 1.0:
        return s

    def n(count: int) -> int:
        return max(1, round(count * factor))

    return replace(s, name=f"{s.name} (x{factor:g})", nodes=n(s.nodes),
                   init=replace(s.init, count=n(s.init.count)) if s.init else None,
                   measure=replace(s.measure, count=n(s.measure.count)))


# -- the benchmark client --------------------------------------------------------------------


class Api:
    """The few API calls the workloads make, on :class:`bench_apiserver.Client`."""

    def __init__(self, client: Client) -> None:
        self.c = client

    async def create(self, path: str, body: Obj, ok: tuple[int, ...] = (201,)) -> Obj:
        generated = "name" not in body["metadata"] and "generateName" in body["metadata"]
        for attempt in range(8):  # kube's Create...WithRetries retries on server errors
            status, resp = await self.c.request("POST", path, body)
            if status in ok:
                return orjson.loads(resp) if resp else {}
            if status == 409 and generated:
                # A generated name that is taken: kube-apiserver draws another one itself
                # (RetryGenerateName, GA in 1.32); the embedded server answers 409.
                continue
            if status < 500 and status != 429:
                break
            await asyncio.sleep(0.1 * (attempt + 1))
        raise RuntimeError(f"POST {path} failed: {status} {resp[:300]!r}")

    async def delete(self, path: str) -> None:
        status, resp = await self.c.request("DELETE", path)
        if status not in (200, 202, 404):
            raise RuntimeError(f"DELETE {path} failed: {status} {resp[:300]!r}")

    async def merge_patch(self, path: str, body: Obj) -> None:
        async with self.c.session.patch(
                self.c.base + path, data=orjson.dumps(body),
                headers={"Content-Type": "application/merge-patch+json"}) as resp:
            if resp.status != 200:
                raise RuntimeError(f"PATCH {path} failed: {resp.status} "
                                   f"{(await resp.read())[:300]!r}")


class PodFollower:
    """One watch on every pod: the first time each pod of a followed namespace is seen bound
    (kube's collector: old pod without nodeName, new one with), and when."""

    def __init__(self, c: Client, namespaces: list[str]) -> None:
        self.c = c
        self.bound: dict[str, set[str]] = {ns: set() for ns in namespaces}
        self.times: dict[str, list[float]] = {ns: [] for ns in namespaces}
        self.rv = ""
        self.reconnects = 0

    def count(self, namespace: str) -> int:
        return len(self.bound[namespace])

    def _note(self, obj: Obj, now: float) -> None:
        meta = obj.get("metadata") or {}
        ns = meta.get("namespace")
        if ns in self.bound and (obj.get("spec") or {}).get("nodeName"):
            name = str(meta.get("name"))
            if name not in self.bound[ns]:
                self.bound[ns].add(name)
                self.times[ns].append(now)

    async def relist(self) -> None:
        """Start over from a list (kube's informer would): bound pods not seen yet count now."""
        status, body = await self.c.request("GET", "/api/v1/pods")
        doc = orjson.loads(body)
        now = time.monotonic()
        for obj in doc.get("items") or ():
            self._note(obj, now)
        self.rv = doc["metadata"]["resourceVersion"]

    async def run(self, stop: asyncio.Event) -> None:
        if not self.rv:
            await self.relist()
        while not stop.is_set():
            url = (f"{self.c.base}/api/v1/pods?watch=true&resourceVersion={self.rv}"
                   f"&allowWatchBookmarks=true&timeoutSeconds=500")
            try:
                async with self.c.session.get(url) as resp:
                    async for line in resp.content:
                        ev = orjson.loads(line)
                        obj = ev.get("object") or {}
                        if ev.get("type") == "ERROR":
                            await self.relist()
                            break
                        rv = (obj.get("metadata") or {}).get("resourceVersion")
                        if rv:
                            self.rv = rv
                        if ev.get("type") in ("ADDED", "MODIFIED"):
                            self._note(obj, time.monotonic())
            except (aiohttp.ClientError, asyncio.TimeoutError, ValueError):
                await asyncio.sleep(0.2)
            self.reconnects += 1


class ThroughputCollector:
    """scheduler_perf's throughputCollector over the measured namespace."""

    def __init__(self, follower: PodFollower, namespace: str) -> None:
        self.follower = follower
        self.namespace = namespace
        self.samples: list[float] = []
        self.interval_errors: list[float] = []

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        started = False
        last_count = 0
        last_time = loop.time()
        skipped = 0
        next_tick = loop.time() + SAMPLE_SECONDS
        for _ in range(int(2 * WAIT_SECONDS / SAMPLE_SECONDS) + 10):  # bounded; cancelled first
            await asyncio.sleep(max(0.0, next_tick - loop.time()))
            next_tick += SAMPLE_SECONDS
            now = loop.time()
            scheduled = self.follower.count(self.namespace)
            if scheduled == 0:
                continue
            if not started:  # the first sample is skipped (an outlier)
                started = True
                last_count, last_time = scheduled, now
                continue
            new = scheduled - last_count
            if new == 0:
                skipped += 1
                continue
            duration = now - last_time
            expected = SAMPLE_SECONDS * (skipped + 1)
            self.interval_errors.append((duration - expected) / expected * 100)
            self.samples += [new / duration] * (skipped + 1)
            last_count, last_time, skipped = scheduled, now, 0

    def summary(self) -> Obj:
        if not self.samples:
            return {"samples": 0}
        s = sorted(self.samples)
        n = len(s)

        def perc(p: int) -> float:
            return s[math.ceil(n * p / 100) - 1]

        return {"samples": n, "average": sum(s) / n, "p50": perc(50), "p90": perc(90),
                "p99": perc(99),
                "worst_tick_error_percent": max(self.interval_errors, key=abs, default=0.0)}


class ChurnRunner:
    """kube's churn op: bounded, stopped with the measured pods."""

    def __init__(self, api: Api, churn: Churn, namespace: str) -> None:
        self.api = api
        self.churn = churn
        self.namespace = namespace
        self.created = 0
        self.deleted = 0
        self.failed = 0

    def _target(self, template: str) -> tuple[str, Obj]:
        if template == "node":
            return "/api/v1/nodes", CHURN_NODE
        if template == "service":
            return f"/api/v1/namespaces/{self.namespace}/services", CHURN_SERVICE
        return f"/api/v1/namespaces/{self.namespace}/pods", POD_TEMPLATES[template]()

    async def _create(self, template: str) -> str:
        path, body = self._target(template)
        try:
            obj = await self.api.create(path, body)
        except RuntimeError:
            self.failed += 1
            return ""  # kube's churn ignores a failed create too
        self.created += 1
        return str(obj["metadata"]["name"])

    async def _delete(self, template: str, name: str) -> str:
        path, _ = self._target(template)
        try:
            await self.api.delete(f"{path}/{name}")
            self.deleted += 1
        except RuntimeError:
            self.failed += 1
        return ""

    async def run(self, stop: asyncio.Event, max_seconds: float) -> None:
        loop = asyncio.get_running_loop()
        interval = self.churn.interval_ms / 1000
        slots: list[list[str]] = [[""] * max(self.churn.number, 1)
                                  for _ in self.churn.templates]
        next_tick = loop.time() + interval
        for count in range(int(max_seconds / interval) + 1):
            try:
                await asyncio.wait_for(stop.wait(), max(0.0, next_tick - loop.time()))
                return
            except asyncio.TimeoutError:
                pass
            next_tick += interval
            if self.churn.mode == "create":
                for template in self.churn.templates:
                    await self._create(template)
                if self.churn.number and count + 1 >= self.churn.number:
                    return
            else:  # recreate: delete what the slot holds, else create into it
                slot = count % self.churn.number
                for i, template in enumerate(self.churn.templates):
                    name = slots[i][slot]
                    slots[i][slot] = (await self._delete(template, name) if name
                                      else await self._create(template))


def _per_second(times: list[float], start: float) -> list[int]:
    counts = [0] * (int(max(times) - start) + 1 if times else 0)
    for t in times:
        counts[int(t - start)] += 1
    return counts


def _metric_values(text: str) -> dict[str, float]:
    """Samples of the metrics this benchmark reads, summed over labels except ``result``."""
    wanted = ("scheduler_preemption_attempts_total", "scheduler_preemption_victims_sum",
              "scheduler_preemption_victims_count", "scheduler_schedule_attempts_total")
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line.startswith(wanted):
            continue
        name_labels, _, value = line.rpartition(" ")
        name = name_labels.split("{", 1)[0]
        if name == "scheduler_schedule_attempts_total" and 'result="' in name_labels:
            name += "/" + name_labels.split('result="', 1)[1].split('"', 1)[0]
        out[name] = out.get(name, 0.0) + float(value)
    return out


async def _metrics(port: int) -> dict[str, float]:
    async with aiohttp.ClientSession() as s:
        async with s.get(f"http://127.0.0.1:{port}/metrics") as r:
            return _metric_values(await r.text())


async def _wait_ready(port: int, sched: subprocess.Popen[bytes]) -> None:
    async with aiohttp.ClientSession() as s:
        for _ in range(600):
            if sched.poll() is not None:
                raise RuntimeError(f"the scheduler exited ({sched.returncode}) before ready")
            with contextlib.suppress(aiohttp.ClientError):
                async with s.get(f"http://127.0.0.1:{port}/readyz") as r:
                    if r.status == 200:
                        return
            await asyncio.sleep(0.1)
    raise RuntimeError("the scheduler was not ready within 60 s")


async def create_pods(api: Api, namespace: str, op: CreatePods) -> None:
    """kube's createPodsRapidly: 30 workers; with volumes, each pod's volume and claim first."""
    template = POD_TEMPLATES[op.template]
    pods_path = f"/api/v1/namespaces/{namespace}/pods"

    async def one(i: int) -> None:
        pod = template()
        if op.volumes:
            pv = await api.create("/api/v1/persistentvolumes", pv_csi(namespace, i))
            await api.create(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims",
                             pvc(namespace, i))
            # As kube's benchmark writes them (it runs no PersistentVolume controller).
            await api.merge_patch(
                f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/pvc-{i}/status",
                {"status": {"phase": "Bound"}})
            await api.merge_patch(f"/api/v1/persistentvolumes/{pv['metadata']['name']}/status",
                                  {"status": {"phase": "Bound"}})
            pod["spec"]["volumes"] = [{"name": "vol",
                                       "persistentVolumeClaim": {"claimName": f"pvc-{i}"}}]
        await api.create(pods_path, pod)

    await run_pool(op.count, WORKERS, one)


async def wait_bound(follower: PodFollower, namespace: str, count: int,
                     timeout: float = WAIT_SECONDS) -> bool:
    """kube's waitUntilPodsScheduledInNamespace: a poll every second, immediately first."""
    deadline = time.monotonic() + timeout
    while True:
        if follower.count(namespace) >= count:
            return True
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(SAMPLE_SECONDS)


async def setup_cluster(api: Api, scenario: Scenario, namespaces: list[str]) -> None:
    for ns in namespaces:
        await api.create("/api/v1/namespaces", {"metadata": {"name": ns}}, (201, 409))
    await api.create("/apis/scheduling.k8s.io/v1/priorityclasses", {
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": HIGH_PRIORITY_CLASS}, "value": HIGH_PRIORITY}, (201, 409))
    if scenario.csi_nodes:
        async def csinode(i: int) -> None:
            name = f"node-{i}"
            await api.create("/apis/storage.k8s.io/v1/csinodes", {
                "apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
                "metadata": {"name": name, "annotations": {
                    "storage.alpha.kubernetes.io/migrated-plugins": ""}},
                "spec": {"drivers": [{"name": CSI_DRIVER, "nodeID": name,
                                      "allocatable": {"count": CSI_LIMIT}}]}})
        await run_pool(scenario.nodes, WORKERS, csinode)


class PySpy:
    """py-spy recording the scheduler (collapsed stacks), when asked and installed."""

    def __init__(self, path: Path | None, pid: int) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        exe = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        if path is not None and Path(exe).exists():
            self.proc = subprocess.Popen(
                [exe, "record", "--pid", str(pid), "--rate", "100", "--format", "raw",
                 "--output", str(path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        elif path is not None:
            print("--profile: py-spy not found (pip install py-spy)", file=sys.stderr)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()


async def run_workload(scenario: Scenario, workdir: Path, sched_pid: int, server_pid: int,
                       port: int, sched: subprocess.Popen[bytes],
                       profile: Path | None) -> Obj:
    c = Client(workdir / "kubeconfig", WORKERS + 4)
    api = Api(c)
    init_ns, churn_ns, measure_ns = scenario.namespaces()
    followed = [ns for ns in (init_ns, measure_ns) if ns]
    stop_watch = asyncio.Event()
    follower = PodFollower(c, followed)
    tasks: list[asyncio.Task[Any]] = []
    result: Obj = {"scenario": scenario.name, "nodes": scenario.nodes,
                   "initial_pods": scenario.init.count if scenario.init else 0,
                   "measured_pods": scenario.measure.count,
                   "kube_threshold": scenario.threshold, "notes": scenario.notes}
    try:
        t = time.monotonic()
        await setup_cluster(api, scenario, [ns for ns in (init_ns, churn_ns, measure_ns) if ns])
        await _wait_ready(port, sched)
        await follower.relist()
        tasks.append(asyncio.create_task(follower.run(stop_watch)))
        result["setup_seconds"] = time.monotonic() - t

        if scenario.init is not None and init_ns:
            t = time.monotonic()
            await create_pods(api, init_ns, scenario.init)
            if not await wait_bound(follower, init_ns, scenario.init.count):
                raise RuntimeError(f"initial pods: only {follower.count(init_ns)}/"
                                   f"{scenario.init.count} bound in {WAIT_SECONDS:.0f} s")
            result["initial_seconds"] = time.monotonic() - t

        stop_churn = asyncio.Event()
        churn = None
        if scenario.churn is not None and churn_ns:
            churn = ChurnRunner(api, scenario.churn, churn_ns)
            tasks.append(asyncio.create_task(churn.run(stop_churn, 2 * WAIT_SECONDS)))

        metrics0 = await _metrics(port)
        cpu0 = (cpu_seconds(sched_pid), cpu_seconds(server_pid), time.process_time())
        spy = PySpy(profile, sched_pid)
        collector = ThroughputCollector(follower, measure_ns)
        collect = asyncio.create_task(collector.run())
        t0 = time.monotonic()
        await create_pods(api, measure_ns, scenario.measure)
        created = time.monotonic() - t0
        complete = await wait_bound(follower, measure_ns, scenario.measure.count)
        collect.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await collect
        elapsed = time.monotonic() - t0
        spy.stop()
        stop_churn.set()
        cpu1 = (cpu_seconds(sched_pid), cpu_seconds(server_pid), time.process_time())
        metrics1 = await _metrics(port)
        measured = follower.count(measure_ns)
        times = follower.times[measure_ns]
        per_1000 = [(b - a) / max(measured, 1) * 1000 for a, b in zip(cpu0, cpu1)]
        delta = {k: metrics1.get(k, 0.0) - metrics0.get(k, 0.0)
                 for k in set(metrics0) | set(metrics1)}
        throughput = collector.summary()
        result.update({
            "complete": complete,
            "scheduled": measured,
            "throughput": throughput,
            "ratio_to_threshold": (throughput["average"] / scenario.threshold
                                   if scenario.threshold and "average" in throughput
                                   else None),
            "overall_pods_per_second": measured / (max(times) - t0) if times else 0.0,
            # Measured pods bound in each second from the start of their creation.
            "bindings_per_second": _per_second(times, t0),
            "creation_seconds": created,
            "measured_seconds": elapsed,
            "scheduler_cpu_seconds_per_1000_pods": per_1000[0],
            "api_server_cpu_seconds_per_1000_pods": per_1000[1],
            "bench_client_cpu_seconds_per_1000_pods": per_1000[2],
            "scheduler_peak_rss_mib": rss_kib(sched_pid)[1] / 1024,
            "preemption_attempts": delta.get("scheduler_preemption_attempts_total", 0.0),
            "preemption_victims": delta.get("scheduler_preemption_victims_sum", 0.0),
            "preemptions_with_victims": delta.get("scheduler_preemption_victims_count", 0.0),
            "schedule_attempts": {k.split("/", 1)[1]: v for k, v in delta.items()
                                  if k.startswith("scheduler_schedule_attempts_total/")},
            "watch_reconnects": follower.reconnects,
        })
        if churn is not None:
            result["churn"] = {"created": churn.created, "deleted": churn.deleted,
                               "failed": churn.failed}
        if profile is not None:
            result["profile"] = str(profile)
        return result
    finally:
        stop_watch.set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await c.session.close()


def run_scenario(scenario: Scenario, schedule_fragment: str | None,
                 profile: Path | None) -> Obj:
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        pool: Obj = {"name": "node", "count": scenario.nodes, "cpu": "4", "memory": "32Gi",
                     "pods": 110}
        if scenario.csi_nodes:
            pool["extendedResources"] = {f"attachable-volumes-csi-{CSI_DRIVER}": str(CSI_LIMIT)}
        (workdir / "cluster.yaml").write_text(yaml.safe_dump(
            {"nodePools": [pool], "kubelet": {"runPods": False}}))
        port = 10300 + os.getpid() % 1000
        (workdir / "sched.yaml").write_text(yaml.safe_dump({
            "leaderElection": {"enabled": False}, "metricsAddress": f"127.0.0.1:{port}",
            "logLevel": os.environ.get("BENCH_SCHEDULER_LOG_LEVEL", "warning"),
            "scheduleFragment": schedule_fragment}))
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        t = time.monotonic()
        sim = sim_up(workdir, workdir / "cluster.yaml", "--watch-history", "200000",
                     "--no-cloud", env=env)
        sched = None
        try:
            sim_seconds = time.monotonic() - t
            sched = run_scheduler(workdir / "kubeconfig", workdir / "sched.yaml", env)
            try:
                import uvloop
                runner: Callable[[Awaitable[Obj]], Obj] = uvloop.run  # type: ignore[assignment]
            except ImportError:
                runner = asyncio.run  # type: ignore[assignment]
            result = runner(run_workload(scenario, workdir, sched.pid, sim.pid, port, sched,
                                         profile))
            result["cluster_start_seconds"] = sim_seconds
            result["schedule_fragment"] = schedule_fragment
            return result
        finally:
            interrupt(sched, sim)


# -- output ----------------------------------------------------------------------------------


def _f(value: Any, digits: int = 0) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def print_table(results: list[Obj]) -> None:
    head = ("scenario", "nodes/init/measured", "pods/s avg", "p50", "kube threshold",
            "ratio", "overall pods/s", "sched CPU s/1000", "preemptions/victims", "complete")
    rows = [head]
    for r in results:
        if "error" in r:
            rows.append((r["scenario"], "", "error: " + r["error"][:60], *[""] * 7))
            continue
        tp = r["throughput"]
        rows.append((
            r["scenario"], f"{r['nodes']}/{r['initial_pods']}/{r['measured_pods']}",
            _f(tp.get("average")), _f(tp.get("p50")), _f(r["kube_threshold"]),
            _f(r["ratio_to_threshold"], 2), _f(r["overall_pods_per_second"]),
            _f(r["scheduler_cpu_seconds_per_1000_pods"], 2),
            f"{r['preemption_attempts']:.0f}/{r['preemption_victims']:.0f}",
            "yes" if r["complete"] else f"NO ({r['scheduled']})"))
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(head))]
    for n, row in enumerate(rows):
        print("  ".join(str(v).ljust(w) for v, w in zip(row, widths)))
        if n == 0:
            print("  ".join("-" * w for w in widths))
    for r in results:
        if "error" in r:
            continue
        tp = r["throughput"]
        print(f"\n== {r['scenario']}: {tp.get('samples', 0)} samples, p90 {_f(tp.get('p90'))}, "
              f"p99 {_f(tp.get('p99'))}; {r['scheduled']} measured pods bound in "
              f"{r['measured_seconds']:.1f} s (created in {r['creation_seconds']:.1f} s, "
              f"overall {r['overall_pods_per_second']:.0f} pods/s)")
        print(f"   measured pods bound per second from creation start: "
              f"{r['bindings_per_second']}")
        print(f"   CPU s per 1000 measured pods: scheduler "
              f"{r['scheduler_cpu_seconds_per_1000_pods']:.2f}, API server "
              f"{r['api_server_cpu_seconds_per_1000_pods']:.2f}, client "
              f"{r['bench_client_cpu_seconds_per_1000_pods']:.2f}; scheduler peak RSS "
              f"{r['scheduler_peak_rss_mib']:.0f} MiB; attempts {r['schedule_attempts']}")
        if r.get("preemption_attempts") or r.get("preemption_victims"):
            print(f"   preemption: {r['preemption_attempts']:.0f} attempts, "
                  f"{r['preemptions_with_victims']:.0f} with victims, "
                  f"{r['preemption_victims']:.0f} victims")
        if "churn" in r:
            print(f"   churn: {r['churn']}")
        extra = {k: r[k] for k in ("cluster_start_seconds", "setup_seconds", "initial_seconds",
                                   "watch_reconnects") if k in r}
        print("   " + ", ".join(f"{k} {_f(v, 1) if isinstance(v, float) else v}"
                                for k, v in extra.items()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", action="append", default=None,
                        help="a scenario's name or its kube test case (repeatable; default "
                             "all): " + ", ".join(s.name for s in SCENARIOS))
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    parser.add_argument("--schedule-fragment", default="none",
                        help="the scheduler's scheduleFragment (default none: the built-in "
                             "profile, kube-scheduler's default plugins)")
    parser.add_argument("--scale", type=float, default=1.0,
                        help="multiply node and pod counts (a quick trial; figures are "
                             "kube's only at 1)")
    parser.add_argument("--profile", type=Path, default=None,
                        help="record the scheduler with py-spy during the measured phase "
                             "(collapsed stacks in FILE; with several scenarios, FILE.<n>)")
    args = parser.parse_args()
    scenarios = [scaled(s, args.scale) for s in select(args.scenario)]
    fragment = None if args.schedule_fragment == "none" else args.schedule_fragment
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores; scenarios: "
          + ", ".join(s.name for s in scenarios), flush=True)
    results = []
    for n, scenario in enumerate(scenarios):
        profile = args.profile
        if profile is not None and len(scenarios) > 1:
            profile = profile.with_name(f"{profile.name}.{n}")
        t = time.monotonic()
        try:
            result = run_scenario(scenario, fragment, profile)
        except RuntimeError as exc:
            result = {"scenario": scenario.name, "error": str(exc)}
        result["wall_seconds"] = time.monotonic() - t
        tp = result.get("throughput") or {}
        print(f"{scenario.name}: {_f(tp.get('average'))} pods/s (p50 {_f(tp.get('p50'))}; "
              f"kube's threshold {_f(scenario.threshold)})"
              + (f" ERROR {result['error']}" if "error" in result else ""), flush=True)
        results.append(result)
    print()
    print_table(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
